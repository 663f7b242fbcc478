//! What installing a large state costs the replica's thread (s22): `SQUALL_KV_INSTALL_BENCH=
//! <MB>[,<MB>…]` (default: skipped) builds a `KvMachine` store of about that many megabytes
//! (keys of 19 bytes, values of 80), takes its replica snapshot, and runs three replicas one
//! after the other on a fake backend whose every poll hands out 4 log entries of 50 puts
//! (10 000 entries, as fast as the replica polls), `SQUALL_KV_INSTALL_ROUNDS` times (default
//! 2):
//!
//! - *none*: a replica that holds the store from the start (no install: the baseline);
//! - *inline*: a joiner that installs the snapshot at its first view by `restore` on the
//!   replica's thread (`KvMachine::decoding(false)`, the behaviour before s22);
//! - *off-thread*: a joiner whose state is decoded on the install thread
//!   (`StateMachine::snapshot_decoder`, the default).
//!
//! For each: the longest the replica's thread spent installing the state
//! (`Metrics::longest_install_us`: the restore inline, the swap off-thread), the replica's longest driver turn (`Metrics::longest_turn_us`: the longest its
//! backend went unpolled), the time from its start until a local read is answered (serving)
//! and until every entry is applied, and the polls of its backend until it served.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use squall_kv::{KvMachine, KvOp};
use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
use squall_smr::wire::{ReadMode, Request, Response};
use squall_smr::{
    CoreConfig, Replica, ReplicaConfig, ReplicaCore, StateMachine, StateTransfer, TransferError,
};
use squall_transport::{NodeId, Waker};

mod pause;
use pause::{ENTRIES, entries, hand_out, store};

/// A backend whose first poll hands out view 1 (and, for a joiner, the state at position 0),
/// then `PER_POLL` entries a poll.
struct Feed {
    view_sent: bool,
    state: Option<(u64, Vec<u8>)>,
    holds: bool,
    entries: Arc<Vec<Vec<u8>>>,
    next: usize,
    polls: Arc<AtomicU64>,
}

impl TotalOrder for Feed {
    fn me(&self) -> NodeId {
        NodeId(0)
    }
    fn submit(&mut self, _: &[u8]) -> Result<(), SubmitError> {
        Err(SubmitError::WindowFull)
    }
    fn poll(&mut self, out: &mut Vec<Upcall<Delivery>>) -> bool {
        self.polls.fetch_add(1, Ordering::Relaxed);
        hand_out(
            &mut self.view_sent,
            NodeId(1),
            &self.entries,
            &mut self.next,
            out,
        )
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
        self.holds
    }
    fn state_wanted(&self) -> bool {
        false
    }
    fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> {
        Ok(())
    }
    fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
        self.state.take()
    }
}

struct Run {
    longest_turn: Duration,
    install: Duration,
    serving: Duration,
    done: Duration,
    polls_until_serving: u64,
}

fn run(sm: KvMachine, state: Option<Vec<u8>>, entries: &Arc<Vec<Vec<u8>>>) -> Run {
    let polls = Arc::new(AtomicU64::new(0));
    let backend = Feed {
        view_sent: false,
        holds: state.is_none(),
        state: state.map(|s| (0, s)),
        entries: Arc::clone(entries),
        next: 0,
        polls: Arc::clone(&polls),
    };
    let cfg = ReplicaConfig {
        idle_park: Duration::from_millis(1),
        ..ReplicaConfig::default()
    };
    let t = Instant::now();
    let replica =
        Replica::spawn_joinable(NodeId(0), move || Ok::<_, String>(backend), sm, cfg).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let read = Request::Read {
        mode: ReadMode::Local,
        query: KvOp::Get { key: b"x".to_vec() }.encode(),
    };
    let handle = replica.handle();
    let (serving, polls_until_serving) = loop {
        if let Response::Ok(_) = rt.block_on(handle.call(read.clone())) {
            break (t.elapsed(), polls.load(Ordering::Relaxed));
        }
        assert!(t.elapsed() < Duration::from_secs(300), "never served");
        std::thread::sleep(Duration::from_millis(1));
    };
    let metrics = handle.metrics().clone();
    while metrics.commands_applied.load(Ordering::Relaxed) < ENTRIES as u64 {
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "never applied everything"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let done = t.elapsed();
    let longest_turn = Duration::from_micros(metrics.longest_turn_us.load(Ordering::Relaxed));
    let install = Duration::from_micros(metrics.longest_install_us.load(Ordering::Relaxed));
    drop(replica.shutdown().unwrap());
    Run {
        longest_turn,
        install,
        serving,
        done,
        polls_until_serving,
    }
}

#[test]
fn install_pause() {
    let Ok(sizes) = std::env::var("SQUALL_KV_INSTALL_BENCH") else {
        eprintln!("skipped: set SQUALL_KV_INSTALL_BENCH=<MB>[,<MB>…] to measure");
        return;
    };
    let rounds = std::env::var("SQUALL_KV_INSTALL_ROUNDS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(2);
    let entries = Arc::new(entries(|n| n as u64, 16));
    for mb in sizes
        .split(',')
        .filter_map(|s| s.trim().parse::<usize>().ok())
    {
        let m = store(mb);
        let keys = m.len();
        let snapshot = ReplicaCore::new(NodeId(1), m.clone(), CoreConfig::default())
            .unwrap()
            .snapshot()
            .encode();
        let state = m.snapshot();
        drop(m);
        let t = Instant::now();
        let mut restored = KvMachine::default();
        restored.restore(&state).unwrap();
        let restore = t.elapsed();
        drop(restored);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        eprintln!(
            "{mb} MB ({keys} keys, snapshot {} bytes; KvMachine::restore alone {:.1} ms):",
            snapshot.len(),
            ms(restore)
        );
        for round in 0..rounds {
            // A store of its own (a clone would share nodes with `m`: writes would copy them).
            let mut own = KvMachine::default();
            own.restore(&state).unwrap();
            let none = run(own, None, &entries);
            let inline = run(
                KvMachine::default().decoding(false),
                Some(snapshot.clone()),
                &entries,
            );
            let off = run(KvMachine::default(), Some(snapshot.clone()), &entries);
            for (name, r) in [("none", &none), ("inline", &inline), ("off-thread", &off)] {
                eprintln!(
                    "  round {round} {name:>10}: install held the replica's thread {:8.3} ms, longest driver turn {:8.1} ms, serving after {:8.1} ms ({} polls), {ENTRIES} entries applied after {:8.1} ms",
                    ms(r.install),
                    ms(r.longest_turn),
                    ms(r.serving),
                    r.polls_until_serving,
                    ms(r.done)
                );
            }
            eprintln!(
                "  round {round}: install's hold off-thread / inline {:.5}; longest turn / none's: inline {:.2}, off-thread {:.2}; off-thread / inline {:.3}; all applied / none's: inline {:.2}, off-thread {:.2}",
                ms(off.install) / ms(inline.install),
                ms(inline.longest_turn) / ms(none.longest_turn),
                ms(off.longest_turn) / ms(none.longest_turn),
                ms(off.longest_turn) / ms(inline.longest_turn),
                ms(inline.done) / ms(none.done),
                ms(off.done) / ms(none.done),
            );
        }
    }
}
