//! The incremental log reader (`log::Reader`) against the whole-file decoder (`log::decode`):
//! on random logs, truncated, corrupted, reordered or with garbage appended, read through
//! random buffer sizes, the reader yields the same records, the same valid length and the same
//! reason to stop, and never holds more than its buffer (or the longest record). `Log::skim`
//! (headers only) agrees with `Log::open` wherever no checksum in the middle is broken, and
//! its cut from a mark equals the cut from the start.

#![allow(clippy::unwrap_used)]

use std::io::Cursor;
use std::path::PathBuf;

use proptest::prelude::*;
use squall_round_robin::log::{
    self, BODY_HEADER, FRAME, FsyncPolicy, Log, MAGIC, ReadMode, Reader, Record, TailError,
};
use squall_transport::NodeId;

fn tmpfile(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("squall-rr-reader-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A valid log of `sizes.len()` records (payload lengths `sizes`), views changing at `breaks`.
fn build(sizes: &[usize], view_steps: &[bool]) -> (Vec<u8>, Vec<Record>) {
    let mut out = MAGIC.to_vec();
    let mut records = Vec::new();
    let (mut view, mut position) = (1u64, 0u64);
    for (i, &len) in sizes.iter().enumerate() {
        if view_steps.get(i).copied().unwrap_or(false) {
            view += 1;
            position += 3;
        }
        let r = Record {
            view,
            seq: i as u64 * 2,
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

    /// `Log::skim` of a file repairs it as `Log::open` does (unless a checksum before the
    /// last record is broken, which only a verifying reader sees), and its cut from a mark
    /// equals its cut from the start.
    #[test]
    fn skim_repairs_and_cuts_as_open_and_cut(
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
        let skimmed = Log::skim(&a, u64::MAX, None, buffer, false).unwrap();
        let b = tmpfile(&format!("open-{}", std::process::id()));
        std::fs::write(&b, &bytes).unwrap();
        let (_, rec) = Log::open(&b, FsyncPolicy::Never).unwrap();
        prop_assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        prop_assert_eq!(skimmed.records, rec.records.len() as u64);
        prop_assert_eq!(skimmed.last.map(|r| (r.seq, r.position)), rec.records.last().map(|r| (r.seq, r.position)));
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
    assert_eq!(
        Log::open(&path, FsyncPolicy::Never).unwrap().1.records,
        records[..2]
    );
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
/// SQUALL_RR_LOG_READ_BENCH=256 cargo test --release -p squall-round-robin --test log_reader \
///     -- --nocapture --test-threads 1 read_a_large_log
/// ```
///
/// writes a log of that many MiB (records of 1400-byte payloads, about what the TCP restart
/// test's members log) and reads it as a total restart does, alternating, 3 times each:
/// **whole** (before s17): `Log::open` (the file read whole, every record decoded and kept) for
/// the logged counts, then the records replayed from memory; **slices** (s17): `Log::skim`
/// (frames and headers) for the counts, then a `Verify` reader of `SQUALL_RR_LOG_READ_BUFFER`
/// bytes (default 1 MiB) replaying them. The file is in the page cache for both (just written).
/// Prints the median times, their ratio and the bytes each held at once.
#[test]
fn read_a_large_log() {
    let Ok(mib) = std::env::var("SQUALL_RR_LOG_READ_BENCH") else {
        println!("skipped: set SQUALL_RR_LOG_READ_BENCH=<MiB> to measure");
        return;
    };
    let mib: usize = mib.parse().unwrap();
    let buffer: usize = std::env::var("SQUALL_RR_LOG_READ_BUFFER")
        .map_or(log::DEFAULT_READ_BUFFER, |b| b.parse().unwrap());
    let path = tmpfile("bench.log");
    let _ = std::fs::remove_file(&path);
    let (mut l, _) = Log::open(&path, FsyncPolicy::Never).unwrap();
    let payload = vec![0x5a; 1400];
    let n = (mib << 20) / (FRAME + BODY_HEADER + payload.len());
    for i in 0..n as u64 {
        l.append_parts(3, i, i, NodeId((i % 5) as u32), &payload)
            .unwrap();
        if i % 1024 == 0 {
            l.sync().unwrap();
        }
    }
    l.sync().unwrap();
    drop(l);
    let len = std::fs::metadata(&path).unwrap().len();
    // What the application does with a delivery: touch its bytes.
    let apply = |sum: &mut u64, r: &Record| {
        *sum = sum.wrapping_add(r.position ^ u64::from(r.payload[r.payload.len() / 2]));
    };
    let whole = || {
        let t = std::time::Instant::now();
        let (_, rec) = Log::open(&path, FsyncPolicy::Never).unwrap();
        let counts = rec.records.last().map(|r| r.seq + 1);
        let held = len as usize
            + rec
                .records
                .iter()
                .map(|r| r.payload.len() + 64)
                .sum::<usize>();
        let mut sum = 0;
        for r in &rec.records {
            apply(&mut sum, r);
        }
        (t.elapsed(), counts, sum, held)
    };
    let slices = || {
        let t = std::time::Instant::now();
        let k = Log::skim(&path, u64::MAX, None, buffer, false).unwrap();
        let counts = k.last.map(|r| r.seq + 1);
        let mut reader = Log::reader(&path, buffer).unwrap();
        let mut sum = 0;
        while let Some(r) = reader.next_record().unwrap() {
            apply(&mut sum, &r);
        }
        let held = k.peak_buffer.max(reader.peak_buffer());
        (t.elapsed(), counts, sum, held)
    };
    let (mut tw, mut ts) = (Vec::new(), Vec::new());
    let (mut hw, mut hs) = (0, 0);
    for _ in 0..3 {
        let (a, ca, sa, h) = whole();
        let (b, cb, sb, g) = slices();
        assert_eq!((ca, sa), (cb, sb), "both read the same records");
        tw.push(a);
        ts.push(b);
        (hw, hs) = (h, g);
    }
    tw.sort();
    ts.sort();
    let (w, s) = (tw[1], ts[1]);
    println!(
        "| log | records | buffer | whole: time, held | slices: time, held | slices / whole (time) |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    println!(
        "| {:.1} MiB | {n} | {} KiB | {:.1} ms, {:.1} MiB | {:.1} ms, {} KiB | {:.2}x |",
        len as f64 / f64::from(1 << 20),
        buffer >> 10,
        w.as_secs_f64() * 1e3,
        hw as f64 / f64::from(1 << 20),
        s.as_secs_f64() * 1e3,
        hs >> 10,
        s.as_secs_f64() / w.as_secs_f64(),
    );
    std::fs::remove_file(&path).ok();
}
