//! The replica core's cost per log entry: a `KvMachine` put applied through `ReplicaCore`
//! (entry decoding, the session table, the response) beside the same put applied to the bare
//! state machine, in the same run; and barrier reads (one barrier answering a batch) beside
//! bare queries.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use squall_kv::{KvMachine, KvOp};
use squall_ordering::{Delivery, Upcall};
use squall_smr::wire::{Entry, ReadMode, Request};
use squall_smr::{CoreConfig, ReplicaCore, StateMachine};
use squall_transport::NodeId;

fn put(i: u64) -> Vec<u8> {
    KvOp::Put {
        key: format!("key{:08}", i % 10_000).into_bytes(),
        value: vec![b'v'; 64],
    }
    .encode()
}

fn apply(c: &mut Criterion) {
    let mut g = c.benchmark_group("smr_apply_64B_put");
    g.throughput(Throughput::Elements(1));
    let ops: Vec<Vec<u8>> = (0..4096).map(put).collect();
    g.bench_function("bare_state_machine", |b| {
        let mut m = KvMachine::default();
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % ops.len();
            black_box(m.apply(&ops[i]));
        });
    });
    for clients in [1u64, 1024] {
        g.bench_with_input(
            BenchmarkId::new("replica_core", format!("{clients}_sessions")),
            &clients,
            |b, &clients| {
                let mut core =
                    ReplicaCore::new(NodeId(0), KvMachine::default(), CoreConfig::default())
                        .expect("valid config");
                let mut seq = vec![0u64; clients as usize];
                let mut i = 0u64;
                b.iter(|| {
                    i += 1;
                    let c = (i % clients) as usize;
                    seq[c] += 1;
                    let entry = Entry::Command {
                        client: c as u64,
                        seq: seq[c],
                        acked: seq[c] - 1,
                        payload: &ops[(i % 4096) as usize],
                    }
                    .encode();
                    core.upcall(Upcall::Deliver(Delivery {
                        position: i,
                        sender: NodeId(1),
                        payload: entry,
                    }));
                    black_box(core.take_replies());
                });
            },
        );
    }
    g.finish();
}

fn reads(c: &mut Criterion) {
    let mut g = c.benchmark_group("smr_reads");
    let get = KvOp::Get {
        key: b"key00000001".to_vec(),
    }
    .encode();
    for batch in [1u64, 64] {
        g.throughput(Throughput::Elements(batch));
        g.bench_with_input(
            BenchmarkId::new("bare_query", batch),
            &batch,
            |b, &batch| {
                let m = KvMachine::default();
                b.iter(|| {
                    for _ in 0..batch {
                        black_box(m.query(&get));
                    }
                });
            },
        );
        g.bench_with_input(
            BenchmarkId::new("barrier_reads", batch),
            &batch,
            |b, &batch| {
                let mut core =
                    ReplicaCore::new(NodeId(0), KvMachine::default(), CoreConfig::default())
                        .expect("valid config");
                let mut token = 0;
                let mut position = 0;
                b.iter(|| {
                    for _ in 0..batch {
                        token += 1;
                        core.request(
                            token,
                            Request::Read {
                                mode: ReadMode::Barrier,
                                query: get.clone(),
                            },
                        );
                    }
                    core.flush_reads();
                    let barrier = core.outgoing().map(<[u8]>::to_vec).unwrap_or_default();
                    core.submitted();
                    position += 1;
                    core.upcall(Upcall::Deliver(Delivery {
                        position,
                        sender: NodeId(0),
                        payload: barrier,
                    }));
                    black_box(core.take_replies());
                });
            },
        );
    }
    g.finish();
}

criterion_group!(benches, apply, reads);
criterion_main!(benches);
