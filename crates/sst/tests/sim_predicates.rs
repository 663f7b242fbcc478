//! Predicates on the simulator: for random schedules, slow nodes and crashes, every predicate
//! fires exactly when — and only after — its condition holds on the local copy: one-time
//! predicates at the first poll where it holds, transition predicates at every poll where it
//! holds after one where it did not, recurrent predicates at every poll where it holds.

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use common::{Cluster, Fields};
use proptest::prelude::*;
use squall_sst::{PredicateKind, SmcConfig, Sst};
use squall_transport::NodeId;
use squall_transport_mem::sim::SimNode;

#[derive(Clone, Copy, Debug)]
enum Cond {
    CounterAtLeast(usize, u64),
    FlagSet(usize),
    CounterEven(usize),
    AllReached(u64),
    SumAtLeast(u64),
}

impl Cond {
    fn eval(self, s: &Sst<SimNode>, f: Fields) -> bool {
        match self {
            Cond::CounterAtLeast(r, k) => s.get(r, f.count) >= k,
            Cond::FlagSet(r) => s.flag(r, f.flag),
            Cond::CounterEven(r) => s.get(r, f.count) % 2 == 0,
            Cond::AllReached(k) => s.all_reached(f.count, k),
            Cond::SumAtLeast(k) => s.sum(f.count) >= k,
        }
    }
}

#[derive(Clone, Debug)]
struct Plan {
    seed: u64,
    n: usize,
    preds: Vec<(PredicateKind, Cond)>,
    slow: Option<(usize, u32)>,
    crash: Option<(usize, u64)>,
    rounds: u64,
}

type Log = Rc<RefCell<Vec<(usize, u64, bool)>>>;

fn run(plan: &Plan) -> Result<u64, String> {
    let mut c = Cluster::new(
        plan.seed,
        plan.n,
        SmcConfig {
            window: 1,
            slot_size: 8,
        },
    );
    if let Some((node, f)) = plan.slow {
        c.sim.slow(NodeId(node as u32), f);
    }
    let f = c.fields;
    let poll_no = Rc::new(Cell::new(0u64));
    let log: Log = Rc::new(RefCell::new(Vec::new()));
    for (idx, &(kind, cond)) in plan.preds.iter().enumerate() {
        let (log, poll_no) = (log.clone(), poll_no.clone());
        c.sst(0).insert(
            kind,
            move |s| cond.eval(s, f),
            move |s| log.borrow_mut().push((idx, poll_no.get(), cond.eval(s, f))),
        );
    }
    let mut fired_once = vec![false; plan.preds.len()];
    let mut prev = vec![false; plan.preds.len()];
    let mut fires = 0u64;
    for round in 0..plan.rounds {
        if let Some((victim, at)) = plan.crash
            && at == round
        {
            c.crash(victim);
        }
        for i in c.turns() {
            // Writers: bump the counter or toggle the flag, and push.
            if c.sim.random(3) == 0 {
                let s = c.sst(i);
                let me = s.my_row();
                let v = s.get(me, f.count) + 1;
                s.set(f.count, v);
                s.push(f.count.range()).map_err(|e| e.to_string())?;
            }
            if c.sim.random(5) == 0 {
                let s = c.sst(i);
                let me = s.my_row();
                let on = !s.flag(me, f.flag);
                s.set_flag(f.flag, on);
                s.push(f.flag.range()).map_err(|e| e.to_string())?;
            }
            if i != 0 {
                c.sst(i).poll_once().map_err(|e| format!("n{i}: {e}"))?;
                continue;
            }
            poll_no.set(poll_no.get() + 1);
            let p = poll_no.get();
            c.sst(0).poll_once().map_err(|e| format!("n0: {e}"))?;
            let s = c.table(0);
            let mut this_poll = vec![0u32; plan.preds.len()];
            for &(idx, at, held) in log.borrow().iter().filter(|e| e.1 == p) {
                if !held {
                    return Err(format!(
                        "predicate {idx} fired at poll {at} but its condition does not hold"
                    ));
                }
                this_poll[idx] += 1;
            }
            for (idx, &(kind, cond)) in plan.preds.iter().enumerate() {
                let now = cond.eval(s, f);
                let expect = match kind {
                    PredicateKind::OneTime => now && !fired_once[idx],
                    PredicateKind::Recurrent => now,
                    PredicateKind::Transition => now && !prev[idx],
                };
                if this_poll[idx] != u32::from(expect) {
                    return Err(format!(
                        "predicate {idx} ({kind:?} {cond:?}) fired {} times at poll {p}; condition {now}, before {}",
                        this_poll[idx], prev[idx]
                    ));
                }
                fired_once[idx] |= expect;
                prev[idx] = now;
                fires += u64::from(expect);
            }
        }
        c.step_fabric();
    }
    Ok(fires)
}

fn cond(n: usize) -> impl Strategy<Value = Cond> {
    prop_oneof![
        (0..n, 0u64..40).prop_map(|(r, k)| Cond::CounterAtLeast(r, k)),
        (0..n).prop_map(Cond::FlagSet),
        (0..n).prop_map(Cond::CounterEven),
        (0u64..30).prop_map(Cond::AllReached),
        (0u64..100).prop_map(Cond::SumAtLeast),
    ]
}

fn kind() -> impl Strategy<Value = PredicateKind> {
    prop_oneof![
        Just(PredicateKind::OneTime),
        Just(PredicateKind::Recurrent),
        Just(PredicateKind::Transition),
    ]
}

fn plan() -> impl Strategy<Value = Plan> {
    (any::<u64>(), 3usize..=4).prop_flat_map(|(seed, n)| {
        (
            proptest::collection::vec((kind(), cond(n)), 1..20),
            proptest::option::of((0..n, 2u32..=4)),
            proptest::option::of((1..n, 0u64..400)),
            200u64..600,
        )
            .prop_map(move |(preds, slow, crash, rounds)| Plan {
                seed,
                n,
                preds,
                slow,
                crash,
                rounds,
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(squall_transport_mem::sim::proptest_cases(128)))]

    #[test]
    fn predicates_fire_exactly_when_their_condition_holds(plan in plan()) {
        if let Err(e) = run(&plan) {
            return Err(TestCaseError::fail(e));
        }
    }
}

#[test]
fn every_kind_fires_in_a_fixed_schedule() {
    let plan = Plan {
        seed: 1,
        n: 3,
        preds: vec![
            (PredicateKind::OneTime, Cond::CounterAtLeast(1, 5)),
            (PredicateKind::Transition, Cond::FlagSet(2)),
            (PredicateKind::Recurrent, Cond::CounterEven(0)),
            (PredicateKind::OneTime, Cond::AllReached(3)),
        ],
        slow: Some((2, 3)),
        crash: None,
        rounds: 800,
    };
    let fires = run(&plan).expect("fires as specified");
    assert!(
        fires > 10,
        "only {fires} fires: the schedule exercised nothing"
    );
}

/// Triggers insert and remove predicates, their own included; a removed predicate is not
/// evaluated again, an inserted one is first evaluated in the next round.
#[test]
fn triggers_insert_and_remove_predicates() {
    let mut c = Cluster::new(
        2,
        3,
        SmcConfig {
            window: 1,
            slot_size: 8,
        },
    );
    let f = c.fields;
    let log = Rc::new(RefCell::new(Vec::<&'static str>::new()));
    let handle = Rc::new(Cell::new(None));
    let (l1, l2, h2) = (log.clone(), log.clone(), handle.clone());
    // A recurrent predicate that removes itself after its third firing.
    let count = Rc::new(Cell::new(0));
    let cnt = count.clone();
    let h = c.sst(0).insert(
        PredicateKind::Recurrent,
        |_| true,
        move |s| {
            cnt.set(cnt.get() + 1);
            l1.borrow_mut().push("recurrent");
            if cnt.get() == 3
                && let Some(h) = h2.get()
            {
                s.remove(h);
            }
        },
    );
    handle.set(Some(h));
    // A one-time predicate whose trigger inserts another one-time predicate.
    c.sst(0).insert(
        PredicateKind::OneTime,
        move |s| s.get(s.my_row(), f.count) >= 1,
        move |s| {
            l2.borrow_mut().push("first");
            let l3 = l2.clone();
            s.insert(
                PredicateKind::OneTime,
                move |s| s.get(s.my_row(), f.count) >= 1,
                move |_| l3.borrow_mut().push("second"),
            );
        },
    );
    assert_eq!(c.table(0).predicates(), 2);
    c.sst(0).poll_once().expect("runs");
    c.sst(0).set(f.count, 1);
    c.sst(0).poll_once().expect("runs"); // "first" fires and inserts "second"
    assert_eq!(c.table(0).predicates(), 2);
    c.sst(0).poll_once().expect("runs"); // "second" fires; recurrent fires its 3rd time, removes itself
    for _ in 0..5 {
        c.sst(0).poll_once().expect("runs");
    }
    assert_eq!(
        *log.borrow(),
        vec!["recurrent", "recurrent", "first", "recurrent", "second"]
    );
    assert_eq!(c.table(0).predicates(), 0);
    let _ = Duration::ZERO;
}
