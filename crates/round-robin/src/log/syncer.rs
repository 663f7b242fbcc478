//! The log's syncer thread ([`SyncMode::Thread`](super::SyncMode::Thread)): the `fdatasync`s of
//! a [`Log`](super::Log) run here, off the thread that appends, with group commit.
//!
//! The hand-off is a [`Handoff`] (pure bookkeeping, checked by the loom test
//! `tests/loom_syncer.rs`) under one mutex, with one condition variable for both directions:
//!
//! - the appending thread hands a batch's bytes over, then [`requests`](Handoff::request)
//!   sync number `n` (numbers only grow); it never waits, and makes no system call, except
//!   in [`Log::sync`](super::Log::sync) (a compaction, a wedge);
//! - the syncer takes the latest request ([`Handoff::take`]: everything requested so far)
//!   with the bytes handed over until then, and with no lock held *writes* them to the file
//!   (one `write`) and calls `fdatasync`, and
//!   [`finishes`](Handoff::finish) it: `done` becomes that number, or the error is kept (and
//!   the syncer stops: every later query of the log returns it);
//! - then it wakes the log's driver (the transport's [`Waker`]), whose next poll finds `done`
//!   advanced and counts the batches up to it as durable;
//! - a compaction's thread [`holds`](Handoff::hold) the writers for its final phase (s25):
//!   once no sync is in progress ([`idle`](Handoff::idle)) the syncer starts none, and the
//!   appending thread's own writes ([`FsyncPolicy::EveryRecords`](super::FsyncPolicy) and
//!   `Never`, made under the same mutex while a compaction runs) are refused and kept
//!   buffered, so the file being replaced holds still while its tail is copied; the
//!   compaction's thread [`releases`](Handoff::release_fenced) them to the compacted file
//!   right after its rename (s26), and until the log adopts that file (after the directory
//!   sync) no sync of it is [`reported`](Handoff::reported): a power loss could still bring
//!   the old file back. (A compaction that fails before its rename leaves the old file; the
//!   log [`releases`](Handoff::release) the writers to it.)
//!
//! One `write` and `fdatasync` thus cover every batch handed over before they started (group
//! commit): while one runs, later batches pile up and the next one covers them all. A batch
//! is reported durable only once a sync that *started after it was written* has returned: the
//! syncer writes exactly the bytes it took with the request, before its sync. (Writing on the
//! syncer too, not only syncing: on ext4 a `write` to the file can wait for a concurrent
//! `fdatasync`'s journal commit — 17 ms seen on the poll thread — so the poll thread no longer
//! touches the file under `EveryBatch`.) If the log is dropped, bytes handed over and not yet
//! written are written, not synced.

use std::fs::File;
use std::io::Write;
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
    hold: bool,
    /// While set, the file synced is one whose name is not durable yet: [`reported`]
    /// (Handoff::reported) stops at this number.
    fence: Option<u64>,
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
        if self.hold {
            return Next::Wait;
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

    /// Holds the writers (a compaction's final phase): [`take`](Handoff::take) answers
    /// [`Next::Wait`] until [`release`](Handoff::release), so once [`idle`](Handoff::idle) no
    /// write or sync of the file runs. Requests still count; they are synced after the
    /// release.
    ///
    /// ```
    /// use squall_round_robin::log::syncer::{Handoff, Next};
    /// let mut h = Handoff::default();
    /// h.request(1);
    /// assert_eq!(h.take(), Next::Sync(1));
    /// h.hold();
    /// assert!(!h.idle()); // sync 1 still runs: the holder waits for it
    /// h.request(2);
    /// assert!(h.finish(1, Ok(())));
    /// assert!(h.idle());
    /// assert_eq!(h.take(), Next::Wait); // held: request 2 waits
    /// h.release();
    /// assert_eq!(h.take(), Next::Sync(2));
    /// ```
    pub fn hold(&mut self) {
        self.hold = true;
    }

    /// Ends a [`hold`](Handoff::hold): later requests are synced again.
    pub fn release(&mut self) {
        self.hold = false;
    }

    /// Whether the writers are held ([`hold`](Handoff::hold)).
    pub fn held(&self) -> bool {
        self.hold
    }

    /// Ends a [`hold`](Handoff::hold) once the file has been replaced by one whose name is
    /// not durable yet (a compaction's rename, before its directory sync; s26): later
    /// requests are synced again, but until [`unfence`](Handoff::unfence)
    /// [`reported`](Handoff::reported) stays at the requests done so far (syncs of the old
    /// file), so nothing synced only to the new file is reported durable.
    ///
    /// ```
    /// use squall_round_robin::log::syncer::{Handoff, Next};
    /// let mut h = Handoff::default();
    /// h.request(1);
    /// assert_eq!(h.take(), Next::Sync(1));
    /// assert!(h.finish(1, Ok(())));
    /// h.hold();
    /// h.request(2); // held: waits
    /// assert_eq!(h.take(), Next::Wait);
    /// h.release_fenced(); // the new file renamed into place, its directory not synced
    /// assert_eq!(h.take(), Next::Sync(2));
    /// assert!(h.finish(2, Ok(())));
    /// assert_eq!((h.done(), h.reported()), (2, 1)); // synced, not reported
    /// h.unfence(); // the directory synced
    /// assert_eq!(h.reported(), 2);
    /// ```
    pub fn release_fenced(&mut self) {
        self.hold = false;
        self.fence = Some(self.done);
    }

    /// Ends the fence of [`release_fenced`](Handoff::release_fenced): the new file's name is
    /// durable, so every sync done counts.
    pub fn unfence(&mut self) {
        self.fence = None;
    }

    /// Whether [`release_fenced`](Handoff::release_fenced) holds back the reports.
    pub fn fenced(&self) -> bool {
        self.fence.is_some()
    }

    /// The highest request whose sync may be reported durable: [`done`](Handoff::done), or,
    /// while fenced, at most the requests done when the fence was set.
    pub fn reported(&self) -> u64 {
        self.fence.map_or(self.done, |f| f.min(self.done))
    }

    /// No sync is in progress (every one taken has finished), or a sync failed, or the
    /// syncer stops.
    pub fn idle(&self) -> bool {
        self.started <= self.done || self.failed.is_some() || self.stop
    }
}

/// What the two threads share.
#[derive(Debug)]
struct State {
    handoff: Handoff,
    /// The file the next sync covers (replaced by a compaction, while the writers are held).
    file: Arc<File>,
    /// Bytes handed over to be written (appended to `file`) before the next sync.
    bytes: Vec<u8>,
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
                bytes: Vec::new(),
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

    /// Hands `bytes` (taken: left empty) over to be appended to the file, then has them synced
    /// as request `n`: the syncer writes them right before that sync, so the caller makes no
    /// system call.
    pub(crate) fn write_and_request(&self, n: u64, bytes: &mut Vec<u8>) {
        {
            let mut s = lock(&self.shared.state);
            if s.bytes.is_empty() {
                std::mem::swap(&mut s.bytes, bytes);
            } else {
                s.bytes.append(bytes);
            }
            s.handoff.request(n);
        }
        self.shared.changed.notify_all();
    }

    /// The highest request durable, or the sync failure; while a compaction's new file is
    /// not yet named durably ([`Waiter::release_renamed`]), at most the requests done before
    /// it ([`Handoff::reported`]).
    pub(crate) fn done(&self) -> std::io::Result<u64> {
        let s = lock(&self.shared.state);
        match s.handoff.failed() {
            Some(e) => Err(e),
            None => Ok(s.handoff.reported()),
        }
    }

    /// Blocks until every request is durable (or a sync failed): [`Log::sync`](super::Log::sync).
    pub(crate) fn wait(&self) -> std::io::Result<u64> {
        self.waiter().wait()
    }

    /// A handle another thread can [`wait`](Waiter::wait) on (a compaction's thread).
    pub(crate) fn waiter(&self) -> Waiter {
        Waiter {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Writes `bytes` to the file now, on the calling thread, unless a compaction holds the
    /// writers ([`Waiter::hold`]): `Ok(false)`, nothing written (the caller keeps them). The
    /// write runs under the hand-off's lock, so a hold that returned saw it complete.
    ///
    /// The lock is held for the whole `write_all` (one flush's records, copied to the page
    /// cache): meanwhile the syncer cannot take its next request or report one finished,
    /// and the compaction's [`Waiter::hold`] waits. That is the point (a hold that returned
    /// saw no write in progress), it happens only while a compaction runs, and the syncer
    /// does not wait on the lock during an `fdatasync` (it is released around it).
    ///
    /// `Ok(Some(renamed))`: written; `renamed` says it went to a compaction's new file
    /// whose name is not durable yet ([`Waiter::release_renamed`]: after the rename, before
    /// the log adopts it), so the compaction's sync does not cover it.
    ///
    /// An error may come after part of `bytes` was written: the file is then longer than
    /// the log counted, with part of a batch at its end. The caller treats it as terminal
    /// (the log notes the failure and reports nothing durable from then on; the next open
    /// cuts the torn tail).
    pub(crate) fn write_unless_held(&self, bytes: &[u8]) -> std::io::Result<Option<bool>> {
        let s = lock(&self.shared.state);
        if s.handoff.held() {
            return Ok(None);
        }
        (&*s.file).write_all(bytes)?;
        Ok(Some(s.handoff.fenced()))
    }

    /// Whether a compaction holds the writers ([`Waiter::hold`]).
    pub(crate) fn held(&self) -> bool {
        lock(&self.shared.state).handoff.held()
    }

    /// Ends a compaction's hold ([`Waiter::hold`]); with `file`, later writes and syncs go to
    /// it (the compacted file, renamed over the log), and the file replaced is returned (for
    /// the caller to close off its thread: the last close of a large unlinked file frees its
    /// blocks).
    pub(crate) fn release(&self, file: Option<Arc<File>>) -> Option<Arc<File>> {
        let old = {
            let mut s = lock(&self.shared.state);
            s.handoff.release();
            file.map(|f| std::mem::replace(&mut s.file, f))
        };
        self.shared.changed.notify_all();
        old
    }

    /// Ends the fence of [`Waiter::release_renamed`]: the new file is named durably (the
    /// log adopted it after its directory sync), so its syncs are reported.
    pub(crate) fn unfence(&self) {
        lock(&self.shared.state).handoff.unfence();
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

/// Waits for a [`Syncer`]'s requests from another thread ([`Syncer::waiter`]).
#[derive(Debug)]
pub(crate) struct Waiter {
    shared: Arc<Shared>,
}

impl Waiter {
    /// Blocks until every request is durable (or a sync failed, or the syncer stops).
    pub(crate) fn wait(&self) -> std::io::Result<u64> {
        self.wait_until(Handoff::settled)
    }

    /// Blocks until request `n` is durable (or a sync failed, or the syncer stops): every
    /// batch handed over up to it is then in the file.
    pub(crate) fn wait_for(&self, n: u64) -> std::io::Result<u64> {
        self.wait_until(|h| h.done >= n || h.failed.is_some() || h.stop)
    }

    /// Holds the writers ([`Handoff::hold`]) and blocks until no sync is in progress: from
    /// its return until [`Syncer::release`], nothing writes the file (the syncer starts no
    /// write, and [`Syncer::write_unless_held`] refuses). A failed sync is returned (the
    /// hold stays until the release).
    pub(crate) fn hold(&self) -> std::io::Result<u64> {
        lock(&self.shared.state).handoff.hold();
        self.wait_until(Handoff::idle)
    }

    /// Releases the writers of [`hold`](Waiter::hold) to `file`, a compaction's new file
    /// just renamed over the log (s26): the syncer writes and syncs there from now on, and so
    /// does the log's own [`Syncer::write_unless_held`], but until [`Syncer::unfence`] no
    /// sync is reported past the requests done now ([`Handoff::release_fenced`]): a power
    /// loss before the directory sync may bring the old file back. Returns the syncer's
    /// handle of the replaced file.
    pub(crate) fn release_renamed(&self, file: Arc<File>) -> Arc<File> {
        let old = {
            let mut s = lock(&self.shared.state);
            s.handoff.release_fenced();
            std::mem::replace(&mut s.file, file)
        };
        self.shared.changed.notify_all();
        old
    }

    fn wait_until(&self, ready: impl Fn(&Handoff) -> bool) -> std::io::Result<u64> {
        let mut s = lock(&self.shared.state);
        while !ready(&s.handoff) {
            s = (self.shared.changed.wait(s)).unwrap_or_else(PoisonError::into_inner);
        }
        match s.handoff.failed() {
            Some(e) => Err(e),
            None => Ok(s.handoff.done()),
        }
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
        let (n, file, bytes, gate) = {
            let mut s = lock(&shared.state);
            let n = loop {
                match s.handoff.take() {
                    Next::Stop => {
                        let bytes = std::mem::take(&mut s.bytes);
                        write_at_exit(&s.file, &bytes);
                        return;
                    }
                    Next::Sync(n) => break n,
                    Next::Wait => {}
                }
                s = (shared.changed.wait(s)).unwrap_or_else(PoisonError::into_inner);
            };
            let bytes = std::mem::take(&mut s.bytes);
            (n, Arc::clone(&s.file), bytes, s.gate.take())
        };
        let write_and_sync = || {
            (&*file).write_all(&bytes)?;
            file.sync_data()
        };
        let result = match &gate {
            None => write_and_sync(),
            Some(g) => match pass_gate(shared, g) {
                None => {
                    write_at_exit(&file, &bytes);
                    return;
                }
                Some(true) => write_and_sync(),
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

/// The log is dropped: bytes handed over and not yet written are written (not synced:
/// nothing reported them durable), so a dropped log's file holds what was appended, as before
/// the syncer thread.
fn write_at_exit(file: &File, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let mut f = file;
    if let Err(e) = f.write_all(bytes) {
        tracing::warn!(error = %e, "durable log: could not write the last batch at drop");
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
