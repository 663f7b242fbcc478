//! Configuration of the membership core, validated at start-up.

use std::time::Duration;

use squall_transport::{NodeId, RegionId};
use thiserror::Error;

use crate::view::{EvenShards, Layout, LayoutError, ShardLayout, check_shape, check_shard_count};

/// A configuration that cannot work, with what to change.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The universe is empty, unsorted or has duplicates.
    #[error("the universe must be a non-empty, strictly ascending list of node ids")]
    Universe,
    /// The initial view is empty, repeats a node, or names a node outside the universe.
    #[error("initial view: {0}")]
    Initial(&'static str),
    /// `max_members` below the initial view or above the universe.
    #[error(
        "max_members is {max} but must be between the initial view's size {initial} and the universe's size {universe}"
    )]
    MaxMembers {
        /// Configured.
        max: usize,
        /// Initial view size.
        initial: usize,
        /// Universe size.
        universe: usize,
    },
    /// The change ring cannot hold one failure per member of the largest view.
    #[error(
        "max_pending_changes is {have} but must be at least max_members ({need}) so that a failure of every member can always be recorded"
    )]
    Changes {
        /// Configured.
        have: usize,
        /// Needed.
        need: usize,
    },
    /// The shard layout settings.
    #[error("shard layout: {0}")]
    Shards(&'static str),
    /// The custom layout's settings ([`GmsConfig::layout`]).
    #[error("layout: {0}")]
    Layout(#[from] LayoutError),
    /// The failure detector settings.
    #[error(
        "failure detector: suspicion_timeout must exceed heartbeat_interval, which must be positive"
    )]
    Detector,
    /// The restart's wait for absent members is zero.
    #[error(
        "restart_absent_timeout must be positive: a restart gives the members of the last view that have not connected yet some time to come back (1 s by default)"
    )]
    RestartAbsent,
    /// The wait for an expected incarnation's link does not exceed the suspicion timeout.
    #[error(
        "expected_link_timeout is {have:?} but must exceed suspicion_timeout ({suspicion:?}): a member waiting for the link of a new incarnation that its view names gives it at least as long as it gives a silent member (leave it unset for 10 x suspicion_timeout)"
    )]
    ExpectedLink {
        /// Configured.
        have: Duration,
        /// The suspicion timeout it must exceed.
        suspicion: Duration,
    },
    /// A node of [`GmsConfig::hosts`] is not in the universe.
    #[error("hosts: n{node} is not in the universe")]
    HostOutside {
        /// The node.
        node: u32,
    },
    /// A node is listed twice in [`GmsConfig::hosts`] (in two hosts, or twice in one).
    #[error("hosts: n{node} is listed twice; a member runs in exactly one process")]
    HostTwice {
        /// The node.
        node: u32,
    },
    /// Two members of one host may be placed in the same subgroup (the layout's
    /// [`subgroups_of`](crate::view::ShardLayout::subgroups_of) lists it for both, or answers
    /// `None`, any subgroup, for one of them).
    #[error(
        "hosts: n{a} and n{b} share a host and may both be placed in subgroup {subgroup}; a host runs one member per subgroup it is in (pin each with reserved ids so that subgroups_of lists disjoint subgroups)"
    )]
    HostSharedSubgroup {
        /// One member.
        a: u32,
        /// The other.
        b: u32,
        /// A subgroup both may be placed in.
        subgroup: usize,
    },
    /// [`GmsConfig::settings_from`] names digest 0, which no log holds
    /// ([`SettingsDigest::combined`](crate::settings::SettingsDigest::combined) is never 0):
    /// a value never printed by a refusal, e.g. an unset or defaulted field.
    #[error(
        "settings_from is 0, which is not a settings digest: name the digest the log was written under, as a refused restart prints it (its `logged` digest, 16 hex digits), or leave settings_from unset"
    )]
    SettingsFromZero,
}

/// How a member runs the membership protocol. The same on every node of the universe.
///
/// ```
/// use squall_membership::GmsConfig;
/// use squall_transport::{NodeId, RegionId};
/// let cfg = GmsConfig::new(RegionId(9), (0..5).map(NodeId).collect(), (0..3).map(NodeId).collect());
/// assert_eq!(cfg.max_members, 5);
/// assert!(cfg.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GmsConfig {
    /// The GMS table's region (one per node, never recreated; sized by
    /// [`Gms::table_len`](crate::Gms::table_len)).
    pub region: RegionId,
    /// Every node that may ever be a member, ascending: the table has a row for each.
    pub universe: Vec<NodeId>,
    /// The members of view 0, in rank order.
    pub initial: Vec<NodeId>,
    /// The largest view allowed; joins beyond it are held back.
    pub max_members: usize,
    /// Capacity of the proposal's change ring (per view change). At least `max_members`; joins
    /// never take the room reserved for one failure per member.
    pub max_pending_changes: usize,
    /// The GMS table's heartbeat interval.
    pub heartbeat_interval: Duration,
    /// A member is suspected when its heartbeat has not moved for this long.
    pub suspicion_timeout: Duration,
    /// Stop ([`StopReason::Minority`](crate::StopReason::Minority)) when a member no longer sees
    /// a majority of its view. On by default; turning it off (logged as a warning) makes such a
    /// member wait, wedged, instead: commits and installs need a majority either way.
    pub partition_safety: bool,
    /// The default shard layout: one subgroup of even shards (one shard holding every member
    /// unless changed). Used when [`layout`](GmsConfig::layout) is `None`.
    pub shards: EvenShards,
    /// A layout of several subgroups ([`Subgroups`](crate::view::Subgroups)) or a custom one
    /// (any [`ShardLayout`]); when set it replaces [`shards`](GmsConfig::shards). See
    /// [`Layout`] for an example through a group.
    pub layout: Option<Layout>,
    /// Total restart (see [`crate::restart`]): once a majority of the last view restarted (a
    /// restarted member that bounced, its new process not yet readmitted, counting as
    /// restarted here), how long to wait for a member of that view whose link never came up (*absent*: not
    /// restarted, or unreachable) before counting it as not restarted: it is suspected, logged
    /// at `warn` with who is missing, and the inspector proposes its removal. The table never
    /// suspects an absent member for its silence, so without this a restart of a bare majority
    /// would wait for the others forever. Safety does not depend on it: the restart still needs
    /// a majority of the last view. Positive; default 1 s. (A member that is *linked* but not
    /// restarting — its log held no view, so it came back as an outsider — is counted as not
    /// restarted after [`suspicion_timeout`](GmsConfig::suspicion_timeout) instead.)
    pub restart_absent_timeout: Duration,
    /// How long a member that installed a view naming a new incarnation of a member whose link
    /// has not come up here waits for that link ([`Gms::expected_incarnation`](crate::Gms::expected_incarnation))
    /// before it counts the member failed, as it would a silent one: it publishes a suspicion
    /// of that incarnation (so the members linked to it cut it too), wedges and proposes its
    /// removal, logging at `warn` why. Without a bound, a one-way partition between the new
    /// process and this member would stall the view for good. Also (s29) how long a leader
    /// holds back the join of a new incarnation it readmitted for a member of the view that
    /// published a suspicion of the old incarnation and has not readmitted the new one (its
    /// link to the new process has not come up there): past it the join is proposed and that
    /// member waits for the link as above. The cost of that bound: once the join goes in,
    /// the view naming the new incarnation stalls its deliveries for up to
    /// `expected_link_timeout` at that member, which then counts the process failed; a view
    /// change removes it, and its incarnation stays excluded (suspected by all). A supervisor
    /// that restarts the process under a lasting one-way partition repeats this for each new
    /// process: each round costs a stall of up to about one timeout and two view changes. A
    /// leader that cannot readmit the new incarnation itself never proposes its join (it
    /// proposes only joins of rows it does not suspect), so this bound does not apply there
    /// and the new process waits outside for as long as that member leads and its link does
    /// not come up (a wait older than the bound). `None` (the default):
    /// [`DEFAULT_EXPECTED_LINK_FACTOR`] times [`suspicion_timeout`](GmsConfig::suspicion_timeout)
    /// (1 s with the defaults); set, it must exceed `suspicion_timeout`. See
    /// [`expected_link_wait`](GmsConfig::expected_link_wait).
    pub expected_link_timeout: Option<Duration>,
    /// Co-located members (`docs/MEMBERSHIP.md`, forty-seventh part): each entry is one host
    /// (one process) running one member per subgroup it is in. A node listed nowhere is its
    /// own host; empty (the default) means every member is its own host. A process fails as a
    /// whole, so a member that suspects a member of its view suspects every co-host of it in
    /// the same poll (*co-suspicion*), and one view change removes the whole host. A graceful
    /// leave is not spread: a co-host leaves on its own. Validated: every node in the universe,
    /// in at most one host, and the members of a host placed in pairwise different subgroups
    /// by the layout ([`ShardLayout::subgroups_of`]). With hosts, every majority of a view is
    /// counted by whole hosts: a host counts when all its members in the view do.
    ///
    /// ```
    /// use squall_membership::{ConfigError, GmsConfig};
    /// use squall_membership::view::{Layout, ShardPolicy, SubgroupPolicy, Subgroups};
    /// use squall_transport::{NodeId, RegionId};
    /// let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
    /// let pinned = |r: &[u32]| SubgroupPolicy {
    ///     shards: vec![ShardPolicy { min: 1, max: 2, reserved: r.iter().map(|&n| NodeId(n)).collect() }],
    /// };
    /// let mut cfg = GmsConfig::new(RegionId(0), ids.clone(), ids);
    /// // "cache" holds n0 and n1, "store" n2 and n3; host 0 runs n0 and n2, host 1 n1 and n3.
    /// cfg.layout = Some(Layout::new(Subgroups::new(vec![pinned(&[0, 1]), pinned(&[2, 3])])));
    /// cfg.hosts = vec![vec![NodeId(0), NodeId(2)], vec![NodeId(1), NodeId(3)]];
    /// assert_eq!(cfg.validate(), Ok(()));
    /// assert_eq!(cfg.co_hosts(NodeId(2)), [NodeId(0)]);
    /// cfg.hosts = vec![vec![NodeId(0), NodeId(1)]]; // both in "cache"
    /// assert_eq!(
    ///     cfg.validate(),
    ///     Err(ConfigError::HostSharedSubgroup { a: 0, b: 1, subgroup: 0 })
    /// );
    /// ```
    ///
    /// Running a host: the process builds one [`Group`](crate::group::Group) per member it
    /// hosts, from the one configuration every node shares, each over its own endpoint with
    /// the regions of its own subgroup ([`Group::layout_of`](crate::group::Group::layout_of)),
    /// and polls them all; each application object serves the subgroup its member is placed in.
    /// Here two hosts each run a "cache" and a "store" member (on the simulator, which gives
    /// every node its endpoint).
    ///
    /// ```
    /// use squall_membership::{GmsConfig, group::{Group, GroupConfig}, log::MemLog};
    /// use squall_membership::view::{Layout, ShardId, ShardPolicy, SubgroupPolicy, Subgroups};
    /// use squall_round_robin::Config;
    /// use squall_transport::{NodeId, RegionId};
    /// use squall_transport_mem::sim::{Sim, SimConfig, SimNode};
    ///
    /// let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
    /// let pinned = |r: [u32; 2]| SubgroupPolicy {
    ///     shards: vec![ShardPolicy { min: 1, max: 2, reserved: r.map(NodeId).to_vec() }],
    /// };
    /// let mut gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
    /// gms.layout = Some(Layout::new(Subgroups::new(vec![pinned([0, 1]), pinned([2, 3])])));
    /// gms.hosts = vec![vec![NodeId(0), NodeId(2)], vec![NodeId(1), NodeId(3)]];
    /// let epoch = Config { slot_size: 64, max_payload: 64, window: 4, ..Config::new(ids.clone()) };
    /// let cfg = GroupConfig::new(gms, epoch);
    /// let layouts = ids
    ///     .iter()
    ///     .map(|&n| Group::<SimNode, MemLog>::layout_of(&cfg, n))
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let (_sim, endpoints) = Sim::cluster_each(SimConfig::seeded(1), &layouts, &[])?;
    /// let mut endpoints: Vec<Option<SimNode>> = endpoints.into_iter().map(Some).collect();
    /// // Host 0's process: its members, each a Group over its own endpoint.
    /// let host: Vec<Group<SimNode, MemLog>> = cfg.gms.hosts[0]
    ///     .iter()
    ///     .filter_map(|n| endpoints[n.0 as usize].take())
    ///     .map(|t| Group::new(t, cfg.clone(), MemLog::default(), None))
    ///     .collect::<Result<_, _>>()?;
    /// let placed: Vec<ShardId> = host.iter().filter_map(|g| g.placement()).map(|p| p.shard).collect();
    /// assert_eq!(placed, [ShardId { subgroup: 0, shard: 0 }, ShardId { subgroup: 1, shard: 0 }]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub hosts: Vec<Vec<NodeId>>,
    /// A digest of the driver's own settings that must agree across members (a
    /// [`Group`](crate::group::Group) sets it to its epoch settings' digest,
    /// [`GroupConfig::settings_digest`](crate::group::GroupConfig::settings_digest)); 0 (the
    /// default) when the driver has none. Published with the core's own settings digest
    /// ([`SettingsDigest`](crate::settings::SettingsDigest)): a member whose digest differs is
    /// refused (docs/MEMBERSHIP.md, fifty-second part).
    pub driver_settings: u64,
    /// A deliberate settings change at a total restart (docs/MEMBERSHIP.md, sixty-first
    /// part): the digest the operator accepts moving *from*, as the refusal
    /// ([`GmsError::SettingsChanged`](crate::GmsError::SettingsChanged)) prints it (its
    /// `logged` digest's [`combined`](crate::settings::SettingsDigest::combined) word, 16 hex
    /// digits). `None` (the default): a restart under settings other than the log's is
    /// refused. With it, a restart whose log was written under exactly this digest may change
    /// the driver's settings ([`SettingsDigest::driver`](crate::settings::SettingsDigest::driver):
    /// a [`Group`](crate::group::Group)'s epoch template and profiles); a change of the
    /// membership or layout settings is still refused, and so is a log written under another
    /// digest (a typo or a stale value). Not part of the digest; ignored by a first start
    /// and by a restart from a log written before s24 (which holds no digest: restarted
    /// unchecked, as without it). `Some(0)` is refused by [`validate`](GmsConfig::validate)
    /// ([`ConfigError::SettingsFromZero`]): no digest is 0.
    ///
    /// ```
    /// use squall_membership::{GmsConfig, settings::SettingsDigest};
    /// use squall_transport::{NodeId, RegionId};
    /// let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
    /// let mut cfg = GmsConfig::new(RegionId(0), ids.clone(), ids);
    /// let old = SettingsDigest::of(&cfg, &cfg.shard_layout());
    /// cfg.driver_settings = 42; // e.g. another epoch window
    /// cfg.settings_from = Some(old.combined());
    /// assert_eq!(SettingsDigest::of(&cfg, &cfg.shard_layout()).membership, old.membership);
    /// ```
    pub settings_from: Option<u64>,
}

/// [`GmsConfig::expected_link_timeout`]'s default, in suspicion timeouts: a link that comes up
/// at most a few detector periods after the others' is waited for; one that takes ten suspicion
/// timeouts is not coming.
pub const DEFAULT_EXPECTED_LINK_FACTOR: u32 = 10;

impl GmsConfig {
    /// Defaults: every universe node may be a member, 10 ms heartbeats, 100 ms suspicion
    /// timeout, partition safety on, one shard.
    pub fn new(region: RegionId, universe: Vec<NodeId>, initial: Vec<NodeId>) -> GmsConfig {
        GmsConfig {
            region,
            max_members: universe.len(),
            max_pending_changes: universe.len(),
            universe,
            initial,
            heartbeat_interval: Duration::from_millis(10),
            suspicion_timeout: Duration::from_millis(100),
            partition_safety: true,
            shards: EvenShards::single(),
            layout: None,
            restart_absent_timeout: Duration::from_secs(1),
            expected_link_timeout: None,
            hosts: Vec::new(),
            driver_settings: 0,
            settings_from: None,
        }
    }

    /// The other members of `node`'s host ([`hosts`](GmsConfig::hosts)); empty for a node that
    /// is its own host.
    pub fn co_hosts(&self, node: NodeId) -> Vec<NodeId> {
        self.hosts
            .iter()
            .find(|h| h.contains(&node))
            .map(|h| h.iter().copied().filter(|&m| m != node).collect())
            .unwrap_or_default()
    }

    /// The majority rule (`docs/MEMBERSHIP.md`, forty-seventh part): whether the members of
    /// `view` for which `within` holds are a quorum of it. Without [`hosts`](GmsConfig::hosts),
    /// more than half of `view` (exactly [`View::majority`](crate::View::majority)). With hosts,
    /// the members of `view` are grouped by host (a node in no host is its own), and a host
    /// counts only if `within` holds for **all** its members in `view`; more than half of
    /// `view`'s hosts must count. Two quorums of a view then share a whole host, so a member.
    pub(crate) fn is_quorum(&self, view: &[NodeId], within: &dyn Fn(NodeId) -> bool) -> bool {
        if self.hosts.is_empty() {
            return view.iter().filter(|&&m| within(m)).count() > view.len() / 2;
        }
        let mut hosts: std::collections::BTreeMap<Result<usize, NodeId>, bool> =
            std::collections::BTreeMap::new();
        for &m in view {
            let host = self.hosts.iter().position(|h| h.contains(&m)).ok_or(m);
            let whole = hosts.entry(host).or_insert(true);
            *whole &= within(m);
        }
        hosts.values().filter(|&&w| w).count() > hosts.len() / 2
    }

    /// Checks [`hosts`](GmsConfig::hosts) against the universe and the layout.
    fn validate_hosts(&self) -> Result<(), ConfigError> {
        let layout = self.shard_layout();
        let subgroups = layout.shape().len();
        let mut seen = std::collections::BTreeSet::new();
        for host in &self.hosts {
            for (i, &a) in host.iter().enumerate() {
                if !self.universe.contains(&a) {
                    return Err(ConfigError::HostOutside { node: a.0 });
                }
                if !seen.insert(a) {
                    return Err(ConfigError::HostTwice { node: a.0 });
                }
                let of = |n: NodeId| {
                    layout
                        .subgroups_of(n)
                        .unwrap_or_else(|| (0..subgroups).collect())
                };
                for &b in &host[..i] {
                    let theirs = of(b);
                    if let Some(&subgroup) = of(a).iter().find(|g| theirs.contains(g)) {
                        return Err(ConfigError::HostSharedSubgroup {
                            a: b.0,
                            b: a.0,
                            subgroup,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// The bound on the wait for an expected incarnation's link in force:
    /// [`expected_link_timeout`](GmsConfig::expected_link_timeout), or
    /// [`DEFAULT_EXPECTED_LINK_FACTOR`] times the suspicion timeout when unset.
    ///
    /// ```
    /// use squall_membership::GmsConfig;
    /// use squall_transport::{NodeId, RegionId};
    /// use std::time::Duration;
    /// let mut cfg = GmsConfig::new(RegionId(0), (0..3).map(NodeId).collect(), (0..3).map(NodeId).collect());
    /// assert_eq!(cfg.expected_link_wait(), Duration::from_secs(1)); // 10 x 100 ms
    /// cfg.expected_link_timeout = Some(Duration::from_millis(50)); // not above the suspicion timeout
    /// assert!(cfg.validate().unwrap_err().to_string().contains("must exceed suspicion_timeout"));
    /// cfg.expected_link_timeout = Some(Duration::from_millis(300));
    /// assert!(cfg.validate().is_ok());
    /// assert_eq!(cfg.expected_link_wait(), Duration::from_millis(300));
    /// ```
    pub fn expected_link_wait(&self) -> Duration {
        self.expected_link_timeout
            .unwrap_or(self.suspicion_timeout * DEFAULT_EXPECTED_LINK_FACTOR)
    }

    /// The layout in force: [`layout`](GmsConfig::layout) if set, else
    /// [`shards`](GmsConfig::shards).
    ///
    /// ```
    /// use squall_membership::GmsConfig;
    /// use squall_membership::view::{Layout, ShardLayout, SubgroupPolicy, Subgroups};
    /// use squall_transport::{NodeId, RegionId};
    /// let ids: Vec<NodeId> = (0..6).map(NodeId).collect();
    /// let mut cfg = GmsConfig::new(RegionId(0), ids.clone(), ids);
    /// assert_eq!(cfg.shard_layout().shape().len(), 1);
    /// cfg.layout = Some(Layout::new(Subgroups::new(vec![
    ///     SubgroupPolicy::fixed_even_shards(1, 2),
    ///     SubgroupPolicy::fixed_even_shards(2, 2),
    /// ])));
    /// assert_eq!(cfg.shard_layout().shape().iter().map(Vec::len).collect::<Vec<_>>(), [1, 2]);
    /// assert!(cfg.validate().is_ok());
    /// ```
    pub fn shard_layout(&self) -> Layout {
        self.layout
            .clone()
            .unwrap_or_else(|| Layout::new(self.shards))
    }

    /// Checks every setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.universe.is_empty() || self.universe.windows(2).any(|w| w[0] >= w[1]) {
            return Err(ConfigError::Universe);
        }
        if self.initial.is_empty() {
            return Err(ConfigError::Initial("it must have at least one member"));
        }
        for (i, m) in self.initial.iter().enumerate() {
            if !self.universe.contains(m) {
                return Err(ConfigError::Initial("a member is not in the universe"));
            }
            if self.initial[..i].contains(m) {
                return Err(ConfigError::Initial("a member is listed twice"));
            }
        }
        if self.max_members < self.initial.len() || self.max_members > self.universe.len() {
            return Err(ConfigError::MaxMembers {
                max: self.max_members,
                initial: self.initial.len(),
                universe: self.universe.len(),
            });
        }
        if self.max_pending_changes < self.max_members {
            return Err(ConfigError::Changes {
                have: self.max_pending_changes,
                need: self.max_members,
            });
        }
        match &self.layout {
            None => self.shards.validate().map_err(ConfigError::Shards)?,
            Some(l) => {
                check_shape(&l.shape())?;
                l.validate(&self.universe)?;
                check_shard_count(l, &self.universe, &self.initial, self.max_members)?;
            }
        }
        if self.heartbeat_interval.is_zero() || self.suspicion_timeout <= self.heartbeat_interval {
            return Err(ConfigError::Detector);
        }
        if self.restart_absent_timeout.is_zero() {
            return Err(ConfigError::RestartAbsent);
        }
        if self.settings_from == Some(0) {
            return Err(ConfigError::SettingsFromZero);
        }
        if let Some(have) = self.expected_link_timeout
            && have <= self.suspicion_timeout
        {
            return Err(ConfigError::ExpectedLink {
                have,
                suspicion: self.suspicion_timeout,
            });
        }
        self.validate_hosts()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ids(n: u32) -> Vec<NodeId> {
        (0..n).map(NodeId).collect()
    }

    /// s26 (docs/MEMBERSHIP.md, seventieth part; review N7): `settings_from` naming digest 0
    /// is refused at validation, saying what to name instead; any other value passes (it is
    /// compared with the log's digest at a restart).
    #[test]
    fn a_zero_settings_from_is_refused() {
        let mut cfg = GmsConfig::new(RegionId(0), ids(3), ids(3));
        cfg.settings_from = Some(0);
        let e = cfg.validate().unwrap_err();
        assert_eq!(e, ConfigError::SettingsFromZero);
        assert!(
            e.to_string().contains("not a settings digest")
                && e.to_string().contains("leave settings_from unset"),
            "{e}"
        );
        let digest = crate::settings::SettingsDigest::of(&cfg, &cfg.shard_layout());
        assert_ne!(digest.combined(), 0);
        cfg.settings_from = Some(digest.combined());
        assert_eq!(cfg.validate(), Ok(()));
    }

    /// s26 (seventieth part; review N7): a log written before s24 holds no settings digest;
    /// a restart from it is not checked, with `settings_from` or without (named or not,
    /// nothing in the log to compare it with), as the fifty-second part decided for such logs.
    #[test]
    fn a_log_without_a_digest_restarts_unchecked_with_or_without_settings_from() {
        use crate::log::{Durable, MemLog, Record};
        use crate::restart::{SettingsCheck, check_settings};
        let cfg = GmsConfig::new(RegionId(0), ids(3), ids(3));
        let digest = crate::settings::SettingsDigest::of(&cfg, &cfg.shard_layout());
        let mut log = MemLog::default();
        log.append(&Record::Installed {
            view: 0,
            members: ids(3),
        })
        .unwrap();
        let (_, rec) = MemLog::open(log.bytes().to_vec());
        assert!(rec.last_view().is_some() && rec.settings().is_none());
        for from in [None, Some(digest.combined()), Some(0x1234)] {
            let got = check_settings(&rec, &digest, from);
            assert!(
                matches!(got, Ok(SettingsCheck::Unchecked)),
                "settings_from {from:?}: {got:?}"
            );
        }
    }

    #[test]
    fn every_bad_setting_is_refused_with_what_to_change() {
        let ok = GmsConfig::new(RegionId(0), ids(4), ids(3));
        assert_eq!(ok.validate(), Ok(()));
        let bad = |f: &dyn Fn(&mut GmsConfig)| {
            let mut c = ok.clone();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(
            bad(&|c| c.universe = vec![NodeId(1), NodeId(0)]),
            ConfigError::Universe
        );
        assert!(matches!(
            bad(&|c| c.initial.clear()),
            ConfigError::Initial(_)
        ));
        assert!(matches!(
            bad(&|c| c.initial.push(NodeId(9))),
            ConfigError::Initial(_)
        ));
        assert!(matches!(
            bad(&|c| c.initial.push(NodeId(0))),
            ConfigError::Initial(_)
        ));
        assert!(matches!(
            bad(&|c| c.max_members = 2),
            ConfigError::MaxMembers { .. }
        ));
        let e = bad(&|c| c.max_pending_changes = 3);
        assert_eq!(e, ConfigError::Changes { have: 3, need: 4 });
        assert!(e.to_string().contains("at least max_members (4)"));
        assert!(matches!(
            bad(&|c| c.shards.shards = 0),
            ConfigError::Shards(_)
        ));
        assert_eq!(
            bad(&|c| c.suspicion_timeout = c.heartbeat_interval),
            ConfigError::Detector
        );
        let e = bad(&|c| c.restart_absent_timeout = Duration::ZERO);
        assert_eq!(e, ConfigError::RestartAbsent);
        assert!(
            e.to_string()
                .contains("restart_absent_timeout must be positive")
        );
        let e = bad(&|c| c.expected_link_timeout = Some(c.suspicion_timeout));
        assert_eq!(
            e,
            ConfigError::ExpectedLink {
                have: ok.suspicion_timeout,
                suspicion: ok.suspicion_timeout
            }
        );
        assert!(e.to_string().contains("must exceed suspicion_timeout"));
        let mut slow = ok.clone();
        slow.suspicion_timeout = Duration::from_secs(5);
        assert_eq!(slow.validate(), Ok(()), "the default follows the timeout");
        assert_eq!(slow.expected_link_wait(), Duration::from_secs(50));
        let e = bad(&|c| c.hosts = vec![vec![NodeId(0), NodeId(9)]]);
        assert_eq!(e, ConfigError::HostOutside { node: 9 });
        let e = bad(&|c| c.hosts = vec![vec![NodeId(0)], vec![NodeId(0)]]);
        assert_eq!(e, ConfigError::HostTwice { node: 0 });
        assert!(e.to_string().contains("n0 is listed twice"));
        // One subgroup for all: any two co-hosted members could share it.
        let e = bad(&|c| c.hosts = vec![vec![NodeId(1), NodeId(2)]]);
        assert_eq!(
            e,
            ConfigError::HostSharedSubgroup {
                a: 1,
                b: 2,
                subgroup: 0
            }
        );
        let mut single = ok.clone();
        single.hosts = vec![vec![NodeId(1)], vec![NodeId(3)]];
        assert_eq!(single.validate(), Ok(()), "a host of one member is allowed");
        assert!(single.co_hosts(NodeId(1)).is_empty());
    }

    /// The majority rule: without hosts exactly `View::majority` for every subset of views of
    /// 1 to 7 members; with hosts, counted by whole hosts.
    #[test]
    fn a_quorum_is_a_member_majority_without_hosts_and_whole_hosts_with_them() {
        let plain = GmsConfig::new(RegionId(0), ids(7), ids(7));
        for n in 1..=7u32 {
            let view = ids(n);
            for set in 0u32..(1 << n) {
                let within = |m: NodeId| set & (1 << m.0) != 0;
                let count = view.iter().filter(|&&m| within(m)).count();
                assert_eq!(
                    plain.is_quorum(&view, &within),
                    count > n as usize / 2,
                    "{n} members, set {set:b}"
                );
            }
        }
        // Host {0, 1, 2} beside hosts {3}, {4}, {5}: four hosts.
        let mut hosted = GmsConfig::new(RegionId(0), ids(6), ids(6));
        hosted.hosts = vec![ids(3)];
        let view = ids(6);
        let of = |nodes: &[u32]| {
            let nodes = nodes.to_vec();
            move |m: NodeId| nodes.contains(&m.0)
        };
        assert!(
            hosted.is_quorum(&view, &of(&[3, 4, 5])),
            "3 of 4 hosts, 3 of 6 members"
        );
        assert!(!hosted.is_quorum(&view, &of(&[0, 1, 2, 3])), "2 of 4 hosts");
        // Host 0 counts only whole: n0 and n1 without n2 do not count it.
        assert!(!hosted.is_quorum(&view, &of(&[0, 1, 3, 4])));
        assert!(hosted.is_quorum(&view, &of(&[0, 1, 2, 3, 4])));
        // A host with no member in the view is not counted among the view's hosts.
        assert!(hosted.is_quorum(&ids(6)[3..], &of(&[3, 4])));
    }
}
