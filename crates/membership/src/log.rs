//! The durable view/trim log: every installed view and every decision (changes + trim) a member
//! logged before echoing or acting on it.
//!
//! Layout: an 8-byte magic (`SQGMSLG1`), then records of
//! `[body length: u32 LE][CRC-32 of the body: u32 LE][body]` (the framing of round-robin's log).
//! Bodies (little endian): `1, view: u64, n: u32, n × node: u32` for an installed view;
//! `2, view: u64, rank: u64, c: u32, c × change: u64, t: u32, t × (node: u32, count: u64)` for
//! a decision whose holders are not known (the format before s17's holder log: such records
//! still decode); `7`, the same fields as `2`, then `h: u32, ceil(h/8) × byte` for a decision
//! with its holders (a bitmap by rank in the ending view, `h` = `t`, bit `i % 8` of byte
//! `i / 8`, unused bits 0); `3, view: u64, rank: u64` for a restart promise; `4, view: u64, k: u32, k × (n:
//! u32, n × node: u32)` for a view's shards; `5, view: u64, shard: u32, first: u64, position:
//! u64, f: u32, f × byte` for a persisted transferred state (the file name, UTF-8, at most
//! [`MAX_FILE_NAME`] bytes); `6, view: u64` for a member whose state was voided (it joins again);
//! `9, membership: u64, layout: u64, driver: u64` for the settings digest the records after it
//! were written under (each word nonzero; logs written before s24 have none); `10, view: u64`
//! for a request to leave asked by the application (s26; logs written before have none).
//!
//! [`decode`] is the pure decoder (fuzzed by `fuzz/fuzz_targets/gms_log.rs`): it returns the
//! records of the longest valid prefix and why it stopped. [`FileLog::open`] truncates a torn or
//! corrupt tail to that prefix, saying at `warn` what it dropped.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use squall_round_robin::log::{FrameError, read_frame, write_frame};
use squall_transport::NodeId;
use thiserror::Error;

use crate::change::{Change, Decision};
use crate::settings::SettingsDigest;
use crate::trim::Trim;
use crate::view::Inadequate;

/// The file's first eight bytes.
pub const MAGIC: &[u8; 8] = b"SQGMSLG1";
/// Bytes of a record's frame before the body.
pub const FRAME: usize = 8;
/// The largest body a record may declare.
pub const MAX_BODY: usize = 1 << 24;
/// The longest snapshot file name a [`Record::Snapshot`] may carry.
pub const MAX_FILE_NAME: usize = 255;

/// One logged fact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// This member installed view `view` with `members` (rank order).
    Installed {
        /// The view id.
        view: u64,
        /// Its members.
        members: Vec<NodeId>,
    },
    /// This member logged `decision`, which ends view `decision.trim.view`.
    Decided {
        /// The decision.
        decision: Decision,
        /// The members of the ending view that held their shard's state when it ended (by rank
        /// in that view, one per trim count), as the decision carried them; `None`: not known
        /// (a decision of a restart, or one logged before the holders were), for which the next
        /// view counts every shard member as holding (see `View::next_holding`).
        holders: Option<Vec<bool>>,
    },
    /// During a total restart, this member promised the restart leader with ballot `rank` not
    /// to accept a decision for view `view` from a lower ballot (logged before it acknowledges
    /// the leader's proposal; see [`crate::restart`]).
    Promised {
        /// The view being restarted.
        view: u64,
        /// The ballot.
        rank: u64,
    },
    /// The shards of view `view` (logged right before its [`Record::Installed`] when the
    /// layout has several shards, so that a log holding the `Installed` holds them too; right
    /// after it in logs written before s21): each shard's members in order. A restarting member needs them to
    /// know which shard it held (the layout of a view depends on the previous views').
    Shards {
        /// The view id.
        view: u64,
        /// Each shard's members, in shard order (a lost shard is empty).
        shards: Vec<Vec<NodeId>>,
    },
    /// This member's state transfer completed in view `view` and the state it received is in
    /// the snapshot file `file` of its durable directory (written and synced before this record;
    /// see [`crate::snapshot`]). A restart hands that state to the application and replays the
    /// epoch logs from `position` on, the log of `view` with its positions shifted by
    /// `first_position` (a passive epoch counts from 0).
    Snapshot {
        /// The view in which the transfer completed.
        view: u64,
        /// The member's shard in that view.
        shard: u32,
        /// That view's first position in the shard: the offset of the epoch log's positions.
        first_position: u64,
        /// The first position the state does not reflect.
        position: u64,
        /// The snapshot's file name in the member's durable directory.
        file: String,
    },
    /// Why view `view` is inadequate, as the member installed it (logged after its
    /// [`Record::Shards`] and right before its [`Record::Installed`] when the view is
    /// inadequate, right after both in logs written before s21; none for an adequate view). A view rebuilt from the log ([`crate::restart::logged_view`]) takes this
    /// verdict instead of recounting it: the count of a lost shard's survivors
    /// ([`Inadequate::have`]) depends on the holders of the view before, which a restart does
    /// not recompute, so without it a restarted member could report another verdict than the
    /// live members did.
    Verdict {
        /// The view id.
        view: u64,
        /// The verdict.
        why: Inadequate,
    },
    /// This member's state up to here is void: it joins again and takes its state by transfer
    /// (logged when a restart found the group gone on without it, view `view` being the newer
    /// view, and when a node starts as a joiner on a log that holds earlier records). Until a
    /// later [`Record::Snapshot`], a restart treats it as holding no state.
    StateDropped {
        /// The view that superseded its state (0 when unknown).
        view: u64,
    },
    /// The settings digest ([`SettingsDigest`]) of the configuration the records after it were
    /// written under: logged once per start of the member, before the first view record of
    /// that life, unless the log's latest such record already holds it. A restart whose
    /// configuration has another digest than the latest logged one is refused
    /// ([`GmsError::SettingsChanged`](crate::GmsError::SettingsChanged)); a log without one
    /// (written before s24) restarts unchecked.
    Settings {
        /// The digest.
        digest: SettingsDigest,
    },
    /// This member's application asked to leave while the member ran view `view` (logged by
    /// [`Gms::leave`](crate::Gms::leave) before it publishes the request, once per life; s26,
    /// `docs/MEMBERSHIP.md`, sixty-ninth part). Until a later [`Record::Installed`] without this
    /// member (the leave, or a removal) or a [`Record::StateDropped`], the request is pending:
    /// a total restart asks again once the restart view is installed
    /// ([`Recovered::leave_pending`]).
    LeaveAsked {
        /// The view it was asked in.
        view: u64,
    },
}

/// Why decoding stopped before the end of the bytes.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum TailError {
    /// The bytes do not start with [`MAGIC`].
    #[error("bad header: the file does not start with {MAGIC:?}")]
    BadMagic,
    /// The last record is incomplete (a crash in the middle of an append).
    #[error("torn record at byte {offset}: {have} of {need} bytes present")]
    Torn {
        /// Where the record starts.
        offset: usize,
        /// Bytes present.
        have: usize,
        /// Bytes needed.
        need: usize,
    },
    /// A checksum mismatch.
    #[error("corrupt record at byte {offset}: checksum {found:#010x}, expected {expected:#010x}")]
    Checksum {
        /// Where the record starts.
        offset: usize,
        /// Stored.
        found: u32,
        /// Computed.
        expected: u32,
    },
    /// An impossible declared length.
    #[error("corrupt record at byte {offset}: body length {len} out of range")]
    Length {
        /// Where the record starts.
        offset: usize,
        /// Declared length.
        len: usize,
    },
    /// A body whose checksum matches but whose contents do not parse.
    #[error("malformed record at byte {offset}: {why}")]
    Malformed {
        /// Where the record starts.
        offset: usize,
        /// What is wrong.
        why: &'static str,
    },
}

/// What [`decode`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// The records of the longest valid prefix.
    pub records: Vec<Record>,
    /// That prefix's length in bytes (0 when the header is bad).
    pub valid_len: usize,
    /// Why decoding stopped early, if it did.
    pub tail: Option<TailError>,
}

/// Errors of a log.
#[derive(Debug, Error)]
pub enum LogError {
    /// The file system failed.
    #[error("membership log {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a membership log.
    #[error("{path} is not a membership log (bad header); move it away or pick another path")]
    NotALog {
        /// The path.
        path: PathBuf,
    },
    /// A record too large to log.
    #[error("record of {len} bytes exceeds the log's limit of {MAX_BODY}")]
    TooLarge {
        /// Its length.
        len: usize,
    },
}

/// Where the membership core makes facts durable. `append` returns only once the record is
/// persisted (the core echoes or acts on a decision only after logging it).
pub trait Durable {
    /// Persists `record`.
    fn append(&mut self, record: &Record) -> Result<(), LogError>;

    /// Persists `records`, in order, as one batch: the records the core logs at the same
    /// moment (a view's [`restart::installed_records`](crate::restart::installed_records),
    /// after a decision when it installs by it at once). [`FileLog`] writes them with one
    /// `write` and one `fdatasync` (since s22; one each per record before). Whatever a crash
    /// or a power loss keeps of the batch reads back as a prefix of it, whole records in the
    /// order given (the reader keeps a log's longest valid prefix), so a record that must not
    /// be read without another goes after it. By default each record is
    /// [`append`](Self::append)ed in turn.
    ///
    /// ```
    /// use squall_membership::log::{Durable, MemLog, Record};
    /// use squall_transport::NodeId;
    /// let mut log = MemLog::default();
    /// log.append_all(&[
    ///     Record::Shards { view: 0, shards: vec![vec![NodeId(0)], vec![NodeId(1)]] },
    ///     Record::Installed { view: 0, members: vec![NodeId(0), NodeId(1)] },
    /// ])?;
    /// let (_, rec) = MemLog::open(log.bytes().to_vec());
    /// assert_eq!(rec.records.len(), 2);
    /// # Ok::<(), squall_membership::log::LogError>(())
    /// ```
    fn append_all(&mut self, records: &[Record]) -> Result<(), LogError> {
        records.iter().try_for_each(|r| self.append(r))
    }

    /// Persists the records of a view the core installs at the end of a view change
    /// ([`restart::installed_records`](crate::restart::installed_records): its shards and
    /// verdict, then its [`Record::Installed`]), as one batch like
    /// [`append_all`](Self::append_all). They repeat what is durable already (the decision
    /// the member logged, synced, before echoing it determines the view), so a log that only
    /// has to survive a crash of the process may write them without waiting for the disk: see
    /// [`FileLog::set_sync_installed`] for when that is safe. By default the same as
    /// [`append_all`](Self::append_all).
    fn append_installed(&mut self, records: &[Record]) -> Result<(), LogError> {
        self.append_all(records)
    }
}

/// Appends `r`'s encoding (frame included) to `out`.
///
/// ```
/// use squall_membership::log::{decode, encode_record, Record, MAGIC};
/// use squall_transport::NodeId;
/// let r = Record::Installed { view: 2, members: vec![NodeId(1), NodeId(0)] };
/// let mut bytes = MAGIC.to_vec();
/// encode_record(&r, &mut bytes);
/// assert_eq!(decode(&bytes).records, vec![r]);
/// ```
pub fn encode_record(r: &Record, out: &mut Vec<u8>) {
    write_frame(out, |out| match r {
        Record::Installed { view, members } => {
            out.push(1);
            out.extend_from_slice(&view.to_le_bytes());
            out.extend_from_slice(&(members.len() as u32).to_le_bytes());
            for m in members {
                out.extend_from_slice(&m.0.to_le_bytes());
            }
        }
        Record::Decided {
            decision: d,
            holders,
        } => {
            out.push(if holders.is_some() { 7 } else { 2 });
            out.extend_from_slice(&d.trim.view.to_le_bytes());
            out.extend_from_slice(&d.rank.to_le_bytes());
            out.extend_from_slice(&(d.changes.len() as u32).to_le_bytes());
            for c in &d.changes {
                out.extend_from_slice(&c.encode().to_le_bytes());
            }
            out.extend_from_slice(&(d.trim.counts.len() as u32).to_le_bytes());
            for (n, c) in &d.trim.counts {
                out.extend_from_slice(&n.0.to_le_bytes());
                out.extend_from_slice(&c.to_le_bytes());
            }
            if let Some(h) = holders {
                out.extend_from_slice(&(h.len() as u32).to_le_bytes());
                for byte in h.chunks(8) {
                    let bits = byte.iter().enumerate().filter(|(_, b)| **b);
                    out.push(bits.fold(0u8, |acc, (i, _)| acc | 1 << i));
                }
            }
        }
        Record::Promised { view, rank } => {
            out.push(3);
            out.extend_from_slice(&view.to_le_bytes());
            out.extend_from_slice(&rank.to_le_bytes());
        }
        Record::Shards { view, shards } => {
            out.push(4);
            out.extend_from_slice(&view.to_le_bytes());
            out.extend_from_slice(&(shards.len() as u32).to_le_bytes());
            for s in shards {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                for m in s {
                    out.extend_from_slice(&m.0.to_le_bytes());
                }
            }
        }
        Record::Snapshot {
            view,
            shard,
            first_position,
            position,
            file,
        } => {
            out.push(5);
            out.extend_from_slice(&view.to_le_bytes());
            out.extend_from_slice(&shard.to_le_bytes());
            out.extend_from_slice(&first_position.to_le_bytes());
            out.extend_from_slice(&position.to_le_bytes());
            out.extend_from_slice(&(file.len() as u32).to_le_bytes());
            out.extend_from_slice(file.as_bytes());
        }
        Record::StateDropped { view } => {
            out.push(6);
            out.extend_from_slice(&view.to_le_bytes());
        }
        Record::Settings { digest } => {
            out.push(9);
            for w in digest.words() {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
        Record::LeaveAsked { view } => {
            out.push(10);
            out.extend_from_slice(&view.to_le_bytes());
        }
        Record::Verdict { view, why } => {
            out.push(8);
            out.extend_from_slice(&view.to_le_bytes());
            for w in Inadequate::encode(Some(why)) {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
    });
}

/// A cursor over a record body.
struct Body<'a>(&'a [u8]);

impl Body<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_at_checked(N)?;
        self.0 = rest;
        head.try_into().ok()
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take::<4>().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take::<8>().map(u64::from_le_bytes)
    }
    /// A count of items of `size` bytes each, refused if the body cannot hold that many.
    fn count(&mut self, size: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n.checked_mul(size)? <= self.0.len()).then_some(n)
    }
}

fn parse(body: &[u8]) -> Result<Record, &'static str> {
    let mut b = Body(body);
    let short = "body too short for its declared contents";
    let r = match b.u8().ok_or(short)? {
        1 => {
            let view = b.u64().ok_or(short)?;
            let n = b.count(4).ok_or(short)?;
            let mut members = Vec::with_capacity(n);
            for _ in 0..n {
                members.push(NodeId(b.u32().ok_or(short)?));
            }
            Record::Installed { view, members }
        }
        tag @ (2 | 7) => {
            let view = b.u64().ok_or(short)?;
            let rank = b.u64().ok_or(short)?;
            let n = b.count(8).ok_or(short)?;
            let mut changes = Vec::with_capacity(n);
            for _ in 0..n {
                changes.push(Change::decode(b.u64().ok_or(short)?).ok_or("unknown change kind")?);
            }
            let t = b.count(12).ok_or(short)?;
            let mut counts = Vec::with_capacity(t);
            for _ in 0..t {
                counts.push((NodeId(b.u32().ok_or(short)?), b.u64().ok_or(short)?));
            }
            let holders = if tag == 7 {
                let h = b.u32().ok_or(short)? as usize;
                if h != t {
                    return Err("decision holders not one per trim count");
                }
                let (bytes, rest) = b.0.split_at_checked(h.div_ceil(8)).ok_or(short)?;
                b.0 = rest;
                if h % 8 != 0 && bytes.last().is_some_and(|l| l >> (h % 8) != 0) {
                    return Err("decision holder bitmap has bits past its count");
                }
                Some((0..h).map(|i| bytes[i / 8] >> (i % 8) & 1 != 0).collect())
            } else {
                None
            };
            Record::Decided {
                decision: Decision {
                    rank,
                    changes,
                    trim: Trim { view, counts },
                },
                holders,
            }
        }
        3 => Record::Promised {
            view: b.u64().ok_or(short)?,
            rank: b.u64().ok_or(short)?,
        },
        4 => {
            let view = b.u64().ok_or(short)?;
            // Every shard takes at least its 4-byte count.
            let k = b.count(4).ok_or(short)?;
            let mut shards = Vec::with_capacity(k);
            for _ in 0..k {
                let n = b.count(4).ok_or(short)?;
                let mut members = Vec::with_capacity(n);
                for _ in 0..n {
                    members.push(NodeId(b.u32().ok_or(short)?));
                }
                shards.push(members);
            }
            Record::Shards { view, shards }
        }
        5 => {
            let view = b.u64().ok_or(short)?;
            let shard = b.u32().ok_or(short)?;
            let first_position = b.u64().ok_or(short)?;
            let position = b.u64().ok_or(short)?;
            let n = b.count(1).ok_or(short)?;
            if n > MAX_FILE_NAME {
                return Err("snapshot file name too long");
            }
            let (name, rest) = b.0.split_at(n);
            b.0 = rest;
            let file = std::str::from_utf8(name)
                .map_err(|_| "snapshot file name is not UTF-8")?
                .to_string();
            Record::Snapshot {
                view,
                shard,
                first_position,
                position,
                file,
            }
        }
        6 => Record::StateDropped {
            view: b.u64().ok_or(short)?,
        },
        8 => {
            let view = b.u64().ok_or(short)?;
            let words = [b.u64().ok_or(short)?, b.u64().ok_or(short)?];
            let why = Inadequate::decode_words(words)
                .ok()
                .flatten()
                // Counts past `u32::MAX` saturate: such a verdict would not re-encode alike.
                .filter(|w| Inadequate::encode(Some(w)) == words)
                .ok_or("malformed inadequacy verdict")?;
            Record::Verdict { view, why }
        }
        9 => {
            let words = [
                b.u64().ok_or(short)?,
                b.u64().ok_or(short)?,
                b.u64().ok_or(short)?,
            ];
            let digest = SettingsDigest::from_words(&words).ok_or("zero settings digest word")?;
            Record::Settings { digest }
        }
        10 => Record::LeaveAsked {
            view: b.u64().ok_or(short)?,
        },
        _ => return Err("unknown record tag"),
    };
    if !b.0.is_empty() {
        return Err("trailing bytes after the record");
    }
    Ok(r)
}

/// Decodes a whole log's bytes: the records of the longest valid prefix. Never panics.
///
/// ```
/// use squall_membership::log::{decode, TailError};
/// assert_eq!(decode(b"").tail, None);
/// assert_eq!(decode(b"nonsense").tail, Some(TailError::BadMagic));
/// ```
pub fn decode(bytes: &[u8]) -> Decoded {
    let mut d = Decoded::default();
    if bytes.is_empty() {
        return d;
    }
    if !bytes.starts_with(MAGIC) {
        d.tail = Some(TailError::BadMagic);
        return d;
    }
    let mut at = MAGIC.len();
    d.valid_len = at;
    while at < bytes.len() {
        let (body, next) = match read_frame(bytes, at, 1..=MAX_BODY) {
            Ok(f) => f,
            Err(e) => {
                d.tail = Some(e.into());
                break;
            }
        };
        match parse(body) {
            Ok(r) => d.records.push(r),
            Err(why) => {
                d.tail = Some(TailError::Malformed { offset: at, why });
                break;
            }
        }
        at = next;
        d.valid_len = at;
    }
    d
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

/// What a log held when opened: the last installed view and the last decision logged after it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Every record that survived.
    pub records: Vec<Record>,
    /// Why a tail was dropped, if one was.
    pub truncated: Option<TailError>,
}

impl Recovered {
    /// The settings digest the log's latest [`Record::Settings`] holds; `None` for a log
    /// written before s24 (or one that holds no record).
    ///
    /// ```
    /// use squall_membership::log::{Durable, MemLog, Record};
    /// use squall_membership::{GmsConfig, settings::SettingsDigest};
    /// use squall_transport::{NodeId, RegionId};
    /// let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
    /// let cfg = GmsConfig::new(RegionId(0), ids.clone(), ids);
    /// let digest = SettingsDigest::of(&cfg, &cfg.shard_layout());
    /// let mut log = MemLog::default();
    /// log.append(&Record::Settings { digest })?;
    /// let (_, rec) = MemLog::open(log.bytes().to_vec());
    /// assert_eq!(rec.settings(), Some(digest));
    /// # Ok::<(), squall_membership::log::LogError>(())
    /// ```
    pub fn settings(&self) -> Option<SettingsDigest> {
        self.records.iter().rev().find_map(|r| match r {
            Record::Settings { digest } => Some(*digest),
            _ => None,
        })
    }

    /// The last installed view, `(id, members)`.
    pub fn last_view(&self) -> Option<(u64, &[NodeId])> {
        self.records.iter().rev().find_map(|r| match r {
            Record::Installed { view, members } => Some((*view, members.as_slice())),
            _ => None,
        })
    }

    /// The members of view `view` as this member installed it (the last such record).
    pub fn members_of(&self, view: u64) -> Option<&[NodeId]> {
        self.records.iter().rev().find_map(|r| match r {
            Record::Installed { view: v, members } if *v == view => Some(members.as_slice()),
            _ => None,
        })
    }

    /// The shards of view `view` as logged (the last such record; none for a log written with
    /// a single shard, whose one shard holds every member).
    ///
    /// ```
    /// use squall_membership::log::{Durable, MemLog, Record};
    /// use squall_transport::NodeId;
    /// let mut log = MemLog::default();
    /// log.append(&Record::Installed { view: 0, members: vec![NodeId(0), NodeId(1)] })?;
    /// log.append(&Record::Shards { view: 0, shards: vec![vec![NodeId(0)], vec![NodeId(1)]] })?;
    /// let (_, rec) = MemLog::open(log.bytes().to_vec());
    /// assert_eq!(rec.shards_for(0).map(<[_]>::len), Some(2));
    /// assert_eq!(rec.shards_for(1), None);
    /// # Ok::<(), squall_membership::log::LogError>(())
    /// ```
    pub fn shards_for(&self, view: u64) -> Option<&[Vec<NodeId>]> {
        self.records.iter().rev().find_map(|r| match r {
            Record::Shards { view: v, shards } if *v == view => Some(shards.as_slice()),
            _ => None,
        })
    }

    /// The verdict logged for view `view` with its last [`Record::Installed`] (right before
    /// it since s21, right after it in older logs; `None`: none was, an adequate view or a
    /// log written before verdicts were logged).
    ///
    /// ```
    /// use squall_membership::log::{Durable, MemLog, Record};
    /// use squall_membership::view::{Inadequate, ShardId};
    /// use squall_transport::NodeId;
    /// let mut log = MemLog::default();
    /// let why = Inadequate::short(ShardId { subgroup: 0, shard: 1 }, 1, 1, true);
    /// // A log written before s21: the verdict after `Installed`.
    /// log.append(&Record::Installed { view: 3, members: vec![NodeId(0), NodeId(1)] })?;
    /// log.append(&Record::Verdict { view: 3, why: why.clone() })?;
    /// // Since s21 (`restart::installed_records`): before it.
    /// log.append(&Record::Verdict { view: 4, why: why.clone() })?;
    /// log.append(&Record::Installed { view: 4, members: vec![NodeId(0), NodeId(1)] })?;
    /// let (_, rec) = MemLog::open(log.bytes().to_vec());
    /// assert_eq!(rec.verdict_for(3), Some(&why));
    /// assert_eq!(rec.verdict_for(4), Some(&why));
    /// assert_eq!(rec.verdict_for(2), None);
    /// # Ok::<(), squall_membership::log::LogError>(())
    /// ```
    pub fn verdict_for(&self, view: u64) -> Option<&Inadequate> {
        let installed = self
            .records
            .iter()
            .rposition(|r| matches!(r, Record::Installed { view: v, .. } if *v == view))?;
        // The records logged with that `Installed` (`restart::installed_records`): since s21
        // `[Shards?, Verdict?, Installed]`, in older logs `[Installed, Shards?, Verdict?]`.
        let with = |r: &Record| matches!(r, Record::Shards { view: v, .. } | Record::Verdict { view: v, .. } if *v == view);
        fn verdict(r: &Record) -> Option<&Inadequate> {
            match r {
                Record::Verdict { why, .. } => Some(why),
                _ => None,
            }
        }
        match installed.checked_sub(1).map(|i| &self.records[i]) {
            Some(r) if with(r) => verdict(r),
            _ => self.records[installed + 1..]
                .iter()
                .take(2)
                .take_while(|r| with(r))
                .find_map(verdict),
        }
    }

    /// The state this member's logs can rebuild from, as of the log's end: the last
    /// [`Record::Snapshot`] (`Some`), unless a later [`Record::StateDropped`] voided it; `None`
    /// also when neither was logged (an initial member, which needs no snapshot, or a joiner
    /// whose transfer never completed: see [`holds_initial_state`](Self::holds_initial_state)).
    ///
    /// ```
    /// use squall_membership::log::{Durable, MemLog, Record};
    /// use squall_transport::NodeId;
    /// let mut log = MemLog::default();
    /// log.append(&Record::Installed { view: 2, members: vec![NodeId(0), NodeId(3)] })?;
    /// log.append(&Record::Snapshot { view: 2, shard: 0, first_position: 9, position: 11, file: "snapshot-x.state".into() })?;
    /// let (_, rec) = MemLog::open(log.bytes().to_vec());
    /// assert!(matches!(rec.last_snapshot(), Some(Record::Snapshot { position: 11, .. })));
    /// log.append(&Record::StateDropped { view: 4 })?;
    /// let (_, rec) = MemLog::open(log.bytes().to_vec());
    /// assert_eq!(rec.last_snapshot(), None);
    /// # Ok::<(), squall_membership::log::LogError>(())
    /// ```
    pub fn last_snapshot(&self) -> Option<&Record> {
        self.records
            .iter()
            .rev()
            .find(|r| matches!(r, Record::Snapshot { .. } | Record::StateDropped { .. }))
            .filter(|r| matches!(r, Record::Snapshot { .. }))
    }

    /// Whether this log starts as an initial member's does (its first record installs view 0,
    /// after the settings digest, shards and verdict logged with it) and no
    /// [`Record::StateDropped`] voided that state since: such a member's epoch logs rebuild its
    /// state from position 0 without a snapshot.
    pub fn holds_initial_state(&self) -> bool {
        matches!(
            self.records.iter().find(|r| !matches!(
                r,
                Record::Settings { .. }
                    | Record::Shards { view: 0, .. }
                    | Record::Verdict { view: 0, .. }
            )),
            Some(Record::Installed { view: 0, .. })
        ) && !self
            .records
            .iter()
            .any(|r| matches!(r, Record::StateDropped { .. }))
    }

    /// A request to leave that member `me`'s application asked for and that is still pending
    /// as of the log's end: the view of the last [`Record::LeaveAsked`], unless a later
    /// [`Record::Installed`] names a view without `me` (it left, or was removed) or a later
    /// [`Record::StateDropped`] says it joins again as a new member. `None` for a log written
    /// before s26. A total restart asks again for such a leave once the restart view is
    /// installed (`docs/MEMBERSHIP.md`, sixty-ninth part).
    ///
    /// ```
    /// use squall_membership::log::{Durable, MemLog, Record};
    /// use squall_transport::NodeId;
    /// let (a, b) = (NodeId(0), NodeId(1));
    /// let mut log = MemLog::default();
    /// log.append(&Record::Installed { view: 2, members: vec![a, b] })?;
    /// log.append(&Record::LeaveAsked { view: 2 })?;
    /// log.append(&Record::Installed { view: 3, members: vec![a, b] })?;
    /// let (_, rec) = MemLog::open(log.bytes().to_vec());
    /// assert_eq!(rec.leave_pending(b), Some(2));
    /// // The view without it: the leave went through.
    /// log.append(&Record::Installed { view: 4, members: vec![a] })?;
    /// let (_, rec) = MemLog::open(log.bytes().to_vec());
    /// assert_eq!(rec.leave_pending(b), None);
    /// # Ok::<(), squall_membership::log::LogError>(())
    /// ```
    pub fn leave_pending(&self, me: NodeId) -> Option<u64> {
        let at = (self.records.iter()).rposition(|r| matches!(r, Record::LeaveAsked { .. }))?;
        let done = self.records[at + 1..].iter().any(|r| match r {
            Record::Installed { members, .. } => !members.contains(&me),
            Record::StateDropped { .. } => true,
            _ => false,
        });
        match &self.records[at] {
            Record::LeaveAsked { view } if !done => Some(*view),
            _ => None,
        }
    }

    /// The records logged since the last [`Record::Installed`] of view `view` (all of them if
    /// none names it): what this member did in its latest run of `view`. A view can run twice
    /// (s28, ninetieth part of `docs/MEMBERSHIP.md`): a member restarting at `view` logged a
    /// decision for it, then found a restart of the view before it running `view` again and
    /// installed it anew; that decision belongs to the dead run and decides nothing in the new.
    ///
    /// ```
    /// use squall_membership::log::{Durable, MemLog, Record};
    /// use squall_transport::NodeId;
    /// let mut log = MemLog::default();
    /// log.append(&Record::Installed { view: 2, members: vec![NodeId(0)] })?;
    /// log.append(&Record::Promised { view: 2, rank: 1 << 32 })?;
    /// log.append(&Record::Installed { view: 2, members: vec![NodeId(0)] })?;
    /// let (_, rec) = MemLog::open(log.bytes().to_vec());
    /// assert!(rec.since_installed(2).is_empty());
    /// assert_eq!(rec.since_installed(1).len(), 3);
    /// # Ok::<(), squall_membership::log::LogError>(())
    /// ```
    pub fn since_installed(&self, view: u64) -> &[Record] {
        let from = (self.records.iter())
            .rposition(|r| matches!(r, Record::Installed { view: v, .. } if *v == view))
            .map_or(0, |at| at + 1);
        &self.records[from..]
    }

    /// The highest restart ballot this member promised for view `view` (0 if none) since it
    /// last installed `view` (a promise in an earlier run of `view` binds nothing now).
    pub fn promised_for(&self, view: u64) -> u64 {
        self.since_installed(view)
            .iter()
            .filter_map(|r| match r {
                Record::Promised { view: v, rank } if *v == view => Some(*rank),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// The highest-ranked decision logged for view `view` since its last installation.
    pub fn decision_for(&self, view: u64) -> Option<&Decision> {
        self.decision_with_holders_for(view).map(|(d, _)| d)
    }

    /// The highest-ranked decision logged for view `view`, with its holders when they were
    /// logged (see [`Record::Decided`]). Only a decision logged after the last
    /// [`Record::Installed`] of `view` counts: one logged before it ended an earlier run of
    /// `view`, which a restart replaced (s28, ninetieth part of `docs/MEMBERSHIP.md`).
    ///
    /// ```
    /// use squall_membership::change::Decision;
    /// use squall_membership::log::{Durable, MemLog, Record};
    /// use squall_membership::trim::Trim;
    /// use squall_transport::NodeId;
    /// let decision = Decision {
    ///     rank: 1,
    ///     changes: vec![],
    ///     trim: Trim { view: 3, counts: vec![(NodeId(0), 4), (NodeId(1), 4)] },
    /// };
    /// let mut log = MemLog::default();
    /// log.append(&Record::Decided { decision, holders: Some(vec![true, false]) })?;
    /// let (_, rec) = MemLog::open(log.bytes().to_vec());
    /// let (d, holders) = rec.decision_with_holders_for(3).expect("logged");
    /// assert_eq!((d.rank, holders), (1, Some(&[true, false][..])));
    /// # Ok::<(), squall_membership::log::LogError>(())
    /// ```
    pub fn decision_with_holders_for(&self, view: u64) -> Option<(&Decision, Option<&[bool]>)> {
        self.since_installed(view)
            .iter()
            .filter_map(|r| match r {
                Record::Decided { decision, holders } if decision.trim.view == view => {
                    Some((decision, holders.as_deref()))
                }
                _ => None,
            })
            .max_by_key(|(d, _)| d.rank)
    }
}

/// An in-memory log (tests and the simulator): the bytes a file would hold.
///
/// ```
/// use squall_membership::log::{Durable, MemLog, Record};
/// use squall_transport::NodeId;
/// let mut log = MemLog::default();
/// log.append(&Record::Installed { view: 0, members: vec![NodeId(0)] })?;
/// let (_, rec) = MemLog::open(log.bytes().to_vec());
/// assert_eq!(rec.last_view().map(|v| v.0), Some(0));
/// # Ok::<(), squall_membership::log::LogError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemLog {
    bytes: Vec<u8>,
}

impl MemLog {
    /// Reopens a log from `bytes`, dropping a torn or corrupt tail.
    pub fn open(mut bytes: Vec<u8>) -> (MemLog, Recovered) {
        let d = decode(&bytes);
        bytes.truncate(d.valid_len);
        (
            MemLog { bytes },
            Recovered {
                records: d.records,
                truncated: d.tail,
            },
        )
    }

    /// The log's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl Durable for MemLog {
    fn append(&mut self, record: &Record) -> Result<(), LogError> {
        if self.bytes.is_empty() {
            self.bytes.extend_from_slice(MAGIC);
        }
        encode_record(record, &mut self.bytes);
        Ok(())
    }
}

/// A log file; every append (a record, or a batch of them in one `write`) is written and
/// `fsync`ed before it returns (unless [`set_sync_installed`](FileLog::set_sync_installed)
/// turned that off for the view-change records).
#[derive(Debug)]
pub struct FileLog {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    sync_installed: bool,
}

impl FileLog {
    /// Opens (or creates) the log at `path`, truncating a torn or corrupt tail (logged at `warn`
    /// with the reason), and returns what it holds.
    ///
    /// ```
    /// use squall_membership::log::{Durable, FileLog, Record};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("gms-log-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let (mut log, rec) = FileLog::open(&path)?;
    /// assert!(rec.records.is_empty());
    /// log.append(&Record::Installed { view: 1, members: vec![NodeId(0), NodeId(2)] })?;
    /// drop(log);
    /// let (_, rec) = FileLog::open(&path)?;
    /// assert_eq!(rec.last_view(), Some((1, &[NodeId(0), NodeId(2)][..])));
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), squall_membership::log::LogError>(())
    /// ```
    pub fn open(path: &Path) -> Result<(FileLog, Recovered), LogError> {
        let io = |source| LogError::Io {
            path: path.to_path_buf(),
            source,
        };
        let created = !path.exists();
        if created {
            // Whole: no torn header or vanishing entry after a power loss (s19).
            squall_round_robin::log::create_whole(path, MAGIC).map_err(io)?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        let d = decode(&bytes);
        if matches!(d.tail, Some(TailError::BadMagic))
            && (bytes.len() >= MAGIC.len() || !MAGIC.starts_with(&bytes))
        {
            return Err(LogError::NotALog {
                path: path.to_path_buf(),
            });
        }
        let keep = d.valid_len;
        if keep < bytes.len() {
            tracing::warn!(
                path = %path.display(),
                kept_records = d.records.len(),
                dropped_bytes = bytes.len() - keep,
                reason = %d.tail.as_ref().map_or_else(|| "torn header".to_string(), ToString::to_string),
                "membership log: truncating a torn or corrupt tail to the last valid record"
            );
            file.set_len(keep as u64).map_err(io)?;
        }
        if keep == 0 {
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            file.write_all(MAGIC).map_err(io)?;
        }
        if !created {
            file.sync_data().map_err(io)?;
        }
        file.seek(SeekFrom::End(0)).map_err(io)?;
        let truncated = if keep < bytes.len() { d.tail } else { None };
        Ok((
            FileLog {
                path: path.to_path_buf(),
                file,
                buf: Vec::new(),
                sync_installed: true,
            },
            Recovered {
                records: d.records,
                truncated,
            },
        ))
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the records written at the end of each view change
    /// ([`Durable::append_installed`]: the view's `Shards`, `Verdict` and `Installed`, one
    /// write) are `fsync`ed before the core acts on the view (on by default). Off, it is only written to the OS: one `fsync` fewer per view change (about
    /// 15% of a view change over TCP on the loaded dev box, see `docs/MEMBERSHIP.md`), and
    /// it becomes durable with the log's next synced record.
    ///
    /// Turn it off only when a crash of the *process* is all the member's durable state has to
    /// survive, i.e. with atomic epochs or durable epochs that never `fsync` or only every few
    /// records (`FsyncPolicy::Never`/`EveryRecords`): a process crash keeps what was written to
    /// the OS. After a *power loss* the record may be gone while the epoch log of the view it
    /// installed holds synced deliveries (`FsyncPolicy::EveryBatch`); a total restart would
    /// then restart from the view before and install a different view under the same number,
    /// losing those deliveries. So with `EveryBatch` epochs keep it on.
    ///
    /// ```
    /// use squall_membership::log::{Durable, FileLog, Record};
    /// use squall_transport::NodeId;
    /// let path = std::env::temp_dir().join(format!("gms-log-lazy-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let (mut log, _) = FileLog::open(&path)?;
    /// log.set_sync_installed(false);
    /// log.append_installed(&[Record::Installed { view: 1, members: vec![NodeId(0)] }])?;
    /// drop(log); // as after a crash of the process: the record was written to the OS
    /// let (_, rec) = FileLog::open(&path)?;
    /// assert_eq!(rec.last_view(), Some((1, &[NodeId(0)][..])));
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), squall_membership::log::LogError>(())
    /// ```
    pub fn set_sync_installed(&mut self, on: bool) {
        self.sync_installed = on;
    }

    /// Writes `records` with one `write` (their frames back to back), then `fsync`s them if
    /// `sync`; nothing when `records` is empty. A power loss may keep the write in part: the
    /// frames before the cut read back whole, the cut one fails its length or checksum and is
    /// truncated at the next [`open`](Self::open), so the log keeps a prefix of the batch.
    fn write(&mut self, records: &[Record], sync: bool) -> Result<(), LogError> {
        self.buf.clear();
        for record in records {
            let at = self.buf.len();
            encode_record(record, &mut self.buf);
            let len = self.buf.len() - at;
            if len > MAX_BODY + FRAME {
                return Err(LogError::TooLarge { len: len - FRAME });
            }
        }
        if self.buf.is_empty() {
            return Ok(());
        }
        let io = |source| LogError::Io {
            path: self.path.clone(),
            source,
        };
        let start = std::time::Instant::now();
        self.file.write_all(&self.buf).map_err(io)?;
        if sync {
            self.file.sync_data().map_err(io)?;
            tracing::debug!(
                records = records.len(),
                bytes = self.buf.len(),
                us = start.elapsed().as_micros() as u64,
                "membership log: appended and synced"
            );
        } else {
            tracing::debug!(
                records = records.len(),
                bytes = self.buf.len(),
                us = start.elapsed().as_micros() as u64,
                "membership log: appended (not synced)"
            );
        }
        Ok(())
    }
}

impl Durable for FileLog {
    fn append(&mut self, record: &Record) -> Result<(), LogError> {
        self.write(std::slice::from_ref(record), true)
    }

    fn append_all(&mut self, records: &[Record]) -> Result<(), LogError> {
        self.write(records, true)
    }

    fn append_installed(&mut self, records: &[Record]) -> Result<(), LogError> {
        self.write(records, self.sync_installed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::ChangeKind;

    fn sample() -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        encode_record(
            &Record::Installed {
                view: 0,
                members: vec![NodeId(0), NodeId(1), NodeId(2)],
            },
            &mut b,
        );
        encode_record(
            &Record::Decided {
                decision: decision(0, 1),
                holders: None,
            },
            &mut b,
        );
        b
    }

    /// A decision ending view `view` (three members, node 0 failed) with rank `rank`.
    fn decision(view: u64, rank: u64) -> Decision {
        Decision {
            rank,
            changes: vec![Change {
                kind: ChangeKind::Fail,
                node: NodeId(0),
            }],
            trim: Trim {
                view,
                counts: vec![(NodeId(0), 3), (NodeId(1), 2), (NodeId(2), 2)],
            },
        }
    }

    /// [`sample`] plus a decision with holders, a promise, a shard layout, a snapshot, a
    /// dropped state, a verdict and a settings digest: a record of every kind.
    fn sample_of_every_kind() -> Vec<u8> {
        let mut b = sample();
        encode_record(
            &Record::Decided {
                decision: decision(1, 2),
                holders: Some(vec![false, true, true]),
            },
            &mut b,
        );
        encode_record(
            &Record::Snapshot {
                view: 1,
                shard: 1,
                first_position: 5,
                position: 7,
                file: "snapshot-1.state".into(),
            },
            &mut b,
        );
        encode_record(&Record::StateDropped { view: 3 }, &mut b);
        encode_record(
            &Record::Promised {
                view: 0,
                rank: 1 << 32,
            },
            &mut b,
        );
        encode_record(
            &Record::Shards {
                view: 1,
                shards: vec![vec![NodeId(1)], vec![NodeId(2), NodeId(0)]],
            },
            &mut b,
        );
        encode_record(
            &Record::Verdict {
                view: 1,
                why: Inadequate::short(
                    crate::view::ShardId {
                        subgroup: 0,
                        shard: 1,
                    },
                    1,
                    2,
                    true,
                ),
            },
            &mut b,
        );
        encode_record(
            &Record::Settings {
                digest: settings_digest(),
            },
            &mut b,
        );
        encode_record(&Record::LeaveAsked { view: 1 }, &mut b);
        b
    }

    /// A settings digest of three distinct nonzero words.
    fn settings_digest() -> SettingsDigest {
        SettingsDigest {
            membership: 0x1111_2222_3333_4444,
            layout: 5,
            driver: u64::MAX,
        }
    }

    /// The settings record (tag 9, s24) round-trips and is the latest digest; every cut of its
    /// body, a zero word, a trailing byte and a garbage tail are refused (the decoder keeps the
    /// prefix before it) without a panic.
    #[test]
    fn a_settings_record_round_trips_and_its_malformed_bodies_are_refused() {
        let digest = settings_digest();
        let r = Record::Settings { digest };
        let mut b = sample();
        let before = decode(&b).records;
        let cut = b.len();
        encode_record(&r, &mut b);
        let d = decode(&b);
        assert_eq!((d.tail, d.valid_len), (None, b.len()));
        assert_eq!(d.records.last(), Some(&r));
        let rec = Recovered {
            records: d.records,
            truncated: None,
        };
        assert_eq!(rec.settings(), Some(digest));
        assert_eq!(with_len(&r), 1 + 3 * 8);
        let mut body = vec![9u8];
        for w in digest.words() {
            body.extend_from_slice(&w.to_le_bytes());
        }
        assert_eq!(parse(&body), Ok(r.clone()));
        for n in 0..body.len() {
            assert!(parse(&body[..n]).is_err(), "cut at {n}");
        }
        for word in 0..3 {
            let mut zero = body.clone();
            zero[1 + word * 8..9 + word * 8].fill(0);
            assert_eq!(
                parse(&zero),
                Err("zero settings digest word"),
                "word {word}"
            );
        }
        let mut long = body.clone();
        long.push(0);
        assert_eq!(parse(&long), Err("trailing bytes after the record"));
        // Torn and garbage tails after a good prefix: the prefix is kept.
        for end in cut + 1..b.len() {
            let d = decode(&b[..end]);
            assert_eq!(
                (d.records, d.valid_len),
                (before.clone(), cut),
                "torn at {end}"
            );
            assert!(d.tail.is_some());
        }
        let mut garbage = b[..cut].to_vec();
        garbage.extend_from_slice(&[0xa5; 40]);
        let d = decode(&garbage);
        assert_eq!((d.records, d.valid_len), (before, cut));
        // A log without one (written before s24) has no digest.
        assert_eq!(MemLog::open(sample()).1.settings(), None);
    }

    #[test]
    fn a_decision_round_trips_with_and_without_holders_and_the_old_format_still_decodes() {
        // The old format's body, written out by hand (tag 2, no holder section): what a log
        // written before the holders were logged holds.
        let mut old = vec![2u8];
        old.extend_from_slice(&0u64.to_le_bytes());
        old.extend_from_slice(&1u64.to_le_bytes());
        old.extend_from_slice(&1u32.to_le_bytes());
        old.extend_from_slice(&decision(0, 1).changes[0].encode().to_le_bytes());
        old.extend_from_slice(&3u32.to_le_bytes());
        for (n, c) in [(0u32, 3u64), (1, 2), (2, 2)] {
            old.extend_from_slice(&n.to_le_bytes());
            old.extend_from_slice(&c.to_le_bytes());
        }
        let without = Record::Decided {
            decision: decision(0, 1),
            holders: None,
        };
        assert_eq!(parse(&old), Ok(without.clone()));
        let mut framed = Vec::new();
        encode_record(&without, &mut framed);
        assert_eq!(
            &framed[FRAME..],
            &old[..],
            "no holders: the old format, byte for byte"
        );

        // Nine members: the bitmap spans two bytes.
        let holders: Vec<bool> = (0..9).map(|i| i % 3 != 1).collect();
        let mut nine = decision(0, 2);
        nine.trim.counts = (0..9).map(|i| (NodeId(i), u64::from(i))).collect();
        let with = Record::Decided {
            decision: nine,
            holders: Some(holders.clone()),
        };
        let mut b = sample();
        encode_record(&with, &mut b);
        let (_, rec) = MemLog::open(b.clone());
        assert_eq!(rec.truncated, None);
        assert_eq!(rec.records.last(), Some(&with));
        assert_eq!(
            rec.decision_with_holders_for(0).map(|(d, h)| (d.rank, h)),
            Some((2, Some(&holders[..])))
        );
        assert_eq!(rec.decision_for(0).map(|d| d.rank), Some(2));

        // The decoder refuses a holder count other than the trim's and bits past the count.
        let body_at = b.len() - (FRAME + with_len(&with)) + FRAME;
        let body = b[body_at..].to_vec();
        assert_eq!(parse(&body), Ok(with));
        let mut wrong = body.clone();
        let h_at = body.len() - 2 - 4;
        wrong[h_at..h_at + 4].copy_from_slice(&8u32.to_le_bytes());
        assert_eq!(
            parse(&wrong),
            Err("decision holders not one per trim count")
        );
        let mut stray = body.clone();
        *stray.last_mut().expect("bitmap") |= 0x80;
        assert_eq!(
            parse(&stray),
            Err("decision holder bitmap has bits past its count")
        );
        assert!(parse(&body[..body.len() - 1]).is_err());
    }

    /// s26 (`docs/MEMBERSHIP.md`, sixty-ninth part): a request to leave round-trips (tag 10),
    /// a short or overlong body is refused, not panicked on, a log without one (written
    /// before s26) has none pending, and a view installed without the member or a voided
    /// state ends it.
    #[test]
    fn a_leave_request_round_trips_and_stays_pending_until_a_view_without_the_member() {
        let me = NodeId(1);
        let mut b = sample();
        assert_eq!(MemLog::open(b.clone()).1.leave_pending(me), None);
        let r = Record::LeaveAsked { view: 7 };
        encode_record(&r, &mut b);
        let (_, rec) = MemLog::open(b.clone());
        assert_eq!((&rec.truncated, rec.records.last()), (&None, Some(&r)));
        assert_eq!(rec.leave_pending(me), Some(7));
        let body = {
            let mut f = Vec::new();
            encode_record(&r, &mut f);
            f[FRAME..].to_vec()
        };
        assert_eq!(body, [&[10u8][..], &7u64.to_le_bytes()].concat());
        assert!(parse(&body[..body.len() - 1]).is_err());
        assert_eq!(
            parse(&[&body[..], &[0]].concat()),
            Err("trailing bytes after the record")
        );
        // A later view still naming the member keeps it pending; one without it ends it.
        let with = |r: Record| {
            let mut b = b.clone();
            encode_record(&r, &mut b);
            MemLog::open(b).1.leave_pending(me)
        };
        let members = vec![NodeId(0), me];
        assert_eq!(with(Record::Installed { view: 8, members }), Some(7));
        let members = vec![NodeId(0)];
        assert_eq!(with(Record::Installed { view: 8, members }), None);
        assert_eq!(with(Record::StateDropped { view: 8 }), None);
    }

    /// The fuzz target's seeds (`fuzz/seeds/gms_log`) are whole logs of the current format:
    /// every record kind, a decision with holders among them.
    #[test]
    fn the_fuzz_seeds_decode_whole() {
        for (name, bytes) in [
            (
                "every_kind",
                &include_bytes!("../../../fuzz/seeds/gms_log/every_kind")[..],
            ),
            (
                "decided_with_holders",
                &include_bytes!("../../../fuzz/seeds/gms_log/decided_with_holders")[..],
            ),
        ] {
            let d = decode(bytes);
            assert_eq!((d.tail, d.valid_len), (None, bytes.len()), "{name}");
            assert!(
                (d.records.iter())
                    .any(|r| matches!(r, Record::Decided { holders: Some(h), .. } if h.len() == 9)),
                "{name}"
            );
        }
        let every = decode(include_bytes!("../../../fuzz/seeds/gms_log/every_kind")).records;
        assert_eq!(every.len(), 10);
        assert!(
            (every.iter())
                .any(|r| matches!(r, Record::Settings { digest } if *digest == settings_digest()))
        );
        assert!(
            (every.iter())
                .any(|r| matches!(r, Record::Verdict { why, .. } if why.lost && why.have == 1))
        );
    }

    /// The body length of `r`'s encoding.
    fn with_len(r: &Record) -> usize {
        let mut b = Vec::new();
        encode_record(r, &mut b);
        b.len() - FRAME
    }

    /// s28 (ninetieth part of `docs/MEMBERSHIP.md`): a member restarting at view 1 logged a
    /// promise and a decision for it, then found a restart of view 0 running view 1 again and
    /// installed it anew (`Gms::follow_as_outsider`). After a crash its log must not give that
    /// dead run's decision or promise back as view 1's: only what it logged since its last
    /// `Installed` of view 1 counts. Fails with the whole log read (the old rule): the dead
    /// run's decision and promise come back.
    #[test]
    fn a_decision_and_promise_of_a_dead_run_of_a_view_do_not_count_after_it_is_installed_again() {
        let members = vec![NodeId(0), NodeId(1), NodeId(2)];
        let mut b = sample();
        let records = [
            Record::Decided {
                decision: decision(0, 0),
                holders: None,
            },
            Record::Installed {
                view: 1,
                members: members.clone(),
            },
            Record::Promised {
                view: 1,
                rank: 1 << 32,
            },
            Record::Decided {
                decision: decision(1, 1 << 32),
                holders: None,
            },
        ];
        for r in &records {
            encode_record(r, &mut b);
        }
        let (_, dead) = MemLog::open(b.clone());
        assert_eq!(dead.decision_for(1).map(|d| d.rank), Some(1 << 32));
        assert_eq!(dead.promised_for(1), 1 << 32);
        encode_record(&Record::StateDropped { view: 0 }, &mut b);
        encode_record(&Record::Installed { view: 1, members }, &mut b);
        let (_, rec) = MemLog::open(b.clone());
        assert_eq!(rec.decision_for(1), None, "the dead run's decision");
        assert_eq!(rec.promised_for(1), 0, "the dead run's promise");
        assert!(rec.decision_for(0).is_some(), "view 0's decision is kept");
        // A decision of the new run counts.
        encode_record(
            &Record::Decided {
                decision: decision(1, 2),
                holders: None,
            },
            &mut b,
        );
        let (_, rec) = MemLog::open(b);
        assert_eq!(rec.decision_for(1).map(|d| d.rank), Some(2));
    }

    #[test]
    fn a_restart_promise_round_trips_and_the_highest_counts() {
        let mut b = sample();
        for rank in [(1 << 32) | 2, 1 << 32] {
            encode_record(&Record::Promised { view: 0, rank }, &mut b);
        }
        let (_, rec) = MemLog::open(b);
        assert_eq!(rec.records.len(), 4);
        assert_eq!(rec.promised_for(0), (1 << 32) | 2);
        assert_eq!(rec.promised_for(1), 0);
    }

    #[test]
    fn a_shard_layout_round_trips_and_a_lying_count_is_refused() {
        let mut b = sample();
        let shards = vec![vec![NodeId(0), NodeId(2)], vec![], vec![NodeId(1)]];
        encode_record(
            &Record::Shards {
                view: 0,
                shards: shards.clone(),
            },
            &mut b,
        );
        let (_, rec) = MemLog::open(b.clone());
        assert_eq!(rec.shards_for(0), Some(&shards[..]));
        assert_eq!(rec.members_of(0).map(<[_]>::len), Some(3));
        // A shard count larger than the body can hold is refused, not allocated.
        let mut body = vec![4u8];
        body.extend_from_slice(&0u64.to_le_bytes());
        body.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&body).is_err());
    }

    #[test]
    fn a_snapshot_record_round_trips_and_a_lying_name_length_is_refused() {
        let r = Record::Snapshot {
            view: 4,
            shard: 2,
            first_position: 100,
            position: 123,
            file: crate::snapshot::file_name(4, 2),
        };
        let mut b = sample();
        encode_record(&r, &mut b);
        let (_, rec) = MemLog::open(b);
        assert_eq!(rec.last_snapshot(), Some(&r));
        assert!(rec.holds_initial_state());
        let mut body = vec![5u8];
        body.extend_from_slice(&4u64.to_le_bytes());
        body.extend_from_slice(&2u32.to_le_bytes());
        body.extend_from_slice(&[0u8; 16]);
        body.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&body).is_err());
        let mut body = body[..body.len() - 4].to_vec();
        body.extend_from_slice(&300u32.to_le_bytes());
        body.extend_from_slice(&[b'a'; 300]);
        assert_eq!(parse(&body), Err("snapshot file name too long"));
    }

    #[test]
    fn every_torn_tail_is_cut_back_to_the_last_whole_record() {
        let full = sample();
        let whole = decode(&full);
        assert_eq!(whole.records.len(), 2);
        assert_eq!(whole.valid_len, full.len());
        let first_end = {
            let mut b = MAGIC.to_vec();
            encode_record(&whole.records[0], &mut b);
            b.len()
        };
        for cut in MAGIC.len()..full.len() {
            let d = decode(&full[..cut]);
            let expect = if cut >= first_end {
                first_end
            } else {
                MAGIC.len()
            };
            assert_eq!(d.valid_len, expect, "cut at {cut}");
            let boundary = cut == first_end || cut == MAGIC.len();
            assert_eq!(
                matches!(d.tail, Some(TailError::Torn { .. })),
                !boundary,
                "cut at {cut}"
            );
            let (_, rec) = MemLog::open(full[..cut].to_vec());
            assert_eq!(rec.records.len(), usize::from(cut >= first_end));
        }
    }

    proptest::proptest! {
        /// The fuzz target's properties (`fuzz/fuzz_targets/gms_log.rs`) over mutated logs.
        #[test]
        fn decode_keeps_a_reencodable_prefix_of_any_bytes(
            cut in 0usize..400,
            flips in proptest::collection::vec((0usize..400, proptest::prelude::any::<u8>()), 0..4),
        ) {
            let mut data = sample_of_every_kind();
            for (at, x) in flips {
                let n = data.len();
                data[at % n] ^= x;
            }
            data.truncate(cut.min(data.len()));
            let d = decode(&data);
            proptest::prop_assert!(d.valid_len <= data.len());
            let again = decode(&data[..d.valid_len]);
            proptest::prop_assert_eq!(&again.records, &d.records);
            proptest::prop_assert!(again.tail.is_none());
            if d.valid_len > 0 {
                let mut out = MAGIC.to_vec();
                for r in &d.records {
                    encode_record(r, &mut out);
                }
                proptest::prop_assert_eq!(&out[..], &data[..d.valid_len]);
            }
        }
    }

    #[test]
    fn a_flipped_byte_is_caught_by_the_checksum() {
        let mut b = sample();
        let last = b.len() - 1;
        b[last] ^= 0x40;
        let d = decode(&b);
        assert_eq!(d.records.len(), 1);
        assert!(matches!(d.tail, Some(TailError::Checksum { .. })));
    }

    #[test]
    fn file_log_truncates_a_torn_tail_and_keeps_appending() {
        let path = std::env::temp_dir().join(format!("gms-log-torn-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let full = sample();
        std::fs::write(&path, &full[..full.len() - 3]).expect("write");
        let (mut log, rec) = FileLog::open(&path).expect("open");
        assert_eq!(rec.records.len(), 1);
        assert!(matches!(rec.truncated, Some(TailError::Torn { .. })));
        log.append(&Record::Installed {
            view: 1,
            members: vec![NodeId(1)],
        })
        .expect("append");
        drop(log);
        let (_, rec) = FileLog::open(&path).expect("reopen");
        assert_eq!(rec.records.len(), 2);
        assert_eq!(rec.truncated, None);
        assert_eq!(rec.last_view(), Some((1, &[NodeId(1)][..])));
        std::fs::write(&path, b"not a log at all").expect("write");
        assert!(matches!(
            FileLog::open(&path),
            Err(LogError::NotALog { .. })
        ));
        std::fs::remove_file(&path).ok();
    }

    /// A batch (`append_all`, s22) is the bytes its records appended one by one would be, in
    /// one `write`; whatever a power loss keeps of that write (cut at any byte, with nothing,
    /// zeros or garbage after the cut up to the write's length: the power-loss model's torn
    /// and partly kept writes) reads back as a prefix of the batch's records, every record
    /// before the cut included, never a later record without an earlier one.
    #[test]
    fn a_batch_torn_anywhere_reads_back_as_a_prefix_of_its_records() {
        let every = sample_of_every_kind();
        let records = decode(&every).records;
        let path = std::env::temp_dir().join(format!("gms-log-batch-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let (mut log, _) = FileLog::open(&path).expect("open");
        log.append_all(&records).expect("append_all");
        drop(log);
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(
            bytes, every,
            "one batch writes what the appends one by one would"
        );
        let ends: Vec<usize> = (0..=records.len())
            .map(|k| {
                let mut b = MAGIC.to_vec();
                records[..k].iter().for_each(|r| encode_record(r, &mut b));
                b.len()
            })
            .collect();
        let mut garbage = 0x9e37_79b9_7f4a_7c15u64;
        for cut in MAGIC.len()..=bytes.len() {
            let whole = ends.iter().filter(|&&e| e <= cut).count() - 1;
            for fill in 0..4 {
                let mut kept = bytes[..cut].to_vec();
                match fill {
                    0 => {}
                    1 => kept.resize(bytes.len(), 0),
                    2 => kept.resize(bytes.len(), 0xff),
                    _ => kept.extend((cut..bytes.len()).map(|_| {
                        garbage ^= garbage << 13;
                        garbage ^= garbage >> 7;
                        garbage ^= garbage << 17;
                        garbage as u8
                    })),
                }
                // At least the records before the cut; more only where the fill happens to
                // repeat the written bytes (zeros in a member id), the records then whole.
                let d = decode(&kept);
                let k = d.records.len();
                assert!(k >= whole, "cut at {cut}, fill {fill}: {k} records");
                assert_eq!(d.records, records[..k], "cut at {cut}, fill {fill}");
                assert_eq!(d.valid_len, ends[k], "cut at {cut}, fill {fill}");
                assert_eq!(
                    kept[..ends[k]],
                    bytes[..ends[k]],
                    "cut at {cut}, fill {fill}"
                );
            }
        }
        // The file log truncates such a tail at open and appends after the prefix.
        std::fs::write(&path, &bytes[..ends[3] + 5]).expect("write");
        let (mut log, rec) = FileLog::open(&path).expect("reopen");
        assert_eq!(rec.records, records[..3]);
        log.append_all(&records[3..]).expect("append_all");
        drop(log);
        assert_eq!(std::fs::read(&path).expect("read"), every);
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn a_new_log_is_created_whole_over_a_stale_temporary() {
        let dir = std::env::temp_dir().join(format!("gms-log-new-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("gms.log");
        let tmp = dir.join("gms.log.new");
        let _ = std::fs::remove_file(&path);
        // A crash while an earlier creation wrote its header: the temporary holds garbage.
        std::fs::write(&tmp, b"\xff\xff\xff").expect("write");
        let (_, rec) = FileLog::open(&path).expect("open");
        assert!(rec.records.is_empty());
        assert_eq!(std::fs::read(&path).expect("read"), MAGIC);
        assert!(!tmp.exists(), "the temporary was renamed into place");
        std::fs::remove_dir_all(&dir).ok();
    }
}
