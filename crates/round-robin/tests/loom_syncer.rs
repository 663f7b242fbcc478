//! Loom model check of the log's syncer hand-off (`squall_round_robin::log::syncer`): the very
//! `Handoff` bookkeeping the syncer thread runs, under loom's mutex and condition variable, in
//! the loop `run_syncer` runs (take the latest request under the lock, sync with no lock
//! held, finish, notify), against an appender that writes each batch and then requests its
//! sync, and finally waits for everything to be durable (`Log::sync`'s wait) and stops the
//! syncer (`Log`'s drop). Checked in every interleaving:
//!
//! - *never durable before its sync*: whenever `done` reaches `n`, a sync that started after
//!   batch `n` was written has returned (the model's "file" is the count of batches written;
//!   a sync covers what the file held when it started);
//! - *no lost wake-up*: the appender's wait ends with every batch durable, and the syncer
//!   exits once stopped (loom reports a deadlock otherwise);
//! - *group commit*: there are never more syncs than batches.
//!
//! Mutation: `Handoff::finish` marking every request done (`self.done = self.requested`, so
//! counting a batch written during the sync) fails the first check.
//!
//! s25: a second model adds a compaction's hold of the writers (`Handoff::hold`/`release`);
//! s26: released after the rename with the reports fenced (`Handoff::release_fenced`,
//! `unfence`).
#![allow(clippy::unwrap_used)]

use std::sync::atomic::Ordering;

use loom::sync::atomic::AtomicU64;
use loom::sync::{Arc, Condvar, Mutex};
use squall_round_robin::log::syncer::{Handoff, Next};

/// `run_syncer`'s wait for work: the latest sync request, taken under the lock (waiting on
/// `changed` while there is none); `None` once stopped.
fn next_sync(handoff: &Mutex<Handoff>, changed: &Condvar) -> Option<u64> {
    let mut h = handoff.lock().unwrap();
    loop {
        match h.take() {
            Next::Stop => return None,
            Next::Sync(n) => return Some(n),
            Next::Wait => h = changed.wait(h).unwrap(),
        }
    }
}

struct Shared {
    handoff: Mutex<Handoff>,
    changed: Condvar,
    /// The model's file: how many batches were written.
    written: AtomicU64,
    /// The most batches a returned sync covered.
    covered: AtomicU64,
}

fn syncer(s: &Shared) {
    loop {
        let Some(n) = next_sync(&s.handoff, &s.changed) else {
            return;
        };
        // The sync: covers what the file holds when it starts.
        let snapshot = s.written.load(Ordering::SeqCst);
        s.covered.fetch_max(snapshot, Ordering::SeqCst);
        {
            let mut h = s.handoff.lock().unwrap();
            assert!(h.finish(n, Ok(())));
            assert!(
                s.covered.load(Ordering::SeqCst) >= h.done(),
                "batch {} durable, but no sync covered it",
                h.done()
            );
        }
        s.changed.notify_all();
    }
}

#[test]
fn the_syncer_hand_off_reports_only_synced_batches_and_loses_no_wakeup() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(4);
    model.check(|| {
        let s = Arc::new(Shared {
            handoff: Mutex::new(Handoff::default()),
            changed: Condvar::new(),
            written: AtomicU64::new(0),
            covered: AtomicU64::new(0),
        });
        let t = {
            let s = Arc::clone(&s);
            loom::thread::spawn(move || syncer(&s))
        };
        const BATCHES: u64 = 2;
        for n in 1..=BATCHES {
            // Write the batch, then request its sync (`Log::flush`).
            s.written.store(n, Ordering::SeqCst);
            s.handoff.lock().unwrap().request(n);
            s.changed.notify_all();
            // What a poll sees (`Log::durable_mark`): never more than a sync covered.
            let done = s.handoff.lock().unwrap().done();
            assert!(done <= s.covered.load(Ordering::SeqCst));
        }
        // `Log::sync`'s wait.
        {
            let mut h = s.handoff.lock().unwrap();
            while !h.settled() {
                h = s.changed.wait(h).unwrap();
            }
            assert_eq!(h.done(), BATCHES);
            assert!(h.syncs() <= BATCHES);
            h.stop();
        }
        s.changed.notify_all();
        t.join().unwrap();
    });
}

/// s25: a compaction's final phase holds the writers (`Handoff::hold`, `Waiter::hold` in the
/// log): the holder sets the hold and waits until no sync is in progress; from then until its
/// release the syncer starts no write or sync (the model's file, written by the syncer as
/// under `EveryBatch`, does not change while the holder copies its tail), the appender's
/// requests still count, and after the release every batch becomes durable (no lost
/// wake-up: the release notifies the syncer, the syncer's finish the appender).
///
/// s26: the holder releases the writers after its rename with the reports fenced
/// (`Handoff::release_fenced`: the new file's name is not durable yet), then unfences (the
/// directory synced, the log adopting the file). While fenced, no sync that finished is
/// reported past the requests done at the release ("reported past the fence"), whatever the
/// interleaving; after the unfence every batch is reported.
///
/// Mutation: `Handoff::take` ignoring the hold fails the first check ("written while held");
/// `Handoff::idle` reporting idle with a sync in progress fails it too; `Handoff::reported`
/// ignoring the fence fails "reported past the fence".
#[test]
fn a_held_syncer_writes_nothing_until_released_and_loses_no_wakeup() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(|| {
        let s = Arc::new(Held {
            handoff: Mutex::new(Handoff::default()),
            changed: Condvar::new(),
            file: AtomicU64::new(0),
            fence: AtomicU64::new(0),
        });
        let syncer = {
            let s = Arc::clone(&s);
            loom::thread::spawn(move || held_syncer(&s))
        };
        let holder = {
            let s = Arc::clone(&s);
            loom::thread::spawn(move || {
                let mut h = s.handoff.lock().unwrap();
                h.hold();
                while !h.idle() {
                    h = s.changed.wait(h).unwrap();
                }
                drop(h);
                // The final phase: the tail copied with no lock held; nothing writes.
                let tail = s.file.load(Ordering::SeqCst);
                loom::thread::yield_now();
                assert_eq!(s.file.load(Ordering::SeqCst), tail, "written while held");
                {
                    let mut h = s.handoff.lock().unwrap();
                    s.fence.store(h.done(), Ordering::SeqCst);
                    h.release_fenced();
                }
                s.changed.notify_all();
                loom::thread::yield_now();
                s.handoff.lock().unwrap().unfence();
                s.changed.notify_all();
            })
        };
        const BATCHES: u64 = 2;
        for n in 1..=BATCHES {
            // `Log::flush` under `EveryBatch`: the bytes handed over, the sync requested.
            s.handoff.lock().unwrap().request(n);
            s.changed.notify_all();
        }
        holder.join().unwrap();
        {
            let mut h = s.handoff.lock().unwrap();
            while !h.settled() {
                h = s.changed.wait(h).unwrap();
            }
            assert_eq!(h.done(), BATCHES);
            assert_eq!(h.reported(), BATCHES, "reported after the unfence");
            assert_eq!(s.file.load(Ordering::SeqCst), BATCHES);
            h.stop();
        }
        s.changed.notify_all();
        syncer.join().unwrap();
    });
}

struct Held {
    handoff: Mutex<Handoff>,
    changed: Condvar,
    /// The model's file: batches the syncer wrote.
    file: AtomicU64,
    /// The requests done when the holder released the writers fenced.
    fence: AtomicU64,
}

/// `run_syncer`'s loop, writing the batches handed over before each sync.
fn held_syncer(s: &Held) {
    loop {
        let Some(n) = next_sync(&s.handoff, &s.changed) else {
            return;
        };
        // The write, with no lock held (the bytes taken with the request).
        s.file.fetch_max(n, Ordering::SeqCst);
        {
            let mut h = s.handoff.lock().unwrap();
            assert!(h.finish(n, Ok(())));
            if h.fenced() {
                assert!(
                    h.reported() <= s.fence.load(Ordering::SeqCst),
                    "reported past the fence"
                );
            }
        }
        s.changed.notify_all();
    }
}
