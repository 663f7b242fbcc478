//! The round-robin group: one member's endpoint.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
use squall_sst::{
    Counter, Detector, SchemaBuilder, Smc, SmcError, SmcFields, Sst, SstConfig, Vector,
};
use squall_transport::{
    LocalSlice, NodeId, PostError, Region, RegionSpec, RemoteAddr, Signal, Transport,
};

use crate::config::{Config, Mode, Relay};
use crate::error::{ConfigError, Error, StopReason, TrimError};

use crate::log::{FsyncPolicy, Log, LogError, LogOptions, Recovery};
use crate::schedule::binomial_pipeline;

/// Message kinds, in the low byte of the 8-byte header that starts every SMC slot.
const KIND_DATA: u64 = 0;
const KIND_NULLS: u64 = 1;
const KIND_LARGE: u64 = 2;

/// The SST fields round-robin uses, beyond SMC's.
#[derive(Clone, Copy, Debug)]
struct Fields {
    smc: SmcFields,
    /// Per sender rank: round-robin messages (data and nulls) received by this member. In
    /// durable mode only what is logged counts: the messages below the logged prefix.
    received: Vector,
    /// Sequence numbers delivered here: every seq below it.
    delivered: Counter,
    /// Per sender rank: one past the highest large-message number copied out here.
    large_done: Vector,
    /// Durable mode under [`FsyncPolicy::EveryRecords`] only (where received is not synced):
    /// how many of this epoch's application messages this member's log has *synced*. Absent
    /// under the other policies (the table's layout is then unchanged).
    synced: Option<Counter>,
    /// Durable mode under [`FsyncPolicy::EveryRecords`] only: how many of this epoch's
    /// application messages this member wants synced in every member's log (s23: a
    /// checkpoint waiting in a quiet group, [`RoundRobin::want_synced`]). Monotonic; every
    /// member answers the column's maximum by syncing what it wrote.
    sync_wanted: Option<Counter>,
}

fn declare(cfg: &Config) -> Result<(squall_sst::Schema, Fields), ConfigError> {
    let mut b = SchemaBuilder::new(cfg.members.len());
    let smc = Smc::declare(&mut b, cfg.smc()).map_err(ConfigError::Smc)?;
    let received = b.vector("rr_received", cfg.sender_list().len());
    let delivered = b.counter("rr_delivered");
    let large_done = b.vector("rr_large_done", cfg.sender_list().len());
    let synced = matches!(
        cfg.mode,
        Mode::Durable {
            fsync: FsyncPolicy::EveryRecords(_),
            ..
        }
    )
    .then(|| b.counter("rr_synced"));
    let sync_wanted = synced.map(|_| b.counter("rr_sync_wanted"));
    Ok((
        b.build()?,
        Fields {
            smc,
            received,
            delivered,
            large_done,
            synced,
            sync_wanted,
        },
    ))
}

/// Which positions [`Upcall::Durable`] reports, by the log's [`FsyncPolicy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DurableReports {
    /// Not durable, or [`FsyncPolicy::Never`]: none.
    Off,
    /// [`FsyncPolicy::EveryBatch`]: every delivered position (received means synced, so a
    /// stable message is synced in every member's log).
    Delivered,
    /// [`FsyncPolicy::EveryRecords`]: the delivered positions below the minimum of the
    /// `rr_synced` column over the epoch's members.
    Synced,
}

/// Counters for benchmarks and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Application messages delivered.
    pub delivered: u64,
    /// Polls that delivered at least one message (receiver-side batches).
    pub delivery_batches: u64,
    /// The largest batch delivered by one poll.
    pub max_batch: u64,
    /// Null messages this member sent (each run counts its length).
    pub nulls_sent: u64,
    /// Runs of nulls this member sent (one SMC slot each).
    pub null_runs_sent: u64,
    /// Null messages delivered here (and filtered out).
    pub nulls_skipped: u64,
    /// Large messages this member sent.
    pub large_sent: u64,
    /// Chunks in the large messages this member sent.
    pub large_chunks: u64,
    /// Chunk writes this member posted (its own messages' and those it relayed).
    pub chunk_writes: u64,
    /// Chunk writes this member held back because their member was not linked here yet
    /// (absent, or a new incarnation the epoch waits for), each posted once its link came up,
    /// or dropped if the member is suspected first (the epoch then wedges).
    pub chunk_writes_held: u64,
    /// Durable mode: application messages appended to the log.
    pub logged: u64,
    /// Durable mode: log batches written (one write each, and per the fsync policy a sync:
    /// inline one per batch, on the syncer thread one per group of batches).
    pub log_batches: u64,
    /// Durable mode: `fdatasync`s the log's syncer thread started (0 inline): with group
    /// commit, at most [`log_batches`](Stats::log_batches).
    pub log_syncs: u64,
}

/// What arrived from a sender and waits for earlier messages (or its own data) to complete.
#[derive(Debug)]
enum Pending {
    Ready(Entry),
    /// Large message number `j` of `len` bytes: complete once every chunk's marker says so.
    Large {
        j: u64,
        len: usize,
    },
}

/// The arrival marker of large message `j` (`len` bytes) in each of its chunks' marker words.
fn marker(j: u64, len: usize) -> u64 {
    u64::from((j as u32).wrapping_add(1)) | ((len as u64) << 32)
}

/// A chunk write held back for a member not linked yet: (buffer offset, chunk, message length),
/// the arguments of [`RoundRobin::post_chunk`] but the peer.
type HeldChunk = (usize, usize, usize);

/// Large messages of one sender to relay, (number, length), and which of this member's
/// transfers of the first are posted.
type RelayQueue = (VecDeque<(u64, usize)>, Vec<bool>);

/// What a sender's queue holds between receipt and delivery.
#[derive(Debug)]
enum Entry {
    Data(Vec<u8>),
    /// `count` nulls, the first at round-robin index `first`.
    Nulls {
        first: u64,
        count: u64,
    },
}

/// One member of a fixed-view round-robin group (Derecho TOCS 2019 §3.3, §3.6, B.2).
///
/// Sender `k` (rank among the senders) numbers its messages 0, 1, ...; message `i` of sender
/// `k` has sequence number `i·n + k` for `n` senders. Messages travel in SMC slots (or, above
/// the slot size, as chunks written into per-sender receive buffers, announced by a slot); each
/// member publishes, per sender, how many messages it has received. A message is stable once
/// every member has received it — the minimum over that column — and ordered modes deliver
/// stable messages in sequence order. Large messages are relayed along a binomial tree in
/// groups of `binomial_from` or more. Idle senders send runs of null messages (one slot per
/// run) so the order never waits on them; nulls never reach the application. A suspected member
/// wedges the group: [`Upcall::Wedged`] is reported once and nothing more is delivered.
///
/// Sans-IO: [`poll`](TotalOrder::poll) does whatever is ready and never blocks; time comes only
/// from the transport.
///
/// ```
/// use squall_ordering::{TotalOrder, Upcall};
/// use squall_round_robin::{Config, RoundRobin};
/// use squall_transport::NodeId;
/// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
///
/// let cfg = Config { slot_size: 64, max_payload: 256, window: 4, ..Config::new(vec![NodeId(0), NodeId(1)]) };
/// let layout = RoundRobin::<squall_transport_mem::threaded::ThreadedNode>::layout(&cfg)?;
/// let mut nodes = ThreadedFabric::new(ThreadedConfig::default())?.cluster(2, &layout)?;
/// let b = nodes.pop().unwrap();
/// let mut a = RoundRobin::new(nodes.pop().unwrap(), cfg.clone())?;
/// let mut b = RoundRobin::new(b, cfg)?;
/// a.submit(b"hello")?;
/// b.submit(&[7u8; 200])?; // a large message
/// let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
/// while got_a.len() < 2 || got_b.len() < 2 {
///     a.poll(&mut got_a);
///     b.poll(&mut got_b);
/// }
/// assert_eq!(got_a, got_b); // same messages, same positions, same order
/// assert!(matches!(&got_a[0], Upcall::Deliver(d) if d.payload == b"hello" && d.position == 0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RoundRobin<T: Transport> {
    cfg: Config,
    sst: Sst<T>,
    smc: Smc,
    f: Fields,
    senders: Vec<NodeId>,
    my_rank: Option<usize>,
    /// This member's next round-robin index (data and nulls).
    next_index: u64,
    /// Per sender rank, round-robin messages received here.
    received: Vec<u64>,
    /// Durable mode, per sender rank: received here and not yet logged, in order.
    staged: Vec<VecDeque<Entry>>,
    /// Durable mode: every sequence number below this one is logged (or a null) here: written
    /// to the log file (its sync may still be in flight).
    written_seq: u64,
    /// Durable mode: every sequence number below this one is logged and durable per the fsync
    /// policy: what this member publishes as received.
    durable_seq: u64,
    /// Durable mode: the delivery position of the next message logged.
    log_position: u64,
    /// The position of the epoch's first message (0 outside epoch mode).
    first_position: u64,
    /// Which positions [`Upcall::Durable`] reports.
    durable_reports: DurableReports,
    /// [`DurableReports::Synced`]: batches flushed and not yet known synced, (the mark they
    /// were flushed under, the delivery position of the next message logged after them), in
    /// order.
    unsynced: VecDeque<(u64, u64)>,
    /// [`DurableReports::Synced`]: how many of this epoch's application messages this
    /// member's log has synced (what it publishes in `rr_synced`).
    synced_count: u64,
    /// [`DurableReports::Synced`]: how many of this epoch's application messages the last
    /// sync this member started for the `rr_sync_wanted` column covers.
    sync_started: u64,
    /// [`DurableReports::Synced`]: every position below this one was reported durable.
    durable_end: u64,
    /// Per sender rank: (logged and) received, waiting for delivery.
    queues: Vec<VecDeque<Entry>>,
    /// The next sequence number to deliver.
    next_seq: u64,
    /// The next delivery position (application messages only).
    position: u64,
    large: Option<Region>,
    /// Per sender rank: what arrived and is not yet complete, in order.
    awaiting: Vec<VecDeque<Pending>>,
    /// Per sender rank: large messages to relay (number, length) and, for the first, which of
    /// this member's transfers are posted.
    relay: Vec<RelayQueue>,
    /// Per sender rank: how this member forwards that sender's large messages.
    plans: Vec<RelayPlan>,
    /// Per sender rank: one past the highest large message copied out here.
    large_done: Vec<u64>,
    /// This sender's next large-message number (numbers of aborted attempts are skipped).
    next_large: u64,
    /// Per row: `Some` while the row's member is not linked to this epoch (absent at its
    /// start, or a new incarnation it waits for): the chunk writes held back for it, in order,
    /// posted once its link is up and its large-message region checked
    /// ([`link_rows`](RoundRobin::link_rows)); `None` once linked.
    unlinked: Vec<Option<VecDeque<HeldChunk>>>,
    log: Option<Log>,
    recovery: Option<Recovery>,
    wedged: bool,
    reported_wedge: bool,
    stopped: Option<StopReason>,
    scratch: Vec<u8>,
    stats: Stats,
    /// Epoch mode: this member's data messages not yet delivered here, (index, payload), in
    /// order, so that those past a trim can be handed back to the membership layer.
    own: Option<VecDeque<(u64, Vec<u8>)>>,
}

impl<T: Transport> std::fmt::Debug for RoundRobin<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoundRobin")
            .field("me", &self.me())
            .field("next_seq", &self.next_seq)
            .field("received", &self.received)
            .field("wedged", &self.wedged)
            .finish_non_exhaustive()
    }
}

/// Per sender rank (of `senders`), how many of its round-robin messages have a sequence number
/// below `seq` (message `i` of sender `k` has sequence number `i · senders + k`).
///
/// ```
/// use squall_round_robin::seq_prefix_counts;
/// assert_eq!(seq_prefix_counts(7, 3), vec![3, 2, 2]);
/// assert_eq!(seq_prefix_counts(0, 2), vec![0, 0]);
/// ```
pub fn seq_prefix_counts(seq: u64, senders: usize) -> Vec<u64> {
    let ns = senders as u64;
    (0..ns)
        .map(|k| seq.saturating_sub(k).div_ceil(ns))
        .collect()
}

impl<T: Transport> RoundRobin<T> {
    /// The regions every member must register (same ids and lengths everywhere): the table and
    /// the large-message buffers.
    ///
    /// ```
    /// use squall_round_robin::{Config, RoundRobin};
    /// use squall_transport::NodeId;
    /// let layout = RoundRobin::<squall_transport_mem::sim::SimNode>::layout(&Config::new(vec![NodeId(0)]))?;
    /// assert_eq!(layout.len(), 2);
    /// # Ok::<(), squall_round_robin::ConfigError>(())
    /// ```
    pub fn layout(cfg: &Config) -> Result<Vec<RegionSpec>, ConfigError> {
        cfg.validate()?;
        let (schema, _) = declare(cfg)?;
        Ok(vec![
            RegionSpec::new(cfg.table_region, schema.table_len()),
            RegionSpec::new(cfg.large_region, Self::large_len(cfg)),
        ])
    }

    fn large_len(cfg: &Config) -> usize {
        if cfg.large_enabled() {
            cfg.sender_list().len() * cfg.window * cfg.large_stride()
        } else {
            8
        }
    }

    /// Sets the group up over `transport` (whose node must be a member, with the regions of
    /// [`layout`](RoundRobin::layout) on every member). In durable mode, opens the log and
    /// repairs its tail; what it held is in [`recovered`](RoundRobin::recovered). A log that
    /// already holds records of `cfg.view` or a later view is refused
    /// ([`LogError::StaleView`](crate::log::LogError::StaleView)).
    pub fn new(transport: T, cfg: Config) -> Result<RoundRobin<T>, Error> {
        Self::build(transport, cfg, None)
    }

    /// Sets up one view's epoch for a membership layer, over an existing pair of regions (the
    /// table and large-message regions named in `cfg`, registered for the largest membership
    /// and zeroed with [`zero_regions`](RoundRobin::zero_regions) since their last use).
    /// Delivery positions start at `first_position` (continuing the previous view's).
    ///
    /// Differences from [`new`](RoundRobin::new): the epoch's own SST failure detector is
    /// off ([`Detector::TransportOnly`]: no heartbeats, no suspicion on timeouts; partition
    /// safety off) — failure detection belongs
    /// to the membership table, and a heartbeat written after the wedge could land in a region
    /// set that a later view reuses. A failure the transport reports still wedges the epoch.
    /// The member keeps a copy of its own data messages until they are delivered, so that
    /// [`deliver_up_to`](RoundRobin::deliver_up_to) can hand back those past the trim.
    /// [`Mode::Atomic`] and [`Mode::Durable`] are supported; in durable mode the log's records
    /// carry the group-wide positions (starting at `first_position`), and
    /// [`wedge`](RoundRobin::wedge) reports what the log holds.
    ///
    /// ```
    /// use squall_ordering::{TotalOrder, Upcall};
    /// use squall_round_robin::{Config, RoundRobin};
    /// use squall_transport::NodeId;
    /// use squall_transport_mem::sim::{Sim, SimConfig};
    ///
    /// let cfg = Config { slot_size: 64, max_payload: 64, window: 4, ..Config::new(vec![NodeId(0), NodeId(1)]) };
    /// let layout = RoundRobin::<squall_transport_mem::sim::SimNode>::layout(&cfg)?;
    /// let (sim, mut nodes) = Sim::cluster(SimConfig::seeded(1), 2, &layout)?;
    /// let b = nodes.pop().unwrap();
    /// let mut a = RoundRobin::epoch(nodes.pop().unwrap(), cfg.clone(), 10)?;
    /// let mut b = RoundRobin::epoch(b, cfg, 10)?;
    /// a.submit(b"one")?;
    /// let mut got = Vec::new();
    /// while got.is_empty() {
    ///     a.poll(&mut Vec::new());
    ///     b.poll(&mut got);
    ///     sim.step();
    /// }
    /// assert!(matches!(&got[0], Upcall::Deliver(d) if d.position == 10));
    /// a.submit(b"two")?;
    /// a.poll(&mut Vec::new()); // a receives its own message; the sim does not step: b never does
    /// let (ra, rb) = (a.wedge(), b.wedge());
    /// assert_eq!((ra, rb), (vec![2, 0], vec![1, 0]));
    /// // The trim is what every survivor has: one message of a.
    /// let mut out = Vec::new();
    /// let back = a.deliver_up_to(&[1, 0], &mut out)?;
    /// assert_eq!(back, vec![b"two".to_vec()]);
    /// assert_eq!(a.next_position(), 11);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn epoch(transport: T, cfg: Config, first_position: u64) -> Result<RoundRobin<T>, Error> {
        if cfg.mode == Mode::Unordered {
            return Err(
                ConfigError::Invalid("a membership epoch runs in atomic or durable mode").into(),
            );
        }
        let mut rr = Self::build(transport, cfg, Some(first_position))?;
        rr.own = Some(VecDeque::new());
        Ok(rr)
    }

    /// Zeroes this node's copies of the table and large-message regions named in `cfg`, so a
    /// later epoch can start on them. Call only once no peer can still write there (see the
    /// membership layer's reuse argument).
    pub fn zero_regions(transport: &T, cfg: &Config) {
        for id in [cfg.table_region, cfg.large_region] {
            if let Some(r) = transport.region(id) {
                for w in r.words() {
                    w.store(0, Ordering::Release);
                }
            }
        }
    }

    fn build(
        transport: T,
        cfg: Config,
        first_position: Option<u64>,
    ) -> Result<RoundRobin<T>, Error> {
        cfg.validate()?;
        let (schema, f) = declare(&cfg)?;
        let sst_cfg = match first_position {
            None => SstConfig {
                heartbeat_interval: cfg.heartbeat_interval,
                suspicion_timeout: cfg.suspicion_timeout,
                ..SstConfig::new(cfg.table_region, cfg.members.clone())
            },
            Some(_) => SstConfig {
                detector: Detector::TransportOnly,
                partition_safety: false,
                ..SstConfig::new(cfg.table_region, cfg.members.clone())
            },
        };
        let large = if cfg.large_enabled() {
            let need = Self::large_len(&cfg);
            let local = transport.local_id();
            let region = match transport.region(cfg.large_region) {
                Some(r) if r.len() >= need => r.clone(),
                other => {
                    return Err(Error::LargeRegion {
                        node: local,
                        have: other.map_or(0, Region::len),
                        need,
                    });
                }
            };
            for &m in &cfg.members {
                if m != local && transport.is_absent(m) {
                    // An absent member's region is learned when its link comes up; nothing is
                    // written to it before then (`link_rows` checks it first).
                    continue;
                }
                let have = if m == local {
                    need
                } else {
                    transport
                        .remote_region_len(m, cfg.large_region)
                        .unwrap_or(0)
                };
                if have < need {
                    return Err(Error::LargeRegion {
                        node: m,
                        have,
                        need,
                    });
                }
            }
            Some(region)
        } else {
            None
        };
        let mut sst = Sst::new(transport, schema, sst_cfg)?;
        let (log, recovery) = match &cfg.mode {
            Mode::Durable { path, fsync } => {
                let options = LogOptions {
                    fsync: *fsync,
                    index_every: cfg.log_index_every,
                    sync_mode: cfg.log_sync,
                };
                let (mut log, rec) = Log::open_with(path, options)?;
                log.set_waker(sst.transport().waker());
                if let Some((logged, _)) = log.last()
                    && logged >= cfg.view
                {
                    return Err(LogError::StaleView {
                        path: path.clone(),
                        logged,
                        view: cfg.view,
                    }
                    .into());
                }
                (Some(log), Some(rec))
            }
            _ => (None, None),
        };
        let durable_reports = match &cfg.mode {
            Mode::Durable {
                fsync: FsyncPolicy::EveryBatch,
                ..
            } => DurableReports::Delivered,
            Mode::Durable {
                fsync: FsyncPolicy::EveryRecords(_),
                ..
            } => DurableReports::Synced,
            _ => DurableReports::Off,
        };
        let first_position = first_position.unwrap_or(0);
        let senders = cfg.sender_list();
        let my_rank = senders.iter().position(|&s| s == sst.member(sst.my_row()));
        let smc = Smc::new(f.smc, &mut sst);
        let ns = senders.len();
        let plans = (0..ns)
            .map(|k| relay_plan(&sst, senders[k], &cfg))
            .collect();
        let unlinked = (0..sst.rows())
            .map(|r| sst.is_absent(r).then(VecDeque::new))
            .collect();
        Ok(RoundRobin {
            smc,
            f,
            my_rank,
            next_index: 0,
            received: vec![0; ns],
            staged: (0..ns).map(|_| VecDeque::new()).collect(),
            written_seq: 0,
            durable_seq: 0,
            log_position: first_position,
            first_position,
            durable_reports,
            unsynced: VecDeque::new(),
            synced_count: 0,
            sync_started: 0,
            durable_end: first_position,
            queues: (0..ns).map(|_| VecDeque::new()).collect(),
            next_seq: 0,
            position: first_position,
            large,
            awaiting: (0..ns).map(|_| VecDeque::new()).collect(),
            relay: (0..ns).map(|_| (VecDeque::new(), Vec::new())).collect(),
            plans,
            large_done: vec![0; ns],
            next_large: 0,
            unlinked,
            log,
            recovery,
            wedged: false,
            reported_wedge: false,
            stopped: None,
            scratch: Vec::new(),
            stats: Stats::default(),
            own: None,
            senders,
            sst,
            cfg,
        })
    }

    /// Epoch mode: wedges the epoch for good (nothing more is sent, received or delivered; the
    /// caller stops polling it, so this member writes nothing more into its regions) and
    /// returns, per sender rank, how many round-robin messages (data and nulls) this member
    /// has received — a gap-free count per sender. Also works on an epoch that already wedged
    /// itself (a failure the transport reported).
    ///
    /// In durable mode the count is what the log holds durably: the gap-free prefix received
    /// so far is logged first, and the call waits for its sync (and one in flight, if any:
    /// at most about two `fdatasync`s, once per view change) — the one wait of the poll
    /// thread on the log's syncer thread; the counts of the durable prefix are returned, so
    /// a trim computed from them never asks for a message missing from a survivor's log,
    /// nor counts one whose sync had not returned. On an epoch that already wedged itself (a
    /// failure), it waits for the sync in flight too, publishing nothing. If the log fails,
    /// the epoch stops and the counts durable before are returned.
    pub fn wedge(&mut self) -> Vec<u64> {
        if self.log.is_some() {
            if !self.wedged {
                let logged = self
                    .log_prefix()
                    .and_then(|_| self.settle_log().map_err(StopReason::Log));
                if let Err(why) = logged {
                    self.stop(why);
                }
            } else if !matches!(self.stopped, Some(StopReason::Log(_))) {
                // Wedged by a failure: what was logged before counts once its sync returns,
                // as when the sync ran inside the poll (not published: the epoch writes
                // nothing more to its peers).
                if let Some(log) = &mut self.log
                    && log.sync().is_ok()
                    && let Ok(Some(mark)) = log.durable_mark()
                {
                    self.durable_seq = self.durable_seq.max(mark);
                }
            }
            self.wedged = true;
            return seq_prefix_counts(self.durable_seq, self.senders.len());
        }
        if !self.wedged {
            tracing::debug!(me = %self.me(), received = ?self.received, "round-robin: epoch wedged");
            self.wedged = true;
        }
        self.received.clone()
    }

    /// Epoch mode, after [`wedge`](RoundRobin::wedge): delivers, in sequence order, every
    /// message up to the ragged trim `trim` (per sender rank, how many of its messages are
    /// delivered in this view), and discards everything past it. Returns this member's own
    /// data messages past the trim, in submission order, for the caller to resubmit in the next
    /// view or report as discarded. Positions continue from the epoch's first position; see
    /// [`next_position`](RoundRobin::next_position).
    pub fn deliver_up_to(
        &mut self,
        trim: &[u64],
        upcalls: &mut Vec<Upcall<Delivery>>,
    ) -> Result<Vec<Vec<u8>>, TrimError> {
        if !self.wedged {
            return Err(TrimError::NotWedged);
        }
        if trim.len() != self.senders.len() {
            return Err(TrimError::Senders {
                have: trim.len(),
                senders: self.senders.len(),
            });
        }
        // Durable mode: only what is durable here counts (what `wedge` reported).
        let have = match self.log {
            Some(_) => seq_prefix_counts(self.durable_seq, self.senders.len()),
            None => self.received.clone(),
        };
        if let Some((k, (&t, &r))) = trim.iter().zip(&have).enumerate().find(|(_, (t, r))| t > r) {
            return Err(TrimError::Beyond {
                sender: self.senders[k],
                trim: t,
                received: r,
            });
        }
        self.deliver_bounded(trim, upcalls);
        // Under `EveryRecords` what every survivor reported at the wedge is written, not
        // necessarily synced: only what the `rr_synced` column shows is reported durable.
        self.report_synced(upcalls);
        for q in &mut self.queues {
            q.clear();
        }
        for q in &mut self.awaiting {
            q.clear();
        }
        let back: Vec<Vec<u8>> = self
            .own
            .as_mut()
            .map(|own| own.drain(..).map(|(_, p)| p).collect())
            .unwrap_or_default();
        if !back.is_empty() {
            tracing::debug!(me = %self.me(), discarded = back.len(), "round-robin: own messages past the trim");
        }
        Ok(back)
    }

    /// The position the next delivered message gets.
    pub fn next_position(&self) -> u64 {
        self.position
    }

    /// Epoch mode: treats member `node` as failed from the start, because the membership layer
    /// already suspects it. The epoch then writes nothing to `node` and wedges at its next poll,
    /// as if the transport had reported `node` failed. Nothing is reported to the transport
    /// ([`Sst::suspect_known`]): the link to `node` may already lead to a newer incarnation,
    /// which is not the member this view names. If the table fails doing so, the epoch stops
    /// (wedged, as it would at its next poll).
    pub fn suspect_known(&mut self, node: NodeId) {
        if let Err(e) = self.sst.suspect_known(node) {
            self.stop(StopReason::Sst(e));
        }
    }

    /// Epoch mode: member `node` is a new incarnation `incarnation` that this view names but
    /// whose link has not come up at this member yet: the epoch treats it as *not yet
    /// connected* (an absent member: nothing is written to it, it is never suspected for
    /// silence), not as failed, until [`link_expected`](RoundRobin::link_expected). Another
    /// incarnation's link fails it in this epoch ([`Sst::expect_incarnation`]).
    pub fn expect_incarnation(&mut self, node: NodeId, incarnation: u64) {
        self.sst.expect_incarnation(node, incarnation);
        if let Some(row) = self.sst.row_of(node)
            && self.sst.is_absent(row)
            && let Some(held) = self.unlinked.get_mut(row)
        {
            held.get_or_insert_with(VecDeque::new);
        }
    }

    /// The incarnation of `node` this epoch waits for (see
    /// [`expect_incarnation`](RoundRobin::expect_incarnation)), if it still does.
    pub fn expected_incarnation(&self, node: NodeId) -> Option<u64> {
        let row = self.sst.row_of(node)?;
        self.sst.expected_incarnation(row)
    }

    /// The membership layer linked the incarnation of `node` this epoch waits for: its row
    /// comes up like a late member's ([`Sst::link_expected`]). If the table fails doing so, the
    /// epoch stops.
    pub fn link_expected(&mut self, node: NodeId) {
        if let Err(e) = self.sst.link_expected(node) {
            self.stop(StopReason::Sst(e));
        }
    }

    /// The table underneath.
    pub fn sst(&self) -> &Sst<T> {
        &self.sst
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        Stats {
            log_syncs: self.log.as_ref().map_or(0, Log::syncer_syncs),
            ..self.stats
        }
    }

    /// Why the group stopped, if it did.
    pub fn stopped(&self) -> Option<&StopReason> {
        self.stopped.as_ref()
    }

    /// Whether the group is wedged (a member was suspected or this member stopped).
    pub fn is_wedged(&self) -> bool {
        self.wedged
    }

    /// Durable mode: what the log held when it was opened (taken once): its skim, the last
    /// record's header and what was repaired; a [`Log::reader`] reads the records.
    pub fn recovered(&mut self) -> Option<Recovery> {
        self.recovery.take()
    }

    /// Durable mode: drops the prefix of this member's log before the first record at or past
    /// `(view, position)` — records a checkpoint covers — and keeps logging to the shortened
    /// file ([`Log::compact`]: crash-safe, the skim, cut and replay of the log unchanged at
    /// and past that point). `position` is in the log's numbering (the positions this epoch
    /// delivers). `Ok(None)`: not durable, or nothing before that point to drop.
    pub fn compact_log(
        &mut self,
        view: u64,
        position: u64,
    ) -> Result<Option<crate::log::Compacted>, LogError> {
        match &mut self.log {
            Some(log) => log.compact(view, position),
            None => Ok(None),
        }
    }

    /// Durable mode: [`compact_log`](RoundRobin::compact_log) on a thread of its own
    /// ([`Log::start_compact`]): returns at once, with no file-system sync here; the outcome
    /// comes from [`take_compacted_log`](RoundRobin::take_compacted_log) once a later poll
    /// found it done (the thread wakes the driver). Under [`crate::log::SyncMode::Inline`] it
    /// runs inline, its outcome taken the same way. `Ok(false)`: nothing runs on a thread
    /// (not durable, inline, or one already runs).
    ///
    /// ```
    /// use squall_ordering::{TotalOrder, Upcall};
    /// use squall_round_robin::{Config, FsyncPolicy, Mode, RoundRobin};
    /// use squall_transport::NodeId;
    /// use squall_transport_mem::sim::{Sim, SimConfig};
    ///
    /// let path = std::env::temp_dir().join(format!("rr-start-compact-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let cfg = Config {
    ///     mode: Mode::Durable { path: path.clone(), fsync: FsyncPolicy::EveryBatch },
    ///     ..Config::new(vec![NodeId(0)])
    /// };
    /// let layout = RoundRobin::<squall_transport_mem::sim::SimNode>::layout(&cfg)?;
    /// let (_sim, mut nodes) = Sim::cluster(SimConfig::seeded(1), 1, &layout)?;
    /// let mut rr = RoundRobin::new(nodes.remove(0), cfg)?;
    /// rr.submit(b"one")?;
    /// rr.submit(b"two")?;
    /// let mut up = Vec::new();
    /// while !up.contains(&Upcall::Durable(1)) {
    ///     rr.poll(&mut up);
    /// }
    /// assert!(rr.start_compact_log(0, 1)?); // on the log's compaction thread
    /// let done = loop {
    ///     rr.poll(&mut up); // finds it done (a driver parks until the thread wakes it)
    ///     if let Some(outcome) = rr.take_compacted_log() {
    ///         break outcome?;
    ///     }
    ///     std::thread::yield_now();
    /// };
    /// assert!(done.is_some_and(|c| c.dropped_bytes > 0));
    /// # drop(rr);
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start_compact_log(&mut self, view: u64, position: u64) -> Result<bool, LogError> {
        match &mut self.log {
            Some(log) => log.start_compact(view, position),
            None => Ok(false),
        }
    }

    /// Durable mode: the outcome of the last
    /// [`start_compact_log`](RoundRobin::start_compact_log) once it is done (taken once).
    pub fn take_compacted_log(
        &mut self,
    ) -> Option<Result<Option<crate::log::Compacted>, LogError>> {
        self.log.as_mut().and_then(Log::take_compacted)
    }

    /// Test hook: the next [`start_compact_log`](RoundRobin::start_compact_log)'s thread waits
    /// on the returned sender ([`Log::gate_compaction`]); `None`: not durable.
    #[doc(hidden)]
    pub fn gate_log_compaction(&mut self) -> Option<std::sync::mpsc::Sender<()>> {
        self.log.as_mut().map(Log::gate_compaction)
    }

    /// Every sequence number below this one has been delivered (or skipped as null) here.
    pub fn delivered_seq(&self) -> u64 {
        self.next_seq
    }

    /// Durable mode: every sequence number below this one is in the local log (or was a null),
    /// durable per the fsync policy, and counted as received; 0 in the other modes.
    pub fn logged_seq(&self) -> u64 {
        self.durable_seq
    }

    /// Durable mode under [`FsyncPolicy::EveryRecords`]: how many of this epoch's application
    /// messages this member's log has synced and published as synced (its `rr_synced`
    /// column; [`Upcall::Durable`] reports the delivered positions below the minimum of that
    /// column over the members). `None` under the other policies and modes.
    ///
    /// ```
    /// use squall_ordering::{TotalOrder, Upcall};
    /// use squall_round_robin::{Config, FsyncPolicy, Mode, RoundRobin, SyncMode};
    /// use squall_transport::NodeId;
    /// use squall_transport_mem::sim::{Sim, SimConfig};
    ///
    /// let path = std::env::temp_dir().join(format!("rr-synced-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let cfg = Config {
    ///     mode: Mode::Durable { path: path.clone(), fsync: FsyncPolicy::EveryRecords(2) },
    ///     log_sync: SyncMode::Inline,
    ///     ..Config::new(vec![NodeId(0)])
    /// };
    /// let layout = RoundRobin::<squall_transport_mem::sim::SimNode>::layout(&cfg)?;
    /// let (_sim, mut nodes) = Sim::cluster(SimConfig::seeded(1), 1, &layout)?;
    /// let mut rr = RoundRobin::new(nodes.remove(0), cfg)?;
    /// rr.submit(b"one")?;
    /// let mut up = Vec::new();
    /// while !up.iter().any(|u| matches!(u, Upcall::Deliver(_))) {
    ///     rr.poll(&mut up);
    /// }
    /// // Delivered (written), not synced: one record of the two a sync waits for.
    /// assert_eq!(rr.synced(), Some(0));
    /// assert!(!up.iter().any(|u| matches!(u, Upcall::Durable(_))));
    /// rr.submit(b"two")?;
    /// while !up.contains(&Upcall::Durable(1)) {
    ///     rr.poll(&mut up);
    /// }
    /// assert_eq!(rr.synced(), Some(2));
    /// # drop(rr);
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn synced(&self) -> Option<u64> {
        self.f.synced.map(|_| self.synced_count)
    }

    /// Durable mode: every position below the returned one is *synced* in the log of every
    /// member of the epoch, as far as this member's table shows (a lower bound: the others'
    /// counters reach it late, never early), so a total restart after a power loss runs past
    /// it. [`FsyncPolicy::EveryBatch`]: the next position to deliver (a message is delivered
    /// once every member received it, and received means synced); [`FsyncPolicy::EveryRecords`]:
    /// the epoch's first position plus the minimum of the `rr_synced` column (a suspected row
    /// with its frozen value). `None` under [`FsyncPolicy::Never`] (no member publishes what it
    /// synced) and in the other modes. Positions are the epoch's (as it delivers them).
    ///
    /// ```
    /// use squall_ordering::{TotalOrder, Upcall};
    /// use squall_round_robin::{Config, FsyncPolicy, Mode, RoundRobin, SyncMode};
    /// use squall_transport::NodeId;
    /// use squall_transport_mem::sim::{Sim, SimConfig};
    ///
    /// let path = std::env::temp_dir().join(format!("rr-everywhere-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let cfg = Config {
    ///     mode: Mode::Durable { path: path.clone(), fsync: FsyncPolicy::EveryRecords(8) },
    ///     log_sync: SyncMode::Inline,
    ///     ..Config::new(vec![NodeId(0)])
    /// };
    /// let layout = RoundRobin::<squall_transport_mem::sim::SimNode>::layout(&cfg)?;
    /// let (_sim, mut nodes) = Sim::cluster(SimConfig::seeded(1), 1, &layout)?;
    /// let mut rr = RoundRobin::new(nodes.remove(0), cfg)?;
    /// rr.submit(b"one")?;
    /// let mut up = Vec::new();
    /// while !up.iter().any(|u| matches!(u, Upcall::Deliver(_))) {
    ///     rr.poll(&mut up);
    /// }
    /// // Delivered, not synced: one record of the eight a sync waits for.
    /// assert_eq!(rr.synced_everywhere(), Some(0));
    /// rr.sync_log()?; // synced now, and published
    /// rr.poll(&mut up);
    /// assert_eq!(rr.synced_everywhere(), Some(1));
    /// # drop(rr);
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn synced_everywhere(&self) -> Option<u64> {
        match self.durable_reports {
            DurableReports::Off => None,
            DurableReports::Delivered => Some(self.position),
            DurableReports::Synced => self.f.synced.map(|field| {
                let everywhere = self.sst.min_of(|r| self.sst.get(r, field));
                self.first_position.saturating_add(everywhere)
            }),
        }
    }

    /// Durable mode: `fdatasync`s this member's log now, on the calling thread, whatever the
    /// policy ([`Log::sync_written`]), and publishes what that synced (under
    /// [`FsyncPolicy::EveryRecords`] its `rr_synced` counter, so the other members'
    /// [`synced_everywhere`](RoundRobin::synced_everywhere) moves without waiting for its
    /// next `k`-th record). One `fdatasync` (none if nothing was written); nothing in the
    /// other modes. Example: [`synced_everywhere`](RoundRobin::synced_everywhere).
    pub fn sync_log(&mut self) -> Result<(), LogError> {
        if let Some(log) = &mut self.log {
            log.sync_written()?;
        }
        match self.publish_durable() {
            Ok(_) => Ok(()),
            Err(StopReason::Log(e)) => Err(e),
            // The table refused the push (the epoch is failing anyway): the log is synced.
            Err(_) => Ok(()),
        }
    }

    /// Durable mode under [`FsyncPolicy::EveryRecords`]: asks every member of the epoch (this
    /// one included) to sync its log past `position` (the epoch's numbering, as
    /// [`synced_everywhere`](RoundRobin::synced_everywhere)), without waiting for their next
    /// `k`-th record, so that `synced_everywhere` reaches `position` in a quiet group too.
    /// It raises this member's `rr_sync_wanted` word (monotonic: a lower position than
    /// asked before changes nothing) and returns; no system call here. Each member's
    /// [`poll`](TotalOrder::poll) that finds the column's maximum past what its log synced
    /// or was asked to sync starts one sync of everything its log wrote
    /// ([`Log::start_sync`]: on the log's syncer thread with the default
    /// [`SyncMode::Thread`](crate::SyncMode::Thread), inline with
    /// [`SyncMode::Inline`](crate::SyncMode::Inline)) and publishes it in `rr_synced` once it
    /// returned. A position is delivered only once every member logged it, so one sync per
    /// member covers it. Nothing in the other modes: under [`FsyncPolicy::EveryBatch`]
    /// everything delivered is synced everywhere, and under [`FsyncPolicy::Never`] no member
    /// publishes what it synced.
    ///
    /// ```
    /// use squall_ordering::{TotalOrder, Upcall};
    /// use squall_round_robin::{Config, FsyncPolicy, Mode, RoundRobin, SyncMode};
    /// use squall_transport::NodeId;
    /// use squall_transport_mem::sim::{Sim, SimConfig};
    ///
    /// let path = std::env::temp_dir().join(format!("rr-want-synced-doc-{}", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let cfg = Config {
    ///     mode: Mode::Durable { path: path.clone(), fsync: FsyncPolicy::EveryRecords(8) },
    ///     log_sync: SyncMode::Inline,
    ///     ..Config::new(vec![NodeId(0)])
    /// };
    /// let layout = RoundRobin::<squall_transport_mem::sim::SimNode>::layout(&cfg)?;
    /// let (_sim, mut nodes) = Sim::cluster(SimConfig::seeded(1), 1, &layout)?;
    /// let mut rr = RoundRobin::new(nodes.remove(0), cfg)?;
    /// rr.submit(b"one")?;
    /// let mut up = Vec::new();
    /// while !up.iter().any(|u| matches!(u, Upcall::Deliver(_))) {
    ///     rr.poll(&mut up);
    /// }
    /// assert_eq!(rr.synced_everywhere(), Some(0)); // one record of the eight a sync waits for
    /// rr.want_synced(1);
    /// rr.poll(&mut up); // the poll syncs (inline here) and publishes it
    /// assert_eq!(rr.synced_everywhere(), Some(1));
    /// # drop(rr);
    /// # std::fs::remove_file(&path).ok();
    /// # std::fs::remove_file(squall_round_robin::log::index_path(&path)).ok();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn want_synced(&mut self, position: u64) {
        let Some(field) = self.f.sync_wanted else {
            return;
        };
        let count = position.saturating_sub(self.first_position);
        if count <= self.sst.get(self.sst.my_row(), field) {
            return;
        }
        self.sst.set(field, count);
        // A refused push means the epoch is failing (its next poll stops it); the word stays
        // set in this member's row, which is all its own poll reads.
        if let Err(e) = self.sst.push(field.range()) {
            tracing::debug!(error = %e, "round-robin: the sync-wanted word was not pushed");
        }
    }

    /// [`FsyncPolicy::EveryRecords`]: when a member wants more synced (the maximum of the
    /// `rr_sync_wanted` column, [`want_synced`](RoundRobin::want_synced)) than this member's
    /// log synced or was asked to sync for it, starts a sync of everything the log wrote
    /// ([`Log::start_sync`]: handed to the syncer thread, or inline) and publishes what is
    /// synced; returns whether anything moved. Until this member wrote what is wanted (it has
    /// whenever the wanted position was delivered somewhere), later polls start another sync
    /// once more was written.
    fn answer_sync_wanted(&mut self) -> Result<bool, StopReason> {
        let Some(field) = self.f.sync_wanted else {
            return Ok(false);
        };
        let wanted = self.sst.max_of(|r| self.sst.get(r, field));
        if wanted <= self.sync_started.max(self.synced_count) {
            return Ok(false);
        }
        let Some(log) = &mut self.log else {
            return Ok(false);
        };
        let started = log.start_sync()?;
        if !started && log.compacting() {
            // A compaction's final phase holds the writers (during its copy a sync starts
            // as usual): its swap syncs what was written before the hold; a later poll asks
            // again for the rest.
            return self.publish_durable();
        }
        self.sync_started = self.log_position.saturating_sub(self.first_position);
        if started {
            tracing::debug!(
                wanted,
                covers = self.sync_started,
                "round-robin: a sync started for a member that wants it"
            );
        }
        Ok(self.publish_durable()? || started)
    }

    /// Durable mode: every sequence number below this one is written to the local log (or
    /// was a null); at least [`logged_seq`](RoundRobin::logged_seq), above it while the sync
    /// of a batch is in flight on the log's syncer thread; 0 in the other modes.
    pub fn written_seq(&self) -> u64 {
        self.written_seq
    }

    /// Test hook: the durable log's syncer thread waits for a message on the returned sender
    /// (or its drop) before each `fdatasync` (`false` fails it: [`Log::gate_syncer`]); `None`
    /// when not durable.
    #[doc(hidden)]
    pub fn gate_log_syncer(&mut self) -> Option<std::sync::mpsc::Sender<bool>> {
        self.log.as_mut().map(Log::gate_syncer)
    }

    /// What this member publishes as received, per sender rank (its `rr_received` row). In
    /// durable mode these are the messages below [`logged_seq`](RoundRobin::logged_seq).
    pub fn published_received(&self) -> Vec<u64> {
        (0..self.senders.len())
            .map(|k| {
                self.sst
                    .get_at(self.sst.my_row(), self.f.received, k)
                    .unwrap_or(0)
            })
            .collect()
    }

    /// The messages (data and nulls) this member has sent.
    pub fn sent(&self) -> u64 {
        self.next_index
    }

    fn stop(&mut self, why: StopReason) {
        if !self.wedged {
            tracing::warn!(me = %self.me(), reason = %why, "round-robin: wedged");
            self.wedged = true;
            self.stopped = Some(why);
        }
    }

    fn submit_inner(&mut self, payload: &[u8]) -> Result<(), SubmitError> {
        if self.wedged {
            return Err(SubmitError::Wedged);
        }
        let Some(rank) = self.my_rank else {
            return Err(SubmitError::NotASender(format!(
                "{} is not among the senders {:?}",
                self.me(),
                self.senders
            )));
        };
        if payload.len() > self.cfg.max_payload {
            return Err(SubmitError::TooLarge {
                len: payload.len(),
                max: self.cfg.max_payload,
            });
        }
        let window = self.cfg.window as u64;
        if self.cfg.mode.is_ordered() && self.next_index >= window {
            // Derecho's rule: message i may go once message i - window is delivered everywhere.
            let ns = self.senders.len() as u64;
            let seq = (self.next_index - window) * ns + rank as u64;
            if self.sst.min(self.f.delivered) <= seq {
                return Err(SubmitError::WindowFull);
            }
        }
        if payload.len() <= self.cfg.slot_size {
            self.scratch.clear();
            self.scratch.extend_from_slice(&KIND_DATA.to_le_bytes());
            self.scratch.extend_from_slice(payload);
            self.smc
                .send(&mut self.sst, &self.scratch)
                .map_err(smc_submit_error)?;
        } else {
            self.send_large(rank, payload)?;
        }
        if let Some(own) = &mut self.own {
            own.push_back((self.next_index, payload.to_vec()));
        }
        self.next_index += 1;
        Ok(())
    }

    /// Writes a large payload into this sender's buffer for its large-message number at the
    /// members its relay plan names (every member in small groups; its binomial-tree children
    /// or its binomial-pipeline transfers otherwise), chunk by chunk, each chunk followed by its
    /// arrival marker (FIFO per link puts the data first), then announces it with a slot.
    /// Other members forward each chunk once its marker lands.
    fn send_large(&mut self, rank: usize, payload: &[u8]) -> Result<(), SubmitError> {
        let window = self.cfg.window as u64;
        if self.smc.in_flight(&self.sst) >= window {
            return Err(SubmitError::WindowFull);
        }
        let j = self.next_large;
        // The buffer for j was last used by j - window: every member must have copied it out.
        let done = self
            .sst
            .min_of_unsuspected(|r| self.sst.get_at(r, self.f.large_done, rank).unwrap_or(0));
        if j >= done + window {
            return Err(SubmitError::WindowFull);
        }
        let Some(region) = self.large.clone() else {
            return Err(SubmitError::TooLarge {
                len: payload.len(),
                max: self.cfg.slot_size,
            });
        };
        // This number is used now, whether or not the writes below all post: a retry takes a
        // fresh one, so no member can mix chunks of two attempts.
        self.next_large += 1;
        let base = self.buffer(rank, j);
        copy_in_words(region.words(), base / 8, payload);
        let mark = marker(j, payload.len());
        let chunks = payload.len().div_ceil(self.cfg.chunk_size);
        let cap = self.cfg.large_cap();
        for c in 0..chunks {
            region.store((base + cap) / 8 + c, mark);
        }
        for (peer, c) in self.plans[rank].transfers(chunks) {
            self.post_chunk(peer, base, c, payload.len())
                .map_err(|e| match e {
                    PostError::QueueFull { .. } => SubmitError::WindowFull,
                    e => SubmitError::Stopped(e.to_string()),
                })?;
        }
        let mut desc = (KIND_LARGE | ((payload.len() as u64) << 8))
            .to_le_bytes()
            .to_vec();
        desc.extend_from_slice(&j.to_le_bytes());
        self.smc
            .send(&mut self.sst, &desc)
            .map_err(smc_submit_error)?;
        self.stats.large_sent += 1;
        self.stats.large_chunks += chunks as u64;
        Ok(())
    }

    /// The byte offset of sender `rank`'s buffer for large message `j`.
    fn buffer(&self, rank: usize, j: u64) -> usize {
        let window = self.cfg.window as u64;
        (rank * self.cfg.window + (j % window) as usize) * self.cfg.large_stride()
    }

    /// Writes chunk `c` of the message in the buffer at `base` (`len` bytes in all) to `peer`,
    /// then the chunk's marker word; or, while `peer` is not linked to this epoch, holds the
    /// write back for [`link_rows`](RoundRobin::link_rows) to post once it is.
    fn post_chunk(
        &mut self,
        peer: NodeId,
        base: usize,
        c: usize,
        len: usize,
    ) -> Result<(), PostError> {
        if let Some(held) = (self.sst.row_of(peer)).and_then(|r| self.unlinked[r].as_mut()) {
            held.push_back((base, c, len));
            self.stats.chunk_writes_held += 1;
            return Ok(());
        }
        self.write_chunk(peer, base, c, len)
    }

    /// Posts [`post_chunk`](RoundRobin::post_chunk)'s two writes to `peer`.
    fn write_chunk(
        &mut self,
        peer: NodeId,
        base: usize,
        c: usize,
        len: usize,
    ) -> Result<(), PostError> {
        let region = self.cfg.large_region;
        let at = c * self.cfg.chunk_size;
        let n = self.cfg.chunk_size.min(len - at).div_ceil(8) * 8;
        let t = self.sst.transport_mut();
        t.write(
            peer,
            LocalSlice::new(region, base + at, n),
            RemoteAddr::new(region, base + at),
            Signal::Unsignaled,
        )?;
        let m = base + self.cfg.large_cap() + 8 * c;
        t.write(
            peer,
            LocalSlice::new(region, m, 8),
            RemoteAddr::new(region, m),
            Signal::Unsignaled,
        )?;
        self.stats.chunk_writes += 1;
        Ok(())
    }

    /// Brings up the rows whose member this epoch started without (absent, or a new
    /// incarnation it waits for) once the table linked them (no longer absent): checks the
    /// member's large-message region, now known, and posts the chunk writes held back for it,
    /// in order. A region too small suspects the member (as the table does for its own
    /// region). Returns whether it posted anything or still holds writes back (the link's
    /// queue was full).
    ///
    /// Safe to post late: a held chunk's source is this member's buffer for that message,
    /// which is not reused before every unsuspected member copied the message out (the
    /// window's check in [`send_large`](RoundRobin::send_large) counts the late member's
    /// `rr_large_done`, 0 until it writes) and each chunk reaches a member from one member
    /// only (the relay plan), so the late member cannot complete the message without this
    /// write.
    fn link_rows(&mut self) -> Result<bool, StopReason> {
        let mut busy = false;
        for row in 0..self.unlinked.len() {
            if self.unlinked[row].is_none() || self.sst.is_absent(row) {
                continue;
            }
            let peer = self.sst.member(row);
            if !self.sst.is_suspected(row) && self.large.is_some() {
                let need = Self::large_len(&self.cfg);
                let have = (self.sst.transport())
                    .remote_region_len(peer, self.cfg.large_region)
                    .unwrap_or(0);
                if have < need {
                    tracing::error!(me = %self.me(), %peer, have, need, "round-robin: a late member's large-message region is too small; suspecting it");
                    self.unlinked[row] = None;
                    self.sst.suspect(peer).map_err(StopReason::Sst)?;
                    continue;
                }
            }
            while let Some(&(base, c, len)) = self.unlinked[row].as_ref().and_then(VecDeque::front)
            {
                if self.sst.is_suspected(row) {
                    break; // the epoch wedges: nothing more goes to it
                }
                match self.write_chunk(peer, base, c, len) {
                    Ok(()) => {
                        busy = true;
                        if let Some(held) = &mut self.unlinked[row] {
                            held.pop_front();
                        }
                    }
                    Err(PostError::QueueFull { .. }) => return Ok(true),
                    Err(e) => return Err(StopReason::Relay(e.to_string())),
                }
            }
            let dropped = self.unlinked[row].as_ref().map_or(0, VecDeque::len);
            if dropped > 0 {
                tracing::debug!(me = %self.me(), %peer, dropped, "round-robin: a member not linked at the epoch's start is suspected; its held chunk writes are dropped");
            } else {
                tracing::debug!(me = %self.me(), %peer, "round-robin: a member not linked at the epoch's start is linked");
            }
            self.unlinked[row] = None;
        }
        Ok(busy)
    }

    /// Posts this member's transfers of every large message that has arrived (or is
    /// arriving), message by message in each sender's order, each transfer as soon as its
    /// chunk's marker has landed here. Transfers go in schedule order when their chunks are
    /// there, but one whose chunk is late does not hold up later ones: without step barriers a
    /// strict order would chain every step of the pipeline behind the slowest member's poll.
    fn relay(&mut self) -> Result<bool, StopReason> {
        let Some(region) = self.large.clone() else {
            return Ok(false);
        };
        let mut busy = false;
        for k in 0..self.senders.len() {
            if self.plans[k].forwards_nothing() || Some(k) == self.my_rank {
                self.relay[k].0.clear();
                continue;
            }
            while let Some(&(j, len)) = self.relay[k].0.front() {
                let base = self.buffer(k, j);
                let mark = marker(j, len);
                let markers = (base + self.cfg.large_cap()) / 8;
                let list = self.plans[k].transfers(len.div_ceil(self.cfg.chunk_size));
                let mut posted = std::mem::take(&mut self.relay[k].1);
                posted.resize(list.len(), false);
                let mut all = true;
                for (&(peer, c), done) in list.iter().zip(posted.iter_mut()) {
                    if *done {
                        continue;
                    }
                    if region.load(markers + c) != mark {
                        all = false;
                        continue;
                    }
                    match self.post_chunk(peer, base, c, len) {
                        Ok(()) => *done = true,
                        Err(PostError::QueueFull { .. }) => {
                            all = false;
                            break;
                        }
                        Err(e) => return Err(StopReason::Relay(e.to_string())),
                    }
                    busy = true;
                }
                if !all {
                    self.relay[k].1 = posted;
                    break;
                }
                self.relay[k].0.pop_front();
            }
        }
        Ok(busy)
    }

    /// Receives every new slot of every sender into its pending queue, then completes what it
    /// can.
    fn receive(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> Result<bool, StopReason> {
        let mut bad: Option<StopReason> = None;
        let max_payload = self.cfg.max_payload as u64;
        let large_on = self.large.is_some();
        let senders = &self.senders;
        let awaiting = &mut self.awaiting;
        let relay = &mut self.relay;
        let got = self.smc.receive(&mut self.sst, |from, index, m| {
            if bad.is_some() {
                return;
            }
            let malformed = |why| StopReason::Malformed {
                sender: from,
                index,
                why,
            };
            let Some(rank) = senders.iter().position(|&s| s == from) else {
                bad = Some(malformed("the sender is not a sender of this group"));
                return;
            };
            let word = |at: usize| {
                m.get(at..at + 8).map(|b| {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(b);
                    u64::from_le_bytes(w)
                })
            };
            let Some(header) = word(0) else {
                bad = Some(malformed("shorter than the 8-byte header"));
                return;
            };
            let pending = match header & 0xff {
                KIND_DATA if header == KIND_DATA => Pending::Ready(Entry::Data(m[8..].to_vec())),
                KIND_NULLS if header >> 8 > 0 && m.len() == 8 => Pending::Ready(Entry::Nulls {
                    first: 0, // set when it completes
                    count: header >> 8,
                }),
                KIND_LARGE if m.len() == 16 && large_on && header >> 8 <= max_payload => {
                    let j = word(8).unwrap_or(0);
                    let len = (header >> 8) as usize;
                    relay[rank].0.push_back((j, len));
                    Pending::Large { j, len }
                }
                _ => {
                    bad = Some(malformed("unknown or malformed header"));
                    return;
                }
            };
            awaiting[rank].push_back(pending);
        });
        if let Some(b) = bad {
            return Err(b);
        }
        let got = got? > 0;
        let relayed = self.relay()?;
        let completed = self.complete(upcalls)?;
        Ok(got || relayed || completed)
    }

    /// Moves every arrived message whose data is complete, in each sender's order, to its
    /// delivery queue (or, unordered, delivers it), and publishes the received counters.
    fn complete(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> Result<bool, StopReason> {
        let ordered = self.cfg.mode.is_ordered();
        let durable = self.log.is_some();
        let mut changed = false;
        let mut large_changed = false;
        for k in 0..self.senders.len() {
            loop {
                let entry = match self.awaiting[k].front() {
                    None => break,
                    Some(Pending::Ready(_)) => match self.awaiting[k].pop_front() {
                        Some(Pending::Ready(e)) => e,
                        _ => break,
                    },
                    Some(&Pending::Large { j, len }) => {
                        let Some(region) = &self.large else { break };
                        let base = self.buffer(k, j);
                        let mark = marker(j, len);
                        let chunks = len.div_ceil(self.cfg.chunk_size);
                        let first_marker = (base + self.cfg.large_cap()) / 8;
                        if !(0..chunks).all(|c| region.load(first_marker + c) == mark) {
                            break;
                        }
                        let mut out = vec![0u8; len];
                        copy_out_words(region.words(), base / 8, &mut out);
                        self.awaiting[k].pop_front();
                        self.large_done[k] = j + 1;
                        large_changed = true;
                        Entry::Data(out)
                    }
                };
                changed = true;
                match entry {
                    Entry::Nulls { count, .. } => {
                        let first = self.received[k];
                        self.received[k] += count;
                        if durable {
                            self.staged[k].push_back(Entry::Nulls { first, count });
                        } else if ordered {
                            self.queues[k].push_back(Entry::Nulls { first, count });
                        }
                    }
                    Entry::Data(payload) => {
                        self.received[k] += 1;
                        if durable {
                            self.staged[k].push_back(Entry::Data(payload));
                        } else if ordered {
                            self.queues[k].push_back(Entry::Data(payload));
                        } else {
                            upcalls.push(Upcall::Deliver(Delivery {
                                position: self.position,
                                sender: self.senders[k],
                                payload,
                            }));
                            self.position += 1;
                            self.stats.delivered += 1;
                        }
                    }
                }
            }
        }
        if large_changed {
            publish(
                &mut self.sst,
                self.f.large_done,
                self.large_done.iter().copied(),
            )?;
        }
        if durable {
            // What counts as received is what the log holds.
            return Ok(self.log_prefix()? || changed);
        }
        if changed {
            publish(
                &mut self.sst,
                self.f.received,
                self.received.iter().copied(),
            )?;
        }
        Ok(changed)
    }

    /// Durable mode: appends, in sequence order, every message of the gap-free prefix received
    /// here (nulls skipped), writes the batch and starts its sync per the fsync policy — once
    /// per call, never per message ([`Log::flush`], under the logged frontier as its mark) —
    /// and publishes as received what the log reports durable
    /// ([`publish_durable`](RoundRobin::publish_durable)). With the syncer thread the batch
    /// is durable at a later poll (the syncer wakes the driver); inline, at once. A message
    /// is thus stable (the column minimum passes it) only once it is durable in every
    /// member's log, and every log is a prefix of the agreed order: a message is logged at
    /// its final place, after everything before it.
    fn log_prefix(&mut self) -> Result<bool, StopReason> {
        let Some(log) = &mut self.log else {
            return Ok(false);
        };
        let ns = self.senders.len() as u64;
        let start = self.written_seq;
        let first_logged = self.log_position;
        loop {
            let k = (self.written_seq % ns) as usize;
            let i = self.written_seq / ns;
            let Some(head) = self.staged[k].front() else {
                break;
            };
            match *head {
                Entry::Nulls { first, count } => {
                    // Delivery walks the run itself; hand it over when the log first reaches it.
                    if i == first {
                        self.queues[k].push_back(Entry::Nulls { first, count });
                    }
                    if i + 1 >= first + count {
                        self.staged[k].pop_front();
                    }
                }
                Entry::Data(_) => {
                    let Some(Entry::Data(payload)) = self.staged[k].pop_front() else {
                        break;
                    };
                    log.append_parts(
                        self.cfg.view,
                        self.written_seq,
                        self.log_position,
                        self.senders[k],
                        &payload,
                    )?;
                    self.log_position += 1;
                    self.stats.logged += 1;
                    self.queues[k].push_back(Entry::Data(payload));
                }
            }
            self.written_seq += 1;
        }
        let flushed = self.written_seq != start;
        if flushed {
            log.flush(self.written_seq)?;
            self.stats.log_batches += 1;
            if self.durable_reports == DurableReports::Synced && self.log_position != first_logged {
                self.unsynced
                    .push_back((self.written_seq, self.log_position));
            }
        }
        Ok(self.publish_durable()? || flushed)
    }

    /// Durable mode: publishes as received the prefix the log reports durable, if it moved
    /// ([`Log::durable_mark`]: never waits), and under [`FsyncPolicy::EveryRecords`] as
    /// synced (`rr_synced`) the application messages the log reports synced
    /// ([`Log::synced_mark`]), if that moved.
    fn publish_durable(&mut self) -> Result<bool, StopReason> {
        let Some(log) = &mut self.log else {
            return Ok(false);
        };
        let Some(mark) = log.durable_mark()? else {
            return Ok(false);
        };
        let synced = log.synced_mark();
        let mut moved = false;
        if mark > self.durable_seq {
            self.durable_seq = mark;
            let counts = seq_prefix_counts(mark, self.senders.len());
            publish(&mut self.sst, self.f.received, counts.into_iter())?;
            moved = true;
        }
        if let (Some(field), Some(synced)) = (self.f.synced, synced) {
            let mut next = None;
            while let Some(&(_, p)) = self.unsynced.front().filter(|(m, _)| *m <= synced) {
                self.unsynced.pop_front();
                next = Some(p);
            }
            if let Some(p) = next {
                self.synced_count = p - self.first_position;
                self.sst.set(field, self.synced_count);
                self.sst.push(field.range()).map_err(StopReason::Sst)?;
                moved = true;
            }
        }
        Ok(moved)
    }

    /// Durable mode: waits until every batch written is durable ([`Log::sync`]) and publishes
    /// it as received. The wedge's wait.
    fn settle_log(&mut self) -> Result<(), LogError> {
        if let Some(log) = &mut self.log {
            log.sync()?;
        }
        match self.publish_durable() {
            Ok(_) => Ok(()),
            Err(StopReason::Log(e)) => Err(e),
            // The table refused the push (the epoch is wedging anyway): what the log holds
            // is what the wedge reports.
            Err(_) => Ok(()),
        }
    }

    /// Sends one run of nulls when another sender's messages would otherwise wait on this one.
    fn send_nulls(&mut self) -> Result<bool, StopReason> {
        let Some(me) = self.my_rank else {
            return Ok(false);
        };
        let mut need = 0;
        for (k, &c) in self.received.iter().enumerate() {
            // The last message received from k has seq (c-1)·n + k; every message of this
            // sender below it must exist.
            let n = match k.cmp(&me) {
                std::cmp::Ordering::Greater => c,
                std::cmp::Ordering::Less => c.saturating_sub(1),
                std::cmp::Ordering::Equal => 0,
            };
            need = need.max(n);
        }
        if need <= self.next_index {
            return Ok(false);
        }
        let count = need - self.next_index;
        let header = KIND_NULLS | (count << 8);
        match self.smc.send(&mut self.sst, &header.to_le_bytes()) {
            Ok(_) => {
                self.next_index = need;
                self.stats.nulls_sent += count;
                self.stats.null_runs_sent += 1;
                Ok(true)
            }
            Err(SmcError::WindowFull { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Delivers every stable message in sequence order.
    fn deliver(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> Result<bool, StopReason> {
        let mut stable = vec![0u64; self.senders.len()];
        for (k, s) in stable.iter_mut().enumerate() {
            // Suspected rows count with their frozen values: nothing past the stable prefix.
            *s = self
                .sst
                .min_of(|r| self.sst.get_at(r, self.f.received, k).unwrap_or(0));
        }
        let moved = self.deliver_bounded(&stable, upcalls);
        if moved {
            self.sst.set(self.f.delivered, self.next_seq);
            self.sst
                .push(self.f.delivered.range())
                .map_err(StopReason::Sst)?;
        }
        Ok(self.report_synced(upcalls) || moved)
    }

    /// [`DurableReports::Synced`]: reports as durable the delivered positions below the
    /// minimum of `rr_synced` over the epoch's rows (a suspected row counts with its frozen
    /// value: never more than it synced), if that moved; returns whether it did.
    fn report_synced(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> bool {
        let Some(field) = self.f.synced else {
            return false;
        };
        let everywhere = self.sst.min_of(|r| self.sst.get(r, field));
        let end = self
            .position
            .min(self.first_position.saturating_add(everywhere));
        if end <= self.durable_end {
            return false;
        }
        self.durable_end = end;
        upcalls.push(Upcall::Durable(end - 1));
        true
    }

    /// Delivers, in sequence order, every queued message below `bound` (per sender rank, how
    /// many of its messages may be delivered); returns whether the sequence moved.
    fn deliver_bounded(&mut self, bound: &[u64], upcalls: &mut Vec<Upcall<Delivery>>) -> bool {
        let ns = self.senders.len() as u64;
        let start = self.next_seq;
        let mut batch = 0u64;
        let stable = bound;
        loop {
            let k = (self.next_seq % ns) as usize;
            let i = self.next_seq / ns;
            if stable[k] <= i {
                break;
            }
            let Some(head) = self.queues[k].front_mut() else {
                break;
            };
            match head {
                Entry::Nulls { first, count } => {
                    if i + 1 >= *first + *count {
                        self.queues[k].pop_front();
                    }
                    self.stats.nulls_skipped += 1;
                }
                Entry::Data(_) => {
                    let Some(Entry::Data(payload)) = self.queues[k].pop_front() else {
                        break;
                    };
                    if Some(k) == self.my_rank
                        && let Some(own) = &mut self.own
                    {
                        own.pop_front();
                    }
                    upcalls.push(Upcall::Deliver(Delivery {
                        position: self.position,
                        sender: self.senders[k],
                        payload,
                    }));
                    self.position += 1;
                    batch += 1;
                }
            }
            self.next_seq += 1;
        }
        if batch > 0 {
            self.stats.delivered += batch;
            self.stats.delivery_batches += 1;
            self.stats.max_batch = self.stats.max_batch.max(batch);
            if self.durable_reports == DurableReports::Delivered {
                // Stable means in every member's log (the received column counts only what
                // is logged, and under `EveryBatch` logged means synced): what is delivered
                // is durable.
                upcalls.push(Upcall::Durable(self.position - 1));
            }
        }
        self.next_seq != start
    }

    fn step(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> Result<bool, StopReason> {
        let progress = self.sst.poll_once()?;
        let linked = self.link_rows()?;
        if let Some(&s) = self.sst.suspects().first() {
            return Err(StopReason::Suspected(s));
        }
        let mut busy = progress.is_busy() || linked;
        busy |= self.smc.flush(&mut self.sst)?;
        busy |= self.receive(upcalls)?;
        busy |= self.answer_sync_wanted()?;
        if self.cfg.mode.is_ordered() {
            busy |= self.send_nulls()?;
            busy |= self.deliver(upcalls)?;
        }
        busy |= self.smc.flush(&mut self.sst)?;
        Ok(busy || self.smc.unpublished())
    }
}

/// How one member forwards one sender's large messages.
#[derive(Clone, Debug)]
enum RelayPlan {
    /// Every chunk to each of these members (the sender's direct sends in small groups, a
    /// member's children in the binomial tree).
    Children(Vec<NodeId>),
    /// RDMC's binomial pipeline (hypercube with twins): this member is rank `vertex`,
    /// `members[r]` being rank `r` (rotated so that the sender is 0).
    Pipeline { vertex: usize, members: Vec<NodeId> },
}

impl RelayPlan {
    /// This member's writes of a `chunks`-chunk message, in order: (peer, chunk).
    fn transfers(&self, chunks: usize) -> Vec<(NodeId, usize)> {
        match self {
            RelayPlan::Children(children) => (0..chunks)
                .flat_map(|c| children.iter().map(move |&p| (p, c)))
                .collect(),
            RelayPlan::Pipeline { vertex, members } => {
                binomial_pipeline(*vertex, members.len(), chunks)
                    .into_iter()
                    .map(|(to, c)| (members[to], c))
                    .collect()
            }
        }
    }

    fn forwards_nothing(&self) -> bool {
        matches!(self, RelayPlan::Children(c) if c.is_empty())
    }
}

/// How this member forwards `sender`'s large messages. Members are rotated so that the
/// sender is 0. In a group smaller than `binomial_from` the sender writes to every other
/// member and nobody forwards. In larger groups: RDMC's binomial pipeline (any size, with
/// twins where it is not a power of two) when so configured; otherwise the binomial tree
/// rooted at the sender, member `r`
/// forwarding to `r + 2^i` for every `2^i > r`.
fn relay_plan<T: Transport>(sst: &Sst<T>, sender: NodeId, cfg: &Config) -> RelayPlan {
    let n = sst.rows();
    let Some(root) = sst.row_of(sender) else {
        return RelayPlan::Children(Vec::new());
    };
    let r = (sst.my_row() + n - root) % n;
    let rotated = |d: usize| sst.member((root + d) % n);
    if n < cfg.binomial_from {
        return RelayPlan::Children(if r == 0 {
            (1..n).map(rotated).collect()
        } else {
            Vec::new()
        });
    }
    if cfg.relay == Relay::BinomialPipeline {
        return RelayPlan::Pipeline {
            vertex: r,
            members: (0..n).map(rotated).collect(),
        };
    }
    let mut out = Vec::new();
    let mut b = 1;
    while r + b < n {
        if b > r {
            out.push(rotated(r + b));
        }
        b *= 2;
    }
    RelayPlan::Children(out)
}

/// Copies `src` into `words` from word `first` on, a whole word at a time (release), the last
/// word zero-padded. For a large-message buffer, whose words only this member writes; about
/// nine times faster for 1 MiB than the byte-offset `word::copy_in`.
fn copy_in_words(words: &[AtomicU64], first: usize, src: &[u8]) {
    let mut chunks = src.chunks_exact(8);
    for (w, c) in words[first..].iter().zip(&mut chunks) {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        w.store(u64::from_le_bytes(b), Ordering::Release);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        words[first + src.len() / 8].store(u64::from_le_bytes(b), Ordering::Release);
    }
}

/// Copies `dst.len()` bytes out of `words` from word `first` on, a whole word at a time
/// (acquire), as `word::copy_out` does for a word-aligned start, without its per-byte
/// bookkeeping.
fn copy_out_words(words: &[AtomicU64], first: usize, dst: &mut [u8]) {
    let last = first + dst.len() / 8;
    let mut chunks = dst.chunks_exact_mut(8);
    for (c, w) in (&mut chunks).zip(&words[first..]) {
        c.copy_from_slice(&w.load(Ordering::Acquire).to_le_bytes());
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let n = rest.len();
        rest.copy_from_slice(&words[last].load(Ordering::Acquire).to_le_bytes()[..n]);
    }
}

/// Sets this member's entries of `field` to `values` and pushes the field to every member.
fn publish<T: Transport>(
    sst: &mut Sst<T>,
    field: Vector,
    values: impl Iterator<Item = u64>,
) -> Result<(), StopReason> {
    for (k, v) in values.enumerate() {
        sst.set_at(field, k, v).map_err(StopReason::Sst)?;
    }
    sst.push(field.range()).map_err(StopReason::Sst)
}

fn smc_submit_error(e: SmcError) -> SubmitError {
    match e {
        SmcError::WindowFull { .. } => SubmitError::WindowFull,
        SmcError::TooLarge { len, max } => SubmitError::TooLarge { len, max },
        other => SubmitError::Stopped(other.to_string()),
    }
}

impl<T: Transport> TotalOrder for RoundRobin<T> {
    fn me(&self) -> NodeId {
        self.sst.member(self.sst.my_row())
    }

    fn submit(&mut self, payload: &[u8]) -> Result<(), SubmitError> {
        self.submit_inner(payload)
    }

    fn poll(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> bool {
        if self.wedged {
            // Keep the table alive (heartbeats, suspicion gossip) but deliver nothing more.
            let _ = self.sst.poll_once();
            if !self.reported_wedge {
                self.reported_wedge = true;
                upcalls.push(Upcall::Wedged);
                return true;
            }
            return false;
        }
        match self.step(upcalls) {
            Ok(busy) => busy,
            Err(why) => {
                self.stop(why);
                self.reported_wedge = true;
                upcalls.push(Upcall::Wedged);
                true
            }
        }
    }

    fn wait(&mut self, timeout: Duration) {
        self.sst.wait(timeout);
    }

    fn waker(&self) -> squall_transport::Waker {
        self.sst.transport().waker()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declare_sizes_the_received_vector_by_senders() {
        let cfg = Config {
            senders: vec![NodeId(1)],
            ..Config::new(vec![NodeId(0), NodeId(1), NodeId(2)])
        };
        let (_, f) = declare(&cfg).expect("valid");
        assert_eq!(f.received.len(), 1);
    }

    /// The word copies of large buffers agree with the transport's byte-offset copies for every
    /// length around a word boundary, and pad the last word with zeros.
    #[test]
    fn word_copies_match_the_transport_copies() {
        use squall_transport::word::{copy_in, copy_out};
        for len in 0..40usize {
            let src: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37) ^ 0x5a).collect();
            let words: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(u64::MAX)).collect();
            copy_in_words(&words, 2, &src);
            let reference: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(u64::MAX)).collect();
            copy_in(&reference, 16, &src);
            let mut ours = vec![0u8; len];
            let mut theirs = vec![0u8; len];
            copy_out_words(&words, 2, &mut ours);
            copy_out(&reference, 16, &mut theirs);
            assert_eq!(ours, src, "len {len}");
            assert_eq!(theirs, src, "len {len}");
            let used = len.div_ceil(8);
            if len % 8 != 0 {
                let last = words[2 + used - 1].load(Ordering::Acquire).to_le_bytes();
                assert!(
                    last[len % 8..].iter().all(|&b| b == 0),
                    "len {len}: padding"
                );
            }
            assert_eq!(
                words[2 + used].load(Ordering::Acquire),
                u64::MAX,
                "len {len}"
            );
            assert_eq!(words[1].load(Ordering::Acquire), u64::MAX);
        }
    }

    /// The relay plans: for every group size, sender and relay kind, every member but the
    /// sender receives each chunk exactly once and the sender none; below `binomial_from` the
    /// sender writes every chunk to everyone; above it the tree's sender writes each chunk
    /// `ceil(log2 n)` times, while the binomial pipeline's (every size, twins where it is not
    /// a power of two) writes `chunks + floor(log2 n) - 1` chunks in all.
    #[test]
    fn relay_plans_deliver_every_chunk_exactly_once() {
        use squall_transport_mem::sim::{Sim, SimConfig, SimNode};
        let chunks = 5;
        for relay in [Relay::Tree, Relay::BinomialPipeline] {
            for n in 1..=9usize {
                let cfg = Config {
                    max_payload: 4096,
                    relay,
                    ..Config::new((0..n as u32).map(NodeId).collect())
                };
                let layout = RoundRobin::<SimNode>::layout(&cfg).expect("layout");
                let (_sim, nodes) = Sim::cluster(SimConfig::seeded(1), n, &layout).expect("sim");
                let groups: Vec<RoundRobin<SimNode>> = nodes
                    .into_iter()
                    .map(|t| RoundRobin::new(t, cfg.clone()).expect("group"))
                    .collect();
                for k in 0..n {
                    let mut got = vec![vec![0usize; chunks]; n];
                    for g in &groups {
                        for (peer, c) in g.plans[k].transfers(chunks) {
                            got[peer.index()][c] += 1;
                        }
                    }
                    for (m, per_chunk) in got.iter().enumerate() {
                        let want = usize::from(m != k);
                        assert!(
                            per_chunk.iter().all(|&x| x == want),
                            "{relay:?} n={n} sender {k}: member {m} got {per_chunk:?}"
                        );
                    }
                    let root_writes = groups[k].plans[k].transfers(chunks).len();
                    let log2 = (usize::BITS - (n - 1).leading_zeros()) as usize;
                    let floor_log2 = (usize::BITS - 1 - n.leading_zeros()) as usize;
                    let want = if n < cfg.binomial_from {
                        (n - 1) * chunks
                    } else if relay == Relay::BinomialPipeline {
                        chunks + floor_log2 - 1
                    } else {
                        log2 * chunks
                    };
                    assert_eq!(root_writes, want, "{relay:?} n={n} sender {k}");
                }
            }
        }
    }
}
