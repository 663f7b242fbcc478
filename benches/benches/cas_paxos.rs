//! CAS-Paxos (squall-cas-paxos) against the round-robin backend, same fabric, same run, plus
//! failover time.
//!
//! - `paxos_vs_rr/{mem,tcp}/{cas_paxos,round_robin}/64`: messages per second delivered at every
//!   member of a 3-node group when node 0 submits 64 B commands as fast as flow control allows
//!   (criterion's elements/s), on the threaded mem fabric and on loopback TCP.
//! - Commit latency, one command in flight, submit at node 0 (the Paxos leader) to its delivery
//!   there (for CAS-Paxos: decided by a majority; for round-robin: received by every member):
//!   p50/p99 printed to stderr as `LATENCY <fabric> <backend>`.
//! - Failover: node 1 submits a paced stream; node 0, the leader, crashes. *Detection* is the
//!   crash to node 1 trusting itself (Ω: heartbeats in acceptor memory stop moving for
//!   `leader_timeout`), *takeover* is from there to node 1's next delivery (one prepare round
//!   over the old leader's window, adoption, accept). In virtual time in the simulator (20 seeds)
//!   and on loopback TCP (the leader thread stops and drops its endpoint); printed as
//!   `FAILOVER <fabric>`.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use squall_cas_paxos::layout::Layout;
use squall_cas_paxos::log::{CasPaxos, LogConfig, default_rpc_threshold};
use squall_ordering::{SubmitError, TotalOrder, Upcall};
use squall_round_robin::RoundRobin;
use squall_transport::{NodeId, Region, RegionSpec, Transport};
use squall_transport_mem::sim::{Sim, SimConfig};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric, ThreadedNode};
use squall_transport_tcp::{ClusterConfig, TcpNode};

const N: usize = 3;
const SIZE: usize = 64;

fn paxos_config(heartbeat: Duration, leader_timeout: Duration) -> LogConfig {
    LogConfig {
        layout: Layout {
            proposers: N,
            slots: 1024,
            max_value_len: SIZE + 16,
        },
        window: 32,
        max_pending: 256,
        backoff: (Duration::from_micros(20), Duration::from_micros(200)),
        heartbeat_period: heartbeat,
        leader_timeout,
        recycle_timeout: leader_timeout * 10,
        seed: 1,
        rpc_threshold: default_rpc_threshold(N),
    }
}

/// Long timeouts for the steady-state runs: a loaded 2-core machine must not depose a leader.
fn steady_paxos() -> LogConfig {
    paxos_config(Duration::from_millis(5), Duration::from_secs(30))
}

fn rr_config() -> squall_round_robin::Config {
    squall_round_robin::Config {
        senders: vec![NodeId(0)],
        window: 32,
        slot_size: 1024,
        max_payload: 1024,
        chunk_size: 1024,
        heartbeat_interval: Duration::from_millis(50),
        suspicion_timeout: Duration::from_secs(30),
        ..squall_round_robin::Config::new((0..N as u32).map(NodeId).collect())
    }
}

#[derive(Clone, Copy, Debug)]
enum Backend {
    CasPaxos,
    RoundRobin,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::CasPaxos => "cas_paxos",
            Backend::RoundRobin => "round_robin",
        }
    }

    fn layout(self) -> Vec<RegionSpec> {
        match self {
            Backend::CasPaxos => steady_paxos().regions(),
            Backend::RoundRobin => RoundRobin::<ThreadedNode>::layout(&rr_config()).expect("rr"),
        }
    }

    fn open<T: Transport + 'static>(self, node: T) -> Box<dyn TotalOrder> {
        match self {
            Backend::CasPaxos => Box::new(CasPaxos::new(node, steady_paxos()).expect("paxos")),
            Backend::RoundRobin => Box::new(RoundRobin::new(node, rr_config()).expect("rr")),
        }
    }
}

fn mem_nodes(layout: &[RegionSpec]) -> Vec<ThreadedNode> {
    ThreadedFabric::new(ThreadedConfig::default())
        .and_then(|f| f.cluster(N, layout))
        .expect("a valid benchmark cluster")
}

fn tcp_nodes(layout: &[RegionSpec], timeout: Duration) -> Vec<TcpNode> {
    let ls: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    let addrs: Vec<_> = ls.iter().map(|l| l.local_addr().expect("addr")).collect();
    let mut tcp = ClusterConfig::new(
        9,
        addrs
            .iter()
            .enumerate()
            .map(|(i, a)| (NodeId(i as u32), *a)),
    );
    tcp.op_timeout = timeout;
    tcp.heartbeat_timeout = timeout;
    let handles: Vec<_> = ls
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let (tcp, layout) = (tcp.clone(), layout.to_vec());
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

/// Node 0 submits `count` commands as fast as flow control allows; returns the time until every
/// member delivered all of them.
fn run_stream<T: Transport + Send + 'static>(
    backend: Backend,
    nodes: Vec<T>,
    count: u64,
) -> Duration {
    let start = Arc::new(Barrier::new(N));
    let finished = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = nodes
        .into_iter()
        .map(|node| {
            let (start, finished) = (start.clone(), finished.clone());
            thread::spawn(move || {
                let mut o = backend.open(node);
                let sender = o.me() == NodeId(0);
                let payload = [0x5a; SIZE];
                let mut upcalls = Vec::new();
                let (mut sent, mut got) = (0u64, 0u64);
                start.wait();
                let t0 = Instant::now();
                let mut elapsed = None;
                loop {
                    while sender && sent < count {
                        match o.submit(&payload) {
                            Ok(()) => sent += 1,
                            Err(SubmitError::WindowFull) => break,
                            Err(e) => panic!("submit: {e}"),
                        }
                    }
                    let busy = o.poll(&mut upcalls);
                    for u in upcalls.drain(..) {
                        if let Upcall::Deliver(d) = u {
                            black_box(&d.payload);
                            got += 1;
                        }
                    }
                    if got >= count && elapsed.is_none() {
                        elapsed = Some(t0.elapsed());
                        finished.fetch_add(1, Ordering::AcqRel);
                    }
                    if elapsed.is_some() && finished.load(Ordering::Acquire) == N {
                        break;
                    }
                    if !busy {
                        o.wait(Duration::from_micros(200));
                    }
                }
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

/// One command in flight at a time from node 0; sorted submit-to-delivery samples at node 0.
fn latency_samples<T: Transport + Send + 'static>(
    backend: Backend,
    mut nodes: Vec<T>,
    count: usize,
) -> Vec<Duration> {
    let stop = Arc::new(AtomicBool::new(false));
    let others: Vec<_> = nodes
        .drain(1..)
        .map(|node| {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut o = backend.open(node);
                let mut upcalls = Vec::new();
                while !stop.load(Ordering::Acquire) {
                    if !o.poll(&mut upcalls) {
                        o.wait(Duration::from_micros(200));
                    }
                    upcalls.clear();
                }
            })
        })
        .collect();
    let mut o = backend.open(nodes.remove(0));
    let mut upcalls = Vec::new();
    // Warm up (Ω settles, the window gets prepared).
    for _ in 0..50 {
        o.poll(&mut upcalls);
        upcalls.clear();
    }
    let mut samples = Vec::with_capacity(count);
    for i in 0..count {
        let t0 = Instant::now();
        while o.submit(&[i as u8; SIZE]).is_err() {
            o.poll(&mut upcalls);
            upcalls.clear();
        }
        'wait: loop {
            o.poll(&mut upcalls);
            for u in upcalls.drain(..) {
                if matches!(u, Upcall::Deliver(_)) {
                    break 'wait;
                }
            }
        }
        samples.push(t0.elapsed());
    }
    stop.store(true, Ordering::Release);
    for h in others {
        h.join().expect("member");
    }
    samples.sort();
    samples
}

fn throughput_and_latency(c: &mut Criterion) {
    let mut g = c.benchmark_group("paxos_vs_rr");
    g.throughput(Throughput::Elements(1));
    for backend in [Backend::CasPaxos, Backend::RoundRobin] {
        let layout = backend.layout();
        let s = latency_samples(backend, mem_nodes(&layout), 2000);
        eprintln!(
            "LATENCY mem {}: p50 {:?} p99 {:?}",
            backend.name(),
            s[s.len() / 2],
            s[s.len() * 99 / 100]
        );
        let s = latency_samples(backend, tcp_nodes(&layout, Duration::from_secs(30)), 1000);
        eprintln!(
            "LATENCY tcp {}: p50 {:?} p99 {:?}",
            backend.name(),
            s[s.len() / 2],
            s[s.len() * 99 / 100]
        );
        g.bench_with_input(
            BenchmarkId::new(format!("mem/{}", backend.name()), SIZE),
            &layout,
            |b, layout| {
                b.iter_custom(|iters| {
                    let n = iters.max(1);
                    run_stream(backend, mem_nodes(layout), n) * (iters as u32) / (n as u32)
                })
            },
        );
        g.bench_with_input(
            BenchmarkId::new(format!("tcp/{}", backend.name()), SIZE),
            &layout,
            |b, layout| {
                b.iter_custom(|iters| {
                    let n = iters.max(1);
                    run_stream(backend, tcp_nodes(layout, Duration::from_secs(30)), n)
                        * (iters as u32)
                        / (n as u32)
                })
            },
        );
    }
    g.finish();
}

/// (detection, takeover) after the leader's crash, as node 1 sees it.
fn failover_sim(seed: u64) -> (Duration, Duration) {
    let cfg = paxos_config(Duration::from_micros(20), Duration::from_micros(200));
    let (sim, endpoints) = Sim::cluster(SimConfig::seeded(seed), N, &cfg.regions()).expect("sim");
    let mut logs: Vec<CasPaxos<_>> = endpoints
        .into_iter()
        .map(|t| CasPaxos::new(t, cfg.clone()).expect("log"))
        .collect();
    let mut upcalls = Vec::new();
    let mut crash_at = None;
    let mut trusted = None;
    let mut sent = 0u64;
    for round in 0..200_000u32 {
        if round == 2_000 {
            sim.crash(NodeId(0));
            crash_at = Some(sim.now());
        }
        for (i, log) in logs.iter_mut().enumerate() {
            if (i == 0 && crash_at.is_some()) || !sim.takes_turn(NodeId(i as u32)) {
                continue;
            }
            if i == 1 && round % 10 == 0 && log.submit(&sent.to_le_bytes()).is_ok() {
                sent += 1;
            }
            upcalls.clear();
            log.poll(&mut upcalls);
            if i != 1 {
                continue;
            }
            for u in &upcalls {
                match (u, crash_at, trusted) {
                    (Upcall::View(v), Some(_), None) if v.leader == Some(NodeId(1)) => {
                        trusted = Some(sim.now());
                    }
                    (Upcall::Deliver(_), Some(c), Some(t)) => return (t - c, sim.now() - t),
                    _ => {}
                }
            }
        }
        // Only `advance`: `step` would move the clock to the next event, which after the crash
        // can be the op timeout of something posted to the dead leader.
        sim.advance(Duration::from_micros(1));
    }
    panic!("seed {seed}: no delivery after the takeover");
}

/// The same on loopback TCP: node 0's thread stops polling and drops its endpoint.
fn failover_tcp(cfg: &LogConfig) -> (Duration, Duration) {
    let nodes = tcp_nodes(&cfg.regions(), Duration::from_millis(200));
    let crash = Arc::new(AtomicBool::new(false));
    let crashed_at = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let start = Arc::new(Barrier::new(N));
    let done = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = nodes
        .into_iter()
        .map(|node| {
            let (cfg, crash, crashed_at, start, done) = (
                cfg.clone(),
                crash.clone(),
                crashed_at.clone(),
                start.clone(),
                done.clone(),
            );
            thread::spawn(move || {
                let mut log = CasPaxos::new(node, cfg).expect("log");
                let me = log.me();
                let mut upcalls = Vec::new();
                start.wait();
                let t0 = Instant::now();
                let mut trusted = None;
                let mut next = Instant::now();
                let mut sent = 0u64;
                loop {
                    if me == NodeId(0) && crash.load(Ordering::Acquire) {
                        *crashed_at.lock().expect("lock") = Some(Instant::now());
                        return None; // drops the endpoint: its connections close
                    }
                    if me == NodeId(1) && Instant::now() >= next {
                        if log.submit(&sent.to_le_bytes()).is_ok() {
                            sent += 1;
                        }
                        next += Duration::from_micros(500);
                    }
                    let busy = log.poll(&mut upcalls);
                    for u in upcalls.drain(..) {
                        let crashed = *crashed_at.lock().expect("lock");
                        match (&u, crashed, trusted) {
                            (Upcall::View(v), Some(_), None) if v.leader == Some(me) => {
                                trusted = Some(Instant::now());
                            }
                            (Upcall::Deliver(_), Some(c), Some(t)) if me == NodeId(1) => {
                                done.store(true, Ordering::Release);
                                return Some((t - c, t.elapsed()));
                            }
                            _ => {}
                        }
                    }
                    if me == NodeId(1) && sent == 200 {
                        crash.store(true, Ordering::Release);
                    }
                    // Node 2 serves until node 1 has measured.
                    if me == NodeId(2)
                        && (done.load(Ordering::Acquire) || t0.elapsed() > Duration::from_secs(20))
                    {
                        return None;
                    }
                    if !busy {
                        log.wait(Duration::from_micros(200));
                    }
                }
            })
        })
        .collect();
    let results: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().expect("node"))
        .collect();
    results[1].expect("node 1 took over")
}

fn failover(_c: &mut Criterion) {
    let sims: Vec<(Duration, Duration)> = (0..20).map(failover_sim).collect();
    let mean = |v: &[Duration]| v.iter().sum::<Duration>() / v.len() as u32;
    let (d, t): (Vec<_>, Vec<_>) = sims.into_iter().unzip();
    eprintln!(
        "FAILOVER sim (virtual time; heartbeat 20 us, leader_timeout 200 us; 20 seeds): \
         detection mean {:?} max {:?}, takeover mean {:?} max {:?}",
        mean(&d),
        d.iter().max().copied().unwrap_or_default(),
        mean(&t),
        t.iter().max().copied().unwrap_or_default()
    );
    let cfg = paxos_config(Duration::from_millis(1), Duration::from_millis(10));
    let runs: Vec<(Duration, Duration)> = (0..5).map(|_| failover_tcp(&cfg)).collect();
    let (d, t): (Vec<_>, Vec<_>) = runs.into_iter().unzip();
    eprintln!(
        "FAILOVER tcp (loopback; heartbeat 1 ms, leader_timeout 10 ms; 5 runs): \
         detection mean {:?} max {:?}, takeover mean {:?} max {:?}",
        mean(&d),
        d.iter().max().copied().unwrap_or_default(),
        mean(&t),
        t.iter().max().copied().unwrap_or_default()
    );
}

criterion_group!(benches, throughput_and_latency, failover);
criterion_main!(benches);
