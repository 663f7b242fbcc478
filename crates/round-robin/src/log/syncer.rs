//! The log's syncer thread ([`SyncMode::Thread`](super::SyncMode::Thread)): the `fdatasync`s of
//! a [`Log`](super::Log) run here, off the thread that appends, with group commit.
//!
//! The hand-off is a [`Handoff`] (pure bookkeeping, checked by the loom test
//! `tests/loom_syncer.rs`) under one mutex, with one condition variable for both directions:
//!
//! - the appending thread *writes* a batch to the file, then [`requests`](Handoff::request)
//!   sync number `n` (numbers only grow); it never waits, except in
//!   [`Log::sync`](super::Log::sync) (a compaction, a wedge);
//! - the syncer takes the latest request ([`Handoff::take`]: everything requested so far,
//!   so every batch written before that point), calls `fdatasync` with no lock held, and
//!   [`finishes`](Handoff::finish) it: `done` becomes that number, or the error is kept (and
//!   the syncer stops: every later query of the log returns it);
//! - then it wakes the log's driver (the transport's [`Waker`]), whose next poll finds `done`
//!   advanced and counts the batches up to it as durable.
//!
//! One `fdatasync` thus covers every batch written before it started (group commit): while
//! one runs, later batches pile up and the next one covers them all. A batch is reported
//! durable only once a sync that *started after it was written* has returned: `request` follows
//! the batch's `write`, and `take` reads the requests under the lock before the sync starts.

use std::fs::File;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use squall_transport::Waker;

/// What the syncer does next ([`Handoff::take`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Sync the file: every request up to this number is covered once the sync returns.
    Sync(u64),
    /// Nothing requested since the last sync: wait.
    Wait,
    /// The log is being dropped (or the syncer failed): exit.
    Stop,
}

/// The bookkeeping of the hand-off between the appending thread and the syncer, kept under
/// the syncer's mutex. Pure: no I/O, no threads.
///
/// ```
/// use squall_round_robin::log::syncer::{Handoff, Next};
/// let mut h = Handoff::default();
/// assert_eq!(h.take(), Next::Wait);
/// h.request(1);
/// h.request(2); // a second batch before the sync started: one sync covers both
/// assert_eq!(h.take(), Next::Sync(2));
/// h.request(3); // written while the sync runs: not covered by it
/// assert!(h.finish(2, Ok(())));
/// assert_eq!((h.done(), h.settled()), (2, false));
/// assert_eq!(h.take(), Next::Sync(3));
/// assert!(h.finish(3, Ok(())));
/// assert!(h.settled());
/// ```
#[derive(Debug, Default)]
pub struct Handoff {
    requested: u64,
    started: u64,
    done: u64,
    failed: Option<(std::io::ErrorKind, String)>,
    stop: bool,
    syncs: u64,
}

impl Handoff {
    /// The appending thread wrote every batch up to request `n` to the file (the caller's
    /// numbers grow; a smaller one is ignored).
    pub fn request(&mut self, n: u64) {
        self.requested = self.requested.max(n);
    }

    /// What the syncer does next; a [`Next::Sync`] marks that request as started.
    pub fn take(&mut self) -> Next {
        if self.stop || self.failed.is_some() {
            return Next::Stop;
        }
        if self.requested > self.started {
            self.started = self.requested;
            self.syncs += 1;
            return Next::Sync(self.started);
        }
        Next::Wait
    }

    /// The sync of request `n` returned; `true` if it succeeded (then every request up to `n`
    /// is durable). A failure is kept: every later [`failed`](Handoff::failed) reports it.
    pub fn finish(&mut self, n: u64, result: std::io::Result<()>) -> bool {
        match result {
            Ok(()) => {
                self.done = self.done.max(n);
                true
            }
            Err(e) => {
                self.failed = Some((e.kind(), e.to_string()));
                false
            }
        }
    }

    /// Every request up to this number is durable.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Syncs started so far.
    pub fn syncs(&self) -> u64 {
        self.syncs
    }

    /// The sync failure, if one failed (a fresh error each call: the first one's kind and text).
    pub fn failed(&self) -> Option<std::io::Error> {
        (self.failed.as_ref()).map(|(kind, text)| std::io::Error::new(*kind, text.clone()))
    }

    /// Nothing left to wait for: every request is durable, or a sync failed, or the syncer
    /// stops.
    pub fn settled(&self) -> bool {
        self.done >= self.requested || self.failed.is_some() || self.stop
    }

    /// Tells the syncer to exit at its next look (it finishes a sync it is in first; a request
    /// not yet started is never synced: nothing reported it durable).
    pub fn stop(&mut self) {
        self.stop = true;
    }

    /// Whether [`stop`](Handoff::stop) was called.
    pub fn stopping(&self) -> bool {
        self.stop
    }
}

/// What the two threads share.
#[derive(Debug)]
struct State {
    handoff: Handoff,
    /// The file the next sync covers (replaced by a compaction, with nothing requested).
    file: Arc<File>,
    /// Called after each sync returns.
    waker: Waker,
    /// Test hook: the syncer waits for a message (or the sender's end) before each sync;
    /// `false` fails that sync.
    gate: Option<Receiver<bool>>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The syncer thread of one log and its handle. Dropping it stops the thread (after the sync
/// it is in, if any) and joins it.
#[derive(Debug)]
pub(crate) struct Syncer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    /// Starts the thread (named `squall-log-sync`) syncing `file`, waking `waker` after each
    /// sync. `Err`: no thread could be started.
    pub(crate) fn spawn(
        file: Arc<File>,
        waker: Waker,
        gate: Option<Receiver<bool>>,
    ) -> std::io::Result<Syncer> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                handoff: Handoff::default(),
                file,
                waker,
                gate: None,
            }),
            changed: Condvar::new(),
        });
        lock(&shared.state).gate = gate;
        let run = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("squall-log-sync".into())
            .spawn(move || run_syncer(&run))?;
        Ok(Syncer {
            shared,
            thread: Some(thread),
        })
    }

    /// Every batch up to request `n` is written: have it synced.
    pub(crate) fn request(&self, n: u64) {
        lock(&self.shared.state).handoff.request(n);
        self.shared.changed.notify_all();
    }

    /// The highest request durable, or the sync failure.
    pub(crate) fn done(&self) -> std::io::Result<u64> {
        let s = lock(&self.shared.state);
        match s.handoff.failed() {
            Some(e) => Err(e),
            None => Ok(s.handoff.done()),
        }
    }

    /// Blocks until every request is durable (or a sync failed): [`Log::sync`](super::Log::sync).
    pub(crate) fn wait(&self) -> std::io::Result<u64> {
        let mut s = lock(&self.shared.state);
        while !s.handoff.settled() {
            s = (self.shared.changed.wait(s)).unwrap_or_else(PoisonError::into_inner);
        }
        match s.handoff.failed() {
            Some(e) => Err(e),
            None => Ok(s.handoff.done()),
        }
    }

    /// Later syncs cover `file` (a compaction replaced the log's file; nothing is requested).
    pub(crate) fn set_file(&self, file: Arc<File>) {
        lock(&self.shared.state).file = file;
    }

    /// Wake `waker` after each sync from now on.
    pub(crate) fn set_waker(&self, waker: Waker) {
        lock(&self.shared.state).waker = waker;
    }

    /// Test hook: the syncer waits for a message on `gate` (or its sender's end) before each
    /// sync from now on (`false`: that sync fails).
    pub(crate) fn set_gate(&self, gate: Receiver<bool>) {
        lock(&self.shared.state).gate = Some(gate);
    }

    /// Syncs started so far.
    pub(crate) fn syncs(&self) -> u64 {
        lock(&self.shared.state).handoff.syncs()
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        lock(&self.shared.state).handoff.stop();
        self.shared.changed.notify_all();
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::warn!("durable log: the syncer thread panicked");
        }
    }
}

/// The syncer's loop: take the latest request, sync with no lock held, record the outcome,
/// wake the waiters and the driver.
fn run_syncer(shared: &Shared) {
    loop {
        let (n, file, gate) = {
            let mut s = lock(&shared.state);
            let n = loop {
                match s.handoff.take() {
                    Next::Stop => return,
                    Next::Sync(n) => break n,
                    Next::Wait => {}
                }
                s = (shared.changed.wait(s)).unwrap_or_else(PoisonError::into_inner);
            };
            (n, Arc::clone(&s.file), s.gate.take())
        };
        let result = match &gate {
            None => file.sync_data(),
            Some(g) => match pass_gate(shared, g) {
                None => return,
                Some(true) => file.sync_data(),
                Some(false) => Err(std::io::Error::other(
                    "fdatasync failed (injected by a test)",
                )),
            },
        };
        let waker = {
            let mut s = lock(&shared.state);
            if s.gate.is_none() {
                s.gate = gate;
            }
            if let Err(e) = &result {
                tracing::warn!(error = %e, "durable log: fdatasync failed; the log stops");
            }
            s.handoff.finish(n, result);
            s.waker.clone()
        };
        shared.changed.notify_all();
        waker.wake();
    }
}

/// Waits for a message on the test gate (or its sender's end: pass); `None` if the log is
/// dropped meanwhile.
fn pass_gate(shared: &Shared, gate: &Receiver<bool>) -> Option<bool> {
    loop {
        match gate.recv_timeout(Duration::from_millis(5)) {
            Ok(pass) => return Some(pass),
            Err(RecvTimeoutError::Disconnected) => return Some(true),
            Err(RecvTimeoutError::Timeout) => {
                if lock(&shared.state).handoff.stopping() {
                    return None;
                }
            }
        }
    }
}
