//! What serving a joiner a large state costs the serving replica's thread (s23):
//! `SQUALL_KV_SERVE_BENCH=<MB>[,<MB>…]` (default: skipped) builds a `KvMachine` store of about
//! that many megabytes (keys of 19 bytes, values of 80, as `install_pause.rs`), and runs three
//! members holding it one after the other on a fake backend whose every poll hands out 4 log
//! entries of 50 overwrites of its keys (10 000 entries, as fast as the replica polls) and whose joiner asks for
//! the state once 2 000 entries are handed out, `SQUALL_KV_SERVE_ROUNDS` times (default 2):
//!
//! - *none*: no joiner asks (the baseline);
//! - *inline*: the snapshot is encoded on the replica's thread (`KvMachine::capturing(false)`,
//!   the behaviour before s23);
//! - *off-thread*: the state is captured on the replica's thread and encoded on the serve
//!   thread (`StateMachine::snapshot_encoder`, the default).
//!
//! The backend keeps the bytes it is handed, as `Group::provide_state_owned` does. For each: the
//! longest one step of the serve held the replica's thread (`Metrics::longest_serve_us`:
//! encoding and handing over inline; the capture, or the hand-over of the encoded bytes,
//! off-thread), the replica's longest driver turn (`Metrics::longest_turn_us`), the time from
//! the joiner's ask until the state was provided, and the time until every entry was applied.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use squall_kv::KvMachine;
use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
use squall_smr::{
    CoreConfig, Replica, ReplicaConfig, ReplicaCore, StateMachine, StateTransfer, TransferError,
};
use squall_transport::{NodeId, Waker};

mod pause;
use pause::{ENTRIES, entries, hand_out, store};

/// Entries handed out before the joiner asks.
const ASK_AT: usize = 2_000;

/// When the joiner asked, and what it was given: position, size, when.
#[derive(Default)]
struct Served {
    asked: Option<Instant>,
    provided: Option<(u64, usize, Instant)>,
}

/// A member's backend: view 1, then `PER_POLL` entries a poll; a joiner asks once `ASK_AT`
/// entries are out (unless `ask` is off).
struct Feed {
    view_sent: bool,
    ask: bool,
    entries: Arc<Vec<Vec<u8>>>,
    next: usize,
    served: Arc<Mutex<Served>>,
    /// The state provided, kept as the group keeps it (dropped with the backend).
    kept: Option<Vec<u8>>,
}

impl TotalOrder for Feed {
    fn me(&self) -> NodeId {
        NodeId(0)
    }
    fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> {
        Err(SubmitError::WindowFull)
    }
    fn poll(&mut self, out: &mut Vec<Upcall<Delivery>>) -> bool {
        let more = hand_out(
            &mut self.view_sent,
            NodeId(0),
            &self.entries,
            &mut self.next,
            out,
        );
        if self.ask && self.next >= ASK_AT {
            let mut s = self.served.lock().unwrap();
            if s.asked.is_none() {
                s.asked = Some(Instant::now());
            }
        }
        more
    }
    fn wait(&mut self, t: Duration) {
        std::thread::sleep(t.min(Duration::from_millis(1)));
    }
    fn waker(&self) -> Waker {
        Waker::noop()
    }
}

impl StateTransfer for Feed {
    fn holds_state(&self) -> bool {
        true
    }
    fn state_wanted(&self) -> bool {
        let s = self.served.lock().unwrap();
        s.asked.is_some() && s.provided.is_none()
    }
    fn provide_state(&mut self, position: u64, state: &[u8]) -> Result<(), TransferError> {
        self.provide_state_owned(position, state.to_vec())
    }
    /// Keeps the bytes to stream them, as `Group::provide_state_owned` does (no copy).
    fn provide_state_owned(&mut self, position: u64, state: Vec<u8>) -> Result<(), TransferError> {
        self.served.lock().unwrap().provided = Some((position, state.len(), Instant::now()));
        self.kept = Some(state);
        Ok(())
    }
    fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
        None
    }
}

struct Run {
    longest_turn: Duration,
    serve: Duration,
    /// From the ask until the state was provided, its position and size.
    provided: Option<(Duration, u64, usize)>,
    done: Duration,
}

fn run(sm: KvMachine, ask: bool, entries: &Arc<Vec<Vec<u8>>>) -> Run {
    let served = Arc::new(Mutex::new(Served::default()));
    let backend = Feed {
        view_sent: false,
        ask,
        entries: Arc::clone(entries),
        next: 0,
        served: Arc::clone(&served),
        kept: None,
    };
    let cfg = ReplicaConfig {
        idle_park: Duration::from_millis(1),
        ..ReplicaConfig::default()
    };
    let t = Instant::now();
    let replica =
        Replica::spawn_joinable(NodeId(0), move || Ok::<_, String>(backend), sm, cfg).unwrap();
    let metrics = replica.handle().metrics().clone();
    let finished = |served: &Served| {
        metrics
            .commands_applied
            .load(std::sync::atomic::Ordering::Relaxed)
            >= ENTRIES as u64
            && (!ask || served.provided.is_some())
    };
    let mut done = None;
    while !finished(&served.lock().unwrap()) {
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "never applied everything or never served"
        );
        if done.is_none()
            && metrics
                .commands_applied
                .load(std::sync::atomic::Ordering::Relaxed)
                >= ENTRIES as u64
        {
            done = Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let done = done.unwrap_or_else(|| t.elapsed());
    // Read once the driver stopped: it records a hand-over's hold after the backend took it.
    drop(replica.shutdown().unwrap());
    let us = |a: &std::sync::atomic::AtomicU64| {
        Duration::from_micros(a.load(std::sync::atomic::Ordering::Relaxed))
    };
    let (longest_turn, serve) = (us(&metrics.longest_turn_us), us(&metrics.longest_serve_us));
    let s = served.lock().unwrap();
    let provided = match (s.asked, s.provided) {
        (Some(asked), Some((position, len, at))) => Some((at - asked, position, len)),
        _ => None,
    };
    Run {
        longest_turn,
        serve,
        provided,
        done,
    }
}

#[test]
fn serve_pause() {
    let Ok(sizes) = std::env::var("SQUALL_KV_SERVE_BENCH") else {
        eprintln!("skipped: set SQUALL_KV_SERVE_BENCH=<MB>[,<MB>…] to measure");
        return;
    };
    let rounds = std::env::var("SQUALL_KV_SERVE_ROUNDS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(2);
    for mb in sizes
        .split(',')
        .filter_map(|s| s.trim().parse::<usize>().ok())
    {
        let m = store(mb);
        let keys = m.len();
        let snapshot = ReplicaCore::new(NodeId(1), m.clone(), CoreConfig::default())
            .unwrap()
            .snapshot()
            .encode()
            .len();
        let state = m.snapshot();
        drop(m);
        let entries = Arc::new(entries(|n| (n % keys) as u64, 80));
        eprintln!("{mb} MB ({keys} keys, snapshot {snapshot} bytes):");
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        for round in 0..rounds {
            // A store of its own each (a clone would share nodes: writes would copy them).
            let own = |capture: bool| {
                let mut m = KvMachine::default().capturing(capture);
                m.restore(&state).unwrap();
                m
            };
            let none = run(own(true), false, &entries);
            let inline = run(own(false), true, &entries);
            let off = run(own(true), true, &entries);
            for (name, r) in [("none", &none), ("inline", &inline), ("off-thread", &off)] {
                let provided = r.provided.map_or(String::from("not asked"), |(d, p, len)| {
                    format!(
                        "provided {len} bytes at position {p} {:8.1} ms after the ask",
                        ms(d)
                    )
                });
                eprintln!(
                    "  round {round} {name:>10}: serve held the replica's thread {:8.3} ms, longest driver turn {:8.1} ms, {provided}, {ENTRIES} entries applied after {:8.1} ms",
                    ms(r.serve),
                    ms(r.longest_turn),
                    ms(r.done)
                );
            }
            eprintln!(
                "  round {round}: serve's hold off-thread / inline {:.5}; longest turn / none's: inline {:.2}, off-thread {:.2}; off-thread / inline {:.3}; all applied / none's: inline {:.2}, off-thread {:.2}",
                ms(off.serve) / ms(inline.serve),
                ms(inline.longest_turn) / ms(none.longest_turn),
                ms(off.longest_turn) / ms(none.longest_turn),
                ms(off.longest_turn) / ms(inline.longest_turn),
                ms(inline.done) / ms(none.done),
                ms(off.done) / ms(none.done),
            );
        }
    }
}
