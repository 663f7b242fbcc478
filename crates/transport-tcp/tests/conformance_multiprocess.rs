//! The whole conformance suite over TCP on loopback, with every node in its own OS process.
//!
//! The test binary re-executes itself once per node (see `common::procs`); a crash is
//! `kill -9` of a node's process.
mod common;

squall_transport::conformance_tests!(common::procs::MultiProcess::new());

/// Entry point of the node processes this binary spawns; does nothing when run by hand.
#[test]
#[ignore = "entry point of the node processes that the other tests spawn"]
fn child_node_process() {
    if let Ok(addr) = std::env::var("SQUALL_TCP_CTRL") {
        common::procs::child_main(&addr);
    }
}

/// The harness really puts each node in its own process, and ops travel between them: a CAS
/// from node 0 lands in node 1's memory, which only node 1's process writes.
#[test]
fn nodes_run_in_their_own_processes() {
    use squall_transport::{
        Event, FailureCause, NodeId, RegionId, RegionSpec, RemoteAddr, Transport,
    };
    let r = RegionId(0);
    let mut nodes = common::procs::spawn_cluster(2, &[RegionSpec::new(r, 64)], |_| {});
    let me = std::process::id();
    assert!(nodes.iter().all(|n| n.pid() != me));
    assert_ne!(nodes[0].pid(), nodes[1].pid());
    let op = nodes[0]
        .compare_and_swap(NodeId(1), RemoteAddr::new(r, 8), 0, 77)
        .expect("posted");
    let mut events = [Event::PeerFailed {
        peer: NodeId(0),
        cause: FailureCause::Local,
    }; 4];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let n = nodes[0].poll(&mut events);
        if events[..n]
            .iter()
            .any(|e| matches!(e, Event::Completion(c) if c.op == op && c.result == Ok(0)))
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "CAS did not complete");
        nodes[0].wait(std::time::Duration::from_millis(1));
    }
    assert_eq!(nodes[1].region(r).expect("region").load(1), 77);
}
