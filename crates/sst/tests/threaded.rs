//! The table over the threaded fabric: real threads, real races, one driver per member.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use squall_sst::{Driver, DriverConfig, SchemaBuilder, Smc, SmcConfig, SmcError, Sst, SstConfig};
use squall_transport::{NodeId, RegionId, RegionSpec, Transport};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};

const REGION: RegionId = RegionId(0);

fn message(sender: u32, index: u64, len: usize) -> Vec<u8> {
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&sender.to_le_bytes());
    m.extend_from_slice(&index.to_le_bytes());
    while m.len() < len {
        m.push((index as usize * 13 + m.len() + sender as usize) as u8);
    }
    m
}

#[test]
fn smc_three_members_on_threads_deliver_everything_in_order() {
    const N: usize = 3;
    const M: u64 = 3000;
    let smc_cfg = SmcConfig {
        window: 8,
        slot_size: 256,
    };
    let mut b = SchemaBuilder::new(N);
    let fields = Smc::declare(&mut b, smc_cfg).expect("valid");
    let schema = b.build().expect("valid");
    let nodes = ThreadedFabric::new(ThreadedConfig::default())
        .expect("valid")
        .cluster(N, &[RegionSpec::new(REGION, schema.table_len())])
        .expect("valid");
    let done = Arc::new(AtomicUsize::new(0));
    std::thread::scope(|scope| {
        let handles: Vec<_> = nodes
            .into_iter()
            .map(|node| {
                let (schema, done) = (schema.clone(), done.clone());
                scope.spawn(move || -> Result<Vec<u64>, String> {
                    // Detection is not under test here: a generous timeout keeps a thread starved
                    // on a loaded machine from being suspected.
                    let cfg = SstConfig {
                        suspicion_timeout: Duration::from_secs(5),
                        ..SstConfig::all(REGION, &node)
                    };
                    let me = node_id(&cfg, &node);
                    let mut sst = Sst::new(node, schema, cfg).map_err(|e| e.to_string())?;
                    let mut smc = Smc::new(fields, &mut sst);
                    let mut next = [0u64; N];
                    let mut bad: Option<String> = None;
                    let mut finished = false;
                    let mut driver = Driver::new(DriverConfig::default());
                    driver
                        .run(&mut sst, |s| {
                            let mut busy = false;
                            if smc.sent() < M {
                                let i = smc.sent();
                                let len = 12 + (i as usize * 7) % 240;
                                match smc.send(s, &message(me, i, len)) {
                                    Ok(_) => busy = true,
                                    Err(SmcError::WindowFull { .. }) => {}
                                    Err(e) => bad = Some(e.to_string()),
                                }
                            }
                            let got = smc
                                .poll(s, |from, index, m| {
                                    let f = from.index();
                                    if index != next[f]
                                        || m != message(from.0, index, m.len()).as_slice()
                                    {
                                        bad.get_or_insert(format!(
                                            "n{me} got {index} from {from} expecting {}",
                                            next[f]
                                        ));
                                    }
                                    next[f] = index + 1;
                                })
                                .map_err(|e| match e {
                                    SmcError::Sst(e) => e,
                                    other => panic!("smc: {other}"),
                                })?;
                            if !finished && next.iter().all(|&k| k == M) {
                                finished = true;
                                done.fetch_add(1, Ordering::AcqRel);
                            }
                            if bad.is_some() || done.load(Ordering::Acquire) == N {
                                return Ok(ControlFlow::Break(()));
                            }
                            Ok(ControlFlow::Continue(busy || got > 0))
                        })
                        .map_err(|e| e.to_string())?;
                    if let Some(b) = bad {
                        return Err(b);
                    }
                    if !sst.suspects().is_empty() {
                        return Err(format!("n{me} suspects {:?}", sst.suspects()));
                    }
                    Ok(next.to_vec())
                })
            })
            .collect();
        for h in handles {
            let got = h.join().expect("no panic").expect("member succeeds");
            assert_eq!(got, vec![M; N]);
        }
    });
}

fn node_id<T: Transport>(_cfg: &SstConfig, node: &T) -> u32 {
    node.local_id().0
}

#[test]
fn crashed_member_is_suspected_within_the_timeout_on_threads() {
    const N: usize = 3;
    let schema = SchemaBuilder::new(N).build().expect("valid");
    let nodes = ThreadedFabric::new(ThreadedConfig {
        op_timeout: Duration::from_millis(150),
        ..Default::default()
    })
    .expect("valid")
    .cluster(N, &[RegionSpec::new(REGION, schema.table_len())])
    .expect("valid");
    let faults = nodes[0].faults();
    let timeout = Duration::from_millis(150);
    let start = Instant::now();
    let crash_at = Duration::from_millis(100);
    std::thread::scope(|scope| {
        let handles: Vec<_> = nodes
            .into_iter()
            .map(|node| {
                let schema = schema.clone();
                scope.spawn(move || {
                    let me = node.local_id();
                    let cfg = SstConfig {
                        heartbeat_interval: Duration::from_millis(2),
                        suspicion_timeout: timeout,
                        ..SstConfig::all(REGION, &node)
                    };
                    let mut sst = Sst::new(node, schema, cfg).expect("valid");
                    let mut driver = Driver::new(DriverConfig::default());
                    let r = driver.run(&mut sst, |s| {
                        if s.is_suspected(2) || start.elapsed() > Duration::from_secs(5) {
                            return Ok(ControlFlow::Break(()));
                        }
                        Ok(ControlFlow::Continue(false))
                    });
                    let history = format!("{:?} now {:?}", sst.suspicions(), sst.now());
                    (me, r, start.elapsed(), sst.suspects(), history)
                })
            })
            .collect();
        std::thread::sleep(crash_at);
        let crashed = start.elapsed(); // the crash takes effect during the call
        faults.crash(NodeId(2));
        for h in handles {
            let (me, r, at, suspects, history) = h.join().expect("no panic");
            assert!(
                at >= crashed,
                "{me} stopped at {at:?} before the crash at {crashed:?}: {history} {r:?}"
            );
            if me == NodeId(2) {
                assert!(r.is_err(), "the crashed member's endpoint is closed");
                continue;
            }
            r.expect("live members keep running");
            assert_eq!(suspects, vec![NodeId(2)], "{me}");
            assert!(
                at - crashed < timeout + Duration::from_millis(500),
                "{me} took {:?} to suspect",
                at - crashed
            );
        }
    });
}

/// Parked drivers wake as soon as a write lands: ping-pong through predicates with spinning
/// turned off, so every hop parks and is woken by the transport (Derecho #93 was a fixed 1 ms
/// idle sleep that showed up as 1 ms latency spikes).
#[test]
fn parked_drivers_wake_on_remote_writes() {
    use squall_sst::PredicateKind;
    use std::cell::Cell;
    use std::rc::Rc;
    const ROUNDS: u64 = 300;
    let mut b = SchemaBuilder::new(2);
    let ball = b.counter("ball");
    let schema = b.build().expect("valid");
    let nodes = ThreadedFabric::new(ThreadedConfig::default())
        .expect("valid")
        .cluster(2, &[RegionSpec::new(REGION, schema.table_len())])
        .expect("valid");
    let start = Instant::now();
    let parks: Vec<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = nodes
            .into_iter()
            .map(|node| {
                let schema = schema.clone();
                scope.spawn(move || {
                    let cfg = SstConfig::all(REGION, &node);
                    let mut sst = Sst::new(node, schema, cfg).expect("valid");
                    let me = sst.my_row();
                    let other = 1 - me;
                    let seen = Rc::new(Cell::new(0u64));
                    let s2 = seen.clone();
                    // Hit the ball back whenever the other side's count passes ours.
                    sst.insert(
                        PredicateKind::Recurrent,
                        move |s| s.get(other, ball) + u64::from(me == 0) > s.get(me, ball),
                        move |s| {
                            // Emulate a little work before hitting back, so that the other
                            // driver, finding nothing to do, really parks: when both threads
                            // run at once on an idle machine the ball would otherwise come back
                            // before anyone parks, and the test would prove nothing.
                            std::thread::sleep(Duration::from_micros(50));
                            let v = s.get(other, ball) + u64::from(me == 0);
                            s.set(ball, v);
                            let _ = s.push(ball.range());
                            s2.set(v);
                        },
                    );
                    let mut driver = Driver::new(DriverConfig {
                        spin_for: Duration::ZERO,
                        ..DriverConfig::default()
                    });
                    driver
                        .run(&mut sst, |s| {
                            let done = s.get(0, ball) >= ROUNDS && s.get(1, ball) >= ROUNDS;
                            if done || start.elapsed() > Duration::from_secs(20) {
                                Ok(ControlFlow::Break(()))
                            } else {
                                Ok(ControlFlow::Continue(false))
                            }
                        })
                        .expect("runs");
                    assert!(seen.get() >= ROUNDS);
                    driver.parks()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    let per_hop = start.elapsed() / (2 * ROUNDS as u32);
    eprintln!("ping-pong with parking: {per_hop:?} per hop, parks {parks:?}");
    assert!(parks.iter().sum::<u64>() > ROUNDS, "the drivers did park");
    assert!(
        per_hop < Duration::from_millis(2),
        "{per_hop:?} per hop: parked drivers are not woken by writes"
    );
}
