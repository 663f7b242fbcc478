//! A checkpoint whose log compaction fails (issue 6, s19's claim tested in s20;
//! `docs/MEMBERSHIP.md`, twenty-third part), on the simulator.
//!
//! Since s19 each checkpoint also compacts the current view's epoch log to the checkpoint's
//! position, after its `Snapshot` record is durable. If that compaction fails the group stops
//! the member (its log may not be sound: an error after the rename is the log's write error)
//! with a message saying so, and the claim is that nothing is lost on the restart: the record
//! names the new snapshot, and the log still holds every record past it.
//!
//! The fault is injected without a production seam: a *directory* is created at the
//! compaction's temporary path (`<log>.compact`) of member 0's log, so the compaction's
//! `open(create, truncate)` fails (`EISDIR`). Checked: member 0's checkpoint is reported
//! written, then it stops with "compacting the epoch log of view 0 to the checkpoint at P";
//! its log was not replaced (the same length as before); the others go on without it. Then
//! every member stops and all restart from their GMS logs and directories (the directory
//! still in place: the restart does not compact); the restart completes, member 0 restores
//! exactly its snapshot at `P`, every member gets back to every position delivered before (the
//! chain is checked position by position across both lives), and new messages are delivered
//! identically.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::{MemLog, Record};
use squall_membership::snapshot::Checkpointed;
use squall_ordering::Delivery;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds};

mod group_sim;
use group_sim::chain::{self, App, Chain, Checked, Hooks, Nodes, Outcome, Started};

/// View 0 is `0..3`.
const U: usize = 3;

/// The member whose compaction fails.
const VICTIM: usize = 0;

/// It checkpoints once, at this many deliveries.
const AT: u64 = 150;

fn config(base: &Path, i: usize) -> GroupConfig {
    group_sim::durable(chain::checkpoint_config(U, U), base, i)
}

struct Checks<'a> {
    chain: &'a mut Chain,
    /// The victim's checkpoint outcome, once it ended.
    outcome: &'a mut Option<Result<u64, String>>,
    /// Whether the victim may checkpoint now (once).
    due: bool,
    max_delivered: &'a mut Option<u64>,
}

impl Hooks<MemLog> for Checks<'_> {
    fn checkpoint_ended(&mut self, i: usize, out: Outcome, _in_flight: Option<u64>) -> Checked {
        if i == VICTIM
            && let Some(out) = out
        {
            *self.outcome = Some(match out {
                Ok(Checkpointed::Written { position, .. }) => Ok(position),
                other => Err(format!("{other:?}")),
            });
        }
        Ok(())
    }

    fn restored(&mut self, i: usize, position: u64, hash: u64) -> Result<(), String> {
        chain::check_restored(self.chain, i, position, hash)
    }

    fn delivered(&mut self, i: usize, d: &Delivery, hash: u64) -> Result<(), String> {
        *self.max_delivered = (*self.max_delivered).max(Some(d.position));
        chain::check_delivered(self.chain, i, d, hash)
    }

    fn checkpoint_due(&self, i: usize, app: &App, g: &Group<SimNode, MemLog>) -> bool {
        self.due && i == VICTIM && app.next >= AT && g.checkpoint_in_flight().is_none()
    }

    fn checkpoint_started(&mut self, i: usize, at: u64, r: Started) -> Checked {
        match r {
            Ok(_) => {
                self.due = false;
                Ok(())
            }
            Err(e) => Err(format!("n{i}: checkpoint at {at} refused: {e}")),
        }
    }
}

/// A life over all `U` nodes: fresh (`logs` `None`) or restarting from the GMS log bytes.
fn start(seed: u64, base: &Path, logs: Option<&[Vec<u8>]>, life: u8) -> Nodes<MemLog> {
    let layout = Group::<SimNode, MemLog>::layout(&config(base, 0)).unwrap();
    let (sim, nodes) =
        Sim::cluster(SimConfig::seeded(seed ^ u64::from(life) << 40), U, &layout).unwrap();
    let mut groups = Vec::new();
    for (i, t) in nodes.into_iter().enumerate() {
        let cfg = config(base, i);
        let g = match logs {
            None => Group::new(t, cfg, MemLog::default(), None).unwrap(),
            Some(logs) => {
                let (log, rec) = MemLog::open(logs[i].clone());
                Group::new(t, cfg, log, Some(&rec)).unwrap()
            }
        };
        groups.push(Some(g));
    }
    // Fresh: the initial state. Restarting: the replay starts from the initial state or a
    // snapshot handed out with the first view (which replaces it).
    let apps = (0..U)
        .map(|_| App {
            has_state: true,
            ..App::default()
        })
        .collect();
    Nodes::new(sim, groups, apps, vec![life])
}

/// What the checks keep across steps and lives.
#[derive(Default)]
struct State {
    chain: Chain,
    outcome: Option<Result<u64, String>>,
    max_delivered: Option<u64>,
}

/// One step; returns whether the victim's checkpoint is still due.
fn step(n: &mut Nodes<MemLog>, st: &mut State, submit: bool, due: bool) -> Result<bool, String> {
    let mut c = Checks {
        chain: &mut st.chain,
        outcome: &mut st.outcome,
        due,
        max_delivered: &mut st.max_delivered,
    };
    n.step(submit, &mut c)?;
    Ok(c.due)
}

fn compaction_failure(seed: u64) -> Result<(), String> {
    let base = group_sim::scratch_dir("compaction-failure", "victim0", seed);
    let mut st = State::default();
    // The injected fault: a directory where the compaction writes its new file.
    let cfg = config(&base, VICTIM);
    let log = cfg.epoch_log_of(0, 0).unwrap();
    let tmp = squall_round_robin::log::compact_tmp_path(&log);
    // After the start: opening a log removes a leftover temporary file, and fails on this.
    let mut n = start(seed, &base, None, 0);
    std::fs::create_dir_all(&tmp).unwrap();
    let mut due = true;
    let mut stopped = None;
    let mut log_len = None;
    for _ in 0..20_000 {
        due = step(&mut n, &mut st, true, due)?;
        if log_len.is_none() && !due {
            log_len = Some(std::fs::metadata(&log).map_err(|e| e.to_string())?.len());
        }
        if let Some(why) = n.groups[VICTIM].as_ref().unwrap().stopped() {
            stopped = Some(why.to_string());
            break;
        }
    }
    let Some(why) = stopped else {
        return Err("the member whose compaction fails never stopped".into());
    };
    let position = match &st.outcome {
        Some(Ok(p)) => *p,
        other => {
            return Err(format!(
                "the checkpoint was not reported written: {other:?}"
            ));
        }
    };
    let want = format!("compacting the epoch log of view 0 to the checkpoint at {position}");
    if !why.contains(&want) {
        return Err(format!("stopped with {why:?}, not saying {want:?}"));
    }
    // The log was not replaced: at least the length it had when the checkpoint started.
    let len = std::fs::metadata(&log).map_err(|e| e.to_string())?.len();
    if log_len.is_none_or(|l| len < l) {
        return Err(format!("the log shrank ({log_len:?} to {len} bytes)"));
    }
    // Everyone stops at that moment (still in view 0: the others have not removed it yet),
    // and all restart from their logs, the directory still in place.
    let logs: Vec<Vec<u8>> = (n.groups.iter())
        .map(|g| g.as_ref().unwrap().gms().log().bytes().to_vec())
        .collect();
    for (i, g) in n.groups.iter().enumerate() {
        let v = g.as_ref().and_then(|g| g.view()).map(|v| v.id);
        if v != Some(0) {
            return Err(format!("n{i} is in view {v:?} at the stop, not 0"));
        }
    }
    match MemLog::open(logs[VICTIM].clone()).1.last_snapshot() {
        Some(Record::Snapshot { position: p, .. }) if *p == position => {}
        other => {
            return Err(format!(
                "the victim's log names {other:?}, not the checkpoint"
            ));
        }
    }
    let before = st.max_delivered.unwrap_or(0);
    if before + 1 < position {
        return Err(format!(
            "delivered up to {before}, below the checkpoint at {position}"
        ));
    }
    drop(n);
    let mut n = start(seed, &base, Some(&logs), 1);
    let caught_up = |n: &Nodes<MemLog>| {
        (0..U).all(|i| {
            n.groups[i].as_ref().is_some_and(|g| {
                g.gms().restarting().is_none()
                    && g.replay_backlog() == 0
                    && g.stopped().is_none()
                    && g.is_active()
                    && n.apps[i].next > before
            })
        })
    };
    let mut steps = 0;
    while !caught_up(&n) {
        steps += 1;
        if steps > 40_000 {
            let state: Vec<_> = (0..U)
                .map(|i| {
                    let g = n.groups[i].as_ref().unwrap();
                    let stop = g.stopped().map(str::to_string);
                    (i, g.view().map(|v| v.id), stop, n.apps[i].next)
                })
                .collect();
            return Err(format!(
                "the restart did not get every member past position {before}: {state:?}"
            ));
        }
        step(&mut n, &mut st, steps > 2000, false)?;
    }
    // The victim restored exactly its snapshot: the record survived and the replay went on
    // from the log past it.
    if n.restored[VICTIM] != [position] {
        return Err(format!(
            "n{VICTIM} restored {:?}, not its snapshot at {position}",
            n.restored[VICTIM]
        ));
    }
    for _ in 0..400 {
        step(&mut n, &mut st, true, false)?;
    }
    for _ in 0..2000 {
        step(&mut n, &mut st, false, false)?;
    }
    let next: Vec<u64> = n.apps.iter().map(|a| a.next).collect();
    if next.iter().any(|&p| p != next[0]) || next[0] <= before + 1 {
        return Err(format!(
            "the members ended at {next:?} (before the stop: {before})"
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

#[test]
fn a_checkpoint_whose_log_compaction_fails_stops_the_member_and_loses_nothing_on_restart() {
    check_seeds("compaction_failure", 2, compaction_failure);
}
