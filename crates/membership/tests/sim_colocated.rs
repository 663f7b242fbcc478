//! Overlapping subgroups by co-located members, on the simulator (issue 6; docs/MEMBERSHIP.md,
//! forty-seventh part): a host (one process) runs one member per subgroup it is in, every
//! member its own `Group` with its own node id, endpoint and logs, all in one top-level group,
//! each pinned to its subgroup by reserved ids. `GmsConfig::hosts` names the hosts; a suspected
//! member takes its co-hosts with it (co-suspicion).
//!
//! Four hosts `h` = {n`h`, n`h+4`} (h = 0..4): subgroup 0 "cache" is one shard of n0..n3;
//! subgroup 1 "store" is two shards, {n4, n5} and {n6, n7}. Host 4 = {n8, n9} is outside at
//! first; n8 is reserved for the cache, n9 for store shard 0. Checked after every step by the
//! subgroup model of `sim_subgroups.rs` (`group_sim::subgroups::Run`): virtual synchrony per
//! shard, nothing delivered outside a shard, one chain per shard, every view installed with the
//! same members everywhere.
//!
//! s25 (fifty-seventh part): total restarts with hosts on a layout of three hosts × two
//! subgroups with durable epochs (`trio`), checked across lives by `Run::life` (common prefix,
//! nothing delivered lost); a restart of a minority of hosts holding a majority of members
//! waits, or stops once the others are reported failed; and the co-suspicion after
//! `settle_absent`'s suspicion, pinned with an endpoint that never links one peer.
#![allow(clippy::unwrap_used)]

use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use proptest::prelude::*;
use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::MemLog;
use squall_membership::view::{Layout, ShardId, ShardPolicy, SubgroupPolicy, Subgroups};
use squall_ordering::TotalOrder;
use squall_transport::{Event, NodeId, RegionId, Transport};
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds, proptest_cases};

mod group_sim;
use group_sim::subgroups::{Boot, Run};
use group_sim::tap::{Tap, Tapped};
use group_sim::{Moment, check_seeds_reaching};

const CACHE: ShardId = ShardId {
    subgroup: 0,
    shard: 0,
};
const STORE0: ShardId = ShardId {
    subgroup: 1,
    shard: 0,
};

/// Host `h`'s members.
fn host(h: usize) -> [usize; 2] {
    if h == 4 { [8, 9] } else { [h, h + 4] }
}

fn ids(nodes: &[usize]) -> Vec<NodeId> {
    nodes.iter().map(|&n| NodeId(n as u32)).collect()
}

fn pinned(min: usize, max: usize, reserved: &[usize]) -> ShardPolicy {
    ShardPolicy {
        min,
        max,
        reserved: ids(reserved),
    }
}

/// Ten nodes, the first eight in view 0; the layout above; `colocated`: the five hosts in
/// `GmsConfig::hosts` (otherwise none: every member its own host, the pre-s24 behaviour).
fn config(colocated: bool) -> GroupConfig {
    let mut cfg = group_sim::config(10, 8);
    cfg.gms.layout = Some(Layout::new(Subgroups::new(vec![
        SubgroupPolicy {
            shards: vec![pinned(2, 5, &[0, 1, 2, 3, 8])],
        },
        SubgroupPolicy {
            shards: vec![pinned(1, 3, &[4, 5, 9]), pinned(1, 3, &[6, 7])],
        },
    ])));
    if colocated {
        cfg.gms.hosts = (0..5).map(|h| ids(&host(h))).collect();
    }
    cfg.transfer.chunk_size = 256;
    cfg.transfer.window = 4;
    cfg
}

/// The view id of the highest-numbered running member (not crashed, not stopped).
fn view_id(r: &Run) -> u64 {
    (0..r.groups.len())
        .rev()
        .filter(|&i| !r.crashed[i] && r.groups[i].stopped().is_none())
        .find_map(|i| r.groups[i].view().map(|v| v.id))
        .unwrap_or(0)
}

/// Runs until every node of `live` installed a view without any of `gone`, at most `steps`
/// steps (2 µs of virtual time each); returns the virtual time it took.
fn until_removed(
    r: &mut Run,
    live: &[usize],
    gone: &[usize],
    steps: usize,
) -> Result<Duration, String> {
    let t0 = r.sim.now();
    for _ in 0..steps {
        r.run(1, true)?;
        let done = live.iter().all(|&i| {
            r.groups[i]
                .view()
                .is_some_and(|v| gone.iter().all(|&g| !v.contains(NodeId(g as u32))))
        });
        if done {
            return Ok(r.sim.now().saturating_since(t0));
        }
    }
    let i = live
        .iter()
        .copied()
        .find(|&i| {
            r.groups[i]
                .view()
                .is_none_or(|v| gone.iter().any(|&g| v.contains(NodeId(g as u32))))
        })
        .unwrap_or(live[0]);
    Err(format!(
        "n{i} still has {gone:?} in its view after {steps} steps (stopped: {:?}): {:?}",
        r.groups[i].stopped(),
        r.groups[i].view()
    ))
}

/// Each view installed after view 0 holds host `h` whole or not at all.
fn host_whole(r: &Run, h: usize) -> Result<(), String> {
    for (vid, members) in &r.views {
        let [a, b] = host(h).map(|n| members.contains(&NodeId(n as u32)));
        if *vid > 0 && a != b {
            return Err(format!(
                "view {vid} counts one member of host {h}: {members:?}"
            ));
        }
    }
    Ok(())
}

fn others(gone: &[usize]) -> Vec<usize> {
    (0..8).filter(|n| !gone.contains(n)).collect()
}

#[test]
fn hosts_are_validated_and_place_one_member_per_subgroup() {
    let cfg = config(true);
    cfg.validate().unwrap();
    let r = Run::new(0, &cfg, 10);
    for h in 0..4 {
        let [c, s] = host(h);
        assert_eq!(r.groups[c].placement().unwrap().shard, CACHE);
        assert_eq!(r.groups[s].placement().unwrap().shard.subgroup, 1);
    }
    // Host 0 running n0 and n1, both pinned to the cache, is refused.
    let mut bad = config(false);
    bad.gms.hosts = vec![ids(&[0, 1])];
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("n0 and n1 share a host"), "{e}");
}

/// A whole host crashes (both its members at once): one view change removes both, every shard
/// goes on; then host 4 joins with two members and each gets its own shard's state.
#[test]
fn a_host_crash_is_one_view_change_and_a_new_host_joins() {
    check_seeds(
        "a_host_crash_is_one_view_change_and_a_new_host_joins",
        3,
        |seed| {
            let mut r = Run::new(seed, &config(true), 10);
            r.run(400, true)?;
            let before = view_id(&r);
            r.crash(0);
            r.crash(4);
            until_removed(&mut r, &others(&[0, 4]), &[0, 4], 5000)?;
            if view_id(&r) != before + 1 {
                return Err(format!(
                    "host 0 took {} view changes to remove",
                    view_id(&r) - before
                ));
            }
            r.run(1000, true)?;
            let mid: Vec<u64> = r.apps.iter().map(|a| a.next).collect();
            r.groups[8].join().unwrap();
            r.groups[9].join().unwrap();
            r.run(6000, true)?;
            r.run(400, false)?;
            let p8 = r.groups[8].placement().map(|p| p.shard);
            let p9 = r.groups[9].placement().map(|p| p.shard);
            if p8 != Some(CACHE) || p9 != Some(STORE0) {
                return Err(format!("host 4 placed as {p8:?} and {p9:?}"));
            }
            if r.groups[5].stats().transfers_served == 0 {
                return Err("n5 (store shard 0's survivor) served no transfer".into());
            }
            (0..5).try_for_each(|h| host_whole(&r, h))?;
            r.settled(mid[1].max(mid[5]).max(mid[6]) + 5)
        },
    );
}

/// Host 0's members die 800 µs apart (a process going down member by member, or one member's
/// thread hung first): the first suspicion removes both in one view change, within the
/// suspicion timeout (1.5 ms) of the first death. Without co-suspicion the view change that
/// removes n0 waits for n4's wedge until n4 is detected in turn, 800 µs later.
#[test]
fn a_host_whose_members_die_apart_is_one_view_change() {
    check_seeds(
        "a_host_whose_members_die_apart_is_one_view_change",
        3,
        |seed| {
            let mut r = Run::new(seed, &config(true), 10);
            r.run(400, true)?;
            let before = view_id(&r);
            let t = staggered_crash(&mut r)?;
            if view_id(&r) != before + 1 || t >= Duration::from_micros(1500) {
                return Err(format!(
                    "{} view changes, {t:?} after the first death",
                    view_id(&r) - before
                ));
            }
            r.run(1000, true)?;
            r.run(400, false)?;
            host_whole(&r, 0)?;
            r.settled(5)
        },
    );
}

/// Crashes n0, runs 800 µs, crashes n4; returns the time from the first crash until every
/// other member installed a view without either.
fn staggered_crash(r: &mut Run) -> Result<Duration, String> {
    let t0 = r.sim.now();
    r.crash(0);
    r.run(400, true)?;
    r.crash(4);
    until_removed(r, &others(&[0, 4]), &[0, 4], 8000)?;
    Ok(r.sim.now().saturating_since(t0))
}

/// One member of host 0 is cut off from everyone (its endpoint failed): its process is
/// counted failed, so its co-host n4, reachable, is removed in the same view change and stops.
#[test]
fn a_member_cut_off_alone_takes_its_co_host_with_it() {
    check_seeds(
        "a_member_cut_off_alone_takes_its_co_host_with_it",
        3,
        |seed| {
            let mut r = Run::new(seed, &config(true), 10);
            r.run(400, true)?;
            let before = view_id(&r);
            r.sim
                .partition(&ids(&[0]), &ids(&[1, 2, 3, 4, 5, 6, 7, 8, 9]));
            until_removed(&mut r, &others(&[0, 4]), &[0, 4], 5000)?;
            if view_id(&r) != before + 1 {
                return Err(format!("{} view changes", view_id(&r) - before));
            }
            r.run(2000, true)?;
            for i in host(0) {
                if r.groups[i].stopped().is_none() {
                    return Err(format!("n{i} still runs: {:?}", r.groups[i].view()));
                }
                r.crashed[i] = true;
            }
            host_whole(&r, 0)?;
            r.run(400, false)?;
            r.settled(5)
        },
    );
}

/// A partition that cuts only the link between host 0's two members: no view counts one of
/// them without the other (both go).
#[test]
fn a_partition_inside_a_host_removes_the_whole_host() {
    check_seeds(
        "a_partition_inside_a_host_removes_the_whole_host",
        3,
        |seed| {
            let mut r = Run::new(seed, &config(true), 10);
            r.run(400, true)?;
            r.sim.partition(&ids(&[0]), &ids(&[4]));
            until_removed(&mut r, &others(&[0, 4]), &[0, 4], 5000)?;
            r.run(2000, true)?;
            for i in host(0) {
                r.crashed[i] = true;
            }
            host_whole(&r, 0)?;
            r.run(400, false)?;
            r.settled(5)
        },
    );
}

/// A graceful leave is the member's own: n4 leaves, and its process closes it (its endpoint
/// dies) before the view without it is installed. Its co-host n0 stays in the group.
#[test]
fn a_leave_then_closed_endpoint_does_not_remove_the_co_host() {
    check_seeds(
        "a_leave_then_closed_endpoint_does_not_remove_the_co_host",
        3,
        |seed| leave_then_closed_endpoint(seed, true).map(|_| ()),
    );
}

/// The scenario above (`colocated`: with the hosts); returns n4's and n5's next positions when
/// n4 crashed.
fn leave_then_closed_endpoint(seed: u64, colocated: bool) -> Result<(u64, u64), String> {
    let mut r = Run::new(seed, &config(colocated), 10);
    r.run(400, true)?;
    r.groups[4].leave().unwrap();
    r.run(3, true)?;
    let at_crash = (r.apps[4].next, r.apps[5].next);
    r.crash(4);
    until_removed(&mut r, &others(&[4]), &[4], 5000)?;
    r.run(2000, true)?;
    r.run(400, false)?;
    let v = r.groups[1].view().unwrap();
    if !v.contains(NodeId(0)) {
        return Err(format!("n0 was removed with its leaving co-host: {v:?}"));
    }
    r.settled(5)?;
    Ok(at_crash)
}

/// s24 regression (`docs/MEMBERSHIP.md`, fifty-fourth part), seed 10 of the scenario above,
/// with and without the hosts: n4 asks to leave, delivers positions 235 to 238 of store shard
/// 0 ({n4, n5}) and crashes before it wedges, while n5 had delivered up to 234. The leader
/// counted the leaver's missing received counts as 0, so view 0's trim gave shard 0 nothing
/// more: n5 discarded its own message 237, which n4 had delivered. Without the fix this fails
/// (both ways) with "uniform agreement: n5 starts view 1 of subgroup 1 shard 0 at position
/// 237, but position 238 was delivered in view 0" (before that check, the chain check failed
/// once n5 delivered another message at 237). Passes once a leaver without a wedge block
/// counts as failed for the trim.
#[test]
fn regression_a_leaver_that_crashes_before_its_wedge_keeps_what_it_delivered() {
    for colocated in [true, false] {
        let (n4, n5) = leave_then_closed_endpoint(10, colocated)
            .unwrap_or_else(|e| panic!("hosts {colocated}: {e}"));
        // The moment: the leaver had delivered more than the survivor when it crashed.
        assert!(
            n4 > n5,
            "hosts {colocated}: missed the moment: n4 at {n4}, n5 at {n5}"
        );
    }
}

/// Host 0 runs one member of each of three subgroups (n0, n1, n2), three single-member hosts
/// run one each (n3, n4, n5): four hosts, six members.
fn uneven() -> GroupConfig {
    let mut cfg = group_sim::config(6, 6);
    let one = |r: &[usize]| SubgroupPolicy {
        shards: vec![pinned(1, 2, r)],
    };
    cfg.gms.layout = Some(Layout::new(Subgroups::new(vec![
        one(&[0, 3]),
        one(&[1, 4]),
        one(&[2, 5]),
    ])));
    cfg.gms.hosts = vec![ids(&[0, 1, 2])];
    cfg
}

/// The majority counts hosts: host 0 (three of six members) crashes; three of four hosts
/// survive, so the group goes on with n3, n4 and n5 (one member per subgroup), although they
/// are only half the members. Member counting stops every survivor as a minority.
#[test]
fn a_majority_of_hosts_goes_on_without_its_largest_host() {
    check_seeds(
        "a_majority_of_hosts_goes_on_without_its_largest_host",
        2,
        |seed| {
            let mut r = Run::new(seed, &uneven(), 6);
            r.run(400, true)?;
            let before = view_id(&r);
            (0..3).for_each(|i| r.crash(i));
            until_removed(&mut r, &[3, 4, 5], &[0, 1, 2], 5000)?;
            if view_id(&r) != before + 1 {
                return Err(format!("{} view changes", view_id(&r) - before));
            }
            let mid: Vec<u64> = r.apps.iter().map(|a| a.next).collect();
            r.run(1500, true)?;
            r.run(400, false)?;
            r.settled(mid[3].max(mid[4]).max(mid[5]) + 5)
        },
    );
}

/// A partition puts host 0 (three members) on one side and the three single-member hosts on
/// the other: three members each, but one host against three. Host 0's side stops as a
/// minority, the other side goes on (by member counting both sides would stop).
#[test]
fn a_partition_counts_hosts_not_members() {
    check_seeds("a_partition_counts_hosts_not_members", 2, |seed| {
        let mut r = Run::new(seed, &uneven(), 6);
        r.run(400, true)?;
        r.sim.partition(&ids(&[0, 1, 2]), &ids(&[3, 4, 5]));
        until_removed(&mut r, &[3, 4, 5], &[0, 1, 2], 5000)?;
        r.run(2000, true)?;
        r.stopped_for(&[0, 1, 2], "minority")?;
        (0..3).for_each(|i| r.crashed[i] = true);
        r.run(400, false)?;
        r.settled(5)
    });
}

// ---- total restarts with hosts (s25, fifty-seventh part) ----------------------------------

/// The restart suites' absent members' timeout (virtual time; suspicion after 1.5 ms).
const ABSENT: Duration = Duration::from_millis(4);

/// Three hosts `h` = {n`h`, n`h+3`}: subgroup 0 "cache" is one shard of n0, n1, n2, subgroup 1
/// "store" one shard of n3, n4, n5 (1 to 3 members each, so any host keeps both adequate);
/// durable epochs in `base/n<i>`; `colocated`: the hosts in `GmsConfig::hosts`.
fn trio(base: &Path, i: usize, colocated: bool) -> GroupConfig {
    let mut cfg = group_sim::config(6, 6);
    cfg.gms.layout = Some(Layout::new(Subgroups::new(vec![
        SubgroupPolicy {
            shards: vec![pinned(1, 3, &[0, 1, 2])],
        },
        SubgroupPolicy {
            shards: vec![pinned(1, 3, &[3, 4, 5])],
        },
    ])));
    if colocated {
        cfg.gms.hosts = (0..3).map(|h| ids(&[h, h + 3])).collect();
    }
    cfg.gms.restart_absent_timeout = ABSENT;
    cfg.transfer.chunk_size = 256;
    cfg.transfer.window = 4;
    group_sim::durable(cfg, base, i)
}

/// Every node's GMS log bytes now (a crashed node's as at its crash).
fn logs(r: &Run) -> Vec<Vec<u8>> {
    r.groups
        .iter()
        .map(|g| g.gms().log().bytes().to_vec())
        .collect()
}

/// Runs a restarted life until every node of `booted` left restart mode and runs its shard
/// (its replay handed out), or stopped; at most `steps` steps.
fn restart_completes(r: &mut Run, booted: &[usize], steps: usize) -> Result<(), String> {
    for _ in 0..steps {
        r.run(1, true)?;
        let done = booted.iter().all(|&i| {
            let g = &r.groups[i];
            g.stopped().is_some()
                || (g.gms().restarting().is_none()
                    && g.view().is_some()
                    && g.is_active()
                    && g.replay_backlog() == 0)
        });
        if done {
            return Ok(());
        }
    }
    Err(format!(
        "the restart never completed: {}",
        describe(r, booted)
    ))
}

/// Each booted node's view, whom it waits for in restart mode, and why it stopped.
fn describe(r: &Run, nodes: &[usize]) -> String {
    let s: Vec<String> = (nodes.iter())
        .map(|&i| {
            let g = &r.groups[i];
            format!(
                "n{i}: {:?} restarting {:?} rejoined {:?} active {} backlog {} stopped {:?}",
                g.view().map(|v| (v.id, v.members.clone())),
                g.gms().restarting(),
                g.gms().rejoined(),
                g.is_active(),
                g.replay_backlog(),
                g.stopped()
            )
        })
        .collect();
    s.join("; ")
}

/// Host `crash` (if any) crashes mid-stream (both members); a random number of steps later
/// (before, during or after the view change that removes it) every other member stops too. The
/// hosts `up` restart from their logs and durable epochs on a fresh fabric, the others stay
/// down. Checked after every step of both lives by the subgroup model, whose chain values and
/// uniform record carry over: every restarted member's replay agrees position by position with
/// everything any member delivered before (a common prefix), and each shard's restart view
/// starts at or past every position delivered before (nothing delivered lost). The restart
/// completes (a member whose log a view without it went past stops or joins again), the restart
/// view holds each host whole, and the group carries on: every shard settled with new messages.
fn restart_hosts(seed: u64, crash: Option<usize>, up: &[usize]) -> Result<(), String> {
    let tag = format!("hosts-{crash:?}-{up:?}");
    let base = group_sim::scratch_dir("colocated", &tag, seed);
    let cfg = |i| trio(&base, i, true);
    let mut r = Run::life(seed, &vec![Boot::Log(Vec::new()); 6], &cfg, None);
    r.run(300, true)?;
    if let Some(h) = crash {
        r.crash(h);
        r.crash(h + 3);
    }
    let more = 50 + r.sim.random(1500) as usize;
    r.run(more, true)?;
    let before: Vec<u64> = r.apps.iter().map(|a| a.next).collect();
    let bytes = logs(&r);
    let boot: Vec<Boot> = (0..6)
        .map(|i| {
            if up.contains(&(i % 3)) {
                Boot::Log(bytes[i].clone())
            } else {
                Boot::Down
            }
        })
        .collect();
    let booted: Vec<usize> = (0..6).filter(|i| up.contains(&(i % 3))).collect();
    let mut r = Run::life(seed + 1000, &boot, &cfg, Some(r));
    // The newest logged view among the restarted members: the view being restarted.
    let logged = (booted.iter())
        .filter_map(|&i| r.groups[i].view().map(|v| v.id))
        .max()
        .ok_or("no restarted member holds a view")?;
    restart_completes(&mut r, &booted, 8000)?;
    let (&first, restart_view) = (r.views.range(logged + 1..).next())
        .ok_or_else(|| format!("no view after {logged} installed"))?;
    let restart_view = restart_view.clone();
    // Each shard's state came back from the logs: some member of it replayed.
    for s in [0, 1] {
        let replayed = (booted.iter())
            .filter(|&&i| (i < 3) == (s == 0))
            .any(|&i| r.groups[i].stats().replayed > 0);
        if !replayed {
            return Err(format!("no member of subgroup {s} replayed anything"));
        }
    }
    for h in 0..3 {
        let [a, b] = [h, h + 3].map(|n| restart_view.contains(&NodeId(n as u32)));
        if a != b {
            return Err(format!(
                "restart view {first} counts one member of host {h}: {restart_view:?}"
            ));
        }
    }
    r.run(1500, true)?;
    r.run(400, false)?;
    for &i in &booted {
        if r.groups[i].stopped().is_some() {
            r.crashed[i] = true;
        }
    }
    let live = r.live();
    if live.len() < 4 {
        return Err(format!(
            "only {live:?} run after the restart: {}",
            describe(&r, &booted)
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    r.settled(before.iter().copied().max().unwrap_or(0) + 5)
}

/// A host crashes mid-stream, everyone stops, and every host restarts (the crashed host's
/// members from their older logs): nothing delivered is lost, the replays agree.
#[test]
fn a_host_crash_then_a_total_restart_of_every_host_loses_nothing() {
    check_seeds(
        "a_host_crash_then_a_total_restart_of_every_host_loses_nothing",
        3,
        |seed| restart_hosts(seed, Some(seed as usize % 3), &[0, 1, 2]),
    );
}

/// A host crashes mid-stream, everyone stops, and only the two other hosts restart (a
/// majority of whole hosts of view 0, all of the view without the crashed host).
#[test]
fn a_host_crash_then_a_total_restart_of_the_other_hosts_loses_nothing() {
    check_seeds(
        "a_host_crash_then_a_total_restart_of_the_other_hosts_loses_nothing",
        3,
        |seed| {
            let h = seed as usize % 3;
            let up: Vec<usize> = (0..3).filter(|&o| o != h).collect();
            restart_hosts(seed, Some(h), &up)
        },
    );
}

/// Everyone stops mid-stream; two of the three hosts restart (a majority of whole hosts), the
/// third stays down: the restart completes without it.
#[test]
fn a_total_restart_of_a_majority_of_whole_hosts_completes() {
    check_seeds(
        "a_total_restart_of_a_majority_of_whole_hosts_completes",
        3,
        |seed| {
            let h = seed as usize % 3;
            let up: Vec<usize> = (0..3).filter(|&o| o != h).collect();
            restart_hosts(seed, None, &up)
        },
    );
}

/// [`uneven`] with durable epochs in `base/n<i>` and the restart suites' absent timeout;
/// `colocated`: with host 0 in `GmsConfig::hosts` (otherwise six one-member hosts).
fn uneven_durable(base: &Path, i: usize, colocated: bool) -> GroupConfig {
    let mut cfg = uneven();
    if !colocated {
        cfg.gms.hosts = Vec::new();
    }
    cfg.gms.restart_absent_timeout = ABSENT;
    group_sim::durable(cfg, base, i)
}

/// The uneven layout runs, then everyone stops; host 0 (n0, n1, n2) and n3 restart: four of
/// six members, a majority of the members, but two of four hosts. `gone` says what n4 and n5
/// are in the restart: `Boot::Late` (never started: absent, waited for) or `Boot::Down`
/// (crashed: reported failed). Returns the restarted life after `3 * ABSENT`, and every
/// node's GMS log bytes at the stop.
fn minority_of_hosts(
    seed: u64,
    colocated: bool,
    gone: &Boot,
    base: &Path,
) -> Result<(Run, Vec<Vec<u8>>), String> {
    let cfg = |i| uneven_durable(base, i, colocated);
    let mut r = Run::life(seed, &vec![Boot::Log(Vec::new()); 6], &cfg, None);
    r.run(400, true)?;
    let bytes = logs(&r);
    let boot: Vec<Boot> = (0..6)
        .map(|i| {
            if i < 4 {
                Boot::Log(bytes[i].clone())
            } else {
                gone.clone()
            }
        })
        .collect();
    let mut r = Run::life(seed + 1000, &boot, &cfg, Some(r));
    let t0 = r.sim.now();
    while r.sim.now().saturating_since(t0) < ABSENT * 3 {
        r.run(1, true)?;
    }
    Ok((r, bytes))
}

/// Whether the members `nodes` all left restart mode into a view after 0.
fn restarted(r: &Run, nodes: &[usize]) -> bool {
    nodes.iter().all(|&i| {
        let g = &r.groups[i];
        g.gms().restarting().is_none() && g.view().is_some_and(|v| v.id > 0)
    })
}

/// The majority of a restart counts whole hosts: host 0 (three members) and n3 restart, n4
/// and n5 are absent (never started). Four of six members restarted, but only two of four
/// hosts, so the restart waits for them: for three times the absent members' timeout nobody
/// installs a view, stops or counts them out, and each names n4 and n5 as missing (by member
/// counting, the timeout would count them out and the four would restart without them). Then
/// n4 starts: three of four hosts, and the restart completes without n5 (counted out after the
/// timeout), losing nothing.
#[test]
fn a_restart_of_a_minority_of_hosts_holding_a_majority_of_members_waits() {
    check_seeds(
        "a_restart_of_a_minority_of_hosts_holding_a_majority_of_members_waits",
        2,
        |seed| {
            let four = [0, 1, 2, 3];
            let base = group_sim::scratch_dir("colocated", "minority-late", seed);
            let (mut r, bytes) = minority_of_hosts(seed, true, &Boot::Late, &base)?;
            for i in four {
                let g = &r.groups[i];
                let missing = g.gms().restarting();
                if g.stopped().is_some()
                    || g.view().map(|v| v.id) != Some(0)
                    || missing != Some(&ids(&[4, 5])[..])
                {
                    return Err(format!(
                        "a minority of hosts did not wait for n4 and n5: {}",
                        describe(&r, &four)
                    ));
                }
            }
            r.start_late(4, uneven_durable(&base, 4, true), &bytes[4]);
            restart_completes(&mut r, &[0, 1, 2, 3, 4], 8000)?;
            r.run(1500, true)?;
            r.run(400, false)?;
            r.settled(5)?;
            let _ = std::fs::remove_dir_all(&base);
            // The same restart without hosts (six one-member hosts): four of six is a majority,
            // so the timeout counts n4 and n5 out and the four restart without them.
            let base = group_sim::scratch_dir("colocated", "minority-members", seed);
            let (r, _) = minority_of_hosts(seed, false, &Boot::Late, &base)?;
            if !restarted(&r, &four) {
                return Err(format!(
                    "without hosts, four of six members did not restart: {}",
                    describe(&r, &four)
                ));
            }
            let _ = std::fs::remove_dir_all(&base);
            Ok(())
        },
    );
}

/// As above, but n4 and n5 crashed (their peers are told they failed, not absent): host 0 and
/// n3 are two of four hosts with the other two suspected, final in restart mode, so no
/// majority can form in this process and all four stop with `RestartCutOff` ("restart it from
/// its log") without installing or delivering anything.
#[test]
fn a_restart_of_a_minority_of_hosts_whose_other_hosts_crashed_stops() {
    check_seeds(
        "a_restart_of_a_minority_of_hosts_whose_other_hosts_crashed_stops",
        2,
        |seed| {
            let four = [0, 1, 2, 3];
            let base = group_sim::scratch_dir("colocated", "minority-down", seed);
            let (r, _) = minority_of_hosts(seed, true, &Boot::Down, &base)?;
            r.stopped_for(&four, "restart it from its log")?;
            for i in four {
                if r.groups[i].view().map(|v| v.id) != Some(0) || r.apps[i].next != 0 {
                    return Err(format!(
                        "n{i} installed or delivered: {}",
                        describe(&r, &four)
                    ));
                }
            }
            let _ = std::fs::remove_dir_all(&base);
            Ok(())
        },
    );
}

// ---- co-suspicion after the settles' suspicions (s25, fifty-seventh part) -----------------

/// A tap whose node never links one peer (the one its cell names): that peer's
/// `PeerConnected` events are dropped, and it reads as absent with unknown regions, as a
/// member whose link to a new process never comes up.
struct Unlinked(Rc<Cell<Option<NodeId>>>);

impl Tap for Unlinked {
    fn poll(&mut self, inner: &mut SimNode, out: &mut [Event]) -> usize {
        let got = inner.poll(out);
        let mut kept = 0;
        for i in 0..got {
            let e = out[i];
            if !matches!(e, Event::PeerConnected { peer, .. } if Some(peer) == self.0.get()) {
                out[kept] = e;
                kept += 1;
            }
        }
        kept
    }
    fn is_absent(&self, inner: &SimNode, peer: NodeId) -> bool {
        Some(peer) == self.0.get() || inner.is_absent(peer)
    }
    fn remote_region_len(&self, inner: &SimNode, peer: NodeId, id: RegionId) -> Option<usize> {
        (Some(peer) != self.0.get())
            .then(|| inner.remote_region_len(peer, id))
            .flatten()
    }
}

/// Whether member `g` suspects `n` (its table suspects the row and it does not wait for an
/// expected incarnation there).
fn suspects<T: Transport>(g: &Group<T, MemLog>, n: usize) -> bool {
    let sst = g.gms().sst();
    let node = NodeId(n as u32);
    sst.row_of(node).is_some_and(|r| sst.is_suspected(r))
        && g.gms().expected_incarnation(node).is_none()
}

/// The s24 review follow-up of the forty-seventh part, pinned (s25): `Gms::poll` co-suspects a
/// second time after `settle_expected` and `settle_absent`, so a member that one of those
/// suspects takes its co-hosts with it in the same poll, before the round reads the
/// suspicions. Host 4 = {n8, n9} joins while n6's link to n8 never comes up (an [`Unlinked`]
/// endpoint): every member installs a view naming both, and after `expected_link_timeout`
/// (4 ms here) n6 suspects n8 through `settle_absent`. Checked after every poll of every
/// member of the view: it suspects n8 exactly when it suspects n9. The first member to suspect
/// n8 must be n6 (the moment this test is for); then one view change removes both, and every
/// other member ends in it. Fails without the second call: n6 suspects n8 alone at the end of
/// the poll in which its bound ran out.
#[test]
fn a_member_suspected_by_the_absent_bound_takes_its_co_host_in_the_same_poll() {
    check_seeds_reaching(
        "a_member_suspected_by_the_absent_bound_takes_its_co_host_in_the_same_poll",
        2,
        "n6 suspecting n8 first, by its absent bound",
        absent_bound_co_suspicion,
    );
}

fn absent_bound_co_suspicion(seed: u64) -> Result<Moment, String> {
    let mut cfg = config(true);
    cfg.gms.expected_link_timeout = Some(Duration::from_millis(4));
    let layout = Group::<SimNode, MemLog>::layout(&cfg).unwrap();
    let (sim, nodes) =
        Sim::cluster_late(SimConfig::seeded(seed), 10, &layout, &ids(&[8, 9])).unwrap();
    let held: Vec<Rc<Cell<Option<NodeId>>>> = (0..10).map(|_| Rc::new(Cell::new(None))).collect();
    let mut ends: Vec<Option<Tapped<Unlinked>>> = (nodes.into_iter().zip(&held))
        .map(|(inner, h)| {
            Some(Tapped {
                inner,
                tap: Unlinked(h.clone()),
            })
        })
        .collect();
    let mut groups: Vec<Option<Group<Tapped<Unlinked>, MemLog>>> = (0..10)
        .map(|i| {
            (i < 8).then(|| {
                let t = ends[i].take().unwrap();
                Group::new(t, cfg.clone(), MemLog::default(), None).unwrap()
            })
        })
        .collect();
    let mut first: Option<usize> = None;
    let mut ups = Vec::new();
    let mut step = |groups: &mut Vec<Option<Group<Tapped<Unlinked>, MemLog>>>,
                    first: &mut Option<usize>|
     -> Result<(), String> {
        for (i, g) in groups.iter_mut().enumerate() {
            let Some(g) = g else { continue };
            ups.clear();
            g.poll(&mut ups);
            if g.state_wanted() {
                g.provide_state(0, &[0; 16])
                    .map_err(|e| format!("n{i}: {e}"))?;
            }
            let both = g
                .view()
                .is_some_and(|v| v.contains(NodeId(8)) && v.contains(NodeId(9)));
            if i >= 8 || !both || g.stopped().is_some() {
                continue;
            }
            let (s8, s9) = (suspects(g, 8), suspects(g, 9));
            if s8 && first.is_none() {
                *first = Some(i);
            }
            if s8 != s9 {
                return Err(format!(
                    "n{i} ends a poll suspecting n8: {s8}, its co-host n9: {s9}"
                ));
            }
        }
        sim.advance(Duration::from_micros(2));
        Ok(())
    };
    for _ in 0..300 {
        step(&mut groups, &mut first)?;
    }
    held[6].set(Some(NodeId(8)));
    for i in [8, 9] {
        sim.start_node(NodeId(i as u32));
        let t = ends[i].take().unwrap();
        let mut g = Group::new(t, cfg.clone(), MemLog::default(), None).unwrap();
        g.join().map_err(|e| e.to_string())?;
        groups[i] = Some(g);
    }
    let views =
        |groups: &[Option<Group<Tapped<Unlinked>, MemLog>>]| -> Vec<Option<(u64, bool, bool)>> {
            (0..8)
                .map(|i| {
                    let v = groups[i].as_ref()?.view()?;
                    Some((v.id, v.contains(NodeId(8)), v.contains(NodeId(9))))
                })
                .collect()
        };
    let mut named = false;
    let mut seen: std::collections::BTreeMap<u64, (bool, bool)> = Default::default();
    for _ in 0..25_000 {
        step(&mut groups, &mut first)?;
        let now = views(&groups);
        for (id, a, b) in now.iter().flatten() {
            seen.insert(*id, (*a, *b));
        }
        named |= now.iter().all(|v| v.is_some_and(|(_, a, b)| a && b));
        if named && now.iter().all(|v| v.is_some_and(|(_, a, b)| !a && !b)) {
            if let Some((id, _)) = seen.iter().find(|(_, (a, b))| a != b) {
                return Err(format!("view {id} holds one member of host 4: {seen:?}"));
            }
            return Ok(if first == Some(6) {
                Moment::Reached
            } else {
                Moment::Missed
            });
        }
    }
    Err(format!(
        "host 4 was not named and then removed within 50 ms (named: {named}, first to suspect n8: {first:?}): {:?}",
        views(&groups)
    ))
}

#[derive(Clone, Debug)]
enum Fault {
    Crash,
    Isolate,
}

/// Remove host `h` by `fault`; the isolated side is run until it stopped, then counted out.
fn remove_host(r: &mut Run, h: usize, fault: &Fault) -> Result<(), String> {
    let members = host(h);
    let live: Vec<usize> = r
        .live()
        .into_iter()
        .filter(|i| !members.contains(i))
        .collect();
    match fault {
        Fault::Crash => members.iter().for_each(|&i| r.crash(i)),
        Fault::Isolate => {
            let rest: Vec<usize> = (0..10).filter(|i| !members.contains(i)).collect();
            r.sim.partition(&ids(&members), &ids(&rest));
        }
    }
    until_removed(r, &live, &members, 8000)?;
    r.run(2000, true)?;
    for i in members {
        if !r.crashed[i] && r.groups[i].view().is_some() && r.groups[i].stopped().is_none() {
            return Err(format!("isolated n{i} still runs"));
        }
        r.crashed[i] = true;
    }
    Ok(())
}

/// Host `a` fails (crash or isolation), host 4 joins or not, then (only after a join, so a
/// majority stays) host `b` fails; `{a, b}` never both store shard 1's hosts (2 and 3).
fn plan() -> impl Strategy<Value = (u64, usize, Fault, bool, usize, Fault)> {
    let fault = || prop_oneof![Just(Fault::Crash), Just(Fault::Isolate)];
    (
        any::<u64>(),
        0..4usize,
        fault(),
        any::<bool>(),
        0..3usize,
        fault(),
    )
}

fn run_plan(
    seed: u64,
    a: usize,
    fa: &Fault,
    join: bool,
    b: usize,
    fb: &Fault,
) -> Result<(), String> {
    let mut r = Run::new(seed, &config(true), 10);
    r.run(300, true)?;
    remove_host(&mut r, a, fa)?;
    if join {
        r.groups[8].join().unwrap();
        r.groups[9].join().unwrap();
        r.run(6000, true)?;
        // The second failure: one of the hosts left, skipping store shard 1's other host.
        let left: Vec<usize> = (0..4).filter(|&h| h != a && !(a >= 2 && h >= 2)).collect();
        remove_host(&mut r, left[b % left.len()], fb)?;
    }
    r.run(1500, true)?;
    r.run(400, false)?;
    (0..5).try_for_each(|h| host_whole(&r, h))?;
    r.settled(1)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: proptest_cases(6), ..ProptestConfig::default() })]

    /// Random host crashes, isolations and a host join: every check of the model after every
    /// step, every view holding each host whole or not at all, and the survivors settled.
    #[test]
    fn proptest_host_crashes_isolations_and_joins(p in plan()) {
        let (seed, a, fa, join, b, fb) = p;
        run_plan(seed, a, &fa, join, b, &fb).map_err(TestCaseError::fail)?;
    }
}

/// Figures (`cargo nextest run -p squall-membership --test sim_colocated -E
/// 'test(figures)' --run-ignored only --no-capture`): virtual time from a host's crash to the
/// view without it, and view changes taken, with and without co-suspicion (the same seeds and
/// crash; both members at once, and 800 µs apart); registered memory per node and per host.
#[test]
#[ignore = "prints figures; run by hand"]
fn figures_host_crash_and_memory() {
    let seeds = 20;
    for colocated in [true, false] {
        let (mut times, mut changes) = (Vec::new(), Vec::new());
        let (mut apart, mut apart_changes) = (Vec::new(), Vec::new());
        for seed in 0..seeds {
            let mut r = Run::new(seed, &config(colocated), 10);
            r.run(400, true).unwrap();
            let before = view_id(&r);
            r.crash(0);
            r.crash(4);
            let t = until_removed(&mut r, &others(&[0, 4]), &[0, 4], 8000).unwrap();
            times.push(t.as_micros() as u64);
            changes.push(view_id(&r) - before);
            let mut r = Run::new(seed, &config(colocated), 10);
            r.run(400, true).unwrap();
            let before = view_id(&r);
            let t = staggered_crash(&mut r).unwrap();
            apart.push(t.as_micros() as u64);
            apart_changes.push(view_id(&r) - before);
        }
        apart.sort_unstable();
        eprintln!(
            "co-suspicion {colocated}: members dying 800 us apart: mean {} us, median {} us, max {} us from the first death; view changes {:?}",
            apart.iter().sum::<u64>() / seeds,
            apart[apart.len() / 2],
            apart[apart.len() - 1],
            apart_changes
        );
        times.sort_unstable();
        let mean = times.iter().sum::<u64>() / seeds;
        let two = changes.iter().filter(|&&c| c > 1).count();
        eprintln!(
            "co-suspicion {colocated}: crash to view without host 0: mean {mean} us, median {} us, max {} us; {two} of {seeds} seeds took more than one view change",
            times[times.len() / 2],
            times[times.len() - 1]
        );
    }
    let cfg = config(true);
    let bytes = |n: u32| -> usize {
        Group::<SimNode, MemLog>::layout_of(&cfg, NodeId(n))
            .unwrap()
            .iter()
            .map(|s| s.len)
            .sum()
    };
    let anywhere: usize = Group::<SimNode, MemLog>::layout(&cfg)
        .unwrap()
        .iter()
        .map(|s| s.len)
        .sum();
    eprintln!(
        "registered bytes: cache member n0 {}, store member n4 {}, host 0 (both) {}, a member placeable anywhere {anywhere}",
        bytes(0),
        bytes(4),
        bytes(0) + bytes(4)
    );
}
