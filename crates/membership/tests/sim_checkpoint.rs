//! Periodic checkpoints bound a total restart's replay (`Group::checkpoint`), on the simulator.
//!
//! A group with durable epochs (one directory per member, never synced: a simulated stop is a
//! process crash) runs the hash-chain model application; every member hands the group its
//! state (`[hash][position]`) every `every` deliveries. Node 3 joins by transfer (view 1), so
//! checkpoints are taken in view 0, in a joiner's first view (whose epoch log counts from 0)
//! and in later views. Then every member stops at once — in some runs with one member cut
//! short inside a checkpoint at a [`CrashPoint`] — and all restart from their GMS log bytes and
//! directories.
//!
//! Checked after every step, across lives: each position holds the same payload and chain value
//! everywhere; deliveries are gapless from the member's state; a restored state is the chain at
//! its position. At the end of the restart: every member of the last view runs the restart view
//! at or past every position delivered before (nothing lost); a member restores exactly the
//! snapshot its log names last, and hands out only the deliveries after it (its replay is
//! bounded); no temporary or superseded snapshot file and no epoch log of a view before its
//! snapshot's is left; afterwards new messages are delivered identically.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::{MemLog, Record};
use squall_membership::snapshot::{CheckpointError, CheckpointWriter, Checkpointed, CrashPoint};
use squall_ordering::{Delivery, TotalOrder, View};
use squall_round_robin::Mode;
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds};

mod group_sim;
use group_sim::chain::{self, App, Chain, Checked, Hooks, Nodes, Outcome, Started};

/// Universe size: view 0 is `0..3`, node 3 joins.
const U: usize = 4;

fn config(base: &Path, i: usize) -> GroupConfig {
    group_sim::durable(chain::checkpoint_config(U, 3), base, i)
}

#[derive(Clone, Debug)]
enum Start {
    Down,
    Fresh,
    Log(Vec<u8>),
}

struct Life {
    base: PathBuf,
    /// The nodes, their applications and the states they restored in this life.
    n: Nodes<MemLog>,
    /// Per node: deliveries handed out in this life before its first `View`.
    before_view: Vec<Option<u64>>,
    max_delivered: Option<u64>,
    /// Checkpoint every this many deliveries (0: never).
    every: u64,
    /// Checkpoint only in views up to this one.
    max_view: u64,
    /// Checkpoints written, per node.
    written: Vec<u64>,
}

impl Life {
    fn start(seed: u64, base: &Path, starts: &[Start], life: u32, every: u64) -> Life {
        let layout = Group::<SimNode, MemLog>::layout(&config(base, 0)).unwrap();
        let (sim, nodes) =
            Sim::cluster(SimConfig::seeded(seed ^ u64::from(life) << 40), U, &layout).unwrap();
        let mut groups = Vec::new();
        let mut apps = Vec::new();
        for (i, t) in nodes.into_iter().enumerate() {
            let cfg = config(base, i);
            let (g, has_state) = match &starts[i] {
                Start::Down => {
                    sim.crash(NodeId(i as u32));
                    (None, false)
                }
                Start::Fresh => {
                    let g = Group::new(t, cfg, MemLog::default(), None).unwrap();
                    let active = g.is_active();
                    (Some(g), active)
                }
                Start::Log(bytes) => {
                    let (log, rec) = MemLog::open(bytes.clone());
                    let rec = (!rec.records.is_empty()).then_some(rec);
                    (Some(Group::new(t, cfg, log, rec.as_ref()).unwrap()), true)
                }
            };
            groups.push(g);
            apps.push(App {
                has_state,
                ..App::default()
            });
        }
        Life {
            base: base.to_path_buf(),
            n: Nodes::new(sim, groups, apps, vec![life as u8]),
            before_view: vec![None; U],
            max_delivered: None,
            every,
            max_view: u64::MAX,
            written: vec![0; U],
        }
    }

    fn step(&mut self, chain: &mut Chain, submit: bool) -> Result<(), String> {
        let mut checks = Checks {
            chain,
            written: &mut self.written,
            before_view: &mut self.before_view,
            max_delivered: &mut self.max_delivered,
            every: self.every,
            max_view: self.max_view,
        };
        self.n.step(submit, &mut checks)
    }

    fn run(&mut self, chain: &mut Chain, steps: usize, submit: bool) -> Result<(), String> {
        for _ in 0..steps {
            self.step(chain, submit)?;
        }
        Ok(())
    }

    fn active(&self, i: usize) -> bool {
        self.n.groups[i].as_ref().is_some_and(Group::is_active)
    }

    fn logs(&self) -> Vec<Start> {
        self.n
            .groups
            .iter()
            .map(|g| match g {
                Some(g) => Start::Log(g.gms().log().bytes().to_vec()),
                None => Start::Down,
            })
            .collect()
    }

    fn dir_of(&self, i: usize) -> PathBuf {
        match &config(&self.base, i).epoch.mode {
            Mode::Durable { path, .. } => path.clone(),
            _ => unreachable!("durable"),
        }
    }
}

/// This suite's checks inside a step: a checkpoint ends written (the inline writer: by the
/// poll after it started); the chain everywhere; checkpoints every `every` deliveries in views
/// up to `max_view`, started at the application's position.
struct Checks<'a> {
    chain: &'a mut Chain,
    written: &'a mut [u64],
    before_view: &'a mut [Option<u64>],
    max_delivered: &'a mut Option<u64>,
    every: u64,
    max_view: u64,
}

impl Hooks<MemLog> for Checks<'_> {
    fn checkpoint_ended(&mut self, i: usize, out: Outcome, in_flight: Option<u64>) -> Checked {
        // The poll finished the checkpoint started in the previous step (inline writer).
        match out {
            Some(Ok(Checkpointed::Written { .. })) => self.written[i] += 1,
            Some(other) => return Err(format!("n{i}: checkpoint ended {other:?}")),
            None => {}
        }
        match in_flight {
            Some(p) => Err(format!(
                "n{i}: the checkpoint at {p} outlived a poll (inline)"
            )),
            None => Ok(()),
        }
    }

    fn view(&mut self, i: usize, _v: &View) {
        self.before_view[i].get_or_insert(0);
    }

    fn restored(&mut self, i: usize, position: u64, hash: u64) -> Result<(), String> {
        chain::check_restored(self.chain, i, position, hash)
    }

    fn delivered(&mut self, i: usize, d: &Delivery, hash: u64) -> Result<(), String> {
        chain::check_delivered(self.chain, i, d, hash)?;
        *self.max_delivered = (*self.max_delivered).max(Some(d.position));
        Ok(())
    }

    fn checkpoint_due(&self, _i: usize, app: &App, g: &Group<SimNode, MemLog>) -> bool {
        self.every > 0
            && app.next >= app.checkpointed + self.every
            && g.view().is_some_and(|v| v.id <= self.max_view)
    }

    fn checkpoint_started(&mut self, i: usize, at: u64, r: Started) -> Checked {
        // The application checkpoints after applying everything the poll handed out: its
        // position is within the group's current view (never `Position`).
        match r {
            Ok(Checkpointed::Started { position }) if position == at => Ok(()),
            Ok(other) => Err(format!("n{i}: checkpoint at {at}: {other:?}")),
            Err(CheckpointError::NotNow(_)) => Ok(()),
            Err(e) => Err(format!("n{i}: checkpoint at {at}: {e}")),
        }
    }
}

/// The last snapshot a GMS log names: its view and position.
fn snapshot_of(bytes: &[u8]) -> Option<(u64, u64)> {
    match MemLog::open(bytes.to_vec()).1.last_snapshot() {
        Some(Record::Snapshot { view, position, .. }) => Some((*view, *position)),
        _ => None,
    }
}

fn last_view(bytes: &[u8]) -> Option<u64> {
    MemLog::open(bytes.to_vec()).1.last_view().map(|v| v.0)
}

/// The files of `dir`: snapshot files, temporary files, and the views of its epoch logs.
fn files(dir: &Path) -> (Vec<String>, Vec<String>, Vec<u64>) {
    let (mut snaps, mut tmps, mut views) = (Vec::new(), Vec::new(), Vec::new());
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".tmp") {
            tmps.push(name);
        } else if name.starts_with("snapshot-") {
            snaps.push(name);
        } else if let Some(v) = name.strip_prefix("epoch-").and_then(|r| r.get(..20)) {
            views.push(v.parse().unwrap());
        }
    }
    (snaps, tmps, views)
}

/// One run: life 0 with checkpoints every `every` deliveries while node 3 joins and the group
/// runs on; then, if `crash` is set, node `victim` is cut short inside a checkpoint there;
/// every member stops at once (after `remove` crashed and was removed, if set: the last view
/// then comes after the latest checkpoints); all restart (life 1), and the restart is checked.
fn scenario(
    seed: u64,
    tag: &str,
    every: u64,
    crash: Option<(usize, CrashPoint)>,
    remove: Option<usize>,
) -> Result<(), String> {
    let base = group_sim::scratch_dir("checkpoint", tag, seed);
    let mut chain = Chain::new();
    let first = [Start::Fresh, Start::Fresh, Start::Fresh, Start::Down];
    let mut l = Life::start(seed, &base, &first, 0, every);
    // Node 3 joins once every initial member has checkpointed in view 0.
    for _ in 0..20_000 {
        if l.written[..3].iter().all(|&w| w > 0) {
            break;
        }
        l.step(&mut chain, true)?;
    }
    let t =
        l.n.sim
            .restart_node(NodeId(3))
            .ok_or("node 3 cannot start")?;
    l.n.groups[3] = Some(Group::joining(t, config(&base, 3), MemLog::default()).unwrap());
    if crash.is_some() {
        // Checkpoints in view 0 only: the cut one is the victim's first after the join, with
        // something to remove (an initial member: the view-0 snapshot and epoch log).
        l.max_view = 0;
    }
    let mut joined = false;
    for _ in 0..20_000 {
        l.step(&mut chain, true)?;
        if l.active(3) && (crash.is_some() || l.written[3] >= 2) {
            joined = true;
            break;
        }
    }
    if !joined {
        return Err("node 3 never joined and checkpointed twice".into());
    }
    l.run(&mut chain, 200 + (seed as usize % 5) * 37, true)?;
    if let Some(r) = remove {
        // A view change after the latest checkpoints, with few deliveries after it.
        l.n.sim.crash(NodeId(r as u32));
        l.n.groups[r] = None;
        let before = l.n.groups[(r + 1) % U]
            .as_ref()
            .and_then(|g| g.view().map(|v| v.id));
        for _ in 0..20_000 {
            l.step(&mut chain, false)?;
            let now = l.n.groups[(r + 1) % U]
                .as_ref()
                .and_then(|g| g.view().map(|v| v.id));
            if now > before {
                break;
            }
        }
        l.run(&mut chain, 30, true)?;
    }
    // Before the stop: every member that wrote a checkpoint in a later view holds no epoch log
    // of a view before its snapshot's.
    for i in 0..U {
        if let Some(Start::Log(b)) = l.logs().get(i)
            && let Some((v, _)) = snapshot_of(b)
        {
            let (mut snaps, _, views) = files(&l.dir_of(i));
            // A checkpoint started in the last step is written but recorded by the next poll
            // (found by `SQUALL_SEEDS=16`, seed 7: two snapshot files, one in flight).
            if let Some(p) = (l.n.groups[i].as_ref()).and_then(|g| g.checkpoint_in_flight()) {
                let had = snaps.len();
                snaps.retain(|s| !s.ends_with(&format!("-at{p:020}.state")));
                if snaps.len() < had {
                    IN_FLIGHT_AT_STOP.with(|c| c.set(c.get() + 1));
                }
            }
            if views.iter().any(|&x| x < v) || snaps.len() != 1 {
                return Err(format!(
                    "n{i}: snapshot in view {v}, yet files {snaps:?} and epoch logs of views {views:?}"
                ));
            }
        }
    }
    // The current view's log is compacted too (s19): some member's checkpoint in a view past
    // that view's first position dropped the covered prefix, and its log says so (a compacted
    // log's magic); the restart below replays from it.
    let compacted: u64 = (l.n.groups.iter().flatten())
        .map(|g| g.stats().log_bytes_compacted)
        .sum();
    let magic2 = (0..U)
        .flat_map(|i| std::fs::read_dir(l.dir_of(i)).into_iter().flatten())
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.starts_with("epoch-") && name.ends_with(".log")
        })
        .filter(|e| std::fs::read(e.path()).is_ok_and(|b| b.starts_with(b"SQRRLOG2")))
        .count();
    if compacted == 0 || magic2 == 0 {
        return Err(format!(
            "no checkpoint compacted a current view's log ({compacted} bytes dropped, {magic2} compacted logs)"
        ));
    }
    let mut cut_at = None;
    if let Some((victim, cut)) = crash {
        // Cut short inside a checkpoint past its last one (some deliveries after it).
        for _ in 0..20_000 {
            if l.n.apps[victim].next > l.n.apps[victim].checkpointed {
                break;
            }
            l.step(&mut chain, true)?;
        }
        let app = l.n.apps[victim].clone();
        let g = l.n.groups[victim].as_mut().ok_or("victim down")?;
        g.checkpoint_cut_at(app.next, app.encode(), cut)
            .map_err(|e| format!("n{victim}: cut checkpoint: {e}"))?;
        // The poll that records it (the cuts after the record are there).
        g.poll(&mut Vec::new());
        cut_at = Some(app.next);
        // The crash point was hit: what it leaves is there.
        let (snaps, tmps, views) = files(&l.dir_of(victim));
        let old_log = views.contains(&0);
        let left = match cut {
            CrashPoint::BeforeSync => tmps.len() == 1 && snaps.len() == 1,
            CrashPoint::AfterRename | CrashPoint::AfterRecord => {
                tmps.is_empty() && snaps.len() == 2 && (victim == 3 || old_log)
            }
            CrashPoint::MidRemoval => snaps.len() == 1 && (victim == 3 || old_log),
        };
        if !left {
            return Err(format!(
                "n{victim} cut at {cut:?} left {snaps:?} {tmps:?} and epoch logs of views {views:?}"
            ));
        }
    }
    let max_before = l.max_delivered;
    let logs = l.logs();
    drop(l);
    // The restart: every node whose log holds a view.
    let newest = logs
        .iter()
        .filter_map(|s| match s {
            Start::Log(b) => last_view(b),
            _ => None,
        })
        .max()
        .ok_or("no log holds a view")?;
    let members: Vec<usize> = (0..U)
        .filter(|&i| matches!(&logs[i], Start::Log(b) if last_view(b) == Some(newest)))
        .collect();
    let mut l = Life::start(seed, &base, &logs, 1, every);
    let running = |l: &Life, i: usize| {
        l.n.groups[i].as_ref().is_some_and(|g| {
            g.is_active()
                && g.gms().restarting().is_none()
                && g.view().is_some_and(|v| v.id > newest)
                && g.replay_backlog() == 0
        })
    };
    let mut done = false;
    for _ in 0..12_000 {
        l.step(&mut chain, false)?;
        if members.iter().all(|&i| running(&l, i)) {
            done = true;
            break;
        }
    }
    if !done {
        return Err(format!("restart of view {newest} never completed"));
    }
    for &i in &members {
        let g = l.n.groups[i].as_ref().ok_or("member down")?;
        let next = l.n.apps[i].next;
        if max_before.is_some_and(|m| next <= m) {
            return Err(format!(
                "n{i} runs the restart view at {next}, but {max_before:?} was delivered before (lost)"
            ));
        }
        let Start::Log(b) = &logs[i] else { continue };
        let Some((view, at)) = snapshot_of(b) else {
            continue;
        };
        // Exactly the snapshot its log names, then only the deliveries after it.
        if l.n.restored[i].first() != Some(&at) {
            return Err(format!(
                "n{i}: its log names a snapshot at {at}, but it restored {:?}",
                l.n.restored[i]
            ));
        }
        let (replayed, read) = (g.stats().replayed, g.stats().replay_read);
        let end = l.n.apps[i].next;
        // Only what follows the snapshot is handed out, and little before it is even read
        // (from the last mark below it: a record or two of 64 bytes or less each).
        if replayed > end - at || read - replayed > 4 {
            return Err(format!(
                "n{i}: replayed {replayed} deliveries (read {read} records) from a snapshot at {at} to {end}"
            ));
        }
        let (mut snaps, tmps, views) = files(&l.dir_of(i));
        // A checkpoint started in the last step is written but recorded by the next poll.
        if let Some(p) = g.checkpoint_in_flight() {
            snaps.retain(|s| !s.ends_with(&format!("-at{p:020}.state")));
        }
        if snaps.len() != 1 || !tmps.is_empty() || views.iter().any(|&x| x < view) {
            return Err(format!(
                "n{i} restarted from a snapshot in view {view} but keeps {snaps:?} {tmps:?} and epoch logs of views {views:?}"
            ));
        }
    }
    if let Some((victim, cut)) = crash
        && let Start::Log(b) = &logs[victim]
    {
        // A crash before the record restarts from the previous snapshot; after it, from the
        // new one (the members' check above: it restored what its log names).
        let at = snapshot_of(b).map(|s| s.1);
        let expect_new = matches!(cut, CrashPoint::AfterRecord | CrashPoint::MidRemoval);
        if (at == cut_at) != expect_new || l.n.restored[victim].first() != at.as_ref() {
            return Err(format!(
                "n{victim} cut at {cut:?} at {cut_at:?}: its log names {at:?}, it restored {:?}",
                l.n.restored[victim]
            ));
        }
    }
    // New messages after the restart, delivered identically; checkpoints go on.
    l.run(&mut chain, 400, true)?;
    l.run(&mut chain, 2000, false)?;
    let live: Vec<usize> = (0..U).filter(|&i| l.active(i)).collect();
    let end = l.n.apps[live[0]].next;
    if live.iter().any(|&i| l.n.apps[i].next != end) || max_before.is_some_and(|m| end <= m + 10) {
        return Err(format!(
            "after the restart: {:?}",
            live.iter().map(|&i| l.n.apps[i].next).collect::<Vec<_>>()
        ));
    }
    std::fs::remove_dir_all(&base).ok();
    Ok(())
}

#[test]
fn checkpoints_bound_the_replay_of_a_total_restart_and_nothing_is_lost() {
    check_seeds(
        "checkpoints_bound_the_replay_of_a_total_restart_and_nothing_is_lost",
        4,
        |seed| scenario(seed, "plain", 20 + seed % 3 * 7, None, None),
    );
}

/// Seed 7 of the sweep above when found (`SQUALL_SEEDS=16` after the writer thread): the first
/// life stopped with a checkpoint written but not yet recorded, and the check before the stop
/// counted its file as a second snapshot. The harness now leaves the one in flight out, as the
/// check after the restart already did. Re-seeded in s21: seed 7 no longer stops with a
/// checkpoint in flight; of seeds 0..30, 14 and 17 do (14 is pinned). Re-seeded in s23 (the
/// forty-fourth and forty-fifth parts' table words shifted the schedules): of seeds 0..60, 6,
/// 25, 29, 30, 54 and 58 stop with one in flight (6 is pinned). Re-seeded in s24 (on the s24
/// branch, whose settings digest push at start changes the schedule; not run on the base
/// commit): of seeds 0..40, 5, 7 and 15 stop with one in flight (5 is pinned). Re-seeded in
/// s25 (the s25 merges shifted the schedules; seed 5 no longer stops with one in flight): of
/// seeds 0..60, 10, 14, 17, 18, 21, 24, 25, 29, 30 and 42 do (10 is pinned). Re-seeded in s27
/// (the s27 merges, among them a whole-row push posted as several writes, shifted the
/// schedules; seed 10 no longer stops with one in flight): of seeds 0..60, 12, 13, 18, 21, 38
/// and 45 do (12 is pinned). Fails unless the stop came with a checkpoint in flight.
#[test]
fn regression_a_checkpoint_in_flight_at_the_stop_is_not_a_second_snapshot() {
    let seed = 12;
    IN_FLIGHT_AT_STOP.with(|c| c.set(0));
    scenario(seed, "plain-regression", 20 + seed % 3 * 7, None, None).unwrap();
    assert!(
        IN_FLIGHT_AT_STOP.with(std::cell::Cell::get) > 0,
        "{}",
        group_sim::missed(
            seed,
            "the stop with a checkpoint written but not yet recorded"
        )
    );
}

thread_local! {
    /// Checkpoints written but not yet recorded when [`scenario`] checked the files before the
    /// stop (their snapshot file left out of the count).
    static IN_FLIGHT_AT_STOP: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A view change after the latest checkpoints: the snapshot's view is not the last one, so the
/// replay reads its log from the snapshot on, then the last view's.
#[test]
fn a_restart_whose_last_view_came_after_the_checkpoints_replays_from_them() {
    check_seeds(
        "a_restart_whose_last_view_came_after_the_checkpoints_replays_from_them",
        3,
        |seed| scenario(seed, "later-view", 40, None, Some(2)),
    );
}

fn crash_sweep(name: &str, cut: CrashPoint) {
    check_seeds(name, 4, |seed| {
        // The victim alternates between an initial member (whose cut checkpoint supersedes a
        // view-0 snapshot and epoch log: two removals) and the joiner (a checkpoint in its
        // first view, whose log counts positions from 0; one removal, its transferred state).
        let victim = if seed % 2 == 0 || cut == CrashPoint::MidRemoval {
            seed as usize % 3
        } else {
            3
        };
        scenario(seed, name, 25, Some((victim, cut)), None)
    });
}

#[test]
fn a_crash_before_the_checkpoint_is_synced_restarts_from_the_previous_one() {
    crash_sweep(
        "a_crash_before_the_checkpoint_is_synced_restarts_from_the_previous_one",
        CrashPoint::BeforeSync,
    );
}

#[test]
fn a_crash_after_the_rename_before_the_record_restarts_from_the_previous_one() {
    crash_sweep(
        "a_crash_after_the_rename_before_the_record_restarts_from_the_previous_one",
        CrashPoint::AfterRename,
    );
}

#[test]
fn a_crash_after_the_record_before_any_removal_restarts_from_the_new_one() {
    crash_sweep(
        "a_crash_after_the_record_before_any_removal_restarts_from_the_new_one",
        CrashPoint::AfterRecord,
    );
}

#[test]
fn a_crash_midway_through_the_removals_restarts_from_the_new_one() {
    crash_sweep(
        "a_crash_midway_through_the_removals_restarts_from_the_new_one",
        CrashPoint::MidRemoval,
    );
}

/// The API's refusals: a passive joiner, a position outside the current view, a state above
/// the bound, one already covered, and atomic epochs.
#[test]
fn checkpoint_refuses_what_it_cannot_keep() {
    let base = group_sim::scratch_dir("checkpoint", "refusals", 0);
    let mut chain = Chain::new();
    let first = [Start::Fresh, Start::Fresh, Start::Fresh, Start::Down];
    let mut l = Life::start(0, &base, &first, 0, 0);
    l.run(&mut chain, 200, true).unwrap();
    assert!(l.n.apps[0].next > 0);
    let t = l.n.sim.restart_node(NodeId(3)).unwrap();
    l.n.groups[3] = Some(Group::joining(t, config(&base, 3), MemLog::default()).unwrap());
    assert!(matches!(
        l.n.groups[3].as_mut().unwrap().checkpoint(0, b"x"),
        Err(CheckpointError::NotNow(_))
    ));
    for _ in 0..20_000 {
        l.step(&mut chain, true).unwrap();
        if l.active(3) && l.n.apps[0].next > 20 {
            break;
        }
    }
    l.run(&mut chain, 50, true).unwrap();
    let app = l.n.apps[0].clone();
    let g = l.n.groups[0].as_mut().unwrap();
    assert!(matches!(
        g.checkpoint(app.next + 1, app.encode()),
        Err(CheckpointError::Position { .. })
    ));
    assert!(matches!(
        g.checkpoint(0, app.encode()),
        Err(CheckpointError::Position { .. })
    ));
    assert!(matches!(
        g.checkpoint(app.next, app.encode()),
        Ok(Checkpointed::Started { .. })
    ));
    // One at a time: a second one before a poll recorded the first is refused.
    assert!(matches!(
        g.checkpoint(app.next, app.encode()),
        Err(CheckpointError::InFlight { position }) if position == app.next
    ));
    assert!(g.take_checkpoint_outcome().is_none());
    g.poll(&mut Vec::new());
    assert!(matches!(
        g.take_checkpoint_outcome(),
        Some(Ok(Checkpointed::Written { position, .. })) if position == app.next
    ));
    assert!(g.take_checkpoint_outcome().is_none());
    assert!(matches!(
        g.checkpoint(app.next, app.encode()),
        Ok(Checkpointed::Covered { .. })
    ));
    drop(l);
    std::fs::remove_dir_all(&base).ok();
    // A state above `max_state_bytes` (a restart could not read it back): one member alone.
    let base = group_sim::scratch_dir("checkpoint", "too-large", 0);
    let mut cfg = group_sim::durable(group_sim::config(1, 1), &base, 0);
    cfg.transfer.max_state_bytes = 16;
    cfg.checkpoint_writer = CheckpointWriter::Inline;
    let layout = Group::<SimNode, MemLog>::layout(&cfg).unwrap();
    let (_sim, nodes) = Sim::cluster(SimConfig::seeded(1), 1, &layout).unwrap();
    let t = nodes.into_iter().next().unwrap();
    let mut g = Group::new(t, cfg, MemLog::default(), None).unwrap();
    assert!(matches!(
        g.checkpoint(0, [0; 17]),
        Err(CheckpointError::TooLarge { len: 17, max: 16 })
    ));
    assert!(matches!(
        g.checkpoint(0, [0; 16]),
        Ok(Checkpointed::Started { position: 0 })
    ));
    g.poll(&mut Vec::new());
    assert!(matches!(
        g.take_checkpoint_outcome(),
        Some(Ok(Checkpointed::Written { position: 0, .. }))
    ));
    std::fs::remove_dir_all(&base).ok();
    // Atomic epochs: nothing to bound.
    let cfg = group_sim::config(3, 3);
    let layout = Group::<SimNode, MemLog>::layout(&cfg).unwrap();
    let (_sim, nodes) = Sim::cluster(SimConfig::seeded(1), 3, &layout).unwrap();
    let t = nodes.into_iter().next().unwrap();
    let mut g = Group::new(t, cfg, MemLog::default(), None).unwrap();
    assert_eq!(g.checkpoint(0, b"x").unwrap(), Checkpointed::NotDurable);
}
