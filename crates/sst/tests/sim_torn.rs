//! SMC over the simulator's torn writes (`SimConfig::torn_writes`): a member that sent before
//! a late member's link came up, and goes on sending, pushes its whole row to it; the late
//! member, polling between single simulator steps, must deliver exactly what was sent (s28,
//! `docs/MEMBERSHIP.md`, eightieth part).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use squall_sst::{SchemaBuilder, Smc, SmcConfig, Sst, SstConfig};
use squall_transport::{NodeId, RegionId, RegionSpec};
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds};

const REGION: RegionId = RegionId(0);
/// Messages the sender sends before the late member's link comes up, and in all.
const EARLY: u64 = 3;
const TOTAL: u64 = 12;

fn message(k: u64) -> Vec<u8> {
    format!("message {k} of the sender").into_bytes()
}

/// One run: what the late member delivered, or the first error either member hit.
fn late_receiver(seed: u64) -> Result<(), String> {
    let n = 2;
    let mut b = SchemaBuilder::new(n);
    let fields = Smc::declare(
        &mut b,
        SmcConfig {
            window: 8,
            slot_size: 32,
        },
    )
    .map_err(|e| e.to_string())?;
    let schema = b.build().map_err(|e| e.to_string())?;
    let layout = [RegionSpec::new(REGION, schema.table_len())];
    let cfg = SimConfig {
        torn_writes: true,
        ..SimConfig::seeded(seed)
    };
    let (sim, mut endpoints) = Sim::cluster_late(cfg, n, &layout, &[NodeId(1)]).expect("valid");
    let config = SstConfig {
        heartbeat_interval: Duration::from_micros(50),
        suspicion_timeout: Duration::from_micros(1500),
        ..SstConfig::new(REGION, vec![NodeId(0), NodeId(1)])
    };
    let late = endpoints.pop().expect("two endpoints");
    let first = endpoints.pop().expect("two endpoints");
    let mut ssts: Vec<Sst<SimNode>> =
        vec![Sst::new(first, schema.clone(), config.clone()).map_err(|e| e.to_string())?];
    let mut smcs = vec![Smc::new(fields, &mut ssts[0])];
    for k in 0..EARLY {
        smcs[0]
            .send(&mut ssts[0], &message(k))
            .map_err(|e| e.to_string())?;
        smcs[0].flush(&mut ssts[0]).map_err(|e| e.to_string())?;
    }
    sim.start_node(NodeId(1));
    ssts.push(Sst::new(late, schema, config).map_err(|e| e.to_string())?);
    smcs.push(Smc::new(fields, &mut ssts[1]));
    let mut next = EARLY;
    let mut got = Vec::new();
    let end = sim.now() + Duration::from_millis(1);
    while sim.now() < end && got.len() < TOTAL as usize {
        for (i, (s, smc)) in ssts.iter_mut().zip(&mut smcs).enumerate() {
            s.poll_once().map_err(|e| format!("n{i}: {e}"))?;
            // The sender sends at random moments, some while its whole-row push is in flight.
            if i == 0 && next < TOTAL && sim.random(3) == 0 && smc.send(s, &message(next)).is_ok() {
                next += 1;
            }
            smc.poll(s, |_, k, m| {
                if i == 1 {
                    got.push((k, m.to_vec()));
                }
            })
            .map_err(|e| format!("n{i} after {} delivered: {e}", got.len()))?;
        }
        // One op at a time: the late member reads between the pieces of a torn write. With
        // nothing in flight `step` leaves the clock where it is: move it, or a run in which
        // nothing more is posted (SMC stuck, the regression this test catches) would spin here
        // instead of failing at `end`.
        if !sim.step() {
            sim.advance(Duration::from_micros(5));
        }
    }
    let want: Vec<(u64, Vec<u8>)> = (0..TOTAL).map(|k| (k, message(k))).collect();
    if got != want {
        return Err(format!("delivered {got:?}"));
    }
    Ok(())
}

/// The late member delivers every message, in order, each as sent: it never reads `smc_sent`
/// ahead of the slots it vouches for, whether the whole-row push's pieces land out of order or
/// the sender flushes again while that push is in flight.
#[test]
fn a_late_member_reading_a_torn_whole_row_push_delivers_only_slots_that_landed() {
    check_seeds(
        "a_late_member_reading_a_torn_whole_row_push_delivers_only_slots_that_landed",
        32,
        late_receiver,
    );
}
