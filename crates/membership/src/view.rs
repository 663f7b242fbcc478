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
    /// The shards, as the layout assigned them (when the view is inadequate, the tentative
    /// assignment the next view's layout starts from; no shard runs in an inadequate view).
    pub shards: Vec<Shard>,
    /// Why the layout could not assign shards, if it could not: the view is a membership fact
    /// but the group waits, wedged, for more members.
    pub inadequate: Option<Inadequate>,
}

impl View {
    /// A first view of `members` (rank order, non-empty) with shards from `layout` (no
    /// previous layout to keep).
    pub fn new(id: u64, members: Vec<NodeId>, layout: &dyn ShardLayout) -> View {
        View::next(id, members, None, layout)
    }

    /// View `id` of `members` following a view whose shards were `prev`: the layout keeps
    /// every survivor in its shard (see [`ShardLayout`]).
    ///
    /// ```
    /// use squall_membership::view::{EvenShards, View};
    /// use squall_transport::NodeId;
    /// let layout = EvenShards { shards: 2, min: 1, max: 2 };
    /// let v0 = View::new(0, (0..4).map(NodeId).collect(), &layout);
    /// assert_eq!(v0.shards[1].members, vec![NodeId(1), NodeId(3)]);
    /// // n1 fails: n3 stays alone in shard 1 rather than every shard being dealt again.
    /// let v1 = View::next(1, vec![NodeId(0), NodeId(2), NodeId(3)], Some(&v0.shards), &layout);
    /// assert_eq!(v1.shards[0].members, v0.shards[0].members);
    /// assert_eq!(v1.shards[1].members, vec![NodeId(3)]);
    /// ```
    pub fn next(
        id: u64,
        members: Vec<NodeId>,
        prev: Option<&[Shard]>,
        layout: &dyn ShardLayout,
    ) -> View {
        let a = layout.assign(prev, &members);
        View {
            id,
            leader: members.first().copied().unwrap_or(NodeId(0)),
            members,
            shards: a.shards,
            inadequate: a.inadequate,
        }
    }

    /// View `id` as a member published it in the membership table: `shard_of[i]` is
    /// `(s + 1) << 32 | j` when `members[i]` is member `j` of shard `s`, 0 for a spare (members
    /// of a shard are put in order of `j`; shard numbers past the member count make a spare).
    /// The layout only says whether it is inadequate (`layout` applied to its own shards).
    pub fn published(
        id: u64,
        members: Vec<NodeId>,
        shard_of: &[u64],
        layout: &dyn ShardLayout,
    ) -> View {
        let shard = |w: u64| usize::try_from(w >> 32).unwrap_or(usize::MAX);
        let k = shard_of
            .iter()
            .map(|&w| shard(w))
            .filter(|&s| s <= members.len())
            .max()
            .unwrap_or(0);
        let mut placed: Vec<Vec<(u64, NodeId)>> = vec![Vec::new(); k];
        for (&m, &w) in members.iter().zip(shard_of) {
            if let Some(sh) = shard(w).checked_sub(1).and_then(|s| placed.get_mut(s)) {
                sh.push((w & 0xffff_ffff, m));
            }
        }
        let shards: Vec<Shard> = placed
            .into_iter()
            .map(|mut p| {
                p.sort_unstable();
                Shard {
                    members: p.into_iter().map(|(_, m)| m).collect(),
                }
            })
            .collect();
        let mut v = View::next(id, members, Some(&shards), layout);
        v.shards = shards;
        v
    }

    /// The shard `node` belongs to in this view, if any (none: a spare, or not a member).
    pub fn shard_of(&self, node: NodeId) -> Option<usize> {
        self.shards.iter().position(|s| s.members.contains(&node))
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shard {
    /// The members.
    pub members: Vec<NodeId>,
}

/// Why a layout cannot map a view: which shard lacks how many members, or lost all of them.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{}", self.describe())]
pub struct Inadequate {
    /// The first shard that is short.
    pub shard: usize,
    /// The members it would have.
    pub have: usize,
    /// The minimum it needs.
    pub need: usize,
    /// Every member the shard had in the previous view is gone: no survivor holds its state,
    /// so it cannot be rebuilt by state transfer. Permanent: the group stops.
    pub lost: bool,
}

impl Inadequate {
    fn describe(&self) -> String {
        if self.lost {
            format!(
                "shard {} lost every member it had in the previous view: no survivor holds its state, so it cannot be rebuilt by state transfer; the group stops (restart it from durable logs or from scratch)",
                self.shard
            )
        } else {
            format!(
                "shard {} would have {} members but needs at least {}; the group waits, wedged, until enough members join",
                self.shard, self.have, self.need
            )
        }
    }
}

/// What a layout made of a view: the shards (kept even when the view is inadequate, as the
/// tentative assignment the next view starts from) and why the view is inadequate, if it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignment {
    /// One entry per shard; members in no shard are spares.
    pub shards: Vec<Shard>,
    /// Set when some shard lacks its minimum (or lost every member).
    pub inadequate: Option<Inadequate>,
}

/// Maps a view's members (rank order) to shards, given the previous view's shards (`None` for
/// a first view). Deterministic: every member computes the same mapping from the same inputs,
/// and a joiner gets the result through the membership table, so implementations may depend
/// on nothing else. A layout should keep survivors in their shard: the group moves state only
/// into members new to a shard, and a member must never change shards while it stays in the
/// group (the group relies on it: a member that holds shard `s`'s state holds no other).
pub trait ShardLayout {
    /// The shards for `members`, following `prev`.
    fn assign(&self, prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment;
}

/// The default layout, Derecho's default allocator made stable: `shards` shards of `min` to
/// `max` members. Survivors keep their shard (in their order there); then every shard below
/// `min` is filled up to `min`, shard by shard, from the members in no shard (lowest rank
/// first: spares before joiners); then the rest go one at a time to the smallest shard (lowest
/// index on ties) until every shard holds `max`; members beyond that are spares. A shard with
/// fewer than `min` members makes the view inadequate; a shard all of whose previous members
/// are gone is *lost* (it is left empty).
///
/// ```
/// use squall_membership::view::{EvenShards, ShardLayout};
/// use squall_transport::NodeId;
/// let layout = EvenShards { shards: 2, min: 2, max: 3 };
/// let members: Vec<NodeId> = (0..5).map(NodeId).collect();
/// let a = layout.assign(None, &members);
/// assert_eq!(a.shards[0].members, vec![NodeId(0), NodeId(1), NodeId(4)]);
/// assert_eq!(a.shards[1].members, vec![NodeId(2), NodeId(3)]);
/// let e = layout.assign(None, &members[..3]).inadequate.unwrap();
/// assert_eq!((e.shard, e.have, e.need), (1, 1, 2));
/// // n2 fails: shard 1 keeps n3 and takes no one (n4 stays in shard 0): inadequate.
/// let next = [NodeId(0), NodeId(1), NodeId(3), NodeId(4)];
/// let b = layout.assign(Some(&a.shards), &next);
/// assert_eq!(b.shards[0].members, vec![NodeId(0), NodeId(1), NodeId(4)]);
/// assert_eq!(b.inadequate.unwrap().shard, 1);
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
    fn assign(&self, prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment {
        let k = self.shards.max(1);
        let mut shards = vec![Shard::default(); k];
        let mut lost = None;
        for (i, s) in shards.iter_mut().enumerate() {
            let Some(old) = prev.and_then(|p| p.get(i)) else {
                continue;
            };
            s.members = old
                .members
                .iter()
                .copied()
                .filter(|m| members.contains(m))
                .take(self.max)
                .collect();
            if s.members.is_empty() && !old.members.is_empty() && lost.is_none() {
                lost = Some(i);
            }
        }
        let placed = |shards: &[Shard], m: NodeId| shards.iter().any(|s| s.members.contains(&m));
        let mut pool: std::collections::VecDeque<NodeId> = members
            .iter()
            .copied()
            .filter(|&m| !placed(&shards, m))
            .collect();
        for (i, s) in shards.iter_mut().enumerate() {
            while Some(i) != lost && s.members.len() < self.min {
                let Some(m) = pool.pop_front() else { break };
                s.members.push(m);
            }
        }
        while !pool.is_empty() {
            let Some(s) = shards
                .iter_mut()
                .enumerate()
                .filter(|(i, s)| Some(*i) != lost && s.members.len() < self.max)
                .min_by_key(|(i, s)| (s.members.len(), *i))
                .map(|(_, s)| s)
            else {
                break;
            };
            if let Some(m) = pool.pop_front() {
                s.members.push(m);
            }
        }
        let inadequate = match lost {
            Some(shard) => Some(Inadequate {
                shard,
                have: 0,
                need: self.min,
                lost: true,
            }),
            None => shards
                .iter()
                .enumerate()
                .find(|(_, s)| s.members.len() < self.min)
                .map(|(shard, s)| Inadequate {
                    shard,
                    have: s.members.len(),
                    need: self.min,
                    lost: false,
                }),
        };
        Assignment { shards, inadequate }
    }
}
