//! Failure handling on the simulator: crashed members are suspected by every live member within
//! the detector's bound, a member that hangs is caught by its heartbeat, suspicions spread by
//! gossip, and the minority side of a partition stops with a typed error.

mod common;

use std::time::Duration;

use common::{Cluster, sst_config};
use squall_sst::{SmcConfig, SstError, Suspicion};
use squall_transport::NodeId;
use squall_transport_mem::sim::{SimConfig, check_seeds};

fn smc() -> SmcConfig {
    SmcConfig {
        window: 2,
        slot_size: 32,
    }
}

/// Upper bound on detection in virtual time: the suspicion timeout (or the sim's 1 ms op
/// timeout), plus a heartbeat interval, plus slack for gossip and scheduling.
const BOUND: Duration = Duration::from_micros(1500 + 50 + 1000);

fn crash_run(seed: u64) -> Result<(), String> {
    let (sim0, _) = squall_transport_mem::sim::Sim::cluster(
        SimConfig::seeded(seed ^ 0xc4a5),
        1,
        &[squall_transport::RegionSpec::new(common::REGION, 8)],
    )
    .map_err(|e| e.to_string())?;
    let n = 3 + sim0.random(3) as usize;
    let crashes = if n == 5 {
        1 + sim0.random(2) as usize
    } else {
        1
    };
    let mut victims: Vec<usize> = Vec::new();
    while victims.len() < crashes {
        let v = sim0.random(n as u64) as usize;
        if !victims.contains(&v) {
            victims.push(v);
        }
    }
    let warmup = Duration::from_micros(100 + sim0.random(2000));
    let mut c = Cluster::new(seed, n, smc());
    c.run_until(warmup, |_| false);
    for &v in &victims {
        c.crash(v);
    }
    let crashed_at = c.sim.now();
    let live: Vec<usize> = (0..n).filter(|i| !victims.contains(i)).collect();
    let ok = c.run_until(BOUND, |c| {
        live.iter().all(|&i| {
            victims.iter().all(|&v| c.table(i).is_suspected(v))
                // ... and every live member's copy of every live row carries the flags.
                && live.iter().all(|&j| {
                    victims.iter().all(|&v| {
                        c.table(i)
                            .get_at(j, c.table(i).schema().suspected(), v)
                            .unwrap_or(0)
                            == 1
                    })
                })
        })
    });
    for &i in &live {
        if let Some(e) = &c.stopped[i] {
            return Err(format!("n{i} stopped: {e}"));
        }
        for &j in &live {
            if c.table(i).is_suspected(j) {
                return Err(format!(
                    "n{i} falsely suspects live n{j}: {:?}",
                    c.table(i).suspicions()
                ));
            }
        }
    }
    if !ok {
        let state: Vec<String> = live
            .iter()
            .map(|&i| format!("n{i} suspects {:?}", c.table(i).suspects()))
            .collect();
        return Err(format!(
            "n={n} crashed {victims:?} at {crashed_at:?}; after {BOUND:?}: {}",
            state.join("; ")
        ));
    }
    Ok(())
}

#[test]
fn crash_suspicion_reaches_every_live_member_seed_sweep() {
    check_seeds(
        "crash_suspicion_reaches_every_live_member_seed_sweep",
        60,
        crash_run,
    );
}

#[test]
fn hung_member_is_caught_by_its_heartbeat() {
    let mut c = Cluster::new(3, 3, smc());
    c.run_until(Duration::from_micros(500), |_| false);
    c.hung[2] = true; // its table stops polling; its links stay up
    let hung_at = c.sim.now();
    let ok = c.run_until(BOUND, |c| {
        c.table(0).is_suspected(2) && c.table(1).is_suspected(2)
    });
    assert!(ok, "not suspected within {BOUND:?} of {hung_at:?}");
    for i in [0, 1] {
        let (who, why, at) = c.table(i).suspicions()[0];
        assert_eq!(who, NodeId(2));
        assert!(
            matches!(why, Suspicion::Timeout | Suspicion::Gossip),
            "n{i} suspected for {why:?}"
        );
        assert!(at - hung_at >= Duration::from_micros(1500) - Duration::from_micros(100));
        assert!(c.stopped[i].is_none());
    }
}

#[test]
fn a_local_suspicion_spreads_by_gossip() {
    // Slow transport-level detection (100 ms op timeout, 50 ms suspicion timeout), so only
    // gossip can spread n0's suspicion of the crashed n3 quickly.
    let cfg = squall_sst::SstConfig {
        suspicion_timeout: Duration::from_millis(50),
        ..sst_config(4)
    };
    let sim = SimConfig {
        op_timeout: Duration::from_millis(100),
        ..SimConfig::seeded(9)
    };
    let mut c = Cluster::with_sim(sim, 4, smc(), cfg);
    c.run_until(Duration::from_micros(300), |_| false);
    c.crash(3);
    c.sst(0).suspect(NodeId(3)).expect("1 of 4 is a minority");
    let at = c.sim.now();
    let ok = c.run_until(Duration::from_micros(200), |c| {
        c.table(1).is_suspected(3) && c.table(2).is_suspected(3)
    });
    assert!(ok, "gossip did not spread within 200 µs");
    for i in [1, 2] {
        let (who, why, when) = c.table(i).suspicions()[0];
        assert_eq!((who, why), (NodeId(3), Suspicion::Gossip));
        assert!(when - at < Duration::from_micros(200));
    }
}

#[test]
fn minority_side_of_a_partition_stops_with_a_typed_error() {
    let mut c = Cluster::new(21, 3, smc());
    c.run_until(Duration::from_micros(300), |_| false);
    c.sim.partition(&[NodeId(2)], &[NodeId(0), NodeId(1)]);
    let ok = c.run_until(Duration::from_millis(5), |c| {
        c.stopped[2].is_some() && c.table(0).is_suspected(2) && c.table(1).is_suspected(2)
    });
    assert!(ok, "stopped: {:?}", c.stopped);
    match &c.stopped[2] {
        Some(SstError::Partitioned {
            suspected: 2,
            members: 3,
            who,
        }) => assert_eq!(who, &vec![NodeId(0), NodeId(1)]),
        other => panic!("n2 stopped with {other:?}"),
    }
    assert!(c.stopped[0].is_none() && c.stopped[1].is_none());
    // A stopped table keeps saying why.
    assert!(matches!(
        c.sst(2).poll_once(),
        Err(SstError::Partitioned { .. })
    ));
}

#[test]
fn partition_safety_can_be_turned_off() {
    let cfg = squall_sst::SstConfig {
        partition_safety: false,
        ..sst_config(3)
    };
    let mut c = Cluster::with(21, 3, smc(), cfg);
    c.run_until(Duration::from_micros(300), |_| false);
    c.sim.partition(&[NodeId(2)], &[NodeId(0), NodeId(1)]);
    let ok = c.run_until(Duration::from_millis(5), |c| {
        c.table(2).suspects().len() == 2
    });
    assert!(ok);
    assert!(c.stopped.iter().all(Option::is_none), "{:?}", c.stopped);
}

#[test]
fn two_member_table_stops_on_any_suspicion_by_default() {
    let mut c = Cluster::new(4, 2, smc());
    c.run_until(Duration::from_micros(200), |_| false);
    c.crash(1);
    let ok = c.run_until(BOUND, |c| c.stopped[0].is_some());
    assert!(ok);
    assert!(matches!(
        c.stopped[0],
        Some(SstError::Partitioned {
            suspected: 1,
            members: 2,
            ..
        })
    ));
}

/// A held link (the transport would only give up after 100 ms) is caught by the detector's own
/// timeout: the signaled heartbeat write does not complete and the peer's heartbeat stops.
#[test]
fn a_silent_link_is_caught_before_the_transport_gives_up() {
    let sim = SimConfig {
        op_timeout: Duration::from_millis(100),
        ..SimConfig::seeded(31)
    };
    let mut c = Cluster::with_sim(sim, 3, smc(), sst_config(3));
    c.run_until(Duration::from_micros(300), |_| false);
    c.sim.partition(&[NodeId(2)], &[NodeId(0), NodeId(1)]);
    let at = c.sim.now();
    let ok = c.run_until(Duration::from_millis(5), |c| {
        c.table(0).is_suspected(2) && c.table(1).is_suspected(2) && c.stopped[2].is_some()
    });
    assert!(ok, "stopped {:?}", c.stopped);
    for i in [0, 1] {
        let (who, why, when) = c.table(i).suspicions()[0];
        assert_eq!(who, NodeId(2));
        assert_eq!(why, Suspicion::Timeout, "n{i}");
        assert!(
            when - at < Duration::from_millis(3),
            "n{i} took {:?}",
            when - at
        );
    }
}

/// Without the tie-break (`accusation_delay_intervals: 0`) both endpoints of a cut link may go
/// when they time out together, but never a third member: the suspect does not retaliate.
/// (`tests/sim_cut_link.rs` has the sweep with the default tie-break.)
#[test]
fn one_cut_link_without_tie_break_costs_only_its_endpoints_seed_sweep() {
    let cfg = squall_sst::SstConfig {
        accusation_delay_intervals: 0,
        ..sst_config(5)
    };
    for (seed, o) in common::cut_link_sweep(cfg) {
        assert!(
            o.settled && !o.lost.is_empty() && o.lost.iter().all(|m| o.ends.contains(m)),
            "seed {seed}: {o:?}\n  replay with: SQUALL_SEED={seed} cargo test -p squall-sst --test sim_failure one_cut_link_without"
        );
    }
}
