//! Real processes over TCP loopback: clients run a random KV workload while one replica is
//! killed with SIGKILL; the recorded history must be linearizable. On CAS-Paxos the surviving
//! majority keeps serving; on round-robin (a fixed view) the group wedges, and every operation
//! after the kill fails rather than returning anything wrong; on the membership backend (the
//! same round-robin under virtual-synchrony views) the survivors install a view without the
//! killed replica and keep serving.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Procs, Recorder, client, wait_serving};
use squall_kv::Ordering;

fn kill_mid_stream(ordering: Ordering, victim: usize) -> (Recorder, usize, usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut procs = Procs::loopback(ordering, 3, &format!("kill-{ordering}"));
    rt.block_on(wait_serving(&procs));
    let rec = Recorder::new();
    let until = Instant::now() + Duration::from_secs(5);
    let addrs = procs.cfg.client_addrs();
    let tasks: Vec<_> = (0..6)
        .map(|c| rt.spawn(client(addrs.clone(), c, 4, until, rec.clone())))
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let before = rec.completed();
    procs.kill(victim);
    let killed_at = rec.start.elapsed();
    for t in tasks {
        rt.block_on(t).unwrap();
    }
    let after = rec.completed_after(killed_at + Duration::from_millis(1500));
    if let Err(e) = rec.check() {
        for i in 0..3 {
            eprintln!("--- replica {i}\n{}", procs.log(i));
        }
        panic!("{ordering}: not linearizable: {e}");
    }
    let unknown: Vec<u64> = rec
        .ops
        .lock()
        .unwrap()
        .iter()
        .filter(|o| o.ret.is_none())
        .map(|o| o.call / 1_000_000)
        .collect();
    eprintln!(
        "{ordering}: {} operations recorded, {before} completed before the kill at {killed_at:?}, {after} completed well after it; {} outcomes unknown (called at ms {:?}…)",
        rec.ops.lock().unwrap().len(),
        unknown.len(),
        &unknown[..unknown.len().min(12)]
    );
    (rec, before, after)
}

#[test]
fn cas_paxos_kill_a_follower() {
    let (_, before, after) = kill_mid_stream(Ordering::CasPaxos, 2);
    assert!(before > 50, "only {before} operations before the kill");
    assert!(
        after > 20,
        "the majority served only {after} operations well after the kill"
    );
}

#[test]
fn cas_paxos_kill_the_leader() {
    // Replica 0 is the initial leader (lowest id with a moving heartbeat).
    let (_, before, after) = kill_mid_stream(Ordering::CasPaxos, 0);
    assert!(before > 50, "only {before} operations before the kill");
    assert!(
        after > 20,
        "only {after} operations completed after the new leader took over"
    );
}

#[test]
fn round_robin_kill_a_replica() {
    let (rec, before, after) = kill_mid_stream(Ordering::RoundRobin, 1);
    assert!(before > 50, "only {before} operations before the kill");
    assert_eq!(after, 0, "a wedged fixed view must not complete operations");
    let unknown = rec
        .ops
        .lock()
        .unwrap()
        .iter()
        .filter(|o| o.ret.is_none())
        .count();
    assert!(
        unknown > 0,
        "no operation failed after the kill: the test saw no wedge"
    );
}

#[test]
fn membership_kill_a_replica_the_rest_install_a_view_and_serve() {
    let (_, before, after) = kill_mid_stream(Ordering::Membership, 1);
    assert!(before > 50, "only {before} operations before the kill");
    assert!(
        after > 20,
        "the survivors served only {after} operations well after the kill"
    );
}

#[test]
fn membership_kill_the_leader_the_rest_install_a_view_and_serve() {
    // Replica 0 leads view 0 (the lowest-ranked member).
    let (_, before, after) = kill_mid_stream(Ordering::Membership, 0);
    assert!(before > 50, "only {before} operations before the kill");
    assert!(
        after > 20,
        "the survivors served only {after} operations well after the kill"
    );
}

/// `squall-kv serve` exits by itself, with code 3 and one line saying why and what to do, when
/// its replica stops for good: here replica 2 is left in a minority (the two others are
/// killed), its group stops, and so must its process, within a bound.
#[test]
fn membership_a_replica_left_in_a_minority_exits_3_by_itself_naming_why() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut procs = Procs::loopback(Ordering::Membership, 3, "minority-exit");
    rt.block_on(wait_serving(&procs));
    procs.kill(0);
    procs.kill(1);
    let killed = Instant::now();
    // Generous for a loaded machine: the stop takes the transport's failure report (or its
    // heartbeat timeout, 600 ms); the runtime then wakes `serve` at once.
    let bound = Duration::from_secs(20);
    let status = procs.wait_exit(2, bound);
    let took = killed.elapsed();
    let log = procs.log(2);
    let Some(status) = status else {
        panic!("replica 2 still runs {bound:?} after its peers were killed; its log:\n{log}");
    };
    eprintln!("replica 2 exited ({status}) {took:?} after its peers were killed");
    assert_eq!(status.code(), Some(3), "replica 2's exit; its log:\n{log}");
    let line = log
        .lines()
        .find(|l| l.starts_with("squall-kv: replica 2 stopped: "))
        .unwrap_or_else(|| panic!("no one-line reason on stderr; the log:\n{log}"));
    assert!(
        line.contains("this replica's backend stopped: minority")
            && line.contains("start it again with --rejoin"),
        "the line names the group's reason and what to do: {line}"
    );
    eprintln!("its last line: {line}");
}
