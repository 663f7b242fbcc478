//! The threaded fabric's fault injection beyond the conformance suite.

use std::time::{Duration, Instant};

use squall_transport::conformance::drain;
use squall_transport::{
    Event, FailureCause, LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Transport,
};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};

const R: RegionId = RegionId(0);

#[test]
fn heal_applies_held_ops_in_order_and_completes_them() {
    let fabric = ThreadedFabric::new(ThreadedConfig {
        op_timeout: Duration::from_secs(5),
        ..Default::default()
    })
    .expect("valid");
    let mut nodes = fabric
        .cluster(2, &[RegionSpec::new(R, 128)])
        .expect("valid");
    let faults = nodes[0].faults();
    faults.partition(NodeId(0), NodeId(1));
    for v in 1..=5u64 {
        nodes[0].region(R).expect("registered").store(v as usize, v);
        let src = LocalSlice::new(R, v as usize * 8, 8);
        nodes[0]
            .write(NodeId(1), src, RemoteAddr::new(R, 0), Signal::Unsignaled)
            .expect("valid");
    }
    let cas = nodes[0]
        .compare_and_swap(NodeId(1), RemoteAddr::new(R, 0), 5, 6)
        .expect("valid");
    // Sources change after posting: held writes captured their bytes at post time.
    nodes[0].region(R).expect("registered").store(5, 99);
    let target = nodes[1].region(R).expect("registered").clone();
    assert_eq!(target.load(0), 0, "held ops must not apply");
    faults.heal(NodeId(0), NodeId(1));
    assert_eq!(target.load(0), 6, "held ops apply in order at heal");
    let mut events = Vec::new();
    drain(&mut nodes[0], |e| events.push(e));
    assert!(
        matches!(events.as_slice(), [Event::Completion(c)] if c.op == cas && c.result == Ok(5)),
        "{events:?}"
    );
}

#[test]
fn crash_is_seen_by_every_peer_once_without_posting() {
    let fabric = ThreadedFabric::new(ThreadedConfig::default()).expect("valid");
    let mut nodes = fabric.cluster(3, &[RegionSpec::new(R, 64)]).expect("valid");
    nodes[0].faults().crash(NodeId(2));
    for (me, node) in nodes.iter_mut().take(2).enumerate() {
        let mut events = Vec::new();
        let start = Instant::now();
        while events.is_empty() && start.elapsed() < Duration::from_secs(5) {
            node.wait(Duration::from_millis(10));
            drain(node, |e| events.push(e));
        }
        drain(node, |e| events.push(e));
        assert_eq!(
            events,
            vec![Event::PeerFailed {
                peer: NodeId(2),
                cause: FailureCause::ConnectionLost
            }],
            "n{me}"
        );
    }
    assert!(
        nodes[2].fence(NodeId(0)).is_err(),
        "a crashed endpoint refuses ops"
    );
}

#[test]
fn wait_wakes_when_a_remote_write_lands() {
    let fabric = ThreadedFabric::new(ThreadedConfig::default()).expect("valid");
    let mut nodes = fabric.cluster(2, &[RegionSpec::new(R, 64)]).expect("valid");
    let mut b = nodes.pop().expect("two nodes");
    let mut a = nodes.pop().expect("two nodes");
    let waiter = std::thread::spawn(move || {
        let start = Instant::now();
        let region = b.region(R).expect("registered").clone();
        while region.load(0) == 0 {
            b.wait(Duration::from_secs(10));
        }
        start.elapsed()
    });
    std::thread::sleep(Duration::from_millis(50));
    a.region(R).expect("registered").store(1, 7);
    a.write(
        NodeId(1),
        LocalSlice::new(R, 8, 8),
        RemoteAddr::new(R, 0),
        Signal::Unsignaled,
    )
    .expect("valid");
    let waited = waiter.join().expect("waiter");
    assert!(
        waited < Duration::from_secs(5),
        "the parked driver was not woken ({waited:?})"
    );
}

#[test]
fn config_is_validated() {
    assert!(
        ThreadedFabric::new(ThreadedConfig {
            op_timeout: Duration::ZERO,
            ..Default::default()
        })
        .is_err()
    );
    assert!(
        ThreadedFabric::new(ThreadedConfig {
            max_message_len: 0,
            ..Default::default()
        })
        .is_err()
    );
    let f = ThreadedFabric::new(ThreadedConfig::default()).expect("valid");
    assert!(f.cluster(0, &[]).is_err());
    let dup = [RegionSpec::new(R, 8), RegionSpec::new(R, 8)];
    assert!(
        f.cluster(2, &dup)
            .expect_err("duplicate")
            .to_string()
            .contains("registered twice")
    );
}

/// Every event `node` has now.
fn events_of(node: &mut squall_transport_mem::threaded::ThreadedNode) -> Vec<Event> {
    let mut events = Vec::new();
    drain(node, |e| events.push(e));
    events
}

#[test]
fn a_total_crash_and_restart_links_every_new_incarnation_and_fences_off_the_old_ones() {
    let fabric = ThreadedFabric::new(ThreadedConfig::default()).expect("valid");
    let mut old = fabric.cluster(3, &[RegionSpec::new(R, 64)]).expect("valid");
    let faults = old[0].faults();
    for i in 0..3 {
        faults.crash(NodeId(i));
    }
    let mut n0 = faults.restart_node(NodeId(0)).expect("crashed");
    assert!(events_of(&mut n0).is_empty(), "no peer runs yet");
    assert!(n0.is_absent(NodeId(1)) && n0.is_absent(NodeId(2)));
    let mut n1 = faults.restart_node(NodeId(1)).expect("crashed");
    let inc = faults.incarnation(NodeId(1));
    assert_eq!(inc, 2, "the first restart of a node of `cluster`");
    assert_eq!(
        events_of(&mut n0),
        [Event::PeerConnected {
            peer: NodeId(1),
            incarnation: inc
        }]
    );
    assert!(matches!(
        events_of(&mut n1).as_slice(),
        [Event::PeerConnected {
            peer: NodeId(0),
            ..
        }]
    ));
    // Node 2 stays down: node 0 declares it failed while absent.
    n0.report_failed(NodeId(2));
    assert!(matches!(
        events_of(&mut n0).as_slice(),
        [Event::PeerFailed {
            peer: NodeId(2),
            ..
        }]
    ));
    // The old endpoints post nothing any more, not even to the new incarnations.
    old[0].region(R).expect("registered").store(0, 66);
    let src = LocalSlice::new(R, 0, 8);
    assert!(
        old[0]
            .write(NodeId(1), src, RemoteAddr::new(R, 0), Signal::Unsignaled)
            .is_err()
    );
    assert_eq!(n1.region(R).expect("registered").load(0), 0);
    // A later process of node 2 links with everyone, node 0 included.
    let mut n2 = faults.restart_node(NodeId(2)).expect("crashed");
    let peers = |events: Vec<Event>| -> Vec<NodeId> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::PeerConnected { peer, .. } => Some(*peer),
                _ => None,
            })
            .collect()
    };
    assert_eq!(peers(events_of(&mut n0)), [NodeId(2)]);
    assert_eq!(peers(events_of(&mut n1)), [NodeId(2)]);
    assert_eq!(peers(events_of(&mut n2)), [NodeId(0), NodeId(1)]);
    n0.region(R).expect("registered").store(1, 77);
    n0.write(
        NodeId(2),
        LocalSlice::new(R, 8, 8),
        RemoteAddr::new(R, 8),
        Signal::Unsignaled,
    )
    .expect("linked");
    assert_eq!(n2.region(R).expect("registered").load(1), 77);
}

#[test]
fn an_op_posted_before_the_new_incarnation_is_polled_fails_and_never_lands() {
    let fabric = ThreadedFabric::new(ThreadedConfig::default()).expect("valid");
    let mut nodes = fabric.cluster(2, &[RegionSpec::new(R, 64)]).expect("valid");
    let faults = nodes[0].faults();
    faults.crash(NodeId(1));
    let fresh = faults.restart_node(NodeId(1)).expect("crashed");
    nodes[0].region(R).expect("registered").store(0, 5);
    let src = LocalSlice::new(R, 0, 8);
    let op = nodes[0]
        .write(NodeId(1), src, RemoteAddr::new(R, 0), Signal::Signaled)
        .expect("the old link still looks up");
    assert_eq!(fresh.region(R).expect("registered").load(0), 0);
    let events = events_of(&mut nodes[0]);
    assert!(
        matches!(
            events.as_slice(),
            [
                Event::PeerFailed { peer: NodeId(1), .. },
                Event::Completion(c),
                Event::PeerConnected { peer: NodeId(1), .. },
            ] if c.op == op && c.result.is_err()
        ),
        "{events:?}"
    );
    nodes[0]
        .write(NodeId(1), src, RemoteAddr::new(R, 0), Signal::Unsignaled)
        .expect("linked");
    assert_eq!(fresh.region(R).expect("registered").load(0), 5);
}

/// The peers named by the `PeerConnected` events among `events`, in order.
fn connected(events: &[Event]) -> Vec<NodeId> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::PeerConnected { peer, .. } => Some(*peer),
            _ => None,
        })
        .collect()
}

#[test]
fn an_old_endpoint_still_polled_after_its_restart_takes_nothing_from_the_new_one() {
    let timeout = Duration::from_millis(20);
    let fabric = ThreadedFabric::new(ThreadedConfig {
        op_timeout: timeout,
        ..Default::default()
    })
    .expect("valid");
    let mut old = fabric.cluster(3, &[RegionSpec::new(R, 64)]).expect("valid");
    let faults = old[0].faults();
    faults.crash(NodeId(1));
    faults.crash(NodeId(2));
    let mut n1 = faults.restart_node(NodeId(1)).expect("crashed");
    // The old thread of node 1 winds down, polling, while the new one links.
    assert!(events_of(&mut old[1]).is_empty(), "its life is over");
    let mut n2 = faults.restart_node(NodeId(2)).expect("crashed");
    assert!(events_of(&mut old[1]).is_empty(), "its life is over");
    assert_eq!(connected(&events_of(&mut n1)), [NodeId(0), NodeId(2)]);
    assert_eq!(connected(&events_of(&mut n2)), [NodeId(0), NodeId(1)]);
    assert_eq!(connected(&events_of(&mut old[0])), [NodeId(1), NodeId(2)]);
    // A message to node 1 reaches the new endpoint only.
    old[0]
        .send(NodeId(1), b"to the new life", Signal::Unsignaled)
        .expect("linked");
    let mut buf = Vec::new();
    assert_eq!(old[1].recv(&mut buf), None);
    assert_eq!(n1.recv(&mut buf), Some(NodeId(0)));
    assert_eq!(buf, b"to the new life");
    // The old endpoint's reports are about its own life: the new links stay up.
    old[1].report_failed(NodeId(0));
    old[1].report_failed(NodeId(2));
    // An op of the new life held on a partition does not time out on the old endpoint's poll.
    faults.partition(NodeId(1), NodeId(0));
    n1.region(R).expect("registered").store(0, 41);
    let op = n1
        .write(
            NodeId(0),
            LocalSlice::new(R, 0, 8),
            RemoteAddr::new(R, 0),
            Signal::Signaled,
        )
        .expect("linked");
    std::thread::sleep(timeout * 2);
    assert!(events_of(&mut old[1]).is_empty(), "its life is over");
    faults.heal(NodeId(1), NodeId(0));
    assert_eq!(old[0].region(R).expect("registered").load(0), 41);
    let events = events_of(&mut n1);
    assert!(
        matches!(events.as_slice(), [Event::Completion(c)] if c.op == op && c.result == Ok(0)),
        "{events:?}"
    );
    // Every link of the new life is still up, both ways.
    for (a, b) in [(0, 1), (0, 2)] {
        let peer = NodeId(b);
        old[a].fence(peer).expect("linked");
        let events = events_of(&mut old[a]);
        assert!(
            matches!(events.as_slice(), [Event::Completion(c)] if c.result.is_ok()),
            "{a} -> {b}: {events:?}"
        );
    }
    for (node, peers) in [
        (&mut n1, [NodeId(0), NodeId(2)]),
        (&mut n2, [NodeId(0), NodeId(1)]),
    ] {
        for peer in peers {
            node.fence(peer).expect("linked");
            let events = events_of(node);
            assert!(
                matches!(events.as_slice(), [Event::Completion(c)] if c.result.is_ok()),
                "-> {peer}: {events:?}"
            );
        }
    }
}

#[test]
fn a_node_restarted_twice_before_its_peers_poll_is_connected_once_at_its_current_incarnation() {
    let fabric = ThreadedFabric::new(ThreadedConfig::default()).expect("valid");
    let mut nodes = fabric.cluster(3, &[RegionSpec::new(R, 64)]).expect("valid");
    let faults = nodes[0].faults();
    faults.crash(NodeId(1));
    let _first = faults.restart_node(NodeId(1)).expect("crashed");
    // Node 2 takes one event (the failure) and so has the first restart's connection queued.
    let mut one = [Event::PeerConnected {
        peer: NodeId(0),
        incarnation: 0,
    }];
    assert_eq!(nodes[2].poll(&mut one), 1);
    assert!(matches!(
        one[0],
        Event::PeerFailed {
            peer: NodeId(1),
            ..
        }
    ));
    faults.crash(NodeId(1));
    let mut n1 = faults.restart_node(NodeId(1)).expect("crashed");
    let incarnation = faults.incarnation(NodeId(1));
    assert_eq!(incarnation, 3);
    let connection = Event::PeerConnected {
        peer: NodeId(1),
        incarnation,
    };
    for i in [0, 2] {
        // Node 0 never took the first restart's connection: it hears of the failure of the
        // life it linked, then of the current one. Node 2 had taken it (not handed out): it
        // hears of that life's failure too, then of the current one.
        let events = events_of(&mut nodes[i]);
        assert!(
            matches!(
                events.as_slice(),
                [Event::PeerFailed { peer: NodeId(1), .. }, e] if *e == connection
            ),
            "node {i}: one failure, then one connection of the current incarnation: {events:?}"
        );
        // Linked to the current memory.
        nodes[i]
            .region(R)
            .expect("registered")
            .store(i, 50 + i as u64);
        nodes[i]
            .write(
                NodeId(1),
                LocalSlice::new(R, i * 8, 8),
                RemoteAddr::new(R, i * 8),
                Signal::Signaled,
            )
            .expect("linked");
        let events = events_of(&mut nodes[i]);
        assert!(
            matches!(events.as_slice(), [Event::Completion(c)] if c.result.is_ok()),
            "node {i}: {events:?}"
        );
        assert_eq!(n1.region(R).expect("registered").load(i), 50 + i as u64);
    }
    assert_eq!(connected(&events_of(&mut n1)), [NodeId(0), NodeId(2)]);
}
