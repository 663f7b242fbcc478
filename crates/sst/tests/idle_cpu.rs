//! Idle cost of the driver: three members on the threaded fabric, each with a driver thread and
//! nothing to do but heartbeats, for 2 s. Process CPU time is read from `/proc/self/stat`
//! (Linux), so this file holds a single test to keep other tests' CPU out of the figure.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use squall_sst::{Driver, DriverConfig, PredicateKind, SchemaBuilder, Sst, SstConfig};
use squall_transport::{RegionId, RegionSpec};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};

/// User plus system CPU time of this process, in clock ticks.
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state is field 3, utime field 14, stime field 15 (1-based overall).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Runs three drivers for `run_for`; returns CPU used as a fraction of one core.
fn measure(cfg: DriverConfig, run_for: Duration) -> Option<f64> {
    const N: usize = 3;
    let mut b = SchemaBuilder::new(N);
    let c = b.counter("c");
    let schema = b.build().ok()?;
    let nodes = ThreadedFabric::new(ThreadedConfig::default())
        .ok()?
        .cluster(N, &[RegionSpec::new(RegionId(0), schema.table_len())])
        .ok()?;
    let before = cpu_ticks()?;
    let start = Instant::now();
    std::thread::scope(|scope| {
        for node in nodes {
            let schema = schema.clone();
            scope.spawn(move || {
                // 10 ms heartbeats; a generous timeout, since three busy-polling threads may
                // share fewer cores and this test measures CPU, not detection.
                let cfg_sst = SstConfig {
                    suspicion_timeout: Duration::from_secs(10),
                    ..SstConfig::all(RegionId(0), &node)
                };
                let mut sst = Sst::new(node, schema, cfg_sst).expect("valid");
                // Ten registered predicates that never hold: evaluated every round.
                for k in 0..10 {
                    sst.insert(PredicateKind::OneTime, move |s| s.max(c) > 1000 + k, |_| {});
                }
                let mut driver = Driver::new(cfg);
                driver
                    .run(&mut sst, |_| {
                        if start.elapsed() >= run_for {
                            Ok(ControlFlow::Break(()))
                        } else {
                            Ok(ControlFlow::Continue(false))
                        }
                    })
                    .expect("no failures while idle");
                assert!(sst.suspects().is_empty());
            });
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    let ticks = cpu_ticks()? - before;
    Some(ticks as f64 / 100.0 / elapsed) // USER_HZ is 100 on Linux
}

#[test]
fn idle_drivers_cost_almost_nothing() {
    let Some(idle) = measure(DriverConfig::default(), Duration::from_secs(2)) else {
        eprintln!("no /proc/self/stat: skipping the CPU measurement");
        return;
    };
    let busy = measure(
        DriverConfig {
            busy_poll: true,
            ..DriverConfig::default()
        },
        Duration::from_millis(500),
    )
    .unwrap_or(0.0);
    eprintln!(
        "idle CPU of 3 parked drivers over 2 s: {:.2}% of one core in total; busy_poll: {:.0}%",
        idle * 100.0,
        busy * 100.0
    );
    assert!(
        idle < 0.15,
        "idle drivers used {:.1}% of a core",
        idle * 100.0
    );
    assert!(busy > idle, "busy_poll should burn more than parking");
}
