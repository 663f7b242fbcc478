//! What the `Group` simulator suites share: a small-slot group configuration with fast GMS
//! timing (so slots overflow into large messages and suspicion comes within a few heartbeats),
//! the hash-chain model application's mixing step, and numbered payloads.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use squall_membership::GmsConfig;
use squall_membership::group::GroupConfig;
use squall_membership::view::View;
use squall_ordering::{SubmitError, TotalOrder};
use squall_round_robin::{Config, FsyncPolicy, Mode};
use squall_transport::{NodeId, RegionId};

pub mod chain;
pub mod subgroups;
pub mod tap;
pub mod uniform;

/// A group over nodes `0..universe` whose first `initial` are the first view: heartbeat 50 µs,
/// suspicion 1.5 ms, epochs with a window of 4 slots of 24 bytes (payloads up to 96 bytes,
/// chunks of 32), state transfer with the defaults (suites set chunk and window).
pub fn config(universe: usize, initial: usize) -> GroupConfig {
    let ids: Vec<NodeId> = (0..universe as u32).map(NodeId).collect();
    let mut gms = GmsConfig::new(RegionId(0), ids.clone(), ids[..initial].to_vec());
    gms.heartbeat_interval = Duration::from_micros(50);
    gms.suspicion_timeout = Duration::from_micros(1500);
    let epoch = Config {
        window: 4,
        slot_size: 24,
        max_payload: 96,
        chunk_size: 32,
        ..Config::new(ids)
    };
    GroupConfig::new(gms, epoch)
}

/// `cfg` with durable epochs in `base/n<node>` (created), never synced: a simulated stop is a
/// process crash, the files survive it.
pub fn durable(mut cfg: GroupConfig, base: &Path, node: usize) -> GroupConfig {
    let path = base.join(format!("n{node}"));
    std::fs::create_dir_all(&path).unwrap();
    cfg.epoch.mode = Mode::Durable {
        path,
        fsync: FsyncPolicy::Never,
    };
    cfg
}

/// An empty scratch directory for one run (`suite`, `tag`, `seed`, this process's id: tests
/// running as threads of one process use different tags).
pub fn scratch_dir(suite: &str, tag: &str, seed: u64) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "squall-{suite}-{}-{tag}-{seed}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The hash chain's step: the model application's value after applying `bytes` to `h`.
pub fn mix(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h ^ 0x9e37_79b9_7f4a_7c15, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Payload: sender, counter, then filler (sometimes past the slot size: a large message).
/// A digest of a delivered sequence `(position, payload)`: the "state" the simulator suites
/// transfer to a joiner (checked against the sender's sequence up to the state's position).
pub fn digest(seq: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let h = seq.iter().fold(seq.len() as u64, |h, (p, b)| mix(h ^ p, b));
    h.to_le_bytes().to_vec()
}

pub fn payload(sender: usize, k: u32, large: bool) -> Vec<u8> {
    let mut p = (sender as u32).to_le_bytes().to_vec();
    p.extend_from_slice(&k.to_le_bytes());
    if large {
        p.resize(40 + (k as usize % 50), k as u8);
    }
    p
}

/// The sender a [`payload`] names.
pub fn sender_of(p: &[u8]) -> usize {
    u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize
}

/// The counter a [`payload`] carries.
pub fn counter_of(p: &[u8]) -> u32 {
    u32::from_le_bytes([p[4], p[5], p[6], p[7]])
}

/// Node `node` was in view `last` and is now in `v`: if `v` is the next view and inadequate,
/// each of its shards may hold only members that were in that shard in `last` (no shard runs
/// in an inadequate view, so nobody new to a shard would receive its state there, and the
/// next view counts a shard's members as its survivors).
pub fn check_inadequate_keeps_holders(
    node: usize,
    last: Option<&View>,
    v: &View,
) -> Result<(), String> {
    let Some(last) = last.filter(|l| v.id == l.id + 1 && v.inadequate.is_some()) else {
        return Ok(());
    };
    for s in &v.shards {
        let before = last.shard(s.id).map_or(&[][..], |x| &x.members[..]);
        if let Some(m) = s.members.iter().find(|m| !before.contains(m)) {
            return Err(format!(
                "n{node}: {m} is in {} in the inadequate view {} but was not in view {}",
                s.id, v.id, last.id
            ));
        }
    }
    Ok(())
}

/// Submits `p` at member `i` of a restart suite: `Ok(true)` if it was taken, `Ok(false)` for
/// the refusals a restart legitimately gives (window full, wedged, stopped, not a sender yet),
/// and the error text for anything else.
pub fn submit_during_restart<T: TotalOrder>(g: &mut T, i: usize, p: &[u8]) -> Result<bool, String> {
    match g.submit(p) {
        Ok(()) => Ok(true),
        Err(
            SubmitError::WindowFull
            | SubmitError::Wedged
            | SubmitError::Stopped(_)
            | SubmitError::NotASender(_),
        ) => Ok(false),
        Err(e) => Err(format!("n{i}: submit: {e}")),
    }
}

/// One line per node for a failure message: its view (id and members), whom it waits for in
/// restart mode, and why it stopped.
pub fn describe<T: squall_transport::Transport, L: squall_membership::log::Durable>(
    groups: &[Option<squall_membership::group::Group<T, L>>],
) -> String {
    let s: Vec<String> = (groups.iter().enumerate())
        .map(|(i, g)| {
            format!(
                "n{i}: {:?}",
                g.as_ref().map(|g| (
                    g.view().map(|v| (v.id, v.members.clone())),
                    g.gms().restarting().map(<[_]>::to_vec),
                    g.stopped().map(str::to_string)
                ))
            )
        })
        .collect();
    s.join("; ")
}

/// The error of a seed-pinned regression whose seed no longer reaches the moment it was
/// written for (the simulator's schedules shift with every protocol change): the test fails
/// loudly instead of passing without exercising anything.
pub fn missed(seed: u64, moment: &str) -> String {
    format!("seed {seed} no longer reaches {moment}; re-seed (scan seeds with SQUALL_SEEDS)")
}

/// Whether a run reached the moment its test exists for (see [`check_seeds_reaching`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moment {
    /// The run came to the moment (and its end state checked out).
    Reached,
    /// The schedule never brought the moment (the end state still checked out).
    Missed,
}

/// Runs `check` for every seed of `squall_transport_mem::sim::seeds(pinned)`; an `Err` fails at
/// once (with the seed and the command that replays it). A run that misses the moment (`moment`
/// names it) is skipped and counted: the test fails unless at least `pinned` seeds reached it
/// (every seed run, when fewer than `pinned` are: `SQUALL_SEED=N`). So the default seeds must
/// all reach it, and a soak (`SQUALL_SEEDS` raised) may meet seeds that do not without failing.
pub fn check_seeds_reaching(
    name: &str,
    pinned: u64,
    moment: &str,
    mut check: impl FnMut(u64) -> Result<Moment, String>,
) {
    let seeds = squall_transport_mem::sim::seeds(pinned);
    let mut missed = Vec::new();
    for &seed in &seeds {
        match check(seed) {
            Ok(Moment::Reached) => {}
            Ok(Moment::Missed) => missed.push(seed),
            Err(why) => panic!(
                "{name}: seed {seed} failed: {why}\n  replay with: SQUALL_SEED={seed} cargo test {name}"
            ),
        }
    }
    let reached = seeds.len() - missed.len();
    let need = (pinned as usize).min(seeds.len());
    assert!(
        reached >= need,
        "{name}: {reached} of the seeds {seeds:?} reach {moment} (seeds {missed:?} do not), fewer \
         than {need}; re-seed (scan seeds with SQUALL_SEEDS)"
    );
}

#[path = "../common/majority.rs"]
mod majority;
#[allow(unused_imports)] // Not every test crate that includes this module checks decisions.
pub use majority::check_decision_keeps_a_majority;

/// Virtual synchrony's check on installs: per node, the deliveries it had made when it
/// installed each view (view id → count); every node that installed a view did so after the
/// same count. Names the first two nodes that differ.
pub fn same_install_positions<P: Copy + PartialEq + std::fmt::Display>(
    installs: &[std::collections::BTreeMap<u64, P>],
) -> Result<(), String> {
    let mut at: std::collections::BTreeMap<u64, (usize, P)> = std::collections::BTreeMap::new();
    for (i, m) in installs.iter().enumerate() {
        for (&v, &pos) in m {
            match at.get(&v) {
                Some(&(j, p)) if p != pos => {
                    return Err(format!(
                        "view {v}: n{j} installed it after {p} deliveries, n{i} after {pos}"
                    ));
                }
                _ => {
                    at.insert(v, (i, pos));
                }
            }
        }
    }
    Ok(())
}
