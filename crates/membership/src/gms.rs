//! The sans-IO membership core over its own SST region (the GMS table).
//!
//! One row per universe node. Multi-word facts live in *blocks*, each written with a single push
//! and laid out as `[seq, payload…, check]`, where `check` hashes `seq` and the payload: a reader
//! takes a block only when the check matches, so a block read while a newer push is landing
//! (words are atomic, whole writes are not) is skipped until it settles. Blocks:
//!
//! - `view`: `[vid+1, n, members…, (shard+1) << 32 | index in it, per member (0: a spare)…,
//!   inadequacy (2 words)]` ([`View::encode`]), padded to the universe, then a *restarting*
//!   word (`vid+1` when the node is in restart mode at that view, else 0) — the view this node
//!   installed (outsiders follow these, shards and the layout's verdict included: the layout
//!   depends on the previous view's shards, which an outsider never saw); the restarting word
//!   is in the same block so a peer can never see the view without it (the restart's
//!   catch-up rule needs it, see [`crate::restart`]);
//! - `wedge`: `[vid+1, received… (padded to the universe), holds]` — wedged in `vid`, with the
//!   per-sender received counts and whether this node then held its shard's state
//!   ([`Epoch::holds_state`]: 1, else 0);
//! - `prop`: `[vid+1, rank, n, changes…]` — the proposal this node published (leader) or
//!   copied (follower: the copy is its acknowledgement);
//! - `dec`: `[vid+1, rank, n, changes…, trim…, holders…]` — the decision this node logged and
//!   published (leader) or echoed (follower). `holders` is [`HOLDERS_KNOWN`](crate::block::HOLDERS_KNOWN) or 0, then a
//!   bitmap by rank in `vid` of the members whose wedge said they held their shard's state
//!   (copied from the deciding leader's block, or from the log by a restarted member
//!   re-publishing a decision it logged with them; 0: not known, a restart's decision or one
//!   logged before the holders were, whose next view counts every shard member as holding).
//!
//! Plus two single-word flags, `join` and `leave`. See `docs/MEMBERSHIP.md` for the protocol and
//! why a decision that anyone acted on is the one every later leader adopts.

use squall_sst::{SchemaBuilder, Sst, SstConfig, SstError, Vector};
use squall_transport::{NodeId, RegionSpec, Transport};
use thiserror::Error;

use crate::block::{BlockError, DecisionBlock, ProposalBlock, WedgeBlock};
use crate::change::{Change, ChangeKind, Decision};
use crate::config::{ConfigError, GmsConfig};
use crate::log::{Durable, LogError, Record, Recovered};
use crate::restart::SettingsCheck;
use crate::settings::SettingsDigest;
use crate::trim::{self, Trim};
use crate::view::{Layout, ShardBounds, ShardId, ShardLayout, View};

/// Why a member stopped for good.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum StopReason {
    /// It no longer sees a majority of its view: it may be on the minority side of a partition,
    /// so it installs nothing more. Restart it and let it rejoin.
    #[error(
        "minority: in view {view} this member suspects {suspected:?}, leaving fewer than a majority; stopped"
    )]
    Minority {
        /// The view.
        view: u64,
        /// Whom it suspects.
        suspected: Vec<NodeId>,
    },
    /// The group installed a view without it (it was suspected of failure).
    #[error("removed: view {view} was installed without this member")]
    Removed {
        /// The first view without it.
        view: u64,
    },
    /// A restarting member's log ends at view `view`, but a peer already installed `newer`
    /// (a later restart went on without it): it cannot rejoin from its own log. No longer
    /// produced by the core: such a member now joins again as a new member and takes its state
    /// by transfer ([`Gms::rejoined`]); kept for the drivers that match on it.
    #[error(
        "restart: this member's log ends at view {view} but view {newer} was already installed without it; it needs state transfer to rejoin (not built), or a fresh log"
    )]
    Superseded {
        /// The view its log ends at.
        view: u64,
        /// The newer view a peer installed.
        newer: u64,
    },
    /// Restart mode: this member suspects members of the view it restarts (`view`, its last
    /// logged one) such that those it does not suspect are fewer than a majority of it. In this
    /// process those suspicions are final (the table never clears one, and a restarting member
    /// readmits no new incarnation), and it ignores the rows of members it suspects, so it
    /// could neither complete the restart nor catch up from the members that did: it stops
    /// instead of waiting forever. Typically a false suspicion (a peer's poll loop stalled, a
    /// slow link) after which the others cut it. Restart it from its log: it then restarts
    /// with the others, catches up from them, or joins again by state transfer. (Members of
    /// the view that never connected are not suspected: the restart waits for them.)
    #[error(
        "restart of view {view}: this member suspects {suspected:?}, leaving fewer than a majority of that view; it cannot complete the restart nor catch up in this process: stopped (restart it from its log)"
    )]
    RestartCutOff {
        /// The view being restarted (the last logged one).
        view: u64,
        /// Whom it suspects.
        suspected: Vec<NodeId>,
    },
    /// Restart mode: the restart of view `view` adopts a logged decision (its next view is
    /// `adopted`), and the members of `adopted` it lacks (`start`) are counted out in this
    /// process (suspected or not restarting: final here), so the restart view it could
    /// install holds a majority neither of `view` nor of `adopted`, or, where the adopted
    /// decision admits members, no majority of `adopted` (the rule of `adoption_short`, see
    /// docs/MEMBERSHIP.md, "A restart adopting a decision that removed a restarted member",
    /// and its sixty-fifth part). The wait for them could not end in this process: it stops
    /// instead. Operator action: a new total restart of every member with `start` (enough of
    /// them for a majority of `adopted`) started too. Only with
    /// [`partition_safety`](crate::GmsConfig::partition_safety) (off, it waits).
    #[error(
        "restart of view {view}: it adopts a logged decision whose next view is {adopted:?}, and {start:?} of it are counted out in this process, leaving too few for the restart (it needs a majority of {adopted:?}, or of view {view} if the decision admits nobody): stopped; restart every member again with {start:?} started too"
    )]
    RestartShortOfAdopted {
        /// The view being restarted (the last logged one).
        view: u64,
        /// The next view of the adopted decision.
        adopted: Vec<NodeId>,
        /// The members of `adopted` to start for a new total restart (those counted out here).
        start: Vec<NodeId>,
    },
    /// It left gracefully; `view` is the first view without it.
    #[error("left: view {view} was installed without this member, as it asked")]
    Left {
        /// The first view without it.
        view: u64,
    },
    /// A member of this node's view (or, for a joiner, a member of the group it asked to join)
    /// publishes another settings digest ([`crate::settings`]): the two were configured
    /// differently in a way that would run other row layouts or compute other views. A
    /// joiner's join is never proposed; a member stops. Configure every node alike.
    #[error(
        "node {node}: its settings differ from the group's: digest {theirs} vs {mine} (this node's); differing: {groups:?}; stopped: configure every member with the same settings"
    )]
    SettingsDiffer {
        /// The node whose digest differs from this node's.
        node: NodeId,
        /// Its digest.
        theirs: SettingsDigest,
        /// This node's.
        mine: SettingsDigest,
        /// The groups of settings that differ.
        groups: Vec<&'static str>,
    },
}

/// Errors of the membership core. Applications meet them at start-up (through
/// [`GroupError::Gms`](crate::group::GroupError::Gms)), and the enum grows: it is
/// `#[non_exhaustive]`, so a match needs a wildcard arm.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum GmsError {
    /// The configuration cannot work.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The GMS table could not be set up.
    #[error("GMS table: {0}")]
    Setup(#[from] squall_sst::SetupError),
    /// The GMS table's schema could not be built.
    #[error("GMS table schema: {0}")]
    Schema(#[from] squall_sst::SchemaError),
    /// The table failed at run time.
    #[error("GMS table: {0}")]
    Sst(#[from] SstError),
    /// The durable log failed; the member cannot echo or act on anything it cannot log.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The member has stopped.
    #[error("membership stopped: {0}")]
    Stopped(StopReason),
    /// `leave` was called by a node that is not a member.
    #[error("only a member can leave; this node is not in a view")]
    NotAMember,
    /// A block this member was about to publish does not fit its table (a bug: the core
    /// bounds what it publishes by the configuration the table was sized for).
    #[error("GMS table block: {0}")]
    Block(#[from] BlockError),
    /// A restart from the log: the logged view places a member (this node or another) in a
    /// subgroup the configured layout no longer lists for it ([`ShardLayout::subgroups_of`],
    /// e.g. a reservation for another subgroup added to the configuration since). A member
    /// stays in its shard, so the restarted view and every view after it would be inadequate
    /// ([`LayoutFault::Ineligible`](crate::view::LayoutFault::Ineligible)) and the group would
    /// wait for good; the node refuses to start instead, before it touches any file.
    #[error(
        "restarting from the log: node {node} is in {shard} of the logged view {view}, but the configured layout lists it for subgroup(s) {eligible:?} only (the configuration changed across the restart); a member never changes shards, so restart the group with the layout it ran with (a node moves to another subgroup only by leaving and joining again)"
    )]
    NoLongerEligible {
        /// The member no longer eligible.
        node: NodeId,
        /// The logged view restarted.
        view: u64,
        /// Its shard there.
        shard: ShardId,
        /// The subgroups the configured layout lists for it.
        eligible: Vec<usize>,
    },
    /// A restart from the log: the configuration's settings digest differs from the one the
    /// log was written under (its latest [`Record::Settings`]), i.e. settings that must agree
    /// across the group changed while it was down. The views a member computes from logged
    /// records, and with co-located hosts which sets of members are majorities, depend on them,
    /// so the node refuses to start instead, before it touches any file.
    #[error(
        "restarting from the log: the configured settings (digest {configured}) differ from those the log was written under (digest {logged}); differing: {groups:?}; restore the configuration the log was written under, or start the group afresh (new logs); {}",
        settings_changed_hint(logged, configured)
    )]
    SettingsChanged {
        /// The digest of the log's latest [`Record::Settings`].
        logged: SettingsDigest,
        /// The digest of the configuration given.
        configured: SettingsDigest,
        /// The groups of settings that differ ([`SettingsDigest::differing`]).
        groups: Vec<&'static str>,
    },
    /// A restart from the log with [`GmsConfig::settings_from`] set: the log was written under
    /// another digest than the one named (a mistyped or stale value, or this member's log is
    /// not the group's it was meant for), so the change it accepts is not this log's.
    #[error(
        "restarting from the log: settings_from names digest {named:016x} to move from, but the log was written under digest {logged} (the configured settings are digest {configured}); a mistyped or stale digest: name the digest the log was written under, or restore that configuration"
    )]
    SettingsFromMismatch {
        /// The digest named ([`GmsConfig::settings_from`]).
        named: u64,
        /// The digest of the log's latest [`Record::Settings`].
        logged: SettingsDigest,
        /// The digest of the configuration given.
        configured: SettingsDigest,
    },
    /// A restart from the log accepting a settings change ([`GmsConfig::settings_from`] names
    /// the log's digest), but the change is not one a total restart can make: the membership
    /// settings decide which sets of members were majorities of the logged views (a restart
    /// counted under others need not meet a decision those views committed), and the layout
    /// decides the shards of every view rebuilt from the log. Only the driver's settings
    /// ([`SettingsDigest::driver`]) may change (docs/MEMBERSHIP.md, sixty-first part).
    #[error(
        "restarting from the log: settings_from accepts moving from digest {logged} (the log's) to digest {configured}, but the change includes {groups:?}; only the driver (epoch template and profiles) settings may change at a total restart: restore the membership and layout settings the log was written under, or start the group afresh (new logs)"
    )]
    SettingsChangeRefused {
        /// The digest of the log's latest [`Record::Settings`].
        logged: SettingsDigest,
        /// The digest of the configuration given.
        configured: SettingsDigest,
        /// The groups of settings that differ and may not ([`SettingsDigest::differing`],
        /// less the driver's).
        groups: Vec<&'static str>,
    },
}

/// The end of [`GmsError::SettingsChanged`]'s message: how to accept the change where only
/// the driver's settings differ (the one group [`GmsConfig::settings_from`] can accept), else
/// that the differing groups cannot change at a total restart.
fn settings_changed_hint(logged: &SettingsDigest, configured: &SettingsDigest) -> String {
    if logged.differs_in_driver_only(configured) {
        format!(
            "a deliberate change of the driver (epoch) settings only is accepted when every member restarts naming the log's digest {logged} as the one it moves from (GmsConfig::settings_from)"
        )
    } else {
        "the membership and layout settings cannot change at a total restart (GmsConfig::settings_from accepts a change of the driver (epoch) settings only)".to_string()
    }
}

/// What the core tells its driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GmsEvent {
    /// The member wedged its epoch of view `view` (it called [`Epoch::wedge`]): nothing more is
    /// sent or delivered in it until the trim is known.
    Wedged {
        /// The view.
        view: u64,
    },
    /// A view was installed. `trim` ends the previous view (deliver exactly up to it, discard
    /// beyond); `None` for a joiner's first view, which it takes over by state transfer.
    ViewInstalled {
        /// The new view.
        view: View,
        /// The trim of the previous view.
        trim: Option<Trim>,
    },
    /// The member stopped.
    Stopped(StopReason),
}

/// Where this member's own request to leave stands ([`Gms::leave_status`],
/// [`Group::leave_status`](crate::group::Group::leave_status); `docs/MEMBERSHIP.md`,
/// sixty-ninth part). The leader proposes a leave only while the members left would still be a
/// majority of the view and every shard of the leaver would keep a member holding its state; the
/// leaver reads the same table the leader does, so it can say which of those holds its leave
/// back. The enum may grow: it is `#[non_exhaustive]`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaveStatus {
    /// Asked in the current view `view`, and nothing holds it back as far as this member's
    /// table shows: the leader proposes it (the change may already be under way).
    #[non_exhaustive]
    Asked {
        /// The current view.
        view: u64,
    },
    /// Held back in the current view `view`: no other member of the leaver's shard `shard`
    /// that stays holds the state (the leave would lose the shard). It goes through once one
    /// of `waiting_for` publishes that it holds the state (its transfer completed), or once a
    /// member joins the shard and takes it. `waiting_for` lists the shard's other members that
    /// stay and do not hold it yet (joiners or promoted spares mid-transfer); empty when this
    /// member is the shard's only one.
    #[non_exhaustive]
    HeldForState {
        /// The current view.
        view: u64,
        /// The shard the leave would lose.
        shard: ShardId,
        /// The shard's other members that stay and do not hold its state yet.
        waiting_for: Vec<NodeId>,
    },
    /// Held back in the current view `view`: the members left after the leave (and after the
    /// failures this member suspects) would not be a majority of the view. It goes through once
    /// the view has enough members for that.
    #[non_exhaustive]
    HeldForMajority {
        /// The current view.
        view: u64,
    },
    /// A total restart is under way and the request, logged before the group shut down
    /// ([`Record::LeaveAsked`] in view `asked_in`), is not decided yet: the member asks again
    /// once the restart view is installed.
    #[non_exhaustive]
    Resumes {
        /// The view the request was logged in.
        asked_in: u64,
    },
    /// The leave went through: `view` is the first view without this member, which stopped
    /// ([`StopReason::Left`]).
    #[non_exhaustive]
    Left {
        /// The first view without this member.
        view: u64,
    },
}

impl std::fmt::Display for LeaveStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaveStatus::Asked { view } => {
                write!(f, "leave asked in view {view}; the leader proposes it")
            }
            LeaveStatus::HeldForState {
                view,
                shard,
                waiting_for,
            } if waiting_for.is_empty() => write!(
                f,
                "leave held back in view {view}: this member is the only one of {shard}, which would be lost; it leaves once a joiner placed there holds the state"
            ),
            LeaveStatus::HeldForState {
                view,
                shard,
                waiting_for,
            } => write!(
                f,
                "leave held back in view {view}: no other member of {shard} holds its state yet; it leaves once one of {waiting_for:?} holds it"
            ),
            LeaveStatus::HeldForMajority { view } => write!(
                f,
                "leave held back in view {view}: the members left would not be a majority of the view"
            ),
            LeaveStatus::Resumes { asked_in } => write!(
                f,
                "leave asked in view {asked_in}, before a total restart: asked again once the restart view is installed"
            ),
            LeaveStatus::Left { view } => {
                write!(f, "left: view {view} was installed without this member")
            }
        }
    }
}

/// The multicast epoch of the current view, as the core sees it.
pub trait Epoch {
    /// Wedges the epoch of `view` (no more sends or deliveries in it) and returns, for each
    /// member of the view in rank order, how many of its messages this member has received
    /// (a gap-free count per sender). Called once per view.
    fn wedge(&mut self, view: &View) -> Vec<u64>;

    /// Whether this member holds its shard's state in `view`: false for a joiner or promoted
    /// spare whose state transfer has not completed. Asked right after
    /// [`wedge`](Epoch::wedge), where the answer is final for the view, and published in the
    /// wedge block; the leader's decision carries every survivor's answer, and the next view
    /// counts a shard as lost when none of its surviving members held its state. Also asked in
    /// every round of the view before that (the answer may go from false to true there, never
    /// back), and published once true in the `gms_holds` word, which the leader reads before
    /// proposing a leave (`docs/MEMBERSHIP.md`, sixty-second part). Default: true (an epoch
    /// without state transfer).
    fn holds_state(&self, view: &View) -> bool {
        let _ = view;
        true
    }

    /// Whether this member has delivered nothing at all yet (no position, in any view). Asked
    /// only of an initial member that started view 0 with an empty log, before it switches
    /// into restart mode at view 0 because a peer restarts there (a crash during the group's
    /// first start; see docs/MEMBERSHIP.md, twenty-first part). Default: false (such a member
    /// switches only if [`delivered_in_log`](Epoch::delivered_in_log) says its driver can
    /// follow; with both defaults, never).
    fn nothing_delivered(&self) -> bool {
        false
    }

    /// Whether everything this member delivered is in its epoch log of the current view, so
    /// that a restart of that view from the log can hand out the rest without handing any of
    /// it out again. Asked only of an initial member that started view 0 with an empty log and
    /// has delivered in it, before it switches into a restart of view 0 by peers that logged
    /// view 0 (s23; docs/MEMBERSHIP.md, forty-first part): its replay then continues after
    /// what it delivered. Default: false (such a member never switches). A `Group` answers
    /// true with durable epochs.
    ///
    /// ```
    /// use squall_membership::Epoch;
    /// use squall_membership::view::View;
    ///
    /// /// An epoch that keeps no log.
    /// struct Atomic;
    ///
    /// impl Epoch for Atomic {
    ///     fn wedge(&mut self, view: &View) -> Vec<u64> {
    ///         vec![0; view.members.len()]
    ///     }
    /// }
    ///
    /// assert!(!Atomic.delivered_in_log());
    /// ```
    fn delivered_in_log(&self) -> bool {
        false
    }
}

/// The GMS table's fields.
#[derive(Clone, Copy, Debug)]
struct Fields {
    view: Vector,
    wedge: Vector,
    prop: Vector,
    dec: Vector,
    join: squall_sst::Counter,
    leave: squall_sst::Counter,
    /// Per universe node: the incarnation of it this member readmitted (0: none). An outsider
    /// that installs a view naming a node it holds pending reads here whether that view's
    /// node is the new incarnation (see [`Gms::follow_as_outsider`]). A member's own slot holds
    /// the newest incarnation of itself that it reads a peer readmitted (s25): a peer that
    /// readmitted that incarnation reads the row's other words as that incarnation's only once
    /// the slot shows it (see [`Gms::unheard`]).
    admitted: Vector,
    /// Per universe node: the first view this member installed without it after a decision
    /// *failed* it (0: none since, or never a member as far as this member knows, or it left
    /// gracefully, or a later view named it again). An idle outsider with an empty log reads
    /// here that it was a member the group went on without (see [`Gms::failed_by`]).
    gone: Vector,
    /// Per universe node: every incarnation of it below this value is one this member no
    /// longer counts (0: none). Published by every member in every round from its table's
    /// state whatever made it suspect the node (a suspicion learned from a cut link or kept
    /// local is never in the gossiped flags): the incarnation it counts live, one more than
    /// the one it suspects, or the suspected node's pending newer incarnation (every earlier
    /// one is dead). Never lowered. A member in restart mode readmits a node's new incarnation
    /// only once every member it counts shows it here (race (c), see
    /// [`Gms::readmissible_in_restart`]).
    noticed: Vector,
    /// Per universe node: the incarnation of it this member's table counts live (its link is
    /// up and the row unsuspected), 0 while it counts none (absent, suspected, or not a peer).
    /// Published by every member when it changes, in one write with [`noticed`](Self::noticed)
    /// (the next field). A member that never linked a node reads here which incarnation the
    /// members that linked it count, so that its suspicion can name that incarnation and be
    /// adopted by them (a one-way absence, see [`Gms::settle_absent`]). A 0 read here (none, or
    /// incarnation 0, a link up from the start) names incarnation 0, whose flag every member
    /// that counts that incarnation adopts.
    linked: Vector,
    /// This node's settings digest ([`SettingsDigest`]), written once at start.
    settings: Vector,
    /// `v + 1` once this member holds its shard's state in view `v` (its
    /// [`Epoch::holds_state`]; 0: in no view yet). Written in the member's rounds of its
    /// current view while some member of the view asks to leave, whenever the word changes, so
    /// at most once a view and never in a view without a leave request. A live column: the
    /// leader reads it when it decides whether to propose a leave
    /// ([`Gms::leave_loses_a_shard`]), long before the wedge blocks that carry the final
    /// answer exist. A member's answer only goes from false to true within a view, so a set
    /// word stays true until the view ends; a stale one only holds a leave back longer.
    holds: squall_sst::Counter,
}

/// A proposal or decision as read from a row.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Tagged {
    rank: u64,
    changes: Vec<Change>,
    trim: Vec<u64>,
    /// A decision's holders (by rank in its view), when known.
    holders: Option<Vec<bool>>,
}

/// The record logging decision `d` with its `holders` (by rank in the ending view; a block's
/// bitmap, one bit per universe node, is cut to one per trim count).
fn decided_record(d: &Decision, holders: Option<&[bool]>) -> Record {
    let n = d.trim.counts.len();
    Record::Decided {
        decision: d.clone(),
        holders: holders.map(|h| (0..n).map(|i| h.get(i).copied().unwrap_or(false)).collect()),
    }
}

/// The members of `view` whose bit (by rank) is set in `bits`.
fn holder_ids(view: &View, bits: &[bool]) -> Vec<NodeId> {
    (view.members.iter().zip(bits))
        .filter(|(_, h)| **h)
        .map(|(&m, _)| m)
        .collect()
}

/// The membership core of one node.
pub struct Gms<T: Transport, L: Durable> {
    sst: Sst<T>,
    cfg: GmsConfig,
    layout: Layout,
    /// The layout's shape (to decode the view blocks outsiders follow).
    shape: Vec<Vec<ShardBounds>>,
    f: Fields,
    log: L,
    me: NodeId,
    view: Option<View>,
    /// Received counts (rank order) once wedged in the current view.
    wedged: Option<Vec<u64>>,
    /// The proposal in this node's row for the current view.
    proposal: Option<(u64, Vec<Change>)>,
    /// The decision this node logged for the current view.
    decision: Option<Decision>,
    /// Its holders (by rank in the current view; `None`: not known, see
    /// [`HOLDERS_KNOWN`](crate::block::HOLDERS_KNOWN)).
    decided_holders: Option<Vec<bool>>,
    stopped: Option<StopReason>,
    held_back: bool,
    /// A leave held back (the leaver is its shard's last holder) was logged in this view.
    leave_held_back: bool,
    /// This member's own request to leave in this life: the view it was logged in
    /// ([`Record::LeaveAsked`]; or, resumed after a restart, the view it was logged in before).
    leave_asked: Option<u64>,
    /// Restart mode: a request to leave logged before the shutdown and not decided (its view):
    /// asked again once the restart view is installed ([`Recovered::leave_pending`]).
    leave_resumes: Option<u64>,
    /// The status of this member's own leave last logged (a change is logged once).
    leave_reported: Option<LeaveStatus>,
    /// Restart mode (see [`crate::restart`]): the highest ballot promised for the current view
    /// and this node's own ballot when it leads the restart.
    restart: Option<RestartState>,
    /// Its log was two or more views behind a restarted group: it asked to join again
    /// (`(its last logged view, the newer view seen)`).
    rejoined: Option<(u64, u64)>,
    /// Restarting, whether this member holds its shard's state (false: its transfer never
    /// completed before the shutdown; it is published with the restarting word, see
    /// [`STATELESS`]).
    holds_state: bool,
    /// Per universe row: the new incarnation of a member that a view this member installed
    /// names (the deciding member had readmitted it) while this member still suspects the row
    /// (its link to that incarnation had not come up, or came up after a proposal named the
    /// node). The member is *not yet connected*, not failed: [`suspects`](Gms::suspects) does
    /// not count it, and the row is readmitted when exactly that incarnation links (see
    /// [`settle_expected`](Gms::settle_expected)).
    expected: Vec<Option<u64>>,
    /// Per universe row: the incarnation of its node this member readmitted whose own row
    /// words have not landed here yet (the row still holds the old incarnation's frozen
    /// words). Cleared once the row's own `admitted` slot shows that incarnation (see
    /// [`unheard`](Gms::unheard)).
    unheard: Vec<Option<u64>>,
    /// Per universe row: when this member began waiting for the row's
    /// [`expected`](Gms::expected) incarnation (the wait is bounded by
    /// [`GmsConfig::expected_link_wait`]).
    expected_since: Vec<Option<squall_transport::Time>>,
    /// Per universe row: the incarnation whose join this member, leading, holds back for a
    /// member's readmission ([`readmission_pending`](Gms::readmission_pending)), since when,
    /// and whether the bound ran out (logged once; see
    /// [`readmission_held`](Gms::readmission_held)).
    readmission_since: Vec<Option<(u64, squall_transport::Time, bool)>>,
    /// Per universe row: since when a member of the installed view has had no link here
    /// (absent: it never connected), the wait bounded like an expected incarnation's (see
    /// [`settle_absent`](Gms::settle_absent)).
    absent_since: Vec<Option<squall_transport::Time>>,
    /// With [`decision`](Gms::decision) (a follower's): the rows of the next view's members
    /// this member suspects and the incarnation of each that the leader had readmitted (its
    /// `admitted` word when the decision was adopted).
    decided_expect: Vec<(usize, u64)>,
    /// An idle outsider (it never asked to join): the newest view naming it that a peer
    /// restarts (its log held no view, e.g. it had not logged the view that admitted it). Once
    /// a peer runs a later view without it, it asks to join (see
    /// [`follow_as_outsider`](Gms::follow_as_outsider)).
    restart_named: Option<u64>,
    /// An initial member whose log held no view at construction: it started view 0 as if for
    /// the group's first time. If a peer restarts view 0 from its log (the group crashed
    /// during its first start), it joins that restart instead (see
    /// [`first_start_restart`](Gms::first_start_restart)).
    first_start: bool,
    /// This node's settings digest, published at start ([`Gms::publish_settings`]).
    digest: SettingsDigest,
    /// The [`Record::Settings`] still to be logged before this life's first view record (a
    /// node that started with no view: it goes in the batch of the first view it installs).
    settings_unlogged: Option<Record>,
    /// Rows whose join this member refused for their settings (logged once each).
    settings_refused: Vec<usize>,
}

/// The bit of a view block's restarting word that says its node restarts *without* its
/// shard's state (its transfer never completed): it does not count as the shard's state holder
/// for the every-shard rule ([`crate::restart::Unrestored`]). View ids stay far below it.
const STATELESS: u64 = 1 << 63;

/// Why a member in restart mode would stay blocked without readmitting a suspected member's
/// pending new incarnation: the clause of the first condition of `Gms::readmissible_in_restart`
/// that holds (see `Gms::readmission_blocked`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Blocked {
    /// Every member of the node's shard is counted failed here (s18).
    ShardGone,
    /// The members of the restart's view counted here, the node aside, are fewer than a
    /// majority (s20).
    Minority,
    /// This member counts the named member, which links the pending incarnation without having
    /// readmitted it, and no restart decision for the view is held or read here (s29).
    Linked(NodeId),
}

/// A member restarting from its log.
#[derive(Clone, Debug, Default)]
struct RestartState {
    promised: u64,
    ballot: Option<u64>,
    /// The members of the view it still waits for (reported once per change).
    missing: Vec<NodeId>,
    /// A shard of the view none of whose members restarted yet (the restart waits).
    unrestored: Option<crate::restart::Unrestored>,
    /// When it first saw a majority of the view restarted, or restarted and coming (the
    /// absent members' wait starts).
    absent_since: Option<squall_transport::Time>,
    /// When it first saw a majority of the view restarted (the outsiders' wait starts; not
    /// with members coming, s28, ninetieth part of `docs/MEMBERSHIP.md`).
    quorum_since: Option<squall_transport::Time>,
    /// Linked members of the view that are not restarting (outsiders: their logs held no
    /// view), counted as not restarted: failed for this restart, but not suspected in the
    /// table, so their links stay up and they can join the restarted group in this process
    /// (see [`suspect_absent`](Gms::suspect_absent)). Taken back once its row shows it
    /// restarting at the view with logged counts ([`take_back_outsiders`](Gms::take_back_outsiders);
    /// s29, ninety-second part of `docs/MEMBERSHIP.md`).
    outsiders: Vec<NodeId>,
    /// The inspector adopted a logged decision whose fitted restart view holds too few of the
    /// view and of the adopted decision's next view: the members of that next view it waits
    /// for, and those of them not here ([`adopted_not_here`](Gms::adopted_not_here)); reported
    /// once per change (see [`adoption_short`](Gms::adoption_short)).
    short_of_adopted: Option<(Vec<NodeId>, Vec<NodeId>)>,
    /// The next view of the decision the inspector would commit, when the members it counts
    /// that this next view keeps are no quorum of the view, so it does not commit (reported
    /// once per change; s29, ninety-sixth part of `docs/MEMBERSHIP.md`).
    no_majority: Option<Vec<NodeId>>,
    /// The decision for the view that its log held when it was built (the highest-ranked, not
    /// void): a peer one view ahead that installed that view with a lower-ranked decision
    /// making another next view is on a dead branch (see [`dead_ahead`](Gms::dead_ahead)).
    logged: Option<Decision>,
    /// Every restart ballot for the view this member followed in this process, and those its
    /// log promised when it was built (an earlier process acknowledged them); each led by
    /// another member. Fix A does not clear while one may still be decided
    /// ([`ballot_may_decide`](Gms::ballot_may_decide)).
    ballots: Vec<u64>,
    /// The followed ballot that last kept this member from catching up from a peer one view
    /// ahead, and its leader (reported once per change; see
    /// [`ballot_may_decide`](Gms::ballot_may_decide)).
    blocked: Option<(u64, NodeId)>,
    /// The view's joiners: the members that the decision installing it (logged, or caught up
    /// from a peer) admitted, none of them a member of the view before. Empty when this
    /// member's log lacks that decision. See [`never_logged`](Gms::never_logged).
    joined: Vec<NodeId>,
    /// The view's joiners this restart has shown [never log it](Gms::never_logged): set
    /// aside for good once shown (s28, eighty-fourth part of `docs/MEMBERSHIP.md`, item 3). A
    /// set-aside joiner never logs the view, so unlike `outsiders` none is ever taken back.
    aside: Vec<NodeId>,
}

impl<T: Transport, L: Durable> std::fmt::Debug for Gms<T, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gms")
            .field("me", &self.me)
            .field("view", &self.view)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

fn schema(cfg: &GmsConfig) -> Result<(squall_sst::Schema, Fields), squall_sst::SchemaError> {
    let u = cfg.universe.len();
    let c = cfg.max_pending_changes;
    let mut b = SchemaBuilder::new(u);
    let f = Fields {
        // seq, the view (at most 4 + 2u words), the restarting word, check.
        view: b.vector("gms_view", 7 + 2 * u),
        wedge: b.vector("gms_wedge", 2 + WedgeBlock::payload_len(u)),
        prop: b.vector("gms_prop", 2 + ProposalBlock::payload_len(c)),
        dec: b.vector("gms_dec", 2 + DecisionBlock::payload_len(u, c)),
        join: b.counter("gms_join"),
        leave: b.counter("gms_leave"),
        admitted: b.vector("gms_admitted", u),
        gone: b.vector("gms_gone", u),
        noticed: b.vector("gms_noticed", u),
        linked: b.vector("gms_linked", u),
        settings: b.vector("gms_settings", SettingsDigest::WORDS),
        holds: b.counter("gms_holds"),
    };
    Ok((b.build()?, f))
}

/// The guards of the GMS row, in the order a whole-row push posts them after every other word
/// ([`Sst::set_row_push_last`]; s27, `docs/MEMBERSHIP.md`, seventy-eighth part). A reader takes
/// each as evidence that other words of the row landed:
///
/// 1. the view and wedge blocks (one write: no reader takes either as evidence of the other)
///    vouch for the proposal and decision blocks (`read_for`, `promise_cleared`,
///    `ballot_may_decide`, `peer_ahead`, the adoption in `lead`), the `join` word
///    (`superseded_by`), the other rows' `admitted` slots (`runners_of`) and the `gone` words
///    (`follow_as_outsider`);
/// 2. the heartbeat vouches for the view and wedge blocks and the `join` word
///    (`outsider_in_restart`);
/// 3. the own `admitted` slot vouches for every other word (`unheard`, fifty-ninth part).
fn guards(f: &Fields, heartbeat: squall_sst::FieldRange, me: usize) -> Vec<squall_sst::FieldRange> {
    let blocks = squall_sst::FieldRange::span(f.view.range(), f.wedge.range());
    ([blocks, heartbeat].into_iter())
        .chain(f.admitted.element(me))
        .collect()
}

impl<T: Transport, L: Durable> Gms<T, L> {
    /// Bytes the GMS region needs for `cfg`.
    ///
    /// ```
    /// use squall_membership::{Gms, GmsConfig, log::MemLog};
    /// use squall_transport::{NodeId, RegionId};
    /// use squall_transport_mem::sim::SimNode;
    /// let cfg = GmsConfig::new(RegionId(0), (0..3).map(NodeId).collect(), (0..3).map(NodeId).collect());
    /// assert!(Gms::<SimNode, MemLog>::table_len(&cfg)? > 0);
    /// # Ok::<(), squall_membership::GmsError>(())
    /// ```
    pub fn table_len(cfg: &GmsConfig) -> Result<usize, GmsError> {
        cfg.validate()?;
        Ok(schema(cfg)?.0.table_len())
    }

    /// The region every universe node registers for the GMS table.
    pub fn layout(cfg: &GmsConfig) -> Result<RegionSpec, GmsError> {
        Ok(RegionSpec::new(cfg.region, Self::table_len(cfg)?))
    }

    /// Sets up the core with the configured layout ([`GmsConfig::shard_layout`]).
    /// `recovered` is what the node's log held (a restart resumes from its last view and
    /// re-publishes the decision it logged for it); `None` or an empty log starts fresh.
    pub fn new(
        transport: T,
        cfg: GmsConfig,
        log: L,
        recovered: Option<&Recovered>,
    ) -> Result<Gms<T, L>, GmsError> {
        Self::holding(transport, cfg, log, recovered, true)
    }

    /// Sets up the core with `layout` (it replaces [`GmsConfig::layout`]).
    pub fn with_layout(
        transport: T,
        cfg: GmsConfig,
        log: L,
        recovered: Option<&Recovered>,
        layout: Layout,
    ) -> Result<Gms<T, L>, GmsError> {
        Self::build(transport, cfg, log, recovered, layout, false, true)
    }

    /// [`Gms::new`]; `holds_state: false` for a member restarting from `recovered` *without*
    /// its shard's state (a joiner whose transfer never completed before the shutdown): its
    /// restart row says so from the first write, and the restart of its last view waits until
    /// every shard has a restarted member that does hold the state ([`Gms::restart_blocked`]).
    pub(crate) fn holding(
        transport: T,
        cfg: GmsConfig,
        log: L,
        recovered: Option<&Recovered>,
        holds_state: bool,
    ) -> Result<Gms<T, L>, GmsError> {
        let layout = cfg.shard_layout();
        Self::build(transport, cfg, log, recovered, layout, false, holds_state)
    }

    /// Sets up the core of a node that starts *outside* the group whatever `cfg.initial` says:
    /// a process restarted under the id of a member that crashed (a new incarnation, with a
    /// fresh log). It installs no view 0; like any joiner it follows the views that name it
    /// once the members readmitted its row (see [`request_join`](Gms::request_join)).
    pub fn rejoining(transport: T, cfg: GmsConfig, log: L) -> Result<Gms<T, L>, GmsError> {
        let layout = cfg.shard_layout();
        Self::build(transport, cfg, log, None, layout, true, true)
    }

    fn build(
        transport: T,
        mut cfg: GmsConfig,
        mut log: L,
        recovered: Option<&Recovered>,
        layout: Layout,
        outsider: bool,
        holds_state: bool,
    ) -> Result<Gms<T, L>, GmsError> {
        cfg.layout = Some(layout.clone());
        cfg.validate()?;
        if let Some(rec) = recovered {
            crate::restart::check_eligible(rec, &layout)?;
        }
        let digest = SettingsDigest::of(&cfg, &layout);
        let logged_digest = recovered.and_then(Recovered::settings);
        let check = match recovered {
            Some(rec) => crate::restart::check_settings(rec, &digest, cfg.settings_from)?,
            None => SettingsCheck::Unchecked,
        };
        let me = transport.local_id();
        match (check, recovered.and_then(Recovered::last_view)) {
            (SettingsCheck::Unchecked, Some((view, _))) => {
                tracing::warn!(me = %me, view,
                    "membership: the log holds no settings digest (written before s24); restarting without checking that the configuration is the one it was written under");
                if let Some(named) = cfg.settings_from {
                    tracing::warn!(me = %me, view, named = format_args!("{named:016x}"),
                        "membership: settings_from is set, but the log holds no digest to compare it with: not used");
                }
            }
            (SettingsCheck::Accepted { logged }, _) => {
                tracing::warn!(me = %me, from = %logged, to = %digest,
                    "membership: restarting under changed driver (epoch) settings, as settings_from accepts; the new digest is logged with the restart view, and every restarting member must run the new settings");
            }
            (SettingsCheck::Same, _) if cfg.settings_from.is_some() => {
                tracing::info!(me = %me, digest = %digest,
                    "membership: settings_from is set, but the log already holds the configured settings' digest: nothing to change");
            }
            _ if cfg.settings_from.is_some() => {
                tracing::info!(me = %me, "membership: settings_from is set, but no logged view is restarted: ignored");
            }
            _ => {}
        }
        let accepted = matches!(check, SettingsCheck::Accepted { .. });
        // The digest the records of this life are written under, once per life, before its
        // first view record (nothing when the log's latest digest is this one).
        let settings_record =
            (logged_digest != Some(digest)).then_some(Record::Settings { digest });
        let shape = layout.shape();
        if !cfg.partition_safety {
            tracing::warn!(
                "membership: partition safety is OFF; a member that loses its majority waits, wedged, instead of stopping (it still never installs a view without a majority)"
            );
        }
        let (schema, f) = schema(&cfg)?;
        let mut sc = SstConfig::new(cfg.region, cfg.universe.clone());
        sc.heartbeat_interval = cfg.heartbeat_interval;
        sc.suspicion_timeout = cfg.suspicion_timeout;
        // The majority rule is applied per view by the core, not over the whole universe.
        sc.partition_safety = false;
        let mut sst = Sst::new(transport, schema, sc)?;
        let last = guards(&f, sst.schema().heartbeat().range(), sst.my_row());
        sst.set_row_push_last(&last);
        let mut view = None;
        let mut decision = None;
        let mut ended = None;
        let mut restart = None;
        let mut first_start = false;
        match recovered.and_then(|r| crate::restart::restart_view(r, &layout)) {
            Some(v) => {
                // The logged shards: the layout of a later view depends on the earlier ones'.
                let id = v.id;
                let logged = |v| {
                    let (d, h) = recovered?.decision_with_holders_for(v)?;
                    Some((d.clone(), h.map(<[bool]>::to_vec)))
                };
                // A last view that lost a shard ran nowhere: the view before it is restarted
                // (`crate::restart::restart_view`), and a decision that installs a view losing
                // a shard is void (`crate::restart::void`): it re-publishes the decision that
                // installed `id` instead, as if it had decided nothing in `id`.
                if recovered
                    .and_then(Recovered::last_view)
                    .is_some_and(|(last, _)| last > id)
                {
                    tracing::warn!(me = %me, lost = id + 1, view = id,
                        "membership: the log's last view lost a shard and ran nowhere; restarting the view before it, whose members hold that shard's state in their logs");
                }
                decision = logged(id);
                // A void decision's ballot still counts as promised: the restart's ballot must
                // rank above it, so that the restart's decision is the one every later lookup
                // of `id`'s decision (the highest-ranked) finds.
                let mut void_ballot = 0;
                if let Some((d, h)) = &decision
                    && crate::restart::void(&v, d, h.as_deref(), &layout)
                {
                    if crate::restart::attempt_of(d.rank) > 0 {
                        void_ballot = d.rank;
                    }
                    decision = None;
                }
                // The restart ballots for `id` that its log promised, led by another member: an
                // earlier process of this member acknowledged them, and their leaders may still
                // decide them with that acknowledgement, so they bind this process as a ballot it
                // follows does (s27 follow-up, seventy-second part of `docs/MEMBERSHIP.md`; see
                // `Gms::ballot_may_decide`). A ballot it led itself was decided in the process
                // that led it or never.
                let mine = v.rank_of(me).map(|k| k as u64);
                // Since the log last installed `id`: a promise in an earlier run of that
                // number binds nothing (`Recovered::since_installed`).
                let mut ballots: Vec<u64> = (recovered.iter())
                    .flat_map(|r| r.since_installed(id))
                    .filter_map(|r| match *r {
                        Record::Promised { view, rank }
                            if view == id
                                && crate::restart::attempt_of(rank) > 0
                                && Some(crate::restart::rank_of(rank)) != mine =>
                        {
                            Some(rank)
                        }
                        _ => None,
                    })
                    .collect();
                ballots.sort_unstable();
                ballots.dedup();
                if id > 0 {
                    ended = logged(id - 1);
                }
                let joined = (ended.iter())
                    .flat_map(|(d, _)| joiners(&d.changes, &v))
                    .collect();
                view = Some(v);
                let promised = recovered.map_or(0, |r| r.promised_for(id));
                restart = Some(RestartState {
                    promised: promised.max(void_ballot),
                    logged: decision.as_ref().map(|(d, _)| d.clone()),
                    ballots,
                    joined,
                    ..RestartState::default()
                });
                tracing::info!(me = %me, view = id, "membership: restarting from the log");
            }
            None if cfg.initial.contains(&me) && !outsider => {
                let v = View::new(0, cfg.initial.clone(), &layout);
                let records = settings_record.iter().cloned();
                log.append_all(
                    &records
                        .chain(crate::restart::installed_records(&v))
                        .collect::<Vec<_>>(),
                )?;
                view = Some(v);
                first_start = true;
            }
            None => {}
        }
        // A restart logs it now; a node with no view yet (a joiner, a rejoining incarnation)
        // with its first view's records, so that its log stays empty until then. A change the
        // restart accepts (`settings_from`) is logged with the restart view's records: until
        // that view is installed under the new settings, the log's digest stays the one its
        // views ran under, so a restart attempt that fails (e.g. a member still configured the
        // old way, `StopReason::SettingsDiffer`) leaves every log as it was.
        let settings_unlogged = match settings_record {
            Some(r) if !first_start && view.is_some() && !accepted => {
                log.append(&r)?;
                None
            }
            r if !first_start => r,
            _ => None,
        };
        // A leave the application asked for before the shutdown and no view installed yet
        // (sixty-ninth part): asked again once the restart view is installed.
        let leave_resumes = recovered
            .filter(|_| restart.is_some())
            .and_then(|r| r.leave_pending(me));
        if let Some(asked_in) = leave_resumes {
            tracing::info!(me = %me, asked_in, "membership: the log holds a leave asked before the shutdown and not decided; it is asked again once the restart view is installed");
        }
        let mut g = Gms {
            digest,
            settings_unlogged,
            settings_refused: Vec::new(),
            sst,
            cfg,
            layout,
            shape,
            f,
            log,
            me,
            view,
            wedged: None,
            proposal: None,
            decision: None,
            decided_holders: None,
            stopped: None,
            held_back: false,
            leave_held_back: false,
            leave_asked: None,
            leave_resumes,
            leave_reported: None,
            expected: Vec::new(),
            unheard: Vec::new(),
            expected_since: Vec::new(),
            readmission_since: Vec::new(),
            absent_since: Vec::new(),
            decided_expect: Vec::new(),
            restart_named: None,
            first_start,
            restart,
            rejoined: None,
            holds_state,
        };
        g.publish_settings()?;
        if let Some(r) = recovered {
            g.note_gone_logged(r)?;
        }
        if g.view.is_some() {
            g.publish_view()?;
        }
        if let (Some(v), Some(r)) = (g.view.clone(), g.restart.clone())
            && r.promised > 0
        {
            // Peers' inspectors must see the promise to pick a higher ballot.
            g.publish_proposal(v.id, r.promised, &[])?;
        }
        if let Some((d, holders)) = decision {
            // A restarted member re-publishes what it logged (with the holders logged with it),
            // so a new leader can adopt it. A restart's own leader ignores those holders: its
            // every-shard rule decides who holds state (see `crate::restart`).
            g.publish_decision(&d, holders.as_deref())?;
            g.decision = Some(d);
        } else if let Some((d, holders)) = ended {
            // Nothing decided in its last view yet: it publishes the decision that installed
            // it, with the holders it installed it with, so a peer whose log stops one view
            // earlier catches up to the same view.
            g.publish_decision(&d, holders.as_deref())?;
        }
        Ok(g)
    }

    /// This node.
    pub fn id(&self) -> NodeId {
        self.me
    }

    /// The installed view, if this node is a member.
    pub fn view(&self) -> Option<&View> {
        self.view.as_ref()
    }

    /// Why it stopped, if it did.
    pub fn stopped(&self) -> Option<&StopReason> {
        self.stopped.as_ref()
    }

    /// Whether this member started view 0 afresh (its log held no view) and has not yet shown
    /// it took part in view 0 (see [`first_start_restart`](Gms::first_start_restart)).
    pub(crate) fn first_start(&self) -> bool {
        self.first_start
    }

    /// Whether `node` is seen running view 0: its row is unsuspected and its view block names
    /// view 0 with the restarting word clear (not restarting it from a log, not past it).
    pub(crate) fn runs_view_0(&self, node: NodeId) -> bool {
        let Some(row) = self.sst.row_of(node) else {
            return false;
        };
        !self.sst.is_suspected(row)
            && self
                .read_block(row, self.f.view)
                .is_some_and(|p| p.first() == Some(&1) && !self.restarting_in(&p))
    }

    /// Whether an unsuspected member of view 0 other than this one is seen wedged in view 0
    /// (its wedge block names view 0): an ordinary change of view 0 is under way, or the
    /// member restarts view 0. A held first-start epoch is not released then (s22,
    /// docs/MEMBERSHIP.md, thirty-fourth part): this member would wedge at once, and a held
    /// member may still switch into a restart of view 0.
    pub(crate) fn wedge_seen_in_view_0(&self) -> bool {
        let Some(view) = self.view.as_ref().filter(|v| v.id == 0) else {
            return false;
        };
        (view.members.iter())
            .filter(|&&m| m != self.me)
            .filter_map(|&m| self.sst.row_of(m))
            .any(|r| !self.sst.is_suspected(r) && self.wedge_of(r, 0).is_some())
    }

    /// Whether the member is restarting from its log (no view installed since), and if so the
    /// members of its last view it still waits for (not restarted, or not seen yet).
    pub fn restarting(&self) -> Option<&[NodeId]> {
        self.restart.as_ref().map(|r| r.missing.as_slice())
    }

    /// Restarting: the members of the last view this member counts out as outsiders, linked
    /// but not restarting the view from a log that holds it (a restart fails them unless they
    /// are taken back: their rows show them restarting the view with logged counts; s29,
    /// ninety-second part of `docs/MEMBERSHIP.md`). Empty outside restart mode. Each
    /// restarting member keeps its own, on its own clock.
    ///
    /// ```
    /// use squall_membership::{Gms, GmsConfig, log::MemLog};
    /// use squall_transport::{NodeId, RegionId};
    /// use squall_transport_mem::sim::{Sim, SimConfig, SimNode};
    ///
    /// let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
    /// let cfg = GmsConfig::new(RegionId(0), ids.clone(), ids);
    /// let layout = [Gms::<SimNode, MemLog>::layout(&cfg)?];
    /// let (_sim, nodes) = Sim::cluster(SimConfig::seeded(1), 3, &layout).unwrap();
    /// let mut nodes = nodes.into_iter();
    /// let gms = Gms::new(nodes.next().unwrap(), cfg, MemLog::default(), None)?;
    /// // A first start, not a restart: nobody is counted out.
    /// assert!(gms.counted_out().is_empty());
    /// # Ok::<(), squall_membership::GmsError>(())
    /// ```
    pub fn counted_out(&self) -> &[NodeId] {
        self.restart
            .as_ref()
            .map_or(&[], |r| r.outsiders.as_slice())
    }

    /// Restarting: why the restart waits although a majority of the last view restarted (a
    /// shard none of whose members restarted; see [`crate::restart::Unrestored`]).
    pub fn restart_blocked(&self) -> Option<&crate::restart::Unrestored> {
        self.restart.as_ref().and_then(|r| r.unrestored.as_ref())
    }

    /// Set when this member restarted from a log two or more views behind a peer's (the group
    /// went on without it): `(its last logged view, the newer view it saw)`; also when it came
    /// back with an empty log as an idle outsider, saw peers restart a view naming it and then
    /// run a later one without it: `(that view, the later one)`. It then left
    /// restart mode and asked to join as a new member (it is an outsider until a view names
    /// it; its state comes by state transfer).
    pub fn rejoined(&self) -> Option<(u64, u64)> {
        self.rejoined
    }

    /// The decision this member logged for its current view, if any.
    pub fn decision(&self) -> Option<&Decision> {
        self.decision.as_ref()
    }

    /// Whether it wedged its current view.
    pub fn is_wedged(&self) -> bool {
        self.wedged.is_some()
    }

    /// The proposal this member published for its current view: its rank and its changes (its
    /// own as the leader, or the leader's it copied, which is its acknowledgement). `None`
    /// before any, and again once a view is installed.
    ///
    /// ```
    /// use squall_membership::{Epoch, Gms, GmsConfig, change::ChangeKind, log::MemLog, view::View};
    /// use squall_transport::{NodeId, RegionId};
    /// use squall_transport_mem::sim::{Sim, SimConfig, SimNode};
    /// use std::time::Duration;
    ///
    /// struct Idle;
    /// impl Epoch for Idle {
    ///     fn wedge(&mut self, view: &View) -> Vec<u64> { vec![0; view.members.len()] }
    /// }
    /// let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
    /// let mut cfg = GmsConfig::new(RegionId(0), ids.clone(), ids);
    /// cfg.heartbeat_interval = Duration::from_micros(50);
    /// cfg.suspicion_timeout = Duration::from_micros(1500);
    /// let layout = [Gms::<SimNode, MemLog>::layout(&cfg)?];
    /// let (sim, nodes) = Sim::cluster(SimConfig::seeded(1), 3, &layout).unwrap();
    /// let mut gms: Vec<_> = nodes
    ///     .into_iter()
    ///     .map(|t| Gms::new(t, cfg.clone(), MemLog::default(), None))
    ///     .collect::<Result<_, _>>()?;
    /// assert!(gms[1].proposal().is_none());
    /// sim.crash(NodeId(2));
    /// let mut events = Vec::new();
    /// for _ in 0..100_000 {
    ///     if gms[1].proposal().is_some() {
    ///         break;
    ///     }
    ///     for g in &mut gms[..2] {
    ///         g.poll(&mut Idle, &mut events)?;
    ///     }
    ///     sim.advance(Duration::from_micros(2));
    /// }
    /// // Node 1 acknowledged the leader's (node 0's, rank 0) proposal to fail node 2.
    /// let (rank, changes) = gms[1].proposal().unwrap();
    /// assert_eq!(rank, 0);
    /// assert!(changes.iter().any(|c| c.node == NodeId(2) && c.kind == ChangeKind::Fail));
    /// # Ok::<(), squall_membership::GmsError>(())
    /// ```
    pub fn proposal(&self) -> Option<(u64, &[Change])> {
        self.proposal.as_ref().map(|(r, ch)| (*r, ch.as_slice()))
    }

    /// The durable log.
    pub fn log(&self) -> &L {
        &self.log
    }

    /// The durable log, to append records the core does not write itself (the group's
    /// [`Record::Snapshot`]: a transferred state made durable). Appending never changes what
    /// the core does; it reads its log only when it is built.
    pub fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }

    /// The GMS table (for inspection).
    pub fn sst(&self) -> &Sst<T> {
        &self.sst
    }

    /// The member this node considers the leader of its view: the lowest-ranked one it does not
    /// suspect.
    pub fn leader(&self) -> Option<NodeId> {
        let v = self.view.as_ref()?;
        v.members.iter().copied().find(|&m| !self.suspects(m))
    }

    /// Parks until the transport reports something or `timeout` passes (never past the table's
    /// next heartbeat). Drivers call this when [`poll`](Gms::poll) found nothing to do.
    pub fn wait(&mut self, timeout: std::time::Duration) {
        self.sst.wait(timeout);
    }

    /// Asks to join (a universe node that is not a member): the leader proposes it once it sees
    /// the request.
    pub fn request_join(&mut self) -> Result<(), GmsError> {
        self.sst.set(self.f.join, 1);
        self.sst.push(self.f.join.range())?;
        Ok(())
    }

    /// Asks to leave gracefully: the leader proposes the removal; nobody counts it as a
    /// failure. The member keeps taking part until the view without it is installed, then
    /// reports [`StopReason::Left`].
    ///
    /// The request is logged first ([`Record::LeaveAsked`], once per life), so that a total
    /// restart before the leave is decided asks again once the restart view is installed
    /// (`docs/MEMBERSHIP.md`, sixty-ninth part). [`leave_status`](Gms::leave_status) says where
    /// it stands. A restart that finds the group went on without this member (its leave
    /// decided, or the group past it) stops it with [`StopReason::Left`], not joining again.
    ///
    /// # Errors
    ///
    /// [`GmsError::NotAMember`] outside a view; [`GmsError::Log`] if appending the
    /// [`Record::LeaveAsked`] fails (nothing is published then: the request is not asked; call
    /// again); a table error if publishing the word fails.
    pub fn leave(&mut self) -> Result<(), GmsError> {
        let Some(view) = self.view.as_ref().map(|v| v.id) else {
            return Err(GmsError::NotAMember);
        };
        if self.leave_asked.is_none() {
            // A request resumed from the log (restart mode) is logged already.
            if self.leave_resumes.is_none() {
                self.log.append(&Record::LeaveAsked { view })?;
            }
            self.leave_asked = Some(self.leave_resumes.take().unwrap_or(view));
        }
        self.publish_leave()
    }

    /// Publishes this member's request to leave (its `gms_leave` word, its `gms_join` word
    /// cleared).
    fn publish_leave(&mut self) -> Result<(), GmsError> {
        self.sst.set(self.f.join, 0);
        self.sst.set(self.f.leave, 1);
        self.sst.push(self.f.join.range())?;
        self.sst.push(self.f.leave.range())?;
        Ok(())
    }

    /// Restart mode ended with this member running `view` (the restart view installed, or
    /// caught up from a peer running it): a leave its log held pending from before the
    /// shutdown ([`Recovered::leave_pending`]) is asked again now (sixty-ninth part). Its
    /// record stays in the log until a view without this member is installed, so another total
    /// restart before then asks again too.
    fn resume_leave(&mut self, view: u64) -> Result<(), GmsError> {
        let Some(asked_in) = self.leave_resumes.take() else {
            return Ok(());
        };
        tracing::info!(me = %self.me, view, asked_in, "membership: asking again to leave, as this member's application did before the total restart");
        self.leave_asked = Some(asked_in);
        self.publish_leave()
    }

    /// Where this member's own request to leave stands (`docs/MEMBERSHIP.md`, sixty-ninth
    /// part): `None` if it has not asked in this life (nor has its log a request pending from
    /// before a total restart), or if it stopped for another reason than its leave
    /// ([`stopped`](Gms::stopped) says why). While it waits, the status is computed from this
    /// member's table as the leader computes whether to propose the leave: held back because
    /// the members left would not be a majority, or because no other member of its shard that
    /// stays holds the state (their `gms_holds` words). This member's table may be a few rounds
    /// behind the leader's, so a status may lag. A change of status is logged once (`warn` when
    /// held back, `info` otherwise).
    ///
    /// ```
    /// use squall_membership::{Epoch, Gms, GmsConfig, LeaveStatus, log::MemLog, view::View};
    /// use squall_transport::{NodeId, RegionId};
    /// use squall_transport_mem::sim::{Sim, SimConfig, SimNode};
    /// use std::time::Duration;
    ///
    /// struct Idle;
    /// impl Epoch for Idle {
    ///     fn wedge(&mut self, view: &View) -> Vec<u64> { vec![0; view.members.len()] }
    /// }
    /// let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
    /// let mut cfg = GmsConfig::new(RegionId(0), ids.clone(), ids);
    /// cfg.heartbeat_interval = Duration::from_micros(50);
    /// cfg.suspicion_timeout = Duration::from_micros(1500);
    /// let layout = [Gms::<SimNode, MemLog>::layout(&cfg)?];
    /// let (sim, nodes) = Sim::cluster(SimConfig::seeded(1), 3, &layout).unwrap();
    /// let mut gms: Vec<_> = nodes
    ///     .into_iter()
    ///     .map(|t| Gms::new(t, cfg.clone(), MemLog::default(), None))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(gms[2].leave_status(), None);
    /// gms[2].leave()?;
    /// assert!(gms[2].leave_status().is_some());
    /// let mut events = Vec::new();
    /// for _ in 0..100_000 {
    ///     if gms[2].stopped().is_some() {
    ///         break;
    ///     }
    ///     for g in &mut gms {
    ///         let _ = g.poll(&mut Idle, &mut events);
    ///     }
    ///     sim.advance(Duration::from_micros(2));
    /// }
    /// assert!(matches!(gms[2].leave_status(), Some(LeaveStatus::Left { view: 1, .. })));
    /// # Ok::<(), squall_membership::GmsError>(())
    /// ```
    pub fn leave_status(&self) -> Option<LeaveStatus> {
        match &self.stopped {
            Some(StopReason::Left { view }) => return Some(LeaveStatus::Left { view: *view }),
            Some(_) => return None,
            None => {}
        }
        if let Some(asked_in) = self.leave_resumes {
            return Some(LeaveStatus::Resumes { asked_in });
        }
        let view = self.view.as_ref()?;
        if self.sst.get(self.sst.my_row(), self.f.leave) == 0 {
            return None;
        }
        let ch: Vec<Change> = (view.members.iter())
            .filter(|&&m| m != self.me && self.suspects(m))
            .map(|&node| Change {
                kind: ChangeKind::Fail,
                node,
            })
            .collect();
        let me = self.me;
        let survives = |n: NodeId| n != me && !ch.iter().any(|c| c.node == n);
        if !self.cfg.is_quorum(&view.members, &survives) {
            return Some(LeaveStatus::HeldForMajority { view: view.id });
        }
        Some(match self.leave_hold(view, &ch, me) {
            Some((shard, waiting_for)) => LeaveStatus::HeldForState {
                view: view.id,
                shard,
                waiting_for,
            },
            None => LeaveStatus::Asked { view: view.id },
        })
    }

    /// Logs a change of this member's own [`leave_status`](Gms::leave_status) (once per
    /// change), so that an operator reading the leaver's log sees why its leave waits.
    fn report_leave(&mut self) {
        if self.leave_asked.is_none() && self.leave_resumes.is_none() {
            return;
        }
        let status = self.leave_status();
        if status == self.leave_reported {
            return;
        }
        match &status {
            Some(s @ (LeaveStatus::HeldForState { .. } | LeaveStatus::HeldForMajority { .. })) => {
                tracing::warn!(me = %self.me, status = %s, "membership: this member's leave is held back");
            }
            Some(s) => {
                tracing::info!(me = %self.me, status = %s, "membership: this member's leave")
            }
            None => {}
        }
        self.leave_reported = status;
    }

    /// Whether this member counts `n` failed: its row is suspected, unless an installed view
    /// names a new incarnation of it whose link this member waits for (see
    /// [`expected_incarnation`](Gms::expected_incarnation)).
    fn suspects(&self, n: NodeId) -> bool {
        let restart_outsider = (self.restart.as_ref()).is_some_and(|r| r.outsiders.contains(&n));
        restart_outsider
            || self
                .sst
                .row_of(n)
                .is_some_and(|r| self.sst.is_suspected(r) && self.expected_at(r).is_none())
    }

    fn expected_at(&self, row: usize) -> Option<u64> {
        self.expected.get(row).copied().flatten()
    }

    /// The incarnation of `node` that this member's view names and whose link it still waits
    /// for: the deciding member had readmitted that incarnation, this member still suspected
    /// the row when it installed the view (its link to the new process came up late, or after
    /// a proposal named the node, so it could not readmit it before). Until the link comes up
    /// the member is *not yet connected*, not failed: the membership protocol does not count
    /// it failed, and a view's epoch should treat it as absent
    /// (`RoundRobin::expect_incarnation`), not failed. `None` once readmitted, or once the
    /// wait ended because that incarnation failed (a newer one connected, or a member
    /// published a suspicion of it): then the row counts as suspected again.
    pub fn expected_incarnation(&self, node: NodeId) -> Option<u64> {
        let row = self.sst.row_of(node)?;
        self.expected_at(row).filter(|_| self.sst.is_suspected(row))
    }

    /// The rows of `members` this member suspects whose incarnation readmitted by `from`
    /// (its `admitted` word) is newer than the one this member knows: the view `from`
    /// installs or decides names that newer incarnation (a member readmits an incarnation only
    /// once the old one is in no view it can count, and keeps counting the readmitted one while
    /// the node is in its views, so its word does not change while a view of it names the
    /// node).
    ///
    /// `from` may name several rows: the incarnation taken is the newest any of them admitted
    /// (see [`runners_of`](Gms::runners_of) for when that is sound).
    fn newer_named(&self, from: &[usize], members: &[NodeId]) -> Vec<(usize, u64)> {
        (members.iter().copied())
            .filter(|&m| m != self.me)
            .filter_map(|m| self.sst.row_of(m))
            .filter(|&r| self.sst.is_suspected(r))
            .filter_map(|r| {
                let a = (from.iter())
                    .map(|&x| self.sst.get_at(x, self.f.admitted, r).unwrap_or(0))
                    .max()
                    .unwrap_or(0);
                (a > self.sst.known_incarnation(r)).then_some((r, a))
            })
            .collect()
    }

    /// `from` and every other row this member counts whose view block shows `v` running (the
    /// whole view equal: id, members, shards, holders; a view id alone can be reused across
    /// restarts, forty-second part): the rows whose `admitted` words an outsider installing
    /// `v` reads (s26, `docs/MEMBERSHIP.md`, sixty-seventh part and its follow-up).
    ///
    /// One row's words are not enough. A fabric reads a write's source when it applies the
    /// write, not when it is posted (RDMA does; so does the simulator), so a whole-row push
    /// posted before the writer installed `v` (to a peer it had just readmitted) carries `v`'s
    /// view block, while the `admitted` words the writer set before installing `v` may miss
    /// the push's earlier write that carries them (read before they were set) and travel in
    /// their own later push. A reader can see the
    /// row's view block name `v` with the `admitted` words still as they were before: an
    /// incarnation the writer readmitted for `v` then reads as not readmitted, and the
    /// outsider would take `v` to name the old, failed incarnation and fail that member in
    /// its epoch from the start (its epoch wedges and the others remove this member). Every
    /// member running `v` counts, for each member of `v`, the incarnation `v` names or (still
    /// waiting for its link) an older one, and readmits no newer one while `v` names the
    /// node, so the newest word among them is the one `v` names as soon as one runner's word
    /// has landed here. (Only a word read *ahead* of its row's view block could name more: the
    /// writer would have to leave `v`, readmit a newer incarnation, and have a whole-row push
    /// to this member in flight across both. Not seen; one row alone has the same exposure.)
    /// Where every runner's word is still late, the outsider fails the member as before.
    fn runners_of(&self, from: usize, v: &View) -> Vec<usize> {
        let me = self.sst.my_row();
        let runs = |r: usize| {
            r != me
                && !self.sst.is_suspected(r)
                && self.read_block(r, self.f.view).is_some_and(|p| {
                    !self.restarting_in(&p) && self.decode_view(r, &p).is_some_and(|w| w == *v)
                })
        };
        (0..self.sst.rows())
            .filter(|&r| r == from || runs(r))
            .collect()
    }

    /// Sets the expectations of a view just installed (`named`: see
    /// [`newer_named`](Gms::newer_named)), keeping those of rows the view still contains.
    fn expect(&mut self, view: &View, named: &[(usize, u64)]) -> Result<(), GmsError> {
        let u = self.cfg.universe.len();
        self.expected.resize(u, None);
        self.expected_since.resize(u, None);
        for r in 0..u {
            if !self.cfg.universe.get(r).is_some_and(|&n| view.contains(n)) {
                self.expected[r] = None;
            }
        }
        let named = named
            .iter()
            .filter(|&&(r, _)| self.cfg.universe.get(r).is_some_and(|&n| view.contains(n)));
        for &(r, a) in named {
            if self.expected[r] != Some(a) {
                let node = self.cfg.universe.get(r).copied();
                tracing::info!(me = %self.me, view = view.id, ?node, incarnation = a, "membership: the view names a new incarnation whose link is not up here; waiting for it (not failed)");
                self.expected_since[r] = Some(self.sst.now());
            }
            self.expected[r] = Some(a);
        }
        self.settle_expected()
    }

    /// Each round: readmits an expected incarnation once its link is up here (the row holds
    /// exactly it pending), and ends the wait when that incarnation is known to have failed (a
    /// newer one connected, or an unsuspected member publishes a suspicion of it: a flag above
    /// it) or the view no longer names the node. Then the row counts as suspected again and the
    /// view changes as for any failed member. The wait is bounded
    /// ([`GmsConfig::expected_link_wait`]): once it has lasted that long, this member gives up
    /// on the link (a one-way partition, say) and counts the member failed as it would a
    /// silent one, publishing a suspicion of that incarnation ([`Sst::suspect_incarnation`])
    /// so that the members linked to it cut it too; the ordinary failure path then removes it.
    fn settle_expected(&mut self) -> Result<(), GmsError> {
        let flags = self.sst.schema().suspected();
        let now = self.sst.now();
        let bound = self.cfg.expected_link_wait();
        for r in 0..self.expected.len() {
            let Some(a) = self.expected[r] else {
                continue;
            };
            if !self.sst.is_suspected(r) {
                self.expected[r] = None;
                continue;
            }
            match self.sst.pending_incarnation(r) {
                Some(k) if k == a => {
                    self.expected[r] = None;
                    self.readmit(r)?;
                    continue;
                }
                Some(k) if k > a => {
                    tracing::warn!(me = %self.me, row = r, expected = a, newer = k, "membership: the expected incarnation was replaced by a newer one before its link came up here");
                    self.expected[r] = None;
                    continue;
                }
                _ => {}
            }
            let failed = (0..self.sst.rows())
                .filter(|&o| o != self.sst.my_row() && o != r && !self.sst.is_suspected(o))
                .any(|o| self.sst.get_at(o, flags, r).unwrap_or(0) > a);
            if failed {
                tracing::warn!(me = %self.me, row = r, expected = a, "membership: a member suspects the expected incarnation; no longer waiting for it");
                self.expected[r] = None;
                continue;
            }
            let since = self.expected_since.get(r).copied().flatten();
            let waited = since.map_or(std::time::Duration::ZERO, |t| now.saturating_since(t));
            if waited >= bound
                && let Some(&node) = self.cfg.universe.get(r)
            {
                tracing::warn!(
                    me = %self.me, %node, expected = a, waited_ms = waited.as_millis() as u64,
                    bound_ms = bound.as_millis() as u64,
                    "membership: the link of the new incarnation this view names never came up here (expected_link_timeout); suspecting it like a silent member"
                );
                self.expected[r] = None;
                self.sst.suspect_incarnation(node, a)?;
            }
        }
        Ok(())
    }

    /// Each round: bounds the wait for a member of the installed view whose link never came
    /// up here (*absent*: a joiner admitted while its process was down, or whose link to this
    /// member is late). Such a member is not yet connected, not failed: the view's epoch starts
    /// without it and takes it in when its link comes up (`RoundRobin`'s late rows). Once the
    /// wait has lasted [`GmsConfig::expected_link_wait`] (as for an expected incarnation,
    /// [`settle_expected`](Gms::settle_expected)) this member counts it failed like a silent
    /// member and the ordinary failure path removes it; a later process of it joins again. Not
    /// in view 0 (a first start, whose members may start far apart) nor in restart mode (whose
    /// absent members [`GmsConfig::restart_absent_timeout`] counts out).
    ///
    /// The suspicion names the incarnation that the members linked to it count
    /// ([`linked_elsewhere`](Gms::linked_elsewhere), [`Sst::suspect_incarnation`]), so that
    /// they adopt it: where the link came up at every member but this one (a *one-way
    /// absence*), a flag naming only the incarnation this member knows (none) would be below
    /// theirs, this member would wedge alone and the view would stall.
    fn settle_absent(&mut self) -> Result<(), GmsError> {
        let u = self.cfg.universe.len();
        self.absent_since.resize(u, None);
        let view = match &self.view {
            Some(v) if v.id > 0 && self.restart.is_none() => v,
            _ => {
                self.absent_since.iter_mut().for_each(|s| *s = None);
                return Ok(());
            }
        };
        let now = self.sst.now();
        let bound = self.cfg.expected_link_wait();
        let flags = self.sst.schema().suspected();
        let me = self.sst.my_row();
        let mut give_up = Vec::new();
        for (r, &node) in self.cfg.universe.iter().enumerate() {
            let named = node != self.me && view.contains(node) && self.sst.row_of(node) == Some(r);
            let waiting = named && self.sst.is_absent(r) && !self.sst.is_suspected(r);
            if !waiting {
                self.absent_since[r] = None;
                // Suspected while absent here, with a published flag naming an incarnation
                // below one that a member this member counts has linked since (the name was
                // taken at the bound, before any of them had): named again, or they never
                // adopt it (s24, forty-eighth part of `docs/MEMBERSHIP.md`).
                let flag = self.sst.get_at(me, flags, r).unwrap_or(0);
                if named
                    && !self.sst.is_accused()
                    && self.sst.is_absent(r)
                    && self.sst.is_suspected(r)
                    && flag > 0
                    && let Some(k) = named_again(flag, self.linked_elsewhere(view, r))
                {
                    tracing::warn!(me = %self.me, %node, named = flag - 1, incarnation = k,
                        "membership: a member this view names, suspected here while its link never came up, was linked elsewhere after the bound; naming the incarnation the members linked to it count");
                    give_up.push((node, Some(k)));
                }
                continue;
            }
            let since = *self.absent_since[r].get_or_insert_with(|| {
                tracing::info!(me = %self.me, view = view.id, %node, "membership: the view names a member whose link is not up here; waiting for it (not failed)");
                now
            });
            let waited = now.saturating_since(since);
            if waited >= bound {
                let elsewhere = self.linked_elsewhere(view, r);
                tracing::warn!(
                    me = %self.me, %node, waited_ms = waited.as_millis() as u64,
                    bound_ms = bound.as_millis() as u64, incarnation = ?elsewhere,
                    "membership: the link of a member this view names never came up here (expected_link_timeout); suspecting it like a silent member, naming the incarnation the members linked to it count"
                );
                self.absent_since[r] = None;
                give_up.push((node, elsewhere));
            }
        }
        for (node, incarnation) in give_up {
            self.sst
                .suspect_incarnation(node, incarnation.unwrap_or(0))?;
        }
        Ok(())
    }

    /// The newest incarnation of `row`'s node that a member of `view` linked to it counts live
    /// (its `gms_linked` word, see [`Fields::linked`]), among the members this member counts
    /// (linked here, unsuspected) whose view block names `view`; `None` if there are none (0
    /// for a member that counts none). A member counts only an incarnation it linked, and
    /// readmits a newer one only once the older is in no view it counts, so while its view is
    /// `view`, which names the node, the word is the incarnation `view` admitted. The word is
    /// read before the view block: a member pushes in order, so a word it wrote after
    /// installing a later view comes with that view's block.
    fn linked_elsewhere(&self, view: &View, row: usize) -> Option<u64> {
        let me = self.sst.my_row();
        (view.members.iter())
            .filter_map(|&m| self.sst.row_of(m))
            .filter(|&o| o != me && o != row)
            .filter(|&o| !self.sst.is_suspected(o) && !self.sst.is_absent(o))
            .filter_map(|o| {
                let word = self.sst.get_at(o, self.f.linked, row).ok()?;
                let p = self.read_block(o, self.f.view)?;
                (p.first() == Some(&(view.id + 1))).then_some(word)
            })
            .max()
    }

    // ---- blocks -------------------------------------------------------------------------

    fn write_block(&mut self, v: Vector, payload: &[u64]) -> Result<(), GmsError> {
        let me = self.sst.my_row();
        let seq = self.sst.get_at(me, v, 0)? + 1;
        let words = crate::block::seal(seq, payload, v.len())?;
        for (i, w) in words.iter().enumerate() {
            self.sst.set_at(v, i, *w)?;
        }
        self.sst.push(v.range())?;
        Ok(())
    }

    /// The payload of block `v` in `row`, if it was written and reads consistently. Nothing of
    /// a row whose expected incarnation is not linked yet (see
    /// [`expected_incarnation`](Gms::expected_incarnation)): until it is readmitted, its words
    /// may be an older incarnation's (the row was frozen when that one failed).
    ///
    /// A block whose check word does not match (a write of it landing while this member reads:
    /// RDMA places a write's words in any order, TCP copies them in ascending order while the
    /// core reads) reads as nothing here, like one never written. A round never acts on such a
    /// read of a block a peer had written whole before: [`poll`](Gms::poll) skips the round
    /// while any block of a row it reads is torn ([`torn_block`](Gms::torn_block)).
    fn read_block(&self, row: usize, v: Vector) -> Option<Vec<u64>> {
        if (self.expected_at(row).is_some() && self.sst.is_suspected(row)) || self.unheard(row) {
            return None;
        }
        let words: Vec<u64> = (0..v.len())
            .map(|i| self.sst.get_at(row, v, i).unwrap_or(0))
            .collect();
        crate::block::open(&words).ok().map(<[u64]>::to_vec)
    }

    /// A row and block whose words read *torn* here (s28, eighty-eighth part of
    /// `docs/MEMBERSHIP.md`): the sequence word is set and the check word does not match, so a
    /// write of the block is landing right now. Rows checked: every row but this member's that
    /// [`read_block`](Gms::read_block) would read (not suspected, not
    /// [`unheard`](Gms::unheard)) and whose settings digest is this member's. A suspected row
    /// is frozen (a torn block there stays torn; its readers treat it as before) and a row
    /// with another or no digest yet is not read as a member's (`settings_differ`,
    /// `refuse_settings`; the digest is the first thing a row publishes, so a row without it
    /// has no block landed either, or only its first write, which reads as not yet written).
    ///
    /// A torn block reads as nothing (`block::open` refuses it). That is safe for a block's
    /// first write (it reads as not landed yet, as before the write), but a *rewrite* read torn
    /// hides a value that was there a moment before and will be there again (or a newer one):
    /// a decision read as absent lowers the highest decision an inspector adopts or the stop
    /// check reads, a view block read as absent makes a restarting member look like an
    /// outsider, a wedge block read as absent makes a member look unwedged. So
    /// [`poll`](Gms::poll) runs no protocol round while this finds one: the write completes
    /// (a link's writes land in order, the next one after it), or the link fails and the row is
    /// suspected, and the round runs then.
    fn torn_block(&self) -> Option<(usize, &'static str)> {
        let blocks = [
            (self.f.view, "view"),
            (self.f.wedge, "wedge"),
            (self.f.prop, "proposal"),
            (self.f.dec, "decision"),
        ];
        let me = self.sst.my_row();
        (0..self.sst.rows())
            .filter(|&r| r != me && !self.sst.is_suspected(r) && !self.unheard(r))
            .filter(|&r| self.settings_of(r) == Some(self.digest))
            .find_map(|r| {
                blocks.iter().find_map(|&(v, name)| {
                    let words: Vec<u64> = (0..v.len())
                        .map(|i| self.sst.get_at(r, v, i).unwrap_or(0))
                        .collect();
                    matches!(
                        crate::block::open(&words),
                        Err(crate::block::BlockError::Torn)
                    )
                    .then_some((r, name))
                })
            })
    }

    fn publish_view(&mut self) -> Result<(), GmsError> {
        match self.view.clone() {
            Some(v) => self.publish_view_of(&v),
            None => Ok(()),
        }
    }

    /// Publishes `v` with the restarting word: `v.id + 1` while this node is in restart mode
    /// (at `v`), with [`STATELESS`] set if it restarts without its shard's state; else 0.
    /// Callers set or clear `self.restart` first.
    fn publish_view_of(&mut self, v: &View) -> Result<(), GmsError> {
        let mut p = v.encode();
        p.resize(self.f.view.len() - 3, 0);
        let stateless = if self.holds_state { 0 } else { STATELESS };
        p.push(if self.restart.is_some() {
            (v.id + 1) | stateless
        } else {
            0
        });
        self.write_block(self.f.view, &p)
    }

    /// Whether the view block `p` (a payload read from a row) says its node is restarting at
    /// the view it names (see [`publish_view_of`](Self::publish_view_of)).
    fn restarting_in(&self, p: &[u64]) -> bool {
        p.get(self.f.view.len() - 3)
            .is_some_and(|&w| w & !STATELESS != 0 && Some(&(w & !STATELESS)) == p.first())
    }

    /// Whether the member of `row` restarts at view `vid` holding its shard's state: its view
    /// block says restarting at `vid` without the [`STATELESS`] bit (unreadable: not known to).
    fn restarts_holding_state(&self, row: usize, vid: u64) -> bool {
        if row == self.sst.my_row() {
            return self.holds_state;
        }
        self.read_block(row, self.f.view).is_some_and(|p| {
            p.first() == Some(&(vid + 1)) && self.restarting_in(&p) && !self.stateless_in(&p)
        })
    }

    /// Whether the view block `p` says its node restarts at the view it names *without* its
    /// shard's state ([`STATELESS`]).
    fn stateless_in(&self, p: &[u64]) -> bool {
        self.restarting_in(p)
            && p.get(self.f.view.len() - 3)
                .is_some_and(|&w| w & STATELESS != 0)
    }

    /// Restarting: the members of the last view whose rows say they restart *without* their
    /// shard's state (their transfer never completed): nobody may ask them for state until
    /// they announce it after a transfer of their own. Empty outside restart mode.
    pub fn restarted_without_state(&self) -> Vec<NodeId> {
        let (Some(v), Some(_)) = (&self.view, &self.restart) else {
            return Vec::new();
        };
        (v.members.iter().copied())
            .filter(|&m| m != self.me)
            .filter(|&m| {
                self.sst.row_of(m).is_some_and(|r| {
                    self.read_block(r, self.f.view)
                        .is_some_and(|p| self.stateless_in(&p))
                })
            })
            .collect()
    }

    /// The proposal block of `row` for view `vid`.
    fn proposal_of(&self, row: usize, vid: u64) -> Option<Tagged> {
        let p = self.read_block(row, self.f.prop)?;
        let b = ProposalBlock::decode(&p, &self.cfg.universe, self.cfg.max_pending_changes)
            .inspect_err(|e| tracing::debug!(me = %self.me, row, error = %e, "membership: skipping a proposal block"))
            .ok()
            .filter(|b| b.view == vid)?;
        Some(Tagged {
            rank: b.rank,
            changes: b.changes,
            trim: Vec::new(),
            holders: None,
        })
    }

    /// The decision block of `row` for view `vid`.
    fn decision_of(&self, row: usize, vid: u64) -> Option<Tagged> {
        let p = self.read_block(row, self.f.dec)?;
        let b = DecisionBlock::decode(&p, &self.cfg.universe, self.cfg.max_pending_changes)
            .inspect_err(|e| tracing::debug!(me = %self.me, row, error = %e, "membership: skipping a decision block"))
            .ok()
            .filter(|b| b.view == vid)?;
        Some(Tagged {
            rank: b.rank,
            changes: b.changes,
            trim: b.trim,
            holders: b.holders,
        })
    }

    /// The wedge block of `row` for view `vid`.
    fn wedge_of(&self, row: usize, vid: u64) -> Option<WedgeBlock> {
        let p = self.read_block(row, self.f.wedge)?;
        WedgeBlock::decode(&p, self.cfg.universe.len())
            .inspect_err(|e| tracing::debug!(me = %self.me, row, error = %e, "membership: skipping a wedge block"))
            .ok()
            .filter(|b| b.view == vid)
    }

    /// The received counts `row` published when it wedged in `vid`.
    fn received_of(&self, row: usize, vid: u64) -> Option<Vec<u64>> {
        self.wedge_of(row, vid).map(|b| b.received)
    }

    /// Whether `row` said, when it wedged in `vid`, that it held its shard's state.
    fn holds_of(&self, row: usize, vid: u64) -> Option<bool> {
        self.wedge_of(row, vid).map(|b| b.holds)
    }

    /// Wedges `epoch` in `view` and publishes the wedge block (received counts and whether this
    /// member holds its shard's state).
    fn wedge_in(&mut self, view: &View, epoch: &mut dyn Epoch) -> Result<(), GmsError> {
        let mut rx = epoch.wedge(view);
        let holds = epoch.holds_state(view);
        rx.resize(view.members.len(), 0);
        let p = WedgeBlock {
            view: view.id,
            received: rx.clone(),
            holds,
        }
        .encode(self.cfg.universe.len())?;
        self.write_block(self.f.wedge, &p)?;
        self.wedged = Some(rx);
        Ok(())
    }

    fn publish_proposal(
        &mut self,
        vid: u64,
        rank: u64,
        changes: &[Change],
    ) -> Result<(), GmsError> {
        let p = ProposalBlock {
            view: vid,
            rank,
            changes: changes.to_vec(),
        }
        .encode(self.cfg.max_pending_changes)?;
        self.write_block(self.f.prop, &p)?;
        self.proposal = Some((rank, changes.to_vec()));
        Ok(())
    }

    /// Publishes `d` with its `holders` (by rank in the ending view; `None`: not known).
    fn publish_decision(&mut self, d: &Decision, holders: Option<&[bool]>) -> Result<(), GmsError> {
        let u = self.cfg.universe.len();
        let p = DecisionBlock {
            view: d.trim.view,
            rank: d.rank,
            changes: d.changes.clone(),
            trim: d.trim.counts.iter().map(|(_, n)| *n).collect(),
            // A bitmap longer than the universe carries no member past it.
            holders: holders.map(|h| h.iter().copied().take(u).collect()),
        }
        .encode(u, self.cfg.max_pending_changes)?;
        self.write_block(self.f.dec, &p)
    }

    // ---- the protocol -----------------------------------------------------------------------

    fn stop(&mut self, why: StopReason, out: &mut Vec<GmsEvent>) -> GmsError {
        tracing::warn!(me = %self.me, %why, "membership: stopping");
        self.stopped = Some(why.clone());
        out.push(GmsEvent::Stopped(why.clone()));
        GmsError::Stopped(why)
    }

    /// Makes the table count only the suspicions of the members of the view this member is in
    /// (installed, or restarted in restart mode): a node outside it (a joiner, a spare, a left
    /// or removed member) that suspects a member must not get it removed, as in Derecho, whose
    /// view tables have the view's members as rows (s30, hundred-and-first part of
    /// `docs/MEMBERSHIP.md`). With no view (a joiner, an idle outsider) no row counts: such a
    /// node adopts no suspicion, so it cuts no member on another's word (a member it cut would
    /// freeze it and could not run with it once it joins). It learns the suspicions of a view's
    /// members once it installs that view (their flags stay set).
    fn count_view_suspicions(&mut self) {
        match &self.view {
            Some(view) => self.sst.set_gossip_sources(&view.members),
            None => self.sst.set_gossip_sources(&[]),
        }
    }

    /// Runs one round: the table's failure detector and gossip, then the protocol. Never blocks.
    /// Returns whether anything happened; an error once the member has stopped (the first time
    /// with a [`GmsEvent::Stopped`] in `out`). No protocol step is taken in a round in which a
    /// peer's block reads torn (a write of it is landing); the next round takes it.
    pub fn poll(
        &mut self,
        epoch: &mut dyn Epoch,
        out: &mut Vec<GmsEvent>,
    ) -> Result<bool, GmsError> {
        if let Some(why) = &self.stopped {
            return Err(GmsError::Stopped(why.clone()));
        }
        self.count_view_suspicions();
        let busy = self.sst.poll_once()?.is_busy();
        self.co_suspect()?;
        self.publish_incarnations()?;
        if let Some(why) = self.settings_differ() {
            return Err(self.stop(why, out));
        }
        // A peer's block read torn: every reader below would take it as never written (see
        // `torn_block`). The round waits for the write to land.
        if let Some((row, block)) = self.torn_block() {
            tracing::trace!(me = %self.me, row, block, "membership: a peer's block is landing (reads torn); the round waits");
            return Ok(busy);
        }
        self.readmit_restarted()?;
        self.settle_expected()?;
        self.settle_absent()?;
        // Again: the two settles may have suspected a member (its bound ran out), and the round
        // below reads the suspicions (s24, forty-seventh part, "review findings").
        self.co_suspect()?;
        let before = out.len();
        match self.view.clone() {
            None => self.follow_as_outsider(out)?,
            Some(view) if self.restart.is_some() => self.restart_round(&view, epoch, out)?,
            Some(view) if self.first_start_restart(&view, &*epoch)? => return Ok(true),
            Some(view) => self.member_round(&view, epoch, out)?,
        }
        Ok(busy || out.len() > before)
    }

    /// A crash during the group's first start (issue 6; docs/MEMBERSHIP.md, twenty-first
    /// part): some initial members logged `Installed { 0 }` before the crash and restart view
    /// 0 from their logs, while this one, whose log was empty, started view 0 afresh. Each
    /// would wait for the other for good. So a member that started view 0 with an empty log
    /// ([`first_start`](Gms::first_start)) and has not taken part in view 0 (see
    /// [`took_part_in_view_0`](Gms::took_part_in_view_0): no decision logged, nothing
    /// delivered that its epoch log does not hold; a wedge, proposal or acknowledgement does
    /// not count) enters restart mode at view 0 as soon as it reads an unsuspected member of
    /// view 0 whose view block says it restarts at view 0, or (s20) any unsuspected peer whose
    /// view block restarts or runs a view after 0 (the group went on without this member: view
    /// 0 is over). It is then exactly a member whose log holds `Installed { 0 }` and nothing
    /// else, which it does (logged at construction): it promised and decided nothing, and its
    /// logged counts are what its epoch log holds. Against a peer past view 0 the restart round
    /// then catches up one view or joins again by state transfer (docs/MEMBERSHIP.md,
    /// twenty-third part). A member that delivered in view 0 (s23, forty-first part) switches
    /// only into a restart of view 0 by its peers, and only once it wedged (such a peer's
    /// wedge block wedges it first, so a running group does not pay for the scan after its
    /// first delivery): its replay continues after what it delivered. Returns whether it
    /// switched (its driver then leaves the epoch and restarts from its epoch log; the restart
    /// round runs from the next poll on).
    fn first_start_restart(&mut self, view: &View, epoch: &dyn Epoch) -> Result<bool, GmsError> {
        if !self.first_start {
            return Ok(false);
        }
        if view.id != 0 || self.took_part_in_view_0(epoch) {
            // Final: it took part in view 0 (and the check stops costing a scan per round).
            self.first_start = false;
            return Ok(false);
        }
        let delivered = !epoch.nothing_delivered();
        if delivered && self.wedged.is_none() {
            return Ok(false);
        }
        // A peer restarting view 0 (a member of it, from its log), or any peer restarting or
        // running a later view (s20: the group went on without this member in an earlier
        // life, or while it was not there; view 0 is over). Not the latter once this member
        // delivered: joining again would replace the state its application holds.
        let ahead = (0..self.sst.rows()).find_map(|r| {
            if r == self.sst.my_row() || self.sst.is_suspected(r) {
                return None;
            }
            let p = self.read_block(r, self.f.view)?;
            let vid = p.first()?.checked_sub(1)?;
            let restarting = self.restarting_in(&p);
            let node = *self.cfg.universe.get(r)?;
            let at_0 = vid == view.id && restarting && view.contains(node);
            (at_0 || (vid > view.id && !delivered)).then_some((node, vid, restarting))
        });
        let Some((peer, vid, restarting)) = ahead else {
            return Ok(false);
        };
        self.first_start = false;
        self.restart = Some(RestartState::default());
        // An ordinary wedge is void: the restart round wedges again, publishing the counts
        // its epoch log holds (never fewer than the wedge published). So is an ordinary
        // proposal or acknowledgement (s22): it was never logged, and in restart mode the
        // member acknowledges ballots only (its block is overwritten by the first one it
        // follows or leads).
        self.wedged = None;
        self.proposal = None;
        self.publish_view()?;
        if vid == view.id {
            tracing::info!(me = %self.me, %peer, delivered, "membership: a member of view 0 restarts it from its log (the group crashed during its first start): restarting view 0 with it");
        } else {
            tracing::info!(me = %self.me, %peer, view = vid, restarting, "membership: a peer is past view 0, which this member started afresh (its log held no view): restarting view 0 to catch up or join again");
        }
        Ok(true)
    }

    /// Whether this first-start member did something in view 0 that bars its switch into
    /// restart mode ([`first_start_restart`](Gms::first_start_restart)) for good: it logged a
    /// decision for view 0 (an ordinary view 1 may be installed with it: an install needs
    /// every member the installer counts to have logged and echoed the decision), or it
    /// delivered something its epoch log may not hold ([`Epoch::nothing_delivered`] false and
    /// [`Epoch::delivered_in_log`] false: the replay after the switch could not continue after
    /// it). What it delivered with durable epochs does not bar it (s23; docs/MEMBERSHIP.md,
    /// forty-first part): every member of its shard logged it before anyone delivered it, so
    /// a restart's trim keeps it and the replay skips it. A wedge, a proposal or an
    /// acknowledgement of an ordinary change does not bar it, whether the epoch was still held
    /// or had been released (s21, s22; docs/MEMBERSHIP.md, thirtieth, thirty-fourth and
    /// thirty-eighth parts): none is logged, none lets a peer install anything without this
    /// member's echo, the wedge's counts never exceed what the epoch log holds, and what a
    /// released epoch wrote into its shard peers' region set 0 is what a released member that
    /// never wedged may already have written when it switches (s19).
    fn took_part_in_view_0(&self, epoch: &dyn Epoch) -> bool {
        self.decision.is_some() || !(epoch.nothing_delivered() || epoch.delivered_in_log())
    }

    /// Readmits the rows of suspected nodes whose newer incarnation connected (they restarted
    /// under their id), once this member can no longer count the old incarnation: this member
    /// is in a view and that view does not contain it (its removal was installed here, or it
    /// never was a member), no proposal or decision this member holds names it. In restart
    /// mode only a member of a shard this member counts failed as a whole, while no restart
    /// decision removes it, every member it counts shows it noticed the old incarnation's
    /// failure, and no view after the restart's is visible but the new incarnation's own (see
    /// [`readmissible_in_restart`](Gms::readmissible_in_restart)).
    /// An outsider readmits nobody.
    /// Until then the row stays suspected and frozen, and the new incarnation waits outside.
    fn readmit_restarted(&mut self) -> Result<(), GmsError> {
        for row in self.sst.pending_rows() {
            let Some(&node) = self.cfg.universe.get(row) else {
                continue;
            };
            let named = |ch: &[Change]| ch.iter().any(|c| c.node == node);
            // An outsider (a joiner) never readmits: the view it is about to install was
            // decided by others and may still name the old incarnation; its own row would then
            // hand that view to the new incarnation, which would take it for its own.
            if self.restart.is_some() {
                if self.readmissible_in_restart(node) {
                    // Logged only where the linked clause is what lets it in (s29 follow-up).
                    if let Some(view) = self.view.as_ref()
                        && let Some(Blocked::Linked(linker)) = self.readmission_blocked(view, node)
                    {
                        tracing::info!(me = %self.me, %node, %linker, view = view.id, "membership: restart: a member counted here links the new incarnation of a member suspected here; readmitting it");
                    }
                    self.readmit(row)?;
                } else if self.joiner_readmissible_in_restart(node) {
                    self.readmit(row)?;
                }
                continue;
            }
            let counted = self.view.as_ref().is_none_or(|v| v.contains(node))
                || self.proposal.as_ref().is_some_and(|(_, ch)| named(ch))
                || self.decision.as_ref().is_some_and(|d| named(&d.changes));
            if !counted {
                self.readmit(row)?;
            }
        }
        Ok(())
    }

    /// Restart mode at view `L`: whether the pending new incarnation of `node` may be readmitted
    /// (issue 6: a shard's only restarted holder restarting during the restart hung it). Only
    /// when all hold:
    ///
    /// - `node` is a member of `L` and *every* member of its shard is counted failed here, so
    ///   without a readmission the every-shard rule blocks this member for good (suspicions are
    ///   final in this process): it would never again acknowledge, echo, lead or install, only
    ///   catch up from a peer ahead or join again, which it still does; or the members of `L`
    ///   counted here, `node` aside, are fewer than a majority (s20); or a member of `L` counted
    ///   here links exactly the pending incarnation without having readmitted it (s29,
    ///   [`linked_by_a_counted_member`](Gms::linked_by_a_counted_member)), and no restart
    ///   decision for `L` is held here or read in any row, suspected ones included (the
    ///   sixteenth part's condition, kept for this clause by the s29 follow-up: see
    ///   [`restart_decided_here`](Gms::restart_decided_here)); that member counts `node`, and
    ///   where `node` is its leader neither side's ballots can be decided without the other;
    /// - no restart decision for `L` that it holds or reads in any row (suspected ones
    ///   included: the old incarnation's frozen words) *removes* `node`: every restart view
    ///   decided so far counts `node` (s19; before, any restart decision refused it, which hung
    ///   the restart once one existed);
    /// - every member of `L` it counts (linked, unsuspected) publishes in `gms_noticed` that it
    ///   counts no incarnation of `node` below the pending one (s20, race (c)): a member that
    ///   installed the restart view counting the old incarnation did so before it noticed the
    ///   failure, so its view block is read here before that word and refuses below;
    /// - no row publishes a view after `L`, except `node`'s own row publishing `L + 1`
    ///   *restarting* (s20, race (b)): its new incarnation restarts one view later (the old
    ///   one installed the restart view), and this member catches up from it into restart
    ///   mode; the old incarnation's frozen block (that view running) still refuses.
    ///
    /// The new incarnation restarts from the same logs (every promise and decision logged
    /// before it was published: the same acceptor), so it acknowledges, echoes and installs
    /// as the old one would have; a decision naming it names the node, whichever incarnation
    /// acknowledged it. Why two different restart views cannot both be installed, and the
    /// races, are in `docs/MEMBERSHIP.md` (sixteenth, eighteenth and twenty-second parts).
    fn readmissible_in_restart(&self, node: NodeId) -> bool {
        self.readmission_in_restart(node) == Some(true)
    }

    /// Restart mode at view `L`: whether the pending new incarnation of `node`, any node
    /// *outside* `L` (a joiner that a logged decision for `L` admits, a node asking to join, an
    /// idle outsider), may be readmitted (s27, seventy-sixth part of `docs/MEMBERSHIP.md`).
    /// Whether it asks to join is not checked: until the readmission its row stays suspected
    /// and frozen at the old incarnation's words, so the new one's `join` word cannot be read. Only once every
    /// member of `L` this member counts published that it noticed the old incarnation's failure
    /// (its `gms_noticed` word), and while no row (suspected ones included: the old
    /// incarnation's frozen words) publishes a view after `L`: then no view names the old
    /// incarnation at a member this member counts, since a view that names a node outside `L`
    /// and runs in this life comes after `L`. The normal-mode rule (no proposal or decision held names the
    /// node) is not applied: the adopted decision that admits `node` stays logged here, and a
    /// restart that adopts it unchanged needs `node` here (see
    /// [`adopted_whole_here`](Gms::adopted_whole_here)); refusing the readmission left such a
    /// restart waiting for good once the joiner's process had been restarted (a misconfigured
    /// joiner corrected by its operator). The join itself is proposed only once the members
    /// that suspected the old incarnation readmitted the new one
    /// ([`readmission_pending`](Gms::readmission_pending)), as in normal mode.
    fn joiner_readmissible_in_restart(&self, node: NodeId) -> bool {
        let (Some(view), Some(_)) = (&self.view, &self.restart) else {
            return false;
        };
        let (Some(row_n), false) = (self.sst.row_of(node), view.contains(node)) else {
            return false;
        };
        let Some(pending) = self.sst.pending_incarnation(row_n) else {
            return false;
        };
        // Race (c) of the twenty-second part, as for a member of `view`: every member of `view`
        // this member counts publishes that it no longer counts an incarnation of `node` below
        // the pending one. One that installed a view after `view` counting the old incarnation
        // did so before it noticed the failure, so that view block lands here before the word
        // and is read below (read after the words).
        let me = self.sst.my_row();
        let unnoticed = view.members.iter().any(|&m| {
            self.sst.row_of(m).is_some_and(|r| {
                r != me
                    && !self.suspects(m)
                    && !self.sst.is_absent(r)
                    && self.sst.get_at(r, self.f.noticed, row_n).unwrap_or(0) < pending
            })
        });
        !unnoticed
            && !(0..self.sst.rows()).any(|row| {
                (self.read_block(row, self.f.view))
                    .is_some_and(|p| p.first().is_some_and(|&w| w > view.id + 1))
            })
    }

    /// [`readmissible_in_restart`](Gms::readmissible_in_restart) in three answers: `None`,
    /// not now; `Some(false)`, every condition holds but some member it counts has not yet
    /// published that it noticed the old incarnation's failure (the wait of race (c), which
    /// ends by itself: see `docs/MEMBERSHIP.md`, twenty-second part); `Some(true)`, readmit.
    fn readmission_in_restart(&self, node: NodeId) -> Option<bool> {
        let (Some(view), Some(_)) = (&self.view, &self.restart) else {
            return None;
        };
        self.readmission_blocked(view, node)?;
        self.readmission_unrefused(view, node)
    }

    /// Restart mode at `view`: which clause of the first condition of
    /// [`readmissible_in_restart`](Gms::readmissible_in_restart) holds for `node`, the first
    /// that does in this order (`None`: none, or `node` is not a member of `view`). Without the
    /// readmission this member is blocked for good (suspicions are final in this process):
    /// every member of `node`'s shard is counted failed (the every-shard rule), or the members
    /// of `view` it counts, `node` aside, are fewer than a majority (s20: a bare-majority
    /// restart with a member bouncing; it would stop with `RestartCutOff`, or wait for good
    /// without partition safety). Or (s29) a member it counts links the pending incarnation
    /// without having readmitted it, and no restart decision for `view` is held or read here.
    fn readmission_blocked(&self, view: &View, node: NodeId) -> Option<Blocked> {
        if !view.contains(node) {
            return None;
        }
        let shard = view.shard_of(node).and_then(|s| view.shards.get(s))?;
        if shard.members.iter().all(|&m| self.suspects(m)) {
            return Some(Blocked::ShardGone);
        }
        let counted = |m: NodeId| m != node && !self.suspects(m);
        if !self.cfg.is_quorum(&view.members, &counted) {
            return Some(Blocked::Minority);
        }
        // A decision for `view` made before this member suspected the old incarnation may
        // count that incarnation's acknowledgement; readmitting the new one and then echoing
        // it is the sixteenth part's "gap". This clause is not needed to unblock this member
        // for good (it could still lead, acknowledge and echo), so it takes no such risk (s29
        // follow-up of the ninety-fourth part of `docs/MEMBERSHIP.md`).
        if self.restart_decided_here(view) {
            return None;
        }
        self.linked_by_a_counted_member(view, node)
            .map(Blocked::Linked)
    }

    /// Restart mode at `view`: whether this member holds, or reads in any row (suspected ones
    /// included: an old incarnation's frozen words), a decision of a restart ballot
    /// (`attempt_of(rank) > 0`) for `view` (the sixteenth part's condition (2) of
    /// `docs/MEMBERSHIP.md`, s18).
    fn restart_decided_here(&self, view: &View) -> bool {
        let restart_decision = |rank: u64| crate::restart::attempt_of(rank) > 0;
        (self.decision.as_ref()).is_some_and(|d| restart_decision(d.rank))
            || (0..self.sst.rows()).any(|row| {
                self.decision_of(row, view.id)
                    .is_some_and(|t| restart_decision(t.rank))
            })
    }

    /// Restart mode at `view`: a member of `view` this member counts (unsuspected, its link
    /// up) that publishes in its `gms_linked` word ([`Fields::linked`]) that it counts exactly
    /// the pending new incarnation of `node` live, and in its `gms_admitted` word
    /// ([`Fields::admitted`]) that it did not readmit that incarnation (s29, ninety-fourth part
    /// of `docs/MEMBERSHIP.md`, and its follow-up). That member linked the new process without
    /// ever suspecting an older one (its absent timeout had not run out when the process
    /// came): a member that suspected the old incarnation links the new one only through a
    /// readmission, which publishes `gms_admitted` (pushed before `gms_linked`, so read here
    /// first). A member that readmitted it under another clause is not a linker, so one
    /// readmission does not make every member that counts the readmitter readmit too. The
    /// linker counts `node` restarted; where `node` ranks lowest among the members it counts
    /// it takes `node` for its leader and acknowledges only its ballots, and `node`'s ballots
    /// wait for this member's acknowledgement, which never reaches a row held suspected here:
    /// without a readmission both wait for good, although a majority of `view` is here.
    fn linked_by_a_counted_member(&self, view: &View, node: NodeId) -> Option<NodeId> {
        let row_n = self.sst.row_of(node)?;
        let pending = self.sst.pending_incarnation(row_n)?;
        let me = self.sst.my_row();
        view.members.iter().copied().find(|&m| {
            self.sst.row_of(m).is_some_and(|r| {
                r != me
                    && r != row_n
                    && !self.suspects(m)
                    && !self.sst.is_absent(r)
                    && self.sst.get_at(r, self.f.linked, row_n).unwrap_or(0) == pending
                    && self.sst.get_at(r, self.f.admitted, row_n).unwrap_or(0) < pending
            })
        })
    }

    /// Conditions (2)–(4) of [`readmission_in_restart`](Gms::readmission_in_restart) for
    /// `node`, a member of `view` (the restart's view), whatever this member counts: `None`,
    /// refused (a restart decision removes `node`, a view after `view` is visible, or no
    /// pending incarnation); `Some(false)`, waiting for a counted member's `gms_noticed` word;
    /// `Some(true)`, none of them holds the readmission back.
    fn readmission_unrefused(&self, view: &View, node: NodeId) -> Option<bool> {
        // A restart decision that removes `node` (one adopting a logged decision that failed
        // it): the restart view does not count `node`, so readmitting it could only leave it
        // counted where the group goes on without it.
        let removes_node = |rank: u64, changes: &[Change]| {
            crate::restart::attempt_of(rank) > 0
                && changes.iter().any(|c| c.node == node && c.removes())
        };
        if (self.decision.as_ref()).is_some_and(|d| removes_node(d.rank, &d.changes)) {
            return None;
        }
        // Race (c): every member of `view` this member counts (linked, unsuspected) shows that
        // it no longer counts any incarnation of `node` below the pending one. A member that
        // installed the restart view counting the old incarnation did so before it noticed
        // the failure, so its view block lands here before its `gms_noticed` word does and is
        // read below (read after the words). Members whose link never came up here are not
        // waited for: they are counted out by the absent timeout. That timeout can run before
        // this readmission (s28, eighty-fifth part: with a majority only counting the members
        // coming, its clock starts while they are still pending); a member counted out there is
        // suspected, and no longer read here either.
        let row_n = self.sst.row_of(node)?;
        let pending = self.sst.pending_incarnation(row_n)?;
        let me = self.sst.my_row();
        let unnoticed = view.members.iter().any(|&m| {
            let Some(r) = self.sst.row_of(m) else {
                return false;
            };
            let counted = r != me && r != row_n && !self.suspects(m) && !self.sst.is_absent(r);
            counted && self.sst.get_at(r, self.f.noticed, row_n).unwrap_or(0) < pending
        });
        // A view after `view` in a row: refused, except in `node`'s own row the restart view
        // *restarting* (s20, race (b)): the new incarnation restarts one view later, its log
        // holding the restart view its old incarnation installed, and this member catches up
        // from it into restart mode. The old incarnation's frozen block shows that view
        // running, and is refused until the new incarnation's block overwrites it.
        let refused = (0..self.sst.rows()).any(|row| {
            self.decision_of(row, view.id)
                .is_some_and(|t| removes_node(t.rank, &t.changes))
                || (self.read_block(row, self.f.view)).is_some_and(|p| {
                    let later = p.first().is_some_and(|&w| w > view.id + 1);
                    let restarting_next =
                        row == row_n && p.first() == Some(&(view.id + 2)) && self.restarting_in(&p);
                    later && !restarting_next
                })
        });
        (!refused).then_some(!unnoticed)
    }

    /// Publishes, per node, the incarnations of it this member no longer counts (the
    /// `gms_noticed` word, see [`Fields::noticed`]) where they changed: the incarnation its
    /// table counts live, one more than the one it suspects, or a suspected node's pending
    /// newer incarnation. Whatever the suspicion's source ([`squall_sst::Suspicion::Remote`]
    /// and a deferred or accused member's suspicions included), so it is evidence that this
    /// member noticed an incarnation's failure where the gossiped flags are not. Never
    /// lowered. Pushed after everything this member pushed before (one writer, pushes in
    /// order): a reader of the new value also reads the view block of any view this member
    /// installed while it still counted an older incarnation. Also publishes, where it
    /// changed, the incarnation its table counts live (the `gms_linked` word, see
    /// [`Fields::linked`]).
    fn publish_incarnations(&mut self) -> Result<(), GmsError> {
        let me = self.sst.my_row();
        let mut changed = false;
        for row in (0..self.sst.rows()).filter(|&r| r != me) {
            let known = self.sst.known_incarnation(row);
            let suspected = self.sst.is_suspected(row);
            let now = if suspected {
                let pending = self.sst.pending_incarnation(row).unwrap_or(0);
                known.saturating_add(1).max(pending)
            } else {
                known
            };
            if now > self.sst.get_at(me, self.f.noticed, row)? {
                self.sst.set_at(self.f.noticed, row, now)?;
                changed = true;
            }
            let live = if suspected || self.sst.is_absent(row) {
                0
            } else {
                known
            };
            if live != self.sst.get_at(me, self.f.linked, row)? {
                self.sst.set_at(self.f.linked, row, live)?;
                changed = true;
            }
        }
        if changed {
            let both = squall_sst::FieldRange::span(self.f.noticed.range(), self.f.linked.range());
            self.sst.push(both)?;
        }
        self.publish_readmitted_self()?;
        for row in 0..self.unheard.len() {
            if let Some(inc) = self.unheard[row]
                && self.sst.get_at(row, self.f.admitted, row)? >= inc
            {
                self.unheard[row] = None;
            }
        }
        Ok(())
    }

    /// Publishes in this member's own `admitted` slot the newest incarnation of itself that a
    /// peer it counts (linked, unsuspected) readmitted, where that is newer than the slot
    /// (s25). A process is not told its own incarnation by the transport; a peer that
    /// readmitted it names it in its `admitted` word. Pushed after this incarnation's whole
    /// row (one writer, pushes in order), so a peer that reads its incarnation in the slot
    /// reads every other word of the row as this incarnation's (see [`unheard`](Gms::unheard)).
    /// A whole-row push (a link that comes up later) posts the own slot as its own last write
    /// after the rest of the row (set at construction, [`guards`]; s27): the order then rests
    /// on the order between writes, never on the placement of words within one write.
    fn publish_readmitted_self(&mut self) -> Result<(), GmsError> {
        let me = self.sst.my_row();
        let mut newest = self.sst.get_at(me, self.f.admitted, me)?;
        for row in (0..self.sst.rows()).filter(|&r| r != me) {
            if self.sst.is_suspected(row) || self.sst.is_absent(row) {
                continue;
            }
            newest = newest.max(self.sst.get_at(row, self.f.admitted, me)?);
        }
        if newest > self.sst.get_at(me, self.f.admitted, me)? {
            tracing::debug!(me = %self.me, incarnation = newest, "membership: a peer readmitted this incarnation; publishing it in the own row");
            self.sst.set_at(self.f.admitted, me, newest)?;
            self.sst.push(self.f.admitted.range())?;
        }
        Ok(())
    }

    /// Whether `row` holds a node's incarnation this member readmitted whose own words have
    /// not landed here yet (s25, `docs/MEMBERSHIP.md`, fifty-ninth part): the row still holds
    /// the old incarnation's frozen words (its view, wedge, proposal and decision blocks, its
    /// heartbeat), which must not be read as the new incarnation's. The new incarnation
    /// publishes itself in its own `admitted` slot once it reads a peer's readmission (see
    /// [`publish_readmitted_self`](Gms::publish_readmitted_self)), after its whole row.
    fn unheard(&self, row: usize) -> bool {
        self.unheard.get(row).copied().flatten().is_some()
    }

    /// Readmits `row`'s pending incarnation and publishes that this member did.
    fn readmit(&mut self, row: usize) -> Result<(), GmsError> {
        let Some(incarnation) = self.sst.pending_incarnation(row) else {
            return Ok(());
        };
        if self.sst.readmit(row)? {
            let node = self.cfg.universe.get(row).copied();
            tracing::info!(me = %self.me, ?node, incarnation, "membership: a restarted node's new incarnation readmitted; it may join");
            let u = self.cfg.universe.len();
            self.unheard.resize(u, None);
            if self.sst.get_at(row, self.f.admitted, row)? < incarnation
                && let Some(w) = self.unheard.get_mut(row)
            {
                *w = Some(incarnation);
            }
            self.sst.set_at(self.f.admitted, row, incarnation)?;
            self.sst.push(self.f.admitted.range())?;
        }
        Ok(())
    }

    /// A node outside any view installs the newest view that names it.
    fn follow_as_outsider(&mut self, out: &mut Vec<GmsEvent>) -> Result<(), GmsError> {
        let mut best: Option<(View, usize)> = None;
        let idle = self.rejoined.is_none() && self.sst.get(self.sst.my_row(), self.f.join) == 0;
        let mut left_out = None;
        for row in 0..self.sst.rows() {
            if self.sst.is_suspected(row) || row == self.sst.my_row() {
                continue;
            }
            let Some(p) = self.read_block(row, self.f.view) else {
                continue;
            };
            let restarting = self.restarting_in(&p);
            if restarting && !idle {
                continue;
            }
            let Some(v) = self.decode_view(row, &p) else {
                continue;
            };
            // A restarting node's block is the view its log ended at, not one that runs. An
            // idle outsider notes one naming it: it was a member of that view (its own log
            // holds nothing).
            if restarting {
                if v.contains(self.me) {
                    self.restart_named = self.restart_named.max(Some(v.id));
                }
                continue;
            }
            if idle
                && let Some(l) = self.restart_named
                && v.id > l
                && !v.contains(self.me)
            {
                left_out = left_out.max(Some((l, v.id)));
            }
            // An idle outsider that started only after the group went on without it (s19)
            // never saw a restarting block naming it; the evidence then is the decision that
            // led to the running view: the peer's decision block for the view before it,
            // which fails this node. The node was a member of that view. Once the peer
            // decided a further view change, that block no longer names it; its `gone` word
            // does, until a view names the node again (s20).
            if idle
                && v.id > 0
                && !v.contains(self.me)
                && (self.failed_by(row, v.id - 1) || self.gone_by(row))
            {
                left_out = left_out.max(Some((v.id - 1, v.id)));
            }
            // Joining again after a total restart: only a view newer than the one that
            // superseded its log (older blocks naming it are stale), or that view itself if
            // the decision that led to it admitted this node as a joiner (s21: a restart that
            // adopted the join this node asked for in an earlier process; the peer writes to
            // this incarnation, so it counts it, and the view names it without state).
            let fresh = self.rejoined.is_none_or(|(_, newer)| {
                v.id > newer || (v.id == newer && v.id > 0 && self.joined_by(row, v.id - 1))
            });
            if fresh && v.contains(self.me) && best.as_ref().is_none_or(|(b, _)| v.id > b.id) {
                best = Some((v, row));
            }
        }
        if best.is_none()
            && let Some((last, newer)) = left_out
        {
            // A member of the last view whose log held nothing (it had not logged the view
            // that admitted it): the group restarted without it and runs a view that does not
            // name it. It joins as a new member, by state transfer.
            tracing::warn!(
                me = %self.me, view = last, newer,
                "membership: the restarted group went on without this member (its log held no view); joining (state by transfer)"
            );
            self.rejoined = Some((last, newer));
            return self.request_join();
        }
        if let Some((v, from)) = best {
            let vid = v.id;
            // A node of the view that this outsider suspects: the view names the incarnation
            // that the member it follows readmitted, if that is newer than the one this
            // outsider saw fail (see `newer_named`); it waits for exactly that one, held
            // pending already or not linked here yet (s18; s16 readmitted a pending one at
            // once if that member's word was at least it). Otherwise the view still counts the
            // old incarnation, which stays suspected here (it is removed in the next view).
            let named = self.newer_named(&self.runners_of(from, &v), &v.members);
            self.expect(&v, &named)?;
            let records = self.with_settings(crate::restart::installed_records(&v));
            self.log.append_all(&records)?;
            tracing::info!(me = %self.me, view = vid, "membership: joined");
            self.view = Some(v.clone());
            // Its wedge block may be the restart's of a view under this number (it restarted at
            // `vid`, then a restart of the view before installed `vid` again running): cleared
            // before the view block, so no peer reads it as a wedge of the running view (see
            // `restart_wedge`). An empty block reads as no wedge (`view_of`: no view). So are
            // its proposal and decision blocks for `vid` (a promise, or the decision its log
            // held for the dead run of `vid`, re-published at construction): a leader of the
            // running `vid` would otherwise extend that proposal or adopt that decision, with
            // its trim of another run's epoch (s28, ninetieth part of `docs/MEMBERSHIP.md`).
            let me = self.sst.my_row();
            if vid > 0 && self.proposal_of(me, vid).is_some() {
                let none = vec![0; ProposalBlock::payload_len(self.cfg.max_pending_changes)];
                self.write_block(self.f.prop, &none)?;
            }
            if vid > 0 && self.decision_of(me, vid).is_some() {
                let u = self.cfg.universe.len();
                let none = vec![0; DecisionBlock::payload_len(u, self.cfg.max_pending_changes)];
                self.write_block(self.f.dec, &none)?;
            }
            if vid > 0 && self.received_of(me, vid).is_some() {
                let none = vec![0; WedgeBlock::payload_len(self.cfg.universe.len())];
                self.write_block(self.f.wedge, &none)?;
            }
            self.sst.set(self.f.join, 0);
            self.sst.push(self.f.join.range())?;
            self.publish_view()?;
            out.push(GmsEvent::ViewInstalled {
                view: v,
                trim: None,
            });
        }
        Ok(())
    }

    /// Whether `row`'s decision block for view `vid` admits this node as a joiner.
    fn joined_by(&self, row: usize, vid: u64) -> bool {
        self.decision_of(row, vid).is_some_and(|d| {
            (d.changes.iter()).any(|c| c.node == self.me && c.kind == ChangeKind::Join)
        })
    }

    /// Whether `row`'s decision block for view `vid` fails this node (a restart counted it
    /// out, or the group removed it as failed; a graceful leave does not count). It stays
    /// readable until that member decides its next view change.
    fn failed_by(&self, row: usize, vid: u64) -> bool {
        self.decision_of(row, vid).is_some_and(|d| {
            (d.changes.iter()).any(|c| c.node == self.me && c.kind == ChangeKind::Fail)
        })
    }

    /// Whether `row` publishes that this node was failed out of a view it installed and not
    /// named by a later one ([`Fields::gone`]): evidence, for an idle outsider with an empty
    /// log, that it was a member the group went on without, once the decision that removed it
    /// is no longer in the peer's decision block (a further view change decided since).
    fn gone_by(&self, row: usize) -> bool {
        self.sst
            .get_at(row, self.f.gone, self.sst.my_row())
            .is_ok_and(|w| w > 0)
    }

    /// Publishes [`Fields::gone`] for the installation of view `next` (members `members`) by a
    /// decision with `changes`: a failed node is gone from `next` on, a node that left or that
    /// `next` names is not.
    fn note_gone(
        &mut self,
        changes: &[Change],
        next: u64,
        members: &[NodeId],
    ) -> Result<(), GmsError> {
        let mut marks: Vec<(NodeId, u64)> = (changes.iter())
            .filter(|c| c.removes())
            .map(|c| (c.node, if c.kind == ChangeKind::Fail { next } else { 0 }))
            .collect();
        marks.extend(members.iter().map(|&m| (m, 0)));
        let mut changed = false;
        for (node, w) in marks {
            let Some(row) = self.sst.row_of(node) else {
                continue;
            };
            if self.sst.get_at(self.sst.my_row(), self.f.gone, row)? != w {
                self.sst.set_at(self.f.gone, row, w)?;
                changed = true;
            }
        }
        if changed {
            self.sst.push(self.f.gone.range())?;
        }
        Ok(())
    }

    /// [`note_gone`](Gms::note_gone) for every view change a restarting member's log holds,
    /// in order (each installed view after the first with the decision logged for the view
    /// before it).
    fn note_gone_logged(&mut self, r: &Recovered) -> Result<(), GmsError> {
        // The highest-ranked decision per view so far (a decision is logged before the view it
        // installs), as `Recovered::decision_for` picks it, in one pass.
        let mut decided: std::collections::HashMap<u64, &Decision> = Default::default();
        for rec in &r.records {
            match rec {
                Record::Decided { decision, .. } => {
                    let best = decided.entry(decision.trim.view).or_insert(decision);
                    if decision.rank >= best.rank {
                        *best = decision;
                    }
                }
                Record::Installed { view, members } if *view > 0 => {
                    if let Some(d) = decided.get(&(view - 1)) {
                        self.note_gone(&d.changes, *view, members)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The view in `row`'s view block `p` (`None`, logged at `debug`, if it does not decode).
    fn decode_view(&self, row: usize, p: &[u64]) -> Option<View> {
        View::decode(p, &self.shape, Some(&self.cfg.universe))
            .map_err(|e| tracing::debug!(me = %self.me, row, error = %e, "membership: skipping a view block"))
            .ok()
    }

    /// A round in restart mode (see [`crate::restart`]).
    fn restart_round(
        &mut self,
        view: &View,
        epoch: &mut dyn Epoch,
        out: &mut Vec<GmsEvent>,
    ) -> Result<(), GmsError> {
        // A peer one view ahead that publishes the decision that installed it: catch up (that
        // decision was acted on, so it is the one), in the peer's mode (restarting there or
        // running it); further ahead: this log cannot catch up, and the member joins again.
        let mut newer = None;
        let mut next = None;
        let mut running = false;
        let mut superseded = false;
        let mut blocked = None;
        for row in 0..self.sst.rows() {
            if row == self.sst.my_row() || self.sst.is_suspected(row) {
                continue;
            }
            let Some(p) = self.read_block(row, self.f.view) else {
                continue;
            };
            let vid = p[0].saturating_sub(1);
            running |= p[0] > 0 && vid == view.id && !self.restarting_in(&p);
            superseded |= p[0] > 0 && vid == view.id && self.superseded_by(row, view, &p);
            if self.joiner_root(row, view, vid) || self.dead_ahead(row, view, vid) {
                continue;
            }
            if self.below_promise(row, view, vid) && !self.holds_same_above(row, view, &p) {
                // Reported where a followed ballot is what blocks (not a decision held here).
                let peer = self.decision_of(row, view.id).map_or(0, |t| t.rank);
                let holds_above = (self.decision.as_ref())
                    .is_some_and(|d| d.trim.view == view.id && d.rank > peer);
                if !holds_above {
                    blocked = blocked.or_else(|| self.ballot_may_decide(view, peer));
                }
                continue;
            }
            if vid == view.id + 1
                && next.is_none()
                && let Some(t) = self.decision_of(row, view.id)
            {
                let theirs = self.decode_view(row, &p).map(|v| v.members);
                next = Some((t, self.restarting_in(&p), theirs));
            }
            if vid > view.id {
                newer = newer.max(Some(vid));
            }
        }
        // A peer publishes this view's number with other members, without this member: the
        // number was installed again by a restart of the view before that went on without it
        // (in an earlier life), so this log's view is a dead branch. Restarting it beside the
        // peers' would take their ballots and decisions for its own view (s23, forty-second
        // part of `docs/MEMBERSHIP.md`): it joins again.
        if superseded {
            return self.rejoin(view.id, view.id, out);
        }
        // The next view of this member's decision for this view is dead: members of it run
        // another `view + 1` (a later run of this view, after a restart of the view before
        // installed it again without this member, decided it), so that next view never runs
        // and the peers' `view + 1` is no catch-up source for this log (s29, ninety-fifth part
        // of `docs/MEMBERSHIP.md`): it joins again.
        if let Some(gone) = self.next_view_dead(view) {
            tracing::warn!(
                me = %self.me, view = view.id, ?gone,
                "membership: restart: members of the next view this member's decision makes run another view under that number; that view is dead"
            );
            return self.rejoin(view.id, view.id + 1, out);
        }
        self.note_blocked(view, blocked);
        match (newer, next) {
            // Two or more views behind: the decisions in between are not in its log (a member
            // of view L + 1 logs L + 1 before acting in it, so the group went on without it).
            (Some(n), _) if n > view.id + 1 => return self.rejoin(view.id, n, out),
            (_, Some((t, peer_restarting, theirs))) => {
                return self.catch_up(view, t, peer_restarting, theirs.as_deref(), out);
            }
            // A peer one view ahead whose decision is not readable yet: wait for it.
            (Some(_), None) => return Ok(()),
            (None, None) => {}
        }
        // A peer *runs* this view: the restart of the view before completed in this life
        // without this member — a late root, whose log ended here after a view change the
        // restarted majority's logs did not reach (a joiner admitted by that view's decision,
        // or a minority of that view that logged this one). The peers' view of this number
        // came from that restart, not from this log, so this member cannot restart from it:
        // it joins again, taking the state by transfer (nothing was delivered in this view's
        // old epoch: that needs every member's `Installed` record, i.e. a majority of the view
        // before at this view, and then no restart of the view before completes).
        if running && view.id > 0 {
            return self.rejoin(view.id, view.id - 1, out);
        }
        if self.wedged.is_none() {
            self.wedge_in(view, epoch)?;
            out.push(GmsEvent::Wedged { view: view.id });
        }
        self.take_back_outsiders(view);
        let alive: Vec<NodeId> = view
            .members
            .iter()
            .copied()
            .filter(|&m| !self.suspects(m))
            .collect();
        let restarted: Vec<NodeId> = alive
            .iter()
            .copied()
            .filter(|&m| {
                let r = self.sst.row_of(m).unwrap_or(0);
                self.received_of(r, view.id).is_some()
            })
            .collect();
        let missing: Vec<NodeId> = view
            .members
            .iter()
            .copied()
            .filter(|m| !restarted.contains(m))
            .collect();
        if let Some(r) = &mut self.restart
            && r.missing != missing
        {
            if !self
                .cfg
                .is_quorum(&view.members, &|m| restarted.contains(&m))
            {
                // What `is_quorum` needs: more than half the members, or with hosts set more
                // than half the view's hosts, each with all its members of the view restarted.
                let (unit, of) = if self.cfg.hosts.is_empty() {
                    ("members", view.members.len())
                } else {
                    let hosts = (view.members.iter())
                        .map(|&m| self.cfg.hosts.iter().position(|h| h.contains(&m)).ok_or(m))
                        .collect::<std::collections::BTreeSet<_>>();
                    ("whole hosts", hosts.len())
                };
                tracing::warn!(
                    me = %self.me, view = view.id, ?missing, restarted = restarted.len(),
                    needed = of / 2 + 1, of, unit,
                    "membership: restart waits for a majority of the last view's logs"
                );
            }
            r.missing = missing;
        }
        // The view's joiners shown never to log it stay set aside (`RestartState::aside`).
        let aside = self.never_logged(view);
        if let Some(r) = &mut self.restart {
            for j in aside {
                if !r.aside.contains(&j) {
                    r.aside.push(j);
                }
            }
        }
        // A suspected member's new incarnation that this member readmits once the others
        // published that they noticed the old one's failure (a round or two) counts: wait for
        // it rather than stop (s20, a bare-majority restart with a member bouncing).
        let counted = self.quorum_members(view);
        if self.cfg.partition_safety
            && !self.cfg.is_quorum(&counted, &|m| {
                alive.contains(&m) || self.readmission_in_restart(m) == Some(false)
            })
        {
            // Suspicions are final in this process and a suspected row is never read: no
            // majority of `view` can form here, nor a catch-up from the members that went on.
            let suspected = (view.members.iter().copied())
                .filter(|&m| self.suspects(m))
                .collect();
            return Err(self.stop(
                StopReason::RestartCutOff {
                    view: view.id,
                    suspected,
                },
                out,
            ));
        }
        // Never act without a majority of the last view's logs (its joiners that never logged
        // it aside, `quorum_members`).
        if !self.cfg.is_quorum(&counted, &|m| restarted.contains(&m)) {
            // A majority with the suspected members whose new incarnation is pending and not
            // refused (s28, eighty-fifth part of `docs/MEMBERSHIP.md`): the absent timeout runs
            // as if they had restarted. Readmitting them waits for the absent members to be
            // counted out (the bare-majority half of `readmission_in_restart`'s first
            // condition), which waited for a restarted majority: for good.
            let coming = |m: NodeId| {
                self.sst.row_of(m).is_some_and(|r| {
                    self.sst.is_suspected(r) && self.sst.pending_incarnation(r).is_some()
                }) && self.readmission_unrefused(view, m).is_some()
            };
            let holders: Vec<NodeId> = (restarted.iter().copied())
                .filter(|&m| {
                    (self.sst.row_of(m)).is_some_and(|r| self.restarts_holding_state(r, view.id))
                })
                .collect();
            if self
                .cfg
                .is_quorum(&counted, &|m| restarted.contains(&m) || coming(m))
                && crate::restart::unrestored_shard(view, &holders).is_none()
            {
                // Absent members only: a member restarting an older view behind a promise
                // may still catch up, and counted out as an outsider it would be out until it
                // did, failed meanwhile for the cut-off check (s28, ninetieth part of
                // `docs/MEMBERSHIP.md`).
                self.suspect_absent(view, false)?;
            }
            return Ok(());
        }
        if let Some(why) = self.short_of_adopted_for_good(view) {
            return Err(self.stop(why, out));
        }
        // Nor without a member of every shard holding its state: a shard's messages are only in
        // its members' logs, and a member whose transfer never completed has none to replay
        // (it would wait in the restart view for a transfer nobody can serve).
        let holders: Vec<NodeId> = (restarted.iter().copied())
            .filter(|&m| {
                self.sst
                    .row_of(m)
                    .is_some_and(|r| self.restarts_holding_state(r, view.id))
            })
            .collect();
        let unrestored = crate::restart::unrestored_shard(view, &holders);
        if let Some(r) = &mut self.restart
            && r.unrestored != unrestored
        {
            if let Some(why) = &unrestored {
                tracing::warn!(me = %self.me, %why, "membership: restart waits for a member of every shard");
            }
            r.unrestored = unrestored.clone();
        }
        if unrestored.is_some() {
            return Ok(());
        }
        // Every shard has a restarted member: the members of the view whose links never came up
        // may be counted as not restarted (after the timeout).
        if self.suspect_absent(view, true)? {
            return Ok(()); // the next round goes on without them
        }
        let Some(&leader) = alive.first() else {
            return Ok(());
        };
        let leader_rank = view.rank_of(leader).unwrap_or(0) as u64;
        let leader_row = self.sst.row_of(leader).unwrap_or(0);
        let promised = self.restart.as_ref().map_or(0, |r| r.promised);
        if leader == self.me {
            // The highest ballot any visible row promised or decided under, less the promises
            // of the members this restart counted out (`RestartState::outsiders`; s28,
            // eighty-fourth part of `docs/MEMBERSHIP.md`, item 1). Such a member may lead
            // ballots of its own (at it, it is `alive.first()`), and chasing them kept this
            // ballot from committing. Its promise binds only its own acknowledgements, which
            // this leader never counts; the ranks keep the ballots distinct; and a ballot that
            // decides is acknowledged by a majority, which meets the members counted here.
            // Decisions are read from every row: this ballot stays above every decision
            // visible, so a later restart's adoption (the highest-ranked) finds its own.
            // Since s29 (ninety-second part) such a member is taken back in the round that
            // shows it restarting `view` with logged counts (`take_back_outsiders`, above), so
            // this leaves out only a proposal block for `view` read from a counted-out row
            // that does not (yet) show that.
            let outsiders = self.restart.as_ref().map(|r| r.outsiders.clone());
            let counted_out = |r: usize| {
                (outsiders.as_ref())
                    .is_some_and(|o| o.iter().any(|&n| self.sst.row_of(n) == Some(r)))
            };
            let seen = (0..self.sst.rows())
                .filter(|&r| r != self.sst.my_row())
                .flat_map(|r| {
                    [
                        (!counted_out(r))
                            .then(|| self.proposal_of(r, view.id).map(|t| t.rank))
                            .flatten(),
                        self.decision_of(r, view.id).map(|t| t.rank),
                    ]
                })
                .flatten()
                .chain([promised])
                .max()
                .unwrap_or(0);
            let current = self.restart.as_ref().and_then(|r| r.ballot);
            let ballot = match current {
                Some(b) if b >= seen => b,
                _ => {
                    let b =
                        crate::restart::ballot(crate::restart::attempt_of(seen) + 1, leader_rank);
                    self.log.append(&Record::Promised {
                        view: view.id,
                        rank: b,
                    })?;
                    if let Some(r) = &mut self.restart {
                        r.ballot = Some(b);
                        r.promised = b;
                    }
                    tracing::info!(me = %self.me, view = view.id, ballot = b, "membership: leading the restart");
                    b
                }
            };
            self.lead(view, &alive, ballot, true)?;
        } else if let Some(p) = self.proposal_of(leader_row, view.id) {
            let b = p.rank;
            if crate::restart::attempt_of(b) > 0
                && crate::restart::rank_of(b) == leader_rank
                && b >= promised
            {
                if b > promised {
                    self.log.append(&Record::Promised {
                        view: view.id,
                        rank: b,
                    })?;
                    if let Some(r) = &mut self.restart {
                        r.promised = b;
                    }
                }
                // Also a ballot promised before this process (its leader's process may still
                // decide it, with this acknowledgement).
                if let Some(r) = &mut self.restart
                    && !r.ballots.contains(&b)
                {
                    r.ballots.push(b);
                }
                self.follow(view, leader_row, b)?;
            }
        }
        self.try_install(view, &alive, out)
    }

    /// Restart mode, and the group went on without this member (its log ends at `last`, a peer
    /// is at `newer`, which does not contain it): it leaves restart mode and asks to join as a
    /// new member, taking its state by transfer like any joiner. Only views after `newer` can
    /// admit it (older view blocks naming it are stale), and `newer` itself if the decision
    /// that led to it admitted this node as a joiner (s21, see `follow_as_outsider`).
    ///
    /// A member whose leave is pending (resumed from its log, or asked in restart mode) does
    /// not join again: the group runs without it, which is what its application asked. It
    /// stops with [`StopReason::Left`] naming the later of `last` and `newer` (s26 follow-up,
    /// sixty-ninth part of `docs/MEMBERSHIP.md`).
    fn rejoin(&mut self, last: u64, newer: u64, out: &mut Vec<GmsEvent>) -> Result<(), GmsError> {
        self.view = None;
        self.restart = None;
        self.wedged = None;
        self.proposal = None;
        self.decision = None;
        self.decided_holders = None;
        self.decided_expect.clear();
        if let Some(asked_in) = self.leave_resumes.take().or(self.leave_asked) {
            tracing::info!(
                me = %self.me, view = last, newer, asked_in,
                "membership: restart: the group went on without this member, which asked to leave: it stops as left, not joining again"
            );
            self.leave_asked = Some(asked_in);
            self.stop(
                StopReason::Left {
                    view: newer.max(last),
                },
                out,
            );
            self.report_leave();
            return Ok(());
        }
        tracing::warn!(
            me = %self.me, view = last, newer,
            "membership: restart: the group went on without this member; joining again (state by transfer)"
        );
        self.rejoined = Some((last, newer));
        self.request_join()
    }

    /// Co-suspicion ([`GmsConfig::hosts`]; `docs/MEMBERSHIP.md`, forty-seventh part): a process
    /// fails as a whole, so once this member suspects a member of its view, it suspects every
    /// co-host of it in the view too, in this poll, before the round reads the suspicions: the
    /// leader proposes the failure of the whole host in one change set and one view change
    /// removes it. Run twice per poll: after the table's own detection, and after
    /// `settle_expected` and `settle_absent`, whose suspicions the round reads too. The
    /// suspicion is the table's own ([`Sst::suspect`]: published, the links cut), so every
    /// member learns it by gossip even where its own detector saw only one member of the host
    /// fail. A co-host whose row the table already suspects is left as it is.
    ///
    /// Not spread: the suspicion of a member that asked to leave (its leave is its own, whether
    /// it leaves gracefully or dies on the way; its co-hosts are removed on their own
    /// detection), of a node outside the view, and any suspicion in restart mode (the restart
    /// counts each member's log; a host that did not restart is absent as a whole anyway).
    fn co_suspect(&mut self) -> Result<(), GmsError> {
        if self.cfg.hosts.is_empty() || self.restart.is_some() {
            return Ok(());
        }
        let Some(view) = &self.view else {
            return Ok(());
        };
        let mut more: Vec<(NodeId, NodeId)> = Vec::new();
        for &m in &view.members {
            let Some(row) = self.sst.row_of(m) else {
                continue;
            };
            if m == self.me || !self.suspects(m) || self.sst.get(row, self.f.leave) != 0 {
                continue;
            }
            for c in self.cfg.co_hosts(m) {
                // A row the table already suspects is skipped: `Sst::suspect` would do nothing,
                // and a row waiting for an expected incarnation (suspected in the table, not
                // counted failed) is a newer process that `settle_expected` bounds itself.
                let suspected = (self.sst.row_of(c)).is_none_or(|r| self.sst.is_suspected(r));
                if c != self.me
                    && view.contains(c)
                    && !suspected
                    && !more.iter().any(|&(d, _)| d == c)
                {
                    more.push((c, m));
                }
            }
        }
        for (c, m) in more {
            tracing::warn!(me = %self.me, node = %c, co_host = %m, "membership: suspecting a member whose co-host is suspected (its process failed)");
            self.sst.suspect(c)?;
        }
        Ok(())
    }

    /// Restart mode, a majority of `view` restarted (or, s28, restarted together with suspected
    /// members whose new incarnation is pending and not refused readmission: their readmission
    /// waits for this count-out): the table never suspects a member whose link never came up
    /// (*absent*), so a restart would wait for it forever. After
    /// [`GmsConfig::restart_absent_timeout`] counted from the first round with that majority,
    /// each absent member of `view` counts as not restarted: it is suspected (logged at `warn`
    /// with who), and the inspector proposes its removal like any member that did not restart.
    /// Safety does not rest on this: the restart still needs a majority of `view`'s logs.
    /// After [`GmsConfig::suspicion_timeout`], a linked member that is not restarting (see
    /// [`outsider_in_restart`](Gms::outsider_in_restart)) counts as not restarted too, but
    /// it is *not* suspected in the table (its link is not cut): it is listed in the restart
    /// state, which [`suspects`](Gms::suspects) reads until the restart completes (or until
    /// it restarts `view` with logged counts: [`take_back_outsiders`](Gms::take_back_outsiders)),
    /// so that it can see the restarted group and join it in this process (its log held
    /// nothing, or ended before `view` and it asked to join again, so it has nothing to
    /// restart `view` from; see [`follow_as_outsider`](Gms::follow_as_outsider)), or it
    /// restarts an older view and did not catch up into `view` (it joins again once the
    /// restart is installed).
    /// Returns whether it counted anyone out.
    ///
    /// `restarted`: a majority of `view` restarted. Without it (a majority only with members
    /// coming) only absent members are counted out, and the outsiders' clock does not start:
    /// an outsider counted out stays out until it restarts `view` with logged counts (the
    /// restart state's list; failed meanwhile for the cut-off check), and a member
    /// restarting an older view behind a promise may still catch up once the coming member
    /// is readmitted, or the coming member may die and the others go on with it (s28,
    /// ninetieth part of `docs/MEMBERSHIP.md`).
    fn suspect_absent(&mut self, view: &View, restarted: bool) -> Result<bool, GmsError> {
        let now = self.sst.now();
        let Some(r) = self.restart.as_mut() else {
            return Ok(false);
        };
        let absent_since = *r.absent_since.get_or_insert(now);
        let quorum_since = restarted.then(|| *r.quorum_since.get_or_insert(now));
        let waited = now.saturating_since(absent_since);
        let absent_too = waited >= self.cfg.restart_absent_timeout;
        let quorum_waited = quorum_since.map(|q| now.saturating_since(q));
        let outsiders_too = quorum_waited.is_some_and(|w| w >= self.cfg.suspicion_timeout);
        let (mut absent, mut outsiders) = (Vec::new(), Vec::new());
        for m in view.members.iter().copied() {
            let Some(r) = self.sst.row_of(m) else {
                continue;
            };
            if m == self.me || self.suspects(m) {
                continue;
            }
            if self.sst.is_absent(r) {
                if absent_too {
                    absent.push(m);
                }
            } else if outsiders_too && self.outsider_in_restart(r, view) {
                outsiders.push(m);
            }
        }
        if absent.is_empty() && outsiders.is_empty() {
            return Ok(false);
        }
        if !absent.is_empty() {
            tracing::warn!(
                me = %self.me, view = view.id, ?absent, waited_ms = waited.as_millis() as u64,
                "membership: restart: members of the last view never connected; counting them as not restarted"
            );
        }
        if !outsiders.is_empty() {
            tracing::warn!(
                me = %self.me, view = view.id, ?outsiders,
                waited_ms = quorum_waited.map_or(0, |w| w.as_millis() as u64),
                "membership: restart: members of the last view are connected but not restarting from a log that holds it (their logs hold no view, or they ask to join again: they are outsiders); counting them as not restarted"
            );
        }
        for m in absent {
            self.sst.suspect(m)?;
        }
        if let Some(r) = &mut self.restart {
            r.outsiders.extend(outsiders);
        }
        Ok(true)
    }

    /// Restart mode at `view`: takes back the outsiders this restart counted out
    /// ([`RestartState::outsiders`]) whose rows now show them restarting at `view` (its number
    /// and its member list) with logged counts for it, not asking to join, as a member that
    /// restarted from a log holding `view` shows itself (s29, ninety-second part of
    /// `docs/MEMBERSHIP.md`, and its "s29 follow-up: review findings"): typically a member restarting an older view
    /// behind a promise that caught up into `view` once the promised ballot was shown dead. From
    /// this round on it counts as restarted and alive, and it may lead (`alive.first()`).
    ///
    /// Without it, each member kept the outsiders its own clock had counted out, and members
    /// whose clocks ran at other times disagreed for good: a member that counted such a member
    /// out led its own ballots without it, while one that had not (its clock started later,
    /// after the member caught up) followed that member's ballots as its leader. Each leader
    /// waited for the other's followers and moved above the ballot it read in their proposal
    /// blocks, and the restart dueled without end. With the take-back the outsider sets are a
    /// function of the members' rows once these settle: a member not restarting `view` with
    /// logged counts is counted out by every restarted member's clock, and one that is, by
    /// none (or taken back), so every member picks the same leader.
    ///
    /// Safety does not rest on the outsider set: each ballot still commits only on the
    /// acknowledgements of every member this leader counts alive, a majority of `view`, each
    /// given at or above that member's logged promise; a member taken back counts only with
    /// its own row's acknowledgement, and the leader's `seen` reads its proposal block again.
    fn take_back_outsiders(&mut self, view: &View) {
        let Some(r) = self.restart.as_ref() else {
            return;
        };
        let back: Vec<NodeId> = (r.outsiders.iter().copied())
            .filter(|&n| {
                (self.sst.row_of(n)).is_some_and(|row| {
                    // The wedge block first: the view block read after it is at least as new, so
                    // a member that went on past `view` since does not show restarting at it.
                    // The `join` word last: a member that leaves restart mode to join again sets
                    // only that word, after its blocks, so a `join` read before them could be
                    // older than they are.
                    !self.sst.is_suspected(row)
                        && !self.unheard(row)
                        && self.received_of(row, view.id).is_some()
                        && (self.read_block(row, self.f.view)).is_some_and(|p| {
                            p.first() == Some(&(view.id + 1))
                                && self.restarting_in(&p)
                                && self
                                    .decode_view(row, &p)
                                    .is_some_and(|v| v.members == view.members)
                        })
                        && !self.asks_to_join(row)
                })
            })
            .collect();
        if back.is_empty() {
            return;
        }
        tracing::info!(
            me = %self.me, view = view.id, ?back,
            "membership: restart: members counted out as outsiders now restart the view with logged counts; counting them again"
        );
        if let Some(r) = &mut self.restart {
            r.outsiders.retain(|n| !back.contains(n));
        }
    }

    /// Restart mode at `view`: whether the connected member of `row` is not restarting at all
    /// — it publishes no logged counts for `view`, and either its view block does not say
    /// restarting (it has none: its log held no view, e.g. a joiner that never logged the view
    /// that admitted it, so it came back as an idle outsider) or it
    /// [asks to join](Gms::asks_to_join) (it left restart mode for good in this process; the
    /// `join` word is read last, after the blocks).
    ///
    /// A member that restarted `view` and then left restart mode ([`rejoin`](Gms::rejoin))
    /// keeps its wedge block for `view`, so it is not counted out here (s29, "s29 follow-up:
    /// review findings" of the ninety-second part of `docs/MEMBERSHIP.md`: counting it out
    /// made a member that held this restart's decision stop with
    /// [`StopReason::RestartCutOff`] instead of installing it; left open).
    ///
    /// A node restarting from a log writes its restarting view block at construction, before
    /// its first heartbeat, and one writer's writes land in order: its heartbeat pushes follow
    /// the construction-time pushes, and a whole-row push (a late link, a readmission) posts
    /// the heartbeat after the view and wedge blocks and the `join` word ([`guards`]; s27). So
    /// a linked peer whose heartbeat landed without such a block (and still, a suspicion
    /// timeout into the wait) is not restarting: in this process it can neither restart `view`
    /// nor follow a restarting view (outsiders skip restarting blocks), and the restart would
    /// wait for its acknowledgement forever.
    ///
    /// Also a member whose view block says restarting at a view *before* `view` (s27, "the
    /// second hang" of the seventy-fifth part of `docs/MEMBERSHIP.md`): it can take part only
    /// by catching up into `view`, and it catches up in the round it reads a peer publishing
    /// `view` with the decision that installed it. A suspicion timeout into the wait it has
    /// not: no restarted member of `view` publishes that decision (each holds a decision for
    /// `view` itself, or joined in `view` and logged none), or it does not trust the one it
    /// reads (a promise above it, `below_promise`). Counted out, it is treated as a member that
    /// never started: the restart still needs a majority of `view`'s logs, and the member,
    /// reading the view the restart installs (two views ahead of its own), joins again.
    ///
    /// Also a member restarting exactly one view *ahead* whose row this member skips as a
    /// catch-up source: [`dead_ahead`](Gms::dead_ahead) (its `view + 1` is a dead branch) or
    /// [`below_promise`](Gms::below_promise) (it may be) (s28, hang C of the eighty-ninth part
    /// of `docs/MEMBERSHIP.md`). It waits at `view + 1` for members restarting `view`, and this
    /// restart waited for its acknowledgement: for good. Counted out, it is treated as a member
    /// that is down, which is what the restart does when it is: the restart still needs a
    /// majority of `view`'s logs, it fits the member out of the view it installs (so that view
    /// differs from the member's `view + 1`), and a catch-up from the member's row stays
    /// possible (the scan reads rows the table does not suspect). The member learns its branch
    /// is dead when it reads the installed view under its number without it
    /// ([`superseded_by`](Gms::superseded_by)) and joins again.
    fn outsider_in_restart(&self, row: usize, view: &View) -> bool {
        // Its heartbeat landed, so whatever it wrote at construction landed before it: in a
        // whole-row push the heartbeat is a later write than the view and wedge blocks and the
        // `join` word (`guards`), not one write with them (s27). Not so for a readmitted
        // incarnation whose own words have not landed: the heartbeat is the old incarnation's.
        !self.unheard(row)
            && self.sst.get(row, self.sst.schema().heartbeat()) > 0
            && self.received_of(row, view.id).is_none()
            && ((self.read_block(row, self.f.view)).is_none_or(|p| {
                !self.restarting_in(&p)
                    || p[0] <= view.id
                    || (p[0] == view.id + 2
                        && (self.dead_ahead(row, view, view.id + 1)
                            || self.below_promise(row, view, view.id + 1)))
            }) || self.asks_to_join(row))
    }

    /// Whether the member of `row` asks to join ([`Fields::join`]). A node sets that word only
    /// outside restart mode — a joiner, an idle outsider whose log held nothing, or a member
    /// whose restart found the group gone on without it ([`rejoin`](Gms::rejoin)) — and from
    /// then on in its process it installs only a *running* view that names it (see
    /// [`follow_as_outsider`](Gms::follow_as_outsider)), never restarts one. Its view block may
    /// still say restarting at the view its log ended at (s22, `docs/MEMBERSHIP.md`,
    /// thirty-third part: a restart waited for good for a joiner that view named).
    fn asks_to_join(&self, row: usize) -> bool {
        self.sst.get(row, self.f.join) != 0
    }

    /// Restart mode: whether an unsuspected peer publishes a view after `view` (a joiner's
    /// root aside, see [`joiner_root`](Gms::joiner_root)).
    fn peer_ahead(&self, view: &View) -> bool {
        (0..self.sst.rows())
            .filter(|&r| r != self.sst.my_row() && !self.sst.is_suspected(r))
            .filter_map(|r| self.read_block(r, self.f.view).map(|p| (r, p)))
            .any(|(r, p)| {
                let vid = p[0].saturating_sub(1);
                vid > view.id && !self.joiner_root(r, view, vid) && !self.dead_ahead(r, view, vid)
            })
    }

    /// Restart mode at `view`: whether `row` publishes `view + 1` installed with a decision for
    /// `view` that ranks below the one this member's log held for `view` and makes another
    /// next view. That peer is on a dead branch (s23, forty-second part of
    /// `docs/MEMBERSHIP.md`): the logged decision was decided later, by a restart of `view`
    /// that adopted the peer's decision, fitted to the members that restarted (the peer, one
    /// view ahead, was not among them, or the restart would have caught up from it), so the
    /// number `view + 1` was installed again without the peer. Neither caught up from nor
    /// waited for; the peer joins again once it sees that view
    /// ([`superseded_by`](Gms::superseded_by)). A lower-ranked decision making the *same* next
    /// view is not evidence: a later leader that adopted it decided the same view under its
    /// own rank, and the peer installed it.
    ///
    /// This member's decision is the higher-ranked of the one its log held when it was built
    /// and the one it holds now ([`decision`](Gms::decision): a restart ballot's, led or
    /// followed in this process, logged before it was published). That is the decision its
    /// log holds now, which a new process of it would take (s28, hang C of the eighty-ninth
    /// part of `docs/MEMBERSHIP.md`): without it, members that followed a ballot fitting such
    /// a peer out saw the peer as a peer ahead ([`peer_ahead`](Gms::peer_ahead)) and never
    /// installed, while they did not catch up from it either (`below_promise`).
    fn dead_ahead(&self, row: usize, view: &View, vid: u64) -> bool {
        let Some(mine) = self.decision_held_for(view) else {
            return false;
        };
        vid == view.id + 1
            && self.decision_of(row, view.id).is_some_and(|t| {
                t.rank < mine.rank
                    && crate::change::next_members(&t.changes, &view.members)
                        != mine.next_members(&view.members)
            })
    }

    /// Restart mode at `view`: this member's decision for `view`, the one
    /// [`dead_ahead`](Gms::dead_ahead) compares with: the higher-ranked of the decision its
    /// log held for `view` when it was built ([`RestartState::logged`]) and the one it holds
    /// now ([`decision`](Gms::decision), for `view`).
    fn decision_held_for(&self, view: &View) -> Option<&Decision> {
        let held = (self.decision.as_ref()).filter(|d| d.trim.view == view.id);
        let logged = self.restart.as_ref().and_then(|r| r.logged.as_ref());
        held.into_iter().chain(logged).max_by_key(|d| d.rank)
    }

    /// Restart mode at `view`: the members of the next view `N` of this member's decision for
    /// `view` ([`decision_held_for`](Gms::decision_held_for)) that show `N` dead, if they do
    /// (s29, ninety-fifth part of `docs/MEMBERSHIP.md`). A member of `N` counts when its row,
    /// unsuspected, is one [`dead_ahead`](Gms::dead_ahead) skips and its view block says it
    /// *runs* `view + 1` (not restarting, not asking to join, not a view that lost a shard)
    /// with other members than `N`. `N` is dead when the members of `N` not so shown are no
    /// quorum of `N`.
    ///
    /// Why it is dead: such a member logged that other `view + 1` before it published it, and
    /// it never installs `N` afterwards. Its later processes restart at its last view, at or
    /// after that `view + 1` (a step back passes only over a lost view, which ran nowhere), and
    /// a rejoin of it installs only running views after the one its log ended at. So `N` never
    /// has every member installed (nothing is delivered in it: that needs every member's
    /// `Installed`) nor a quorum of `N` at `N` (no view change from it). Waiting for `N`, or
    /// restarting `view` towards it, has no end, and the peers' `view + 1` is not a catch-up
    /// source for this log (`dead_ahead`: this member's decision came from another run of
    /// `view`). The member joins again instead.
    ///
    /// It never fires where `dead_ahead` skips a peer on a dead branch (the forty-second
    /// part): there this member's decision is a restart's fitting of the peer's decision, and
    /// every member of its next view restarted at `view` under that restart; none of them
    /// catches up into the peer's `view + 1` (`dead_ahead`, or
    /// [`below_promise`](Gms::below_promise) for one that holds only the promise), so no
    /// quorum of them runs it.
    fn next_view_dead(&self, view: &View) -> Option<Vec<NodeId>> {
        let next = self.decision_held_for(view)?.next_members(&view.members);
        let other =
            |v: &View| v.members.len() != next.len() || v.members.iter().any(|m| !next.contains(m));
        let gone: Vec<NodeId> = (0..self.sst.rows())
            .filter(|&r| r != self.sst.my_row() && !self.sst.is_suspected(r))
            .filter_map(|r| {
                let node = *self.cfg.universe.get(r)?;
                if !next.contains(&node)
                    || self.asks_to_join(r)
                    || !self.dead_ahead(r, view, view.id + 1)
                {
                    return None;
                }
                let p = self.read_block(r, self.f.view)?;
                let runs = p.first() == Some(&(view.id + 2))
                    && !self.restarting_in(&p)
                    && !self.lost_view(r, &p);
                (runs && self.decode_view(r, &p).is_some_and(|v| other(&v))).then_some(node)
            })
            .collect();
        let dead = !gone.is_empty() && !self.cfg.is_quorum(&next, &|m| !gone.contains(&m));
        dead.then_some(gone)
    }

    /// Restart mode at `view`: whether `row` runs `view + 1` (not restarting it) installed with
    /// a decision for `view` ranked below the one this member holds, with the same changes and
    /// trim (and the same holders where both are known). The peer's `view + 1` is then the view
    /// this member's own decision installs, so it catches up from it although the peer's
    /// decision is below its promise ([`below_promise`](Gms::below_promise)): its own decision
    /// is echoed by nobody once the others run `view + 1` (s30, ninety-ninth part of
    /// `docs/MEMBERSHIP.md`: a restart leader crashed holding its decision, its next process
    /// decided a later ballot with the same value, and the followers installed the first
    /// decision).
    fn holds_same_above(&self, row: usize, view: &View, p: &[u64]) -> bool {
        let Some(mine) = self.decision.as_ref().filter(|d| d.trim.view == view.id) else {
            return false;
        };
        let Some(t) = self.decision_of(row, view.id) else {
            return false;
        };
        p.first() == Some(&(view.id + 2))
            && !self.restarting_in(p)
            && t.rank < mine.rank
            && t.changes == mine.changes
            && mine.trim.counts.len() <= t.trim.len()
            && (mine.trim.counts.iter())
                .zip(&t.trim)
                .all(|(c, n)| c.1 == *n)
            && match (&self.decided_holders, &t.holders) {
                // The holders place the next view's shards: they must agree where both are known.
                (Some(a), Some(b)) => holder_ids(view, a) == holder_ids(view, b),
                _ => true,
            }
    }

    /// Restart mode at `view`: whether `row` publishes `view + 1` installed with a decision for
    /// `view` that ranks below the restart ballot this member promised for `view`, while this
    /// member cannot yet rule out a decision for `view` ranked above the peer's
    /// ([`promise_cleared`](Gms::promise_cleared)). Such a peer is neither caught up from
    /// nor counted as ahead (this member stays restarting at `view`, and stops with
    /// [`StopReason::RestartCutOff`] if it is cut off from a majority of `view`).
    ///
    /// Why (s25, sixty-fifth part of `docs/MEMBERSHIP.md`): the promise says a restart of
    /// `view` ran under that ballot. If it decided, it adopted the peer's decision and may
    /// have fitted it into another `view + 1` (the peer's is then a dead branch), and a member
    /// that lost that decision but kept the promise cannot tell the two `view + 1`s apart
    /// from the peer's row alone: catching up into the peer's would let it restart the dead
    /// view with the dead members.
    fn below_promise(&self, row: usize, view: &View, vid: u64) -> bool {
        let promised = self.restart.as_ref().map_or(0, |r| r.promised);
        vid == view.id + 1
            && self
                .decision_of(row, view.id)
                .is_some_and(|t| t.rank < promised && !self.promise_cleared(view, t.rank))
    }

    /// Restart mode at `view`, holding a promise for it above `peer`, the rank of the
    /// decision a peer one view ahead installed `view + 1` with: whether this member has read
    /// the decision blocks of a majority of `view` (its own log counted) and none shows a
    /// decision for `view` ranked above `peer`. A decision under a later ballot that any member
    /// acted on was logged by every member its inspector counted, a majority of `view`, and
    /// each of them publishes it (or a higher one) while restarting at `view` or the one it
    /// installed `view + 1` with, so such a read sees it.
    ///
    /// The bound is the peer's rank, not this member's promise (s25, "At the s25 merge" of the
    /// sixty-fifth part of `docs/MEMBERSHIP.md`, item 1): a member that promised a later
    /// ballot that never decided holds a promise above every decision, including the one a
    /// restart under an earlier ballot fitted and installed; that decision still ranks above
    /// the peer's and shows the peer's `view + 1` dead.
    ///
    /// A row counts as read once it is wedged in `view` (its wedge block for `view` is there:
    /// a restarting member writes that after the decision block it publishes when it starts,
    /// and one writer's blocks land in order; a whole-row push posts the wedge and view blocks
    /// in a later write than the decision block, [`guards`], s27) or it publishes `view + 1`
    /// and the decision for
    /// `view` it installed that with, unless that `view + 1` lost a shard
    /// ([`lost_view`](Gms::lost_view): the member's next process restarts `view` again). A
    /// row one view ahead that publishes a decision for `view + 1` instead does not count.
    ///
    /// A row read is not a promise (s27, seventy-second part): a row read wedged with nothing
    /// above `peer` may log and echo a higher-ranked decision right after the read, under a
    /// ballot this member promised itself. So it does not clear while such a ballot may still
    /// be decided ([`ballot_may_decide`](Gms::ballot_may_decide)), nor once it holds a decision
    /// for `view` ranked above `peer` in this process (`self.decision`: the one its log held
    /// when it was built, or a higher one it led or followed since; it only rises).
    fn promise_cleared(&self, view: &View, peer: u64) -> bool {
        if (self.decision.iter()).any(|d| d.trim.view == view.id && d.rank > peer)
            || self.ballot_may_decide(view, peer).is_some()
        {
            return false;
        }
        let mut read = vec![self.me];
        for &m in &view.members {
            let Some(row) = self.sst.row_of(m) else {
                continue;
            };
            if m == self.me || self.sst.is_suspected(row) {
                continue;
            }
            let decided = self.decision_of(row, view.id);
            if decided.as_ref().is_some_and(|t| t.rank > peer) {
                return false;
            }
            let ahead = (self.read_block(row, self.f.view)).is_some_and(|p| {
                p.first() == Some(&(view.id + 2)) && decided.is_some() && !self.lost_view(row, &p)
            });
            if ahead || self.received_of(row, view.id).is_some() {
                read.push(m);
            }
        }
        self.cfg.is_quorum(&view.members, &|m| read.contains(&m))
    }

    /// Restart mode at `view`: a restart ballot for `view` that this member followed in this
    /// process ([`RestartState::ballots`]; each is led by another member), ranked above `peer`,
    /// whose decision may still be installed, if there is one. Such a ballot is shown dead
    /// (s27, seventy-second part of `docs/MEMBERSHIP.md`) when any holds:
    ///
    /// - its leader's row, unsuspected, publishes `view + 1` installed with a decision for
    ///   `view` ranked below the ballot: the leader left `view` without deciding it (a member
    ///   holding a decision never clears against a lower-ranked one, see
    ///   [`promise_cleared`](Gms::promise_cleared)), and only a ballot's leader decides it, in
    ///   the process that led it;
    /// - its leader's row, unsuspected, asks to join ([`asks_to_join`](Gms::asks_to_join)),
    ///   its view block still at `view`, and shows no decision for `view` ranked at or above the
    ///   ballot (s27 follow-up, seventy-fifth part, "two hangs behind an old promise"). Its
    ///   process left restart mode for good: it never leads nor decides a restart ballot again.
    ///   A process that decided the ballot logged and published that decision first, and its
    ///   decision block at `view` only rises while its view block stays there; a later process
    ///   re-publishes a decision its log holds. So no process of the leader published the
    ///   decision, and none will: nobody can echo it. (A new process re-publishes its log's
    ///   promise as a proposal, which members behind follow, but picks a fresh ballot to lead.)
    /// - the members shown never to echo the ballot's decision
    ///   ([`never_echo`](Gms::never_echo)) are a majority of `view` (the review's finding 1 of
    ///   the seventy-second part, "s27 follow-up"): the first member to install a ballot's
    ///   decision saw the echo of every member it counted, a majority of `view`, and two
    ///   majorities meet. Without it a leader lost after its followers acknowledged (crashed,
    ///   so suspected for good) kept them from catching up for good.
    ///
    /// A decided ballot that installed shows its decision, above `peer`, in the rows of a
    /// majority, which `promise_cleared` reads.
    fn ballot_may_decide(&self, view: &View, peer: u64) -> Option<u64> {
        let r = self.restart.as_ref()?;
        r.ballots.iter().copied().find(|&b| {
            if b <= peer || crate::restart::attempt_of(b) == 0 {
                return false;
            }
            let rank = crate::restart::rank_of(b);
            let left = (view.members.get(rank as usize))
                .and_then(|&m| self.sst.row_of(m))
                .filter(|&row| !self.sst.is_suspected(row))
                .is_some_and(|row| {
                    // The `join` word first: it is a later write than the decision block (a
                    // process publishes the decisions it holds before it asks to join), so a
                    // read of the word set shows a decision block at least as new as that.
                    let joins = self.asks_to_join(row);
                    let at = self
                        .read_block(row, self.f.view)
                        .and_then(|p| p.first().copied());
                    let decided = self.decision_of(row, view.id).map(|t| t.rank);
                    let ahead_below = at == Some(view.id + 2) && decided.is_some_and(|d| d < b);
                    let gave_up = joins && at == Some(view.id + 1) && decided.is_none_or(|d| d < b);
                    ahead_below || gave_up
                });
            let never = self.never_echo(view, b);
            !left && !self.cfg.is_quorum(&view.members, &|m| never.contains(&m))
        })
    }

    /// Restart mode at `view`: the members shown never to echo the decision of ballot `b` for
    /// `view` (publish it in their decision block while at `view`, as an installer needs):
    ///
    /// - this member, if it promised a ballot above `b` and holds no decision for `view`
    ///   ranked `b` or above;
    /// - an unsuspected peer restarting and wedged in `view` whose proposal block shows a
    ///   ballot above `b` and whose decision block shows no decision for `view` ranked `b` or
    ///   above. Its wedge block makes both blocks current as of its construction (see
    ///   [`read_for`](Gms::read_for)), and in its process it logs and publishes a decision
    ///   before it acknowledges a later ballot, so a decision ranked `b` that it echoed before
    ///   that promise is in the block read;
    /// - an unsuspected peer publishing `view + 1` installed with a decision for `view` ranked
    ///   below `b`: it never held `b`'s decision (holding it, it would not have caught up
    ///   below it, and a later process restarts from its log, which holds it), and it is no
    ///   longer at `view`. Not a row whose `view + 1` lost a shard
    ///   ([`lost_view`](Gms::lost_view)): that member's next process restarts `view` again.
    ///
    /// A member that promised above `b` never echoes `b`'s decision afterwards: it follows only
    /// a ballot at or above its promise (`restart_round`), a later process restores the promise
    /// from its log, [`follow`](Gms::follow) echoes only the decision of the ballot followed,
    /// and [`lead`](Gms::lead) decides only the leader's own ballot, which is above its promise.
    fn never_echo(&self, view: &View, b: u64) -> Vec<NodeId> {
        let promised = self.restart.as_ref().map_or(0, |r| r.promised);
        let held = (self.decision.as_ref()).is_some_and(|d| d.trim.view == view.id && d.rank >= b);
        let mut never = Vec::new();
        if promised > b && !held {
            never.push(self.me);
        }
        for &m in &view.members {
            let Some(row) = self.sst.row_of(m) else {
                continue;
            };
            if m == self.me || self.sst.is_suspected(row) {
                continue;
            }
            let Some(p) = self.read_block(row, self.f.view) else {
                continue;
            };
            // The proposal block before the decision block: the argument is that the read that
            // showed the promise showed any decision echoed before it too (the member logs and
            // publishes a decision before it acknowledges a later ballot).
            let proposed = self.proposal_of(row, view.id).map(|t| t.rank);
            let decided = self.decision_of(row, view.id).map(|t| t.rank);
            let restarting = p.first() == Some(&(view.id + 1))
                && self.restarting_in(&p)
                && self.received_of(row, view.id).is_some();
            let promised_above =
                restarting && proposed.is_some_and(|t| t > b) && decided.is_none_or(|d| d < b);
            let ahead_below = p.first() == Some(&(view.id + 2))
                && decided.is_some_and(|d| d < b)
                && !self.lost_view(row, &p);
            if promised_above || ahead_below {
                never.push(m);
            }
        }
        never
    }

    /// Restart mode at `view`: notes the followed ballot `blocked` that keeps this member from
    /// catching up from a peer one view ahead this round
    /// ([`ballot_may_decide`](Gms::ballot_may_decide)), warning once per change: the wait
    /// lasts until the ballot's leader decides or leaves `view`, or a majority of `view` is
    /// shown never to echo its decision (a later ballot promised, or one view ahead below it).
    fn note_blocked(&mut self, view: &View, blocked: Option<u64>) {
        let now = blocked.and_then(|b| {
            let leader = view.members.get(crate::restart::rank_of(b) as usize)?;
            Some((b, *leader))
        });
        if let Some(r) = &mut self.restart
            && r.blocked != now
        {
            if let Some((ballot, leader)) = now {
                tracing::warn!(
                    me = %self.me, view = view.id, ballot, %leader,
                    "membership: restart: not catching up from a peer one view ahead while a restart ballot this member followed may still be decided; waiting for its leader to decide or leave the view, or for a majority of the view to promise a later ballot"
                );
            }
            r.blocked = now;
        }
    }

    /// Restart mode at `view`: whether `row`'s view block `p`, naming `view`'s number, names
    /// another view without this member, while this member's `view` names it — the number
    /// was installed again, without this member, by a restart of the view before in an
    /// earlier life (s23, forty-second part of `docs/MEMBERSHIP.md`): this member's `view` is
    /// a dead branch. Also another view *with* this member whose members all are in `view`:
    /// such a restart only drops members of the view it installs again (it fits the decision
    /// it adopts, `restart_changes`), so of two views under one number the one with fewer
    /// members is the later, and this member's is dead (it caught up into it from a peer
    /// holding only the ballot's promise; s24, forty-eighth part). Not evidence: a node asking
    /// to join (its block may still show the view its own log ended at, see
    /// [`asks_to_join`](Gms::asks_to_join)), nor a view that lost a shard (it ran nowhere,
    /// and a restart of the view before reuses its number,
    /// [`crate::restart::restart_view`]: the lost view is the dead one).
    fn superseded_by(&self, row: usize, view: &View, p: &[u64]) -> bool {
        view.contains(self.me)
            && !self.asks_to_join(row)
            && self.decode_view(row, p).is_some_and(|v| {
                v.members != view.members
                    && (!v.contains(self.me) || v.members.iter().all(|&m| view.contains(m)))
                    && !v.inadequate.as_ref().is_some_and(|w| w.lost)
            })
    }

    /// Whether `row`'s view block `p` names a view that lost a shard
    /// ([`Inadequate::lost`](crate::view::Inadequate::lost)). Such a view ran nowhere, and
    /// the next process of a member that installed it restarts the view *before* it
    /// ([`crate::restart::restart_view`]), where it can still follow a restart ballot and echo
    /// its decision. So a row showing it is no evidence that the member left the view before
    /// for good (s28, eighty-fourth part of `docs/MEMBERSHIP.md`, item 2), as
    /// [`superseded_by`](Gms::superseded_by) already reads it.
    fn lost_view(&self, row: usize, p: &[u64]) -> bool {
        self.decode_view(row, p)
            .is_some_and(|v| v.inadequate.as_ref().is_some_and(|w| w.lost))
    }

    /// Restart mode at `view`: whether `row` publishes `view + 1` but was not a member of
    /// `view` — a joiner admitted by `view`'s decision whose log ends at its first view. Its
    /// log holds no decision for `view` (it logged none: it joined), so nobody can catch up
    /// from it, and it cannot restart the view it joined (its state came by transfer); the
    /// restart of `view` goes on without it, and it joins again once it sees the restart view
    /// running. (A member of `view` one view ahead always logged the decision for `view`.)
    fn joiner_root(&self, row: usize, view: &View, vid: u64) -> bool {
        vid == view.id + 1 && (self.cfg.universe.get(row)).is_some_and(|&n| !view.contains(n))
    }

    /// The members of `view` a majority is counted over: in restart mode, `view`'s members less
    /// its joiners that [never logged it](Gms::never_logged); otherwise all of them.
    fn quorum_members(&self, view: &View) -> Vec<NodeId> {
        let never = self.never_logged(view);
        (view.members.iter().copied())
            .filter(|m| !never.contains(m))
            .collect()
    }

    /// Restart mode at `view`: the joiners of `view` ([`RestartState::joined`]) that show they
    /// never logged it, once every other member of `view` (each a member of the view before)
    /// restarted at it (its logged counts for `view` are here). Such a joiner's row is
    /// unsuspected and heard, its heartbeat landed, it asks to join, it publishes no counts for
    /// `view`, and its view block names no view or a view two or more before `view`: its log
    /// holds no view or ends there (a node logs a view before it publishes it, a node restarting
    /// from a log that holds one writes its view block before its first heartbeat, and a
    /// rejoining node's block is the one its log ended at). Not one view before: a joiner was
    /// no member of the view before, so a log of it ending at that number is another list's (a
    /// dead branch), left alone.
    ///
    /// No view block: a joiner whose log stayed empty (a joiner's log gets its first records
    /// with its first view). Such a node could also be one whose log was lost. Setting it aside
    /// is still safe unless every node that logged a decision for `view` lost its log: every
    /// other member of `view` restarted, so a decision acted on (logged by a majority) is missed
    /// only if that majority is all joiners set aside (s29, ninety-first part of
    /// `docs/MEMBERSHIP.md`).
    ///
    /// The restart of `view` counts its majority over the other members (s27, seventy-fifth
    /// part of `docs/MEMBERSHIP.md`, "s27 follow-up: the first and third hangs"). Why it is
    /// safe, in short: asking to join, the joiner installs only a running view that names it
    /// in this process, and nobody runs `view` any more (every member that could run it first,
    /// a member of the view before, is restarting at it), so it never logs `view` and never
    /// acknowledges or logs a decision for it. A decision for `view` acted on was logged by
    /// more than half of `view` less a set of such members (none, before this rule), each a
    /// member that logged `view`; any two such sets are each more than half of the members
    /// that ever log `view`, so they intersect. Nothing was delivered in `view`: a delivery
    /// needs every member's `Installed` record.
    ///
    /// Once shown, a joiner stays set aside for the rest of this restart
    /// ([`RestartState::aside`]; s28, eighty-fourth part, item 3), though it crash or the
    /// other members' rows stop showing them restarted: the read showed it never logs `view`,
    /// and that stays true. Its later process restarts from its log (two or more views before
    /// `view`) and can come into `view` only by catching up through `view - 1`, which does not
    /// name it (it joined in `view`): there it finds itself removed and joins again.
    fn never_logged(&self, view: &View) -> Vec<NodeId> {
        let Some(r) = &self.restart else {
            return Vec::new();
        };
        // Restarted at `view`: its logged counts, and its view block (read after them, so a
        // block written before them is the one read) says restarting at `view`. Counts for
        // `view` alone are also a running wedge's (a member that ran `view`, or caught up past
        // it): a joiner set aside on such a read would stay aside for good (s28, ninetieth
        // part of `docs/MEMBERSHIP.md`).
        let logged = |m: NodeId| {
            (self.sst.row_of(m)).is_some_and(|row| {
                let me = row == self.sst.my_row();
                (me || !self.sst.is_suspected(row))
                    && self.received_of(row, view.id).is_some()
                    && (me
                        || (self.read_block(row, self.f.view)).is_some_and(|p| {
                            p.first() == Some(&(view.id + 1)) && self.restarting_in(&p)
                        }))
            })
        };
        let old_restarted = (view.members.iter())
            .filter(|m| !r.joined.contains(m))
            .all(|&m| logged(m));
        if r.joined.is_empty() || !old_restarted {
            return r.aside.clone();
        }
        let mut never = r.aside.clone();
        never.extend(
            (r.joined.iter().copied())
                .filter(|j| !r.aside.contains(j))
                .filter(|&j| j != self.me && view.contains(j))
                .filter(|&j| {
                    (self.sst.row_of(j)).is_some_and(|row| {
                        !self.sst.is_suspected(row)
                            && !self.unheard(row)
                            && self.sst.get(row, self.sst.schema().heartbeat()) > 0
                            && self.asks_to_join(row)
                            && self.received_of(row, view.id).is_none()
                            && (self.read_block(row, self.f.view)).is_none_or(|p| p[0] < view.id)
                    })
                }),
        );
        never
    }

    /// `records` (a view's, the first this life logs or a later one) with the
    /// [`Record::Settings`] still unlogged put first ([`Gms::settings_unlogged`]).
    fn with_settings(&mut self, records: Vec<Record>) -> Vec<Record> {
        (self.settings_unlogged.take().into_iter())
            .chain(records)
            .collect()
    }

    /// Logs decision `d` (ending the view before `next`, with `holders`) and the installation
    /// of `next` that it determines, as one batch (one write and sync, s22): the decision
    /// first, so a log that holds `next`'s `Installed` holds the decision too, whatever a crash
    /// keeps of the batch (a prefix of it, see [`Durable::append_all`]).
    fn log_decided_and_installed(
        &mut self,
        d: &Decision,
        holders: Option<&[bool]>,
        next: &View,
    ) -> Result<(), GmsError> {
        let mut records = vec![decided_record(d, holders)];
        records.extend(crate::restart::installed_records(next));
        let records = self.with_settings(records);
        self.log.append_all(&records)?;
        Ok(())
    }

    /// Restart mode: installs `view + 1` with the decision `t` a peer installed it with, and
    /// takes the peer's mode there: if the peer is restarting at `view + 1` (its view block
    /// says so, from the moment it was written), the restart goes on at `view + 1`; if the peer
    /// runs `view + 1`, this member runs it too (its restart is over). The catch-up rule of
    /// `docs/MEMBERSHIP.md` (fifth part) says why this is safe and why every member ends in the
    /// same running view.
    fn catch_up(
        &mut self,
        view: &View,
        t: Tagged,
        peer_restarting: bool,
        theirs: Option<&[NodeId]>,
        out: &mut Vec<GmsEvent>,
    ) -> Result<(), GmsError> {
        let d = Decision {
            rank: t.rank,
            changes: t.changes,
            trim: Trim {
                view: view.id,
                counts: view.members.iter().copied().zip(t.trim).collect(),
            },
        };
        // The holders the peer installed `view + 1` with, if its block names them.
        let holders = t.holders.as_deref().map(|h| holder_ids(view, h));
        let next = View::next_holding(
            view.id + 1,
            d.next_members(&view.members),
            Some(&view.shards),
            holders.as_deref(),
            &self.layout,
        );
        // The view it missed is the one its leave decided (it logged the decision, peers
        // installed the view, then the total shutdown): it left, as `install` says when it
        // installs that view (s26 follow-up, sixty-ninth part of `docs/MEMBERSHIP.md`). A peer
        // view from another branch under this number is left to the check below.
        let left = (d.changes.iter()).any(|c| c.node == self.me && c.kind == ChangeKind::Leave);
        if left && !next.contains(self.me) && theirs.is_none_or(|m| m == next.members.as_slice()) {
            self.log_decided_and_installed(&d, t.holders.as_deref(), &next)?;
            tracing::info!(me = %self.me, view = next.id, members = ?next.members, "membership: restart caught up one view from a peer: the view its leave decided; it left");
            self.view = None;
            self.restart = None;
            self.wedged = None;
            self.proposal = None;
            self.decision = None;
            self.decided_holders = None;
            self.decided_expect.clear();
            self.leave_asked = self.leave_asked.or(self.leave_resumes.take());
            self.stop(StopReason::Left { view: next.id }, out);
            self.report_leave();
            return Ok(());
        }
        if !next.contains(self.me) {
            // The group went on without it (it was removed in the view it missed): it cannot
            // restart from its log; it joins again.
            return self.rejoin(view.id, next.id, out);
        }
        // The peer's `view + 1` is not what the peer's decision makes of this member's `view`:
        // the peer's `view` was another view under the same number (a restart of the view
        // before installed the number again without this member, in an earlier life), and
        // the decision is not one for this member's `view` (s23, forty-second part of
        // `docs/MEMBERSHIP.md`). This log's view is a dead branch: it joins again.
        if theirs.is_some_and(|m| m != next.members.as_slice()) {
            tracing::warn!(me = %self.me, view = view.id, mine = ?next.members, theirs = ?theirs,
                "membership: restart: a peer one view ahead installed that view from another view under this number; joining again");
            return self.rejoin(view.id, next.id, out);
        }
        self.log_decided_and_installed(&d, t.holders.as_deref(), &next)?;
        // The peer runs `view + 1` (it completed this restart, or caught up from one that did):
        // so does this member. The peer restarts at `view + 1` (its log ended there, or it
        // caught up from one whose did): the restart goes on one view later, with it. Not the
        // decision's rank: a promise from an earlier life can equal the rank of a decision that
        // a peer restarting at `view + 1` installed in that life.
        let this_restart = !peer_restarting;
        tracing::info!(me = %self.me, view = next.id, this_restart, "membership: restart caught up one view from a peer");
        self.wedged = None;
        self.proposal = None;
        self.decision = None;
        self.decided_holders = None;
        self.decided_expect.clear();
        self.restart = (!this_restart).then(|| RestartState {
            joined: joiners(&d.changes, &next),
            ..RestartState::default()
        });
        self.view = Some(next.clone());
        self.publish_view_of(&next)?;
        self.publish_decision(&d, t.holders.as_deref())?;
        self.note_gone(&d.changes, next.id, &next.members)?;
        if self.restart.is_none() {
            self.resume_leave(next.id)?;
        }
        out.push(GmsEvent::ViewInstalled {
            view: next,
            trim: Some(d.trim),
        });
        Ok(())
    }

    fn member_round(
        &mut self,
        view: &View,
        epoch: &mut dyn Epoch,
        out: &mut Vec<GmsEvent>,
    ) -> Result<(), GmsError> {
        let alive = self.check_majority(view, out)?;
        self.publish_holds(view, &*epoch)?;
        self.report_leave();
        let Some(&leader) = alive.first() else {
            return Ok(());
        };
        let leader_rank = view.rank_of(leader).unwrap_or(0) as u64;
        let leader_row = self.sst.row_of(leader).unwrap_or(0);
        if self.wedged.is_none() {
            let wanted = leader == self.me && !self.wanted(view, Vec::new()).is_empty();
            // The view and `join` words are read before the wedge block: a member leaving
            // restart mode at `view` (`follow_as_outsider`) clears its wedge block before it
            // writes them, so a reader that sees them say running reads the cleared block; read
            // the other way round, it could see the restart's wedge, then the running view, and
            // take that wedge for a view change for good (s28, ninetieth part).
            let others = alive.iter().any(|&m| {
                let r = self.sst.row_of(m).unwrap_or(0);
                (view.id == 0 || !self.restart_wedge(r)) && self.received_of(r, view.id).is_some()
            });
            let proposed = self.run_proposal_of(leader_row, view).is_some();
            if wanted || others || proposed || alive.len() < view.members.len() {
                self.wedge_in(view, epoch)?;
                tracing::debug!(me = %self.me, view = view.id, "membership: wedged");
                out.push(GmsEvent::Wedged { view: view.id });
            } else {
                return Ok(());
            }
        }
        if leader == self.me {
            self.lead(view, &alive, leader_rank, false)?;
        } else {
            self.follow(view, leader_row, leader_rank)?;
        }
        self.try_install(view, &alive, out)
    }

    /// Whether the wedge block of `row` is a restart's, not a wedge of a running view: its
    /// view block says restarting, or it [asks to join](Gms::asks_to_join). A member restarting
    /// at `V` wedges `V` (its logged counts); a restart of `V - 1` can complete meanwhile and
    /// install `V` again, as decided, running (s28, seventy-ninth part of `docs/MEMBERSHIP.md`).
    /// A member running that `V` must not read the restarting member's block as a view change
    /// under way in its view: nobody proposes one, so every member would wedge with no leader
    /// proposing, and the group would freeze. (A member that leaves restart mode at `V` and
    /// installs the running `V` clears its block first: see
    /// [`follow_as_outsider`](Gms::follow_as_outsider).) Not in view 0, which no restart
    /// installs: there a member running it must see a member restarting it wedge, to switch
    /// into that restart ([`first_start_restart`](Gms::first_start_restart)).
    fn restart_wedge(&self, row: usize) -> bool {
        self.asks_to_join(row)
            || (self.read_block(row, self.f.view)).is_some_and(|p| self.restarting_in(&p))
    }

    /// Whether `row`'s proposal and decision blocks for `view` may belong to this run of it.
    /// Running `view` (not view 0, see [`restart_wedge`](Gms::restart_wedge)), a row restarting
    /// at its number holds its restart's promise and the decision its log held for an earlier
    /// run of that number (re-published at construction): no leader of this run extends or
    /// adopts them, whose trim counts another run's epoch (s28, ninetieth part of
    /// `docs/MEMBERSHIP.md`). Read before the blocks (see `member_round`).
    fn of_this_run(&self, row: usize, view: &View) -> bool {
        self.restart.is_some() || view.id == 0 || !self.restart_wedge(row)
    }

    /// The proposal block of `row` for `view`, if it may belong to this run of it
    /// ([`of_this_run`](Gms::of_this_run)); running, a restart ballot's (a promise) never does.
    fn run_proposal_of(&self, row: usize, view: &View) -> Option<Tagged> {
        if !self.of_this_run(row, view) {
            return None;
        }
        (self.proposal_of(row, view.id))
            .filter(|t| self.restart.is_some() || crate::restart::attempt_of(t.rank) == 0)
    }

    /// The decision block of `row` for `view`, if it may belong to this run of it
    /// ([`of_this_run`](Gms::of_this_run)).
    fn run_decision_of(&self, row: usize, view: &View) -> Option<Tagged> {
        if !self.of_this_run(row, view) {
            return None;
        }
        self.decision_of(row, view.id)
    }

    /// The members of `view` this node does not suspect; stops the node if they are not a
    /// majority (partition safety).
    fn check_majority(
        &mut self,
        view: &View,
        out: &mut Vec<GmsEvent>,
    ) -> Result<Vec<NodeId>, GmsError> {
        let alive: Vec<NodeId> = view
            .members
            .iter()
            .copied()
            .filter(|&m| !self.suspects(m))
            .collect();
        if self.cfg.partition_safety && !self.cfg.is_quorum(&view.members, &|m| alive.contains(&m))
        {
            let suspected = view
                .members
                .iter()
                .copied()
                .filter(|&m| self.suspects(m))
                .collect();
            return Err(self.stop(
                StopReason::Minority {
                    view: view.id,
                    suspected,
                },
                out,
            ));
        }
        Ok(alive)
    }

    /// `base` extended with every change the leader should propose now. A row that is
    /// [`unheard`](Gms::unheard) is neither joined nor let leave (s26, sixty-eighth part of
    /// `docs/MEMBERSHIP.md`): its `gms_join` and `gms_leave` words, and the digest
    /// [`refuse_settings`](Gms::refuse_settings) reads, are still the old incarnation's until
    /// the new incarnation's own words land.
    fn wanted(&mut self, view: &View, mut ch: Vec<Change>) -> Vec<Change> {
        let cap = self.cfg.max_pending_changes;
        let has = |ch: &[Change], n: NodeId| ch.iter().any(|c| c.node == n);
        // Restart mode: the failure of a member this member counts again is dropped. Its row was
        // suspected when the failure was proposed, and then its new incarnation was readmitted
        // (it restarts from the same log: the same acceptor) or, counted out as an outsider, it
        // was taken back. Kept, the failure would remove a member the commit counts alive, and
        // the next view could hold no majority of `view` (s29, ninety-sixth part of
        // `docs/MEMBERSHIP.md`). A proposal is no decision: the value is fixed at the commit,
        // which every member it counts acknowledges.
        if self.restart.is_some() {
            let stale: Vec<NodeId> = (ch.iter())
                .filter(|c| c.kind == ChangeKind::Fail && view.contains(c.node))
                .map(|c| c.node)
                .filter(|&n| !self.suspects(n))
                .collect();
            if !stale.is_empty() {
                tracing::info!(me = %self.me, view = view.id, counted_again = ?stale, "membership: restart: dropping the proposed failure of members counted again");
                ch.retain(|c| c.kind != ChangeKind::Fail || !stale.contains(&c.node));
            }
        }
        for &m in &view.members {
            if self.suspects(m) && !has(&ch, m) {
                ch.push(Change {
                    kind: ChangeKind::Fail,
                    node: m,
                });
            }
        }
        // Restart mode: a proposed leave stands only while the survivors are a majority of
        // `view` (the leave check below, at its proposal); a failure proposed since can break
        // that, and the commit would then wait for good. The leaves are dropped, and the check
        // below proposes again those that still fit (s29, ninety-sixth part).
        if self.restart.is_some() {
            let survives = |n: NodeId| !ch.iter().any(|c| c.node == n && c.removes());
            if !self.cfg.is_quorum(&view.members, &survives) {
                ch.retain(|c| c.kind != ChangeKind::Leave);
            }
        }
        for &m in &view.members {
            let row = self.sst.row_of(m).unwrap_or(0);
            // After this leave too, the survivors are still a majority.
            let survives = |n: NodeId| n != m && !ch.iter().any(|c| c.node == n && c.removes());
            if !has(&ch, m)
                && !self.sst.is_suspected(row)
                && !self.unheard(row)
                && self.sst.get(row, self.f.leave) != 0
                && self.cfg.is_quorum(&view.members, &survives)
                && !self.leave_loses_a_shard(view, &ch, m)
            {
                ch.push(Change {
                    kind: ChangeKind::Leave,
                    node: m,
                });
            }
        }
        for (row, u) in self.cfg.universe.clone().into_iter().enumerate() {
            if view.contains(u)
                || has(&ch, u)
                || self.sst.is_suspected(row)
                || self.sst.get(row, self.f.join) == 0
                || self.unheard(row)
                || self.readmission_held(view, row)
                || self.refuse_settings(row)
            {
                continue;
            }
            let joins = ch.iter().filter(|c| c.kind == ChangeKind::Join).count();
            // Joins never take the room reserved for one failure per member.
            if view.members.len() + joins >= self.cfg.max_members
                || view.members.len() + joins >= cap
            {
                if !self.held_back {
                    tracing::warn!(
                        me = %self.me, joiner = %u, max_members = self.cfg.max_members,
                        max_pending_changes = cap,
                        "membership: join held back: the next view would exceed max_members or the change ring"
                    );
                    self.held_back = true;
                }
                continue;
            }
            ch.push(Change {
                kind: ChangeKind::Join,
                node: u,
            });
        }
        ch
    }

    /// Whether `m`'s leave, added to the changes `ch`, may lose a shard of `m`'s
    /// (`docs/MEMBERSHIP.md`, thirty-second part, "s22 follow-up: a leave at a loss", and
    /// sixty-second part): no other member of the shard that `ch` keeps holds its state as far
    /// as the members' `gms_holds` words say ([`Fields::holds`]). That is the leave of a shard's
    /// last holder, or of a holder whose shard's other members are joiners or promoted spares
    /// still taking their transfer. A failure cannot be refused, but a leave can: it is held
    /// back (logged once a view at `warn`, like a join past `max_members`) and proposed in a
    /// later round once another member of the shard publishes that it holds the state, so a
    /// graceful leave does not stop the group with `ShardLost`. A word read here is at worst
    /// stale the safe way (a transfer completed but not yet published holds the leave back a
    /// little longer). Should a holder counted here fail before the change commits, the leader
    /// drops the leave at its commit ([`keep_holders`]). Restart mode counts the members whose
    /// rows say they restart holding their shard's state (no [`STATELESS`] bit), as the
    /// restart's every-shard rule does: a restart's decision carries no holders, so nothing at
    /// its commit would catch a leave that leaves only members restarting without state.
    fn leave_loses_a_shard(&mut self, view: &View, ch: &[Change], m: NodeId) -> bool {
        let Some((shard, others)) = self.leave_hold(view, ch, m) else {
            return false;
        };
        if !self.leave_held_back {
            tracing::warn!(me = %self.me, leaver = %m, view = view.id, %shard, waiting_for = ?others,
                "membership: leave held back: no other member of the leaver's shard holds its state (its last holder, or the others still take their transfer; the next view would lose the shard); it leaves once another member holds it");
            self.leave_held_back = true;
        }
        true
    }

    /// The rule of [`leave_loses_a_shard`](Gms::leave_loses_a_shard), without its log: the
    /// shard of `m`'s that `m`'s leave, added to `ch`, may lose, with the shard's other members
    /// that stay and do not hold its state (what the leave waits for); `None` when it loses
    /// none. The leaver asks it too ([`leave_status`](Gms::leave_status)).
    fn leave_hold(&self, view: &View, ch: &[Change], m: NodeId) -> Option<(ShardId, Vec<NodeId>)> {
        let restarting = self.restart.is_some();
        let holds = |n: NodeId| {
            (self.sst.row_of(n)).is_some_and(|r| {
                if restarting {
                    self.restarts_holding_state(r, view.id)
                } else {
                    self.sst.get(r, self.f.holds) == view.id + 1
                }
            })
        };
        let stays = |n: NodeId| n != m && !ch.iter().any(|c| c.node == n && c.removes());
        let shard = (view.shards.iter())
            .find(|s| s.members.contains(&m) && !s.members.iter().any(|&n| stays(n) && holds(n)))?;
        let waiting_for = (shard.members.iter().copied())
            .filter(|&n| stays(n))
            .collect();
        Some((shard.id, waiting_for))
    }

    /// Publishes this member's `gms_holds` word for `view` ([`Fields::holds`]) if some member of
    /// `view` asks to leave (its `gms_leave` word; only the leave check reads the holds words),
    /// its epoch says it holds its shard's state, and the word does not say so yet.
    fn publish_holds(&mut self, view: &View, epoch: &dyn Epoch) -> Result<(), GmsError> {
        let word = view.id + 1;
        let leaving = (view.members.iter())
            .filter_map(|&m| self.sst.row_of(m))
            .any(|r| self.sst.get(r, self.f.leave) != 0);
        if !leaving
            || !epoch.holds_state(view)
            || self.sst.get(self.sst.my_row(), self.f.holds) == word
        {
            return Ok(());
        }
        self.sst.set(self.f.holds, word);
        self.sst.push(self.f.holds.range())?;
        Ok(())
    }

    /// Whether the join of `row`'s node is held back now: [`readmission_pending`] holds it, and
    /// has held it for this incarnation for less than [`GmsConfig::expected_link_wait`] (s29,
    /// ninety-fourth part of `docs/MEMBERSHIP.md`). A member whose link to the new process
    /// never comes up cannot readmit it, and without a bound the join would wait for good.
    /// Past the bound the join is proposed; that member then installs the view naming the
    /// incarnation this leader readmitted and waits for its link
    /// ([`expected_incarnation`](Gms::expected_incarnation)), bounded by the same setting
    /// ([`settle_expected`](Gms::settle_expected)), after which it suspects that incarnation
    /// and the view change removes it: the path a member whose suspicion was never published
    /// takes from the start. A leader that holds the row suspected itself (its own link to the
    /// new process is not up) never gets here: [`wanted`](Gms::wanted) proposes joins only of
    /// rows it does not suspect, so that wait has no bound (s29 follow-up).
    ///
    /// [`readmission_pending`]: Gms::readmission_pending
    fn readmission_held(&mut self, view: &View, row: usize) -> bool {
        let u = self.cfg.universe.len();
        self.readmission_since.resize(u, None);
        if !self.readmission_pending(view, row) {
            if let Some(s) = self.readmission_since.get_mut(row) {
                *s = None;
            }
            return false;
        }
        let mine = (self.sst)
            .get_at(self.sst.my_row(), self.f.admitted, row)
            .unwrap_or(0);
        let now = self.sst.now();
        let bound = self.cfg.expected_link_wait();
        let Some(slot) = self.readmission_since.get_mut(row) else {
            return true;
        };
        let (since, warned) = match *slot {
            Some((inc, t, w)) if inc == mine => (t, w),
            _ => (now, false),
        };
        let waited = now.saturating_since(since);
        let over = waited >= bound;
        *slot = Some((mine, since, warned || over));
        if over && !warned {
            tracing::warn!(
                me = %self.me, node = ?self.cfg.universe.get(row), incarnation = mine,
                waited_ms = waited.as_millis() as u64, bound_ms = bound.as_millis() as u64,
                "membership: a member that suspected the old incarnation has not readmitted the new one within expected_link_timeout; proposing its join without that readmission (that member waits for its link as an expected incarnation)"
            );
        }
        !over
    }

    /// Whether `row`'s node is a new incarnation this member readmitted (its `admitted` word
    /// names it) that a member of `view` which suspected an earlier incarnation (its published
    /// flag for the row) has not readmitted yet. Its join waits for that: a member still holding
    /// the incarnation pending may not readmit it once a proposal names the node, so it would
    /// install the view with the row suspected and its new epoch would count the joiner failed
    /// from the start, stalling the view (issue 6: over TCP a member's link to the new process
    /// came up after the leader had proposed the join).
    fn readmission_pending(&self, view: &View, row: usize) -> bool {
        let mine = (self.sst)
            .get_at(self.sst.my_row(), self.f.admitted, row)
            .unwrap_or(0);
        if mine == 0 {
            return false;
        }
        let flags = self.sst.schema().suspected();
        (view.members.iter().copied())
            .filter(|&m| m != self.me && !self.suspects(m))
            .filter_map(|m| self.sst.row_of(m))
            .any(|r| {
                self.sst.get_at(r, flags, row).unwrap_or(0) != 0
                    && self.sst.get_at(r, self.f.admitted, row).unwrap_or(0) < mine
            })
    }

    /// Restart mode at `view`: whether the logged decision for `view` of rank `rank` (the one
    /// an inspector adopts) may have been installed, i.e. its next view run by some member
    /// (s26, sixty-sixth part of `docs/MEMBERSHIP.md`). Only a restart ballot's decision can be
    /// shown not to have been: it is false when the members of `view` shown never to log it
    /// leave no majority of `view`. Such a member is this member, or an unsuspected peer
    /// restarting and wedged in `view`, that acknowledged (promised) a higher ballot and holds
    /// no decision for `view` ranked `rank` or above: a member that promised a ballot accepts
    /// no decision of a lower one. An ordinary decision (not a ballot's) may always have been
    /// installed: a normal-mode install does not need every counted member's echo.
    ///
    /// Why that suffices: the first member to install a ballot's next view (restart mode,
    /// `try_install`) saw the echo of every member it counted, a majority of `view`, each of
    /// which logged the decision before echoing and keeps it (a log only grows). A member
    /// shown never to log it is not among them, so with those excluded no majority is left.
    /// Catching up into the view needs it installed already, and a joiner installs it only
    /// once a member did. A peer is read only once its wedge block for `view` is here
    /// ([`read_for`](Gms::read_for)): a restarted member publishes its promise (proposal block)
    /// and then its logged decision at construction, and writes its wedge block in its first
    /// round after that, so both construction-time blocks have landed (one writer's pushes land
    /// in order). After that it logs and publishes a decision before it acknowledges a later
    /// ballot, so a proposal block showing the higher ballot comes with the decision block
    /// current up to it. (The proposal block is not what orders the reads: at construction it
    /// is written before the decision block.)
    fn may_have_installed(&self, view: &View, rank: u64) -> bool {
        if crate::restart::attempt_of(rank) == 0 {
            return true;
        }
        let lacking = self.read_for(view, rank, |above, held| above && !held);
        self.cfg
            .is_quorum(&view.members, &|m| !lacking.contains(&m))
    }

    /// Restart mode at `view`: whether the members read holding a decision for `view` ranked
    /// `rank` or above (this member, or an unsuspected peer restarting and wedged in `view`),
    /// together with the members this member counts out ([`suspects`](Gms::suspects)), are a
    /// majority of it. Neither is ever read as lacking the decision, so
    /// [`may_have_installed`](Gms::may_have_installed) holds at an inspector with this
    /// member's suspicions. Counting only the holders (s26 as merged) disagreed with the
    /// inspector where a holder is counted out: the inspector waited under fix B while the stop
    /// check applied the s18 rule and never stopped (the review's R1; "s26 follow-up: review
    /// findings" in `docs/MEMBERSHIP.md`).
    ///
    /// Holding is final (a member's log only grows), and so is a table suspicion in restart
    /// mode, but counting out as an outsider is not since s29: a member taken back
    /// ([`take_back_outsiders`](Gms::take_back_outsiders)) that lacks the decision goes from
    /// counted here to not counted. The two checks still agree ("s29 follow-up: review
    /// findings" of the ninety-second part of `docs/MEMBERSHIP.md`). The take-back runs at the
    /// start of the round, before this check, so while a member is still counted out here its
    /// row does not show it restarting `view` with logged counts as `read_for` reads one
    /// (unless it asks to join, or shows another member list: then the inspector may read it
    /// as lacking while this counts it, and the stop this allows is a needless one, safe, the
    /// cost [`short_of_adopted_for_good`](Gms::short_of_adopted_for_good) names). Once taken
    /// back it is counted neither here nor, once it acknowledges the inspector's ballot, by
    /// the inspector: that ballot ranks above every decision visible, `rank` included, so its
    /// row then shows a promise above `rank` without the decision (lacking). The inspector
    /// reads `may_have_installed` only at its commit, when every member of its `alive`, the
    /// taken-back member included, acknowledged its ballot.
    fn installable_for_good(&self, view: &View, rank: u64) -> bool {
        if crate::restart::attempt_of(rank) == 0 {
            return true;
        }
        let holding = self.read_for(view, rank, |_, held| held);
        self.cfg.is_quorum(&view.members, &|m| {
            holding.contains(&m) || (m != self.me && self.suspects(m))
        })
    }

    /// Restart mode at `view`: the members read (this member, and every unsuspected peer
    /// restarting and wedged in `view`) for which `mark(above, held)` holds (`above`: it
    /// promised a ballot ranked above `rank`; `held`: it holds a decision for `view` ranked
    /// `rank` or above). A peer counts only with its wedge block for `view` here, which makes
    /// its two blocks current (see [`may_have_installed`](Gms::may_have_installed)).
    fn read_for(&self, view: &View, rank: u64, mark: impl Fn(bool, bool) -> bool) -> Vec<NodeId> {
        let promised = self.restart.as_ref().map_or(0, |r| r.promised);
        let mine = (self.decision.iter())
            .chain(self.restart.as_ref().and_then(|r| r.logged.as_ref()))
            .any(|d| d.trim.view == view.id && d.rank >= rank);
        let mut marked = Vec::new();
        if mark(promised > rank, mine) {
            marked.push(self.me);
        }
        for &m in &view.members {
            let Some(row) = self.sst.row_of(m) else {
                continue;
            };
            let restarting = (self.read_block(row, self.f.view))
                .is_some_and(|p| p.first() == Some(&(view.id + 1)) && self.restarting_in(&p));
            if m == self.me
                || self.sst.is_suspected(row)
                || !restarting
                || self.received_of(row, view.id).is_none()
            {
                continue;
            }
            let above = (self.proposal_of(row, view.id)).is_some_and(|t| t.rank > rank);
            let held = (self.decision_of(row, view.id)).is_some_and(|t| t.rank >= rank);
            if mark(above, held) {
                marked.push(m);
            }
        }
        marked
    }

    /// Restart mode at `view`, a majority of it restarted: whether the wait of the adopted-decision
    /// rule ([`adoption_short`]) can no longer end in this process. The highest-ranked logged
    /// decision visible for `view` is the one an inspector adopts; fitted with a failure of
    /// every member of `view` this member counts out ([`suspects`](Gms::suspects): suspected,
    /// final in restart mode, or a non-restarting outsider), it gives the largest restart view
    /// this member could still take part in. If that view holds a majority neither of `view`
    /// nor of the adopted next view (for a decision that admits members, no majority of the
    /// adopted next view: `adoption_short`), no later round can help (suspicions are never
    /// withdrawn here, and a restart view only loses members; an outsider is taken back only
    /// if it catches up into `view`, which this stop does not wait for, as before s29), so
    /// every member that sees it stops with [`StopReason::RestartShortOfAdopted`], naming the
    /// members of the adopted next view to start. The inspector, which would otherwise wait at
    /// its commit (see [`lead`](Gms::lead)), sees the same. Uses this member's own
    /// suspicions: stopping is always safe (the member installs nothing). A member that counts
    /// out more of the adopted next view than the inspector does (a false suspicion after a
    /// stall) may stop where the inspector would have decided a restart view it could have
    /// run in; that is the cost of a false suspicion in restart mode, as with
    /// [`StopReason::RestartCutOff`].
    ///
    /// A restart decision (a ballot's) ranked at or above this member's promise is not
    /// checked (s26, sixty-sixth part of `docs/MEMBERSHIP.md`): it is the decision of the
    /// ballot this member leads or follows, or of a later one it has not promised yet, and a
    /// restart installs such a decision as it is; only an inspector leading a higher ballot
    /// adopts and fits it, and once this member promised that ballot the check applies again.
    /// Checking it stopped a plain total restart: a ballot that admits members that joined
    /// again (`wanted`) fitted again to its restarted members alone, short of its own next
    /// view.
    fn short_of_adopted_for_good(&self, view: &View) -> Option<StopReason> {
        if !self.cfg.partition_safety {
            return None;
        }
        let adopted = (0..self.sst.rows())
            .filter_map(|r| self.decision_of(r, view.id))
            .max_by_key(|t| t.rank)?;
        // Not fitted by anyone while this member's promise is at or below it (see above).
        let promised = self.restart.as_ref().map_or(0, |r| r.promised);
        if crate::restart::attempt_of(adopted.rank) > 0 && adopted.rank >= promised {
            return None;
        }
        // A decision admitting members whose next view's members of `view` are none counted
        // out: its joiners may still come as outsiders, and then the inspector decides it
        // unchanged (`adopted_whole_here`), so the wait may end.
        let admits = (adopted.changes.iter()).any(|c| c.kind == ChangeKind::Join);
        if admits
            && crate::change::next_members(&adopted.changes, &view.members)
                .iter()
                .all(|&m| !view.contains(m) || m == self.me || !self.suspects(m))
        {
            return None;
        }
        let out: Vec<Change> = (view.members.iter().copied())
            .filter(|&m| m != self.me && self.suspects(m))
            .map(|node| Change {
                kind: ChangeKind::Fail,
                node,
            })
            .collect();
        let fitted = self.restart_changes(adopted.changes.clone(), &out);
        // Final only once the members read holding it, with those counted out, are a majority
        // of `view` (more members promising a higher ballot without it can still make the
        // inspector's verdict false; a counted-out member is never read as lacking it).
        let installable = self.installable_for_good(view, adopted.rank);
        let start = adoption_short(
            &self.cfg,
            &view.members,
            &adopted.changes,
            &fitted,
            installable,
        )?;
        Some(StopReason::RestartShortOfAdopted {
            view: view.id,
            adopted: crate::change::next_members(&adopted.changes, &view.members),
            start,
        })
    }

    /// `force`: propose even without changes (a restart installs the next view regardless).
    fn lead(
        &mut self,
        view: &View,
        alive: &[NodeId],
        my_rank: u64,
        force: bool,
    ) -> Result<(), GmsError> {
        if self.decision.as_ref().is_some_and(|d| d.rank == my_rank) {
            return Ok(()); // decided; what arrives now goes to the next view
        }
        // Extend my own proposal, or on takeover the most advanced one visible.
        let mut base = match &self.proposal {
            Some((r, ch)) if *r == my_rank => ch.clone(),
            _ => (0..self.sst.rows())
                .filter(|&r| !self.sst.is_suspected(r))
                .filter_map(|r| self.run_proposal_of(r, view))
                .max_by_key(|t| (t.rank, t.changes.len()))
                .map(|t| t.changes)
                .unwrap_or_default(),
        };
        // Restart mode: a proposed failure of a member now in `alive` is dropped (s29,
        // ninety-second part of `docs/MEMBERSHIP.md`, "s29 follow-up: review findings"): a
        // member counted out as an outsider and taken back since (`take_back_outsiders`), or
        // one another leader counted out that this one never did. A restart ballot decides
        // either this proposal, for a restart that adopts no decision, or an adopted decision
        // (read from decision blocks only), kept whole or fitted with this proposal's failures
        // (`restart_changes`); no proposal block is ever the source of a decided value, so the
        // failures an adopted decision carries stay, and nothing decided is dropped here. The
        // commit still needs the acknowledgement of every member of `alive`, the dropped member
        // included, and every member this leader suspects is still failed (`wanted`).
        if self.restart.is_some() {
            base.retain(|c| !(c.kind == ChangeKind::Fail && alive.contains(&c.node)));
        }
        let changes = self.wanted(view, base);
        if changes.is_empty() && !force {
            return Ok(());
        }
        if self.proposal.as_ref() != Some(&(my_rank, changes.clone())) {
            tracing::debug!(me = %self.me, view = view.id, ?changes, "membership: proposing");
            self.publish_proposal(view.id, my_rank, &changes)?;
        }
        // Commit: every unsuspected member wedged and acknowledged, and they are a majority, and
        // every suspected member is being removed (so the survivors are exactly `alive`).
        if !self
            .cfg
            .is_quorum(&self.quorum_members(view), &|m| alive.contains(&m))
        {
            return Ok(());
        }
        // Restart mode: an acknowledgement counts only from a row restarting at `view`, as
        // `read_for` reads one (s27 hardening, seventy-second part of `docs/MEMBERSHIP.md`,
        // "s27 follow-up"): a member that caught up into `view + 1` keeps its blocks for `view`
        // until it writes new ones, and will echo nothing at `view`. (An unheard row's frozen
        // words are not read at all: `read_block`.)
        let at_view = |r: usize| {
            self.restart.is_none()
                || (self.read_block(r, self.f.view))
                    .is_some_and(|p| p.first() == Some(&(view.id + 1)) && self.restarting_in(&p))
        };
        let all_acked = alive.iter().all(|&m| {
            let r = self.sst.row_of(m).unwrap_or(0);
            at_view(r)
                && self.received_of(r, view.id).is_some()
                && self
                    .proposal_of(r, view.id)
                    .is_some_and(|t| t.rank == my_rank && t.changes == changes)
        });
        let removals_cover = view
            .members
            .iter()
            .all(|&m| !self.suspects(m) || changes.iter().any(|c| c.node == m && c.removes()));
        if !all_acked || !removals_cover {
            return Ok(());
        }
        // Decide: adopt the highest-ranked decision visible anywhere, else compute the trim.
        let adopted = (0..self.sst.rows())
            .filter_map(|r| self.run_decision_of(r, view))
            .max_by_key(|t| t.rank);
        let fitted = match &adopted {
            // Every member of the adopted next view is here: the adopted value, unchanged.
            Some(t)
                if self.restart.is_some()
                    && self.adopted_whole_here(view, &t.changes, alive, &changes) =>
            {
                if let Some(r) = &mut self.restart {
                    r.short_of_adopted = None;
                }
                tracing::info!(me = %self.me, view = view.id, changes = ?t.changes, "membership: the restart adopts a logged decision admitting members, every member of its next view here: decided unchanged");
                Some(t.changes.clone())
            }
            Some(t) if self.restart.is_some() => {
                let fitted = self.restart_changes(t.changes.clone(), &changes);
                let installable = self.may_have_installed(view, t.rank);
                let short =
                    adoption_short(&self.cfg, &view.members, &t.changes, &fitted, installable);
                let not_here = self.adopted_not_here(view, &t.changes, alive, &changes);
                let wait = short.clone().map(|s| (s, not_here));
                if let Some(r) = &mut self.restart
                    && r.short_of_adopted != wait
                {
                    if let Some((waiting, not_here)) = &wait {
                        tracing::warn!(me = %self.me, view = view.id, ?waiting, ?not_here, "membership: the restart adopts a logged decision whose next view it would not hold a majority of; waiting for more of its members (not_here: start them, or correct their settings)");
                    }
                    r.short_of_adopted = wait;
                }
                if short.is_some() {
                    return Ok(());
                }
                Some(fitted)
            }
            _ => None,
        };
        let adopted_next =
            (adopted.as_ref()).map(|t| crate::change::next_members(&t.changes, &view.members));
        let (decision, holders) = match adopted {
            Some(t) => (
                Decision {
                    rank: my_rank,
                    changes: fitted.unwrap_or(t.changes),
                    trim: Trim {
                        view: view.id,
                        counts: view.members.iter().copied().zip(t.trim).collect(),
                    },
                },
                // Restart mode: the every-shard rule of the restart decides who holds state.
                t.holders.filter(|_| self.restart.is_none()),
            ),
            None => {
                let rx: Vec<Option<Vec<u64>>> = view
                    .members
                    .iter()
                    .map(|&m| {
                        let r = self.sst.row_of(m).unwrap_or(0);
                        self.received_of(r, view.id)
                    })
                    .collect();
                let survivors = trim_survivors(view, &changes, &rx);
                let rx: Vec<Vec<u64>> = rx.into_iter().map(Option::unwrap_or_default).collect();
                let t = trim::compute(view, &survivors, |m, s| {
                    let (mi, si) = (view.rank_of(m).unwrap_or(0), view.rank_of(s).unwrap_or(0));
                    rx[mi].get(si).copied().unwrap_or(0)
                });
                // Who held its shard's state when it wedged: every survivor's wedge block is
                // here (each acknowledged), and a member's answer is final once it wedged.
                // Restart mode: the every-shard rule of the restart decides it instead.
                let holders: Option<Vec<bool>> = self.restart.is_none().then(|| {
                    (view.members.iter())
                        .map(|&m| {
                            let r = self.sst.row_of(m).unwrap_or(0);
                            self.holds_of(r, view.id) == Some(true)
                        })
                        .collect()
                });
                // Running mode: the leader's last checks of the leaves, on the value it decides
                // (a leave's shard, then the majority), so every member installs the drops.
                let changes = match &holders {
                    Some(h) => {
                        let kept = keep_holders(self.me, view, changes, h);
                        keep_majority(self.me, &self.cfg, view, alive, kept)
                    }
                    None => changes,
                };
                (
                    Decision {
                        rank: my_rank,
                        changes,
                        trim: t,
                    },
                    holders,
                )
            }
        };
        // Restart mode: the next view holds a majority of `view` among the members counted
        // here, or of an adopted decision's next view that holds one of `view` (the s18
        // fitting, as `adoption_short` allows it): the majority chain (s29, ninety-sixth part of
        // `docs/MEMBERSHIP.md`). The commit check above counts `alive`; a member the decided
        // changes remove is no survivor, whether the proposal failed it while it was suspected
        // or an adopted decision did.
        if self.restart.is_some() {
            let quorum = self.quorum_members(view);
            let next = decision.next_members(&view.members);
            let kept = |m: NodeId| alive.contains(&m) && next.contains(&m);
            let of_adopted = adopted_next.as_ref().is_some_and(|n| {
                self.cfg.is_quorum(&quorum, &|m| n.contains(&m))
                    && self.cfg.is_quorum(n, &|m| next.contains(&m))
            });
            let short = (!self.cfg.is_quorum(&quorum, &kept) && !of_adopted).then_some(next);
            if let Some(r) = &mut self.restart
                && r.no_majority != short
            {
                if let Some(next) = &short {
                    tracing::warn!(me = %self.me, view = view.id, rank = my_rank, ?next, changes = ?decision.changes, "membership: the restart's decision would make a next view with no majority of the view, nor of an adopted next view holding one; not committing");
                }
                r.no_majority = short.clone();
            }
            if short.is_some() {
                return Ok(());
            }
        }
        tracing::debug!(me = %self.me, view = view.id, rank = my_rank, ?holders, "membership: decided");
        self.log
            .append(&decided_record(&decision, holders.as_deref()))?;
        tracing::debug!(me = %self.me, view = view.id, rank = my_rank, "membership: publishing the decision");
        self.publish_decision(&decision, holders.as_deref())?;
        self.decision = Some(decision);
        self.decided_holders = holders;
        Ok(())
    }

    /// Restart mode, the inspector at its commit adopting a logged decision with `adopted`
    /// changes of `view`, every member of `alive` wedged and acknowledging its proposal
    /// `proposed`: whether that decision admits members and every member of its next view is
    /// here, so the restart decides the adopted changes *unchanged* under its ballot instead of
    /// fitting them ([`restart_changes`](Gms::restart_changes); s26, sixty-sixth part of
    /// `docs/MEMBERSHIP.md`, "s26 follow-up: review findings"). Here means: a member of `view`
    /// is in `alive` (restarted and counted); a joiner is an unsuspected, heard peer that asks
    /// to join ([`asks_to_join`](Gms::asks_to_join)) and that `proposed` admits (so `wanted`'s
    /// checks of a join passed: settings, readmission, room).
    ///
    /// Adopting the value unchanged is Paxos's rule and cannot split a view number: the next
    /// view is the adopted decision's, whoever installed it before. Fitting exists only for a
    /// next view that names a node the restart cannot run with (a link never up, a joiner
    /// without state); with every member here the joiners follow as outsiders and take their
    /// state by transfer, as when a ballot admits them first.
    fn adopted_whole_here(
        &self,
        view: &View,
        adopted: &[Change],
        alive: &[NodeId],
        proposed: &[Change],
    ) -> bool {
        adopted.iter().any(|c| c.kind == ChangeKind::Join)
            && self
                .adopted_not_here(view, adopted, alive, proposed)
                .is_empty()
    }

    /// The members of the adopted decision's next view that are not here in the sense of
    /// [`adopted_whole_here`](Gms::adopted_whole_here): a member of `view` not in `alive`, or a
    /// joiner that is not an unsuspected, heard peer asking to join whose join `proposed`
    /// admits (down, not linked, or held back by `wanted`: settings, readmission, room). The
    /// inspector's warning names them while it waits (s27, seventy-sixth part of
    /// `docs/MEMBERSHIP.md`): they are whom the operator must start, or correct.
    fn adopted_not_here(
        &self,
        view: &View,
        adopted: &[Change],
        alive: &[NodeId],
        proposed: &[Change],
    ) -> Vec<NodeId> {
        let here = |m: NodeId| {
            if view.contains(m) {
                return alive.contains(&m);
            }
            let proposed_join =
                (proposed.iter()).any(|c| c.node == m && c.kind == ChangeKind::Join);
            proposed_join
                && self.sst.row_of(m).is_some_and(|r| {
                    !self.sst.is_suspected(r) && !self.unheard(r) && self.asks_to_join(r)
                })
        };
        (crate::change::next_members(adopted, &view.members).into_iter())
            .filter(|&m| !here(m))
            .collect()
    }

    /// Restart mode, the inspector adopts a logged decision: its trim is kept whole (it may
    /// have been acted on: members delivered up to it), but its membership is fitted to who
    /// restarted — the failures this inspector proposes (members of the view that did not
    /// restart) are added, and its joins are dropped: a joiner's state came by transfer and is
    /// in no log, so it cannot restart from its log; it joins again (`restart_round`, once it
    /// sees the restart view running). Otherwise the restart view could name a node whose link
    /// never came up, whose epoch could not start (its regions unknown). Safe: nothing was
    /// delivered in an epoch of the old next view (that needs every member's `Installed`
    /// record, and then a majority of this view is past it and no restart of it completes),
    /// and a node whose log ends at that old view sees the restart view *running* and joins
    /// again.
    fn restart_changes(&self, adopted: Vec<Change>, proposed: &[Change]) -> Vec<Change> {
        let mut out: Vec<Change> = adopted
            .into_iter()
            .filter(|c| c.kind != ChangeKind::Join)
            .collect();
        for c in proposed.iter().filter(|c| c.kind == ChangeKind::Fail) {
            if !out.iter().any(|o| o.node == c.node && o.removes()) {
                out.retain(|o| o.node != c.node);
                out.push(*c);
            }
        }
        out
    }

    fn follow(&mut self, view: &View, leader_row: usize, leader_rank: u64) -> Result<(), GmsError> {
        if let Some(p) = self.proposal_of(leader_row, view.id)
            && p.rank == leader_rank
            && self.proposal.as_ref() != Some(&(p.rank, p.changes.clone()))
        {
            tracing::debug!(me = %self.me, view = view.id, rank = p.rank, "membership: acking");
            self.publish_proposal(view.id, p.rank, &p.changes)?;
        }
        if let Some(d) = self.decision_of(leader_row, view.id)
            && d.rank == leader_rank
            && self.decision.as_ref().is_none_or(|mine| mine.rank < d.rank)
        {
            let decision = Decision {
                rank: d.rank,
                changes: d.changes,
                trim: Trim {
                    view: view.id,
                    counts: view.members.iter().copied().zip(d.trim).collect(),
                },
            };
            tracing::debug!(me = %self.me, view = view.id, rank = d.rank, "membership: decision seen");
            self.decided_expect =
                self.newer_named(&[leader_row], &decision.next_members(&view.members));
            self.log
                .append(&decided_record(&decision, d.holders.as_deref()))?;
            tracing::debug!(me = %self.me, view = view.id, rank = d.rank, "membership: echoing");
            self.publish_decision(&decision, d.holders.as_deref())?;
            self.decision = Some(decision);
            self.decided_holders = d.holders;
        }
        Ok(())
    }

    /// Whether this member, wedged in `view`, received every message of its shard up to
    /// `trim` (so it can deliver it). False if it has not wedged. A leaver that the leader left
    /// out of the trim ([`trim_survivors`]: it was suspected before its wedge block was seen)
    /// may lack some; it then delivers nothing of the trim.
    fn holds_trim(&self, view: &View, trim: &Trim) -> bool {
        let Some(rx) = &self.wedged else {
            return false;
        };
        let mut senders = (view.shards.iter())
            .filter(|sh| sh.members.contains(&self.me))
            .flat_map(|sh| sh.members.iter().copied());
        senders.all(|s| {
            let have = (view.rank_of(s)).and_then(|r| rx.get(r).copied());
            trim.count(s) <= have.unwrap_or(0)
        })
    }

    fn try_install(
        &mut self,
        view: &View,
        alive: &[NodeId],
        out: &mut Vec<GmsEvent>,
    ) -> Result<(), GmsError> {
        let Some(d) = self.decision.clone() else {
            return Ok(());
        };
        if !self
            .cfg
            .is_quorum(&self.quorum_members(view), &|m| alive.contains(&m))
        {
            return Ok(());
        }
        // Restart mode: only a decision of this restart (a ballot) is installed. One logged
        // before the shutdown, re-published by every restarted member, is adopted by the
        // inspector first, which fits its membership to who restarted (`restart_changes`).
        if self.restart.is_some() && crate::restart::attempt_of(d.rank) == 0 {
            return Ok(());
        }
        // A member the decision removes as failed counts as suspected here, as in Derecho's
        // followers: the deciding leader counted it failed (its echo was never needed there,
        // and every member it counts acknowledged the removal), and that leader's suspicion may
        // never reach this member (an accused leader publishes none). Waiting for its echo
        // would wait for a member that may never see the decision (s24, forty-eighth part of
        // `docs/MEMBERSHIP.md`). Not in restart mode, whose echoes stay as they were.
        let removed = |m: NodeId| {
            self.restart.is_none()
                && (d.changes.iter()).any(|c| c.node == m && c.kind == ChangeKind::Fail)
        };
        let echoed = alive.iter().filter(|&&m| !removed(m)).all(|&m| {
            let r = self.sst.row_of(m).unwrap_or(0);
            self.decision_of(r, view.id)
                .is_some_and(|t| t.rank == d.rank)
        });
        if !echoed {
            return Ok(());
        }
        // Restart mode: a peer already past `view` also shows the decision for `view` (a node
        // restarting at `view + 1` publishes the one that ended `view`), so the echoes may
        // include it; then this member must not run `view + 1` on its own but catch up from it,
        // in its mode (next round). Read after the echoes: a node's view block lands before
        // the blocks it writes later (one writer, pushes in order), so this sees it.
        if self.restart.is_some() && self.peer_ahead(view) {
            return Ok(());
        }
        tracing::debug!(me = %self.me, view = view.id, "membership: every echo seen");
        let holders = (self.decided_holders.as_deref()).map(|h| holder_ids(view, h));
        let next = View::next_holding(
            view.id + 1,
            d.next_members(&view.members),
            Some(&view.shards),
            holders.as_deref(),
            &self.layout,
        );
        let kept = self.cfg.is_quorum(&view.members, &|m| next.contains(m));
        // A restart's decision (a ballot) was checked by its inspector when it decided: a
        // majority of `view`, or of the next view of the logged decision it adopted (only the
        // latter if that decision admits members; `adoption_short`); `kept` depends on the
        // decision only, so every member agrees.
        let checked = self.restart.is_some() && crate::restart::attempt_of(d.rank) > 0;
        if !kept && !checked {
            // Never install a view without a majority of its predecessor.
            let suspected = view
                .members
                .iter()
                .copied()
                .filter(|m| !next.contains(*m))
                .collect();
            return Err(self.stop(
                StopReason::Minority {
                    view: view.id,
                    suspected,
                },
                out,
            ));
        }
        // Restart mode, removed by the restart view (the inspector adopted a logged decision
        // that failed it: its log may lack messages below that decision's trim): it cannot
        // restart from its log; it joins again, as when it catches up to a view without it.
        if self.restart.is_some()
            && !next.contains(self.me)
            && !(d.changes.iter()).any(|c| c.node == self.me && c.kind == ChangeKind::Leave)
        {
            return self.rejoin(view.id, next.id, out);
        }
        // A member the decision fails that this member does not suspect yet (it installs
        // without that member's echo, above) is suspected now, before the view is installed:
        // the report cuts its link, so none of its epoch writes still in flight lands after the
        // `Group` zeroes the old view's region set on `ViewInstalled` (Derecho's rule; s24,
        // forty-eighth part of `docs/MEMBERSHIP.md`, "review findings").
        if self.restart.is_none() {
            let fail = (d.changes.iter())
                .filter(|c| c.kind == ChangeKind::Fail && c.node != self.me)
                .filter(|c| (self.sst.row_of(c.node)).is_some_and(|r| !self.sst.is_suspected(r)))
                .map(|c| c.node)
                .collect::<Vec<_>>();
            for m in fail {
                tracing::warn!(me = %self.me, node = %m, view = view.id, "membership: suspecting a member the decision removes as failed before installing the view without it");
                self.sst.suspect(m)?;
            }
        }
        // The decision logged (synced) before the echo determines this view (and its shards);
        // the records only say it was installed (see `Durable::append_installed`,
        // `docs/MEMBERSHIP.md`). One batch: one write and sync (s22, thirty-ninth part).
        let records = self.with_settings(crate::restart::installed_records(&next));
        self.log.append_installed(&records)?;
        tracing::info!(me = %self.me, view = next.id, members = ?next.members, "membership: view installed");
        let left = d
            .changes
            .iter()
            .any(|c| c.node == self.me && c.kind == ChangeKind::Leave);
        // A member removed as failed delivers nothing more; a leaver delivers up to the trim,
        // unless the trim left it out (`trim_survivors`) and it lacks messages up to it.
        let delivers = left && self.holds_trim(view, &d.trim);
        if left && !delivers {
            tracing::info!(me = %self.me, view = view.id, "membership: the trim left this leaver out (suspected before its wedge was seen); it leaves without delivering the trim");
        }
        if next.contains(self.me) || delivers {
            out.push(GmsEvent::ViewInstalled {
                view: next.clone(),
                trim: Some(d.trim.clone()),
            });
        }
        self.wedged = None;
        self.proposal = None;
        self.decision = None;
        self.decided_holders = None;
        let named = std::mem::take(&mut self.decided_expect);
        self.held_back = false;
        self.leave_held_back = false;
        let restarted = self.restart.take().is_some();
        if restarted {
            tracing::info!(me = %self.me, view = next.id, "membership: restart complete");
        }
        if !next.contains(self.me) {
            let why = if left {
                StopReason::Left { view: next.id }
            } else {
                StopReason::Removed { view: next.id }
            };
            self.view = None;
            self.stop(why, out);
            self.report_leave();
            return Ok(());
        }
        self.expect(&next, &named)?;
        self.publish_view_of(&next)?;
        self.note_gone(&d.changes, next.id, &next.members)?;
        self.view = Some(next.clone());
        if restarted {
            self.resume_leave(next.id)?;
        }
        // A view installed while a majority of it is already suspected is a minority at once.
        self.check_majority(&next, out).map(|_| ())
    }
}

/// The members of `next` that `changes` (the decision installing it) admitted: its joiners.
fn joiners(changes: &[Change], next: &View) -> Vec<NodeId> {
    (changes.iter())
        .filter(|c| c.kind == ChangeKind::Join && next.contains(c.node))
        .map(|c| c.node)
        .collect()
}

/// The members of `view` whose received counts enter the trim (`docs/MEMBERSHIP.md`,
/// fifty-fourth part): every member the changes do not fail *and* whose wedge block for `view`
/// is here (`rx`, by rank). A leaver is a survivor of the view (it delivers up to the trim, then
/// goes) only once it wedged: a leaver that crashed, or is suspected, before publishing its
/// wedge block counts as failed for the trim, as in Derecho's rule (the minimum over the members
/// not failed, each of which wedged). Counting its missing counts as 0 would cut the trim below
/// what the leaver itself delivered before it crashed (it delivers what every member received),
/// so the survivors would discard messages a departed member delivered. Every unsuspected
/// member's block is here once the leader commits, so only suspected members are left out; the
/// changes (and so what the application is told: a leave, not a failure) are unchanged.
fn trim_survivors(view: &View, changes: &[Change], rx: &[Option<Vec<u64>>]) -> Vec<NodeId> {
    (view.members.iter().zip(rx))
        .filter(|(m, wedge)| {
            wedge.is_some()
                && !changes
                    .iter()
                    .any(|c| c.node == **m && c.kind == ChangeKind::Fail)
        })
        .map(|(&m, _)| m)
        .collect()
}

/// `changes` without each leave that would make the next view lose a shard which it keeps
/// otherwise, given who held their shard's state when `view` ended (`holders`, by rank, from
/// the wedge blocks: final answers). The leader's last check of a leave
/// (`docs/MEMBERSHIP.md`, sixty-second part): [`Gms::leave_loses_a_shard`] proposed it while
/// another member of the shard said it held the state, and that member failed before the
/// commit, so the change now holds the leave and that failure together. Only a leaver that
/// holds the state counts (a non-holder's leave cannot change whether its shard is lost). The
/// leaver stays a member of the next view with its request still published, and the next
/// view's leader holds the leave back as long as it would lose the shard. The trim is the
/// same either way: a leaver that wedged is one of its survivors ([`trim_survivors`]). The
/// leaves are checked in order against the changes left so far, so a kept leave stays safe:
/// a later drop only adds a survivor.
fn keep_holders(
    me: NodeId,
    view: &View,
    mut changes: Vec<Change>,
    holders: &[bool],
) -> Vec<Change> {
    let holds =
        |n: NodeId| (view.rank_of(n)).is_some_and(|r| holders.get(r).copied() == Some(true));
    let mut i = 0;
    while let Some(&c) = changes.get(i) {
        let stays = |n: NodeId| !changes.iter().any(|o| o.node == n && o.removes());
        let loses = c.kind == ChangeKind::Leave
            && holds(c.node)
            && (view.shards.iter()).any(|s| {
                s.members.contains(&c.node) && !s.members.iter().any(|&n| stays(n) && holds(n))
            });
        if loses {
            tracing::warn!(%me, leaver = %c.node, view = view.id, ?changes,
                "membership: leave dropped at the commit: another member of its shard that held the state fails in the same change, so the next view would lose the shard; the leaver stays and its leave waits");
            changes.remove(i);
        } else {
            i += 1;
        }
    }
    changes
}

/// `changes` without each leave that would leave the next view no majority of `view`: the
/// leader's last check of a leave in running mode (`docs/MEMBERSHIP.md`, ninety-seventh part).
/// [`Gms::wanted`] proposed the leave while the survivors were a majority, and a member failed
/// before the commit, so the change now holds the leave and that failure together; committed
/// whole, its next view holds no majority of `view` and every member stops with
/// [`StopReason::Minority`] at the install. The leaves are checked in order, each against every
/// failure and the leaves kept before it, so an earlier leave is kept before a later one. A
/// dropped leaver stays a member of the next view with its request still published, its leave
/// held ([`LeaveStatus::HeldForMajority`]) until that view's leader finds it fits. The trim is
/// the same either way: a leaver that wedged is one of its survivors ([`trim_survivors`]). A
/// drop only adds a survivor, so the leaves [`keep_holders`] kept still keep their shards.
/// Only the leave of a member of `alive` (unsuspected, acknowledged, so wedged) is ever
/// dropped: a suspected leaver is removed by its leave as by a failure (the commit's
/// `removals_cover`) and may never have wedged, so keeping it would put a member that holds
/// no part of the trim into the next view; its leave counts as gone, and such a decision
/// stops the members with `Minority` at the install, as before (s30 review).
fn keep_majority(
    me: NodeId,
    cfg: &GmsConfig,
    view: &View,
    alive: &[NodeId],
    mut changes: Vec<Change>,
) -> Vec<Change> {
    let mut i = 0;
    while let Some(&c) = changes.get(i) {
        if c.kind == ChangeKind::Leave && alive.contains(&c.node) {
            let gone = |n: NodeId| {
                (changes.iter().enumerate()).any(|(j, o)| {
                    o.node == n
                        && (o.kind == ChangeKind::Fail
                            || (o.kind == ChangeKind::Leave && (j <= i || !alive.contains(&n))))
                })
            };
            if !cfg.is_quorum(&view.members, &|n| !gone(n)) {
                tracing::warn!(%me, leaver = %c.node, view = view.id, ?changes,
                    "membership: leave dropped at the commit: with the failures in the same change the next view would hold no majority of the view; the leaver stays and its leave waits");
                changes.remove(i);
                continue;
            }
        }
        i += 1;
    }
    changes
}

/// The incarnation that [`Gms::settle_absent`] names again for a row suspected while absent,
/// whose published flag is `flag` (incarnations below it suspected), given the newest
/// incarnation a counted member linked ([`Gms::linked_elsewhere`]): one the flag does not
/// cover. Never `u64::MAX`, a peer's word that no process can carry: the flag naming it would
/// saturate at `u64::MAX` and the rule would fire (and warn) on every poll (s24, forty-eighth
/// part of `docs/MEMBERSHIP.md`, "review findings").
fn named_again(flag: u64, linked: Option<u64>) -> Option<u64> {
    linked.filter(|&k| k >= flag && k < u64::MAX)
}

/// Restart mode, the inspector adopts a logged decision (`adopted`, changes of `members`) and
/// fits it (`fitted`, see `Gms::restart_changes`): `None` if the restart view holds a majority
/// of `members` or of the adopted decision's next view, else the members of that next view the
/// restart view lacks (the restart waits for them instead of deciding). Why a majority of the
/// adopted next view suffices (`docs/MEMBERSHIP.md`, "A restart adopting a decision that removed
/// a restarted member"): that view held a majority of `members` when it was decided, and the
/// restart view is what an ordinary view change from it could install (a minority of it
/// failed), every member of it a survivor of the adopted trim.
/// The settings digest (docs/MEMBERSHIP.md, fifty-second part; [`crate::settings`]).
impl<T: Transport, L: Durable> Gms<T, L> {
    /// Writes this node's settings digest into its row, once, at start. The row is pushed
    /// whole to a peer when its link comes up, and a join request is pushed after it on the
    /// same FIFO link, so a joiner's digest is in the leader's table before its request.
    fn publish_settings(&mut self) -> Result<(), GmsError> {
        for (i, w) in self.digest.words().into_iter().enumerate() {
            self.sst.set_at(self.f.settings, i, w)?;
        }
        self.sst.push(self.f.settings.range())?;
        Ok(())
    }

    /// The digest `row` published, if it did.
    fn settings_of(&self, row: usize) -> Option<SettingsDigest> {
        let w: Vec<u64> = (0..SettingsDigest::WORDS)
            .map(|i| self.sst.get_at(row, self.f.settings, i).unwrap_or(0))
            .collect();
        SettingsDigest::from_words(&w)
    }

    /// `row`'s digest if it differs from this node's, as a stop reason. Nothing while the row
    /// is [`unheard`](Gms::unheard): its settings words are still the old incarnation's (s25).
    fn differs(&self, row: usize) -> Option<StopReason> {
        if self.unheard(row) {
            return None;
        }
        let theirs = self.settings_of(row)?;
        (theirs != self.digest).then(|| StopReason::SettingsDiffer {
            node: self.cfg.universe.get(row).copied().unwrap_or(NodeId(0)),
            theirs,
            mine: self.digest,
            groups: self.digest.differing(&theirs),
        })
    }

    /// Why this node must stop for a settings mismatch: a member of its view (initial members
    /// at view 0 included) publishes another digest; or, outside the group with its join asked,
    /// a peer that publishes a view (a member) does.
    fn settings_differ(&self) -> Option<StopReason> {
        let me = self.sst.my_row();
        let rows: Vec<usize> = match &self.view {
            Some(v) => v
                .members
                .iter()
                .filter_map(|&m| self.sst.row_of(m))
                .collect(),
            None if self.sst.get(me, self.f.join) != 0 => (0..self.sst.rows())
                .filter(|&r| self.read_block(r, self.f.view).is_some())
                .collect(),
            None => Vec::new(),
        };
        (rows.into_iter())
            .filter(|&r| r != me && !self.sst.is_suspected(r))
            .find_map(|r| self.differs(r))
    }

    /// Whether no unsuspected member of this node's view publishes another digest. A
    /// [`Group`](crate::group::Group) asks before each poll of its epoch, so that an epoch
    /// whose peer was configured differently delivers nothing more once that peer's digest is
    /// here (the core's next poll stops the member).
    pub(crate) fn settings_agree(&self) -> bool {
        self.settings_differ().is_none()
    }

    /// Whether the leader must not propose `row`'s join: its digest is not known yet or
    /// differs (logged once at `warn`; the joiner stops itself when it reads the members').
    fn refuse_settings(&mut self, row: usize) -> bool {
        match self.settings_of(row) {
            None => true,
            Some(d) if d == self.digest => false,
            Some(d) => {
                if !self.settings_refused.contains(&row) {
                    self.settings_refused.push(row);
                    tracing::warn!(me = %self.me, joiner = ?self.cfg.universe.get(row),
                        "membership: join refused: its settings differ from the group's: digest {} vs {} (differing: {:?})",
                        d, self.digest, self.digest.differing(&d));
                }
                true
            }
        }
    }
}

/// The inspector's rule when it adopts the logged decision `adopted` for the view of
/// `members` and fits it (`fitted`, [`Gms::restart_changes`]): `None` when the restart view
/// the fitted decision makes may be decided, else the members of the adopted next view it
/// lacks (to wait for, or to name in [`StopReason::RestartShortOfAdopted`]).
///
/// A decision that only removes members: the restart view must hold a majority of the view
/// *or* of the adopted next view (s18, "A restart adopting a decision that removed a
/// restarted member"). A decision that *admits* members: a majority of the adopted next view,
/// always (s25, sixty-fifth part of `docs/MEMBERSHIP.md`). That next view may have been
/// installed (the decision was logged by a majority of the view); the restart installs
/// another view under its number, which is safe only if the old next view can never be
/// restarted later, and a restart of it needs a majority of it: with the restart's members a
/// majority of it too, such a majority holds one of them, whose log is on the new branch.
///
/// `installable` says whether the adopted next view may have been installed
/// ([`Gms::may_have_installed`]); where it cannot have been (s26, sixty-sixth part), a decision
/// that admits members falls under the s18 rule too: no old next view exists to be restarted.
fn adoption_short(
    cfg: &GmsConfig,
    members: &[NodeId],
    adopted: &[Change],
    fitted: &[Change],
    installable: bool,
) -> Option<Vec<NodeId>> {
    let adopted_next = crate::change::next_members(adopted, members);
    let restart = crate::change::next_members(fitted, members);
    let kept = |m: NodeId| restart.contains(&m);
    let admits = installable && adopted.iter().any(|c| c.kind == ChangeKind::Join);
    let of_next = cfg.is_quorum(&adopted_next, &kept);
    if of_next || (!admits && cfg.is_quorum(members, &kept)) {
        return None;
    }
    Some(
        (adopted_next.into_iter())
            .filter(|m| !restart.contains(m))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::log::MemLog;
    use squall_sst::Suspicion;
    use squall_transport::RegionId;
    use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

    fn core(u: usize) -> (Sim, Gms<SimNode, MemLog>) {
        let ids: Vec<NodeId> = (0..u as u32).map(NodeId).collect();
        let cfg = GmsConfig::new(RegionId(0), ids.clone(), ids);
        let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (sim, mut nodes) = Sim::cluster(SimConfig::seeded(1), u, &[spec]).unwrap();
        let g = Gms::new(nodes.remove(0), cfg, MemLog::default(), None).unwrap();
        (sim, g)
    }

    /// The inspector's rule when it adopts a logged decision (`adoption_short`): a restart
    /// view with a majority of the view, or of the adopted decision's next view, is decided;
    /// a smaller one waits, naming the members of the adopted next view it lacks. Fails if the
    /// rule only counts the view's majority (the first case waits) or none (the last decides).
    /// A decision that admits members needs a majority of its next view (s25, sixty-fifth
    /// part): fails with the s18 rule (the four-joiner case is decided).
    #[test]
    fn a_restart_adopting_a_decision_needs_a_majority_of_the_view_or_of_its_next_view() {
        let l: Vec<NodeId> = (0..5).map(NodeId).collect();
        let cfg = GmsConfig::new(RegionId(0), l.clone(), l.clone());
        let fail = |n: u32| Change {
            kind: ChangeKind::Fail,
            node: NodeId(n),
        };
        // Adopted view 1 = [2, 3, 4]; 4 absent: [2, 3], a majority of view 1.
        assert_eq!(
            adoption_short(
                &cfg,
                &l,
                &[fail(0), fail(1)],
                &[fail(0), fail(1), fail(4)],
                true
            ),
            None
        );
        // Nothing adopted removed anyone: [0, 1, 2], a majority of the view.
        assert_eq!(
            adoption_short(&cfg, &l, &[], &[fail(3), fail(4)], true),
            None
        );
        // 3 and 4 absent: [2] alone waits for them.
        assert_eq!(
            adoption_short(
                &cfg,
                &l,
                &[fail(0), fail(1)],
                &[fail(0), fail(1), fail(3), fail(4)],
                true
            ),
            Some(vec![NodeId(3), NodeId(4)])
        );
        // s25: a decision that admits members needs a majority of its next view. Adopted view
        // 1 = 0–6 (two joiners); 0 absent: [1, 2, 3, 4] is four of seven.
        let join = |n: u32| Change {
            kind: ChangeKind::Join,
            node: NodeId(n),
        };
        assert_eq!(
            adoption_short(&cfg, &l, &[join(5), join(6)], &[fail(0)], true),
            None
        );
        // Four joiners: [1, 2, 3, 4] is a majority of view 0 but four of nine; it waits.
        assert_eq!(
            adoption_short(
                &cfg,
                &l,
                &[join(5), join(6), join(7), join(8)],
                &[fail(0)],
                true
            ),
            Some([0, 5, 6, 7, 8].map(NodeId).to_vec())
        );
        // s26: a decision whose next view cannot have been installed falls under the s18 rule.
        assert_eq!(
            adoption_short(
                &cfg,
                &l,
                &[join(5), join(6), join(7), join(8)],
                &[fail(0)],
                false
            ),
            None
        );
    }

    /// s24 (`docs/MEMBERSHIP.md`, fifty-fourth part): the trim's survivors are the members not
    /// failed whose wedge block is here; a leaver that published none (it crashed, or was
    /// suspected, before its wedge) is left out like a failed member, and its change stays a
    /// leave. Fails with the pre-s24 rule (every member not failed, a missing block counted
    /// as 0 for every sender): the trim then falls to 0, below what a member may have
    /// delivered (what every member received: up to 2 of each sender, n2's counts, which n1
    /// may have delivered before it crashed).
    #[test]
    fn a_leaver_without_a_wedge_block_is_left_out_of_the_trim() {
        let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
        let v = View::new(0, ids.clone(), &crate::view::EvenShards::single());
        let change = |kind, n: u32| Change {
            kind,
            node: NodeId(n),
        };
        // n1 leaves and crashed before its wedge; n3 leaves and wedged; n2 failed.
        let changes = [
            change(ChangeKind::Leave, 1),
            change(ChangeKind::Leave, 3),
            change(ChangeKind::Fail, 2),
        ];
        let rx = [Some(vec![3; 4]), None, Some(vec![2; 4]), Some(vec![4; 4])];
        let survivors = trim_survivors(&v, &changes, &rx);
        assert_eq!(survivors, vec![NodeId(0), NodeId(3)]);
        let t = trim::compute(&v, &survivors, |m, s| {
            let (mi, si) = (v.rank_of(m).unwrap(), v.rank_of(s).unwrap());
            rx[mi].as_ref().map_or(0, |r| r[si])
        });
        assert_eq!(t.counts, ids.iter().map(|&m| (m, 3)).collect::<Vec<_>>());
    }

    /// s24: a leaver delivers the trim only if it received every message of its own shard up
    /// to it (`Gms::holds_trim`); the other shard's counts are not its concern, and a member
    /// that never wedged holds nothing. Fails if a leaver delivers whatever the trim says.
    #[test]
    fn a_leaver_delivers_the_trim_only_if_it_holds_it() {
        let (ids, cfg, _layout, v0) = four_in_two_shards();
        let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (_sim, mut nodes) = Sim::cluster(SimConfig::seeded(1), 4, &[spec]).unwrap();
        let mut g = Gms::new(nodes.remove(0), cfg, MemLog::default(), None).unwrap();
        let mine = v0
            .shard_of(NodeId(0))
            .map(|s| v0.shards[s].members.clone())
            .unwrap();
        let trim = |over: &[NodeId]| Trim {
            view: 0,
            counts: (ids.iter())
                .map(|&m| (m, if over.contains(&m) { 6 } else { 5 }))
                .collect(),
        };
        assert!(!g.holds_trim(&v0, &trim(&[])), "not wedged");
        g.wedged = Some(vec![5; 4]);
        assert!(g.holds_trim(&v0, &trim(&[])));
        let theirs: Vec<NodeId> = ids.iter().copied().filter(|m| !mine.contains(m)).collect();
        assert!(g.holds_trim(&v0, &trim(&theirs)), "another shard's counts");
        assert!(
            !g.holds_trim(&v0, &trim(&mine[1..])),
            "a message of its shard it lacks"
        );
    }

    /// An epoch that received nothing and holds its state.
    struct Idle;

    impl Epoch for Idle {
        fn wedge(&mut self, view: &View) -> Vec<u64> {
            vec![0; view.members.len()]
        }
    }

    /// Four members in two even shards of at most two: their ids, the config, its layout and
    /// view 0.
    /// [`four_in_two_shards`]'s view 0 and `d`, the failure of shard 1's first member, and
    /// the view 1 it leads to with its holders logged (shard 1's other member, `passive`,
    /// holds no state: the shard is lost) and without them (the rule before s17: the survivor
    /// counts as a holder).
    struct LostShard {
        cfg: GmsConfig,
        layout: Layout,
        v0: View,
        /// Shard 1's members: the failed one, then `passive`.
        lost: Vec<NodeId>,
        passive: NodeId,
        d: Decision,
        /// Per member of view 0: whether it holds the state.
        holders: Vec<bool>,
        with_holders: View,
        without_holders: View,
    }

    fn lost_shard() -> LostShard {
        let (ids, cfg, layout, v0) = four_in_two_shards();
        let lost = v0.shards[1].members.clone();
        assert_eq!(lost.len(), 2, "{v0:?}");
        let (failed, passive) = (lost[0], lost[1]);
        let d = Decision {
            rank: 1,
            changes: vec![Change {
                kind: ChangeKind::Fail,
                node: failed,
            }],
            trim: Trim {
                view: 0,
                counts: ids.iter().map(|&m| (m, 0)).collect(),
            },
        };
        let holders: Vec<bool> = v0.members.iter().map(|&m| m != passive).collect();
        let next = |h: Option<&[NodeId]>| {
            View::next_holding(1, d.next_members(&v0.members), Some(&v0.shards), h, &layout)
        };
        let with_holders = next(Some(&holder_ids(&v0, &holders)));
        let without_holders = next(None);
        LostShard {
            cfg,
            layout,
            v0,
            lost,
            passive,
            d,
            holders,
            with_holders,
            without_holders,
        }
    }

    fn four_in_two_shards() -> (Vec<NodeId>, GmsConfig, Layout, View) {
        let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
        let mut cfg = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
        cfg.shards = crate::view::EvenShards {
            shards: 2,
            min: 1,
            max: 2,
        };
        let layout = cfg.shard_layout();
        let v0 = View::new(0, ids.clone(), &layout);
        (ids, cfg, layout, v0)
    }

    /// s22 (`docs/MEMBERSHIP.md`, thirty-second part): a member whose log ends at a view that
    /// lost a shard (both members of shard 1 failed by a restart's ballot) restarts the view
    /// before it, re-publishes no decision for that view (the one that installed the lost view
    /// is void, so it publishes none: view 0 has no view before it) and counts the void
    /// decision's ballot as promised, so the restart's own ballot ranks above it (a later
    /// restart finds the restart's decision as the highest-ranked). Fails with the void
    /// ballot not counted (promised 0), or with the void decision re-published.
    #[test]
    fn a_log_ending_at_a_lost_view_restarts_the_view_before_it_with_its_decision_void() {
        let (ids, cfg, layout, v0) = four_in_two_shards();
        let d = Decision {
            rank: crate::restart::ballot(2, 0),
            changes: (v0.shards[1].members.iter())
                .map(|&node| Change {
                    kind: ChangeKind::Fail,
                    node,
                })
                .collect(),
            trim: Trim {
                view: 0,
                counts: ids.iter().map(|&m| (m, 3)).collect(),
            },
        };
        let lost = View::next(1, d.next_members(&v0.members), Some(&v0.shards), &layout);
        assert!(lost.inadequate.as_ref().is_some_and(|w| w.lost), "{lost:?}");
        let mut log = MemLog::default();
        let mut records = crate::restart::installed_records(&v0);
        records.push(decided_record(&d, None));
        records.extend(crate::restart::installed_records(&lost));
        for r in &records {
            log.append(r).unwrap();
        }
        let (log, rec) = MemLog::open(log.bytes().to_vec());
        let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (_sim, mut nodes) = Sim::cluster(SimConfig::seeded(1), 4, &[spec]).unwrap();
        let g = Gms::new(nodes.remove(0), cfg, log, Some(&rec)).unwrap();
        assert_eq!(g.view(), Some(&v0));
        assert_eq!(g.restarting().map(<[_]>::len), Some(0));
        assert!(g.decision().is_none(), "the void decision is its decision");
        assert_eq!(g.decision_of(0, 0), None, "it publishes the void decision");
        assert_eq!(g.restart.as_ref().map(|r| r.promised), Some(d.rank));
    }

    /// Issue 6: a restarting member whose log ends at view 0 catches up from a peer whose log
    /// ends at view 1, which it installed live with a decision that lost shard 1 (its failed
    /// member held the state, its survivor had not completed its transfer). The peer
    /// re-publishes the logged decision *with the logged holders*, so the catching-up member
    /// computes view 1 exactly as the peer installed it (shard 1 lost, empty), not with the old
    /// rule (shard 1 = its non-holding survivor). Fails when the restarted peer re-publishes
    /// the decision without holders (as before s17's holder log), or when they are not logged.
    #[test]
    fn a_restart_catching_up_from_a_logged_decision_installs_the_view_as_it_was_installed() {
        let LostShard {
            cfg,
            layout,
            v0,
            lost,
            passive,
            d,
            holders,
            with_holders: live,
            without_holders: old_rule,
        } = lost_shard();
        // The two rules differ here, else this test proves nothing.
        assert!(live.shards[1].members.is_empty(), "{live:?}");
        assert_eq!(old_rule.shards[1].members, vec![passive]);

        // The peer's log: view 0, the decision with its holders, view 1 (as gms logs them).
        let mut peer_log = MemLog::default();
        let mut records = crate::restart::installed_records(&v0);
        records.push(decided_record(&d, Some(&holders)));
        records.extend(crate::restart::installed_records(&live));
        for r in &records {
            peer_log.append(r).unwrap();
        }
        // Since s22 a log ending at a view that lost a shard restarts the view before it
        // (`restart::restart_view`), unless its member logged something of a restart of the
        // lost view (a log written before s22): a promise here, so that the peer restarts view
        // 1 and the member behind catches up into it from the decision with its holders.
        let (_, rec) = MemLog::open(peer_log.bytes().to_vec());
        assert_eq!(
            crate::restart::restart_view(&rec, &layout).map(|v| v.id),
            Some(0)
        );
        peer_log
            .append(&Record::Promised {
                view: 1,
                rank: crate::restart::ballot(1, 0),
            })
            .unwrap();
        let mut behind_log = MemLog::default();
        for r in crate::restart::installed_records(&v0) {
            behind_log.append(&r).unwrap();
        }
        let shard0 = &v0.shards[0].members;
        let (peer, behind) = (shard0[0].0 as usize, shard0[1].0 as usize);

        let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(3), 4, &[spec]).unwrap();
        let mut nodes: Vec<Option<SimNode>> = nodes.into_iter().map(Some).collect();
        for &m in &lost {
            sim.crash(m);
        }
        let open = |log: &MemLog| MemLog::open(log.bytes().to_vec());
        let (log, rec) = open(&peer_log);
        let mut p = Gms::new(nodes[peer].take().unwrap(), cfg.clone(), log, Some(&rec)).unwrap();
        let (log, rec) = open(&behind_log);
        let mut b = Gms::new(nodes[behind].take().unwrap(), cfg, log, Some(&rec)).unwrap();
        assert_eq!(b.view().map(|v| v.id), Some(0));
        let mut out = Vec::new();
        for _ in 0..2000 {
            if b.view().is_some_and(|v| v.id == 1) {
                break;
            }
            p.poll(&mut Idle, &mut out).unwrap();
            b.poll(&mut Idle, &mut out).unwrap();
            sim.advance(std::time::Duration::from_millis(1));
        }
        // The whole view, verdict included: the restarted peer rebuilt view 1 from its log
        // with the logged verdict (`Record::Verdict`; recounted, `have` was 0 there where the
        // live view says 1: the passive survivor), and the catching-up member computed it from
        // the decision's holders. So every member reports the identical `Inadequate` (and
        // `ShardLost` message).
        let why = live.inadequate.clone().unwrap();
        assert!(why.lost && why.have == 1, "{why:?}");
        assert_eq!(p.view(), Some(&live), "the restarted peer's view 1");
        assert_eq!(b.view(), Some(&live), "the catching-up member's view 1");
        // It logged the decision with the same holders, so a member catching up from it in a
        // later restart computes the same view again.
        let (_, rec) = MemLog::open(b.log.bytes().to_vec());
        assert_eq!(
            rec.decision_with_holders_for(0)
                .map(|(_, h)| h.map(<[bool]>::to_vec)),
            Some(Some(holders))
        );
        let shards: Vec<Vec<NodeId>> = live.shards.iter().map(|s| s.members.clone()).collect();
        assert_eq!(rec.shards_for(1), Some(&shards[..]));
        // And a restart from its log now (it logged view 1 with the verdict) rebuilds it alike.
        assert_eq!(
            crate::restart::logged_view(&rec, 1, &layout).as_ref(),
            Some(&live)
        );
    }

    /// Regression (s21, `docs/MEMBERSHIP.md`, twenty-seventh part): a total restart where one
    /// member's log is cut anywhere after its decision ending view 0 (what a power loss or a
    /// crash between its appends of the view change can leave) installs one restart view at
    /// every member, with view 1's shards. Until s21 `Installed` was appended before the
    /// view's `Shards`: a log cut between them rebuilt view 1 with a fresh layout, and that
    /// member installed view 2 with other shards than its peers (found by
    /// `power_loss::two_shards_keep_every_durable_promise`, about 1 run in 100).
    #[test]
    fn a_restart_from_a_log_cut_between_a_views_records_installs_one_view_everywhere() {
        let (ids, cfg, layout, v0) = four_in_two_shards();
        // A member of shard 0 fails: its survivor stays alone in shard 0, which a fresh layout
        // of view 1's members would deal otherwise.
        let failed = v0.shards[0].members[1];
        let d = Decision {
            rank: 0,
            changes: vec![Change {
                kind: ChangeKind::Fail,
                node: failed,
            }],
            trim: Trim {
                view: 0,
                counts: ids.iter().map(|&m| (m, 0)).collect(),
            },
        };
        let holders: Vec<bool> = v0.members.iter().map(|_| true).collect();
        let v1 = View::next(1, d.next_members(&v0.members), Some(&v0.shards), &layout);
        assert_ne!(View::new(1, v1.members.clone(), &layout).shards, v1.shards);
        let mut log = MemLog::default();
        for r in crate::restart::installed_records(&v0) {
            log.append(&r).unwrap();
        }
        log.append(&decided_record(&d, Some(&holders))).unwrap();
        let decided = log.bytes().len();
        for r in crate::restart::installed_records(&v1) {
            log.append(&r).unwrap();
        }
        let whole = log.bytes().to_vec();
        let cut_member = v1.members[v1.members.len() - 1];
        let mut restarts = 0;
        for cut in decided..=whole.len() {
            let (_, rec) = MemLog::open(whole[..cut].to_vec());
            if rec.last_view().map(|v| v.0) != Some(1) {
                continue;
            }
            restarts += 1;
            let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
            let (sim, nodes) = Sim::cluster(SimConfig::seeded(cut as u64), 4, &[spec]).unwrap();
            sim.crash(failed);
            let mut gs: Vec<Gms<SimNode, MemLog>> = Vec::new();
            for (i, t) in nodes.into_iter().enumerate() {
                let id = NodeId(i as u32);
                if id == failed {
                    continue;
                }
                let bytes = if id == cut_member {
                    whole[..cut].to_vec()
                } else {
                    whole.clone()
                };
                let (log, rec) = MemLog::open(bytes);
                gs.push(Gms::new(t, cfg.clone(), log, Some(&rec)).unwrap());
            }
            let mut out = Vec::new();
            for _ in 0..5000 {
                if gs
                    .iter()
                    .all(|g| g.view().is_some_and(|v| v.id == 2) && g.restarting().is_none())
                {
                    break;
                }
                for g in &mut gs {
                    g.poll(&mut Idle, &mut out).unwrap();
                }
                sim.advance(std::time::Duration::from_micros(100));
            }
            let views: Vec<Option<&View>> = gs.iter().map(Gms::view).collect();
            assert!(
                views.iter().all(|v| v.is_some_and(|v| v.id == 2)),
                "cut at byte {cut} of {}: the restart did not complete: {views:?}",
                whole.len()
            );
            assert!(
                views.iter().all(|v| *v == views[0]),
                "cut at byte {cut} of {} (n{}'s log): the members installed view 2 differently: {views:?}",
                whole.len(),
                cut_member.0
            );
            let shards: Vec<&Vec<NodeId>> = v1.shards.iter().map(|s| &s.members).collect();
            let got: Vec<&Vec<NodeId>> = views[0]
                .unwrap()
                .shards
                .iter()
                .map(|s| &s.members)
                .collect();
            assert_eq!(got, shards, "view 2 keeps view 1's shards");
        }
        assert!(restarts > 0);
    }

    /// s23 (`docs/MEMBERSHIP.md`, forty-second part): a member restarting a view whose number
    /// a peer restarts with other members joins again only when its own view is the dead one.
    /// Here `j`'s log holds view 1 alone, a view that lost shard 1 (its log has no decision
    /// for view 0, as a joiner admitted by the losing decision: it cannot step back, see
    /// `restart::restart_view`); `h`'s log ends at another view 1 without `j`, the one a
    /// restart of view 0 installed. `h` is not in the lost view, and the lost view ran
    /// nowhere: `h` must go on restarting, `j` must join again. Fails with the lost view
    /// counted as evidence in `superseded_by` (`h` joins again too).
    #[test]
    fn a_view_number_restarted_twice_leaves_the_lost_view_not_the_other() {
        let (ids, cfg, layout, v0) = four_in_two_shards();
        let (shard0, shard1) = (v0.shards[0].members.clone(), v0.shards[1].members.clone());
        let (j, h) = (shard0[0], shard1[0]);
        let lost = View::next(1, shard0.clone(), Some(&v0.shards), &layout);
        assert!(lost.inadequate.as_ref().is_some_and(|w| w.lost), "{lost:?}");
        let d = Decision {
            rank: crate::restart::ballot(1, 0),
            changes: vec![Change {
                kind: ChangeKind::Fail,
                node: j,
            }],
            trim: Trim {
                view: 0,
                counts: ids.iter().map(|&m| (m, 0)).collect(),
            },
        };
        let live = View::next(1, d.next_members(&v0.members), Some(&v0.shards), &layout);
        assert!(live.inadequate.is_none() && !live.contains(j) && live.contains(h));
        let mut j_log = MemLog::default();
        j_log
            .append_all(&crate::restart::installed_records(&lost))
            .unwrap();
        let mut h_log = MemLog::default();
        let mut records = crate::restart::installed_records(&v0);
        records.push(decided_record(&d, None));
        records.extend(crate::restart::installed_records(&live));
        h_log.append_all(&records).unwrap();

        let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(5), 4, &[spec]).unwrap();
        let mut nodes: Vec<Option<SimNode>> = nodes.into_iter().map(Some).collect();
        for &m in ids.iter().filter(|&&m| m != j && m != h) {
            sim.crash(m);
        }
        let open = |log: &MemLog| MemLog::open(log.bytes().to_vec());
        let (log, rec) = open(&j_log);
        let mut gj = Gms::new(
            nodes[j.0 as usize].take().unwrap(),
            cfg.clone(),
            log,
            Some(&rec),
        )
        .unwrap();
        let (log, rec) = open(&h_log);
        let mut gh = Gms::new(nodes[h.0 as usize].take().unwrap(), cfg, log, Some(&rec)).unwrap();
        assert_eq!(gj.view(), Some(&lost));
        assert_eq!(gh.view(), Some(&live));
        let mut out = Vec::new();
        for _ in 0..20 {
            let _ = gj.poll(&mut Idle, &mut out);
            let _ = gh.poll(&mut Idle, &mut out);
            sim.advance(std::time::Duration::from_micros(100));
        }
        assert_eq!(gj.rejoined(), Some((1, 1)), "j restarting the lost view 1");
        assert_eq!(gh.rejoined(), None, "h restarting the live view 1");
    }

    /// s24 (`docs/MEMBERSHIP.md`, forty-eighth part): a follower holding a decision that
    /// removes a member it does not suspect installs without that member's echo. Four members;
    /// the leader 0 suspects 3 without publishing it (`Sst::suspect_known`, like an accused
    /// leader's suspicion: the row frozen, nothing written to 3 any more, no flag), proposes
    /// and decides its removal with 1 and 2. 3 never sees the proposal or the decision, so it
    /// never echoes, while its heartbeats keep 1 and 2 from suspecting it. Before s24 1 and 2
    /// waited for 3's echo (here for 20 ms of virtual time, a fifth of the suspicion timeout)
    /// while 0 ran view 1; now they install view 1 = [0, 1, 2] with it. And (s24 review
    /// follow-up) each suspects 3 as it installs, so that its link to 3 is cut before the
    /// `Group` would zero the old view's region set: 1 and 2 each raised exactly one suspicion
    /// of 3, `Local` (they neither read its echo nor suspected it before), and 3 learns that
    /// both cut it (`Remote`).
    #[test]
    fn a_follower_holding_a_decision_that_removes_a_member_it_does_not_suspect_installs_it() {
        let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
        let cfg = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
        let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(3), 4, &[spec]).unwrap();
        let mut g: Vec<Gms<SimNode, MemLog>> = (nodes.into_iter())
            .map(|n| Gms::new(n, cfg.clone(), MemLog::default(), None).unwrap())
            .collect();
        let mut out = Vec::new();
        let mut round = |g: &mut Vec<Gms<SimNode, MemLog>>| {
            for (i, c) in g.iter_mut().enumerate() {
                // 3, cut off by 1 and 2 once they install, stops as a minority.
                let polled = c.poll(&mut Idle, &mut out);
                assert!(polled.is_ok() || i == 3, "n{i}: {polled:?}");
            }
            sim.advance(std::time::Duration::from_micros(100));
        };
        for _ in 0..10 {
            round(&mut g);
        }
        assert!(g.iter().all(|c| c.view().is_some_and(|v| v.id == 0)));
        g[0].sst.suspect_known(NodeId(3)).unwrap();
        for _ in 0..200 {
            round(&mut g);
        }
        let want: Vec<NodeId> = ids[..3].to_vec();
        assert_eq!(
            g[0].view().map(|v| (v.id, v.members.clone())),
            Some((1, want.clone()))
        );
        let row3 = g[1].sst.row_of(NodeId(3)).unwrap();
        assert!(
            g[1].decision_of(row3, 0).is_none(),
            "the moment: 1 does not read 3's echo"
        );
        let why = |c: &Gms<SimNode, MemLog>, n: u32| -> Vec<Suspicion> {
            (c.sst.suspicions().iter())
                .filter(|s| s.0 == NodeId(n))
                .map(|s| s.1)
                .collect()
        };
        for i in [1, 2] {
            assert_eq!(
                g[i].view().map(|v| (v.id, v.members.clone())),
                Some((1, want.clone())),
                "n{i} holding the decision that removes 3"
            );
            assert_eq!(
                why(&g[i], 3),
                [Suspicion::Local],
                "n{i} suspects 3 as it installs the view without it"
            );
            assert_eq!(
                why(&g[3], i as u32),
                [Suspicion::Remote],
                "n{i} cut 3's link"
            );
        }
    }

    /// s24 review follow-up (forty-eighth part): the one-way absence is named again only for an
    /// incarnation its flag does not cover, and never for a `gms_linked` word of `u64::MAX`,
    /// whose flag would saturate and name it again on every poll.
    #[test]
    fn a_linked_word_of_u64_max_is_never_named_again() {
        assert_eq!(named_again(1, None), None);
        assert_eq!(named_again(2, Some(1)), None, "covered by the flag");
        assert_eq!(named_again(2, Some(2)), Some(2));
        assert_eq!(named_again(1, Some(7)), Some(7));
        assert_eq!(
            named_again(u64::MAX - 1, Some(u64::MAX - 1)),
            Some(u64::MAX - 1)
        );
        // Named, its flag is `u64::MAX`: the same word is covered from then on.
        assert_eq!(named_again(u64::MAX, Some(u64::MAX - 1)), None);
        for flag in [1, 5, u64::MAX] {
            assert_eq!(named_again(flag, Some(u64::MAX)), None, "flag {flag}");
        }
    }

    /// The decision block's holder section: the bitmap round-trips (past one word of bits), a
    /// decision without holders reads as not known, and a flag word this code never writes
    /// makes the block unreadable rather than a guess.
    #[test]
    fn decision_holders_round_trip_and_a_bad_flag_is_refused() {
        for u in [3, 70] {
            let (_sim, mut g) = core(u);
            let view = g.view().unwrap().clone();
            let d = Decision {
                rank: 0,
                changes: Vec::new(),
                trim: Trim {
                    view: view.id,
                    counts: view.members.iter().map(|&m| (m, 0)).collect(),
                },
            };
            let bits: Vec<bool> = (0..u).map(|i| i % 3 == 1 || i == u - 1).collect();
            g.publish_decision(&d, Some(&bits)).unwrap();
            let me = g.sst.my_row();
            let t = g.decision_of(me, view.id).unwrap();
            assert_eq!(t.holders.as_deref(), Some(&bits[..]), "u = {u}");
            assert_eq!(
                holder_ids(&view, t.holders.as_deref().unwrap()),
                (view.members.iter().zip(&bits))
                    .filter(|(_, b)| **b)
                    .map(|(&m, _)| m)
                    .collect::<Vec<_>>()
            );
            g.publish_decision(&d, None).unwrap();
            assert_eq!(g.decision_of(me, view.id).unwrap().holders, None);
            // The same block with a flag word neither 0 nor `HOLDERS_KNOWN`.
            let c = g.cfg.max_pending_changes;
            let mut p = vec![0u64; DecisionBlock::payload_len(u, c)];
            p[0] = view.id + 1;
            p[3 + c + u] = 7;
            g.write_block(g.f.dec, &p).unwrap();
            assert_eq!(g.decision_of(me, view.id), None);
        }
    }

    /// The leader's last check of a leave (`keep_holders`, `docs/MEMBERSHIP.md`, sixty-second
    /// part), on a view of two shards `[n0, n2]` and `[n1, n3]`: a leave stays unless it and the
    /// other changes leave its shard without a holder; a non-holder's leave always stays.
    #[test]
    fn a_leave_that_would_lose_its_shard_with_the_decided_holders_is_dropped_at_the_commit() {
        let layout = crate::view::EvenShards {
            shards: 2,
            min: 1,
            max: 2,
        };
        let view = View::new(0, (0..4).map(NodeId).collect(), &layout);
        assert_eq!(view.shards[1].members, [NodeId(1), NodeId(3)]);
        let leave = |n| Change {
            kind: ChangeKind::Leave,
            node: NodeId(n),
        };
        let fail = |n| Change {
            kind: ChangeKind::Fail,
            node: NodeId(n),
        };
        let all = [true; 4];
        let keep = |ch: &[Change], h: &[bool]| keep_holders(NodeId(0), &view, ch.to_vec(), h);
        // n3 holds: n1's leave stays.
        assert_eq!(keep(&[leave(1)], &all), [leave(1)]);
        // n3 fails in the same change: the leave is dropped, the failure stays.
        assert_eq!(keep(&[leave(1), fail(3)], &all), [fail(3)]);
        // n3 did not hold the state (a joiner mid-transfer): dropped.
        assert_eq!(keep(&[leave(1)], &[true, true, true, false]), []);
        // Both holders leave: the first is dropped, so the second keeps it as a holder.
        assert_eq!(keep(&[leave(1), leave(3)], &all), [leave(3)]);
        // A leaver that holds nothing cannot lose its shard: it stays.
        assert_eq!(
            keep(&[leave(3), fail(1)], &[true, true, true, false]),
            [leave(3), fail(1)]
        );
        // Another shard's leave beside it is unaffected.
        assert_eq!(
            keep(&[leave(2), leave(1), fail(3)], &all),
            [leave(2), fail(3)]
        );
    }

    /// The leader's last check of a leave in running mode (`keep_majority`, `docs/MEMBERSHIP.md`,
    /// ninety-seventh part), on a view of five: the leaves are kept in order while the members
    /// that every failure and the leaves kept so far leave are a majority of the view; joiners
    /// do not count.
    #[test]
    fn a_leave_whose_survivors_with_the_failures_are_no_majority_is_dropped_at_the_commit() {
        let ids: Vec<NodeId> = (0..6).map(NodeId).collect();
        let cfg = GmsConfig::new(RegionId(0), ids.clone(), ids[..5].to_vec());
        let layout = crate::view::EvenShards {
            shards: 1,
            min: 1,
            max: 8,
        };
        let view = View::new(0, ids[..5].to_vec(), &layout);
        let change = |kind, n| Change {
            kind,
            node: NodeId(n),
        };
        let (leave, fail, join) = (
            |n| change(ChangeKind::Leave, n),
            |n| change(ChangeKind::Fail, n),
            |n| change(ChangeKind::Join, n),
        );
        let keep = |ch: &[Change]| keep_majority(NodeId(0), &cfg, &view, &ids[..5], ch.to_vec());
        // Three of five stay: both leaves stay.
        assert_eq!(keep(&[leave(3), leave(4)]), [leave(3), leave(4)]);
        // A failure after them: the second leave is dropped, the first stays (three stay).
        assert_eq!(keep(&[leave(3), leave(4), fail(2)]), [leave(3), fail(2)]);
        // Two failures: no leave fits.
        assert_eq!(keep(&[leave(3), fail(1), fail(2)]), [fail(1), fail(2)]);
        // A joiner is no survivor of the view: the leave is still dropped.
        assert_eq!(
            keep(&[leave(3), leave(4), fail(2), join(5)]),
            [leave(3), fail(2), join(5)]
        );
        // Failures alone are left as they are.
        assert_eq!(keep(&[fail(1), fail(2)]), [fail(1), fail(2)]);
        // A suspected leaver (not alive: it may never have wedged) is removed by its leave
        // whatever the count: its leave is never dropped, and it counts as gone for the others.
        let alive = [NodeId(0), NodeId(1), NodeId(3)];
        let keep_alive = |ch: &[Change]| keep_majority(NodeId(0), &cfg, &view, &alive, ch.to_vec());
        assert_eq!(
            keep_alive(&[leave(3), leave(4), fail(2)]),
            [leave(4), fail(2)],
            "the suspected leaver 4 stays removed; the alive leaver 3 is dropped ({{0, 1, 3}} stays)"
        );
    }

    /// s26 (sixty-eighth part of `docs/MEMBERSHIP.md`): a leader does not act on the
    /// `gms_join` or `gms_leave` word of a row that is [`unheard`](Gms::unheard) (a readmitted
    /// incarnation whose own words have not landed: the words are the old incarnation's).
    /// Member 3 asks to leave and node 4 asks to join; the leader 0 wants both changes while
    /// the rows are heard, and neither once they are marked unheard. Fails without the guards
    /// in `Gms::wanted` (the changes are wanted while unheard).
    #[test]
    fn an_unheard_rows_join_and_leave_words_are_not_acted_on() {
        let ids: Vec<NodeId> = (0..5).map(NodeId).collect();
        let cfg = GmsConfig::new(RegionId(0), ids.clone(), ids[..4].to_vec());
        let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(1), 5, &[spec]).unwrap();
        let mut g: Vec<Gms<SimNode, MemLog>> = (nodes.into_iter())
            .map(|n| Gms::new(n, cfg.clone(), MemLog::default(), None).unwrap())
            .collect();
        let mut out = Vec::new();
        let mut round = |g: &mut Vec<Gms<SimNode, MemLog>>| {
            for c in g.iter_mut() {
                c.poll(&mut Idle, &mut out).unwrap();
            }
            sim.advance(std::time::Duration::from_micros(100));
        };
        for _ in 0..10 {
            round(&mut g);
        }
        g[3].leave().unwrap();
        g[4].request_join().unwrap();
        // Two rounds: the words land, then the members publish that they hold the state (the
        // leave check reads that).
        round(&mut g);
        round(&mut g);
        let view = g[0].view().cloned().unwrap();
        assert_eq!(view.id, 0);
        let change = |kind, n: u32| Change {
            kind,
            node: NodeId(n),
        };
        let heard = g[0].wanted(&view, Vec::new());
        assert!(heard.contains(&change(ChangeKind::Leave, 3)), "{heard:?}");
        assert!(heard.contains(&change(ChangeKind::Join, 4)), "{heard:?}");
        g[0].unheard = vec![None, None, None, Some(1), Some(1)];
        let unheard = g[0].wanted(&view, Vec::new());
        assert_eq!(unheard, [], "acted on an unheard row's words");
    }

    /// s26 (sixty-eighth part of `docs/MEMBERSHIP.md`, item 4; the review nit of the
    /// sixty-fifth part): `peer_ahead` does not apply `below_promise`, on purpose. Member 1
    /// restarts view 0 of `[0 .. 4]` holding a decision of ballot `r` and a promise of a later
    /// ballot `b2 > r`. Every member echoes `r`, and member 2 restarts view 1, which it
    /// installed with that decision. 1 has read only itself and 2 (the others are not wedged),
    /// so it cannot rule out a decision above `r` and does not catch up from 2
    /// (`below_promise`). Nor may it install view 1 on its own: it would run view 1 beside a
    /// member restarting it from its log (the s15 mode split), or run a view 1 that a decision
    /// under `b2` superseded. So `try_install` waits while 2 is one view ahead, and installs
    /// once 2 is back at view 0 (the control: nothing else held it). Fails if `peer_ahead`
    /// skips a peer `below_promise` skips.
    #[test]
    fn a_restarting_member_does_not_install_on_its_own_beside_a_peer_ahead_below_its_promise() {
        let ids: Vec<NodeId> = (0..5).map(NodeId).collect();
        let cfg = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
        let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(1), 5, &[spec]).unwrap();
        let mut g: Vec<Gms<SimNode, MemLog>> = (nodes.into_iter())
            .map(|n| Gms::new(n, cfg.clone(), MemLog::default(), None).unwrap())
            .collect();
        let settle = |g: &mut Vec<Gms<SimNode, MemLog>>| {
            for _ in 0..3 {
                for c in g.iter_mut() {
                    c.sst.poll_once().unwrap();
                }
                sim.advance(std::time::Duration::from_micros(100));
            }
        };
        settle(&mut g);
        let v0 = g[1].view().cloned().unwrap();
        let v1 = View::new(1, ids.clone(), &crate::view::EvenShards::single());
        let r = crate::restart::ballot(1, 0);
        let b2 = crate::restart::ballot(2, 3);
        let d = Decision {
            rank: r,
            changes: Vec::new(),
            trim: Trim {
                view: 0,
                counts: ids.iter().map(|&m| (m, 0)).collect(),
            },
        };
        for (i, c) in g.iter_mut().enumerate() {
            c.restart = Some(RestartState {
                promised: if i == 1 { b2 } else { r },
                ..RestartState::default()
            });
            c.publish_decision(&d, None).unwrap();
        }
        g[1].decision = Some(d.clone());
        g[2].publish_view_of(&v1).unwrap();
        settle(&mut g);
        let row2 = g[1].sst.row_of(NodeId(2)).unwrap();
        for m in &ids {
            let row = g[1].sst.row_of(*m).unwrap();
            assert_eq!(
                g[1].decision_of(row, 0).map(|t| t.rank),
                Some(r),
                "{m}'s echo"
            );
        }
        assert!(
            g[1].below_promise(row2, &v0, 1),
            "2 ahead below the promise"
        );
        let mut out = Vec::new();
        g[1].try_install(&v0, &ids, &mut out).unwrap();
        assert_eq!(
            g[1].view().map(|v| v.id),
            Some(0),
            "installed beside 2: {out:?}"
        );
        // The control: with 2 back at view 0 the same echoes install view 1.
        g[2].publish_view_of(&v0).unwrap();
        settle(&mut g);
        g[1].try_install(&v0, &ids, &mut out).unwrap();
        assert_eq!(g[1].view().map(|v| v.id), Some(1));
    }

    /// s27 (`docs/MEMBERSHIP.md`, seventy-eighth part): from construction on, a whole-row push
    /// (a late link, a readmission) posts the row's guards last, in order: the view and wedge
    /// blocks, the heartbeat, the own `admitted` slot. Every word a guard vouches for (the
    /// proposal and decision blocks, `join`, `gone`, the other rows' `admitted` slots) lies in
    /// none of them, so it goes in the push's first writes (the order of those writes is
    /// `squall-sst`'s `sim_late.rs`). Fails if the order is set only at a readmission (s25) or
    /// leaves a guard out.
    #[test]
    fn a_whole_row_push_posts_the_gms_guards_last_from_construction() {
        let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
        let cfg = GmsConfig::new(RegionId(0), ids.clone(), ids);
        let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (_sim, mut nodes) = Sim::cluster(SimConfig::seeded(1), 3, &[spec]).unwrap();
        let g = Gms::new(nodes.remove(1), cfg, MemLog::default(), None).unwrap();
        let (f, me) = (g.f, g.sst.my_row());
        assert_eq!(me, 1);
        let last = g.sst.row_push_last();
        assert_eq!(
            last,
            [
                squall_sst::FieldRange::span(f.view.range(), f.wedge.range()),
                g.sst.schema().heartbeat().range(),
                f.admitted.element(me).unwrap(),
            ]
        );
        let vouched = [
            f.prop.range(),
            f.dec.range(),
            f.join.range(),
            f.gone.range(),
            f.admitted.element(0).unwrap(),
            f.admitted.element(2).unwrap(),
        ];
        for v in vouched {
            for l in last {
                assert!(
                    v.offset + v.len <= l.offset || l.offset + l.len <= v.offset,
                    "{v:?} lies in the guard {l:?}"
                );
            }
        }
    }

    /// s28 review, item 2 (`docs/MEMBERSHIP.md`, eighty-fourth part): a row one view ahead,
    /// installed with a decision for the view ranked below a ballot, shows its member never
    /// echoes that ballot's decision (`never_echo`) only if its view did not lose a shard. A
    /// member that installed a lost view restarts the view before it in its next process and
    /// can still follow the ballot. Fails without the `lost_view` check (the lost row is
    /// counted).
    #[test]
    fn a_row_one_view_ahead_in_a_view_that_lost_a_shard_is_no_evidence_of_never_echoing() {
        let LostShard {
            cfg,
            v0,
            d,
            holders,
            with_holders: lost_view,
            without_holders: kept_view,
            ..
        } = lost_shard();
        assert!(
            lost_view.inadequate.as_ref().is_some_and(|w| w.lost),
            "{lost_view:?}"
        );
        assert!(
            kept_view.inadequate.as_ref().is_none_or(|w| !w.lost),
            "{kept_view:?}"
        );
        // Two members restarting at view 0 (their logs end there): an observer, and the peer
        // whose row is made to show view 1 installed with `d`.
        let (observer, peer) = (v0.shards[0].members[0], v0.shards[0].members[1]);
        let mut log = MemLog::default();
        for r in crate::restart::installed_records(&v0) {
            log.append(&r).unwrap();
        }
        let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(5), 4, &[spec]).unwrap();
        let mut nodes: Vec<Option<SimNode>> = nodes.into_iter().map(Some).collect();
        let build = |node: SimNode| {
            let (log, rec) = MemLog::open(log.bytes().to_vec());
            Gms::new(node, cfg.clone(), log, Some(&rec)).unwrap()
        };
        let mut o = build(nodes[observer.0 as usize].take().unwrap());
        let mut p = build(nodes[peer.0 as usize].take().unwrap());
        let mut out = Vec::new();
        for _ in 0..20 {
            let _ = o.poll(&mut Idle, &mut out);
            let _ = p.poll(&mut Idle, &mut out);
            sim.advance(std::time::Duration::from_micros(100));
        }
        let b = crate::restart::ballot(1, 0);
        let mut shown = |v: &View| {
            p.publish_view_of(v).unwrap();
            p.publish_decision(&d, Some(&holders)).unwrap();
            let row = o.sst.row_of(peer).unwrap();
            for _ in 0..20 {
                let at = (o.read_block(row, o.f.view)).and_then(|b| o.decode_view(row, &b));
                if at.is_some_and(|w| w.id == 1 && w.inadequate == v.inadequate)
                    && o.decision_of(row, 0).is_some()
                {
                    break;
                }
                let _ = o.poll(&mut Idle, &mut out);
                sim.advance(std::time::Duration::from_micros(20));
            }
            let at = (o.read_block(row, o.f.view)).and_then(|b| o.decode_view(row, &b));
            assert_eq!(
                at.as_ref(),
                Some(v),
                "the peer's view block at the observer"
            );
            assert_eq!(o.decision_of(row, 0).map(|t| t.rank), Some(1));
            o.never_echo(&v0, b).contains(&peer)
        };
        // Its view adequate: the peer left view 0 below the ballot for good.
        assert!(
            shown(&kept_view),
            "the row in an adequate view 1 is evidence"
        );
        // Its view lost a shard: its next process restarts view 0 again.
        assert!(
            !shown(&lost_view),
            "the row in a lost view 1 is no evidence"
        );
    }

    /// s28 (ninetieth part of `docs/MEMBERSHIP.md`, the review's first item): n0 restarts at
    /// view 1 from a log holding a decision for it (an earlier run of view 1: it fails n1)
    /// and a restart promise, and re-publishes both; n1 and n2 run view 1 again (a restart of
    /// view 0 installed it). Running, n1 neither reads n0's blocks as this run's nor wedges on
    /// n0's promise (n0 is the lowest-ranked: its leader). Once n0 leaves restart mode and
    /// installs the running view 1 (`follow_as_outsider`), its blocks for view 1 are empty,
    /// so no later leader of view 1 adopts the dead run's decision. Fails without the
    /// clearing in `follow_as_outsider` (n1 still reads the decision and the promise), and
    /// without `of_this_run` (n1 reads them before, and wedges).
    #[test]
    fn a_member_joining_the_running_run_of_its_restart_view_leaves_no_dead_runs_blocks() {
        let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
        let cfg = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
        let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(1), 3, &[spec]).unwrap();
        let mut g: Vec<Gms<SimNode, MemLog>> = (nodes.into_iter())
            .map(|n| Gms::new(n, cfg.clone(), MemLog::default(), None).unwrap())
            .collect();
        let settle = |g: &mut Vec<Gms<SimNode, MemLog>>| {
            for _ in 0..3 {
                for c in g.iter_mut() {
                    c.sst.poll_once().unwrap();
                }
                sim.advance(std::time::Duration::from_micros(100));
            }
        };
        settle(&mut g);
        let v1 = View::new(1, ids.clone(), &crate::view::EvenShards::single());
        let promise = crate::restart::ballot(1, 0);
        let dead = Decision {
            rank: 0,
            changes: vec![Change {
                kind: ChangeKind::Fail,
                node: NodeId(1),
            }],
            trim: Trim {
                view: 1,
                counts: ids.iter().map(|&m| (m, 7)).collect(),
            },
        };
        g[0].view = Some(v1.clone());
        g[0].restart = Some(RestartState {
            promised: promise,
            ..RestartState::default()
        });
        g[0].publish_view().unwrap();
        g[0].publish_proposal(1, promise, &[]).unwrap();
        g[0].publish_decision(&dead, None).unwrap();
        for c in &mut g[1..] {
            c.view = Some(v1.clone());
            c.publish_view().unwrap();
        }
        settle(&mut g);
        let row0 = g[1].sst.row_of(NodeId(0)).unwrap();
        assert!(g[1].decision_of(row0, 1).is_some(), "n0 re-published it");
        assert_eq!(
            g[1].run_decision_of(row0, &v1),
            None,
            "a dead run's decision"
        );
        assert_eq!(g[1].run_proposal_of(row0, &v1), None, "a restart's promise");
        let mut out = Vec::new();
        g[1].member_round(&v1, &mut Idle, &mut out).unwrap();
        assert_eq!(g[1].wedged, None, "wedged on n0's promise: {out:?}");

        g[0].rejoin(1, 0, &mut out).unwrap();
        g[0].follow_as_outsider(&mut out).unwrap();
        assert_eq!(g[0].view().map(|v| v.id), Some(1), "{out:?}");
        settle(&mut g);
        assert!(!g[1].restart_wedge(row0), "n0 runs view 1");
        assert_eq!(g[1].decision_of(row0, 1), None, "the dead run's decision");
        assert_eq!(g[1].proposal_of(row0, 1), None, "the restart's promise");
    }

    /// s28 (ninetieth part of `docs/MEMBERSHIP.md`, the review's third item): restart mode at
    /// view 1, n1 restarted (its logged counts published), n2 restarting view 0 (an outsider
    /// of the restart of view 1 unless it catches up). Counting with a majority only with
    /// members coming (`restarted` false) never counts n2 out, however long; the outsiders'
    /// clock starts with a restarted majority, and n2 is counted out a suspicion timeout after
    /// it. Fails with the eighty-fifth part's single clock (the flag ignored: n2 counted out in
    /// the first case).
    #[test]
    fn members_coming_start_the_absent_clock_only_not_the_outsiders() {
        let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
        let cfg = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
        let spec = Gms::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(1), 3, &[spec]).unwrap();
        let mut g: Vec<Gms<SimNode, MemLog>> = (nodes.into_iter())
            .map(|n| Gms::new(n, cfg.clone(), MemLog::default(), None).unwrap())
            .collect();
        let wait = |g: &mut Vec<Gms<SimNode, MemLog>>, ms: u64| {
            for _ in 0..ms {
                for c in g.iter_mut() {
                    c.sst.poll_once().unwrap();
                }
                sim.advance(std::time::Duration::from_millis(1));
            }
        };
        wait(&mut g, 3);
        let v0 = g[2].view().cloned().unwrap();
        let v1 = View::new(1, ids.clone(), &crate::view::EvenShards::single());
        for c in g.iter_mut() {
            c.restart = Some(RestartState::default());
        }
        for c in &mut g[..2] {
            c.view = Some(v1.clone());
            c.publish_view().unwrap();
        }
        g[1].wedge_in(&v1, &mut Idle).unwrap();
        g[2].publish_view_of(&v0).unwrap();
        wait(&mut g, 3);
        let row2 = g[0].sst.row_of(NodeId(2)).unwrap();
        assert!(g[0].outsider_in_restart(row2, &v1), "n2 restarts view 0");
        let outsiders = |g: &Gms<SimNode, MemLog>| g.restart.as_ref().unwrap().outsiders.clone();
        g[0].suspect_absent(&v1, false).unwrap();
        wait(&mut g, 300);
        g[0].suspect_absent(&v1, false).unwrap();
        assert_eq!(
            outsiders(&g[0]),
            Vec::<NodeId>::new(),
            "with members coming"
        );
        g[0].suspect_absent(&v1, true).unwrap();
        assert_eq!(
            outsiders(&g[0]),
            Vec::<NodeId>::new(),
            "the outsiders' clock starts now"
        );
        wait(&mut g, 150);
        g[0].suspect_absent(&v1, true).unwrap();
        assert_eq!(outsiders(&g[0]), vec![NodeId(2)], "a restarted majority");
    }
}
