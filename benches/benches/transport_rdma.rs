//! The RDMA transport over a real device (`SQUALL_RDMA_DEVICE`): posted writes of 8 B, 64 B and
//! 4 KiB, and read, compare-and-swap and fetch-and-add round trips, between two nodes of this
//! process on that device. Without the variable it prints why and registers nothing.
//!
//! ```text
//! SQUALL_RDMA_DEVICE=mlx5_0 SQUALL_RDMA_GID_INDEX=3 \
//!     cargo bench -p squall-benches --features verbs --bench transport_rdma
//! ```
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use squall_benches::{REGION, rdma_device, rdma_pair};
use squall_transport::{
    Event, FailureCause, LocalSlice, NodeId, PostError, RemoteAddr, Signal, Transport,
};

const BATCH: u64 = 1024;
const LEN: usize = 64 * 1024;
const PEER: NodeId = NodeId(1);

fn no_event() -> Event {
    Event::PeerFailed {
        peer: NodeId(u32::MAX),
        cause: FailureCause::Local,
    }
}

/// Polls until one completion arrives; returns its value. Panics on a failed op or after 10 s
/// (a benchmark must not hang on a dead link).
fn one_completion<T: Transport>(node: &mut T) -> u64 {
    let mut event = [no_event()];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if node.poll(&mut event) == 1 {
            match event[0] {
                Event::Completion(c) => match c.result {
                    Ok(v) => return v,
                    Err(err) => panic!("{:?} to {} failed: {err}", c.kind, c.peer),
                },
                Event::PeerFailed { peer, cause } => panic!("{peer} failed: {cause}"),
                Event::PeerConnected { peer, .. } => panic!("{peer} connected late"),
            }
        }
        assert!(Instant::now() < deadline, "no completion within 10 s");
    }
}

fn rdma(c: &mut Criterion) {
    let Some(device) = rdma_device() else {
        println!(
            "skipped: SQUALL_RDMA_DEVICE is not set (no RDMA hardware); no RDMA benchmarks registered"
        );
        return;
    };
    let mut nodes = match rdma_pair(&device, LEN) {
        Ok(n) => n,
        Err(e) => {
            println!("skipped: cannot build an RDMA pair on {device}: {e}");
            return;
        }
    };
    let name = format!("squall_rdma_{device}");

    let mut g = c.benchmark_group("rdma_posted_write");
    g.throughput(Throughput::Elements(BATCH));
    for size in [8usize, 64, 4096] {
        g.bench_with_input(BenchmarkId::new(&name, size), &size, |b, &size| {
            let node = &mut nodes[0];
            let mut events = [no_event(); 64];
            b.iter(|| {
                for i in 0..BATCH as usize {
                    let off = (i * size) % (LEN / 2);
                    loop {
                        match node.write(
                            PEER,
                            LocalSlice::new(REGION, off, size),
                            RemoteAddr::new(REGION, off),
                            Signal::Unsignaled,
                        ) {
                            // The send queue is full: retire completed requests and retry.
                            Err(PostError::QueueFull { .. }) => {
                                black_box(node.poll(&mut events));
                            }
                            r => {
                                black_box(r.is_ok());
                                break;
                            }
                        }
                    }
                }
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("rdma_round_trip");
    g.throughput(Throughput::Elements(1));
    let word = RemoteAddr::new(REGION, LEN - 8);
    g.bench_function(BenchmarkId::new("read_8", &name), |b| {
        let node = &mut nodes[0];
        b.iter(|| {
            let r = node.read(
                PEER,
                RemoteAddr::new(REGION, 0),
                LocalSlice::new(REGION, 0, 8),
            );
            black_box(r.is_ok());
            black_box(one_completion(node));
        })
    });
    g.bench_function(BenchmarkId::new("compare_and_swap", &name), |b| {
        let node = &mut nodes[0];
        let mut expected = 0u64;
        b.iter(|| {
            let r = node.compare_and_swap(PEER, word, expected, expected + 1);
            black_box(r.is_ok());
            expected = one_completion(node) + 1;
        })
    });
    g.bench_function(BenchmarkId::new("fetch_add", &name), |b| {
        let node = &mut nodes[0];
        b.iter(|| {
            let r = node.fetch_add(PEER, word, 1);
            black_box(r.is_ok());
            black_box(one_completion(node));
        })
    });
    g.finish();
}

criterion_group!(benches, rdma);
criterion_main!(benches);
