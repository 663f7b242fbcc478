//! A tour of the in-process fabrics, with no setup:
//!
//! 1. three threads on the threaded fabric race CAS-increment loops on one word of a fourth
//!    node's memory; the count comes out exact and the rate is printed;
//! 2. the same program runs in the simulator, where a seed fixes the interleaving: it is run
//!    twice to show the trace hashes match, then again with a node crashed mid-run to show the
//!    failure reported once and every op to the dead node failing within the timeout.
//!
//! `cargo run --release -p squall-transport-mem --example demo`

use std::time::{Duration, Instant};

use squall_transport::conformance::drain;
use squall_transport::{Event, NodeId, RegionId, RegionSpec, RemoteAddr, Transport};
use squall_transport_mem::sim::{Sim, SimConfig};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};

const R: RegionId = RegionId(0);
const PER_NODE: u64 = 200_000;

/// A CAS-increment loop against word 0 of node 0, one step at a time.
#[derive(Default)]
struct Incrementer {
    guess: u64,
    pending: bool,
    done: u64,
    /// Failure reports and failed ops, if node 0 died.
    failures: Vec<Event>,
}

impl Incrementer {
    /// Runs one step; returns true when finished (all increments done, or node 0 failed).
    fn step<T: Transport>(&mut self, node: &mut T, target: u64) -> bool {
        if !self.pending && self.failures.is_empty() {
            let word = RemoteAddr::new(R, 0);
            self.pending = node
                .compare_and_swap(NodeId(0), word, self.guess, self.guess + 1)
                .is_ok();
        }
        drain(node, |e| match e {
            Event::Completion(c) if c.result.is_ok() => {
                self.pending = false;
                let old = c.value().unwrap_or_default();
                if old == self.guess {
                    self.done += 1;
                }
                self.guess = if old == self.guess { old + 1 } else { old };
            }
            other => {
                self.pending = false;
                self.failures.push(other);
            }
        });
        self.done == target || !self.failures.is_empty()
    }
}

fn threaded() -> Result<(), Box<dyn std::error::Error>> {
    let fabric = ThreadedFabric::new(ThreadedConfig::default())?;
    let mut nodes = fabric.cluster(4, &[RegionSpec::new(R, 64)])?;
    let counter = nodes[0].region(R).ok_or("region")?.clone();
    let start = Instant::now();
    std::thread::scope(|s| {
        for node in nodes.iter_mut().skip(1) {
            s.spawn(move || {
                let mut worker = Incrementer::default();
                while !worker.step(node, PER_NODE) {}
            });
        }
    });
    let took = start.elapsed();
    let total = counter.load(0);
    println!("threaded fabric: 3 nodes x {PER_NODE} contended remote CAS increments");
    println!(
        "  final counter {total} (expected {}), {:.1} M successful CAS/s",
        3 * PER_NODE,
        total as f64 / took.as_secs_f64() / 1e6
    );
    Ok(())
}

fn simulated(seed: u64, crash: bool) -> Result<(u64, Vec<Event>), Box<dyn std::error::Error>> {
    let (sim, mut nodes) = Sim::cluster(SimConfig::seeded(seed), 3, &[RegionSpec::new(R, 64)])?;
    let mut workers: Vec<Incrementer> = (0..3).map(|_| Incrementer::default()).collect();
    for round in 0..2_000 {
        if crash && round == 50 {
            sim.crash(NodeId(0));
        }
        for (node, worker) in nodes.iter_mut().zip(workers.iter_mut()).skip(1) {
            worker.step(node, 400);
        }
        sim.step();
        sim.advance(Duration::from_micros(1));
    }
    sim.advance(sim.op_timeout() * 2);
    workers[1].step(&mut nodes[1], 400);
    Ok((sim.trace_hash(), std::mem::take(&mut workers[1].failures)))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    threaded()?;
    let (a, _) = simulated(42, false)?;
    let (b, _) = simulated(42, false)?;
    let (c, _) = simulated(43, false)?;
    println!(
        "simulator: seed 42 trace {a:#018x}, again {b:#018x} (identical: {}), seed 43 {c:#018x}",
        a == b
    );
    let (_, events) = simulated(42, true)?;
    let failures = events
        .iter()
        .filter(|e| matches!(e, Event::PeerFailed { .. }))
        .count();
    let errors = events
        .iter()
        .filter(|e| matches!(e, Event::Completion(c) if c.result.is_err()))
        .count();
    println!(
        "simulator with n0 crashed mid-run: n1 saw {failures} failure report and {errors} failed op(s)"
    );
    for e in events.iter().take(3) {
        println!("  {e:?}");
    }
    Ok(())
}
