//! Views and the pluggable mapping of a view's members to subgroups and shards.
//!
//! A layout ([`ShardLayout`]) has a fixed *shape*: subgroups (Derecho: one per replicated type),
//! each split into shards with a minimum and a maximum size ([`ShardBounds`]). A shard is named
//! by its [`ShardId`] (subgroup, shard index); a view keeps its shards in one flat list, subgroup
//! by subgroup. Subgroups are **disjoint**: a member is in at most one shard of all subgroups
//! (see [`ShardLayout`] for why).

use std::sync::Arc;

use squall_transport::NodeId;
use thiserror::Error;

/// The name of a shard: its subgroup and its index in that subgroup.
///
/// ```
/// use squall_membership::view::ShardId;
/// assert_eq!(ShardId { subgroup: 1, shard: 0 }.to_string(), "subgroup 1 shard 0");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId {
    /// The subgroup.
    pub subgroup: usize,
    /// The shard's index in its subgroup.
    pub shard: usize,
}

impl std::fmt::Display for ShardId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "subgroup {} shard {}", self.subgroup, self.shard)
    }
}

/// How many members a shard may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardBounds {
    /// Fewer members make the view inadequate (at least 1).
    pub min: usize,
    /// The most a layout may put in the shard (at least `min`); the epoch regions are sized for
    /// the largest `max` of any shard of any subgroup (capped at `max_members`).
    pub max: usize,
}

/// The shards of a shape in flat order (subgroup by subgroup) with their names.
fn flat_ids(shape: &[Vec<ShardBounds>]) -> Vec<(ShardId, ShardBounds)> {
    shape
        .iter()
        .enumerate()
        .flat_map(|(subgroup, sg)| {
            sg.iter()
                .enumerate()
                .map(move |(shard, &b)| (ShardId { subgroup, shard }, b))
        })
        .collect()
}

/// The most subgroups, and shards per subgroup, a shape may have (the published view block
/// gives a shard index 32 bits and a subgroup 24).
pub const MAX_SHARDS: usize = 1 << 16;

/// A layout setting that cannot work, with what to change.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum LayoutError {
    /// No subgroup, or a subgroup without shards, or too many of either.
    #[error(
        "the layout must have between 1 and {MAX_SHARDS} subgroups, each with between 1 and {MAX_SHARDS} shards"
    )]
    Shape,
    /// A shard's bounds.
    #[error("{shard}: min is {min} and max is {max}; it needs 1 <= min <= max")]
    Bounds {
        /// Which shard.
        shard: ShardId,
        /// Configured minimum.
        min: usize,
        /// Configured maximum.
        max: usize,
    },
    /// A reserved node id is not in the universe.
    #[error("{shard}: reserved node {node} is not in the universe")]
    ReservedOutside {
        /// Which shard.
        shard: ShardId,
        /// The node.
        node: NodeId,
    },
    /// A node is reserved for two shards (subgroups are disjoint here).
    #[error("node {node} is reserved for two shards; a member is in at most one shard")]
    ReservedTwice {
        /// The node.
        node: NodeId,
    },
    /// The layout assigned a view a different number of shards than its shape has (found at
    /// start-up by [`check_shard_count`]).
    #[error(
        "the layout assigned {assigned} shards to a view of {members} members but its shape has {shape}: the number of shards is fixed for the group's lifetime (epoch regions, the view block and the logs are laid out for the shape); declare in shape() every shard the group will ever have, each with its bounds"
    )]
    ShardCount {
        /// The view's size.
        members: usize,
        /// The shards the layout assigned.
        assigned: usize,
        /// The shards of its shape.
        shape: usize,
    },
    /// The layout's [`shape`](ShardLayout::shape) differs from one call to the next.
    #[error(
        "the layout's shape() changed from one call to the next: its subgroups and shards, with their bounds, are fixed for the group's lifetime"
    )]
    ShapeChanged,
    /// The layout's [`subgroups_of`](ShardLayout::subgroups_of) lists no subgroup for a node
    /// (`Some(vec![])`): it could be placed in no shard, and its epoch regions would be sized
    /// for no epoch. Return `None` for a node that may go anywhere.
    #[error(
        "the layout's subgroups_of lists no subgroup for node {node}: list the subgroups it may be placed in, or return None for any"
    )]
    NoSubgroups {
        /// The node.
        node: NodeId,
    },
    /// The layout's [`subgroups_of`](ShardLayout::subgroups_of) names a subgroup its shape does
    /// not have.
    #[error(
        "the layout's subgroups_of lists subgroup {subgroup} for node {node}, but its shape has {subgroups} subgroup(s)"
    )]
    SubgroupOutside {
        /// The node.
        node: NodeId,
        /// The subgroup listed.
        subgroup: usize,
        /// The shape's number of subgroups.
        subgroups: usize,
    },
}

/// How many view sizes [`check_shard_count`] tries one by one from 1 (beyond, it tries the
/// powers of two and the largest).
const PROBE_SIZES: usize = 32;

/// Checks at start-up that `layout` keeps the number of shards of its shape, whatever the
/// membership: a layout whose shard count changes with the view (Derecho lets a
/// `shard_view_generator_t` return any number of shards per view) is refused here with
/// [`LayoutError::ShardCount`], rather than found in some later view (where
/// [`View::next`] makes such a view inadequate with [`LayoutFault::ShardCount`]: the group
/// waits). Tries the first nodes of `universe` as a first view for every size from 1 to 32,
/// every power of two and `max_members`, and the same sizes as a view following `initial`'s
/// (its survivors first, then other nodes). Also checks that `shape()` gives the same answer
/// twice ([`LayoutError::ShapeChanged`]).
///
/// ```
/// use squall_membership::view::{check_shard_count, Assignment, EvenShards, LayoutError, Shard, ShardBounds, ShardLayout};
/// use squall_transport::NodeId;
/// let universe: Vec<NodeId> = (0..8).map(NodeId).collect();
/// let even = EvenShards { shards: 2, min: 1, max: 4 };
/// assert_eq!(check_shard_count(&even, &universe, &universe[..4], 8), Ok(()));
///
/// // One shard per four members, as a Derecho generator might do: refused.
/// struct Grows;
/// impl ShardLayout for Grows {
///     fn shape(&self) -> Vec<Vec<ShardBounds>> {
///         vec![vec![ShardBounds { min: 1, max: 4 }]]
///     }
///     fn assign(&self, _: Option<&[Shard]>, members: &[NodeId]) -> Assignment {
///         let shards = members.chunks(4).map(|c| Shard { members: c.to_vec(), ..Shard::default() });
///         Assignment { shards: shards.collect(), inadequate: None }
///     }
/// }
/// let e = check_shard_count(&Grows, &universe, &universe[..4], 8).unwrap_err();
/// assert_eq!(e, LayoutError::ShardCount { members: 5, assigned: 2, shape: 1 });
/// assert!(e.to_string().contains("the number of shards is fixed"));
/// ```
pub fn check_shard_count(
    layout: &dyn ShardLayout,
    universe: &[NodeId],
    initial: &[NodeId],
    max_members: usize,
) -> Result<(), LayoutError> {
    let shape = layout.shape();
    if layout.shape() != shape {
        return Err(LayoutError::ShapeChanged);
    }
    let want: usize = shape.iter().map(Vec::len).sum();
    let most = max_members.min(universe.len());
    let mut sizes: Vec<usize> = (1..=most.min(PROBE_SIZES))
        .chain(
            (0..usize::BITS)
                .map(|i| 1usize << i)
                .take_while(|&k| k <= most),
        )
        .chain([most])
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let v0 = View::new(0, initial.to_vec(), layout);
    let after: Vec<NodeId> = initial
        .iter()
        .chain(universe.iter().filter(|m| !initial.contains(m)))
        .copied()
        .collect();
    for k in sizes {
        let (Some(fresh), Some(next)) = (universe.get(..k), after.get(..k)) else {
            continue;
        };
        for (prev, members) in [(None, fresh), (Some(&v0.shards[..]), next)] {
            let assigned = layout.assign(prev, members).shards.len();
            if assigned != want {
                return Err(LayoutError::ShardCount {
                    members: k,
                    assigned,
                    shape: want,
                });
            }
        }
    }
    Ok(())
}

/// Checks a shape: 1 to [`MAX_SHARDS`] subgroups of 1 to [`MAX_SHARDS`] shards, each with
/// `1 <= min <= max`.
pub fn check_shape(shape: &[Vec<ShardBounds>]) -> Result<(), LayoutError> {
    if shape.is_empty()
        || shape.len() > MAX_SHARDS
        || shape.iter().any(|s| s.is_empty() || s.len() > MAX_SHARDS)
    {
        return Err(LayoutError::Shape);
    }
    for (shard, b) in flat_ids(shape) {
        if b.min == 0 || b.max < b.min {
            return Err(LayoutError::Bounds {
                shard,
                min: b.min,
                max: b.max,
            });
        }
    }
    Ok(())
}

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
    /// Every shard of every subgroup, subgroup by subgroup (each names itself in
    /// [`Shard::id`]), as the layout assigned them. When the view is inadequate no shard runs,
    /// and each shard lists only the members that hold its state: its members of the previous
    /// view that survive (with no previous view, view 0's members, which hold the initial
    /// state). A member the layout would place anew is in no shard until a view is adequate.
    /// So in every view a shard's members are members that were in it in an installed
    /// adequate view (or its first one): the next view counts exactly them as the shard's
    /// survivors, and a shard all of whose members are gone is *lost*.
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
    /// every survivor in its shard (see [`ShardLayout`]). The assignment is checked here,
    /// whatever the layout: the shape's number of shards, each within its maximum, only members
    /// of the view, no member in two shards, every survivor in its previous shard (else the view
    /// is inadequate with a [`LayoutFault`] and keeps `prev`'s survivors as its shards); then a
    /// shard whose previous members are all gone is *lost*; then a shard below its minimum
    /// makes the view inadequate; then the layout's own verdict. An inadequate view following
    /// `prev` keeps in each shard only `prev`'s survivors (see [`shards`](View::shards)).
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
        View::next_holding(id, members, prev, None, layout)
    }

    /// [`View::next`] where only `holders` held their shard's state when the previous view
    /// ended (`None`: every member of a previous shard did, as in [`View::next`]). A shard is
    /// *lost* when none of its previous members that survive is a holder: a joiner or promoted
    /// spare whose state transfer had not completed is a survivor of its shard but cannot
    /// serve the state to anyone. A lost shard is left empty (so it stays lost), and its
    /// verdict's `have` counts the survivors that held nothing. The membership core passes the
    /// holders its committed decision carries, so every member decides alike.
    ///
    /// ```
    /// use squall_membership::view::{EvenShards, View};
    /// use squall_transport::NodeId;
    /// let layout = EvenShards { shards: 2, min: 1, max: 3 };
    /// let v0 = View::new(0, (0..4).map(NodeId).collect(), &layout);
    /// // n4 joins shard 0 (n0, n2 hold its state); n4's transfer is still under way when both
    /// // holders fail: shard 0 is lost although n4 survives in it.
    /// let v1 = View::next(1, (0..5).map(NodeId).collect(), Some(&v0.shards), &layout);
    /// assert_eq!(v1.shards[0].members, vec![NodeId(0), NodeId(2), NodeId(4)]);
    /// let holders = [NodeId(0), NodeId(1), NodeId(2), NodeId(3)];
    /// let members = vec![NodeId(1), NodeId(3), NodeId(4)];
    /// let v2 = View::next_holding(2, members, Some(&v1.shards), Some(&holders), &layout);
    /// let why = v2.inadequate.unwrap();
    /// assert!(why.lost && why.shard == 0 && why.have == 1);
    /// assert!(v2.shards[0].members.is_empty());
    /// ```
    pub fn next_holding(
        id: u64,
        members: Vec<NodeId>,
        prev: Option<&[Shard]>,
        holders: Option<&[NodeId]>,
        layout: &dyn ShardLayout,
    ) -> View {
        let holds = |m: &NodeId| holders.is_none_or(|h| h.contains(m));
        let ids = flat_ids(&layout.shape());
        let a = layout.assign(prev, &members);
        let eligible = |m: NodeId, subgroup: usize| {
            layout
                .subgroups_of(m)
                .is_none_or(|sgs| sgs.contains(&subgroup))
        };
        let (shards, inadequate) = match check_assignment(
            &ids, prev, &members, &a.shards, &eligible,
        ) {
            Err(why) => {
                tracing::error!(%why, "layout: the assignment breaks a rule; the view is inadequate");
                // Tentative shards: the previous shards' survivors, which no rule forbids.
                let shards = ids
                    .iter()
                    .enumerate()
                    .map(|(i, &(id, _))| Shard {
                        id,
                        members: prev
                            .and_then(|p| p.get(i))
                            .map(|s| {
                                s.members
                                    .iter()
                                    .copied()
                                    .filter(|m| members.contains(m))
                                    .collect()
                            })
                            .unwrap_or_default(),
                    })
                    .collect();
                (shards, Some(why))
            }
            Ok(()) => {
                let shards: Vec<Shard> = ids
                    .iter()
                    .zip(a.shards)
                    .map(|(&(id, _), s)| Shard {
                        id,
                        members: s.members,
                    })
                    .collect();
                // No survivor: an empty previous shard was lost before (every shard of view 0
                // has a member, and a shard's members leave it only by leaving the view), so a
                // lost shard stays lost.
                // Only members that held the shard's state count as its survivors.
                let lost_at = |i: usize| {
                    let old = prev.and_then(|p| p.get(i))?;
                    let kept = old.members.iter().filter(|m| members.contains(m));
                    let (held, bare) =
                        kept.fold(
                            (0, 0),
                            |(h, b), m| {
                                if holds(m) { (h + 1, b) } else { (h, b + 1) }
                            },
                        );
                    (held == 0).then_some(bare)
                };
                let lost = ids.iter().enumerate().find_map(|(i, &(id, b))| {
                    lost_at(i).map(|bare| Inadequate::short(id, bare, b.min, true))
                });
                let short = || {
                    ids.iter().zip(&shards).find_map(|(&(id, b), s)| {
                        (s.members.len() < b.min)
                            .then(|| Inadequate::short(id, s.members.len(), b.min, false))
                    })
                };
                let why = lost.or_else(short).or(a.inadequate);
                match (&why, prev) {
                    // Inadequate: no shard runs, so nobody placed in a shard now would receive
                    // its state; keep only the members that hold it (see `View::shards`), and
                    // none in a lost shard (its survivors hold nothing).
                    (Some(_), Some(p)) => {
                        let mut shards = holders_only(shards, p);
                        for (i, s) in shards.iter_mut().enumerate() {
                            if lost_at(i).is_some() {
                                s.members.clear();
                            }
                        }
                        (shards, why)
                    }
                    _ => (shards, why),
                }
            }
        };
        View {
            id,
            leader: members.first().copied().unwrap_or(NodeId(0)),
            members,
            shards,
            inadequate,
        }
    }

    /// The payload of this view's block in the membership table:
    /// `[id + 1, n, members…, per member: (flat shard + 1) << 32 | index in it, or 0 for a
    /// spare…, inadequacy (2 words, 0 0 when adequate)]` (`4 + 2n` words). Read back by
    /// [`decode`](View::decode); a joiner needs it because it never saw the previous view's
    /// shards, nor can it tell a lost shard from a short one.
    ///
    /// ```
    /// use squall_membership::view::{EvenShards, ShardLayout, View};
    /// use squall_transport::NodeId;
    /// let layout = EvenShards { shards: 2, min: 2, max: 2 };
    /// let v = View::new(4, (0..5).map(NodeId).collect(), &layout);
    /// let words = v.encode();
    /// assert_eq!(words.len(), 4 + 2 * 5);
    /// assert_eq!(View::decode(&words, &layout.shape(), None), Ok(v));
    /// assert!(View::decode(&words[..5], &layout.shape(), None).is_err());
    /// ```
    pub fn encode(&self) -> Vec<u64> {
        let n = self.members.len();
        let mut p = Vec::with_capacity(4 + 2 * n);
        p.extend([self.id + 1, n as u64]);
        p.extend(self.members.iter().map(|m| u64::from(m.0)));
        p.extend(self.members.iter().map(|&m| match self.shard_of(m) {
            Some(s) => {
                let at = self.shards[s].members.iter().position(|&x| x == m);
                ((s as u64 + 1) << 32) | at.unwrap_or(0) as u64
            }
            None => 0,
        }));
        p.extend(Inadequate::encode(self.inadequate.as_ref()));
        p
    }

    /// Reads a view block's payload (see [`encode`](View::encode)) for a layout of `shape`,
    /// checking everything: the length, node ids (in `universe`, when given, and distinct),
    /// shard numbers within the shape, each shard's indices exactly `0..k` with `k` within its
    /// maximum, and the inadequacy words. Trailing words past the inadequacy are ignored (the
    /// table's block is sized for the universe).
    pub fn decode(
        words: &[u64],
        shape: &[Vec<ShardBounds>],
        universe: Option<&[NodeId]>,
    ) -> Result<View, ViewBlockError> {
        let ids = flat_ids(shape);
        let (&tag, rest) = words.split_first().ok_or(ViewBlockError::Truncated)?;
        let id = tag.checked_sub(1).ok_or(ViewBlockError::Unset)?;
        if id > MAX_VIEW_ID {
            return Err(ViewBlockError::Id(id));
        }
        let (&n, rest) = rest.split_first().ok_or(ViewBlockError::Truncated)?;
        let n = usize::try_from(n).map_err(|_| ViewBlockError::Truncated)?;
        if n == 0 {
            return Err(ViewBlockError::Empty);
        }
        let need = n.checked_mul(2).and_then(|x| x.checked_add(2));
        if need.is_none_or(|need| rest.len() < need) {
            return Err(ViewBlockError::Truncated);
        }
        let (ids_w, rest) = rest.split_at(n);
        let (shard_w, rest) = rest.split_at(n);
        let mut members = Vec::with_capacity(n);
        for &w in ids_w {
            let node = NodeId(u32::try_from(w).map_err(|_| ViewBlockError::Node(w))?);
            if universe.is_some_and(|u| !u.contains(&node)) || members.contains(&node) {
                return Err(ViewBlockError::Node(w));
            }
            members.push(node);
        }
        let mut placed: Vec<Vec<(u64, NodeId)>> = vec![Vec::new(); ids.len()];
        for (&m, &w) in members.iter().zip(shard_w) {
            if w == 0 {
                continue;
            }
            let s = (w >> 32)
                .checked_sub(1)
                .and_then(|s| usize::try_from(s).ok());
            s.and_then(|s| placed.get_mut(s))
                .ok_or(ViewBlockError::Shard(w))?
                .push((w & 0xffff_ffff, m));
        }
        let mut shards = Vec::with_capacity(ids.len());
        for (mut p, &(id, b)) in placed.into_iter().zip(&ids) {
            p.sort_unstable();
            if p.len() > b.max || p.iter().enumerate().any(|(i, &(at, _))| at != i as u64) {
                return Err(ViewBlockError::Indices(id));
            }
            shards.push(Shard {
                id,
                members: p.into_iter().map(|(_, m)| m).collect(),
            });
        }
        let inadequate = Inadequate::decode([rest[0], rest[1]], &ids)?;
        Ok(View {
            id,
            leader: members[0],
            members,
            shards,
            inadequate,
        })
    }

    /// The shard `node` belongs to in this view, as an index into [`shards`](View::shards), if
    /// any (none: a spare, or not a member).
    pub fn shard_of(&self, node: NodeId) -> Option<usize> {
        self.shards.iter().position(|s| s.members.contains(&node))
    }

    /// The shard `node` belongs to in this view, by name (none: a spare, or not a member).
    ///
    /// ```
    /// use squall_membership::view::{ShardId, Subgroups, SubgroupPolicy, View};
    /// use squall_transport::NodeId;
    /// let layout = Subgroups::new(vec![
    ///     SubgroupPolicy::fixed_even_shards(1, 1),
    ///     SubgroupPolicy::fixed_even_shards(2, 1),
    /// ]);
    /// let v = View::new(0, (0..3).map(NodeId).collect(), &layout);
    /// assert_eq!(v.shard_id_of(NodeId(2)), Some(ShardId { subgroup: 1, shard: 1 }));
    /// assert_eq!(v.shard(ShardId { subgroup: 1, shard: 0 }).unwrap().members, vec![NodeId(1)]);
    /// ```
    pub fn shard_id_of(&self, node: NodeId) -> Option<ShardId> {
        self.shard_of(node).map(|s| self.shards[s].id)
    }

    /// The shard named `id`, if the layout has it.
    pub fn shard(&self, id: ShardId) -> Option<&Shard> {
        self.shards.iter().find(|s| s.id == id)
    }

    /// The rank of `node` in this view (its index in `members`).
    pub fn rank_of(&self, node: NodeId) -> Option<usize> {
        self.members.iter().position(|&m| m == node)
    }

    /// Whether `node` is a member.
    pub fn contains(&self, node: NodeId) -> bool {
        self.members.contains(&node)
    }

    /// The smallest number of members that is a majority of this view: the GMS's rule when
    /// [`GmsConfig::hosts`](crate::GmsConfig::hosts) is empty; with hosts it counts whole hosts
    /// instead (`docs/MEMBERSHIP.md`, forty-seventh part).
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

/// The shards of an inadequate view: each keeps only its members that were in it in `prev`
/// (the survivors, which hold its state); the members the layout would have placed anew go to
/// no shard until a view is adequate (they would hold nothing: no shard runs in an inadequate
/// view, so no state transfer reaches them, and they must not count as the shard's survivors
/// in the next view).
fn holders_only(shards: Vec<Shard>, prev: &[Shard]) -> Vec<Shard> {
    shards
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            let old = prev.get(i).map_or(&[][..], |p| &p.members[..]);
            s.members.retain(|m| old.contains(m));
            s
        })
        .collect()
}

/// Checks an assignment against the shape's shard count and maxima, the view's members, each
/// member's `eligible` subgroups ([`ShardLayout::subgroups_of`]), and `prev` (every survivor
/// stays in its shard).
fn check_assignment(
    ids: &[(ShardId, ShardBounds)],
    prev: Option<&[Shard]>,
    members: &[NodeId],
    shards: &[Shard],
    eligible: &dyn Fn(NodeId, usize) -> bool,
) -> Result<(), Inadequate> {
    if shards.len() != ids.len() {
        return Err(Inadequate::fault(
            ShardId::default(),
            shards.len(),
            ids.len(),
            LayoutFault::ShardCount,
        ));
    }
    let mut seen: Vec<NodeId> = Vec::new();
    for (&(id, b), s) in ids.iter().zip(shards) {
        if s.members.len() > b.max {
            return Err(Inadequate::fault(
                id,
                s.members.len(),
                b.max,
                LayoutFault::TooLarge,
            ));
        }
        for &m in &s.members {
            let fault = if !members.contains(&m) {
                Some(LayoutFault::NotAMember)
            } else if seen.contains(&m) {
                Some(LayoutFault::Twice)
            } else if !eligible(m, id.subgroup) {
                Some(LayoutFault::Ineligible)
            } else {
                None
            };
            if let Some(f) = fault {
                return Err(Inadequate::fault(id, s.members.len(), b.max, f));
            }
            seen.push(m);
        }
    }
    // Every survivor of a shard is still in it (not in another shard, not a spare).
    for (j, old) in prev.unwrap_or_default().iter().enumerate() {
        let now = shards.get(j).map_or(&[][..], |s| &s.members[..]);
        if old
            .members
            .iter()
            .any(|m| members.contains(m) && !now.contains(m))
        {
            let at = ids.get(j).map_or(ShardId::default(), |&(id, _)| id);
            return Err(Inadequate::fault(at, 0, 0, LayoutFault::Moved));
        }
    }
    Ok(())
}

/// The highest view id a peer's block may carry ([`View::decode`],
/// [`crate::block`]). Views are numbered from 0, one per view change, so no group reaches it; a
/// larger id is a corrupt or hostile block, refused so that the ids that follow it (`id + 1`,
/// and the `id + 1` a table word stores) never overflow, and the restarting word's
/// "stateless" bit (bit 63) stays clear of every id.
pub const MAX_VIEW_ID: u64 = 1 << 62;

/// A view block that does not decode (see [`View::decode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum ViewBlockError {
    /// Shorter than its member count says.
    #[error("view block: truncated")]
    Truncated,
    /// No view was published.
    #[error("view block: no view")]
    Unset,
    /// A view without members.
    #[error("view block: no members")]
    Empty,
    /// A node id that is not a node of the universe, or repeated.
    #[error("view block: bad or repeated node id {0:#x}")]
    Node(u64),
    /// A shard word naming a shard the layout does not have.
    #[error("view block: shard word {0:#x} names no shard of the layout")]
    Shard(u64),
    /// A shard's member indices are not `0..k`, or `k` exceeds its maximum.
    #[error("view block: {0} has repeated or missing member indices, or too many members")]
    Indices(ShardId),
    /// The inadequacy words are malformed.
    #[error("view block: malformed inadequacy word {0:#x}")]
    Inadequacy(u64),
    /// A view id above [`MAX_VIEW_ID`].
    #[error("view block: view id {0} above the largest a group can reach")]
    Id(u64),
}

/// The members of one shard, in their order within the shard (the round-robin sender order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shard {
    /// Which shard ([`View::next`] names each shard of an assignment, whatever the layout set).
    pub id: ShardId,
    /// The members.
    pub members: Vec<NodeId>,
}

/// A rule of [`ShardLayout`] an assignment broke; the view is inadequate (the group waits) and
/// the error is logged: it is a bug in the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutFault {
    /// The assignment has a different number of shards than the layout's shape.
    ShardCount,
    /// A shard holds more members than its maximum (the regions are sized for it).
    TooLarge,
    /// A shard holds a node that is not a member of the view.
    NotAMember,
    /// A member is in two shards (subgroups are disjoint here).
    Twice,
    /// A member of a shard in the previous view is in another shard, or in none: a member
    /// holds only its own shard's state, so it never changes shards while it stays.
    Moved,
    /// A member is in a subgroup that [`ShardLayout::subgroups_of`] does not list for it: its
    /// epoch regions are sized for those subgroups only.
    Ineligible,
}

impl LayoutFault {
    const ALL: [LayoutFault; 6] = [
        LayoutFault::ShardCount,
        LayoutFault::TooLarge,
        LayoutFault::NotAMember,
        LayoutFault::Twice,
        LayoutFault::Moved,
        LayoutFault::Ineligible,
    ];
}

/// Why a layout cannot map a view: which shard lacks how many members, or lost all of them, or
/// which rule the layout's assignment broke.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{}", self.describe())]
pub struct Inadequate {
    /// The subgroup of the first shard that is short.
    pub subgroup: usize,
    /// The first shard that is short (its index in its subgroup).
    pub shard: usize,
    /// The members it would have (for a [`lost`](Inadequate::lost) shard: its surviving
    /// members that held no state, joiners whose transfer had not completed).
    pub have: usize,
    /// The minimum it needs.
    pub need: usize,
    /// Every member the shard had in the previous view is gone: no survivor holds its state,
    /// so it cannot be rebuilt by state transfer. The group stops; a total restart from the
    /// members' logs rebuilds the shard from its members of the previous view, by restarting
    /// that view (the lost one ran nowhere; see [`crate::restart::restart_view`]).
    pub lost: bool,
    /// The layout's assignment broke a rule (then `have` and `need` are the counts at fault,
    /// when there are any).
    pub fault: Option<LayoutFault>,
}

impl Inadequate {
    /// `shard` has `have` members but needs `need` (or lost every member).
    pub fn short(shard: ShardId, have: usize, need: usize, lost: bool) -> Inadequate {
        Inadequate {
            subgroup: shard.subgroup,
            shard: shard.shard,
            have,
            need,
            lost,
            fault: None,
        }
    }

    fn fault(shard: ShardId, have: usize, need: usize, fault: LayoutFault) -> Inadequate {
        Inadequate {
            fault: Some(fault),
            ..Inadequate::short(shard, have, need, false)
        }
    }

    /// The shard at fault.
    pub fn shard_id(&self) -> ShardId {
        ShardId {
            subgroup: self.subgroup,
            shard: self.shard,
        }
    }

    fn describe(&self) -> String {
        let s = self.shard_id();
        match self.fault {
            Some(LayoutFault::ShardCount) => format!(
                "the layout assigned {} shards but its shape has {}; the group waits (a bug in the layout)",
                self.have, self.need
            ),
            Some(LayoutFault::TooLarge) => format!(
                "the layout put {} members in {s}, above its maximum {}; the group waits (a bug in the layout)",
                self.have, self.need
            ),
            Some(LayoutFault::NotAMember) => format!(
                "the layout put a node that is not a member of the view in {s}; the group waits (a bug in the layout)"
            ),
            Some(LayoutFault::Twice) => format!(
                "the layout put a member of {s} into another shard too (subgroups are disjoint); the group waits (a bug in the layout)"
            ),
            Some(LayoutFault::Moved) => format!(
                "the layout moved a survivor of {s} out of it (a member holds only its own shard's state, so it never changes shards); the group waits (a bug in the layout)"
            ),
            Some(LayoutFault::Ineligible) => format!(
                "the layout put a member in {s} whose subgroup its subgroups_of does not list (the member's epoch regions are sized for those subgroups only); the group waits (a bug in the layout, or members configured with different layouts)"
            ),
            None if self.lost && self.have > 0 => format!(
                "{s} lost every member that held its state in the previous view: its {} surviving member(s) had not completed their state transfer, so no survivor holds its state and it cannot be rebuilt by state transfer; the group stops (a total restart of every member from its logs rebuilds it: it restarts the previous view, whose members of this shard hold its state in their logs, and waits until one of them that held it restarts; if none can, start the group afresh)",
                self.have
            ),
            None if self.lost => format!(
                "{s} lost every member it had in the previous view: no survivor holds its state, so it cannot be rebuilt by state transfer; the group stops (a total restart of every member from its logs rebuilds it: it restarts the previous view, whose members of this shard hold its state in their logs, and waits until one of them restarts; if none can, start the group afresh)"
            ),
            None => format!(
                "{s} would have {} members but needs at least {}; the group waits, wedged, until enough members join",
                self.have, self.need
            ),
        }
    }

    /// Two words: `1 | lost << 1 | fault code << 2 | subgroup << 8 | shard << 32`, and
    /// `have | need << 32` (counts saturate at `u32::MAX`); `[0, 0]` for none. Also the body of
    /// a logged verdict ([`Record::Verdict`](crate::log::Record::Verdict)).
    pub(crate) fn encode(why: Option<&Inadequate>) -> [u64; 2] {
        let Some(w) = why else { return [0, 0] };
        let code = w
            .fault
            .and_then(|f| LayoutFault::ALL.iter().position(|&x| x == f))
            .map_or(0, |i| i as u64 + 1);
        let c = |x: usize| u64::from(u32::try_from(x).unwrap_or(u32::MAX));
        [
            1 | u64::from(w.lost) << 1 | code << 2 | c(w.subgroup) << 8 | c(w.shard) << 32,
            c(w.have) | c(w.need) << 32,
        ]
    }

    fn decode(
        words: [u64; 2],
        ids: &[(ShardId, ShardBounds)],
    ) -> Result<Option<Inadequate>, ViewBlockError> {
        let why = Inadequate::decode_words(words)?;
        if why.as_ref().is_some_and(|w| {
            w.fault != Some(LayoutFault::ShardCount)
                && !ids.iter().any(|&(id, _)| id == w.shard_id())
        }) {
            return Err(ViewBlockError::Inadequacy(words[0]));
        }
        Ok(why)
    }

    /// [`encode`](Self::encode)'s words read back without a shape (the shard is not checked
    /// against a layout): what a logged verdict holds. Accepts only words `encode` writes.
    pub(crate) fn decode_words([a, b]: [u64; 2]) -> Result<Option<Inadequate>, ViewBlockError> {
        if a == 0 && b == 0 {
            return Ok(None);
        }
        let bad = ViewBlockError::Inadequacy(a);
        if a & 1 == 0 || a & 0xe0 != 0 {
            return Err(bad);
        }
        let fault = match ((a >> 2) & 7) as usize {
            0 => None,
            i => Some(*LayoutFault::ALL.get(i - 1).ok_or(bad)?),
        };
        let shard = ShardId {
            subgroup: ((a >> 8) & 0xff_ffff) as usize,
            shard: (a >> 32) as usize,
        };
        let lost = a & 2 != 0;
        if lost && fault.is_some() {
            return Err(bad);
        }
        Ok(Some(Inadequate {
            have: (b & 0xffff_ffff) as usize,
            need: (b >> 32) as usize,
            fault,
            ..Inadequate::short(shard, 0, 0, lost)
        }))
    }
}

/// What a layout made of a view: the shards and why the view is inadequate, if it is (then
/// [`View::next`] keeps only the previous shards' survivors in them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignment {
    /// One entry per shard of the shape, subgroup by subgroup; members in no shard are spares.
    pub shards: Vec<Shard>,
    /// Set when the layout's own policy finds the view inadequate ([`View::next`] also checks
    /// every shard's minimum and lost shards itself).
    pub inadequate: Option<Inadequate>,
}

/// Maps a view's members (rank order) to the shards of its subgroups, given the previous view's
/// shards (`None` for a first view). Deterministic: every member computes the same mapping from
/// the same inputs, and a joiner gets the result through the membership table, so
/// implementations may depend on nothing else.
///
/// Rules ([`View::next`] checks them and makes a view that breaks one inadequate, with a
/// [`LayoutFault`]): one shard per entry of [`shape`](ShardLayout::shape), each within its
/// maximum, only members of the view, **no member in two shards** (subgroups are disjoint), and
/// **every survivor in its previous shard** (the group moves state only into members new to a
/// shard; a member that holds shard `s`'s state holds no other).
///
/// Why disjoint (Derecho lets subgroups overlap, e.g. a cache and a store on the same nodes):
/// a member here runs exactly one round-robin epoch per view, on one pair of epoch regions,
/// wedges one epoch for the trim and holds one state for transfer. Overlap would need several
/// epochs per member per view (one per shard it is in, each on its own region set, the regions
/// sized per subgroup), `Epoch::wedge` reporting counts per shard, the trim per (shard, sender)
/// rather than per sender, and state transfer per shard.
pub trait ShardLayout {
    /// The subgroups, each the size bounds of its shards. The same for the layout's lifetime:
    /// start-up validation sizes the epoch regions for the largest maximum, [`Layout`] pins
    /// the shape, and [`assign`](ShardLayout::assign) must return exactly its number of
    /// shards for any view (a layout whose count changes is refused at start-up, see
    /// [`check_shard_count`]).
    fn shape(&self) -> Vec<Vec<ShardBounds>>;

    /// Checks the layout's own settings against the universe (beyond the shape, which the
    /// configuration checks with [`check_shape`]).
    fn validate(&self, universe: &[NodeId]) -> Result<(), LayoutError> {
        let _ = universe;
        Ok(())
    }

    /// The shards for `members`, following `prev`.
    fn assign(&self, prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment;

    /// The subgroups `node` may ever be placed in, ascending; `None` (the default): any. A
    /// group sizes a node's epoch regions for these subgroups' epoch settings only
    /// ([`Group::layout_of`](crate::group::Group::layout_of)), so with per-subgroup settings
    /// ([`GroupConfig::profiles`](crate::group::GroupConfig::profiles)) a node pinned to a
    /// small subgroup registers what that subgroup needs, not the largest one's. It must
    /// follow from the layout's own settings (every member computes it alike), and
    /// [`assign`](ShardLayout::assign) must never put `node` elsewhere: [`View::next`] makes a
    /// view that does inadequate ([`LayoutFault::Ineligible`]). `Some` must list at least one
    /// subgroup, each of the shape: start-up refuses an empty list
    /// ([`LayoutError::NoSubgroups`]) and one outside the shape
    /// ([`LayoutError::SubgroupOutside`]).
    ///
    /// [`Subgroups`] answers with a reserved node's subgroup:
    ///
    /// ```
    /// use squall_membership::view::{Layout, ShardLayout, ShardPolicy, SubgroupPolicy, Subgroups};
    /// use squall_transport::NodeId;
    /// let control = ShardPolicy { min: 1, max: 2, reserved: vec![NodeId(3)] };
    /// let layout = Layout::new(Subgroups::new(vec![
    ///     SubgroupPolicy::even_shards(2, 1, 3),
    ///     SubgroupPolicy { shards: vec![control] },
    /// ]));
    /// assert_eq!(layout.subgroups_of(NodeId(3)), Some(vec![1])); // reserved for subgroup 1
    /// assert_eq!(layout.subgroups_of(NodeId(0)), None); // may be placed in any subgroup
    /// ```
    fn subgroups_of(&self, node: NodeId) -> Option<Vec<usize>> {
        let _ = node;
        None
    }
}

/// A shared, thread-safe layout, to put in [`GmsConfig::layout`](crate::GmsConfig::layout).
/// Equal when it is the same layout object.
///
/// A custom layout through a group: members with even ids in subgroup 0, odd ids in subgroup 1
/// (one shard each, 1 to 3 members; a member's parity never changes, so survivors stay put).
///
/// ```
/// use squall_membership::{GmsConfig, group::GroupConfig};
/// use squall_membership::view::{Assignment, Layout, Shard, ShardBounds, ShardLayout, ShardId};
/// use squall_round_robin::Config;
/// use squall_transport::{NodeId, RegionId};
///
/// struct ByParity;
/// impl ShardLayout for ByParity {
///     fn shape(&self) -> Vec<Vec<ShardBounds>> {
///         vec![vec![ShardBounds { min: 1, max: 3 }]; 2]
///     }
///     fn assign(&self, _prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment {
///         let pick = |p| members.iter().copied().filter(|m| m.0 % 2 == p).take(3).collect();
///         Assignment {
///             shards: vec![
///                 Shard { members: pick(0), ..Shard::default() },
///                 Shard { members: pick(1), ..Shard::default() },
///             ],
///             inadequate: None,
///         }
///     }
/// }
///
/// let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
/// let mut gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
/// gms.layout = Some(Layout::new(ByParity));
/// let cfg = GroupConfig::new(gms, Config::new(ids));
/// assert!(cfg.validate().is_ok());
/// let v0 = squall_membership::view::View::new(0, cfg.gms.initial.clone(), &cfg.gms.shard_layout());
/// assert_eq!(v0.shard_id_of(NodeId(3)), Some(ShardId { subgroup: 1, shard: 0 }));
/// ```
#[derive(Clone)]
pub struct Layout {
    inner: Arc<dyn ShardLayout + Send + Sync>,
    /// The shape, asked once: every view of the group follows it, whatever `inner.shape()`
    /// would say later (the configuration refuses a layout whose shape changes).
    shape: Arc<Vec<Vec<ShardBounds>>>,
}

impl Layout {
    /// Wraps `layout`, pinning its [`shape`](ShardLayout::shape).
    pub fn new(layout: impl ShardLayout + Send + Sync + 'static) -> Layout {
        let shape = Arc::new(layout.shape());
        Layout {
            inner: Arc::new(layout),
            shape,
        }
    }

    /// The number of shards over every subgroup (the length of a view's flat shard list).
    ///
    /// ```
    /// use squall_membership::view::{EvenShards, Layout};
    /// assert_eq!(Layout::new(EvenShards { shards: 3, min: 1, max: 2 }).shard_count(), 3);
    /// ```
    pub fn shard_count(&self) -> usize {
        self.shape.iter().map(Vec::len).sum()
    }
}

impl std::fmt::Debug for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Layout").field(&self.shape).finish()
    }
}

impl PartialEq for Layout {
    fn eq(&self, other: &Layout) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Layout {}

impl ShardLayout for Layout {
    /// The shape the wrapped layout had when it was wrapped.
    fn shape(&self) -> Vec<Vec<ShardBounds>> {
        self.shape.to_vec()
    }
    /// The wrapped layout's own checks, that its shape is still the pinned one, and that its
    /// [`subgroups_of`](ShardLayout::subgroups_of) lists, for every universe node, at least one
    /// subgroup and only subgroups of the shape.
    fn validate(&self, universe: &[NodeId]) -> Result<(), LayoutError> {
        if self.inner.shape() != *self.shape {
            return Err(LayoutError::ShapeChanged);
        }
        let subgroups = self.shape.len();
        for &node in universe {
            let Some(sgs) = self.inner.subgroups_of(node) else {
                continue;
            };
            if sgs.is_empty() {
                return Err(LayoutError::NoSubgroups { node });
            }
            if let Some(&subgroup) = sgs.iter().find(|&&g| g >= subgroups) {
                return Err(LayoutError::SubgroupOutside {
                    node,
                    subgroup,
                    subgroups,
                });
            }
        }
        self.inner.validate(universe)
    }
    fn assign(&self, prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment {
        self.inner.assign(prev, members)
    }
    fn subgroups_of(&self, node: NodeId) -> Option<Vec<usize>> {
        self.inner.subgroups_of(node)
    }
}

/// One shard's policy in [`Subgroups`]: its size bounds and the nodes reserved for it
/// (Derecho's `reserved_node_ids_by_shard`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardPolicy {
    /// Fewer members make the view inadequate (at least 1).
    pub min: usize,
    /// At most this many members (at least `min`).
    pub max: usize,
    /// Nodes that go to this shard before any unreserved node, and to no other shard (when the
    /// shard is full they stay spares).
    pub reserved: Vec<NodeId>,
}

/// One subgroup's policy in [`Subgroups`]: its shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubgroupPolicy {
    /// The shards, in index order.
    pub shards: Vec<ShardPolicy>,
}

impl SubgroupPolicy {
    /// Derecho's `fixed_even_shards(n, size)`: `n` shards of exactly `size` members.
    pub fn fixed_even_shards(n: usize, size: usize) -> SubgroupPolicy {
        SubgroupPolicy::even_shards(n, size, size)
    }

    /// `n` shards of `min` to `max` members (Derecho's `flexible_even_shards`).
    pub fn even_shards(n: usize, min: usize, max: usize) -> SubgroupPolicy {
        SubgroupPolicy {
            shards: vec![
                ShardPolicy {
                    min,
                    max,
                    reserved: Vec::new(),
                };
                n
            ],
        }
    }
}

/// The default layout: disjoint subgroups of shards with per-shard minimum and maximum sizes
/// and reserved nodes, Derecho's default allocator made stable. Over all shards of all
/// subgroups in order: survivors keep their shard (in their order there); then every shard
/// below its `min` is filled up to it, shard by shard, from the members in no shard (lowest
/// rank first: spares before joiners; nodes reserved for the shard before unreserved ones, and
/// never nodes reserved for another shard); then the rest, in rank order, each go to the
/// smallest shard below its `max` (lowest index on ties; a reserved node only to its own shard);
/// members beyond that are spares. A shard all of whose previous members are gone (or that was
/// empty, i.e. lost before) is *lost* and left empty.
///
/// ```
/// use squall_membership::view::{ShardId, ShardLayout, SubgroupPolicy, Subgroups, View};
/// use squall_transport::NodeId;
/// // A subgroup of one shard of 2 or 3, and one of two shards of exactly 2.
/// let layout = Subgroups::new(vec![
///     SubgroupPolicy::even_shards(1, 2, 3),
///     SubgroupPolicy::fixed_even_shards(2, 2),
/// ]);
/// let v = View::new(0, (0..8).map(NodeId).collect(), &layout);
/// let of = |sg, s| v.shard(ShardId { subgroup: sg, shard: s }).unwrap().members.clone();
/// assert_eq!(of(0, 0), [0, 1, 6].map(NodeId));
/// assert_eq!(of(1, 0), [2, 3].map(NodeId));
/// assert_eq!(of(1, 1), [4, 5].map(NodeId));
/// assert_eq!(v.shard_of(NodeId(7)), None); // a spare
/// // Five members cannot give every shard its minimum (2 + 2 + 2); six can.
/// assert!(View::new(0, (0..5).map(NodeId).collect(), &layout).inadequate.is_some());
/// assert!(View::new(0, (0..6).map(NodeId).collect(), &layout).inadequate.is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subgroups {
    /// The subgroups, in index order.
    pub subgroups: Vec<SubgroupPolicy>,
}

impl Subgroups {
    /// The layout of `subgroups`.
    pub fn new(subgroups: Vec<SubgroupPolicy>) -> Subgroups {
        Subgroups { subgroups }
    }

    fn policies(&self) -> impl Iterator<Item = &ShardPolicy> {
        self.subgroups.iter().flat_map(|s| &s.shards)
    }
}

impl From<EvenShards> for Subgroups {
    fn from(e: EvenShards) -> Subgroups {
        Subgroups::new(vec![SubgroupPolicy::even_shards(e.shards, e.min, e.max)])
    }
}

impl ShardLayout for Subgroups {
    fn shape(&self) -> Vec<Vec<ShardBounds>> {
        self.subgroups
            .iter()
            .map(|sg| {
                sg.shards
                    .iter()
                    .map(|p| ShardBounds {
                        min: p.min,
                        max: p.max,
                    })
                    .collect()
            })
            .collect()
    }

    fn validate(&self, universe: &[NodeId]) -> Result<(), LayoutError> {
        let shape = self.shape();
        let ids = flat_ids(&shape);
        let mut seen = Vec::new();
        for ((id, _), p) in ids.into_iter().zip(self.policies()) {
            for &node in &p.reserved {
                if !universe.contains(&node) {
                    return Err(LayoutError::ReservedOutside { shard: id, node });
                }
                if seen.contains(&node) {
                    return Err(LayoutError::ReservedTwice { node });
                }
                seen.push(node);
            }
        }
        Ok(())
    }

    /// A reserved node's subgroup (it goes to its shard or stays a spare); `None` (any
    /// subgroup) for the others.
    fn subgroups_of(&self, node: NodeId) -> Option<Vec<usize>> {
        self.subgroups
            .iter()
            .position(|sg| sg.shards.iter().any(|p| p.reserved.contains(&node)))
            .map(|g| vec![g])
    }

    fn assign(&self, prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment {
        let policies: Vec<&ShardPolicy> = self.policies().collect();
        let reserved_for = |m: NodeId| policies.iter().position(|p| p.reserved.contains(&m));
        let mut shards = vec![Shard::default(); policies.len()];
        let mut lost = Vec::new();
        for (i, (s, p)) in shards.iter_mut().zip(&policies).enumerate() {
            let Some(old) = prev.and_then(|p| p.get(i)) else {
                continue;
            };
            s.members = old
                .members
                .iter()
                .copied()
                .filter(|m| members.contains(m))
                .take(p.max)
                .collect();
            if s.members.is_empty() {
                lost.push(i);
            }
        }
        let placed = |shards: &[Shard], m: NodeId| shards.iter().any(|s| s.members.contains(&m));
        let mut pool: Vec<NodeId> = members
            .iter()
            .copied()
            .filter(|&m| !placed(&shards, m))
            .collect();
        for (i, p) in policies.iter().enumerate() {
            while !lost.contains(&i) && shards[i].members.len() < p.min {
                let pick = pool
                    .iter()
                    .position(|&m| reserved_for(m) == Some(i))
                    .or_else(|| pool.iter().position(|&m| reserved_for(m).is_none()));
                let Some(at) = pick else { break };
                shards[i].members.push(pool.remove(at));
            }
        }
        for m in pool {
            let open = |i: usize| !lost.contains(&i) && shards[i].members.len() < policies[i].max;
            let to = match reserved_for(m) {
                Some(i) => Some(i).filter(|&i| open(i)),
                None => (0..shards.len())
                    .filter(|&i| open(i))
                    .min_by_key(|&i| (shards[i].members.len(), i)),
            };
            if let Some(i) = to {
                shards[i].members.push(m);
            }
        }
        Assignment {
            shards,
            inadequate: None,
        }
    }
}

/// The layout of one subgroup of `shards` even shards of `min` to `max` members: the default
/// ([`GmsConfig::shards`](crate::GmsConfig::shards)), behaving as [`Subgroups`] with that one
/// subgroup and no reserved nodes. Survivors keep their shard (in their order there); then
/// every shard below `min` is filled up to `min`, shard by shard, from the members in no shard
/// (lowest rank first: spares before joiners); then the rest go one at a time to the smallest
/// shard (lowest index on ties) until every shard holds `max`; members beyond that are spares.
/// A shard with fewer than `min` members makes the view inadequate; a shard all of whose
/// previous members are gone is *lost* (it is left empty).
///
/// ```
/// use squall_membership::view::{EvenShards, View};
/// use squall_transport::NodeId;
/// let layout = EvenShards { shards: 2, min: 2, max: 3 };
/// let members: Vec<NodeId> = (0..5).map(NodeId).collect();
/// let a = View::new(0, members.clone(), &layout);
/// assert_eq!(a.shards[0].members, vec![NodeId(0), NodeId(1), NodeId(4)]);
/// assert_eq!(a.shards[1].members, vec![NodeId(2), NodeId(3)]);
/// let e = View::new(0, members[..3].to_vec(), &layout).inadequate.unwrap();
/// assert_eq!((e.shard, e.have, e.need), (1, 1, 2));
/// // n2 fails: shard 1 keeps n3 and takes no one (n4 stays in shard 0): inadequate.
/// let next = vec![NodeId(0), NodeId(1), NodeId(3), NodeId(4)];
/// let b = View::next(1, next, Some(&a.shards), &layout);
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
        if self.shards > MAX_SHARDS {
            return Err("EvenShards.shards must be at most 65536");
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
    fn shape(&self) -> Vec<Vec<ShardBounds>> {
        Subgroups::from(*self).shape()
    }

    fn assign(&self, prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment {
        Subgroups::from(*self).assign(prev, members)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(r: std::ops::Range<u32>) -> Vec<NodeId> {
        r.map(NodeId).collect()
    }

    /// The stable `EvenShards` layout as it was before subgroups (s14), kept to check that the
    /// default still assigns exactly the same shards.
    #[allow(clippy::unwrap_used)]
    fn old_assign(e: &EvenShards, prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment {
        let this = e;
        let k = this.shards.max(1);
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
                .take(this.max)
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
            while Some(i) != lost && s.members.len() < this.min {
                let Some(m) = pool.pop_front() else { break };
                s.members.push(m);
            }
        }
        while !pool.is_empty() {
            let Some(s) = shards
                .iter_mut()
                .enumerate()
                .filter(|(i, s)| Some(*i) != lost && s.members.len() < this.max)
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
                need: this.min,
                lost: true,
                subgroup: 0,
                fault: None,
            }),
            None => shards
                .iter()
                .enumerate()
                .find(|(_, s)| s.members.len() < this.min)
                .map(|(shard, s)| Inadequate {
                    shard,
                    have: s.members.len(),
                    need: this.min,
                    lost: false,
                    subgroup: 0,
                    fault: None,
                }),
        };
        Assignment { shards, inadequate }
    }

    fn two_subgroups() -> Subgroups {
        Subgroups::new(vec![
            SubgroupPolicy::even_shards(1, 2, 3),
            SubgroupPolicy::fixed_even_shards(2, 2),
        ])
    }

    proptest! {
        /// Through any sequence of membership changes, the default layout assigns what the s14
        /// layout did, and finds the same views inadequate (the same shard, counts, `lost`).
        #[test]
        fn even_shards_assign_exactly_as_before(
            shards in 1usize..4, min in 1usize..3, extra in 0usize..3,
            steps in proptest::collection::vec((proptest::collection::vec(any::<bool>(), 10), 0u32..3), 1..6),
        ) {
            let layout = EvenShards { shards, min, max: min + extra };
            let mut members = ids(0..6);
            let mut next_id = 6;
            let mut prev: Option<View> = None;
            for (keep, joins) in steps {
                if let Some(p) = &prev {
                    members = p.members.iter().copied().zip(&keep).filter(|(_, k)| **k).map(|(m, _)| m).collect();
                }
                for _ in 0..joins {
                    members.push(NodeId(next_id));
                    next_id += 1;
                }
                if members.is_empty() {
                    break;
                }
                let old = old_assign(&layout, prev.as_ref().map(|p| &p.shards[..]), &members);
                let v = View::next(1, members.clone(), prev.as_ref().map(|p| &p.shards[..]), &layout);
                let got: Vec<&Vec<NodeId>> = v.shards.iter().map(|s| &s.members).collect();
                let mut old_shards = old.shards.clone();
                if let (Some(p), Some(_)) = (&prev, &old.inadequate) {
                    // The s16 change: an inadequate view keeps only each shard's survivors.
                    old_shards = holders_only(old_shards, &p.shards);
                }
                let want: Vec<&Vec<NodeId>> = old_shards.iter().map(|s| &s.members).collect();
                // One difference, in views that stop the group: the s14 layout kept only the
                // first lost shard empty and could fill a second lost one from the spares.
                if old.inadequate.as_ref().is_none_or(|w| !w.lost) {
                    prop_assert_eq!(got, want);
                }
                let key = |w: &Inadequate| (w.shard, w.have, w.need, w.lost);
                prop_assert_eq!(v.inadequate.as_ref().map(key), old.inadequate.as_ref().map(key));
                prop_assert!(v.inadequate.as_ref().is_none_or(|w| w.subgroup == 0 && w.fault.is_none()));
                if v.inadequate.as_ref().is_some_and(|w| w.lost) {
                    // The group stops; a lost shard stays lost (s16), where the s14 layout
                    // would have filled the empty shard again.
                    break;
                }
                prev = Some(v);
            }
        }

        /// A view of any layout and members encodes to a block that decodes to the same view.
        #[test]
        fn view_blocks_round_trip(
            n in 1u32..12, k in 0u32..4,
            keep in proptest::collection::vec(any::<bool>(), 12),
        ) {
            let layout = two_subgroups();
            let v0 = View::new(k.into(), ids(0..n), &layout);
            let next: Vec<NodeId> = v0.members.iter().copied().zip(&keep).filter(|(_, k)| **k).map(|(m, _)| m).chain([NodeId(40)]).collect();
            for v in [v0.clone(), View::next(9, next, Some(&v0.shards), &layout)] {
                let words = v.encode();
                prop_assert_eq!(View::decode(&words, &layout.shape(), None), Ok(v.clone()));
                let mut padded = words.clone();
                padded.extend([7, 7, 7]);
                prop_assert_eq!(View::decode(&padded, &layout.shape(), None), Ok(v));
                prop_assert!(View::decode(&words[..words.len() - 1], &layout.shape(), None).is_err());
            }
        }

        /// Whatever the words, decoding returns (never panics), and what decodes re-encodes to
        /// a block that decodes to the same view.
        #[test]
        fn view_block_decoding_is_total(words in proptest::collection::vec(
            prop_oneof![0u64..12, any::<u64>(), (1u64..5).prop_map(|s| s << 32), (1u64..5, 0u64..4).prop_map(|(s, i)| s << 32 | i)],
            0..30,
        )) {
            let shape = two_subgroups().shape();
            if let Ok(v) = View::decode(&words, &shape, None) {
                prop_assert_eq!(View::decode(&v.encode(), &shape, None), Ok(v));
            }
        }
    }

    #[test]
    fn malformed_view_blocks_are_refused_with_the_reason() {
        let layout = two_subgroups();
        let shape = layout.shape();
        let v = View::new(3, ids(0..8), &layout);
        let good = v.encode();
        let bad = |f: &dyn Fn(&mut Vec<u64>)| {
            let mut w = good.clone();
            f(&mut w);
            View::decode(&w, &shape, Some(&ids(0..9))).unwrap_err()
        };
        assert_eq!(bad(&|w| w.clear()), ViewBlockError::Truncated);
        assert_eq!(bad(&|w| w[0] = 0), ViewBlockError::Unset);
        assert_eq!(bad(&|w| w[1] = 0), ViewBlockError::Empty);
        assert_eq!(bad(&|w| w[1] = u64::MAX), ViewBlockError::Truncated);
        assert_eq!(bad(&|w| w[2] = 9), ViewBlockError::Node(9));
        assert_eq!(bad(&|w| w[3] = 0), ViewBlockError::Node(0));
        assert_eq!(bad(&|w| w[10] = 4 << 32), ViewBlockError::Shard(4 << 32));
        assert_eq!(bad(&|w| w[10] = 7), ViewBlockError::Shard(7));
        // n0 and n1 both index 0 of subgroup 0's shard.
        assert_eq!(
            bad(&|w| w[11] = 1 << 32),
            ViewBlockError::Indices(ShardId::default())
        );
        // A fourth member in a shard of at most 3 (the spare n7 at index 3).
        assert_eq!(
            bad(&|w| w[17] = 1 << 32 | 3),
            ViewBlockError::Indices(ShardId::default())
        );
        assert!(matches!(bad(&|w| w[18] = 2), ViewBlockError::Inadequacy(_)));
        assert!(matches!(
            bad(&|w| w[18] = 1 | 7 << 2),
            ViewBlockError::Inadequacy(_)
        ));
        assert!(matches!(
            bad(&|w| w[18] = 1 | 9 << 32),
            ViewBlockError::Inadequacy(_)
        ));
        // A lost shard decodes with its reason (a joiner learns it from the block).
        let lost = View::next(
            4,
            vec![
                NodeId(0),
                NodeId(1),
                NodeId(2),
                NodeId(3),
                NodeId(6),
                NodeId(7),
                NodeId(8),
            ],
            Some(&v.shards),
            &layout,
        );
        let why = lost.inadequate.clone().unwrap();
        assert!(
            why.lost
                && why.shard_id()
                    == ShardId {
                        subgroup: 1,
                        shard: 1
                    },
            "{why}"
        );
        assert_eq!(View::decode(&lost.encode(), &shape, None).unwrap(), lost);
    }

    #[test]
    fn reserved_nodes_go_to_their_shard_and_nowhere_else() {
        let mut layout = two_subgroups();
        layout.subgroups[1].shards[1].reserved = vec![NodeId(0), NodeId(7)];
        assert_eq!(layout.validate(&ids(0..8)), Ok(()));
        let v = View::new(0, ids(0..8), &layout);
        let of = |sg, s| {
            v.shard(ShardId {
                subgroup: sg,
                shard: s,
            })
            .unwrap()
            .members
            .clone()
        };
        assert_eq!(of(0, 0), [1, 2, 5].map(NodeId));
        assert_eq!(of(1, 0), [3, 4].map(NodeId));
        assert_eq!(of(1, 1), [0, 7].map(NodeId));
        assert_eq!(v.shard_of(NodeId(6)), None);
        // Shard (1, 1) full: a third reserved node stays a spare.
        layout.subgroups[1].shards[1].reserved.push(NodeId(8));
        let v = View::new(0, ids(0..9), &layout);
        assert_eq!(v.shard_of(NodeId(8)), None);
        layout.subgroups[0].shards[0].reserved = vec![NodeId(8)];
        assert_eq!(
            layout.validate(&ids(0..9)),
            Err(LayoutError::ReservedTwice { node: NodeId(8) })
        );
        assert!(matches!(
            layout.validate(&ids(0..8)),
            Err(LayoutError::ReservedOutside { .. })
        ));
        assert_eq!(
            check_shape(&[vec![ShardBounds { min: 2, max: 1 }]])
                .unwrap_err()
                .to_string(),
            "subgroup 0 shard 0: min is 2 and max is 1; it needs 1 <= min <= max"
        );
        assert_eq!(check_shape(&[vec![]]), Err(LayoutError::Shape));
    }

    /// Two shards of exactly 2, no spare: n1 and n3 fail (both shards short); n7 joins, the
    /// layout would put it in shard 0, but shard 1 is still short: n7 is in no shard. Then n0,
    /// shard 0's last member holding its state, fails: shard 0 is lost (n7 is no survivor).
    #[test]
    fn a_member_placed_in_an_inadequate_view_is_no_survivor() {
        let layout = EvenShards {
            shards: 2,
            min: 2,
            max: 2,
        };
        let n = |v: &[u32]| v.iter().map(|&i| NodeId(i)).collect::<Vec<_>>();
        let v0 = View::new(0, ids(0..4), &layout);
        assert_eq!(v0.shards[0].members, n(&[0, 1]));
        let v1 = View::next(1, n(&[0, 2]), Some(&v0.shards), &layout);
        let v2 = View::next(2, n(&[0, 2, 7]), Some(&v1.shards), &layout);
        let why = v2.inadequate.clone().unwrap();
        // The verdict is the layout's whole assignment: shard 0 would be full, shard 1 not.
        assert_eq!((why.shard, why.have, why.need, why.lost), (1, 1, 2, false));
        assert_eq!(v2.shard_of(NodeId(7)), None);
        assert_eq!(v2.shards[0].members, n(&[0]));
        // The block a joiner reads says the same.
        assert_eq!(
            View::decode(&v2.encode(), &layout.shape(), None),
            Ok(v2.clone())
        );
        let v3 = View::next(3, n(&[2, 7]), Some(&v2.shards), &layout);
        let why = v3.inadequate.clone().unwrap();
        assert_eq!((why.shard, why.lost), (0, true), "{why}");
        // More joiners change nothing: a lost shard stays lost.
        let v4 = View::next(4, n(&[2, 7, 8, 9]), Some(&v3.shards), &layout);
        let why = v4.inadequate.clone().unwrap();
        assert_eq!((why.shard, why.lost), (0, true), "{why}");
        assert!(v4.shards[0].members.is_empty());
        // Once adequate, a view keeps its newcomers: they hold the state after the transfer.
        let v3 = View::next(3, n(&[0, 2, 7, 8]), Some(&v2.shards), &layout);
        assert_eq!(v3.inadequate, None);
        assert_eq!(v3.shards[0].members, n(&[0, 7]));
        let v4 = View::next(4, n(&[2, 7, 8]), Some(&v3.shards), &layout);
        assert!(v4.inadequate.as_ref().is_none_or(|w| !w.lost));
        assert_eq!(v4.shards[0].members, n(&[7]));
    }

    /// Only members that held a shard's state count as its survivors: a newcomer of an
    /// adequate view whose transfer had not completed keeps the shard only with a holder.
    #[test]
    fn a_shard_whose_survivors_hold_no_state_is_lost() {
        let layout = EvenShards {
            shards: 2,
            min: 1,
            max: 3,
        };
        let n = |v: &[u32]| v.iter().map(|&i| NodeId(i)).collect::<Vec<_>>();
        let v0 = View::new(0, ids(0..4), &layout);
        assert_eq!(v0.shards[1].members, n(&[1, 3]));
        // n4 and n5 join shard 1 and shard 0 (adequate: they stay, passive until their
        // transfers complete).
        let v1 = View::next(1, ids(0..6), Some(&v0.shards), &layout);
        assert_eq!(v1.shards[1].members, n(&[1, 3, 5]));
        assert_eq!(v1.inadequate, None);
        // Shard 1's holders fail before n5 holds anything: lost, and left empty.
        let holders = n(&[0, 1, 2, 3]);
        let v2 = View::next_holding(
            2,
            n(&[0, 2, 4, 5]),
            Some(&v1.shards),
            Some(&holders),
            &layout,
        );
        let why = v2.inadequate.clone().unwrap();
        assert_eq!((why.shard, why.have, why.lost), (1, 1, true), "{why}");
        assert!(
            why.to_string()
                .contains("1 surviving member(s) had not completed"),
            "{why}"
        );
        assert!(v2.shards[1].members.is_empty());
        assert_eq!(v2.shards[0].members, n(&[0, 2, 4]));
        // Round trip of the block a joiner reads.
        assert_eq!(
            View::decode(&v2.encode(), &layout.shape(), None),
            Ok(v2.clone())
        );
        // The old rule (no holders known) kept n5 as shard 1's survivor.
        let old = View::next(2, n(&[0, 2, 4, 5]), Some(&v1.shards), &layout);
        assert_eq!(old.inadequate, None);
        assert_eq!(old.shards[1].members, n(&[5]));
        // n5 held the state when the view ended: it carries shard 1 alone.
        let holders = n(&[0, 1, 2, 3, 5]);
        let v2 = View::next_holding(
            2,
            n(&[0, 2, 4, 5]),
            Some(&v1.shards),
            Some(&holders),
            &layout,
        );
        assert_eq!(v2, old);
        // A non-holder survivor does not save a shard, but a holder beside it does.
        let holders = n(&[0, 2, 3]);
        let v2 = View::next_holding(2, n(&[0, 3, 5]), Some(&v1.shards), Some(&holders), &layout);
        assert_eq!(v2.inadequate, None);
        assert_eq!(v2.shards[1].members, n(&[3, 5]));
        // Shard 0's only holder fails; n4 (no holder) survives: lost too.
        let v2 = View::next_holding(
            2,
            n(&[1, 3, 4, 5]),
            Some(&v1.shards),
            Some(&holders),
            &layout,
        );
        let why = v2.inadequate.clone().unwrap();
        assert_eq!((why.shard, why.have, why.lost), (0, 1, true), "{why}");
    }

    /// A layout returning a fixed assignment.
    struct Fixed(Vec<Vec<NodeId>>);
    impl ShardLayout for Fixed {
        fn shape(&self) -> Vec<Vec<ShardBounds>> {
            vec![
                vec![ShardBounds { min: 1, max: 2 }],
                vec![ShardBounds { min: 1, max: 2 }],
            ]
        }
        fn assign(&self, _: Option<&[Shard]>, _: &[NodeId]) -> Assignment {
            Assignment {
                shards: self
                    .0
                    .iter()
                    .map(|m| Shard {
                        members: m.clone(),
                        ..Shard::default()
                    })
                    .collect(),
                inadequate: None,
            }
        }
    }

    #[test]
    fn an_assignment_that_breaks_a_rule_makes_the_view_inadequate() {
        let n = |v: &[u32]| v.iter().map(|&i| NodeId(i)).collect::<Vec<_>>();
        let members = ids(0..4);
        let fault = |a: Vec<Vec<NodeId>>, prev: Option<&[Shard]>| {
            View::next(1, members.clone(), prev, &Fixed(a))
                .inadequate
                .and_then(|w| w.fault)
        };
        assert_eq!(fault(vec![n(&[0]), n(&[1])], None), None);
        assert_eq!(fault(vec![n(&[0])], None), Some(LayoutFault::ShardCount));
        assert_eq!(
            fault(vec![n(&[0, 1, 2]), n(&[3])], None),
            Some(LayoutFault::TooLarge)
        );
        assert_eq!(
            fault(vec![n(&[0]), n(&[9])], None),
            Some(LayoutFault::NotAMember)
        );
        assert_eq!(
            fault(vec![n(&[0]), n(&[0])], None),
            Some(LayoutFault::Twice)
        );
        let v0 = View::new(0, members.clone(), &Fixed(vec![n(&[0, 1]), n(&[2, 3])]));
        // n1 moves to the other subgroup; n3 drops out of its shard (to no shard).
        let moved = View::next(
            1,
            members.clone(),
            Some(&v0.shards),
            &Fixed(vec![n(&[0]), n(&[1, 2])]),
        );
        let why = moved.inadequate.unwrap();
        assert_eq!(
            (why.fault, why.shard_id()),
            (Some(LayoutFault::Moved), ShardId::default())
        );
        assert!(
            why.to_string()
                .contains("moved a survivor of subgroup 0 shard 0"),
            "{why}"
        );
        // The tentative shards keep the survivors where they were.
        assert_eq!(moved.shards[0].members, n(&[0, 1]));
        let dropped = fault(vec![n(&[0, 1]), n(&[2])], Some(&v0.shards));
        assert_eq!(dropped, Some(LayoutFault::Moved));
        // Every fault survives the view block.
        for f in LayoutFault::ALL {
            let w = Inadequate::fault(
                ShardId {
                    subgroup: 1,
                    shard: 0,
                },
                3,
                2,
                f,
            );
            let ids = flat_ids(&Fixed(vec![]).shape());
            assert_eq!(
                Inadequate::decode(Inadequate::encode(Some(&w)), &ids),
                Ok(Some(w))
            );
        }
    }
}
