//! The table itself: one row per member in one registered region, single writer per row, typed
//! field access, `push`, reducers over columns and knowledge helpers.

use std::collections::HashSet;
use std::time::Duration;

use squall_transport::{
    Event, FailureCause, LocalSlice, NodeId, OpId, Region, RegionId, RemoteAddr, Signal, Time,
    Transport,
};

use crate::error::{SetupError, SstError};
use crate::failure::Suspicion;
use crate::predicate::Registry;
use crate::schema::{Bytes, Counter, FieldRange, Flag, Schema, Vector};

/// How a table is set up over a transport.
///
/// ```
/// use squall_sst::SstConfig;
/// use squall_transport::{NodeId, RegionId};
/// let cfg = SstConfig::new(RegionId(0), vec![NodeId(0), NodeId(1), NodeId(2)]);
/// assert!(cfg.partition_safety);
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SstConfig {
    /// The region that holds the table on every member (same id everywhere).
    pub region: RegionId,
    /// The members, in row order; the same list on every member, including the local node.
    pub members: Vec<NodeId>,
    /// How often the local heartbeat is bumped and pushed with one signaled write per peer.
    pub heartbeat_interval: Duration,
    /// A peer is suspected when its heartbeat has not changed, or a signaled write to it has not
    /// completed, for this long. Must exceed `heartbeat_interval`.
    pub suspicion_timeout: Duration,
    /// Stop with [`SstError::Partitioned`] when this member suspects a majority (default on).
    pub partition_safety: bool,
    /// A suspicion this member detects itself (transport failure or timeout) of a *lower-ranked*
    /// member (an earlier row) is published only after this many heartbeat intervals, and
    /// dropped if meanwhile this member learns that it is suspected itself
    /// ([`Sst::is_accused`]). The row is frozen at once either way. This breaks the tie when both
    /// ends of a cut link time out together: the lower-ranked end's suspicion spreads, the
    /// higher-ranked end is cut by everyone and keeps quiet, so the group loses one member, not
    /// two. The cost: a failure that only higher-ranked members detect spreads that much later
    /// (a crash is detected by every member on its own). `0` publishes at once. Default 2.
    pub accusation_delay_intervals: u32,
    /// What the failure detector uses: heartbeats and timeouts plus transport failures
    /// (default), or transport failures only ([`Detector::TransportOnly`]).
    pub detector: Detector,
}

/// The failure detector of an SST.
///
/// ```
/// use squall_sst::{Detector, SstConfig};
/// use squall_transport::{NodeId, RegionId};
/// let cfg = SstConfig {
///     detector: Detector::TransportOnly,
///     ..SstConfig::new(RegionId(0), vec![NodeId(0), NodeId(1)])
/// };
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Detector {
    /// Bump and push the heartbeat every `heartbeat_interval` with one signaled write per peer;
    /// suspect a peer whose heartbeat does not move, or whose signaled write does not complete,
    /// for `suspicion_timeout`; and suspect on every transport failure.
    #[default]
    Heartbeats,
    /// Post no heartbeats and suspect nobody on a timeout; suspect only on transport failures
    /// ([`Event::PeerFailed`], failed completions), on gossip and on [`Sst::suspect`]. For tables
    /// whose failure detection is someone else's (a membership epoch, whose GMS table detects
    /// failures and declares them to the epoch's transport). `heartbeat_interval` then only
    /// scales [`accusation_delay`](SstConfig::accusation_delay).
    TransportOnly,
}

impl SstConfig {
    /// Defaults: 10 ms heartbeat, 100 ms suspicion timeout, partition safety on, suspicions of
    /// lower-ranked members published 2 heartbeat intervals late.
    pub fn new(region: RegionId, members: Vec<NodeId>) -> SstConfig {
        SstConfig {
            region,
            members,
            heartbeat_interval: Duration::from_millis(10),
            suspicion_timeout: Duration::from_millis(100),
            partition_safety: true,
            accusation_delay_intervals: 2,
            detector: Detector::Heartbeats,
        }
    }

    /// Every node of `transport` (itself and its peers, ascending) as members.
    ///
    /// ```
    /// use squall_sst::SstConfig;
    /// use squall_transport::{RegionId, RegionSpec};
    /// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// let nodes = ThreadedFabric::new(ThreadedConfig::default()).unwrap()
    ///     .cluster(3, &[RegionSpec::new(RegionId(0), 4096)]).unwrap();
    /// assert_eq!(SstConfig::all(RegionId(0), &nodes[1]).members.len(), 3);
    /// ```
    pub fn all<T: Transport>(region: RegionId, transport: &T) -> SstConfig {
        let mut members: Vec<NodeId> = transport.peers().to_vec();
        members.push(transport.local_id());
        members.sort();
        SstConfig::new(region, members)
    }

    /// Checks the timing settings.
    pub fn validate(&self) -> Result<(), SetupError> {
        if self.heartbeat_interval.is_zero() {
            return Err(SetupError::Detector("heartbeat_interval must be positive"));
        }
        if self.suspicion_timeout <= self.heartbeat_interval {
            return Err(SetupError::Detector(
                "suspicion_timeout must exceed heartbeat_interval (a few intervals is typical)",
            ));
        }
        if self.accusation_delay_intervals > SstConfig::MAX_ACCUSATION_DELAY_INTERVALS {
            return Err(SetupError::Detector(
                "accusation_delay_intervals must be at most 1000 heartbeat intervals (2 is typical: a gossip round trip plus a heartbeat)",
            ));
        }
        Ok(())
    }

    /// The largest [`accusation_delay_intervals`](SstConfig::accusation_delay_intervals)
    /// [`validate`](SstConfig::validate) accepts.
    pub const MAX_ACCUSATION_DELAY_INTERVALS: u32 = 1000;

    /// How long a suspicion of a lower-ranked member waits before it is published:
    /// `accusation_delay_intervals` heartbeat intervals (saturating).
    ///
    /// ```
    /// use squall_sst::SstConfig;
    /// use squall_transport::{NodeId, RegionId};
    /// use std::time::Duration;
    /// let cfg = SstConfig::new(RegionId(0), vec![NodeId(0), NodeId(1)]);
    /// assert_eq!(cfg.accusation_delay(), Duration::from_millis(20));
    /// let late = SstConfig { accusation_delay_intervals: 1001, ..cfg };
    /// assert!(late.validate().is_err());
    /// ```
    pub fn accusation_delay(&self) -> Duration {
        self.heartbeat_interval
            .checked_mul(self.accusation_delay_intervals)
            .unwrap_or(Duration::MAX)
    }
}

/// What one [`Sst::poll_once`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Triggers that fired.
    pub fired: usize,
    /// Members newly suspected.
    pub suspected: usize,
    /// Transport events handled.
    pub events: usize,
}

impl Progress {
    /// Whether anything happened (a driver spins on while it does).
    pub fn is_busy(&self) -> bool {
        self.fired + self.suspected + self.events > 0
    }
}

/// Failure-detector state for one row.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Watch {
    pub(crate) last_heartbeat: u64,
    pub(crate) last_change: Time,
    /// The outstanding signaled heartbeat write and when it was posted.
    pub(crate) outstanding: Option<(OpId, Time)>,
    /// Its heartbeat moved since it connected (members linked from the start: true). A member
    /// that connected but never wrote is not suspected for silence: the peer may not have
    /// admitted this member yet (a restarted incarnation waits to be readmitted).
    pub(crate) heard: bool,
}

/// The Shared State Table of one member: its copy of every row, its own row that only it
/// writes, the predicates evaluated over them, and the failure detector.
///
/// Sans-IO: it touches the world only through its transport (time included) and never blocks,
/// sleeps or spawns. Call [`poll_once`](Sst::poll_once) in a loop, or hand it to a
/// [`Driver`](crate::Driver).
///
/// A table is driven by one thread and is not `Send` (triggers may hold `Rc`s): build it on the
/// thread that drives it, from a transport endpoint moved there. The table polls its transport's
/// events itself; completions of ops posted directly through
/// [`transport_mut`](Sst::transport_mut) are consumed by it (use
/// [`push_signaled`](Sst::push_signaled) and [`landed`](Sst::landed) to wait for writes).
///
/// ```
/// use squall_sst::{SchemaBuilder, Sst, SstConfig};
/// use squall_transport::{NodeId, RegionId, RegionSpec};
/// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
/// let mut b = SchemaBuilder::new(2);
/// let count = b.counter("count");
/// let schema = b.build()?;
/// let layout = [RegionSpec::new(RegionId(0), schema.table_len())];
/// let mut nodes = ThreadedFabric::new(ThreadedConfig::default())?.cluster(2, &layout)?;
/// let n1 = nodes.pop().unwrap();
/// let n0 = nodes.pop().unwrap();
/// let mut a = Sst::new(n0, schema.clone(), SstConfig::new(RegionId(0), vec![NodeId(0), NodeId(1)]))?;
/// let b = Sst::new(n1, schema, SstConfig::new(RegionId(0), vec![NodeId(0), NodeId(1)]))?;
/// a.set(count, 7);
/// a.push(count.range())?;
/// assert_eq!(b.get(0, count), 7); // row 0 is a's row, as b sees it
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Sst<T: Transport> {
    pub(crate) transport: T,
    pub(crate) schema: Schema,
    pub(crate) config: SstConfig,
    pub(crate) table: Region,
    pub(crate) me: usize,
    pub(crate) suspected: Vec<bool>,
    pub(crate) watch: Vec<Watch>,
    /// Rows of members whose link is not up yet (absent): not written to, not suspected.
    pub(crate) absent: Vec<bool>,
    pub(crate) next_heartbeat: Time,
    /// When the failure detector last ran (a longer gap means this member was stalled).
    pub(crate) last_detect: Time,
    pub(crate) stopped: Option<SstError>,
    pub(crate) events: Vec<Event>,
    pub(crate) registry: Registry<T>,
    pub(crate) evaluations: u64,
    /// Signaled ops that tickets wait on, and those of them that completed.
    pub(crate) awaited: HashSet<OpId>,
    pub(crate) landed: HashSet<OpId>,
    pub(crate) history: Vec<(NodeId, Suspicion, Time)>,
    /// A peer cut the link to this member: it publishes no suspicion any more.
    pub(crate) accused: bool,
    /// Per row: whether its suspected flags count (gossip is adopted from it, and its cut makes
    /// this member accused). Every row by default; see [`Sst::set_gossip_sources`].
    pub(crate) gossip_source: Vec<bool>,
    /// Suspicions of lower-ranked members awaiting publication: row, and when.
    pub(crate) deferred: Vec<(usize, Time)>,
    /// Per row: the member's incarnation as this member knows it (0 for a link up from the
    /// start, else the one its last accepted `PeerConnected` named). A published suspicion of
    /// the row is `known + 1`: "its incarnations below that are suspected".
    pub(crate) known: Vec<u64>,
    /// Per row: a newer incarnation of a suspected member that connected and waits for
    /// [`Sst::readmit`].
    pub(crate) pending: Vec<Option<u64>>,
    /// Per row: the one incarnation this table waits for (see [`Sst::expect_incarnation`]);
    /// the row reads absent until [`Sst::link_expected`].
    pub(crate) expected: Vec<Option<u64>>,
    /// The ranges a whole-row push posts last, one write each, in this order, after the words
    /// of none of them (see [`Sst::set_row_push_last`]); empty: one write of the whole row.
    pub(crate) row_push_last: Vec<FieldRange>,
    /// The guards protocol cores over this table registered ([`Sst::add_row_push_last`]):
    /// kept at the end of [`row_push_last`](Self::row_push_last) by every
    /// [`Sst::set_row_push_last`].
    pub(crate) row_push_guards: Vec<FieldRange>,
    /// The signaled writes of [`row_push_last`](Self::row_push_last)'s ranges that whole-row
    /// pushes posted and that have not been seen landed (see [`Sst::row_push_landed`]).
    pub(crate) row_push_ticket: Ticket,
}

/// The signaled writes of one [`Sst::push_signaled`]: one per peer. [`Sst::landed`] says when
/// all of them were applied (or their peers suspected, or readmitted as a newer incarnation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ticket {
    /// Per write: the row, the incarnation of its member this table knew when the write was
    /// posted, and the op.
    ops: Vec<(usize, u64, OpId)>,
}

impl Ticket {
    /// Whether no write is outstanding.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

impl<T: Transport> std::fmt::Debug for Sst<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sst")
            .field("me", &self.member(self.me))
            .field("members", &self.config.members)
            .field("suspected", &self.suspected)
            .finish_non_exhaustive()
    }
}

impl<T: Transport> Sst<T> {
    /// Sets up the table over `transport`, checking the member list and the region on this node
    /// and every peer.
    pub fn new(transport: T, schema: Schema, config: SstConfig) -> Result<Sst<T>, SetupError> {
        config.validate()?;
        let n = config.members.len();
        if schema.members() != n {
            return Err(SetupError::MemberCount {
                schema: schema.members(),
                members: n,
            });
        }
        let local = transport.local_id();
        let me = config
            .members
            .iter()
            .position(|&m| m == local)
            .ok_or(SetupError::NotAMember(local))?;
        for (i, &m) in config.members.iter().enumerate() {
            if config.members[..i].contains(&m) {
                return Err(SetupError::DuplicateMember(m));
            }
            if m != local && !transport.peers().contains(&m) {
                return Err(SetupError::NotAPeer(m));
            }
        }
        let need = schema.table_len();
        let table = match transport.region(config.region) {
            Some(r) if r.len() >= need => r.clone(),
            other => {
                return Err(SetupError::Region {
                    region: config.region,
                    node: local,
                    have: other.map_or(0, Region::len),
                    need,
                });
            }
        };
        for &m in &config.members {
            if m == local || transport.is_absent(m) {
                continue; // an absent member's regions are checked when it connects
            }
            let have = transport.remote_region_len(m, config.region).unwrap_or(0);
            if have < need {
                return Err(SetupError::Region {
                    region: config.region,
                    node: m,
                    have,
                    need,
                });
            }
        }
        let now = transport.now();
        let watch = (0..n)
            .map(|_| Watch {
                last_heartbeat: 0,
                last_change: now,
                outstanding: None,
                heard: true,
            })
            .collect();
        let absent = (config.members.iter())
            .map(|&m| m != local && transport.is_absent(m))
            .collect();
        tracing::debug!(%local, members = n, row_len = schema.row_len(), "sst: table set up");
        Ok(Sst {
            transport,
            config,
            table,
            me,
            suspected: vec![false; n],
            absent,
            watch,
            next_heartbeat: now,
            last_detect: now,
            stopped: None,
            events: vec![
                Event::PeerFailed {
                    peer: local,
                    cause: FailureCause::Local,
                };
                64
            ],
            registry: Registry::new(),
            evaluations: 0,
            awaited: HashSet::new(),
            landed: HashSet::new(),
            history: Vec::new(),
            accused: false,
            gossip_source: vec![true; n],
            deferred: Vec::new(),
            known: vec![0; n],
            pending: vec![None; n],
            expected: vec![None; n],
            row_push_last: Vec::new(),
            row_push_guards: Vec::new(),
            row_push_ticket: Ticket::default(),
            schema,
        })
    }

    /// The transport, for ops the table does not wrap.
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// The transport, mutably (posting ops directly; never `report_failed` behind the table's
    /// back — use [`suspect`](Sst::suspect)).
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The configuration.
    pub fn config(&self) -> &SstConfig {
        &self.config
    }

    /// Number of rows (members).
    pub fn rows(&self) -> usize {
        self.config.members.len()
    }

    /// The local member's row.
    pub fn my_row(&self) -> usize {
        self.me
    }

    /// The member that owns `row`.
    ///
    /// # Panics
    /// If `row` is not a row of the table.
    pub fn member(&self, row: usize) -> NodeId {
        self.config.members[row]
    }

    /// The row of `node`, if it is a member.
    pub fn row_of(&self, node: NodeId) -> Option<usize> {
        self.config.members.iter().position(|&m| m == node)
    }

    /// Whether this member suspects the owner of `row` (its row is frozen).
    pub fn is_suspected(&self, row: usize) -> bool {
        self.suspected[row]
    }

    /// The members this member suspects.
    pub fn suspects(&self) -> Vec<NodeId> {
        (0..self.rows())
            .filter(|&r| self.suspected[r])
            .map(|r| self.member(r))
            .collect()
    }

    /// Every suspicion this member raised, in order: whom, why, and when.
    pub fn suspicions(&self) -> &[(NodeId, Suspicion, Time)] {
        &self.history
    }

    /// The error that stopped this member, if one did.
    pub fn stopped(&self) -> Option<&SstError> {
        self.stopped.as_ref()
    }

    /// Now, on the transport's clock.
    pub fn now(&self) -> Time {
        self.transport.now()
    }

    /// Predicate evaluations so far.
    pub fn evaluations(&self) -> u64 {
        self.evaluations
    }

    fn word(&self, row: usize, word: usize) -> usize {
        row * self.schema.row_len() / 8 + word
    }

    /// Reads counter `c` of `row` (the local copy).
    pub fn get(&self, row: usize, c: Counter) -> u64 {
        self.table.load(self.word(row, c.word))
    }

    /// Sets counter `c` of the local row (not pushed until [`push`](Sst::push)).
    pub fn set(&mut self, c: Counter, value: u64) {
        self.table.store(self.word(self.me, c.word), value);
    }

    /// Reads flag `f` of `row`.
    pub fn flag(&self, row: usize, f: Flag) -> bool {
        self.table.load(self.word(row, f.word)) != 0
    }

    /// Sets flag `f` of the local row.
    pub fn set_flag(&mut self, f: Flag, on: bool) {
        self.table.store(self.word(self.me, f.word), u64::from(on));
    }

    /// Reads element `i` of vector `v` in `row`.
    pub fn get_at(&self, row: usize, v: Vector, i: usize) -> Result<u64, SstError> {
        check_index(v, i)?;
        Ok(self.table.load(self.word(row, v.word + i)))
    }

    /// Sets element `i` of vector `v` in the local row.
    pub fn set_at(&mut self, v: Vector, i: usize, value: u64) -> Result<(), SstError> {
        check_index(v, i)?;
        self.table.store(self.word(self.me, v.word + i), value);
        Ok(())
    }

    /// Copies byte slot `b` of `row` into `out` (at most the slot's capacity).
    pub fn read_bytes(&self, row: usize, b: Bytes, out: &mut [u8]) -> Result<(), SstError> {
        if out.len() > b.cap {
            return Err(SstError::SlotOverflow {
                field: b.name,
                len: out.len(),
                cap: b.cap,
            });
        }
        squall_transport::word::copy_out(self.table.words(), self.word(row, b.word) * 8, out);
        Ok(())
    }

    /// Writes `data` at the start of byte slot `b` of the local row. Longer than the slot is an
    /// error, never a truncation.
    pub fn write_bytes(&mut self, b: Bytes, data: &[u8]) -> Result<(), SstError> {
        if data.len() > b.cap {
            return Err(SstError::SlotOverflow {
                field: b.name,
                len: data.len(),
                cap: b.cap,
            });
        }
        squall_transport::word::copy_in(self.table.words(), self.word(self.me, b.word) * 8, data);
        Ok(())
    }

    /// The words of byte slot `b` in `row` (for protocol cores such as SMC's ring).
    pub(crate) fn slot_words(&self, row: usize, b: Bytes) -> &[std::sync::atomic::AtomicU64] {
        let start = self.word(row, b.word());
        &self.table.words()[start..start + b.range().len / 8]
    }

    /// Pushes `range` of the local row to every unsuspected member: one write per peer, from the
    /// local row to the same offset of this member's row in the peer's copy.
    ///
    /// Writes are posted: a fabric may read the source when it *applies* the write (an RDMA NIC
    /// does), so a peer may receive a newer value than the one the row held at the call. That is
    /// harmless for monotonic counters, but a field that guards data pushed *after* it must not
    /// change while its earlier push is in flight: use [`push_signaled`](Sst::push_signaled)
    /// and change it again only once [`landed`](Sst::landed) (SMC's guard does exactly this).
    pub fn push(&mut self, range: FieldRange) -> Result<(), SstError> {
        for row in 0..self.rows() {
            if self.reachable(row) {
                self.post_row_write(row, range, Signal::Unsignaled)?;
            }
        }
        Ok(())
    }

    /// Pushes `range` of the local row to the unsuspected members among `to` (one write each).
    pub fn push_to(&mut self, range: FieldRange, to: &[NodeId]) -> Result<(), SstError> {
        for &node in to {
            if let Some(row) = self.row_of(node)
                && self.reachable(row)
            {
                self.post_row_write(row, range, Signal::Unsignaled)?;
            }
        }
        Ok(())
    }

    /// Pushes `range` like [`push`](Sst::push), with signaled writes; the ticket tells when
    /// every one of them has been applied (each also vouches for every earlier write on its link).
    pub fn push_signaled(&mut self, range: FieldRange) -> Result<Ticket, SstError> {
        let mut ops = Vec::new();
        for row in 0..self.rows() {
            if self.reachable(row) {
                ops.push(self.post_awaited(row, range)?);
            }
        }
        Ok(Ticket { ops })
    }

    /// Posts a signaled write of `range` to `row`'s member for a ticket: the entry, tagged with
    /// the member's incarnation as known now (see [`landed`](Sst::landed)).
    fn post_awaited(
        &mut self,
        row: usize,
        range: FieldRange,
    ) -> Result<(usize, u64, OpId), SstError> {
        let op = self.post_row_write(row, range, Signal::Signaled)?;
        self.awaited.insert(op);
        Ok((row, self.known[row], op))
    }

    /// Whether every write of `ticket` has been applied. A write to a member suspected since, or
    /// readmitted since as a newer incarnation (its old incarnation was suspected meanwhile,
    /// even if no check of the ticket saw it), counts as done. Forgets the writes it finds done
    /// (check a ticket until it lands rather than dropping it, or its completions stay
    /// recorded).
    pub fn landed(&mut self, ticket: &mut Ticket) -> bool {
        let (suspected, known) = (&self.suspected, &self.known);
        let (landed, awaited) = (&mut self.landed, &mut self.awaited);
        ticket.ops.retain(|&(row, incarnation, op)| {
            // The completion is forgotten first, so a write that landed before its member was
            // suspected leaves no id behind.
            let done = landed.remove(&op) || suspected[row] || known[row] != incarnation;
            if done {
                awaited.remove(&op);
            }
            !done
        });
        ticket.ops.is_empty()
    }

    /// Whether writes go to `row`: another member, not suspected, and connected (not absent).
    pub(crate) fn reachable(&self, row: usize) -> bool {
        row != self.me && !self.suspected[row] && !self.absent[row]
    }

    /// Whether `row`'s member is absent: its link has not come up yet (it has not started).
    /// Nothing is written to an absent member and it is never suspected for being absent; when
    /// its link comes up the table pushes its whole local row to it.
    ///
    /// ```
    /// use squall_sst::{SchemaBuilder, Sst, SstConfig};
    /// use squall_transport::{NodeId, RegionId, RegionSpec};
    /// use squall_transport_mem::sim::{Sim, SimConfig};
    /// let schema = SchemaBuilder::new(3).build()?;
    /// let layout = [RegionSpec::new(RegionId(0), schema.table_len())];
    /// let (sim, mut nodes) = Sim::cluster_late(SimConfig::seeded(1), 3, &layout, &[NodeId(2)])?;
    /// let members = vec![NodeId(0), NodeId(1), NodeId(2)];
    /// let sst = Sst::new(nodes.remove(0), schema, SstConfig::new(RegionId(0), members))?;
    /// assert!(sst.is_absent(2) && !sst.is_absent(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_absent(&self, row: usize) -> bool {
        self.absent.get(row).copied().unwrap_or(false)
    }

    /// From now on, every whole-row push of the local row (to a late member whose link came
    /// up, to a readmitted incarnation) is split: first the words that lie in none of `last`,
    /// one write per run of such words (in ascending order), then each range of `last` as its
    /// own write, in the order given. A fabric applies one writer's writes on a link in order,
    /// but need not place the words *within* one write in order (RDMA does not promise it; TCP
    /// places them in ascending order while the reader may read). List the row's *guards*
    /// (words a reader takes as evidence that other words of the row landed) here, each after
    /// the guards it vouches for: a peer that reads a guard's value from the push then reads
    /// every word it vouches for as of that push or later. Ranges are taken in whole words,
    /// clipped to the row; a word in several ranges is posted with each. An empty `last` (the
    /// default) makes a whole-row push one write. The membership layer lists its view, wedge,
    /// heartbeat and `admitted` words (`docs/MEMBERSHIP.md`, fifty-ninth and seventy-eighth
    /// parts). A guard that a protocol core over the table registered stays listed after
    /// `last` (SMC's `smc_sent`, from [`Smc::new`](crate::Smc::new)): this call replaces only
    /// the caller's ranges.
    ///
    /// Only the placement within a push is ordered. A write reads its source when the fabric
    /// applies it, so a guard that changes while the push is in flight may land newer than the
    /// words posted before it; the rule of [`push`](Sst::push) for guards applies as for any
    /// write. The writes of the listed ranges are posted signaled: a layer that must not
    /// change its guard while one of them is in flight waits for
    /// [`row_push_landed`](Sst::row_push_landed) (SMC does, for `smc_sent`).
    ///
    /// ```
    /// # use squall_sst::{SchemaBuilder, Sst, SstConfig};
    /// # use squall_transport::{NodeId, RegionId, RegionSpec};
    /// # use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// let mut b = SchemaBuilder::new(1);
    /// let data = b.vector("data", 4);
    /// let guard = b.counter("guard");
    /// let seal = b.counter("seal");
    /// let schema = b.build()?;
    /// # let node = ThreadedFabric::new(ThreadedConfig::default())?
    /// #     .cluster(1, &[RegionSpec::new(RegionId(0), schema.table_len())])?.remove(0);
    /// let mut sst = Sst::new(node, schema, SstConfig::new(RegionId(0), vec![NodeId(0)]))?;
    /// // `data` (and the heartbeat and flags) first, then `guard`, then `seal`.
    /// sst.set_row_push_last(&[guard.range(), seal.range()]);
    /// assert_eq!(sst.row_push_last(), [guard.range(), seal.range()]);
    /// # let _ = data;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_row_push_last(&mut self, last: &[FieldRange]) {
        self.row_push_last = last.to_vec();
        for r in &self.row_push_guards {
            if !self.row_push_last.contains(r) {
                self.row_push_last.push(*r);
            }
        }
    }

    /// Registers `range` as a guard of a protocol core over this table, such as
    /// [`Smc::new`](crate::Smc::new) for `smc_sent`: whole-row pushes post it last, after the
    /// ranges listed by [`set_row_push_last`](Sst::set_row_push_last), now and after any later
    /// call of it (which replaces only its caller's list).
    pub(crate) fn add_row_push_last(&mut self, range: FieldRange) {
        if !self.row_push_guards.contains(&range) {
            self.row_push_guards.push(range);
        }
        if !self.row_push_last.contains(&range) {
            self.row_push_last.push(range);
        }
    }

    /// Whether every write of a [`row_push_last`](Sst::row_push_last) range that a whole-row
    /// push posted so far has been applied at its peer (writes to members suspected since, or
    /// readmitted since as a newer incarnation, count as applied). A fabric may read a write's source when it applies it, so a guard
    /// changed while its whole-row write is in flight can land ahead of data pushed after the
    /// change: a layer that changes a listed guard only when this is true (and its own
    /// signaled pushes of the guard [landed](Sst::landed)) never publishes it ahead of its data
    /// on a newly linked peer. True when no whole-row push is in flight, and always for a
    /// table that lists no ranges.
    ///
    /// Takes `&mut self` because it forgets the writes it finds applied, as
    /// [`landed`](Sst::landed) does.
    pub fn row_push_landed(&mut self) -> bool {
        let mut ticket = std::mem::take(&mut self.row_push_ticket);
        let done = self.landed(&mut ticket);
        self.row_push_ticket = ticket;
        done
    }

    /// The ranges whole-row pushes post last, in order
    /// ([`set_row_push_last`](Sst::set_row_push_last)'s, then those a protocol core such as
    /// [`Smc::new`](crate::Smc::new) registered); empty if none were set.
    pub fn row_push_last(&self) -> &[FieldRange] {
        &self.row_push_last
    }

    /// The writes of one whole-row push, in posting order: the runs of words in none of
    /// [`row_push_last`](Sst::row_push_last), then each of its ranges (see
    /// [`set_row_push_last`](Sst::set_row_push_last)), and how many of them come before the
    /// listed ranges.
    fn whole_row_writes(&self) -> (Vec<FieldRange>, usize) {
        let words = self.schema.row_range().len / 8;
        let clip = |r: &FieldRange| {
            let start = (r.offset / 8).min(words);
            let end = (r.offset + r.len).div_ceil(8).min(words);
            (start, end.max(start))
        };
        let mut covered = vec![false; words];
        for r in &self.row_push_last {
            let (start, end) = clip(r);
            covered[start..end].iter_mut().for_each(|c| *c = true);
        }
        let mut writes = Vec::new();
        let mut w = 0;
        while w < words {
            if covered[w] {
                w += 1;
                continue;
            }
            let start = w;
            while w < words && !covered[w] {
                w += 1;
            }
            writes.push(FieldRange {
                offset: start * 8,
                len: (w - start) * 8,
            });
        }
        let unlisted = writes.len();
        for r in &self.row_push_last {
            let (start, end) = clip(r);
            if end > start {
                writes.push(FieldRange {
                    offset: start * 8,
                    len: (end - start) * 8,
                });
            }
        }
        (writes, unlisted)
    }

    /// Pushes the whole local row to `row`'s member: one write, or, with ranges set by
    /// [`set_row_push_last`](Sst::set_row_push_last), the other words first and those ranges
    /// last, in order on the link, signaled (see [`row_push_landed`](Sst::row_push_landed)).
    pub(crate) fn post_whole_row(&mut self, row: usize) -> Result<(), SstError> {
        // Forget the guard writes already seen landed, so the ticket holds only those in flight.
        self.row_push_landed();
        let (writes, unlisted) = self.whole_row_writes();
        for (k, range) in writes.into_iter().enumerate() {
            if k < unlisted {
                self.post_row_write(row, range, Signal::Unsignaled)?;
            } else {
                let entry = self.post_awaited(row, range)?;
                self.row_push_ticket.ops.push(entry);
            }
        }
        Ok(())
    }

    pub(crate) fn post_row_write(
        &mut self,
        row: usize,
        range: FieldRange,
        signal: Signal,
    ) -> Result<OpId, SstError> {
        if let Some(e) = &self.stopped {
            return Err(e.clone()); // a stopped member writes nothing more
        }
        let peer = self.member(row);
        let at = self.me * self.schema.row_len() + range.offset;
        self.transport
            .write(
                peer,
                LocalSlice::new(self.config.region, at, range.len),
                RemoteAddr::new(self.config.region, at),
                signal,
            )
            .map_err(|source| SstError::Post { peer, source })
    }

    // ---- reducers and knowledge ------------------------------------------------------------

    /// The minimum of `project(row)` over every row (suspected rows included, frozen values).
    ///
    /// ```
    /// # use squall_sst::{SchemaBuilder, Sst, SstConfig};
    /// # use squall_transport::{NodeId, RegionId, RegionSpec};
    /// # use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// # let mut b = SchemaBuilder::new(1);
    /// # let c = b.counter("c");
    /// # let schema = b.build().unwrap();
    /// # let node = ThreadedFabric::new(ThreadedConfig::default()).unwrap()
    /// #     .cluster(1, &[RegionSpec::new(RegionId(0), schema.table_len())]).unwrap().remove(0);
    /// let mut sst = Sst::new(node, schema, SstConfig::new(RegionId(0), vec![NodeId(0)])).unwrap();
    /// sst.set(c, 4);
    /// assert_eq!(sst.min_of(|row| sst.get(row, c) * 2), 8);
    /// ```
    pub fn min_of(&self, project: impl Fn(usize) -> u64) -> u64 {
        (0..self.rows()).map(project).min().unwrap_or(0)
    }

    /// The maximum of `project(row)` over every row.
    pub fn max_of(&self, project: impl Fn(usize) -> u64) -> u64 {
        (0..self.rows()).map(project).max().unwrap_or(0)
    }

    /// The (wrapping) sum of `project(row)` over every row.
    pub fn sum_of(&self, project: impl Fn(usize) -> u64) -> u64 {
        (0..self.rows())
            .map(project)
            .fold(0u64, |a, b| a.wrapping_add(b))
    }

    /// How many rows satisfy `test`.
    pub fn count_where(&self, test: impl Fn(usize) -> bool) -> usize {
        (0..self.rows()).filter(|&r| test(r)).count()
    }

    /// The minimum of `project(row)` over the rows this member does not suspect (its own row is
    /// always among them).
    pub fn min_of_unsuspected(&self, project: impl Fn(usize) -> u64) -> u64 {
        (0..self.rows())
            .filter(|&r| !self.suspected[r])
            .map(project)
            .min()
            .unwrap_or(0)
    }

    /// Minimum of counter `c` over every row.
    pub fn min(&self, c: Counter) -> u64 {
        self.min_of(|r| self.get(r, c))
    }

    /// Maximum of counter `c` over every row.
    pub fn max(&self, c: Counter) -> u64 {
        self.max_of(|r| self.get(r, c))
    }

    /// Sum of counter `c` over every row.
    pub fn sum(&self, c: Counter) -> u64 {
        self.sum_of(|r| self.get(r, c))
    }

    /// Minimum of counter `c` over the unsuspected rows.
    pub fn min_unsuspected(&self, c: Counter) -> u64 {
        self.min_of_unsuspected(|r| self.get(r, c))
    }

    /// Knowledge: every unsuspected member has reached `k` in counter `c`, as this member's copy
    /// shows. Monotonic: once true it stays true while counters only grow.
    pub fn all_reached(&self, c: Counter, k: u64) -> bool {
        self.min_unsuspected(c) >= k
    }

    /// Knowledge: `test` holds for every unsuspected row.
    pub fn all_unsuspected(&self, test: impl Fn(usize) -> bool) -> bool {
        (0..self.rows()).filter(|&r| !self.suspected[r]).all(test)
    }

    /// Parks until the transport reports something or `timeout` passes, but never past the next
    /// heartbeat. Drivers call this when a poll found nothing to do.
    pub fn wait(&mut self, timeout: Duration) {
        let now = self.transport.now();
        let next = self
            .deferred
            .iter()
            .map(|&(_, due)| due)
            .fold(self.next_heartbeat, Time::min);
        self.transport.wait(timeout.min(next.saturating_since(now)));
    }
}

impl<T: Transport> Sst<T> {
    /// Runs one round: handles transport events, the failure detector and suspicion gossip, then
    /// evaluates every predicate once, firing triggers. Never blocks.
    ///
    /// Returns the error that stopped this member once it has stopped (and on every later call).
    pub fn poll_once(&mut self) -> Result<Progress, SstError> {
        if let Some(e) = &self.stopped {
            return Err(e.clone());
        }
        let mut progress = self.detect()?;
        progress.fired = self.evaluate();
        Ok(progress)
    }
}

fn check_index(v: Vector, i: usize) -> Result<(), SstError> {
    if i >= v.len {
        return Err(SstError::VectorIndex {
            field: v.name,
            index: i,
            len: v.len,
        });
    }
    Ok(())
}
