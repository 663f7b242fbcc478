//! The group: the membership core driving one round-robin epoch per view and shard (each member
//! runs its own shard's), as one [`TotalOrder`] endpoint.
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
use squall_round_robin::log::{Log, ReadMode, Reader, Skimmed};
use squall_round_robin::{Config as EpochConfig, FsyncPolicy, Mode, RoundRobin};
use squall_transport::mux::{Mux, MuxHandle};
use squall_transport::{NodeId, RegionId, RegionSpec, Transport};
use thiserror::Error;

use crate::config::GmsConfig;
use crate::gms::{Epoch, Gms, GmsError, GmsEvent};
use crate::log::{Durable, Record, Recovered};
use crate::snapshot::{
    CheckpointError, CheckpointWriter, Checkpointed, CrashPoint, Snapshot, SnapshotError,
};
use crate::transfer::{Completed, Transfer, TransferConfig, TransferError, TransferredState};
use crate::view::{Inadequate, ShardId, ShardLayout, View};

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
    /// State transfer to joiners (its region, chunking and bounds).
    pub transfer: TransferConfig,
    /// Total restart: how many upcalls of the replay (the epoch logs' deliveries, then what
    /// follows them) [`poll`](TotalOrder::poll) hands out at most per call; the rest waits in
    /// a backlog for the next calls. Between two calls the application handles what it got
    /// and the next `poll` runs the membership protocol and the failure detector's heartbeats,
    /// so a long replay no longer silences the member for longer than its peers' suspicion
    /// timeout. The epoch logs are read in slices as the batches go out (see
    /// [`replay_buffer`](GroupConfig::replay_buffer)). Default 256; at least 1.
    pub replay_batch: usize,
    /// Total restart: the bytes of epoch log held in memory at once while reading the logs
    /// ([`squall_round_robin::log::Reader`]'s buffer; a record longer than this is read whole,
    /// so the bound is this or the longest record, whichever is larger). When the group is
    /// created each log is *skimmed* (frames and headers: the logged counts, the cut of a
    /// torn tail or past a logged trim); the replay then decodes it once, in slices, as
    /// [`poll`](TotalOrder::poll) hands out its batches. Default 1 MiB; at least 64 bytes.
    pub replay_buffer: usize,
    /// Where [`Group::checkpoint`] writes and syncs its file: on a writer thread the group
    /// owns (the default: the polling thread never waits on the disk) or inline (the
    /// simulator's deterministic mode).
    pub checkpoint_writer: CheckpointWriter,
    /// Per-subgroup epoch settings (Derecho's subgroup profiles), by subgroup index: every
    /// epoch of that subgroup's shards runs with its [`EpochProfile`] (window, slot and payload
    /// sizes, chunking, `fsync` policy) instead of the template's. A subgroup without an entry
    /// runs on the template; empty (the default), one template serves every subgroup, as
    /// before. Each node sizes its epoch regions for the subgroups it may be placed in
    /// ([`Group::layout_of`]). Like the layout, the same at every node: every member derives a
    /// shard's epoch settings from it and the shard's subgroup, which the view names.
    pub profiles: std::collections::BTreeMap<usize, EpochProfile>,
}

/// One subgroup's epoch settings ([`GroupConfig::profiles`]; Derecho's subgroup profile: its
/// own SST and multicast window and message sizes). They replace the template's
/// ([`GroupConfig::epoch`]) for every epoch of the subgroup's shards; the rest (relay, regions,
/// mode, log index) stays the template's.
///
/// A store subgroup of large messages and a small-message control subgroup, with the control
/// subgroup's nodes reserved for it, so that they register small regions:
///
/// ```
/// use squall_membership::{GmsConfig, group::{EpochProfile, Group, GroupConfig}, log::MemLog};
/// use squall_membership::view::{Layout, ShardPolicy, SubgroupPolicy, Subgroups};
/// use squall_round_robin::Config;
/// use squall_transport::NodeId;
/// use squall_transport::RegionId;
/// use squall_transport_mem::sim::SimNode;
///
/// let ids: Vec<NodeId> = (0..6).map(NodeId).collect();
/// let mut gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
/// let control = ShardPolicy { min: 2, max: 3, reserved: vec![NodeId(3), NodeId(4), NodeId(5)] };
/// gms.layout = Some(Layout::new(Subgroups::new(vec![
///     SubgroupPolicy::even_shards(1, 2, 3),
///     SubgroupPolicy { shards: vec![control] },
/// ])));
/// let mut cfg = GroupConfig::new(gms, Config::new(ids));
/// let store = EpochProfile { window: 8, max_payload: 4 << 20, ..EpochProfile::of(&cfg.epoch) };
/// let small = EpochProfile { window: 4, slot_size: 64, max_payload: 64, ..EpochProfile::of(&cfg.epoch) };
/// cfg.profiles.insert(0, store);
/// cfg.profiles.insert(1, small);
/// assert!(cfg.validate().is_ok());
/// assert_eq!(cfg.subgroup_epoch(1).max_payload, 64);
/// let bytes = |node| -> usize {
///     Group::<SimNode, MemLog>::layout_of(&cfg, NodeId(node)).unwrap().iter().map(|r| r.len).sum()
/// };
/// assert!(bytes(0) > 100 << 20); // may be placed in the store subgroup: 2 x 3 x 8 x 4 MiB
/// assert!(bytes(3) * 50 < bytes(0)); // reserved for the control subgroup: its regions
/// cfg.profiles.insert(2, small); // no subgroup 2
/// assert!(cfg.validate().unwrap_err().to_string().contains("subgroup 2"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochProfile {
    /// Messages per sender in flight; also the SMC slots and large buffers per sender
    /// ([`EpochConfig::window`]).
    pub window: usize,
    /// The largest payload carried inline in a slot, in bytes ([`EpochConfig::slot_size`]).
    pub slot_size: usize,
    /// The largest payload at all, in bytes ([`EpochConfig::max_payload`]); equal to
    /// `slot_size`: no large messages and no large-message buffers.
    pub max_payload: usize,
    /// Bytes per one-sided write of a large message ([`EpochConfig::chunk_size`]).
    pub chunk_size: usize,
    /// With durable epochs, the subgroup's `fsync` policy; `None`: the template's. Refused
    /// when the epochs are not durable.
    pub fsync: Option<FsyncPolicy>,
}

impl EpochProfile {
    /// The template's settings (`fsync`: the template's), to change a field or two of.
    pub fn of(template: &EpochConfig) -> EpochProfile {
        EpochProfile {
            window: template.window,
            slot_size: template.slot_size,
            max_payload: template.max_payload,
            chunk_size: template.chunk_size,
            fsync: None,
        }
    }

    fn apply(&self, cfg: &mut EpochConfig) {
        cfg.window = self.window;
        cfg.slot_size = self.slot_size;
        cfg.max_payload = self.max_payload;
        cfg.chunk_size = self.chunk_size;
        if let (Some(f), Mode::Durable { fsync, .. }) = (self.fsync, &mut cfg.mode) {
            *fsync = f;
        }
    }
}

/// Why a subgroup's epoch settings ([`GroupConfig::profiles`]) cannot work.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ProfileError {
    /// The profile names a subgroup the layout does not have.
    #[error("the layout has {subgroups} subgroup(s), so there is no such subgroup to configure")]
    UnknownSubgroup {
        /// The layout's number of subgroups.
        subgroups: usize,
    },
    /// The profile sets an `fsync` policy but the epochs are not durable.
    #[error("an fsync policy is set but the template's mode is not Durable")]
    FsyncWithoutDurable,
    /// The subgroup's epoch (for its largest shard) does not validate.
    #[error("{0}")]
    Epoch(#[source] squall_round_robin::ConfigError),
}

impl GroupConfig {
    /// `gms` and the `epoch` template, with the epoch sets on the four region ids after the
    /// GMS region and the transfer region on the fifth ([`TransferConfig::new`] defaults).
    pub fn new(gms: GmsConfig, epoch: EpochConfig) -> GroupConfig {
        let r = gms.region.0;
        GroupConfig {
            sets: [
                (RegionId(r + 1), RegionId(r + 2)),
                (RegionId(r + 3), RegionId(r + 4)),
            ],
            transfer: TransferConfig::new(RegionId(r + 5)),
            replay_batch: 256,
            replay_buffer: squall_round_robin::log::DEFAULT_READ_BUFFER,
            checkpoint_writer: CheckpointWriter::Thread,
            profiles: std::collections::BTreeMap::new(),
            gms,
            epoch,
        }
    }

    /// Durable epochs with one shard: the log file of view `view`'s epoch (`epoch-<view>.log`
    /// in the template's directory); `None` for atomic epochs. With several shards see
    /// [`epoch_log_of`](GroupConfig::epoch_log_of) (this is its shard 0).
    pub fn epoch_log(&self, view: u64) -> Option<std::path::PathBuf> {
        self.epoch_log_of(view, 0)
    }

    /// Durable epochs: the log file of shard `shard`'s epoch in view `view`, in the template's
    /// directory (each member has its own): `epoch-<view>.log` with one shard (as before shards
    /// existed), `epoch-<view>-shard<shard>.log` with several, so a log is never replayed as
    /// another shard's. A member runs at most one shard per view, so its directory holds at
    /// most one log per view. `None` for atomic epochs.
    ///
    /// ```
    /// use squall_membership::{GmsConfig, group::GroupConfig, view::EvenShards};
    /// use squall_round_robin::{Config, FsyncPolicy, Mode};
    /// use squall_transport::{NodeId, RegionId};
    /// let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
    /// let gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
    /// let mode = Mode::Durable { path: "/data/n0".into(), fsync: FsyncPolicy::EveryBatch };
    /// let mut cfg = GroupConfig::new(gms, Config { mode, ..Config::new(ids) });
    /// assert!(cfg.epoch_log(7).unwrap().ends_with("epoch-00000000000000000007.log"));
    /// cfg.gms.shards = EvenShards { shards: 2, min: 1, max: 2 };
    /// assert!(cfg.epoch_log_of(7, 1).unwrap().ends_with("epoch-00000000000000000007-shard1.log"));
    /// ```
    pub fn epoch_log_of(&self, view: u64, shard: usize) -> Option<std::path::PathBuf> {
        match &self.epoch.mode {
            Mode::Durable { path, .. } if self.gms.shard_layout().shard_count() > 1 => {
                Some(path.join(format!("epoch-{view:020}-shard{shard}.log")))
            }
            Mode::Durable { path, .. } => Some(path.join(format!("epoch-{view:020}.log"))),
            _ => None,
        }
    }

    /// The `fsync` policy the durable epochs' logs are written under ([`FsyncPolicy::EveryBatch`]
    /// when the epochs are not durable): what a power loss can have left unsynced in them,
    /// which the restart's skims are told (`Log::skim_with`).
    ///
    /// ```
    /// use squall_membership::{GmsConfig, group::GroupConfig};
    /// use squall_round_robin::{Config, FsyncPolicy, Mode};
    /// use squall_transport::{NodeId, RegionId};
    /// let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
    /// let gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
    /// let mode = Mode::Durable { path: "/data/n0".into(), fsync: FsyncPolicy::Never };
    /// let cfg = GroupConfig::new(gms, Config { mode, ..Config::new(ids) });
    /// assert_eq!(cfg.epoch_fsync(), FsyncPolicy::Never);
    /// ```
    ///
    /// [`FsyncPolicy::EveryBatch`]: squall_round_robin::FsyncPolicy::EveryBatch
    pub fn epoch_fsync(&self) -> squall_round_robin::FsyncPolicy {
        match &self.epoch.mode {
            Mode::Durable { fsync, .. } => *fsync,
            _ => squall_round_robin::FsyncPolicy::EveryBatch,
        }
    }

    /// The `fsync` policy of shard `shard`'s durable epoch logs (its index in a view's flat
    /// shard list): its subgroup's [`EpochProfile::fsync`] if set, else the template's
    /// ([`epoch_fsync`](GroupConfig::epoch_fsync); also for a shard outside the layout's
    /// shape).
    ///
    /// ```
    /// use squall_membership::{GmsConfig, group::{EpochProfile, GroupConfig}, view::EvenShards};
    /// use squall_round_robin::{Config, FsyncPolicy, Mode};
    /// use squall_transport::{NodeId, RegionId};
    /// let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
    /// let mut gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
    /// gms.shards = EvenShards { shards: 2, min: 1, max: 2 }; // one subgroup of two shards
    /// let mode = Mode::Durable { path: "/data/n0".into(), fsync: FsyncPolicy::Never };
    /// let mut cfg = GroupConfig::new(gms, Config { mode, ..Config::new(ids) });
    /// assert_eq!(cfg.epoch_fsync_of(1), FsyncPolicy::Never); // the template's
    /// let synced = EpochProfile { fsync: Some(FsyncPolicy::EveryBatch), ..EpochProfile::of(&cfg.epoch) };
    /// cfg.profiles.insert(0, synced);
    /// assert!(cfg.validate().is_ok());
    /// assert_eq!(cfg.epoch_fsync_of(0), FsyncPolicy::EveryBatch); // subgroup 0's own
    /// assert_eq!(cfg.epoch_fsync_of(1), FsyncPolicy::EveryBatch);
    /// assert_eq!(cfg.epoch_fsync(), FsyncPolicy::Never); // the template's is unchanged
    /// ```
    pub fn epoch_fsync_of(&self, shard: usize) -> squall_round_robin::FsyncPolicy {
        match &self.shard_template(shard).mode {
            Mode::Durable { fsync, .. } => *fsync,
            _ => squall_round_robin::FsyncPolicy::EveryBatch,
        }
    }

    /// The digest of the epoch settings that must agree across members: the template's
    /// window, slot size, max payload, chunk size, relay (`binomial_from`, `relay`) and mode
    /// (unordered, atomic or durable with its `fsync` policy), then every profile (subgroup,
    /// window, slot size, max payload, chunk size, `fsync`). Left out, as they may differ: the
    /// durable log directory, the region ids and lengths (checked at link-up), the template's
    /// members, senders, view and SST timing (set per view), and the replay, checkpoint and
    /// transfer settings (each member's own). [`Group`] puts it in
    /// [`GmsConfig::driver_settings`] (docs/MEMBERSHIP.md, fifty-second part).
    ///
    /// ```
    /// use squall_membership::{GmsConfig, group::{EpochProfile, GroupConfig}};
    /// use squall_round_robin::Config;
    /// use squall_transport::{NodeId, RegionId};
    /// let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
    /// let cfg = GroupConfig::new(GmsConfig::new(RegionId(0), ids.clone(), ids.clone()), Config::new(ids));
    /// let mut other = cfg.clone();
    /// other.replay_batch = 1; // may differ
    /// assert_eq!(other.settings_digest(), cfg.settings_digest());
    /// other.profiles.insert(0, EpochProfile { window: cfg.epoch.window * 2, ..EpochProfile::of(&cfg.epoch) });
    /// assert_ne!(other.settings_digest(), cfg.settings_digest());
    /// ```
    pub fn settings_digest(&self) -> u64 {
        use squall_round_robin::FsyncPolicy;
        let fsync = |h: &mut crate::settings::Hasher, f: Option<FsyncPolicy>| match f {
            None => h.word(0),
            Some(FsyncPolicy::EveryBatch) => h.word(1),
            Some(FsyncPolicy::EveryRecords(n)) => {
                h.word(2);
                h.word(n);
            }
            Some(FsyncPolicy::Never) => h.word(3),
        };
        let e = &self.epoch;
        let mut h = crate::settings::Hasher::new(3);
        for w in [
            e.window,
            e.slot_size,
            e.max_payload,
            e.chunk_size,
            e.binomial_from,
        ] {
            h.word(w as u64);
        }
        h.word(match e.relay {
            squall_round_robin::Relay::Tree => 0,
            squall_round_robin::Relay::BinomialPipeline => 1,
        });
        match &e.mode {
            Mode::Unordered => h.word(0),
            Mode::Atomic => h.word(1),
            Mode::Durable { fsync: f, .. } => {
                h.word(2);
                fsync(&mut h, Some(*f));
            }
        }
        h.word(self.profiles.len() as u64);
        for (&g, p) in &self.profiles {
            for w in [g, p.window, p.slot_size, p.max_payload, p.chunk_size] {
                h.word(w as u64);
            }
            fsync(&mut h, p.fsync);
        }
        h.finish()
    }

    /// The whole settings digest a [`Group`] of this configuration publishes and logs: the
    /// core's ([`SettingsDigest::of`](crate::settings::SettingsDigest::of)) with
    /// [`settings_digest`](GroupConfig::settings_digest) as its driver word.
    ///
    /// ```
    /// use squall_membership::{GmsConfig, group::GroupConfig};
    /// use squall_round_robin::Config;
    /// use squall_transport::{NodeId, RegionId};
    /// let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
    /// let cfg = GroupConfig::new(GmsConfig::new(RegionId(0), ids.clone(), ids.clone()), Config::new(ids));
    /// let mut wider = cfg.clone();
    /// wider.epoch.window *= 2;
    /// assert_eq!(cfg.settings().differing(&wider.settings()), ["driver (epoch template and profiles)"]);
    /// ```
    pub fn settings(&self) -> crate::settings::SettingsDigest {
        let mut gms = self.gms.clone();
        gms.driver_settings = self.settings_digest();
        crate::settings::SettingsDigest::of(&gms, &gms.shard_layout())
    }

    /// The start-up checks of a restart from `recovered` (a member's recovered GMS log) under
    /// this configuration, as [`Group::new`] makes them before it touches any file, for a
    /// driver that wants to refuse before it connects: every member of the restarted view
    /// still eligible for its subgroup ([`GmsError::NoLongerEligible`]), and the settings the
    /// log was written under (docs/MEMBERSHIP.md, fifty-second and sixty-first parts):
    /// refused if they changed ([`GmsError::SettingsChanged`]), unless
    /// [`GmsConfig::settings_from`] names the log's digest
    /// ([`GmsError::SettingsFromMismatch`] otherwise), only the epoch settings changed
    /// ([`GmsError::SettingsChangeRefused`] otherwise) and the epochs are durable (a restart
    /// with atomic epochs replays nothing; [`GroupError::Config`] otherwise). A log that
    /// holds no view passes.
    ///
    /// ```
    /// use squall_membership::{GmsConfig, GmsError, group::{GroupConfig, GroupError}};
    /// use squall_membership::log::{Durable, MemLog, Record};
    /// use squall_round_robin::{Config, FsyncPolicy, Mode};
    /// use squall_transport::{NodeId, RegionId};
    /// let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
    /// let mut cfg = GroupConfig::new(GmsConfig::new(RegionId(0), ids.clone(), ids.clone()), Config::new(ids.clone()));
    /// cfg.epoch.mode = Mode::Durable { path: std::env::temp_dir(), fsync: FsyncPolicy::Never };
    /// // A log written under `cfg`.
    /// let mut log = MemLog::default();
    /// log.append(&Record::Settings { digest: cfg.settings() })?;
    /// log.append(&Record::Installed { view: 0, members: ids })?;
    /// let (_, rec) = MemLog::open(log.bytes().to_vec());
    /// assert!(cfg.check_restart(&rec).is_ok());
    /// // The fsync policy changed: refused, unless the log's digest is named as the one left.
    /// let mut synced = cfg.clone();
    /// synced.epoch.mode = Mode::Durable { path: std::env::temp_dir(), fsync: FsyncPolicy::EveryBatch };
    /// let e = synced.check_restart(&rec).unwrap_err();
    /// assert!(matches!(e, GroupError::Gms(GmsError::SettingsChanged { .. })), "{e}");
    /// synced.gms.settings_from = Some(cfg.settings().combined());
    /// assert!(synced.check_restart(&rec).is_ok());
    /// # Ok::<(), squall_membership::log::LogError>(())
    /// ```
    pub fn check_restart(&self, recovered: &Recovered) -> Result<(), GroupError> {
        let layout = self.gms.shard_layout();
        crate::restart::check_eligible(recovered, &layout)?;
        let check =
            crate::restart::check_settings(recovered, &self.settings(), self.gms.settings_from)?;
        // A change accepted by `settings_from` keeps the state only if the restart replays
        // it: with atomic epochs nothing is replayed (docs/MEMBERSHIP.md, sixty-first part).
        if matches!(check, crate::restart::SettingsCheck::Accepted { .. })
            && durable_dir_of(self).is_none()
        {
            return Err(GroupError::Config(
                "a settings change at a total restart (settings_from) needs durable epochs: with atomic epochs a restart replays nothing, so the state delivered under the old settings would be lost; restore the old settings or start the group afresh",
            ));
        }
        Ok(())
    }

    /// Subgroup `subgroup`'s epoch template: [`epoch`](GroupConfig::epoch) with the subgroup's
    /// [`EpochProfile`] applied, if [`profiles`](GroupConfig::profiles) has one.
    pub fn subgroup_epoch(&self, subgroup: usize) -> EpochConfig {
        let mut cfg = self.epoch.clone();
        if let Some(p) = self.profiles.get(&subgroup) {
            p.apply(&mut cfg);
        }
        cfg
    }

    /// The subgroup of shard `shard` (its index in a view's flat shard list); `None` past the
    /// shape's last shard.
    fn subgroup_of_shard(&self, shard: usize) -> Option<usize> {
        let mut left = shard;
        for (g, shards) in self.gms.shard_layout().shape().iter().enumerate() {
            if left < shards.len() {
                return Some(g);
            }
            left -= shards.len();
        }
        None
    }

    /// The epoch template of shard `shard`: its subgroup's
    /// ([`subgroup_epoch`](GroupConfig::subgroup_epoch)); the template itself for a shard
    /// outside the shape (no view of a validated configuration has one).
    fn shard_template(&self, shard: usize) -> EpochConfig {
        match self.subgroup_of_shard(shard) {
            Some(g) => self.subgroup_epoch(g),
            None => {
                tracing::warn!(
                    shard,
                    "group: a shard outside the layout's shape; its epoch runs on the template"
                );
                self.epoch.clone()
            }
        }
    }

    /// The flat index of subgroup `subgroup`'s first shard (only names its log file: an empty
    /// subgroup, which validation refuses, has none).
    fn first_shard_of(&self, subgroup: usize) -> usize {
        let shape = self.gms.shard_layout().shape();
        shape.iter().take(subgroup).map(Vec::len).sum()
    }

    /// The epoch configuration of view `view` with `members` (every member a sender); with
    /// durable epochs it logs to shard 0's file.
    pub fn epoch_for(&self, view: u64, members: Vec<NodeId>) -> EpochConfig {
        self.epoch_for_shard(view, 0, members)
    }

    /// The epoch configuration of shard `shard` in view `view` with `members` (the shard's,
    /// every one a sender): its subgroup's settings ([`subgroup_epoch`](GroupConfig::subgroup_epoch));
    /// durable epochs log to [`epoch_log_of`](GroupConfig::epoch_log_of).
    pub fn epoch_for_shard(&self, view: u64, shard: usize, members: Vec<NodeId>) -> EpochConfig {
        self.epoch_from(self.shard_template(shard), view, shard, members)
    }

    /// [`epoch_for_shard`](GroupConfig::epoch_for_shard) from the epoch template `template`.
    fn epoch_from(
        &self,
        template: EpochConfig,
        view: u64,
        shard: usize,
        members: Vec<NodeId>,
    ) -> EpochConfig {
        let (table_region, large_region) = self.sets[(view % 2) as usize];
        let mode = match (&template.mode, self.epoch_log_of(view, shard)) {
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
            ..template
        }
    }

    /// The members of subgroup `subgroup`'s largest epoch, which the regions are sized for: its
    /// largest shard maximum, at most `max_members` (the first universe nodes stand in for
    /// them).
    fn largest_epoch(&self, subgroup: usize) -> Vec<NodeId> {
        let shape = self.gms.shard_layout().shape();
        let max = (shape.get(subgroup).into_iter().flatten())
            .map(|b| b.max)
            .max()
            .unwrap_or(1);
        let n = max.min(self.gms.max_members);
        self.gms.universe.iter().copied().take(n).collect()
    }

    /// The epoch configuration of subgroup `subgroup`'s largest shard on set `view mod 2`,
    /// with `subgroup`'s own settings.
    fn largest_epoch_config(&self, view: u64, subgroup: usize) -> EpochConfig {
        let shard = self.first_shard_of(subgroup);
        let template = self.subgroup_epoch(subgroup);
        self.epoch_from(template, view, shard, self.largest_epoch(subgroup))
    }

    /// Every region a group uses: the GMS table, both epoch sets, the transfer region.
    fn regions(&self) -> Vec<RegionId> {
        let mut ids = vec![self.gms.region];
        for &(t, l) in &self.sets {
            ids.extend([t, l]);
        }
        ids.push(self.transfer.region);
        ids
    }

    /// Checks every setting.
    pub fn validate(&self) -> Result<(), GroupError> {
        self.gms.validate().map_err(GmsError::Config)?;
        if self.epoch.mode == Mode::Unordered {
            return Err(GroupError::Config(
                "the epoch template's mode must be Atomic or Durable (whose path is the directory of the per-view epoch logs)",
            ));
        }
        let layout = self.gms.shard_layout();
        let shape = layout.shape();
        if shape.iter().map(Vec::len).sum::<usize>() > 1 {
            let mins: usize = shape.iter().flatten().map(|b| b.min).sum();
            if mins > self.gms.max_members {
                tracing::warn!(
                    mins,
                    max_members = self.gms.max_members,
                    "group: the shards' minimums exceed max_members"
                );
                return Err(GroupError::Config(
                    "the sum of every shard's minimum (over all subgroups) exceeds max_members: no view could ever give every shard its minimum",
                ));
            }
        }
        if let Some(why) = View::new(0, self.gms.initial.clone(), &layout).inadequate {
            tracing::warn!(%why, "group: the initial view is inadequate");
            return Err(GroupError::Config(
                "the initial view must give every shard of every subgroup its minimum number of members",
            ));
        }
        self.transfer.validate().map_err(GroupError::Config)?;
        if self.replay_batch == 0 {
            return Err(GroupError::Config(
                "replay_batch must be at least 1 (the replay's upcalls handed out per poll)",
            ));
        }
        if self.replay_buffer < 64 {
            return Err(GroupError::Config(
                "replay_buffer must be at least 64 bytes (the epoch log bytes a restart holds in memory at once)",
            ));
        }
        let ids = self.regions();
        if (1..ids.len()).any(|i| ids[..i].contains(&ids[i])) {
            return Err(GroupError::Config(
                "the GMS region, the four epoch regions and the transfer region must all differ",
            ));
        }
        if let Some((&subgroup, _)) = self.profiles.range(shape.len()..).next() {
            return Err(GroupError::Profile {
                subgroup,
                why: ProfileError::UnknownSubgroup {
                    subgroups: shape.len(),
                },
            });
        }
        for (&subgroup, p) in &self.profiles {
            if p.fsync.is_some() && !matches!(self.epoch.mode, Mode::Durable { .. }) {
                return Err(GroupError::Profile {
                    subgroup,
                    why: ProfileError::FsyncWithoutDurable,
                });
            }
        }
        // Each subgroup's largest epoch: a full shard, with the subgroup's settings.
        for subgroup in 0..shape.len() {
            let epoch = self.largest_epoch_config(0, subgroup);
            match (epoch.validate(), self.profiles.contains_key(&subgroup)) {
                (Ok(()), _) => {}
                (Err(e), true) => {
                    return Err(GroupError::Profile {
                        subgroup,
                        why: ProfileError::Epoch(e),
                    });
                }
                (Err(e), false) => return Err(GroupError::Epoch(e.into())),
            }
        }
        Ok(())
    }

    /// The subgroups whose epochs a node that may be placed in `subgroups` (`None`: any) runs:
    /// exactly those listed, as [`View::next`] holds the layout to. (Start-up validation
    /// refuses an empty list and a subgroup outside the shape, `LayoutError::NoSubgroups` and
    /// `LayoutError::SubgroupOutside`.)
    fn eligible_subgroups(&self, subgroups: Option<Vec<usize>>) -> Vec<usize> {
        subgroups.unwrap_or_else(|| (0..self.gms.shard_layout().shape().len()).collect())
    }
}

/// Why a group could not be set up, or stopped.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum GroupError {
    /// A setting that cannot work.
    #[error("group configuration: {0}")]
    Config(&'static str),
    /// A subgroup's epoch settings ([`GroupConfig::profiles`]) cannot work.
    #[error("group configuration: epoch profile of subgroup {subgroup}: {why}")]
    Profile {
        /// The subgroup the profile is for.
        subgroup: usize,
        /// What is wrong.
        #[source]
        why: ProfileError,
    },
    /// The membership core.
    #[error(transparent)]
    Gms(#[from] GmsError),
    /// A view's epoch could not be set up.
    #[error("round-robin epoch: {0}")]
    Epoch(#[from] squall_round_robin::Error),
    /// State transfer failed (a malformed chunk, a bound exceeded, a misused snapshot call).
    #[error("state transfer: {0}")]
    Transfer(#[from] TransferError),
    /// A durable epoch log could not be read, cut or replayed.
    #[error("epoch log: {0}")]
    Log(#[from] squall_round_robin::log::LogError),
    /// A transferred state could not be made durable, or a restart could not read it back.
    #[error("transferred state: {0}")]
    Snapshot(#[from] SnapshotError),
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
    /// A restart of view 0 keeps fewer positions of this member's shard than this member
    /// delivered in view 0 before it switched into the restart (s23, docs/MEMBERSHIP.md,
    /// forty-first part; not expected: every member of the shard logged a message before any
    /// member delivered it). The member stops rather than deliver a sequence the others do
    /// not.
    #[error(
        "restarting view {view}: the restart keeps positions below {end}, but this member delivered {delivered} in it"
    )]
    TrimBelowDelivered {
        /// The view restarted.
        view: u64,
        /// The position after the last one the restart keeps.
        end: u64,
        /// How many positions this member delivered in the view.
        delivered: u64,
    },
    /// A replayed epoch log holds a record that is torn, corrupt or out of order before the
    /// end its skim found (a checksum error in the middle of the log, which the skim does not
    /// check, or a file changed since): the replay cannot deliver what the member published.
    #[error("replaying the epoch log of view {view} ({path}): {why}")]
    ReplayLog {
        /// The view.
        view: u64,
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong there.
        why: squall_round_robin::log::TailError,
    },
    /// A view left a shard without any member it had before: nobody holds its state, so it
    /// cannot be rebuilt by state transfer (every member stops; restart the group).
    #[error("view {view}: {why}")]
    ShardLost {
        /// The view.
        view: u64,
        /// Which shard.
        why: Inadequate,
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

/// Where a member runs in a view ([`Group::placement`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The view.
    pub view: u64,
    /// Its subgroup and shard.
    pub shard: ShardId,
    /// The shard's members, in sender order (this member among them).
    pub members: Vec<NodeId>,
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
    /// State transfers this member completed as the sender.
    pub transfers_served: u64,
    /// Bytes of state this member sent to joiners.
    pub state_bytes_sent: u64,
    /// Views this node installed while still passive (its transfer started over).
    pub transfer_restarts: u64,
    /// Messages replayed from the epoch logs after a total restart.
    pub replayed: u64,
    /// Polls that handed out part of a restart's replay backlog
    /// ([`GroupConfig::replay_batch`] upcalls at most each).
    pub replay_polls: u64,
    /// The most bytes of epoch log a restart held in memory at once (the largest buffer of its
    /// skims and of its replay's readers; at most [`GroupConfig::replay_buffer`] unless a
    /// record is longer).
    pub replay_peak_buffer: u64,
    /// Records a restart's replay decoded: the replayed ones, plus those it skipped as covered
    /// by the snapshot (it starts the snapshot's view's log at the last mark at or below the
    /// snapshot's position, so these are few).
    pub replay_read: u64,
    /// Checkpoints this member wrote ([`Group::checkpoint`]).
    pub checkpoints: u64,
    /// Epoch logs its checkpoints removed (views wholly covered by a checkpoint).
    pub logs_removed: u64,
    /// Bytes of the current view's epoch log its checkpoints dropped (the covered prefix,
    /// [`squall_round_robin::RoundRobin::compact_log`]).
    pub log_bytes_compacted: u64,
}

/// The sequence number that ends a trim in the epoch of the shard whose senders are
/// `senders`: a ragged trim is a gap-free round-robin prefix per shard, so the shard's messages
/// it keeps are exactly those below the sum of its senders' counts (other shards' counts are
/// another epoch's).
fn trim_end(trim: &crate::trim::Trim, senders: &[NodeId]) -> u64 {
    senders.iter().map(|&s| trim.count(s)).sum()
}

/// A member's shard in a view: its index and members (in sender order).
type ShardOf = (usize, Vec<NodeId>);

/// A checkpoint whose file is being written: what its record will say.
struct InFlight {
    view: u64,
    shard: u32,
    first_position: u64,
    position: u64,
    file: String,
    /// The state's length (0 until an encoder ran).
    bytes: usize,
    cut: Option<CrashPoint>,
    start: std::time::Instant,
    /// The inline writer's result (the thread's comes through its channel).
    written: Option<Result<bool, CheckpointError>>,
    /// How long encoding (given an encoder) and writing the file took (µs).
    write_us: u64,
    /// How long the application's encoder took (µs; 0 for bytes).
    encode_us: u64,
    /// Whether this member asked every member of the view to sync its epoch log past the
    /// checkpoint ([`Group::checkpoint_waits_for_syncs`]).
    asked_syncs: bool,
}

/// What [`Group::checkpoint`] or [`Group::checkpoint_with`] was given.
enum StateSource {
    /// The encoded state.
    Bytes(Vec<u8>),
    /// An encoder the writer runs.
    Encoder(crate::snapshot::EncodeState),
}

/// What a restarting member's logs rebuild its state from.
#[derive(Clone, Debug)]
enum Base {
    /// It was in a shard of view 0 and its state was never replaced: its epoch logs from
    /// position 0.
    Initial,
    /// It started view 0 afresh in this process and delivered `position` messages of it before
    /// switching into a restart of view 0 (s23, docs/MEMBERSHIP.md, forty-first part): its
    /// application holds that state, and the replay of its epoch log of view 0 continues from
    /// `position`.
    Live {
        /// The position of its next delivery when it switched.
        position: u64,
    },
    /// Its state came by transfer: the persisted snapshot (taken in `view`), then its epoch logs
    /// from the snapshot's position.
    Snapshot {
        /// The view the transfer completed in, as logged.
        view: View,
        /// The snapshot file's contents.
        snap: Snapshot,
    },
    /// It holds no state (a joiner or promoted spare whose transfer never completed, or a
    /// member whose state a rejoin voided): its logged counts still count in the restart's
    /// trim, but it replays nothing and takes its state by transfer in the restart view.
    Stateless,
}

/// The durable epochs' directory of `cfg` (where snapshots go too); `None` with atomic epochs.
fn durable_dir_of(cfg: &GroupConfig) -> Option<std::path::PathBuf> {
    match &cfg.epoch.mode {
        Mode::Durable { path, .. } => Some(path.clone()),
        _ => None,
    }
}

/// This member's shard in `view` and that shard's members (`None`: a spare, or an inadequate
/// view, where no epoch ran).
fn shard_in(view: &View, me: NodeId) -> Option<ShardOf> {
    if view.inadequate.is_some() {
        return None;
    }
    let s = view.shard_of(me)?;
    Some((s, view.shards[s].members.clone()))
}

/// Lets the core wedge the current epoch (or report empty counts when there is none).
struct Wedger<'a, T: Transport> {
    epoch: Option<&'a mut RoundRobin<MuxHandle<T>>>,
    /// The epoch's members (its shard's, in sender order).
    senders: &'a [NodeId],
    frozen: &'a mut bool,
    /// Restarting: what the last view's epoch log holds.
    logged: Option<&'a [u64]>,
    /// This member holds its shard's state (it is active; a passive joiner's transfer runs
    /// only while the epoch is not wedged, so this is final once it wedged).
    holds: bool,
    /// Nothing delivered yet, in any view (see [`Epoch::nothing_delivered`]).
    nothing_delivered: bool,
    /// Everything delivered is in the epoch log of view 0 (see [`Epoch::delivered_in_log`]).
    delivered_in_log: bool,
}

impl<T: Transport> Epoch for Wedger<'_, T> {
    fn wedge(&mut self, view: &View) -> Vec<u64> {
        *self.frozen = true;
        match (&mut self.epoch, self.logged) {
            (Some(rr), _) => {
                // The shard's counts at the senders' ranks in the view; 0 for other shards'
                // senders, whose counts only their own shard's members report.
                let counts = rr.wedge();
                let mut rx = vec![0; view.members.len()];
                for (&s, c) in self.senders.iter().zip(counts) {
                    if let Some(r) = view.rank_of(s) {
                        rx[r] = c;
                    }
                }
                rx
            }
            (None, Some(l)) => l.to_vec(),
            (None, None) => vec![0; view.members.len()],
        }
    }

    fn holds_state(&self, _view: &View) -> bool {
        self.holds
    }

    fn nothing_delivered(&self) -> bool {
        self.nothing_delivered
    }

    fn delivered_in_log(&self) -> bool {
        self.delivered_in_log
    }
}

/// Per member of `view` (rank order), how many of its messages this member's epoch log of
/// `view` holds as a gap-free prefix (every sequence number up to its last record's is logged
/// or was a null): the counts of its shard's senders at their ranks, 0 for every other member
/// (other shards' counts are reported by their own members; a spare reports none).
///
/// Also returns what the log's skim found (`None`: no log of this member for `view`): its last
/// record and marks, from which the restart's cut starts near the end instead of reading the
/// file again.
fn logged_counts(
    cfg: &GroupConfig,
    view: &View,
    me: NodeId,
) -> Result<(Vec<u64>, Option<Skimmed>), GroupError> {
    let mut rx = vec![0; view.members.len()];
    let Some((s, senders)) = shard_in(view, me) else {
        return Ok((rx, None));
    };
    let Some(path) = cfg.epoch_log_of(view.id, s) else {
        return Ok((rx, None));
    };
    let kept = Log::skim_with(
        &path,
        u64::MAX,
        None,
        cfg.replay_buffer,
        true,
        cfg.epoch_fsync_of(s),
    )?;
    let end = kept.last.as_ref().map_or(0, |r| r.seq + 1);
    let counts = squall_round_robin::seq_prefix_counts(end, senders.len());
    for (m, c) in senders.iter().zip(counts) {
        if let Some(r) = view.rank_of(*m) {
            rx[r] = c;
        }
    }
    Ok((rx, Some(kept)))
}

/// One epoch log a restart's replay reads.
#[derive(Debug)]
struct ReplayLog {
    view: u64,
    path: std::path::PathBuf,
    /// Added to the records' positions (a snapshot's view counted its epoch from 0).
    offset: u64,
    /// Where to start reading: the snapshot's view starts at the last mark of its skim at or
    /// below the snapshot's position (what is before it is covered), other logs at the start.
    start: Option<squall_round_robin::log::Mark>,
}

/// A total restart's replay in progress: the epoch logs still to read, the one being read
/// (through a [`Reader`] of [`GroupConfig::replay_buffer`] bytes), and where the positions
/// are. [`Group::poll`](TotalOrder::poll) pulls at most a batch from it per call.
#[derive(Debug)]
struct ReplayStream {
    logs: std::collections::VecDeque<ReplayLog>,
    reading: Option<(ReplayLog, Reader<std::fs::File>)>,
    /// The position the next delivery must have (`None`: the first one sets it).
    next: Option<u64>,
    /// Deliveries below this position are in the snapshot: skipped.
    skip_below: u64,
    /// The position after the last delivery, as the skims found it (the member's position
    /// was set to it at the install): checked when the replay ends.
    end: u64,
    /// The last view replayed (for errors).
    last_view: u64,
    buffer: usize,
}

impl ReplayStream {
    /// Appends at most `max` deliveries to `out`; returns how many and whether the replay is
    /// complete.
    fn pull(
        &mut self,
        max: usize,
        out: &mut Vec<Upcall<Delivery>>,
        stats: &mut GroupStats,
    ) -> Result<(usize, bool), GroupError> {
        let mut n = 0;
        while n < max {
            let Some((log, reader)) = &mut self.reading else {
                let Some(log) = self.logs.pop_front() else {
                    let at = self.next.unwrap_or(0);
                    if at != self.end {
                        return Err(GroupError::Replay {
                            view: self.last_view,
                            found: at,
                            expected: self.end,
                        });
                    }
                    return Ok((n, true));
                };
                let reader = match log.start {
                    Some(m) => {
                        let io = |source| squall_round_robin::log::LogError::Io {
                            path: log.path.clone(),
                            source,
                        };
                        let mut file = std::fs::File::open(&log.path).map_err(io)?;
                        let len = file.metadata().map_err(io)?.len();
                        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(m.offset))
                            .map_err(io)?;
                        Reader::at(file, len, m.offset, self.buffer, ReadMode::Verify)
                    }
                    None => Log::reader(&log.path, self.buffer)?,
                };
                self.reading = Some((log, reader));
                continue;
            };
            let io = |source| squall_round_robin::log::LogError::Io {
                path: log.path.clone(),
                source,
            };
            let next = reader.next_record().map_err(io)?;
            // A mark below the record the skim checked comes from the side index unchecked.
            // The index is never synced and a compaction rewrites it in place, so after a
            // power loss it can hold entries of the file before the compaction ahead of one
            // that checks out (s20, `power_loss.rs`): the first record read at a mark must be
            // the mark's, else the log is read from its start.
            if let Some(m) = log.start.take()
                && next
                    .as_ref()
                    .is_none_or(|r| (r.view, r.seq, r.position) != (m.view, m.seq, m.position))
            {
                tracing::warn!(path = %log.path.display(), offset = m.offset, "replay: the index's mark does not match the log there; reading the log from its start");
                *reader = Log::reader(&log.path, self.buffer)?;
                continue;
            }
            let Some(r) = next else {
                stats.replay_peak_buffer =
                    stats.replay_peak_buffer.max(reader.peak_buffer() as u64);
                if let Some(why) = reader.tail() {
                    return Err(GroupError::ReplayLog {
                        view: log.view,
                        path: log.path.clone(),
                        why: why.clone(),
                    });
                }
                self.reading = None;
                continue;
            };
            stats.replay_peak_buffer = stats.replay_peak_buffer.max(reader.peak_buffer() as u64);
            stats.replay_read += 1;
            let position = r.position + log.offset;
            if position < self.skip_below {
                continue;
            }
            let expected = self.next.unwrap_or(position);
            if position != expected {
                return Err(GroupError::Replay {
                    view: log.view,
                    found: position,
                    expected,
                });
            }
            self.next = Some(position + 1);
            out.push(Upcall::Deliver(Delivery {
                position,
                sender: r.sender,
                payload: r.payload,
            }));
            stats.replayed += 1;
            n += 1;
        }
        Ok((n, false))
    }
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
/// A universe node outside the view joins with [`Group::joining`]; it stays passive until a
/// member sent it the application's state ([`Group::provide_state`], [`Group::take_state`];
/// see [`crate::transfer`]).
///
/// With durable epochs (`Mode::Durable` in the template) each view's epoch logs to its own
/// file and the trim cuts it; a member built from a log that holds a view restarts: it waits
/// for a majority of that view, the inspector (see [`crate::restart`]) installs the next view,
/// and the member first replays its epoch logs as deliveries with their original positions.
/// A member whose state came by transfer persists it first ([`crate::snapshot`]) and replays
/// from it: `View` of that view, [`take_state`](Group::take_state), then the deliveries from
/// the state's position; a member whose transfer never completed restarts without state and
/// takes one by transfer in the restart view.
///
/// Shards (the layout in force, [`GmsConfig::shard_layout`]: `GmsConfig::shards`, see
/// [`crate::view::EvenShards`], or several disjoint subgroups of shards, [`crate::view::Subgroups`],
/// or a custom layout through `GmsConfig::layout`, see [`crate::view::Layout`]): in each view a
/// member of shard `s` (of any subgroup) runs shard `s`'s round-robin epoch (its senders are the shard's members); positions,
/// deliveries, discards and state are per shard, and the trim uses only the shard's members'
/// received counts for its senders. A member in no shard (a *spare*) delivers nothing and
/// refuses submits with [`SubmitError::NotASender`], but takes part in the membership protocol;
/// a member never changes shards, and a spare or joiner placed in a shard is passive until a
/// member of that shard that held its state sent it ([`Group::shard`]). An inadequate view runs
/// no shard: members stay wedged ([`Group::waiting`] says why; submits answer
/// [`SubmitError::Wedged`]) until a view gives every shard its minimum. A view that leaves a
/// shard without any of its previous members stops every member ([`GroupError::ShardLost`]),
/// a joiner that the view names included. [`Group::placement`] tells a member its subgroup,
/// shard and the shard's members.
/// Durable epochs log per view and shard (each member its own shard's,
/// [`GroupConfig::epoch_log_of`]); a total restart cuts and replays them per shard and needs a
/// majority of the last view and a member of each of its shards
/// ([`crate::restart::Unrestored`]).
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
    /// The epoch of `view`: this member's shard's (none outside any view or shard, in an
    /// inadequate view, or once stopped).
    epoch: Option<RoundRobin<MuxHandle<T>>>,
    /// The epoch's members: this member's shard in `view`, in sender order.
    senders: Vec<NodeId>,
    /// The current view is inadequate: no shard runs until the next view.
    waiting: Option<Inadequate>,
    view: Option<View>,
    /// The core wedged the epoch: it is never polled again.
    frozen: bool,
    /// An initial member that started view 0 afresh (its log held no view) neither polls its
    /// epoch of view 0 nor submits to it (submissions wait in `held_sends`) until every other
    /// member of its shard is seen running view 0 (see
    /// [`release_first_start`](Group::release_first_start)).
    held: bool,
    /// Submissions taken while [`held`](Group::held) (at most the epoch's window), submitted to
    /// the epoch in order when it is released.
    held_sends: Vec<Vec<u8>>,
    reported_wedge: bool,
    /// The position of the next delivery.
    position: u64,
    stopped: Option<String>,
    /// State transfer: this node's side of it.
    transfer: Transfer<MuxHandle<T>>,
    /// Whether this node has the application's state (an initial member, or a joiner whose
    /// transfer completed). A passive joiner buffers its deliveries and cannot submit.
    active: bool,
    /// Added to the epoch's positions: a joiner's first epoch counts from 0 until its transfer
    /// says where the view started.
    offset: u64,
    /// Deliveries before this position are in the transferred state: not handed out.
    skip_until: u64,
    /// A passive joiner: the latest `Upcall::Durable` of its epoch (its own count), reported
    /// once it is active.
    durable_held: Option<u64>,
    /// The current view's first position (once active in it): a checkpoint is taken at or
    /// past it, so that every epoch log it removes (earlier views') holds only what it covers.
    view_first: u64,
    /// The position of the latest snapshot this member made durable (a transferred state, a
    /// checkpoint, or the one it restarted from); `None`: none since its state began.
    snapshot_at: Option<u64>,
    /// The checkpoint being written (at most one), until a poll finishes it.
    in_flight: Option<InFlight>,
    /// How the last started checkpoint ended, until the application takes it.
    checkpoint_outcome: Option<Result<Checkpointed, CheckpointError>>,
    /// A checkpoint was recorded but compacting the epoch log after it failed, or syncing the
    /// epoch log for a checkpoint failed: the next poll stops the member with this reason.
    compaction_failed: Option<String>,
    /// The view and position of the checkpoint whose epoch-log compaction runs on the log's
    /// compaction thread ([`CheckpointWriter::Thread`], s24), until a poll takes its outcome.
    compacting: Option<(u64, u64)>,
    /// The checkpoint writer thread ([`CheckpointWriter::Thread`]), spawned at the first
    /// checkpoint; dropping it cancels an unfinished write and joins the thread.
    writer: Option<crate::snapshot::Writer>,
    /// Test hook: the writer waits on this before each write.
    writer_gate: Option<std::sync::mpsc::Receiver<()>>,
    /// A passive joiner's deliveries (epoch-relative positions).
    buffer: Vec<Delivery>,
    /// The state received, until the application takes it.
    state: Option<TransferredState>,
    /// Restarting from the logs: what the last view's epoch log holds (the core publishes it
    /// as this member's received counts); the epoch starts once the restart view is installed.
    restart_logged: Option<Vec<u64>>,
    /// Restarting: per view of the membership log (ascending), this member's shard and its
    /// members (`None`: no epoch ran here) — which epoch logs the replay reads, and how each
    /// trim cuts them.
    history: Vec<(u64, Option<ShardOf>)>,
    /// Restarting: what the replay rebuilds the state from.
    base: Base,
    /// Restarting: what the skims of the epoch logs in `history` found when the group was
    /// created (each cut to its logged trim, the last view's read for its logged counts): the
    /// last record of each (the replay's end position) and marks to cut the last one from.
    skimmed: std::collections::BTreeMap<u64, Skimmed>,
    /// Upcalls not handed out yet that come before a restart's replay (or all of them once it
    /// is out): `poll` hands out [`GroupConfig::replay_batch`] at most per call.
    backlog: std::collections::VecDeque<Upcall<Delivery>>,
    /// A restart's replay still being read, between `backlog` and `behind`.
    stream: Option<ReplayStream>,
    /// Upcalls produced after the replay's deliveries (the restart view, the epoch's first
    /// deliveries) while it is still being read.
    behind: std::collections::VecDeque<Upcall<Delivery>>,
    /// Set by the step that started a replay: where in that poll's upcalls its deliveries go.
    replay_at: Option<usize>,
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
            .field("active", &self.active)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl<T: Transport, L: Durable> Group<T, L> {
    /// The regions a node that may be placed in any subgroup registers: the GMS table, then
    /// both epoch sets (table and large-message region each), each sized for the most any
    /// subgroup's largest shard's epoch needs (its shard maximum, at most `max_members`, with
    /// its [`EpochProfile`]), then the transfer region. Every shard's epoch of a view runs on
    /// the same set: a member writes only into its own shard's members' copies, and a member
    /// stays in its shard, so the shards' writes never meet. Without
    /// [`profiles`](GroupConfig::profiles) every node registers this; with them see
    /// [`layout_of`](Group::layout_of).
    pub fn layout(cfg: &GroupConfig) -> Result<Vec<RegionSpec>, GroupError> {
        Self::regions_for(cfg, None)
    }

    /// The regions node `node` registers: [`layout`](Group::layout)'s, with the epoch sets
    /// sized for the subgroups the layout may place it in
    /// ([`ShardLayout::subgroups_of`]; a node reserved for a subgroup's shard can be in that
    /// subgroup only) with their [`EpochProfile`]s. A node pinned to a small subgroup
    /// registers what that subgroup needs, not the largest subgroup's. Its peers learn the
    /// lengths when its link comes up, and each epoch checks that every member's regions hold
    /// what that epoch's settings need (a smaller one is refused, or suspected when it links
    /// late). See [`EpochProfile`] for an example.
    pub fn layout_of(cfg: &GroupConfig, node: NodeId) -> Result<Vec<RegionSpec>, GroupError> {
        let subgroups = cfg.gms.shard_layout().subgroups_of(node);
        Self::regions_for(cfg, subgroups)
    }

    fn regions_for(
        cfg: &GroupConfig,
        subgroups: Option<Vec<usize>>,
    ) -> Result<Vec<RegionSpec>, GroupError> {
        cfg.validate()?;
        let mut out = vec![Gms::<T, L>::layout(&cfg.gms)?];
        let subgroups = cfg.eligible_subgroups(subgroups);
        for v in 0..2 {
            // Per region of the set, the most any of the subgroups' largest epochs needs.
            let mut set: Vec<RegionSpec> = Vec::new();
            for &g in &subgroups {
                let need = RoundRobin::<T>::layout(&cfg.largest_epoch_config(v, g))
                    .map_err(|e| GroupError::Epoch(e.into()))?;
                for r in need {
                    match set.iter_mut().find(|s| s.id == r.id) {
                        Some(s) => s.len = s.len.max(r.len),
                        None => set.push(r),
                    }
                }
            }
            out.extend(set);
        }
        out.push(RegionSpec::new(
            cfg.transfer.region,
            cfg.transfer.region_len(cfg.gms.universe.len()),
        ));
        Ok(out)
    }

    /// Sets the member up over `transport` (with the regions of [`layout`](Group::layout)
    /// registered on every universe node). `log` and `recovered` are the membership core's.
    /// A member of the current view starts its epoch at once (it is active: it holds the
    /// application's state); an outsider waits for a view that names it — call
    /// [`join`](Group::join), or use [`joining`](Group::joining), to ask for one. A member
    /// whose log holds a view restarts (total restart, see [`crate::restart`]): views before
    /// the last are cut again to their logged trims, and no epoch runs until the restart view
    /// is installed (submits answer `NotASender` until then).
    pub fn new(
        transport: T,
        cfg: GroupConfig,
        log: L,
        recovered: Option<&Recovered>,
    ) -> Result<Group<T, L>, GroupError> {
        Self::build(transport, cfg, log, recovered, false)
    }

    /// `outsider`: start outside the group even if `cfg.gms.initial` names this node (a joiner,
    /// possibly a restarted initial member).
    fn build(
        transport: T,
        mut cfg: GroupConfig,
        log: L,
        recovered: Option<&Recovered>,
        outsider: bool,
    ) -> Result<Group<T, L>, GroupError> {
        cfg.validate()?;
        cfg.gms.driver_settings = cfg.settings_digest();
        if let Some(rec) = recovered.filter(|_| !outsider) {
            // Before `restart_base` removes any file.
            cfg.check_restart(rec)?;
        }
        let mux = Mux::new(transport, &cfg.regions());
        // A restart (a log that holds a view): what the state is rebuilt from is known before
        // the core publishes its restart row, which says whether it holds its shard's state.
        let base = match recovered {
            Some(rec) if !outsider && rec.last_view().is_some() => {
                Some(Self::restart_base(&cfg, mux.handle().local_id(), rec)?)
            }
            _ => None,
        };
        let gms = if outsider {
            Gms::rejoining(mux.handle(), cfg.gms.clone(), log)?
        } else {
            let holds_state = !matches!(base, Some(Base::Stateless));
            Gms::holding(mux.handle(), cfg.gms.clone(), log, recovered, holds_state)?
        };
        let layout = cfg.gms.shard_layout();
        // Active from the start (holding their shard's initial state): view 0's shard members.
        let v0 = View::new(0, cfg.gms.initial.clone(), &layout);
        let me = gms.id();
        // A joiner holds no state, even one restarted under an initial member's id.
        let initial: Vec<NodeId> = v0
            .shards
            .iter()
            .flat_map(|s| s.members.iter().copied())
            .filter(|&m| !(outsider && m == me))
            .collect();
        let transfer = Transfer::new(
            mux.handle(),
            cfg.transfer.clone(),
            cfg.gms.universe.clone(),
            initial,
        );
        let active = gms
            .view()
            .is_some_and(|v| v.shard_of(me).is_some() || gms.restarting().is_some());
        let mut g = Group {
            cfg,
            mux,
            gms,
            epoch: None,
            senders: Vec::new(),
            waiting: None,
            view: None,
            frozen: false,
            held: false,
            held_sends: Vec::new(),
            reported_wedge: false,
            position: 0,
            stopped: None,
            transfer,
            active,
            offset: 0,
            skip_until: 0,
            durable_held: None,
            view_first: 0,
            snapshot_at: None,
            in_flight: None,
            checkpoint_outcome: None,
            compaction_failed: None,
            compacting: None,
            writer: None,
            writer_gate: None,
            buffer: Vec::new(),
            state: None,
            restart_logged: None,
            history: Vec::new(),
            base: Base::Initial,
            skimmed: std::collections::BTreeMap::new(),
            backlog: std::collections::VecDeque::new(),
            stream: None,
            behind: std::collections::VecDeque::new(),
            replay_at: None,
            events: Vec::new(),
            scratch: Vec::new(),
            stats: GroupStats::default(),
        };
        match (g.gms.view().cloned(), g.gms.restarting().is_some()) {
            (Some(v), true) => {
                // Views before the last ended with a logged decision: cut this member's shard's
                // epoch log to it again (a crash may have come between logging it and cutting).
                if let Some(rec) = recovered {
                    let layout = g.cfg.gms.shard_layout();
                    for old in 0..v.id {
                        let Some(ov) = crate::restart::logged_view(rec, old, &layout) else {
                            continue;
                        };
                        let mine = shard_in(&ov, me);
                        if let Some((s, senders)) = &mine
                            && let Some(path) = g.cfg.epoch_log_of(old, *s)
                            && path.exists()
                        {
                            // Skimmed now, before the first poll; the replay decodes it.
                            let end = rec
                                .decision_for(old)
                                .map_or(u64::MAX, |d| trim_end(&d.trim, senders));
                            let fsync = g.cfg.epoch_fsync_of(*s);
                            let mut kept =
                                Log::skim_with(&path, end, None, g.cfg.replay_buffer, true, fsync)?;
                            // Only the last view's are cut again; the snapshot's view's
                            // start its replay near the snapshot's position.
                            if !matches!(&base, Some(Base::Snapshot { view, .. }) if view.id == old)
                            {
                                kept.marks = Vec::new();
                            }
                            g.stats.replay_peak_buffer =
                                g.stats.replay_peak_buffer.max(kept.peak_buffer as u64);
                            g.skimmed.insert(old, kept);
                        }
                        g.history.push((old, mine));
                    }
                    g.base = base.unwrap_or(Base::Initial);
                    if matches!(g.base, Base::Stateless) {
                        g.active = false;
                    }
                }
                g.history.push((v.id, shard_in(&v, me)));
                let (counts, kept) = logged_counts(&g.cfg, &v, me)?;
                g.restart_logged = Some(counts);
                if let Some(kept) = kept {
                    g.stats.replay_peak_buffer =
                        g.stats.replay_peak_buffer.max(kept.peak_buffer as u64);
                    g.skimmed.insert(v.id, kept);
                }
                g.view = Some(v);
            }
            (Some(v), false) => {
                g.start_epoch(v)?;
                g.held = g.gms.first_start() && g.epoch.is_some();
            }
            (None, _) => {}
        }
        Ok(g)
    }

    /// Restart: cuts the last view's epoch log past the restart trim (from the mark of its
    /// skim nearest below the trim: only its end is read) and sets up the replay of every
    /// epoch log of this member — its shard's, view by view — as deliveries with their
    /// original positions (gap-free: each view's continue the previous one's). The member's
    /// position is set at once, from the last record the skims kept; the records themselves
    /// are read in slices by [`ReplayStream::pull`] as `poll` hands them out.
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
        // With a snapshot: nothing before its view; in its view the epoch counted from 0 (it
        // was passive) and the state reflects everything before its position.
        let mut from = (0, 0, 0);
        if let Base::Live { position } = self.base {
            // Delivered before the switch, live: the replay skips it.
            from = (0, 0, position);
            next = Some(position);
        }
        if let Base::Snapshot { view, snap } = &self.base {
            from = (view.id, snap.first_position, snap.position);
            next = Some(snap.position);
            self.snapshot_at = Some(snap.position);
            self.state = Some(TransferredState {
                position: snap.position,
                state: snap.state.clone(),
            });
            upcalls.push(Upcall::View(squall_ordering::View {
                id: view.id,
                members: view.members.clone(),
                leader: Some(view.leader),
            }));
        }
        let (from_view, offset, skip_below) = from;
        let mut end = next;
        let mut logs = std::collections::VecDeque::new();
        for (v, mine) in std::mem::take(&mut self.history) {
            let Some((s, senders)) = mine.filter(|_| v <= last.id && v >= from_view) else {
                continue;
            };
            let offset = if v == from_view { offset } else { 0 };
            let Some(path) = self.cfg.epoch_log_of(v, s) else {
                continue;
            };
            // The snapshot's view: read from the last mark at or below its position (the
            // records before it are covered; a mark in the last view's log is below its cut).
            let cut = trim_end(trim, &senders);
            let start = (self
                .skimmed
                .get(&v)
                .filter(|_| v == from_view && skip_below > 0))
            .and_then(|k| {
                k.marks
                    .iter()
                    .rev()
                    .find(|m| m.position + offset <= skip_below && (v != last.id || m.seq < cut))
            })
            .copied();
            let kept = if v == last.id {
                self.cut_restart_log(v, s, &path, cut, false)?
                    .last
                    .map(|r| r.position)
            } else {
                match self.skimmed.remove(&v) {
                    Some(k) => k.last.map(|r| r.position),
                    None => continue, // no file when the group was created
                }
            };
            if let Base::Live { position } = self.base
                && v == 0
            {
                // The restart keeps everything any member of the shard delivered (each logged
                // it first); a trim below what this member delivered would fork the sequence.
                let end = kept.map_or(0, |p| p + 1);
                if end < position {
                    return Err(GroupError::TrimBelowDelivered {
                        view: v,
                        end,
                        delivered: position,
                    });
                }
            }
            if let Some(p) = kept {
                let after = p + offset + 1;
                if after > skip_below {
                    end = Some(end.map_or(after, |e| e.max(after)));
                }
            }
            logs.push_back(ReplayLog {
                view: v,
                path,
                offset,
                start,
            });
        }
        self.skimmed.clear();
        self.position = end.unwrap_or(0);
        self.replay_at = Some(upcalls.len());
        self.stream = Some(ReplayStream {
            logs,
            reading: None,
            next,
            skip_below,
            end: self.position,
            last_view: last.id,
            buffer: self.cfg.replay_buffer,
        });
        Ok(())
    }

    /// Restart: cuts epoch log `path` of view `view` past sequence number `end` with a skim
    /// from the last mark below `end` that the creation's skim left (only the log's end is
    /// read), counting its buffer in `replay_peak_buffer`. The result's `last` is the last
    /// record kept (the mark's, if the skim read none past it); `sync`: fsync a truncation.
    fn cut_restart_log(
        &mut self,
        view: u64,
        shard: usize,
        path: &std::path::Path,
        end: u64,
        sync: bool,
    ) -> Result<Skimmed, GroupError> {
        let mark = (self.skimmed.get(&view))
            .and_then(|k| k.marks.iter().rev().find(|m| m.seq < end).copied());
        let buffer = self.cfg.replay_buffer;
        let fsync = self.cfg.epoch_fsync_of(shard);
        let mut kept = Log::skim_with(path, end, mark.as_ref(), buffer, sync, fsync)?;
        self.stats.replay_peak_buffer = self.stats.replay_peak_buffer.max(kept.peak_buffer as u64);
        if kept.last.is_none()
            && let Some(m) = mark
        {
            kept.last = Some(squall_round_robin::log::Record {
                view: m.view,
                seq: m.seq,
                position: m.position,
                sender: NodeId(0),
                payload: Vec::new(),
            });
        }
        Ok(kept)
    }

    /// Releases the epoch of an initial member that started view 0 afresh, once every other
    /// member of its shard is seen running view 0; returns whether it did. Until then the
    /// epoch writes nothing: its region set 0 is also the set of every later even view, and
    /// a group that went on without this member (its log lost, or it never logged view 0) may
    /// run such a view there, reading these writes as another member's (found in s20,
    /// docs/MEMBERSHIP.md, twenty-third part). At a group's real first start the wait is one
    /// push of the peers' view blocks, which round-robin needs anyway (every member of the
    /// shard sends in every round). A peer seen restarting view 0, or past it, switches the
    /// core to restart mode instead ([`restart_first_start`](Group::restart_first_start)).
    fn release_first_start(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> bool {
        let me = self.gms.id();
        // Wedged, or about to wedge (a peer wedged view 0): the member stays held (s22,
        // docs/MEMBERSHIP.md, thirty-fourth part). A wedged epoch would send nothing and only
        // refuse the held submissions; its switch into a restart of view 0 no longer depends
        // on the hold (thirty-eighth part), so this only spares the epoch's first writes.
        if self.gms.restarting().is_some()
            || self.frozen
            || self.gms.wedge_seen_in_view_0()
            || !self
                .senders
                .iter()
                .all(|&s| s == me || self.gms.runs_view_0(s))
        {
            return false;
        }
        self.held = false;
        tracing::debug!(me = %me, shard = ?self.senders, held = self.held_sends.len(), "group: every member of the shard runs view 0: the epoch starts");
        for p in std::mem::take(&mut self.held_sends) {
            // Within the window and the payload bound (checked when held), into a fresh
            // epoch: refused only if it wedged meanwhile; then the application resubmits.
            let sent = self.epoch.as_mut().map(|rr| rr.submit(&p));
            if let Some(Err(e)) = sent {
                tracing::warn!(me = %me, error = %e, "group: a submission held at the first start was refused; reported as discarded");
                upcalls.push(Upcall::Discarded(p));
            }
        }
        true
    }

    /// A submission while the epoch is [`held`](Group::held): kept, in order, up to the epoch's
    /// window (then `WindowFull`, the ordinary back-pressure), and refused at once if larger
    /// than the epoch carries.
    fn hold_send(&mut self, payload: &[u8]) -> Result<(), SubmitError> {
        let (max, window) = self
            .epoch
            .as_ref()
            .map_or((self.cfg.epoch.max_payload, self.cfg.epoch.window), |rr| {
                (rr.config().max_payload, rr.config().window)
            });
        if payload.len() > max {
            return Err(SubmitError::TooLarge {
                len: payload.len(),
                max,
            });
        }
        if self.held_sends.len() >= window {
            return Err(SubmitError::WindowFull);
        }
        self.held_sends.push(payload.to_vec());
        Ok(())
    }

    /// The core of an initial member that started view 0 with an empty log entered restart
    /// mode at view 0, because a peer restarts view 0 from its log (a crash during the group's
    /// first start; see [`Gms`]'s `first_start_restart` and docs/MEMBERSHIP.md, twenty-first
    /// part). The member leaves its epoch of view 0 (a spare has none) and takes the state of a
    /// member restarting from a log that holds `Installed { 0 }`: its logged counts are what
    /// its epoch log of view 0 holds (a skim, as at construction), the restart view's trim
    /// cuts that log and the replay reads it, from the initial state (position 0), or (s23,
    /// docs/MEMBERSHIP.md, forty-first part) from the position of its next delivery if it
    /// delivered in view 0 (durable epochs: what it delivered is in that log).
    fn restart_first_start(&mut self) -> Result<(), GroupError> {
        let Some(v) = self.gms.view().cloned() else {
            return Ok(());
        };
        let delivered = self.next_position();
        self.held = false;
        // As after a crash: its own undelivered submissions are not reported (see the docs).
        self.held_sends.clear();
        let me = self.gms.id();
        // Dropped unwedged, as a crash would leave it: what it logged is on file (the skim
        // below reads it); messages it received but had not logged are not counted.
        self.epoch = None;
        // The application is at `delivered` (s23): `next_position` says so until the replay
        // sets the position from the logs (it continues from here, `Base::Live`).
        self.position = delivered;
        // What other members that started view 0 afresh wrote into this member's copy of
        // view 0's region set must not be read by a later view on that set (a crash would
        // have left fresh memory too).
        self.zero_restarted_set(&v);
        self.senders.clear();
        self.frozen = false;
        self.reported_wedge = false;
        self.waiting = None;
        self.base = match delivered {
            0 => Base::Initial,
            position => Base::Live { position },
        };
        self.history = vec![(v.id, shard_in(&v, me))];
        let (counts, kept) = logged_counts(&self.cfg, &v, me)?;
        tracing::info!(me = %me, logged = ?counts, delivered, "group: restarting view 0 with the members that logged it (a crash during the first start)");
        self.restart_logged = Some(counts);
        self.skimmed.clear();
        if let Some(kept) = kept {
            self.stats.replay_peak_buffer =
                self.stats.replay_peak_buffer.max(kept.peak_buffer as u64);
            self.skimmed.insert(v.id, kept);
        }
        self.view = Some(v);
        Ok(())
    }

    /// A restart leaves view `last` (installing the restart view, or catching up one view):
    /// zeroes this member's copy of `last`'s region set for its shard. No epoch of `last` ran
    /// here, so the ordinary zeroing when a view's epoch ends never happens, but in this life
    /// members that started view 0 afresh (their logs were empty) ran view 0's epoch on that
    /// set and wrote into this copy until they switched to the restart (s20,
    /// docs/MEMBERSHIP.md, twenty-third part); the view after next reuses the set. As for the
    /// ordinary zeroing, no peer writes the set again for a view before this member acks that
    /// later view.
    fn zero_restarted_set(&mut self, last: &View) {
        let me = self.gms.id();
        if let Some((s, senders)) = shard_in(last, me) {
            let set = self.cfg.epoch_for_shard(last.id, s, senders);
            self.mux.with(|t| RoundRobin::<T>::zero_regions(t, &set));
        }
    }

    /// Restarting from a log two or more views behind the restarted group (the core asked to
    /// join again, [`Gms::rejoined`]): this member's state must come by transfer, like a
    /// joiner's. Its epoch logs are superseded (the group went on without them): each is
    /// renamed to `<name>.superseded` so that no later restart replays them.
    fn rejoin(&mut self) -> Result<(), GroupError> {
        let me = self.gms.id();
        // Its state (a snapshot included) is void from here on: a later restart must not
        // rebuild it from these logs.
        let newer = self.gms.rejoined().map_or(0, |(_, newer)| newer);
        self.gms
            .log_mut()
            .append(&Record::StateDropped { view: newer })
            .map_err(GmsError::from)?;
        if let Some(dir) = self.durable_dir() {
            crate::snapshot::remove_others(&dir, None);
        }
        self.base = Base::Stateless;
        self.snapshot_at = None;
        let mut renamed = false;
        for (v, mine) in std::mem::take(&mut self.history) {
            if let Some(path) = mine.and_then(|(s, _)| self.cfg.epoch_log_of(v, s))
                && path.exists()
            {
                let mut to = path.clone().into_os_string();
                to.push(".superseded");
                match std::fs::rename(&path, &to) {
                    Ok(()) => renamed = true,
                    Err(e) => {
                        tracing::warn!(me = %me, view = v, error = %e, "group: could not set a superseded epoch log aside")
                    }
                }
            }
        }
        // The renames are durable only once the directory is synced (a power loss could bring
        // the logs back; the synced `StateDropped` record still voids them, so this is belt
        // and braces, found by the s19 power-loss review).
        if renamed
            && let Some(dir) = self.durable_dir()
            && let Err(e) = std::fs::File::open(&dir).and_then(|d| d.sync_all())
        {
            tracing::warn!(me = %me, dir = %dir.display(), error = %e, "group: could not sync the directory after setting superseded epoch logs aside");
        }
        tracing::info!(me = %me, rejoined = ?self.gms.rejoined(), "group: the restarted group went on without this member: joining again, state by transfer");
        self.restart_logged = None;
        self.skimmed.clear();
        self.stream = None;
        self.replay_at = None;
        self.view = None;
        self.active = false;
        self.epoch = None;
        self.senders.clear();
        self.position = 0;
        self.frozen = false;
        Ok(())
    }

    /// The durable epochs' directory (where snapshots go too); `None` with atomic epochs.
    fn durable_dir(&self) -> Option<std::path::PathBuf> {
        durable_dir_of(&self.cfg)
    }

    /// What a restarting member's replay starts from (see [`Base`]); reads and checks the
    /// snapshot its log names, and removes snapshot files no record names (superseded ones, or
    /// one a crash left before its record).
    fn restart_base(cfg: &GroupConfig, me: NodeId, rec: &Recovered) -> Result<Base, GroupError> {
        let Some(dir) = durable_dir_of(cfg) else {
            return Ok(Base::Initial);
        };
        let start = std::time::Instant::now();
        let layout = cfg.gms.shard_layout();
        let base = match rec.last_snapshot() {
            Some(Record::Snapshot {
                view,
                shard,
                first_position,
                position,
                file,
            }) => {
                let max = cfg.transfer.max_state_bytes as u64;
                let snap = crate::snapshot::read(&dir, file, max)?;
                let path = dir.join(file);
                let mismatch = |what| SnapshotError::Mismatch {
                    path: path.clone(),
                    what,
                };
                if snap.view != *view || snap.shard != *shard {
                    return Err(mismatch("view or shard").into());
                }
                if snap.first_position != *first_position || snap.position != *position {
                    return Err(mismatch("positions").into());
                }
                let v = crate::restart::logged_view(rec, *view, &layout)
                    .ok_or(mismatch("its view is not in the log"))?;
                if shard_in(&v, me).map(|(s, _)| s as u32) != Some(*shard) {
                    return Err(mismatch("the member is not in that shard of the view").into());
                }
                // What a crash may have left of the removals that follow a snapshot's record
                // (its superseded files, the epoch logs it covers): none is read again.
                crate::snapshot::remove_others(&dir, Some(file));
                remove_epoch_logs_before(&dir, *view);
                tracing::info!(me = %me, view = *view, position = *position, bytes = snap.state.len(),
                    us = start.elapsed().as_micros() as u64,
                    "group: restarting from a persisted snapshot (a transferred state or a checkpoint)");
                return Ok(Base::Snapshot { view: v, snap });
            }
            _ if rec.holds_initial_state()
                && crate::restart::logged_view(rec, 0, &layout)
                    .is_some_and(|v0| shard_in(&v0, me).is_some()) =>
            {
                Base::Initial
            }
            _ => {
                tracing::info!(me = %me, "group: restarting without state (its transfer never completed): it will take the state by transfer");
                Base::Stateless
            }
        };
        crate::snapshot::remove_others(&dir, None);
        Ok(base)
    }

    /// A completed transfer, made durable before the member acts on it: the state's bytes in a
    /// synced snapshot file, then a [`Record::Snapshot`] naming it in the (synced) membership
    /// log. Superseded snapshots and the epoch logs of earlier views (never replayed again) are
    /// deleted afterwards. Nothing to do with atomic epochs (a restart replays nothing).
    fn persist(&mut self, view: &View, done: &Completed) -> Result<(), GroupError> {
        let Some(dir) = self.durable_dir() else {
            return Ok(());
        };
        let Some((shard, _)) = shard_in(view, self.gms.id()) else {
            return Ok(());
        };
        let snap = Snapshot {
            view: view.id,
            shard: shard as u32,
            first_position: done.first_position,
            position: done.state.position,
            state: done.state.state.clone(),
        };
        let file = crate::snapshot::write(&dir, &snap)?;
        self.gms
            .log_mut()
            .append(&Record::Snapshot {
                view: snap.view,
                shard: snap.shard,
                first_position: snap.first_position,
                position: snap.position,
                file: file.clone(),
            })
            .map_err(GmsError::from)?;
        self.snapshot_at = Some(snap.position);
        crate::snapshot::remove_others(&dir, Some(&file));
        remove_epoch_logs_before(&dir, view.id);
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

    /// Upcalls of a total restart's replay (and what followed them) that
    /// [`poll`](TotalOrder::poll) has not handed out yet: it hands out at most
    /// [`GroupConfig::replay_batch`] per call. 0 once the replay is out (and always outside a
    /// restart).
    ///
    /// While the epoch logs are still being read the count of their deliveries is not known:
    /// the replay then counts as one.
    pub fn replay_backlog(&self) -> usize {
        self.backlog.len() + self.behind.len() + usize::from(self.stream.is_some())
    }

    /// Counters.
    pub fn stats(&self) -> GroupStats {
        GroupStats {
            transfers_served: self.transfer.served,
            state_bytes_sent: self.transfer.bytes_sent,
            ..self.stats
        }
    }

    /// A universe node that is not a member, set up and asking to join: [`new`](Group::new)
    /// then [`join`](Group::join). The leader adds it to the next view; it then stays
    /// **passive** (it receives the view's messages but hands nothing to the application, and
    /// [`submit`](TotalOrder::submit) answers [`SubmitError::NotASender`]) until a member has
    /// sent it the application's state. Its first upcall is then [`Upcall::View`]: at that
    /// point [`take_state`](Group::take_state) returns the state, to restore before applying
    /// the deliveries that follow (they start at the state's position, with the group's
    /// positions).
    ///
    /// ```
    /// use std::time::Duration;
    /// use squall_membership::{GmsConfig, group::{Group, GroupConfig}, log::MemLog};
    /// use squall_ordering::{TotalOrder, Upcall};
    /// use squall_round_robin::Config;
    /// use squall_transport::{NodeId, RegionId};
    /// use squall_transport_mem::sim::{Sim, SimConfig, SimNode};
    ///
    /// // Three members and one node (3) of the universe that starts outside the group.
    /// let universe: Vec<NodeId> = (0..4).map(NodeId).collect();
    /// let initial = universe[..3].to_vec();
    /// let mut gms = GmsConfig::new(RegionId(0), universe.clone(), initial);
    /// gms.heartbeat_interval = Duration::from_micros(50);
    /// gms.suspicion_timeout = Duration::from_micros(1500);
    /// let epoch = Config { slot_size: 64, max_payload: 64, window: 4, ..Config::new(universe) };
    /// let cfg = GroupConfig::new(gms, epoch);
    /// let (sim, mut nodes) =
    ///     Sim::cluster(SimConfig::seeded(1), 4, &Group::<SimNode, MemLog>::layout(&cfg)?)?;
    /// let joiner = Group::joining(nodes.pop().unwrap(), cfg.clone(), MemLog::default())?;
    /// let mut g: Vec<_> = nodes
    ///     .into_iter()
    ///     .map(|t| Group::new(t, cfg.clone(), MemLog::default(), None))
    ///     .collect::<Result<_, _>>()?;
    /// g.push(joiner);
    /// // The application: the count of delivered messages is its whole state.
    /// let mut applied = [0u64; 4];
    /// // What member 0 submitted and kept: a refused submit (`WindowFull`, `Wedged` while the
    /// // join is under way) is not counted, and neither is one a view change discarded.
    /// let mut sent = 0u64;
    /// let mut ups = Vec::new();
    /// for step in 0..20_000 {
    ///     if step % 50 == 0 && step < 5_000 && g[0].submit(b"m").is_ok() {
    ///         sent += 1;
    ///     }
    ///     for (i, m) in g.iter_mut().enumerate() {
    ///         ups.clear();
    ///         m.poll(&mut ups);
    ///         for u in ups.drain(..) {
    ///             match u {
    ///                 Upcall::Deliver(_) => applied[i] += 1,
    ///                 Upcall::Discarded(_) => sent -= 1,
    ///                 // A joiner's first view: restore the state it was sent.
    ///                 Upcall::View(_) => if let Some(s) = m.take_state() {
    ///                     applied[i] = u64::from_le_bytes(s.state[..8].try_into().unwrap());
    ///                     assert_eq!(applied[i], s.position);
    ///                 },
    ///                 _ => {}
    ///             }
    ///         }
    ///         // A member a joiner asked for the state: snapshot it (here, at once).
    ///         if m.state_wanted() {
    ///             m.provide_state(applied[i], &applied[i].to_le_bytes())?;
    ///         }
    ///     }
    ///     sim.advance(Duration::from_micros(2));
    /// }
    /// assert!(g[3].is_active());
    /// assert!(sent > 90);
    /// assert_eq!(applied, [sent; 4]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// **Rejoining under the same id.** A process restarted in place of a crashed member (a
    /// new incarnation of the node, see `squall_transport::Transport`'s *Incarnations*) starts
    /// with `joining` too, with a fresh log, even when it was an initial member: it never takes
    /// the initial member's view 0 or state, and joins like any joiner, by state transfer. The
    /// members readmit its row once the old incarnation is in none of their views (until then it
    /// waits, asking).
    pub fn joining(transport: T, cfg: GroupConfig, log: L) -> Result<Group<T, L>, GroupError> {
        let mut g = Group::build(transport, cfg, log, None, true)?;
        g.join()?;
        Ok(g)
    }

    /// Asks to join (a universe node outside the group; see [`joining`](Group::joining)).
    pub fn join(&mut self) -> Result<(), GroupError> {
        Ok(self.gms.request_join()?)
    }

    /// Whether this node holds the application's state: an initial member, or a joiner whose
    /// state transfer completed. Only active members deliver, submit and serve transfers.
    pub fn is_active(&self) -> bool {
        self.active && self.stopped.is_none()
    }

    /// Whether a joiner asked this member for the application's state and none was provided
    /// (or refused as too large) in this view yet: call [`provide_state`](Group::provide_state)
    /// (after applying the deliveries handed out so far). Check it after each
    /// [`poll`](TotalOrder::poll). False
    /// whenever `provide_state` would refuse: once the view is wedged (a view change is under
    /// way; the joiner asks again in the next view) or the member stopped; and while a total
    /// restart's replay is still being handed out ([`replay_backlog`](Group::replay_backlog)).
    pub fn state_wanted(&self) -> bool {
        // Not while a restart's replay is still being handed out: the application's state is
        // not at this view's first position yet.
        self.active
            && !self.frozen
            && self.stopped.is_none()
            && self.replay_backlog() == 0
            && self.transfer.wanted()
    }

    /// Gives the group a snapshot of the application's state reflecting every delivery before
    /// `position` (the application's next position to apply: at least the current view's first
    /// position, at most [`next_position`](Group::next_position)). The group streams it to the
    /// joiners that asked this member during this view; a new view drops it. Errors:
    /// [`TransferError::Position`], [`TransferError::TooLarge`], [`TransferError::NotActive`].
    /// A state above `TransferConfig::max_state_bytes` is refused for the rest of the view:
    /// [`state_wanted`](Group::state_wanted) turns false, and each joiner that asks this member
    /// is sent the state's length alone and stops ([`TransferError::TooLarge`] by its own
    /// bound, or [`TransferError::SenderRefused`]) rather than waiting for a state that never
    /// comes.
    pub fn provide_state(&mut self, position: u64, state: &[u8]) -> Result<(), TransferError> {
        self.provide(position, std::borrow::Cow::Borrowed(state))
    }

    /// [`provide_state`](Group::provide_state) with the state handed over: the group keeps
    /// these bytes instead of a copy of them (a large state is not copied on the caller's
    /// thread). Same checks and errors.
    ///
    /// ```no_run
    /// # fn serve<T: squall_transport::Transport, L: squall_membership::log::Durable>(
    /// #     g: &mut squall_membership::group::Group<T, L>, applied: u64, snapshot: Vec<u8>,
    /// # ) -> Result<(), squall_membership::transfer::TransferError> {
    /// if g.state_wanted() {
    ///     g.provide_state_owned(applied, snapshot)?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn provide_state_owned(
        &mut self,
        position: u64,
        state: Vec<u8>,
    ) -> Result<(), TransferError> {
        self.provide(position, std::borrow::Cow::Owned(state))
    }

    /// [`provide_state`](Group::provide_state)'s checks, then the state kept (borrowed bytes
    /// copied, owned ones moved).
    fn provide(
        &mut self,
        position: u64,
        state: std::borrow::Cow<'_, [u8]>,
    ) -> Result<(), TransferError> {
        if !self.active || self.frozen || self.stopped.is_some() {
            return Err(TransferError::NotActive);
        }
        let next = self.next_position();
        self.transfer.provide(position, next, state)
    }

    /// A passive joiner: the member it asked for the application's state in its current view,
    /// until the transfer completes (none before it asked, once active, and outside a view).
    /// It asks only a member it knows to hold the state: one of view 0's that it never saw
    /// fail, or one that announced itself active after its own transfer.
    pub fn state_sender(&self) -> Option<NodeId> {
        self.transfer.asking().filter(|_| !self.active)
    }

    /// The state a joiner received, once, when its transfer completed (just before its first
    /// [`Upcall::View`]); deliveries from its `position` on follow. A member that entered by
    /// transfer and restarts from its logs gets its persisted state back the same way: its
    /// first upcall is the `View` of the view its transfer completed in, this returns the
    /// state, and its replayed deliveries follow from the state's position (see
    /// [`crate::snapshot`]).
    pub fn take_state(&mut self) -> Option<TransferredState> {
        self.state.take()
    }

    /// Makes the application's state durable at a delivered position, so that a total restart
    /// replays only what follows it: `state` must reflect every delivery before `position`
    /// (the application's next position to apply), at or past the current view's first
    /// position and at most [`next_position`](Group::next_position).
    ///
    /// The state is written as a snapshot file in the member's durable directory (the format
    /// and discipline of a transferred state's, [`crate::snapshot`]: a temporary file, synced,
    /// renamed, the directory synced), then a [`Record::Snapshot`] naming it is appended to the
    /// (synced) membership log. Only then are the previous snapshot file and the epoch logs of
    /// views before the current one removed: every position they hold is below the current
    /// view's first position, so the checkpoint covers them. The current view's log stays (a
    /// restart takes this member's logged counts from its last view's log, and the replay
    /// reads on from the checkpoint's position in it). A restart installs the latest snapshot
    /// (the first upcall is this view's [`Upcall::View`], [`take_state`](Group::take_state)
    /// returns the state) and replays the deliveries from its position, like a member that
    /// entered by transfer; such a member counts as its shard's state holder.
    ///
    /// **Nothing here waits on the disk** (with the default
    /// [`CheckpointWriter::Thread`]): the call checks the request and hands the bytes to the
    /// group's writer thread, which writes and syncs the file, renames it and syncs the
    /// directory; it returns [`Checkpointed::Started`]. A later
    /// [`poll`](TotalOrder::poll) that finds the file durable appends the record and removes
    /// what it supersedes (on the polling thread, in order with everything else the group
    /// logs), and [`take_checkpoint_outcome`](Group::take_checkpoint_outcome) then returns
    /// [`Checkpointed::Written`] or the error. One checkpoint is in flight at most: another
    /// call meanwhile is refused with [`CheckpointError::InFlight`]. If the view changes or
    /// the member stops before the file is durable and the record logged, the checkpoint is
    /// abandoned ([`CheckpointError::Abandoned`]; its file removed, nothing recorded);
    /// dropping the group cancels it the same way. With [`CheckpointWriter::Inline`] the
    /// file is written inside this call and the record waits for the next poll all the same.
    ///
    /// **Under the weak fsync policies.** With
    /// [`FsyncPolicy::EveryRecords`] the record
    /// (and so [`Checkpointed::Written`] and the removals) waits until every member of the
    /// view has synced its epoch log past `position`, so a total restart after a power loss
    /// never cuts inside the state the checkpoint holds. The member asks for those syncs
    /// (`RoundRobin::want_synced`: every member, this one included, syncs what its log wrote
    /// at its next poll, on its log's syncer thread by default), so the record comes within
    /// a few polls in a quiet group too (s23); a member that does not poll (a crashed one)
    /// holds it until the view changes, which abandons it. With
    /// [`FsyncPolicy::Never`] it is recorded at once
    /// and, like every delivery under that policy, promised to survive a process crash only:
    /// after a power loss a restart may stop this member with the round-robin log's
    /// `Compacted` error (docs/MEMBERSHIP.md, thirty-sixth part).
    ///
    /// A crash anywhere in between restarts from the previous snapshot (a file without a
    /// record is removed) or from this one (what was not removed yet is removed then).
    /// Cost: one write of the state and three `fsync`s (file, directory, log), whatever the
    /// epochs' `FsyncPolicy`; on the polling thread, only the log's. Under `EveryRecords`
    /// every member syncs its epoch log once more for it, on the log's syncer thread (inline
    /// with `SyncMode::Inline`).
    ///
    /// Returns [`Checkpointed::NotDurable`] with atomic epochs (a restart replays nothing) and
    /// [`Checkpointed::Covered`] when the latest snapshot is already at or past `position`.
    /// Errors: [`CheckpointError::NotNow`] (no state, no epoch in this view, restarting or
    /// replaying, stopped: try again later), [`CheckpointError::InFlight`],
    /// [`CheckpointError::Position`], [`CheckpointError::TooLarge`] (above
    /// `TransferConfig::max_state_bytes`, which a restart could not read back), and (inline)
    /// file failures; the thread's file failures and the log's come through
    /// [`take_checkpoint_outcome`](Group::take_checkpoint_outcome) (nothing is removed then).
    ///
    /// ```no_run
    /// # fn f<T: squall_transport::Transport, L: squall_membership::log::Durable>(
    /// #     g: &mut squall_membership::group::Group<T, L>, app_state: Vec<u8>, applied: u64,
    /// # ) -> Result<(), squall_membership::snapshot::CheckpointError> {
    /// use squall_membership::snapshot::CheckpointError;
    /// // Every `n` applied deliveries: the application's state at its next position.
    /// match g.checkpoint(applied, app_state) {
    ///     Ok(started) => println!("{started:?}"),
    ///     Err(CheckpointError::NotNow(_) | CheckpointError::InFlight { .. }) => {} // later
    ///     Err(e) => return Err(e),
    /// }
    /// // After later polls:
    /// if let Some(outcome) = g.take_checkpoint_outcome() {
    ///     println!("checkpoint: {outcome:?}"); // Written, or why not (ask again later)
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn checkpoint(
        &mut self,
        position: u64,
        state: impl Into<Vec<u8>>,
    ) -> Result<Checkpointed, CheckpointError> {
        self.checkpoint_until(position, StateSource::Bytes(state.into()), None)
    }

    /// [`checkpoint`](Group::checkpoint) with the state given as an encoder, which the
    /// group's writer thread runs (before writing the file) instead of the caller's thread:
    /// the caller hands over a capture of its state at `position` (cheap to take, e.g. an
    /// O(1) clone of a persistent map) and goes on applying deliveries while it is encoded.
    /// Everything else is as for `checkpoint`, except that [`CheckpointError::TooLarge`]
    /// (checked once encoded) and a failure of the encoder ([`CheckpointError::Encode`]) come
    /// through [`take_checkpoint_outcome`](Group::take_checkpoint_outcome) with the thread
    /// writer. With [`CheckpointWriter::Inline`] the encoder runs inside this call.
    ///
    /// ```no_run
    /// # fn f<T: squall_transport::Transport, L: squall_membership::log::Durable>(
    /// #     g: &mut squall_membership::group::Group<T, L>, applied: u64,
    /// # ) -> Result<(), squall_membership::snapshot::CheckpointError> {
    /// // The application's state at `applied`, captured (here: copied) for the writer.
    /// let captured: std::sync::Arc<[u8]> = std::sync::Arc::from(&b"state"[..]);
    /// g.checkpoint_with(applied, Box::new(move |out: &mut Vec<u8>| {
    ///     out.extend_from_slice(&captured);
    ///     Ok(())
    /// }))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn checkpoint_with(
        &mut self,
        position: u64,
        encode: crate::snapshot::EncodeState,
    ) -> Result<Checkpointed, CheckpointError> {
        self.checkpoint_until(position, StateSource::Encoder(encode), None)
    }

    /// [`checkpoint`](Group::checkpoint) cut short at `cut`, leaving the files a process crash
    /// there leaves (for the simulator's crash-point tests: the cuts in the file write happen
    /// in the writer, those after the record in the poll that finishes it; the member must be
    /// shut down right after).
    #[doc(hidden)]
    pub fn checkpoint_cut_at(
        &mut self,
        position: u64,
        state: impl Into<Vec<u8>>,
        cut: CrashPoint,
    ) -> Result<Checkpointed, CheckpointError> {
        self.checkpoint_until(position, StateSource::Bytes(state.into()), Some(cut))
    }

    /// The position of the checkpoint being written, if one is (see
    /// [`checkpoint`](Group::checkpoint)): another is refused until a poll finished it.
    pub fn checkpoint_in_flight(&self) -> Option<u64> {
        self.in_flight.as_ref().map(|f| f.position)
    }

    /// How the last started checkpoint ended, once (after the [`poll`](TotalOrder::poll)
    /// that finished it): [`Checkpointed::Written`], or why it was not (a file or log
    /// failure, [`CheckpointError::Abandoned`]); `None` while one is in flight or when
    /// nothing new ended.
    pub fn take_checkpoint_outcome(&mut self) -> Option<Result<Checkpointed, CheckpointError>> {
        self.checkpoint_outcome.take()
    }

    /// Test hook: every later checkpoint's writer waits for a message on the returned
    /// sender (or for it to be dropped) before writing.
    #[doc(hidden)]
    pub fn gate_checkpoint_writer(&mut self) -> std::sync::mpsc::Sender<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.writer_gate = Some(rx);
        tx
    }

    /// Test hook: the current epoch's log syncer thread waits for a message on the returned
    /// sender (or for it to be dropped) before each `fdatasync` (`RoundRobin`'s
    /// `gate_log_syncer`); `None` without a durable epoch.
    #[doc(hidden)]
    pub fn gate_epoch_log_syncer(&mut self) -> Option<std::sync::mpsc::Sender<bool>> {
        self.epoch.as_mut().and_then(RoundRobin::gate_log_syncer)
    }

    /// Test hook: the current epoch log's next compaction on its thread (after a checkpoint,
    /// [`CheckpointWriter::Thread`]) waits for a message on the returned sender (or for it to
    /// be dropped) before it starts (`RoundRobin`'s `gate_log_compaction`); `None` without a
    /// durable epoch.
    #[doc(hidden)]
    pub fn gate_epoch_log_compaction(&mut self) -> Option<std::sync::mpsc::Sender<()>> {
        self.epoch
            .as_mut()
            .and_then(RoundRobin::gate_log_compaction)
    }

    fn checkpoint_until(
        &mut self,
        position: u64,
        state: StateSource,
        cut: Option<CrashPoint>,
    ) -> Result<Checkpointed, CheckpointError> {
        let Some(dir) = self.durable_dir() else {
            return Ok(Checkpointed::NotDurable);
        };
        let why = if self.stopped.is_some() {
            Some("the member stopped")
        } else if !self.active {
            Some("the member holds no state yet")
        } else if self.gms.restarting().is_some() || self.replay_backlog() > 0 {
            Some("the member is restarting from its logs")
        } else if self.epoch.is_none() {
            Some("the member runs no epoch in this view")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(CheckpointError::NotNow(why));
        }
        if let Some(f) = &self.in_flight {
            return Err(CheckpointError::InFlight {
                position: f.position,
            });
        }
        let (Some(view), next) = (self.view.clone(), self.next_position()) else {
            return Err(CheckpointError::NotNow("the member is in no view"));
        };
        let Some((shard, _)) = shard_in(&view, self.gms.id()) else {
            return Err(CheckpointError::NotNow("the member is in no shard"));
        };
        if position < self.view_first || position > next {
            return Err(CheckpointError::Position {
                position,
                first: self.view_first,
                next,
            });
        }
        if let Some(at) = self.snapshot_at.filter(|&at| at >= position) {
            return Ok(Checkpointed::Covered { at });
        }
        let max = self.cfg.transfer.max_state_bytes as u64;
        let (state, encode) = match state {
            StateSource::Bytes(state) => (state, None),
            StateSource::Encoder(encode) => (Vec::new(), Some(encode)),
        };
        if state.len() as u64 > max {
            return Err(CheckpointError::TooLarge {
                len: state.len() as u64,
                max,
            });
        }
        let bytes = state.len();
        let mut snap = Snapshot {
            view: view.id,
            shard: shard as u32,
            // The offset of this view's epoch log (its positions count from 0 in the view a
            // member entered passive; 0 in later views, which count the group's positions).
            first_position: self.offset,
            position,
            state,
        };
        let file = crate::snapshot::checkpoint_file_name(view.id, snap.shard, position);
        let mut flight = InFlight {
            view: view.id,
            shard: snap.shard,
            first_position: snap.first_position,
            position,
            file: file.clone(),
            bytes,
            cut,
            start: std::time::Instant::now(),
            written: None,
            write_us: 0,
            encode_us: 0,
            asked_syncs: false,
        };
        match self.cfg.checkpoint_writer {
            CheckpointWriter::Inline => {
                if let Some(encode) = encode {
                    crate::snapshot::encode_into(&mut snap, encode, max)?;
                    flight.bytes = snap.state.len();
                    flight.encode_us = flight.start.elapsed().as_micros() as u64;
                }
                flight.written = Some(Ok(crate::snapshot::write_as(&dir, &file, &snap, cut)?));
                flight.write_us = flight.start.elapsed().as_micros() as u64;
            }
            CheckpointWriter::Thread => {
                if self.writer.is_none() {
                    let waker = TotalOrder::waker(self);
                    self.writer = Some(crate::snapshot::Writer::spawn(
                        format!("squall-ckpt-{}", self.gms.id().0),
                        move || waker.wake(),
                    )?);
                }
                let job = crate::snapshot::WriteJob {
                    dir,
                    name: file,
                    snap,
                    encode,
                    max_state: max,
                    cut,
                    gate: self.writer_gate.take(),
                };
                if !self.writer.as_mut().is_some_and(|w| w.send(job)) {
                    self.writer = None;
                    return Err(CheckpointError::NotNow(
                        "the checkpoint writer thread is gone (a new one starts at the next call)",
                    ));
                }
            }
        }
        tracing::debug!(me = %self.gms.id(), view = view.id, position, bytes, "group: checkpoint started");
        self.in_flight = Some(flight);
        Ok(Checkpointed::Started { position })
    }

    /// Finishes the checkpoint in flight if its file is durable (called at the start of every
    /// poll): records it, or abandons it if the member left its view or stopped meanwhile.
    fn finish_checkpoint(&mut self) {
        if self.checkpoint_waits_for_syncs() {
            return;
        }
        let Some(f) = &mut self.in_flight else {
            return;
        };
        let written = match f.written.take() {
            Some(w) => w,
            None => match self.writer.as_ref().map(crate::snapshot::Writer::try_done) {
                Some(Ok(Some(done))) => {
                    f.write_us = done.us;
                    f.encode_us = done.encode_us;
                    f.bytes = done.bytes;
                    done.result
                }
                Some(Ok(None)) => return,
                // The thread is gone (it panicked): nothing it left is recorded.
                Some(Err(())) | None => {
                    self.writer = None;
                    Err(CheckpointError::Snapshot(SnapshotError::Io {
                        path: std::path::PathBuf::from(&f.file),
                        source: std::io::Error::other("the checkpoint writer thread ended"),
                    }))
                }
            },
        };
        let Some(f) = self.in_flight.take() else {
            return;
        };
        let position = f.position;
        let outcome = self.record_checkpoint(f, written);
        if let Err(e) = &outcome {
            tracing::warn!(me = %self.gms.id(), position, error = %e, "group: checkpoint not taken");
        }
        self.checkpoint_outcome = Some(outcome);
    }

    /// Whether the checkpoint in flight must wait before its record: under
    /// [`FsyncPolicy::EveryRecords`](squall_round_robin::FsyncPolicy::EveryRecords) a
    /// checkpoint is recorded (and compacts the log) only once every member of its view has
    /// synced its epoch log past the checkpoint's position
    /// ([`RoundRobin::synced_everywhere`]): a total restart after a power loss then cuts at or
    /// past it, never inside the state it holds (finding 10, docs/MEMBERSHIP.md, thirty-sixth
    /// part). The first time it waits this member asks every member of the view to sync
    /// past the position ([`RoundRobin::want_synced`]; s23, docs/MEMBERSHIP.md, forty-fifth
    /// part): their polls, this member's included, start those syncs (on the logs' syncer
    /// threads by default) without waiting for their next `k`-th record, so the wait ends
    /// in a quiet group too, and nothing here waits on the disk. `false` (go on) when
    /// nothing is in flight, under the other policies (`EveryBatch` delivers only what
    /// every member synced; `Never` promises a process crash only), or when the view changed
    /// or the member stopped (the record is then abandoned). A failed sync stops the epoch
    /// like any failure of its log.
    fn checkpoint_waits_for_syncs(&mut self) -> bool {
        // The running epoch's policy: its subgroup's.
        if !self.epoch.as_ref().is_some_and(|rr| {
            matches!(
                rr.config().mode,
                Mode::Durable {
                    fsync: FsyncPolicy::EveryRecords(_),
                    ..
                }
            )
        }) {
            return false;
        }
        let (Some(f), Some(epoch)) = (self.in_flight.as_mut(), self.epoch.as_mut()) else {
            return false;
        };
        if self.stopped.is_some() || self.view.as_ref().map(|v| v.id) != Some(f.view) {
            return false;
        }
        let needed = f.position.saturating_sub(self.offset);
        if epoch.synced_everywhere().is_none_or(|p| p >= needed) {
            return false;
        }
        if !f.asked_syncs {
            f.asked_syncs = true;
            tracing::debug!(me = %self.gms.id(), view = f.view, position = f.position, "group: the checkpoint waits for the members' syncs; asking for them");
            epoch.want_synced(needed);
        }
        true
    }

    /// The outcome of the compaction started after the checkpoint at `position` of `view`, if
    /// the log has it (the compaction's thread finished, or it ran inline).
    fn take_compaction(&mut self) {
        let Some((view, position)) = self.compacting else {
            return;
        };
        let current = self.view.as_ref().map(|v| v.id) == Some(view);
        let (Some(epoch), true) = (self.epoch.as_mut(), current) else {
            // The view's epoch (and its log, whose drop waited for the compaction) is gone.
            self.compacting = None;
            return;
        };
        if let Some(outcome) = epoch.take_compacted_log() {
            self.compacting = None;
            self.compaction_done(view, position, outcome);
        }
    }

    /// Counts a compaction's dropped bytes, or has the next poll stop the member on its error.
    fn compaction_done(
        &mut self,
        view: u64,
        position: u64,
        outcome: Result<
            Option<squall_round_robin::log::Compacted>,
            squall_round_robin::log::LogError,
        >,
    ) {
        match outcome {
            Ok(Some(c)) => {
                self.stats.log_bytes_compacted += c.dropped_bytes;
            }
            Ok(None) => {}
            // The checkpoint is durable; the log may not be sound (an error after the
            // rename is the log's write error): the caller's poll stops the member.
            Err(e) => {
                self.compaction_failed = Some(format!(
                    "compacting the epoch log of view {view} to the checkpoint at {position}: {e}"
                ))
            }
        }
    }

    /// The ordered remainder of a checkpoint whose file write ended with `written`: the
    /// record, then the removals.
    fn record_checkpoint(
        &mut self,
        f: InFlight,
        written: Result<bool, CheckpointError>,
    ) -> Result<Checkpointed, CheckpointError> {
        let Some(dir) = self.durable_dir() else {
            return Ok(Checkpointed::NotDurable);
        };
        let position = f.position;
        let recording = std::time::Instant::now();
        if !written? || f.cut == Some(CrashPoint::AfterRename) {
            return Ok(Checkpointed::Covered { at: position });
        }
        let why = if self.stopped.is_some() {
            Some("the member stopped while its file was written")
        } else if self.view.as_ref().map(|v| v.id) != Some(f.view) || self.epoch.is_none() {
            Some("the view changed while its file was written")
        } else {
            None
        };
        if let Some(why) = why {
            crate::snapshot::remove_logged(&f.file, &dir.join(&f.file));
            return Err(CheckpointError::Abandoned { position, why });
        }
        self.gms.log_mut().append(&Record::Snapshot {
            view: f.view,
            shard: f.shard,
            first_position: f.first_position,
            position,
            file: f.file.clone(),
        })?;
        self.snapshot_at = Some(position);
        self.stats.checkpoints += 1;
        // Superseded: the older snapshot files, then the epoch logs of earlier views (oldest
        // first: an interrupted removal leaves a suffix of views, all before this one).
        let mut gone = crate::snapshot::others(&dir, Some(&f.file));
        let snapshots = gone.len();
        gone.extend(epoch_logs_before(&dir, f.view));
        let upto = match f.cut {
            Some(CrashPoint::AfterRecord) => 0,
            Some(CrashPoint::MidRemoval) => gone.len().div_ceil(2),
            _ => gone.len(),
        };
        for (i, (name, path)) in gone[..upto].iter().enumerate() {
            if i < snapshots {
                crate::snapshot::remove_logged(name, path);
            } else {
                remove_epoch_log(name, path);
            }
        }
        let logs_removed = upto.saturating_sub(snapshots);
        self.stats.logs_removed += logs_removed as u64;
        // The current view's log: its prefix before the checkpoint goes too (s19), only now
        // that the record is durable (a crash before it restarts from the previous snapshot,
        // whose replay needs that prefix). Every cut a restart or a trim can make is at or past
        // what was delivered, so at or past `position`. The log counts from `offset` in a view
        // this member entered passive (positions are checked at or past `view_first` above).
        // With the writer thread (s24) the compaction runs on the log's compaction thread and
        // a later poll takes its outcome (`take_compaction`): no file-system sync here. One at
        // a time: while one runs, this checkpoint's is skipped (the next one covers more).
        if f.cut.is_none()
            && let Some(epoch) = self.epoch.as_mut()
        {
            let at = position.saturating_sub(self.offset);
            match self.cfg.checkpoint_writer {
                CheckpointWriter::Inline => {
                    let outcome = epoch.compact_log(f.view, at);
                    self.compaction_done(f.view, position, outcome);
                }
                CheckpointWriter::Thread if self.compacting.is_none() => {
                    match epoch.start_compact_log(f.view, at) {
                        Ok(_) => self.compacting = Some((f.view, position)),
                        Err(e) => self.compaction_done(f.view, position, Err(e)),
                    }
                    self.take_compaction();
                }
                CheckpointWriter::Thread => {}
            }
        }
        tracing::info!(
            me = %self.gms.id(), view = f.view, position, bytes = f.bytes, logs_removed,
            us = f.start.elapsed().as_micros() as u64, encode_us = f.encode_us,
            write_us = f.write_us,
            record_us = recording.elapsed().as_micros() as u64, "group: checkpoint durable"
        );
        Ok(Checkpointed::Written {
            position,
            file: f.file,
            logs_removed,
        })
    }

    /// Asks to leave gracefully: the group keeps running until the view without this member
    /// is installed; it then delivers the old view up to the trim, reports its own messages
    /// past it as [`Upcall::Discarded`], and stops (`stopped()` says it left).
    ///
    /// The request is logged, so a total restart before the leave is decided asks again once
    /// the restart view is installed; [`leave_status`](Group::leave_status) says where it
    /// stands, held back included. A restart that finds the group went on without this member
    /// stops it as left, not joining again.
    ///
    /// # Errors
    ///
    /// As [`Gms::leave`]: not a member, the log's append failing (the request is not logged,
    /// so it is not asked: call again), or the table's push failing.
    pub fn leave(&mut self) -> Result<(), GroupError> {
        Ok(self.gms.leave()?)
    }

    /// Where this member's own request to leave stands ([`Gms::leave_status`]): asked, held
    /// back (which shard would be lost and which of its members it waits for to hold the
    /// state, or no majority left), asked again after a total restart, or left (the first
    /// view without it). `None` if it never asked, or if it stopped for another reason
    /// ([`stopped`](Group::stopped)). Ask it after each poll while the leave waits.
    ///
    /// ```
    /// use squall_membership::{GmsConfig, LeaveStatus, group::{Group, GroupConfig}, log::MemLog};
    /// use squall_round_robin::Config;
    /// use squall_transport::{NodeId, RegionId};
    /// use squall_transport_mem::sim::{Sim, SimConfig, SimNode};
    ///
    /// let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
    /// let gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
    /// let epoch = Config { slot_size: 64, max_payload: 64, window: 4, ..Config::new(ids) };
    /// let cfg = GroupConfig::new(gms, epoch);
    /// let (_sim, nodes) = Sim::cluster(SimConfig::seeded(1), 3, &Group::<SimNode, MemLog>::layout(&cfg)?)?;
    /// let mut g: Vec<_> = nodes
    ///     .into_iter()
    ///     .map(|t| Group::new(t, cfg.clone(), MemLog::default(), None))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(g[2].leave_status(), None);
    /// g[2].leave()?;
    /// // Before any round, no other member has published that it holds the state yet.
    /// match g[2].leave_status() {
    ///     Some(LeaveStatus::HeldForState { view: 0, waiting_for, .. }) => {
    ///         assert_eq!(waiting_for, [NodeId(0), NodeId(1)]);
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn leave_status(&self) -> Option<crate::LeaveStatus> {
        self.gms.leave_status()
    }

    /// The position the next delivered message gets (meaningful once active).
    pub fn next_position(&self) -> u64 {
        self.epoch
            .as_ref()
            .map_or(self.position, |e| e.next_position() + self.offset)
    }

    /// Starts `view`'s epoch of this member's shard. Not in a shard (a spare), or an
    /// inadequate view: no epoch; the member only takes part in the membership protocol.
    fn start_epoch(&mut self, view: View) -> Result<(), GroupError> {
        let me = self.gms.id();
        self.waiting = view.inadequate.clone();
        match view.shard_of(me).filter(|_| view.inadequate.is_none()) {
            Some(s) => {
                self.senders = view.shards[s].members.clone();
                let cfg = self.cfg.epoch_for_shard(view.id, s, self.senders.clone());
                let mut rr = RoundRobin::epoch(self.mux.handle(), cfg, self.position)?;
                // A member the core already suspects is failed in this epoch from the start.
                // The epoch's handle is new: it never sees that member's failure, nor the link
                // of a newer incarnation of it that restarted under its id, and without this it
                // would write this view's traffic into that incarnation's regions. That
                // incarnation is not the member this view names, and it may later run a view
                // on the same region set (see docs/MEMBERSHIP.md, eleventh part).
                //
                // Except a new incarnation that the view names and whose link the core waits
                // for (`Gms::expected_incarnation`): it is not yet connected, not failed; the
                // epoch waits for exactly that incarnation, linked by `link_expected` once the
                // core readmitted it.
                let sst = self.gms.sst();
                let known: Vec<NodeId> = (self.senders.iter().copied())
                    .filter(|&n| n != me && sst.row_of(n).is_some_and(|r| sst.is_suspected(r)))
                    .collect();
                for n in known {
                    if let Some(k) = self.gms.expected_incarnation(n) {
                        tracing::info!(me = %me, view = view.id, member = %n, incarnation = k, "group: the view names a new incarnation not linked here yet; the epoch waits for it");
                        rr.expect_incarnation(n, k);
                    } else {
                        tracing::info!(me = %me, view = view.id, member = %n, "group: a member already suspected is failed in the new epoch");
                        rr.suspect_known(n);
                    }
                }
                self.epoch = Some(rr);
                let first = self.active.then_some(self.position);
                if self.active {
                    self.view_first = self.position;
                }
                self.transfer
                    .enter_view(view.id, self.senders.clone(), first);
                self.reported_wedge = false;
            }
            None => {
                self.senders.clear();
                self.epoch = None;
                self.transfer.leave_views();
                if let Some(why) = &view.inadequate {
                    tracing::warn!(me = %me, view = view.id, %why, "group: inadequate view, waiting for members");
                } else {
                    tracing::info!(me = %me, view = view.id, "group: a spare in this view (in no shard)");
                }
            }
        }
        self.view = Some(view);
        self.frozen = false;
        Ok(())
    }

    /// The shard this member runs in its current view, as an index into the view's
    /// [`shards`](View::shards) (none: a spare, not in a view, or the view is inadequate). See
    /// [`placement`](Group::placement) for its name and members.
    pub fn shard(&self) -> Option<usize> {
        let v = self.view.as_ref()?;
        if v.inadequate.is_some() {
            return None;
        }
        v.shard_of(self.gms.id())
    }

    /// What this member runs in its current view: its subgroup, shard and the shard's members
    /// (none: a spare, not in a view, or the view is inadequate). Ask it on each
    /// [`Upcall::View`]: the upcall lists the whole view, this the member's own shard (after a
    /// poll that installed several views, the last one's).
    ///
    /// ```
    /// use squall_membership::{GmsConfig, group::{Group, GroupConfig}, log::MemLog};
    /// use squall_membership::view::{Layout, ShardId, SubgroupPolicy, Subgroups};
    /// use squall_round_robin::Config;
    /// use squall_transport::{NodeId, RegionId};
    /// use squall_transport_mem::sim::{Sim, SimConfig, SimNode};
    ///
    /// let ids: Vec<NodeId> = (0..5).map(NodeId).collect();
    /// let mut gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
    /// // Subgroup 0: one shard of 1; subgroup 1: two shards of exactly 2.
    /// gms.layout = Some(Layout::new(Subgroups::new(vec![
    ///     SubgroupPolicy::fixed_even_shards(1, 1),
    ///     SubgroupPolicy::fixed_even_shards(2, 2),
    /// ])));
    /// let epoch = Config { slot_size: 64, max_payload: 64, window: 4, ..Config::new(ids) };
    /// let cfg = GroupConfig::new(gms, epoch);
    /// let (_sim, nodes) = Sim::cluster(SimConfig::seeded(1), 5, &Group::<SimNode, MemLog>::layout(&cfg)?)?;
    /// let g: Vec<_> = nodes
    ///     .into_iter()
    ///     .map(|t| Group::new(t, cfg.clone(), MemLog::default(), None))
    ///     .collect::<Result<_, _>>()?;
    /// let p = g[4].placement().unwrap();
    /// assert_eq!(p.shard, ShardId { subgroup: 1, shard: 1 });
    /// assert_eq!(p.members, vec![NodeId(3), NodeId(4)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn placement(&self) -> Option<Placement> {
        let v = self.view.as_ref()?;
        let s = &v.shards[self.shard()?];
        Some(Placement {
            view: v.id,
            shard: s.id,
            members: s.members.clone(),
        })
    }

    /// Why the current view runs no shard, when it is inadequate (the group waits, wedged,
    /// until enough members join).
    pub fn waiting(&self) -> Option<&Inadequate> {
        self.waiting.as_ref()
    }

    /// A new incarnation the epoch waits for (see `start_epoch`) that the core readmitted:
    /// the core polled its link, so the shared endpoint's link to the node leads to exactly
    /// that incarnation, and the epoch's row comes up (the epoch's own table cannot tell it
    /// from an older incarnation, and may have been created after the link's event).
    fn link_expected(&mut self) {
        let Some(rr) = &mut self.epoch else {
            return;
        };
        let sst = self.gms.sst();
        for &n in &self.senders {
            let Some(k) = rr.expected_incarnation(n) else {
                continue;
            };
            if sst
                .row_of(n)
                .is_some_and(|r| !sst.is_suspected(r) && sst.known_incarnation(r) == k)
            {
                tracing::info!(me = %self.gms.id(), member = %n, incarnation = k, "group: the expected incarnation is linked; the epoch counts it");
                rr.link_expected(n);
            }
        }
    }

    fn report_wedge(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) {
        if self.active && !self.reported_wedge {
            self.reported_wedge = true;
            upcalls.push(Upcall::Wedged);
        }
    }

    fn stop(&mut self, why: String, upcalls: &mut Vec<Upcall<Delivery>>) {
        if self.stopped.is_none() {
            tracing::warn!(me = %self.gms.id(), reason = %why, "group: stopped");
            self.stopped = Some(why);
            self.epoch = None;
            self.transfer.leave_views();
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
        // A later view: view 0's epoch, held or not, is over; what it held was never sent.
        self.held = false;
        upcalls.extend(self.held_sends.drain(..).map(Upcall::Discarded));
        Self::refuse_lost(&view)?;
        let had_epoch = self.epoch.is_some();
        if self.restart_logged.is_some()
            && self.gms.restarting().is_some()
            && let (Some(t), Some(last)) = (&trim, self.view.take())
        {
            // Restarting, caught up one view from a peer: cut the old view's log to the
            // decision it was installed with; the restart goes on in `view`.
            let me = self.gms.id();
            if let Some((s, senders)) = shard_in(&last, me)
                && let Some(path) = self.cfg.epoch_log_of(last.id, s)
            {
                let end = trim_end(t, &senders);
                let mut kept = self.cut_restart_log(last.id, s, &path, end, false)?;
                kept.marks = Vec::new();
                self.skimmed.insert(last.id, kept);
            }
            self.zero_restarted_set(&last);
            let (counts, kept) = logged_counts(&self.cfg, &view, me)?;
            self.restart_logged = Some(counts);
            if let Some(kept) = kept {
                self.stats.replay_peak_buffer =
                    self.stats.replay_peak_buffer.max(kept.peak_buffer as u64);
                self.skimmed.insert(view.id, kept);
            }
            self.history.push((view.id, shard_in(&view, me)));
            self.view = Some(view);
            return Ok(());
        }
        if self.restart_logged.take().is_some()
            && let (Some(t), Some(last)) = (&trim, self.view.take())
        {
            let me = self.gms.id();
            self.zero_restarted_set(&last);
            if matches!(self.base, Base::Stateless) {
                // Its logged counts counted in the trim; it has nothing to replay and joins the
                // restart view passive, its state to come by transfer.
                if let Some((s, senders)) = shard_in(&last, me)
                    && let Some(path) = self.cfg.epoch_log_of(last.id, s)
                    && path.exists()
                {
                    let end = trim_end(t, &senders);
                    self.cut_restart_log(last.id, s, &path, end, true)?;
                }
                self.skimmed.clear();
                self.history.clear();
                self.position = 0;
                tracing::info!(me = %me, view = last.id, "group: restarted without state: passive until a transfer");
            } else {
                self.replay(&last, t, upcalls)?;
                // It holds its shard's state again: tell every node, so that a joiner may ask
                // it (joiners ask only members known to hold the state: view 0's and announced
                // ones).
                self.transfer.activate(self.position);
                tracing::info!(me = %me, view = last.id, position = self.position, "group: restarted from the logs (the replay is read as it is handed out)");
            }
        }
        if let (Some(trim), Some(mut old), Some(old_view)) =
            (trim, self.epoch.take(), self.view.take())
        {
            let counts: Vec<u64> = self.senders.iter().map(|&m| trim.count(m)).collect();
            let mut out = std::mem::take(&mut self.scratch);
            out.clear();
            let back = old
                .deliver_up_to(&counts, &mut out)
                .map_err(|error| GroupError::Trim {
                    view: old_view.id,
                    error,
                })?;
            if self.active {
                self.stats.delivered_at_trim += out.len() as u64;
                self.stats.discarded += back.len() as u64;
                for u in out.drain(..) {
                    self.emit(u, upcalls)?;
                }
                upcalls.extend(back.into_iter().map(Upcall::Discarded));
            }
            out.clear();
            self.scratch = out;
            self.position = old.next_position() + self.offset;
            drop(old);
            let shard = old_view.shard_of(self.gms.id()).unwrap_or(0);
            if let Some(path) = self.cfg.epoch_log_of(old_view.id, shard) {
                // The decision is logged (the core logs before acting): cut what it discards.
                squall_round_robin::log::Log::cut(&path, trim_end(&trim, &self.senders))?;
                // `EveryRecords` leaves up to `k - 1` records of the ended epoch unsynced (the
                // cut syncs only what it truncates), and the next epoch's log syncs its own:
                // a power loss would keep the new view's records without the tail of the
                // old one's, a gap no restart replays past. So that tail is made durable
                // before the next epoch logs anything. (`EveryBatch` synced it already;
                // `Never` promises nothing past a process crash.)
                if let FsyncPolicy::EveryRecords(_) = self.cfg.epoch_fsync_of(shard) {
                    std::fs::File::open(&path)
                        .and_then(|f| f.sync_data())
                        .map_err(|source| squall_round_robin::log::LogError::Io {
                            path: path.clone(),
                            source,
                        })?;
                }
            }
            // No peer writes set `old_view.id mod 2` again before this member acks view
            // `view.id + 1`, which it does only after this point.
            let set = self
                .cfg
                .epoch_for_shard(old_view.id, shard, self.senders.clone());
            self.mux.with(|t| RoundRobin::<T>::zero_regions(t, &set));
        }
        self.offset = 0;
        if !view.contains(self.gms.id()) {
            // A leaver: it delivered up to the trim; the core reports `Left` next.
            return Ok(());
        }
        if view.inadequate.is_some() || view.shard_of(self.gms.id()).is_none() {
            // No shard runs here (inadequate), or this member is a spare: it stays wedged (or
            // passive) and only takes part in the membership protocol.
            return self.start_epoch(view);
        }
        if !self.active {
            // A joiner's first view, or a later one while its transfer had not completed: drop
            // what it buffered and received; its epoch counts from 0 until the transfer says
            // where the view started; it asks this view's member for the state again.
            if had_epoch {
                self.stats.transfer_restarts += 1;
            }
            self.buffer.clear();
            self.durable_held = None;
            self.position = 0;
            tracing::info!(me = %self.gms.id(), view = view.id, "group: passive in view, waiting for the state transfer");
            return self.start_epoch(view);
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

    /// A view that lost a shard stops every member that installs it ([`GroupError::ShardLost`]),
    /// a leaver and a joiner included, *before* anything of the ended view's trim is delivered
    /// or cut from its epoch log (s22): the lost view runs nowhere and nothing of the decision
    /// that installed it is acted on, so a total restart can void that decision and restart
    /// the view before it with the lost shard's last holders (`docs/MEMBERSHIP.md`,
    /// thirty-second part). Whatever the trim would have delivered is still in the logs.
    fn refuse_lost(view: &View) -> Result<(), GroupError> {
        match view.inadequate.clone().filter(|w| w.lost) {
            Some(why) => Err(GroupError::ShardLost { view: view.id, why }),
            None => Ok(()),
        }
    }

    /// Hands an epoch upcall on: a passive joiner buffers deliveries; an active member gets
    /// them with the group's positions, minus those its transferred state already reflects.
    fn emit(
        &mut self,
        u: Upcall<Delivery>,
        upcalls: &mut Vec<Upcall<Delivery>>,
    ) -> Result<(), GroupError> {
        match u {
            Upcall::Deliver(mut d) => {
                if !self.active {
                    if self.buffer.len() >= self.cfg.transfer.max_buffered {
                        return Err(TransferError::BufferFull {
                            max: self.cfg.transfer.max_buffered,
                        }
                        .into());
                    }
                    self.buffer.push(d);
                    return Ok(());
                }
                d.position += self.offset;
                if d.position >= self.skip_until {
                    upcalls.push(Upcall::Deliver(d));
                }
            }
            Upcall::Durable(p) => {
                if !self.active {
                    // A passive joiner reports nothing before its `View` (s20: it reported
                    // durable positions of its epoch's own count before the application knew
                    // the view); the latest is reported after the buffered deliveries.
                    self.durable_held = Some(self.durable_held.map_or(p, |q| q.max(p)));
                    return Ok(());
                }
                let p = p + self.offset;
                if p >= self.skip_until {
                    upcalls.push(Upcall::Durable(p));
                }
            }
            other => upcalls.push(other),
        }
        Ok(())
    }

    /// The transfer completed: the joiner becomes active in its current view.
    fn activate(
        &mut self,
        done: Completed,
        upcalls: &mut Vec<Upcall<Delivery>>,
    ) -> Result<(), GroupError> {
        let Some(view) = self.view.clone() else {
            return Ok(());
        };
        // Durable before anything acts on it: the application, the peers (the "active" word),
        // a later restart's counting.
        self.persist(&view, &done)?;
        self.active = true;
        self.offset = done.first_position;
        self.skip_until = done.state.position;
        self.view_first = done.first_position;
        tracing::info!(
            me = %self.gms.id(), view = view.id, bytes = done.state.state.len(),
            position = done.state.position, buffered = self.buffer.len(),
            "group: state transfer complete, active"
        );
        self.state = Some(done.state);
        self.transfer.activate(done.first_position);
        upcalls.push(Upcall::View(squall_ordering::View {
            id: view.id,
            members: view.members.clone(),
            leader: Some(view.leader),
        }));
        for d in std::mem::take(&mut self.buffer) {
            self.emit(Upcall::Deliver(d), upcalls)?;
        }
        if let Some(p) = self.durable_held.take() {
            self.emit(Upcall::Durable(p), upcalls)?;
        }
        if self.frozen {
            self.report_wedge(upcalls);
        }
        Ok(())
    }

    fn step(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> Result<bool, GroupError> {
        let mut busy = false;
        if self.held {
            busy |= self.release_first_start(upcalls);
        }
        // A member configured differently (its settings digest, docs/MEMBERSHIP.md,
        // fifty-second part): the epoch is not polled, and the core's poll below stops.
        if !self.frozen
            && !self.held
            && self.gms.settings_agree()
            && let Some(rr) = &mut self.epoch
        {
            let mut out = std::mem::take(&mut self.scratch);
            out.clear();
            busy |= rr.poll(&mut out);
            let mut wedged = false;
            let mut result = Ok(());
            for u in out.drain(..) {
                match u {
                    Upcall::Wedged => wedged = true,
                    other => {
                        if result.is_ok() {
                            result = self.emit(other, upcalls);
                        }
                    }
                }
            }
            self.scratch = out;
            result?;
            if wedged {
                self.report_wedge(upcalls);
            }
        }
        if self.gms.restarting().is_some() {
            // Peers restarting without their shard's state are no state holders, initial
            // members or not: a member without state must not ask them for one.
            for peer in self.gms.restarted_without_state() {
                self.transfer.not_a_holder(peer);
            }
        }
        if self.frozen || self.view.is_none() {
            // Not polled as sender or joiner this round: still note failures at once (a failed
            // incarnation stops being a state holder before a later one can announce itself).
            self.transfer.track_failures();
        } else {
            if self.active {
                busy |= self.transfer.poll_sender();
            } else {
                let sst = self.gms.sst();
                let suspected = |n: NodeId| sst.row_of(n).is_some_and(|r| sst.is_suspected(r));
                if let Some(done) = self.transfer.poll_joiner(&suspected)? {
                    busy = true;
                    self.activate(done, upcalls)?;
                }
            }
        }
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        // A spare of view 0 runs no epoch and delivers nothing.
        let nothing_delivered = self.position == 0
            && self.offset == 0
            && (self.epoch.as_ref()).is_none_or(|rr| rr.next_position() == 0);
        // Durable epochs, in view 0's epoch since the first start: every delivery is in its log.
        let delivered_in_log = self.position == 0
            && self.offset == 0
            && self.epoch.is_some()
            && self.cfg.epoch_log(0).is_some();
        let mut wedger = Wedger::<T> {
            epoch: self.epoch.as_mut(),
            senders: &self.senders,
            frozen: &mut self.frozen,
            logged: self.restart_logged.as_deref(),
            holds: self.active,
            nothing_delivered,
            delivered_in_log,
        };
        let r = self.gms.poll(&mut wedger, &mut events);
        if self.restart_logged.is_none()
            && self.gms.restarting().is_some()
            && self.view.as_ref().is_some_and(|v| v.id == 0)
        {
            self.restart_first_start()?;
        }
        if self.restart_logged.is_some()
            && self.gms.view().is_none()
            && self.gms.rejoined().is_some()
        {
            self.rejoin()?;
        }
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
        self.link_expected();
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
        if !self.active && self.epoch.is_some() {
            return Err(SubmitError::NotASender(format!(
                "{} is joining: its state transfer has not completed",
                self.gms.id()
            )));
        }
        match &mut self.epoch {
            Some(_) if self.held => self.hold_send(payload),
            Some(rr) if !self.frozen => rr.submit(payload),
            Some(_) => Err(SubmitError::Wedged),
            None if self.waiting.is_some() => Err(SubmitError::Wedged),
            None => match &self.view {
                Some(v) => Err(SubmitError::NotASender(format!(
                    "{} is a spare in view {}: it is in no shard (every shard is full)",
                    self.gms.id(),
                    v.id
                ))),
                None => Err(SubmitError::NotASender(format!(
                    "{} is not in a view yet",
                    self.gms.id()
                ))),
            },
        }
    }

    fn poll(&mut self, upcalls: &mut Vec<Upcall<Delivery>>) -> bool {
        self.finish_checkpoint();
        self.take_compaction();
        if let Some(why) = self.compaction_failed.take() {
            self.stop(why, upcalls);
        }
        let before = upcalls.len();
        let busy = self.stopped.is_none()
            && match self.step(upcalls) {
                Ok(busy) => busy,
                Err(e) => {
                    self.stop(e.to_string(), upcalls);
                    true
                }
            };
        if self.replay_backlog() == 0 && self.replay_at.is_none() {
            return busy;
        }
        // A restart's replay: hand out at most `replay_batch` upcalls, in order, behind what
        // earlier polls left: what came before the replay, the replay's deliveries (read from
        // the logs now, in slices), then what followed them.
        let mut produced: Vec<_> = upcalls.drain(before..).collect();
        if let Some(at) = self.replay_at.take() {
            let after = produced.split_off(at.saturating_sub(before).min(produced.len()));
            self.backlog.extend(produced);
            self.behind.extend(after);
        } else if self.stream.is_some() {
            self.behind.extend(produced);
        } else {
            self.backlog.extend(produced);
        }
        let mut n = self.cfg.replay_batch;
        loop {
            let k = n.min(self.backlog.len());
            upcalls.extend(self.backlog.drain(..k));
            n -= k;
            let Some(stream) = self.stream.as_mut().filter(|_| n > 0) else {
                break;
            };
            match stream.pull(n, upcalls, &mut self.stats) {
                Ok((got, done)) => {
                    n -= got;
                    if !done {
                        break;
                    }
                    self.stream = None;
                    self.backlog.extend(self.behind.drain(..));
                    tracing::info!(me = %self.gms.id(), replayed = self.stats.replayed, position = self.position, peak_buffer = self.stats.replay_peak_buffer, "group: the restart's replay is read out");
                }
                Err(e) => {
                    // What followed the replay must not reach the application.
                    self.stream = None;
                    self.behind.clear();
                    self.stop(e.to_string(), upcalls);
                    break;
                }
            }
        }
        self.stats.replay_polls += 1;
        true
    }

    fn wait(&mut self, timeout: Duration) {
        if self.replay_backlog() > 0 {
            return; // the replay's backlog is ready to hand out
        }
        if self.in_flight.as_ref().is_some_and(|f| f.written.is_some()) {
            return; // an inline checkpoint's file is durable: the next poll records it
        }
        self.gms.wait(timeout);
    }

    fn waker(&self) -> squall_transport::Waker {
        self.gms.sst().transport().waker()
    }
}

/// Deletes the epoch logs (set-aside `.superseded` ones and side indexes too) of views before `view` in a
/// member's durable directory: once a snapshot taken in `view` (a transferred state or a
/// checkpoint) is durable, no restart replays them (failures are logged: a leftover file is
/// only wasted space). Returns how many there were.
fn remove_epoch_logs_before(dir: &std::path::Path, view: u64) -> usize {
    let logs = epoch_logs_before(dir, view);
    for (name, path) in &logs {
        remove_epoch_log(name, path);
    }
    logs.len()
}

/// The epoch logs (set-aside `.superseded` ones and the logs' side indexes too) of views
/// before `view` in `dir`, sorted by name (oldest view first).
fn epoch_logs_before(dir: &std::path::Path, view: u64) -> Vec<(String, std::path::PathBuf)> {
    let mut out: Vec<_> = crate::snapshot::files_in(dir)
        .into_iter()
        .filter(|(name, _)| {
            name.strip_prefix("epoch-")
                .and_then(|r| r.get(..20))
                .and_then(|d| d.parse::<u64>().ok())
                .is_some_and(|v| {
                    v < view
                        && (name.ends_with(".log")
                            || name.ends_with(".log.superseded")
                            || name.ends_with(".log.idx")
                            || name.ends_with(".log.compact")
                            || name.ends_with(".log.idx.new")
                            || name.ends_with(".log.new"))
                })
        })
        .collect();
    out.sort();
    out
}

/// Removes an epoch log a snapshot covers, logging (not returning) a failure.
fn remove_epoch_log(name: &str, path: &std::path::Path) {
    if let Err(err) = std::fs::remove_file(path) {
        tracing::warn!(file = name, error = %err, "group: could not remove an epoch log a snapshot covers");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::view::{Assignment, Layout, LayoutError, Shard, ShardBounds};

    /// A layout whose subgroup 1 has no shard (subgroups 0 and 2 have one each), which
    /// start-up validation refuses.
    struct Gap;

    impl ShardLayout for Gap {
        fn shape(&self) -> Vec<Vec<ShardBounds>> {
            let b = ShardBounds { min: 1, max: 3 };
            vec![vec![b], vec![], vec![b]]
        }
        fn assign(&self, _prev: Option<&[Shard]>, members: &[NodeId]) -> Assignment {
            let (a, b) = members.split_at(members.len() / 2);
            Assignment {
                shards: vec![
                    Shard {
                        members: a.to_vec(),
                        ..Shard::default()
                    },
                    Shard {
                        members: b.to_vec(),
                        ..Shard::default()
                    },
                ],
                inadequate: None,
            }
        }
    }

    /// Review finding 2 (s23 follow-up): an empty subgroup took the next subgroup's profile
    /// (`largest_epoch_config` went through its "first shard", which is the next subgroup's)
    /// and a shard past the shape took subgroup 0's. Each now comes from the subgroup itself,
    /// and validation refuses the empty subgroup.
    #[test]
    fn an_empty_subgroup_and_a_shard_past_the_shape_get_no_other_subgroups_profile() {
        let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
        let mut gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
        gms.layout = Some(Layout::new(Gap));
        let mut cfg = GroupConfig::new(gms, EpochConfig::new(ids));
        let template = cfg.epoch.clone();
        let small = EpochProfile {
            window: template.window + 3,
            max_payload: template.slot_size,
            ..EpochProfile::of(&template)
        };
        let large = EpochProfile {
            window: template.window + 1,
            ..EpochProfile::of(&template)
        };
        cfg.profiles.insert(0, large);
        cfg.profiles.insert(2, small);
        // Subgroup 1 (empty) has no profile: the template, not subgroup 2's.
        let empty = cfg.largest_epoch_config(0, 1);
        assert_eq!(
            (empty.window, empty.max_payload),
            (template.window, template.max_payload)
        );
        // Subgroup 2's largest epoch: its own profile.
        assert_eq!(cfg.largest_epoch_config(0, 2).window, small.window);
        // Flat shard 1 is subgroup 2's; shard 2 is past the shape: the template, not
        // subgroup 0's profile.
        assert_eq!(cfg.subgroup_of_shard(1), Some(2));
        assert_eq!(cfg.subgroup_of_shard(2), None);
        assert_eq!(cfg.epoch_for_shard(0, 1, Vec::new()).window, small.window);
        assert_eq!(
            cfg.epoch_for_shard(0, 2, Vec::new()).window,
            template.window
        );
        // Start-up refuses the empty subgroup, naming the rule.
        let e = cfg.validate().unwrap_err();
        assert!(
            matches!(
                e,
                GroupError::Gms(GmsError::Config(crate::config::ConfigError::Layout(
                    LayoutError::Shape
                )))
            ),
            "{e}"
        );
        assert!(e.to_string().contains("each with between 1"), "{e}");
    }
}
