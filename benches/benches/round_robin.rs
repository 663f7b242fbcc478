//! Round-robin ordering (squall-round-robin) throughput and latency, beside the raw transport
//! write rate measured in the same run.
//!
//! - `rr_mem/{all,one}_senders/{n}m/{size}`: messages delivered per second (criterion's
//!   elements/s; bytes/s = that × size) on the threaded mem fabric with n = 2, 3, 5 members,
//!   every member a sender or only member 0; 64 B and 1 KiB travel inline in SMC slots, 10 KiB
//!   and 1 MiB as large messages (chunked one-sided writes; 1 MiB with window 8 and 64 KiB
//!   chunks, so that the receive buffers stay at 8 MiB per sender).
//! - `rr_tcp/{all,one}_senders/3m/{size}`: the same, 3 members on loopback TCP.
//! - `rr_relay/{tree,pipeline}/{all,one}_senders/4m/1048576`: 1 MiB messages in a group of 4
//!   (mem), relayed along the pipelined binomial tree or RDMC's binomial pipeline, beside
//!   `rr_relay/raw_write_to_peers/4m`.
//! - `rr_latency/one_sender_3m/64`: submit-to-delivery at the sender, one message at a time
//!   (p50/p99 printed to stderr as `RR-LATENCY`).
//! - `raw_write_to_peers/*`: the baseline: one posted write per peer per message, as fast as
//!   the fabric accepts them.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use squall_ordering::{SubmitError, TotalOrder, Upcall};
use squall_round_robin::{Config, Relay, RoundRobin};
use squall_transport::{LocalSlice, NodeId, Region, RegionId, RemoteAddr, Signal, Transport};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric, ThreadedNode};
use squall_transport_tcp::{ClusterConfig, TcpNode};

/// The large-message size measured.
const MIB: usize = 1 << 20;

/// The sizes measured: two inline in SMC slots, two as large messages.
const SIZES: [usize; 4] = [64, 1024, 10 * 1024, MIB];

/// The benchmark configuration for `size`-byte messages: window 32 and 16 KiB payloads, or for
/// 1 MiB messages window 8 in 64 KiB chunks (every member registers
/// `senders × window × max_payload` bytes of receive buffers).
fn config(n: usize, senders: usize, size: usize) -> Config {
    let cfg = Config {
        senders: (0..senders as u32).map(NodeId).collect(),
        window: 32,
        slot_size: 1024,
        max_payload: 16 << 10,
        chunk_size: 16 << 10,
        // A loaded benchmark machine (2 shared cores) must not fail a live member.
        heartbeat_interval: Duration::from_millis(50),
        suspicion_timeout: Duration::from_secs(30),
        ..Config::new((0..n as u32).map(NodeId).collect())
    };
    if size > cfg.max_payload {
        Config {
            window: 8,
            max_payload: size,
            chunk_size: 64 << 10,
            ..cfg
        }
    } else {
        cfg
    }
}

fn mem_nodes(cfg: &Config) -> Vec<ThreadedNode> {
    let layout = RoundRobin::<ThreadedNode>::layout(cfg).expect("layout");
    ThreadedFabric::new(ThreadedConfig::default())
        .and_then(|f| f.cluster(cfg.members.len(), &layout))
        .expect("a valid benchmark cluster")
}

fn tcp_nodes(cfg: &Config) -> Vec<TcpNode> {
    let n = cfg.members.len();
    let layout = RoundRobin::<TcpNode>::layout(cfg).expect("layout");
    let ls: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    let addrs: Vec<_> = ls.iter().map(|l| l.local_addr().expect("addr")).collect();
    let mut tcp = ClusterConfig::new(
        7,
        addrs
            .iter()
            .enumerate()
            .map(|(i, a)| (NodeId(i as u32), *a)),
    );
    tcp.op_timeout = Duration::from_secs(30);
    tcp.heartbeat_timeout = Duration::from_secs(30);
    let handles: Vec<_> = ls
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let tcp = tcp.clone();
            let layout = layout.clone();
            thread::spawn(move || {
                let regions = layout
                    .into_iter()
                    .map(|s| Region::new(s).expect("region"))
                    .collect();
                TcpNode::start_on(l, tcp, NodeId(i as u32), regions).expect("node starts")
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("start"))
        .collect()
}

/// Runs a group over `nodes` until every member delivered `per_sender` messages of `size`
/// bytes from each sender; returns the slowest member's time from a common start. The
/// delivery batch sizes seen are added to `batches` (delivered, batches).
fn run_group<T: Transport + Send + 'static>(
    nodes: Vec<T>,
    cfg: &Config,
    size: usize,
    per_sender: u64,
    batches: &Arc<(AtomicUsize, AtomicUsize)>,
) -> Duration {
    let n = nodes.len();
    let senders = cfg.sender_list().len();
    let total = per_sender * senders as u64;
    let start = Arc::new(Barrier::new(n));
    let finished = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = nodes
        .into_iter()
        .map(|node| {
            let cfg = cfg.clone();
            let (start, finished, batches) = (start.clone(), finished.clone(), batches.clone());
            thread::spawn(move || {
                let mut rr = RoundRobin::new(node, cfg).expect("group");
                let sender = rr.config().sender_list().contains(&rr.me());
                let payload = vec![0x5a; size];
                let mut upcalls = Vec::new();
                let (mut sent, mut got) = (0u64, 0u64);
                start.wait();
                let t0 = Instant::now();
                let mut elapsed = None;
                loop {
                    while sender && sent < per_sender {
                        match rr.submit(&payload) {
                            Ok(()) => sent += 1,
                            Err(SubmitError::WindowFull) => break,
                            Err(e) => panic!("submit: {e}"),
                        }
                    }
                    let busy = rr.poll(&mut upcalls);
                    for u in upcalls.drain(..) {
                        match u {
                            Upcall::Deliver(d) => {
                                black_box(&d.payload);
                                got += 1;
                            }
                            Upcall::Wedged if elapsed.is_some() => {}
                            other => panic!("unexpected {other:?}"),
                        }
                    }
                    if got == total && elapsed.is_none() {
                        elapsed = Some(t0.elapsed());
                        finished.fetch_add(1, Ordering::AcqRel);
                    }
                    // Serve the others until everyone is done.
                    if elapsed.is_some() && finished.load(Ordering::Acquire) == n {
                        break;
                    }
                    if !busy {
                        rr.wait(Duration::from_micros(200));
                    }
                }
                let s = rr.stats();
                batches.0.fetch_add(s.delivered as usize, Ordering::Relaxed);
                batches
                    .1
                    .fetch_add(s.delivery_batches as usize, Ordering::Relaxed);
                elapsed.unwrap_or_default()
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("member"))
        .max()
        .unwrap_or_default()
}

fn report_batches(name: &str, b: &Arc<(AtomicUsize, AtomicUsize)>) {
    let (d, k) = (b.0.load(Ordering::Relaxed), b.1.load(Ordering::Relaxed));
    if k > 0 {
        eprintln!(
            "RR-BATCH {name}: mean delivery batch {:.1}",
            d as f64 / k as f64
        );
    }
    b.0.store(0, Ordering::Relaxed);
    b.1.store(0, Ordering::Relaxed);
}

fn raw_writes<T: Transport>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    nodes: &mut [T],
    size: usize,
) {
    let region = RegionId(1);
    let peers: Vec<NodeId> = (1..nodes.len() as u32).map(NodeId).collect();
    g.bench_with_input(BenchmarkId::new(name, size), &size, |b, &size| {
        let mut i = 0usize;
        b.iter(|| {
            let off = (i * size) % (64 * 1024);
            i += 1;
            for &peer in &peers {
                loop {
                    match nodes[0].write(
                        peer,
                        LocalSlice::new(region, off, size),
                        RemoteAddr::new(region, off),
                        Signal::Unsignaled,
                    ) {
                        Ok(op) => {
                            black_box(op);
                            break;
                        }
                        Err(_) => {
                            let mut ev = [squall_transport::Event::PeerFailed {
                                peer,
                                cause: squall_transport::FailureCause::Local,
                            }; 16];
                            nodes[0].poll(&mut ev);
                        }
                    }
                }
            }
        })
    });
}

fn mem_throughput(c: &mut Criterion) {
    let batches = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let mut g = c.benchmark_group("rr_mem");
    g.throughput(Throughput::Elements(1));
    for n in [2usize, 3, 5] {
        for (label, senders) in [("all_senders", n), ("one_sender", 1)] {
            for size in SIZES {
                let cfg = config(n, senders, size);
                let name = format!("{label}/{n}m");
                g.bench_with_input(BenchmarkId::new(&name, size), &size, |b, &size| {
                    b.iter_custom(|iters| {
                        let per_sender = iters.div_ceil(senders as u64).max(1);
                        run_group(mem_nodes(&cfg), &cfg, size, per_sender, &batches)
                            * (iters as u32)
                            / ((per_sender * senders as u64) as u32)
                    })
                });
                report_batches(&format!("rr_mem/{name}/{size}"), &batches);
            }
        }
        // Baseline in the same run: a posted write of each size to every peer.
        for size in SIZES {
            let mut nodes = mem_nodes(&config(n, n, size));
            raw_writes(
                &mut g,
                &format!("raw_write_to_peers/{n}m"),
                &mut nodes,
                size,
            );
        }
    }
    g.finish();
}

fn tcp_throughput(c: &mut Criterion) {
    let batches = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let mut g = c.benchmark_group("rr_tcp");
    g.throughput(Throughput::Elements(1));
    for (label, senders) in [("all_senders", 3usize), ("one_sender", 1)] {
        for size in SIZES {
            let cfg = config(3, senders, size);
            let name = format!("{label}/3m");
            g.bench_with_input(BenchmarkId::new(&name, size), &size, |b, &size| {
                b.iter_custom(|iters| {
                    let per_sender = iters.div_ceil(senders as u64).max(1);
                    run_group(tcp_nodes(&cfg), &cfg, size, per_sender, &batches) * (iters as u32)
                        / ((per_sender * senders as u64) as u32)
                })
            });
            report_batches(&format!("rr_tcp/{name}/{size}"), &batches);
        }
    }
    for size in SIZES {
        let mut nodes = tcp_nodes(&config(3, 3, size));
        raw_writes(&mut g, "raw_write_to_peers/3m", &mut nodes, size);
    }
    g.finish();
}

/// 1 MiB messages in a group of 4 over each relay (mem).
fn relay_4m(c: &mut Criterion) {
    let batches = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let mut g = c.benchmark_group("rr_relay");
    g.throughput(Throughput::Elements(1));
    for (relay_name, relay) in [("tree", Relay::Tree), ("pipeline", Relay::BinomialPipeline)] {
        for (label, senders) in [("all_senders", 4usize), ("one_sender", 1)] {
            let cfg = Config {
                relay,
                ..config(4, senders, MIB)
            };
            let name = format!("{relay_name}/{label}/4m");
            g.bench_with_input(BenchmarkId::new(&name, MIB), &MIB, |b, &size| {
                b.iter_custom(|iters| {
                    let per_sender = iters.div_ceil(senders as u64).max(1);
                    run_group(mem_nodes(&cfg), &cfg, size, per_sender, &batches) * (iters as u32)
                        / ((per_sender * senders as u64) as u32)
                })
            });
            report_batches(&format!("rr_relay/{name}/{MIB}"), &batches);
        }
    }
    let mut nodes = mem_nodes(&config(4, 4, MIB));
    raw_writes(&mut g, "raw_write_to_peers/4m", &mut nodes, MIB);
    g.finish();
}

/// One sender, one message in flight: submit-to-delivery at the sender (which implies every
/// member received it). Returns the sorted samples.
fn latency_samples(count: usize) -> Vec<Duration> {
    let cfg = config(3, 1, 64);
    let mut nodes = mem_nodes(&cfg);
    let stop = Arc::new(AtomicUsize::new(0));
    let others: Vec<_> = nodes
        .drain(1..)
        .map(|node| {
            let cfg = cfg.clone();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut rr = RoundRobin::new(node, cfg).expect("group");
                let mut upcalls = Vec::new();
                while stop.load(Ordering::Acquire) == 0 {
                    if !rr.poll(&mut upcalls) {
                        rr.wait(Duration::from_micros(200));
                    }
                    upcalls.clear();
                }
            })
        })
        .collect();
    let mut rr = RoundRobin::new(nodes.remove(0), cfg).expect("group");
    let mut upcalls = Vec::new();
    let mut samples = Vec::with_capacity(count);
    for i in 0..count {
        let t0 = Instant::now();
        while rr.submit(&[i as u8; 64]).is_err() {
            rr.poll(&mut upcalls);
            upcalls.clear();
        }
        'wait: loop {
            rr.poll(&mut upcalls);
            for u in upcalls.drain(..) {
                if matches!(u, Upcall::Deliver(_)) {
                    break 'wait;
                }
            }
        }
        samples.push(t0.elapsed());
    }
    stop.store(1, Ordering::Release);
    for h in others {
        h.join().expect("member");
    }
    samples.sort();
    samples
}

fn latency(c: &mut Criterion) {
    let s = latency_samples(2000);
    eprintln!(
        "RR-LATENCY one_sender_3m/64 (mem): p50 {:?} p99 {:?}",
        s[s.len() / 2],
        s[s.len() * 99 / 100]
    );
    let mut g = c.benchmark_group("rr_latency");
    g.bench_function("one_sender_3m/64", |b| {
        b.iter_custom(|iters| latency_samples(iters as usize).iter().sum())
    });
    g.finish();
}

criterion_group!(benches, mem_throughput, tcp_throughput, relay_4m, latency);
criterion_main!(benches);
