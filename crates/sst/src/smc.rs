//! SMC, the small-message multicast: a ring of slots per sender inside the table.
//!
//! Each member's row holds its own ring (`smc_slots`), the count of messages it has published
//! (`smc_sent`, the guard) and, per sender, how many of that sender's messages it has received
//! (`smc_received`, the acknowledgements). Sending writes a slot of the local row; [`Smc::flush`]
//! pushes the contiguous committed range in one write per peer (two at the ring's wrap) and then
//! the guard in a separate, later write (Derecho #47). [`Smc::receive`] drains every new slot of
//! every sender at once and pushes the acknowledgements once. A slot is reused only after every
//! unsuspected member acknowledged the message in it; [`Smc::send`] refuses with
//! [`SmcError::WindowFull`] rather than block, and refuses a message larger than a slot.

use squall_transport::{NodeId, Transport};

use crate::error::SmcError;
use crate::ring::Ring;
use crate::schema::{Bytes, Counter, FieldRange, SchemaBuilder, Vector};
use crate::table::{Sst, Ticket};

/// SMC's bounds.
///
/// ```
/// use squall_sst::SmcConfig;
/// let cfg = SmcConfig { window: 0, ..SmcConfig::default() };
/// assert!(cfg.validate().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmcConfig {
    /// Slots per sender: at most this many messages are unacknowledged at once.
    pub window: usize,
    /// The largest message, in bytes (slots are rounded up to whole words).
    pub slot_size: usize,
}

impl Default for SmcConfig {
    /// 16 slots of 1 KiB.
    fn default() -> Self {
        SmcConfig {
            window: 16,
            slot_size: 1024,
        }
    }
}

impl SmcConfig {
    /// Checks the bounds.
    pub fn validate(&self) -> Result<Ring, SmcError> {
        Ring::new(self.window, self.slot_size)
    }
}

/// The fields SMC adds to a schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmcFields {
    slots: Bytes,
    sent: Counter,
    received: Vector,
    ring: Ring,
}

impl SmcFields {
    /// The guard counter: messages this member has published.
    pub fn sent(&self) -> Counter {
        self.sent
    }

    /// Per sender (by row), messages received from it.
    pub fn received(&self) -> Vector {
        self.received
    }
}

/// One member's SMC endpoint: a sender of its own ring and a receiver of everyone's.
///
/// ```
/// use squall_sst::{SchemaBuilder, Smc, SmcConfig, Sst, SstConfig};
/// use squall_transport::{NodeId, RegionId, RegionSpec};
/// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
/// let mut b = SchemaBuilder::new(2);
/// let fields = Smc::declare(&mut b, SmcConfig { window: 4, slot_size: 64 })?;
/// let schema = b.build()?;
/// let mut nodes = ThreadedFabric::new(ThreadedConfig::default())?
///     .cluster(2, &[RegionSpec::new(RegionId(0), schema.table_len())])?;
/// let members = vec![NodeId(0), NodeId(1)];
/// let n1 = nodes.pop().unwrap();
/// let mut a = Sst::new(nodes.pop().unwrap(), schema.clone(), SstConfig::new(RegionId(0), members.clone()))?;
/// let mut b = Sst::new(n1, schema, SstConfig::new(RegionId(0), members))?;
/// let (mut sa, mut sb) = (Smc::new(fields, &mut a), Smc::new(fields, &mut b));
/// sa.send(&mut a, b"hi")?;
/// sa.flush(&mut a)?;
/// let mut got = Vec::new();
/// sb.receive(&mut b, |from, i, m| got.push((from, i, m.to_vec())))?;
/// assert_eq!(got, vec![(NodeId(0), 0, b"hi".to_vec())]);
/// assert!(matches!(sa.send(&mut a, &[0; 65]), Err(squall_sst::SmcError::TooLarge { .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Smc {
    f: SmcFields,
    /// Messages written into the local ring.
    staged: u64,
    /// Messages whose data was pushed.
    pushed: u64,
    /// The guard's value in the local row, and the signaled writes still carrying it.
    guard: u64,
    guard_ticket: Ticket,
    /// Per sender row, messages delivered here.
    delivered: Vec<u64>,
    /// Senders whose ring was found corrupt: not read again.
    broken: Vec<bool>,
    buf: Vec<u8>,
}

impl Smc {
    /// Adds SMC's fields to a schema with `cfg`'s bounds.
    pub fn declare(b: &mut SchemaBuilder, cfg: SmcConfig) -> Result<SmcFields, SmcError> {
        let ring = cfg.validate()?;
        let members = b.members();
        Ok(SmcFields {
            slots: b.bytes("smc_slots", ring.words() * 8),
            sent: b.counter("smc_sent"),
            received: b.vector("smc_received", members.max(1)),
            ring,
        })
    }

    /// The endpoint for `sst`, whose schema holds `fields`. It registers the guard `smc_sent`
    /// among the ranges a whole-row push of `sst` posts last, after those of
    /// [`Sst::set_row_push_last`], which keeps it listed when called later: a push of
    /// the whole row to a newly linked member places the ring's slots before the guard that
    /// vouches for them, and [`flush`](Smc::flush) changes the guard only once that write
    /// landed ([`Sst::row_push_landed`]).
    pub fn new<T: Transport>(fields: SmcFields, sst: &mut Sst<T>) -> Smc {
        sst.add_row_push_last(fields.sent.range());
        Smc {
            f: fields,
            staged: 0,
            pushed: 0,
            guard: 0,
            guard_ticket: Ticket::default(),
            delivered: vec![0; sst.rows()],
            broken: vec![false; sst.rows()],
            buf: Vec::with_capacity(fields.ring.max_payload()),
        }
    }

    /// The fields.
    pub fn fields(&self) -> SmcFields {
        self.f
    }

    /// Messages sent and not yet acknowledged by every unsuspected member.
    pub fn in_flight<T: Transport>(&self, sst: &Sst<T>) -> u64 {
        let me = sst.my_row();
        let acked = sst.min_of_unsuspected(|r| sst.get_at(r, self.f.received, me).unwrap_or(0));
        self.staged.saturating_sub(acked)
    }

    /// Writes `payload` into the next slot of the local ring and returns its index (0, 1, ...).
    /// It travels at the next [`flush`](Smc::flush). Never blocks: a full window is
    /// [`SmcError::WindowFull`], a payload larger than a slot is [`SmcError::TooLarge`].
    pub fn send<T: Transport>(
        &mut self,
        sst: &mut Sst<T>,
        payload: &[u8],
    ) -> Result<u64, SmcError> {
        let ring = self.f.ring;
        if payload.len() > ring.max_payload() {
            return Err(SmcError::TooLarge {
                len: payload.len(),
                max: ring.max_payload(),
            });
        }
        let in_flight = self.in_flight(sst);
        if in_flight >= ring.slots() as u64 {
            return Err(SmcError::WindowFull {
                in_flight,
                window: ring.slots(),
            });
        }
        let index = self.staged;
        ring.put(sst.slot_words(sst.my_row(), self.f.slots), index, payload)?;
        self.staged += 1;
        Ok(index)
    }

    /// Pushes every staged message: the contiguous slot range in one write per peer (two when it
    /// wraps), then the guard counter in a separate, later write. Returns whether it pushed.
    ///
    /// The guard's writes are signaled, and the guard word is not changed again until they have
    /// all landed, nor while a whole-row push's write of it is in flight
    /// ([`Sst::row_push_landed`]): a fabric may read a write's source when it applies it, so
    /// changing the guard under an in-flight guard write could publish messages whose data is
    /// still queued behind it. Data is pushed at once regardless; a later flush publishes it.
    ///
    /// The whole-row wait is table-wide: after each late link or readmission, `sent` is held
    /// for *every* member until the guard writes of that push complete, so one slow or flaky
    /// joiner delays SMC delivery to the whole group. The delay is bounded by the transport's op
    /// timeout: a write that does not complete fails, its member is suspected, and a write to a
    /// suspected member counts as done.
    pub fn flush<T: Transport>(&mut self, sst: &mut Sst<T>) -> Result<bool, SmcError> {
        let mut pushed = false;
        let me = sst.my_row();
        if self.staged > self.pushed {
            let ring = self.f.ring;
            let last_len = ring.len_at(sst.slot_words(me, self.f.slots), self.staged - 1);
            let base = self.f.slots.range().offset;
            for (start, len) in ring
                .spans(self.pushed, self.staged, last_len)
                .into_iter()
                .flatten()
            {
                sst.push(FieldRange {
                    offset: base + start * 8,
                    len: len * 8,
                })?;
            }
            self.pushed = self.staged;
            pushed = true;
        }
        if self.guard < self.pushed && sst.landed(&mut self.guard_ticket) && sst.row_push_landed() {
            // Every data write above precedes this on each link. No write of the guard is in
            // flight (its own pushes, or the last write of a whole-row push to a newly linked
            // member), so none can carry the new value ahead of that data.
            self.guard = self.pushed;
            sst.set(self.f.sent, self.guard);
            self.guard_ticket = sst.push_signaled(self.f.sent.range())?;
            pushed = true;
        }
        Ok(pushed)
    }

    /// Whether staged messages still wait for their guard (call [`flush`](Smc::flush) again).
    pub fn unpublished(&self) -> bool {
        self.guard < self.staged
    }

    /// Delivers every new message of every sender (itself included), in sender order, then
    /// acknowledges them all with one push. Returns how many it delivered. `deliver` gets the
    /// sender, the message's index in its stream, and the payload; it must not block.
    ///
    /// Messages from a suspected sender are delivered up to its frozen guard.
    pub fn receive<T: Transport>(
        &mut self,
        sst: &mut Sst<T>,
        mut deliver: impl FnMut(NodeId, u64, &[u8]),
    ) -> Result<usize, SmcError> {
        let ring = self.f.ring;
        let mut total = 0;
        let mut first_error = None;
        for row in 0..sst.rows() {
            if self.broken[row] {
                continue;
            }
            let guard = sst.get(row, self.f.sent);
            let from = self.delivered[row];
            if guard <= from {
                continue;
            }
            let sender = sst.member(row);
            let mut upto = from;
            let mut failed = guard - from > ring.slots() as u64;
            if failed {
                first_error.get_or_insert(SmcError::Corrupt {
                    sender,
                    index: guard,
                    header: 0,
                });
            }
            while !failed && upto < guard {
                match ring.get(
                    sst.slot_words(row, self.f.slots),
                    upto,
                    sender,
                    &mut self.buf,
                ) {
                    Ok(()) => {
                        deliver(sender, upto, &self.buf);
                        upto += 1;
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "smc: corrupt slot; no longer reading this sender");
                        first_error.get_or_insert(e);
                        failed = true;
                    }
                }
            }
            self.broken[row] = failed;
            total += (upto - from) as usize;
            self.delivered[row] = upto;
            sst.set_at(self.f.received, row, upto)?;
        }
        if total > 0 {
            sst.push(self.f.received.range())?;
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(total),
        }
    }

    /// Flushes, then receives: one round of SMC work. Returns how many messages it delivered
    /// plus whether it pushed anything (for a driver's progress).
    pub fn poll<T: Transport>(
        &mut self,
        sst: &mut Sst<T>,
        deliver: impl FnMut(NodeId, u64, &[u8]),
    ) -> Result<usize, SmcError> {
        let pushed = self.flush(sst)?;
        Ok(self.receive(sst, deliver)? + usize::from(pushed))
    }

    /// Messages staged so far (the next message's index).
    pub fn sent(&self) -> u64 {
        self.staged
    }

    /// Messages delivered here from the sender in `row`.
    pub fn delivered(&self, row: usize) -> u64 {
        self.delivered[row]
    }
}
