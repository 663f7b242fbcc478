//! Measurement, not run by default: time from a failure to the new view over TCP, between real
//! processes (see `tests/mp/mod.rs`), split into detection (failure → the first survivor
//! suspects the victim) and protocol (first suspicion → view 1 installed at every survivor),
//! beside the transport's own CAS round trip on loopback measured in the same run.
//!
//! ```text
//! SQUALL_MEMBERSHIP_TCP_BENCH=10 cargo test -p squall-membership --test tcp_failover_bench \
//!     -- --nocapture
//! ```
//!
//! The value is the repetitions per scenario: SIGKILL of a follower, SIGKILL of the leader, and
//! (as root, with iproute2) a follower's link cut in network namespaces. Every repetition is a
//! full checked run (`mp::failure_run`), so a wrong view fails the measurement too.
#![allow(clippy::unwrap_used)]

mod mp;

use std::time::Instant;

use mp::{Failure, Place, Settings, Timing, failure_run, netns_unavailable, topology};
use squall_transport::{
    Event, FailureCause, NodeId, Region, RegionId, RegionSpec, RemoteAddr, Transport,
};
use squall_transport_tcp::{ClusterConfig, TcpNode};

/// Entry point of the member processes this binary spawns; does nothing when run by hand.
#[test]
#[ignore = "entry point of the member processes that the other tests spawn"]
fn member_child() {
    mp::child_main();
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn p90(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[(v.len() * 9 / 10).min(v.len() - 1)]
}

/// Median CAS round trip between two TcpNodes on loopback, in µs.
fn cas_round_trip_us(rounds: usize) -> f64 {
    let ls: Vec<std::net::TcpListener> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let cfg = ClusterConfig::new(
        7,
        ls.iter()
            .enumerate()
            .map(|(i, l)| (NodeId(i as u32), l.local_addr().unwrap())),
    );
    let spec = RegionSpec::new(RegionId(0), 4096);
    let handles: Vec<_> = ls
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let cfg = cfg.clone();
            std::thread::spawn(move || {
                TcpNode::start_on(l, cfg, NodeId(i as u32), vec![Region::new(spec).unwrap()])
                    .unwrap()
            })
        })
        .collect();
    let mut nodes: Vec<TcpNode> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut events = [Event::PeerFailed {
        peer: NodeId(9),
        cause: FailureCause::Local,
    }; 16];
    let mut times = Vec::with_capacity(rounds);
    for i in 0..rounds as u64 {
        let t = Instant::now();
        let op = nodes[0]
            .compare_and_swap(NodeId(1), RemoteAddr::new(RegionId(0), 0), i, i + 1)
            .unwrap();
        'done: loop {
            let n = nodes[0].poll(&mut events);
            for e in &events[..n] {
                if matches!(e, Event::Completion(c) if c.op == op) {
                    break 'done;
                }
            }
        }
        times.push(t.elapsed().as_nanos() as u64);
    }
    median(times) as f64 / 1000.0
}

fn row(name: &str, t: &[Timing], baseline_us: f64) {
    let d: Vec<u64> = t.iter().map(|t| t.detect_us).collect();
    let p: Vec<u64> = t.iter().map(|t| t.protocol_us).collect();
    let f: Vec<u64> = t.iter().map(|t| t.first_view_us).collect();
    println!(
        "| {name} | {} | {:.1} ms (p90 {:.1}) | {:.2} ms (p90 {:.2}) | {:.2} ms | {:.0}x |",
        t.len(),
        median(d) as f64 / 1000.0,
        p90(t.iter().map(|t| t.detect_us).collect()) as f64 / 1000.0,
        median(p.clone()) as f64 / 1000.0,
        p90(p.clone()) as f64 / 1000.0,
        median(f) as f64 / 1000.0,
        median(p) as f64 / baseline_us,
    );
}

#[test]
fn failure_to_new_view_over_tcp() {
    let Some(reps) = std::env::var("SQUALL_MEMBERSHIP_TCP_BENCH")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        println!("set SQUALL_MEMBERSHIP_TCP_BENCH=<repetitions> to measure");
        return;
    };
    let rtt = cas_round_trip_us(2000);
    let s = Settings::fast();
    println!(
        "baseline: CAS round trip on loopback (median of 2000) {rtt:.1} us; GMS heartbeat {:?}, \
         suspicion timeout {:?}; TCP heartbeat {:?}, timeout {:?}",
        s.gms_heartbeat, s.gms_suspicion, s.tcp_heartbeat, s.tcp_timeout
    );
    let places = vec![Place::loopback(); 5];
    let mut rows: Vec<(String, Vec<Timing>)> = Vec::new();
    for (name, victim) in [("SIGKILL follower", 3), ("SIGKILL leader", 0)] {
        let t = (0..reps)
            .map(|_| {
                failure_run(
                    "member_child",
                    &places,
                    Settings::fast(),
                    Failure::Kill(victim),
                    300,
                    300,
                )
                .1
            })
            .collect();
        rows.push((name.into(), t));
    }
    match netns_unavailable() {
        Some(why) => println!("netns link cut skipped: {why}"),
        None => match topology(5, "bench") {
            Err(e) => println!("netns link cut skipped: {e}"),
            Ok((_guard, places)) => {
                let t = (0..reps)
                    .map(|_| {
                        // Bring the link back for the next repetition.
                        let ns = places[2].netns.as_deref().unwrap();
                        mp::ip(&["-n", ns, "link", "set", "eth0", "up"]).unwrap();
                        failure_run(
                            "member_child",
                            &places,
                            Settings::fast(),
                            Failure::Cut(2, &places),
                            300,
                            300,
                        )
                        .1
                    })
                    .collect();
                rows.push(("netns link cut (follower)".into(), t));
            }
        },
    }
    let mut joins: Vec<(usize, Vec<u64>)> = Vec::new();
    for filler in [0usize, 64 << 10, 1 << 20, 8 << 20] {
        let settings = Settings {
            universe: 6,
            state_bytes: filler,
            ..Settings::fast()
        };
        let t: Vec<u64> = (0..reps)
            .map(|_| {
                mp::join_run("member_child", settings.clone(), 300, 300)
                    .1
                    .join_us
            })
            .collect();
        joins.push((filler + 8, t));
    }
    println!(
        "\n| failure | runs | detection (failure -> first suspicion), median | protocol (first suspicion -> view at every survivor), median | first survivor's view, median | protocol / CAS RTT |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (name, t) in &rows {
        row(name, t, rtt);
    }
    let base = median(joins[0].1.clone()) as f64;
    println!(
        "\n| state | runs | join (ask -> view with the state), median (p90) | / 8-byte state | / CAS RTT |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (bytes, t) in &joins {
        let m = median(t.clone()) as f64;
        println!(
            "| {bytes} B | {} | {:.1} ms ({:.1}) | {:.2}x | {:.0}x |",
            t.len(),
            m / 1000.0,
            p90(t.clone()) as f64 / 1000.0,
            m / base,
            m / rtt
        );
    }
}
