//! Total restart: the inspector's ballots.
//!
//! After every member stopped, members restart from their logs: [`Gms::new`](crate::Gms::new)
//! with what the log held puts the member in *restart mode* for its last logged view `L`. It
//! wedges at once (its received counts are what its epoch log holds) and publishes that, its
//! highest-ranked logged decision for `L`, the highest restart ballot it promised for `L`, and
//! the decision that ended `L - 1` (so peers one view behind can catch up). The restart leader
//! (the *inspector*: the lowest-ranked restarted member of `L` that nobody suspects) waits
//! until a majority of `L` restarted, then runs the ordinary view change of `L` with an empty
//! change list plus a failure for every member that did not restart, under a *ballot* instead
//! of its plain rank: it adopts the highest-ranked decision logged for `L` by anyone it can
//! see, or computes the trim from the logged counts (per sender the minimum over the restarted
//! members, cut to the gap-free round-robin prefix). Every member logs the decision, truncates
//! its epoch log past the trim, replays its log up to it, and the group installs `L + 1`.
//!
//! Why ballots: in a running view a leader's rank only grows (a suspected member never comes
//! back in that view), which is why "adopt the highest-ranked decision" is safe. Across
//! restarts the same member can lead again, so an inspector tags its proposal and decision with
//! [`ballot`]`(attempt, rank)`, above every ordinary rank, where `attempt` exceeds every ballot
//! a restarted member promised or logged. A member logs a [`Record::Promised`] before it
//! acknowledges an inspector's proposal and never acknowledges or accepts a lower ballot after.
//! This is Paxos' first phase on top of the GMS protocol: a decision that a majority logged
//! (and only those are acted on) is seen by the majority of every later attempt, which adopts
//! it; so a repeated restart reuses the decision an earlier attempt acted on.
//!
//! Several shards: the GMS log records each view's shards ([`installed_records`],
//! [`logged_view`]), so a restarting member knows which shard it held; its logged counts are
//! its shard's; the inspector's trim is per shard the minimum over the restarted members *of
//! that shard*; and the inspector also waits until every shard of the last view has a
//! restarted member holding its state ([`unrestored_shard`], [`Unrestored`]; a member whose
//! transfer never completed restarts without state and says so in its restart row): a shard's
//! messages are only in its members' logs. A member whose restart finds that the group went on without it (a peer two or
//! more views ahead, or a caught-up view that removed it) joins again as a new member and takes
//! its state by transfer ([`Gms::rejoined`](crate::Gms::rejoined)).
//!
//! *Catch-up.* A member restarting at `L` that sees a peer at `L + 1` installs `L + 1` with the
//! decision the peer published for `L` and takes the peer's mode there: every view block
//! carries a *restarting word* (set from the block's first write when its node restarts at
//! that view), so the member restarts at `L + 1` if the peer does and runs `L + 1` if the
//! peer runs it. A member whose echoes are complete does not install while some peer is
//! already past `L` (that peer's decision block may be among the echoes): it catches up from
//! it instead. Why this keeps every restarted member in one mode, and loses nothing:
//! `docs/MEMBERSHIP.md`, "The catch-up rule". A peer restarting at `L + 1` that logged a
//! decision for `L + 1` publishes that one, not the one for `L`, so a member at `L` may find no
//! source: a restart of `L + 1` counts such a linked member out a suspicion timeout into its
//! wait, and the member joins again once `L + 2` is installed (s27, seventy-fifth part, "the
//! second hang").
//!
//! *A lost last view* (s22). A view that lost a shard runs nowhere: every member that installs
//! it stops before it delivers anything of the decision's trim. A member whose log ends there
//! restarts the view before it instead ([`restart_view`]), and a decision that installs a lost
//! view is void for a restart: it is neither re-published nor adopted. So the lost shard's last
//! holders, whose logs end before the lost view, restart with the others and the shard runs
//! again: `docs/MEMBERSHIP.md`, thirty-second part.
//!
//! [`Record::Promised`]: crate::log::Record::Promised
//!
//! ```
//! use squall_membership::restart::{attempt_of, ballot, rank_of, INSPECTOR};
//! let b = ballot(2, 1);
//! assert!(b >= INSPECTOR);
//! assert_eq!((attempt_of(b), rank_of(b)), (2, 1));
//! assert_eq!(attempt_of(3), 0); // an ordinary rank
//! ```

use squall_transport::NodeId;

use crate::log::{Record, Recovered};
use crate::view::{Shard, ShardId, ShardLayout, View};

/// The lowest inspector ballot: ordinary leader ranks (a position in a view) are below it.
pub const INSPECTOR: u64 = 1 << 32;

/// The ballot of restart attempt `attempt` (1 or more) led by the member of rank `rank`.
pub fn ballot(attempt: u64, rank: u64) -> u64 {
    (attempt << 32) | (rank & 0xffff_ffff)
}

/// The attempt of a ballot (0 for an ordinary rank).
pub fn attempt_of(ballot: u64) -> u64 {
    ballot >> 32
}

/// The leader rank of a ballot (the ordinary rank itself for an ordinary rank).
pub fn rank_of(ballot: u64) -> u64 {
    ballot & 0xffff_ffff
}

/// A restart that cannot proceed because a shard of the last view has no restarted member:
/// that shard's state (its epochs' messages) is only in the logs of members that are not back,
/// so a trim computed without them could lose what they delivered. Derecho's rule, kept here:
/// a restart needs a majority of the last view **and** at least one member of every shard.
/// Only a member that restarts *holding* its shard's state counts (a joiner whose transfer
/// never completed before the shutdown restarts without it, says so in its restart row, and
/// would wait in the restart view for a transfer nobody can serve): the restart waits with
/// this reason until a holder restarts ([`Gms::restart_blocked`](crate::Gms::restart_blocked)).
///
/// ```
/// use squall_membership::restart::unrestored_shard;
/// use squall_membership::view::{EvenShards, View};
/// use squall_transport::NodeId;
/// let v = View::new(3, (0..4).map(NodeId).collect(), &EvenShards { shards: 2, min: 1, max: 2 });
/// let why = unrestored_shard(&v, &[NodeId(0), NodeId(1), NodeId(3)]);
/// assert_eq!(why, None);
/// let why = unrestored_shard(&v, &[NodeId(0), NodeId(2)]).unwrap();
/// assert_eq!((why.shard, why.members.clone()), (1, vec![NodeId(1), NodeId(3)]));
/// assert!(why.to_string().contains("shard 1"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "restart of view {view}: shard {shard} has no restarted member holding its state (its members {members:?} hold it in their logs, unless their transfer never completed); waiting for one of them"
)]
pub struct Unrestored {
    /// The last logged view being restarted.
    pub view: u64,
    /// The shard.
    pub shard: usize,
    /// Its members in that view, none of which has restarted.
    pub members: Vec<NodeId>,
}

/// The first shard of `view` none of whose members is among `restarted` (the restarted
/// members that hold their shard's state; empty shards, lost before the shutdown, hold nothing
/// and are skipped); `None` if every shard has one.
pub fn unrestored_shard(view: &View, restarted: &[NodeId]) -> Option<Unrestored> {
    view.shards.iter().enumerate().find_map(|(s, shard)| {
        (!shard.members.is_empty() && !shard.members.iter().any(|m| restarted.contains(m))).then(
            || Unrestored {
                view: view.id,
                shard: s,
                members: shard.members.clone(),
            },
        )
    })
}

/// The records that log the installation of `view`, in the order they are to be appended:
/// when the layout has several shards, [`Record::Shards`] (a restart must know which shard
/// each member held; with one shard the log is exactly what it was before shards existed),
/// then, when the view is inadequate, [`Record::Verdict`] (a restart reports the verdict the
/// member installed, see [`logged_view`]), and **last** [`Record::Installed`].
///
/// `Installed` comes last (since s21) because a log is read as its longest valid prefix: a
/// member whose log holds `Installed` then holds the view's shards and verdict too, whatever
/// a crash or a power loss took of the appends. (Until s21 `Installed` came first, each
/// record written and synced by itself: a power loss between the two syncs kept `Installed`
/// without `Shards`, the restart rebuilt that view with a fresh layout, and that member
/// installed the restart view with other shards than its peers did; `docs/MEMBERSHIP.md`,
/// twenty-seventh part.) Logs written before s21 hold `Shards`/`Verdict` right after
/// `Installed`; [`Recovered::verdict_for`](crate::log::Recovered::verdict_for) reads both.
///
/// ```
/// use squall_membership::log::Record;
/// use squall_membership::restart::installed_records;
/// use squall_membership::view::{EvenShards, View};
/// use squall_transport::NodeId;
/// let v = View::new(0, (0..4).map(NodeId).collect(), &EvenShards { shards: 2, min: 1, max: 3 });
/// let records = installed_records(&v);
/// assert!(matches!(records[..], [Record::Shards { .. }, Record::Installed { view: 0, .. }]));
/// ```
pub fn installed_records(view: &View) -> Vec<Record> {
    let mut out = Vec::new();
    if view.shards.len() > 1 {
        out.push(Record::Shards {
            view: view.id,
            shards: view.shards.iter().map(|s| s.members.clone()).collect(),
        });
    }
    if let Some(why) = &view.inadequate {
        out.push(Record::Verdict {
            view: view.id,
            why: why.clone(),
        });
    }
    out.push(Record::Installed {
        view: view.id,
        members: view.members.clone(),
    });
    out
}

/// View `id` as a member's log recorded it: its members and, when logged, its shards (else
/// the layout applied afresh, which is exact for one shard and for view 0), and, when logged,
/// its inadequacy verdict ([`Record::Verdict`]: the one the member installed, so a restarted
/// member reports the same [`Inadequate`](crate::view::Inadequate) as the live ones did; a
/// lost shard's survivor count depends on the holders of the view before, which this does not
/// recompute). A log written before verdicts were logged gets the verdict recomputed.
///
/// ```
/// use squall_membership::log::{Durable, MemLog};
/// use squall_membership::restart::{installed_records, logged_view};
/// use squall_membership::view::{EvenShards, View};
/// use squall_transport::NodeId;
/// let layout = EvenShards { shards: 2, min: 1, max: 3 };
/// let v0 = View::new(0, (0..4).map(NodeId).collect(), &layout);
/// // n0 fails: view 1 keeps the survivors in their shards (not what a fresh layout deals).
/// let v1 = View::next(1, vec![NodeId(1), NodeId(2), NodeId(3)], Some(&v0.shards), &layout);
/// let mut log = MemLog::default();
/// for r in installed_records(&v0).iter().chain(&installed_records(&v1)) { log.append(r)?; }
/// let (_, rec) = MemLog::open(log.bytes().to_vec());
/// assert_eq!(logged_view(&rec, 1, &layout).unwrap().shards, v1.shards);
/// assert_ne!(View::new(1, v1.members.clone(), &layout).shards, v1.shards);
/// # Ok::<(), squall_membership::log::LogError>(())
/// ```
pub fn logged_view(rec: &Recovered, id: u64, layout: &dyn ShardLayout) -> Option<View> {
    let members = rec.members_of(id)?.to_vec();
    Some(match rec.shards_for(id) {
        Some(shards) => {
            let prev: Vec<Shard> = shards
                .iter()
                .map(|m| Shard {
                    id: ShardId::default(),
                    members: m.clone(),
                })
                .collect();
            let mut v = View::next(id, members, Some(&prev), layout);
            if v.shards.len() == prev.len() {
                // Keep the names `View::next` gave the shards; the members are the logged ones.
                for (s, m) in v.shards.iter_mut().zip(shards) {
                    s.members.clone_from(m);
                }
            } else {
                v.shards = prev;
            }
            v
        }
        None => View::new(id, members, layout),
    })
    .map(|mut v| {
        if let Some(why) = rec.verdict_for(id) {
            v.inadequate = Some(why.clone());
        }
        v
    })
}

/// The view a member restarts from its log ([`Recovered`]): its last logged view `L`, as
/// [`logged_view`] rebuilds it, unless `L` *lost a shard* (its logged verdict says so,
/// [`Inadequate::lost`](crate::view::Inadequate::lost)) and the log holds no decision or
/// promise for `L` but holds view `L - 1` and the decision that ended it: then `L - 1`.
///
/// Why (`docs/MEMBERSHIP.md`, thirty-second part): a lost view runs nowhere. Every member that
/// installs it stops at once (`GroupError::ShardLost`, from data the decision carries), before
/// it delivers anything of the decision's trim of `L - 1` or cuts its epoch log there, and
/// nothing runs in `L`, so restarting `L` would only decide the loss again. Restarting `L - 1`
/// instead lets the lost shard's members of `L - 1` (the holders whose failure lost it, which
/// are not in `L`) restart with the others and replay the shard from their logs. The decision
/// that installed `L` is void for the restart (`restart::void`): it is not re-published or adopted,
/// so the restart computes its trim afresh from the restarted members' logged counts. The
/// restart view then takes `L`'s number, which no running view ever had.
///
/// ```
/// use squall_membership::log::{Durable, MemLog, Record};
/// use squall_membership::change::{Change, ChangeKind, Decision};
/// use squall_membership::restart::{installed_records, restart_view};
/// use squall_membership::trim::Trim;
/// use squall_membership::view::{EvenShards, View};
/// use squall_transport::NodeId;
/// let layout = EvenShards { shards: 2, min: 1, max: 2 };
/// let v0 = View::new(0, (0..3).map(NodeId).collect(), &layout);
/// // Shard 1 is [n1] alone; n1 fails: view 1 loses shard 1.
/// let d = Decision {
///     rank: 0,
///     changes: vec![Change { kind: ChangeKind::Fail, node: NodeId(1) }],
///     trim: Trim { view: 0, counts: vec![(NodeId(0), 4), (NodeId(1), 0), (NodeId(2), 4)] },
/// };
/// let v1 = View::next(1, vec![NodeId(0), NodeId(2)], Some(&v0.shards), &layout);
/// assert!(v1.inadequate.as_ref().is_some_and(|w| w.lost));
/// let mut log = MemLog::default();
/// for r in installed_records(&v0) { log.append(&r)?; }
/// log.append(&Record::Decided { decision: d, holders: None })?;
/// let (_, before) = MemLog::open(log.bytes().to_vec());
/// for r in installed_records(&v1) { log.append(&r)?; }
/// let (_, rec) = MemLog::open(log.bytes().to_vec());
/// // The log ends at the lost view 1: the member restarts view 0.
/// assert_eq!(restart_view(&rec, &layout).map(|v| v.id), Some(0));
/// assert_eq!(restart_view(&before, &layout), Some(v0));
/// # Ok::<(), squall_membership::log::LogError>(())
/// ```
pub fn restart_view(rec: &Recovered, layout: &dyn ShardLayout) -> Option<View> {
    let (id, members) = rec.last_view()?;
    let last =
        logged_view(rec, id, layout).unwrap_or_else(|| View::new(id, members.to_vec(), layout));
    let lost = last.inadequate.as_ref().is_some_and(|w| w.lost);
    let ran_nothing = rec.decision_for(id).is_none() && rec.promised_for(id) == 0;
    if !lost || !ran_nothing || id == 0 || rec.decision_for(id - 1).is_none() {
        return Some(last);
    }
    Some(logged_view(rec, id - 1, layout).unwrap_or(last))
}

/// What [`check_settings`] found for a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SettingsCheck {
    /// Nothing to compare: no view in the log, or a log written before s24 (no digest).
    Unchecked,
    /// The log's latest digest is the configured one.
    Same,
    /// A deliberate change of the driver's settings, accepted by
    /// [`GmsConfig::settings_from`](crate::GmsConfig::settings_from) naming the log's digest
    /// (`logged`): the configured digest is logged with the restart view's records.
    Accepted {
        /// The digest the log was written under.
        logged: crate::settings::SettingsDigest,
    },
}

/// A restart from `rec` under a configuration whose settings digest is `configured`: refused
/// when the log's latest [`Record::Settings`] holds another digest (settings that must agree
/// across the group changed while it was down; docs/MEMBERSHIP.md, fifty-second part, "s24
/// follow-up"), unless `from` (the configuration's
/// [`settings_from`](crate::GmsConfig::settings_from)) names exactly that digest and only the
/// driver's settings changed (sixty-first part). A log that holds no view restarts nothing and
/// is not checked; a log without a digest (written before s24) passes (the core says so at
/// `warn`).
pub(crate) fn check_settings(
    rec: &Recovered,
    configured: &crate::settings::SettingsDigest,
    from: Option<u64>,
) -> Result<SettingsCheck, crate::GmsError> {
    let logged = match rec.settings() {
        Some(logged) if rec.last_view().is_some() => logged,
        _ => return Ok(SettingsCheck::Unchecked),
    };
    if logged == *configured {
        return Ok(SettingsCheck::Same);
    }
    let Some(named) = from else {
        return Err(crate::GmsError::SettingsChanged {
            logged,
            configured: *configured,
            groups: logged.differing(configured),
        });
    };
    if named != logged.combined() {
        return Err(crate::GmsError::SettingsFromMismatch {
            named,
            logged,
            configured: *configured,
        });
    }
    let fixed = crate::settings::SettingsDigest {
        driver: configured.driver,
        ..logged
    };
    if fixed != *configured {
        return Err(crate::GmsError::SettingsChangeRefused {
            logged,
            configured: *configured,
            groups: fixed.differing(configured),
        });
    }
    Ok(SettingsCheck::Accepted { logged })
}

/// Checks, before a restart from `rec`, that the configured `layout` still lists every member
/// of the restarted view's shards ([`restart_view`]) for its logged subgroup
/// ([`ShardLayout::subgroups_of`]). A member stays in its shard, so one the layout no longer
/// lists (the configuration changed across the restart, e.g. a reservation added) would make
/// the restarted view and every view after it inadequate
/// ([`LayoutFault::Ineligible`](crate::view::LayoutFault::Ineligible)): the group would wait
/// for good. Every restarting member refuses instead, naming that member and its subgroup.
pub(crate) fn check_eligible(
    rec: &Recovered,
    layout: &dyn ShardLayout,
) -> Result<(), crate::gms::GmsError> {
    let Some(v) = restart_view(rec, layout) else {
        return Ok(());
    };
    for s in &v.shards {
        for &node in &s.members {
            if let Some(eligible) = layout.subgroups_of(node)
                && !eligible.contains(&s.id.subgroup)
            {
                tracing::error!(node = %node, view = v.id, shard = %s.id, ?eligible,
                    "restart: the logged view places a member in a subgroup the configured layout no longer lists for it; not restarting");
                return Err(crate::gms::GmsError::NoLongerEligible {
                    node,
                    view: v.id,
                    shard: s.id,
                    eligible,
                });
            }
        }
    }
    Ok(())
}

/// Whether decision `d` ending `view` (with the `holders` logged with it, by rank in `view`)
/// installs a view that lost a shard, computed exactly as every member that acted on it
/// installed it ([`View::next_holding`]). Such a decision is *void* for a restart: its next view
/// ran nowhere (every member that installs it stops before it delivers anything of `d`'s trim
/// or cuts its epoch log there, `Group`'s install), so nothing of it was acted on but log
/// records. A restarting member whose log holds it re-publishes the decision that installed
/// `view` instead (as if it had decided nothing in `view`), so that members one view behind
/// can catch up and the restart of `view` computes its trim afresh, with the lost shard's
/// last holders (`docs/MEMBERSHIP.md`, thirty-second part).
pub(crate) fn void(
    view: &View,
    d: &crate::change::Decision,
    holders: Option<&[bool]>,
    layout: &dyn ShardLayout,
) -> bool {
    let holders: Option<Vec<NodeId>> = holders.map(|h| {
        (view.members.iter().zip(h))
            .filter(|(_, h)| **h)
            .map(|(&m, _)| m)
            .collect()
    });
    let next = View::next_holding(
        view.id + 1,
        d.next_members(&view.members),
        Some(&view.shards),
        holders.as_deref(),
        layout,
    );
    next.inadequate.is_some_and(|w| w.lost)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::log::{Durable, MemLog};
    use crate::view::EvenShards;

    /// Every byte prefix of `views`' records as a member appends them (what a crash or a
    /// power loss can leave of its log) that holds the last view's `Installed` rebuilds that
    /// view exactly: members, shards and verdict.
    fn every_prefix_rebuilds(views: &[View], layout: &EvenShards) {
        let mut log = MemLog::default();
        for v in views {
            for r in installed_records(v) {
                log.append(&r).unwrap();
            }
        }
        let last = views.last().unwrap();
        let bytes = log.bytes().to_vec();
        let mut holding = 0;
        for n in 0..=bytes.len() {
            let (_, rec) = MemLog::open(bytes[..n].to_vec());
            if rec.last_view().map(|v| v.0) != Some(last.id) {
                continue;
            }
            holding += 1;
            assert_eq!(
                logged_view(&rec, last.id, layout).as_ref(),
                Some(last),
                "a log cut at byte {n} of {} holds view {}'s Installed but rebuilds it otherwise",
                bytes.len(),
                last.id
            );
        }
        assert!(holding > 0);
    }

    /// Regression (s21, `docs/MEMBERSHIP.md`, twenty-seventh part): `Installed` was appended
    /// before the view's `Shards` (each record synced by itself), so a power loss between the
    /// two syncs left a log whose last view was rebuilt with a fresh layout; that member
    /// installed the restart view with other shards than its peers
    /// (`power_loss::two_shards_keep_every_durable_promise`, 1 run in about 100). Now the
    /// shards are appended before `Installed`.
    #[test]
    fn a_log_cut_anywhere_after_a_views_installed_record_rebuilds_its_shards() {
        let layout = EvenShards {
            shards: 2,
            min: 1,
            max: 3,
        };
        let v0 = View::new(0, (0..4).map(NodeId).collect(), &layout);
        // n2 fails: the survivors keep their shards, which a fresh layout would deal otherwise.
        let v1 = View::next(
            1,
            vec![NodeId(0), NodeId(1), NodeId(3)],
            Some(&v0.shards),
            &layout,
        );
        assert_ne!(View::new(1, v1.members.clone(), &layout).shards, v1.shards);
        every_prefix_rebuilds(&[v0, v1], &layout);
    }

    /// The same for the verdict of an inadequate view, which a restart does not recount (it
    /// depends on the holders of the view before).
    #[test]
    fn a_log_cut_anywhere_after_a_views_installed_record_rebuilds_its_verdict() {
        let layout = EvenShards {
            shards: 2,
            min: 1,
            max: 3,
        };
        let v0 = View::new(0, (0..4).map(NodeId).collect(), &layout);
        // Shard 1 loses its holder; its other member never held the state: the shard is lost.
        let (failed, passive) = (v0.shards[1].members[0], v0.shards[1].members[1]);
        let members: Vec<NodeId> = v0
            .members
            .iter()
            .copied()
            .filter(|&m| m != failed)
            .collect();
        let holders: Vec<NodeId> = members.iter().copied().filter(|&m| m != passive).collect();
        let v1 = View::next_holding(1, members, Some(&v0.shards), Some(&holders), &layout);
        let why = v1.inadequate.clone().unwrap();
        assert!(why.lost, "{why:?}");
        assert_ne!(
            View::next(1, v1.members.clone(), Some(&v0.shards), &layout).inadequate,
            v1.inadequate
        );
        every_prefix_rebuilds(&[v0, v1], &layout);
    }
}
