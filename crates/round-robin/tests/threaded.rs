//! Real concurrency: members on their own threads over the threaded mem fabric (shared memory,
//! real races), every member a sender, mixed inline and large messages, in every mode that
//! orders: identical sequences everywhere, and in unordered mode FIFO per sender.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use squall_ordering::{SubmitError, TotalOrder, Upcall};
use squall_round_robin::{Config, Mode, Relay, RoundRobin};
use squall_transport::NodeId;
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric, ThreadedNode};

fn run(n: usize, per: u64, mode: impl Fn(usize) -> Mode) -> Vec<Vec<(u32, u64)>> {
    run_relay(n, per, Relay::Tree, mode)
}

fn run_relay(
    n: usize,
    per: u64,
    relay: Relay,
    mode: impl Fn(usize) -> Mode,
) -> Vec<Vec<(u32, u64)>> {
    let cfg = Config {
        mode: mode(0),
        relay,
        window: 4,
        slot_size: 64,
        max_payload: 4096,
        chunk_size: 512,
        heartbeat_interval: Duration::from_millis(20),
        suspicion_timeout: Duration::from_secs(20),
        ..Config::new((0..n as u32).map(NodeId).collect())
    };
    let layout = RoundRobin::<ThreadedNode>::layout(&cfg).expect("layout");
    let nodes = ThreadedFabric::new(ThreadedConfig::default())
        .and_then(|f| f.cluster(n, &layout))
        .expect("cluster");
    let finished = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = nodes
        .into_iter()
        .enumerate()
        .map(|(i, node)| {
            let cfg = Config {
                mode: mode(i),
                ..cfg.clone()
            };
            let finished = finished.clone();
            std::thread::spawn(move || {
                let mut rr = RoundRobin::new(node, cfg).expect("group");
                let me = rr.me().0;
                let (mut sent, mut seq, mut upcalls) = (0u64, Vec::new(), Vec::new());
                let start = Instant::now();
                let mut done = false;
                loop {
                    if sent < per {
                        let len = if sent % 4 == 3 {
                            100 + (sent as usize * 37) % 3900
                        } else {
                            20 + sent as usize % 40
                        };
                        match rr.submit(&common::encode(me, sent, len)) {
                            Ok(()) => sent += 1,
                            Err(SubmitError::WindowFull) => {}
                            Err(e) => panic!("n{me}: {e}"),
                        }
                    }
                    let busy = rr.poll(&mut upcalls);
                    for u in upcalls.drain(..) {
                        match u {
                            Upcall::Deliver(d) => {
                                let m = common::check(&d.payload).expect("genuine");
                                assert_eq!(NodeId(m.0), d.sender);
                                seq.push(m);
                            }
                            Upcall::Durable(_) => {}
                            other => panic!("n{me}: unexpected {other:?}"),
                        }
                    }
                    if !done && seq.len() as u64 == per * n as u64 {
                        done = true;
                        finished.fetch_add(1, Ordering::AcqRel);
                    }
                    if done && finished.load(Ordering::Acquire) == n {
                        return seq;
                    }
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "n{me} hung at {}",
                        seq.len()
                    );
                    if !busy {
                        rr.wait(Duration::from_micros(100));
                    }
                }
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("member"))
        .collect()
}

#[test]
fn threaded_atomic_identical_sequences() {
    for n in [2, 4] {
        let seqs = run(n, 200, |_| Mode::Atomic);
        assert!(
            seqs.iter().all(|s| *s == seqs[0]),
            "sequences differ with {n} members"
        );
    }
}

/// RDMC's binomial pipeline under real races: 4 members on their own threads, every fourth
/// message up to 8 chunks, every member relaying chunks from several peers at once.
#[test]
fn threaded_binomial_pipeline_identical_sequences() {
    let seqs = run_relay(4, 200, Relay::BinomialPipeline, |_| Mode::Atomic);
    assert!(seqs.iter().all(|s| *s == seqs[0]), "sequences differ");
    assert_eq!(seqs[0].len(), 800);
}

/// The binomial pipeline with twin vertices under real races: 6 members (a hypercube of 4,
/// vertices 1 and 2 with twins 4 and 5) on their own threads.
#[test]
fn threaded_binomial_pipeline_with_twins_identical_sequences() {
    let seqs = run_relay(6, 100, Relay::BinomialPipeline, |_| Mode::Atomic);
    assert!(seqs.iter().all(|s| *s == seqs[0]), "sequences differ");
    assert_eq!(seqs[0].len(), 600);
}

#[test]
fn threaded_unordered_fifo_per_sender() {
    let seqs = run(3, 200, |_| Mode::Unordered);
    for s in &seqs {
        for sender in 0..3u32 {
            let got: Vec<u64> = s.iter().filter(|m| m.0 == sender).map(|m| m.1).collect();
            assert_eq!(got, (0..200).collect::<Vec<_>>());
        }
    }
}

#[test]
fn threaded_durable_identical_sequences_and_logs() {
    let dir = std::env::temp_dir().join(format!("squall-rr-threaded-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let path = |i: usize| dir.join(format!("n{i}.log"));
    let seqs = run(3, 100, |i| Mode::Durable {
        path: path(i),
        fsync: squall_round_robin::FsyncPolicy::EveryBatch,
    });
    for (i, seq) in seqs.iter().enumerate() {
        assert_eq!(*seq, seqs[0], "n{i}'s sequence differs");
        squall_round_robin::log::Log::open(&path(i), squall_round_robin::FsyncPolicy::Never)
            .expect("log");
        let bytes = std::fs::read(path(i)).expect("read");
        let logged: Vec<(u32, u64)> = squall_round_robin::log::decode(&bytes)
            .records
            .iter()
            .map(|r| common::check(&r.payload).expect("genuine"))
            .collect();
        assert_eq!(logged, *seq, "n{i}'s log differs from its deliveries");
    }
    std::fs::remove_dir_all(&dir).ok();
}
