//! The replica runtime: one driver thread per replica runs the ordering backend and the
//! [`ReplicaCore`], and any thread hands it requests through a [`ReplicaHandle`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use squall_ordering::{TotalOrder, Upcall};
use squall_transport::{NodeId, Waker};
use thiserror::Error;
use tokio::sync::{oneshot, watch};

use crate::ConfigError;
use crate::core::{
    BackendStopped, CoreConfig, DecodedState, EncodedState, InstallJob, ReplicaCore, ServeJob,
    ServeLost, StopPhase, Token,
};
use crate::machine::StateMachine;
use crate::metrics::Metrics;
use crate::snapshot::Snapshot;
use crate::status::ReplicaStatus;
use crate::transfer::{StateTransfer, TransferError};
use crate::wire::{ErrorCode, Request, Response};

/// Settings of a replica's runtime.
///
/// ```
/// let cfg = squall_smr::ReplicaConfig::default();
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// The core's settings.
    pub core: CoreConfig,
    /// Requests queued for the driver thread; beyond it [`ReplicaHandle::submit`] answers
    /// [`Busy`].
    pub queue: usize,
    /// Requests the driver takes per loop turn before it polls the backend again.
    pub batch: usize,
    /// The longest the driver parks when idle. The backend and new requests wake it sooner;
    /// this only bounds how late it notices a client that went away.
    pub idle_park: Duration,
}

impl Default for ReplicaConfig {
    fn default() -> ReplicaConfig {
        ReplicaConfig {
            core: CoreConfig::default(),
            queue: 65_536,
            batch: 256,
            idle_park: Duration::from_millis(10),
        }
    }
}

impl ReplicaConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.core.validate()?;
        if self.queue == 0 {
            return Err(ConfigError::new("queue", "must be at least 1"));
        }
        if self.batch == 0 {
            return Err(ConfigError::new("batch", "must be at least 1"));
        }
        if self.idle_park.is_zero() {
            return Err(ConfigError::new(
                "idle_park",
                "must be positive (the driver parks between polls when idle)",
            ));
        }
        Ok(())
    }
}

/// The request queue is full.
///
/// ```
/// assert!(squall_smr::Busy.to_string().contains("full"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error("the replica's request queue is full; retry later or at another replica")]
pub struct Busy;

/// Why a replica could not start or ended badly.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A setting is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The backend could not be built.
    #[error("the ordering backend could not start: {0}")]
    Backend(String),
    /// The driver thread could not be spawned.
    #[error("cannot spawn the replica thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// The driver thread panicked.
    #[error("the replica thread panicked: {0}")]
    Panicked(String),
    /// The replica's backend stopped for good (joining, restarting or serving), or the replica
    /// stopped itself ([`StopPhase::Replica`]): its thread ended by itself
    /// ([`Replica::shutdown`] reports it; the state machine, frozen or never given a state,
    /// is dropped).
    ///
    /// ```
    /// use squall_smr::{BackendStopped, RuntimeError, StopPhase};
    /// let e = RuntimeError::from(BackendStopped {
    ///     reason: "buffered 1048576 deliveries".into(),
    ///     phase: StopPhase::Joining,
    /// });
    /// assert!(e.to_string().contains("join failed"));
    /// ```
    #[error(transparent)]
    BackendStopped(#[from] BackendStopped),
}

enum Job {
    Request {
        req: Request,
        reply: oneshot::Sender<Response>,
    },
    Snapshot(oneshot::Sender<Snapshot>),
    Leave(oneshot::Sender<Result<(), TransferError>>),
    Status(oneshot::Sender<ReplicaStatus>),
}

/// Hands requests to a running replica; cheap to clone, usable from any thread or task.
#[derive(Clone, Debug)]
pub struct ReplicaHandle {
    me: NodeId,
    tx: Sender<Job>,
    /// The queue's other end, to answer jobs that land after the driver stopped taking them
    /// (a job left in the queue would keep its requester waiting: the queue frees its
    /// messages only once every handle is gone).
    rx: Receiver<Job>,
    /// Set when the replica shuts down.
    stop: Arc<AtomicBool>,
    /// Set (before `stop`) when the replica's backend stopped, or the replica stopped itself,
    /// and its thread ended by itself.
    failed: Arc<StopCell>,
    /// Set when the replica's leave completed (its thread runs on until shut down).
    left: Arc<StopCell<String>>,
    waker: Waker,
    metrics: Metrics,
}

impl ReplicaHandle {
    /// This replica's node id.
    pub fn id(&self) -> NodeId {
        self.me
    }

    /// Queues a request without blocking; the response arrives on the returned receiver (it
    /// resolves to an error if the replica shuts down first).
    pub fn submit(&self, req: Request) -> Result<oneshot::Receiver<Response>, Busy> {
        let (reply, rx) = oneshot::channel();
        self.enqueue(Job::Request { req, reply })?;
        Ok(rx)
    }

    /// Asks for a snapshot of the replica's state (state machine, sessions, position), taken
    /// between two deliveries: for backups, and for seeding a new replica with
    /// [`ReplicaCore::restore`].
    pub fn snapshot(&self) -> Result<oneshot::Receiver<Snapshot>, Busy> {
        let (reply, rx) = oneshot::channel();
        self.enqueue(Job::Snapshot(reply))?;
        Ok(rx)
    }

    /// Asks the replica to leave its group gracefully (a backend with dynamic membership, run
    /// by [`Replica::spawn_joinable`]: see [`StateTransfer::leave`]). The receiver resolves
    /// once the backend took the request (or refused it: a fixed group, or a replica outside
    /// any view); the replica then keeps applying until the view without it is installed, and
    /// answers `Unavailable` from then on. Its backend's stop that follows is the leave, not a
    /// failure ([`ReplicaCore::leaving`]): the thread keeps running (a snapshot can still be
    /// taken) until [`Replica::shutdown`], which returns the state machine.
    pub fn leave(&self) -> Result<oneshot::Receiver<Result<(), TransferError>>, Busy> {
        let (reply, rx) = oneshot::channel();
        self.enqueue(Job::Leave(reply))?;
        Ok(rx)
    }

    /// Asks where the replica stands ([`ReplicaStatus`]: its last view, its role in it,
    /// whether it serves, where its leave stands), taken on its thread between two polls.
    /// The receiver fails if the replica's thread ended first (its backend stopped for good:
    /// [`backend_stopped`](Self::backend_stopped) says why).
    ///
    /// ```
    /// use squall_smr::{Replica, ReplicaConfig};
    /// # use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    /// # use squall_smr::{RestoreError, StateMachine, StateTransfer, TransferError};
    /// # use squall_transport::{NodeId, Waker};
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// /// A backend that says which shard it runs.
    /// # struct Sharded;
    /// # impl TotalOrder for Sharded {
    /// #     fn me(&self) -> NodeId { NodeId(2) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Ok(()) }
    /// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
    /// #     fn wait(&mut self, t: std::time::Duration) { std::thread::sleep(t) }
    /// #     fn waker(&self) -> Waker { Waker::noop() }
    /// # }
    /// # impl StateTransfer for Sharded {
    /// #     fn holds_state(&self) -> bool { true }
    /// #     fn state_wanted(&self) -> bool { false }
    /// #     fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
    /// #     fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
    /// #     fn role(&self) -> Option<String> { Some("shard 0".into()) }
    /// # }
    /// let replica = Replica::spawn_joinable(NodeId(2), || Ok::<_, String>(Sharded), Nop, ReplicaConfig::default())?;
    /// let rt = tokio::runtime::Builder::new_current_thread().build()?;
    /// let status = rt.block_on(replica.handle().status()?)?;
    /// assert_eq!(status.role.as_deref(), Some("shard 0"));
    /// assert!(status.serving && !status.leaving && status.left.is_none());
    /// replica.shutdown()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn status(&self) -> Result<oneshot::Receiver<ReplicaStatus>, Busy> {
        let (reply, rx) = oneshot::channel();
        self.enqueue(Job::Status(reply))?;
        Ok(rx)
    }

    /// The reason the backend gave when this replica's leave completed (the view without
    /// it was installed), once it did ([`leave`](Self::leave)); `None` before, and for a
    /// replica that stopped otherwise ([`backend_stopped`](Self::backend_stopped)). The
    /// replica's thread keeps running until [`Replica::shutdown`].
    ///
    /// ```
    /// # use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    /// # use squall_smr::{Replica, ReplicaConfig, RestoreError, StateMachine, StateTransfer, TransferError};
    /// # use squall_transport::{NodeId, Waker};
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// # struct Member;
    /// # impl TotalOrder for Member {
    /// #     fn me(&self) -> NodeId { NodeId(2) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Ok(()) }
    /// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
    /// #     fn wait(&mut self, t: std::time::Duration) { std::thread::sleep(t) }
    /// #     fn waker(&self) -> Waker { Waker::noop() }
    /// # }
    /// # impl StateTransfer for Member {
    /// #     fn holds_state(&self) -> bool { true }
    /// #     fn state_wanted(&self) -> bool { false }
    /// #     fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
    /// #     fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
    /// # }
    /// let replica = Replica::spawn_joinable(NodeId(2), || Ok::<_, String>(Member), Nop, ReplicaConfig::default())?;
    /// assert_eq!(replica.handle().left_reason(), None, "a member that was never asked to leave");
    /// replica.shutdown()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn left_reason(&self) -> Option<String> {
        self.left.get()
    }

    /// Resolves once this replica's leave completed, with [`left_reason`](Self::left_reason)'s
    /// reason: the driver thread notifies it (a server that exits once its replica left waits
    /// on it, and on [`stopped`](Self::stopped) for any other stop). It never resolves for a
    /// replica that does not leave, nor for one whose leave ended in another stop.
    ///
    /// ```
    /// # use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    /// # use squall_smr::{Replica, ReplicaConfig, RestoreError, StateMachine, StateTransfer, TransferError};
    /// # use squall_transport::{NodeId, Waker};
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// # struct Member;
    /// # impl TotalOrder for Member {
    /// #     fn me(&self) -> NodeId { NodeId(2) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Ok(()) }
    /// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
    /// #     fn wait(&mut self, t: std::time::Duration) { std::thread::sleep(t) }
    /// #     fn waker(&self) -> Waker { Waker::noop() }
    /// # }
    /// # impl StateTransfer for Member {
    /// #     fn holds_state(&self) -> bool { true }
    /// #     fn state_wanted(&self) -> bool { false }
    /// #     fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
    /// #     fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
    /// # }
    /// let replica = Replica::spawn_joinable(NodeId(2), || Ok::<_, String>(Member), Nop, ReplicaConfig::default())?;
    /// let h = replica.handle();
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    /// // Never asked to leave: `left` does not resolve.
    /// let waited = rt.block_on(async {
    ///     tokio::time::timeout(std::time::Duration::from_millis(20), h.left()).await
    /// });
    /// assert!(waited.is_err());
    /// replica.shutdown()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn left(&self) -> String {
        self.left.wait().await
    }

    /// Why this replica's backend stopped for good, once it did ([`BackendStopped`], with
    /// what the replica was doing then; its thread ended), or why the replica stopped itself
    /// ([`StopPhase::Replica`]). Every request is answered [`ErrorCode::Unavailable`] with
    /// this message from then on.
    ///
    /// ```
    /// use squall_smr::wire::{ErrorCode, ReadMode, Request, Response};
    /// use squall_smr::{Replica, ReplicaConfig, StopPhase};
    /// # use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    /// # use squall_smr::{RestoreError, StateMachine, StateTransfer, TransferError};
    /// # use squall_transport::{NodeId, Waker};
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// # /// A backend that has lost its majority.
    /// # struct Lost;
    /// # impl TotalOrder for Lost {
    /// #     fn me(&self) -> NodeId { NodeId(2) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::Stopped("lost its majority".into())) }
    /// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
    /// #     fn wait(&mut self, t: std::time::Duration) { std::thread::sleep(t) }
    /// #     fn waker(&self) -> Waker { Waker::noop() }
    /// # }
    /// # impl StateTransfer for Lost {
    /// #     fn holds_state(&self) -> bool { true }
    /// #     fn state_wanted(&self) -> bool { false }
    /// #     fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
    /// #     fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
    /// #     fn stopped(&self) -> Option<String> { Some("lost its majority".into()) }
    /// # }
    /// // A backend that had stopped before the replica started.
    /// let replica = Replica::spawn_joinable(NodeId(2), || Ok::<_, String>(Lost), Nop, ReplicaConfig::default())?;
    /// let h = replica.handle();
    /// let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    /// let e = loop {
    ///     if let Some(e) = h.backend_stopped() { break e; }
    ///     assert!(std::time::Instant::now() < deadline, "the stop is published");
    ///     std::thread::sleep(std::time::Duration::from_millis(1));
    /// };
    /// assert_eq!((e.phase, e.reason.as_str()), (StopPhase::Starting, "lost its majority"));
    /// let rt = tokio::runtime::Builder::new_current_thread().build()?;
    /// let read = Request::Read { mode: ReadMode::Local, query: Vec::new() };
    /// assert!(matches!(rt.block_on(h.call(read)),
    ///     Response::Error { code: ErrorCode::Unavailable, message } if message.contains("majority")));
    /// assert!(replica.shutdown().is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn backend_stopped(&self) -> Option<BackendStopped> {
        self.failed.get()
    }

    /// Resolves once this replica's backend stopped for good or the replica stopped itself,
    /// with what [`backend_stopped`](Self::backend_stopped) then returns: the driver thread
    /// notifies it as it ends, so an `async` caller (a server that must exit when its replica
    /// stops) learns of the stop at once, without polling. Resolves at once if the stop
    /// happened already. A driver thread that panics (its backend's or its state machine's
    /// code panicked) resolves it too, as it unwinds, with phase [`StopPhase::Replica`] and
    /// a reason saying the driver panicked ([`Replica::shutdown`] returns the panic's message
    /// as [`RuntimeError::Panicked`]). It never resolves for a replica shut down without such
    /// a stop ([`Replica::shutdown`]): select it against whatever else ends the caller's wait.
    ///
    /// ```
    /// use std::time::Duration;
    /// use squall_smr::{Replica, ReplicaConfig, StopPhase};
    /// # use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    /// # use squall_smr::{RestoreError, StateMachine, StateTransfer, TransferError};
    /// # use squall_transport::{NodeId, Waker};
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// # /// A backend that has lost its majority.
    /// # struct Lost;
    /// # impl TotalOrder for Lost {
    /// #     fn me(&self) -> NodeId { NodeId(2) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::Stopped("lost its majority".into())) }
    /// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
    /// #     fn wait(&mut self, t: std::time::Duration) { std::thread::sleep(t) }
    /// #     fn waker(&self) -> Waker { Waker::noop() }
    /// # }
    /// # impl StateTransfer for Lost {
    /// #     fn holds_state(&self) -> bool { true }
    /// #     fn state_wanted(&self) -> bool { false }
    /// #     fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
    /// #     fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
    /// #     fn stopped(&self) -> Option<String> { Some("lost its majority".into()) }
    /// # }
    /// // A backend that had stopped before the replica started.
    /// let replica = Replica::spawn_joinable(NodeId(2), || Ok::<_, String>(Lost), Nop, ReplicaConfig::default())?;
    /// let h = replica.handle();
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    /// let stop = rt.block_on(async {
    ///     // The bound only guards the example against a hang.
    ///     tokio::time::timeout(Duration::from_secs(10), h.stopped()).await
    /// })?;
    /// assert_eq!((stop.phase, stop.reason.as_str()), (StopPhase::Starting, "lost its majority"));
    /// assert_eq!(h.backend_stopped(), Some(stop));
    /// assert!(replica.shutdown().is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn stopped(&self) -> BackendStopped {
        self.failed.wait().await
    }

    fn enqueue(&self, job: Job) -> Result<(), Busy> {
        if self.stop.load(Ordering::Acquire) {
            if let Some(e) = self.failed.get() {
                // The replica ended by itself: answer with why, not as a full queue.
                refuse(job, &stopped_message(Some(&e)));
                return Ok(());
            }
            self.metrics.add(&self.metrics.busy, 1);
            return Err(Busy);
        }
        match self.tx.try_send(job) {
            Ok(()) => {
                self.waker.wake();
                if self.stop.load(Ordering::Acquire) {
                    // The driver may have stopped (and drained the queue) meanwhile.
                    refuse_queued(&self.rx, &stopped_message(self.failed.get().as_ref()));
                }
                Ok(())
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.metrics.add(&self.metrics.busy, 1);
                Err(Busy)
            }
        }
    }

    /// Submits a request and awaits its response; a full queue or a replica that shut down
    /// answers as an error response.
    pub async fn call(&self, req: Request) -> Response {
        match self.submit(req) {
            Ok(rx) => rx.await.unwrap_or_else(|_| Response::Error {
                code: ErrorCode::Unavailable,
                message: "the replica shut down".into(),
            }),
            Err(Busy) => Response::Error {
                code: ErrorCode::Busy,
                message: Busy.to_string(),
            },
        }
    }

    /// The replica's counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}

/// A running replica: a driver thread that owns the backend and the state machine.
///
/// ```
/// use std::time::Duration;
/// use squall_round_robin::{Config, RoundRobin};
/// use squall_smr::wire::{Request, Response};
/// use squall_smr::{Replica, ReplicaConfig, RestoreError, StateMachine};
/// use squall_transport::{NodeId, Transport};
/// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
///
/// #[derive(Default)]
/// struct Log(Vec<u8>);
/// impl StateMachine for Log {
///     fn apply(&mut self, c: &[u8]) -> Vec<u8> { self.0.extend_from_slice(c); self.0.clone() }
///     fn query(&self, _: &[u8]) -> Vec<u8> { self.0.clone() }
///     fn snapshot(&self) -> Vec<u8> { self.0.clone() }
///     fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> { self.0 = s.to_vec(); Ok(()) }
/// }
///
/// let members: Vec<NodeId> = (0..2).map(NodeId).collect();
/// let cfg = Config::new(members.clone());
/// let layout = RoundRobin::<squall_transport_mem::threaded::ThreadedNode>::layout(&cfg)?;
/// let nodes = ThreadedFabric::new(ThreadedConfig::default())?.cluster(2, &layout)?;
/// let replicas: Vec<Replica<Log>> = nodes
///     .into_iter()
///     .map(|t| {
///         let cfg = cfg.clone();
///         Replica::spawn(t.local_id(), move || RoundRobin::new(t, cfg), Log::default(), ReplicaConfig::default())
///     })
///     .collect::<Result<_, _>>()?;
/// let rt = tokio::runtime::Builder::new_current_thread().build()?;
/// let put = Request::Command { client: 1, seq: 1, acked: 0, payload: b"a".to_vec() };
/// assert_eq!(rt.block_on(replicas[0].handle().call(put)), Response::Ok(b"a".to_vec()));
/// for r in replicas {
///     assert_eq!(r.shutdown()?.0, b"a");
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Replica<S> {
    handle: ReplicaHandle,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<S>>,
}

/// How the driver reaches a backend's state-transfer side, if it has one.
type TransferOf<B> = fn(&mut B) -> Option<&mut dyn StateTransfer>;

impl<S: StateMachine> Replica<S> {
    /// Starts replica `me`: `make` builds the ordering backend on the driver thread (backends
    /// need not be `Send`), which then runs until [`shutdown`](Self::shutdown) (or, for a
    /// replica whose backend stops for good, until then: see
    /// [`spawn_joinable`](Self::spawn_joinable); a backend without [`StateTransfer`] reports
    /// its stop as [`SubmitError::Stopped`](squall_ordering::SubmitError::Stopped)).
    pub fn spawn<B, E, F>(
        me: NodeId,
        make: F,
        sm: S,
        cfg: ReplicaConfig,
    ) -> Result<Replica<S>, RuntimeError>
    where
        B: TotalOrder + 'static,
        E: std::fmt::Display,
        F: FnOnce() -> Result<B, E> + Send + 'static,
    {
        Replica::start(me, make, sm, cfg, |_| None)
    }

    /// Like [`spawn`](Self::spawn), for a backend with dynamic membership that moves state to
    /// joiners ([`StateTransfer`]). When a joiner asks this replica, the driver provides its
    /// [`Snapshot`] (state machine, sessions, position) at its current delivery position. A
    /// replica whose backend does not hold the state yet ([`StateTransfer::holds_state`]) starts
    /// *joining*: it answers requests `Unavailable` until the transferred snapshot arrives, then
    /// installs it and applies the deliveries that follow, ending in the same state as every
    /// other replica at the same position (see [`ReplicaCore::upcalls_from`]). A backend that
    /// restarts from durable logs ([`StateTransfer::restarting`]) makes the replica
    /// *restarting* ([`ReplicaCore::await_restart`]): it applies the replay (and a persisted
    /// state the backend hands back) and answers requests `Unavailable` until the restart
    /// completed. A state whose machine has a decoder ([`StateMachine::snapshot_decoder`]) is
    /// decoded on a thread of its own (`squall-install-<id>`) while the driver goes on
    /// polling the backend ([`ReplicaCore::decode_off_thread`]). Likewise the state this
    /// replica provides to a joiner, when its machine captures its state
    /// ([`StateMachine::snapshot_encoder`]): captured on the driver's thread, encoded on a
    /// thread of its own (`squall-serve-<id>`), handed to the backend by the driver once
    /// encoded if still wanted ([`ReplicaCore::serve_off_thread`]). A replica whose backend
    /// stops for good ([`StateTransfer::stopped`]; joining, restarting or serving, or stopped
    /// already when the replica starts) stops with [`BackendStopped`]: every request is
    /// answered `Unavailable` with the backend's reason
    /// ([`ReplicaHandle::backend_stopped`]), the driver thread ends, and
    /// [`shutdown`](Self::shutdown) reports [`RuntimeError::BackendStopped`].
    pub fn spawn_joinable<B, E, F>(
        me: NodeId,
        make: F,
        sm: S,
        cfg: ReplicaConfig,
    ) -> Result<Replica<S>, RuntimeError>
    where
        B: StateTransfer + 'static,
        E: std::fmt::Display,
        F: FnOnce() -> Result<B, E> + Send + 'static,
    {
        Replica::start(me, make, sm, cfg, |b| Some(b))
    }

    fn start<B, E, F>(
        me: NodeId,
        make: F,
        sm: S,
        cfg: ReplicaConfig,
        transfer: TransferOf<B>,
    ) -> Result<Replica<S>, RuntimeError>
    where
        B: TotalOrder + 'static,
        E: std::fmt::Display,
        F: FnOnce() -> Result<B, E> + Send + 'static,
    {
        cfg.validate()?;
        let mut core = ReplicaCore::new(me, sm, cfg.core.clone())?;
        let metrics = core.metrics().clone();
        let (tx, rx) = crossbeam_channel::bounded(cfg.queue);
        let handle_rx = rx.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<Waker, String>>();
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let failed = Arc::new(StopCell::default());
        let thread_failed = Arc::clone(&failed);
        let left = Arc::new(StopCell::default());
        let thread_left = Arc::clone(&left);
        let thread = std::thread::Builder::new()
            .name(format!("squall-replica-{}", me.0))
            .spawn(move || {
                let span = tracing::info_span!("replica", id = me.0);
                let _enter = span.enter();
                let _unwind = PanicStop {
                    failed: Arc::clone(&thread_failed),
                    stop: Arc::clone(&thread_stop),
                    rx: rx.clone(),
                };
                let mut backend = match make() {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return core.into_state();
                    }
                };
                if let Some(t) = transfer(&mut backend) {
                    core.decode_off_thread();
                    core.serve_off_thread();
                    if let Some(reason) = t.stopped() {
                        // Whether it held a state or not, it never will: the driver's first
                        // turn ends the thread.
                        core.stop_backend_in(reason, StopPhase::Starting);
                    } else {
                        if !t.holds_state() {
                            tracing::info!("joining: waiting for a state transfer");
                            core.await_state();
                        }
                        if let Some(reason) = t.restarting() {
                            core.await_restart(reason);
                        }
                    }
                }
                let _ = ready_tx.send(Ok(backend.waker()));
                Driver {
                    core,
                    backend,
                    transfer,
                    rx,
                    stop: thread_stop,
                    failed: thread_failed,
                    left: thread_left,
                    cfg,
                    waiting: HashMap::new(),
                    next_token: 0,
                    install: None,
                    serve: None,
                }
                .run()
            })
            .map_err(RuntimeError::Spawn)?;
        let waker = match ready_rx.recv() {
            Ok(Ok(w)) => w,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(RuntimeError::Backend(e));
            }
            Err(_) => {
                return Err(RuntimeError::Panicked(join_message(thread.join().err())));
            }
        };
        Ok(Replica {
            handle: ReplicaHandle {
                me,
                tx,
                rx: handle_rx,
                stop: Arc::clone(&stop),
                failed,
                left,
                waker,
                metrics,
            },
            stop,
            thread: Some(thread),
        })
    }

    /// A handle for submitting requests.
    pub fn handle(&self) -> ReplicaHandle {
        self.handle.clone()
    }

    /// Stops the driver (requests still owed an answer get [`ErrorCode::Unavailable`]) and
    /// returns the state machine; [`RuntimeError::BackendStopped`] if the replica's backend stopped
    /// (its thread had ended by itself).
    pub fn shutdown(mut self) -> Result<S, RuntimeError> {
        self.stop.store(true, Ordering::Release);
        self.handle.waker.wake();
        let sm = match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|e| RuntimeError::Panicked(join_message(Some(e))))?,
            None => return Err(RuntimeError::Panicked("already shut down".into())),
        };
        match self.handle.backend_stopped() {
            Some(e) => Err(RuntimeError::BackendStopped(e)),
            None => Ok(sm),
        }
    }

    /// Whether the driver thread still runs: until [`shutdown`](Self::shutdown), or until the
    /// replica's backend stopped for good or the replica stopped itself
    /// ([`ReplicaHandle::backend_stopped`]).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use squall_smr::{Replica, ReplicaConfig, RuntimeError};
    /// # use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    /// # use squall_smr::{RestoreError, StateMachine, StateTransfer, TransferError};
    /// # use squall_transport::{NodeId, Waker};
    /// # struct Nop;
    /// # impl StateMachine for Nop {
    /// #     fn apply(&mut self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    /// #     fn snapshot(&self) -> Vec<u8> { Vec::new() }
    /// #     fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> { Ok(()) }
    /// # }
    /// # /// A backend that has lost its majority.
    /// # struct Lost;
    /// # impl TotalOrder for Lost {
    /// #     fn me(&self) -> NodeId { NodeId(2) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::Stopped("lost its majority".into())) }
    /// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
    /// #     fn wait(&mut self, t: std::time::Duration) { std::thread::sleep(t) }
    /// #     fn waker(&self) -> Waker { Waker::noop() }
    /// # }
    /// # impl StateTransfer for Lost {
    /// #     fn holds_state(&self) -> bool { true }
    /// #     fn state_wanted(&self) -> bool { false }
    /// #     fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
    /// #     fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
    /// #     fn stopped(&self) -> Option<String> { Some("lost its majority".into()) }
    /// # }
    /// let replica = Replica::spawn_joinable(NodeId(2), || Ok::<_, String>(Lost), Nop, ReplicaConfig::default())?;
    /// // Its backend had stopped: the thread ends by itself.
    /// let deadline = Instant::now() + Duration::from_secs(10);
    /// while replica.is_running() {
    ///     assert!(Instant::now() < deadline, "the thread still runs");
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// assert!(replica.handle().backend_stopped().is_some());
    /// assert!(matches!(replica.shutdown(), Err(RuntimeError::BackendStopped(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl<S> Drop for Replica<S> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.handle.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A replica's stop for good (or its completed leave), once its driver set it (the first one
/// is kept), and the notification of it to [`ReplicaHandle::stopped`] (or `left`).
#[derive(Debug)]
struct StopCell<T = BackendStopped>(watch::Sender<Option<T>>);

impl<T: Clone> Default for StopCell<T> {
    fn default() -> StopCell<T> {
        // The receiver is not kept: each waiter subscribes, and the sender holds the value.
        StopCell(watch::channel(None).0)
    }
}

impl<T: Clone> StopCell<T> {
    /// The stop, once set.
    fn get(&self) -> Option<T> {
        self.0.borrow().clone()
    }

    /// Sets the stop unless one is set already, waking every waiter.
    fn set(&self, stop: T) {
        self.0.send_if_modified(|now| {
            if now.is_some() {
                return false;
            }
            *now = Some(stop);
            true
        });
    }

    /// Resolves with the stop once it is set.
    async fn wait(&self) -> T {
        let mut rx = self.0.subscribe();
        loop {
            let now = rx.borrow_and_update().clone();
            if let Some(stop) = now {
                return stop;
            }
            if rx.changed().await.is_err() {
                // Only once every sender is gone, and `self` holds one: never.
                return std::future::pending().await;
            }
        }
    }
}

/// Held by the driver thread: if the thread unwinds from a panic, sets the replica's stop
/// (phase [`StopPhase::Replica`]) so that [`ReplicaHandle::stopped`] resolves and the handles
/// refuse new requests with why, instead of waiting for a thread that is gone; the requests
/// queued meanwhile are refused with it too, as the driver does at its stop.
struct PanicStop {
    failed: Arc<StopCell>,
    stop: Arc<AtomicBool>,
    rx: Receiver<Job>,
}

impl Drop for PanicStop {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let e = BackendStopped {
                reason: "the replica's driver thread panicked (the panic's message is in the \
                         process's stderr; Replica::shutdown returns it)"
                    .into(),
                phase: StopPhase::Replica,
            };
            tracing::error!(error = %e, "the replica's driver thread panicked: stopping the replica");
            let why = stopped_message(Some(&e));
            self.failed.set(e);
            self.stop.store(true, Ordering::Release);
            refuse_queued(&self.rx, &why);
        }
    }
}

/// Answers every queued job as a stopped replica would ([`refuse`]).
fn refuse_queued(rx: &Receiver<Job>, why: &str) {
    while let Ok(job) = rx.try_recv() {
        refuse(job, why);
    }
}

/// Answers a job as a stopped replica would: a request `Unavailable` with `why`, a leave
/// refused with it, a snapshot dropped (its receiver sees the replica gone).
fn refuse(job: Job, why: &str) {
    match job {
        Job::Request { reply, .. } => {
            let _ = reply.send(Response::Error {
                code: ErrorCode::Unavailable,
                message: why.to_owned(),
            });
        }
        Job::Leave(reply) => {
            let _ = reply.send(Err(TransferError::Refused(why.to_owned())));
        }
        Job::Snapshot(_) | Job::Status(_) => {}
    }
}

/// What a stopped replica answers: why its backend stopped, or that it is shutting down.
fn stopped_message(failed: Option<&BackendStopped>) -> String {
    match failed {
        Some(e) => format!("{e}; retry at another replica"),
        None => "the replica is shutting down".into(),
    }
}

fn join_message(e: Option<Box<dyn std::any::Any + Send>>) -> String {
    match e {
        Some(e) => e
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| e.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into()),
        None => "the thread ended without reporting".into(),
    }
}

/// A driver turn at least this long that is the longest so far is logged (`info`).
const LONG_TURN: Duration = Duration::from_millis(5);

struct Driver<B, S> {
    core: ReplicaCore<S>,
    backend: B,
    transfer: TransferOf<B>,
    rx: Receiver<Job>,
    stop: Arc<AtomicBool>,
    /// Set once the replica's backend stopped, before `stop` (for the handles, and waking
    /// their [`ReplicaHandle::stopped`]).
    failed: Arc<StopCell>,
    /// Set once the replica's leave completed.
    left: Arc<StopCell<String>>,
    cfg: ReplicaConfig,
    waiting: HashMap<Token, oneshot::Sender<Response>>,
    next_token: Token,
    /// The thread decoding a transferred state, and where its result comes.
    install: Option<(JoinHandle<()>, Receiver<DecodedState<S>>)>,
    /// The thread encoding the state for a joiner, and where its result comes.
    serve: Option<(JoinHandle<()>, Receiver<EncodedState>)>,
}

impl<B: TotalOrder, S: StateMachine> Driver<B, S> {
    fn run(mut self) -> S {
        let mut upcalls: Vec<Upcall<squall_ordering::Delivery>> = Vec::new();
        let mut replies = Vec::new();
        let mut turns: u64 = 0;
        let mut longest = Duration::ZERO;
        // The leave's completion was handed to `left` (checked here, not by reading the
        // cell, which would clone its reason every turn).
        let mut told_left = false;
        while !self.stop.load(Ordering::Acquire) {
            turns += 1;
            let turn = std::time::Instant::now();
            let took = self.take_requests();
            self.core.flush_reads();
            while let Some(entry) = self.core.outgoing() {
                match self.backend.submit(entry) {
                    Ok(()) => self.core.submitted(),
                    Err(e) => {
                        if self.core.refused(&e) {
                            break;
                        }
                    }
                }
            }
            let polled = std::time::Instant::now();
            let busy = self.backend.poll(&mut upcalls);
            let applied = std::time::Instant::now();
            self.collect_install();
            match (self.transfer)(&mut self.backend) {
                Some(t) => self.core.upcalls_from(t, upcalls.drain(..)),
                None => {
                    for u in upcalls.drain(..) {
                        self.core.upcall(u);
                    }
                }
            }
            if let Some(job) = self.core.take_install() {
                self.start_install(job);
            }
            // After this poll's upcalls: a view change among them, with a delivery, drops a
            // state encoded before it.
            self.collect_serve();
            if let Some(job) = self.core.take_serve() {
                self.start_serve(job);
            }
            self.core.drain_replies(&mut replies);
            for (t, r) in replies.drain(..) {
                if let Some(tx) = self.waiting.remove(&t) {
                    let _ = tx.send(r);
                }
            }
            if let Some(e) = self.core.backend_stopped() {
                // Its backend stopped for good, or the replica stopped itself: nothing more
                // can happen here.
                tracing::info!(error = %e, "the replica thread ends: the replica stopped");
                self.failed.set(e.clone());
                self.stop.store(true, Ordering::Release);
                break;
            }
            if !told_left && let Some(why) = self.core.left() {
                self.left.set(why.to_owned());
                told_left = true;
            }
            // Now and then (and whenever idle) forget requests nobody waits for any more.
            // Upcalls kept while a state was decoded are applied a slice a turn, without a
            // park between; while it is decoded there is nothing to apply them to.
            let catching_up = self.core.backlog() > 0 && !self.core.is_installing();
            let idle = !busy && took == 0 && !catching_up;
            if turns % 1024 == 0 || (idle && turns % 64 == 0) {
                self.forget_abandoned();
            }
            // How long the backend went unpolled (its heartbeats unsent): parks excluded.
            let took_us = turn.elapsed();
            if took_us > longest {
                longest = took_us;
                let us = took_us.as_micros() as u64;
                self.core
                    .metrics()
                    .longest_turn_us
                    .fetch_max(us, Ordering::Relaxed);
                if took_us >= LONG_TURN {
                    // Where it went: the backend's poll, applying its upcalls (installing a
                    // state, encoding a checkpoint), the rest (requests, submissions, replies).
                    let poll_us = (applied - polled).as_micros() as u64;
                    let apply_us = applied.elapsed().as_micros() as u64;
                    tracing::info!(
                        us,
                        poll_us,
                        apply_us,
                        turn = turns,
                        "longest driver turn so far"
                    );
                }
            }
            if idle {
                self.backend.wait(self.cfg.idle_park);
            }
        }
        // Answer what is still owed and what is still queued, then hand the state back.
        tracing::info!("replica shutting down");
        if let Some((thread, _)) = self.install.take() {
            // Its decode is of no use now: detached, not joined, so a long decode does not
            // hold the shutdown; it ends by itself (its send to the dropped channel fails).
            drop(thread);
        }
        // Likewise an encode for a joiner: the joiner asks another member.
        drop(self.serve.take());
        let why = stopped_message(self.failed.get().as_ref());
        refuse_queued(&self.rx, &why);
        self.core.halt(why);
        self.core.drain_replies(&mut replies);
        for (t, r) in replies.drain(..) {
            if let Some(tx) = self.waiting.remove(&t) {
                let _ = tx.send(r);
            }
        }
        self.core.into_state()
    }

    /// Decodes `job` on a thread of its own, which wakes the driver when done.
    fn start_install(&mut self, job: InstallJob<S>) {
        let (position, bytes) = (job.position(), job.state_bytes());
        let (tx, rx) = crossbeam_channel::bounded(1);
        let waker = self.backend.waker();
        let spawned = std::thread::Builder::new()
            .name(format!("squall-install-{}", self.backend.me().0))
            .spawn(move || {
                let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run()))
                    .unwrap_or_else(|e| {
                        DecodedState::lost(
                            position,
                            bytes,
                            format!("the state decoder panicked: {}", join_message(Some(e))),
                        )
                    });
                let _ = tx.send(decoded);
                waker.wake();
            });
        match spawned {
            Ok(thread) => self.install = Some((thread, rx)),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the install thread");
                self.core.install_decoded(DecodedState::lost(
                    position,
                    bytes,
                    format!("cannot start a thread to decode it: {e}"),
                ));
            }
        }
    }

    /// Installs the state the install thread decoded, once it is done; the machine it
    /// replaces is dropped on a thread of its own (a replica joining again after a restart
    /// replaces a whole replayed state).
    fn collect_install(&mut self) {
        let Some((_, rx)) = &self.install else {
            return;
        };
        let decoded = match rx.try_recv() {
            Ok(decoded) => decoded,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => {
                // Never: the thread sends before it ends, panic or not.
                DecodedState::lost(0, 0, "the install thread ended without a result".into())
            }
        };
        if let Some((thread, _)) = self.install.take() {
            let _ = thread.join();
        }
        if let Some(old) = self.core.install_decoded(decoded) {
            let _ = std::thread::Builder::new()
                .name(format!("squall-drop-{}", self.backend.me().0))
                .spawn(move || drop(old));
        }
    }

    /// Encodes `job` on a thread of its own, which wakes the driver when done.
    fn start_serve(&mut self, job: ServeJob) {
        let (position, view_changes) = job.tag();
        let (tx, rx) = crossbeam_channel::bounded(1);
        let waker = self.backend.waker();
        let spawned = std::thread::Builder::new()
            .name(format!("squall-serve-{}", self.backend.me().0))
            .spawn(move || {
                let encoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run()))
                    .unwrap_or_else(|e| {
                        ServeJob::lost(
                            position,
                            view_changes,
                            ServeLost::Panicked(join_message(Some(e))),
                        )
                    });
                let _ = tx.send(encoded);
                waker.wake();
            });
        match spawned {
            Ok(thread) => self.serve = Some((thread, rx)),
            Err(e) => {
                let lost = ServeJob::lost(position, view_changes, ServeLost::Spawn(e));
                if let Some(t) = (self.transfer)(&mut self.backend) {
                    self.core.provide_encoded(t, lost);
                }
            }
        }
    }

    /// Hands the state the serve thread encoded to the backend (if still wanted), once it is
    /// done.
    fn collect_serve(&mut self) {
        let Some((_, rx)) = &self.serve else {
            return;
        };
        let encoded = match rx.try_recv() {
            Ok(encoded) => encoded,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => {
                // Never: the thread sends before it ends, panic or not.
                ServeJob::lost(0, 0, ServeLost::Vanished)
            }
        };
        if let Some((thread, _)) = self.serve.take() {
            let _ = thread.join();
        }
        if let Some(t) = (self.transfer)(&mut self.backend) {
            self.core.provide_encoded(t, encoded);
        }
    }

    fn take_requests(&mut self) -> usize {
        let mut took = 0;
        while took < self.cfg.batch {
            match self.rx.try_recv() {
                Ok(Job::Request { req, reply }) => {
                    let t = self.next_token;
                    self.next_token += 1;
                    self.waiting.insert(t, reply);
                    self.core.request(t, req);
                    took += 1;
                }
                Ok(Job::Snapshot(reply)) => {
                    let _ = reply.send(self.core.snapshot());
                    took += 1;
                }
                Ok(Job::Status(reply)) => {
                    let mut status = self.core.status();
                    if let Some(t) = (self.transfer)(&mut self.backend) {
                        status.role = t.role();
                        if let Some(v) = t.current_view() {
                            status.view = Some(v);
                        }
                    }
                    let _ = reply.send(status);
                    took += 1;
                }
                Ok(Job::Leave(reply)) => {
                    // The backend's leave status is read at once, so a status asked right
                    // after this job (in this batch, before the next poll) reports it.
                    let r = match (self.transfer)(&mut self.backend) {
                        Some(t) => t.leave().map(|()| t.leave_status()),
                        None => Err(TransferError::Refused(
                            "this replica's backend has a fixed membership".into(),
                        )),
                    };
                    let r = match r {
                        Err(e) => {
                            tracing::warn!(error = %e, "leave refused");
                            Err(e)
                        }
                        Ok(status) => {
                            tracing::info!("leaving the group");
                            self.core.leaving();
                            self.core.note_leave_status(status);
                            Ok(())
                        }
                    };
                    let _ = reply.send(r);
                    took += 1;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    // Every handle is gone: nobody can ask anything any more.
                    self.stop.store(true, Ordering::Release);
                    break;
                }
            }
        }
        took
    }

    /// Drops requests whose requester stopped waiting (a client timed out and went elsewhere).
    fn forget_abandoned(&mut self) {
        let gone: Vec<Token> = self
            .waiting
            .iter()
            .filter(|(_, tx)| tx.is_closed())
            .map(|(t, _)| *t)
            .collect();
        for t in gone {
            self.waiting.remove(&t);
            self.core.cancel(t);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    use squall_transport::{NodeId, Waker};

    use super::*;
    use crate::{PositionMismatch, RestoreError};

    struct Nothing;
    impl StateMachine for Nothing {
        fn apply(&mut self, _: &[u8]) -> Vec<u8> {
            Vec::new()
        }
        fn query(&self, _: &[u8]) -> Vec<u8> {
            Vec::new()
        }
        fn snapshot(&self) -> Vec<u8> {
            Vec::new()
        }
        fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> {
            Ok(())
        }
    }

    /// A backend whose polls block until the test opens the gate, saying when one started.
    struct Gated {
        entered: crossbeam_channel::Sender<()>,
        gate: crossbeam_channel::Receiver<()>,
    }

    impl TotalOrder for Gated {
        fn me(&self) -> NodeId {
            NodeId(0)
        }
        fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> {
            Err(SubmitError::WindowFull)
        }
        fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool {
            let _ = self.entered.try_send(());
            let _ = self.gate.recv();
            false
        }
        fn wait(&mut self, _: Duration) {}
        fn waker(&self) -> Waker {
            Waker::noop()
        }
    }

    #[test]
    fn a_request_queued_when_the_replica_stops_is_answered() {
        let (entered_tx, entered) = crossbeam_channel::bounded(1);
        let (open, gate) = crossbeam_channel::bounded::<()>(0);
        let backend = Gated {
            entered: entered_tx,
            gate,
        };
        let replica = Replica::spawn(
            NodeId(0),
            move || Ok::<_, String>(backend),
            Nothing,
            ReplicaConfig::default(),
        )
        .unwrap();
        let handle = replica.handle();
        entered.recv().unwrap(); // the driver is inside a poll
        let read = Request::Read {
            mode: crate::wire::ReadMode::Local,
            query: Vec::new(),
        };
        let queued = handle.submit(read.clone()).unwrap();
        let dropper = std::thread::spawn(move || drop(replica));
        // Once the replica is stopping, new requests are refused at once.
        while handle.submit(read.clone()).is_ok() {
            std::thread::yield_now();
        }
        drop(open); // every poll returns from now on: the driver sees the stop and exits
        dropper.join().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(queued.blocking_recv());
        });
        let answer = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("a request queued at shutdown was never answered");
        assert!(matches!(
            answer,
            Ok(Response::Error {
                code: ErrorCode::Unavailable,
                ..
            })
        ));
    }

    /// A backend restarting from its logs until the test flips `done`.
    struct Restarting {
        done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    }

    inert_order!(
        Restarting,
        0,
        Err(SubmitError::NotASender("restarting".into())),
        naps
    );

    impl StateTransfer for Restarting {
        holds_state_no_transfer!();
        fn restarting(&self) -> Option<String> {
            (!self.done.load(Ordering::Acquire)).then(|| "waiting for members [2]".into())
        }
    }

    #[test]
    fn a_replica_on_a_restarting_backend_refuses_requests_with_the_reason_until_it_completes() {
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let backend = Restarting { done: done.clone() };
        let replica = Replica::spawn_joinable(
            NodeId(0),
            move || Ok::<_, String>(backend),
            Nothing,
            ReplicaConfig::default(),
        )
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let read = Request::Read {
            mode: crate::wire::ReadMode::Local,
            query: Vec::new(),
        };
        match rt.block_on(replica.handle().call(read.clone())) {
            Response::Error {
                code: ErrorCode::Unavailable,
                message,
            } => assert!(message.contains("members [2]"), "{message}"),
            other => panic!("a restarting replica answered {other:?}"),
        }
        done.store(true, Ordering::Release);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match rt.block_on(replica.handle().call(read.clone())) {
                Response::Ok(_) => break,
                r => assert!(
                    std::time::Instant::now() < deadline,
                    "still refused after the restart completed: {r:?}"
                ),
            }
        }
    }

    /// A backend that stops for good once the test says so, as `Group` does: then it answers
    /// `holds_state` true (frozen) and reports why through `stopped`. A joiner's
    /// (`member` false) holds no state until then.
    struct StopsMidJoin {
        stop: std::sync::Arc<AtomicBool>,
        polls: std::sync::Arc<std::sync::atomic::AtomicU64>,
        member: bool,
    }

    impl TotalOrder for StopsMidJoin {
        fn me(&self) -> NodeId {
            NodeId(3)
        }
        fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> {
            Err(SubmitError::NotASender("joining".into()))
        }
        fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool {
            self.polls.fetch_add(1, Ordering::Relaxed);
            false
        }
        fn wait(&mut self, t: Duration) {
            std::thread::sleep(t.min(Duration::from_millis(1)));
        }
        fn waker(&self) -> Waker {
            Waker::noop()
        }
    }

    impl StateTransfer for StopsMidJoin {
        fn holds_state(&self) -> bool {
            self.member || self.stop.load(Ordering::Acquire)
        }
        fn state_wanted(&self) -> bool {
            false
        }
        fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> {
            Ok(())
        }
        fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
            None
        }
        fn stopped(&self) -> Option<String> {
            self.stop.load(Ordering::Acquire).then(|| {
                "a joiner buffered 1048576 deliveries while waiting for its state transfer \
                 (max_buffered)"
                    .into()
            })
        }
    }

    /// s24 (docs/MEMBERSHIP.md, fiftieth part): a joining replica whose backend stops for
    /// good answers with the backend's reason (not "joining"), its thread ends by itself, and
    /// `shutdown` reports the failed join.
    #[test]
    fn a_joiner_whose_backend_stops_ends_its_thread_and_answers_why() {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let polls = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let backend = StopsMidJoin {
            stop: stop.clone(),
            polls: polls.clone(),
            member: false,
        };
        let replica = Replica::spawn_joinable(
            NodeId(3),
            move || Ok::<_, String>(backend),
            Nothing,
            ReplicaConfig::default(),
        )
        .unwrap();
        let h = replica.handle();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let read = Request::Read {
            mode: crate::wire::ReadMode::Local,
            query: Vec::new(),
        };
        match rt.block_on(h.call(read.clone())) {
            Response::Error {
                code: ErrorCode::Unavailable,
                message,
            } => assert!(message.contains("joining"), "{message}"),
            other => panic!("a joining replica answered {other:?}"),
        }
        stop.store(true, Ordering::Release);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while replica.is_running() {
            assert!(
                std::time::Instant::now() < deadline,
                "the backend stopped mid-join but the replica's thread still runs ({} polls)",
                polls.load(Ordering::Relaxed)
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let failed = h.backend_stopped().expect("the failed join is reported");
        assert!(failed.reason.contains("max_buffered"), "{failed}");
        for _ in 0..2 {
            match rt.block_on(h.call(read.clone())) {
                Response::Error {
                    code: ErrorCode::Unavailable,
                    message,
                } => assert!(
                    message.contains("join failed") && message.contains("max_buffered"),
                    "{message}"
                ),
                other => panic!("a replica whose join failed answered {other:?}"),
            }
        }
        assert_eq!(h.metrics().backends_stopped.load(Ordering::Relaxed), 1);
        assert_eq!(
            h.metrics().busy.load(Ordering::Relaxed),
            0,
            "not a full queue"
        );
        match replica.shutdown() {
            Err(RuntimeError::BackendStopped(e)) => assert_eq!(e, failed),
            Err(e) => panic!("shutdown reported {e}"),
            Ok(_) => panic!("shutdown reported no failed join"),
        }
    }

    /// Waits (10 s at most, only against a hang) for `replica`'s thread to end by itself.
    fn wait_until_ended<S: StateMachine>(replica: &Replica<S>, what: impl Fn() -> String) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while replica.is_running() {
            assert!(std::time::Instant::now() < deadline, "{}", what());
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// s24 (docs/MEMBERSHIP.md, fifty-third part): a member whose backend stops for good, and
    /// a replica started on a backend that had stopped already (which answers `holds_state`
    /// true, as `Group` does), both stop with the backend's reason: their threads end, calls
    /// are answered `Unavailable` with the reason, `shutdown` reports it.
    #[test]
    fn a_member_whose_backend_stops_and_one_started_on_a_stopped_backend_end_their_threads() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let read = Request::Read {
            mode: crate::wire::ReadMode::Local,
            query: Vec::new(),
        };
        for stopped_before in [false, true] {
            let stop = std::sync::Arc::new(AtomicBool::new(stopped_before));
            let polls = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let backend = StopsMidJoin {
                stop: stop.clone(),
                polls: polls.clone(),
                member: !stopped_before,
            };
            let replica = Replica::spawn_joinable(
                NodeId(3),
                move || Ok::<_, String>(backend),
                Nothing,
                ReplicaConfig::default(),
            )
            .unwrap();
            let h = replica.handle();
            let phase = if stopped_before {
                StopPhase::Starting
            } else {
                assert_eq!(
                    rt.block_on(h.call(read.clone())),
                    Response::Ok(Vec::new()),
                    "a member serves"
                );
                stop.store(true, Ordering::Release);
                StopPhase::Member
            };
            wait_until_ended(&replica, || {
                format!(
                    "the backend stopped ({phase:?}) but the replica's thread still runs ({} polls)",
                    polls.load(Ordering::Relaxed)
                )
            });
            let stopped = h.backend_stopped().expect("the stop is reported");
            assert_eq!(stopped.phase, phase);
            assert!(stopped.reason.contains("max_buffered"), "{stopped}");
            match rt.block_on(h.call(read.clone())) {
                Response::Error {
                    code: ErrorCode::Unavailable,
                    message,
                } => assert!(message.contains("max_buffered"), "{message}"),
                other => panic!("a replica whose backend stopped answered {other:?}"),
            }
            assert_eq!(h.metrics().backends_stopped.load(Ordering::Relaxed), 1);
            match replica.shutdown() {
                Err(RuntimeError::BackendStopped(e)) => assert_eq!(e, stopped),
                Err(e) => panic!("shutdown reported {e}"),
                Ok(_) => panic!("shutdown reported no stop"),
            }
        }
    }

    /// Waits for `h.stopped()` on `rt` while another thread raises `flag` 20 ms in (the
    /// backend's cue to stop, or to panic); 10 s only against a hang: a waiter nobody wakes
    /// stays pending for good.
    fn stopped_once_raised(
        rt: &tokio::runtime::Runtime,
        h: &ReplicaHandle,
        flag: std::sync::Arc<AtomicBool>,
    ) -> Result<BackendStopped, tokio::time::error::Elapsed> {
        let raiser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            flag.store(true, Ordering::Release);
        });
        let woken =
            rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), h.stopped()).await });
        raiser.join().unwrap();
        woken
    }

    /// s26 (docs/MEMBERSHIP.md, seventieth part): `ReplicaHandle::stopped` is woken by the
    /// driver's stop, without the waiter polling: a wait begun while the member still serves
    /// resolves with the stop once its backend stops, a wait begun after resolves at once,
    /// and a wait on a replica shut down without a stop stays pending.
    #[test]
    fn a_wait_for_the_stop_is_woken_by_the_stop() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let backend = StopsMidJoin {
            stop: stop.clone(),
            polls: Default::default(),
            member: true,
        };
        let replica = Replica::spawn_joinable(
            NodeId(3),
            move || Ok::<_, String>(backend),
            Nothing,
            ReplicaConfig::default(),
        )
        .unwrap();
        let h = replica.handle();
        // The stop comes while the wait is pending (it is not checked before 20 ms).
        let woken = stopped_once_raised(&rt, &h, stop)
            .expect("the backend stopped but the waiter was not woken");
        assert_eq!(woken.phase, StopPhase::Member);
        assert_eq!(h.backend_stopped(), Some(woken.clone()));
        let again = rt.block_on(async { tokio::time::timeout(Duration::ZERO, h.stopped()).await });
        assert_eq!(
            again.ok(),
            Some(woken.clone()),
            "a later wait resolves at once"
        );
        match replica.shutdown() {
            Err(RuntimeError::BackendStopped(e)) => assert_eq!(e, woken),
            other => panic!("shutdown reported {:?}", other.err()),
        }

        // A replica shut down without a stop: its waiters are never woken.
        let replica = Replica::spawn_joinable(
            NodeId(3),
            || {
                Ok::<_, String>(StopsMidJoin {
                    stop: Default::default(),
                    polls: Default::default(),
                    member: true,
                })
            },
            Nothing,
            ReplicaConfig::default(),
        )
        .unwrap();
        let h = replica.handle();
        assert!(replica.shutdown().is_ok());
        let never = rt
            .block_on(async { tokio::time::timeout(Duration::from_millis(20), h.stopped()).await });
        assert!(
            never.is_err(),
            "a replica shut down cleanly reported {never:?}"
        );
    }

    /// A backend whose poll panics once the test says so.
    struct Panics(std::sync::Arc<AtomicBool>);

    impl TotalOrder for Panics {
        fn me(&self) -> NodeId {
            NodeId(4)
        }
        fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> {
            Ok(())
        }
        fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool {
            assert!(
                !self.0.load(Ordering::Acquire),
                "a backend bug (this test's panic)"
            );
            false
        }
        fn wait(&mut self, t: Duration) {
            std::thread::sleep(t.min(Duration::from_millis(1)));
        }
        fn waker(&self) -> Waker {
            Waker::noop()
        }
    }

    /// s26 follow-up (docs/MEMBERSHIP.md, seventieth part, review R3): a driver thread that
    /// panics resolves `ReplicaHandle::stopped` (a server waiting on it exits instead of
    /// waiting for good), with phase `Replica` and a reason naming the panic; new requests
    /// are refused with it, and `shutdown` returns the panic.
    #[test]
    fn a_driver_thread_that_panics_resolves_the_wait_for_the_stop() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let panic = std::sync::Arc::new(AtomicBool::new(false));
        let backend = Panics(panic.clone());
        let replica = Replica::spawn(
            NodeId(4),
            move || Ok::<_, String>(backend),
            Nothing,
            ReplicaConfig::default(),
        )
        .unwrap();
        let h = replica.handle();
        let woken = stopped_once_raised(&rt, &h, panic)
            .expect("the driver panicked but the waiter was not woken");
        assert_eq!(woken.phase, StopPhase::Replica);
        assert!(woken.reason.contains("panicked"), "{woken}");
        let read = Request::Read {
            mode: crate::wire::ReadMode::Local,
            query: Vec::new(),
        };
        match rt.block_on(h.call(read)) {
            Response::Error {
                code: ErrorCode::Unavailable,
                message,
            } => assert!(message.contains("panicked"), "{message}"),
            other => panic!("a replica whose driver panicked answered {other:?}"),
        }
        match replica.shutdown() {
            Err(RuntimeError::Panicked(m)) => assert!(m.contains("this test's panic"), "{m}"),
            other => panic!("shutdown reported {:?}", other.err()),
        }
    }

    /// A member's backend that breaks its contract once the test says so: its next poll
    /// delivers position 3 to a replica at position 0 ([`PositionMismatch`]).
    struct Skips {
        skip: std::sync::Arc<AtomicBool>,
        polls: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }

    impl TotalOrder for Skips {
        fn me(&self) -> NodeId {
            NodeId(4)
        }
        fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> {
            Ok(())
        }
        fn poll(&mut self, out: &mut Vec<Upcall<Delivery>>) -> bool {
            self.polls.fetch_add(1, Ordering::Relaxed);
            if self.skip.swap(false, Ordering::AcqRel) {
                out.push(Upcall::Deliver(Delivery {
                    position: 3,
                    sender: NodeId(1),
                    payload: Vec::new(),
                }));
                return true;
            }
            false
        }
        fn wait(&mut self, t: Duration) {
            std::thread::sleep(t.min(Duration::from_millis(1)));
        }
        fn waker(&self) -> Waker {
            Waker::noop()
        }
    }

    impl StateTransfer for Skips {
        holds_state_no_transfer!();
    }

    /// s24 follow-up (fifty-third part): a replica that stops itself (here a delivery at the
    /// wrong position, [`PositionMismatch`]) ends its thread as one whose backend stopped
    /// does: the stop is reported with [`StopPhase::Replica`], calls are answered with it,
    /// `shutdown` reports it; it is not counted as a backend's stop.
    #[test]
    fn a_replica_that_stops_itself_ends_its_thread_and_answers_why() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let read = Request::Read {
            mode: crate::wire::ReadMode::Local,
            query: Vec::new(),
        };
        let skip = std::sync::Arc::new(AtomicBool::new(false));
        let polls = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let backend = Skips {
            skip: skip.clone(),
            polls: polls.clone(),
        };
        let replica = Replica::spawn_joinable(
            NodeId(4),
            move || Ok::<_, String>(backend),
            Nothing,
            ReplicaConfig::default(),
        )
        .unwrap();
        let h = replica.handle();
        assert_eq!(
            rt.block_on(h.call(read.clone())),
            Response::Ok(Vec::new()),
            "a member serves"
        );
        skip.store(true, Ordering::Release);
        wait_until_ended(&replica, || {
            format!(
                "the replica stopped itself but its thread still runs ({} polls)",
                polls.load(Ordering::Relaxed)
            )
        });
        let stopped = h.backend_stopped().expect("the stop is reported");
        assert_eq!(stopped.phase, StopPhase::Replica);
        let why = PositionMismatch {
            position: 3,
            applied: 0,
        }
        .to_string();
        assert_eq!(stopped.reason, why);
        match rt.block_on(h.call(read)) {
            Response::Error {
                code: ErrorCode::Unavailable,
                message,
            } => assert!(message.contains(&why), "{message}"),
            other => panic!("a replica that stopped itself answered {other:?}"),
        }
        assert_eq!(h.metrics().backends_stopped.load(Ordering::Relaxed), 0);
        match replica.shutdown() {
            Err(RuntimeError::BackendStopped(e)) => assert_eq!(e, stopped),
            Err(e) => panic!("shutdown reported {e}"),
            Ok(_) => panic!("shutdown reported no stop"),
        }
    }

    /// Appends every command's bytes; its decoder says on which thread it runs, then waits
    /// for the test to open its gate before restoring.
    struct Held {
        log: Vec<u8>,
        entered: crossbeam_channel::Sender<String>,
        gate: crossbeam_channel::Receiver<()>,
    }

    impl StateMachine for Held {
        fn apply(&mut self, c: &[u8]) -> Vec<u8> {
            self.log.extend_from_slice(c);
            Vec::new()
        }
        fn query(&self, _: &[u8]) -> Vec<u8> {
            self.log.clone()
        }
        fn snapshot(&self) -> Vec<u8> {
            self.log.clone()
        }
        fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> {
            self.log = s.to_vec();
            Ok(())
        }
        fn snapshot_decoder(&self) -> Option<crate::StateDecoder<Held>> {
            let (entered, gate) = (self.entered.clone(), self.gate.clone());
            Some(Box::new(move |s: &[u8]| {
                let name = std::thread::current().name().unwrap_or("").to_owned();
                let _ = entered.send(name);
                let _ = gate.recv();
                Ok(Held {
                    log: s.to_vec(),
                    entered,
                    gate,
                })
            }))
        }
    }

    /// A joiner's backend: its first poll hands out the view (with the state) and a delivery
    /// after the state's position; it counts its polls.
    struct Joiner {
        first: Vec<Upcall<Delivery>>,
        state: Option<(u64, Vec<u8>)>,
        polls: Arc<std::sync::atomic::AtomicU64>,
    }

    impl TotalOrder for Joiner {
        fn me(&self) -> NodeId {
            NodeId(0)
        }
        fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> {
            Err(SubmitError::WindowFull)
        }
        fn poll(&mut self, out: &mut Vec<Upcall<Delivery>>) -> bool {
            self.polls.fetch_add(1, Ordering::Relaxed);
            out.append(&mut self.first);
            false
        }
        fn wait(&mut self, t: Duration) {
            std::thread::sleep(t.min(Duration::from_millis(1)));
        }
        fn waker(&self) -> Waker {
            Waker::noop()
        }
    }

    impl StateTransfer for Joiner {
        fn holds_state(&self) -> bool {
            false
        }
        fn state_wanted(&self) -> bool {
            false
        }
        fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> {
            Ok(())
        }
        fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
            self.state.take()
        }
    }

    /// The driver decodes a joiner's state on a thread of its own: while the decoder is held
    /// (it waits for the test) the driver keeps polling its backend and answers requests
    /// `Unavailable` saying why; released, the state is the member's with the delivery that
    /// followed it applied.
    #[test]
    fn a_replica_decoding_its_state_off_its_thread_keeps_polling_and_answering() {
        let (entered_tx, entered) = crossbeam_channel::unbounded();
        let (open, gate) = crossbeam_channel::bounded::<()>(0);
        let held = || Held {
            log: Vec::new(),
            entered: entered_tx.clone(),
            gate: gate.clone(),
        };
        let command = |seq: u64, p: &[u8]| {
            crate::wire::Entry::Command {
                client: 9,
                seq,
                acked: seq - 1,
                payload: p,
            }
            .encode()
        };
        let mut member = ReplicaCore::new(NodeId(1), held(), CoreConfig::default()).unwrap();
        member.upcall(Upcall::Deliver(Delivery {
            position: 0,
            sender: NodeId(1),
            payload: command(1, b"a"),
        }));
        let polls = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let backend = Joiner {
            first: vec![
                Upcall::View(squall_ordering::View {
                    id: 1,
                    members: vec![NodeId(0), NodeId(1)],
                    leader: Some(NodeId(1)),
                }),
                Upcall::Deliver(Delivery {
                    position: 1,
                    sender: NodeId(1),
                    payload: command(2, b"b"),
                }),
            ],
            state: Some((1, member.snapshot().encode())),
            polls: Arc::clone(&polls),
        };
        let cfg = ReplicaConfig {
            idle_park: Duration::from_millis(1),
            ..ReplicaConfig::default()
        };
        let replica =
            Replica::spawn_joinable(NodeId(0), move || Ok::<_, String>(backend), held(), cfg)
                .unwrap();
        // Declared after the replica, so that a failed assertion opens the gate before the
        // replica's drop waits for its driver (which a held decoder on it would block).
        let open = open;
        let thread = entered
            .recv_timeout(Duration::from_secs(10))
            .expect("the state machine's decoder never ran");
        assert_eq!(
            thread, "squall-install-0",
            "not decoded on an install thread"
        );
        let before = polls.load(Ordering::Relaxed);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while polls.load(Ordering::Relaxed) < before + 20 {
            if std::time::Instant::now() > deadline {
                drop(open);
                panic!("the driver stopped polling its backend while the state was decoded");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let read = Request::Read {
            mode: crate::wire::ReadMode::Local,
            query: Vec::new(),
        };
        match rt.block_on(replica.handle().call(read.clone())) {
            Response::Error {
                code: ErrorCode::Unavailable,
                message,
            } => assert!(message.contains("installing a state"), "{message}"),
            other => panic!("a replica decoding its state answered {other:?}"),
        }
        drop(open);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match rt.block_on(replica.handle().call(read.clone())) {
                Response::Ok(log) => {
                    assert_eq!(log, b"ab", "the member's state, then the delivery after it");
                    break;
                }
                r => assert!(
                    std::time::Instant::now() < deadline,
                    "still refused after the state was decoded: {r:?}"
                ),
            }
        }
        assert_eq!(
            replica
                .handle()
                .metrics()
                .states_installed
                .load(Ordering::Relaxed),
            1
        );
    }

    /// Appends every command's bytes; its capture (`snapshot_encoder`) says on which thread
    /// it encodes, then waits for the test to let it through.
    struct Capturing {
        log: Vec<u8>,
        entered: crossbeam_channel::Sender<String>,
        gate: crossbeam_channel::Receiver<()>,
    }

    impl StateMachine for Capturing {
        fn apply(&mut self, c: &[u8]) -> Vec<u8> {
            self.log.extend_from_slice(c);
            Vec::new()
        }
        fn query(&self, _: &[u8]) -> Vec<u8> {
            self.log.clone()
        }
        fn snapshot(&self) -> Vec<u8> {
            self.log.clone()
        }
        fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> {
            self.log = s.to_vec();
            Ok(())
        }
        fn snapshot_encoder(&self) -> Option<crate::StateEncoder> {
            let (capture, entered, gate) =
                (self.log.clone(), self.entered.clone(), self.gate.clone());
            Some(Box::new(move |out: &mut Vec<u8>| {
                let name = std::thread::current().name().unwrap_or("").to_owned();
                let _ = entered.send(name);
                let _ = gate.recv();
                out.extend_from_slice(&capture);
            }))
        }
    }

    /// What the test and a member's backend share: the upcalls for its next poll, whether a
    /// joiner asks, the largest state it takes (`None`: any), the states offered to it, what
    /// was provided, and the polls so far.
    #[derive(Default)]
    struct Asked {
        out: Vec<Upcall<Delivery>>,
        wanted: bool,
        max: Option<usize>,
        offered: u64,
        provided: Vec<(u64, Vec<u8>)>,
        polls: u64,
    }

    /// A member's backend whose joiner asks for the state.
    struct Member(Arc<std::sync::Mutex<Asked>>);

    impl TotalOrder for Member {
        fn me(&self) -> NodeId {
            NodeId(0)
        }
        fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> {
            Err(SubmitError::WindowFull)
        }
        fn poll(&mut self, out: &mut Vec<Upcall<Delivery>>) -> bool {
            let mut a = self.0.lock().unwrap();
            a.polls += 1;
            out.append(&mut a.out);
            false
        }
        fn wait(&mut self, t: Duration) {
            std::thread::sleep(t.min(Duration::from_millis(1)));
        }
        fn waker(&self) -> Waker {
            Waker::noop()
        }
    }

    impl StateTransfer for Member {
        fn holds_state(&self) -> bool {
            true
        }
        fn state_wanted(&self) -> bool {
            self.0.lock().unwrap().wanted
        }
        fn provide_state(&mut self, position: u64, state: &[u8]) -> Result<(), TransferError> {
            let mut a = self.0.lock().unwrap();
            a.offered += 1;
            if let Some(max) = a.max.filter(|&m| state.len() > m) {
                return Err(TransferError::TooLarge {
                    len: state.len() as u64,
                    max: max as u64,
                });
            }
            a.wanted = false;
            a.provided.push((position, state.to_vec()));
            Ok(())
        }
        fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
            None
        }
    }

    /// The driver encodes the state a joiner asked for on a thread of its own: while the
    /// encoder is held the driver keeps polling, applying and answering; a view change
    /// meanwhile, after a delivery since the capture, drops that state, and the joiner of the
    /// new view gets one captured in it.
    #[test]
    fn a_replica_encoding_a_joiners_state_off_its_thread_keeps_polling_and_answering() {
        let (entered_tx, entered) = crossbeam_channel::unbounded();
        let (open, gate) = crossbeam_channel::bounded::<()>(0);
        let deliver = |position: u64, p: &[u8]| {
            Upcall::Deliver(Delivery {
                position,
                sender: NodeId(1),
                payload: crate::wire::Entry::Command {
                    client: 9,
                    seq: position + 1,
                    acked: position,
                    payload: p,
                }
                .encode(),
            })
        };
        let shared = Arc::new(std::sync::Mutex::new(Asked {
            out: vec![deliver(0, b"a")],
            wanted: true,
            ..Asked::default()
        }));
        let backend = Member(Arc::clone(&shared));
        let cfg = ReplicaConfig {
            idle_park: Duration::from_millis(1),
            ..ReplicaConfig::default()
        };
        let sm = Capturing {
            log: Vec::new(),
            entered: entered_tx,
            gate,
        };
        let replica =
            Replica::spawn_joinable(NodeId(0), move || Ok::<_, String>(backend), sm, cfg).unwrap();
        // Declared after the replica, so that a failed assertion opens the gate before the
        // replica's drop waits for its driver (which a held encoder on it would block).
        let open = open;
        let thread = entered
            .recv_timeout(Duration::from_secs(10))
            .expect("the state machine's encoder never ran");
        assert_eq!(thread, "squall-serve-0", "not encoded on a serve thread");
        // While it is held: the driver polls, applies a delivery and answers a read.
        let polled = |n: u64, what: &str| {
            let before = shared.lock().unwrap().polls;
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while shared.lock().unwrap().polls < before + n {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the driver stopped polling its backend while {what}"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        shared.lock().unwrap().out.push(deliver(1, b"b"));
        polled(20, "the state was encoded");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let read = Request::Read {
            mode: crate::wire::ReadMode::Local,
            query: Vec::new(),
        };
        assert_eq!(
            rt.block_on(replica.handle().call(read.clone())),
            Response::Ok(b"ab".to_vec()),
            "serving while it encodes"
        );
        assert!(shared.lock().unwrap().provided.is_empty());
        // The view changes while it is encoded; the new view's joiner asks too.
        shared.lock().unwrap().out.extend([
            Upcall::Wedged,
            Upcall::View(squall_ordering::View {
                id: 2,
                members: vec![NodeId(0), NodeId(1), NodeId(2)],
                leader: Some(NodeId(0)),
            }),
        ]);
        polled(20, "the state was encoded (view change)");
        let released = open.send_timeout((), Duration::from_secs(10));
        assert!(released.is_ok(), "the first encoder was not waiting");
        // Dropped (a delivery followed its capture): captured again, in view 2, at position 2.
        let thread = entered
            .recv_timeout(Duration::from_secs(10))
            .expect("no state captured for the new view");
        assert_eq!(thread, "squall-serve-0");
        assert!(
            shared.lock().unwrap().provided.is_empty(),
            "the view 1 state was provided"
        );
        drop(open);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while shared.lock().unwrap().provided.is_empty() {
            assert!(std::time::Instant::now() < deadline, "nothing provided");
            std::thread::sleep(Duration::from_millis(1));
        }
        let provided = shared.lock().unwrap().provided.clone();
        assert_eq!(provided.len(), 1);
        assert_eq!(
            provided[0].0, 2,
            "captured in view 2, after both deliveries"
        );
        let snapshot = Snapshot::decode(&provided[0].1).unwrap();
        assert_eq!((snapshot.applied, &snapshot.state[..]), (2, &b"ab"[..]));
        assert_eq!(
            replica
                .handle()
                .metrics()
                .states_provided
                .load(Ordering::Relaxed),
            1
        );
    }

    /// The driver of a member whose joiner's state the backend refuses as too large
    /// (`Group` above `max_state_bytes`), with a machine encoding off the driver's thread and
    /// one encoding on it: the state is encoded and offered once in that view, not at every
    /// poll; once more in the next view; and provided in the view after the bound is raised.
    #[test]
    fn a_state_refused_as_too_large_is_encoded_once_per_view() {
        let (entered_tx, entered) = crossbeam_channel::unbounded();
        let (open, gate) = crossbeam_channel::bounded::<()>(0);
        drop(open); // the encoder never waits
        let capturing = Capturing {
            log: Vec::new(),
            entered: entered_tx,
            gate,
        };
        let encodes = refused_then_raised(capturing);
        assert_eq!(
            entered.try_iter().count(),
            encodes,
            "off the thread: one encode per offer"
        );
        refused_then_raised(Appends::default());
    }

    /// Runs [`a_state_refused_as_too_large_is_encoded_once_per_view`] with `sm`; returns the
    /// states offered.
    fn refused_then_raised<S: StateMachine + Send + 'static>(sm: S) -> usize {
        let deliver = |position: u64, p: &[u8]| {
            Upcall::Deliver(Delivery {
                position,
                sender: NodeId(1),
                payload: crate::wire::Entry::Command {
                    client: 9,
                    seq: position + 1,
                    acked: position,
                    payload: p,
                }
                .encode(),
            })
        };
        let view = |id: u64| {
            Upcall::View(squall_ordering::View {
                id,
                members: vec![NodeId(0), NodeId(1), NodeId(2)],
                leader: Some(NodeId(0)),
            })
        };
        let shared = Arc::new(std::sync::Mutex::new(Asked {
            out: vec![deliver(0, b"a")],
            wanted: true,
            max: Some(1),
            ..Asked::default()
        }));
        let backend = Member(Arc::clone(&shared));
        let cfg = ReplicaConfig {
            idle_park: Duration::from_millis(1),
            ..ReplicaConfig::default()
        };
        let replica =
            Replica::spawn_joinable(NodeId(0), move || Ok::<_, String>(backend), sm, cfg).unwrap();
        let metrics = replica.handle().metrics().clone();
        let wait_for = |what: &str, done: &dyn Fn(&Asked) -> bool| {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !done(&shared.lock().unwrap()) {
                assert!(std::time::Instant::now() < deadline, "{what}");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        // 50 polls after the first offer (each a chance to offer again), a delivery among them.
        let polls_after_offer = |offers: u64| {
            wait_for("no state offered", &|a| a.offered >= offers);
            let polls = shared.lock().unwrap().polls;
            shared.lock().unwrap().out.push(deliver(offers, b"b"));
            wait_for("the driver stopped polling", &|a| a.polls >= polls + 50);
        };
        polls_after_offer(1);
        assert_eq!(
            shared.lock().unwrap().offered,
            1,
            "a state refused as too large was offered again in the same view"
        );
        shared.lock().unwrap().out.extend([Upcall::Wedged, view(2)]);
        polls_after_offer(2);
        assert_eq!(shared.lock().unwrap().offered, 2, "once more in view 2");
        assert_eq!(metrics.states_refused.load(Ordering::Relaxed), 2);
        {
            let mut a = shared.lock().unwrap();
            a.max = None;
            a.out.extend([Upcall::Wedged, view(3)]);
        }
        wait_for("nothing provided in view 3", &|a| !a.provided.is_empty());
        let a = shared.lock().unwrap();
        assert_eq!((a.offered, a.provided[0].0), (3, 3));
        assert_eq!(metrics.states_provided.load(Ordering::Relaxed), 1);
        a.offered as usize
    }

    /// What the test and a backend whose group joins again share: the upcalls for its next
    /// poll, whether it holds the state, the state it hands over, and the polls so far.
    #[derive(Default)]
    struct Rejoining {
        out: Vec<Upcall<Delivery>>,
        holds: bool,
        state: Option<(u64, Vec<u8>)>,
        polls: u64,
    }

    /// A member's backend that drops its state and hands over another (as `Group::rejoin`
    /// does after a switch into a restart).
    struct Rejoiner(Arc<std::sync::Mutex<Rejoining>>);

    impl TotalOrder for Rejoiner {
        fn me(&self) -> NodeId {
            NodeId(0)
        }
        fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> {
            Err(SubmitError::WindowFull)
        }
        fn poll(&mut self, out: &mut Vec<Upcall<Delivery>>) -> bool {
            let mut a = self.0.lock().unwrap();
            a.polls += 1;
            out.append(&mut a.out);
            false
        }
        fn wait(&mut self, t: Duration) {
            std::thread::sleep(t.min(Duration::from_millis(1)));
        }
        fn waker(&self) -> Waker {
            Waker::noop()
        }
    }

    impl StateTransfer for Rejoiner {
        fn holds_state(&self) -> bool {
            self.0.lock().unwrap().holds
        }
        fn state_wanted(&self) -> bool {
            false
        }
        fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> {
            Ok(())
        }
        fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
            self.0.lock().unwrap().state.take()
        }
    }

    /// Appends every command's bytes (restored on the replica's thread: no decoder).
    #[derive(Default)]
    struct Appends(Vec<u8>);

    impl StateMachine for Appends {
        fn apply(&mut self, c: &[u8]) -> Vec<u8> {
            self.0.extend_from_slice(c);
            Vec::new()
        }
        fn query(&self, _: &[u8]) -> Vec<u8> {
            self.0.clone()
        }
        fn snapshot(&self) -> Vec<u8> {
            self.0.clone()
        }
        fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> {
            self.0 = s.to_vec();
            Ok(())
        }
    }

    /// s23 (docs/MEMBERSHIP.md, forty-first part, "s23 follow-up"): the driver of a replica
    /// whose backend stops holding the state (its group joins again) answers `Unavailable`
    /// until the backend hands the group's state over at a view, then serves that state with
    /// the deliveries after it, never its own state with them.
    #[test]
    fn a_replica_whose_backend_drops_its_state_serves_the_transferred_one() {
        let deliver = |position: u64, p: &[u8]| {
            Upcall::Deliver(Delivery {
                position,
                sender: NodeId(1),
                payload: crate::wire::Entry::Command {
                    client: 9,
                    seq: position + 1,
                    acked: position,
                    payload: p,
                }
                .encode(),
            })
        };
        let shared = Arc::new(std::sync::Mutex::new(Rejoining {
            out: vec![deliver(0, b"a"), deliver(1, b"b")],
            holds: true,
            ..Rejoining::default()
        }));
        let backend = Rejoiner(Arc::clone(&shared));
        let cfg = ReplicaConfig {
            idle_park: Duration::from_millis(1),
            ..ReplicaConfig::default()
        };
        let replica = Replica::spawn_joinable(
            NodeId(0),
            move || Ok::<_, String>(backend),
            Appends::default(),
            cfg,
        )
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let read = Request::Read {
            mode: crate::wire::ReadMode::Local,
            query: Vec::new(),
        };
        let read_until = |want: &[u8]| {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                match rt.block_on(replica.handle().call(read.clone())) {
                    Response::Ok(s) if s == want => break,
                    r => assert!(
                        std::time::Instant::now() < deadline,
                        "still not {want:?}: {r:?}"
                    ),
                }
            }
        };
        read_until(b"ab");
        let polls = {
            let mut a = shared.lock().unwrap();
            a.holds = false;
            a.polls
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while shared.lock().unwrap().polls < polls + 5 {
            assert!(
                std::time::Instant::now() < deadline,
                "the driver stopped polling"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        match rt.block_on(replica.handle().call(read.clone())) {
            Response::Error {
                code: ErrorCode::Unavailable,
                message,
            } => assert!(message.contains("joining"), "{message}"),
            other => panic!("a replica whose backend dropped its state answered {other:?}"),
        }
        // The group's state at position 3, then its next delivery.
        let mut member =
            ReplicaCore::new(NodeId(1), Appends::default(), CoreConfig::default()).unwrap();
        for (i, p) in [b"x", b"y", b"z"].into_iter().enumerate() {
            member.upcall(deliver(i as u64, p));
        }
        {
            let mut a = shared.lock().unwrap();
            a.holds = true;
            a.state = Some((3, member.snapshot().encode()));
            a.out.extend([
                Upcall::View(squall_ordering::View {
                    id: 4,
                    members: vec![NodeId(0), NodeId(1)],
                    leader: Some(NodeId(1)),
                }),
                deliver(3, b"w"),
            ]);
        }
        read_until(b"xyzw");
        let handle = replica.handle();
        let m = handle.metrics();
        assert_eq!(
            (
                m.states_dropped.load(Ordering::Relaxed),
                m.states_installed.load(Ordering::Relaxed)
            ),
            (1, 1)
        );
    }

    /// Where a [`Leaver`]'s leave stands.
    #[derive(Default)]
    struct Leaving {
        asked: bool,
        held: bool,
        gone: bool,
    }

    /// A member's backend that accepts a leave, holds it while told to, and stops as left.
    struct Leaver(Arc<std::sync::Mutex<Leaving>>);

    inert_order!(Leaver, 2, Err(SubmitError::WindowFull), naps);

    impl StateTransfer for Leaver {
        holds_state_no_transfer!();
        fn leave(&mut self) -> Result<(), TransferError> {
            self.0.lock().unwrap().asked = true;
            Ok(())
        }
        fn leave_status(&self) -> Option<crate::LeaveReport> {
            let l = self.0.lock().unwrap();
            match (l.asked, l.held, l.gone) {
                (_, _, true) => Some(crate::LeaveReport::left("left: view 2")),
                (true, true, _) => Some(crate::LeaveReport::held("held back in view 1")),
                (true, false, _) => Some(crate::LeaveReport::going("asked in view 1")),
                (false, ..) => None,
            }
        }
        fn stopped(&self) -> Option<String> {
            self.0
                .lock()
                .unwrap()
                .gone
                .then(|| "left: view 2 was installed without this member".into())
        }
        fn role(&self) -> Option<String> {
            Some("shard 0".into())
        }
        fn current_view(&self) -> Option<squall_ordering::View> {
            Some(squall_ordering::View {
                id: 1,
                members: vec![NodeId(1), NodeId(2)],
                leader: Some(NodeId(1)),
            })
        }
    }

    /// s27 (docs/MEMBERSHIP.md, seventy-seventh part): the status answers the backend's view
    /// and role and the leave as it goes (held, then left), and `left()` resolves once the
    /// leave completed, while `stopped()` does not: a leave is no failure.
    #[test]
    fn a_replicas_status_follows_its_leave_and_the_wait_for_it_resolves() {
        let shared = Arc::new(std::sync::Mutex::new(Leaving::default()));
        let backend = Leaver(Arc::clone(&shared));
        let replica = Replica::spawn_joinable(
            NodeId(2),
            move || Ok::<_, String>(backend),
            Nothing,
            ReplicaConfig::default(),
        )
        .unwrap();
        let h = replica.handle();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let status = |h: &ReplicaHandle| rt.block_on(h.status().unwrap()).unwrap();
        let s = status(&h);
        assert_eq!(s.view.as_ref().map(|v| v.id), Some(1));
        assert_eq!(s.role.as_deref(), Some("shard 0"));
        assert!(s.serving && !s.leaving && s.leave.is_none() && s.left.is_none());
        shared.lock().unwrap().held = true;
        rt.block_on(h.leave().unwrap()).unwrap().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let s = loop {
            let s = status(&h);
            if s.leave.as_ref().is_some_and(|l| l.held) {
                break s;
            }
            assert!(std::time::Instant::now() < deadline, "never held: {s:?}");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert!(s.leaving && s.serving && s.left.is_none() && h.left_reason().is_none());
        shared.lock().unwrap().gone = true;
        let why = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), h.left()).await })
            .expect("the leave completed but the waiter was not woken");
        assert!(why.starts_with("left: view 2"), "{why}");
        assert_eq!(h.left_reason(), Some(why.clone()));
        let s = status(&h);
        assert_eq!((s.left, s.stopped, s.serving), (Some(why), None, false));
        assert_eq!(h.backend_stopped(), None);
        let not_stopped = rt
            .block_on(async { tokio::time::timeout(Duration::from_millis(20), h.stopped()).await });
        assert!(not_stopped.is_err(), "a leave resolved the wait for a stop");
        assert!(replica.shutdown().is_ok());
    }
}
