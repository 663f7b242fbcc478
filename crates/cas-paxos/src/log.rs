//! The replicated log: one CAS consensus instance per slot, a leader that keeps a window of slots
//! pre-prepared so the common case decides in one CAS round trip, Ω leader election from
//! heartbeats in acceptor memory, and in-order delivery through [`TotalOrder`].
//!
//! - **Ω**: every node bumps a heartbeat counter and writes it into every peer's
//!   [`HEARTBEATS`] region (one-sided, unsignaled). A node trusts the lowest-numbered node whose
//!   counter advanced within `leader_timeout` (itself always counts).
//! - **Leading**: the leader keeps the `window` slots after the first undelivered one prepared
//!   ([`Decree::prepare_only`]). A prepared slot that finds an accepted value adopts and decides it
//!   (a previous leader's half-finished work); a prepared empty slot below a recovered one gets a
//!   no-op so the log has no holes; the others take queued commands, one accept round trip each.
//! - **Following**: `submit` on a follower sends the command to the leader (two-sided). Commands
//!   in flight when a leader fails may be lost or, if the old leader got them accepted, decided
//!   later: at most once, never twice. `smr-core` retries with deduplication.
//! - **Learning**: every node learns each slot from its own memory (the decider writes the
//!   decision after the value) and delivers slots in order, skipping no-ops.
//!
//! The log holds `layout.slots` slots; reusing slots needs the whole group to have learned them
//! and is not done yet, so a full log refuses new commands with [`SubmitError::Stopped`].

use std::collections::VecDeque;
use std::time::Duration;

use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall, View};
use squall_transport::mux::{Mux, MuxHandle};
use squall_transport::{
    LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Time, Transport,
};

use crate::decree::{Config, ConfigError, Decree};
use crate::layout::{DECISIONS, Layout};

/// Heartbeat counters, one word per node.
pub const HEARTBEATS: RegionId = RegionId(0x5041_0004);

const NOOP: u8 = 0;
const COMMAND: u8 = 1;

/// Settings of a CAS-Paxos log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    /// Sizes; `slots` is the log's capacity and `max_value_len` must leave 5 bytes of header
    /// room beyond the largest command.
    pub layout: Layout,
    /// Slots the leader keeps prepared ahead.
    pub window: usize,
    /// Commands queued at the leader (or not yet forwarded) before `submit` says `WindowFull`.
    pub max_pending: usize,
    /// Backoff range after an aborted attempt.
    pub backoff: (Duration, Duration),
    /// How often each node bumps its heartbeat.
    pub heartbeat_period: Duration,
    /// A node whose heartbeat has not moved for this long is not trusted as leader.
    pub leader_timeout: Duration,
    /// Seed for backoff randomness.
    pub seed: u64,
}

impl LogConfig {
    /// The regions every node must register.
    pub fn regions(&self) -> Vec<RegionSpec> {
        let mut r = self.layout.regions();
        r.push(RegionSpec::new(HEARTBEATS, self.layout.proposers * 8));
        r
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.window == 0 || self.max_pending == 0 || self.layout.max_value_len < 6 {
            return Err(ConfigError::Transport(
                "window, max_pending and max_value_len must be positive (max_value_len > 5)".into(),
            ));
        }
        if self.heartbeat_period.is_zero() || self.leader_timeout <= self.heartbeat_period {
            return Err(ConfigError::Transport(
                "leader_timeout must exceed heartbeat_period".into(),
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
    slots: Vec<Option<Decree<MuxHandle<T>>>>,
    next_deliver: usize,
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

impl<T: Transport> std::fmt::Debug for CasPaxos<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CasPaxos")
            .field("me", &self.me)
            .field("leader", &self.leader)
            .field("next_deliver", &self.next_deliver)
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
            slots: (0..cfg.layout.slots).map(|_| None).collect(),
            next_deliver: 0,
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

    /// Runs `f` on the underlying endpoint (tests, metrics).
    pub fn with_transport<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.mux.with(f)
    }

    fn decree(&mut self, slot: usize) -> Option<&mut Decree<MuxHandle<T>>> {
        if slot >= self.slots.len() {
            return None;
        }
        if self.slots[slot].is_none() {
            let cfg = Config {
                layout: self.cfg.layout,
                backoff_min: self.cfg.backoff.0,
                backoff_max: self.cfg.backoff.1,
                seed: self.cfg.seed ^ slot as u64,
            };
            match Decree::new(self.mux.handle(), cfg, slot) {
                Ok(d) => self.slots[slot] = Some(d),
                Err(e) => {
                    tracing::error!(slot, error = %e, "cas-paxos: cannot create a slot instance");
                    return None;
                }
            }
        }
        self.slots[slot].as_mut()
    }

    /// Heartbeats out; leader choice from the heartbeats in.
    fn omega(&mut self, out: &mut Vec<Upcall<Delivery>>) {
        let now = self.ctl.now();
        if now >= self.next_beat {
            self.beat += 1;
            self.next_beat = now + self.cfg.heartbeat_period;
            if let Some(hb) = self.ctl.region(HEARTBEATS).cloned() {
                hb.store(self.me, self.beat);
                let src = LocalSlice::new(HEARTBEATS, self.me * 8, 8);
                for peer in self.ctl.peers().to_vec() {
                    let _ = self.ctl.write(
                        peer,
                        src,
                        RemoteAddr::new(HEARTBEATS, self.me * 8),
                        Signal::Unsignaled,
                    );
                }
            }
        }
        if let Some(hb) = self.ctl.region(HEARTBEATS).cloned() {
            for p in 0..self.n {
                let v = hb.load(p);
                if v != self.seen[p].0 {
                    self.seen[p] = (v, now);
                }
            }
        }
        let timeout = self.cfg.leader_timeout;
        let leader = (0..self.n)
            .find(|&p| p == self.me || now.saturating_since(self.seen[p].1) < timeout)
            .unwrap_or(self.me);
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
        while let Some(_from) = self.ctl.recv(&mut self.buf) {
            if decode(&self.buf).is_some() {
                self.queue.push_back(std::mem::take(&mut self.buf));
            }
        }
    }

    /// The leader's work: keep the window prepared, fill holes, place commands.
    fn lead(&mut self) {
        if self.leader != self.me {
            return;
        }
        let end = (self.next_deliver + self.cfg.window).min(self.slots.len());
        for s in self.next_deliver..end {
            if let Some(d) = self.decree(s) {
                if d.learned().is_none() {
                    let _ = d.prepare_only();
                }
            }
        }
        // The highest slot in the window that holds (or is deciding) a value.
        let busy_top = (self.next_deliver..end).rev().find(|&s| {
            self.slots[s]
                .as_ref()
                .is_some_and(|d| d.learned().is_some() || d.has_value())
        });
        let me = NodeId(self.me as u32);
        for s in self.next_deliver..end {
            let Some(d) = self.slots[s].as_mut() else {
                continue;
            };
            if !d.prepared() {
                continue;
            }
            if busy_top.is_some_and(|top| top > s) {
                let _ = d.propose(&encode(NOOP, me, &[]));
            } else if let Some(cmd) = self.queue.pop_front() {
                if d.propose(&cmd).is_err() {
                    self.queue.push_front(cmd);
                }
            }
        }
    }

    fn deliver(&mut self, out: &mut Vec<Upcall<Delivery>>) -> bool {
        let mut any = false;
        while let Some(Some(d)) = self.slots.get(self.next_deliver) {
            let Some(value) = d.learned() else { break };
            if let Some((kind, sender, payload)) = decode(value) {
                if kind == COMMAND {
                    out.push(Upcall::Deliver(Delivery {
                        position: self.next_deliver as u64,
                        sender,
                        payload: payload.to_vec(),
                    }));
                    out.push(Upcall::Durable(self.next_deliver as u64));
                }
            }
            // The slot is learned and delivered: drop its instance (its buffers stay in memory).
            self.slots[self.next_deliver] = None;
            self.next_deliver += 1;
            any = true;
        }
        // Learn slots this node has no instance for yet (it never proposed in them).
        if let Some(None) = self.slots.get(self.next_deliver) {
            let decided = self
                .ctl
                .region(DECISIONS)
                .is_some_and(|r| r.load(self.next_deliver) != 0);
            if decided {
                let _ = self.decree(self.next_deliver);
            }
        }
        any
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
        if self.queue.len() + self.outbox.len() >= self.cfg.max_pending {
            return Err(SubmitError::WindowFull);
        }
        if self.next_deliver >= self.slots.len() {
            return Err(SubmitError::Stopped(format!(
                "the log's {} slots are used up; raise layout.slots",
                self.slots.len()
            )));
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
        self.lead();
        let mut changed = false;
        for d in self
            .slots
            .iter_mut()
            .skip(self.next_deliver)
            .take(self.cfg.window * 2)
            .flatten()
        {
            changed |= d.poll();
        }
        // The control handle's own events (errors of heartbeat and forwarding writes) carry
        // nothing the log acts on: leadership follows heartbeats, not link errors.
        let mut events = [squall_transport::Event::PeerFailed {
            peer: NodeId(u32::MAX),
            cause: squall_transport::FailureCause::Local,
        }; 16];
        while self.ctl.poll(&mut events) == events.len() {}
        changed |= self.deliver(upcalls);
        changed || upcalls.len() > before
    }

    fn wait(&mut self, timeout: Duration) {
        self.ctl.wait(timeout.min(self.cfg.heartbeat_period));
    }

    fn waker(&self) -> squall_transport::Waker {
        self.ctl.waker()
    }
}
