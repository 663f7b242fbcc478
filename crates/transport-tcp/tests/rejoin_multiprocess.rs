//! Rejoin under the same id across real processes: a node process is killed with `kill -9` and
//! a fresh process starts under its id (on a new port), twice. Each time every survivor reports
//! the old incarnation failed, then `PeerConnected` with a larger incarnation, and ops work
//! both ways on the new link while the new process's memory holds nothing of the old one's.
#![allow(clippy::needless_range_loop)]
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::procs::{Place, ProcNode, spawn_cluster};
use squall_transport::{
    Event, FailureCause, LocalSlice, NodeId, OpError, OpId, RegionId, RegionSpec, RemoteAddr,
    Signal, Transport,
};

/// Entry point of the node processes this binary spawns; does nothing when run by hand.
#[test]
#[ignore = "entry point of the node processes that the other tests spawn"]
fn child_node_process() {
    if let Ok(addr) = std::env::var("SQUALL_TCP_CTRL") {
        common::procs::child_main(&addr);
    }
}

const R: RegionId = RegionId(0);
const VICTIM: NodeId = NodeId(2);

/// What one node reported, in order.
#[derive(Default, Debug)]
struct Seen {
    /// PeerFailed and PeerConnected, in the order polled: (peer, Some(incarnation) if connected).
    links: Vec<(NodeId, Option<u64>)>,
    done: BTreeMap<OpId, Result<u64, OpError>>,
}

fn drain(n: &mut ProcNode, seen: &mut Seen) {
    let mut events = [Event::PeerFailed {
        peer: NodeId(0),
        cause: FailureCause::Local,
    }; 64];
    loop {
        let k = n.poll(&mut events);
        for e in &events[..k] {
            match *e {
                Event::PeerConnected { peer, incarnation } => {
                    seen.links.push((peer, Some(incarnation)));
                }
                Event::PeerFailed { peer, .. } => seen.links.push((peer, None)),
                Event::Completion(c) => {
                    seen.done.insert(c.op, c.result);
                }
            }
        }
        if k < events.len() {
            return;
        }
    }
}

fn until(
    nodes: &mut [ProcNode],
    seen: &mut [Seen],
    what: &str,
    done: impl Fn(usize, &Seen) -> bool,
) {
    let start = Instant::now();
    loop {
        for (i, n) in nodes.iter_mut().enumerate() {
            drain(n, &mut seen[i]);
        }
        if (0..nodes.len()).all(|i| done(i, &seen[i])) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what}: timed out; seen {seen:#?}"
        );
        nodes[0].wait(Duration::from_millis(2));
    }
}

/// `from` writes `value` to word `from` of `to` (signaled) and fetch-adds word 8.
fn exchange(n: &mut ProcNode, to: NodeId, value: u64) -> [OpId; 2] {
    let me = n.local_id();
    n.region(R).expect("region").store(32, value);
    let src = LocalSlice::new(R, 8 * 32, 8);
    let w = n.write(
        to,
        src,
        RemoteAddr::new(R, 8 * me.index()),
        Signal::Signaled,
    );
    let f = n.fetch_add(to, RemoteAddr::new(R, 64), 1);
    [
        w.unwrap_or_else(|e| panic!("{me}: write to {to}: {e}")),
        f.unwrap_or_else(|e| panic!("{me}: fetch_add on {to}: {e}")),
    ]
}

#[test]
fn a_killed_node_process_restarts_under_its_id_and_links_again_twice() {
    let mut nodes = spawn_cluster(3, &[RegionSpec::new(R, 4096)], |_| {});
    let mut seen: Vec<Seen> = (0..3).map(|_| Seen::default()).collect();
    let mut incarnation = nodes[VICTIM.index()].incarnation();
    for round in 1..=2u64 {
        // Traffic to the victim, then kill -9 it with ops in flight.
        for i in 0..2 {
            exchange(&mut nodes[i], VICTIM, 10 * round + i as u64);
        }
        nodes[VICTIM.index()].kill();
        let failed = |s: &Seen| s.links.iter().filter(|l| **l == (VICTIM, None)).count();
        until(&mut nodes[..2], &mut seen[..2], "kill reported", |_, s| {
            failed(s) == round as usize
        });
        // A fresh process under the same id, on a new port.
        let fresh = nodes[VICTIM.index()].respawn(&Place::loopback());
        assert!(
            fresh.incarnation() > incarnation,
            "round {round}: incarnation {} after {incarnation}",
            fresh.incarnation()
        );
        incarnation = fresh.incarnation();
        nodes[VICTIM.index()] = fresh;
        seen[VICTIM.index()] = Seen::default();
        until(&mut nodes, &mut seen, "links up again", |i, s| {
            if i == VICTIM.index() {
                s.links.len() == 2
            } else {
                s.links.contains(&(VICTIM, Some(incarnation)))
            }
        });
        // The survivors saw exactly: failed, connected (new), per round; the new process saw
        // each survivor connect once.
        for (i, s) in seen.iter().enumerate().take(2) {
            let mine: Vec<_> = s.links.iter().filter(|l| l.0 == VICTIM).collect();
            assert_eq!(mine.len(), 2 * round as usize, "node {i}: {:?}", s.links);
            assert_eq!(*mine[mine.len() - 2], (VICTIM, None), "node {i}");
            assert_eq!(
                *mine[mine.len() - 1],
                (VICTIM, Some(incarnation)),
                "node {i}"
            );
        }
        let mut peers: Vec<NodeId> = seen[VICTIM.index()].links.iter().map(|l| l.0).collect();
        peers.sort();
        assert_eq!(peers, [NodeId(0), NodeId(1)]);
        assert!(seen[VICTIM.index()].links.iter().all(|l| l.1.is_some()));
        // Nothing of the old incarnation's ops reached the new process's memory.
        let mem = |n: &ProcNode, w: usize| n.region(R).expect("region").load(w);
        assert_eq!(
            (0..9).map(|w| mem(&nodes[2], w)).collect::<Vec<_>>(),
            [0; 9],
            "round {round}"
        );
        // Ops both ways on the new links.
        let mut posted: Vec<Vec<OpId>> = vec![Vec::new(); 3];
        for i in 0..2 {
            posted[i].extend(exchange(&mut nodes[i], VICTIM, 100 * round + i as u64));
            // One value for both (the source word is read when the op leaves).
            let back = exchange(&mut nodes[2], NodeId(i as u32), 200 * round);
            posted[2].extend(back);
        }
        until(&mut nodes, &mut seen, "ops on the new links", |i, s| {
            posted[i].iter().all(|op| s.done.contains_key(op))
        });
        for i in 0..3 {
            for op in &posted[i] {
                assert!(
                    seen[i].done[op].is_ok(),
                    "node {i}: {op:?} {:?}",
                    seen[i].done[op]
                );
            }
        }
        assert_eq!(mem(&nodes[2], 0), 100 * round);
        assert_eq!(mem(&nodes[2], 1), 100 * round + 1);
        assert_eq!(
            mem(&nodes[2], 8),
            2,
            "the new incarnation's counter starts at 0"
        );
        assert_eq!(mem(&nodes[0], 2), 200 * round);
        assert_eq!(mem(&nodes[1], 2), 200 * round);
    }
}
