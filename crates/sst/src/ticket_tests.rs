//! Tickets across readmissions (s28 review, `docs/MEMBERSHIP.md`, eightieth part, "s28
//! follow-up"): a signaled write to an incarnation that failed before any check of its ticket
//! saw its member suspected counts as done once a newer incarnation is readmitted, and a
//! completion recorded before a suspicion is forgotten when the ticket is checked. Inside the
//! crate to see the table's `landed` and `awaited` sets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use squall_transport::{NodeId, RegionId, RegionSpec};
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds};

use crate::{Detector, SchemaBuilder, Smc, SmcConfig, Sst, SstConfig};

const REGION: RegionId = RegionId(0);

/// n0's table config: no heartbeats, so n0 suspects n1 only when the transport fails it; no
/// partition safety (one of two members suspected is not a minority).
fn config() -> SstConfig {
    SstConfig {
        detector: Detector::TransportOnly,
        partition_safety: false,
        ..SstConfig::new(REGION, vec![NodeId(0), NodeId(1)])
    }
}

/// Crashes n1 and restarts it as a new incarnation; n0 polls once: the old incarnation fails
/// (suspected, its queued writes flushed) and the new one waits to be readmitted.
fn bounce(sim: &Sim, sst: &mut Sst<SimNode>) -> Result<SimNode, String> {
    sim.crash(NodeId(1));
    let fresh = sim.restart_node(NodeId(1)).ok_or("n1 did not restart")?;
    sst.poll_once().map_err(|e| e.to_string())?;
    if !sst.is_suspected(1) || sst.pending_incarnation(1).is_none() {
        return Err("n0 did not hold n1's new incarnation pending".into());
    }
    Ok(fresh)
}

/// Polls n0 and lets virtual time pass until `done` or 1 ms.
fn run(
    sim: &Sim,
    sst: &mut Sst<SimNode>,
    mut done: impl FnMut(&mut Sst<SimNode>) -> bool,
) -> Result<bool, String> {
    let end = sim.now() + Duration::from_millis(1);
    while sim.now() < end {
        sst.poll_once().map_err(|e| e.to_string())?;
        if done(sst) {
            return Ok(true);
        }
        sim.advance(Duration::from_micros(5));
    }
    Ok(false)
}

/// n0 lists a guard; n1 is readmitted, and crashes again before the readmission's guard write
/// lands, with no check of the row-push ticket while n1 is suspected; then n1's next
/// incarnation is readmitted. The ticket must land with that push.
fn readmit_after_a_failed_row_push(seed: u64) -> Result<(), String> {
    let mut b = SchemaBuilder::new(2);
    let guard = b.counter("guard");
    let schema = b.build().map_err(|e| e.to_string())?;
    let layout = [RegionSpec::new(REGION, schema.table_len())];
    let (sim, mut nodes) = Sim::cluster(SimConfig::seeded(seed), 2, &layout).expect("valid sim");
    let _n1 = nodes.pop();
    let mut sst = Sst::new(nodes.remove(0), schema, config()).map_err(|e| e.to_string())?;
    sst.set_row_push_last(&[guard.range()]);
    let _n1 = bounce(&sim, &mut sst)?;
    sst.readmit(1).map_err(|e| e.to_string())?;
    // Crashed before the guard write landed: it is flushed with an error.
    let _n1 = bounce(&sim, &mut sst)?;
    sst.readmit(1).map_err(|e| e.to_string())?;
    let landed = run(&sim, &mut sst, |s| s.row_push_landed())?;
    if !landed || sst.is_suspected(1) {
        return Err(format!(
            "row_push_landed() {landed} 1 ms after the readmission (n1 suspected: {}; awaited: {})",
            sst.is_suspected(1),
            sst.awaited.len()
        ));
    }
    if !sst.awaited.is_empty() || !sst.landed.is_empty() {
        return Err(format!(
            "ops left: {} awaited, {} landed",
            sst.awaited.len(),
            sst.landed.len()
        ));
    }
    Ok(())
}

#[test]
fn a_row_push_to_an_incarnation_that_failed_unchecked_counts_as_done_after_the_next_readmission() {
    check_seeds(
        "a_row_push_to_an_incarnation_that_failed_unchecked_counts_as_done_after_the_next_readmission",
        3,
        readmit_after_a_failed_row_push,
    );
}

/// The same for SMC's own guard ticket: n0 publishes one message (its guard write to n1 in
/// flight), n1 crashes and is readmitted as a new incarnation before any flush checks the
/// ticket; a second message must still be published.
fn smc_guard_across_a_readmission(seed: u64) -> Result<(), String> {
    let mut b = SchemaBuilder::new(2);
    let fields = Smc::declare(
        &mut b,
        SmcConfig {
            window: 4,
            slot_size: 16,
        },
    )
    .map_err(|e| e.to_string())?;
    let schema = b.build().map_err(|e| e.to_string())?;
    let layout = [RegionSpec::new(REGION, schema.table_len())];
    let (sim, mut nodes) = Sim::cluster(SimConfig::seeded(seed), 2, &layout).expect("valid sim");
    let _n1 = nodes.pop();
    let mut sst = Sst::new(nodes.remove(0), schema, config()).map_err(|e| e.to_string())?;
    let mut smc = Smc::new(fields, &mut sst);
    smc.send(&mut sst, b"one").map_err(|e| e.to_string())?;
    smc.flush(&mut sst).map_err(|e| e.to_string())?;
    let _n1 = bounce(&sim, &mut sst)?;
    sst.readmit(1).map_err(|e| e.to_string())?;
    smc.send(&mut sst, b"two").map_err(|e| e.to_string())?;
    let sent = fields.sent();
    let published = run(&sim, &mut sst, |s| {
        smc.flush(s).is_ok_and(|_| s.get(s.my_row(), sent) == 2)
    })?;
    if !published {
        return Err(format!(
            "smc_sent is {} 1 ms after the readmission, 2 sent",
            sst.get(0, sent)
        ));
    }
    Ok(())
}

#[test]
fn smc_publishes_after_its_guard_write_to_an_incarnation_readmitted_before_any_check() {
    check_seeds(
        "smc_publishes_after_its_guard_write_to_an_incarnation_readmitted_before_any_check",
        3,
        smc_guard_across_a_readmission,
    );
}

/// Rounds of readmission in which the guard write lands, then n1 fails and n0 checks the
/// row-push ticket while n1 is suspected: no completion may stay recorded.
fn landed_ids_over_readmissions(seed: u64) -> Result<(), String> {
    const ROUNDS: usize = 6;
    let mut b = SchemaBuilder::new(2);
    let guard = b.counter("guard");
    let schema = b.build().map_err(|e| e.to_string())?;
    let layout = [RegionSpec::new(REGION, schema.table_len())];
    let (sim, mut nodes) = Sim::cluster(SimConfig::seeded(seed), 2, &layout).expect("valid sim");
    let _n1 = nodes.pop();
    let mut sst = Sst::new(nodes.remove(0), schema, config()).map_err(|e| e.to_string())?;
    sst.set_row_push_last(&[guard.range()]);
    for round in 0..ROUNDS {
        let _n1 = bounce(&sim, &mut sst)?;
        if !sst.row_push_landed() {
            return Err(format!(
                "round {round}: a write to a suspected member is not done"
            ));
        }
        sst.readmit(1).map_err(|e| e.to_string())?;
        // Until the guard write's completion is recorded (the ticket is not checked).
        let before = sst.landed.len();
        if !run(&sim, &mut sst, |s| s.landed.len() > before)? {
            return Err(format!("round {round}: the guard write never completed"));
        }
        if sst.landed.len() > 1 {
            return Err(format!(
                "round {round}: {} completed op ids kept",
                sst.landed.len()
            ));
        }
    }
    Ok(())
}

#[test]
fn completions_seen_before_a_suspicion_are_forgotten_over_readmission_rounds() {
    check_seeds(
        "completions_seen_before_a_suspicion_are_forgotten_over_readmission_rounds",
        3,
        landed_ids_over_readmissions,
    );
}
