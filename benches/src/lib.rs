//! Shared helpers for Squall's benchmarks: cluster setup and the baselines each figure is
//! reported against.
//!
//! ```
//! let nodes = squall_benches::threaded_pair(4096);
//! assert_eq!(nodes.len(), 2);
//! ```

use squall_transport::{Event, FailureCause, NodeId, RegionId, RegionSpec, Transport};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric, ThreadedNode};

/// The region every benchmark cluster registers.
pub const REGION: RegionId = RegionId(0);

/// Two threaded nodes with one region of `len` bytes each.
///
/// # Panics
/// If `len` is not a positive multiple of 8.
pub fn threaded_pair(len: usize) -> Vec<ThreadedNode> {
    ThreadedFabric::new(ThreadedConfig::default())
        .and_then(|f| f.cluster(2, &[RegionSpec::new(REGION, len)]))
        .expect("a valid benchmark cluster")
}

/// Polls `node` until `want` completions have arrived; returns the last completion's value.
///
/// ```
/// # let mut nodes = squall_benches::threaded_pair(64);
/// use squall_transport::{RemoteAddr, NodeId, Transport};
/// nodes[0].fetch_add(NodeId(1), RemoteAddr::new(squall_benches::REGION, 0), 1).unwrap();
/// assert_eq!(squall_benches::await_completions(&mut nodes[0], 1), 0);
/// ```
pub fn await_completions<T: Transport>(node: &mut T, want: usize) -> u64 {
    let mut events = [Event::PeerFailed {
        peer: NodeId(u32::MAX),
        cause: FailureCause::Local,
    }; 32];
    let (mut got, mut last) = (0, 0);
    while got < want {
        let n = node.poll(&mut events);
        for e in &events[..n] {
            if let Event::Completion(c) = e {
                got += 1;
                last = c.result.unwrap_or(u64::MAX);
            }
        }
    }
    last
}
