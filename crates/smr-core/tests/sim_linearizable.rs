//! Replicated KV histories from the simulator, checked linearizable: both backends, random
//! schedules, crashes, partitions, lagging replicas, client fail-over; and a broken read path
//! (local reads on a lagging replica) that the checker must catch.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Backend, Cluster};
use proptest::prelude::*;
use squall_ordering::linearizability::kv::{Kv, KvInput};
use squall_ordering::linearizability::{NotLinearizable, check};
use squall_smr::wire::ReadMode;
use squall_transport::NodeId;
use squall_transport_mem::sim::{check_seeds, proptest_cases};

#[derive(Clone, Copy, Debug, Default)]
struct Faults {
    /// (round, replica)
    crash: Option<(u32, usize)>,
    /// (round, heal round, replica cut off from the others)
    partition: Option<(u32, u32, usize)>,
    /// (round, catch-up round, replica)
    lag: Option<(u32, u32, usize)>,
}

const ROUNDS: u32 = 6_000;
const KEYS: u64 = 3;

fn run(backend: Backend, seed: u64, mode: ReadMode, faults: Faults) -> Result<Cluster, String> {
    let n = 3;
    let mut cl = Cluster::new(backend, n, 4, seed);
    cl.read_mode = mode;
    let mut next_value = 0;
    for round in 0..ROUNDS {
        if faults.crash.is_some_and(|(r, _)| r == round) {
            cl.crash(faults.crash.unwrap().1);
        }
        if let Some((at, heal, victim)) = faults.partition {
            let others: Vec<NodeId> = (0..n)
                .filter(|&i| i != victim)
                .map(|i| NodeId(i as u32))
                .collect();
            if round == at {
                cl.sim.partition(&[NodeId(victim as u32)], &others);
            }
            if round == heal {
                cl.sim.heal();
            }
        }
        if let Some((at, until, victim)) = faults.lag {
            if round == at {
                cl.lag(victim);
            }
            if round == until {
                cl.catch_up(victim);
            }
        }
        cl.load_step(KEYS, &mut next_value)?;
    }
    // Quiesce: heal, catch up, no new operations; every client finishes or gives up.
    cl.sim.heal();
    for i in 0..n {
        cl.catch_up(i);
    }
    let mut rounds = 0;
    while cl.busy_clients() > 0 && rounds < 40_000 {
        cl.step()?;
        rounds += 1;
    }
    if cl.busy_clients() > 0 {
        return Err(format!(
            "{} clients still waiting after quiescence",
            cl.busy_clients()
        ));
    }
    cl.check_states()?;
    Ok(cl)
}

fn verify(cl: &Cluster) -> Result<(), String> {
    match check(&Kv, &cl.ops) {
        Ok(()) => Ok(()),
        Err(e) => Err(format!("not linearizable: {e}")),
    }
}

fn completed(cl: &Cluster) -> usize {
    cl.ops.iter().filter(|o| o.ret.is_some()).count()
}

/// Every operation completes, in both linearizable read modes, and the history checks.
fn without_faults(name: &str, backend: Backend) {
    check_seeds(name, 6, |seed| {
        for mode in [ReadMode::Barrier, ReadMode::Ordered] {
            let cl = run(backend, seed, mode, Faults::default())?;
            if completed(&cl) != cl.ops.len() || cl.ops.len() < 100 {
                return Err(format!(
                    "{} of {} operations completed",
                    completed(&cl),
                    cl.ops.len()
                ));
            }
            verify(&cl)?;
        }
        Ok(())
    });
}

#[test]
fn linearizable_without_faults_round_robin() {
    without_faults(
        "linearizable_without_faults_round_robin",
        Backend::RoundRobin,
    );
}

#[test]
fn linearizable_without_faults_cas_paxos() {
    without_faults("linearizable_without_faults_cas_paxos", Backend::CasPaxos);
}

#[test]
fn cas_paxos_keeps_serving_after_a_replica_crash() {
    check_seeds("cas_paxos_keeps_serving_after_a_replica_crash", 6, |seed| {
        let faults = Faults {
            crash: Some((1_500, (seed % 3) as usize)),
            ..Faults::default()
        };
        let cl = run(Backend::CasPaxos, seed, ReadMode::Barrier, faults)?;
        let after = cl
            .ops
            .iter()
            .filter(|o| o.call > 4_000_000 && o.ret.is_some())
            .count();
        if after == 0 {
            return Err("nothing completed well after the crash".into());
        }
        verify(&cl)
    });
}

#[test]
fn lagging_replica_local_reads_are_caught_and_barrier_reads_are_not() {
    // Replica 2 keeps receiving but applies nothing; a client writes through replica 0, then
    // another reads the key at replica 2. A local read returns the stale value, and the
    // checker must say so; a barrier read waits for the replica to catch up.
    for mode in [ReadMode::Local, ReadMode::Barrier, ReadMode::Ordered] {
        for backend in [Backend::RoundRobin, Backend::CasPaxos] {
            let mut cl = Cluster::new(backend, 3, 2, 7);
            cl.lag(2);
            cl.start(0, KvInput::Put(1, 42));
            let mut rounds = 0;
            while !cl.idle(0) && rounds < 20_000 {
                cl.step().unwrap();
                rounds += 1;
            }
            assert!(
                cl.ops[0].ret.is_some(),
                "{backend:?}: the put did not complete"
            );
            cl.point(1, 2);
            cl.start_with(1, KvInput::Get(1), mode);
            let mut rounds = 0;
            while !cl.idle(1) && rounds < 5_000 {
                cl.step().unwrap();
                rounds += 1;
            }
            cl.catch_up(2);
            while !cl.idle(1) {
                cl.step().unwrap();
            }
            let verdict = check(&Kv, &cl.ops);
            match mode {
                ReadMode::Local => assert!(
                    matches!(verdict, Err(NotLinearizable::Violation { .. })),
                    "{backend:?}: the checker missed a stale local read: {:?}",
                    cl.ops
                ),
                _ => assert!(verdict.is_ok(), "{backend:?} {mode:?}: {verdict:?}"),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(16)))]

    #[test]
    fn linearizable_under_faults(
        seed in any::<u64>(),
        paxos in any::<bool>(),
        ordered in any::<bool>(),
        crash in proptest::option::of((200u32..5_000, 0usize..3)),
        partition in proptest::option::of((200u32..4_000, 100u32..2_000, 0usize..3)),
        lag in proptest::option::of((100u32..4_000, 100u32..3_000, 0usize..3)),
    ) {
        let backend = if paxos { Backend::CasPaxos } else { Backend::RoundRobin };
        let mode = if ordered { ReadMode::Ordered } else { ReadMode::Barrier };
        let faults = Faults {
            crash,
            partition: partition.map(|(at, len, v)| (at, at + len, v)),
            lag: lag.map(|(at, len, v)| (at, at + len, v)),
        };
        let cl = run(backend, seed, mode, faults).map_err(TestCaseError::fail)?;
        verify(&cl).map_err(TestCaseError::fail)?;
    }
}
