//! The epoch log's skim and side index after a power loss (s21): crafted files of what a power
//! loss leaves that a process crash never does.
//!
//! - A torn record before the last (garbage after a prefix, a later write kept): cut by the
//!   skim of a log written under a policy that leaves several writes unsynced, refused when
//!   the index proves a later record synced (finding 8 of the power-loss tests).
//! - A stale index: every mark a skim hands out checks out against the log.
//! - A compaction's index rewrite: the old index file is never written, and a crash before
//!   the new one's rename leaves the old one.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};

use squall_round_robin::log::{
    self, CompactCrash, FsyncPolicy, IndexEntry, Log, LogError, LogOptions, ReadMode, Reader,
    Record, TailError,
};
use squall_transport::NodeId;

use common::remove_log as remove;

fn tmpfile(name: &str) -> PathBuf {
    common::scratch_file("power-loss", name)
}

fn record(i: u64) -> Record {
    Record {
        view: 3,
        seq: i,
        position: i,
        sender: NodeId(i as u32 % 3),
        payload: (0..100).map(|b| (b as u64 * 7 + i) as u8).collect(),
    }
}

/// Bytes of one record of [`record`]: frame, body header, 100 bytes of payload.
const RECORD: u64 = (log::FRAME + log::BODY_HEADER + 100) as u64;

/// Where record `i` starts in a plain log of [`record`]s.
fn at(i: u64) -> u64 {
    log::MAGIC.len() as u64 + i * RECORD
}

/// Writes `n` records under `policy`, one write each (inline syncs), an index entry per
/// record where the policy writes one, and returns the file's bytes.
fn write(path: &Path, policy: FsyncPolicy, n: u64) -> Vec<u8> {
    remove(path);
    let options = LogOptions {
        index_every: 1,
        sync_mode: log::SyncMode::Inline,
        ..LogOptions::new(policy)
    };
    let (mut l, _) = Log::open_with(path, options).unwrap();
    for i in 0..n {
        l.append(&record(i)).unwrap();
        l.flush(i).unwrap();
    }
    drop(l);
    std::fs::read(path).unwrap()
}

/// Rewrites the index of `path` with `entries` (their own encodings).
fn set_index(path: &Path, entries: &[IndexEntry]) {
    let mut idx = log::INDEX_MAGIC.to_vec();
    for e in entries {
        log::encode_index_entry(e, &mut idx);
    }
    std::fs::write(log::index_path(path), idx).unwrap();
}

fn index_of(path: &Path) -> Vec<IndexEntry> {
    log::decode_index(&std::fs::read(log::index_path(path)).unwrap_or_default())
}

/// A `Verify` reader of the log at `path` (`len` bytes) from byte `offset` on.
fn reader_at(path: &Path, len: u64, offset: u64) -> Reader<std::fs::File> {
    let mut file = std::fs::File::open(path).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    Reader::at(file, len, offset, 4096, ReadMode::Verify)
}

/// Every record of the log at `path` through a `Verify` reader, and why it stopped.
fn verified(path: &Path) -> (Vec<u64>, Option<TailError>) {
    let mut reader = Log::reader(path, 4096).unwrap();
    let mut seqs = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        seqs.push(r.seq);
    }
    (seqs, reader.tail().cloned())
}

/// A power loss under `EveryRecords`/`Never` tore record 12 (its payload garbage after a
/// prefix) and kept the later writes; the index's entries of unsynced records name another
/// boot (the restart after a power loss runs in a new one), and its first entry is synced.
/// The skim verifies the records from the synced entry on and cuts the log at the torn
/// record: the reader then finds no corrupt record (before s21 the skim read frames and
/// headers, checked the last record only and kept the torn one, and the replay stopped the
/// member: "corrupt record at byte …"). Under `EveryBatch` (one unsynced write at most) the
/// same bytes are damage and the skim leaves them to the reader, as before. With an entry of
/// a synced record after the tear the skim refuses (`LogError::Damaged`) and touches nothing;
/// a cut below the tear cuts as before.
#[test]
fn a_torn_unsynced_record_before_the_last_is_cut_under_the_weak_policies() {
    let path = tmpfile("torn-middle.log");
    let other_boot = log::boot_tag().map_or(7, |t| t ^ 1);
    for policy in [FsyncPolicy::Never, FsyncPolicy::EveryRecords(5)] {
        let case = format!("{policy:?}");
        // Written synced (an entry per record, `boot` 0), then given the index a power loss
        // under `policy` leaves: the entries after the first name the boot before it.
        let clean = write(&path, FsyncPolicy::EveryBatch, 20);
        let entries: Vec<IndexEntry> = index_of(&path)
            .into_iter()
            .enumerate()
            .map(|(k, e)| IndexEntry {
                boot: if k == 0 { 0 } else { other_boot },
                ..e
            })
            .collect();
        assert_eq!(entries.len(), 20, "{case}");
        let mut torn = clean.clone();
        let tear = at(12) as usize + log::FRAME + log::BODY_HEADER + 30;
        for (k, b) in torn[tear..at(13) as usize].iter_mut().enumerate() {
            *b = (k as u8).wrapping_mul(37) ^ 0x5c;
        }
        // Skimmed as written: cut at the torn record, a prefix the reader verifies.
        for open in [false, true] {
            std::fs::write(&path, &torn).unwrap();
            set_index(&path, &entries);
            let k = if open {
                Log::open_with(&path, LogOptions::new(policy)).unwrap().1
            } else {
                Log::skim_with(&path, u64::MAX, None, 4096, true, policy).unwrap()
            };
            assert_eq!(k.last.map(|r| r.seq), Some(11), "{case} open {open}");
            assert_eq!(k.len, at(12), "{case} open {open}");
            assert!(
                matches!(k.truncated, Some(TailError::Checksum { offset, .. }) if offset as u64 == at(12)),
                "{case} open {open}: {:?}",
                k.truncated
            );
            assert_eq!(verified(&path), ((0..12).collect(), None), "{case}");
            // No index entry left that points past the cut.
            assert!(index_of(&path).iter().all(|e| e.offset < at(12)), "{case}");
        }
        // An entry of a synced record after the tear: the torn record was synced too.
        std::fs::write(&path, &torn).unwrap();
        let mut synced = entries.clone();
        synced[15].boot = 0;
        set_index(&path, &synced);
        match Log::skim_with(&path, u64::MAX, None, 4096, true, policy) {
            Err(e @ LogError::Damaged { synced_at, .. }) => {
                assert_eq!(synced_at, at(15), "{case}");
                assert!(e.to_string().contains("corrupt record at byte"), "{e}");
            }
            other => panic!("{case}: expected Damaged, got {other:?}"),
        }
        assert_eq!(std::fs::read(&path).unwrap(), torn, "{case}: untouched");
        // A cut at the torn record cuts it as the cut's record, whatever the index says.
        let k = Log::skim_with(&path, 12, None, 4096, true, policy).unwrap();
        assert_eq!((k.last.map(|r| r.seq), k.len), (Some(11), at(12)), "{case}");
        // EveryBatch: only the last write is ever unsynced; the middle is left to the reader.
        std::fs::write(&path, &torn).unwrap();
        set_index(&path, &entries);
        let k = Log::skim_with(&path, u64::MAX, None, 4096, true, FsyncPolicy::EveryBatch).unwrap();
        assert_eq!((k.last.map(|r| r.seq), k.len), (Some(19), at(20)), "{case}");
        assert!(
            matches!(verified(&path).1, Some(TailError::Checksum { offset, .. }) if offset as u64 == at(12)),
            "{case}"
        );
    }
    remove(&path);
}

/// s22 (twenty-sixth part, "What it cannot tell"): under `EveryRecords` on the syncer thread
/// (the default) the index entries of the records a sync covered are written once the syncer
/// reports it, `boot` 0, so after a reboot they prove their records synced. Twenty records,
/// an entry each, all synced by the syncer; the index's tagged entries (none now) renamed to
/// another boot, as after a power loss; a byte of record 5's body flipped (bit rot, not a
/// tear). A restart's cut just past it (its own entry fails its check, so the skim starts
/// before it) refuses with `LogError::Damaged` and touches nothing; a skim of the whole log
/// starts at the last synced entry and cuts nothing, and the verifying reader reports the
/// rotten record (the replay's typed stop). Before s22 every entry stayed tagged with the
/// boot that wrote it: after the reboot none was trusted, and both skims cut the log at
/// record 5 like a tear, synced records 5–19 with it.
#[test]
fn every_records_syncs_are_recorded_in_the_index_so_bit_rot_in_a_synced_record_is_refused() {
    let path = tmpfile("synced-rot.log");
    let other_boot = log::boot_tag().map_or(7, |t| t ^ 1);
    let policy = FsyncPolicy::EveryRecords(2);
    remove(&path);
    let options = LogOptions {
        index_every: 1,
        sync_mode: log::SyncMode::Thread,
        ..LogOptions::new(policy)
    };
    let (mut l, _) = Log::open_with(&path, options).unwrap();
    for i in 0..20 {
        l.append(&record(i)).unwrap();
        l.flush(i + 1).unwrap();
    }
    // The 20th flush requested a sync that covers every record.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while l.synced_mark() != Some(20) {
        l.durable_mark().unwrap();
        assert!(
            std::time::Instant::now() < deadline,
            "the syncer never synced"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(l.syncer_syncs() > 0, "synced by the syncer thread");
    drop(l);
    let entries: Vec<IndexEntry> = index_of(&path)
        .into_iter()
        .map(|e| IndexEntry {
            boot: if e.boot == 0 { 0 } else { other_boot },
            ..e
        })
        .collect();
    assert_eq!(entries.len(), 20);
    let mut rotten = std::fs::read(&path).unwrap();
    rotten[at(5) as usize + log::FRAME + log::BODY_HEADER + 10] ^= 0x40;
    std::fs::write(&path, &rotten).unwrap();
    set_index(&path, &entries);
    match Log::skim_with(&path, 6, None, 4096, true, policy) {
        Err(e @ LogError::Damaged { synced_at, .. }) => {
            assert!(synced_at > at(5), "{e}");
            assert!(e.to_string().contains("corrupt record at byte"), "{e}");
        }
        other => panic!("expected Damaged, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), rotten, "untouched");
    let k = Log::open_with(&path, LogOptions::new(policy)).unwrap().1;
    assert_eq!((k.last.map(|r| r.seq), k.len), (Some(19), at(20)));
    assert!(k.truncated.is_none(), "{:?}", k.truncated);
    assert!(
        matches!(verified(&path).1, Some(TailError::Checksum { offset, .. }) if offset as u64 == at(5)),
        "{:?}",
        verified(&path)
    );
    remove(&path);
}

/// A stale index (finding 6 of the power-loss tests: a compaction's rewrite mixed with the
/// entries of the file before it): entries of an earlier file at this path, then one of the
/// file now that checks out. The skim starts at that one and hands the earlier ones out as
/// marks only where each checks out against the log; a cut from any mark it hands out keeps
/// what the whole-file cut keeps. Before s21 they were handed out unchecked, and a read from
/// one started inside a record or at another record than the mark's.
#[test]
fn every_mark_a_skim_hands_out_checks_out_against_the_log() {
    let path = tmpfile("stale-index.log");
    // The earlier file: records of 100 bytes of payload, an entry per record.
    write(&path, FsyncPolicy::EveryBatch, 12);
    let stale = index_of(&path);
    // The file now: records of 40 bytes of payload, other sequence numbers.
    remove(&path);
    let options = LogOptions {
        index_every: 1,
        ..LogOptions::new(FsyncPolicy::EveryBatch)
    };
    let (mut l, _) = Log::open_with(&path, options).unwrap();
    for i in 0..40u64 {
        l.append(&Record {
            view: 3,
            seq: 2 * i,
            position: i,
            sender: NodeId(1),
            payload: vec![i as u8; 40],
        })
        .unwrap();
    }
    l.sync().unwrap();
    drop(l);
    let now = index_of(&path);
    let last = *now.last().unwrap();
    assert!(stale.last().unwrap().offset + RECORD <= last.offset);
    let mut mixed = stale.clone();
    mixed.push(IndexEntry {
        max_seq: last.max_seq.max(stale.last().unwrap().max_seq),
        ..last
    });
    set_index(&path, &mixed);
    assert_eq!(
        log::decode_index(&std::fs::read(log::index_path(&path)).unwrap()),
        mixed
    );
    let k = Log::skim(&path, u64::MAX, None, 4096, false).unwrap();
    assert_eq!(k.started_at, last.offset);
    let len = std::fs::metadata(&path).unwrap().len();
    for m in &k.marks {
        let mut reader = reader_at(&path, len, m.offset);
        let r = reader.next_record().unwrap();
        assert_eq!(
            r.map(|r| (r.view, r.seq, r.position)),
            Some((m.view, m.seq, m.position)),
            "mark {m:?}"
        );
    }
    // Some of the stale entries happen to fall on records of the new file, but none with
    // its header: no mark before the start.
    assert!(
        k.marks.iter().all(|m| m.offset >= last.offset),
        "{:?}",
        k.marks
    );
    remove(&path);
}

/// A compaction replaces the side index whole: the new index is written to
/// `index_tmp_path` and renamed over the old one, which is never written (a hard link to it
/// keeps its bytes), so a power loss can leave the old index or the new one, never entries of
/// both (finding 6's mixed index). A crash between the temporary file's write and the rename
/// leaves the compacted log with the old index, whose entries do not check out against it:
/// the next open removes the temporary file, reads the log whole and rebuilds the index.
/// Before s21 the index was truncated and rewritten in place (the hard link saw the new
/// entries).
#[test]
fn a_compaction_replaces_the_index_whole_and_a_crash_before_the_rename_leaves_the_old_one() {
    let path = tmpfile("index-rename.log");
    let link = tmpfile("index-rename.log.idx.link");
    let options = LogOptions {
        index_every: 300,
        ..LogOptions::new(FsyncPolicy::EveryBatch)
    };
    for crash in [None, Some(CompactCrash::IndexBeforeRename)] {
        let case = format!("{crash:?}");
        write(&path, FsyncPolicy::EveryBatch, 60);
        let (mut l, _) = Log::open_with(&path, options).unwrap();
        let old = std::fs::read(log::index_path(&path)).unwrap();
        assert!(log::decode_index(&old).len() > 10, "{case}");
        let _ = std::fs::remove_file(&link);
        std::fs::hard_link(log::index_path(&path), &link).unwrap();
        let done = match crash {
            None => l.compact(3, 40).unwrap(),
            Some(c) => l.compact_cut_at(3, 40, c).unwrap(),
        };
        assert_eq!(
            std::fs::read(&link).unwrap(),
            old,
            "{case}: the old index was written"
        );
        let new = match crash {
            None => {
                assert!(done.is_some_and(|d| d.index_entries > 0), "{case}");
                assert!(!log::index_tmp_path(&path).exists(), "{case}");
                std::fs::read(log::index_path(&path)).unwrap()
            }
            Some(_) => {
                assert_eq!(
                    std::fs::read(log::index_path(&path)).unwrap(),
                    old,
                    "{case}"
                );
                std::fs::read(log::index_tmp_path(&path)).unwrap()
            }
        };
        // The new index: entries of the compacted file, synced, each checking out.
        let entries = log::decode_index(&new);
        assert!(!entries.is_empty(), "{case}");
        let len = std::fs::metadata(&path).unwrap().len();
        for e in &entries {
            assert_eq!(e.boot, 0, "{case}");
            let mut reader = reader_at(&path, len, e.offset);
            let r = reader.next_record().unwrap().map(|r| (r.seq, r.position));
            assert_eq!(r, Some((e.seq, e.position)), "{case}");
        }
        drop(l);
        let (l, rec) = Log::open_with(&path, options).unwrap();
        assert_eq!(rec.last.map(|r| r.seq), Some(59), "{case}");
        assert!(
            !log::index_tmp_path(&path).exists(),
            "{case}: leftover removed"
        );
        match crash {
            None => assert_eq!((rec.started_at > 0, rec.reindexed), (true, 0), "{case}"),
            Some(_) => assert!(rec.reindexed > 0, "{case}: the stale index was rebuilt"),
        }
        drop(l);
        assert_eq!(verified(&path), ((40..60).collect(), None), "{case}");
    }
    let _ = std::fs::remove_file(&link);
    remove(&path);
}
