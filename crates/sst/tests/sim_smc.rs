//! SMC on the simulator: for random schedules, window sizes, slow nodes and crashes, every
//! message is delivered exactly once, in sender order, to every non-failed member, and no
//! receiver ever reads a slot being overwritten (each message carries its sender, index and a
//! checksum, and the ring checks each slot's header).

mod common;

use std::time::Duration;

use common::{Cluster, check, encode};
use proptest::prelude::*;
use squall_sst::{SmcConfig, SmcError, SstError};
use squall_transport::{NodeId, Time};
use squall_transport_mem::sim::check_seeds;

#[derive(Clone, Debug)]
struct Plan {
    seed: u64,
    n: usize,
    window: usize,
    slot_size: usize,
    messages: Vec<u64>,
    slow: Option<(usize, u32)>,
    crash: Option<(usize, u64)>,
    /// Cut this node off from all others at this round (only without a crash): it must stop
    /// with a partition error, the others must carry on.
    partition: Option<(usize, u64)>,
    /// Out of 4: how often a node that sent flushes in the same turn (else it batches).
    flush_odds: u64,
}

fn plan_from_seed(seed: u64) -> Plan {
    // Derive the plan from the seed with a throwaway sim's generator.
    let (sim, _) = squall_transport_mem::sim::Sim::cluster(
        squall_transport_mem::sim::SimConfig::seeded(seed ^ 0x5eed),
        1,
        &[squall_transport::RegionSpec::new(common::REGION, 8)],
    )
    .expect("valid sim");
    let n = 3 + sim.random(2) as usize;
    Plan {
        seed,
        n,
        window: 1 + sim.random(6) as usize,
        slot_size: 24 + 8 * sim.random(6) as usize,
        messages: (0..n).map(|_| sim.random(40)).collect(),
        slow: (sim.random(2) == 0)
            .then(|| (sim.random(n as u64) as usize, 2 + sim.random(3) as u32)),
        crash: (sim.random(2) == 0).then(|| (sim.random(n as u64) as usize, sim.random(3000))),
        flush_odds: 1 + sim.random(4),
        partition: None,
    }
    .with_partition(
        sim.random(3) == 0,
        sim.random(n as u64) as usize,
        sim.random(3000),
    )
}

impl Plan {
    fn with_partition(mut self, yes: bool, node: usize, round: u64) -> Plan {
        if yes && self.crash.is_none() {
            self.partition = Some((node, round));
        }
        self
    }
}

/// Runs `plan`; checks exactly-once, sender order and integrity on the fly and completeness at
/// the end.
fn run(plan: &Plan) -> Result<(), String> {
    let smc = SmcConfig {
        window: plan.window,
        slot_size: plan.slot_size,
    };
    let mut c = Cluster::new(plan.seed, plan.n, smc);
    if let Some((node, factor)) = plan.slow {
        c.sim.slow(NodeId(node as u32), factor);
    }
    let n = plan.n;
    // next[receiver][sender]: the next index the receiver must get from the sender.
    let mut next = vec![vec![0u64; n]; n];
    let mut sent = vec![0u64; n];
    let mut round = 0u64;
    let deadline = Time::ZERO + Duration::from_secs(2);
    loop {
        round += 1;
        if let Some((victim, at)) = plan.crash
            && at == round
        {
            c.crash(victim);
        }
        if let Some((island, at)) = plan.partition
            && at == round
        {
            let rest: Vec<NodeId> = (0..n)
                .filter(|&j| j != island)
                .map(|j| NodeId(j as u32))
                .collect();
            c.sim.partition(&[NodeId(island as u32)], &rest);
        }
        for i in c.turns() {
            let sst = c.nodes[i].as_mut().expect("turns() lists live nodes");
            match sst.poll_once() {
                Ok(_) => {}
                Err(SstError::Partitioned { .. })
                    if plan.partition.is_some_and(|(p, _)| p == i) =>
                {
                    // The minority side stopped, as it must; it counts as failed from now on.
                    c.nodes[i] = None;
                    continue;
                }
                Err(e) => {
                    return Err(format!(
                        "n{i} stopped at {:?}: {e}; {:?}",
                        c.sim.now(),
                        sst.suspicions()
                    ));
                }
            }
            let smc = &mut c.smc[i];
            if sent[i] < plan.messages[i] && c.sim.random(2) == 0 {
                let len = 20 + c.sim.random((plan.slot_size - 19) as u64) as usize;
                match smc.send(sst, &encode(i as u32, sent[i], len)) {
                    Ok(idx) if idx == sent[i] => sent[i] += 1,
                    Ok(idx) => {
                        return Err(format!(
                            "n{i} send returned index {idx}, expected {}",
                            sent[i]
                        ));
                    }
                    Err(SmcError::WindowFull { in_flight, window }) => {
                        if in_flight < window as u64 {
                            return Err(format!("window full at {in_flight} < {window}"));
                        }
                    }
                    Err(e) => return Err(format!("n{i} send: {e}")),
                }
            }
            if c.sim.random(4) < plan.flush_odds {
                smc.flush(sst).map_err(|e| format!("n{i} flush: {e}"))?;
            }
            let mut bad = None;
            let row_next = &mut next[i];
            smc.receive(sst, |from, index, m| {
                let s = from.index();
                if index != row_next[s] {
                    bad.get_or_insert(format!(
                        "n{i} got message {index} from {from}, expected {} (duplicate, gap or reorder)",
                        row_next[s]
                    ));
                }
                if let Err(e) = check(from, index, m) {
                    bad.get_or_insert(format!("at n{i}: {e}"));
                }
                row_next[s] = index + 1;
            })
            .map_err(|e| {
                let sst = c.nodes[i].as_ref().expect("live");
                let guards: Vec<u64> = (0..n).map(|r| sst.get(r, c.fields.smc.sent())).collect();
                format!("n{i} receive at round {round}, {:?}: {e}; guards seen {guards:?}", c.sim.now())
            })?;
            if let Some(b) = bad {
                return Err(b);
            }
        }
        // Done when every live node sent and flushed everything and every live node has every
        // message of every live sender.
        let live: Vec<usize> = (0..n).filter(|&i| c.is_live(i)).collect();
        let island_pending = plan
            .partition
            .is_some_and(|(p, at)| round <= at || c.is_live(p));
        let done = !island_pending
            && live.iter().all(|&r| {
                sent[r] == plan.messages[r] && live.iter().all(|&s| next[r][s] == plan.messages[s])
            });
        if done {
            let delivered: u64 = live.iter().map(|&r| next[r].iter().sum::<u64>()).sum();
            let expected: u64 =
                live.iter().map(|&s| plan.messages[s]).sum::<u64>() * live.len() as u64;
            if delivered < expected {
                return Err(format!("delivered {delivered} < {expected}"));
            }
            return Ok(());
        }
        if c.sim.now() > deadline {
            let lag: Vec<String> = live
                .iter()
                .map(|&r| {
                    format!(
                        "n{r}: sent {}/{} got {:?} suspicions {:?}",
                        sent[r],
                        plan.messages[r],
                        next[r],
                        c.nodes[r].as_ref().map(|s| s.suspicions().to_vec())
                    )
                })
                .collect();
            return Err(format!(
                "stalled at {:?} round {round}: {}",
                c.sim.now(),
                lag.join("; ")
            ));
        }
        c.step_fabric();
    }
}

#[test]
fn smc_delivers_exactly_once_in_order_seed_sweep() {
    check_seeds(
        "smc_delivers_exactly_once_in_order_seed_sweep",
        300,
        |seed| {
            let plan = plan_from_seed(seed);
            run(&plan).map_err(|e| format!("{plan:?}: {e}"))
        },
    );
}

fn plan() -> impl Strategy<Value = Plan> {
    (any::<u64>(), 3usize..=4, 1usize..=6, 0usize..=5, 1u64..=4).prop_flat_map(
        |(seed, n, window, slot, flush_odds)| {
            (
                proptest::collection::vec(0u64..30, n),
                proptest::option::of((0..n, 2u32..=4)),
                proptest::option::of((0..n, 1u64..2500)),
                proptest::option::of((0..n, 1u64..2500)),
            )
                .prop_map(move |(messages, slow, crash, partition)| {
                    Plan {
                        seed,
                        n,
                        window,
                        slot_size: 24 + 8 * slot,
                        messages,
                        slow,
                        crash,
                        flush_odds,
                        partition: None,
                    }
                    .with_partition(
                        partition.is_some(),
                        partition.map_or(0, |p| p.0),
                        partition.map_or(0, |p| p.1),
                    )
                })
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(squall_transport_mem::sim::proptest_cases(64)))]

    #[test]
    fn smc_random_schedules_slow_nodes_and_crashes(plan in plan()) {
        if let Err(e) = run(&plan) {
            return Err(TestCaseError::fail(e));
        }
    }
}

#[test]
fn smc_window_of_one_with_a_slow_receiver() {
    let plan = Plan {
        seed: 11,
        n: 3,
        window: 1,
        slot_size: 24,
        messages: vec![25, 25, 25],
        slow: Some((2, 4)),
        crash: None,
        flush_odds: 4,
        partition: None,
    };
    run(&plan).expect("delivers everything");
}

#[test]
fn smc_sender_crash_mid_stream() {
    let plan = Plan {
        seed: 5,
        n: 3,
        window: 4,
        slot_size: 64,
        messages: vec![30, 30, 30],
        slow: None,
        crash: Some((0, 400)),
        flush_odds: 2,
        partition: None,
    };
    run(&plan).expect("live members still get each other's messages");
}

/// Seed 0 of the sweep caught a real bug: the simulator reads a write's source when it applies
/// it, so a guard write still in flight published a later guard value than the data queued
/// behind it ("slot for message 1 from n1 holds header 0x0"). The guard is now pushed signaled
/// and not changed again until those writes landed.
#[test]
fn regression_guard_changed_under_in_flight_write_seed_0() {
    let plan = plan_from_seed(0);
    assert_eq!(plan.n, 4);
    run(&plan).expect("seed 0 delivers everything");
}

/// Seed 498 once stopped n0 with a partition error: the harness let the simulator jump virtual
/// time by whole op timeouts between two rounds (a node frozen for 2 ms), so n0's detector
/// rightly timed out both peers. The harness now moves time in small quanta.
#[test]
fn regression_harness_time_jump_seed_498() {
    let plan = plan_from_seed(498);
    assert_eq!((plan.n, plan.window, plan.crash), (3, 1, Some((2, 344))));
    run(&plan).expect("seed 498 delivers everything");
}

#[test]
fn smc_minority_partition_stops_and_the_majority_carries_on() {
    let plan = Plan {
        seed: 77,
        n: 3,
        window: 3,
        slot_size: 48,
        messages: vec![30, 30, 30],
        slow: None,
        crash: None,
        flush_odds: 3,
        partition: Some((1, 300)),
    };
    run(&plan).expect("n0 and n2 get each other's messages; n1 stops");
}
