//! The checks. Each builds a fresh cluster, runs one program per node, and verifies one
//! guarantee of the transport contract.

use std::collections::{BTreeMap, VecDeque};

use super::{Fabric, Progress, Slot, Violation, drain};
use crate::error::{FailureCause, OpError, PostError};
use crate::ids::{NodeId, OpId, RegionId};
use crate::op::{Event, LocalSlice, OpKind, RemoteAddr, Signal};
use crate::region::{Region, RegionSpec};
use crate::transport::Transport;

/// The region peers write into.
pub const DATA: RegionId = RegionId(0);
/// The region ops read from and land in locally.
pub const SCRATCH: RegionId = RegionId(1);

/// The layout every check registers on every node.
pub fn layout() -> [RegionSpec; 2] {
    [RegionSpec::new(DATA, 4096), RegionSpec::new(SCRATCH, 8192)]
}

/// Every check by name, in the order [`run_all`](super::run_all) runs them.
pub const CHECKS: &[(&str, &str)] = &[
    (
        "fifo_per_link",
        "ops on one link apply in post order; completions arrive in post order",
    ),
    (
        "fence_makes_writes_visible",
        "after a fence completes, a third node reads the fenced write",
    ),
    (
        "no_torn_words",
        "concurrent writers and readers never see a torn aligned word",
    ),
    (
        "cas_linearizable",
        "contending CAS loops from many links and the owner never lose an update",
    ),
    (
        "fetch_add_exact",
        "fetch-adds from many links return a permutation of the old values",
    ),
    (
        "reads_see_applied_state",
        "a read returns what was applied before it, locally or remotely",
    ),
    (
        "messages_intact_and_ordered",
        "sends arrive whole and in order; oversized ones are refused",
    ),
    (
        "bad_ops_refused",
        "bad ops get a typed error when posted and are never applied",
    ),
    (
        "peer_failure_reported_once",
        "a crashed peer is reported once; every op to it fails",
    ),
    (
        "timeouts_fire",
        "ops across a partition fail within the timeout",
    ),
    (
        "failed_peer_writes_dropped",
        "once a peer is declared failed, nothing it sends is applied",
    ),
    (
        "failed_peer_in_flight_writes_dropped",
        "writes a peer posted before it was declared failed are not applied after the declaration",
    ),
    (
        "late_links",
        "a node started late is absent (NotConnected, never failed), then connects once",
    ),
    (
        "rejoin_new_incarnation",
        "a restarted peer's old incarnation fails once; its new one links; stale reports spare it",
    ),
    (
        "absent_peer_reported_failed",
        "a peer declared failed while absent is reported once and that process never links",
    ),
];

pub(super) fn all<F: Fabric>() -> Vec<(&'static str, super::Check<F>)> {
    vec![
        ("fifo_per_link", fifo_per_link::<F>),
        (
            "fence_makes_writes_visible",
            fence_makes_writes_visible::<F>,
        ),
        ("no_torn_words", no_torn_words::<F>),
        ("cas_linearizable", cas_linearizable::<F>),
        ("fetch_add_exact", fetch_add_exact::<F>),
        ("reads_see_applied_state", reads_see_applied_state::<F>),
        (
            "messages_intact_and_ordered",
            messages_intact_and_ordered::<F>,
        ),
        ("bad_ops_refused", bad_ops_refused::<F>),
        (
            "peer_failure_reported_once",
            peer_failure_reported_once::<F>,
        ),
        ("timeouts_fire", timeouts_fire::<F>),
        (
            "failed_peer_writes_dropped",
            failed_peer_writes_dropped::<F>,
        ),
        (
            "failed_peer_in_flight_writes_dropped",
            failed_peer_in_flight_writes_dropped::<F>,
        ),
        ("late_links", late_links::<F>),
        ("rejoin_new_incarnation", rejoin_new_incarnation::<F>),
        (
            "absent_peer_reported_failed",
            absent_peer_reported_failed::<F>,
        ),
    ]
}

/// Problems found by one check, turned into a [`Violation`] at the end.
struct Problems {
    check: &'static str,
    found: Vec<String>,
}

impl Problems {
    fn new(check: &'static str) -> Problems {
        Problems {
            check,
            found: Vec::new(),
        }
    }

    fn add(&mut self, what: String) {
        // Keep the first few: the first is what matters, the rest show the pattern.
        if self.found.len() < 8 {
            self.found.push(what);
        }
    }

    fn post(&mut self, what: &str, r: Result<OpId, PostError>) -> Option<OpId> {
        match r {
            Ok(op) => Some(op),
            Err(e) => {
                self.add(format!("posting {what} was refused: {e}"));
                None
            }
        }
    }

    fn verdict(self) -> Result<(), Violation> {
        if self.found.is_empty() {
            Ok(())
        } else {
            Err(Violation {
                check: self.check,
                detail: self.found.join("; "),
            })
        }
    }

    fn stalled(&mut self, r: Result<(), super::Stalled>) {
        if let Err(s) = r {
            self.add(format!("nothing may hang, but {s}"));
        }
    }
}

fn region<T: Transport>(node: &T, id: RegionId) -> Region {
    node.region(id).cloned().unwrap_or_else(|| {
        panic!(
            "the fabric did not register region {id} on {}",
            node.local_id()
        )
    })
}

fn untorn(v: u64) -> bool {
    (v >> 32) == (v & 0xffff_ffff)
}

/// FIFO application per link, for writes, atomics and sends interleaved, and in-order
/// completions. A receiver that sees guard `g` must see every op posted before guard `g`.
pub fn fifo_per_link<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    const K: u64 = 300;
    const SLOTS: u64 = 16;
    const GUARD: usize = 200;
    const FAA: usize = 201;
    const CASW: usize = 202;
    let mut p = Problems::new("fifo_per_link");
    let mut q = Problems::new("fifo_per_link");
    let mut nodes = f.build(2, &layout());
    let b = NodeId(1);

    /// One op of the sender's plan; a full send queue leaves it at the head to retry.
    #[derive(Clone, Copy)]
    enum Planned {
        Write(u64, Signal),
        FetchAdd(u64),
        Cas(u64),
        Send(u64),
        Guard(u64),
    }
    let mut i = 0u64;
    let mut plan: VecDeque<Planned> = VecDeque::new();
    let mut expected: VecDeque<(OpId, OpKind, u64)> = VecDeque::new();
    let sender = |n: &mut F::Node| {
        if plan.is_empty() && i < K {
            i += 1;
            region(n, SCRATCH).store(i as usize, i);
            let signal = if i % 10 == 0 {
                Signal::Signaled
            } else {
                Signal::Unsignaled
            };
            plan.extend([
                Planned::Write(i, signal),
                Planned::FetchAdd(i),
                Planned::Cas(i),
            ]);
            if i % 4 == 0 {
                plan.push_back(Planned::Send(i));
            }
            plan.push_back(Planned::Guard(i));
        }
        while let Some(&next) = plan.front() {
            let (posted, expect) = match next {
                Planned::Write(i, signal) => {
                    let src = LocalSlice::new(SCRATCH, i as usize * 8, 8);
                    let slot = RemoteAddr::new(DATA, (i % SLOTS) as usize * 8);
                    let expect = (signal == Signal::Signaled).then_some((OpKind::Write, 0));
                    (n.write(b, src, slot, signal), expect)
                }
                Planned::FetchAdd(i) => {
                    let faa = n.fetch_add(b, RemoteAddr::new(DATA, FAA * 8), 1);
                    (faa, Some((OpKind::FetchAdd, i - 1)))
                }
                Planned::Cas(i) => {
                    let word = RemoteAddr::new(DATA, CASW * 8);
                    let cas = n.compare_and_swap(b, word, i - 1, i);
                    (cas, Some((OpKind::CompareAndSwap, i - 1)))
                }
                Planned::Send(i) => (n.send(b, &i.to_le_bytes(), Signal::Unsignaled), None),
                Planned::Guard(i) => {
                    let src = LocalSlice::new(SCRATCH, i as usize * 8, 8);
                    let guard = RemoteAddr::new(DATA, GUARD * 8);
                    (n.write(b, src, guard, Signal::Unsignaled), None)
                }
            };
            match posted {
                Ok(op) => {
                    plan.pop_front();
                    if let Some((kind, value)) = expect {
                        expected.push_back((op, kind, value));
                    }
                }
                Err(PostError::QueueFull { .. }) => break,
                Err(e) => {
                    p.add(format!("posting was refused: {e}"));
                    plan.clear();
                    break;
                }
            }
        }
        drain(n, |e| match e {
            Event::Completion(c) => match expected.pop_front() {
                Some((op, kind, value)) if op == c.op => {
                    if c.kind != kind || c.result != Ok(value) {
                        p.add(format!(
                            "{:?} {} completed with {:?}, expected Ok({value}) (ops applied out of order)",
                            c.kind, c.op, c.result
                        ));
                    }
                }
                Some((op, _, _)) => p.add(format!(
                    "completion for {} arrived while {op} (posted earlier) was still pending",
                    c.op
                )),
                None => p.add(format!("unexpected completion {c:?}")),
            },
            Event::PeerFailed { peer, cause } => p.add(format!("{peer} reported failed: {cause}")),
            Event::PeerConnected { peer, .. } => p.add(format!(
                "{peer}, linked from the start, was reported connected"
            )),
        });
        if i == K && plan.is_empty() && expected.is_empty() || !p.found.is_empty() {
            Progress::Done
        } else if plan.is_empty() && i < K {
            Progress::Busy
        } else {
            Progress::Idle
        }
    };

    let mut last_guard = 0u64;
    let mut last_msg = 0u64;
    let mut buf = Vec::new();
    let receiver = |n: &mut F::Node| {
        let data = region(n, DATA);
        let g = data.load(GUARD);
        if g < last_guard {
            q.add(format!("guard went back from {last_guard} to {g}"));
        }
        if g > last_guard {
            last_guard = g;
            let (faa, cas) = (data.load(FAA), data.load(CASW));
            if faa < g || cas < g {
                q.add(format!(
                    "saw guard {g} but fetch_add count {faa} and CAS word {cas}: atomics posted before the guard were not applied before it"
                ));
            }
            for s in 0..SLOTS {
                let want = if g >= s && g - s >= SLOTS * u64::from(s == 0) {
                    g - (g - s) % SLOTS
                } else {
                    0
                };
                let have = data.load(s as usize);
                if have < want {
                    q.add(format!(
                        "saw guard {g} but slot {s} holds {have}, expected at least {want}: writes reordered"
                    ));
                }
            }
        }
        while let Some(from) = n.recv(&mut buf) {
            let v = <[u8; 8]>::try_from(buf.as_slice()).map(u64::from_le_bytes);
            match v {
                Ok(v) if from == NodeId(0) && v == last_msg + 4 => {
                    last_msg = v;
                    let (faa, cas, guard) = (data.load(FAA), data.load(CASW), data.load(GUARD));
                    if faa < v || cas < v || guard + 1 < v {
                        q.add(format!(
                            "message {v} overtook ops posted before it (fetch_add {faa}, CAS {cas}, guard {guard})"
                        ));
                    }
                }
                other => q.add(format!(
                    "message {other:?} from {from} out of order after {last_msg}"
                )),
            }
        }
        if (last_guard == K && last_msg == K / 4 * 4) || !q.found.is_empty() {
            if data.load(FAA) != K || data.load(CASW) != K {
                q.add(format!(
                    "finished with fetch_add count {} and CAS word {}, expected {K}",
                    data.load(FAA),
                    data.load(CASW)
                ));
            }
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let r = f.run(
        &mut nodes,
        vec![Some(Box::new(sender)), Some(Box::new(receiver))],
    );
    p.stalled(r);
    p.found.extend(q.found);
    p.verdict()
}

/// After a fence completes, the fenced write is visible to everyone: a third node told about it
/// over another link reads it back.
pub fn fence_makes_writes_visible<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    const ROUNDS: u8 = 20;
    const LEN: usize = 1024;
    let mut p = Problems::new("fence_makes_writes_visible");
    let mut q = Problems::new("fence_makes_writes_visible");
    let mut nodes = f.build(3, &layout());
    let (b, c) = (NodeId(1), NodeId(2));

    let mut buf = Vec::new();

    let mut round = 1u8;
    let mut fence: Option<OpId> = None;
    let mut told = false;
    let writer = |n: &mut F::Node| {
        if round > ROUNDS || !p.found.is_empty() {
            return Progress::Done;
        }
        if fence.is_none() && !told {
            let _ = region(n, SCRATCH).write_bytes(0, &[round; LEN]);
            let src = LocalSlice::new(SCRATCH, 0, LEN);
            p.post(
                "write",
                n.write(b, src, RemoteAddr::new(DATA, 0), Signal::Unsignaled),
            );
            fence = p.post("fence", n.fence(b));
        }
        let mut fenced = false;
        drain(n, |e| match e {
            Event::Completion(x) if Some(x.op) == fence && x.result.is_ok() => fenced = true,
            other => p.add(format!("unexpected event {other:?}")),
        });
        if fenced {
            fence = None;
            told = true;
            p.post("send", n.send(c, &[round], Signal::Unsignaled));
        }
        while let Some(from) = n.recv(&mut buf) {
            if from == c && buf == [round] {
                round += 1;
                told = false;
            } else {
                p.add(format!("unexpected message {buf:?} from {from}"));
            }
        }
        Progress::Idle
    };

    let mut seen = 0u8;
    let mut reading: Option<(OpId, u8)> = None;
    let mut buf2 = Vec::new();
    let reader = |n: &mut F::Node| {
        if seen == ROUNDS || !q.found.is_empty() {
            return Progress::Done;
        }
        if reading.is_none() {
            if let Some(from) = n.recv(&mut buf2) {
                if from != NodeId(0) || buf2.len() != 1 {
                    q.add(format!("unexpected message {buf2:?} from {from}"));
                    return Progress::Done;
                }
                let dst = LocalSlice::new(SCRATCH, 0, LEN);
                if let Some(op) = q.post("read", n.read(b, RemoteAddr::new(DATA, 0), dst)) {
                    reading = Some((op, buf2[0]));
                }
            }
        }
        let mut done_read = None;
        drain(n, |e| match e {
            Event::Completion(x) if reading.map(|r| r.0) == Some(x.op) => done_read = Some(x),
            other => q.add(format!("unexpected event {other:?}")),
        });
        if let (Some(x), Some((_, r))) = (done_read, reading) {
            let mut got = vec![0u8; LEN];
            let _ = region(n, SCRATCH).read_bytes(0, &mut got);
            if x.result.is_err() || got.iter().any(|&v| v != r) {
                q.add(format!(
                    "round {r}: read after the writer's fence returned {:?} / byte {}, expected {r}",
                    x.result,
                    got.iter().find(|&&v| v != r).copied().unwrap_or(r)
                ));
            }
            seen = r;
            reading = None;
            q.post("send", n.send(NodeId(0), &[r], Signal::Unsignaled));
        }
        Progress::Idle
    };
    let r = f.run(
        &mut nodes,
        vec![Some(Box::new(writer)), None, Some(Box::new(reader))],
    );
    p.stalled(r);
    p.found.extend(q.found);
    p.verdict()
}

/// Two writers hammer the same eight words of a third node with 64-byte writes whose every word
/// has equal halves; the owner and a remote reader must never see a word with unequal halves.
pub fn no_torn_words<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    const K: u32 = 400;
    let mut problems = [
        Problems::new("no_torn_words"),
        Problems::new("no_torn_words"),
        Problems::new("no_torn_words"),
    ];
    let [p0, p1, p2] = &mut problems;
    let mut nodes = f.build(3, &layout());

    fn writer<T: Transport>(p: &mut Problems, w: u32) -> impl FnMut(&mut T) -> Progress + Send {
        let mut i = 0u32;
        let mut fence: Option<OpId> = None;
        let mut read: Option<OpId> = None;
        let mut finished = false;
        move |n: &mut T| {
            let target = NodeId(1);
            if fence.is_none() && i < K {
                let scratch = region(n, SCRATCH);
                // Post a burst of 32 writes from 32 distinct source slots, then a fence before
                // any slot is reused (sources must not change until applied).
                for _ in 0..32 {
                    i += 1;
                    let x = u64::from(((w + 1) << 24) | i);
                    let slot = (i % 32) as usize * 64;
                    for k in 0..8 {
                        scratch.store(slot / 8 + k, (x << 32) | x);
                    }
                    let src = LocalSlice::new(SCRATCH, slot, 64);
                    p.post(
                        "write",
                        n.write(target, src, RemoteAddr::new(DATA, 0), Signal::Unsignaled),
                    );
                }
                fence = p.post("fence", n.fence(target));
                if read.is_none() {
                    let dst = LocalSlice::new(SCRATCH, 4096, 64);
                    read = p.post("read", n.read(target, RemoteAddr::new(DATA, 0), dst));
                }
            }
            let (mut fenced, mut was_read) = (false, false);
            drain(n, |e| match e {
                Event::Completion(c) if Some(c.op) == fence => fenced = c.result.is_ok(),
                Event::Completion(c) if Some(c.op) == read => was_read = c.result.is_ok(),
                other => p.add(format!("unexpected event {other:?}")),
            });
            if fenced {
                fence = None;
            }
            if was_read {
                read = None;
                let scratch = region(n, SCRATCH);
                for k in 0..8 {
                    let v = scratch.load(4096 / 8 + k);
                    if !untorn(v) {
                        p.add(format!("remote read saw torn word {v:#018x}"));
                    }
                }
            }
            if i >= K && fence.is_none() && read.is_none() && !finished {
                finished = true;
                p.post("send", n.send(target, b"done", Signal::Unsignaled));
            }
            if finished || !p.found.is_empty() {
                Progress::Done
            } else {
                Progress::Busy
            }
        }
    }

    let mut done = 0;
    let mut buf = Vec::new();
    let owner = |n: &mut F::Node| {
        let data = region(n, DATA);
        for k in 0..8 {
            let v = data.load(k);
            let tag = (v >> 24) & 0xff;
            if !untorn(v) || !(tag == 0 || tag == 1 || tag == 3) {
                p1.add(format!("owner saw torn or invented word {v:#018x}"));
            }
        }
        while n.recv(&mut buf).is_some() {
            done += 1;
        }
        if done == 2 || !p1.found.is_empty() {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let r = f.run(
        &mut nodes,
        vec![
            Some(Box::new(writer::<F::Node>(p0, 0))),
            Some(Box::new(owner)),
            Some(Box::new(writer::<F::Node>(p2, 2))),
        ],
    );
    let [mut p0, p1, p2] = problems;
    p0.stalled(r);
    p0.found.extend(p1.found);
    p0.found.extend(p2.found);
    p0.verdict()
}

/// Runs one CAS-increment loop per remote node against word 0 of node 0 while node 0 increments
/// the same word with local atomics; returns the old values each successful CAS saw.
fn contended_counter<F: Fabric>(
    f: &mut F,
    p: &mut Problems,
    n: usize,
    k: u64,
    use_cas: bool,
) -> (Vec<u64>, u64) {
    let mut nodes = f.build(n, &layout());
    let mut olds: Vec<Vec<u64>> = vec![Vec::new(); n];
    let mut slots: Vec<Problems> = (0..n).map(|_| Problems::new(p.check)).collect();
    let mut programs: Vec<Slot<'_, F::Node>> = Vec::new();
    for (idx, (mine, q)) in olds.iter_mut().zip(slots.iter_mut()).enumerate() {
        if idx == 0 {
            programs.push(Some(Box::new(move |n: &mut F::Node| {
                let data = region(n, DATA);
                if use_cas {
                    let mut guess = data.load(0);
                    loop {
                        match data.compare_and_swap(0, guess, guess + 1) {
                            Ok(old) => {
                                mine.push(old);
                                break;
                            }
                            Err(actual) => guess = actual,
                        }
                    }
                } else {
                    mine.push(data.fetch_add(0, 1));
                }
                if mine.len() as u64 == k {
                    Progress::Done
                } else {
                    Progress::Busy
                }
            })));
            continue;
        }
        let word = RemoteAddr::new(DATA, 0);
        let owner = NodeId(0);
        let mut guess = 0u64;
        let mut outstanding = 0u64;
        let mut posted = 0u64;
        programs.push(Some(Box::new(move |n: &mut F::Node| {
            if use_cas {
                if outstanding == 0 {
                    let r = n.compare_and_swap(owner, word, guess, guess + 1);
                    if q.post("compare_and_swap", r).is_some() {
                        outstanding = 1;
                    }
                }
            } else {
                while outstanding < 8 && posted < k {
                    if q.post("fetch_add", n.fetch_add(owner, word, 1)).is_none() {
                        break;
                    }
                    outstanding += 1;
                    posted += 1;
                }
            }
            drain(n, |e| match e {
                Event::Completion(c) => {
                    outstanding -= 1;
                    match c.result {
                        Ok(old) if !use_cas || old == guess => {
                            mine.push(old);
                            guess = old + 1;
                        }
                        Ok(old) => guess = old,
                        Err(e) => q.add(format!("{:?} failed: {e}", c.kind)),
                    }
                }
                other => q.add(format!("unexpected event {other:?}")),
            });
            if mine.len() as u64 == k || !q.found.is_empty() {
                Progress::Done
            } else {
                Progress::Idle
            }
        })));
    }
    let r = f.run(&mut nodes, programs);
    p.stalled(r);
    for q in slots {
        p.found.extend(q.found);
    }
    let final_value = region(&nodes[0], DATA).load(0);
    (olds.into_iter().flatten().collect(), final_value)
}

fn check_permutation(p: &mut Problems, mut olds: Vec<u64>, final_value: u64, total: u64) {
    if final_value != total {
        p.add(format!(
            "final counter {final_value}, expected {total}: updates were lost"
        ));
    }
    olds.sort_unstable();
    if olds.len() as u64 != total || olds.iter().enumerate().any(|(i, &v)| v != i as u64) {
        let dup = olds.windows(2).find(|w| w[0] == w[1]).map(|w| w[0]);
        p.add(format!(
            "the {} successful updates did not see each old value 0..{total} exactly once (first duplicate: {dup:?})",
            olds.len()
        ));
    }
}

/// Three links and the owner's local atomics race CAS-increment loops on one word; the word
/// ends at exactly N·k and the successful CASes saw every old value exactly once.
pub fn cas_linearizable<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    const N: usize = 4;
    const K: u64 = 150;
    let mut p = Problems::new("cas_linearizable");
    let (olds, final_value) = contended_counter(f, &mut p, N, K, true);
    check_permutation(&mut p, olds, final_value, N as u64 * K);
    p.verdict()
}

/// Pipelined fetch-adds from three links plus the owner's local ones return each old value
/// exactly once and sum exactly.
pub fn fetch_add_exact<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    const N: usize = 4;
    const K: u64 = 200;
    let mut p = Problems::new("fetch_add_exact");
    let (olds, final_value) = contended_counter(f, &mut p, N, K, false);
    check_permutation(&mut p, olds, final_value, N as u64 * K);
    p.verdict()
}

/// A read returns the state applied before it: the owner's local store made before it told the
/// reader, and the reader's own earlier write on the same link.
pub fn reads_see_applied_state<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    const ROUNDS: u64 = 50;
    let mut p = Problems::new("reads_see_applied_state");
    let mut q = Problems::new("reads_see_applied_state");
    let mut nodes = f.build(2, &layout());
    let (a, b) = (NodeId(0), NodeId(1));

    let mut round = 0u64;
    let mut waiting = false;
    let mut buf = Vec::new();
    let owner = |n: &mut F::Node| {
        if !waiting {
            if round == ROUNDS {
                return Progress::Done;
            }
            round += 1;
            region(n, DATA).store(5, round * 7 + 1);
            p.post("send", n.send(a, &round.to_le_bytes(), Signal::Unsignaled));
            waiting = true;
        }
        if n.recv(&mut buf).is_some() {
            waiting = false;
        }
        drain(n, |e| p.add(format!("unexpected event {e:?}")));
        if p.found.is_empty() {
            Progress::Idle
        } else {
            Progress::Done
        }
    };

    let mut buf2 = Vec::new();
    // (round, reads still outstanding)
    let mut pending: Option<(u64, u32)> = None;
    let mut seen = 0u64;
    let reader = |n: &mut F::Node| {
        if pending.is_none() {
            if seen == ROUNDS || !q.found.is_empty() {
                return Progress::Done;
            }
            if n.recv(&mut buf2).is_none() {
                return Progress::Idle;
            }
            let r = seen + 1;
            region(n, SCRATCH).store(1, r);
            let first = n.read(b, RemoteAddr::new(DATA, 40), LocalSlice::new(SCRATCH, 0, 8));
            q.post("read", first);
            let src = LocalSlice::new(SCRATCH, 8, 8);
            q.post(
                "write",
                n.write(b, src, RemoteAddr::new(DATA, 48), Signal::Unsignaled),
            );
            let second = n.read(
                b,
                RemoteAddr::new(DATA, 48),
                LocalSlice::new(SCRATCH, 16, 8),
            );
            q.post("read", second);
            pending = Some((r, 2));
        }
        drain(n, |e| match (e, pending.as_mut()) {
            (Event::Completion(c), Some((_, left))) if c.result.is_ok() && *left > 0 => *left -= 1,
            (other, _) => q.add(format!("unexpected event {other:?}")),
        });
        if let Some((r, 0)) = pending {
            let scratch = region(n, SCRATCH);
            let (x, y) = (scratch.load(0), scratch.load(2));
            if x != r * 7 + 1 {
                q.add(format!(
                    "round {r}: read returned {x}, but the owner stored {} before telling us",
                    r * 7 + 1
                ));
            }
            if y != r {
                q.add(format!(
                    "round {r}: read returned {y}, but our own write of {r} was posted before it on the same link"
                ));
            }
            seen = r;
            pending = None;
            q.post("send", n.send(b, b"ack", Signal::Unsignaled));
        }
        Progress::Idle
    };
    let r = f.run(
        &mut nodes,
        vec![Some(Box::new(reader)), Some(Box::new(owner))],
    );
    p.stalled(r);
    p.found.extend(q.found);
    p.verdict()
}

fn message_bytes(seq: usize, len: usize) -> impl Iterator<Item = u8> {
    (0..len).map(move |i| (seq.wrapping_mul(31).wrapping_add(i)) as u8)
}

/// Messages of many sizes, up to the maximum, arrive whole and in order; one byte more is
/// refused at post.
pub fn messages_intact_and_ordered<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    let mut p = Problems::new("messages_intact_and_ordered");
    let mut q = Problems::new("messages_intact_and_ordered");
    let mut nodes = f.build(2, &layout());
    let max = nodes[0].max_message_len();
    let cap = max.min(64 * 1024);
    let sizes: Vec<usize> = [0, 1, 7, 8, 9, 100, cap / 2, cap]
        .iter()
        .copied()
        .cycle()
        .take(40)
        .collect();
    let total = sizes.len();

    let mut next = 0usize;
    let mut refused_checked = false;
    let sizes_tx = sizes.clone();
    let sender = |n: &mut F::Node| {
        // Post in order; a full send queue is back-pressure, not an error: poll and retry.
        while let Some(&len) = sizes_tx.get(next) {
            let data: Vec<u8> = message_bytes(next, len).collect();
            match n.send(NodeId(1), &data, Signal::Unsignaled) {
                Ok(_) => next += 1,
                Err(PostError::QueueFull { .. }) => break,
                Err(e) => {
                    p.add(format!("send {next} was refused: {e}"));
                    return Progress::Done;
                }
            }
        }
        if !refused_checked && max < usize::MAX {
            refused_checked = true;
            let too_big = vec![0u8; max + 1];
            match n.send(NodeId(1), &too_big, Signal::Unsignaled) {
                Err(PostError::MessageTooLarge { len, max: m }) if len == max + 1 && m == max => {}
                other => p.add(format!(
                    "a {}-byte message (max {max}) was not refused with MessageTooLarge: {other:?}",
                    max + 1
                )),
            }
        }
        drain(n, |e| p.add(format!("unexpected event {e:?}")));
        if next == sizes_tx.len() || !p.found.is_empty() {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let mut got = 0usize;
    let mut buf = Vec::new();
    let receiver = |n: &mut F::Node| {
        while let Some(from) = n.recv(&mut buf) {
            let want: Vec<u8> = match sizes.get(got) {
                Some(&len) => message_bytes(got, len).collect(),
                None => {
                    q.add(format!("message {got} was never sent"));
                    return Progress::Done;
                }
            };
            if from != NodeId(0) || buf != want {
                q.add(format!(
                    "message {got} from {from}: {} bytes differ from the {} sent (or arrived out of order)",
                    buf.len(),
                    want.len()
                ));
            }
            got += 1;
        }
        if got == total || !q.found.is_empty() {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let r = f.run(
        &mut nodes,
        vec![Some(Box::new(sender)), Some(Box::new(receiver))],
    );
    p.stalled(r);
    p.found.extend(q.found);
    p.verdict()
}

/// Out-of-bounds, misaligned, unknown-region and unknown-peer ops are refused with the right
/// typed error when posted, never applied, and produce no completion.
pub fn bad_ops_refused<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    let mut p = Problems::new("bad_ops_refused");
    let mut nodes = f.build(2, &layout());
    let (me, b) = (NodeId(0), NodeId(1));
    let _ = region(&nodes[0], SCRATCH).write_bytes(0, &[0xff; 8192]);
    let unknown = RegionId(99);

    let mut fence = None;
    let mut fenced = false;
    let mut posted = false;
    let client = |n: &mut F::Node| {
        if !posted {
            posted = true;
            let src = LocalSlice::new(SCRATCH, 0, 8);
            let at = |o| RemoteAddr::new(DATA, o);
            type Bad = fn(&PostError) -> bool;
            let oob: Bad = |e| matches!(e, PostError::OutOfBounds { .. });
            let misaligned: Bad = |e| matches!(e, PostError::Misaligned { .. });
            let peer: Bad = |e| matches!(e, PostError::UnknownPeer { .. });
            let cases: Vec<(&str, Result<OpId, PostError>, Bad)> = vec![
                (
                    "write past the remote end",
                    n.write(b, src, at(4092), Signal::Signaled),
                    oob,
                ),
                (
                    "write from past the local end",
                    n.write(
                        b,
                        LocalSlice::new(SCRATCH, 8190, 8),
                        at(0),
                        Signal::Signaled,
                    ),
                    oob,
                ),
                (
                    "write at an overflowing offset",
                    n.write(b, src, at(usize::MAX - 3), Signal::Signaled),
                    oob,
                ),
                (
                    "write from an unknown local region",
                    n.write(b, LocalSlice::new(unknown, 0, 8), at(0), Signal::Signaled),
                    |e| matches!(e, PostError::UnknownLocalRegion { .. }),
                ),
                (
                    "write to an unknown remote region",
                    n.write(b, src, RemoteAddr::new(unknown, 0), Signal::Signaled),
                    |e| matches!(e, PostError::UnknownRemoteRegion { .. }),
                ),
                (
                    "write to an unknown node",
                    n.write(NodeId(99), src, at(0), Signal::Signaled),
                    peer,
                ),
                (
                    "write to itself",
                    n.write(me, src, at(0), Signal::Signaled),
                    peer,
                ),
                (
                    "misaligned CAS",
                    n.compare_and_swap(b, at(4), 0, 1),
                    misaligned,
                ),
                (
                    "CAS past the end",
                    n.compare_and_swap(b, at(4096), 0, 1),
                    oob,
                ),
                ("misaligned fetch_add", n.fetch_add(b, at(3), 1), misaligned),
                (
                    "read past the end",
                    n.read(b, at(4090), LocalSlice::new(SCRATCH, 0, 8)),
                    oob,
                ),
                (
                    "read into past the local end",
                    n.read(b, at(0), LocalSlice::new(SCRATCH, 8188, 8)),
                    oob,
                ),
                (
                    "send to an unknown node",
                    n.send(NodeId(99), b"x", Signal::Signaled),
                    peer,
                ),
                ("fence to an unknown node", n.fence(NodeId(99)), peer),
            ];
            for (what, result, ok) in cases {
                match result {
                    Err(e) if ok(&e) => {}
                    Err(e) => p.add(format!("{what} was refused with the wrong error: {e:?}")),
                    Ok(op) => p.add(format!("{what} was accepted as {op}")),
                }
            }
            fence = p.post("fence", n.fence(b));
        }
        drain(n, |e| match e {
            Event::Completion(c) if Some(c.op) == fence && c.result.is_ok() => fenced = true,
            other => p.add(format!("a refused op produced an event: {other:?}")),
        });
        if fenced || !p.found.is_empty() {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let r = f.run(&mut nodes, vec![Some(Box::new(client)), None]);
    p.stalled(r);
    if region(&nodes[1], DATA).snapshot().iter().any(|&v| v != 0) {
        p.add("a refused op changed the peer's memory".into());
    }
    p.verdict()
}

/// Which kinds of op a failure check posts, all to the same peer.
fn post_everything<T: Transport>(
    n: &mut T,
    p: &mut Problems,
    peer: NodeId,
) -> (Vec<OpId>, Vec<OpId>) {
    let src = LocalSlice::new(SCRATCH, 0, 64);
    let at = |o| RemoteAddr::new(DATA, o);
    let mut signaled = Vec::new();
    let mut unsignaled = Vec::new();
    for k in 0..4 {
        unsignaled.extend(p.post("write", n.write(peer, src, at(64 * k), Signal::Unsignaled)));
    }
    unsignaled.extend(p.post("send", n.send(peer, b"hello", Signal::Unsignaled)));
    signaled.extend(p.post("write", n.write(peer, src, at(512), Signal::Signaled)));
    signaled.extend(p.post("cas", n.compare_and_swap(peer, at(0), 0, 1)));
    signaled.extend(p.post("fetch_add", n.fetch_add(peer, at(8), 1)));
    let dst = LocalSlice::new(SCRATCH, 1024, 64);
    signaled.extend(p.post("read", n.read(peer, at(0), dst)));
    signaled.extend(p.post("send", n.send(peer, b"hello", Signal::Signaled)));
    signaled.extend(p.post("fence", n.fence(peer)));
    (signaled, unsignaled)
}

/// Tracks what a failure check observed on one node.
#[derive(Default)]
struct FailureLog {
    failed: BTreeMap<NodeId, Vec<FailureCause>>,
    completions: BTreeMap<OpId, Result<u64, OpError>>,
    /// Set when an error completion for a peer arrived before that peer's PeerFailed event.
    error_before_report: Option<OpId>,
}

impl FailureLog {
    fn record(&mut self, p: &mut Problems, e: Event) {
        match e {
            Event::PeerFailed { peer, cause } => self.failed.entry(peer).or_default().push(cause),
            Event::PeerConnected { peer, .. } => {
                p.add(format!(
                    "{peer}, linked from the start, was reported connected"
                ));
            }
            Event::Completion(c) => {
                if c.result.is_err() && !self.failed.contains_key(&c.peer) {
                    self.error_before_report.get_or_insert(c.op);
                }
                if self.completions.insert(c.op, c.result).is_some() {
                    p.add(format!("{} completed twice", c.op));
                }
            }
        }
    }

    fn all_failed(&self, ops: &[OpId]) -> bool {
        ops.iter()
            .all(|op| matches!(self.completions.get(op), Some(Err(_))))
    }
}

/// A crashed peer is reported exactly once, before the error completions it causes; every op
/// posted to it afterwards fails (unsignaled ones too), every op pending at the crash completes
/// one way or the other, within the timeout, and links to other peers carry on.
pub fn peer_failure_reported_once<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    let mut p = Problems::new("peer_failure_reported_once");
    let mut nodes = f.build(3, &layout());
    let (victim, other) = (NodeId(1), NodeId(2));
    let (before_signaled, _) = post_everything(&mut nodes[0], &mut p, victim);
    f.crash(&mut nodes, victim);
    let crashed_at = nodes[0].now();
    let (after_signaled, after_unsignaled) = post_everything(&mut nodes[0], &mut p, victim);
    let limit = f.timeout() * 3;

    let mut log = FailureLog::default();
    let mut settled: Option<crate::Time> = None;
    let mut probe: Option<OpId> = None;
    let mut probe_ok = false;
    let survivor = |n: &mut F::Node| {
        drain(n, |e| log.record(&mut p, e));
        let everything_in = log.all_failed(&after_signaled)
            && log.all_failed(&after_unsignaled)
            && before_signaled
                .iter()
                .all(|op| log.completions.contains_key(op));
        if everything_in && settled.is_none() {
            settled = Some(n.now());
            if n.now().saturating_since(crashed_at) > limit {
                p.add(format!(
                    "ops to the crashed peer took {:?} to fail; the timeout is {:?}",
                    n.now().saturating_since(crashed_at),
                    limit / 3
                ));
            }
            probe = p.post(
                "cas to a live peer",
                n.compare_and_swap(other, RemoteAddr::new(DATA, 0), 0, 9),
            );
        }
        if let Some(op) = probe {
            if let Some(r) = log.completions.get(&op) {
                probe_ok = *r == Ok(0);
                // Poll a little longer to catch a second failure report.
                if settled.is_some_and(|t| n.now().saturating_since(t) > limit / 10) {
                    return Progress::Done;
                }
            }
        }
        if p.found.is_empty() {
            Progress::Idle
        } else {
            Progress::Done
        }
    };
    let r = f.run(&mut nodes, vec![Some(Box::new(survivor)), None, None]);
    p.stalled(r);
    match log.failed.get(&victim).map(Vec::len) {
        Some(1) => {}
        other => p.add(format!(
            "the crashed peer was reported failed {} times",
            other.unwrap_or(0)
        )),
    }
    if let Some(op) = log.error_before_report {
        p.add(format!(
            "{op} failed before the peer's failure was reported"
        ));
    }
    if log.failed.contains_key(&other) {
        p.add("a live peer was reported failed".into());
    }
    if !probe_ok {
        p.add("a CAS to a live peer did not succeed after another peer crashed".into());
    }
    p.verdict()
}

/// Ops across a partition complete with an error within a small multiple of the timeout, and
/// the peer is reported failed once, as timed out.
pub fn timeouts_fire<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    let mut p = Problems::new("timeouts_fire");
    let mut nodes = f.build(2, &layout());
    if !f.partition(&mut nodes, NodeId(0), NodeId(1)) {
        return Ok(());
    }
    let start = nodes[0].now();
    let (signaled, unsignaled) = post_everything(&mut nodes[0], &mut p, NodeId(1));
    let limit = f.timeout() * 3;
    let mut log = FailureLog::default();
    let client = |n: &mut F::Node| {
        drain(n, |e| log.record(&mut p, e));
        if log.all_failed(&signaled) && log.all_failed(&unsignaled) {
            let took = n.now().saturating_since(start);
            if took > limit {
                p.add(format!(
                    "ops across a partition took {took:?} to fail; the limit is {limit:?}"
                ));
            }
            return Progress::Done;
        }
        Progress::Idle
    };
    let r = f.run(&mut nodes, vec![Some(Box::new(client)), None]);
    p.stalled(r);
    match log.failed.get(&NodeId(1)).map(Vec::as_slice) {
        Some([FailureCause::TimedOut | FailureCause::ConnectionLost]) => {}
        other => p.add(format!(
            "expected one timeout report for the partitioned peer, got {other:?}"
        )),
    }
    p.verdict()
}

/// After node 0 declares node 1 failed, nothing node 1 posts is applied at node 0; node 1's ops
/// fail and node 1 learns that node 0 cut the link.
pub fn failed_peer_writes_dropped<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    let mut p = Problems::new("failed_peer_writes_dropped");
    let mut q = Problems::new("failed_peer_writes_dropped");
    let mut nodes = f.build(2, &layout());
    nodes[0].report_failed(NodeId(1));
    let _ = region(&nodes[1], SCRATCH).write_bytes(0, &[0xab; 8192]);

    let mut log0 = FailureLog::default();
    let cutter = |n: &mut F::Node| {
        drain(n, |e| log0.record(&mut p, e));
        if log0.failed.contains_key(&NodeId(1)) {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let r = f.run(&mut nodes, vec![Some(Box::new(cutter)), None]);
    p.stalled(r);

    let (signaled, unsignaled) = post_everything(&mut nodes[1], &mut q, NodeId(0));
    let mut log1 = FailureLog::default();
    let cut = |n: &mut F::Node| {
        drain(n, |e| log1.record(&mut q, e));
        if log1.all_failed(&signaled) && log1.all_failed(&unsignaled) {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let r = f.run(&mut nodes, vec![None, Some(Box::new(cut))]);
    q.stalled(r);
    if log0.failed.get(&NodeId(1)).map(Vec::as_slice) != Some(&[FailureCause::Local]) {
        p.add(format!(
            "node 0 should report node 1 failed once, locally: {:?}",
            log0.failed
        ));
    }
    if log1.failed.get(&NodeId(0)).map(Vec::len) != Some(1) {
        q.add(format!(
            "node 1 should learn once that node 0 cut it off: {:?}",
            log1.failed
        ));
    }
    if region(&nodes[0], DATA).snapshot().iter().any(|&v| v != 0) {
        p.add("a peer declared failed still changed this node's memory".into());
    }
    let mut buf = Vec::new();
    if nodes[0].recv(&mut buf).is_some() {
        p.add("a peer declared failed still delivered a message".into());
    }
    p.found.extend(q.found);
    p.verdict()
}

/// Writes node 1 posted to node 0 *before* node 0 declared it failed, and that were still in
/// flight then (on a link, in a socket buffer, behind a reader thread), are not applied after
/// the declaration: once `report_failed` returns, node 0's memory no longer changes under node
/// 1's ops. (The membership layer relies on it: a member zeroes a region set after declaring a
/// removed member failed and a later view reuses the set; `docs/MEMBERSHIP.md`, forty-third
/// part.) Whatever landed before the declaration may stay.
pub fn failed_peer_in_flight_writes_dropped<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    let mut p = Problems::new("failed_peer_in_flight_writes_dropped");
    let mut q = Problems::new("failed_peer_in_flight_writes_dropped");
    let mut nodes = f.build(2, &layout());
    let _ = region(&nodes[1], SCRATCH).write_bytes(0, &[0xcd; 8192]);
    let src = LocalSlice::new(SCRATCH, 0, 64);
    for k in 0..48 {
        let at = RemoteAddr::new(DATA, 64 * k);
        p.post(
            "write",
            nodes[1].write(NodeId(0), src, at, Signal::Unsignaled),
        );
    }
    let last = RemoteAddr::new(DATA, 64 * 48);
    let signaled = p.post(
        "write",
        nodes[1].write(NodeId(0), src, last, Signal::Signaled),
    );
    nodes[0].report_failed(NodeId(1));
    let at_report = region(&nodes[0], DATA).snapshot();

    let mut log0 = FailureLog::default();
    let mut log1 = FailureLog::default();
    let cutter = |n: &mut F::Node| {
        drain(n, |e| log0.record(&mut p, e));
        if log0.failed.contains_key(&NodeId(1)) {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    // Node 1 is done once its signaled write completed (applied, or failed with the rest) or
    // it learnt of the cut: a verbs peer learns of a queue pair moved to error only from an op.
    let writer = |n: &mut F::Node| {
        drain(n, |e| log1.record(&mut q, e));
        let completed = signaled.is_some_and(|op| log1.completions.contains_key(&op));
        if completed || log1.failed.contains_key(&NodeId(0)) {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let r = f.run(
        &mut nodes,
        vec![Some(Box::new(cutter)), Some(Box::new(writer))],
    );
    p.stalled(r);
    if region(&nodes[0], DATA).snapshot() != at_report {
        p.add("a write posted before its poster was declared failed was applied afterwards".into());
    }
    p.found.extend(q.found);
    p.verdict()
}

/// Every kind of op posted to an absent peer is refused with `NotConnected`.
fn expect_not_connected<T: Transport>(n: &mut T, p: &mut Problems, peer: NodeId) {
    let me = n.local_id();
    let at = |o| RemoteAddr::new(DATA, o);
    let src = LocalSlice::new(SCRATCH, 0, 8);
    let results = [
        ("write", n.write(peer, src, at(0), Signal::Unsignaled)),
        (
            "signaled write",
            n.write(peer, src, at(0), Signal::Signaled),
        ),
        ("read", n.read(peer, at(0), src)),
        ("cas", n.compare_and_swap(peer, at(0), 0, 1)),
        ("fetch_add", n.fetch_add(peer, at(0), 1)),
        ("send", n.send(peer, b"early", Signal::Unsignaled)),
        ("fence", n.fence(peer)),
    ];
    for (what, r) in results {
        if r != Err(PostError::NotConnected { peer }) {
            p.add(format!(
                "{me}: a {what} to absent {peer} gave {r:?}, expected NotConnected"
            ));
        }
    }
}

/// A node that starts after the others: while it is absent, ops to it are refused with
/// `NotConnected` and nothing about it is reported (no failure, even after several timeouts);
/// once started, every running node gets exactly one `PeerConnected` for it (and it one for each
/// of them), ops flow both ways, and its crash is then reported once like any other. Skipped on
/// fabrics whose [`Fabric::build_late`] returns `None`.
pub fn late_links<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    let mut p = Problems::new("late_links");
    let Some(mut nodes) = f.build_late(3, 2, &layout()) else {
        return Ok(());
    };
    let late = NodeId(2);
    if nodes.len() != 2 {
        p.add(format!("build_late(3, 2) gave {} nodes", nodes.len()));
        return p.verdict();
    }
    for n in nodes.iter_mut() {
        if !n.peers().contains(&late) {
            p.add(format!(
                "{}: the absent {late} is not among the peers",
                n.local_id()
            ));
        }
        if !n.is_absent(late) {
            p.add(format!("{}: {late} is not reported absent", n.local_id()));
        }
        if n.is_absent(NodeId(1 - n.local_id().0)) {
            p.add(format!(
                "{}: a peer linked from the start is absent",
                n.local_id()
            ));
        }
        expect_not_connected(n, &mut p, late);
    }
    // Phase 1: the two running nodes work together for twice the timeout; nothing about the
    // absent node may be reported.
    let quiet = f.timeout() * 2;
    let start = nodes[0].now();
    let mut q0 = Problems::new("late_links");
    let mut q1 = Problems::new("late_links");
    let mut fence = None;
    let mut fenced = false;
    let worker = |n: &mut F::Node| {
        if fence.is_none() {
            region(n, SCRATCH).store(0, 7);
            let src = LocalSlice::new(SCRATCH, 0, 8);
            let w = n.write(NodeId(1), src, RemoteAddr::new(DATA, 0), Signal::Unsignaled);
            q0.post("write to a running peer", w);
            fence = q0.post("fence to a running peer", n.fence(NodeId(1)));
        }
        drain(n, |e| match e {
            Event::Completion(c) if Some(c.op) == fence && c.result.is_ok() => fenced = true,
            other => q0.add(format!("node 0 saw {other:?} while node 2 was absent")),
        });
        if fenced && n.now().saturating_since(start) > quiet || !q0.found.is_empty() {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let watcher = |n: &mut F::Node| {
        drain(n, |e| {
            q1.add(format!("node 1 saw {e:?} while node 2 was absent"))
        });
        if n.now().saturating_since(start) > quiet || !q1.found.is_empty() {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let r = f.run(
        &mut nodes,
        vec![Some(Box::new(worker)), Some(Box::new(watcher))],
    );
    p.stalled(r);
    p.found.extend(q0.found);
    p.found.extend(q1.found);
    if region(&nodes[1], DATA).load(0) != 7 {
        p.add("a write between the running nodes did not land while a third was absent".into());
    }
    for n in nodes.iter_mut() {
        if !n.is_absent(late) {
            p.add(format!(
                "{}: {late} stopped being absent before it started",
                n.local_id()
            ));
        }
        expect_not_connected(n, &mut p, late);
    }
    if !p.found.is_empty() {
        return p.verdict();
    }

    // Phase 2: start it; everyone learns of the new links once, and ops flow both ways.
    f.start_late(&mut nodes);
    if nodes.len() != 3 {
        p.add(format!("start_late gave {} nodes, expected 3", nodes.len()));
        return p.verdict();
    }
    type Log = BTreeMap<NodeId, usize>;
    let mut logs: Vec<(Log, Problems)> = (0..3)
        .map(|_| (Log::new(), Problems::new("late_links")))
        .collect();
    let programs: Vec<Slot<'_, F::Node>> = logs
        .iter_mut()
        .enumerate()
        .map(|(i, (connected, q))| {
            let me = NodeId(i as u32);
            let targets: Vec<NodeId> = if me == late {
                vec![NodeId(0), NodeId(1)]
            } else {
                vec![late]
            };
            let mut fences: Vec<OpId> = Vec::new();
            let mut posted = false;
            let prog = move |n: &mut F::Node| {
                drain(n, |e| match e {
                    Event::PeerConnected { peer, .. } => *connected.entry(peer).or_default() += 1,
                    Event::Completion(c) if c.result.is_ok() => fences.retain(|&f| f != c.op),
                    other => q.add(format!("{me} saw {other:?} after {late} started")),
                });
                if !posted && targets.iter().all(|t| connected.contains_key(t)) {
                    posted = true;
                    for &t in &targets {
                        if n.is_absent(t) {
                            q.add(format!("{me}: {t} still absent after PeerConnected"));
                        }
                        let value = 100 * (u64::from(me.0) + 1);
                        region(n, SCRATCH).store(0, value);
                        let src = LocalSlice::new(SCRATCH, 0, 8);
                        let at = RemoteAddr::new(DATA, 8 * (me.index() + 1));
                        q.post(
                            "write to a new link",
                            n.write(t, src, at, Signal::Unsignaled),
                        );
                        let word = RemoteAddr::new(DATA, 64);
                        q.post("fetch_add on a new link", n.fetch_add(t, word, 1));
                        fences.extend(q.post("fence on a new link", n.fence(t)));
                    }
                }
                if posted && fences.is_empty() || !q.found.is_empty() {
                    Progress::Done
                } else {
                    Progress::Idle
                }
            };
            Some(Box::new(prog) as Box<dyn super::Program<F::Node> + '_>)
        })
        .collect();
    let r = f.run(&mut nodes, programs);
    p.stalled(r);
    for (i, (connected, q)) in logs.into_iter().enumerate() {
        p.found.extend(q.found);
        let expected: Vec<NodeId> = if i == 2 {
            vec![NodeId(0), NodeId(1)]
        } else {
            vec![late]
        };
        let want: Log = expected.iter().map(|&t| (t, 1)).collect();
        if connected != want {
            p.add(format!(
                "node {i} saw PeerConnected {connected:?}, expected once each for {expected:?}"
            ));
        }
    }
    let data = |n: &F::Node, w: usize| region(n, DATA).load(w);
    if data(&nodes[2], 1) != 100 || data(&nodes[2], 2) != 200 || data(&nodes[2], 8) != 2 {
        p.add(format!(
            "the late node's memory is {:?}, expected the writes 100, 200 and two fetch-adds",
            (data(&nodes[2], 1), data(&nodes[2], 2), data(&nodes[2], 8))
        ));
    }
    for (i, node) in nodes.iter().enumerate().take(2) {
        if data(node, 3) != 300 || data(node, 8) != 1 {
            p.add(format!(
                "node {i} did not get the late node's write and fetch-add"
            ));
        }
    }
    if !p.found.is_empty() {
        return p.verdict();
    }

    // Phase 3: once connected, its crash is reported as usual, once.
    f.crash(&mut nodes, late);
    let mut logs = [FailureLog::default(), FailureLog::default()];
    let mut q = [Problems::new("late_links"), Problems::new("late_links")];
    {
        let [l0, l1] = &mut logs;
        let [q0, q1] = &mut q;
        let r = f.run(
            &mut nodes,
            vec![
                Some(Box::new(survivor_of::<F::Node>(l0, q0, late))),
                Some(Box::new(survivor_of::<F::Node>(l1, q1, late))),
                None,
            ],
        );
        p.stalled(r);
    }
    for (i, log) in logs.iter().enumerate() {
        if log.failed.get(&late).map(Vec::len) != Some(1) {
            p.add(format!(
                "node {i} should report the crashed late node failed once: {:?}",
                log.failed
            ));
        }
    }
    for q in q {
        p.found.extend(q.found);
    }
    p.verdict()
}

/// A program that posts a fence to `victim` and runs until the victim is reported failed and
/// the fence has completed (with an error).
fn survivor_of<'a, T: Transport>(
    log: &'a mut FailureLog,
    q: &'a mut Problems,
    victim: NodeId,
) -> impl FnMut(&mut T) -> Progress + Send + 'a {
    let mut probe: Option<Result<OpId, PostError>> = None;
    move |n: &mut T| {
        let op = probe.get_or_insert_with(|| n.fence(victim)).clone();
        drain(n, |e| log.record(q, e));
        let settled = match op {
            Ok(op) => log.completions.contains_key(&op),
            Err(_) => true,
        };
        if log.failed.contains_key(&victim) && settled {
            Progress::Done
        } else {
            Progress::Idle
        }
    }
}

/// A crashed peer restarts under the same id: its old incarnation is reported failed once and
/// every op queued to it fails (nothing of it lands on the new link); the new incarnation is
/// reported with [`Event::PeerConnected`] and the incarnation the fabric gave it, and ops work
/// both ways once that event is polled. A `report_failed` made before polling the new link is
/// about the old incarnation and leaves the new link up; one made after fails the new
/// incarnation, reported once more. Skipped on fabrics that cannot restart nodes.
pub fn rejoin_new_incarnation<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    const NAME: &str = "rejoin_new_incarnation";
    let mut p = Problems::new(NAME);
    let mut nodes = f.build(2, &layout());
    let victim = NodeId(1);
    f.crash(&mut nodes, victim);
    // Ops to the old incarnation, posted after its crash: they must fail, never land later.
    region(&nodes[0], SCRATCH).store(0, 5);
    let src = LocalSlice::new(SCRATCH, 0, 8);
    let mut stale: Vec<OpId> = Vec::new();
    let w = nodes[0].write(victim, src, RemoteAddr::new(DATA, 0), Signal::Unsignaled);
    stale.extend(w.ok());
    stale.extend(nodes[0].fence(victim).ok());
    let Some(incarnation) = f.restart(&mut nodes, victim) else {
        return Ok(());
    };
    // Reported before node 0 polled anything: about the old incarnation, whatever arrived.
    nodes[0].report_failed(victim);

    let mut log = FailureLog::default();
    let mut q0 = Problems::new(NAME);
    let mut connected0: Vec<u64> = Vec::new();
    let mut fence0: Option<OpId> = None;
    let mut done0 = false;
    let survivor = |n: &mut F::Node| {
        let mut events = Vec::new();
        drain(n, |e| events.push(e));
        for e in events {
            match e {
                Event::PeerConnected { peer, incarnation } if peer == victim => {
                    if !log.failed.contains_key(&victim) {
                        q0.add(
                            "PeerConnected of the new incarnation came before the old one's PeerFailed"
                                .into(),
                        );
                    }
                    connected0.push(incarnation);
                }
                Event::PeerFailed { peer, cause } => {
                    log.failed.entry(peer).or_default().push(cause);
                }
                Event::Completion(c) => {
                    if Some(c.op) == fence0 {
                        match c.result {
                            Ok(_) => done0 = true,
                            Err(e) => q0.add(format!("a fence on the new link failed: {e}")),
                        }
                    } else if stale.contains(&c.op) {
                        if c.result.is_ok() {
                            q0.add(format!("{} to the crashed incarnation succeeded", c.op));
                        }
                        stale.retain(|&s| s != c.op);
                    } else if let Err(e) = c.result {
                        q0.add(format!("an op on the new link failed: {e}"));
                    }
                }
                other => q0.add(format!("node 0 saw {other:?}")),
            }
        }
        if !connected0.is_empty() && fence0.is_none() {
            region(n, SCRATCH).store(1, 77);
            let src = LocalSlice::new(SCRATCH, 8, 8);
            let w = n.write(victim, src, RemoteAddr::new(DATA, 8), Signal::Unsignaled);
            q0.post("write to the new incarnation", w);
            let fa = n.fetch_add(victim, RemoteAddr::new(DATA, 16), 1);
            q0.post("fetch_add on the new incarnation", fa);
            fence0 = q0.post("fence to the new incarnation", n.fence(victim));
        }
        if done0 && stale.is_empty() || !q0.found.is_empty() {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let mut q1 = Problems::new(NAME);
    let mut fence1: Option<OpId> = None;
    let mut done1 = false;
    let fresh = |n: &mut F::Node| {
        let mut connected = false;
        drain(n, |e| match e {
            Event::PeerConnected {
                peer: NodeId(0), ..
            } => connected = true,
            Event::Completion(c) if Some(c.op) == fence1 && c.result.is_ok() => done1 = true,
            other => q1.add(format!("the restarted node saw {other:?}")),
        });
        if connected && fence1.is_none() {
            region(n, SCRATCH).store(0, 88);
            let src = LocalSlice::new(SCRATCH, 0, 8);
            let w = n.write(
                NodeId(0),
                src,
                RemoteAddr::new(DATA, 24),
                Signal::Unsignaled,
            );
            q1.post("write from the new incarnation", w);
            fence1 = q1.post("fence from the new incarnation", n.fence(NodeId(0)));
        }
        if done1 || !q1.found.is_empty() {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let r = f.run(
        &mut nodes,
        vec![Some(Box::new(survivor)), Some(Box::new(fresh))],
    );
    p.stalled(r);
    p.found.extend(q0.found);
    p.found.extend(q1.found);
    if connected0 != [incarnation] {
        p.add(format!(
            "node 0 saw PeerConnected for {victim} with incarnations {connected0:?}, expected once with {incarnation}"
        ));
    }
    match log.failed.get(&victim).map(Vec::len) {
        Some(1) => {}
        n => p.add(format!(
            "the crashed incarnation was reported failed {} times, expected once",
            n.unwrap_or(0)
        )),
    }
    let word = |n: &F::Node, w: usize| region(n, DATA).load(w);
    let fresh_mem = (0..3).map(|w| word(&nodes[1], w)).collect::<Vec<_>>();
    if fresh_mem != [0, 77, 1] {
        p.add(format!(
            "the new incarnation's memory is {fresh_mem:?}, expected [0, 77, 1] (nothing of the ops to the old one, then the new link's write and fetch-add)"
        ));
    }
    if word(&nodes[0], 3) != 88 {
        p.add("the new incarnation's write did not land at node 0".into());
    }
    if !p.found.is_empty() {
        return p.verdict();
    }

    // Reported after the new link was polled: the new incarnation fails, reported once more.
    nodes[0].report_failed(victim);
    let mut log = FailureLog::default();
    let mut q = Problems::new(NAME);
    {
        let r = f.run(
            &mut nodes,
            vec![
                Some(Box::new(survivor_of::<F::Node>(&mut log, &mut q, victim))),
                None,
            ],
        );
        p.stalled(r);
    }
    p.found.extend(q.found);
    if log.failed.get(&victim).map(Vec::len) != Some(1) {
        p.add(format!(
            "after report_failed on the new link, {victim} was reported failed {:?} (expected once)",
            log.failed.get(&victim)
        ));
    }
    p.verdict()
}

/// A peer declared failed while absent is reported failed once, and the node that was built
/// before the report (the process that may have been running then) never links to the node
/// that reported it, even when it starts later; the other nodes link with it as usual. A
/// fabric may link a *later* process of the peer as a new incarnation (the contract's *Late
/// links*); TCP tells one from the other by its incarnation, a start time, and refuses every
/// process started within its clock-skew allowance after the report, which covers this check's
/// node. Skipped on fabrics that cannot start nodes late.
pub fn absent_peer_reported_failed<F: Fabric>(f: &mut F) -> Result<(), Violation> {
    const NAME: &str = "absent_peer_reported_failed";
    let mut p = Problems::new(NAME);
    let Some(mut nodes) = f.build_late(3, 2, &layout()) else {
        return Ok(());
    };
    let late = NodeId(2);
    nodes[0].report_failed(late);
    f.start_late(&mut nodes);
    if nodes.len() != 3 {
        p.add(format!("start_late gave {} nodes, expected 3", nodes.len()));
        return p.verdict();
    }
    let quiet = f.timeout() * 2;
    let start = nodes[0].now();
    let mut failed: Vec<FailureCause> = Vec::new();
    let mut q0 = Problems::new(NAME);
    let barring = |n: &mut F::Node| {
        drain(n, |e| match e {
            Event::PeerFailed { peer, cause } if peer == late => failed.push(cause),
            // Error completions of the probes below.
            Event::Completion(c) if c.result.is_err() => {}
            other => q0.add(format!(
                "node 0 saw {other:?} after it failed the absent {late}"
            )),
        });
        // Nothing may reach the barred peer, whatever the post returns.
        let src = LocalSlice::new(SCRATCH, 0, 8);
        region(n, SCRATCH).store(0, 13);
        let _ = n.write(late, src, RemoteAddr::new(DATA, 0), Signal::Unsignaled);
        if n.now().saturating_since(start) > quiet || !q0.found.is_empty() {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let mut seen1 = false;
    let mut q1 = Problems::new(NAME);
    let other = |n: &mut F::Node| {
        drain(n, |e| match e {
            Event::PeerConnected { peer, .. } if peer == late => seen1 = true,
            other => q1.add(format!("node 1 saw {other:?}")),
        });
        if seen1 && n.now().saturating_since(start) > quiet || !q1.found.is_empty() {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let mut q2 = Problems::new(NAME);
    let mut seen2 = false;
    let late_prog = |n: &mut F::Node| {
        drain(n, |e| match e {
            Event::PeerConnected {
                peer: NodeId(1), ..
            } => seen2 = true,
            // The barring node may close a link it refuses: the late node sees it fail.
            Event::PeerFailed { peer, .. } | Event::PeerConnected { peer, .. }
                if peer == NodeId(0) => {}
            Event::Completion(_) => {}
            other => q2.add(format!("the late node saw {other:?}")),
        });
        if seen2 && n.now().saturating_since(start) > quiet || !q2.found.is_empty() {
            Progress::Done
        } else {
            Progress::Idle
        }
    };
    let r = f.run(
        &mut nodes,
        vec![
            Some(Box::new(barring)),
            Some(Box::new(other)),
            Some(Box::new(late_prog)),
        ],
    );
    p.stalled(r);
    p.found.extend(q0.found);
    p.found.extend(q1.found);
    p.found.extend(q2.found);
    if failed.len() != 1 {
        p.add(format!(
            "the absent peer declared failed was reported {} times, expected once",
            failed.len()
        ));
    }
    if region(&nodes[2], DATA).load(0) == 13 {
        p.add("a write to a peer declared failed while absent landed".into());
    }
    p.verdict()
}
