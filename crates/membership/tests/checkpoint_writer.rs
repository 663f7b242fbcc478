//! The checkpoint writer thread (`CheckpointWriter::Thread`, the default): `Group::checkpoint`
//! hands the file work to a thread and a later poll records it, so the polling thread never
//! waits on the disk. The group runs on the simulator (deterministic), the writer on its own
//! thread; each test holds the writer on a gate it controls (`gate_checkpoint_writer`), so
//! nothing here depends on timing: while the writer is held, polls return and the checkpoint
//! stays in flight; once released, polls finish it — or abandon it (a view change), or it
//! fails (its directory is gone), or the group is dropped with it in flight (cancelled).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::{MemLog, Record};
use squall_membership::snapshot::CheckpointWriter;
use squall_membership::snapshot::{CheckpointError, Checkpointed};
use squall_ordering::TotalOrder;
use squall_round_robin::{FsyncPolicy, Mode, SyncMode};
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

mod group_sim;

const N: usize = 3;

struct Cluster {
    base: PathBuf,
    sim: Sim,
    groups: Vec<Option<Group<SimNode, MemLog>>>,
}

impl Cluster {
    fn start(tag: &str) -> Cluster {
        Cluster::start_with(tag, |_| {})
    }

    /// [`start`](Cluster::start) with `tweak` applied to every member's config.
    fn start_with(tag: &str, tweak: impl Fn(&mut GroupConfig)) -> Cluster {
        let base = group_sim::scratch_dir("ckpt-writer", tag, 0);
        let cfg = |i| {
            let mut cfg = group_sim::durable(group_sim::config(N, N), &base, i);
            tweak(&mut cfg);
            cfg
        };
        let layout = Group::<SimNode, MemLog>::layout(&cfg(0)).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(7), N, &layout).unwrap();
        let groups = nodes
            .into_iter()
            .enumerate()
            .map(|(i, t)| Some(Group::new(t, cfg(i), MemLog::default(), None).unwrap()))
            .collect();
        let mut c = Cluster { base, sim, groups };
        // Some deliveries, so that a checkpoint has something to cover.
        for k in 0..200u32 {
            c.step(k % 7 == 0);
        }
        assert!(c.g(0).next_position() > 0);
        c
    }

    fn g(&mut self, i: usize) -> &mut Group<SimNode, MemLog> {
        self.groups[i].as_mut().unwrap()
    }

    /// One poll of every live member (each submitting if `submit`), then simulated time.
    fn step(&mut self, submit: bool) {
        for (i, g) in self.groups.iter_mut().enumerate() {
            let Some(g) = g else { continue };
            if submit && g.view().is_some() {
                let _ = g.submit(&[i as u8; 8]);
            }
            g.poll(&mut Vec::new());
        }
        self.sim.advance(Duration::from_micros(5));
    }

    /// Steps until member `i` reports how its checkpoint ended (the writer runs on its own
    /// thread: a generous wall-clock bound, never reached unless the writer is stuck).
    fn outcome(&mut self, i: usize) -> Result<Checkpointed, CheckpointError> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.step(false);
            if let Some(o) = self.g(i).take_checkpoint_outcome() {
                return o;
            }
            assert!(Instant::now() < deadline, "the writer never finished");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Starts a checkpoint of member `i` at its next position (returned).
    fn start_checkpoint(&mut self, i: usize) -> u64 {
        let at = self.g(i).next_position();
        assert_eq!(
            self.g(i).checkpoint(at, vec![5u8; 64]).unwrap(),
            Checkpointed::Started { position: at }
        );
        at
    }

    fn dir(&self, i: usize) -> PathBuf {
        match &group_sim::durable(group_sim::config(N, N), &self.base, i)
            .epoch
            .mode
        {
            Mode::Durable { path, .. } => path.clone(),
            _ => unreachable!("durable"),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.groups.clear();
        std::fs::remove_dir_all(&self.base).ok();
    }
}

/// The snapshot files (temporary ones included) in `dir`.
fn snapshots(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("snapshot-"))
        .collect();
    out.sort();
    out
}

/// The file the last `Record::Snapshot` of member `i`'s membership log names.
fn recorded(g: &Group<SimNode, MemLog>) -> Option<String> {
    match MemLog::open(g.gms().log().bytes().to_vec())
        .1
        .last_snapshot()
    {
        Some(Record::Snapshot { file, .. }) => Some(file.clone()),
        _ => None,
    }
}

#[test]
fn polls_return_while_the_writer_is_held_and_a_later_poll_records_the_checkpoint() {
    let mut c = Cluster::start("held");
    let gate = c.g(0).gate_checkpoint_writer();
    let at = c.g(0).next_position();
    assert_eq!(
        c.g(0).checkpoint(at, vec![5u8; 4096]).unwrap(),
        Checkpointed::Started { position: at }
    );
    // The writer is held: the group keeps running (every poll returns, deliveries go on),
    // nothing is written or recorded, and a second checkpoint is refused.
    let before = c.g(1).next_position();
    for k in 0..300u32 {
        c.step(k % 5 == 0);
    }
    assert!(
        c.g(1).next_position() > before,
        "the group delivered while member 0's writer was held"
    );
    let dir = c.dir(0);
    assert!(snapshots(&dir).is_empty(), "{:?}", snapshots(&dir));
    assert_eq!(c.g(0).checkpoint_in_flight(), Some(at));
    assert!(c.g(0).take_checkpoint_outcome().is_none());
    assert!(recorded(c.g(0)).is_none());
    let later = c.g(0).next_position();
    assert!(matches!(
        c.g(0).checkpoint(later, vec![6u8; 16]),
        Err(CheckpointError::InFlight { position }) if position == at
    ));
    // Released: a later poll records it and reports it once.
    gate.send(()).unwrap();
    let Checkpointed::Written { position, file, .. } = c.outcome(0).unwrap() else {
        panic!("not written");
    };
    assert_eq!(position, at);
    assert_eq!(recorded(c.g(0)), Some(file.clone()));
    assert_eq!(snapshots(&dir), vec![file.clone()]);
    let snap = squall_membership::snapshot::read(&dir, &file, 1 << 20).unwrap();
    assert_eq!((snap.position, snap.state), (at, vec![5u8; 4096]));
    assert_eq!(c.g(0).checkpoint_in_flight(), None);
    assert_eq!(c.g(0).stats().checkpoints, 1);
    // The next one (ungated) replaces it.
    c.start_checkpoint(0);
    let Checkpointed::Written { file: second, .. } = c.outcome(0).unwrap() else {
        panic!("not written");
    };
    assert_eq!(snapshots(&dir), vec![second.clone()]);
    assert_eq!(recorded(c.g(0)), Some(second));
}

#[test]
fn a_view_change_while_the_file_is_written_abandons_the_checkpoint() {
    let mut c = Cluster::start("view-change");
    let gate = c.g(0).gate_checkpoint_writer();
    let at = c.start_checkpoint(0);
    // Member 2 crashes; the others install view 1 while member 0's writer is held.
    c.sim.crash(NodeId(2));
    c.groups[2] = None;
    for _ in 0..20_000 {
        c.step(false);
        if c.g(0).view().is_some_and(|v| v.id > 0) {
            break;
        }
    }
    assert!(c.g(0).view().is_some_and(|v| v.id > 0), "no view change");
    gate.send(()).unwrap();
    assert!(matches!(
        c.outcome(0),
        Err(CheckpointError::Abandoned { position, .. }) if position == at
    ));
    // Nothing recorded, nothing left behind.
    let dir = c.dir(0);
    assert!(recorded(c.g(0)).is_none());
    assert!(snapshots(&dir).is_empty(), "{:?}", snapshots(&dir));
    // A checkpoint in the new view is taken.
    for k in 0..100u32 {
        c.step(k % 5 == 0);
    }
    let next = c.start_checkpoint(0);
    assert!(matches!(
        c.outcome(0),
        Ok(Checkpointed::Written { position, .. }) if position == next
    ));
}

#[test]
fn a_writer_failure_surfaces_as_the_checkpoints_outcome() {
    let mut c = Cluster::start("failure");
    let gate = c.g(0).gate_checkpoint_writer();
    c.start_checkpoint(0);
    // The directory disappears under the writer: its temporary file cannot be created.
    let dir = c.dir(0);
    let away = dir.with_extension("away");
    std::fs::rename(&dir, &away).unwrap();
    gate.send(()).unwrap();
    let outcome = c.outcome(0);
    std::fs::rename(&away, &dir).unwrap();
    assert!(
        matches!(outcome, Err(CheckpointError::Snapshot(_))),
        "{outcome:?}"
    );
    assert!(recorded(c.g(0)).is_none());
    // The next one is taken.
    c.start_checkpoint(0);
    assert!(matches!(c.outcome(0), Ok(Checkpointed::Written { .. })));
}

#[test]
fn dropping_the_group_with_a_checkpoint_in_flight_leaves_no_file_and_no_record() {
    // Dropped while the writer waits: the write is cancelled.
    let mut c = Cluster::start("drop-held");
    let gate = c.g(0).gate_checkpoint_writer();
    c.start_checkpoint(0);
    let dir = c.dir(0);
    let log = c.g(0).gms().log().bytes().to_vec();
    c.groups[0] = None;
    drop(gate);
    assert!(snapshots(&dir).is_empty(), "{:?}", snapshots(&dir));
    assert!(MemLog::open(log).1.last_snapshot().is_none());
    // Dropped after the file was renamed into place but before a poll recorded it: the
    // file is removed.
    let mut c = Cluster::start("drop-written");
    c.start_checkpoint(0);
    let dir = c.dir(0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while snapshots(&dir).iter().all(|n| n.ends_with(".tmp")) {
        assert!(Instant::now() < deadline, "the writer never wrote");
        std::thread::sleep(Duration::from_millis(1));
    }
    let log = c.g(0).gms().log().bytes().to_vec();
    c.groups[0] = None;
    assert!(snapshots(&dir).is_empty(), "{:?}", snapshots(&dir));
    assert!(MemLog::open(log).1.last_snapshot().is_none());
}

/// `checkpoint_with`: the group runs the application's encoder on its writer thread, after
/// the gate, while the application goes on (here: its state changes after every step); the
/// file holds exactly what the encoder's capture held at the checkpoint's position.
#[test]
fn an_encoder_runs_on_the_writer_thread_and_the_file_holds_its_capture() {
    let mut c = Cluster::start("encoder");
    let gate = c.g(0).gate_checkpoint_writer();
    let at = c.g(0).next_position();
    // The application's state: one byte per delivery so far (a model of it), captured now.
    let mut app: Vec<u8> = (0..at).map(|p| p as u8).collect();
    let capture = std::sync::Arc::new(app.clone());
    let ran_on = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (captured, ran) = (
        std::sync::Arc::clone(&capture),
        std::sync::Arc::clone(&ran_on),
    );
    assert_eq!(
        c.g(0)
            .checkpoint_with(
                at,
                Box::new(move |out: &mut Vec<u8>| {
                    *ran.lock().unwrap() = std::thread::current().name().map(str::to_string);
                    out.extend_from_slice(&captured);
                    Ok(())
                }),
            )
            .unwrap(),
        Checkpointed::Started { position: at }
    );
    // Held: the application applies later deliveries; the encoder has not run.
    for k in 0..300u32 {
        c.step(k % 5 == 0);
        let next = c.g(0).next_position();
        app.extend((app.len() as u64..next).map(|p| p as u8));
    }
    assert!(
        app.len() as u64 > at,
        "member 0 delivered while its writer was held"
    );
    assert!(
        ran_on.lock().unwrap().is_none(),
        "the encoder ran before the gate opened"
    );
    assert!(snapshots(&c.dir(0)).is_empty());
    gate.send(()).unwrap();
    let Checkpointed::Written { position, file, .. } = c.outcome(0).unwrap() else {
        panic!("not written");
    };
    assert_eq!(position, at);
    assert_eq!(
        ran_on.lock().unwrap().as_deref(),
        Some("squall-ckpt-0"),
        "the encoder ran on the writer thread"
    );
    let snap = squall_membership::snapshot::read(&c.dir(0), &file, 1 << 20).unwrap();
    assert_eq!(snap.position, at);
    assert_eq!(
        snap.state,
        &app[..at as usize],
        "the state at the checkpoint's position"
    );
    assert_eq!(recorded(c.g(0)), Some(file));
}

/// An encoder's state above `max_state_bytes`, or an encoder that fails, is refused through
/// the outcome (its length is known only once encoded): nothing written, nothing recorded;
/// the next checkpoint is taken.
#[test]
fn an_encoders_oversized_or_failed_state_is_refused_through_the_outcome() {
    let max = 1 << 16;
    let mut c = Cluster::start_with("encoder-refused", |cfg| cfg.transfer.max_state_bytes = max);
    let at = c.g(0).next_position();
    c.g(0)
        .checkpoint_with(
            at,
            Box::new(move |out: &mut Vec<u8>| {
                out.resize(max + 1, 7);
                Ok(())
            }),
        )
        .unwrap();
    let outcome = c.outcome(0);
    assert!(
        matches!(outcome, Err(CheckpointError::TooLarge { len, .. }) if len == max as u64 + 1),
        "{outcome:?}"
    );
    let at = c.g(0).next_position();
    c.g(0)
        .checkpoint_with(
            at,
            Box::new(|_: &mut Vec<u8>| Err(std::io::Error::other("the store is gone"))),
        )
        .unwrap();
    let outcome = c.outcome(0);
    assert!(
        matches!(&outcome, Err(CheckpointError::Encode(e)) if e.to_string().contains("gone")),
        "{outcome:?}"
    );
    assert!(snapshots(&c.dir(0)).is_empty());
    assert!(recorded(c.g(0)).is_none());
    c.start_checkpoint(0);
    assert!(matches!(c.outcome(0), Ok(Checkpointed::Written { .. })));
}

/// Under `FsyncPolicy::EveryRecords(k)` with `k` far above the run's traffic (no member
/// syncs by count), the inline checkpoint writer, and the epoch logs' syncs on `SyncMode`
/// `sync`, for a deterministic run.
fn every_records(tag: &str, sync: SyncMode) -> Cluster {
    Cluster::start_with(tag, |cfg| {
        if let Mode::Durable { fsync, .. } = &mut cfg.epoch.mode {
            *fsync = FsyncPolicy::EveryRecords(10_000);
        }
        cfg.epoch.log_sync = sync;
        cfg.checkpoint_writer = CheckpointWriter::Inline;
    })
}

/// What member `i`'s epoch log synced (`rr_synced`, the epoch's numbering).
fn synced(c: &mut Cluster, i: usize) -> u64 {
    c.g(i).epoch().and_then(|e| e.synced()).unwrap_or(0)
}

/// Finding 10 (docs/MEMBERSHIP.md, thirty-sixth part): under `FsyncPolicy::EveryRecords` a
/// checkpoint's record waits until every member of the view synced its epoch log past the
/// checkpoint's position, so a total restart after a power loss never cuts inside the state
/// it holds. Member 0's file is written (inline) at once, but while member 2 does not poll
/// (so does not answer the request to sync) nothing is recorded; once it polls, the record
/// comes.
#[test]
fn under_every_records_a_checkpoint_is_recorded_once_every_member_synced_past_it() {
    let mut c = every_records("every-records", SyncMode::Inline);
    let at = c.start_checkpoint(0);
    let dir = c.dir(0);
    assert_eq!(snapshots(&dir).len(), 1, "{:?}", snapshots(&dir));
    // Member 2 misses 100 polls (0.5 ms of simulated time: well inside the suspicion
    // timeout).
    let two = c.groups[2].take();
    for _ in 0..100 {
        c.step(false);
    }
    c.groups[2] = two;
    assert!(
        c.g(0).take_checkpoint_outcome().is_none(),
        "recorded before every member synced past {at}"
    );
    assert_eq!(c.g(0).checkpoint_in_flight(), Some(at));
    assert!(recorded(c.g(0)).is_none());
    assert!(synced(&mut c, 0) >= at && synced(&mut c, 1) >= at);
    assert!(synced(&mut c, 2) < at);
    assert!(matches!(
        c.g(0).checkpoint(at, vec![6u8; 16]),
        Err(CheckpointError::InFlight { position }) if position == at
    ));
    let Checkpointed::Written { position, file, .. } = c.outcome(0).unwrap() else {
        panic!("not written");
    };
    assert_eq!(position, at);
    assert_eq!(recorded(c.g(0)), Some(file));
    assert!(synced(&mut c, 2) >= at);
}

/// The forty-fifth part's first finding (docs/MEMBERSHIP.md, s23): under `EveryRecords(k)`
/// a checkpoint in a quiet group (no traffic after it) waited for the other members' next
/// sync, which never came (they sync every `k` records). The member now asks every member
/// to sync past its position (the `rr_sync_wanted` word), so with no traffic at all the
/// record is written and the log compacted within a few polls (deterministic: inline
/// writer, inline syncs, the simulator).
#[test]
fn under_every_records_a_checkpoint_in_a_quiet_group_is_recorded_within_a_few_polls() {
    let mut c = every_records("quiet", SyncMode::Inline);
    // The group goes quiet: what was submitted is delivered everywhere.
    for _ in 0..200 {
        c.step(false);
    }
    let next = c.g(0).next_position();
    assert!((1..N).all(|i| c.g(i).next_position() == next));
    let at = c.start_checkpoint(0);
    assert!(
        (0..N).all(|i| synced(&mut c, i) < at),
        "a member synced by count"
    );
    let mut polls = 0;
    let outcome = loop {
        c.step(false);
        polls += 1;
        if let Some(o) = c.g(0).take_checkpoint_outcome() {
            break o;
        }
        assert!(
            polls < 20,
            "no record after {polls} polls without traffic (synced: {:?})",
            (0..N).map(|i| synced(&mut c, i)).collect::<Vec<_>>()
        );
    };
    let Checkpointed::Written { position, file, .. } = outcome.unwrap() else {
        panic!("not written");
    };
    assert_eq!(position, at);
    assert_eq!(recorded(c.g(0)), Some(file));
    assert!(
        c.g(0).stats().log_bytes_compacted > 0,
        "the epoch log was not compacted"
    );
    assert!((0..N).all(|i| synced(&mut c, i) >= at));
    // Nothing more is asked for: the others took no checkpoint, and nobody syncs again.
    let before: Vec<u64> = (0..N).map(|i| synced(&mut c, i)).collect();
    for _ in 0..50 {
        c.step(false);
    }
    assert_eq!(
        (0..N).map(|i| synced(&mut c, i)).collect::<Vec<_>>(),
        before
    );
    println!("recorded after {polls} polls");
}

/// The forty-fifth part's second change (s23): with the epoch logs' syncer thread (the
/// default `SyncMode::Thread`) the checkpointing member's own sync runs there, not on the
/// polling thread. Member 0's syncer is held on its test gate: its polls return, the others
/// sync and publish, and the record waits for member 0's own sync; released, it comes.
/// (Inline on the polling thread, as before s23, the record would come while the gate is
/// held: the gate holds the syncer thread only.)
#[test]
fn under_every_records_the_checkpointing_members_own_sync_runs_on_its_syncer_thread() {
    let mut c = every_records("own-sync-thread", SyncMode::Thread);
    for _ in 0..200 {
        c.step(false);
    }
    let gate = c.g(0).gate_epoch_log_syncer().unwrap();
    let at = c.start_checkpoint(0);
    // The others' syncs run on their own syncer threads: wall-clock bounded.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(synced(&mut c, 1) >= at && synced(&mut c, 2) >= at) {
        c.step(false);
        assert!(Instant::now() < deadline, "the other members never synced");
        std::thread::sleep(Duration::from_millis(1));
    }
    for _ in 0..100 {
        c.step(false);
    }
    assert!(
        c.g(0).take_checkpoint_outcome().is_none(),
        "recorded while member 0's syncer thread was held: its own sync ran elsewhere"
    );
    assert_eq!(c.g(0).checkpoint_in_flight(), Some(at));
    assert!(synced(&mut c, 0) < at);
    drop(gate); // passes every later sync
    let Checkpointed::Written { position, .. } = c.outcome(0).unwrap() else {
        panic!("not written");
    };
    assert_eq!(position, at);
    assert!(synced(&mut c, 0) >= at);
    assert!(c.g(0).epoch().unwrap().stats().log_syncs >= 1);
}

/// The figure of the forty-fifth part (docs/MEMBERSHIP.md, s23): the longest poll turn of
/// the checkpointing member around a checkpoint under `EveryRecords(10_000)`, with its epoch
/// log's syncs inline (`SyncMode::Inline`: the wait's own sync on the polling thread, as
/// before s23) and on the syncer thread (`SyncMode::Thread`, the default), in one run, real
/// files (the temporary directory), the default (thread) checkpoint writer. Rounds alternate
/// between the two clusters; each round delivers some traffic (unsynced: nobody reaches the
/// count), lets the group go quiet, checkpoints member 0 and times every poll of member 0
/// until the outcome: the polls while the checkpoint waits, and the poll that records it
/// (which compacts the epoch log, on the polling thread in both modes). Ignored (timing):
/// `cargo nextest run -p squall-membership --test checkpoint_writer --run-ignored only
/// --no-capture -E 'test(poll_turn)'` (`SQUALL_CKPT_POLL_ROUNDS`, default 20).
#[test]
#[ignore = "a timing figure, run by hand"]
fn poll_turn_around_a_checkpoint_inline_and_on_the_syncer_thread() {
    let rounds: usize = std::env::var("SQUALL_CKPT_POLL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let build = |tag: &str, sync: SyncMode| {
        Cluster::start_with(tag, |cfg| {
            if let Mode::Durable { fsync, .. } = &mut cfg.epoch.mode {
                *fsync = FsyncPolicy::EveryRecords(10_000);
            }
            cfg.epoch.log_sync = sync;
        })
    };
    let mut clusters = [
        ("inline", build("turn-inline", SyncMode::Inline)),
        ("thread", build("turn-thread", SyncMode::Thread)),
    ];
    // Per mode: each round's longest waiting poll and its recording poll (µs).
    let mut waits: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    let mut records: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    let mut last = [0u64; 2];
    for _ in 0..rounds {
        for (m, (name, c)) in clusters.iter_mut().enumerate() {
            // Some traffic, delivered past the last checkpoint (since s24 the compaction after
            // it runs on its thread, and member 0 logs nothing until its swap).
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut k = 0u32;
            while k < 40 || c.g(0).next_position() <= last[m] {
                c.step(k % 2 == 0);
                k += 1;
                assert!(Instant::now() < deadline, "{name}: no deliveries");
                if k >= 40 {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            for _ in 0..40 {
                c.step(false);
            }
            last[m] = c.start_checkpoint(0);
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut longest = 0u64;
            loop {
                let t = Instant::now();
                c.g(0).poll(&mut Vec::new());
                let us = t.elapsed().as_micros() as u64;
                if let Some(o) = c.g(0).take_checkpoint_outcome() {
                    assert!(
                        matches!(o, Ok(Checkpointed::Written { .. })),
                        "{name}: {o:?}"
                    );
                    records[m].push(us);
                    break;
                }
                longest = longest.max(us);
                for i in 1..N {
                    c.g(i).poll(&mut Vec::new());
                }
                c.sim.advance(Duration::from_micros(5));
                assert!(Instant::now() < deadline, "{name}: no outcome");
                std::thread::sleep(Duration::from_micros(100));
            }
            waits[m].push(longest);
        }
    }
    let stats = |v: &mut Vec<u64>| {
        v.sort_unstable();
        (v[v.len() / 2], v[v.len() - 1])
    };
    for (m, (name, _)) in clusters.iter().enumerate() {
        let (wm, wx) = stats(&mut waits[m]);
        let (rm, rx) = stats(&mut records[m]);
        println!(
            "{name}: {rounds} checkpoints; longest poll while waiting: median {wm} µs, max {wx} µs; recording poll: median {rm} µs, max {rx} µs"
        );
    }
}

/// The epoch log of view 0 of member `i`.
fn epoch_log(c: &Cluster, i: usize) -> PathBuf {
    group_sim::durable(group_sim::config(N, N), &c.base, i)
        .epoch_log_of(0, 0)
        .unwrap()
}

/// Steps (wall-clock bound: the compaction runs on its own thread) until `done` holds.
fn step_until(c: &mut Cluster, what: &str, mut done: impl FnMut(&mut Cluster) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(c) {
        c.step(false);
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// s24: under `CheckpointWriter::Thread` (the default) the epoch log's compaction after a
/// checkpoint runs on the log's compaction thread, not in the poll that records the
/// checkpoint. With that thread held on its gate the checkpoint is `Written`, the log file is
/// untouched (no copy, no rename: none of the compaction's syncs ran in the poll) and
/// `log_bytes_compacted` stays 0 over 100 more polls; released, a later poll sees the
/// swap: the counter moves and the file is the compacted one. Mutation: compacting inline in
/// `record_checkpoint` (as `CheckpointWriter::Inline`): fails at once ("compacted in the
/// recording poll").
#[test]
fn the_recording_poll_leaves_the_compaction_to_its_thread() {
    let mut c = Cluster::start("compaction-thread");
    let log = epoch_log(&c, 0);
    let hold = c.g(0).gate_epoch_log_compaction().unwrap();
    let at = c.start_checkpoint(0);
    let len = std::fs::metadata(&log).unwrap().len();
    let Checkpointed::Written { position, .. } = c.outcome(0).unwrap() else {
        panic!("not written");
    };
    assert_eq!(position, at);
    assert_eq!(
        c.g(0).stats().log_bytes_compacted,
        0,
        "compacted in the recording poll"
    );
    // Polls go on returning (member 0's log takes its records at the swap: deliveries wait).
    for k in 0..100u32 {
        c.step(k % 5 == 0);
    }
    assert_eq!(c.g(0).stats().log_bytes_compacted, 0);
    assert!(
        std::fs::metadata(&log).unwrap().len() >= len,
        "the log was replaced"
    );
    assert!(c.g(0).stopped().is_none());
    drop(hold);
    step_until(&mut c, "the swap seen", |c| {
        c.g(0).stats().log_bytes_compacted > 0
    });
    let mut reader = squall_round_robin::log::Log::reader(&log, 4096).unwrap();
    let first = reader.next_record().unwrap().unwrap();
    assert_eq!(
        first.position, at,
        "the compacted log starts at the checkpoint"
    );
    // Deliveries go on into the compacted log.
    let before = c.g(0).next_position();
    for k in 0..100u32 {
        c.step(k % 5 == 0);
    }
    assert!(c.g(0).next_position() > before);
    assert!(c.g(0).stopped().is_none());
}

/// s24: `sim_compaction_failure.rs`'s fault (a directory at `<log>.compact`, so the
/// compaction's `open` fails) under `CheckpointWriter::Thread` and the log's threads: the
/// checkpoint is `Written`, and a later poll, which takes the failed compaction's outcome,
/// stops the member with the same message ("compacting the epoch log of view 0 to the
/// checkpoint at P"); the log is not replaced. Mutation: the thread's error dropped in
/// `take_compaction` (as `Ok(None)`): fails ("never: member 0 stops").
#[test]
fn a_failed_compaction_on_its_thread_stops_the_member_with_the_same_message() {
    let mut c = Cluster::start("compaction-thread-fails");
    let log = epoch_log(&c, 0);
    std::fs::create_dir_all(squall_round_robin::log::compact_tmp_path(&log)).unwrap();
    let len = std::fs::metadata(&log).unwrap().len();
    let at = c.start_checkpoint(0);
    let Checkpointed::Written { position, .. } = c.outcome(0).unwrap() else {
        panic!("not written");
    };
    assert_eq!(position, at);
    step_until(&mut c, "member 0 stops", |c| c.g(0).stopped().is_some());
    let why = c.g(0).stopped().unwrap().to_string();
    let want = format!("compacting the epoch log of view 0 to the checkpoint at {position}");
    assert!(why.contains(&want), "stopped with {why:?}, not {want:?}");
    assert!(
        std::fs::metadata(&log).unwrap().len() >= len,
        "the log shrank"
    );
    assert_eq!(c.g(0).stats().log_bytes_compacted, 0);
}
