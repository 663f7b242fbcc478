//! Configuration of the membership core, validated at start-up.

use std::time::Duration;

use squall_transport::{NodeId, RegionId};
use thiserror::Error;

use crate::view::{EvenShards, Layout, LayoutError, ShardLayout, check_shape, check_shard_count};

/// A configuration that cannot work, with what to change.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
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
    /// Total restart (see [`crate::restart`]): once a majority of the last view restarted, how
    /// long to wait for a member of that view whose link never came up (*absent*: not
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
    /// process and this member would stall the view for good. `None` (the default):
    /// [`DEFAULT_EXPECTED_LINK_FACTOR`] times [`suspicion_timeout`](GmsConfig::suspicion_timeout)
    /// (1 s with the defaults); set, it must exceed `suspicion_timeout`. See
    /// [`expected_link_wait`](GmsConfig::expected_link_wait).
    pub expected_link_timeout: Option<Duration>,
    /// A digest of the driver's own settings that must agree across members (a
    /// [`Group`](crate::group::Group) sets it to its epoch settings' digest,
    /// [`GroupConfig::settings_digest`](crate::group::GroupConfig::settings_digest)); 0 (the
    /// default) when the driver has none. Published with the core's own settings digest
    /// ([`SettingsDigest`](crate::settings::SettingsDigest)): a member whose digest differs is
    /// refused (docs/MEMBERSHIP.md, fifty-second part).
    pub driver_settings: u64,
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
            driver_settings: 0,
        }
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
        if let Some(have) = self.expected_link_timeout
            && have <= self.suspicion_timeout
        {
            return Err(ConfigError::ExpectedLink {
                have,
                suspicion: self.suspicion_timeout,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ids(n: u32) -> Vec<NodeId> {
        (0..n).map(NodeId).collect()
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
    }
}
