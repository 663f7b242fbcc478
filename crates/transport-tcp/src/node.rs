//! One node's endpoint: links, the I/O threads that apply incoming ops, and failure detection.

use std::collections::VecDeque;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_utils::sync::{Parker, Unparker};
use squall_transport::{
    Clock, Completion, Directory, Event, FailureCause, LocalSlice, NodeId, OpError, OpId, OpKind,
    PostError, Region, RegionId, RegionSpec, RemoteAddr, Signal, SystemClock, Time, Transport,
    Waker,
};

use crate::config::ClusterConfig;
use crate::frame::{self, Frame};
use crate::handshake::{self, Acceptor, Dialer, StartError};
use crate::sys;

/// After this many unsignaled requests applied without a response, the receiver acknowledges
/// them at once (otherwise it does so on its next heartbeat tick), or after a quarter of its
/// `max_outstanding` if that is fewer (so that a sender with the same config never waits for a
/// tick to post more). Each acknowledgement wakes the sender's reader thread, so they are few.
const ACK_EVERY: u64 = 16 * 1024;

/// How many requests a receiver applies before it acknowledges them unasked.
fn ack_every(max_outstanding: usize) -> u64 {
    (max_outstanding as u64 / 4).clamp(1, ACK_EVERY)
}

/// The initial read buffer of a link; it grows to fit the largest frame seen.
const READ_BUF: usize = 64 * 1024;

/// Posting returns `QueueFull` while this many bytes wait for a peer that stopped reading.
const HIGH_WATER: usize = 8 << 20;

/// The driver's epoll token for its wake-up eventfd (links use their index).
const WAKEUP_TOKEN: u64 = u64::MAX;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Ops that were posted and are not yet known to be applied: one op, or a run of consecutive
/// unsignaled writes or sends (consecutive request numbers and op ids, posted in one clock tick),
/// so that streaming small writes costs no allocation per op.
struct Pending {
    seq: u64,
    op: OpId,
    count: u64,
    kind: OpKind,
    signaled: bool,
    deadline: Time,
    /// For reads: where the bytes go.
    read_into: Option<LocalSlice>,
}

/// Unsignaled writes the driver posted and has not yet handed to their link: staged without
/// any lock or atomic per op, handed over (numbered, tracked, buffered for the socket) in one
/// locked step when the driver polls, waits, posts an op that needs an answer on the link, or
/// has `coalesce_bytes` staged.
#[derive(Default)]
struct Staged {
    buf: Vec<u8>,
    /// Earlier runs of consecutive op ids: (first op, count). A driver that writes to one peer
    /// at a time never adds one: its writes extend `run`.
    runs: Vec<(u64, u64)>,
    /// The current run of consecutive op ids (first op, count; count 0: none yet).
    run: (u64, u64),
    count: u64,
    /// Where the `Writes` batch that is open at the end of `buf` starts (short writes append a
    /// record to it), if one is.
    batch: Option<usize>,
    /// The fast path's allowance (see [`TcpNode::stage_short_write`]), set by the general path
    /// after it appended a record to the open batch and checked the link: short writes on the
    /// cached route append records while `buf` stays at most `fast_end` bytes long (the
    /// peer's frame limit for the batch, and one byte short of `coalesce_bytes`, which the
    /// general path handles) and `fast_ops` is not used up (`max_outstanding` less what was
    /// outstanding and staged then: the outstanding count only falls meanwhile). `fast_end` 0:
    /// no batch open, the fast path is off. Checking these two replaces the per-write loads of
    /// the link's outstanding count and failure flag: a link that fails meanwhile fails the
    /// staged writes when they are handed over (after its `PeerFailed`, like any pending op).
    fast_end: usize,
    fast_ops: u64,
}

impl Staged {
    /// Counts op `op` as staged: it extends the current run, or starts a new one.
    #[inline]
    fn add_op(&mut self, op: u64) {
        // With no run yet (count 0) this holds only if `op` is the run's first, which is right.
        if self.run.0 + self.run.1 == op {
            self.run.1 += 1;
        } else {
            if self.run.1 > 0 {
                self.runs.push(self.run);
            }
            self.run = (op, 1);
        }
        self.count += 1;
    }

    /// Whether the batch open at `at` takes a record of `len` more bytes within the limit of
    /// the peer at the other end of `link`.
    #[inline]
    fn fits(&self, at: usize, len: usize, link: &Link) -> bool {
        self.buf.len() - at - frame::HEADER_LEN + frame::RECORD_OVERHEAD + len <= link.peer_max_body
    }

    /// Appends a record to the batch open at `at`: its head, the `len` bytes `data` appends,
    /// and the batch's new length.
    #[inline]
    fn push_record(
        &mut self,
        at: usize,
        index: u8,
        offset: u32,
        len: usize,
        data: impl FnOnce(&mut Vec<u8>),
    ) {
        frame::write_record_header(&mut self.buf, index, offset, len);
        data(&mut self.buf);
        frame::close_write_record(&mut self.buf, at);
    }

    /// Arms the fast path for the batch open at `at` on `link` (see [`Staged::fast_end`]).
    fn arm_fast(&mut self, at: usize, link: &Link, config: &ClusterConfig) {
        let outstanding = self.count + link.outstanding.load(Ordering::Acquire) as u64;
        self.fast_ops = (config.max_outstanding as u64).saturating_sub(outstanding);
        self.fast_end = (at + frame::HEADER_LEN + link.peer_max_body)
            .min(config.coalesce_bytes.saturating_sub(1));
    }

    /// Sets the length field of the open batch to cover the records appended to it (the fast
    /// path does not update it per record).
    #[inline]
    fn close_batch(&mut self) {
        if let Some(at) = self.batch {
            frame::close_write_record(&mut self.buf, at);
        }
    }

    /// Turns the fast path off (the open batch was closed or handed over).
    #[inline]
    fn disarm_fast(&mut self) {
        self.fast_end = 0;
        self.fast_ops = 0;
    }

    /// The runs of staged ops in order: (first op, count).
    fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let current = (self.run.1 > 0).then_some(self.run);
        self.runs.iter().copied().chain(current)
    }
}

/// A link's mutable state, behind one mutex: the send buffer, the ops in flight, and the
/// receive-side request counter. The reader thread holds it while it applies a batch, so once a
/// link is marked failed nothing more from that peer is applied.
struct LinkState {
    buf: Vec<u8>,
    /// How many bytes at the front of `buf` were sent already (see `flush_locked`).
    sent: usize,
    next_seq: u64,
    pending: VecDeque<Pending>,
    failed: Option<FailureCause>,
    last_tx: Time,
    rx_seq: u64,
    acked_rx: u64,
    /// Ops posted and not yet known applied (the sum of the runs' counts).
    outstanding: u64,
    /// Of those, the ops that expect an answer (signaled ones: reads, atomics, fences...).
    awaiting: u64,
    /// Since when bytes have been waiting for the peer to read them.
    stalled_since: Option<Time>,
}

/// A link's receive buffer. Whoever holds it (the reader thread, or a polling driver) reads the
/// socket and applies what arrived, so bytes are applied in the order they arrived.
struct RxState {
    buf: Vec<u8>,
    filled: usize,
}

pub(crate) struct Link {
    pub(crate) peer: NodeId,
    pub(crate) peer_incarnation: u64,
    /// The socket. Closed (with `reader_ep`, and the buffers freed) once the link failed and
    /// its reader thread is done (see [`Shared::release`]); until then every syscall on it is
    /// made under the `state` or the `rx` lock, after checking the link is not failed.
    sock: sys::Fd,
    /// The reader thread's epoll instance: this link's socket, registered exclusively after the
    /// driver's registration (see [`sys::Epoll`]), so the reader thread is woken only for bytes
    /// that arrive while the driver is not blocked in `wait`.
    reader_ep: sys::Epoll,
    state: Mutex<LinkState>,
    rx: Mutex<RxState>,
    dirty: AtomicBool,
    stalled: AtomicBool,
    silenced: AtomicBool,
    failed: AtomicBool,
    outstanding: AtomicUsize,
    /// Mirrors `LinkState::awaiting` for the driver, which reads it without the lock.
    awaiting: AtomicUsize,
    /// The driver owns reading this socket: it waits for an answer on the link, so the reader
    /// thread leaves arriving bytes to it (for at most `read_lease`, see `reader_loop`).
    owned: AtomicBool,
    /// Bytes arrived that the reader thread left to the owning driver and nobody has read
    /// since. Set by the reader thread before it checks `owned`, cleared by whoever reads
    /// before it reads; the driver checks it after it gives up ownership (see `release_reads`).
    deferred: AtomicBool,
    last_rx: AtomicU64,
    max_body: usize,
    /// The largest frame body the peer accepts (its `max_body`, from the limit both ends share
    /// and the regions it announced): bounds the `Writes` batches sent to it.
    peer_max_body: usize,
    /// The regions the peer announced in its handshake (the driver adds them to its directory
    /// when the link is reported connected), in the order it announced them: a `Writes` record
    /// names its region by its index here.
    regions: Vec<RegionSpec>,
}

impl Link {
    /// The socket's descriptor (-1 once released).
    #[inline]
    fn fd(&self) -> RawFd {
        self.sock.get()
    }
}

/// One configured peer: its links, one per incarnation of the peer whose handshake completed
/// (at start, later for an absent peer, and again after each restart of the peer). The chain is
/// appended to and never emptied, so the data path reads it without a lock.
pub(crate) struct LinkSlot {
    peer: NodeId,
    links: Chain,
    /// The chain position of the link the driver posts on. It moves to a new incarnation's
    /// link when the driver polls that link's `PeerConnected` (see [`Transport`]'s
    /// *Incarnations*); written by the driver only.
    current: AtomicUsize,
    /// Serialises adding a link with barring the peer (a peer declared failed while absent).
    admit: Mutex<Admit>,
    /// The chain's length when the peer was declared failed while absent, or [`NOT_BARRED`]:
    /// the links before it (made, not polled yet) belong to the process declared failed, and
    /// `poll` never hands out their `PeerConnected`. Not in `admit` because `poll` holds the
    /// event queue and so must not take `admit` (installing a link takes the two the other way
    /// round). Written and read by the driver only.
    barred_links: AtomicUsize,
}

/// [`LinkSlot::barred_links`] of a peer that was not declared failed while absent.
const NOT_BARRED: usize = usize::MAX;

impl LinkSlot {
    fn new(peer: NodeId) -> LinkSlot {
        LinkSlot {
            peer,
            links: Chain::default(),
            current: AtomicUsize::new(0),
            admit: Mutex::new(Admit::default()),
            barred_links: AtomicUsize::new(NOT_BARRED),
        }
    }
}

/// Who may still link in a [`LinkSlot`].
#[derive(Default)]
struct Admit {
    /// How many links the chain holds.
    links: usize,
    /// Set when the peer was declared failed while absent: the process declared failed never
    /// links, one started after the report does (as a new incarnation). Only incarnations
    /// above this link from then on: the report's wall-clock time (ns) plus
    /// [`ClusterConfig::clock_skew`] (an incarnation is the wall clock at a process's start).
    floor: Option<u64>,
}

/// The links of one peer's incarnations, oldest first. A restart of a peer is rare, so a list
/// is enough; every old link is failed, and once its reader thread is done it frees its socket,
/// epoll instance and buffers (see [`Shared::release`]): what stays per restart is the `Link`
/// value itself (a few hundred bytes).
#[derive(Default)]
struct Chain {
    link: OnceLock<Link>,
    next: OnceLock<Box<Chain>>,
}

impl Chain {
    /// The entry at position `n`, if the chain is that long.
    fn nth(&self, n: usize) -> Option<&Chain> {
        let mut at = self;
        for _ in 0..n {
            at = at.next.get()?;
        }
        Some(at)
    }

    /// The entry at position `n`, growing the chain to it (callers hold the slot's `admit`).
    fn nth_or_grow(&self, n: usize) -> &Chain {
        let mut at = self;
        for _ in 0..n {
            at = at.next.get_or_init(Box::default);
        }
        at
    }

    /// Every link in the chain, oldest first.
    fn iter(&self) -> impl Iterator<Item = &Link> {
        std::iter::successors(Some(self), |c| c.next.get().map(|b| &**b))
            .filter_map(|c| c.link.get())
    }
}

/// The epoll token of the link at chain position `pos` of slot `idx`.
fn link_token(idx: usize, pos: usize) -> u64 {
    (pos as u64) << 32 | idx as u64
}

pub(crate) struct Shared {
    me: NodeId,
    config: ClusterConfig,
    clock: SystemClock,
    regions: Vec<Region>,
    /// One slot per configured peer, ascending by id (a link's index is its slot's).
    links: Vec<LinkSlot>,
    /// The largest frame body a link accepts.
    max_body: usize,
    /// The reader threads of the links (joined at shutdown).
    readers: Mutex<Vec<JoinHandle<()>>>,
    events: Mutex<VecDeque<Event>>,
    events_len: AtomicUsize,
    inbox: Mutex<VecDeque<(NodeId, Vec<u8>)>>,
    inbox_len: AtomicUsize,
    /// Wakes the driver blocked in `wait` (only written while it is, see `wake_driver`).
    driver: sys::Wakeup,
    /// What the driver blocks on in `wait`: the wake-up eventfd and every link's socket (edge
    /// triggered, exclusive, registered before the reader threads' registrations).
    driver_ep: sys::Epoll,
    driver_parked: AtomicBool,
    wake_pending: AtomicBool,
    timer: Unparker,
    closing: AtomicBool,
    /// A clock read at least once per timer tick, for op deadlines (saves a clock read per op).
    coarse: AtomicU64,
    tick: Duration,
    /// Unsignaled requests applied before they are acknowledged unasked (see [`ack_every`]).
    ack_every: u64,
}

/// An established, handshaken connection, ready to become a link.
pub(crate) struct Connected {
    pub(crate) peer: NodeId,
    pub(crate) stream: TcpStream,
    pub(crate) incarnation: u64,
    pub(crate) regions: Vec<RegionSpec>,
}

/// One node of a TCP cluster: implements [`Transport`] over one TCP connection per peer.
///
/// [`TcpNode::start`] binds the node's address from the [`ClusterConfig`], connects to every
/// founding peer (lower ids accept, higher ids dial), and checks each peer in a handshake: same
/// cluster id, same protocol version and message limit, the node identity each side expects, and
/// a fresh incarnation. The peers' region directories are exchanged there, so ops are validated
/// when posted.
///
/// *Late links*: nodes listed in [`ClusterConfig::late`] may start after the others. They are
/// *absent* until they do ([`Transport::is_absent`]; ops to them are refused with
/// [`PostError::NotConnected`]); the listener keeps accepting handshakes from configured nodes
/// after start (same checks), and when one completes the link fills its peer's slot, its reader
/// thread starts, and the endpoint reports [`Event::PeerConnected`] once; the peer is accepted
/// from the `poll` that returns that event on. A late node dials every configured peer at start
/// and reports `PeerConnected` for each link it makes; peers it cannot reach stay absent until
/// they dial it or it reaches them on a later dial (every [`ClusterConfig::redial_period`]).
///
/// One reader thread per link applies the peer's ops to the local regions in link order and
/// answers reads and atomics, and a timer thread sends heartbeats and fails peers whose link
/// stays silent or whose ops time out.
///
/// Posted unsignaled writes are staged per link by the driver (no lock per op) and, with
/// unsignaled sends, written in one syscall when the driver polls or waits, when a signaled op,
/// read, atomic or fence is posted to that peer, or when [`ClusterConfig::coalesce_bytes`] are
/// waiting. Like any progress engine, the transport needs its driver to keep calling
/// [`poll`](Transport::poll) or [`wait`](Transport::wait): staged writes leave on the next call.
///
/// ```
/// use std::net::TcpListener;
/// use squall_transport::{Event, NodeId, Region, RegionId, RegionSpec, RemoteAddr, Transport};
/// use squall_transport_tcp::{ClusterConfig, TcpNode};
/// // Two nodes on loopback (in one process here; normally one per machine).
/// let listeners = [TcpListener::bind("127.0.0.1:0")?, TcpListener::bind("127.0.0.1:0")?];
/// let addrs = listeners.iter().map(|l| l.local_addr()).collect::<Result<Vec<_>, _>>()?;
/// let config = ClusterConfig::new(1, [(NodeId(0), addrs[0]), (NodeId(1), addrs[1])]);
/// let r = RegionId(0);
/// let starting: Vec<_> = listeners.into_iter().enumerate().map(|(i, l)| {
///     let config = config.clone();
///     std::thread::spawn(move || {
///         let region = Region::new(RegionSpec::new(r, 64)).expect("valid region");
///         TcpNode::start_on(l, config, NodeId(i as u32), vec![region])
///     })
/// }).collect();
/// let mut nodes = starting.into_iter().map(|h| h.join().expect("started")).collect::<Result<Vec<_>, _>>()?;
/// // A remote fetch-and-add: applied by node 1's I/O thread, answered with the old value.
/// let op = nodes[0].fetch_add(NodeId(1), RemoteAddr::new(r, 8), 5)?;
/// let mut events = [Event::PeerFailed { peer: NodeId(0), cause: squall_transport::FailureCause::Local }; 4];
/// loop {
///     let n = nodes[0].poll(&mut events);
///     if events[..n].iter().any(|e| matches!(e, Event::Completion(c) if c.op == op && c.result == Ok(0))) {
///         break;
///     }
///     nodes[0].wait(std::time::Duration::from_millis(1));
/// }
/// assert_eq!(nodes[1].region(r).expect("registered").load(1), 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TcpNode {
    me: NodeId,
    shared: Arc<Shared>,
    dir: Directory,
    next_op: u64,
    /// Per link (same index as the links): unsignaled ops not yet handed over.
    staged: Vec<Staged>,
    /// Scratch for `wait` (no allocation per call).
    ready: Vec<libc::epoll_event>,
    /// The last write's directory look-up, so that a stream of writes between the same regions
    /// checks bounds without searching the directory per op.
    write_cache: Option<WriteRoute>,
    /// Calls of `poll` since the last `wait` or the last post of an op that needs an answer.
    /// The first such `poll` does not read sockets itself: its answer cannot have arrived yet
    /// (or `wait` just read it), and a driver that parks next saves a syscall per round trip.
    polls: u32,
    incarnation: u64,
    local_addr: SocketAddr,
    acceptor: Option<Acceptor>,
    threads: Vec<JoinHandle<()>>,
    /// Wakes the redial thread (a late node's, see [`redial_loop`]) so that it sees shutdown.
    redial: Option<Unparker>,
    closed: bool,
}

impl std::fmt::Debug for TcpNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpNode")
            .field("me", &self.me)
            .field("addr", &self.local_addr)
            .field("incarnation", &self.incarnation)
            .finish_non_exhaustive()
    }
}

/// Where the last write went: the peer, its region and that region's length, and the local
/// source region (an index into the directory's local regions) and its length.
#[derive(Clone, Copy)]
struct WriteRoute {
    peer: NodeId,
    remote: RegionId,
    remote_len: usize,
    local: RegionId,
    local_idx: usize,
    local_len: usize,
    /// The remote region's index in the peer's handshake directory, if a `Writes` record can
    /// name it (the first 256).
    remote_index: Option<u8>,
    /// The peer's link slot.
    link_idx: Option<usize>,
    /// For the fast path: a short write whose destination ends at most here fits a `Writes`
    /// record (the remote region's length, capped so that the offset fits a record's `u32`;
    /// 0 when no record can name the region or the link is unknown), with `index` and `link`
    /// the record's region index and the link slot.
    short_end: usize,
    index: u8,
    link: usize,
}

impl WriteRoute {
    /// Whether this route covers a write of `src` to `dst` on `peer`, bounds included.
    fn covers(&self, peer: NodeId, src: LocalSlice, dst: RemoteAddr) -> bool {
        self.peer == peer
            && self.remote == dst.region
            && self.local == src.region
            && dst
                .offset
                .checked_add(src.len)
                .is_some_and(|end| end <= self.remote_len)
            && src
                .offset
                .checked_add(src.len)
                .is_some_and(|end| end <= self.local_len)
    }
}

/// What a response frame carries.
enum Response<'a> {
    Applied,
    ReadData(&'a [u8]),
    Atomic(u64),
}

impl Shared {
    /// Tells the driver something may have changed: wakes it if it is blocked in `wait`, else
    /// makes its next `wait` return at once. (Sequentially consistent on both sides, so that
    /// one of the driver's check and this call always sees the other.)
    fn wake_driver(&self) {
        self.wake_pending.store(true, Ordering::SeqCst);
        if self.driver_parked.load(Ordering::SeqCst) {
            self.driver.wake();
        }
    }

    fn now(&self) -> Time {
        self.clock.now()
    }

    fn push_event(&self, e: Event) {
        let mut ev = lock(&self.events);
        ev.push_back(e);
        self.events_len.store(ev.len(), Ordering::Release);
    }

    fn region(&self, id: u32) -> Option<&Region> {
        self.regions.iter().find(|r| r.id() == RegionId(id))
    }

    /// Marks the link failed (once), reports it, fails everything pending, and closes the
    /// connection. Returns whether this call failed it.
    fn fail_locked(
        &self,
        link: &Link,
        st: &mut LinkState,
        cause: FailureCause,
        first_timed_out: bool,
    ) -> bool {
        if st.failed.is_some() {
            return false;
        }
        st.failed = Some(cause);
        link.failed.store(true, Ordering::Release);
        st.buf.clear();
        st.outstanding = 0;
        st.awaiting = 0;
        link.outstanding.store(0, Ordering::Release);
        link.awaiting.store(0, Ordering::Release);
        link.dirty.store(false, Ordering::Release);
        link.stalled.store(false, Ordering::Release);
        {
            let mut ev = lock(&self.events);
            ev.push_back(Event::PeerFailed {
                peer: link.peer,
                cause,
            });
            let mut first = first_timed_out;
            for p in st.pending.drain(..) {
                for i in 0..p.count {
                    let error = if first {
                        OpError::TimedOut
                    } else {
                        OpError::PeerFailed
                    };
                    first = false;
                    ev.push_back(Event::Completion(Completion {
                        op: OpId(p.op.0 + i),
                        peer: link.peer,
                        kind: p.kind,
                        result: Err(error),
                    }));
                }
            }
            self.events_len.store(ev.len(), Ordering::Release);
        }
        // Shutting the socket down is a state change, which wakes every epoll instance it is
        // registered in, exclusive or not: the link's reader thread sees the failure, exits
        // and releases the link (`restart_resources` checks it with the driver parked).
        sys::shutdown(link.fd());
        tracing::warn!(me = %self.me, peer = %link.peer, %cause, "tcp transport: peer failed");
        self.wake_driver();
        true
    }

    /// Writes the link's buffer without blocking, usually in one syscall. What the socket does not
    /// take stays buffered (the timer thread waits for the socket to drain and fails the peer if
    /// it stops reading for the op timeout). On a socket error the link fails.
    fn flush_locked(&self, link: &Link, st: &mut LinkState) {
        if st.buf.is_empty() || st.failed.is_some() {
            return;
        }
        if link.silenced.load(Ordering::Acquire) {
            st.buf.clear();
            st.sent = 0;
            link.dirty.store(false, Ordering::Release);
            return;
        }
        // Bytes before `sent` left in an earlier call (a buffer cleared since leaves it stale:
        // capped by the length).
        let head = st.sent.min(st.buf.len());
        let mut sent = head;
        while sent < st.buf.len() {
            match sys::send(link.fd(), &st.buf[sent..]) {
                Ok(0) => break,
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::warn!(me = %self.me, peer = %link.peer, error = %e, "tcp transport: send failed");
                    self.fail_locked(link, st, FailureCause::ConnectionLost, false);
                    return;
                }
            }
        }
        if sent > head {
            st.last_tx = self.coarse_now();
        }
        if sent == st.buf.len() {
            st.buf.clear();
            st.sent = 0;
            st.stalled_since = None;
            link.dirty.store(false, Ordering::Release);
            link.stalled.store(false, Ordering::Release);
        } else {
            // Dropping the sent bytes moves the rest to the front: only once they are at least
            // half the buffer, so that a full socket (megabytes waiting, a little sent per
            // call) costs amortised O(1) per byte, not a move of the whole backlog per send.
            if sent >= st.buf.len() / 2 {
                st.buf.drain(..sent);
                st.sent = 0;
            } else {
                st.sent = sent;
            }
            if st.stalled_since.is_none() {
                st.stalled_since = Some(self.now());
            }
            link.dirty.store(true, Ordering::Release);
            if !link.stalled.swap(true, Ordering::AcqRel) {
                self.timer.unpark(); // it waits for the socket to drain
            }
        }
    }

    /// Moves the driver's staged ops into the link: numbered and tracked like any posted op, or
    /// failed at once if the link already failed (after its `PeerFailed`, which came first).
    fn hand_over(&self, link: &Link, st: &mut LinkState, staged: &mut Staged) {
        if staged.count == 0 {
            return;
        }
        staged.close_batch();
        if st.failed.is_some() {
            let mut ev = lock(&self.events);
            for (first, count) in staged.runs() {
                for op in first..first + count {
                    ev.push_back(Event::Completion(Completion {
                        op: OpId(op),
                        peer: link.peer,
                        kind: OpKind::Write,
                        result: Err(OpError::PeerFailed),
                    }));
                }
            }
            self.events_len.store(ev.len(), Ordering::Release);
        } else {
            let deadline = self.coarse_now() + self.config.op_timeout + self.tick;
            for (first, count) in staged.runs() {
                st.pending.push_back(Pending {
                    seq: st.next_seq + 1,
                    op: OpId(first),
                    count,
                    kind: OpKind::Write,
                    signaled: false,
                    deadline,
                    read_into: None,
                });
                st.next_seq += count;
            }
            if st.buf.is_empty() {
                // The usual case: no copy, the buffers trade places (both keep their capacity).
                std::mem::swap(&mut st.buf, &mut staged.buf);
            } else {
                st.buf.extend_from_slice(&staged.buf);
            }
            st.outstanding += staged.count;
            link.outstanding
                .store(st.outstanding as usize, Ordering::Release);
            link.dirty.store(true, Ordering::Release);
        }
        staged.buf.clear();
        staged.runs.clear();
        staged.run = (0, 0);
        staged.count = 0;
        staged.batch = None;
        staged.disarm_fast();
    }

    fn coarse_now(&self) -> Time {
        Time::from_nanos(self.coarse.load(Ordering::Acquire))
    }

    fn link_index(&self, peer: NodeId) -> Option<usize> {
        self.links.binary_search_by_key(&peer, |l| l.peer).ok()
    }

    /// The link the driver posts on in slot `idx` (the incarnation whose `PeerConnected` it
    /// polled last, or the first link), if a handshake completed.
    fn link(&self, idx: usize) -> Option<&Link> {
        let slot = self.links.get(idx)?;
        let pos = slot.current.load(Ordering::Relaxed);
        slot.links.nth(pos).and_then(|c| c.link.get())
    }

    /// The link at chain position `pos` of slot `idx`.
    fn link_at(&self, idx: usize, pos: usize) -> Option<&Link> {
        self.links.get(idx)?.links.nth(pos)?.link.get()
    }

    /// The links whose handshake completed (every incarnation's).
    fn live(&self) -> impl Iterator<Item = &Link> {
        self.links.iter().flat_map(|s| s.links.iter())
    }

    /// The link to post on: refused if the endpoint is closed or the peer unknown.
    fn open_link(&self, closed: bool, peer: NodeId) -> Result<usize, PostError> {
        if closed {
            return Err(PostError::Closed);
        }
        self.link_index(peer).ok_or(PostError::UnknownPeer { peer })
    }

    fn complete(&self, link: &Link, p: &Pending, value: u64) {
        self.push_event(Event::Completion(Completion {
            op: p.op,
            peer: link.peer,
            kind: p.kind,
            result: Ok(value),
        }));
    }

    /// Retires every pending op up to `seq`; the one numbered `seq` gets `resp`.
    fn retire(
        &self,
        link: &Link,
        st: &mut LinkState,
        seq: u64,
        resp: Response<'_>,
        woke: &mut bool,
    ) -> Result<(), String> {
        if seq > st.next_seq {
            return Err(format!(
                "response for request {seq}, but only {} were sent",
                st.next_seq
            ));
        }
        let exact = !matches!(resp, Response::Applied);
        let mut matched = false;
        while let Some(front) = st.pending.front_mut() {
            if front.seq > seq {
                break;
            }
            let last = front.seq + front.count - 1;
            if last > seq {
                // Part of a run of unsignaled ops was applied.
                let k = seq - front.seq + 1;
                front.seq += k;
                front.op = OpId(front.op.0 + k);
                front.count -= k;
                st.outstanding -= k;
                break;
            }
            let Some(p) = st.pending.pop_front() else {
                break;
            };
            st.outstanding -= p.count;
            if p.signaled {
                st.awaiting -= 1;
            }
            let wants_data = matches!(
                p.kind,
                OpKind::Read | OpKind::CompareAndSwap | OpKind::FetchAdd
            );
            if last < seq || !exact {
                if wants_data {
                    return Err(format!(
                        "{:?} request {} was acknowledged without its result",
                        p.kind, p.seq
                    ));
                }
                if p.signaled {
                    self.complete(link, &p, 0);
                    *woke = true;
                }
                continue;
            }
            matched = true;
            match (&resp, p.kind) {
                (Response::ReadData(data), OpKind::Read) => {
                    let Some(dst) = p.read_into else {
                        return Err("read without a destination".into());
                    };
                    if data.len() != dst.len {
                        return Err(format!(
                            "read {} returned {} bytes, {} were asked for",
                            p.seq,
                            data.len(),
                            dst.len
                        ));
                    }
                    let ok = self
                        .region(dst.region.0)
                        .is_some_and(|r| r.write_bytes(dst.offset, data).is_ok());
                    if !ok {
                        return Err("read destination vanished".into());
                    }
                    self.complete(link, &p, 0);
                }
                (Response::Atomic(old), OpKind::CompareAndSwap | OpKind::FetchAdd) => {
                    self.complete(link, &p, *old);
                }
                _ => {
                    return Err(format!(
                        "response to request {} does not match its kind {:?}",
                        p.seq, p.kind
                    ));
                }
            }
            *woke = true;
        }
        link.outstanding
            .store(st.outstanding as usize, Ordering::Release);
        link.awaiting.store(st.awaiting as usize, Ordering::Release);
        if exact && !matched {
            return Err(format!(
                "result for request {seq}, which is not outstanding"
            ));
        }
        Ok(())
    }

    /// Applies one received frame. Errors are protocol violations: the link is closed.
    fn handle(
        &self,
        link: &Link,
        st: &mut LinkState,
        f: Frame<'_>,
        need_applied: &mut bool,
        woke: &mut bool,
    ) -> Result<(), String> {
        st.rx_seq += f.requests();
        let seq = st.rx_seq;
        let at = |region: u32, offset: u64, len: usize| -> Result<(&Region, usize), String> {
            let r = self
                .region(region)
                .ok_or_else(|| format!("op on unknown region {region}"))?;
            let off = usize::try_from(offset).map_err(|_| format!("offset {offset} too large"))?;
            r.check_range(off, len).map_err(|e| e.to_string())?;
            Ok((r, off))
        };
        match f {
            Frame::Write {
                region,
                offset,
                data,
                signaled,
            } => {
                let (r, off) = at(region, offset, data.len())?;
                copy_in(r, off, data);
                *woke = true;
                *need_applied |= signaled;
            }
            Frame::Writes(batch) => {
                // A whole batch in one go: the region by index (the order this node announced
                // its regions in), a bounds check and a copy per record.
                for w in batch {
                    let r = (self.regions.get(usize::from(w.region_index))).ok_or_else(|| {
                        format!("write to unknown region index {}", w.region_index)
                    })?;
                    let off = w.offset as usize;
                    if let (Ok(bytes), 0) = (<[u8; 8]>::try_from(w.data), off % 8) {
                        // The common case: one aligned word (in bounds if its index is).
                        if let Some(word) = r.words().get(off / 8) {
                            word.store(u64::from_le_bytes(bytes), Ordering::Release);
                            continue;
                        }
                    }
                    r.check_range(off, w.data.len())
                        .map_err(|e| e.to_string())?;
                    copy_in(r, off, w.data);
                }
                *woke = true;
            }
            Frame::Read {
                region,
                offset,
                len,
            } => {
                let len = len as usize;
                let (r, off) = at(region, offset, len)?;
                frame::encode_read_data_header(&mut st.buf, seq, len);
                let start = st.buf.len();
                st.buf.resize(start + len, 0);
                copy_out(r, off, &mut st.buf[start..]);
                st.acked_rx = seq;
            }
            Frame::Cas {
                region,
                offset,
                expected,
                new,
            } => {
                let (r, off) = at(region, offset, 8)?;
                if off % 8 != 0 {
                    return Err(format!("misaligned atomic at offset {off}"));
                }
                let old = match r.compare_and_swap(off / 8, expected, new) {
                    Ok(v) | Err(v) => v,
                };
                frame::encode_atomic_result(&mut st.buf, seq, old);
                st.acked_rx = seq;
                *woke = true;
            }
            Frame::FetchAdd {
                region,
                offset,
                delta,
            } => {
                let (r, off) = at(region, offset, 8)?;
                if off % 8 != 0 {
                    return Err(format!("misaligned atomic at offset {off}"));
                }
                let old = r.fetch_add(off / 8, delta);
                frame::encode_atomic_result(&mut st.buf, seq, old);
                st.acked_rx = seq;
                *woke = true;
            }
            Frame::Send { data, signaled } => {
                if data.len() > self.config.max_message_len {
                    return Err(format!(
                        "message of {} bytes exceeds max_message_len {}",
                        data.len(),
                        self.config.max_message_len
                    ));
                }
                let mut inbox = lock(&self.inbox);
                inbox.push_back((link.peer, data.to_vec()));
                self.inbox_len.store(inbox.len(), Ordering::Release);
                *woke = true;
                *need_applied |= signaled;
            }
            Frame::Fence => *need_applied = true,
            Frame::Applied { seq } => self.retire(link, st, seq, Response::Applied, woke)?,
            Frame::ReadData { seq, data } => {
                self.retire(link, st, seq, Response::ReadData(data), woke)?
            }
            Frame::AtomicResult { seq, old } => {
                self.retire(link, st, seq, Response::Atomic(old), woke)?
            }
            Frame::Heartbeat => {}
            Frame::Cut => {
                tracing::info!(me = %self.me, peer = %link.peer, "tcp transport: peer cut the link");
                self.fail_locked(link, st, FailureCause::Remote, false);
            }
            Frame::Hello(_) | Frame::Welcome(_) | Frame::Refuse(_) => {
                return Err("handshake frame on an established link".into());
            }
        }
        Ok(())
    }
}

impl Shared {
    /// Reads whatever the socket holds, without blocking, and applies it. Returns `false` once
    /// the link is closed (failed, or the node is shutting down). `by_driver`: the driver itself
    /// is receiving (so it need not be woken; its next `poll` sees what was applied).
    fn receive(&self, link: &Link, rx: &mut RxState, by_driver: bool) -> bool {
        loop {
            if link.failed.load(Ordering::Acquire) {
                return false;
            }
            let filled = rx.filled;
            let space = rx.buf.len() - filled;
            let n = match sys::recv(link.fd(), &mut rx.buf[filled..]) {
                Ok(0) => {
                    let mut st = lock(&link.state);
                    if st.failed.is_none() && !self.closing.load(Ordering::Acquire) {
                        tracing::warn!(me = %self.me, peer = %link.peer, "tcp transport: connection closed by peer");
                        self.fail_locked(link, &mut st, FailureCause::ConnectionLost, false);
                    }
                    return false;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) => {
                    let mut st = lock(&link.state);
                    if st.failed.is_none() && !self.closing.load(Ordering::Acquire) {
                        tracing::warn!(me = %self.me, peer = %link.peer, error = %e, "tcp transport: connection error");
                        self.fail_locked(link, &mut st, FailureCause::ConnectionLost, false);
                    }
                    return false;
                }
            };
            if link.silenced.load(Ordering::Acquire) {
                continue; // a silent network: the bytes never arrived
            }
            rx.filled += n;
            let now = self.now();
            link.last_rx.store(now.as_nanos(), Ordering::Release);
            self.coarse.store(now.as_nanos(), Ordering::Release);
            let mut st = lock(&link.state);
            if st.failed.is_some() {
                return false;
            }
            let mut pos = 0;
            let mut woke = false;
            let mut need_applied = false;
            let mut broken = None;
            while pos < rx.filled {
                match frame::decode(&rx.buf[pos..rx.filled], link.max_body) {
                    Ok(None) => break,
                    Ok(Some((f, used))) => {
                        pos += used;
                        if let Err(why) =
                            self.handle(link, &mut st, f, &mut need_applied, &mut woke)
                        {
                            broken = Some(why);
                            break;
                        }
                        if st.failed.is_some() {
                            break;
                        }
                    }
                    Err(e) => {
                        broken = Some(format!("invalid frame: {e}"));
                        break;
                    }
                }
            }
            if let Some(why) = broken {
                tracing::error!(me = %self.me, peer = %link.peer, error = %why, "tcp transport: protocol violation; closing the link");
                self.fail_locked(link, &mut st, FailureCause::ConnectionLost, false);
            }
            if st.failed.is_some() {
                drop(st);
                if woke && !by_driver {
                    self.wake_driver();
                }
                return false;
            }
            if need_applied || st.rx_seq - st.acked_rx >= self.ack_every {
                let seq = st.rx_seq;
                frame::encode_applied(&mut st.buf, seq);
                st.acked_rx = seq;
            }
            self.flush_locked(link, &mut st);
            drop(st);
            if woke && !by_driver {
                self.wake_driver();
            }
            rx.buf.copy_within(pos..rx.filled, 0);
            rx.filled -= pos;
            // Make room for the frame that is arriving (its length was checked against the limit).
            let mut need = READ_BUF;
            if rx.filled >= frame::HEADER_LEN {
                let b = &rx.buf;
                let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
                need = need.max(frame::HEADER_LEN + len);
            }
            let need = need.max(rx.filled + 1);
            if rx.buf.len() < need {
                rx.buf.resize(need, 0);
            }
            if n < space {
                // The socket had less than we could take: it is drained (more wakes the reader).
                return true;
            }
        }
    }
}

/// The reader thread of one link: waits until bytes arrive (holding no lock), then reads and
/// applies frames in order. It is woken only for bytes that arrive while the driver is not
/// blocked in `wait` (the driver reads the others itself, see [`sys::Epoll`]), and it leaves
/// them to the driver while the driver owns the link (waits for an answer on it, see
/// [`Link::owned`]): the driver's epoll instance has them queued too, so its next `wait` or
/// busy `poll` reads them, and no third thread wake-up sits between an answer and the driver.
/// Bytes left to the driver for `read_lease` without being read are taken after all (a driver
/// that posted and went away to compute must not hold up its peers or their heartbeats).
///
/// Both registrations are edge-triggered, so bytes left to the driver do not wake this thread
/// again; whoever reads, reads until the socket is drained.
fn reader_loop(shared: Arc<Shared>, idx: usize, pos: usize) {
    let Some(link) = shared.link_at(idx, pos) else {
        return;
    };
    read_link(&shared, link);
    if link.failed.load(Ordering::Acquire) && !shared.closing.load(Ordering::Acquire) {
        shared.release(link);
    }
}

/// The loop of [`reader_loop`]: returns once the link failed or the node is closing.
fn read_link(shared: &Shared, link: &Link) {
    let lease = shared.config.read_lease;
    let mut ready = [libc::epoll_event { events: 0, u64: 0 }];
    // When this thread first left bytes to the owning driver that are still unread.
    let mut left_since: Option<std::time::Instant> = None;
    loop {
        if link.failed.load(Ordering::Acquire) || shared.closing.load(Ordering::Acquire) {
            return;
        }
        let timeout = left_since.map(|t| lease.saturating_sub(t.elapsed()));
        let n = link.reader_ep.wait(&mut ready, timeout);
        if n > 0 {
            // Announce the bytes before looking at `owned` (the driver gives up ownership and
            // then looks at `deferred`: one of the two sees the other).
            if !link.deferred.swap(true, Ordering::SeqCst) {
                left_since = None; // the driver read what was left before: a fresh lease
            }
        } else if left_since.is_none() {
            continue; // interrupted
        }
        if !link.deferred.load(Ordering::SeqCst) {
            left_since = None; // the driver read them
            continue;
        }
        if link.owned.load(Ordering::SeqCst) {
            let since = *left_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() < lease {
                continue; // the driver reads them; look again when the lease ends
            }
            tracing::trace!(me = %shared.me, peer = %link.peer, "tcp transport: read lease expired; the reader thread reads");
        }
        left_since = None;
        link.deferred.store(false, Ordering::SeqCst);
        let mut rx = lock(&link.rx);
        if !shared.receive(link, &mut rx, false) {
            return;
        }
    }
}

impl Shared {
    /// Frees what a failed link owns: its socket, its reader thread's epoll instance, and its
    /// send and receive buffers. Called by the link's reader thread as it exits (nothing waits
    /// on the epoll instance then). Under both of the link's locks, so no syscall is in flight
    /// on the socket, and every later user of it (under either lock) sees the link failed
    /// first and leaves it alone. The `Link` value stays in its slot's chain (append-only, read
    /// without a lock), so a restart of a peer costs its few hundred bytes and nothing else.
    fn release(&self, link: &Link) {
        let mut rx = lock(&link.rx);
        let mut st = lock(&link.state);
        if st.failed.is_none() {
            return;
        }
        link.sock.close();
        link.reader_ep.close();
        st.buf = Vec::new();
        st.sent = 0;
        st.pending = VecDeque::new();
        rx.buf = Vec::new();
        rx.filled = 0;
        tracing::debug!(me = %self.me, peer = %link.peer, incarnation = link.peer_incarnation, "tcp transport: failed link released");
    }
}

/// The timer thread: heartbeats, delayed acknowledgements, op and heartbeat timeouts, and
/// draining send buffers that a full socket left behind.
fn timer_loop(shared: Arc<Shared>, parker: Parker) {
    let period = shared.config.heartbeat_period;
    let tick = shared.tick;
    let mut stalled = Vec::new();
    while !shared.closing.load(Ordering::Acquire) {
        stalled.clear();
        stalled.extend(
            (shared.live())
                .filter(|l| l.stalled.load(Ordering::Acquire))
                .map(Link::fd),
        );
        if stalled.is_empty() {
            parker.park_timeout(tick);
        } else {
            sys::wait_writable(&stalled, tick);
        }
        if shared.closing.load(Ordering::Acquire) {
            return;
        }
        let now = shared.now();
        shared.coarse.store(now.as_nanos(), Ordering::Release);
        for link in shared.live() {
            let mut st = lock(&link.state);
            if st.failed.is_some() {
                continue;
            }
            let last_rx = Time::from_nanos(link.last_rx.load(Ordering::Acquire));
            let silent = now.saturating_since(last_rx);
            if silent > shared.config.heartbeat_timeout {
                tracing::warn!(me = %shared.me, peer = %link.peer, ?silent, "tcp transport: heartbeats stopped");
                shared.fail_locked(link, &mut st, FailureCause::TimedOut, false);
                continue;
            }
            if st.pending.front().is_some_and(|p| p.deadline <= now) {
                tracing::warn!(me = %shared.me, peer = %link.peer, "tcp transport: op timed out");
                shared.fail_locked(link, &mut st, FailureCause::TimedOut, true);
                continue;
            }
            if st
                .stalled_since
                .is_some_and(|t| now.saturating_since(t) > shared.config.op_timeout)
            {
                tracing::warn!(me = %shared.me, peer = %link.peer, "tcp transport: peer stopped reading");
                shared.fail_locked(link, &mut st, FailureCause::TimedOut, true);
                continue;
            }
            if st.rx_seq > st.acked_rx {
                let seq = st.rx_seq;
                frame::encode_applied(&mut st.buf, seq);
                st.acked_rx = seq;
            }
            if st.buf.is_empty() && now.saturating_since(st.last_tx) >= period / 2 {
                frame::encode_heartbeat(&mut st.buf);
            }
            shared.flush_locked(link, &mut st);
        }
    }
}

/// Makes a handshaken connection the link of its peer's slot: the link is filled in, then its
/// socket is registered with the driver's epoll instance and then with its own reader thread's
/// (in that order, see [`sys::Epoll`]; bytes that arrived before are reported at registration),
/// and its reader thread starts. With `announce`, `PeerConnected` is queued before anything else
/// about the link can be, and the driver is woken; the driver adds the peer to its directory
/// when it polls that event.
///
/// A link from a peer that already had one is a new incarnation of it (the listener admits only
/// larger incarnations): the old link is failed first (its `PeerFailed` and error completions
/// come before the new `PeerConnected`, which is always announced), and the driver switches to
/// the new link when it polls that `PeerConnected`. A process of a peer barred (declared failed
/// while absent) that did not start after the report (its incarnation not above the bar's
/// floor) never links: its connection is closed.
fn install(shared: &Arc<Shared>, c: Connected, announce: bool) -> Result<(), StartError> {
    let peer = c.peer;
    let socket_err = |source| StartError::Socket { peer, source };
    let Some(idx) = shared.link_index(peer) else {
        return Err(StartError::Handshake {
            peer,
            detail: "not a configured peer".into(),
        });
    };
    c.stream.set_read_timeout(None).map_err(socket_err)?;
    let reader_ep = sys::Epoll::new().map_err(socket_err)?;
    let fd = c.stream.as_raw_fd();
    let now = shared.now();
    let peer_regions_max = c.regions.iter().map(|r| r.len).max().unwrap_or(0);
    let link = Link {
        peer,
        peer_incarnation: c.incarnation,
        sock: sys::Fd::new(c.stream.into_raw_fd()),
        reader_ep,
        state: Mutex::new(LinkState {
            buf: Vec::with_capacity(shared.config.coalesce_bytes * 2),
            sent: 0,
            next_seq: 0,
            pending: VecDeque::new(),
            failed: None,
            last_tx: now,
            rx_seq: 0,
            acked_rx: 0,
            outstanding: 0,
            awaiting: 0,
            stalled_since: None,
        }),
        rx: Mutex::new(RxState {
            buf: vec![0u8; READ_BUF],
            filled: 0,
        }),
        dirty: AtomicBool::new(false),
        stalled: AtomicBool::new(false),
        silenced: AtomicBool::new(false),
        failed: AtomicBool::new(false),
        outstanding: AtomicUsize::new(0),
        awaiting: AtomicUsize::new(0),
        owned: AtomicBool::new(false),
        deferred: AtomicBool::new(false),
        last_rx: AtomicU64::new(now.as_nanos()),
        max_body: shared.max_body,
        peer_max_body: body_limit(shared.config.max_message_len, peer_regions_max),
        regions: c.regions,
    };
    let slot = &shared.links[idx];
    let mut admit = lock(&slot.admit);
    let pos = admit.links;
    let previous = pos.checked_sub(1).and_then(|p| shared.link_at(idx, p));
    let stale = previous.is_some_and(|prev| link.peer_incarnation <= prev.peer_incarnation);
    // Declared failed while absent: only a process started after the report links.
    let barred = admit.floor.is_some_and(|f| link.peer_incarnation <= f);
    if barred || stale {
        drop(admit);
        tracing::warn!(me = %shared.me, %peer, incarnation = link.peer_incarnation, barred, "tcp transport: a link from a peer that may not link any more; closed");
        sys::shutdown(link.fd());
        return Ok(()); // dropping the link closes its descriptors
    }
    if let Some(prev) = previous {
        // A new incarnation proves the old one gone: fail it first (if nothing did yet).
        let mut st = lock(&prev.state);
        shared.fail_locked(prev, &mut st, FailureCause::ConnectionLost, false);
    }
    if slot.links.nth_or_grow(pos).link.set(link).is_err() {
        // `admit` serialises installs, so the position is free; a bug, not a peer's doing.
        tracing::error!(me = %shared.me, %peer, "tcp transport: a link position taken twice; dropped");
        return Ok(());
    }
    admit.links = pos + 1;
    let Some(link) = shared.link_at(idx, pos) else {
        return Ok(());
    };
    let announce = announce || pos > 0;
    if announce {
        shared.push_event(Event::PeerConnected {
            peer,
            incarnation: link.peer_incarnation,
        });
    }
    drop(admit);
    let token = link_token(idx, pos);
    let registered = (shared.driver_ep)
        .add(fd, sys::IN | sys::EDGE | sys::EXCLUSIVE, token)
        .and_then(|()| (link.reader_ep).add(fd, sys::IN | sys::EDGE | sys::EXCLUSIVE, token));
    let spawned = registered.and_then(|()| {
        let s = Arc::clone(shared);
        std::thread::Builder::new()
            .name(format!("squall-tcp-{}-rx-{peer}", shared.me))
            .spawn(move || reader_loop(s, idx, pos))
    });
    match spawned {
        Ok(h) => {
            let mut readers = lock(&shared.readers);
            // The reader threads of failed links are gone: keep the list as short as the links.
            readers.retain(|h| !h.is_finished());
            readers.push(h);
        }
        Err(e) => {
            tracing::error!(me = %shared.me, %peer, error = %e, "tcp transport: cannot start a link");
            let mut st = lock(&link.state);
            shared.fail_locked(link, &mut st, FailureCause::Local, false);
            return Err(socket_err(e));
        }
    }
    if announce {
        tracing::info!(me = %shared.me, %peer, incarnation = link.peer_incarnation, "tcp transport: late link up");
        shared.wake_driver();
    }
    Ok(())
}

/// Installs the links whose handshakes the listener completes after start (late nodes dialling
/// in), until the node shuts down.
fn late_links_loop(shared: Arc<Shared>, rx: Receiver<Connected>) {
    while !shared.closing.load(Ordering::Acquire) {
        match rx.recv_timeout(shared.tick) {
            Ok(c) => {
                if shared.closing.load(Ordering::Acquire) {
                    let _ = c.stream.shutdown(Shutdown::Both);
                    return;
                }
                let peer = c.peer;
                if let Err(e) = install(&shared, c, true) {
                    tracing::warn!(me = %shared.me, %peer, error = %e, "tcp transport: late link failed");
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// The wall clock in nanoseconds since the Unix epoch (0 before it).
fn wall_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A late or restarted node's redial thread: every [`ClusterConfig::redial_period`] it dials
/// the peers it has no link to and did not declare failed while absent (a founder that was
/// down when this node started, or not started yet), until the node shuts down (which
/// unparks it). A connection it makes is installed by the `links` thread like one dialled in.
fn redial_loop(shared: Arc<Shared>, dialer: Dialer, parker: Parker) {
    let period = shared.config.redial_period;
    loop {
        parker.park_timeout(period);
        for slot in &shared.links {
            if shared.closing.load(Ordering::Acquire) {
                return;
            }
            let unlinked = {
                let admit = lock(&slot.admit);
                admit.links == 0 && admit.floor.is_none()
            };
            if unlinked {
                dialer.redial(slot.peer);
            }
        }
    }
}

/// A fresh incarnation number: the wall clock in nanoseconds, and larger than every earlier one
/// of this process. A restarted node's incarnation is larger than its crashed one's as long as
/// the clock did not go back between the two starts (peers admit only larger incarnations).
fn fresh_incarnation() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let nanos = wall_nanos();
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = nanos.max(last.saturating_add(1));
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

impl TcpNode {
    /// Starts node `me`: binds its address from `config`, connects to every peer, and
    /// starts the I/O threads. `regions` are this node's registered regions (use
    /// [`Region::from_raw`] for memory such as a shared mapping).
    ///
    /// A founder (a node not in [`ClusterConfig::late`]) blocks until every other founder is
    /// linked, or fails after `config.connect_timeout` with an error naming the peers that are
    /// missing and why (a refused handshake says what differed); late nodes are absent to it
    /// until they dial in. A late node does not wait: it dials every configured peer (a
    /// refused handshake is an error) and leaves the ones it cannot reach absent, dialling
    /// them again every [`ClusterConfig::redial_period`].
    pub fn start(
        config: ClusterConfig,
        me: NodeId,
        regions: Vec<Region>,
    ) -> Result<TcpNode, StartError> {
        let listener = Self::bind(&config, me)?;
        Self::start_on(listener, config, me, regions)
    }

    /// Binds `me`'s address from `config` (validated first).
    fn bind(config: &ClusterConfig, me: NodeId) -> Result<TcpListener, StartError> {
        config.validate_for(me)?;
        let addr = config.nodes[&me];
        TcpListener::bind(addr).map_err(|source| StartError::Bind { addr, source })
    }

    /// Like [`start`](Self::start), on a listener the caller already bound (for example on
    /// port 0, before the config with the chosen ports was written).
    pub fn start_on(
        listener: TcpListener,
        config: ClusterConfig,
        me: NodeId,
        regions: Vec<Region>,
    ) -> Result<TcpNode, StartError> {
        let late = config.is_late(me);
        Self::start_as(listener, config, me, regions, late)
    }

    /// Starts node `me` again after its process crashed (or was killed), under the same id and
    /// with fresh regions: a new incarnation. It starts like a late node whatever the config
    /// says (its peers run already): it dials every configured peer, leaves the ones it
    /// cannot reach absent (dialling them again every [`ClusterConfig::redial_period`]), and
    /// reports `PeerConnected` for each link it makes. A peer that
    /// had linked the old incarnation admits the new one because its incarnation is larger
    /// (incarnations grow with the wall clock, so the restart must come after the old start on
    /// the same clock): it fails the old link if it had not noticed the crash yet, and reports
    /// `PeerConnected` with the new incarnation. The address comes from `config` (the same
    /// port, or a new one if the peers' configs say so).
    ///
    /// ```no_run
    /// # use squall_transport::{NodeId, Region, RegionId, RegionSpec};
    /// # use squall_transport_tcp::{ClusterConfig, TcpNode};
    /// # fn demo(config: ClusterConfig) -> Result<(), Box<dyn std::error::Error>> {
    /// // In the process started in place of a killed node 2:
    /// let region = Region::new(RegionSpec::new(RegionId(0), 4096))?;
    /// let node = TcpNode::rejoin(config, NodeId(2), vec![region])?;
    /// # drop(node); Ok(()) }
    /// ```
    pub fn rejoin(
        config: ClusterConfig,
        me: NodeId,
        regions: Vec<Region>,
    ) -> Result<TcpNode, StartError> {
        let listener = Self::bind(&config, me)?;
        Self::rejoin_on(listener, config, me, regions)
    }

    /// Like [`rejoin`](Self::rejoin), on a listener the caller already bound.
    pub fn rejoin_on(
        listener: TcpListener,
        config: ClusterConfig,
        me: NodeId,
        regions: Vec<Region>,
    ) -> Result<TcpNode, StartError> {
        Self::start_as(listener, config, me, regions, true)
    }

    /// Starts as a founder (`late` false: waits for every founder) or as a late node.
    fn start_as(
        listener: TcpListener,
        config: ClusterConfig,
        me: NodeId,
        regions: Vec<Region>,
        late: bool,
    ) -> Result<TcpNode, StartError> {
        config.validate_for(me)?;
        let mut dir = Directory::new(me);
        for r in &regions {
            dir.add_local(r.clone())?;
        }
        let local_addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: config.nodes[&me],
            source,
        })?;
        let incarnation = fresh_incarnation();
        let specs: Vec<RegionSpec> = regions
            .iter()
            .map(|r| RegionSpec::new(r.id(), r.len()))
            .collect();
        let (acceptor, connected, late_rx) =
            handshake::establish(listener, &config, me, incarnation, &specs, late)?;
        let max_local = regions.iter().map(Region::len).max().unwrap_or(0);
        let max_body = body_limit(config.max_message_len, max_local);
        let clock = SystemClock::new();
        let now = clock.now();
        let tick = (config.heartbeat_period / 2).max(Duration::from_millis(1));
        let driver = sys::Wakeup::new().map_err(StartError::Thread)?;
        let driver_ep = sys::Epoll::new().map_err(StartError::Thread)?;
        driver_ep
            .add(driver.fd(), sys::IN, WAKEUP_TOKEN)
            .map_err(StartError::Thread)?;
        let slots: Vec<LinkSlot> = (config.nodes.keys().copied())
            .filter(|&p| p != me)
            .map(LinkSlot::new)
            .collect();
        let nlinks = slots.len();
        // A late node reports every link it makes (its peers were absent when it was created);
        // a founder's links made at start are there from the start.
        let announce = late;
        let timer_parker = Parker::new();
        let ack_every = ack_every(config.max_outstanding);
        let shared = Arc::new(Shared {
            me,
            config,
            clock,
            regions,
            links: slots,
            max_body,
            readers: Mutex::new(Vec::new()),
            events: Mutex::new(VecDeque::new()),
            events_len: AtomicUsize::new(0),
            inbox: Mutex::new(VecDeque::new()),
            inbox_len: AtomicUsize::new(0),
            driver,
            driver_ep,
            driver_parked: AtomicBool::new(false),
            wake_pending: AtomicBool::new(false),
            timer: timer_parker.unparker().clone(),
            closing: AtomicBool::new(false),
            coarse: AtomicU64::new(now.as_nanos()),
            tick,
            ack_every,
        });
        let stop = |e: StartError, acceptor: Acceptor, shared: &Shared| {
            shared.closing.store(true, Ordering::Release);
            acceptor.stop();
            for link in shared.live() {
                let _st = lock(&link.state);
                sys::shutdown(link.fd());
            }
            for h in lock(&shared.readers).drain(..) {
                let _ = h.join();
            }
            e
        };
        let mut linked = Vec::new();
        for c in connected {
            let peer = c.peer;
            let regions = c.regions.clone();
            if let Err(e) = install(&shared, c, announce) {
                return Err(stop(e, acceptor, &shared));
            }
            linked.push((peer, regions));
        }
        for &LinkSlot { peer, .. } in &shared.links {
            match linked.iter().find(|(p, _)| *p == peer) {
                Some((_, regions)) if !announce => dir.add_peer(peer, regions),
                _ => dir.add_absent_peer(peer),
            }
        }
        let mut threads = Vec::new();
        let s = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name(format!("squall-tcp-{me}-timer"))
            .spawn(move || timer_loop(s, timer_parker));
        match spawned {
            Ok(h) => threads.push(h),
            Err(e) => return Err(stop(StartError::Thread(e), acceptor, &shared)),
        }
        let s = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name(format!("squall-tcp-{me}-links"))
            .spawn(move || late_links_loop(s, late_rx));
        match spawned {
            Ok(h) => threads.push(h),
            Err(e) => return Err(stop(StartError::Thread(e), acceptor, &shared)),
        }
        let mut redial = None;
        if late && !shared.config.redial_period.is_zero() {
            let s = Arc::clone(&shared);
            let parker = Parker::new();
            let unparker = parker.unparker().clone();
            let dialer = acceptor.dialer();
            let spawned = std::thread::Builder::new()
                .name(format!("squall-tcp-{me}-redial"))
                .spawn(move || redial_loop(s, dialer, parker));
            match spawned {
                Ok(h) => threads.push(h),
                Err(e) => return Err(stop(StartError::Thread(e), acceptor, &shared)),
            }
            redial = Some(unparker);
        }
        tracing::info!(%me, addr = %local_addr, incarnation, linked = linked.len(), peers = nlinks, "tcp transport: node started");
        Ok(TcpNode {
            me,
            shared,
            dir,
            next_op: 0,
            staged: (0..nlinks).map(|_| Staged::default()).collect(),
            ready: vec![libc::epoll_event { events: 0, u64: 0 }; nlinks + 1],
            write_cache: None,
            polls: 0,
            incarnation,
            local_addr,
            acceptor: Some(acceptor),
            threads,
            redial,
            closed: false,
        })
    }

    /// This start's incarnation number (fresh on every start).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The incarnation `peer` announced in its handshake.
    pub fn peer_incarnation(&self, peer: NodeId) -> Option<u64> {
        self.link_index(peer)
            .and_then(|i| self.shared.link(i))
            .map(|l| l.peer_incarnation)
    }

    /// The bytes the node's links hold in send and receive buffers (their capacity), every
    /// incarnation's link included: a diagnostic. A failed link frees its buffers (and closes
    /// its socket) once its reader thread is done, so this does not grow with a peer's
    /// restarts.
    ///
    /// ```
    /// # use std::net::TcpListener;
    /// # use squall_transport::{NodeId, Region, RegionId, RegionSpec};
    /// # use squall_transport_tcp::{ClusterConfig, TcpNode};
    /// let l = TcpListener::bind("127.0.0.1:0")?;
    /// let mut config = ClusterConfig::new(1, [(NodeId(0), l.local_addr()?), (NodeId(1), "127.0.0.1:9".parse()?)]);
    /// config.late.insert(NodeId(1)); // absent until it starts
    /// let region = Region::new(RegionSpec::new(RegionId(0), 64)).expect("valid region");
    /// let node = TcpNode::start_on(l, config, NodeId(0), vec![region])?;
    /// assert_eq!(node.buffer_bytes(), 0); // no link yet
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn buffer_bytes(&self) -> usize {
        let mut bytes = 0;
        for link in self.shared.live() {
            bytes += lock(&link.state).buf.capacity();
            bytes += lock(&link.rx).buf.capacity();
        }
        bytes
    }

    /// The address this node listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The config this node runs with.
    pub fn config(&self) -> &ClusterConfig {
        &self.shared.config
    }

    /// Fault injection for tests: from now on the link to `peer` is silent at this end — bytes
    /// to it are dropped and bytes from it are ignored — as if the network dropped every packet.
    /// Heartbeats stop, so this node (and the peer, if it silences its end too) fails the peer
    /// with [`FailureCause::TimedOut`] within the configured timeouts.
    pub fn silence(&self, peer: NodeId) {
        if let Some(link) = self.link_index(peer).and_then(|i| self.shared.link(i)) {
            link.silenced.store(true, Ordering::Release);
        }
    }

    /// Stops this node as a crash would: every connection is closed without a goodbye (peers
    /// see the connection lost), the I/O threads stop, and later posts return
    /// [`PostError::Closed`]. Dropping the node does the same.
    pub fn shutdown(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        let s = &self.shared;
        s.closing.store(true, Ordering::Release);
        if let Some(a) = self.acceptor.take() {
            a.stop();
        }
        // The timer, redial and late-link threads first: once they are gone no link is added.
        s.timer.unpark();
        if let Some(u) = &self.redial {
            u.unpark();
        }
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        for link in s.live() {
            let mut st = lock(&link.state);
            if st.failed.is_none() {
                st.failed = Some(FailureCause::Local);
            }
            st.buf.clear();
            // Under the lock: a link released meanwhile has closed its socket (see `release`).
            sys::shutdown(link.fd());
        }
        let readers = std::mem::take(&mut *lock(&s.readers));
        for h in readers {
            let _ = h.join();
        }
        tracing::info!(me = %self.me, "tcp transport: node shut down");
    }

    fn link_index(&self, peer: NodeId) -> Option<usize> {
        self.shared.link_index(peer)
    }

    fn flush_dirty(&mut self) {
        for (idx, staged) in self.staged.iter_mut().enumerate() {
            let Some(link) = self.shared.link(idx) else {
                continue;
            };
            if staged.count > 0 || link.dirty.load(Ordering::Acquire) {
                let mut st = lock(&link.state);
                self.shared.hand_over(link, &mut st, staged);
                self.shared.flush_locked(link, &mut st);
            }
        }
    }

    /// Busy-poll receive: while it awaits an answer on a link, the driver reads its socket
    /// itself instead of waiting for a reader thread to be scheduled (it skips links a reader is
    /// serving). Links with only unsignaled ops outstanding are left to their reader threads:
    /// their acknowledgements wake those anyway, and the driver would only contend with them.
    fn receive_inline(&self) {
        for link in self.shared.live() {
            if link.awaiting.load(Ordering::Acquire) == 0 || link.failed.load(Ordering::Acquire) {
                continue;
            }
            let mut rx = match link.rx.try_lock() {
                Ok(g) => g,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => continue,
            };
            driver_receive(&self.shared, link, &mut rx);
        }
    }

    /// Gives up reading the sockets of links on which the driver no longer waits for an
    /// answer (called as `poll` and `wait` return), and reads what their reader threads left to
    /// it meanwhile, so that from now on the reader threads serve those links again.
    fn release_reads(&self) {
        for link in self.shared.live() {
            if !link.owned.load(Ordering::Relaxed)
                || (link.awaiting.load(Ordering::Acquire) > 0
                    && !link.failed.load(Ordering::Acquire))
            {
                continue;
            }
            link.owned.store(false, Ordering::SeqCst);
            if link.deferred.load(Ordering::SeqCst) {
                // Trying is enough: a reader thread holding the buffer reads what is there.
                let mut rx = match link.rx.try_lock() {
                    Ok(g) => g,
                    Err(TryLockError::Poisoned(p)) => p.into_inner(),
                    Err(TryLockError::WouldBlock) => continue,
                };
                driver_receive(&self.shared, link, &mut rx);
            }
        }
    }

    /// Any write, through the directory check or the cached route: the path of signaled writes,
    /// long ones, the first to a route, and those that open a batch or find the link busy.
    #[inline(never)]
    fn write_any(
        &mut self,
        peer: NodeId,
        src: LocalSlice,
        dst: RemoteAddr,
        signal: Signal,
    ) -> Result<OpId, PostError> {
        let (region, remote_index, link_idx) = match self.write_cache {
            Some(route) if route.covers(peer, src, dst) => (
                &self.dir.locals()[route.local_idx],
                route.remote_index,
                route.link_idx,
            ),
            _ => {
                let region = self.dir.check_write(peer, src, dst)?;
                let local_idx = (self.dir.locals().iter()).position(|r| r.id() == src.region);
                let remote_len = self.dir.remote_len(peer, dst.region);
                let link_idx = self.link_index(peer);
                let remote_index = link_idx
                    .and_then(|i| self.shared.link(i))
                    .and_then(|l| l.regions.iter().position(|r| r.id == dst.region))
                    .and_then(|i| u8::try_from(i).ok());
                self.write_cache =
                    local_idx
                        .zip(remote_len)
                        .map(|(local_idx, remote_len)| WriteRoute {
                            peer,
                            remote: dst.region,
                            remote_len,
                            local: src.region,
                            local_idx,
                            local_len: region.len(),
                            remote_index,
                            link_idx,
                            short_end: match remote_index.zip(link_idx) {
                                Some(_) => remote_len.min(u32::MAX as usize),
                                None => 0,
                            },
                            index: remote_index.unwrap_or(0),
                            link: link_idx.unwrap_or(0),
                        });
                (region, remote_index, link_idx)
            }
        };
        // Bounds were checked by the directory above.
        let data = |buf: &mut Vec<u8>| append_from(region, src.offset, src.len, buf);
        if signal == Signal::Signaled {
            post_op(
                &self.shared,
                &mut self.staged,
                &mut self.next_op,
                self.closed,
                peer,
                OpKind::Write,
                true,
                None,
                |buf: &mut Vec<u8>| {
                    frame::encode_write_header(
                        buf,
                        wire_region(dst.region),
                        dst.offset as u64,
                        src.len,
                        true,
                    );
                    data(buf);
                },
            )
        } else {
            stage_write(
                &self.shared,
                &mut self.staged,
                &mut self.next_op,
                self.closed,
                peer,
                StagedWrite {
                    dst,
                    len: src.len,
                    remote_index,
                    link_idx,
                },
                data,
            )
        }
    }

    /// The fast path of an unsignaled write: a short one on the cached route, appended as a
    /// record to the batch open for its link, within the allowance the general path armed
    /// (see [`Staged::fast_end`]): a few compares, a word copy and a 14-byte append for an
    /// 8 B write, no atomic and no look-up of the link. `None` (nothing posted) when any
    /// condition does not hold; [`Transport::write`] then takes the general path, which
    /// checks everything and re-arms the allowance.
    #[inline]
    fn stage_short_write(
        &mut self,
        peer: NodeId,
        src: LocalSlice,
        dst: RemoteAddr,
    ) -> Option<OpId> {
        let route = self.write_cache.as_ref()?;
        let len = src.len;
        if self.closed
            || route.peer != peer
            || route.remote != dst.region
            || route.local != src.region
            || len > frame::SHORT_WRITE_MAX
            || dst.offset.checked_add(len)? > route.short_end
            || src.offset.checked_add(len)? > route.local_len
        {
            return None;
        }
        let stage = self.staged.get_mut(route.link)?;
        if stage.fast_ops == 0 || stage.buf.len() + frame::RECORD_OVERHEAD + len > stage.fast_end {
            return None;
        }
        let region = self.dir.locals().get(route.local_idx)?;
        // Below `short_end`, so below 4 GiB.
        // The batch's length field is brought up to date when the batch is closed or handed
        // over (`Staged::close_batch`), not per record.
        push_short_record(
            &mut stage.buf,
            route.index,
            dst.offset as u32,
            region,
            src.offset,
            len,
        );
        stage.fast_ops -= 1;
        let op = self.next_op;
        self.next_op += 1;
        stage.add_op(op);
        Some(OpId(op))
    }

    /// Whether the driver waits for an answer on any link (and so owns its socket).
    fn owns_any(&self) -> bool {
        (self.shared.live()).any(|l| l.owned.load(Ordering::Relaxed))
    }

    /// `wait`'s first phase: polls the sockets the driver owns without blocking for at most
    /// `spin_before_park` (never longer than `timeout`). Returns whether something arrived for
    /// the driver (then `wait` returns without parking).
    fn spin(&self, timeout: Duration) -> bool {
        let s = &self.shared;
        let spin = s.config.spin_before_park.min(timeout);
        if spin.is_zero() || !self.owns_any() {
            return false;
        }
        let start = std::time::Instant::now();
        loop {
            for link in s.live() {
                if !link.owned.load(Ordering::Relaxed) || link.failed.load(Ordering::Acquire) {
                    continue;
                }
                if let Ok(mut rx) = link.rx.try_lock() {
                    driver_receive(s, link, &mut rx);
                }
            }
            if s.events_len.load(Ordering::Acquire) > 0
                || s.inbox_len.load(Ordering::Acquire) > 0
                || s.wake_pending.swap(false, Ordering::AcqRel)
            {
                return true;
            }
            if start.elapsed() >= spin || !self.owns_any_awaiting() {
                return false;
            }
            std::hint::spin_loop();
        }
    }

    /// Whether an owned link still waits for an answer.
    fn owns_any_awaiting(&self) -> bool {
        (self.shared.live()).any(|l| {
            l.owned.load(Ordering::Relaxed)
                && l.awaiting.load(Ordering::Acquire) > 0
                && !l.failed.load(Ordering::Acquire)
        })
    }
}

/// Posts one request on the link to `peer`: numbers it, buffers its frame, remembers it until
/// it is known applied, and flushes when it needs an answer or the buffer is full. A free
/// function so that callers can keep borrowing their directory (the write's source region).
#[allow(clippy::too_many_arguments)]
fn post_op(
    shared: &Shared,
    staged: &mut [Staged],
    next_op: &mut u64,
    closed: bool,
    peer: NodeId,
    kind: OpKind,
    signaled: bool,
    read_into: Option<LocalSlice>,
    encode: impl FnOnce(&mut Vec<u8>),
) -> Result<OpId, PostError> {
    let idx = shared.open_link(closed, peer)?;
    // The directory refused ops to absent peers already: a posted op finds its link.
    let link = shared.link(idx).ok_or(PostError::NotConnected { peer })?;
    let mut st = lock(&link.state);
    // Everything staged before this op goes first (FIFO per link).
    shared.hand_over(link, &mut st, &mut staged[idx]);
    let max = shared.config.max_outstanding;
    if st.failed.is_none() && (st.outstanding as usize >= max || st.buf.len() >= HIGH_WATER) {
        shared.flush_locked(link, &mut st);
        if st.outstanding as usize >= max || st.buf.len() >= HIGH_WATER {
            return Err(PostError::QueueFull { peer, depth: max });
        }
    }
    let op = OpId(*next_op);
    *next_op += 1;
    if st.failed.is_some() {
        shared.push_event(Event::Completion(Completion {
            op,
            peer,
            kind,
            result: Err(OpError::PeerFailed),
        }));
        return Ok(op);
    }
    st.next_seq += 1;
    let seq = st.next_seq;
    if signaled {
        st.awaiting += 1;
        link.awaiting.store(st.awaiting as usize, Ordering::Release);
        if !shared.config.read_lease.is_zero() {
            // Before the request leaves: the answer may come back at once.
            link.owned.store(true, Ordering::SeqCst);
        }
    }
    encode(&mut st.buf);
    // Never early: the coarse clock lags by at most a tick.
    let deadline = shared.coarse_now() + shared.config.op_timeout + shared.tick;
    let mut merged = false;
    if !signaled && read_into.is_none() {
        if let Some(last) = st.pending.back_mut() {
            if !last.signaled
                && last.kind == kind
                && last.deadline == deadline
                && last.seq + last.count == seq
                && last.op.0 + last.count == op.0
            {
                last.count += 1;
                merged = true;
            }
        }
    }
    if !merged {
        st.pending.push_back(Pending {
            seq,
            op,
            count: 1,
            kind,
            signaled,
            deadline,
            read_into,
        });
    }
    st.outstanding += 1;
    link.outstanding
        .store(st.outstanding as usize, Ordering::Release);
    let urgent = signaled || !matches!(kind, OpKind::Write | OpKind::Send);
    if urgent || st.buf.len() >= shared.config.coalesce_bytes {
        shared.flush_locked(link, &mut st);
    } else {
        link.dirty.store(true, Ordering::Release);
    }
    Ok(op)
}

/// An unsignaled write to stage: where it goes, how long it is, and the remote region's index in
/// the peer's handshake directory if a `Writes` record can name it.
struct StagedWrite {
    dst: RemoteAddr,
    len: usize,
    remote_index: Option<u8>,
    /// The peer's link slot, if the caller knows it.
    link_idx: Option<usize>,
}

/// Posts an unsignaled write: stages it without any lock, as a record of the open `Writes` batch
/// when it is short (at most 255 bytes to one of the peer's first 256 regions below 4 GiB),
/// else as a `Write` frame. `data` appends the write's bytes. Falls back to [`post_op`] when the
/// link failed or is near its outstanding-op bound.
fn stage_write(
    shared: &Shared,
    staged: &mut [Staged],
    next_op: &mut u64,
    closed: bool,
    peer: NodeId,
    w: StagedWrite,
    data: impl Fn(&mut Vec<u8>),
) -> Result<OpId, PostError> {
    let kind = OpKind::Write;
    let long = |buf: &mut Vec<u8>| {
        frame::encode_write_header(
            buf,
            wire_region(w.dst.region),
            w.dst.offset as u64,
            w.len,
            false,
        );
        data(buf);
    };
    let idx = match w.link_idx {
        Some(idx) if !closed => idx,
        _ => shared.open_link(closed, peer)?,
    };
    let link = shared.link(idx).ok_or(PostError::NotConnected { peer })?;
    let stage = &mut staged[idx];
    let busy = stage.count + link.outstanding.load(Ordering::Acquire) as u64
        >= shared.config.max_outstanding as u64;
    if busy || link.failed.load(Ordering::Acquire) {
        return post_op(
            shared, staged, next_op, closed, peer, kind, false, None, long,
        );
    }
    let op = *next_op;
    *next_op += 1;
    let record = (w.remote_index)
        .filter(|_| w.len <= frame::SHORT_WRITE_MAX)
        .zip(u32::try_from(w.dst.offset).ok());
    // The fast path appended records without updating the batch's length.
    stage.close_batch();
    let open = match record {
        Some((index, offset)) => {
            let batch = match stage.batch {
                Some(at) if stage.fits(at, w.len, link) => at,
                _ => {
                    let at = frame::open_write_batch(&mut stage.buf);
                    stage.batch = Some(at);
                    at
                }
            };
            stage.push_record(batch, index, offset, w.len, data);
            Some(batch)
        }
        None => {
            stage.batch = None;
            stage.disarm_fast();
            long(&mut stage.buf);
            None
        }
    };
    stage.add_op(op);
    if stage.buf.len() >= shared.config.coalesce_bytes {
        let mut st = lock(&link.state);
        shared.hand_over(link, &mut st, stage);
        shared.flush_locked(link, &mut st);
    } else if let Some(at) = open {
        // Checked just now: the next short writes to this batch may take the fast path.
        stage.arm_fast(at, link, &shared.config);
    }
    Ok(OpId(op))
}

/// The driver reads a link's socket (holding its receive buffer): first it clears the link's
/// `deferred` mark, so that bytes arriving after this read are announced again.
fn driver_receive(shared: &Shared, link: &Link, rx: &mut RxState) {
    if link.deferred.load(Ordering::Relaxed) {
        link.deferred.store(false, Ordering::SeqCst);
    }
    shared.receive(link, rx, true);
}

impl Drop for TcpNode {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The largest frame body a node accepts: its message limit or its largest region, plus room for
/// the frame's own fields. Its peers bound the `Writes` batches they send it by the same rule,
/// from the regions it announced.
fn body_limit(max_message_len: usize, max_region_len: usize) -> usize {
    max_message_len.max(max_region_len) + 32
}

fn wire_region(id: RegionId) -> u32 {
    id.0
}

/// Appends `len` bytes of `region` at `offset` (bounds already checked) to `buf`, like
/// [`copy_out`] but without zero-filling first when the bytes are whole aligned words.
fn append_from(region: &Region, offset: usize, len: usize, buf: &mut Vec<u8>) {
    if offset % 8 == 0 && len % 8 == 0 {
        let words = &region.words()[offset / 8..(offset + len) / 8];
        buf.reserve(len);
        let start = buf.len();
        let spare = &mut buf.spare_capacity_mut()[..len];
        for (word, chunk) in words.iter().zip(spare.chunks_exact_mut(8)) {
            for (dst, byte) in chunk
                .iter_mut()
                .zip(word.load(Ordering::Acquire).to_le_bytes())
            {
                dst.write(byte);
            }
        }
        // SAFETY: the loop initialised all `len` bytes after `start` (`words` has `len / 8`
        // words, `spare` `len / 8` chunks of 8), within the capacity reserved above.
        unsafe { buf.set_len(start + len) };
    } else {
        let start = buf.len();
        buf.resize(start + len, 0);
        let _ = region.read_bytes(offset, &mut buf[start..]);
    }
}

/// Appends a `Writes` record of the `len` bytes of `region` at `src` (bounds already
/// checked; `len` at most [`frame::SHORT_WRITE_MAX`]) addressed to `offset` in the region with
/// handshake index `index`. An aligned 8-byte write, the common case, is one word load and one
/// 14-byte append.
#[inline(always)]
fn push_short_record(
    buf: &mut Vec<u8>,
    index: u8,
    offset: u32,
    region: &Region,
    src: usize,
    len: usize,
) {
    let word = (len == 8 && src % 8 == 0)
        .then(|| region.words().get(src / 8))
        .flatten();
    if let Some(word) = word {
        let w = word.load(Ordering::Acquire).to_le_bytes();
        let o = offset.to_le_bytes();
        buf.extend_from_slice(&[
            8, index, o[0], o[1], o[2], o[3], w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7],
        ]);
    } else {
        frame::write_record_header(buf, index, offset, len);
        append_from(region, src, len, buf);
    }
}

/// Copies `src` into `region` at `offset` (bounds already checked) like
/// [`Region::write_bytes`]: whole words stored with release ordering in ascending order (a
/// fixed-size copy each when the bytes are whole aligned words), partial words merged.
fn copy_in(region: &Region, offset: usize, src: &[u8]) {
    if offset % 8 == 0 && src.len() % 8 == 0 {
        let words = &region.words()[offset / 8..(offset + src.len()) / 8];
        for (word, chunk) in words.iter().zip(src.chunks_exact(8)) {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            word.store(u64::from_le_bytes(w), Ordering::Release);
        }
    } else {
        let _ = region.write_bytes(offset, src);
    }
}

/// Copies bytes out of `region` at `offset` (bounds already checked) like
/// [`Region::read_bytes`], each word loaded whole with acquire ordering, but whole aligned words
/// with a fixed-size copy each (posting small writes is the hot path).
fn copy_out(region: &Region, offset: usize, dst: &mut [u8]) {
    if offset % 8 == 0 && dst.len() % 8 == 0 {
        let words = &region.words()[offset / 8..(offset + dst.len()) / 8];
        for (word, chunk) in words.iter().zip(dst.chunks_exact_mut(8)) {
            chunk.copy_from_slice(&word.load(Ordering::Acquire).to_le_bytes());
        }
    } else {
        let _ = region.read_bytes(offset, dst);
    }
}

impl Transport for TcpNode {
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
        self.shared.now()
    }

    #[inline]
    fn write(
        &mut self,
        peer: NodeId,
        src: LocalSlice,
        dst: RemoteAddr,
        signal: Signal,
    ) -> Result<OpId, PostError> {
        if signal == Signal::Unsignaled {
            if let Some(op) = self.stage_short_write(peer, src, dst) {
                return Ok(op);
            }
        }
        self.write_any(peer, src, dst, signal)
    }

    fn read(&mut self, peer: NodeId, src: RemoteAddr, dst: LocalSlice) -> Result<OpId, PostError> {
        self.polls = 0;
        self.dir.check_remote(peer, src, dst.len)?;
        self.dir.check_local(dst)?;
        let len = u32::try_from(dst.len).map_err(|_| PostError::MessageTooLarge {
            len: dst.len,
            max: u32::MAX as usize,
        })?;
        post_op(
            &self.shared,
            &mut self.staged,
            &mut self.next_op,
            self.closed,
            peer,
            OpKind::Read,
            true,
            Some(dst),
            |buf| frame::encode_read(buf, wire_region(src.region), src.offset as u64, len),
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
        self.polls = 0;
        post_op(
            &self.shared,
            &mut self.staged,
            &mut self.next_op,
            self.closed,
            peer,
            OpKind::CompareAndSwap,
            true,
            None,
            |buf| {
                frame::encode_cas(
                    buf,
                    wire_region(word.region),
                    word.offset as u64,
                    expected,
                    new,
                )
            },
        )
    }

    fn fetch_add(&mut self, peer: NodeId, word: RemoteAddr, delta: u64) -> Result<OpId, PostError> {
        self.polls = 0;
        self.dir.check_atomic(peer, word)?;
        post_op(
            &self.shared,
            &mut self.staged,
            &mut self.next_op,
            self.closed,
            peer,
            OpKind::FetchAdd,
            true,
            None,
            |buf| frame::encode_fetch_add(buf, wire_region(word.region), word.offset as u64, delta),
        )
    }

    fn send(&mut self, peer: NodeId, data: &[u8], signal: Signal) -> Result<OpId, PostError> {
        self.dir
            .check_send(peer, data.len(), self.shared.config.max_message_len)?;
        let signaled = signal == Signal::Signaled;
        post_op(
            &self.shared,
            &mut self.staged,
            &mut self.next_op,
            self.closed,
            peer,
            OpKind::Send,
            signaled,
            None,
            |buf| frame::encode_send(buf, data, signaled),
        )
    }

    fn fence(&mut self, peer: NodeId) -> Result<OpId, PostError> {
        self.polls = 0;
        self.dir.check_fence(peer)?;
        post_op(
            &self.shared,
            &mut self.staged,
            &mut self.next_op,
            self.closed,
            peer,
            OpKind::Fence,
            true,
            None,
            frame::encode_fence,
        )
    }

    fn poll(&mut self, out: &mut [Event]) -> usize {
        self.flush_dirty();
        self.polls = self.polls.saturating_add(1);
        if self.polls > 1 && self.shared.events_len.load(Ordering::Acquire) == 0 {
            self.receive_inline();
        }
        self.release_reads();
        if out.is_empty() || self.shared.events_len.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let shared = &self.shared;
        let mut ev = lock(&shared.events);
        let mut n = 0;
        while n < out.len() {
            let Some(e) = ev.pop_front() else {
                break;
            };
            if let Event::PeerConnected { peer, incarnation } = e
                && let Some(idx) = shared.link_index(peer)
            {
                let slot = &shared.links[idx];
                let at = (slot.links.iter()).position(|l| l.peer_incarnation == incarnation);
                // A link of the process declared failed while absent (made before the report,
                // failed by it): never connects. A later incarnation's link does.
                let bar = slot.barred_links.load(Ordering::Relaxed);
                if bar != NOT_BARRED && at.is_none_or(|pos| pos < bar) {
                    continue;
                }
                // The switch to connected, on the driver thread: ops to the peer are accepted
                // from the moment its `PeerConnected` is polled, and go to the link of the
                // incarnation it names (a restarted peer's new link).
                {
                    if let Some(pos) = at {
                        slot.current.store(pos, Ordering::Relaxed);
                        self.write_cache = None;
                    }
                    if let Some(link) = shared.link(idx) {
                        self.dir.add_peer(peer, &link.regions);
                    }
                }
            }
            out[n] = e;
            n += 1;
        }
        shared.events_len.store(ev.len(), Ordering::Release);
        n
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> Option<NodeId> {
        if self.shared.inbox_len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut inbox = lock(&self.shared.inbox);
        let (from, data) = inbox.pop_front()?;
        self.shared.inbox_len.store(inbox.len(), Ordering::Release);
        *buf = data;
        Some(from)
    }

    fn is_absent(&self, peer: NodeId) -> bool {
        self.dir.is_absent(peer)
    }

    /// Fails the link the driver posts on: the incarnation whose `PeerConnected` it polled last
    /// (a newer incarnation's link, not polled yet, stays up). An absent peer is barred: it is
    /// reported failed once, and the process that may have been running never links (a link it
    /// made and the driver has not polled is failed, a handshake it completes later is refused);
    /// only a process started after this report, by more than [`ClusterConfig::clock_skew`],
    /// links, as a new incarnation (`PeerConnected` with it, like a restart).
    fn report_failed(&mut self, peer: NodeId) {
        let Some(idx) = self.link_index(peer) else {
            return;
        };
        let shared = &self.shared;
        if self.dir.is_absent(peer) {
            let mut admit = lock(&shared.links[idx].admit);
            if admit.floor.is_none() {
                let skew = u64::try_from(shared.config.clock_skew.as_nanos()).unwrap_or(u64::MAX);
                let floor = wall_nanos().saturating_add(skew);
                admit.floor = Some(floor);
                (shared.links[idx].barred_links).store(admit.links, Ordering::Relaxed);
                if let Some(a) = &self.acceptor {
                    a.bar(peer, floor);
                }
                // A link made but not polled yet is failed (reported with it); `poll` drops
                // its `PeerConnected`.
                let made = (admit.links.checked_sub(1)).and_then(|pos| shared.link_at(idx, pos));
                let failed = made.is_some_and(|link| {
                    let mut st = lock(&link.state);
                    shared.fail_locked(link, &mut st, FailureCause::Local, false)
                });
                if !failed {
                    shared.push_event(Event::PeerFailed {
                        peer,
                        cause: FailureCause::Local,
                    });
                }
                tracing::info!(me = %self.me, %peer, floor, "tcp transport: absent peer declared failed; only a process started later links");
            }
            return;
        }
        let Some(link) = shared.link(idx) else {
            return;
        };
        let mut st = lock(&link.state);
        // Staged ops become pending first, so that they fail with the rest.
        shared.hand_over(link, &mut st, &mut self.staged[idx]);
        if st.failed.is_some() {
            return;
        }
        // Nothing more goes to a peer declared failed but the Cut: best effort and never
        // blocking (if the peer stopped reading, it sees the connection close instead).
        st.buf.clear();
        frame::encode_cut(&mut st.buf);
        if !link.silenced.load(Ordering::Acquire) {
            let mut sent = 0;
            while let Ok(n @ 1..) = sys::send(link.fd(), &st.buf[sent..]) {
                sent += n;
                if sent == st.buf.len() {
                    break;
                }
            }
        }
        st.buf.clear();
        shared.fail_locked(link, &mut st, FailureCause::Local, false);
    }

    fn waker(&self) -> Waker {
        let shared = Arc::clone(&self.shared);
        Waker::new(move || shared.wake_driver())
    }

    fn wait(&mut self, timeout: Duration) {
        self.flush_dirty();
        self.polls = 0;
        let s = Arc::clone(&self.shared);
        if s.wake_pending.swap(false, Ordering::SeqCst)
            || s.events_len.load(Ordering::SeqCst) > 0
            || s.inbox_len.load(Ordering::SeqCst) > 0
            || self.spin(timeout)
        {
            self.release_reads();
            return;
        }
        s.driver_parked.store(true, Ordering::SeqCst);
        if s.wake_pending.swap(false, Ordering::SeqCst)
            || s.events_len.load(Ordering::SeqCst) > 0
            || s.inbox_len.load(Ordering::SeqCst) > 0
        {
            s.driver_parked.store(false, Ordering::SeqCst);
            self.release_reads();
            return;
        }
        // Block in the kernel on the wake-up eventfd and on every link's socket. Bytes that
        // arrive while the driver is blocked here wake only the driver (not the link's reader
        // thread, see `sys::Epoll`), so it must read them itself: an answer costs one thread
        // wake-up, and so does an incoming op served while the driver waits.
        let n = s.driver_ep.wait(&mut self.ready, Some(timeout));
        s.driver_parked.store(false, Ordering::SeqCst);
        s.wake_pending.store(false, Ordering::SeqCst);
        for i in 0..n {
            let token = self.ready[i].u64;
            if token == WAKEUP_TOKEN {
                s.driver.drain();
                continue;
            }
            let (idx, pos) = (
                (token & u64::from(u32::MAX)) as usize,
                (token >> 32) as usize,
            );
            let Some(link) = s.link_at(idx, pos) else {
                continue;
            };
            // Blocking on the receive buffer, not trying: if the reader thread holds it, it may
            // already be past its last read, and this wake-up went to the driver alone.
            let mut rx = lock(&link.rx);
            driver_receive(&s, link, &mut rx);
        }
        self.release_reads();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two nodes on loopback, one 4 KiB region (id 0) each.
    fn pair() -> Vec<TcpNode> {
        let ls: Vec<TcpListener> = (0..2)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
            .collect();
        let addrs: Vec<_> = ls.iter().map(|l| l.local_addr().expect("addr")).collect();
        let mut config = ClusterConfig::new(
            u64::from(std::process::id()),
            [(NodeId(0), addrs[0]), (NodeId(1), addrs[1])],
        );
        config.op_timeout = Duration::from_secs(20);
        config.heartbeat_timeout = Duration::from_secs(20);
        let handles: Vec<_> = (ls.into_iter().enumerate())
            .map(|(i, l)| {
                let config = config.clone();
                std::thread::spawn(move || {
                    let region = Region::new(RegionSpec::new(RegionId(0), 4096)).expect("region");
                    TcpNode::start_on(l, config, NodeId(i as u32), vec![region]).expect("starts")
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("start"))
            .collect()
    }

    /// A backlog of megabytes behind a full socket is sent a piece at a time from where the last
    /// send stopped (`LinkState::sent`; the sent prefix is dropped only once it is half the
    /// buffer): the peer's reader is held off (its receive-buffer lock taken here) until the
    /// sender is `QueueFull` with megabytes buffered, then let go. Everything lands in order; a
    /// sender that resent from an old position, or skipped, would corrupt the stream (checked by
    /// breaking it: the link fails).
    #[test]
    fn a_backlog_behind_a_full_socket_is_sent_on_from_where_the_last_send_stopped() {
        let mut nodes = pair();
        let peer = NodeId(1);
        let r = RegionId(0);
        let bytes: Vec<u8> = (0..2048).map(|i| (i * 131 + 7) as u8).collect();
        nodes[0]
            .dir
            .local(r)
            .expect("region")
            .write_bytes(0, &bytes)
            .expect("in bounds");
        let mut model = vec![0u8; 2048];
        let receiver = Arc::clone(&nodes[1].shared);
        let held = lock(&receiver.link(0).expect("linked").rx);
        let (len, mut i) = (1000usize, 0usize);
        loop {
            let (src, dst) = ((i * 24) % 1000, 2048 + (i * 40) % 1000);
            match nodes[0].write(
                peer,
                LocalSlice::new(r, src, len),
                RemoteAddr::new(r, dst),
                Signal::Unsignaled,
            ) {
                Ok(_) => {
                    model[dst - 2048..dst - 2048 + len].copy_from_slice(&bytes[src..src + len]);
                    i += 1;
                }
                Err(PostError::QueueFull { .. }) => break,
                Err(e) => panic!("{e}"),
            }
        }
        let backlog = lock(&nodes[0].shared.link(0).expect("linked").state)
            .buf
            .len();
        assert!(backlog >= HIGH_WATER / 2, "only {backlog} bytes backed up");
        drop(held);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let fence = loop {
            match nodes[0].fence(peer) {
                Ok(op) => break op,
                Err(PostError::QueueFull { .. }) => nodes[0].wait(Duration::from_millis(1)),
                Err(e) => panic!("{e}"),
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the backlog never drained"
            );
        };
        let mut events = [Event::PeerFailed {
            peer: NodeId(9),
            cause: FailureCause::Local,
        }; 8];
        loop {
            let n = nodes[0].poll(&mut events);
            if let Some(e) = events[..n].first() {
                assert!(
                    matches!(e, Event::Completion(c) if c.op == fence && c.result.is_ok()),
                    "unexpected {e:?}"
                );
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the fence never completed"
            );
            nodes[0].wait(Duration::from_millis(1));
        }
        let landed = nodes[1].dir.local(r).expect("region").snapshot();
        assert!(
            landed[2048..4096] == model[..],
            "the writes did not land in order"
        );
    }

    /// The fast path does not look at the link's failure flag: writes staged on it after the
    /// peer failed are failed when handed over, each once, after the `PeerFailed` (and a write
    /// after that fails at once).
    #[test]
    fn writes_staged_on_the_fast_path_after_the_peer_failed_fail_once_each_after_peer_failed() {
        let mut nodes = pair();
        let peer = NodeId(1);
        let write = |node: &mut TcpNode, i: usize| {
            node.write(
                peer,
                LocalSlice::new(RegionId(0), (i % 512) * 8, 8),
                RemoteAddr::new(RegionId(0), (i % 512) * 8),
                Signal::Unsignaled,
            )
            .expect("posted")
        };
        let mut posted = vec![write(&mut nodes[0], 0), write(&mut nodes[0], 1)];
        assert!(nodes[0].staged[0].fast_ops > 0, "the fast path is armed");
        nodes.truncate(1); // node 1 shuts down: its connection closes
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let link = nodes[0].shared.link(0).expect("linked");
        while !link.failed.load(Ordering::Acquire) {
            assert!(
                std::time::Instant::now() < deadline,
                "the peer's exit went unnoticed"
            );
            std::thread::yield_now();
        }
        for i in 2..100 {
            posted.push(write(&mut nodes[0], i));
        }
        assert_eq!(
            nodes[0].staged[0].count, 100,
            "staged on the fast path, not failed at once"
        );
        let mut events = [Event::PeerFailed {
            peer: NodeId(9),
            cause: FailureCause::Local,
        }; 64];
        let mut failed = Vec::new();
        let mut reported = 0;
        loop {
            let n = nodes[0].poll(&mut events);
            if n == 0 {
                break;
            }
            for e in &events[..n] {
                match e {
                    Event::PeerFailed { peer: p, .. } if *p == peer => reported += 1,
                    Event::Completion(c) => {
                        assert_eq!(reported, 1, "a completion before PeerFailed: {c:?}");
                        assert!(c.result.is_err(), "{c:?}");
                        failed.push(c.op);
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
        assert_eq!(reported, 1);
        assert_eq!(failed, posted, "every staged write fails once, in order");
        // Handed over: the next write takes the general path and fails at once.
        let late = write(&mut nodes[0], 100);
        let n = nodes[0].poll(&mut events);
        assert!(
            matches!(events[..n], [Event::Completion(c)] if c.op == late && c.result.is_err()),
            "{:?}",
            &events[..n]
        );
    }

    #[test]
    fn copy_out_matches_read_bytes_aligned_or_not() {
        let r = Region::new(RegionSpec::new(RegionId(0), 64)).expect("region");
        for i in 0..8 {
            r.store(i, 0x0102_0304_0506_0708u64.wrapping_mul(i as u64 + 1));
        }
        for (offset, len) in [(0, 8), (8, 16), (0, 64), (3, 8), (8, 5), (1, 62), (0, 0)] {
            let (mut a, mut b) = (vec![0u8; len], vec![0u8; len]);
            copy_out(&r, offset, &mut a);
            r.read_bytes(offset, &mut b).expect("in bounds");
            assert_eq!(a, b, "offset {offset}, len {len}");
            let mut c = vec![9u8; 3];
            append_from(&r, offset, len, &mut c);
            assert_eq!((&c[..3], &c[3..]), (&[9u8; 3][..], &b[..]));
        }
    }

    #[test]
    fn a_cached_write_route_covers_only_in_bounds_writes_between_its_regions() {
        let route = WriteRoute {
            peer: NodeId(1),
            remote: RegionId(2),
            remote_len: 64,
            local: RegionId(3),
            local_idx: 0,
            local_len: 32,
            remote_index: Some(0),
            link_idx: Some(0),
            short_end: 64,
            index: 0,
            link: 0,
        };
        let (src, dst) = (
            LocalSlice::new(RegionId(3), 24, 8),
            RemoteAddr::new(RegionId(2), 56),
        );
        assert!(route.covers(NodeId(1), src, dst));
        assert!(!route.covers(NodeId(2), src, dst), "another peer");
        assert!(!route.covers(NodeId(1), src, RemoteAddr::new(RegionId(0), 56)));
        assert!(!route.covers(NodeId(1), LocalSlice::new(RegionId(0), 24, 8), dst));
        assert!(!route.covers(NodeId(1), src, RemoteAddr::new(RegionId(2), 57)));
        assert!(!route.covers(NodeId(1), LocalSlice::new(RegionId(3), 25, 8), dst));
        let huge = RemoteAddr::new(RegionId(2), usize::MAX);
        assert!(!route.covers(NodeId(1), src, huge), "overflow");
    }

    #[test]
    fn staged_ops_are_counted_in_runs_of_consecutive_ids() {
        let mut s = Staged::default();
        assert_eq!(s.runs().count(), 0);
        // Op 0 first (the current run's initial state must not make it a run of two).
        for op in [0, 1, 2, 5, 6, 9] {
            s.add_op(op);
        }
        assert_eq!(s.runs().collect::<Vec<_>>(), [(0, 3), (5, 2), (9, 1)]);
        assert_eq!(s.count, 6);
        let mut s = Staged::default();
        for op in [4, 5, 7] {
            s.add_op(op);
        }
        assert_eq!(s.runs().collect::<Vec<_>>(), [(4, 2), (7, 1)]);
    }

    #[test]
    fn acknowledgements_come_at_most_every_quarter_of_max_outstanding() {
        assert_eq!(ack_every(65_536), ACK_EVERY);
        assert_eq!(ack_every(1 << 30), ACK_EVERY);
        assert_eq!(ack_every(4096), 1024);
        assert_eq!(ack_every(3), 1);
        assert_eq!(ack_every(1), 1);
    }

    #[test]
    fn copy_in_matches_write_bytes_aligned_or_not() {
        let spec = RegionSpec::new(RegionId(0), 64);
        let (a, b) = (
            Region::new(spec).expect("region"),
            Region::new(spec).expect("region"),
        );
        let src: Vec<u8> = (1..=64).collect();
        for (offset, len) in [(0, 8), (8, 16), (0, 64), (3, 8), (8, 5), (1, 62), (0, 0)] {
            copy_in(&a, offset, &src[..len]);
            b.write_bytes(offset, &src[..len]).expect("in bounds");
            assert_eq!(a.snapshot(), b.snapshot(), "offset {offset}, len {len}");
        }
    }
}
