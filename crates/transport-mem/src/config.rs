//! Configuration errors shared by both fabrics.

use thiserror::Error;

/// A configuration value that cannot work, with what to change.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The op timeout is zero.
    #[error("op_timeout must be positive; 100ms is a sensible default")]
    ZeroTimeout,
    /// The message size limit is zero.
    #[error("max_message_len must be at least 1 byte")]
    ZeroMessageLen,
    /// A cluster needs at least one node.
    #[error("a cluster needs at least one node")]
    NoNodes,
    /// Too many nodes for node ids.
    #[error("{0} nodes is more than this fabric supports (at most 1024)")]
    TooManyNodes(usize),
    /// The region layout is invalid.
    #[error("bad region layout: {0}")]
    Region(#[from] squall_transport::RegionError),
    /// A simulator latency range is empty or inverted.
    #[error("latency range {min_ns}..={max_ns} ns is inverted; set min_latency <= max_latency")]
    Latency {
        /// Lower bound.
        min_ns: u64,
        /// Upper bound.
        max_ns: u64,
    },
}
