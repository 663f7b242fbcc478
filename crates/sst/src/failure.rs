//! Failure handling, as in Derecho: a heartbeat column plus one signaled write per peer per
//! interval (its completion vouches for every unsignaled write before it on the link) detect
//! failures; a suspicion freezes the row, sets the local suspected flag and pushes it to every
//! unsuspected member; suspicions spread epidemically through the rows; a member that suspects a
//! majority stops ([`SstError::Partitioned`]).

use squall_transport::{Event, NodeId, OpError, Signal, Transport};

use crate::error::SstError;
use crate::table::{Progress, Sst};

/// Why a member came to be suspected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suspicion {
    /// The transport reported the peer failed, or an op to it failed.
    Transport,
    /// Its heartbeat did not move, or a signaled write to it did not complete, within the
    /// suspicion timeout.
    Timeout,
    /// Another member's row says it suspects it.
    Gossip,
    /// Local code asked ([`Sst::suspect`]).
    Local,
}

impl<T: Transport> Sst<T> {
    /// Declares `node` suspected: freezes its row (the transport applies nothing more from it),
    /// sets its suspected flag in the local row and pushes the flags to every unsuspected member.
    /// Stops the table if it now suspects a majority and partition safety is on.
    pub fn suspect(&mut self, node: NodeId) -> Result<(), SstError> {
        if let Some(row) = self.row_of(node)
            && self.mark_suspected(row, Suspicion::Local)
        {
            self.after_suspicions()?;
        }
        Ok(())
    }

    /// Marks `row` suspected; returns whether it is new.
    fn mark_suspected(&mut self, row: usize, why: Suspicion) -> bool {
        if row == self.me || self.suspected[row] {
            return false;
        }
        self.suspected[row] = true;
        self.watch[row].outstanding = None;
        let peer = self.member(row);
        // Freeze: from now on nothing the peer sends is applied to the table.
        self.transport.report_failed(peer);
        let flags = self.schema.suspected();
        self.table.store(
            row_word(self.me, self.schema.row_len(), flags.word + row),
            1,
        );
        self.history.push((peer, why, self.transport.now()));
        tracing::warn!(me = %self.member(self.me), %peer, ?why, "sst: member suspected");
        true
    }

    /// Pushes the suspected flags and applies partition safety.
    fn after_suspicions(&mut self) -> Result<(), SstError> {
        self.push(self.schema.suspected().range())?;
        let n = self.rows();
        let count = self.suspected.iter().filter(|&&s| s).count();
        if self.config.partition_safety && 2 * count >= n {
            let e = SstError::Partitioned {
                suspected: count,
                members: n,
                who: self.suspects(),
            };
            tracing::error!(me = %self.member(self.me), error = %e, "sst: stopping");
            self.stopped = Some(e.clone());
            return Err(e);
        }
        Ok(())
    }

    /// Transport events, heartbeats, timeouts and gossip.
    pub(crate) fn detect(&mut self) -> Result<Progress, SstError> {
        let mut progress = Progress::default();
        let mut new = 0;
        // 1. Transport events.
        loop {
            let mut events = std::mem::take(&mut self.events);
            let got = self.transport.poll(&mut events);
            progress.events += got;
            for e in &events[..got] {
                match *e {
                    Event::PeerFailed { peer, .. } => {
                        if let Some(row) = self.row_of(peer) {
                            new += usize::from(self.mark_suspected(row, Suspicion::Transport));
                        }
                    }
                    Event::Completion(c) => {
                        let Some(row) = self.row_of(c.peer) else {
                            continue;
                        };
                        if self.watch[row]
                            .outstanding
                            .is_some_and(|(op, _)| op == c.op)
                        {
                            self.watch[row].outstanding = None;
                        }
                        if c.result.is_ok() && self.awaited.contains(&c.op) {
                            self.landed.insert(c.op);
                        }
                        if let Err(OpError::TimedOut | OpError::PeerFailed) = c.result {
                            new += usize::from(self.mark_suspected(row, Suspicion::Transport));
                        }
                    }
                }
            }
            self.events = events;
            if got < self.events.len() {
                break;
            }
        }
        // 2. Heartbeat: bump and push with one signaled write per unsuspected peer.
        let now = self.transport.now();
        if now >= self.next_heartbeat {
            let hb = self.schema.heartbeat();
            let beat = self.get(self.me, hb) + 1;
            self.set(hb, beat);
            for row in 0..self.rows() {
                if row == self.me || self.suspected[row] || self.watch[row].outstanding.is_some() {
                    continue;
                }
                let op = self.post_row_write(row, hb.range(), Signal::Signaled)?;
                self.watch[row].outstanding = Some((op, now));
            }
            self.next_heartbeat = now + self.config.heartbeat_interval;
        }
        // 3. Timeouts: a heartbeat that does not move, a signaled write that does not complete.
        let timeout = self.config.suspicion_timeout;
        let hb = self.schema.heartbeat();
        for row in 0..self.rows() {
            if row == self.me || self.suspected[row] {
                continue;
            }
            let beat = self.get(row, hb);
            let w = &mut self.watch[row];
            if beat != w.last_heartbeat {
                w.last_heartbeat = beat;
                w.last_change = now;
            }
            let stale = now.saturating_since(w.last_change) > timeout;
            let stuck = w
                .outstanding
                .is_some_and(|(_, posted)| now.saturating_since(posted) > timeout);
            if stale || stuck {
                new += usize::from(self.mark_suspected(row, Suspicion::Timeout));
            }
        }
        // 4. Gossip: adopt the suspicions in every live row.
        let flags = self.schema.suspected();
        let row_len = self.schema.row_len();
        for row in 0..self.rows() {
            if row == self.me || self.suspected[row] {
                continue;
            }
            for j in 0..self.rows() {
                if j != self.me
                    && !self.suspected[j]
                    && self.table.load(row_word(row, row_len, flags.word + j)) != 0
                {
                    new += usize::from(self.mark_suspected(j, Suspicion::Gossip));
                }
            }
        }
        if new > 0 {
            progress.suspected = new;
            self.after_suspicions()?;
        }
        Ok(progress)
    }
}

fn row_word(row: usize, row_len: usize, word: usize) -> usize {
    row * row_len / 8 + word
}
