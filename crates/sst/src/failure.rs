//! Failure handling, as in Derecho: a heartbeat column plus one signaled write per peer per
//! interval (its completion vouches for every unsignaled write before it on the link) detect
//! failures; a suspicion freezes the row, sets the local suspected flag and pushes it to every
//! unsuspected member; suspicions spread epidemically through the rows; a member that suspects a
//! majority stops ([`SstError::Partitioned`]).
//!
//! # No retaliation, one endpoint per cut link
//!
//! Freezing a row cuts the link both ways, so the suspect learns that it is suspected: its next
//! op to the suspecter is refused and its transport reports [`FailureCause::Remote`]. That is
//! evidence about *this* member, not about the peer (the peer was alive enough to refuse), so:
//!
//! 1. a suspicion caused by `Remote` ([`Suspicion::Remote`]) freezes the row locally but is
//!    never published in the gossiped `suspected` flags;
//! 2. from then on this member knows it is being removed ([`Sst::is_accused`], the Derecho
//!    rule that a member that sees itself suspected is on its way out): every later suspicion
//!    it raises stays local too (it freezes rows, accuses nobody), and it stops once it has
//!    frozen a majority (partition safety), which every member that cut it makes happen;
//! 3. a tie-break for the two ends of a cut link, which time out together: a suspicion this
//!    member detected itself (transport failure, timeout) of a *lower-ranked* member is
//!    published only after [`accusation_delay_intervals`](crate::SstConfig) heartbeat
//!    intervals (default 2), and dropped if the member is accused meanwhile. The lower-ranked
//!    end's suspicion spreads first, everyone cuts the higher-ranked end, which keeps quiet.
//!
//! Before, the suspect "retaliated": it published a suspicion of every member that cut it, and
//! members that read the retaliation before the original suspicion removed a healthy member,
//! who retaliated in turn. One cut link between two of five members (`tests/sim_cut_link.rs`,
//! 200 seeds) cost 1.95 members on average, a third member in 35 seeds and everyone in 26. Now
//! it costs exactly one, the higher-ranked endpoint (300 seeds); with rules 1–2 and no
//! tie-break (`accusation_delay_intervals: 0`), never a third member but both ends in 175 of 300.
//!
//! Why this is safe: suspicions only ever remove members, and safety rests on the majority rule,
//! which is untouched (local suspicions count toward it). Why it stays live: gossip spreads what
//! some member detected, and what is kept local is either about the member's accuser, who has
//! published its own suspicion (so the member is removed, the one outcome the evidence
//! supports), or about a failure the others detect for themselves: a crashed peer stops
//! answering everyone ([`FailureCause::TimedOut`] or [`FailureCause::ConnectionLost`], never
//! `Remote`), and a partition shows timeouts on both sides. A deferred suspicion is late by two
//! heartbeats only where no lower-ranked member detected the failure itself; the row is frozen
//! at once either way. The one trade-off, that lateness, is the knob.
//!
//! # Whose suspicions count
//!
//! By default every row's suspected flags are adopted. A table whose rows are more than the
//! group (a membership table over a universe, of which a view is a subset) names the rows that
//! count with [`Sst::set_gossip_sources`]: only their flags spread, and only their cuts make this
//! member accused (rule 2). A node outside the view gets no member removed, as in Derecho,
//! whose view tables have the view's members as rows.
//!
//! Rules 1–2 need a transport that reports a deliberate cut as `Remote`: the simulator, the
//! threaded fabric and TCP (its `Cut` frame) do; `squall-transport-rdma` reports a peer that
//! moved its queue pair to error as `ConnectionLost` or `TimedOut`, so there a suspect still
//! retaliates (rule 3 still delays retaliation against lower-ranked members).

use squall_transport::{Event, FailureCause, NodeId, OpError, Signal, Transport};

use crate::table::Detector;

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
    /// The peer cut the link to this member ([`FailureCause::Remote`]): it suspects this member.
    /// The row is frozen but the suspicion is not published (see the [module docs](self)).
    Remote,
    /// Another table over the same endpoint already suspects it ([`Sst::suspect_known`]): a
    /// membership layer starting a view's table with a member it knows failed. The row is
    /// frozen but the suspicion is not published.
    Known,
}

impl<T: Transport> Sst<T> {
    /// Declares `node` suspected: freezes its row (the transport applies nothing more from it),
    /// sets its suspected flag in the local row and pushes the flags to every unsuspected member
    /// (unless this member [is accused](Sst::is_accused): then the suspicion stays local).
    /// Stops the table if it now suspects a majority and partition safety is on.
    pub fn suspect(&mut self, node: NodeId) -> Result<(), SstError> {
        if let Some(row) = self.row_of(node)
            && self.mark_suspected(row, Suspicion::Local)
        {
            self.after_suspicions()?;
        }
        Ok(())
    }

    /// Declares `node` suspected because another table over the same endpoint already suspects
    /// it, typically a membership table when a view's table is created after it suspected
    /// `node`. The row is frozen and nothing more is written to `node`, but nothing is
    /// reported to the transport and the suspicion is not published. The link to `node` may
    /// already lead to a newer incarnation that restarted under its id. That incarnation is not
    /// the member this table names, so it must get none of this table's writes, and its link
    /// must not be cut either. The suspicion is not published because the other tables in the
    /// view decide the same from their own knowledge. A fresh table knows no incarnations
    /// (every flag means "incarnation 0"), so a peer that already counts the newer incarnation
    /// would adopt the flag for that incarnation and cut it.
    ///
    /// A table created after the transport handed out the failure of `node` and the connection
    /// of its new incarnation never sees either event: without this call it would count the new
    /// incarnation as the member and write to it.
    ///
    /// ```
    /// use squall_sst::{SchemaBuilder, Sst, SstConfig, Suspicion};
    /// use squall_transport::{NodeId, RegionId, RegionSpec};
    /// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// let schema = SchemaBuilder::new(3).build()?;
    /// let layout = [RegionSpec::new(RegionId(0), schema.table_len())];
    /// let members = vec![NodeId(0), NodeId(1), NodeId(2)];
    /// let mut t = Vec::new();
    /// for node in ThreadedFabric::new(ThreadedConfig::default())?.cluster(3, &layout)? {
    ///     t.push(Sst::new(node, schema.clone(), SstConfig::new(RegionId(0), members.clone()))?);
    /// }
    /// t[0].suspect_known(NodeId(2))?;
    /// assert!(t[0].is_suspected(2));
    /// assert_eq!(t[0].suspicions()[0].1, Suspicion::Known);
    /// // Not reported to the transport: n0's link to n2 is not cut, so n2 does not learn that
    /// // it is suspected (after `suspect` it would). Not published: n1 does not adopt it.
    /// t[2].poll_once()?;
    /// t[1].poll_once()?;
    /// assert!(!t[2].is_accused());
    /// assert!(!t[1].is_suspected(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn suspect_known(&mut self, node: NodeId) -> Result<(), SstError> {
        if let Some(row) = self.row_of(node)
            && self.mark_suspected(row, Suspicion::Known)
        {
            self.after_suspicions()?;
        }
        Ok(())
    }

    /// Counts the suspicions of `nodes` only: from now on this member adopts the suspected
    /// flags of their rows alone, and only a cut by one of them ([`Suspicion::Remote`]) makes it
    /// [accused](Sst::is_accused). Other rows stay rows (written to, read, timed out, suspected
    /// on their own failures); their flags and their cuts accuse nobody. For a membership layer
    /// whose table spans a universe of which a view is a subset: a node outside the view (a
    /// joiner, a spare, a left member) must not get a member removed, as in Derecho, where a
    /// view's table has the view's members as rows. Suspicions already adopted stay. By
    /// default every row counts (the table's members are the group). Unknown nodes are ignored.
    ///
    /// ```
    /// use squall_sst::{SchemaBuilder, Sst, SstConfig};
    /// use squall_transport::{NodeId, RegionId, RegionSpec};
    /// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// let schema = SchemaBuilder::new(3).build()?;
    /// let layout = [RegionSpec::new(RegionId(0), schema.table_len())];
    /// let members = vec![NodeId(0), NodeId(1), NodeId(2)];
    /// let mut t = Vec::new();
    /// for node in ThreadedFabric::new(ThreadedConfig::default())?.cluster(3, &layout)? {
    ///     t.push(Sst::new(node, schema.clone(), SstConfig::new(RegionId(0), members.clone()))?);
    /// }
    /// // n0 counts n0 and n1 only: n2 (no member of its view) suspects n1, n0 does not adopt it.
    /// t[0].set_gossip_sources(&[NodeId(0), NodeId(1)]);
    /// assert!(!t[0].is_gossip_source(2));
    /// t[2].suspect(NodeId(1))?;
    /// t[0].poll_once()?;
    /// assert!(!t[0].is_suspected(1));
    /// // n1 was cut by n2, which it does not count: it is not accused.
    /// t[1].set_gossip_sources(&[NodeId(0), NodeId(1)]);
    /// t[1].poll_once()?;
    /// assert!(t[1].is_suspected(2) && !t[1].is_accused());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_gossip_sources(&mut self, nodes: &[NodeId]) {
        // Called on every GMS poll: compared in place, so an unchanged set allocates nothing.
        let mut changed = false;
        for r in 0..self.rows() {
            let counts = nodes.contains(&self.member(r));
            if let Some(s) = self.gossip_source.get_mut(r)
                && *s != counts
            {
                *s = counts;
                changed = true;
            }
        }
        if changed {
            tracing::info!(me = %self.member(self.me), ?nodes, "sst: suspicions counted from these rows only");
        }
    }

    /// Whether `row`'s suspected flags count (see [`set_gossip_sources`](Sst::set_gossip_sources)).
    pub fn is_gossip_source(&self, row: usize) -> bool {
        self.gossip_source.get(row).copied().unwrap_or(false)
    }

    /// Whether this member knows that another member suspects it: a peer cut the link to it
    /// ([`Suspicion::Remote`]). It is being removed, so from then on it freezes the rows of the
    /// members it suspects but no longer publishes any suspicion (it accuses nobody).
    ///
    /// ```
    /// use squall_sst::{SchemaBuilder, Sst, SstConfig};
    /// use squall_transport::{NodeId, RegionId, RegionSpec};
    /// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// let schema = SchemaBuilder::new(3).build()?;
    /// let layout = [RegionSpec::new(RegionId(0), schema.table_len())];
    /// let members = vec![NodeId(0), NodeId(1), NodeId(2)];
    /// let mut ssts = Vec::new();
    /// for node in ThreadedFabric::new(ThreadedConfig::default())?.cluster(3, &layout)? {
    ///     ssts.push(Sst::new(node, schema.clone(), SstConfig::new(RegionId(0), members.clone()))?);
    /// }
    /// ssts[0].suspect(NodeId(2))?; // n0 cuts n2 and publishes the suspicion
    /// ssts[2].poll_once()?; // n2's transport reports that n0 cut it
    /// assert!(ssts[2].is_accused() && ssts[2].is_suspected(0));
    /// // n2 froze n0's row but did not retaliate: no member reads "n2 suspects n0".
    /// ssts[1].poll_once()?;
    /// assert!(ssts[1].is_suspected(2) && !ssts[1].is_suspected(0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_accused(&self) -> bool {
        self.accused
    }

    /// Marks `row` suspected and freezes it; returns whether it is new. Publishes the suspicion
    /// in the local row's flags at once, later (a lower-ranked member this member detected
    /// itself, see [`SstConfig::accusation_delay_intervals`](crate::SstConfig)), or never (the
    /// peer cut the link, or this member is accused).
    fn mark_suspected(&mut self, row: usize, why: Suspicion) -> bool {
        if why == Suspicion::Remote && !self.accused && self.gossip_source[row] {
            self.accused = true;
            tracing::warn!(
                me = %self.member(self.me), by = %self.member(row), dropped = self.deferred.len(),
                "sst: this member is suspected; it accuses nobody from now on"
            );
            self.deferred.clear();
        }
        if row == self.me || self.suspected[row] {
            return false;
        }
        self.suspected[row] = true;
        self.watch[row].outstanding = None;
        let peer = self.member(row);
        // Freeze: from now on nothing the peer sends is applied to the table. A suspicion the
        // transport raised (`PeerFailed`, a failed op, a cut) is about a link it failed
        // already; reporting it again could cut a newer incarnation's link that came up in the
        // same batch of events (the report names the incarnation last polled).
        if !matches!(
            why,
            Suspicion::Transport | Suspicion::Remote | Suspicion::Known
        ) {
            self.transport.report_failed(peer);
        }
        let now = self.transport.now();
        let delay = self.config.accusation_delay();
        let detected = matches!(why, Suspicion::Transport | Suspicion::Timeout);
        let publish = if self.accused || matches!(why, Suspicion::Remote | Suspicion::Known) {
            "never"
        } else if detected && row < self.me && !delay.is_zero() {
            self.deferred.push((row, now + delay));
            "deferred"
        } else {
            self.publish_flag(row);
            "now"
        };
        self.history.push((peer, why, now));
        tracing::warn!(me = %self.member(self.me), %peer, ?why, publish, "sst: member suspected");
        true
    }

    /// Sets `row`'s suspected flag in the local row (pushed by the caller), unless this member
    /// is accused; returns whether it did.
    fn publish_flag(&mut self, row: usize) -> bool {
        if self.accused {
            return false; // it is being removed: it accuses nobody
        }
        let flags = self.schema.suspected();
        // "Incarnations below known + 1 suspected": a newer incarnation is not.
        self.table.store(
            row_word(self.me, self.schema.row_len(), flags.word + row),
            self.known[row].saturating_add(1),
        );
        true
    }

    /// Publishes the deferred suspicions that are due; returns how many.
    fn publish_due(&mut self) -> usize {
        if self.deferred.is_empty() {
            return 0;
        }
        let now = self.transport.now();
        let mut due = Vec::new();
        self.deferred.retain(|&(row, at)| {
            let ready = at <= now;
            if ready {
                due.push(row);
            }
            !ready
        });
        let mut published = 0;
        for row in due {
            if self.publish_flag(row) {
                published += 1;
                tracing::info!(me = %self.member(self.me), peer = %self.member(row), "sst: deferred suspicion published");
            }
        }
        published
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
                    Event::PeerFailed { peer, cause } => {
                        if let Some(row) = self.row_of(peer) {
                            let why = match cause {
                                FailureCause::Remote => Suspicion::Remote,
                                _ => Suspicion::Transport,
                            };
                            new += usize::from(self.mark_suspected(row, why));
                        }
                    }
                    Event::PeerConnected { peer, incarnation } => {
                        if let Some(row) = self.row_of(peer) {
                            new += usize::from(self.connected(row, incarnation)?);
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
        let heartbeats = self.config.detector == Detector::Heartbeats;
        if heartbeats && now >= self.next_heartbeat {
            let hb = self.schema.heartbeat();
            let beat = self.get(self.me, hb) + 1;
            self.set(hb, beat);
            for row in 0..self.rows() {
                if !self.reachable(row) || self.watch[row].outstanding.is_some() {
                    continue;
                }
                let op = self.post_row_write(row, hb.range(), Signal::Signaled)?;
                self.watch[row].outstanding = Some((op, now));
            }
            self.next_heartbeat = now + self.config.heartbeat_interval;
        }
        // 3. Timeouts: a heartbeat that does not move, a signaled write that does not complete.
        let timeout = self.config.suspicion_timeout;
        let away = now.saturating_since(self.last_detect);
        self.last_detect = now;
        if heartbeats && away > timeout / 2 {
            // This member did not run its detector for `away` (its process was stalled: an
            // fsync, the scheduler, the application). Its peers' silence during that time was
            // not observed, and a stall of the whole machine (a disk flush under every member's
            // log) silences them too: restart every peer's clock rather than accuse them all at
            // once, which would leave this member in a minority. A dead peer is still suspected
            // one timeout after this member runs again.
            tracing::debug!(me = %self.transport.local_id(), away_us = away.as_micros() as u64, "sst: detector was stalled; peer clocks restarted");
            for w in &mut self.watch {
                w.last_change = now;
                if let Some((op, _)) = w.outstanding {
                    w.outstanding = Some((op, now));
                }
            }
        }
        let hb = self.schema.heartbeat();
        for row in 0..self.rows() {
            // An absent member is not there yet: it is never suspected for being silent.
            if !heartbeats || !self.reachable(row) {
                continue;
            }
            let beat = self.get(row, hb);
            let w = &mut self.watch[row];
            if beat != w.last_heartbeat {
                w.last_heartbeat = beat;
                w.last_change = now;
                w.heard = true;
            }
            let stale = w.heard && now.saturating_since(w.last_change) > timeout;
            let stuck = w
                .outstanding
                .is_some_and(|(_, posted)| now.saturating_since(posted) > timeout);
            if stale || stuck {
                new += usize::from(self.mark_suspected(row, Suspicion::Timeout));
            }
        }
        // 4. Gossip: adopt the suspicions in every live row that counts.
        let flags = self.schema.suspected();
        let row_len = self.schema.row_len();
        for row in 0..self.rows() {
            if row == self.me || self.suspected[row] || !self.gossip_source[row] {
                continue;
            }
            for j in 0..self.rows() {
                // A flag names the incarnations it suspects (those below its value): one
                // about an incarnation older than the one this member knows is stale.
                if j != self.me
                    && !self.suspected[j]
                    && self.table.load(row_word(row, row_len, flags.word + j)) > self.known[j]
                {
                    new += usize::from(self.mark_suspected(j, Suspicion::Gossip));
                }
            }
        }
        // 5. Deferred suspicions that are due (none once this member is accused).
        let published = self.publish_due();
        if new > 0 {
            progress.suspected = new;
            self.after_suspicions()?;
        } else if published > 0 {
            self.push(flags.range())?;
        }
        Ok(progress)
    }
}

impl<T: Transport> Sst<T> {
    /// The link to `row`'s member came up with `incarnation`. An absent member: check its
    /// region, restart its detector clock (it was never suspected for being absent) and push the
    /// whole local row to it, so the late member catches up. A suspected member's newer
    /// incarnation (it restarted under its id) is held *pending* until [`readmit`](Sst::readmit).
    /// Returns whether the member was suspected instead (region too small).
    fn connected(&mut self, row: usize, incarnation: u64) -> Result<bool, SstError> {
        if row == self.me {
            return Ok(false);
        }
        if let Some(want) = self.expected[row] {
            // Waiting for one incarnation: the membership layer links it
            // ([`Sst::link_expected`]) once its own table readmitted it. Any other one is not
            // the member this table names.
            if incarnation != want && !self.suspected[row] {
                self.expected[row] = None;
                self.absent[row] = false;
                tracing::warn!(me = %self.member(self.me), peer = %self.member(row), incarnation, expected = want, "sst: an incarnation other than the expected one connected; suspecting the row");
                return Ok(self.mark_suspected(row, Suspicion::Known));
            }
            return Ok(false);
        }
        if self.suspected[row] {
            if incarnation > self.known[row] {
                self.pending[row] = Some(incarnation);
                self.absent[row] = false;
                tracing::info!(me = %self.member(self.me), peer = %self.member(row), incarnation, "sst: a suspected member's new incarnation connected; held pending readmission");
            }
            return Ok(false);
        }
        if !self.absent[row] {
            return Ok(false);
        }
        self.link_up(row, incarnation)
    }

    /// `row`'s absent member's link is up with `incarnation`: see [`connected`](Sst::connected).
    fn link_up(&mut self, row: usize, incarnation: u64) -> Result<bool, SstError> {
        self.absent[row] = false;
        self.known[row] = incarnation;
        let peer = self.member(row);
        let need = self.schema.table_len();
        let have = (self.transport)
            .remote_region_len(peer, self.config.region)
            .unwrap_or(0);
        if have < need {
            tracing::error!(me = %self.member(self.me), %peer, have, need, "sst: a late member's table region is too small; suspecting it");
            return Ok(self.mark_suspected(row, Suspicion::Transport));
        }
        self.restart_watch(row);
        if !self.suspected[row] {
            self.post_whole_row(row)?;
        }
        tracing::info!(me = %self.member(self.me), %peer, "sst: late member connected; row pushed");
        Ok(false)
    }
}

impl<T: Transport> Sst<T> {
    /// Restarts `row`'s failure-detector clock from now (a member that just connected).
    fn restart_watch(&mut self, row: usize) {
        let now = self.transport.now();
        let beat = self.get(row, self.schema.heartbeat());
        let w = &mut self.watch[row];
        w.last_heartbeat = beat;
        w.last_change = now;
        w.outstanding = None;
        w.heard = false;
    }

    /// The incarnation of `row`'s member this table knows: 0 for a link up from the start,
    /// else the one of the last `PeerConnected` it accepted for the row (see
    /// [`readmit`](Sst::readmit)). While the row is suspected, the suspicion is about it (and
    /// every earlier one).
    pub fn known_incarnation(&self, row: usize) -> u64 {
        self.known.get(row).copied().unwrap_or(0)
    }

    /// Makes `node`'s row wait for exactly `incarnation` of it: until
    /// [`link_expected`](Sst::link_expected), the row reads absent (nothing is written to it,
    /// it is never suspected for silence), and a `PeerConnected` of another incarnation
    /// suspects the row ([`Suspicion::Known`]: not reported, not published). For a
    /// membership layer starting a view's table with a member whose new incarnation the view
    /// names but whose link has not come up here yet: the member is *not yet connected*, not
    /// failed. A fresh table over a shared endpoint ([`Mux`](squall_transport::mux::Mux))
    /// cannot tell that incarnation from an older one by itself (it knows none), so the layer
    /// that readmitted it says when the link is up. Does nothing for a suspected row or an
    /// unknown node.
    ///
    /// ```
    /// use squall_sst::{SchemaBuilder, Sst, SstConfig};
    /// use squall_transport::{NodeId, RegionId, RegionSpec};
    /// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// let schema = SchemaBuilder::new(3).build()?;
    /// let layout = [RegionSpec::new(RegionId(0), schema.table_len())];
    /// let members = vec![NodeId(0), NodeId(1), NodeId(2)];
    /// let mut t = Vec::new();
    /// for node in ThreadedFabric::new(ThreadedConfig::default())?.cluster(3, &layout)? {
    ///     t.push(Sst::new(node, schema.clone(), SstConfig::new(RegionId(0), members.clone()))?);
    /// }
    /// t[0].expect_incarnation(NodeId(2), 7);
    /// assert!(t[0].is_absent(2) && !t[0].is_suspected(2));
    /// assert_eq!(t[0].expected_incarnation(2), Some(7));
    /// // The membership layer saw incarnation 7 connect and readmitted it: the row is live.
    /// assert!(t[0].link_expected(NodeId(2))?);
    /// assert!(!t[0].is_absent(2) && t[0].known_incarnation(2) == 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn expect_incarnation(&mut self, node: NodeId, incarnation: u64) {
        if let Some(row) = self.row_of(node)
            && row != self.me
            && !self.suspected[row]
        {
            self.expected[row] = Some(incarnation);
            self.absent[row] = true;
            self.watch[row].outstanding = None;
            tracing::info!(me = %self.member(self.me), peer = %node, incarnation, "sst: waiting for a member's new incarnation to link");
        }
    }

    /// Suspects `incarnation` of `node` (and every earlier one), which this member never
    /// linked: it publishes a suspected flag that names that incarnation, so peers that count
    /// it adopt the suspicion (the flag is above the incarnation they know) and cut it. For a
    /// membership layer that waited in vain for the link of a new incarnation its view names
    /// (a one-way partition between that process and this member): it counts the member
    /// failed as it would a silent one. The row is frozen and suspected (it was already if the
    /// layer had suspected the old incarnation); a pending incarnation up to `incarnation` is
    /// dropped, and a later `PeerConnected` of it is ignored (a newer one is held pending as
    /// usual). Does nothing for this member's own row or an unknown node; publishes nothing
    /// once this member [is accused](Sst::is_accused).
    ///
    /// ```
    /// use squall_sst::{SchemaBuilder, Sst, SstConfig};
    /// use squall_transport::{NodeId, RegionId, RegionSpec};
    /// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// let schema = SchemaBuilder::new(3).build()?;
    /// let layout = [RegionSpec::new(RegionId(0), schema.table_len())];
    /// let members = vec![NodeId(0), NodeId(1), NodeId(2)];
    /// let mut t = Vec::new();
    /// for node in ThreadedFabric::new(ThreadedConfig::default())?.cluster(3, &layout)? {
    ///     t.push(Sst::new(node, schema.clone(), SstConfig::new(RegionId(0), members.clone()))?);
    /// }
    /// // n0 gives up on incarnation 0 of n2 (the one n1 counts): n1 adopts the suspicion.
    /// t[0].suspect_incarnation(NodeId(2), 0)?;
    /// assert!(t[0].is_suspected(2) && t[0].known_incarnation(2) == 0);
    /// t[1].poll_once()?;
    /// assert!(t[1].is_suspected(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn suspect_incarnation(&mut self, node: NodeId, incarnation: u64) -> Result<(), SstError> {
        let Some(row) = self.row_of(node).filter(|&r| r != self.me) else {
            return Ok(());
        };
        self.known[row] = self.known[row].max(incarnation);
        if self.pending[row].is_some_and(|p| p <= incarnation) {
            self.pending[row] = None;
        }
        self.expected[row] = None;
        if !self.mark_suspected(row, Suspicion::Local) {
            // Already suspected: publish the flag again, now naming `incarnation`.
            self.deferred.retain(|&(r, _)| r != row);
            if self.publish_flag(row) {
                self.push(self.schema.suspected().range())?;
            }
            return Ok(());
        }
        self.after_suspicions()
    }

    /// The incarnation `row` waits for (see [`expect_incarnation`](Sst::expect_incarnation)).
    pub fn expected_incarnation(&self, row: usize) -> Option<u64> {
        self.expected.get(row).copied().flatten()
    }

    /// The incarnation `node`'s row waits for is linked (the caller's own table polled its
    /// `PeerConnected`, so the shared endpoint's link to `node` leads to it): the row comes up
    /// as a late member's does (region checked, detector clock restarted, the whole local row
    /// pushed). Returns whether the row waited (false: nothing done).
    pub fn link_expected(&mut self, node: NodeId) -> Result<bool, SstError> {
        let Some(row) = self.row_of(node) else {
            return Ok(false);
        };
        let Some(incarnation) = self.expected.get_mut(row).and_then(Option::take) else {
            return Ok(false);
        };
        if self.suspected[row] {
            return Ok(false);
        }
        if self.link_up(row, incarnation)? {
            self.after_suspicions()?;
        }
        Ok(true)
    }

    /// The newer incarnation of `row`'s suspected member that connected and waits to be
    /// readmitted, if any (see [`readmit`](Sst::readmit)).
    pub fn pending_incarnation(&self, row: usize) -> Option<u64> {
        self.pending.get(row).copied().flatten()
    }

    /// The rows whose suspected member has a newer incarnation waiting to be readmitted.
    pub fn pending_rows(&self) -> Vec<usize> {
        (0..self.rows())
            .filter(|&r| self.pending[r].is_some())
            .collect()
    }

    /// Readmits `row`'s member as its pending newer incarnation: the row is no longer
    /// suspected (only the incarnations before it stay suspected: this member's published
    /// flag for the row keeps its value, which the new incarnation is not below), its detector
    /// clock restarts, and the whole local row is pushed to it. The row's memory is what the
    /// new incarnation wrote into it, or the frozen old values until it does (it pushes its
    /// whole row when it connects). Returns whether there was an incarnation to readmit.
    ///
    /// The caller decides when: a membership layer readmits only once the old incarnation is
    /// in none of the views it could still count, so a proposal never counts the old
    /// incarnation's vote or state as the new one's.
    pub fn readmit(&mut self, row: usize) -> Result<bool, SstError> {
        let Some(incarnation) = self.pending.get_mut(row).and_then(Option::take) else {
            return Ok(false);
        };
        self.suspected[row] = false;
        self.known[row] = incarnation;
        self.deferred.retain(|&(r, _)| r != row);
        self.restart_watch(row);
        self.post_whole_row(row)?;
        let peer = self.member(row);
        tracing::info!(me = %self.member(self.me), %peer, incarnation, "sst: member readmitted as a new incarnation; row pushed");
        Ok(true)
    }
}

fn row_word(row: usize, row_len: usize, word: usize) -> usize {
    row * row_len / 8 + word
}
