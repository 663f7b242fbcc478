//! The harness of the mixed proptest over `Group` (see `sim_group_mix.rs` for what it checks
//! after every step and at the end), shared with the rejoin scenarios of `sim_rejoin.rs`.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::MemLog;
use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

use crate::group_sim::{self, counter_of, mix, payload, sender_of};

/// Joiners per run: universe nodes outside the initial view.
pub const JOINERS: usize = 2;

/// One event of a plan. Node indices are universe indices; events that would take the group
/// past its fault budget (see [`Run::may_lose`]) are skipped when they come due, so every plan
/// (and every shrunk plan) stays one the group must survive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ev {
    /// Crash `node` at `step` (node 0 is the first view's leader).
    Crash { node: usize, step: usize },
    /// From `step` on, crash whichever member leads the moment it has logged a decision (the
    /// trim is being published), once.
    CrashLeaderAtDecision { step: usize },
    /// From `step` on, crash whichever member leads the moment it has logged a decision (as
    /// [`Ev::CrashLeaderAtDecision`]), once, and restart it under its id `after` steps later
    /// (as [`Ev::Rejoin`] does): with a small `after` the survivors install the decided view,
    /// which still names the old incarnation, after the new one connected.
    RestartLeaderAtDecision { step: usize, after: usize },
    /// From `step` on, crash the first member that provides state to a joiner, `after` steps
    /// after it did (mid-transfer for a multi-chunk state), once.
    CrashSenderMidTransfer { step: usize, after: usize },
    /// Cut `side` off from the rest at `step`, heal `len` steps later.
    Partition {
        side: Vec<usize>,
        step: usize,
        len: usize,
    },
    /// Joiner number `joiner` (node `initial + joiner`) asks to join at `step`.
    Join { joiner: usize, step: usize },
    /// `node` asks to leave at `step`.
    Leave { node: usize, step: usize },
    /// At `step`, the `pick`-th crashed node (counting from the lowest id, wrapping) restarts
    /// under its id as a new incarnation (`Sim::restart_node`, fresh memory and log) and joins
    /// through `Group::joining` (state transfer), an initial member included. Nothing if no
    /// node is crashed.
    Rejoin { pick: usize, step: usize },
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub seed: u64,
    pub initial: usize,
    pub events: Vec<Ev>,
    /// The joiners' state size (the transfer chunk is 256 bytes).
    pub state_size: usize,
    /// Steps with submissions, then steps to settle without.
    pub steps: usize,
    pub settle: usize,
}

/// One node's model application.
#[derive(Clone, Debug, Default)]
struct App {
    hash: u64,
    /// Next position to apply.
    next: u64,
    /// Whether it has state (initial members; joiners once restored).
    has_state: bool,
    /// Per sender, the counter of the last message delivered here.
    last_from: BTreeMap<usize, u32>,
    /// Every payload delivered here.
    delivered: BTreeSet<Vec<u8>>,
}

/// What became of a node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Fate {
    crashed: bool,
    /// On the minority side of a partition (it may stop; it is not a survivor).
    cut_off: bool,
    /// Asked to leave (the call succeeded).
    leaving: bool,
    /// Asked to join.
    joining: bool,
    /// A new incarnation of a crashed node (restarted under its id).
    restarted: bool,
}

impl Fate {
    fn lost(&self) -> bool {
        self.crashed || self.cut_off || self.leaving
    }
}

/// What happened in a run (for the coverage figures).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub views: u64,
    pub discarded: usize,
    pub activated: usize,
    pub leader_crashed_mid_trim: bool,
    pub sender_crashed_mid_transfer: bool,
    pub skipped: usize,
    pub rejoined: usize,
    /// The step at which the leader crashed at its decision (`leader_crashed_mid_trim`).
    pub leader_crash_step: Option<usize>,
    /// The armed leader crash came due (a leader held a decision) but the fault budget
    /// refused it.
    pub leader_crash_refused: bool,
}

struct Run {
    cfg: GroupConfig,
    sim: Sim,
    groups: Vec<Group<SimNode, MemLog>>,
    apps: Vec<App>,
    fate: Vec<Fate>,
    state_size: usize,
    /// Chain value after each position, the first node to record it.
    chain: BTreeMap<u64, (usize, u64)>,
    /// View id → members, and who first reported them.
    members: BTreeMap<u64, (usize, Vec<NodeId>)>,
    /// View id → the position at which it was installed with a trim, and by whom first.
    installed_at: BTreeMap<u64, (usize, u64)>,
    /// Per node: view id → position at which it installed it.
    installs: Vec<BTreeMap<u64, u64>>,
    next: Vec<u32>,
    submitted: Vec<Vec<Vec<u8>>>,
    /// Per node: the first of its submissions it answers for (a restart forgets the ones
    /// before: its old incarnation may have lost them in the crash).
    accountable_from: Vec<usize>,
    discarded: BTreeSet<Vec<u8>>,
    /// Payloads delivered anywhere.
    delivered_any: BTreeSet<Vec<u8>>,
    /// Per node: the member it last asked for the state.
    asked: Vec<Option<NodeId>>,
    /// The state sender and the step it provided, once armed.
    provided: Option<(usize, usize)>,
    sender_armed: Option<usize>,
    leader_armed: bool,
    /// Restart the leader crashed at its decision this many steps later.
    leader_restart_after: Option<usize>,
    /// A crashed leader to restart, and when.
    leader_restart: Option<(usize, usize)>,
    step: usize,
    stats: Stats,
    upcalls: Vec<Upcall<Delivery>>,
}

impl Run {
    fn new(plan: &Plan, tweak: &dyn Fn(&mut GroupConfig)) -> Run {
        let universe = plan.initial + JOINERS;
        let mut cfg = group_sim::config(universe, plan.initial);
        cfg.transfer.chunk_size = 256;
        cfg.transfer.window = 2;
        tweak(&mut cfg);
        let layout = Group::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(plan.seed), universe, &layout).unwrap();
        let groups = nodes
            .into_iter()
            .map(|t| Group::new(t, cfg.clone(), MemLog::default(), None).unwrap())
            .collect();
        let mut apps = vec![App::default(); universe];
        let mut installs = vec![BTreeMap::new(); universe];
        for i in 0..plan.initial {
            apps[i].has_state = true;
            installs[i].insert(0, 0);
        }
        let mut members = BTreeMap::new();
        members.insert(0, (0, cfg.gms.initial.clone()));
        Run {
            cfg,
            sim,
            groups,
            apps,
            fate: vec![Fate::default(); universe],
            state_size: plan.state_size.max(16),
            chain: BTreeMap::new(),
            members,
            installed_at: BTreeMap::new(),
            installs,
            next: vec![0; universe],
            submitted: vec![Vec::new(); universe],
            accountable_from: vec![0; universe],
            discarded: BTreeSet::new(),
            delivered_any: BTreeSet::new(),
            asked: vec![None; universe],
            provided: None,
            sender_armed: None,
            leader_armed: false,
            leader_restart_after: None,
            leader_restart: None,
            step: 0,
            stats: Stats::default(),
            upcalls: Vec::new(),
        }
    }

    /// The members of the newest view any node reported.
    fn newest_view(&self) -> &[NodeId] {
        self.members
            .values()
            .next_back()
            .map_or(&[][..], |(_, m)| m.as_slice())
    }

    /// Nodes that count against the group's majority now: lost and in the newest view, or lost
    /// and asking to join (they may be added yet); with `extra` counted too if it would be. A
    /// restarted node that has installed no view yet counts as lost where the newest view names
    /// it: that view may still name its old, crashed incarnation (found by the s18 soak: the
    /// leader crashed at its decision removing the old incarnation, leaving two of four).
    fn at_risk(&self, extra: &[usize]) -> usize {
        let v = self.newest_view();
        let stale = |i: usize| {
            self.fate[i].restarted && self.installs[i].is_empty() && v.contains(&NodeId(i as u32))
        };
        (0..self.groups.len())
            .filter(|&i| self.fate[i].lost() || extra.contains(&i) || stale(i))
            .filter(|&i| v.contains(&NodeId(i as u32)) || self.fate[i].joining)
            .count()
    }

    /// Whether `nodes` may be lost now and the group keep a majority of its newest view (the
    /// fault budget: a plan never asks the group for what it cannot survive).
    fn may_lose(&self, nodes: &[usize]) -> bool {
        nodes.iter().all(|&i| self.fate[i].lost())
            || 2 * self.at_risk(nodes) < self.newest_view().len()
    }

    fn crash(&mut self, i: usize) {
        if !self.fate[i].crashed {
            self.sim.crash(NodeId(i as u32));
            self.fate[i].crashed = true;
        }
    }

    /// Restarts crashed node `i` under its id (a new incarnation, fresh memory, empty log) and
    /// has it join: it holds no state until a transfer, like any joiner.
    fn rejoin(&mut self, i: usize) -> Result<(), String> {
        let Some(t) = self.sim.restart_node(NodeId(i as u32)) else {
            return Ok(());
        };
        self.groups[i] = Group::joining(t, self.cfg.clone(), MemLog::default())
            .map_err(|e| format!("n{i}: rejoining: {e}"))?;
        self.apps[i] = App::default();
        self.installs[i].clear();
        self.accountable_from[i] = self.submitted[i].len();
        // A node restarted inside a partition is still cut off (it may be suspected again
        // before the heal and wait for another restart): not a survivor.
        self.fate[i] = Fate {
            joining: true,
            restarted: true,
            cut_off: self.fate[i].cut_off,
            ..Fate::default()
        };
        self.stats.rejoined += 1;
        Ok(())
    }

    fn record(&mut self, i: usize, pos: u64, hash: u64) -> Result<(), String> {
        match self.chain.get(&pos) {
            Some(&(j, h)) if h != hash => {
                Err(format!("n{i}: chain at position {pos} differs from n{j}'s"))
            }
            Some(_) => Ok(()),
            None => {
                self.chain.insert(pos, (i, hash));
                Ok(())
            }
        }
    }

    fn check_members(&mut self, i: usize, id: u64, members: &[NodeId]) -> Result<(), String> {
        match self.members.get(&id) {
            Some((j, m)) if m != members => {
                return Err(format!("n{i} has view {id} as {members:?}, n{j} as {m:?}"));
            }
            Some(_) => {}
            None => {
                self.members.insert(id, (i, members.to_vec()));
            }
        }
        if let Some((_, prev)) = id.checked_sub(1).and_then(|p| self.members.get(&p)) {
            let kept = members.iter().filter(|m| prev.contains(m)).count();
            if 2 * kept <= prev.len() {
                return Err(format!(
                    "view {id} {members:?} lacks a majority of view {} {prev:?}",
                    id - 1
                ));
            }
        }
        Ok(())
    }

    fn deliver(&mut self, i: usize, d: &Delivery) -> Result<(), String> {
        let a = &self.apps[i];
        if !a.has_state {
            return Err(format!("n{i} delivered before it had the state"));
        }
        if d.position != a.next {
            return Err(format!(
                "n{i} delivered position {} when it expected {}",
                d.position, a.next
            ));
        }
        let s = sender_of(&d.payload);
        if s != d.sender.index() {
            return Err(format!("n{i}: a delivery names the wrong sender"));
        }
        let k = counter_of(&d.payload);
        if a.last_from.get(&s).is_some_and(|&last| last >= k) {
            return Err(format!(
                "n{i} delivered n{s}'s message {k} after its message {}",
                a.last_from[&s]
            ));
        }
        if self.discarded.contains(&d.payload) {
            return Err(format!(
                "n{i} delivered n{s}'s message {k}, which was reported discarded"
            ));
        }
        if !self.submitted[s].contains(&d.payload) {
            return Err(format!("n{i} delivered a message n{s} never submitted"));
        }
        let h = mix(a.hash, &d.payload);
        let a = &mut self.apps[i];
        a.hash = h;
        a.next += 1;
        a.last_from.insert(s, k);
        a.delivered.insert(d.payload.clone());
        self.delivered_any.insert(d.payload.clone());
        self.record(i, d.position, h)
    }

    /// A joiner's first view: restore the state it was sent.
    fn restore(
        &mut self,
        i: usize,
        s: &squall_membership::transfer::TransferredState,
    ) -> Result<(), String> {
        if self.apps[i].has_state {
            return Err(format!("n{i} got a state it did not need"));
        }
        if s.state.len() != self.state_size {
            return Err(format!("n{i}: transferred state has the wrong size"));
        }
        let hash = u64::from_le_bytes(s.state[..8].try_into().unwrap());
        let next = u64::from_le_bytes(s.state[8..16].try_into().unwrap());
        if next != s.position {
            return Err(format!("n{i}: state position disagrees with the snapshot"));
        }
        if s.state[16..].iter().any(|&b| b != (next as u8)) {
            return Err(format!("n{i}: state padding corrupted"));
        }
        // The chain is keyed by position; a joiner continues from the state's.
        let a = &mut self.apps[i];
        a.hash = hash;
        a.next = next;
        a.has_state = true;
        if next > 0 {
            self.record(i, next - 1, hash)?;
        }
        self.stats.activated += 1;
        Ok(())
    }

    fn poll(&mut self, i: usize) -> Result<(), String> {
        if self.fate[i].crashed {
            return Ok(());
        }
        self.upcalls.clear();
        self.groups[i].poll(&mut self.upcalls);
        let ups = std::mem::take(&mut self.upcalls);
        for u in &ups {
            match u {
                Upcall::Deliver(d) => self.deliver(i, d)?,
                Upcall::Discarded(p) => {
                    if sender_of(p) != i || !self.submitted[i].contains(p) {
                        return Err(format!(
                            "n{i} was told of a discard of a message it never sent"
                        ));
                    }
                    if self.delivered_any.contains(p) {
                        return Err(format!(
                            "n{i}'s message {} was reported discarded after it was delivered",
                            counter_of(p)
                        ));
                    }
                    if !self.discarded.insert(p.clone()) {
                        return Err(format!("n{i}: a message discarded twice"));
                    }
                    self.stats.discarded += 1;
                }
                Upcall::View(v) => {
                    if !v.members.contains(&NodeId(i as u32)) {
                        return Err(format!("n{i} reported view {} without itself", v.id));
                    }
                    self.check_members(i, v.id, &v.members)?;
                    if let Some(s) = self.groups[i].take_state() {
                        self.restore(i, &s)?;
                    } else {
                        if !self.apps[i].has_state {
                            return Err(format!("n{i} reported a view before its state arrived"));
                        }
                        // Installed with a trim: the same position everywhere.
                        let pos = self.apps[i].next;
                        match self.installed_at.get(&v.id) {
                            Some(&(j, p)) if p != pos => {
                                return Err(format!(
                                    "view {}: n{j} installed it at position {p}, n{i} at {pos}",
                                    v.id
                                ));
                            }
                            Some(_) => {}
                            None => {
                                self.installed_at.insert(v.id, (i, pos));
                            }
                        }
                    }
                    if self.installs[i].insert(v.id, self.apps[i].next).is_some() {
                        return Err(format!("n{i} reported view {} twice", v.id));
                    }
                    self.stats.views = self.stats.views.max(v.id);
                }
                Upcall::Wedged | Upcall::Durable(_) => {}
            }
        }
        if let Some(v) = self.groups[i].view() {
            let (id, m) = (v.id, v.members.clone());
            self.check_members(i, id, &m)?;
        }
        group_sim::check_decision_keeps_a_majority(i, self.groups[i].gms())?;
        // A joiner asks only a member that holds the state (or one that is gone: it cannot
        // know that yet). A restarted member waiting for its own state does not qualify.
        let asking = self.groups[i].state_sender();
        if asking != self.asked[i] {
            if let Some(s) = asking {
                let s = s.index();
                if !self.fate[s].lost() && !self.groups[s].is_active() {
                    return Err(format!(
                        "n{i} asked n{s} for the state, which holds none: {:?}",
                        self.groups[s]
                    ));
                }
            }
            self.asked[i] = asking;
        }
        let g = &mut self.groups[i];
        if !g.is_active()
            && g.view().is_some()
            && g.stopped().is_none()
            && g.submit(b"passive").is_ok()
        {
            return Err(format!("n{i}: a passive joiner accepted a submit"));
        }
        if self.groups[i].state_wanted() {
            let a = &self.apps[i];
            let mut s = a.hash.to_le_bytes().to_vec();
            s.extend_from_slice(&a.next.to_le_bytes());
            s.resize(self.state_size, a.next as u8);
            let next = a.next;
            self.groups[i]
                .provide_state(next, &s)
                .map_err(|e| format!("n{i}: provide_state: {e}"))?;
            if self.sender_armed.is_some() && self.provided.is_none() {
                self.provided = Some((i, self.step));
            }
        }
        Ok(())
    }

    fn maybe_submit(&mut self, i: usize) -> Result<(), String> {
        if self.fate[i].crashed || !self.groups[i].is_active() || self.sim.random(3) != 0 {
            return Ok(());
        }
        let k = self.next[i];
        let p = payload(i, k, self.sim.random(4) == 0);
        match self.groups[i].submit(&p) {
            Ok(()) => {
                self.submitted[i].push(p);
                self.next[i] += 1;
                Ok(())
            }
            Err(SubmitError::WindowFull | SubmitError::Wedged | SubmitError::Stopped(_)) => Ok(()),
            Err(e) => Err(format!("n{i}: submit: {e}")),
        }
    }

    fn leader_with_decision(&self) -> Option<usize> {
        (0..self.groups.len()).find(|&i| {
            !self.fate[i].crashed
                && self.groups[i].gms().leader() == Some(NodeId(i as u32))
                && self.groups[i].gms().decision().is_some()
        })
    }

    /// The plan's events due at the current step.
    fn events(&mut self, plan: &Plan) -> Result<(), String> {
        let step = self.step;
        let universe = self.groups.len();
        for e in &plan.events {
            match e {
                Ev::Crash { node, step: at } if *at == step => {
                    if self.may_lose(&[*node]) {
                        self.crash(*node);
                    } else {
                        self.stats.skipped += 1;
                    }
                }
                Ev::CrashLeaderAtDecision { step: at } if *at == step => self.leader_armed = true,
                Ev::RestartLeaderAtDecision { step: at, after } if *at == step => {
                    self.leader_armed = true;
                    self.leader_restart_after = Some(*after);
                }
                Ev::CrashSenderMidTransfer { step: at, after } if *at == step => {
                    self.sender_armed = Some(*after);
                }
                Ev::Partition {
                    side,
                    step: at,
                    len,
                } => {
                    if *at == step {
                        let side: Vec<usize> = side
                            .iter()
                            .copied()
                            .filter(|&i| !self.fate[i].crashed)
                            .collect();
                        if side.is_empty() || !self.may_lose(&side) {
                            self.stats.skipped += 1;
                            continue;
                        }
                        let a: Vec<NodeId> = side.iter().map(|&i| NodeId(i as u32)).collect();
                        let b: Vec<NodeId> = (0..universe)
                            .filter(|i| !side.contains(i))
                            .map(|i| NodeId(i as u32))
                            .collect();
                        self.sim.partition(&a, &b);
                        for &i in &side {
                            self.fate[i].cut_off = true;
                        }
                    }
                    if at + len == step {
                        self.sim.heal();
                    }
                }
                Ev::Join { joiner, step: at } if *at == step => {
                    let node = plan.initial + joiner;
                    // A crashed node's endpoint is closed: it cannot ask.
                    if !self.fate[node].joining && !self.fate[node].crashed {
                        self.fate[node].joining = true;
                        self.groups[node]
                            .join()
                            .map_err(|e| format!("n{node}: join: {e}"))?;
                    }
                }
                Ev::Rejoin { pick, step: at } if *at == step => {
                    let crashed: Vec<usize> =
                        (0..universe).filter(|&i| self.fate[i].crashed).collect();
                    if crashed.is_empty() {
                        self.stats.skipped += 1;
                    } else {
                        self.rejoin(crashed[pick % crashed.len()])?;
                    }
                }
                Ev::Leave { node, step: at } if *at == step => {
                    if self.fate[*node].leaving || !self.may_lose(&[*node]) {
                        self.stats.skipped += 1;
                    } else if self.groups[*node].is_active() && self.groups[*node].leave().is_ok() {
                        self.fate[*node].leaving = true;
                    }
                }
                _ => {}
            }
        }
        if self.leader_armed
            && let Some(l) = self.leader_with_decision()
        {
            self.leader_armed = false;
            let restart_after = self.leader_restart_after.take();
            if self.may_lose(&[l]) {
                self.crash(l);
                self.stats.leader_crashed_mid_trim = true;
                self.stats.leader_crash_step = Some(step);
                if let Some(after) = restart_after {
                    self.leader_restart = Some((l, step + after));
                }
            } else {
                self.stats.leader_crash_refused = true;
            }
        }
        if let Some((l, at)) = self.leader_restart
            && step >= at
        {
            self.leader_restart = None;
            if self.fate[l].crashed {
                self.rejoin(l)?;
            }
        }
        if let (Some(after), Some((s, at))) = (self.sender_armed, self.provided)
            && step >= at + after
        {
            self.sender_armed = None;
            if self.may_lose(&[s]) {
                self.crash(s);
                self.stats.sender_crashed_mid_transfer = true;
            }
        }
        Ok(())
    }
}

pub fn run(plan: &Plan) -> Result<Stats, String> {
    run_with(plan, &|_| {})
}

/// [`run`] with the group configuration changed by `tweak` (a shard layout, say).
pub fn run_with(plan: &Plan, tweak: &dyn Fn(&mut GroupConfig)) -> Result<Stats, String> {
    let mut r = Run::new(plan, tweak);
    let universe = r.groups.len();
    for step in 0..plan.steps + plan.settle {
        r.step = step;
        r.events(plan)?;
        for i in 0..universe {
            if step < plan.steps {
                r.maybe_submit(i)?;
            }
            r.poll(i).map_err(|e| format!("step {step}: {e}"))?;
        }
        r.sim.advance(Duration::from_micros(2));
    }
    check_end(plan, &r)?;
    Ok(r.stats)
}

/// The end-of-run checks (liveness within the fault budget, and accounting of every message).
fn check_end(plan: &Plan, r: &Run) -> Result<(), String> {
    let universe = r.groups.len();
    let survivors: Vec<usize> = (0..universe)
        .filter(|&i| !r.fate[i].lost() && (i < plan.initial || r.fate[i].joining))
        .collect();
    let first = *survivors.first().ok_or("no survivors")?;
    let last_view = r.groups[first].view().map(|v| v.id);
    for &i in &survivors {
        let g = &r.groups[i];
        if let Some(why) = g.stopped() {
            return Err(format!("survivor n{i} stopped: {why}"));
        }
        if !g.is_active() {
            return Err(format!("survivor n{i} is not active at the end: {g:?}"));
        }
        if g.view().map(|v| v.id) != last_view {
            return Err(format!(
                "n{i} ends in view {:?}, n{first} in {last_view:?}",
                g.view().map(|v| v.id)
            ));
        }
        if r.apps[i].next != r.apps[first].next {
            return Err(format!(
                "n{i} ends at position {}, n{first} at {}",
                r.apps[i].next, r.apps[first].next
            ));
        }
        let lv = last_view.unwrap_or(0);
        if let Some(&at) = r.installs[i].get(&lv)
            && r.apps[i].next <= at
        {
            return Err(format!("n{i} delivered nothing in its last view {lv}"));
        }
    }
    if r.apps[first].next < 20 {
        return Err("too few deliveries".into());
    }
    for i in 0..universe {
        if r.fate[i].leaving
            && !r.fate[i].crashed
            && !r.fate[i].cut_off
            && !r.groups[i].stopped().is_some_and(|w| w.starts_with("left"))
        {
            return Err(format!(
                "n{i} asked to leave but did not: {:?}",
                r.groups[i].stopped()
            ));
        }
    }
    // Every message a survivor or a leaver submitted: delivered (survivors agree on every
    // position; a joiner holds only the suffix after its state, so take them all) or reported
    // discarded, never both, never neither.
    let by_survivors: BTreeSet<Vec<u8>> = survivors
        .iter()
        .flat_map(|&i| r.apps[i].delivered.iter().cloned())
        .collect();
    let by_survivors = &by_survivors;
    let accountable = (0..universe).filter(|&i| {
        survivors.contains(&i) || (r.fate[i].leaving && !r.fate[i].crashed && !r.fate[i].cut_off)
    });
    for i in accountable {
        for p in &r.submitted[i][r.accountable_from[i]..] {
            if by_survivors.contains(p) == r.discarded.contains(p) {
                return Err(format!(
                    "n{i}'s message {}: delivered {} and discarded {}",
                    counter_of(p),
                    by_survivors.contains(p),
                    r.discarded.contains(p)
                ));
            }
        }
    }
    Ok(())
}
