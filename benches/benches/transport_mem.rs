//! The threaded mem fabric: posted 8-byte and 64-byte writes, and CAS round trips, each beside a
#![allow(missing_docs)] // criterion_group! generates undocumented items
//! crossbeam channel carrying the same payload, measured in the same run.

use std::hint::black_box;
use std::thread;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use crossbeam_channel::bounded;
use squall_benches::{REGION, await_completions, threaded_pair};
use squall_transport::{LocalSlice, NodeId, RemoteAddr, Signal, Transport};

const BATCH: u64 = 1024;

fn writes(c: &mut Criterion) {
    let mut g = c.benchmark_group("posted_write");
    g.throughput(Throughput::Elements(BATCH));
    for size in [8usize, 64] {
        let mut nodes = threaded_pair(64 * 1024);
        let peer = NodeId(1);
        g.bench_with_input(
            BenchmarkId::new("squall_mem_threaded", size),
            &size,
            |b, &size| {
                b.iter(|| {
                    for i in 0..BATCH as usize {
                        let off = (i * size) % (32 * 1024);
                        let src = LocalSlice::new(REGION, off, size);
                        let r = nodes[0].write(
                            peer,
                            src,
                            RemoteAddr::new(REGION, off),
                            Signal::Unsignaled,
                        );
                        black_box(r.is_ok());
                    }
                })
            },
        );
        g.bench_with_input(
            BenchmarkId::new("crossbeam_channel", size),
            &size,
            |b, &size| {
                let (tx, rx) = bounded::<[u8; 64]>(4096);
                let consumer = thread::spawn(move || {
                    let mut n = 0u64;
                    while let Ok(m) = rx.recv() {
                        n += u64::from(m[0]);
                    }
                    n
                });
                let payload = [1u8; 64];
                b.iter(|| {
                    for _ in 0..BATCH {
                        // The channel carries the same number of bytes as the write.
                        let mut m = [0u8; 64];
                        m[..size].copy_from_slice(&payload[..size]);
                        let _ = tx.send(black_box(m));
                    }
                });
                drop(tx);
                black_box(consumer.join().ok());
            },
        );
    }
    g.finish();
}

fn cas_round_trip(c: &mut Criterion) {
    let mut g = c.benchmark_group("cas_round_trip");
    g.throughput(Throughput::Elements(1));
    let mut nodes = threaded_pair(4096);
    let word = RemoteAddr::new(REGION, 0);
    let mut expected = 0u64;
    g.bench_function("squall_mem_threaded", |b| {
        b.iter(|| {
            let r = nodes[0].compare_and_swap(NodeId(1), word, expected, expected + 1);
            black_box(r.is_ok());
            expected = await_completions(&mut nodes[0], 1) + 1;
        })
    });
    g.bench_function("crossbeam_channel_ping_pong", |b| {
        let (req_tx, req_rx) = bounded::<u64>(1);
        let (resp_tx, resp_rx) = bounded::<u64>(1);
        let server = thread::spawn(move || {
            let mut word = 0u64;
            while let Ok(expected) = req_rx.recv() {
                let old = word;
                if old == expected {
                    word += 1;
                }
                if resp_tx.send(old).is_err() {
                    break;
                }
            }
        });
        let mut expected = 0u64;
        b.iter(|| {
            let _ = req_tx.send(expected);
            expected = resp_rx.recv().unwrap_or(0) + 1;
        });
        drop(req_tx);
        let _ = server.join();
    });
    g.finish();
}

criterion_group!(benches, writes, cas_round_trip);
criterion_main!(benches);
