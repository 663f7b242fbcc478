//! What a running replica says about itself, for an operator ([`ReplicaStatus`], asked with
//! [`ReplicaHandle::status`](crate::ReplicaHandle::status)).

use squall_ordering::View;

use crate::transfer::LeaveReport;

/// Where a replica stands: its last view, its role there, whether it serves, and where its
/// leave stands. Taken on the replica's thread between two deliveries
/// ([`ReplicaCore::status`](crate::ReplicaCore::status) and the backend's
/// [`StateTransfer::role`](crate::StateTransfer::role)).
///
/// ```
/// use squall_smr::ReplicaStatus;
/// let s = ReplicaStatus::default();
/// assert!(!s.serving && s.view.is_none() && s.left.is_none());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaStatus {
    /// The view the replica runs in: the backend's
    /// [`current_view`](crate::StateTransfer::current_view) where it knows one, else the last
    /// [`Upcall::View`](squall_ordering::Upcall::View) it reported (none before the first,
    /// and never on a backend that reports none).
    pub view: Option<View>,
    /// What this replica runs in that view, in the backend's words (e.g. its shard and the
    /// shard's members; `None` where the backend says nothing: a fixed group).
    pub role: Option<String>,
    /// The replica applies deliveries and answers requests: it holds the state, is neither
    /// joining, restarting nor wedged, and has not stopped.
    pub serving: bool,
    /// Waiting for a transferred state (a joiner, or a member whose group joins again).
    pub joining: bool,
    /// Restarting from durable logs: why it cannot serve yet.
    pub restarting: Option<String>,
    /// Between a wedge and the next view.
    pub wedged: bool,
    /// The replica asked to leave its group (or its backend resumed a leave asked before a
    /// restart).
    pub leaving: bool,
    /// Where the leave stands, as the backend last said while it was under way.
    pub leave: Option<LeaveReport>,
    /// The leave completed: the backend's reason (its group installed a view without it).
    pub left: Option<String>,
    /// The replica stopped for another reason than a leave: why.
    pub stopped: Option<String>,
}
