//! The cluster config: who is where, which cluster, and every timeout and bound.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use squall_transport::NodeId;
use thiserror::Error;

/// Everything a node needs to join a TCP cluster. Every node of a cluster uses the same config.
///
/// Build it in code ([`ClusterConfig::new`] then set fields) or read it from TOML
/// ([`ClusterConfig::from_toml`], [`ClusterConfig::from_file`]). [`validate`](Self::validate)
/// runs at start-up and explains what to fix.
///
/// ```
/// use squall_transport_tcp::ClusterConfig;
/// let cfg = ClusterConfig::from_toml(r#"
///     cluster_id = 7
///     op_timeout_ms = 500
///     heartbeat_period_ms = 50
///     heartbeat_timeout_ms = 400
///     max_message_len = 65536
///     [nodes]
///     0 = "127.0.0.1:7000"
///     1 = "127.0.0.1:7001"
/// "#).unwrap();
/// assert_eq!(cfg.nodes.len(), 2);
/// assert_eq!(cfg.op_timeout, std::time::Duration::from_millis(500));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Names the cluster; nodes of different clusters refuse each other.
    pub cluster_id: u64,
    /// Every node's listening address.
    pub nodes: BTreeMap<NodeId, SocketAddr>,
    /// How long a posted op may wait for the peer before it fails and the peer is failed.
    pub op_timeout: Duration,
    /// How often an idle link sends a heartbeat.
    pub heartbeat_period: Duration,
    /// How long a link may stay silent before the peer is failed.
    pub heartbeat_timeout: Duration,
    /// How long start-up may take to connect to every peer.
    pub connect_timeout: Duration,
    /// The largest two-sided message.
    pub max_message_len: usize,
    /// The most ops one link may have outstanding (not yet known applied) before posting
    /// returns `QueueFull`.
    pub max_outstanding: usize,
    /// Buffered unsignaled ops are flushed in one syscall once this many bytes are waiting.
    pub coalesce_bytes: usize,
    /// How long `wait` polls its sockets without blocking before it parks, while the driver
    /// waits for an answer (a read, an atomic, a fence or a signaled op). Zero: park at once.
    /// Spinning saves a thread wake-up per round trip when the answer comes back quickly, at
    /// the cost of a busy CPU for at most this long per `wait`, which only pays where the
    /// answering side has a core of its own. At most 10 ms.
    pub spin_before_park: Duration,
    /// While the driver waits for an answer on a link it reads that link's socket itself, and
    /// the link's reader thread leaves arriving bytes to it for at most this long (then the
    /// reader thread takes them, so that a driver that posted and went away to compute does
    /// not hold up its peers). Zero turns driver ownership off: the reader thread takes
    /// whatever arrives while the driver is not blocked in `wait`. At most a quarter of
    /// `op_timeout` and of `heartbeat_timeout`.
    pub read_lease: Duration,
    /// Nodes that may start after the others (TOML: `late = [2, 3]`). The other nodes (the
    /// *founders*) link up with each other at start, each waiting for the rest; a late node
    /// is *absent* to them (ops to it are refused with `NotConnected`) until it starts and
    /// dials them, when they report `PeerConnected` once. A late node starts without waiting:
    /// it dials every configured peer, and the ones it cannot reach (not started yet, or down)
    /// are absent to it until they dial it or its next dial reaches them (see
    /// [`redial_period`](Self::redial_period)).
    pub late: BTreeSet<NodeId>,
    /// The most the wall clocks of two nodes may differ (TOML: `clock_skew_ms`; default 1 s,
    /// at most [`MAX_CLOCK_SKEW`]). A peer declared failed while it was absent
    /// ([`Transport::report_failed`](squall_transport::Transport::report_failed) before its
    /// link came up) may link later only as a process started after the report: its
    /// incarnation (the wall clock in nanoseconds at its start, on its host) must exceed the
    /// report's time on this node's clock by more than this allowance. Safe as long as the
    /// clocks differ by at most this much: the process that was declared failed (started
    /// before the report) is then always refused. The cost: a restart started within the
    /// allowance after the report is refused too (its start fails with the reason; start it
    /// again later). Nodes that share one clock (one host) may set it to zero.
    pub clock_skew: Duration,
    /// How often a late or restarted node dials again the peers it has no link to (TOML:
    /// `redial_period_ms`; default 1 s; zero: never, as before; otherwise between
    /// [`MIN_REDIAL`] and [`MAX_REDIAL`]). A late node dials every peer at start; one that was
    /// down then (or not started yet: a late node started before the founders) would stay
    /// absent for good, since founders never dial late nodes. Each period costs one connection
    /// attempt per such peer, made by a thread of its own (never the driver). Peers declared
    /// failed while absent are not dialled (a new process of them dials in itself).
    pub redial_period: Duration,
}

/// A cluster config that cannot work, with what to change.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The TOML could not be parsed.
    #[error("cluster config is not valid TOML for this schema: {0}")]
    Toml(#[from] toml::de::Error),
    /// The file could not be read.
    #[error("cannot read cluster config {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A node id key is not a number.
    #[error("node key {0:?} in [nodes] is not a node id; use integers: `0 = \"10.0.0.1:7000\"`")]
    BadNodeId(String),
    /// An address is not `ip:port`.
    #[error("address {addr:?} of node {node} is not ip:port (e.g. \"10.0.0.1:7000\")")]
    BadAddress {
        /// The node.
        node: NodeId,
        /// The text.
        addr: String,
    },
    /// Fewer than two nodes.
    #[error("a cluster needs at least 2 nodes in [nodes]; it has {0}")]
    TooFewNodes(usize),
    /// Two nodes share an address.
    #[error("nodes {a} and {b} both listen on {addr}; give every node its own address")]
    DuplicateAddress {
        /// One node.
        a: NodeId,
        /// The other.
        b: NodeId,
        /// The address.
        addr: SocketAddr,
    },
    /// A peer address with port 0 cannot be dialled.
    #[error("node {0} has port 0; peers need a fixed port to dial")]
    ZeroPort(NodeId),
    /// A duration is zero.
    #[error("{0} must be positive")]
    ZeroDuration(&'static str),
    /// The heartbeat period is too long for the timeouts.
    #[error(
        "heartbeat_period ({period:?}) must be at most half of heartbeat_timeout ({timeout:?}) and of op_timeout ({op:?}), or live peers will be failed; shorten the period or lengthen the timeouts"
    )]
    HeartbeatTooSlow {
        /// The period.
        period: Duration,
        /// The heartbeat timeout.
        timeout: Duration,
        /// The op timeout.
        op: Duration,
    },
    /// A size bound is out of range.
    #[error("{name} is {value}; it must be between {min} and {max}")]
    OutOfRange {
        /// The setting.
        name: &'static str,
        /// Its value.
        value: usize,
        /// Smallest allowed.
        min: usize,
        /// Largest allowed.
        max: usize,
    },
    /// A duration is longer than it may be.
    #[error("{name} is {value:?}; it must be at most {max:?}")]
    TooLong {
        /// The setting.
        name: &'static str,
        /// Its value.
        value: Duration,
        /// The longest allowed (for `read_lease`: a quarter of the op and heartbeat timeouts).
        max: Duration,
    },
    /// The redial period is out of range.
    #[error(
        "redial_period is {0:?}; it must be zero (never dial again) or between {MIN_REDIAL:?} and {MAX_REDIAL:?}"
    )]
    RedialPeriod(Duration),
    /// A late node is not in the config.
    #[error("late node {0} is not in [nodes]; list every late node's address there too")]
    UnknownLate(NodeId),
    /// The node starting is not in the config.
    #[error("node {0} is not in [nodes]; add it or start a node that is")]
    UnknownSelf(NodeId),
}

/// The TOML shape. Durations are in milliseconds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlConfig {
    cluster_id: u64,
    nodes: BTreeMap<String, String>,
    op_timeout_ms: Option<u64>,
    heartbeat_period_ms: Option<u64>,
    heartbeat_timeout_ms: Option<u64>,
    connect_timeout_ms: Option<u64>,
    max_message_len: Option<usize>,
    max_outstanding: Option<usize>,
    coalesce_bytes: Option<usize>,
    spin_before_park_us: Option<u64>,
    read_lease_us: Option<u64>,
    late: Option<Vec<u32>>,
    clock_skew_ms: Option<u64>,
    redial_period_ms: Option<u64>,
}

/// The longest [`ClusterConfig::spin_before_park`].
pub const MAX_SPIN: Duration = Duration::from_millis(10);

/// The longest [`ClusterConfig::clock_skew`]: an hour (a bigger difference between hosts'
/// clocks is a broken clock, not skew).
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(3600);

/// The shortest non-zero [`ClusterConfig::redial_period`].
pub const MIN_REDIAL: Duration = Duration::from_millis(10);

/// The longest [`ClusterConfig::redial_period`].
pub const MAX_REDIAL: Duration = Duration::from_secs(3600);

/// The largest message or region access a frame may carry (frames carry a `u32` length).
pub const MAX_FRAME_DATA: usize = (u32::MAX as usize) / 2;

impl ClusterConfig {
    /// A config with sensible defaults for `cluster_id` and `nodes`: 500 ms op timeout, 50 ms
    /// heartbeats failing a peer after 500 ms of silence, 10 s to connect, 64 KiB messages,
    /// 262 144 outstanding ops per link (about the kernel's default socket buffering of small
    /// writes, so that the window, not the socket, bounds a stream only when the peer really
    /// falls behind; a smaller one stalls a writer whenever an acknowledgement is delayed by a
    /// few milliseconds of scheduling), 16 KiB coalescing, no spinning before parking (on a
    /// machine with few cores the spinning driver takes the CPU its answer needs; measured in
    /// the crate README), a 1 ms read lease, a 1 s clock skew allowance and late nodes dialling
    /// unlinked peers again every second.
    ///
    /// ```
    /// use squall_transport::NodeId;
    /// use squall_transport_tcp::ClusterConfig;
    /// let nodes = [(NodeId(0), "127.0.0.1:7000".parse().unwrap()), (NodeId(1), "127.0.0.1:7001".parse().unwrap())];
    /// let cfg = ClusterConfig::new(1, nodes);
    /// assert!(cfg.validate().is_ok());
    /// ```
    pub fn new(cluster_id: u64, nodes: impl IntoIterator<Item = (NodeId, SocketAddr)>) -> Self {
        ClusterConfig {
            cluster_id,
            nodes: nodes.into_iter().collect(),
            op_timeout: Duration::from_millis(500),
            heartbeat_period: Duration::from_millis(50),
            heartbeat_timeout: Duration::from_millis(500),
            connect_timeout: Duration::from_secs(10),
            max_message_len: 64 * 1024,
            max_outstanding: 262_144,
            coalesce_bytes: 16 * 1024,
            spin_before_park: Duration::ZERO,
            read_lease: Duration::from_millis(1),
            late: BTreeSet::new(),
            clock_skew: Duration::from_secs(1),
            redial_period: Duration::from_secs(1),
        }
    }

    /// Parses and validates a TOML config. Unset optional keys take [`ClusterConfig::new`]'s
    /// defaults; unknown keys are errors (a misspelt key would otherwise be silently ignored).
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let t: TomlConfig = toml::from_str(text)?;
        let mut nodes = BTreeMap::new();
        for (k, v) in t.nodes {
            let id = k
                .trim()
                .parse::<u32>()
                .map_err(|_| ConfigError::BadNodeId(k.clone()))?;
            let node = NodeId(id);
            let addr = v.parse().map_err(|_| ConfigError::BadAddress {
                node,
                addr: v.clone(),
            })?;
            nodes.insert(node, addr);
        }
        let mut c = ClusterConfig::new(t.cluster_id, nodes);
        let ms = Duration::from_millis;
        if let Some(v) = t.op_timeout_ms {
            c.op_timeout = ms(v);
        }
        if let Some(v) = t.heartbeat_period_ms {
            c.heartbeat_period = ms(v);
        }
        if let Some(v) = t.heartbeat_timeout_ms {
            c.heartbeat_timeout = ms(v);
        }
        if let Some(v) = t.connect_timeout_ms {
            c.connect_timeout = ms(v);
        }
        if let Some(v) = t.max_message_len {
            c.max_message_len = v;
        }
        if let Some(v) = t.max_outstanding {
            c.max_outstanding = v;
        }
        if let Some(v) = t.coalesce_bytes {
            c.coalesce_bytes = v;
        }
        if let Some(v) = t.spin_before_park_us {
            c.spin_before_park = Duration::from_micros(v);
        }
        if let Some(v) = t.read_lease_us {
            c.read_lease = Duration::from_micros(v);
        }
        if let Some(v) = t.late {
            c.late = v.into_iter().map(NodeId).collect();
        }
        if let Some(v) = t.clock_skew_ms {
            c.clock_skew = ms(v);
        }
        if let Some(v) = t.redial_period_ms {
            c.redial_period = ms(v);
        }
        c.validate()?;
        Ok(c)
    }

    /// Reads, parses and validates a TOML config file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml(&text)
    }

    /// Writes the config as TOML that [`from_toml`](Self::from_toml) reads back.
    ///
    /// ```
    /// # use squall_transport::NodeId;
    /// # use squall_transport_tcp::ClusterConfig;
    /// let cfg = ClusterConfig::new(3, [(NodeId(0), "127.0.0.1:1".parse().unwrap()), (NodeId(1), "127.0.0.1:2".parse().unwrap())]);
    /// assert_eq!(ClusterConfig::from_toml(&cfg.to_toml()).unwrap(), cfg);
    /// ```
    pub fn to_toml(&self) -> String {
        let mut s = format!(
            "cluster_id = {}\nop_timeout_ms = {}\nheartbeat_period_ms = {}\nheartbeat_timeout_ms = {}\nconnect_timeout_ms = {}\nmax_message_len = {}\nmax_outstanding = {}\ncoalesce_bytes = {}\nspin_before_park_us = {}\nread_lease_us = {}\nclock_skew_ms = {}\nredial_period_ms = {}\n",
            self.cluster_id,
            self.op_timeout.as_millis(),
            self.heartbeat_period.as_millis(),
            self.heartbeat_timeout.as_millis(),
            self.connect_timeout.as_millis(),
            self.max_message_len,
            self.max_outstanding,
            self.coalesce_bytes,
            self.spin_before_park.as_micros(),
            self.read_lease.as_micros(),
            self.clock_skew.as_millis(),
            self.redial_period.as_millis()
        );
        if !self.late.is_empty() {
            let late: Vec<String> = self.late.iter().map(|n| n.0.to_string()).collect();
            s.push_str(&format!("late = [{}]\n", late.join(", ")));
        }
        s.push_str("[nodes]\n");
        for (id, addr) in &self.nodes {
            s.push_str(&format!("{} = \"{}\"\n", id.0, addr));
        }
        s
    }

    /// Checks every setting, with an error that says what to change.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.nodes.len() < 2 {
            return Err(ConfigError::TooFewNodes(self.nodes.len()));
        }
        let mut seen: BTreeMap<SocketAddr, NodeId> = BTreeMap::new();
        for (&id, &addr) in &self.nodes {
            if addr.port() == 0 {
                return Err(ConfigError::ZeroPort(id));
            }
            if let Some(&a) = seen.get(&addr) {
                return Err(ConfigError::DuplicateAddress { a, b: id, addr });
            }
            seen.insert(addr, id);
        }
        for (name, d) in [
            ("op_timeout", self.op_timeout),
            ("heartbeat_period", self.heartbeat_period),
            ("heartbeat_timeout", self.heartbeat_timeout),
            ("connect_timeout", self.connect_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::ZeroDuration(name));
            }
        }
        if self.heartbeat_period * 2 > self.heartbeat_timeout
            || self.heartbeat_period * 2 > self.op_timeout
        {
            return Err(ConfigError::HeartbeatTooSlow {
                period: self.heartbeat_period,
                timeout: self.heartbeat_timeout,
                op: self.op_timeout,
            });
        }
        for (name, value, min, max) in [
            ("max_message_len", self.max_message_len, 1, MAX_FRAME_DATA),
            ("max_outstanding", self.max_outstanding, 1, 1 << 30),
            ("coalesce_bytes", self.coalesce_bytes, 1, 1 << 30),
        ] {
            if value < min || value > max {
                return Err(ConfigError::OutOfRange {
                    name,
                    value,
                    min,
                    max,
                });
            }
        }
        if self.spin_before_park > MAX_SPIN {
            return Err(ConfigError::TooLong {
                name: "spin_before_park",
                value: self.spin_before_park,
                max: MAX_SPIN,
            });
        }
        if let Some(&n) = self.late.iter().find(|n| !self.nodes.contains_key(n)) {
            return Err(ConfigError::UnknownLate(n));
        }
        if self.clock_skew > MAX_CLOCK_SKEW {
            return Err(ConfigError::TooLong {
                name: "clock_skew",
                value: self.clock_skew,
                max: MAX_CLOCK_SKEW,
            });
        }
        if !self.redial_period.is_zero()
            && (self.redial_period < MIN_REDIAL || self.redial_period > MAX_REDIAL)
        {
            return Err(ConfigError::RedialPeriod(self.redial_period));
        }
        let max_lease = (self.op_timeout / 4).min(self.heartbeat_timeout / 4);
        if self.read_lease > max_lease {
            return Err(ConfigError::TooLong {
                name: "read_lease",
                value: self.read_lease,
                max: max_lease,
            });
        }
        Ok(())
    }

    /// Whether `node` is a late node (see [`late`](Self::late)).
    ///
    /// ```
    /// use squall_transport::NodeId;
    /// use squall_transport_tcp::ClusterConfig;
    /// let cfg = ClusterConfig::from_toml(r#"
    ///     cluster_id = 1
    ///     late = [2]
    ///     [nodes]
    ///     0 = "127.0.0.1:7000"
    ///     1 = "127.0.0.1:7001"
    ///     2 = "127.0.0.1:7002"
    /// "#).unwrap();
    /// assert!(cfg.is_late(NodeId(2)) && !cfg.is_late(NodeId(0)));
    /// ```
    pub fn is_late(&self, node: NodeId) -> bool {
        self.late.contains(&node)
    }

    /// Validates the config for node `me`, which must be listed.
    pub fn validate_for(&self, me: NodeId) -> Result<(), ConfigError> {
        self.validate()?;
        if !self.nodes.contains_key(&me) {
            return Err(ConfigError::UnknownSelf(me));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> ClusterConfig {
        ClusterConfig::new(
            1,
            [
                (NodeId(0), "127.0.0.1:7000".parse().expect("addr")),
                (NodeId(1), "127.0.0.1:7001".parse().expect("addr")),
            ],
        )
    }

    #[test]
    fn defaults_are_valid_and_round_trip_through_toml() {
        let c = two();
        c.validate().expect("valid");
        assert_eq!(ClusterConfig::from_toml(&c.to_toml()).expect("parses"), c);
    }

    #[test]
    fn late_nodes_round_trip_through_toml_and_must_be_listed() {
        let mut c = two();
        c.nodes
            .insert(NodeId(2), "127.0.0.1:7002".parse().expect("addr"));
        c.late.insert(NodeId(2));
        c.validate().expect("valid");
        let back = ClusterConfig::from_toml(&c.to_toml()).expect("parses");
        assert_eq!(back, c);
        assert!(back.is_late(NodeId(2)));
        c.late.insert(NodeId(9));
        let e = c.validate().expect_err("unlisted late node");
        assert!(matches!(e, ConfigError::UnknownLate(NodeId(9))), "{e}");
        assert!(e.to_string().contains("not in [nodes]"), "{e}");
    }

    #[test]
    fn bad_values_say_what_to_fix() {
        let mut c = two();
        c.op_timeout = Duration::ZERO;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::ZeroDuration("op_timeout"))
        ));
        let mut c = two();
        c.heartbeat_period = Duration::from_millis(400);
        let e = c.validate().expect_err("too slow");
        assert!(e.to_string().contains("shorten the period"), "{e}");
        let mut c = two();
        c.max_message_len = 0;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::OutOfRange {
                name: "max_message_len",
                ..
            })
        ));
        let mut c = two();
        c.nodes
            .insert(NodeId(2), "127.0.0.1:7000".parse().expect("addr"));
        assert!(matches!(
            c.validate(),
            Err(ConfigError::DuplicateAddress { .. })
        ));
        let mut c = two();
        c.nodes.remove(&NodeId(1));
        assert!(matches!(c.validate(), Err(ConfigError::TooFewNodes(1))));
        let mut c = two();
        c.nodes
            .insert(NodeId(5), "127.0.0.1:0".parse().expect("addr"));
        assert!(matches!(
            c.validate(),
            Err(ConfigError::ZeroPort(NodeId(5)))
        ));
        let mut c = two();
        c.spin_before_park = Duration::from_millis(11);
        let e = c.validate().expect_err("spins too long");
        assert!(e.to_string().contains("spin_before_park"), "{e}");
        let mut c = two();
        c.read_lease = Duration::from_millis(126);
        let e = c.validate().expect_err("lease too long");
        assert!(e.to_string().contains("read_lease"), "{e}");
        c.read_lease = Duration::from_millis(125);
        c.validate().expect("a quarter of the timeouts is fine");
        let mut c = two();
        c.clock_skew = MAX_CLOCK_SKEW + Duration::from_millis(1);
        let e = c.validate().expect_err("skew too large");
        assert!(e.to_string().contains("clock_skew"), "{e}");
        c.clock_skew = Duration::ZERO;
        c.validate().expect("one clock: no allowance");
        for bad in [
            Duration::from_millis(9),
            MAX_REDIAL + Duration::from_millis(1),
        ] {
            c.redial_period = bad;
            let e = c.validate().expect_err("redial period out of range");
            assert!(matches!(e, ConfigError::RedialPeriod(_)), "{e}");
            assert!(e.to_string().contains("redial_period"), "{e}");
        }
        c.redial_period = Duration::ZERO;
        c.validate().expect("no redial");
        assert_eq!(ClusterConfig::from_toml(&c.to_toml()).expect("parses"), c);
        assert!(matches!(
            two().validate_for(NodeId(9)),
            Err(ConfigError::UnknownSelf(NodeId(9)))
        ));
    }

    #[test]
    fn bad_toml_is_refused_clearly() {
        let e = ClusterConfig::from_toml("cluster_id = 1\n[nodes]\nx = \"127.0.0.1:1\"\n")
            .expect_err("bad id");
        assert!(matches!(e, ConfigError::BadNodeId(_)), "{e}");
        let e = ClusterConfig::from_toml("cluster_id = 1\n[nodes]\n0 = \"localhost\"\n")
            .expect_err("bad addr");
        assert!(e.to_string().contains("ip:port"), "{e}");
        let e = ClusterConfig::from_toml(
            "cluster_id = 1\nop_timout_ms = 5\n[nodes]\n0 = \"127.0.0.1:1\"\n1 = \"127.0.0.1:2\"\n",
        )
        .expect_err("typo");
        assert!(e.to_string().contains("op_timout_ms"), "{e}");
        let e = ClusterConfig::from_file("/nonexistent/squall.toml").expect_err("no file");
        assert!(e.to_string().contains("/nonexistent/squall.toml"), "{e}");
    }
}
