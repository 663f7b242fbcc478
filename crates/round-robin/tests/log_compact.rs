//! The round-robin log's compaction (`Log::compact`) and the index `Log::open` rebuilds:
//! a compacted log reads as the uncompacted one at and past the point (skim, cut, reader,
//! open, appends), a crash at any point of a compaction leaves the old log or the new one,
//! and an open that had to read the whole file leaves an index the next skim starts from.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use squall_round_robin::log::{
    self, COMPACTED_HEADER, CompactCrash, FsyncPolicy, Log, LogError, LogOptions, Record,
};
use squall_transport::NodeId;

use common::remove_log as remove;

fn tmpfile(name: &str) -> PathBuf {
    common::scratch_file("compact", name)
}

/// Copies a log and its index (if any) from `a` to `b`.
fn copy(a: &Path, b: &Path) {
    remove(b);
    std::fs::copy(a, b).unwrap();
    if log::index_path(a).exists() {
        std::fs::copy(log::index_path(a), log::index_path(b)).unwrap();
    }
}

/// Records of `sizes.len()` payload lengths, the view changing where `steps` says, sequence
/// numbers starting again in each view if `reset` (so the largest is not the last's).
fn records(sizes: &[usize], steps: &[bool], reset: bool) -> Vec<Record> {
    let (mut view, mut position, mut first) = (1u64, 0u64, 0usize);
    let mut out = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        if i > 0 && steps.get(i).copied().unwrap_or(false) {
            view += 1;
            position += 3;
            if reset {
                first = i;
            }
        }
        out.push(Record {
            view,
            seq: (i - first) as u64 * 2 + 1,
            position,
            sender: NodeId(i as u32 % 3),
            payload: (0..len).map(|b| (b * 7 + i) as u8).collect(),
        });
        position += 1;
    }
    out
}

/// `n` records continuing after `last` in its view.
fn more(last: &Record, n: usize) -> Vec<Record> {
    (1..=n as u64)
        .map(|i| Record {
            view: last.view,
            seq: last.seq + 2 * i,
            position: last.position + i,
            sender: NodeId(i as u32),
            payload: vec![i as u8; 40],
        })
        .collect()
}

fn options(every: u64) -> LogOptions {
    LogOptions {
        index_every: every,
        ..LogOptions::new(FsyncPolicy::EveryBatch)
    }
}

/// Appends `rs` to the log at `path` in batches of 3.
fn append(path: &Path, every: u64, rs: &[Record]) {
    let (mut l, _) = Log::open_with(path, options(every)).unwrap();
    for batch in rs.chunks(3) {
        for r in batch {
            l.append(r).unwrap();
        }
        l.sync().unwrap();
    }
}

fn header(r: &Record) -> (u64, u64, u64, NodeId) {
    (r.view, r.seq, r.position, r.sender)
}

/// Every record of the log at `path` (a `Verify` reader), and its base.
fn read(path: &Path) -> (Vec<Record>, Option<log::Base>) {
    let mut reader = Log::reader(path, 100).unwrap();
    let mut out = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        out.push(r);
    }
    assert_eq!(reader.tail(), None, "{}", path.display());
    (out, reader.base().copied())
}

/// The point a compaction at record `k` drops before: record `k`'s view and position, or
/// past the last record.
fn point(rs: &[Record], k: usize) -> (u64, u64) {
    match rs.get(k) {
        Some(r) => (r.view, r.position),
        None => rs.last().map_or((1, 0), |r| (r.view, r.position + 1)),
    }
}

/// What the base of a log compacted before record `k` must say.
fn expected_base(rs: &[Record], k: usize) -> (u64, u64, u64, NodeId, u64) {
    let last = &rs[k - 1];
    let max_seq = rs[..k].iter().map(|r| r.seq).max().unwrap();
    (last.view, last.seq, last.position, last.sender, max_seq)
}

proptest! {
    // Files written, compacted, reopened and cut several times per case.
    #![proptest_config(ProptestConfig::with_cases(squall_transport_mem::sim::proptest_cases(128)))]

    /// Compacting at one or more points leaves a log whose records are the uncompacted one's
    /// at and past the last point, byte for byte, whose base is the last dropped record's
    /// header and the dropped prefix's largest sequence number, and on which the skim (the
    /// logged counts follow from its last record), `Log::open`, appends, a torn append
    /// repaired at the next open, and cuts give what they give on the uncompacted log (a cut
    /// reaching into the dropped prefix is refused). With the index kept, the skim of the
    /// compacted log starts from the moved entries.
    #[test]
    fn a_compacted_log_reads_as_the_uncompacted_one_at_and_past_the_point(
        sizes in proptest::collection::vec(0usize..300, 1..40),
        steps in proptest::collection::vec(prop::bool::weighted(0.15), 0..40),
        reset in any::<bool>(),
        every in prop_oneof![1u64..64, 64u64..3000],
        points in proptest::collection::vec(any::<prop::sample::Index>(), 1..4),
        missing_index in prop::bool::weighted(0.25),
        cut in any::<prop::sample::Index>(),
        appended in 0usize..5,
        torn in prop::option::of(proptest::collection::vec(any::<u8>(), 1..60)),
    ) {
        let rs = records(&sizes, &steps, reset);
        let (a, b) = (tmpfile("prop-a.log"), tmpfile("prop-b.log"));
        remove(&a);
        append(&a, every, &rs);
        copy(&a, &b);
        // Without an index (`u64::MAX`: none read or written), the compaction reads from the
        // start.
        let copts = if missing_index {
            std::fs::remove_file(log::index_path(&a)).unwrap();
            options(u64::MAX)
        } else {
            options(every)
        };
        let mut ks: Vec<usize> = points.iter().map(|i| i.index(rs.len() + 1)).collect();
        ks.sort_unstable();
        let mut dropped = 0;
        // The last compaction's `Log` appends the new records below (to the new file).
        let mut kept_open = None;
        for &k in &ks {
            drop(kept_open.take());
            let (mut l, _) = Log::open_with(&a, copts).unwrap();
            let (v, p) = point(&rs, k);
            let done = l.compact(v, p).unwrap();
            prop_assert_eq!(done.is_some(), k > dropped, "k {} dropped {}", k, dropped);
            if let Some(done) = done {
                let bs = done.base;
                prop_assert_eq!((bs.view, bs.seq, bs.position, bs.sender, bs.max_seq), expected_base(&rs, k));
                dropped = k;
                if done.index_entries > 0 {
                    // The moved entries check out: the skim starts from the last one.
                    let k = Log::skim(&a, u64::MAX, None, 64, false).unwrap();
                    prop_assert!(k.started_at >= COMPACTED_HEADER as u64, "{:?}", k);
                }
            }
            kept_open = Some(l);
        }
        // Read back: the records past the point, byte for byte, after the base.
        let (kept, base) = read(&a);
        prop_assert_eq!(&kept[..], &rs[dropped..]);
        prop_assert_eq!(base.is_some(), dropped > 0);
        let bytes_a = std::fs::read(&a).unwrap();
        let bytes_b = std::fs::read(&b).unwrap();
        if let Some(bs) = base {
            let origin = bs.origin as usize;
            prop_assert_eq!(&bytes_a[COMPACTED_HEADER..], &bytes_b[origin..]);
        } else {
            prop_assert_eq!(&bytes_a, &bytes_b);
        }
        // The skim: the same last record (so the same logged counts).
        let ka = Log::skim(&a, u64::MAX, None, 64, false).unwrap();
        let kb = Log::skim(&b, u64::MAX, None, 64, false).unwrap();
        prop_assert_eq!(ka.last.as_ref().map(header), kb.last.as_ref().map(header));
        prop_assert_eq!((ka.truncated, ka.base), (None, base));
        // Append (to a through the `Log` that compacted it), a torn append, open again: the
        // same.
        for path in [&a, &b] {
            let mut l = match kept_open.take() {
                Some(l) if path == &a => l,
                _ => Log::open_with(path, options(every)).unwrap().0,
            };
            for r in more(rs.last().unwrap(), appended) {
                l.append(&r).unwrap();
                l.sync().unwrap();
            }
            drop(l);
            if let Some(g) = &torn {
                let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
                std::io::Write::write_all(&mut f, g).unwrap();
            }
        }
        let (la, ra) = Log::open_with(&a, options(every)).unwrap();
        let (lb, rb) = Log::open_with(&b, options(every)).unwrap();
        prop_assert_eq!(la.last(), lb.last());
        prop_assert_eq!(ra.last.as_ref().map(header), rb.last.as_ref().map(header));
        prop_assert_eq!(ra.dropped_bytes, rb.dropped_bytes);
        prop_assert_eq!(
            ra.truncated.as_ref().map(std::mem::discriminant),
            rb.truncated.as_ref().map(std::mem::discriminant)
        );
        drop((la, lb));
        let (ra, _) = read(&a);
        let (rb, _) = read(&b);
        prop_assert_eq!(&ra[..], &rb[dropped..]);
        // Open read what it needed: the index is whole again, the skim starts from it.
        if !ra.is_empty() {
            let k = Log::skim(&a, u64::MAX, None, 64, false).unwrap();
            prop_assert!(k.started_at > 0, "{:?}", k);
        }
        // A cut: the same, or refused if it reaches into the dropped prefix.
        let seqs: Vec<u64> = rb.iter().map(|r| r.seq).chain([u64::MAX, 0]).collect();
        let c = seqs[cut.index(seqs.len())];
        let ca = Log::cut(&a, c);
        let cb = Log::cut(&b, c).unwrap();
        match (ca, base) {
            (Err(LogError::Compacted { seq, max_seq, .. }), Some(bs)) => {
                prop_assert_eq!((seq, max_seq), (c, bs.max_seq));
                prop_assert!(c <= bs.max_seq);
            }
            (Ok(ca), _) => {
                prop_assert!(base.is_none_or(|bs| c > bs.max_seq));
                prop_assert_eq!(ca.last.as_ref().map(header), cb.last.as_ref().map(header));
                let (ra, _) = read(&a);
                let (rb, _) = read(&b);
                prop_assert_eq!(&ra[..], &rb[dropped.min(rb.len())..]);
            }
            (other, _) => return Err(TestCaseError::fail(format!("{other:?}"))),
        }
        remove(&a);
        remove(&b);
    }
}

/// A crash at each point of a compaction (the files a process crash there leaves, made by
/// `Log::compact_cut_at`) leaves the old log whole (before the rename; the leftover file is
/// removed by the next open) or the compacted one (after it; with the old index, whose
/// entries fail their checks, or half the new one): the next open finds the last record of
/// the uncompacted log, the records at and past the point are the same, appends continue,
/// the index is usable again, and compacting again completes the work.
#[test]
fn a_compaction_crashed_at_any_point_leaves_the_old_or_the_new_log() {
    let rs = records(
        &(0..60).map(|i| (i * 37) % 250).collect::<Vec<_>>(),
        &(0..60).map(|i| i == 25).collect::<Vec<_>>(),
        true,
    );
    let (a, b) = (tmpfile("crash-a.log"), tmpfile("crash-b.log"));
    for crash in [
        CompactCrash::BeforeSync,
        CompactCrash::BeforeRename,
        CompactCrash::BeforeIndex,
        CompactCrash::MidIndex,
        CompactCrash::IndexBeforeRename,
    ] {
        for every in [1, 300, 4096] {
            for k in [1, 30, 59, 60] {
                for twice in [false, true] {
                    if twice && k == 1 {
                        continue; // the first compaction dropped record 0 already
                    }
                    let case = format!("{crash:?} every {every} k {k} twice {twice}");
                    remove(&a);
                    append(&a, every, &rs);
                    let (v, p) = point(&rs, k);
                    let (mut l, _) = Log::open_with(&a, options(every)).unwrap();
                    if twice {
                        // A compacted log compacted again.
                        l.compact(rs[0].view, rs[0].position + 1).unwrap().unwrap();
                    }
                    drop(l);
                    copy(&a, &b);
                    let before = std::fs::read(&a).unwrap();
                    let (mut l, _) = Log::open_with(&a, options(every)).unwrap();
                    let r = l.compact_cut_at(v, p, crash).unwrap();
                    assert!(r.is_none(), "{case}");
                    drop(l);
                    let tmp = log::compact_tmp_path(&a);
                    let renamed = matches!(
                        crash,
                        CompactCrash::BeforeIndex
                            | CompactCrash::MidIndex
                            | CompactCrash::IndexBeforeRename
                    );
                    assert_eq!(tmp.exists(), !renamed, "{case}");
                    let (now, base) = read(&a);
                    if renamed {
                        assert!(now[..] == rs[k..], "{case}");
                        let bs = base.unwrap();
                        assert_eq!(
                            (bs.view, bs.seq, bs.position, bs.sender, bs.max_seq),
                            expected_base(&rs, k),
                            "{case}"
                        );
                    } else {
                        assert_eq!(
                            std::fs::read(&a).unwrap(),
                            before,
                            "{case}: the old log, untouched"
                        );
                    }
                    // Open: the uncompacted log's last record; the leftover removed.
                    let (la, ra) = Log::open_with(&a, options(every)).unwrap();
                    let (lb, rb) = Log::open_with(&b, options(every)).unwrap();
                    assert!(!tmp.exists(), "{case}");
                    assert_eq!(la.last(), lb.last(), "{case}");
                    assert_eq!(
                        ra.last.as_ref().map(header),
                        rb.last.as_ref().map(header),
                        "{case}"
                    );
                    assert_eq!(ra.dropped_bytes, 0, "{case}");
                    drop((la, lb));
                    for path in [&a, &b] {
                        append(path, every, &more(rs.last().unwrap(), 4));
                    }
                    let (ra, _) = read(&a);
                    let (rb, _) = read(&b);
                    // b holds the records from `skip` on, a from `from` on.
                    let skip = usize::from(twice);
                    let from = if renamed { k } else { skip };
                    assert!(ra[..] == rb[from - skip..], "{case}");
                    let k_a = Log::skim(&a, u64::MAX, None, 64, false).unwrap();
                    assert!(k_a.started_at > 0, "{case}: the index is usable again");
                    // Compacting again: done (or nothing left to do).
                    let (mut l, _) = Log::open_with(&a, options(every)).unwrap();
                    let again = l.compact(v, p).unwrap();
                    assert_eq!(again.is_some(), !renamed, "{case}");
                    drop(l);
                    let (ra, base) = read(&a);
                    assert_eq!(
                        &ra[..],
                        &[&rs[k..], &more(rs.last().unwrap(), 4)[..]].concat()[..],
                        "{case}"
                    );
                    assert!(base.is_some(), "{case}");
                }
            }
        }
    }
    remove(&a);
    remove(&b);
}

/// When `Log::open` had to read the whole file (the index missing, garbage, another log's,
/// or of another boot's unsynced records), it rewrites the index from what it read: the
/// next skim starts from the index's last entry and finds what the whole-file skim finds.
/// Mutation: without the rebuild the next skim starts at 0 (fails at once).
#[test]
fn an_open_that_read_the_whole_file_rebuilds_the_index_and_the_next_skim_uses_it() {
    let rs = records(&vec![100; 300], &[], false);
    let (a, b) = (tmpfile("rebuild-a.log"), tmpfile("rebuild-b.log"));
    let other = log::boot_tag().map_or(7, |t| t ^ 1);
    type Damage = fn(&Path, u64);
    let damages: [(&str, Damage); 4] = [
        ("missing", |ia, _| std::fs::remove_file(ia).unwrap()),
        ("garbage", |ia, _| std::fs::write(ia, [0x5a; 500]).unwrap()),
        ("another log's", |ia, _| {
            let mut e = log::decode_index(&std::fs::read(ia).unwrap());
            e.iter_mut().for_each(|x| x.offset += 1);
            let mut out = log::INDEX_MAGIC.to_vec();
            e.iter().for_each(|x| log::encode_index_entry(x, &mut out));
            std::fs::write(ia, out).unwrap();
        }),
        ("another boot's", |ia, other| {
            let mut e = log::decode_index(&std::fs::read(ia).unwrap());
            e.iter_mut().for_each(|x| x.boot = other);
            let mut out = log::INDEX_MAGIC.to_vec();
            e.iter().for_each(|x| log::encode_index_entry(x, &mut out));
            std::fs::write(ia, out).unwrap();
        }),
    ];
    for (what, damage) in damages {
        for compacted in [false, true] {
            let case = format!("{what}, compacted {compacted}");
            remove(&a);
            append(&a, 4096, &rs);
            if compacted {
                let (mut l, _) = Log::open_with(&a, options(4096)).unwrap();
                l.compact(1, 120).unwrap().unwrap();
            }
            copy(&a, &b);
            std::fs::remove_file(log::index_path(&b)).unwrap();
            damage(&log::index_path(&a), other);
            let (l, rec) = Log::open_with(&a, options(4096)).unwrap();
            drop(l);
            assert_eq!(rec.started_at, 0, "{case}: read whole");
            let want = log::rebuild_index(std::fs::File::open(&a).unwrap(), 4096).unwrap();
            assert_eq!(rec.reindexed, (want.len() - 8) / 64, "{case}");
            assert!(rec.reindexed >= 5, "{case}: {} entries", rec.reindexed);
            assert_eq!(std::fs::read(log::index_path(&a)).unwrap(), want, "{case}");
            let fast = Log::skim(&a, u64::MAX, None, 4096, false).unwrap();
            let full = Log::skim(&b, u64::MAX, None, 4096, false).unwrap();
            assert_eq!(full.started_at, 0);
            let last_entry = log::decode_index(&want).last().unwrap().offset;
            assert_eq!(
                fast.started_at, last_entry,
                "{case}: from the rebuilt index"
            );
            assert!(fast.records * 4 < full.records, "{case}: {fast:?}");
            assert_eq!(fast.last, full.last, "{case}");
            assert_eq!(
                (fast.len, fast.truncated, fast.base),
                (full.len, full.truncated, full.base)
            );
            // A second open reads the end only and rebuilds nothing.
            let (_, rec) = Log::open_with(&a, options(4096)).unwrap();
            assert_eq!((rec.started_at, rec.reindexed), (last_entry, 0), "{case}");
        }
    }
    remove(&a);
    remove(&b);
}

/// A compacted log's header is read strictly: a base frame torn, flipped or of the wrong
/// length is refused (`BadHeader`, the file left as it is: a crash never leaves one, so
/// emptying it would lose records), a first record that does not follow the base is a
/// corrupt tail (as an out-of-order record anywhere), and a cut into the dropped prefix is
/// refused (`Compacted`).
#[test]
fn a_compacted_log_is_read_strictly() {
    let rs = records(&[50; 20], &[], false);
    let a = tmpfile("strict.log");
    remove(&a);
    append(&a, 1, &rs);
    let (mut l, _) = Log::open_with(&a, options(1)).unwrap();
    let done = l.compact(1, 10).unwrap().unwrap();
    drop(l);
    assert_eq!((done.base.position, done.base.max_seq), (9, 19));
    let good = std::fs::read(&a).unwrap();
    assert_eq!(&good[..8], log::MAGIC_COMPACTED);
    for (what, bytes) in [
        ("torn", good[..COMPACTED_HEADER - 1].to_vec()),
        ("flipped", {
            let mut b = good.clone();
            b[30] ^= 4;
            b
        }),
        ("another length", {
            let mut b = good.clone();
            b[8] = 43;
            b
        }),
    ] {
        std::fs::write(&a, &bytes).unwrap();
        let d = log::decode(&bytes);
        assert!(
            matches!(d.tail, Some(log::TailError::Base { .. })),
            "{what}: {:?}",
            d.tail
        );
        assert_eq!((d.valid_len, d.records.len()), (0, 0), "{what}");
        let e = Log::open_with(&a, options(1)).unwrap_err();
        assert!(matches!(e, LogError::BadHeader { .. }), "{what}: {e}");
        assert_eq!(std::fs::read(&a).unwrap(), bytes, "{what}: left as it is");
    }
    // The first record out of order against the base: the base says position 12 came last.
    let mut bytes = good[..8].to_vec();
    let base = log::Base {
        position: 12,
        ..done.base
    };
    log::encode_base(&base, &mut bytes);
    bytes.extend_from_slice(&good[COMPACTED_HEADER..]);
    std::fs::write(&a, &bytes).unwrap();
    std::fs::remove_file(log::index_path(&a)).unwrap();
    let d = log::decode(&bytes);
    assert!(
        matches!(d.tail, Some(log::TailError::Order { offset, position: 10, previous: 12 }) if offset == COMPACTED_HEADER)
    );
    let (l, rec) = Log::open_with(&a, options(1)).unwrap();
    assert_eq!(
        rec.last.map(|r| r.position),
        Some(12),
        "nothing but the base left"
    );
    assert_eq!(l.last(), Some((1, 12)));
    drop(l);
    // A cut into the dropped prefix.
    std::fs::write(&a, &good).unwrap();
    std::fs::remove_file(log::index_path(&a)).unwrap();
    assert!(matches!(
        Log::cut(&a, 19),
        Err(LogError::Compacted {
            seq: 19,
            max_seq: 19,
            ..
        })
    ));
    assert_eq!(std::fs::read(&a).unwrap(), good, "left as it is");
    let kept = Log::cut(&a, 20).unwrap();
    assert_eq!(
        kept.last.map(|r| (r.seq, r.position)),
        Some((19, 9)),
        "only the base left"
    );
    remove(&a);
}

/// The cost of a compaction against a plain copy of the kept bytes (the same range copied to
/// a new file and `fsync`ed: what any crash-safe rewrite pays at least), measured in the same
/// run, alternating, medians of 5. Off by default: `SQUALL_RR_LOG_COMPACT_BENCH=16,64,256`
/// (log sizes in MiB; records of 1400-byte payloads, synced every 1024, an index entry per
/// MiB) and `SQUALL_RR_LOG_COMPACT_KEEP=1000,half` (records kept: a count, or half the log).
/// Run with `--release --nocapture`.
#[test]
fn compaction_cost() {
    let Ok(sizes) = std::env::var("SQUALL_RR_LOG_COMPACT_BENCH") else {
        return;
    };
    let keeps = std::env::var("SQUALL_RR_LOG_COMPACT_KEEP").unwrap_or_else(|_| "1000".into());
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let master = tmpfile("bench-master.log");
    let (work, plain) = (tmpfile("bench-work.log"), tmpfile("bench-plain.log"));
    println!("| log | records | kept | compaction | plain copy + fsync | compaction / copy |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for mib in sizes.split(',').map(|s| s.trim().parse::<u64>().unwrap()) {
        remove(&master);
        let (mut l, _) = Log::open_with(&master, options(1 << 20)).unwrap();
        let n = (mib << 20) / (1400 + 36);
        for i in 0..n {
            l.append_parts(1, i, i, NodeId((i % 5) as u32), &[i as u8; 1400])
                .unwrap();
            if i % 1024 == 1023 {
                l.sync().unwrap();
            }
        }
        l.sync().unwrap();
        drop(l);
        for keep in keeps.split(',') {
            let kept = match keep.trim() {
                "half" => n / 2,
                k => k.parse::<u64>().unwrap().min(n),
            };
            let (mut tc, mut tp) = (Vec::new(), Vec::new());
            let mut kept_bytes = 0;
            for _ in 0..5 {
                copy(&master, &work);
                // The copy on disk first: its writeback is not the compaction's cost.
                for p in [work.clone(), log::index_path(&work)] {
                    std::fs::File::open(p).unwrap().sync_all().unwrap();
                }
                let (mut l, _) = Log::open_with(&work, options(1 << 20)).unwrap();
                let t = std::time::Instant::now();
                let done = l.compact(1, n - kept).unwrap().unwrap();
                tc.push(t.elapsed().as_secs_f64() * 1e3);
                kept_bytes = done.kept_bytes;
                drop(l);
                remove(&plain);
                let t = std::time::Instant::now();
                let mut src = std::fs::File::open(&master).unwrap();
                let len = src.metadata().unwrap().len();
                std::io::Seek::seek(&mut src, std::io::SeekFrom::Start(len - kept_bytes)).unwrap();
                let mut out = std::fs::File::create(&plain).unwrap();
                std::io::copy(&mut std::io::Read::take(&mut src, kept_bytes), &mut out).unwrap();
                out.sync_all().unwrap();
                tp.push(t.elapsed().as_secs_f64() * 1e3);
            }
            let (c, p) = (median(tc), median(tp));
            println!(
                "| {mib} MiB | {n} | {kept} ({:.1} MiB) | {c:.2} ms | {p:.2} ms | {:.2}x |",
                kept_bytes as f64 / f64::from(1 << 20),
                c / p
            );
        }
    }
    remove(&master);
    remove(&work);
    remove(&plain);
}

/// s25 figure: how long a flushed batch waits to be reported durable while a compaction on
/// its thread keeps a large suffix. A log of `SQUALL_RR_LOG_COMPACT_STALL` MiB (records of
/// 1400-byte payloads, an index entry per MiB) is compacted to its second record (the whole
/// log kept) with `Log::start_compact` while one record at a time is appended, flushed and
/// `durable_mark` polled until it reports the record (sleeping 50 µs between polls), until
/// the compaction's outcome is taken; then as many records again with no compaction as the
/// baseline. Per policy (`EveryBatch`, `EveryRecords(1000)`): the compaction's duration,
/// the records made durable during it, the median and longest flush-to-durable wait during
/// it, and the median and longest of the baseline. Off by default; e.g.
/// `SQUALL_RR_LOG_COMPACT_STALL=64 cargo nextest run -p squall-round-robin --test log_compact
/// -E 'test(durable_stall)' --no-capture`.
#[test]
fn durable_stall_during_a_compaction_of_a_large_suffix() {
    let Ok(mib) = std::env::var("SQUALL_RR_LOG_COMPACT_STALL") else {
        return;
    };
    let mib: u64 = mib.trim().parse().unwrap();
    let a = tmpfile("stall.log");
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let stats = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v.len(), v[v.len() / 2], v[v.len() - 1])
    };
    println!(
        "| policy | kept | compaction | records durable during it | wait median (max) during it | wait median (max) without |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for policy in [FsyncPolicy::EveryBatch, FsyncPolicy::EveryRecords(1000)] {
        remove(&a);
        let opts = LogOptions {
            index_every: 1 << 20,
            ..LogOptions::new(policy)
        };
        let (mut l, _) = Log::open_with(&a, opts).unwrap();
        let n = (mib << 20) / (1400 + 36);
        for i in 0..n {
            l.append_parts(1, i, i, NodeId((i % 5) as u32), &[i as u8; 1400])
                .unwrap();
            if i % 1024 == 1023 {
                l.sync().unwrap();
            }
        }
        l.sync().unwrap();
        let mut next = n;
        let mut one = |l: &mut Log| {
            l.append_parts(1, next, next, NodeId(0), &[7; 1400])
                .unwrap();
            next += 1;
            let t = std::time::Instant::now();
            l.flush(next).unwrap();
            while l.durable_mark().unwrap() != Some(next) {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            ms(t.elapsed())
        };
        let t = std::time::Instant::now();
        assert!(l.start_compact(1, 1).unwrap());
        let mut during = Vec::new();
        let done = loop {
            during.push(one(&mut l));
            if let Some(outcome) = l.take_compacted() {
                break outcome.unwrap().unwrap();
            }
        };
        let took = ms(t.elapsed());
        let without: Vec<f64> = (0..during.len().max(20)).map(|_| one(&mut l)).collect();
        let (count, med, max) = stats(during);
        let (_, bmed, bmax) = stats(without);
        println!(
            "| {policy:?} | {:.1} MiB | {took:.1} ms | {count} | {med:.3} ms ({max:.1} ms) | {bmed:.3} ms ({bmax:.1} ms) |",
            done.kept_bytes as f64 / f64::from(1 << 20)
        );
        drop(l);
    }
    remove(&a);
}

/// Found by the fuzz target `rr_log_index` (a base at position `u64::MAX`): the order check
/// computed `position + 1` and overflowed (a panic where overflow is checked, as in fuzz and
/// debug builds; a record that wrapped to position 0 accepted otherwise). A record after
/// position `u64::MAX` in the same view is out of order, from a base or a record alike.
#[test]
fn regression_a_position_of_u64_max_has_no_next() {
    let mut bytes = log::MAGIC_COMPACTED.to_vec();
    let b = log::Base {
        view: 1,
        seq: 0,
        position: u64::MAX,
        sender: NodeId(0),
        max_seq: 0,
        origin: 100,
    };
    log::encode_base(&b, &mut bytes);
    let r = Record {
        view: 1,
        seq: 1,
        position: 0,
        sender: NodeId(0),
        payload: vec![],
    };
    log::encode_record(&r, &mut bytes);
    let d = log::decode(&bytes);
    assert!(
        matches!(d.tail, Some(log::TailError::Order { .. })),
        "{:?}",
        d.tail
    );
    let mut reader = log::Reader::new(
        std::io::Cursor::new(&bytes),
        bytes.len() as u64,
        64,
        log::ReadMode::Verify,
    );
    assert_eq!(reader.next_record().unwrap(), None);
    assert_eq!(reader.tail(), d.tail.as_ref());
    let mut plain = log::MAGIC.to_vec();
    log::encode_record(
        &Record {
            position: u64::MAX,
            ..r.clone()
        },
        &mut plain,
    );
    log::encode_record(&r, &mut plain);
    assert_eq!(log::decode(&plain).records.len(), 1);
}

/// Waits (up to 10 s) for the outcome of a compaction on its thread (`Log::start_compact`).
fn compacted(l: &mut Log) -> Result<Option<log::Compacted>, LogError> {
    let start = std::time::Instant::now();
    loop {
        if let Some(outcome) = l.take_compacted() {
            return outcome;
        }
        assert!(
            start.elapsed().as_secs() < 10,
            "the compaction never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Polls `durable_mark` until it reports `mark` (up to 10 s), while the compaction on its
/// thread still runs (held on its gate): what was flushed during the copy is written and
/// durable before the compaction completes.
fn durable_while_compacting(l: &mut Log, mark: u64, case: &str) {
    wait_durable(l, mark, &format!("{case}: during the compaction"));
    assert!(l.compacting(), "{case}: the compaction completed");
}

/// s24, s25: a compaction on its own thread (`Log::start_compact`), the log's syncer thread
/// and the compaction's thread held on their test gates (the compaction after its first
/// copy, before its final phase). The records flushed meanwhile are written to the log and
/// reported durable (synced under `EveryBatch`) *before* the compaction completes (s25; in
/// s24 they waited in the buffer for the swap). Released, the compacted log holds the kept
/// records, then every record flushed during the copy, then those flushed after the swap, in
/// order; the swap synced everything written before it. Under `EveryBatch`, a batch flushed
/// while the final phase waits for a sync in progress is kept by the held syncer and
/// written to the new file. Under `EveryRecords`/`Never`, a sync started (`Log::start_sync`)
/// during the copy returns and is reported before the compaction completes (s25 follow-up,
/// P1; mutation: `start_sync` refusing for the whole compaction fails it, "no sync during
/// the copy"). Under the three policies. Mutation: with the s24 deferral of
/// every flush during the compaction it fails ("mark 2 never durable during the
/// compaction"); without the final phase's tail copy it fails (the records flushed during the
/// copy are lost with the old file).
#[test]
fn records_flushed_during_a_compaction_on_its_thread_follow_the_kept_ones_in_order() {
    let rs = records(&[60; 70], &[], false);
    let a = tmpfile("thread-appends.log");
    for policy in [
        FsyncPolicy::EveryBatch,
        FsyncPolicy::EveryRecords(1000),
        FsyncPolicy::Never,
    ] {
        let case = format!("{policy:?}");
        let batch = policy == FsyncPolicy::EveryBatch;
        let (mut l, syncer) = gated_with_40_durable(&a, policy, &rs, &case);
        let synced = l.synced_mark();
        let hold = l.gate_compaction();
        let (v, p) = point(&rs, 30);
        assert!(l.start_compact(v, p).unwrap(), "{case}");
        let mut on_disk = std::fs::metadata(&a).unwrap().len();
        // The copy phase: the writes go on to the old file.
        for (i, chunk) in rs[40..60].chunks(5).enumerate() {
            for r in chunk {
                l.append(r).unwrap();
            }
            let mark = 2 + i as u64;
            l.flush(mark).unwrap();
            if batch {
                syncer.send(true).unwrap();
            }
            durable_while_compacting(&mut l, mark, &case);
            let now = std::fs::metadata(&a).unwrap().len();
            assert!(now > on_disk, "{case}: mark {mark} not written");
            on_disk = now;
            if batch {
                assert_eq!(l.synced_mark(), Some(mark), "{case}");
            } else if i < 3 {
                assert_eq!(l.synced_mark(), synced, "{case}: synced by nothing yet");
            } else {
                // s25 follow-up (P1): a sync started during the copy runs (on the old
                // file) and is reported before the compaction completes.
                assert!(l.start_sync().unwrap(), "{case}: no sync during the copy");
                syncer.send(true).unwrap();
                let start = std::time::Instant::now();
                while l.synced_mark() != Some(mark) {
                    l.durable_mark().unwrap();
                    assert!(
                        start.elapsed().as_secs() < 10,
                        "{case}: the sync started during the copy never returned"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                assert!(l.compacting(), "{case}: the compaction completed");
            }
        }
        assert!(l.take_compacted().is_none(), "{case}: completed while held");
        if batch {
            // A sync in progress (held on its gate) as the final phase starts: the hold
            // waits for it, and the batch flushed meanwhile is kept by the held syncer.
            l.append(&rs[60]).unwrap();
            l.flush(6).unwrap();
            drop(hold);
            std::thread::sleep(std::time::Duration::from_millis(20));
            l.append(&rs[61]).unwrap();
            l.flush(7).unwrap();
            drop(syncer);
        } else {
            drop(hold);
            drop(syncer);
        }
        let done = compacted(&mut l).unwrap().unwrap();
        assert_eq!(done.base.position, rs[29].position, "{case}");
        let mark = if batch { 7 } else { 5 };
        if !batch {
            // The swap synced everything written before it: nothing is left to sync.
            assert_eq!(l.synced_mark(), Some(5), "{case}");
            assert!(!l.start_sync().unwrap(), "{case}: records left unsynced");
        }
        // After the swap: written to the new file.
        let from = if batch { 62 } else { 60 };
        for (i, r) in rs[from..].iter().enumerate() {
            l.append(r).unwrap();
            l.flush(mark + 1 + i as u64).unwrap();
        }
        let last = mark + (rs.len() - from) as u64;
        let start = std::time::Instant::now();
        while l.durable_mark().unwrap() != Some(last) {
            assert!(start.elapsed().as_secs() < 10, "{case}: never durable");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        l.sync().unwrap();
        drop(l);
        let (now, base) = read(&a);
        assert!(now[..] == rs[30..], "{case}: {} records", now.len());
        assert_eq!(base.map(|b| b.position), Some(rs[29].position), "{case}");
        // The rewritten index, and the entries written during the copy (moved): each points
        // at its record.
        let entries = log::decode_index(&std::fs::read(log::index_path(&a)).unwrap());
        let len = std::fs::metadata(&a).unwrap().len();
        for e in &entries {
            let mut file = std::fs::File::open(&a).unwrap();
            std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(e.offset)).unwrap();
            let mut r = log::Reader::at(file, len, e.offset, 4096, log::ReadMode::Verify);
            let r = r.next_record().unwrap().unwrap();
            assert_eq!(
                (r.view, r.seq, r.position),
                (e.view, e.seq, e.position),
                "{case}"
            );
        }
        assert!(
            entries
                .iter()
                .any(|e| (rs[40].position..rs[60].position).contains(&e.position)),
            "{case}: no entry of the records written during the copy"
        );
        let opts = LogOptions {
            index_every: 300,
            ..LogOptions::new(policy)
        };
        let (l, rec) = Log::open_with(&a, opts).unwrap();
        assert_eq!(
            rec.last.as_ref().map(header),
            rs.last().map(header),
            "{case}"
        );
        assert_eq!(rec.dropped_bytes, 0, "{case}");
        drop(l);
    }
    remove(&a);
}

/// s25 follow-up (R1): a compaction on its thread whose directory sync after the rename
/// fails (`Log::fail_compaction_dir_sync`). A power loss may then bring back the old file,
/// which lacks whatever is written to the new one: from the failure on, nothing more is
/// reported durable. Under `EveryBatch`, a batch is flushed while a sync is held at the
/// syncer's gate as the final phase starts (the hold waits for that sync) and another while
/// it waits (kept by the held syncer, written to the new file once released). Once the
/// outcome is the error, while the syncer runs freely: for 200 ms `durable_mark` and
/// `synced_mark` report nothing past the last mark synced to the old file; a flush is an
/// error; 200 ms more of the same; `durable_mark` and `sync` are errors. Under
/// `EveryRecords(1000)` the same without the held batches (a later flush would be reported
/// durable once written), and `start_sync` is an error. Mutation: without the sticky
/// failure (`Log::fail` a no-op), it fails ("EveryBatch: mark 4 reported durable after the
/// failure"; the `EveryRecords` case alone: "a flush after the failure").
#[test]
fn a_compaction_whose_directory_sync_fails_reports_nothing_more_durable() {
    let rs = records(&[60; 50], &[], false);
    let a = tmpfile("dir-sync-fails.log");
    for policy in [FsyncPolicy::EveryBatch, FsyncPolicy::EveryRecords(1000)] {
        let case = format!("{policy:?}");
        let batch = policy == FsyncPolicy::EveryBatch;
        let (mut l, syncer) = gated_with_40_durable(&a, policy, &rs, &case);
        l.fail_compaction_dir_sync();
        let hold = l.gate_compaction();
        let (v, p) = point(&rs, 30);
        assert!(l.start_compact(v, p).unwrap(), "{case}");
        // The copy: written to the old file and reported durable there (synced under
        // `EveryBatch`): sound whichever file a power loss leaves.
        for r in &rs[40..43] {
            l.append(r).unwrap();
        }
        l.flush(2).unwrap();
        if batch {
            syncer.send(true).unwrap();
        }
        durable_while_compacting(&mut l, 2, &case);
        let mut last = 2;
        if batch {
            l.append(&rs[43]).unwrap();
            l.flush(3).unwrap();
            drop(hold);
            std::thread::sleep(std::time::Duration::from_millis(20));
            l.append(&rs[44]).unwrap();
            // Kept by the held syncer; or, if the final phase completed first (its hold
            // before the syncer took request 3), adopted here and refused.
            let _ = l.flush(4);
            drop(syncer);
            // Sync 3 ran on the old file before the hold completed: it may be reported.
            last = 3;
        } else {
            drop(hold);
            drop(syncer);
        }
        assert!(
            compacted(&mut l).is_err(),
            "{case}: the failure not returned"
        );
        let synced = l.synced_mark();
        assert!(
            synced <= Some(last),
            "{case}: synced {synced:?} after the failure"
        );
        // The syncer runs freely: what it writes and syncs to the new file (the batch kept
        // during the hold) must not be reported.
        let reported = |l: &mut Log| {
            let start = std::time::Instant::now();
            while start.elapsed() < std::time::Duration::from_millis(200) {
                if let Ok(Some(mark)) = l.durable_mark() {
                    assert!(
                        mark <= last,
                        "{case}: mark {mark} reported durable after the failure"
                    );
                }
                assert!(
                    l.synced_mark() <= Some(last),
                    "{case}: synced after the failure"
                );
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        };
        reported(&mut l);
        l.append(&rs[45]).unwrap();
        assert!(l.flush(5).is_err(), "{case}: a flush after the failure");
        reported(&mut l);
        assert!(l.durable_mark().is_err(), "{case}: durable_mark");
        assert!(l.sync().is_err(), "{case}: sync");
        if !batch {
            assert!(l.start_sync().is_err(), "{case}: start_sync");
        }
        drop(l);
    }
    remove(&a);
}

/// s26: a compaction on its thread releases the writers right after its rename, before its
/// directory sync (held there by `Log::gate_compaction_dir_sync`), to the new file. Records
/// flushed then are written to the new file at once; under `EveryRecords(1000)` and `Never`
/// they are reported durable at once (a process crash finds the new file: the rename is
/// done) but not synced: a sync started then (`Log::start_sync`, passed at the syncer's
/// gate) returns on the new file and is not reported while the directory sync is pending,
/// nor does the adoption count them synced by the compaction's sync (it reports mark 1, the
/// last written to the old file); the sync reports them after the adoption. Under
/// `EveryBatch` the syncer writes and syncs the batch to the new file while the directory
/// sync is pending, and it is not reported durable until the compaction is adopted (a power
/// loss could still bring the old file back). Afterwards the log holds records 30–44 in
/// order. Mutations: the writers released only at the adoption (s25): fails
/// ("EveryBatch: the batch never written to the new file before the directory sync"; with
/// `EveryBatch` dropped, "EveryRecords(1000): not durable once written to the new file");
/// no fence on the syncer's reports (`Handoff::release_fenced` not setting it): fails
/// ("EveryBatch: mark 2 reported durable before the directory sync"). The adoption's
/// accounting is the next test's.
#[test]
fn the_writers_go_on_after_the_rename_but_nothing_is_reported_synced_before_the_directory_sync() {
    let rs = records(&[60; 50], &[], false);
    let a = tmpfile("released-at-rename.log");
    for policy in [
        FsyncPolicy::EveryBatch,
        FsyncPolicy::EveryRecords(1000),
        FsyncPolicy::Never,
    ] {
        let case = format!("{policy:?}");
        let batch = policy == FsyncPolicy::EveryBatch;
        let (mut l, syncer) = gated_with_40_durable(&a, policy, &rs, &case);
        let dir_sync = l.gate_compaction_dir_sync();
        let (v, p) = point(&rs, 30);
        assert!(l.start_compact(v, p).unwrap(), "{case}");
        // The thread renamed its file over the log and waits before the directory sync.
        let renamed = || std::fs::read(&a).unwrap().starts_with(log::MAGIC_COMPACTED);
        let start = std::time::Instant::now();
        while !renamed() {
            assert!(start.elapsed().as_secs() < 10, "{case}: never renamed");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let len = std::fs::metadata(&a).unwrap().len();
        for r in &rs[40..45] {
            l.append(r).unwrap();
        }
        l.flush(2).unwrap();
        let start = std::time::Instant::now();
        if batch {
            syncer.send(true).unwrap();
            // Written (and synced) to the new file by the released syncer…
            while std::fs::metadata(&a).unwrap().len() == len {
                assert!(
                    start.elapsed().as_secs() < 10,
                    "{case}: the batch never written to the new file before the directory sync"
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            // … but its sync is not reported while the directory sync is pending.
            while start.elapsed() < std::time::Duration::from_millis(100) {
                assert_eq!(
                    l.durable_mark().unwrap(),
                    Some(1),
                    "{case}: mark 2 reported durable before the directory sync"
                );
                assert_eq!(l.synced_mark(), Some(1), "{case}");
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        } else {
            assert_eq!(
                l.durable_mark().unwrap(),
                Some(2),
                "{case}: not durable once written to the new file"
            );
            assert!(
                std::fs::metadata(&a).unwrap().len() > len,
                "{case}: not written to the new file"
            );
            assert!(l.start_sync().unwrap(), "{case}: no sync started");
            syncer.send(true).unwrap();
            while start.elapsed() < std::time::Duration::from_millis(100) {
                l.durable_mark().unwrap();
                assert_eq!(
                    l.synced_mark(),
                    None,
                    "{case}: synced before the directory sync"
                );
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        assert!(l.compacting(), "{case}: the compaction completed");
        drop(dir_sync);
        let done = compacted(&mut l).unwrap().unwrap();
        assert_eq!(done.base.position, rs[29].position, "{case}");
        if batch {
            wait_durable(&mut l, 2, &case);
            assert_eq!(l.synced_mark(), Some(2), "{case}");
        } else {
            // The compaction's sync covers what was written to the old file (mark 1); the
            // sync started after the rename covers mark 2, reported now.
            let start = std::time::Instant::now();
            loop {
                l.durable_mark().unwrap();
                let synced = l.synced_mark();
                if synced == Some(2) {
                    break;
                }
                assert_eq!(synced, Some(1), "{case}: after the adoption");
                assert!(start.elapsed().as_secs() < 10, "{case}: never synced");
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        l.append(&rs[45]).unwrap();
        l.flush(3).unwrap();
        if batch {
            syncer.send(true).unwrap();
        }
        wait_durable(&mut l, 3, &case);
        drop(syncer);
        l.sync().unwrap();
        drop(l);
        let (got, base) = read(&a);
        assert_eq!(base.map(|b| b.position), Some(rs[29].position), "{case}");
        let want: Vec<_> = rs[30..46].iter().map(header).collect();
        assert_eq!(
            got.iter().map(header).collect::<Vec<_>>(),
            want,
            "{case}: the records in order"
        );
    }
    remove(&a);
}

/// s26: the adoption's accounting when the writers were released at the rename, under
/// `EveryRecords(1000)`: records written to the new file before the adoption and no sync
/// started for them stay unsynced after it (the compaction's sync covers mark 1 only), and
/// their index entries wait for a sync. Mutation: the adoption counting every record
/// flushed synced (the s25 rule) fails ("the records written to the new file counted
/// synced by the compaction").
#[test]
fn records_written_to_the_new_file_before_the_adoption_are_not_counted_synced_by_it() {
    let rs = records(&[60; 50], &[], false);
    let a = tmpfile("unsynced-at-adoption.log");
    let policy = FsyncPolicy::EveryRecords(1000);
    let case = format!("{policy:?}");
    let (mut l, syncer) = gated_with_40_durable(&a, policy, &rs, &case);
    let dir_sync = l.gate_compaction_dir_sync();
    let (v, p) = point(&rs, 30);
    assert!(l.start_compact(v, p).unwrap(), "{case}");
    let start = std::time::Instant::now();
    while !std::fs::read(&a).unwrap().starts_with(log::MAGIC_COMPACTED) {
        assert!(start.elapsed().as_secs() < 10, "{case}: never renamed");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    for r in &rs[40..45] {
        l.append(r).unwrap();
    }
    l.flush(2).unwrap();
    assert_eq!(l.durable_mark().unwrap(), Some(2), "{case}");
    drop(dir_sync);
    compacted(&mut l).unwrap().unwrap();
    assert_eq!(
        l.synced_mark(),
        Some(1),
        "{case}: the records written to the new file counted synced by the compaction"
    );
    assert!(l.start_sync().unwrap(), "{case}: nothing left to sync");
    syncer.send(true).unwrap();
    let start = std::time::Instant::now();
    while l.synced_mark() != Some(2) {
        l.durable_mark().unwrap();
        assert!(start.elapsed().as_secs() < 10, "{case}: never synced");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    drop(syncer);
    drop(l);
    let (got, _) = read(&a);
    assert_eq!(got.len(), 15, "{case}: records 30–44");
    remove(&a);
}

/// Polls `durable_mark` until it reports `mark` (up to 10 s).
/// A fresh log at `a` under `policy` (index entry every 300 bytes) with its syncer thread gated
/// (`Log::gate_syncer`, the sender returned), holding `rs[..40]` flushed under mark 1 and
/// durable (under `EveryBatch` the gate lets that one sync through).
fn gated_with_40_durable(
    a: &Path,
    policy: FsyncPolicy,
    rs: &[Record],
    case: &str,
) -> (Log, std::sync::mpsc::Sender<bool>) {
    remove(a);
    let opts = LogOptions {
        index_every: 300,
        ..LogOptions::new(policy)
    };
    let (mut l, _) = Log::open_with(a, opts).unwrap();
    let syncer = l.gate_syncer();
    for r in &rs[..40] {
        l.append(r).unwrap();
    }
    l.flush(1).unwrap();
    if policy == FsyncPolicy::EveryBatch {
        syncer.send(true).unwrap();
    }
    wait_durable(&mut l, 1, case);
    (l, syncer)
}

fn wait_durable(l: &mut Log, mark: u64, case: &str) {
    let start = std::time::Instant::now();
    while l.durable_mark().unwrap() != Some(mark) {
        assert!(start.elapsed().as_secs() < 10, "{case}: never durable");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// s24: the crash points of `a_compaction_crashed_at_any_point_leaves_the_old_or_the_new_log`
/// on the compaction's thread (`Log::start_compact_cut_at`): before the rename the old log is
/// left whole, after it the compacted one; the next open finds the uncompacted log's last
/// record, appends continue, and a compaction on the thread again completes the work.
/// s25: three records are flushed (and reported durable) while the thread is held after its
/// first copy; whichever file a crash point leaves holds them after the others.
/// Mutation: with the crash point not handed to the thread (`None`), it fails at once (the
/// compaction completes); without the final phase's tail copy it fails ("BeforeIndex …").
#[test]
fn a_compaction_on_its_thread_crashed_at_any_point_leaves_the_old_or_the_new_log() {
    let rs = records(
        &(0..60).map(|i| (i * 37) % 250).collect::<Vec<_>>(),
        &(0..60).map(|i| i == 25).collect::<Vec<_>>(),
        true,
    );
    let a = tmpfile("thread-crash.log");
    for crash in [
        CompactCrash::BeforeSync,
        CompactCrash::BeforeRename,
        CompactCrash::BeforeIndex,
        CompactCrash::MidIndex,
        CompactCrash::IndexBeforeRename,
    ] {
        for every in [1, 300] {
            for k in [1, 30, 60] {
                let case = format!("{crash:?} every {every} k {k}");
                remove(&a);
                append(&a, every, &rs);
                let (v, p) = point(&rs, k);
                let before = std::fs::read(&a).unwrap();
                let (mut l, _) = Log::open_with(&a, options(every)).unwrap();
                let hold = l.gate_compaction();
                assert!(l.start_compact_cut_at(v, p, crash).unwrap(), "{case}");
                let extra = more(rs.last().unwrap(), 3);
                for r in &extra {
                    l.append(r).unwrap();
                }
                l.flush(1).unwrap();
                wait_durable(&mut l, 1, &case);
                drop(hold);
                assert!(compacted(&mut l).unwrap().is_none(), "{case}");
                drop(l);
                let renamed = matches!(
                    crash,
                    CompactCrash::BeforeIndex
                        | CompactCrash::MidIndex
                        | CompactCrash::IndexBeforeRename
                );
                assert_eq!(log::compact_tmp_path(&a).exists(), !renamed, "{case}");
                let (now, _) = read(&a);
                if renamed {
                    assert!(now[..] == [&rs[k..], &extra[..]].concat()[..], "{case}");
                } else {
                    let old = std::fs::read(&a).unwrap();
                    assert_eq!(&old[..before.len()], &before[..], "{case}: rewritten");
                    assert!(now[..] == [&rs[..], &extra[..]].concat()[..], "{case}");
                }
                let (la, ra) = Log::open_with(&a, options(every)).unwrap();
                assert_eq!(
                    ra.last.as_ref().map(header),
                    extra.last().map(header),
                    "{case}"
                );
                drop(la);
                let later = more(extra.last().unwrap(), 4);
                append(&a, every, &later);
                let (mut l, _) = Log::open_with(&a, options(every)).unwrap();
                assert!(l.start_compact(v, p).unwrap(), "{case}");
                let again = compacted(&mut l).unwrap();
                assert_eq!(again.is_some(), !renamed, "{case}");
                drop(l);
                let (now, base) = read(&a);
                assert_eq!(
                    &now[..],
                    &[&rs[k..], &extra[..], &later[..]].concat()[..],
                    "{case}"
                );
                assert!(base.is_some(), "{case}");
            }
        }
    }
    remove(&a);
}
