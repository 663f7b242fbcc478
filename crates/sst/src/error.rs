//! Typed errors: bad schemas and configurations, refused pushes, partitions, and SMC misuse.

use squall_transport::{NodeId, PostError, RegionId};
use thiserror::Error;

/// A schema that cannot work, with what to change.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SchemaError {
    /// A table needs at least one member.
    #[error("a table needs at least one member")]
    NoMembers,
    /// Two fields share a name.
    #[error("field `{0}` is declared twice; give every field its own name")]
    DuplicateName(String),
    /// A vector or byte slot of length zero.
    #[error("field `{0}` has length zero; give it at least one element")]
    EmptyField(String),
    /// The row would exceed the configured maximum.
    #[error(
        "a row of {len} bytes exceeds the maximum of {max}; shrink fields or raise max_row_len"
    )]
    RowTooLong {
        /// The row's length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// Why a table could not be set up over a transport.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The schema was built for a different number of members.
    #[error("the schema was built for {schema} members but the member list has {members}")]
    MemberCount {
        /// Members the schema counts.
        schema: usize,
        /// Members given.
        members: usize,
    },
    /// The local node is not in the member list.
    #[error("{0} is not in the member list; a table's members must include the local node")]
    NotAMember(NodeId),
    /// A member is not linked to this node.
    #[error("member {0} is not a peer of this node's transport")]
    NotAPeer(NodeId),
    /// A member appears twice.
    #[error("member {0} is listed twice")]
    DuplicateMember(NodeId),
    /// The table region is missing or too short, locally or at a peer.
    #[error(
        "region {region} on {node} is {have} bytes but the table needs {need}; register a region of at least {need} bytes"
    )]
    Region {
        /// The region.
        region: RegionId,
        /// The node it was checked on.
        node: NodeId,
        /// Its length (0 if absent).
        have: usize,
        /// What the table needs.
        need: usize,
    },
    /// A failure-detector setting that cannot work.
    #[error("failure detector: {0}")]
    Detector(&'static str),
}

/// Why a table operation failed at run time.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SstError {
    /// The transport refused a posted op (a bug or a closed endpoint; see the source).
    #[error("push to {peer} refused: {source}")]
    Post {
        /// The peer.
        peer: NodeId,
        /// Why.
        #[source]
        source: PostError,
    },
    /// This member suspects a majority of the members: it may be on the minority side of a
    /// partition, so it stopped (partition safety). Restart it or rejoin through membership.
    #[error(
        "partition safety: this member suspects {suspected} of {members} members ({who:?}), which is not a minority; stopped"
    )]
    Partitioned {
        /// How many members it suspects.
        suspected: usize,
        /// How many members the table has.
        members: usize,
        /// Whom it suspects.
        who: Vec<NodeId>,
    },
    /// A byte slot write longer than the slot.
    #[error("{len} bytes do not fit byte slot `{field}` of {cap} bytes")]
    SlotOverflow {
        /// The field.
        field: &'static str,
        /// Bytes given.
        len: usize,
        /// Its capacity.
        cap: usize,
    },
    /// A vector index past the vector's end.
    #[error("index {index} is past the end of vector `{field}` of {len} elements")]
    VectorIndex {
        /// The field.
        field: &'static str,
        /// The index.
        index: usize,
        /// The vector's length.
        len: usize,
    },
}

/// Why an SMC operation failed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SmcError {
    /// The message does not fit a slot. Messages are never truncated.
    #[error(
        "message of {len} bytes exceeds the SMC slot size of {max}; raise slot_size or send less"
    )]
    TooLarge {
        /// Message length.
        len: usize,
        /// Slot payload size.
        max: usize,
    },
    /// The flow-control window is full: receivers have not acknowledged enough messages yet.
    /// Drive the table (poll) and try again; nothing was sent.
    #[error("SMC window full: {in_flight} messages unacknowledged, window is {window}")]
    WindowFull {
        /// Messages sent but not acknowledged by every unsuspected receiver.
        in_flight: u64,
        /// The window.
        window: usize,
    },
    /// A configuration value that cannot work.
    #[error("SMC configuration: {0}")]
    Config(&'static str),
    /// A slot's header does not match the message expected there: memory was corrupted or the
    /// ring protocol was broken. The receiver stops reading that sender.
    #[error(
        "slot for message {index} from {sender} holds header {header:#x}; ring protocol broken"
    )]
    Corrupt {
        /// The sender.
        sender: NodeId,
        /// The message index expected.
        index: u64,
        /// The header found.
        header: u64,
    },
    /// The table failed underneath.
    #[error(transparent)]
    Sst(#[from] SstError),
}
