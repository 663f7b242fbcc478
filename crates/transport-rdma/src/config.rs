//! Settings of the RDMA transport, validated at start-up.

use std::time::Duration;

use thiserror::Error;

/// A setting that cannot work, with what to change.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The path MTU is not one InfiniBand defines.
    #[error(
        "mtu {0} is not an InfiniBand path MTU; use 256, 512, 1024, 2048 or 4096 (RoCE: at most the Ethernet MTU minus headers)"
    )]
    Mtu(u32),
    /// A queue depth is zero or too large.
    #[error("{name} = {value} is out of range; it must be between 1 and {max}")]
    Depth {
        /// The setting.
        name: &'static str,
        /// Its value.
        value: usize,
        /// The largest allowed.
        max: usize,
    },
    /// Signaling is too sparse for the send queue to drain.
    #[error(
        "signal_every = {signal_every} must be at least 1 and at most half of sq_depth ({sq_depth}), or unsignaled writes could fill the send queue before any completion retires them"
    )]
    SignalEvery {
        /// The setting.
        signal_every: usize,
        /// The send queue depth.
        sq_depth: usize,
    },
    /// The completion queue could overflow.
    #[error(
        "cq_depth = {cq_depth} is too small for {peers} peers: it must be at least peers x (sq_depth + rq_depth) = {needed}"
    )]
    CqDepth {
        /// The setting.
        cq_depth: usize,
        /// Peers.
        peers: usize,
        /// The minimum.
        needed: usize,
    },
    /// The retry timeout exponent is out of range.
    #[error(
        "retry_timeout_exp = {0} must be between 1 and 31 (timeout = 4.096 us x 2^exp); 14 gives about 67 ms"
    )]
    RetryTimeout(u8),
    /// The retry count is out of range.
    #[error("retry_count = {0} must be at most 7")]
    RetryCount(u8),
    /// Messages must fit a receive buffer and a u32 length.
    #[error("max_message_len = {0} must be between 1 and 1 GiB")]
    MessageLen(usize),
    /// The connect timeout is zero.
    #[error("connect_timeout must be positive")]
    ConnectTimeout,
    /// The connect timeout is longer than [`RdmaConfig::MAX_CONNECT_TIMEOUT`] (a start
    /// attempt's deadline is taken by adding it to the current time; s28).
    #[error("connect_timeout = {0:?} is too long; it must be at most one day (86400 s)")]
    ConnectTimeoutTooLong(Duration),
}

/// Settings of one node's RDMA transport.
///
/// ```
/// use squall_transport_rdma::RdmaConfig;
/// let cfg = RdmaConfig::default();
/// assert!(cfg.validate(3).is_ok());
/// assert!(RdmaConfig { mtu: 1500, ..cfg.clone() }.validate(3).is_err());
/// assert!(cfg.op_timeout() > std::time::Duration::from_millis(100));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdmaConfig {
    /// Identifies the cluster; nodes of different clusters refuse each other at connect.
    pub cluster_id: u64,
    /// The device to open (`ibv_devices` lists them); `None` takes the first.
    pub device: Option<String>,
    /// The device port, from 1.
    pub port: u8,
    /// The GID table index. On RoCE v2 pick the index whose type is RoCE v2 and whose address is
    /// the interface's IPv4-mapped or IPv6 address (`show_gids`); often 1 or 3.
    pub gid_index: u8,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// Send queue depth per peer: the most work requests outstanding on one link.
    pub sq_depth: usize,
    /// Receive buffers posted per peer for two-sided messages.
    pub rq_depth: usize,
    /// Completion queue depth; at least peers x (sq_depth + rq_depth).
    pub cq_depth: usize,
    /// Every this many unsignaled work requests, one is signaled so the batch retires.
    pub signal_every: usize,
    /// Registered send buffers per peer (sends outstanding at once).
    pub send_slots: usize,
    /// The largest two-sided message.
    pub max_message_len: usize,
    /// Transport retry timeout exponent: each retry waits 4.096 us x 2^exp.
    pub retry_timeout_exp: u8,
    /// Transport retries before a work request fails with retry-exceeded (at most 7).
    pub retry_count: u8,
    /// How long one start attempt's connection setup over the side channel may take: the
    /// whole exchange with every peer, each dial, read and write on both sides, ends by this
    /// long after the exchange began (since s28; before, each read got this long afresh).
    /// The exchange begins after the regions are registered and the queue pairs created.
    /// The closing ready bytes then have this long again, from when this node's queue pairs
    /// are ready. At most [`RdmaConfig::MAX_CONNECT_TIMEOUT`].
    pub connect_timeout: Duration,
}

impl Default for RdmaConfig {
    fn default() -> Self {
        RdmaConfig {
            cluster_id: 0,
            device: None,
            port: 1,
            gid_index: 0,
            mtu: 1024,
            sq_depth: 256,
            rq_depth: 64,
            cq_depth: 8192,
            signal_every: 32,
            send_slots: 16,
            max_message_len: 4096,
            retry_timeout_exp: 14,
            retry_count: 7,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

impl RdmaConfig {
    /// The longest `connect_timeout` [`validate`](Self::validate) takes: one day.
    ///
    /// ```
    /// use std::time::Duration;
    /// use squall_transport_rdma::{ConfigError, RdmaConfig};
    /// let cfg = RdmaConfig { connect_timeout: Duration::MAX, ..RdmaConfig::default() };
    /// assert_eq!(cfg.validate(1), Err(ConfigError::ConnectTimeoutTooLong(Duration::MAX)));
    /// assert!(RdmaConfig { connect_timeout: RdmaConfig::MAX_CONNECT_TIMEOUT, ..cfg }.validate(1).is_ok());
    /// ```
    pub const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

    /// Checks every setting for a node with `peers` peers.
    pub fn validate(&self, peers: usize) -> Result<(), ConfigError> {
        if ![256, 512, 1024, 2048, 4096].contains(&self.mtu) {
            return Err(ConfigError::Mtu(self.mtu));
        }
        for (name, value, max) in [
            ("sq_depth", self.sq_depth, 16 * 1024),
            ("rq_depth", self.rq_depth, 16 * 1024),
            ("send_slots", self.send_slots, 16 * 1024),
            ("cq_depth", self.cq_depth, 4 * 1024 * 1024),
        ] {
            if value == 0 || value > max {
                return Err(ConfigError::Depth { name, value, max });
            }
        }
        if self.signal_every == 0 || self.signal_every > self.sq_depth / 2 {
            return Err(ConfigError::SignalEvery {
                signal_every: self.signal_every,
                sq_depth: self.sq_depth,
            });
        }
        let needed = peers * (self.sq_depth + self.rq_depth);
        if self.cq_depth < needed {
            return Err(ConfigError::CqDepth {
                cq_depth: self.cq_depth,
                peers,
                needed,
            });
        }
        if !(1..=31).contains(&self.retry_timeout_exp) {
            return Err(ConfigError::RetryTimeout(self.retry_timeout_exp));
        }
        if self.retry_count > 7 {
            return Err(ConfigError::RetryCount(self.retry_count));
        }
        if self.max_message_len == 0 || self.max_message_len > 1 << 30 {
            return Err(ConfigError::MessageLen(self.max_message_len));
        }
        if self.connect_timeout.is_zero() {
            return Err(ConfigError::ConnectTimeout);
        }
        if self.connect_timeout > Self::MAX_CONNECT_TIMEOUT {
            return Err(ConfigError::ConnectTimeoutTooLong(self.connect_timeout));
        }
        Ok(())
    }

    /// How long an op to a dead peer takes to fail: every retry's timeout, summed.
    pub fn op_timeout(&self) -> Duration {
        let one = Duration::from_nanos(4096) * (1u32 << self.retry_timeout_exp.min(31));
        one * (u32::from(self.retry_count) + 1)
    }
}
