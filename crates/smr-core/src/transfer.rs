//! State transfer to joining replicas: an optional capability of an ordering backend.
//!
//! A backend with dynamic membership (the virtual-synchrony [`Group`] of `squall-membership`)
//! admits a replica that holds no state yet. It then needs the service's state from a member,
//! taken at a log position, and the deliveries from that position on. The backend moves the
//! bytes and buffers the joiner's deliveries; the replica decides what the bytes are: its
//! [`Snapshot`] (state machine, client sessions, position), so that deduplication carries over
//! the join and a client's command retried across the view change is applied once.
//!
//! [`Replica::spawn_joinable`](crate::Replica::spawn_joinable) runs a backend that implements
//! [`StateTransfer`]; [`ReplicaCore::upcalls_from`](crate::ReplicaCore::upcalls_from) is the
//! sans-IO step it uses (and that simulator tests drive). Backends without it run through
//! [`Replica::spawn`](crate::Replica::spawn) unchanged.
//!
//! [`Group`]: https://docs.rs/squall-membership
//! [`Snapshot`]: crate::Snapshot

use squall_ordering::TotalOrder;
use thiserror::Error;

use crate::codec::DecodeError;
use crate::machine::{RestoreError, StateEncoder};

/// Where a replica's leave stands, as its backend says ([`StateTransfer::leave_status`]).
///
/// ```
/// use squall_smr::LeaveReport;
///
/// let r = LeaveReport::held("leave held back in view 2: waiting for n5 to hold the state");
/// assert!(r.held && !r.blocked && !r.left);
/// assert!(!LeaveReport::going("leave asked in view 2").held);
/// assert!(LeaveReport::blocked("the rest would be no majority").blocked);
/// assert!(LeaveReport::left("left: view 3 was installed without it").left);
/// assert_eq!(r.to_string(), r.message);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaveReport {
    /// The leave is held back (e.g. until another member of its shard holds the state): the
    /// replica logs it at `warn`.
    pub held: bool,
    /// Held back until the membership changes (a member joins): it does not clear by itself
    /// (the rest would be no majority, or this member is its shard's only one). Implies
    /// [`held`](Self::held).
    pub blocked: bool,
    /// The leave completed: the group installed a view without this member. Only a stop
    /// that the backend reports while this is set counts as the leave completing
    /// ([`ReplicaCore::left`](crate::ReplicaCore::left)); any other stop of a leaving replica
    /// is a failure ([`BackendStopped`](crate::BackendStopped)).
    pub left: bool,
    /// What the backend says, for the log and the operator.
    pub message: String,
}

impl LeaveReport {
    /// A leave held back until something clears by itself (a transfer completes), with why.
    pub fn held(message: impl Into<String>) -> Self {
        LeaveReport {
            held: true,
            blocked: false,
            left: false,
            message: message.into(),
        }
    }

    /// A leave held back until the membership changes ([`blocked`](Self::blocked)), with why.
    pub fn blocked(message: impl Into<String>) -> Self {
        LeaveReport {
            blocked: true,
            ..LeaveReport::held(message)
        }
    }

    /// A leave that nothing holds back (asked or under way), with where it stands.
    pub fn going(message: impl Into<String>) -> Self {
        LeaveReport {
            held: false,
            blocked: false,
            left: false,
            message: message.into(),
        }
    }

    /// A leave that completed ([`left`](Self::left)), with the backend's words.
    pub fn left(message: impl Into<String>) -> Self {
        LeaveReport {
            left: true,
            ..LeaveReport::going(message)
        }
    }
}

impl std::fmt::Display for LeaveReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A total-order backend that can move the replica's state to a joiner.
///
/// The contract (what [`ReplicaCore::upcalls_from`](crate::ReplicaCore::upcalls_from) relies
/// on): positions of deliveries are gapless and count every delivery from 0, so a replica that
/// applied `n` deliveries is at position `n`; a joiner reports nothing before its first
/// [`Upcall::View`](squall_ordering::Upcall::View), at which point
/// [`take_state`](Self::take_state) returns the state and the deliveries that follow start at
/// its position. A backend may also hand a state over at a later `View` to a replica that
/// held one (after [`holds_state`](Self::holds_state) turned `false`): the replica installs it
/// and the deliveries that follow start at its position. A delivery at any other position
/// than the replica's stops the replica ([`PositionMismatch`](crate::PositionMismatch)).
///
/// ```
/// use std::time::Duration;
/// use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
/// use squall_smr::{StateTransfer, TransferError};
/// use squall_transport::{NodeId, Waker};
///
/// /// A backend of one member that never admits anyone: it never asks for the state.
/// struct Alone(NodeId, Option<Waker>);
/// impl TotalOrder for Alone {
///     fn me(&self) -> NodeId { self.0 }
///     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::WindowFull) }
///     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
///     fn wait(&mut self, t: Duration) { std::thread::park_timeout(t) }
///     fn waker(&self) -> Waker { self.1.clone().expect("a waker") }
/// }
/// impl StateTransfer for Alone {
///     fn holds_state(&self) -> bool { true }
///     fn state_wanted(&self) -> bool { false }
///     fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
///     fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
/// }
/// let a = Alone(NodeId(0), None);
/// assert!(a.holds_state() && !a.state_wanted());
/// ```
pub trait StateTransfer: TotalOrder {
    /// Whether this replica holds the service's state: `false` for a joiner until its transfer
    /// completed. Asked when the replica starts: a replica that does not is *joining* and
    /// answers every request `Unavailable` until a state is installed. Asked again after every
    /// poll while the replica holds a state (s23): a backend that stops holding it (its group
    /// switched into a restart and joins again, discarding the state it delivered) makes the
    /// replica drop its state and await the one [`take_state`](Self::take_state) hands over at
    /// a later view, as a joiner does. A backend that stopped for good keeps answering `true`
    /// (its state is frozen, not replaced); a joiner learns of its stop through
    /// [`stopped`](Self::stopped).
    fn holds_state(&self) -> bool;

    /// Whether a joiner asked this replica for the state and none was provided yet (checked
    /// after every poll, once the poll's upcalls are applied).
    fn state_wanted(&self) -> bool;

    /// Hands the backend the replica's state reflecting every delivery before `position`.
    /// The backend may refuse it: [`TransferError::TooLarge`] for a state above its bound,
    /// [`TransferError::Refused`] otherwise (e.g. while wedged for a view change). Either way
    /// the replica offers a state again only after its next view change (where the joiner
    /// asks again), not at every poll of the same view.
    fn provide_state(&mut self, position: u64, state: &[u8]) -> Result<(), TransferError>;

    /// [`provide_state`](Self::provide_state) with the bytes handed over: the replica calls
    /// this, so that a backend that keeps the state to stream it (as `Group` does) takes it
    /// without copying it on the replica's thread. The default lends the bytes to
    /// `provide_state`.
    ///
    /// ```
    /// # use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    /// # use squall_smr::{StateTransfer, TransferError};
    /// # use squall_transport::{NodeId, Waker};
    /// /// Keeps the state it is given, to stream it.
    /// struct Keep(Option<(u64, Vec<u8>)>);
    /// # impl TotalOrder for Keep {
    /// #     fn me(&self) -> NodeId { NodeId(0) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::WindowFull) }
    /// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
    /// #     fn wait(&mut self, t: std::time::Duration) { std::thread::park_timeout(t) }
    /// #     fn waker(&self) -> Waker { Waker::noop() }
    /// # }
    /// impl StateTransfer for Keep {
    /// #   fn holds_state(&self) -> bool { true }
    /// #   fn state_wanted(&self) -> bool { self.0.is_none() }
    /// #   fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
    ///     fn provide_state(&mut self, at: u64, state: &[u8]) -> Result<(), TransferError> {
    ///         self.provide_state_owned(at, state.to_vec())
    ///     }
    ///     fn provide_state_owned(&mut self, at: u64, state: Vec<u8>) -> Result<(), TransferError> {
    ///         self.0 = Some((at, state)); // moved, not copied
    ///         Ok(())
    ///     }
    /// }
    /// let mut k = Keep(None);
    /// k.provide_state_owned(4, b"snap".to_vec())?;
    /// assert_eq!(k.0, Some((4, b"snap".to_vec())));
    /// # Ok::<(), TransferError>(())
    /// ```
    fn provide_state_owned(&mut self, position: u64, state: Vec<u8>) -> Result<(), TransferError> {
        self.provide_state(position, &state)
    }

    /// The state a joiner received, once: its position and its bytes (as provided). A backend
    /// restarting from durable logs ([`restarting`](Self::restarting)) offers the state it
    /// persisted the same way: at its first [`Upcall::View`](squall_ordering::Upcall::View),
    /// followed by the deliveries from its position.
    fn take_state(&mut self) -> Option<(u64, Vec<u8>)>;

    /// Whether the backend is restarting from its durable logs (a total restart) and has not
    /// completed yet: `Some(why)` until its restart view is installed and its replay handed
    /// out. While it is, the replica applies what the backend replays (and installs a state
    /// it offers through [`take_state`](Self::take_state)) but answers every client request
    /// `Unavailable` with this reason: its state is not the group's yet. Asked when the
    /// replica starts and after every poll until it returns `None`. The default: never
    /// restarting (a backend without durable logs).
    fn restarting(&self) -> Option<String> {
        None
    }

    /// Why the backend stopped for good, if it did (`Group`: its stop reason, e.g. a state
    /// refused as too large, a full buffer, a lost shard). Asked after every poll while the
    /// replica is *joining*: a joiner whose backend stopped before its state was installed
    /// can never get one, so the replica stops with [`BackendStopped`](crate::BackendStopped) naming
    /// this reason (requests answered `Unavailable` with it, the runtime's thread ends)
    /// instead of answering "joining" for good. The default: never stopped (a backend that
    /// reports its stop only through [`SubmitError::Stopped`](squall_ordering::SubmitError)).
    ///
    /// ```
    /// # use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    /// # use squall_smr::{StateTransfer, TransferError};
    /// # use squall_transport::{NodeId, Waker};
    /// /// A joiner's backend that gave up.
    /// struct GaveUp;
    /// # impl TotalOrder for GaveUp {
    /// #     fn me(&self) -> NodeId { NodeId(3) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::WindowFull) }
    /// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
    /// #     fn wait(&mut self, t: std::time::Duration) { std::thread::park_timeout(t) }
    /// #     fn waker(&self) -> Waker { Waker::noop() }
    /// # }
    /// impl StateTransfer for GaveUp {
    /// #   fn holds_state(&self) -> bool { false }
    /// #   fn state_wanted(&self) -> bool { false }
    /// #   fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
    /// #   fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
    ///     // ...
    ///     fn stopped(&self) -> Option<String> {
    ///         Some("the state of 4096 bytes is above the bound".into())
    ///     }
    /// }
    /// assert!(GaveUp.stopped().is_some_and(|why| why.contains("4096")));
    /// ```
    fn stopped(&self) -> Option<String> {
        None
    }

    /// Where this replica's leave stands, once the backend accepted it
    /// ([`leave`](Self::leave)) or asks it again by itself (`Group` after a total restart,
    /// for a leave its log holds from before): e.g. held back until another member of its
    /// shard holds the state, and which (`Group`: `Group::leave_status`). `None` while no
    /// leave is under way. Asked after every poll, so it must be cheap when no leave is under
    /// way. A `Some` makes the replica leaving, as [`ReplicaCore::leaving`] does, so that
    /// the stop that completes the leave is not taken for a failure; each change is logged
    /// by the replica (`warn` when [`held`](LeaveReport::held)). The default: nothing to say.
    ///
    /// [`ReplicaCore::leaving`]: crate::ReplicaCore::leaving
    ///
    /// ```
    /// # use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    /// # use squall_smr::{LeaveReport, StateTransfer, TransferError};
    /// # use squall_transport::{NodeId, Waker};
    /// /// A leaver whose shard has no other holder yet.
    /// struct Held;
    /// # impl TotalOrder for Held {
    /// #     fn me(&self) -> NodeId { NodeId(1) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::WindowFull) }
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
    ///         Some(LeaveReport::held("leave held back in view 2: no other member of its shard holds its state yet"))
    ///     }
    /// }
    /// assert!(Held.leave_status().is_some_and(|s| s.held));
    /// ```
    fn leave_status(&self) -> Option<LeaveReport> {
        None
    }

    /// What this replica runs in its current view, in words for an operator (e.g. its shard
    /// and the shard's members, or that it is a spare), reported in
    /// [`ReplicaStatus::role`](crate::ReplicaStatus::role). `None` (the default) where the
    /// backend has nothing to say. Asked only when someone asks for the replica's status.
    ///
    /// ```
    /// use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    /// use squall_smr::{StateTransfer, TransferError};
    /// use squall_transport::{NodeId, Waker};
    /// struct Sharded;
    /// # impl TotalOrder for Sharded {
    /// #     fn me(&self) -> NodeId { NodeId(1) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::WindowFull) }
    /// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
    /// #     fn wait(&mut self, t: std::time::Duration) { std::thread::park_timeout(t) }
    /// #     fn waker(&self) -> Waker { Waker::noop() }
    /// # }
    /// impl StateTransfer for Sharded {
    /// #   fn holds_state(&self) -> bool { true }
    /// #   fn state_wanted(&self) -> bool { false }
    /// #   fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
    /// #   fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
    ///     // ...
    ///     fn role(&self) -> Option<String> {
    ///         Some("shard 0 of subgroup 0, members [1, 2]".into())
    ///     }
    /// }
    /// assert!(Sharded.role().is_some_and(|r| r.contains("shard 0")));
    /// ```
    fn role(&self) -> Option<String> {
        None
    }

    /// The view this replica runs in now, where the backend knows it without reporting it as
    /// an [`Upcall::View`](squall_ordering::Upcall::View) (e.g. a group's first view);
    /// reported in [`ReplicaStatus::view`](crate::ReplicaStatus::view) in place of the last
    /// upcalled one. `None` (the default): the upcalled view stands. Asked only when someone
    /// asks for the replica's status.
    ///
    /// ```
    /// use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall, View};
    /// use squall_smr::{StateTransfer, TransferError};
    /// use squall_transport::{NodeId, Waker};
    /// struct First;
    /// # impl TotalOrder for First {
    /// #     fn me(&self) -> NodeId { NodeId(0) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::WindowFull) }
    /// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
    /// #     fn wait(&mut self, t: std::time::Duration) { std::thread::park_timeout(t) }
    /// #     fn waker(&self) -> Waker { Waker::noop() }
    /// # }
    /// impl StateTransfer for First {
    /// #   fn holds_state(&self) -> bool { true }
    /// #   fn state_wanted(&self) -> bool { false }
    /// #   fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
    /// #   fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
    ///     // ...
    ///     fn current_view(&self) -> Option<View> {
    ///         Some(View { id: 0, members: vec![NodeId(0), NodeId(1)], leader: Some(NodeId(0)) })
    ///     }
    /// }
    /// assert_eq!(First.current_view().map(|v| v.id), Some(0));
    /// ```
    fn current_view(&self) -> Option<squall_ordering::View> {
        None
    }

    /// Makes the replica's state (its encoded [`Snapshot`](crate::Snapshot), reflecting every delivery before
    /// `position`) durable in the backend, so that a restart from the backend's logs starts
    /// from it and replays only what follows: called every
    /// [`CoreConfig::snapshot_every`](crate::CoreConfig::snapshot_every) applied deliveries.
    /// The backend must not block on the disk here: it may start the write and report it
    /// [`CheckpointKept::Pending`], then its end through
    /// [`checkpoint_outcome`](Self::checkpoint_outcome) (the replica asks for no other
    /// checkpoint meanwhile). An error: not now (the replica asks again after its next
    /// delivery). The default keeps none ([`CheckpointKept::Never`]).
    fn checkpoint(
        &mut self,
        _position: u64,
        _state: Vec<u8>,
    ) -> Result<CheckpointKept, TransferError> {
        Ok(CheckpointKept::Never)
    }

    /// [`checkpoint`](Self::checkpoint) with the snapshot given as an encoder of it (which
    /// appends exactly the encoded [`Snapshot`](crate::Snapshot) at `position`, however many
    /// deliveries the replica applies meanwhile): the replica hands this over when its state
    /// machine captures its state cheaply
    /// ([`StateMachine::snapshot_encoder`](crate::StateMachine::snapshot_encoder)), so that a
    /// backend with a writer thread encodes the snapshot there, off the replica's thread. The
    /// default encodes it here and calls [`checkpoint`](Self::checkpoint) (a backend
    /// implementing only the bytes path loses nothing but that).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
    /// # use squall_smr::{CheckpointKept, StateTransfer, TransferError};
    /// # use squall_transport::{NodeId, Waker};
    /// /// Keeps the last checkpoint's bytes in memory.
    /// struct Keep(Option<(u64, Vec<u8>)>);
    /// # impl TotalOrder for Keep {
    /// #     fn me(&self) -> NodeId { NodeId(0) }
    /// #     fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> { Err(SubmitError::WindowFull) }
    /// #     fn poll(&mut self, _: &mut Vec<Upcall<Delivery>>) -> bool { false }
    /// #     fn wait(&mut self, t: Duration) { std::thread::park_timeout(t) }
    /// #     fn waker(&self) -> Waker { Waker::noop() }
    /// # }
    /// impl StateTransfer for Keep {
    /// #   fn holds_state(&self) -> bool { true }
    /// #   fn state_wanted(&self) -> bool { false }
    /// #   fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> { Ok(()) }
    /// #   fn take_state(&mut self) -> Option<(u64, Vec<u8>)> { None }
    ///     // ...
    ///     fn checkpoint(&mut self, at: u64, state: Vec<u8>) -> Result<CheckpointKept, TransferError> {
    ///         self.0 = Some((at, state));
    ///         Ok(CheckpointKept::Durable)
    ///     }
    /// }
    /// let mut k = Keep(None);
    /// // The default `checkpoint_encoded` runs the encoder and hands `checkpoint` its bytes.
    /// k.checkpoint_encoded(3, Box::new(|out: &mut Vec<u8>| out.extend_from_slice(b"snap")))?;
    /// assert_eq!(k.0, Some((3, b"snap".to_vec())));
    /// # Ok::<(), TransferError>(())
    /// ```
    fn checkpoint_encoded(
        &mut self,
        position: u64,
        encode: StateEncoder,
    ) -> Result<CheckpointKept, TransferError> {
        let mut state = Vec::new();
        encode(&mut state);
        self.checkpoint(position, state)
    }

    /// How the checkpoint the backend reported [`CheckpointKept::Pending`] ended, once:
    /// `Ok(position)` once it is durable, an error if it was not made durable (the replica
    /// asks again after its next delivery); `None` while it is still under way. Asked after
    /// every poll while one is pending. The default: `None`.
    fn checkpoint_outcome(&mut self) -> Option<Result<u64, TransferError>> {
        None
    }

    /// Asks the group to remove this replica gracefully ([`ReplicaHandle::leave`]): the others
    /// install a view without it, and it applies every delivery up to that view change, then
    /// stops serving. The default refuses (a backend that admits joiners need not let members
    /// leave).
    ///
    /// [`ReplicaHandle::leave`]: crate::ReplicaHandle::leave
    fn leave(&mut self) -> Result<(), TransferError> {
        Err(TransferError::Refused(
            "this backend does not let a replica leave its group".into(),
        ))
    }
}

impl<T: StateTransfer + ?Sized> StateTransfer for Box<T> {
    fn holds_state(&self) -> bool {
        (**self).holds_state()
    }
    fn state_wanted(&self) -> bool {
        (**self).state_wanted()
    }
    fn provide_state(&mut self, position: u64, state: &[u8]) -> Result<(), TransferError> {
        (**self).provide_state(position, state)
    }
    fn provide_state_owned(&mut self, position: u64, state: Vec<u8>) -> Result<(), TransferError> {
        (**self).provide_state_owned(position, state)
    }
    fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
        (**self).take_state()
    }
    fn restarting(&self) -> Option<String> {
        (**self).restarting()
    }
    fn stopped(&self) -> Option<String> {
        (**self).stopped()
    }
    fn leave_status(&self) -> Option<LeaveReport> {
        (**self).leave_status()
    }
    fn checkpoint(
        &mut self,
        position: u64,
        state: Vec<u8>,
    ) -> Result<CheckpointKept, TransferError> {
        (**self).checkpoint(position, state)
    }
    fn checkpoint_encoded(
        &mut self,
        position: u64,
        encode: StateEncoder,
    ) -> Result<CheckpointKept, TransferError> {
        (**self).checkpoint_encoded(position, encode)
    }
    fn checkpoint_outcome(&mut self) -> Option<Result<u64, TransferError>> {
        (**self).checkpoint_outcome()
    }
    fn leave(&mut self) -> Result<(), TransferError> {
        (**self).leave()
    }
}

/// What a backend did with a checkpoint ([`StateTransfer::checkpoint`]).
///
/// ```
/// assert_ne!(squall_smr::CheckpointKept::Pending, squall_smr::CheckpointKept::Durable);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointKept {
    /// Durable already (or an earlier checkpoint covers the position).
    Durable,
    /// Being written off the replica's thread: its end comes through
    /// [`StateTransfer::checkpoint_outcome`].
    Pending,
    /// The backend keeps no checkpoints (nothing to bound): the replica stops asking.
    Never,
}

/// Why a state could not be provided or installed, or a leave was refused.
///
/// ```
/// let e = squall_smr::TransferError::Position { snapshot: 3, position: 5 };
/// assert!(e.to_string().contains("position 5"));
/// ```
#[derive(Debug, Error)]
pub enum TransferError {
    /// The backend refused the state (the reason says why; a wedged group refuses until its
    /// next view, where the joiner asks again).
    #[error("the backend refused the state: {0}")]
    Refused(String),
    /// The state is larger than the backend moves (`Group`: above
    /// `TransferConfig::max_state_bytes`). Unlike [`Refused`](Self::Refused) no retry in the
    /// same view can succeed: the replica offers its state again only after the next view
    /// change, and logs this at `warn` (the bound must be raised, or the state made smaller).
    ///
    /// ```
    /// let e = squall_smr::TransferError::TooLarge { len: 2048, max: 1024 };
    /// assert!(e.to_string().contains("2048 bytes"));
    /// ```
    #[error("the state of {len} bytes is above the backend's bound of {max} bytes")]
    TooLarge {
        /// Bytes of the encoded state.
        len: u64,
        /// The backend's bound.
        max: u64,
    },
    /// The transferred bytes are not a replica snapshot.
    #[error("the transferred state is not a replica snapshot: {0}")]
    Decode(#[from] DecodeError),
    /// The snapshot's position and the backend's disagree: applying the deliveries that
    /// follow would skip or repeat some.
    #[error(
        "the transferred snapshot holds {snapshot} deliveries but the backend resumes at position {position}"
    )]
    Position {
        /// Deliveries the snapshot reflects.
        snapshot: u64,
        /// The position the backend's next delivery has.
        position: u64,
    },
    /// The state machine refused the snapshot's state.
    #[error(transparent)]
    Restore(#[from] RestoreError),
}
