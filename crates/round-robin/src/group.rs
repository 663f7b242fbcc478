//! The round-robin group: one member's endpoint.

use std::collections::VecDeque;
use std::time::Duration;

use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
use squall_sst::{Counter, SchemaBuilder, Smc, SmcError, SmcFields, Sst, SstConfig, Vector};
use squall_transport::word::{copy_in, copy_out};
use squall_transport::{
    LocalSlice, NodeId, PostError, Region, RegionSpec, RemoteAddr, Signal, Transport,
};

use crate::config::{Config, Mode};
use crate::error::{ConfigError, Error, StopReason};
use crate::log::{Log, Record, Recovery};

/// Message kinds, in the low byte of the 8-byte header that starts every SMC slot.
const KIND_DATA: u64 = 0;
const KIND_NULLS: u64 = 1;
const KIND_LARGE: u64 = 2;

/// The SST fields round-robin uses, beyond SMC's.
#[derive(Clone, Copy, Debug)]
struct Fields {
    smc: SmcFields,
    /// Per sender rank: round-robin messages (data and nulls) received by this member.
    received: Vector,
    /// Sequence numbers delivered here: every seq below it.
    delivered: Counter,
    /// Sequence numbers persisted here (durable mode): every seq below it.
    persisted: Counter,
}

fn declare(cfg: &Config) -> Result<(squall_sst::Schema, Fields), ConfigError> {
    let mut b = SchemaBuilder::new(cfg.members.len());
    let smc = Smc::declare(&mut b, cfg.smc()).map_err(ConfigError::Smc)?;
    let received = b.vector("rr_received", cfg.sender_list().len());
    let delivered = b.counter("rr_delivered");
    let persisted = b.counter("rr_persisted");
    Ok((
        b.build()?,
        Fields {
            smc,
            received,
            delivered,
            persisted,
        },
    ))
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
}

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
/// stable messages in sequence order. Idle senders send runs of null messages (one slot per
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
    queues: Vec<VecDeque<Entry>>,
    /// The next sequence number to deliver.
    next_seq: u64,
    /// The next delivery position (application messages only).
    position: u64,
    large: Option<Region>,
    log: Option<Log>,
    recovery: Option<Recovery>,
    /// Durable mode: delivered (seq, position) pairs not yet known durable everywhere.
    undurable: VecDeque<(u64, u64)>,
    wedged: bool,
    reported_wedge: bool,
    stopped: Option<StopReason>,
    scratch: Vec<u8>,
    stats: Stats,
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
            cfg.sender_list().len() * cfg.window * cfg.large_cap()
        } else {
            8
        }
    }

    /// Sets the group up over `transport` (whose node must be a member, with the regions of
    /// [`layout`](RoundRobin::layout) on every member). In durable mode, opens the log and
    /// repairs its tail; what it held is in [`recovered`](RoundRobin::recovered).
    pub fn new(transport: T, cfg: Config) -> Result<RoundRobin<T>, Error> {
        cfg.validate()?;
        let (schema, f) = declare(&cfg)?;
        let sst_cfg = SstConfig {
            heartbeat_interval: cfg.heartbeat_interval,
            suspicion_timeout: cfg.suspicion_timeout,
            ..SstConfig::new(cfg.table_region, cfg.members.clone())
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
        let sst = Sst::new(transport, schema, sst_cfg)?;
        let (log, recovery) = match &cfg.mode {
            Mode::Durable { path, fsync } => {
                let (log, rec) = Log::open(path, *fsync)?;
                (Some(log), Some(rec))
            }
            _ => (None, None),
        };
        let senders = cfg.sender_list();
        let my_rank = senders.iter().position(|&s| s == sst.member(sst.my_row()));
        let smc = Smc::new(f.smc, &sst);
        let ns = senders.len();
        Ok(RoundRobin {
            smc,
            f,
            my_rank,
            next_index: 0,
            received: vec![0; ns],
            queues: (0..ns).map(|_| VecDeque::new()).collect(),
            next_seq: 0,
            position: 0,
            large,
            log,
            recovery,
            undurable: VecDeque::new(),
            wedged: false,
            reported_wedge: false,
            stopped: None,
            scratch: Vec::new(),
            stats: Stats::default(),
            senders,
            sst,
            cfg,
        })
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
        self.stats
    }

    /// Why the group stopped, if it did.
    pub fn stopped(&self) -> Option<&StopReason> {
        self.stopped.as_ref()
    }

    /// Whether the group is wedged (a member was suspected or this member stopped).
    pub fn is_wedged(&self) -> bool {
        self.wedged
    }

    /// Durable mode: what the log held when it was opened (taken once).
    pub fn recovered(&mut self) -> Option<Recovery> {
        self.recovery.take()
    }

    /// Every sequence number below this one has been delivered (or skipped as null) here.
    pub fn delivered_seq(&self) -> u64 {
        self.next_seq
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
        self.next_index += 1;
        Ok(())
    }

    /// Writes a large payload into this sender's buffer for its SMC index at every member
    /// (direct transfer: one write per chunk per peer), then announces it with a slot. FIFO per
    /// link puts the chunks before the announcement everywhere.
    fn send_large(&mut self, rank: usize, payload: &[u8]) -> Result<(), SubmitError> {
        let window = self.cfg.window;
        let in_flight = self.smc.in_flight(&self.sst);
        if in_flight >= window as u64 {
            return Err(SubmitError::WindowFull);
        }
        let Some(region) = &self.large else {
            return Err(SubmitError::TooLarge {
                len: payload.len(),
                max: self.cfg.slot_size,
            });
        };
        let index = self.smc.sent();
        let cap = self.cfg.large_cap();
        let base = (rank * window + (index % window as u64) as usize) * cap;
        copy_in(region.words(), base, payload);
        let padded = payload.len().div_ceil(8) * 8;
        let me = self.sst.my_row();
        for row in 0..self.sst.rows() {
            if row == me || self.sst.is_suspected(row) {
                continue;
            }
            let peer = self.sst.member(row);
            let mut at = 0;
            while at < padded {
                let len = self.cfg.chunk_size.min(padded - at);
                let r = self.sst.transport_mut().write(
                    peer,
                    LocalSlice::new(self.cfg.large_region, base + at, len),
                    RemoteAddr::new(self.cfg.large_region, base + at),
                    Signal::Unsignaled,
                );
                match r {
                    Ok(_) => {}
                    // Nothing announced yet: a retry rewrites the same buffer.
                    Err(PostError::QueueFull { .. }) => return Err(SubmitError::WindowFull),
                    Err(e) => return Err(SubmitError::Stopped(e.to_string())),
                }
                at += len;
            }
        }
        let header = KIND_LARGE | ((payload.len() as u64) << 8);
        self.smc
            .send(&mut self.sst, &header.to_le_bytes())
            .map_err(smc_submit_error)?;
        self.stats.large_sent += 1;
        Ok(())
    }

    /// Receives every new slot of every sender, queueing (or, unordered, delivering) it.
    fn receive(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> Result<bool, StopReason> {
        let mut bad: Option<StopReason> = None;
        let ordered = self.cfg.mode.is_ordered();
        let window = self.cfg.window as u64;
        let cap = self.cfg.large_cap();
        let max_payload = self.cfg.max_payload as u64;
        let senders = &self.senders;
        let received = &mut self.received;
        let queues = &mut self.queues;
        let large = &self.large;
        let position = &mut self.position;
        let stats = &mut self.stats;
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
            let Some(h) = m.get(..8) else {
                bad = Some(malformed("shorter than the 8-byte header"));
                return;
            };
            let mut w = [0u8; 8];
            w.copy_from_slice(h);
            let header = u64::from_le_bytes(w);
            let entry = match header & 0xff {
                KIND_DATA if header == KIND_DATA => Entry::Data(m[8..].to_vec()),
                KIND_NULLS if header >> 8 > 0 && m.len() == 8 => Entry::Nulls {
                    first: received[rank],
                    count: header >> 8,
                },
                KIND_LARGE if m.len() == 8 => {
                    let len = header >> 8;
                    let Some(region) = large.as_ref().filter(|_| len <= max_payload) else {
                        bad = Some(malformed("large message beyond max_payload"));
                        return;
                    };
                    let base = (rank as u64 * window + index % window) as usize * cap;
                    let mut out = vec![0u8; len as usize];
                    copy_out(region.words(), base, &mut out);
                    Entry::Data(out)
                }
                _ => {
                    bad = Some(malformed("unknown header"));
                    return;
                }
            };
            match entry {
                Entry::Nulls { count, .. } => {
                    received[rank] += count;
                    if ordered {
                        queues[rank].push_back(entry);
                    }
                }
                Entry::Data(payload) => {
                    received[rank] += 1;
                    if ordered {
                        queues[rank].push_back(Entry::Data(payload));
                    } else {
                        upcalls.push(Upcall::Deliver(Delivery {
                            position: *position,
                            sender: from,
                            payload,
                        }));
                        *position += 1;
                        stats.delivered += 1;
                    }
                }
            }
        });
        if let Some(b) = bad {
            return Err(b);
        }
        let got = got?;
        if got > 0 {
            for (rank, &count) in self.received.iter().enumerate() {
                self.sst
                    .set_at(self.f.received, rank, count)
                    .map_err(StopReason::Sst)?;
            }
            self.sst
                .push(self.f.received.range())
                .map_err(StopReason::Sst)?;
        }
        Ok(got > 0)
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
        let ns = self.senders.len() as u64;
        let start = self.next_seq;
        let mut batch = 0u64;
        let mut stable = vec![0u64; self.senders.len()];
        for (k, s) in stable.iter_mut().enumerate() {
            // Suspected rows count with their frozen values: nothing past the stable prefix.
            *s = self
                .sst
                .min_of(|r| self.sst.get_at(r, self.f.received, k).unwrap_or(0));
        }
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
                    if let Some(log) = &mut self.log {
                        log.append(&Record {
                            view: self.cfg.view,
                            seq: self.next_seq,
                            position: self.position,
                            sender: self.senders[k],
                            payload: payload.clone(),
                        })?;
                        self.undurable.push_back((self.next_seq, self.position));
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
        }
        if self.next_seq == start {
            return Ok(false);
        }
        self.sst.set(self.f.delivered, self.next_seq);
        self.sst
            .push(self.f.delivered.range())
            .map_err(StopReason::Sst)?;
        if let Some(log) = &mut self.log {
            log.sync()?;
            self.sst.set(self.f.persisted, self.next_seq);
            self.sst
                .push(self.f.persisted.range())
                .map_err(StopReason::Sst)?;
        }
        Ok(true)
    }

    /// Durable mode: reports the highest position every member has persisted.
    fn report_durable(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) {
        if self.log.is_none() {
            return;
        }
        let frontier = self.sst.min(self.f.persisted);
        let mut last = None;
        while let Some(&(seq, pos)) = self.undurable.front() {
            if seq >= frontier {
                break;
            }
            last = Some(pos);
            self.undurable.pop_front();
        }
        if let Some(p) = last {
            upcalls.push(Upcall::Durable(p));
        }
    }

    fn step(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> Result<bool, StopReason> {
        let progress = self.sst.poll_once()?;
        if let Some(&s) = self.sst.suspects().first() {
            return Err(StopReason::Suspected(s));
        }
        let mut busy = progress.is_busy();
        busy |= self.smc.flush(&mut self.sst)?;
        busy |= self.receive(upcalls)?;
        if self.cfg.mode.is_ordered() {
            busy |= self.send_nulls()?;
            busy |= self.deliver(upcalls)?;
            self.report_durable(upcalls);
        }
        busy |= self.smc.flush(&mut self.sst)?;
        Ok(busy || self.smc.unpublished())
    }
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
}
