//! The simulated fabric: a seeded, single-threaded, deterministic model of a cluster.
//!
//! Every posted op becomes an event on its link's queue with a random latency. The scheduler
//! applies one ready link head at a time (FIFO within a link, random order across links), moves a
//! virtual clock, and injects the faults a test asks for: crash a node, partition sets of nodes,
//! delay or slow a node, heal. Ops held by a crash or partition fail after the virtual
//! `op_timeout`, breaking the link, exactly as the contract says. The same seed and the same
//! calls give the same run, byte for byte: [`Sim::trace_hash`] fingerprints it.
//!
//! A write's source bytes are read when the op is *applied*, not when posted — the later of the
//! two moments the contract allows, as an RDMA NIC would — so a protocol that changes a source
//! buffer too early is caught here.
//!
//! By default a write lands whole, in one step. With [`SimConfig::torn_writes`] a write that
//! touches more than one aligned word lands *torn*: its words are placed in a seeded random
//! order, in up to 4 pieces over separate steps, so a reader polling in between sees part of it
//! (the contract makes only aligned words atomic; RDMA promises no placement order within a
//! write). Writes on one link still land in order: the next op waits for the last piece.
//!
//! ```
//! use squall_transport::{LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Transport};
//! use squall_transport_mem::sim::{Sim, SimConfig};
//! let r = RegionId(0);
//! let (sim, mut nodes) = Sim::cluster(SimConfig::seeded(7), 2, &[RegionSpec::new(r, 64)])?;
//! nodes[0].region(r).unwrap().store(0, 5);
//! nodes[0].write(NodeId(1), LocalSlice::new(r, 0, 8), RemoteAddr::new(r, 0), Signal::Unsignaled)?;
//! assert_eq!(nodes[1].region(r).unwrap().load(0), 0); // still in flight
//! sim.run_until_idle(1_000);
//! assert_eq!(nodes[1].region(r).unwrap().load(0), 5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use squall_transport::{
    Completion, Directory, Event, FailureCause, LocalSlice, NodeId, OpError, OpId, OpKind,
    PostError, Region, RegionId, RegionSpec, RemoteAddr, Signal, Time, Transport, Waker,
};

use crate::apply::{self, Source};
use crate::config::ConfigError;

/// Deliberate bugs, used only to prove that the conformance suite and the model tests catch
/// them. Never set outside such tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Sabotage {
    /// A correct fabric.
    #[default]
    None,
    /// Break FIFO: sometimes apply an op from the middle of a link's queue.
    ReorderLinks,
    /// Break atomicity: a CAS or fetch-add reads in one event and writes in a later one.
    SplitAtomics,
}

/// Settings of a simulation.
///
/// ```
/// use squall_transport_mem::sim::SimConfig;
/// let cfg = SimConfig::seeded(42);
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// The seed that fixes every choice the simulator makes.
    pub seed: u64,
    /// Virtual time an op may wait on a crashed or partitioned peer before it fails.
    pub op_timeout: Duration,
    /// Smallest one-way latency of an op.
    pub min_latency: Duration,
    /// Largest one-way latency of an op (latencies are uniform in between).
    pub max_latency: Duration,
    /// The largest two-sided message.
    pub max_message_len: usize,
    /// Keep every trace entry (for tests that inspect the schedule), not only the hash.
    pub record_trace: bool,
    /// Land each write that touches more than one aligned 8-byte word *torn* (an unaligned
    /// 8-byte write included): the bytes are read from the source once, when the write reaches
    /// the head of its link and its first piece lands (as a whole write reads them at its one
    /// step), then its destination is cut at the aligned word boundaries (a partial word at
    /// either end counts as one word) and the words are dealt at random into 2 to 4 pieces.
    /// The first piece lands in that step, each further one in a later step, a fresh link
    /// latency apart, so a reader polling in between sees a partial write.
    /// The link stays FIFO: nothing posted after the write is applied before its last piece,
    /// and a signaled write completes then. A fence, a cut or a crash behaves as for an
    /// in-flight op: pieces not yet placed when the target cuts the link or the sender crashes
    /// are never placed (what landed stays), and the write fails or is lost as a whole one
    /// would. Off by default (every write lands whole, so seeds keep their schedules);
    /// [`SimConfig::seeded`] turns it on when the environment variable `SQUALL_SIM_TORN_WRITES`
    /// is `1`, to run a whole suite torn.
    ///
    /// ```
    /// use squall_transport::{LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Transport};
    /// use squall_transport_mem::sim::{Sim, SimConfig};
    /// let r = RegionId(0);
    /// let cfg = SimConfig { torn_writes: true, ..SimConfig::seeded(3) };
    /// let (sim, mut nodes) = Sim::cluster(cfg, 2, &[RegionSpec::new(r, 64)])?;
    /// (0..8).for_each(|w| nodes[0].region(r).unwrap().store(w, 1));
    /// nodes[0].write(NodeId(1), LocalSlice::new(r, 0, 64), RemoteAddr::new(r, 0), Signal::Unsignaled)?;
    /// let mut seen = Vec::new();
    /// while sim.step() {
    ///     seen.push((0..8).filter(|&w| nodes[1].region(r).unwrap().load(w) == 1).count());
    /// }
    /// assert_eq!(seen.last(), Some(&8)); // every word landed in the end
    /// assert!(seen.iter().any(|&n| n > 0 && n < 8)); // after some step, only part of them
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub torn_writes: bool,
    /// With [`torn_writes`](Self::torn_writes): read each piece's bytes from the source when
    /// that piece is placed, not once at the first piece, so a source changed while the write
    /// is in flight lands partly old, partly new (the contract allows it: a write's source must
    /// stay unchanged until the write completes). Off by default, and not set by
    /// [`SimConfig::seeded`].
    ///
    /// ```
    /// use squall_transport::{LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Transport};
    /// use squall_transport_mem::sim::{Sim, SimConfig};
    /// let r = RegionId(0);
    /// let cfg = SimConfig { torn_writes: true, torn_source: true, ..SimConfig::seeded(3) };
    /// let (sim, mut nodes) = Sim::cluster(cfg, 2, &[RegionSpec::new(r, 64)])?;
    /// (0..8).for_each(|w| nodes[0].region(r).unwrap().store(w, 1));
    /// nodes[0].write(NodeId(1), LocalSlice::new(r, 0, 64), RemoteAddr::new(r, 0), Signal::Unsignaled)?;
    /// let landed = |v| (0..8).filter(|&w| nodes[1].region(r).unwrap().load(w) == v).count();
    /// while landed(1) == 0 && sim.step() {} // the first piece lands with 1s
    /// (0..8).for_each(|w| nodes[0].region(r).unwrap().store(w, 2));
    /// sim.run_until_idle(100); // the other pieces read 2s
    /// assert_eq!(landed(1) + landed(2), 8);
    /// assert!(landed(1) < 8 && landed(2) > 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub torn_source: bool,
    #[doc(hidden)]
    pub sabotage: Sabotage,
}

impl SimConfig {
    /// Defaults with the given seed: 1–5 µs latencies, a 1 ms op timeout, writes landing whole
    /// (torn if `SQUALL_SIM_TORN_WRITES=1`: see [`torn_writes`](Self::torn_writes)).
    pub fn seeded(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            op_timeout: Duration::from_millis(1),
            min_latency: Duration::from_micros(1),
            max_latency: Duration::from_micros(5),
            max_message_len: 64 * 1024,
            record_trace: false,
            torn_writes: torn_from_env(),
            torn_source: false,
            sabotage: Sabotage::None,
        }
    }

    /// Checks every setting, with an error that says what to change.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.op_timeout.is_zero() {
            return Err(ConfigError::ZeroTimeout);
        }
        if self.max_message_len == 0 {
            return Err(ConfigError::ZeroMessageLen);
        }
        if self.min_latency > self.max_latency {
            return Err(ConfigError::Latency {
                min_ns: nanos(self.min_latency),
                max_ns: nanos(self.max_latency),
            });
        }
        Ok(())
    }
}

/// Whether `len` bytes at `offset` touch more than one aligned 8-byte word (a write the torn
/// mode may tear: the contract makes only aligned words atomic).
fn spans_words(offset: usize, len: usize) -> bool {
    len > 0 && offset / 8 != (offset + len - 1) / 8
}

/// Whether `SQUALL_SIM_TORN_WRITES=1` asks [`SimConfig::seeded`] for torn writes.
fn torn_from_env() -> bool {
    std::env::var("SQUALL_SIM_TORN_WRITES").is_ok_and(|v| v.trim() == "1")
}

/// The most pieces a torn write lands in (see [`SimConfig::torn_writes`]).
const TORN_PIECES: usize = 4;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What happened to one op, as recorded in the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Applied at the target; the value is the op's result (old value for atomics).
    Applied(u64),
    /// First half of a split atomic (sabotage only).
    Split,
    /// The target had cut the link; not applied.
    Refused,
    /// Timed out waiting on a crashed or partitioned peer; not applied.
    TimedOut,
    /// Flushed by a broken link or a crash; not applied.
    Flushed,
}

/// One entry of the trace: an op leaving its link queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceEntry {
    /// Virtual time.
    pub at: Time,
    /// Poster.
    pub src: NodeId,
    /// Target.
    pub dst: NodeId,
    /// The op, numbered by its poster.
    pub op: OpId,
    /// Its kind.
    pub kind: OpKind,
    /// What happened.
    pub outcome: Outcome,
}

enum Body {
    Write {
        src: LocalSlice,
        dst: RemoteAddr,
    },
    Read {
        src: RemoteAddr,
        dst: LocalSlice,
    },
    Cas {
        word: RemoteAddr,
        expected: u64,
        new: u64,
    },
    FetchAdd {
        word: RemoteAddr,
        delta: u64,
    },
    /// Second half of a split atomic (sabotage only): store `value`, complete with `old`.
    Commit {
        word: RemoteAddr,
        value: u64,
        old: u64,
    },
    Send {
        data: Vec<u8>,
    },
    Fence,
    /// The pieces of a torn write not yet placed, the next one last: each a list of
    /// (destination offset, bytes read from the source when the first piece landed, or read
    /// again as the piece lands with `reread`).
    Torn {
        region: RegionId,
        /// With `SimConfig::torn_source`: the source region, and the source and destination
        /// offsets of the write's start, to read each piece's bytes again when it is placed.
        reread: Option<(RegionId, usize, usize)>,
        pieces: Vec<Vec<(usize, Vec<u8>)>>,
    },
}

struct InFlight {
    op: OpId,
    kind: OpKind,
    signaled: bool,
    posted: Time,
    ready: Time,
    body: Body,
}

struct NodeState {
    regions: Vec<Region>,
    events: VecDeque<Event>,
    inbox: VecDeque<(NodeId, Vec<u8>)>,
    crashed: bool,
    /// Peers this node has cut (failed): their ops are refused, ops to them fail.
    cut: Vec<bool>,
    reported: Vec<bool>,
    /// Something landed (a write, an atomic, a message) since the node last waited.
    dirty: bool,
    extra_latency: Duration,
    slowdown: u32,
    /// Started: a late node is not until [`Sim::start_node`].
    started: bool,
    /// The node's incarnation: 0 from the start, 1 for a late node once started, one more at
    /// each [`Sim::restart_node`].
    incarnation: u64,
    /// Per peer: a new incarnation of it whose link comes up when this node's endpoint hands
    /// out its [`Event::PeerConnected`].
    reconnect: Vec<Option<u64>>,
    /// Per peer: whether this incarnation of the node has a link to the peer's current
    /// incarnation (up from the start, or announced by a queued `PeerConnected`); false while
    /// the peer is *absent* to it (a late peer not started yet, or one that was down when this
    /// incarnation started). A restart of the peer fails the old incarnation only where it
    /// was linked: an absent peer is never reported failed (the transport's *Late links*).
    linked: Vec<bool>,
}

struct World {
    cfg: SimConfig,
    rng: ChaCha8Rng,
    now: Time,
    n: usize,
    nodes: Vec<NodeState>,
    links: Vec<VecDeque<InFlight>>,
    blocked: Vec<bool>,
    hash: u64,
    trace: Vec<TraceEntry>,
    /// Ops posted so far, per node.
    counters: Vec<u64>,
}

const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

impl World {
    fn link(&self, src: NodeId, dst: NodeId) -> usize {
        src.index() * self.n + dst.index()
    }

    fn ends(&self, link: usize) -> (NodeId, NodeId) {
        (
            NodeId((link / self.n) as u32),
            NodeId((link % self.n) as u32),
        )
    }

    fn region(&self, node: NodeId, id: RegionId) -> &Region {
        self.nodes[node.index()]
            .regions
            .iter()
            .find(|r| r.id() == id)
            .unwrap_or_else(|| unreachable!("region {id} was validated on {node}"))
    }

    fn record(&mut self, src: NodeId, dst: NodeId, op: OpId, kind: OpKind, outcome: Outcome) {
        let entry = TraceEntry {
            at: self.now,
            src,
            dst,
            op,
            kind,
            outcome,
        };
        let mut h = self.hash;
        for word in [
            entry.at.as_nanos(),
            u64::from(src.0) << 32 | u64::from(dst.0),
            op.0,
            kind as u64,
            match outcome {
                Outcome::Applied(v) => v,
                other => u64::MAX - other_code(other),
            },
        ] {
            for b in word.to_le_bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
            }
        }
        self.hash = h;
        if self.cfg.record_trace {
            self.trace.push(entry);
        }
    }

    fn latency(&mut self, src: NodeId, dst: NodeId) -> Duration {
        let (lo, hi) = (nanos(self.cfg.min_latency), nanos(self.cfg.max_latency));
        let base = Duration::from_nanos(self.rng.random_range(lo..=hi));
        let (s, d) = (&self.nodes[src.index()], &self.nodes[dst.index()]);
        base * s.slowdown.max(d.slowdown) + s.extra_latency + d.extra_latency
    }

    fn report(&mut self, node: NodeId, peer: NodeId, cause: FailureCause) {
        let state = &mut self.nodes[node.index()];
        if !state.reported[peer.index()] {
            state.reported[peer.index()] = true;
            state.events.push_back(Event::PeerFailed { peer, cause });
        }
    }

    fn complete(&mut self, node: NodeId, peer: NodeId, f: &InFlight, result: Result<u64, OpError>) {
        if f.signaled || result.is_err() {
            let c = Completion {
                op: f.op,
                peer,
                kind: f.kind,
                result,
            };
            self.nodes[node.index()]
                .events
                .push_back(Event::Completion(c));
        }
    }

    /// `node` cuts `peer`: reports it (with `cause`) and fails everything queued to it.
    fn cut(&mut self, node: NodeId, peer: NodeId, cause: FailureCause) {
        self.nodes[node.index()].cut[peer.index()] = true;
        self.report(node, peer, cause);
        let link = self.link(node, peer);
        let flushed: Vec<InFlight> = self.links[link].drain(..).collect();
        for f in flushed {
            self.record(node, peer, f.op, f.kind, Outcome::Flushed);
            self.complete(node, peer, &f, Err(OpError::PeerFailed));
        }
    }

    fn post(
        &mut self,
        src: NodeId,
        dst: NodeId,
        kind: OpKind,
        signal: Signal,
        body: Body,
    ) -> Result<OpId, PostError> {
        if self.nodes[src.index()].crashed {
            return Err(PostError::Closed);
        }
        let op = OpId(self.next_op(src));
        let signaled = signal == Signal::Signaled || !matches!(kind, OpKind::Write | OpKind::Send);
        let posted = self.now;
        let f = InFlight {
            op,
            kind,
            signaled,
            posted,
            ready: posted,
            body,
        };
        if self.nodes[src.index()].cut[dst.index()] {
            self.report(src, dst, FailureCause::Local);
            self.complete(src, dst, &f, Err(OpError::PeerFailed));
            return Ok(op);
        }
        let ready = posted + self.latency(src, dst);
        let link = self.link(src, dst);
        self.links[link].push_back(InFlight { ready, ..f });
        Ok(op)
    }

    fn next_op(&mut self, src: NodeId) -> u64 {
        let c = &mut self.counters[src.index()];
        *c += 1;
        *c
    }

    /// Whether the link's head waits: a partition, a crashed target, or a target that has not
    /// yet polled the `PeerConnected` of the sender's new incarnation (its link to that
    /// incarnation is not up: the ops wait for it rather than being refused, as on TCP).
    fn is_blocked(&self, link: usize) -> bool {
        let (src, dst) = self.ends(link);
        let pending = self.nodes[dst.index()].reconnect[src.index()]
            == Some(self.nodes[src.index()].incarnation);
        self.blocked[link] || self.nodes[dst.index()].crashed || pending
    }

    /// Fails the heads of blocked links whose timeout has passed.
    fn fire_timeouts(&mut self) {
        for link in 0..self.links.len() {
            let expired = match self.links[link].front() {
                Some(head) => {
                    self.is_blocked(link) && head.posted + self.cfg.op_timeout <= self.now
                }
                None => false,
            };
            if expired {
                let (src, dst) = self.ends(link);
                if let Some(head) = self.links[link].pop_front() {
                    self.nodes[src.index()].cut[dst.index()] = true;
                    self.report(src, dst, FailureCause::TimedOut);
                    self.record(src, dst, head.op, head.kind, Outcome::TimedOut);
                    self.complete(src, dst, &head, Err(OpError::TimedOut));
                }
                self.cut(src, dst, FailureCause::TimedOut);
                tracing::debug!(%src, %dst, now = self.now.as_nanos(), "sim: op timed out");
            }
        }
    }

    /// The earliest moment something can happen without outside input.
    fn next_moment(&self) -> Option<Time> {
        let mut next: Option<Time> = None;
        for (link, q) in self.links.iter().enumerate() {
            if let Some(head) = q.front() {
                let t = if self.is_blocked(link) {
                    head.posted + self.cfg.op_timeout
                } else {
                    head.ready
                };
                next = Some(next.map_or(t, |n: Time| n.min(t)));
            }
        }
        next
    }

    /// Applies one ready op, or moves the clock to the next moment (never past `limit`).
    fn step(&mut self, limit: Time) -> Stepped {
        self.fire_timeouts();
        let ready: Vec<usize> = (0..self.links.len())
            .filter(|&l| {
                !self.is_blocked(l) && self.links[l].front().is_some_and(|h| h.ready <= self.now)
            })
            .collect();
        if !ready.is_empty() {
            let link = ready[self.rng.random_range(0..ready.len())];
            let pos = if self.cfg.sabotage == Sabotage::ReorderLinks && self.rng.random_bool(0.5) {
                self.rng.random_range(0..self.links[link].len())
            } else {
                0
            };
            if let Some(f) = self.links[link].remove(pos) {
                self.apply(link, f);
            }
            return Stepped::Applied;
        }
        match self.next_moment() {
            Some(t) if t <= limit => {
                self.now = self.now.max(t);
                self.fire_timeouts();
                Stepped::Advanced
            }
            _ => Stepped::Idle,
        }
    }

    fn apply(&mut self, link: usize, f: InFlight) {
        let (src, dst) = self.ends(link);
        if self.nodes[dst.index()].cut[src.index()] {
            // The target cut us off: like a QP in error, this op and all after it fail.
            self.record(src, dst, f.op, f.kind, Outcome::Refused);
            self.nodes[src.index()].cut[dst.index()] = true;
            self.report(src, dst, FailureCause::Remote);
            self.complete(src, dst, &f, Err(OpError::PeerFailed));
            self.cut(src, dst, FailureCause::Remote);
            return;
        }
        let split = self.cfg.sabotage == Sabotage::SplitAtomics;
        let value = match &f.body {
            Body::Write { src: from, dst: at }
                if self.cfg.torn_writes && spans_words(at.offset, from.len) =>
            {
                let (from, at) = (*from, *at);
                let pieces = self.tear(src, from, at);
                let reread = self
                    .cfg
                    .torn_source
                    .then_some((from.region, from.offset, at.offset));
                let body = Body::Torn {
                    region: at.region,
                    reread,
                    pieces,
                };
                return self.place(link, InFlight { body, ..f });
            }
            Body::Torn { .. } => return self.place(link, f),
            Body::Write { src: from, dst: at } => {
                let source = self.region(src, from.region).clone();
                apply::write(
                    self.region(dst, at.region),
                    at.offset,
                    Source::Region(&source, from.offset),
                    from.len,
                );
                0
            }
            Body::Read {
                src: at,
                dst: local,
            } => {
                let target = self.region(src, local.region).clone();
                apply::read(self.region(dst, at.region), *at, &target, *local);
                0
            }
            Body::Cas {
                word,
                expected,
                new,
            } if split => {
                let (word, expected, new) = (*word, *expected, *new);
                let old = self.region(dst, word.region).load(word.offset / 8);
                let value = if old == expected { new } else { old };
                return self.split(link, f, word, value, old);
            }
            Body::FetchAdd { word, delta } if split => {
                let (word, delta) = (*word, *delta);
                let old = self.region(dst, word.region).load(word.offset / 8);
                return self.split(link, f, word, old.wrapping_add(delta), old);
            }
            Body::Cas {
                word,
                expected,
                new,
            } => {
                apply::compare_and_swap(self.region(dst, word.region), word.offset, *expected, *new)
            }
            Body::FetchAdd { word, delta } => {
                apply::fetch_add(self.region(dst, word.region), word.offset, *delta)
            }
            Body::Commit { word, value, old } => {
                self.region(dst, word.region).store(word.offset / 8, *value);
                *old
            }
            Body::Send { data } => {
                self.nodes[dst.index()].inbox.push_back((src, data.clone()));
                0
            }
            Body::Fence => 0,
        };
        self.nodes[dst.index()].dirty = true;
        self.record(src, dst, f.op, f.kind, Outcome::Applied(value));
        self.complete(src, dst, &f, Ok(value));
    }

    /// Reads a torn write's source (once) and deals its destination words into pieces: 2 to
    /// [`TORN_PIECES`] of them, each word in one at random, empty pieces dropped, the piece to
    /// place first last.
    fn tear(
        &mut self,
        src: NodeId,
        from: LocalSlice,
        at: RemoteAddr,
    ) -> Vec<Vec<(usize, Vec<u8>)>> {
        let mut bytes = vec![0; from.len];
        let r = self
            .region(src, from.region)
            .read_bytes(from.offset, &mut bytes);
        debug_assert!(r.is_ok(), "bounds are validated at post time");
        let end = at.offset + from.len;
        let mut words = Vec::new();
        let mut o = at.offset;
        while o < end {
            let next = ((o / 8 + 1) * 8).min(end);
            words.push((o, bytes[o - at.offset..next - at.offset].to_vec()));
            o = next;
        }
        let count = self
            .rng
            .random_range(2..=TORN_PIECES.min(words.len()).max(2));
        let mut pieces = vec![Vec::new(); count];
        for w in words {
            pieces[self.rng.random_range(0..count)].push(w);
        }
        pieces.retain(|p| !p.is_empty());
        pieces
    }

    /// Places the next piece of `f`, a torn write (`Body::Torn`); the rest goes back to the
    /// link's head, a fresh latency later. The write is applied (recorded, completed) with its
    /// last piece.
    fn place(&mut self, link: usize, mut f: InFlight) {
        let (src, dst) = self.ends(link);
        let mut done = true;
        if let Body::Torn {
            region,
            reread,
            pieces,
        } = &mut f.body
        {
            if let Some(mut piece) = pieces.pop() {
                if let Some((from, src_at, dst_at)) = *reread {
                    for (offset, bytes) in &mut piece {
                        let r =
                            (self.region(src, from)).read_bytes(src_at + *offset - dst_at, bytes);
                        debug_assert!(r.is_ok(), "bounds are validated at post time");
                    }
                }
                let target = self.region(dst, *region);
                for (offset, bytes) in &piece {
                    apply::write(target, *offset, Source::Bytes(bytes), bytes.len());
                }
            }
            done = pieces.is_empty();
        }
        self.nodes[dst.index()].dirty = true;
        if done {
            self.record(src, dst, f.op, f.kind, Outcome::Applied(0));
            self.complete(src, dst, &f, Ok(0));
            return;
        }
        f.ready = self.now + self.latency(src, dst);
        self.links[link].push_front(f);
    }

    /// Sabotage: the first half of an atomic has read `old`; its store comes as a later event.
    fn split(&mut self, link: usize, f: InFlight, word: RemoteAddr, value: u64, old: u64) {
        let (src, dst) = self.ends(link);
        self.record(src, dst, f.op, f.kind, Outcome::Split);
        let ready = self.now + self.latency(src, dst);
        self.links[link].push_front(InFlight {
            ready,
            body: Body::Commit { word, value, old },
            ..f
        });
    }
}

fn other_code(o: Outcome) -> u64 {
    match o {
        Outcome::Applied(_) => 0,
        Outcome::Split => 1,
        Outcome::Refused => 2,
        Outcome::TimedOut => 3,
        Outcome::Flushed => 4,
    }
}

enum Stepped {
    Applied,
    Advanced,
    Idle,
}

/// The simulation: the scheduler, the virtual clock and fault injection. Cheap to clone (all
/// clones drive the same world). Single-threaded by design.
#[derive(Clone)]
pub struct Sim {
    world: Rc<RefCell<World>>,
    /// Each node's regions, by node index.
    layouts: Rc<Vec<Vec<RegionSpec>>>,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = self.world.borrow();
        f.debug_struct("Sim")
            .field("seed", &w.cfg.seed)
            .field("now", &w.now)
            .finish_non_exhaustive()
    }
}

impl Sim {
    /// A simulated cluster of `n` fully linked nodes (`NodeId(0)..NodeId(n)`), each with `layout`.
    pub fn cluster(
        cfg: SimConfig,
        n: usize,
        layout: &[RegionSpec],
    ) -> Result<(Sim, Vec<SimNode>), ConfigError> {
        Sim::cluster_late(cfg, n, layout, &[])
    }

    /// Like [`cluster`](Self::cluster), but the nodes in `late` are configured and *not
    /// started*: the others see them absent (ops to them are refused with
    /// [`PostError::NotConnected`], nothing times out and nothing is reported) until
    /// [`start_node`](Self::start_node) starts them. A late node's own endpoint (returned with
    /// the others, to be driven once started) sees every peer absent until then.
    ///
    /// ```
    /// use squall_transport::{Event, NodeId, PostError, RegionId, RegionSpec, Transport};
    /// use squall_transport_mem::sim::{Sim, SimConfig};
    /// let (sim, mut nodes) =
    ///     Sim::cluster_late(SimConfig::seeded(1), 3, &[RegionSpec::new(RegionId(0), 64)], &[NodeId(2)])?;
    /// assert_eq!(nodes[0].fence(NodeId(2)), Err(PostError::NotConnected { peer: NodeId(2) }));
    /// sim.start_node(NodeId(2));
    /// let mut events = [Event::PeerConnected { peer: NodeId(0), incarnation: 0 }; 4];
    /// assert_eq!(nodes[0].poll(&mut events), 1);
    /// assert!(matches!(events[0], Event::PeerConnected { peer: NodeId(2), .. }));
    /// assert!(nodes[0].fence(NodeId(2)).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cluster_late(
        cfg: SimConfig,
        n: usize,
        layout: &[RegionSpec],
        late: &[NodeId],
    ) -> Result<(Sim, Vec<SimNode>), ConfigError> {
        if n > 1024 {
            return Err(ConfigError::TooManyNodes(n));
        }
        Sim::cluster_each(cfg, &vec![layout.to_vec(); n], late)
    }

    /// Like [`cluster_late`](Self::cluster_late), but each node registers its own regions:
    /// node `i` gets `layouts[i]` (same ids or not, any lengths), and its peers learn those
    /// lengths when its link comes up, as a real fabric's handshake tells them. A restarted
    /// node registers its layout again, fresh.
    ///
    /// ```
    /// use squall_transport::{NodeId, RegionId, RegionSpec, Transport};
    /// use squall_transport_mem::sim::{Sim, SimConfig};
    /// let r = RegionId(0);
    /// let layouts = [vec![RegionSpec::new(r, 64)], vec![RegionSpec::new(r, 16)]];
    /// let (_sim, nodes) = Sim::cluster_each(SimConfig::seeded(1), &layouts, &[])?;
    /// assert_eq!(nodes[1].region(r).unwrap().len(), 16);
    /// assert_eq!(nodes[0].remote_region_len(NodeId(1), r), Some(16));
    /// assert_eq!(nodes[1].remote_region_len(NodeId(0), r), Some(64));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cluster_each(
        cfg: SimConfig,
        layouts: &[Vec<RegionSpec>],
        late: &[NodeId],
    ) -> Result<(Sim, Vec<SimNode>), ConfigError> {
        cfg.validate()?;
        let n = layouts.len();
        if n == 0 {
            return Err(ConfigError::NoNodes);
        }
        if n > 1024 {
            return Err(ConfigError::TooManyNodes(n));
        }
        for layout in layouts {
            RegionSpec::validate_all(layout)?;
        }
        let mut nodes = Vec::with_capacity(n);
        for layout in layouts {
            nodes.push(NodeState {
                regions: layout
                    .iter()
                    .map(|s| Region::new(*s))
                    .collect::<Result<_, _>>()?,
                events: VecDeque::new(),
                inbox: VecDeque::new(),
                crashed: false,
                cut: vec![false; n],
                reported: vec![false; n],
                dirty: false,
                extra_latency: Duration::ZERO,
                slowdown: 1,
                started: true,
                incarnation: 0,
                reconnect: vec![None; n],
                linked: vec![true; n],
            });
        }
        for &id in late {
            if let Some(node) = nodes.get_mut(id.index()) {
                node.started = false;
                node.linked = vec![false; n];
            }
            for node in &mut nodes {
                if let Some(l) = node.linked.get_mut(id.index()) {
                    *l = false;
                }
            }
        }
        let world = World {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            now: Time::ZERO,
            n,
            nodes,
            links: (0..n * n).map(|_| VecDeque::new()).collect(),
            blocked: vec![false; n * n],
            hash: 0xcbf2_9ce4_8422_2325,
            trace: Vec::new(),
            counters: vec![0; n],
        };
        let sim = Sim {
            world: Rc::new(RefCell::new(world)),
            layouts: Rc::new(layouts.to_vec()),
        };
        let endpoints = (0..n as u32).map(|i| sim.endpoint(NodeId(i))).collect();
        Ok((sim, endpoints))
    }

    fn endpoint(&self, me: NodeId) -> SimNode {
        let w = self.world.borrow();
        let mut dir = Directory::new(me);
        for r in &w.nodes[me.index()].regions {
            let _ = dir.add_local(r.clone());
        }
        for i in 0..w.n as u32 {
            let peer = NodeId(i);
            if w.nodes[me.index()].started && w.nodes[peer.index()].started {
                dir.add_peer(peer, &self.layouts[peer.index()]);
            } else {
                dir.add_absent_peer(peer);
            }
        }
        SimNode {
            me,
            dir,
            world: Rc::clone(&self.world),
            layouts: Rc::clone(&self.layouts),
            max_message_len: w.cfg.max_message_len,
        }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.world.borrow().cfg.seed
    }

    /// The op timeout.
    pub fn op_timeout(&self) -> Duration {
        self.world.borrow().cfg.op_timeout
    }

    /// Virtual now.
    pub fn now(&self) -> Time {
        self.world.borrow().now
    }

    /// Applies one ready op, or moves the clock to the next moment something can happen.
    /// Returns false when nothing is in flight at all.
    pub fn step(&self) -> bool {
        !matches!(
            self.world.borrow_mut().step(Time::from_nanos(u64::MAX)),
            Stepped::Idle
        )
    }

    /// Steps until nothing is in flight or `max_steps` were taken; returns the steps taken.
    pub fn run_until_idle(&self, max_steps: usize) -> usize {
        (0..max_steps).take_while(|_| self.step()).count()
    }

    /// Lets `d` of virtual time pass, applying everything that becomes ready meanwhile.
    pub fn advance(&self, d: Duration) {
        let mut w = self.world.borrow_mut();
        let until = w.now + d;
        while !matches!(w.step(until), Stepped::Idle) {}
        w.now = w.now.max(until);
        w.fire_timeouts();
    }

    /// Crashes `node`: its in-flight ops are lost, it applies nothing more, its endpoint refuses
    /// new ops, and ops to it wait until they time out.
    pub fn crash(&self, node: NodeId) {
        let mut w = self.world.borrow_mut();
        w.nodes[node.index()].crashed = true;
        for peer in 0..w.n as u32 {
            let link = w.link(node, NodeId(peer));
            let lost: Vec<InFlight> = w.links[link].drain(..).collect();
            for f in lost {
                w.record(node, NodeId(peer), f.op, f.kind, Outcome::Flushed);
            }
        }
        let now = w.now.as_nanos();
        w.record(node, node, OpId(now), OpKind::Fence, Outcome::Flushed);
        tracing::debug!(%node, now, "sim: node crashed");
    }

    /// Starts a node created late by [`cluster_late`](Self::cluster_late): links come up
    /// between it and every running (started, not crashed) node that has not declared it failed,
    /// and both ends of each new link get [`Event::PeerConnected`] with the other end's
    /// incarnation ([`incarnation`](Self::incarnation): 1 for the late node, 0 for a peer up
    /// from the start, more for one restarted since). Does nothing if the node is started
    /// already or crashed.
    pub fn start_node(&self, node: NodeId) {
        let mut w = self.world.borrow_mut();
        let me = node.index();
        if w.nodes[me].started || w.nodes[me].crashed {
            return;
        }
        w.nodes[me].started = true;
        w.nodes[me].incarnation = w.nodes[me].incarnation.max(1);
        for i in 0..w.n {
            let up = i != me
                && w.nodes[i].started
                && !w.nodes[i].crashed
                && !w.nodes[i].cut[me]
                && !w.nodes[me].cut[i];
            if up {
                // Each end learns the other's own incarnation: the late node's (1 unless it
                // restarted before it started), and the peer's (0 for a node up from the
                // start). Announcing every peer as 1 would make the late node refuse the
                // peer's real incarnation 1 after a restart as not newer than one it linked
                // (s26, `docs/MEMBERSHIP.md`, sixty-seventh part).
                let (mine, theirs) = (w.nodes[me].incarnation, w.nodes[i].incarnation);
                w.nodes[i].events.push_back(Event::PeerConnected {
                    peer: node,
                    incarnation: mine,
                });
                w.nodes[i].dirty = true;
                w.nodes[i].linked[me] = true;
                w.nodes[me].events.push_back(Event::PeerConnected {
                    peer: NodeId(i as u32),
                    incarnation: theirs,
                });
                w.nodes[me].linked[i] = true;
            }
        }
        w.nodes[me].dirty = true;
        let now = w.now.as_nanos();
        w.record(
            node,
            node,
            OpId(now),
            OpKind::Fence,
            Outcome::Applied(u64::MAX),
        );
        tracing::debug!(%node, now, "sim: late node started");
    }

    /// Whether `node` has been started (every node of [`cluster`](Self::cluster) is; a late one
    /// of [`cluster_late`](Self::cluster_late) once [`start_node`](Self::start_node) ran).
    pub fn is_started(&self, node: NodeId) -> bool {
        self.world.borrow().nodes[node.index()].started
    }

    /// Restarts a crashed node under the same id with a new incarnation and fresh (zeroed)
    /// memory, and returns its new endpoint (`None` if the node has not crashed).
    ///
    /// Every running peer that was linked to the old incarnation fails it first: ops still
    /// queued to it are flushed as failed and the peer gets [`Event::PeerFailed`] (cause
    /// `ConnectionLost`) if it had not been told yet; ops it posts to the node from then on
    /// fail. A peer that started (or restarted) while the node was down never linked the old
    /// incarnation (the node was *absent* to it) and gets no `PeerFailed`: an absent peer is
    /// never reported failed (the transport's *Late links*). Then each running peer gets
    /// [`Event::PeerConnected`] with the new incarnation, and its link to the new incarnation
    /// comes up the moment its endpoint hands that event out (never mixing ops of the two
    /// incarnations: everything posted before went to the old one and failed). A
    /// `report_failed` of the node after that fails the new incarnation. The new endpoint sees
    /// every peer absent until it polls their `PeerConnected` (like a late node), so a table
    /// pushes its whole row to each peer as it connects.
    ///
    /// ```
    /// use squall_transport::{Event, FailureCause, LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Transport};
    /// use squall_transport_mem::sim::{Sim, SimConfig};
    /// use std::time::Duration;
    /// let (sim, mut nodes) = Sim::cluster(SimConfig::seeded(1), 2, &[RegionSpec::new(RegionId(0), 64)])?;
    /// nodes[1].region(RegionId(0)).unwrap().store(0, 7);
    /// sim.crash(NodeId(1));
    /// let mut fresh = sim.restart_node(NodeId(1)).expect("it crashed");
    /// assert_eq!(fresh.region(RegionId(0)).unwrap().load(0), 0); // fresh memory
    /// let mut ev = [Event::PeerConnected { peer: NodeId(0), incarnation: 0 }; 4];
    /// let got = nodes[0].poll(&mut ev);
    /// assert!(matches!(ev[0], Event::PeerFailed { peer: NodeId(1), .. }));
    /// assert_eq!(ev[got - 1], Event::PeerConnected { peer: NodeId(1), incarnation: 1 });
    /// // The link to the new incarnation is up: a write lands in its fresh region.
    /// nodes[0].region(RegionId(0)).unwrap().store(1, 9);
    /// let src = LocalSlice { region: RegionId(0), offset: 8, len: 8 };
    /// nodes[0].write(NodeId(1), src, RemoteAddr { region: RegionId(0), offset: 8 }, Signal::Unsignaled)?;
    /// sim.advance(Duration::from_micros(10));
    /// assert_eq!(fresh.region(RegionId(0)).unwrap().load(1), 9);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restart_node(&self, node: NodeId) -> Option<SimNode> {
        {
            let mut w = self.world.borrow_mut();
            let me = node.index();
            if me >= w.n || !w.nodes[me].crashed {
                return None;
            }
            let regions: Result<Vec<Region>, _> =
                self.layouts[me].iter().map(|s| Region::new(*s)).collect();
            let Ok(regions) = regions else {
                return None; // validated when the cluster was built
            };
            let incarnation = w.nodes[me].incarnation + 1;
            let n = w.n;
            for i in 0..n {
                if i == me || w.nodes[i].crashed || !w.nodes[i].started {
                    continue;
                }
                // The old incarnation fails at every running peer that was linked to it
                // (flushing what was queued). A peer that started while the node was down never
                // linked it (the node was absent to it): nothing to fail, no `PeerFailed`; the
                // new incarnation is its first link to the node.
                let peer = NodeId(i as u32);
                if w.nodes[i].cut[me] {
                    w.report(peer, node, FailureCause::ConnectionLost);
                } else if w.nodes[i].linked[me] {
                    w.cut(peer, node, FailureCause::ConnectionLost);
                }
                w.nodes[i].reconnect[me] = Some(incarnation);
                w.nodes[i].linked[me] = true;
                w.nodes[i].events.push_back(Event::PeerConnected {
                    peer: node,
                    incarnation,
                });
                w.nodes[i].dirty = true;
            }
            let st = &mut w.nodes[me];
            st.regions = regions;
            st.events.clear();
            st.inbox.clear();
            st.crashed = false;
            st.cut = vec![false; n];
            st.reported = vec![false; n];
            st.reconnect = vec![None; n];
            st.linked = vec![false; n];
            st.dirty = true;
            st.incarnation = incarnation;
            // Built as a late node: every peer absent until its link comes up.
            st.started = false;
        }
        let endpoint = self.endpoint(node);
        let mut w = self.world.borrow_mut();
        let me = node.index();
        w.nodes[me].started = true;
        for i in 0..w.n {
            if i != me && w.nodes[i].started && !w.nodes[i].crashed {
                let incarnation = w.nodes[i].incarnation;
                w.nodes[me].events.push_back(Event::PeerConnected {
                    peer: NodeId(i as u32),
                    incarnation,
                });
                w.nodes[me].linked[i] = true;
            }
        }
        let now = w.now.as_nanos();
        let mark = incarnation_mark(w.nodes[me].incarnation);
        w.record(node, node, OpId(now), OpKind::Fence, Outcome::Applied(mark));
        tracing::debug!(%node, now, incarnation = w.nodes[me].incarnation, "sim: node restarted");
        Some(endpoint)
    }

    /// The current incarnation of `node` (0 from the start; see
    /// [`restart_node`](Self::restart_node)).
    pub fn incarnation(&self, node: NodeId) -> u64 {
        self.world.borrow().nodes[node.index()].incarnation
    }

    /// Holds all traffic between the nodes of `a` and those of `b`, both ways, until healed.
    pub fn partition(&self, a: &[NodeId], b: &[NodeId]) {
        let mut w = self.world.borrow_mut();
        for &x in a {
            for &y in b {
                let (xy, yx) = (w.link(x, y), w.link(y, x));
                w.blocked[xy] = true;
                w.blocked[yx] = true;
            }
        }
    }

    /// Lifts every partition. (Links already broken by timeouts stay broken.)
    pub fn heal(&self) {
        self.world
            .borrow_mut()
            .blocked
            .iter_mut()
            .for_each(|b| *b = false);
    }

    /// Adds `extra` one-way latency to every op to or from `node`.
    pub fn delay(&self, node: NodeId, extra: Duration) {
        self.world.borrow_mut().nodes[node.index()].extra_latency = extra;
    }

    /// Makes `node` `factor` times slower: its links' latencies scale, and
    /// [`takes_turn`](Self::takes_turn) lets its programs run one round in `factor`.
    pub fn slow(&self, node: NodeId, factor: u32) {
        self.world.borrow_mut().nodes[node.index()].slowdown = factor.max(1);
    }

    /// Whether a harness should step `node`'s program this round (slow nodes skip rounds).
    pub fn takes_turn(&self, node: NodeId) -> bool {
        let mut w = self.world.borrow_mut();
        let f = w.nodes[node.index()].slowdown;
        !w.nodes[node.index()].crashed && (f <= 1 || w.rng.random_range(0..f) == 0)
    }

    /// A random number from the simulation's seeded generator, for harness decisions.
    pub fn random(&self, below: u64) -> u64 {
        self.world.borrow_mut().rng.random_range(0..below.max(1))
    }

    /// Whether `node` has crashed.
    pub fn is_crashed(&self, node: NodeId) -> bool {
        self.world.borrow().nodes[node.index()].crashed
    }

    /// A fingerprint of everything that happened so far (FNV-1a over the trace).
    pub fn trace_hash(&self) -> u64 {
        self.world.borrow().hash
    }

    /// The recorded trace (empty unless `record_trace` was set).
    pub fn trace(&self) -> Vec<TraceEntry> {
        self.world.borrow().trace.clone()
    }
}

/// One node's endpoint in a simulation.
pub struct SimNode {
    me: NodeId,
    dir: Directory,
    world: Rc<RefCell<World>>,
    /// Every node's regions, by node index (a peer's are learned when its link comes up).
    layouts: Rc<Vec<Vec<RegionSpec>>>,
    max_message_len: usize,
}

impl std::fmt::Debug for SimNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimNode")
            .field("me", &self.me)
            .finish_non_exhaustive()
    }
}

impl SimNode {
    fn post(
        &mut self,
        dst: NodeId,
        kind: OpKind,
        signal: Signal,
        body: Body,
    ) -> Result<OpId, PostError> {
        self.world
            .borrow_mut()
            .post(self.me, dst, kind, signal, body)
    }
}

impl Transport for SimNode {
    fn local_id(&self) -> NodeId {
        self.me
    }

    fn peers(&self) -> &[NodeId] {
        self.dir.peers()
    }

    fn region(&self, id: RegionId) -> Option<&Region> {
        self.dir.local(id)
    }

    fn remote_region_len(&self, peer: NodeId, id: RegionId) -> Option<usize> {
        self.dir.remote_len(peer, id)
    }

    fn max_message_len(&self) -> usize {
        self.max_message_len
    }

    fn now(&self) -> Time {
        self.world.borrow().now
    }

    fn write(
        &mut self,
        peer: NodeId,
        src: LocalSlice,
        dst: RemoteAddr,
        signal: Signal,
    ) -> Result<OpId, PostError> {
        self.dir.check_write(peer, src, dst)?;
        self.post(peer, OpKind::Write, signal, Body::Write { src, dst })
    }

    fn read(&mut self, peer: NodeId, src: RemoteAddr, dst: LocalSlice) -> Result<OpId, PostError> {
        self.dir.check_remote(peer, src, dst.len)?;
        self.dir.check_local(dst)?;
        self.post(
            peer,
            OpKind::Read,
            Signal::Signaled,
            Body::Read { src, dst },
        )
    }

    fn compare_and_swap(
        &mut self,
        peer: NodeId,
        word: RemoteAddr,
        expected: u64,
        new: u64,
    ) -> Result<OpId, PostError> {
        self.dir.check_atomic(peer, word)?;
        self.post(
            peer,
            OpKind::CompareAndSwap,
            Signal::Signaled,
            Body::Cas {
                word,
                expected,
                new,
            },
        )
    }

    fn fetch_add(&mut self, peer: NodeId, word: RemoteAddr, delta: u64) -> Result<OpId, PostError> {
        self.dir.check_atomic(peer, word)?;
        self.post(
            peer,
            OpKind::FetchAdd,
            Signal::Signaled,
            Body::FetchAdd { word, delta },
        )
    }

    fn send(&mut self, peer: NodeId, data: &[u8], signal: Signal) -> Result<OpId, PostError> {
        self.dir
            .check_send(peer, data.len(), self.max_message_len)?;
        self.post(
            peer,
            OpKind::Send,
            signal,
            Body::Send {
                data: data.to_vec(),
            },
        )
    }

    fn fence(&mut self, peer: NodeId) -> Result<OpId, PostError> {
        self.dir.check_fence(peer)?;
        self.post(peer, OpKind::Fence, Signal::Signaled, Body::Fence)
    }

    fn poll(&mut self, out: &mut [Event]) -> usize {
        let mut w = self.world.borrow_mut();
        let events = &mut w.nodes[self.me.index()].events;
        let n = out.len().min(events.len());
        for (slot, e) in out.iter_mut().zip(events.drain(..n)) {
            *slot = e;
        }
        for e in &out[..n] {
            if let Event::PeerConnected { peer, incarnation } = *e {
                self.dir.add_peer(peer, &self.layouts[peer.index()]);
                let st = &mut w.nodes[self.me.index()];
                if st.reconnect[peer.index()] == Some(incarnation) {
                    // The link to the peer's new incarnation comes up now.
                    st.reconnect[peer.index()] = None;
                    st.cut[peer.index()] = false;
                    st.reported[peer.index()] = false;
                }
            }
        }
        n
    }

    fn is_absent(&self, peer: NodeId) -> bool {
        self.dir.is_absent(peer)
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> Option<NodeId> {
        let (from, data) = self.world.borrow_mut().nodes[self.me.index()]
            .inbox
            .pop_front()?;
        *buf = data;
        Some(from)
    }

    fn report_failed(&mut self, peer: NodeId) {
        if self.dir.is_peer(peer) {
            let mut w = self.world.borrow_mut();
            if !w.nodes[self.me.index()].cut[peer.index()] {
                w.cut(self.me, peer, FailureCause::Local);
            }
        }
    }

    /// A no-op: every simulated node is driven from the caller's thread, and `wait` runs the
    /// simulation instead of blocking, so there is never a parked driver to wake.
    fn waker(&self) -> Waker {
        Waker::noop()
    }

    /// Runs the simulation until something reaches this node or `timeout` of virtual time
    /// passes.
    fn wait(&mut self, timeout: Duration) {
        let mut w = self.world.borrow_mut();
        let me = self.me.index();
        let deadline = w.now + timeout;
        w.nodes[me].dirty = false;
        loop {
            let node = &w.nodes[me];
            if node.dirty || !node.events.is_empty() || !node.inbox.is_empty() {
                return;
            }
            if matches!(w.step(deadline), Stepped::Idle) {
                w.now = w.now.max(deadline);
                w.fire_timeouts();
                return;
            }
        }
    }
}

/// A trace mark for a restart (distinct from a late start's `u64::MAX`).
fn incarnation_mark(incarnation: u64) -> u64 {
    u64::MAX - 1 - incarnation
}

/// The seeds a simulation test should run.
///
/// `SQUALL_SEED=N` replays exactly seed `N`; otherwise `SQUALL_SEEDS=K` (default `default_count`)
/// seeds starting at `SQUALL_SEED_BASE` (default 0). Soaks raise `SQUALL_SEEDS`.
///
/// ```
/// let seeds = squall_transport_mem::sim::seeds(4);
/// assert!(!seeds.is_empty());
/// ```
pub fn seeds(default_count: u64) -> Vec<u64> {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    if let Some(seed) = var("SQUALL_SEED") {
        return vec![seed];
    }
    let base = var("SQUALL_SEED_BASE").unwrap_or(0);
    let count = var("SQUALL_SEEDS").unwrap_or(default_count);
    (base..base.saturating_add(count)).collect()
}

/// Runs `check` for every seed of [`seeds`]; on the first failure, panics with the seed and the
/// command line that replays it (with `SQUALL_SIM_TORN_WRITES=1` in front when that variable
/// turned torn writes on for [`SimConfig::seeded`]).
///
/// ```
/// squall_transport_mem::sim::check_seeds("doc", 3, |seed| if seed < 100 { Ok(()) } else { Err("big".into()) });
/// ```
pub fn check_seeds(
    name: &str,
    default_count: u64,
    mut check: impl FnMut(u64) -> Result<(), String>,
) {
    for seed in seeds(default_count) {
        if let Err(why) = check(seed) {
            let replay = replay_line(name, seed, torn_from_env());
            panic!("{name}: seed {seed} failed: {why}\n  replay with: {replay}");
        }
    }
}

/// The command line that replays `seed` of the check `name`, with torn writes on if `torn`.
fn replay_line(name: &str, seed: u64, torn: bool) -> String {
    let torn = if torn {
        "SQUALL_SIM_TORN_WRITES=1 "
    } else {
        ""
    };
    format!("{torn}SQUALL_SEED={seed} cargo test {name}")
}

/// Cases a simulation proptest should run: `SQUALL_PROPTEST_CASES` if set, else `default`.
///
/// ```
/// assert!(squall_transport_mem::sim::proptest_cases(64) >= 1);
/// ```
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("SQUALL_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::replay_line;

    #[test]
    fn the_replay_line_names_the_torn_mode_when_it_is_on() {
        assert_eq!(
            replay_line("t", 3, true),
            "SQUALL_SIM_TORN_WRITES=1 SQUALL_SEED=3 cargo test t"
        );
        assert_eq!(replay_line("t", 3, false), "SQUALL_SEED=3 cargo test t");
    }
}
