//! Identifiers: nodes, regions and posted operations.

use std::fmt;

/// A node of the cluster (a process that owns regions and links to its peers).
///
/// ```
/// use squall_transport::NodeId;
/// assert_eq!(NodeId(3).to_string(), "n3");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The id as an index, for tables indexed by node.
    ///
    /// ```
    /// assert_eq!(squall_transport::NodeId(2).index(), 2);
    /// ```
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// A registered region of a node, named the same way on every node that registers it.
///
/// ```
/// use squall_transport::RegionId;
/// assert_eq!(RegionId(7).to_string(), "r7");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RegionId(pub u32);

impl fmt::Display for RegionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// A posted operation, unique per node for the life of its transport endpoint.
///
/// Completions name the operation they complete by this id.
///
/// ```
/// use squall_transport::OpId;
/// assert!(OpId(1) < OpId(2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op{}", self.0)
    }
}
