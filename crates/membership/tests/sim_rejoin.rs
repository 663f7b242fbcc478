//! Rejoin under the same id (issue 6) on the simulator, through the mixed proptest's harness
//! (`tests/group_sim/mix.rs`: every check after every step, liveness and accounting at the
//! end): a node crashes, restarts as a new incarnation (`Sim::restart_node`: fresh memory, an
//! empty log) and joins through `Group::joining` with state transfer, an initial member
//! included. Its chain values from its state's position on must equal everyone's.
#![allow(clippy::unwrap_used)]

use squall_transport_mem::sim::check_seeds;

mod group_sim;
#[path = "group_sim/mix.rs"]
mod mix_harness;
use mix_harness::{Ev, Plan, run};

/// Runs `events` on `initial` members for `seeds` seeds; every run must restart and activate
/// (state transfer done) exactly `rejoins` incarnations.
fn sweep(name: &str, seeds: u64, initial: usize, events: Vec<Ev>, rejoins: usize) {
    check_seeds(name, seeds, |seed| {
        let plan = Plan {
            seed,
            initial,
            events: events.clone(),
            state_size: 600,
            steps: 7500,
            settle: 3000,
        };
        let s = run(&plan).map_err(|e| format!("{plan:?}: {e}"))?;
        if s.rejoined != rejoins || s.activated != rejoins {
            return Err(format!("{plan:?}: expected {rejoins} rejoins, got {s:?}"));
        }
        Ok(())
    });
}

/// An initial member crashes, is removed, restarts as a new incarnation and joins by state
/// transfer, with the same hash chain from its state on.
#[test]
fn a_crashed_member_restarts_under_its_id_and_rejoins() {
    let events = vec![
        Ev::Crash { node: 2, step: 500 },
        Ev::Rejoin {
            pick: 0,
            step: 2500,
        },
    ];
    sweep(
        "a_crashed_member_restarts_under_its_id_and_rejoins",
        3,
        4,
        events,
        1,
    );
}

/// The restart comes one step after the crash, before the survivors even suspect the old
/// incarnation: its failure and the new incarnation's link arrive in one batch of events, a
/// failure report made while handling the old one must not cut the new link, and the row is
/// readmitted only once the view without the old incarnation is installed.
#[test]
fn a_member_restarted_before_its_removal_waits_and_rejoins() {
    let events = vec![
        Ev::Crash { node: 3, step: 800 },
        Ev::Rejoin { pick: 0, step: 801 },
    ];
    sweep(
        "a_member_restarted_before_its_removal_waits_and_rejoins",
        3,
        4,
        events,
        1,
    );
}

/// The same node crashes and rejoins three times; each new incarnation catches up by state
/// transfer.
#[test]
fn a_member_crashes_and_rejoins_repeatedly() {
    let mut events = Vec::new();
    for k in 0..3 {
        events.push(Ev::Crash {
            node: 1,
            step: 400 + 2000 * k,
        });
        events.push(Ev::Rejoin {
            pick: 0,
            step: 900 + 2000 * k,
        });
    }
    sweep("a_member_crashes_and_rejoins_repeatedly", 2, 3, events, 3);
}

/// The leader (node 0, the first view's lowest rank) crashes and restarts under its id: a
/// new leader takes over, and the old leader's new incarnation joins as an ordinary member.
#[test]
fn the_leader_restarts_under_its_id_and_rejoins() {
    let events = vec![
        Ev::Crash { node: 0, step: 600 },
        Ev::Rejoin {
            pick: 0,
            step: 1200,
        },
    ];
    sweep(
        "the_leader_restarts_under_its_id_and_rejoins",
        3,
        4,
        events,
        1,
    );
}

/// The leader decides the view that adds a rejoining member, crashes the moment it logged the
/// decision (mid-trim), and restarts under its id 1 to 3 steps later. The survivors install
/// that view, which still names the leader's old incarnation, after the new incarnation
/// connected, so the view's epoch starts on handles that never saw the old incarnation fail.
/// The generalised form of `sim_group_mix::regression_a_restarted_node_times_out_peers_that_have_not_readmitted_it`.
/// Without `RoundRobin::suspect_known` in `Group::start_epoch` the survivors write that view's
/// traffic into the new incarnation's region set. The new incarnation later runs a view on the
/// same set and delivers stale rows ("a delivery names the wrong sender", or a chain that
/// differs).
#[test]
fn the_leader_restarts_right_after_deciding_a_view_that_still_names_it() {
    check_seeds(
        "the_leader_restarts_right_after_deciding_a_view_that_still_names_it",
        4,
        |seed| {
            let plan = Plan {
                seed,
                initial: 5,
                events: vec![
                    Ev::Crash { node: 2, step: 400 },
                    Ev::RestartLeaderAtDecision {
                        step: 1500,
                        after: 1 + seed as usize % 3,
                    },
                    Ev::Rejoin {
                        pick: 0,
                        step: 2000,
                    },
                ],
                state_size: 600,
                steps: 6000,
                settle: 3000,
            };
            let s = run(&plan).map_err(|e| format!("{plan:?}: {e}"))?;
            if !s.leader_crashed_mid_trim || s.rejoined != 2 || s.activated != 2 {
                return Err(format!(
                    "{plan:?}: expected the leader to crash mid-trim and two rejoins, got {s:?}"
                ));
            }
            Ok(())
        },
    );
}
