//! A simulated replicated KV service: every replica a `ReplicaCore` over a backend on the
//! simulated fabric, simulated clients with timeouts and fail-over, and the history they
//! observe, recorded for the linearizability checker.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use squall_cas_paxos::layout::Layout;
use squall_cas_paxos::log::{CasPaxos, LogConfig};
use squall_membership::GmsConfig;
use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::MemLog;
use squall_membership::snapshot::CheckpointWriter;
use squall_ordering::linearizability::Operation;
use squall_ordering::linearizability::kv::{KvInput, KvOutput};
use squall_ordering::{Delivery, TotalOrder, Upcall};
use squall_round_robin::{Config, FsyncPolicy, Mode, RoundRobin};
use squall_smr::wire::{ErrorCode, ReadMode, Request, Response};
use squall_smr::{
    CoreConfig, InstallJob, ReplicaCore, RestoreError, StateDecoder, StateMachine, StateTransfer,
    Token,
};
use squall_transport::{NodeId, RegionId};
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

/// The KV state machine of the tests: `u64` keys and values, the checker's model exactly.
#[derive(Default, Clone, PartialEq, Eq, Debug)]
pub struct KvSm(pub BTreeMap<u64, u64>);

pub fn encode_input(i: &KvInput) -> Vec<u8> {
    let mut out = Vec::new();
    let (tag, a, b, c) = match *i {
        KvInput::Get(k) => (0u8, k, 0, 0),
        KvInput::Put(k, v) => (1, k, v, 0),
        KvInput::Delete(k) => (2, k, 0, 0),
        KvInput::Cas(k, e, n) => (3 + u8::from(e.is_some()), k, e.unwrap_or(0), n),
        KvInput::Scan(lo, hi) => (5, lo, hi, 0),
    };
    out.push(tag);
    for x in [a, b, c] {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

fn decode_input(b: &[u8]) -> Option<KvInput> {
    if b.len() != 25 {
        return None;
    }
    let w = |i: usize| u64::from_le_bytes(b[1 + 8 * i..9 + 8 * i].try_into().unwrap());
    Some(match b[0] {
        0 => KvInput::Get(w(0)),
        1 => KvInput::Put(w(0), w(1)),
        2 => KvInput::Delete(w(0)),
        3 => KvInput::Cas(w(0), None, w(2)),
        4 => KvInput::Cas(w(0), Some(w(1)), w(2)),
        5 => KvInput::Scan(w(0), w(1)),
        _ => return None,
    })
}

pub fn decode_output(b: &[u8]) -> Option<KvOutput> {
    let w = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            b.get(1 + 8 * i..9 + 8 * i)?.try_into().ok()?,
        ))
    };
    Some(match *b.first()? {
        0 => KvOutput::Ok,
        1 => KvOutput::Value(None),
        2 => KvOutput::Value(Some(w(0)?)),
        3 | 4 => KvOutput::Cas(
            b[0] == 4,
            if w(0)? == u64::MAX { None } else { Some(w(0)?) },
        ),
        5 => KvOutput::Scan(
            (0..(b.len() - 1) / 16)
                .map(|i| (w(2 * i).unwrap(), w(2 * i + 1).unwrap()))
                .collect(),
        ),
        _ => return None,
    })
}

fn encode_output(o: &KvOutput) -> Vec<u8> {
    let mut out = Vec::new();
    match o {
        KvOutput::Ok => out.push(0),
        KvOutput::Value(None) => out.push(1),
        KvOutput::Value(Some(v)) => {
            out.push(2);
            out.extend_from_slice(&v.to_le_bytes());
        }
        KvOutput::Cas(swapped, seen) => {
            out.push(if *swapped { 4 } else { 3 });
            out.extend_from_slice(&seen.unwrap_or(u64::MAX).to_le_bytes());
        }
        KvOutput::Scan(pairs) => {
            out.push(5);
            for (k, v) in pairs {
                out.extend_from_slice(&k.to_le_bytes());
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    out
}

impl KvSm {
    fn run(&mut self, input: &[u8]) -> Vec<u8> {
        let Some(i) = decode_input(input) else {
            return vec![0xff];
        };
        let (next, out) = squall_ordering::linearizability::Model::step(
            &squall_ordering::linearizability::kv::Kv,
            &self.0,
            &i,
        );
        self.0 = next;
        encode_output(&out)
    }
}

impl StateMachine for KvSm {
    fn apply(&mut self, command: &[u8]) -> Vec<u8> {
        self.run(command)
    }
    fn query(&self, query: &[u8]) -> Vec<u8> {
        // Reads never change the map; run them on a copy of the touched part.
        self.clone().run(query)
    }
    fn snapshot(&self) -> Vec<u8> {
        self.0
            .iter()
            .flat_map(|(k, v)| [k.to_le_bytes(), v.to_le_bytes()].concat())
            .collect()
    }
    fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> {
        if s.len() % 16 != 0 {
            return Err(RestoreError::new("length not a multiple of 16"));
        }
        self.0 = s
            .chunks(16)
            .map(|c| {
                (
                    u64::from_le_bytes(c[..8].try_into().unwrap()),
                    u64::from_le_bytes(c[8..].try_into().unwrap()),
                )
            })
            .collect();
        Ok(())
    }
    /// `restore` into a fresh map (used by a replica that decodes off its thread).
    fn snapshot_decoder(&self) -> Option<StateDecoder<KvSm>> {
        Some(Box::new(|s: &[u8]| {
            let mut fresh = KvSm::default();
            fresh.restore(s).map(|()| fresh)
        }))
    }
}

/// Which backend a simulated cluster runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    RoundRobin,
    CasPaxos,
    /// `squall-membership`'s `Group`; the cluster's replicas past `members` start outside
    /// the group and join (with a state transfer) when the test says.
    Membership {
        members: usize,
    },
    /// `squall-membership`'s `Group` with durable epochs (one directory per replica in a
    /// scratch directory, never synced: a simulated kill is a process crash, the files survive
    /// it; checkpoints written inline, deterministically), every replica a member of view 0
    /// and checkpointing every `snapshot_every` applied deliveries. Replicas can be killed
    /// keeping their GMS log ([`Cluster::kill`]) and restarted from it ([`Cluster::restart`]).
    Durable {
        snapshot_every: u64,
    },
}

/// A replica's backend: a fixed group, or a membership `Group` (kept concrete so the test can
/// ask it to join).
pub enum Be {
    Plain(Box<dyn TotalOrder>),
    Group(Box<Group<SimNode, MemLog>>),
}

impl Be {
    pub fn order(&mut self) -> &mut dyn TotalOrder {
        match self {
            Be::Plain(b) => b.as_mut(),
            Be::Group(g) => g.as_mut(),
        }
    }
}

pub fn group_config(universe: usize, members: usize) -> GroupConfig {
    let ids: Vec<NodeId> = (0..universe as u32).map(NodeId).collect();
    let mut gms = GmsConfig::new(RegionId(0), ids.clone(), ids[..members].to_vec());
    gms.heartbeat_interval = Duration::from_micros(50);
    gms.suspicion_timeout = Duration::from_micros(1500);
    let mut cfg = GroupConfig::new(gms, rr_config(universe));
    cfg.transfer.chunk_size = 256;
    cfg.transfer.window = 4;
    cfg
}

/// `cfg` with durable epochs in `base/n<node>` (created), never synced, the checkpoint file
/// written inline (the simulator stays deterministic), and a restart's replay handed out two
/// upcalls per poll (so "during the replay" lasts some steps).
pub fn durable_config(mut cfg: GroupConfig, base: &Path, node: usize) -> GroupConfig {
    let path = base.join(format!("n{node}"));
    std::fs::create_dir_all(&path).unwrap();
    cfg.epoch.mode = Mode::Durable {
        path,
        fsync: FsyncPolicy::Never,
    };
    cfg.checkpoint_writer = CheckpointWriter::Inline;
    cfg.replay_batch = 2;
    cfg
}

/// An empty scratch directory, unique to this process and cluster.
fn scratch_dir(seed: u64) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "squall-smr-sim-{}-{}-{seed}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

pub fn rr_config(n: usize) -> Config {
    Config {
        heartbeat_interval: Duration::from_micros(50),
        suspicion_timeout: Duration::from_micros(1500),
        window: 8,
        slot_size: 256,
        max_payload: 256,
        ..Config::new((0..n as u32).map(NodeId).collect())
    }
}

pub fn paxos_config(n: usize, seed: u64) -> LogConfig {
    LogConfig {
        layout: Layout {
            proposers: n,
            slots: 4096,
            max_value_len: 128,
        },
        window: 8,
        max_pending: 64,
        backoff: (Duration::from_micros(5), Duration::from_micros(40)),
        heartbeat_period: Duration::from_micros(20),
        leader_timeout: Duration::from_micros(300),
        recycle_timeout: Duration::from_millis(3),
        seed,
        rpc_threshold: squall_cas_paxos::decree::default_rpc_threshold(n),
    }
}

struct ClientState {
    session: u64,
    seq: u64,
    acked: u64,
    /// The operation in progress: its index in `ops`, the request, the token of the current
    /// attempt, the replica and the attempt's deadline.
    current: Option<(usize, Request, Token, usize, u64)>,
    attempts: usize,
    replica: usize,
}

/// A simulated cluster with clients.
pub struct Cluster {
    pub sim: Sim,
    pub backends: Vec<Option<Be>>,
    pub cores: Vec<Option<ReplicaCore<KvSm>>>,
    /// Upcalls a lagging replica has not applied yet.
    pub held: Vec<Option<Vec<Upcall<Delivery>>>>,
    /// Per replica that decodes its state off its thread
    /// ([`ReplicaCore::decode_off_thread`]): the decode it handed out, held until
    /// [`finish_install`](Cluster::finish_install) (a decode as slow as the test likes).
    pub installs: Vec<Option<InstallJob<KvSm>>>,
    /// `Backend::Durable`: replicas restarted by [`restart`](Cluster::restart) decode their
    /// state off their thread (their jobs held in [`installs`](Cluster::installs)).
    pub restart_decoding_off_thread: bool,
    clients: Vec<ClientState>,
    pub ops: Vec<Operation<KvInput, KvOutput>>,
    /// Which client holds each token.
    tokens: HashMap<Token, usize>,
    next_token: Token,
    /// Per replica: every delivered position and payload in order (checked to agree at every
    /// position, at every step; a joiner's start at the position of its state).
    pub delivered: Vec<Vec<(u64, Vec<u8>)>>,
    /// The payload at every position any replica delivered.
    by_position: BTreeMap<u64, Vec<u8>>,
    /// Positions must be gapless (the membership backend).
    gapless: bool,
    /// Per replica, how many of its deliveries were checked already.
    checked: Vec<usize>,
    pub read_mode: ReadMode,
    pub timeout: Duration,
    pub max_attempts: usize,
    upcalls: Vec<Upcall<Delivery>>,
    /// `Backend::Durable`: the scratch directory holding every replica's epoch files.
    dir: Option<PathBuf>,
    /// The replicas' configuration (`snapshot_every` for `Backend::Durable`).
    core_config: CoreConfig,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl Cluster {
    pub fn new(backend: Backend, n: usize, clients: usize, seed: u64) -> Cluster {
        Cluster::with_groups(backend, n, clients, seed, |_, _| {})
    }

    /// [`new`](Cluster::new), with `tweak(i, cfg)` applied to replica `i`'s `GroupConfig`
    /// (membership backends only).
    pub fn with_groups(
        backend: Backend,
        n: usize,
        clients: usize,
        seed: u64,
        tweak: impl Fn(usize, &mut GroupConfig),
    ) -> Cluster {
        let rr = rr_config(n);
        let px = paxos_config(n, seed);
        let members = match backend {
            Backend::Membership { members } => members,
            _ => n,
        };
        let gc = group_config(n, members);
        let (dir, core_config) = match backend {
            Backend::Durable { snapshot_every } => (
                Some(scratch_dir(seed)),
                CoreConfig {
                    snapshot_every,
                    ..CoreConfig::default()
                },
            ),
            _ => (None, CoreConfig::default()),
        };
        let layout = match backend {
            Backend::RoundRobin => RoundRobin::<SimNode>::layout(&rr).unwrap(),
            Backend::CasPaxos => px.regions(),
            Backend::Membership { .. } | Backend::Durable { .. } => {
                Group::<SimNode, MemLog>::layout(&gc).unwrap()
            }
        };
        let (sim, endpoints) = Sim::cluster(SimConfig::seeded(seed), n, &layout).unwrap();
        let backends = endpoints
            .into_iter()
            .enumerate()
            .map(|(i, t)| -> Option<Be> {
                Some(match backend {
                    Backend::RoundRobin => {
                        Be::Plain(Box::new(RoundRobin::new(t, rr.clone()).unwrap()))
                    }
                    Backend::CasPaxos => Be::Plain(Box::new(CasPaxos::new(t, px.clone()).unwrap())),
                    Backend::Membership { .. } => {
                        let mut cfg = gc.clone();
                        tweak(i, &mut cfg);
                        Be::Group(Box::new(
                            Group::new(t, cfg, MemLog::default(), None).unwrap(),
                        ))
                    }
                    Backend::Durable { .. } => {
                        let mut cfg = durable_config(gc.clone(), dir.as_deref().unwrap(), i);
                        tweak(i, &mut cfg);
                        Be::Group(Box::new(
                            Group::new(t, cfg, MemLog::default(), None).unwrap(),
                        ))
                    }
                })
            })
            .collect::<Vec<_>>();
        let cores = (0..n)
            .map(|i| {
                let mut core =
                    ReplicaCore::new(NodeId(i as u32), KvSm::default(), core_config.clone())
                        .unwrap();
                if i >= members {
                    // What `Replica::spawn_joinable` does for a backend without the state.
                    core.await_state();
                }
                Some(core)
            })
            .collect();
        let clients = (0..clients)
            .map(|c| ClientState {
                session: 1000 + c as u64,
                seq: 0,
                acked: 0,
                current: None,
                attempts: 0,
                replica: c % n,
            })
            .collect();
        Cluster {
            sim,
            backends,
            cores,
            held: vec![None; n],
            installs: (0..n).map(|_| None).collect(),
            restart_decoding_off_thread: false,
            clients,
            ops: Vec::new(),
            tokens: HashMap::new(),
            next_token: 0,
            delivered: vec![Vec::new(); n],
            by_position: BTreeMap::new(),
            gapless: matches!(
                backend,
                Backend::Membership { .. } | Backend::Durable { .. }
            ),
            checked: vec![0; n],
            read_mode: ReadMode::Barrier,
            timeout: Duration::from_millis(3),
            max_attempts: 2 * n,
            upcalls: Vec::new(),
            dir,
            core_config,
        }
    }

    /// `Backend::Durable`: kills replica `i` (a process crash: its epoch files stay) and
    /// returns its GMS log bytes (`None` if it was down already).
    pub fn kill(&mut self, i: usize) -> Option<Vec<u8>> {
        let bytes = self.group(i).map(|g| g.gms().log().bytes().to_vec());
        self.crash(i);
        bytes
    }

    /// `Backend::Durable`: restarts killed replica `i` (same id, a new incarnation on the
    /// fabric) from `log`, its GMS log bytes, and its epoch files, as the runtime starts a
    /// replica on a joinable backend: joining if the group holds no state for it, restarting
    /// (answering `Unavailable`) while the group restarts from its logs.
    pub fn restart(&mut self, i: usize, log: Vec<u8>) {
        let dir = self.dir.clone().expect("a durable cluster");
        let t = self.sim.restart_node(NodeId(i as u32)).unwrap();
        let (log, rec) = MemLog::open(log);
        let rec = (!rec.records.is_empty()).then_some(rec);
        let cfg = durable_config(group_config(self.n(), self.n()), &dir, i);
        let group = Group::new(t, cfg, log, rec.as_ref()).unwrap();
        let mut core =
            ReplicaCore::new(NodeId(i as u32), KvSm::default(), self.core_config.clone()).unwrap();
        if !group.holds_state() {
            core.await_state();
        }
        if let Some(reason) = StateTransfer::restarting(&group) {
            core.await_restart(reason);
        }
        if self.restart_decoding_off_thread {
            core.decode_off_thread();
        }
        self.backends[i] = Some(Be::Group(Box::new(group)));
        self.cores[i] = Some(core);
        self.delivered[i].clear();
        self.checked[i] = 0;
    }

    /// `Backend::Durable`: restarts killed replica `i` as a process that lost its GMS log and
    /// its epoch files (its directory emptied): its group starts view 0 afresh, a member of it
    /// holding the initial state, as the runtime starts it.
    pub fn restart_fresh(&mut self, i: usize) {
        let dir = self.dir.clone().expect("a durable cluster");
        let _ = std::fs::remove_dir_all(dir.join(format!("n{i}")));
        self.restart(i, Vec::new());
    }

    /// Membership: every live replica whose group is active and that has nothing left to
    /// apply (not joining, restarting, installing, catching up or lagging) applied exactly
    /// as many deliveries as its group's next position: a replica behind or past it skipped
    /// or repeated positions.
    pub fn check_positions(&mut self) -> Result<(), String> {
        for i in 0..self.n() {
            if self.held[i].is_some() {
                continue;
            }
            let (Some(core), Some(Be::Group(g))) = (self.cores[i].as_ref(), &self.backends[i])
            else {
                continue;
            };
            if core.is_joining()
                || core.is_restarting()
                || core.is_installing()
                || core.backlog() > 0
                || !g.is_active()
            {
                continue;
            }
            let (applied, next) = (core.applied(), g.next_position());
            if applied != next {
                return Err(format!(
                    "replica {i} applied {applied} deliveries, its group is at position {next}"
                ));
            }
        }
        Ok(())
    }

    /// Asks every live replica that is restarting or joining for a local read of key 0, and
    /// fails unless each answers `Unavailable` (a replica whose state is not the group's
    /// answers nothing from it, not even a local read). Other replies are handed on.
    pub fn probe_unavailable(&mut self) -> Result<(), String> {
        const PROBE: Token = Token::MAX;
        for i in 0..self.n() {
            let Some(core) = self.cores[i].as_mut() else {
                continue;
            };
            if !core.is_restarting() && !core.is_joining() {
                continue;
            }
            core.request(
                PROBE,
                Request::Read {
                    mode: ReadMode::Local,
                    query: encode_input(&KvInput::Get(0)),
                },
            );
            let mut answered = false;
            for (t, r) in core.take_replies() {
                if t != PROBE {
                    self.complete(t, r);
                    continue;
                }
                answered = true;
                if !matches!(
                    r,
                    Response::Error {
                        code: ErrorCode::Unavailable,
                        ..
                    }
                ) {
                    return Err(format!(
                        "replica {i}, restarting or joining, answered a local read {r:?}"
                    ));
                }
            }
            if !answered {
                return Err(format!("replica {i} did not answer a local read at once"));
            }
        }
        Ok(())
    }

    pub fn n(&self) -> usize {
        self.cores.len()
    }

    pub fn now(&self) -> u64 {
        self.sim.now().as_nanos()
    }

    /// Membership: replica `i` (outside the group) asks to join.
    pub fn join(&mut self, i: usize) {
        match self.backends[i].as_mut() {
            Some(Be::Group(g)) => g.join().unwrap(),
            _ => panic!("replica {i} has no membership backend"),
        }
    }

    /// Membership: replica `i`'s group.
    pub fn group(&mut self, i: usize) -> Option<&mut Group<SimNode, MemLog>> {
        match self.backends[i].as_mut() {
            Some(Be::Group(g)) => Some(g.as_mut()),
            _ => None,
        }
    }

    /// Whether replica `i` runs: not crashed, and (membership) its group did not stop.
    pub fn live(&self, i: usize) -> bool {
        self.cores[i].is_some()
            && match &self.backends[i] {
                Some(Be::Group(g)) => g.stopped().is_none(),
                _ => true,
            }
    }

    /// Steps until every live replica that holds a state applied the same number of
    /// deliveries (at most `rounds` steps); returns that number.
    pub fn settle(&mut self, rounds: usize) -> Result<u64, String> {
        for _ in 0..rounds {
            let applied: Vec<u64> = (0..self.n())
                .filter(|&i| self.live(i))
                .filter_map(|i| self.cores[i].as_ref())
                .filter(|c| !c.is_joining())
                .map(|c| c.applied())
                .collect();
            if applied.windows(2).all(|w| w[0] == w[1]) && self.busy_clients() == 0 {
                return Ok(applied.first().copied().unwrap_or(0));
            }
            self.step()?;
        }
        Err(format!(
            "replicas did not settle: applied {:?}",
            self.cores
                .iter()
                .map(|c| c.as_ref().map(|c| c.applied()))
                .collect::<Vec<_>>()
        ))
    }

    pub fn crash(&mut self, i: usize) {
        self.sim.crash(NodeId(i as u32));
        self.backends[i] = None;
        self.cores[i] = None;
        self.installs[i] = None;
    }

    /// Sends client `c`'s next operation to `replica`.
    pub fn point(&mut self, c: usize, replica: usize) {
        self.clients[c].replica = replica;
    }

    /// Whether client `c` is idle (may start an operation).
    pub fn idle(&self, c: usize) -> bool {
        self.clients[c].current.is_none()
    }

    pub fn busy_clients(&self) -> usize {
        self.clients.iter().filter(|c| c.current.is_some()).count()
    }

    /// Client `c` starts `input` (a command, or a read when it is a get or scan) at its
    /// current replica.
    pub fn start(&mut self, c: usize, input: KvInput) {
        self.start_with(c, input, self.read_mode);
    }

    pub fn start_with(&mut self, c: usize, input: KvInput, mode: ReadMode) {
        assert!(self.idle(c));
        let now = self.now();
        let req = match input {
            KvInput::Get(_) | KvInput::Scan(..) => Request::Read {
                mode,
                query: encode_input(&input),
            },
            _ => {
                let cl = &mut self.clients[c];
                cl.seq += 1;
                Request::Command {
                    client: cl.session,
                    seq: cl.seq,
                    acked: cl.acked,
                    payload: encode_input(&input),
                }
            }
        };
        self.ops.push(Operation {
            client: c as u64,
            input,
            call: now,
            ret: None,
            output: None,
        });
        let op = self.ops.len() - 1;
        self.clients[c].attempts = 0;
        self.send(c, op, req);
    }

    /// Sends (or resends) client `c`'s request to its current replica.
    fn send(&mut self, c: usize, op: usize, req: Request) {
        let token = self.next_token;
        self.next_token += 1;
        self.tokens.insert(token, c);
        let deadline = self.now() + self.timeout.as_nanos() as u64;
        let r = self.clients[c].replica;
        self.clients[c].attempts += 1;
        self.clients[c].current = Some((op, req.clone(), token, r, deadline));
        if let Some(core) = self.cores[r].as_mut() {
            core.request(token, req);
        }
    }

    fn complete(&mut self, token: Token, resp: Response) {
        let Some(c) = self.tokens.remove(&token) else {
            return;
        };
        let Some((op, req, t, _, _)) = self.clients[c].current.clone() else {
            return;
        };
        if t != token {
            return; // an answer to an abandoned attempt
        }
        match resp {
            Response::Ok(bytes) => {
                let out = decode_output(&bytes).expect("a KV output");
                self.ops[op].ret = Some(self.now());
                self.ops[op].output = Some(out);
                if let Request::Command { seq, .. } = req {
                    self.clients[c].acked = seq;
                }
                self.clients[c].current = None;
            }
            Response::Error { .. } => self.retry(c),
        }
    }

    /// The current attempt failed or timed out: next replica, or give up (outcome unknown).
    fn retry(&mut self, c: usize) {
        let Some((op, req, token, r, _)) = self.clients[c].current.take() else {
            return;
        };
        self.tokens.remove(&token);
        if let Some(core) = self.cores[r].as_mut() {
            core.cancel(token);
        }
        if self.clients[c].attempts >= self.max_attempts {
            return; // unknown outcome: ret stays None
        }
        self.clients[c].replica = (r + 1) % self.n();
        self.send(c, op, req);
    }

    /// One replica's turn: submit, poll, apply (unless lagging), answer.
    pub fn turn(&mut self, i: usize) {
        let (Some(core), Some(backend)) = (self.cores[i].as_mut(), self.backends[i].as_mut())
        else {
            return;
        };
        core.flush_reads();
        while let Some(e) = core.outgoing() {
            match backend.order().submit(e) {
                Ok(()) => core.submitted(),
                Err(err) => {
                    if core.refused(&err) {
                        break;
                    }
                }
            }
        }
        self.upcalls.clear();
        backend.order().poll(&mut self.upcalls);
        for u in &self.upcalls {
            if let Upcall::Deliver(d) = u {
                self.delivered[i].push((d.position, d.payload.clone()));
            }
        }
        match (backend, self.held[i].as_mut()) {
            (_, Some(h)) => h.append(&mut self.upcalls),
            // The runtime's step for a backend with state transfer.
            (Be::Group(g), None) => core.upcalls_from(g.as_mut(), self.upcalls.drain(..)),
            (Be::Plain(_), None) => {
                for u in self.upcalls.drain(..) {
                    core.upcall(u);
                }
            }
        }
        if let Some(job) = core.take_install() {
            self.installs[i] = Some(job);
        }
        let replies = core.take_replies();
        for (t, r) in replies {
            self.complete(t, r);
        }
    }

    /// Runs the decode replica `i` handed out (see [`installs`](Cluster::installs)) and
    /// installs its result; false if it handed out none.
    pub fn finish_install(&mut self, i: usize) -> bool {
        let (Some(job), Some(core)) = (self.installs[i].take(), self.cores[i].as_mut()) else {
            return false;
        };
        core.install_decoded(job.run());
        true
    }

    /// Makes replica `i` lag: it keeps receiving but applies nothing until `catch_up`.
    pub fn lag(&mut self, i: usize) {
        self.held[i] = Some(Vec::new());
    }

    pub fn catch_up(&mut self, i: usize) {
        let mut replies = Vec::new();
        if let (Some(h), Some(core)) = (self.held[i].take(), self.cores[i].as_mut()) {
            for u in h {
                core.upcall(u);
            }
            replies = core.take_replies();
        }
        for (t, r) in replies {
            self.complete(t, r);
        }
    }

    /// Every live replica's turn (if the scheduler gives it one), client timeouts, then the
    /// fabric moves on. Checks agreement of the delivered prefixes.
    pub fn step(&mut self) -> Result<(), String> {
        for i in 0..self.n() {
            if self.cores[i].is_some() && self.sim.takes_turn(NodeId(i as u32)) {
                self.turn(i);
            }
        }
        let now = self.now();
        for c in 0..self.clients.len() {
            if self.clients[c]
                .current
                .as_ref()
                .is_some_and(|cur| cur.4 <= now)
            {
                self.retry(c);
            }
        }
        for _ in 0..1 + self.sim.random(2) {
            self.sim.step();
        }
        self.sim.advance(Duration::from_micros(1));
        self.check_agreement()
    }

    /// Every two replicas delivered the same payload at every position both delivered; replicas
    /// that started from position 0 delivered sequences one a prefix of the other; with the
    /// membership backend, every replica's positions are gapless (from 0, or from a joiner's
    /// state).
    pub fn check_agreement(&mut self) -> Result<(), String> {
        for i in 0..self.n() {
            let d = &self.delivered[i];
            for (p, payload) in &d[self.checked[i]..] {
                if self
                    .by_position
                    .entry(*p)
                    .or_insert_with(|| payload.clone())
                    != payload
                {
                    return Err(format!("replica {i} delivered another payload at {p}"));
                }
            }
            if self.gapless {
                if let Some(w) = d[self.checked[i].saturating_sub(1)..]
                    .windows(2)
                    .find(|w| w[1].0 != w[0].0 + 1)
                {
                    return Err(format!(
                        "replica {i} delivered position {} after {}",
                        w[1].0, w[0].0
                    ));
                }
            }
            self.checked[i] = d.len();
        }
        let from_zero: Vec<usize> = (0..self.n())
            .filter(|&i| self.delivered[i].first().is_none_or(|d| d.0 == 0))
            .collect();
        let longest = from_zero
            .iter()
            .copied()
            .max_by_key(|&i| self.delivered[i].len())
            .unwrap_or(0);
        for i in from_zero {
            let n = self.delivered[i].len();
            if self.delivered[i][..] != self.delivered[longest][..n] {
                return Err(format!(
                    "replica {i}'s deliveries are not a prefix of replica {longest}'s"
                ));
            }
        }
        Ok(())
    }

    /// Live replicas that applied the same number of entries hold identical snapshots.
    pub fn check_states(&self) -> Result<(), String> {
        let mut by_applied: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for (i, core) in self.cores.iter().enumerate() {
            let Some(core) = core else { continue };
            if self.held[i].is_some() {
                continue;
            }
            let snap = core.snapshot().encode();
            if let Some(other) = by_applied.insert(core.applied(), snap.clone()) {
                if other != snap {
                    return Err(format!(
                        "replica {i} diverged at position {}",
                        core.applied()
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Cluster {
    /// Every idle client starts a random operation with probability 1/30, then a step.
    pub fn load_step(&mut self, keys: u64, next_value: &mut u64) -> Result<(), String> {
        for c in 0..self.clients.len() {
            if self.idle(c) && self.sim.random(30) == 0 {
                let op = random_op(self, keys, next_value);
                self.start(c, op);
            }
        }
        self.step()
    }
}

/// Every live replica that holds a state (joiners once they installed theirs) has the same
/// snapshot bytes at the same position.
pub fn same_snapshots(cl: &Cluster) -> Result<u64, String> {
    let snaps: Vec<(usize, u64, Vec<u8>)> = (0..cl.n())
        .filter(|&i| cl.live(i))
        .filter_map(|i| {
            let c = cl.cores[i].as_ref().filter(|c| !c.is_joining())?;
            Some((i, c.applied(), c.snapshot().encode()))
        })
        .collect();
    let Some((_, at, first)) = snaps.first() else {
        return Err("no live replica holds a state".into());
    };
    for (i, applied, s) in &snaps {
        if applied != at || s != first {
            return Err(format!(
                "replica {i} at position {applied} differs from replica {} at {at}",
                snaps[0].0
            ));
        }
    }
    Ok(*at)
}

/// A random KV operation over `keys` keys, with values numbered from `next_value`.
pub fn random_op(cl: &Cluster, keys: u64, next_value: &mut u64) -> KvInput {
    let k = cl.sim.random(keys);
    *next_value += 1;
    match cl.sim.random(10) {
        0..=3 => KvInput::Get(k),
        4..=6 => KvInput::Put(k, *next_value),
        7 => KvInput::Delete(k),
        8 => KvInput::Cas(
            k,
            Some(next_value.saturating_sub(1 + cl.sim.random(3))),
            *next_value,
        ),
        _ => KvInput::Scan(0, keys),
    }
}
