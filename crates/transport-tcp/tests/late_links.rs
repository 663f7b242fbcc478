//! Late nodes started at the same moment dial each other at once (crossed dials): the higher
//! id's dial wins, the other is refused as crossed and is no error, and every pair is linked
//! exactly once, reported by `PeerConnected` once on each side.
#![allow(clippy::unwrap_used)]
mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use squall_transport::{Event, FailureCause, NodeId, RegionId, RegionSpec, RemoteAddr, Transport};
use squall_transport_tcp::TcpNode;

const R: RegionId = RegionId(0);

/// Polls every node until each has seen `PeerConnected` for every other node it expects, and
/// returns the counts.
fn connected(nodes: &mut [TcpNode], expect: &[Vec<NodeId>]) -> Vec<BTreeMap<NodeId, usize>> {
    let mut seen: Vec<BTreeMap<NodeId, usize>> = vec![BTreeMap::new(); nodes.len()];
    let mut events = [Event::PeerFailed {
        peer: NodeId(0),
        cause: FailureCause::Local,
    }; 16];
    let start = Instant::now();
    loop {
        for (i, n) in nodes.iter_mut().enumerate() {
            let k = n.poll(&mut events);
            for e in &events[..k] {
                match *e {
                    Event::PeerConnected { peer, .. } => *seen[i].entry(peer).or_default() += 1,
                    other => panic!("node {i}: unexpected {other:?}"),
                }
            }
        }
        let done = (seen.iter().zip(expect)).all(|(s, e)| e.iter().all(|p| s.contains_key(p)));
        if done {
            return seen;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "links not up: {seen:?}"
        );
        nodes[0].wait(Duration::from_millis(1));
    }
}

#[test]
fn late_nodes_started_at_once_link_to_each_other_and_to_the_founders_once() {
    let layout = [RegionSpec::new(R, 64)];
    for round in 0..8 {
        let (mut ls, addrs) = common::listeners(4);
        let mut config = common::test_config(&addrs);
        config.late = [NodeId(2), NodeId(3)].into();
        let late_ls = ls.split_off(2);
        let mut nodes = common::start_cluster(&config, ls, &layout);
        let barrier = Arc::new(Barrier::new(2));
        let starting: Vec<_> = (late_ls.into_iter().enumerate())
            .map(|(i, l)| {
                let (config, barrier) = (config.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    common::start_node(&config, l, NodeId(2 + i as u32), &layout)
                })
            })
            .collect();
        nodes.extend(starting.into_iter().map(|h| h.join().unwrap()));
        let all: Vec<NodeId> = (0..4).map(NodeId).collect();
        let expect: Vec<Vec<NodeId>> = (0..4)
            .map(|i| {
                let others = all.iter().copied().filter(|&p| p != NodeId(i));
                if i < 2 {
                    vec![NodeId(2), NodeId(3)]
                } else {
                    others.collect()
                }
            })
            .collect();
        let seen = connected(&mut nodes, &expect);
        // Nothing more is queued: a second link (or report) for a pair would be by now.
        let more = connected(&mut nodes, &vec![vec![]; 4]);
        for (i, (s, m)) in seen.iter().zip(&more).enumerate() {
            let want: BTreeMap<NodeId, usize> = expect[i].iter().map(|&p| (p, 1)).collect();
            assert_eq!(s, &want, "round {round}: node {i}");
            assert!(m.is_empty(), "round {round}: node {i} again: {m:?}");
        }
        // The link between the two late nodes carries ops both ways.
        for (from, to) in [(2, 3), (3, 2)] {
            let op = nodes[from]
                .fetch_add(NodeId(to as u32), RemoteAddr::new(R, 0), 1)
                .expect("posted");
            let start = Instant::now();
            let mut events = [Event::PeerFailed {
                peer: NodeId(0),
                cause: FailureCause::Local,
            }; 1];
            'done: loop {
                let k = nodes[from].poll(&mut events);
                if let Some(e) = events[..k].first() {
                    match e {
                        Event::Completion(c) if c.op == op => {
                            assert_eq!(c.result, Ok(0), "round {round}");
                            break 'done;
                        }
                        other => panic!("round {round}: node {from}: {other:?}"),
                    }
                }
                assert!(start.elapsed() < Duration::from_secs(10), "round {round}");
                nodes[from].wait(Duration::from_millis(1));
            }
        }
    }
}

#[test]
fn a_late_node_with_another_config_is_refused_with_the_reason_and_stays_absent() {
    let layout = [RegionSpec::new(R, 64)];
    let (mut ls, addrs) = common::listeners(3);
    let mut config = common::test_config(&addrs);
    config.late = [NodeId(2)].into();
    let late_l = ls.pop().unwrap();
    let mut nodes = common::start_cluster(&config, ls, &layout);
    let mut other = config.clone();
    other.max_message_len /= 2;
    let regions = vec![squall_transport::Region::new(layout[0]).unwrap()];
    let e = TcpNode::start_on(late_l, other, NodeId(2), regions).expect_err("refused");
    let text = e.to_string();
    assert!(
        text.contains("refused") && text.contains("max_message_len"),
        "{text}"
    );
    let mut events = [Event::PeerFailed {
        peer: NodeId(0),
        cause: FailureCause::Local,
    }; 4];
    for n in nodes.iter_mut() {
        assert_eq!(
            n.poll(&mut events),
            0,
            "{}: {:?}",
            n.local_id(),
            &events[..1]
        );
        assert!(n.is_absent(NodeId(2)), "{}", n.local_id());
    }
}

/// Issue 6/3, part 3: a late node started before the founders (their ports closed then, so
/// every dial at its start fails) dials them again every `redial_period` and links once they
/// are up: `PeerConnected` once on each side, ops both ways. With `redial_period = 0` (no
/// redial) it stays absent to them for good, which the second half checks (and which is what
/// the first half fails as without the redial thread).
#[test]
fn a_late_node_started_before_the_founders_links_to_them_by_dialling_again() {
    let layout = [RegionSpec::new(R, 64)];
    for redial in [Duration::from_millis(50), Duration::ZERO] {
        let (mut ls, addrs) = common::listeners(3);
        let mut config = common::test_config(&addrs);
        config.late = [NodeId(2)].into();
        config.redial_period = redial;
        let late_l = ls.pop().unwrap();
        // The founders are not up yet: nothing listens on their ports.
        drop(ls);
        let late = common::start_node(&config, late_l, NodeId(2), &layout);
        assert!(late.is_absent(NodeId(0)) && late.is_absent(NodeId(1)));
        // Now the founders start, on their ports (free again).
        let ls: Vec<_> = addrs[..2]
            .iter()
            .map(|a| std::net::TcpListener::bind(a).expect("the founder's port is free again"))
            .collect();
        let mut nodes = common::start_cluster(&config, ls, &layout);
        nodes.push(late);
        if redial.is_zero() {
            // Four redial periods' worth of the other run, and more: nothing links.
            let quiet = Instant::now() + Duration::from_millis(500);
            let mut events = [Event::PeerFailed {
                peer: NodeId(0),
                cause: FailureCause::Local,
            }; 4];
            while Instant::now() < quiet {
                for (i, n) in nodes.iter_mut().enumerate() {
                    let k = n.poll(&mut events);
                    assert_eq!(k, 0, "node {i}: {:?}", &events[..k]);
                }
                nodes[0].wait(Duration::from_millis(5));
            }
            assert!(nodes[2].is_absent(NodeId(0)) && nodes[0].is_absent(NodeId(2)));
            continue;
        }
        let expect = vec![vec![NodeId(2)], vec![NodeId(2)], vec![NodeId(0), NodeId(1)]];
        let seen = connected(&mut nodes, &expect);
        for (i, s) in seen.iter().enumerate() {
            let want: BTreeMap<NodeId, usize> = expect[i].iter().map(|&p| (p, 1)).collect();
            assert_eq!(s, &want, "node {i}");
        }
        for (from, to) in [(2usize, 0u32), (0, 2), (2, 1), (1, 2)] {
            let op = nodes[from]
                .fetch_add(NodeId(to), RemoteAddr::new(R, 8 * from), 1)
                .expect("posted");
            let start = Instant::now();
            let mut events = [Event::PeerFailed {
                peer: NodeId(0),
                cause: FailureCause::Local,
            }; 1];
            loop {
                let k = nodes[from].poll(&mut events);
                if let Some(e) = events[..k].first() {
                    match e {
                        Event::Completion(c) if c.op == op => {
                            assert_eq!(c.result, Ok(0));
                            break;
                        }
                        other => panic!("node {from}: {other:?}"),
                    }
                }
                assert!(start.elapsed() < Duration::from_secs(10), "{from} -> {to}");
                nodes[from].wait(Duration::from_millis(1));
            }
        }
    }
}

/// A late node (a restart, a rejoin) may start while a member is down, and the port of a
/// member that is down may be taken by another program meanwhile — here a node of another
/// cluster (found in s21: a membership restart test across processes failed at start-up,
/// "cluster id … differs from this node's", when a parallel test's node took the absent
/// member's port). The late node leaves that peer absent and links the others; only a late
/// node that every peer it dials answers so is refused (then its own config is at fault).
/// Before s21 the first start failed with the refusal.
#[test]
fn a_late_node_finding_another_clusters_node_at_a_peers_address_leaves_it_absent() {
    let layout = [RegionSpec::new(R, 64)];
    let regions = || vec![squall_transport::Region::new(layout[0]).unwrap()];
    let (mut ls, addrs) = common::listeners(3);
    let mut config = common::test_config(&addrs);
    config.late = [NodeId(1), NodeId(2)].into();
    let l2 = ls.pop().unwrap();
    let l1 = ls.pop().unwrap();
    let n0 = common::start_node(&config, ls.pop().unwrap(), NodeId(0), &layout);
    // Node 1's address: a node of a cluster of another id.
    let _foreign = common::start_node(
        &foreign(&config, NodeId(1), addrs[1]),
        l1,
        NodeId(1),
        &layout,
    );
    let n2 = TcpNode::start_on(l2, config.clone(), NodeId(2), regions())
        .expect("a foreign node at one peer's address leaves that peer absent");
    let mut nodes = vec![n0, n2];
    let seen = connected(&mut nodes, &[vec![NodeId(2)], vec![NodeId(0)]]);
    assert_eq!(seen[1].get(&NodeId(0)), Some(&1), "{seen:?}");
    assert!(nodes[1].is_absent(NodeId(1)));

    // Every peer foreign: the late node's config is at fault, and it says so.
    let (mut ls, addrs) = common::listeners(2);
    let mut config = common::test_config(&addrs);
    config.late = [NodeId(1)].into();
    let l1 = ls.pop().unwrap();
    let _foreign = common::start_node(
        &foreign(&config, NodeId(0), addrs[0]),
        ls.pop().unwrap(),
        NodeId(0),
        &layout,
    );
    let e = TcpNode::start_on(l1, config, NodeId(1), regions()).expect_err("refused");
    assert!(e.to_string().contains("cluster id"), "{e}");
}

/// The config of another cluster (`config`'s id + 1) whose founder `me` listens at `addr`; its
/// other node (late, never started) gives it the two nodes a cluster needs.
fn foreign(
    config: &squall_transport_tcp::ClusterConfig,
    me: NodeId,
    addr: std::net::SocketAddr,
) -> squall_transport_tcp::ClusterConfig {
    let other: std::net::SocketAddr = ([127, 0, 0, 1], 9).into();
    let mut c = squall_transport_tcp::ClusterConfig::new(
        config.cluster_id + 1,
        [(me, addr), (NodeId(9), other)],
    );
    c.late = [NodeId(9)].into();
    c
}
