//! Random op programs on the simulated fabric, checked against a sequential reference model of
//! every node's memory.
//!
//! A program interleaves posts, local stores, scheduler steps and faults. Afterwards the trace —
//! which op left which link queue, in what order, with what result — is replayed on plain byte
//! arrays. The model must agree with the fabric on every atomic's result and on every byte of
//! final memory; each link must have applied its ops in post order; every op must have been
//! applied exactly once or failed with an error completion; and nothing from a peer a node had
//! cut may be applied after the cut.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use proptest::prelude::*;
use squall_transport::conformance::drain;
use squall_transport::{
    Event, LocalSlice, NodeId, OpId, RegionId, RegionSpec, RemoteAddr, Signal, Transport,
};
use squall_transport_mem::sim::{Outcome, Sabotage, Sim, SimConfig, SimNode};

const R: RegionId = RegionId(0);
const LEN: usize = 128;

#[derive(Clone, Debug)]
enum Op {
    Write {
        src: usize,
        dst: usize,
        len: usize,
        signaled: bool,
    },
    Read {
        src: usize,
        dst: usize,
        len: usize,
    },
    Cas {
        word: usize,
        expected: u64,
        new: u64,
    },
    FetchAdd {
        word: usize,
        delta: u64,
    },
    Send {
        len: usize,
    },
    Fence,
}

#[derive(Clone, Debug)]
enum Action {
    Post {
        from: usize,
        to: usize,
        op: Op,
    },
    Store {
        node: usize,
        word: usize,
        value: u64,
    },
    Steps(usize),
    Partition(usize, usize),
    Heal,
    Crash(usize),
    Cut(usize, usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0..LEN, 0..LEN, 1usize..=24)
        .prop_map(|(a, b, len)| (a.min(LEN - len), b.min(LEN - len), len));
    prop_oneof![
        3 => (range.clone(), any::<bool>()).prop_map(|((src, dst, len), signaled)| Op::Write { src, dst, len, signaled }),
        2 => range.prop_map(|(src, dst, len)| Op::Read { src, dst, len }),
        2 => (0..LEN / 8, 0u64..4, 0u64..4).prop_map(|(word, expected, new)| Op::Cas { word, expected, new }),
        2 => (0..LEN / 8, 1u64..3).prop_map(|(word, delta)| Op::FetchAdd { word, delta }),
        1 => (0usize..40).prop_map(|len| Op::Send { len }),
        1 => Just(Op::Fence),
    ]
}

fn action(n: usize, faults: bool) -> impl Strategy<Value = Action> {
    let pair = (0..n, 0..n - 1).prop_map(|(a, b)| (a, if b >= a { b + 1 } else { b }));
    let fault_weight = if faults { 1 } else { 0 };
    prop_oneof![
        12 => (pair.clone(), op()).prop_map(|((from, to), op)| Action::Post { from, to, op }),
        3 => (0..n, 0..LEN / 8, 0u64..4).prop_map(|(node, word, value)| Action::Store { node, word, value }),
        6 => (1usize..8).prop_map(Action::Steps),
        fault_weight => pair.clone().prop_map(|(a, b)| Action::Partition(a, b)),
        fault_weight => Just(Action::Heal),
        fault_weight => (0..n).prop_map(Action::Crash),
        fault_weight => pair.prop_map(|(a, b)| Action::Cut(a, b)),
        fault_weight => (1u64..3000).prop_map(Action::Advance),
    ]
}

fn program(faults: bool) -> impl Strategy<Value = (u64, usize, Vec<Action>)> {
    (any::<u64>(), 2usize..=4).prop_flat_map(move |(seed, n)| {
        (
            Just(seed),
            Just(n),
            proptest::collection::vec(action(n, faults), 1..80),
        )
    })
}

fn send_bytes(op: OpId, len: usize) -> Vec<u8> {
    (0..len).map(|i| (op.0 as usize * 7 + i) as u8).collect()
}

/// Something the test did between scheduler steps, at a position in the trace.
enum Local {
    Store {
        node: usize,
        word: usize,
        value: u64,
    },
    Cut {
        node: usize,
        peer: usize,
    },
}

struct Run {
    posted: BTreeMap<(usize, OpId), (usize, Op)>,
    locals: Vec<(usize, Local)>,
    crashed: BTreeSet<usize>,
}

fn execute(
    seed: u64,
    n: usize,
    actions: &[Action],
    sabotage: Sabotage,
) -> (Sim, Vec<SimNode>, Run) {
    // The model applies each write whole at its trace entry: torn writes stay off here even
    // under `SQUALL_SIM_TORN_WRITES=1` (their placement is checked in `sim_torn.rs`).
    let cfg = SimConfig {
        record_trace: true,
        torn_writes: false,
        sabotage,
        ..SimConfig::seeded(seed)
    };
    let (sim, mut nodes) = Sim::cluster(cfg, n, &[RegionSpec::new(R, LEN)]).expect("valid sim");
    let mut run = Run {
        posted: BTreeMap::new(),
        locals: Vec::new(),
        crashed: BTreeSet::new(),
    };
    for a in actions {
        match a {
            Action::Post { from, to, op } => {
                let (node, peer) = (&mut nodes[*from], NodeId(*to as u32));
                let result = match op {
                    Op::Write {
                        src,
                        dst,
                        len,
                        signaled,
                    } => {
                        let signal = if *signaled {
                            Signal::Signaled
                        } else {
                            Signal::Unsignaled
                        };
                        node.write(
                            peer,
                            LocalSlice::new(R, *src, *len),
                            RemoteAddr::new(R, *dst),
                            signal,
                        )
                    }
                    Op::Read { src, dst, len } => node.read(
                        peer,
                        RemoteAddr::new(R, *src),
                        LocalSlice::new(R, *dst, *len),
                    ),
                    Op::Cas {
                        word,
                        expected,
                        new,
                    } => node.compare_and_swap(peer, RemoteAddr::new(R, word * 8), *expected, *new),
                    Op::FetchAdd { word, delta } => {
                        node.fetch_add(peer, RemoteAddr::new(R, word * 8), *delta)
                    }
                    Op::Send { len } => {
                        // The op id the send will get is the next one; compute bytes from it.
                        let next =
                            OpId(run.posted.keys().filter(|(f, _)| f == from).count() as u64 + 1);
                        node.send(peer, &send_bytes(next, *len), Signal::Unsignaled)
                    }
                    Op::Fence => node.fence(peer),
                };
                match result {
                    Ok(id) => {
                        run.posted.insert((*from, id), (*to, op.clone()));
                    }
                    Err(squall_transport::PostError::Closed) => assert!(run.crashed.contains(from)),
                    Err(e) => panic!("a valid op was refused: {e}"),
                }
            }
            Action::Store { node, word, value } => {
                if !run.crashed.contains(node) {
                    nodes[*node]
                        .region(R)
                        .expect("registered")
                        .store(*word, *value);
                    run.locals.push((
                        sim.trace().len(),
                        Local::Store {
                            node: *node,
                            word: *word,
                            value: *value,
                        },
                    ));
                }
            }
            Action::Steps(k) => {
                for _ in 0..*k {
                    sim.step();
                }
            }
            Action::Partition(a, b) => sim.partition(&[NodeId(*a as u32)], &[NodeId(*b as u32)]),
            Action::Heal => sim.heal(),
            Action::Crash(x) => {
                sim.crash(NodeId(*x as u32));
                run.crashed.insert(*x);
            }
            Action::Cut(a, b) => {
                if !run.crashed.contains(a) {
                    nodes[*a].report_failed(NodeId(*b as u32));
                    run.locals
                        .push((sim.trace().len(), Local::Cut { node: *a, peer: *b }));
                }
            }
            Action::Advance(us) => sim.advance(Duration::from_micros(*us)),
        }
    }
    // Settle: everything in flight is applied or times out.
    for _ in 0..100 {
        sim.run_until_idle(100_000);
        sim.advance(sim.op_timeout() * 2);
    }
    (sim, nodes, run)
}

fn word(mem: &[u8], w: usize) -> u64 {
    u64::from_le_bytes(mem[w * 8..w * 8 + 8].try_into().expect("8 bytes"))
}

fn set_word(mem: &mut [u8], w: usize, v: u64) {
    mem[w * 8..w * 8 + 8].copy_from_slice(&v.to_le_bytes());
}

fn check(seed: u64, n: usize, actions: &[Action], sabotage: Sabotage) -> Result<(), TestCaseError> {
    let (sim, mut nodes, run) = execute(seed, n, actions, sabotage);
    let mut mem = vec![vec![0u8; LEN]; n];
    let mut last_applied: BTreeMap<(usize, usize), OpId> = BTreeMap::new();
    let mut outcome: BTreeMap<(usize, OpId), Outcome> = BTreeMap::new();
    let mut cut: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut inbox: Vec<Vec<(usize, Vec<u8>)>> = vec![Vec::new(); n];
    let mut locals = run.locals.iter().peekable();
    let full = sim.trace();
    for (position, e) in full.iter().enumerate() {
        while let Some((_, l)) = locals.next_if(|(p, _)| *p <= position) {
            match l {
                Local::Store { node, word, value } => set_word(&mut mem[*node], *word, *value),
                Local::Cut { node, peer } => {
                    cut.insert((*node, *peer));
                }
            }
        }
        if e.src == e.dst {
            continue; // crash marker
        }
        let (src, dst) = (e.src.index(), e.dst.index());
        let key = (src, e.op);
        let Some((to, op)) = run.posted.get(&key) else {
            return Err(TestCaseError::fail(format!(
                "trace names {:?} that was never posted",
                e
            )));
        };
        prop_assert_eq!(*to, dst);
        if matches!(e.outcome, Outcome::TimedOut | Outcome::Refused) {
            cut.insert((src, dst));
        }
        if let Some(prev) = outcome.insert(key, e.outcome) {
            prop_assert!(
                false,
                "{:?} left its link twice ({:?} then {:?})",
                e.op,
                prev,
                e.outcome
            );
        }
        let Outcome::Applied(value) = e.outcome else {
            continue;
        };
        prop_assert!(
            !cut.contains(&(dst, src)),
            "{:?} from n{} applied after n{} cut it",
            e.op,
            src,
            dst
        );
        if let Some(prev) = last_applied.insert((src, dst), e.op) {
            prop_assert!(
                prev < e.op,
                "link n{}->n{} applied {:?} after {:?}: not FIFO",
                src,
                dst,
                e.op,
                prev
            );
        }
        match op {
            Op::Write {
                src: s,
                dst: d,
                len,
                ..
            } => {
                let bytes = mem[src][*s..s + len].to_vec();
                mem[dst][*d..d + len].copy_from_slice(&bytes);
                prop_assert_eq!(value, 0);
            }
            Op::Read {
                src: s,
                dst: d,
                len,
            } => {
                let bytes = mem[dst][*s..s + len].to_vec();
                mem[src][*d..d + len].copy_from_slice(&bytes);
            }
            Op::Cas {
                word: w,
                expected,
                new,
            } => {
                let old = word(&mem[dst], *w);
                prop_assert_eq!(value, old, "CAS returned a value the model did not hold");
                if old == *expected {
                    set_word(&mut mem[dst], *w, *new);
                }
            }
            Op::FetchAdd { word: w, delta } => {
                let old = word(&mem[dst], *w);
                prop_assert_eq!(
                    value,
                    old,
                    "fetch_add returned a value the model did not hold"
                );
                set_word(&mut mem[dst], *w, old.wrapping_add(*delta));
            }
            Op::Send { len } => inbox[dst].push((src, send_bytes(e.op, *len))),
            Op::Fence => {}
        }
    }
    for (_, l) in locals {
        if let Local::Store { node, word, value } = l {
            set_word(&mut mem[*node], *word, *value);
        }
    }
    // Final memory agrees byte for byte.
    for (i, node) in nodes.iter().enumerate() {
        prop_assert_eq!(
            &node.region(R).expect("registered").snapshot(),
            &mem[i],
            "n{} memory differs from the model",
            i
        );
    }
    // Completions: each op's completion agrees with its trace outcome; nothing completes twice.
    for (i, node) in nodes.iter_mut().enumerate() {
        let mut seen = BTreeSet::new();
        let mut failures = BTreeMap::new();
        let mut bad = Vec::new();
        drain(node, |ev| match ev {
            Event::PeerConnected { peer, .. } => bad.push(format!(
                "n{i}: {peer}, linked from the start, was reported connected"
            )),
            Event::PeerFailed { peer, .. } => {
                if failures.insert(peer, ()).is_some() {
                    bad.push(format!("n{i} reported {peer} twice"));
                }
            }
            Event::Completion(c) => {
                if !seen.insert(c.op) {
                    bad.push(format!("{} completed twice", c.op));
                }
                match (outcome.get(&(i, c.op)), c.result) {
                    (Some(Outcome::Applied(v)), Ok(r)) if *v == r => {}
                    (Some(Outcome::Applied(_)), r) => {
                        bad.push(format!("{} applied but completed {r:?}", c.op))
                    }
                    (Some(_) | None, Err(_)) => {
                        if !failures.contains_key(&c.peer) {
                            bad.push(format!(
                                "{} failed before {} was reported failed",
                                c.op, c.peer
                            ));
                        }
                    }
                    (o, r) => bad.push(format!(
                        "{} completed {r:?} but its outcome was {o:?}",
                        c.op
                    )),
                }
            }
        });
        prop_assert!(bad.is_empty(), "{:?}", bad);
        for ((from, op), (_, kind)) in run.posted.range((i, OpId(0))..=(i, OpId(u64::MAX))) {
            let _ = from;
            let applied = matches!(outcome.get(&(i, *op)), Some(Outcome::Applied(_)));
            let silent = matches!(
                kind,
                Op::Write {
                    signaled: false,
                    ..
                } | Op::Send { .. }
            );
            if run.crashed.contains(&i) {
                continue; // a crashed node's completions are gone with it
            }
            if !(applied && silent) {
                prop_assert!(
                    seen.contains(op),
                    "n{} {:?} ({:?}) never completed",
                    i,
                    op,
                    kind
                );
            } else {
                prop_assert!(
                    !seen.contains(op),
                    "unsignaled {:?} produced a completion",
                    op
                );
            }
        }
    }
    // Messages arrived intact and in per-link order.
    for (i, node) in nodes.iter_mut().enumerate() {
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while let Some(from) = node.recv(&mut buf) {
            got.push((from.index(), buf.clone()));
        }
        prop_assert_eq!(&got, &inbox[i], "n{} messages differ from the model", i);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(squall_transport_mem::sim::proptest_cases(2048)))]

    #[test]
    fn random_programs_match_the_model((seed, n, actions) in program(false)) {
        check(seed, n, &actions, Sabotage::None)?;
    }

    #[test]
    fn random_programs_with_faults_match_the_model((seed, n, actions) in program(true)) {
        check(seed, n, &actions, Sabotage::None)?;
    }
}

/// The model check is not vacuous: the same kind of program on fabrics that break FIFO or
/// atomicity fails it.
#[test]
fn model_catches_broken_fabrics() {
    let w = |src, dst| Op::Write {
        src,
        dst,
        len: 8,
        signaled: false,
    };
    let mut actions = Vec::new();
    for k in 0..6 {
        actions.push(Action::Post {
            from: 0,
            to: 1,
            op: w(8 * k, 0),
        });
        actions.push(Action::Post {
            from: 0,
            to: 1,
            op: Op::FetchAdd { word: 1, delta: 1 },
        });
        actions.push(Action::Post {
            from: 2,
            to: 1,
            op: Op::FetchAdd { word: 1, delta: 1 },
        });
    }
    for sabotage in [Sabotage::ReorderLinks, Sabotage::SplitAtomics] {
        let caught = (0..16).any(|seed| check(seed, 3, &actions, sabotage).is_err());
        assert!(
            caught,
            "the model check passed on a fabric with {sabotage:?}"
        );
    }
    for seed in 0..16 {
        check(seed, 3, &actions, Sabotage::None).expect("a correct fabric passes");
    }
}
