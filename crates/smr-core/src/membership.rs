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

use squall_membership::group::Group;
use squall_membership::log::Durable;
use squall_transport::Transport;

use crate::transfer::{StateTransfer, TransferError};

impl<T: Transport, L: Durable> StateTransfer for Group<T, L> {
    fn holds_state(&self) -> bool {
        self.is_active()
    }

    fn state_wanted(&self) -> bool {
        Group::state_wanted(self)
    }

    fn provide_state(&mut self, position: u64, state: &[u8]) -> Result<(), TransferError> {
        Group::provide_state(self, position, state)
            .map_err(|e| TransferError::Refused(e.to_string()))
    }

    fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
        Group::take_state(self).map(|s| (s.position, s.state))
    }

    fn leave(&mut self) -> Result<(), TransferError> {
        Group::leave(self).map_err(|e| TransferError::Refused(e.to_string()))
    }
}
