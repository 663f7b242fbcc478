//! The settings digest (docs/MEMBERSHIP.md, fifty-second part): a stable hash of every setting
//! that must agree across the members of a group, published once in the GMS table so that a
//! member configured differently is refused instead of running with another row layout or
//! computing other views.
//!
//! The function is FNV-1a (64 bit) over a canonical encoding: each setting is a `u64` word
//! written little-endian, lists are prefixed by their length, and each group of settings starts
//! with a tag word. The result is never 0 (0 in the table means "not written yet").
//!
//! Three sub-digests are published, so that a refusal can say which group of settings differs:
//! - [`SettingsDigest::membership`]: the universe, the initial view, `max_members`,
//!   `max_pending_changes`, the majority rule (`partition_safety`) and the co-located hosts
//!   ([`GmsConfig::hosts`], which decide how majorities are counted);
//! - [`SettingsDigest::layout`]: the layout's shape (every subgroup's shard bounds) and, per
//!   universe node, the subgroups it may be placed in (`subgroups_of`, where reservations show).
//!   A custom layout's `assign` cannot be digested by its behaviour: it must be the same code
//!   at every node;
//! - [`SettingsDigest::driver`]: what the driver puts in [`GmsConfig::driver_settings`]
//!   (a [`Group`](crate::group::Group) puts the digest of its epoch template and profiles
//!   there, see [`GroupConfig::settings_digest`](crate::group::GroupConfig::settings_digest)).
//!
//! Settings that may differ are left out: timeouts and intervals (each member's own failure
//! detector), region ids and lengths (exchanged and checked at link-up), log paths.

use std::fmt;

use crate::config::GmsConfig;
use crate::view::ShardLayout;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// An FNV-1a (64 bit) hash over `u64` words, each fed little-endian.
///
/// ```
/// use squall_membership::settings::Hasher;
/// let mut a = Hasher::new(1);
/// a.word(7);
/// let mut b = Hasher::new(1);
/// b.word(8);
/// assert_ne!(a.finish(), b.finish());
/// assert_ne!(Hasher::new(0).finish(), 0);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Hasher(u64);

impl Hasher {
    /// A hash of one group of settings, started with its `tag`.
    pub fn new(tag: u64) -> Hasher {
        let mut h = Hasher(FNV_OFFSET);
        h.word(tag);
        h
    }

    /// Feeds one word.
    pub fn word(&mut self, w: u64) {
        for b in w.to_le_bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(FNV_PRIME);
        }
    }

    /// Feeds a length-prefixed list of words.
    pub fn words(&mut self, ws: impl ExactSizeIterator<Item = u64>) {
        self.word(ws.len() as u64);
        for w in ws {
            self.word(w);
        }
    }

    /// The hash; never 0 (0 stands for "not written").
    pub fn finish(self) -> u64 {
        self.0.max(1)
    }
}

/// The settings digest a member publishes: one word per group of settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettingsDigest {
    /// Universe, initial view, `max_members`, `max_pending_changes`, `partition_safety`,
    /// `hosts`.
    pub membership: u64,
    /// The layout's shape and every universe node's `subgroups_of`.
    pub layout: u64,
    /// The driver's settings ([`GmsConfig::driver_settings`]).
    pub driver: u64,
}

impl SettingsDigest {
    /// Words in the GMS table.
    pub(crate) const WORDS: usize = 3;

    /// The digest of `cfg` with `layout` (the layout in force).
    ///
    /// ```
    /// use squall_membership::{GmsConfig, settings::SettingsDigest};
    /// use squall_transport::{NodeId, RegionId};
    /// use std::time::Duration;
    /// let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
    /// let cfg = GmsConfig::new(RegionId(0), ids.clone(), ids[..3].to_vec());
    /// let d = SettingsDigest::of(&cfg, &cfg.shard_layout());
    /// let mut other = cfg.clone();
    /// other.suspicion_timeout = Duration::from_secs(1); // may differ
    /// assert_eq!(SettingsDigest::of(&other, &other.shard_layout()), d);
    /// other.max_members = 3; // must agree
    /// assert_ne!(SettingsDigest::of(&other, &other.shard_layout()).membership, d.membership);
    /// ```
    pub fn of(cfg: &GmsConfig, layout: &dyn ShardLayout) -> SettingsDigest {
        let mut m = Hasher::new(1);
        m.words(cfg.universe.iter().map(|n| u64::from(n.0)));
        m.words(cfg.initial.iter().map(|n| u64::from(n.0)));
        m.word(cfg.max_members as u64);
        m.word(cfg.max_pending_changes as u64);
        m.word(u64::from(cfg.partition_safety));
        // Hosts shape every majority (forty-seventh part): canonical, each host sorted, then
        // the hosts in order.
        let mut hosts: Vec<Vec<u64>> = (cfg.hosts.iter())
            .map(|h| {
                let mut h: Vec<u64> = h.iter().map(|n| u64::from(n.0)).collect();
                h.sort_unstable();
                h
            })
            .collect();
        hosts.sort_unstable();
        m.word(hosts.len() as u64);
        for h in &hosts {
            m.words(h.iter().copied());
        }
        let mut l = Hasher::new(2);
        let shape = layout.shape();
        l.word(shape.len() as u64);
        for shards in &shape {
            l.word(shards.len() as u64);
            for b in shards {
                l.word(b.min as u64);
                l.word(b.max as u64);
            }
        }
        for &n in &cfg.universe {
            match layout.subgroups_of(n) {
                None => l.word(u64::MAX),
                Some(gs) => l.words(gs.iter().map(|&g| g as u64)),
            }
        }
        SettingsDigest {
            membership: m.finish(),
            layout: l.finish(),
            driver: cfg.driver_settings.max(1),
        }
    }

    /// The three words as published.
    pub(crate) fn words(&self) -> [u64; Self::WORDS] {
        [self.membership, self.layout, self.driver]
    }

    /// From the published words; `None` while not written (a zero word).
    pub(crate) fn from_words(w: &[u64]) -> Option<SettingsDigest> {
        match *w {
            [membership, layout, driver] if membership != 0 && layout != 0 && driver != 0 => {
                Some(SettingsDigest {
                    membership,
                    layout,
                    driver,
                })
            }
            _ => None,
        }
    }

    /// One word for messages: the hash of the three, never 0 (a hash of 0 counts as 1), so
    /// that 0 can be refused as a [`GmsConfig::settings_from`](crate::GmsConfig::settings_from)
    /// ([`ConfigError::SettingsFromZero`](crate::ConfigError::SettingsFromZero)).
    pub fn combined(&self) -> u64 {
        let mut h = Hasher::new(4);
        h.words(self.words().into_iter());
        h.finish().max(1)
    }

    /// Whether `other` differs from this digest in the driver's settings only: the one change
    /// a total restart can accept ([`GmsConfig::settings_from`](crate::GmsConfig::settings_from),
    /// `docs/MEMBERSHIP.md`, sixty-first part).
    ///
    /// ```
    /// use squall_membership::settings::SettingsDigest;
    /// let logged = SettingsDigest { membership: 1, layout: 2, driver: 3 };
    /// assert!(logged.differs_in_driver_only(&SettingsDigest { driver: 4, ..logged }));
    /// assert!(!logged.differs_in_driver_only(&SettingsDigest { membership: 5, driver: 4, ..logged }));
    /// assert!(!logged.differs_in_driver_only(&logged));
    /// ```
    pub fn differs_in_driver_only(&self, other: &SettingsDigest) -> bool {
        self.membership == other.membership
            && self.layout == other.layout
            && self.driver != other.driver
    }

    /// The groups of settings that differ from `other`'s, named.
    pub fn differing(&self, other: &SettingsDigest) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.membership != other.membership {
            out.push("membership (universe, initial view, max_members, max_pending_changes, partition_safety, hosts)");
        }
        if self.layout != other.layout {
            out.push("layout (shard shape, subgroup policies)");
        }
        if self.driver != other.driver {
            out.push("driver (epoch template and profiles)");
        }
        out
    }
}

impl fmt::Display for SettingsDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.combined())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use squall_round_robin::{Config, FsyncPolicy, Mode, Relay};
    use squall_transport::{NodeId, RegionId};

    use super::*;
    use crate::group::{EpochProfile, GroupConfig};
    use crate::view::{EvenShards, Layout, ShardPolicy, SubgroupPolicy, Subgroups};

    fn ids(n: u32) -> Vec<NodeId> {
        (0..n).map(NodeId).collect()
    }

    fn gms() -> GmsConfig {
        GmsConfig::new(RegionId(0), ids(5), ids(3))
    }

    fn digest(c: &GmsConfig) -> SettingsDigest {
        SettingsDigest::of(c, &c.shard_layout())
    }

    #[test]
    fn every_membership_setting_that_must_agree_changes_the_digest() {
        let base = digest(&gms());
        let changed = |f: &dyn Fn(&mut GmsConfig)| {
            let mut c = gms();
            f(&mut c);
            digest(&c)
        };
        let membership: [&dyn Fn(&mut GmsConfig); 6] = [
            &|c| c.universe.push(NodeId(9)),
            &|c| c.initial = ids(2),
            &|c| c.max_members = 4,
            &|c| c.max_pending_changes = 6,
            &|c| c.partition_safety = false,
            &|c| c.hosts = vec![vec![NodeId(0), NodeId(1)]],
        ];
        for (i, f) in membership.iter().enumerate() {
            let d = changed(f);
            assert_ne!(d.membership, base.membership, "membership setting {i}");
            assert_eq!(
                d.differing(&base).len(),
                1 + usize::from(d.layout != base.layout)
            );
        }
        let layouts: [&dyn Fn(&mut GmsConfig); 3] = [
            &|c| {
                c.shards = EvenShards {
                    shards: 1,
                    min: 2,
                    max: 5,
                }
            },
            &|c| {
                c.shards = EvenShards {
                    shards: 2,
                    min: 1,
                    max: 2,
                }
            },
            &|c| {
                let reserved = ShardPolicy {
                    min: 1,
                    max: 2,
                    reserved: vec![NodeId(4)],
                };
                c.layout = Some(Layout::new(Subgroups::new(vec![
                    SubgroupPolicy::even_shards(1, 1, 3),
                    SubgroupPolicy {
                        shards: vec![reserved],
                    },
                ])));
            },
        ];
        for (i, f) in layouts.iter().enumerate() {
            let d = changed(f);
            assert_ne!(d.layout, base.layout, "layout setting {i}");
            assert_eq!(d.membership, base.membership);
            assert!(d.differing(&base)[0].starts_with("layout"));
        }
        let d = changed(&|c| c.driver_settings = 7);
        assert_ne!(d, base);
        assert!(d.differing(&base)[0].starts_with("driver"));
        assert!(d.to_string() != base.to_string());
    }

    #[test]
    fn settings_that_may_differ_leave_the_digest_alone() {
        let base = digest(&gms());
        let same: [&dyn Fn(&mut GmsConfig); 5] = [
            &|c| c.heartbeat_interval = Duration::from_millis(1),
            &|c| c.suspicion_timeout = Duration::from_secs(1),
            &|c| c.restart_absent_timeout = Duration::from_secs(9),
            &|c| c.expected_link_timeout = Some(Duration::from_secs(3)),
            &|c| c.region = RegionId(40),
        ];
        for (i, f) in same.iter().enumerate() {
            let mut c = gms();
            f(&mut c);
            assert_eq!(digest(&c), base, "setting {i}");
        }
    }

    #[test]
    fn the_published_words_round_trip_and_zero_is_unwritten() {
        let d = digest(&gms());
        assert_eq!(SettingsDigest::from_words(&d.words()), Some(d));
        assert_eq!(SettingsDigest::from_words(&[0, 0, 0]), None);
        assert_eq!(
            SettingsDigest::from_words(&[d.membership, d.layout, 0]),
            None
        );
        // A fixed function: FNV-1a 64 of the bytes of 0, 2, 1, 2 (u64, little-endian), as
        // computed independently (Python).
        let mut h = Hasher::new(0);
        h.words([1u64, 2].into_iter());
        assert_eq!(h.finish(), 0xccdd_bf15_9f6b_1de4);
    }

    fn group() -> GroupConfig {
        let mut gms = gms();
        gms.shards = EvenShards {
            shards: 1,
            min: 1,
            max: 5,
        };
        let epoch = Config {
            mode: Mode::Durable {
                path: "/a".into(),
                fsync: FsyncPolicy::EveryBatch,
            },
            ..Config::new(ids(5))
        };
        GroupConfig::new(gms, epoch)
    }

    #[test]
    fn every_epoch_setting_that_must_agree_changes_the_group_digest() {
        let base = group().settings_digest();
        let must: [&dyn Fn(&mut GroupConfig); 10] = [
            &|c| c.epoch.window += 1,
            &|c| c.epoch.slot_size += 8,
            &|c| c.epoch.max_payload += 8,
            &|c| c.epoch.chunk_size += 8,
            &|c| c.epoch.binomial_from += 1,
            &|c| c.epoch.relay = Relay::BinomialPipeline,
            &|c| c.epoch.mode = Mode::Atomic,
            &|c| {
                c.epoch.mode = Mode::Durable {
                    path: "/a".into(),
                    fsync: FsyncPolicy::Never,
                }
            },
            &|c| {
                let p = EpochProfile::of(&c.epoch);
                c.profiles.insert(0, p);
            },
            &|c| {
                let p = EpochProfile {
                    fsync: Some(FsyncPolicy::EveryRecords(4)),
                    ..EpochProfile::of(&c.epoch)
                };
                c.profiles.insert(0, p);
            },
        ];
        for (i, f) in must.iter().enumerate() {
            let mut c = group();
            f(&mut c);
            assert_ne!(c.settings_digest(), base, "epoch setting {i}");
        }
        let may: [&dyn Fn(&mut GroupConfig); 6] = [
            &|c| {
                c.epoch.mode = Mode::Durable {
                    path: "/b".into(),
                    fsync: FsyncPolicy::EveryBatch,
                }
            },
            &|c| c.epoch.suspicion_timeout = Duration::from_secs(2),
            &|c| c.replay_batch = 1,
            &|c| c.replay_buffer = 64,
            &|c| c.transfer.chunk_size = 64,
            &|c| c.gms.suspicion_timeout = Duration::from_secs(1),
        ];
        for (i, f) in may.iter().enumerate() {
            let mut c = group();
            f(&mut c);
            assert_eq!(c.settings_digest(), base, "setting {i} may differ");
        }
    }
}
