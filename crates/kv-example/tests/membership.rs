//! The KV store on the membership backend, in one process on the threaded fabric: clients
//! write and read under load while a replica joins the running cluster (state transfer through
//! smr-core) and a member is killed. Checked: the joiner installs a transferred state and ends
//! with the same snapshot bytes (state machine, sessions, position) as every other replica;
//! the survivors carry on after the kill; every client's compare-and-set chain applied each
//! command exactly once although commands were retried across the view changes; the recorded
//! history is linearizable (`squall_ordering::linearizability`).
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use squall_kv::{KvOp, KvResult, MemCluster, Ordering};
use squall_ordering::linearizability::kv::{Kv, KvInput, KvOutput};
use squall_ordering::linearizability::{Operation, check};
use squall_smr::ReplicaHandle;
use squall_smr::wire::{ErrorCode, ReadMode, Request, Response};

const CLIENTS: u64 = 4;
const KEYS: u64 = CLIENTS;

fn key(k: u64) -> Vec<u8> {
    k.to_le_bytes().to_vec()
}

fn value(v: &[u8]) -> u64 {
    u64::from_le_bytes(v.try_into().unwrap())
}

fn to_request(input: &KvInput, session: u64, seq: u64, acked: u64) -> Request {
    match *input {
        KvInput::Get(k) => Request::Read {
            mode: ReadMode::Barrier,
            query: KvOp::Get { key: key(k) }.encode(),
        },
        KvInput::Cas(k, expected, new) => Request::Command {
            client: session,
            seq,
            acked,
            payload: KvOp::Cas {
                key: key(k),
                expected: expected.map(key),
                new: key(new),
            }
            .encode(),
        },
        _ => unreachable!("the test issues gets and compare-and-sets only"),
    }
}

fn to_output(r: KvResult) -> KvOutput {
    match r {
        KvResult::Value(v) => KvOutput::Value(v.as_deref().map(value)),
        KvResult::Cas { swapped, previous } => {
            KvOutput::Cas(swapped, previous.as_deref().map(value))
        }
        other => panic!("unexpected result {other:?}"),
    }
}

#[derive(Default)]
struct ClientLog {
    ops: Vec<Operation<KvInput, KvOutput>>,
    /// Commands that needed more than one attempt (retried at another replica).
    retried: u64,
}

/// One client: a chain of compare-and-sets on its own key (`i - 1 -> i`), with a barrier read
/// of some key after every second one. Fails over to the next replica on `Unavailable` or
/// `Busy`, keeping the command's number.
fn client(
    c: u64,
    replicas: Arc<RwLock<Vec<ReplicaHandle>>>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    t0: Instant,
) -> ClientLog {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let session = 0xc11e_0000 + c;
    let mut log = ClientLog::default();
    let (mut seq, mut acked, mut last) = (0u64, 0u64, None::<u64>);
    let mut at = c as usize;
    let mut i = 0u64;
    while !stop.load(AtomicOrdering::Acquire) {
        i += 1;
        let input = if i % 3 == 0 {
            KvInput::Get((c + i) % KEYS)
        } else {
            let next = last.map_or(1, |v| v + 1);
            KvInput::Cas(c, last, next)
        };
        if matches!(input, KvInput::Cas(..)) {
            seq += 1;
        }
        let req = to_request(&input, session, seq, acked);
        let call = t0.elapsed().as_nanos() as u64;
        let mut out = None;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut attempts = 0;
        while Instant::now() < deadline {
            let handle = {
                let r = replicas.read().unwrap();
                r[at % r.len()].clone()
            };
            attempts += 1;
            let resp = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), handle.call(req.clone())).await
            });
            match resp {
                Ok(Response::Ok(bytes)) => {
                    out = Some(to_output(KvResult::decode(&bytes).unwrap()));
                    break;
                }
                Ok(Response::Error {
                    code: ErrorCode::Unavailable | ErrorCode::Busy,
                    ..
                })
                | Err(_) => {
                    at += 1;
                    // Every replica may be wedged for the view change: give it a moment
                    // after a full round.
                    if attempts % 4 == 0 {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
                Ok(Response::Error { code, message }) => {
                    panic!("client {c}: refused ({code:?}): {message}")
                }
            }
        }
        let ret = t0.elapsed().as_nanos() as u64;
        let out = out.unwrap_or_else(|| panic!("client {c}: no replica answered {input:?}"));
        if let KvInput::Cas(_, _, new) = input {
            // Only this client writes its key: a CAS that did not swap was applied twice
            // (once by the first attempt, once by the retry).
            assert_eq!(
                out,
                KvOutput::Cas(true, last),
                "client {c}: command {seq} ({input:?}) was applied more than once"
            );
            last = Some(new);
            acked = seq;
            if attempts > 1 {
                log.retried += 1;
            }
        }
        log.ops.push(Operation {
            client: c,
            input,
            call,
            ret: Some(ret),
            output: Some(out),
        });
        done.fetch_add(1, AtomicOrdering::Relaxed);
    }
    log
}

fn wait_until(what: &str, deadline: Duration, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + deadline;
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn snapshot(cluster: &MemCluster, i: usize) -> squall_smr::Snapshot {
    let rx = cluster.replica(i).unwrap().handle().snapshot().unwrap();
    rx.blocking_recv().unwrap()
}

/// Every running replica's snapshot, once they all applied the same number of deliveries.
fn settled_snapshots(cluster: &MemCluster) -> Vec<(usize, squall_smr::Snapshot)> {
    settled_among(cluster, &cluster.running())
}

/// The snapshots of replicas `among`, once they all applied the same number of deliveries.
fn settled_among(cluster: &MemCluster, among: &[usize]) -> Vec<(usize, squall_smr::Snapshot)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let snaps: Vec<(usize, squall_smr::Snapshot)> = among
            .iter()
            .map(|&i| {
                let rx = cluster.replica(i).unwrap().handle().snapshot().unwrap();
                (i, rt.block_on(rx).unwrap())
            })
            .collect();
        if snaps.windows(2).all(|w| w[0].1.applied == w[1].1.applied) {
            return snaps;
        }
        assert!(
            Instant::now() < until,
            "replicas never reached the same position"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `CLIENTS` client threads running against a cluster's replicas.
struct Load {
    replicas: Arc<RwLock<Vec<ReplicaHandle>>>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    clients: Vec<std::thread::JoinHandle<ClientLog>>,
}

impl Load {
    fn start(cluster: &MemCluster) -> Load {
        let handles: Vec<ReplicaHandle> = cluster
            .running()
            .into_iter()
            .map(|i| cluster.replica(i).unwrap().handle())
            .collect();
        let replicas = Arc::new(RwLock::new(handles));
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let t0 = Instant::now();
        let clients = (0..CLIENTS)
            .map(|c| {
                let (r, s, d) = (replicas.clone(), stop.clone(), done.clone());
                std::thread::spawn(move || client(c, r, s, d, t0))
            })
            .collect();
        Load {
            replicas,
            stop,
            done,
            clients,
        }
    }

    /// Waits until the clients completed `n` more operations.
    fn progress(&self, n: u64) {
        let from = self.done.load(AtomicOrdering::Relaxed);
        wait_until(
            &format!("{n} more operations"),
            Duration::from_secs(60),
            || self.done.load(AtomicOrdering::Relaxed) >= from + n,
        );
    }

    fn finish(self) -> Vec<ClientLog> {
        self.stop.store(true, AtomicOrdering::Release);
        self.clients
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect()
    }
}

#[test]
fn kv_on_membership_a_replica_joins_mid_stream_and_a_member_is_killed() {
    let mut cluster = MemCluster::start(Ordering::Membership, 3, 1).unwrap();
    let load = Load::start(&cluster);
    let progress = |n: u64| load.progress(n);
    progress(300);

    // A fourth replica joins the running cluster; clients may ask it from now on.
    let joiner = cluster.add_replica().unwrap();
    let jh = cluster.replica(joiner).unwrap().handle();
    load.replicas.write().unwrap().push(jh.clone());
    wait_until(
        "the joiner's state transfer",
        Duration::from_secs(60),
        || jh.metrics().states_installed.load(AtomicOrdering::Relaxed) == 1,
    );
    let provided: u64 = (0..3)
        .map(|i| {
            let r = cluster.replica(i).unwrap();
            r.handle()
                .metrics()
                .states_provided
                .load(AtomicOrdering::Relaxed)
        })
        .sum();
    assert!(provided >= 1, "no member provided the state");
    let off_thread: u64 = (0..3)
        .map(|i| {
            let r = cluster.replica(i).unwrap();
            r.handle()
                .metrics()
                .states_provided_off_thread
                .load(AtomicOrdering::Relaxed)
        })
        .sum();
    assert!(
        off_thread >= 1,
        "no member encoded the state off its thread (KvMachine captures its state)"
    );
    progress(300);

    // A member crashes: the others install a view without it and keep serving.
    cluster.kill(1).unwrap();
    progress(300);

    let logs = load.finish();

    let snaps = settled_snapshots(&cluster);
    assert_eq!(
        snaps.iter().map(|s| s.0).collect::<Vec<_>>(),
        vec![0, 2, 3],
        "the survivors and the joiner"
    );
    let bytes = snaps[0].1.encode();
    for (i, s) in &snaps {
        assert!(
            s.encode() == bytes,
            "replica {i}'s snapshot differs from replica 0's at position {} ({} vs {} sessions)",
            s.applied,
            s.session_count(),
            snaps[0].1.session_count()
        );
    }
    assert!(snaps[0].1.session_count() >= CLIENTS as usize);
    let joiner_applied = jh.metrics().commands_applied.load(AtomicOrdering::Relaxed);
    assert!(
        joiner_applied > 0,
        "the joiner applied nothing after its state"
    );

    let retried: u64 = logs.iter().map(|l| l.retried).sum();
    let duplicates: u64 = [0usize, 2, 3]
        .iter()
        .map(|&i| {
            let h = cluster.replica(i).unwrap().handle();
            h.metrics().duplicates.load(AtomicOrdering::Relaxed)
        })
        .sum();
    assert!(
        retried > 0,
        "no command was retried at another replica: the view changes did not exercise fail-over"
    );
    eprintln!(
        "{} operations, {retried} commands retried at another replica, {duplicates} duplicates \
         answered from the session tables, final position {}",
        logs.iter().map(|l| l.ops.len()).sum::<usize>(),
        snaps[0].1.applied
    );
    let ops: Vec<_> = logs.into_iter().flat_map(|l| l.ops).collect();
    if let Err(e) = check(&Kv, &ops) {
        panic!("the history is not linearizable: {e}");
    }
}

#[test]
fn kv_on_membership_a_replica_leaves_and_the_rest_carry_on() {
    let mut cluster = MemCluster::start(Ordering::Membership, 4, 0).unwrap();
    let load = Load::start(&cluster);
    let progress = |n: u64| load.progress(n);
    progress(300);
    // Replica 2 leaves; clients keep asking it too (it answers `Unavailable` once out).
    cluster.leave(2).unwrap();
    // Out once it stops applying while the others go on.
    let until = Instant::now() + Duration::from_secs(60);
    let left_at = loop {
        let before = snapshot(&cluster, 2).applied;
        progress(100);
        if snapshot(&cluster, 2).applied == before {
            break before;
        }
        assert!(Instant::now() < until, "the leaver never stopped applying");
    };
    progress(300);
    let logs = load.finish();

    let leaver = snapshot(&cluster, 2);
    assert_eq!(
        leaver.applied, left_at,
        "the leaver kept applying after leaving"
    );
    let snaps = settled_among(&cluster, &[0, 1, 3]);
    let bytes = snaps[0].1.encode();
    assert!(
        snaps.iter().all(|(_, s)| s.encode() == bytes),
        "survivors differ"
    );
    assert!(
        snaps[0].1.applied > left_at,
        "nothing was applied after the leave ({left_at})"
    );
    let h = cluster.replica(2).unwrap().handle();
    let read = Request::Read {
        mode: ReadMode::Barrier,
        query: KvOp::Get { key: key(0) }.encode(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert!(matches!(
        rt.block_on(h.call(read)),
        Response::Error {
            code: ErrorCode::Unavailable,
            ..
        }
    ));
    // A replica of a fixed group cannot leave; the leaver cannot leave twice.
    assert!(cluster.leave(2).is_err());
    let ops: Vec<_> = logs.into_iter().flat_map(|l| l.ops).collect();
    if let Err(e) = check(&Kv, &ops) {
        panic!("the history is not linearizable: {e}");
    }
}

#[test]
fn fixed_groups_refuse_joins_with_a_reason() {
    let e = MemCluster::start(Ordering::RoundRobin, 3, 1).unwrap_err();
    assert!(e.to_string().contains("membership"), "{e}");
    let mut c = MemCluster::start(Ordering::Membership, 2, 0).unwrap();
    let e = c.add_replica().unwrap_err();
    assert!(e.to_string().contains("spare"), "{e}");
    let mut rr = MemCluster::start(Ordering::RoundRobin, 2, 0).unwrap();
    let e = rr.leave(1).unwrap_err();
    assert!(e.to_string().contains("fixed membership"), "{e}");
}
