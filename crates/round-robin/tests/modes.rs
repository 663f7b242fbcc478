//! Unordered mode (FIFO per sender, everything delivered, no nulls) and the submit contract:
//! typed refusals, never blocking, a bounded window.

mod common;

use std::time::Duration;

use common::{Group, check, sim_config};
use squall_ordering::{SubmitError, TotalOrder};
use squall_round_robin::{Config, Error, Mode, RoundRobin};
use squall_transport::{NodeId, Time};
use squall_transport_mem::sim::{SimNode, check_seeds};

fn unordered(seed: u64) -> Result<(), String> {
    let n = 2 + (seed % 3) as usize;
    let per = 20u64;
    let cfg = Config {
        mode: Mode::Unordered,
        window: 2 + (seed % 3) as usize,
        slot_size: 32,
        max_payload: 100,
        chunk_size: 24,
        ..sim_config(n)
    };
    let mut g = Group::new(seed, vec![cfg; n]);
    let mut sent = vec![0u64; n];
    let deadline = Time::ZERO + Duration::from_secs(2);
    loop {
        for i in g.turns() {
            if sent[i] < per && g.sim.random(2) == 0 {
                let len = 20 + g.sim.random(81) as usize;
                match g.submit(i, sent[i], len) {
                    Ok(()) => sent[i] += 1,
                    Err(SubmitError::WindowFull) => {}
                    Err(e) => return Err(format!("submit: {e}")),
                }
            }
            g.poll(i)?;
        }
        if (0..n).all(|i| g.next_position[i] == per * n as u64) {
            break;
        }
        if g.sim.now() > deadline {
            return Err(format!("hung: {:?}", g.next_position));
        }
        g.step_fabric();
    }
    let everyone: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
    g.history.check_integrity().map_err(|e| e.to_string())?;
    g.history
        .check_validity(&everyone)
        .map_err(|e| e.to_string())?;
    for i in 0..n {
        // FIFO per sender.
        for s in 0..n as u32 {
            let from: Vec<u64> = g.delivered[i]
                .iter()
                .filter(|(x, _)| *x == s)
                .map(|&(_, k)| k)
                .collect();
            if from != (0..per).collect::<Vec<_>>() {
                return Err(format!("n{i} got n{s}'s messages as {from:?}"));
            }
        }
        let st = g.nodes[i].as_ref().expect("live").stats();
        if st.nulls_sent != 0 {
            return Err(format!("n{i} sent nulls in unordered mode"));
        }
    }
    Ok(())
}

#[test]
fn unordered_mode_is_fifo_per_sender_seed_sweep() {
    check_seeds(
        "unordered_mode_is_fifo_per_sender_seed_sweep",
        40,
        unordered,
    );
}

fn single(cfg: Config) -> RoundRobin<SimNode> {
    let layout = RoundRobin::<SimNode>::layout(&cfg).expect("layout");
    let n = cfg.members.len();
    let (_sim, mut nodes) = squall_transport_mem::sim::Sim::cluster(
        squall_transport_mem::sim::SimConfig::seeded(3),
        n,
        &layout,
    )
    .expect("sim");
    RoundRobin::new(nodes.remove(0), cfg).expect("group")
}

#[test]
fn submit_refusals_are_typed_and_never_block() {
    let cfg = Config {
        window: 2,
        slot_size: 32,
        max_payload: 64,
        ..sim_config(2)
    };
    let mut rr = single(cfg.clone());
    assert_eq!(
        rr.submit(&[0; 65]),
        Err(SubmitError::TooLarge { len: 65, max: 64 })
    );
    // The peer never polls: after `window` messages the window is full, and stays full.
    rr.submit(&check_payload(0)).expect("first");
    rr.submit(&[1; 50]).expect("second (large)");
    for _ in 0..5 {
        assert_eq!(rr.submit(&check_payload(2)), Err(SubmitError::WindowFull));
        rr.poll(&mut Vec::new());
    }
    // A member that is not a sender is told so.
    let mut rr = single(Config {
        senders: vec![NodeId(1)],
        ..cfg
    });
    assert!(matches!(rr.submit(b"x"), Err(SubmitError::NotASender(_))));
}

fn check_payload(i: u64) -> Vec<u8> {
    let m = common::encode(0, i, 24);
    check(&m).expect("valid");
    m
}

#[test]
fn missing_large_region_is_a_clear_setup_error() {
    let cfg = Config {
        slot_size: 32,
        max_payload: 64,
        ..sim_config(2)
    };
    let small = Config {
        max_payload: 32,
        ..cfg.clone()
    };
    // Regions sized for a group without large messages.
    let layout = RoundRobin::<SimNode>::layout(&small).expect("layout");
    let (_sim, mut nodes) = squall_transport_mem::sim::Sim::cluster(
        squall_transport_mem::sim::SimConfig::seeded(3),
        2,
        &layout,
    )
    .expect("sim");
    match RoundRobin::new(nodes.remove(0), cfg) {
        Err(e @ Error::LargeRegion { .. }) => assert!(e.to_string().contains("RoundRobin::layout")),
        other => panic!("expected LargeRegion, got {other:?}"),
    }
}
