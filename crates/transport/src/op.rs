//! Addresses, signalling, and what completes.

use crate::error::{FailureCause, OpError};
use crate::ids::{NodeId, OpId, RegionId};

/// A byte range of a region registered on this node: the source of a write, the target of a read.
///
/// ```
/// use squall_transport::{LocalSlice, RegionId};
/// let s = LocalSlice::new(RegionId(0), 8, 16);
/// assert_eq!(s.len, 16);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalSlice {
    /// The local region.
    pub region: RegionId,
    /// Byte offset in the region.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

impl LocalSlice {
    /// A local byte range.
    pub const fn new(region: RegionId, offset: usize, len: usize) -> LocalSlice {
        LocalSlice {
            region,
            offset,
            len,
        }
    }
}

/// A byte offset in a region registered on a peer.
///
/// ```
/// use squall_transport::{RemoteAddr, RegionId};
/// assert_eq!(RemoteAddr::new(RegionId(2), 64).offset, 64);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteAddr {
    /// The peer's region.
    pub region: RegionId,
    /// Byte offset in that region.
    pub offset: usize,
}

impl RemoteAddr {
    /// A remote address.
    pub const fn new(region: RegionId, offset: usize) -> RemoteAddr {
        RemoteAddr { region, offset }
    }
}

/// Whether a successful op produces a completion.
///
/// Unsignaled ops complete silently on success, like unsignaled RDMA writes; a failed op always
/// produces an error completion. One signaled op after a batch of unsignaled ones tells the
/// poster that the whole batch was applied (FIFO per link).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// Produce a completion on success.
    Signaled,
    /// Produce a completion only on failure.
    Unsignaled,
}

/// The kind of a posted operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// One-sided write.
    Write,
    /// One-sided read.
    Read,
    /// Remote compare-and-swap of one word.
    CompareAndSwap,
    /// Remote fetch-and-add of one word.
    FetchAdd,
    /// Two-sided message.
    Send,
    /// Completes once every earlier op on the link has been applied.
    Fence,
}

/// The outcome of one posted operation.
///
/// ```
/// use squall_transport::{Completion, NodeId, OpId, OpKind};
/// let c = Completion { op: OpId(1), peer: NodeId(2), kind: OpKind::CompareAndSwap, result: Ok(7) };
/// assert_eq!(c.value(), Some(7));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The op, as returned when it was posted.
    pub op: OpId,
    /// The peer it was posted to.
    pub peer: NodeId,
    /// What it was.
    pub kind: OpKind,
    /// `Ok(old value)` for atomics, `Ok(0)` for other ops, or why it failed.
    pub result: Result<u64, OpError>,
}

impl Completion {
    /// The op's value if it succeeded.
    pub fn value(&self) -> Option<u64> {
        self.result.ok()
    }
}

/// What [`Transport::poll`](crate::Transport::poll) reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// An op completed, successfully or not.
    Completion(Completion),
    /// A peer is failed. Reported exactly once per peer incarnation (once per peer unless the
    /// peer restarts, see [`PeerConnected`](Self::PeerConnected)), before the error completions
    /// it causes. From then on nothing that incarnation sends is applied to this node's regions.
    PeerFailed {
        /// The peer.
        peer: NodeId,
        /// Why.
        cause: FailureCause,
    },
    /// The link to a peer that was *absent* (not started yet when this node started) is now
    /// established, or a failed peer came back as a new incarnation (it restarted under the
    /// same id; always after that peer's [`PeerFailed`](Self::PeerFailed)). Reported once per
    /// link: a peer linked when this endpoint was created is connected from the start and never
    /// reported unless it restarts.
    /// From the moment this event is polled, ops to the peer are accepted, its regions are
    /// known ([`remote_region_len`](crate::Transport::remote_region_len)) and the usual
    /// contract holds on the link (FIFO, failure reported once and final).
    PeerConnected {
        /// The peer.
        peer: NodeId,
        /// The peer's incarnation, as announced when the link was established: larger than
        /// any incarnation of the peer linked before (a fresh number per start of the peer's
        /// process on fabrics that have processes; 1 for a late start in memory, one more per
        /// restart).
        incarnation: u64,
    },
}
