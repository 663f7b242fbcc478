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

use std::collections::BTreeMap;
use std::time::Duration;

use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::MemLog;
use squall_membership::view::{ShardId, View};
use squall_ordering::{Delivery, TotalOrder, Upcall};
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
        }
    }

    /// Virtual time since the simulation started.
    pub fn now(&self) -> Duration {
        self.sim
            .now()
            .saturating_since(squall_transport::Time::ZERO)
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
