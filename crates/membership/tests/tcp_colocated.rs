//! Co-located hosts (`GmsConfig::hosts`, docs/MEMBERSHIP.md forty-seventh and fifty-seventh
//! parts) across real processes over TCP loopback: six members, each its own OS process (the
//! member program of `tests/mp/mod.rs`), in two subgroups of one shard each, "cache" = {0, 1,
//! 2} and "store" = {3, 4, 5}, each member pinned to its subgroup; three hosts {h, h + 3} in
//! the configuration. Every member submits a paced stream of messages into its own shard.
//!
//! - Both processes of host 0 are killed with SIGKILL at once mid-stream: the four others must
//!   install exactly one new view, view 1 = {1, 2, 4, 5} (the whole host out in one view
//!   change), after the same number of deliveries per shard, and keep delivering in it.
//! - With durable epochs every process is killed at once mid-stream and all six restart from
//!   their directories as new processes: per shard, the restarted members replay the same
//!   sequence, everything delivered before the kill is a prefix of it, and the shard carries on.
//!
//! Each run's checks are `mp::check_run` and `mp::check_restart`, applied per subgroup: the
//! other subgroup's members' reports are masked (blank), since a member delivers only its own
//! shard's messages.
#![allow(clippy::unwrap_used)]

mod mp;

use std::collections::BTreeSet;
use std::time::Duration;

use mp::{Cluster, Place, Report, Settings, check_restart, check_run, now_us};

/// Entry point of the member processes this binary spawns; does nothing when run by hand.
#[test]
#[ignore = "entry point of the member processes that the other tests spawn"]
fn member_child() {
    mp::child_main();
}

/// Six members in two subgroups on three hosts (see the module docs), on `base`'s timing.
fn colocated(base: Settings) -> Settings {
    Settings {
        members: 6,
        universe: 6,
        colocated: true,
        ..base
    }
}

/// `reports` with every member outside `keep` replaced by a blank report (nothing delivered,
/// no view), so that the one-shard checks see one subgroup.
fn mask(reports: &[Report], keep: &[usize]) -> Vec<Report> {
    (reports.iter().enumerate())
        .map(|(k, r)| {
            if keep.contains(&k) {
                r.clone()
            } else {
                Report::default()
            }
        })
        .collect()
}

/// Whether each member of `groups` delivered at least `n` messages since position `from(k)`,
/// some from every member of its subgroup.
fn shard_traffic(
    r: &[Report],
    groups: &[Vec<usize>],
    n: u64,
    from: impl Fn(&Report) -> Option<u64>,
) -> bool {
    groups.iter().all(|g| {
        g.iter().all(|&k| {
            let Some(at) = from(&r[k]) else {
                return false;
            };
            let new = (r[k].delivered.iter()).filter(|d| d.position >= at);
            let senders: BTreeSet<u32> = new.clone().map(|d| d.sender).collect();
            new.count() as u64 >= n && g.iter().all(|&s| senders.contains(&(s as u32)))
        })
    })
}

/// Both processes of host 0 (members 0 and 3, one in each subgroup) are SIGKILLed at once
/// mid-stream: the others install exactly view 1 without both, at one position per shard, and
/// carry on; per shard the sequences agree, nothing discarded is delivered, and every sender's
/// stream is gap-free.
#[test]
fn both_processes_of_a_host_killed_mid_stream_the_rest_install_one_view_without_both() {
    host_kill(&[0, 3]);
}

/// Only member 0's process is SIGKILLed; member 3, its co-host in the configuration, runs on
/// and stays reachable. Co-suspicion counts host 0 failed as a whole: the same single view
/// change removes both, and member 3, cut off by the others, stops without installing it.
#[test]
fn one_process_of_a_host_killed_mid_stream_its_co_host_is_removed_with_it_and_stops() {
    host_kill(&[0]);
}

/// Kills the members `killed` of host 0 = {0, 3} at once mid-stream and checks the run (see
/// the two tests above).
fn host_kill(killed: &[usize]) {
    let s = colocated(Settings::default());
    let groups = s.subgroups();
    let mut c = Cluster::start("member_child", &vec![Place::loopback(); 6], s);
    c.wait_for(
        "deliveries from every sender of its subgroup at every member",
        Duration::from_secs(60),
        |r| shard_traffic(r, &groups, 200, |_| Some(0)),
    );
    let t0 = c.kill_all(killed);
    let survivors = [1, 2, 4, 5];
    c.wait_for(
        "view 1 and deliveries in it at every survivor, host 0 out",
        Duration::from_secs(40),
        |r| {
            survivors.iter().all(|&k| r[k].delivered_after(1) >= 200)
                && [0, 3]
                    .iter()
                    .all(|&k| killed.contains(&k) || r[k].stop.is_some())
        },
    );
    let reports = c.finish();
    for g in &groups {
        let lost: Vec<usize> = (0..6)
            .filter(|k| !g.contains(k) || [0, 3].contains(k))
            .collect();
        check_run(&mask(&reports, g), &lost, &[1, 2, 4, 5], 200);
    }
    let first = (survivors.iter())
        .filter_map(|&k| {
            let r = &reports[k];
            r.suspected_at(0).into_iter().chain(r.suspected_at(3)).min()
        })
        .min()
        .expect("a survivor suspected host 0");
    let last = (survivors.iter())
        .map(|&k| reports[k].view(1).unwrap().at)
        .max()
        .unwrap();
    println!(
        "host 0: members {killed:?} SIGKILLed: first suspicion after {} us, view 1 everywhere {} us after the kill{}",
        first.saturating_sub(t0),
        last.saturating_sub(t0),
        reports[3]
            .stop
            .as_ref()
            .map_or(String::new(), |(_, why)| format!(
                "; member 3 stopped: {why}"
            ))
    );
}

/// Durable epochs: every process is SIGKILLed at once mid-stream and all six restart from their
/// directories: one restart view with all six; per subgroup the restarted members replay the
/// same sequence, which holds everything any of them delivered before, then deliver new
/// messages (some of every member's new life) identically.
#[test]
fn a_total_kill_of_co_located_hosts_restarts_every_subgroup_from_its_logs() {
    let s = colocated(Settings::durable());
    let groups = s.subgroups();
    let all: Vec<usize> = (0..6).collect();
    let mut c = Cluster::start("member_child", &vec![Place::loopback(); 6], s);
    c.wait_for(
        "deliveries from every sender of its subgroup at every member",
        Duration::from_secs(60),
        |r| shard_traffic(r, &groups, 200, |_| Some(0)),
    );
    let t_kill = c.kill_all(&all);
    // Let the reader threads take the killed members' last lines.
    std::thread::sleep(Duration::from_millis(100));
    let before = c.reports();
    let t_restart = now_us();
    c.restart(&all);
    c.wait_for(
        "every restarted member's replay, restart view and new deliveries from its subgroup",
        Duration::from_secs(30),
        |r| shard_traffic(r, &groups, 100, |r| r.views.first().map(|v| v.before)),
    );
    let after = c.finish();
    for g in &groups {
        check_restart(&mask(&before, g), &mask(&after, g), g, g, 100);
    }
    let view_us = (all.iter())
        .map(|&k| after[k].views[0].at)
        .max()
        .unwrap()
        .saturating_sub(t_restart);
    println!(
        "total kill of three co-located hosts: replayed {} (cache) and {} (store) messages; restart view everywhere {view_us} us after the respawn ({} us after the kill)",
        after[0].replayed,
        after[3].replayed,
        view_us + t_restart.saturating_sub(t_kill)
    );
}
