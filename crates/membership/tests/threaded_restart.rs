//! Durable total restart (issue 6) over the threaded fabric: real threads, real races. Four
//! members, each on its own thread with durable round-robin epochs (`FsyncPolicy::EveryBatch`)
//! and a file GMS log in a scratch directory, all submitting. Once every member delivered
//! some messages from every sender, **every** node is crashed (`Faults::crash`) one after the
//! other in a seeded order with short seeded gaps, while the threads run: each thread notices
//! its own crash at some moment of its loop and drops its `Group` (the files stay). Then the
//! members come back as new incarnations on the same fabric (`Faults::restart_node`: fresh
//! regions, links reset): all four, or the three that crashed last (members of every view
//! installed before the shutdown, a majority of the last one) with the fourth restarted only
//! once they deliver again (it finds the group gone on without it and joins by transfer, or
//! is readmitted). Checked: the messages of before the shutdown that each restarted member
//! delivers in its new life (the replay) are the same sequence at every one of them, at the
//! same positions, and every sequence any member delivered before the shutdown is a prefix of
//! it; every position an `Upcall::Durable` reported before the shutdown is in it; after it,
//! the members deliver new messages from every member, identical at every position; in the
//! end all four are in one view and deliver.
//!
//! One round of each scenario by default (a few seconds); `SQUALL_SEEDS=<n>` runs `n` rounds
//! (seeds from `SQUALL_SEED_BASE`, or exactly `SQUALL_SEED=<s>`).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use squall_membership::GmsConfig;
use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::FileLog;
use squall_ordering::{SubmitError, TotalOrder, Upcall};
use squall_round_robin::{Config, FsyncPolicy, Mode};
use squall_transport::{NodeId, RegionId};
use squall_transport_mem::sim::seeds;
use squall_transport_mem::threaded::{Faults, ThreadedConfig, ThreadedFabric, ThreadedNode};

const N: usize = 4;
/// Messages each member delivers before the shutdown starts.
const WARM_UP: u64 = 60;
/// New messages each member delivers after the restart (in a view of all four).
const AFTER: usize = 40;
/// Rounds (seeds) per scenario by default.
const ROUNDS: u64 = 3;
/// How long a round may take before it counts as stalled.
const DEADLINE: Duration = Duration::from_secs(60);

type Seq = Vec<(u64, Vec<u8>)>;

fn config(base: &Path, i: usize) -> GroupConfig {
    let ids: Vec<NodeId> = (0..N as u32).map(NodeId).collect();
    let mut gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
    gms.heartbeat_interval = Duration::from_millis(5);
    // Failures come from the fabric at once; the timeout only has to outlast a loaded box.
    gms.suspicion_timeout = Duration::from_secs(5);
    // The majority restart counts the member that stays down out after this.
    gms.restart_absent_timeout = Duration::from_millis(100);
    let path = base.join(format!("n{i}"));
    std::fs::create_dir_all(&path).unwrap();
    let epoch = Config {
        window: 4,
        slot_size: 32,
        max_payload: 200,
        chunk_size: 64,
        mode: Mode::Durable {
            path,
            fsync: FsyncPolicy::EveryBatch,
        },
        ..Config::new(ids)
    };
    GroupConfig::new(gms, epoch)
}

/// A small seeded generator (xorshift), for the crash order and gaps.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// What the test thread and the member threads share.
struct Ctl {
    /// Per node: crashed by the test thread (its thread ends at its next look).
    crashed: Vec<AtomicBool>,
    /// Per node: deliveries of this life so far.
    delivered: Vec<AtomicU64>,
    /// Per node: its goal for this life is reached.
    done: Vec<AtomicBool>,
    /// The shutdown began: a member may stop as a minority before its own crash.
    shutdown: AtomicBool,
    /// Every thread ends.
    quit: AtomicBool,
}

impl Ctl {
    fn new() -> Arc<Ctl> {
        Arc::new(Ctl {
            crashed: (0..N).map(|_| AtomicBool::new(false)).collect(),
            delivered: (0..N).map(|_| AtomicU64::new(0)).collect(),
            done: (0..N).map(|_| AtomicBool::new(false)).collect(),
            shutdown: AtomicBool::new(false),
            quit: AtomicBool::new(false),
        })
    }
}

/// One member's life, as its thread saw it.
#[derive(Debug, Default)]
struct Rec {
    /// Deliveries (position, payload), in order.
    delivered: Seq,
    /// The largest position an `Upcall::Durable` reported.
    durable: Option<u64>,
    /// Views installed: (id, members, deliveries before it).
    views: Vec<(u64, Vec<NodeId>, usize)>,
    /// The position of a state taken by transfer (it joined again).
    joined_at: Option<u64>,
    /// Why it stopped, if it stopped without being crashed, or why its thread gave up.
    failed: Option<String>,
}

/// The payload: life, sender, counter, sometimes filler past the slot size.
fn payload(life: u8, i: usize, k: u32) -> Vec<u8> {
    let mut p = vec![life, i as u8];
    p.extend_from_slice(&k.to_le_bytes());
    if k % 5 == 0 {
        p.resize(100, 7);
    }
    p
}

/// Runs member `i`'s life `life` on `node` until it is crashed or told to quit.
fn member(i: usize, life: u8, node: ThreadedNode, base: PathBuf, ctl: Arc<Ctl>) -> Rec {
    let mut rec = Rec::default();
    let (log, recovered) = FileLog::open(&base.join(format!("gms-{i}.log"))).unwrap();
    let recovered = (!recovered.records.is_empty()).then_some(recovered);
    let mut g = match Group::new(node, config(&base, i), log, recovered.as_ref()) {
        Ok(g) => g,
        Err(e) => {
            rec.failed = Some(format!("n{i}: group: {e}"));
            return rec;
        }
    };
    let mut ups = Vec::new();
    let mut k = 0u32;
    let start = Instant::now();
    while !ctl.crashed[i].load(Ordering::Acquire) && !ctl.quit.load(Ordering::Acquire) {
        if start.elapsed() > DEADLINE {
            rec.failed = Some(format!(
                "n{i}: life {life} stalled: {:?}",
                summary(&g, &rec)
            ));
            return rec;
        }
        // A restarted member submits once it runs a view of this life.
        if life == 0 || !rec.views.is_empty() {
            match g.submit(&payload(life, i, k)) {
                Ok(()) => k += 1,
                Err(
                    SubmitError::WindowFull
                    | SubmitError::Wedged
                    | SubmitError::Stopped(_)
                    | SubmitError::NotASender(_),
                ) => {}
                Err(e) => panic!("n{i}: submit: {e}"),
            }
        }
        let busy = g.poll(&mut ups);
        if let Some(st) = g.take_state() {
            rec.delivered.clear();
            rec.joined_at = Some(st.position);
        }
        for u in ups.drain(..) {
            match u {
                Upcall::Deliver(d) => {
                    let want =
                        (rec.delivered.last()).map_or(rec.joined_at.unwrap_or(0), |l| l.0 + 1);
                    assert_eq!(d.position, want, "n{i}: positions are gapless");
                    rec.delivered.push((d.position, d.payload));
                }
                Upcall::Durable(p) => rec.durable = rec.durable.max(Some(p)),
                Upcall::View(v) => rec.views.push((v.id, v.members, rec.delivered.len())),
                _ => {}
            }
        }
        if g.state_wanted() {
            let next = rec.delivered.last().map_or(0, |l| l.0 + 1);
            g.provide_state(next, &[]).unwrap();
        }
        ctl.delivered[i].store(rec.delivered.len() as u64, Ordering::Release);
        if let Some(why) = g.stopped() {
            // Once the shutdown began, the members left may be a minority (or the crash landed
            // inside `poll`: every link failed): that stop is right for them.
            if !ctl.shutdown.load(Ordering::Acquire) {
                rec.failed = Some(format!("n{i} stopped in life {life}: {why}"));
            }
            return rec;
        }
        if life > 0 && reached(&rec, life) {
            ctl.done[i].store(true, Ordering::Release);
        }
        if !busy {
            g.wait(Duration::from_millis(1));
        }
    }
    rec
}

/// A restarted member's goal: a view of all four, and `AFTER` deliveries since it, new
/// messages of this life from every member among them.
fn reached(rec: &Rec, life: u8) -> bool {
    let Some((_, members, before)) = rec.views.last() else {
        return false;
    };
    let since = &rec.delivered[(*before).min(rec.delivered.len())..];
    members.len() == N
        && since.len() >= AFTER
        && (0..N).all(|s| since.iter().any(|d| d.1[0] == life && d.1[1] == s as u8))
}

fn summary(g: &Group<ThreadedNode, FileLog>, rec: &Rec) -> String {
    format!(
        "view {:?}, restarting {:?}, active {}, delivered {}, views {:?}",
        g.view().map(|v| (v.id, v.members.clone())),
        g.gms().restarting().map(<[_]>::to_vec),
        g.is_active(),
        rec.delivered.len(),
        rec.views
            .iter()
            .map(|v| (v.0, v.1.len(), v.2))
            .collect::<Vec<_>>()
    )
}

fn spawn(i: usize, life: u8, node: ThreadedNode, base: &Path, ctl: &Arc<Ctl>) -> JoinHandle<Rec> {
    let (base, ctl) = (base.to_path_buf(), Arc::clone(ctl));
    std::thread::Builder::new()
        .name(format!("n{i}-life{life}"))
        .spawn(move || member(i, life, node, base, ctl))
        .unwrap()
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) -> Result<(), String> {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > DEADLINE {
            return Err(format!("timed out waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

fn is_prefix(a: &[(u64, Vec<u8>)], b: &[(u64, Vec<u8>)]) -> bool {
    a.len() <= b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Starts four members, warms up, crashes every node in a seeded order with seeded gaps while
/// the threads run; returns the fabric's fault handle, the crash order and each member's life.
fn first_life(seed: u64, base: &Path) -> Result<(Faults, Vec<usize>, Vec<Rec>), String> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let layout = Group::<ThreadedNode, FileLog>::layout(&config(base, 0)).unwrap();
    let nodes = ThreadedFabric::new(ThreadedConfig::default())
        .and_then(|f| f.cluster(N, &layout))
        .unwrap();
    let faults = nodes[0].faults();
    let ctl = Ctl::new();
    let handles: Vec<_> = (nodes.into_iter().enumerate())
        .map(|(i, node)| spawn(i, 0, node, base, &ctl))
        .collect();
    let warm = wait_until("the warm-up", || {
        (ctl.delivered.iter()).all(|d| d.load(Ordering::Acquire) >= WARM_UP)
    });
    // The shutdown: every node crashed, one after the other, at whatever moment each thread
    // is at. Gaps of up to 3 ms let the survivors start (or finish) a view change; gaps of up
    // to 300 us leave the last view's logs ragged (messages logged at some members only).
    let scale = if rng.below(2) == 0 { 300 } else { 3000 };
    let mut order: Vec<usize> = (0..N).collect();
    for j in (1..N).rev() {
        order.swap(j, rng.below(j as u64 + 1) as usize);
    }
    ctl.shutdown.store(true, Ordering::Release);
    for &i in &order {
        faults.crash(NodeId(i as u32));
        ctl.crashed[i].store(true, Ordering::Release);
        std::thread::sleep(Duration::from_micros(rng.below(scale)));
    }
    let recs: Vec<Rec> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    warm?;
    if let Some(f) = recs.iter().find_map(|r| r.failed.clone()) {
        return Err(f);
    }
    Ok((faults, order, recs))
}

/// The restart: `first` restart at once (in a seeded order), `later` once every one of
/// `first` delivered new messages. Checks everything (module docs) against `before`.
fn restart(
    seed: u64,
    base: &Path,
    faults: &Faults,
    before: &[Rec],
    first: &[usize],
    later: &[usize],
) -> Result<(), String> {
    let ctl = Ctl::new();
    let mut handles: Vec<Option<JoinHandle<Rec>>> = (0..N).map(|_| None).collect();
    let mut rng = Rng(seed.wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1);
    for &i in first {
        let node = faults.restart_node(NodeId(i as u32)).unwrap();
        handles[i] = Some(spawn(i, 1, node, base, &ctl));
        std::thread::sleep(Duration::from_micros(rng.below(1000)));
    }
    let mut outcome = Ok(());
    if !later.is_empty() {
        // Late enough that the restart went on without them (the restart view is installed
        // and delivers).
        outcome = wait_until("the first restarted members' new deliveries", || {
            first.iter().all(|&i| {
                ctl.delivered[i].load(Ordering::Acquire) as usize
                    > before.iter().map(|r| r.delivered.len()).max().unwrap_or(0) + 10
            })
        });
        for &i in later {
            let node = faults.restart_node(NodeId(i as u32)).unwrap();
            handles[i] = Some(spawn(i, 1, node, base, &ctl));
        }
    }
    if outcome.is_ok() {
        outcome = wait_until(
            "every member's new deliveries in a view of all four",
            || ctl.done.iter().all(|d| d.load(Ordering::Acquire)),
        );
    }
    ctl.quit.store(true, Ordering::Release);
    let after: Vec<Rec> = (handles.into_iter())
        .map(|h| h.map(|h| h.join().unwrap()).unwrap_or_default())
        .collect();
    if let Some(f) = after.iter().find_map(|r| r.failed.clone()) {
        return Err(f);
    }
    outcome?;
    check(before, &after, first)
}

fn check(before: &[Rec], after: &[Rec], first: &[usize]) -> Result<(), String> {
    // The replay: the messages of the first life each member delivered in its new life. Every
    // one of `first` that did not join by transfer replays the same sequence from position 0.
    let old = |r: &Rec| -> Seq {
        (r.delivered.iter())
            .take_while(|d| d.1[0] == 0)
            .cloned()
            .collect()
    };
    let replayers: Vec<usize> = (first.iter().copied())
        .filter(|&i| after[i].joined_at.is_none())
        .collect();
    let Some(&k0) = replayers.first() else {
        return Err("every restarted member joined by transfer: nobody replayed".into());
    };
    let replay = old(&after[k0]);
    for &i in &replayers {
        if old(&after[i]) != replay {
            return Err(format!(
                "n{i} and n{k0} replayed differently ({} and {} messages)",
                old(&after[i]).len(),
                replay.len()
            ));
        }
    }
    for (i, r) in before.iter().enumerate() {
        if !is_prefix(&r.delivered, &replay) {
            return Err(format!(
                "n{i} delivered {} messages before the shutdown, not a prefix of the replay of {}",
                r.delivered.len(),
                replay.len()
            ));
        }
        if let Some(p) = r.durable
            && p >= replay.len() as u64
        {
            return Err(format!(
                "n{i} was told position {p} is durable; the replay has {} messages",
                replay.len()
            ));
        }
    }
    // After the replay: only new messages, identical at every position everywhere.
    let mut at: BTreeMap<u64, (usize, &[u8])> = BTreeMap::new();
    for (i, r) in after.iter().enumerate() {
        for d in &r.delivered {
            let (j, other) = *at.entry(d.0).or_insert((i, &d.1));
            if other != d.1.as_slice() {
                return Err(format!("n{i} and n{j} differ at position {}", d.0));
            }
        }
        let fresh = r.delivered.iter().skip_while(|d| d.1[0] == 0);
        if let Some(d) = fresh.clone().find(|d| d.1[0] == 0) {
            return Err(format!(
                "n{i} delivered a message of the first life at {} after new ones",
                d.0
            ));
        }
        if fresh.count() < AFTER {
            return Err(format!("n{i} delivered too few new messages"));
        }
    }
    let views = |r: &Rec| r.views.iter().map(|v| (v.0, v.1.len())).collect::<Vec<_>>();
    println!(
        "before: delivered {:?}, durable {:?}, last views {:?}; replay {}; after: views {:?}, \
         joined by transfer at {:?}, delivered {:?}",
        before.iter().map(|r| r.delivered.len()).collect::<Vec<_>>(),
        before.iter().map(|r| r.durable).collect::<Vec<_>>(),
        before
            .iter()
            .map(|r| r.views.last().map(|v| (v.0, v.1.len())))
            .collect::<Vec<_>>(),
        replay.len(),
        after.iter().map(views).collect::<Vec<_>>(),
        after.iter().map(|r| r.joined_at).collect::<Vec<_>>(),
        after.iter().map(|r| r.delivered.len()).collect::<Vec<_>>(),
    );
    Ok(())
}

fn scratch(tag: &str, seed: u64) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "squall-threaded-restart-{}-{tag}-{seed}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn round(tag: &str, seed: u64, majority: bool) {
    let base = scratch(tag, seed);
    let result = first_life(seed, &base).and_then(|(faults, order, before)| {
        // The three crashed last were members of every view before the shutdown.
        let (first, later) = if majority {
            (order[1..].to_vec(), vec![order[0]])
        } else {
            (order.clone(), Vec::new())
        };
        restart(seed, &base, &faults, &before, &first, &later)
    });
    if let Err(e) = result {
        panic!(
            "seed {seed} ({tag}): {e} (files kept in {})",
            base.display()
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_total_shutdown_mid_stream_and_a_restart_of_all_keep_everything_delivered() {
    for seed in seeds(ROUNDS) {
        round("all", seed, false);
    }
}

#[test]
fn a_restart_of_a_majority_goes_on_and_the_last_member_comes_back_later() {
    for seed in seeds(ROUNDS) {
        round("majority", seed, true);
    }
}
