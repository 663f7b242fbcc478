//! KV throughput on the membership backend against the round-robin backend it runs under the
//! hood, in the same run, on the threaded in-memory fabric: a closed loop of in-process clients
//! (one command in flight each) putting small values through `ReplicaHandle::call`.
//!
//! Not run by default: `SQUALL_KV_MEMBERSHIP_BENCH=<repetitions> cargo test --release -p
//! squall-kv --test membership_bench -- --nocapture`.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::time::{Duration, Instant};

use squall_kv::{KvOp, MemCluster, Ordering};
use squall_smr::wire::{Request, Response};

const REPLICAS: usize = 3;
const CLIENTS: u64 = 8;
const RUN: Duration = Duration::from_secs(2);

/// Commands per second over `RUN`, after a short warm-up.
fn throughput(ordering: Ordering) -> f64 {
    let cluster = MemCluster::start(ordering, REPLICAS, 0).unwrap();
    let handles: Vec<_> = cluster
        .running()
        .into_iter()
        .map(|i| cluster.replica(i).unwrap().handle())
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let h = handles[c as usize % handles.len()].clone();
            let (stop, count) = (stop.clone(), count.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let mut seq = 0;
                while !stop.load(AtomicOrdering::Relaxed) {
                    seq += 1;
                    let put = KvOp::Put {
                        key: (c * 1000 + seq % 64).to_le_bytes().to_vec(),
                        value: seq.to_le_bytes().repeat(4),
                    };
                    let req = Request::Command {
                        client: 0xbe00 + c,
                        seq,
                        acked: seq - 1,
                        payload: put.encode(),
                    };
                    match rt.block_on(h.call(req)) {
                        Response::Ok(_) => {
                            count.fetch_add(1, AtomicOrdering::Relaxed);
                        }
                        Response::Error { code, message } => {
                            panic!("{ordering}: client {c}: {code:?}: {message}")
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let (from, t) = (count.load(AtomicOrdering::Relaxed), Instant::now());
    std::thread::sleep(RUN);
    let ops = count.load(AtomicOrdering::Relaxed) - from;
    let secs = t.elapsed().as_secs_f64();
    stop.store(true, AtomicOrdering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    ops as f64 / secs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn kv_throughput_membership_vs_round_robin() {
    let Some(reps) = std::env::var("SQUALL_KV_MEMBERSHIP_BENCH")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        eprintln!(
            "skipped; run with SQUALL_KV_MEMBERSHIP_BENCH=<repetitions> cargo test --release \
             -p squall-kv --test membership_bench -- --nocapture"
        );
        return;
    };
    let (mut rr, mut mb) = (Vec::new(), Vec::new());
    // Interleaved, so a change in the machine's load hits both alike.
    for _ in 0..reps.max(1) {
        rr.push(throughput(Ordering::RoundRobin));
        mb.push(throughput(Ordering::Membership));
    }
    let (r, m) = (median(rr.clone()), median(mb.clone()));
    eprintln!(
        "{REPLICAS} replicas, {CLIENTS} closed-loop clients, puts of 32 B, {RUN:?} per run, \
         {} runs each (threaded fabric)",
        reps.max(1)
    );
    eprintln!("round-robin: {r:.0} commands/s (runs: {rr:.0?})");
    eprintln!("membership:  {m:.0} commands/s (runs: {mb:.0?})");
    eprintln!("membership / round-robin: {:.2}x", m / r);
}
