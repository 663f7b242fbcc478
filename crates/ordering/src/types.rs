//! The backend traits and what they report.

use std::time::Duration;

use squall_transport::{NodeId, Waker};
use thiserror::Error;

/// A group of replicas (a shard, a partition).
///
/// ```
/// assert_eq!(squall_ordering::GroupId(3).to_string(), "g3");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupId(pub u32);

impl std::fmt::Display for GroupId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "g{}", self.0)
    }
}

/// A message delivered in a group's total order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Its position in the group's order (gapless from 0 within a view for round-robin; the
    /// slot for Paxos). Every member delivers the same message at the same position.
    pub position: u64,
    /// The member that submitted it.
    pub sender: NodeId,
    /// The payload as submitted.
    pub payload: Vec<u8>,
}

/// A message delivered by atomic multicast.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MulticastDelivery {
    /// Its final timestamp: if any process delivers `m` before `m'`, `m.timestamp <
    /// m'.timestamp`.
    pub timestamp: u64,
    /// The process that multicast it.
    pub sender: NodeId,
    /// The groups it was addressed to.
    pub dst: Vec<GroupId>,
    /// The payload as multicast.
    pub payload: Vec<u8>,
}

/// A membership view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// Increases with every installed view.
    pub id: u64,
    /// The members, in rank order.
    pub members: Vec<NodeId>,
    /// The leader (or coordinator) of this view, if the backend has one.
    pub leader: Option<NodeId>,
}

/// What a backend reports from [`TotalOrder::poll`] or [`AtomicMulticast::poll`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Upcall<D> {
    /// The next message in order.
    Deliver(D),
    /// Every delivered position up to and including this one is durable (persisted by enough
    /// members to survive the failures the backend tolerates). Round-robin's durable mode
    /// reports it only for positions synced in every member's log (they survive a power loss
    /// of all of them): after each delivery under `FsyncPolicy::EveryBatch`, lagging to the
    /// members' last syncs under `EveryRecords`, never under `Never`.
    Durable(u64),
    /// A new view (or leader) was installed.
    View(View),
    /// The group stopped delivering while membership changes (virtual synchrony); nothing is
    /// delivered past the stable prefix until a new view is installed.
    Wedged,
    /// A message this member submitted was discarded by a view change; submit it again.
    Discarded(Vec<u8>),
}

/// Why a submit was refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SubmitError {
    /// Flow control: the window is full. Poll, then submit again.
    #[error("the send window is full; poll and submit again")]
    WindowFull,
    /// The payload exceeds what the backend is configured to carry.
    #[error("payload of {len} bytes exceeds the configured maximum of {max}")]
    TooLarge {
        /// Payload length.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The group is wedged for a view change; submit again after the next view.
    #[error("the group is wedged for a view change; submit again after the next view")]
    Wedged,
    /// This member cannot submit (it is not a sender, or not a member of the group).
    #[error("this member cannot submit: {0}")]
    NotASender(String),
    /// The backend stopped (it lost its majority, or failed); the reason says which.
    #[error("the backend stopped: {0}")]
    Stopped(String),
}

/// Total order within one group. Implemented by every single-group backend.
pub trait TotalOrder {
    /// This member.
    fn me(&self) -> NodeId;

    /// Submits a payload for ordering. Never blocks: back-pressure is
    /// [`SubmitError::WindowFull`].
    fn submit(&mut self, payload: &[u8]) -> Result<(), SubmitError>;

    /// Does whatever protocol work is ready and appends what happened to `upcalls`. Never
    /// blocks. Returns whether anything changed.
    fn poll(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> bool;

    /// Parks until there may be work, at most `timeout` (a driver calls this when `poll`
    /// reported nothing).
    fn wait(&mut self, timeout: Duration);

    /// A handle that wakes a [`wait`](Self::wait)ing driver from another thread, e.g. when a
    /// client request arrives for it to submit.
    fn waker(&self) -> Waker;
}

/// Genuine atomic multicast across groups.
pub trait AtomicMulticast {
    /// This process.
    fn me(&self) -> NodeId;

    /// Multicasts a payload to the groups in `dst`. Never blocks.
    fn multicast(&mut self, dst: &[GroupId], payload: &[u8]) -> Result<(), SubmitError>;

    /// Does whatever protocol work is ready and appends what happened to `upcalls`. Never
    /// blocks. Returns whether anything changed.
    fn poll(&mut self, upcalls: &mut Vec<Upcall<MulticastDelivery>>) -> bool;

    /// Parks until there may be work, at most `timeout`.
    fn wait(&mut self, timeout: Duration);
}

/// A boxed backend is a backend, so a service can pick one at run time
/// (`Box<dyn TotalOrder>`).
impl<T: TotalOrder + ?Sized> TotalOrder for Box<T> {
    fn me(&self) -> NodeId {
        (**self).me()
    }
    fn submit(&mut self, payload: &[u8]) -> Result<(), SubmitError> {
        (**self).submit(payload)
    }
    fn poll(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> bool {
        (**self).poll(upcalls)
    }
    fn wait(&mut self, timeout: Duration) {
        (**self).wait(timeout)
    }
    fn waker(&self) -> Waker {
        (**self).waker()
    }
}
