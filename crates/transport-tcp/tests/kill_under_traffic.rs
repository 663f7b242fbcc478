//! A crash under load is blamed on the crashed node only.
//!
//! Three nodes, each in its own OS process (see `common::procs`). The two survivors keep
//! posting signaled writes to every peer while the third is killed with `kill -9`. Each
//! survivor must report the victim failed, and never report the other survivor: no
//! `PeerFailed` and no failed completion for a live peer.
//!
//! The survivors' proxies are borrowed by the driving threads, never moved into them.
//! Dropping a [`common::procs::ProcNode`] kills its node process. If a thread dropped its
//! node when it finished, the other survivor (still in its last round) could see that node's
//! connection close and rightly report it. This test once failed that way, in about one run
//! in four. The failure was in the test, not in the transport.
mod common;

use std::time::{Duration, Instant};

use squall_transport::{
    Event, FailureCause, LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Transport,
};

/// Entry point of the node processes this binary spawns; does nothing when run by hand.
#[test]
#[ignore = "entry point of the node processes that the other tests spawn"]
fn child_node_process() {
    if let Ok(addr) = std::env::var("SQUALL_TCP_CTRL") {
        common::procs::child_main(&addr);
    }
}

#[test]
fn killing_a_node_under_traffic_fails_only_that_node() {
    const R: RegionId = RegionId(0);
    const VICTIM: NodeId = NodeId(2);
    /// How long the survivors post; the victim is killed a third of the way in.
    const TRAFFIC: Duration = Duration::from_millis(1500);
    const KILL_AFTER: Duration = Duration::from_millis(500);

    // Timeouts far beyond the test's length: only the closed connection can reveal the crash.
    let mut nodes = common::procs::spawn_cluster(3, &[RegionSpec::new(R, 4096)], |c| {
        c.heartbeat_timeout = Duration::from_secs(5);
        c.op_timeout = Duration::from_secs(5);
    });
    let mut victim = nodes.pop().expect("three nodes");
    assert_eq!(victim.local_id(), VICTIM);

    let start = Instant::now();
    // Per survivor: every event other than a successful completion.
    let unusual: Vec<Vec<Event>> = std::thread::scope(|s| {
        let drivers: Vec<_> = nodes
            .iter_mut()
            .map(|n| {
                s.spawn(move || {
                    let me = n.local_id();
                    let mut seen = Vec::new();
                    let mut victim_failed = false;
                    let mut events = [Event::PeerFailed {
                        peer: me,
                        cause: FailureCause::Local,
                    }; 32];
                    while start.elapsed() < TRAFFIC {
                        for p in (0..3).map(NodeId) {
                            if p == me || (p == VICTIM && victim_failed) {
                                continue;
                            }
                            let src = LocalSlice::new(R, 0, 64);
                            let dst = RemoteAddr::new(R, 64 * me.index());
                            // QueueFull is harmless here; anything that fails shows up as events.
                            let _ = n.write(p, src, dst, Signal::Signaled);
                        }
                        let k = n.poll(&mut events);
                        for e in &events[..k] {
                            if matches!(e, Event::PeerFailed { peer, .. } if *peer == VICTIM) {
                                victim_failed = true;
                                n.report_failed(VICTIM);
                            }
                            if !matches!(e, Event::Completion(c) if c.result.is_ok()) {
                                seen.push(*e);
                            }
                        }
                        n.wait(Duration::from_millis(1));
                    }
                    seen
                })
            })
            .collect();
        std::thread::sleep(KILL_AFTER);
        victim.kill();
        drivers
            .into_iter()
            .map(|h| h.join().expect("driver thread"))
            .collect()
    });

    for (n, seen) in nodes.iter().zip(&unusual) {
        let me = n.local_id();
        let about_live: Vec<&Event> = seen
            .iter()
            .filter(|e| match e {
                Event::PeerFailed { peer, .. } | Event::PeerConnected { peer, .. } => {
                    *peer != VICTIM
                }
                Event::Completion(c) => c.peer != VICTIM,
            })
            .collect();
        assert!(
            about_live.is_empty(),
            "{me} reported a live peer: {about_live:?}"
        );
        assert!(
            seen.iter()
                .any(|e| matches!(e, Event::PeerFailed { peer, .. } if *peer == VICTIM)),
            "{me} never reported the killed {VICTIM} failed: {seen:?}"
        );
    }
    // `nodes` (the survivors' processes) are dropped, and so killed, only here.
}
