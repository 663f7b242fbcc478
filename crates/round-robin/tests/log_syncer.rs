//! The durable log's syncer thread (`SyncMode::Thread`, the default): `Log::flush` writes a
//! batch and hands its `fdatasync` to the thread; `Log::durable_mark` reports the batch only
//! once a sync that started after its write returned; the round-robin member publishes as
//! received only what is durable. Each test holds the syncer on a gate it controls
//! (`Log::gate_syncer`, `RoundRobin::gate_log_syncer`: the syncer waits for one message per
//! `fdatasync`), so nothing here depends on timing: while the syncer is held, nothing written
//! after the last sync is reported durable, however long one looks; once released, it is (a
//! generous wall-clock bound on that wait is never reached unless the syncer is stuck).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use common::sim_config;
use squall_ordering::{TotalOrder, Upcall};
use squall_round_robin::log::{self, FsyncPolicy, Log, LogError, LogOptions, Record};
use squall_round_robin::{Config, RoundRobin, StopReason, SyncMode, TrimError};
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("squall-rr-syncer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn record(seq: u64) -> Record {
    Record {
        view: 1,
        seq,
        position: seq,
        sender: NodeId(0),
        payload: vec![seq as u8; 40],
    }
}

/// Polls `f` until it says so (a generous wall-clock bound: the syncer thread is released).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Looks many times that `f` still holds (while the syncer is held it must, however long).
fn still(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..200 {
        assert!(f(), "{what}");
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(20));
    assert!(f(), "{what}");
}

/// The side index's entries of the log at `path`.
fn index_entries(path: &Path) -> usize {
    log::decode_index(&std::fs::read(log::index_path(path)).unwrap()).len()
}

fn open(path: &Path) -> Log {
    let options = LogOptions {
        index_every: 1,
        sync_mode: log::SyncMode::Thread,
        ..LogOptions::new(FsyncPolicy::EveryBatch)
    };
    Log::open_with(path, options).unwrap().0
}

/// A batch is never reported durable before its `fdatasync` returned: with the syncer held,
/// the written batch stays unreported (and its index entry unwritten: entries of synced
/// records only) however often one asks; released, it is reported. Mutation: reporting the
/// mark at `flush` (as the other policies do) fails the first check.
#[test]
fn a_batch_is_not_reported_durable_before_its_sync() {
    let dir = tmpdir("held");
    let path = dir.join("log");
    let mut l = open(&path);
    let gate = l.gate_syncer();
    l.append(&record(0)).unwrap();
    l.append(&record(1)).unwrap();
    l.flush(2).unwrap();
    // Handed over: the syncer writes it (right before its sync), not the caller.
    assert!(
        log::decode(&std::fs::read(&path).unwrap())
            .records
            .is_empty()
    );
    still("the held batch is not durable", || {
        l.durable_mark().unwrap().is_none() && l.sync_pending()
    });
    assert_eq!(index_entries(&path), 0, "no entry before the sync");
    gate.send(true).unwrap();
    eventually("the batch is durable once its sync returned", || {
        l.durable_mark().unwrap() == Some(2)
    });
    assert!(!l.sync_pending());
    assert_eq!(log::decode(&std::fs::read(&path).unwrap()).records.len(), 2);
    assert_eq!(index_entries(&path), 2, "the entries, once synced");
    let entries = log::decode_index(&std::fs::read(log::index_path(&path)).unwrap());
    assert!(entries.iter().all(|e| e.boot == 0), "marked synced");
    std::fs::remove_dir_all(&dir).ok();
}

/// Group commit: one `fdatasync` covers every batch written before it started, and none
/// written after. Batch 1's sync is taken and held; batches 2 and 3 are written meanwhile;
/// released, the first sync reports batch 1 only (2 and 3 came after it started), and the
/// next single sync reports both: three batches, two syncs. Mutation: a syncer that reports
/// the latest request when a sync returns (not the one it started with) reports batch 3
/// after the first sync.
#[test]
fn one_sync_covers_every_batch_written_before_it_started() {
    let dir = tmpdir("group");
    let path = dir.join("log");
    let mut l = open(&path);
    let gate = l.gate_syncer();
    l.append(&record(0)).unwrap();
    l.flush(1).unwrap();
    eventually("the syncer took batch 1", || l.syncer_syncs() == 1);
    l.append(&record(1)).unwrap();
    l.flush(2).unwrap();
    l.append(&record(2)).unwrap();
    l.flush(3).unwrap();
    still("nothing durable while the sync is held", || {
        l.durable_mark().unwrap().is_none()
    });
    gate.send(true).unwrap();
    eventually("a batch durable", || l.durable_mark().unwrap().is_some());
    assert_eq!(
        l.durable_mark().unwrap(),
        Some(1),
        "the first sync covers batch 1 only"
    );
    eventually("the syncer took batches 2 and 3 together", || {
        l.syncer_syncs() == 2
    });
    still(
        "batches written during the first sync wait for the second",
        || l.durable_mark().unwrap() == Some(1),
    );
    gate.send(true).unwrap();
    eventually("batches 2 and 3 durable", || {
        l.durable_mark().unwrap() == Some(3)
    });
    assert_eq!(l.syncer_syncs(), 2, "three batches, two syncs");
    // A flush with nothing new is durable with the batches before it.
    l.flush(4).unwrap();
    assert_eq!(l.durable_mark().unwrap(), Some(4));
    std::fs::remove_dir_all(&dir).ok();
}

/// `Log::sync` waits for the syncer (the wedge's and a compaction's wait), and a failed sync
/// is the log's typed error from then on. Mutation: `sync` not waiting returns before the
/// gate is released (the helper thread's message then finds the receiver still waiting; the
/// mark check fails).
#[test]
fn sync_waits_for_the_syncer_and_a_failure_sticks() {
    let dir = tmpdir("wait");
    let path = dir.join("log");
    let mut l = open(&path);
    let gate = l.gate_syncer();
    l.append(&record(0)).unwrap();
    l.flush(1).unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        gate.send(true).unwrap();
        gate
    });
    l.sync().unwrap();
    assert_eq!(l.durable_mark().unwrap(), Some(1));
    let gate = release.join().unwrap();
    l.append(&record(1)).unwrap();
    l.flush(2).unwrap();
    gate.send(false).unwrap();
    let err = loop {
        match l.durable_mark() {
            Ok(m) => assert_eq!(m, Some(1), "the failed batch is never durable"),
            Err(e) => break e,
        }
        std::thread::yield_now();
    };
    assert!(matches!(err, LogError::Io { .. }), "{err}");
    assert!(err.to_string().contains("injected"), "{err}");
    assert!(
        l.sync().is_err() && l.flush(3).is_err(),
        "the failure sticks"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// s26: an `fdatasync` on the calling thread that fails sticks too, as the syncer thread's
/// does (above): after a failed sync the kernel may have dropped the pages it could not
/// write, so a later sync that succeeds proves nothing about them. The failure is injected
/// (`Log::fail_inline_sync`) on both inline paths: `flush`'s own sync under
/// `SyncMode::Inline` (`EveryBatch`, and `EveryRecords(2)` when the count is reached) and
/// `sync_written` under `SyncMode::Thread` (`EveryRecords(1000)`, `Never`). After it the
/// synced mark stays at the last sync that returned, and every later call that could report
/// more (a flush with or without new records, `sync_written`, `sync`, `start_sync`,
/// `durable_mark`) is an error. Mutation: without `Log::fail` in `Log::sync_inline`, it
/// fails ("Inline EveryBatch: a flush with nothing new after the failure"; with the inline
/// cases dropped, "Thread EveryRecords(1000): a flush with nothing new after the failure").
#[test]
fn an_fdatasync_on_the_calling_thread_that_fails_sticks_too() {
    let dir = tmpdir("inline-fail");
    let path = dir.join("log");
    let cases = [
        (log::SyncMode::Inline, FsyncPolicy::EveryBatch),
        (log::SyncMode::Inline, FsyncPolicy::EveryRecords(2)),
        (log::SyncMode::Thread, FsyncPolicy::EveryRecords(1000)),
        (log::SyncMode::Thread, FsyncPolicy::Never),
    ];
    for (mode, policy) in cases {
        let case = format!("{mode:?} {policy:?}");
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(log::index_path(&path));
        let options = LogOptions {
            index_every: 1,
            sync_mode: mode,
            ..LogOptions::new(policy)
        };
        let mut l = Log::open_with(&path, options).unwrap().0;
        l.append(&record(0)).unwrap();
        l.flush(1).unwrap();
        l.sync_written().unwrap();
        assert_eq!(l.synced_mark(), Some(1), "{case}");
        l.fail_inline_sync();
        l.append(&record(1)).unwrap();
        l.append(&record(2)).unwrap();
        let err = if mode == log::SyncMode::Inline {
            // The policy's own sync of this batch, on the calling thread.
            l.flush(2).unwrap_err()
        } else {
            l.flush(2).unwrap();
            l.sync_written().unwrap_err()
        };
        assert!(matches!(err, LogError::Io { .. }), "{case}: {err}");
        assert!(err.to_string().contains("injected"), "{case}: {err}");
        assert!(
            l.flush(3).is_err(),
            "{case}: a flush with nothing new after the failure"
        );
        assert!(
            l.sync_written().is_err(),
            "{case}: sync_written after the failure"
        );
        assert!(l.sync().is_err(), "{case}: sync after the failure");
        assert!(l.durable_mark().is_err(), "{case}: durable_mark");
        if policy != FsyncPolicy::EveryBatch {
            assert!(l.start_sync().is_err(), "{case}: start_sync");
        }
        l.append(&record(3)).unwrap();
        assert!(l.flush(4).is_err(), "{case}: a flush after the failure");
        assert_eq!(l.synced_mark(), Some(1), "{case}: synced after the failure");
        let err = l.sync_written().unwrap_err().to_string();
        assert!(err.contains("failed earlier"), "{case}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Dropping a log whose syncer is held (a sync requested, not started) joins the thread
/// without syncing: nothing was reported durable; the syncer writes the bytes handed over
/// (not synced), so the file holds what was appended, as before the syncer, and a reopen
/// finds it. Mutation: exiting without that write loses the record.
#[test]
fn dropping_the_log_joins_a_held_syncer() {
    let dir = tmpdir("drop");
    let path = dir.join("log");
    let mut l = open(&path);
    let _gate = l.gate_syncer();
    l.append(&record(0)).unwrap();
    l.flush(1).unwrap();
    eventually("the syncer took the batch", || l.syncer_syncs() == 1);
    drop(l); // returns: the held syncer sees the stop
    let (_, rec) = Log::open(&path, FsyncPolicy::Never).unwrap();
    assert_eq!(rec.last.map(|r| r.seq), Some(0));
    std::fs::remove_dir_all(&dir).ok();
}

struct Pair {
    sim: Sim,
    rr: Vec<RoundRobin<SimNode>>,
    /// n1's syncer gate (n0's syncs freely).
    gate: Sender<bool>,
    dir: PathBuf,
}

type Ups = Vec<Upcall<squall_ordering::Delivery>>;

impl Pair {
    /// n0 submits `n` messages and polls until its own log made them durable; n1 polls once
    /// and has written them (its syncer held). Returns both members' upcalls so far.
    fn written_at_n1(&mut self, n: u64) -> (Ups, Ups) {
        for i in 0..n {
            self.rr[0].submit(&common::encode(0, i, 30)).unwrap();
        }
        let (mut up0, mut up1) = (Vec::new(), Vec::new());
        eventually("n0's batch durable", || {
            self.rr[0].poll(&mut up0);
            self.sim.run_until_idle(10_000);
            self.rr[0].logged_seq() == n
        });
        self.rr[1].poll(&mut up1);
        assert_eq!(self.rr[1].written_seq(), n, "n1 wrote the batch");
        (up0, up1)
    }
}

/// Two members on the simulator, n0 the only sender, durable logs with syncer threads, n1's
/// held on a gate.
fn pair(tag: &str) -> Pair {
    pair_with(tag, FsyncPolicy::EveryBatch)
}

/// [`pair`] with the logs' policy `fsync`.
fn pair_with(tag: &str, fsync: FsyncPolicy) -> Pair {
    let dir = tmpdir(tag);
    let base = Config {
        senders: vec![NodeId(0)],
        window: 5,
        log_sync: SyncMode::Thread,
        ..sim_config(2)
    };
    let cfgs = common::durable_members(&base, &dir, 2, fsync);
    let layout = RoundRobin::<SimNode>::layout(&cfgs[0]).unwrap();
    let (sim, nodes) = Sim::cluster(SimConfig::seeded(3), 2, &layout).unwrap();
    let mut rr: Vec<RoundRobin<SimNode>> = nodes
        .into_iter()
        .zip(cfgs)
        .map(|(t, c)| RoundRobin::new(t, c).unwrap())
        .collect();
    let gate = rr[1].gate_log_syncer().unwrap();
    Pair { sim, rr, gate, dir }
}

fn delivered(up: &[Upcall<squall_ordering::Delivery>]) -> usize {
    up.iter()
        .filter(|u| matches!(u, Upcall::Deliver(_)))
        .count()
}

/// A member counts a batch as received only once its sync returned: with n1's syncer held,
/// n1 has logged (written) the batch but publishes nothing, and n0 — whose own log is durable
/// — delivers nothing, however long both poll; released, n1 publishes the batch and both
/// deliver it with `Durable`. Mutation: publishing the written frontier (`written_seq`) at
/// flush fails the first check.
#[test]
fn a_member_counts_a_batch_received_only_once_its_sync_returned() {
    let mut p = pair("rr-held");
    let (mut up0, mut up1) = p.written_at_n1(5);
    still("n1's batch is not counted before its sync", || {
        p.rr[1].poll(&mut up1);
        p.rr[0].poll(&mut up0);
        p.sim.run_until_idle(10_000);
        p.rr[1].logged_seq() == 0
            && p.rr[1].published_received() == vec![0]
            && delivered(&up0) == 0
            && delivered(&up1) == 0
    });
    p.gate.send(true).unwrap();
    eventually("both deliver the batch", || {
        p.rr[1].poll(&mut up1);
        p.rr[0].poll(&mut up0);
        p.sim.run_until_idle(10_000);
        delivered(&up0) == 5 && delivered(&up1) == 5
    });
    assert_eq!(p.rr[1].published_received(), vec![5]);
    assert!(up0.contains(&Upcall::Durable(4)) && up1.contains(&Upcall::Durable(4)));
    let s = p.rr[1].stats();
    assert_eq!((s.log_batches, s.log_syncs), (1, 1));
    std::fs::remove_dir_all(&p.dir).ok();
}

fn durable(up: &[Upcall<squall_ordering::Delivery>]) -> Vec<u64> {
    up.iter()
        .filter_map(|u| match u {
            Upcall::Durable(p) => Some(*p),
            _ => None,
        })
        .collect()
}

/// Under `EveryRecords(k)` a record counts as received once written, so both members
/// deliver n0's two messages while n1's sync of them (due: two records) is held; but
/// `Durable` waits for every member's sync: n0 synced both (`synced() == Some(2)`), n1 none,
/// and neither reports anything durable however long both poll. Released, n1 publishes them
/// synced and both report `Durable(1)`. Mutation: reporting `Durable` at delivery (as before
/// s21) fails the first check.
#[test]
fn every_records_reports_durable_only_once_every_member_synced() {
    let mut p = pair_with("rr-records", FsyncPolicy::EveryRecords(2));
    let (mut up0, mut up1) = p.written_at_n1(2);
    eventually("both deliver, n0 synced", || {
        p.rr[1].poll(&mut up1);
        p.rr[0].poll(&mut up0);
        p.sim.run_until_idle(10_000);
        delivered(&up0) == 2 && delivered(&up1) == 2 && p.rr[0].synced() == Some(2)
    });
    still("nothing durable before n1's sync", || {
        p.rr[1].poll(&mut up1);
        p.rr[0].poll(&mut up0);
        p.sim.run_until_idle(10_000);
        durable(&up0).is_empty() && durable(&up1).is_empty() && p.rr[1].synced() == Some(0)
    });
    p.gate.send(true).unwrap();
    eventually("both report the two durable", || {
        p.rr[1].poll(&mut up1);
        p.rr[0].poll(&mut up0);
        p.sim.run_until_idle(10_000);
        durable(&up0) == vec![1] && durable(&up1) == vec![1]
    });
    assert_eq!(p.rr[1].synced(), Some(2));
    std::fs::remove_dir_all(&p.dir).ok();
}

/// s23 (docs/MEMBERSHIP.md, forty-fifth part): under `EveryRecords(k)` with `k` far above
/// the traffic nobody syncs by count, so in a quiet group nothing would ever be reported
/// durable; `want_synced` asks every member to sync past a position. n0 asks: its own poll
/// starts its sync and n1's poll starts n1's, each on its log's syncer thread (n1's is held:
/// its polls return and it publishes nothing synced, however long both poll); released,
/// both report the three messages durable, and nobody syncs again for it. Mutations: not
/// answering the `rr_sync_wanted` column in the poll fails the first wait; syncing inline in
/// `Log::start_sync` fails the check that n0's sync ran on its syncer thread (`log_syncs`).
#[test]
fn a_sync_wanted_by_one_member_runs_on_every_members_syncer_thread() {
    let mut p = pair_with("rr-wanted", FsyncPolicy::EveryRecords(1000));
    let (mut up0, mut up1) = p.written_at_n1(3);
    eventually("both deliver", || {
        p.rr[1].poll(&mut up1);
        p.rr[0].poll(&mut up0);
        p.sim.run_until_idle(10_000);
        delivered(&up0) == 3 && delivered(&up1) == 3
    });
    assert_eq!((p.rr[0].synced(), p.rr[1].synced()), (Some(0), Some(0)));
    p.rr[0].want_synced(3);
    eventually("n0 syncs on its syncer thread", || {
        p.rr[1].poll(&mut up1);
        p.rr[0].poll(&mut up0);
        p.sim.run_until_idle(10_000);
        p.rr[0].synced() == Some(3)
    });
    assert_eq!(p.rr[0].stats().log_syncs, 1);
    still("n1's sync is held on its syncer thread", || {
        p.rr[1].poll(&mut up1);
        p.rr[0].poll(&mut up0);
        p.sim.run_until_idle(10_000);
        p.rr[1].synced() == Some(0) && durable(&up0).is_empty() && durable(&up1).is_empty()
    });
    p.gate.send(true).unwrap();
    eventually("both report the three durable", || {
        p.rr[1].poll(&mut up1);
        p.rr[0].poll(&mut up0);
        p.sim.run_until_idle(10_000);
        durable(&up0) == vec![2] && durable(&up1) == vec![2]
    });
    assert_eq!(p.rr[1].synced(), Some(3));
    assert_eq!(p.rr[0].synced_everywhere(), Some(3));
    for _ in 0..50 {
        p.rr[1].poll(&mut up1);
        p.rr[0].poll(&mut up0);
        p.sim.run_until_idle(10_000);
    }
    assert_eq!(
        (p.rr[0].stats().log_syncs, p.rr[1].stats().log_syncs),
        (1, 1)
    );
    std::fs::remove_dir_all(&p.dir).ok();
}

/// The wedge waits for the sync of what it logs, so the counts it reports (and the trim
/// bound) are durable: with n1's syncer held and then let go (the gate's sender dropped),
/// `wedge` returns the whole batch; a trim past what is durable is refused.
#[test]
fn the_wedge_reports_only_durable_counts() {
    let mut p = pair("rr-wedge");
    let (_, mut up1) = p.written_at_n1(3);
    assert_eq!(p.rr[1].logged_seq(), 0);
    let gate = p.gate.clone();
    drop(std::mem::replace(&mut p.gate, std::sync::mpsc::channel().0));
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        drop(gate);
    });
    assert_eq!(p.rr[1].wedge(), vec![3], "the wedge waited for the sync");
    release.join().unwrap();
    assert_eq!(p.rr[1].logged_seq(), 3);
    assert!(p.rr[1].deliver_up_to(&[4], &mut up1).is_err());
    p.rr[1].deliver_up_to(&[3], &mut up1).unwrap();
    assert_eq!(delivered(&up1), 3);
    std::fs::remove_dir_all(&p.dir).ok();
}

/// A failed sync on the syncer thread stops the epoch with the log's typed error, and what
/// it held is never counted: n1 wedges with `StopReason::Log`, and its wedge reports only
/// what was durable before.
#[test]
fn a_failed_sync_stops_the_epoch() {
    let mut p = pair("rr-fail");
    let (_, mut up1) = p.written_at_n1(1);
    p.gate.send(false).unwrap();
    eventually("n1 stops", || {
        p.rr[1].poll(&mut up1);
        up1.contains(&Upcall::Wedged)
    });
    assert!(
        matches!(
            p.rr[1].stopped(),
            Some(StopReason::Log(LogError::Io { .. }))
        ),
        "{:?}",
        p.rr[1].stopped()
    );
    assert_eq!(p.rr[1].published_received(), vec![0]);
    assert_eq!(p.rr[1].wedge(), vec![0], "nothing durable is reported");
    // Received (and written) but never durable: a trim may not count it.
    assert!(
        matches!(
            p.rr[1].deliver_up_to(&[1], &mut up1),
            Err(TrimError::Beyond { .. })
        ),
        "a trim past the durable prefix is refused"
    );
    assert_eq!(delivered(&up1), 0);
    std::fs::remove_dir_all(&p.dir).ok();
}

/// An epoch that wedged itself (a failure) before its batch's sync returned still reports
/// that batch once the sync returns: `wedge` waits for it (publishing nothing), as when the
/// sync ran inside the poll. Mutation: skipping that wait for a wedged epoch reports `[0]`.
#[test]
fn the_wedge_of_an_epoch_stopped_by_a_failure_waits_for_the_sync_in_flight() {
    let mut p = pair("rr-wedged");
    let (_, mut up1) = p.written_at_n1(3);
    assert_eq!(p.rr[1].logged_seq(), 0);
    p.rr[1].suspect_known(NodeId(0));
    eventually("n1 wedges on the failure", || {
        p.rr[1].poll(&mut up1);
        up1.contains(&Upcall::Wedged)
    });
    assert_eq!(p.rr[1].published_received(), vec![0]);
    drop(std::mem::replace(&mut p.gate, std::sync::mpsc::channel().0));
    assert_eq!(p.rr[1].wedge(), vec![3], "the sync in flight counts");
    assert_eq!(
        p.rr[1].published_received(),
        vec![0],
        "nothing published after the wedge"
    );
    std::fs::remove_dir_all(&p.dir).ok();
}
