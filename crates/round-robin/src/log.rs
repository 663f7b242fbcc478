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
        let mut file = open_rw(path).map_err(io)?;
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
    /// tail), truncates a torn or corrupt tail as [`Log::open`] does, syncs, and says what
    /// remains. A missing file is an empty log (it is created). Idempotent: cutting again at
    /// the same `seq` changes nothing. The log must not be open for appending elsewhere.
    ///
    /// Reads the file with [`Log::skim`] (frames and body headers through a buffer of
    /// [`DEFAULT_READ_BUFFER`] bytes, payloads skipped), so memory does not grow with the log.
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
    /// assert_eq!(kept.last.map(|r| (r.seq, r.position)), Some((1, 8)));
    /// let (_, rec) = Log::open(&path, FsyncPolicy::Never)?;
    /// assert_eq!(rec.records.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![0, 1]);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn cut(path: &Path, seq: u64) -> Result<Skimmed, LogError> {
        Log::skim(path, seq, None, DEFAULT_READ_BUFFER, true)
    }

    /// Reads the log at `path` front to back through a buffer of `buffer` bytes
    /// ([`Reader`] in [`ReadMode::Skim`]: frames and body headers only, payloads skipped, no
    /// checksums), stops at the first record whose sequence number is `seq` or more, and
    /// truncates the file there: [`Log::cut`] at `seq`, or with `u64::MAX` what
    /// [`Log::open`] repairs. When it reached the end of the valid prefix (nothing cut), the
    /// last record's checksum is checked too (a crash can leave a full-length record of
    /// garbage); one that fails is the torn tail and goes. A corrupt record *before* the last
    /// is not seen here: a [`ReadMode::Verify`] reader of the file finds it.
    ///
    /// `from`: a [`Mark`] of an earlier skim of the same file (with nothing but appends and
    /// cuts at or past the mark since) whose record's sequence number is below `seq`: the skim
    /// starts there, so a cut near the end reads only the end. `sync`: `fdatasync` the file if
    /// it was truncated. A missing file is created empty. Memory: the buffer (or the longest
    /// record's frame and header, if longer), plus [`Skimmed::marks`].
    ///
    /// ```
    /// use squall_round_robin::log::{FsyncPolicy, Log, Record};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("rr-log-skim-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let (mut log, _) = Log::open(&path, FsyncPolicy::EveryBatch)?;
    /// for seq in 0..1000 {
    ///     log.append(&Record { view: 1, seq, position: seq, sender: NodeId(0), payload: vec![7; 100] })?;
    /// }
    /// log.sync()?;
    /// drop(log);
    /// let all = Log::skim(&path, u64::MAX, None, 4096, false)?;
    /// assert_eq!((all.records, all.last.as_ref().map(|r| r.seq)), (1000, Some(999)));
    /// assert!(all.peak_buffer <= 4096 && all.marks.len() > 10);
    /// // Cut at 990 from the last mark below it: reads only the end of the file.
    /// let from = all.marks.iter().rev().find(|m| m.seq < 990).copied();
    /// let cut = Log::skim(&path, 990, from.as_ref(), 4096, true)?;
    /// assert_eq!(cut.last.map(|r| r.position), Some(989));
    /// assert_eq!(Log::open(&path, FsyncPolicy::Never)?.1.records.len(), 990);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn skim(
        path: &Path,
        seq: u64,
        from: Option<&Mark>,
        buffer: usize,
        sync: bool,
    ) -> Result<Skimmed, LogError> {
        let io = |source| LogError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = open_rw(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut reader = match from {
            Some(m) => {
                file.seek(SeekFrom::Start(m.offset)).map_err(io)?;
                Reader::at(&mut file, len, m.offset, buffer, ReadMode::Skim)
            }
            None => Reader::new(&mut file, len, buffer, ReadMode::Skim),
        };
        let mut out = Skimmed::default();
        let mut prev: Option<(Record, usize)> = None;
        let mut last: Option<(Record, usize)> = None;
        let mut cut_at: Option<usize> = None;
        let mut next_mark = from.map_or(0, |m| m.offset as usize);
        while let Some(r) = reader.next_record().map_err(io)? {
            let at = reader.last_record_at().map_or(0, |(at, _)| at);
            if r.seq >= seq {
                cut_at = Some(at);
                break;
            }
            if at >= next_mark {
                out.marks.push(Mark {
                    offset: at as u64,
                    view: r.view,
                    seq: r.seq,
                    position: r.position,
                });
                next_mark = at + buffer.max(1);
            }
            out.records += 1;
            prev = last.take();
            last = Some((r, at));
        }
        out.peak_buffer = reader.peak_buffer();
        let mut tail = reader.tail().cloned();
        let mut keep = match cut_at {
            Some(at) => at,
            None => reader.valid_len(),
        };
        drop(reader);
        if cut_at.is_none()
            && let Some(at) = last.as_ref().map(|(_, at)| *at)
        {
            // The crash point: check the last record's checksum.
            let mut frame = vec![0; keep - at];
            file.seek(SeekFrom::Start(at as u64)).map_err(io)?;
            file.read_exact(&mut frame).map_err(io)?;
            out.peak_buffer = out.peak_buffer.max(frame.len());
            let found = u32_at(&frame, 4);
            let expected = crc32(&frame[FRAME..]);
            if found != expected {
                tail = Some(TailError::Checksum {
                    offset: at,
                    found,
                    expected,
                });
                keep = at;
                out.records -= 1;
                out.marks.retain(|m| m.offset < at as u64);
                last = prev.take();
            }
        }
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if matches!(tail, Some(TailError::BadMagic))
            && (len >= MAGIC.len() || !MAGIC.starts_with(&read_prefix(&mut file, len).map_err(io)?))
        {
            return Err(LogError::NotALog {
                path: path.to_path_buf(),
            });
        }
        if keep < len {
            out.dropped_bytes = (len - keep) as u64;
            if cut_at.is_some() {
                tracing::info!(path = %path.display(), seq, dropped_bytes = out.dropped_bytes, "durable log: cut past the trim");
            } else {
                tracing::warn!(
                    path = %path.display(),
                    dropped_bytes = out.dropped_bytes,
                    reason = %tail.as_ref().map_or_else(|| "torn header".to_string(), ToString::to_string),
                    "durable log: truncating a torn or corrupt tail to the last valid record"
                );
            }
            file.set_len(keep as u64).map_err(io)?;
        }
        if keep == 0 {
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            file.write_all(MAGIC).map_err(io)?;
            keep = MAGIC.len();
        }
        if sync && keep != len {
            file.sync_data().map_err(io)?;
        }
        out.truncated = if cut_at.is_none() { tail } else { None };
        out.len = keep as u64;
        out.last = last.map(|(r, _)| r);
        Ok(out)
    }

    /// A [`ReadMode::Verify`] reader of the log file at `path` (its length now), through a
    /// buffer of `buffer` bytes: decodes it incrementally, as [`decode`] decodes a whole file.
    ///
    /// ```
    /// use squall_round_robin::log::{FsyncPolicy, Log, Record};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("rr-log-reader-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let (mut log, _) = Log::open(&path, FsyncPolicy::EveryBatch)?;
    /// for seq in 0..50 {
    ///     log.append(&Record { view: 1, seq, position: seq, sender: NodeId(0), payload: vec![1; 300] })?;
    /// }
    /// log.sync()?;
    /// let mut reader = Log::reader(&path, 1024)?;
    /// let mut n = 0;
    /// while let Some(r) = reader.next_record().map_err(|source| squall_round_robin::log::LogError::Io { path: path.clone(), source })? {
    ///     assert_eq!((r.seq, r.payload.len()), (n, 300));
    ///     n += 1;
    /// }
    /// assert_eq!((n, reader.tail()), (50, None));
    /// assert!(reader.peak_buffer() <= 1024);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn reader(path: &Path, buffer: usize) -> Result<Reader<File>, LogError> {
        let io = |source| LogError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        Ok(Reader::new(file, len, buffer, ReadMode::Verify))
    }

    /// The view and position of the last record appended, if any.
    pub fn last(&self) -> Option<(u64, u64)> {
        self.next
    }
}

/// A place in a log file that a later [`Log::skim`] may start from: a record's offset and
/// its header. A skim leaves one at most every `buffer` bytes, so its marks take 32 bytes per
/// `buffer` bytes of log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    /// Where the record starts in the file.
    pub offset: u64,
    /// Its view.
    pub view: u64,
    /// Its sequence number.
    pub seq: u64,
    /// Its position.
    pub position: u64,
}

/// What [`Log::skim`] (and [`Log::cut`]) found and left.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skimmed {
    /// Records kept that the skim read (from its mark on, if it started at one).
    pub records: u64,
    /// The last record kept, payload left out (`None`: none read).
    pub last: Option<Record>,
    /// The file's length now.
    pub len: u64,
    /// Why a tail was dropped before the end of the file (not set for a cut at `seq`).
    pub truncated: Option<TailError>,
    /// How many bytes were dropped (a cut's or a torn tail's).
    pub dropped_bytes: u64,
    /// The most bytes the skim held in its buffer at once.
    pub peak_buffer: usize,
    /// Marks of records kept, ascending, at most one per `buffer` bytes.
    pub marks: Vec<Mark>,
}

/// Opens (or creates) a log file for reading and writing, never truncating it.
fn open_rw(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

fn read_prefix(file: &mut File, len: usize) -> std::io::Result<Vec<u8>> {
    let mut b = vec![0; len.min(MAGIC.len())];
    file.seek(SeekFrom::Start(0))?;
    file.read_exact(&mut b)?;
    Ok(b)
}

/// What [`Reader`] does with each record's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// Checks every record's checksum and copies its payload out: what [`decode`] does.
    Verify,
    /// Reads only each record's frame and body header (length, view, sequence number, position,
    /// sender) and skips its payload (seeking past it when it is not buffered): no checksum, no
    /// copy. Finds torn, impossibly long and out-of-order records as [`decode`] does, but not a
    /// record whose bytes fail their checksum; yielded records have empty payloads.
    Skim,
}

/// The default buffer of a [`Reader`] (1 MiB).
pub const DEFAULT_READ_BUFFER: usize = 1 << 20;

/// An incremental decoder of a log file: reads it front to back through a buffer of a bounded
/// size and yields one [`Record`] at a time, so that a log far larger than memory can be read.
///
/// In [`ReadMode::Verify`] it agrees with [`decode`] on every input: the same records, then
/// the same [`valid_len`](Reader::valid_len) and the same [`tail`](Reader::tail) (why it
/// stopped before the end; a property test and a fuzz target compare the two). The buffer
/// holds at most `max(buffer, largest record)` bytes: a record is decoded from one contiguous
/// slice, so a record longer than the buffer grows it to that record's length (never beyond
/// the bytes the file holds, which is checked against its length before reading); it shrinks
/// back to `buffer` on the next refill. [`peak_buffer`](Reader::peak_buffer) reports the most
/// it held.
///
/// ```
/// use squall_round_robin::log::{decode, encode_record, MAGIC, ReadMode, Reader, Record};
/// use squall_transport::NodeId;
/// let mut file = MAGIC.to_vec();
/// for position in 0..100 {
///     let r = Record { view: 1, seq: position, position, sender: NodeId(0), payload: vec![7; 50] };
///     encode_record(&r, &mut file);
/// }
/// file.extend_from_slice(&[1, 2, 3]); // a torn append
/// let mut reader = Reader::new(std::io::Cursor::new(&file), file.len() as u64, 128, ReadMode::Verify);
/// let mut records = Vec::new();
/// while let Some(r) = reader.next_record()? {
///     records.push(r);
/// }
/// let whole = decode(&file);
/// assert_eq!(records, whole.records);
/// assert_eq!((reader.valid_len(), reader.tail()), (whole.valid_len, whole.tail.as_ref()));
/// assert!(reader.peak_buffer() <= 128);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Reader<R> {
    src: R,
    mode: ReadMode,
    /// The configured buffer size.
    chunk: usize,
    /// Bytes `[start, end)` of `buf` are the file's bytes from offset `base + start`.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    base: usize,
    /// The file's length.
    total: usize,
    /// Where the source's read position is (file offset).
    src_at: usize,
    peak: usize,
    started: bool,
    done: bool,
    valid_len: usize,
    tail: Option<TailError>,
    last: Option<(u64, u64)>,
    last_at: Option<(usize, usize)>,
    read: u64,
}

impl<R: Read + Seek> Reader<R> {
    /// A reader of the `len` bytes of `src` from its current position (the file's start),
    /// buffering `buffer` bytes at a time (at least one record's frame and header: smaller
    /// values are raised to [`FRAME`] + [`BODY_HEADER`]).
    pub fn new(src: R, len: u64, buffer: usize, mode: ReadMode) -> Reader<R> {
        Reader {
            src,
            mode,
            chunk: buffer.max(FRAME + BODY_HEADER),
            buf: Vec::new(),
            start: 0,
            end: 0,
            base: 0,
            total: usize::try_from(len).unwrap_or(usize::MAX),
            src_at: 0,
            peak: 0,
            started: false,
            done: false,
            valid_len: 0,
            tail: None,
            last: None,
            last_at: None,
            read: 0,
        }
    }

    /// A reader that starts at byte `offset` of the file (a record's start, the source
    /// positioned there, as a [`Mark`] says), skipping the header check; the order check
    /// starts afresh there.
    pub fn at(src: R, len: u64, offset: u64, buffer: usize, mode: ReadMode) -> Reader<R> {
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        let mut r = Reader::new(src, len, buffer, mode);
        r.started = true;
        r.base = offset.min(r.total);
        r.src_at = r.base;
        r.valid_len = r.base;
        r
    }

    /// Makes `need` bytes from the current record's start buffered (the caller checked that
    /// the file holds them). A file shorter than its stated length is an I/O error.
    fn fill(&mut self, need: usize) -> std::io::Result<()> {
        if self.end - self.start >= need {
            return Ok(());
        }
        // Move what is left to the front; size the buffer for the configured chunk, or for
        // this record if it is longer, but never beyond what the file still holds.
        let size = (self.chunk.max(need)).min(self.total - self.base - self.start);
        if self.buf.len() == size {
            self.buf.copy_within(self.start..self.end, 0);
        } else {
            let mut next = vec![0; size];
            next[..self.end - self.start].copy_from_slice(&self.buf[self.start..self.end]);
            self.buf = next;
        }
        self.base += self.start;
        self.end -= self.start;
        self.start = 0;
        let want = size.min(self.total - self.base);
        while self.end < want {
            let n = self.src.read(&mut self.buf[self.end..want])?;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "log file shorter than its length {} (ends at {})",
                        self.total,
                        self.base + self.end
                    ),
                ));
            }
            self.end += n;
            self.src_at = self.base + self.end;
        }
        self.peak = self.peak.max(self.buf.len());
        Ok(())
    }

    /// Skips `n` bytes past the buffered ones (seeking the source).
    fn skip(&mut self, n: usize) -> std::io::Result<()> {
        let buffered = self.end - self.start;
        if n <= buffered {
            self.start += n;
            return Ok(());
        }
        let to = self.base + self.start + n;
        let delta = i64::try_from(to - self.src_at).unwrap_or(i64::MAX);
        self.src.seek(SeekFrom::Current(delta))?;
        self.src_at = to;
        self.base = to;
        self.start = 0;
        self.end = 0;
        Ok(())
    }

    fn stop(&mut self, why: TailError) -> std::io::Result<Option<Record>> {
        self.tail = Some(why);
        self.done = true;
        Ok(None)
    }

    /// The next record of the valid prefix, or `None` at its end ([`tail`](Reader::tail)
    /// then says why, if before the end of the file). Errors are the file system's only: a
    /// torn or corrupt record ends the valid prefix as in [`decode`].
    pub fn next_record(&mut self) -> std::io::Result<Option<Record>> {
        if self.done {
            return Ok(None);
        }
        if !self.started {
            self.started = true;
            if self.total == 0 {
                self.done = true;
                return Ok(None);
            }
            if self.total < MAGIC.len() {
                return self.stop(TailError::BadMagic);
            }
            self.fill(MAGIC.len())?;
            if &self.buf[self.start..self.start + MAGIC.len()] != MAGIC {
                return self.stop(TailError::BadMagic);
            }
            self.start += MAGIC.len();
            self.valid_len = MAGIC.len();
        }
        let at = self.base + self.start;
        let rest = self.total - at;
        if rest == 0 {
            self.done = true;
            return Ok(None);
        }
        if rest < FRAME {
            return self.stop(TailError::Torn {
                offset: at,
                have: rest,
                need: FRAME,
            });
        }
        self.fill(FRAME)?;
        let len = u32_at(&self.buf, self.start) as usize;
        if !(BODY_HEADER..=MAX_BODY).contains(&len) {
            return self.stop(TailError::Length { offset: at, len });
        }
        if rest < FRAME + len {
            return self.stop(TailError::Torn {
                offset: at,
                have: rest,
                need: FRAME + len,
            });
        }
        let head = match self.mode {
            ReadMode::Verify => FRAME + len,
            ReadMode::Skim => FRAME + BODY_HEADER,
        };
        self.fill(head)?;
        let frame = &self.buf[self.start..self.start + head];
        let body = &frame[FRAME..];
        if self.mode == ReadMode::Verify {
            let found = u32_at(frame, 4);
            let expected = crc32(body);
            if found != expected {
                return self.stop(TailError::Checksum {
                    offset: at,
                    found,
                    expected,
                });
            }
        }
        let r = Record {
            view: u64_at(body, 0),
            seq: u64_at(body, 8),
            position: u64_at(body, 16),
            sender: NodeId(u32_at(body, 24)),
            payload: match self.mode {
                ReadMode::Verify => body[BODY_HEADER..].to_vec(),
                ReadMode::Skim => Vec::new(),
            },
        };
        if let Some((view, position)) = self.last
            && !(r.view > view || (r.view == view && r.position == position + 1))
        {
            return self.stop(TailError::Order {
                offset: at,
                position: r.position,
                previous: position,
            });
        }
        self.start += head;
        self.skip(FRAME + len - head)?;
        self.last = Some((r.view, r.position));
        self.last_at = Some((at, FRAME + len));
        self.valid_len = at + FRAME + len;
        self.read += 1;
        Ok(Some(r))
    }

    /// The length of the valid prefix read so far (header included; 0 when the header is bad).
    pub fn valid_len(&self) -> usize {
        self.valid_len
    }

    /// Why reading stopped before the end of the file, once [`next_record`](Reader::next_record)
    /// returned `None`.
    pub fn tail(&self) -> Option<&TailError> {
        self.tail.as_ref()
    }

    /// The most bytes the buffer held at once.
    pub fn peak_buffer(&self) -> usize {
        self.peak
    }

    /// Records yielded so far.
    pub fn records_read(&self) -> u64 {
        self.read
    }

    /// Where the last record yielded starts and how long it is (frame included).
    pub fn last_record_at(&self) -> Option<(usize, usize)> {
        self.last_at
    }
}
