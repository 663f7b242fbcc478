//! A simulated universe running the membership core with a model multicast epoch, checking the
//! membership safety properties after every step.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use squall_membership::log::MemLog;
use squall_membership::trim::{Trim, ragged_prefix};
use squall_membership::view::View;
use squall_membership::{Epoch, Gms, GmsConfig, GmsError, GmsEvent, StopReason};
use squall_transport::{NodeId, RegionId};
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

/// Detector timing for simulations: the sim's op timeout is 1 ms.
pub fn config(universe: usize, initial: usize) -> GmsConfig {
    let mut c = GmsConfig::new(
        RegionId(0),
        (0..universe as u32).map(NodeId).collect(),
        (0..initial as u32).map(NodeId).collect(),
    );
    c.heartbeat_interval = Duration::from_micros(50);
    c.suspicion_timeout = Duration::from_micros(1500);
    c
}

/// One node's model epoch: per sender (rank order) how many messages it received; frozen at
/// the wedge.
#[derive(Clone, Debug, Default)]
pub struct ModelEpoch {
    pub view: u64,
    pub rx: Vec<u64>,
    pub frozen: bool,
    /// What `wedge` returned, per view.
    pub at_wedge: BTreeMap<u64, Vec<u64>>,
}

impl Epoch for ModelEpoch {
    fn wedge(&mut self, view: &View) -> Vec<u64> {
        assert_eq!(view.id, self.view, "wedged a view the epoch is not in");
        assert!(!self.frozen, "wedged twice in view {}", view.id);
        self.frozen = true;
        self.at_wedge.insert(view.id, self.rx.clone());
        self.rx.clone()
    }
}

pub struct Cluster {
    pub sim: Sim,
    pub nodes: Vec<Option<Gms<SimNode, MemLog>>>,
    pub epochs: Vec<ModelEpoch>,
    /// Messages sent per view, per sender rank.
    pub sent: BTreeMap<u64, Vec<u64>>,
    /// The membership every installer of a view agreed on.
    pub installed: BTreeMap<u64, Vec<NodeId>>,
    /// The trim every installer of view v + 1 applied to view v.
    pub trims: BTreeMap<u64, Trim>,
    /// Per view, per sender rank: the most of its messages that were ever stable in the view
    /// (received by every member of the sender's shard, cut to the gap-free round-robin
    /// prefix), so that some member, a departed one included, may have delivered them.
    pub stable: BTreeMap<u64, Vec<u64>>,
    /// Per node: its current view.
    pub views: Vec<Option<View>>,
    pub stopped: Vec<Option<StopReason>>,
    pub crashed: Vec<bool>,
    pub events: Vec<GmsEvent>,
    /// Whether the members apply the majority rule (the minority check follows it).
    pub partition_safety: bool,
}

mod majority;
#[allow(unused_imports)] // Not every test crate that includes this module checks decisions.
pub use majority::check_decision_keeps_a_majority;

impl Cluster {
    pub fn new(seed: u64, cfg: &GmsConfig) -> Cluster {
        Cluster::with_logs(seed, cfg, vec![Vec::new(); cfg.universe.len()])
    }

    /// A universe whose nodes restart from the given log bytes (empty: a fresh node).
    pub fn with_logs(seed: u64, cfg: &GmsConfig, logs: Vec<Vec<u8>>) -> Cluster {
        let n = cfg.universe.len();
        let layout = [Gms::<SimNode, MemLog>::layout(cfg).unwrap()];
        let (sim, endpoints) = Sim::cluster(SimConfig::seeded(seed), n, &layout).unwrap();
        let nodes: Vec<_> = endpoints
            .into_iter()
            .zip(logs)
            .map(|(t, bytes)| {
                let (log, rec) = MemLog::open(bytes);
                Some(Gms::new(t, cfg.clone(), log, Some(&rec)).unwrap())
            })
            .collect();
        let views: Vec<Option<View>> = nodes
            .iter()
            .map(|g| g.as_ref().unwrap().view().cloned())
            .collect();
        let epochs = views
            .iter()
            .map(|v| ModelEpoch {
                view: v.as_ref().map_or(0, |v| v.id),
                rx: vec![0; v.as_ref().map_or(0, |v| v.members.len())],
                ..ModelEpoch::default()
            })
            .collect();
        let mut installed = BTreeMap::new();
        installed.insert(0, cfg.initial.clone());
        for v in views.iter().flatten() {
            installed.insert(v.id, v.members.clone());
        }
        Cluster {
            sim,
            nodes,
            epochs,
            sent: BTreeMap::new(),
            installed,
            trims: BTreeMap::new(),
            stable: BTreeMap::new(),
            views,
            stopped: vec![None; n],
            crashed: vec![false; n],
            events: Vec::new(),
            partition_safety: cfg.partition_safety,
        }
    }

    pub fn gms(&self, i: usize) -> &Gms<SimNode, MemLog> {
        self.nodes[i].as_ref().unwrap()
    }

    pub fn is_running(&self, i: usize) -> bool {
        self.nodes[i].is_some() && self.stopped[i].is_none() && !self.crashed[i]
    }

    pub fn crash(&mut self, i: usize) {
        self.sim.crash(NodeId(i as u32));
        self.crashed[i] = true;
    }

    /// The node some running member considers its leader (the lowest-ranked unsuspected).
    pub fn a_leader(&self) -> Option<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.is_running(i))
            .find_map(|i| self.gms(i).leader())
            .map(|n| n.index())
    }

    /// Polls node `i` and checks everything it reports.
    pub fn poll(&mut self, i: usize) -> Result<(), String> {
        if !self.is_running(i) {
            return Ok(());
        }
        self.events.clear();
        let g = self.nodes[i].as_mut().unwrap();
        let r = g.poll(&mut self.epochs[i], &mut self.events);
        let events = std::mem::take(&mut self.events);
        for e in &events {
            self.check_event(i, e)?;
        }
        self.events = events;
        check_decision_keeps_a_majority(i, self.gms(i))?;
        match r {
            Ok(_) => Ok(()),
            Err(GmsError::Stopped(why)) => {
                if self.stopped[i].as_ref() != Some(&why) {
                    return Err(format!("n{i} stopped ({why}) without reporting it"));
                }
                Ok(())
            }
            Err(e) => Err(format!("n{i}: {e}")),
        }
    }

    fn check_event(&mut self, i: usize, e: &GmsEvent) -> Result<(), String> {
        match e {
            GmsEvent::Wedged { view } => {
                if self.views[i].as_ref().map(|v| v.id) != Some(*view) {
                    return Err(format!("n{i} wedged view {view} it is not in"));
                }
            }
            GmsEvent::Stopped(why) => self.stopped[i] = Some(why.clone()),
            GmsEvent::ViewInstalled { view, trim } => {
                // Agreement on membership.
                match self.installed.get(&view.id) {
                    Some(m) if *m != view.members => {
                        return Err(format!(
                            "n{i} installed view {} as {:?}, others as {m:?}",
                            view.id, view.members
                        ));
                    }
                    _ => {
                        self.installed.insert(view.id, view.members.clone());
                    }
                }
                // A majority of the predecessor.
                if let Some(prev) = view.id.checked_sub(1).and_then(|p| self.installed.get(&p)) {
                    let kept = view.members.iter().filter(|m| prev.contains(m)).count();
                    if 2 * kept <= prev.len() {
                        return Err(format!(
                            "view {} {:?} lacks a majority of view {} {prev:?}",
                            view.id,
                            view.members,
                            view.id - 1
                        ));
                    }
                }
                if let Some(t) = trim {
                    let old = self.views[i]
                        .clone()
                        .ok_or_else(|| format!("n{i} got a trim without a view"))?;
                    if old.id + 1 != view.id || t.view != old.id {
                        return Err(format!(
                            "n{i} went from view {} to {} with a trim for {}",
                            old.id, view.id, t.view
                        ));
                    }
                    // Same trim everywhere (virtual synchrony).
                    match self.trims.get(&t.view) {
                        Some(x) if x != t => {
                            return Err(format!(
                                "n{i} applied trim {t:?} to view {}, others {x:?}",
                                t.view
                            ));
                        }
                        _ => {
                            self.trims.insert(t.view, t.clone());
                        }
                    }
                    // Deliverable: the installer holds every message up to the trim.
                    let rx = self.epochs[i]
                        .at_wedge
                        .get(&t.view)
                        .ok_or_else(|| format!("n{i} installed without wedging"))?;
                    let me = NodeId(i as u32);
                    let same_shard = |s: &NodeId| {
                        old.shards
                            .iter()
                            .any(|sh| sh.members.contains(s) && sh.members.contains(&me))
                    };
                    for (k, (s, c)) in t.counts.iter().enumerate() {
                        if same_shard(s) && *c > rx[k] {
                            return Err(format!(
                                "n{i} must deliver {c} messages of {s} in view {} but holds {}",
                                t.view, rx[k]
                            ));
                        }
                    }
                    // Uniform agreement: every message that was ever stable (so some member,
                    // a leaver that crashed since included, may have delivered it) is within
                    // the trim.
                    if let Some(stable) = self.stable.get(&t.view) {
                        for (k, (s, c)) in t.counts.iter().enumerate() {
                            let st = stable.get(k).copied().unwrap_or(0);
                            if *c < st {
                                return Err(format!(
                                    "n{i}: the trim of view {} delivers {c} messages of {s}, but {st} were stable (uniform agreement)",
                                    t.view
                                ));
                            }
                        }
                    }
                    let counts: Vec<u64> = t.counts.iter().map(|x| x.1).collect();
                    if old.shards.len() == 1 && ragged_prefix(&counts) != counts {
                        return Err(format!("trim {counts:?} is not a gap-free prefix"));
                    }
                }
                if view.contains(NodeId(i as u32)) {
                    self.epochs[i].view = view.id;
                    self.epochs[i].rx = vec![0; view.members.len()];
                    self.epochs[i].frozen = false;
                }
                self.views[i] = Some(view.clone());
            }
        }
        Ok(())
    }

    /// Model traffic: a random unwedged member sends, a random unwedged member receives the next
    /// message of a random sender of its view.
    pub fn traffic(&mut self) {
        let n = self.nodes.len();
        let s = self.sim.random(n as u64) as usize;
        if self.is_running(s) && !self.epochs[s].frozen {
            if let Some(v) = &self.views[s] {
                if let Some(rank) = v.rank_of(NodeId(s as u32)) {
                    let sent = self
                        .sent
                        .entry(v.id)
                        .or_insert_with(|| vec![0; v.members.len()]);
                    sent[rank] += 1;
                    self.epochs[s].rx[rank] = sent[rank];
                }
            }
        }
        let r = self.sim.random(n as u64) as usize;
        if self.is_running(r) && !self.epochs[r].frozen {
            if let Some(v) = &self.views[r] {
                let k = self.sim.random(v.members.len() as u64) as usize;
                let sent = self.sent.get(&v.id).map_or(0, |s| s[k]);
                let e = &mut self.epochs[r];
                if e.view == v.id && e.rx.len() == v.members.len() && e.rx[k] < sent {
                    e.rx[k] += 1;
                }
            }
        }
    }

    /// Records in [`stable`](Cluster::stable) what is stable now in each view a node is in:
    /// per shard, per sender the fewest of its messages any member of the shard holds (a
    /// member's counts frozen at its wedge or crash; 0 for one not in the view yet), cut to
    /// the gap-free round-robin prefix. A round-robin member delivers exactly such messages.
    pub fn note_stable(&mut self) {
        let mut seen: Vec<u64> = Vec::new();
        for v in self.views.iter().flatten() {
            if seen.contains(&v.id) {
                continue;
            }
            seen.push(v.id);
            let held = |m: NodeId, k: usize| {
                let e = &self.epochs[m.index()];
                let rx = if e.view == v.id {
                    Some(&e.rx)
                } else {
                    e.at_wedge.get(&v.id)
                };
                rx.and_then(|rx| rx.get(k).copied()).unwrap_or(0)
            };
            let mut now = vec![0u64; v.members.len()];
            for sh in &v.shards {
                let mins: Vec<u64> = (sh.members.iter())
                    .map(|&s| {
                        let k = v.rank_of(s).unwrap_or(0);
                        sh.members.iter().map(|&m| held(m, k)).min().unwrap_or(0)
                    })
                    .collect();
                for (&s, c) in sh.members.iter().zip(ragged_prefix(&mins)) {
                    if let Some(k) = v.rank_of(s) {
                        now[k] = c;
                    }
                }
            }
            let best = self
                .stable
                .entry(v.id)
                .or_insert_with(|| vec![0; now.len()]);
            for (b, n) in best.iter_mut().zip(now) {
                *b = (*b).max(n);
            }
        }
    }

    /// One round: every running node that takes its turn polls, some traffic, then the fabric.
    pub fn step(&mut self) -> Result<(), String> {
        for i in 0..self.nodes.len() {
            if self.is_running(i) && self.sim.takes_turn(NodeId(i as u32)) {
                self.poll(i)?;
            }
        }
        self.check_minority_rule()?;
        for _ in 0..2 {
            self.traffic();
        }
        self.note_stable();
        let quantum = 500 + self.sim.random(2500);
        self.sim.advance(Duration::from_nanos(quantum));
        Ok(())
    }

    /// A running member that sees less than a majority of its view has stopped (a member
    /// restarting from its log waits instead: it installs nothing without a majority).
    pub fn check_minority_rule(&self) -> Result<(), String> {
        for i in 0..self.nodes.len() {
            if !self.is_running(i) || !self.partition_safety {
                continue;
            }
            let g = self.gms(i);
            if g.restarting().is_some() {
                continue;
            }
            if let Some(v) = g.view() {
                let suspects = g.sst().suspects();
                let alive = v.members.iter().filter(|m| !suspects.contains(m)).count();
                if alive < v.majority() {
                    return Err(format!(
                        "n{i} sees {alive} of view {} {:?} and has not stopped",
                        v.id, v.members
                    ));
                }
            }
        }
        Ok(())
    }

    /// Steps until `done` holds or `max` steps passed; returns whether it held.
    pub fn run_until(
        &mut self,
        max: usize,
        mut done: impl FnMut(&Cluster) -> bool,
    ) -> Result<bool, String> {
        for _ in 0..max {
            if done(self) {
                return Ok(true);
            }
            self.step()?;
        }
        Ok(done(self))
    }

    /// Whether every running node that is a member is in view `id` with `members`.
    pub fn settled_on(&self, id: u64, members: &[u32]) -> bool {
        let want: Vec<NodeId> = members.iter().map(|&m| NodeId(m)).collect();
        want.iter().all(|m| {
            self.views[m.index()]
                .as_ref()
                .is_some_and(|v| v.id == id && v.members == want)
        })
    }
}
