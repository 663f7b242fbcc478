//! A crash during the group's very first start (issue 6, `docs/MEMBERSHIP.md`, twenty-first
//! part), on the simulator. The initial members (`GmsConfig::initial`) start with empty logs
//! and log `Installed { view: 0 }` as they start. Here the first life stops after only some
//! of them started (so only those logged view 0; the others' logs stay empty), then every
//! member starts again: the former restart view 0 from their logs (restart mode), the latter
//! start view 0 as if for the first time. Before the fix they waited for each other for good.
//! Checked: every member ends in one running view that names them all, active; nothing was
//! delivered in the first life (an initial member that never started never sent, so no
//! round-robin position could be delivered); and afterwards they deliver new messages
//! identically. Swept over every non-empty proper subset of 3 members and a few subsets of 5,
//! with a few seeds (`SQUALL_SEEDS`). Later parts add members whose peers are past view 0,
//! the fresh member's hold and (s21) a suspicion during it; every run also checks virtual
//! synchrony (each view installed after the same deliveries by every member that installed it).
#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

mod group_sim;
use group_sim::tap::{Tap, Tapped};

use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::MemLog;
use squall_membership::view::{EvenShards, View};
use squall_ordering::{TotalOrder, Upcall};
use squall_transport::{NodeId, RegionId, RemoteAddr, Time, Transport};
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds};

/// One step of the simulation.
const STEP: Duration = Duration::from_micros(2);

type Seq = Vec<(u64, Vec<u8>)>;

/// What a first life leaves: its scratch directory, every member's GMS log, what each delivered.
type CrashState = (PathBuf, Vec<Vec<u8>>, Vec<Seq>);

/// What [`Watched`] endpoints record: the one-sided ops that node `node` posts into the regions
/// `regions` of its peers while `armed`.
#[derive(Default)]
struct Watch {
    node: Option<NodeId>,
    regions: Vec<RegionId>,
    armed: bool,
    /// (target, region, virtual time) of each op recorded.
    hits: Vec<(NodeId, RegionId, Time)>,
    /// Per node, how many ops it posted into the watched regions of its peers while armed,
    /// whatever view it was in (see [`hold_released_after_the_wedge`]).
    posts: BTreeMap<NodeId, usize>,
}

/// A simulated endpoint that records, in the shared [`Watch`], the one-sided ops its node posts
/// into the watched regions of its peers (a member's view-0 epoch's region set, here): whether
/// that epoch wrote anything into a peer, whatever the writer's code path.
type Watched = Tapped<Watcher>;

/// [`Watched`]'s tap.
struct Watcher(Rc<RefCell<Watch>>);

impl Tap for Watcher {
    fn posted(&mut self, inner: &SimNode, peer: NodeId, at: RemoteAddr) {
        let mut w = self.0.borrow_mut();
        if !w.armed || !w.regions.contains(&at.region) {
            return;
        }
        *w.posts.entry(inner.local_id()).or_default() += 1;
        if w.node == Some(inner.local_id()) {
            let now = inner.now();
            w.hits.push((peer, at.region, now));
        }
    }
}

/// The shared small-slot group over `n` nodes, all initial, with durable epochs in
/// `base/n<i>` (never fsynced: a simulated stop is a process crash); with `spares`, one shard
/// of `n - spares` members (the highest-ranked `spares` initial members are spares of view 0);
/// with `shards` above 1 (and no spares), that many shards of 1 to `ceil(n / shards)` members.
fn config(base: &Path, i: usize, n: usize, spares: usize, shards: usize) -> GroupConfig {
    let mut cfg = group_sim::config(n, n);
    if spares > 0 {
        cfg.gms.shards = EvenShards {
            shards: 1,
            min: 1,
            max: n - spares,
        };
    } else if shards > 1 {
        cfg.gms.shards = EvenShards {
            shards,
            min: 1,
            max: n.div_ceil(shards),
        };
    }
    cfg.gms.restart_absent_timeout = Duration::from_millis(4);
    group_sim::durable(cfg, base, i)
}

/// One life on a fresh fabric; the members not in `up` never start in it (absent).
struct Life {
    sim: Sim,
    base: PathBuf,
    nodes: Vec<Option<SimNode>>,
    groups: Vec<Option<Group<Watched, MemLog>>>,
    logs: Vec<Vec<u8>>,
    delivered: Vec<Seq>,
    /// Per member, each view it installed while active (not the one its transfer completed
    /// in) and how many messages it had delivered then (virtual synchrony: the same everywhere).
    installs: Vec<BTreeMap<u64, usize>>,
    watch: Rc<RefCell<Watch>>,
    next: Vec<u32>,
    life: u8,
    n: usize,
    /// Spares of view 0 (see [`config`]).
    spares: usize,
    /// Shards (see [`config`]).
    shards: usize,
    /// Members that submit nothing while in view 0 (see [`peers_past_view_0`]).
    quiet: Vec<usize>,
    /// A member that submits at every step while it runs view 0 (see [`peers_past_view_0`]).
    eager: Option<usize>,
    /// Per node: the submissions it made (accepted) while it ran view 0 (not restarting it).
    view_0_submits: Vec<u32>,
    /// Per node: the submissions reported `Discarded` (a first-start hold's sends refused by a
    /// wedged epoch at the release, among others).
    discarded: Vec<u32>,
}

impl Life {
    fn start(
        seed: u64,
        base: &Path,
        logs: &[Vec<u8>],
        up: &[usize],
        life: u8,
        spares: usize,
    ) -> Life {
        Life::start_sharded(seed, base, logs, up, life, spares, 1)
    }

    /// [`Life::start`] with `shards` shards (see [`config`]).
    fn start_sharded(
        seed: u64,
        base: &Path,
        logs: &[Vec<u8>],
        up: &[usize],
        life: u8,
        spares: usize,
        shards: usize,
    ) -> Life {
        let n = logs.len();
        let cfg = config(base, 0, n, spares, shards);
        let layout = Group::<Watched, MemLog>::layout(&cfg).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(seed), n, &layout).unwrap();
        let mut l = Life {
            sim,
            base: base.to_path_buf(),
            nodes: Vec::new(),
            groups: (0..n).map(|_| None).collect(),
            logs: logs.to_vec(),
            delivered: vec![Vec::new(); n],
            installs: vec![BTreeMap::new(); n],
            watch: Rc::default(),
            next: vec![0; n],
            life,
            n,
            spares,
            shards,
            quiet: Vec::new(),
            eager: None,
            view_0_submits: vec![0; n],
            discarded: vec![0; n],
        };
        l.nodes = nodes.into_iter().map(Some).collect();
        for &i in up {
            l.boot(i);
        }
        l
    }

    /// Creates member `i`'s group from its log (fresh if the log is empty: an initial member
    /// then logs view 0 as it starts).
    fn boot(&mut self, i: usize) {
        let t = self.nodes[i].take().unwrap();
        let (log, rec) = MemLog::open(self.logs[i].clone());
        let rec = (!rec.records.is_empty()).then_some(rec);
        let cfg = config(&self.base, i, self.n, self.spares, self.shards);
        let t = Tapped {
            inner: t,
            tap: Watcher(self.watch.clone()),
        };
        self.groups[i] = Some(Group::new(t, cfg, log, rec.as_ref()).unwrap());
    }

    fn step(&mut self, submit: bool) {
        for i in 0..self.n {
            // Each member's shard (for a state transfer's check, below).
            let shards: Vec<Option<usize>> = (self.groups.iter())
                .map(|g| g.as_ref().and_then(Group::shard))
                .collect();
            let Some(g) = &mut self.groups[i] else {
                continue;
            };
            // Running view 0 (not restarting it).
            let in_view_0 = g.view().is_some_and(|v| v.id == 0) && g.gms().restarting().is_none();
            let quiet = self.quiet.contains(&i) && g.view().is_some_and(|v| v.id == 0);
            let eager = self.eager == Some(i) && in_view_0;
            if submit && !quiet && (eager || self.sim.random(3) == 0) {
                let mut p = vec![self.life, i as u8];
                p.extend_from_slice(&self.next[i].to_le_bytes());
                if group_sim::submit_during_restart(g, i, &p).unwrap_or_else(|e| panic!("{e}")) {
                    self.next[i] += 1;
                    self.view_0_submits[i] += u32::from(in_view_0);
                }
            }
            let mut up = Vec::new();
            g.poll(&mut up);
            {
                // The watched member's view-0 epoch is over once it leaves view 0.
                let mut w = self.watch.borrow_mut();
                if w.node == Some(NodeId(i as u32)) && g.view().is_none_or(|v| v.id != 0) {
                    w.armed = false;
                }
            }
            let transferred = g.take_state();
            let shard = g.shard();
            if let Some(st) = transferred.as_ref() {
                // A member that joined (again): its state is what the others of its shard
                // delivered before the state's position (checked against the digest the holder
                // sent).
                let same_shard = |j: usize| self.shards == 1 || shards[j] == shard;
                let from = (0..self.n)
                    .filter(|&j| j != i && same_shard(j))
                    .find(|&j| self.delivered[j].len() as u64 >= st.position)
                    .unwrap();
                if self.shards > 1 {
                    // It may have joined another shard: its earlier installs counted the
                    // deliveries of its old shard.
                    self.installs[i].clear();
                }
                let prefix = self.delivered[from][..st.position as usize].to_vec();
                assert_eq!(
                    st.state,
                    group_sim::digest(&prefix),
                    "n{i}: transferred state"
                );
                self.delivered[i] = prefix;
            }
            for u in up {
                match u {
                    Upcall::Deliver(d) => {
                        let want = self.delivered[i].last().map_or(d.position, |l| l.0 + 1);
                        assert_eq!(d.position, want, "n{i}: positions must be gapless");
                        self.delivered[i].push((d.position, d.payload));
                    }
                    Upcall::View(v) if transferred.is_none() => {
                        self.installs[i].insert(v.id, self.delivered[i].len());
                    }
                    Upcall::Discarded(_) => self.discarded[i] += 1,
                    _ => {}
                }
            }
            if g.state_wanted() {
                let next = self.delivered[i].len() as u64;
                g.provide_state(next, &group_sim::digest(&self.delivered[i]))
                    .unwrap();
            }
        }
        self.sim.advance(STEP);
    }

    /// Every member's GMS log bytes (one that never started keeps its empty log).
    fn shutdown(self) -> (Vec<Vec<u8>>, Vec<Seq>) {
        let logs = (0..self.n)
            .map(|i| match &self.groups[i] {
                Some(g) => g.gms().log().bytes().to_vec(),
                None => self.logs[i].clone(),
            })
            .collect();
        (logs, self.delivered)
    }

    fn state(&self) -> String {
        group_sim::describe(&self.groups)
    }

    /// Records every one-sided op member `x` posts into its peers' copies of view 0's epoch
    /// regions (its shard's region set, which every later even view reuses) until it leaves
    /// view 0.
    fn watch_view_0_set(&mut self, x: usize) {
        let members: Vec<NodeId> = (0..self.n as u32).map(NodeId).collect();
        let cfg = config(&self.base, x, self.n, self.spares, self.shards);
        // Every shard's epoch of a view uses the same regions (set `view mod 2`).
        let set = cfg.epoch_for_shard(0, 0, members);
        let mut w = self.watch.borrow_mut();
        w.node = Some(NodeId(x as u32));
        w.regions = vec![set.table_region, set.large_region];
        w.armed = true;
    }

    /// Whether member `i` is wedged in view 0 for an ordinary view change (a suspicion) while it
    /// still runs the view-0 epoch it started afresh: not restarting, its epoch not dropped.
    fn wedged_in_view_0(&self, i: usize) -> bool {
        self.groups[i].as_ref().is_some_and(|g| {
            g.gms().is_wedged()
                && g.gms().restarting().is_none()
                && g.view().is_some_and(|v| v.id == 0)
                && g.epoch().is_some()
        })
    }

    /// Member `i`'s process crashed (or is made to): it starts again as a new process (a new incarnation on
    /// the fabric) from the GMS log its crashed group left.
    fn restart_process(&mut self, i: usize) {
        if let Some(g) = self.groups[i].take() {
            self.logs[i] = g.gms().log().bytes().to_vec();
        }
        let id = NodeId(i as u32);
        if !self.sim.is_crashed(id) {
            self.sim.crash(id);
        }
        self.nodes[i] = self.sim.restart_node(id);
        self.boot(i);
    }
}

/// The first life: only `logged` start (each logs `Installed { 0 }` as it starts) and run for
/// `steps` with submissions, then everyone stops. Then all `n` start again from their logs
/// (those of `logged` `late` steps after the others, which meanwhile run view 0 afresh,
/// submitting, and log what they receive; nothing can be delivered) and must end in one
/// running view naming them all within 50 ms of virtual time, and deliver new messages
/// identically, every member's among them.
fn first_start_crash(
    seed: u64,
    n: usize,
    logged: &[usize],
    steps: usize,
    late: usize,
    spares: usize,
) -> Result<(), String> {
    let tag = format!("n{n}-{logged:?}-{steps}-{late}-{spares}");
    let base = group_sim::scratch_dir("first-start", &tag, seed);
    let mut l = Life::start(seed, &base, &vec![Vec::new(); n], logged, 0, spares);
    for _ in 0..steps {
        l.step(true);
    }
    let (logs, before) = l.shutdown();
    // The crash state the test is about: some members logged view 0, the others nothing.
    for (i, log) in logs.iter().enumerate() {
        let (_, rec) = MemLog::open(log.clone());
        let last = rec.last_view().map(|(v, _)| v);
        let want = logged.contains(&i).then_some(0);
        assert_eq!(last, want, "n{i}: the first life's log");
    }
    // Nothing could be delivered while a member of the shard never started (it never sent);
    // a shard whose members all started may have delivered (spares run no epoch).
    let senders = n - spares;
    let shard_started = (0..senders).all(|i| logged.contains(&i));
    assert!(
        shard_started || before.iter().all(Vec::is_empty),
        "delivered in the first life: {before:?}"
    );

    let fresh: Vec<usize> = (0..n).filter(|i| !logged.contains(i)).collect();
    let mut l = Life::start(seed, &base, &logs, &fresh, 1, spares);
    for _ in 0..late {
        l.step(true);
    }
    if l.delivered.iter().any(|d| !d.is_empty()) {
        return Err("delivered in view 0 before the members that logged it started".into());
    }
    for &i in logged {
        l.boot(i);
    }
    together_and_carrying_on(l, &before, spares, |_| Ok(()))?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// Runs until every member is in one running view that names them all (at most 50 ms of
/// virtual time), then lets them deliver new messages: identically, every member's among them,
/// and what each delivered in the first life (`before`) a prefix of it.
fn together_and_carrying_on(
    mut l: Life,
    before: &[Seq],
    spares: usize,
    check: impl Fn(&Life) -> Result<(), String>,
) -> Result<(), String> {
    let n = l.n;
    let senders = n - spares;
    let all: Vec<usize> = (0..n).collect();
    let t0 = l.sim.now();
    let limit = Duration::from_millis(50);
    let together = |l: &Life| {
        let views: Vec<Option<u64>> = (l.groups.iter())
            .map(|g| g.as_ref().and_then(|g| g.view().map(|v| v.id)))
            .collect();
        l.groups.iter().enumerate().all(|(i, g)| {
            g.as_ref().is_some_and(|g| {
                // A spare (in no shard) holds no epoch and no state.
                (i >= n - spares || (g.is_active() && g.epoch().is_some()))
                    && g.stopped().is_none()
                    && g.gms().restarting().is_none()
                    && (g.view()).is_some_and(|v| all.iter().all(|&m| v.contains(NodeId(m as u32))))
            })
        }) && views.iter().all(|v| *v == views[0])
    };
    while !together(&l) {
        if l.sim.now().saturating_since(t0) > limit {
            return Err(format!(
                "the members did not end in one running view within {limit:?}: {}",
                l.state()
            ));
        }
        l.step(true);
    }
    check(&l)?;
    for _ in 0..400 {
        l.step(true);
    }
    for _ in 0..2000 {
        l.step(false);
    }
    // The members that must deliver identically: every sender with one shard; with several,
    // the members of each shard of the final view.
    let groups: Vec<Vec<usize>> = if l.shards == 1 {
        vec![(0..senders).collect()]
    } else {
        let of: Vec<Option<usize>> = (l.groups.iter())
            .map(|g| g.as_ref().and_then(Group::shard))
            .collect();
        if let Some(i) = of.iter().position(Option::is_none) {
            return Err(format!("n{i} ended in no shard: {}", l.state()));
        }
        (0..l.shards)
            .map(|s| (0..n).filter(|&i| of[i] == Some(s)).collect())
            .collect()
    };
    for group in &groups {
        same_in_shard(&l, group, before)?;
    }
    Ok(())
}

/// The checks of [`together_and_carrying_on`] for `group`, members that deliver one sequence:
/// they deliver identically, every member's messages among them; each view installed after the
/// same deliveries by every member that installed it; the first life's deliveries a prefix.
fn same_in_shard(l: &Life, group: &[usize], before: &[Seq]) -> Result<(), String> {
    let Some(&first) = group.first() else {
        return Ok(());
    };
    let after = &l.delivered[first];
    if after.is_empty() {
        return Err(format!(
            "nothing delivered after the restart: {}",
            l.state()
        ));
    }
    if let Some(&i) = group.iter().find(|&&i| &l.delivered[i] != after) {
        let at = (l.delivered[i].iter().zip(after)).position(|(a, b)| a != b);
        if let Some(k) = at {
            for &j in group {
                let w: Vec<_> = (l.delivered[j].get(k.saturating_sub(3)..k + 4))
                    .unwrap_or(&[])
                    .iter()
                    .map(|(p, b)| (*p, b[..2].to_vec(), b.get(2).copied()))
                    .collect();
                eprintln!("n{j}: {w:?}");
            }
        }
        return Err(format!(
            "n{i} delivered differently ({} against {}, first at {at:?}: {:?} against {:?})",
            l.delivered[i].len(),
            after.len(),
            at.map(|k| &l.delivered[i][k]),
            at.map(|k| &after[k]),
        ));
    }
    for &i in group {
        if !l.delivered[i]
            .iter()
            .any(|(_, p)| p.get(1) == Some(&(i as u8)))
        {
            return Err(format!("n{i}: none of its messages was delivered"));
        }
    }
    // Virtual synchrony: a view is installed after the same number of deliveries by every
    // member that installed it while active.
    let installs: Vec<_> = group.iter().map(|&i| l.installs[i].clone()).collect();
    group_sim::same_install_positions(&installs)?;
    // Nothing delivered in the first life is lost: the replay hands it out again first.
    if let Some(&i) = group.iter().find(|&&i| !after.starts_with(&before[i])) {
        return Err(format!(
            "n{i} delivered {} in the first life, not a prefix of what it delivers now",
            before[i].len()
        ));
    }
    Ok(())
}

/// Every non-empty proper subset of `0..n` as a list of members.
fn proper_subsets(n: usize) -> Vec<Vec<usize>> {
    (1..(1u32 << n) - 1)
        .map(|m| (0..n).filter(|&i| m & (1 << i) != 0).collect())
        .collect()
}

#[test]
fn a_crash_during_the_first_start_of_three_restarts_whichever_members_logged_view_0() {
    check_seeds("first_start_3", 2, |seed| {
        for logged in proper_subsets(3) {
            // Stopped at once (nothing but the `Installed` record), or after running a while;
            // at the restart, the members that logged view 0 start with the others or later.
            let steps = 1 + (seed as usize * 37) % 150;
            for (steps, late) in [(0, 0), (steps, 0), (steps, 1 + (seed as usize * 53) % 200)] {
                first_start_crash(seed, 3, &logged, steps, late, 0)
                    .map_err(|e| format!("logged {logged:?}, {steps} steps, {late} late: {e}"))?;
            }
        }
        Ok(())
    });
}

#[test]
fn a_crash_during_the_first_start_of_five_restarts_whichever_members_logged_view_0() {
    check_seeds("first_start_5", 1, |seed| {
        for logged in [
            vec![0],
            vec![4],
            vec![1, 3],
            vec![0, 1, 2],
            vec![2, 3, 4],
            vec![0, 1, 2, 3],
        ] {
            first_start_crash(seed, 5, &logged, 50, 20, 0)
                .map_err(|e| format!("logged {logged:?}: {e}"))?;
        }
        Ok(())
    });
}

#[test]
fn a_crash_during_the_first_start_restarts_the_spares_of_view_0_too() {
    // Five initial members, one shard of three (0, 1, 2) and two spares (3, 4) in view 0. With
    // `[0, 1, 2]` the shard delivered in the first life (the spares run no epoch): the replay
    // must hand all of it out again.
    check_seeds("first_start_spares", 1, |seed| {
        // Not a subset of spares alone: the fresh shard members then deliver in view 0 before
        // the spares start (see MEMBERSHIP.md, twenty-first part; since s23 they switch too,
        // forty-first part: `a_fresh_member_that_delivered_in_view_0_restarts_it_with_the_others`).
        for logged in [vec![0, 1, 2], vec![2, 3], vec![0, 4], vec![1, 2, 3, 4]] {
            first_start_crash(seed, 5, &logged, 50, 20, 2)
                .map_err(|e| format!("logged {logged:?}: {e}"))?;
        }
        Ok(())
    });
}

/// Issue 6, left by s19 (twenty-first part): an initial member `x` whose log is empty while
/// the group went on without it in an earlier life. First life: the other four of five start
/// (each logs view 0); `x`'s process comes up and crashes at once, before it logged anything
/// (its log stays empty); the others remove it (view 1 fails it) and deliver. Everyone stops.
/// Second life: the four restart view 1 from their logs; `x` starts view 0 afresh (`Group::new`,
/// empty log), with them (`late` = 0: it reads their restarting blocks of view 1) or `late`
/// steps later (the restart completed: they run view 2). Before the fix `x` stayed in view 0
/// for good. Now it sees a peer past view 0, enters restart mode at view 0 (a state a crash
/// could have left: `Installed { 0 }` logged, nothing else), finds the group two views ahead
/// or one ahead without it, and joins as a new member by state transfer. Checked: the crash
/// state (`x`'s log empty, the others' at view 1 without `x`, something delivered), then all
/// five in one running view within 50 ms, delivering identically with messages of `x`, the
/// first life's deliveries a prefix of the second's. This runs the first life and returns its
/// crash state; [`peers_past_view_0`] runs the second.
fn past_view_0_first_life(seed: u64, x: usize, tag: &str) -> Result<CrashState, String> {
    let n = 5;
    let tag = format!("past-0-{x}-{tag}");
    let base = group_sim::scratch_dir("first-start", &tag, seed);
    let others: Vec<usize> = (0..n).filter(|&i| i != x).collect();
    let mut l = Life::start(seed, &base, &vec![Vec::new(); n], &others, 0, 0);
    l.sim.crash(NodeId(x as u32));
    let t0 = l.sim.now();
    let removed = |l: &Life| {
        others.iter().all(|&i| {
            (l.groups[i].as_ref().and_then(|g| g.view()))
                .is_some_and(|v| v.id >= 1 && !v.contains(NodeId(x as u32)))
        })
    };
    while !removed(&l) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("n{x} was not removed: {}", l.state()));
        }
        l.step(true);
    }
    for _ in 0..600 {
        l.step(true);
    }
    let (logs, before) = l.shutdown();
    if !logs[x].is_empty() || before[others[0]].is_empty() {
        return Err(format!(
            "not the crash state under test: n{x}'s log holds {} bytes, n{} delivered {}",
            logs[x].len(),
            others[0],
            before[others[0]].len()
        ));
    }
    Ok((base, logs, before))
}

/// See [`past_view_0_first_life`]. Unless `quiet`, `x` submits at every step while it runs
/// view 0; returns how many of its submissions it made there (accepted).
fn peers_past_view_0(seed: u64, x: usize, late: usize, quiet: bool) -> Result<u32, String> {
    let n = 5;
    let others: Vec<usize> = (0..n).filter(|&i| i != x).collect();
    let (base, logs, before) = past_view_0_first_life(seed, x, &format!("{late}-{quiet}"))?;
    let mut l = Life::start(seed + 1000, &base, &logs, &others, 1, 0);
    if quiet {
        l.quiet = vec![x];
    } else {
        l.eager = Some(x);
    }
    for _ in 0..late {
        l.step(true);
    }
    l.boot(x);
    let submits = std::cell::Cell::new(0);
    together_and_carrying_on(l, &before, 0, |l| {
        submits.set(l.view_0_submits[x]);
        Ok(())
    })?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(submits.get())
}

#[test]
fn an_initial_member_with_an_empty_log_whose_peers_are_past_view_0_joins_them() {
    peers_past_view_0_sweep("first_start_peers_past_0", true);
}

/// [`peers_past_view_0`] for 2 seeds (more with `SQUALL_SEEDS`), member 0 and member 4, starting
/// with the others or 300 steps later. Unless `quiet`, a run where `x` submitted nothing in
/// view 0 (by the time all were together) fails as one that no longer reaches its moment.
fn peers_past_view_0_sweep(name: &str, quiet: bool) {
    check_seeds(name, 2, |seed| {
        for x in [0, 4] {
            for late in [0, 300] {
                let submits = peers_past_view_0(seed, x, late, quiet)
                    .map_err(|e| format!("x = {x}, {late} late: {e}"))?;
                if !quiet && submits == 0 {
                    return Err(group_sim::missed(
                        seed,
                        &format!(
                            "n{x} ({late} late) submitting in view 0 while its peers are past it"
                        ),
                    ));
                }
            }
        }
        Ok(())
    });
}

/// Issue 6, found in s20 (twenty-third part): the member that started view 0 afresh while its
/// peers run a later view *submits* in view 0 (the test above keeps it quiet). Its view-0
/// epoch's writes went into the peers' region set 0, which their running even view reuses,
/// and the peers delivered its view-0 message in another member's slot (seed 0). Since s20 its
/// epoch is held (not polled; its submissions kept, sent only at the release) until every
/// member of its shard is seen running view 0, which here never happens: it switches to
/// restart mode and joins again (the kept submissions dropped, as after a crash). Fails without the hold (`Group::release_first_start`).
#[test]
fn regression_a_member_that_started_view_0_afresh_writes_nothing_into_its_peers_later_view() {
    peers_past_view_0_sweep("first_start_past_0_submitting", false);
}

/// Issue 6, s19's untested claim (twenty-first part): `Group::restart_first_start`'s
/// conversion matters for a member that the restart of view 0 *removes*. The crash state:
/// members 0, 1, 2 of five start (each logs view 0); the processes of 3 and 4 come up and crash
/// at once, before they logged anything; 0, 1, 2 suspect them and decide view 1 = [0, 1, 2],
/// and everyone stops the moment a member logged that decision (nobody installed view 1; the
/// test checks it). Second life: all five start, 3 and 4 from their empty logs, starting view 0
/// afresh; they read the restarting blocks of view 0 and switch to restart mode at view 0
/// (twenty-first part). The inspector adopts the logged decision, which fails 3 and 4: the
/// restart view removes two restarted members. They must take the removal as a restarting
/// member does (catch up from a peer, find the view without them, join again by state
/// transfer, `Gms::rejoined` = (0, 1)), which their `Group` can do only from restart mode:
/// all five end in one running view, delivering identically with messages of 3 and 4.
/// `late` steps: 0, 1, 2 start that much after 3 and 4.
///
/// Returns the view all five ran together in and how many submissions 3 and 4 made while they
/// ran view 0 (the moment of the seed-pinned regression below).
fn first_start_removed_by_the_restart(seed: u64, late: usize) -> Result<(u64, u32), String> {
    let n = 5;
    let (kept, fresh) = ([0, 1, 2], [3, 4]);
    let base = group_sim::scratch_dir("first-start", &format!("removed-{late}"), seed);
    let mut l = Life::start(seed, &base, &vec![Vec::new(); n], &kept, 0, 0);
    for i in fresh {
        l.sim.crash(NodeId(i as u32));
    }
    let t0 = l.sim.now();
    let decided = loop {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("no member logged a decision: {}", l.state()));
        }
        l.step(true);
        let d = (kept.iter()).find_map(|&i| {
            l.groups[i]
                .as_ref()
                .and_then(|g| g.gms().decision().cloned())
        });
        if let Some(d) = d {
            break d;
        }
    };
    let members: Vec<NodeId> = (0..n).map(|i| NodeId(i as u32)).collect();
    if decided.next_members(&members) != kept.map(|i| NodeId(i as u32)) {
        return Err(format!(
            "the decision is not view 1 = {kept:?}: {decided:?}"
        ));
    }
    let (logs, before) = l.shutdown();
    for (i, log) in logs.iter().enumerate() {
        let last = MemLog::open(log.clone()).1.last_view().map(|(v, _)| v);
        let want = kept.contains(&i).then_some(0);
        if last != want {
            return Err(format!("n{i}'s log ends at view {last:?}, not {want:?}"));
        }
    }
    let mut l = Life::start(seed + 1000, &base, &logs, &fresh, 1, 0);
    for _ in 0..late {
        l.step(true);
    }
    for i in kept {
        l.boot(i);
    }
    let moment = std::cell::Cell::new((0, 0));
    together_and_carrying_on(l, &before, 0, |l| {
        for i in fresh {
            let r = l.groups[i].as_ref().and_then(|g| g.gms().rejoined());
            if r != Some((0, 1)) {
                return Err(format!(
                    "n{i} did not join again after the restart removed it: {r:?}"
                ));
            }
        }
        let view = (l.groups[0].as_ref().and_then(|g| g.view())).map_or(0, |v| v.id);
        moment.set((view, fresh.iter().map(|&i| l.view_0_submits[i]).sum()));
        Ok(())
    })?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(moment.get())
}

#[test]
fn a_member_that_started_view_0_afresh_and_that_the_restart_removes_joins_again() {
    check_seeds("first_start_removed_by_the_restart", 2, |seed| {
        for late in [0, 20] {
            first_start_removed_by_the_restart(seed, late)
                .map_err(|e| format!("{late} late: {e}"))?;
        }
        Ok(())
    });
}

/// The failing case of [`first_start_removed_by_the_restart`] at 8 seeds (seed 2, the fresh
/// members 20 steps first): their view-0 writes stayed in the restarting members' copies of
/// region set 0, which view 2 reused ("n3 delivered differently (12 against 15, first at 7)").
/// Fixed by `Group::zero_restarted_set` (docs/MEMBERSHIP.md, twenty-third part).
#[test]
fn regression_first_start_seed_2_stale_view_0_writes_read_by_view_2() {
    let (view, submits) = first_start_removed_by_the_restart(2, 20).unwrap();
    assert!(
        view % 2 == 0 && submits > 0,
        "{} (running view {view}, {submits} submissions of n3 and n4 in view 0)",
        group_sim::missed(
            2,
            "n3 and n4 submitting in view 0 and the group running an even view (region set 0)"
        )
    );
}

/// How far `x` (and `acker`) must have gone in an ordinary change of view 0 during the hold
/// before the members that logged view 0 start (see [`suspicion_in_the_hold_at_a_first_start_crash`]).
#[derive(Clone, Copy, Debug)]
enum InTheHold {
    /// `x` wedged (it follows view 0's leader, a member that has not started).
    Wedged,
    /// `x` leads view 0 among the members it does not suspect: it wedged and proposed.
    Proposed,
    /// `x` leads and proposed, and this third member, also started afresh, acknowledged it.
    Acknowledged(usize),
}

/// Issue 6, s21 (docs/MEMBERSHIP.md, thirtieth part; s22, thirty-fourth part): a suspicion
/// reaches `x`, an initial member that started view 0 afresh, while its view-0 epoch is held.
/// A crash during the group's first start: the others of five (those not `x`, `y` or the
/// acker of `hold`) start (each logs view 0) and run 50 steps; `x`, `y` and the acker never
/// start. Second life: they start view 0 afresh (held: the others are not seen running view
/// 0), `y`'s process crashes within 20 steps, and `x` suspects it and wedges view 0 for an
/// ordinary change while held; with [`InTheHold::Proposed`] it also proposes the change, with
/// [`InTheHold::Acknowledged`] the acker also acknowledges that proposal (the test waits for
/// exactly that state). Only then (`late` steps more) do the others restart view 0 from their
/// logs and `y` start again as a new process from its log (`Installed { 0 }`). Checked by
/// [`after_the_hold`].
fn suspicion_in_the_hold_at_a_first_start_crash(
    seed: u64,
    (x, y): (usize, usize),
    hold: InTheHold,
    late: usize,
) -> Result<(), String> {
    let n = 5;
    let acker = match hold {
        InTheHold::Acknowledged(a) => Some(a),
        InTheHold::Wedged | InTheHold::Proposed => None,
    };
    let fresh: Vec<usize> = [x, y].into_iter().chain(acker).collect();
    let logged: Vec<usize> = (0..n).filter(|i| !fresh.contains(i)).collect();
    let tag = format!("hold-{x}-{y}-{acker:?}-{late}");
    let base = group_sim::scratch_dir("first-start", &tag, seed);
    let mut l = Life::start(seed, &base, &vec![Vec::new(); n], &logged, 0, 0);
    for _ in 0..50 {
        l.step(true);
    }
    let (logs, before) = l.shutdown();
    let mut l = Life::start(seed + 1000, &base, &logs, &fresh, 1, 0);
    l.watch_view_0_set(x);
    for _ in 0..l.sim.random(20) {
        l.step(true);
    }
    l.sim.crash(NodeId(y as u32));
    let t0 = l.sim.now();
    let reached = |l: &Life| {
        let proposal = |i: usize| {
            let g = l.groups[i].as_ref()?;
            let (rank, changes) = g.gms().proposal()?;
            Some((rank, changes.to_vec()))
        };
        let fails_y = |i: usize| {
            proposal(i).is_some_and(|(_, ch)| ch.iter().any(|c| c.node == NodeId(y as u32)))
        };
        let leads = l.groups[x].as_ref().and_then(|g| g.gms().leader()) == Some(NodeId(x as u32));
        l.wedged_in_view_0(x)
            && match hold {
                InTheHold::Wedged => true,
                InTheHold::Proposed => leads && fails_y(x),
                InTheHold::Acknowledged(a) => {
                    leads && fails_y(x) && l.wedged_in_view_0(a) && proposal(a) == proposal(x)
                }
            }
    };
    while !reached(&l) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(10) {
            return Err(format!(
                "n{x} did not reach {hold:?} in view 0: {}",
                l.state()
            ));
        }
        l.step(true);
    }
    for _ in 0..late {
        l.step(true);
    }
    for &i in &logged {
        l.boot(i);
    }
    l.restart_process(y);
    after_the_hold(l, x, &before)?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// Issue 6, s21: a suspicion reaches `x` while its view-0 epoch is held and its peers are past
/// view 0 ([`past_view_0_first_life`]: the four others removed `x` and ran on). Second life:
/// the four restart view 1 (their restart view 2 runs on region set 0, view 0's); `x` starts
/// view 0 afresh cut off from all of them, so it reads none of their view blocks and its links
/// to them time out while its epoch is held. It suspects the four at once and stops (a
/// minority of view 0) before it could wedge: checked, as is that it was still in view 0 and
/// not restarting (the suspicion came during the hold). The partition heals and `x`'s process
/// starts again from its log (`Installed { 0 }`, logged at its start). Checked by
/// [`after_the_hold`].
fn suspicion_in_the_hold_past_view_0(seed: u64, x: usize) -> Result<(), String> {
    let n = 5;
    let others: Vec<usize> = (0..n).filter(|&i| i != x).collect();
    let (base, logs, before) = past_view_0_first_life(seed, x, "hold")?;
    let mut l = Life::start(seed + 1000, &base, &logs, &others, 1, 0);
    let cut: Vec<NodeId> = others.iter().map(|&i| NodeId(i as u32)).collect();
    l.sim.partition(&[NodeId(x as u32)], &cut);
    l.watch_view_0_set(x);
    l.boot(x);
    let t0 = l.sim.now();
    let held = |l: &Life| {
        l.groups[x].as_ref().is_some_and(|g| {
            g.gms().restarting().is_none()
                && g.view().is_some_and(|v| v.id == 0)
                && g.epoch().is_some()
        })
    };
    while l.groups[x].as_ref().is_some_and(|g| g.stopped().is_none()) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(10) || !held(&l) {
            return Err(format!("n{x} did not stop in view 0: {}", l.state()));
        }
        l.step(true);
    }
    if (l.groups[x].as_ref()).is_none_or(|g| g.view().is_none_or(|v| v.id != 0)) {
        return Err(format!("n{x} stopped outside view 0: {}", l.state()));
    }
    l.sim.heal();
    l.restart_process(x);
    after_the_hold(l, x, &before)?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// What a suspicion during `x`'s first-start hold must leave: `x` posted nothing into any
/// peer's copy of view 0's region set while in view 0 (its held epoch, wedged or dropped, wrote
/// nothing; a later even view of the peers reuses that set), and every member ends in one
/// running view, delivering identically, each view installed after the same deliveries by
/// every member that installed it ([`together_and_carrying_on`]).
fn after_the_hold(l: Life, x: usize, before: &[Seq]) -> Result<(), String> {
    let watch = l.watch.clone();
    let wrote = || {
        let w = watch.borrow();
        match w.hits.first() {
            None => Ok(()),
            Some(first) => Err(format!(
                "n{x}'s view-0 epoch posted {} ops into its peers' region set 0, the first {first:?}",
                w.hits.len()
            )),
        }
    };
    together_and_carrying_on(l, before, 0, |_| wrote())?;
    wrote()
}

#[test]
fn a_member_wedged_by_a_suspicion_during_its_first_start_hold_restarts_view_0_with_the_others() {
    check_seeds("first_start_hold_wedged", 2, |seed| {
        for xy in [(3, 4), (4, 3)] {
            for late in [0, 200] {
                suspicion_in_the_hold_at_a_first_start_crash(seed, xy, InTheHold::Wedged, late)
                    .map_err(|e| format!("(x, y) = {xy:?}, {late} late: {e}"))?;
            }
        }
        Ok(())
    });
}

#[test]
fn a_member_cut_off_during_its_first_start_hold_writes_nothing_into_its_peers_later_view() {
    check_seeds("first_start_hold_cut_off", 2, |seed| {
        for x in [0, 4] {
            suspicion_in_the_hold_past_view_0(seed, x).map_err(|e| format!("x = {x}: {e}"))?;
        }
        Ok(())
    });
}

/// Issue 6, s22 (docs/MEMBERSHIP.md, thirty-fourth part): as
/// [`a_member_wedged_by_a_suspicion_during_its_first_start_hold_restarts_view_0_with_the_others`],
/// but `x` leads view 0 among the members it does not suspect (`x` = 0, or `y` = 0 so that `x`
/// = 1 leads), so it *proposes* the change that fails `y` while held, and in the last two cases
/// a third fresh member *acknowledges* that proposal while held. Such a member used to stay
/// running view 0 (s19's rule let no member that proposed or acknowledged switch), the restart
/// of view 0 counted `x` (its wedge block) and took it for the restart's leader, and the run
/// hung ("did not end in one running view"). Now a member that proposed or acknowledged while
/// its epoch is held switches like one that only wedged.
#[test]
fn a_member_that_proposes_during_its_first_start_hold_restarts_view_0_with_the_others() {
    check_seeds("first_start_hold_proposed", 2, |seed| {
        let cases = [
            ((0, 1), InTheHold::Proposed),
            ((1, 0), InTheHold::Proposed),
            ((0, 1), InTheHold::Acknowledged(2)),
            ((1, 0), InTheHold::Acknowledged(2)),
        ];
        for (xy, hold) in cases {
            for late in [0, 200] {
                suspicion_in_the_hold_at_a_first_start_crash(seed, xy, hold, late)
                    .map_err(|e| format!("(x, y) = {xy:?}, {hold:?}, {late} late: {e}"))?;
            }
        }
        Ok(())
    });
}

/// Issue 6, s22 (docs/MEMBERSHIP.md, thirty-fourth part, "Several shards: a hold released after
/// the wedge"): the thirtieth part's second case. Five members in two shards. `x`'s shard (the
/// smaller: `x` and `w`) starts view 0 afresh, and so does `y` (rank `y_rank` of the other
/// shard); the other members of `y`'s shard logged view 0 in the first life (50 steps, nothing
/// delivered). Second life: `x` and `y` start, each held (a member of its shard is not seen
/// running view 0); `y`'s process crashes within 20 steps; `x` suspects it and wedges while
/// held. `gap` steps later `w` starts afresh and reads `x` running view 0, which would release
/// both holds (before s22 it did: `x` released while wedged, `w` at its first round); the test
/// waits until `w` wedged too. `late` steps later the members that logged view 0 restart it
/// from their logs and `y` starts again from its log (`Installed { 0 }`): three of five
/// restart view 0, a majority. Checked as [`after_the_hold`] checks (`x`'s view-0 epoch posts
/// nothing into its peers' region set 0, one running view, identical deliveries). With `gap`
/// `None` (s22, thirty-eighth part) `w` starts with `x` and `y` instead, so the whole shard of
/// `x` is released at once and both its members wedge released; they submit nothing in view
/// 0 (else round-robin delivers there and they took part in view 0), and `x`'s posts into set
/// 0 are not checked (it was released). Returns whether `w`'s epoch was released before `w`
/// wedged (it posted into `x`'s copy of the set).
fn hold_released_after_the_wedge(
    seed: u64,
    y_rank: usize,
    gap: Option<usize>,
    late: usize,
) -> Result<bool, String> {
    let n = 5;
    let shards = 2;
    let tag = format!("released-{y_rank}-{gap:?}-{late}");
    let base = group_sim::scratch_dir("first-start", &tag, seed);
    let cfg = config(&base, 0, n, 0, shards);
    let all: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
    let view_0 = View::new(0, all, &cfg.gms.shard_layout());
    let mut by_size: Vec<Vec<usize>> = (view_0.shards.iter())
        .map(|s| s.members.iter().map(|m| m.0 as usize).collect())
        .collect();
    by_size.sort_by_key(Vec::len);
    let (small, big) = (&by_size[0], &by_size[1]);
    assert_eq!(
        (small.len(), big.len()),
        (2, 3),
        "shards of view 0: {by_size:?}"
    );
    let (x, w, y) = (small[0], small[1], big[y_rank]);
    let logged: Vec<usize> = big.iter().copied().filter(|&i| i != y).collect();
    let mut l = Life::start_sharded(seed, &base, &vec![Vec::new(); n], &logged, 0, 0, shards);
    for _ in 0..50 {
        l.step(true);
    }
    let (logs, before) = l.shutdown();
    let up = match gap {
        Some(_) => vec![x, y],
        None => vec![x, w, y],
    };
    let mut l = Life::start_sharded(seed + 1000, &base, &logs, &up, 1, 0, shards);
    if gap.is_none() {
        l.quiet = vec![x, w];
    }
    l.watch_view_0_set(x);
    // A whole shard started: it runs (released) for a while first.
    let run = if gap.is_none() { 50 } else { 0 };
    for _ in 0..run + l.sim.random(20) {
        l.step(true);
    }
    l.sim.crash(NodeId(y as u32));
    let t0 = l.sim.now();
    while !l.wedged_in_view_0(x) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(10) {
            return Err(format!("n{x} did not wedge view 0: {}", l.state()));
        }
        l.step(true);
    }
    if let Some(gap) = gap {
        for _ in 0..gap {
            l.step(true);
        }
        l.boot(w);
    }
    let t0 = l.sim.now();
    while !(l.wedged_in_view_0(x) && l.wedged_in_view_0(w)) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(10) {
            return Err(format!("n{w} did not wedge view 0: {}", l.state()));
        }
        l.step(true);
    }
    // Whether `w`'s epoch was released before it wedged: it then posted into `x`'s copy of
    // view 0's region set.
    let w_posted = (l.watch.borrow().posts.get(&NodeId(w as u32))).is_some_and(|&k| k > 0);
    for _ in 0..late {
        l.step(true);
    }
    for &i in &logged {
        l.boot(i);
    }
    l.restart_process(y);
    match gap {
        Some(_) => after_the_hold(l, x, &before)?,
        None => together_and_carrying_on(l, &before, 0, |_| Ok(()))?,
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(w_posted)
}

#[test]
fn a_member_wedged_during_its_first_start_hold_stays_held_when_its_shard_starts() {
    check_seeds("first_start_hold_not_released", 2, |seed| {
        for y_rank in 0..3 {
            for late in [0, 100] {
                let w_posted = hold_released_after_the_wedge(seed, y_rank, Some(20), late)
                    .map_err(|e| format!("y = rank {y_rank} of its shard, {late} late: {e}"))?;
                if w_posted {
                    return Err(format!(
                        "y = rank {y_rank} of its shard, {late} late: w's epoch was released"
                    ));
                }
            }
        }
        Ok(())
    });
}

/// Issue 6, s22 (docs/MEMBERSHIP.md, thirty-eighth part): as
/// [`a_member_wedged_during_its_first_start_hold_stays_held_when_its_shard_starts`], but `w`
/// starts in the same step as `x` wedges, so it may read `x`'s view block (running view 0)
/// before `x`'s wedge block lands: `w` is then released at its first round, polls its epoch
/// (posting into `x`'s copy of region set 0) and wedges. Released, it never switched into the
/// restart of view 0, which waited for it ("did not end in one running view": `w` running view
/// 0, the others restarting it; seeds 0 to 3 before the thirty-eighth part). Now a first-start
/// member that logged no decision and delivered nothing switches whether or not its epoch is
/// still held. Checked that each default seed reaches the race in at least one run (`w`
/// posted); a soak's seed that reaches it in none is skipped (s25: `SQUALL_SEEDS=12` met seed
/// 4, whose six runs all checked out without the race).
#[test]
fn a_member_released_as_its_shard_peer_wedges_restarts_view_0_with_the_others() {
    group_sim::check_seeds_reaching(
        "first_start_hold_released_racing",
        2,
        "a run that released w before it wedged",
        |seed| {
            let mut raced = 0;
            for y_rank in 0..3 {
                for late in [0, 100] {
                    let w_posted = hold_released_after_the_wedge(seed, y_rank, Some(0), late)
                        .map_err(|e| format!("y = rank {y_rank} of its shard, {late} late: {e}"))?;
                    raced += usize::from(w_posted);
                }
            }
            Ok(if raced == 0 {
                group_sim::Moment::Missed
            } else {
                group_sim::Moment::Reached
            })
        },
    );
}

/// Issue 6, s22 (docs/MEMBERSHIP.md, thirty-eighth part): the wider case of the race above. A
/// whole fresh shard (`x` and `w`) starts with `y` and is released at once (each reads the
/// other running view 0); its members submit nothing in view 0. `y` crashes and both wedge,
/// released; then the other shard's members restart view 0 from their logs and `y` from its
/// log. Before the thirty-eighth part neither switched and the restart waited for them.
#[test]
fn a_fresh_shard_released_before_a_suspicion_restarts_view_0_with_the_others() {
    check_seeds("first_start_shard_released", 2, |seed| {
        for y_rank in 0..3 {
            for late in [0, 100] {
                hold_released_after_the_wedge(seed, y_rank, None, late)
                    .map_err(|e| format!("y = rank {y_rank} of its shard, {late} late: {e}"))?;
            }
        }
        Ok(())
    });
}

/// Where the members that start view 0 afresh and deliver in it sit (see
/// [`delivered_in_view_0`]).
#[derive(Clone, Copy, Debug)]
enum FreshShard {
    /// Five members in two shards: the smaller shard (two members) starts afresh, the other
    /// shard's three members logged view 0 in the first life (a majority of view 0).
    OfTwo,
    /// As [`OfTwo`](FreshShard::OfTwo), and the fresh shard's second member crashes at the
    /// moment under test and starts again as a new process from its log (it logged view 0 at
    /// its first start), restarting view 0 beside the others (in the runs seen the restart
    /// completes without its failed old incarnation, and it joins again by state transfer).
    OfTwoPeerRestarted,
    /// Five members, one shard of three and two spares of view 0: the shard starts afresh, the
    /// spares logged view 0 in the first life (a minority of view 0).
    BesideSpares,
}

/// Issue 6, s23 (docs/MEMBERSHIP.md, forty-first part): a member that started view 0 afresh
/// *delivered* in it while peers of view 0 restart it from their logs. A crash during the
/// group's first start: the first life starts only the members outside the fresh shard (each
/// logs view 0) and runs 50 steps. Second life: the fresh shard starts view 0 afresh; it is
/// released (each member reads the others of its shard running view 0) and delivers in view 0
/// while the members that logged view 0 have not started; the test runs until every member of
/// the fresh shard delivered (1 ms at most), then `late` steps more. That is the moment under
/// test (each fresh member running view 0, not restarting, having delivered); a run that does
/// not reach it fails as a seed that no longer reaches it ([`group_sim::missed`]). Then the
/// others restart view 0 from their logs. Before s23 the fresh members never switched (they
/// delivered), the restarting members counted them as restarted (their wedge blocks) and no
/// restart ballot completed: "did not end in one running view". Checked by
/// [`together_and_carrying_on`] (one running view with everyone, per shard identical
/// deliveries, gapless positions at every member, virtual
/// synchrony), that each fresh member still running installed the restart view (view 1: it
/// switched, it did not join again), and that what each fresh member delivered in view 0 is in
/// the restarted group's sequence: a prefix of what every member of its final shard delivered,
/// all of it before that member installed the restart view if it did (a member that joined
/// again has the state of one that did).
fn delivered_in_view_0(seed: u64, at: FreshShard, late: usize) -> Result<(), String> {
    let n = 5;
    let (spares, shards) = match at {
        FreshShard::OfTwo | FreshShard::OfTwoPeerRestarted => (0, 2),
        FreshShard::BesideSpares => (2, 1),
    };
    let tag = format!("delivered-{at:?}-{late}");
    let base = group_sim::scratch_dir("first-start", &tag, seed);
    let cfg = config(&base, 0, n, spares, shards);
    let all: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
    let view_0 = View::new(0, all, &cfg.gms.shard_layout());
    let mut by_size: Vec<Vec<usize>> = (view_0.shards.iter())
        .map(|s| s.members.iter().map(|m| m.0 as usize).collect())
        .collect();
    by_size.sort_by_key(Vec::len);
    let fresh = by_size[0].clone();
    let logged: Vec<usize> = (0..n).filter(|i| !fresh.contains(i)).collect();
    let mut l = Life::start_sharded(
        seed,
        &base,
        &vec![Vec::new(); n],
        &logged,
        0,
        spares,
        shards,
    );
    for _ in 0..50 {
        l.step(true);
    }
    let (logs, before) = l.shutdown();
    let mut l = Life::start_sharded(seed + 1000, &base, &logs, &fresh, 1, spares, shards);
    let t0 = l.sim.now();
    while fresh.iter().any(|&i| l.delivered[i].is_empty())
        && l.sim.now().saturating_since(t0) <= Duration::from_millis(1)
    {
        l.step(true);
    }
    for _ in 0..late {
        l.step(true);
    }
    let running_0 = |i: usize| {
        l.groups[i].as_ref().is_some_and(|g| {
            g.stopped().is_none()
                && g.gms().restarting().is_none()
                && g.view().is_some_and(|v| v.id == 0)
        })
    };
    if fresh
        .iter()
        .any(|&i| l.delivered[i].is_empty() || !running_0(i))
    {
        return Err(group_sim::missed(
            seed,
            &format!(
                "every fresh member ({fresh:?}) delivering in view 0 before the members that \
                 logged it start: {}",
                l.state()
            ),
        ));
    }
    let live: Vec<Seq> = l.delivered.clone();
    if let FreshShard::OfTwoPeerRestarted = at {
        // A new process: its application starts empty (what it delivered is checked below).
        l.restart_process(fresh[1]);
        l.delivered[fresh[1]].clear();
    }
    for &i in &logged {
        l.boot(i);
    }
    let crashed = matches!(at, FreshShard::OfTwoPeerRestarted).then_some(fresh[1]);
    // s23: from its switch into the restart until the replay sets it from the logs, a fresh
    // member's next position is what its application delivered (seen once per member, before
    // it installs the restart view).
    let mut switched: Vec<usize> = Vec::new();
    let t1 = l.sim.now();
    while fresh
        .iter()
        .any(|&i| Some(i) != crashed && !switched.contains(&i))
        && l.sim.now().saturating_since(t1) <= Duration::from_millis(5)
    {
        l.step(true);
        for &i in &fresh {
            let Some(g) = l.groups[i].as_ref() else {
                continue;
            };
            if Some(i) == crashed
                || switched.contains(&i)
                || g.gms().restarting().is_none()
                || l.installs[i].contains_key(&1)
            {
                continue;
            }
            let delivered = l.delivered[i].last().map_or(0, |d| d.0 + 1);
            if g.next_position() != delivered {
                return Err(format!(
                    "n{i} switched into the restart after delivering {delivered}, its next \
                     position is {}",
                    g.next_position()
                ));
            }
            switched.push(i);
        }
    }
    if let Some(i) = fresh
        .iter()
        .find(|&&i| Some(i) != crashed && !switched.contains(&i))
    {
        return Err(group_sim::missed(
            seed,
            &format!(
                "n{i} restarting view 0 before it installs the restart view: {}",
                l.state()
            ),
        ));
    }
    together_and_carrying_on(l, &before, spares, |l| {
        for &i in &fresh {
            if Some(i) != crashed && !l.installs[i].contains_key(&1) {
                return Err(format!(
                    "n{i} did not install the restart view (view 1): {}",
                    l.state()
                ));
            }
            let shard = l.groups[i].as_ref().and_then(Group::shard);
            let peers =
                (0..n - spares).filter(|&j| l.groups[j].as_ref().and_then(Group::shard) == shard);
            for j in peers {
                let at_restart = l.installs[j].get(&1).copied();
                if !l.delivered[j].starts_with(&live[i])
                    || at_restart.is_some_and(|k| k < live[i].len())
                {
                    return Err(format!(
                        "n{i} delivered {} in view 0 before the restart, not all of them in \
                         n{j}'s sequence before the restart view ({} delivered, {at_restart:?} \
                         at the restart view): {}",
                        live[i].len(),
                        l.delivered[j].len(),
                        l.state()
                    ));
                }
            }
        }
        Ok(())
    })?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// [`delivered_in_view_0`]: the three cases, the others starting as soon as every fresh member
/// delivered or 100 steps later, 2 seeds (`SQUALL_SEEDS` for more). Every run must reach the
/// moment (at `SQUALL_SEEDS=12` all 72 do).
#[test]
fn a_fresh_member_that_delivered_in_view_0_restarts_it_with_the_others() {
    check_seeds("first_start_delivered", 2, |seed| {
        for at in [
            FreshShard::OfTwo,
            FreshShard::OfTwoPeerRestarted,
            FreshShard::BesideSpares,
        ] {
            for late in [0, 100] {
                delivered_in_view_0(seed, at, late)
                    .map_err(|e| format!("{at:?}, {late} late: {e}"))?;
            }
        }
        Ok(())
    });
}
