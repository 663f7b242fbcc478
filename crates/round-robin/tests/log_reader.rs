//! The incremental log reader (`log::Reader`) against the whole-file decoder (`log::decode`):
//! on random logs, truncated, corrupted, reordered or with garbage appended, read through
//! random buffer sizes, the reader yields the same records, the same valid length and the same
//! reason to stop, and never holds more than its buffer (or the longest record). `Log::skim`
//! (headers only) agrees with `Log::open` wherever no checksum in the middle is broken, and
//! its cut from a mark equals the cut from the start.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::Cursor;
use std::path::PathBuf;

use proptest::prelude::*;
use squall_round_robin::log::{
    self, BODY_HEADER, FRAME, FsyncPolicy, IndexEntry, Log, LogOptions, MAGIC, ReadMode, Reader,
    Record, Scan, TailError,
};
use squall_transport::NodeId;

fn tmpfile(name: &str) -> PathBuf {
    common::scratch_file("reader", name)
}

/// A flip that turns the magic into the compacted one (`SQRRLOG1` and `SQRRLOG2` differ in two
/// bits) makes the first record a damaged base frame (`decode`'s tail is `Base`): the skim
/// refuses the header and leaves the file as it is, never cuts it. True (and the file removed)
/// when that is the case and checked.
fn header_refused(
    a: &std::path::Path,
    bytes: &[u8],
    whole: &log::Decoded,
    skim: impl Fn(&std::path::Path) -> Result<log::Skimmed, log::LogError>,
) -> Result<bool, TestCaseError> {
    if !matches!(whole.tail, Some(TailError::Base { .. })) {
        return Ok(false);
    }
    let refused = skim(a);
    prop_assert!(
        matches!(refused, Err(log::LogError::BadHeader { .. })),
        "{:?}",
        refused.map(|k| k.len)
    );
    prop_assert_eq!(std::fs::read(a).unwrap(), bytes);
    std::fs::remove_file(a).ok();
    Ok(true)
}

/// A valid log of `sizes.len()` records (payload lengths `sizes`), views changing at `breaks`.
fn build(sizes: &[usize], view_steps: &[bool]) -> (Vec<u8>, Vec<Record>) {
    build_seqs(sizes, view_steps, false)
}

/// [`build`], with sequence numbers starting again at 0 in each view if `reset` (as a
/// round-robin group's durable log across restarts in later views).
fn build_seqs(sizes: &[usize], view_steps: &[bool], reset: bool) -> (Vec<u8>, Vec<Record>) {
    let mut out = MAGIC.to_vec();
    let mut records = Vec::new();
    let (mut view, mut position, mut first) = (1u64, 0u64, 0usize);
    for (i, &len) in sizes.iter().enumerate() {
        if view_steps.get(i).copied().unwrap_or(false) {
            view += 1;
            position += 3;
            if reset {
                first = i;
            }
        }
        let r = Record {
            view,
            seq: (i - first) as u64 * 2,
            position,
            sender: NodeId(i as u32 % 3),
            payload: (0..len).map(|b| (b * 7 + i) as u8).collect(),
        };
        log::encode_record(&r, &mut out);
        records.push(r);
        position += 1;
    }
    (out, records)
}

/// How a test log is damaged.
#[derive(Clone, Debug)]
enum Damage {
    None,
    /// Cut at this fraction of the file.
    Truncate(prop::sample::Index),
    /// XOR one byte.
    Flip(prop::sample::Index, u8),
    /// Garbage appended.
    Append(Vec<u8>),
    /// A record's position changed (out of order), checksum fixed up.
    Reorder(prop::sample::Index),
    /// A random length written into a record's frame.
    Length(prop::sample::Index, u32),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        Just(Damage::None),
        any::<prop::sample::Index>().prop_map(Damage::Truncate),
        (any::<prop::sample::Index>(), 1u8..=255).prop_map(|(i, x)| Damage::Flip(i, x)),
        proptest::collection::vec(any::<u8>(), 1..80).prop_map(Damage::Append),
        any::<prop::sample::Index>().prop_map(Damage::Reorder),
        (any::<prop::sample::Index>(), any::<u32>()).prop_map(|(i, l)| Damage::Length(i, l)),
    ]
}

/// Offsets of the records' frames in a valid log.
fn frames(records: &[Record]) -> Vec<usize> {
    let mut at = MAGIC.len();
    records
        .iter()
        .map(|r| {
            let here = at;
            at += FRAME + BODY_HEADER + r.payload.len();
            here
        })
        .collect()
}

fn apply(mut bytes: Vec<u8>, records: &[Record], d: &Damage) -> Vec<u8> {
    match d {
        Damage::None => {}
        Damage::Truncate(i) => bytes.truncate(i.index(bytes.len() + 1)),
        Damage::Flip(i, x) => {
            let i = i.index(bytes.len());
            bytes[i] ^= x;
        }
        Damage::Append(g) => bytes.extend_from_slice(g),
        Damage::Reorder(i) if !records.is_empty() => {
            let k = i.index(records.len());
            let at = frames(records)[k];
            let mut r = records[k].clone();
            r.position += 5;
            r.view = 1;
            let mut enc = Vec::new();
            log::encode_record(&r, &mut enc);
            bytes[at..at + enc.len()].copy_from_slice(&enc);
        }
        Damage::Length(i, len) if !records.is_empty() => {
            let at = frames(records)[i.index(records.len())];
            bytes[at..at + 4].copy_from_slice(&len.to_le_bytes());
        }
        Damage::Reorder(_) | Damage::Length(..) => {}
    }
    bytes
}

/// Reads `bytes` with a reader of `buffer` bytes: records, valid length, tail, peak.
fn read_all(
    bytes: &[u8],
    buffer: usize,
    mode: ReadMode,
) -> (Vec<Record>, usize, Option<TailError>, usize) {
    let mut r = Reader::new(Cursor::new(bytes), bytes.len() as u64, buffer, mode);
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        out.push(rec);
    }
    // Once done, it stays done.
    assert!(r.next_record().unwrap().is_none());
    (out, r.valid_len(), r.tail().cloned(), r.peak_buffer())
}

/// Where a tail error is.
fn tail_offset(t: &TailError) -> usize {
    match t {
        TailError::BadMagic | TailError::Base { .. } => 0,
        TailError::Torn { offset, .. }
        | TailError::Checksum { offset, .. }
        | TailError::Length { offset, .. }
        | TailError::Order { offset, .. } => *offset,
    }
}

fn headers(records: &[Record]) -> Vec<(u64, u64, u64, NodeId)> {
    records
        .iter()
        .map(|r| (r.view, r.seq, r.position, r.sender))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(squall_transport_mem::sim::proptest_cases(512)))]

    /// The reader in `Verify` mode agrees with `decode` on every input, whatever the buffer,
    /// and its buffer never exceeds `max(buffer, longest record)`.
    #[test]
    fn the_reader_agrees_with_the_whole_file_decoder(
        sizes in proptest::collection::vec(0usize..300, 0..30),
        steps in proptest::collection::vec(any::<bool>(), 0..30),
        d in damage(),
        buffer in 1usize..700,
    ) {
        let (bytes, records) = build(&sizes, &steps);
        let bytes = apply(bytes, &records, &d);
        let whole = log::decode(&bytes);
        let (got, valid_len, tail, peak) = read_all(&bytes, buffer, ReadMode::Verify);
        prop_assert_eq!(&got, &whole.records);
        prop_assert_eq!(valid_len, whole.valid_len);
        prop_assert_eq!(&tail, &whole.tail);
        // The longest record read: a yielded one, or the one whose checksum or order failed.
        let broken = match whole.tail {
            Some(TailError::Checksum { offset, .. } | TailError::Order { offset, .. }) => {
                FRAME + u32::from_le_bytes(bytes[offset..offset + 4].try_into().unwrap()) as usize
            }
            _ => 0,
        };
        let longest = got.iter().map(|r| FRAME + BODY_HEADER + r.payload.len()).max().unwrap_or(0).max(broken);
        prop_assert!(peak <= buffer.max(FRAME + BODY_HEADER).max(longest).max(FRAME), "peak {} buffer {} longest {}", peak, buffer, longest);
        // Skimming finds the same records (headers) wherever no checksum is broken.
        if !matches!(whole.tail, Some(TailError::Checksum { .. })) {
            let (skim, skim_len, skim_tail, _) = read_all(&bytes, buffer, ReadMode::Skim);
            prop_assert_eq!(headers(&skim), headers(&whole.records));
            prop_assert_eq!(skim_len, whole.valid_len);
            prop_assert_eq!(&skim_tail, &whole.tail);
            prop_assert!(skim.iter().all(|r| r.payload.is_empty()));
        }
    }

    /// `Log::skim` of a file (no index: from the start) keeps the valid prefix that `decode`
    /// finds (unless a checksum before the last record is broken, which only a verifying
    /// reader sees), and its cut from a mark equals its cut from the start.
    #[test]
    fn skim_repairs_and_cuts_as_the_decoder_and_cut(
        sizes in proptest::collection::vec(0usize..300, 1..30),
        d in damage(),
        buffer in 64usize..700,
        cut in any::<prop::sample::Index>(),
    ) {
        let (bytes, records) = build(&sizes, &[]);
        let bytes = apply(bytes, &records, &d);
        let whole = log::decode(&bytes);
        let last_frame_broken = match whole.tail {
            Some(TailError::Checksum { offset, .. }) => frames(&records).last() == Some(&offset),
            _ => true,
        };
        prop_assume!(last_frame_broken);
        prop_assume!(!matches!(whole.tail, Some(TailError::BadMagic)));
        let a = tmpfile(&format!("skim-{}", std::process::id()));
        std::fs::write(&a, &bytes).unwrap();
        if header_refused(&a, &bytes, &whole, |p| Log::skim(p, u64::MAX, None, buffer, false))? {
            return Ok(());
        }
        let skimmed = Log::skim(&a, u64::MAX, None, buffer, false).unwrap();
        let b = tmpfile(&format!("open-{}", std::process::id()));
        std::fs::write(&b, &bytes).unwrap();
        // An empty file becomes an empty log.
        let kept = if bytes.is_empty() { MAGIC } else { &bytes[..whole.valid_len] };
        prop_assert_eq!(std::fs::read(&a).unwrap(), kept);
        prop_assert_eq!((skimmed.started_at, skimmed.len), (0, kept.len() as u64));
        // The same reason, but a broken last record may fail its order check before its
        // checksum: the same place then.
        if matches!(whole.tail, Some(TailError::Checksum { .. })) {
            prop_assert_eq!(skimmed.truncated.as_ref().map(tail_offset), whole.tail.as_ref().map(tail_offset));
        } else {
            prop_assert_eq!(&skimmed.truncated, &whole.tail);
        }
        prop_assert_eq!(skimmed.records, whole.records.len() as u64);
        prop_assert_eq!(skimmed.last.map(|r| (r.seq, r.position)), whole.records.last().map(|r| (r.seq, r.position)));
        prop_assert!(skimmed.peak_buffer <= buffer.max(FRAME + BODY_HEADER + 300));
        // Cut at a random sequence number: from the nearest mark below it, as from the start.
        let end = cut.index(sizes.len() * 2 + 1) as u64;
        let mark = skimmed.marks.iter().rev().find(|m| m.seq < end).copied();
        let from_mark = Log::skim(&a, end, mark.as_ref(), buffer, false).unwrap();
        let from_start = Log::cut(&b, end).unwrap();
        prop_assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        let last = |k: &log::Skimmed| k.last.as_ref().map(|r| r.position);
        prop_assert_eq!(last(&from_mark).or(mark.map(|m| m.position)), last(&from_start));
        std::fs::remove_file(&a).ok();
        std::fs::remove_file(&b).ok();
    }

    /// `Log::skim_with` under `Never`/`EveryRecords` (s21) of a file without an index
    /// verifies every record: it keeps exactly the valid prefix `decode` finds, a broken
    /// checksum in the middle included (the first bad record ends it), and its cut from a mark
    /// equals its cut from the start.
    #[test]
    fn a_verifying_skim_keeps_exactly_what_the_decoder_keeps(
        sizes in proptest::collection::vec(0usize..300, 1..30),
        d in damage(),
        buffer in 64usize..700,
        cut in any::<prop::sample::Index>(),
        never in any::<bool>(),
    ) {
        let policy = if never { FsyncPolicy::Never } else { FsyncPolicy::EveryRecords(3) };
        let (bytes, records) = build(&sizes, &[]);
        let bytes = apply(bytes, &records, &d);
        let whole = log::decode(&bytes);
        prop_assume!(!matches!(whole.tail, Some(TailError::BadMagic)));
        let a = tmpfile(&format!("verify-{}", std::process::id()));
        let b = tmpfile(&format!("verify-cut-{}", std::process::id()));
        for p in [&a, &b] {
            let _ = std::fs::remove_file(log::index_path(p));
        }
        std::fs::write(&a, &bytes).unwrap();
        if header_refused(&a, &bytes, &whole, |p| Log::skim_with(p, u64::MAX, None, buffer, false, policy))? {
            return Ok(());
        }
        let skimmed = Log::skim_with(&a, u64::MAX, None, buffer, false, policy).unwrap();
        let kept = if bytes.is_empty() { MAGIC } else { &bytes[..whole.valid_len] };
        prop_assert_eq!(std::fs::read(&a).unwrap(), kept);
        prop_assert_eq!((skimmed.started_at, skimmed.len), (0, kept.len() as u64));
        prop_assert_eq!(&skimmed.truncated, &whole.tail);
        prop_assert_eq!(skimmed.records, whole.records.len() as u64);
        prop_assert_eq!(skimmed.last.map(|r| (r.seq, r.position)), whole.records.last().map(|r| (r.seq, r.position)));
        // A verifying read holds a whole record: one whose length a flip enlarged may be
        // anything up to the file.
        prop_assert!(skimmed.peak_buffer <= buffer.max(FRAME + BODY_HEADER + 300).max(bytes.len()));
        let end = cut.index(sizes.len() * 2 + 1) as u64;
        let mark = skimmed.marks.iter().rev().find(|m| m.seq < end).copied();
        std::fs::write(&b, kept).unwrap();
        let from_mark = Log::skim_with(&a, end, mark.as_ref(), buffer, false, policy).unwrap();
        let from_start = Log::skim_with(&b, end, None, buffer, false, policy).unwrap();
        prop_assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        let last = |k: &log::Skimmed| k.last.as_ref().map(|r| r.position);
        prop_assert_eq!(last(&from_mark).or(mark.map(|m| m.position)), last(&from_start));
        for p in [&a, &b] {
            std::fs::remove_file(p).ok();
            std::fs::remove_file(log::index_path(p)).ok();
        }
    }
}

/// The honest index of a log's bytes (the library's [`log::rebuild_index`]).
fn index_of(bytes: &[u8], every: u64) -> Vec<u8> {
    log::rebuild_index(Cursor::new(bytes), every).unwrap()
}

/// How a test index is damaged.
#[derive(Clone, Debug)]
enum IndexDamage {
    None,
    /// Cut at this fraction of the file (a torn entry).
    Truncate(prop::sample::Index),
    /// XOR one byte.
    Flip(prop::sample::Index, u8),
    /// Garbage appended.
    Append(Vec<u8>),
    /// The index of another log (payloads one byte longer from this record on).
    Stale(prop::sample::Index),
    /// No index at all.
    Missing,
}

fn index_damage() -> impl Strategy<Value = IndexDamage> {
    prop_oneof![
        3 => Just(IndexDamage::None),
        1 => any::<prop::sample::Index>().prop_map(IndexDamage::Truncate),
        1 => (any::<prop::sample::Index>(), 1u8..=255).prop_map(|(i, x)| IndexDamage::Flip(i, x)),
        1 => proptest::collection::vec(any::<u8>(), 1..130).prop_map(IndexDamage::Append),
        1 => any::<prop::sample::Index>().prop_map(IndexDamage::Stale),
        1 => Just(IndexDamage::Missing),
    ]
}

/// The index of `records` (the log's as `sizes`, `steps`, `reset` build it), damaged.
fn damaged_index(
    sizes: &[usize],
    steps: &[bool],
    reset: bool,
    every: u64,
    d: &IndexDamage,
) -> Option<Vec<u8>> {
    let (bytes, _) = build_seqs(sizes, steps, reset);
    let mut idx = index_of(&bytes, every);
    match d {
        IndexDamage::None => {}
        IndexDamage::Truncate(i) => idx.truncate(i.index(idx.len() + 1)),
        IndexDamage::Flip(i, x) => {
            let i = i.index(idx.len());
            idx[i] ^= x;
        }
        IndexDamage::Append(g) => idx.extend_from_slice(g),
        IndexDamage::Stale(i) => {
            let from = i.index(sizes.len().max(1));
            let other: Vec<usize> = (sizes.iter().enumerate())
                .map(|(k, &s)| if k >= from { s + 1 } else { s })
                .collect();
            let (b, _) = build_seqs(&other, steps, reset);
            idx = index_of(&b, every);
        }
        IndexDamage::Missing => return None,
    }
    Some(idx)
}

fn scan_of(bytes: &[u8], index: &[IndexEntry], seq: u64, buffer: usize) -> Scan {
    let mut src = Cursor::new(bytes);
    log::scan(&mut src, bytes.len() as u64, index, seq, None, buffer).unwrap()
}

/// What two skims must agree on: the length kept, why, whether it was a cut, the last record.
fn outcome(s: &Scan) -> (usize, Option<TailError>, bool, Option<Record>) {
    (s.keep, s.tail.clone(), s.cut, s.skimmed.last.clone())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(squall_transport_mem::sim::proptest_cases(512)))]

    /// The skim from the side index (`log::scan` with the index's entries) against the skim
    /// of the whole file (no index), on random logs (sequence numbers restarting per view or
    /// not), random granularities, random cut points, the log damaged as above and the index
    /// torn, flipped, extended with garbage, another log's or missing: either it fell back
    /// (started at the file's start: then it *is* the full skim) or it agrees with the full
    /// skim on the length kept, the reason, the cut and the last record — wherever the bytes
    /// before where it started are intact. Where they are not (damage before the entry, which
    /// a crash cannot cause: those bytes were synced before the entry was written), the
    /// whole-file decoder finds the damage there, at the latest at the record it started at (a
    /// record before it rewritten out of order shows at that record), so the replay's verifying
    /// reader stops on it. With neither damaged, it starts at the index's last entry below the cut.
    #[test]
    fn the_indexed_skim_agrees_with_the_full_skim_or_falls_back(
        sizes in proptest::collection::vec(0usize..300, 0..40),
        steps in proptest::collection::vec(any::<bool>(), 0..40),
        reset in any::<bool>(),
        every in prop_oneof![1u64..64, 64u64..3000],
        d in damage(),
        id in index_damage(),
        buffer in 36usize..700,
        seq in prop_oneof![Just(u64::MAX), 0u64..90],
    ) {
        let (clean, records) = build_seqs(&sizes, &steps, reset);
        let bytes = apply(clean.clone(), &records, &d);
        let idx = damaged_index(&sizes, &steps, reset, every, &id).unwrap_or_default();
        let index = log::decode_index(&idx);
        let full = scan_of(&bytes, &[], seq, buffer);
        let fast = scan_of(&bytes, &index, seq, buffer);
        prop_assert_eq!(full.skimmed.started_at, 0);
        let start = fast.skimmed.started_at as usize;
        if start == 0 {
            // (The entries it tried and gave up on count in its peak buffer.)
            let mut fell_back = fast.clone();
            (fell_back.index_keep, fell_back.skimmed.peak_buffer) = (0, full.skimmed.peak_buffer);
            prop_assert_eq!(fell_back, full);
        } else {
            let intact = bytes[..start] == clean[..start];
            let agrees = outcome(&fast) == outcome(&full);
            if intact {
                prop_assert!(agrees, "from {}: {:?}\nfull: {:?}", start, outcome(&fast), outcome(&full));
            } else if !agrees {
                let whole = log::decode(&bytes);
                prop_assert!(
                    whole.tail.as_ref().is_some_and(|t| tail_offset(t) <= start),
                    "damage before {} that the decoder does not find: {:?}", start, whole.tail
                );
            }
            // It started at an entry of the index (one of this log's, checked).
            prop_assert!(index.iter().any(|e| e.offset as usize == start));
            prop_assert!(fast.index_keep <= index.len());
        }
        if matches!((&d, &id), (Damage::None, IndexDamage::None)) {
            let below = index.iter().rev().find(|e| e.max_seq < seq).map_or(0, |e| e.offset);
            prop_assert_eq!(fast.skimmed.started_at, below);
        }
    }

}

proptest! {
    // Files written, damaged and read several times per case: fewer cases by default.
    #![proptest_config(ProptestConfig::with_cases(squall_transport_mem::sim::proptest_cases(128)))]

    /// The index `Log` writes, through crashes: records appended in random batches (synced
    /// each, per a random policy) with a random granularity; the log then torn, flipped or
    /// extended and its index damaged; a skim of it (index) and of a copy without the index
    /// leave the same file and find the same last record (or the damage lies before where the
    /// indexed skim started and the decoder finds it there); both skims are told the policy
    /// (`Log::skim_with`), so under `EveryRecords`/`Never` both verify what they read. Then reopened (the index
    /// repaired as the skim left it), appended to and skimmed again: the index still agrees
    /// with the full skim, and without damage before the start the log decodes whole.
    #[test]
    fn the_index_the_log_writes_survives_crashes_and_reopens(
        batches in proptest::collection::vec(proptest::collection::vec(0usize..300, 1..6), 1..12),
        every in prop_oneof![1u64..64, 64u64..3000],
        policy in 0u8..3,
        d in damage(),
        id in index_damage(),
        more in 0usize..5,
        buffer in 36usize..700,
    ) {
        let policy = match policy {
            0 => FsyncPolicy::Never,
            1 => FsyncPolicy::EveryBatch,
            _ => FsyncPolicy::EveryRecords(3),
        };
        let options = LogOptions { index_every: every, ..LogOptions::new(policy) };
        let a = tmpfile(&format!("index-a-{}", std::process::id()));
        let b = tmpfile(&format!("index-b-{}", std::process::id()));
        let (ia, ib) = (log::index_path(&a), log::index_path(&b));
        for p in [&a, &b, &ia, &ib] {
            let _ = std::fs::remove_file(p);
        }
        let (mut l, _) = Log::open_with(&a, options).unwrap();
        let mut records = Vec::new();
        for batch in &batches {
            for &len in batch {
                let n = records.len() as u64;
                let r = Record { view: 4, seq: 3 * n + 1, position: n, sender: NodeId(1), payload: vec![n as u8; len] };
                l.append(&r).unwrap();
                records.push(r);
            }
            l.sync().unwrap();
        }
        drop(l);
        let clean = std::fs::read(&a).unwrap();
        prop_assert_eq!(&log::decode(&clean).records, &records);
        let written = log::decode_index(&std::fs::read(&ia).unwrap());
        // Under `EveryRecords` only the entries of records a sync covered are written (s22):
        // none when no batch reached a sync.
        let synced_only = matches!(policy, FsyncPolicy::EveryRecords(_));
        prop_assert!(
            (written.is_empty() && synced_only)
                || (!written.is_empty() && written[0].offset == MAGIC.len() as u64)
        );
        prop_assert!(written.windows(2).all(|w| w[1].offset >= w[0].offset + every));
        // The crash: the log damaged, the index too.
        let bytes = apply(clean.clone(), &records, &d);
        std::fs::write(&a, &bytes).unwrap();
        std::fs::write(&b, &bytes).unwrap();
        let idx = std::fs::read(&ia).unwrap();
        match &id {
            IndexDamage::None => {}
            IndexDamage::Missing => std::fs::remove_file(&ia).unwrap(),
            IndexDamage::Truncate(i) => std::fs::write(&ia, &idx[..i.index(idx.len() + 1)]).unwrap(),
            IndexDamage::Flip(i, x) => {
                let mut idx = idx.clone();
                let i = i.index(idx.len());
                idx[i] ^= x;
                std::fs::write(&ia, &idx).unwrap();
            }
            IndexDamage::Append(g) => std::fs::write(&ia, [&idx[..], g].concat()).unwrap(),
            IndexDamage::Stale(i) => {
                // Entries shifted by a record's frame: another log's.
                let mut e = log::decode_index(&idx);
                // (No entry to shift when none was written: under `EveryRecords` before a sync.)
                let k = if e.is_empty() { 0 } else { i.index(e.len()) };
                for x in &mut e[k..] {
                    x.offset += 36;
                }
                let mut out = log::INDEX_MAGIC.to_vec();
                e.iter().for_each(|x| log::encode_index_entry(x, &mut out));
                std::fs::write(&ia, &out).unwrap();
            }
        }
        let ka = Log::skim_with(&a, u64::MAX, None, buffer, false, policy);
        let kb = Log::skim_with(&b, u64::MAX, None, buffer, false, policy);
        let (ka, kb) = match (ka, kb) {
            (Ok(ka), Ok(kb)) => (ka, kb),
            (Err(log::LogError::NotALog { .. }), Err(log::LogError::NotALog { .. })) => return Ok(()),
            // Under `EveryRecords` the index proves a synced record after the damaged one
            // (s22): the damaged record was synced too, so it is refused, not cut as the copy
            // without the index cuts it, and the file is left as it was. The proof must be a
            // genuine entry (one the log wrote, not a damaged or stale one) past the bad record.
            (
                Err(log::LogError::Damaged { why: log::TailError::Checksum { offset: bad, .. }, synced_at, .. }),
                Ok(_),
            ) if synced_only
                && bad < synced_at as usize
                && written.iter().any(|e| e.boot == 0 && e.offset == synced_at) =>
            {
                prop_assert_eq!(std::fs::read(&a).unwrap(), bytes);
                return Ok(());
            }
            other => return Err(TestCaseError::fail(format!("{other:?}"))),
        };
        prop_assert_eq!(kb.started_at, 0);
        let start = ka.started_at as usize;
        let intact = start == 0 || bytes[..start] == clean[..start];
        let agrees = std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap()
            && (&ka.last, &ka.truncated) == (&kb.last, &kb.truncated);
        if intact {
            prop_assert!(agrees, "from {}: {:?}\nfull: {:?}", start, ka, kb);
        } else if !agrees {
            let whole = log::decode(&bytes);
            prop_assert!(whole.tail.as_ref().is_some_and(|t| tail_offset(t) <= start));
        }
        if matches!((&d, &id), (Damage::None, IndexDamage::None)) {
            prop_assert_eq!(ka.started_at, written.last().map_or(0, |e| e.offset));
        }
        // Whether the skim left a log that decodes whole (under `EveryBatch` a checksum broken
        // before the last record stays: the skim does not see it, the verifying reader does;
        // under the other policies the skim verifies from where it starts).
        let whole_now = log::decode(&std::fs::read(&a).unwrap()).tail.is_none();
        // Reopened, appended to, skimmed again.
        let (mut l, rec) = Log::open_with(&a, options).unwrap();
        prop_assert_eq!(rec.len, ka.len);
        let mut kept = log::decode(&std::fs::read(&a).unwrap()).records;
        let (mut seq, mut position) = (rec.last.as_ref()).map_or((1, 0), |r| (r.seq + 3, r.position + 1));
        for k in 0..more {
            let r = Record { view: 4, seq, position, sender: NodeId(2), payload: vec![k as u8; 40 * k] };
            l.append(&r).unwrap();
            kept.push(r);
            seq += 3;
            position += 1;
        }
        l.sync().unwrap();
        drop(l);
        let after = std::fs::read(&a).unwrap();
        std::fs::write(&b, &after).unwrap();
        let _ = std::fs::remove_file(&ib);
        let k2 = Log::skim_with(&a, u64::MAX, None, buffer, false, policy).unwrap();
        let k3 = Log::skim_with(&b, u64::MAX, None, buffer, false, policy).unwrap();
        if intact {
            prop_assert_eq!((&k2.last, k2.len), (&k3.last, k3.len));
            prop_assert_eq!(std::fs::read(&a).unwrap(), &after[..]);
        }
        if intact && whole_now {
            let whole = log::decode(&after);
            prop_assert_eq!(whole.tail, None);
            prop_assert_eq!(whole.records, kept);
        }
        for p in [&a, &b, &ia, &ib] {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A log in the format every release so far wrote (`SQRRLOG1`, no index; these bytes were
/// made independently, with Python's `zlib.crc32`): the skim reads it whole, finds its last
/// record, and a `Log` opened on it appends after it and starts an index, the old bytes
/// untouched; the next skim starts from that index.
#[test]
fn a_log_without_an_index_is_read_and_indexed_from_then_on() {
    const OLD: &str = "535152524c4f473121000000230663ec07000000000000000000000000000000000000000000000000000000616c706861200000006f68adec07000000000000000100000000000000010000000000000001000000626574611c000000ef57ebc707000000000000000300000000000000020000000000000000000000";
    let old: Vec<u8> = (0..OLD.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&OLD[i..i + 2], 16).unwrap())
        .collect();
    let d = log::decode(&old);
    assert_eq!((d.records.len(), d.tail), (3, None));
    assert_eq!(d.records[1].payload, b"beta");
    let path = tmpfile("old-format.log");
    let _ = std::fs::remove_file(log::index_path(&path));
    std::fs::write(&path, &old).unwrap();
    let k = Log::skim(&path, u64::MAX, None, 64, false).unwrap();
    assert_eq!((k.started_at, k.records, k.truncated), (0, 3, None));
    assert_eq!(k.last.map(|r| (r.view, r.seq, r.position)), Some((7, 3, 2)));
    assert!(!log::index_path(&path).exists(), "a skim creates no index");
    let options = LogOptions {
        index_every: 1,
        ..LogOptions::new(FsyncPolicy::EveryBatch)
    };
    let (mut l, rec) = Log::open_with(&path, options).unwrap();
    assert_eq!((rec.len, rec.dropped_bytes), (old.len() as u64, 0));
    assert_eq!(
        rec.reindexed, 3,
        "open read it whole, so it indexed it (every byte)"
    );
    for i in 0..3 {
        l.append_parts(7, 4 + i, 3 + i, NodeId(1), b"new").unwrap();
        l.sync().unwrap();
    }
    drop(l);
    let now = std::fs::read(&path).unwrap();
    assert_eq!(&now[..old.len()], &old[..]);
    assert_eq!(log::decode(&now).records.len(), 6);
    let entries = log::decode_index(&std::fs::read(log::index_path(&path)).unwrap());
    assert_eq!(
        entries.len(),
        6,
        "one per record, rebuilt or appended (every byte)"
    );
    assert_eq!(entries[0].offset, 8);
    assert_eq!(entries[3].offset, old.len() as u64);
    assert!(
        entries.iter().all(|e| e.boot == 0),
        "synced: rebuilt, EveryBatch"
    );
    let k = Log::skim(&path, u64::MAX, None, 64, false).unwrap();
    assert_eq!(k.started_at, entries[5].offset);
    assert_eq!(k.last.map(|r| r.position), Some(5));
    std::fs::remove_file(&path).ok();
    std::fs::remove_file(log::index_path(&path)).ok();
}

/// An entry is trusted when its records were synced before it was written (`boot` 0) or
/// written in the running boot; an entry of records written unsynced in another boot (a power
/// loss may have lost bytes before it) is not: the skim reads the whole file and empties the
/// index. Mutation: trusting every entry fails the first assertion.
#[test]
fn an_entry_of_unsynced_records_from_another_boot_is_not_trusted() {
    let (bytes, records) = build(&[10, 20, 30, 40], &[]);
    let path = tmpfile("other-boot.log");
    let ipath = log::index_path(&path);
    let honest = log::decode_index(&index_of(&bytes, 1));
    let write_index = |boot: u64| {
        let mut idx = log::INDEX_MAGIC.to_vec();
        for e in &honest {
            log::encode_index_entry(&IndexEntry { boot, ..*e }, &mut idx);
        }
        std::fs::write(&path, &bytes).unwrap();
        std::fs::write(&ipath, &idx).unwrap();
    };
    let other = log::boot_tag().map_or(7, |b| b ^ 1);
    write_index(other);
    let k = Log::skim(&path, u64::MAX, None, 64, false).unwrap();
    assert_eq!(k.started_at, 0, "another boot's unsynced entries");
    assert_eq!(std::fs::read(&ipath).unwrap(), log::INDEX_MAGIC);
    let last = frames(&records)[3] as u64;
    write_index(0);
    assert_eq!(
        Log::skim(&path, u64::MAX, None, 64, false)
            .unwrap()
            .started_at,
        last
    );
    if let Some(boot) = log::boot_tag() {
        write_index(boot);
        assert_eq!(
            Log::skim(&path, u64::MAX, None, 64, false)
                .unwrap()
                .started_at,
            last
        );
    }
    std::fs::remove_file(&path).ok();
    std::fs::remove_file(&ipath).ok();
}

/// What the index buys: however long the log, a skim from the index reads at most about
/// `index_every` bytes plus the last batch (here: records of 100 bytes, a batch of 10, an
/// entry every 4 KiB; logs of 50 to 5000 records), and finds what the whole-file skim finds.
/// The writer stops indexing at a record out of order (a reader stops there): the skim then
/// still agrees with the whole-file skim.
#[test]
fn a_skim_from_the_index_reads_a_bounded_end_of_any_log() {
    let path = tmpfile("bounded.log");
    let copy = tmpfile("bounded-copy.log");
    for n in [50u64, 500, 5000] {
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(log::index_path(&path));
        let options = LogOptions {
            index_every: 4096,
            ..LogOptions::new(FsyncPolicy::Never)
        };
        let (mut l, _) = Log::open_with(&path, options).unwrap();
        for i in 0..n {
            l.append_parts(2, i, i, NodeId(0), &[1; 100]).unwrap();
            if i % 10 == 9 {
                l.sync().unwrap();
            }
        }
        l.sync().unwrap();
        drop(l);
        let len = std::fs::metadata(&path).unwrap().len();
        let k = Log::skim(&path, u64::MAX, None, 1024, false).unwrap();
        assert!(
            k.started_at > 0 && len - k.started_at <= 4096 + 10 * 136,
            "n {n}: from {} of {len}",
            k.started_at
        );
        assert!(k.peak_buffer <= 1024);
        std::fs::copy(&path, &copy).unwrap();
        let full = Log::skim(&copy, u64::MAX, None, 1024, false).unwrap();
        assert_eq!((full.started_at, full.records), (0, n));
        assert_eq!((k.last, k.len), (full.last, full.len));
        // A cut in the middle starts from the last entry below it.
        let cut = Log::skim(&path, n / 2, None, 1024, false).unwrap();
        let cut_full = Log::skim(&copy, n / 2, None, 1024, false).unwrap();
        assert!(cut.started_at > 0 || n * 136 < 4096);
        assert_eq!((cut.last, cut.len), (cut_full.last, cut_full.len));
        assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(&copy).unwrap());
    }
    // Out of order: position 7 after 9.
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(log::index_path(&path));
    let options = LogOptions {
        index_every: 1,
        ..LogOptions::new(FsyncPolicy::Never)
    };
    let (mut l, _) = Log::open_with(&path, options).unwrap();
    for p in [8, 9, 7, 8, 9] {
        l.append_parts(2, p, p, NodeId(0), &[1; 10]).unwrap();
        l.sync().unwrap();
    }
    drop(l);
    let entries = log::decode_index(&std::fs::read(log::index_path(&path)).unwrap());
    assert_eq!(
        entries.iter().map(|e| e.position).collect::<Vec<_>>(),
        vec![8, 9]
    );
    std::fs::copy(&path, &copy).unwrap();
    let k = Log::skim(&path, u64::MAX, None, 64, false).unwrap();
    let full = Log::skim(&copy, u64::MAX, None, 64, false).unwrap();
    assert!(matches!(k.truncated, Some(TailError::Order { .. })));
    assert_eq!(
        (k.last, k.len, k.truncated),
        (full.last, full.len, full.truncated)
    );
    std::fs::remove_file(&path).ok();
    std::fs::remove_file(log::index_path(&path)).ok();
    std::fs::remove_file(&copy).ok();
}

/// Regression (found by `the_index_the_log_writes_survives_crashes_and_reopens`): a log whose
/// magic is damaged is refused as not a log even when its index checks out (the skim from an
/// entry never read the header; now it checks it first), and the file is left alone.
#[test]
fn regression_a_damaged_magic_is_refused_even_with_a_valid_index() {
    let path = tmpfile("bad-magic.log");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(log::index_path(&path));
    let options = LogOptions {
        index_every: 1,
        ..LogOptions::new(FsyncPolicy::EveryBatch)
    };
    let (mut l, _) = Log::open_with(&path, options).unwrap();
    l.append_parts(4, 1, 0, NodeId(1), b"").unwrap();
    l.sync().unwrap();
    drop(l);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        Log::skim(&path, u64::MAX, None, 36, false),
        Err(log::LogError::NotALog { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    std::fs::remove_file(&path).ok();
    std::fs::remove_file(log::index_path(&path)).ok();
}

/// A record longer than the buffer is read whole (the buffer grows to it, then shrinks back).
#[test]
fn a_record_longer_than_the_buffer_is_read_whole() {
    let (bytes, records) = build(&[10, 5000, 10, 10], &[]);
    let (got, _, tail, peak) = read_all(&bytes, 256, ReadMode::Verify);
    assert_eq!((got, tail), (records, None));
    assert_eq!(peak, FRAME + BODY_HEADER + 5000);
    // Skimming it reads only its header: the buffer stays at its size.
    let (_, _, _, peak) = read_all(&bytes, 256, ReadMode::Skim);
    assert_eq!(peak, 256);
}

/// A crash can leave a full-length last record of garbage: the skim checks the last record's
/// checksum and drops it, as `Log::open` does.
#[test]
fn skim_drops_a_last_record_that_fails_its_checksum() {
    let (mut bytes, records) = build(&[40, 40, 40], &[]);
    let n = bytes.len();
    bytes[n - 3] ^= 0x55;
    let path = tmpfile("skim-last-checksum");
    std::fs::write(&path, &bytes).unwrap();
    let k = Log::skim(&path, u64::MAX, None, 64, false).unwrap();
    assert_eq!(k.records, 2);
    assert_eq!(k.last.map(|r| r.seq), Some(records[1].seq));
    assert!(matches!(k.truncated, Some(TailError::Checksum { .. })));
    Log::open(&path, FsyncPolicy::Never).unwrap();
    assert_eq!(
        log::decode(&std::fs::read(&path).unwrap()).records,
        records[..2]
    );
    std::fs::remove_file(log::index_path(&path)).ok();
    std::fs::remove_file(&path).ok();
}

/// A file that is not a log is refused by the skim as by `Log::open`.
#[test]
fn skim_refuses_a_file_that_is_not_a_log() {
    let path = tmpfile("skim-not-a-log");
    std::fs::write(&path, b"hello, world").unwrap();
    assert!(matches!(
        Log::skim(&path, u64::MAX, None, 64, false),
        Err(log::LogError::NotALog { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"hello, world");
    std::fs::remove_file(&path).ok();
}

/// The measurement of a restart's log reading (not run by default):
///
/// ```text
/// SQUALL_RR_LOG_READ_BENCH=16,256 cargo test --release -p squall-round-robin --test log_reader \
///     -- --nocapture --test-threads 1 read_a_large_log
/// ```
///
/// writes, per size listed (MiB), a log (records of 1400-byte payloads, about what the TCP
/// restart test's members log, synced every 1024 records, an index entry every
/// `SQUALL_RR_LOG_INDEX_EVERY` bytes, default 1 MiB) and reads it as a total restart does,
/// alternating, 3 times each, medians. First the skim alone, what a restart's creation does
/// for the logged counts: **full** (s17: `Log::skim` without the index, every record's frame
/// and header) against **indexed** (s18: `Log::skim` from the index's last entry). Then the
/// whole read: **whole** (before s17: the file read whole, every record decoded and kept, then
/// replayed from memory); **slices** (s17: the full skim, then a `Verify` reader of
/// `SQUALL_RR_LOG_READ_BUFFER` bytes, default 1 MiB, replaying them); **indexed** (s18: the
/// indexed skim, then the same reader). The file is in the page cache for all (just written).
/// Prints the median times, their ratios and the bytes each held at once.
///
/// `SQUALL_RR_LOG_READ_POLICY=records` (s22) writes the log as a member under
/// `FsyncPolicy::EveryRecords(1024)` does (a flush per record, the syncs on the syncer
/// thread; prints the write's time), then presents it as after a reboot (the index's tagged
/// entries renamed to another boot) and skims it as a restart under that policy does
/// (`Log::skim_with`, every record verified from where it starts). Before s22 no entry of
/// such a log was `boot` 0, so the "indexed" skim after a reboot read the whole file.
#[test]
fn read_a_large_log() {
    let Ok(sizes) = std::env::var("SQUALL_RR_LOG_READ_BENCH") else {
        println!("skipped: set SQUALL_RR_LOG_READ_BENCH=<MiB>[,<MiB>...] to measure");
        return;
    };
    let buffer: usize = std::env::var("SQUALL_RR_LOG_READ_BUFFER")
        .map_or(log::DEFAULT_READ_BUFFER, |b| b.parse().unwrap());
    let every: u64 = std::env::var("SQUALL_RR_LOG_INDEX_EVERY")
        .map_or(log::DEFAULT_INDEX_EVERY, |b| b.parse().unwrap());
    let policy = match std::env::var("SQUALL_RR_LOG_READ_POLICY").as_deref() {
        Ok("records") => FsyncPolicy::EveryRecords(1024),
        _ => FsyncPolicy::Never,
    };
    let mut skims = Vec::new();
    let mut reads = Vec::new();
    for mib in sizes.split(',').map(|m| m.trim().parse::<usize>().unwrap()) {
        let (skim_row, read_row) = measure(mib, buffer, every, policy);
        skims.push(skim_row);
        reads.push(read_row);
    }
    println!(
        "| log | records | index every | full skim: time, bytes read | indexed skim: time, bytes read | indexed / full (time) |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for r in skims {
        println!("{r}");
    }
    println!(
        "| log | records | buffer | whole: time, held | slices: time, held | indexed: time, held | slices / whole | indexed / whole |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for r in reads {
        println!("{r}");
    }
}

/// One size of [`read_a_large_log`]: its two table rows.
fn measure(mib: usize, buffer: usize, every: u64, policy: FsyncPolicy) -> (String, String) {
    let path = tmpfile(&format!("bench-{mib}.log"));
    let index = log::index_path(&path);
    let aside = tmpfile(&format!("bench-{mib}.log.idx-aside"));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&index);
    let options = log::LogOptions {
        index_every: every,
        ..log::LogOptions::new(policy)
    };
    let (mut l, _) = Log::open_with(&path, options).unwrap();
    let payload = vec![0x5a; 1400];
    let n = (mib << 20) / (FRAME + BODY_HEADER + payload.len());
    let wrote = std::time::Instant::now();
    for i in 0..n as u64 {
        l.append_parts(3, i, i, NodeId((i % 5) as u32), &payload)
            .unwrap();
        if policy != FsyncPolicy::Never {
            l.flush(i + 1).unwrap();
        } else if i % 1024 == 0 {
            l.sync().unwrap();
        }
    }
    l.sync().unwrap();
    drop(l);
    if policy != FsyncPolicy::Never {
        println!(
            "{mib} MiB written under {policy:?} in {:.1} ms",
            wrote.elapsed().as_secs_f64() * 1e3
        );
        // After a reboot: the entries tagged with this boot name another one.
        let other = log::boot_tag().map_or(7, |t| t ^ 1);
        let mut idx = log::INDEX_MAGIC.to_vec();
        for e in log::decode_index(&std::fs::read(&index).unwrap()) {
            let boot = if e.boot == 0 { 0 } else { other };
            log::encode_index_entry(&IndexEntry { boot, ..e }, &mut idx);
        }
        std::fs::write(&index, idx).unwrap();
    }
    let len = std::fs::metadata(&path).unwrap().len();
    let mib = |b: f64| b / f64::from(1 << 20);
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    // The skim without its index: the index moved aside for it.
    let skim = |indexed: bool| {
        if !indexed {
            std::fs::rename(&index, &aside).unwrap();
        }
        let t = std::time::Instant::now();
        // By default `Log::skim` as before (frames and headers); under `EveryRecords` as a
        // restart skims such a log (every record verified).
        let skim_policy = match policy {
            FsyncPolicy::Never => FsyncPolicy::EveryBatch,
            p => p,
        };
        let k = Log::skim_with(&path, u64::MAX, None, buffer, false, skim_policy).unwrap();
        let took = t.elapsed();
        if !indexed {
            std::fs::rename(&aside, &index).unwrap();
            assert_eq!(k.started_at, 0);
        } else if policy == FsyncPolicy::Never {
            assert!(k.started_at > 0, "the indexed skim starts at an entry");
        }
        let read = len - k.started_at;
        (took, k, read)
    };
    let (mut tf, mut ti) = (Vec::new(), Vec::new());
    let (mut rf, mut ri) = (0, 0);
    for _ in 0..3 {
        let (a, ka, ra) = skim(false);
        let (b, kb, rb) = skim(true);
        assert_eq!(ka.last, kb.last, "both skims find the same last record");
        assert_eq!(ka.len, kb.len);
        tf.push(a);
        ti.push(b);
        (rf, ri) = (ra, rb);
    }
    tf.sort();
    ti.sort();
    let skim_row = format!(
        "| {:.1} MiB | {n} | {} KiB | {:.2} ms, {:.1} MiB | {:.3} ms, {:.0} KiB | {:.4}x |",
        mib(len as f64),
        every >> 10,
        ms(tf[1]),
        mib(rf as f64),
        ms(ti[1]),
        ri as f64 / 1024.0,
        ti[1].as_secs_f64() / tf[1].as_secs_f64(),
    );
    // What the application does with a delivery: touch its bytes.
    let apply = |sum: &mut u64, r: &Record| {
        *sum = sum.wrapping_add(r.position ^ u64::from(r.payload[r.payload.len() / 2]));
    };
    let whole = || {
        let t = std::time::Instant::now();
        let bytes = std::fs::read(&path).unwrap();
        let d = log::decode(&bytes);
        let counts = d.records.last().map(|r| r.seq + 1);
        let held = len as usize
            + d.records
                .iter()
                .map(|r| r.payload.len() + 64)
                .sum::<usize>();
        let mut sum = 0;
        for r in &d.records {
            apply(&mut sum, r);
        }
        (t.elapsed(), counts, sum, held)
    };
    let slices = |indexed: bool| {
        let t = std::time::Instant::now();
        let (_, k, _) = skim(indexed);
        let counts = k.last.map(|r| r.seq + 1);
        let mut reader = Log::reader(&path, buffer).unwrap();
        let mut sum = 0;
        while let Some(r) = reader.next_record().unwrap() {
            apply(&mut sum, &r);
        }
        let held = k.peak_buffer.max(reader.peak_buffer());
        (t.elapsed(), counts, sum, held)
    };
    let (mut tw, mut ts, mut tx) = (Vec::new(), Vec::new(), Vec::new());
    let (mut hw, mut hs, mut hx) = (0, 0, 0);
    for _ in 0..3 {
        let (a, ca, sa, h) = whole();
        let (b, cb, sb, g) = slices(false);
        let (c, cc, sc, x) = slices(true);
        assert_eq!((ca, sa), (cb, sb), "both read the same records");
        assert_eq!((ca, sa), (cc, sc), "both read the same records");
        tw.push(a);
        ts.push(b);
        tx.push(c);
        (hw, hs, hx) = (h, g, x);
    }
    tw.sort();
    ts.sort();
    tx.sort();
    let (w, s, x) = (tw[1], ts[1], tx[1]);
    let read_row = format!(
        "| {:.1} MiB | {n} | {} KiB | {:.1} ms, {:.1} MiB | {:.1} ms, {} KiB | {:.1} ms, {} KiB | {:.2}x | {:.2}x |",
        mib(len as f64),
        buffer >> 10,
        ms(w),
        mib(hw as f64),
        ms(s),
        hs >> 10,
        ms(x),
        hx >> 10,
        s.as_secs_f64() / w.as_secs_f64(),
        x.as_secs_f64() / w.as_secs_f64(),
    );
    std::fs::remove_file(&path).ok();
    std::fs::remove_file(&index).ok();
    (skim_row, read_row)
}
