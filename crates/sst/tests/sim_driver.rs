//! The driver on the simulator's virtual clock: it parks exactly until the next heartbeat is
//! due (time comes only from the transport; no fixed sleeps), and wakes when a write lands.

use std::ops::ControlFlow;
use std::time::Duration;

use squall_sst::{Driver, DriverConfig, SchemaBuilder, Sst, SstConfig};
use squall_transport::{
    LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Time, Transport,
};
use squall_transport_mem::sim::{Sim, SimConfig};

#[test]
fn driver_parks_until_the_next_heartbeat_on_virtual_time() {
    let schema = SchemaBuilder::new(1).build().expect("valid");
    let (sim, mut nodes) = Sim::cluster(
        SimConfig::seeded(1),
        1,
        &[RegionSpec::new(RegionId(0), schema.table_len())],
    )
    .expect("valid");
    let cfg = SstConfig {
        heartbeat_interval: Duration::from_micros(50),
        suspicion_timeout: Duration::from_micros(500),
        ..SstConfig::new(RegionId(0), vec![NodeId(0)])
    };
    let mut sst = Sst::new(nodes.remove(0), schema, cfg).expect("valid");
    let mut driver = Driver::new(DriverConfig {
        spin_polls: 8,
        ..DriverConfig::default()
    });
    let end = Time::ZERO + Duration::from_millis(1);
    driver
        .run(&mut sst, |s| {
            Ok(if s.now() >= end {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(false)
            })
        })
        .expect("runs");
    let beats = sst.get(0, sst.schema().heartbeat());
    // One heartbeat at 0 and one every 50 µs after: 21 by 1 ms.
    assert_eq!(beats, 21, "heartbeats on virtual time");
    assert_eq!(sim.now(), end);
    // It parked (virtual time passed in parks) rather than spinning through a million polls.
    assert!(driver.polls() < 21 * 12, "{} polls", driver.polls());
    assert!(driver.parks() >= 20);
}

#[test]
fn a_landing_write_wakes_a_parked_driver() {
    let mut b = SchemaBuilder::new(2);
    let c = b.counter("c");
    let schema = b.build().expect("valid");
    let (sim, mut nodes) = Sim::cluster(
        SimConfig::seeded(2),
        2,
        &[RegionSpec::new(RegionId(0), schema.table_len())],
    )
    .expect("valid");
    let mut other = nodes.pop().expect("two nodes");
    let cfg = SstConfig {
        heartbeat_interval: Duration::from_millis(10),
        suspicion_timeout: Duration::from_millis(100),
        ..SstConfig::new(RegionId(0), vec![NodeId(0), NodeId(1)])
    };
    let mut sst = Sst::new(nodes.remove(0), schema.clone(), cfg).expect("valid");
    // n1 (driven by hand) writes c = 9 into its row at n0, 3 µs from now.
    let at = schema.row_len() + c.range().offset;
    other.region(RegionId(0)).expect("region").store(at / 8, 9);
    other
        .write(
            NodeId(0),
            LocalSlice::new(RegionId(0), at, 8),
            RemoteAddr::new(RegionId(0), at),
            Signal::Unsignaled,
        )
        .expect("posted");
    let mut driver = Driver::new(DriverConfig::default());
    driver
        .run(&mut sst, |s| {
            Ok(
                if s.get(1, c) == 9 || s.now() > Time::ZERO + Duration::from_millis(5) {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(false)
                },
            )
        })
        .expect("runs");
    assert_eq!(sst.get(1, c), 9);
    // Woken by the landing write within its latency (≤ 5 µs plus a poll), not at the next
    // heartbeat 10 ms away.
    assert!(
        sim.now() < Time::ZERO + Duration::from_micros(100),
        "woke at {:?}",
        sim.now()
    );
}
