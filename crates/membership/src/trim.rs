//! The ragged trim: which messages of an ending view every survivor delivers.
//!
//! Per shard, the senders are the shard's members in order and messages are delivered
//! round-robin (message `i` of sender `r` has position `i · k + r` for `k` senders). For each
//! sender the leader takes the minimum, over the surviving members of the shard, of how many of
//! that sender's messages they received, then cuts the result back to the longest gap-free
//! round-robin prefix: the first position some survivor may lack ends the prefix, so every
//! survivor holds every message up to the trim and none past it is delivered.

use squall_transport::NodeId;

use crate::view::View;

/// The trim of one view: per sender, how many of its messages are delivered.
///
/// ```
/// use squall_membership::trim::Trim;
/// use squall_transport::NodeId;
/// let t = Trim { view: 3, counts: vec![(NodeId(0), 2), (NodeId(1), 1)] };
/// assert_eq!(t.count(NodeId(1)), 1);
/// assert_eq!(t.count(NodeId(9)), 0);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trim {
    /// The view it ends.
    pub view: u64,
    /// `(sender, messages delivered)` for every member of the view, in rank order.
    pub counts: Vec<(NodeId, u64)>,
}

impl Trim {
    /// How many messages of `sender` are delivered (0 for a non-member).
    pub fn count(&self, sender: NodeId) -> u64 {
        self.counts
            .iter()
            .find(|(s, _)| *s == sender)
            .map_or(0, |&(_, c)| c)
    }
}

/// Cuts per-sender counts (in round-robin sender order) back to the longest gap-free prefix.
///
/// ```
/// use squall_membership::trim::ragged_prefix;
/// // Sender 1 has only 1 message: positions 0 (s0), 1 (s1), 2 (s2), 3 (s0) exist, 4 (s1) does not.
/// assert_eq!(ragged_prefix(&[3, 1, 2]), vec![2, 1, 1]);
/// assert_eq!(ragged_prefix(&[0, 5]), vec![0, 0]);
/// assert_eq!(ragged_prefix(&[]), Vec::<u64>::new());
/// ```
pub fn ragged_prefix(counts: &[u64]) -> Vec<u64> {
    let k = counts.len() as u64;
    if k == 0 {
        return Vec::new();
    }
    // The first missing position: message `c_r` of sender `r`, at `c_r · k + r`.
    let end = counts
        .iter()
        .enumerate()
        .map(|(r, &c)| c.saturating_mul(k).saturating_add(r as u64))
        .min()
        .unwrap_or(0);
    (0..k)
        .map(|r| if end > r { (end - r).div_ceil(k) } else { 0 })
        .collect()
}

/// Computes the trim of `view`: for each shard, per sender the minimum over `survivors` in that
/// shard of `received(survivor, sender)`, cut to the gap-free round-robin prefix. Senders in no
/// shard, and shards without a survivor, get 0.
///
/// ```
/// use squall_membership::trim::compute;
/// use squall_membership::view::{EvenShards, View};
/// use squall_transport::NodeId;
/// let v = View::new(1, vec![NodeId(0), NodeId(1), NodeId(2)], &EvenShards::single());
/// // n0 received 4, 3, 3; n1 received 3, 3, 2; n2 crashed.
/// let rx = |m: NodeId, s: NodeId| [[4, 3, 3], [3, 3, 2], [9, 9, 9]][m.0 as usize][s.0 as usize];
/// let t = compute(&v, &[NodeId(0), NodeId(1)], rx);
/// assert_eq!(t.counts, vec![(NodeId(0), 3), (NodeId(1), 3), (NodeId(2), 2)]);
/// ```
pub fn compute(
    view: &View,
    survivors: &[NodeId],
    received: impl Fn(NodeId, NodeId) -> u64,
) -> Trim {
    let mut counts: Vec<(NodeId, u64)> = view.members.iter().map(|&m| (m, 0)).collect();
    for shard in &view.shards {
        let alive: Vec<NodeId> = shard
            .members
            .iter()
            .copied()
            .filter(|m| survivors.contains(m))
            .collect();
        if alive.is_empty() {
            continue;
        }
        let mins: Vec<u64> = shard
            .members
            .iter()
            .map(|&s| alive.iter().map(|&m| received(m, s)).min().unwrap_or(0))
            .collect();
        for (&s, c) in shard.members.iter().zip(ragged_prefix(&mins)) {
            if let Some(e) = counts.iter_mut().find(|(m, _)| *m == s) {
                e.1 = c;
            }
        }
    }
    Trim {
        view: view.id,
        counts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_is_gap_free_and_maximal() {
        for a in 0..5u64 {
            for b in 0..5u64 {
                for c in 0..5u64 {
                    let input = [a, b, c];
                    let p = ragged_prefix(&input);
                    let total: u64 = p.iter().sum();
                    // Gap-free: positions 0..total are exactly the messages kept.
                    for pos in 0..total {
                        let (i, r) = (pos / 3, (pos % 3) as usize);
                        assert!(i < p[r] && i < input[r], "{input:?} -> {p:?}");
                    }
                    // Maximal: the next position is missing from the input.
                    let (i, r) = (total / 3, (total % 3) as usize);
                    assert!(i >= input[r], "{input:?} -> {p:?} not maximal");
                }
            }
        }
    }
}
