//! The membership backend: `squall-membership`'s [`Group`] (virtual synchrony: views, the
//! ragged trim, discards, joins with state transfer) as a [`StateTransfer`] backend, so a
//! [`Replica`](crate::Replica) started with
//! [`spawn_joinable`](crate::Replica::spawn_joinable) over it serves joiners its snapshot
//! and joins a running group itself.
//!
//! What the replica does with the group's upcalls is the core's ordinary handling:
//! `Wedged` answers every owed request `Unavailable` (the client fails over; an entry
//! already submitted may still be ordered, and sessions make that harmless), `Discarded`
//! entries are dropped with them (the client's retry submits the command again, under the
//! same number), and `View` ends the wedge.
//!
//! A `Group` built on a recovered log (a total restart, `Group::new(.., Some(&recovered))`)
//! reports [`StateTransfer::restarting`] until its restart view is installed and its replay
//! handed out; a member that entered by transfer gets its persisted snapshot back through
//! `take_state` at its first `View`, which the replica installs like a joiner's. With
//! [`CoreConfig::snapshot_every`](crate::CoreConfig::snapshot_every) set, the replica hands
//! its snapshot to `Group::checkpoint` every that many applied deliveries (durable epochs
//! only): a restart then installs the latest one the same way and replays only what follows.
//! The group's writer thread writes and syncs the file; the replica's thread only encodes the
//! snapshot, and learns at a later poll that it is durable (`take_checkpoint_outcome`). When
//! the state machine captures its state cheaply
//! ([`StateMachine::snapshot_encoder`](crate::StateMachine::snapshot_encoder)) the replica
//! hands over an encoder instead (`Group::checkpoint_with`) and the writer thread encodes the
//! snapshot too.

use squall_membership::LeaveStatus;
use squall_membership::group::Group;
use squall_membership::log::Durable;
use squall_membership::snapshot::{CheckpointError, Checkpointed, EncodeState};
use squall_membership::transfer::TransferError as GroupTransferError;
use squall_transport::Transport;

use crate::machine::StateEncoder;
use crate::transfer::{CheckpointKept, LeaveReport, StateTransfer, TransferError};

/// What `Group::checkpoint` (or `checkpoint_with`) said, as a [`CheckpointKept`].
fn kept(r: Result<Checkpointed, CheckpointError>) -> Result<CheckpointKept, TransferError> {
    match r {
        Ok(Checkpointed::Started { .. }) => Ok(CheckpointKept::Pending),
        Ok(Checkpointed::Written { .. } | Checkpointed::Covered { .. }) => {
            Ok(CheckpointKept::Durable)
        }
        Ok(Checkpointed::NotDurable) => Ok(CheckpointKept::Never),
        Err(e) => Err(TransferError::Refused(e.to_string())),
    }
}

/// Why `Group::provide_state` refused a state, as a [`TransferError`]: a state above
/// `TransferConfig::max_state_bytes` is [`TransferError::TooLarge`] (no retry in this view can
/// succeed), anything else [`TransferError::Refused`].
fn refused(e: GroupTransferError) -> TransferError {
    match e {
        GroupTransferError::TooLarge { len, max } => TransferError::TooLarge {
            len,
            max: max as u64,
        },
        other => TransferError::Refused(other.to_string()),
    }
}

impl<T: Transport, L: Durable> StateTransfer for Group<T, L> {
    /// Active, or stopped: a stop freezes the state, it does not replace it. A `Group` goes
    /// from active to not only by joining again (`Group::rejoin`, after a switch into a
    /// restart), and then hands its transferred state over at the view it installs.
    fn holds_state(&self) -> bool {
        self.is_active() || self.stopped().is_some()
    }

    fn state_wanted(&self) -> bool {
        Group::state_wanted(self)
    }

    fn provide_state(&mut self, position: u64, state: &[u8]) -> Result<(), TransferError> {
        Group::provide_state(self, position, state).map_err(refused)
    }

    fn provide_state_owned(&mut self, position: u64, state: Vec<u8>) -> Result<(), TransferError> {
        Group::provide_state_owned(self, position, state).map_err(refused)
    }

    fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
        Group::take_state(self).map(|s| (s.position, s.state))
    }

    /// `Group::stopped`'s reason: a joiner's group stops for good on a state refused as too
    /// large (by it or by the member asked), a full buffer, a lost shard or a majority loss.
    fn stopped(&self) -> Option<String> {
        Group::stopped(self).map(str::to_owned)
    }

    fn restarting(&self) -> Option<String> {
        let gms = self.gms();
        if let Some(missing) = gms.restarting() {
            if let Some(reason) = self.stopped() {
                return Some(format!("its restart stopped: {reason}"));
            }
            if let Some(blocked) = gms.restart_blocked() {
                return Some(format!(
                    "the group is restarting from its logs and waits: {blocked}"
                ));
            }
            return Some(if missing.is_empty() {
                "the group is restarting from its logs: agreeing on the restart view".into()
            } else {
                let ids: Vec<u32> = missing.iter().map(|m| m.0).collect();
                format!(
                    "the group is restarting from its logs: waiting for members {ids:?} of its last view"
                )
            });
        }
        let left = self.replay_backlog();
        (left > 0).then(|| {
            format!("the group restarted from its logs: {left} replayed upcalls still to apply")
        })
    }

    fn checkpoint(
        &mut self,
        position: u64,
        state: Vec<u8>,
    ) -> Result<CheckpointKept, TransferError> {
        kept(Group::checkpoint(self, position, state))
    }

    fn checkpoint_encoded(
        &mut self,
        position: u64,
        encode: StateEncoder,
    ) -> Result<CheckpointKept, TransferError> {
        let encode: EncodeState = Box::new(move |out: &mut Vec<u8>| {
            encode(out);
            Ok(())
        });
        kept(Group::checkpoint_with(self, position, encode))
    }

    fn checkpoint_outcome(&mut self) -> Option<Result<u64, TransferError>> {
        Some(match Group::take_checkpoint_outcome(self)? {
            Ok(Checkpointed::Written { position, .. }) => Ok(position),
            Ok(Checkpointed::Covered { at }) => Ok(at),
            Ok(other) => Err(TransferError::Refused(format!(
                "the checkpoint ended {other:?}"
            ))),
            Err(e) => Err(TransferError::Refused(e.to_string())),
        })
    }

    fn leave(&mut self) -> Result<(), TransferError> {
        Group::leave(self).map_err(|e| TransferError::Refused(e.to_string()))
    }

    /// `Group::leave_status`, as its message (held back: which shard, waiting for which
    /// members to hold the state), held while it is `HeldForState` or `HeldForMajority`:
    /// blocked (it needs a join) for `HeldForMajority` and for `HeldForState` with nobody to
    /// wait for (this member is its shard's only one); left for `Left` only, so a stop for
    /// another reason while leaving (a minority, a lost log) is the replica's failure.
    /// Cheap when no leave is under way (a few reads of this member's own state). A leave
    /// resumed after a total restart answers `Resumes`, so the replica knows it is leaving
    /// although this process never called `leave`.
    fn leave_status(&self) -> Option<LeaveReport> {
        let s = Group::leave_status(self)?;
        let message = s.to_string();
        Some(match s {
            LeaveStatus::HeldForState { waiting_for, .. } if !waiting_for.is_empty() => {
                LeaveReport::held(message)
            }
            LeaveStatus::HeldForState { .. } | LeaveStatus::HeldForMajority { .. } => {
                LeaveReport::blocked(message)
            }
            LeaveStatus::Left { .. } => LeaveReport::left(message),
            _ => LeaveReport::going(message),
        })
    }

    /// `Group::view`: its id, members and leader.
    fn current_view(&self) -> Option<squall_ordering::View> {
        Group::view(self).map(|v| squall_ordering::View {
            id: v.id,
            members: v.members.clone(),
            leader: Some(v.leader),
        })
    }

    /// `Group::placement` in words: "subgroup S shard K of view V, members [..], holds the
    /// state" (or "taking the state"); "a spare in view V (in no shard)"; "view V is
    /// inadequate: ..." while the layout waits for members; "outside any view" before the
    /// first. Computed when asked, from this member's own state.
    fn role(&self) -> Option<String> {
        let holds = if self.is_active() {
            "holds the state"
        } else {
            "taking the state"
        };
        let Some(view) = Group::view(self) else {
            return Some("outside any view (joining or restarting)".into());
        };
        Some(match self.placement() {
            Some(p) => {
                let ids: Vec<u32> = p.members.iter().map(|m| m.0).collect();
                format!("{} of view {}, members {ids:?}, {holds}", p.shard, p.view)
            }
            None => match self.waiting() {
                Some(why) => format!("view {} is inadequate, waiting: {why}", view.id),
                None => format!("a spare in view {} (in no shard)", view.id),
            },
        })
    }
}
