//! Typed errors: rejected posts, region misuse, and why ops or peers failed.

use crate::ids::{NodeId, RegionId};
use thiserror::Error;

/// Why a region could not be created or accessed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RegionError {
    /// The length is zero or not a multiple of 8.
    #[error("region {region}: length {len} must be a positive multiple of 8 bytes")]
    BadLength {
        /// The region.
        region: RegionId,
        /// The length asked for.
        len: usize,
    },
    /// The same region id was registered twice on one node.
    #[error("region {region} is registered twice; give every region of a node its own id")]
    Duplicate {
        /// The region.
        region: RegionId,
    },
    /// The byte range does not lie inside the region.
    #[error(
        "bytes {offset}..{offset}+{len} are outside region {region}, which is {region_len} bytes long"
    )]
    OutOfBounds {
        /// The region.
        region: RegionId,
        /// Start of the range.
        offset: usize,
        /// Length of the range.
        len: usize,
        /// The region's length.
        region_len: usize,
    },
}

/// Why an operation was refused when posted. A refused op is never applied anywhere.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PostError {
    /// The peer is not one this node is linked to (a node never links to itself).
    #[error("{peer} is not a peer of this node")]
    UnknownPeer {
        /// The peer named.
        peer: NodeId,
    },
    /// The local region is not registered on this node.
    #[error("local region {region} is not registered on this node")]
    UnknownLocalRegion {
        /// The region named.
        region: RegionId,
    },
    /// The peer has not registered that region (peers learn each other's regions at connect).
    #[error("{peer} has no region {region}")]
    UnknownRemoteRegion {
        /// The peer.
        peer: NodeId,
        /// The region named.
        region: RegionId,
    },
    /// The byte range lies outside the region, on this node or the peer.
    #[error("out of bounds on {node}: {source}")]
    OutOfBounds {
        /// The node whose region the range was checked against.
        node: NodeId,
        /// The bounds violation.
        #[source]
        source: RegionError,
    },
    /// An atomic was aimed at an offset that is not 8-byte aligned.
    #[error("atomic at offset {offset} of {region} is not 8-byte aligned")]
    Misaligned {
        /// The region.
        region: RegionId,
        /// The offset.
        offset: usize,
    },
    /// A two-sided message exceeds the configured maximum.
    #[error(
        "message of {len} bytes exceeds the configured maximum of {max}; raise max_message_len or send less"
    )]
    MessageTooLarge {
        /// Message length.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The link's send queue is at its configured depth; poll completions and post again.
    #[error("send queue to {peer} is full ({depth} ops outstanding); poll completions first")]
    QueueFull {
        /// The peer.
        peer: NodeId,
        /// The configured depth.
        depth: usize,
    },
    /// The link to the peer is not up yet: the peer is *absent* (a configured node that has not
    /// started, or whose link has not been established). Not a failure: nothing was applied,
    /// no [`Event::PeerFailed`](crate::Event::PeerFailed) follows, and ops to the peer are
    /// accepted once [`Event::PeerConnected`](crate::Event::PeerConnected) for it was polled.
    #[error("{peer} is not connected yet (absent); post again after its PeerConnected event")]
    NotConnected {
        /// The peer.
        peer: NodeId,
    },
    /// This endpoint has been shut down (its node crashed or was closed).
    #[error("this transport endpoint is closed")]
    Closed,
}

/// Why a posted operation failed. Every op to a failed peer completes with one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum OpError {
    /// The op was not applied within the configured timeout; the peer is now failed.
    #[error("timed out")]
    TimedOut,
    /// The peer was failed before the op could be applied.
    #[error("peer failed")]
    PeerFailed,
}

/// Why a peer was reported failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum FailureCause {
    /// An op to it did not complete within the timeout, or heartbeats stopped.
    #[error("timed out")]
    TimedOut,
    /// The connection to it broke.
    #[error("connection lost")]
    ConnectionLost,
    /// Local code declared it failed with `report_failed`.
    #[error("reported failed locally")]
    Local,
    /// The peer refused this node's ops (it declared this node failed).
    #[error("the peer cut the link")]
    Remote,
}
