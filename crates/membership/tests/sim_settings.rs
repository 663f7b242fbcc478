//! Members configured differently are detected (docs/MEMBERSHIP.md, fifty-second part): each
//! member publishes a settings digest in the GMS table; a member whose view holds a member with
//! another digest stops saying why, and the leader never proposes the join of a node whose
//! digest differs (the joiner stops itself). Simulator, through `Group`. Across a total
//! restart (fifty-second part, "s24 follow-up: the digest across a restart") the GMS log holds
//! the digest it was written under, and a member restarted under other settings is refused.
//! A deliberate change of the epoch (driver) settings at a total restart is accepted when every
//! member names the digest its log was written under (`GmsConfig::settings_from`; sixty-first
//! part). A joiner's new incarnation configured otherwise is refused, not joined on its old
//! incarnation's frozen join request and digest (s26, sixty-eighth part).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use squall_membership::GmsError;
use squall_membership::group::{EpochProfile, Group, GroupConfig, GroupError};
use squall_membership::log::{MemLog, Record};
use squall_membership::settings::SettingsDigest;
use squall_membership::view::EvenShards;
use squall_ordering::{TotalOrder, Upcall};
use squall_round_robin::Mode;
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

mod group_sim;

const DIFFER: &str = "its settings differ from the group's: digest";

/// Starts `configs.len()` nodes, each with its own configuration, those at `joiners` as
/// joiners. Every node registers regions large enough for every configuration, so that no
/// region check refuses a member first: only the digest can tell them apart.
fn start(
    seed: u64,
    configs: &[GroupConfig],
    joiners: &[usize],
) -> (Sim, Vec<Group<SimNode, MemLog>>) {
    let (sim, nodes) = cluster(seed, configs);
    let groups = (nodes.into_iter().zip(configs).enumerate())
        .map(|(i, (t, c))| {
            if joiners.contains(&i) {
                Group::joining(t, c.clone(), MemLog::default()).unwrap()
            } else {
                Group::new(t, c.clone(), MemLog::default(), None).unwrap()
            }
        })
        .collect();
    (sim, groups)
}

/// The simulator and endpoints of [`start`]: every node's regions large enough for every
/// configuration.
fn cluster(seed: u64, configs: &[GroupConfig]) -> (Sim, Vec<SimNode>) {
    let mut regions = Group::<SimNode, MemLog>::layout(&configs[0]).unwrap();
    for c in configs {
        for (r, o) in regions
            .iter_mut()
            .zip(Group::<SimNode, MemLog>::layout(c).unwrap())
        {
            r.len = r.len.max(o.len);
        }
    }
    let layouts = vec![regions; configs.len()];
    Sim::cluster_each(SimConfig::seeded(seed), &layouts, &[]).unwrap()
}

/// Polls every node (each submitting while it can) for `steps` steps; returns how many
/// messages each delivered.
fn run(sim: &Sim, groups: &mut [Group<SimNode, MemLog>], steps: usize) -> Vec<usize> {
    let mut ups = Vec::new();
    let mut delivered = vec![0; groups.len()];
    for _ in 0..steps {
        for (g, d) in groups.iter_mut().zip(&mut delivered) {
            if g.stopped().is_none() {
                let _ = g.submit(b"m");
                ups.clear();
                g.poll(&mut ups);
                *d += ups
                    .iter()
                    .filter(|u| matches!(u, Upcall::Deliver(_)))
                    .count();
            }
        }
        sim.advance(Duration::from_micros(5));
    }
    delivered
}

#[test]
fn an_initial_member_with_another_window_and_slot_split_stops_everyone() {
    let cfg = group_sim::config(3, 3);
    // The same slot bytes per sender (4 x 24 = 2 x 48), split differently.
    let mut other = cfg.clone();
    other.epoch.window = 2;
    other.epoch.slot_size = 48;
    let (sim, mut groups) = start(1, &[cfg.clone(), cfg, other], &[]);
    let delivered = run(&sim, &mut groups, 400);
    // Nothing is delivered with rows laid out differently: every peer's digest is pushed
    // before its first epoch write, and the epoch is not polled once it differs.
    assert_eq!(delivered, [0, 0, 0]);
    for (i, g) in groups.iter().enumerate() {
        let why = g
            .stopped()
            .unwrap_or_else(|| panic!("n{i} runs with a member configured differently"));
        assert!(why.contains(DIFFER), "n{i}: {why}");
        assert!(
            why.contains("driver (epoch template and profiles)"),
            "n{i}: {why}"
        );
    }
}

#[test]
fn a_joiner_with_a_larger_profile_is_refused_and_the_group_goes_on() {
    let cfg = group_sim::config(4, 3);
    let mut larger = cfg.clone();
    let p = EpochProfile {
        window: cfg.epoch.window * 2,
        ..EpochProfile::of(&cfg.epoch)
    };
    larger.profiles.insert(0, p);
    let (sim, mut groups) = start(2, &[cfg.clone(), cfg.clone(), cfg, larger], &[3]);
    run(&sim, &mut groups, 400);
    let why = groups[3]
        .stopped()
        .expect("the joiner configured differently stops");
    assert!(why.contains(DIFFER), "{why}");
    for g in &groups[..3] {
        assert_eq!(g.stopped(), None);
        assert_eq!(g.view().unwrap().members.len(), 3, "the join was proposed");
    }
    // The group goes on: a failure is handled as usual.
    sim.crash(NodeId(2));
    let delivered = run(&sim, &mut groups[..2], 2000);
    assert!(delivered.iter().all(|&d| d > 0), "{delivered:?}");
    for g in &groups[..2] {
        assert_eq!(g.stopped(), None);
        assert_eq!(g.view().unwrap().members, [NodeId(0), NodeId(1)]);
    }
}

#[test]
fn a_joiner_configured_alike_joins() {
    let cfg = group_sim::config(4, 3);
    let (sim, mut groups) = start(3, &vec![cfg; 4], &[3]);
    run(&sim, &mut groups, 2000);
    for g in &groups {
        assert_eq!(g.stopped(), None);
        assert_eq!(g.view().unwrap().members.len(), 4);
    }
}

/// The `Group::step` hook (`docs/MEMBERSHIP.md`, fifty-second part; its test is in the
/// sixtieth part): once a peer's differing digest is readable, the member's epoch is not polled
/// again, so the poll that stops the member delivers nothing. Two shards, `[n0, n1]` and
/// `[n2, n3]`, with n3's epoch window and slot split differing from the others' and every op to
/// or from n3 delayed by 300 µs: shard 0's epoch does not wait for n3 (n3 is no sender of it),
/// so n0 and n1 deliver until n3's digest reaches them, while they still submit. Without the
/// hook the epoch is polled in the step in which the digest lands, before the core's poll
/// stops the member, and delivers what became stable.
#[test]
fn the_poll_that_reads_a_differing_digest_delivers_nothing_of_the_epoch() {
    let mut cfg = group_sim::config(4, 4);
    cfg.gms.shards = EvenShards {
        shards: 2,
        min: 2,
        max: 2,
    };
    let mut other = cfg.clone();
    other.epoch.window = 2;
    other.epoch.slot_size = 48;
    for seed in 0..4 {
        let cfgs = [cfg.clone(), cfg.clone(), cfg.clone(), other.clone()];
        let (sim, nodes) = cluster(seed, &cfgs);
        // Before n3's `Group::new` pushes its digest.
        sim.delay(NodeId(3), Duration::from_micros(300));
        let mut groups: Vec<Group<SimNode, MemLog>> = (nodes.into_iter().zip(cfgs))
            .map(|(t, c)| Group::new(t, c, MemLog::default(), None).unwrap())
            .collect();
        let shard0 = groups[0].view().unwrap().shards[0].members.clone();
        assert_eq!(shard0, [NodeId(0), NodeId(1)], "seed {seed}: the layout");
        let mut ups = Vec::new();
        let mut delivered = [0usize; 4];
        for _ in 0..400 {
            for (i, g) in groups.iter_mut().enumerate() {
                if g.stopped().is_some() {
                    continue;
                }
                let _ = g.submit(b"m");
                ups.clear();
                g.poll(&mut ups);
                let now = ups
                    .iter()
                    .filter(|u| matches!(u, Upcall::Deliver(_)))
                    .count();
                delivered[i] += now;
                if let Some(why) = g.stopped() {
                    assert!(why.contains(DIFFER), "seed {seed}: n{i}: {why}");
                    assert_eq!(
                        now, 0,
                        "seed {seed}: n{i} delivered {now} message(s) in the poll that read the differing digest"
                    );
                }
            }
            sim.advance(Duration::from_micros(5));
        }
        for (i, g) in groups.iter().enumerate() {
            assert!(g.stopped().is_some(), "seed {seed}: n{i} still runs");
        }
        // The test had something to check: shard 0 delivered before n3's digest arrived.
        assert!(
            delivered[0] > 0 && delivered[1] > 0,
            "seed {seed}: shard 0 delivered {delivered:?} before it read n3's digest"
        );
    }
}

/// A member's start: the group, or why it was refused.
type Started = Result<Group<SimNode, MemLog>, GroupError>;

/// The configuration of the restart tests: universe of four, three initial members, durable
/// epochs under `base`.
fn durable(base: &std::path::Path, i: usize) -> GroupConfig {
    group_sim::durable(group_sim::config(4, 3), base, i)
}

/// Starts the three initial members of [`durable`] on a fabric of four (n3 never starts),
/// each member `i` under `cfgs[i]` and from `logs[i]` (a fresh log when `logs` is empty).
/// Every node registers regions large enough for every configuration (as [`start`] does).
fn start_durable(seed: u64, cfgs: &[GroupConfig], logs: &[Vec<u8>]) -> (Sim, Vec<Started>) {
    let mut regions = Group::<SimNode, MemLog>::layout(&cfgs[0]).unwrap();
    for c in cfgs {
        for (r, o) in regions
            .iter_mut()
            .zip(Group::<SimNode, MemLog>::layout(c).unwrap())
        {
            r.len = r.len.max(o.len);
        }
    }
    let layouts = vec![regions; 4];
    let (sim, mut nodes) = Sim::cluster_each(SimConfig::seeded(seed), &layouts, &[]).unwrap();
    nodes.truncate(3);
    sim.crash(NodeId(3));
    let groups = (nodes.into_iter().zip(cfgs).enumerate())
        .map(|(i, (t, c))| match logs.get(i) {
            Some(bytes) => {
                let (log, rec) = MemLog::open(bytes.clone());
                Group::new(t, c.clone(), log, Some(&rec))
            }
            None => Group::new(t, c.clone(), MemLog::default(), None),
        })
        .collect();
    (sim, groups)
}

/// Runs the durable group of [`durable`] for a while and shuts every member down at once;
/// returns each member's GMS log bytes (their epoch logs stay under `base`) and how many
/// messages each delivered.
fn run_and_shut_down(seed: u64, base: &std::path::Path) -> (Vec<Vec<u8>>, Vec<usize>) {
    let cfgs: Vec<GroupConfig> = (0..3).map(|i| durable(base, i)).collect();
    let (sim, groups) = start_durable(seed, &cfgs, &[]);
    let mut groups: Vec<Group<SimNode, MemLog>> = groups.into_iter().map(Result::unwrap).collect();
    let delivered = run(&sim, &mut groups, 400);
    assert!(delivered.iter().all(|&d| d > 0), "{delivered:?}");
    let logs = (groups.iter())
        .map(|g| g.gms().log().bytes().to_vec())
        .collect();
    (logs, delivered)
}

/// A member restarted after a total shutdown with settings that must agree changed since its
/// log was written (`max_members`, membership; the epoch window, driver) is refused with
/// `GmsError::SettingsChanged`, naming the differing group, before it starts.
#[test]
fn a_member_restarted_with_changed_settings_is_refused_naming_them() {
    type Change = fn(&mut GroupConfig);
    let changes: [(&str, Change, &str); 2] = [
        ("max_members", |c| c.gms.max_members = 3, "membership ("),
        ("window", |c| c.epoch.window = 8, "driver ("),
    ];
    for (tag, change, group) in changes {
        let base = group_sim::scratch_dir("settings", tag, 4);
        let (logs, _) = run_and_shut_down(4, &base);
        let mut cfgs: Vec<GroupConfig> = (0..3).map(|i| durable(&base, i)).collect();
        change(&mut cfgs[0]);
        let (_sim, groups) = start_durable(5, &cfgs, &logs);
        match &groups[0] {
            Err(GroupError::Gms(e @ GmsError::SettingsChanged { groups, .. })) => {
                assert_eq!(groups.len(), 1, "{tag}: {e}");
                assert!(groups[0].starts_with(group), "{tag}: {e}");
                let msg = e.to_string();
                assert!(
                    msg.contains("restore the configuration the log was written under"),
                    "{tag}: {msg}"
                );
            }
            Err(e) => panic!("{tag}: refused for another reason: {e}"),
            Ok(_) => panic!("{tag}: restarted under settings its log was not written under"),
        }
        assert!(groups[1..].iter().all(Result::is_ok), "{tag}");
        std::fs::remove_dir_all(&base).ok();
    }
}

/// The control case: restarted with the configuration its log was written under, every member
/// restarts, completes the restart and delivers past its replay; the log's digest is not logged twice.
#[test]
fn members_restarted_with_the_same_settings_restart_as_before() {
    let base = group_sim::scratch_dir("settings", "same", 6);
    let (logs, before) = run_and_shut_down(6, &base);
    let cfgs: Vec<GroupConfig> = (0..3).map(|i| durable(&base, i)).collect();
    let (sim, groups) = start_durable(7, &cfgs, &logs);
    let mut groups: Vec<Group<SimNode, MemLog>> = groups.into_iter().map(Result::unwrap).collect();
    let delivered = run(&sim, &mut groups, 3000);
    for (i, g) in groups.iter().enumerate() {
        assert_eq!(g.stopped(), None, "n{i}");
        assert_eq!(
            g.gms().restarting(),
            None,
            "n{i}: the restart did not complete: {:?} {:?} {delivered:?} {before:?}",
            g.gms().restart_blocked(),
            g.view()
        );
        let (_, rec) = MemLog::open(g.gms().log().bytes().to_vec());
        let logged = (rec.records.iter())
            .filter(|r| matches!(r, squall_membership::log::Record::Settings { .. }))
            .count();
        assert_eq!(
            logged, 1,
            "n{i}: one digest per log while the settings stay"
        );
    }
    // The replay redelivers what the first life delivered; the group then carries on.
    assert!(
        delivered.iter().zip(&before).all(|(d, b)| d > b),
        "{delivered:?} after {before:?}"
    );
    std::fs::remove_dir_all(&base).ok();
}

/// What each member delivered, in order: `(position, sender, payload)`.
type Delivered = Vec<Vec<(u64, NodeId, Vec<u8>)>>;

/// Like [`run`], recording every delivery; each member submits payloads unique to `life`.
fn run_recording(
    sim: &Sim,
    groups: &mut [Group<SimNode, MemLog>],
    steps: usize,
    life: u8,
) -> Delivered {
    let mut ups = Vec::new();
    let mut out: Delivered = vec![Vec::new(); groups.len()];
    let mut sent = vec![0u32; groups.len()];
    for _ in 0..steps {
        for (i, g) in groups.iter_mut().enumerate() {
            if g.stopped().is_some() {
                continue;
            }
            let mut payload = vec![life, i as u8];
            payload.extend_from_slice(&sent[i].to_le_bytes());
            if g.submit(&payload).is_ok() {
                sent[i] += 1;
            }
            ups.clear();
            g.poll(&mut ups);
            for u in ups.drain(..) {
                if let Upcall::Deliver(d) = u {
                    out[i].push((d.position, d.sender, d.payload));
                }
            }
        }
        sim.advance(Duration::from_micros(5));
    }
    out
}

/// The digest of a member's GMS log (its latest `Record::Settings`).
fn logged_digest(bytes: &[u8]) -> SettingsDigest {
    MemLog::open(bytes.to_vec()).1.settings().unwrap()
}

/// The configuration of [`durable`] with another epoch window and slot size (the same
/// `max_payload`): only the driver digest differs.
fn durable_wider(base: &std::path::Path, i: usize) -> GroupConfig {
    let mut c = durable(base, i);
    c.epoch.window = 8;
    c.epoch.slot_size = 48;
    c
}

/// Asserts that every member of `groups` completed its restart unstopped.
fn assert_restarted(groups: &[Group<SimNode, MemLog>], what: &str) {
    for (i, g) in groups.iter().enumerate() {
        assert_eq!(g.stopped(), None, "{what}: n{i}");
        assert_eq!(
            g.gms().restarting(),
            None,
            "{what}: n{i}: the restart did not complete: {:?} {:?}",
            g.gms().restart_blocked(),
            g.view()
        );
    }
}

/// A deliberate change of the epoch window and slot size at a total restart, every member
/// naming its log's digest in `settings_from`: the restart completes, every member replays
/// exactly what it delivered before (in the same order and positions) and delivers new
/// messages under the new settings. The new digest is logged with the restart view, so the
/// next restart checks against it: the old configuration is refused, the new one restarts
/// without any `settings_from`.
#[test]
fn a_deliberate_window_and_slot_size_change_at_a_total_restart_keeps_every_delivery() {
    let base = group_sim::scratch_dir("settings", "migrate", 8);
    let cfgs: Vec<GroupConfig> = (0..3).map(|i| durable(&base, i)).collect();
    let (sim, groups) = start_durable(8, &cfgs, &[]);
    let mut groups: Vec<Group<SimNode, MemLog>> = groups.into_iter().map(Result::unwrap).collect();
    let first = run_recording(&sim, &mut groups, 400, 1);
    assert!(first.iter().all(|d| !d.is_empty()), "{first:?}");
    let logs: Vec<Vec<u8>> = (groups.iter())
        .map(|g| g.gms().log().bytes().to_vec())
        .collect();
    drop((sim, groups));
    let old = logged_digest(&logs[0]);
    assert_eq!(old, cfgs[0].settings());

    // The second life, under the new settings, accepting the move from the log's digest.
    let wider: Vec<GroupConfig> = (0..3)
        .map(|i| {
            let mut c = durable_wider(&base, i);
            c.gms.settings_from = Some(old.combined());
            c
        })
        .collect();
    let new = wider[0].settings();
    assert_eq!(
        old.differing(&new),
        ["driver (epoch template and profiles)"]
    );
    let (sim, groups) = start_durable(9, &wider, &logs);
    let mut groups: Vec<Group<SimNode, MemLog>> = groups.into_iter().map(Result::unwrap).collect();
    let second = run_recording(&sim, &mut groups, 3000, 2);
    assert_restarted(&groups, "under the new settings");
    for (i, g) in groups.iter().enumerate() {
        let rr = g.epoch().unwrap().config();
        assert_eq!(
            (rr.window, rr.slot_size),
            (8, 48),
            "n{i}: the epoch's settings"
        );
    }
    for (i, (a, b)) in first.iter().zip(&second).enumerate() {
        assert!(
            b.len() > a.len() && b[..a.len()] == a[..],
            "n{i}: the restart under new settings lost or reordered a delivery ({} then {})",
            a.len(),
            b.len()
        );
        assert!(
            b[a.len()..].iter().any(|(_, _, p)| p[0] == 2),
            "n{i}: nothing new delivered under the new settings"
        );
    }
    let logs: Vec<Vec<u8>> = (groups.iter())
        .map(|g| g.gms().log().bytes().to_vec())
        .collect();
    for (i, l) in logs.iter().enumerate() {
        assert_eq!(logged_digest(l), new, "n{i}: the new digest is not logged");
    }
    drop((sim, groups));

    // The next restart checks against the new digest: the old configuration is refused ...
    let (_sim, refused) = start_durable(10, &cfgs, &logs);
    for (i, r) in refused.iter().enumerate() {
        match r {
            Err(GroupError::Gms(GmsError::SettingsChanged { logged, .. })) => {
                assert_eq!(*logged, new, "n{i}");
            }
            Err(e) => panic!("n{i}: refused for another reason: {e}"),
            Ok(_) => panic!("n{i}: restarted under the settings it moved away from"),
        }
    }
    // ... and the new one restarts as is, with no `settings_from`.
    let plain: Vec<GroupConfig> = (0..3).map(|i| durable_wider(&base, i)).collect();
    let (sim, groups) = start_durable(11, &plain, &logs);
    let mut groups: Vec<Group<SimNode, MemLog>> = groups.into_iter().map(Result::unwrap).collect();
    let third = run_recording(&sim, &mut groups, 3000, 3);
    assert_restarted(&groups, "the restart after the change");
    for (i, (b, c)) in second.iter().zip(&third).enumerate() {
        assert!(c.len() > b.len() && c[..b.len()] == b[..], "n{i}");
    }
    std::fs::remove_dir_all(&base).ok();
}

/// The opt-in is checked at start-up: a changed window without it is refused as before
/// (`SettingsChanged`, whose message says how to accept it; with a membership setting changed
/// too it says instead that those cannot change, s25); `settings_from` naming another digest than the log's (a typo, a stale
/// value) is refused (`SettingsFromMismatch`); a change of a membership setting is refused even
/// with the right digest named (`SettingsChangeRefused`); a change with atomic epochs (which
/// replay nothing) is refused.
#[test]
fn a_settings_change_without_the_right_opt_in_is_refused_at_start_up() {
    let base = group_sim::scratch_dir("settings", "opt-in", 12);
    let (logs, _) = run_and_shut_down(12, &base);
    let old = logged_digest(&logs[0]).combined();
    let start_one = |change: &dyn Fn(&mut GroupConfig)| -> Started {
        let mut cfgs: Vec<GroupConfig> = (0..3).map(|i| durable_wider(&base, i)).collect();
        change(&mut cfgs[0]);
        start_durable(13, &cfgs, &logs).1.remove(0)
    };
    let why = |case: &str, r: Started| match r {
        Ok(_) => panic!("{case}: restarted"),
        Err(e) => e,
    };
    // No opt-in.
    let e = why("no opt-in", start_one(&|_| {}));
    assert!(
        matches!(e, GroupError::Gms(GmsError::SettingsChanged { .. })),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("accepted when every member restarts naming"),
        "{e}"
    );
    // No opt-in, a membership setting changed too: no hint to name the digest (it would only
    // lead to `SettingsChangeRefused`).
    let e = why(
        "no opt-in, a membership change",
        start_one(&|c| c.gms.max_members = 3),
    );
    assert!(
        matches!(e, GroupError::Gms(GmsError::SettingsChanged { .. })),
        "{e}"
    );
    assert!(
        e.to_string().contains("cannot change at a total restart")
            && !e
                .to_string()
                .contains("accepted when every member restarts naming"),
        "{e}"
    );
    // The wrong digest named.
    let e = why(
        "the wrong digest",
        start_one(&|c| c.gms.settings_from = Some(old ^ 1)),
    );
    assert!(
        matches!(e, GroupError::Gms(GmsError::SettingsFromMismatch { named, .. }) if named == old ^ 1),
        "{e}"
    );
    // The right digest, but a membership setting changed too.
    let e = why(
        "a membership change",
        start_one(&|c| {
            c.gms.settings_from = Some(old);
            c.gms.max_members = 3;
        }),
    );
    match &e {
        GroupError::Gms(GmsError::SettingsChangeRefused { groups, .. }) => {
            assert_eq!(groups.len(), 1, "{e}");
            assert!(groups[0].starts_with("membership ("), "{e}");
        }
        _ => panic!("{e}"),
    }
    // The right digest, atomic epochs.
    let e = why(
        "atomic epochs",
        start_one(&|c| {
            c.gms.settings_from = Some(old);
            c.epoch.mode = Mode::Atomic;
        }),
    );
    assert!(e.to_string().contains("needs durable epochs"), "{e}");
    // The control: the right digest, only the epoch settings changed.
    assert!(start_one(&|c| c.gms.settings_from = Some(old)).is_ok());
    std::fs::remove_dir_all(&base).ok();
}

/// Every restarting member must run the new settings: one restarted with the old ones (its
/// log's, so it passes its own start-up check) beside two that accepted a change stops the
/// restart (`SettingsDiffer` at every member) before anything is installed, and no log records
/// the new digest; the same change restarted at every member then completes.
#[test]
fn a_member_restarting_with_the_old_settings_beside_new_ones_stops_the_restart() {
    let base = group_sim::scratch_dir("settings", "mixed", 14);
    let (logs, before) = run_and_shut_down(14, &base);
    let old = logged_digest(&logs[0]);
    let accepting = |i| {
        let mut c = durable_wider(&base, i);
        c.gms.settings_from = Some(old.combined());
        c
    };
    let mixed = vec![accepting(0), accepting(1), durable(&base, 2)];
    let (sim, groups) = start_durable(15, &mixed, &logs);
    let mut groups: Vec<Group<SimNode, MemLog>> = groups.into_iter().map(Result::unwrap).collect();
    let delivered = run(&sim, &mut groups, 2000);
    for (i, g) in groups.iter().enumerate() {
        let why = g
            .stopped()
            .unwrap_or_else(|| panic!("n{i} restarted beside a member with other settings"));
        assert!(why.contains(DIFFER), "n{i}: {why}");
        assert!(
            g.gms().restarting().is_some(),
            "n{i}: installed a restart view"
        );
        let rec = MemLog::open(g.gms().log().bytes().to_vec()).1;
        assert_eq!(rec.settings(), Some(old), "n{i}: the new digest was logged");
        assert!(
            !rec.records
                .iter()
                .any(|r| matches!(r, Record::Settings { digest } if *digest != old)),
            "n{i}"
        );
    }
    // Nothing past the replay: no restart view ran.
    assert!(
        delivered.iter().zip(&before).all(|(d, b)| d <= b),
        "{delivered:?} after {before:?}"
    );
    let logs: Vec<Vec<u8>> = (groups.iter())
        .map(|g| g.gms().log().bytes().to_vec())
        .collect();
    drop((sim, groups));
    let all: Vec<GroupConfig> = (0..3).map(accepting).collect();
    let (sim, groups) = start_durable(16, &all, &logs);
    let mut groups: Vec<Group<SimNode, MemLog>> = groups.into_iter().map(Result::unwrap).collect();
    run(&sim, &mut groups, 3000);
    assert_restarted(&groups, "every member under the new settings");
    std::fs::remove_dir_all(&base).ok();
}

/// The end of [`rejoin_on_frozen_words`]: each member's view members and stop, and the
/// joiner's stop.
type Outcome = (Vec<(Vec<NodeId>, Option<String>)>, Option<String>);

/// A joiner's new incarnation, configured otherwise than the group, read on its old
/// incarnation's frozen words (`docs/MEMBERSHIP.md`, sixty-eighth part). n3's first
/// incarnation asks to join, configured like the group, and crashes the moment the leader n0
/// proposes its join: it never installs a view, so its row's `gms_join` word stays set in
/// every member's frozen copy. The members install view 1 with it and remove it in view 2.
/// Then n3 restarts (`Sim::restart_node`) as a joiner under `restarted`. n0 readmits the new
/// incarnation as it polls its link (n3 is in no view it counts), before any word of the new
/// incarnation landed: the row shows the old incarnation's join request and digest. With
/// `restarted` differing, the designed outcome is the joiner's refusal (the members go on
/// as `[0, 1, 2]`, the joiner stops itself); configured alike, it joins. Returns the members'
/// views and stops and the joiner's stop, or `None` if the first incarnation installed a view
/// before the proposal was seen (the moment missed).
fn rejoin_on_frozen_words(seed: u64, restarted: &GroupConfig) -> Result<Option<Outcome>, String> {
    let cfg = group_sim::config(4, 3);
    let (sim, nodes) = cluster(
        seed,
        &[cfg.clone(), cfg.clone(), cfg.clone(), restarted.clone()],
    );
    let mut groups: Vec<Group<SimNode, MemLog>> = (nodes.into_iter().enumerate())
        .map(|(i, t)| {
            if i == 3 {
                Group::joining(t, cfg.clone(), MemLog::default()).unwrap()
            } else {
                Group::new(t, cfg.clone(), MemLog::default(), None).unwrap()
            }
        })
        .collect();
    let names_3 = |g: &Group<SimNode, MemLog>| {
        let join =
            |ch: &[squall_membership::change::Change]| ch.iter().any(|c| c.node == NodeId(3));
        g.gms().proposal().is_some_and(|(_, ch)| join(ch))
            || g.gms().decision().is_some_and(|d| join(&d.changes))
    };
    let mut ups = Vec::new();
    let mut step = |sim: &Sim, groups: &mut Vec<Group<SimNode, MemLog>>| {
        for (i, g) in groups.iter_mut().enumerate() {
            if g.stopped().is_none() && !sim.is_crashed(NodeId(i as u32)) {
                let _ = g.submit(b"m");
                ups.clear();
                g.poll(&mut ups);
            }
        }
        sim.advance(Duration::from_micros(5));
    };
    // The first incarnation crashes when n0 proposes its join.
    let mut crashed = false;
    for _ in 0..2000 {
        step(&sim, &mut groups);
        if names_3(&groups[0]) {
            if groups[3].view().is_some() {
                return Ok(None);
            }
            sim.crash(NodeId(3));
            crashed = true;
            break;
        }
    }
    if !crashed {
        return Err("n0 never proposed n3's join".into());
    }
    // The members install the view with it, then remove it.
    let removed = |groups: &[Group<SimNode, MemLog>]| {
        groups[..3].iter().all(|g| {
            g.view()
                .is_some_and(|v| v.id >= 2 && v.members == [NodeId(0), NodeId(1), NodeId(2)])
        })
    };
    for _ in 0..3000 {
        if removed(&groups) {
            break;
        }
        step(&sim, &mut groups);
    }
    if !removed(&groups) {
        let views: Vec<_> = groups[..3]
            .iter()
            .map(|g| g.view().map(|v| (v.id, v.members.clone())))
            .collect();
        return Err(format!(
            "the members did not remove the crashed joiner: {views:?}"
        ));
    }
    let t = sim.restart_node(NodeId(3)).ok_or("n3 did not restart")?;
    groups[3] = Group::joining(t, restarted.clone(), MemLog::default()).unwrap();
    // The new incarnation's first pushes late (as `NEW_ROW_DELAY` in `sim_shard_restart.rs`):
    // every op to or from it 40 µs late for 80 µs.
    sim.delay(NodeId(3), Duration::from_micros(40));
    for k in 0..2000 {
        if k == 16 {
            sim.delay(NodeId(3), Duration::ZERO);
        }
        step(&sim, &mut groups);
    }
    let members = (groups[..3].iter())
        .map(|g| {
            let view = g.view().map(|v| v.members.clone()).unwrap_or_default();
            (view, g.stopped().map(str::to_owned))
        })
        .collect();
    Ok(Some((members, groups[3].stopped().map(str::to_owned))))
}

/// Item 1 and 2 of the sixty-eighth part of `docs/MEMBERSHIP.md`: a readmitted joiner whose
/// new incarnation is configured differently is refused, and the group goes on. Without the
/// change (the leader reads a readmitted row's `gms_join` word and digest while the row is
/// unheard), n0 proposes the join on the old incarnation's request and digest, and every
/// member stops with `SettingsDiffer` once the new incarnation's digest lands.
#[test]
fn a_readmitted_joiner_configured_otherwise_is_refused_not_joined_on_its_old_words() {
    let cfg = group_sim::config(4, 3);
    let mut larger = cfg.clone();
    let p = EpochProfile {
        window: cfg.epoch.window * 2,
        ..EpochProfile::of(&cfg.epoch)
    };
    larger.profiles.insert(0, p);
    group_sim::check_seeds_reaching(
        "a_readmitted_joiner_configured_otherwise_is_refused_not_joined_on_its_old_words",
        3,
        "the first incarnation crashing before it installed a view",
        |seed| {
            let Some((members, joiner)) = rejoin_on_frozen_words(seed, &larger)? else {
                return Ok(group_sim::Moment::Missed);
            };
            for (i, (view, stopped)) in members.iter().enumerate() {
                if let Some(why) = stopped {
                    return Err(format!("n{i} stopped: {why}"));
                }
                if view != &[NodeId(0), NodeId(1), NodeId(2)] {
                    return Err(format!("n{i} runs {view:?}: the join was proposed"));
                }
            }
            match joiner {
                Some(why) if why.contains(DIFFER) => Ok(group_sim::Moment::Reached),
                other => Err(format!("the joiner configured otherwise: {other:?}")),
            }
        },
    );
}

/// The control of the test above: the new incarnation configured like the group joins (the
/// leader waits for its own words, about a round trip, then proposes its join).
#[test]
fn a_readmitted_joiner_configured_alike_joins_after_its_old_words() {
    let cfg = group_sim::config(4, 3);
    group_sim::check_seeds_reaching(
        "a_readmitted_joiner_configured_alike_joins_after_its_old_words",
        3,
        "the first incarnation crashing before it installed a view",
        |seed| {
            let Some((members, joiner)) = rejoin_on_frozen_words(seed, &cfg)? else {
                return Ok(group_sim::Moment::Missed);
            };
            if let Some(why) = joiner {
                return Err(format!("the joiner stopped: {why}"));
            }
            for (i, (view, stopped)) in members.iter().enumerate() {
                if let Some(why) = stopped {
                    return Err(format!("n{i} stopped: {why}"));
                }
                if view.len() != 4 {
                    return Err(format!("n{i} runs {view:?} without the joiner"));
                }
            }
            Ok(group_sim::Moment::Reached)
        },
    );
}
