//! Cluster configuration and starting replicas: one per process over TCP (`serve`), or a whole
//! in-process cluster on the threaded fabric.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use squall_cas_paxos::layout::Layout;
use squall_cas_paxos::log::{CasPaxos, LogConfig};
use squall_membership::group::{Group, GroupConfig, GroupError};
use squall_membership::log::{FileLog, MemLog, Recovered};
use squall_membership::snapshot::CheckpointWriter;
use squall_membership::{GmsConfig, GmsError};
use squall_ordering::TotalOrder;
use squall_round_robin::{Config as RrConfig, FsyncPolicy, Mode, RoundRobin};
use squall_smr::{Replica, ReplicaConfig};
use squall_transport::{NodeId, Region, RegionId, RegionSpec, Transport};
use squall_transport_tcp::{ClusterConfig, TcpNode};
use thiserror::Error;

use crate::machine::KvMachine;

/// The ordering backend a cluster runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Ordering {
    /// Derecho's leader-free round-robin multicast (a crash wedges the fixed view).
    RoundRobin,
    /// Velos's one-sided Paxos (a majority keeps deciding after a crash).
    CasPaxos,
    /// Round-robin epochs under virtual-synchrony membership (`squall-membership`'s `Group`):
    /// a crash installs a view without the replica and the rest carry on; replicas can join
    /// a running cluster with a state transfer.
    Membership,
}

impl std::fmt::Display for Ordering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Ordering::RoundRobin => "round-robin",
            Ordering::CasPaxos => "cas-paxos",
            Ordering::Membership => "membership",
        })
    }
}

/// When a durable replica (`data_dir` set) syncs its logs to disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fsync {
    /// The epoch logs `fdatasync` every receive batch before counting it received, and the
    /// membership log syncs every record: an acknowledged write survives a power loss of every
    /// replica.
    #[default]
    Batch,
    /// No `fsync` of the epoch logs, nor of the membership log's `Installed` records: what was
    /// written survives a crash of the *processes* (the page cache keeps it), not a power loss.
    Never,
}

impl std::fmt::Display for Fsync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fsync::Batch => "batch",
            Fsync::Never => "never",
        })
    }
}

/// A problem with the cluster configuration, saying what to change.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TOML did not parse.
    #[error("invalid cluster config: {0}")]
    Toml(#[from] toml::de::Error),
    /// A value is wrong.
    #[error("invalid cluster config: {0}")]
    Invalid(String),
    /// The transport config was refused.
    #[error(transparent)]
    Transport(#[from] squall_transport_tcp::ConfigError),
}

/// One replica's addresses.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaAddr {
    /// Its node id (0, 1, 2, …).
    pub id: u32,
    /// Where the replicas' transport connects to it.
    pub transport: SocketAddr,
    /// Where clients connect to it.
    pub client: SocketAddr,
}

/// A `squall-kv` cluster:
///
/// ```toml
/// cluster_id = 1
/// ordering = "round-robin"        # or "cas-paxos", "membership"
/// heartbeat_period_ms = 50        # transport heartbeats (optional)
/// heartbeat_timeout_ms = 500      # a silent peer is failed after this (optional)
/// # Durable mode (membership only, optional): replica `i` keeps its membership log and one
/// # epoch log per view in `<data_dir>/replica-<i>/`. Restarted on a directory that holds a
/// # log, it recovers it and the cluster restarts from the logs (a total restart after every
/// # replica was down, e.g. a power cut): every acknowledged write is kept.
/// # data_dir = "/var/lib/squall-kv"
/// # fsync = "batch"               # or "never": survive process crashes only (optional)
/// # snapshot_every = 1000         # checkpoint every 1000 applied log entries; 0: never (optional)
/// # checkpoint_inline = false     # true: write checkpoints on the replica's thread (comparison only)
/// # checkpoint_encode_inline = false # true: encode checkpoints on the replica's thread (comparison only)
/// # install_decode_inline = false # true: restore an installed state on the replica's thread (comparison only)
/// [[replica]]
/// id = 0
/// transport = "127.0.0.1:7000"
/// client = "127.0.0.1:7100"
/// # … one [[replica]] per replica
/// ```
///
/// ```
/// let cfg = squall_kv::KvConfig::from_toml(r#"
///     cluster_id = 1
///     ordering = "cas-paxos"
///     [[replica]]
///     id = 0
///     transport = "127.0.0.1:7000"
///     client = "127.0.0.1:7100"
///     [[replica]]
///     id = 1
///     transport = "127.0.0.1:7001"
///     client = "127.0.0.1:7101"
/// "#)?;
/// assert_eq!(cfg.replicas.len(), 2);
/// assert!(squall_kv::KvConfig::from_toml("cluster_id = 1\nordering = \"raft\"").is_err());
/// // Durable mode needs the membership ordering.
/// let durable = cfg.to_toml().replace("ordering = \"cas-paxos\"", "data_dir = \"/tmp/kv\"\nordering = \"cas-paxos\"");
/// let err = squall_kv::KvConfig::from_toml(&durable).unwrap_err().to_string();
/// assert!(err.contains("data_dir"), "{err}");
/// let durable = durable.replace("cas-paxos", "membership");
/// let cfg = squall_kv::KvConfig::from_toml(&durable)?;
/// assert_eq!(cfg.replica_dir(1), Some(std::path::PathBuf::from("/tmp/kv/replica-1")));
/// # Ok::<(), squall_kv::ClusterError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvConfig {
    /// Identifies the cluster in the transport handshake.
    pub cluster_id: u64,
    /// The ordering backend.
    pub ordering: Ordering,
    /// Transport heartbeat period (ms).
    #[serde(default = "default_hb")]
    pub heartbeat_period_ms: u64,
    /// Transport failure timeout (ms).
    #[serde(default = "default_hb_timeout")]
    pub heartbeat_timeout_ms: u64,
    /// Durable mode ([`Ordering::Membership`] only): each replica keeps its logs in its own
    /// subdirectory ([`replica_dir`](Self::replica_dir), created if missing) and restarts from
    /// them. `None`: nothing is written to disk; a replica that restarts has lost its state.
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    /// When durable replicas sync their logs (ignored without `data_dir`).
    #[serde(default)]
    pub fsync: Fsync,
    /// Durable mode: every this many applied log entries a replica checkpoints its state
    /// (store and client sessions) in its directory and drops the epoch logs the checkpoint
    /// covers, so that a restart installs the checkpoint and replays only the entries after
    /// it. 0: never (a restart replays every log since the cluster began). The replica's
    /// thread only captures the state (an O(1) clone of the store's persistent map, and a copy
    /// of the sessions); the membership group's writer thread encodes, writes and syncs it
    /// (one at a time: a checkpoint still being written when the next is due delays it).
    /// Ignored without `data_dir`.
    #[serde(default = "default_snapshot_every")]
    pub snapshot_every: u64,
    /// Durable mode: write and sync each checkpoint's file on the replica's own thread (the
    /// behaviour before the writer thread, which pauses the replica for the whole write) —
    /// only to measure the difference. Default `false`. Ignored without `data_dir`.
    #[serde(default)]
    pub checkpoint_inline: bool,
    /// Durable mode: encode each checkpoint's state on the replica's own thread (the behaviour
    /// before the state was captured for the writer thread, which pauses the replica for the
    /// whole encoding) — only to measure the difference. Default `false`. Ignored without
    /// `data_dir`.
    #[serde(default)]
    pub checkpoint_encode_inline: bool,
    /// Durable mode: restore a state installed at a restart (its checkpoint) or a join (its
    /// transfer) on the replica's own thread (the behaviour before the state was decoded off
    /// that thread, which pauses the replica for the whole decode) — only to measure the
    /// difference. Default `false`. Ignored without `data_dir`.
    #[serde(default)]
    pub install_decode_inline: bool,
    /// The replicas.
    #[serde(rename = "replica", default)]
    pub replicas: Vec<ReplicaAddr>,
}

fn default_snapshot_every() -> u64 {
    KvConfig::DEFAULT_SNAPSHOT_EVERY
}

fn default_hb() -> u64 {
    50
}

fn default_hb_timeout() -> u64 {
    500
}

impl KvConfig {
    /// The default of [`snapshot_every`](Self::snapshot_every).
    pub const DEFAULT_SNAPSHOT_EVERY: u64 = 1000;

    /// Parses and validates a config.
    pub fn from_toml(text: &str) -> Result<KvConfig, ClusterError> {
        let cfg: KvConfig = toml::from_str(text)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads, parses and validates a config file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<KvConfig, ClusterError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ClusterError::Io {
            path: path.display().to_string(),
            source,
        })?;
        KvConfig::from_toml(&text)
    }

    /// The config as TOML that [`from_toml`](Self::from_toml) reads back.
    pub fn to_toml(&self) -> String {
        let mut s = format!(
            "cluster_id = {}\nordering = \"{}\"\nheartbeat_period_ms = {}\nheartbeat_timeout_ms = {}\nfsync = \"{}\"\nsnapshot_every = {}\ncheckpoint_inline = {}\ncheckpoint_encode_inline = {}\ninstall_decode_inline = {}\n",
            self.cluster_id,
            self.ordering,
            self.heartbeat_period_ms,
            self.heartbeat_timeout_ms,
            self.fsync,
            self.snapshot_every,
            self.checkpoint_inline,
            self.checkpoint_encode_inline,
            self.install_decode_inline
        );
        if let Some(dir) = &self.data_dir {
            let dir = toml::Value::String(dir.display().to_string());
            s.push_str(&format!("data_dir = {dir}\n"));
        }
        for r in &self.replicas {
            s.push_str(&format!(
                "[[replica]]\nid = {}\ntransport = \"{}\"\nclient = \"{}\"\n",
                r.id, r.transport, r.client
            ));
        }
        s
    }

    /// Checks the replicas: at least two, ids 0..n, distinct addresses, sane timeouts.
    pub fn validate(&self) -> Result<(), ClusterError> {
        let n = self.replicas.len();
        if n < 2 {
            return Err(ClusterError::Invalid(format!(
                "{n} [[replica]] entries; list at least 2 (3 or more to survive a failure)"
            )));
        }
        let ids: BTreeSet<u32> = self.replicas.iter().map(|r| r.id).collect();
        if ids != (0..n as u32).collect() {
            return Err(ClusterError::Invalid(format!(
                "replica ids must be 0..{n} with no gaps or repeats, found {ids:?}"
            )));
        }
        let mut addrs = BTreeSet::new();
        for r in &self.replicas {
            for a in [r.transport, r.client] {
                if !addrs.insert(a) {
                    return Err(ClusterError::Invalid(format!(
                        "address {a} is used twice; every replica needs its own transport and client ports"
                    )));
                }
            }
        }
        if self.heartbeat_period_ms == 0 || self.heartbeat_timeout_ms <= self.heartbeat_period_ms {
            return Err(ClusterError::Invalid(
                "heartbeat_timeout_ms must exceed heartbeat_period_ms, which must be positive"
                    .into(),
            ));
        }
        if let Some(dir) = &self.data_dir {
            if self.ordering != Ordering::Membership {
                return Err(ClusterError::Invalid(format!(
                    "data_dir (durable mode) needs ordering = \"membership\"; {} keeps no logs: \
                     remove data_dir or change the ordering",
                    self.ordering
                )));
            }
            if dir.as_os_str().is_empty() {
                return Err(ClusterError::Invalid(
                    "data_dir is empty; name a directory (created if missing) or remove it".into(),
                ));
            }
            if dir.exists() && !dir.is_dir() {
                return Err(ClusterError::Invalid(format!(
                    "data_dir {} exists but is not a directory",
                    dir.display()
                )));
            }
        }
        Ok(())
    }

    /// Replica `id`'s own directory in durable mode: `<data_dir>/replica-<id>`.
    pub fn replica_dir(&self, id: u32) -> Option<PathBuf> {
        self.data_dir
            .as_ref()
            .map(|d| d.join(format!("replica-{id}")))
    }

    /// Creates replica `id`'s directory (durable mode) if missing and checks that it can
    /// write there; `None` without `data_dir`.
    pub fn prepare_replica_dir(&self, id: u32) -> Result<Option<PathBuf>, ClusterError> {
        let Some(dir) = self.replica_dir(id) else {
            return Ok(None);
        };
        let io = |what: &str, source| ClusterError::Io {
            path: format!("{} ({what})", dir.display()),
            source,
        };
        std::fs::create_dir_all(dir.join(EPOCHS))
            .map_err(|e| io("creating the replica's data directory", e))?;
        let probe = dir.join(".write-probe");
        std::fs::write(&probe, b"squall-kv").map_err(|e| io("the directory is not writable", e))?;
        std::fs::remove_file(&probe).map_err(|e| io("removing a probe file", e))?;
        Ok(Some(dir))
    }

    fn durable(&self, id: u32) -> Result<Option<DurableDir>, ClusterError> {
        Ok(self.prepare_replica_dir(id)?.map(|dir| DurableDir {
            dir,
            fsync: self.fsync,
            snapshot_every: self.snapshot_every,
            checkpoint_inline: self.checkpoint_inline,
            checkpoint_encode_inline: self.checkpoint_encode_inline,
            install_decode_inline: self.install_decode_inline,
            settings_from: None,
        }))
    }
}

/// A durable replica's directory: `gms.log` (the membership log) and `epochs/` (one
/// round-robin log per view since the latest snapshot, and that snapshot's file: a
/// checkpoint or a transferred state).
#[derive(Clone, Debug)]
struct DurableDir {
    dir: PathBuf,
    fsync: Fsync,
    /// [`KvConfig::snapshot_every`].
    snapshot_every: u64,
    /// [`KvConfig::checkpoint_inline`].
    checkpoint_inline: bool,
    /// [`KvConfig::checkpoint_encode_inline`].
    checkpoint_encode_inline: bool,
    /// [`KvConfig::install_decode_inline`].
    install_decode_inline: bool,
    /// A deliberate settings change at a total restart: the digest the membership log was
    /// written under, accepted to move from ([`GmsConfig::settings_from`];
    /// [`start_tcp_replica_changing_settings`]).
    settings_from: Option<u64>,
}

/// The epoch logs' subdirectory of a durable replica's directory.
const EPOCHS: &str = "epochs";

impl DurableDir {
    /// Opens the membership log (recovering what it holds) and makes `group` durable.
    fn open(&self, group: &mut GroupConfig) -> Result<(FileLog, Option<Recovered>), String> {
        let path = self.dir.join("gms.log");
        let (mut log, recovered) = FileLog::open(&path)
            .map_err(|e| format!("cannot open the membership log {}: {e}", path.display()))?;
        log.set_sync_installed(self.fsync == Fsync::Batch);
        group.gms.settings_from = self.settings_from;
        if let Some(why) = &recovered.truncated {
            tracing::warn!(path = %path.display(), %why, "the membership log had a torn tail");
        }
        group.epoch.mode = Mode::Durable {
            path: self.dir.join(EPOCHS),
            fsync: match self.fsync {
                Fsync::Batch => FsyncPolicy::EveryBatch,
                Fsync::Never => FsyncPolicy::Never,
            },
        };
        if recovered.records.is_empty() {
            tracing::info!(dir = %self.dir.display(), "durable replica: starting fresh");
            return Ok((log, None));
        }
        tracing::info!(dir = %self.dir.display(), last_view = ?recovered.last_view().map(|v| v.0),
            records = recovered.records.len(), "durable replica: restarting from its logs");
        Ok((log, Some(recovered)))
    }
}

impl KvConfig {
    /// The replicas' client addresses, by id.
    pub fn client_addrs(&self) -> Vec<SocketAddr> {
        let mut r = self.replicas.clone();
        r.sort_by_key(|r| r.id);
        r.into_iter().map(|r| r.client).collect()
    }

    /// The transport's cluster config.
    pub fn transport(&self) -> Result<ClusterConfig, ClusterError> {
        let mut c = ClusterConfig::new(
            self.cluster_id,
            self.replicas.iter().map(|r| (NodeId(r.id), r.transport)),
        );
        c.heartbeat_period = Duration::from_millis(self.heartbeat_period_ms);
        c.heartbeat_timeout = Duration::from_millis(self.heartbeat_timeout_ms);
        c.op_timeout = Duration::from_millis(self.heartbeat_timeout_ms);
        c.validate()?;
        Ok(c)
    }
}

/// The backend settings a KV cluster of `n` replicas uses.
pub fn round_robin_config(n: usize) -> RrConfig {
    RrConfig {
        window: 64,
        slot_size: 1024,
        max_payload: 64 << 10,
        chunk_size: 16 << 10,
        ..RrConfig::new((0..n as u32).map(NodeId).collect())
    }
}

/// The CAS-Paxos settings a KV cluster of `n` replicas uses.
pub fn cas_paxos_config(n: usize, seed: u64) -> LogConfig {
    LogConfig {
        // A ring of 1024 slots in use at once (the leader keeps `window` ahead; delivered
        // slots are reused), commands up to 2 KiB: about 19 MiB of value buffers per replica.
        layout: Layout {
            proposers: n,
            slots: 1024,
            max_value_len: 2048,
        },
        window: 32,
        max_pending: 4096,
        backoff: (Duration::from_micros(20), Duration::from_micros(500)),
        heartbeat_period: Duration::from_millis(2),
        leader_timeout: Duration::from_millis(50),
        recycle_timeout: Duration::from_secs(2),
        seed,
        rpc_threshold: squall_cas_paxos::decree::default_rpc_threshold(n),
    }
}

/// The membership settings of a KV cluster: nodes `0..universe` may ever be replicas, view 0
/// is `0..initial`, every view's epoch uses [`round_robin_config`]'s sizes, and the GMS table
/// beats every `heartbeat` and suspects a replica silent for `suspicion` (a crash the
/// transport reports is seen at once; the timeout catches a hung replica).
///
/// ```
/// let cfg = squall_kv::membership_config(5, 3, std::time::Duration::from_secs(2));
/// assert!(cfg.validate().is_ok());
/// assert_eq!(cfg.epoch.suspicion_timeout, std::time::Duration::from_secs(2));
/// assert_eq!(cfg.gms.initial.len(), 3);
/// ```
pub fn membership_config(universe: usize, initial: usize, suspicion: Duration) -> GroupConfig {
    let ids: Vec<NodeId> = (0..universe as u32).map(NodeId).collect();
    let mut gms = GmsConfig::new(
        RegionId(0),
        ids.clone(),
        ids[..initial.min(universe)].to_vec(),
    );
    gms.heartbeat_interval =
        (suspicion / 20).clamp(Duration::from_millis(1), Duration::from_millis(10));
    gms.suspicion_timeout = suspicion;
    // The epochs' own failure detector as patient as the GMS's (the round-robin default is
    // 100 ms): a replica's thread pauses while it installs or checkpoints a large state (half
    // a second for 12 MB on a loaded box), and a crash the transport reports is seen at once.
    let mut epoch = round_robin_config(universe);
    epoch.heartbeat_interval = gms.heartbeat_interval;
    epoch.suspicion_timeout = suspicion;
    GroupConfig::new(gms, epoch)
}

/// The shape of a membership group: how many nodes may ever be replicas, how many start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    universe: usize,
    initial: usize,
    suspicion: Duration,
}

impl Ordering {
    /// The regions every replica must register for this backend (a membership group of `n`
    /// with no room for joiners; see [`membership_config`]).
    pub fn regions(self, n: usize) -> Result<Vec<RegionSpec>, String> {
        self.regions_for(Shape {
            universe: n,
            initial: n,
            suspicion: SUSPICION,
        })
    }

    fn regions_for(self, shape: Shape) -> Result<Vec<RegionSpec>, String> {
        let n = shape.universe;
        match self {
            Ordering::RoundRobin => {
                RoundRobin::<TcpNode>::layout(&round_robin_config(n)).map_err(|e| e.to_string())
            }
            Ordering::CasPaxos => Ok(cas_paxos_config(n, 0).regions()),
            Ordering::Membership => Group::<TcpNode, MemLog>::layout(&membership_config(
                n,
                shape.initial,
                shape.suspicion,
            ))
            .map_err(|e| e.to_string()),
        }
    }

    /// Builds this backend over `transport` for a group of `n` (for
    /// [`Ordering::Membership`]: a group of `n` members, as a plain [`TotalOrder`]; a replica
    /// that should serve or take state transfers is started by [`start_mem_cluster`],
    /// [`MemCluster`] or [`start_tcp_replica`], which run it through
    /// [`Replica::spawn_joinable`]).
    pub fn build<T: Transport + 'static>(
        self,
        transport: T,
        n: usize,
    ) -> Result<Box<dyn TotalOrder>, String> {
        let me = u64::from(transport.local_id().0);
        Ok(match self {
            Ordering::RoundRobin => Box::new(
                RoundRobin::new(transport, round_robin_config(n)).map_err(|e| e.to_string())?,
            ),
            Ordering::CasPaxos => Box::new(
                CasPaxos::new(transport, cas_paxos_config(n, me + 1)).map_err(|e| e.to_string())?,
            ),
            Ordering::Membership => Box::new(
                Group::new(
                    transport,
                    membership_config(n, n, SUSPICION),
                    MemLog::default(),
                    None,
                )
                .map_err(|e| e.to_string())?,
            ),
        })
    }

    /// Starts one replica whose backend runs over the transport `connect` makes (on the
    /// replica's thread). Membership replicas go through [`Replica::spawn_joinable`]; a
    /// `joining` one asks the group to admit it and takes its state by transfer.
    fn spawn<T, F>(
        self,
        id: NodeId,
        connect: F,
        shape: Shape,
        joining: bool,
        durable: Option<DurableDir>,
    ) -> Result<Replica<KvMachine>, ClusterError>
    where
        T: Transport + 'static,
        F: FnOnce() -> Result<T, String> + Send + 'static,
    {
        let sm = KvMachine::default()
            .capturing(!durable.as_ref().is_some_and(|d| d.checkpoint_encode_inline))
            .decoding(!durable.as_ref().is_some_and(|d| d.install_decode_inline));
        let mut cfg = ReplicaConfig::default();
        let started = match (self, durable) {
            (Ordering::Membership, Some(durable)) => {
                cfg.core.snapshot_every = durable.snapshot_every;
                let mut group = membership_config(shape.universe, shape.initial, shape.suspicion);
                if durable.checkpoint_inline {
                    group.checkpoint_writer = CheckpointWriter::Inline;
                }
                Replica::spawn_joinable(
                    id,
                    move || -> Result<Group<T, FileLog>, String> {
                        // The log first (it may fsync): once linked, the peers' suspicion
                        // timers run.
                        let (log, recovered) = durable.open(&mut group)?;
                        // A restart refused by its settings is refused before connecting.
                        if let (Some(rec), false) = (&recovered, joining) {
                            group.check_restart(rec).map_err(|e| start_refused(&e))?;
                        }
                        let t = connect()?;
                        let g = if joining {
                            Group::joining(t, group, log)
                        } else {
                            Group::new(t, group, log, recovered.as_ref())
                        };
                        g.map_err(|e| start_refused(&e))
                    },
                    sm,
                    cfg,
                )
            }
            (Ordering::Membership, None) => {
                let group = membership_config(shape.universe, shape.initial, shape.suspicion);
                Replica::spawn_joinable(
                    id,
                    move || -> Result<Group<T, MemLog>, String> {
                        let t = connect()?;
                        let g = if joining {
                            Group::joining(t, group, MemLog::default())
                        } else {
                            Group::new(t, group, MemLog::default(), None)
                        };
                        g.map_err(|e| e.to_string())
                    },
                    sm,
                    cfg,
                )
            }
            (_, _) => {
                let n = shape.universe;
                Replica::spawn(id, move || self.build(connect()?, n), sm, cfg)
            }
        };
        started.map_err(|e| ClusterError::Invalid(format!("replica {id} failed to start: {e}")))
    }
}

/// Why a durable membership replica did not start, with the `squall-kv` flag that accepts a
/// deliberate change of `fsync` (the one kv setting in the epoch settings' digest) when the
/// restart was refused for a change of the driver (epoch) settings only. A change that includes
/// the membership settings (the replicas list) gets no such hint: it cannot be made at a
/// restart, and the flag would only lead to `SettingsChangeRefused`.
fn start_refused(e: &GroupError) -> String {
    match e {
        GroupError::Gms(GmsError::SettingsChanged {
            logged, configured, ..
        }) if logged.differs_in_driver_only(configured) => format!(
            "{e} (squall-kv: to change `fsync`, restart every replica with `serve --settings-from {logged}`)"
        ),
        GroupError::Gms(GmsError::SettingsChanged { .. }) => format!(
            "{e} (squall-kv: the replicas list cannot change at a restart; restore the cluster file's replicas the log was written under, or start afresh with empty data directories)"
        ),
        _ => e.to_string(),
    }
}

/// The membership backend's default suspicion timeout (generous: the replicas of a demo share
/// a loaded machine; a crash the transport reports is noticed at once regardless).
const SUSPICION: Duration = Duration::from_secs(2);

/// Starts replica `id` of `cfg` over TCP: connects to the other replicas (blocking until all
/// are up, within the transport's connect timeout) on the replica's own thread. In durable
/// mode (`data_dir`) a replica whose directory holds a log restarts from it: when every
/// replica was down (a total restart), the group restarts from the replicas' logs and each
/// replica answers `Unavailable` until the restart completed.
pub fn start_tcp_replica(cfg: &KvConfig, id: u32) -> Result<Replica<KvMachine>, ClusterError> {
    tcp_replica(cfg, id, false, None)
}

/// Like [`start_tcp_replica`], on a transport listener the caller bound already (the local
/// cluster's replicas bind port 0 and announce it before the config naming it is written:
/// see [`announce`](crate::announce)). The listener must be bound at the replica's
/// `transport` address in `cfg`.
///
/// ```no_run
/// # fn demo(cfg: squall_kv::KvConfig) -> Result<(), Box<dyn std::error::Error>> {
/// // Bound before `cfg` was written with its address (see `squall_kv::announce`).
/// let listener = std::net::TcpListener::bind(cfg.replicas[0].transport)?;
/// let replica = squall_kv::start_tcp_replica_on(&cfg, 0, listener)?;
/// # drop(replica); Ok(()) }
/// ```
pub fn start_tcp_replica_on(
    cfg: &KvConfig,
    id: u32,
    listener: std::net::TcpListener,
) -> Result<Replica<KvMachine>, ClusterError> {
    tcp_replica(cfg, id, false, Some(listener))
}

/// Starts replica `id` of a running membership cluster again after it crashed and the others
/// removed it (`squall-kv serve --rejoin`): a new transport incarnation under the same id that
/// joins the running group and takes the state by transfer. In durable mode its directory is
/// emptied first (its old logs describe a membership the group has moved past); the
/// transferred state is persisted there, so a later total restart restores it.
pub fn rejoin_tcp_replica(cfg: &KvConfig, id: u32) -> Result<Replica<KvMachine>, ClusterError> {
    if cfg.ordering != Ordering::Membership {
        return Err(ClusterError::Invalid(format!(
            "{} runs a fixed group: a replica can rejoin only with the membership ordering",
            cfg.ordering
        )));
    }
    if let Some(dir) = cfg.replica_dir(id)
        && dir.exists()
    {
        tracing::warn!(dir = %dir.display(), "rejoining: discarding this replica's old logs");
        std::fs::remove_dir_all(&dir).map_err(|source| ClusterError::Io {
            path: format!("{} (discarding the old logs)", dir.display()),
            source,
        })?;
    }
    tcp_replica(cfg, id, true, None)
}

/// Like [`start_tcp_replica`], at a total restart that deliberately changes the epoch settings
/// of a durable membership cluster (`squall-kv serve --settings-from DIGEST`): its `fsync`
/// (`batch` / `never`), the one `KvConfig` setting in the epoch settings' digest.
/// `settings_from` names the digest the replica's membership log was written under, as the
/// refusal of a plain restart prints it (16 hex digits); a log written under another digest is
/// refused (a typo or a stale value), and so is a change of anything else that must agree
/// (e.g. the replicas). Every replica of the restart must run the new configuration: one
/// restarted with the old one stops the restart at every replica (docs/MEMBERSHIP.md,
/// sixty-first part). A replica whose directory holds no log starts fresh, ignoring it.
///
/// ```no_run
/// # fn demo(cfg: squall_kv::KvConfig) -> Result<(), Box<dyn std::error::Error>> {
/// // `cfg.fsync` changed since the cluster was stopped; the refusal named digest c908d0d40372310f.
/// let replica = squall_kv::start_tcp_replica_changing_settings(&cfg, 0, 0xc908_d0d4_0372_310f)?;
/// # drop(replica); Ok(()) }
/// ```
pub fn start_tcp_replica_changing_settings(
    cfg: &KvConfig,
    id: u32,
    settings_from: u64,
) -> Result<Replica<KvMachine>, ClusterError> {
    if cfg.ordering != Ordering::Membership || cfg.data_dir.is_none() {
        return Err(ClusterError::Invalid(
            "--settings-from changes the settings of a durable membership cluster at a total restart: it needs ordering = \"membership\" and data_dir".to_string(),
        ));
    }
    tcp_replica_with(cfg, id, false, None, Some(settings_from))
}

fn tcp_replica(
    cfg: &KvConfig,
    id: u32,
    rejoin: bool,
    listener: Option<std::net::TcpListener>,
) -> Result<Replica<KvMachine>, ClusterError> {
    tcp_replica_with(cfg, id, rejoin, listener, None)
}

fn tcp_replica_with(
    cfg: &KvConfig,
    id: u32,
    rejoin: bool,
    listener: Option<std::net::TcpListener>,
    settings_from: Option<u64>,
) -> Result<Replica<KvMachine>, ClusterError> {
    let tcp = cfg.transport()?;
    tcp.validate_for(NodeId(id))?;
    let n = cfg.replicas.len();
    let ordering = cfg.ordering;
    let specs = ordering.regions(n).map_err(ClusterError::Invalid)?;
    let connect = move || -> Result<TcpNode, String> {
        let regions = specs
            .into_iter()
            .map(|s| Region::new(s).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let node = match (listener, rejoin) {
            (Some(l), true) => TcpNode::rejoin_on(l, tcp, NodeId(id), regions),
            (Some(l), false) => TcpNode::start_on(l, tcp, NodeId(id), regions),
            (None, true) => TcpNode::rejoin(tcp, NodeId(id), regions),
            (None, false) => TcpNode::start(tcp, NodeId(id), regions),
        };
        node.map_err(|e| e.to_string())
    };
    let shape = Shape {
        universe: n,
        initial: n,
        suspicion: Duration::from_millis(cfg.heartbeat_timeout_ms),
    };
    let durable = cfg.durable(id)?.map(|d| DurableDir { settings_from, ..d });
    ordering.spawn(NodeId(id), connect, shape, rejoin, durable)
}

/// Starts `n` replicas in this process on the threaded in-memory fabric.
pub fn start_mem_cluster(
    ordering: Ordering,
    n: usize,
) -> Result<Vec<Replica<KvMachine>>, ClusterError> {
    Ok(MemCluster::start(ordering, n, 0)?.into_replicas())
}

/// A KV cluster in this process on the threaded in-memory fabric, whose membership can change
/// while it runs (with [`Ordering::Membership`]): [`add_replica`](MemCluster::add_replica)
/// starts a replica that joins the running group and takes the state by transfer,
/// [`leave`](MemCluster::leave) removes one gracefully, and [`kill`](MemCluster::kill) crashes
/// one (its links fail, as a killed process's would; the
/// others install a view without it and carry on).
///
/// ```
/// use squall_kv::{MemCluster, Ordering};
/// let mut cluster = MemCluster::start(Ordering::Membership, 3, 1)?;
/// let joiner = cluster.add_replica()?; // node 3 joins the running group
/// cluster.kill(0)?;
/// assert!(cluster.replica(joiner).is_some() && cluster.replica(0).is_none());
/// # Ok::<(), squall_kv::ClusterError>(())
/// ```
pub struct MemCluster {
    ordering: Ordering,
    shape: Shape,
    /// Replica `i`, while it runs.
    replicas: Vec<Option<Replica<KvMachine>>>,
    /// Fabric endpoints of nodes not started yet (room for joiners).
    spare: Vec<squall_transport_mem::threaded::ThreadedNode>,
    faults: squall_transport_mem::threaded::Faults,
}

impl std::fmt::Debug for MemCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemCluster")
            .field("ordering", &self.ordering)
            .field("running", &self.running())
            .field("spare", &self.spare.len())
            .finish_non_exhaustive()
    }
}

impl MemCluster {
    /// Starts `n` replicas, with room for `spare` more to join later (membership only: the
    /// other backends have a fixed group, so `spare` must be 0 for them).
    pub fn start(ordering: Ordering, n: usize, spare: usize) -> Result<MemCluster, ClusterError> {
        MemCluster::start_with(ordering, n, spare, SUSPICION)
    }

    /// [`start`](Self::start) with the membership backend's suspicion timeout.
    pub fn start_with(
        ordering: Ordering,
        n: usize,
        spare: usize,
        suspicion: Duration,
    ) -> Result<MemCluster, ClusterError> {
        use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
        if n == 0 {
            return Err(ClusterError::Invalid(
                "a cluster needs at least one replica".into(),
            ));
        }
        if spare > 0 && ordering != Ordering::Membership {
            return Err(ClusterError::Invalid(format!(
                "{ordering} runs a fixed group: replicas can join only with the membership ordering"
            )));
        }
        let shape = Shape {
            universe: n + spare,
            initial: n,
            suspicion,
        };
        let specs = ordering.regions_for(shape).map_err(ClusterError::Invalid)?;
        let mut nodes = ThreadedFabric::new(ThreadedConfig::default())
            .and_then(|f| f.cluster(n + spare, &specs))
            .map_err(|e| ClusterError::Invalid(e.to_string()))?;
        let faults = match nodes.first() {
            Some(node) => node.faults(),
            None => return Err(ClusterError::Invalid("the fabric made no nodes".into())),
        };
        let spare = nodes.split_off(n);
        let replicas = nodes
            .into_iter()
            .map(|t| {
                ordering
                    .spawn(t.local_id(), move || Ok(t), shape, false, None)
                    .map(Some)
            })
            .collect::<Result<_, _>>()?;
        Ok(MemCluster {
            ordering,
            shape,
            replicas,
            spare,
            faults,
        })
    }

    /// Starts the next spare node as a replica that joins the running group; returns its
    /// index. It answers requests `Unavailable` until its state transfer completed (its
    /// metrics count `states_installed`), then serves like every other replica.
    pub fn add_replica(&mut self) -> Result<usize, ClusterError> {
        if self.ordering != Ordering::Membership {
            return Err(ClusterError::Invalid(format!(
                "{} runs a fixed group: replicas can join only with the membership ordering",
                self.ordering
            )));
        }
        if self.spare.is_empty() {
            return Err(ClusterError::Invalid(format!(
                "no room for another replica: the cluster was started with a universe of {}; \
                 start it with more spare nodes",
                self.shape.universe
            )));
        }
        let t = self.spare.remove(0);
        let id = t.local_id();
        let r = self
            .ordering
            .spawn(id, move || Ok(t), self.shape, true, None)?;
        self.replicas.push(Some(r));
        Ok(id.0 as usize)
    }

    /// Asks replica `i` to leave the group gracefully ([`squall_smr::ReplicaHandle::leave`]):
    /// the others install a view without it; it applies everything up to that view change and
    /// then answers `Unavailable`. Returns once the group took the request; the replica keeps
    /// running (stopped) until [`kill`](Self::kill) or the cluster is dropped.
    pub fn leave(&mut self, i: usize) -> Result<(), ClusterError> {
        let Some(r) = self.replica(i) else {
            return Err(ClusterError::Invalid(format!("replica {i} is not running")));
        };
        let rx = r
            .handle()
            .leave()
            .map_err(|e| ClusterError::Invalid(format!("replica {i}: {e}")))?;
        match rx.blocking_recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ClusterError::Invalid(format!(
                "replica {i} cannot leave: {e}"
            ))),
            Err(_) => Err(ClusterError::Invalid(format!("replica {i} shut down"))),
        }
    }

    /// Crashes replica `i`: its fabric links fail (the others see it as a killed process) and
    /// its thread stops.
    pub fn kill(&mut self, i: usize) -> Result<(), ClusterError> {
        let Some(r) = self.replicas.get_mut(i).and_then(Option::take) else {
            return Err(ClusterError::Invalid(format!("replica {i} is not running")));
        };
        self.faults.crash(NodeId(i as u32));
        drop(r);
        Ok(())
    }

    /// Replica `i`, if it runs.
    pub fn replica(&self, i: usize) -> Option<&Replica<KvMachine>> {
        self.replicas.get(i).and_then(Option::as_ref)
    }

    /// The indices of the running replicas.
    pub fn running(&self) -> Vec<usize> {
        (0..self.replicas.len())
            .filter(|&i| self.replicas[i].is_some())
            .collect()
    }

    /// The running replicas, in index order (the cluster's spare nodes are dropped).
    pub fn into_replicas(self) -> Vec<Replica<KvMachine>> {
        self.replicas.into_iter().flatten().collect()
    }
}
