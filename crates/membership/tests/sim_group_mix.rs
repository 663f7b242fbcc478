//! A shrinking proptest over `Group` (issue 6's judging line): a plan of several events at
//! random steps — crashes of random members (the leader included), the leader crashing the
//! moment it has logged a decision (mid-trim), possibly restarting under its id a few steps
//! later, the state-transfer sender crashing mid-transfer,
//! minority partitions and their heals, joins (with state transfer through `Group::joining`'s
//! `join`, `state_wanted` / `provide_state` / `take_state`) and graceful leaves — while every
//! active member submits.
//!
//! The application is a model: a hash chain over delivered payloads; its snapshot is
//! `[hash][next position][padding]`. Checked **after every step**:
//!
//! - every node's chain value at a position equals every other node's (joiners included, from
//!   the position of their transferred state): total order and agreement on content;
//! - positions are gap-free on every node (initial members from 0, joiners from their state's);
//! - every view is installed after the same number of deliveries by everyone who installed it
//!   with a trim (virtual synchrony: together with the chain, the same messages in the view
//!   before);
//! - every view has the same members everywhere and keeps a majority of its predecessor (no
//!   minority installs a view), read both from `Upcall::View` and from each node's `Group::view`;
//! - a message reported `Upcall::Discarded` to its sender is delivered nowhere, before or after;
//! - each sender's messages are delivered in the order it submitted them, at most once;
//! - a passive joiner hands out nothing before its state and refuses submits;
//! - a joiner asks for the state only a member that holds it (is active), or one already gone.
//!
//! Faults are held to a budget (a plan's event that would leave the newest view without a
//! majority of live members is skipped when it comes due), so the group must stay live. At the
//! end: every
//! survivor (joiners included) is active, running, in the same view and at the same position,
//! and delivered in its last view; every message a survivor or a leaver submitted was delivered
//! or reported discarded, never both; every leaver left.
//!
//! `SQUALL_PROPTEST_CASES` raises the case count for soaks.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use squall_transport_mem::sim::{check_seeds, proptest_cases};

mod group_sim;
#[path = "group_sim/mix.rs"]
mod mix_harness;
use mix_harness::{Ev, JOINERS, Plan, run};

fn ev_strategy(initial: usize, horizon: usize) -> impl Strategy<Value = Ev> {
    let universe = initial + JOINERS;
    let step = 100..horizon;
    prop_oneof![
        3 => (0..universe, step.clone()).prop_map(|(node, step)| Ev::Crash { node, step }),
        1 => step.clone().prop_map(|step| Ev::CrashLeaderAtDecision { step }),
        1 => (step.clone(), 1usize..20)
            .prop_map(|(step, after)| Ev::RestartLeaderAtDecision { step, after }),
        1 => (step.clone(), 0usize..12)
            .prop_map(|(step, after)| Ev::CrashSenderMidTransfer { step, after }),
        2 => (proptest::collection::vec(0..universe, 1..=2), step.clone(), 200usize..3000)
            .prop_map(|(side, step, len)| Ev::Partition { side, step, len }),
        4 => (0..JOINERS, step.clone()).prop_map(|(joiner, step)| Ev::Join { joiner, step }),
        2 => (0..universe, step.clone()).prop_map(|(node, step)| Ev::Leave { node, step }),
        3 => (0..universe, step).prop_map(|(pick, step)| Ev::Rejoin { pick, step }),
    ]
}

fn plan_strategy() -> impl Strategy<Value = Plan> {
    (any::<u64>(), 3usize..=5, 16usize..2000).prop_flat_map(|(seed, initial, state_size)| {
        let steps = 7000;
        (
            Just(seed),
            Just(initial),
            proptest::collection::vec(ev_strategy(initial, steps - 1500), 0..7),
            Just(state_size),
        )
            .prop_map(move |(seed, initial, events, state_size)| Plan {
                seed,
                initial,
                events,
                state_size,
                steps,
                settle: 3000,
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(8)))]

    /// Random crashes (the leader's included), the leader crashing mid-trim, the transfer
    /// sender crashing mid-transfer, minority partitions and heals, joins and leaves, at random
    /// steps, with every active member submitting: every check of the module docs after every
    /// step, and the end-of-run checks.
    #[test]
    fn proptest_group_joins_leaves_crashes_and_partitions(plan in plan_strategy()) {
        if let Err(e) = run(&plan) {
            prop_assert!(false, "{:?}: {}", plan, e);
        }
    }
}

/// A fixed mix per seed (both joiners join, the leader crashes mid-trim, the sender crashes
/// mid-transfer, a member leaves, a one-member partition heals), so every kind of event is
/// exercised in the default run whatever the proptest draws. Fails if the mid-trim or the
/// mid-transfer crash never happened in any seed.
#[test]
fn group_mix_every_event_kind_seed_sweep() {
    let mut leader = 0;
    let mut sender = 0;
    check_seeds("group_mix_every_event_kind_seed_sweep", 4, |seed| {
        let plan = Plan {
            seed,
            initial: 5,
            events: vec![
                Ev::Join {
                    joiner: 0,
                    step: 300 + (seed as usize * 131) % 800,
                },
                Ev::CrashSenderMidTransfer {
                    step: 200,
                    after: 1 + seed as usize % 4,
                },
                Ev::Join {
                    joiner: 1,
                    step: 2500 + (seed as usize * 71) % 800,
                },
                Ev::CrashLeaderAtDecision { step: 2400 },
                Ev::Leave {
                    node: 1 + seed as usize % 5,
                    step: 4000,
                },
                Ev::Partition {
                    side: vec![2 + seed as usize % 4],
                    step: 4500,
                    len: 1500,
                },
            ],
            state_size: 1500,
            steps: 7000,
            settle: 3000,
        };
        let s = run(&plan).map_err(|e| format!("{plan:?}: {e}"))?;
        eprintln!("seed {seed}: {s:?}");
        leader += usize::from(s.leader_crashed_mid_trim);
        sender += usize::from(s.sender_crashed_mid_transfer);
        Ok(())
    });
    assert!(leader > 0, "the leader never crashed mid-trim");
    assert!(sender > 0, "the sender never crashed mid-transfer");
}

/// The proptest's first failure (`sim_group_mix.proptest-regressions`), a harness bug: joiner
/// n4 crashes before it asks to join, then "asks" through its closed endpoint. The harness now
/// lets only live nodes ask; the group carries on without n4.
#[test]
fn regression_a_crashed_joiner_asks_to_join() {
    let plan = Plan {
        seed: 3419490789431464748,
        initial: 3,
        events: vec![
            Ev::Crash { node: 4, step: 453 },
            Ev::Join {
                joiner: 1,
                step: 2448,
            },
        ],
        state_size: 1127,
        steps: 7000,
        settle: 3000,
    };
    let s = run(&plan).map_err(|e| format!("{plan:?}: {e}")).unwrap();
    reaches(
        &plan,
        s.skipped == 0,
        "n4 crashing (not skipped by the fault budget) before its join comes due",
        &s,
    );
}

/// The soak's first failure with rejoins (`SQUALL_PROPTEST_CASES=120`, after 64 clean cases):
/// n2 crashes and is removed; at 3963 it restarts and asks to join; the leader n0 decides the
/// view that adds it, crashes mid-trim (armed at 980), and restarts 9 steps later (3972), so
/// view 2 = [0, 1, 3, 4, 2] is installed still naming n0's old incarnation. Four defects, all
/// fixed:
/// (1) n2, an outsider then, readmitted n0's new incarnation at once and its row handed n0
/// view 2, which n0 took for its own: now an outsider readmits nobody.
/// (2) The restarted n0 timed out the survivors' heartbeats while they held it pending: now the
/// SST does not suspect for silence a member that connected but never wrote.
/// (3) "step 4024: n0: a delivery names the wrong sender": the survivors started view 2's epoch
/// after n0's restart. A fresh epoch handle never sees the old incarnation's failure, so the
/// epoch wrote view 2's traffic (on region set 0) into the new incarnation. That incarnation
/// then ran view 4 on set 0 and read n1's stale view-2 row as n3's row (rank 1 in view 4).
/// Now a member the core already suspects is failed in a new epoch from the start
/// (`RoundRobin::suspect_known`). (4) With (3) fixed, this showed next: `state_wanted` said
/// yes on a wedged member whose `provide_state` then refused. Now it says no once wedged.
/// Mutation: without `suspect_known` in `Group::start_epoch` this fails again with the wrong
/// sender (step 4024 when found). Re-pinned in s21 (`docs/MEMBERSHIP.md`, twenty-eighth
/// part): at the found seed (2828243547500920348) the leader's crash came at step 3973, after
/// the second `Rejoin` (3972), so it was never restarted, and the test passed with the
/// mutation. The second `Rejoin` is now at 3982, 9 steps after the crash as found, and the
/// simulator seed is 9, picked by a scan of seeds 0..25 under the mutation (9, 10 and 16 fail
/// with the wrong sender, at step 4035 for seed 9). Fails unless the leader crashed at its
/// decision between the two rejoins and both rejoins happened.
#[test]
fn regression_a_restarted_node_times_out_peers_that_have_not_readmitted_it() {
    let plan = Plan {
        seed: 9,
        initial: 5,
        events: vec![
            Ev::Crash { node: 2, step: 471 },
            Ev::CrashLeaderAtDecision { step: 980 },
            Ev::Rejoin {
                pick: 0,
                step: 3963,
            },
            Ev::Partition {
                side: vec![5],
                step: 1902,
                len: 220,
            },
            Ev::Rejoin {
                pick: 0,
                step: 3982,
            },
        ],
        state_size: 1862,
        steps: 7000,
        settle: 3000,
    };
    let s = run(&plan).map_err(|e| format!("{plan:?}: {e}")).unwrap();
    reaches(
        &plan,
        s.leader_crash_step
            .is_some_and(|at| (3963..3982).contains(&at))
            && s.rejoined == 2,
        "the leader crashing at the decision adding the restarted n2 (steps 3963..3982) and restarting after it",
        &s,
    );
}

/// A failure of the default run (CI, s16): n0 crashes at 103 and rejoins under its id at 1044
/// (view 2 adds the new incarnation); joiner n5 joins at 2628 (view 3). n5 had held n0's new
/// incarnation pending since it connected, and an outsider readmits nobody, so n5 installed
/// view 3 with n0 suspected, wedged, and never took its state; the group waited for n5's
/// round-robin slot ("n0 delivered nothing in its last view 3"). Fixed: members publish the
/// incarnation they readmitted (`gms_admitted`), and an outsider installing a view readmits a
/// pending node of it that the member it follows readmitted.
#[test]
fn regression_a_rejoined_member_delivers_in_its_last_view() {
    let plan = Plan {
        seed: 6838086537834142861,
        initial: 5,
        events: vec![
            Ev::Rejoin {
                pick: 0,
                step: 1044,
            },
            Ev::Crash { node: 0, step: 103 },
            Ev::Join {
                joiner: 0,
                step: 2628,
            },
        ],
        state_size: 301,
        steps: 7000,
        settle: 3000,
    };
    let s = run(&plan).map_err(|e| format!("{plan:?}: {e}")).unwrap();
    reaches(
        &plan,
        s.rejoined == 1 && s.views >= 3,
        "n0 rejoined (view 2), then n5 joining (view 3)",
        &s,
    );
}

/// The s16 soak's failure (`SQUALL_PROPTEST_CASES=120`, after 14 clean cases; shrunk). Joiner n5
/// crashes before it ever joined (1911) and restarts under its id at 1938; the members readmit
/// it at once (it is in none of their views) and add it. Joiner n4 had been outside the group all
/// along, so it saw n5's old incarnation fail and holds the new one pending (an outsider
/// readmits nobody). When n4 joins (5124), its view contains n5, so it never readmits it. It
/// suspects a member that everyone else counts, wedges, and the group stalls ("n0 delivered
/// nothing in its last view 2"). This is the open case of
/// `sim_rejoin::a_joiner_that_saw_a_member_restart_joins_in_the_same_view_as_its_new_incarnation`,
/// with the joiner entering a later view than the rejoiner. Fixed with
/// `regression_a_rejoined_member_delivers_in_its_last_view`'s fix: n4 readmits n5's new
/// incarnation when it installs a view from a member that readmitted it.
#[test]
fn regression_a_joiner_that_saw_a_joiner_restart_never_readmits_it() {
    let plan = Plan {
        seed: 1147730987966906111,
        initial: 4,
        events: vec![
            Ev::Rejoin {
                pick: 0,
                step: 1938,
            },
            Ev::Crash {
                node: 5,
                step: 1911,
            },
            Ev::Join {
                joiner: 0,
                step: 5124,
            },
        ],
        state_size: 1735,
        steps: 7000,
        settle: 3000,
    };
    let s = run(&plan).map_err(|e| format!("{plan:?}: {e}")).unwrap();
    reaches(
        &plan,
        s.rejoined == 1 && s.views >= 2 && s.activated >= 2,
        "n5 restarted and added, then n4 joining",
        &s,
    );
}

/// Found by the s18 run of the default proptest (a harness defect, not the protocol's): n0
/// crashes (2994) and, undetected (no timeout yet), restarts under its id (3483); the sim hands
/// its old incarnation's failure and its new link out together. Leader n1 decides view 1
/// without n0 and crashes at that decision (the `RestartLeaderAtDecision` armed at 104). The
/// harness let it: its fault budget counted the restarted n0 as alive, although view 0 still
/// named n0's old incarnation. So n2 and n3 suspected two of four and stopped (minority, as
/// partition safety requires), and the run ended with no group ("survivor n0 is not active at
/// the end"). Now a restarted node that installed no view yet counts as lost where the newest
/// view names it (`at_risk`), and the leader's crash is skipped.
#[test]
fn regression_the_fault_budget_counts_a_restarted_node_that_the_view_still_names_as_lost() {
    let plan = Plan {
        seed: 8678402638699132809,
        initial: 4,
        events: vec![
            Ev::Crash {
                node: 0,
                step: 2994,
            },
            Ev::RestartLeaderAtDecision {
                step: 104,
                after: 3,
            },
            Ev::Rejoin {
                pick: 5,
                step: 3483,
            },
        ],
        state_size: 118,
        steps: 7000,
        settle: 3000,
    };
    let s = run(&plan).map_err(|e| format!("{plan:?}: {e}")).unwrap();
    reaches(
        &plan,
        s.leader_crash_refused && !s.leader_crashed_mid_trim && s.rejoined == 1,
        "the leader crash at the decision refused by the fault budget (n0 restarted, still named by the view)",
        &s,
    );
}

/// Found by the s30 soak (`SQUALL_PROPTEST_CASES=48 PROPTEST_RNG_SEED=3002`, `docs/MEMBERSHIP.md`,
/// ninety-seventh and hundred-and-first parts): no node crashes (the `Rejoin`s find none and are
/// skipped), n2 is cut off with n5 (not a member) from step 3134 for 503 steps. n5 adopted n2's
/// suspicion of n3 and, after the heal, n0 and n1 adopted n5's: with n2 suspected they stopped
/// as a minority ("minority: in view 0 this member suspects [NodeId(2), NodeId(3)]"), though n3
/// was never cut off. Now a member counts only the suspicions of its view's members, and a node
/// with no view adopts none.
#[test]
fn regression_soak_s30_a_member_never_cut_off_is_suspected_beside_a_partitioned_one() {
    let plan = Plan {
        seed: 16131749396308446656,
        initial: 4,
        events: vec![
            Ev::Rejoin {
                pick: 4,
                step: 2606,
            },
            Ev::Rejoin {
                pick: 2,
                step: 1936,
            },
            Ev::Rejoin {
                pick: 4,
                step: 4469,
            },
            Ev::Partition {
                side: vec![2, 5],
                step: 3134,
                len: 503,
            },
            Ev::Rejoin {
                pick: 4,
                step: 3749,
            },
            Ev::Join {
                joiner: 1,
                step: 5016,
            },
        ],
        state_size: 810,
        steps: 7000,
        settle: 3000,
    };
    run(&plan).map_err(|e| format!("{plan:?}: {e}")).unwrap();
}

/// Fails as a regression whose plan no longer reaches `moment` (the simulator's schedules shift
/// with protocol changes) unless `reached` holds.
fn reaches(plan: &Plan, reached: bool, moment: &str, s: &mix_harness::Stats) {
    assert!(
        reached,
        "{} (stats {s:?})",
        group_sim::missed(plan.seed, moment)
    );
}
