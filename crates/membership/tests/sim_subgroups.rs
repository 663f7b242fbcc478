//! Subgroups through `Group`, on the simulator (issue 6, "a pluggable mapping from a view to
//! subgroups and shards").
//!
//! The application is a hash-chain model per (subgroup, shard): a node's value after position
//! `p` of shard `s` must equal every other member's of `s` at `p`; its snapshot is
//! `[hash][position]`. Every payload carries the shard of the member that submitted it. Checked
//! after every step, per (subgroup, shard):
//! - gap-free positions (each delivery continues the node's last);
//! - one chain value per position on every member of the shard;
//! - nothing delivered by a node outside the shard (payload's shard = receiver's shard), by a
//!   spare, or before the state arrived;
//! - what a member learns: on each `Upcall::View`, `Group::placement()` names the member's shard
//!   and lists exactly that shard's members of the view;
//! - virtual synchrony: the members of a shard that report view `v` start it at one position;
//! - no node changing shard (nor subgroup) while it stays in the group; spares and passive
//!   nodes refuse submits;
//! - every node that installs a view installs the same members.
//!
//! The model (`Run`) is in `group_sim/subgroups.rs`, shared with `sim_colocated.rs`.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::MemLog;
use squall_membership::view::{
    Assignment, Layout, Shard, ShardBounds, ShardId, ShardLayout, SubgroupPolicy, Subgroups,
};
use squall_ordering::TotalOrder;
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds, proptest_cases};

mod group_sim;
use group_sim::subgroups::Run;

/// The shared small-slot group with `layout` and state transfer in 256-byte chunks.
fn config(universe: usize, initial: usize, layout: Layout) -> GroupConfig {
    let mut cfg = group_sim::config(universe, initial);
    cfg.gms.layout = Some(layout);
    cfg.transfer.chunk_size = 256;
    cfg.transfer.window = 4;
    cfg
}

/// Subgroup 0: one shard of 2..=3; subgroup 1: two shards of exactly 2.
fn two_subgroups() -> Layout {
    Layout::new(Subgroups::new(vec![
        SubgroupPolicy::even_shards(1, 2, 3),
        SubgroupPolicy::fixed_even_shards(2, 2),
    ]))
}

const A: ShardId = ShardId {
    subgroup: 0,
    shard: 0,
};
const B0: ShardId = ShardId {
    subgroup: 1,
    shard: 0,
};
const B1: ShardId = ShardId {
    subgroup: 1,
    shard: 1,
};

#[test]
fn two_subgroups_place_members_and_a_spare_and_say_where() {
    let cfg = config(9, 8, two_subgroups());
    let r = Run::new(1, &cfg, 9);
    assert_eq!(r.members(0, A), [0, 1, 6].map(NodeId));
    assert_eq!(r.members(0, B0), [2, 3].map(NodeId));
    assert_eq!(r.members(0, B1), [4, 5].map(NodeId));
    let p = r.groups[5].placement().unwrap();
    assert_eq!(
        (p.view, p.shard, p.members),
        (0, B1, vec![NodeId(4), NodeId(5)])
    );
    // n7 is a spare, n8 outside the group.
    assert_eq!(r.groups[7].placement(), None);
    assert!(!r.groups[7].is_active());
    assert_eq!(r.groups[8].placement(), None);
    let mut g = r.groups;
    assert!(g[7].submit(b"x").unwrap_err().to_string().contains("spare"));
}

/// n4 (subgroup 1 shard 1) crashes: spare n7 enters that shard with the state from n5; then
/// n1 (subgroup 0) crashes and subgroup 0 goes on with two members. Every shard delivers
/// throughout, each with its own positions.
#[test]
fn two_subgroups_with_crashes_and_a_spare_promoted() {
    check_seeds(
        "two_subgroups_with_crashes_and_a_spare_promoted",
        3,
        |seed| {
            let cfg = config(8, 8, two_subgroups());
            let mut r = Run::new(seed, &cfg, 8);
            r.run(400, true)?;
            r.crash(4);
            r.run(3000, true)?;
            if r.groups[7].placement().map(|p| p.shard) != Some(B1) || !r.groups[7].is_active() {
                return Err(format!("the spare was not promoted: {:?}", r.groups[7]));
            }
            if r.groups[5].stats().transfers_served == 0 {
                return Err("n5 (the shard's survivor) served no transfer".into());
            }
            let mid: Vec<u64> = r.apps.iter().map(|a| a.next).collect();
            r.crash(1);
            r.run(3000, true)?;
            r.run(400, false)?;
            if r.members(0, A) != [0, 6].map(NodeId) || r.members(0, B1) != [5, 7].map(NodeId) {
                return Err(format!("unexpected layout {:?}", r.groups[0].view()));
            }
            r.settled(mid[0].max(mid[2]).max(mid[5]) + 5)
        },
    );
}

/// Subgroup 1 shard 0 loses a member and there is no spare: the view is inadequate, every
/// member of every subgroup waits (wedged, saying which shard of which subgroup) until a joiner
/// fills the shard and gets its state from that shard's survivor; everything goes on.
#[test]
fn an_inadequate_subgroup_waits_then_proceeds_when_a_member_joins() {
    check_seeds(
        "an_inadequate_subgroup_waits_then_proceeds_when_a_member_joins",
        3,
        |seed| {
            let cfg = config(8, 7, two_subgroups());
            let mut r = Run::new(seed, &cfg, 8);
            r.run(400, true)?;
            r.crash(3);
            r.run(3000, true)?;
            for i in r.live() {
                let why = r.groups[i].waiting().ok_or(format!("n{i} not waiting"))?;
                if (why.shard_id(), why.have, why.need, why.lost) != (B0, 1, 2, false) {
                    return Err(format!("n{i}: wrong reason {why}"));
                }
                if !why
                    .to_string()
                    .contains("subgroup 1 shard 0 would have 1 members but needs at least 2")
                {
                    return Err(format!("n{i}: unclear reason {why}"));
                }
            }
            let before: Vec<u64> = r.apps.iter().map(|a| a.next).collect();
            if r.groups[0].submit(b"\x00\x00x").is_ok() {
                return Err("submit accepted in an inadequate view".into());
            }
            r.run(1000, true)?;
            if r.apps.iter().map(|a| a.next).collect::<Vec<_>>() != before {
                return Err("a member delivered in an inadequate view".into());
            }
            r.groups[7].join().unwrap();
            r.run(6000, true)?;
            r.run(400, false)?;
            if r.groups[0].waiting().is_some() || r.members(0, B0) != [2, 7].map(NodeId) {
                return Err(format!("still waiting: {:?}", r.groups[0].view()));
            }
            r.settled(before[0].max(before[2]) + 5)
        },
    );
}

/// A custom layout: even ids in subgroup 0, odd ids in subgroup 1, one shard of 1 to 3 each
/// (a node's parity never changes, so survivors stay put).
struct ByParity;

impl ShardLayout for ByParity {
    fn shape(&self) -> Vec<Vec<ShardBounds>> {
        vec![vec![ShardBounds { min: 1, max: 3 }]; 2]
    }

    fn assign(&self, prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment {
        let pick = |parity: u32| {
            // Survivors first (in their order), then the others by rank, up to 3.
            let old = prev.map_or(&[][..], |p| &p[parity as usize].members[..]);
            let mut out: Vec<NodeId> = old
                .iter()
                .copied()
                .filter(|m| members.contains(m))
                .collect();
            for &m in members {
                if m.0 % 2 == parity && !out.contains(&m) && out.len() < 3 {
                    out.push(m);
                }
            }
            Shard {
                members: out,
                ..Shard::default()
            }
        };
        Assignment {
            shards: vec![pick(0), pick(1)],
            inadequate: None,
        }
    }
}

/// The custom layout through `Group`: n3 (odd) crashes, n7 (odd, outside) joins into subgroup
/// 1 with the state from n1; n6 (even, a spare: subgroup 0 is full) stays out of every shard.
#[test]
fn a_custom_layout_runs_through_group() {
    check_seeds("a_custom_layout_runs_through_group", 3, |seed| {
        let cfg = config(8, 7, Layout::new(ByParity));
        let mut r = Run::new(seed, &cfg, 8);
        let odd = ShardId {
            subgroup: 1,
            shard: 0,
        };
        if r.members(0, A) != [0, 2, 4].map(NodeId) || r.members(0, odd) != [1, 3, 5].map(NodeId) {
            return Err(format!("initial layout {:?}", r.groups[0].view()));
        }
        r.run(400, true)?;
        r.crash(3);
        r.groups[7].join().unwrap();
        r.run(6000, true)?;
        r.run(400, false)?;
        if r.members(0, odd) != [1, 5, 7].map(NodeId) || r.groups[6].placement().is_some() {
            return Err(format!("layout {:?}", r.groups[0].view()));
        }
        if r.groups[1].stats().transfers_served == 0 {
            return Err("n1 (the odd shard's first survivor) served no transfer".into());
        }
        r.settled(10)
    });
}

/// A broken custom layout: after the first view it swaps the two subgroups, moving every
/// survivor. The group refuses it: the next view is inadequate with the fault (the group waits,
/// nobody delivers in another shard's stream).
struct Swaps;

impl ShardLayout for Swaps {
    fn shape(&self) -> Vec<Vec<ShardBounds>> {
        ByParity.shape()
    }

    fn assign(&self, prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment {
        let mut a = ByParity.assign(prev, members);
        if prev.is_some() {
            a.shards.swap(0, 1);
        }
        a
    }
}

#[test]
fn a_layout_that_moves_survivors_to_another_subgroup_is_refused() {
    check_seeds(
        "a_layout_that_moves_survivors_to_another_subgroup_is_refused",
        2,
        |seed| {
            let cfg = config(6, 6, Layout::new(Swaps));
            let mut r = Run::new(seed, &cfg, 6);
            r.run(400, true)?;
            r.crash(5);
            r.run(3000, true)?;
            let before: Vec<u64> = r.apps.iter().map(|a| a.next).collect();
            r.run(1000, true)?;
            for i in r.live() {
                let why = r.groups[i].waiting().ok_or(format!("n{i} not waiting"))?;
                if !why.to_string().contains("moved a survivor") {
                    return Err(format!("n{i}: wrong reason {why}"));
                }
                if r.apps[i].next != before[i] {
                    return Err(format!("n{i} delivered after the broken layout"));
                }
            }
            Ok(())
        },
    );
}

/// Both members of subgroup 1 shard 1 crash, and n8 asks to join as soon as the view change
/// for that is under way (a member wedged), so the view that names n8 has lost the shard. The
/// members stop with the reason, and so does the joiner — from the published view, since it
/// never saw the previous shards — instead of waiting silently.
#[test]
fn a_joiner_of_a_view_whose_shard_was_lost_learns_why() {
    check_seeds(
        "a_joiner_of_a_view_whose_shard_was_lost_learns_why",
        3,
        |seed| {
            let cfg = config(9, 8, two_subgroups());
            let mut r = Run::new(seed, &cfg, 9);
            r.run(400, true)?;
            r.crash(4);
            r.crash(5);
            let mut steps = 0;
            while !r.live().iter().any(|&i| r.groups[i].gms().is_wedged()) {
                r.run(1, true)?;
                steps += 1;
                if steps > 5000 {
                    return Err("nobody wedged".into());
                }
            }
            r.groups[8].join().unwrap();
            r.run(4000, true)?;
            // n8 installed view 1 from a member's published block (the group then stopped).
            if r.groups[8].gms().view().is_none_or(|v| v.id != 1) {
                return Err(format!("setup: n8 is not in view 1: {:?}", r.groups[8]));
            }
            r.stopped_for(
                &[0, 1, 2, 3, 6, 7, 8],
                "subgroup 1 shard 1 lost every member",
            )
        },
    );
}

/// No spare: n3 (subgroup 1 shard 0) and n5 (shard 1) crash, so both shards of subgroup 1 are
/// short. n7 joins: the layout would put it in shard 0, but shard 1 is still short, so the view
/// is inadequate, no shard runs and n7 receives no state. Then n2, shard 0's last member holding
/// its state, crashes. Shard 0 is lost — n7 is no survivor of it — and every member, n7
/// included, stops saying so. (When the inadequate view counted n7 as shard 0's member, the
/// next view kept n7 there as its "survivor": the group waited, and once n8 and n9 joined, ran
/// shard 0 with two members waiting for a transfer nobody could serve.)
#[test]
fn a_member_placed_in_an_inadequate_view_is_no_survivor() {
    check_seeds(
        "a_member_placed_in_an_inadequate_view_is_no_survivor",
        3,
        |seed| {
            let cfg = config(10, 7, two_subgroups());
            let mut r = Run::new(seed, &cfg, 10);
            r.run(400, true)?;
            r.crash(3);
            r.crash(5);
            r.run(3000, true)?;
            r.groups[7].join().unwrap();
            r.run(3000, true)?;
            let v = r.groups[7]
                .gms()
                .view()
                .cloned()
                .ok_or("setup: n7 did not join")?;
            let why = v
                .inadequate
                .clone()
                .ok_or("setup: n7's first view is adequate")?;
            if why.shard_id() != B1 {
                return Err(format!("setup: n7's first view waits for {why}"));
            }
            r.crash(2);
            r.groups[8].join().unwrap();
            r.groups[9].join().unwrap();
            r.run(6000, true)?;
            r.stopped_for(&[0, 1, 4, 6, 7], "subgroup 1 shard 0 lost every member")?;
            match v.shard_of(NodeId(7)) {
                Some(s) => Err(format!(
                    "n7 was in shard {s} of the inadequate view {}",
                    v.id
                )),
                None => Ok(()),
            }
        },
    );
}

#[derive(Clone, Debug)]
struct Plan {
    /// (node, step) crashes, each of a distinct node.
    crashes: Vec<(usize, usize)>,
    /// (node, step) joins, each by a distinct node outside the initial view.
    joins: Vec<(usize, usize)>,
}

/// `crashes` crashes (fewer when a node is drawn twice) of nodes drawn from `victims`, and joins
/// by `joiners`, each at a random step below 4000 (a joiner may not join).
fn plan_strategy(
    victims: Vec<usize>,
    crashes: std::ops::RangeInclusive<usize>,
    joiners: std::ops::Range<usize>,
) -> impl Strategy<Value = Plan> {
    let n = joiners.len();
    (
        proptest::collection::vec((proptest::sample::select(victims), 100usize..4000), crashes),
        proptest::collection::vec(proptest::option::of(100usize..4000), n),
    )
        .prop_map(move |(mut crashes, joins)| {
            crashes.sort_unstable();
            crashes.dedup_by_key(|c| c.0);
            crashes.sort_by_key(|c| c.1);
            let joins = joiners
                .clone()
                .zip(joins)
                .filter_map(|(node, at)| Some((node, at?)))
                .collect();
            Plan { crashes, joins }
        })
}

/// The members of `universe` nodes' group whose first `initial` form view 0, in two subgroups
/// (one shard of 2..=3; two shards of 2); crashes and joins as `plan` says. Every step is
/// checked (see the module doc); at the end the survivors either settled with every shard
/// running, or stopped because a shard lost every member, or all wait, saying why, with no
/// spare that could fill the short shards.
fn run_plan(seed: u64, plan: &Plan, universe: usize, initial: usize) -> Result<(), String> {
    run_plan_reaching(seed, plan, universe, initial).map(drop)
}

/// [`run_plan`], returning whether some member waited in an inadequate view that names a
/// joiner of the plan within the plan's 4000 steps (the moment of the seed-pinned regression).
fn run_plan_reaching(
    seed: u64,
    plan: &Plan,
    universe: usize,
    initial: usize,
) -> Result<bool, String> {
    let cfg = config(universe, initial, two_subgroups());
    let mut r = Run::new(seed, &cfg, universe);
    let mut reached = false;
    for step in 0..4000 {
        for &(n, at) in &plan.crashes {
            if at == step {
                r.crash(n);
            }
        }
        for &(n, at) in &plan.joins {
            if at == step {
                r.groups[n].join().unwrap();
            }
        }
        r.run(1, true)?;
        reached |= r.groups.iter().any(|g| {
            g.waiting().is_some()
                && g.view().is_some_and(|v| {
                    (plan.joins.iter()).any(|&(n, _)| v.contains(NodeId(n as u32)))
                })
        });
    }
    r.run(6000, true)?;
    r.run(500, false)?;
    // A lost shard stops every member (a stopped group has no view, so look at every node that
    // did not crash): then every initial member still up stopped for it.
    let lost = |i: usize| {
        r.groups[i]
            .stopped()
            .is_some_and(|w| w.contains("lost every member"))
    };
    let up: Vec<usize> = (0..r.groups.len()).filter(|&i| !r.crashed[i]).collect();
    if up.iter().any(|&i| lost(i)) {
        if let Some(&i) = up.iter().find(|&&i| i < initial && !lost(i)) {
            return Err(format!(
                "a shard was lost but n{i} did not stop for it: {:?}",
                r.groups[i].stopped()
            ));
        }
        return Ok(reached);
    }
    let live = r.live();
    if live.is_empty() {
        return Err("every node that did not crash stopped or left the group".into());
    }
    // No spare left to fill a short shard: every survivor waits, saying why (a member never
    // changes shards, so a full shard cannot give one away). An inadequate view's shards hold
    // only their survivors, so the members in no shard are all that could fill them: fewer
    // than the shortfall.
    if let Some(why) = r.groups[live[0]].waiting() {
        if live.iter().any(|&i| r.groups[i].waiting().is_none()) {
            return Err(format!("only some survivors wait ({why})"));
        }
        let v = r.groups[live[0]].view().unwrap();
        let unplaced = v
            .members
            .iter()
            .filter(|&&m| v.shard_of(m).is_none())
            .count();
        let shortfall: usize = v.shards.iter().map(|s| 2 - s.members.len().min(2)).sum();
        if why.fault.is_some() || unplaced >= shortfall {
            return Err(format!(
                "waiting with a spare at hand ({unplaced} members in no shard, {shortfall} missing), or for a fault: {why}"
            ));
        }
        return Ok(reached);
    }
    r.settled(5)?;
    Ok(reached)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(6)))]

    /// Eight initial members (a spare among them), one node outside; up to two crashes of
    /// any initial member and a join.
    #[test]
    fn proptest_subgroups_with_crashes_and_a_join(
        plan in plan_strategy((0..8).collect(), 0..=2, 8..9), seed in 0u64..1000,
    ) {
        if let Err(why) = run_plan(seed, &plan, 9, 8) {
            return Err(TestCaseError::fail(format!("seed {seed} {plan:?}: {why}")));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(4)))]

    /// No spare: seven initial members, three nodes outside; two or three crashes, mostly of
    /// subgroup 1's four members (so both its shards are often short at once and a joiner
    /// arrives while the view is inadequate, as in
    /// `a_member_placed_in_an_inadequate_view_is_no_survivor`), and up to three joins.
    #[test]
    fn proptest_subgroups_without_a_spare_crashes_and_joins(
        plan in plan_strategy(vec![0, 2, 2, 3, 3, 4, 4, 5, 5, 6], 2..=3, 7..10), seed in 0u64..1000,
    ) {
        if let Err(why) = run_plan(seed, &plan, 10, 7) {
            return Err(TestCaseError::fail(format!("seed {seed} {plan:?}: {why}")));
        }
    }
}

/// A Derecho-style generator whose number of shards grows with the membership (a shard per
/// three members). Its shape can only name one count, so a view of another size breaks it.
struct ShardPerThree;

impl ShardLayout for ShardPerThree {
    fn shape(&self) -> Vec<Vec<ShardBounds>> {
        vec![vec![ShardBounds { min: 1, max: 3 }; 2]]
    }

    fn assign(&self, _prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment {
        Assignment {
            shards: members
                .chunks(3)
                .map(|c| Shard {
                    members: c.to_vec(),
                    ..Shard::default()
                })
                .collect(),
            inadequate: None,
        }
    }
}

/// A layout whose shape answers differently each time it is asked.
#[derive(Default)]
struct Restless(std::sync::atomic::AtomicUsize);

impl ShardLayout for Restless {
    fn shape(&self) -> Vec<Vec<ShardBounds>> {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        vec![vec![ShardBounds { min: 1, max: 3 }; 1 + n % 2]]
    }

    fn assign(&self, prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment {
        ShardPerThree.assign(prev, members)
    }
}

/// The shard count is fixed for a group's lifetime: a layout whose count changes with the
/// membership is refused at start-up with what to change (its initial view of six members
/// is fine: two shards, as its shape says; a view of four would have two, of seven three),
/// and so is a layout whose shape changes. Within the shape, the group runs.
#[test]
fn a_layout_whose_shard_count_changes_is_refused_at_start_up() {
    let e = config(9, 6, Layout::new(ShardPerThree))
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("assigned 1 shards to a view of 1 members but its shape has 2")
            && e.contains("the number of shards is fixed for the group's lifetime"),
        "{e}"
    );
    let cfg = config(9, 6, Layout::new(ShardPerThree));
    assert!(Group::<SimNode, MemLog>::layout(&cfg).is_err());
    // The same through `Group::new`: nothing starts.
    let (_sim, nodes) = Sim::cluster(
        SimConfig::seeded(0),
        9,
        &Group::<SimNode, MemLog>::layout(&config(9, 6, two_subgroups())).unwrap(),
    )
    .unwrap();
    let t = nodes.into_iter().next().unwrap();
    let e = Group::new(t, cfg, MemLog::default(), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("the number of shards is fixed"), "{e}");
    let e = config(9, 6, Layout::new(Restless::default()))
        .validate()
        .unwrap_err()
        .to_string();
    assert!(e.contains("shape() changed"), "{e}");
}

/// What `proptest_subgroups_without_a_spare_crashes_and_joins` shrank to when an inadequate view
/// kept a newcomer in a shard (seed 11): n2 and n4 crash together, leaving both shards of
/// subgroup 1 short, and n9 joins at once; the layout would put n9 in shard 0.
#[test]
fn regression_sweep_seed_11_a_joiner_while_both_shards_of_a_subgroup_are_short() {
    let plan = Plan {
        crashes: vec![(2, 100), (4, 100)],
        joins: vec![(9, 100)],
    };
    let reached = run_plan_reaching(11, &plan, 10, 7).unwrap();
    assert!(
        reached,
        "{}",
        group_sim::missed(
            11,
            "a member waiting in an inadequate view that names the joiner n9"
        )
    );
}

/// Start-up validation of a subgroup layout: each setting refused with what to change, and the
/// epoch regions sized for the largest shard of any subgroup.
#[test]
fn subgroup_settings_are_validated_and_regions_sized_for_the_largest_shard() {
    use squall_membership::view::ShardPolicy;
    let err = |layout: Subgroups, universe: usize, initial: usize| {
        config(universe, initial, Layout::new(layout))
            .validate()
            .unwrap_err()
            .to_string()
    };
    let mut bad = Subgroups::new(vec![
        SubgroupPolicy::even_shards(1, 2, 3),
        SubgroupPolicy::even_shards(2, 2, 1),
    ]);
    assert!(
        err(bad.clone(), 8, 8).contains("subgroup 1 shard 0: min is 2 and max is 1"),
        "{}",
        err(bad.clone(), 8, 8)
    );
    bad.subgroups[1] = SubgroupPolicy {
        shards: vec![ShardPolicy {
            min: 1,
            max: 1,
            reserved: vec![NodeId(9)],
        }],
    };
    assert!(err(bad, 8, 8).contains("reserved node n9 is not in the universe"));
    // 2 + 2 + 2 minimum members, but at most 5 members.
    let mut cfg = config(8, 5, two_subgroups());
    cfg.gms.max_members = 5;
    let e = cfg.validate().unwrap_err().to_string();
    assert!(e.contains("the sum of every shard's minimum"), "{e}");
    let e = err(
        Subgroups::new(vec![
            SubgroupPolicy::even_shards(1, 2, 3),
            SubgroupPolicy::fixed_even_shards(2, 2),
        ]),
        8,
        5,
    );
    assert!(e.contains("the initial view must give every shard"), "{e}");
    // The epoch regions: those of the largest shard (3 members), not of the universe.
    let region_sizes = |cfg: &GroupConfig| -> Vec<usize> {
        Group::<SimNode, MemLog>::layout(cfg)
            .unwrap()
            .iter()
            .map(|r| r.len)
            .collect()
    };
    let mut one_shard_of_3 = group_sim::config(8, 8);
    one_shard_of_3.gms.shards = squall_membership::view::EvenShards {
        shards: 1,
        min: 1,
        max: 3,
    };
    let sub = region_sizes(&config(8, 8, two_subgroups()));
    assert_eq!(sub[1..5], region_sizes(&one_shard_of_3)[1..5]);
    assert!(sub[1] < region_sizes(&group_sim::config(8, 8))[1]);
}
