//! The figure of the log's syncer thread (issue 6): a durable group (`FsyncPolicy::EveryBatch`)
//! on the threaded mem fabric, every member on its own driver thread (parking in
//! `Transport::wait` when idle), run with the `fdatasync`s inline in the poll
//! (`SyncMode::Inline`, the behaviour before the syncer thread: the baseline) and on the
//! syncer thread (`SyncMode::Thread`, the default), alternating in the same run. Reports per
//! run the messages delivered per second and the longest single `poll` of any member, then
//! the ratios of the medians (thread / inline).
//!
//! Skipped unless `SQUALL_RR_SYNC_BENCH=<messages per sender>` is set (a measurement, not a
//! check: it asserts only that every run delivered everything); `SQUALL_RR_SYNC_BENCH_ROUNDS`
//! (default 3) pairs of runs, `SQUALL_RR_SYNC_BENCH_MEMBERS` (default 3) members, payloads of
//! `SQUALL_RR_SYNC_BENCH_SIZE` bytes (default 256). The logs go to the temp directory (its
//! file system decides what an `fdatasync` costs: tmpfs makes it free).
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use squall_ordering::{SubmitError, TotalOrder, Upcall};
use squall_round_robin::{Config, FsyncPolicy, Mode, RoundRobin, SyncMode};
use squall_transport::NodeId;
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric, ThreadedNode};

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// What one run measured.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// Messages delivered per second (the slowest member's).
    rate: f64,
    /// The longest single poll of any member.
    longest: Duration,
    /// Polls of any member that took over 1 ms and over 5 ms.
    over_1ms: usize,
    over_5ms: usize,
    /// Polls in all.
    polls: usize,
    /// Log batches and syncer syncs, summed over the members.
    batches: u64,
    syncs: u64,
}

fn run(mode: SyncMode, n: usize, per_sender: u64, size: usize, tag: &str) -> Run {
    let dir =
        std::env::temp_dir().join(format!("squall-rr-sync-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let base = Config {
        window: 32,
        slot_size: 1024,
        max_payload: 1024,
        chunk_size: 1024,
        log_sync: mode,
        // A loaded machine must not fail a live member.
        heartbeat_interval: Duration::from_millis(50),
        suspicion_timeout: Duration::from_secs(30),
        ..Config::new((0..n as u32).map(NodeId).collect())
    };
    let layout = RoundRobin::<ThreadedNode>::layout(&base).unwrap();
    let nodes = ThreadedFabric::new(ThreadedConfig::default())
        .and_then(|f| f.cluster(n, &layout))
        .unwrap();
    let total = per_sender * n as u64;
    let start = Arc::new(Barrier::new(n));
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let handles: Vec<_> = nodes
        .into_iter()
        .enumerate()
        .map(|(i, node)| {
            let cfg = Config {
                mode: Mode::Durable {
                    path: dir.join(format!("n{i}.log")),
                    fsync: FsyncPolicy::EveryBatch,
                },
                ..base.clone()
            };
            let (start, done) = (start.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rr = RoundRobin::new(node, cfg).unwrap();
                let payload = vec![0x5a; size];
                let mut up = Vec::new();
                let (mut sent, mut got) = (0u64, 0u64);
                let mut longest = Duration::ZERO;
                let (mut over_1ms, mut over_5ms, mut polls) = (0usize, 0usize, 0usize);
                let mut elapsed = None;
                start.wait();
                let t0 = Instant::now();
                loop {
                    while sent < per_sender {
                        match rr.submit(&payload) {
                            Ok(()) => sent += 1,
                            Err(SubmitError::WindowFull) => break,
                            Err(e) => panic!("submit: {e}"),
                        }
                    }
                    let t = Instant::now();
                    let busy = rr.poll(&mut up);
                    let took = t.elapsed();
                    longest = longest.max(took);
                    polls += 1;
                    over_1ms += usize::from(took > Duration::from_millis(1));
                    over_5ms += usize::from(took > Duration::from_millis(5));
                    for u in up.drain(..) {
                        match u {
                            Upcall::Deliver(_) => got += 1,
                            Upcall::Durable(_) => {}
                            other => panic!("unexpected {other:?}"),
                        }
                    }
                    if got == total && elapsed.is_none() {
                        elapsed = Some(t0.elapsed());
                        done.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                    }
                    if elapsed.is_some() && done.load(std::sync::atomic::Ordering::Acquire) == n {
                        break;
                    }
                    if !busy {
                        rr.wait(Duration::from_millis(1));
                    }
                }
                let s = rr.stats();
                (
                    elapsed.unwrap_or_default(),
                    longest,
                    s.log_batches,
                    s.log_syncs,
                    (over_1ms, over_5ms, polls),
                )
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    std::fs::remove_dir_all(&dir).ok();
    let slowest = results.iter().map(|r| r.0).max().unwrap_or_default();
    Run {
        rate: total as f64 / slowest.as_secs_f64().max(1e-9),
        longest: results.iter().map(|r| r.1).max().unwrap_or_default(),
        over_1ms: results.iter().map(|r| r.4.0).sum(),
        over_5ms: results.iter().map(|r| r.4.1).sum(),
        polls: results.iter().map(|r| r.4.2).sum(),
        batches: results.iter().map(|r| r.2).sum(),
        syncs: results.iter().map(|r| r.3).sum(),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn durable_poll_turns_inline_vs_syncer_thread() {
    let Some(per_sender) = env("SQUALL_RR_SYNC_BENCH") else {
        eprintln!("skipped: set SQUALL_RR_SYNC_BENCH=<messages per sender> to measure");
        return;
    };
    let rounds = env("SQUALL_RR_SYNC_BENCH_ROUNDS").unwrap_or(3).max(1);
    let n = env("SQUALL_RR_SYNC_BENCH_MEMBERS").unwrap_or(3).max(1) as usize;
    let size = env("SQUALL_RR_SYNC_BENCH_SIZE")
        .unwrap_or(256)
        .clamp(1, 1024) as usize;
    let mut inline = Vec::new();
    let mut thread = Vec::new();
    for r in 0..rounds {
        for (mode, out) in [
            (SyncMode::Inline, &mut inline),
            (SyncMode::Thread, &mut thread),
        ] {
            let m = run(mode, n, per_sender, size, &format!("{mode:?}-{r}"));
            eprintln!(
                "SYNC-BENCH {mode:?} round {r}: {n} members, {per_sender} x {size} B per sender: {:.0} msg/s, longest poll {:.2} ms, polls over 1 ms / over 5 ms / all: {} / {} / {}, {} log batches, {} syncer syncs",
                m.rate,
                m.longest.as_secs_f64() * 1e3,
                m.over_1ms,
                m.over_5ms,
                m.polls,
                m.batches,
                m.syncs
            );
            out.push(m);
        }
    }
    let rate = |v: &[Run]| median(v.iter().map(|m| m.rate).collect());
    let longest = |v: &[Run]| median(v.iter().map(|m| m.longest.as_secs_f64() * 1e3).collect());
    let over = |v: &[Run]| median(v.iter().map(|m| m.over_1ms as f64).collect());
    eprintln!(
        "SYNC-BENCH medians: inline {:.0} msg/s, longest poll {:.2} ms, {:.0} polls over 1 ms; syncer thread {:.0} msg/s, longest poll {:.2} ms, {:.0} polls over 1 ms; thread / inline: throughput {:.2}, longest poll {:.3}, polls over 1 ms {:.3}",
        rate(&inline),
        longest(&inline),
        over(&inline),
        rate(&thread),
        longest(&thread),
        over(&thread),
        rate(&thread) / rate(&inline),
        longest(&thread) / longest(&inline),
        over(&thread) / over(&inline).max(1.0)
    );
}
