//! The replicated KV service through total restarts of real `Group`s (durable epochs, epoch
//! files in a scratch directory, checkpoints every few deliveries) in the simulator. Clients
//! keep submitting and fail over throughout; at a random round every replica is killed — all
//! at once, or one by one (the group changing views, the last ones a stopped minority), the
//! first kill sometimes waiting for a checkpoint in flight — then, after a while down, all
//! restart from their GMS logs and directories; some runs kill and restart replicas again
//! during (or after) the restart.
//!
//! Checked after every step: every replica that is restarting or joining answers a local read
//! `Unavailable` (never a read from a state that is not the group's); a replica's restart
//! completes at or past every position any replica applied before the kills (nothing
//! committed is lost); deliveries agree at every position across lives and are gapless per
//! life (the harness's `check_agreement`). After the run: every replica is back, holding a
//! state, and all hold the same snapshot at the same position; a read of every key completes;
//! the history, final reads included, is linearizable (so every acknowledged write survived).
#![allow(clippy::unwrap_used)]

mod common;

use std::cell::Cell;
use std::sync::atomic::Ordering;

use common::{Backend, Cluster, same_snapshots};
use proptest::prelude::*;
use squall_ordering::linearizability::check;
use squall_ordering::linearizability::kv::{Kv, KvInput};
use squall_smr::wire::ReadMode;
use squall_transport::NodeId;
use squall_transport_mem::sim::{check_seeds, proptest_cases};

const N: usize = 3;
const KEYS: u64 = 4;
/// Replicas checkpoint every this many applied deliveries.
const EVERY: u64 = 8;
/// Rounds a kill waits at most for a checkpoint in flight.
const GRACE: u32 = 2_000;
/// Rounds run after the restart before the cluster settles.
const AFTER: u32 = 2_000;

/// One run's schedule.
#[derive(Clone, Copy, Debug)]
struct Plan {
    seed: u64,
    /// The round of the first kill.
    kill_at: u32,
    /// Rounds between kills, one replica at a time (0: all at once).
    gap: u32,
    /// The first kill waits (at most [`GRACE`] rounds) for a checkpoint in flight at a victim.
    mid_checkpoint: bool,
    /// Rounds every replica stays down.
    down: u32,
    /// Rounds after the restart, replicas are killed and restarted again: all of them, or
    /// replica `seed % N`.
    bounce: Option<(u32, bool)>,
    /// Restarted replicas decode their checkpoints off their thread (s22), each decode held
    /// this many rounds before it is run.
    decode_hold: Option<u32>,
}

/// What a run did (the sweeps check that their interesting cases happened).
#[derive(Debug, Default)]
struct Stats {
    /// The first kill found a checkpoint in flight at a victim.
    mid_checkpoint: bool,
    /// A bounce landed while some replica was still restarting.
    bounced_restarting: bool,
    /// Restarts that completed, replica by replica (the restart of a replica the group went
    /// on without completes when it finds that out; it then joins again by transfer).
    completed: usize,
    /// Completed restarts that installed a checkpoint the group restored (and replayed only
    /// what follows it).
    restored: usize,
    /// The highest position any replica applied before the kills.
    before: u64,
    /// Replicas restarted by the operator after their group stopped saying "restart it from
    /// its log" (cut off from a majority of the restart).
    operator_restarts: usize,
    /// Rounds from the restart to the last completion of a replica's restart.
    restart_rounds: u32,
    /// The position every replica ends at.
    at: u64,
    /// Decodes run off the replicas' threads after their hold.
    decoded: usize,
}

/// The per-step checks, with what they remember between steps.
struct Watch {
    /// The highest position any replica applied before the last total kill.
    before: u64,
    /// Per replica: whether it was restarting after the previous step.
    restarting: Vec<bool>,
    completed: usize,
    restored: usize,
    operator_restarts: usize,
    /// Steps taken, and the step of the last completed restart.
    steps: u32,
    last_completed: u32,
    /// [`Plan::decode_hold`], and per replica the step its held decode was first seen.
    decode_hold: Option<u32>,
    held_since: Vec<Option<u32>>,
    /// Decodes run after their hold.
    decoded: usize,
}

impl Watch {
    fn step(&mut self, cl: &mut Cluster, load: Option<&mut u64>) -> Result<(), String> {
        match load {
            Some(next_value) => cl.load_step(KEYS, next_value)?,
            None => cl.step()?,
        }
        cl.probe_unavailable()?;
        self.steps += 1;
        if let Some(hold) = self.decode_hold {
            for i in 0..N {
                if cl.installs[i].is_none() {
                    self.held_since[i] = None;
                    continue;
                }
                let since = *self.held_since[i].get_or_insert(self.steps);
                let core = cl.cores[i]
                    .as_ref()
                    .ok_or("a held decode of a dead replica")?;
                if core.applied() != 0 || !core.is_installing() {
                    return Err(format!(
                        "replica {i} applied {} deliveries while its state was decoded",
                        core.applied()
                    ));
                }
                if self.steps - since >= hold {
                    cl.finish_install(i);
                    self.held_since[i] = None;
                    self.decoded += 1;
                }
            }
        }
        for i in 0..N {
            let Some(core) = cl.cores[i].as_ref() else {
                self.restarting[i] = false;
                continue;
            };
            if self.restarting[i] && !core.is_restarting() {
                self.completed += 1;
                self.last_completed = self.steps;
                if core.metrics().states_installed.load(Ordering::Relaxed) > 0 {
                    self.restored += 1;
                }
                // A replica the group went on without joins again by transfer.
                if !core.is_joining() && core.applied() < self.before {
                    return Err(format!(
                        "replica {i} completed its restart at position {}, but position {} was applied before the kills",
                        core.applied(),
                        self.before
                    ));
                }
            }
            self.restarting[i] = core.is_restarting();
        }
        // The operator's part: a member cut off from a majority of the restart stops and says
        // to restart it from its log (it then finds the group gone on and joins again).
        for i in 0..N {
            let cut_off = cl
                .group(i)
                .and_then(|g| g.stopped())
                .is_some_and(|why| why.contains("restart it from its log"));
            if cut_off {
                if self.operator_restarts >= 2 * N {
                    return Err(format!(
                        "replica {i} cut off again after {} operator restarts",
                        self.operator_restarts
                    ));
                }
                self.operator_restarts += 1;
                let log = cl.kill(i);
                self.restart(cl, i, log)?;
            }
        }
        Ok(())
    }

    /// Restarts replica `i` from `log`; it is watched from here.
    fn restart(&mut self, cl: &mut Cluster, i: usize, log: Option<Vec<u8>>) -> Result<(), String> {
        cl.restart(i, log.ok_or(format!("replica {i} had no log"))?);
        self.restarting[i] = cl.cores[i].as_ref().is_some_and(|c| c.is_restarting());
        Ok(())
    }
}

/// Per replica: its core (joining, restarting, applied), its group's view, whom its restart
/// waits for, why it stopped, whether it asked to join again.
fn describe(cl: &mut Cluster) -> Vec<String> {
    (0..N)
        .map(|k| {
            let core =
                (cl.cores[k].as_ref()).map(|c| (c.is_joining(), c.is_restarting(), c.applied()));
            cl.group(k).map_or("down".into(), |g| {
                format!(
                    "core {core:?}, view {:?}, restart waits for {:?}, stopped {:?}, rejoined {:?}",
                    g.view().map(|v| (v.id, v.members.clone())),
                    g.gms().restarting(),
                    g.stopped(),
                    g.gms().rejoined()
                )
            })
        })
        .collect()
}

fn run(p: &Plan) -> Result<Stats, String> {
    let mut cl = Cluster::new(
        Backend::Durable {
            snapshot_every: EVERY,
        },
        N,
        4,
        p.seed,
    );
    cl.timeout = std::time::Duration::from_millis(1);
    // A restarting replica answers `Unavailable` at once and the client moves on: with the
    // harness's default (two rounds of the replicas) clients gave up within a few steps of a
    // restart, and a history full of unknown outcomes is beyond the checker's search.
    cl.max_attempts = 1_000;
    if let Some(hold) = p.decode_hold {
        // Every replica answers `Unavailable` for the whole hold (up to three attempts a
        // round): a client that gave up leaves an unknown outcome, and a few of them put the
        // history beyond the checker's search.
        cl.max_attempts += 4 * hold as usize;
    }
    cl.read_mode = if p.seed % 2 == 0 {
        ReadMode::Barrier
    } else {
        ReadMode::Ordered
    };
    let mut stats = Stats::default();
    let mut w = Watch {
        before: 0,
        restarting: vec![false; N],
        completed: 0,
        restored: 0,
        operator_restarts: 0,
        steps: 0,
        last_completed: 0,
        decode_hold: p.decode_hold,
        held_since: vec![None; N],
        decoded: 0,
    };
    cl.restart_decoding_off_thread = p.decode_hold.is_some();
    let mut next_value = 0;
    for _ in 0..p.kill_at {
        w.step(&mut cl, Some(&mut next_value))?;
    }
    // The kills: all at once, or one by one starting at replica `seed % N`.
    let mut logs: Vec<Option<Vec<u8>>> = vec![None; N];
    let order: Vec<usize> = (0..N).map(|k| (p.seed as usize + k) % N).collect();
    let batches: Vec<Vec<usize>> = if p.gap == 0 {
        vec![order]
    } else {
        order.into_iter().map(|v| vec![v]).collect()
    };
    for (k, victims) in batches.iter().enumerate() {
        if k == 0 && p.mid_checkpoint {
            for _ in 0..GRACE {
                if victims.iter().any(|&v| {
                    cl.group(v)
                        .is_some_and(|g| g.checkpoint_in_flight().is_some())
                }) {
                    stats.mid_checkpoint = true;
                    break;
                }
                w.step(&mut cl, Some(&mut next_value))?;
            }
        } else if k > 0 {
            for _ in 0..p.gap {
                w.step(&mut cl, Some(&mut next_value))?;
            }
        }
        for &v in victims {
            w.before = w
                .before
                .max(cl.cores[v].as_ref().map_or(0, |c| c.applied()));
            logs[v] = cl.kill(v);
        }
    }
    stats.before = w.before;
    for _ in 0..p.down {
        w.step(&mut cl, Some(&mut next_value))?;
    }
    let restarted_at = cl.now();
    let restart_step = w.steps;
    for (i, log) in logs.into_iter().enumerate() {
        w.restart(&mut cl, i, log)?;
    }
    for round in 0..AFTER + p.decode_hold.unwrap_or(0) {
        if let Some((at, all)) = p.bounce {
            if round == at {
                stats.bounced_restarting = cl.cores.iter().flatten().any(|c| c.is_restarting());
                let victims: Vec<usize> = if all {
                    (0..N).collect()
                } else {
                    vec![p.seed as usize % N]
                };
                let logs: Vec<(usize, Option<Vec<u8>>)> =
                    victims.iter().map(|&v| (v, cl.kill(v))).collect();
                for (v, log) in logs {
                    w.restart(&mut cl, v, log)?;
                }
            }
        }
        w.step(&mut cl, Some(&mut next_value))?;
    }
    for _ in 0..60_000 {
        if cl.busy_clients() == 0
            && (cl.cores.iter().flatten()).all(|c| !c.is_restarting() && !c.is_joining())
        {
            break;
        }
        w.step(&mut cl, None)?;
    }
    stats.at = match cl.settle(60_000) {
        Ok(at) => at,
        Err(e) => return Err(format!("{e}; the groups: {:?}", describe(&mut cl))),
    };
    stats.completed = w.completed;
    stats.restored = w.restored;
    stats.operator_restarts = w.operator_restarts;
    stats.restart_rounds = w.last_completed.saturating_sub(restart_step);
    stats.decoded = w.decoded;
    let groups = describe(&mut cl);
    for i in 0..N {
        let c = cl.cores[i].as_ref().ok_or(format!("replica {i} is down"))?;
        if !cl.live(i) || c.is_joining() || c.is_restarting() {
            return Err(format!(
                "replica {i} did not come back (joining {}, restarting {}); the groups: {groups:?}",
                c.is_joining(),
                c.is_restarting()
            ));
        }
    }
    let at = same_snapshots(&cl)?;
    if at < stats.before {
        return Err(format!(
            "the replicas end at {at}, before position {} applied before the kills",
            stats.before
        ));
    }
    let after = (cl.ops.iter())
        .filter(|o| o.ret.is_some() && o.call >= restarted_at)
        .count();
    if after == 0 {
        return Err("no operation completed after the restart".into());
    }
    // A read of every key, through each replica in turn: every acknowledged write must show.
    for k in 0..KEYS {
        cl.point(0, k as usize % N);
        cl.start(0, KvInput::Get(k));
        for _ in 0..60_000 {
            if cl.idle(0) {
                break;
            }
            w.step(&mut cl, None)?;
        }
        if cl.ops.last().is_none_or(|o| o.ret.is_none()) {
            return Err(format!("the final read of key {k} did not complete"));
        }
    }
    check(&Kv, &cl.ops).map_err(|e| format!("not linearizable: {e}"))?;
    Ok(stats)
}

/// The sweep's schedule for `seed`: all at once (even seeds) or one by one (odd); the first
/// kill mid-checkpoint unless `seed % 3 == 2`; down 0, 500 or 1000 rounds; unless
/// `seed % 4 == 2`, killed and restarted again: all of them 1 to 5 rounds into the restart
/// (even seeds), or one of them 100 to 260 rounds after it (odd; the proptest also bounces
/// one replica, or all, in the restart's first rounds after either kind of kill).
fn plan(seed: u64) -> Plan {
    Plan {
        seed,
        kill_at: 600 + (seed % 7) as u32 * 300,
        gap: if seed % 2 == 1 { 400 } else { 0 },
        mid_checkpoint: seed % 3 != 2,
        down: (seed % 3) as u32 * 500,
        bounce: (seed % 4 != 2).then_some(if seed % 2 == 0 {
            (1 + (seed % 5) as u32, true)
        } else {
            (100 + (seed % 5) as u32 * 40, false)
        }),
        decode_hold: None,
    }
}

thread_local! {
    static MID_CHECKPOINT: Cell<usize> = const { Cell::new(0) };
    static BOUNCED_RESTARTING: Cell<usize> = const { Cell::new(0) };
}

#[test]
fn replicas_survive_total_restarts_seed_sweep() {
    check_seeds("replicas_survive_total_restarts_seed_sweep", 2, |seed| {
        let p = plan(seed);
        let t = std::time::Instant::now();
        let s = run(&p).map_err(|e| format!("{p:?}: {e}"))?;
        eprintln!("seed {seed}: {p:?}: {s:?} in {:?}", t.elapsed());
        MID_CHECKPOINT.set(MID_CHECKPOINT.get() + usize::from(s.mid_checkpoint));
        BOUNCED_RESTARTING.set(BOUNCED_RESTARTING.get() + usize::from(s.bounced_restarting));
        if s.completed < N {
            return Err(format!("only {} restarts completed", s.completed));
        }
        if s.restored == 0 {
            return Err("no restart installed a checkpoint".into());
        }
        Ok(())
    });
    assert!(MID_CHECKPOINT.get() > 0, "no kill landed mid-checkpoint");
    assert!(
        BOUNCED_RESTARTING.get() > 0,
        "no restart during a restart happened"
    );
}

/// s22: the sweep's schedules with every restarted replica decoding its checkpoint off its
/// thread, each decode held 2 000 rounds (longer than the suspicion timeout) before it runs:
/// nothing is applied to a replica while its decode is held, and every check of the sweep
/// holds (restarts complete past everything applied before, identical snapshots,
/// linearizable).
#[test]
fn replicas_decoding_their_checkpoints_off_thread_survive_total_restarts_seed_sweep() {
    check_seeds(
        "replicas_decoding_their_checkpoints_off_thread_survive_total_restarts_seed_sweep",
        2,
        |seed| {
            let p = Plan {
                decode_hold: Some(2_000),
                ..plan(seed)
            };
            let t = std::time::Instant::now();
            let s = run(&p).map_err(|e| format!("{p:?}: {e}"))?;
            eprintln!("seed {seed}: {p:?}: {s:?} in {:?}", t.elapsed());
            if s.completed < N || s.restored == 0 || s.decoded == 0 {
                return Err(format!(
                    "{} restarts completed, {} installed a checkpoint, {} decoded off the thread",
                    s.completed, s.restored, s.decoded
                ));
            }
            Ok(())
        },
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(2)))]

    /// Random schedules, kill points, down times and bounces: the same checks as the sweep.
    /// A bounce comes in the restart's first rounds (0 to 19) or after it (from round 100), of
    /// one replica or of all, after either kind of kill. Since s21 a single replica is bounced
    /// in the first rounds too (that shape found the simulator's spurious `PeerFailed`, fixed;
    /// docs/MEMBERSHIP.md, thirty-first part); since s22 every replica is, after kills one by
    /// one too (that shape found the adopted-join regression and the restarting-view joiner
    /// regression below, both fixed; thirty-first and thirty-third parts).
    #[test]
    fn proptest_replicas_survive_total_restarts(
        seed in any::<u64>(),
        kill_at in 200u32..3_000,
        gap in prop_oneof![Just(0u32), 1u32..1_500],
        mid_checkpoint in any::<bool>(),
        down in 0u32..2_000,
        bounce in prop_oneof![
            Just(None),
            (0u32..20, any::<bool>()).prop_map(Some),
            (100u32..2_000, any::<bool>()).prop_map(Some),
        ],
    ) {
        let p = Plan { seed, kill_at, gap, mid_checkpoint, down, bounce, decode_hold: None };
        run(&p).map_err(|e| TestCaseError::fail(format!("{p:?}: {e}")))?;
    }
}

/// Regression (the proptest's first failure): every replica killed at once at round 200 and
/// restarted at once, then replica 0 killed and restarted again before the restarted cluster
/// took a step. Replicas 0 and 1 completed the restart in view 1 without replica 2, which never
/// heard from either (its restart waited for both from the first step) and stopped after the
/// suspicion timeout saying "restart it from its log"; the harness used to leave it stopped
/// ("replica 2 did not come back"), and since then restarted it as the operator. Since the
/// simulator stopped reporting `PeerFailed` of incarnations a node never linked (s21,
/// docs/MEMBERSHIP.md, thirty-first part) nobody stops in this schedule (no operator restart)
/// and the restart completes with all three.
#[test]
fn regression_a_replica_restarted_again_before_the_restart_took_a_step() {
    let s = run(&Plan {
        seed: 61350207784249398,
        kill_at: 200,
        gap: 0,
        mid_checkpoint: false,
        down: 0,
        bounce: Some((0, false)),
        decode_hold: None,
    })
    .unwrap();
    eprintln!("{s:?}");
}

/// The first seed of the second finding (fixed, see the regression below): replicas
/// killed one by one from round 435 (275 rounds apart, the first mid-checkpoint), down 1477
/// rounds, all restarted, and all restarted again 8 rounds into the restart. It hung exactly
/// like the adopted-join regression below (replica 0 asked to join again, `rejoined`
/// `(0, 2)`, while view 2 named it). Its trace then also showed the simulator's spurious `PeerFailed` (replica 0,
/// restarted first, suspected 1 and 2); since that was fixed in s21 this seed settles. Why the
/// schedule then missed the hang was not analysed; the regression below hung with it.
#[test]
fn a_replica_bounced_with_the_others_after_one_by_one_kills_settles_seed_8806518546290106954() {
    run(&Plan {
        seed: 8806518546290106954,
        kill_at: 435,
        gap: 275,
        mid_checkpoint: true,
        down: 1477,
        bounce: Some((8, true)),
        decode_hold: None,
    })
    .unwrap();
}

/// Regression (a finding of the proptest, fixed in s21): every replica killed at round 200 and
/// restarted at once (0, 1, 2 in turn), replica 0 killed and restarted again one round later.
/// Replica 2 waited for 0 and 1, which waited for 2, for good. The cause was the simulator's:
/// each replica restarted earlier was handed `PeerFailed` of the old incarnation of every one
/// restarted after it, which it had never linked, so 1 suspected 2 (pending its new
/// incarnation) and, after the bounce, readmitted 0's new incarnation instead (it counted
/// fewer than a majority), then counted 0 and itself and never readmitted 2; 2 counted 1 and
/// itself and never readmitted 0's new incarnation; 0's fresh endpoint counted 2, which never
/// wrote to it, and a linked member never heard from is never suspected for silence
/// (docs/MEMBERSHIP.md, thirty-first part). Fails with that `PeerFailed` put back.
#[test]
fn regression_a_replica_restarted_again_one_round_into_the_restart_completes() {
    run(&Plan {
        seed: 65599831940342298,
        kill_at: 200,
        gap: 0,
        mid_checkpoint: false,
        down: 0,
        bounce: Some((1, false)),
        decode_hold: None,
    })
    .unwrap();
}

/// Regression (a finding of the proptest, fixed in s21; docs/MEMBERSHIP.md, thirty-first
/// part): replicas killed one by one from round 1173 (84 rounds apart), down 126 rounds, all
/// restarted (replica 0's log ends at view 0; 1 and 2 went on in view 1 = [1, 2]), and all
/// restarted again 7 rounds into the restart. In the first restart replica 0 saw view 1
/// without it and asked to join (`Gms::rejoin`); replica 1 led the restart of view 1 and
/// decided it with the change `Join(0)` (logged), then every replica was killed. In the second
/// restart 1 and 2 adopt that logged decision and install view 2 = [1, 2, 0], naming 0.
/// Replica 0, restarting at view 0, sees a peer two views ahead and joins again
/// (`restart_round`: "two or more views behind"), `rejoined` = `(0, 2)`; as an outsider it
/// installed only a view *after* 2 (`follow_as_outsider`). Replicas 1 and 2 never proposed its
/// join (`wanted` skips a join request from a member of the view) nor suspected it (linked,
/// live): view 2's epoch waited for it for good. Now it also installs view 2 itself when the
/// decision that led to it admitted it as a joiner (`Gms::joined_by`).
#[test]
fn regression_a_replica_admitted_by_an_adopted_join_installs_the_view() {
    run(&Plan {
        seed: 10504632549416394654,
        kill_at: 1173,
        gap: 84,
        mid_checkpoint: false,
        down: 126,
        bounce: Some((7, true)),
        decode_hold: None,
    })
    .unwrap();
}

/// Regression (a finding of the widened proptest with the adopted-join fix, fixed in s22;
/// docs/MEMBERSHIP.md, thirty-third part): replicas killed one by one from round 1268 (66
/// apart), down 1376 rounds, all restarted, all restarted again 9 rounds into the restart.
/// Replica 1 (killed first: its log ends at view 0) asks to join again in the first restart;
/// 0 leads the restart of view 1 = [0, 2] with `Join(1)` and 2 installs view 2 = [0, 2, 1];
/// then all are bounced. In the second restart 0 and 2 restart view 2 (0 catches up from 2),
/// and 1, restarting at view 0, reads a peer two views ahead and asks to join again
/// (`rejoined` `(0, 2)`). An outsider never installs a *restarting* view, and 1's log cannot
/// restart view 2, yet 0 and 2 waited for it for good: `Gms::outsider_in_restart` counted
/// out only a linked member whose view block did not say restarting, and 1's still said
/// restarting at view 0 (written at construction, before its rejoin). Now a member that asks
/// to join counts as an outsider too: after the suspicion timeout 0 and 2 complete the restart
/// in view 3 = [0, 2] and 1 joins in view 4 by transfer.
#[test]
fn regression_a_replica_named_by_a_restarting_view_it_never_logged_joins_after_the_restart() {
    run(&Plan {
        seed: 2887861404133608544,
        kill_at: 1268,
        gap: 66,
        mid_checkpoint: false,
        down: 1376,
        bounce: Some((9, true)),
        decode_hold: None,
    })
    .unwrap();
}

/// s30 (docs/MEMBERSHIP.md, ninety-eighth part): replicas killed one by one from round 2732
/// (889 apart), down 1627 rounds, all restarted and all restarted again 9 rounds into the
/// restart. The history (452 operations, 55 of them scans: one partition) left 18 outcomes
/// unknown, 11 of them reads; the checker placed each unknown read or not, at every point after
/// its call, and gave up after 5 000 000 steps ("undecided: the search for partition 0
/// exceeded 5000000 steps"; 60 000 000 did not decide it either). Without its unknown reads the
/// same history is linearizable (decided in 49 ms), and so is the whole one since the checker
/// never places an unknown outcome that changes no state.
#[test]
fn regression_a_history_with_unknown_reads_after_one_by_one_kills_is_decided() {
    let s = run(&Plan {
        seed: 5687277888774061201,
        kill_at: 2732,
        gap: 889,
        mid_checkpoint: false,
        down: 1627,
        bounce: Some((9, true)),
        decode_hold: None,
    })
    .unwrap();
    eprintln!("{s:?}");
}

/// s30 (a finding of the proptest at `PROPTEST_RNG_SEED=5`, not fixed; docs/MEMBERSHIP.md,
/// ninety-eighth part): replicas killed one by one from round 235 (68 apart, the first
/// mid-checkpoint; replica 0 first, so its log ends at view 0 and 1 and 2 run view 1 =
/// [1, 2]), down 1733 rounds, all restarted, replica 0 restarted again 9 rounds into the
/// restart. Replica 0 asks to join again; 1 leads the restart of view 1 with `Join(0)`; 0 is
/// bounced. 2 installs view 2 = [1, 2, 0] with 0's old incarnation suspected and fails it in
/// its epoch (it wedges). 1 then readmits 0's new incarnation in restart mode
/// (`Gms::joiner_readmissible_in_restart`: 2's noticed word had landed, its view 2 block not
/// yet) and installs view 2 counting it live. 0 installs view 2 as an outsider and asks 1 for
/// the state. Every member is wedged in view 2 and the leader, 1, suspects nobody and proposes
/// nothing; 2 still suspects 0 and readmits no incarnation of a member of its view; a wedged
/// member serves no state. Fails with "replica 0 did not come back (joining true, restarting
/// false)".
#[test]
#[ignore = "s30 finding, not fixed: a joiner readmitted in restart mode after a peer installed the restart view failing it hangs view 2 wedged (docs/MEMBERSHIP.md, ninety-eighth part)"]
fn a_joiner_readmitted_after_a_peer_installed_the_restart_view_failing_it_comes_back() {
    run(&Plan {
        seed: 10167759054553565622,
        kill_at: 235,
        gap: 68,
        mid_checkpoint: true,
        down: 1733,
        bounce: Some((9, false)),
        decode_hold: None,
    })
    .unwrap();
}

/// s23 (docs/MEMBERSHIP.md, forty-first part, "s23 follow-up"): a replica that lost its GMS
/// log and epoch files starts again as a fresh member of view 0 (holding the initial state)
/// while the others run a later view without it. Its group switches into a restart of view 0
/// and joins again by transfer (s20, twenty-third part), handing over the group's state at a
/// position past the replica's. The replica must drop its state, answer `Unavailable`, and
/// install the transferred one; before, its core, neither joining nor restarting, ignored that
/// state and applied the deliveries after it on its own, every position before it skipped.
/// Checked at every step: every replica that holds a state and has nothing left to apply is
/// at its group's next position; at the end, the same snapshots and a linearizable history.
#[test]
fn a_replica_whose_group_switches_into_a_restart_and_joins_again_installs_the_transferred_state() {
    check_seeds(
        "a_replica_whose_group_switches_into_a_restart_and_joins_again_installs_the_transferred_state",
        2,
        |seed| {
            let t = std::time::Instant::now();
            let (at, installed) = rejoin_run(seed)?;
            eprintln!(
                "seed {seed}: restarted fresh while the others were at {at}, installed a state \
                 at {installed}, in {:?}",
                t.elapsed()
            );
            Ok(())
        },
    );
}

/// One run of the test above; returns where the others were when the victim restarted, and the
/// position of the state it installed.
fn rejoin_run(seed: u64) -> Result<(u64, u64), String> {
    let mut cl = Cluster::new(
        Backend::Durable {
            snapshot_every: EVERY,
        },
        N,
        4,
        seed,
    );
    cl.timeout = std::time::Duration::from_millis(1);
    cl.max_attempts = 1_000;
    let mut next_value = 0;
    let step = |cl: &mut Cluster, next_value: &mut u64| -> Result<(), String> {
        cl.load_step(KEYS, next_value)?;
        cl.probe_unavailable()?;
        cl.check_positions()
    };
    for _ in 0..600 {
        step(&mut cl, &mut next_value)?;
    }
    let victim = (seed % N as u64) as usize;
    let _ = cl.kill(victim);
    let others: Vec<usize> = (0..N).filter(|&i| i != victim).collect();
    let mut without = false;
    for _ in 0..20_000 {
        without = others.iter().all(|&i| {
            cl.group(i)
                .and_then(|g| g.view())
                .is_some_and(|v| v.id > 0 && !v.members.contains(&NodeId(victim as u32)))
        });
        if without {
            break;
        }
        step(&mut cl, &mut next_value)?;
    }
    if !without {
        return Err(format!(
            "the others never ran a view without replica {victim}"
        ));
    }
    for _ in 0..300 {
        step(&mut cl, &mut next_value)?;
    }
    let others_at = others
        .iter()
        .filter_map(|&i| cl.cores[i].as_ref().map(|c| c.applied()))
        .min()
        .unwrap_or(0);
    cl.restart_fresh(victim);
    let fresh = cl.cores[victim]
        .as_ref()
        .is_some_and(|c| !c.is_joining() && !c.is_restarting());
    if !fresh {
        return Err(format!(
            "replica {victim} did not start as a fresh member holding a state"
        ));
    }
    let mut rejoined = false;
    for _ in 0..AFTER {
        step(&mut cl, &mut next_value)?;
        rejoined |= cl
            .group(victim)
            .is_some_and(|g| g.gms().rejoined().is_some());
    }
    if !rejoined {
        return Err(format!(
            "seed {seed} no longer reaches replica {victim}'s group joining again; re-seed"
        ));
    }
    for _ in 0..60_000 {
        if cl.busy_clients() == 0
            && (cl.cores.iter().flatten()).all(|c| !c.is_restarting() && !c.is_joining())
        {
            break;
        }
        cl.step()?;
        cl.check_positions()?;
    }
    cl.settle(60_000)
        .map_err(|e| format!("{e}; the groups: {:?}", describe(&mut cl)))?;
    let at = same_snapshots(&cl)?;
    let core = cl.cores[victim].as_ref().ok_or("the victim is down")?;
    let m = core.metrics();
    if m.states_dropped.load(Ordering::Relaxed) != 1
        || m.states_installed.load(Ordering::Relaxed) != 1
    {
        return Err(format!("replica {victim}: {m}"));
    }
    let installed_at = cl.delivered[victim].first().map_or(at, |d| d.0);
    check(&Kv, &cl.ops).map_err(|e| format!("not linearizable: {e}"))?;
    Ok((others_at, installed_at))
}
