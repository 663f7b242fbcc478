//! The durable copy of a transferred state: what a member that entered by state transfer (a
//! joiner, a promoted spare, a rejoined member) needs to restart from its logs.
//!
//! A member whose state came by transfer holds, in its epoch logs, only the deliveries of the
//! views from its first one on, counted from the snapshot's position; what the state reflects
//! before that position is in no log of it. So when its transfer completes, the group writes
//! the bytes it received to a checksummed file in the member's durable directory (the epoch
//! template's `Mode::Durable` path), written and synced **before** the member acts on the state
//! (before the application sees it, before it tells anyone it holds the state), then logs a
//! [`Record::Snapshot`](crate::log::Record::Snapshot) naming the file, the view, the shard, the
//! view's first position and the snapshot's position. A restart hands the file's bytes to the
//! application the way a transfer does and replays the epoch logs from the snapshot's position.
//!
//! File layout (little endian): [`MAGIC`] (8 bytes), then a header — view `u64`, shard `u32`,
//! the view's first position `u64`, the snapshot's position `u64`, the state's length `u64`,
//! the CRC-32 of the state `u32`, the CRC-32 of the magic and the header fields before it
//! `u32` — then the state. [`decode`] checks all of it and returns a [`SnapshotError`], never
//! panics (fuzz target `fuzz/fuzz_targets/gms_snapshot.rs`).
//!
//! ```
//! use squall_membership::snapshot::{Snapshot, decode, encode};
//! let s = Snapshot { view: 3, shard: 0, first_position: 40, position: 42, state: b"abc".to_vec() };
//! let bytes = encode(&s);
//! assert_eq!(decode(&bytes, 1 << 20)?, s);
//! assert!(decode(&bytes[..bytes.len() - 1], 1 << 20).is_err()); // torn
//! # Ok::<(), squall_membership::snapshot::SnapshotError>(())
//! ```

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// A snapshot file's first eight bytes.
pub const MAGIC: &[u8; 8] = b"SQSNAP01";
/// Bytes before the state: magic, view, shard, first position, position, length, two CRCs.
pub const HEADER: usize = 8 + 8 + 4 + 8 + 8 + 8 + 4 + 4;
/// Prefix of every snapshot file name in a member's durable directory.
pub const PREFIX: &str = "snapshot-";
/// Suffix of every snapshot file name.
pub const SUFFIX: &str = ".state";

/// A transferred state as persisted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The view in which the transfer completed.
    pub view: u64,
    /// The member's shard in that view (an index into the view's shards).
    pub shard: u32,
    /// That view's first position in the shard (the offset of the member's epoch positions in
    /// that view, which count from 0 while it is passive).
    pub first_position: u64,
    /// The first position the state does not reflect.
    pub position: u64,
    /// The application's bytes, as the sender provided them.
    pub state: Vec<u8>,
}

/// Why a snapshot file could not be written or read back.
#[derive(Debug, Error)]
pub enum SnapshotError {
    /// The bytes do not start with [`MAGIC`].
    #[error("not a snapshot file (bad magic)")]
    BadMagic,
    /// Fewer bytes than the header or the declared state need (a crash while writing).
    #[error("torn snapshot: {have} of {need} bytes present")]
    Torn {
        /// Bytes present.
        have: usize,
        /// Bytes needed.
        need: usize,
    },
    /// More bytes than the header declares.
    #[error("snapshot has {extra} bytes past its declared state")]
    Trailing {
        /// How many.
        extra: usize,
    },
    /// The header's checksum does not match.
    #[error("snapshot header checksum {found:#010x}, expected {expected:#010x}")]
    HeaderChecksum {
        /// Stored.
        found: u32,
        /// Computed.
        expected: u32,
    },
    /// The state's checksum does not match.
    #[error("snapshot state checksum {found:#010x}, expected {expected:#010x}")]
    Checksum {
        /// Stored.
        found: u32,
        /// Computed.
        expected: u32,
    },
    /// A declared state larger than the bound (`TransferConfig::max_state_bytes`).
    #[error("snapshot declares {len} bytes of state, above the bound of {max}")]
    TooLarge {
        /// Declared.
        len: u64,
        /// The bound.
        max: u64,
    },
    /// The snapshot is below its view's first position.
    #[error("snapshot position {position} is below its view's first position {first}")]
    Position {
        /// The snapshot's position.
        position: u64,
        /// The view's first position.
        first: u64,
    },
    /// The file does not hold what the membership log's record says it does.
    #[error("snapshot file {path} does not match its log record: {what}")]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// Which field differs.
        what: &'static str,
    },
    /// A file name that is not a plain snapshot name (the log names files in the member's own
    /// directory only).
    #[error("{name:?} is not a snapshot file name")]
    BadName {
        /// The name.
        name: String,
    },
    /// The file system failed.
    #[error("snapshot file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A record names a file whose contents are invalid.
    #[error("snapshot file {path}: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: Box<SnapshotError>,
    },
}

/// What [`Group::checkpoint`](crate::group::Group::checkpoint) did, or (through
/// [`Group::take_checkpoint_outcome`](crate::group::Group::take_checkpoint_outcome)) what a
/// started checkpoint came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checkpointed {
    /// The file is being written (by the group's writer thread, or written already by the
    /// inline writer); a later [`poll`](squall_ordering::TotalOrder::poll) logs its record
    /// and removes what it supersedes, and
    /// [`take_checkpoint_outcome`](crate::group::Group::take_checkpoint_outcome) then says
    /// how it ended.
    Started {
        /// The checkpoint's position.
        position: u64,
    },
    /// The state is durable (file synced, record logged); the superseded snapshot and the
    /// epoch logs of views before the checkpoint's were removed. Under `EveryBatch` and
    /// `EveryRecords` epochs every member of the view had synced its epoch log past the
    /// position, so a total restart after a power loss runs past it; under `Never` that is
    /// promised for a process crash only (see
    /// [`Group::checkpoint`](crate::group::Group::checkpoint)).
    Written {
        /// The checkpoint's position.
        position: u64,
        /// The snapshot file's name in the member's durable directory.
        file: String,
        /// The epoch logs removed (views that end before the checkpoint's view).
        logs_removed: usize,
    },
    /// The latest durable snapshot (a checkpoint or a transferred state) is already at or past
    /// this position: nothing written.
    Covered {
        /// That snapshot's position.
        at: u64,
    },
    /// The group's epochs are not durable (`Mode::Atomic`): a restart replays nothing, so there
    /// is nothing to bound. Nothing written.
    NotDurable,
}

/// Why [`Group::checkpoint`](crate::group::Group::checkpoint) took no checkpoint.
#[derive(Debug, Error)]
pub enum CheckpointError {
    /// The member cannot checkpoint now (it holds no state yet, runs no epoch in this view,
    /// is still restarting or handing out a restart's replay, or stopped); a later call may
    /// succeed.
    #[error("no checkpoint now: {0}")]
    NotNow(&'static str),
    /// A checkpoint started earlier is still being written (one at a time): ask again once
    /// [`take_checkpoint_outcome`](crate::group::Group::take_checkpoint_outcome) reported it.
    #[error("a checkpoint at position {position} is still being written")]
    InFlight {
        /// The position of the checkpoint under way.
        position: u64,
    },
    /// A started checkpoint was given up before its record was logged: the view changed or
    /// the member stopped while its file was written (the record would name a view the
    /// member is no longer in). Its file is removed; nothing was recorded. A later call may
    /// succeed.
    #[error("checkpoint at position {position} abandoned: {why}")]
    Abandoned {
        /// The abandoned checkpoint's position.
        position: u64,
        /// Why.
        why: &'static str,
    },
    /// The position is outside what the member's current view's epoch log holds: below the
    /// view's first position (the state reflects an older view: the logs it would replace
    /// are not known to be covered) or past the member's next position.
    #[error("checkpoint position {position} is outside the current view's [{first}, {next}]")]
    Position {
        /// The position given.
        position: u64,
        /// The current view's first position.
        first: u64,
        /// The member's next position.
        next: u64,
    },
    /// The state is larger than a restart may read back (`TransferConfig::max_state_bytes`).
    #[error(
        "checkpoint of {len} bytes is above the bound of {max} (TransferConfig::max_state_bytes)"
    )]
    TooLarge {
        /// The state's length.
        len: u64,
        /// The bound.
        max: u64,
    },
    /// The application's encoder ([`Group::checkpoint_with`](crate::group::Group::checkpoint_with))
    /// failed: nothing was written.
    #[error("encoding the checkpoint's state: {0}")]
    Encode(#[source] std::io::Error),
    /// The file could not be written.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The membership log could not record it (the file stays unnamed and a restart removes it).
    #[error("logging the checkpoint: {0}")]
    Log(#[from] crate::log::LogError),
}

/// An application's state handed to
/// [`Group::checkpoint_with`](crate::group::Group::checkpoint_with) as an encoder instead of
/// bytes: it appends the state's bytes to the vector it is given (empty when called). The
/// group runs it on its checkpoint writer thread ([`CheckpointWriter::Thread`]; on the
/// caller's with [`CheckpointWriter::Inline`]), so it must own (or share, e.g. through a
/// persistent map's O(1) clone) a capture of the state taken when it was made: the
/// application goes on applying deliveries while it runs.
///
/// ```
/// use squall_membership::snapshot::EncodeState;
/// let captured = vec![1u8, 2, 3]; // the state at the checkpoint's position
/// let encode: EncodeState = Box::new(move |out: &mut Vec<u8>| {
///     out.extend_from_slice(&captured);
///     Ok(())
/// });
/// let mut out = Vec::new();
/// encode(&mut out)?;
/// assert_eq!(out, [1, 2, 3]);
/// # Ok::<(), std::io::Error>(())
/// ```
pub type EncodeState = Box<dyn FnOnce(&mut Vec<u8>) -> std::io::Result<()> + Send>;

/// Runs `encode` into `snap.state`, refusing a state above `max_state` bytes (checked once
/// encoded: its length is not known before).
pub(crate) fn encode_into(
    snap: &mut Snapshot,
    encode: EncodeState,
    max_state: u64,
) -> Result<(), CheckpointError> {
    let mut state = std::mem::take(&mut snap.state);
    state.clear();
    encode(&mut state).map_err(CheckpointError::Encode)?;
    if state.len() as u64 > max_state {
        return Err(CheckpointError::TooLarge {
            len: state.len() as u64,
            max: max_state,
        });
    }
    snap.state = state;
    Ok(())
}

/// The file name of the snapshot taken in `view` for shard `shard`.
///
/// ```
/// assert_eq!(squall_membership::snapshot::file_name(7, 1), "snapshot-00000000000000000007-shard1.state");
/// ```
pub fn file_name(view: u64, shard: u32) -> String {
    format!("{PREFIX}{view:020}-shard{shard}{SUFFIX}")
}

/// The file name of a checkpoint ([`Group::checkpoint`](crate::group::Group::checkpoint))
/// taken in `view` for shard `shard` at `position`: the position keeps it apart from the file
/// the last record names (a checkpoint is only taken past the latest snapshot's position), so
/// a crash after its rename and before its record never leaves the recorded file overwritten.
///
/// ```
/// assert_eq!(
///     squall_membership::snapshot::checkpoint_file_name(7, 1, 42),
///     "snapshot-00000000000000000007-shard1-at00000000000000000042.state"
/// );
/// ```
pub fn checkpoint_file_name(view: u64, shard: u32, position: u64) -> String {
    format!("{PREFIX}{view:020}-shard{shard}-at{position:020}{SUFFIX}")
}

/// Whether `name` is a plain snapshot file name (no directory part).
fn is_snapshot_name(name: &str) -> bool {
    name.starts_with(PREFIX)
        && name.ends_with(SUFFIX)
        && !name.contains(['/', '\\'])
        && !name.contains("..")
}

/// `s`'s file bytes.
pub fn encode(s: &Snapshot) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + s.state.len());
    out.extend_from_slice(&header(s));
    out.extend_from_slice(&s.state);
    out
}

/// `s`'s file bytes before its state.
fn header(s: &Snapshot) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&s.view.to_le_bytes());
    out.extend_from_slice(&s.shard.to_le_bytes());
    out.extend_from_slice(&s.first_position.to_le_bytes());
    out.extend_from_slice(&s.position.to_le_bytes());
    out.extend_from_slice(&(s.state.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32(&s.state).to_le_bytes());
    let head = crc32(&out);
    out.extend_from_slice(&head.to_le_bytes());
    out
}

/// CRC-32 (IEEE, as zlib and `squall_round_robin::log::crc32`: the same values), computed with
/// `crc32fast` (SIMD where available): a state of megabytes is checked at every restart and
/// checkpoint.
fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

/// Decodes a snapshot file's bytes, refusing a state above `max_state` bytes. Never panics.
///
/// ```
/// use squall_membership::snapshot::{SnapshotError, decode};
/// assert!(matches!(decode(b"SQSNAP01", 64), Err(SnapshotError::Torn { .. })));
/// assert!(matches!(decode(b"nonsense but long enough to hold a whole header.....", 64), Err(SnapshotError::BadMagic)));
/// ```
pub fn decode(bytes: &[u8], max_state: u64) -> Result<Snapshot, SnapshotError> {
    if bytes.len() < HEADER {
        if !MAGIC.starts_with(&bytes[..bytes.len().min(MAGIC.len())]) {
            return Err(SnapshotError::BadMagic);
        }
        return Err(SnapshotError::Torn {
            have: bytes.len(),
            need: HEADER,
        });
    }
    if &bytes[..8] != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let head_found = le_u32(bytes, HEADER - 4);
    let head_expected = crc32(&bytes[..HEADER - 4]);
    if head_found != head_expected {
        return Err(SnapshotError::HeaderChecksum {
            found: head_found,
            expected: head_expected,
        });
    }
    let view = le_u64(bytes, 8);
    let shard = le_u32(bytes, 16);
    let first_position = le_u64(bytes, 20);
    let position = le_u64(bytes, 28);
    let len = le_u64(bytes, 36);
    let crc = le_u32(bytes, 44);
    if len > max_state {
        return Err(SnapshotError::TooLarge {
            len,
            max: max_state,
        });
    }
    if position < first_position {
        return Err(SnapshotError::Position {
            position,
            first: first_position,
        });
    }
    let body = &bytes[HEADER..];
    let need = usize::try_from(len).unwrap_or(usize::MAX);
    if body.len() < need {
        return Err(SnapshotError::Torn {
            have: bytes.len(),
            need: HEADER.saturating_add(need),
        });
    }
    if body.len() > need {
        return Err(SnapshotError::Trailing {
            extra: body.len() - need,
        });
    }
    let found = crc32(body);
    if found != crc {
        return Err(SnapshotError::Checksum {
            found: crc,
            expected: found,
        });
    }
    Ok(Snapshot {
        view,
        shard,
        first_position,
        position,
        state: body.to_vec(),
    })
}

/// Writes `s` durably into `dir` as [`file_name`]`(s.view, s.shard)`: to a temporary file,
/// synced, renamed into place, and the directory synced, so the file is either absent or whole
/// after any crash. Returns the file name (relative to `dir`).
pub fn write(dir: &Path, s: &Snapshot) -> Result<String, SnapshotError> {
    let name = file_name(s.view, s.shard);
    write_as(dir, &name, s, None)?;
    Ok(name)
}

/// Where a checkpoint is cut short on purpose: the crash points the simulator tests stop a
/// member at ([`Group::checkpoint_cut_at`](crate::group::Group::checkpoint_cut_at)), each
/// leaving the files a process crash at that point leaves.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPoint {
    /// Half of the file written to its temporary name; nothing synced or renamed.
    BeforeSync,
    /// The file synced and renamed into place (directory synced); no record names it.
    AfterRename,
    /// The record logged; nothing superseded removed yet.
    AfterRecord,
    /// Half of the superseded files (older snapshots, then epoch logs) removed.
    MidRemoval,
}

/// [`write`] under `name`, stopping at `cut` (only [`CrashPoint::BeforeSync`] stops here).
/// Returns whether the file is in place.
pub(crate) fn write_as(
    dir: &Path,
    name: &str,
    s: &Snapshot,
    cut: Option<CrashPoint>,
) -> Result<bool, SnapshotError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| SnapshotError::Io { path: p, source }
    };
    let start = std::time::Instant::now();
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(io(&tmp))?;
    if cut == Some(CrashPoint::BeforeSync) {
        let bytes = encode(s);
        f.write_all(&bytes[..bytes.len() / 2]).map_err(io(&tmp))?;
        return Ok(false);
    }
    // The header, then the state where it lies (no copy of a state of megabytes).
    f.write_all(&header(s)).map_err(io(&tmp))?;
    f.write_all(&s.state).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))?;
    tracing::debug!(
        path = %path.display(),
        bytes = s.state.len(),
        us = start.elapsed().as_micros() as u64,
        "snapshot: written and synced"
    );
    Ok(true)
}

/// How [`Group::checkpoint`](crate::group::Group::checkpoint) writes its file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CheckpointWriter {
    /// On a thread the group owns (spawned at its first checkpoint): running the
    /// application's encoder ([`Group::checkpoint_with`](crate::group::Group::checkpoint_with)),
    /// writing and syncing the file, renaming it and syncing the directory happen off the
    /// thread that polls the group, which only hands the bytes (or the encoder) over and, in
    /// a later poll, appends the record and removes what the checkpoint supersedes. The
    /// default.
    #[default]
    Thread,
    /// On the caller's thread, inside `checkpoint` (the record still waits for the next
    /// poll): deterministic, for the simulator, and the pre-writer behaviour to compare with.
    Inline,
}

/// A file write handed to the [`Writer`].
pub(crate) struct WriteJob {
    pub(crate) dir: PathBuf,
    pub(crate) name: String,
    pub(crate) snap: Snapshot,
    /// The application's encoder of `snap.state` (empty until it ran), run first on the
    /// writer thread; the state it produces is refused above `max_state` bytes.
    pub(crate) encode: Option<EncodeState>,
    pub(crate) max_state: u64,
    pub(crate) cut: Option<CrashPoint>,
    /// Test hook: the writer waits for a message (or the sender's end) before writing.
    pub(crate) gate: Option<std::sync::mpsc::Receiver<()>>,
}

/// What the [`Writer`] did with a [`WriteJob`]: whether the file is in place (see
/// [`write_as`]), and how long it took.
pub(crate) struct WriteDone {
    pub(crate) name: String,
    pub(crate) result: Result<bool, CheckpointError>,
    /// The state's length (known only once an encoder ran).
    pub(crate) bytes: usize,
    /// How long encoding (if an encoder was given) and writing took (µs).
    pub(crate) us: u64,
    /// How long the encoder took (µs; 0 without one).
    pub(crate) encode_us: u64,
}

/// The checkpoint writer thread: one job at a time, in order; `wake` is called after each
/// result is sent (the group's transport waker, so a driver parked in `wait` polls again).
/// Dropping it cancels what is not written yet and waits for the thread; a file it renamed
/// into place whose result nobody took is removed (no record names it).
pub(crate) struct Writer {
    jobs: Option<std::sync::mpsc::Sender<WriteJob>>,
    done: std::sync::mpsc::Receiver<WriteDone>,
    cancel: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    dir: Option<PathBuf>,
}

impl Writer {
    /// Spawns the thread.
    pub(crate) fn spawn(
        name: String,
        wake: impl Fn() + Send + 'static,
    ) -> Result<Writer, SnapshotError> {
        let (jobs, rx) = std::sync::mpsc::channel::<WriteJob>();
        let (tx, done) = std::sync::mpsc::channel();
        let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = std::sync::Arc::clone(&cancel);
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                for job in rx {
                    let Some(done) = run_job(job, &stop) else {
                        continue;
                    };
                    if tx.send(done).is_err() {
                        return;
                    }
                    wake();
                }
            })
            .map_err(|source| SnapshotError::Io {
                path: PathBuf::from("<checkpoint writer thread>"),
                source,
            })?;
        Ok(Writer {
            jobs: Some(jobs),
            done,
            cancel,
            thread: Some(thread),
            dir: None,
        })
    }

    /// Hands the thread a job (`false`: the thread is gone).
    pub(crate) fn send(&mut self, job: WriteJob) -> bool {
        self.dir = Some(job.dir.clone());
        self.jobs.as_ref().is_some_and(|j| j.send(job).is_ok())
    }

    /// A finished job's result, if one is ready; `Err(())` if the thread is gone.
    pub(crate) fn try_done(&self) -> Result<Option<WriteDone>, ()> {
        match self.done.try_recv() {
            Ok(d) => Ok(Some(d)),
            Err(std::sync::mpsc::TryRecvError::Empty) => Ok(None),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => Err(()),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.cancel
            .store(true, std::sync::atomic::Ordering::Release);
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Written, but its record was never logged: no restart would read it.
        while let Ok(d) = self.done.try_recv() {
            if let (Ok(true), Some(dir)) = (&d.result, &self.dir) {
                remove_logged(&d.name, &dir.join(&d.name));
            }
        }
    }
}

/// The writer thread's work on one job: `None` when cancelled (nothing left in place).
fn run_job(job: WriteJob, cancel: &std::sync::atomic::AtomicBool) -> Option<WriteDone> {
    let cancelled = || cancel.load(std::sync::atomic::Ordering::Acquire);
    if let Some(gate) = &job.gate {
        loop {
            match gate.recv_timeout(std::time::Duration::from_millis(5)) {
                Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if cancelled() => return None,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }
    if cancelled() {
        return None;
    }
    let start = std::time::Instant::now();
    let mut snap = job.snap;
    let encoded = match job.encode {
        Some(encode) => encode_into(&mut snap, encode, job.max_state),
        None => Ok(()),
    };
    let encode_us = start.elapsed().as_micros() as u64;
    let result = match encoded {
        Ok(()) if cancelled() => return None,
        Ok(()) => write_as(&job.dir, &job.name, &snap, job.cut).map_err(CheckpointError::from),
        Err(e) => Err(e),
    };
    if cancelled() {
        // The group is gone: whatever this left is unrecorded.
        let _ = std::fs::remove_file(job.dir.join(&job.name));
        let _ = std::fs::remove_file(job.dir.join(format!("{}.tmp", job.name)));
        return None;
    }
    Some(WriteDone {
        name: job.name,
        result,
        bytes: snap.state.len(),
        us: start.elapsed().as_micros() as u64,
        encode_us,
    })
}

/// Reads the snapshot file `name` in `dir` (a name from the membership log), refusing a state
/// above `max_state` bytes; a missing, torn or corrupt file is an error (the member cannot
/// rebuild its state without it).
pub fn read(dir: &Path, name: &str, max_state: u64) -> Result<Snapshot, SnapshotError> {
    if !is_snapshot_name(name) {
        return Err(SnapshotError::BadName {
            name: name.to_string(),
        });
    }
    let path = dir.join(name);
    let bytes = std::fs::read(&path).map_err(|source| SnapshotError::Io {
        path: path.clone(),
        source,
    })?;
    decode(&bytes, max_state).map_err(|e| SnapshotError::Corrupt {
        path,
        source: Box::new(e),
    })
}

/// Deletes every snapshot file (and leftover temporary file) in `dir` except `keep`: superseded
/// snapshots, and files a crash left without a log record. Failures are logged, not returned
/// (a leftover file is only wasted space; the log names the file that counts).
pub fn remove_others(dir: &Path, keep: Option<&str>) {
    for (name, path) in others(dir, keep) {
        remove_logged(&name, &path);
    }
}

/// The snapshot files (and leftover temporary files) in `dir` other than `keep`, sorted by name.
pub(crate) fn others(dir: &Path, keep: Option<&str>) -> Vec<(String, PathBuf)> {
    let mut out: Vec<_> = files_in(dir)
        .into_iter()
        .filter(|(name, _)| {
            name.starts_with(PREFIX)
                && (name.ends_with(SUFFIX) || name.ends_with(&format!("{SUFFIX}.tmp")))
                && Some(name.as_str()) != keep
        })
        .collect();
    out.sort();
    out
}

/// Removes a superseded file, logging (not returning) a failure.
pub(crate) fn remove_logged(name: &str, path: &Path) {
    match std::fs::remove_file(path) {
        Ok(()) => tracing::debug!(file = name, "snapshot: removed a superseded file"),
        Err(err) => {
            tracing::warn!(file = name, error = %err, "snapshot: could not remove a superseded file");
        }
    }
}

/// The plain files of `dir` with UTF-8 names, as `(name, path)` (none if it cannot be read).
pub(crate) fn files_in(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.to_string(), e.path())))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
        Snapshot {
            view: 2,
            shard: 1,
            first_position: 10,
            position: 17,
            state: (0..100u8).collect(),
        }
    }

    #[test]
    fn the_checksum_is_the_logs_crc32() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        for n in [0, 1, 7, 64, 1000, 10_000] {
            assert_eq!(
                crc32(&data[..n]),
                squall_round_robin::log::crc32(&data[..n])
            );
        }
    }

    #[test]
    fn every_torn_or_flipped_file_is_refused_with_a_typed_error() {
        let bytes = encode(&sample());
        assert_eq!(decode(&bytes, 1 << 20).ok(), Some(sample()));
        for cut in 0..bytes.len() {
            assert!(
                matches!(
                    decode(&bytes[..cut], 1 << 20),
                    Err(SnapshotError::Torn { .. })
                ),
                "cut at {cut}"
            );
        }
        for at in 0..bytes.len() {
            let mut b = bytes.clone();
            b[at] ^= 0x10;
            assert!(decode(&b, 1 << 20).is_err(), "flip at {at}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(
            decode(&long, 1 << 20),
            Err(SnapshotError::Trailing { extra: 1 })
        ));
        assert!(matches!(
            decode(&bytes, 99),
            Err(SnapshotError::TooLarge { len: 100, max: 99 })
        ));
    }

    proptest::proptest! {
        /// The fuzz target's properties (`fuzz/fuzz_targets/gms_snapshot.rs`) over mutated
        /// files: never a panic, and what is accepted re-encodes to the same bytes.
        #[test]
        fn decode_accepts_only_what_reencodes_identically(
            cut in 0usize..200,
            flips in proptest::collection::vec((0usize..200, proptest::prelude::any::<u8>()), 0..3),
        ) {
            let mut data = encode(&sample());
            for (at, x) in flips {
                let n = data.len();
                data[at % n] ^= x;
            }
            data.truncate(cut.min(data.len()));
            if let Ok(s) = decode(&data, 1 << 16) {
                proptest::prop_assert_eq!(encode(&s), data);
            }
        }
    }

    #[test]
    fn a_written_file_reads_back_and_others_are_removed() {
        let dir = std::env::temp_dir().join(format!("squall-snap-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let old = write(
            &dir,
            &Snapshot {
                view: 1,
                ..sample()
            },
        )
        .unwrap();
        let name = write(&dir, &sample()).unwrap();
        assert_eq!(read(&dir, &name, 1 << 20).unwrap(), sample());
        std::fs::write(dir.join("epoch-1.log"), b"x").unwrap();
        remove_others(&dir, Some(&name));
        assert!(!dir.join(&old).exists());
        assert!(dir.join(&name).exists() && dir.join("epoch-1.log").exists());
        assert!(matches!(
            read(&dir, "../etc/passwd", 1),
            Err(SnapshotError::BadName { .. })
        ));
        let full = std::fs::read(dir.join(&name)).unwrap();
        std::fs::write(dir.join(&name), &full[..full.len() - 5]).unwrap();
        assert!(matches!(
            read(&dir, &name, 1 << 20),
            Err(SnapshotError::Corrupt { .. })
        ));
        std::fs::remove_dir_all(&dir).ok();
    }
}
