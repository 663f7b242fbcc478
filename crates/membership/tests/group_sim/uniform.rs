//! Uniform agreement, shared by the `Group` simulator checkers (`subgroups.rs`, `sim_join.rs`,
//! `sim_shards.rs`): a member that starts a view of its shard, or takes the shard's state in
//! it, starts at or past every position that any member of the shard delivered in an earlier
//! view, a member that crashed or left since included. With the checkers' chain check (one
//! chain value per position) they are the same messages.

use std::collections::BTreeMap;

use squall_membership::view::ShardId;

/// Per (shard, view): one past the highest position any member delivered in the view.
#[derive(Clone, Debug, Default)]
pub struct Uniform {
    ends: BTreeMap<(ShardId, u64), u64>,
}

impl Uniform {
    /// A member of `s` in view `view` (the last it reported, or took its state in) delivered
    /// position `pos`.
    pub fn delivered(&mut self, s: ShardId, view: u64, pos: u64) {
        let end = self.ends.entry((s, view)).or_insert(0);
        *end = (*end).max(pos + 1);
    }

    /// Member `i` of `s` starts view `view` at position `at`: no position at or past `at` was
    /// delivered in an earlier view of `s`.
    pub fn check(&self, i: usize, s: ShardId, view: u64, at: u64) -> Result<(), String> {
        match (self.ends.range((s, 0)..(s, view))).find(|&(_, &end)| end > at) {
            Some((&(_, v), &end)) => Err(format!(
                "uniform agreement: n{i} starts view {view} of {s} at position {at}, but position {} was delivered in view {v}",
                end - 1
            )),
            None => Ok(()),
        }
    }
}
