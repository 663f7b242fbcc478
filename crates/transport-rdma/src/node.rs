//! `RdmaNode`: the transport contract over RC queue pairs, on any [`Provider`].
//!
//! One queue pair per peer. Writes post unsignaled, with every `signal_every`-th one signaled so
//! the batch retires (Derecho's technique; completions on a queue pair arrive in order, so one
//! signaled success retires every earlier request). Atomics land their old value in a per-link
//! result slot of a registered control region. Sends are copied into registered send slots; each
//! peer keeps `rq_depth` receive buffers posted. A fence is a signaled, fenced 8-byte RDMA READ of
//! the peer's control word: the responder executes requests in order, so its response means every
//! earlier request on the link was applied. Any error completion on a queue pair — retry
//! exceeded, remote access, flush — makes that peer failed: reported once, before the error
//! completions, and the queue pair moves to the error state so nothing more it sends is applied.
//!
//! One-sided writes into this node raise no completion here, so `wait` wakes on completions and
//! messages only; drivers that watch memory written by peers poll with short waits.

use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use squall_transport::{
    Clock, Completion, Directory, Event, FailureCause, LocalSlice, NodeId, OpError, OpId, OpKind,
    PostError, Region, RegionId, RegionSpec, RemoteAddr, Signal, SystemClock, Time, Transport,
    Waker,
};
use thiserror::Error;

use crate::config::{ConfigError, RdmaConfig};
use crate::exchange::{DecodeError, Hello, MAX_HELLO, ReadError, RemoteRegion};
use crate::provider::{
    MemoryKeys, Provider, ProviderError, Sge, WcStatus, WorkCompletion, WorkOp, WorkRequest,
};

/// Why a node could not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StartError {
    /// A setting is invalid.
    #[error("invalid RDMA configuration: {0}")]
    Config(#[from] ConfigError),
    /// The region layout is invalid.
    #[error("invalid region layout: {0}")]
    Region(#[from] squall_transport::RegionError),
    /// The NIC failed (or there is none; the message says which).
    #[error("{0}")]
    Provider(#[from] ProviderError),
    /// This node has no address in the cluster map.
    #[error("{0} has no address in the cluster map")]
    NoAddress(NodeId),
    /// The side channel failed.
    #[error("side channel with {peer}: {source}")]
    SideChannel {
        /// The peer.
        peer: NodeId,
        /// What failed.
        #[source]
        source: ReadError,
    },
    /// Could not listen or connect.
    #[error("side channel: {0}")]
    Io(#[from] std::io::Error),
    /// A peer belongs to another cluster or is not who it should be.
    #[error("peer at {addr} is {what}; check cluster_id and the cluster map on both nodes")]
    Mismatch {
        /// The peer's address.
        addr: SocketAddr,
        /// What was wrong.
        what: String,
    },
    /// The side-channel listener handed to [`RdmaNode::connect_on`] does not listen at the
    /// node's address in the cluster map: it must be bound at that address, or at the
    /// unspecified address of the same family (`0.0.0.0` for an IPv4 address, `[::]` for an
    /// IPv6 one), on its port.
    #[error(
        "the side-channel listener of {node} is bound at {bound}, but the cluster map puts {node} at {expected} \
         (a listener must be bound at that address, or at the unspecified address of its family, on its port)"
    )]
    Listener {
        /// The node.
        node: NodeId,
        /// Where the listener is bound.
        bound: SocketAddr,
        /// The node's address in the cluster map.
        expected: SocketAddr,
    },
    /// The start attempt's deadline passed before these higher-numbered peers (all that were
    /// missing) connected on this node's listener, and no connection on it had sent a whole
    /// hello from any of them. Where one had, the error is instead a
    /// [`StartError::Deadline`] naming that peer and its phase; every missing peer is then
    /// logged at `warn`.
    #[error("connecting to {0:?} did not finish within connect_timeout")]
    Timeout(Vec<NodeId>),
    /// The start attempt's side-channel exchange with `peer` had not finished `phase` when
    /// its deadline passed: `connect_timeout` after the exchange began, for every phase but
    /// [`SidePhase::Ready`], whose allowance is `connect_timeout` after this node's queue
    /// pairs were ready. The deadline bounds every dial, read and write with every peer on
    /// both sides, so a peer that trickles its bytes cannot hold a start longer (s28). Like
    /// [`StartError::Timeout`], it is worth starting again on the listener handed back
    /// ([`ConnectOnError`]), typically together with the other nodes.
    ///
    /// ```
    /// use std::time::Duration;
    /// use squall_transport::NodeId;
    /// use squall_transport_rdma::{SidePhase, StartError};
    ///
    /// let e = StartError::Deadline { peer: NodeId(2), phase: SidePhase::Nonce, timeout: Duration::from_secs(10) };
    /// assert!(e.to_string().contains("the nonce's echo was not done"));
    /// if let StartError::Deadline { peer, phase, .. } = e {
    ///     assert_eq!((peer, phase), (NodeId(2), SidePhase::Nonce));
    /// }
    /// ```
    #[error(
        "side channel with {peer}: {phase} was not done when the start attempt's deadline passed (connect_timeout {timeout:?})"
    )]
    Deadline {
        /// The peer.
        peer: NodeId,
        /// Where its exchange stood.
        phase: SidePhase,
        /// The attempt's `connect_timeout`.
        timeout: Duration,
    },
}

/// A step of one start attempt's side-channel exchange with a peer, as a
/// [`StartError::Deadline`] names it.
///
/// ```
/// use squall_transport_rdma::SidePhase;
/// assert_eq!(SidePhase::ReadHello.to_string(), "reading the peer's hello");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SidePhase {
    /// Dialling the peer's listener (this node is the higher-numbered one): no time was left
    /// for another try, or the last connect timed out. A dial refused until the deadline is a
    /// [`StartError::SideChannel`] error carrying the refusal instead.
    Dial,
    /// Sending this node's hello.
    SendHello,
    /// Reading the peer's hello.
    ReadHello,
    /// The nonce: read and echoed by the dialling side, read back by the accepting side.
    Nonce,
    /// The last byte each side sends once its queue pairs are ready, and reads from the peer
    /// (the accepting side reads first). Its allowance is `connect_timeout` after this node's
    /// queue pairs were ready.
    Ready,
}

impl std::fmt::Display for SidePhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SidePhase::Dial => "dialling the peer",
            SidePhase::SendHello => "sending this node's hello",
            SidePhase::ReadHello => "reading the peer's hello",
            SidePhase::Nonce => "the nonce's echo",
            SidePhase::Ready => "the ready handshake",
        })
    }
}

/// Why [`RdmaNode::connect_on`] failed, with the listener it was given, handed back: the
/// port the cluster map names stays held, so the caller can correct the cause and start on
/// it again (after a side-channel failure, a [`StartError::Deadline`] or a
/// [`StartError::Timeout`], typically together with the other nodes) without releasing the
/// port to anyone else. The listener is left non-blocking if the side channel was used.
///
/// Displays as its [`StartError`]; `?` converts it into one (dropping the listener).
///
/// ```
/// use std::collections::BTreeMap;
/// use std::net::{SocketAddr, TcpListener};
/// use std::time::Duration;
/// use squall_transport::{NodeId, RegionId, RegionSpec};
/// use squall_transport_rdma::mock::MockFabric;
/// use squall_transport_rdma::{RdmaConfig, RdmaNode, StartError};
///
/// let fabric = MockFabric::new(Duration::from_millis(40), 4096);
/// let layout = [RegionSpec::new(RegionId(1), 64)];
/// let listener = TcpListener::bind("127.0.0.1:0")?;
/// let port = listener.local_addr()?.port();
/// // A map naming the unspecified address: the listener covers only 127.0.0.1.
/// let wrong = BTreeMap::from([(NodeId(0), SocketAddr::from(([0, 0, 0, 0], port)))]);
/// let e = RdmaNode::connect_on(listener, RdmaConfig::default(), fabric.nic(NodeId(0)), NodeId(0), &wrong, &layout)
///     .expect_err("refused");
/// assert!(matches!(e.error, StartError::Listener { .. }));
/// // The port is still held: start again on the same listener with the corrected map.
/// let map = BTreeMap::from([(NodeId(0), SocketAddr::from(([127, 0, 0, 1], port)))]);
/// let node = RdmaNode::connect_on(e.listener, RdmaConfig::default(), fabric.nic(NodeId(0)), NodeId(0), &map, &layout)?;
/// # drop(node);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ConnectOnError {
    /// Why the node did not start.
    pub error: StartError,
    /// The listener [`RdmaNode::connect_on`] was given, still bound.
    pub listener: TcpListener,
}

impl std::fmt::Display for ConnectOnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for ConnectOnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

impl From<ConnectOnError> for StartError {
    fn from(e: ConnectOnError) -> StartError {
        e.error
    }
}

/// Whether a side-channel listener bound at `bound` accepts the connections peers make to
/// `expected`: the same port, and the same address or the unspecified address of its
/// family. An unspecified `expected` (which [`RdmaNode::connect`] would bind, listening on
/// every address) is covered only by that unspecified address itself.
fn listens_at(bound: SocketAddr, expected: SocketAddr) -> bool {
    bound.port() == expected.port()
        && (bound.ip() == expected.ip()
            || (bound.ip().is_unspecified() && bound.is_ipv4() == expected.is_ipv4()))
}

const RECV_BIT: u64 = 1 << 63;

/// An op on a link waiting for its completion.
struct Pending {
    wr_id: u64,
    op: OpId,
    kind: OpKind,
    /// The user asked for a completion (else it was signaled only to retire the batch).
    user_signaled: bool,
    atomic_slot: Option<usize>,
    send_slot: Option<usize>,
}

struct Link {
    peer: NodeId,
    failed: bool,
    outstanding: VecDeque<Pending>,
    unsignaled_run: usize,
    atomic_free: Vec<usize>,
    send_free: Vec<usize>,
    control: MemoryKeys,
    regions: Vec<RemoteRegion>,
}

/// One node's endpoint on an RDMA fabric.
pub struct RdmaNode<P: Provider> {
    me: NodeId,
    cfg: RdmaConfig,
    provider: P,
    dir: Directory,
    clock: SystemClock,
    local_keys: Vec<(RegionId, MemoryKeys)>,
    links: Vec<Link>,
    /// Word 0: the fence word peers read; word 1: fence landing; then `sq_depth` atomic result
    /// slots per link.
    control: Region,
    control_keys: MemoryKeys,
    sends: Region,
    sends_keys: MemoryKeys,
    recvs: Region,
    recvs_keys: MemoryKeys,
    slot_len: usize,
    events: VecDeque<Event>,
    inbox: VecDeque<(NodeId, Vec<u8>)>,
    next_op: u64,
    next_wr: u64,
    /// The completion queue overflowed: every link is dead.
    broken: bool,
    wcs: Vec<WorkCompletion>,
}

impl<P: Provider> std::fmt::Debug for RdmaNode<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaNode")
            .field("me", &self.me)
            .finish_non_exhaustive()
    }
}

fn slot_len(max: usize) -> usize {
    max.div_ceil(8) * 8
}

impl<P: Provider> RdmaNode<P> {
    /// Starts node `me`: registers `layout`, creates a queue pair per peer, exchanges endpoints
    /// and region keys with every peer of `cluster` over TCP (listening on `me`'s address;
    /// connecting to lower ids, accepting higher ones), and connects the queue pairs.
    pub fn connect(
        cfg: RdmaConfig,
        provider: P,
        me: NodeId,
        cluster: &BTreeMap<NodeId, SocketAddr>,
        layout: &[RegionSpec],
    ) -> Result<RdmaNode<P>, StartError> {
        let peers = cluster.keys().filter(|&&p| p != me).count();
        cfg.validate(peers)?;
        RegionSpec::validate_all(layout)?;
        let my_addr = *cluster.get(&me).ok_or(StartError::NoAddress(me))?;
        let listener = TcpListener::bind(my_addr)?;
        RdmaNode::connect_on(listener, cfg, provider, me, cluster, layout).map_err(|e| e.error)
    }

    /// Like [`connect`](Self::connect), with the side channel listening on `listener`, which
    /// the caller bound already: for example on port 0, keeping it until the node starts, so
    /// that no other process can take the port between its choice and its use. `cluster`
    /// must name `me` at the listener's address, or at its port if the listener is bound to
    /// the unspecified address of the same family (checked: [`StartError::Listener`]
    /// otherwise). A map naming the unspecified address for `me` is taken only with a
    /// listener bound there: [`connect`](Self::connect) would listen on every address, a
    /// listener bound to one does not. On any failure the listener is handed back in the
    /// error ([`ConnectOnError`]), still bound; on success it is closed once the peers are
    /// connected.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use std::net::TcpListener;
    /// use std::time::Duration;
    /// use squall_transport::{NodeId, RegionId, RegionSpec};
    /// use squall_transport_rdma::mock::MockFabric;
    /// use squall_transport_rdma::{RdmaConfig, RdmaNode};
    ///
    /// // Two nodes on ports the OS chose, each listener held until its node uses it.
    /// let listeners = [TcpListener::bind("127.0.0.1:0")?, TcpListener::bind("127.0.0.1:0")?];
    /// let mut cluster = BTreeMap::new();
    /// for (i, l) in listeners.iter().enumerate() {
    ///     cluster.insert(NodeId(i as u32), l.local_addr()?);
    /// }
    /// let fabric = MockFabric::new(Duration::from_millis(40), 4096);
    /// let layout = [RegionSpec::new(RegionId(1), 64)];
    /// let nodes = std::thread::scope(|s| {
    ///     let started: Vec<_> = listeners
    ///         .into_iter()
    ///         .enumerate()
    ///         .map(|(i, l)| {
    ///             let (me, cluster, layout) = (NodeId(i as u32), &cluster, &layout);
    ///             let nic = fabric.nic(me);
    ///             s.spawn(move || RdmaNode::connect_on(l, RdmaConfig::default(), nic, me, cluster, layout))
    ///         })
    ///         .collect();
    ///     started.into_iter().map(|h| h.join().expect("no panic")).collect::<Result<Vec<_>, _>>()
    /// })?;
    /// assert_eq!(nodes.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect_on(
        listener: TcpListener,
        cfg: RdmaConfig,
        provider: P,
        me: NodeId,
        cluster: &BTreeMap<NodeId, SocketAddr>,
        layout: &[RegionSpec],
    ) -> Result<RdmaNode<P>, ConnectOnError> {
        match RdmaNode::start(&listener, cfg, provider, me, cluster, layout) {
            Ok(node) => Ok(node),
            Err(error) => Err(ConnectOnError { error, listener }),
        }
    }

    /// [`connect_on`](Self::connect_on)'s work, on a listener it keeps.
    fn start(
        listener: &TcpListener,
        cfg: RdmaConfig,
        mut provider: P,
        me: NodeId,
        cluster: &BTreeMap<NodeId, SocketAddr>,
        layout: &[RegionSpec],
    ) -> Result<RdmaNode<P>, StartError> {
        let peers: Vec<NodeId> = cluster.keys().copied().filter(|&p| p != me).collect();
        cfg.validate(peers.len())?;
        RegionSpec::validate_all(layout)?;
        let my_addr = *cluster.get(&me).ok_or(StartError::NoAddress(me))?;
        let bound = listener.local_addr()?;
        if !listens_at(bound, my_addr) {
            return Err(StartError::Listener {
                node: me,
                bound,
                expected: my_addr,
            });
        }

        let mut dir = Directory::new(me);
        let mut local_keys = Vec::new();
        for spec in layout {
            let region = Region::new(*spec)?;
            local_keys.push((spec.id, provider.register(&region)?));
            dir.add_local(region)?;
        }
        let n = peers.len().max(1);
        let slot = slot_len(cfg.max_message_len);
        let control = Region::new(RegionSpec::new(
            RegionId(u32::MAX),
            16 + n * cfg.sq_depth * 8,
        ))?;
        let sends = Region::new(RegionSpec::new(
            RegionId(u32::MAX - 1),
            n * cfg.send_slots * slot,
        ))?;
        let recvs = Region::new(RegionSpec::new(
            RegionId(u32::MAX - 2),
            n * cfg.rq_depth * slot,
        ))?;
        let control_keys = provider.register(&control)?;
        let sends_keys = provider.register(&sends)?;
        let recvs_keys = provider.register(&recvs)?;

        let mut endpoints = BTreeMap::new();
        for &peer in &peers {
            endpoints.insert(peer, provider.create_qp(peer)?);
        }
        let hello_for = |peer: NodeId| Hello {
            cluster_id: cfg.cluster_id,
            node: me,
            qp: endpoints[&peer],
            control: control_keys,
            regions: local_keys
                .iter()
                .map(|&(id, keys)| RemoteRegion { id, keys })
                .collect(),
        };

        // One deadline for the whole exchange, taken only now, so that validating, allocating
        // and registering the regions and creating the queue pairs take none of its time:
        // every side-channel dial, read and write ends by it.
        let deadline = after(cfg.connect_timeout)?;
        let hellos = exchange(&cfg, me, listener, cluster, &peers, hello_for, deadline)?;
        let mut links = Vec::new();
        for (i, &peer) in peers.iter().enumerate() {
            let (hello, _) = &hellos[&peer];
            provider.connect_qp(peer, &hello.qp)?;
            let specs: Vec<RegionSpec> = hello
                .regions
                .iter()
                .map(|r| RegionSpec::new(r.id, r.keys.len as usize))
                .collect();
            dir.add_peer(peer, &specs);
            links.push(Link {
                peer,
                failed: false,
                outstanding: VecDeque::new(),
                unsignaled_run: 0,
                atomic_free: (0..cfg.sq_depth)
                    .map(|k| i * cfg.sq_depth + k)
                    .rev()
                    .collect(),
                send_free: (0..cfg.send_slots)
                    .map(|k| i * cfg.send_slots + k)
                    .rev()
                    .collect(),
                control: hello.control,
                regions: hello.regions.clone(),
            });
        }
        let mut node = RdmaNode {
            me,
            provider,
            dir,
            clock: SystemClock::new(),
            local_keys,
            links,
            control,
            control_keys,
            sends,
            sends_keys,
            recvs,
            recvs_keys,
            slot_len: slot,
            events: VecDeque::new(),
            inbox: VecDeque::new(),
            next_op: 0,
            next_wr: 0,
            broken: false,
            wcs: vec![
                WorkCompletion {
                    wr_id: 0,
                    peer: me,
                    status: WcStatus::Success,
                    is_recv: false,
                    byte_len: 0
                };
                64
            ],
            cfg,
        };
        for i in 0..node.links.len() {
            for k in 0..node.cfg.rq_depth {
                node.post_recv_slot(i, i * node.cfg.rq_depth + k)?;
            }
        }
        // Every queue pair is ready to receive; tell the peers, and wait until they are too.
        // The ready bytes have an allowance of their own, `connect_timeout` from here (never
        // less than the exchange's deadline): a peer whose exchange ended late in its own
        // attempt still finds this node waiting (see `ready`).
        let ready_by = after(node.cfg.connect_timeout)?.max(deadline);
        for (peer, (_, stream)) in hellos {
            ready(me, peer, stream, ready_by, node.cfg.connect_timeout)?;
        }
        tracing::info!(node = %me, peers = node.links.len(), "rdma transport connected");
        Ok(node)
    }

    /// The settings.
    pub fn config(&self) -> &RdmaConfig {
        &self.cfg
    }

    fn post_recv_slot(&mut self, link: usize, slot: usize) -> Result<(), ProviderError> {
        let peer = self.links[link].peer;
        let sge = Sge {
            addr: self.recvs_keys.addr + (slot * self.slot_len) as u64,
            len: self.slot_len as u32,
            lkey: self.recvs_keys.lkey,
        };
        self.provider.post_recv(peer, RECV_BIT | slot as u64, sge)
    }

    fn link_index(&self, peer: NodeId) -> Option<usize> {
        self.links.iter().position(|l| l.peer == peer)
    }

    fn local_sge(&self, s: LocalSlice) -> Sge {
        let keys = self
            .local_keys
            .iter()
            .find(|(id, _)| *id == s.region)
            .map(|(_, k)| *k)
            .unwrap_or_else(|| unreachable!("local region {} was validated", s.region));
        Sge {
            addr: keys.addr + s.offset as u64,
            len: s.len as u32,
            lkey: keys.lkey,
        }
    }

    fn remote(&self, link: usize, a: RemoteAddr) -> (u64, u32) {
        let r = self.links[link]
            .regions
            .iter()
            .find(|r| r.id == a.region)
            .unwrap_or_else(|| unreachable!("remote region {} was validated", a.region));
        (r.keys.addr + a.offset as u64, r.keys.rkey)
    }

    fn report(&mut self, link: usize, cause: FailureCause) {
        let l = &mut self.links[link];
        if !l.failed {
            l.failed = true;
            self.events.push_back(Event::PeerFailed {
                peer: l.peer,
                cause,
            });
            tracing::warn!(me = %self.me, peer = %l.peer, %cause, "rdma peer failed");
        }
    }

    fn fail_op(&mut self, peer: NodeId, op: OpId, kind: OpKind, error: OpError) {
        self.events.push_back(Event::Completion(Completion {
            op,
            peer,
            kind,
            result: Err(error),
        }));
    }

    /// Posts one work request on a link, with the bookkeeping every op shares.
    fn post(
        &mut self,
        peer: NodeId,
        kind: OpKind,
        signal: Signal,
        build: impl FnOnce(&mut Self, usize, &mut Pending) -> Result<(WorkOp, Sge, bool), PostError>,
    ) -> Result<OpId, PostError> {
        let link = self
            .link_index(peer)
            .ok_or(PostError::UnknownPeer { peer })?;
        let op = OpId(self.next_op);
        self.next_op += 1;
        if self.links[link].failed || self.broken {
            self.fail_op(peer, op, kind, OpError::PeerFailed);
            return Ok(op);
        }
        if self.links[link].outstanding.len() >= self.cfg.sq_depth {
            return Err(PostError::QueueFull {
                peer,
                depth: self.cfg.sq_depth,
            });
        }
        let wr_id = self.next_wr;
        let user_signaled = signal == Signal::Signaled;
        let mut pending = Pending {
            wr_id,
            op,
            kind,
            user_signaled,
            atomic_slot: None,
            send_slot: None,
        };
        let (work, local, fence) = build(self, link, &mut pending)?;
        self.next_wr += 1;
        let l = &mut self.links[link];
        // Signal when asked, for ops that return something, and every `signal_every` ops.
        let signaled = user_signaled || l.unsignaled_run + 1 >= self.cfg.signal_every;
        l.unsignaled_run = if signaled { 0 } else { l.unsignaled_run + 1 };
        let wr = WorkRequest {
            wr_id,
            op: work,
            local,
            signaled,
            fence,
        };
        l.outstanding.push_back(pending);
        if let Err(e) = self.provider.post_send(peer, &wr) {
            tracing::warn!(me = %self.me, %peer, error = %e, "ibv_post_send failed; failing the link");
            self.provider.set_error(peer);
            self.report(link, FailureCause::ConnectionLost);
            self.flush_link(link, OpError::PeerFailed);
        }
        Ok(op)
    }

    /// Fails everything outstanding on a link (the completions were lost with the queue).
    fn flush_link(&mut self, link: usize, error: OpError) {
        let peer = self.links[link].peer;
        let drained: Vec<Pending> = self.links[link].outstanding.drain(..).collect();
        for p in drained {
            self.release(link, &p);
            self.fail_op(peer, p.op, p.kind, error);
        }
    }

    fn release(&mut self, link: usize, p: &Pending) {
        let l = &mut self.links[link];
        if let Some(s) = p.atomic_slot {
            l.atomic_free.push(s);
        }
        if let Some(s) = p.send_slot {
            l.send_free.push(s);
        }
    }

    fn handle(&mut self, wc: WorkCompletion) {
        let Some(link) = self.link_index(wc.peer) else {
            return;
        };
        if wc.is_recv || wc.wr_id & RECV_BIT != 0 {
            self.handle_recv(link, wc);
            return;
        }
        // Completions arrive in post order: everything before this request is done too.
        while let Some(front) = self.links[link].outstanding.front() {
            if front.wr_id > wc.wr_id {
                break;
            }
            let p = self.links[link]
                .outstanding
                .pop_front()
                .unwrap_or_else(|| unreachable!());
            self.release(link, &p);
            let peer = wc.peer;
            if p.wr_id < wc.wr_id {
                // An earlier unsignaled request: succeeded if this one did; flushed otherwise.
                if wc.status != WcStatus::Success {
                    self.fail_op(peer, p.op, p.kind, OpError::PeerFailed);
                }
                continue;
            }
            match wc.status {
                WcStatus::Success if p.user_signaled => {
                    let value = p.atomic_slot.map_or(0, |s| self.control.load(2 + s));
                    self.events.push_back(Event::Completion(Completion {
                        op: p.op,
                        peer,
                        kind: p.kind,
                        result: Ok(value),
                    }));
                }
                WcStatus::Success => {}
                status => {
                    let (cause, error) = match status {
                        WcStatus::RetryExceeded => (FailureCause::TimedOut, OpError::TimedOut),
                        _ => (FailureCause::ConnectionLost, OpError::PeerFailed),
                    };
                    self.report(link, cause);
                    self.provider.set_error(peer);
                    self.fail_op(peer, p.op, p.kind, error);
                }
            }
        }
    }

    fn handle_recv(&mut self, link: usize, wc: WorkCompletion) {
        if wc.status != WcStatus::Success {
            if !self.links[link].failed {
                self.report(link, FailureCause::ConnectionLost);
                self.provider.set_error(wc.peer);
            }
            return;
        }
        if self.links[link].failed {
            return; // nothing from a failed peer is delivered
        }
        let slot = (wc.wr_id & !RECV_BIT) as usize;
        let mut data = vec![0u8; (wc.byte_len as usize).min(self.slot_len)];
        let _ = self.recvs.read_bytes(slot * self.slot_len, &mut data);
        self.inbox.push_back((wc.peer, data));
        if let Err(e) = self.post_recv_slot(link, slot) {
            tracing::warn!(me = %self.me, peer = %wc.peer, error = %e, "reposting a receive failed");
            self.report(link, FailureCause::ConnectionLost);
            self.provider.set_error(wc.peer);
        }
    }

    fn drive(&mut self) {
        if self.broken {
            return;
        }
        loop {
            let mut wcs = std::mem::take(&mut self.wcs);
            match self.provider.poll(&mut wcs) {
                Ok(n) => {
                    for wc in &wcs[..n] {
                        self.handle(*wc);
                    }
                    let more = n == wcs.len();
                    self.wcs = wcs;
                    if !more {
                        return;
                    }
                }
                Err(e) => {
                    self.wcs = wcs;
                    tracing::error!(me = %self.me, error = %e, "completion queue lost; failing every link");
                    self.broken = true;
                    for link in 0..self.links.len() {
                        let peer = self.links[link].peer;
                        self.report(link, FailureCause::ConnectionLost);
                        self.provider.set_error(peer);
                        self.flush_link(link, OpError::PeerFailed);
                    }
                    return;
                }
            }
        }
    }
}

/// A fresh number for one start attempt's side channel (no two attempts of a process, or of
/// two processes, are likely to draw the same: std's randomly keyed hasher over the time
/// and a per-process counter).
fn attempt_nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static ATTEMPTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(ATTEMPTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.write_u32(std::process::id());
    h.finish()
}

/// A side-channel stream whose every read and write ends by one deadline: each is given
/// only the time left until it, so a peer that trickles its bytes cannot stretch one start
/// attempt beyond `connect_timeout` (before s28 each read got a fresh `connect_timeout`).
struct Bounded<'a> {
    stream: &'a mut TcpStream,
    deadline: Instant,
}

impl Bounded<'_> {
    /// The time left, or a `TimedOut` error once the deadline passed.
    fn left(&self) -> std::io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the start attempt's deadline passed",
            ));
        }
        Ok(left)
    }
}

/// A socket timeout: `WouldBlock` or `TimedOut` (which one depends on the platform).
fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

impl Read for Bounded<'_> {
    /// Reads, waiting at most until the deadline. A socket timeout that fires before the
    /// deadline (the kernel rounds timeouts to its tick) is retried with the time left.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let left = self.left()?;
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(buf) {
                Err(e) if is_timeout(&e) => {}
                done => return done,
            }
        }
    }
}

impl Write for Bounded<'_> {
    /// Writes, waiting at most until the deadline, retrying an early socket timeout as
    /// [`read`](Read::read) does.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        loop {
            let left = self.left()?;
            self.stream.set_write_timeout(Some(left))?;
            match self.stream.write(buf) {
                Err(e) if is_timeout(&e) => {}
                done => return done,
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
    }
}

/// A side-channel failure with `peer` in `phase`: [`StartError::Deadline`] if it timed out
/// (a [`Bounded`] stream times out only at the attempt's deadline), else
/// [`StartError::SideChannel`] with the cause.
fn side_failure(peer: NodeId, phase: SidePhase, timeout: Duration, e: ReadError) -> StartError {
    let timed_out = matches!(&e, ReadError::Io(io) if is_timeout(io));
    if timed_out {
        StartError::Deadline {
            peer,
            phase,
            timeout,
        }
    } else {
        StartError::SideChannel { peer, source: e }
    }
}

/// A connection accepted on the side channel, served without blocking, so that a peer
/// that sends slowly or not at all holds up no other peer's connection. Its hello (a
/// 4-byte length and the body) is read, checked and answered with this node's hello and
/// the attempt's nonce, and the nonce's echo (8 bytes) is read back.
struct Accepted {
    stream: TcpStream,
    addr: SocketAddr,
    /// The order it was accepted in (0 first) within the attempt.
    seq: u64,
    /// What is read so far of what is awaited: the hello's length and body, then the echo.
    read: Vec<u8>,
    /// The peer's hello, once read and checked.
    hello: Option<Hello>,
    /// This node's length-prefixed hello and the nonce, once the peer's hello is checked.
    out: Vec<u8>,
    /// How many bytes of `out` are sent.
    sent: usize,
}

/// What one [`Accepted::step`] came to.
enum Step {
    /// Nothing more can be done until the peer sends (or takes) more bytes.
    Waiting { progressed: bool },
    /// The connection echoed this attempt's nonce: it is the peer's.
    Confirmed,
    /// The connection failed or is not this attempt's: drop it (the reason).
    Dropped(String),
}

impl Accepted {
    fn new(stream: TcpStream, addr: SocketAddr, seq: u64) -> Accepted {
        Accepted {
            stream,
            addr,
            seq,
            read: Vec::new(),
            hello: None,
            out: Vec::new(),
            sent: 0,
        }
    }

    /// Where the exchange stands.
    fn phase(&self) -> SidePhase {
        match self.hello {
            None => SidePhase::ReadHello,
            Some(_) if self.sent < self.out.len() => SidePhase::SendHello,
            Some(_) => SidePhase::Nonce,
        }
    }

    /// Goes as far as the bytes at hand allow. `answer` checks the peer's hello and gives
    /// this node's hello for that peer; its error fails the whole attempt.
    fn step(
        &mut self,
        nonce: u64,
        answer: &dyn Fn(&Hello, SocketAddr) -> Result<Hello, StartError>,
    ) -> Result<Step, StartError> {
        let mut progressed = false;
        let mut buf = [0u8; 1024];
        loop {
            while self.sent < self.out.len() {
                match self.stream.write(&self.out[self.sent..]) {
                    Ok(0) => return Ok(Step::Dropped("the connection closed".into())),
                    Ok(n) => {
                        self.sent += n;
                        progressed = true;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        return Ok(Step::Waiting { progressed });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Ok(Step::Dropped(e.to_string())),
                }
            }
            let need = match &self.hello {
                None if self.read.len() < 4 => 4 - self.read.len(),
                None => {
                    let mut len = [0u8; 4];
                    len.copy_from_slice(&self.read[..4]);
                    let len = u32::from_le_bytes(len) as usize;
                    if len > MAX_HELLO {
                        return Ok(Step::Dropped(DecodeError::TooLarge(len).to_string()));
                    }
                    4 + len - self.read.len()
                }
                Some(_) => 8 - self.read.len(),
            };
            if need == 0 {
                if self.hello.is_some() {
                    let mut echo = [0u8; 8];
                    echo.copy_from_slice(&self.read);
                    if u64::from_le_bytes(echo) != nonce {
                        return Ok(Step::Dropped(
                            "the peer echoed another attempt's nonce".into(),
                        ));
                    }
                    return Ok(Step::Confirmed);
                }
                let hello = match Hello::decode(&self.read[4..]) {
                    Ok(h) => h,
                    Err(e) => return Ok(Step::Dropped(e.to_string())),
                };
                let body = answer(&hello, self.addr)?.encode();
                self.out = (body.len() as u32).to_le_bytes().to_vec();
                self.out.extend_from_slice(&body);
                self.out.extend_from_slice(&nonce.to_le_bytes());
                self.hello = Some(hello);
                self.read.clear();
                continue;
            }
            let want = need.min(buf.len());
            match self.stream.read(&mut buf[..want]) {
                Ok(0) => return Ok(Step::Dropped("end of stream".into())),
                Ok(n) => {
                    self.read.extend_from_slice(&buf[..n]);
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Ok(Step::Waiting { progressed });
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Ok(Step::Dropped(e.to_string())),
            }
        }
    }
}

/// The most connections an accepting node keeps in their exchange at once, for `peers`
/// higher-numbered peers: enough for each peer's connection and a few left from its
/// earlier attempts, with room for strays. Past it the oldest that has not sent its
/// hello is dropped.
fn accept_cap(peers: usize) -> usize {
    4 * peers + 16
}

/// An `accept` error that belongs to one connection, which went before it was accepted,
/// and not to the listener.
fn connection_gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset
    )
}

/// Exchanges hellos with every peer; returns each peer's hello and the open stream.
///
/// A node dials its lower-numbered peers and accepts its higher-numbered ones. On an
/// accepted link the accepting node sends a per-attempt nonce after its hello, and the
/// dialling node echoes it: only a connection that echoes it is taken for the peer. A
/// listener handed back by a failed start ([`ConnectOnError`]) may still queue connections
/// that peers' earlier attempts opened and abandoned; such a connection holds a well-formed
/// hello, but no echo, so it is dropped (logged) and the node goes on accepting (s27,
/// docs/MEMBERSHIP.md, seventy-seventh part).
///
/// The whole exchange ends by `deadline` (s28, eighty-third part): every dial, read and
/// write of a dialled link is given only the time left until it ([`Bounded`]), and
/// accepted connections are served side by side without blocking ([`Accepted`]), so a
/// connection that trickles its bytes holds up no other peer and is given up at the
/// deadline. At most [`accept_cap`] connections are kept in their exchange (past it the
/// oldest without a whole hello is dropped); a connection that fails before or while it
/// is set up is dropped, not the attempt; of two connections that both echo the nonce
/// for one peer the one accepted later is kept (s28 follow-up).
fn exchange(
    cfg: &RdmaConfig,
    me: NodeId,
    listener: &TcpListener,
    cluster: &BTreeMap<NodeId, SocketAddr>,
    peers: &[NodeId],
    hello_for: impl Fn(NodeId) -> Hello,
    deadline: Instant,
) -> Result<BTreeMap<NodeId, (Hello, TcpStream)>, StartError> {
    let timeout = cfg.connect_timeout;
    let nonce = attempt_nonce();
    listener.set_nonblocking(true)?;
    let mut got = BTreeMap::new();
    let check = |hello: &Hello,
                 addr: SocketAddr,
                 expect: Option<NodeId>|
     -> Result<(), StartError> {
        if hello.cluster_id != cfg.cluster_id {
            return Err(StartError::Mismatch {
                addr,
                what: format!("in cluster {}, not {}", hello.cluster_id, cfg.cluster_id),
            });
        }
        match expect {
            Some(e) if e != hello.node => Err(StartError::Mismatch {
                addr,
                what: format!("{} but the cluster map says {e}", hello.node),
            }),
            None if !peers.contains(&hello.node) || hello.node < me => Err(StartError::Mismatch {
                addr,
                what: format!("{}, which should not connect to {me}", hello.node),
            }),
            _ => Ok(()),
        }
    };
    let fail = |peer: NodeId, phase: SidePhase| {
        move |e: std::io::Error| side_failure(peer, phase, timeout, ReadError::Io(e))
    };
    for &peer in peers.iter().filter(|&&p| p < me) {
        let addr = cluster[&peer];
        let mut stream = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(StartError::Deadline {
                    peer,
                    phase: SidePhase::Dial,
                    timeout,
                });
            }
            match TcpStream::connect_timeout(&addr, left.min(Duration::from_millis(200))) {
                Ok(s) => break s,
                Err(_) if Instant::now() + Duration::from_millis(20) < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => return Err(fail(peer, SidePhase::Dial)(e)),
            }
        };
        stream
            .set_nodelay(true)
            .map_err(fail(peer, SidePhase::Dial))?;
        let mut bounded = Bounded {
            stream: &mut stream,
            deadline,
        };
        hello_for(peer)
            .write_to(&mut bounded)
            .map_err(fail(peer, SidePhase::SendHello))?;
        let hello = Hello::read_from(&mut bounded)
            .map_err(|e| side_failure(peer, SidePhase::ReadHello, timeout, e))?;
        check(&hello, addr, Some(peer))?;
        // Echo the accepting side's nonce: this connection belongs to its current attempt.
        let mut echo = [0u8; 8];
        bounded
            .read_exact(&mut echo)
            .map_err(fail(peer, SidePhase::Nonce))?;
        bounded
            .write_all(&echo)
            .map_err(fail(peer, SidePhase::Nonce))?;
        got.insert(peer, (hello, stream));
    }
    let answer = |hello: &Hello, addr: SocketAddr| -> Result<Hello, StartError> {
        check(hello, addr, None)?;
        Ok(hello_for(hello.node))
    };
    let mut waiting: Vec<NodeId> = peers.iter().copied().filter(|&p| p > me).collect();
    // Connections in their exchange, oldest first, at most `cap` of them.
    let mut accepted: Vec<Accepted> = Vec::new();
    let cap = accept_cap(waiting.len());
    let mut next_seq = 0u64;
    // The accept number of each accepted peer's confirmed connection.
    let mut confirmed: BTreeMap<NodeId, u64> = BTreeMap::new();
    while !waiting.is_empty() {
        let mut progressed = false;
        while Instant::now() < deadline {
            let (stream, addr) = match listener.accept() {
                Ok(conn) => conn,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if connection_gone(&e) => {
                    tracing::debug!(error = %e, "a side-channel connection went before it was accepted");
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            progressed = true;
            if let Err(e) = stream
                .set_nonblocking(true)
                .and_then(|()| stream.set_nodelay(true))
            {
                tracing::warn!(%addr, error = %e, "dropped a side-channel connection that could not be set up");
                continue;
            }
            accepted.push(Accepted::new(stream, addr, next_seq));
            next_seq += 1;
            if accepted.len() > cap {
                let k = accepted.iter().position(|a| a.hello.is_none()).unwrap_or(0);
                let a = accepted.remove(k);
                tracing::warn!(addr = %a.addr, phase = %a.phase(), cap,
                    "too many side-channel connections in their exchange; dropped the oldest that had not sent its hello");
            }
        }
        let mut k = 0;
        while k < accepted.len() {
            match accepted[k].step(nonce, &answer)? {
                Step::Waiting { progressed: p } => {
                    progressed |= p;
                    k += 1;
                }
                Step::Confirmed => {
                    let a = accepted.remove(k);
                    if let Some(hello) = a.hello {
                        let peer = hello.node;
                        a.stream
                            .set_nonblocking(false)
                            .map_err(fail(peer, SidePhase::Nonce))?;
                        if confirmed.contains_key(&peer) {
                            tracing::warn!(addr = %a.addr, %peer,
                                "two side-channel connections echoed this attempt's nonce for one peer; keeping the one accepted later");
                        }
                        if confirmed.get(&peer).is_none_or(|&seq| seq < a.seq) {
                            confirmed.insert(peer, a.seq);
                            waiting.retain(|&p| p != peer);
                            got.insert(peer, (hello, a.stream));
                        }
                    }
                    progressed = true;
                }
                Step::Dropped(reason) => {
                    let a = accepted.remove(k);
                    match &a.hello {
                        None => {
                            tracing::warn!(addr = %a.addr, error = %reason, "refused a side-channel connection");
                        }
                        Some(hello) => {
                            tracing::warn!(addr = %a.addr, peer = %hello.node, error = %reason,
                                "dropped a side-channel connection that did not echo this attempt's nonce (left from an earlier attempt of the peer)");
                        }
                    }
                    progressed = true;
                }
            }
        }
        if waiting.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            tracing::warn!(node = %me, missing = ?waiting,
                "the start attempt's deadline passed before these higher-numbered peers completed their side-channel exchange");
            for a in &accepted {
                tracing::warn!(addr = %a.addr, phase = %a.phase(),
                    "a side-channel connection was still in its exchange at the start attempt's deadline");
            }
            let stalled = accepted.iter().find_map(|a| {
                let peer = a.hello.as_ref()?.node;
                waiting.contains(&peer).then(|| (peer, a.phase()))
            });
            return Err(match stalled {
                Some((peer, phase)) => StartError::Deadline {
                    peer,
                    phase,
                    timeout,
                },
                None => StartError::Timeout(waiting),
            });
        }
        if !progressed {
            let left = deadline.saturating_duration_since(Instant::now());
            std::thread::sleep(left.min(Duration::from_millis(2)));
        }
    }
    Ok(got)
}

/// The deadline `timeout` from now; [`ConfigError::ConnectTimeoutTooLong`] where the clock
/// cannot represent it (`validate` bounds `connect_timeout` far below that).
fn after(timeout: Duration) -> Result<Instant, StartError> {
    Instant::now()
        .checked_add(timeout)
        .ok_or(StartError::Config(ConfigError::ConnectTimeoutTooLong(
            timeout,
        )))
}

/// The last step of a start between `me` and `peer`: each side sends one byte once its
/// queue pairs are ready and reads the peer's, by `deadline` (the ready allowance).
///
/// The dialling (higher-numbered) side writes first and then reads; the accepting side
/// reads first and writes only once it has the dialler's byte. So an accepting side that
/// fails here (its allowance passed, or the peer went) has sent nothing, and its peer
/// cannot start on the link; the one window left is a dialler whose allowance passes in
/// the short time between the accepting side's read and the arrival of its reply. Any
/// two-party commit over one TCP connection has such a window (s28 follow-up, eighty-third
/// part). The order is deadlock-free with every node taking its peers in ascending order:
/// each side waits only for its peer to reach it in that order, and the dialler's byte is
/// sent before it waits.
fn ready(
    me: NodeId,
    peer: NodeId,
    mut stream: TcpStream,
    deadline: Instant,
    timeout: Duration,
) -> Result<(), StartError> {
    let fail = |e: std::io::Error| side_failure(peer, SidePhase::Ready, timeout, ReadError::Io(e));
    let mut bounded = Bounded {
        stream: &mut stream,
        deadline,
    };
    let mut b = [0u8; 1];
    if peer > me {
        bounded.read_exact(&mut b).map_err(fail)?;
        bounded.write_all(&[1]).map_err(fail)?;
    } else {
        bounded.write_all(&[1]).map_err(fail)?;
        bounded.read_exact(&mut b).map_err(fail)?;
    }
    Ok(())
}

impl<P: Provider> Transport for RdmaNode<P> {
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
        self.cfg.max_message_len
    }

    fn now(&self) -> Time {
        self.clock.now()
    }

    fn write(
        &mut self,
        peer: NodeId,
        src: LocalSlice,
        dst: RemoteAddr,
        signal: Signal,
    ) -> Result<OpId, PostError> {
        self.dir.check_write(peer, src, dst)?;
        self.post(peer, OpKind::Write, signal, |n, link, _| {
            let (remote_addr, rkey) = n.remote(link, dst);
            Ok((WorkOp::Write { remote_addr, rkey }, n.local_sge(src), false))
        })
    }

    fn read(&mut self, peer: NodeId, src: RemoteAddr, dst: LocalSlice) -> Result<OpId, PostError> {
        self.dir.check_remote(peer, src, dst.len)?;
        self.dir.check_local(dst)?;
        self.post(peer, OpKind::Read, Signal::Signaled, |n, link, _| {
            let (remote_addr, rkey) = n.remote(link, src);
            Ok((WorkOp::Read { remote_addr, rkey }, n.local_sge(dst), false))
        })
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
            |n, link, p| {
                let slot = n.links[link]
                    .atomic_free
                    .pop()
                    .ok_or(PostError::QueueFull {
                        peer,
                        depth: n.cfg.sq_depth,
                    })?;
                p.atomic_slot = Some(slot);
                let (remote_addr, rkey) = n.remote(link, word);
                let sge = Sge {
                    addr: n.control_keys.addr + 16 + slot as u64 * 8,
                    len: 8,
                    lkey: n.control_keys.lkey,
                };
                Ok((
                    WorkOp::CompareAndSwap {
                        remote_addr,
                        rkey,
                        compare: expected,
                        swap: new,
                    },
                    sge,
                    false,
                ))
            },
        )
    }

    fn fetch_add(&mut self, peer: NodeId, word: RemoteAddr, delta: u64) -> Result<OpId, PostError> {
        self.dir.check_atomic(peer, word)?;
        self.post(peer, OpKind::FetchAdd, Signal::Signaled, |n, link, p| {
            let slot = n.links[link]
                .atomic_free
                .pop()
                .ok_or(PostError::QueueFull {
                    peer,
                    depth: n.cfg.sq_depth,
                })?;
            p.atomic_slot = Some(slot);
            let (remote_addr, rkey) = n.remote(link, word);
            let sge = Sge {
                addr: n.control_keys.addr + 16 + slot as u64 * 8,
                len: 8,
                lkey: n.control_keys.lkey,
            };
            Ok((
                WorkOp::FetchAdd {
                    remote_addr,
                    rkey,
                    add: delta,
                },
                sge,
                false,
            ))
        })
    }

    fn send(&mut self, peer: NodeId, data: &[u8], signal: Signal) -> Result<OpId, PostError> {
        self.dir
            .check_send(peer, data.len(), self.cfg.max_message_len)?;
        let op = self.post(peer, OpKind::Send, Signal::Signaled, |n, link, p| {
            let slot = n.links[link].send_free.pop().ok_or(PostError::QueueFull {
                peer,
                depth: n.cfg.send_slots,
            })?;
            p.send_slot = Some(slot);
            p.user_signaled = signal == Signal::Signaled;
            let _ = n.sends.write_bytes(slot * n.slot_len, data);
            let sge = Sge {
                addr: n.sends_keys.addr + (slot * n.slot_len) as u64,
                len: data.len() as u32,
                lkey: n.sends_keys.lkey,
            };
            Ok((WorkOp::Send, sge, false))
        })?;
        Ok(op)
    }

    fn fence(&mut self, peer: NodeId) -> Result<OpId, PostError> {
        self.dir.check_fence(peer)?;
        self.post(peer, OpKind::Fence, Signal::Signaled, |n, link, _| {
            let c = n.links[link].control;
            let sge = Sge {
                addr: n.control_keys.addr + 8,
                len: 8,
                lkey: n.control_keys.lkey,
            };
            Ok((
                WorkOp::Read {
                    remote_addr: c.addr,
                    rkey: c.rkey,
                },
                sge,
                true,
            ))
        })
    }

    fn poll(&mut self, out: &mut [Event]) -> usize {
        self.drive();
        let n = out.len().min(self.events.len());
        for (slot, e) in out.iter_mut().zip(self.events.drain(..n)) {
            *slot = e;
        }
        n
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> Option<NodeId> {
        if self.inbox.is_empty() {
            self.drive();
        }
        let (from, data) = self.inbox.pop_front()?;
        *buf = data;
        Some(from)
    }

    fn is_absent(&self, peer: NodeId) -> bool {
        self.dir.is_absent(peer)
    }

    fn report_failed(&mut self, peer: NodeId) {
        if let Some(link) = self.link_index(peer) {
            if !self.links[link].failed {
                self.provider.set_error(peer);
                self.report(link, FailureCause::Local);
            }
        }
    }

    fn waker(&self) -> Waker {
        self.provider.waker()
    }

    fn wait(&mut self, timeout: Duration) {
        self.drive();
        if self.events.is_empty() && self.inbox.is_empty() {
            self.provider.wait(timeout);
        }
    }
}
