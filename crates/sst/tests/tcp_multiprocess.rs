//! Three members, each with its TCP endpoint in its own OS process (the TCP crate's process
//! harness: region memory shared with the parent through `memfd`, every op travelling child to
//! child over TCP): SMC delivers every member's messages to everyone exactly once in sender order,
//! and after `kill -9` of one member the others suspect it within the timeout.

#[path = "../../transport-tcp/tests/common/mod.rs"]
mod common;

use std::ops::ControlFlow;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use squall_sst::{Driver, DriverConfig, SchemaBuilder, Smc, SmcConfig, SmcError, Sst, SstConfig};
use squall_transport::{NodeId, RegionId, RegionSpec, Transport};

const REGION: RegionId = RegionId(0);

/// Entry point of the node processes this binary spawns; does nothing when run by hand.
#[test]
#[ignore = "entry point of the node processes that the other tests spawn"]
fn child_node_process() {
    if let Ok(addr) = std::env::var("SQUALL_TCP_CTRL") {
        common::procs::child_main(&addr);
    }
}

/// TCP-level timeouts generous enough for six node processes on a loaded 2-core machine: these
/// tests are about SMC and about a *killed* process, whose sockets the kernel closes at once.
fn relaxed(c: &mut squall_transport_tcp::ClusterConfig) {
    c.heartbeat_timeout = Duration::from_secs(5);
    c.op_timeout = Duration::from_secs(5);
}

fn message(sender: u32, index: u64) -> Vec<u8> {
    let mut m = sender.to_le_bytes().to_vec();
    m.extend_from_slice(&index.to_le_bytes());
    m.extend((0..(index % 50) as u8).map(|b| b ^ sender as u8));
    m
}

#[test]
fn smc_across_three_processes_agrees_on_per_sender_order() {
    let smc_cfg = SmcConfig {
        window: 8,
        slot_size: 128,
    };
    let mut b = SchemaBuilder::new(N);
    let fields = Smc::declare(&mut b, smc_cfg).expect("valid");
    let schema = b.build().expect("valid");
    let nodes =
        common::procs::spawn_cluster(N, &[RegionSpec::new(REGION, schema.table_len())], relaxed);
    let pids: Vec<u32> = nodes.iter().map(|n| n.pid()).collect();
    assert!(
        pids.iter().all(|&p| p != std::process::id()),
        "members run in their own processes"
    );
    let done = Arc::new(AtomicUsize::new(0));
    // Dropping a node's proxy kills its process: every member keeps its node until all are done,
    // or the first to finish would look like a crash to the others.
    let all_done = std::sync::Barrier::new(N);
    std::thread::scope(|scope| {
        let handles: Vec<_> = nodes
            .into_iter()
            .map(|node| {
                let (schema, done) = (schema.clone(), done.clone());
                let all_done = &all_done;
                scope.spawn(move || {
                    let mut sst = None;
                    let result = member(node, schema, fields, &done, &mut sst);
                    all_done.wait();
                    drop(sst);
                    result
                })
            })
            .collect();
        for h in handles {
            let got = h.join().expect("no panic").expect("member succeeds");
            assert_eq!(
                got,
                vec![M; N],
                "every member delivered every message of every sender"
            );
        }
    });
}

const N: usize = 3;
const M: u64 = 300;

/// One member: sends `M` messages and receives everyone's, checking per-sender order. The table
/// is left in `keep` so the caller decides when the node (and its process) goes away.
fn member(
    node: common::procs::ProcNode,
    schema: squall_sst::Schema,
    fields: squall_sst::SmcFields,
    done: &AtomicUsize,
    keep: &mut Option<Sst<common::procs::ProcNode>>,
) -> Result<Vec<u64>, String> {
    let me = node.local_id().0;
    let cfg = SstConfig {
        suspicion_timeout: Duration::from_secs(10),
        ..SstConfig::all(REGION, &node)
    };
    let sst = keep.insert(Sst::new(node, schema, cfg).map_err(|e| e.to_string())?);
    let mut smc = Smc::new(fields, sst);
    let mut next = [0u64; N];
    let mut bad: Option<String> = None;
    let mut finished = false;
    let started = Instant::now();
    Driver::new(DriverConfig::default())
        .run(sst, |s| {
            let mut busy = false;
            if smc.sent() < M {
                match smc.send(s, &message(me, smc.sent())) {
                    Ok(_) => busy = true,
                    Err(SmcError::WindowFull { .. }) => {}
                    Err(e) => bad = Some(e.to_string()),
                }
            }
            let got = smc
                .poll(s, |from, index, m| {
                    let f = from.index();
                    if index != next[f] || m != message(from.0, index).as_slice() {
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
            if bad.is_some()
                || done.load(Ordering::Acquire) == N
                || started.elapsed() > Duration::from_secs(120)
            {
                return Ok(ControlFlow::Break(()));
            }
            Ok(ControlFlow::Continue(busy || got > 0))
        })
        .map_err(|e| e.to_string())?;
    match bad {
        Some(b) => Err(b),
        None => Ok(next.to_vec()),
    }
}

#[test]
fn kill_9_of_a_member_is_suspected_by_the_others_within_the_timeout() {
    const N: usize = 3;
    let schema = SchemaBuilder::new(N).build().expect("valid");
    let nodes =
        common::procs::spawn_cluster(N, &[RegionSpec::new(REGION, schema.table_len())], relaxed);
    let victim_pid = nodes[2].pid();
    let timeout = Duration::from_secs(2);
    let start = Instant::now();
    let kill_at = Duration::from_millis(500);
    // Dropping a node's proxy kills its process: survivors must keep theirs until both are done,
    // or the first to finish would kill itself under the other's feet.
    let survivors_done = std::sync::Barrier::new(N - 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = nodes
            .into_iter()
            .map(|node| {
                let schema = schema.clone();
                let survivors_done = &survivors_done;
                scope.spawn(move || {
                    let me = node.local_id();
                    let cfg = SstConfig {
                        heartbeat_interval: Duration::from_millis(20),
                        suspicion_timeout: timeout,
                        ..SstConfig::all(REGION, &node)
                    };
                    let mut sst = Sst::new(node, schema, cfg).expect("valid");
                    let r = Driver::new(DriverConfig::default()).run(&mut sst, |s| {
                        if s.is_suspected(2) || start.elapsed() > Duration::from_secs(20) {
                            return Ok(ControlFlow::Break(()));
                        }
                        Ok(ControlFlow::Continue(false))
                    });
                    let result = (
                        me,
                        r.map_err(|e| format!("{e}; suspicions: {:?}", sst.suspicions())),
                        start.elapsed(),
                        sst.suspects(),
                    );
                    if me != NodeId(2) {
                        survivors_done.wait();
                    }
                    result
                })
            })
            .collect();
        std::thread::sleep(kill_at);
        let killed = start.elapsed();
        let status = Command::new("kill")
            .args(["-9", &victim_pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -9 {victim_pid}");
        for h in handles {
            let (me, r, at, suspects) = h.join().expect("no panic");
            if me == NodeId(2) {
                assert!(r.is_err(), "the killed member's endpoint is gone");
                continue;
            }
            if let Err(e) = &r {
                panic!("{me} stopped at {at:?} (killed at {killed:?}): {e}");
            }
            assert_eq!(
                suspects,
                vec![NodeId(2)],
                "{me} suspects exactly the killed member"
            );
            let took = at.saturating_sub(killed);
            assert!(
                took < timeout + Duration::from_millis(1500),
                "{me} took {took:?} to suspect (timeout {timeout:?})"
            );
        }
    });
}
