//! The simulator's determinism and its fault injection: crash, partition, heal, delay, slow.

use std::collections::BTreeSet;
use std::time::Duration;

use squall_transport::conformance::drain;
use squall_transport::{
    Event, FailureCause, LocalSlice, NodeId, OpError, RegionId, RegionSpec, RemoteAddr, Signal,
    Transport,
};
use squall_transport_mem::ConfigError;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds};

const R: RegionId = RegionId(0);

fn cluster(seed: u64, n: usize) -> (Sim, Vec<SimNode>) {
    Sim::cluster(SimConfig::seeded(seed), n, &[RegionSpec::new(R, 256)]).expect("valid sim")
}

/// Every node CASes and writes to every other node, with steps interleaved by the seed.
fn busy_run(seed: u64) -> u64 {
    let (sim, mut nodes) = cluster(seed, 4);
    for round in 0..20u64 {
        for (i, node) in nodes.iter_mut().enumerate() {
            let peer = NodeId(((i + 1 + round as usize % 3) % 4) as u32);
            node.region(R).expect("registered").store(i, round);
            let src = LocalSlice::new(R, i * 8, 8);
            let _ = node.write(
                peer,
                src,
                RemoteAddr::new(R, 64 + i * 8),
                Signal::Unsignaled,
            );
            let _ = node.compare_and_swap(peer, RemoteAddr::new(R, 128), round, round + 1);
        }
        for _ in 0..sim.random(6) {
            sim.step();
        }
    }
    sim.run_until_idle(100_000);
    sim.trace_hash()
}

#[test]
fn same_seed_same_trace() {
    check_seeds("same_seed_same_trace", 20, |seed| {
        let (a, b) = (busy_run(seed), busy_run(seed));
        if a == b {
            Ok(())
        } else {
            Err(format!("hashes {a:#x} and {b:#x} differ"))
        }
    });
}

#[test]
fn different_seeds_explore_different_interleavings() {
    let hashes: BTreeSet<u64> = (0..32).map(busy_run).collect();
    assert!(
        hashes.len() >= 30,
        "32 seeds gave only {} distinct traces",
        hashes.len()
    );
}

#[test]
fn crashed_peer_ops_time_out_then_fail_fast() {
    let (sim, mut nodes) = cluster(5, 2);
    sim.crash(NodeId(1));
    let start = sim.now();
    let op = nodes[0]
        .fetch_add(NodeId(1), RemoteAddr::new(R, 0), 1)
        .expect("valid op");
    let mut events = Vec::new();
    while events.is_empty() {
        nodes[0].wait(Duration::from_millis(10));
        drain(&mut nodes[0], |e| events.push(e));
    }
    let waited = sim.now() - start;
    assert!(
        waited >= sim.op_timeout(),
        "failed after {waited:?}, before the timeout"
    );
    assert!(waited <= sim.op_timeout() * 2, "took {waited:?} to fail");
    assert_eq!(
        events[0],
        Event::PeerFailed {
            peer: NodeId(1),
            cause: FailureCause::TimedOut
        }
    );
    assert!(
        matches!(events[1], Event::Completion(c) if c.op == op && c.result == Err(OpError::TimedOut))
    );
    // Once the link is broken, later ops fail at once.
    let later = nodes[0].fence(NodeId(1)).expect("valid op");
    let mut again = Vec::new();
    drain(&mut nodes[0], |e| again.push(e));
    assert!(
        matches!(again.as_slice(), [Event::Completion(c)] if c.op == later && c.result.is_err())
    );
    // A crashed node's endpoint refuses to post.
    assert!(nodes[1].fence(NodeId(0)).is_err());
}

#[test]
fn partition_holds_traffic_and_heal_releases_it_in_order() {
    let (sim, mut nodes) = cluster(9, 3);
    sim.partition(&[NodeId(0)], &[NodeId(1), NodeId(2)]);
    for v in 1..=5u64 {
        nodes[0].region(R).expect("registered").store(v as usize, v);
        let src = LocalSlice::new(R, v as usize * 8, 8);
        nodes[0]
            .write(NodeId(1), src, RemoteAddr::new(R, 0), Signal::Unsignaled)
            .expect("valid");
    }
    sim.advance(sim.op_timeout() / 2);
    let target = nodes[1].region(R).expect("registered").clone();
    assert_eq!(target.load(0), 0, "a partition must hold traffic");
    sim.heal();
    sim.run_until_idle(1000);
    assert_eq!(
        target.load(0),
        5,
        "held writes must apply in order after a heal"
    );
    let mut events = Vec::new();
    drain(&mut nodes[0], |e| events.push(e));
    assert!(
        events.is_empty(),
        "a healed partition is not a failure: {events:?}"
    );
}

#[test]
fn partition_beyond_the_timeout_breaks_both_directions() {
    let (sim, mut nodes) = cluster(11, 2);
    sim.partition(&[NodeId(0)], &[NodeId(1)]);
    nodes[0].fence(NodeId(1)).expect("valid");
    nodes[1].fence(NodeId(0)).expect("valid");
    sim.advance(sim.op_timeout() * 2);
    for (me, peer) in [(0, NodeId(1)), (1, NodeId(0))] {
        let mut events = Vec::new();
        drain(&mut nodes[me], |e| events.push(e));
        assert_eq!(
            events[0],
            Event::PeerFailed {
                peer,
                cause: FailureCause::TimedOut
            },
            "n{me}"
        );
    }
}

#[test]
fn delay_and_slow_stretch_latency() {
    let latency = |configure: &dyn Fn(&Sim)| {
        let (sim, mut nodes) = cluster(3, 2);
        configure(&sim);
        nodes[0].fence(NodeId(1)).expect("valid");
        let start = sim.now();
        sim.run_until_idle(100);
        sim.now() - start
    };
    let base = latency(&|_| {});
    let delayed = latency(&|s| s.delay(NodeId(1), Duration::from_micros(100)));
    let slowed = latency(&|s| s.slow(NodeId(0), 50));
    assert!(
        delayed >= base + Duration::from_micros(100),
        "{delayed:?} vs {base:?}"
    );
    assert!(
        slowed >= Duration::from_micros(50),
        "a 50x slower node took {slowed:?}"
    );
    let (sim, _) = cluster(3, 2);
    sim.slow(NodeId(0), 4);
    let turns = (0..4000).filter(|_| sim.takes_turn(NodeId(0))).count();
    assert!(
        (700..1300).contains(&turns),
        "a 4x slower node took {turns} of 4000 turns"
    );
}

#[test]
fn config_errors_say_what_to_change() {
    let zero = SimConfig {
        op_timeout: Duration::ZERO,
        ..SimConfig::seeded(1)
    };
    assert_eq!(zero.validate(), Err(ConfigError::ZeroTimeout));
    let inverted = SimConfig {
        min_latency: Duration::from_micros(9),
        max_latency: Duration::from_micros(1),
        ..SimConfig::seeded(1)
    };
    let err = inverted.validate().expect_err("inverted latency");
    assert!(
        err.to_string().contains("min_latency <= max_latency"),
        "{err}"
    );
    let bad_layout =
        Sim::cluster(SimConfig::seeded(1), 2, &[RegionSpec::new(R, 12)]).expect_err("bad length");
    assert!(
        bad_layout.to_string().contains("multiple of 8"),
        "{bad_layout}"
    );
    assert!(Sim::cluster(SimConfig::seeded(1), 0, &[]).is_err());
}

#[test]
fn an_absent_peer_declared_failed_stays_failed_and_never_connects() {
    let layout = [RegionSpec::new(RegionId(0), 64)];
    let (sim, mut nodes) =
        Sim::cluster_late(SimConfig::seeded(3), 3, &layout, &[NodeId(2)]).expect("valid sim");
    nodes[0].report_failed(NodeId(2));
    sim.start_node(NodeId(2));
    sim.run_until_idle(1_000);
    let mut seen = Vec::new();
    drain(&mut nodes[0], |e| seen.push(e));
    assert_eq!(
        seen,
        vec![Event::PeerFailed {
            peer: NodeId(2),
            cause: FailureCause::Local
        }],
        "n0 declared the absent n2 failed: reported once, and no link comes up"
    );
    assert!(nodes[0].is_absent(NodeId(2)));
    let mut seen = Vec::new();
    drain(&mut nodes[1], |e| seen.push(e));
    assert!(matches!(
        seen[..],
        [Event::PeerConnected {
            peer: NodeId(2),
            incarnation: 1
        }]
    ));
    let mut seen = Vec::new();
    drain(&mut nodes[2], |e| seen.push(e));
    assert!(
        matches!(
            seen[..],
            [Event::PeerConnected {
                peer: NodeId(1),
                ..
            }]
        ),
        "n2 connects to n1 only: {seen:?}"
    );
    assert!(nodes[2].is_absent(NodeId(0)));
}

/// A crashed node restarted under the same id: a write queued to the old incarnation (the
/// target crashed, the op waits for its timeout) never lands in the new one; a write the peer
/// posts before it took the new `PeerConnected` fails; one posted after lands in fresh memory;
/// the new endpoint sees its peers absent until it polls their `PeerConnected`.
#[test]
fn a_restarted_node_gets_a_new_incarnation_and_no_op_of_the_old_one() {
    let (sim, mut nodes) = cluster(3, 3);
    let src = LocalSlice::new(R, 0, 8);
    let at = |offset| RemoteAddr { region: R, offset };
    nodes[0]
        .region(R)
        .unwrap_or_else(|| unreachable!())
        .store(0, 41);
    sim.crash(NodeId(2));
    // Queued to the crashed old incarnation.
    nodes[0]
        .write(NodeId(2), src, at(0), Signal::Unsignaled)
        .expect("posted");
    let mut fresh = sim.restart_node(NodeId(2)).expect("restarted");
    assert_eq!(sim.incarnation(NodeId(2)), 1);
    assert!(
        sim.restart_node(NodeId(2)).is_none(),
        "not crashed any more"
    );
    // Posted before n0 took the new PeerConnected: it targets the old incarnation and fails.
    nodes[0]
        .write(NodeId(2), src, at(8), Signal::Signaled)
        .expect("posted");
    assert!(fresh.is_absent(NodeId(0)));
    assert_eq!(
        fresh.fence(NodeId(0)),
        Err(squall_transport::PostError::NotConnected { peer: NodeId(0) })
    );
    sim.advance(Duration::from_millis(5));
    let mut ev = Vec::new();
    drain(&mut nodes[0], |e| ev.push(e));
    assert!(ev.contains(&Event::PeerFailed {
        peer: NodeId(2),
        cause: FailureCause::ConnectionLost
    }));
    assert!(ev.iter().any(|e| matches!(e, Event::Completion(c) if c.peer == NodeId(2) && c.result == Err(OpError::PeerFailed))));
    assert!(ev.contains(&Event::PeerConnected {
        peer: NodeId(2),
        incarnation: 1
    }));
    // Now the link to the new incarnation is up.
    nodes[0]
        .write(NodeId(2), src, at(16), Signal::Unsignaled)
        .expect("posted");
    sim.advance(Duration::from_millis(1));
    let r = fresh.region(R).unwrap_or_else(|| unreachable!());
    assert_eq!((r.load(0), r.load(1), r.load(2)), (0, 0, 41));
    // The new endpoint connects to its peers when it polls.
    let mut ev = Vec::new();
    drain(&mut fresh, |e| ev.push(e));
    assert!(ev.contains(&Event::PeerConnected {
        peer: NodeId(0),
        incarnation: 0
    }));
    assert!(fresh.fence(NodeId(0)).is_ok());
}

/// Every node down, then restarted one after the other (s21): a node restarted first never
/// linked the old incarnations of those restarted after it (they were down when its endpoint
/// started, so absent to it), and an absent peer is never reported failed (the transport's
/// *Late links*): it gets only their new incarnations' `PeerConnected`. A node linked to an
/// old incarnation still gets its `PeerFailed` first when it restarts again. Before the fix
/// the simulator reported `PeerFailed` of every later-restarted node to every earlier one,
/// and the membership layer suspected them for good (`docs/MEMBERSHIP.md`, thirty-first part).
#[test]
fn a_node_restarted_while_its_peer_was_down_gets_no_failure_of_that_peer() {
    let (sim, _old) = cluster(4, 3);
    for i in 0..3 {
        sim.crash(NodeId(i));
    }
    let mut fresh: Vec<SimNode> = (0..3)
        .map(|i| sim.restart_node(NodeId(i)).expect("restarted"))
        .collect();
    sim.advance(Duration::from_millis(1));
    for (i, node) in fresh.iter_mut().enumerate() {
        let mut seen = Vec::new();
        drain(node, |e| seen.push(e));
        let failed: Vec<&Event> = (seen.iter())
            .filter(|e| matches!(e, Event::PeerFailed { .. }))
            .collect();
        assert!(failed.is_empty(), "n{i} got {failed:?} ({seen:?})");
        for p in (0..3u32).filter(|&p| p as usize != i) {
            assert!(
                seen.contains(&Event::PeerConnected {
                    peer: NodeId(p),
                    incarnation: 1
                }),
                "n{i} connects to n{p}: {seen:?}"
            );
        }
    }
    // n0 is now linked to n2's incarnation 1: n2's next restart fails it there first.
    sim.crash(NodeId(2));
    let _again = sim.restart_node(NodeId(2)).expect("restarted");
    let mut seen = Vec::new();
    drain(&mut fresh[0], |e| seen.push(e));
    assert_eq!(
        seen[..],
        [
            Event::PeerFailed {
                peer: NodeId(2),
                cause: FailureCause::ConnectionLost
            },
            Event::PeerConnected {
                peer: NodeId(2),
                incarnation: 2
            }
        ],
        "n0 on n2's second restart"
    );
}

/// A late node learns each running peer's own incarnation, and a later restart of such a peer
/// comes as a newer one (s26, `docs/MEMBERSHIP.md`, sixty-seventh part). Before, `start_node`
/// announced every peer to the late node as incarnation 1: a peer up from the start (0) that
/// restarted (now really 1) came as an incarnation not newer than the one the late node had
/// linked, and the node's table refused it and kept suspecting the peer (the membership tests'
/// dead-side members restarted after a heal were never readmitted by the members started late).
#[test]
fn a_late_node_learns_each_peers_own_incarnation_and_a_restart_comes_as_a_newer_one() {
    let layout = [RegionSpec::new(R, 64)];
    let (sim, mut nodes) =
        Sim::cluster_late(SimConfig::seeded(5), 3, &layout, &[NodeId(2)]).expect("valid sim");
    sim.start_node(NodeId(2));
    let mut seen = Vec::new();
    drain(&mut nodes[2], |e| seen.push(e));
    let incarnations = |seen: &[Event], peer: NodeId| -> Vec<u64> {
        (seen.iter())
            .filter_map(|e| match *e {
                Event::PeerConnected {
                    peer: p,
                    incarnation,
                } if p == peer => Some(incarnation),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        incarnations(&seen, NodeId(0)),
        [0],
        "n2 at its start: {seen:?}"
    );
    assert_eq!(
        incarnations(&seen, NodeId(1)),
        [0],
        "n2 at its start: {seen:?}"
    );
    let mut seen = Vec::new();
    drain(&mut nodes[0], |e| seen.push(e));
    assert_eq!(incarnations(&seen, NodeId(2)), [1], "n0: {seen:?}");
    sim.crash(NodeId(0));
    let _fresh = sim.restart_node(NodeId(0)).expect("restarted");
    let mut seen = Vec::new();
    drain(&mut nodes[2], |e| seen.push(e));
    assert_eq!(
        seen[..],
        [
            Event::PeerFailed {
                peer: NodeId(0),
                cause: FailureCause::ConnectionLost
            },
            Event::PeerConnected {
                peer: NodeId(0),
                incarnation: 1
            }
        ],
        "n2 on n0's restart: its new incarnation is newer than the one n2 linked"
    );
}
