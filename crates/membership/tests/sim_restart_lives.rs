//! A random search over several lives of a group with total restarts between them (issue 6:
//! "crashes (including the leader during the trim and during state transfer), partitions and
//! heals, joins … at random points … the durable state after restart is a common prefix with
//! nothing committed lost"), on the simulator. The dead-branch defects of s23–s26 (one view id
//! run with two member lists) were found by hand-built scenarios (`sim_restart_absent.rs`);
//! this suite looks for more of them at random.
//!
//! A plan is a universe of 5–8 nodes (view 0 is the first 3–5, the rest may join), 1–3 faulty
//! lives and a final life. Every node keeps its GMS log (`MemLog` bytes) and its epoch
//! directory (durable epochs, never synced: a stop is a process crash) across lives. In a
//! faulty life, at random steps: joins (state transfer), crashes, the leader crashing the
//! moment it logged a decision, a crashed node restarting from its log, partitions of 1–3
//! nodes (healed or not), extra latency at a node. A faulty life ends with every process
//! stopping at once: at a random step, at the first decision some member logged, or at the
//! first install of a next view while another member holds the decision but not the view (the
//! dead branch's moment). Lives after the first start a subset of the nodes with logs
//! (everyone, a majority, a minority, a random set, or those behind the highest logged view),
//! all at once or in turn, sometimes under a partition. The final life starts every node ever started (as an operator starts every configured
//! process: from its log, or as a joiner if it never logged a view), without faults, and runs until they
//! all run one view; a member that stops is restarted from its log as an operator would (every
//! node, for `RestartShortOfAdopted`), a bounded number of times.
//!
//! Checked after every step, across every life: no view id is run (installed with its epoch,
//! out of restart mode, active, not stopped) with two member lists in one life, nor an older member list of a view id
//! after a newer one was run (a dead branch coming back); a view first run holds a majority of
//! some member list run for the view before, or of the next view of a logged decision for it
//! that held one (a restart's fitted view, s18), or of such a list's members whose logs record
//! it, the others its joiners (a restart of a view whose joiners never logged it, s27); every position holds the same payload and
//! hash-chain value wherever it was delivered, and a restored state is the chain at its
//! position; a member running a view after a total stop has delivered at least every position
//! delivered anywhere before it. At the end of the final life: the started nodes run one view
//! of exactly them and deliver new messages alike, unless an operator-needed stop outlasted
//! the bounded restarts (counted and printed, not failed); a hang with no stop fails.
//!
//! `SQUALL_PROPTEST_CASES` soaks the proptest; `SQUALL_SEEDS` the seed sweep (one plan drawn
//! per seed).
#![allow(clippy::unwrap_used)]

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use squall_membership::StopReason;
use squall_membership::change::{ChangeKind, Decision};
use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::{MemLog, Record};
use squall_membership::restart::attempt_of;
use squall_membership::view::Inadequate;
use squall_ordering::Delivery;
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds, proptest_cases};

mod group_sim;
use group_sim::chain::{self, App, Chain, Hooks, Nodes};

thread_local! {
    /// Whether the runs this thread starts tear every write (`SimConfig::torn_writes`; also on
    /// for every run with `SQUALL_SIM_TORN_WRITES=1`): for a pinned plan found in torn mode.
    static TORN: Cell<bool> = const { Cell::new(false) };
}

/// The absent members' timeout (virtual time; suspicion comes after 1.5 ms).
const ABSENT: Duration = Duration::from_millis(4);
/// Steps the final life gives one round (a restart and its settling) before it is a hang.
const ROUND_STEPS: usize = 25_000;
/// Operator rounds of the final life (a restart of the stopped members, or of everyone).
const ROUNDS: usize = 4;

/// One event of a faulty life, at a step of it. Node indices are taken modulo the universe;
/// an event that does not apply when it comes due (its node is down, say) is skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    /// Crash `node` (its log and epoch directory survive).
    Crash { node: usize, step: usize },
    /// From `step` on, crash whichever member leads the moment it has logged a decision, once.
    CrashLeaderAtDecision { step: usize },
    /// Start `node` if it is down: from its log, or as a joiner (state transfer) if it has none.
    Start { node: usize, step: usize },
    /// Cut the nodes of `side` (a bit mask, 1–3 of them) off from the rest; heal `len` steps
    /// later (`None`: not in this life).
    Partition {
        side: u8,
        step: usize,
        len: Option<usize>,
    },
    /// Add `micros` of one-way latency to every op to or from `node`, for the rest of the life.
    Delay {
        node: usize,
        step: usize,
        micros: u64,
    },
}

/// Which nodes with logs a life after the first starts.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Who {
    Everyone,
    /// The lowest-ranked majority of the nodes with logs (rotated by the mask's value).
    Majority(u8),
    /// A minority of them (rotated likewise).
    Minority(u8),
    /// Those of a bit mask (at least one).
    Mask(u8),
    /// Those whose log's last installed view is below the highest any log holds (everyone if
    /// none is): after a stop at an install, the members that logged the decision but not the
    /// view it made, without those that installed it nor joiners that installed nothing (the
    /// dead branch's first restart).
    Behind,
}

/// How a faulty life ends: every process stops at once (at the life's last step if the moment
/// never comes).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Stop {
    /// At the life's last step.
    End,
    /// At the first step from `from` on where some member has logged a decision (with
    /// `ran`, only once some member ran a view in this life: not the restart's own ballot).
    Decision { from: usize, ran: bool },
    /// At the first step from `from` on where some member runs a view that another member,
    /// holding a decision, has not installed yet (`ran` likewise; with `join`, only a
    /// decision that admits a member: the dead branch's kind).
    Install { from: usize, ran: bool, join: bool },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct LifePlan {
    who: Who,
    /// Start them one after the other, this many steps apart (`None`: all at once).
    in_turn: Option<usize>,
    /// A partition set at the start (a bit mask of one side), healed at that step (`None`:
    /// not in this life).
    partitioned: Option<(u8, Option<usize>)>,
    events: Vec<Ev>,
    steps: usize,
    stop: Stop,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Plan {
    seed: u64,
    universe: usize,
    initial: usize,
    /// The faulty lives (the first starts view 0's members fresh: `who` and `in_turn` are
    /// ignored there); a final fault-free life follows.
    lives: Vec<LifePlan>,
}

/// What happened, summed over runs for the printed figures.
#[derive(Clone, Debug, Default)]
struct Stats {
    lives: usize,
    steps: usize,
    /// Restarts that completed (some member ran a view after a total stop).
    restarts_completed: usize,
    /// Lives after the first in which no member ran a view.
    restarts_stalled: usize,
    stops_at_decision: usize,
    stops_at_install: usize,
    leader_crashes: usize,
    joins: usize,
    /// View ids run with more than one member list across lives (a dead branch run, then
    /// replaced by a restart: legitimate while they never run in one life).
    renumbered: usize,
    /// Views first run holding a majority of no view run before them, but of the next view
    /// of a decision for it that held one (a restart's fitted view, s18).
    fitted: usize,
    /// Views first run whose predecessor nobody was seen running (no majority check).
    unchecked_pred: usize,
    /// Views first run holding a majority of their predecessor's members only once its
    /// joiners that never logged it are left aside (a restart of such a view, s27).
    joiners_aside: usize,
    /// Nodes the final life started with an empty log (joiners that never logged a view).
    final_joiners: usize,
    /// Stop reasons met at the end of a life or an operator round (the `StopReason` variant,
    /// or the first word of the group's own reason).
    stops: BTreeMap<String, usize>,
    /// Operator rounds the final life needed.
    rounds: usize,
    /// The final life ended with an operator-needed stop after the bounded rounds.
    unsettled: Option<String>,
    /// The log-level invariants' counted figures.
    log: LogCounts,
}

fn dir(seed: u64) -> PathBuf {
    group_sim::scratch_dir("restart-lives", "p", seed)
}

fn config(base: &Path, i: usize, plan: &Plan) -> GroupConfig {
    let mut cfg = group_sim::config(plan.universe, plan.initial);
    cfg.gms.restart_absent_timeout = ABSENT;
    cfg.gms.expected_link_timeout = Some(ABSENT);
    cfg.transfer.chunk_size = 64;
    cfg.transfer.window = 4;
    group_sim::durable(cfg, base, i)
}

/// One member list run for a view id.
#[derive(Clone, Debug)]
struct Ran {
    members: Vec<NodeId>,
    first_life: usize,
    last_life: usize,
    by: usize,
}

/// The checks inside a step: the chain, across lives.
struct Checks<'a> {
    chain: &'a mut Chain,
}

impl Hooks<MemLog> for Checks<'_> {
    fn restored(&mut self, i: usize, position: u64, hash: u64) -> Result<(), String> {
        chain::check_restored(self.chain, i, position, hash)
    }

    fn delivered(&mut self, i: usize, d: &Delivery, hash: u64) -> Result<(), String> {
        chain::check_delivered(self.chain, i, d, hash)
    }
}

/// A run of a plan: what survives across lives, and the life being run.
struct Run<'p> {
    plan: &'p Plan,
    base: PathBuf,
    /// Per node, its GMS log bytes (empty: it never started, or never logged a view).
    logs: Vec<Vec<u8>>,
    /// Per node, whether it was ever started (the final life starts every such node).
    started_ever: Vec<bool>,
    chain: Chain,
    /// View id → the member lists run for it.
    runs: BTreeMap<u64, Vec<Ran>>,
    /// Positions delivered anywhere before the last total stop.
    floor: u64,
    /// Per node, whether it ran a view in this life (the floor checked).
    ran_here: Vec<bool>,
    life: usize,
    step: usize,
    n: Nodes<MemLog>,
    /// Per node, its endpoint while it has not started in this life.
    unstarted: Vec<Option<SimNode>>,
    leader_armed: bool,
    stats: Stats,
    /// The log-level invariants' state (s28).
    log_state: LogState,
}

impl<'p> Run<'p> {
    fn new(plan: &'p Plan) -> Run<'p> {
        let u = plan.universe;
        let base = dir(plan.seed);
        let (sim, unstarted) = Self::fabric(plan, &base, 0, &(0..u).collect::<Vec<_>>());
        Run {
            plan,
            base,
            logs: vec![Vec::new(); u],
            started_ever: vec![false; u],
            chain: Chain::new(),
            runs: BTreeMap::new(),
            floor: 0,
            ran_here: vec![false; u],
            life: 0,
            step: 0,
            n: Nodes::new(
                sim,
                (0..u).map(|_| None).collect(),
                vec![App::default(); u],
                vec![0],
            ),
            unstarted,
            leader_armed: false,
            stats: Stats::default(),
            log_state: LogState::default(),
        }
    }

    /// A fresh fabric for life `life` on which the nodes of `late` have not started.
    fn fabric(
        plan: &Plan,
        base: &Path,
        life: usize,
        late: &[usize],
    ) -> (Sim, Vec<Option<SimNode>>) {
        let layout = Group::<SimNode, MemLog>::layout(&config(base, 0, plan)).unwrap();
        let ids: Vec<NodeId> = late.iter().map(|&i| NodeId(i as u32)).collect();
        let mut cfg = SimConfig::seeded(plan.seed ^ (life as u64) << 40);
        cfg.torn_writes |= TORN.with(Cell::get);
        let (sim, nodes) = Sim::cluster_late(cfg, plan.universe, &layout, &ids).unwrap();
        (sim, nodes.into_iter().map(Some).collect())
    }

    /// Begins life `life` on a fresh fabric, nobody started.
    fn begin(&mut self, life: usize) {
        let u = self.plan.universe;
        let (sim, unstarted) =
            Self::fabric(self.plan, &self.base, life, &(0..u).collect::<Vec<_>>());
        self.n = Nodes::new(
            sim,
            (0..u).map(|_| None).collect(),
            vec![App::default(); u],
            vec![life as u8],
        );
        self.unstarted = unstarted;
        self.ran_here = vec![false; u];
        self.life = life;
        self.step = 0;
        self.leader_armed = false;
        self.stats.lives += 1;
    }

    /// Starts node `i` from its log, fresh as a view-0 member in life 0, or as a joiner if it
    /// has no log; nothing if it is up.
    fn start(&mut self, i: usize) -> Result<(), String> {
        if self.n.groups[i].is_some() {
            return Ok(());
        }
        let id = NodeId(i as u32);
        let t = match self.unstarted[i].take() {
            Some(t) => {
                self.n.sim.start_node(id);
                t
            }
            None => self
                .n
                .sim
                .restart_node(id)
                .ok_or(format!("n{i}: no restart"))?,
        };
        let cfg = config(&self.base, i, self.plan);
        let (g, has_state) = if !self.logs[i].is_empty() {
            let (log, rec) = MemLog::open(self.logs[i].clone());
            let rec = (!rec.records.is_empty()).then_some(rec);
            (Group::new(t, cfg, log, rec.as_ref()), true)
        } else if self.life == 0 && i < self.plan.initial {
            (Group::new(t, cfg, MemLog::default(), None), true)
        } else {
            self.stats.joins += 1;
            (Group::joining(t, cfg, MemLog::default()), false)
        };
        let g = g.map_err(|e| format!("n{i}: start in life {}: {e}", self.life))?;
        self.n.groups[i] = Some(g);
        self.started_ever[i] = true;
        self.n.apps[i] = App {
            has_state,
            ..App::default()
        };
        Ok(())
    }

    /// Node `i`'s process crashes, if it is up: its log bytes are kept.
    fn crash(&mut self, i: usize) {
        if let Some(g) = self.n.groups[i].take() {
            self.logs[i] = g.gms().log().bytes().to_vec();
            self.n.sim.crash(NodeId(i as u32));
        }
    }

    /// Every process stops at once.
    fn stop_all(&mut self) {
        for i in 0..self.plan.universe {
            self.crash(i);
        }
        self.floor = self.chain.keys().next_back().map_or(0, |p| p + 1);
    }

    fn partition(&mut self, side: u8) {
        let u = self.plan.universe;
        let a: Vec<NodeId> = (0..u)
            .filter(|i| side >> i & 1 == 1)
            .map(|i| NodeId(i as u32))
            .collect();
        let b: Vec<NodeId> = (0..u)
            .filter(|i| side >> i & 1 == 0)
            .map(|i| NodeId(i as u32))
            .collect();
        if !a.is_empty() && !b.is_empty() {
            self.n.sim.partition(&a, &b);
        }
    }

    fn leader_with_decision(&self) -> Option<usize> {
        (0..self.plan.universe).find(|&i| {
            self.n.groups[i].as_ref().is_some_and(|g| {
                g.gms().leader() == Some(NodeId(i as u32)) && g.gms().decision().is_some()
            })
        })
    }

    /// The view member `i` runs: installed with its epoch, out of restart mode, active (a
    /// joiner's state arrived), not stopped.
    fn running(&self, i: usize) -> Option<&squall_membership::view::View> {
        let g = self.n.groups[i].as_ref()?;
        if g.gms().restarting().is_some() || !g.is_active() || g.epoch().is_none() {
            return None;
        }
        g.view()
    }

    /// The events of the life's plan due now.
    fn events(&mut self, lp: &LifePlan) -> Result<(), String> {
        let u = self.plan.universe;
        let step = self.step;
        for e in &lp.events {
            match *e {
                Ev::Crash { node, step: at } if at == step => self.crash(node % u),
                Ev::CrashLeaderAtDecision { step: at } if at == step => self.leader_armed = true,
                Ev::Start { node, step: at } if at == step => self.start(node % u)?,
                Ev::Partition {
                    side,
                    step: at,
                    len,
                } => {
                    if at == step {
                        self.partition(side);
                    }
                    if len.is_some_and(|l| at + l == step) {
                        self.n.sim.heal();
                    }
                }
                Ev::Delay {
                    node,
                    step: at,
                    micros,
                } if at == step => {
                    self.n
                        .sim
                        .delay(NodeId((node % u) as u32), Duration::from_micros(micros));
                }
                _ => {}
            }
        }
        if self.leader_armed
            && let Some(l) = self.leader_with_decision()
        {
            self.leader_armed = false;
            self.crash(l);
            self.stats.leader_crashes += 1;
        }
        Ok(())
    }

    /// One step of every running node, then the checks across lives.
    fn step(&mut self, submit: bool) -> Result<(), String> {
        let mut checks = Checks {
            chain: &mut self.chain,
        };
        self.n
            .step(submit, &mut checks)
            .map_err(|e| format!("life {} step {}: {e}", self.life, self.step))?;
        self.step += 1;
        self.stats.steps += 1;
        self.check_views()
            .map_err(|e| format!("life {} step {}: {e}", self.life, self.step))?;
        self.check_logs()
            .map_err(|e| format!("life {} step {}: {e}", self.life, self.step))
    }

    /// The view checks: one member list per view id (in a life; no older list after a newer
    /// one), a majority of a predecessor, and the floor of what was delivered before.
    fn check_views(&mut self) -> Result<(), String> {
        for i in 0..self.plan.universe {
            let Some(v) = self.running(i) else {
                continue;
            };
            let (id, members) = (v.id, v.members.clone());
            let g = self.n.groups[i].as_ref().unwrap();
            if !self.ran_here[i] && g.replay_backlog() == 0 {
                self.ran_here[i] = true;
                let next = self.n.apps[i].next;
                if self.n.apps[i].has_state && next < self.floor {
                    return Err(format!(
                        "n{i} runs view {id} at position {next}, but {} positions were delivered before the total stop",
                        self.floor
                    ));
                }
            }
            self.note_run(i, id, members)?;
        }
        Ok(())
    }

    fn note_run(&mut self, i: usize, id: u64, members: Vec<NodeId>) -> Result<(), String> {
        let life = self.life;
        let lists = self.runs.entry(id).or_default();
        if let Some(k) = lists.iter().position(|r| r.members == members) {
            if let Some(newer) = lists[k + 1..].first() {
                return Err(format!(
                    "dead branch revived: n{i} runs view {id} as {members:?} in life {life}, after n{} ran it as {:?} in life {}",
                    newer.by, newer.members, newer.first_life
                ));
            }
            lists[k].last_life = life;
            return Ok(());
        }
        if let Some(other) = lists.iter().find(|r| r.last_life == life) {
            return Err(format!(
                "split: n{i} runs view {id} as {members:?}, n{} as {:?}, both in life {life}",
                other.by, other.members
            ));
        }
        if !lists.is_empty() {
            self.stats.renumbered += 1;
        }
        lists.push(Ran {
            members: members.clone(),
            first_life: life,
            last_life: life,
            by: i,
        });
        let Some(prev) = id.checked_sub(1).and_then(|p| self.runs.get(&p)) else {
            if id > 0 {
                self.stats.unchecked_pred += 1;
            }
            return Ok(());
        };
        if prev.iter().any(|r| majority(&members, &r.members)) {
            return Ok(());
        }
        // A restart of a view whose joiners never logged it counts its majority without them
        // (s27, seventy-fifth part, "s27 follow-up: the first and third hangs"): the new list
        // holds a majority of the members of a list run for `id - 1` whose logs record it
        // installed, the others not members of any list run for `id - 2` (joiners).
        let before: Vec<NodeId> = (id.checked_sub(2).and_then(|p| self.runs.get(&p)))
            .into_iter()
            .flatten()
            .flat_map(|r| r.members.iter().copied())
            .collect();
        let aside = prev.iter().any(|l| {
            let logged: Vec<NodeId> = (l.members.iter().copied())
                .filter(|m| {
                    self.records_of(m.0 as usize).iter().any(|r| {
                        matches!(r, Record::Installed { view, members: m2 } if *view == id - 1 && *m2 == l.members)
                    })
                })
                .collect();
            !logged.is_empty()
                && (l.members.iter()).all(|m| logged.contains(m) || !before.contains(m))
                && majority(&members, &logged)
        });
        if aside {
            self.stats.joiners_aside += 1;
            return Ok(());
        }
        // A restart that adopted a logged decision `D` of view `L` (next view `N`) and fitted
        // it may install `R`, a majority of `N` only (s18, "A restart adopting a decision that
        // removed a restarted member"): the chain `L → N → R`, a majority at each step, where
        // some node's log holds `D`.
        let logged: Vec<(u64, Vec<NodeId>, bool)> = (0..self.plan.universe)
            .flat_map(|j| {
                let bytes = match &self.n.groups[j] {
                    Some(g) => g.gms().log().bytes().to_vec(),
                    None => self.logs[j].clone(),
                };
                MemLog::open(bytes).1.records
            })
            .filter_map(|r| match r {
                Record::Decided { decision: d, .. } if d.trim.view + 1 == id => {
                    let chain = prev.iter().find_map(|l| {
                        let next = d.next_members(&l.members);
                        (majority(&next, &l.members) && majority(&members, &next)).then_some(next)
                    });
                    let ok = chain.is_some();
                    Some((d.rank, chain.unwrap_or_default(), ok))
                }
                _ => None,
            })
            .collect();
        if logged.iter().any(|l| l.2) {
            self.stats.fitted += 1;
            return Ok(());
        }
        Err(format!(
            "n{i} runs view {id} as {members:?}, a majority of no member list run for view {} ({:?}), nor of the next view of a logged decision for it that was one (decisions logged anywhere: {logged:?})",
            id - 1,
            prev.iter().map(|r| &r.members).collect::<Vec<_>>()
        ))
    }

    /// Node `j`'s GMS log records: its process's, or those kept from its last process.
    fn records_of(&self, j: usize) -> Vec<Record> {
        let bytes = match &self.n.groups[j] {
            Some(g) => g.gms().log().bytes().to_vec(),
            None => self.logs[j].clone(),
        };
        MemLog::open(bytes).1.records
    }

    /// Whether the life's stop has come.
    fn stop_due(&self, lp: &LifePlan) -> bool {
        let ran = self.ran_here.iter().any(|&r| r);
        match lp.stop {
            Stop::End => false,
            Stop::Decision { from, ran: after } => {
                self.step >= from
                    && (ran || !after)
                    && (0..self.plan.universe).any(|i| {
                        (self.n.groups[i].as_ref()).is_some_and(|g| g.gms().decision().is_some())
                    })
            }
            Stop::Install {
                from,
                ran: after,
                join,
            } => {
                let views: Vec<(u64, bool)> = (0..self.plan.universe)
                    .filter_map(|i| {
                        let g = self.n.groups[i].as_ref()?;
                        let held = g.gms().decision().is_some_and(|d| {
                            !join || d.changes.iter().any(|c| c.kind == ChangeKind::Join)
                        });
                        Some((g.view()?.id, held))
                    })
                    .collect();
                self.step >= from
                    && (ran || !after)
                    && views
                        .iter()
                        .any(|&(v, d)| d && views.iter().any(|&(w, _)| w == v + 1))
            }
        }
    }

    /// Faulty life number `k` of the plan.
    fn faulty_life(&mut self, k: usize) -> Result<(), String> {
        let lp = &self.plan.lives[k];
        if k > 0 {
            self.begin(k);
        } else {
            self.stats.lives += 1;
        }
        let order: Vec<usize> = if k == 0 {
            (0..self.plan.initial).collect()
        } else {
            self.chosen(&lp.who)
        };
        if let Some((side, _)) = lp.partitioned {
            self.partition(side);
        }
        let gap = if k == 0 { None } else { lp.in_turn };
        let mut started = 0;
        let had_floor = k > 0;
        let mut ran = false;
        while self.step < lp.steps {
            while started < order.len() && gap.is_none_or(|g| self.step >= started * g) {
                self.start(order[started])?;
                started += 1;
            }
            if let Some((_, Some(h))) = lp.partitioned
                && h == self.step
            {
                self.n.sim.heal();
            }
            self.events(lp)?;
            self.step(true)?;
            ran |= self.ran_here.iter().any(|&r| r);
            if self.stop_due(lp) {
                match lp.stop {
                    Stop::Decision { .. } => self.stats.stops_at_decision += 1,
                    Stop::Install { .. } => self.stats.stops_at_install += 1,
                    Stop::End => {}
                }
                break;
            }
        }
        self.note_stops();
        if had_floor {
            if ran {
                self.stats.restarts_completed += 1;
            } else {
                self.stats.restarts_stalled += 1;
            }
        }
        self.stop_all();
        self.check_life_logs()
            .map_err(|e| format!("end of life {k}: {e}"))
    }

    fn note_stops(&mut self) {
        for g in self.n.groups.iter().flatten() {
            let name = match (g.gms().stopped(), g.stopped()) {
                (Some(r), _) => format!("{r:?}"),
                (None, Some(s)) => s.to_string(),
                (None, None) => continue,
            };
            let word = name.split([' ', '{', ':']).next().unwrap_or("").to_string();
            *self.stats.stops.entry(word).or_default() += 1;
        }
    }

    /// The nodes with logs that `who` picks.
    fn chosen(&self, who: &Who) -> Vec<usize> {
        let with: Vec<usize> = (0..self.plan.universe)
            .filter(|&i| !self.logs[i].is_empty())
            .collect();
        let rot = |r: u8, n: usize| -> Vec<usize> {
            (0..n)
                .map(|k| with[(k + r as usize) % with.len()])
                .collect()
        };
        match *who {
            Who::Everyone => with,
            Who::Majority(r) => rot(r, with.len() / 2 + 1),
            Who::Minority(r) => rot(r, with.len().div_ceil(2) - 1),
            Who::Behind => {
                let top = with
                    .iter()
                    .map(|&i| last_view(&self.logs[i]))
                    .max()
                    .flatten();
                let behind: Vec<usize> = with
                    .iter()
                    .copied()
                    .filter(|&i| last_view(&self.logs[i]).is_some_and(|v| Some(v) < top))
                    .collect();
                if behind.is_empty() { with } else { behind }
            }
            Who::Mask(m) => {
                let picked: Vec<usize> =
                    with.iter().copied().filter(|&i| m >> i & 1 == 1).collect();
                if picked.is_empty() { rot(m, 1) } else { picked }
            }
        }
    }

    /// Whether every started node runs one view naming them all and nobody else, active,
    /// replay handed out.
    fn settled(&self) -> bool {
        let up: Vec<usize> = (0..self.plan.universe)
            .filter(|&i| self.n.groups[i].is_some())
            .collect();
        let Some(first) = up.first().and_then(|&i| self.running(i)) else {
            return false;
        };
        let id = first.id;
        // A member that was not started is waited for until the group removes it
        // (`expected_link_timeout`): nothing is delivered while it is in. (Since s27 the final
        // life starts every node ever started, a joiner whose log stayed empty too.)
        let only_up = (first.members.iter()).all(|m| up.contains(&(m.0 as usize)));
        only_up
            && up.iter().all(|&i| {
                let g = self.n.groups[i].as_ref().unwrap();
                self.running(i)
                    .is_some_and(|v| v.id == id && up.iter().all(|&m| v.contains(NodeId(m as u32))))
                    && g.is_active()
                    && g.replay_backlog() == 0
            })
    }

    /// The final life: every node ever started starts (from its log, or as a joiner if its log
    /// stayed empty: an operator starts every configured process), no faults, until they
    /// settle; a stop is met with a restart of the stopped members (of everyone for
    /// `RestartShortOfAdopted`), at most [`ROUNDS`] times. `Err` on a safety failure or a hang
    /// with no stop.
    fn final_life(&mut self) -> Result<(), String> {
        let everyone: Vec<usize> = (0..self.plan.universe)
            .filter(|&i| self.started_ever[i])
            .collect();
        let everyone_logs = self.logs.clone();
        self.stats.final_joiners += (everyone.iter())
            .filter(|&&i| self.logs[i].is_empty())
            .count();
        self.begin(self.plan.lives.len());
        for &i in &everyone {
            self.start(i)?;
        }
        let mut round = 0;
        loop {
            let mut quiet = 0;
            let t0 = self.step;
            let stopped = loop {
                if self.settled() {
                    return self.carry_on(&everyone_logs);
                }
                let stopped: Vec<usize> = (0..self.plan.universe)
                    .filter(|&i| {
                        self.n.groups[i]
                            .as_ref()
                            .is_some_and(|g| g.stopped().is_some())
                    })
                    .collect();
                // A stop is acted on once the others had time to reach theirs.
                if stopped.is_empty() {
                    quiet = 0;
                } else {
                    quiet += 1;
                    if quiet > 3000 {
                        break stopped;
                    }
                }
                if self.step - t0 > ROUND_STEPS {
                    return Err(format!(
                        "final life: no view with everyone and no stop after {ROUND_STEPS} steps: {}; {}; the logs at the final life's start: {}",
                        group_sim::describe(&self.n.groups),
                        self.activity(),
                        logs_summary(&everyone_logs)
                    ));
                }
                self.step(false)?;
            };
            self.note_stops();
            let why = group_sim::describe(&self.n.groups);
            if round == ROUNDS {
                self.stats.unsettled = Some(why);
                return Ok(());
            }
            round += 1;
            self.stats.rounds += 1;
            let short = stopped.iter().any(|&i| {
                matches!(
                    self.n.groups[i].as_ref().and_then(|g| g.gms().stopped()),
                    Some(StopReason::RestartShortOfAdopted { .. })
                )
            });
            if short {
                self.stop_all();
                self.begin(self.plan.lives.len() + round);
                for &i in &everyone {
                    self.start(i)?;
                }
            } else {
                for &i in &stopped {
                    self.crash(i);
                    self.start(i)?;
                }
            }
        }
    }

    /// Per started node: whether it is active and wedged, its replay backlog, whether it is
    /// asked for a state, whom it asks for one, and its next position (for a hang's message).
    fn activity(&self) -> String {
        let s: Vec<String> = (self.n.groups.iter().enumerate())
            .filter_map(|(i, g)| g.as_ref().map(|g| (i, g)))
            .map(|(i, g)| {
                format!(
                    "n{i} active {} wedged {} backlog {} wants state {} from {:?} at {}",
                    g.is_active(),
                    g.gms().is_wedged(),
                    g.replay_backlog(),
                    g.state_wanted(),
                    g.state_sender(),
                    self.n.apps[i].next
                )
            })
            .collect();
        s.join("; ")
    }

    /// Everyone settled: new messages are delivered, at every member alike.
    fn carry_on(&mut self, at_start: &[Vec<u8>]) -> Result<(), String> {
        let before = self.chain.len();
        for _ in 0..300 {
            self.step(true)?;
        }
        for _ in 0..1500 {
            self.step(false)?;
        }
        let up: Vec<usize> = (0..self.plan.universe)
            .filter(|&i| self.n.groups[i].is_some())
            .collect();
        let end = self.n.apps[up[0]].next;
        if let Some(&i) = up.iter().find(|&&i| self.n.apps[i].next != end) {
            return Err(format!(
                "final life: n{i} ends at position {}, n{} at {end}",
                self.n.apps[i].next, up[0]
            ));
        }
        if self.chain.len() <= before {
            return Err(format!(
                "final life: nothing new delivered after the group settled: {}; the logs at the final life's start: {}",
                group_sim::describe(&self.n.groups),
                logs_summary(at_start)
            ));
        }
        Ok(())
    }
}

/// Runs `plan`: its faulty lives, then the final life. The figures, or the first failure.
fn run(plan: &Plan) -> Result<Stats, String> {
    let mut r = Run::new(plan);
    let out = (|| {
        for k in 0..plan.lives.len() {
            r.faulty_life(k)?;
        }
        r.final_life()?;
        r.check_life_logs()
            .map_err(|e| format!("end of the final life: {e}"))
    })();
    let _ = std::fs::remove_dir_all(&r.base);
    out.map(|()| r.stats)
}

/// A log's last installed view (id and members) and the decisions it logged after it, as
/// (the view each ends, rank).
type LogTail = (Option<(u64, Vec<NodeId>)>, Vec<(u64, u64)>);

/// The [`LogTail`] of a GMS log's bytes.
fn log_tail(bytes: &[u8]) -> LogTail {
    let (_, rec) = MemLog::open(bytes.to_vec());
    let mut last = None;
    let mut decided = Vec::new();
    for r in &rec.records {
        match r {
            Record::Installed { view, members } => {
                last = Some((*view, members.clone()));
                decided.clear();
            }
            Record::Decided { decision: d, .. } => decided.push((d.trim.view, d.rank)),
            _ => {}
        }
    }
    (last, decided)
}

/// Per node with a log: its last installed view (id and members) and the views of the
/// decisions it logged after it, with their ranks (for a failure message).
fn logs_summary(logs: &[Vec<u8>]) -> String {
    let s: Vec<String> = (logs.iter().enumerate())
        .filter(|(_, b)| !b.is_empty())
        .map(|(i, b)| {
            let (last, decided) = log_tail(b);
            format!("n{i}: installed {last:?}, decided (view, rank) {decided:?}")
        })
        .collect();
    s.join("; ")
}

/// The GMS logs at the start of `plan`'s final life (its faulty lives run, checked, and
/// nothing more): for a pinned plan to check that it still reaches the state it was pinned
/// for, since every protocol change may shift the simulator's schedules.
fn logs_at_final_life(plan: &Plan) -> Result<Vec<Vec<u8>>, String> {
    let mut r = Run::new(plan);
    let out = (|| {
        for k in 0..plan.lives.len() {
            r.faulty_life(k)?;
        }
        Ok(r.logs.clone())
    })();
    let _ = std::fs::remove_dir_all(&r.base);
    out
}

/// Runs a pinned `plan` once its final life's starting `logs` showed `reached` (the state it
/// was pinned for, named by `state`), failing with `missed`'s message and the logs' summary
/// when they no longer do.
fn check_pinned(plan: &Plan, seed: u64, logs: &[Vec<u8>], reached: bool, state: &str) {
    assert!(
        reached,
        "{}: {}",
        group_sim::missed(seed, state),
        logs_summary(logs)
    );
    check(plan).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
}

/// Whether `members` holds more than half of `of`.
fn majority(members: &[NodeId], of: &[NodeId]) -> bool {
    2 * of.iter().filter(|m| members.contains(m)).count() > of.len()
}

/// The last view a GMS log records as installed.
fn last_view(bytes: &[u8]) -> Option<u64> {
    let (_, rec) = MemLog::open(bytes.to_vec());
    (rec.records.iter().rev()).find_map(|r| match r {
        Record::Installed { view, .. } => Some(*view),
        _ => None,
    })
}

fn ev_strategy(steps: usize) -> impl Strategy<Value = Ev> {
    let step = 0..steps;
    prop_oneof![
        3 => (0usize..8, step.clone()).prop_map(|(node, step)| Ev::Crash { node, step }),
        2 => step.clone().prop_map(|step| Ev::CrashLeaderAtDecision { step }),
        3 => (0usize..8, step.clone()).prop_map(|(node, step)| Ev::Start { node, step }),
        2 => (0u8..=255, step.clone(), proptest::option::of(1usize..3000))
            .prop_map(|(side, step, len)| Ev::Partition { side: side_of(side), step, len }),
        1 => (0usize..8, step, 5u64..200)
            .prop_map(|(node, step, micros)| Ev::Delay { node, step, micros }),
    ]
}

/// A side of a partition: the mask's lowest 1–3 set bits (node 0 if none).
fn side_of(mask: u8) -> u8 {
    let mut side = 0u8;
    let want = 1 + (mask as u32 % 3);
    for b in 0..8 {
        if side.count_ones() < want && mask >> b & 1 == 1 {
            side |= 1 << b;
        }
    }
    side.max(1)
}

fn life_strategy() -> impl Strategy<Value = LifePlan> {
    (1500usize..6000).prop_flat_map(|steps| {
        (
            prop_oneof![
                3 => Just(Who::Everyone),
                2 => any::<u8>().prop_map(Who::Majority),
                2 => Just(Who::Behind),
                1 => any::<u8>().prop_map(Who::Minority),
                1 => any::<u8>().prop_map(Who::Mask),
            ],
            proptest::option::of(0usize..400),
            proptest::option::weighted(
                0.25,
                (
                    any::<u8>().prop_map(side_of),
                    proptest::option::of(0..steps),
                ),
            ),
            proptest::collection::vec(ev_strategy(steps), 1..8),
            prop_oneof![
                1 => Just(Stop::End),
                2 => (0..steps / 2, any::<bool>()).prop_map(|(from, ran)| Stop::Decision { from, ran }),
                2 => (0..steps / 2, any::<bool>(), any::<bool>())
                    .prop_map(|(from, ran, join)| Stop::Install { from, ran, join }),
            ],
        )
            .prop_map(move |(who, in_turn, partitioned, events, stop)| LifePlan {
                who,
                in_turn,
                partitioned,
                events,
                steps,
                stop,
            })
    })
}

fn plan_strategy() -> impl Strategy<Value = Plan> {
    (
        any::<u64>(),
        5usize..=8,
        3usize..=5,
        proptest::collection::vec(life_strategy(), 1..=3),
    )
        .prop_map(|(seed, universe, initial, lives)| Plan {
            seed,
            universe,
            initial,
            lives,
        })
}

/// Runs `plan` and prints its figures (a failure is the error, with the plan).
fn check(plan: &Plan) -> Result<(), String> {
    let t = std::time::Instant::now();
    match run(plan) {
        Ok(s) => {
            eprintln!(
                "lives seed {}: {:?} in {:.1} s; unsettled: {}",
                plan.seed,
                Stats {
                    unsettled: None,
                    ..s.clone()
                },
                t.elapsed().as_secs_f64(),
                s.unsettled.as_deref().unwrap_or("no")
            );
            Ok(())
        }
        Err(e) => {
            // Printed at once: a soak's shrinking can take long before proptest reports.
            let e = format!("{e}\n  plan: {plan:?}");
            eprintln!("lives FAILED: {e}");
            Err(e)
        }
    }
}

proptest! {
    // Shrinking mostly moves the seed (another schedule): a few rounds only.
    #![proptest_config(ProptestConfig {
        max_shrink_iters: 16,
        ..ProptestConfig::with_cases(proptest_cases(3))
    })]

    /// Random lives with every kind of fault and stop: every check of the module docs after
    /// every step, and the final life's settling.
    #[test]
    fn restart_lives_keep_one_history(plan in plan_strategy()) {
        check(&plan).map_err(TestCaseError::fail)?;
    }
}

/// One plan drawn per seed (the proptest's strategy, from a generator seeded with it).
#[test]
fn restart_lives_seed_sweep() {
    check_seeds("restart_lives_seed_sweep", 2, |seed| {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
        let mut runner = TestRunner::new_with_rng(RunnerConfig::default(), rng);
        let plan = plan_strategy().new_tree(&mut runner).unwrap().current();
        check(&Plan { seed, ..plan })
    });
}

/// The sweep's seed 14 (as drawn before `Stop::Install` had its `join` flag): life 0 removes
/// 1 and 2 (cut off) from view 0 = 0–4 and stops as a member installs view 1 = [0, 3, 4]
/// while 3 and 4 hold only the decision; life 1 restarts everyone in turn with 0 cut off, and
/// 3 and 4 install the fitted restart view 1 = [3, 4], two of view 0's five. The view check
/// first failed here; the view is the s18 rule's (a majority of the adopted decision's next
/// view, which held a majority of view 0), and the check now follows that chain.
#[test]
fn regression_sweep_seed_14_a_fitted_restart_view_holds_a_majority_of_the_adopted_next_view() {
    let plan = Plan {
        seed: 14,
        universe: 8,
        initial: 5,
        lives: vec![
            LifePlan {
                who: Who::Everyone,
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::Crash {
                        node: 6,
                        step: 2000,
                    },
                    Ev::Partition {
                        side: 1,
                        step: 4576,
                        len: None,
                    },
                    Ev::CrashLeaderAtDecision { step: 2726 },
                    Ev::Partition {
                        side: 6,
                        step: 2407,
                        len: None,
                    },
                    Ev::Crash {
                        node: 7,
                        step: 4621,
                    },
                ],
                steps: 5734,
                stop: Stop::Install {
                    from: 2823,
                    ran: false,
                    join: false,
                },
            },
            LifePlan {
                who: Who::Everyone,
                in_turn: Some(48),
                partitioned: None,
                events: vec![
                    Ev::CrashLeaderAtDecision { step: 190 },
                    Ev::Partition {
                        side: 1,
                        step: 101,
                        len: None,
                    },
                ],
                steps: 4617,
                stop: Stop::Install {
                    from: 903,
                    ran: true,
                    join: false,
                },
            },
            LifePlan {
                who: Who::Everyone,
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::CrashLeaderAtDecision { step: 2230 },
                    Ev::CrashLeaderAtDecision { step: 153 },
                    Ev::CrashLeaderAtDecision { step: 1378 },
                    Ev::Start { node: 2, step: 945 },
                    Ev::Crash {
                        node: 7,
                        step: 2253,
                    },
                ],
                steps: 2405,
                stop: Stop::Install {
                    from: 109,
                    ran: false,
                    join: false,
                },
            },
        ],
    };
    let stats = run(&plan).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        stats.fitted > 0,
        "{}",
        group_sim::missed(14, "a fitted restart view short of view 0")
    );
}

/// Found by the soak (`SQUALL_PROPTEST_CASES=128`, s27), minimised by dropping events and
/// simplifying lives while it still hung: the final life never settled and nobody stopped.
/// Life 0: view 0 = 0–4, node 5 joins. Life 1: 2–5 restart; 0, 1 and 3 are cut off at step
/// 4278, not healed. Life 2: 3, 4, 5 and 0 restart, stopped at the first install while
/// another member holds the decision: view 4 = [4, 5, 0, 3], whose joiners 0 and 3 never log
/// it. In the final life 4 and 5 restart view 4 counting their majority without 0 and 3 (the
/// view's joiners that never logged it), and the group settles. See `docs/MEMBERSHIP.md`,
/// seventy-fifth part, "Found" and "s27 follow-up: the first and third hangs".
#[test]
fn regression_soak_final_life_hangs_with_two_members_restarting_and_the_rest_joining() {
    let plan = Plan {
        seed: 5680626892372612811,
        universe: 8,
        initial: 5,
        lives: vec![
            LifePlan {
                who: Who::Everyone,
                in_turn: None,
                partitioned: None,
                events: vec![Ev::Start { node: 5, step: 528 }],
                steps: 1745,
                stop: Stop::End,
            },
            LifePlan {
                who: Who::Majority(158),
                in_turn: None,
                partitioned: None,
                events: vec![Ev::Partition {
                    side: 11,
                    step: 4278,
                    len: Some(2517),
                }],
                steps: 4944,
                stop: Stop::End,
            },
            LifePlan {
                who: Who::Majority(219),
                in_turn: None,
                partitioned: None,
                events: vec![],
                steps: 5571,
                stop: Stop::Install {
                    from: 1803,
                    ran: false,
                    join: false,
                },
            },
        ],
    };
    let stats = run(&plan).unwrap_or_else(|e| panic!("{e}\n  plan: {plan:?}"));
    assert!(
        stats.joiners_aside > 0,
        "{}",
        group_sim::missed(
            plan.seed,
            "a restart of a view whose joiners never logged it"
        )
    );
}

/// Found by the 1024-case soak of the final harness (s27, the 97th case, shrunk 16 rounds):
/// one faulty life, then the final life hangs with no stop. View 0 = 0–2, cut off from each
/// other at the start, 1 crashes, 6 joins, 0 is cut off, every process stops. In the final
/// life 0 restarts view 1 = [0, 2] waiting for 2, while 2 and 6 restart view 2 = [0, 2, 6]
/// waiting for 0. Fixed (s27 follow-up, "the second hang" in `docs/MEMBERSHIP.md`,
/// seventy-fifth part): 2 and 6 count 0, linked but restarting the older view, out of their
/// restart after the suspicion timeout and install view 3 = [2, 6]; 0 then joins again.
#[test]
fn regression_soak_final_life_hangs_with_a_member_one_view_behind_and_the_others_waiting_for_it() {
    let plan = Plan {
        seed: 15608638797826990054,
        universe: 7,
        initial: 3,
        lives: vec![LifePlan {
            who: Who::Everyone,
            in_turn: None,
            partitioned: Some((37, Some(1097))),
            events: vec![
                Ev::CrashLeaderAtDecision { step: 1269 },
                Ev::CrashLeaderAtDecision { step: 2473 },
                Ev::CrashLeaderAtDecision { step: 1948 },
                Ev::Start {
                    node: 6,
                    step: 1565,
                },
                Ev::Crash { node: 1, step: 964 },
                Ev::Partition {
                    side: 1,
                    step: 2083,
                    len: Some(1532),
                },
            ],
            steps: 2597,
            stop: Stop::End,
        }],
    };
    check(&plan).unwrap_or_else(|e| panic!("{e}"));
}

/// Found by a 512-case soak of the final harness (s27, the 147th case; not shrunk): the final
/// life hung with no stop. The logs of view 0 = 0–2 end at view 0, 0's with a restart
/// ballot's decision that fails 2 and admits 4 and 5 (view 1 = [0, 1, 4, 5]); 4 and 5 never
/// logged anything, so the final life, which then started only nodes with a log, did not start
/// them. 0 and 1 restarted view 1 waiting for the others, 2 joined again. Now the final life
/// starts every node ever started, 4 and 5 as joiners, and the group settles. See
/// `docs/MEMBERSHIP.md`, seventy-fifth part, "Found" and "s27 follow-up: the first and third
/// hangs". Re-seeded in s30 (hundred-and-first part): with suspicions counted per view, seed
/// 4963811227339958902 no longer reached a final life starting such a joiner; seed 1 does.
#[test]
fn regression_soak_final_life_hangs_restarting_a_view_whose_joiners_never_logged() {
    let plan = Plan {
        seed: 1,
        universe: 7,
        initial: 3,
        lives: vec![
            LifePlan {
                who: Who::Everyone,
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::CrashLeaderAtDecision { step: 4688 },
                    Ev::Start {
                        node: 2,
                        step: 2429,
                    },
                ],
                steps: 5509,
                stop: Stop::Decision {
                    from: 1342,
                    ran: false,
                },
            },
            LifePlan {
                who: Who::Mask(100),
                in_turn: Some(16),
                partitioned: None,
                events: vec![Ev::Crash {
                    node: 3,
                    step: 1373,
                }],
                steps: 4402,
                stop: Stop::End,
            },
            LifePlan {
                who: Who::Mask(163),
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::Start {
                        node: 5,
                        step: 1141,
                    },
                    Ev::CrashLeaderAtDecision { step: 1122 },
                    Ev::Start { node: 4, step: 174 },
                    Ev::Partition {
                        side: 21,
                        step: 975,
                        len: Some(38),
                    },
                    Ev::CrashLeaderAtDecision { step: 3398 },
                    Ev::Start { node: 5, step: 377 },
                ],
                steps: 5069,
                stop: Stop::Install {
                    from: 1605,
                    ran: true,
                    join: true,
                },
            },
        ],
    };
    let stats = run(&plan).unwrap_or_else(|e| panic!("{e}\n  plan: {plan:?}"));
    assert!(
        stats.final_joiners > 0,
        "{}",
        group_sim::missed(
            plan.seed,
            "a final life starting a joiner whose log stayed empty"
        )
    );
}

/// Found by a 128-case soak after the second hang's fix (s27 follow-up, its 108th case; not
/// shrunk). The final life hung with no stop: 3 restarts view 4 = [2, 3, 4] holding its
/// decision for view 4 (rank 1, `Fail(2)`); 4 restarts view 5 = [3, 4] and publishes the
/// decision it installed that with, the same rank-1 `Fail(2)`. 2, the rank-0 member,
/// re-publishes its old promise (1, 0) as a proposal at construction; 3 follows it in this life
/// (`RestartState::ballots`), so `ballot_may_decide` held, `below_promise` skipped 4's row, and
/// 3 waited, while 4 waited for 3 (a majority of [3, 4] needs both). 2 joins again (it reads
/// 4's view 5 without it), so the ballot it re-published never decides. Fixed: a followed
/// ballot whose leader asks to join, still at view 4 and showing no decision for it ranked at
/// or above the ballot, is dead (`docs/MEMBERSHIP.md`, seventy-fifth part, "s27 follow-up: two
/// hangs behind an old promise").
#[test]
fn regression_soak_final_life_hangs_with_a_member_behind_following_a_re_published_old_promise() {
    let plan = Plan {
        seed: 16198638151833791833,
        universe: 5,
        initial: 5,
        lives: vec![
            LifePlan {
                who: Who::Everyone,
                in_turn: None,
                partitioned: Some((1, Some(4749))),
                events: vec![
                    Ev::CrashLeaderAtDecision { step: 3163 },
                    Ev::Crash { node: 4, step: 201 },
                    Ev::Crash {
                        node: 1,
                        step: 1530,
                    },
                    Ev::Crash {
                        node: 0,
                        step: 4450,
                    },
                    Ev::Delay {
                        node: 4,
                        step: 4568,
                        micros: 11,
                    },
                ],
                steps: 4945,
                stop: Stop::Install {
                    from: 1439,
                    ran: false,
                    join: false,
                },
            },
            LifePlan {
                who: Who::Majority(157),
                in_turn: Some(292),
                partitioned: None,
                events: vec![
                    Ev::CrashLeaderAtDecision { step: 2777 },
                    Ev::Crash { node: 2, step: 781 },
                    Ev::CrashLeaderAtDecision { step: 3906 },
                ],
                steps: 4669,
                stop: Stop::Install {
                    from: 1280,
                    ran: true,
                    join: false,
                },
            },
            LifePlan {
                who: Who::Behind,
                in_turn: None,
                partitioned: Some((2, Some(1205))),
                events: vec![
                    Ev::Delay {
                        node: 5,
                        step: 958,
                        micros: 115,
                    },
                    Ev::Delay {
                        node: 0,
                        step: 1029,
                        micros: 129,
                    },
                    Ev::Crash {
                        node: 6,
                        step: 1358,
                    },
                    Ev::CrashLeaderAtDecision { step: 1908 },
                ],
                steps: 2062,
                stop: Stop::Install {
                    from: 97,
                    ran: true,
                    join: false,
                },
            },
        ],
    };
    check(&plan).unwrap_or_else(|e| panic!("{e}"));
}

/// A second plan of the same defect as
/// [`regression_soak_final_life_hangs_with_a_member_behind_following_a_re_published_old_promise`],
/// from a second 128-case soak after the second hang's fix (its 28th case, not shrunk). 1
/// restarts view 0 = [0, 1, 2] holding its decision for view 0 (ballot (1, 1), `Fail(0)`); it
/// follows 0's re-published old promise, ballot (2, 0), so `below_promise` skipped 2's row,
/// which restarts view 1 = [1, 2] with that same decision. 2 waited for 1, and 0 joins again.
/// Fixed likewise (`docs/MEMBERSHIP.md`, seventy-fifth part, "s27 follow-up: two hangs behind
/// an old promise").
#[test]
fn regression_soak_final_life_hangs_with_a_member_behind_following_a_re_published_promise_at_view_0()
 {
    let plan = Plan {
        seed: 13110706211736530059,
        universe: 6,
        initial: 3,
        lives: vec![
            LifePlan {
                who: Who::Behind,
                in_turn: Some(399),
                partitioned: None,
                events: vec![Ev::Crash {
                    node: 5,
                    step: 2030,
                }],
                steps: 5347,
                stop: Stop::Install {
                    from: 699,
                    ran: true,
                    join: true,
                },
            },
            LifePlan {
                who: Who::Everyone,
                in_turn: None,
                partitioned: Some((1, None)),
                events: vec![
                    Ev::Start { node: 7, step: 63 },
                    Ev::Start {
                        node: 7,
                        step: 2425,
                    },
                    Ev::Start {
                        node: 2,
                        step: 2308,
                    },
                    Ev::CrashLeaderAtDecision { step: 410 },
                    Ev::Partition {
                        side: 6,
                        step: 1705,
                        len: Some(1946),
                    },
                    Ev::Start {
                        node: 7,
                        step: 1590,
                    },
                    Ev::Crash { node: 4, step: 366 },
                ],
                steps: 2918,
                stop: Stop::Install {
                    from: 1000,
                    ran: true,
                    join: false,
                },
            },
            LifePlan {
                who: Who::Behind,
                in_turn: Some(32),
                partitioned: None,
                events: vec![
                    Ev::Start {
                        node: 2,
                        step: 1937,
                    },
                    Ev::Start {
                        node: 5,
                        step: 3260,
                    },
                    Ev::Start {
                        node: 1,
                        step: 3658,
                    },
                    Ev::CrashLeaderAtDecision { step: 1474 },
                    Ev::CrashLeaderAtDecision { step: 1933 },
                ],
                steps: 4850,
                stop: Stop::Decision {
                    from: 230,
                    ran: false,
                },
            },
        ],
    };
    check(&plan).unwrap_or_else(|e| panic!("{e}"));
}

/// A final-life hang found by a 64-case soak at the end of s27 on the code with the first,
/// second and third hangs' fixes, and fixed by the fourth's (`docs/MEMBERSHIP.md`,
/// seventy-fifth part, "s27 follow-up: two hangs behind an old promise"; its proptest shrink
/// candidate is in `sim_restart_lives.proptest-regressions`). At the final life's start view
/// 0 = [0..4]: three members hold decisions for view 0 of ranks 1 and 2 and never logged view
/// 1; one member installed view 1 and logged no decision for it. The members at view 0 waited
/// for the one at view 1 and it waited for them; nobody stopped.
#[test]
fn regression_soak_final_life_hangs_with_members_behind_holding_decisions_of_two_ranks() {
    let plan = Plan {
        seed: 2194239839370328972,
        universe: 8,
        initial: 5,
        lives: vec![
            LifePlan {
                who: Who::Majority(152),
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::CrashLeaderAtDecision { step: 3958 },
                    Ev::CrashLeaderAtDecision { step: 1319 },
                    Ev::Crash {
                        node: 7,
                        step: 2708,
                    },
                    Ev::CrashLeaderAtDecision { step: 232 },
                    Ev::Partition {
                        side: 1,
                        step: 216,
                        len: Some(2044),
                    },
                    Ev::CrashLeaderAtDecision { step: 3173 },
                    Ev::CrashLeaderAtDecision { step: 1419 },
                ],
                steps: 4759,
                stop: Stop::Install {
                    from: 237,
                    ran: false,
                    join: false,
                },
            },
            LifePlan {
                who: Who::Minority(120),
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::Crash {
                        node: 0,
                        step: 1678,
                    },
                    Ev::Start {
                        node: 1,
                        step: 2396,
                    },
                    Ev::CrashLeaderAtDecision { step: 1552 },
                    Ev::CrashLeaderAtDecision { step: 235 },
                    Ev::Crash { node: 5, step: 540 },
                    Ev::CrashLeaderAtDecision { step: 408 },
                ],
                steps: 3979,
                stop: Stop::End,
            },
            LifePlan {
                who: Who::Behind,
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::Start {
                        node: 5,
                        step: 3180,
                    },
                    Ev::Partition {
                        side: 3,
                        step: 1923,
                        len: Some(756),
                    },
                    Ev::Start {
                        node: 5,
                        step: 3134,
                    },
                ],
                steps: 3702,
                stop: Stop::Decision {
                    from: 1744,
                    ran: false,
                },
            },
        ],
    };
    check(&plan).unwrap_or_else(|e| panic!("{e}"));
}

// s28: plans found by the long soaks (`docs/MEMBERSHIP.md`, seventy-ninth part).

/// The plan seen and not kept at the end of s27 (a 128-case soak on a branch without the first
/// hang's fix; its full plan recovered from that soak's log): view [1, 2, 0, 5], whose member 0's
/// log ends at view 0 and whose member 5 never logged a view, restarted by 1 and 2 alone.
#[test]
fn regression_soak_s27_plan_with_a_view_member_whose_log_is_empty() {
    let plan = Plan {
        seed: 2807266250841339666,
        universe: 8,
        initial: 3,
        lives: vec![
            LifePlan {
                who: Who::Everyone,
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::Crash {
                        node: 0,
                        step: 1007,
                    },
                    Ev::Partition {
                        side: 1,
                        step: 137,
                        len: None,
                    },
                    Ev::Start { node: 0, step: 461 },
                    Ev::CrashLeaderAtDecision { step: 1071 },
                ],
                steps: 1971,
                stop: Stop::Decision {
                    from: 271,
                    ran: false,
                },
            },
            LifePlan {
                who: Who::Majority(145),
                in_turn: Some(155),
                partitioned: None,
                events: vec![
                    Ev::Start {
                        node: 2,
                        step: 2714,
                    },
                    Ev::Start {
                        node: 5,
                        step: 1348,
                    },
                    Ev::Crash { node: 0, step: 928 },
                    Ev::Start {
                        node: 0,
                        step: 2076,
                    },
                    Ev::Partition {
                        side: 3,
                        step: 3203,
                        len: Some(204),
                    },
                    Ev::Crash {
                        node: 3,
                        step: 1767,
                    },
                    Ev::Crash {
                        node: 6,
                        step: 2752,
                    },
                ],
                steps: 3233,
                stop: Stop::Install {
                    from: 417,
                    ran: true,
                    join: true,
                },
            },
            LifePlan {
                who: Who::Mask(5),
                in_turn: Some(334),
                partitioned: None,
                events: vec![
                    Ev::Start {
                        node: 0,
                        step: 2494,
                    },
                    Ev::Start {
                        node: 3,
                        step: 4823,
                    },
                    Ev::Partition {
                        side: 6,
                        step: 4116,
                        len: Some(1497),
                    },
                    Ev::CrashLeaderAtDecision { step: 4026 },
                ],
                steps: 5215,
                stop: Stop::Install {
                    from: 1866,
                    ran: true,
                    join: false,
                },
            },
        ],
    };
    check(&plan).unwrap_or_else(|e| panic!("{e}"));
}

/// Found by the s28 seed sweep (`SQUALL_SEED_BASE=10000`, seed 10236): the final life froze.
/// At its start 0's log ends at view 3 = [1, 2, 0, 3, 4] (it ran it in life 2; 3 and 4 are its
/// joiners, their logs empty), and 1's and 2's at view 2 = [1, 2, 0] holding the decision that
/// made view 3. 0 restarts at view 3 and wedges it (its logged counts); 1 completes the
/// restart of view 2 and runs view 3 again, as decided; 0 and 2 then join that view. 1 read
/// 0's restart wedge block as a wedge of its running view 3 and wedged, and so did everyone,
/// with nothing to propose: every joiner waited for a state 1 no longer served, with no stop.
/// Fixed (`Gms::restart_wedge`; `docs/MEMBERSHIP.md`, seventy-ninth part).
#[test]
fn regression_soak_final_life_freezes_a_running_view_on_a_restart_wedge_of_its_number() {
    let plan = Plan {
        seed: 10236,
        universe: 5,
        initial: 3,
        lives: vec![
            LifePlan {
                who: Who::Behind,
                in_turn: Some(279),
                partitioned: None,
                events: vec![Ev::Partition {
                    side: 17,
                    step: 2533,
                    len: Some(943),
                }],
                steps: 3280,
                stop: Stop::Install {
                    from: 467,
                    ran: false,
                    join: false,
                },
            },
            LifePlan {
                who: Who::Everyone,
                in_turn: Some(340),
                partitioned: None,
                events: vec![Ev::Delay {
                    node: 7,
                    step: 519,
                    micros: 125,
                }],
                steps: 5111,
                stop: Stop::Decision {
                    from: 2286,
                    ran: true,
                },
            },
            LifePlan {
                who: Who::Majority(17),
                in_turn: Some(43),
                partitioned: None,
                events: vec![
                    Ev::Crash {
                        node: 0,
                        step: 1965,
                    },
                    Ev::Delay {
                        node: 5,
                        step: 848,
                        micros: 110,
                    },
                    Ev::Start {
                        node: 1,
                        step: 1117,
                    },
                    Ev::Start {
                        node: 4,
                        step: 1147,
                    },
                    Ev::Crash { node: 3, step: 425 },
                    Ev::Start { node: 3, step: 595 },
                ],
                steps: 2154,
                stop: Stop::Decision {
                    from: 139,
                    ran: true,
                },
            },
        ],
    };
    check(&plan).unwrap_or_else(|e| panic!("{e}"));
}

/// Found by the s28 proptest soak (`PROPTEST_RNG_SEED=3`, 512 cases, its 222nd): the final
/// life hung with no stop. At its start 1's log ends at view 1 = [0, 1, 2] (it ran it in life
/// 2), 0's and 2's at view 0 holding the restart's decision that made view 1. 2 completes the
/// restart of view 0 and runs view 1 again, as decided (from its replay: active); 0 and 1,
/// restarting at view 1, read it running and join again by transfer. Each asked the other (an
/// initial member counts as a state holder by default), and neither ever served. Fixed
/// (`Transfer::poll_joiner` asks a member that announced itself active first; see
/// `docs/MEMBERSHIP.md`, seventy-ninth part).
#[test]
fn regression_soak_final_life_hangs_with_two_rejoiners_asking_each_other_for_the_state() {
    let plan = Plan {
        seed: 7429178989552063005,
        universe: 6,
        initial: 3,
        lives: vec![
            LifePlan {
                who: Who::Everyone,
                in_turn: None,
                partitioned: Some((2, Some(1930))),
                events: vec![
                    Ev::Partition {
                        side: 10,
                        step: 1829,
                        len: None,
                    },
                    Ev::Partition {
                        side: 1,
                        step: 1720,
                        len: Some(2701),
                    },
                    Ev::Delay {
                        node: 6,
                        step: 1691,
                        micros: 130,
                    },
                    Ev::Partition {
                        side: 6,
                        step: 3563,
                        len: Some(2213),
                    },
                    Ev::Crash { node: 2, step: 199 },
                ],
                steps: 4067,
                stop: Stop::End,
            },
            LifePlan {
                who: Who::Minority(228),
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::Crash {
                        node: 7,
                        step: 1384,
                    },
                    Ev::Partition {
                        side: 1,
                        step: 305,
                        len: Some(622),
                    },
                    Ev::CrashLeaderAtDecision { step: 1738 },
                ],
                steps: 2846,
                stop: Stop::Decision {
                    from: 1131,
                    ran: false,
                },
            },
            LifePlan {
                who: Who::Behind,
                in_turn: Some(296),
                partitioned: None,
                events: vec![
                    Ev::Crash { node: 4, step: 428 },
                    Ev::CrashLeaderAtDecision { step: 956 },
                    Ev::CrashLeaderAtDecision { step: 1449 },
                ],
                steps: 1833,
                stop: Stop::Install {
                    from: 225,
                    ran: false,
                    join: false,
                },
            },
        ],
    };
    check(&plan).unwrap_or_else(|e| panic!("{e}"));
}

/// Found by the s28 seed sweep (seed 10934; `docs/MEMBERSHIP.md`, seventy-ninth part, "hang
/// C"): the final life hung with no stop. View 0 = [0, 1, 2, 3]; 3's log ended at view 1 = [1,
/// 2, 3] (rank-1 decision `Fail(0)`), 1's and 2's at view 0 holding that decision and a promise
/// of restart ballot (1, 0), 0's at view 0 holding that ballot's decision `[Fail(0), Fail(3)]`.
/// Since changes after it was pinned (not bisected) this plan's schedule no longer reaches
/// that state (its final life starts from other logs and settles, with or without the fix). The shape is pinned by
/// `regression_hang_c_a_member_one_view_ahead_on_a_dead_branch_is_counted_out` (eighty-ninth
/// part); this plan stays as a soak plan.
#[test]
fn regression_soak_final_life_hangs_with_a_member_one_view_ahead_on_a_skipped_view() {
    let plan = Plan {
        seed: 10934,
        universe: 5,
        initial: 4,
        lives: vec![
            LifePlan {
                who: Who::Everyone,
                in_turn: None,
                partitioned: Some((50, Some(15))),
                events: vec![
                    Ev::Crash {
                        node: 5,
                        step: 2884,
                    },
                    Ev::Partition {
                        side: 2,
                        step: 3836,
                        len: Some(981),
                    },
                    Ev::Crash {
                        node: 0,
                        step: 4553,
                    },
                ],
                steps: 5949,
                stop: Stop::Install {
                    from: 1102,
                    ran: true,
                    join: false,
                },
            },
            LifePlan {
                who: Who::Behind,
                in_turn: Some(352),
                partitioned: None,
                events: vec![
                    Ev::Delay {
                        node: 1,
                        step: 1448,
                        micros: 130,
                    },
                    Ev::Crash {
                        node: 7,
                        step: 1003,
                    },
                    Ev::Partition {
                        side: 35,
                        step: 107,
                        len: None,
                    },
                    Ev::Partition {
                        side: 5,
                        step: 1034,
                        len: Some(299),
                    },
                    Ev::CrashLeaderAtDecision { step: 711 },
                    Ev::CrashLeaderAtDecision { step: 750 },
                ],
                steps: 1666,
                stop: Stop::Decision {
                    from: 300,
                    ran: false,
                },
            },
            LifePlan {
                who: Who::Behind,
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::Delay {
                        node: 6,
                        step: 869,
                        micros: 180,
                    },
                    Ev::CrashLeaderAtDecision { step: 1116 },
                    Ev::Start { node: 4, step: 293 },
                    Ev::Crash {
                        node: 3,
                        step: 1983,
                    },
                    Ev::Partition {
                        side: 2,
                        step: 2726,
                        len: None,
                    },
                ],
                steps: 4554,
                stop: Stop::Decision {
                    from: 2228,
                    ran: false,
                },
            },
        ],
    };
    check(&plan).unwrap_or_else(|e| panic!("{e}"));
}

// Log-level invariants of the total restart (s28, `docs/MEMBERSHIP.md`, eighty-sixth part):
// checked over every node's GMS log records, across lives, after every step (the records a
// log appended since the last step) and at the end of every life (the chosen values).
// INV-1 and INV-2 are counted (the fittings break them by design); `SQUALL_STRICT_CHOSEN=1`
// fails on INV-2 instead.

/// The figures of the log-level invariants that are counted, not failed (summed over runs).
#[derive(Clone, Debug, Default)]
struct LogCounts {
    /// INV-1: contents (members, shards, verdict) installed under a view id that some log
    /// already holds installed with other contents, the first content's verdict not lost
    /// (the fittings' renumberings).
    renumbered: usize,
    /// INV-1's exception: other contents installed under the id of a view whose first
    /// content's verdict is lost (the lost shard's reused number).
    lost_reused: usize,
    /// INV-3's refinement: a decision for a view ranked below the log's promise for it,
    /// logged as a catch-up (its `Installed` of the next view appended with it).
    catch_up_below_promise: usize,
    /// INV-4: restart views that hold a majority of the view before only through an adopted
    /// decision's next view (s18, the fitting).
    fitted: usize,
    /// INV-4: restart views that hold a majority of the members of the view before whose
    /// logs record it (s27: its joiners never logged it).
    joiners_aside: usize,
    /// INV-4: installs with no earlier view of the log to chain to (a joiner's first view,
    /// or the first after a `StateDropped`).
    joined: usize,
    /// INV-2: view ids whose decisions ranked at or above the lowest rank a majority of
    /// one of its member lists logged are not all equal (strict with `SQUALL_STRICT_CHOSEN`).
    chosen_changed: usize,
    /// INV-2: (view id, rank) pairs logged with two contents (strict likewise).
    same_rank_differs: usize,
}

/// An installed view as a log records it: its `Installed`, with the `Shards` and `Verdict`
/// logged right before it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Content {
    members: Vec<NodeId>,
    shards: Option<Vec<Vec<NodeId>>>,
    verdict: Option<Inadequate>,
}

impl Content {
    fn lost(&self) -> bool {
        self.verdict.as_ref().is_some_and(|v| v.lost)
    }
}

/// What the log checks carry across steps and lives.
#[derive(Default)]
struct LogState {
    /// Per node: the log's length in bytes and in records when last read, and its records.
    len: Vec<usize>,
    count: Vec<usize>,
    recs: Vec<Vec<Record>>,
    /// View id → the contents installed under it in any log, in the order first seen.
    installs: BTreeMap<u64, Vec<Content>>,
    /// INV-2's findings already counted (view ids; view id and rank).
    changed: BTreeSet<u64>,
    same: BTreeSet<(u64, u64)>,
}

impl LogState {
    /// Whether `c` is a dead branch of view `v`: a later content (not of a lost view) was
    /// installed under `v` after it.
    fn dead(&self, v: u64, c: &Content) -> bool {
        let Some(list) = self.installs.get(&v) else {
            return false;
        };
        !c.lost()
            && list
                .iter()
                .position(|x| x == c)
                .is_some_and(|k| k + 1 < list.len())
    }
}

/// A logged decision: the node, the decision, its holders.
type Logged<'a> = (usize, &'a Decision, &'a Option<Vec<bool>>);

/// Whether `SQUALL_STRICT_CHOSEN=1` makes INV-2 fail instead of counting.
fn strict_chosen() -> bool {
    std::env::var("SQUALL_STRICT_CHOSEN").is_ok_and(|v| v == "1")
}

impl Run<'_> {
    /// The log checks of one step: every record a log appended since the last step, in log
    /// order, against INV-2′, INV-3, INV-4 and INV-5 (strict) and INV-1 (counted); the contents it
    /// installed are noted after every log is checked (a renumbering counts from the next
    /// step on).
    fn check_logs(&mut self) -> Result<(), String> {
        let u = self.plan.universe;
        let st = &mut self.log_state;
        st.len.resize(u, 0);
        st.count.resize(u, 0);
        st.recs.resize(u, Vec::new());
        let mut changed = Vec::new();
        for j in 0..u {
            let len = match &self.n.groups[j] {
                Some(g) => g.gms().log().bytes().len(),
                None => self.logs[j].len(),
            };
            if len == self.log_state.len[j] {
                continue;
            }
            let recs = self.records_of(j);
            let st = &mut self.log_state;
            let from = if len > st.len[j] && recs.len() >= st.count[j] {
                st.count[j]
            } else {
                recs.len()
            };
            st.len[j] = len;
            st.count[j] = recs.len();
            st.recs[j] = recs;
            changed.push((j, from));
        }
        let mut fresh = Vec::new();
        for (j, from) in changed {
            fresh.extend(scan_log(&self.log_state, j, from, &mut self.stats.log)?);
        }
        for (v, c) in fresh {
            let list = self.log_state.installs.entry(v).or_default();
            if list.contains(&c) {
                continue;
            }
            match list.first() {
                Some(first) if first.lost() => self.stats.log.lost_reused += 1,
                Some(_) => self.stats.log.renumbered += 1,
                None => {}
            }
            list.push(c);
        }
        Ok(())
    }

    /// The checks at the end of a life: the step's log checks, then INV-2 over every log.
    fn check_life_logs(&mut self) -> Result<(), String> {
        self.check_logs()?;
        let st = &mut self.log_state;
        let strict = strict_chosen();
        // Per view id: (node, decision, holders) of every logged decision ending it.
        let mut decided: BTreeMap<u64, Vec<Logged<'_>>> = BTreeMap::new();
        for (j, recs) in st.recs.iter().enumerate() {
            for r in recs {
                if let Record::Decided { decision, holders } = r {
                    decided
                        .entry(decision.trim.view)
                        .or_default()
                        .push((j, decision, holders));
                }
            }
        }
        let same = |a: &Logged<'_>, b: &Logged<'_>| {
            a.1.changes == b.1.changes
                && a.1.trim == b.1.trim
                && match (a.2, b.2) {
                    (Some(x), Some(y)) => x == y,
                    _ => true,
                }
        };
        for (&l, ds) in &decided {
            for (k, a) in ds.iter().enumerate() {
                if let Some(b) = ds[k + 1..]
                    .iter()
                    .find(|b| b.1.rank == a.1.rank && !same(a, b))
                    && st.same.insert((l, a.1.rank))
                {
                    if strict {
                        return Err(format!(
                            "INV-2: view {l}'s decisions of rank {} differ: n{} logged {a:?}, n{} {b:?}",
                            a.1.rank, a.0, b.0
                        ));
                    }
                    self.stats.log.same_rank_differs += 1;
                }
            }
            // The lowest rank logged by a majority of one of the view's member lists.
            let chosen = (st.installs.get(&l).into_iter().flatten())
                .filter_map(|c| {
                    let mut ranks: Vec<u64> = ds.iter().map(|d| d.1.rank).collect();
                    ranks.sort_unstable();
                    ranks.dedup();
                    ranks.into_iter().find(|&r| {
                        let by: Vec<NodeId> = (ds.iter())
                            .filter(|d| d.1.rank == r)
                            .map(|d| NodeId(d.0 as u32))
                            .collect();
                        majority(&by, &c.members)
                    })
                })
                .min();
            let Some(r) = chosen else {
                continue;
            };
            let Some(reference) = ds.iter().find(|d| d.1.rank == r) else {
                continue;
            };
            if let Some(b) = ds.iter().find(|b| b.1.rank >= r && !same(reference, b))
                && st.changed.insert(l)
            {
                if strict {
                    return Err(format!(
                        "INV-2: view {l}'s decision was chosen at rank {r} ({reference:?}), but n{} logged {b:?}",
                        b.0
                    ));
                }
                self.stats.log.chosen_changed += 1;
            }
        }
        Ok(())
    }
}

/// Walks node `j`'s log, checking the records from index `from` on (those appended since the
/// last step); returns the views they installed with their contents. `Err` on a strict
/// invariant's failure.
fn scan_log(
    st: &LogState,
    j: usize,
    from: usize,
    counts: &mut LogCounts,
) -> Result<Vec<(u64, Content)>, String> {
    let recs = &st.recs[j];
    let mut fresh = Vec::new();
    // Since the last `StateDropped`: the views installed, in log order.
    let mut hist: Vec<(u64, Content)> = Vec::new();
    let mut promise: BTreeMap<u64, u64> = BTreeMap::new();
    let mut last_dec: Option<&Decision> = None;
    let mut shards: Option<(u64, Vec<Vec<NodeId>>)> = None;
    let mut verdict: Option<(u64, Inadequate)> = None;
    let fail = |k: usize, what: String| {
        format!(
            "n{j}'s log, record {k} of {}: {what}; the log: {recs:?}",
            recs.len()
        )
    };
    for (k, r) in recs.iter().enumerate() {
        let new = k >= from;
        let cur = hist.last();
        match r {
            Record::Promised { view, rank } => {
                if new && let Some((v, c)) = cur.filter(|(v, c)| v == view && st.dead(*v, c)) {
                    return Err(fail(
                        k,
                        format!(
                            "INV-2′: promised ballot {rank} restarting view {v} on its dead content {c:?}"
                        ),
                    ));
                }
                let p = promise.entry(*view).or_default();
                *p = (*p).max(*rank);
            }
            Record::Decided { decision: d, .. } => {
                let l = d.trim.view;
                if new {
                    if let Some((v, c)) = cur.filter(|(v, c)| *v == l && st.dead(*v, c)) {
                        return Err(fail(
                            k,
                            format!(
                                "INV-2′: a decision ending view {v} on its dead content {c:?}: {d:?}"
                            ),
                        ));
                    }
                    if let Some((_, x)) = hist.iter().rev().find(|(v, _)| *v == l) {
                        let next = d.next_members(&x.members);
                        let dead = (st.installs.get(&(l + 1)).into_iter().flatten())
                            .find(|c| c.members == next && st.dead(l + 1, c));
                        if let Some(c) = dead {
                            return Err(fail(
                                k,
                                format!(
                                    "INV-2′: a decision for view {l} making the dead content {c:?} of view {} again: {d:?}",
                                    l + 1
                                ),
                            ));
                        }
                    }
                    // INV-5: a restart's decision, logged, already holds what INV-4 asks of
                    // the view it makes (s29, ninety-sixth part): a ballot never commits a next
                    // view with no majority of its view, installed or not.
                    if let Some((_, x)) = hist.iter().rev().find(|(v, _)| *v == l)
                        && attempt_of(d.rank) > 0
                    {
                        let next = d.next_members(&x.members);
                        if !majority(&next, &x.members)
                            && let Err(logged) = restart_excuse(st, l + 1, &next, &x.members)
                        {
                            return Err(fail(
                                k,
                                format!(
                                    "INV-5: a restart decision for view {l} = {:?} makes {next:?}, a majority of neither it, an adopted decision's next view, nor its members that logged it ({logged:?}): {d:?}",
                                    x.members
                                ),
                            ));
                        }
                    }
                    if let Some(&p) = promise.get(&l).filter(|&&p| d.rank < p) {
                        let installs_next = recs[k + 1..]
                            .iter()
                            .find(|r| {
                                !matches!(
                                    r,
                                    Record::Shards { .. }
                                        | Record::Verdict { .. }
                                        | Record::Settings { .. }
                                )
                            })
                            .is_some_and(
                                |r| matches!(r, Record::Installed { view, .. } if *view == l + 1),
                            );
                        if !installs_next {
                            return Err(fail(
                                k,
                                format!(
                                    "INV-3: a decision for view {l} of rank {} below the promise {p}, not a catch-up: {d:?}",
                                    d.rank
                                ),
                            ));
                        }
                        counts.catch_up_below_promise += 1;
                    }
                }
                last_dec = Some(d);
            }
            Record::Shards { view, shards: s } => shards = Some((*view, s.clone())),
            Record::Verdict { view, why } => verdict = Some((*view, why.clone())),
            Record::Installed { view: w, members } => {
                let c = Content {
                    members: members.clone(),
                    shards: shards.take().filter(|s| s.0 == *w).map(|s| s.1),
                    verdict: verdict.take().filter(|v| v.0 == *w).map(|v| v.1),
                };
                if new {
                    if st.dead(*w, &c) {
                        return Err(fail(
                            k,
                            format!("INV-2′: view {w} installed again with its dead content {c:?}"),
                        ));
                    }
                    if let Some((v, d)) = cur.filter(|(v, d)| v < w && st.dead(*v, d)) {
                        return Err(fail(
                            k,
                            format!("INV-2′: view {w} installed on view {v}'s dead content {d:?}"),
                        ));
                    }
                    check_chain(st, k, *w, &c, &hist, last_dec, counts).map_err(|e| fail(k, e))?;
                    fresh.push((*w, c.clone()));
                }
                hist.push((*w, c));
                last_dec = None;
            }
            Record::StateDropped { .. } => {
                hist.clear();
                last_dec = None;
            }
            _ => {}
        }
    }
    Ok(fresh)
}

/// INV-4 for an `Installed { w, c }` at record `k` of a log whose installed views (since its
/// last `StateDropped`) are `hist` and whose last decision since its last install is `dec`:
/// the decision ends view `w - 1` as this log installed it and makes `c`'s members of it;
/// they hold a majority of it, or for a restart's ballot, of an adopted decision's next view
/// (s18) or of its members whose logs record it (s27).
fn check_chain(
    st: &LogState,
    k: usize,
    w: u64,
    c: &Content,
    hist: &[(u64, Content)],
    dec: Option<&Decision>,
    counts: &mut LogCounts,
) -> Result<(), String> {
    let Some((_, x)) = w
        .checked_sub(1)
        .and_then(|p| hist.iter().rev().find(|(v, _)| *v == p))
    else {
        if w > 0 {
            counts.joined += 1;
        }
        return Ok(());
    };
    let Some(d) = dec.filter(|d| d.trim.view + 1 == w) else {
        return Err(format!(
            "INV-4: view {w} installed (record {k}) without a decision ending view {} before it (last: {dec:?})",
            w - 1
        ));
    };
    let next = d.next_members(&x.members);
    if next != c.members {
        return Err(format!(
            "INV-4: view {w} installed as {:?}, but the decision before it makes {next:?} of view {} = {:?}: {d:?}",
            c.members,
            w - 1,
            x.members
        ));
    }
    if majority(&c.members, &x.members) {
        return Ok(());
    }
    if attempt_of(d.rank) == 0 {
        return Err(format!(
            "INV-4: view {w} = {:?} by the ordinary decision {d:?} holds no majority of view {} = {:?}",
            c.members,
            w - 1,
            x.members
        ));
    }
    match restart_excuse(st, w, &c.members, &x.members) {
        Ok(Excuse::Fitted) => counts.fitted += 1,
        Ok(Excuse::JoinersAside) => counts.joiners_aside += 1,
        Err(logged) => {
            return Err(format!(
                "INV-4: the restart view {w} = {:?} holds no majority of view {} = {:?}, of an adopted decision's next view, nor of its members that logged it ({logged:?}): {d:?}",
                c.members,
                w - 1,
                x.members
            ));
        }
    }
    Ok(())
}

/// Why a restart's next view `next` of view `w - 1` = `x` may hold no majority of `x`.
enum Excuse {
    /// It holds a majority of the next view of a decision for `w - 1` logged anywhere that holds
    /// a majority of `x` (s18, the fitting).
    Fitted,
    /// It holds a majority of the members of `x` whose logs record `x` as `w - 1` (s27: its
    /// joiners never logged it).
    JoinersAside,
}

/// The [`Excuse`] of a restart's next view `next` of view `w - 1` = `x` that holds no
/// majority of `x` (INV-4, INV-5), or the members of `x` whose logs record it (for a message).
fn restart_excuse(
    st: &LogState,
    w: u64,
    next: &[NodeId],
    x: &[NodeId],
) -> Result<Excuse, Vec<NodeId>> {
    let fitted = st.recs.iter().flatten().any(|r| {
        matches!(r, Record::Decided { decision: a, .. } if a.trim.view + 1 == w && {
            let n = a.next_members(x);
            majority(&n, x) && majority(next, &n)
        })
    });
    if fitted {
        return Ok(Excuse::Fitted);
    }
    let logged: Vec<NodeId> = (x.iter().copied())
        .filter(|m| {
            st.recs.get(m.0 as usize).is_some_and(|rs| {
                rs.iter().any(|r| matches!(r, Record::Installed { view, members } if *view + 1 == w && members == x))
            })
        })
        .collect();
    if majority(next, &logged) {
        return Ok(Excuse::JoinersAside);
    }
    Err(logged)
}

/// Hand-built logs for the checker tests below: view 0 = [0, 1, 2]; `D` (rank 0) admits 3.
/// Node 0 logged `D` and installed view 1 = [0, 1, 2, 3] (the dead branch); node 1 logged
/// `D`, promised ballot (1, 1) of a restart of view 0 that fitted `D` (3 dropped, 0 failed)
/// and installed view 1 = [1, 2] (the renumbering).
fn dead_branch_logs() -> LogState {
    let ids = |v: &[u32]| v.iter().map(|&i| NodeId(i)).collect::<Vec<_>>();
    let change = |kind, node| squall_membership::change::Change {
        kind,
        node: NodeId(node),
    };
    let decided = |view, rank, changes| Record::Decided {
        decision: Decision {
            rank,
            changes,
            trim: squall_membership::trim::Trim {
                view,
                counts: vec![(NodeId(0), 5), (NodeId(1), 5), (NodeId(2), 5)],
            },
        },
        holders: None,
    };
    let v0 = Record::Installed {
        view: 0,
        members: ids(&[0, 1, 2]),
    };
    let d = decided(0, 0, vec![change(ChangeKind::Join, 3)]);
    let b = squall_membership::restart::ballot(1, 1);
    let mut st = LogState {
        recs: vec![
            vec![
                v0.clone(),
                d.clone(),
                Record::Installed {
                    view: 1,
                    members: ids(&[0, 1, 2, 3]),
                },
            ],
            vec![
                v0,
                d,
                Record::Promised { view: 0, rank: b },
                decided(0, b, vec![change(ChangeKind::Fail, 0)]),
                Record::Installed {
                    view: 1,
                    members: ids(&[1, 2]),
                },
            ],
        ],
        ..LogState::default()
    };
    let mut counts = LogCounts::default();
    for j in 0..2 {
        for (v, c) in scan_log(&st, j, 0, &mut counts).unwrap() {
            let list = st.installs.entry(v).or_default();
            if !list.contains(&c) {
                list.push(c);
            }
        }
    }
    st
}

/// INV-2′ can fail: node 0, on the dead view 1 = [0, 1, 2, 3], logs a decision ending it.
/// Without the renumbering (node 1's view 1 not noted) the same record passes.
#[test]
fn log_invariants_catch_a_decision_on_the_dead_branch() {
    let mut st = dead_branch_logs();
    let Some(Record::Decided { decision, holders }) = st.recs[1].get(3).cloned() else {
        panic!("node 1's restart decision")
    };
    let mut d = decision;
    d.trim.view = 1;
    d.rank = 0;
    d.changes.clear();
    st.recs[0].push(Record::Decided {
        decision: d,
        holders,
    });
    let e = scan_log(&st, 0, 3, &mut LogCounts::default()).unwrap_err();
    assert!(e.contains("INV-2′"), "{e}");
    st.installs.entry(1).or_default().truncate(1);
    scan_log(&st, 0, 3, &mut LogCounts::default()).unwrap();
}

/// INV-2′ can fail: a node behind (its log ends at view 0 with `D`) installs the dead view
/// 1 = [0, 1, 2, 3] again after the renumbering.
#[test]
fn log_invariants_catch_a_reinstalled_dead_view() {
    let mut st = dead_branch_logs();
    let mut behind = st.recs[0][..2].to_vec();
    behind.push(st.recs[0][2].clone());
    st.recs.push(behind);
    let e = scan_log(&st, 2, 2, &mut LogCounts::default()).unwrap_err();
    assert!(e.contains("INV-2′") && e.contains("installed again"), "{e}");
}

/// Found by a strict INV-2 soak (s28, `SQUALL_STRICT_CHOSEN=1 SQUALL_PROPTEST_CASES=384`, not
/// shrunk): a restart's decision for view 0 under ballot 2^32 (admit 5, fail 4) is logged by a
/// majority of view 0; a later restart under ballot 2^33 + 1 adopts it and fits it (the join
/// dropped, the absent 0 failed), so a decision ranked above the chosen one differs from it.
/// That is the fitting (s16, s18; fix B holds: the fitted view is a majority of the adopted
/// next view), which INV-2 counts and does not fail by default; nobody installed the adopted
/// decision's view (no renumbering). With `SQUALL_STRICT_CHOSEN=1` the run fails on it, which
/// this test then checks instead. See `docs/MEMBERSHIP.md`, eighty-sixth part. Re-seeded in
/// s30 (hundred-and-first part): with suspicions counted per view, seed 5414567340723307729 no
/// longer changed a chosen decision (`chosen_changed` 0); seed 5 does.
#[test]
fn regression_strict_chosen_a_fitting_restart_changes_a_decision_a_majority_logged() {
    let plan = Plan {
        seed: 5,
        universe: 8,
        initial: 5,
        lives: vec![
            LifePlan {
                who: Who::Minority(215),
                in_turn: Some(158),
                partitioned: None,
                events: vec![
                    Ev::Start {
                        node: 2,
                        step: 1144,
                    },
                    Ev::Partition {
                        side: 13,
                        step: 522,
                        len: Some(1325),
                    },
                    Ev::CrashLeaderAtDecision { step: 1927 },
                    Ev::Start { node: 2, step: 111 },
                    Ev::Crash { node: 0, step: 785 },
                ],
                steps: 2521,
                stop: Stop::End,
            },
            LifePlan {
                who: Who::Majority(141),
                in_turn: Some(26),
                partitioned: None,
                events: vec![
                    Ev::CrashLeaderAtDecision { step: 527 },
                    Ev::Start { node: 5, step: 922 },
                    Ev::Start {
                        node: 1,
                        step: 2446,
                    },
                    Ev::Start { node: 0, step: 325 },
                ],
                steps: 3367,
                stop: Stop::Install {
                    from: 811,
                    ran: true,
                    join: true,
                },
            },
        ],
    };
    check_strict_chosen(&plan, 0);
}

/// Checks a pinned plan whose restart fits an adopted decision that a majority of its view
/// logged: without `SQUALL_STRICT_CHOSEN` it passes, counting one `chosen_changed` and
/// `renumbered` renumberings (of a run view, and of a logged install); with it, the run fails
/// on INV-2.
fn check_strict_chosen(plan: &Plan, renumbered: usize) {
    if strict_chosen() {
        let e = run(plan).err().unwrap_or_default();
        assert!(e.contains("INV-2: view 0's decision was chosen"), "{e}");
        return;
    }
    let stats = run(plan).unwrap_or_else(|e| panic!("{e}\n  plan: {plan:?}"));
    let got = (
        stats.log.chosen_changed,
        stats.renumbered,
        stats.log.renumbered,
    );
    assert_eq!(
        got,
        (1, renumbered, renumbered),
        "{}: {stats:?}",
        group_sim::missed(plan.seed, "the fitting")
    );
}

/// Hang C (s28, eighty-ninth part of `docs/MEMBERSHIP.md`), a directed plan that reaches it at
/// every seed listed. View 0 = [0, 1, 2, 3]. Life 0: 0 crashes, 1 leads `Fail(0)` (rank 1),
/// and the life stops when the first member (3, or at seed 2 member 2) installs view 1 = [1,
/// 2, 3] while the others hold only the decision. Life 1 (`Behind`): the members at view 0
/// restart it without the one ahead (absent), 0 leads ballot (1, 0), adopts `Fail(0)`, fits
/// the absent member out, logs the decision and crashes at once; the others hold the promise.
/// Final life: everyone starts. The member ahead restarts view 1 and waits for the others;
/// the others restart view 0 and skip its row (`dead_ahead` at 0, `below_promise` at the rest).
/// Without the fix: first, the ballot waits for its acknowledgement (it is neither absent nor
/// an outsider); with only that half fixed, 0 decides, finds itself removed and joins again,
/// and the others, holding the decision and every echo, never install because a peer is
/// "ahead" (`peer_ahead`: `dead_ahead` read only the decision logged at construction).
#[test]
fn regression_hang_c_a_member_one_view_ahead_on_a_dead_branch_is_counted_out() {
    for (seed, crash) in [(0, 1000), (2, 1074)] {
        let plan = Plan {
            seed,
            universe: 5,
            initial: 4,
            lives: vec![
                LifePlan {
                    who: Who::Everyone,
                    in_turn: None,
                    partitioned: None,
                    events: vec![Ev::Crash {
                        node: 0,
                        step: crash,
                    }],
                    steps: 4000,
                    stop: Stop::Install {
                        from: 0,
                        ran: true,
                        join: false,
                    },
                },
                LifePlan {
                    who: Who::Behind,
                    in_turn: None,
                    partitioned: None,
                    events: vec![Ev::CrashLeaderAtDecision { step: 0 }],
                    steps: 6000,
                    stop: Stop::End,
                },
            ],
        };
        check(&plan).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

/// Rank of restart ballot (1, 0): attempt 1, led by node 0.
const BALLOT_1_0: u64 = 1 << 32;

/// Found by the s28 checker's 256-case soak (`docs/MEMBERSHIP.md`, eighty-sixth part; plan
/// seed 5299729443550784587, proptest's first failing plan, shrunk) on code without the
/// seventy-ninth part's transfer rule; on the current code it settles (ninety-first part).
/// At the final life's start (checked here) 0, 1, 2 and 4 are at view 0 = [0–4] holding
/// restart ballot (1, 0)'s decision, which makes view 1 = [0–4]; 3 is at view 1 = [0–4].
/// In the final life everyone restarts; 2 completes the restart and runs view 1 again, as
/// decided, active from its replay, while 0, 1, 3 and 4, restarting at view 1, read it
/// running and join again by transfer. Without `Transfer::poll_joiner`'s rule (ask a member
/// that announced itself active first) 0 asks 1, 1 asks 0, 3 and 4 ask 0, nobody asks 2,
/// and the group never settles: hang B of the seventy-ninth part with four rejoiners.
#[test]
fn regression_checker_soak_final_life_hangs_with_four_rejoiners_asking_non_holders_for_the_state() {
    let plan = Plan {
        seed: 5299729443550784587,
        universe: 5,
        initial: 5,
        lives: vec![
            LifePlan {
                who: Who::Behind,
                in_turn: Some(180),
                partitioned: None,
                events: vec![
                    Ev::Delay {
                        node: 7,
                        step: 255,
                        micros: 129,
                    },
                    Ev::CrashLeaderAtDecision { step: 510 },
                    Ev::CrashLeaderAtDecision { step: 1023 },
                ],
                steps: 2534,
                stop: Stop::End,
            },
            LifePlan {
                who: Who::Everyone,
                in_turn: Some(178),
                partitioned: None,
                events: vec![Ev::Delay {
                    node: 3,
                    step: 418,
                    micros: 151,
                }],
                steps: 5102,
                stop: Stop::Install {
                    from: 195,
                    ran: true,
                    join: false,
                },
            },
            LifePlan {
                who: Who::Mask(38),
                in_turn: Some(19),
                partitioned: None,
                events: vec![
                    Ev::CrashLeaderAtDecision { step: 4486 },
                    Ev::Crash {
                        node: 2,
                        step: 3441,
                    },
                    Ev::CrashLeaderAtDecision { step: 2690 },
                ],
                steps: 5404,
                stop: Stop::Decision {
                    from: 119,
                    ran: true,
                },
            },
        ],
    };
    let all: Vec<NodeId> = (0..5).map(NodeId).collect();
    let logs = logs_at_final_life(&plan).unwrap_or_else(|e| panic!("{e}"));
    let reached = (logs.iter().enumerate()).all(|(i, b)| {
        log_tail(b)
            == if i == 3 {
                (Some((1, all.clone())), vec![])
            } else {
                (Some((0, all.clone())), vec![(0, BALLOT_1_0)])
            }
    });
    check_pinned(&plan, plan.seed, &logs, reached, "the hang's logs");
}

/// The s28 sweep's seed 127 state (`docs/MEMBERSHIP.md`, eighty-sixth and ninety-first parts),
/// rebuilt as a directed plan: the sweep's seed no longer reaches it. View 0 = [0, 1, 2, 3].
/// Life 0 (hang C's): 0 crashes, 1 leads `Fail(0)` (rank 1), and the life stops at the first
/// install of view 1 = [1, 2, 3]. Life 1 (seed 127's second life, `Behind`): the three at view
/// 0 restart it without the member ahead; 0 leads ballot (1, 0), fits it out
/// (`[Fail(0), Fail(ahead)]`), and one follower logs that decision beside the rank-1 one
/// before 0 crashes at its decision; a partition then stops the other two as a minority. At
/// the final life's start (checked here) 0 holds the ballot's decision, one member both
/// decisions, one the rank-1 decision only, and one is at view 1 = [1, 2, 3]: the
/// member ahead is on a dead branch. Hang C's rule (`Gms::outsider_in_restart`: a member
/// restarting one view ahead whose row is skipped as a catch-up source, here `dead_ahead`
/// from the logged ballot decision at two members and `below_promise` at the third, is
/// counted out) lets the restart of view 0 complete; without it the three wait for the
/// member ahead and it waits for them, as seed 127 hung on the s28 code.
#[test]
fn regression_checker_sweep_127_a_member_ahead_with_a_follower_holding_the_fitting_is_counted_out()
{
    for seed in [1, 2] {
        let plan = Plan {
            seed,
            universe: 6,
            initial: 4,
            lives: vec![
                LifePlan {
                    who: Who::Everyone,
                    in_turn: None,
                    partitioned: None,
                    events: vec![Ev::Crash {
                        node: 0,
                        step: 1000,
                    }],
                    steps: 4000,
                    stop: Stop::Install {
                        from: 0,
                        ran: true,
                        join: false,
                    },
                },
                LifePlan {
                    who: Who::Behind,
                    in_turn: Some(77),
                    partitioned: None,
                    events: vec![
                        Ev::CrashLeaderAtDecision { step: 810 },
                        Ev::Partition {
                            side: 38,
                            step: 2180,
                            len: Some(2412),
                        },
                    ],
                    steps: 4905,
                    stop: Stop::End,
                },
            ],
        };
        let logs = logs_at_final_life(&plan).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let view_0: Vec<NodeId> = (0..4).map(NodeId).collect();
        let view_1: Vec<NodeId> = (1..4).map(NodeId).collect();
        let mut tails: Vec<LogTail> = logs[1..4].iter().map(|b| log_tail(b)).collect();
        tails.sort();
        let at_0 = |ranks: Vec<u64>| {
            (
                Some((0, view_0.clone())),
                ranks.into_iter().map(|r| (0, r)).collect::<Vec<_>>(),
            )
        };
        let reached = log_tail(&logs[0]) == at_0(vec![BALLOT_1_0])
            && tails
                == vec![
                    at_0(vec![1]),
                    at_0(vec![1, BALLOT_1_0]),
                    (Some((1, view_1)), vec![]),
                ];
        check_pinned(&plan, seed, &logs, reached, "seed 127's state");
    }
}

/// Found by the s29 soak (`docs/MEMBERSHIP.md`, ninety-first part; `PROPTEST_RNG_SEED=2912`
/// with 512 cases, its 15th, not shrunk). At the final life's start
/// (checked here) 0's log ends at view 1 = [0, 1, 2]; 1's at view 1 with the rank-1 decision
/// `[Fail(0), Join(4), Join(6)]`; 2's at view 2 = [1, 2, 4, 6], which it ran in life 2; 4's and
/// 6's are empty (they were joining when that life stopped). In the final life 1 catches up
/// and restarts view 2 with 2, both waiting for [4, 6]; 0, 4 and 6 ask to join. The restart
/// needs three of view 2's four logs and had two: `Gms::never_logged` set aside only a joiner
/// whose view block names an old view, not one with no view block (its log empty), and 4 and
/// 6, linked and heard, were never counted absent, so nothing stopped and the group waited for
/// good. Fixed: a joiner with no view block is set aside too; the restart completes without
/// 4 and 6, and the group settles with everyone.
#[test]
fn regression_soak_final_life_hangs_restarting_a_view_whose_joiners_logs_are_empty() {
    let plan = Plan {
        seed: 12975580593743988164,
        universe: 7,
        initial: 3,
        lives: vec![
            LifePlan {
                who: Who::Everyone,
                in_turn: Some(358),
                partitioned: None,
                events: vec![
                    Ev::Delay {
                        node: 6,
                        step: 3276,
                        micros: 128,
                    },
                    Ev::CrashLeaderAtDecision { step: 883 },
                    Ev::Start { node: 1, step: 483 },
                    Ev::Delay {
                        node: 6,
                        step: 339,
                        micros: 24,
                    },
                ],
                steps: 4904,
                stop: Stop::Install {
                    from: 2380,
                    ran: false,
                    join: true,
                },
            },
            LifePlan {
                who: Who::Behind,
                in_turn: Some(356),
                partitioned: None,
                events: vec![
                    Ev::Crash {
                        node: 3,
                        step: 1347,
                    },
                    Ev::CrashLeaderAtDecision { step: 2733 },
                    Ev::Partition {
                        side: 4,
                        step: 2791,
                        len: Some(2074),
                    },
                    Ev::Crash {
                        node: 2,
                        step: 2018,
                    },
                    Ev::Partition {
                        side: 10,
                        step: 1015,
                        len: None,
                    },
                    Ev::CrashLeaderAtDecision { step: 592 },
                ],
                steps: 3073,
                stop: Stop::Decision {
                    from: 75,
                    ran: false,
                },
            },
            LifePlan {
                who: Who::Everyone,
                in_turn: Some(79),
                partitioned: None,
                events: vec![
                    Ev::Start {
                        node: 4,
                        step: 2441,
                    },
                    Ev::Start {
                        node: 1,
                        step: 1137,
                    },
                    Ev::Start {
                        node: 6,
                        step: 2226,
                    },
                    Ev::Partition {
                        side: 2,
                        step: 2824,
                        len: None,
                    },
                    Ev::Start {
                        node: 4,
                        step: 2784,
                    },
                    Ev::Crash {
                        node: 0,
                        step: 2094,
                    },
                ],
                steps: 3470,
                stop: Stop::Install {
                    from: 696,
                    ran: true,
                    join: false,
                },
            },
        ],
    };
    let logs = logs_at_final_life(&plan).unwrap_or_else(|e| panic!("{e}"));
    let view_1: Vec<NodeId> = (0..3).map(NodeId).collect();
    let view_2 = vec![NodeId(1), NodeId(2), NodeId(4), NodeId(6)];
    let reached = log_tail(&logs[0]) == (Some((1, view_1.clone())), vec![])
        && log_tail(&logs[1]) == (Some((1, view_1)), vec![(1, 1)])
        && log_tail(&logs[2]) == (Some((2, view_2)), vec![])
        && logs[4].is_empty()
        && logs[6].is_empty();
    check_pinned(&plan, plan.seed, &logs, reached, "the hang's logs");
}

/// Found by the s29 soak after the `never_logged` fix (`docs/MEMBERSHIP.md`, ninety-first
/// part; `PROPTEST_RNG_SEED=2914`, 256 cases, its 101st; not shrunk); fixed in the
/// ninety-sixth part. It failed the view check: "life 3 step 10: n1 runs view 1 as [1, 4], a
/// majority of no member list run for view 0 ([[0, 1, 2, 3, 4]]), nor of the next view of a
/// logged decision for it that was one". In life 1, 1 led restart ballot (2, 1) of view 0 =
/// [0–4]. It proposed `Fail(3)` while 3's row was suspected (3 had crashed, its new process
/// pending), then readmitted 3's new incarnation and counted it alive, and committed
/// `[Fail(0), Fail(3), Fail(2)]` (next view [1, 4]) as 0 and 2 were down: the alive members
/// were a majority, the survivors were not. A later restart adopted that decision and 1 ran
/// [1, 4]. Now the leader drops the proposed failure of a member it counts again, and never
/// commits a restart decision whose next view keeps no majority of the members it counts.
/// Checked: the logs at the final life's start hold 1's decision of ballot (2, 1), keeping 3;
/// then the run, whose log checks (INV-5) fail it on any logged restart decision with no
/// majority of its view.
#[test]
fn regression_soak_a_restart_adopts_a_ballot_decision_whose_next_view_is_no_majority() {
    let plan = Plan {
        seed: 7425126440950365164,
        universe: 8,
        initial: 5,
        lives: vec![
            LifePlan {
                who: Who::Mask(195),
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::Start {
                        node: 0,
                        step: 3693,
                    },
                    Ev::Start {
                        node: 4,
                        step: 1629,
                    },
                    Ev::Crash { node: 7, step: 258 },
                    Ev::Crash {
                        node: 3,
                        step: 3944,
                    },
                ],
                steps: 4364,
                stop: Stop::Install {
                    from: 911,
                    ran: false,
                    join: true,
                },
            },
            LifePlan {
                who: Who::Behind,
                in_turn: Some(362),
                partitioned: None,
                events: vec![
                    Ev::Crash { node: 3, step: 936 },
                    Ev::Start {
                        node: 3,
                        step: 2000,
                    },
                    Ev::CrashLeaderAtDecision { step: 877 },
                    Ev::Crash {
                        node: 7,
                        step: 1717,
                    },
                    Ev::Crash {
                        node: 3,
                        step: 1606,
                    },
                    Ev::Crash {
                        node: 2,
                        step: 1793,
                    },
                    Ev::Crash {
                        node: 0,
                        step: 1173,
                    },
                ],
                steps: 2361,
                stop: Stop::Decision {
                    from: 512,
                    ran: true,
                },
            },
            LifePlan {
                who: Who::Behind,
                in_turn: Some(98),
                partitioned: Some((2, None)),
                events: vec![
                    Ev::Crash {
                        node: 3,
                        step: 2125,
                    },
                    Ev::Start {
                        node: 5,
                        step: 1441,
                    },
                ],
                steps: 2320,
                stop: Stop::Decision {
                    from: 7,
                    ran: false,
                },
            },
        ],
    };
    let logs = logs_at_final_life(&plan).unwrap_or_else(|e| panic!("{e}"));
    let ballot = (2 << 32) + 1;
    let (_, rec) = MemLog::open(logs[1].clone());
    let keeps_3 = rec.records.iter().any(|r| {
        matches!(r, Record::Decided { decision: d, .. }
            if d.rank == ballot && d.trim.view == 0 && !d.changes.iter().any(|c| c.node == NodeId(3)))
    });
    check_pinned(
        &plan,
        plan.seed,
        &logs,
        keeps_3,
        "n1's decision of ballot (2, 1) keeping 3",
    );
}

/// Found by the s30 strict soak (`SQUALL_STRICT_CHOSEN=1 SQUALL_PROPTEST_CASES=256
/// PROPTEST_RNG_SEED=3001`, its sixth new plan, not shrunk). View 0 = [0–4]. In life 0, 6
/// joins: the running ballot's decision `[Join 6]` (rank 1) is logged by all of view 0, and n4
/// alone installs view 1 = [0–4, 6] before every process stops. Life 2 restarts the members
/// behind (n0–n3; 4 and 6 not started): ballot (1, 0) adopts the decision and fits it (the
/// join dropped, the absent 4 failed), and they run view 1 = [0, 1, 2, 3]. That is the
/// legitimate renumbering of `docs/MEMBERSHIP.md`'s forty-second part (the first view 1 ran in
/// an earlier life and never runs again), counted at the view and the log level with INV-2's
/// `chosen_changed`. With `superseded_by` off it fails INV-2′ (n4 promises a restart ballot on its dead view 1),
/// which the default suite did not in the eighty-sixth part. See the hundredth part.
#[test]
fn regression_strict_chosen_a_restart_of_the_members_behind_renumbers_a_view_one_member_ran() {
    check_strict_chosen(
        &Plan {
            seed: 11502390899764873999,
            universe: 7,
            initial: 5,
            lives: vec![
                LifePlan {
                    who: Who::Minority(126),
                    in_turn: Some(364),
                    partitioned: None,
                    events: vec![
                        Ev::CrashLeaderAtDecision { step: 812 },
                        Ev::Crash {
                            node: 6,
                            step: 1523,
                        },
                        Ev::Partition {
                            side: 11,
                            step: 3781,
                            len: Some(497),
                        },
                        Ev::Start {
                            node: 6,
                            step: 3184,
                        },
                        Ev::CrashLeaderAtDecision { step: 4174 },
                    ],
                    steps: 4192,
                    stop: Stop::Install {
                        from: 1157,
                        ran: true,
                        join: true,
                    },
                },
                LifePlan {
                    who: Who::Mask(76),
                    in_turn: None,
                    partitioned: Some((1, None)),
                    events: vec![
                        Ev::Delay {
                            node: 6,
                            step: 1438,
                            micros: 56,
                        },
                        Ev::Partition {
                            side: 44,
                            step: 4362,
                            len: Some(2558),
                        },
                        Ev::Crash { node: 6, step: 297 },
                        Ev::Start {
                            node: 2,
                            step: 2214,
                        },
                        Ev::Start {
                            node: 0,
                            step: 2974,
                        },
                        Ev::Delay {
                            node: 3,
                            step: 1390,
                            micros: 19,
                        },
                    ],
                    steps: 4430,
                    stop: Stop::Decision {
                        from: 1124,
                        ran: true,
                    },
                },
                LifePlan {
                    who: Who::Behind,
                    in_turn: None,
                    partitioned: None,
                    events: vec![Ev::Partition {
                        side: 41,
                        step: 3213,
                        len: None,
                    }],
                    steps: 5397,
                    stop: Stop::Install {
                        from: 1000,
                        ran: true,
                        join: true,
                    },
                },
            ],
        },
        1,
    );
}

/// Found by the s30 strict soak (`PROPTEST_RNG_SEED=3002`, its 21st new plan, not shrunk).
/// View 0 = [0–4]. In life 0, the running ballot's `[Fail 0]` (rank 1) is logged by n1–n3, a
/// majority, and nobody installs view 1. Life 2 restarts everyone in turn with n2 cut off:
/// ballot (1, 0), led by 0 itself, adopts the decision and fits it (`[Fail 0, Fail 2]`), view 1
/// = [1, 3, 4] runs, and 0 joins again in view 2. The fitting, with no renumbering.
#[test]
fn regression_strict_chosen_a_restart_led_by_the_failed_member_fits_its_own_failure() {
    check_strict_chosen(
        &Plan {
            seed: 13586663894936566764,
            universe: 5,
            initial: 5,
            lives: vec![
                LifePlan {
                    who: Who::Behind,
                    in_turn: None,
                    partitioned: None,
                    events: vec![
                        Ev::Crash {
                            node: 5,
                            step: 2964,
                        },
                        Ev::CrashLeaderAtDecision { step: 2286 },
                        Ev::Partition {
                            side: 14,
                            step: 2597,
                            len: Some(220),
                        },
                        Ev::Crash {
                            node: 5,
                            step: 2129,
                        },
                        Ev::Delay {
                            node: 0,
                            step: 140,
                            micros: 17,
                        },
                        Ev::Start { node: 1, step: 205 },
                    ],
                    steps: 3267,
                    stop: Stop::Install {
                        from: 536,
                        ran: false,
                        join: false,
                    },
                },
                LifePlan {
                    who: Who::Majority(81),
                    in_turn: None,
                    partitioned: None,
                    events: vec![
                        Ev::Delay {
                            node: 3,
                            step: 244,
                            micros: 170,
                        },
                        Ev::Start {
                            node: 7,
                            step: 1101,
                        },
                    ],
                    steps: 1734,
                    stop: Stop::End,
                },
                LifePlan {
                    who: Who::Everyone,
                    in_turn: Some(236),
                    partitioned: Some((4, Some(2090))),
                    events: vec![
                        Ev::CrashLeaderAtDecision { step: 402 },
                        Ev::Start {
                            node: 7,
                            step: 1480,
                        },
                    ],
                    steps: 2351,
                    stop: Stop::End,
                },
            ],
        },
        0,
    );
}

/// Found by the s30 torn soak (`SQUALL_SIM_TORN_WRITES=1 SQUALL_PROPTEST_CASES=256
/// PROPTEST_RNG_SEED=3004`, its 154th new plan, not shrunk); it reaches its state with torn
/// writes only, so the test turns them on. View 0 = [0, 1, 2]. Life 1 stops as n0 installs
/// view 1 = [0, 1, 2] while n1 and n2 hold the restart decision (1, 0). In the final life n2
/// restarts view 0 from its log, installs view 1 and announces itself active; n0 and n1 find the
/// group went on without them and join again by transfer. Each asked the other (an initial
/// member, a holder by default) before n2's announcement landed, and kept waiting: the final
/// life hung. Fixed in `transfer.rs`: a joiner whose sender asks it in turn withdraws its
/// request if it is the higher-indexed of the two, and no joiner asks a member that asks it.
/// See `docs/MEMBERSHIP.md`, hundredth part.
#[test]
fn regression_soak_torn_two_members_joining_again_ask_each_other_for_the_state() {
    let plan = Plan {
        seed: 3662647221336221107,
        universe: 5,
        initial: 3,
        lives: vec![
            LifePlan {
                who: Who::Mask(208),
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::CrashLeaderAtDecision { step: 874 },
                    Ev::Partition {
                        side: 6,
                        step: 2382,
                        len: Some(370),
                    },
                    Ev::Start {
                        node: 0,
                        step: 2040,
                    },
                    Ev::CrashLeaderAtDecision { step: 1995 },
                ],
                steps: 3031,
                stop: Stop::Install {
                    from: 1082,
                    ran: false,
                    join: false,
                },
            },
            LifePlan {
                who: Who::Everyone,
                in_turn: Some(24),
                partitioned: None,
                events: vec![
                    Ev::Crash { node: 5, step: 493 },
                    Ev::Partition {
                        side: 10,
                        step: 238,
                        len: None,
                    },
                    Ev::Start {
                        node: 2,
                        step: 1447,
                    },
                ],
                steps: 1514,
                stop: Stop::Install {
                    from: 66,
                    ran: false,
                    join: false,
                },
            },
        ],
    };
    TORN.with(|t| t.set(true));
    let logs = logs_at_final_life(&plan).unwrap_or_else(|e| panic!("{e}"));
    let ids = |m: &[u32]| m.iter().map(|&i| NodeId(i)).collect::<Vec<_>>();
    let tail = |i: usize| log_tail(&logs[i]);
    let reached = tail(0).0 == Some((1, ids(&[0, 1, 2])))
        && (1..3).all(|i| tail(i) == (Some((0, ids(&[0, 1, 2]))), vec![(0, 1 << 32)]));
    check_pinned(
        &plan,
        plan.seed,
        &logs,
        reached,
        "n0 one view ahead of n1 and n2",
    );
}

/// Found by the s30 strict soak (`SQUALL_STRICT_CHOSEN=1 SQUALL_PROPTEST_CASES=256
/// PROPTEST_RNG_SEED=3003`, its 197th new plan, not shrunk): a final-life hang. View 0 =
/// [0, 1, 2, 3]. Life 0 ends with n0's running decision `[Fail 2]` (rank 0) in its log. In life 1,
/// n1's restart ballot (1, 1) adopts it and fits it (the absent 0 failed too): `[Fail 2, Fail
/// 0]`, next view [1, 3], 2 of 4, a majority of the adopted next view [0, 1, 3] only (the s18
/// exception of the ninety-sixth part's check). n1 logs it and crashes at once. In the final life
/// everyone restarts view 0; n0 leads (2, 0), adopts n1's decision (the highest) unchanged, and
/// its next view [1, 3] holds a majority of neither view 0 nor the adopted next view (itself):
/// the check refuses to commit ("not committing"), for good. Open: see the hundredth part.
#[test]
#[ignore = "open: a restart adopting a fitted decision whose next view holds no majority of the view never commits (hundredth part)"]
fn regression_soak_a_restart_adopting_a_fitted_decision_with_no_majority_never_commits() {
    let plan = Plan {
        seed: 476926817412912057,
        universe: 5,
        initial: 4,
        lives: vec![
            LifePlan {
                who: Who::Majority(134),
                in_turn: None,
                partitioned: None,
                events: vec![
                    Ev::CrashLeaderAtDecision { step: 2639 },
                    Ev::CrashLeaderAtDecision { step: 4187 },
                    Ev::Partition {
                        side: 11,
                        step: 4010,
                        len: None,
                    },
                    Ev::Start {
                        node: 2,
                        step: 2377,
                    },
                    Ev::Partition {
                        side: 12,
                        step: 5041,
                        len: Some(1483),
                    },
                ],
                steps: 5160,
                stop: Stop::Decision {
                    from: 104,
                    ran: true,
                },
            },
            LifePlan {
                who: Who::Majority(4),
                in_turn: Some(193),
                partitioned: None,
                events: vec![
                    Ev::CrashLeaderAtDecision { step: 3357 },
                    Ev::Crash { node: 4, step: 776 },
                    Ev::CrashLeaderAtDecision { step: 334 },
                    Ev::Start {
                        node: 6,
                        step: 1790,
                    },
                    Ev::Partition {
                        side: 6,
                        step: 3553,
                        len: Some(1805),
                    },
                    Ev::Crash {
                        node: 3,
                        step: 1122,
                    },
                    Ev::Start {
                        node: 3,
                        step: 5417,
                    },
                ],
                steps: 5912,
                stop: Stop::End,
            },
        ],
    };
    let logs = logs_at_final_life(&plan).unwrap_or_else(|e| panic!("{e}"));
    let (_, rec) = MemLog::open(logs[1].clone());
    let fitted = rec.records.iter().any(|r| {
        matches!(r, Record::Decided { decision: d, .. }
            if d.rank == (1 << 32) + 1
                && d.trim.view == 0
                && d.next_members(&[NodeId(0), NodeId(1), NodeId(2), NodeId(3)]) == [NodeId(1), NodeId(3)])
    });
    check_pinned(
        &plan,
        plan.seed,
        &logs,
        fitted,
        "n1's decision (1, 1) making [1, 3]",
    );
}

/// Found by the s30 torn soak on the hang-D fix (`SQUALL_SIM_TORN_WRITES=1
/// SQUALL_PROPTEST_CASES=256 PROPTEST_RNG_SEED=3005`, its 44th new plan, not shrunk); torn
/// writes on. View 0 = [0, 1, 2]. At the final life's start n0's log holds its restart decision
/// (1, 0) for view 0, n1's and n2's none. In the final life n0 leads ballot (2, 0), decides
/// `[]` and publishes it; n1 and n2 install view 1 = [0, 1, 2] with the old ballot (1, 0)'s
/// decision and run it; n0 stays restarting at view 0, wedged, with no warning, for good: its
/// catch-up from them is below its promise (`below_promise`), and its own decision waits for
/// that catch-up (`peer_ahead`). Without torn writes the same logs settle; the same hang with
/// `transfer.rs` before hang D's fix. Open: see the hundredth part.
#[test]
#[ignore = "open: a member holding its own restart decision stays at view 0 while the others run view 1 (hundredth part)"]
fn regression_soak_torn_a_member_holding_its_restart_decision_stays_behind() {
    let plan = Plan {
        seed: 7845445468947087244,
        universe: 8,
        initial: 3,
        lives: vec![
            LifePlan {
                who: Who::Minority(179),
                in_turn: Some(353),
                partitioned: None,
                events: vec![
                    Ev::Crash { node: 7, step: 864 },
                    Ev::CrashLeaderAtDecision { step: 3338 },
                    Ev::CrashLeaderAtDecision { step: 1660 },
                ],
                steps: 3474,
                stop: Stop::End,
            },
            LifePlan {
                who: Who::Everyone,
                in_turn: Some(390),
                partitioned: None,
                events: vec![
                    Ev::Start {
                        node: 1,
                        step: 4177,
                    },
                    Ev::Partition {
                        side: 7,
                        step: 2132,
                        len: None,
                    },
                    Ev::Start { node: 0, step: 716 },
                    Ev::Start { node: 6, step: 831 },
                    Ev::Crash {
                        node: 3,
                        step: 2681,
                    },
                    Ev::Crash { node: 5, step: 658 },
                ],
                steps: 4215,
                stop: Stop::Decision {
                    from: 543,
                    ran: false,
                },
            },
        ],
    };
    TORN.with(|t| t.set(true));
    let logs = logs_at_final_life(&plan).unwrap_or_else(|e| panic!("{e}"));
    let tail = |i: usize| log_tail(&logs[i]);
    let v0 = Some((0, vec![NodeId(0), NodeId(1), NodeId(2)]));
    let reached = tail(0) == (v0.clone(), vec![(0, 1 << 32)])
        && (1..3).all(|i| tail(i) == (v0.clone(), vec![]));
    check_pinned(
        &plan,
        plan.seed,
        &logs,
        reached,
        "n0 alone holding decision (1, 0)",
    );
}
