//! The sans-IO replica: sessions, deduplication, reads, snapshots. It never touches a backend
//! or a socket; a driver (the [`runtime`](crate::runtime), or a simulation test) feeds it
//! requests and deliveries and carries out what it asks.

use std::collections::{BTreeMap, HashMap, VecDeque};

use squall_ordering::{Delivery, SubmitError, Upcall, View};
use squall_transport::NodeId;

use crate::machine::{StateDecoder, StateEncoder, StateMachine};
use crate::metrics::Metrics;
use crate::snapshot::Snapshot;
use crate::status::ReplicaStatus;
use crate::transfer::{CheckpointKept, LeaveReport, StateTransfer, TransferError};
use crate::wire::{Entry, ErrorCode, ReadMode, Request, Response};
use crate::{ConfigError, RestoreError};

/// The driver's tag for one request; the core hands it back with the response.
pub type Token = u64;

/// Settings of a replica's core.
///
/// ```
/// let cfg = squall_smr::CoreConfig::default();
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreConfig {
    /// Client sessions kept for deduplication. Beyond it the least recently used is evicted
    /// (deterministically, the same on every replica); a client whose session was evicted gets
    /// [`ErrorCode::SessionExpired`].
    pub max_sessions: usize,
    /// Every this many applied deliveries, a replica on a backend that keeps checkpoints
    /// ([`StateTransfer::checkpoint`]: the membership `Group` with durable epochs) hands it its
    /// snapshot (state machine, sessions, position), so that a total restart installs that
    /// and replays only the deliveries after it. 0: never (a restart replays every log).
    /// The replica's thread encodes the snapshot; the backend writes and syncs it off that
    /// thread (the membership `Group`'s writer thread), one at a time: a checkpoint still
    /// being written when the next is due delays it.
    pub snapshot_every: u64,
    /// Upcalls kept, at most, while a state is decoded off the replica's thread
    /// ([`ReplicaCore::decode_off_thread`]): the group's deliveries go on meanwhile, so the
    /// backlog grows with its throughput times the decode's length. Beyond this bound the
    /// replica stops with an error that names it (raise it, or decode on the replica's thread).
    pub max_install_backlog: usize,
    /// Upcalls kept while a state was decoded that one driver turn applies beyond the ones
    /// that arrived with it, so the backlog shrinks by this many a turn while no turn applies
    /// more than one poll's upcalls and this.
    pub install_catch_up: usize,
}

impl Default for CoreConfig {
    fn default() -> CoreConfig {
        CoreConfig {
            max_sessions: 65_536,
            snapshot_every: 0,
            max_install_backlog: 1 << 20,
            install_catch_up: 64,
        }
    }
}

impl CoreConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_sessions == 0 {
            return Err(ConfigError::new(
                "max_sessions",
                "must be at least 1 (it bounds the sessions kept for deduplication)",
            ));
        }
        if self.max_install_backlog == 0 {
            return Err(ConfigError::new(
                "max_install_backlog",
                "must be at least 1 (it bounds the upcalls kept while a state is decoded off \
                 the replica's thread)",
            ));
        }
        if self.install_catch_up == 0 {
            return Err(ConfigError::new(
                "install_catch_up",
                "must be at least 1 (else the upcalls kept while a state was decoded are \
                 never applied faster than new ones arrive)",
            ));
        }
        Ok(())
    }
}

/// A client session: the latest command applied for it and that command's response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Session {
    pub(crate) seq: u64,
    pub(crate) response: Vec<u8>,
    /// The applied index of its latest command (the LRU key).
    pub(crate) last_used: u64,
}

/// Reads waiting for an answer: their tokens and queries.
type Reads = Vec<(Token, Vec<u8>)>;

/// Who is waiting for an entry in the outbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Command { client: u64, seq: u64 },
    Read(Token),
    Barrier(u64),
}

/// The sans-IO core of a replica.
///
/// ```
/// use squall_ordering::{Delivery, Upcall};
/// use squall_smr::wire::{Request, Response};
/// use squall_smr::{CoreConfig, ReplicaCore, RestoreError, StateMachine};
/// use squall_transport::NodeId;
///
/// struct Echo;
/// impl StateMachine for Echo {
///     fn apply(&mut self, c: &[u8]) -> Vec<u8> { c.to_vec() }
///     fn query(&self, q: &[u8]) -> Vec<u8> { q.to_vec() }
///     fn snapshot(&self) -> Vec<u8> { Vec::new() }
///     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
/// }
///
/// let mut core = ReplicaCore::new(NodeId(0), Echo, CoreConfig::default())?;
/// core.request(1, Request::Command { client: 9, seq: 1, acked: 0, payload: b"hi".to_vec() });
/// // The driver submits the entry to its backend; here we "deliver" it straight back.
/// let entry = core.outgoing().unwrap().to_vec();
/// core.submitted();
/// core.upcall(Upcall::Deliver(Delivery { position: 0, sender: NodeId(0), payload: entry }));
/// assert_eq!(core.take_replies(), vec![(1, Response::Ok(b"hi".to_vec()))]);
/// # Ok::<(), squall_smr::ConfigError>(())
/// ```
pub struct ReplicaCore<S> {
    me: NodeId,
    sm: S,
    cfg: CoreConfig,
    /// Deliveries applied (commands, reads, barriers and undecodable entries alike).
    applied: u64,
    sessions: HashMap<u64, Session>,
    /// `last_used` -> client, for eviction.
    lru: BTreeMap<u64, u64>,
    /// Commands this replica submitted (or was asked for) and whose response is owed.
    pending: HashMap<(u64, u64), Vec<Token>>,
    /// Barrier-mode reads that arrived since the last barrier was queued.
    reads_waiting: Reads,
    /// Barriers queued or in flight, oldest first, with the reads each one serves.
    barriers: VecDeque<(u64, Reads)>,
    next_barrier: u64,
    /// Ordered reads in flight, by token.
    ordered_reads: HashMap<Token, ()>,
    outbox: VecDeque<(Vec<u8>, Owner)>,
    replies: Vec<(Token, Response)>,
    wedged: bool,
    /// A joining replica: no state until a transfer installs one.
    joining: bool,
    /// A replica on a backend restarting from its durable logs: why it cannot serve yet.
    restarting: Option<String>,
    stopped: Option<String>,
    /// The backend stopped for good: why, and in which phase (the replica stopped too).
    backend_stopped: Option<BackendStopped>,
    /// The backend accepted this replica's leave: its stop is the leave completing.
    leaving: bool,
    /// While leaving: the backend's last [`StateTransfer::leave_status`] (logged on change).
    leave_status: Option<LeaveReport>,
    /// The last view the backend reported (for [`status`](Self::status)).
    view: Option<View>,
    /// The position of the latest checkpoint, or of the state installed last.
    checkpointed: u64,
    /// The position at which the backend last refused a checkpoint (asked again only past it).
    checkpoint_refused: Option<u64>,
    /// The backend keeps no checkpoints: never asked again.
    checkpoints_off: bool,
    /// The position of the checkpoint the backend is writing (no other is asked for).
    checkpoint_pending: Option<u64>,
    /// The driver decodes transferred states off the replica's thread
    /// ([`decode_off_thread`](Self::decode_off_thread)).
    decode_off_thread: bool,
    /// A state to decode off the replica's thread, not yet taken by the driver.
    install_job: Option<InstallJob<S>>,
    /// The position and size of the state being decoded off the replica's thread.
    installing: Option<(u64, usize)>,
    /// Upcalls that came while a state was decoded, in order, applied once it is installed.
    backlog: VecDeque<Upcall<Delivery>>,
    /// Whether the backlog's first upcall is the view whose state was decoded: once the
    /// state is installed it is applied as is, not offered to the backend for a state again.
    backlog_view_first: bool,
    /// The driver encodes the state it serves to joiners off the replica's thread
    /// ([`serve_off_thread`](Self::serve_off_thread)).
    serve_off_thread: bool,
    /// A state to encode off the replica's thread for a joiner, not yet taken by the driver.
    serve_job: Option<ServeJob>,
    /// A state for a joiner is being encoded off the replica's thread (from its capture until
    /// [`provide_encoded`](Self::provide_encoded)).
    serving: bool,
    /// A state encoded off the thread that no joiner could take yet (the view was changing,
    /// or no joiner of the new view asked yet): provided when one asks, while it still fits
    /// ([`EncodedState::fits`]).
    encoded: Option<EncodedState>,
    /// Off-thread encodes lost in a row (the encoder panicked, no thread could be started).
    serve_losses: u32,
    /// The next serve is encoded on the replica's thread: the last off-thread encode was lost,
    /// or the last [`MAX_STALE_SERVES`] were stale.
    serve_inline_next: bool,
    /// States encoded off the thread dropped as stale in a row: a state provided or refused
    /// resets it, and so does a poll in a later view than the last drop at which the replica
    /// could serve and no joiner asked (s24).
    serve_stale: u32,
    /// The [`view_changes`](Self::view_changes) count at the last stale drop.
    stale_in: u64,
    /// `View` and `Wedged` upcalls applied so far: a state encoded off the thread is provided
    /// in a later view only if nothing was delivered since its capture.
    view_changes: u64,
    /// What the backend's [`StateTransfer::holds_state`] answered after the previous poll: a
    /// change from `true` to `false` while this replica holds a state drops it (s23).
    backend_held: bool,
    /// The [`view_changes`](Self::view_changes) count at which the backend last refused a
    /// state for a joiner: no state is offered again until the next `Wedged` or `View` upcall
    /// (each refused state was encoded whole; a retry at every poll burned that cost again).
    refused_in: Option<u64>,
    metrics: Metrics,
}

/// A delivery that reached a replica at another position than the one it is at: the backend
/// broke [`StateTransfer`]'s contract (positions count every delivery from 0; a state handed
/// over at a view says where the deliveries that follow start). Applying it would skip or
/// repeat positions and silently diverge, so [`ReplicaCore::upcalls_from`] stops the replica
/// with this error's message instead and applies nothing more.
///
/// ```
/// use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
/// use squall_smr::wire::{ErrorCode, ReadMode, Request, Response};
/// use squall_smr::{CoreConfig, PositionMismatch, ReplicaCore, RestoreError, StateMachine, StateTransfer, TransferError};
/// use squall_transport::{NodeId, Waker};
/// # struct Nop;
/// # impl StateMachine for Nop {
/// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
/// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
/// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
/// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
/// # }
/// # struct Member;
/// # impl TotalOrder for Member {
/// #     fn me(&self) -> NodeId { NodeId(0) }
/// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::WindowFull) }
/// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
/// #     fn wait(&mut self, t: std::time::Duration) { std::thread::park_timeout(t) }
/// #     fn waker(&self) -> Waker { Waker::noop() }
/// # }
/// # impl StateTransfer for Member {
/// #   fn holds_state(&self) -> bool { true }
/// #   fn state_wanted(&self) -> bool { false }
/// #   fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
/// #   fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
/// # }
/// let mut core = ReplicaCore::new(NodeId(0), Nop, CoreConfig::default())?;
/// // At position 0, handed position 3: positions 0 to 2 would be skipped.
/// let d = Delivery { position: 3, sender: NodeId(1), payload: Vec::new() };
/// core.upcalls_from(&mut Member, [Upcall::Deliver(d)]);
/// assert_eq!(core.applied(), 0);
/// core.request(1, Request::Read { mode: ReadMode::Local, query: Vec::new() });
/// let why = PositionMismatch { position: 3, applied: 0 }.to_string();
/// assert!(matches!(&core.take_replies()[..],
///     [(1, Response::Error { code: ErrorCode::Unavailable, message })] if message.contains(&why)));
/// # Ok::<(), squall_smr::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "a delivery at position {position} reached a replica at position {applied}: applying it \
     would skip or repeat positions"
)]
pub struct PositionMismatch {
    /// The delivery's position.
    pub position: u64,
    /// The replica's position: the deliveries it applied.
    pub applied: u64,
}

/// A replica's backend stopped for good ([`StateTransfer::stopped`], or a
/// [`SubmitError::Stopped`] answer to a submission): its group lost its majority, lost a
/// shard, failed a log write, refused a joiner's state, ...; or the replica stopped itself
/// on a failure of its own ([`StopPhase::Replica`], [`ReplicaCore::stop`]). The replica can
/// apply nothing more, so [`ReplicaCore::upcalls_from`] (or [`ReplicaCore::refused`]) stops it with this
/// error, whatever it was doing ([`StopPhase`]): every request owed an answer, and every
/// later one, is answered [`ErrorCode::Unavailable`] with this message; the runtime's thread
/// ends ([`RuntimeError::BackendStopped`](crate::RuntimeError::BackendStopped)). Starting the
/// replica again is the operator's step (with the cause removed: `reason` says what it is).
///
/// ```
/// use squall_smr::{BackendStopped, StopPhase};
/// let e = BackendStopped { reason: "the state of 4096 bytes is too large".into(), phase: StopPhase::Joining };
/// assert!(e.to_string().contains("join failed") && e.to_string().contains("4096 bytes"));
/// let e = BackendStopped { reason: "lost its majority".into(), phase: StopPhase::Member };
/// assert!(e.to_string().contains("backend stopped") && e.to_string().contains("majority"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", match phase {
    StopPhase::Joining => format!(
        "this replica's join failed: its group stopped before the state transfer completed: {reason}"),
    StopPhase::Restarting => format!(
        "this replica's restart failed: its group stopped before the restart completed: {reason}"),
    StopPhase::Starting => format!(
        "this replica's backend had stopped before the replica started: {reason}"),
    StopPhase::Member => format!("this replica's backend stopped: {reason}"),
    StopPhase::Replica => format!("this replica stopped itself: {reason}"),
})]
pub struct BackendStopped {
    /// The backend's stop reason.
    pub reason: String,
    /// What the replica was doing when its backend stopped.
    pub phase: StopPhase,
}

/// What a replica was doing when its backend stopped ([`BackendStopped`]).
///
/// ```
/// assert_ne!(squall_smr::StopPhase::Member, squall_smr::StopPhase::Joining);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopPhase {
    /// Serving: it held the group's state.
    Member,
    /// Joining: its state transfer had not completed (it never held a state).
    Joining,
    /// Restarting from durable logs: its restart had not completed.
    Restarting,
    /// The backend had stopped before the replica started (the runtime found it stopped).
    Starting,
    /// Not the backend: the replica stopped itself ([`ReplicaCore::stop`]) on a failure of its
    /// own: a delivery at the wrong position ([`PositionMismatch`]), a transferred state it
    /// cannot install, more upcalls kept during a decode than
    /// [`CoreConfig::max_install_backlog`]. It ends the runtime's thread like a backend's stop
    /// (s24); `reason` says what failed. Also the runtime's driver thread panicking (s26).
    Replica,
}

/// A transferred state to decode off the replica's thread ([`ReplicaCore::take_install`]):
/// the backend's bytes and the state machine's [`StateDecoder`]. [`run`](Self::run) on any
/// thread, it checks and decodes the replica [`Snapshot`] and builds the new state machine;
/// [`ReplicaCore::install_decoded`] swaps the result in.
///
/// ```
/// use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall, View};
/// use squall_smr::{CoreConfig, ReplicaCore, RestoreError, StateDecoder, StateMachine, StateTransfer, TransferError};
/// use squall_transport::{NodeId, Waker};
/// # #[derive(Default)] struct Count(u64);
/// # impl StateMachine for Count {
/// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { self.0 += 1; Vec::new() }
/// #     fn query(&self, _: &[u8]) -> Vec<u8> { self.0.to_le_bytes().to_vec() }
/// #     fn snapshot(&self) -> Vec<u8> { self.0.to_le_bytes().to_vec() }
/// #     fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> {
/// #         self.0 = u64::from_le_bytes(s.try_into().map_err(|_| RestoreError::new("8 bytes"))?);
/// #         Ok(())
/// #     }
///       fn snapshot_decoder(&self) -> Option<StateDecoder<Count>> {
///           Some(Box::new(|s: &[u8]| { let mut c = Count(0); c.restore(s).map(|()| c) }))
///       }
/// # }
/// /// A joiner's backend: the state comes with the first view.
/// struct Joiner(Option<(u64, Vec<u8>)>);
/// # impl TotalOrder for Joiner {
/// #     fn me(&self) -> NodeId { NodeId(1) }
/// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::WindowFull) }
/// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
/// #     fn wait(&mut self, t: std::time::Duration) { std::thread::park_timeout(t) }
/// #     fn waker(&self) -> Waker { Waker::noop() }
/// # }
/// impl StateTransfer for Joiner {
///     fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { self.0.take() }
/// #   fn holds_state(&self) -> bool { false }
/// #   fn state_wanted(&self) -> bool { false }
/// #   fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
///     // ...
/// }
/// let member = ReplicaCore::new(NodeId(0), Count(7), CoreConfig::default())?;
/// let mut joiner = ReplicaCore::new(NodeId(1), Count(0), CoreConfig::default())?;
/// joiner.await_state();
/// joiner.decode_off_thread();
/// let mut backend = Joiner(Some((0, member.snapshot().encode())));
/// let view = View { id: 1, members: vec![NodeId(0), NodeId(1)], leader: Some(NodeId(0)) };
/// let command = squall_smr::wire::Entry::Command { client: 1, seq: 1, acked: 0, payload: b"+" };
/// let one = |position| Upcall::Deliver(Delivery { position, sender: NodeId(0), payload: command.encode() });
/// joiner.upcalls_from(&mut backend, [Upcall::View(view), one(0)]);
/// let job = joiner.take_install().expect("the state is decoded off the replica's thread");
/// assert!(joiner.is_installing() && joiner.applied() == 0, "position 0 is kept for after it");
/// assert_eq!((job.position(), joiner.backlog()), (0, 2), "the view and position 0 are kept");
/// assert_eq!(job.state_bytes(), member.snapshot().encode().len());
/// let decoded = std::thread::spawn(move || job.run()).join().unwrap();
/// joiner.install_decoded(decoded);
/// joiner.upcalls_from(&mut backend, std::iter::empty());
/// assert_eq!((joiner.state().0, joiner.applied()), (8, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct InstallJob<S> {
    position: u64,
    bytes: Vec<u8>,
    decode: StateDecoder<S>,
}

impl<S> InstallJob<S> {
    /// The position the state was taken at (the backend's next delivery). (Example: see
    /// [`InstallJob`].)
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The size of the encoded state. (Example: see [`InstallJob`].)
    pub fn state_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Decodes the state (on the calling thread): the checks and errors of
    /// [`ReplicaCore::install_transferred`], in its order, with the state machine's
    /// [`StateDecoder`] in place of [`StateMachine::restore`]. (Example: see [`InstallJob`].)
    pub fn run(self) -> DecodedState<S> {
        let start = std::time::Instant::now();
        let result = Snapshot::decode(&self.bytes)
            .map_err(TransferError::from)
            .and_then(|mut snapshot| {
                if snapshot.applied != self.position {
                    return Err(TransferError::Position {
                        snapshot: snapshot.applied,
                        position: self.position,
                    });
                }
                let state = std::mem::take(&mut snapshot.state);
                let sm = (self.decode)(&state)?;
                Ok((sm, snapshot))
            });
        DecodedState {
            position: self.position,
            bytes: self.bytes.len(),
            decode_us: start.elapsed().as_micros() as u64,
            result,
        }
    }
}

/// A state decoded by [`InstallJob::run`], for [`ReplicaCore::install_decoded`]: the new state
/// machine with the snapshot's sessions and position, or why it could not be installed.
/// (Example: see [`InstallJob`].)
pub struct DecodedState<S> {
    position: u64,
    bytes: usize,
    decode_us: u64,
    /// The machine, and the snapshot it came from (its state moved out).
    result: Result<(S, Snapshot), TransferError>,
}

impl<S> DecodedState<S> {
    /// A decode that ended without a result (its thread panicked): installing it stops the
    /// replica with `why`.
    pub(crate) fn lost(position: u64, bytes: usize, why: String) -> DecodedState<S> {
        DecodedState {
            position,
            bytes,
            decode_us: 0,
            result: Err(TransferError::Restore(RestoreError::new(why))),
        }
    }
}

/// Off-thread encodes of a joiner's state lost in a row after which a replica encodes on its
/// own thread for good ([`ReplicaCore::provide_encoded`]).
const MAX_SERVE_LOSSES: u32 = 3;

/// States encoded off the thread for joiners and dropped as stale (the view changed and
/// deliveries followed their capture) in a row, after which the next serve is encoded on the
/// replica's thread: a group that delivers and changes view during every encode would
/// otherwise starve its joiners (s24).
const MAX_STALE_SERVES: u32 = 2;

/// A state for a joiner to encode off the replica's thread ([`ReplicaCore::take_serve`]): the
/// replica's snapshot captured at a position ([`ReplicaCore::snapshot_encoder`]).
/// [`run`](Self::run) on any thread, it encodes the snapshot; [`ReplicaCore::provide_encoded`]
/// hands the bytes to the backend if a joiner still wants them.
///
/// ```
/// use std::sync::Arc;
/// use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
/// use squall_smr::{CoreConfig, ReplicaCore, RestoreError, StateEncoder, StateMachine, StateTransfer, TransferError};
/// use squall_transport::{NodeId, Waker};
/// /// Bytes kept behind an `Arc`: capturing them is a clone of the `Arc`.
/// struct Bytes(Arc<Vec<u8>>);
/// impl StateMachine for Bytes {
/// #   fn apply(&mut self, c: &[u8]) -> Vec<u8> { Arc::make_mut(&mut self.0).extend_from_slice(c); Vec::new() }
/// #   fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
/// #   fn snapshot(&self) -> Vec<u8> { self.0.to_vec() }
/// #   fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> { self.0 = Arc::new(s.to_vec()); Ok(()) }
///     fn snapshot_encoder(&self) -> Option<StateEncoder> {
///         let capture = Arc::clone(&self.0);
///         Some(Box::new(move |out: &mut Vec<u8>| out.extend_from_slice(&capture)))
///     }
///     // ...
/// }
/// /// A member's backend that a joiner asked for the state.
/// struct Asked(Option<(u64, Vec<u8>)>);
/// # impl TotalOrder for Asked {
/// #     fn me(&self) -> NodeId { NodeId(0) }
/// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::WindowFull) }
/// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
/// #     fn wait(&mut self, t: std::time::Duration) { std::thread::park_timeout(t) }
/// #     fn waker(&self) -> Waker { Waker::noop() }
/// # }
/// impl StateTransfer for Asked {
///     fn state_wanted(&self) -> bool { self.0.is_none() }
///     fn provide_state(&mut self, at: u64, state: &[u8]) -> Result<(), TransferError> {
///         self.0 = Some((at, state.to_vec()));
///         Ok(())
///     }
/// #   fn holds_state(&self) -> bool { true }
/// #   fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
///     // ...
/// }
/// let mut member = ReplicaCore::new(NodeId(0), Bytes(Arc::new(b"abc".to_vec())), CoreConfig::default())?;
/// member.serve_off_thread();
/// let mut backend = Asked(None);
/// member.upcalls_from(&mut backend, std::iter::empty());
/// let job = member.take_serve().expect("the state is encoded off the replica's thread");
/// assert!(member.is_serving() && backend.0.is_none(), "nothing provided yet");
/// let expected = member.snapshot().encode();
/// let encoded = std::thread::spawn(move || job.run()).join().unwrap();
/// assert!(member.provide_encoded(&mut backend, encoded), "still wanted: provided");
/// assert_eq!(backend.0, Some((0, expected)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ServeJob {
    position: u64,
    view_changes: u64,
    encode: StateEncoder,
}

impl std::fmt::Debug for ServeJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeJob")
            .field("position", &self.position)
            .field("view_changes", &self.view_changes)
            .finish_non_exhaustive()
    }
}

impl ServeJob {
    /// The position the state was captured at (every delivery before it is in it).
    /// (Example: see [`ServeJob`].)
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Encodes the snapshot (on the calling thread). (Example: see [`ServeJob`].)
    pub fn run(self) -> EncodedState {
        let start = std::time::Instant::now();
        let mut bytes = Vec::new();
        (self.encode)(&mut bytes);
        EncodedState {
            position: self.position,
            view_changes: self.view_changes,
            encode_us: start.elapsed().as_micros() as u64,
            result: Ok(bytes),
        }
    }

    /// An encode that ended without a result: `why`.
    pub(crate) fn lost(position: u64, view_changes: u64, why: ServeLost) -> EncodedState {
        EncodedState {
            position,
            view_changes,
            encode_us: 0,
            result: Err(why),
        }
    }

    /// What [`lost`](Self::lost) needs to report this job's loss.
    pub(crate) fn tag(&self) -> (u64, u64) {
        (self.position, self.view_changes)
    }
}

/// Why an off-thread encode of a joiner's state ended without a result
/// ([`EncodedState::lost`]). The replica serves that joiner on its own thread instead and
/// tries off the thread again next time, up to three losses in a row
/// ([`ReplicaCore::provide_encoded`]).
///
/// ```
/// use squall_smr::ServeLost;
/// let lost = ServeLost::Panicked("out of memory".into());
/// assert_eq!(lost.to_string(), "the state encoder panicked: out of memory");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum ServeLost {
    /// The state machine's encoder panicked (caught on the encoding thread).
    #[error("the state encoder panicked: {0}")]
    Panicked(String),
    /// No thread could be started to encode it.
    #[error("cannot start a thread to encode the state")]
    Spawn(#[source] std::io::Error),
    /// The encoding thread ended without sending a result.
    #[error("the encoding thread ended without a result")]
    Vanished,
}

/// A state for a joiner encoded by [`ServeJob::run`], for [`ReplicaCore::provide_encoded`].
/// (Example: see [`ServeJob`].)
pub struct EncodedState {
    position: u64,
    view_changes: u64,
    encode_us: u64,
    /// The encoded snapshot, or why there is none.
    result: Result<Vec<u8>, ServeLost>,
}

impl std::fmt::Debug for EncodedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("EncodedState");
        d.field("position", &self.position)
            .field("view_changes", &self.view_changes)
            .field("encode_us", &self.encode_us);
        match &self.result {
            Ok(bytes) => d.field("bytes", &bytes.len()),
            Err(lost) => d.field("lost", lost),
        };
        d.finish()
    }
}

impl EncodedState {
    /// The position the state was captured at. (Example: see [`ServeJob`].)
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Why the encode ended without a result, if it did (see [`ServeLost`]).
    /// (Example: see [`ServeJob`].)
    pub fn lost(&self) -> Option<&ServeLost> {
        self.result.as_ref().err()
    }

    /// Whether this state may still be handed to a joiner of a replica that has applied
    /// `applied` deliveries after `view_changes` `View`/`Wedged` upcalls: in the view it was
    /// captured in (the group checks the position), or in a later one if nothing was
    /// delivered since its capture. A state at position `P` reflects every delivery before
    /// `P` whichever view it is handed over in, and a later view's first position is at
    /// least `P` when nothing was delivered after it; the group refuses any position below
    /// its view's first.
    fn fits(&self, applied: u64, view_changes: u64) -> bool {
        self.view_changes == view_changes || self.position == applied
    }
}

impl<S: StateMachine> ReplicaCore<S> {
    /// A core for replica `me` around a fresh state machine.
    pub fn new(me: NodeId, sm: S, cfg: CoreConfig) -> Result<ReplicaCore<S>, ConfigError> {
        cfg.validate()?;
        Ok(ReplicaCore {
            me,
            sm,
            cfg,
            applied: 0,
            sessions: HashMap::new(),
            lru: BTreeMap::new(),
            pending: HashMap::new(),
            reads_waiting: Vec::new(),
            barriers: VecDeque::new(),
            next_barrier: 0,
            ordered_reads: HashMap::new(),
            outbox: VecDeque::new(),
            replies: Vec::new(),
            wedged: false,
            joining: false,
            restarting: None,
            stopped: None,
            backend_stopped: None,
            leaving: false,
            leave_status: None,
            view: None,
            checkpointed: 0,
            checkpoint_refused: None,
            checkpoints_off: false,
            checkpoint_pending: None,
            decode_off_thread: false,
            install_job: None,
            installing: None,
            backlog: VecDeque::new(),
            backlog_view_first: false,
            serve_off_thread: false,
            serve_job: None,
            serving: false,
            encoded: None,
            serve_losses: 0,
            serve_inline_next: false,
            serve_stale: 0,
            stale_in: 0,
            view_changes: 0,
            backend_held: false,
            refused_in: None,
            metrics: Metrics::default(),
        })
    }

    /// The replica's counters (shared: clone the handle to read them from another thread).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Consumes the core and returns its state machine.
    pub fn into_state(self) -> S {
        self.sm
    }

    /// The state machine (for inspection; change it only through commands).
    pub fn state(&self) -> &S {
        &self.sm
    }

    /// How many deliveries this replica has applied (its position in the replicated log).
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Whether the backend is wedged (a view change is under way): requests are answered
    /// [`ErrorCode::Unavailable`] until a new view is installed.
    pub fn is_wedged(&self) -> bool {
        self.wedged
    }

    /// Takes a client request tagged `token`. Answers at once what it can (local reads,
    /// duplicates of applied commands, refusals); queues the rest for the backend.
    pub fn request(&mut self, token: Token, req: Request) {
        if let Some(reason) = self.unavailable() {
            self.reply(token, error(ErrorCode::Unavailable, reason));
            return;
        }
        match req {
            Request::Command {
                client,
                seq,
                acked,
                payload,
            } => {
                if let Some(s) = self.sessions.get(&client) {
                    if s.seq == seq {
                        self.metrics.add(&self.metrics.duplicates, 1);
                        let r = Response::Ok(s.response.clone());
                        self.reply(token, r);
                        return;
                    }
                    if s.seq > seq {
                        self.reply(token, stale(client, seq, s.seq));
                        return;
                    }
                }
                let owner = Owner::Command { client, seq };
                self.pending.entry((client, seq)).or_default().push(token);
                // A retry submits the command again unless it is still queued here: the first
                // copy may have been lost (forwarded to a leader that crashed), and a second
                // copy is harmless, since the session table applies it once.
                if !self.outbox.iter().any(|(_, o)| *o == owner) {
                    let entry = Entry::Command {
                        client,
                        seq,
                        acked,
                        payload: &payload,
                    };
                    self.outbox.push_back((entry.encode(), owner));
                }
            }
            Request::Read { mode, query } => match mode {
                ReadMode::Local => {
                    self.metrics.add(&self.metrics.reads_local, 1);
                    let r = Response::Ok(self.sm.query(&query));
                    self.reply(token, r);
                }
                ReadMode::Ordered => {
                    let entry = Entry::Read {
                        replica: self.me.0,
                        id: token,
                        query: &query,
                    };
                    self.outbox.push_back((entry.encode(), Owner::Read(token)));
                    self.ordered_reads.insert(token, ());
                }
                ReadMode::Barrier => self.reads_waiting.push((token, query)),
            },
        }
    }

    /// Puts every barrier-mode read taken since the last call behind one new barrier. A driver
    /// calls this after taking a batch of requests, so concurrent reads share a barrier.
    pub fn flush_reads(&mut self) {
        if self.reads_waiting.is_empty() {
            return;
        }
        let id = self.next_barrier;
        self.next_barrier += 1;
        let reads = std::mem::take(&mut self.reads_waiting);
        let entry = Entry::Barrier {
            replica: self.me.0,
            id,
        };
        self.outbox.push_back((entry.encode(), Owner::Barrier(id)));
        self.barriers.push_back((id, reads));
        self.metrics.add(&self.metrics.barriers, 1);
    }

    /// The next entry to submit to the backend, if any. Call [`submitted`](Self::submitted)
    /// when the backend took it, or [`refused`](Self::refused) when it did not.
    pub fn outgoing(&self) -> Option<&[u8]> {
        self.outbox.front().map(|(e, _)| e.as_slice())
    }

    /// The backend took the entry [`outgoing`](Self::outgoing) returned.
    pub fn submitted(&mut self) {
        self.outbox.pop_front();
    }

    /// The backend refused the entry [`outgoing`](Self::outgoing) returned. Returns whether to
    /// try again later (flow control, a wedge): then the entry stays queued.
    pub fn refused(&mut self, err: &SubmitError) -> bool {
        match err {
            SubmitError::WindowFull | SubmitError::Wedged => {
                self.metrics.add(&self.metrics.submit_retries, 1);
                if matches!(err, SubmitError::Wedged) {
                    self.wedge();
                }
                true
            }
            SubmitError::TooLarge { .. } | SubmitError::NotASender(_) => {
                let code = if matches!(err, SubmitError::TooLarge { .. }) {
                    ErrorCode::TooLarge
                } else {
                    ErrorCode::Unavailable
                };
                if let Some((_, owner)) = self.outbox.pop_front() {
                    self.fail_owner(owner, code, &err.to_string());
                }
                false
            }
            SubmitError::Stopped(reason) => {
                self.stop_backend(reason.clone());
                false
            }
        }
    }

    /// Takes what the backend reported. Deliveries are applied in order.
    pub fn upcall(&mut self, upcall: Upcall<Delivery>) {
        match upcall {
            Upcall::Deliver(d) => self.deliver(&d),
            Upcall::Durable(_) => {}
            Upcall::View(v) => {
                tracing::info!(replica = %self.me, view = v.id, members = ?v.members, "new view");
                self.view_changes += 1;
                self.wedged = false;
                self.view = Some(v);
            }
            Upcall::Wedged => {
                self.view_changes += 1;
                self.wedge();
            }
            Upcall::Discarded(entry) => {
                // A view change dropped it; submit it again with its owner, if still owed.
                if let Some(owner) = self.owner_of(&entry) {
                    self.outbox.push_back((entry, owner));
                }
            }
        }
    }

    /// Stops the replica for good with `reason` (the core uses it for a failure of its own: a
    /// delivery at the wrong position, a state it cannot install, a decode's backlog above
    /// [`CoreConfig::max_install_backlog`]): every request owed an answer gets
    /// [`ErrorCode::Unavailable`], and so does every later one. It is reported as
    /// [`BackendStopped`] with [`StopPhase::Replica`] ([`backend_stopped`](Self::backend_stopped)),
    /// unless the replica was stopped so already: a driver ends its loop as after a backend's
    /// stop.
    ///
    /// ```
    /// use squall_smr::{CoreConfig, ReplicaCore, RestoreError, StateMachine, StopPhase};
    /// use squall_transport::NodeId;
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// let mut core = ReplicaCore::new(NodeId(1), Nop, CoreConfig::default())?;
    /// core.stop("the transferred state does not decode".into());
    /// let e = core.backend_stopped().expect("a stop of its own is reported");
    /// assert_eq!(e.phase, StopPhase::Replica);
    /// assert!(e.to_string().contains("stopped itself"));
    /// # Ok::<(), squall_smr::ConfigError>(())
    /// ```
    pub fn stop(&mut self, reason: String) {
        self.stop_backend_in(reason, StopPhase::Replica);
    }

    /// Like [`stop`](Self::stop), for an orderly shutdown (logged as such).
    pub(crate) fn halt(&mut self, reason: String) {
        self.stopped = Some(reason.clone());
        self.fail_all(&reason);
    }

    /// Responses ready to be sent, with their tokens.
    pub fn take_replies(&mut self) -> Vec<(Token, Response)> {
        std::mem::take(&mut self.replies)
    }

    /// Appends ready responses to `out` (no allocation when `out` has room).
    pub fn drain_replies(&mut self, out: &mut Vec<(Token, Response)>) {
        out.append(&mut self.replies);
    }

    /// Forgets a request whose client went away (its token will not be answered).
    pub fn cancel(&mut self, token: Token) {
        self.ordered_reads.remove(&token);
        self.reads_waiting.retain(|(t, _)| *t != token);
        for (_, reads) in &mut self.barriers {
            reads.retain(|(t, _)| *t != token);
        }
        self.pending.retain(|_, tokens| {
            tokens.retain(|t| *t != token);
            !tokens.is_empty()
        });
    }

    /// The replica's state as a snapshot: the state machine, the sessions, and the position.
    pub fn snapshot(&self) -> Snapshot {
        let mut sessions: Vec<(u64, Session)> =
            self.sessions.iter().map(|(c, s)| (*c, s.clone())).collect();
        sessions.sort_by_key(|(c, _)| *c);
        Snapshot {
            applied: self.applied,
            sessions,
            state: self.sm.snapshot(),
        }
    }

    /// The replica's snapshot as an encoder to run on another thread, if its state machine
    /// captures its state cheaply ([`StateMachine::snapshot_encoder`]): called (once, on any
    /// thread) it appends exactly [`snapshot`](Self::snapshot)`().encode()` as of now. The
    /// sessions are copied now (bounded by `max_sessions`); the state machine's state is
    /// whatever its capture shares.
    ///
    /// ```
    /// use squall_smr::{CoreConfig, ReplicaCore, RestoreError, StateEncoder, StateMachine};
    /// use squall_transport::NodeId;
    /// # struct Bytes(Vec<u8>);
    /// # impl StateMachine for Bytes {
    /// #     fn apply(&mut self, c: &[u8]) -> Vec<u8> { self.0.extend_from_slice(c); Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { self.0.clone() }
    /// #     fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> { self.0 = s.to_vec(); Ok(()) }
    /// #     fn snapshot_encoder(&self) -> Option<StateEncoder> {
    /// #         let c = self.0.clone();
    /// #         Some(Box::new(move |out: &mut Vec<u8>| out.extend_from_slice(&c)))
    /// #     }
    /// # }
    /// let core = ReplicaCore::new(NodeId(0), Bytes(b"abc".to_vec()), CoreConfig::default())?;
    /// let encode = core.snapshot_encoder().expect("the machine captures its state");
    /// let mut out = Vec::new();
    /// encode(&mut out);
    /// assert_eq!(out, core.snapshot().encode());
    /// # Ok::<(), squall_smr::ConfigError>(())
    /// ```
    pub fn snapshot_encoder(&self) -> Option<StateEncoder> {
        let state = self.sm.snapshot_encoder()?;
        let applied = self.applied;
        let mut sessions: Vec<(u64, Session)> =
            self.sessions.iter().map(|(c, s)| (*c, s.clone())).collect();
        sessions.sort_by_key(|(c, _)| *c);
        Some(Box::new(move |out: &mut Vec<u8>| {
            crate::snapshot::encode_with(applied, &sessions, out, state)
        }))
    }

    /// Replaces the state with `snapshot` (state transfer to a joiner, or a restart): the next
    /// delivery fed to this core must be the one after the snapshot's position. Requests owed
    /// an answer are answered [`ErrorCode::Unavailable`] (their entries may be lost).
    pub fn restore(&mut self, snapshot: &Snapshot) -> Result<(), RestoreError> {
        self.sm.restore(&snapshot.state)?;
        self.adopt(snapshot);
        Ok(())
    }

    /// Takes `snapshot`'s position and sessions (its state machine is installed already).
    fn adopt(&mut self, snapshot: &Snapshot) {
        self.applied = snapshot.applied;
        self.checkpointed = snapshot.applied;
        self.sessions = snapshot.sessions.iter().cloned().collect();
        self.lru = self
            .sessions
            .iter()
            .map(|(c, s)| (s.last_used, *c))
            .collect();
        self.fail_all("the replica restored a snapshot; retry");
    }

    /// Marks this replica as *joining*: it holds no state (the backend admits it and will
    /// transfer one). Until [`install_transferred`](Self::install_transferred) it answers every
    /// request [`ErrorCode::Unavailable`] and applies nothing.
    pub fn await_state(&mut self) {
        self.joining = true;
    }

    /// The backend stopped holding the state while this replica held one (s23: its group
    /// switched into a restart and joins again by transfer, docs/MEMBERSHIP.md, forty-first
    /// part): the replica's state is void from here on. It awaits the transferred state as a
    /// joiner does: every request owed an answer, and every later one, is answered
    /// [`ErrorCode::Unavailable`], and nothing is applied, served or checkpointed until the
    /// state that the backend hands over at a view is installed. The old state machine stays
    /// in memory, unread, until that install replaces it.
    fn drop_state(&mut self) {
        tracing::warn!(replica = %self.me, applied = self.applied,
            "the backend no longer holds the state (its group joins again): awaiting a transfer");
        self.joining = true;
        self.metrics.add(&self.metrics.states_dropped, 1);
        self.fail_all(
            "this replica's group is joining again: its state transfer has not completed; \
             retry at another replica",
        );
    }

    /// Whether this replica is waiting for a transferred state.
    pub fn is_joining(&self) -> bool {
        self.joining
    }

    /// Why this replica's backend stopped for good, if it did ([`BackendStopped`]: checked
    /// by [`upcalls_from`](Self::upcalls_from) after every poll, and reported by
    /// [`refused`](Self::refused) for a [`SubmitError::Stopped`]), with what the replica was
    /// doing then. The replica is stopped then: a driver ends its loop.
    ///
    /// ```
    /// use squall_smr::{CoreConfig, ReplicaCore, RestoreError, StateMachine};
    /// use squall_transport::NodeId;
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// let mut core = ReplicaCore::new(NodeId(3), Nop, CoreConfig::default())?;
    /// core.await_state();
    /// assert!(core.is_joining() && core.backend_stopped().is_none());
    /// # Ok::<(), squall_smr::ConfigError>(())
    /// ```
    pub fn backend_stopped(&self) -> Option<&BackendStopped> {
        self.backend_stopped.as_ref()
    }

    /// The backend stopped for good: stops the replica with [`BackendStopped`] in the phase
    /// the replica is in (joining, restarting or serving), once. A leaving replica whose
    /// backend last reported the leave [`left`](LeaveReport::left) halts as having left
    /// instead; a leaving replica's other stops (its group lost its majority, its log failed)
    /// are failures like any member's (s27 review D1).
    fn stop_backend(&mut self, reason: String) {
        if self.has_left_backend() {
            if self.stopped.is_none() {
                tracing::info!(replica = %self.me, %reason, "left the group");
                self.halt(reason);
            }
            return;
        }
        let phase = if self.joining {
            StopPhase::Joining
        } else if self.restarting.is_some() {
            StopPhase::Restarting
        } else {
            StopPhase::Member
        };
        self.stop_backend_in(reason, phase);
    }

    /// Leaving, and the backend's last leave status says the leave completed.
    fn has_left_backend(&self) -> bool {
        self.leaving && self.leave_status.as_ref().is_some_and(|s| s.left)
    }

    /// The backend accepted this replica's request to leave its group
    /// ([`StateTransfer::leave`]): the stop that follows once the group installed a view
    /// without it (its [`leave_status`](StateTransfer::leave_status) says
    /// [`left`](LeaveReport::left)) is the leave completing, not a failure. The replica then
    /// stops as a plain [`stop`](Self::stop) does (every request answered
    /// [`ErrorCode::Unavailable`] with the backend's reason), with no [`BackendStopped`]: a
    /// driver keeps running (its state can still be read, e.g. by a snapshot) until it is
    /// shut down. Any other stop while leaving (before the backend reported the leave left)
    /// is a [`BackendStopped`] as for any member: the leave did not complete.
    ///
    /// ```
    /// use squall_ordering::SubmitError;
    /// use squall_smr::{CoreConfig, ReplicaCore, RestoreError, StateMachine};
    /// use squall_transport::NodeId;
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// let mut core = ReplicaCore::new(NodeId(2), Nop, CoreConfig::default())?;
    /// core.leaving();
    /// // No backend said the leave completed: this stop is a failure, not a leave.
    /// core.refused(&SubmitError::Stopped("minority: view 4 lost its majority".into()));
    /// assert!(core.backend_stopped().is_some() && core.left().is_none());
    /// # Ok::<(), squall_smr::ConfigError>(())
    /// ```
    pub fn leaving(&mut self) {
        self.leaving = true;
    }

    /// Takes `status`, the backend's [`StateTransfer::leave_status`] just read, as where the
    /// leave stands: after every poll, and at once when a leave is asked, so that a status
    /// asked before the next poll reports it. A status while not [`leaving`](Self::leaving)
    /// is a leave this process did not ask for (a leave resumed after a total restart), and
    /// makes the replica leaving. Each change is logged, at `warn` while held.
    pub(crate) fn note_leave_status(&mut self, status: Option<LeaveReport>) {
        if self.stopped.is_some() {
            return;
        }
        if !self.leaving && status.is_some() {
            // A leave this process did not ask for: the backend asks again, after a total
            // restart, for a leave its log holds from before (`Group`'s resumed leave).
            tracing::info!(replica = %self.me, "the backend is leaving the group, as asked before a restart");
            self.leaving = true;
        }
        if self.leaving && status != self.leave_status {
            match &status {
                Some(s) if s.held => {
                    tracing::warn!(replica = %self.me, status = %s, "leaving the group: held back");
                }
                Some(s) => tracing::info!(replica = %self.me, status = %s, "leaving the group"),
                None => {}
            }
            self.leave_status = status;
        }
    }

    /// While leaving ([`leaving`](Self::leaving), or a leave the backend reports by itself):
    /// where the leave stands as the backend last said ([`StateTransfer::leave_status`], asked
    /// after every poll; each change is logged, at `warn` while it is
    /// [`held`](LeaveReport::held)). `None` before the leave, or while the backend says
    /// nothing.
    ///
    /// ```
    /// use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    /// use squall_smr::{CoreConfig, LeaveReport, ReplicaCore, RestoreError, StateMachine};
    /// use squall_smr::{StateTransfer, TransferError};
    /// use squall_transport::{NodeId, Waker};
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// /// A backend whose leave waits for another member to hold the state.
    /// struct Held;
    /// # impl TotalOrder for Held {
    /// #     fn me(&self) -> NodeId { NodeId(1) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Ok(()) }
    /// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
    /// #     fn wait(&mut self, t: std::time::Duration) { std::thread::park_timeout(t) }
    /// #     fn waker(&self) -> Waker { Waker::noop() }
    /// # }
    /// impl StateTransfer for Held {
    /// #   fn holds_state(&self) -> bool { true }
    /// #   fn state_wanted(&self) -> bool { false }
    /// #   fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
    /// #   fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
    ///     // ...
    ///     fn leave_status(&self) -> Option<LeaveReport> {
    ///         Some(LeaveReport::held("leave held back: no other member holds the state yet"))
    ///     }
    /// }
    /// let mut core = ReplicaCore::new(NodeId(1), Nop, CoreConfig::default())?;
    /// core.leaving();
    /// core.upcalls_from(&mut Held, std::iter::empty());
    /// assert!(core.leave_status().is_some_and(|s| s.held));
    /// # Ok::<(), squall_smr::ConfigError>(())
    /// ```
    pub fn leave_status(&self) -> Option<&LeaveReport> {
        self.leave_status.as_ref()
    }

    /// Where this replica stands ([`ReplicaStatus`]): its last view, whether it serves, and
    /// where its leave stands. The role is the backend's to say
    /// ([`StateTransfer::role`]); this leaves it `None`.
    ///
    /// ```
    /// use squall_ordering::{SubmitError, Upcall, View};
    /// use squall_smr::{CoreConfig, ReplicaCore, RestoreError, StateMachine};
    /// use squall_transport::NodeId;
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// let mut core = ReplicaCore::new(NodeId(2), Nop, CoreConfig::default())?;
    /// let view = View { id: 4, members: vec![NodeId(1), NodeId(2)], leader: Some(NodeId(1)) };
    /// core.upcall(Upcall::View(view.clone()));
    /// let s = core.status();
    /// assert!(s.serving && s.view == Some(view));
    /// core.leaving();
    /// core.refused(&SubmitError::Stopped("minority: view 4 lost its majority".into()));
    /// let s = core.status();
    /// assert!(!s.serving && s.leaving && s.left.is_none());
    /// assert!(s.stopped.as_deref().is_some_and(|r| r.contains("minority")));
    /// # Ok::<(), squall_smr::ConfigError>(())
    /// ```
    pub fn status(&self) -> ReplicaStatus {
        let (left, stopped) = match (
            &self.stopped,
            self.leaving && self.backend_stopped.is_none(),
        ) {
            (Some(why), true) => (Some(why.clone()), None),
            (Some(why), false) => (None, Some(why.clone())),
            (None, _) => (None, None),
        };
        ReplicaStatus {
            view: self.view.clone(),
            role: None,
            serving: !self.joining
                && self.restarting.is_none()
                && !self.wedged
                && self.stopped.is_none()
                && self.backend_stopped.is_none(),
            joining: self.joining,
            restarting: self.restarting.clone(),
            wedged: self.wedged,
            leaving: self.leaving,
            leave: self.leave_status.clone(),
            left,
            stopped,
        }
    }

    /// The leave completed ([`leaving`](Self::leaving), then the backend's stop after it
    /// reported the leave [`left`](LeaveReport::left)): the backend's reason. `None` while
    /// the replica is a member, and for any other stop
    /// ([`backend_stopped`](Self::backend_stopped)).
    ///
    /// ```
    /// use squall_smr::{CoreConfig, ReplicaCore, RestoreError, StateMachine};
    /// use squall_transport::NodeId;
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// let mut core = ReplicaCore::new(NodeId(2), Nop, CoreConfig::default())?;
    /// core.leaving();
    /// assert_eq!(core.left(), None, "asked, not completed");
    /// # Ok::<(), squall_smr::ConfigError>(())
    /// ```
    pub fn left(&self) -> Option<&str> {
        if self.leaving && self.backend_stopped.is_none() {
            self.stopped.as_deref()
        } else {
            None
        }
    }

    /// Stops the replica with [`BackendStopped`] (logged at `error`, counted in
    /// [`Counters::backends_stopped`] unless the phase is [`StopPhase::Replica`]) unless it
    /// was stopped so already. The runtime calls
    /// this with [`StopPhase::Starting`] for a backend that stopped before the replica
    /// started.
    ///
    /// [`Counters::backends_stopped`]: crate::Counters::backends_stopped
    pub(crate) fn stop_backend_in(&mut self, reason: String, phase: StopPhase) {
        if self.backend_stopped.is_some() {
            return;
        }
        let e = BackendStopped { reason, phase };
        if phase == StopPhase::Replica {
            tracing::error!(replica = %self.me, error = %e, "the replica stopped itself");
        } else {
            tracing::error!(replica = %self.me, error = %e, ?phase,
                "the backend stopped: stopping the replica");
            self.metrics.add(&self.metrics.backends_stopped, 1);
        }
        let message = format!("{e}; retry at another replica");
        self.backend_stopped = Some(e);
        if self.stopped.is_none() {
            self.halt(message);
        }
    }

    /// Marks this replica as *restarting*: its backend restarts from durable logs (a total
    /// restart, [`StateTransfer::restarting`]) and will replay what it logged, possibly after
    /// handing back a persisted state. Until the backend reports the restart complete (checked
    /// by [`upcalls_from`](Self::upcalls_from) after every poll) the replica applies the replay
    /// but answers every request [`ErrorCode::Unavailable`] with `reason` (local reads
    /// included: its state is not the group's yet, and its session table is incomplete).
    ///
    /// ```
    /// use squall_smr::wire::{ErrorCode, ReadMode, Request, Response};
    /// use squall_smr::{CoreConfig, ReplicaCore, RestoreError, StateMachine};
    /// use squall_transport::NodeId;
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// let mut core = ReplicaCore::new(NodeId(0), Nop, CoreConfig::default())?;
    /// core.await_restart("waiting for members [2] of its last view".into());
    /// core.request(1, Request::Read { mode: ReadMode::Local, query: Vec::new() });
    /// let replies = core.take_replies();
    /// assert!(matches!(&replies[..], [(1, Response::Error { code: ErrorCode::Unavailable, message })]
    ///     if message.contains("members [2]")));
    /// # Ok::<(), squall_smr::ConfigError>(())
    /// ```
    pub fn await_restart(&mut self, reason: String) {
        tracing::info!(replica = %self.me, %reason, "restarting from durable logs");
        self.restarting = Some(reason);
    }

    /// Whether this replica waits for its backend's restart to complete (see
    /// [`await_restart`](Self::await_restart)).
    pub fn is_restarting(&self) -> bool {
        self.restarting.is_some()
    }

    /// Installs a state transferred to this joiner: `bytes` is a member's
    /// [`Snapshot`] encoding, taken after `position` deliveries (the backend's next delivery is
    /// at `position`). Sessions come with it, so a command applied before the snapshot and
    /// delivered again after it is recognised as a duplicate here as everywhere.
    ///
    /// ```
    /// use squall_smr::{CoreConfig, ReplicaCore, RestoreError, StateMachine, TransferError};
    /// use squall_transport::NodeId;
    /// # #[derive(Default)] struct Count(u64);
    /// # impl StateMachine for Count {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { self.0 += 1; Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { self.0.to_le_bytes().to_vec() }
    /// #     fn snapshot(&self) -> Vec<u8> { self.0.to_le_bytes().to_vec() }
    /// #     fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> {
    /// #         self.0 = u64::from_le_bytes(s.try_into().map_err(|_| RestoreError::new("8 bytes"))?);
    /// #         Ok(())
    /// #     }
    /// # }
    /// let member = ReplicaCore::new(NodeId(0), Count(7), CoreConfig::default())?;
    /// let bytes = member.snapshot().encode();
    /// let mut joiner = ReplicaCore::new(NodeId(1), Count::default(), CoreConfig::default())?;
    /// joiner.await_state();
    /// assert!(matches!(
    ///     joiner.install_transferred(5, &bytes),
    ///     Err(TransferError::Position { snapshot: 0, position: 5 })
    /// ));
    /// joiner.install_transferred(0, &bytes)?;
    /// assert!(!joiner.is_joining());
    /// assert_eq!(joiner.state().0, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn install_transferred(
        &mut self,
        position: u64,
        bytes: &[u8],
    ) -> Result<(), TransferError> {
        let start = std::time::Instant::now();
        let snapshot = Snapshot::decode(bytes)?;
        if snapshot.applied != position {
            return Err(TransferError::Position {
                snapshot: snapshot.applied,
                position,
            });
        }
        self.restore(&snapshot)?;
        self.joining = false;
        self.metrics.add(&self.metrics.states_installed, 1);
        let us = start.elapsed().as_micros() as u64;
        self.metrics
            .longest_install_us
            .fetch_max(us, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(replica = %self.me, position, bytes = bytes.len(),
            sessions = snapshot.session_count(), us, "installed a transferred state");
        Ok(())
    }

    /// Lets this replica decode a transferred state off its thread: a driver that calls this
    /// takes each [`InstallJob`] from [`take_install`](Self::take_install) after
    /// [`upcalls_from`](Self::upcalls_from), runs it on another thread and hands the result
    /// to [`install_decoded`](Self::install_decoded) (the runtime,
    /// [`Replica::spawn_joinable`](crate::Replica::spawn_joinable), does). Only states whose
    /// machine has a decoder ([`StateMachine::snapshot_decoder`]) are decoded so; others are
    /// restored in [`upcalls_from`](Self::upcalls_from) as without this call. Meanwhile the
    /// replica answers every request [`ErrorCode::Unavailable`] with the reason and keeps
    /// every upcall that follows the state, in order, for after it. Once the state is in, it
    /// serves (as a replica whose backend has not handed it everything yet: a command is
    /// answered once its delivery, behind the kept ones, is applied) and applies the kept
    /// upcalls, at most one poll's upcalls and 64 more a call; it completes a restart,
    /// provides its state to a joiner and checkpoints only once none is left. (Example: see
    /// [`InstallJob`].)
    pub fn decode_off_thread(&mut self) {
        self.decode_off_thread = true;
    }

    /// The state to decode off the replica's thread, once (see
    /// [`decode_off_thread`](Self::decode_off_thread); example: see [`InstallJob`]).
    pub fn take_install(&mut self) -> Option<InstallJob<S>> {
        self.install_job.take()
    }

    /// Whether a state is being decoded off the replica's thread (from the moment
    /// [`upcalls_from`](Self::upcalls_from) took it from the backend until
    /// [`install_decoded`](Self::install_decoded); example: see [`InstallJob`]).
    pub fn is_installing(&self) -> bool {
        self.installing.is_some()
    }

    /// Upcalls kept while a state was decoded off the replica's thread, not applied yet.
    /// (Example: see [`InstallJob`].)
    pub fn backlog(&self) -> usize {
        self.backlog.len()
    }

    /// Installs a state decoded off the replica's thread ([`InstallJob::run`]): swaps the new
    /// state machine in and takes the snapshot's sessions and position, as
    /// [`install_transferred`](Self::install_transferred) does, and returns the replaced
    /// machine (the driver may drop it elsewhere). A state that could not be decoded stops
    /// the replica with the error `install_transferred` reports. A replica stopped meanwhile
    /// (its backend stopped, [`BackendStopped`]) installs nothing and returns `None`: the
    /// decoded machine is dropped. The upcalls kept meanwhile
    /// are applied by the following [`upcalls_from`](Self::upcalls_from) calls. (See
    /// [`InstallJob`] for an example.)
    pub fn install_decoded(&mut self, decoded: DecodedState<S>) -> Option<S> {
        self.installing = None;
        if let Some(why) = &self.stopped {
            // A stopped replica installs nothing: it answers every request with `why` for
            // good, and a state swapped in now would be read by nobody.
            tracing::warn!(replica = %self.me, position = decoded.position, reason = %why,
                "a decoded state reached a stopped replica: not installed");
            return None;
        }
        let DecodedState {
            position,
            bytes,
            decode_us,
            result,
        } = decoded;
        match result {
            Ok((sm, snapshot)) => {
                let start = std::time::Instant::now();
                let old = std::mem::replace(&mut self.sm, sm);
                self.adopt(&snapshot);
                self.joining = false;
                self.metrics.add(&self.metrics.states_installed, 1);
                let swap_us = start.elapsed().as_micros() as u64;
                self.metrics
                    .longest_install_us
                    .fetch_max(swap_us, std::sync::atomic::Ordering::Relaxed);
                tracing::info!(replica = %self.me, position, bytes,
                    sessions = snapshot.session_count(), us = decode_us, swap_us,
                    backlog = self.backlog.len(),
                    "installed a transferred state (decoded off the replica's thread)");
                Some(old)
            }
            Err(e) => {
                self.stop(format!("cannot install the transferred state: {e}"));
                None
            }
        }
    }

    /// Takes one poll's upcalls from a backend that transfers state, then serves a state
    /// request: the sans-IO step of [`Replica::spawn_joinable`](crate::Replica::spawn_joinable).
    ///
    /// - On a joiner's first [`Upcall::View`], the state the backend received is installed
    ///   ([`install_transferred`](Self::install_transferred)) before anything else is applied;
    ///   a state that cannot be installed stops the replica (it cannot hold a state it cannot
    ///   check). A *restarting* replica ([`await_restart`](Self::await_restart)) does the
    ///   same with the state its backend persisted (a member that entered by transfer
    ///   restarts from that state, not from position 0), so its sessions come back too.
    ///   With [`decode_off_thread`](Self::decode_off_thread) and a machine that has a
    ///   decoder, the state is handed out as an [`InstallJob`] instead, and this upcall and
    ///   every later one are kept until it is installed, then applied a slice a call.
    /// - Every upcall then goes to [`upcall`](Self::upcall), except a delivery at another
    ///   position than [`applied`](Self::applied), which stops the replica unapplied
    ///   ([`PositionMismatch`]). A state the backend offers at any `View` is installed first,
    ///   a joiner's or not.
    /// - A replica whose backend stopped for good ([`StateTransfer::stopped`]) stops with
    ///   [`BackendStopped`] naming the backend's reason and what the replica was doing
    ///   (joining, restarting or serving; see [`backend_stopped`](Self::backend_stopped)).
    /// - A replica holding a state whose backend stopped holding one (it did after the previous
    ///   poll, it does not now: its group joins again) drops it and awaits a transferred state
    ///   as a joiner does.
    /// - A restarting replica asks the backend whether the restart is still under way; once
    ///   it is not, the replica serves, or, if the backend holds no state (the group went on
    ///   without it and it joins again), waits for a transfer as a joiner does.
    /// - If a joiner asked this replica for the state and the group is not wedged, it provides
    ///   its snapshot at its current position (every delivery handed out so far is applied). A
    ///   refusal is logged and counted, and nothing is offered again until the next view
    ///   change (the joiner asks again in the next view). With
    ///   [`serve_off_thread`](Self::serve_off_thread) and a machine that captures its state,
    ///   it captures the snapshot and hands it out as a [`ServeJob`] instead (one at a time).
    ///
    /// The last two, and checkpoints, wait while a state is decoded or upcalls kept meanwhile
    /// remain.
    pub fn upcalls_from<B, I>(&mut self, backend: &mut B, upcalls: I)
    where
        B: StateTransfer + ?Sized,
        I: IntoIterator<Item = Upcall<Delivery>>,
    {
        let mut fresh = 0;
        for u in upcalls {
            if self.settling() {
                if self.backlog.len() >= self.cfg.max_install_backlog {
                    if self.stopped.is_none() {
                        self.stop(format!(
                            "more than {} upcalls (CoreConfig::max_install_backlog) arrived \
                             while a state was decoded off the replica's thread; raise the \
                             bound or decode on the replica's thread",
                            self.cfg.max_install_backlog
                        ));
                    }
                    continue;
                }
                self.backlog.push_back(u);
                fresh += 1;
            } else {
                self.take_upcall(backend, u);
            }
        }
        // What was kept while a state was decoded: as many as just arrived, and
        // `install_catch_up` more.
        let mut budget = fresh + self.cfg.install_catch_up;
        while self.installing.is_none() && budget > 0 {
            let Some(u) = self.backlog.pop_front() else {
                break;
            };
            budget -= 1;
            if std::mem::take(&mut self.backlog_view_first) {
                // The view that carried the state just installed: its state is taken.
                self.upcall(u);
            } else {
                self.take_upcall(backend, u);
            }
        }
        self.note_leave_status(backend.leave_status());
        if self.backend_stopped.is_none()
            && let Some(reason) = backend.stopped()
        {
            self.stop_backend(reason);
        }
        if self.settling() {
            return;
        }
        // Held at the previous poll, not now: the backend dropped the state it held.
        let holds = backend.holds_state();
        if std::mem::replace(&mut self.backend_held, holds)
            && !holds
            && self.restarting.is_none()
            && !self.joining
        {
            self.drop_state();
        }
        if self.restarting.is_some() {
            self.restarting = backend.restarting();
            if self.restarting.is_none() {
                tracing::info!(replica = %self.me, applied = self.applied,
                    sessions = self.sessions.len(), "restart complete");
                // The next checkpoint `snapshot_every` deliveries from here, not at once: every
                // replica of a total restart completes it about together, and writing the
                // whole state then pauses them all at their most fragile (peers judging
                // silence); the replay just applied was at most about `snapshot_every` long.
                self.checkpointed = self.applied;
                if !backend.holds_state() && !self.joining {
                    tracing::info!(replica = %self.me,
                        "the group went on without this replica: joining again by transfer");
                    self.await_state();
                }
            }
        }
        self.maybe_serve(backend);
        self.maybe_checkpoint(backend);
    }

    /// Whether this replica may provide its state to a joiner now. Not while wedged: the
    /// group refuses a state then (the joiner asks again in the next view), and encoding the
    /// whole state every driver turn of a view change is waste.
    fn can_serve(&self) -> bool {
        !self.joining
            && self.restarting.is_none()
            && !self.wedged
            && self.stopped.is_none()
            && !self.settling()
    }

    /// If a joiner asked for the state ([`StateTransfer::state_wanted`]) and none is being
    /// encoded for it: provides the state encoded off the thread that is kept, if it still
    /// fits; else provides the state at the current position, or, with
    /// [`serve_off_thread`](Self::serve_off_thread) and a machine that captures its state,
    /// captures it and hands it out as a [`ServeJob`]. Returns whether a state was provided.
    ///
    /// Nothing is offered in a view in which the backend refused a state
    /// ([`provide`](Self::provide)): the joiner's request stands all view long, and each offer
    /// encodes the whole state.
    fn maybe_serve<B: StateTransfer + ?Sized>(&mut self, backend: &mut B) -> bool {
        if self.serving || self.refused_in == Some(self.view_changes) {
            return false;
        }
        if let Some(kept) = self.encoded.take() {
            if !kept.fits(self.applied, self.view_changes) {
                self.drop_stale(&kept);
            } else if self.can_serve() && backend.state_wanted() {
                return self.provide_kept(backend, kept);
            } else {
                self.encoded = Some(kept);
                return false;
            }
        }
        if !self.can_serve() {
            return false;
        }
        if !backend.state_wanted() {
            // No joiner asks in a later view than the last stale drop: the run of drops is
            // over (in the drop's own view the next joiner may not have asked yet).
            if self.serve_stale > 0 && self.view_changes != self.stale_in {
                tracing::debug!(replica = %self.me, stale = self.serve_stale,
                    "no joiner asks: the run of stale serves ends");
                self.serve_stale = 0;
            }
            return false;
        }
        let start = std::time::Instant::now();
        let inline_once = std::mem::take(&mut self.serve_inline_next);
        if self.serve_off_thread
            && !inline_once
            && let Some(encode) = self.snapshot_encoder()
        {
            self.serving = true;
            self.serve_job = Some(ServeJob {
                position: self.applied,
                view_changes: self.view_changes,
                encode,
            });
            let us = self.serve_held(start);
            tracing::info!(replica = %self.me, position = self.applied, capture_us = us,
                "encoding the state for a joiner off the replica's thread");
            return false;
        }
        let snapshot = self.snapshot().encode();
        self.provide(backend, self.applied, snapshot, start)
    }

    /// Drops a state encoded off the thread that no longer fits (the view changed and
    /// deliveries followed its capture: it is below the new view's first position), counted
    /// in [`Counters::serves_stale`]. After [`MAX_STALE_SERVES`] in a row the next serve is
    /// encoded on the replica's thread (returns `true`: serve now): when the group delivers
    /// and changes view during every encode, no state encoded off the thread ever fits, and
    /// the joiner would wait as long as that churn lasts (s24). The inline serve holds the
    /// thread for one encode; the serve after it goes off the thread again.
    ///
    /// [`Counters::serves_stale`]: crate::Counters::serves_stale
    fn drop_stale(&mut self, stale: &EncodedState) -> bool {
        self.serve_stale += 1;
        self.stale_in = self.view_changes;
        self.metrics.add(&self.metrics.serves_stale, 1);
        if self.serve_stale < MAX_STALE_SERVES {
            tracing::info!(replica = %self.me, position = stale.position,
                applied = self.applied, encode_us = stale.encode_us, stale = self.serve_stale,
                "dropped the state encoded for a joiner: the view changed and deliveries \
                 followed its capture");
            return false;
        }
        tracing::warn!(replica = %self.me, position = stale.position,
            applied = self.applied, encode_us = stale.encode_us, stale = self.serve_stale,
            "dropped the state encoded for a joiner: the view changed and deliveries followed \
             the capture of each of the last ones; encoding the next on the replica's thread");
        self.serve_stale = 0;
        self.serve_inline_next = true;
        true
    }

    /// Hands a state encoded off the thread, which still fits, to the backend.
    fn provide_kept<B: StateTransfer + ?Sized>(
        &mut self,
        backend: &mut B,
        kept: EncodedState,
    ) -> bool {
        let EncodedState {
            position,
            view_changes,
            encode_us,
            result,
        } = kept;
        let Ok(bytes) = result else {
            return false;
        };
        let start = std::time::Instant::now();
        tracing::debug!(replica = %self.me, position, bytes = bytes.len(), encode_us,
            views_since_capture = self.view_changes - view_changes,
            "encoded the state for a joiner off the replica's thread");
        let provided = self.provide(backend, position, bytes, start);
        if provided {
            self.metrics
                .add(&self.metrics.states_provided_off_thread, 1);
        }
        provided
    }

    /// Hands `snapshot` (at `position`) to the backend for the joiner; `start`: when this
    /// step of the replica's thread began (for [`Counters::longest_serve_us`]). A refusal is
    /// counted ([`Counters::states_refused`]) and holds serving off until the next view
    /// change: [`TransferError::TooLarge`] is logged at `warn` (no retry in this view can
    /// succeed; the joiner asks again in the next view, refused again unless the state shrank
    /// or the bound was raised), any other at `info` (retried once the view changes).
    ///
    /// [`Counters::states_refused`]: crate::Counters::states_refused
    /// [`Counters::longest_serve_us`]: crate::Counters::longest_serve_us
    fn provide<B: StateTransfer + ?Sized>(
        &mut self,
        backend: &mut B,
        position: u64,
        snapshot: Vec<u8>,
        start: std::time::Instant,
    ) -> bool {
        let bytes = snapshot.len();
        let provided = backend.provide_state_owned(position, snapshot);
        let us = self.serve_held(start);
        match provided {
            Ok(()) => {
                self.serve_stale = 0;
                self.metrics.add(&self.metrics.states_provided, 1);
                tracing::info!(replica = %self.me, position, applied = self.applied,
                    bytes, us, "provided the state to a joiner");
                true
            }
            Err(e) => {
                // A refusal ends a run of stale drops as a success does: the next joiner's
                // serve starts a run of its own.
                self.serve_stale = 0;
                self.refused_in = Some(self.view_changes);
                self.metrics.add(&self.metrics.states_refused, 1);
                if matches!(e, TransferError::TooLarge { .. }) {
                    tracing::warn!(replica = %self.me, position, bytes, error = %e,
                        "the group refused the state for a joiner as too large; not offered \
                         again until the view changes");
                } else {
                    tracing::info!(replica = %self.me, position, bytes, error = %e,
                        "the group refused the state for a joiner; offered again once the \
                         view changes");
                }
                false
            }
        }
    }

    /// Counts the time since `start` as a hold of the replica's thread by a serve.
    fn serve_held(&self, start: std::time::Instant) -> u64 {
        let us = start.elapsed().as_micros() as u64;
        self.metrics
            .longest_serve_us
            .fetch_max(us, std::sync::atomic::Ordering::Relaxed);
        us
    }

    /// Lets this replica encode the state it provides to a joiner off its thread: a driver
    /// that calls this takes each [`ServeJob`] from [`take_serve`](Self::take_serve) after
    /// [`upcalls_from`](Self::upcalls_from), runs it on another thread and hands the result
    /// to [`provide_encoded`](Self::provide_encoded) (the runtime,
    /// [`Replica::spawn_joinable`](crate::Replica::spawn_joinable), does). Only a machine that
    /// captures its state ([`StateMachine::snapshot_encoder`]) is served so: the capture is
    /// taken on the replica's thread, the encoding done elsewhere; others are encoded in
    /// [`upcalls_from`](Self::upcalls_from) as without this call. One state is encoded at a
    /// time: while one is, no other is captured. (Example: see [`ServeJob`].)
    pub fn serve_off_thread(&mut self) {
        self.serve_off_thread = true;
    }

    /// The state to encode off the replica's thread for a joiner, once (see
    /// [`serve_off_thread`](Self::serve_off_thread); example: see [`ServeJob`]).
    pub fn take_serve(&mut self) -> Option<ServeJob> {
        self.serve_job.take()
    }

    /// Whether a state for a joiner is being encoded off the replica's thread (from its
    /// capture until [`provide_encoded`](Self::provide_encoded); example: see [`ServeJob`]).
    pub fn is_serving(&self) -> bool {
        self.serving
    }

    /// Provides a state encoded off the replica's thread ([`ServeJob::run`]) to the joiner,
    /// if it still fits: captured in the current view, or, after a view change (a `Wedged`
    /// or `View` upcall), with nothing delivered since its capture (the state at a position
    /// is the same whichever view it is handed over in; the backend still checks the
    /// position against its view). A state that fits but that no joiner can take now (the
    /// view is changing, or no joiner of the new view asked yet) is kept, one at most, and
    /// provided by a later [`upcalls_from`](Self::upcalls_from) when one asks; it is dropped
    /// once it no longer fits, and the state is captured anew. Returns whether the backend
    /// took a state.
    ///
    /// An encode that ended without a result ([`ServeLost`]: its thread panicked or could not
    /// be started) is logged at `warn`; the joiner is served on the replica's thread at once
    /// (if it still asks), and the next serve is encoded off the thread again. After three
    /// such losses in a row the replica encodes on its thread for good. Likewise after two
    /// states in a row dropped as stale (the view changed and deliveries followed each
    /// capture, [`Counters::serves_stale`](crate::Counters::serves_stale)): the joiner is
    /// served on the replica's thread at once, then off it again (s24: a group that changes
    /// view and delivers during every encode would otherwise starve its joiners). (Example:
    /// see [`ServeJob`].)
    pub fn provide_encoded<B: StateTransfer + ?Sized>(
        &mut self,
        backend: &mut B,
        encoded: EncodedState,
    ) -> bool {
        self.serving = false;
        if let Err(why) = &encoded.result {
            self.serve_losses += 1;
            if self.serve_losses >= MAX_SERVE_LOSSES {
                tracing::warn!(replica = %self.me, position = encoded.position, %why,
                    losses = self.serve_losses,
                    "the state for a joiner could not be encoded off the replica's thread; \
                     encoding it on the thread from now on");
                self.serve_off_thread = false;
            } else {
                tracing::warn!(replica = %self.me, position = encoded.position, %why,
                    losses = self.serve_losses,
                    "the state for a joiner could not be encoded off the replica's thread; \
                     encoding this one on the thread");
                self.serve_inline_next = true;
            }
            return self.maybe_serve(backend);
        }
        self.serve_losses = 0;
        if !encoded.fits(self.applied, self.view_changes) {
            if self.drop_stale(&encoded) {
                return self.maybe_serve(backend);
            }
            return false;
        }
        if self.can_serve() && backend.state_wanted() {
            return self.provide_kept(backend, encoded);
        }
        tracing::debug!(replica = %self.me, position = encoded.position,
            "kept the state encoded for a joiner until one asks");
        self.encoded = Some(encoded);
        false
    }

    /// Whether a state is being decoded off the replica's thread or upcalls kept meanwhile
    /// remain to be applied.
    fn settling(&self) -> bool {
        self.installing.is_some() || !self.backlog.is_empty()
    }

    /// One upcall of [`upcalls_from`](Self::upcalls_from), in order: the state a joining or
    /// restarting replica's backend offers at a view is installed first, or handed out to be
    /// decoded off the replica's thread (then this upcall is kept, first, for after it).
    ///
    /// A state offered at any `View` is taken, not only a joining or restarting replica's: a
    /// backend that hands one over replaced the replica's state (its group made it join again,
    /// s23), and the deliveries that follow start at its position. A delivery at another
    /// position than the replica's ([`PositionMismatch`]) stops the replica and is never
    /// applied. A `Wedged` from a backend that has stopped ([`StateTransfer::stopped`]: a
    /// stopping `Group` reports one) stops the replica with [`BackendStopped`] first, so the
    /// requests owed an answer get the stop's reason rather than "wedged".
    fn take_upcall<B: StateTransfer + ?Sized>(&mut self, backend: &mut B, u: Upcall<Delivery>) {
        if matches!(u, Upcall::Wedged)
            && self.backend_stopped.is_none()
            && let Some(reason) = backend.stopped()
        {
            // A stopping group reports `Wedged`: the requests owed an answer get the stop's
            // reason, not "wedged for a view change" (s24).
            self.stop_backend(reason);
        }
        if let Upcall::Deliver(d) = &u
            && !self.joining
            && d.position != self.applied
        {
            if self.stopped.is_none() {
                let e = PositionMismatch {
                    position: d.position,
                    applied: self.applied,
                };
                tracing::error!(replica = %self.me, position = d.position,
                    applied = self.applied, "{e}");
                self.stop(e.to_string());
            }
            return;
        }
        if matches!(u, Upcall::View(_))
            && let Some((position, bytes)) = backend.take_state()
        {
            if !self.joining && self.restarting.is_none() {
                tracing::warn!(replica = %self.me, applied = self.applied, position,
                    "the backend replaced this replica's state at a view: installing it");
            }
            let decode = if self.decode_off_thread {
                self.sm.snapshot_decoder()
            } else {
                None
            };
            match decode {
                Some(decode) => {
                    tracing::info!(replica = %self.me, position, bytes = bytes.len(),
                        "decoding a transferred state off the replica's thread");
                    self.installing = Some((position, bytes.len()));
                    self.install_job = Some(InstallJob {
                        position,
                        bytes,
                        decode,
                    });
                    self.backlog.push_front(u);
                    self.backlog_view_first = true;
                    return;
                }
                None => {
                    if let Err(e) = self.install_transferred(position, &bytes) {
                        self.stop(format!("cannot install the transferred state: {e}"));
                    }
                }
            }
        }
        self.upcall(u);
    }

    /// Every [`CoreConfig::snapshot_every`] applied deliveries: hands the backend the snapshot
    /// to keep ([`StateTransfer::checkpoint`]). Not while joining, restarting or stopped, nor
    /// while the previous one is still being written (its end is collected here first,
    /// [`StateTransfer::checkpoint_outcome`]); a refusal or a failed write is asked again
    /// after the next delivery, a backend that keeps none never again.
    fn maybe_checkpoint<B: StateTransfer + ?Sized>(&mut self, backend: &mut B) {
        if let Some(pending) = self.checkpoint_pending {
            match backend.checkpoint_outcome() {
                None => return,
                Some(Ok(at)) => {
                    self.checkpoint_pending = None;
                    self.checkpoint_durable(at);
                }
                Some(Err(e)) => {
                    self.checkpoint_pending = None;
                    self.checkpoint_refused = Some(self.applied);
                    tracing::warn!(replica = %self.me, position = pending, error = %e,
                        "checkpoint not made durable");
                }
            }
        }
        let every = self.cfg.snapshot_every;
        if every == 0
            || self.checkpoints_off
            || self.joining
            || self.restarting.is_some()
            || self.stopped.is_some()
            || self.applied < self.checkpointed.saturating_add(every)
            || self.checkpoint_refused == Some(self.applied)
        {
            return;
        }
        let start = std::time::Instant::now();
        // An encoder of a capture when the state machine has one (the backend encodes it off
        // this thread); the encoded bytes otherwise. `bytes` is 0 for an encoder.
        let (kept, bytes) = match self.snapshot_encoder() {
            Some(encode) => (backend.checkpoint_encoded(self.applied, encode), 0),
            None => {
                let snapshot = self.snapshot().encode();
                let bytes = snapshot.len();
                (backend.checkpoint(self.applied, snapshot), bytes)
            }
        };
        let encode_us = start.elapsed().as_micros() as u64;
        match kept {
            Ok(CheckpointKept::Durable) => self.checkpoint_durable(self.applied),
            Ok(CheckpointKept::Pending) => {
                self.checkpoint_pending = Some(self.applied);
                self.checkpoint_refused = None;
                tracing::info!(replica = %self.me, position = self.applied, bytes, encode_us,
                    us = start.elapsed().as_micros() as u64, "checkpoint started");
            }
            Ok(CheckpointKept::Never) => {
                self.checkpoints_off = true;
                tracing::debug!(replica = %self.me, "the backend keeps no checkpoints");
            }
            Err(e) => {
                self.checkpoint_refused = Some(self.applied);
                tracing::debug!(replica = %self.me, position = self.applied, error = %e,
                    "checkpoint not taken");
            }
        }
    }

    /// A checkpoint at `at` is durable: the next one is due `snapshot_every` past it.
    fn checkpoint_durable(&mut self, at: u64) {
        self.checkpointed = self.checkpointed.max(at);
        self.checkpoint_refused = None;
        self.metrics.add(&self.metrics.checkpoints, 1);
        tracing::debug!(replica = %self.me, position = at, "checkpoint durable");
    }

    fn unavailable(&self) -> Option<String> {
        if let Some(e) = &self.backend_stopped {
            return Some(format!("{e}; retry at another replica"));
        }
        if let Some(r) = &self.stopped {
            return Some(format!("the ordering backend stopped: {r}"));
        }
        if let Some((position, bytes)) = self.installing {
            return Some(format!(
                "this replica is installing a state of {bytes} bytes taken at position \
                 {position} (decoding it off its thread); retry later or at another replica"
            ));
        }
        if let Some(r) = &self.restarting {
            return Some(format!(
                "this replica is restarting from its durable logs ({r}); retry later"
            ));
        }
        if self.joining {
            return Some(
                "this replica is joining: its state transfer has not completed; retry at another replica"
                    .into(),
            );
        }
        self.wedged
            .then(|| "the group is wedged for a view change; retry at another replica".into())
    }

    fn wedge(&mut self) {
        if !self.wedged {
            tracing::warn!(replica = %self.me, "ordering wedged; failing requests over");
            self.wedged = true;
            self.fail_all("the group wedged for a view change; retry at another replica");
        }
    }

    /// Answers every owed request with `Unavailable` and empties the outbox.
    fn fail_all(&mut self, reason: &str) {
        let msg = reason.to_owned();
        let mut tokens: Vec<Token> = self.pending.drain().flat_map(|(_, t)| t).collect();
        tokens.extend(self.ordered_reads.drain().map(|(t, _)| t));
        tokens.extend(self.reads_waiting.drain(..).map(|(t, _)| t));
        tokens.extend(
            self.barriers
                .drain(..)
                .flat_map(|(_, r)| r.into_iter().map(|(t, _)| t)),
        );
        self.outbox.clear();
        tokens.sort_unstable();
        for t in tokens {
            self.reply(t, error(ErrorCode::Unavailable, msg.clone()));
        }
    }

    fn fail_owner(&mut self, owner: Owner, code: ErrorCode, msg: &str) {
        let tokens: Vec<Token> = match owner {
            Owner::Command { client, seq } => {
                self.pending.remove(&(client, seq)).unwrap_or_default()
            }
            Owner::Read(t) => self
                .ordered_reads
                .remove(&t)
                .map(|()| t)
                .into_iter()
                .collect(),
            Owner::Barrier(id) => {
                let pos = self.barriers.iter().position(|(b, _)| *b == id);
                pos.and_then(|p| self.barriers.remove(p))
                    .map(|(_, r)| r.into_iter().map(|(t, _)| t).collect())
                    .unwrap_or_default()
            }
        };
        for t in tokens {
            self.reply(t, error(code, msg.to_owned()));
        }
    }

    fn owner_of(&self, entry: &[u8]) -> Option<Owner> {
        match Entry::decode(entry).ok()? {
            Entry::Command { client, seq, .. } => self
                .pending
                .contains_key(&(client, seq))
                .then_some(Owner::Command { client, seq }),
            Entry::Read { replica, id, .. } => (replica == self.me.0
                && self.ordered_reads.contains_key(&id))
            .then_some(Owner::Read(id)),
            Entry::Barrier { replica, id } => (replica == self.me.0
                && self.barriers.iter().any(|(b, _)| *b == id))
            .then_some(Owner::Barrier(id)),
        }
    }

    fn deliver(&mut self, d: &Delivery) {
        if self.joining {
            // The backend broke its contract (a joiner reports nothing before its state):
            // applying this to an empty state would diverge, so stop instead.
            self.stop(format!(
                "delivery at position {} reached a joining replica before its state",
                d.position
            ));
            return;
        }
        let index = self.applied;
        self.applied += 1;
        let entry = match Entry::decode(&d.payload) {
            Ok(e) => e,
            Err(e) => {
                // Every replica sees the same bytes at the same position, so every replica
                // skips it: the states stay identical.
                tracing::warn!(replica = %self.me, position = d.position, sender = %d.sender,
                    error = %e, "skipping an undecodable log entry");
                self.metrics.add(&self.metrics.undecodable, 1);
                return;
            }
        };
        match entry {
            Entry::Command {
                client,
                seq,
                acked,
                payload,
            } => self.apply_command(index, client, seq, acked, payload),
            Entry::Read { replica, id, query } => {
                if replica == self.me.0 && self.ordered_reads.remove(&id).is_some() {
                    self.metrics.add(&self.metrics.reads_ordered, 1);
                    let r = Response::Ok(self.sm.query(query));
                    self.reply(id, r);
                }
            }
            Entry::Barrier { replica, id } => {
                if replica != self.me.0 {
                    return;
                }
                // Reads behind an earlier barrier that has not arrived yet are served here too:
                // this barrier was submitted after they were invoked, which is all the
                // argument needs.
                while self.barriers.front().is_some_and(|(b, _)| *b <= id) {
                    let Some((_, reads)) = self.barriers.pop_front() else {
                        break;
                    };
                    self.metrics
                        .add(&self.metrics.reads_barrier, reads.len() as u64);
                    for (t, q) in reads {
                        let r = Response::Ok(self.sm.query(&q));
                        self.reply(t, r);
                    }
                }
            }
        }
    }

    fn apply_command(&mut self, index: u64, client: u64, seq: u64, acked: u64, payload: &[u8]) {
        let response = match self.sessions.get(&client) {
            Some(s) if s.seq == seq => {
                self.metrics.add(&self.metrics.duplicates, 1);
                Response::Ok(s.response.clone())
            }
            Some(s) if s.seq > seq => stale(client, seq, s.seq),
            None if acked > 0 => {
                self.metrics.add(&self.metrics.sessions_expired, 1);
                error(
                    ErrorCode::SessionExpired,
                    format!(
                        "session {client:#x} is not known here (evicted after {} sessions); \
                         start a new client",
                        self.cfg.max_sessions
                    ),
                )
            }
            previous => {
                if let Some(s) = previous {
                    self.lru.remove(&s.last_used);
                }
                let out = self.sm.apply(payload);
                self.metrics.add(&self.metrics.commands_applied, 1);
                self.sessions.insert(
                    client,
                    Session {
                        seq,
                        response: out.clone(),
                        last_used: index,
                    },
                );
                self.lru.insert(index, client);
                self.evict();
                Response::Ok(out)
            }
        };
        if let Some(tokens) = self.pending.remove(&(client, seq)) {
            for t in tokens {
                self.reply(t, response.clone());
            }
        }
    }

    fn evict(&mut self) {
        while self.sessions.len() > self.cfg.max_sessions {
            let Some((_, client)) = self.lru.pop_first() else {
                break;
            };
            self.sessions.remove(&client);
            self.metrics.add(&self.metrics.sessions_evicted, 1);
        }
    }

    fn reply(&mut self, token: Token, r: Response) {
        self.replies.push((token, r));
    }
}

fn error(code: ErrorCode, message: String) -> Response {
    Response::Error { code, message }
}

fn stale(client: u64, seq: u64, latest: u64) -> Response {
    error(
        ErrorCode::Stale,
        format!("command {seq} of session {client:#x} is older than its latest ({latest})"),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use squall_ordering::SubmitError;

    /// Appends every command; the response is the log length. Not idempotent, so applying a
    /// command twice shows.
    #[derive(Default)]
    struct Append(Vec<Vec<u8>>);

    impl StateMachine for Append {
        fn apply(&mut self, c: &[u8]) -> Vec<u8> {
            self.0.push(c.to_vec());
            (self.0.len() as u64).to_le_bytes().to_vec()
        }
        fn query(&self, _: &[u8]) -> Vec<u8> {
            (self.0.len() as u64).to_le_bytes().to_vec()
        }
        fn snapshot(&self) -> Vec<u8> {
            self.0.join(&b","[..])
        }
        fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> {
            if s.contains(&0xff) {
                return Err(RestoreError::new("0xff in an append log"));
            }
            self.0 = if s.is_empty() {
                Vec::new()
            } else {
                s.split(|b| *b == b',').map(<[u8]>::to_vec).collect()
            };
            Ok(())
        }
        /// `restore` into a fresh log (used only by a core that decodes off its thread).
        fn snapshot_decoder(&self) -> Option<StateDecoder<Append>> {
            Some(Box::new(|s: &[u8]| {
                let mut fresh = Append::default();
                fresh.restore(s).map(|()| fresh)
            }))
        }
    }

    fn core(max_sessions: usize) -> ReplicaCore<Append> {
        ReplicaCore::new(
            NodeId(0),
            Append::default(),
            CoreConfig {
                max_sessions,
                ..CoreConfig::default()
            },
        )
        .unwrap()
    }

    fn cmd(client: u64, seq: u64, acked: u64, p: &[u8]) -> Vec<u8> {
        Entry::Command {
            client,
            seq,
            acked,
            payload: p,
        }
        .encode()
    }

    fn deliver(c: &mut ReplicaCore<Append>, payload: Vec<u8>) {
        let position = c.applied();
        c.upcall(Upcall::Deliver(Delivery {
            position,
            sender: NodeId(0),
            payload,
        }));
    }

    fn len(n: u64) -> Response {
        Response::Ok(n.to_le_bytes().to_vec())
    }

    #[test]
    fn a_command_delivered_twice_is_applied_once() {
        let mut c = core(16);
        c.request(
            1,
            Request::Command {
                client: 7,
                seq: 1,
                acked: 0,
                payload: b"a".to_vec(),
            },
        );
        deliver(&mut c, cmd(7, 1, 0, b"a"));
        deliver(&mut c, cmd(8, 1, 0, b"b"));
        // The client's retry elsewhere was ordered too: a duplicate, answered from the table.
        deliver(&mut c, cmd(7, 1, 0, b"a"));
        assert_eq!(c.state().0, vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(c.take_replies(), vec![(1, len(1))]);
        // A retry that reaches this replica after the fact is answered with the first response.
        c.request(
            2,
            Request::Command {
                client: 7,
                seq: 1,
                acked: 0,
                payload: b"a".to_vec(),
            },
        );
        assert_eq!(c.take_replies(), vec![(2, len(1))]);
        // An older command than the session's latest is refused, not applied.
        deliver(&mut c, cmd(7, 2, 1, b"c"));
        deliver(&mut c, cmd(7, 1, 0, b"a"));
        assert_eq!(c.state().0.len(), 3);
        c.request(
            3,
            Request::Command {
                client: 7,
                seq: 1,
                acked: 0,
                payload: b"a".to_vec(),
            },
        );
        assert!(matches!(
            c.take_replies()[..],
            [(
                3,
                Response::Error {
                    code: ErrorCode::Stale,
                    ..
                }
            )]
        ));
        assert_eq!(
            c.metrics()
                .duplicates
                .load(std::sync::atomic::Ordering::Relaxed),
            2
        );
    }

    #[test]
    fn a_retry_at_the_same_replica_resubmits_and_both_waiters_get_one_answer() {
        let mut c = core(16);
        let req = Request::Command {
            client: 3,
            seq: 1,
            acked: 0,
            payload: b"a".to_vec(),
        };
        c.request(1, req.clone());
        c.request(2, req.clone()); // still queued: not queued twice
        let first = c.outgoing().unwrap().to_vec();
        c.submitted();
        assert!(c.outgoing().is_none());
        c.request(3, req); // submitted but unanswered (maybe lost): submit again
        let second = c.outgoing().unwrap().to_vec();
        c.submitted();
        assert_eq!(first, second);
        deliver(&mut c, first);
        deliver(&mut c, second);
        assert_eq!(c.state().0.len(), 1, "applied once");
        assert_eq!(
            c.take_replies(),
            vec![(1, len(1)), (2, len(1)), (3, len(1))]
        );
    }

    #[test]
    fn evicted_sessions_expire_instead_of_applying_twice() {
        let mut a = core(2);
        let mut b = core(2);
        for c in [&mut a, &mut b] {
            deliver(c, cmd(1, 1, 0, b"x"));
            deliver(c, cmd(2, 1, 0, b"y"));
            deliver(c, cmd(1, 2, 1, b"z")); // session 1 is now the most recent
            deliver(c, cmd(3, 1, 0, b"w")); // evicts session 2, the least recently used
        }
        assert_eq!(a.snapshot(), b.snapshot(), "eviction is deterministic");
        a.request(
            9,
            Request::Command {
                client: 2,
                seq: 2,
                acked: 1,
                payload: b"v".to_vec(),
            },
        );
        deliver(&mut a, cmd(2, 2, 1, b"v"));
        assert!(matches!(
            a.take_replies()[..],
            [(
                9,
                Response::Error {
                    code: ErrorCode::SessionExpired,
                    ..
                }
            )]
        ));
        assert_eq!(a.state().0.len(), 4, "the expired command was not applied");
        // A brand-new session (acked 0) is welcome.
        deliver(&mut a, cmd(4, 1, 0, b"u"));
        assert_eq!(a.state().0.len(), 5);
    }

    #[test]
    fn a_restored_replica_continues_identically() {
        let mut a = core(16);
        let entries: Vec<Vec<u8>> = (0..10u64)
            .map(|i| cmd(i % 3, i / 3 + 1, i / 3, &[b'a' + i as u8]))
            .collect();
        for e in &entries[..6] {
            deliver(&mut a, e.clone());
        }
        let snap = Snapshot::decode(&a.snapshot().encode()).unwrap();
        let mut b = core(16);
        b.restore(&snap).unwrap();
        assert_eq!(b.applied(), 6);
        for e in &entries[6..] {
            deliver(&mut a, e.clone());
            deliver(&mut b, e.clone());
        }
        // A duplicate of a command applied before the snapshot is still recognised.
        deliver(&mut a, entries[0].clone());
        deliver(&mut b, entries[0].clone());
        assert_eq!(a.snapshot(), b.snapshot());
        assert_eq!(a.state().0.len(), 10);
    }

    #[test]
    fn barrier_reads_wait_for_their_barrier_and_batch() {
        let mut c = core(16);
        for t in 0..3 {
            c.request(
                t,
                Request::Read {
                    mode: ReadMode::Barrier,
                    query: Vec::new(),
                },
            );
        }
        c.flush_reads();
        let barrier = c.outgoing().unwrap().to_vec();
        c.submitted();
        assert!(c.outgoing().is_none(), "one barrier for the whole batch");
        deliver(&mut c, cmd(1, 1, 0, b"a"));
        assert!(c.take_replies().is_empty(), "no answer before the barrier");
        // Another replica's barrier does not release them.
        deliver(&mut c, Entry::Barrier { replica: 5, id: 0 }.encode());
        assert!(c.take_replies().is_empty());
        deliver(&mut c, barrier);
        assert_eq!(
            c.take_replies(),
            vec![(0, len(1)), (1, len(1)), (2, len(1))]
        );
    }

    #[test]
    fn refusals_and_wedges_answer_the_owner() {
        let mut c = core(16);
        c.request(
            1,
            Request::Command {
                client: 1,
                seq: 1,
                acked: 0,
                payload: vec![0; 10],
            },
        );
        assert!(!c.refused(&SubmitError::TooLarge { len: 40, max: 8 }));
        assert!(matches!(
            c.take_replies()[..],
            [(
                1,
                Response::Error {
                    code: ErrorCode::TooLarge,
                    ..
                }
            )]
        ));
        c.request(
            2,
            Request::Read {
                mode: ReadMode::Ordered,
                query: Vec::new(),
            },
        );
        assert!(
            c.refused(&SubmitError::WindowFull),
            "flow control: try again"
        );
        assert!(c.outgoing().is_some());
        c.upcall(Upcall::Wedged);
        assert!(matches!(
            c.take_replies()[..],
            [(
                2,
                Response::Error {
                    code: ErrorCode::Unavailable,
                    ..
                }
            )]
        ));
        c.request(
            3,
            Request::Read {
                mode: ReadMode::Local,
                query: Vec::new(),
            },
        );
        assert!(matches!(
            c.take_replies()[..],
            [(
                3,
                Response::Error {
                    code: ErrorCode::Unavailable,
                    ..
                }
            )]
        ));
    }

    #[test]
    fn undecodable_entries_are_skipped_alike() {
        let mut c = core(16);
        deliver(&mut c, vec![0xde, 0xad]);
        deliver(&mut c, cmd(1, 1, 0, b"a"));
        assert_eq!(c.applied(), 2);
        assert_eq!(c.state().0.len(), 1);
        assert_eq!(
            c.metrics()
                .undecodable
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
    }

    /// A backend restarting from its logs, as `squall-membership`'s `Group` is after a total
    /// restart: it offers a persisted state (a member that entered by transfer) at its first
    /// `View`, reports itself restarting until the test says otherwise, and refuses submits.
    struct Restarting {
        state: Option<(u64, Vec<u8>)>,
        restarting: Option<String>,
        holds: bool,
    }

    inert_order!(
        Restarting,
        0,
        Err(SubmitError::NotASender("restarting".into()))
    );

    impl StateTransfer for Restarting {
        fn holds_state(&self) -> bool {
            self.holds
        }
        fn state_wanted(&self) -> bool {
            false
        }
        fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> {
            Err(TransferError::Refused("test".into()))
        }
        fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
            self.state.take()
        }
        fn restarting(&self) -> Option<String> {
            self.restarting.clone()
        }
    }

    /// A backend for the leave tests: its leave status and its stop are set by the test.
    struct Leaver(Option<LeaveReport>, Option<String>);
    inert_order!(Leaver, 1, Ok(()));
    impl StateTransfer for Leaver {
        holds_state_no_transfer!();
        fn stopped(&self) -> Option<String> {
            self.1.clone()
        }
        fn leave_status(&self) -> Option<LeaveReport> {
            self.0.clone()
        }
    }

    /// s26 (`docs/MEMBERSHIP.md`, sixty-ninth part): a leaving replica asks its backend where
    /// the leave stands after every poll and keeps the latest answer (logged on change), and
    /// the leave's completion still stops it as a leave.
    #[test]
    fn a_leaving_replica_keeps_its_backends_leave_status() {
        let held = LeaveReport::held(
            "leave held back in view 2: no other member of subgroup 0 shard 1 holds its state yet; it leaves once one of [NodeId(5)] holds it",
        );
        let mut b = Leaver(None, None);
        let mut r = core(16);
        r.upcalls_from(&mut b, std::iter::empty());
        assert_eq!(r.leave_status(), None, "no leave under way");
        r.leaving();
        b.0 = Some(held.clone());
        r.upcalls_from(&mut b, std::iter::empty());
        assert_eq!(r.leave_status(), Some(&held));
        let left = LeaveReport::left("left: view 3 was installed without this member");
        b.0 = Some(left.clone());
        b.1 = Some("left: view 3 was installed without this member, as it asked".into());
        r.upcalls_from(&mut b, std::iter::empty());
        assert_eq!(r.leave_status(), Some(&left));
        assert!(r.backend_stopped().is_none(), "a leave, not a failure");
    }

    /// s26 follow-up (sixty-ninth part, review D1): after a total restart the backend asks
    /// again by itself for a leave its log holds from before, so the new process never called
    /// [`ReplicaCore::leaving`]. Its leave status makes the replica leaving, and the stop that
    /// completes the leave is a leave: no [`BackendStopped`], nothing counted.
    #[test]
    fn a_leave_the_backend_resumed_by_itself_completes_as_a_leave() {
        let mut b = Leaver(
            Some(LeaveReport::going(
                "leave asked in view 0 resumes once the restart view is installed",
            )),
            None,
        );
        let mut r = core(16);
        r.upcalls_from(&mut b, std::iter::empty());
        assert!(r.leave_status().is_some(), "the resumed leave is reported");
        b.0 = Some(LeaveReport::left(
            "left: view 2 was installed without this member",
        ));
        b.1 = Some("left: view 2 was installed without this member, as it asked".into());
        r.upcalls_from(&mut b, std::iter::empty());
        assert!(
            r.backend_stopped().is_none(),
            "a resumed leave taken for a failure: {:?}",
            r.backend_stopped()
        );
        assert_eq!(
            r.metrics()
                .backends_stopped
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
        assert!(
            r.stopped.is_some(),
            "the replica stopped: its leave completed"
        );
    }

    /// s27 review D1 (`docs/MEMBERSHIP.md`, seventy-seventh part): a replica asked to leave,
    /// held back, whose backend then stops for another reason (its group lost its majority)
    /// did not leave: the stop is a failure ([`BackendStopped`], counted), and
    /// [`ReplicaCore::left`] stays `None`, so an operator is never told "left" for it.
    #[test]
    fn a_stop_other_than_the_leave_while_leaving_is_a_failure() {
        let mut b = Leaver(
            Some(LeaveReport::held(
                "leave held back in view 2: no other member of subgroup 0 shard 0 holds its state yet; it leaves once one of [NodeId(5)] holds it",
            )),
            None,
        );
        let mut r = core(16);
        r.leaving();
        r.upcalls_from(&mut b, std::iter::empty());
        assert!(r.leave_status().is_some_and(|s| s.held));
        // Partitioned: the backend stops with a minority; its leave status says nothing now.
        b.0 = None;
        b.1 = Some("minority: view 2 lost its majority".into());
        r.upcalls_from(&mut b, std::iter::empty());
        assert!(
            r.backend_stopped().is_some(),
            "a minority stop while leaving taken for a leave"
        );
        assert_eq!(r.left(), None);
        let s = r.status();
        assert!(s.left.is_none() && s.stopped.is_some(), "{s:?}");
        assert_eq!(
            r.metrics()
                .backends_stopped
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
    }

    /// A backend that keeps checkpoints (as a durable `Group` does): records them, refusing
    /// the next `refuse` calls; `keeps: false` keeps none.
    #[derive(Default)]
    struct Keeper {
        kept: Vec<(u64, Vec<u8>)>,
        refuse: usize,
        calls: usize,
        keeps: bool,
        restarting: bool,
        /// Writes off the caller's thread: each checkpoint is pending until the test sets
        /// its outcome.
        defer: bool,
        writing: Option<u64>,
        outcome: Option<Result<u64, TransferError>>,
        outcome_asks: usize,
        /// Keeps each encoder it is handed, unrun (a writer that has not got to it yet),
        /// and reports it pending.
        hold_encoders: bool,
        held: Vec<(u64, StateEncoder)>,
    }

    inert_order!(Keeper, 0, Ok(()));

    impl StateTransfer for Keeper {
        holds_state_no_transfer!();
        fn restarting(&self) -> Option<String> {
            self.restarting.then(|| "replaying".into())
        }
        fn checkpoint(
            &mut self,
            position: u64,
            state: Vec<u8>,
        ) -> Result<CheckpointKept, TransferError> {
            self.calls += 1;
            if self.refuse > 0 {
                self.refuse -= 1;
                return Err(TransferError::Refused("restarting".into()));
            }
            if self.defer {
                assert!(self.writing.is_none(), "asked while one is pending");
                self.writing = Some(position);
                return Ok(CheckpointKept::Pending);
            }
            if self.keeps {
                self.kept.push((position, state));
                return Ok(CheckpointKept::Durable);
            }
            Ok(CheckpointKept::Never)
        }
        fn checkpoint_encoded(
            &mut self,
            position: u64,
            encode: StateEncoder,
        ) -> Result<CheckpointKept, TransferError> {
            if !self.hold_encoders {
                let mut state = Vec::new();
                encode(&mut state);
                return self.checkpoint(position, state);
            }
            self.held.push((position, encode));
            Ok(CheckpointKept::Pending)
        }
        fn checkpoint_outcome(&mut self) -> Option<Result<u64, TransferError>> {
            self.outcome_asks += 1;
            let o = self.outcome.take();
            if o.is_some() {
                self.writing = None;
            }
            o
        }
    }

    fn every(n: u64) -> ReplicaCore<Append> {
        ReplicaCore::new(
            NodeId(0),
            Append::default(),
            CoreConfig {
                snapshot_every: n,
                ..CoreConfig::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn a_replica_checkpoints_every_snapshot_every_deliveries_and_retries_a_refusal() {
        let mut r = every(3);
        let mut b = Keeper {
            keeps: true,
            ..Keeper::default()
        };
        for i in 0..7u64 {
            r.upcalls_from(&mut b, [at(i, cmd(9, i + 1, i, b"x"))]);
        }
        let positions: Vec<u64> = b.kept.iter().map(|k| k.0).collect();
        assert_eq!(positions, vec![3, 6]);
        // Each checkpoint is the replica's snapshot at that position (sessions included).
        let s = Snapshot::decode(&b.kept[1].1).unwrap();
        assert_eq!((s.applied, s.session_count()), (6, 1));
        assert_eq!(
            r.metrics()
                .checkpoints
                .load(std::sync::atomic::Ordering::Relaxed),
            2
        );
        // Refused twice: asked again after each further delivery, not on every poll.
        b.refuse = 2;
        r.upcalls_from(
            &mut b,
            [at(7, cmd(9, 8, 7, b"x")), at(8, cmd(9, 9, 8, b"x"))],
        );
        r.upcalls_from(&mut b, []);
        assert_eq!(
            (b.calls, b.kept.len()),
            (3, 2),
            "one refusal, not asked again idle"
        );
        r.upcalls_from(&mut b, [at(9, cmd(9, 10, 9, b"x"))]);
        r.upcalls_from(&mut b, [at(10, cmd(9, 11, 10, b"x"))]);
        assert_eq!(b.kept.last().map(|k| k.0), Some(11));
        // A backend that keeps none is never asked again; 0 never asks.
        let mut r = every(1);
        let mut none = Keeper::default();
        for i in 0..5u64 {
            r.upcalls_from(&mut none, [at(i, cmd(9, i + 1, i, b"x"))]);
        }
        assert_eq!(none.calls, 1);
        let mut r = every(0);
        let mut b = Keeper {
            keeps: true,
            ..Keeper::default()
        };
        for i in 0..5u64 {
            r.upcalls_from(&mut b, [at(i, cmd(9, i + 1, i, b"x"))]);
        }
        assert_eq!(b.calls, 0);
    }

    /// [`Append`] whose checkpoints are captures ([`StateMachine::snapshot_encoder`]).
    #[derive(Default)]
    struct Captured(Append);

    impl StateMachine for Captured {
        fn apply(&mut self, c: &[u8]) -> Vec<u8> {
            self.0.apply(c)
        }
        fn query(&self, q: &[u8]) -> Vec<u8> {
            self.0.query(q)
        }
        fn snapshot(&self) -> Vec<u8> {
            self.0.snapshot()
        }
        fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> {
            self.0.restore(s)
        }
        fn snapshot_encoder(&self) -> Option<StateEncoder> {
            let capture = Append(self.0.0.clone());
            Some(Box::new(move |out: &mut Vec<u8>| {
                out.extend_from_slice(&capture.snapshot())
            }))
        }
    }

    /// A state machine that captures its state hands the backend an encoder, not bytes; run
    /// after the replica applied later commands (and changed a session), it still encodes
    /// exactly the replica's snapshot at the checkpoint's position.
    #[test]
    fn a_captured_checkpoint_encodes_the_snapshot_at_its_position_however_late_it_runs() {
        let mut r = ReplicaCore::new(
            NodeId(0),
            Captured::default(),
            CoreConfig {
                snapshot_every: 3,
                ..CoreConfig::default()
            },
        )
        .unwrap();
        let mut b = Keeper {
            hold_encoders: true,
            ..Keeper::default()
        };
        for i in 0..3u64 {
            r.upcalls_from(&mut b, [at(i, cmd(9, i + 1, i, b"x"))]);
        }
        assert_eq!((b.held.len(), b.calls), (1, 0), "an encoder, not bytes");
        let then = r.snapshot().encode();
        for i in 3..8u64 {
            r.upcalls_from(&mut b, [at(i, cmd(9 + i % 2, i + 1, i, b"y"))]);
        }
        assert_ne!(r.snapshot().encode(), then, "the replica moved on");
        let (position, encode) = b.held.remove(0);
        assert_eq!(position, 3);
        let mut out = Vec::new();
        encode(&mut out);
        assert_eq!(out, then);
        assert_eq!(Snapshot::decode(&out).unwrap().applied, 3);
        // And equals what `snapshot().encode()` gives at any point.
        let mut now = Vec::new();
        r.snapshot_encoder().unwrap()(&mut now);
        assert_eq!(now, r.snapshot().encode());
    }

    #[test]
    fn a_pending_checkpoint_blocks_the_next_until_its_outcome_and_counts_once_durable() {
        let mut r = every(2);
        let mut b = Keeper {
            defer: true,
            ..Keeper::default()
        };
        let checkpoints = |r: &ReplicaCore<Append>| {
            r.metrics()
                .checkpoints
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        for i in 0..2u64 {
            r.upcalls_from(&mut b, [at(i, cmd(9, i + 1, i, b"x"))]);
        }
        assert_eq!((b.calls, b.writing), (1, Some(2)));
        // Still being written: due again (4 applied) but not asked; not counted yet.
        for i in 2..5u64 {
            r.upcalls_from(&mut b, [at(i, cmd(9, i + 1, i, b"x"))]);
        }
        assert_eq!((b.calls, checkpoints(&r)), (1, 0));
        assert!(b.outcome_asks >= 3, "its outcome is asked after every poll");
        // Durable: counted, and the next (due: 5 applied >= 2 + 2) is asked at once.
        b.outcome = Some(Ok(2));
        r.upcalls_from(&mut b, []);
        assert_eq!((checkpoints(&r), b.calls, b.writing), (1, 2, Some(5)));
        // It fails: not counted, asked again after the next delivery only.
        b.outcome = Some(Err(TransferError::Refused("disk full".into())));
        r.upcalls_from(&mut b, []);
        r.upcalls_from(&mut b, []);
        assert_eq!((checkpoints(&r), b.calls), (1, 2));
        r.upcalls_from(&mut b, [at(5, cmd(9, 6, 5, b"x"))]);
        assert_eq!((b.calls, b.writing), (3, Some(6)));
        b.outcome = Some(Ok(6));
        r.upcalls_from(&mut b, []);
        assert_eq!(checkpoints(&r), 2);
        // The next is due 2 past the durable one.
        r.upcalls_from(&mut b, [at(6, cmd(9, 7, 6, b"x"))]);
        assert_eq!(b.calls, 3);
        r.upcalls_from(&mut b, [at(7, cmd(9, 8, 7, b"x"))]);
        assert_eq!((b.calls, b.writing), (4, Some(8)));
    }

    #[test]
    fn a_restarting_replica_checkpoints_a_period_after_its_restart_completed() {
        let mut r = every(2);
        let mut b = Keeper {
            keeps: true,
            restarting: true,
            ..Keeper::default()
        };
        r.await_restart("replaying".into());
        for i in 0..5u64 {
            r.upcalls_from(&mut b, [at(i, cmd(9, i + 1, i, b"x"))]);
        }
        assert!(r.is_restarting());
        assert_eq!(b.calls, 0, "not while the replay is applied");
        b.restarting = false;
        r.upcalls_from(&mut b, []);
        assert!(!r.is_restarting());
        assert_eq!(b.calls, 0, "not at once when the restart completes");
        for i in 5..7u64 {
            r.upcalls_from(&mut b, [at(i, cmd(9, i + 1, i, b"x"))]);
        }
        assert_eq!(b.kept.iter().map(|k| k.0).collect::<Vec<_>>(), vec![7]);
    }

    fn view(id: u64) -> Upcall<Delivery> {
        Upcall::View(squall_ordering::View {
            id,
            members: vec![NodeId(0), NodeId(1)],
            leader: Some(NodeId(0)),
        })
    }

    fn at(position: u64, payload: Vec<u8>) -> Upcall<Delivery> {
        Upcall::Deliver(Delivery {
            position,
            sender: NodeId(1),
            payload,
        })
    }

    fn command(client: u64, seq: u64, p: &[u8]) -> Request {
        Request::Command {
            client,
            seq,
            acked: seq - 1,
            payload: p.to_vec(),
        }
    }

    fn unavailable_because(replies: &[(Token, Response)], token: Token, why: &str) -> bool {
        matches!(replies, [(t, Response::Error { code: ErrorCode::Unavailable, message })]
            if *t == token && message.contains(why))
    }

    /// What `Group::rejoin` does under a replica whose group switched into a restart after it
    /// delivered `[0, 2)` (s23, docs/MEMBERSHIP.md, forty-first part): the backend stops
    /// holding the state, then hands over the group's state at position 5 at a view, and
    /// delivers from 5. The replica must await that state (answering `Unavailable`) and
    /// install it, never apply 5 on top of its state at 2 (positions 2 to 4 skipped).
    #[test]
    fn a_replica_whose_backend_drops_its_state_awaits_and_installs_the_transferred_one() {
        let mut member = core(16);
        for i in 0..5u64 {
            deliver(&mut member, cmd(9, i + 1, i, b"m"));
        }
        let mut backend = Restarting {
            state: None,
            restarting: None,
            holds: true,
        };
        let mut r = core(16);
        r.upcalls_from(
            &mut backend,
            [at(0, cmd(9, 1, 0, b"m")), at(1, cmd(9, 2, 1, b"m"))],
        );
        assert_eq!(r.applied(), 2);
        r.request(1, command(7, 1, b"z"));
        backend.holds = false;
        r.upcalls_from(&mut backend, []);
        assert!(
            r.is_joining(),
            "the backend dropped the state: awaiting one"
        );
        assert!(unavailable_because(&r.take_replies(), 1, "joining again"));
        r.request(
            2,
            Request::Read {
                mode: ReadMode::Local,
                query: Vec::new(),
            },
        );
        assert!(unavailable_because(&r.take_replies(), 2, "joining"));
        backend.holds = true;
        backend.state = Some((5, member.snapshot().encode()));
        r.upcalls_from(&mut backend, [view(3), at(5, cmd(9, 6, 5, b"m"))]);
        deliver(&mut member, cmd(9, 6, 5, b"m"));
        assert!(!r.is_joining() && r.stopped.is_none());
        assert_eq!(r.applied(), 6);
        assert_eq!(r.snapshot(), member.snapshot());
        assert_eq!(
            r.metrics()
                .states_dropped
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
    }

    /// A backend that stops for good as the test says, as `squall-membership`'s `Group`
    /// does: once stopped it answers `holds_state` true ("frozen") and reports the reason
    /// through `stopped` (and, restarting, through `restarting` as "its restart stopped");
    /// it hands over the state the test gives it, once.
    struct Failing {
        stopped: Option<String>,
        restart: bool,
        state: Option<(u64, Vec<u8>)>,
    }

    inert_order!(Failing, 3, Err(SubmitError::NotASender("joining".into())));

    impl StateTransfer for Failing {
        fn holds_state(&self) -> bool {
            self.stopped.is_some()
        }
        fn state_wanted(&self) -> bool {
            false
        }
        fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> {
            Err(TransferError::Refused("joining".into()))
        }
        fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
            self.state.take()
        }
        fn stopped(&self) -> Option<String> {
            self.stopped.clone()
        }
        fn restarting(&self) -> Option<String> {
            self.restart.then(|| match &self.stopped {
                Some(why) => format!("its restart stopped: {why}"),
                None => "waiting for members [2] of its last view".into(),
            })
        }
    }

    fn failing() -> Failing {
        Failing {
            stopped: None,
            restart: false,
            state: None,
        }
    }

    fn local_read() -> Request {
        Request::Read {
            mode: ReadMode::Local,
            query: Vec::new(),
        }
    }

    /// s24 (docs/MEMBERSHIP.md, fiftieth part): a joiner whose backend stops before its state
    /// arrives (its state refused as too large, a full buffer, a lost shard) stops with
    /// [`BackendStopped`] naming the backend's reason, instead of answering "joining" for good.
    #[test]
    fn a_joiner_whose_backend_stops_mid_join_stops_with_the_reason() {
        let mut r = core(16);
        r.await_state();
        let mut b = failing();
        r.upcalls_from(&mut b, []);
        r.request(1, command(7, 1, b"z"));
        assert!(unavailable_because(&r.take_replies(), 1, "joining"));
        let why = "the member asked for the state refused to send it: 4096 bytes is above its \
                   max_state_bytes; raise it in TransferConfig";
        b.stopped = Some(why.into());
        // `Group` reports a wedge as it stops.
        r.upcalls_from(&mut b, [Upcall::Wedged]);
        assert_eq!(
            r.backend_stopped(),
            Some(&BackendStopped {
                reason: why.into(),
                phase: StopPhase::Joining
            }),
            "the backend stopped mid-join but the replica stayed joining"
        );
        assert!(r.stopped.is_some(), "a failed join stops the replica");
        r.request(
            2,
            Request::Read {
                mode: ReadMode::Local,
                query: Vec::new(),
            },
        );
        let replies = r.take_replies();
        assert!(
            unavailable_because(&replies, 2, "join failed")
                && unavailable_because(&replies, 2, "4096 bytes"),
            "{replies:?}"
        );
        r.upcalls_from(&mut b, []);
        let m = r.metrics();
        assert_eq!(
            m.backends_stopped
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
    }

    /// s24 (docs/MEMBERSHIP.md, fifty-third part): a member whose backend stops for good (its
    /// group lost its majority; `Group` reports a `Wedged` as it stops) stops with the
    /// backend's reason, in phase `Member`, instead of answering "wedged for a view change"
    /// for good, to reads and commands alike. A backend that reports its
    /// stop only by refusing a submission (`SubmitError::Stopped`: plain round-robin,
    /// cas-paxos) stops a replica the same way.
    #[test]
    fn a_member_whose_backend_stops_stops_with_the_reason() {
        let mut r = core(16);
        let mut b = failing();
        r.upcalls_from(&mut b, [at(0, cmd(9, 1, 0, b"m"))]);
        let why = "lost its majority: 1 of 3 members reachable in view 4";
        b.stopped = Some(why.into());
        r.upcalls_from(&mut b, [Upcall::Wedged]);
        assert_eq!(
            r.backend_stopped(),
            Some(&BackendStopped {
                reason: why.into(),
                phase: StopPhase::Member
            }),
            "the member's backend stopped but the replica did not"
        );
        r.request(1, command(7, 1, b"z"));
        r.request(2, local_read());
        let replies = r.take_replies();
        assert_eq!(replies.len(), 2, "{replies:?}");
        for (i, token) in [1, 2].into_iter().enumerate() {
            let reply = &replies[i..=i];
            assert!(
                unavailable_because(reply, token, "backend stopped")
                    && unavailable_because(reply, token, "majority"),
                "{replies:?}"
            );
        }
        assert_eq!(
            r.metrics()
                .backends_stopped
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        // Stopped once: a later poll and a later refusal change nothing.
        r.upcalls_from(&mut b, []);
        assert!(!r.refused(&SubmitError::Stopped("again".into())));
        assert_eq!(r.backend_stopped().map(|e| e.reason.as_str()), Some(why));

        let mut plain = core(16);
        plain.request(1, command(7, 1, b"z"));
        let _ = plain.outgoing();
        assert!(!plain.refused(&SubmitError::Stopped(
            "the shared state table failed".into()
        )));
        assert_eq!(
            plain
                .backend_stopped()
                .map(|e| (e.phase, e.reason.as_str())),
            Some((StopPhase::Member, "the shared state table failed"))
        );
        assert!(unavailable_because(
            &plain.take_replies(),
            1,
            "the shared state table failed"
        ));
    }

    /// s24 follow-up (fifty-third part): the commands a member owes when its group stops are
    /// answered with the stop's reason, not "wedged for a view change": a stopping `Group`
    /// reports `Wedged` in the poll it stops in, which used to be applied before the stop
    /// was asked for.
    #[test]
    fn commands_owed_when_a_members_group_stops_are_answered_with_the_reason() {
        let mut r = core(16);
        let mut b = failing();
        r.upcalls_from(&mut b, [at(0, cmd(9, 1, 0, b"m"))]);
        r.request(1, command(7, 1, b"z"));
        assert!(r.outgoing().is_some(), "the command is submitted");
        r.submitted();
        assert!(r.take_replies().is_empty(), "owed, not answered yet");
        let why = "lost its majority: 1 of 3 members reachable in view 4";
        b.stopped = Some(why.into());
        r.upcalls_from(&mut b, [Upcall::Wedged]);
        let replies = r.take_replies();
        assert!(
            unavailable_because(&replies, 1, "backend stopped")
                && unavailable_because(&replies, 1, "majority"),
            "the owed command was not answered with the stop's reason: {replies:?}"
        );
        assert_eq!(
            r.backend_stopped().map(|e| e.phase),
            Some(StopPhase::Member)
        );
    }

    /// s24 (fifty-third part): a replica restarting from durable logs whose restart stops
    /// (`Group::restarting` then says "its restart stopped: REASON") stops with the reason,
    /// in phase `Restarting`, instead of answering "restarting" for good.
    #[test]
    fn a_restarting_replica_whose_restart_stops_stops_with_the_reason() {
        let mut r = core(16);
        let mut b = failing();
        b.restart = true;
        r.await_restart("waiting for members [2] of its last view".into());
        r.upcalls_from(&mut b, []);
        assert!(r.is_restarting() && r.backend_stopped().is_none());
        let why = "the log of epoch 7 could not be read: unexpected end of file";
        b.stopped = Some(why.into());
        r.upcalls_from(&mut b, [Upcall::Wedged]);
        assert_eq!(
            r.backend_stopped(),
            Some(&BackendStopped {
                reason: why.into(),
                phase: StopPhase::Restarting
            }),
            "the restart stopped but the replica kept restarting"
        );
        r.request(1, local_read());
        let replies = r.take_replies();
        assert!(
            unavailable_because(&replies, 1, "restart failed")
                && unavailable_because(&replies, 1, "epoch 7"),
            "{replies:?}"
        );
    }

    /// s24 (fifty-third part): a state decoded off the thread that a driver hands in after
    /// the replica's backend stopped is not installed: the replica stays stopped, joining,
    /// at position 0, and answers with the backend's reason.
    #[test]
    fn a_state_decoded_after_the_backend_stopped_is_not_installed() {
        let mut member = core(16);
        for i in 0..3u64 {
            deliver(&mut member, cmd(9, i + 1, i, b"m"));
        }
        let mut r = core(16);
        r.decode_off_thread();
        r.await_state();
        let mut b = failing();
        b.state = Some((3, member.snapshot().encode()));
        r.upcalls_from(&mut b, [view(2)]);
        let job = r
            .take_install()
            .expect("the state is decoded off the thread");
        b.stopped = Some("a joiner buffered 1048576 deliveries (max_buffered)".into());
        r.upcalls_from(&mut b, []);
        assert!(r.backend_stopped().is_some());
        assert!(
            r.install_decoded(job.run()).is_none(),
            "nothing is replaced in a stopped replica"
        );
        assert!(
            r.is_joining() && r.applied() == 0,
            "a decoded state was installed into a stopped replica (applied {})",
            r.applied()
        );
        assert_eq!(
            r.metrics()
                .states_installed
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
        r.request(1, local_read());
        assert!(unavailable_because(&r.take_replies(), 1, "max_buffered"));
    }

    /// The same rejoin with the drop unseen (the state handed over in the poll that drops
    /// it): the state offered at the view is installed all the same.
    #[test]
    fn a_state_handed_over_at_a_view_to_a_replica_holding_one_is_installed() {
        let mut member = core(16);
        for i in 0..5u64 {
            deliver(&mut member, cmd(9, i + 1, i, b"m"));
        }
        let mut backend = Restarting {
            state: None,
            restarting: None,
            holds: true,
        };
        let mut r = core(16);
        r.upcalls_from(&mut backend, [at(0, cmd(9, 1, 0, b"m"))]);
        backend.state = Some((5, member.snapshot().encode()));
        r.upcalls_from(&mut backend, [view(3), at(5, cmd(9, 6, 5, b"m"))]);
        deliver(&mut member, cmd(9, 6, 5, b"m"));
        assert_eq!(r.applied(), 6);
        assert_eq!(r.snapshot(), member.snapshot());
    }

    /// A delivery at another position than the replica's stops it with both positions named,
    /// and nothing of it or after it is applied.
    #[test]
    fn a_delivery_past_the_replicas_position_stops_it_unapplied() {
        let mut backend = Restarting {
            state: None,
            restarting: None,
            holds: true,
        };
        let mut r = core(16);
        r.upcalls_from(
            &mut backend,
            [at(0, cmd(9, 1, 0, b"a")), at(1, cmd(9, 2, 1, b"b"))],
        );
        let before = r.snapshot();
        r.upcalls_from(
            &mut backend,
            [at(5, cmd(9, 3, 2, b"c")), at(6, cmd(9, 4, 3, b"d"))],
        );
        assert_eq!(r.applied(), 2);
        assert_eq!(r.snapshot(), before);
        let why = PositionMismatch {
            position: 5,
            applied: 2,
        }
        .to_string();
        assert!(
            why.contains("position 5") && why.contains("position 2"),
            "{why}"
        );
        r.request(1, command(7, 1, b"z"));
        assert!(unavailable_because(&r.take_replies(), 1, &why));
    }

    #[test]
    fn a_restarted_replica_installs_its_persisted_state_and_answers_a_retry_from_its_sessions() {
        // What the member held when it entered by transfer: three commands, two sessions.
        let mut member = core(16);
        deliver(&mut member, cmd(9, 1, 0, b"a"));
        deliver(&mut member, cmd(9, 2, 1, b"b"));
        deliver(&mut member, cmd(5, 1, 0, b"x"));
        let persisted = member.snapshot().encode();
        deliver(&mut member, cmd(9, 3, 2, b"c"));

        // Its restart: the backend hands back the persisted state at the snapshot's view,
        // then replays from position 3.
        let mut backend = Restarting {
            state: Some((3, persisted)),
            restarting: Some("waiting for members [1] of its last view".into()),
            holds: true,
        };
        let mut r = core(16);
        r.await_restart(backend.restarting().unwrap());
        r.upcalls_from(&mut backend, [view(1), at(3, cmd(9, 3, 2, b"c"))]);
        assert!(r.is_restarting(), "the backend still restarts");
        assert_eq!(r.applied(), 4);
        assert_eq!(
            r.state().0,
            member.state().0,
            "restored, then the replay applied"
        );
        // A client retrying its last command before the restart completed: refused, with why.
        r.request(1, command(9, 3, b"c"));
        assert!(unavailable_because(&r.take_replies(), 1, "members [1]"));
        assert!(r.outgoing().is_none(), "nothing queued while restarting");

        backend.restarting = None;
        r.upcalls_from(&mut backend, [view(2)]);
        assert!(!r.is_restarting() && !r.is_joining());
        // The retry is answered from the restored session, not applied a second time.
        r.request(2, command(9, 3, b"c"));
        assert_eq!(r.take_replies(), vec![(2, len(4))]);
        assert!(r.outgoing().is_none(), "a duplicate is not ordered again");
        r.request(3, command(5, 1, b"x"));
        assert_eq!(r.take_replies(), vec![(3, len(3))]);
        r.request(4, command(9, 2, b"b"));
        assert!(matches!(
            r.take_replies()[..],
            [(
                4,
                Response::Error {
                    code: ErrorCode::Stale,
                    ..
                }
            )]
        ));
        assert_eq!(
            r.snapshot(),
            member.snapshot(),
            "identical to the member that ran on"
        );
    }

    #[test]
    fn a_restart_replayed_from_position_0_rebuilds_the_sessions() {
        let mut backend = Restarting {
            state: None,
            restarting: Some("agreeing on the restart view".into()),
            holds: true,
        };
        let mut r = core(16);
        r.await_restart(backend.restarting().unwrap());
        r.upcalls_from(
            &mut backend,
            [
                at(0, cmd(9, 1, 0, b"a")),
                at(1, cmd(9, 2, 1, b"b")),
                view(1),
            ],
        );
        for (t, req) in [
            (1, command(9, 3, b"c")),
            (
                2,
                Request::Read {
                    mode: ReadMode::Local,
                    query: Vec::new(),
                },
            ),
            (
                3,
                Request::Read {
                    mode: ReadMode::Barrier,
                    query: Vec::new(),
                },
            ),
        ] {
            r.request(t, req);
            r.flush_reads();
            assert!(unavailable_because(&r.take_replies(), t, "restarting"));
        }
        assert!(r.outgoing().is_none());
        backend.restarting = None;
        r.upcalls_from(&mut backend, std::iter::empty());
        r.request(4, command(9, 2, b"b"));
        assert_eq!(
            r.take_replies(),
            vec![(4, len(2))],
            "a duplicate of the replay"
        );
        r.request(5, command(9, 3, b"c"));
        assert!(r.outgoing().is_some(), "a new command is ordered");
    }

    #[test]
    fn a_restarted_replica_the_group_went_on_without_joins_again_and_installs_a_transfer() {
        let mut member = core(16);
        deliver(&mut member, cmd(9, 1, 0, b"a"));
        let mut backend = Restarting {
            state: None,
            restarting: Some("agreeing on the restart view".into()),
            holds: true,
        };
        let mut r = core(16);
        r.await_restart(backend.restarting().unwrap());
        r.upcalls_from(&mut backend, [at(0, cmd(9, 1, 0, b"a"))]);
        // The group went on without it: it asks to join again, holding no state.
        backend.restarting = None;
        backend.holds = false;
        r.upcalls_from(&mut backend, std::iter::empty());
        assert!(r.is_joining());
        r.request(1, command(9, 2, b"b"));
        assert!(unavailable_because(&r.take_replies(), 1, "joining"));
        backend.state = Some((1, member.snapshot().encode()));
        r.upcalls_from(&mut backend, [view(5)]);
        assert!(!r.is_joining());
        assert_eq!(r.snapshot(), member.snapshot());
    }

    /// A joiner that decodes off its thread (`off`) and one that restores in `upcalls_from`
    /// (`inline`), fed the same upcalls: the same state `bytes` at `position`, in view 1,
    /// then `after`.
    fn both_joiners(
        position: u64,
        bytes: &[u8],
        after: &[Upcall<Delivery>],
    ) -> [(ReplicaCore<Append>, Restarting); 2] {
        [true, false].map(|off| {
            let mut backend = Restarting {
                state: Some((position, bytes.to_vec())),
                restarting: None,
                holds: false,
            };
            let mut c = core(16);
            c.await_state();
            if off {
                c.decode_off_thread();
            }
            let upcalls = std::iter::once(view(1)).chain(after.iter().cloned());
            c.upcalls_from(&mut backend, upcalls);
            (c, backend)
        })
    }

    /// Runs `c`'s install job on another thread and installs its result.
    fn decode_elsewhere(c: &mut ReplicaCore<Append>) {
        let job = c.take_install().expect("a state to decode off the thread");
        let decoded = std::thread::spawn(move || job.run()).join().unwrap();
        c.install_decoded(decoded);
    }

    #[test]
    fn a_state_decoded_off_the_thread_keeps_what_follows_and_ends_as_a_restore() {
        let mut member = core(16);
        deliver(&mut member, cmd(9, 1, 0, b"a"));
        deliver(&mut member, cmd(5, 1, 0, b"x"));
        deliver(&mut member, cmd(9, 2, 1, b"b"));
        let bytes = member.snapshot().encode();
        let after = [at(3, cmd(9, 3, 2, b"c")), at(4, cmd(5, 2, 1, b"y"))];
        let [(mut off, mut backend), (inline, _)] = both_joiners(3, &bytes, &after);
        assert!(!inline.is_joining() && inline.applied() == 5);
        // Nothing applied yet: the view and both deliveries are kept for after the state.
        assert!(off.is_installing() && off.is_joining());
        assert_eq!((off.applied(), off.backlog()), (0, 3));
        off.request(1, command(9, 4, b"d"));
        assert!(unavailable_because(
            &off.take_replies(),
            1,
            &format!(
                "installing a state of {} bytes taken at position 3",
                bytes.len()
            )
        ));
        assert!(off.outgoing().is_none(), "nothing queued while installing");
        // More upcalls while it decodes join the backlog, in order.
        off.upcalls_from(&mut backend, [at(5, cmd(9, 4, 3, b"d"))]);
        assert_eq!((off.applied(), off.backlog()), (0, 4));
        decode_elsewhere(&mut off);
        assert!(!off.is_installing() && !off.is_joining());
        assert_eq!(
            off.applied(),
            3,
            "the state is in, the backlog not yet applied"
        );
        // It serves, behind what it kept: a client's retry of a command the backlog holds is
        // ordered again and answered once the backlog's copy is applied (the copy ordered
        // again then applies as a duplicate).
        off.request(2, command(9, 3, b"c"));
        assert!(off.take_replies().is_empty() && off.outgoing().is_some());
        off.upcalls_from(&mut backend, std::iter::empty());
        assert_eq!((off.applied(), off.backlog()), (6, 0));
        assert_eq!(off.take_replies(), vec![(2, len(4))]);
        let mut inline = inline;
        inline.upcall(at(5, cmd(9, 4, 3, b"d")));
        assert_eq!(
            off.snapshot(),
            inline.snapshot(),
            "as a restore of the same bytes"
        );
        assert_eq!(
            off.metrics()
                .states_installed
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        // Serving: a retry is answered from the sessions the state brought.
        off.request(3, command(5, 2, b"y"));
        assert_eq!(off.take_replies(), vec![(3, len(5))]);
    }

    #[test]
    fn a_state_that_fails_to_decode_off_the_thread_stops_the_replica_as_a_restore_does() {
        let mut member = core(16);
        deliver(&mut member, cmd(9, 1, 0, b"a"));
        let good = member.snapshot().encode();
        let mut torn = good.clone();
        torn[20] ^= 1;
        let rejected = Snapshot::new(1, vec![b'a', 0xff]).encode();
        for (what, position, bytes) in [
            ("torn", 1, torn),
            ("at another position", 2, good),
            ("refused by the machine", 1, rejected),
        ] {
            let [(mut off, _), (mut inline, _)] = both_joiners(position, &bytes, &[]);
            decode_elsewhere(&mut off);
            for (t, c) in [(1, &mut off), (2, &mut inline)] {
                c.request(t, command(9, 2, b"b"));
            }
            let (
                Some((_, Response::Error { message: m_off, .. })),
                Some((
                    _,
                    Response::Error {
                        message: m_inline, ..
                    },
                )),
            ) = (off.take_replies().pop(), inline.take_replies().pop())
            else {
                panic!("{what}: a replica that could not install its state answered");
            };
            assert!(
                m_inline.contains("cannot install the transferred state"),
                "{what}: {m_inline}"
            );
            assert_eq!(m_off, m_inline, "{what}");
        }
    }

    /// A restarting backend whose state is a replica's after one applied command.
    fn restarting_with_one_applied() -> Restarting {
        let mut member = core(16);
        deliver(&mut member, cmd(9, 1, 0, b"a"));
        Restarting {
            state: Some((1, member.snapshot().encode())),
            restarting: Some("agreeing on the restart view".into()),
            holds: true,
        }
    }

    #[test]
    fn the_view_that_carried_a_decoded_state_is_not_offered_a_state_again() {
        let mut backend = restarting_with_one_applied();
        let state = backend.state.clone().expect("a state").1;
        let mut r = core(16);
        r.await_restart(backend.restarting().unwrap());
        r.decode_off_thread();
        r.upcalls_from(&mut backend, [view(1), at(1, cmd(9, 2, 1, b"b"))]);
        decode_elsewhere(&mut r);
        // A backend that would offer another state now: the kept view carried the one just
        // installed, so applying it must not take a second one (nor re-apply the backlog).
        backend.state = Some((0, state));
        r.upcalls_from(&mut backend, std::iter::empty());
        assert!(
            backend.state.is_some(),
            "the view's state was taken from the backend a second time"
        );
        assert_eq!((r.applied(), r.backlog()), (2, 0));
    }

    #[test]
    fn upcalls_beyond_the_install_backlog_bound_stop_the_replica_naming_it() {
        let mut backend = restarting_with_one_applied();
        let mut r = ReplicaCore::new(
            NodeId(0),
            Append::default(),
            CoreConfig {
                max_install_backlog: 4,
                ..CoreConfig::default()
            },
        )
        .unwrap();
        r.await_restart(backend.restarting().unwrap());
        r.decode_off_thread();
        let replay = (1..=3).map(|p| at(p, cmd(9, p + 1, p, b"r")));
        r.upcalls_from(&mut backend, std::iter::once(view(1)).chain(replay));
        assert_eq!(r.backlog(), 4, "the view and three deliveries are kept");
        r.request(1, command(9, 9, b"x"));
        assert!(
            matches!(r.take_replies().pop(), Some((_, Response::Error { .. }))),
            "installing: unavailable"
        );
        r.upcalls_from(&mut backend, [at(4, cmd(9, 5, 4, b"r"))]);
        r.request(2, command(9, 9, b"x"));
        let Some((_, Response::Error { message, .. })) = r.take_replies().pop() else {
            panic!("a replica past its install backlog answered");
        };
        assert!(message.contains("max_install_backlog"), "{message}");
        assert_eq!(r.backlog(), 4, "nothing kept past the bound");
    }

    #[test]
    fn the_backlog_is_applied_a_slice_a_turn_and_a_restart_completes_after_it() {
        let mut backend = restarting_with_one_applied();
        let mut r = core(16);
        r.await_restart(backend.restarting().unwrap());
        r.decode_off_thread();
        let catch_up = CoreConfig::default().install_catch_up;
        let n = 3 * catch_up as u64;
        let replay = (1..=n).map(|p| at(p, cmd(9, p + 1, p, b"r")));
        r.upcalls_from(&mut backend, std::iter::once(view(1)).chain(replay));
        // The backend's restart completes while the state is decoded: the replica goes on
        // restarting until it applied what the backend replayed.
        backend.restarting = None;
        decode_elsewhere(&mut r);
        let mut backlog = vec![r.backlog()];
        let mut next = n + 1;
        while r.backlog() > 0 {
            let seq = backlog.len() as u64;
            r.upcalls_from(&mut backend, [at(next, cmd(5, seq, seq - 1, b"n"))]);
            next += 1;
            assert!(r.is_restarting() || r.backlog() == 0);
            backlog.push(r.backlog());
        }
        assert_eq!(
            backlog,
            vec![
                1 + n as usize,
                1 + n as usize - catch_up,
                1 + n as usize - 2 * catch_up,
                1,
                0
            ][..backlog.len()]
        );
        assert!(
            !r.is_restarting(),
            "the restart completed once the backlog was applied"
        );
        r.request(1, command(9, n + 1, b"r"));
        assert_eq!(
            r.take_replies(),
            vec![(1, len(1 + n))],
            "a retry of the replay's last"
        );
    }

    /// A member's backend that joiners ask for the state, checking what it is handed as
    /// `Group::provide_state` does (refused while frozen, at a position before the view's
    /// first or past its next, and above `max` bytes as `TooLarge`; while `refuse` is set,
    /// every state as `Refused`); it records every state it is handed, taken or not.
    #[derive(Default)]
    struct Serving {
        wanted: bool,
        frozen: bool,
        first: u64,
        next: u64,
        max: Option<usize>,
        refuse: bool,
        offered: Vec<u64>,
        provided: Vec<(u64, Vec<u8>)>,
    }

    impl Serving {
        /// The replica is handed `upcalls`, which the backend tracks as `Group` does: a
        /// delivery moves its next position, a wedge freezes it, a view sets its first
        /// position and resets what was asked (`asked`: a joiner of the new view asks).
        fn hand(
            &mut self,
            r: &mut ReplicaCore<Captured>,
            upcalls: Vec<Upcall<Delivery>>,
            asked: bool,
        ) {
            for u in &upcalls {
                match u {
                    Upcall::Deliver(d) => self.next = d.position + 1,
                    Upcall::Wedged => self.frozen = true,
                    Upcall::View(_) => {
                        self.frozen = false;
                        self.first = self.next;
                        self.wanted = asked;
                    }
                    _ => {}
                }
            }
            r.upcalls_from(self, upcalls);
        }
    }

    inert_order!(Serving, 0, Ok(()));

    impl StateTransfer for Serving {
        fn holds_state(&self) -> bool {
            true
        }
        fn state_wanted(&self) -> bool {
            self.wanted && !self.frozen
        }
        fn provide_state(&mut self, position: u64, state: &[u8]) -> Result<(), TransferError> {
            self.offered.push(position);
            if let Some(max) = self.max.filter(|&m| state.len() > m) {
                return Err(TransferError::TooLarge {
                    len: state.len() as u64,
                    max: max as u64,
                });
            }
            if self.refuse {
                return Err(TransferError::Refused("refused for the test".into()));
            }
            if self.frozen || position < self.first || position > self.next {
                return Err(TransferError::Refused(format!(
                    "position {position} outside [{}, {}] or frozen",
                    self.first, self.next
                )));
            }
            self.wanted = false;
            self.provided.push((position, state.to_vec()));
            Ok(())
        }
        fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
            None
        }
    }

    fn serving_core() -> ReplicaCore<Captured> {
        ReplicaCore::new(NodeId(0), Captured::default(), CoreConfig::default()).unwrap()
    }

    /// A state the backend refuses is not offered again in that view, however many polls
    /// follow (each offer encoded the whole state): too large (counted, logged at `warn`),
    /// or refused otherwise (counted, retried once the view changes), inline and off the
    /// thread; the joiner of the next view is offered it once more, and gets it once the
    /// backend takes it.
    #[test]
    fn a_refused_state_is_not_offered_again_until_the_view_changes() {
        let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let refused = |r: &ReplicaCore<Captured>| {
            let m = r.metrics();
            (count(&m.states_refused), count(&m.states_provided))
        };
        // Inline: too large.
        let mut r = serving_core();
        let mut b = Serving {
            max: Some(1),
            ..Serving::default()
        };
        b.hand(&mut r, vec![view(1), at(0, cmd(9, 1, 0, b"x"))], true);
        assert_eq!(b.offered, [1], "offered once, refused as too large");
        for i in 1..20u64 {
            b.hand(&mut r, vec![at(i, cmd(9, i + 1, i, b"x"))], true);
            b.hand(&mut r, Vec::new(), true);
        }
        assert_eq!(
            b.offered,
            [1],
            "a state refused as too large was offered again in the same view"
        );
        assert_eq!(refused(&r), (1, 0));
        // The joiner of the next view is offered it once more: refused again, once.
        b.hand(&mut r, vec![Upcall::Wedged], true);
        b.hand(&mut r, vec![view(2)], true);
        for _ in 0..5 {
            b.hand(&mut r, Vec::new(), true);
        }
        assert_eq!(b.offered, [1, 20], "one offer in view 2");
        assert_eq!(refused(&r), (2, 0));
        // A transient refusal: not offered again in the view either.
        b.max = None;
        b.refuse = true;
        b.hand(&mut r, vec![Upcall::Wedged, view(3)], true);
        for _ in 0..5 {
            b.hand(&mut r, Vec::new(), true);
        }
        assert_eq!(b.offered, [1, 20, 20], "one offer in view 3");
        assert_eq!(refused(&r), (3, 0));
        // Taken once the backend takes it, in the next view.
        b.refuse = false;
        b.hand(&mut r, vec![Upcall::Wedged, view(4)], true);
        assert_eq!(b.provided.iter().map(|p| p.0).collect::<Vec<_>>(), [20]);
        assert_eq!(refused(&r), (3, 1));
        // Off the thread: the encoded state refused, nothing captured again in that view.
        let mut r = serving_core();
        r.serve_off_thread();
        let mut b = Serving {
            max: Some(1),
            ..Serving::default()
        };
        b.hand(&mut r, vec![view(1), at(0, cmd(9, 1, 0, b"x"))], true);
        let job = r.take_serve().expect("captured in view 1");
        assert!(!r.provide_encoded(&mut b, job.run()), "refused");
        for i in 1..10u64 {
            b.hand(&mut r, vec![at(i, cmd(9, i + 1, i, b"x"))], true);
            assert!(
                r.take_serve().is_none(),
                "a state refused as too large was captured again in the same view"
            );
        }
        assert_eq!((b.offered.as_slice(), refused(&r)), (&[1][..], (1, 0)));
        b.max = None;
        b.hand(&mut r, vec![Upcall::Wedged, view(2)], true);
        let job = r.take_serve().expect("captured anew in view 2");
        assert!(r.provide_encoded(&mut b, job.run()));
        assert_eq!(b.provided.iter().map(|p| p.0).collect::<Vec<_>>(), [10]);
        assert_eq!(
            count(&r.metrics().states_provided_off_thread),
            1,
            "provided off the thread"
        );
    }

    /// The state a joiner asks for is captured on the replica's thread and handed out to be
    /// encoded; the replica applies and answers meanwhile and captures no second one; the
    /// encoded bytes are provided at the capture's position, equal to what the inline path
    /// provides there.
    #[test]
    fn a_state_served_off_the_thread_is_captured_at_its_position_and_provided_when_encoded() {
        let mut inline = serving_core();
        let mut off = serving_core();
        off.serve_off_thread();
        let (mut bi, mut bo) = (Serving::default(), Serving::default());
        let first: Vec<_> = (0..3u64).map(|i| at(i, cmd(9, i + 1, i, b"x"))).collect();
        bi.hand(&mut inline, first.clone(), false);
        bo.hand(&mut off, first, false);
        bi.wanted = true;
        bo.wanted = true;
        bi.hand(&mut inline, Vec::new(), false);
        bo.hand(&mut off, Vec::new(), false);
        assert_eq!(bi.provided.len(), 1, "inline: provided at once");
        assert_eq!(inline.take_serve().map(|j| j.position()), None);
        let job = off.take_serve().expect("a state to encode off the thread");
        assert_eq!(job.position(), 3);
        assert!(
            off.is_serving() && bo.offered.is_empty(),
            "nothing provided yet"
        );
        // It applies and answers while the state is encoded, and captures no other.
        bo.hand(&mut off, vec![at(3, cmd(9, 4, 3, b"y"))], false);
        off.request(1, command(7, 1, b"z"));
        bo.hand(&mut off, vec![at(4, cmd(7, 1, 0, b"z"))], false);
        assert_eq!(off.take_replies(), vec![(1, len(5))]);
        assert!(off.take_serve().is_none(), "one encode at a time");
        let encoded = std::thread::spawn(move || job.run()).join().unwrap();
        assert_eq!(encoded.position(), 3);
        assert!(off.provide_encoded(&mut bo, encoded));
        assert!(!off.is_serving());
        assert_eq!(
            bo.provided, bi.provided,
            "the inline path's state at position 3"
        );
        let m = off.metrics();
        let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            (
                count(&m.states_provided),
                count(&m.states_provided_off_thread)
            ),
            (1, 1)
        );
        // Provided: not asked again in this view.
        bo.hand(&mut off, Vec::new(), false);
        assert!(off.take_serve().is_none());
        // A machine without a capture is served inline by a core that serves off its thread.
        let mut plain = core(16);
        plain.serve_off_thread();
        let mut b = Serving {
            wanted: true,
            next: 1,
            ..Serving::default()
        };
        plain.upcalls_from(&mut b, [at(0, cmd(9, 1, 0, b"x"))]);
        assert!(plain.take_serve().is_none());
        assert_eq!(b.provided.len(), 1);
    }

    /// A state encoded off the thread is provided in the view it was captured in, and in a
    /// later one only if nothing was delivered since its capture: a view change with
    /// nothing delivered (view 2 starts at the capture's position) hands it over without a
    /// second encode; so do three view changes during one encode, the result arriving while
    /// wedged (kept until the joiner of the next view asks); a delivery between the capture
    /// and the new view drops it, and the joiner of that view gets a state captured in it.
    #[test]
    fn a_state_encoded_off_the_thread_survives_view_changes_without_deliveries() {
        let mut r = serving_core();
        r.serve_off_thread();
        let mut b = Serving::default();
        b.hand(&mut r, vec![view(1), at(0, cmd(9, 1, 0, b"x"))], true);
        let job = r.take_serve().expect("captured in view 1");
        assert_eq!(job.position(), 1);
        // The view changes while it is encoded, with nothing delivered after the capture:
        // view 2 starts at the capture's position.
        b.hand(&mut r, vec![Upcall::Wedged], true);
        b.hand(&mut r, vec![view(2)], true);
        assert_eq!((b.first, b.next), (1, 1));
        assert!(r.take_serve().is_none(), "one encode at a time");
        assert!(
            r.provide_encoded(&mut b, job.run()),
            "a state of view 1 with nothing delivered since is provided in view 2"
        );
        assert_eq!(b.provided.iter().map(|p| p.0).collect::<Vec<_>>(), [1]);
        assert_eq!(Snapshot::decode(&b.provided[0].1).unwrap(), r.snapshot());
        b.hand(&mut r, Vec::new(), true);
        assert!(r.take_serve().is_none(), "provided without a second encode");
        // Churn: three view changes during one encode, the result arriving while wedged.
        b.hand(&mut r, vec![view(3)], true);
        let job = r.take_serve().expect("captured in view 3");
        for v in 4..=5 {
            b.hand(&mut r, vec![Upcall::Wedged], true);
            b.hand(&mut r, vec![view(v)], true);
        }
        b.hand(&mut r, vec![Upcall::Wedged], true);
        assert!(!r.provide_encoded(&mut b, job.run()), "wedged: kept");
        assert_eq!(b.offered, [1], "nothing handed over while wedged");
        b.hand(&mut r, vec![view(6)], true);
        assert_eq!(
            b.provided.iter().map(|p| p.0).collect::<Vec<_>>(),
            [1, 1],
            "the kept state is provided to the joiner of view 6"
        );
        assert!(r.take_serve().is_none(), "without another encode");
        // A delivery between the capture and the new view: dropped, captured anew.
        b.hand(&mut r, vec![view(7)], true);
        let stale = r.take_serve().expect("captured in view 7");
        b.hand(&mut r, vec![Upcall::Wedged], true);
        b.hand(&mut r, vec![at(1, cmd(9, 2, 1, b"y")), view(8)], true);
        assert_eq!((b.first, b.next), (2, 2));
        assert!(!r.provide_encoded(&mut b, stale.run()));
        assert_eq!(
            b.offered,
            [1, 1],
            "a state of view 7 at 1 was handed over in view 8"
        );
        b.hand(&mut r, Vec::new(), true);
        let fresh = r.take_serve().expect("captured in view 8");
        assert_eq!(fresh.position(), 2);
        assert!(r.provide_encoded(&mut b, fresh.run()));
        assert_eq!(Snapshot::decode(&b.provided[2].1).unwrap(), r.snapshot());
        // Kept (no joiner asks yet), then a view change with a delivery: dropped.
        b.hand(&mut r, vec![view(9)], true);
        let kept = r.take_serve().expect("captured in view 9");
        b.wanted = false;
        assert!(!r.provide_encoded(&mut b, kept.run()));
        b.hand(&mut r, vec![Upcall::Wedged], true);
        b.hand(&mut r, vec![at(2, cmd(9, 3, 2, b"z")), view(10)], true);
        assert_eq!(b.offered, [1, 1, 2]);
        let fresh = r
            .take_serve()
            .expect("the kept state dropped, captured in view 10");
        assert_eq!(fresh.position(), 3);
        let m = r.metrics();
        assert_eq!(
            m.states_provided_off_thread
                .load(std::sync::atomic::Ordering::Relaxed),
            3
        );
    }

    /// s24 (docs/MEMBERSHIP.md, fiftieth part): a group that delivers *and* changes view
    /// during every encode makes every state encoded off the thread stale (below the new
    /// view's first position). After two in a row the joiner is served on the replica's thread
    /// at once, so it gets a state within a bounded number of turns; the serve after that
    /// goes off the thread again.
    #[test]
    fn a_joiner_gets_a_state_when_the_view_changes_with_deliveries_during_every_encode() {
        let mut r = serving_core();
        r.serve_off_thread();
        let mut b = Serving::default();
        b.hand(&mut r, vec![view(1), at(0, cmd(9, 1, 0, b"x"))], true);
        let (mut position, mut v) = (1u64, 1u64);
        let mut encodes = 0;
        while b.provided.is_empty() && encodes < 10 {
            let mut job = r.take_serve().map(ServeJob::run);
            assert!(job.is_some(), "a state to encode off the thread");
            encodes += 1;
            // During the encode: the view wedges (the first result arrives then and is kept,
            // the others after the next view), then one delivery and a new view.
            b.hand(&mut r, vec![Upcall::Wedged], true);
            let kept_first = encodes == 1;
            if kept_first && let Some(encoded) = job.take() {
                assert!(!r.provide_encoded(&mut b, encoded), "wedged: kept");
            }
            v += 1;
            let delivery = at(position, cmd(9, position + 1, position, b"y"));
            position += 1;
            b.hand(&mut r, vec![delivery, view(v)], true);
            assert_eq!((b.first, b.next), (position, position));
            if let Some(encoded) = job.take() {
                r.provide_encoded(&mut b, encoded);
            }
            if b.provided.is_empty() {
                // The next turn captures anew (a kept state was dropped in this one already).
                b.hand(&mut r, Vec::new(), true);
            }
        }
        assert_eq!(
            b.provided.iter().map(|p| p.0).collect::<Vec<_>>(),
            [3],
            "the joiner got no state in {encodes} encodes (offers at {:?})",
            b.offered
        );
        assert_eq!(encodes, 2, "served after two stale encodes");
        assert_eq!(Snapshot::decode(&b.provided[0].1).unwrap(), r.snapshot());
        let m = r.metrics().clone();
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            (
                load(&m.serves_stale),
                load(&m.states_provided),
                load(&m.states_provided_off_thread)
            ),
            (2, 1, 0),
            "two stale, then one served on the replica's thread"
        );
        assert!(!r.is_serving() && r.take_serve().is_none());
        // The next joiner's state goes off the thread again, and fits.
        b.hand(&mut r, vec![Upcall::Wedged], false);
        b.hand(&mut r, vec![view(v + 1)], true);
        let job = r.take_serve().expect("off the thread again");
        assert!(r.provide_encoded(&mut b, job.run()));
        assert_eq!(load(&m.states_provided_off_thread), 1);
        // One stale encode after a success does not send the next inline.
        b.hand(&mut r, vec![view(v + 2)], true);
        let job = r.take_serve().expect("captured");
        b.hand(&mut r, vec![Upcall::Wedged], true);
        let delivery = at(position, cmd(9, position + 1, position, b"z"));
        b.hand(&mut r, vec![delivery, view(v + 3)], true);
        assert!(!r.provide_encoded(&mut b, job.run()), "stale: dropped");
        b.hand(&mut r, Vec::new(), true);
        assert!(
            r.take_serve().is_some(),
            "one stale encode: captured off the thread again"
        );
        assert_eq!(load(&m.serves_stale), 3);
    }

    /// s24 follow-up (fifty-third part): the run of stale drops that sends a serve inline
    /// ends when no joiner asks in a later view than the last drop, and when the backend
    /// refuses a state, not only when a state is provided: a later joiner's first stale
    /// encode is then dropped and captured off the thread again, not served inline.
    #[test]
    fn a_run_of_stale_serves_ends_when_no_joiner_asks_or_the_state_is_refused() {
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        for refused in [false, true] {
            let mut r = serving_core();
            r.serve_off_thread();
            let mut b = Serving::default();
            b.hand(&mut r, vec![view(1), at(0, cmd(9, 1, 0, b"x"))], true);
            let mut position = 1u64;
            // One encode made stale: the view wedges, one entry is delivered and view `v`
            // is installed (its joiner asks if `asked`) before the result comes back.
            let mut stale = |r: &mut ReplicaCore<Captured>, b: &mut Serving, v: u64, asked| {
                let job = r.take_serve().expect("a state to encode off the thread");
                b.hand(r, vec![Upcall::Wedged], true);
                let delivery = at(position, cmd(9, position + 1, position, b"y"));
                position += 1;
                b.hand(r, vec![delivery, view(v)], asked);
                r.provide_encoded(b, job.run())
            };
            assert!(!stale(&mut r, &mut b, 2, false), "stale: dropped");
            assert_eq!(load(&r.metrics().serves_stale), 1);
            if refused {
                // A joiner asks; its state fits but the backend refuses it.
                b.wanted = true;
                b.hand(&mut r, Vec::new(), true);
                b.refuse = true;
                let job = r.take_serve().expect("captured");
                assert!(!r.provide_encoded(&mut b, job.run()), "refused");
                b.refuse = false;
                assert_eq!(load(&r.metrics().states_refused), 1);
            } else {
                // The joiner no longer asks, in a later view either.
                b.hand(&mut r, Vec::new(), false);
                b.hand(&mut r, vec![Upcall::Wedged], false);
                b.hand(&mut r, vec![view(3)], false);
            }
            // A later joiner: its first encode goes stale.
            b.hand(&mut r, vec![Upcall::Wedged], false);
            b.hand(&mut r, vec![view(4)], true);
            let served = stale(&mut r, &mut b, 5, true);
            assert_eq!(load(&r.metrics().serves_stale), 2);
            assert!(
                !served && b.provided.is_empty() && r.take_serve().is_none(),
                "refused {refused}: a later joiner's first stale encode was served inline \
                 (offers at {:?})",
                b.offered
            );
            // The next turn captures off the thread again.
            b.hand(&mut r, Vec::new(), true);
            assert!(
                r.take_serve().is_some(),
                "refused {refused}: captured again"
            );
        }
    }

    /// An encode lost (its thread panicked or could not be started) is served on the
    /// replica's thread at once, and the next serve is encoded off the thread again; three
    /// losses in a row (a success resets the count) make the replica encode on its thread
    /// for good.
    #[test]
    fn a_lost_encode_is_served_inline_and_retried_off_the_thread_up_to_three_times() {
        let mut r = serving_core();
        r.serve_off_thread();
        let mut b = Serving::default();
        b.hand(&mut r, vec![view(1), at(0, cmd(9, 1, 0, b"x"))], false);
        let lose = |r: &mut ReplicaCore<Captured>, b: &mut Serving, v: u64| {
            b.hand(r, vec![view(v)], true);
            let job = r.take_serve().expect("encoded off the thread");
            let (position, views) = job.tag();
            let lost = ServeJob::lost(position, views, ServeLost::Panicked("boom".into()));
            assert!(matches!(lost.lost(), Some(ServeLost::Panicked(_))));
            assert!(r.provide_encoded(b, lost), "served inline at once");
            assert!(r.take_serve().is_none());
        };
        let count = |r: &ReplicaCore<Captured>| {
            let m = r.metrics();
            let c = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
            (c(&m.states_provided), c(&m.states_provided_off_thread))
        };
        lose(&mut r, &mut b, 2);
        lose(&mut r, &mut b, 3);
        assert_eq!(count(&r), (2, 0));
        // Retried off the thread: it works, and the count starts over.
        b.hand(&mut r, vec![view(4)], true);
        let job = r
            .take_serve()
            .expect("retried off the thread after two losses");
        assert!(r.provide_encoded(&mut b, job.run()));
        assert_eq!(count(&r), (3, 1));
        lose(&mut r, &mut b, 5);
        lose(&mut r, &mut b, 6);
        lose(&mut r, &mut b, 7);
        // Three in a row: on the replica's thread from now on.
        b.hand(&mut r, vec![view(8)], true);
        assert!(r.take_serve().is_none(), "encoded on the thread for good");
        assert_eq!(count(&r), (7, 1));
        assert_eq!(Snapshot::decode(&b.provided[6].1).unwrap(), r.snapshot());
    }

    /// The serve types print their position and sizes, never the state's bytes.
    #[test]
    fn serve_jobs_and_encoded_states_print_without_their_bytes() {
        let mut r = serving_core();
        r.serve_off_thread();
        let mut b = Serving::default();
        b.hand(&mut r, vec![view(1), at(0, cmd(9, 1, 0, b"secret"))], true);
        let job = r.take_serve().expect("captured");
        assert!(format!("{job:?}").starts_with("ServeJob { position: 1, view_changes: 1"));
        let encoded = job.run();
        let shown = format!("{encoded:?}");
        assert!(
            shown.contains("bytes: ") && !shown.contains("115, 101, 99"),
            "{shown}"
        );
        assert!(encoded.lost().is_none());
        let lost = ServeJob::lost(1, 1, ServeLost::Vanished);
        assert!(format!("{lost:?}").contains("lost: Vanished"));
    }
}
