//! A member removed after a suspicion that reaches its peers by gossip only, while its links to
//! them are up and its epoch is still writing (issue 6, `docs/MEMBERSHIP.md`, forty-third part),
//! on the simulator. The view after next reuses the region set that the removed member's last
//! epoch wrote into; every peer zeroes its copy of that set when it leaves the view. The test
//! records every one-sided op posted into an epoch region set, with the epoch (view) that
//! posted it, and every zeroing, and checks from the simulator's trace that no op of an epoch
//! lands in a peer's copy of that epoch's set after the peer zeroed it when leaving that view
//! or a later one on the same set. A second test (s24, forty-eighth part's review follow-up)
//! makes the accuser an accused leader, whose suspicion is never published: the others learn
//! of the removal only from its decision and must cut the member as they install. Two more
//! (s26, sixty-eighth part) run a total restart in which a member of the last view comes back
//! without a log that holds it (a *restart outsider*, counted out without a report to the
//! transport) and check that it posts nothing into an epoch set before it runs a view.
#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Duration;

mod group_sim;
use group_sim::tap::{Tap, Tapped};
use group_sim::{Moment, check_seeds_reaching, payload, sender_of};

use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::MemLog;
use squall_ordering::{SubmitError, TotalOrder, Upcall};
use squall_sst::Suspicion;
use squall_transport::{
    Event, FailureCause, NodeId, OpId, OpKind, RegionId, RemoteAddr, Transport,
};
use squall_transport_mem::sim::{Outcome, Sim, SimConfig, SimNode};

/// Virtual time per round.
const STEP: Duration = Duration::from_micros(2);

/// One op a node posted into a peer's copy of an epoch region set.
struct Post {
    dst: NodeId,
    set: usize,
    /// The view whose epoch posted it (`None`: the poster's view did not tell).
    epoch: Option<u64>,
}

/// What the [`Recorder`] taps and the harness record.
#[derive(Default)]
struct Record {
    /// The region ids of epoch set 0 and set 1.
    sets: [Vec<RegionId>; 2],
    /// Every op posted into a peer's epoch set, by (poster, op number).
    posts: HashMap<(NodeId, u64), Post>,
    /// The posts of the node the harness drives now, their epoch not resolved yet.
    pending: Vec<(NodeId, u64)>,
    /// Each zeroing: (node, set, the view it left, the trace's length then). The simulator
    /// applies ops only between the harness's calls, so a trace entry at or past that index
    /// left its link after the zeroing.
    zeroed: Vec<(NodeId, usize, u64, usize)>,
    /// Each failure a node's endpoint reported: (node, peer, cause).
    failures: Vec<(NodeId, NodeId, FailureCause)>,
    /// A failure to hand a node at its next poll, before its endpoint's own events: (node,
    /// peer), as if the peer had cut the link first ([`FailureCause::Remote`]).
    inject: Option<(NodeId, NodeId)>,
}

/// A tap that records, in the shared [`Record`], every one-sided op its node posts into a
/// peer's copy of an epoch region set.
struct Recorder(Rc<RefCell<Record>>);

impl Tap for Recorder {
    fn accepted(&mut self, inner: &SimNode, peer: NodeId, at: RemoteAddr, op: OpId) {
        let mut r = self.0.borrow_mut();
        let Some(set) = (0..2).find(|&s| r.sets[s].contains(&at.region)) else {
            return;
        };
        let src = inner.local_id();
        r.posts.insert(
            (src, op.0),
            Post {
                dst: peer,
                set,
                epoch: None,
            },
        );
        r.pending.push((src, op.0));
    }

    fn poll(&mut self, inner: &mut SimNode, out: &mut [Event]) -> usize {
        let me = inner.local_id();
        let armed = self.0.borrow().inject.filter(|&(at, _)| at == me);
        let got = match (armed, out.split_first_mut()) {
            (Some((_, peer)), Some((first, rest))) => {
                self.0.borrow_mut().inject = None;
                *first = Event::PeerFailed {
                    peer,
                    cause: FailureCause::Remote,
                };
                1 + inner.poll(rest)
            }
            _ => inner.poll(out),
        };
        for e in &out[..got] {
            if let Event::PeerFailed { peer, cause } = *e {
                self.0.borrow_mut().failures.push((me, peer, cause));
            }
        }
        got
    }
}

type Node = Tapped<Recorder>;
type Seq = Vec<(u64, Vec<u8>)>;

/// The scenario of one seed.
#[derive(Clone, Copy, Debug)]
struct Plan {
    seed: u64,
    /// The member that is suspected (the highest-ranked: the lowest-ranked end of a cut link
    /// publishes its suspicion at once, see `squall_sst::failure`).
    x: usize,
    /// The member whose link to `x` is cut; the others learn of the suspicion from it.
    accuser: usize,
    /// The accuser learns first that `x` cut the link (its endpoint hands it a
    /// [`FailureCause::Remote`] failure before its own): it is accused, so its suspicion of `x`
    /// is never published, and the others learn of `x`'s removal only from its decision.
    accused: bool,
    /// The second view change, once view 1 runs: view 2 reuses set 0.
    second: Second,
    /// Extra one-way latency of every op to or from `x`: its epoch's writes stay in flight
    /// that long.
    delay: Duration,
    /// The link between `accuser` and `x` is cut (both ways) in the first round, at least
    /// this many rounds after `x`'s epoch first posted into a peer's copy of set 0 (it is held
    /// until it reads every member running view 0), that follows a round in which it posted
    /// into the copy of a member other than `accuser`: such an op is then in flight (for
    /// `delay`) while that member learns of the suspicion and installs view 1.
    cut_after: usize,
}

/// The second view change of a run.
#[derive(Clone, Copy, Debug)]
enum Second {
    /// This initial member crashes: view 2 has one member fewer than view 1.
    Crash(usize),
    /// This node (idle since the start) joins: view 2 has as many members as view 0, the
    /// joiner at `x`'s rank of view 0, so a stale row of `x` would be read as the joiner's.
    Join(usize),
}

struct Run {
    plan: Plan,
    sim: Sim,
    /// `None` once crashed.
    groups: Vec<Option<Group<Node, MemLog>>>,
    rec: Rc<RefCell<Record>>,
    delivered: Vec<Seq>,
    /// Per member: view id → deliveries made when it installed that view.
    installs: Vec<BTreeMap<u64, usize>>,
    next: Vec<u32>,
}

impl Run {
    /// `universe` nodes, the first `initial` of them the members of view 0.
    fn new(plan: Plan, universe: usize, initial: usize) -> Run {
        let cfg = group_sim::config(universe, initial);
        let mut run = Run::with(plan, &cfg, universe, |_, t| {
            Group::new(t, cfg.clone(), MemLog::default(), None).unwrap()
        });
        run.installs = (0..universe)
            .map(|i| {
                if i < initial {
                    BTreeMap::from([(0, 0)])
                } else {
                    BTreeMap::new()
                }
            })
            .collect();
        run
    }

    /// `universe` nodes on a fabric laid out for `cfg`, node `i`'s group made by `make(i, _)`
    /// on its recording endpoint.
    fn with(
        plan: Plan,
        cfg: &GroupConfig,
        universe: usize,
        mut make: impl FnMut(usize, Node) -> Group<Node, MemLog>,
    ) -> Run {
        let n = universe;
        let layout = Group::<Node, MemLog>::layout(cfg).unwrap();
        // An op to a peer behind the cut fails soon after the cut, before the group's traffic
        // stalls behind the cut-off member's turn: the removal then comes while the suspected
        // member's epoch is still busy writing.
        let sim_cfg = SimConfig {
            record_trace: true,
            op_timeout: Duration::from_micros(50),
            ..SimConfig::seeded(plan.seed)
        };
        let (sim, nodes) = Sim::cluster(sim_cfg, n, &layout).unwrap();
        let rec = Rc::new(RefCell::new(Record::default()));
        rec.borrow_mut().sets = cfg.sets.map(|(t, l)| vec![t, l]);
        sim.delay(NodeId(plan.x as u32), plan.delay);
        let mut groups = Vec::new();
        for (i, t) in nodes.into_iter().enumerate() {
            let t = Tapped {
                inner: t,
                tap: Recorder(rec.clone()),
            };
            groups.push(Some(make(i, t)));
            // What a constructor posted belongs to the view it starts in.
            let v = groups[i].as_ref().and_then(|g| g.view()).map(|v| v.id);
            resolve(&mut rec.borrow_mut(), v, v);
        }
        Run {
            plan,
            sim,
            groups,
            rec,
            delivered: vec![Vec::new(); n],
            installs: vec![BTreeMap::new(); n],
            next: vec![0; n],
        }
    }

    fn view_of(&self, i: usize) -> Option<u64> {
        self.groups[i].as_ref().and_then(|g| g.view()).map(|v| v.id)
    }

    /// Submits (sometimes) and polls member `i`, then resolves the epoch of what it posted and
    /// records a zeroing if it left a view.
    fn drive(&mut self, i: usize, submit: bool) -> Result<(), String> {
        let before = self.view_of(i);
        let large = self.sim.random(4) == 0;
        let coin = self.sim.random(3) == 0;
        let Some(g) = &mut self.groups[i] else {
            return Ok(());
        };
        if submit && coin && g.is_active() {
            let p = payload(i, self.next[i], large);
            match g.submit(&p) {
                Ok(()) => self.next[i] += 1,
                Err(
                    SubmitError::WindowFull
                    | SubmitError::Wedged
                    | SubmitError::Stopped(_)
                    | SubmitError::NotASender(_),
                ) => {}
                Err(e) => return Err(format!("n{i}: submit: {e}")),
            }
        }
        let mut up = Vec::new();
        g.poll(&mut up);
        let transferred = g.take_state();
        if let Some(st) = &transferred {
            // A joiner's state: what a member delivered before the state's position.
            let from = (0..self.delivered.len())
                .find(|&j| j != i && self.delivered[j].len() as u64 >= st.position)
                .ok_or_else(|| format!("n{i}: a state at {} nobody delivered", st.position))?;
            let prefix = self.delivered[from][..st.position as usize].to_vec();
            if st.state != group_sim::digest(&prefix) {
                return Err(format!(
                    "n{i}: the transferred state differs from n{from}'s"
                ));
            }
            self.delivered[i] = prefix;
        }
        for u in up {
            match u {
                Upcall::Deliver(d) => {
                    let want = self.delivered[i].len() as u64;
                    if d.position != want || sender_of(&d.payload) != d.sender.index() {
                        return Err(format!(
                            "n{i}: delivery at {} from {} after {want} deliveries",
                            d.position, d.sender
                        ));
                    }
                    self.delivered[i].push((d.position, d.payload));
                }
                // The view a joiner's transfer completed in was installed at another count.
                Upcall::View(v) if transferred.is_none() => {
                    self.installs[i].insert(v.id, self.delivered[i].len());
                }
                _ => {}
            }
        }
        if g.state_wanted() {
            let at = self.delivered[i].len() as u64;
            g.provide_state(at, &group_sim::digest(&self.delivered[i]))
                .map_err(|e| format!("n{i}: provide_state: {e}"))?;
        }
        let after = self.view_of(i);
        let mut rec = self.rec.borrow_mut();
        resolve(&mut rec, before, after);
        if let (Some(b), Some(a)) = (before, after) {
            let len = self.sim.trace().len();
            for left in b..a {
                rec.zeroed
                    .push((NodeId(i as u32), (left % 2) as usize, left, len));
            }
        }
        Ok(())
    }
}

/// Gives the pending posts their epoch: the poster's view before or after the call that
/// posted them, whichever runs on the set the op went to.
fn resolve(rec: &mut Record, before: Option<u64>, after: Option<u64>) {
    for key in std::mem::take(&mut rec.pending) {
        if let Some(p) = rec.posts.get_mut(&key) {
            p.epoch = [before, after]
                .into_iter()
                .flatten()
                .find(|v| (v % 2) as usize == p.set);
        }
    }
}

/// What the trace says about the run: the stale writes (an error naming the first), and how
/// many ops of `x`'s view-0 epoch to a member of view 1 (not the accuser, not one that
/// crashed) were refused or flushed: ops still in flight when that member declared `x` failed
/// after learning of the suspicion from a peer (the moment the test exists for).
fn stale_writes(run: &Run) -> Result<usize, String> {
    let rec = run.rec.borrow();
    let x = NodeId(run.plan.x as u32);
    let crashed = match run.plan.second {
        Second::Crash(j) => Some(NodeId(j as u32)),
        Second::Join(_) => None,
    };
    let mut stopped = 0;
    for (idx, e) in run.sim.trace().iter().enumerate() {
        let Some(post) = rec.posts.get(&(e.src, e.op.0)) else {
            continue;
        };
        let Some(epoch) = post.epoch else {
            continue;
        };
        if post.dst != e.dst
            || !matches!(
                e.kind,
                OpKind::Write | OpKind::CompareAndSwap | OpKind::FetchAdd
            )
        {
            continue;
        }
        if e.src == x
            && epoch == 0
            && e.dst.index() != run.plan.accuser
            && Some(e.dst) != crashed
            && matches!(e.outcome, Outcome::Refused | Outcome::Flushed)
        {
            stopped += 1;
        }
        // The zeroing of the destination's copy of this set that this op comes after, for a
        // view at or past the op's epoch.
        let Some(&(_, _, left, _)) = rec
            .zeroed
            .iter()
            .find(|&&(n, s, left, at)| n == e.dst && s == post.set && left >= epoch && at <= idx)
        else {
            continue;
        };
        if matches!(e.outcome, Outcome::Applied(_)) {
            return Err(format!(
                "{}'s view-{epoch} epoch write (op {}) landed in {}'s copy of set {} at {:?}, \
                 after {} zeroed it leaving view {left}",
                e.src, e.op.0, e.dst, post.set, e.at, e.dst
            ));
        }
    }
    Ok(stopped)
}

/// One seed: of five initial members `x` is suspected by `accuser` (a cut link), by the
/// others through gossip only; view 1 removes it, then the second change (a crash, or the
/// join of a sixth node) installs view 2, on set 0 again.
fn run(plan: Plan) -> Result<Moment, String> {
    let (n, initial) = (6, 5);
    let mut r = Run::new(plan, n, initial);
    let (x, a) = (NodeId(plan.x as u32), NodeId(plan.accuser as u32));
    let survivors: Vec<usize> = (0..n)
        .filter(|&i| i != plan.x)
        .filter(|&i| match plan.second {
            Second::Crash(j) => i != j && i < initial,
            Second::Join(_) => true,
        })
        .collect();
    let mut crashed_at = None;
    let mut first_post = None;
    let mut cut = false;
    // How many ops `x` posted into the copies of set 0 of members other than `accuser`.
    let posts_to_others = |r: &Run| {
        (r.rec.borrow().posts.iter())
            .filter(|(k, p)| k.0 == x && p.dst != a && p.set == 0)
            .count()
    };
    let mut seen = 0;
    let mut done = false;
    for round in 0..6000 {
        let posted = posts_to_others(&r);
        if first_post.is_none() && posted > 0 {
            first_post = Some(round);
        }
        if !cut && posted > seen && first_post.is_some_and(|f| round >= f + plan.cut_after) {
            r.sim.partition(&[a], &[x]);
            if plan.accused {
                r.rec.borrow_mut().inject = Some((a, x));
            }
            cut = true;
        }
        seen = posted;
        let in_view_1 = (0..initial)
            .filter(|&i| i != plan.x)
            .all(|i| r.view_of(i) == Some(1));
        if crashed_at.is_none() && in_view_1 {
            crashed_at = Some(round);
        }
        if crashed_at.is_some_and(|c| round == c + 20) {
            match plan.second {
                Second::Crash(j) => {
                    r.sim.crash(NodeId(j as u32));
                    r.groups[j] = None;
                }
                Second::Join(j) => {
                    if let Some(g) = &mut r.groups[j] {
                        g.join().map_err(|e| format!("n{j}: join: {e}"))?;
                    }
                }
            }
        }
        let base = r.installs[plan.accuser].get(&2).copied();
        let settled = survivors.iter().all(|&i| {
            r.view_of(i) == Some(2)
                && r.groups[i].as_ref().is_some_and(Group::is_active)
                && base.is_some_and(|at| r.delivered[i].len() >= at + 10)
        });
        if settled {
            done = true;
            break;
        }
        for i in 0..n {
            r.drive(i, true)?;
        }
        r.sim.advance(STEP);
    }
    if !done {
        stale_writes(&r)?;
        return Err(format!(
            "the survivors did not reach view 2 and deliver in it: {}",
            group_sim::describe(&r.groups)
        ));
    }
    // Long enough for every op still in flight from `x` (at most `delay` and 5 µs late) to
    // leave its link, with the members still polling.
    let drain = plan.delay + Duration::from_micros(100);
    for _ in 0..drain.as_micros() / STEP.as_micros() {
        for i in 0..n {
            r.drive(i, false)?;
        }
        r.sim.advance(STEP);
    }
    // Each survivor's sequence is a prefix of the longest, and virtual synchrony holds.
    let longest = (survivors.iter())
        .map(|&i| &r.delivered[i])
        .max_by_key(|s| s.len())
        .unwrap();
    for &i in &survivors {
        let mine = &r.delivered[i];
        if let Some(k) = (0..mine.len()).find(|&k| mine[k] != longest[k]) {
            return Err(format!("n{i} delivered differently, first at {k}"));
        }
    }
    group_sim::same_install_positions(&r.installs)?;
    let stopped = stale_writes(&r)?;
    // The moment: every peer other than the accuser learnt of the suspicion from a peer (its
    // membership table's gossip, or its epoch table's, whose report fails the link to `x` at
    // the endpoint and reaches the membership table as a local failure): the link to `x` never
    // failed under it (no timeout, no cut by `x`); and some op of `x`'s view-0 epoch was still
    // in flight to such a peer when it declared `x` failed (refused or flushed since).
    let rec = r.rec.borrow();
    let why_at = |i: usize| -> Vec<Suspicion> {
        (r.groups[i].iter())
            .flat_map(|g| g.gms().sst().suspicions().iter())
            .filter(|s| s.0 == x)
            .map(|s| s.1)
            .collect()
    };
    // Accused accuser: its suspicion of `x` stayed unpublished, and (the moment) some member
    // suspected `x` as it installed the view without it (the others may then learn it from
    // that member).
    let mut local = true;
    if plan.accused {
        if why_at(plan.accuser) != [Suspicion::Remote] {
            return Err(format!(
                "n{} did not suspect n{} only as accused: {:?}",
                plan.accuser,
                plan.x,
                why_at(plan.accuser)
            ));
        }
        local = (0..initial)
            .filter(|&i| i != plan.x && i != plan.accuser)
            .any(|i| why_at(i) == [Suspicion::Local]);
    }
    for i in (0..initial).filter(|&i| i != plan.x && i != plan.accuser) {
        if r.groups[i].is_none() {
            continue;
        }
        let why = why_at(i);
        let first = rec
            .failures
            .iter()
            .find(|f| f.0 == NodeId(i as u32) && f.1 == x);
        let gossip = matches!(why[..], [Suspicion::Gossip] | [Suspicion::Transport])
            || (plan.accused && why[..] == [Suspicion::Local]);
        if !gossip || first.is_some_and(|f| f.2 != FailureCause::Local) {
            return Err(format!(
                "n{i} did not learn of n{}'s suspicion from a peer only: {why:?}, first failure {first:?}",
                plan.x
            ));
        }
    }
    drop(rec);
    Ok(if stopped > 0 && local {
        Moment::Reached
    } else {
        Moment::Missed
    })
}

/// A member suspected by one peer (its link to it cut) and by every other one through gossip
/// only, whose epoch's writes are still in flight to them (each op to or from it 150 to 400 µs
/// late): no op of its view-0 epoch lands in a peer's copy of set 0 after that peer zeroed it
/// on installing view 1, and view 2, on set 0 again (after a crash, or after a join that gives
/// the joiner the suspected member's rank), delivers identically everywhere. Each seed runs
/// both second changes, and both must reach the moment.
#[test]
fn a_gossip_suspected_members_stale_epoch_writes_never_land_in_a_zeroed_set() {
    check_seeds_reaching(
        "a_gossip_suspected_members_stale_epoch_writes_never_land_in_a_zeroed_set",
        3,
        "an op of the suspected member's view-0 epoch in flight as a peer declared it failed",
        |seed| {
            let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33;
            let mut pick = |below: u64| {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (rng >> 33) % below
            };
            let mut reached = Moment::Reached;
            for second in [Second::Crash(3), Second::Join(5)] {
                let plan = Plan {
                    seed,
                    x: 4,
                    accuser: 0,
                    accused: false,
                    second,
                    delay: Duration::from_micros(150 + pick(250)),
                    cut_after: pick(100) as usize,
                };
                if run(plan).map_err(|e| format!("{plan:?}: {e}"))? == Moment::Missed {
                    reached = Moment::Missed;
                }
            }
            Ok(reached)
        },
    );
}

/// s24 review follow-up (`docs/MEMBERSHIP.md`, forty-eighth part): as above, but the accuser
/// (the leader) learns first that `x` cut the link, so it is accused and its suspicion of `x`
/// is never published. Its decision removing `x` is the only news the others get of it, and
/// they install view 1 without `x`'s echo; each must suspect `x` as it installs (the report
/// cuts its link), or `x`'s view-0 epoch writes, posted while its links to them are up, land
/// in their copies of set 0 after they zeroed it. Each seed runs both second changes, and
/// both must reach the moment (an op of `x`'s view-0 epoch refused or flushed at a member that
/// suspected `x` only as it installed).
#[test]
fn an_accused_leaders_unpublished_suspicion_still_fences_the_removed_members_writes() {
    check_seeds_reaching(
        "an_accused_leaders_unpublished_suspicion_still_fences_the_removed_members_writes",
        3,
        "an op of the removed member's view-0 epoch in flight as a peer installed the view without it",
        |seed| {
            let mut reached = Moment::Reached;
            for (k, second) in [Second::Crash(3), Second::Join(5)].into_iter().enumerate() {
                let plan = Plan {
                    seed,
                    x: 4,
                    accuser: 0,
                    accused: true,
                    second,
                    delay: Duration::from_micros(150 + (seed * 37 + k as u64 * 101) % 250),
                    cut_after: ((seed * 13 + k as u64 * 7) % 100) as usize,
                };
                if run(plan).map_err(|e| format!("{plan:?}: {e}"))? == Moment::Missed {
                    reached = Moment::Missed;
                }
            }
            Ok(reached)
        },
    );
}

/// Drives every node of `r` (submitting) until `done(r)` holds, at most `rounds` rounds;
/// returns whether it held.
fn drive_until(
    r: &mut Run,
    rounds: usize,
    mut done: impl FnMut(&Run) -> bool,
) -> Result<bool, String> {
    for _ in 0..rounds {
        if done(r) {
            return Ok(true);
        }
        for i in 0..r.groups.len() {
            r.drive(i, true)?;
        }
        r.sim.advance(STEP);
    }
    Ok(done(r))
}

/// The forty-third part's point 4, tested (s26, sixty-eighth part of `docs/MEMBERSHIP.md`): a
/// total restart counts a *restart outsider* out (a linked, heartbeating member of the last
/// view `L` that does not restart it from a log) without suspecting it in the table and
/// without a report to the transport, so its link stays up. The argument: an outsider runs no
/// epoch of `L` in this life, so it has nothing in flight into a restarting member's copy of
/// set `L mod 2`, which that member zeroes as it installs the restart view and which view
/// `L + 2` runs on again.
///
/// Life 0: four initial members (durable epochs and GMS logs), and n4 joins by state transfer:
/// view 1 = `[0, 1, 2, 3, 4]`. All five stop at once. Life 1, on a new fabric behind the
/// recording endpoint: 0 to 3 restart view 1 from their logs; n4 starts with an empty GMS log,
/// as an idle outsider (`asks: false`: its log was lost) or as a joiner (`asks: true`). The
/// restarting members count it out after the suspicion timeout and install view 2 without it;
/// it then joins (view 3, on set 1 again, the set of view 1).
///
/// Checked: (the moment) each of 0 to 3 installed view 2 without n4 while its table had never
/// suspected n4 and its endpoint had reported no failure of n4; every op n4 posted into an
/// epoch set belongs to a view n4 ran (none before it installed one), and n4 did post epoch
/// ops once it ran a view (so the recorder sees them); no op of a view-`w` epoch was applied
/// at a node after that node zeroed its copy of the op's set leaving a view at or past `w`
/// (the trace check of [`stale_writes`]); and all five end in one view, n4 active, the
/// survivors' sequences prefixes of one another, virtual synchrony's install positions equal.
fn restart_outsider(seed: u64, asks: bool) -> Result<Moment, String> {
    let base = group_sim::scratch_dir("stale-writes", &format!("outsider-{asks}"), seed);
    let cfg_of = |life: usize, i: usize| {
        group_sim::durable(
            group_sim::config(5, 4),
            &base.join(format!("life{life}")),
            i,
        )
    };
    let plan = Plan {
        seed,
        x: 4,
        accuser: 0,
        accused: false,
        second: Second::Join(4),
        delay: Duration::ZERO,
        cut_after: 0,
    };
    let all_in = |r: &Run, id: u64| {
        (0..5).all(|i| {
            r.groups[i]
                .as_ref()
                .and_then(|g| g.view())
                .is_some_and(|v| v.id == id && v.members.len() == 5)
        }) && r.groups[4].as_ref().is_some_and(Group::is_active)
    };
    // Life 0.
    let mut r = Run::with(plan, &cfg_of(0, 0), 5, |i, t| {
        if i == 4 {
            Group::joining(t, cfg_of(0, i), MemLog::default()).unwrap()
        } else {
            Group::new(t, cfg_of(0, i), MemLog::default(), None).unwrap()
        }
    });
    if !drive_until(&mut r, 6000, |r| all_in(r, 1) && r.delivered[4].len() >= 40)? {
        return Err(format!(
            "life 0: n4 did not join and deliver: {}",
            group_sim::describe(&r.groups)
        ));
    }
    let logs: Vec<Vec<u8>> = (r.groups.iter().flatten())
        .map(|g| g.gms().log().bytes().to_vec())
        .collect();
    drop(r);
    // Life 1.
    let mut r = Run::with(plan, &cfg_of(0, 0), 5, |i, t| {
        if i == 4 {
            let cfg = cfg_of(1, i);
            if asks {
                Group::joining(t, cfg, MemLog::default()).unwrap()
            } else {
                Group::new(t, cfg, MemLog::default(), None).unwrap()
            }
        } else {
            let (log, rec) = MemLog::open(logs[i].clone());
            Group::new(t, cfg_of(0, i), log, Some(&rec)).unwrap()
        }
    });
    let x = NodeId(4);
    // Per restarting member, at the view it installed after view 1: its members, and whether
    // its table or endpoint ever had n4 failed by then.
    let mut restart_view: Vec<Option<(Vec<NodeId>, bool)>> = vec![None; 4];
    let mut stuck = true;
    for _ in 0..6000 {
        for (i, seen) in restart_view.iter_mut().enumerate() {
            let Some(g) = &r.groups[i] else { continue };
            if seen.is_none()
                && let Some(v) = g
                    .view()
                    .filter(|v| v.id >= 2 && g.gms().restarting().is_none())
            {
                let suspected = g.gms().sst().suspicions().iter().any(|s| s.0 == x);
                let reported =
                    (r.rec.borrow().failures.iter()).any(|f| f.0 == NodeId(i as u32) && f.1 == x);
                *seen = Some((v.members.clone(), suspected || reported));
            }
        }
        let joined = all_in(&r, 3)
            || (r.view_of(0).is_some_and(|v| v > 3) && all_in(&r, r.view_of(0).unwrap_or(0)));
        if joined && restart_view.iter().all(Option::is_some) {
            stuck = false;
            break;
        }
        for i in 0..5 {
            r.drive(i, true)?;
        }
        r.sim.advance(STEP);
    }
    if stuck {
        return Err(format!(
            "life 1: the restart did not complete and take n4 in: {} (restart views {restart_view:?})",
            group_sim::describe(&r.groups)
        ));
    }
    let base_len = r.delivered[0].len();
    if !drive_until(&mut r, 6000, |r| {
        (0..5).all(|i| r.delivered[i].len() >= base_len + 10)
    })? {
        return Err(format!(
            "life 1: the group did not deliver: {}",
            group_sim::describe(&r.groups)
        ));
    }
    for _ in 0..100 {
        for i in 0..5 {
            r.drive(i, false)?;
        }
        r.sim.advance(STEP);
    }
    // The trace: no epoch op applied into a copy zeroed for its view or a later one.
    stale_writes(&r)?;
    // Every op n4 posted into an epoch set belongs to a view it ran (its view before or after
    // the call that posted it runs on that set: `resolve`), and there were some.
    let (mut ran, mut stray) = (0, Vec::new());
    for (&(src, op), p) in &r.rec.borrow().posts {
        if src != x {
            continue;
        }
        match p.epoch {
            Some(_) => ran += 1,
            None => stray.push((op, p.dst, p.set)),
        }
    }
    if !stray.is_empty() || ran == 0 {
        return Err(format!(
            "n4 posted {} epoch op(s) outside a view it ran, e.g. {:?} (op, peer, set); {ran} in one",
            stray.len(),
            stray.first()
        ));
    }
    let longest = (0..5)
        .map(|i| &r.delivered[i])
        .max_by_key(|s| s.len())
        .unwrap();
    for i in 0..5 {
        let mine = &r.delivered[i];
        if let Some(k) = (0..mine.len()).find(|&k| mine[k] != longest[k]) {
            return Err(format!("n{i} delivered differently, first at {k}"));
        }
    }
    group_sim::same_install_positions(&r.installs)?;
    let _ = std::fs::remove_dir_all(&base);
    // The moment: each restarting member installed its restart view without n4 while n4 was
    // neither suspected in its table nor reported failed by its endpoint.
    let counted_out = restart_view.iter().all(|s| {
        s.as_ref()
            .is_some_and(|(m, failed)| !m.contains(&x) && !failed)
    });
    Ok(if counted_out {
        Moment::Reached
    } else {
        eprintln!("seed {seed}: the restart views {restart_view:?}");
        Moment::Missed
    })
}

/// [`restart_outsider`] with n4 an idle outsider (its GMS log lost).
#[test]
fn a_restart_outsider_counted_out_without_a_report_posts_nothing_into_a_zeroed_set() {
    check_seeds_reaching(
        "a_restart_outsider_counted_out_without_a_report_posts_nothing_into_a_zeroed_set",
        2,
        "every restarting member counting the idle outsider out with no suspicion or report of it",
        |seed| restart_outsider(seed, false),
    );
}

/// [`restart_outsider`] with n4 asking to join.
#[test]
fn a_restart_outsider_that_asks_to_join_posts_nothing_into_a_zeroed_set() {
    check_seeds_reaching(
        "a_restart_outsider_that_asks_to_join_posts_nothing_into_a_zeroed_set",
        2,
        "every restarting member counting the joiner out with no suspicion or report of it",
        |seed| restart_outsider(seed, true),
    );
}
