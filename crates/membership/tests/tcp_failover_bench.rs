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

use mp::{Failure, PHASES, Place, Settings, Timing, failure_run, netns_unavailable, topology};
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

/// The view change's phases (medians over the repetitions, cumulative from the failure, and
/// the step from the previous phase), then the GMS log appends' fsyncs.
fn phase_table(name: &str, t: &[Timing]) {
    println!(
        "\n{name}: phases of the view change, µs after the failure (median of {})",
        t.len()
    );
    println!("| phase | cumulative, median | step, median |");
    println!("| --- | --- | --- |");
    let detect: Vec<u64> = t.iter().map(|t| t.detect_us).collect();
    println!(
        "| first survivor suspects (detection) | {} | {} |",
        median(detect.clone()),
        median(detect.clone())
    );
    let mut prev = detect;
    for (i, (label, _, _, _)) in PHASES.iter().enumerate() {
        let cum: Vec<u64> = t.iter().map(|t| t.phases[i].unwrap_or(0)).collect();
        let step: Vec<u64> = cum
            .iter()
            .zip(&prev)
            .map(|(c, p)| c.saturating_sub(*p))
            .collect();
        let missing = t.iter().filter(|t| t.phases[i].is_none()).count();
        let note = if missing > 0 {
            format!(" ({missing} runs without it)")
        } else {
            String::new()
        };
        println!(
            "| {label}{note} | {} | {} |",
            median(cum.clone()),
            median(step)
        );
        prev = cum;
    }
    let syncs: Vec<u64> = t.iter().flat_map(|t| t.syncs.iter().copied()).collect();
    if !syncs.is_empty() {
        println!(
            "GMS log appends (write + fsync) at the survivors: {} of them, median {} µs, p90 {} µs",
            syncs.len(),
            median(syncs.clone()),
            p90(syncs)
        );
    }
}

/// Whether the part `name` runs (`SQUALL_MEMBERSHIP_TCP_BENCH_ONLY=kill,cut,join`; all when
/// unset).
fn part(name: &str) -> bool {
    std::env::var("SQUALL_MEMBERSHIP_TCP_BENCH_ONLY")
        .map_or(true, |v| v.split(',').any(|p| p == name))
}

/// Filler bytes of the joins' states (`SQUALL_MEMBERSHIP_TCP_BENCH_STATES=0,65536,…`; by
/// default 0, 64 KiB, 1 MiB, 8 MiB).
fn states() -> Vec<usize> {
    std::env::var("SQUALL_MEMBERSHIP_TCP_BENCH_STATES")
        .map_or(vec![0, 64 << 10, 1 << 20, 8 << 20], |v| {
            v.split(',').filter_map(|x| x.parse().ok()).collect()
        })
}

/// The transfer settings the joins compare (`SQUALL_MEMBERSHIP_TCP_BENCH_TRANSFER=16384x8,…`,
/// `default` for `TransferConfig::new`'s); by default the former defaults (16 KiB chunks, a
/// window of 8) and the current ones.
fn transfers() -> Vec<Option<(usize, usize)>> {
    std::env::var("SQUALL_MEMBERSHIP_TCP_BENCH_TRANSFER").map_or(
        vec![Some((16 << 10, 8)), None],
        |v| {
            v.split(',')
                .map(|x| {
                    x.split_once('x')
                        .and_then(|(c, w)| Some((c.parse().ok()?, w.parse().ok()?)))
                })
                .collect()
        },
    )
}

/// The timing settings: `Settings::fast` (100 ms suspicion), or with
/// `SQUALL_MEMBERSHIP_TCP_BENCH_SLOW=1` the tests' (250 ms; for a loaded machine, where a
/// member starved past 100 ms is removed and the run fails). A SIGKILL is seen through the
/// closed connection, so the kills' figures do not depend on it.
fn timing_settings() -> Settings {
    if std::env::var("SQUALL_MEMBERSHIP_TCP_BENCH_SLOW").is_ok_and(|v| v == "1") {
        Settings::default()
    } else {
        Settings::fast()
    }
}

/// Runs `run` until it completes, at most 3 times; counts the failed tries in `failed`. On the
/// loaded box a member starved past the suspicion timeout during the warm-up is removed (a
/// false suspicion, which the checks of the run reject): such a repetition measures nothing,
/// and its failure is printed.
fn retried<T>(failed: &mut usize, mut run: impl FnMut() -> T) -> T {
    for _ in 0..2 {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut run)) {
            Ok(t) => return t,
            Err(_) => *failed += 1,
        }
    }
    run()
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
    let s = Settings {
        trace: true,
        ..timing_settings()
    };
    println!(
        "baseline: CAS round trip on loopback (median of 2000) {rtt:.1} us; GMS heartbeat {:?}, \
         suspicion timeout {:?}; TCP heartbeat {:?}, timeout {:?}",
        s.gms_heartbeat, s.gms_suspicion, s.tcp_heartbeat, s.tcp_timeout
    );
    let places = vec![Place::loopback(); 5];
    let mut rows: Vec<(String, Vec<Timing>)> = Vec::new();
    // Each SIGKILL twice, the GMS log's `Installed` record synced (as before s15) and not (the
    // member program's default now), repetitions interleaved so that load drifts hit both.
    for (name, victim) in [("SIGKILL follower", 3), ("SIGKILL leader", 0)] {
        if !part("kill") {
            break;
        }
        let mut synced = Vec::new();
        let mut unsynced = Vec::new();
        let mut failed = 0;
        for _ in 0..reps {
            for (sync, into) in [(true, &mut synced), (false, &mut unsynced)] {
                let settings = Settings {
                    sync_installed: sync,
                    ..s.clone()
                };
                into.push(retried(&mut failed, || {
                    failure_run(
                        "member_child",
                        &places,
                        settings.clone(),
                        Failure::Kill(victim),
                        300,
                        300,
                    )
                    .1
                }));
            }
        }
        if failed > 0 {
            println!("{name}: {failed} repetitions failed and were run again (see above)");
        }
        rows.push((format!("{name}, Installed synced"), synced));
        rows.push((format!("{name}, Installed not synced"), unsynced));
    }
    match netns_unavailable() {
        _ if !part("cut") => {}
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
                            s.clone(),
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
    // Joins: the old transfer settings (16 KiB chunks, a window of 8) beside the current
    // defaults, in the same run.
    let mut joins: Vec<(String, usize, Vec<u64>)> = Vec::new();
    for transfer in transfers() {
        let label = transfer.map_or("defaults".to_string(), |(c, w)| {
            format!("{} KiB x {w}", c >> 10)
        });
        for filler in states() {
            if !part("join") {
                break;
            }
            let settings = Settings {
                universe: 6,
                state_bytes: filler,
                transfer,
                ..timing_settings()
            };
            let t: Vec<u64> = (0..reps)
                .map(|_| {
                    mp::join_run("member_child", settings.clone(), 300, 300)
                        .1
                        .join_us
                })
                .collect();
            joins.push((label.clone(), filler + 8, t));
        }
    }
    println!(
        "\n| failure | runs | detection (failure -> first suspicion), median | protocol (first suspicion -> view at every survivor), median | first survivor's view, median | protocol / CAS RTT |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (name, t) in &rows {
        row(name, t, rtt);
    }
    for (name, t) in &rows {
        phase_table(name, t);
    }
    if joins.is_empty() {
        return;
    }
    println!(
        "\n| transfer | state | runs | join (ask -> view with the state), median (p90) | / 8-byte state | / CAS RTT | MB/s beyond the 8-byte join |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let mut base = 1.0;
    for (label, bytes, t) in &joins {
        let m = median(t.clone()) as f64;
        if *bytes == 8 {
            base = m;
        }
        let rate = if m > base {
            format!("{:.0}", (*bytes - 8) as f64 / (m - base))
        } else {
            "-".into()
        };
        println!(
            "| {label} | {bytes} B | {} | {:.1} ms ({:.1}) | {:.2}x | {:.0}x | {rate} |",
            t.len(),
            m / 1000.0,
            p90(t.clone()) as f64 / 1000.0,
            m / base,
            m / rtt
        );
    }
}
