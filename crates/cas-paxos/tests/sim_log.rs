//! The CAS-Paxos log in the simulator: all nodes submit; leaders crash mid-stream, any node may
//! crash (up to f) or be cut off by a partition, and sometimes the proposal threshold is low
//! enough for the two-sided fallback to carry slots. After every round, acceptor memory (slot
//! words, and the two-sided acceptors' state for frozen words) must never show two values
//! chosen for one slot; after the run the histories pass `squall_ordering::check`: integrity,
//! positions and total order for everyone; agreement and validity among the correct nodes; and
//! every command a correct node submitted once the faults settled is delivered.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use proptest::prelude::*;
use squall_cas_paxos::layout::{Layout, SLOTS};
use squall_cas_paxos::log::{CasPaxos, LogConfig, Stats};
use squall_cas_paxos::word::{SlotWord, lap_of};
use squall_ordering::check::History;
use squall_ordering::{SubmitError, TotalOrder, Upcall};
use squall_transport::{NodeId, Transport};
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds};

fn config(nodes: usize, seed: u64) -> LogConfig {
    LogConfig {
        layout: Layout {
            proposers: nodes,
            // A small ring, so that every run reuses each position many times.
            slots: 24,
            max_value_len: 64,
        },
        window: 8,
        max_pending: 64,
        backoff: (Duration::from_micros(5), Duration::from_micros(40)),
        heartbeat_period: Duration::from_micros(20),
        leader_timeout: Duration::from_micros(300),
        recycle_timeout: Duration::from_millis(3),
        seed,
        rpc_threshold: squall_cas_paxos::log::default_rpc_threshold(nodes),
    }
}

struct Outcome {
    history: History<Vec<u8>>,
    crashed: BTreeSet<usize>,
    submitted_by_live: usize,
    /// Commands live nodes submitted long after any crash (the new leader was trusted by then).
    late: Vec<(NodeId, Vec<u8>)>,
    /// Per node: how decisions were announced and learned.
    stats: Vec<Stats>,
    /// Per node: slots delivered (no-ops included).
    slots: Vec<u64>,
    /// Requests the nodes' two-sided acceptors served, in all.
    rpc_served: u64,
}

/// The faults of one run.
#[derive(Clone, Debug, Default)]
struct Plan {
    /// (node, round): crash `node` at `round`; `None` crashes whoever node 0 trusts as leader.
    crashes: Vec<(Option<usize>, u32)>,
    /// (node, from, until): cut `node` off from everyone else between the two rounds (its links
    /// break in the meantime, so it stays faulty after the heal).
    partition: Option<(usize, u32, u32)>,
    /// Submit with probability 1/rate per turn.
    rate: u64,
    /// Where slot words freeze (`None`: the default threshold).
    rpc_threshold: Option<u32>,
}

const ROUNDS: u32 = 40_000;

impl Plan {
    fn rate(rate: u64) -> Plan {
        Plan {
            rate,
            ..Plan::default()
        }
    }

    fn last_fault(&self) -> Option<u32> {
        let crash = self.crashes.iter().map(|c| c.1).max();
        let heal = self.partition.map(|p| p.2);
        crash.max(heal)
    }
}

/// The Paxos invariant, read from acceptor memory after every round: per ring position and lap,
/// a value (named by its origin, unique per slot) is chosen once a majority of acceptors hold it
/// at the same proposal, in their slot word or, for a frozen word, in the node's two-sided
/// acceptor. No two values may ever be chosen for one slot.
fn check_chosen(
    logs: &[CasPaxos<SimNode>],
    cfg: &LogConfig,
    ever: &mut BTreeMap<(usize, u8), u8>,
) -> Result<(), String> {
    let ring = cfg.layout.slots;
    let mut votes: BTreeMap<(usize, u8, u32, u8), usize> = BTreeMap::new();
    for log in logs {
        let rpc: BTreeMap<(usize, u8), (u32, Option<u8>)> = log
            .rpc_states()
            .into_iter()
            .map(|(slot, st)| {
                (
                    (cfg.layout.position(slot), lap_of(slot, ring)),
                    (st.accepted_proposal, st.value.map(|v| v.origin)),
                )
            })
            .collect();
        let words = log.with_transport(|t| t.region(SLOTS).expect("registered").clone());
        for pos in 0..ring {
            let w = SlotWord::unpack(words.load(pos));
            let (accepted, origin) = match rpc.get(&(pos, w.lap)) {
                Some(&(a, o)) if w.min_proposal >= cfg.rpc_threshold => (a, o),
                _ => (w.accepted_proposal, w.value.map(|v| v.origin)),
            };
            if let Some(o) = origin {
                *votes.entry((pos, w.lap, accepted, o)).or_default() += 1;
            }
        }
    }
    for ((pos, lap, _, origin), n) in votes {
        if n > logs.len() / 2 {
            let first = *ever.entry((pos, lap)).or_insert(origin);
            if first != origin {
                return Err(format!(
                    "position {pos} lap {lap}: values of n{first} and n{origin} were both chosen"
                ));
            }
        }
    }
    Ok(())
}

fn run(seed: u64, nodes: usize, per_node: usize, plan: &Plan) -> Result<Outcome, String> {
    let mut late = Vec::new();
    let mut cfg = config(nodes, seed);
    if let Some(t) = plan.rpc_threshold {
        cfg.rpc_threshold = t;
    }
    let (sim, endpoints) =
        Sim::cluster(SimConfig::seeded(seed), nodes, &cfg.regions()).map_err(|e| e.to_string())?;
    let mut logs: Vec<CasPaxos<SimNode>> = endpoints
        .into_iter()
        .map(|t| CasPaxos::new(t, cfg.clone()).expect("valid"))
        .collect();
    let mut history = History::new();
    let mut sent = vec![0usize; nodes];
    let mut crashed = BTreeSet::new();
    let mut faulty = BTreeSet::new();
    let mut chosen = BTreeMap::new();
    let mut upcalls = Vec::new();
    let settled = plan.last_fault().map(|r| r + 2_000);
    for round in 0..ROUNDS {
        for &(node, at) in &plan.crashes {
            if at == round {
                let node = node.unwrap_or_else(|| logs[0].leader().index());
                sim.crash(NodeId(node as u32));
                crashed.insert(node);
                faulty.insert(node);
            }
        }
        if let Some((x, from, until)) = plan.partition {
            let others: Vec<NodeId> = (0..nodes)
                .filter(|&n| n != x)
                .map(|n| NodeId(n as u32))
                .collect();
            if round == from {
                // While every link is blocked the simulator's clock runs to the op timeouts,
                // which break the cut node's links for good ("links broken by timeouts stay
                // broken"): after the heal it is still cut off, so it counts as faulty.
                sim.partition(&[NodeId(x as u32)], &others);
                faulty.insert(x);
            }
            if round == until {
                sim.heal();
            }
        }
        for (i, log) in logs.iter_mut().enumerate() {
            if crashed.contains(&i) || !sim.takes_turn(NodeId(i as u32)) {
                continue;
            }
            if sent[i] < per_node && sim.random(plan.rate) == 0 {
                let cmd = format!("n{i}#{}", sent[i]).into_bytes();
                match log.submit(&cmd) {
                    Ok(()) => {
                        if settled.is_some_and(|s| round > s) {
                            late.push((NodeId(i as u32), cmd.clone()));
                        }
                        history.submit(NodeId(i as u32), cmd, &[]);
                        sent[i] += 1;
                    }
                    Err(SubmitError::WindowFull) => {}
                    Err(e) => return Err(format!("n{i} submit: {e}")),
                }
            }
            upcalls.clear();
            log.poll(&mut upcalls);
            for u in &upcalls {
                if let Upcall::Deliver(d) = u {
                    history.deliver(NodeId(i as u32), d.payload.clone(), d.position);
                }
            }
        }
        for _ in 0..1 + sim.random(2) {
            sim.step();
        }
        sim.advance(Duration::from_micros(1));
        check_chosen(&logs, &cfg, &mut chosen).map_err(|e| format!("round {round}: {e}"))?;
    }
    if std::env::var("PAXOS_DEBUG").is_ok() {
        for (i, l) in logs.iter().enumerate() {
            let d = l.delivered();
            let pos = cfg.layout.position(d);
            let words: Vec<SlotWord> = logs
                .iter()
                .map(|m| m.with_transport(|t| SlotWord::unpack(t.region(SLOTS).unwrap().load(pos))))
                .collect();
            let dec = l.with_transport(|t| {
                SlotWord::unpack(
                    t.region(squall_cas_paxos::layout::DECISIONS)
                        .unwrap()
                        .load(pos),
                )
            });
            eprintln!(
                "n{i} {l:?} delivered {d} leader {:?} rpc {:?}\n  words {words:?}\n  decision {dec:?}",
                l.leader(),
                l.rpc_states()
            );
        }
    }
    for c in &faulty {
        history.crash(NodeId(*c as u32));
    }
    let submitted_by_live = (0..nodes)
        .filter(|i| !faulty.contains(i))
        .map(|i| sent[i])
        .sum();
    late.retain(|(n, _)| !faulty.contains(&n.index()));
    Ok(Outcome {
        history,
        crashed: faulty,
        submitted_by_live,
        late,
        stats: logs.iter().map(|l| l.stats()).collect(),
        slots: logs.iter().map(|l| l.delivered()).collect(),
        rpc_served: logs.iter().map(|l| l.rpc_served()).sum(),
    })
}

fn verify(o: &Outcome, nodes: usize) -> Result<(), String> {
    o.history.check_total_order().map_err(|v| v.to_string())?;
    let live: Vec<NodeId> = (0..nodes)
        .filter(|i| !o.crashed.contains(i))
        .map(|i| NodeId(i as u32))
        .collect();
    o.history
        .check_agreement(&live)
        .map_err(|v| v.to_string())?;
    if o.crashed.is_empty() {
        o.history.check_validity(&live).map_err(|v| v.to_string())?;
    }
    let mine: BTreeSet<&Vec<u8>> = o.history.deliveries(live[0]).collect();
    if let Some((n, cmd)) = o.late.iter().find(|(_, c)| !mine.contains(c)) {
        return Err(format!(
            "{n} submitted {:?} well after the takeover; it was never delivered",
            String::from_utf8_lossy(cmd)
        ));
    }
    let delivered = o.history.deliveries(live[0]).count();
    if delivered < o.submitted_by_live.min(1) {
        return Err("nothing was delivered".into());
    }
    Ok(())
}

#[test]
fn every_command_delivered_in_one_order_without_failures() {
    check_seeds(
        "every_command_delivered_in_one_order_without_failures",
        10,
        |seed| {
            let o = run(seed, 3, 20, &Plan::rate(40))?;
            verify(&o, 3)?;
            let n = o.history.deliveries(NodeId(0)).count();
            if n != 60 {
                return Err(format!("delivered {n} of 60 commands"));
            }
            // The ring (24 positions) was reused: 60 commands went through it twice and more.
            if o.slots.iter().any(|&s| s < 60) {
                return Err(format!("slots delivered {:?}", o.slots));
            }
            Ok(())
        },
    );
}

/// A steady stream from every node laps the 24-slot ring many times, and the leader announces
/// decisions on its next accepts: followers learn most slots from their own memory through the
/// piggyback, and the leader writes fewer decision words than one per follower per slot.
#[test]
fn ring_reuse_and_piggybacked_decisions_under_load() {
    check_seeds(
        "ring_reuse_and_piggybacked_decisions_under_load",
        4,
        |seed| {
            let o = run(seed, 3, 150, &Plan::rate(1))?;
            verify(&o, 3)?;
            let n = o.history.deliveries(NodeId(0)).count();
            if n != 450 {
                return Err(format!("delivered {n} of 450 commands"));
            }
            let leader = &o.stats[0];
            let followers: u64 = o.stats[1..].iter().map(|s| s.learned_by_piggyback).sum();
            if leader.piggybacked == 0 || followers == 0 {
                return Err(format!("no decision was piggybacked: {:?}", o.stats));
            }
            if leader.piggybacked * 2 < leader.decided {
                return Err(format!(
                    "most decisions went out as decision words, not piggybacked: {leader:?}"
                ));
            }
            Ok(())
        },
    );
}

/// The §5.2 fallback inside the log: with the threshold at 4 (three nodes), the first leader's
/// proposal 1 fits the words, but the new leader's takeover proposals cross it, so slots freeze
/// and are decided over two-sided RPC; the order and every late command survive.
#[test]
fn takeover_past_the_proposal_threshold_uses_two_sided_rpc() {
    check_seeds(
        "takeover_past_the_proposal_threshold_uses_two_sided_rpc",
        6,
        |seed| {
            let plan = Plan {
                crashes: vec![(None, 1_000)],
                rpc_threshold: Some(4),
                ..Plan::rate(40)
            };
            let o = run(seed, 3, 150, &plan)?;
            verify(&o, 3)?;
            if o.rpc_served == 0 {
                return Err("no acceptor ever served an RPC".into());
            }
            Ok(())
        },
    );
}

#[test]
fn leader_crash_mid_stream_keeps_one_order() {
    check_seeds("leader_crash_mid_stream_keeps_one_order", 10, |seed| {
        let plan = Plan {
            crashes: vec![(None, 1_000)],
            ..Plan::rate(40)
        };
        let o = run(seed, 3, 150, &plan)?;
        if o.late.is_empty() {
            return Err(
                "no command was submitted after the takeover; the test proves nothing".into(),
            );
        }
        verify(&o, 3)
    });
}

fn plan() -> impl Strategy<Value = (usize, Plan)> {
    prop_oneof![Just(3usize), Just(5usize)].prop_flat_map(|nodes| {
        let f = (nodes - 1) / 2;
        (
            Just(nodes),
            proptest::collection::vec((proptest::option::of(0..nodes), 100u32..12_000), 0..=f),
            proptest::option::of((0..nodes, 100u32..12_000, 50u32..1_500)),
            proptest::option::of(1u32..8),
        )
            .prop_map(|(nodes, crashes, partition, low_threshold)| {
                let f = (nodes - 1) / 2;
                let mut plan = Plan {
                    crashes,
                    partition: partition.map(|(x, from, len)| (x, from, from + len)),
                    rpc_threshold: low_threshold.map(|t| nodes as u32 + t),
                    ..Plan::rate(40)
                };
                // At most f faulty nodes: a partitioned node counts as one.
                plan.crashes
                    .truncate(f - usize::from(plan.partition.is_some()));
                (nodes, plan)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(squall_transport_mem::sim::proptest_cases(12)))]

    /// Dueling leaders (Ω flips under partitions), crashes of up to f nodes (the leader or any
    /// other, `None` picking whoever leads), a partition that heals in time or cuts a node off
    /// for good, and sometimes a proposal threshold low enough for the two-sided fallback:
    /// acceptor memory never shows two chosen values for a slot, and the histories pass the
    /// ordering checkers.
    #[test]
    fn random_schedules_crashes_and_partitions((nodes, plan) in plan(), seed in any::<u64>()) {
        let o = run(seed, nodes, 30, &plan).map_err(TestCaseError::fail)?;
        verify(&o, nodes).map_err(TestCaseError::fail)?;
    }
}

/// Found by the proptest: the leader crashes early, proposals cross a low threshold (6), and a
/// follower stayed behind on a slot the new leader had delivered.
#[test]
fn regression_follower_left_behind_after_takeover_past_threshold() {
    let plan = Plan {
        crashes: vec![(None, 420)],
        rpc_threshold: Some(6),
        ..Plan::rate(40)
    };
    let o = run(6442356483653589352, 3, 30, &plan).expect("runs");
    verify(&o, 3).expect("verified");
}

/// Found by the proptest (a harness mistake, kept for its schedule): five nodes, the leader cut
/// off for 50 rounds, which in the simulator breaks its links for good; the others elect a new
/// leader while the old one goes on believing it leads, and memory never shows two chosen values.
#[test]
fn regression_leader_briefly_partitioned_misses_a_slot() {
    let plan = Plan {
        partition: Some((0, 100, 150)),
        ..Plan::rate(40)
    };
    let o = run(102260024174647954, 5, 30, &plan).expect("runs");
    verify(&o, 5).expect("verified");
}
