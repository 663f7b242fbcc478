//! Members configured differently are detected (docs/MEMBERSHIP.md, fifty-second part): each
//! member publishes a settings digest in the GMS table; a member whose view holds a member with
//! another digest stops saying why, and the leader never proposes the join of a node whose
//! digest differs (the joiner stops itself). Simulator, through `Group`.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use squall_membership::group::{EpochProfile, Group, GroupConfig};
use squall_membership::log::MemLog;
use squall_ordering::{TotalOrder, Upcall};
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

mod group_sim;

const DIFFER: &str = "its settings differ from the group's: digest";

/// Starts `configs.len()` nodes, each with its own configuration, those at `joiners` as
/// joiners. Every node registers regions large enough for every configuration, so that no
/// region check refuses a member first: only the digest can tell them apart.
fn start(
    seed: u64,
    configs: &[GroupConfig],
    joiners: &[usize],
) -> (Sim, Vec<Group<SimNode, MemLog>>) {
    let mut regions = Group::<SimNode, MemLog>::layout(&configs[0]).unwrap();
    for c in configs {
        for (r, o) in regions
            .iter_mut()
            .zip(Group::<SimNode, MemLog>::layout(c).unwrap())
        {
            r.len = r.len.max(o.len);
        }
    }
    let layouts = vec![regions; configs.len()];
    let (sim, nodes) = Sim::cluster_each(SimConfig::seeded(seed), &layouts, &[]).unwrap();
    let groups = (nodes.into_iter().zip(configs).enumerate())
        .map(|(i, (t, c))| {
            if joiners.contains(&i) {
                Group::joining(t, c.clone(), MemLog::default()).unwrap()
            } else {
                Group::new(t, c.clone(), MemLog::default(), None).unwrap()
            }
        })
        .collect();
    (sim, groups)
}

/// Polls every node (each submitting while it can) for `steps` steps; returns how many
/// messages each delivered.
fn run(sim: &Sim, groups: &mut [Group<SimNode, MemLog>], steps: usize) -> Vec<usize> {
    let mut ups = Vec::new();
    let mut delivered = vec![0; groups.len()];
    for _ in 0..steps {
        for (g, d) in groups.iter_mut().zip(&mut delivered) {
            if g.stopped().is_none() {
                let _ = g.submit(b"m");
                ups.clear();
                g.poll(&mut ups);
                *d += ups
                    .iter()
                    .filter(|u| matches!(u, Upcall::Deliver(_)))
                    .count();
            }
        }
        sim.advance(Duration::from_micros(5));
    }
    delivered
}

#[test]
fn an_initial_member_with_another_window_and_slot_split_stops_everyone() {
    let cfg = group_sim::config(3, 3);
    // The same slot bytes per sender (4 x 24 = 2 x 48), split differently.
    let mut other = cfg.clone();
    other.epoch.window = 2;
    other.epoch.slot_size = 48;
    let (sim, mut groups) = start(1, &[cfg.clone(), cfg, other], &[]);
    let delivered = run(&sim, &mut groups, 400);
    // Nothing is delivered with rows laid out differently: every peer's digest is pushed
    // before its first epoch write, and the epoch is not polled once it differs.
    assert_eq!(delivered, [0, 0, 0]);
    for (i, g) in groups.iter().enumerate() {
        let why = g
            .stopped()
            .unwrap_or_else(|| panic!("n{i} runs with a member configured differently"));
        assert!(why.contains(DIFFER), "n{i}: {why}");
        assert!(
            why.contains("driver (epoch template and profiles)"),
            "n{i}: {why}"
        );
    }
}

#[test]
fn a_joiner_with_a_larger_profile_is_refused_and_the_group_goes_on() {
    let cfg = group_sim::config(4, 3);
    let mut larger = cfg.clone();
    let p = EpochProfile {
        window: cfg.epoch.window * 2,
        ..EpochProfile::of(&cfg.epoch)
    };
    larger.profiles.insert(0, p);
    let (sim, mut groups) = start(2, &[cfg.clone(), cfg.clone(), cfg, larger], &[3]);
    run(&sim, &mut groups, 400);
    let why = groups[3]
        .stopped()
        .expect("the joiner configured differently stops");
    assert!(why.contains(DIFFER), "{why}");
    for g in &groups[..3] {
        assert_eq!(g.stopped(), None);
        assert_eq!(g.view().unwrap().members.len(), 3, "the join was proposed");
    }
    // The group goes on: a failure is handled as usual.
    sim.crash(NodeId(2));
    let delivered = run(&sim, &mut groups[..2], 2000);
    assert!(delivered.iter().all(|&d| d > 0), "{delivered:?}");
    for g in &groups[..2] {
        assert_eq!(g.stopped(), None);
        assert_eq!(g.view().unwrap().members, [NodeId(0), NodeId(1)]);
    }
}

#[test]
fn a_joiner_configured_alike_joins() {
    let cfg = group_sim::config(4, 3);
    let (sim, mut groups) = start(3, &vec![cfg; 4], &[3]);
    run(&sim, &mut groups, 2000);
    for g in &groups {
        assert_eq!(g.stopped(), None);
        assert_eq!(g.view().unwrap().members.len(), 4);
    }
}
