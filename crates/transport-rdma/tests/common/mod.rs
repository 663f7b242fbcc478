//! Clusters of RDMA nodes on the mock NIC, connected through the real TCP side channel.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use squall_transport::conformance::{Fabric, Slot, Stalled, run_on_threads};
use squall_transport::{NodeId, RegionSpec};
use squall_transport_rdma::mock::{MockFabric, MockNic};
use squall_transport_rdma::{RdmaConfig, RdmaNode};

pub const RETRY: Duration = Duration::from_millis(40);

/// Side-channel listeners on loopback ports the OS chose, with the cluster map naming them.
/// Each listener is held until its node starts on it ([`RdmaNode::connect_on`]), so no other
/// process can take a port between its choice and its use.
pub fn listeners(n: usize) -> (Vec<TcpListener>, BTreeMap<NodeId, SocketAddr>) {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    let addrs = listeners
        .iter()
        .enumerate()
        .map(|(i, l)| (NodeId(i as u32), l.local_addr().expect("addr")))
        .collect();
    (listeners, addrs)
}

pub fn config() -> RdmaConfig {
    RdmaConfig {
        cluster_id: 42,
        sq_depth: 64,
        rq_depth: 16,
        cq_depth: 4096,
        signal_every: 8,
        send_slots: 8,
        max_message_len: 64 * 1024,
        ..RdmaConfig::default()
    }
}

/// Starts `n` nodes (one thread each, as separate processes would) on one mock fabric.
pub fn cluster(
    fabric: &MockFabric,
    cfg: &RdmaConfig,
    n: usize,
    layout: &[RegionSpec],
) -> Vec<RdmaNode<MockNic>> {
    let (listeners, addrs) = listeners(n);
    let nics: Vec<MockNic> = (0..n).map(|i| fabric.nic(NodeId(i as u32))).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = nics
            .into_iter()
            .zip(listeners)
            .enumerate()
            .map(|(i, (nic, l))| {
                let addrs = &addrs;
                s.spawn(move || {
                    RdmaNode::connect_on(l, cfg.clone(), nic, NodeId(i as u32), addrs, layout)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic").expect("connects"))
            .collect()
    })
}

pub struct Mock {
    pub fabric: MockFabric,
}

impl Mock {
    pub fn new() -> Mock {
        Mock {
            fabric: MockFabric::new(RETRY, 1 << 16),
        }
    }
}

impl Fabric for Mock {
    type Node = RdmaNode<MockNic>;

    fn name(&self) -> String {
        "rdma-mock".into()
    }

    fn build(&mut self, n: usize, layout: &[RegionSpec]) -> Vec<Self::Node> {
        self.fabric = MockFabric::new(RETRY, 1 << 16);
        cluster(&self.fabric, &config(), n, layout)
    }

    fn run(
        &mut self,
        nodes: &mut [Self::Node],
        programs: Vec<Slot<'_, Self::Node>>,
    ) -> Result<(), Stalled> {
        run_on_threads(nodes, programs, Duration::from_secs(20))
    }

    fn crash(&mut self, _nodes: &mut [Self::Node], victim: NodeId) {
        self.fabric.crash(victim);
    }

    fn partition(&mut self, _nodes: &mut [Self::Node], a: NodeId, b: NodeId) -> bool {
        self.fabric.partition(a, b);
        true
    }

    fn timeout(&self) -> Duration {
        RETRY
    }
}
