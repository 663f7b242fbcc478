//! The subgroup checker model of `sim_subgroups.rs`, shared with `sim_colocated.rs` and
//! `sim_shards.rs`: a hash-chain application per (subgroup, shard) over `Group` on the
//! simulator. Every payload
//! carries the submitter's shard. Checked after every step, per (subgroup, shard): gap-free
//! positions; one chain value per position on every member of the shard; nothing delivered by
//! a node outside the shard, by a spare or before its state arrived; `placement()` on each
//! `Upcall::View` naming the member's shard and exactly its members; virtual synchrony (the
//! members of a shard that report view `v` start it at one position); no node changing shard
//! while it stays in the group; spares and passive nodes refusing submits; every node that
//! installs a view installing the same members. Its snapshot is `[hash][position]`, padded
//! with [`Run::state_pad`] zero bytes.
//!
//! Across total restarts ([`Run::life`]): each life is a fresh fabric whose members restart
//! from their GMS log bytes and durable epoch files; the chain values per position and what
//! every view of every shard delivered carry over, so a restarted member's replay must agree
//! with every earlier life's deliveries position by position (a common prefix), and the
//! restart view must start each shard at or past every position delivered before (nothing
//! delivered lost: the uniform check).

use std::collections::BTreeMap;
use std::time::Duration;

use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::MemLog;
use squall_membership::view::{ShardId, View};
use squall_ordering::{Delivery, TotalOrder, Upcall};
use squall_round_robin::Mode;
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

use super::mix;
use super::uniform::Uniform;

#[derive(Clone, Debug, Default)]
pub struct App {
    pub hash: u64,
    pub next: u64,
    /// The shard whose state it holds.
    pub shard: Option<ShardId>,
    /// The view its deliveries are in (the last it reported, or took its state in).
    pub view: u64,
}

pub struct Run {
    pub sim: Sim,
    pub groups: Vec<Group<SimNode, MemLog>>,
    pub apps: Vec<App>,
    pub crashed: Vec<bool>,
    /// The last view each node was seen in.
    pub seen: Vec<Option<View>>,
    /// (shard, position) -> chain value after it.
    pub chain: BTreeMap<(ShardId, u64), u64>,
    /// (shard, view) -> the position the view started at.
    pub starts: BTreeMap<(ShardId, u64), u64>,
    /// Uniform agreement: what each view of each shard delivered.
    pub uniform: Uniform,
    pub counter: u64,
    pub upcalls: Vec<Upcall<Delivery>>,
    /// View id -> its members, as the first node seen in it installed it: every node that
    /// installs the view must install the same members (one top-level view shared by every
    /// subgroup).
    pub views: BTreeMap<u64, Vec<NodeId>>,
    /// Crash this node as soon as a live member is wedged (a view change is under way).
    pub crash_on_wedge: Option<usize>,
    /// Steps run so far.
    pub step: usize,
    /// When each node became active by state transfer (virtual time).
    pub activated: Vec<Option<Duration>>,
    /// Members asked for their state do not provide it (a transfer never completes).
    pub withhold: bool,
    /// Zero bytes appended to every state provided (a longer transfer).
    pub state_pad: usize,
    /// Per node restarted from a log in this life: the shard it delivered in before, until
    /// its replay (or the restart view) gives its application that shard back. Taken by a
    /// state transfer instead when it joins again.
    pub carried: Vec<Option<ShardId>>,
    /// The endpoints of the nodes not started yet in this life ([`Boot::Late`]).
    pub late: Vec<Option<SimNode>>,
}

/// What a node is at the start of a life ([`Run::life`]).
#[derive(Clone, Debug)]
pub enum Boot {
    /// Started from these GMS log bytes and its durable files (a fresh start when empty).
    Log(Vec<u8>),
    /// Down for the whole life: crashed at once, so its peers are told it failed.
    Down,
    /// Not started: no peer links it (it is *absent*) until [`Run::start_late`].
    Late,
}

impl Run {
    pub fn new(seed: u64, cfg: &GroupConfig, universe: usize) -> Run {
        let layout = Group::<SimNode, MemLog>::layout(cfg).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(seed), universe, &layout).unwrap();
        let groups: Vec<Group<SimNode, MemLog>> = nodes
            .into_iter()
            .map(|t| Group::new(t, cfg.clone(), MemLog::default(), None).unwrap())
            .collect();
        let apps = groups
            .iter()
            .map(|g| App {
                shard: g.placement().filter(|_| g.is_active()).map(|p| p.shard),
                ..App::default()
            })
            .collect();
        Run {
            sim,
            groups,
            apps,
            crashed: vec![false; universe],
            seen: vec![None; universe],
            chain: BTreeMap::new(),
            starts: BTreeMap::new(),
            uniform: Uniform::default(),
            counter: 0,
            upcalls: Vec::new(),
            views: BTreeMap::new(),
            crash_on_wedge: None,
            step: 0,
            activated: vec![None; universe],
            withhold: false,
            state_pad: 0,
            carried: vec![None; universe],
            late: (0..universe).map(|_| None).collect(),
        }
    }

    /// Virtual time since the simulation started.
    pub fn now(&self) -> Duration {
        self.sim
            .now()
            .saturating_since(squall_transport::Time::ZERO)
    }

    /// A life of the cluster on a fresh fabric (`seed`): node `i` as `boot[i]` says, with
    /// `cfg(i)` (durable epochs, for a restart). `before`: the previous life, whose groups are
    /// dropped first; its chain values, uniform record, message counter and each node's shard
    /// carry over (views and virtual-synchrony starts are per life: a restart may number a view
    /// again). A node that is down or late holds a placeholder group (never polled, on another
    /// fabric, without durable files) and counts as crashed.
    pub fn life(
        seed: u64,
        boot: &[Boot],
        cfg: &dyn Fn(usize) -> GroupConfig,
        before: Option<Run>,
    ) -> Run {
        let universe = boot.len();
        let layout = Group::<SimNode, MemLog>::layout(&cfg(0)).unwrap();
        let late: Vec<NodeId> = (0..universe)
            .filter(|&i| matches!(boot[i], Boot::Late))
            .map(|i| NodeId(i as u32))
            .collect();
        let (sim, nodes) =
            Sim::cluster_late(SimConfig::seeded(seed), universe, &layout, &late).unwrap();
        let (_other, spare) = Sim::cluster(SimConfig::seeded(seed), universe, &layout).unwrap();
        let (chain, uniform, counter, had) = match before {
            Some(b) => {
                let Run {
                    groups,
                    chain,
                    uniform,
                    counter,
                    apps,
                    ..
                } = b;
                drop(groups);
                let had = apps.iter().map(|a| a.shard).collect();
                (chain, uniform, counter, had)
            }
            None => (BTreeMap::new(), Uniform::default(), 0, vec![None; universe]),
        };
        let mut r = Run {
            sim,
            groups: Vec::new(),
            apps: vec![App::default(); universe],
            crashed: vec![false; universe],
            seen: vec![None; universe],
            chain,
            starts: BTreeMap::new(),
            uniform,
            counter,
            upcalls: Vec::new(),
            views: BTreeMap::new(),
            crash_on_wedge: None,
            step: 0,
            activated: vec![None; universe],
            withhold: false,
            state_pad: 0,
            carried: vec![None; universe],
            late: (0..universe).map(|_| None).collect(),
        };
        for ((i, t), p) in nodes.into_iter().enumerate().zip(spare) {
            match &boot[i] {
                Boot::Log(bytes) => {
                    r.groups.push(open(t, cfg(i), bytes));
                    r.carried[i] = had[i];
                    let g = &r.groups[i];
                    if bytes.is_empty() {
                        r.apps[i].shard = g.placement().filter(|_| g.is_active()).map(|p| p.shard);
                    }
                }
                Boot::Down | Boot::Late => {
                    let mut c = cfg(i);
                    c.epoch.mode = Mode::Atomic;
                    r.groups
                        .push(Group::new(p, c, MemLog::default(), None).unwrap());
                    r.crashed[i] = true;
                    r.carried[i] = had[i];
                    if matches!(boot[i], Boot::Down) {
                        drop(t);
                        r.sim.crash(NodeId(i as u32));
                    } else {
                        r.late[i] = Some(t);
                    }
                }
            }
        }
        r
    }

    /// Starts late node `i` now ([`Boot::Late`]) from the GMS log bytes `bytes` (fresh when
    /// empty) with `cfg`.
    pub fn start_late(&mut self, i: usize, cfg: GroupConfig, bytes: &[u8]) {
        let t = self.late[i].take().unwrap();
        self.sim.start_node(NodeId(i as u32));
        self.groups[i] = open(t, cfg, bytes);
        self.crashed[i] = false;
    }

    pub fn crash(&mut self, i: usize) {
        self.sim.crash(NodeId(i as u32));
        self.crashed[i] = true;
    }

    pub fn record(&mut self, s: ShardId, pos: u64, hash: u64, i: usize) -> Result<(), String> {
        match *self.chain.entry((s, pos)).or_insert(hash) {
            h if h != hash => Err(format!(
                "n{i}: {s} state at position {pos} differs from another member's"
            )),
            _ => Ok(()),
        }
    }

    pub fn deliver(&mut self, i: usize, d: &Delivery) -> Result<(), String> {
        if self.apps[i].shard.is_none() {
            // A restarted member's replay: its application rebuilds its shard's state.
            self.apps[i].shard = self.carried[i].take();
        }
        let Some(s) = self.apps[i].shard else {
            return Err(format!("n{i} delivered without a shard's state"));
        };
        let from = ShardId {
            subgroup: d.payload[0] as usize,
            shard: d.payload[1] as usize,
        };
        if from != s {
            return Err(format!("n{i} of {s} delivered a message of {from}"));
        }
        if d.position != self.apps[i].next {
            return Err(format!(
                "n{i} delivered position {} when it expected {}",
                d.position, self.apps[i].next
            ));
        }
        self.uniform.delivered(s, self.apps[i].view, d.position);
        let h = mix(self.apps[i].hash, &d.payload);
        self.apps[i].hash = h;
        self.apps[i].next += 1;
        self.record(s, d.position, h, i)
    }

    pub fn view(&mut self, i: usize, v: &squall_ordering::View) -> Result<(), String> {
        let g = &mut self.groups[i];
        let p = g
            .placement()
            .ok_or_else(|| format!("n{i} reported view {} in no shard", v.id))?;
        let s = p.shard;
        let mine = g.view().and_then(|w| w.shard(s)).map(|sh| &sh.members);
        if p.view != v.id || !p.members.contains(&NodeId(i as u32)) || mine != Some(&p.members) {
            return Err(format!(
                "n{i}: placement {p:?} does not match view {}",
                v.id
            ));
        }
        if let Some(st) = g.take_state() {
            if self.apps[i].shard.is_some() {
                return Err(format!("n{i} got a state it did not need"));
            }
            // A restarted member that joins again takes the state instead of its logs'.
            self.carried[i] = None;
            let hash = u64::from_le_bytes(st.state[..8].try_into().unwrap());
            let next = u64::from_le_bytes(st.state[8..16].try_into().unwrap());
            if next != st.position {
                return Err(format!("n{i}: state position disagrees"));
            }
            self.apps[i] = App {
                hash,
                next,
                shard: Some(s),
                view: v.id,
            };
            self.uniform.check(i, s, v.id, next)?;
            if next > 0 {
                self.record(s, next - 1, hash, i)?;
            }
            self.activated[i] = Some(self.now());
            return Ok(());
        }
        if self.apps[i].shard.is_none() {
            // A restarted member whose replay was empty.
            self.apps[i].shard = self.carried[i].take();
        }
        if self.apps[i].shard != Some(s) {
            return Err(format!(
                "n{i} reported view {} in {s} but holds {:?}'s state",
                v.id, self.apps[i].shard
            ));
        }
        let at = self.apps[i].next;
        self.apps[i].view = v.id;
        self.uniform.check(i, s, v.id, at)?;
        match *self.starts.entry((s, v.id)).or_insert(at) {
            p if p != at => Err(format!(
                "virtual synchrony: n{i} starts view {} of {s} at {at}, another member at {p}",
                v.id
            )),
            _ => Ok(()),
        }
    }

    pub fn poll(&mut self, i: usize) -> Result<(), String> {
        if self.crashed[i] {
            return Ok(());
        }
        self.upcalls.clear();
        self.groups[i].poll(&mut self.upcalls);
        let ups = std::mem::take(&mut self.upcalls);
        for u in &ups {
            match u {
                Upcall::Deliver(d) => self.deliver(i, d)?,
                Upcall::View(v) => self.view(i, v)?,
                _ => {}
            }
        }
        self.upcalls = ups;
        let g = &mut self.groups[i];
        if g.stopped().is_none()
            && let Some(v) = g.view().cloned()
        {
            let now = v.shard_id_of(NodeId(i as u32));
            if let Some(had) = self.apps[i].shard
                && now != Some(had)
            {
                return Err(format!("n{i} moved from {had} to {now:?} in view {}", v.id));
            }
            if !g.is_active() && g.submit(&[0, 0]).is_ok() {
                return Err(format!("n{i}: a passive node or spare accepted a submit"));
            }
            super::check_inadequate_keeps_holders(i, self.seen[i].as_ref(), &v)?;
            let first = self.views.entry(v.id).or_insert_with(|| v.members.clone());
            if *first != v.members {
                return Err(format!(
                    "n{i} installed view {} as {:?}, another node as {first:?}",
                    v.id, v.members
                ));
            }
            if self.seen[i].as_ref().is_none_or(|l| l.id != v.id) {
                self.seen[i] = Some(v);
            }
        }
        if g.state_wanted() && !self.withhold {
            let a = &self.apps[i];
            let mut st = a.hash.to_le_bytes().to_vec();
            st.extend_from_slice(&a.next.to_le_bytes());
            st.resize(16 + self.state_pad, 0);
            g.provide_state(a.next, &st)
                .map_err(|e| format!("n{i}: provide_state: {e}"))?;
        }
        Ok(())
    }

    pub fn submit(&mut self, i: usize) {
        if self.crashed[i] || !self.groups[i].is_active() || self.sim.random(3) != 0 {
            return;
        }
        let Some(p) = self.groups[i].placement() else {
            return;
        };
        self.counter += 1;
        let mut m = vec![p.shard.subgroup as u8, p.shard.shard as u8, i as u8];
        m.extend_from_slice(&self.counter.to_le_bytes());
        let _ = self.groups[i].submit(&m);
    }

    pub fn run(&mut self, steps: usize, submit: bool) -> Result<(), String> {
        for _ in 0..steps {
            self.step += 1;
            if let Some(c) = self.crash_on_wedge
                && !self.crashed[c]
                && (0..self.groups.len())
                    .any(|i| !self.crashed[i] && self.groups[i].gms().is_wedged())
            {
                self.crash(c);
                self.crash_on_wedge = None;
            }
            for i in 0..self.groups.len() {
                if submit {
                    self.submit(i);
                }
                self.poll(i)?;
            }
            self.sim.advance(std::time::Duration::from_micros(2));
        }
        Ok(())
    }

    pub fn live(&self) -> Vec<usize> {
        (0..self.groups.len())
            .filter(|&i| !self.crashed[i] && self.groups[i].view().is_some())
            .collect()
    }

    /// Every live node is in the same adequate view; in each shard every member is active, at
    /// the same position, past `min_delivered`.
    pub fn settled(&self, min_delivered: u64) -> Result<(), String> {
        let live = self.live();
        let v = self.groups[live[0]].view().unwrap().clone();
        if let Some(why) = &v.inadequate {
            return Err(format!("the last view is inadequate: {why}"));
        }
        if let Some(i) = live
            .iter()
            .find(|&&i| self.groups[i].view().map(|w| w.id) != Some(v.id))
        {
            return Err(format!("n{i} in another view than n{}", live[0]));
        }
        for shard in &v.shards {
            let s = shard.id;
            let first = shard.members[0].0 as usize;
            for m in &shard.members {
                let i = m.0 as usize;
                if !self.groups[i].is_active() || self.apps[i].shard != Some(s) {
                    return Err(format!("n{i} is not active in {s}"));
                }
                if self.apps[i].next != self.apps[first].next {
                    return Err(format!(
                        "{s}: n{i} at {} but n{first} at {}",
                        self.apps[i].next, self.apps[first].next
                    ));
                }
            }
            if self.apps[first].next < min_delivered {
                return Err(format!("{s} delivered only {}", self.apps[first].next));
            }
        }
        Ok(())
    }

    /// Every node of `nodes` stopped, saying `why`.
    pub fn stopped_for(&self, nodes: &[usize], why: &str) -> Result<(), String> {
        for &i in nodes {
            let stopped = self.groups[i]
                .stopped()
                .ok_or(format!("n{i} still runs: {:?}", self.groups[i]))?;
            if !stopped.contains(why) {
                return Err(format!("n{i}: {stopped}"));
            }
        }
        Ok(())
    }

    pub fn members(&self, i: usize, s: ShardId) -> Vec<NodeId> {
        self.groups[i]
            .view()
            .unwrap()
            .shard(s)
            .unwrap()
            .members
            .clone()
    }
}

/// A group over `t` from the GMS log bytes `bytes` (a fresh start when empty).
fn open(t: SimNode, cfg: GroupConfig, bytes: &[u8]) -> Group<SimNode, MemLog> {
    let (log, rec) = MemLog::open(bytes.to_vec());
    let rec = (!rec.records.is_empty()).then_some(rec);
    Group::new(t, cfg, log, rec.as_ref()).unwrap()
}
