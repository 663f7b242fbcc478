//! Single-decree CAS consensus in the simulator: dueling proposers, crashes of up to f nodes,
//! partitions and heals, arbitrary schedules. After every round: no two nodes learn different
//! values, and every learned value was proposed. At the end, with a majority still connected and a
//! live proposer, every live node in that majority has learned.

use std::collections::BTreeSet;
use std::time::Duration;

use proptest::prelude::*;
use squall_cas_paxos::decree::{Announce, Config, Decree, default_rpc_threshold};
use squall_cas_paxos::layout::Layout;
use squall_transport::{NodeId, Transport};
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds};

#[derive(Clone, Debug)]
struct Scenario {
    seed: u64,
    nodes: usize,
    /// (node, round it proposes at)
    proposers: Vec<(usize, u32)>,
    /// (node, round it crashes at); at most f distinct nodes.
    crashes: Vec<(usize, u32)>,
    /// (isolated node, from round, heal round)
    partition: Option<(usize, u32, u32)>,
    /// Extra one-way latency per node, in microseconds (decisions lag, proposers collide).
    delays: Vec<u64>,
    /// Where slot words freeze and the two-sided fallback takes over (`None`: the default).
    rpc_threshold: Option<u32>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (any::<u64>(), prop_oneof![Just(3usize), Just(5usize)]).prop_flat_map(|(seed, nodes)| {
        let f = (nodes - 1) / 2;
        (
            Just(seed),
            Just(nodes),
            proptest::collection::vec((0..nodes, prop_oneof![0u32..20, 0u32..300]), 1..=nodes),
            proptest::collection::vec((0..nodes, 0u32..600), 0..=f),
            proptest::option::of((0..nodes, 0u32..400, 400u32..900)),
            proptest::collection::vec(prop_oneof![Just(0u64), 0u64..40], nodes),
            proptest::option::of(nodes as u32 + 1..nodes as u32 + 12),
        )
            .prop_map(
                |(seed, nodes, proposers, crashes, partition, delays, rpc_threshold)| Scenario {
                    seed,
                    nodes,
                    proposers,
                    crashes,
                    partition,
                    delays,
                    rpc_threshold,
                },
            )
    })
}

fn value(node: usize) -> Vec<u8> {
    format!("command from n{node}").into_bytes()
}

fn layout(nodes: usize) -> Layout {
    Layout {
        proposers: nodes,
        slots: 1,
        max_value_len: 64,
    }
}

fn build(seed: u64, nodes: usize) -> (Sim, Vec<Decree<SimNode>>) {
    build_with(seed, nodes, default_rpc_threshold(nodes))
}

fn build_with(seed: u64, nodes: usize, rpc_threshold: u32) -> (Sim, Vec<Decree<SimNode>>) {
    let sim_cfg = SimConfig {
        op_timeout: Duration::from_micros(200),
        ..SimConfig::seeded(seed)
    };
    let (sim, endpoints) =
        Sim::cluster(sim_cfg, nodes, &layout(nodes).regions()).expect("valid sim");
    let replicas = endpoints
        .into_iter()
        .map(|t| {
            let cfg = Config {
                layout: layout(nodes),
                backoff_min: Duration::from_micros(5),
                backoff_max: Duration::from_micros(60),
                seed,
                announce: Announce::Write,
                rpc_threshold,
            };
            Decree::new(t, cfg, 0).expect("valid config")
        })
        .collect();
    (sim, replicas)
}

/// The Paxos invariant, read straight from acceptor memory: a value is *chosen* at proposal `p`
/// once a majority of acceptors hold `accepted_proposal == p` for it. Across the whole run, at
/// most one value (identified by its origin) may ever be chosen.
fn chosen(
    replicas: &mut [Decree<SimNode>],
    nodes: usize,
    ever: &mut BTreeSet<u8>,
) -> Result<(), String> {
    use std::collections::BTreeMap;
    let mut votes: BTreeMap<(u32, u8), usize> = BTreeMap::new();
    for r in replicas.iter_mut() {
        let word = r
            .transport()
            .region(squall_cas_paxos::layout::SLOTS)
            .expect("registered")
            .load(0);
        let w = squall_cas_paxos::word::SlotWord::unpack(word);
        // A frozen word's state lives in the node's two-sided acceptor once it served a request.
        let (accepted, value) = match r.acceptor().borrow().state(0) {
            Some(s) => (s.accepted_proposal, s.value),
            None => (w.accepted_proposal, w.value),
        };
        if let Some(v) = value {
            *votes.entry((accepted, v.origin)).or_default() += 1;
        }
    }
    for ((_, origin), n) in votes {
        if n > nodes / 2 {
            ever.insert(origin);
        }
    }
    if ever.len() > 1 {
        return Err(format!(
            "values from origins {ever:?} were each chosen by a majority"
        ));
    }
    Ok(())
}

/// Delivers every message waiting at each live node (two-sided fallback requests and replies).
fn pump(replicas: &mut [Decree<SimNode>], crashed: &BTreeSet<usize>) {
    let mut buf = Vec::new();
    for (i, r) in replicas.iter_mut().enumerate() {
        if crashed.contains(&i) {
            continue;
        }
        while let Some(from) = r.transport().recv(&mut buf) {
            r.on_message(from, &buf);
        }
    }
}

fn run(s: &Scenario) -> Result<(), String> {
    let threshold = s.rpc_threshold.unwrap_or(default_rpc_threshold(s.nodes));
    let (sim, mut replicas) = build_with(s.seed, s.nodes, threshold);
    for (node, &us) in s.delays.iter().enumerate() {
        sim.delay(NodeId(node as u32), Duration::from_micros(us));
    }
    let mut ever_chosen = BTreeSet::new();
    let proposed: BTreeSet<Vec<u8>> = s.proposers.iter().map(|&(n, _)| value(n)).collect();
    let mut crashed = BTreeSet::new();
    let mut isolated = false;
    for round in 0..3000u32 {
        for &(node, at) in &s.proposers {
            if at == round && !crashed.contains(&node) {
                let _ = replicas[node].propose(&value(node));
            }
        }
        for &(node, at) in &s.crashes {
            if at == round && crashed.insert(node) {
                sim.crash(NodeId(node as u32));
            }
        }
        if let Some((x, from, heal)) = s.partition {
            let others: Vec<NodeId> = (0..s.nodes)
                .filter(|&n| n != x)
                .map(|n| NodeId(n as u32))
                .collect();
            if round == from {
                sim.partition(&[NodeId(x as u32)], &others);
                isolated = true;
            }
            if round == heal && isolated {
                sim.heal();
            }
        }
        pump(&mut replicas, &crashed);
        for (i, r) in replicas.iter_mut().enumerate() {
            if !crashed.contains(&i) && sim.takes_turn(NodeId(i as u32)) {
                r.poll();
            }
        }
        for _ in 0..1 + sim.random(3) {
            sim.step();
        }
        sim.advance(Duration::from_micros(1));
        // Safety after every round.
        chosen(&mut replicas, s.nodes, &mut ever_chosen)
            .map_err(|e| format!("round {round}: {e}"))?;
        let learned: BTreeSet<&[u8]> = replicas.iter().filter_map(|r| r.learned()).collect();
        if learned.len() > 1 {
            return Err(format!(
                "round {round}: nodes learned different values {learned:?}"
            ));
        }
        if let Some(v) = learned.iter().next() {
            if !proposed.contains(*v) {
                return Err(format!(
                    "round {round}: learned {v:?}, which nobody proposed"
                ));
            }
        }
    }
    // Liveness: a live proposer and no partition that outlasted the run.
    let live_proposer = s.proposers.iter().any(|(n, _)| !crashed.contains(n));
    let had_partition = s.partition.is_some();
    if live_proposer && !had_partition {
        for (i, r) in replicas.iter().enumerate() {
            if !crashed.contains(&i) && r.learned().is_none() {
                return Err(format!(
                    "live n{i} never learned a decision (proposal {})",
                    r.proposal()
                ));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(squall_transport_mem::sim::proptest_cases(256)))]

    #[test]
    fn agreement_validity_and_termination(s in scenario()) {
        prop_assert_eq!(run(&s), Ok(()));
    }
}

#[test]
fn dueling_proposers_over_many_seeds() {
    check_seeds("dueling_proposers_over_many_seeds", 200, |seed| {
        let all = Scenario {
            seed,
            nodes: 3,
            proposers: vec![(0, 0), (1, 0), (2, 0)],
            crashes: vec![],
            partition: None,
            delays: vec![0, 7, 15],
            rpc_threshold: None,
        };
        run(&all)
    });
}

#[test]
fn a_lone_proposer_decides_in_one_round_trip_per_phase() {
    let (sim, mut replicas) = build(1, 3);
    replicas[0].propose(b"x").expect("valid");
    let start = sim.now();
    while replicas[0].learned().is_none() {
        for r in replicas.iter_mut() {
            r.poll();
        }
        assert!(sim.step(), "stalled");
    }
    let took = sim.now() - start;
    // Prepare and accept: two CAS round trips of at most 5 us each way in this simulator.
    assert!(took <= Duration::from_micros(25), "took {took:?}");
    assert_eq!(
        replicas[0].proposal(),
        1,
        "no aborts, so the first proposal number"
    );
}

/// Found by the proptest: n0 decides and crashes before its decision writes land; n1 had already
/// learned the decision from its own memory, so before the fix nobody told n2.
#[test]
fn regression_decider_crashes_before_its_decision_lands() {
    for (p1_round, p0_round) in [(134, 133), (137, 133)] {
        let s = Scenario {
            seed: 3729792208678910066,
            nodes: 3,
            proposers: vec![(1, p1_round), (0, p0_round)],
            crashes: vec![(0, 136)],
            partition: None,
            delays: vec![0, 0, 0],
            rpc_threshold: None,
        };
        assert_eq!(run(&s), Ok(()), "{s:?}");
    }
}

/// The window Paxos's adoption rule exists for: a value is chosen, its decider crashes before
/// anyone learns it, and another proposer runs. It must adopt the chosen value, over every seed.
#[test]
fn a_later_proposer_adopts_the_chosen_value() {
    check_seeds("a_later_proposer_adopts_the_chosen_value", 200, |seed| {
        let (sim, mut replicas) = build(seed, 3);
        let mut ever = BTreeSet::new();
        replicas[0].propose(&value(0)).map_err(|e| e.to_string())?;
        let mut guard = 0;
        while replicas[0].learned().is_none() {
            replicas[0].poll();
            sim.step();
            guard += 1;
            if guard > 10_000 {
                return Err("n0 never decided alone".into());
            }
        }
        chosen(&mut replicas, 3, &mut ever)?;
        sim.crash(NodeId(0)); // its decision writes are lost in flight
        let other = 1 + (seed % 2) as usize;
        replicas[other]
            .propose(&value(other))
            .map_err(|e| e.to_string())?;
        for _ in 0..20_000 {
            for r in replicas.iter_mut().skip(1) {
                r.poll();
            }
            chosen(&mut replicas, 3, &mut ever)?;
            if !sim.step() {
                sim.advance(Duration::from_micros(5));
            }
            if replicas.iter().skip(1).all(|r| r.learned().is_some()) {
                break;
            }
        }
        for (i, r) in replicas.iter().enumerate().skip(1) {
            match r.learned() {
                Some(v) if v == value(0).as_slice() => {}
                other => return Err(format!("n{i} learned {other:?}, but n0's value was chosen")),
            }
        }
        Ok(())
    });
}

/// Velos §5.2: proposal numbers reach the threshold (4 with three nodes: the second round of
/// proposals already crosses it), the words freeze, and every acceptor answers over two-sided
/// RPC from then on. Dueling proposers, skewed delays, and a crash: still one value, a proposed
/// one, learned by every live node; and the fallback was really used.
#[test]
fn exhausted_proposals_fall_back_to_two_sided_rpc() {
    let mut used = 0;
    check_seeds(
        "exhausted_proposals_fall_back_to_two_sided_rpc",
        100,
        |seed| {
            let s = Scenario {
                seed,
                nodes: 3,
                proposers: vec![(0, 0), (1, 0), (2, 3)],
                crashes: if seed % 3 == 0 { vec![(2, 40)] } else { vec![] },
                partition: None,
                delays: vec![0, 9, 17],
                rpc_threshold: Some(4),
            };
            run(&s)?;
            Ok(())
        },
    );
    // The same duel, counting how often the fallback carried the decision.
    for seed in 0..20 {
        let (sim, mut replicas) = build_with(seed, 3, 4);
        for (i, r) in replicas.iter_mut().enumerate() {
            r.propose(&value(i)).expect("valid");
        }
        let none = BTreeSet::new();
        for _ in 0..5_000 {
            pump(&mut replicas, &none);
            for r in replicas.iter_mut() {
                r.poll();
            }
            if !sim.step() {
                sim.advance(Duration::from_micros(5));
            }
            if replicas.iter().all(|r| r.learned().is_some()) {
                break;
            }
        }
        assert!(
            replicas.iter().all(|r| r.learned().is_some()),
            "seed {seed}"
        );
        used += usize::from(replicas.iter().any(|r| r.rpc_requests() > 0));
    }
    assert!(used >= 10, "the fallback ran in only {used} of 20 duels");
}
