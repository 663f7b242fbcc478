//! Configuration, validated at start-up.

use std::path::PathBuf;
use std::time::Duration;

use squall_sst::SmcConfig;
use squall_transport::{NodeId, RegionId};

use crate::error::ConfigError;
use crate::log::FsyncPolicy;

/// How messages are delivered.
///
/// ```
/// use squall_round_robin::Mode;
/// assert!(Mode::Atomic.is_ordered());
/// assert!(!Mode::Unordered.is_ordered());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// FIFO per sender, delivered on receipt (Derecho's "raw" mode); positions are local
    /// delivery counts and differ between members. No null messages are sent.
    Unordered,
    /// Total order, delivered once every member has received the message (stable).
    Atomic,
    /// Total order as in `Atomic`, but a member counts a message as received only once it is
    /// in its local checksummed log: it logs, in sequence order, every message whose
    /// predecessors have all arrived locally (nulls skipped), syncs the batch per `fsync`, and
    /// only then publishes it as received. A stable message is therefore in every member's
    /// log; it is delivered, followed by `Upcall::Durable(p)` for the last position synced in
    /// every member's log: the batch's last position under `FsyncPolicy::EveryBatch`, lagging
    /// to the last syncs under `EveryRecords`, none under `Never` (see [`FsyncPolicy`]).
    /// A log may run ahead of delivery (logged, not yet stable) but is always a prefix of the
    /// agreed order.
    Durable {
        /// The log file (created if missing; a torn or corrupt tail is truncated on open),
        /// with its side index beside it ([`index_path`](crate::log::index_path), every
        /// [`Config::log_index_every`] bytes). A member that restarts on an existing log must
        /// use a later [`Config::view`] than the log's last record.
        path: PathBuf,
        /// When to fsync.
        fsync: FsyncPolicy,
    },
}

impl Mode {
    /// Whether messages are totally ordered.
    pub fn is_ordered(&self) -> bool {
        !matches!(self, Mode::Unordered)
    }
}

/// How large messages travel in groups of [`Config::binomial_from`] members or more (smaller
/// groups get them straight from the sender).
///
/// ```
/// use squall_round_robin::Relay;
/// assert_eq!(Relay::default(), Relay::Tree);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Relay {
    /// A binomial tree rooted at the sender, each member forwarding every chunk to its
    /// children as soon as it lands (a pipelined tree: the sender writes every chunk `log2 n`
    /// times). The default: on the fabrics measured so far (in-process, loopback TCP, a
    /// loaded 2-core machine) it was as fast or faster than the pipeline.
    #[default]
    Tree,
    /// RDMC's binomial pipeline (`BINOMIAL_SEND`): a hypercube exchange in which, once the
    /// pipeline is full, every member sends one chunk per step, and the sender writes `chunks +
    /// log2 n - 1` chunks in all. Meant for fabrics whose links, not CPUs, bound a large
    /// transfer (RDMA). Any group size: where it is not a power of two, the members beyond
    /// the largest power of two are RDMC's *twins* of hypercube vertices (each gets every
    /// chunk from its vertex one step after it and takes over the vertex's sends of chunks it
    /// already holds); the sender then writes `chunks + floor(log2 n) - 1` chunks and the
    /// message takes `chunks + ceil(log2 n) - 1` steps.
    BinomialPipeline,
}

/// A round-robin group's configuration. The same on every member (except a durable log's
/// path, which is local).
///
/// ```
/// use squall_round_robin::Config;
/// use squall_transport::NodeId;
/// let cfg = Config::new(vec![NodeId(0), NodeId(1), NodeId(2)]);
/// assert!(cfg.validate().is_ok());
/// assert!(Config { window: 0, ..cfg.clone() }.validate().is_err());
/// assert!(Config { senders: vec![NodeId(9)], ..cfg.clone() }.validate().is_err());
/// assert!(Config { log_index_every: 0, ..cfg }.validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The members, in row order.
    pub members: Vec<NodeId>,
    /// The senders, in rank order (a subset of the members); empty means every member.
    pub senders: Vec<NodeId>,
    /// Delivery mode.
    pub mode: Mode,
    /// Flow control: messages per sender in flight (not yet received, and in ordered modes not
    /// yet delivered, everywhere). Also the number of SMC slots and large buffers per sender.
    pub window: usize,
    /// The largest payload carried inline in an SMC slot (bytes).
    pub slot_size: usize,
    /// The largest payload at all; payloads above `slot_size` travel as chunks written into
    /// per-sender receive buffers. Equal to `slot_size` to disable large messages. Every member
    /// registers `senders × window × (max_payload + 8 per chunk)` bytes for those buffers (80 MiB
    /// for 5 senders with the defaults): size it to the messages you send.
    pub max_payload: usize,
    /// Bytes per one-sided write of a large message (the pipeline's block size).
    pub chunk_size: usize,
    /// Groups with at least this many members relay large messages along a binomial tree
    /// rooted at the sender, chunk by chunk (pipelined); smaller groups get them directly from
    /// the sender. Default 4.
    pub binomial_from: usize,
    /// The relay used from `binomial_from` members on: the pipelined binomial tree (default),
    /// or RDMC's binomial pipeline (any size, with twin vertices beyond a power of two).
    pub relay: Relay,
    /// The region that holds the SST.
    pub table_region: RegionId,
    /// The region that holds the large-message receive buffers.
    pub large_region: RegionId,
    /// The view id recorded in durable log records (a fixed-view group's incarnation).
    pub view: u64,
    /// SST heartbeat interval.
    pub heartbeat_interval: Duration,
    /// SST suspicion timeout.
    pub suspicion_timeout: Duration,
    /// [`Mode::Durable`]: the log's index granularity
    /// ([`LogOptions::index_every`](crate::log::LogOptions::index_every)): a restart's skim of
    /// the log reads about this many bytes plus the last batch, not the whole file. At least
    /// 1; `u64::MAX` writes no index. Default [`DEFAULT_INDEX_EVERY`](crate::log::DEFAULT_INDEX_EVERY)
    /// (1 MiB).
    pub log_index_every: u64,
    /// [`Mode::Durable`]: where the log's `fdatasync`s run
    /// ([`LogOptions::sync_mode`](crate::log::LogOptions::sync_mode)): on the log's syncer
    /// thread ([`SyncMode::Thread`](crate::log::SyncMode::Thread), the default: the poll thread
    /// never waits on the disk, except in [`wedge`](crate::RoundRobin::wedge)), or inline in
    /// the poll ([`SyncMode::Inline`](crate::log::SyncMode::Inline): deterministic, for the
    /// simulator). Either way a batch counts as received only once durable per the policy.
    pub log_sync: crate::log::SyncMode,
}

impl Config {
    /// Defaults: every member a sender, atomic mode, window 16, 1 KiB slots, 1 MiB payloads in
    /// 64 KiB chunks, regions 0 (table) and 1 (large buffers), SST timing 10 ms / 100 ms.
    pub fn new(members: Vec<NodeId>) -> Config {
        Config {
            members,
            senders: Vec::new(),
            mode: Mode::Atomic,
            window: 16,
            slot_size: 1024,
            max_payload: 1 << 20,
            chunk_size: 64 << 10,
            binomial_from: 4,
            relay: Relay::default(),
            table_region: RegionId(0),
            large_region: RegionId(1),
            view: 0,
            heartbeat_interval: Duration::from_millis(10),
            suspicion_timeout: Duration::from_millis(100),
            log_index_every: crate::log::DEFAULT_INDEX_EVERY,
            log_sync: crate::log::SyncMode::Thread,
        }
    }

    /// The senders in rank order (every member when `senders` is empty).
    pub fn sender_list(&self) -> Vec<NodeId> {
        if self.senders.is_empty() {
            self.members.clone()
        } else {
            self.senders.clone()
        }
    }

    /// Whether payloads above the slot size are allowed.
    pub fn large_enabled(&self) -> bool {
        self.max_payload > self.slot_size
    }

    /// A large buffer's size (bytes, whole words).
    pub fn large_cap(&self) -> usize {
        self.max_payload.div_ceil(8) * 8
    }

    /// Chunks in the largest message.
    pub fn max_chunks(&self) -> usize {
        self.large_cap().div_ceil(self.chunk_size)
    }

    /// Bytes per large buffer: the data, then one arrival marker word per chunk.
    pub fn large_stride(&self) -> usize {
        self.large_cap() + 8 * self.max_chunks()
    }

    /// The SMC bounds: a slot holds the 8-byte message header plus `slot_size` bytes.
    pub fn smc(&self) -> SmcConfig {
        SmcConfig {
            window: self.window,
            slot_size: self.slot_size + 8,
        }
    }

    /// Checks every bound.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.members.is_empty() {
            return Err(ConfigError::Invalid("the group needs at least one member"));
        }
        for (i, m) in self.members.iter().enumerate() {
            if self.members[..i].contains(m) {
                return Err(ConfigError::Member(*m, "listed twice among the members"));
            }
        }
        for (i, s) in self.senders.iter().enumerate() {
            if !self.members.contains(s) {
                return Err(ConfigError::Member(*s, "a sender must be a member"));
            }
            if self.senders[..i].contains(s) {
                return Err(ConfigError::Member(*s, "listed twice among the senders"));
            }
        }
        if self.window == 0 {
            return Err(ConfigError::Invalid("window must be at least 1"));
        }
        if self.slot_size == 0 || self.slot_size > u32::MAX as usize - 8 {
            return Err(ConfigError::Invalid(
                "slot_size must be between 1 byte and 4 GiB",
            ));
        }
        if self.max_payload < self.slot_size || self.max_payload > u32::MAX as usize {
            return Err(ConfigError::Invalid(
                "max_payload must be at least slot_size and at most 4 GiB",
            ));
        }
        if self.chunk_size == 0 || self.chunk_size % 8 != 0 {
            return Err(ConfigError::Invalid(
                "chunk_size must be a positive multiple of 8",
            ));
        }
        if self.binomial_from < 2 {
            return Err(ConfigError::Invalid("binomial_from must be at least 2"));
        }
        if self.table_region == self.large_region {
            return Err(ConfigError::Invalid(
                "table_region and large_region must differ",
            ));
        }
        if self.suspicion_timeout <= self.heartbeat_interval || self.heartbeat_interval.is_zero() {
            return Err(ConfigError::Invalid(
                "suspicion_timeout must exceed a positive heartbeat_interval",
            ));
        }
        if self.log_index_every == 0 {
            return Err(ConfigError::Invalid(
                "log_index_every must be at least 1 byte (u64::MAX: no index)",
            ));
        }
        self.smc().validate().map_err(ConfigError::Smc)?;
        Ok(())
    }
}
