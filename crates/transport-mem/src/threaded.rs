//! The threaded fabric: nodes share one process, regions are shared memory, and every op is
//! applied at once on the posting thread — so threads driving different nodes truly race, and the
//! contract's atomicity and ordering rest on the hardware's atomics, as they do over RDMA.
//!
//! Failure injection ([`Faults`]): crash a node and restart it as a new incarnation
//! ([`Faults::restart_node`]: fresh regions, links reset), or hold the link between two nodes (a
//! silent partition: ops queue, then time out after `op_timeout` and the link breaks) and heal
//! it.
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
            let regions = fresh_regions(layout)?;
            nodes.push(NodeShared {
                life: AtomicU64::new(0),
                current: Mutex::new(Life {
                    regions,
                    unparker: parker.unparker().clone(),
                }),
                inbox: Mutex::new(VecDeque::new()),
                inbox_len: AtomicUsize::new(0),
                deferred: Mutex::new(Vec::new()),
                connects: Mutex::new(Vec::new()),
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
            faults: Mutex::new(()),
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
                let mut node = ThreadedNode::fresh(&shared, me, 0, parker);
                for &peer in &ids {
                    if late.contains(&me) || late.contains(&peer) {
                        node.dir.add_absent_peer(peer);
                    } else {
                        let _ = node.link(peer, 0);
                    }
                }
                node
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
    /// The lives of the source and the destination it was posted between, and their regions:
    /// applied only while both are still those lives.
    src: (u64, Arc<[Region]>),
    dst: (u64, Arc<[Region]>),
}

/// One life of a node: what a new incarnation replaces (its memory and its thread's parker).
struct Life {
    regions: Arc<[Region]>,
    unparker: Unparker,
}

/// A peer's life as this endpoint linked it (at its `PeerConnected`): ops to it apply only
/// while the peer still lives that life, so nothing posted to an old incarnation lands on a
/// new one.
struct Remote {
    life: u64,
    regions: Arc<[Region]>,
    unparker: Unparker,
}

fn fresh_regions(layout: &[RegionSpec]) -> Result<Arc<[Region]>, ConfigError> {
    Ok(layout
        .iter()
        .map(|s| Region::new(*s))
        .collect::<Result<Vec<_>, _>>()?
        .into())
}

fn find(regions: &[Region], id: RegionId) -> &Region {
    // Validated at post time: every node registers the same layout.
    regions
        .iter()
        .find(|r| r.id() == id)
        .unwrap_or_else(|| unreachable!("region {id} was validated at post time"))
}

/// The incarnation [`Event::PeerConnected`] names for a node's life: 1 for the first life a
/// peer links (a late node's start), one more for each restart.
fn incarnation(life: u64) -> u64 {
    life + 1
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
    /// How many times the node was restarted ([`Faults::restart_node`]); checked by every op
    /// inside the link's gate.
    life: AtomicU64,
    /// The current life's memory and parker.
    current: Mutex<Life>,
    inbox: Mutex<VecDeque<(NodeId, Vec<u8>)>>,
    inbox_len: AtomicUsize,
    /// Events produced on other threads (heals, crashes) for this node: handed out before
    /// anything the node queued itself.
    deferred: Mutex<Vec<Event>>,
    /// `PeerConnected` events produced on other threads (starts, restarts): handed out after
    /// everything queued before, so a link's failure always comes before its successor's
    /// connection.
    connects: Mutex<Vec<Event>>,
    /// Whether `deferred` or `connects` may hold events.
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
    /// Serialises the fault operations (crash, start, restart, a failure report, a timeout)
    /// and the reports of closed links, so a restart's reset of a link never interleaves
    /// with a report about its previous life.
    faults: Mutex<()>,
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

    fn unpark(&self, node: NodeId) {
        lock(&self.nodes[node.index()].current).unparker.unpark();
    }

    fn life(&self, node: NodeId) -> u64 {
        self.nodes[node.index()].life.load(Ordering::Acquire)
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
        self.unpark(node);
    }

    /// Queues `PeerConnected { peer, .. }` for `node`, after everything queued before.
    fn connect(&self, node: NodeId, peer: NodeId) {
        let shared = &self.nodes[node.index()];
        lock(&shared.connects).push(Event::PeerConnected {
            peer,
            incarnation: incarnation(self.life(peer)),
        });
        shared.has_deferred.store(true, Ordering::Release);
        self.unpark(node);
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
        self.unpark(a);
        self.unpark(b);
        for_a
    }

    /// Applies one held op (the link's gate is held; the op enters past the hold).
    fn apply_held(&self, src: NodeId, dst: NodeId, h: &Held) -> Result<u64, OpError> {
        let gate = &self.gates[self.link(src, dst)];
        if gate.enter_held() == Entry::Closed {
            return Err(OpError::PeerFailed);
        }
        if self.life(src) != h.src.0 || self.life(dst) != h.dst.0 {
            gate.leave();
            return Err(OpError::PeerFailed);
        }
        let (mine, theirs) = (&*h.src.1, &*h.dst.1);
        let value = match &h.body {
            HeldBody::Write { dst: at, data } => {
                apply::write(
                    find(theirs, at.region),
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
                    find(theirs, at.region),
                    *at,
                    find(mine, local.region),
                    *local,
                );
                0
            }
            HeldBody::Cas {
                word,
                expected,
                new,
            } => apply::compare_and_swap(find(theirs, word.region), word.offset, *expected, *new),
            HeldBody::FetchAdd { word, delta } => {
                apply::fetch_add(find(theirs, word.region), word.offset, *delta)
            }
            HeldBody::Send { data } => {
                self.deliver(src, dst, data.clone());
                0
            }
            HeldBody::Fence => 0,
        };
        gate.leave();
        self.unpark(dst);
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
        let _faults = lock(&s.faults);
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
    /// link get [`Event::PeerConnected`] with the other end's incarnation
    /// ([`incarnation`](Self::incarnation): 1 for the late node, 0 for a peer up from the
    /// start). Does nothing if the node is started already or crashed.
    pub fn start_node(&self, node: NodeId) {
        let s = &self.shared;
        let _faults = lock(&s.faults);
        if s.nodes[node.index()].crashed.load(Ordering::Acquire)
            || s.started[node.index()].swap(true, Ordering::AcqRel)
        {
            return;
        }
        for i in 0..s.n as u32 {
            let peer = NodeId(i);
            let up = peer != node
                && s.started[peer.index()].load(Ordering::Acquire)
                && !s.nodes[peer.index()].crashed.load(Ordering::Acquire)
                && !s.gates[s.link(node, peer)].is_closed()
                && !s.gates[s.link(peer, node)].is_closed();
            if up {
                s.connect(peer, node);
                s.connect(node, peer);
            }
        }
        tracing::debug!(%node, "threaded fabric: late node started");
    }

    /// Restarts a crashed node under the same id as a new incarnation, with fresh (zeroed)
    /// regions and a fresh inbox, and returns its new endpoint (`None` if the node has not
    /// crashed). The old endpoint, if still held, refuses every op from then on and takes
    /// nothing of the new life's: its `poll` hands out no event, its `recv` no message, and its
    /// `report_failed` and timeouts break no link.
    ///
    /// Every link of the node is reset, including those a peer broke with
    /// [`report_failed`](Transport::report_failed) while the node was absent or down: a new
    /// process is linked again, as over TCP. A running peer that was linked to the old
    /// incarnation gets its [`Event::PeerFailed`] first (if it was not told yet), then
    /// [`Event::PeerConnected`] with the new incarnation ([`incarnation`](Self::incarnation));
    /// its link to the new incarnation comes up when its endpoint hands that event out, so
    /// nothing it posted before lands on the new incarnation (such ops fail) and a
    /// `report_failed` of the node made before is about the old incarnation. The new endpoint
    /// sees every peer absent until it polls their `PeerConnected` (one per running peer);
    /// peers that are down link with it when they start or restart. A peer that has not polled
    /// the connection of a life that is over by then (the node restarted again) gets only the
    /// connection of the current one.
    ///
    /// ```
    /// use squall_transport::{Event, LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Transport};
    /// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// let r = RegionId(0);
    /// let mut nodes = ThreadedFabric::new(ThreadedConfig::default())?.cluster(2, &[RegionSpec::new(r, 64)])?;
    /// nodes[1].region(r).unwrap().store(0, 7);
    /// let faults = nodes[0].faults();
    /// faults.crash(NodeId(1));
    /// let mut fresh = faults.restart_node(NodeId(1)).expect("it crashed");
    /// assert_eq!(fresh.region(r).unwrap().load(0), 0); // fresh memory
    /// let mut ev = [Event::PeerConnected { peer: NodeId(0), incarnation: 0 }; 4];
    /// let got = nodes[0].poll(&mut ev);
    /// assert!(matches!(ev[0], Event::PeerFailed { peer: NodeId(1), .. }));
    /// assert_eq!(ev[got - 1], Event::PeerConnected { peer: NodeId(1), incarnation: faults.incarnation(NodeId(1)) });
    /// nodes[0].region(r).unwrap().store(1, 9);
    /// nodes[0].write(NodeId(1), LocalSlice::new(r, 8, 8), RemoteAddr::new(r, 8), Signal::Unsignaled)?;
    /// assert_eq!(fresh.region(r).unwrap().load(1), 9);
    /// assert_eq!(fresh.poll(&mut ev), 1); // its link to node 0
    /// assert!(matches!(ev[0], Event::PeerConnected { peer: NodeId(0), .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restart_node(&self, node: NodeId) -> Option<ThreadedNode> {
        let s = &self.shared;
        let _faults = lock(&s.faults);
        let me = node.index();
        if me >= s.n || !s.nodes[me].crashed.load(Ordering::Acquire) {
            return None;
        }
        // Validated when the cluster was built.
        let regions = fresh_regions(&s.layout).ok()?;
        let parker = Parker::new();
        let life = s.life(node) + 1;
        // The old endpoint, if still held, posts nothing from here on.
        // From here on nothing of the old life applies: every op checks the life inside the
        // gate, and the gates reopen only below.
        s.nodes[me].life.store(life, Ordering::Release);
        let shared = &s.nodes[me];
        *lock(&shared.current) = Life {
            regions: Arc::clone(&regions),
            unparker: parker.unparker().clone(),
        };
        lock(&shared.inbox).clear();
        shared.inbox_len.store(0, Ordering::Release);
        lock(&shared.deferred).clear();
        lock(&shared.connects).clear();
        shared.has_deferred.store(false, Ordering::Release);
        shared.held_ops.store(0, Ordering::Release);
        let mut peers = Vec::new();
        for i in 0..s.n as u32 {
            let peer = NodeId(i);
            if peer == node {
                continue;
            }
            let running = s.started[peer.index()].load(Ordering::Acquire)
                && !s.nodes[peer.index()].crashed.load(Ordering::Acquire);
            // A connection to the old life the peer has not taken yet is dropped: the peer
            // never linked that life, so it hears neither of it nor of its failure, only of
            // the new one. (One it took already but has not handed out is dropped by its
            // `poll`, as no longer current.)
            let unseen = {
                let mut connects = lock(&s.nodes[peer.index()].connects);
                let before = connects.len();
                connects
                    .retain(|e| !matches!(e, Event::PeerConnected { peer: p, .. } if *p == node));
                connects.len() != before
            };
            // A peer that linked the old life has its link closed (by the crash); it hears of
            // the failure before the new link, if it has not yet.
            let linked_old = !unseen && s.gates[s.link(peer, node)].is_closed();
            let mut for_peer = s.close(peer, node, FailureCause::ConnectionLost);
            if running && linked_old {
                s.report(peer, node, &mut for_peer);
            }
            let _ = s.close(node, peer, FailureCause::ConnectionLost);
            for (src, dst) in [(peer, node), (node, peer)] {
                let link = s.link(src, dst);
                s.causes[link].store(0, Ordering::Release);
                s.reported[link].store(false, Ordering::Release);
                s.gates[link].reopen();
            }
            if running {
                if !for_peer.is_empty() {
                    s.defer(peer, for_peer);
                }
                s.connect(peer, node);
                peers.push(peer);
            }
        }
        s.nodes[me].crashed.store(false, Ordering::Release);
        s.started[me].store(true, Ordering::Release);
        s.fault_epoch.fetch_add(1, Ordering::AcqRel);
        let endpoint = ThreadedNode::fresh(s, node, life, parker);
        // Queued like any other connection, so a restart of the peer before this endpoint
        // takes it drops it (see above).
        for &peer in &peers {
            s.connect(node, peer);
        }
        tracing::debug!(%node, incarnation = incarnation(life), "threaded fabric: node restarted");
        Some(endpoint)
    }

    /// The incarnation that [`Event::PeerConnected`] names for `node`'s current process: 1
    /// until it is restarted (a late node's start reports 1), one more per
    /// [`restart_node`](Self::restart_node).
    pub fn incarnation(&self, node: NodeId) -> u64 {
        incarnation(self.shared.life(node))
    }

    /// Holds the link between `a` and `b` both ways: ops queue, and fail once they have waited
    /// `op_timeout`, breaking the link.
    pub fn partition(&self, a: NodeId, b: NodeId) {
        let s = &self.shared;
        s.gates[s.link(a, b)].hold();
        s.gates[s.link(b, a)].hold();
    }

    /// Holds the link from `src` to `dst` one way: `src`'s ops to `dst` queue (and fail once
    /// they have waited `op_timeout`, breaking the link both ways), while `dst`'s ops to `src`
    /// apply at once. [`heal`](Self::heal) releases it. With it a test lets a peer's answers
    /// reach a node while that node's own writes wait (a slow path in one direction).
    ///
    /// ```
    /// use squall_transport::{LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Transport};
    /// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// let r = RegionId(0);
    /// let mut nodes = ThreadedFabric::new(ThreadedConfig::default())?.cluster(2, &[RegionSpec::new(r, 64)])?;
    /// let faults = nodes[0].faults();
    /// faults.hold(NodeId(0), NodeId(1));
    /// nodes[0].region(r).unwrap().store(0, 5);
    /// nodes[1].region(r).unwrap().store(0, 6);
    /// nodes[0].write(NodeId(1), LocalSlice::new(r, 0, 8), RemoteAddr::new(r, 8), Signal::Unsignaled)?;
    /// nodes[1].write(NodeId(0), LocalSlice::new(r, 0, 8), RemoteAddr::new(r, 8), Signal::Unsignaled)?;
    /// assert_eq!(nodes[1].region(r).unwrap().load(1), 0); // held
    /// assert_eq!(nodes[0].region(r).unwrap().load(1), 6); // the other way applies
    /// faults.heal(NodeId(0), NodeId(1));
    /// assert_eq!(nodes[1].region(r).unwrap().load(1), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hold(&self, src: NodeId, dst: NodeId) {
        let s = &self.shared;
        s.gates[s.link(src, dst)].hold();
    }

    /// Keeps the link between `a` and `b` from ever coming up, as a connection that a firewall
    /// refuses: neither end is linked to the other (each sees it absent), and neither gets a
    /// [`Event::PeerConnected`] or an [`Event::PeerFailed`] about the other, until one of them
    /// is restarted ([`restart_node`](Self::restart_node) resets every link of the node it
    /// restarts, this one included, and gives the peer only the new incarnation's
    /// `PeerConnected`). For a pair one of which is not started yet (a late node of
    /// [`ThreadedFabric::cluster_late`]); returns `false`, doing nothing, if both are started
    /// (their link came up, or went down with a report owed).
    ///
    /// ```
    /// use squall_transport::{Event, NodeId, PostError, RegionId, RegionSpec, Transport};
    /// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// let fabric = ThreadedFabric::new(ThreadedConfig::default())?;
    /// let late = [NodeId(1), NodeId(2)];
    /// let mut nodes = fabric.cluster_late(3, &[RegionSpec::new(RegionId(0), 64)], &late)?;
    /// let faults = nodes[0].faults();
    /// assert!(faults.never_link(NodeId(0), NodeId(1)));
    /// faults.start_node(NodeId(1));
    /// faults.start_node(NodeId(2));
    /// let mut ev = [Event::PeerConnected { peer: NodeId(0), incarnation: 0 }; 4];
    /// assert_eq!(nodes[0].poll(&mut ev), 1); // node 2 only
    /// assert!(matches!(ev[0], Event::PeerConnected { peer: NodeId(2), .. }));
    /// assert_eq!(nodes[0].fence(NodeId(1)), Err(PostError::NotConnected { peer: NodeId(1) }));
    /// faults.crash(NodeId(1));
    /// let _fresh = faults.restart_node(NodeId(1)).expect("it crashed");
    /// assert_eq!(nodes[0].poll(&mut ev), 1); // the new process links; no failure reported
    /// assert!(matches!(ev[0], Event::PeerConnected { peer: NodeId(1), .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn never_link(&self, a: NodeId, b: NodeId) -> bool {
        let s = &self.shared;
        let _faults = lock(&s.faults);
        let started = |n: NodeId| s.started[n.index()].load(Ordering::Acquire);
        if a == b || a.index() >= s.n || b.index() >= s.n || (started(a) && started(b)) {
            return false;
        }
        for (src, dst) in [(a, b), (b, a)] {
            let link = s.link(src, dst);
            // Never linked: there is no failure to report (a restart resets the flag).
            s.reported[link].store(true, Ordering::Release);
            s.gates[link].close();
        }
        true
    }

    /// Releases a hold between `a` and `b`: queued ops are applied in order, then new ops flow.
    pub fn heal(&self, a: NodeId, b: NodeId) {
        let s = &self.shared;
        // A restart of either end does not interleave: the completions go to the life that
        // posted the ops.
        let _faults = lock(&s.faults);
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
    /// This endpoint's life of the node (a restart makes a new endpoint with the next).
    life: u64,
    /// This life's regions.
    own: Arc<[Region]>,
    /// Per peer: the life linked (`None` while absent).
    remote: Vec<Option<Remote>>,
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

/// What became of a posted op.
enum Outcome {
    /// Applied, with the op's value.
    Applied(u64),
    /// Failed without a report: a life it was posted between is over.
    Failed,
    /// The link was closed (while the peer lived the life given).
    Closed(u64),
    /// Queued on a held link.
    Queued,
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
    /// An endpoint for `me`'s life `life`, with its current regions and no peer linked.
    fn fresh(shared: &Arc<Shared>, me: NodeId, life: u64, parker: Parker) -> ThreadedNode {
        let own = Arc::clone(&lock(&shared.nodes[me.index()].current).regions);
        let mut dir = Directory::new(me);
        for r in own.iter() {
            // Ids were validated unique when the cluster was built.
            let _ = dir.add_local(r.clone());
        }
        for i in 0..shared.n as u32 {
            dir.add_absent_peer(NodeId(i));
        }
        ThreadedNode {
            me,
            life,
            own,
            remote: (0..shared.n).map(|_| None).collect(),
            shared: Arc::clone(shared),
            dir,
            parker,
            events: VecDeque::new(),
            seen_epoch: shared.fault_epoch.load(Ordering::Acquire),
            next_op: 0,
        }
    }

    /// Links `peer`'s life `life` (its regions become reachable). Returns `false`, linking
    /// nothing, if that life is over (the peer restarted again): a restart stores the new life
    /// before it replaces `current`, so the life read under that lock names its regions.
    fn link(&mut self, peer: NodeId, life: u64) -> bool {
        if peer == self.me {
            return true;
        }
        let current = lock(&self.shared.nodes[peer.index()].current);
        if self.shared.life(peer) != life {
            return false;
        }
        self.remote[peer.index()] = Some(Remote {
            life,
            regions: Arc::clone(&current.regions),
            unparker: current.unparker.clone(),
        });
        drop(current);
        self.dir.add_peer(peer, &self.shared.layout);
        true
    }

    /// Whether this endpoint's life of the node is still the current one. An endpoint whose
    /// node was restarted shares the node's queues, inbox and links with the new life, so it
    /// touches none of them: it polls nothing, receives nothing and reports nothing.
    fn is_current(&self) -> bool {
        self.shared.life(self.me) == self.life
    }

    /// Whether an op between this life and `peer`'s linked life may apply (checked inside the
    /// link's gate, so a restart that bumps either life first never sees it land).
    fn lives_match(&self, peer: &Remote, to: NodeId) -> bool {
        self.is_current() && self.shared.life(to) == peer.life
    }

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
        if s.nodes[self.me.index()].crashed.load(Ordering::Acquire) || !self.is_current() {
            return Err(PostError::Closed);
        }
        let Some(remote) = &self.remote[peer.index()] else {
            return Err(PostError::NotConnected { peer });
        };
        let id = OpId(self.next_op);
        let link = s.link(self.me, peer);
        let outcome = loop {
            match s.gates[link].enter() {
                Entry::Open => {
                    if !self.lives_match(remote, peer) {
                        // The peer's life this endpoint linked is over (its failure is or will
                        // be reported), or this endpoint's own is.
                        s.gates[link].leave();
                        break Outcome::Failed;
                    }
                    let value = self.apply_now(peer, remote, &op);
                    s.gates[link].leave();
                    remote.unparker.unpark();
                    break Outcome::Applied(value);
                }
                Entry::Closed => break Outcome::Closed(remote.life),
                Entry::Held => {
                    let mut held = lock(&s.held[link]);
                    if !s.gates[link].is_held() {
                        continue; // healed meanwhile: everything queued before was applied
                    }
                    if !self.lives_match(remote, peer) {
                        break Outcome::Failed;
                    }
                    let body = self.capture(op);
                    let deadline = s.clock.now() + s.config.op_timeout;
                    held.push_back(Held {
                        op: id,
                        kind,
                        signaled,
                        deadline,
                        body,
                        src: (self.life, Arc::clone(&self.own)),
                        dst: (remote.life, Arc::clone(&remote.regions)),
                    });
                    s.nodes[self.me.index()]
                        .held_ops
                        .fetch_add(1, Ordering::AcqRel);
                    break Outcome::Queued;
                }
            }
        };
        self.next_op += 1;
        match outcome {
            Outcome::Applied(value) => {
                if signaled {
                    self.events.push_back(completed(id, peer, kind, value));
                }
            }
            Outcome::Failed => {
                self.events
                    .push_back(failed(id, peer, kind, OpError::PeerFailed));
            }
            Outcome::Closed(linked) => {
                let shared = Arc::clone(&self.shared);
                let _faults = lock(&shared.faults);
                // A restart may have reset the link since: the failure was then the linked
                // life's, which the restart reported (or this endpoint's life is over and the
                // link is its successor's).
                if shared.life(peer) == linked && self.is_current() {
                    shared.report(self.me, peer, &mut self.events);
                }
                self.events
                    .push_back(failed(id, peer, kind, OpError::PeerFailed));
            }
            Outcome::Queued => {}
        }
        Ok(id)
    }

    fn apply_now(&self, peer: NodeId, remote: &Remote, op: &Posted<'_>) -> u64 {
        let s = &self.shared;
        let theirs = &*remote.regions;
        match *op {
            Posted::Write { src, dst } => {
                let from = find(&self.own, src.region);
                apply::write(
                    find(theirs, dst.region),
                    dst.offset,
                    Source::Region(from, src.offset),
                    src.len,
                );
                0
            }
            Posted::Read { src, dst } => {
                apply::read(
                    find(theirs, src.region),
                    src,
                    find(&self.own, dst.region),
                    dst,
                );
                0
            }
            Posted::Cas {
                word,
                expected,
                new,
            } => apply::compare_and_swap(find(theirs, word.region), word.offset, expected, new),
            Posted::FetchAdd { word, delta } => {
                apply::fetch_add(find(theirs, word.region), word.offset, delta)
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
                let _ = find(&self.own, src.region).read_bytes(src.offset, &mut data);
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
    ///
    /// An endpoint whose life is over does nothing: what is queued for the node is the new
    /// life's. Each step that takes something shared checks the life under the fault lock, which
    /// a restart holds while it bumps the life.
    fn refresh(&mut self) {
        if !self.is_current() {
            return;
        }
        let shared = Arc::clone(&self.shared);
        let s = &*shared;
        let node = &s.nodes[self.me.index()];
        let mut deferred = Vec::new();
        if node.has_deferred.load(Ordering::Acquire) {
            // Both queues in one critical section with the fault operations, so a restart of a
            // peer (its failure deferred, its connection queued) is taken whole or not at all.
            let _faults = lock(&s.faults);
            if !self.is_current() {
                return;
            }
            if node.has_deferred.swap(false, Ordering::AcqRel) {
                deferred = std::mem::take(&mut *lock(&node.deferred));
                // Connections go behind everything queued so far (a failure reported before
                // them is of the link they replace).
                let connects = std::mem::take(&mut *lock(&node.connects));
                self.events.extend(connects);
            }
        }
        let epoch = s.fault_epoch.load(Ordering::Acquire);
        if epoch != self.seen_epoch {
            let _faults = lock(&s.faults);
            if !self.is_current() {
                return;
            }
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
        // Deferred events are older than anything posted since; put them first.
        for e in deferred.into_iter().rev() {
            self.events.push_front(e);
        }
    }

    fn time_out(&mut self, peer: NodeId) {
        let s = Arc::clone(&self.shared);
        let _faults = lock(&s.faults);
        if !self.is_current() {
            // The held ops are the new life's; it times them out itself.
            return;
        }
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
        if !self.is_current() {
            return 0;
        }
        self.refresh();
        let mut n = 0;
        while n < out.len() {
            let Some(e) = self.events.pop_front() else {
                break;
            };
            if let Event::PeerConnected { peer, incarnation } = e {
                if !self.link(peer, incarnation.saturating_sub(1)) {
                    // The peer restarted again since: its later connection follows.
                    continue;
                }
            }
            out[n] = e;
            n += 1;
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
        let mut inbox = lock(&node.inbox);
        // Checked under the inbox lock, which a restart takes (after bumping the life) to clear
        // the inbox: an old endpoint takes nothing meant for the new life.
        if !self.is_current() {
            return None;
        }
        let (from, data) = inbox.pop_front()?;
        node.inbox_len.fetch_sub(1, Ordering::AcqRel);
        drop(inbox);
        *buf = data;
        Some(from)
    }

    fn report_failed(&mut self, peer: NodeId) {
        if !self.dir.is_peer(peer) {
            return;
        }
        let s = Arc::clone(&self.shared);
        let _faults = lock(&s.faults);
        if !self.is_current() {
            // About this endpoint's own links, which the restart reset for the new life.
            return;
        }
        match &self.remote[peer.index()] {
            // About a life that is over: its failure is reported already, the new link stays.
            Some(r) if r.life != s.life(peer) => return,
            Some(_) => {}
            // Absent here: a process of it that came up meanwhile is refused too (a later one
            // links, as a restart resets the link).
            None => {
                let theirs =
                    |e: &Event| matches!(e, Event::PeerConnected { peer: p, .. } if *p == peer);
                lock(&s.nodes[self.me.index()].connects).retain(|e| !theirs(e));
                self.events.retain(|e| !theirs(e));
            }
        }
        let events = s.break_pair(self.me, FailureCause::Local, peer, FailureCause::Remote);
        s.report(self.me, peer, &mut self.events);
        self.events.extend(events);
    }

    fn waker(&self) -> Waker {
        let unparker = self.parker.unparker().clone();
        Waker::new(move || unparker.unpark())
    }

    fn wait(&mut self, timeout: Duration) {
        if !self.is_current() {
            // Nothing will come: the node's queues are the new life's.
            self.parker.park_timeout(timeout);
            return;
        }
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
