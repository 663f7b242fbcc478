//! The threaded fabric: nodes share one process, regions are shared memory, and every op is
//! applied at once on the posting thread — so threads driving different nodes truly race, and the
//! contract's atomicity and ordering rest on the hardware's atomics, as they do over RDMA.
//!
//! Failure injection ([`Faults`]): crash a node, or hold the link between two nodes (a silent
//! partition: ops queue, then time out after `op_timeout` and the link breaks) and heal it.
//!
//! ```
//! use squall_transport::{Event, LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Transport};
//! use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
//! let r = RegionId(0);
//! let mut nodes = ThreadedFabric::new(ThreadedConfig::default())?.cluster(2, &[RegionSpec::new(r, 64)])?;
//! nodes[0].region(r).unwrap().store(0, 99);
//! nodes[0].write(NodeId(1), LocalSlice::new(r, 0, 8), RemoteAddr::new(r, 8), Signal::Unsignaled)?;
//! assert_eq!(nodes[1].region(r).unwrap().load(1), 99); // applied at once
//! let op = nodes[0].compare_and_swap(NodeId(1), RemoteAddr::new(r, 8), 99, 100)?;
//! let mut events = [Event::PeerFailed { peer: NodeId(0), cause: squall_transport::FailureCause::Local }; 4];
//! assert_eq!(nodes[0].poll(&mut events), 1);
//! assert!(matches!(events[0], Event::Completion(c) if c.op == op && c.result == Ok(99)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crossbeam_utils::sync::{Parker, Unparker};
use squall_transport::{
    Clock, Completion, Directory, Event, FailureCause, LocalSlice, NodeId, OpError, OpId, OpKind,
    PostError, Region, RegionId, RegionSpec, RemoteAddr, Signal, SystemClock, Time, Transport,
    Waker,
};

use crate::apply::{self, Source};
use crate::config::ConfigError;
use crate::gate::{Entry, Gate};

/// Settings of a threaded fabric.
///
/// ```
/// use squall_transport_mem::threaded::ThreadedConfig;
/// let cfg = ThreadedConfig { op_timeout: std::time::Duration::ZERO, ..Default::default() };
/// assert!(cfg.validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadedConfig {
    /// How long an op may wait on a held (partitioned) link before it fails and the link breaks.
    pub op_timeout: Duration,
    /// The largest two-sided message.
    pub max_message_len: usize,
}

impl Default for ThreadedConfig {
    fn default() -> Self {
        ThreadedConfig {
            op_timeout: Duration::from_millis(100),
            max_message_len: 64 * 1024,
        }
    }
}

impl ThreadedConfig {
    /// Checks every setting, with an error that says what to change.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.op_timeout.is_zero() {
            return Err(ConfigError::ZeroTimeout);
        }
        if self.max_message_len == 0 {
            return Err(ConfigError::ZeroMessageLen);
        }
        Ok(())
    }
}

/// Builds clusters of [`ThreadedNode`]s.
#[derive(Clone, Debug)]
pub struct ThreadedFabric {
    config: ThreadedConfig,
}

impl ThreadedFabric {
    /// A fabric with validated settings.
    pub fn new(config: ThreadedConfig) -> Result<ThreadedFabric, ConfigError> {
        config.validate()?;
        Ok(ThreadedFabric { config })
    }

    /// The settings.
    pub fn config(&self) -> &ThreadedConfig {
        &self.config
    }

    /// A fresh cluster of `n` fully linked nodes (`NodeId(0)..NodeId(n)`), each with `layout`.
    pub fn cluster(
        &self,
        n: usize,
        layout: &[RegionSpec],
    ) -> Result<Vec<ThreadedNode>, ConfigError> {
        self.cluster_late(n, layout, &[])
    }

    /// Like [`cluster`](Self::cluster), but the nodes in `late` are configured and *not
    /// started*: the others see them absent (ops to them are refused with
    /// [`PostError::NotConnected`]; nothing times out or is reported) until
    /// [`Faults::start_node`] starts them. Every endpoint is returned; a late node's own sees
    /// every peer absent until it is started.
    ///
    /// ```
    /// use squall_transport::{Event, NodeId, PostError, RegionId, RegionSpec, Transport};
    /// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// let fabric = ThreadedFabric::new(ThreadedConfig::default())?;
    /// let mut nodes = fabric.cluster_late(2, &[RegionSpec::new(RegionId(0), 64)], &[NodeId(1)])?;
    /// assert_eq!(nodes[0].fence(NodeId(1)), Err(PostError::NotConnected { peer: NodeId(1) }));
    /// nodes[0].faults().start_node(NodeId(1));
    /// let mut events = [Event::PeerConnected { peer: NodeId(0), incarnation: 0 }; 4];
    /// assert_eq!(nodes[0].poll(&mut events), 1);
    /// assert!(matches!(events[0], Event::PeerConnected { peer: NodeId(1), .. }));
    /// assert!(nodes[0].fence(NodeId(1)).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cluster_late(
        &self,
        n: usize,
        layout: &[RegionSpec],
        late: &[NodeId],
    ) -> Result<Vec<ThreadedNode>, ConfigError> {
        if n == 0 {
            return Err(ConfigError::NoNodes);
        }
        if n > 1024 {
            return Err(ConfigError::TooManyNodes(n));
        }
        RegionSpec::validate_all(layout)?;
        let mut parkers = Vec::with_capacity(n);
        let mut nodes = Vec::with_capacity(n);
        for _ in 0..n {
            let parker = Parker::new();
            let regions = layout
                .iter()
                .map(|s| Region::new(*s))
                .collect::<Result<Vec<_>, _>>()?;
            nodes.push(NodeShared {
                regions,
                inbox: Mutex::new(VecDeque::new()),
                inbox_len: AtomicUsize::new(0),
                unparker: parker.unparker().clone(),
                deferred: Mutex::new(Vec::new()),
                has_deferred: AtomicBool::new(false),
                held_ops: AtomicUsize::new(0),
                crashed: AtomicBool::new(false),
            });
            parkers.push(parker);
        }
        let links = n * n;
        let shared = Arc::new(Shared {
            n,
            config: self.config.clone(),
            clock: SystemClock::new(),
            nodes,
            gates: (0..links).map(|_| Gate::default()).collect(),
            held: (0..links).map(|_| Mutex::new(VecDeque::new())).collect(),
            causes: (0..links).map(|_| AtomicU8::new(0)).collect(),
            reported: (0..links).map(|_| AtomicBool::new(false)).collect(),
            fault_epoch: AtomicU64::new(0),
            started: (0..n as u32)
                .map(|i| AtomicBool::new(!late.contains(&NodeId(i))))
                .collect(),
            layout: layout.to_vec(),
        });
        let ids: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
        Ok(parkers
            .into_iter()
            .enumerate()
            .map(|(i, parker)| {
                let me = NodeId(i as u32);
                let mut dir = Directory::new(me);
                for r in &shared.nodes[i].regions {
                    // Ids were validated unique above.
                    let _ = dir.add_local(r.clone());
                }
                for &peer in &ids {
                    if late.contains(&me) || late.contains(&peer) {
                        dir.add_absent_peer(peer);
                    } else {
                        dir.add_peer(peer, layout);
                    }
                }
                ThreadedNode {
                    me,
                    shared: Arc::clone(&shared),
                    dir,
                    parker,
                    events: VecDeque::new(),
                    seen_epoch: 0,
                    next_op: 0,
                }
            })
            .collect())
    }
}

/// An op waiting on a held link, with its source bytes captured at post time.
struct Held {
    op: OpId,
    kind: OpKind,
    signaled: bool,
    deadline: Time,
    body: HeldBody,
}

enum HeldBody {
    Write {
        dst: RemoteAddr,
        data: Vec<u8>,
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
    Send {
        data: Vec<u8>,
    },
    Fence,
}

struct NodeShared {
    regions: Vec<Region>,
    inbox: Mutex<VecDeque<(NodeId, Vec<u8>)>>,
    inbox_len: AtomicUsize,
    unparker: Unparker,
    /// Events produced on other threads (heals, crashes) for this node.
    deferred: Mutex<Vec<Event>>,
    has_deferred: AtomicBool,
    /// Ops this node has queued on held links.
    held_ops: AtomicUsize,
    crashed: AtomicBool,
}

struct Shared {
    n: usize,
    config: ThreadedConfig,
    clock: SystemClock,
    nodes: Vec<NodeShared>,
    /// Per directed link `src * n + dst`.
    gates: Vec<Gate>,
    held: Vec<Mutex<VecDeque<Held>>>,
    /// Why the link was closed, as the source should report it.
    causes: Vec<AtomicU8>,
    /// Whether the source has reported the destination failed.
    reported: Vec<AtomicBool>,
    fault_epoch: AtomicU64,
    /// Per node: started (late nodes are not until `Faults::start_node`).
    started: Vec<AtomicBool>,
    layout: Vec<RegionSpec>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks cannot leave the data half-updated (every
    // critical section is a push or a pop), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn encode(cause: FailureCause) -> u8 {
    match cause {
        FailureCause::TimedOut => 1,
        FailureCause::ConnectionLost => 2,
        FailureCause::Local => 3,
        FailureCause::Remote => 4,
    }
}

fn decode(code: u8) -> FailureCause {
    match code {
        1 => FailureCause::TimedOut,
        3 => FailureCause::Local,
        4 => FailureCause::Remote,
        _ => FailureCause::ConnectionLost,
    }
}

impl Shared {
    fn link(&self, src: NodeId, dst: NodeId) -> usize {
        src.index() * self.n + dst.index()
    }

    fn region(&self, node: NodeId, id: RegionId) -> &Region {
        // Validated at post time: every node registers the same layout.
        self.nodes[node.index()]
            .regions
            .iter()
            .find(|r| r.id() == id)
            .unwrap_or_else(|| unreachable!("region {id} was validated on {node}"))
    }

    /// Emits `PeerFailed` for `src` about `dst` unless already reported.
    fn report(&self, src: NodeId, dst: NodeId, sink: &mut impl Extend<Event>) {
        let link = self.link(src, dst);
        if !self.reported[link].swap(true, Ordering::AcqRel) {
            let cause = decode(self.causes[link].load(Ordering::Acquire));
            sink.extend([Event::PeerFailed { peer: dst, cause }]);
        }
    }

    fn defer(&self, node: NodeId, events: impl IntoIterator<Item = Event>) {
        let shared = &self.nodes[node.index()];
        lock(&shared.deferred).extend(events);
        shared.has_deferred.store(true, Ordering::Release);
        shared.unparker.unpark();
    }

    /// Closes the directed link `src -> dst` with the cause `src` will report, failing whatever
    /// is queued on it. Returns the error events for `src` (not yet delivered).
    fn close(&self, src: NodeId, dst: NodeId, cause: FailureCause) -> Vec<Event> {
        let link = self.link(src, dst);
        let _ = self.causes[link].compare_exchange(
            0,
            encode(cause),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        self.gates[link].close();
        let mut out = Vec::new();
        let mut held = lock(&self.held[link]);
        if !held.is_empty() {
            self.report(src, dst, &mut out);
        }
        for h in held.drain(..) {
            self.nodes[src.index()]
                .held_ops
                .fetch_sub(1, Ordering::AcqRel);
            out.push(failed(h.op, dst, h.kind, OpError::PeerFailed));
        }
        out
    }

    /// Breaks both directions between `a` and `b`; `a` reports `cause_a`, `b` reports `cause_b`.
    /// Events for `a` are returned, events for `b` are deferred to it.
    fn break_pair(
        &self,
        a: NodeId,
        a_cause: FailureCause,
        b: NodeId,
        b_cause: FailureCause,
    ) -> Vec<Event> {
        let for_a = self.close(a, b, a_cause);
        let for_b = self.close(b, a, b_cause);
        if !for_b.is_empty() {
            self.defer(b, for_b);
        }
        self.fault_epoch.fetch_add(1, Ordering::AcqRel);
        self.nodes[a.index()].unparker.unpark();
        self.nodes[b.index()].unparker.unpark();
        for_a
    }

    /// Applies one held op (the link's gate is held; the op enters past the hold).
    fn apply_held(&self, src: NodeId, dst: NodeId, h: &Held) -> Result<u64, OpError> {
        let gate = &self.gates[self.link(src, dst)];
        if gate.enter_held() == Entry::Closed {
            return Err(OpError::PeerFailed);
        }
        let value = match &h.body {
            HeldBody::Write { dst: at, data } => {
                apply::write(
                    self.region(dst, at.region),
                    at.offset,
                    Source::Bytes(data),
                    data.len(),
                );
                0
            }
            HeldBody::Read {
                src: at,
                dst: local,
            } => {
                apply::read(
                    self.region(dst, at.region),
                    *at,
                    self.region(src, local.region),
                    *local,
                );
                0
            }
            HeldBody::Cas {
                word,
                expected,
                new,
            } => {
                apply::compare_and_swap(self.region(dst, word.region), word.offset, *expected, *new)
            }
            HeldBody::FetchAdd { word, delta } => {
                apply::fetch_add(self.region(dst, word.region), word.offset, *delta)
            }
            HeldBody::Send { data } => {
                self.deliver(src, dst, data.clone());
                0
            }
            HeldBody::Fence => 0,
        };
        gate.leave();
        self.nodes[dst.index()].unparker.unpark();
        Ok(value)
    }

    fn deliver(&self, src: NodeId, dst: NodeId, data: Vec<u8>) {
        let node = &self.nodes[dst.index()];
        lock(&node.inbox).push_back((src, data));
        node.inbox_len.fetch_add(1, Ordering::AcqRel);
    }
}

fn failed(op: OpId, peer: NodeId, kind: OpKind, error: OpError) -> Event {
    Event::Completion(Completion {
        op,
        peer,
        kind,
        result: Err(error),
    })
}

fn completed(op: OpId, peer: NodeId, kind: OpKind, value: u64) -> Event {
    Event::Completion(Completion {
        op,
        peer,
        kind,
        result: Ok(value),
    })
}

/// Injects faults into a threaded cluster. Cheap to clone; usable from any thread.
#[derive(Clone)]
pub struct Faults {
    shared: Arc<Shared>,
}

impl Faults {
    /// Crashes `victim`: every link to and from it breaks (its peers see the connection lost),
    /// nothing it posts is applied any more, and its own endpoint refuses new ops.
    ///
    /// Links to nodes not started yet are left alone: they stay absent (a node started later
    /// never connects to a crashed one), and a victim not started yet simply never starts.
    pub fn crash(&self, victim: NodeId) {
        let s = &self.shared;
        s.nodes[victim.index()]
            .crashed
            .store(true, Ordering::Release);
        if !s.started[victim.index()].load(Ordering::Acquire) {
            return;
        }
        for i in 0..s.n as u32 {
            let peer = NodeId(i);
            if peer != victim && s.started[peer.index()].load(Ordering::Acquire) {
                let events = s.break_pair(
                    peer,
                    FailureCause::ConnectionLost,
                    victim,
                    FailureCause::ConnectionLost,
                );
                s.defer(peer, events);
            }
        }
        tracing::debug!(%victim, "threaded fabric: node crashed");
    }

    /// Starts a node created late by [`ThreadedFabric::cluster_late`]: links come up between it
    /// and every running node (started, not crashed, not cut from it), and both ends of each new
    /// link get [`Event::PeerConnected`] (incarnation 1). Does nothing if the node is started
    /// already or crashed.
    pub fn start_node(&self, node: NodeId) {
        let s = &self.shared;
        if s.nodes[node.index()].crashed.load(Ordering::Acquire)
            || s.started[node.index()].swap(true, Ordering::AcqRel)
        {
            return;
        }
        let mut mine = Vec::new();
        for i in 0..s.n as u32 {
            let peer = NodeId(i);
            let up = peer != node
                && s.started[peer.index()].load(Ordering::Acquire)
                && !s.nodes[peer.index()].crashed.load(Ordering::Acquire)
                && !s.gates[s.link(node, peer)].is_closed()
                && !s.gates[s.link(peer, node)].is_closed();
            if up {
                s.defer(
                    peer,
                    [Event::PeerConnected {
                        peer: node,
                        incarnation: 1,
                    }],
                );
                mine.push(Event::PeerConnected {
                    peer,
                    incarnation: 1,
                });
            }
        }
        s.defer(node, mine);
        tracing::debug!(%node, "threaded fabric: late node started");
    }

    /// Holds the link between `a` and `b` both ways: ops queue, and fail once they have waited
    /// `op_timeout`, breaking the link.
    pub fn partition(&self, a: NodeId, b: NodeId) {
        let s = &self.shared;
        s.gates[s.link(a, b)].hold();
        s.gates[s.link(b, a)].hold();
    }

    /// Releases a hold between `a` and `b`: queued ops are applied in order, then new ops flow.
    pub fn heal(&self, a: NodeId, b: NodeId) {
        let s = &self.shared;
        for (src, dst) in [(a, b), (b, a)] {
            let link = s.link(src, dst);
            let mut held = lock(&s.held[link]);
            let mut events = Vec::new();
            for h in held.drain(..) {
                s.nodes[src.index()].held_ops.fetch_sub(1, Ordering::AcqRel);
                match s.apply_held(src, dst, &h) {
                    Ok(v) if h.signaled => events.push(completed(h.op, dst, h.kind, v)),
                    Ok(_) => {}
                    Err(e) => events.push(failed(h.op, dst, h.kind, e)),
                }
            }
            s.gates[link].release();
            drop(held);
            if !events.is_empty() {
                s.defer(src, events);
            }
        }
    }
}

/// One node's endpoint on a threaded fabric. Move it to the thread that drives the node.
pub struct ThreadedNode {
    me: NodeId,
    shared: Arc<Shared>,
    dir: Directory,
    parker: Parker,
    events: VecDeque<Event>,
    seen_epoch: u64,
    next_op: u64,
}

impl std::fmt::Debug for ThreadedNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedNode")
            .field("me", &self.me)
            .finish_non_exhaustive()
    }
}

/// An op as posted, before it is applied or held.
enum Posted<'a> {
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
    Send {
        data: &'a [u8],
    },
    Fence,
}

impl ThreadedNode {
    /// A handle for injecting faults into this node's cluster.
    pub fn faults(&self) -> Faults {
        Faults {
            shared: Arc::clone(&self.shared),
        }
    }

    fn post(
        &mut self,
        peer: NodeId,
        kind: OpKind,
        signaled: bool,
        op: Posted<'_>,
    ) -> Result<OpId, PostError> {
        let s = &*self.shared;
        if s.nodes[self.me.index()].crashed.load(Ordering::Acquire) {
            return Err(PostError::Closed);
        }
        let id = OpId(self.next_op);
        self.next_op += 1;
        let link = s.link(self.me, peer);
        loop {
            match s.gates[link].enter() {
                Entry::Open => {
                    let value = self.apply_now(peer, &op);
                    s.gates[link].leave();
                    s.nodes[peer.index()].unparker.unpark();
                    if signaled {
                        self.events.push_back(completed(id, peer, kind, value));
                    }
                    return Ok(id);
                }
                Entry::Closed => {
                    s.report(self.me, peer, &mut self.events);
                    self.events
                        .push_back(failed(id, peer, kind, OpError::PeerFailed));
                    return Ok(id);
                }
                Entry::Held => {
                    let mut held = lock(&s.held[link]);
                    if !s.gates[link].is_held() {
                        continue; // healed meanwhile: everything queued before was applied
                    }
                    let body = self.capture(op);
                    let deadline = s.clock.now() + s.config.op_timeout;
                    held.push_back(Held {
                        op: id,
                        kind,
                        signaled,
                        deadline,
                        body,
                    });
                    s.nodes[self.me.index()]
                        .held_ops
                        .fetch_add(1, Ordering::AcqRel);
                    return Ok(id);
                }
            }
        }
    }

    fn apply_now(&self, peer: NodeId, op: &Posted<'_>) -> u64 {
        let s = &self.shared;
        match *op {
            Posted::Write { src, dst } => {
                let from = s.region(self.me, src.region);
                apply::write(
                    s.region(peer, dst.region),
                    dst.offset,
                    Source::Region(from, src.offset),
                    src.len,
                );
                0
            }
            Posted::Read { src, dst } => {
                apply::read(
                    s.region(peer, src.region),
                    src,
                    s.region(self.me, dst.region),
                    dst,
                );
                0
            }
            Posted::Cas {
                word,
                expected,
                new,
            } => apply::compare_and_swap(s.region(peer, word.region), word.offset, expected, new),
            Posted::FetchAdd { word, delta } => {
                apply::fetch_add(s.region(peer, word.region), word.offset, delta)
            }
            Posted::Send { data } => {
                s.deliver(self.me, peer, data.to_vec());
                0
            }
            Posted::Fence => 0,
        }
    }

    fn capture(&self, op: Posted<'_>) -> HeldBody {
        match op {
            Posted::Write { src, dst } => {
                let mut data = vec![0u8; src.len];
                let _ = self
                    .shared
                    .region(self.me, src.region)
                    .read_bytes(src.offset, &mut data);
                HeldBody::Write { dst, data }
            }
            Posted::Read { src, dst } => HeldBody::Read { src, dst },
            Posted::Cas {
                word,
                expected,
                new,
            } => HeldBody::Cas {
                word,
                expected,
                new,
            },
            Posted::FetchAdd { word, delta } => HeldBody::FetchAdd { word, delta },
            Posted::Send { data } => HeldBody::Send {
                data: data.to_vec(),
            },
            Posted::Fence => HeldBody::Fence,
        }
    }

    /// Reports links closed by others (crash, a peer's `report_failed`, a timeout seen by the
    /// peer) and fails this node's held ops whose deadline passed.
    fn refresh(&mut self) {
        let s = &*self.shared;
        let epoch = s.fault_epoch.load(Ordering::Acquire);
        if epoch != self.seen_epoch {
            self.seen_epoch = epoch;
            for &peer in self.dir.peers() {
                if s.gates[s.link(self.me, peer)].is_closed() {
                    s.report(self.me, peer, &mut self.events);
                }
            }
        }
        if s.nodes[self.me.index()].held_ops.load(Ordering::Acquire) > 0 {
            let now = s.clock.now();
            let expired: Vec<NodeId> = (self.dir.peers().iter().copied())
                .filter(|&peer| {
                    let link = s.link(self.me, peer);
                    lock(&s.held[link])
                        .front()
                        .is_some_and(|h| h.deadline <= now)
                })
                .collect();
            for peer in expired {
                self.time_out(peer);
            }
        }
        let node = &self.shared.nodes[self.me.index()];
        if node.has_deferred.swap(false, Ordering::AcqRel) {
            let deferred = std::mem::take(&mut *lock(&node.deferred));
            // Deferred events are older than anything posted since; put them first.
            for e in deferred.into_iter().rev() {
                self.events.push_front(e);
            }
        }
    }

    fn time_out(&mut self, peer: NodeId) {
        let s = Arc::clone(&self.shared);
        let link = s.link(self.me, peer);
        let _ = s.causes[link].compare_exchange(
            0,
            encode(FailureCause::TimedOut),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        // The op that waited longest timed out; the rest are flushed by the broken link.
        let first = lock(&s.held[link]).pop_front();
        let mut events = Vec::new();
        if let Some(h) = first {
            s.nodes[self.me.index()]
                .held_ops
                .fetch_sub(1, Ordering::AcqRel);
            s.report(self.me, peer, &mut events);
            events.push(failed(h.op, peer, h.kind, OpError::TimedOut));
        }
        events.extend(s.break_pair(self.me, FailureCause::TimedOut, peer, FailureCause::Remote));
        self.events.extend(events);
        tracing::debug!(me = %self.me, %peer, "threaded fabric: op timed out on a held link");
    }
}

impl Transport for ThreadedNode {
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
        self.shared.config.max_message_len
    }

    fn now(&self) -> Time {
        self.shared.clock.now()
    }

    fn write(
        &mut self,
        peer: NodeId,
        src: LocalSlice,
        dst: RemoteAddr,
        signal: Signal,
    ) -> Result<OpId, PostError> {
        self.dir.check_write(peer, src, dst)?;
        self.post(
            peer,
            OpKind::Write,
            signal == Signal::Signaled,
            Posted::Write { src, dst },
        )
    }

    fn read(&mut self, peer: NodeId, src: RemoteAddr, dst: LocalSlice) -> Result<OpId, PostError> {
        self.dir.check_remote(peer, src, dst.len)?;
        self.dir.check_local(dst)?;
        self.post(peer, OpKind::Read, true, Posted::Read { src, dst })
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
            true,
            Posted::Cas {
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
            true,
            Posted::FetchAdd { word, delta },
        )
    }

    fn send(&mut self, peer: NodeId, data: &[u8], signal: Signal) -> Result<OpId, PostError> {
        self.dir
            .check_send(peer, data.len(), self.shared.config.max_message_len)?;
        self.post(
            peer,
            OpKind::Send,
            signal == Signal::Signaled,
            Posted::Send { data },
        )
    }

    fn fence(&mut self, peer: NodeId) -> Result<OpId, PostError> {
        self.dir.check_fence(peer)?;
        self.post(peer, OpKind::Fence, true, Posted::Fence)
    }

    fn poll(&mut self, out: &mut [Event]) -> usize {
        self.refresh();
        let n = out.len().min(self.events.len());
        for (slot, e) in out.iter_mut().zip(self.events.drain(..n)) {
            if let Event::PeerConnected { peer, .. } = e {
                self.dir.add_peer(peer, &self.shared.layout);
            }
            *slot = e;
        }
        n
    }

    fn is_absent(&self, peer: NodeId) -> bool {
        self.dir.is_absent(peer)
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> Option<NodeId> {
        let node = &self.shared.nodes[self.me.index()];
        if node.inbox_len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let (from, data) = lock(&node.inbox).pop_front()?;
        node.inbox_len.fetch_sub(1, Ordering::AcqRel);
        *buf = data;
        Some(from)
    }

    fn report_failed(&mut self, peer: NodeId) {
        if !self.dir.is_peer(peer) {
            return;
        }
        let s = Arc::clone(&self.shared);
        let events = s.break_pair(self.me, FailureCause::Local, peer, FailureCause::Remote);
        s.report(self.me, peer, &mut self.events);
        self.events.extend(events);
    }

    fn waker(&self) -> Waker {
        let unparker = self.shared.nodes[self.me.index()].unparker.clone();
        Waker::new(move || unparker.unpark())
    }

    fn wait(&mut self, timeout: Duration) {
        self.refresh();
        let node = &self.shared.nodes[self.me.index()];
        if !self.events.is_empty() || node.inbox_len.load(Ordering::Acquire) > 0 {
            return;
        }
        let timeout = if node.held_ops.load(Ordering::Acquire) > 0 {
            timeout.min(self.shared.config.op_timeout / 4)
        } else {
            timeout
        };
        self.parker.park_timeout(timeout);
    }
}
