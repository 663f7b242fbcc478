//! The durable mode's local log: an append-only file of checksummed records, one per
//! application message, in the agreed (total) order; a member logs a message before it counts it
//! as received, so the log can run ahead of delivery but is always a prefix of the agreed order.
//!
//! Layout: an 8-byte magic (`SQRRLOG1`), then records of
//! `[body length: u32 LE][CRC-32 of the body: u32 LE][body]`, where the body is
//! `[view: u64][seq: u64][position: u64][sender: u32][payload]` (all little endian).
//! A *compacted* log ([`Log::compact`]: a prefix a checkpoint covers dropped) starts with
//! `SQRRLOG2` and a [`Base`] frame (what the dropped prefix ended with), then the kept records
//! in the same layout; every reader here reads both.
//!
//! [`decode`] is the pure decoder (fuzzed): it returns every record of the longest valid prefix
//! and says why it stopped. [`Log::open`] truncates a torn or corrupt tail to that prefix and
//! logs (at `warn`) what it dropped, so a crash in the middle of an append never leaves a log that
//! fails to open, and never a log whose tail holds garbage.
//!
//! **The side index** (`<log>.idx`, [`index_path`]): `SQRRIDX1`, then one 64-byte
//! [`IndexEntry`] (a record's offset, header, frame and a boot tag, checksummed) per
//! [`LogOptions::index_every`] bytes of log, appended after the [`Log::sync`] that wrote the
//! record. [`Log::skim`] (and so [`Log::cut`] and [`Log::open`]) starts from the last entry
//! that is trusted and checks out against the log ([`scan`]), so it reads the log's end, not
//! the whole file; without one it reads the whole file. How an entry is told from garbage, and
//! why starting there is sound for any crash point:
//!
//! - *Garbage or a torn entry*: the entry's CRC-32 fails, its reserved word is not 0, or it is
//!   not after the previous entry ([`decode_index`] stops there).
//! - *A stale entry* (the log was cut, replaced or damaged since): the record at its offset
//!   must be whole in the file, with the entry's length, stored checksum and header, and its
//!   checksum must hold; the file must start with the log's magic.
//! - *Rebuilt*: when [`Log::open`]'s skim had to read the whole file, it syncs the log and
//!   rewrites the index from what it read ([`rebuild_index`]), so the next skim is short.
//! - *Trust*: an entry is written only after its record and everything before it reached the
//!   file — after the `fdatasync` when the policy synced (`boot` 0: durable), else tagged with
//!   the running boot ([`boot_tag`]), trusted only in that boot (a process crash loses nothing
//!   the OS was given; a power loss may lose unsynced bytes before the entry, so after a reboot
//!   such an entry is not used). Under [`FsyncPolicy::EveryRecords`] an entry waits until a
//!   sync covers its record (inline or on the syncer thread) and is then written with `boot`
//!   0 (s22), so after a reboot the skim starts at the last synced entry, and bit rot in a
//!   synced record that a skim reads is [`LogError::Damaged`] when a later synced entry
//!   checks out, not cut as a tear; under [`FsyncPolicy::Never`] entries are written tagged
//!   at once. So a crash cannot have torn anything before a trusted, checked entry; from
//!   there the skim runs exactly as from the file's start (the same bytes, the same checks,
//!   the same torn tail cut). Damage a crash does not cause (bit rot, an
//!   edited file) before the entry is not seen by the skim; the replay's [`ReadMode::Verify`]
//!   reader finds it (as it finds a broken checksum before the last record, which the skim
//!   never checks).

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use squall_transport::{NodeId, Waker};
use thiserror::Error;

pub mod syncer;

/// The file's first eight bytes.
pub const MAGIC: &[u8; 8] = b"SQRRLOG1";
/// The first eight bytes of a compacted log ([`Log::compact`]): a [`Base`] frame follows them.
pub const MAGIC_COMPACTED: &[u8; 8] = b"SQRRLOG2";
/// Bytes of a [`Base`]'s body (its frame adds [`FRAME`]).
pub const BASE_BODY: usize = 44;
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
    /// A compacted log's [`Base`] frame is torn, corrupt or impossible: the file's header is
    /// bad (a crash never leaves this: a compacted log is synced before it is renamed in).
    #[error("bad base of a compacted log: {why}")]
    Base {
        /// What is wrong with it.
        why: &'static str,
    },
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
    /// A compacted log's base: what its dropped prefix ended with.
    pub base: Option<Base>,
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
    /// A compacted log's header is bad (its [`Base`] frame torn, corrupt or impossible):
    /// not something a crash leaves (the file is synced before it is renamed in); refusing to
    /// touch it.
    #[error("durable log {path}: {why}; refusing to touch it")]
    BadHeader {
        /// The log's path.
        path: PathBuf,
        /// What is wrong.
        why: TailError,
    },
    /// A cut at a sequence number at or below the largest one a compaction dropped: it would
    /// cut into records that are gone ([`Log::compact`] only drops what a checkpoint covers,
    /// and a cut never goes below what was delivered).
    #[error(
        "durable log {path}: a cut at sequence number {seq} reaches into its compacted prefix (up to {max_seq})"
    )]
    Compacted {
        /// The log's path.
        path: PathBuf,
        /// The cut asked for.
        seq: u64,
        /// The largest sequence number of the dropped prefix.
        max_seq: u64,
    },
    /// A record fails its checksum, and the side index proves that a record after it was
    /// synced (an entry with `boot` 0 that checks out): the bad record was synced too, so it is
    /// damage a crash does not cause (bit rot, an edited file), not a torn unsynced write, and
    /// cutting it would drop synced records. Refusing to touch the file (see
    /// [`Log::skim_with`]).
    #[error(
        "durable log {path}: {why}, yet the record at byte {synced_at} after it was synced; refusing to cut synced records"
    )]
    Damaged {
        /// The log's path.
        path: PathBuf,
        /// The bad record ([`TailError::Checksum`]).
        why: TailError,
        /// Where a record after it starts that the index says was synced.
        synced_at: u64,
    },
    /// An option out of its bounds.
    #[error("durable log options: {0}")]
    Options(&'static str),
    /// A payload too large for a record.
    #[error("payload of {len} bytes is too large for a log record (max {MAX_BODY})")]
    TooLarge {
        /// The payload's length.
        len: usize,
    },
}

/// Where a [`Log`]'s `fdatasync`s run (see [`Log::flush`]).
///
/// ```
/// use squall_round_robin::log::SyncMode;
/// assert_eq!(SyncMode::default(), SyncMode::Thread);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyncMode {
    /// On a thread the log owns (`squall-log-sync`, spawned at the first sync the log needs,
    /// joined when it is dropped): [`Log::flush`] writes the batch and hands its sync over,
    /// never waiting; one `fdatasync` covers every batch written before it started (group
    /// commit); [`Log::durable_mark`] reports a batch once that sync returned. The default.
    #[default]
    Thread,
    /// Inside [`Log::flush`], on the caller's thread: deterministic, for the simulator, and the
    /// behaviour before the syncer thread (to compare with).
    Inline,
}

/// When the log calls `fsync`, and so what a delivery and `Upcall::Durable` promise.
///
/// Under every policy a record counts as received once the policy says it is durable, and a
/// message is delivered once every member received it, so a delivered message survives a
/// *process* crash of every member. [`Upcall::Durable(p)`](squall_ordering::Upcall::Durable)
/// (in durable mode, from [`RoundRobin`](crate::RoundRobin)) promises more: every position up
/// to `p` is *synced* (an `fdatasync` returned after its write) in the log of every member of
/// the view, so it survives a power loss of all of them. Under `EveryBatch` that is every
/// delivered position; under `EveryRecords` it lags delivery to the members' last syncs (each
/// publishes what its syncs covered in the `rr_synced` column, and `Durable` reports the
/// delivered positions below its minimum); under `Never` nothing is reported.
///
/// ```
/// use squall_round_robin::log::FsyncPolicy;
/// assert_eq!(FsyncPolicy::default(), FsyncPolicy::EveryBatch);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// One `fdatasync` per receive batch (every record logged by one poll), before the batch
    /// counts as received (survives power loss). `Durable` follows delivery: every delivered
    /// position is reported durable.
    #[default]
    EveryBatch,
    /// `fdatasync` once at least this many records were appended since the last one; records
    /// count as received once written to the OS (a delivery survives a process crash, not a
    /// power loss). `Durable` reports only what every member synced: it lags delivery by up to
    /// about this many records per member (and what a view change's trim delivers is reported
    /// by the next view's reports, once the ended log's sync and the next syncs came).
    EveryRecords(u64),
    /// Never `fsync`; received means written to the OS (survives a process crash only). No
    /// `Upcall::Durable` is ever reported: nothing is promised to survive a power loss (a
    /// checkpoint's `Written` promises its own state, synced).
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

/// Whether a record at `(view, position)` may follow one at `prev`: a later view, or the next
/// position in the same view (never by overflowing: a position of `u64::MAX` has no next).
fn follows(prev: (u64, u64), (view, position): (u64, u64)) -> bool {
    view > prev.0 || (view == prev.0 && prev.1.checked_add(1) == Some(position))
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
    let compacted = bytes.len() >= MAGIC.len() && &bytes[..MAGIC.len()] == MAGIC_COMPACTED;
    if !compacted && (bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC) {
        d.tail = Some(TailError::BadMagic);
        return d;
    }
    let mut at = MAGIC.len();
    let mut last: Option<(u64, u64)> = None;
    if compacted {
        match decode_base(&bytes[at..]) {
            Ok(b) => {
                last = Some((b.view, b.position));
                d.base = Some(b);
                at = COMPACTED_HEADER;
            }
            Err(why) => {
                d.tail = Some(why);
                return d;
            }
        }
    }
    d.valid_len = at;
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
            && !follows((view, position), (r.view, r.position))
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

/// Bytes of a compacted log's header: [`MAGIC_COMPACTED`] and the [`Base`] frame. Its first
/// record starts there.
pub const COMPACTED_HEADER: usize = MAGIC.len() + FRAME + BASE_BODY;

/// What a compacted log ([`MAGIC_COMPACTED`], written by [`Log::compact`]) knows of the
/// records it dropped: the last one's header, the largest sequence number among them, and
/// where its first kept record was in the log before it was ever compacted. The skim and the
/// readers treat it as the record before the file's first one: its header is the skim's
/// [`Skimmed::last`] when no record follows (so the logged counts, which follow from the
/// last sequence number, are those of the uncompacted log), the first record's order is
/// checked against it, and its `max_seq` is the dropped prefix's (a cut at or below it would
/// cut into what is gone: [`LogError::Compacted`]).
///
/// Layout: a frame (`[body length = 44: u32][CRC-32 of the body: u32]`) whose body is
/// `[view: u64][seq: u64][position: u64][sender: u32][max_seq: u64][origin: u64]` (little
/// endian), right after the magic.
///
/// ```
/// use squall_round_robin::log::{decode_base, encode_base, Base};
/// use squall_transport::NodeId;
/// let b = Base { view: 3, seq: 41, position: 20, sender: NodeId(1), max_seq: 41, origin: 4096 };
/// let mut out = Vec::new();
/// encode_base(&b, &mut out);
/// assert_eq!(decode_base(&out), Ok(b));
/// out[12] ^= 1;
/// assert!(decode_base(&out).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Base {
    /// The last dropped record's view.
    pub view: u64,
    /// Its sequence number.
    pub seq: u64,
    /// Its position.
    pub position: u64,
    /// Its sender.
    pub sender: NodeId,
    /// The largest sequence number of the dropped records (at least `seq`).
    pub max_seq: u64,
    /// The offset the file's first record had in the log before any compaction (so a byte
    /// at offset `x` ≥ [`COMPACTED_HEADER`] here was at `origin + x - COMPACTED_HEADER`).
    pub origin: u64,
}

impl Base {
    /// The last dropped record's header as a [`Record`] (no payload).
    pub fn record(&self) -> Record {
        Record {
            view: self.view,
            seq: self.seq,
            position: self.position,
            sender: self.sender,
            payload: Vec::new(),
        }
    }
}

/// Appends `b`'s frame (what follows [`MAGIC_COMPACTED`]) to `out`.
pub fn encode_base(b: &Base, out: &mut Vec<u8>) {
    write_frame(out, |out| {
        out.extend_from_slice(&b.view.to_le_bytes());
        out.extend_from_slice(&b.seq.to_le_bytes());
        out.extend_from_slice(&b.position.to_le_bytes());
        out.extend_from_slice(&b.sender.0.to_le_bytes());
        out.extend_from_slice(&b.max_seq.to_le_bytes());
        out.extend_from_slice(&b.origin.to_le_bytes());
    });
}

/// Decodes a [`Base`] frame from the start of `bytes` (what follows the magic; bytes after
/// the frame are ignored). Strict: the frame must be whole, exactly [`BASE_BODY`] bytes long,
/// its checksum must hold, `max_seq` must be at least `seq`, and `origin` must be past the
/// end of a first record. Never panics, whatever the bytes.
pub fn decode_base(bytes: &[u8]) -> Result<Base, TailError> {
    let why = |why| TailError::Base { why };
    let (body, _) = read_frame(bytes, 0, BASE_BODY..=BASE_BODY).map_err(|e| match e {
        FrameError::Torn { .. } => why("torn"),
        FrameError::Length { .. } => why("length is not 44"),
        FrameError::Checksum { .. } => why("checksum does not match"),
    })?;
    let b = Base {
        view: u64_at(body, 0),
        seq: u64_at(body, 8),
        position: u64_at(body, 16),
        sender: NodeId(u32_at(body, 24)),
        max_seq: u64_at(body, 28),
        origin: u64_at(body, 36),
    };
    if b.max_seq < b.seq {
        return Err(why("max_seq below the last dropped record's seq"));
    }
    if b.origin < (MAGIC.len() + FRAME + BODY_HEADER) as u64 {
        return Err(why("origin before the end of a first record"));
    }
    Ok(b)
}

/// What [`Log::open`] found and repaired: what its skim of the file found (see [`Skimmed`];
/// no records are kept: a [`Reader`] reads them).
pub type Recovery = Skimmed;

/// The options of a [`Log`] opened for appending.
///
/// ```
/// use squall_round_robin::log::{FsyncPolicy, LogOptions, SyncMode, DEFAULT_INDEX_EVERY};
/// let o = LogOptions::new(FsyncPolicy::EveryBatch);
/// assert_eq!((o.index_every, o.sync_mode), (DEFAULT_INDEX_EVERY, SyncMode::Thread));
/// assert!(LogOptions { index_every: 0, ..o }.validate().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogOptions {
    /// When to `fsync`.
    pub fsync: FsyncPolicy,
    /// The index's granularity: an entry is written to the side index ([`index_path`]) for
    /// the first record that starts at least this many bytes after the previous entry's
    /// record, so a [`Log::skim`] reads at most about this many bytes plus the last batch
    /// (at least 1; `u64::MAX`: no index is written, every skim reads the whole file). The
    /// index costs [`INDEX_ENTRY`] bytes per `index_every` bytes of log.
    pub index_every: u64,
    /// Where the `fdatasync`s run: a syncer thread (the default) or inline.
    pub sync_mode: SyncMode,
}

impl LogOptions {
    /// `fsync` per `policy`, an index entry every [`DEFAULT_INDEX_EVERY`] bytes.
    pub fn new(policy: FsyncPolicy) -> LogOptions {
        LogOptions {
            fsync: policy,
            index_every: DEFAULT_INDEX_EVERY,
            sync_mode: SyncMode::default(),
        }
    }

    /// Checks the bounds.
    pub fn validate(&self) -> Result<(), LogError> {
        if self.index_every == 0 {
            return Err(LogError::Options(
                "index_every must be at least 1 byte (u64::MAX: no index)",
            ));
        }
        Ok(())
    }
}

/// The index file's first eight bytes (its format's version is the last).
pub const INDEX_MAGIC: &[u8; 8] = b"SQRRIDX1";
/// Bytes of one index entry.
pub const INDEX_ENTRY: usize = 64;
/// The default index granularity ([`LogOptions::index_every`]): 1 MiB.
pub const DEFAULT_INDEX_EVERY: u64 = 1 << 20;
/// How many index entries a skim checks against the log (from the last down) before it gives
/// up on the index and reads the whole file.
pub const INDEX_TRIES: usize = 4;

/// The side index of the log at `path`: `path` with `.idx` appended to its file name.
///
/// ```
/// use squall_round_robin::log::index_path;
/// assert_eq!(index_path("/d/epoch-1.log".as_ref()), std::path::Path::new("/d/epoch-1.log.idx"));
/// ```
pub fn index_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_os_string();
    p.push(".idx");
    PathBuf::from(p)
}

/// One entry of a log's side index: a record of the log, where it is and what it holds,
/// written only once the record (and every byte before it) was synced, or written to the OS
/// in the boot named by `boot`.
///
/// Layout (64 bytes, little endian): `[offset: u64][view: u64][seq: u64][position: u64]
/// [max_seq: u64][boot: u64][body length: u32][record checksum: u32][reserved: u32 = 0]
/// [CRC-32 of the 60 bytes before: u32]`.
///
/// ```
/// use squall_round_robin::log::{decode_index, encode_index_entry, IndexEntry, INDEX_MAGIC};
/// let e = IndexEntry { offset: 8, view: 1, seq: 0, position: 0, max_seq: 0, boot: 0, len: 30, crc: 7 };
/// let mut idx = INDEX_MAGIC.to_vec();
/// encode_index_entry(&e, &mut idx);
/// assert_eq!(decode_index(&idx), vec![e]);
/// idx[20] ^= 1; // a flipped bit: the entry's checksum fails, it is not an entry
/// assert!(decode_index(&idx).is_empty());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexEntry {
    /// Where the record starts in the log.
    pub offset: u64,
    /// Its view.
    pub view: u64,
    /// Its sequence number.
    pub seq: u64,
    /// Its position.
    pub position: u64,
    /// The largest sequence number of the records up to it (it included): a cut at a
    /// sequence number above this one keeps the whole prefix before the record.
    pub max_seq: u64,
    /// 0: the log was synced (`fdatasync`) up to and past the record before the entry was
    /// written; otherwise a tag of the boot in which the record was written to the OS (see
    /// [`boot_tag`]): trusted only in that boot.
    pub boot: u64,
    /// The record's body length (its frame's first field).
    pub len: u32,
    /// The record's checksum (its frame's second field).
    pub crc: u32,
}

/// Appends `e`'s 64-byte encoding to `out`.
pub fn encode_index_entry(e: &IndexEntry, out: &mut Vec<u8>) {
    let start = out.len();
    for w in [e.offset, e.view, e.seq, e.position, e.max_seq, e.boot] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.extend_from_slice(&e.len.to_le_bytes());
    out.extend_from_slice(&e.crc.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Decodes an index file's bytes: its entries up to the first that is not one (torn, checksum
/// failed, reserved bits set, offset not after the previous entry's record, `max_seq` smaller
/// than the previous one's or than its own `seq`, or a body length out of range). A file that
/// does not start with [`INDEX_MAGIC`] has no entries. Never panics, whatever the bytes.
pub fn decode_index(bytes: &[u8]) -> Vec<IndexEntry> {
    let mut out: Vec<IndexEntry> = Vec::new();
    if bytes.len() < INDEX_MAGIC.len() || &bytes[..INDEX_MAGIC.len()] != INDEX_MAGIC {
        return out;
    }
    for raw in bytes[INDEX_MAGIC.len()..].chunks_exact(INDEX_ENTRY) {
        if u32_at(raw, 60) != crc32(&raw[..60]) || u32_at(raw, 56) != 0 {
            break;
        }
        let e = IndexEntry {
            offset: u64_at(raw, 0),
            view: u64_at(raw, 8),
            seq: u64_at(raw, 16),
            position: u64_at(raw, 24),
            max_seq: u64_at(raw, 32),
            boot: u64_at(raw, 40),
            len: u32_at(raw, 48),
            crc: u32_at(raw, 52),
        };
        let after = out.last().map_or(MAGIC.len() as u64, |p| {
            p.offset + (FRAME as u64) + u64::from(p.len)
        });
        if e.offset < after
            || !(BODY_HEADER..=MAX_BODY).contains(&(e.len as usize))
            || e.max_seq < e.seq
            || out.last().is_some_and(|p| e.max_seq < p.max_seq)
        {
            break;
        }
        out.push(e);
    }
    out
}

/// A tag of the running boot (from `/proc/sys/kernel/random/boot_id`; never 0), or `None`
/// where the OS does not say (then only entries of synced records are written and trusted).
pub fn boot_tag() -> Option<u64> {
    static TAG: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *TAG.get_or_init(|| {
        let id = std::fs::read("/proc/sys/kernel/random/boot_id").ok()?;
        let id = id.trim_ascii();
        if id.is_empty() {
            return None;
        }
        let mut tagged = id.to_vec();
        tagged.push(b'#');
        let tag = (u64::from(crc32(id)) << 32) | u64::from(crc32(&tagged));
        Some(tag.max(1))
    })
}

/// Whether an entry may be trusted in the boot `boot`.
fn trusted(e: &IndexEntry, boot: Option<u64>) -> bool {
    e.boot == 0 || Some(e.boot) == boot
}

/// The durable log: append records, sync per policy.
///
/// **Flushing and durability.** [`append`](Log::append) buffers; [`flush`](Log::flush)
/// writes the buffered batch to the file and starts making it durable per the policy, under a
/// caller's *mark* (round-robin passes its logged sequence frontier);
/// [`durable_mark`](Log::durable_mark) says the latest mark whose batch is durable — under
/// [`FsyncPolicy::EveryBatch`] once an `fdatasync` that started after the batch's write
/// returned, under the other policies once it is written. With [`SyncMode::Thread`] (the
/// default) the `fdatasync`s run on the log's syncer thread ([`syncer`]; under `EveryBatch`
/// the batch's `write` too), so `flush` never waits on the disk; with [`SyncMode::Inline`]
/// `flush` writes and syncs before it returns.
/// [`sync`](Log::sync) flushes and waits for durability in both modes.
///
/// Beside the file, when [`LogOptions::index_every`] is not `u64::MAX`, it keeps a side index
/// ([`index_path`]): an [`IndexEntry`] for a record at least every `index_every` bytes,
/// appended once the record is written, and under [`FsyncPolicy::EveryBatch`] once it is
/// durable (after its `fdatasync`, by the poll that finds it durable); under
/// [`FsyncPolicy::EveryRecords`] once a sync covered it (s22; `boot` 0). The index is a
/// hint, never synced itself and never trusted blindly:
/// [`Log::skim`] starts from its last entry that checks out against the log, and reads the
/// whole file when none does.
///
/// ```
/// use squall_round_robin::log::{FsyncPolicy, Log, Record};
/// use squall_transport::NodeId;
/// let path = std::env::temp_dir().join(format!("rr-log-doc-{}", std::process::id()));
/// let _ = std::fs::remove_file(&path);
/// let (mut log, rec) = Log::open(&path, FsyncPolicy::EveryBatch)?;
/// assert!(rec.last.is_none());
/// log.append(&Record { view: 0, seq: 0, position: 0, sender: NodeId(0), payload: b"a".to_vec() })?;
/// log.sync()?;
/// drop(log);
/// let (_, rec) = Log::open(&path, FsyncPolicy::Never)?;
/// assert_eq!(rec.last.map(|r| r.seq), Some(0));
/// # std::fs::remove_file(&path).ok();
/// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
/// # Ok::<(), squall_round_robin::log::LogError>(())
/// ```
#[derive(Debug)]
pub struct Log {
    path: PathBuf,
    /// Shared with the syncer thread (which syncs it); replaced by a compaction.
    file: Arc<File>,
    policy: FsyncPolicy,
    sync_mode: SyncMode,
    /// The syncer thread, once a sync was handed over.
    syncer: Option<syncer::Syncer>,
    /// Woken by the syncer after each sync.
    waker: Waker,
    /// Test hook: handed to the syncer when it starts.
    gate: Option<std::sync::mpsc::Receiver<bool>>,
    /// Sync requests handed to the syncer so far.
    requested: u64,
    /// Written batches waiting for their sync, in order.
    inflight: VecDeque<Batch>,
    /// The latest mark durable.
    durable: Option<u64>,
    /// The latest mark flushed.
    flushed: Option<u64>,
    /// The latest mark whose records an `fdatasync` that started after their write covered
    /// ([`synced_mark`](Log::synced_mark)).
    synced: Option<u64>,
    /// `EveryRecords` on the syncer thread: sync requests not yet done, (request, the mark
    /// flushed with it, the index entries of the records it covers), in order.
    syncing: VecDeque<(u64, u64, Vec<IndexEntry>)>,
    /// `EveryRecords`: index entries of records written but covered by no sync request yet;
    /// written (`boot` 0) once a sync covers them.
    held: Vec<IndexEntry>,
    buf: Vec<u8>,
    /// Records in `buf` (appended, not yet written or handed over).
    buffered: u64,
    unsynced: u64,
    next: Option<(u64, u64)>,
    /// The file's length (what was written).
    len: u64,
    /// The side index, while it is kept.
    index: Option<File>,
    every: u64,
    /// The next record starting at or past this offset gets an index entry.
    index_at: u64,
    /// The largest sequence number logged.
    max_seq: Option<u64>,
    /// Entries of records appended since the last flush (their `boot` set when written).
    pending: Vec<IndexEntry>,
    /// A compaction running on its thread ([`Log::start_compact`]).
    compaction: Option<Compaction>,
    /// The outcome of the last [`Log::start_compact`], until taken.
    compacted: Option<Result<Option<Compacted>, LogError>>,
    /// Test hook: handed to the next compaction's thread.
    compact_gate: Option<std::sync::mpsc::Receiver<()>>,
    /// Test hook: the next compaction's thread fails its directory sync.
    dir_sync_fails: bool,
    /// Test hook: handed to the next compaction's thread, waited for before its directory
    /// sync.
    dir_sync_gate: Option<std::sync::mpsc::Receiver<()>>,
    /// Test hook: the next `fdatasync` of the log on the calling thread fails.
    inline_sync_fails: bool,
    /// A failure after which nothing more may be reported durable (a write that failed, an
    /// `fdatasync` on the calling thread that failed, a compaction's directory sync that
    /// failed): its kind and message, returned (as
    /// [`LogError::Io`]) by every later [`flush`](Log::flush),
    /// [`durable_mark`](Log::durable_mark), [`sync`](Log::sync) and
    /// [`start_sync`](Log::start_sync).
    failed: Option<(std::io::ErrorKind, String)>,
}

/// A batch written to the file whose sync the syncer has not finished.
#[derive(Debug)]
struct Batch {
    /// The sync request that covers it.
    request: u64,
    /// The caller's mark of its flush.
    mark: u64,
    /// Its records' index entries (written, `boot` 0, once it is durable).
    entries: Vec<IndexEntry>,
}

impl Drop for Log {
    /// Stops the syncer thread (after the sync it is in, if any) and joins it. A batch whose
    /// sync had not started stays unsynced: nothing reported it durable.
    fn drop(&mut self) {
        // A compaction's thread renames over the log: it is done before the log is gone (the
        // records flushed meanwhile are then written, not synced).
        if let Err(e) = self.poll_compaction(true) {
            tracing::warn!(path = %self.path.display(), error = %e, "durable log: a compaction failed as the log was dropped");
        }
        self.syncer = None;
    }
}

impl Log {
    /// Opens (or creates) the log at `path` with an index every [`DEFAULT_INDEX_EVERY`] bytes
    /// ([`Log::open_with`]).
    pub fn open(path: &Path, policy: FsyncPolicy) -> Result<(Log, Recovery), LogError> {
        Log::open_with(path, LogOptions::new(policy))
    }

    /// Opens (or creates) the log at `path`, truncating a torn or corrupt tail to the longest
    /// valid prefix (logged at `warn` with the reason): a [`Log::skim`] of the file, so memory
    /// stays within [`DEFAULT_READ_BUFFER`] (or the longest record) and, with a side index,
    /// only the file's end is read. Returns what the skim found (the last record's header, no
    /// records). Opens the side index (creating it) unless `index_every` is `u64::MAX`.
    pub fn open_with(path: &Path, options: LogOptions) -> Result<(Log, Recovery), LogError> {
        options.validate()?;
        let io = |source| LogError::Io {
            path: path.to_path_buf(),
            source,
        };
        // A compaction that crashed before its rename left its temporary file: the log is
        // the old one, whole.
        let tmp = compact_tmp_path(path);
        if remove_leftover(&tmp)? {
            tracing::warn!(path = %tmp.display(), "durable log: removed the file of a compaction that did not complete");
        }
        // An index rewrite that crashed before its rename: the index is the old one.
        let itmp = index_tmp_path(path);
        if remove_leftover(&itmp)? {
            tracing::info!(path = %itmp.display(), "durable log: removed the index of a rewrite that did not complete");
        }
        let reindex = (options.index_every != u64::MAX).then_some(options.index_every);
        let verify = options.fsync != FsyncPolicy::EveryBatch;
        let (recovery, max_seq, last_entry) = skim_file(
            path,
            u64::MAX,
            None,
            DEFAULT_READ_BUFFER,
            true,
            reindex,
            verify,
        )?;
        let mut file = open_rw(path).map_err(io)?;
        let len = file.seek(SeekFrom::End(0)).map_err(io)?;
        let mut index = None;
        if options.index_every != u64::MAX {
            let ipath = index_path(path);
            let iio = |source| LogError::Io {
                path: ipath.clone(),
                source,
            };
            let mut f = open_rw(&ipath).map_err(iio)?;
            // The skim left whole entries that check out (or nothing); a new index starts
            // with its magic.
            if last_entry.is_none() {
                f.set_len(0).map_err(iio)?;
                f.write_all(INDEX_MAGIC).map_err(iio)?;
            }
            f.seek(SeekFrom::End(0)).map_err(iio)?;
            index = Some(f);
        }
        let index_at = last_entry.map_or(0, |e| e.offset.saturating_add(options.index_every));
        let next = recovery.last.as_ref().map(|r| (r.view, r.position));
        Ok((
            Log {
                path: path.to_path_buf(),
                file: Arc::new(file),
                policy: options.fsync,
                sync_mode: options.sync_mode,
                syncer: None,
                waker: Waker::noop(),
                gate: None,
                requested: 0,
                inflight: VecDeque::new(),
                durable: None,
                flushed: None,
                synced: None,
                syncing: VecDeque::new(),
                held: Vec::new(),
                buf: Vec::new(),
                buffered: 0,
                unsynced: 0,
                next,
                len,
                index,
                every: options.index_every,
                index_at,
                max_seq,
                pending: Vec::new(),
                compaction: None,
                compacted: None,
                compact_gate: None,
                dir_sync_fails: false,
                dir_sync_gate: None,
                inline_sync_fails: false,
                failed: None,
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
        if let Some((v, p)) = self.next
            && !follows((v, p), (view, position))
        {
            // Out of order: a reader stops here, so no entry may point past it.
            self.index = None;
        }
        let at = self.buf.len();
        encode_parts(view, seq, position, sender, payload, &mut self.buf);
        self.buffered += 1;
        self.unsynced += 1;
        self.next = Some((view, position));
        let max_seq = self.max_seq.map_or(seq, |m| m.max(seq));
        self.max_seq = Some(max_seq);
        let offset = self.len + at as u64;
        if self.index.is_some() && offset >= self.index_at {
            self.pending.push(IndexEntry {
                offset,
                view,
                seq,
                position,
                max_seq,
                boot: 0,
                len: u32_at(&self.buf, at),
                crc: u32_at(&self.buf, at + 4),
            });
            self.index_at = offset.saturating_add(self.every);
        }
        Ok(())
    }

    /// Writes the buffered records and makes them durable per the policy, waiting for it:
    /// [`flush`](Log::flush) under the last mark flushed, then, if the syncer has syncs in
    /// flight, waits until they returned (blocking the caller for at most about two
    /// `fdatasync`s). Once it returns, everything appended counts as persisted (and
    /// [`durable_mark`](Log::durable_mark) reports the last mark flushed). A sync's failure
    /// is returned (here and by every later call).
    pub fn sync(&mut self) -> Result<(), LogError> {
        self.poll_compaction(true)?;
        if !self.buf.is_empty() || self.flushed.is_some() {
            self.flush(self.flushed.unwrap_or(0))?;
        }
        if let Some(syncer) = &self.syncer {
            syncer.wait().map_err(|source| LogError::Io {
                path: self.path.clone(),
                source,
            })?;
        }
        self.durable_mark()?;
        Ok(())
    }

    /// Writes the buffered records and `fdatasync`s the file on the calling thread, whatever
    /// the policy, so that every record written so far is synced:
    /// [`synced_mark`](Log::synced_mark) reports the last mark flushed. For a caller that
    /// needs what it logged to survive a power loss now under [`FsyncPolicy::EveryRecords`] or
    /// [`FsyncPolicy::Never`] (a checkpoint past the records since the last sync). Under
    /// [`FsyncPolicy::EveryBatch`] it is [`sync`](Log::sync). Nothing flushed yet: nothing
    /// to do. The index entries waiting for a sync are written, `boot` 0. A failure of this
    /// sync, or an earlier one of the syncer thread, is returned.
    ///
    /// ```
    /// use squall_round_robin::log::{FsyncPolicy, Log, LogOptions, Record, SyncMode};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("rr-log-sync-written-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let (mut log, _) = Log::open_with(&path, LogOptions::new(FsyncPolicy::Never))?;
    /// log.append(&Record { view: 0, seq: 0, position: 0, sender: NodeId(0), payload: b"a".to_vec() })?;
    /// log.flush(1)?; // written, never synced by the policy
    /// assert_eq!(log.synced_mark(), None);
    /// log.sync_written()?;
    /// assert_eq!(log.synced_mark(), Some(1));
    /// # drop(log);
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn sync_written(&mut self) -> Result<(), LogError> {
        if self.policy == FsyncPolicy::EveryBatch {
            return self.sync();
        }
        self.poll_compaction(true)?;
        self.check_syncer()?;
        if !self.buf.is_empty() {
            self.flush(self.flushed.unwrap_or(0))?;
        }
        let Some(mark) = self.flushed else {
            return Ok(());
        };
        self.sync_inline()?;
        self.unsynced = 0;
        self.after_inline_sync(mark);
        Ok(())
    }

    /// Starts a sync of every record written so far, without waiting for it and whatever the
    /// policy's count, so that [`synced_mark`](Log::synced_mark) reaches the last mark flushed
    /// (buffered records are flushed first, under that mark). For a caller that needs its
    /// records synced soon under [`FsyncPolicy::EveryRecords`] or [`FsyncPolicy::Never`]
    /// while no more records come to reach the count (s23: a checkpoint in a quiet group).
    ///
    /// - [`SyncMode::Thread`]: hands a sync request to the syncer thread (started here the
    ///   first time) and returns at once, with no system call; a later
    ///   [`durable_mark`](Log::durable_mark) finds it done (the syncer wakes the driver).
    /// - [`SyncMode::Inline`] (or no syncer thread could be started): `fdatasync`s here, as
    ///   [`sync_written`](Log::sync_written).
    ///
    /// Returns whether a sync was started (or ran): not when nothing was written since the
    /// last sync or sync request (those cover everything), and never under
    /// [`FsyncPolicy::EveryBatch`] (every batch's own sync is requested at its flush). The
    /// index entries waiting for a sync go with it (`boot` 0 once it returned). A failure of
    /// this sync, or an earlier one of the syncer thread, is returned (an inline one here,
    /// the thread's by a later call).
    ///
    /// ```
    /// use squall_round_robin::log::{FsyncPolicy, Log, LogOptions, Record};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("rr-log-start-sync-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// // The default `SyncMode::Thread`: the sync runs on the log's syncer thread.
    /// let (mut log, _) = Log::open_with(&path, LogOptions::new(FsyncPolicy::EveryRecords(1000)))?;
    /// log.append(&Record { view: 0, seq: 0, position: 0, sender: NodeId(0), payload: b"a".to_vec() })?;
    /// log.flush(1)?; // written; a sync waits for 999 more records
    /// assert!(log.start_sync()?); // handed to the syncer thread: returns at once
    /// assert!(!log.start_sync()?); // nothing written since: nothing to start
    /// while log.synced_mark() != Some(1) {
    ///     log.durable_mark()?; // takes the syncer's progress (a driver parks until woken)
    ///     std::thread::yield_now();
    /// }
    /// # drop(log);
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn start_sync(&mut self) -> Result<bool, LogError> {
        if self.policy == FsyncPolicy::EveryBatch {
            return Ok(false);
        }
        self.poll_compaction(false)?;
        self.check_syncer()?;
        if !self.buf.is_empty() {
            self.flush(self.flushed.unwrap_or(0))?;
        }
        if self.writers_held() {
            // A compaction's final phase holds the writers: its swap syncs (`sync_all`)
            // everything written before the hold, and the records it refused wait in the
            // buffer (a request now would carry their index entries before they are in the
            // file). A later call asks again. During the copy a request is started as
            // usual: the syncer syncs the old file, which holds every record written; one
            // the hold catches untaken waits for the release and then syncs the new file,
            // whose records the adoption counted synced already.
            return Ok(false);
        }
        let Some(mark) = self.flushed.filter(|_| self.unsynced > 0) else {
            return Ok(false);
        };
        if self.sync_mode == SyncMode::Thread
            && self.start_syncer()
            && let Some(syncer) = &self.syncer
        {
            // As a count-reached sync in `flush`: the entries of the records it covers wait
            // for it (`durable_mark`).
            self.unsynced = 0;
            self.requested += 1;
            syncer.request(self.requested);
            let mut entries = std::mem::take(&mut self.held);
            entries.append(&mut self.pending);
            self.syncing.push_back((self.requested, mark, entries));
            return Ok(true);
        }
        self.sync_written()?;
        Ok(true)
    }

    /// Writes the buffered records (one `write`) and starts making them durable per the
    /// policy, under `mark` (the caller's number for "everything flushed so far"; marks must
    /// not decrease), which [`durable_mark`](Log::durable_mark) reports once they are:
    ///
    /// - [`FsyncPolicy::EveryBatch`], [`SyncMode::Thread`]: hands the bytes to the log's
    ///   syncer thread (started here the first time), which writes them and `fdatasync`s, and
    ///   returns at once, with no system call; the mark is durable once that sync returned
    ///   (group commit: one `write` and one sync cover every batch handed over before they
    ///   started). Until then a reader of the file may not see the records yet.
    /// - [`FsyncPolicy::EveryBatch`], [`SyncMode::Inline`]: `fdatasync`s before returning;
    ///   the mark is durable at once.
    /// - [`FsyncPolicy::EveryRecords`]: the mark is durable once written (at once); when the
    ///   records since the last sync reach the count, a sync runs (on the syncer thread, or
    ///   inline).
    /// - [`FsyncPolicy::Never`]: the mark is durable once written (at once).
    ///
    /// With nothing buffered, the mark is durable once every earlier batch is. Index entries
    /// of the records are written once they are durable (see [`Log`]), under
    /// [`FsyncPolicy::EveryRecords`] once a sync covers them (`boot` 0). A sync's failure is
    /// returned (here and by every later call).
    ///
    /// ```
    /// use squall_round_robin::log::{FsyncPolicy, Log, Record};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("rr-log-flush-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let (mut log, _) = Log::open(&path, FsyncPolicy::EveryBatch)?;
    /// log.append(&Record { view: 0, seq: 0, position: 0, sender: NodeId(0), payload: b"a".to_vec() })?;
    /// log.flush(1)?; // handed over: the syncer thread writes and fdatasyncs it
    /// while log.durable_mark()? != Some(1) {
    ///     std::thread::yield_now(); // a driver parks in `Transport::wait`: the syncer wakes it
    /// }
    /// log.sync()?; // nothing new: returns at once
    /// # drop(log);
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn flush(&mut self, mark: u64) -> Result<(), LogError> {
        self.poll_compaction(false)?;
        self.check_syncer()?;
        if self.buf.is_empty() {
            self.flushed = Some(mark);
            match self.inflight.back_mut() {
                Some(b) => b.mark = mark,
                None => self.durable = Some(mark),
            }
            // Nothing written since the last sync request: the mark is synced with it.
            if self.unsynced == 0 {
                match self.syncing.back_mut() {
                    Some(s) => s.1 = mark,
                    None if self.inflight.is_empty() => self.synced_to(mark),
                    None => {}
                }
            }
            return Ok(());
        }
        if self.policy == FsyncPolicy::EveryBatch
            && self.sync_mode == SyncMode::Thread
            && self.start_syncer()
            && let Some(syncer) = &self.syncer
        {
            // The syncer writes the bytes, then syncs them: no system call here (while a
            // compaction holds the writers, the syncer keeps them until its rename).
            self.flushed = Some(mark);
            self.len += self.buf.len() as u64;
            self.unsynced = 0;
            self.buffered = 0;
            self.requested += 1;
            syncer.write_and_request(self.requested, &mut self.buf);
            self.buf.clear();
            self.inflight.push_back(Batch {
                request: self.requested,
                mark,
                entries: std::mem::take(&mut self.pending),
            });
            return Ok(());
        }
        // Records a compaction's final phase refused are still in the buffer (ahead of this
        // flush's): written together once the writers are released, under this mark.
        let written = self.write_buf()?;
        if let Some(c) = &mut self.compaction {
            // Refused: the final phase copies the file's tail, and the records wait in the
            // buffer until the writers are released (not durable meanwhile).
            c.deferred = (!written).then_some(mark);
        }
        if !written {
            return Ok(());
        }
        self.flushed = Some(mark);
        let sync = match self.policy {
            FsyncPolicy::EveryBatch => true,
            FsyncPolicy::EveryRecords(n) => self.unsynced >= n,
            FsyncPolicy::Never => false,
        };
        if !sync {
            self.durable = Some(mark);
            let entries = std::mem::take(&mut self.pending);
            if matches!(self.policy, FsyncPolicy::EveryRecords(_)) {
                // Written once a sync covers them, `boot` 0: a reboot then trusts them, and
                // they prove their records synced (s22).
                self.held.extend(entries);
            } else {
                self.write_index(entries, false);
            }
            return Ok(());
        }
        self.unsynced = 0;
        let background = self.policy != FsyncPolicy::EveryBatch
            && self.sync_mode == SyncMode::Thread
            && self.start_syncer();
        match &self.syncer {
            Some(syncer) if background => {
                // `EveryRecords`: durable once written; the sync runs in the background,
                // and the mark is synced once it returned.
                // The index entries of the records it covers wait for it (`durable_mark`).
                self.requested += 1;
                syncer.request(self.requested);
                let mut entries = std::mem::take(&mut self.held);
                entries.append(&mut self.pending);
                self.syncing.push_back((self.requested, mark, entries));
                self.durable = Some(mark);
            }
            _ => {
                self.sync_inline()?;
                let entries = std::mem::take(&mut self.pending);
                self.held.extend(entries);
                self.after_inline_sync(mark);
            }
        }
        Ok(())
    }

    /// Whether a compaction's final phase holds the writers (or refused a flush's write,
    /// which then waits in the buffer for its swap).
    fn writers_held(&self) -> bool {
        self.compaction.as_ref().is_some_and(|c| {
            c.deferred.is_some() || self.syncer.as_ref().is_some_and(syncer::Syncer::held)
        })
    }

    /// Writes the buffer to the file on this thread; `false`: a compaction's final phase
    /// holds the writers, nothing written (while a compaction runs the write goes through
    /// the syncer's hand-off, [`syncer::Syncer::write_unless_held`]). The first write to a
    /// compaction's new file before its adoption (the writers released after the rename)
    /// notes what the compaction's sync covers ([`Compaction::renamed`]).
    fn write_buf(&mut self) -> Result<bool, LogError> {
        let written = match (&self.compaction, &self.syncer) {
            (Some(_), Some(syncer)) => syncer.write_unless_held(&self.buf),
            _ => (&*self.file).write_all(&self.buf).map(|()| Some(false)),
        };
        let written = match written {
            Ok(w) => w,
            Err(source) => {
                // A `write` that failed may have written part of the buffer: the file no
                // longer ends at `len`, so the log takes no more writes.
                let e = self.io_error(source);
                self.fail(&e);
                return Err(e);
            }
        };
        let Some(renamed) = written else {
            return Ok(false);
        };
        if renamed
            && let Some(c) = &mut self.compaction
            && c.renamed.is_none()
        {
            c.renamed = Some((self.flushed, self.requested));
        }
        self.len += self.buf.len() as u64;
        self.buf.clear();
        self.buffered = 0;
        Ok(true)
    }

    /// From now on nothing is reported durable: `e` (its kind and message) is returned by
    /// every later call that could report it ([`Log::check_failed`]). For a failure after
    /// which the log's file may not hold what the log counted: a write that failed partway
    /// (the file may be longer than `len`, with part of a batch), an `fdatasync` on the
    /// calling thread that failed ([`Log::sync_inline`]), a compaction whose directory sync
    /// failed (a power loss may bring back the replaced file, which lacks what is written to
    /// the new one).
    fn fail(&mut self, e: &LogError) {
        if self.failed.is_none() {
            let kind = match e {
                LogError::Io { source, .. } => source.kind(),
                _ => std::io::ErrorKind::Other,
            };
            self.failed = Some((kind, e.to_string()));
        }
    }

    /// `fdatasync`s the log's file on the calling thread ([`SyncMode::Inline`], no syncer
    /// thread, or [`Log::sync_written`]). A failure is sticky ([`Log::fail`]), as a failure
    /// of the syncer thread's sync is: after a failed `fdatasync` the kernel may have dropped
    /// the dirty pages it could not write (and marked them clean), so a later sync that
    /// succeeds proves nothing about the records written before it (s26).
    fn sync_inline(&mut self) -> Result<(), LogError> {
        let synced = if std::mem::take(&mut self.inline_sync_fails) {
            Err(std::io::Error::other(
                "fdatasync failed (injected by a test)",
            ))
        } else {
            self.file.sync_data()
        };
        synced.map_err(|source| {
            tracing::warn!(path = %self.path.display(), error = %source, "durable log: fdatasync failed; the log stops");
            let e = self.io_error(source);
            self.fail(&e);
            e
        })
    }

    /// Test hook: the next `fdatasync` of the log's file on the calling thread (an inline
    /// sync: [`SyncMode::Inline`], no syncer thread, or [`Log::sync_written`]) fails, as an
    /// I/O error of the disk would (the syncer thread's is [`Log::gate_syncer`]'s `false`).
    #[doc(hidden)]
    pub fn fail_inline_sync(&mut self) {
        self.inline_sync_fails = true;
    }

    /// The failure [`Log::fail`] noted, as the log's error.
    fn check_failed(&self) -> Result<(), LogError> {
        match &self.failed {
            Some((kind, message)) => Err(self.io_error(std::io::Error::new(
                *kind,
                format!("the log failed earlier, nothing more is reported durable: {message}"),
            ))),
            None => Ok(()),
        }
    }

    /// `source` as an error of this log's file.
    fn io_error(&self, source: std::io::Error) -> LogError {
        LogError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// An inline sync returned: every batch written so far is durable, and synced; the index
    /// entries waiting for a sync are written, in order, `boot` 0.
    fn after_inline_sync(&mut self, mark: u64) {
        for b in std::mem::take(&mut self.inflight) {
            self.write_index(b.entries, true);
        }
        for (_, _, entries) in std::mem::take(&mut self.syncing) {
            self.write_index(entries, true);
        }
        let held = std::mem::take(&mut self.held);
        self.write_index(held, true);
        self.durable = Some(mark);
        self.synced_to(mark);
    }

    /// Every record flushed under `mark` or before is synced.
    fn synced_to(&mut self, mark: u64) {
        self.synced = Some(self.synced.map_or(mark, |s| s.max(mark)));
    }

    /// Starts the syncer thread if it is not running; `false` if no thread could be started
    /// (the caller then writes and syncs inline).
    fn start_syncer(&mut self) -> bool {
        if self.syncer.is_none() {
            match syncer::Syncer::spawn(
                Arc::clone(&self.file),
                self.waker.clone(),
                self.gate.take(),
            ) {
                Ok(s) => self.syncer = Some(s),
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "durable log: no syncer thread; syncing inline");
                    return false;
                }
            }
        }
        self.syncer.is_some()
    }

    /// A sync that failed on the syncer thread, or an earlier failure of the log
    /// ([`Log::fail`]), as the log's error.
    fn check_syncer(&self) -> Result<(), LogError> {
        self.check_failed()?;
        if let Some(syncer) = &self.syncer {
            syncer.done().map_err(|source| self.io_error(source))?;
        }
        Ok(())
    }

    /// The latest mark (of [`flush`](Log::flush)) whose records are durable per the policy,
    /// if any; takes the syncer's progress (never waits) and writes the index entries of the
    /// batches it made durable. A sync's failure is returned (here and by every later call).
    pub fn durable_mark(&mut self) -> Result<Option<u64>, LogError> {
        self.poll_compaction(false)?;
        self.check_failed()?;
        self.syncer_progress()?;
        Ok(self.durable)
    }

    /// Takes the syncer's progress: the batches and sync requests it finished are durable and
    /// synced, their index entries written.
    fn syncer_progress(&mut self) -> Result<(), LogError> {
        if let Some(syncer) = &self.syncer {
            let done = syncer.done().map_err(|source| LogError::Io {
                path: self.path.clone(),
                source,
            })?;
            while self.inflight.front().is_some_and(|b| b.request <= done) {
                if let Some(b) = self.inflight.pop_front() {
                    self.durable = Some(b.mark);
                    self.synced_to(b.mark);
                    self.write_index(b.entries, true);
                }
            }
            while self.syncing.front().is_some_and(|s| s.0 <= done) {
                if let Some((_, mark, entries)) = self.syncing.pop_front() {
                    self.synced_to(mark);
                    self.write_index(entries, true);
                }
            }
        }
        Ok(())
    }

    /// The latest mark (of [`flush`](Log::flush)) whose records are *synced*: an
    /// `fdatasync` (or a compaction's `sync_all`) that started after their write returned, so
    /// they survive a power loss; as of the last [`durable_mark`](Log::durable_mark) (which
    /// takes the syncer's progress). Under [`FsyncPolicy::EveryBatch`] it is the durable
    /// mark; under [`FsyncPolicy::EveryRecords`] it lags it to the last sync; under
    /// [`FsyncPolicy::Never`] only a compaction moves it (and a flush with nothing new).
    ///
    /// ```
    /// use squall_round_robin::log::{FsyncPolicy, Log, LogOptions, Record, SyncMode};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("rr-log-synced-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let options = LogOptions { sync_mode: SyncMode::Inline, ..LogOptions::new(FsyncPolicy::EveryRecords(2)) };
    /// let (mut log, _) = Log::open_with(&path, options)?;
    /// let r = |seq| Record { view: 0, seq, position: seq, sender: NodeId(0), payload: b"a".to_vec() };
    /// log.append(&r(0))?;
    /// log.flush(1)?; // written: durable for a process crash, not synced
    /// assert_eq!((log.durable_mark()?, log.synced_mark()), (Some(1), None));
    /// log.append(&r(1))?;
    /// log.flush(2)?; // two records since the last sync: synced
    /// assert_eq!((log.durable_mark()?, log.synced_mark()), (Some(2), Some(2)));
    /// # drop(log);
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn synced_mark(&self) -> Option<u64> {
        self.synced
    }

    /// Whether a flushed batch waits for its sync.
    pub fn sync_pending(&self) -> bool {
        !self.inflight.is_empty()
    }

    /// `fdatasync`s the syncer thread has started (0 without one: inline mode, or nothing
    /// handed over yet).
    pub fn syncer_syncs(&self) -> u64 {
        self.syncer.as_ref().map_or(0, syncer::Syncer::syncs)
    }

    /// Makes the syncer thread wake `waker` after each sync (the driver's transport waker, so
    /// that a driver parked in `Transport::wait` polls again and finds its batch durable).
    pub fn set_waker(&mut self, waker: Waker) {
        if let Some(s) = &self.syncer {
            s.set_waker(waker.clone());
        }
        self.waker = waker;
    }

    /// Test hook: the syncer thread waits for a message on the returned sender (or its drop)
    /// before each `fdatasync`, so a test can hold a batch unsynced; `false` fails that sync
    /// (an injected I/O error).
    #[doc(hidden)]
    pub fn gate_syncer(&mut self) -> std::sync::mpsc::Sender<bool> {
        let (tx, rx) = std::sync::mpsc::channel();
        match &self.syncer {
            Some(s) => s.set_gate(rx),
            None => self.gate = Some(rx),
        }
        tx
    }

    /// Appends `entries` to the index (their records are written, and synced if `synced`).
    /// A failure drops the index for this log's lifetime (logged at `warn`): a later skim
    /// checks what it finds, so a torn entry costs a longer skim, never a wrong one.
    fn write_index(&mut self, entries: Vec<IndexEntry>, synced: bool) {
        if entries.is_empty() {
            return;
        }
        let boot = if synced { Some(0) } else { boot_tag() };
        let Some((boot, index)) = boot.zip(self.index.as_mut()) else {
            return;
        };
        let mut out = Vec::with_capacity(entries.len() * INDEX_ENTRY);
        for e in entries {
            let e = IndexEntry { boot, ..e };
            encode_index_entry(&e, &mut out);
            if let Some(c) = &mut self.compaction {
                // The compaction's thread may have read the index before this entry: it is
                // written again, moved, to the rewritten index at the swap.
                c.index_later.push(e);
            }
        }
        if let Err(e) = index.write_all(&out) {
            tracing::warn!(path = %self.path.display(), error = %e, "durable log: could not write the index; skims of this log will read it whole");
            self.index = None;
        }
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
    /// [`DEFAULT_READ_BUFFER`] bytes, payloads skipped, from the index's last entry below
    /// `seq`), so memory does not grow with the log.
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
    /// assert_eq!(rec.last.map(|r| r.seq), Some(1));
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn cut(path: &Path, seq: u64) -> Result<Skimmed, LogError> {
        Log::skim(path, seq, None, DEFAULT_READ_BUFFER, true)
    }

    /// Reads the log at `path` through a buffer of `buffer` bytes ([`Reader`] in
    /// [`ReadMode::Skim`]: frames and body headers only, payloads skipped, no checksums),
    /// stops at the first record whose sequence number is `seq` or more, and truncates the
    /// file there: [`Log::cut`] at `seq`, or with `u64::MAX` what [`Log::open`] repairs. When
    /// it reached the end of the valid prefix (nothing cut), the last record's checksum is
    /// checked too (a crash can leave a full-length record of garbage); one that fails is the
    /// torn tail and goes. A corrupt record *before* where it started (or before the last) is
    /// not seen here: a [`ReadMode::Verify`] reader of the file finds it. This is the skim of
    /// a log written under [`FsyncPolicy::EveryBatch`]; [`Log::skim_with`] says what differs
    /// for the other policies.
    ///
    /// Where it starts: at `from`, a [`Mark`] of an earlier skim of the same file (with
    /// nothing but appends and cuts at or past the mark since) whose record's sequence number
    /// is below `seq`; else at the last entry of the side index ([`index_path`], if there is
    /// one) whose `max_seq` is below `seq`, is trusted (its records synced, or written in this
    /// boot) and checks out: the record at its offset is whole, has the entry's length, header
    /// and checksum, and its checksum holds (at most [`INDEX_TRIES`] entries are tried, from
    /// the last down); else at the file's start. A mark is checked the same way, and so is
    /// every earlier entry before it becomes one of [`Skimmed::marks`] (one record read per
    /// entry; one that does not check out is left out). So with an
    /// index a skim reads about [`LogOptions::index_every`] bytes plus the last batch, not the
    /// file. [`Skimmed::started_at`] says where it started. The index is repaired too: cut
    /// to its entries that are trusted, checked (or before the one checked) and whole in the
    /// file as it is left; emptied when none checked out.
    ///
    /// `sync`: `fdatasync` the file if it was truncated (and the index first, if it lost
    /// entries). A missing file is created empty. Memory: the buffer (or the longest record,
    /// if longer), plus the index's entries and [`Skimmed::marks`].
    ///
    /// ```
    /// use squall_round_robin::log::{FsyncPolicy, Log, LogOptions, Record};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("rr-log-skim-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let (mut log, _) = Log::open_with(&path, LogOptions { index_every: 8192, ..LogOptions::new(FsyncPolicy::EveryBatch) })?;
    /// for seq in 0..1000 {
    ///     log.append(&Record { view: 1, seq, position: seq, sender: NodeId(0), payload: vec![7; 100] })?;
    ///     log.sync()?;
    /// }
    /// drop(log);
    /// let all = Log::skim(&path, u64::MAX, None, 4096, false)?;
    /// assert_eq!(all.last.as_ref().map(|r| r.seq), Some(999));
    /// // From the index's last entry: at most 8 KiB and a record before the end were read.
    /// assert!(all.started_at > 0 && all.records <= 8192 / 136 + 1);
    /// assert!(all.peak_buffer <= 4096 && all.marks.len() > 10);
    /// // Cut at 990 from the last mark below it: reads only the end of the file.
    /// let from = all.marks.iter().rev().find(|m| m.seq < 990).copied();
    /// let cut = Log::skim(&path, 990, from.as_ref(), 4096, true)?;
    /// assert_eq!(cut.last.map(|r| r.position), Some(989));
    /// assert_eq!(Log::open(&path, FsyncPolicy::Never)?.1.last.map(|r| r.seq), Some(989));
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn skim(
        path: &Path,
        seq: u64,
        from: Option<&Mark>,
        buffer: usize,
        sync: bool,
    ) -> Result<Skimmed, LogError> {
        Log::skim_with(path, seq, from, buffer, sync, FsyncPolicy::EveryBatch)
    }

    /// [`Log::skim`] of a log written under the policy `fsync`, which says what a power loss
    /// can have left unsynced, and so what the skim may cut:
    ///
    /// - [`FsyncPolicy::EveryBatch`]: only the last write (a batch) is ever unsynced, so a
    ///   crash can only tear the end: the skim reads frames and headers and checks the last
    ///   record's checksum, as [`Log::skim`] does. A bad record before the last is damage,
    ///   left for a [`ReadMode::Verify`] reader to report.
    /// - [`FsyncPolicy::EveryRecords`], [`FsyncPolicy::Never`]: several writes can be
    ///   unsynced at once, and a power loss can tear one (garbage after a prefix) and keep a
    ///   later one (s20, finding 8). The skim checks the checksum of every record it reads
    ///   ([`ReadMode::Verify`]) from where it starts — a synced point (an index entry with
    ///   `boot` 0), one written in this boot (a tagged entry, or a mark of an earlier skim),
    ///   or the file's start — and the first that fails ends the valid prefix: nothing after
    ///   a torn write was synced (a sync completed after it would have made it durable whole).
    ///   Unless the index proves otherwise: if an entry with `boot` 0 for a later record
    ///   checks out, that record was synced and so was the bad one, which is then damage a
    ///   crash does not cause; the skim touches nothing and returns [`LogError::Damaged`].
    ///   Cost: the bytes from the start on are read whole and checksummed (about
    ///   [`LogOptions::index_every`] bytes when it starts at an entry; after a reboot, the
    ///   records since the last entry with `boot` 0, i.e. since the last compaction or
    ///   rebuilt index, or the whole file).
    ///
    /// ```
    /// use squall_round_robin::log::{FsyncPolicy, Log, LogOptions, Record};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("rr-log-skim-with-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let (mut log, _) = Log::open_with(&path, LogOptions::new(FsyncPolicy::Never))?;
    /// for seq in 0..10 {
    ///     log.append(&Record { view: 1, seq, position: seq, sender: NodeId(0), payload: vec![7; 100] })?;
    ///     log.flush(seq)?;
    /// }
    /// drop(log);
    /// // A power loss tore the sixth record's payload and kept the later writes.
    /// let mut bytes = std::fs::read(&path)?;
    /// let sixth = 8 + 5 * (8 + 28 + 100);
    /// bytes[sixth + 8 + 28 + 50] ^= 0xff;
    /// std::fs::write(&path, &bytes)?;
    /// let kept = Log::skim_with(&path, u64::MAX, None, 4096, true, FsyncPolicy::Never)?;
    /// assert_eq!(kept.last.map(|r| r.seq), Some(4));
    /// assert_eq!(kept.len, sixth as u64);
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn skim_with(
        path: &Path,
        seq: u64,
        from: Option<&Mark>,
        buffer: usize,
        sync: bool,
        fsync: FsyncPolicy,
    ) -> Result<Skimmed, LogError> {
        let verify = fsync != FsyncPolicy::EveryBatch;
        skim_file(path, seq, from, buffer, sync, None, verify).map(|(k, _, _)| k)
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
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
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

    /// Drops the log's prefix before the first record at or past `(view, position)` (in the
    /// log's order: views ascending, positions ascending within a view) — what a checkpoint
    /// covers — and keeps appending to the shortened log. Returns what it did; nothing when
    /// no record before that point is left (the file is then untouched).
    ///
    /// The new file is a compacted log ([`MAGIC_COMPACTED`]): the [`Base`] (the last dropped
    /// record's header, the dropped prefix's largest sequence number, where the first kept
    /// record was before any compaction), then the kept records byte for byte. A skim, a
    /// cut, a reader and [`Log::open`] of it find the same last record (so the same logged
    /// counts) and the same records at or past the point as in the uncompacted log; a cut at
    /// a sequence number at or below the base's `max_seq` is refused
    /// ([`LogError::Compacted`]).
    ///
    /// Crash-safe at every point: buffered records are written first ([`sync`](Log::sync));
    /// the new file is written under [`compact_tmp_path`], synced (`fsync`), renamed over the
    /// log, and the directory synced; only then is the side index replaced (its entries at
    /// or past the point, moved to the new offsets, `boot` 0: the new file is synced), written
    /// whole to [`index_tmp_path`] and renamed over the old index (not synced: a hint), so the
    /// old index file is never written. A crash before the rename leaves the old log (the
    /// leftover temporary file is removed by the next compaction or [`Log::open`]); after it
    /// the new one, with the old index (its entries fail their checks against the new file,
    /// and the next open rebuilds it) or the new one (a power loss may keep a prefix of its
    /// entries), never entries of both. Cost: reading about [`LogOptions::index_every`] bytes before the
    /// point (from the index), copying the kept bytes, two `fsync`s.
    ///
    /// ```
    /// use squall_round_robin::log::{FsyncPolicy, Log, Record};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("rr-log-compact-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let (mut log, _) = Log::open(&path, FsyncPolicy::EveryBatch)?;
    /// for p in 0..100 {
    ///     log.append(&Record { view: 4, seq: 2 * p, position: p, sender: NodeId(0), payload: vec![1; 100] })?;
    /// }
    /// log.sync()?;
    /// let done = log.compact(4, 90)?.expect("a prefix was dropped");
    /// assert_eq!(done.base.position, 89);
    /// log.append(&Record { view: 4, seq: 200, position: 100, sender: NodeId(0), payload: vec![2] })?;
    /// log.sync()?;
    /// drop(log);
    /// let (_, rec) = Log::open(&path, FsyncPolicy::Never)?;
    /// assert_eq!(rec.last.map(|r| r.position), Some(100));
    /// let mut reader = Log::reader(&path, 4096)?;
    /// let first = reader.next_record().map_err(|source| squall_round_robin::log::LogError::Io { path: path.clone(), source })?;
    /// assert_eq!(first.map(|r| r.position), Some(90));
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn compact(&mut self, view: u64, position: u64) -> Result<Option<Compacted>, LogError> {
        self.compact_to(view, position, None)
    }

    /// [`Log::compact`] that stops where a process crash at `crash` would, leaving exactly
    /// the files it leaves (for crash-point tests; the `Log` must be dropped then).
    #[doc(hidden)]
    pub fn compact_cut_at(
        &mut self,
        view: u64,
        position: u64,
        crash: CompactCrash,
    ) -> Result<Option<Compacted>, LogError> {
        self.compact_to(view, position, Some(crash))
    }

    fn compact_to(
        &mut self,
        view: u64,
        position: u64,
        crash: Option<CompactCrash>,
    ) -> Result<Option<Compacted>, LogError> {
        self.sync()?;
        // Entries still waiting for a sync (`EveryRecords`) go to the index now, tagged: the
        // new file is synced, and the trusted entries move to it as `boot` 0.
        let held = std::mem::take(&mut self.held);
        self.write_index(held, false);
        let keep_index = self.index.is_some();
        match compact_file(
            &self.path, self.len, view, position, keep_index, crash, None,
        )? {
            Some(swapped) => self.adopt(swapped, Some((self.flushed, None)), Vec::new()),
            None => Ok(None),
        }
    }

    /// Starts [`Log::compact`] on a thread of its own (named `squall-log-compact`) and returns
    /// at once, with no file-system sync on the calling thread (s24): the temporary file's
    /// copy and `sync_all`, the rename, the directory sync and the index rewrite all run
    /// there. [`take_compacted`](Log::take_compacted) returns its outcome once a later call
    /// (any of [`durable_mark`](Log::durable_mark), [`flush`](Log::flush),
    /// [`start_sync`](Log::start_sync)) found it done; the thread wakes the driver's waker
    /// ([`set_waker`](Log::set_waker)) when it is.
    ///
    /// The log is written on meanwhile (s25): the thread copies the kept records written
    /// when it started, then what was appended since, in rounds, syncing its copy while the
    /// writes go on, and only for its final phase holds the writers (through the syncer
    /// thread's hand-off, which it starts if needed): the tail appended since its last round
    /// is copied, the new file synced and renamed over the log. Then (s26) it releases the
    /// writers to the new file, syncs the directory and rewrites the index; the next call
    /// adopts the new file. Batches flushed during the copy are written, synced and reported
    /// durable as without a compaction; during the final phase, under
    /// [`FsyncPolicy::EveryBatch`] the held syncer keeps them and writes them to the new file
    /// after the rename, and under the other policies [`flush`](Log::flush) keeps them
    /// buffered (their mark not durable) and writes them to the new file at the next flush
    /// after the rename, so they follow the kept records in order. What is written to the
    /// new file before the adoption is not reported synced (nor durable under `EveryBatch`)
    /// until the adoption, after the directory sync (under the other policies it is durable
    /// once written: a process crash finds the new file). The swap counts every record
    /// written to the old file synced. [`start_sync`](Log::start_sync) starts nothing while
    /// the writers are held; [`sync`](Log::sync), [`sync_written`](Log::sync_written),
    /// [`compact`](Log::compact) and dropping the log wait for it.
    ///
    /// Under [`SyncMode::Inline`], or when no thread can be started, or when a compaction is
    /// already running (`Ok(false)`: nothing started), it is [`compact`](Log::compact) inline
    /// (the outcome again for [`take_compacted`](Log::take_compacted)). Returns whether a
    /// compaction is running on the thread now.
    ///
    /// ```
    /// use squall_round_robin::log::{FsyncPolicy, Log, LogOptions, Record};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("rr-log-start-compact-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let (mut log, _) = Log::open_with(&path, LogOptions::new(FsyncPolicy::EveryRecords(1000)))?;
    /// let r = |p| Record { view: 1, seq: p, position: p, sender: NodeId(0), payload: vec![7; 100] };
    /// for p in 0..50 {
    ///     log.append(&r(p))?;
    /// }
    /// log.flush(50)?;
    /// assert!(log.start_compact(1, 40)?); // on its thread: returns at once
    /// log.append(&r(50))?;
    /// log.flush(51)?; // written to the log while the compaction copies (or after its swap)
    /// let done = loop {
    ///     log.durable_mark()?; // finds the thread done (a driver parks until woken)
    ///     if let Some(outcome) = log.take_compacted() {
    ///         break outcome?;
    ///     }
    ///     std::thread::yield_now();
    /// };
    /// assert_eq!(done.map(|c| c.base.position), Some(39));
    /// assert_eq!(log.durable_mark()?, Some(51));
    /// # drop(log);
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), squall_round_robin::log::LogError>(())
    /// ```
    pub fn start_compact(&mut self, view: u64, position: u64) -> Result<bool, LogError> {
        self.start_compact_to(view, position, None)
    }

    /// [`Log::start_compact`] whose thread stops where a process crash at `crash` would
    /// (for crash-point tests; wait for the outcome, then drop the `Log`).
    #[doc(hidden)]
    pub fn start_compact_cut_at(
        &mut self,
        view: u64,
        position: u64,
        crash: CompactCrash,
    ) -> Result<bool, LogError> {
        self.start_compact_to(view, position, Some(crash))
    }

    fn start_compact_to(
        &mut self,
        view: u64,
        position: u64,
        crash: Option<CompactCrash>,
    ) -> Result<bool, LogError> {
        self.poll_compaction(false)?;
        if self.compaction.is_some() {
            return Ok(false);
        }
        if self.sync_mode == SyncMode::Inline {
            let outcome = self.compact_to(view, position, crash);
            self.compacted = Some(outcome);
            return Ok(false);
        }
        self.check_syncer()?;
        // The writers are held through the syncer's hand-off: a log that has no syncer
        // thread (and cannot start one) compacts inline.
        if !self.start_syncer() {
            let outcome = self.compact_to(view, position, crash);
            self.compacted = Some(outcome);
            return Ok(false);
        }
        let Some(waiter) = self.syncer.as_ref().map(syncer::Syncer::waiter) else {
            return Ok(false);
        };
        if !self.buf.is_empty() {
            self.flush(self.flushed.unwrap_or(0))?;
        }
        let held = std::mem::take(&mut self.held);
        self.write_index(held, false);
        let path = self.path.clone();
        let len = self.len;
        let requested = self.requested;
        let keep_index = self.index.is_some();
        let gate = self.compact_gate.take();
        let dir_sync_fails = std::mem::take(&mut self.dir_sync_fails);
        let dir_sync_gate = self.dir_sync_gate.take();
        let waker = self.waker.clone();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let finished = Arc::clone(&done);
        let spawned = std::thread::Builder::new()
            .name("squall-log-compact".into())
            .spawn(move || {
                // Every batch handed to the syncer before the start is in the file once its
                // request is done: then `[0, len)` is written.
                let outcome = match waiter.wait_for(requested) {
                    Err(source) => Err(LogError::Io {
                        path: path.clone(),
                        source,
                    }),
                    Ok(_) => {
                        let live = Live {
                            writers: &waiter,
                            gate,
                            dir_sync_fails,
                            dir_sync_gate,
                        };
                        compact_file(&path, len, view, position, keep_index, crash, Some(live))
                    }
                };
                finished.store(true, std::sync::atomic::Ordering::Release);
                waker.wake();
                outcome
            });
        match spawned {
            Ok(thread) => {
                self.compaction = Some(Compaction {
                    deferred: None,
                    renamed: None,
                    index_later: Vec::new(),
                    done,
                    thread,
                });
                Ok(true)
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "durable log: no compaction thread; compacting inline");
                let outcome = self.compact_to(view, position, crash);
                self.compacted = Some(outcome);
                Ok(false)
            }
        }
    }

    /// The outcome of the last [`start_compact`](Log::start_compact), once it is done (taken
    /// once; a finished thread's is taken here, never waiting for one): what it dropped
    /// (`Ok(None)`: nothing to drop), or its error (before the rename the log is the old
    /// file, whole; after it, the log's write error, as is a failure to write the records
    /// flushed meanwhile).
    pub fn take_compacted(&mut self) -> Option<Result<Option<Compacted>, LogError>> {
        if let Err(e) = self.poll_compaction(false) {
            return Some(Err(e));
        }
        self.compacted.take()
    }

    /// Whether a compaction runs on its thread.
    pub fn compacting(&self) -> bool {
        self.compaction.is_some()
    }

    /// Test hook: the next [`start_compact`](Log::start_compact)'s thread waits for a message
    /// on the returned sender (or its drop) after its first copy, before it copies what was
    /// appended since and holds the writers (dropping the log waits for that thread: release
    /// it first).
    #[doc(hidden)]
    pub fn gate_compaction(&mut self) -> std::sync::mpsc::Sender<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.compact_gate = Some(rx);
        tx
    }

    /// Test hook: the next [`start_compact`](Log::start_compact)'s thread fails its directory
    /// sync after the rename (as `fsync` of the directory returning an error would).
    #[doc(hidden)]
    pub fn fail_compaction_dir_sync(&mut self) {
        self.dir_sync_fails = true;
    }

    /// Test hook: the next [`start_compact`](Log::start_compact)'s thread waits for a message
    /// on the returned sender (or its drop) after its rename, with the writers released to
    /// the new file, before its directory sync (dropping the log waits for that thread:
    /// release it first).
    #[doc(hidden)]
    pub fn gate_compaction_dir_sync(&mut self) -> std::sync::mpsc::Sender<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.dir_sync_gate = Some(rx);
        tx
    }

    /// Takes a finished compaction's outcome (waiting for it if `wait`): the new file is
    /// adopted, the writers released, and the records whose write its final phase refused
    /// are written to it.
    fn poll_compaction(&mut self, wait: bool) -> Result<(), LogError> {
        let Some(c) = &self.compaction else {
            return Ok(());
        };
        if !wait && !c.done.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        // The syncer's finished batches first (their entries, at the old file's offsets, are
        // noted to be written again, moved, to the rewritten index).
        let progress = self.syncer_progress();
        let Some(c) = self.compaction.take() else {
            return Ok(());
        };
        let outcome = match c.thread.join() {
            Ok(outcome) => outcome,
            Err(_) => Err(self.io_error(std::io::Error::other("the compaction thread panicked"))),
        };
        let outcome = match outcome {
            Ok(Some(swapped)) => {
                // Under `EveryBatch` the syncer writes and syncs every batch itself (those it
                // wrote to the old file before the hold are synced there and copied); else
                // every record written to the old file is in the compacted file, synced
                // (those written to the new file after the rename are not: `renamed`).
                let synced = if self.policy == FsyncPolicy::EveryBatch {
                    None
                } else {
                    Some(
                        c.renamed
                            .map_or((self.flushed, None), |(m, r)| (m, Some(r))),
                    )
                };
                let adopted = self.adopt(swapped, synced, c.index_later);
                progress.and(adopted)
            }
            Ok(None) => progress.map(|()| None),
            Err(e) => Err(e),
        };
        if let Some(syncer) = &self.syncer {
            // A no-op after the adoption's release; the old file stays the log otherwise.
            syncer.release(None);
        }
        self.compacted = Some(outcome);
        if let Some(mark) = c.deferred {
            self.flush(mark)?;
        }
        Ok(())
    }

    /// The compacted file `s` is the log's from now on: every record written to the old file
    /// is in it (its offsets moved by `s.cut` → `s.head`), followed by what was written to it
    /// after the rename (the writers released early, s26), and, with `synced` `(mark,
    /// request)`, every record flushed under `mark` or before is synced there, as are those
    /// of the sync requests up to `request` (`None`: all of them, nothing was written to the
    /// new file yet). `later`: index entries written to the old index since the compaction
    /// started, written again (moved) after the rewritten index's last entry. The syncer's
    /// writers are released to the new file (or, released after the rename, their syncs
    /// reported again: [`syncer::Syncer::unfence`]).
    fn adopt(
        &mut self,
        s: Swapped,
        synced: Option<(Option<u64>, Option<u64>)>,
        later: Vec<IndexEntry>,
    ) -> Result<Option<Compacted>, LogError> {
        let (cut, head) = (s.cut, s.head);
        let moved = |o: u64| o.checked_sub(cut).map(|k| k + head);
        // Appends go to the new file from here on (it is at its end), and the syncer's
        // writes and syncs too (the writers held by the final phase released, here or by
        // the compaction's thread right after its rename).
        let old = std::mem::replace(&mut self.file, s.file);
        let old_syncer = match s.syncer_old {
            Some(f) => Some(f),
            None => (self.syncer.as_ref()).and_then(|x| x.release(Some(Arc::clone(&self.file)))),
        };
        self.len = moved(self.len).unwrap_or(s.compacted.len);
        let next_entry = s.last_entry.map_or(0, |o| o.saturating_add(self.every));
        self.index_at = moved(self.index_at).map_or(next_entry, |a| a.max(next_entry));
        // Records written or appended meanwhile were counted at the old file's offsets.
        let shift = |entries: &mut Vec<IndexEntry>| {
            entries.retain_mut(|e| match moved(e.offset) {
                Some(o) => {
                    e.offset = o;
                    true
                }
                None => false,
            });
        };
        shift(&mut self.pending);
        shift(&mut self.held);
        for b in &mut self.inflight {
            shift(&mut b.entries);
        }
        for (_, _, entries) in &mut self.syncing {
            shift(entries);
        }
        // The old file's handles: closing the last one frees its blocks and cached pages,
        // which takes time in proportion to its length (about 0.5 ms per MiB here): all of
        // them go to one thread, so that none of them is the last on the caller's thread.
        close_in_background((s.old, old, old_syncer));
        if let Some(e) = s.error {
            // Until the directory sync returned, a power loss may bring the old file back:
            // records appended since would be lost, so this is the log's write error, and
            // sticky: the syncer, released above, writes and syncs the batches handed over
            // during the hold to the new file, and a later flush writes there, but nothing of
            // it is reported durable from now on (s25 follow-up, R1).
            self.fail(&e);
            return Err(e);
        }
        if let Some(syncer) = &self.syncer {
            // The directory sync returned: the new file's syncs count (a later
            // `syncer_progress` reports them, at the moved offsets).
            syncer.unfence();
        }
        let rewritten = s.index.is_some();
        if let Some(index) = s.index
            && self.index.is_some()
        {
            self.index = index;
            // The entries written to the old index since the start that the rewrite lacks
            // (those past its last entry), moved, each with the `boot` it was written with.
            let mut again = later;
            shift(&mut again);
            let mut out = Vec::new();
            for e in again
                .iter()
                .filter(|e| s.last_entry.is_none_or(|l| e.offset > l))
            {
                encode_index_entry(e, &mut out);
            }
            if let Some(f) = self.index.as_mut()
                && let Err(err) = f.write_all(&out)
            {
                tracing::warn!(path = %self.path.display(), error = %err, "durable log: could not write the index; skims of this log will read it whole");
                self.index = None;
            }
        }
        if let Some((mark, request)) = synced {
            // The new file, synced, holds every record written before the rename: none of
            // them waits for a sync. Those written to it after the rename (past its length
            // at the swap) and the sync requests made since wait as usual.
            let renamed_at = s.compacted.len;
            let (mut entries, held): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
                .into_iter()
                .partition(|e| e.offset < renamed_at);
            self.held = held;
            let syncing = std::mem::take(&mut self.syncing);
            for (n, m, mut e) in syncing {
                if request.is_none_or(|r| n <= r) {
                    entries.append(&mut e);
                } else {
                    self.syncing.push_back((n, m, e));
                }
            }
            entries.sort_by_key(|e| e.offset);
            self.write_index(entries, true);
            if request.is_none() {
                self.unsynced = self.buffered;
            }
            if let Some(mark) = mark {
                self.synced_to(mark);
            }
        }
        if !rewritten {
            return Ok(None);
        }
        Ok(Some(s.compacted))
    }
}

/// A compaction running on its thread ([`Log::start_compact`]).
#[derive(Debug)]
struct Compaction {
    /// A mark flushed while the final phase held the writers: its records (and those of
    /// every later flush) wait in the buffer until the writers are released.
    deferred: Option<u64>,
    /// Set by the first write to the new file before the adoption (the writers released
    /// after the rename, s26): the mark flushed and the sync requested before it. The
    /// compaction's sync covers the records flushed up to that mark (written to the old
    /// file, copied), not those written to the new file since.
    renamed: Option<(Option<u64>, u64)>,
    /// Index entries written to the old index since the start (the thread may have read the
    /// index before them).
    index_later: Vec<IndexEntry>,
    /// Set by the thread when it returns.
    done: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Result<Option<Swapped>, LogError>>,
}

/// A compaction on its thread while the log is written ([`compact_file`]).
struct Live<'a> {
    /// The syncer's hand-off: the writers' hold for the final phase.
    writers: &'a syncer::Waiter,
    /// Test hook: waited for after the first copy, before the final phase.
    gate: Option<std::sync::mpsc::Receiver<()>>,
    /// Test hook: the directory sync after the rename fails.
    dir_sync_fails: bool,
    /// Test hook: waited for after the rename (the writers released), before the directory
    /// sync.
    dir_sync_gate: Option<std::sync::mpsc::Receiver<()>>,
}

/// A compacted file renamed over the log ([`compact_file`]).
#[derive(Debug)]
struct Swapped {
    /// The new file, at its end.
    file: Arc<File>,
    /// The replaced file's handle.
    old: File,
    /// The syncer's handle of the replaced file, when the thread released the writers to the
    /// new file right after the rename ([`syncer::Waiter::release_renamed`]).
    syncer_old: Option<Arc<File>>,
    compacted: Compacted,
    /// The old file's offset of the first record kept…
    cut: u64,
    /// … and its offset in the new file (the header's length).
    head: u64,
    /// The offset of the rewritten index's last entry.
    last_entry: Option<u64>,
    /// The side index after the swap: `None` if a crash point stopped before its rewrite (the
    /// old one in place); `Some(None)` if there is none kept.
    index: Option<Option<File>>,
    /// The directory sync failed: the log's write error.
    error: Option<LogError>,
}

/// The file work of a compaction of the log at `path`, of which `len` bytes are written: the
/// kept records from the first at or past `(view, position)` copied to [`compact_tmp_path`],
/// synced, renamed over the log, the directory synced, and the side index rewritten if
/// `keep_index`. `Ok(None)`: nothing to drop, or a crash point stopped it before the rename.
/// No state of the [`Log`] is touched, so it runs on the caller's thread ([`Log::compact`],
/// `live` `None`: nothing writes the file meanwhile) or a compaction thread
/// ([`Log::start_compact`], `live`: the log is written meanwhile; what was appended since is
/// copied in rounds, synced while the writers go on, then the writers are held for the last
/// tail's copy, the `sync_all` and the rename, and released to the new file before the
/// directory sync, their syncs not reported until the log adopts it: s26).
fn compact_file(
    path: &Path,
    len: u64,
    view: u64,
    position: u64,
    keep_index: bool,
    crash: Option<CompactCrash>,
    mut live: Option<Live<'_>>,
) -> Result<Option<Swapped>, LogError> {
    let io = |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir_sync_fails = live.as_ref().is_some_and(|l| l.dir_sync_fails);
    let mut src = File::open(path).map_err(io)?;
    let (_, index_bytes) = read_index(path, len)?;
    let index = decode_index(&index_bytes);
    let stop = Stop::At(view, position);
    let (s, _) = scan_to(
        &mut src,
        len,
        &index,
        stop,
        None,
        DEFAULT_READ_BUFFER,
        None,
        false,
    )
    .map_err(io)?;
    let Some(first) = read_header(&mut src, len).map_err(io)?.map(|(f, _)| f) else {
        return Err(LogError::NotALog {
            path: path.to_path_buf(),
        });
    };
    // The first record kept (or the end of the valid prefix: everything before goes; a
    // torn or out-of-order tail is copied as it is, and cut as before by the next open).
    let cut = s.keep;
    let (Some(last), Some(max_seq)) = (s.skimmed.last, s.max_seq) else {
        return Ok(None);
    };
    if cut <= first {
        return Ok(None);
    }
    let origin = s.skimmed.base.map_or(MAGIC.len() as u64, |b| b.origin);
    let base = Base {
        view: last.view,
        seq: last.seq,
        position: last.position,
        sender: last.sender,
        max_seq,
        origin: origin + (cut - first) as u64,
    };
    let mut head = MAGIC_COMPACTED.to_vec();
    encode_base(&base, &mut head);
    let tmp = compact_tmp_path(path);
    let tio = |source| LogError::Io {
        path: tmp.clone(),
        source,
    };
    // Read and write: after the rename this handle is the log's (no reopen that could fail
    // while appends would still go to the replaced file).
    let mut out = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(tio)?;
    out.write_all(&head).map_err(tio)?;
    src.seek(SeekFrom::Start(cut as u64)).map_err(io)?;
    let copy = match crash {
        Some(CompactCrash::BeforeSync) => (len - cut as u64) / 2,
        _ => len - cut as u64,
    };
    // On a thread, synced in pieces while the log is written: a sync of the log's own
    // records, which may have to wait for the file system's commit of the copy's data,
    // then waits for a piece at most.
    let piece = if live.is_some() { LIVE_PIECE } else { u64::MAX };
    let mut left = copy;
    while left > 0 {
        let n = left.min(piece);
        copy_exact(&mut src, &mut out, n).map_err(io)?;
        left -= n;
        if left > 0 {
            out.sync_data().map_err(tio)?;
        }
    }
    if crash == Some(CompactCrash::BeforeSync) {
        return Ok(None);
    }
    // The old file's offset copied up to.
    let mut end = len;
    if let Some(live) = &mut live {
        if let Some(g) = live.gate.take() {
            // A test holds the compaction here (the sender's end passes it).
            let _ = g.recv();
        }
        // What was appended meanwhile, in rounds, synced while the writers go on, until the
        // unsynced part is small, or the rounds stop shrinking it and the budget is spent
        // (a writer as fast as the copy: [`catch_up_again`]).
        let mut synced = cut as u64;
        let started = std::time::Instant::now();
        let mut round = 0;
        let mut previous = u64::MAX;
        loop {
            let now = src.metadata().map_err(io)?.len();
            copy_exact(&mut src, &mut out, now.saturating_sub(end)).map_err(io)?;
            end = end.max(now);
            let tail = end - synced;
            if tail <= CATCH_UP_TAIL {
                break;
            }
            round += 1;
            if !catch_up_again(round, tail, previous, started.elapsed()) {
                tracing::warn!(path = %path.display(), tail_bytes = tail, rounds = round, elapsed_ms = started.elapsed().as_millis() as u64, "durable log: a compaction's catch-up did not get the tail small (the log is written about as fast as it is copied); its writers are held while it copies and syncs the tail");
                break;
            }
            out.sync_data().map_err(tio)?;
            synced = end;
            previous = tail;
        }
        // The final phase: nothing writes the old file from here until the log adopts the
        // new one; the tail written since the last round is copied.
        live.writers.hold().map_err(io)?;
        let now = src.metadata().map_err(io)?.len();
        copy_exact(&mut src, &mut out, now.saturating_sub(end)).map_err(io)?;
        end = end.max(now);
    }
    let kept = end - cut as u64;
    out.sync_all().map_err(tio)?;
    if crash == Some(CompactCrash::BeforeRename) {
        return Ok(None);
    }
    // The index's entries of kept records, moved; the new file is synced (boot 0).
    let shift = |o: u64| o - cut as u64 + head.len() as u64;
    let boot = boot_tag();
    let entries: Vec<IndexEntry> = (index.iter())
        .take_while(|e| trusted(e, boot))
        .filter(|e| e.offset >= cut as u64 && e.offset + FRAME as u64 + u64::from(e.len) <= len)
        .map(|e| IndexEntry {
            offset: shift(e.offset),
            boot: 0,
            ..*e
        })
        .collect();
    let new_len = head.len() as u64 + kept;
    std::fs::rename(&tmp, path).map_err(tio)?;
    // The writers go on at once, to the new file (s26): they were held only so that the old
    // file's tail stays put while it is copied. Until the directory sync returns (and the
    // log adopts the file) the syncer's syncs of it are not reported: a power loss may still
    // bring the old file back. Its `len` the log counts on stays the old file's, moved at
    // the adoption: the new file's bytes from here on are the old file's past `end`.
    let out = Arc::new(out);
    let syncer_old = (live.as_ref()).map(|l| l.writers.release_renamed(Arc::clone(&out)));
    let compacted = Compacted {
        base,
        dropped_bytes: (cut - first) as u64,
        kept_bytes: kept,
        len: new_len,
        index_entries: entries.len(),
    };
    let mut swapped = Swapped {
        file: out,
        old: src,
        syncer_old,
        compacted,
        cut: cut as u64,
        head: head.len() as u64,
        last_entry: entries.last().map(|e| e.offset),
        index: None,
        error: None,
    };
    if let Some(g) = live.as_mut().and_then(|l| l.dir_sync_gate.take()) {
        // A test holds the compaction here (the sender's end passes it).
        let _ = g.recv();
    }
    // Until this returns, a power loss may bring the old file back.
    let dir_synced = if dir_sync_fails {
        Err(std::io::Error::other("test hook: the directory sync fails"))
    } else {
        sync_dir(path)
    };
    if let Err(source) = dir_synced {
        swapped.error = Some(io(source));
        return Ok(Some(swapped));
    }
    if crash == Some(CompactCrash::BeforeIndex) {
        return Ok(Some(swapped));
    }
    if keep_index {
        // Written whole under another name and renamed over the old index (s21): the old
        // file is never written, so whatever a power loss keeps, the index holds the old
        // file's entries or the new one's, never some of each.
        match replace_index(path, &entries, crash) {
            Ok(Some(f)) => swapped.index = Some(Some(f)),
            Ok(None) => return Ok(Some(swapped)),
            Err(e) => {
                // A hint: its entries are checked before use; this log appends none.
                tracing::warn!(path = %path.display(), error = %e, "durable log: could not rewrite the index after a compaction; skims will read the whole file");
                swapped.index = Some(None);
            }
        }
    } else {
        swapped.index = Some(None);
    }
    tracing::info!(path = %path.display(), view, position, dropped_bytes = cut - first, kept_bytes = kept, "durable log: compacted a covered prefix");
    Ok(Some(swapped))
}

/// A compaction on its thread copies what was appended since its start in rounds (each
/// copies what was appended during the last, then syncs) before it holds the writers
/// ([`compact_file`]): at least this many while the tail is large…
const CATCH_UP_ROUNDS: u32 = 8;

/// … then more while each round's tail is smaller than the last's, up to this many…
const CATCH_UP_MAX_ROUNDS: u32 = 64;

/// … and this long since the first round ([`catch_up_again`]).
const CATCH_UP_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// It holds them once at most this many bytes of its copy are not synced yet, so the final
/// phase (the writers held) copies and syncs about this much.
const CATCH_UP_TAIL: u64 = 256 << 10;

/// Whether a compaction's catch-up runs another round (the sync of round `round`'s copy,
/// then round `round + 1`) rather than holding the writers with `tail` bytes of its copy
/// unsynced (more than [`CATCH_UP_TAIL`]); `previous` is the last round's tail (`u64::MAX`
/// before the first), `elapsed` the time since the first round. Rounds up to
/// [`CATCH_UP_ROUNDS`] always go on (s25). Past them a round goes on only while the tail
/// shrinks (the copy gains on the writer: waiting shortens the hold) and within
/// [`CATCH_UP_MAX_ROUNDS`] and [`CATCH_UP_BUDGET`]; a tail that stopped shrinking (a writer
/// as fast as the copy) would not shrink by waiting, and the hold is then about one round's
/// appends (the writer's rate times a round's copy and sync).
fn catch_up_again(round: u32, tail: u64, previous: u64, elapsed: std::time::Duration) -> bool {
    round <= CATCH_UP_ROUNDS
        || (tail < previous && round < CATCH_UP_MAX_ROUNDS && elapsed < CATCH_UP_BUDGET)
}

/// A compaction on its thread syncs its copy every this many bytes ([`compact_file`]).
const LIVE_PIECE: u64 = 8 << 20;

/// Copies the next `n` bytes of `src` to `out`.
fn copy_exact(src: &mut File, out: &mut File, n: u64) -> std::io::Result<()> {
    let copied = std::io::copy(&mut (&mut *src).take(n), out)?;
    if copied != n {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the log is shorter than it was written",
        ));
    }
    Ok(())
}

/// What [`Log::compact`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compacted {
    /// The new file's base: the last dropped record's header and the prefix's `max_seq`.
    pub base: Base,
    /// Bytes of records dropped.
    pub dropped_bytes: u64,
    /// Bytes of records kept (copied).
    pub kept_bytes: u64,
    /// The file's length now.
    pub len: u64,
    /// Entries of the rewritten side index.
    pub index_entries: usize,
}

/// Where a crash-point test stops [`Log::compact_cut_at`].
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactCrash {
    /// Half the kept bytes in the temporary file, not synced.
    BeforeSync,
    /// The temporary file whole and synced, not renamed.
    BeforeRename,
    /// Renamed over the log (directory synced), the old index left.
    BeforeIndex,
    /// The new index's temporary file half written, a torn entry at its end, not renamed
    /// (the old index in place).
    MidIndex,
    /// The new index's temporary file whole, not renamed (the old index in place).
    IndexBeforeRename,
}

/// The temporary file a compaction of the log at `path` writes before renaming it over the
/// log: `path` with `.compact` appended to its file name.
///
/// ```
/// use squall_round_robin::log::compact_tmp_path;
/// assert_eq!(compact_tmp_path("/d/epoch-1.log".as_ref()), std::path::Path::new("/d/epoch-1.log.compact"));
/// ```
pub fn compact_tmp_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_os_string();
    p.push(".compact");
    PathBuf::from(p)
}

/// Drops `file` (the last handles of a file replaced by a rename) on a short-lived thread, or
/// here if no thread can be started.
fn close_in_background<T: Send + 'static>(file: T) {
    // A thread that cannot start drops its closure, and so the file, here.
    let spawned = std::thread::Builder::new()
        .name("squall-log-close".into())
        .spawn(move || drop(file));
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "durable log: closing the replaced file inline");
    }
}

/// `fsync`s the directory holding `path` (so a rename into it is durable).
/// Creates a file at `path` whole, holding `header`: the header written to `<path>.new`,
/// synced, renamed into place, and the directory synced, so a power loss leaves no file or one
/// whose header is durable, never a torn header or a directory entry that vanishes (s19,
/// found by the power-loss tests: a new epoch log's entry was never synced, and a header torn
/// before its first sync was refused as "not a log"). A `<path>.new` left by a crash here is
/// overwritten. Used for the epoch logs and membership's GMS log.
///
/// ```
/// let path = std::env::temp_dir().join(format!("rr-create-whole-doc-{}", std::process::id()));
/// squall_round_robin::log::create_whole(&path, b"HEADER01")?;
/// assert_eq!(std::fs::read(&path)?, b"HEADER01");
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn create_whole(path: &Path, header: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    f.write_all(header)?;
    f.sync_data()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    sync_dir(path)
}

fn sync_dir(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// Reads the side index of the log at `path` (`len` bytes), if there is one: the index file,
/// open for writing, and its bytes (at most one entry per record's frame and header of the
/// log, and one byte more).
fn read_index(path: &Path, len: u64) -> Result<(Option<File>, Vec<u8>), LogError> {
    let ipath = index_path(path);
    let iio = |source| LogError::Io {
        path: ipath.clone(),
        source,
    };
    let mut index_file = match OpenOptions::new().read(true).write(true).open(&ipath) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(iio(e)),
    };
    let mut index_bytes = Vec::new();
    if let Some(f) = &mut index_file {
        let most = (INDEX_MAGIC.len() as u64)
            .saturating_add((len / (FRAME + BODY_HEADER) as u64 + 1) * INDEX_ENTRY as u64);
        f.take(most.saturating_add(1))
            .read_to_end(&mut index_bytes)
            .map_err(iio)?;
    }
    Ok((index_file, index_bytes))
}

/// The temporary file a rewrite of the side index of the log at `path` (after a compaction, or
/// a rebuild at [`Log::open`]) is written to before it is renamed over the index: the index's
/// path ([`index_path`]) with `.new` appended.
///
/// ```
/// use squall_round_robin::log::index_tmp_path;
/// assert_eq!(index_tmp_path("/d/epoch-1.log".as_ref()), std::path::Path::new("/d/epoch-1.log.idx.new"));
/// ```
pub fn index_tmp_path(path: &Path) -> PathBuf {
    let mut p = index_path(path).into_os_string();
    p.push(".new");
    PathBuf::from(p)
}

/// Removes the leftover file `path` of an interrupted rewrite. Returns whether there was one.
fn remove_leftover(path: &Path) -> Result<bool, LogError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(LogError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// An index file's bytes: [`INDEX_MAGIC`], then `entries`.
fn encode_index(entries: &[IndexEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(INDEX_MAGIC.len() + entries.len() * INDEX_ENTRY);
    out.extend_from_slice(INDEX_MAGIC);
    for e in entries {
        encode_index_entry(e, &mut out);
    }
    out
}

/// Replaces the side index of the log at `path` with one holding `entries`: written whole to
/// [`index_tmp_path`], then renamed over [`index_path`], so the old index file is never
/// written and a power loss leaves the old index or the new one (a prefix of its entries,
/// each checked by its CRC), never entries of both. Nothing is synced: the index is a hint
/// whose entries are checked against the log before use, so losing it (or its rename) costs
/// a longer skim, never a wrong one. Returns the new index open for appending, or `None`
/// where the crash-point test `crash` stopped before the rename.
fn replace_index(
    path: &Path,
    entries: &[IndexEntry],
    crash: Option<CompactCrash>,
) -> Result<Option<File>, LogError> {
    let tmp = index_tmp_path(path);
    let tio = |source| LogError::Io {
        path: tmp.clone(),
        source,
    };
    let mut out = encode_index(entries);
    if crash == Some(CompactCrash::MidIndex) {
        out.truncate(INDEX_MAGIC.len() + entries.len() / 2 * INDEX_ENTRY);
        out.extend_from_slice(&[0xa5; INDEX_ENTRY / 2]);
    }
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(tio)?;
    f.write_all(&out).map_err(tio)?;
    if matches!(
        crash,
        Some(CompactCrash::MidIndex | CompactCrash::IndexBeforeRename)
    ) {
        return Ok(None);
    }
    std::fs::rename(&tmp, index_path(path)).map_err(tio)?;
    Ok(Some(f))
}

/// Replaces the contents of the index file `f` (at `ipath`) with [`INDEX_MAGIC`] and
/// `entries` (not synced), leaving it positioned at its end.
fn write_index_file(f: &mut File, ipath: &Path, entries: &[IndexEntry]) -> Result<(), LogError> {
    let iio = |source| LogError::Io {
        path: ipath.to_path_buf(),
        source,
    };
    let out = encode_index(entries);
    f.set_len(0).map_err(iio)?;
    f.seek(SeekFrom::Start(0)).map_err(iio)?;
    f.write_all(&out).map_err(iio)?;
    Ok(())
}

/// [`Log::skim`], also returning the largest sequence number of the records it read (or of
/// the index entry it started at, or the base) and the index's last entry kept. With
/// `reindex`, a skim that read the whole file (no index entry checked out) rebuilds the
/// index from what it read (the log synced first, so the entries are `boot` 0).
fn skim_file(
    path: &Path,
    seq: u64,
    from: Option<&Mark>,
    buffer: usize,
    sync: bool,
    reindex: Option<u64>,
    verify: bool,
) -> Result<(Skimmed, Option<u64>, Option<IndexEntry>), LogError> {
    let io = |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    };
    if !path.exists() {
        create_whole(path, MAGIC).map_err(io)?;
    }
    let mut file = open_rw(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let ipath = index_path(path);
    let iio = |source| LogError::Io {
        path: ipath.clone(),
        source,
    };
    let (mut index_file, index_bytes) = read_index(path, len)?;
    let index = decode_index(&index_bytes);
    let (s, rebuilt) = scan_to(
        &mut file,
        len,
        &index,
        Stop::Seq(seq),
        from,
        buffer,
        reindex,
        verify,
    )
    .map_err(io)?;
    let mut out = s.skimmed;
    let keep = s.keep;
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if matches!(s.tail, Some(TailError::BadMagic))
        && (len >= MAGIC.len() || !MAGIC.starts_with(&read_prefix(&mut file, len).map_err(io)?))
    {
        return Err(LogError::NotALog {
            path: path.to_path_buf(),
        });
    }
    if let Some(why @ TailError::Base { .. }) = &s.tail {
        return Err(LogError::BadHeader {
            path: path.to_path_buf(),
            why: why.clone(),
        });
    }
    if let (Some(why), Some(synced_at)) = (&s.tail, s.synced_after) {
        return Err(LogError::Damaged {
            path: path.to_path_buf(),
            why: why.clone(),
            synced_at,
        });
    }
    if let Some(b) = out.base
        && seq <= b.max_seq
    {
        return Err(LogError::Compacted {
            path: path.to_path_buf(),
            seq,
            max_seq: b.max_seq,
        });
    }
    // The index first: no entry may survive that points past what the log keeps.
    let kept_entries = if keep == 0 { 0 } else { s.index_keep };
    let mut last_entry = None;
    if let Some(f) = &mut index_file {
        let want = INDEX_MAGIC.len() + kept_entries * INDEX_ENTRY;
        if index_bytes.len() != want || !index_bytes.starts_with(INDEX_MAGIC) {
            if kept_entries == 0 {
                write_index_file(f, &ipath, &[])?;
            } else {
                f.set_len(want as u64).map_err(iio)?;
            }
            if sync && keep < len {
                f.sync_data().map_err(iio)?;
            }
        }
        last_entry = kept_entries.checked_sub(1).map(|k| index[k]);
    }
    let mut keep = keep;
    if keep < len {
        out.dropped_bytes = (len - keep) as u64;
        if s.cut {
            tracing::info!(path = %path.display(), seq, dropped_bytes = out.dropped_bytes, "durable log: cut past the trim");
        } else {
            tracing::warn!(
                path = %path.display(),
                dropped_bytes = out.dropped_bytes,
                reason = %s.tail.as_ref().map_or_else(|| "torn header".to_string(), ToString::to_string),
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
    let rebuild = reindex.is_some() && !rebuilt.is_empty();
    if (sync && keep != len) || rebuild {
        file.sync_data().map_err(io)?;
    }
    if rebuild {
        // The whole file was read and is synced: its honest index, so the next skim is short
        // (written whole and renamed in, as after a compaction).
        drop(index_file);
        replace_index(path, &rebuilt, None)?;
        tracing::info!(path = %path.display(), entries = rebuilt.len(), "durable log: rebuilt the side index after a skim of the whole file");
        out.reindexed = rebuilt.len();
        last_entry = rebuilt.last().copied();
    }
    out.truncated = if s.cut { None } else { s.tail };
    out.len = keep as u64;
    Ok((out, s.max_seq, last_entry))
}

/// A place in a log file that a later [`Log::skim`] may start from: a record's offset and
/// its header. A skim leaves one at most every `buffer` bytes (and one per index entry before
/// where it started), so its marks take 32 bytes per `buffer` bytes of log.
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
    /// Records kept that the skim read (from where it started: see `started_at`).
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
    /// Marks of records kept, ascending: of records the skim read, at most one per `buffer`
    /// bytes (their frames and headers read, and under the weak policies their checksums);
    /// before where it started, one per index entry that checks out against the log as the
    /// start did (whole, the entry's frame and header, checksum holding; s21). Every mark
    /// names a whole record with the mark's header.
    pub marks: Vec<Mark>,
    /// Where the skim started reading records: 0 from the file's start (the whole file was
    /// read), else the offset of the index entry's or the mark's record.
    pub started_at: u64,
    /// A compacted log's [`Base`] (what its dropped prefix ended with; `last` is its header
    /// when no record follows it).
    pub base: Option<Base>,
    /// How many entries [`Log::open`] wrote to a rebuilt side index (it rebuilds it when its
    /// skim had to read the whole file: no index, or none of it checked out); 0 otherwise.
    pub reindexed: usize,
}

/// What [`scan`] found: what [`Log::skim`] keeps, before it touches the files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// What the skim reports (its `len`, `truncated` and `dropped_bytes` not set yet).
    pub skimmed: Skimmed,
    /// The length of the file to keep (0: a bad or torn header).
    pub keep: usize,
    /// Whether it stopped at a record whose sequence number is `seq` or more.
    pub cut: bool,
    /// Why the valid prefix ended before the end of the file, if it did.
    pub tail: Option<TailError>,
    /// The largest sequence number of the records read (and of the index entry started at).
    pub max_seq: Option<u64>,
    /// How many of the index's leading entries remain valid for the file as it is kept.
    pub index_keep: usize,
    /// Only in a scan that verifies checksums (a log written under a policy that leaves
    /// several writes unsynced: [`Log::skim_with`]) and stopped at a record that fails its
    /// checksum: the offset of a later record that an index entry proves synced (`boot` 0,
    /// checking out). The bad record was then synced too: damage, not a crash's tear.
    pub synced_after: Option<u64>,
}

/// Checks that the record at `offset` of `src` (`len` bytes, records from `first` on) is whole, has the header `head`
/// (view, sequence number, position) and, if given, the frame `frame` (body length, stored
/// checksum), and that its checksum holds. Counts the bytes read in `peak`.
fn check_record<R: Read + Seek>(
    src: &mut R,
    len: u64,
    first: usize,
    offset: u64,
    head: (u64, u64, u64),
    frame: Option<(u32, u32)>,
    peak: &mut usize,
) -> std::io::Result<bool> {
    if offset < first as u64 || offset.saturating_add(FRAME as u64) > len {
        return Ok(false);
    }
    let mut f = [0u8; FRAME];
    src.seek(SeekFrom::Start(offset))?;
    src.read_exact(&mut f)?;
    let (body_len, stored) = (u32_at(&f, 0), u32_at(&f, 4));
    if frame.is_some_and(|fr| fr != (body_len, stored))
        || !(BODY_HEADER..=MAX_BODY).contains(&(body_len as usize))
        || offset + (FRAME as u64) + u64::from(body_len) > len
    {
        return Ok(false);
    }
    let mut body = vec![0; body_len as usize];
    src.read_exact(&mut body)?;
    *peak = (*peak).max(FRAME + body.len());
    Ok(crc32(&body) == stored && (u64_at(&body, 0), u64_at(&body, 8), u64_at(&body, 16)) == head)
}

/// The skim of [`Log::skim`] over any source of `len` bytes, with the index entries `index`
/// (as [`decode_index`] returns them), touching nothing: where it starts (the mark `from`,
/// else the last index entry that checks out, else the start), the records it reads, the
/// length to keep and why. Used by [`Log::skim`]; exposed for tests and fuzzing. Errors are
/// the source's only.
///
/// ```
/// use squall_round_robin::log::{encode_record, scan, IndexEntry, MAGIC, Record};
/// use squall_transport::NodeId;
/// let mut file = MAGIC.to_vec();
/// let mut index = Vec::new();
/// for position in 0..100 {
///     let r = Record { view: 1, seq: position, position, sender: NodeId(0), payload: vec![7; 50] };
///     let at = file.len();
///     encode_record(&r, &mut file);
///     if position % 10 == 0 {
///         let frame = |i| u32::from_le_bytes(file[at + i..at + i + 4].try_into().unwrap());
///         index.push(IndexEntry { offset: at as u64, view: 1, seq: position, position, max_seq: position, boot: 0, len: frame(0), crc: frame(4) });
///     }
/// }
/// file.extend_from_slice(&[1, 2, 3]); // a torn append
/// let len = file.len() as u64;
/// let fast = scan(&mut std::io::Cursor::new(&file), len, &index, u64::MAX, None, 256)?;
/// let full = scan(&mut std::io::Cursor::new(&file), len, &[], u64::MAX, None, 256)?;
/// assert_eq!(fast.skimmed.started_at, index[9].offset);
/// assert_eq!((fast.keep, &fast.tail), (full.keep, &full.tail));
/// assert_eq!((fast.skimmed.records, full.skimmed.records), (10, 100));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn scan<R: Read + Seek>(
    src: &mut R,
    len: u64,
    index: &[IndexEntry],
    seq: u64,
    from: Option<&Mark>,
    buffer: usize,
) -> std::io::Result<Scan> {
    scan_to(src, len, index, Stop::Seq(seq), from, buffer, None, false).map(|(s, _)| s)
}

/// Where a [`scan_to`] stops: at the first record whose sequence number is this or more (a
/// skim, a cut), or at the first at or past this view and position (a compaction).
#[derive(Clone, Copy, Debug)]
enum Stop {
    Seq(u64),
    At(u64, u64),
}

impl Stop {
    /// Whether a record with this header is where the scan stops.
    fn reached(self, view: u64, seq: u64, position: u64) -> bool {
        match self {
            Stop::Seq(s) => seq >= s,
            Stop::At(v, p) => (view, position) >= (v, p),
        }
    }

    /// Whether the scan may start at this index entry (everything up to it is kept, it too).
    fn after_entry(self, e: &IndexEntry) -> bool {
        match self {
            Stop::Seq(s) => e.max_seq < s,
            Stop::At(v, p) => (e.view, e.position) < (v, p),
        }
    }
}

/// Reads a log's header: the length of the header (records start there) and the compacted
/// log's base, or `None` if the header is bad (not a log, a torn header, a bad base).
fn read_header<R: Read + Seek>(
    src: &mut R,
    len: u64,
) -> std::io::Result<Option<(usize, Option<Base>)>> {
    if len < MAGIC.len() as u64 {
        return Ok(None);
    }
    let mut head = [0u8; COMPACTED_HEADER];
    let have = usize::try_from(len)
        .unwrap_or(usize::MAX)
        .min(COMPACTED_HEADER);
    src.seek(SeekFrom::Start(0))?;
    src.read_exact(&mut head[..have])?;
    Ok(if &head[..MAGIC.len()] == MAGIC {
        Some((MAGIC.len(), None))
    } else if &head[..MAGIC.len()] == MAGIC_COMPACTED {
        (decode_base(&head[MAGIC.len()..have]).ok()).map(|b| (COMPACTED_HEADER, Some(b)))
    } else {
        None
    })
}

/// [`scan`] to the stop `stop`; with `reindex`, also the entries of an honest index (one
/// every `reindex` bytes, as [`Log`] writes them, `boot` 0) of the records kept, when it read
/// from the file's start (else none). With `verify`, every record read from the start on has
/// its checksum checked ([`ReadMode::Verify`]) and the first that fails ends the valid prefix
/// (see [`Log::skim_with`]); without, only the last one's (the crash point of a log whose
/// policy leaves one write unsynced).
#[allow(clippy::too_many_arguments)]
fn scan_to<R: Read + Seek>(
    src: &mut R,
    len: u64,
    index: &[IndexEntry],
    stop: Stop,
    from: Option<&Mark>,
    buffer: usize,
    reindex: Option<u64>,
    verify: bool,
) -> std::io::Result<(Scan, Vec<IndexEntry>)> {
    let boot = boot_tag();
    let mut peak = 0;
    let mut index_keep = index.iter().take_while(|e| trusted(e, boot)).count();
    // Where to start: (offset, index entry). Only in a file with the log's header (else the
    // whole-file skim says what it is); never inside the header.
    let mut start: Option<(u64, Option<usize>)> = None;
    let header = read_header(src, len)?;
    let (first, base) = header.unwrap_or((MAGIC.len(), None));
    if header.is_none() {
        index_keep = 0;
    }
    if let Some(m) = from
        && header.is_some()
        && !stop.reached(m.view, m.seq, m.position)
        && check_record(
            src,
            len,
            first,
            m.offset,
            (m.view, m.seq, m.position),
            None,
            &mut peak,
        )?
    {
        start = Some((m.offset, None));
    }
    if start.is_none() {
        let mut tried = 0;
        for k in (0..index_keep).rev() {
            let e = &index[k];
            if !stop.after_entry(e) {
                continue;
            }
            if tried == INDEX_TRIES {
                break;
            }
            tried += 1;
            let head = (e.view, e.seq, e.position);
            if check_record(
                src,
                len,
                first,
                e.offset,
                head,
                Some((e.len, e.crc)),
                &mut peak,
            )? {
                start = Some((e.offset, Some(k)));
                break;
            }
            index_keep = k;
        }
        if start.is_none() && tried > 0 {
            index_keep = 0;
        }
    }
    let mut out = Skimmed {
        base,
        ..Skimmed::default()
    };
    let mut max_seq = base.map(|b| b.max_seq);
    let mut next_mark = 0;
    if let Some((offset, entry)) = start {
        src.seek(SeekFrom::Start(offset))?;
        out.started_at = offset;
        next_mark = offset as usize;
        if let Some(k) = entry {
            max_seq = Some(index[k].max_seq);
            // The entries before it become marks only once each checks out as the start did:
            // a stale entry (a log cut, replaced or compacted since) is no place to start a
            // read (s21; the replay checked its mark's first record since s20, other users
            // did not).
            for e in &index[..k] {
                let head = (e.view, e.seq, e.position);
                let frame = Some((e.len, e.crc));
                if check_record(src, len, first, e.offset, head, frame, &mut peak)? {
                    out.marks.push(Mark {
                        offset: e.offset,
                        view: e.view,
                        seq: e.seq,
                        position: e.position,
                    });
                }
            }
            src.seek(SeekFrom::Start(offset))?;
        }
    } else {
        src.seek(SeekFrom::Start(0))?;
    }
    let mode = if verify {
        ReadMode::Verify
    } else {
        ReadMode::Skim
    };
    let mut reader = match start {
        Some((offset, _)) => Reader::at(&mut *src, len, offset, buffer, mode),
        None => Reader::new(&mut *src, len, buffer, mode),
    };
    let mut rebuilt = Vec::new();
    let mut next_entry = 0u64;
    let mut prev: Option<(Record, usize)> = None;
    let mut last: Option<(Record, usize)> = None;
    let mut cut_at: Option<usize> = None;
    while let Some(r) = reader.next_record()? {
        let at = reader.last_record_at().map_or(0, |(at, _)| at);
        if stop.reached(r.view, r.seq, r.position) {
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
        max_seq = Some(max_seq.map_or(r.seq, |m: u64| m.max(r.seq)));
        if let Some(every) = reindex
            && start.is_none()
            && at as u64 >= next_entry
            && let (Some((len, crc)), Some(max_seq)) = (reader.last_frame(), max_seq)
        {
            rebuilt.push(IndexEntry {
                offset: at as u64,
                view: r.view,
                seq: r.seq,
                position: r.position,
                max_seq,
                boot: 0,
                len,
                crc,
            });
            next_entry = (at as u64).saturating_add(every);
        }
        prev = last.take();
        // Payload left out (a verifying scan read it).
        last = Some((
            Record {
                payload: Vec::new(),
                ..r
            },
            at,
        ));
    }
    out.peak_buffer = reader.peak_buffer().max(peak);
    let mut tail = reader.tail().cloned();
    let mut keep = match cut_at {
        Some(at) => at,
        None => reader.valid_len(),
    };
    drop(reader);
    let mut synced_after = None;
    if let Some(TailError::Checksum { offset: bad, .. }) = tail
        && cut_at.is_none()
    {
        // Verified: a record that fails its checksum, whole (its frame is in range and in
        // the file). Past the stop, it is cut as the stop's record would be; before it, it is
        // the torn tail unless the index proves a later record synced.
        let mut head = [0u8; FRAME + 24];
        src.seek(SeekFrom::Start(bad as u64))?;
        src.read_exact(&mut head)?;
        let (view, seq, position) = (
            u64_at(&head, FRAME),
            u64_at(&head, FRAME + 8),
            u64_at(&head, FRAME + 16),
        );
        if stop.reached(view, seq, position) {
            cut_at = Some(bad);
            tail = None;
        } else {
            for e in index
                .iter()
                .filter(|e| e.boot == 0 && e.offset > bad as u64)
            {
                let head = (e.view, e.seq, e.position);
                let frame = Some((e.len, e.crc));
                if check_record(src, len, first, e.offset, head, frame, &mut peak)? {
                    synced_after = Some(e.offset);
                    break;
                }
            }
            out.peak_buffer = out.peak_buffer.max(peak);
        }
    }
    if !verify
        && cut_at.is_none()
        && let Some(at) = last.as_ref().map(|(_, at)| *at)
        && at as u64 != out.started_at
    {
        // The crash point: check the last record's checksum (the one started at is checked).
        let mut frame = vec![0; keep - at];
        src.seek(SeekFrom::Start(at as u64))?;
        src.read_exact(&mut frame)?;
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
    // Index entries stay while their records are whole in what is kept.
    let whole = |e: &IndexEntry| e.offset + (FRAME as u64) + u64::from(e.len) <= keep as u64;
    let index_keep = index[..index_keep].iter().take_while(|e| whole(e)).count();
    rebuilt.retain(whole);
    // Nothing read: the record before the first is the compacted log's base, if any.
    out.last = last.map(|(r, _)| r).or_else(|| base.map(|b| b.record()));
    Ok((
        Scan {
            skimmed: out,
            keep,
            cut: cut_at.is_some(),
            tail,
            max_seq,
            index_keep,
            synced_after,
        },
        rebuilt,
    ))
}

/// Builds the honest side index of the log read from `src` (its bytes from the start to the
/// end; a `Cursor` over a slice will do): [`INDEX_MAGIC`], then an [`IndexEntry`] for the
/// first record of the valid prefix and for each first record at least `every` bytes after
/// the previous entry's — what [`Log`] writes for these records appended and synced
/// (`boot` 0), over the records a [`Log::skim`] of the file keeps (a torn or corrupt tail
/// has none). A compacted log's entries count its [`Base`]'s `max_seq`. [`Log::open`] calls
/// it (in effect) when it had to read the whole file. Errors are the source's only.
///
/// ```
/// use squall_round_robin::log::{decode_index, encode_record, rebuild_index, MAGIC, Record};
/// use squall_transport::NodeId;
/// let mut file = MAGIC.to_vec();
/// for position in 0..100 {
///     let r = Record { view: 1, seq: position, position, sender: NodeId(0), payload: vec![7; 64] };
///     encode_record(&r, &mut file); // 100 bytes each
/// }
/// let index = decode_index(&rebuild_index(std::io::Cursor::new(&file), 1000)?);
/// assert_eq!(index.len(), 10);
/// assert_eq!((index[0].offset, index[1].offset, index[9].max_seq), (8, 1008, 90));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn rebuild_index<R: Read + Seek>(mut src: R, every: u64) -> std::io::Result<Vec<u8>> {
    let len = src.seek(SeekFrom::End(0))?;
    let stop = Stop::Seq(u64::MAX);
    let (_, entries) = scan_to(
        &mut src,
        len,
        &[],
        stop,
        None,
        DEFAULT_READ_BUFFER,
        Some(every),
        false,
    )?;
    Ok(encode_index(&entries))
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
/// back to `buffer` on the next refill (a compacted log's [`Base`] frame, 52 bytes, is read
/// whole too). [`peak_buffer`](Reader::peak_buffer) reports the most it held.
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
    last_frame: Option<(u32, u32)>,
    log_base: Option<Base>,
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
            last_frame: None,
            log_base: None,
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
            let magic = &self.buf[self.start..self.start + MAGIC.len()];
            let compacted = magic == MAGIC_COMPACTED;
            if magic != MAGIC && !compacted {
                return self.stop(TailError::BadMagic);
            }
            self.start += MAGIC.len();
            if compacted {
                // The base frame: at most its length, as much as the file holds.
                let have = (self.total - MAGIC.len()).min(FRAME + BASE_BODY);
                self.fill(have)?;
                match decode_base(&self.buf[self.start..self.start + have]) {
                    Ok(b) => {
                        self.last = Some((b.view, b.position));
                        self.log_base = Some(b);
                        self.start += FRAME + BASE_BODY;
                    }
                    Err(why) => return self.stop(why),
                }
            }
            self.valid_len = self.log_base.map_or(MAGIC.len(), |_| COMPACTED_HEADER);
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
        let stored = u32_at(frame, 4);
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
            && !follows((view, position), (r.view, r.position))
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
        self.last_frame = Some((len as u32, stored));
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

    /// The last record yielded's frame: its body length and stored checksum.
    pub fn last_frame(&self) -> Option<(u32, u32)> {
        self.last_frame
    }

    /// A compacted log's [`Base`], once read (a reader started at an offset reads none).
    pub fn base(&self) -> Option<&Base> {
        self.log_base.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// s25 follow-up (R4): the catch-up's rounds. The first eight always go on; past them
    /// only while the tail shrinks, within the round and time budgets.
    #[test]
    fn the_catch_up_goes_on_while_the_tail_shrinks_within_its_budget() {
        let big = 10 * CATCH_UP_TAIL;
        let ms = Duration::from_millis;
        assert!(catch_up_again(1, big, u64::MAX, ms(0)));
        assert!(catch_up_again(CATCH_UP_ROUNDS, big, big / 2, ms(0)));
        // Past the first rounds: shrinking goes on, a tail that grew or stayed stops.
        assert!(catch_up_again(CATCH_UP_ROUNDS + 1, big, big + 1, ms(10)));
        assert!(!catch_up_again(CATCH_UP_ROUNDS + 1, big, big, ms(10)));
        assert!(!catch_up_again(CATCH_UP_ROUNDS + 1, big + 1, big, ms(10)));
        // The budgets end even a shrinking tail.
        assert!(!catch_up_again(CATCH_UP_MAX_ROUNDS, big, big + 1, ms(10)));
        assert!(!catch_up_again(
            CATCH_UP_ROUNDS + 1,
            big,
            big + 1,
            CATCH_UP_BUDGET
        ));
    }
}
