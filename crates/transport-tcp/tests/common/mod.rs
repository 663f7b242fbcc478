//! Test harnesses: clusters of TCP nodes on loopback, and the runner shared by the fabrics.
#![allow(dead_code, unreachable_pub)]

pub mod procs;

use std::net::TcpListener;
use std::time::Duration;

use squall_transport::conformance::{Fabric, Slot, Stalled};
use squall_transport::{NodeId, Region, RegionSpec};
use squall_transport_tcp::{ClusterConfig, TcpNode};

/// The settings every test cluster uses: timeouts short enough for tests, long enough for a
/// loaded 2-core CI machine.
pub fn test_config(addrs: &[std::net::SocketAddr]) -> ClusterConfig {
    let mut c = ClusterConfig::new(
        u64::from(std::process::id()),
        addrs
            .iter()
            .enumerate()
            .map(|(i, a)| (NodeId(i as u32), *a)),
    );
    c.op_timeout = Duration::from_millis(600);
    c.heartbeat_period = Duration::from_millis(50);
    c.heartbeat_timeout = Duration::from_millis(600);
    c.connect_timeout = Duration::from_secs(20);
    c
}

/// Listeners on loopback port 0, and their addresses.
pub fn listeners(n: usize) -> (Vec<TcpListener>, Vec<std::net::SocketAddr>) {
    let ls: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind loopback"))
        .collect();
    let addrs = ls
        .iter()
        .map(|l| l.local_addr().expect("local addr"))
        .collect();
    (ls, addrs)
}

/// Starts a cluster in this process, one start-up thread per node (start blocks until linked).
pub fn start_cluster(
    config: &ClusterConfig,
    listeners: Vec<TcpListener>,
    layout: &[RegionSpec],
) -> Vec<TcpNode> {
    let handles: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let config = config.clone();
            let layout = layout.to_vec();
            std::thread::spawn(move || {
                let regions = layout
                    .iter()
                    .map(|s| Region::new(*s).expect("valid region"))
                    .collect();
                TcpNode::start_on(l, config, NodeId(i as u32), regions)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("start thread").expect("node starts"))
        .collect()
}

/// Runs one program per node on its own thread until all finish: the conformance suite's own
/// runner for real fabrics.
pub use squall_transport::conformance::run_on_threads as run_threads;

/// Every node in this process, linked over real loopback TCP sockets.
pub struct InProcess {
    timeout: Duration,
}

impl InProcess {
    pub fn new() -> InProcess {
        InProcess {
            timeout: test_config(&[]).op_timeout,
        }
    }
}

impl Fabric for InProcess {
    type Node = TcpNode;

    fn name(&self) -> String {
        "tcp(in-process, loopback)".into()
    }

    fn build(&mut self, n: usize, layout: &[RegionSpec]) -> Vec<TcpNode> {
        let (ls, addrs) = listeners(n);
        start_cluster(&test_config(&addrs), ls, layout)
    }

    fn run(
        &mut self,
        nodes: &mut [TcpNode],
        programs: Vec<Slot<'_, TcpNode>>,
    ) -> Result<(), Stalled> {
        run_threads(nodes, programs, Duration::from_secs(30))
    }

    fn crash(&mut self, nodes: &mut [TcpNode], victim: NodeId) {
        nodes[victim.index()].shutdown();
    }

    fn partition(&mut self, nodes: &mut [TcpNode], a: NodeId, b: NodeId) -> bool {
        nodes[a.index()].silence(b);
        nodes[b.index()].silence(a);
        true
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }
}
