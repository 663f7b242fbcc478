//! A stall of every member at once (a disk flush under every member's log, the scheduler of a
//! loaded machine) must not make them accuse each other: a member whose own detector did not
//! run for more than half the suspicion timeout restarts its peers' clocks instead of
//! suspecting everyone whose heartbeat did not move meanwhile (found over TCP: after a join
//! with an 8 MiB state, every member suspected all the others and the whole group stopped as a
//! minority). A member that really crashed is still suspected afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use squall_sst::{Schema, SchemaBuilder, Sst, SstConfig};
use squall_transport::{NodeId, RegionId, RegionSpec};
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds};

const REGION: RegionId = RegionId(0);
const TIMEOUT: Duration = Duration::from_micros(1500);

fn schema(n: usize) -> Schema {
    let mut b = SchemaBuilder::new(n);
    b.counter("count");
    b.build().expect("valid schema")
}

fn config(n: usize) -> SstConfig {
    SstConfig {
        heartbeat_interval: Duration::from_micros(50),
        suspicion_timeout: TIMEOUT,
        ..SstConfig::new(REGION, (0..n as u32).map(NodeId).collect())
    }
}

/// Polls every live table, `step` of virtual time apart, for `limit`.
fn run(sim: &Sim, ssts: &mut [Sst<SimNode>], limit: Duration) -> Result<(), String> {
    let end = sim.now() + limit;
    while sim.now() < end {
        for (i, s) in ssts.iter_mut().enumerate() {
            if !sim.is_crashed(NodeId(i as u32)) {
                s.poll_once().map_err(|e| format!("n{i}: {e}"))?;
            }
        }
        sim.advance(Duration::from_micros(5));
    }
    Ok(())
}

fn stall_run(seed: u64) -> Result<(), String> {
    let n = 4;
    let schema = schema(n);
    let layout = [RegionSpec::new(REGION, schema.table_len())];
    let (sim, endpoints) =
        Sim::cluster(SimConfig::seeded(seed), n, &layout).map_err(|e| e.to_string())?;
    let mut ssts: Vec<Sst<SimNode>> = endpoints
        .into_iter()
        .map(|t| Sst::new(t, schema.clone(), config(n)).expect("valid table"))
        .collect();
    run(&sim, &mut ssts, Duration::from_millis(5))?;
    // Every member stalls for three suspicion timeouts at once (nobody polls; the fabric runs).
    let stall = TIMEOUT * 3;
    let mut left = stall;
    while !left.is_zero() {
        let d = left.min(Duration::from_micros(5));
        sim.advance(d);
        left -= d;
    }
    run(&sim, &mut ssts, Duration::from_millis(5))?;
    for (i, s) in ssts.iter().enumerate() {
        if !s.suspicions().is_empty() {
            return Err(format!(
                "n{i} accused its peers after a stall of everyone: {:?}",
                s.suspicions()
            ));
        }
    }
    // Still a detector: a crash is suspected by every live member.
    sim.crash(NodeId(3));
    run(&sim, &mut ssts, TIMEOUT * 3)?;
    for (i, s) in ssts.iter().enumerate().take(3) {
        if !s.is_suspected(3) {
            return Err(format!("n{i} did not suspect the crashed n3"));
        }
        if (0..3).any(|r| s.is_suspected(r)) {
            return Err(format!("n{i} suspects a live member: {:?}", s.suspicions()));
        }
    }
    Ok(())
}

#[test]
fn a_stall_of_every_member_at_once_accuses_nobody_and_a_crash_is_still_caught() {
    check_seeds(
        "a_stall_of_every_member_at_once_accuses_nobody_and_a_crash_is_still_caught",
        6,
        stall_run,
    );
}
