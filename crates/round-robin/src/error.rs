//! Typed errors.

use squall_sst::{SchemaError, SetupError, SmcError, SstError};
use squall_transport::NodeId;
use thiserror::Error;

use crate::log::LogError;

/// A configuration that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A bound out of range.
    #[error("round-robin configuration: {0}")]
    Invalid(&'static str),
    /// A member or sender list problem.
    #[error("round-robin configuration: {0} is {1}")]
    Member(NodeId, &'static str),
    /// The SMC bounds.
    #[error("round-robin configuration: {0}")]
    Smc(SmcError),
    /// The SST schema (the table would be too large: lower the window or slot size).
    #[error("round-robin configuration: {0}")]
    Schema(#[from] SchemaError),
}

/// Why a group could not be set up.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The table (regions missing or too small on some node, member not a peer, ...).
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The large-message region is missing or too small on some node.
    #[error(
        "large-message region on {node}: have {have} bytes, need {need} (register RoundRobin::layout)"
    )]
    LargeRegion {
        /// The node.
        node: NodeId,
        /// What it has.
        have: usize,
        /// What is needed.
        need: usize,
    },
    /// The durable log.
    #[error(transparent)]
    Log(#[from] LogError),
}

/// Why a group stopped (reported once through tracing and kept in
/// [`RoundRobin::stopped`](crate::RoundRobin::stopped)).
#[derive(Debug, Error)]
pub enum StopReason {
    /// A member was suspected: the group wedged (membership changes are the next layer's).
    #[error("member {0} suspected; the group is wedged")]
    Suspected(NodeId),
    /// The SST stopped.
    #[error(transparent)]
    Sst(#[from] SstError),
    /// SMC failed (a corrupt slot).
    #[error(transparent)]
    Smc(#[from] SmcError),
    /// A peer sent a message this member cannot decode.
    #[error("malformed message {index} from {sender}: {why}")]
    Malformed {
        /// The sender.
        sender: NodeId,
        /// Its SMC index.
        index: u64,
        /// What was wrong.
        why: &'static str,
    },
    /// Relaying a large message to a child failed at post (a malformed op: a bug).
    #[error("relaying a large message failed: {0}")]
    Relay(String),
    /// The durable log failed: this member cannot persist, so it stops.
    #[error(transparent)]
    Log(#[from] LogError),
}

/// Why an epoch could not apply a trim ([`RoundRobin::deliver_up_to`](crate::RoundRobin::deliver_up_to)).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum TrimError {
    /// The epoch is still running: wedge it first.
    #[error("the epoch must be wedged before a trim is applied")]
    NotWedged,
    /// The trim names a different number of senders.
    #[error("the trim has {have} counts but the epoch has {senders} senders")]
    Senders {
        /// Counts in the trim.
        have: usize,
        /// Senders of the epoch.
        senders: usize,
    },
    /// The trim asks for messages this member never received (it was computed without this
    /// member's wedge counts: a bug in the layer above).
    #[error("the trim delivers {trim} messages of {sender} but only {received} were received here")]
    Beyond {
        /// The sender.
        sender: NodeId,
        /// Its count in the trim.
        trim: u64,
        /// What this member received.
        received: u64,
    },
}
