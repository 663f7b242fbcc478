//! The durable mode's local log: an append-only file of checksummed records, one per
//! application message, in the agreed (total) order; a member logs a message before it counts it
//! as received, so the log can run ahead of delivery but is always a prefix of the agreed order.
//!
//! Layout: an 8-byte magic (`SQRRLOG1`), then records of
//! `[body length: u32 LE][CRC-32 of the body: u32 LE][body]`, where the body is
//! `[view: u64][seq: u64][position: u64][sender: u32][payload]` (all little endian).
//!
//! [`decode`] is the pure decoder (fuzzed): it returns every record of the longest valid prefix
//! and says why it stopped. [`Log::open`] truncates a torn or corrupt tail to that prefix and
//! logs (at `warn`) what it dropped, so a crash in the middle of an append never leaves a log that
//! fails to open, and never a log whose tail holds garbage.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use squall_transport::NodeId;
use thiserror::Error;

/// The file's first eight bytes.
pub const MAGIC: &[u8; 8] = b"SQRRLOG1";
/// Bytes of a record's frame before the body (length and checksum).
pub const FRAME: usize = 8;
/// Bytes of a record's body before the payload.
pub const BODY_HEADER: usize = 28;
/// The largest body a record may declare (guards the decoder against absurd lengths).
pub const MAX_BODY: usize = 1 << 30;

/// One logged message.
///
/// ```
/// use squall_round_robin::log::{Record, decode, encode_record, MAGIC};
/// use squall_transport::NodeId;
/// let r = Record { view: 0, seq: 4, position: 2, sender: NodeId(1), payload: b"x".to_vec() };
/// let mut file = MAGIC.to_vec();
/// encode_record(&r, &mut file);
/// assert_eq!(decode(&file).records, vec![r]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The view (fixed-view group incarnation) the message was delivered in.
    pub view: u64,
    /// Its round-robin sequence number (index · senders + sender rank).
    pub seq: u64,
    /// Its delivery position (gapless over application messages).
    pub position: u64,
    /// Who sent it.
    pub sender: NodeId,
    /// The payload.
    pub payload: Vec<u8>,
}

/// Why decoding stopped before the end of the bytes.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum TailError {
    /// The file does not start with the log's magic (not a round-robin log, or a torn header).
    #[error("bad header: the file does not start with {MAGIC:?}")]
    BadMagic,
    /// The last record is incomplete: a torn write (crash in the middle of an append).
    #[error("torn record at byte {offset}: {have} of {need} bytes present")]
    Torn {
        /// Where the record starts.
        offset: usize,
        /// Bytes present from there on.
        have: usize,
        /// Bytes the record needs.
        need: usize,
    },
    /// A record's checksum does not match its bytes: corruption.
    #[error("corrupt record at byte {offset}: checksum {found:#010x}, expected {expected:#010x}")]
    Checksum {
        /// Where the record starts.
        offset: usize,
        /// The checksum stored.
        found: u32,
        /// The checksum of the bytes.
        expected: u32,
    },
    /// A record's declared length is impossible.
    #[error("corrupt record at byte {offset}: body length {len} out of range")]
    Length {
        /// Where the record starts.
        offset: usize,
        /// The length declared.
        len: usize,
    },
    /// A record is out of order (its view and position do not follow the previous record's).
    #[error("record at byte {offset} is out of order: position {position} after {previous}")]
    Order {
        /// Where the record starts.
        offset: usize,
        /// Its position.
        position: u64,
        /// The previous record's position.
        previous: u64,
    },
}

/// What [`decode`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// The records of the longest valid prefix.
    pub records: Vec<Record>,
    /// The length of that prefix in bytes (header included; 0 when the header is bad).
    pub valid_len: usize,
    /// Why decoding stopped before the end, if it did.
    pub tail: Option<TailError>,
}

/// Errors of the log.
#[derive(Debug, Error)]
pub enum LogError {
    /// The file system failed.
    #[error("durable log {path}: {source}")]
    Io {
        /// The log's path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file exists, is not empty, and is not a round-robin log: refusing to touch it.
    #[error(
        "{path} is not a squall round-robin log (bad magic); move it away or choose another path"
    )]
    NotALog {
        /// The path.
        path: PathBuf,
    },
    /// The log already holds records of this view or a later one: appending this view's
    /// records after them would make the log out of order (and truncated at the next open).
    #[error(
        "durable log {path} already holds view {logged}; a member that restarts must rejoin in a later view than {view}"
    )]
    StaleView {
        /// The log's path.
        path: PathBuf,
        /// The view of the log's last record.
        logged: u64,
        /// The view the group was started with.
        view: u64,
    },
    /// A payload too large for a record.
    #[error("payload of {len} bytes is too large for a log record (max {MAX_BODY})")]
    TooLarge {
        /// The payload's length.
        len: usize,
    },
}

/// When the log calls `fsync`.
///
/// ```
/// use squall_round_robin::log::FsyncPolicy;
/// assert_eq!(FsyncPolicy::default(), FsyncPolicy::EveryBatch);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// One `fdatasync` per receive batch (every record logged by one poll), before the batch
    /// counts as received (survives power loss).
    #[default]
    EveryBatch,
    /// `fdatasync` once at least this many records were appended since the last one; records
    /// count as received once written to the OS (survives a process crash, not power loss).
    EveryRecords(u64),
    /// Never `fsync`; received means written to the OS (survives a process crash only).
    Never,
}

const CRC_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// CRC-32 (IEEE 802.3, as zlib) of `bytes`.
///
/// ```
/// assert_eq!(squall_round_robin::log::crc32(b"123456789"), 0xcbf4_3926);
/// ```
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c = CRC_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// A frame of a checksummed record log that could not be read (see [`read_frame`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The frame is incomplete (a crash in the middle of an append).
    Torn {
        /// Where the frame starts.
        offset: usize,
        /// Bytes present from there on.
        have: usize,
        /// Bytes the frame needs.
        need: usize,
    },
    /// The declared body length is outside the log's bounds.
    Length {
        /// Where the frame starts.
        offset: usize,
        /// The length declared.
        len: usize,
    },
    /// The body does not match its checksum.
    Checksum {
        /// Where the frame starts.
        offset: usize,
        /// The checksum stored.
        found: u32,
        /// The checksum of the bytes.
        expected: u32,
    },
}

/// Appends one frame, `[body length: u32][crc32 of body: u32][body]`, whose body `body` writes.
/// The framing of every checksummed log in Squall (this one and the membership log).
///
/// ```
/// use squall_round_robin::log::{read_frame, write_frame};
/// let mut out = Vec::new();
/// write_frame(&mut out, |b| b.extend_from_slice(b"hello"));
/// assert_eq!(read_frame(&out, 0, 1..=64), Ok((&b"hello"[..], out.len())));
/// ```
pub fn write_frame(out: &mut Vec<u8>, body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME]);
    body(out);
    let len = u32::try_from(out.len() - start - FRAME).unwrap_or(u32::MAX);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    let crc = crc32(&out[start + FRAME..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Reads the frame at `at`: its body and where the next frame starts. The body length must lie
/// in `body_len`. Never panics, whatever the bytes.
pub fn read_frame(
    bytes: &[u8],
    at: usize,
    body_len: std::ops::RangeInclusive<usize>,
) -> Result<(&[u8], usize), FrameError> {
    let rest = bytes.len().saturating_sub(at);
    if rest < FRAME {
        return Err(FrameError::Torn {
            offset: at,
            have: rest,
            need: FRAME,
        });
    }
    let len = u32_at(bytes, at) as usize;
    if !body_len.contains(&len) {
        return Err(FrameError::Length { offset: at, len });
    }
    if rest < FRAME + len {
        return Err(FrameError::Torn {
            offset: at,
            have: rest,
            need: FRAME + len,
        });
    }
    let body = &bytes[at + FRAME..at + FRAME + len];
    let found = u32_at(bytes, at + 4);
    let expected = crc32(body);
    if found != expected {
        return Err(FrameError::Checksum {
            offset: at,
            found,
            expected,
        });
    }
    Ok((body, at + FRAME + len))
}

impl From<FrameError> for TailError {
    fn from(e: FrameError) -> TailError {
        match e {
            FrameError::Torn { offset, have, need } => TailError::Torn { offset, have, need },
            FrameError::Length { offset, len } => TailError::Length { offset, len },
            FrameError::Checksum {
                offset,
                found,
                expected,
            } => TailError::Checksum {
                offset,
                found,
                expected,
            },
        }
    }
}

/// Appends `r`'s encoding to `out`.
pub fn encode_record(r: &Record, out: &mut Vec<u8>) {
    encode_parts(r.view, r.seq, r.position, r.sender, &r.payload, out);
}

/// Appends the encoding of a record made of these parts to `out` (no payload copy first).
fn encode_parts(
    view: u64,
    seq: u64,
    position: u64,
    sender: NodeId,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    write_frame(out, |out| {
        out.extend_from_slice(&view.to_le_bytes());
        out.extend_from_slice(&seq.to_le_bytes());
        out.extend_from_slice(&position.to_le_bytes());
        out.extend_from_slice(&sender.0.to_le_bytes());
        out.extend_from_slice(payload);
    });
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

/// Decodes a whole log file's bytes: every record of the longest valid prefix, its length, and
/// why decoding stopped early. Never panics, whatever the bytes.
///
/// ```
/// use squall_round_robin::log::{decode, TailError};
/// assert_eq!(decode(b"").tail, None);
/// assert_eq!(decode(b"garbage!").tail, Some(TailError::BadMagic));
/// ```
pub fn decode(bytes: &[u8]) -> Decoded {
    let mut d = Decoded::default();
    if bytes.is_empty() {
        return d;
    }
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        d.tail = Some(TailError::BadMagic);
        return d;
    }
    let mut at = MAGIC.len();
    d.valid_len = at;
    let mut last: Option<(u64, u64)> = None;
    while at < bytes.len() {
        let (body, next) = match read_frame(bytes, at, BODY_HEADER..=MAX_BODY) {
            Ok(f) => f,
            Err(e) => {
                d.tail = Some(e.into());
                break;
            }
        };
        let r = Record {
            view: u64_at(body, 0),
            seq: u64_at(body, 8),
            position: u64_at(body, 16),
            sender: NodeId(u32_at(body, 24)),
            payload: body[BODY_HEADER..].to_vec(),
        };
        if let Some((view, position)) = last
            && !(r.view > view || (r.view == view && r.position == position + 1))
        {
            d.tail = Some(TailError::Order {
                offset: at,
                position: r.position,
                previous: position,
            });
            break;
        }
        last = Some((r.view, r.position));
        d.records.push(r);
        at = next;
        d.valid_len = at;
    }
    d
}

/// What [`Log::open`] found and repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The records that survived.
    pub records: Vec<Record>,
    /// Why the tail was dropped, if it was.
    pub truncated: Option<TailError>,
    /// How many bytes were dropped.
    pub dropped_bytes: u64,
}

/// The durable log: append records, sync per policy.
///
/// ```
/// use squall_round_robin::log::{FsyncPolicy, Log, Record};
/// use squall_transport::NodeId;
/// let path = std::env::temp_dir().join(format!("rr-log-doc-{}", std::process::id()));
/// let _ = std::fs::remove_file(&path);
/// let (mut log, rec) = Log::open(&path, FsyncPolicy::EveryBatch)?;
/// assert!(rec.records.is_empty());
/// log.append(&Record { view: 0, seq: 0, position: 0, sender: NodeId(0), payload: b"a".to_vec() })?;
/// log.sync()?;
/// drop(log);
/// let (_, rec) = Log::open(&path, FsyncPolicy::Never)?;
/// assert_eq!(rec.records.len(), 1);
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), squall_round_robin::log::LogError>(())
/// ```
#[derive(Debug)]
pub struct Log {
    path: PathBuf,
    file: File,
    policy: FsyncPolicy,
    buf: Vec<u8>,
    unsynced: u64,
    next: Option<(u64, u64)>,
}

impl Log {
    /// Opens (or creates) the log at `path`, truncating a torn or corrupt tail to the longest
    /// valid prefix (logged at `warn` with the reason), and returns what it holds.
    pub fn open(path: &Path, policy: FsyncPolicy) -> Result<(Log, Recovery), LogError> {
        let io = |source| LogError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        let d = decode(&bytes);
        let mut recovery = Recovery::default();
        if matches!(d.tail, Some(TailError::BadMagic)) {
            // A header shorter than the magic that is a prefix of it is a torn creation.
            if bytes.len() >= MAGIC.len() || !MAGIC.starts_with(&bytes) {
                return Err(LogError::NotALog {
                    path: path.to_path_buf(),
                });
            }
        }
        let keep = if bytes.len() < MAGIC.len() {
            0
        } else {
            d.valid_len
        };
        if keep < bytes.len() {
            recovery.dropped_bytes = (bytes.len() - keep) as u64;
            tracing::warn!(
                path = %path.display(),
                kept_records = d.records.len(),
                dropped_bytes = recovery.dropped_bytes,
                reason = %d.tail.as_ref().map_or_else(|| "torn header".to_string(), ToString::to_string),
                "durable log: truncating a torn or corrupt tail to the last valid record"
            );
            file.set_len(keep as u64).map_err(io)?;
            file.sync_data().map_err(io)?;
        }
        if keep == 0 {
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            file.write_all(MAGIC).map_err(io)?;
            file.sync_data().map_err(io)?;
        }
        file.seek(SeekFrom::End(0)).map_err(io)?;
        recovery.truncated = if keep < bytes.len() { d.tail } else { None };
        let next = d.records.last().map(|r| (r.view, r.position));
        recovery.records = d.records;
        Ok((
            Log {
                path: path.to_path_buf(),
                file,
                policy,
                buf: Vec::new(),
                unsynced: 0,
                next,
            },
            recovery,
        ))
    }

    /// Buffers a record; it reaches the file at the next [`sync`](Log::sync).
    pub fn append(&mut self, r: &Record) -> Result<(), LogError> {
        self.append_parts(r.view, r.seq, r.position, r.sender, &r.payload)
    }

    /// Buffers the record made of these parts (as [`append`](Log::append), without building a
    /// [`Record`] and so without copying the payload twice).
    pub fn append_parts(
        &mut self,
        view: u64,
        seq: u64,
        position: u64,
        sender: NodeId,
        payload: &[u8],
    ) -> Result<(), LogError> {
        if payload.len() > MAX_BODY - BODY_HEADER {
            return Err(LogError::TooLarge { len: payload.len() });
        }
        encode_parts(view, seq, position, sender, payload, &mut self.buf);
        self.unsynced += 1;
        self.next = Some((view, position));
        Ok(())
    }

    /// Writes the buffered records and syncs per the policy. Once it returns, they count as
    /// persisted.
    pub fn sync(&mut self) -> Result<(), LogError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let io = |source| LogError::Io {
            path: self.path.clone(),
            source,
        };
        self.file.write_all(&self.buf).map_err(io)?;
        self.buf.clear();
        let sync = match self.policy {
            FsyncPolicy::EveryBatch => true,
            FsyncPolicy::EveryRecords(n) => self.unsynced >= n,
            FsyncPolicy::Never => false,
        };
        if sync {
            self.file.sync_data().map_err(io)?;
            self.unsynced = 0;
        }
        Ok(())
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Cuts the log at `path` back to its records with a sequence number below `seq` (a ragged
    /// trim is a gap-free prefix of the sequence order, so everything past it is the log's
    /// tail), syncs, and returns the records that remain. A missing file is an empty log (it is
    /// created). Idempotent: cutting again at the same `seq` changes nothing. The log must not
    /// be open for appending elsewhere.
    ///
    /// ```
    /// use squall_round_robin::log::{FsyncPolicy, Log, Record};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("rr-log-cut-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let (mut log, _) = Log::open(&path, FsyncPolicy::EveryBatch)?;
    /// for (seq, position) in [(0, 7), (1, 8), (3, 9)] {
    ///     log.append(&Record { view: 2, seq, position, sender: NodeId(0), payload: vec![1] })?;
    /// }
    /// log.sync()?;
    /// drop(log);
    /// let kept = Log::cut(&path, 2)?;
    /// assert_eq!(kept.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![0, 1]);
    /// let (_, rec) = Log::open(&path, FsyncPolicy::Never)?;
    /// assert_eq!(rec.records, kept);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn cut(path: &Path, seq: u64) -> Result<Vec<Record>, LogError> {
        let (log, rec) = Log::open(path, FsyncPolicy::EveryBatch)?;
        let cut = rec.records.iter().any(|r| r.seq >= seq);
        let records = Log::cut_records(path, rec.records, seq)?;
        if cut {
            log.file.sync_data().map_err(|source| LogError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        }
        Ok(records)
    }

    /// [`Log::cut`] for a caller that already holds the file's records — what
    /// [`Log::open`] returned, with nothing appended since — so the file is not read again:
    /// the kept length is computed from the records' payload lengths (no encoding, no
    /// checksum). Untouched if nothing is past `seq`. **Not synced**: the truncation becomes
    /// durable with the file system's next flush (a caller that needs it now syncs the file;
    /// [`Log::cut`] does). A total restart reads its last view's log once to publish its
    /// logged counts and cuts it with those records; it needs no sync there, since every
    /// later restart cuts that view's log again from the decision logged before.
    ///
    /// ```
    /// use squall_round_robin::log::{FsyncPolicy, Log, Record};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("rr-log-cut-records-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let (mut log, _) = Log::open(&path, FsyncPolicy::EveryBatch)?;
    /// for seq in 0..3 {
    ///     log.append(&Record { view: 1, seq, position: seq, sender: NodeId(0), payload: vec![7; 5] })?;
    /// }
    /// log.sync()?;
    /// drop(log);
    /// let (_, rec) = Log::open(&path, FsyncPolicy::Never)?;
    /// let kept = Log::cut_records(&path, rec.records, 2)?;
    /// assert_eq!(kept.len(), 2);
    /// assert_eq!(Log::open(&path, FsyncPolicy::Never)?.1.records, kept);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn cut_records(
        path: &Path,
        mut records: Vec<Record>,
        seq: u64,
    ) -> Result<Vec<Record>, LogError> {
        let Some(first_past) = records.iter().position(|r| r.seq >= seq) else {
            return Ok(records);
        };
        // The frame, the body header, the payload: what `encode_record` writes.
        let keep: usize = MAGIC.len()
            + (records[..first_past].iter())
                .map(|r| FRAME + BODY_HEADER + r.payload.len())
                .sum::<usize>();
        let io = |source| LogError::Io {
            path: path.to_path_buf(),
            source,
        };
        tracing::info!(
            path = %path.display(),
            seq,
            dropped_records = records.len() - first_past,
            "durable log: cut past the trim"
        );
        let file = OpenOptions::new().write(true).open(path).map_err(io)?;
        file.set_len(keep as u64).map_err(io)?;
        records.truncate(first_past);
        Ok(records)
    }

    /// The view and position of the last record appended, if any.
    pub fn last(&self) -> Option<(u64, u64)> {
        self.next
    }
}
