//! The read hand-off between a link's reader thread and the driver.
//!
//! A socket's bytes are read by the driver while it is blocked in `wait` (the kernel wakes only
//! it, `EPOLLEXCLUSIVE`) and by the link's reader thread otherwise. These tests check that the
//! hand-off keeps link order and loses nothing: with both directions busy and the driver
//! entering and leaving `wait` all the time; with a driver that stops calling `poll`/`wait`
//! after having waited (its node must keep serving peers); and when the peer fails while the
//! driver waits for its answer.
#![allow(clippy::unwrap_used)]
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use squall_transport::{
    Event, FailureCause, LocalSlice, NodeId, OpError, RegionId, RegionSpec, RemoteAddr, Signal,
    Transport,
};
use squall_transport_tcp::TcpNode;

const R: RegionId = RegionId(0);
/// Generous: the machine running the tests may be loaded.
const DEADLINE: Duration = Duration::from_secs(20);

fn pair() -> Vec<TcpNode> {
    pair_with(|_| {})
}

/// Two nodes whose config `tweak` adjusts.
fn pair_with(tweak: impl FnOnce(&mut squall_transport_tcp::ClusterConfig)) -> Vec<TcpNode> {
    let (ls, addrs) = common::listeners(2);
    let mut config = common::test_config(&addrs);
    tweak(&mut config);
    common::start_cluster(&config, ls, &[RegionSpec::new(R, 4096)])
}

/// Polls and parks in `wait` until op `op` completes; returns its result. Panics on a failed
/// peer or after [`DEADLINE`].
fn await_op(node: &mut TcpNode, op: squall_transport::OpId) -> Result<u64, OpError> {
    let start = Instant::now();
    let mut events = [Event::PeerFailed {
        peer: NodeId(u32::MAX),
        cause: FailureCause::Local,
    }; 16];
    loop {
        let n = node.poll(&mut events);
        for e in &events[..n] {
            match e {
                Event::Completion(c) if c.op == op => return c.result,
                Event::Completion(c) => assert!(c.result.is_ok(), "unexpected failure {c:?}"),
                Event::PeerFailed { .. } | Event::PeerConnected { .. } => {
                    panic!("unexpected {e:?}")
                }
            }
        }
        assert!(start.elapsed() < DEADLINE, "op {op:?} never completed");
        node.wait(Duration::from_millis(5));
    }
}

/// Both drivers post round trips to each other and park in `wait` between polls, so each socket
/// is read sometimes by the driver and sometimes by the reader thread. Node 1 also streams
/// unsignaled writes of a sequence number to node 0 before each fetch-and-add: by link order,
/// whenever node 0 sees `k` fetch-and-adds applied, the write of sequence `k` landed already.
#[test]
fn busy_links_keep_order_whoever_reads_them() {
    const ROUNDS: u64 = 2000;
    let mut nodes = pair();
    let (a, b) = nodes.split_at_mut(1);
    let (n0, n1) = (&mut a[0], &mut b[0]);
    let violations = std::thread::scope(|s| {
        let t0 = s.spawn(move || {
            // CAS increments of node 1's word 0, checking node 0's own words in between.
            let mut violations = 0u64;
            for expected in 0..ROUNDS {
                let op = n0
                    .compare_and_swap(NodeId(1), RemoteAddr::new(R, 0), expected, expected + 1)
                    .unwrap();
                let old = await_op(n0, op).unwrap();
                assert_eq!(old, expected, "CAS saw another writer");
                let region = n0.region(R).unwrap();
                let adds = region.load(0);
                let seq = region.load(1);
                if seq < adds {
                    violations += 1;
                }
            }
            violations
        });
        let t1 = s.spawn(move || {
            for i in 1..=ROUNDS {
                n1.write_bytes_then_add(i);
            }
        });
        t1.join().unwrap();
        t0.join().unwrap()
    });
    assert_eq!(violations, 0, "a write overtook a later fetch-and-add");
    assert_eq!(nodes[1].region(R).unwrap().load(0), ROUNDS);
    assert_eq!(nodes[0].region(R).unwrap().load(0), ROUNDS);
    assert_eq!(nodes[0].region(R).unwrap().load(1), ROUNDS);
}

/// Node 1's side of [`busy_links_keep_order_whoever_reads_them`].
trait WriteThenAdd {
    fn write_bytes_then_add(&mut self, i: u64);
}

impl WriteThenAdd for TcpNode {
    fn write_bytes_then_add(&mut self, i: u64) {
        // The sequence number goes to local word 2, and from there to node 0's word 1.
        self.region(R).unwrap().store(2, i);
        self.write(
            NodeId(0),
            LocalSlice::new(R, 16, 8),
            RemoteAddr::new(R, 8),
            Signal::Unsignaled,
        )
        .unwrap();
        let op = self.fetch_add(NodeId(0), RemoteAddr::new(R, 0), 1).unwrap();
        assert_eq!(await_op(self, op).unwrap(), i - 1);
    }
}

/// A driver that waited (so the kernel handed its socket's wake-ups to it) and then stops
/// calling `poll` and `wait` does not stall its peers: the reader thread serves them. And a
/// driver blocked in `wait` serves them itself.
#[test]
fn peers_are_served_whether_the_driver_waits_or_is_away() {
    const ROUNDS: u64 = 200;
    let mut nodes = pair();
    let (a, b) = nodes.split_at_mut(1);
    let (n0, n1) = (&mut a[0], &mut b[0]);
    let waiting = AtomicBool::new(true);
    let waits = std::thread::scope(|s| {
        let waiting = &waiting;
        let t0 = s.spawn(move || {
            // Phase 1: node 0's driver is blocked in `wait` (long timeouts) the whole time.
            let mut waits = 0u64;
            while waiting.load(Ordering::Acquire) {
                n0.wait(Duration::from_secs(1));
                n0.poll(&mut []);
                waits += 1;
            }
            // Phase 2: it stays away (returns without touching the node again).
            waits
        });
        let faa = |n1: &mut TcpNode, expect: u64| {
            let op = n1.fetch_add(NodeId(0), RemoteAddr::new(R, 0), 1).unwrap();
            assert_eq!(await_op(n1, op).unwrap(), expect);
        };
        for i in 0..ROUNDS {
            faa(n1, i);
        }
        waiting.store(false, Ordering::Release);
        let waits = t0.join().unwrap();
        for i in ROUNDS..2 * ROUNDS {
            faa(n1, i);
        }
        waits
    });
    assert_eq!(nodes[0].region(R).unwrap().load(0), 2 * ROUNDS);
    // Node 0's driver was woken by the ops it served (not just by its timeouts).
    assert!(
        waits > 1,
        "the waiting driver was never woken by incoming ops"
    );
}

/// The peer crashes while the driver waits for its answer: the driver wakes at once (not at
/// its timeout), reports the peer failed once, and fails the op.
#[test]
fn a_peer_crash_wakes_the_waiting_driver_and_is_reported_once() {
    let mut nodes = pair();
    let mut n1 = nodes.pop().unwrap();
    let mut n0 = nodes.pop().unwrap();
    // Node 1 never answers in time: its I/O threads run, so silence its end to hold answers
    // back, then crash it while node 0 waits.
    n1.silence(NodeId(0));
    let op = n0
        .compare_and_swap(NodeId(1), RemoteAddr::new(R, 0), 0, 1)
        .unwrap();
    let crash = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        n1.shutdown();
    });
    let start = Instant::now();
    let mut failed = 0;
    let mut result = None;
    let mut events = [Event::PeerFailed {
        peer: NodeId(u32::MAX),
        cause: FailureCause::Local,
    }; 16];
    while result.is_none() {
        // One long wait: it must return because of the crash, well before its timeout.
        n0.wait(Duration::from_secs(60));
        let n = n0.poll(&mut events);
        for e in &events[..n] {
            match e {
                Event::PeerFailed { peer, .. } => {
                    assert_eq!(*peer, NodeId(1));
                    failed += 1;
                }
                Event::Completion(c) if c.op == op => result = Some(c.result),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the crash never woke the driver"
        );
    }
    crash.join().unwrap();
    assert_eq!(result, Some(Err(OpError::PeerFailed)));
    // Nothing more is reported later.
    n0.wait(Duration::from_millis(100));
    let n = n0.poll(&mut events);
    failed += events[..n]
        .iter()
        .filter(|e| matches!(e, Event::PeerFailed { .. }))
        .count();
    assert_eq!(failed, 1, "PeerFailed must be reported exactly once");
}

/// A driver that parks in `wait` with a long timeout between its round trips is always woken
/// by the answer (never by the timeout): a lost wake-up in the hand-off would stall a round
/// trip for the whole minute.
#[test]
fn parked_round_trips_are_woken_by_their_answers() {
    parked_round_trips(pair());
}

/// The same with spinning off (every `wait` parks at once while the driver owns its socket),
/// and with ownership off too (the reader thread takes answers that arrive before the driver
/// blocks, and wakes it).
#[test]
fn parked_round_trips_are_woken_by_their_answers_without_spinning_or_ownership() {
    parked_round_trips(pair_with(|c| c.spin_before_park = Duration::ZERO));
    parked_round_trips(pair_with(|c| {
        c.spin_before_park = Duration::ZERO;
        c.read_lease = Duration::ZERO;
    }));
}

/// A driver owns a link's socket while it waits for an answer on it (the reader thread leaves
/// arriving bytes to it). Here node 0's driver posts a compare-and-swap to node 1 and then
/// stays away (computes) without calling `poll` or `wait`, while node 1 streams fetch-and-adds to node 0 and waits for each: the reader thread must
/// take over after `read_lease`, or node 1's ops would wait for node 0's driver (and, away for
/// good, time out and fail the link). Both directions stay linearizable and in order.
#[test]
fn a_driver_that_owns_its_socket_and_goes_away_does_not_stall_its_peer() {
    const ROUNDS: u64 = 20;
    // Longer than the op timeout: were node 1's ops left to node 0's driver, they would fail.
    const AWAY: Duration = Duration::from_secs(2);
    let mut nodes = pair();
    let lease = nodes[0].config().read_lease;
    let (a, b) = nodes.split_at_mut(1);
    let (n0, n1) = (&mut a[0], &mut b[0]);
    let done = AtomicBool::new(false);
    let slowest = std::thread::scope(|s| {
        let done = &done;
        s.spawn(move || {
            let mut i = 0;
            while !done.load(Ordering::Acquire) {
                let op = n0
                    .compare_and_swap(NodeId(1), RemoteAddr::new(R, 8), i, i + 1)
                    .unwrap();
                // Away with the socket owned: the answer and node 1's ops arrive meanwhile.
                let t = Instant::now();
                while t.elapsed() < AWAY && !done.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                assert_eq!(await_op(n0, op), Ok(i));
                i += 1;
            }
        });
        let mut slowest = Duration::ZERO;
        for i in 0..ROUNDS {
            let t = Instant::now();
            let op = n1.fetch_add(NodeId(0), RemoteAddr::new(R, 0), 1).unwrap();
            assert_eq!(await_op(n1, op), Ok(i));
            slowest = slowest.max(t.elapsed());
        }
        done.store(true, Ordering::Release);
        slowest
    });
    assert_eq!(nodes[0].region(R).unwrap().load(0), ROUNDS);
    // Served within about the lease (generous for a loaded machine), not when the driver came
    // back.
    eprintln!(
        "slowest fetch-and-add while node 0's driver was away: {slowest:?} (lease {lease:?})"
    );
    assert!(
        slowest < Duration::from_millis(300),
        "node 1's ops waited for node 0's driver ({slowest:?})"
    );
}

fn parked_round_trips(mut nodes: Vec<TcpNode>) {
    const ROUNDS: u64 = 3000;
    let start = Instant::now();
    let mut events = [Event::PeerFailed {
        peer: NodeId(u32::MAX),
        cause: FailureCause::Local,
    }; 16];
    let mut slowest = Duration::ZERO;
    for i in 0..ROUNDS {
        let t = Instant::now();
        let op = nodes[0]
            .compare_and_swap(NodeId(1), RemoteAddr::new(R, 0), i, i + 1)
            .unwrap();
        loop {
            let n = nodes[0].poll(&mut events);
            if let Some(e) = events[..n].first() {
                assert_eq!(n, 1, "unexpected {:?}", &events[..n]);
                match e {
                    Event::Completion(c) if c.op == op => assert_eq!(c.result, Ok(i)),
                    other => panic!("unexpected {other:?}"),
                }
                break;
            }
            nodes[0].wait(Duration::from_secs(60));
            assert!(start.elapsed() < DEADLINE, "round trip {i} was not woken");
        }
        slowest = slowest.max(t.elapsed());
    }
    eprintln!(
        "{ROUNDS} parked round trips in {:?}, slowest {slowest:?}",
        start.elapsed()
    );
}
