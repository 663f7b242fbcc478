//! The replicated log: one CAS consensus instance per slot, a leader that keeps a window of slots
//! pre-prepared so the common case decides in one CAS round trip, Ω leader election from
//! heartbeats in acceptor memory, and in-order delivery through [`TotalOrder`].
//!
//! - **Ω**: every node bumps a heartbeat counter and writes it into every peer's
//!   [`HEARTBEATS`] region (one-sided, unsignaled). A node trusts the lowest-numbered node whose
//!   counter advanced within `leader_timeout` (itself always counts).
//! - **Leading**: the leader places commands in the `window` slots after the first undelivered
//!   one and keeps twice that many prepared ahead ([`Decree::prepare_only`]), so a slot that opens
//!   is already prepared. A prepared slot that finds an accepted value adopts and decides it (a
//!   previous leader's half-finished work); a prepared empty slot below a recovered one gets a
//!   no-op so the log has no holes; the others take queued commands, one accept round trip each.
//! - **Following**: `submit` on a follower sends the command to the leader (two-sided). Commands
//!   in flight when a leader fails may be lost or, if the old leader got them accepted, decided
//!   later: at most once, never twice. `smr-core` retries with deduplication.
//! - **Learning**: every node learns each slot from its own memory and delivers slots in order,
//!   skipping no-ops. The leader announces a decision by piggybacking it on its next accept
//!   (Velos §5.4: the `back` field of the next slot's word, see [`crate::word`]) to every acceptor
//!   known to hold the decided value; only when no accept follows in the same poll, or for an
//!   acceptor that missed the value, does it write the decision word.
//! - **Slot reuse**: the log is a ring of `layout.slots` positions. Every node publishes how many
//!   slots it delivered (its [`PROGRESS`] word, at every heartbeat and whenever it moved a quarter
//!   of the ring). A leader uses slot `s` only once every node it considers live (heartbeat within
//!   `leader_timeout`) delivered `s - slots`, and each acceptor resets its word for a position to
//!   the next lap's empty state once every live node delivered the slot that used it. Words carry
//!   the lap and value buffers the absolute slot, so an old lap is never taken for a new one. A
//!   node that was presumed dead and finds its next slot's position in a later lap has fallen a
//!   whole ring behind: it reports [`Upcall::Wedged`] and stops (it needs a state transfer).

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall, View};
use squall_transport::mux::{Mux, MuxHandle};
use squall_transport::{
    LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Time, Transport,
};

pub use crate::decree::default_rpc_threshold;
use crate::decree::{Announce, Config, ConfigError, Decree, MAX_BACK, claimed_past, learn_local};
use crate::layout::{DECISIONS, Layout, SLOTS};
use crate::rpc::{Message, RpcAcceptor};
use crate::word::{SlotWord, lap_of};

/// Heartbeat counters, one word per node.
pub const HEARTBEATS: RegionId = RegionId(0x5041_0004);
/// Delivery progress, one word per node: how many slots it delivered.
pub const PROGRESS: RegionId = RegionId(0x5041_0005);

const NOOP: u8 = 0;
const COMMAND: u8 = 1;

/// Settings of a CAS-Paxos log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    /// Sizes; `slots` is the ring (at least `2 * window + 1`; make it larger than the slots
    /// delivered in a heartbeat period or two, or the leader waits for progress reports), and
    /// `max_value_len` must leave 5 bytes of header room beyond the largest command.
    pub layout: Layout,
    /// Slots the leader has commands in flight in; it keeps twice as many prepared ahead.
    pub window: usize,
    /// Commands queued at the leader (or not yet forwarded) before `submit` says `WindowFull`.
    pub max_pending: usize,
    /// Backoff range after an aborted attempt.
    pub backoff: (Duration, Duration),
    /// How often each node bumps its heartbeat.
    pub heartbeat_period: Duration,
    /// A node whose heartbeat has not moved for this long is not trusted as leader.
    pub leader_timeout: Duration,
    /// A node whose heartbeat has not moved for this long no longer holds back slot reuse (at
    /// least `leader_timeout`). Were it only slow, it later finds itself a whole ring behind and
    /// stops with [`Upcall::Wedged`]; make this long compared with the pauses a live node may see.
    pub recycle_timeout: Duration,
    /// Seed for backoff randomness.
    pub seed: u64,
    /// Where a slot word freezes and its acceptor switches to the two-sided fallback
    /// ([`crate::rpc`]); [`default_rpc_threshold`] unless testing the fallback.
    pub rpc_threshold: u32,
}

impl LogConfig {
    /// The regions every node must register.
    pub fn regions(&self) -> Vec<RegionSpec> {
        let mut r = self.layout.regions();
        r.push(RegionSpec::new(HEARTBEATS, self.layout.proposers * 8));
        r.push(RegionSpec::new(PROGRESS, self.layout.proposers * 8));
        r
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.window == 0 || self.max_pending == 0 || self.layout.max_value_len < 6 {
            return Err(ConfigError::Transport(
                "window, max_pending and max_value_len must be positive (max_value_len > 5)".into(),
            ));
        }
        if self.layout.slots <= 2 * self.window {
            return Err(ConfigError::Transport(format!(
                "layout.slots = {} must exceed 2 * window = {} (the leader prepares two windows ahead)",
                self.layout.slots,
                2 * self.window
            )));
        }
        if self.heartbeat_period.is_zero() || self.leader_timeout <= self.heartbeat_period {
            return Err(ConfigError::Transport(
                "leader_timeout must exceed heartbeat_period".into(),
            ));
        }
        let n = self.layout.proposers;
        if self.rpc_threshold as usize <= n || self.rpc_threshold > crate::word::MAX_PROPOSAL {
            return Err(ConfigError::Threshold(self.rpc_threshold));
        }
        if self.recycle_timeout < self.leader_timeout {
            return Err(ConfigError::Transport(
                "recycle_timeout must be at least leader_timeout".into(),
            ));
        }
        Ok(())
    }
}

/// A node of the CAS-Paxos log.
pub struct CasPaxos<T: Transport> {
    mux: Mux<T>,
    ctl: MuxHandle<T>,
    me: usize,
    n: usize,
    cfg: LogConfig,
    /// Instances of slots this node proposes in (or learns through), by absolute slot.
    slots: BTreeMap<u64, Decree<MuxHandle<T>>>,
    next_deliver: u64,
    /// The progress this node last published.
    published: u64,
    /// Positions of slots below this are reset for their next lap in this node's memory.
    reset_below: u64,
    /// Decisions this node made and has not announced yet: (slot, proposal, announceable by a
    /// piggyback).
    mine: VecDeque<(u64, u32, bool)>,
    /// Per proposal, the lowest slot where this node ran an accept at it that did not decide:
    /// piggyback claims at that proposal stop below it.
    taint: BTreeMap<u32, u64>,
    /// The undelivered slot this node has been waiting on, and since when.
    stuck: (u64, Time),
    /// This node's two-sided acceptor, for slots whose words froze.
    acceptor: Rc<RefCell<RpcAcceptor>>,
    stats: Stats,
    wedged: bool,
    /// Commands this node (as leader) will place in slots.
    queue: VecDeque<Vec<u8>>,
    /// Commands submitted here while another node leads, waiting to be forwarded.
    outbox: VecDeque<Vec<u8>>,
    leader: usize,
    view: u64,
    beat: u64,
    next_beat: Time,
    seen: Vec<(u64, Time)>,
    buf: Vec<u8>,
    started: bool,
}

/// Counters of how decisions were announced (for tests and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Decisions this node made.
    pub decided: u64,
    /// Decisions announced by piggybacking on a later accept.
    pub piggybacked: u64,
    /// Decision words written explicitly (one per peer written to).
    pub decision_writes: u64,
    /// Slots delivered here that were learned through a piggyback in local memory.
    pub learned_by_piggyback: u64,
}

impl<T: Transport> std::fmt::Debug for CasPaxos<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CasPaxos")
            .field("me", &self.me)
            .field("leader", &self.leader)
            .field("next_deliver", &self.next_deliver)
            .field("wedged", &self.wedged)
            .field("published", &self.published)
            .field("ring_floor", &self.min_live_progress())
            .field("reset_below", &self.reset_below)
            .field("instances", &self.slots.iter().take(4).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

fn encode(kind: u8, sender: NodeId, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(5 + payload.len());
    v.push(kind);
    v.extend_from_slice(&sender.0.to_le_bytes());
    v.extend_from_slice(payload);
    v
}

fn decode(value: &[u8]) -> Option<(u8, NodeId, &[u8])> {
    let (&kind, rest) = value.split_first()?;
    let (id, payload) = rest.split_at_checked(4)?;
    Some((
        kind,
        NodeId(u32::from_le_bytes(id.try_into().ok()?)),
        payload,
    ))
}

impl<T: Transport> CasPaxos<T> {
    /// A log node over `transport`, which must have registered [`LogConfig::regions`] and link
    /// nodes `0..layout.proposers`.
    pub fn new(transport: T, cfg: LogConfig) -> Result<CasPaxos<T>, ConfigError> {
        cfg.validate()?;
        let ids: Vec<RegionId> = cfg.regions().iter().map(|r| r.id).collect();
        for spec in cfg.regions() {
            if transport.region(spec.id).is_none_or(|r| r.len() < spec.len) {
                return Err(ConfigError::Transport(format!(
                    "region {} is missing or short",
                    spec.id
                )));
            }
        }
        let n = transport.peers().len() + 1;
        if n != cfg.layout.proposers {
            return Err(ConfigError::Proposers(n));
        }
        let me = transport.local_id().index();
        let now = transport.now();
        let mux = Mux::new(transport, &ids);
        let ctl = mux.handle();
        Ok(CasPaxos {
            ctl,
            mux,
            me,
            n,
            slots: BTreeMap::new(),
            next_deliver: 0,
            published: 0,
            reset_below: 0,
            mine: VecDeque::new(),
            taint: BTreeMap::new(),
            stuck: (0, now),
            acceptor: Rc::new(RefCell::new(RpcAcceptor::new(
                cfg.layout,
                cfg.rpc_threshold,
            ))),
            stats: Stats::default(),
            wedged: false,
            queue: VecDeque::new(),
            outbox: VecDeque::new(),
            leader: 0,
            view: 0,
            beat: 0,
            next_beat: now,
            seen: vec![(0, now); n],
            buf: Vec::new(),
            started: false,
            cfg,
        })
    }

    /// The node this node currently trusts as leader.
    pub fn leader(&self) -> NodeId {
        NodeId(self.leader as u32)
    }

    /// How decisions were announced so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The next slot this node will deliver (how many it delivered, no-ops included).
    pub fn delivered(&self) -> u64 {
        self.next_deliver
    }

    /// Runs `f` on the underlying endpoint (tests, metrics).
    pub fn with_transport<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.mux.with(f)
    }

    fn decree(&mut self, slot: u64) -> Option<&mut Decree<MuxHandle<T>>> {
        if !self.slots.contains_key(&slot) {
            let cfg = Config {
                layout: self.cfg.layout,
                backoff_min: self.cfg.backoff.0,
                backoff_max: self.cfg.backoff.1,
                seed: self.cfg.seed ^ slot,
                announce: Announce::Defer { scan: self.scan() },
                rpc_threshold: self.cfg.rpc_threshold,
            };
            match Decree::new(self.mux.handle(), cfg, slot) {
                Ok(d) => {
                    self.slots
                        .insert(slot, d.with_acceptor(self.acceptor.clone()));
                }
                Err(e) => {
                    tracing::error!(slot, error = %e, "cas-paxos: cannot create a slot instance");
                    return None;
                }
            }
        }
        self.slots.get_mut(&slot)
    }

    /// How far a decision may be piggybacked ahead (and learners look): the leader places
    /// commands at most a window past its first undelivered slot, which the decision's slot was
    /// at most a window before.
    fn scan(&self) -> usize {
        (2 * self.cfg.window).min(MAX_BACK)
    }

    fn live(&self, p: usize, now: Time) -> bool {
        p == self.me || now.saturating_since(self.seen[p].1) < self.cfg.leader_timeout
    }

    /// Whether `p` still holds back slot reuse.
    fn holds_ring(&self, p: usize, now: Time) -> bool {
        p == self.me || now.saturating_since(self.seen[p].1) < self.cfg.recycle_timeout
    }

    /// The least progress among the nodes that hold back slot reuse (itself included).
    fn min_live_progress(&self) -> u64 {
        let now = self.ctl.now();
        let progress = self.ctl.region(PROGRESS);
        (0..self.n)
            .filter(|&p| self.holds_ring(p, now))
            .map(|p| match (p == self.me, progress) {
                (true, _) => self.next_deliver,
                (false, Some(r)) => r.load(p),
                (false, None) => 0,
            })
            .min()
            .unwrap_or(self.next_deliver)
    }

    /// Stores `value` in this node's word of `region` and writes it to every peer's copy.
    fn publish(&mut self, region: RegionId, value: u64) {
        let Some(r) = self.ctl.region(region).cloned() else {
            return;
        };
        r.store(self.me, value);
        let src = LocalSlice::new(region, self.me * 8, 8);
        for peer in self.ctl.peers().to_vec() {
            let _ = self.ctl.write(
                peer,
                src,
                RemoteAddr::new(region, self.me * 8),
                Signal::Unsignaled,
            );
        }
    }

    fn publish_progress(&mut self) {
        self.published = self.next_deliver;
        self.publish(PROGRESS, self.next_deliver);
    }

    /// Resets this node's acceptor words of slots every live node delivered to the next lap's
    /// empty state (the acceptor's only local action; it runs off the critical path).
    fn recycle(&mut self) {
        let upto = self.min_live_progress();
        let ring = self.cfg.layout.slots as u64;
        let Some(words) = self.ctl.region(SLOTS).cloned() else {
            return;
        };
        for slot in self.reset_below.max(upto.saturating_sub(ring))..upto {
            let pos = self.cfg.layout.position(slot);
            let lap = lap_of(slot, self.cfg.layout.slots);
            let next = SlotWord::empty(lap.wrapping_add(1)).pack();
            let mut w = words.load(pos);
            // Only this lap's state moves on; a CAS that lands in between is retried.
            while SlotWord::unpack(w).lap == lap {
                match words.compare_and_swap(pos, w, next) {
                    Ok(_) => break,
                    Err(actual) => w = actual,
                }
            }
        }
        self.reset_below = self.reset_below.max(upto);
        self.acceptor.borrow_mut().forget_below(self.reset_below);
    }

    /// Heartbeats out; leader choice from the heartbeats in.
    fn omega(&mut self, out: &mut Vec<Upcall<Delivery>>) {
        let now = self.ctl.now();
        if now >= self.next_beat {
            self.beat += 1;
            self.next_beat = now + self.cfg.heartbeat_period;
            self.publish(HEARTBEATS, self.beat);
            self.publish_progress();
        }
        if let Some(hb) = self.ctl.region(HEARTBEATS).cloned() {
            for p in 0..self.n {
                let v = hb.load(p);
                if v != self.seen[p].0 {
                    self.seen[p] = (v, now);
                }
            }
        }
        let leader = (0..self.n).find(|&p| self.live(p, now)).unwrap_or(self.me);
        if leader != self.leader || !self.started {
            self.started = true;
            self.leader = leader;
            self.view += 1;
            out.push(Upcall::View(View {
                id: self.view,
                members: (0..self.n as u32).map(NodeId).collect(),
                leader: Some(NodeId(leader as u32)),
            }));
            tracing::debug!(me = self.me, leader, "cas-paxos: trusting a new leader");
            // Commands queued for leading go back to forwarding if we no longer lead.
            if leader != self.me {
                self.outbox.extend(self.queue.drain(..));
            }
        }
    }

    fn forward(&mut self) {
        if self.leader == self.me {
            self.queue.extend(self.outbox.drain(..));
            return;
        }
        while let Some(cmd) = self.outbox.pop_front() {
            if self
                .ctl
                .send(NodeId(self.leader as u32), &cmd, Signal::Unsignaled)
                .is_err()
            {
                self.outbox.push_front(cmd);
                return;
            }
        }
    }

    fn receive(&mut self) {
        while let Some(from) = self.ctl.recv(&mut self.buf) {
            if !Message::is_rpc(&self.buf) {
                if decode(&self.buf).is_some_and(|(kind, ..)| kind == COMMAND) {
                    self.queue.push_back(std::mem::take(&mut self.buf));
                }
                continue;
            }
            match Message::decode(&self.buf) {
                Ok(Message::Request(req)) => {
                    let Some(words) = self.ctl.region(SLOTS).cloned() else {
                        continue;
                    };
                    let reply = self.acceptor.borrow_mut().handle(&words, &req);
                    let _ =
                        self.ctl
                            .send(from, &Message::Reply(reply).encode(), Signal::Unsignaled);
                }
                Ok(Message::Reply(reply)) => {
                    if let Some(d) = self.slots.get_mut(&reply.slot) {
                        d.on_message(from, &self.buf);
                    }
                }
                Err(e) => {
                    tracing::warn!(me = self.me, %from, error = %e, "cas-paxos: malformed message")
                }
            }
        }
    }

    /// Requests this node's two-sided acceptor served (the fallback in use).
    pub fn rpc_served(&self) -> u64 {
        self.acceptor.borrow().served()
    }

    /// The slots whose words froze and the state this node's two-sided acceptor holds for them
    /// (for checkers that read acceptor state).
    pub fn rpc_states(&self) -> Vec<(u64, crate::rpc::AcceptorState)> {
        self.acceptor.borrow().states()
    }

    /// Collects the decisions this node's instances made, to announce them.
    fn collect_decisions(&mut self) {
        for (&slot, d) in self.slots.iter_mut() {
            if let Some(dec) = d.take_decision() {
                self.stats.decided += 1;
                self.mine.push_back((slot, dec.proposal, dec.in_words));
            }
        }
    }

    /// Writes slot `slot`'s decision word (already in local memory) to every peer.
    fn write_decision(&mut self, slot: u64) {
        let at = self.cfg.layout.position(slot) * 8;
        let src = LocalSlice::new(DECISIONS, at, 8);
        for peer in self.ctl.peers().to_vec() {
            let _ = self.ctl.write(
                peer,
                src,
                RemoteAddr::new(DECISIONS, at),
                Signal::Unsignaled,
            );
            self.stats.decision_writes += 1;
        }
    }

    /// The piggyback field for an accept in `slot` at `proposal`: it claims every slot below
    /// `B = min(delivered, first slot where an accept at this proposal did not decide)`; the
    /// decisions this covers need no decision word.
    fn piggyback_for(&mut self, slot: u64, proposal: u32) -> u8 {
        let bound = self
            .taint
            .get(&proposal)
            .map_or(self.next_deliver, |&t| t.min(self.next_deliver));
        let k = slot.saturating_sub(bound);
        if k == 0 || k > self.scan() as u64 {
            return 0;
        }
        let before = self.mine.len();
        self.mine
            .retain(|&(j, p, in_words)| !(j < bound && p == proposal && in_words));
        self.stats.piggybacked += (before - self.mine.len()) as u64;
        k as u8
    }

    /// Decisions no accept carried in this poll are written out.
    fn flush_announcements(&mut self) {
        while let Some((slot, ..)) = self.mine.pop_front() {
            self.write_decision(slot);
        }
    }

    /// The leader's work: keep two windows prepared, fill holes, place commands in the first.
    fn lead(&mut self) {
        if self.leader != self.me || self.wedged {
            return;
        }
        let ring = self.cfg.layout.slots as u64;
        // A position is free once every live node delivered its previous slot.
        let limit = self.min_live_progress() + ring;
        let w = self.cfg.window as u64;
        let prepare_end = (self.next_deliver + 2 * w).min(limit);
        let end = (self.next_deliver + w).min(limit);
        for s in self.next_deliver..prepare_end {
            if let Some(d) = self.decree(s) {
                if d.learned().is_none() {
                    let _ = d.prepare_only();
                }
            }
        }
        // The highest slot in the window that holds (or is deciding) a value.
        let busy_top = (self.next_deliver..prepare_end).rev().find(|s| {
            self.slots
                .get(s)
                .is_some_and(|d| d.learned().is_some() || d.has_value())
        });
        let me = NodeId(self.me as u32);
        for s in self.next_deliver..end {
            let Some((prepared, proposal, words_only)) = self
                .slots
                .get(&s)
                .map(|d| (d.prepared(), d.proposal(), d.words_only()))
            else {
                continue;
            };
            if !prepared {
                continue;
            }
            let value = if busy_top.is_some_and(|top| top > s) {
                encode(NOOP, me, &[])
            } else if let Some(cmd) = self.queue.pop_front() {
                cmd
            } else {
                continue;
            };
            // A claim rides in the slot words: only when every acceptor gets one.
            let back = if words_only {
                self.piggyback_for(s, proposal)
            } else {
                0
            };
            let Some(d) = self.slots.get_mut(&s) else {
                continue;
            };
            d.piggyback(back);
            if d.propose(&value).is_err() && value.first() == Some(&COMMAND) {
                self.queue.push_front(value);
            }
        }
    }

    fn deliver(&mut self, out: &mut Vec<Upcall<Delivery>>) -> bool {
        let mut any = false;
        // Someone delivered a whole ring past this node's next slot: that slot's position was
        // reused without it (it was presumed dead), so its value may be gone here.
        let ring = self.cfg.layout.slots as u64;
        let lapped = self
            .ctl
            .region(PROGRESS)
            .is_some_and(|r| (0..self.n).any(|p| r.load(p) > self.next_deliver + ring));
        if lapped {
            self.wedge(out);
        }
        while !self.wedged {
            let slot = self.next_deliver;
            let value = match self.slots.get(&slot) {
                Some(d) if d.learned().is_some() => d.learned().map(<[u8]>::to_vec),
                Some(d) if d.stale() => {
                    self.wedge(out);
                    break;
                }
                _ => learn_local(&self.ctl, &self.cfg.layout, slot, self.scan()).map(
                    |(v, piggyback)| {
                        self.stats.learned_by_piggyback += u64::from(piggyback);
                        v
                    },
                ),
            };
            let Some(value) = value else {
                // Fallen a whole ring behind: this slot's position is in a later lap here.
                if let Some(words) = self.ctl.region(SLOTS) {
                    let w = SlotWord::unpack(words.load(self.cfg.layout.position(slot)));
                    let lap = lap_of(slot, self.cfg.layout.slots);
                    if w.lap != lap && w.lap.wrapping_sub(lap) < 128 {
                        self.wedge(out);
                    }
                }
                break;
            };
            if let Some((kind, sender, payload)) = decode(&value) {
                if kind == COMMAND {
                    out.push(Upcall::Deliver(Delivery {
                        position: slot,
                        sender,
                        payload: payload.to_vec(),
                    }));
                    out.push(Upcall::Durable(slot));
                }
            }
            // The slot is learned and delivered: drop its instance (its buffers stay in memory),
            // remembering accepts of ours that did not decide it.
            if let Some(d) = self.slots.remove(&slot) {
                for p in d.undecided_accepts() {
                    let t = self.taint.entry(p).or_insert(slot);
                    *t = (*t).min(slot);
                }
            }
            self.next_deliver += 1;
            any = true;
        }
        if self.next_deliver - self.published >= (self.cfg.layout.slots as u64 / 4).max(1) {
            self.publish_progress();
        }
        // A taint a ring old can no longer matter: those positions moved on.
        let ring = self.cfg.layout.slots as u64;
        self.taint.retain(|_, t| *t + ring >= self.next_deliver);
        self.recover();
        any
    }

    /// A node waiting too long on a slot that others already delivered (its decider crashed
    /// before announcing it, or this node's word missed the decided value) learns it the Paxos
    /// way: prepare, adopt the chosen value, decide again.
    ///
    /// A piggyback claim past the slot is proof enough to start at once (the claim landed after
    /// this node's word for the slot, which therefore missed the decided value); otherwise the
    /// node waits two heartbeat periods and needs some node's progress past the slot.
    fn recover(&mut self) {
        let now = self.ctl.now();
        let slot = self.next_deliver;
        if self.wedged {
            return;
        }
        let claimed = self.slots.get(&slot).is_none_or(|d| d.idle())
            && claimed_past(&self.ctl, &self.cfg.layout, slot, self.scan());
        if claimed {
            if let Some(d) = self.decree(slot) {
                d.retry();
            }
            self.stuck = (slot, now);
            return;
        }
        if self.stuck.0 != slot {
            self.stuck = (slot, now);
            return;
        }
        // Progress is published at every heartbeat: two periods without learning a slot some
        // node already delivered means this node's words missed it (e.g. the accepts reached it
        // before it had reset the positions for their lap, so no claim landed here either).
        if now.saturating_since(self.stuck.1) < self.cfg.heartbeat_period * 2 {
            return;
        }
        let ahead = self
            .ctl
            .region(PROGRESS)
            .is_some_and(|r| (0..self.n).any(|p| r.load(p) > slot));
        if ahead {
            if let Some(d) = self.decree(slot) {
                d.retry();
            }
            self.stuck = (slot, now);
        }
    }

    fn wedge(&mut self, out: &mut Vec<Upcall<Delivery>>) {
        if !self.wedged {
            self.wedged = true;
            tracing::error!(
                me = self.me,
                slot = self.next_deliver,
                "cas-paxos: fell a whole ring behind; this node needs a state transfer"
            );
            out.push(Upcall::Wedged);
        }
    }
}

impl<T: Transport> TotalOrder for CasPaxos<T> {
    fn me(&self) -> NodeId {
        NodeId(self.me as u32)
    }

    fn submit(&mut self, payload: &[u8]) -> Result<(), SubmitError> {
        let max = self.cfg.layout.max_value_len - 5;
        if payload.len() > max {
            return Err(SubmitError::TooLarge {
                len: payload.len(),
                max,
            });
        }
        if self.wedged {
            return Err(SubmitError::Stopped(
                "this node fell a whole ring behind and needs a state transfer".into(),
            ));
        }
        if self.queue.len() + self.outbox.len() >= self.cfg.max_pending {
            return Err(SubmitError::WindowFull);
        }
        self.outbox
            .push_back(encode(COMMAND, NodeId(self.me as u32), payload));
        Ok(())
    }

    fn poll(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> bool {
        let before = upcalls.len();
        self.omega(upcalls);
        self.receive();
        self.forward();
        let mut changed = false;
        for d in self.slots.values_mut() {
            changed |= d.poll();
        }
        // The control handle's own events (errors of heartbeat and forwarding writes) carry
        // nothing the log acts on: leadership follows heartbeats, not link errors.
        let mut events = [squall_transport::Event::PeerFailed {
            peer: NodeId(u32::MAX),
            cause: squall_transport::FailureCause::Local,
        }; 16];
        while self.ctl.poll(&mut events) == events.len() {}
        self.collect_decisions();
        changed |= self.deliver(upcalls);
        self.recycle();
        self.lead();
        self.flush_announcements();
        changed || upcalls.len() > before
    }

    fn wait(&mut self, timeout: Duration) {
        self.ctl.wait(timeout.min(self.cfg.heartbeat_period));
    }

    fn waker(&self) -> squall_transport::Waker {
        self.ctl.waker()
    }
}
