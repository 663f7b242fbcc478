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
    /// For `start_late`: the config and layout of the cluster `build_late` made, and the
    /// listeners of the nodes not started yet (bound, so their ports stay theirs).
    late: Option<(ClusterConfig, Vec<RegionSpec>, Vec<TcpListener>)>,
    /// For `restart`: the config and layout of the cluster `build` made last.
    built: Option<(ClusterConfig, Vec<RegionSpec>)>,
}

impl InProcess {
    pub fn new() -> InProcess {
        InProcess {
            timeout: test_config(&[]).op_timeout,
            late: None,
            built: None,
        }
    }
}

/// Starts `me` on `listener` in this thread (a late node does not wait for anyone).
pub fn start_node(
    config: &ClusterConfig,
    listener: TcpListener,
    me: NodeId,
    layout: &[RegionSpec],
) -> TcpNode {
    let regions = layout
        .iter()
        .map(|s| Region::new(*s).expect("valid region"))
        .collect();
    TcpNode::start_on(listener, config.clone(), me, regions).expect("node starts")
}

impl Fabric for InProcess {
    type Node = TcpNode;

    fn name(&self) -> String {
        "tcp(in-process, loopback)".into()
    }

    fn build(&mut self, n: usize, layout: &[RegionSpec]) -> Vec<TcpNode> {
        let (ls, addrs) = listeners(n);
        let config = test_config(&addrs);
        self.built = Some((config.clone(), layout.to_vec()));
        start_cluster(&config, ls, layout)
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

    /// A new `TcpNode` under the victim's id, on its old port (the crashed one let it go).
    fn restart(&mut self, nodes: &mut [TcpNode], victim: NodeId) -> Option<u64> {
        let (config, layout) = self.built.as_ref()?;
        let regions = layout
            .iter()
            .map(|s| Region::new(*s).expect("valid region"))
            .collect();
        let node = TcpNode::rejoin(config.clone(), victim, regions).expect("node restarts");
        let incarnation = node.incarnation();
        nodes[victim.index()] = node;
        Some(incarnation)
    }

    fn partition(&mut self, nodes: &mut [TcpNode], a: NodeId, b: NodeId) -> bool {
        nodes[a.index()].silence(b);
        nodes[b.index()].silence(a);
        true
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn build_late(
        &mut self,
        n: usize,
        started: usize,
        layout: &[RegionSpec],
    ) -> Option<Vec<TcpNode>> {
        let (mut ls, addrs) = listeners(n);
        let mut config = test_config(&addrs);
        config.late = (started..n).map(|i| NodeId(i as u32)).collect();
        // The late nodes' listeners stay bound (their ports stay theirs) but unserved until
        // they start: founders never dial late nodes, late nodes dial in.
        let rest = ls.split_off(started);
        let nodes = start_cluster(&config, ls, layout);
        self.late = Some((config, layout.to_vec(), rest));
        Some(nodes)
    }

    fn start_late(&mut self, nodes: &mut Vec<TcpNode>) {
        let Some((config, layout, rest)) = &mut self.late else {
            panic!("start_late without build_late");
        };
        let listener = rest.remove(0);
        let me = NodeId(nodes.len() as u32);
        nodes.push(start_node(config, listener, me, layout));
    }
}
