//! The group: the membership core driving one round-robin epoch per view, as one
//! [`TotalOrder`] endpoint.
//!
//! A [`Group`] owns the transport (shared through a [`Mux`] between the GMS core and the
//! current epoch), the [`Gms`] core and the [`RoundRobin`] epoch of the installed view. Epochs
//! alternate between two region sets (`view id mod 2`): on installing view `v + 1` a member
//! delivers epoch `v` up to the trim, hands its own messages past the trim back as
//! [`Upcall::Discarded`], zeroes its copy of set `v mod 2` (which view `v + 2` will use) and
//! starts epoch `v + 1` on the other set, with delivery positions continuing. See
//! `docs/MEMBERSHIP.md` for why reusing the sets is safe.

use std::time::Duration;

use squall_ordering::{Delivery, SubmitError, TotalOrder, Upcall};
use squall_round_robin::{Config as EpochConfig, FsyncPolicy, Mode, RoundRobin};
use squall_transport::mux::{Mux, MuxHandle};
use squall_transport::{NodeId, RegionId, RegionSpec, Transport};
use thiserror::Error;

use crate::config::GmsConfig;
use crate::gms::{Epoch, Gms, GmsError, GmsEvent};
use crate::log::{Durable, Recovered};
use crate::view::View;

/// A group's configuration: the membership core's, a template for every view's epoch, and the
/// two epoch region sets.
///
/// ```
/// use squall_membership::{GmsConfig, group::GroupConfig};
/// use squall_round_robin::Config;
/// use squall_transport::{NodeId, RegionId};
/// let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
/// let cfg = GroupConfig::new(
///     GmsConfig::new(RegionId(0), ids.clone(), ids.clone()),
///     Config::new(ids),
/// );
/// assert!(cfg.validate().is_ok());
/// assert_eq!(cfg.sets, [(RegionId(1), RegionId(2)), (RegionId(3), RegionId(4))]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    /// The membership core.
    pub gms: GmsConfig,
    /// Template for each view's epoch (window, slot and payload sizes, chunking, relay). Its
    /// members, senders, regions and view are set per view; its mode is [`Mode::Atomic`] or
    /// [`Mode::Durable`], whose `path` is then a *directory* holding one log per view
    /// ([`epoch_log`](GroupConfig::epoch_log)); its SST timing is unused (epochs leave failure
    /// detection to the GMS).
    pub epoch: EpochConfig,
    /// The two epoch region sets, `(table, large)`: view `v` runs on set `v mod 2`.
    pub sets: [(RegionId, RegionId); 2],
}

impl GroupConfig {
    /// `gms` and the `epoch` template, with the epoch sets on the four region ids after the
    /// GMS region.
    pub fn new(gms: GmsConfig, epoch: EpochConfig) -> GroupConfig {
        let r = gms.region.0;
        GroupConfig {
            sets: [
                (RegionId(r + 1), RegionId(r + 2)),
                (RegionId(r + 3), RegionId(r + 4)),
            ],
            gms,
            epoch,
        }
    }

    /// Durable epochs: the log file of view `view`'s epoch (`epoch-<view>.log` in the template's
    /// directory); `None` for atomic epochs.
    pub fn epoch_log(&self, view: u64) -> Option<std::path::PathBuf> {
        match &self.epoch.mode {
            Mode::Durable { path, .. } => Some(path.join(format!("epoch-{view:020}.log"))),
            _ => None,
        }
    }

    /// The epoch configuration of view `view` with `members` (every member a sender).
    pub fn epoch_for(&self, view: u64, members: Vec<NodeId>) -> EpochConfig {
        let (table_region, large_region) = self.sets[(view % 2) as usize];
        let mode = match (&self.epoch.mode, self.epoch_log(view)) {
            (Mode::Durable { fsync, .. }, Some(path)) => Mode::Durable {
                path,
                fsync: *fsync,
            },
            _ => Mode::Atomic,
        };
        EpochConfig {
            members,
            senders: Vec::new(),
            mode,
            table_region,
            large_region,
            view,
            ..self.epoch.clone()
        }
    }

    /// Checks every setting.
    pub fn validate(&self) -> Result<(), GroupError> {
        self.gms.validate().map_err(GmsError::Config)?;
        if self.epoch.mode == Mode::Unordered {
            return Err(GroupError::Config(
                "the epoch template's mode must be Atomic or Durable (whose path is the directory of the per-view epoch logs)",
            ));
        }
        if self.gms.shards.shards != 1 {
            return Err(GroupError::Config(
                "a group runs one round-robin epoch per view: the shard layout must have one shard",
            ));
        }
        let mut ids = vec![self.gms.region];
        for &(t, l) in &self.sets {
            ids.extend([t, l]);
        }
        if (1..ids.len()).any(|i| ids[..i].contains(&ids[i])) {
            return Err(GroupError::Config(
                "the GMS region and the four epoch regions must all differ",
            ));
        }
        // The largest epoch: every universe node a member.
        self.epoch_for(0, self.gms.universe.clone())
            .validate()
            .map_err(|e| GroupError::Epoch(e.into()))?;
        Ok(())
    }
}

/// Why a group could not be set up, or stopped.
#[derive(Debug, Error)]
pub enum GroupError {
    /// A setting that cannot work.
    #[error("group configuration: {0}")]
    Config(&'static str),
    /// The membership core.
    #[error(transparent)]
    Gms(#[from] GmsError),
    /// A view's epoch could not be set up.
    #[error("round-robin epoch: {0}")]
    Epoch(#[from] squall_round_robin::Error),
    /// A durable epoch log could not be read, cut or replayed.
    #[error("epoch log: {0}")]
    Log(#[from] squall_round_robin::log::LogError),
    /// A replayed epoch log does not continue the positions before it.
    #[error(
        "replaying the epoch log of view {view}: position {found} where {expected} was expected"
    )]
    Replay {
        /// The view.
        view: u64,
        /// The position the log holds.
        found: u64,
        /// The position that would continue the replay.
        expected: u64,
    },
    /// A trim could not be applied (a bug: the core computed it without this member's counts).
    #[error("applying the trim of view {view}: {error}")]
    Trim {
        /// The view the trim ends.
        view: u64,
        /// What was wrong.
        error: squall_round_robin::TrimError,
    },
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Views installed here after the first.
    pub views: u64,
    /// Own messages past a trim, reported as [`Upcall::Discarded`].
    pub discarded: u64,
    /// Messages delivered when a trim was applied (past the stable prefix of their view).
    pub delivered_at_trim: u64,
    /// Messages replayed from the epoch logs after a total restart.
    pub replayed: u64,
}

/// The sequence number that ends a trim: a ragged trim is a gap-free round-robin prefix, so
/// its messages are exactly those below the sum of its counts.
fn trim_end(trim: &crate::trim::Trim) -> u64 {
    trim.counts.iter().map(|&(_, c)| c).sum()
}

/// Lets the core wedge the current epoch (or report empty counts when there is none).
struct Wedger<'a, T: Transport> {
    epoch: Option<&'a mut RoundRobin<MuxHandle<T>>>,
    frozen: &'a mut bool,
    /// Restarting: what the last view's epoch log holds.
    logged: Option<&'a [u64]>,
}

impl<T: Transport> Epoch for Wedger<'_, T> {
    fn wedge(&mut self, view: &View) -> Vec<u64> {
        *self.frozen = true;
        match (&mut self.epoch, self.logged) {
            (Some(rr), _) => rr.wedge(),
            (None, Some(l)) => l.to_vec(),
            (None, None) => vec![0; view.members.len()],
        }
    }
}

/// Per sender (rank order of `members`), how many messages the epoch log at `path` holds as a
/// gap-free prefix: every sequence number up to its last record's is logged or was a null.
fn logged_counts(path: Option<std::path::PathBuf>, members: usize) -> Result<Vec<u64>, GroupError> {
    let Some(path) = path else {
        return Ok(vec![0; members]);
    };
    let (_, rec) = squall_round_robin::log::Log::open(&path, FsyncPolicy::EveryBatch)?;
    let end = rec.records.last().map_or(0, |r| r.seq + 1);
    Ok(squall_round_robin::seq_prefix_counts(end, members))
}

/// One member of a group with views: round-robin total order within each view, virtual
/// synchrony across views.
///
/// Deliveries carry positions that continue across views. When membership changes the group
/// reports [`Upcall::Wedged`] (submits return [`SubmitError::Wedged`] until the next view);
/// on the next view it delivers the rest of the old view up to the trim, reports each of this
/// member's own messages past the trim as [`Upcall::Discarded`] (submit them again), then
/// [`Upcall::View`]. Every member that installs view `v + 1` delivered the same messages in
/// view `v`.
///
/// With durable epochs (`Mode::Durable` in the template) each view's epoch logs to its own
/// file and the trim cuts it; a member built from a log that holds a view restarts: it waits
/// for a majority of that view, the inspector (see [`crate::restart`]) installs the next view,
/// and the member first replays its epoch logs as deliveries with their original positions.
///
/// Not built yet: state transfer to joiners (a joiner's positions restart at 0), more than one
/// shard.
///
/// ```
/// use std::time::Duration;
/// use squall_membership::{GmsConfig, group::{Group, GroupConfig}, log::MemLog};
/// use squall_ordering::{TotalOrder, Upcall};
/// use squall_round_robin::Config;
/// use squall_transport::{NodeId, RegionId};
/// use squall_transport_mem::sim::{Sim, SimConfig, SimNode};
///
/// let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
/// let mut gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
/// gms.heartbeat_interval = Duration::from_micros(50);
/// gms.suspicion_timeout = Duration::from_micros(1500);
/// let epoch = Config { slot_size: 64, max_payload: 64, window: 4, ..Config::new(ids) };
/// let cfg = GroupConfig::new(gms, epoch);
/// let (sim, nodes) = Sim::cluster(SimConfig::seeded(1), 3, &Group::<SimNode, MemLog>::layout(&cfg)?)?;
/// let mut g: Vec<_> = nodes
///     .into_iter()
///     .map(|t| Group::new(t, cfg.clone(), MemLog::default(), None))
///     .collect::<Result<_, _>>()?;
/// g[0].submit(b"before")?;
/// let mut got: Vec<Vec<Upcall<_>>> = vec![Vec::new(); 3];
/// for _ in 0..200 {
///     for (i, m) in g.iter_mut().enumerate() { m.poll(&mut got[i]); }
///     sim.advance(Duration::from_micros(2));
/// }
/// sim.crash(NodeId(2));
/// for _ in 0..3000 {
///     for (i, m) in g[..2].iter_mut().enumerate() { m.poll(&mut got[i]); }
///     sim.advance(Duration::from_micros(2));
/// }
/// assert!(got[0].iter().any(|u| matches!(u, Upcall::View(v) if v.id == 1)));
/// g[1].submit(b"after")?;
/// for _ in 0..200 {
///     for (i, m) in g[..2].iter_mut().enumerate() { m.poll(&mut got[i]); }
///     sim.advance(Duration::from_micros(2));
/// }
/// let delivered = |u: &Vec<Upcall<squall_ordering::Delivery>>| -> Vec<(u64, Vec<u8>)> {
///     u.iter().filter_map(|u| match u { Upcall::Deliver(d) => Some((d.position, d.payload.clone())), _ => None }).collect()
/// };
/// assert_eq!(delivered(&got[0]), vec![(0, b"before".to_vec()), (1, b"after".to_vec())]);
/// assert_eq!(delivered(&got[0]), delivered(&got[1]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Group<T: Transport, L: Durable> {
    cfg: GroupConfig,
    mux: Mux<T>,
    gms: Gms<MuxHandle<T>, L>,
    /// The epoch of `view` (none outside any view, or once stopped).
    epoch: Option<RoundRobin<MuxHandle<T>>>,
    view: Option<View>,
    /// The core wedged the epoch: it is never polled again.
    frozen: bool,
    reported_wedge: bool,
    /// The position of the next delivery.
    position: u64,
    stopped: Option<String>,
    /// Restarting from the logs: what the last view's epoch log holds (the core publishes it
    /// as this member's received counts); the epoch starts once the restart view is installed.
    restart_logged: Option<Vec<u64>>,
    events: Vec<GmsEvent>,
    scratch: Vec<Upcall<Delivery>>,
    stats: GroupStats,
}

impl<T: Transport, L: Durable> std::fmt::Debug for Group<T, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("me", &self.gms.id())
            .field("view", &self.view.as_ref().map(|v| v.id))
            .field("frozen", &self.frozen)
            .field("position", &self.position)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl<T: Transport, L: Durable> Group<T, L> {
    /// The regions every universe node registers: the GMS table, then both epoch sets (table
    /// and large-message region each), sized for an epoch of the whole universe.
    pub fn layout(cfg: &GroupConfig) -> Result<Vec<RegionSpec>, GroupError> {
        cfg.validate()?;
        let mut out = vec![Gms::<T, L>::layout(&cfg.gms)?];
        for v in 0..2 {
            out.extend(
                RoundRobin::<T>::layout(&cfg.epoch_for(v, cfg.gms.universe.clone()))
                    .map_err(|e| GroupError::Epoch(e.into()))?,
            );
        }
        Ok(out)
    }

    /// Sets the member up over `transport` (with the regions of [`layout`](Group::layout)
    /// registered on every universe node). `log` and `recovered` are the membership core's.
    /// A fresh member of view 0 starts its epoch at once; an outsider waits for a view that
    /// names it; a member whose log holds a view restarts (total restart, see
    /// [`crate::restart`]): views before the last are cut again to their logged trims, and no
    /// epoch runs until the restart view is installed (submits answer `NotASender` until then).
    pub fn new(
        transport: T,
        cfg: GroupConfig,
        log: L,
        recovered: Option<&Recovered>,
    ) -> Result<Group<T, L>, GroupError> {
        cfg.validate()?;
        let mut regions = vec![cfg.gms.region];
        for &(t, l) in &cfg.sets {
            regions.extend([t, l]);
        }
        let mux = Mux::new(transport, &regions);
        let gms = Gms::new(mux.handle(), cfg.gms.clone(), log, recovered)?;
        let mut g = Group {
            cfg,
            mux,
            gms,
            epoch: None,
            view: None,
            frozen: false,
            reported_wedge: false,
            position: 0,
            stopped: None,
            restart_logged: None,
            events: Vec::new(),
            scratch: Vec::new(),
            stats: GroupStats::default(),
        };
        match (g.gms.view().cloned(), g.gms.restarting().is_some()) {
            (Some(v), true) => {
                // Views before the last ended with a logged decision: cut their epoch logs to
                // it again (a crash may have come between logging it and cutting).
                if let Some(rec) = recovered {
                    for old in 0..v.id {
                        if let (Some(d), Some(path)) = (rec.decision_for(old), g.cfg.epoch_log(old))
                            && path.exists()
                        {
                            squall_round_robin::log::Log::cut(&path, trim_end(&d.trim))?;
                        }
                    }
                }
                g.restart_logged = Some(logged_counts(g.cfg.epoch_log(v.id), v.members.len())?);
                g.view = Some(v);
            }
            (Some(v), false) => g.start_epoch(v)?,
            (None, _) => {}
        }
        Ok(g)
    }

    /// Restart: cuts the last view's epoch log past the restart trim and replays every epoch
    /// log of this member, view by view, as deliveries with their original positions.
    fn replay(
        &mut self,
        last: &View,
        trim: &crate::trim::Trim,
        upcalls: &mut Vec<Upcall<Delivery>>,
    ) -> Result<(), GroupError> {
        if self.cfg.epoch_log(last.id).is_none() {
            return Ok(());
        }
        let mut next: Option<u64> = None;
        for v in 0..=last.id {
            let Some(path) = self.cfg.epoch_log(v) else {
                continue;
            };
            let records = if v == last.id {
                squall_round_robin::log::Log::cut(&path, trim_end(trim))?
            } else if path.exists() {
                squall_round_robin::log::Log::open(&path, FsyncPolicy::EveryBatch)?
                    .1
                    .records
            } else {
                continue;
            };
            for r in records {
                let expected = next.unwrap_or(r.position);
                if r.position != expected {
                    return Err(GroupError::Replay {
                        view: v,
                        found: r.position,
                        expected,
                    });
                }
                next = Some(r.position + 1);
                upcalls.push(Upcall::Deliver(Delivery {
                    position: r.position,
                    sender: r.sender,
                    payload: r.payload,
                }));
                self.stats.replayed += 1;
            }
        }
        self.position = next.unwrap_or(0);
        Ok(())
    }

    /// The membership core.
    pub fn gms(&self) -> &Gms<MuxHandle<T>, L> {
        &self.gms
    }

    /// The installed view, if this node is a member.
    pub fn view(&self) -> Option<&View> {
        self.view.as_ref()
    }

    /// The current view's epoch.
    pub fn epoch(&self) -> Option<&RoundRobin<MuxHandle<T>>> {
        self.epoch.as_ref()
    }

    /// Why the group stopped here, if it did.
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.as_deref()
    }

    /// Counters.
    pub fn stats(&self) -> GroupStats {
        self.stats
    }

    /// Asks to leave gracefully: the group keeps running until the view without this member
    /// is installed; it then delivers the old view up to the trim, reports its own messages
    /// past it as [`Upcall::Discarded`], and stops (`stopped()` says it left).
    pub fn leave(&mut self) -> Result<(), GroupError> {
        Ok(self.gms.leave()?)
    }

    /// The position the next delivered message gets.
    pub fn next_position(&self) -> u64 {
        self.epoch
            .as_ref()
            .map_or(self.position, RoundRobin::next_position)
    }

    fn start_epoch(&mut self, view: View) -> Result<(), GroupError> {
        let cfg = self.cfg.epoch_for(view.id, view.members.clone());
        self.epoch = Some(RoundRobin::epoch(self.mux.handle(), cfg, self.position)?);
        self.view = Some(view);
        self.frozen = false;
        self.reported_wedge = false;
        Ok(())
    }

    fn report_wedge(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) {
        if !self.reported_wedge {
            self.reported_wedge = true;
            upcalls.push(Upcall::Wedged);
        }
    }

    fn stop(&mut self, why: String, upcalls: &mut Vec<Upcall<Delivery>>) {
        if self.stopped.is_none() {
            tracing::warn!(me = %self.gms.id(), reason = %why, "group: stopped");
            self.stopped = Some(why);
            self.epoch = None;
            self.report_wedge(upcalls);
        }
    }

    /// Ends the current epoch with `trim` (if any) and starts `view`'s.
    fn install(
        &mut self,
        view: View,
        trim: Option<crate::trim::Trim>,
        upcalls: &mut Vec<Upcall<Delivery>>,
    ) -> Result<(), GroupError> {
        if self.restart_logged.is_some()
            && self.gms.restarting().is_some()
            && let (Some(t), Some(last)) = (&trim, self.view.take())
        {
            // Restarting, caught up one view from a peer: cut the old view's log to the
            // decision it was installed with; the restart goes on in `view`.
            if let Some(path) = self.cfg.epoch_log(last.id) {
                squall_round_robin::log::Log::cut(&path, trim_end(t))?;
            }
            self.restart_logged = Some(logged_counts(
                self.cfg.epoch_log(view.id),
                view.members.len(),
            )?);
            self.view = Some(view);
            return Ok(());
        }
        if self.restart_logged.take().is_some()
            && let (Some(t), Some(last)) = (&trim, self.view.take())
        {
            self.replay(&last, t, upcalls)?;
            tracing::info!(me = %self.gms.id(), view = last.id, replayed = self.stats.replayed, position = self.position, "group: restarted from the logs");
        }
        if let (Some(trim), Some(mut old), Some(old_view)) =
            (trim, self.epoch.take(), self.view.take())
        {
            let counts: Vec<u64> = old_view.members.iter().map(|&m| trim.count(m)).collect();
            let before = upcalls.len();
            let back = old
                .deliver_up_to(&counts, upcalls)
                .map_err(|error| GroupError::Trim {
                    view: old_view.id,
                    error,
                })?;
            self.stats.delivered_at_trim += (upcalls.len() - before) as u64;
            self.stats.discarded += back.len() as u64;
            upcalls.extend(back.into_iter().map(Upcall::Discarded));
            self.position = old.next_position();
            drop(old);
            if let Some(path) = self.cfg.epoch_log(old_view.id) {
                // The decision is logged (the core logs before acting): cut what it discards.
                squall_round_robin::log::Log::cut(&path, trim_end(&trim))?;
            }
            // No peer writes set `old_view.id mod 2` again before this member acks view
            // `view.id + 1`, which it does only after this point.
            let set = self.cfg.epoch_for(old_view.id, old_view.members.clone());
            self.mux.with(|t| RoundRobin::<T>::zero_regions(t, &set));
        }
        if !view.contains(self.gms.id()) {
            // A leaver: it delivered up to the trim; the core reports `Left` next.
            return Ok(());
        }
        self.stats.views += u64::from(view.id > 0);
        upcalls.push(Upcall::View(squall_ordering::View {
            id: view.id,
            members: view.members.clone(),
            leader: Some(view.leader),
        }));
        tracing::info!(me = %self.gms.id(), view = view.id, members = ?view.members, position = self.position, "group: view installed");
        self.start_epoch(view)
    }

    fn step(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> Result<bool, GroupError> {
        let mut busy = false;
        if !self.frozen
            && let Some(rr) = &mut self.epoch
        {
            self.scratch.clear();
            busy |= rr.poll(&mut self.scratch);
            let mut wedged = false;
            for u in self.scratch.drain(..) {
                match u {
                    Upcall::Wedged => wedged = true,
                    other => upcalls.push(other),
                }
            }
            if wedged {
                self.report_wedge(upcalls);
            }
        }
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        let mut wedger = Wedger::<T> {
            epoch: self.epoch.as_mut(),
            frozen: &mut self.frozen,
            logged: self.restart_logged.as_deref(),
        };
        let r = self.gms.poll(&mut wedger, &mut events);
        let mut result = Ok(());
        for e in events.drain(..) {
            match e {
                GmsEvent::Wedged { .. } => self.report_wedge(upcalls),
                GmsEvent::ViewInstalled { view, trim } => {
                    busy = true;
                    if let Err(e) = self.install(view, trim, upcalls) {
                        result = Err(e);
                        break;
                    }
                }
                GmsEvent::Stopped(why) => self.stop(why.to_string(), upcalls),
            }
        }
        self.events = events;
        result?;
        match r {
            Ok(b) => Ok(busy | b),
            Err(GmsError::Stopped(why)) => {
                self.stop(why.to_string(), upcalls);
                Ok(busy)
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl<T: Transport, L: Durable> TotalOrder for Group<T, L> {
    fn me(&self) -> NodeId {
        self.gms.id()
    }

    fn submit(&mut self, payload: &[u8]) -> Result<(), SubmitError> {
        if let Some(why) = &self.stopped {
            return Err(SubmitError::Stopped(why.clone()));
        }
        match &mut self.epoch {
            Some(rr) if !self.frozen => rr.submit(payload),
            Some(_) => Err(SubmitError::Wedged),
            None => Err(SubmitError::NotASender(format!(
                "{} is not in a view yet",
                self.gms.id()
            ))),
        }
    }

    fn poll(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> bool {
        if self.stopped.is_some() {
            return false;
        }
        match self.step(upcalls) {
            Ok(busy) => busy,
            Err(e) => {
                self.stop(e.to_string(), upcalls);
                true
            }
        }
    }

    fn wait(&mut self, timeout: Duration) {
        self.gms.wait(timeout);
    }

    fn waker(&self) -> squall_transport::Waker {
        self.gms.sst().transport().waker()
    }
}
