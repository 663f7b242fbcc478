//! Joins through `Group` with state transfer, on the simulator. The application is a model:
//! a hash chain over delivered payloads, whose snapshot is `[hash][position][padding]` (the
//! padding sets the state size). Checked after every step: a passive joiner hands out nothing
//! and refuses submits; a joiner's first upcall is its view, with the state ready; every
//! node's chain value at a position equals everyone else's at that position (so a joiner's
//! state plus its deliveries equals every member's); positions are gapless from the state's;
//! uniform agreement (`group_sim::uniform`: a node starts each view, or takes its state in it,
//! at or past every position any node delivered in an earlier view, a crashed or departed one
//! included); virtual synchrony (every node that reports a view, other than as the view it took
//! its state in, starts it at the same position).
//! At the end: the joiner is active in the survivors' last view and every survivor reached
//! the same position.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use squall_membership::change::ChangeKind;
use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::MemLog;
use squall_membership::transfer::TransferError;
use squall_membership::view::ShardId;
use squall_ordering::{Delivery, TotalOrder, Upcall};
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds};

mod group_sim;
use group_sim::Moment;
use group_sim::mix;
use group_sim::uniform::Uniform;

/// The one shard of these groups, for [`Uniform`].
const SHARD: ShardId = ShardId {
    subgroup: 0,
    shard: 0,
};

/// One node's model application.
#[derive(Clone, Debug, Default)]
struct App {
    hash: u64,
    /// Next position to apply.
    next: u64,
    /// Whether it has state (initial members, joiners once restored).
    has_state: bool,
    /// The view its deliveries are in (the last it reported, or took its state in).
    view: u64,
    /// The position of the state it took by transfer (none for an initial member).
    took: Option<u64>,
}

/// A state this run's application gave a member that a joiner asked.
#[derive(Debug)]
struct Served {
    member: usize,
    /// The position given (the application's next position to apply).
    position: u64,
    /// The position of the state this member took by transfer itself, if it joined.
    took: Option<u64>,
    /// With [`Run::probe_zero`]: what `provide_state(0, ..)` answered first.
    zero: Option<Result<(), TransferError>>,
}

struct Run {
    sim: Sim,
    groups: Vec<Group<SimNode, MemLog>>,
    apps: Vec<App>,
    crashed: Vec<bool>,
    /// Chain value after each position, the first node to record it.
    chain: BTreeMap<u64, u64>,
    state_size: usize,
    /// Crash whichever member provides state, this many steps after it did (once).
    crash_sender_after: Option<usize>,
    provided_at: Option<(usize, usize)>,
    step: usize,
    counter: u64,
    /// When each node became active (step, virtual time).
    activated: Vec<Option<(usize, Duration)>>,
    upcalls: Vec<Upcall<Delivery>>,
    /// States refused as too large: (member, view) of each refusal.
    refused: Vec<(usize, u64)>,
    /// Uniform agreement: what each view delivered.
    uniform: Uniform,
    /// View id -> the position the first node to report it (not as a joiner's first view)
    /// started it at.
    starts: BTreeMap<u64, u64>,
    /// Every state provided, in order.
    served: Vec<Served>,
    /// Before each provide, try position 0 first (the rule of a harness that counts only
    /// the deliveries of its own process).
    probe_zero: bool,
}

impl Run {
    fn new(seed: u64, universe: usize, initial: usize, chunk: usize, state_size: usize) -> Run {
        Run::with(seed, universe, initial, chunk, state_size, |_, _| {})
    }

    /// [`new`](Run::new) with node `i`'s configuration changed by `tweak(i, ..)`.
    fn with(
        seed: u64,
        universe: usize,
        initial: usize,
        chunk: usize,
        state_size: usize,
        tweak: impl Fn(usize, &mut GroupConfig),
    ) -> Run {
        let mut cfg = group_sim::config(universe, initial);
        cfg.transfer.chunk_size = chunk;
        cfg.transfer.window = 4;
        let layout = Group::<SimNode, MemLog>::layout(&cfg).unwrap();
        let (sim, nodes) = Sim::cluster(SimConfig::seeded(seed), universe, &layout).unwrap();
        let groups = nodes
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let mut cfg = cfg.clone();
                tweak(i, &mut cfg);
                Group::new(t, cfg, MemLog::default(), None).unwrap()
            })
            .collect();
        let mut apps = vec![App::default(); universe];
        for a in &mut apps[..initial] {
            a.has_state = true;
        }
        Run {
            sim,
            groups,
            apps,
            crashed: vec![false; universe],
            chain: BTreeMap::new(),
            state_size,
            crash_sender_after: None,
            provided_at: None,
            step: 0,
            counter: 0,
            activated: vec![None; universe],
            upcalls: Vec::new(),
            refused: Vec::new(),
            uniform: Uniform::default(),
            starts: BTreeMap::new(),
            served: Vec::new(),
            probe_zero: false,
        }
    }

    fn crash(&mut self, i: usize) {
        self.sim.crash(NodeId(i as u32));
        self.crashed[i] = true;
    }

    fn record(&mut self, i: usize, pos: u64, hash: u64) -> Result<(), String> {
        match self.chain.get(&pos) {
            Some(&h) if h != hash => Err(format!(
                "n{i}: state at position {pos} differs from another node's"
            )),
            Some(_) => Ok(()),
            None => {
                self.chain.insert(pos, hash);
                Ok(())
            }
        }
    }

    fn poll(&mut self, i: usize) -> Result<(), String> {
        if self.crashed[i] {
            return Ok(());
        }
        self.upcalls.clear();
        let was_active = self.groups[i].is_active();
        self.groups[i].poll(&mut self.upcalls);
        let ups = std::mem::take(&mut self.upcalls);
        for u in &ups {
            match u {
                Upcall::Deliver(d) => {
                    if !self.apps[i].has_state {
                        return Err(format!("n{i} delivered before it had the state"));
                    }
                    if d.position != self.apps[i].next {
                        return Err(format!(
                            "n{i} delivered position {} when it expected {}",
                            d.position, self.apps[i].next
                        ));
                    }
                    self.uniform.delivered(SHARD, self.apps[i].view, d.position);
                    let h = mix(self.apps[i].hash, &d.payload);
                    self.apps[i].hash = h;
                    self.apps[i].next += 1;
                    self.record(i, d.position, h)?;
                }
                Upcall::View(v) => {
                    if let Some(s) = self.groups[i].take_state() {
                        if self.apps[i].has_state {
                            return Err(format!("n{i} got a state it did not need"));
                        }
                        if s.state.len() != self.state_size.max(16) {
                            return Err(format!("n{i}: transferred state has the wrong size"));
                        }
                        let hash = u64::from_le_bytes(s.state[..8].try_into().unwrap());
                        let next = u64::from_le_bytes(s.state[8..16].try_into().unwrap());
                        if next != s.position {
                            return Err(format!(
                                "n{i}: state position disagrees with the snapshot"
                            ));
                        }
                        if s.state[16..].iter().any(|&b| b != (next as u8)) {
                            return Err(format!("n{i}: state padding corrupted"));
                        }
                        self.apps[i] = App {
                            hash,
                            next,
                            has_state: true,
                            view: v.id,
                            took: Some(next),
                        };
                        self.uniform.check(i, SHARD, v.id, next)?;
                        if next > 0 {
                            self.record(i, next - 1, hash)?;
                        }
                        self.activated[i] = Some((
                            self.step,
                            self.sim
                                .now()
                                .saturating_since(squall_transport::Time::ZERO),
                        ));
                    } else if !self.apps[i].has_state {
                        return Err(format!("n{i} reported a view before its state arrived"));
                    } else {
                        let at = self.apps[i].next;
                        self.apps[i].view = v.id;
                        self.uniform.check(i, SHARD, v.id, at)?;
                        match *self.starts.entry(v.id).or_insert(at) {
                            p if p != at => {
                                return Err(format!(
                                    "virtual synchrony: n{i} starts view {} at {at}, another node at {p}",
                                    v.id
                                ));
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        if !was_active && self.groups[i].is_active() && !self.apps[i].has_state {
            return Err(format!("n{i} active without a state"));
        }
        if !self.groups[i].is_active()
            && self.groups[i].view().is_some()
            && self.groups[i].stopped().is_none()
            && self.groups[i].submit(b"x").is_ok()
        {
            return Err(format!("n{i}: a passive joiner accepted a submit"));
        }
        if self.groups[i].state_wanted() {
            let a = &self.apps[i];
            let mut s = a.hash.to_le_bytes().to_vec();
            s.extend_from_slice(&a.next.to_le_bytes());
            s.resize(self.state_size.max(16), a.next as u8);
            let (next, took) = (a.next, a.took);
            let zero = (self.probe_zero).then(|| self.groups[i].provide_state(0, &s));
            self.served.push(Served {
                member: i,
                position: next,
                took,
                zero,
            });
            match self.groups[i].provide_state(next, &s) {
                Err(TransferError::TooLarge { .. }) => {
                    let view = self.groups[i].view().map_or(0, |v| v.id);
                    self.refused.push((i, view));
                    return Ok(());
                }
                r => r.map_err(|e| format!("n{i}: provide_state: {e}"))?,
            }
            if self.provided_at.is_none() {
                self.provided_at = Some((i, self.step));
            }
        }
        Ok(())
    }

    fn submit(&mut self, i: usize) {
        if self.crashed[i] || !self.groups[i].is_active() || self.sim.random(3) != 0 {
            return;
        }
        self.counter += 1;
        let mut p = (i as u32).to_le_bytes().to_vec();
        p.extend_from_slice(&self.counter.to_le_bytes());
        let _ = self.groups[i].submit(&p);
    }

    /// Runs `steps` steps (submitting during the first `submit_steps`).
    fn run(&mut self, steps: usize, submit_steps: usize) -> Result<(), String> {
        for _ in 0..steps {
            self.step += 1;
            if let (Some(after), Some((s, at))) = (self.crash_sender_after, self.provided_at)
                && self.step == at + after
                && !self.crashed[s]
            {
                self.crash(s);
            }
            for i in 0..self.groups.len() {
                if self.step < submit_steps {
                    self.submit(i);
                }
                self.poll(i)?;
            }
            self.sim.advance(Duration::from_micros(2));
        }
        Ok(())
    }

    /// The survivors agree on the view and position and are all active.
    fn settled(&self, expect_active: &[usize]) -> Result<(), String> {
        let live: Vec<usize> = (0..self.groups.len())
            .filter(|&i| !self.crashed[i] && self.groups[i].view().is_some())
            .collect();
        for &i in expect_active {
            if !self.groups[i].is_active() {
                return Err(format!(
                    "n{i} is not active at the end: {:?}",
                    self.groups[i]
                ));
            }
        }
        let v0 = self.groups[live[0]].view().map(|v| v.id);
        for &i in &live {
            if self.groups[i].view().map(|v| v.id) != v0 {
                return Err("survivors in different views".into());
            }
            if self.apps[i].next != self.apps[live[0]].next {
                return Err(format!(
                    "n{i} at position {} but n{} at {}",
                    self.apps[i].next, live[0], self.apps[live[0]].next
                ));
            }
        }
        if self.apps[live[0]].next < 20 {
            return Err("too few deliveries".into());
        }
        Ok(())
    }
}

fn join_run(seed: u64, state_size: usize) -> Result<Run, String> {
    let mut r = Run::new(seed, 4, 3, 1024, state_size);
    r.run(300, 10_000)?;
    r.groups[3].join().unwrap();
    r.run(8000, 4000)?;
    r.settled(&[0, 1, 2, 3])?;
    Ok(r)
}

#[test]
fn a_node_joins_while_all_submit_seed_sweep() {
    check_seeds("a_node_joins_while_all_submit_seed_sweep", 6, |seed| {
        let r = join_run(seed, 5000)?;
        if r.groups[0].stats().transfers_served + r.groups[1].stats().transfers_served == 0 {
            return Err("no transfer was served".into());
        }
        Ok(())
    });
}

#[test]
fn two_nodes_join_at_once() {
    check_seeds("two_nodes_join_at_once", 4, |seed| {
        let mut r = Run::new(seed, 5, 3, 512, 3000);
        r.run(300, 10_000)?;
        r.groups[3].join().unwrap();
        r.groups[4].join().unwrap();
        r.run(10_000, 5000)?;
        r.settled(&[0, 1, 2, 3, 4])
    });
}

#[test]
fn the_sender_and_leader_crashes_mid_transfer_the_joiner_catches_up_later() {
    check_seeds(
        "the_sender_and_leader_crashes_mid_transfer_the_joiner_catches_up_later",
        6,
        |seed| {
            let mut r = Run::new(seed, 5, 4, 256, 8000);
            r.crash_sender_after = Some(3);
            r.run(300, 10_000)?;
            r.groups[4].join().unwrap();
            r.run(12_000, 5000)?;
            let (s, _) = r.provided_at.ok_or("nobody provided state")?;
            if !r.crashed[s] {
                return Err("the sender was not crashed".into());
            }
            if r.groups[4].stats().transfer_restarts == 0 {
                return Err("the joiner's transfer did not restart".into());
            }
            let survivors: Vec<usize> = (0..5).filter(|&i| i != s).collect();
            r.settled(&survivors)
        },
    );
}

#[test]
fn the_joiner_crashes_mid_transfer_the_group_carries_on() {
    check_seeds(
        "the_joiner_crashes_mid_transfer_the_group_carries_on",
        4,
        |seed| {
            let mut r = Run::new(seed, 4, 3, 256, 8000);
            r.run(300, 10_000)?;
            r.groups[3].join().unwrap();
            let mut crashed = false;
            for _ in 0..8000 {
                r.run(1, 6000)?;
                if !crashed && r.provided_at.is_some() {
                    r.crash(3);
                    crashed = true;
                }
            }
            if !crashed {
                return Err("the joiner never got to its transfer".into());
            }
            r.settled(&[0, 1, 2])?;
            if r.groups[0].view().unwrap().contains(NodeId(3)) {
                return Err("the crashed joiner is still in the view".into());
            }
            Ok(())
        },
    );
}

/// The shape of the threaded split test's one failure (docs/MEMBERSHIP.md, ninety-ninth
/// part): a member that took its state by transfer and delivered nothing since is asked for
/// the state by the next joiner (a joiner asks a member that announced itself active, as
/// one does after its transfer, before an initial member). Its application is at the state's
/// position, which is the view's first position and the group's next position: `Group`
/// takes a snapshot there and refuses one at 0, the position a harness gives when it counts
/// only the deliveries of its own process ("got 0", as in the threaded failure).
#[test]
fn a_member_that_joined_by_transfer_serves_the_next_joiner_at_its_states_position() {
    check_seeds(
        "a_member_that_joined_by_transfer_serves_the_next_joiner_at_its_states_position",
        3,
        |seed| {
            let mut r = Run::new(seed, 5, 3, 512, 3000);
            r.probe_zero = true;
            r.run(300, 10_000)?;
            // No submissions from here on: 3 delivers nothing after its transfer.
            r.groups[3].join().unwrap();
            r.run(6000, 0)?;
            r.settled(&[0, 1, 2, 3])?;
            let took = r.apps[3].took.ok_or("3 took no state")?;
            if r.apps[3].next != took {
                return Err(format!("3 delivered past its state at {took}"));
            }
            r.groups[4].join().unwrap();
            r.run(6000, 0)?;
            r.settled(&[0, 1, 2, 3, 4])?;
            if r.apps[4].took != Some(took) {
                return Err(format!("4 took {:?}, not {took}", r.apps[4].took));
            }
            let s = (r.served.iter().find(|s| s.member == 3))
                .ok_or_else(|| format!("3 was never asked: {:?}", r.served))?;
            if s.position != took || s.took != Some(took) {
                return Err(format!("3 served {s:?}, its state at {took}"));
            }
            match &s.zero {
                Some(Err(TransferError::Position {
                    position: 0,
                    first,
                    next,
                })) if *first == took && *next == took => Ok(()),
                other => Err(format!("provide_state(0) at 3 answered {other:?}")),
            }
        },
    );
}

/// A state above `max_state_bytes` (docs/MEMBERSHIP.md, fortieth part, "s23 follow-up: a
/// refused state"): the member asked refuses it once per view (no longer wanted after the
/// refusal, where it used to be asked for it at every poll) and the joiner, told the length
/// alone, stops saying why instead of waiting for good; the members carry on without it.
/// With the joiner's own bound as low it reports `TooLarge`; with its bound higher, that the
/// member refused.
#[test]
fn a_state_above_max_state_bytes_is_refused_once_a_view_and_the_joiner_stops_saying_why() {
    for (joiner_max, says) in [
        (1024, "exceeds max_state_bytes = 1024"),
        (1 << 20, "refused to send it: 4096 bytes"),
    ] {
        check_seeds(
            "a_state_above_max_state_bytes_is_refused_once_a_view_and_the_joiner_stops_saying_why",
            2,
            |seed| {
                let mut r = Run::with(seed, 4, 3, 1024, 4096, |i, cfg| {
                    cfg.transfer.max_state_bytes = if i == 3 { joiner_max } else { 1024 };
                });
                r.run(300, 10_000)?;
                r.groups[3].join().unwrap();
                r.run(4000, 2000)?;
                let mut seen = r.refused.clone();
                seen.sort_unstable();
                seen.dedup();
                if r.refused.is_empty() || seen.len() != r.refused.len() {
                    return Err(format!(
                        "refusals (member, view), each expected once: {:?}",
                        r.refused
                    ));
                }
                match r.groups[3].stopped() {
                    Some(why) if why.contains(says) => {}
                    other => {
                        return Err(format!(
                            "the joiner was not told the state is too large ({says}): {other:?}"
                        ));
                    }
                }
                for i in 0..3 {
                    if let Some(why) = r.groups[i].stopped() {
                        return Err(format!("member n{i} stopped: {why}"));
                    }
                }
                Ok(())
            },
        );
    }
}

/// Join time (join request → joiner active, virtual time) as a function of state size, beside
/// the failure → new view time of the same configuration. `--nocapture` prints the table.
#[test]
fn join_time_by_state_size() {
    let sizes = [4 << 10, 64 << 10, 1 << 20, 16 << 20];
    let seeds = 3;
    let mut rows = Vec::new();
    for &size in &sizes {
        let mut times = Vec::new();
        for seed in 1..=seeds {
            let mut r = Run::new(seed, 4, 3, 64 << 10, size);
            r.groups[0].submit(b"warm").unwrap();
            r.run(300, 0).unwrap();
            let t0 = r.sim.now().saturating_since(squall_transport::Time::ZERO);
            r.groups[3].join().unwrap();
            for _ in 0..200_000 {
                r.run(1, 0).unwrap();
                if r.activated[3].is_some() {
                    break;
                }
            }
            let (_, t1) = r.activated[3].expect("the joiner became active");
            times.push(t1 - t0);
        }
        times.sort();
        rows.push((size, times[times.len() / 2]));
    }
    // Baseline: a follower crashes; time from the crash to the new view everywhere.
    let mut base = Vec::new();
    for seed in 1..=seeds {
        let mut r = Run::new(seed, 3, 3, 64 << 10, 16);
        r.run(300, 0).unwrap();
        let t0 = r.sim.now().saturating_since(squall_transport::Time::ZERO);
        r.crash(2);
        let mut t1 = None;
        for _ in 0..100_000 {
            r.run(1, 0).unwrap();
            if (0..2).all(|i| r.groups[i].view().is_some_and(|v| v.id == 1)) {
                t1 = Some(r.sim.now().saturating_since(squall_transport::Time::ZERO));
                break;
            }
        }
        base.push(t1.expect("view 1 installed") - t0);
    }
    base.sort();
    let base = base[base.len() / 2];
    println!(
        "join time by state size (sim, virtual time, 64 KiB chunks, window 4, median of {seeds} seeds)"
    );
    println!("baseline: crash -> new view = {base:?}");
    println!("{:>10} {:>14} {:>10}", "state", "join time", "x baseline");
    for (size, t) in &rows {
        println!(
            "{:>10} {:>14?} {:>10.3}",
            size,
            t,
            t.as_secs_f64() / base.as_secs_f64()
        );
    }
    // Larger states take longer (more chunk round trips).
    assert!(rows[3].1 > rows[0].1);
}

/// Whether a live node's proposal names `node`'s leave.
fn leave_proposed(r: &Run, node: usize) -> bool {
    (0..r.groups.len()).filter(|&i| !r.crashed[i]).any(|i| {
        r.groups[i].gms().proposal().is_some_and(|(_, ch)| {
            ch.iter()
                .any(|c| c.node == NodeId(node as u32) && c.kind == ChangeKind::Leave)
        })
    })
}

/// The fifty-fourth part's case (`docs/MEMBERSHIP.md`, sixtieth part) beside a join: five
/// members, n3 and n4 ask to leave at once; n3 is crashed, for good, in the step in which a
/// proposal first names its leave, before it wedged (it publishes no wedge block, so the trim
/// must leave it out, `trim_survivors`, rather than count its received messages as 0). n4
/// wedges and leaves: it must deliver up to the trim (`holds_trim`), the position at which the
/// survivors start the next view. Then n5 joins and takes its state from the survivors. Every
/// check of `Run::poll` after every step (uniform agreement counts what the crashed leaver
/// delivered); at the end n0, n1, n2 and n5 are active at one position. `Missed` if n3 had
/// wedged when its leave was first seen proposed.
fn crashing_leaver_then_join(seed: u64) -> Result<Moment, String> {
    let mut r = Run::new(seed, 6, 5, 512, 4000);
    r.run(300, 10_000)?;
    for i in [3, 4] {
        r.groups[i]
            .leave()
            .map_err(|e| format!("n{i}: leave: {e}"))?;
    }
    let mut proposed = false;
    for _ in 0..3000 {
        r.run(1, 10_000)?;
        if leave_proposed(&r, 3) {
            proposed = true;
            break;
        }
    }
    if !proposed {
        return Err("n3's leave was never proposed".into());
    }
    let moment = if r.groups[3].gms().is_wedged() {
        Moment::Missed
    } else {
        Moment::Reached
    };
    r.crash(3);
    r.run(3000, 10_000)?;
    r.groups[5].join().map_err(|e| e.to_string())?;
    r.run(8000, 8000)?;
    r.settled(&[0, 1, 2, 5])?;
    let v = r.groups[0].view().ok_or("n0 has no view")?;
    if v.contains(NodeId(3)) || v.contains(NodeId(4)) {
        return Err(format!(
            "the leavers are still in view {}: {:?}",
            v.id, v.members
        ));
    }
    let why = r.groups[4].stopped().ok_or("n4 did not stop")?;
    if !why.contains("left: view") {
        return Err(format!("n4 stopped for another reason: {why}"));
    }
    let next = r.apps[4].view + 1;
    let start = r.starts.get(&next).copied();
    if start != Some(r.apps[4].next) {
        return Err(format!(
            "n4 left at position {} but the survivors start view {next} at {start:?}: the leaver did not deliver the trim",
            r.apps[4].next
        ));
    }
    Ok(moment)
}

#[test]
fn a_leaver_that_crashes_before_its_wedge_beside_a_leaver_that_wedges_then_a_join() {
    group_sim::check_seeds_reaching(
        "a_leaver_that_crashes_before_its_wedge_beside_a_leaver_that_wedges_then_a_join",
        4,
        "n3's crash before its wedge with its leave proposed",
        crashing_leaver_then_join,
    );
}

/// Joins at random points mixed with a crash (any member, or the sender right after it provided
/// the state), a leave and a one-member partition healed later; random per seed. Every check of
/// `Run::poll` after every step; at the end every live member is active, in the same view, at
/// the same position.
#[test]
fn mixed_joins_leaves_crashes_and_partitions_seed_sweep() {
    check_seeds(
        "mixed_joins_leaves_crashes_and_partitions_seed_sweep",
        8,
        |seed| {
            let mut r = Run::new(seed, 6, 4, 512, 4000);
            let pick = |r: &Run, below: u64| r.sim.random(below) as usize;
            let join_at = [200 + pick(&r, 2500), 200 + pick(&r, 2500)];
            let fault_at = 300 + pick(&r, 3000);
            let kind = pick(&r, 4);
            let victim = pick(&r, 4);
            if kind == 1 {
                r.crash_sender_after = Some(1 + pick(&r, 6));
            }
            let mut healed_at = None;
            for step in 0..14_000 {
                for (j, &at) in join_at.iter().enumerate() {
                    if step == at {
                        r.groups[4 + j].join().map_err(|e| e.to_string())?;
                    }
                }
                if step == fault_at {
                    match kind {
                        0 => r.crash(victim),
                        2 => {
                            let _ = r.groups[victim].leave();
                        }
                        3 => {
                            let rest: Vec<NodeId> = (0..6u32)
                                .filter(|&k| k as usize != victim)
                                .map(NodeId)
                                .collect();
                            r.sim.partition(&[NodeId(victim as u32)], &rest);
                            healed_at = Some(step + 3000);
                        }
                        _ => {}
                    }
                }
                if healed_at == Some(step) {
                    r.sim.heal();
                }
                r.run(1, 7000)?;
            }
            let live: Vec<usize> = (0..6)
                .filter(|&i| {
                    !r.crashed[i] && r.groups[i].stopped().is_none() && r.groups[i].view().is_some()
                })
                .collect();
            for &i in &live {
                if !r.groups[i].is_active() {
                    return Err(format!("n{i} still passive at the end: {:?}", r.groups[i]));
                }
                if r.apps[i].next != r.apps[live[0]].next
                    || r.groups[i].view().map(|v| v.id) != r.groups[live[0]].view().map(|v| v.id)
                {
                    return Err(format!("n{i} and n{} did not settle together", live[0]));
                }
            }
            if live.len() < 3 {
                return Err(format!("only {live:?} live at the end"));
            }
            Ok(())
        },
    );
}
