//! The CAS-Paxos log on the threaded mem fabric: one thread per node, real concurrency. Node 0
//! (the leader) streams commands as fast as flow control allows, laps the ring many times, and
//! every node delivers all of them in the same order.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use squall_cas_paxos::layout::Layout;
use squall_cas_paxos::log::{CasPaxos, LogConfig, default_rpc_threshold};
use squall_ordering::{SubmitError, TotalOrder, Upcall};
use squall_transport::NodeId;
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};

const N: usize = 3;

#[test]
fn a_stream_laps_the_ring_on_real_threads() {
    stream(20_000);
}

/// Short streams on fresh clusters, the pattern of the benchmark's warm-up.
#[test]
fn short_streams_on_fresh_clusters() {
    for count in [1, 2, 3, 5, 8, 13, 100] {
        stream(count);
    }
}

fn stream(count: u64) {
    #[allow(non_snake_case)]
    let COUNT = count;
    let cfg = LogConfig {
        layout: Layout {
            proposers: N,
            slots: 256,
            max_value_len: 32,
        },
        window: 32,
        max_pending: 256,
        backoff: (Duration::from_micros(20), Duration::from_micros(200)),
        heartbeat_period: Duration::from_millis(5),
        leader_timeout: Duration::from_secs(30),
        recycle_timeout: Duration::from_secs(60),
        seed: 1,
        rpc_threshold: default_rpc_threshold(N),
    };
    let nodes = ThreadedFabric::new(ThreadedConfig::default())
        .and_then(|f| f.cluster(N, &cfg.regions()))
        .unwrap();
    let start = Arc::new(Barrier::new(N));
    let handles: Vec<_> = nodes
        .into_iter()
        .map(|node| {
            let (cfg, start) = (cfg.clone(), start.clone());
            thread::spawn(move || {
                let mut log = CasPaxos::new(node, cfg).unwrap();
                let me = log.me();
                let mut upcalls = Vec::new();
                let (mut sent, mut seq) = (0u64, Vec::new());
                start.wait();
                let t0 = Instant::now();
                while (seq.len() as u64) < COUNT {
                    while me == NodeId(0) && sent < COUNT {
                        match log.submit(&sent.to_le_bytes()) {
                            Ok(()) => sent += 1,
                            Err(SubmitError::WindowFull) => break,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    let busy = log.poll(&mut upcalls);
                    for u in upcalls.drain(..) {
                        if let Upcall::Deliver(d) = u {
                            seq.push(u64::from_le_bytes(d.payload.try_into().unwrap()));
                        }
                    }
                    assert!(
                        t0.elapsed() < Duration::from_secs(60),
                        "{me} stuck at {} of {COUNT}: {log:?} {:?}",
                        seq.len(),
                        log.stats()
                    );
                    if !busy {
                        log.wait(Duration::from_micros(200));
                    }
                }
                // Serve the others a little longer.
                let until = Instant::now() + Duration::from_millis(300);
                while Instant::now() < until {
                    if !log.poll(&mut upcalls) {
                        log.wait(Duration::from_micros(200));
                    }
                }
                seq
            })
        })
        .collect();
    let seqs: Vec<Vec<u64>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let expected: Vec<u64> = (0..COUNT).collect();
    for (i, s) in seqs.iter().enumerate() {
        assert_eq!(s, &expected, "n{i} delivered another sequence");
    }
}
