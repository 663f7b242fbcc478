//! Cluster configuration and starting replicas: one per process over TCP (`serve`), or a whole
//! in-process cluster on the threaded fabric.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use squall_cas_paxos::layout::Layout;
use squall_cas_paxos::log::{CasPaxos, LogConfig};
use squall_ordering::TotalOrder;
use squall_round_robin::{Config as RrConfig, RoundRobin};
use squall_smr::{Replica, ReplicaConfig};
use squall_transport::{NodeId, Region, RegionSpec, Transport};
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
}

impl std::fmt::Display for Ordering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Ordering::RoundRobin => "round-robin",
            Ordering::CasPaxos => "cas-paxos",
        })
    }
}

/// A problem with the cluster configuration, saying what to change.
#[derive(Debug, Error)]
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
/// ordering = "round-robin"        # or "cas-paxos"
/// heartbeat_period_ms = 50        # transport heartbeats (optional)
/// heartbeat_timeout_ms = 500      # a silent peer is failed after this (optional)
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
    /// The replicas.
    #[serde(rename = "replica", default)]
    pub replicas: Vec<ReplicaAddr>,
}

fn default_hb() -> u64 {
    50
}

fn default_hb_timeout() -> u64 {
    500
}

impl KvConfig {
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
            "cluster_id = {}\nordering = \"{}\"\nheartbeat_period_ms = {}\nheartbeat_timeout_ms = {}\n",
            self.cluster_id, self.ordering, self.heartbeat_period_ms, self.heartbeat_timeout_ms
        );
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
        Ok(())
    }

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

impl Ordering {
    /// The regions every replica must register for this backend.
    pub fn regions(self, n: usize) -> Result<Vec<RegionSpec>, String> {
        match self {
            Ordering::RoundRobin => {
                RoundRobin::<TcpNode>::layout(&round_robin_config(n)).map_err(|e| e.to_string())
            }
            Ordering::CasPaxos => Ok(cas_paxos_config(n, 0).regions()),
        }
    }

    /// Builds this backend over `transport` for a group of `n`.
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
        })
    }
}

/// Starts replica `id` of `cfg` over TCP: connects to the other replicas (blocking until all
/// are up, within the transport's connect timeout) on the replica's own thread.
pub fn start_tcp_replica(cfg: &KvConfig, id: u32) -> Result<Replica<KvMachine>, ClusterError> {
    let tcp = cfg.transport()?;
    tcp.validate_for(NodeId(id))?;
    let n = cfg.replicas.len();
    let ordering = cfg.ordering;
    let specs = ordering.regions(n).map_err(ClusterError::Invalid)?;
    let make = move || -> Result<Box<dyn TotalOrder>, String> {
        let regions = specs
            .into_iter()
            .map(|s| Region::new(s).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let node = TcpNode::start(tcp, NodeId(id), regions).map_err(|e| e.to_string())?;
        ordering.build(node, n)
    };
    Replica::spawn(
        NodeId(id),
        make,
        KvMachine::default(),
        ReplicaConfig::default(),
    )
    .map_err(|e| ClusterError::Invalid(format!("replica {id} failed to start: {e}")))
}

/// Starts `n` replicas in this process on the threaded in-memory fabric.
pub fn start_mem_cluster(
    ordering: Ordering,
    n: usize,
) -> Result<Vec<Replica<KvMachine>>, ClusterError> {
    use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    let specs = ordering.regions(n).map_err(ClusterError::Invalid)?;
    let nodes = ThreadedFabric::new(ThreadedConfig::default())
        .and_then(|f| f.cluster(n, &specs))
        .map_err(|e| ClusterError::Invalid(e.to_string()))?;
    nodes
        .into_iter()
        .map(|t| {
            let id = t.local_id();
            Replica::spawn(
                id,
                move || ordering.build(t, n),
                KvMachine::default(),
                ReplicaConfig::default(),
            )
            .map_err(|e| ClusterError::Invalid(format!("replica {id} failed to start: {e}")))
        })
        .collect()
}
