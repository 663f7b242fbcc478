//! Late links across real processes: two node processes run, a third (a late node) starts
//! seconds later, and a fourth configured late node never starts.
//!
//! Before the third starts, ops to it are refused with `NotConnected` and nothing about it (or
//! the fourth) is reported; once it starts, every running node reports `PeerConnected` for it
//! once and it reports one for each of them, and all three exchange signaled writes and
//! compare-and-swaps; the fourth stays `NotConnected` to everyone. Then the late node is killed
//! with `kill -9`: both founders report it failed exactly once, and nothing else.
#![allow(clippy::needless_range_loop)]
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::procs::{Place, ProcNode, spawn_procs};
use squall_transport::{
    Event, FailureCause, LocalSlice, NodeId, OpError, OpId, PostError, RegionId, RegionSpec,
    RemoteAddr, Signal, Transport,
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
const LATE: NodeId = NodeId(2);
const NEVER: NodeId = NodeId(3);

/// Every event a node reported, by kind.
#[derive(Default, Debug)]
struct Seen {
    connected: BTreeMap<NodeId, usize>,
    failed: BTreeMap<NodeId, usize>,
    /// Completions: op → result.
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
                Event::PeerConnected { peer, .. } => *seen.connected.entry(peer).or_default() += 1,
                Event::PeerFailed { peer, .. } => *seen.failed.entry(peer).or_default() += 1,
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

/// Polls every node until `done` holds for all of them, or panics after `limit`.
fn until(
    nodes: &mut [ProcNode],
    seen: &mut [Seen],
    limit: Duration,
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
        assert!(start.elapsed() < limit, "{what}: timed out; seen {seen:#?}");
        nodes[0].wait(Duration::from_millis(2));
    }
}

/// Where a node keeps the value it writes (a word nobody writes to remotely).
const SCRATCH: usize = 32;

/// `me` posts a signaled write of `value` to word `me` of every peer in `to`, and a CAS that
/// swaps word 8 from 0 to `value` (so exactly one CAS per target wins).
fn exchange(n: &mut ProcNode, to: &[NodeId], value: u64) -> Vec<OpId> {
    let me = n.local_id();
    n.region(R).expect("region").store(SCRATCH, value);
    let mut ops = Vec::new();
    for &p in to {
        let src = LocalSlice::new(R, 8 * SCRATCH, 8);
        let w = n.write(p, src, RemoteAddr::new(R, 8 * me.index()), Signal::Signaled);
        ops.push(w.unwrap_or_else(|e| panic!("{me}: write to {p}: {e}")));
        let c = n.compare_and_swap(p, RemoteAddr::new(R, 64), 0, value);
        ops.push(c.unwrap_or_else(|e| panic!("{me}: cas on {p}: {e}")));
    }
    ops
}

fn not_connected(n: &mut ProcNode, peer: NodeId) {
    let me = n.local_id();
    let w = n.write(
        peer,
        LocalSlice::new(R, 0, 8),
        RemoteAddr::new(R, 0),
        Signal::Signaled,
    );
    assert_eq!(
        w,
        Err(PostError::NotConnected { peer }),
        "{me}: write to {peer}"
    );
    let c = n.compare_and_swap(peer, RemoteAddr::new(R, 64), 0, 1);
    assert_eq!(
        c,
        Err(PostError::NotConnected { peer }),
        "{me}: cas on {peer}"
    );
}

#[test]
fn a_node_started_late_links_up_exchanges_ops_and_its_kill_is_reported_once() {
    let places: Vec<Place> = (0..4).map(|_| Place::loopback()).collect();
    let (mut nodes, mut pending) = spawn_procs(&places, 2, &[RegionSpec::new(R, 4096)], |_| {});
    let never = pending.pop().expect("node 3");
    assert_eq!(never.id(), NEVER);
    never.kill(); // configured, never started: its address refuses connections
    let late = pending.pop().expect("node 2");
    assert_eq!(late.id(), LATE);
    let timeout = common::test_config(&[]).heartbeat_timeout;
    let mut seen: Vec<Seen> = (0..3).map(|_| Seen::default()).collect();

    // Phase 1: the founders work together for a few heartbeat timeouts; the late nodes are
    // absent to them: refused with NotConnected, never reported.
    let start = Instant::now();
    let mut rounds = 0u64;
    while start.elapsed() < timeout * 3 {
        rounds += 1;
        for i in 0..2 {
            exchange(&mut nodes[i], &[NodeId(1 - i as u32)], 10 + i as u64);
            for p in [LATE, NEVER] {
                not_connected(&mut nodes[i], p);
            }
        }
        until(
            &mut nodes,
            &mut seen,
            Duration::from_secs(10),
            "phase 1",
            |_, s| s.done.len() as u64 >= 2 * rounds,
        );
    }
    for (i, s) in seen.iter().enumerate().take(2) {
        assert!(
            s.connected.is_empty() && s.failed.is_empty(),
            "node {i}: {s:?}"
        );
        assert!(s.done.values().all(Result::is_ok), "node {i}: {s:?}");
    }
    assert_eq!(nodes[1].region(R).expect("region").load(0), 10);
    assert_eq!(nodes[0].region(R).expect("region").load(1), 11);

    // Phase 2: the late node starts; every pair reports the new links once.
    nodes.push(late.start());
    not_connected(&mut nodes[2], NEVER);
    until(
        &mut nodes,
        &mut seen,
        Duration::from_secs(20),
        "links up",
        |i, s| {
            let want: Vec<NodeId> = if i == 2 {
                vec![NodeId(0), NodeId(1)]
            } else {
                vec![LATE]
            };
            want.iter().all(|p| s.connected.contains_key(p))
        },
    );
    // All three exchange writes and CAS, both ways on the new links.
    let before: Vec<usize> = seen.iter().map(|s| s.done.len()).collect();
    let mut posted = Vec::new();
    for i in 0..3 {
        let me = NodeId(i as u32);
        let to: Vec<NodeId> = (0..3).map(NodeId).filter(|&p| p != me).collect();
        posted.push(exchange(&mut nodes[i], &to, 100 + i as u64));
    }
    until(
        &mut nodes,
        &mut seen,
        Duration::from_secs(20),
        "exchange",
        |i, s| posted[i].iter().all(|op| s.done.contains_key(op)),
    );
    for i in 0..3 {
        for op in &posted[i] {
            assert!(
                seen[i].done[op].is_ok(),
                "node {i}: op {op:?} {:?}",
                seen[i].done[op]
            );
        }
        assert!(seen[i].done.len() >= before[i] + posted[i].len());
        for j in (0..3).filter(|&j| j != i) {
            let word = nodes[i].region(R).expect("region").load(j);
            assert_eq!(word, 100 + j as u64, "node {i}: the write from {j}");
        }
        // Exactly one CAS on each node's word 8 won (the founders' word was swapped in
        // phase 1 already; the late node's only now).
        let w = nodes[i].region(R).expect("region").load(8);
        assert_ne!(w, 0, "node {i}: no CAS won");
    }
    for i in 0..3 {
        not_connected(&mut nodes[i], NEVER);
    }

    // Phase 3: kill -9 the late node: reported once by each founder, nothing else.
    let mut victim = nodes.pop().expect("late node");
    victim.kill();
    until(
        &mut nodes,
        &mut seen,
        Duration::from_secs(20),
        "kill reported",
        |_, s| s.failed.contains_key(&LATE),
    );
    // Keep polling past the heartbeat timeout: a second report would show up now.
    let after = Instant::now();
    while after.elapsed() < timeout * 2 {
        for (i, n) in nodes.iter_mut().enumerate() {
            drain(n, &mut seen[i]);
        }
        nodes[0].wait(Duration::from_millis(5));
    }
    for (i, s) in seen.iter().enumerate().take(2) {
        let want: BTreeMap<NodeId, usize> = [(LATE, 1)].into();
        assert_eq!(s.connected, want, "node {i}: PeerConnected");
        assert_eq!(s.failed, want, "node {i}: PeerFailed");
        assert!(s.done.values().all(Result::is_ok), "node {i}: {s:?}");
    }
    let want: BTreeMap<NodeId, usize> = [(NodeId(0), 1), (NodeId(1), 1)].into();
    assert_eq!(seen[2].connected, want, "node 2: PeerConnected");
    assert!(seen[2].failed.is_empty(), "node 2: {:?}", seen[2].failed);
}
