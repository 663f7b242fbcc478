//! A KV replica's checkpoint is captured, not encoded, on the replica's thread (s20): the
//! store's persistent map is cloned in O(1) and the membership group's writer thread encodes
//! the replica's snapshot from the clone. This runs three `ReplicaCore<KvMachine>` over real
//! `Group`s (durable epochs, the default `Thread` writer) on the simulator, holds member 0's
//! writer on a gate while the replicas go on applying writes that overwrite the captured keys,
//! then releases it: the file must hold exactly the replica's snapshot at the checkpoint's
//! position (store, sessions, position), not anything applied later.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use squall_kv::{KvMachine, KvOp};
use squall_membership::GmsConfig;
use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::MemLog;
use squall_ordering::{TotalOrder, Upcall};
use squall_round_robin::{Config, FsyncPolicy, Mode};
use squall_smr::wire::Entry;
use squall_smr::{CoreConfig, ReplicaCore, Snapshot, StateMachine};
use squall_transport::{NodeId, RegionId};
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

const N: usize = 3;
/// Keys the writes cycle over (each is overwritten many times while the writer is held).
const KEYS: u64 = 16;

struct Member {
    group: Group<SimNode, MemLog>,
    core: ReplicaCore<KvMachine>,
    /// The next command number of this member's client session.
    seq: u64,
}

struct Cluster {
    base: PathBuf,
    sim: Sim,
    members: Vec<Member>,
}

fn config(base: &Path, node: usize) -> GroupConfig {
    let ids: Vec<NodeId> = (0..N as u32).map(NodeId).collect();
    let mut gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
    gms.heartbeat_interval = Duration::from_micros(50);
    gms.suspicion_timeout = Duration::from_millis(5);
    let mut cfg = GroupConfig::new(
        gms,
        Config {
            window: 8,
            slot_size: 128,
            max_payload: 512,
            chunk_size: 128,
            ..Config::new(ids)
        },
    );
    let path = base.join(format!("n{node}"));
    std::fs::create_dir_all(&path).unwrap();
    cfg.epoch.mode = Mode::Durable {
        path,
        fsync: FsyncPolicy::Never,
    };
    cfg
}

impl Cluster {
    fn start(snapshot_every: u64) -> Cluster {
        let base = std::env::temp_dir().join(format!(
            "squall-kv-checkpoint-capture-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&base);
        let layout = Group::<SimNode, MemLog>::layout(&config(&base, 0)).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(11), N, &layout).unwrap();
        let members = nodes
            .into_iter()
            .enumerate()
            .map(|(i, t)| Member {
                group: Group::new(t, config(&base, i), MemLog::default(), None).unwrap(),
                core: ReplicaCore::new(
                    NodeId(i as u32),
                    KvMachine::default(),
                    CoreConfig {
                        snapshot_every,
                        ..CoreConfig::default()
                    },
                )
                .unwrap(),
                seq: 1,
            })
            .collect();
        Cluster { base, sim, members }
    }

    /// One poll of every member (each submitting a put first if `submit`), its upcalls
    /// applied by its replica core; then simulated time.
    fn step(&mut self, submit: bool) {
        for (i, m) in self.members.iter_mut().enumerate() {
            if submit && m.group.view().is_some() {
                let put = KvOp::Put {
                    key: format!("key{}", m.seq % KEYS).into_bytes(),
                    value: format!("member {i} write {}", m.seq).into_bytes(),
                }
                .encode();
                let entry = Entry::Command {
                    client: 100 + i as u64,
                    seq: m.seq,
                    acked: m.seq - 1,
                    payload: &put,
                }
                .encode();
                if m.group.submit(&entry).is_ok() {
                    m.seq += 1;
                }
            }
            let mut upcalls: Vec<Upcall<_>> = Vec::new();
            m.group.poll(&mut upcalls);
            m.core.upcalls_from(&mut m.group, upcalls);
            m.core.take_replies();
        }
        self.sim.advance(Duration::from_micros(5));
    }

    fn dir(&self, i: usize) -> PathBuf {
        self.base.join(format!("n{i}"))
    }

    fn checkpoints(&self, i: usize) -> u64 {
        self.members[i]
            .core
            .metrics()
            .checkpoints
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.members.clear();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// The snapshot files (temporary ones included) in `dir`.
fn snapshots(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("snapshot-"))
        .collect();
    out.sort();
    out
}

#[test]
fn a_checkpoint_encoded_on_the_writer_thread_is_the_state_at_its_position() {
    let mut c = Cluster::start(40);
    let gate = c.members[0].group.gate_checkpoint_writer();
    // Run until member 0's replica starts its first checkpoint: its state right then (the
    // poll that started it applied everything before it) is what the file must hold.
    let mut rounds = 0;
    while c.members[0].group.checkpoint_in_flight().is_none() {
        c.step(rounds % 3 == 0);
        rounds += 1;
        assert!(rounds < 100_000, "member 0 never checkpointed");
    }
    let at = c.members[0].group.checkpoint_in_flight().unwrap();
    let core = &c.members[0].core;
    assert_eq!(core.applied(), at);
    let expected = core.snapshot().encode();
    let store_then = core.state().snapshot();
    // Held: the replicas go on applying writes over the same keys; nothing is written.
    for k in 0..600u32 {
        c.step(k % 3 == 0);
    }
    let core = &c.members[0].core;
    assert!(
        core.applied() > at + 2 * KEYS,
        "member 0 applied {} past the checkpoint's {at}",
        core.applied()
    );
    assert_ne!(core.state().snapshot(), store_then, "the store moved on");
    assert!(
        snapshots(&c.dir(0)).is_empty(),
        "{:?}",
        snapshots(&c.dir(0))
    );
    assert_eq!(c.checkpoints(0), 0);
    // Released: a later poll records it and the replica counts it.
    gate.send(()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.checkpoints(0) == 0 {
        c.step(false);
        assert!(Instant::now() < deadline, "the writer never finished");
        std::thread::sleep(Duration::from_millis(1));
    }
    // (The next checkpoint, due at once, may be under way already.)
    let file = squall_membership::snapshot::checkpoint_file_name(0, 0, at);
    let files = snapshots(&c.dir(0));
    assert!(files.contains(&file), "{file} not in {files:?}");
    let snap = squall_membership::snapshot::read(&c.dir(0), &file, 1 << 30).unwrap();
    assert_eq!(snap.position, at);
    assert!(
        snap.state == expected,
        "the file holds another state than the replica's at {at}"
    );
    let decoded = Snapshot::decode(&snap.state).unwrap();
    assert_eq!((decoded.applied, decoded.session_count()), (at, N));
    let mut restored = KvMachine::default();
    restored.restore(&decoded.state).unwrap();
    assert_eq!(restored.snapshot(), store_then);
}
