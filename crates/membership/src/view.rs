//! Views and the pluggable mapping of a view's members to shards.

use squall_transport::NodeId;
use thiserror::Error;

/// One installed view: its number, its members in rank order, the member that led it when it was
/// installed (the lowest-ranked one), and its shards.
///
/// ```
/// use squall_membership::view::{EvenShards, View};
/// use squall_transport::NodeId;
/// let v = View::new(0, vec![NodeId(3), NodeId(1)], &EvenShards::single());
/// assert_eq!(v.leader, NodeId(3));
/// assert_eq!(v.rank_of(NodeId(1)), Some(1));
/// assert!(v.inadequate.is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// The view number: 0 for the initial view, one more per installed change set.
    pub id: u64,
    /// The members, in rank order (survivors keep their order, joiners are appended).
    pub members: Vec<NodeId>,
    /// The leader at installation: the lowest-ranked member.
    pub leader: NodeId,
    /// The shards, as the layout assigned them (empty when the view is inadequate).
    pub shards: Vec<Shard>,
    /// Why the layout could not assign shards, if it could not: the view is a membership fact
    /// but the group waits, wedged, for more members.
    pub inadequate: Option<Inadequate>,
}

impl View {
    /// A view of `members` (rank order, non-empty) with shards from `layout`.
    pub fn new(id: u64, members: Vec<NodeId>, layout: &dyn ShardLayout) -> View {
        let (shards, inadequate) = match layout.assign(&members) {
            Ok(s) => (s, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        View {
            id,
            leader: members.first().copied().unwrap_or(NodeId(0)),
            members,
            shards,
            inadequate,
        }
    }

    /// The rank of `node` in this view (its index in `members`).
    pub fn rank_of(&self, node: NodeId) -> Option<usize> {
        self.members.iter().position(|&m| m == node)
    }

    /// Whether `node` is a member.
    pub fn contains(&self, node: NodeId) -> bool {
        self.members.contains(&node)
    }

    /// The smallest number of members that is a majority of this view.
    ///
    /// ```
    /// # use squall_membership::view::{EvenShards, View};
    /// # use squall_transport::NodeId;
    /// let v = View::new(0, (0..4).map(NodeId).collect(), &EvenShards::single());
    /// assert_eq!(v.majority(), 3);
    /// ```
    pub fn majority(&self) -> usize {
        self.members.len() / 2 + 1
    }
}

/// The members of one shard, in their order within the shard (the round-robin sender order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// The members.
    pub members: Vec<NodeId>,
}

/// Why a layout cannot map a view: which shard lacks how many members.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error(
    "shard {shard} would have {have} members but needs at least {need}; the group waits, wedged, until enough members join"
)]
pub struct Inadequate {
    /// The first shard that is short.
    pub shard: usize,
    /// The members it would have.
    pub have: usize,
    /// The minimum it needs.
    pub need: usize,
}

/// Maps a view's members (rank order) to shards. Deterministic: every member computes the same
/// mapping from the same view.
pub trait ShardLayout {
    /// The shards for `members`, or which shard would be too small.
    fn assign(&self, members: &[NodeId]) -> Result<Vec<Shard>, Inadequate>;
}

/// The default layout: `shards` shards, members dealt out by rank (rank `i` to shard
/// `i mod shards`) until every shard holds `max`; members beyond `shards · max` stay unassigned.
/// A shard with fewer than `min` members makes the view inadequate.
///
/// ```
/// use squall_membership::view::{EvenShards, ShardLayout};
/// use squall_transport::NodeId;
/// let layout = EvenShards { shards: 2, min: 2, max: 3 };
/// let members: Vec<NodeId> = (0..5).map(NodeId).collect();
/// let s = layout.assign(&members).unwrap();
/// assert_eq!(s[0].members, vec![NodeId(0), NodeId(2), NodeId(4)]);
/// assert_eq!(s[1].members, vec![NodeId(1), NodeId(3)]);
/// let e = layout.assign(&members[..3]).unwrap_err();
/// assert_eq!((e.shard, e.have, e.need), (1, 1, 2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvenShards {
    /// Number of shards (at least 1).
    pub shards: usize,
    /// Minimum members per shard (at least 1).
    pub min: usize,
    /// Maximum members per shard (at least `min`).
    pub max: usize,
}

impl EvenShards {
    /// One shard holding every member (at least one).
    pub fn single() -> EvenShards {
        EvenShards {
            shards: 1,
            min: 1,
            max: usize::MAX,
        }
    }

    /// Checks the settings.
    ///
    /// ```
    /// use squall_membership::view::EvenShards;
    /// assert!(EvenShards { shards: 0, min: 1, max: 1 }.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.shards == 0 {
            return Err("EvenShards.shards must be at least 1");
        }
        if self.min == 0 {
            return Err("EvenShards.min must be at least 1");
        }
        if self.max < self.min {
            return Err("EvenShards.max must be at least EvenShards.min");
        }
        Ok(())
    }
}

impl ShardLayout for EvenShards {
    fn assign(&self, members: &[NodeId]) -> Result<Vec<Shard>, Inadequate> {
        let k = self.shards.max(1);
        let mut shards = vec![
            Shard {
                members: Vec::new()
            };
            k
        ];
        let cap = self.max.saturating_mul(k);
        for (i, &m) in members.iter().enumerate().take(cap) {
            shards[i % k].members.push(m);
        }
        for (i, s) in shards.iter().enumerate() {
            if s.members.len() < self.min {
                return Err(Inadequate {
                    shard: i,
                    have: s.members.len(),
                    need: self.min,
                });
            }
        }
        Ok(shards)
    }
}
