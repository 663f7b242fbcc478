//! Replicated services on any Squall ordering backend.
//!
//! A user writes a deterministic [`StateMachine`]; a [`Replica`] runs it over any backend that
//! implements [`squall_ordering::TotalOrder`] (round-robin, CAS-Paxos) on any transport, and
//! clients talk to replicas through the async [`Client`] over the versioned
//! [client protocol](wire) served by [`server`]. The replica's logic is a sans-IO
//! [`ReplicaCore`], so the simulator tests drive exactly the code that runs in production.
//!
//! ## What a replica guarantees
//!
//! - **Exactly-once commands.** A client session (a random 64-bit id) numbers its commands
//!   from 1 and sends one at a time; a retry repeats the number. Every replica keeps, per
//!   session, the latest applied number and its response, so a command delivered twice (the
//!   client retried at another replica) is applied once and answered from the table. The table
//!   is bounded (`max_sessions`, least recently used evicted identically on every replica); a
//!   command from an evicted session is refused, never applied twice.
//! - **Linearizable reads**, two ways:
//!   - [`ReadMode::Ordered`](wire::ReadMode::Ordered): the query travels through the total
//!     order and is answered at its position, like a command.
//!   - [`ReadMode::Barrier`](wire::ReadMode::Barrier) (the default, cheaper): reads wait
//!     behind a small barrier entry that the replica submits *after* they arrive; when the
//!     barrier is delivered the replica answers every read queued before it from its state at
//!     that position. One barrier serves a whole batch of reads, and the queries never travel.
//!     *Why it is linearizable*: the read is answered with the state at the barrier's position
//!     `b`, a moment inside the read's interval (the barrier was submitted after the read was
//!     invoked, and delivered before it returns). Any write `w` that completed before the read
//!     was invoked was delivered at some replica before that, hence is stable; both backends
//!     then give every later submission a later position (round-robin: the submitting replica
//!     had already sent — data or null — every message numbered below `w`, so its next message
//!     numbers above; CAS-Paxos: a decided slot is never reused and new commands take slots
//!     after every slot the leader learned decided), so `w` is before `b`. The simulator test
//!     `linearizable_under_faults` checks both read modes with the checker after every run.
//!   - [`ReadMode::Local`](wire::ReadMode::Local) answers from the replica's current state and
//!     is *not* linearizable (a lagging replica returns stale data); a test shows the checker
//!     catching it.
//! - **Joins with state transfer**, where the backend offers it ([`StateTransfer`]; the
//!   membership backend, `squall-membership`'s `Group`, does with the default `membership`
//!   feature): [`Replica::spawn_joinable`] provides the replica's [`Snapshot`] (state machine,
//!   sessions, position) to a joiner that asks, and a joining replica installs the one it is
//!   sent before applying anything, then continues identically to the others. A joining
//!   replica answers requests `Unavailable` until then.
//! - **Total restarts** from durable logs, where the backend reports them
//!   ([`StateTransfer::restarting`]; `Group` built on a recovered log): the replica applies
//!   the backend's replay, installs a persisted state it offers (a member that entered by
//!   transfer), sessions included, and answers requests `Unavailable` with the reason until the
//!   restart completes.
//!
//! ```
//! use squall_smr::wire::{Entry, ReadMode, Request};
//! // What a replica submits for a command: the session, the number, and the command itself.
//! let bytes = Entry::Command { client: 1, seq: 1, acked: 0, payload: b"x" }.encode();
//! assert!(matches!(Entry::decode(&bytes)?, Entry::Command { seq: 1, .. }));
//! assert_eq!(ReadMode::default(), ReadMode::Barrier);
//! # Ok::<(), squall_smr::DecodeError>(())
//! ```

// Declared first: its test macros are in scope in the modules after it.
#[cfg(test)]
#[macro_use]
mod test_support;

mod client;
mod codec;
mod core;
mod machine;
#[cfg(feature = "membership")]
mod membership;
mod metrics;
mod runtime;
pub mod server;
mod snapshot;
mod status;
mod transfer;
pub mod wire;

pub use client::{Client, ClientConfig, ClientError};
pub use codec::DecodeError;
pub use core::{
    BackendStopped, CoreConfig, DecodedState, EncodedState, InstallJob, PositionMismatch,
    ReplicaCore, ServeJob, ServeLost, StopPhase, Token,
};
pub use machine::{RestoreError, StateDecoder, StateEncoder, StateMachine};
pub use metrics::{Counters, Metrics};
pub use runtime::{Busy, Replica, ReplicaConfig, ReplicaHandle, RuntimeError};
pub use snapshot::{SNAPSHOT_VERSION, Snapshot};
pub use status::ReplicaStatus;
pub use transfer::{CheckpointKept, LeaveReport, StateTransfer, TransferError};

/// A setting that cannot work, and what to change.
///
/// ```
/// let e = squall_smr::ConfigError::new("queue", "must be at least 1");
/// assert_eq!(e.to_string(), "invalid setting `queue`: must be at least 1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid setting `{field}`: {reason}")]
pub struct ConfigError {
    /// The setting.
    pub field: &'static str,
    /// What is wrong and what to do.
    pub reason: String,
}

impl ConfigError {
    /// A new error about `field`.
    pub fn new(field: &'static str, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            field,
            reason: reason.into(),
        }
    }
}
