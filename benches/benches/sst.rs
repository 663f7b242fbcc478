//! The SST on the threaded mem fabric: predicate evaluations per second with 10 and 100
//! registered predicates, and SMC messages per second for 64 B and 1 KiB among 3 members, each
//! beside the raw transport write rate (one posted write to each of the two peers per message,
//! the least any multicast over one-sided writes can do) measured in the same run.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use squall_benches::REGION;
use squall_sst::{PredicateKind, SchemaBuilder, Smc, SmcConfig, SmcError, Sst, SstConfig};
use squall_transport::{LocalSlice, NodeId, RegionSpec, RemoteAddr, Signal, Transport};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric, ThreadedNode};

fn cluster(n: usize, len: usize) -> Vec<ThreadedNode> {
    ThreadedFabric::new(ThreadedConfig::default())
        .and_then(|f| f.cluster(n, &[RegionSpec::new(REGION, len)]))
        .expect("a valid benchmark cluster")
}

fn predicates(c: &mut Criterion) {
    let mut g = c.benchmark_group("sst_predicate_evaluations");
    for count in [10usize, 100] {
        let mut b = SchemaBuilder::new(3);
        let ctr = b.counter("c");
        let flag = b.flag("f");
        let schema = b.build().expect("valid schema");
        let mut nodes = cluster(3, schema.table_len());
        let node = nodes.remove(0);
        // The other members never poll here; keep the detector from suspecting them.
        let cfg = SstConfig {
            suspicion_timeout: Duration::from_secs(3600),
            ..SstConfig::all(REGION, &node)
        };
        let mut sst = Sst::new(node, schema, cfg).expect("valid table");
        // A mix of shapes: per-row counters, flags, reducers and knowledge; none ever holds, so
        // every round evaluates all of them.
        for k in 0..count as u64 {
            let row = (k % 3) as usize;
            match k % 4 {
                0 => sst.insert(
                    PredicateKind::Recurrent,
                    move |s| s.get(row, ctr) > 1_000 + k,
                    |_| {},
                ),
                1 => sst.insert(
                    PredicateKind::Transition,
                    move |s| s.flag(row, flag),
                    |_| {},
                ),
                2 => sst.insert(
                    PredicateKind::OneTime,
                    move |s| s.min_unsuspected(ctr) > k,
                    |_| {},
                ),
                _ => sst.insert(
                    PredicateKind::OneTime,
                    move |s| s.all_reached(ctr, k + 1),
                    |_| {},
                ),
            };
        }
        g.throughput(Throughput::Elements(count as u64));
        g.bench_with_input(BenchmarkId::new("poll_once", count), &count, |b, _| {
            b.iter(|| black_box(sst.poll_once().expect("no failures")))
        });
        drop(nodes);
    }
    g.finish();
}

/// Member 0 multicasts `msgs` messages of `size` bytes; returns the time until members 1 and 2
/// have both delivered them all.
fn smc_run(size: usize, msgs: u64) -> Duration {
    smc_run_on(size, msgs, cluster)
}

/// SMC from member 0 to two receivers, each member on its own thread, over any fabric.
fn smc_run_on<T: Transport + Send + 'static>(
    size: usize,
    msgs: u64,
    make: impl FnOnce(usize, usize) -> Vec<T>,
) -> Duration {
    const N: usize = 3;
    let mut b = SchemaBuilder::new(N);
    let fields = Smc::declare(
        &mut b,
        SmcConfig {
            window: 64,
            slot_size: size,
        },
    )
    .expect("valid smc");
    let schema = b.build().expect("valid schema");
    let mut nodes = make(N, schema.table_len());
    let members = vec![NodeId(0), NodeId(1), NodeId(2)];
    let ready = Arc::new(Barrier::new(N));
    let stop = Arc::new(AtomicBool::new(false));
    let got: Arc<Vec<AtomicU64>> = Arc::new((0..N).map(|_| AtomicU64::new(0)).collect());
    let receivers: Vec<_> = nodes
        .drain(1..)
        .map(|node| {
            let (schema, members) = (schema.clone(), members.clone());
            let (ready, stop, got) = (ready.clone(), stop.clone(), got.clone());
            std::thread::spawn(move || {
                let me = node.local_id().index();
                let mut sst =
                    Sst::new(node, schema, SstConfig::new(REGION, members)).expect("table");
                let mut smc = Smc::new(fields, &mut sst);
                ready.wait();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let _ = sst.poll_once();
                    let k = smc
                        .poll(&mut sst, |_, _, m| {
                            black_box(m);
                        })
                        .expect("smc") as u64;
                    n += k;
                    got[me].store(smc.delivered(0), Ordering::Release);
                    if k == 0 {
                        // Three busy threads may share fewer cores: let the others run.
                        std::thread::yield_now();
                    }
                }
                black_box(n);
            })
        })
        .collect();
    let node = nodes.remove(0);
    let mut sst = Sst::new(node, schema, SstConfig::new(REGION, members)).expect("table");
    let mut smc = Smc::new(fields, &mut sst);
    let payload = vec![7u8; size];
    ready.wait();
    let start = Instant::now();
    let mut sent = 0;
    loop {
        while sent < msgs {
            match smc.send(&mut sst, &payload) {
                Ok(_) => sent += 1,
                Err(SmcError::WindowFull { .. }) => break,
                Err(e) => panic!("send: {e}"),
            }
        }
        smc.poll(&mut sst, |_, _, m| {
            black_box(m);
        })
        .expect("smc");
        let _ = sst.poll_once();
        if sent == msgs || smc.in_flight(&sst) >= 64 {
            std::thread::yield_now();
        }
        if got[1].load(Ordering::Acquire) >= msgs && got[2].load(Ordering::Acquire) >= msgs {
            break;
        }
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for r in receivers {
        let _ = r.join();
    }
    elapsed
}

/// The same multicast with all three members driven round-robin by one thread: the protocol's
/// CPU cost without thread scheduling (stable on a loaded machine).
fn smc_one_thread(size: usize, msgs: u64) -> Duration {
    const N: usize = 3;
    let mut b = SchemaBuilder::new(N);
    let fields = Smc::declare(
        &mut b,
        SmcConfig {
            window: 64,
            slot_size: size,
        },
    )
    .expect("valid smc");
    let schema = b.build().expect("valid schema");
    let members = vec![NodeId(0), NodeId(1), NodeId(2)];
    let mut t: Vec<Sst<ThreadedNode>> = cluster(N, schema.table_len())
        .into_iter()
        .map(|n| {
            Sst::new(n, schema.clone(), SstConfig::new(REGION, members.clone())).expect("table")
        })
        .collect();
    let mut smc: Vec<Smc> = t.iter_mut().map(|s| Smc::new(fields, s)).collect();
    let payload = vec![7u8; size];
    let start = Instant::now();
    let mut sent = 0;
    while smc[1].delivered(0) < msgs || smc[2].delivered(0) < msgs {
        while sent < msgs {
            match smc[0].send(&mut t[0], &payload) {
                Ok(_) => sent += 1,
                Err(SmcError::WindowFull { .. }) => break,
                Err(e) => panic!("send: {e}"),
            }
        }
        for i in 0..N {
            let _ = t[i].poll_once();
            smc[i]
                .poll(&mut t[i], |_, _, m| {
                    black_box(m);
                })
                .expect("smc");
        }
    }
    start.elapsed()
}

fn smc(c: &mut Criterion) {
    let mut g = c.benchmark_group("smc_3_members");
    g.throughput(Throughput::Elements(1));
    for size in [64usize, 1024] {
        g.bench_with_input(
            BenchmarkId::new("smc_multicast", size),
            &size,
            |b, &size| b.iter_custom(|iters| smc_run(size, iters.max(1))),
        );
        g.bench_with_input(
            BenchmarkId::new("smc_multicast_one_thread", size),
            &size,
            |b, &size| b.iter_custom(|iters| smc_one_thread(size, iters.max(1))),
        );
        raw_writes(&mut g, "raw_write_to_2_peers", size, cluster(3, 64 * 1024));
    }
    g.finish();
}

/// The same multicast over TCP loopback, beside raw posted TCP writes in the same run.
fn smc_tcp(c: &mut Criterion) {
    let mut g = c.benchmark_group("smc_3_members_tcp");
    g.throughput(Throughput::Elements(1));
    g.sample_size(10);
    for size in [64usize, 1024] {
        g.bench_with_input(
            BenchmarkId::new("smc_multicast_tcp", size),
            &size,
            |b, &size| {
                b.iter_custom(|iters| smc_run_on(size, iters.max(1), squall_benches::tcp_cluster))
            },
        );
        raw_writes(
            &mut g,
            "raw_tcp_write_to_2_peers",
            size,
            squall_benches::tcp_cluster(3, 64 * 1024),
        );
    }
    g.finish();
}

/// Baseline: the raw posted writes one message needs at the least (one per peer).
fn raw_writes<T: Transport>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    size: usize,
    mut nodes: Vec<T>,
) {
    g.bench_with_input(BenchmarkId::new(name, size), &size, |b, &size| {
        let mut i = 0usize;
        let mut events = [squall_transport::Event::PeerFailed {
            peer: NodeId(u32::MAX),
            cause: squall_transport::FailureCause::Local,
        }; 64];
        b.iter(|| {
            let off = (i * size) % (32 * 1024);
            i += 1;
            for peer in [NodeId(1), NodeId(2)] {
                let r = nodes[0].write(
                    peer,
                    LocalSlice::new(REGION, off, size),
                    RemoteAddr::new(REGION, off),
                    Signal::Unsignaled,
                );
                black_box(r.is_ok());
            }
            // Let fabrics that stage writes (TCP) make progress, as the SST's driver does.
            black_box(nodes[0].poll(&mut events));
        })
    });
}

criterion_group!(benches, predicates, smc, smc_tcp);
criterion_main!(benches);
