//! One link cut between two members of a five-member table, and nothing else failing, costs
//! exactly one member: the higher-ranked endpoint, never a third member.
//!
//! Before (parent commit 43aeb4e) a suspicion cut the link both ways, the suspect saw
//! `FailureCause::Remote` and suspected back, and that retaliation was gossiped: members that
//! read it before the original suspicion removed a healthy member, who retaliated in turn.
//! This file compiles against that code too, to reproduce it:
//! `git checkout 43aeb4e -- crates/sst/src && cargo nextest run -p squall-sst --test
//! sim_cut_link --no-capture; git checkout HEAD -- crates/sst/src` (40 seeds: 1.85 members
//! lost on average, a third member in 6 seeds, everyone in 4).
#![allow(clippy::unwrap_used)]

mod common;

use common::{cut_link_sweep, sst_config};

#[test]
fn one_cut_link_costs_one_endpoint_seed_sweep() {
    for (seed, o) in cut_link_sweep(sst_config(5)) {
        assert!(
            o.settled && o.lost == [o.ends[0].max(o.ends[1])],
            "seed {seed}: {o:?}\n  replay with: SQUALL_SEED={seed} cargo test -p squall-sst --test sim_cut_link"
        );
    }
}
