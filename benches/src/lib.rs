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

/// The RDMA device the RDMA benchmarks run on: `SQUALL_RDMA_DEVICE`, if set and not empty.
pub fn rdma_device() -> Option<String> {
    std::env::var("SQUALL_RDMA_DEVICE")
        .ok()
        .filter(|d| !d.trim().is_empty())
}

/// Two RDMA nodes on `device` (port `SQUALL_RDMA_PORT`, default 1; GID index
/// `SQUALL_RDMA_GID_INDEX`, default 0), in this process, each with one region of `len` bytes,
/// connected through loopback side channels.
#[cfg(feature = "verbs")]
pub fn rdma_pair(
    device: &str,
    len: usize,
) -> Result<Vec<squall_transport_rdma::RdmaNode<squall_transport_rdma::VerbsNic>>, String> {
    use std::collections::BTreeMap;
    use std::net::TcpListener;

    use squall_transport_rdma::{RdmaConfig, RdmaNode, VerbsNic};

    let env_u8 = |name: &str, default: u8| -> Result<u8, String> {
        match std::env::var(name) {
            Ok(v) => v
                .trim()
                .parse()
                .map_err(|_| format!("{name}={v} is not a number from 0 to 255")),
            Err(_) => Ok(default),
        }
    };
    let cfg = RdmaConfig {
        device: Some(device.to_owned()),
        port: env_u8("SQUALL_RDMA_PORT", 1)?,
        gid_index: env_u8("SQUALL_RDMA_GID_INDEX", 0)?,
        ..RdmaConfig::default()
    };
    let listeners = (0..2)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("side channel: {e}"))?;
    let mut addrs = BTreeMap::new();
    for (i, l) in listeners.iter().enumerate() {
        let addr = l.local_addr().map_err(|e| format!("side channel: {e}"))?;
        addrs.insert(NodeId(i as u32), addr);
    }
    let nics = (0..2)
        .map(|_| VerbsNic::open(&cfg))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let layout = [RegionSpec::new(REGION, len)];
    std::thread::scope(|s| {
        // Each node listens on the listener that chose its port (held since: no other
        // process can take the port in between).
        let handles: Vec<_> = nics
            .into_iter()
            .zip(listeners)
            .enumerate()
            .map(|(i, (nic, l))| {
                let (cfg, addrs, layout) = (&cfg, &addrs, &layout);
                s.spawn(move || {
                    RdmaNode::connect_on(l, cfg.clone(), nic, NodeId(i as u32), addrs, layout)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err("a node panicked while connecting".to_owned()),
            })
            .collect()
    })
}

/// `n` TCP nodes on loopback (`NodeId(0)..NodeId(n)`), one region of `len` bytes each, with
/// timeouts generous enough that a loaded benchmark machine never fails a live peer.
///
/// # Panics
/// If the nodes cannot start (no loopback, bad `len`).
pub fn tcp_cluster(n: usize, len: usize) -> Vec<squall_transport_tcp::TcpNode> {
    use squall_transport::Region;
    use squall_transport_tcp::{ClusterConfig, TcpNode};
    use std::net::TcpListener;
    use std::time::Duration;
    let ls: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind loopback"))
        .collect();
    let addrs: Vec<_> = ls.iter().map(|l| l.local_addr().expect("addr")).collect();
    let mut config = ClusterConfig::new(
        1,
        addrs
            .iter()
            .enumerate()
            .map(|(i, a)| (NodeId(i as u32), *a)),
    );
    config.op_timeout = Duration::from_secs(5);
    config.heartbeat_timeout = Duration::from_secs(5);
    let handles: Vec<_> = ls
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let config = config.clone();
            std::thread::spawn(move || {
                let region = Region::new(RegionSpec::new(REGION, len)).expect("region");
                TcpNode::start_on(l, config, NodeId(i as u32), vec![region]).expect("node starts")
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("start"))
        .collect()
}
