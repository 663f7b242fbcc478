//! Membership changes and the leader's decision that ends a view.

use squall_transport::NodeId;

use crate::trim::Trim;

/// What happens to a node in the next view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// A member failed (was suspected): it is removed.
    Fail,
    /// A universe node asked to join: it is added.
    Join,
    /// A member asked to leave: it is removed, and nobody counts it as a failure.
    Leave,
}

/// One proposed change, as one 64-bit word in the GMS table: `kind << 32 | node`.
///
/// ```
/// use squall_membership::change::{Change, ChangeKind};
/// use squall_transport::NodeId;
/// let c = Change { kind: ChangeKind::Leave, node: NodeId(7) };
/// assert_eq!(Change::decode(c.encode()), Some(c));
/// assert_eq!(Change::decode(0), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Change {
    /// What happens.
    pub kind: ChangeKind,
    /// To whom.
    pub node: NodeId,
}

impl Change {
    /// The table word.
    pub fn encode(self) -> u64 {
        let k = match self.kind {
            ChangeKind::Fail => 1u64,
            ChangeKind::Join => 2,
            ChangeKind::Leave => 3,
        };
        (k << 32) | u64::from(self.node.0)
    }

    /// Parses a table word; `None` for a word no change encodes to.
    pub fn decode(word: u64) -> Option<Change> {
        let kind = match word >> 32 {
            1 => ChangeKind::Fail,
            2 => ChangeKind::Join,
            3 => ChangeKind::Leave,
            _ => return None,
        };
        Some(Change {
            kind,
            node: NodeId((word & 0xffff_ffff) as u32),
        })
    }

    /// Whether the change removes its node.
    pub fn removes(self) -> bool {
        !matches!(self.kind, ChangeKind::Join)
    }
}

/// The end of a view, decided by its leader once its changes committed and every survivor
/// wedged: the changes the next view applies and the ragged trim of the ending view, tagged with
/// the deciding leader's rank. Logged by every member before it echoes or acts on it.
///
/// ```
/// use squall_membership::change::{Change, ChangeKind, Decision};
/// use squall_membership::trim::Trim;
/// use squall_transport::NodeId;
/// let d = Decision {
///     rank: 0,
///     changes: vec![Change { kind: ChangeKind::Fail, node: NodeId(2) }],
///     trim: Trim { view: 4, counts: vec![(NodeId(0), 1), (NodeId(1), 1), (NodeId(2), 0)] },
/// };
/// assert_eq!(d.next_members(&[NodeId(0), NodeId(1), NodeId(2)]), vec![NodeId(0), NodeId(1)]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Rank (in the ending view) of the leader that published it.
    pub rank: u64,
    /// The changes the next view applies, in order.
    pub changes: Vec<Change>,
    /// The trim of the ending view (`trim.view` is the ending view's id).
    pub trim: Trim,
}

impl Decision {
    /// The next view's members: `members` minus removals, in order, then joiners in change order.
    pub fn next_members(&self, members: &[NodeId]) -> Vec<NodeId> {
        next_members(&self.changes, members)
    }
}

/// [`Decision::next_members`] of bare changes.
pub(crate) fn next_members(changes: &[Change], members: &[NodeId]) -> Vec<NodeId> {
    let removed = |n: NodeId| changes.iter().any(|c| c.node == n && c.removes());
    let mut next: Vec<NodeId> = members.iter().copied().filter(|&m| !removed(m)).collect();
    for c in changes {
        if c.kind == ChangeKind::Join && !next.contains(&c.node) {
            next.push(c.node);
        }
    }
    next
}
