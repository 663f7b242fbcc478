//! Durable mode: every member's log holds exactly its delivered sequence; after a crash the
//! crashed member's log (reopened as on restart) is a prefix of the agreed order, and every
//! position reported durable anywhere is in every member's log, the crashed one's included.
//! Torn and corrupt tails are detected and truncated; a file that is not a log is refused.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{Group, check, durable, sim_config};
use proptest::prelude::*;
use squall_ordering::SubmitError;
use squall_round_robin::log::{self, FsyncPolicy, Log, LogError, Record, TailError};
use squall_round_robin::{Config, Mode, RoundRobin};
use squall_transport::{NodeId, Time};
use squall_transport_mem::sim::check_seeds;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("squall-rr-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn read_log(path: &std::path::Path) -> Vec<(u32, u64)> {
    let (_, rec) = Log::open(path, FsyncPolicy::Never).expect("log opens");
    rec.records
        .iter()
        .map(|r| check(&r.payload).expect("logged payload is a genuine message"))
        .collect()
}

fn is_prefix(a: &[(u32, u64)], b: &[(u32, u64)]) -> bool {
    a.len() <= b.len() && b[..a.len()] == *a
}

/// Runs a durable group of `n` with every member sending `per_sender` messages; crashes
/// `crash` at its round. Checks the logs against the deliveries.
fn run(seed: u64, n: usize, per_sender: u64, crash: Option<(usize, u64)>) -> Result<(), String> {
    let dir = tmpdir(&format!("sim-{seed}"));
    let paths: Vec<PathBuf> = (0..n).map(|i| dir.join(format!("n{i}.log"))).collect();
    let base = Config {
        window: 3,
        slot_size: 48,
        max_payload: 160,
        chunk_size: 32,
        ..sim_config(n)
    };
    let cfgs = paths
        .iter()
        .map(|p| durable(base.clone(), p.clone()))
        .collect();
    let mut g = Group::new(seed, cfgs);
    let mut sent = vec![0u64; n];
    let total = per_sender * n as u64;
    let deadline = Time::ZERO + Duration::from_secs(2);
    let mut round = 0;
    loop {
        round += 1;
        if let Some((victim, at)) = crash
            && at == round
        {
            g.crash(victim);
        }
        for i in g.turns() {
            if sent[i] < per_sender && g.sim.random(2) == 0 {
                let len = 20 + g.sim.random(140) as usize;
                match g.submit(i, sent[i], len) {
                    Ok(()) => sent[i] += 1,
                    Err(SubmitError::WindowFull | SubmitError::Wedged) => {}
                    Err(e) => return Err(format!("submit: {e}")),
                }
            }
            g.poll(i)?;
        }
        let live: Vec<usize> = (0..n).filter(|&i| g.is_live(i)).collect();
        let done = match crash {
            Some((_, at)) => round >= at && live.iter().all(|&i| g.wedged[i]),
            None => live
                .iter()
                .all(|&i| g.next_position[i] == total && g.durable[i] == Some(total - 1)),
        };
        if done {
            break;
        }
        if g.sim.now() > deadline {
            return Err(format!(
                "hung: delivered {:?} durable {:?} wedged {:?}",
                g.next_position, g.durable, g.wedged
            ));
        }
        g.step_fabric();
    }
    g.check_history(&[]).map_err(|e| e.to_string())?;
    // Drop the live nodes (closing their logs) and reopen every log, as a restart would.
    let wedged = g.wedged.clone();
    let delivered = g.delivered.clone();
    let durable_at = g.durable.clone();
    drop(g);
    let logs: Vec<Vec<(u32, u64)>> = paths.iter().map(|p| read_log(p)).collect();
    let longest = logs
        .iter()
        .max_by_key(|l| l.len())
        .cloned()
        .unwrap_or_default();
    for i in 0..n {
        if crash.is_some_and(|(v, _)| v == i) {
            // The crashed member's log: a prefix of the agreed order, and it holds what it
            // delivered (fsync policy Never still writes each batch before counting it).
            if !is_prefix(&logs[i], &longest) {
                return Err(format!(
                    "crashed n{i}'s log is not a prefix of the agreed order"
                ));
            }
            if !is_prefix(&logs[i], &delivered[i]) || logs[i].len() != delivered[i].len() {
                return Err(format!(
                    "crashed n{i}: log has {} records, delivered {}",
                    logs[i].len(),
                    delivered[i].len()
                ));
            }
        } else {
            if logs[i] != delivered[i] {
                return Err(format!("n{i}'s log differs from its deliveries"));
            }
            if crash.is_none() && !wedged[i] && logs[i].len() as u64 != total {
                return Err(format!("n{i} logged {} of {total}", logs[i].len()));
            }
        }
        if !is_prefix(&logs[i], &longest) {
            return Err(format!("n{i}'s log is not a prefix of the longest log"));
        }
    }
    // Durable means in every member's log, the crashed member's included.
    for (i, d) in durable_at.iter().enumerate() {
        if let Some(p) = d
            && let Some(short) = logs.iter().position(|l| (l.len() as u64) <= *p)
        {
            return Err(format!(
                "n{i} reported {p} durable but n{short}'s log has {}",
                logs[short].len()
            ));
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

#[test]
fn durable_logs_match_deliveries_seed_sweep() {
    check_seeds("durable_logs_match_deliveries_seed_sweep", 30, |seed| {
        run(seed, 2 + (seed % 3) as usize, 15, None)
    });
}

#[test]
fn durable_crash_leaves_a_prefix_of_the_agreed_order_seed_sweep() {
    check_seeds(
        "durable_crash_leaves_a_prefix_of_the_agreed_order_seed_sweep",
        30,
        |seed| {
            let n = 3 + (seed % 2) as usize;
            run(
                seed,
                n,
                30,
                Some(((seed % n as u64) as usize, 100 + seed * 53 % 900)),
            )
        },
    );
}

fn sample(n: u64) -> Vec<Record> {
    (0..n)
        .map(|i| Record {
            view: 1,
            seq: i * 3,
            position: i,
            sender: NodeId((i % 3) as u32),
            payload: vec![i as u8; 10 + i as usize],
        })
        .collect()
}

fn write_log(path: &std::path::Path, records: &[Record]) {
    let _ = std::fs::remove_file(path);
    let (mut l, rec) = Log::open(path, FsyncPolicy::EveryBatch).expect("open");
    assert!(rec.records.is_empty());
    for r in records {
        l.append(r).expect("append");
    }
    l.sync().expect("sync");
}

#[test]
fn torn_tail_is_truncated_to_the_last_whole_record() {
    let dir = tmpdir("torn");
    let path = dir.join("log");
    let records = sample(5);
    write_log(&path, &records);
    let len = std::fs::metadata(&path).expect("meta").len();
    // Tear the last record: drop its last 3 bytes, as a crash mid-append would.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    f.set_len(len - 3).expect("truncate");
    drop(f);
    let (_, rec) = Log::open(&path, FsyncPolicy::Never).expect("reopen");
    assert_eq!(rec.records, records[..4]);
    assert!(
        matches!(rec.truncated, Some(TailError::Torn { .. })),
        "{:?}",
        rec.truncated
    );
    assert!(
        rec.truncated
            .as_ref()
            .expect("torn")
            .to_string()
            .contains("torn record")
    );
    let last_len = (log::FRAME + log::BODY_HEADER + records[4].payload.len()) as u64;
    assert_eq!(rec.dropped_bytes, last_len - 3);
    assert_eq!(
        std::fs::metadata(&path).expect("meta").len(),
        len - last_len
    );
    // Reopening again finds a clean log, and appends continue after the prefix.
    let (mut l, rec) = Log::open(&path, FsyncPolicy::Never).expect("reopen");
    assert_eq!(rec.truncated, None);
    l.append(&records[4]).expect("append");
    l.sync().expect("sync");
    drop(l);
    let (_, rec) = Log::open(&path, FsyncPolicy::Never).expect("reopen");
    assert_eq!(rec.records, records);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn corrupt_record_is_detected_and_everything_from_it_dropped() {
    let dir = tmpdir("corrupt");
    let path = dir.join("log");
    let records = sample(6);
    write_log(&path, &records);
    let mut bytes = std::fs::read(&path).expect("read");
    // Flip one payload bit in the third record.
    let third = log::MAGIC.len()
        + (0..2)
            .map(|i| log::FRAME + log::BODY_HEADER + records[i].payload.len())
            .sum::<usize>();
    bytes[third + log::FRAME + log::BODY_HEADER + 2] ^= 0x10;
    std::fs::write(&path, &bytes).expect("write");
    let (_, rec) = Log::open(&path, FsyncPolicy::Never).expect("reopen");
    assert_eq!(rec.records, records[..2]);
    match &rec.truncated {
        Some(e @ TailError::Checksum { offset, .. }) => {
            assert_eq!(*offset, third);
            assert!(e.to_string().contains("corrupt record"));
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
    assert_eq!(
        std::fs::metadata(&path).expect("meta").len() as usize,
        third
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn garbage_length_tail_is_truncated() {
    let dir = tmpdir("garbage");
    let path = dir.join("log");
    let records = sample(2);
    write_log(&path, &records);
    let mut bytes = std::fs::read(&path).expect("read");
    let good = bytes.len();
    bytes.extend_from_slice(&[0xff; 12]);
    std::fs::write(&path, &bytes).expect("write");
    let (_, rec) = Log::open(&path, FsyncPolicy::Never).expect("reopen");
    assert_eq!(rec.records, records);
    assert!(matches!(rec.truncated, Some(TailError::Length { .. })));
    assert_eq!(std::fs::metadata(&path).expect("meta").len() as usize, good);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_file_that_is_not_a_log_is_refused_and_left_alone() {
    let dir = tmpdir("notalog");
    let path = dir.join("log");
    std::fs::write(&path, b"precious user data").expect("write");
    match Log::open(&path, FsyncPolicy::Never) {
        Err(e @ LogError::NotALog { .. }) => assert!(e.to_string().contains("not a squall")),
        other => panic!("expected NotALog, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).expect("read"), b"precious user data");
    // A torn header (a crash while creating the log) is repaired.
    std::fs::write(&path, &log::MAGIC[..3]).expect("write");
    let (_, rec) = Log::open(&path, FsyncPolicy::Never).expect("torn header repaired");
    assert!(rec.records.is_empty());
    assert_eq!(std::fs::read(&path).expect("read"), log::MAGIC);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn restarted_member_reports_what_its_log_held() {
    let dir = tmpdir("restart");
    let path = dir.join("log");
    write_log(&path, &sample(3));
    let cfg = Config {
        mode: Mode::Durable {
            path: path.clone(),
            fsync: FsyncPolicy::EveryRecords(4),
        },
        ..sim_config(1)
    };
    let layout = RoundRobin::<squall_transport_mem::sim::SimNode>::layout(&cfg).expect("layout");
    let (_sim, mut nodes) = squall_transport_mem::sim::Sim::cluster(
        squall_transport_mem::sim::SimConfig::seeded(1),
        1,
        &layout,
    )
    .expect("sim");
    let mut rr = RoundRobin::new(nodes.remove(0), cfg).expect("group");
    let rec = rr.recovered().expect("durable mode recovers");
    assert_eq!(rec.records, sample(3));
    assert!(rr.recovered().is_none());
    std::fs::remove_dir_all(&dir).ok();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(squall_transport_mem::sim::proptest_cases(512)))]

    /// The decoder never panics on arbitrary bytes, and what it keeps decodes again cleanly.
    #[test]
    fn decoder_survives_random_bytes(mut bytes in proptest::collection::vec(any::<u8>(), 0..512), magic in any::<bool>()) {
        if magic {
            let mut b = log::MAGIC.to_vec();
            b.extend_from_slice(&bytes);
            bytes = b;
        }
        let d = log::decode(&bytes);
        prop_assert!(d.valid_len <= bytes.len());
        let again = log::decode(&bytes[..d.valid_len]);
        prop_assert_eq!(&again.records, &d.records);
        prop_assert_eq!(again.tail, None);
    }

    /// Any single corrupted byte of a valid log leaves a strict prefix of its records (CRC-32
    /// detects every single-byte error), never a changed record.
    #[test]
    fn one_corrupt_byte_leaves_a_prefix(n in 1u64..8, at in any::<prop::sample::Index>(), x in 1u8..=255) {
        let records = sample(n);
        let mut bytes = log::MAGIC.to_vec();
        for r in &records {
            log::encode_record(r, &mut bytes);
        }
        let i = log::MAGIC.len() + at.index(bytes.len() - log::MAGIC.len());
        bytes[i] ^= x;
        let d = log::decode(&bytes);
        prop_assert!(d.records.len() < records.len());
        prop_assert_eq!(&d.records[..], &records[..d.records.len()]);
        prop_assert!(d.tail.is_some());
    }
}
