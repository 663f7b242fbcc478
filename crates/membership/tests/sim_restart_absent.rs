//! Total restart with members that never come back *and never connect* (issue 6), on the
//! simulator. Over a real network a member that is not restarted is not a crashed peer: its
//! link never comes up, the table sees it *absent* and never suspects it for its silence, so
//! the inspector (or, if it is the lowest-ranked member, nobody) would wait for it forever.
//! `GmsConfig::restart_absent_timeout` bounds that wait once a majority of the last view
//! restarted. Here five members with durable epochs deliver, all stop, and members restart on
//! a fresh fabric where the others are configured late and never started (absent), as in the
//! TCP test (`tests/tcp_restart.rs`). Checked: a bare majority installs the restart view
//! without the absent members, but not before the timeout; it replays one sequence of which
//! everything delivered before is a prefix, then carries on; a member that starts before the
//! timeout is waited for and restarts with the others; a minority never installs anything
//! however long it waits (safety does not rest on the timeout), and keeps saying who is
//! missing. Two more tests cover a liveness bug of a second restart attempt that the TCP test
//! found (not about absent members): a sweep and its first failing seed, which hung before the
//! catch-up rule took the peer's mode (restarting or running) from its view block. And a
//! sweep of a member falsely suspected during the restart (it stalls; the others cut it), which
//! waited forever before `StopReason::RestartCutOff`. And a view number installed twice with
//! other members (s23, `dead_branch`): a member whose log holds the old view joins again instead
//! of taking the new view's ballots for its own, and a member one view behind catches up past it
//! (s24: also one holding only the restart ballot's promise). And (s24) a one-way absence named
//! again once the members linked the node after this member's bound. And (s25) a member that
//! only the inspector counts out, by a suspicion it never publishes: the others, who wait for
//! its echo, catch up from the inspector's restart view. And (s25, `dead_branch_cut_off`) that
//! member behind cut off from every live peer by a partition: it stops where the dead side is
//! no majority of the dead view; where it is, the dead view restarted beside the live one
//! (closed: fix A in s25, fix B restored in s26). And (s26) a total restart whose ballot admits
//! more members joining again than it restarts, also after a crash inside that restart. And
//! (s27, `two_views_ahead`) a dead view that ran a view change of its own: the restart that
//! would fit its join decision into another view under its number stops instead, and without
//! a majority of its own the dead view runs no view change. And (s28, `dead_view_asked`) a dead
//! view that proposed a change it could not decide: its members, back during, after or in a
//! later restart than the fitting, join again or stop as left; one a majority of it
//! acknowledged stops the fitting. And (s29, `disagree_on_counted_out`) restart members that
//! disagree on who is counted out: a member that only some counted out as an outsider catches
//! up into the view, and they take it back, so every member follows one leader.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

mod group_sim;
use group_sim::tap::{Tap, Tapped};
use group_sim::{Moment, check_seeds_reaching, missed};

use squall_membership::StopReason;
use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::{Durable, MemLog, Record};
use squall_ordering::{TotalOrder, Upcall};
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds};

use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use squall_transport::{Event, FailureCause, OpId, RegionId, RemoteAddr, Transport};

/// A simulated endpoint that can hold back the `PeerConnected` events of one peer (the one
/// its shared cell names) until the cell is cleared: the link to that peer comes up later at
/// this member than at the others, as over TCP, where each member polls the new process's
/// link when its own connection's handshake completes. Meanwhile the peer reads as absent and
/// its regions as unknown (an endpoint learns a peer's regions when the link comes up).
type Gate = Tapped<Held>;

/// [`Gate`]'s tap: the peer whose `PeerConnected` is held back, and the events held.
struct Held {
    held: Rc<Cell<Option<NodeId>>>,
    queue: VecDeque<Event>,
}

fn gate(inner: SimNode, held: &Rc<Cell<Option<NodeId>>>) -> Gate {
    Tapped {
        inner,
        tap: Held {
            held: held.clone(),
            queue: VecDeque::new(),
        },
    }
}

thread_local! {
    /// A failure to hand a node at its next poll, before its endpoint's own events: (node,
    /// peer), as if the peer had cut the link first ([`FailureCause::Remote`]): the node is
    /// accused, and its suspicion of the peer is never published (sixty-third part).
    static ACCUSE: Cell<Option<(NodeId, NodeId)>> = const { Cell::new(None) };
    /// The regions of the two epoch region sets (`GroupConfig::sets`) whose posts
    /// [`EPOCH_POSTS`] counts; empty: none counted.
    static EPOCH_SETS: std::cell::RefCell<Vec<RegionId>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Per node, how many ops it posted into a peer's copy of an epoch region set.
    static EPOCH_POSTS: std::cell::RefCell<BTreeMap<NodeId, u64>> = const { std::cell::RefCell::new(BTreeMap::new()) };
}

impl Tap for Held {
    fn accepted(&mut self, inner: &SimNode, _peer: NodeId, at: RemoteAddr, _op: OpId) {
        if EPOCH_SETS.with(|s| s.borrow().contains(&at.region)) {
            EPOCH_POSTS.with(|p| *p.borrow_mut().entry(inner.local_id()).or_default() += 1);
        }
    }

    fn poll(&mut self, inner: &mut SimNode, out: &mut [Event]) -> usize {
        let me = inner.local_id();
        let armed = ACCUSE.with(|a| a.get()).filter(|&(at, _)| at == me);
        match (armed, out.split_first_mut()) {
            (Some((_, peer)), Some((first, rest))) => {
                ACCUSE.with(|a| a.set(None));
                *first = Event::PeerFailed {
                    peer,
                    cause: FailureCause::Remote,
                };
                1 + self.poll_held(inner, rest)
            }
            _ => self.poll_held(inner, out),
        }
    }
    fn is_absent(&self, inner: &SimNode, peer: NodeId) -> bool {
        self.holds(peer) || inner.is_absent(peer)
    }
    fn remote_region_len(&self, inner: &SimNode, peer: NodeId, id: RegionId) -> Option<usize> {
        if self.holds(peer) {
            return None;
        }
        inner.remote_region_len(peer, id)
    }
}

impl Held {
    /// The endpoint's events, with the held peer's `PeerConnected` kept back.
    fn poll_held(&mut self, inner: &mut SimNode, out: &mut [Event]) -> usize {
        let held = self.held.get();
        let mut n = 0;
        if held.is_none() {
            while n < out.len()
                && let Some(e) = self.queue.pop_front()
            {
                out[n] = e;
                n += 1;
            }
        }
        if n == out.len() {
            return n;
        }
        let got = inner.poll(&mut out[n..]);
        let mut kept = n;
        let me = inner.local_id();
        for i in n..n + got {
            let e = out[i];
            match (held, e) {
                _ if never_linked(me, e) => {}
                (Some(p), Event::PeerConnected { peer, .. }) if peer == p => {
                    self.queue.push_back(e);
                }
                _ => {
                    out[kept] = e;
                    kept += 1;
                }
            }
        }
        kept
    }

    /// Whether a `PeerConnected` of `peer` is held back.
    fn holds(&self, peer: NodeId) -> bool {
        (self.queue.iter()).any(|e| matches!(e, Event::PeerConnected { peer: p, .. } if *p == peer))
    }
}

const N: usize = 5;
/// The absent members' timeout in these tests (virtual time; suspicion after 1.5 ms).
const ABSENT: Duration = Duration::from_millis(4);
/// The bound on the wait for an expected incarnation's link in these tests
/// (`GmsConfig::expected_link_timeout`; the late-link regressions hold a link back at most
/// about 1.4 ms, so it never fires there).
const EXPECTED_LINK: Duration = Duration::from_millis(4);
/// One step of the simulation.
const STEP: Duration = Duration::from_micros(2);

fn dir(tag: &str, seed: u64) -> PathBuf {
    group_sim::scratch_dir("restart-absent", tag, seed)
}

/// The shared small-slot group (`group_sim::config`) with durable epochs in `base/n<i>`
/// (never fsynced: the simulated stop is a process crash) and the absent members' timeout.
/// The universe is `u` nodes (the first view the first `N`).
fn config(base: &Path, i: usize, u: usize) -> GroupConfig {
    let mut cfg = group_sim::config(u, N);
    cfg.gms.restart_absent_timeout = ABSENT;
    cfg.gms.expected_link_timeout = Some(EXPECTED_LINK);
    group_sim::durable(cfg, base, i)
}

type Seq = Vec<(u64, Vec<u8>)>;

/// One life: a fresh fabric on which the members not in `up` are late nodes, never started
/// unless [`Life::start_late`] says so.
struct Life {
    sim: Sim,
    base: PathBuf,
    nodes: Vec<Option<Gate>>,
    groups: Vec<Option<Group<Gate, MemLog>>>,
    /// Per member, the peer whose connection its endpoint holds back (see [`Gate`]).
    held: Vec<Rc<Cell<Option<NodeId>>>>,
    logs: Vec<Vec<u8>>,
    delivered: Vec<Seq>,
    next: Vec<u32>,
    life: u8,
    /// Members whose program is not run until then (a stalled poll loop: a long replay, the
    /// scheduler, a disk flush).
    stalled: Vec<Option<squall_transport::Time>>,
    /// `GroupConfig::replay_batch` for the groups created from now on (`None`: the default).
    batch: Option<usize>,
    /// `GroupConfig::replay_buffer` for the groups created from now on (`None`: the default).
    buffer: Option<usize>,
    /// A slow application at one member: each upcall it handles costs it this much time (its
    /// program does not run meanwhile).
    cost: Option<(usize, Duration)>,
    /// The universe's size (`N`, or more with joiners).
    u: usize,
    /// Per view id, the first member seen running it in this life and its members.
    running: BTreeMap<u64, (usize, Vec<NodeId>)>,
    /// The first member seen running a view id with other members than an earlier one did.
    disagreement: Option<String>,
    /// Per member, `GmsConfig::expected_link_timeout` for its groups created from now on
    /// (`None`: [`EXPECTED_LINK`]).
    link_bound: Vec<Option<Duration>>,
    /// A sequence delivered in an earlier life, against which a transferred state is checked
    /// when no member of this life delivered as far yet (a member that entered by transfer
    /// restarts with its persisted state before the others' replays reach its position;
    /// empty unless a test sets it).
    earlier: Seq,
}

impl Life {
    fn start(seed: u64, base: &Path, logs: &[Vec<u8>], up: &[usize], life: u8) -> Life {
        Life::start_in(seed, base, logs, up, life, N)
    }

    /// [`Life::start`] with a universe of `u` nodes.
    fn start_in(
        seed: u64,
        base: &Path,
        logs: &[Vec<u8>],
        up: &[usize],
        life: u8,
        u: usize,
    ) -> Life {
        Life::start_bounded(seed, base, logs, up, life, u, vec![None; u])
    }

    /// [`Life::start_in`] with `link_bound` (see [`Life::link_bound`]) set before the members
    /// of `up` start.
    fn start_bounded(
        seed: u64,
        base: &Path,
        logs: &[Vec<u8>],
        up: &[usize],
        life: u8,
        u: usize,
        link_bound: Vec<Option<Duration>>,
    ) -> Life {
        let layout = Group::<SimNode, MemLog>::layout(&config(base, 0, u)).unwrap();
        let late: Vec<NodeId> = (0..u)
            .filter(|i| !up.contains(i))
            .map(|i| NodeId(i as u32))
            .collect();
        let (sim, nodes) = Sim::cluster_late(sim_config(seed), u, &layout, &late).unwrap();
        let mut l = Life {
            sim,
            base: base.to_path_buf(),
            nodes: Vec::new(),
            held: (0..u).map(|_| Rc::new(Cell::new(None))).collect(),
            groups: (0..u).map(|_| None).collect(),
            logs: logs.to_vec(),
            delivered: vec![Vec::new(); u],
            next: vec![0; u],
            life,
            stalled: vec![None; u],
            batch: None,
            buffer: None,
            cost: None,
            u,
            running: BTreeMap::new(),
            disagreement: None,
            link_bound,
            earlier: Vec::new(),
        };
        l.nodes = (nodes.into_iter().enumerate())
            .map(|(i, t)| Some(gate(t, &l.held[i])))
            .collect();
        for &i in up {
            l.boot(i);
        }
        l
    }

    /// Creates member `i`'s group from its log (fresh if the log is empty).
    fn boot(&mut self, i: usize) {
        let t = self.nodes[i].take().unwrap();
        let (log, rec) = MemLog::open(self.logs[i].clone());
        let rec = (!rec.records.is_empty()).then_some(rec);
        let mut cfg = config(&self.base, i, self.u);
        if let Some(b) = self.batch {
            cfg.replay_batch = b;
        }
        if let Some(b) = self.buffer {
            cfg.replay_buffer = b;
        }
        if let Some(b) = self.link_bound[i] {
            cfg.gms.expected_link_timeout = Some(b);
        }
        self.groups[i] = Some(Group::new(t, cfg, log, rec.as_ref()).unwrap());
    }

    /// Starts late member `i` now and restarts it from its log.
    fn start_late(&mut self, i: usize) {
        self.sim.start_node(NodeId(i as u32));
        self.boot(i);
    }

    /// Stops running member `i`'s program for `d` (its process stalls; its peers see silence).
    fn stall(&mut self, i: usize, d: Duration) {
        self.stalled[i] = Some(self.sim.now() + d);
    }

    /// Member `i` stopped: its process is restarted (a new incarnation on the fabric) from its
    /// log and its epoch directory, as an operator would.
    fn restart_member(&mut self, i: usize) {
        let g = self.groups[i].take().unwrap();
        self.logs[i] = g.gms().log().bytes().to_vec();
        drop(g);
        self.sim.crash(NodeId(i as u32));
        let t = self.sim.restart_node(NodeId(i as u32)).unwrap();
        self.nodes[i] = Some(gate(t, &self.held[i]));
        self.stalled[i] = None;
        self.boot(i);
    }

    /// Every member's process crashes at once on this fabric (its log kept), then each starts
    /// again under its id, one after the other in `order`, from its log: a member started
    /// before another sees that one's new incarnation connect while its own endpoint never
    /// linked the old one (it was down when this endpoint started: absent, not failed), as
    /// an operator restarting a cluster's processes one by one does (s21).
    fn crash_all_and_restart_in_turn(&mut self, order: &[usize]) {
        for i in 0..self.u {
            if let Some(g) = self.groups[i].take() {
                self.logs[i] = g.gms().log().bytes().to_vec();
            }
            self.sim.crash(NodeId(i as u32));
            self.delivered[i].clear();
        }
        for &i in order {
            let t = self.sim.restart_node(NodeId(i as u32)).unwrap();
            self.nodes[i] = Some(gate(t, &self.held[i]));
            self.stalled[i] = None;
            self.boot(i);
        }
    }

    /// Late member `i`, absent so far (and so suspected once the timeout passed), starts as a
    /// new process under its id: a new incarnation on the fabric (its peers fail the old one,
    /// as TCP does for a process started after the report), a fresh log and epoch directory,
    /// and a join by state transfer (`Group::joining`), as `tcp_restart`'s late member does.
    fn rejoin_fresh(&mut self, i: usize) {
        self.sim.crash(NodeId(i as u32));
        let t = gate(
            self.sim.restart_node(NodeId(i as u32)).unwrap(),
            &self.held[i],
        );
        let cfg = config(&self.base.join("rejoin"), i, self.u);
        self.groups[i] = Some(Group::joining(t, cfg, MemLog::default()).unwrap());
        self.delivered[i].clear();
    }

    fn step(&mut self, submit: bool) {
        for i in 0..self.u {
            if self.stalled[i].is_some_and(|t| self.sim.now() < t) {
                continue;
            }
            let Some(g) = &mut self.groups[i] else {
                continue;
            };
            if submit && self.sim.random(3) == 0 {
                let mut p = vec![self.life, i as u8];
                p.extend_from_slice(&self.next[i].to_le_bytes());
                if self.sim.random(4) == 0 {
                    p.resize(60, 7);
                }
                if group_sim::submit_during_restart(g, i, &p).unwrap_or_else(|e| panic!("{e}")) {
                    self.next[i] += 1;
                }
            }
            let mut up = Vec::new();
            g.poll(&mut up);
            let handled = up.len() as u32;
            if let Some(st) = g.take_state() {
                // A member that joined again: its state is what the others delivered before
                // the state's position (checked against the digest the holder sent).
                let from = (0..self.u)
                    .filter(|&j| j != i)
                    .find(|&j| self.delivered[j].len() as u64 >= st.position)
                    .map_or(&self.earlier, |j| &self.delivered[j]);
                let prefix = from[..st.position as usize].to_vec();
                assert_eq!(st.state, digest(&prefix), "n{i}: transferred state");
                self.delivered[i] = prefix;
            }
            for u in up {
                if let Upcall::Deliver(d) = u {
                    let want = self.delivered[i].last().map_or(d.position, |l| l.0 + 1);
                    assert_eq!(d.position, want, "n{i}: positions must be gapless");
                    self.delivered[i].push((d.position, d.payload));
                }
            }
            if g.state_wanted() {
                let next = self.delivered[i].len();
                g.provide_state(next as u64, &digest(&self.delivered[i]))
                    .unwrap();
            }
            if let Some((slow, per)) = self.cost
                && slow == i
                && handled > 0
            {
                self.stall(i, per * handled);
            }
            self.note_running(i);
        }
        self.sim.advance(STEP);
    }

    /// Every member's GMS log bytes (an absent member's unchanged).
    fn shutdown(self) -> (Vec<Vec<u8>>, Vec<Seq>) {
        let logs = (0..self.u)
            .map(|i| match &self.groups[i] {
                Some(g) => g.gms().log().bytes().to_vec(),
                None => self.logs[i].clone(),
            })
            .collect();
        (logs, self.delivered)
    }

    /// Runs until every one of `members` [restarted](Life::restarted) (at most 50 ms of
    /// virtual time).
    fn until_restarted(&mut self, members: &[usize]) -> Result<(), String> {
        let t0 = self.sim.now();
        while !members.iter().all(|&i| self.restarted(i)) {
            if self.sim.now().saturating_since(t0) > Duration::from_millis(50) {
                return Err(format!("the restart did not complete: {}", self.state()));
            }
            self.step(false);
        }
        Ok(())
    }

    /// Whether member `i` installed a view after its restart and handed out its whole replay.
    fn restarted(&self, i: usize) -> bool {
        self.groups[i].as_ref().is_some_and(|g| {
            g.gms().restarting().is_none() && g.epoch().is_some() && g.replay_backlog() == 0
        })
    }

    fn state(&self) -> String {
        group_sim::describe(&self.groups)
    }

    /// Notes the view member `i` runs (installed, out of restart mode), and the first
    /// disagreement: a view id run with other members than another member ran it with
    /// (virtual synchrony: every member that installs a view installs the same one).
    fn note_running(&mut self, i: usize) {
        let Some(g) = &self.groups[i] else {
            return;
        };
        let Some(v) = g.view() else {
            return;
        };
        if g.gms().restarting().is_some() || g.stopped().is_some() {
            return;
        }
        let (first, members) = self.running.entry(v.id).or_insert((i, v.members.clone()));
        if *members != v.members && self.disagreement.is_none() {
            self.disagreement = Some(format!(
                "n{i} runs view {} as {:?}, n{first} as {members:?}",
                v.id, v.members
            ));
        }
    }
}

/// The first life: five members deliver for `steps`, then everyone stops.
fn first_life(seed: u64, base: &Path, steps: usize) -> (Vec<Vec<u8>>, Vec<Seq>) {
    let mut l = Life::start(seed, base, &vec![Vec::new(); N], &[0, 1, 2, 3, 4], 0);
    for _ in 0..steps {
        l.step(true);
    }
    let (logs, before) = l.shutdown();
    assert!(
        before.iter().all(|d| d.len() >= 20),
        "seed {seed}: too little delivered before the shutdown"
    );
    (logs, before)
}

/// Runs `f` for every seed (`check_seeds`: `SQUALL_SEEDS`, `SQUALL_SEED`), reporting a
/// failing seed with the command that replays it.
fn each_seed(name: &str, count: u64, f: impl Fn(u64)) {
    check_seeds(name, count, |seed| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(seed))).map_err(|e| {
            (e.downcast_ref::<String>().cloned())
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
    });
}

/// The transferred state of the harness's application: its delivered sequence, digested.
fn digest(seq: &Seq) -> Vec<u8> {
    group_sim::digest(seq)
}

/// Runs until every one of `members` is active in one running view that names them all (at
/// most 50 ms of virtual time: `who` did not come back otherwise), then lets them carry on with
/// new messages: they must deliver identically, more than the `replayed` of the restart. A
/// view id run with two member lists in this life (`Life::disagreement`) fails it first,
/// whatever else happened.
fn together_and_carrying_on(
    l: &mut Life,
    members: &[usize],
    replayed: usize,
    who: &str,
) -> Result<(), String> {
    let together = come_together_and_carry_on(l, members, replayed, who);
    if let Some(d) = &l.disagreement {
        return Err(format!("virtual synchrony: {d}"));
    }
    together
}

/// [`together_and_carrying_on`] without the disagreement check.
fn come_together_and_carry_on(
    l: &mut Life,
    members: &[usize],
    replayed: usize,
    who: &str,
) -> Result<(), String> {
    let t0 = l.sim.now();
    let limit = Duration::from_millis(50);
    let together = |l: &Life| {
        let views: Vec<Option<u64>> = (members.iter())
            .map(|&i| l.groups[i].as_ref().and_then(|g| g.view().map(|v| v.id)))
            .collect();
        members.iter().all(|&i| {
            l.groups[i].as_ref().is_some_and(|g| {
                g.is_active()
                    && g.stopped().is_none()
                    && g.gms().restarting().is_none()
                    && (g.view())
                        .is_some_and(|v| members.iter().all(|&m| v.contains(NodeId(m as u32))))
            })
        }) && views.iter().all(|v| *v == views[0])
    };
    while !together(l) {
        if l.sim.now().saturating_since(t0) > limit {
            return Err(format!(
                "{who} did not come into the running view within {limit:?}: {}",
                l.state()
            ));
        }
        l.step(false);
    }
    for _ in 0..400 {
        l.step(true);
    }
    for _ in 0..2000 {
        l.step(false);
    }
    let after = &l.delivered[members[0]];
    if after.len() <= replayed {
        return Err("nothing new after the restart".into());
    }
    if let Some(&i) = members.iter().find(|&&i| &l.delivered[i] != after) {
        return Err(format!(
            "n{i} delivered differently ({} against {})",
            l.delivered[i].len(),
            after.len()
        ));
    }
    Ok(())
}

/// Whether member `i` delivered, at a position from `from` on, a message it submitted in life
/// `life` (the harness's payloads start with the life and the submitter).
fn delivered_own(l: &Life, i: usize, life: u8, from: u64) -> bool {
    l.delivered[i]
        .iter()
        .any(|(pos, p)| *pos >= from && p.first() == Some(&life) && p.get(1) == Some(&(i as u8)))
}

fn is_prefix(a: &Seq, b: &Seq) -> bool {
    a.len() <= b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Runs the restarted members until every one of `expect` installed the restart view (at most
/// `limit` of virtual time: a restart that waits for the absent members forever fails here
/// instead of hanging), checks the replay against `before` and the view, then lets them carry
/// on with new messages. Returns the virtual time the restart took.
fn restart_and_carry_on(
    l: &mut Life,
    before: &[Seq],
    expect: &[usize],
    limit: Duration,
) -> Duration {
    let t0 = l.sim.now();
    while !expect.iter().all(|&i| l.restarted(i)) {
        assert!(
            l.sim.now().saturating_since(t0) < limit,
            "the restart did not complete within {limit:?} of virtual time: {}",
            l.state()
        );
        l.step(false);
    }
    let took = l.sim.now().saturating_since(t0);
    let want: Vec<NodeId> = expect.iter().map(|&i| NodeId(i as u32)).collect();
    for &i in expect {
        let v = l.groups[i].as_ref().unwrap().view().unwrap();
        assert_eq!(v.members, want, "n{i}'s restart view");
    }
    let replay = l.delivered[expect[0]].clone();
    for &i in expect {
        assert_eq!(l.delivered[i], replay, "n{i} replayed differently");
    }
    for (i, b) in before.iter().enumerate() {
        assert!(
            is_prefix(b, &replay),
            "n{i} delivered {} messages before the shutdown, not a prefix of the replay of {}",
            b.len(),
            replay.len()
        );
    }
    for _ in 0..400 {
        l.step(true);
    }
    for _ in 0..1500 {
        l.step(false);
    }
    let after = &l.delivered[expect[0]];
    assert!(after.len() > replay.len(), "nothing new after the restart");
    for &i in expect {
        assert_eq!(&l.delivered[i], after, "n{i} delivered differently after");
        assert!(
            l.groups[i].as_ref().unwrap().stopped().is_none(),
            "n{i} stopped"
        );
    }
    took
}

/// Members 0 (the inspector, were it there) and 3 never start again.
fn bare_majority(seed: u64) {
    let base = dir("bare", seed);
    let (logs, before) = first_life(seed, &base, 1500);
    let up = [1, 2, 4];
    let mut l = Life::start(seed + 1000, &base, &logs, &up, 1);
    let took = restart_and_carry_on(&mut l, &before, &up, Duration::from_millis(50));
    assert!(
        took >= ABSENT,
        "seed {seed}: restarted after {took:?}, before the absent members' timeout {ABSENT:?}"
    );
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_bare_majority_restarts_without_absent_members_after_the_timeout() {
    each_seed("restart_absent_bare_majority", 4, bare_majority);
}

#[test]
fn an_absent_member_that_starts_before_the_timeout_is_waited_for() {
    each_seed("restart_absent_straggler", 3, straggler);
}

/// Members 1, 2 and 4 restart; 0 starts after half the absent timeout (3 never does): the
/// restart waits for 0 and completes with it.
fn straggler(seed: u64) {
    let base = dir("straggler", seed);
    let (logs, before) = first_life(seed, &base, 1500);
    let mut l = Life::start(seed + 1000, &base, &logs, &[1, 2, 4], 1);
    // Member 0 comes back after half the timeout (member 3 never does).
    while l.sim.now().saturating_since(squall_transport::Time::ZERO) < ABSENT / 2 {
        l.step(false);
    }
    assert!(
        (0..N).all(|i| !l.restarted(i)),
        "seed {seed}: restarted before the straggler came back: {}",
        l.state()
    );
    l.start_late(0);
    restart_and_carry_on(&mut l, &before, &[0, 1, 2, 4], Duration::from_millis(50));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_minority_with_absent_members_never_restarts_and_says_who_is_missing() {
    each_seed("restart_absent_minority", 2, |seed| {
        let base = dir("minority", seed);
        let (logs, _) = first_life(seed, &base, 1000);
        let mut l = Life::start(seed + 1000, &base, &logs, &[1, 2], 1);
        // Ten times the absent members' timeout: the timeout never stands in for a majority.
        while l.sim.now().saturating_since(squall_transport::Time::ZERO) < ABSENT * 10 {
            l.step(false);
        }
        for i in [1, 2] {
            let g = l.groups[i].as_ref().unwrap();
            assert!(
                g.stopped().is_none() && !l.restarted(i),
                "n{i}: {}",
                l.state()
            );
            assert_eq!(
                g.gms().restarting(),
                Some(&[NodeId(0), NodeId(3), NodeId(4)][..]),
                "n{i} says who is missing"
            );
        }
        let _ = std::fs::remove_dir_all(&base);
    });
}

/// The second-restart hang that `tcp_restart`'s second kill found, sought on the simulator:
/// everyone restarts, stops again the moment some member logged the restart's decision, and
/// restarts again; the second restart must complete (every member ends in the same running
/// view), replay identically, and keep everything delivered before. Fails (seed 2 among the
/// default ones) with the catch-up rule that judged by the decision's rank.
fn second_restart_after_a_decision(seed: u64) -> Result<SecondStop, String> {
    second_restart(seed, "second", |l| {
        l.groups
            .iter()
            .flatten()
            .any(|g| g.gms().decision().is_some())
    })
}

/// Like [`second_restart_after_a_decision`], but the second stop comes the moment some member
/// installed the restart view: its log ends at view 1 (it restarts there), the others' at view
/// 0 with the decision it installed and the promise of the same ballot. This is the TCP test's
/// other hang: the members at view 0 must restart at view 1 with it (its view block says it is
/// restarting), not run view 1 (which the rank rule did: the decision's rank is their promise).
fn second_restart_after_an_install(seed: u64) -> Result<SecondStop, String> {
    second_restart(seed, "second-install", |l| (0..N).any(|i| l.restarted(i)))
}

/// Where the first restart of [`second_restart`] stood when everyone stopped.
#[derive(Debug, PartialEq, Eq)]
struct SecondStop {
    /// The members that held the restart's decision.
    decided: Vec<usize>,
    /// The members that had installed the restart view.
    installed: Vec<usize>,
}

/// Restart all, stop all at the first step where `stop` holds, restart all again: the second
/// restart must complete, replay identically, and keep everything delivered before. Returns
/// where the first restart stood at the stop (for the seed-pinned regressions).
fn second_restart(
    seed: u64,
    tag: &str,
    stop: impl Fn(&Life) -> bool,
) -> Result<SecondStop, String> {
    let base = dir(tag, seed);
    let (logs, before) = first_life(seed, &base, 1500);
    let all = [0, 1, 2, 3, 4];
    let mut l = Life::start(seed + 1000, &base, &logs, &all, 1);
    let mut decided = false;
    for _ in 0..20_000 {
        l.step(false);
        if stop(&l) {
            decided = true;
            break;
        }
    }
    if !decided {
        return Err("the first restart never reached the stopping point".into());
    }
    let at_stop = SecondStop {
        decided: (0..N)
            .filter(|&i| (l.groups[i].as_ref()).is_some_and(|g| g.gms().decision().is_some()))
            .collect(),
        installed: (0..N).filter(|&i| l.restarted(i)).collect(),
    };
    let (logs, _) = l.shutdown();
    let mut l = Life::start(seed + 2000, &base, &logs, &all, 2);
    let t0 = l.sim.now();
    while !all.iter().all(|&i| l.restarted(i)) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("the second restart hung: {}", l.state()));
        }
        l.step(false);
    }
    let replay = l.delivered[0].clone();
    if let Some(i) = (0..N).find(|&i| l.delivered[i] != replay) {
        return Err(format!("n{i} replayed differently"));
    }
    if let Some(i) = (0..N).find(|&i| !is_prefix(&before[i], &replay)) {
        return Err(format!(
            "n{i}'s deliveries are not a prefix of the second replay"
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(at_stop)
}

#[test]
fn a_second_restart_after_a_decision_logged_at_one_member_completes() {
    check_seeds("second_restart_after_a_decision", 4, |seed| {
        second_restart_after_a_decision(seed).map(drop)
    });
}

#[test]
fn a_second_restart_after_an_install_at_one_member_completes() {
    check_seeds("second_restart_after_an_install", 4, |seed| {
        second_restart_after_an_install(seed).map(drop)
    });
}

/// Seed 2 of the first sweep above: after the second restart members 1–4 run view 1 (they installed
/// it with the decision member 0 logged in the first restart, following the promise member 0
/// re-published at start), while member 0, which opened a higher ballot meanwhile, caught up
/// with that lower-ranked decision and went on restarting at view 1, alone. Since the fix
/// member 0 sees that member 2 *runs* view 1 (its view block says it is not restarting) and
/// runs it too.
#[test]
fn regression_second_restart_seed_2_the_inspector_restarts_alone_one_view_later() {
    let stop = second_restart_after_a_decision(2).unwrap();
    assert!(
        stop.decided == [0] && stop.installed.is_empty(),
        "{} ({stop:?})",
        missed(
            2,
            "the stop with only n0 (the inspector) holding the decision"
        )
    );
}

/// Seed 0 of the install sweep: member 4's log ends at view 1 after the first restart, the
/// others' at view 0 with the decision it installed and its ballot as their promise. With the
/// rank rule (or with no restarting word in the view block) they caught up and *ran* view 1
/// while the member whose log ends there restarted at view 1 and waited for them forever.
/// Re-seeded in s24 to seed 8 (seed 0 stopped reaching it on the s24 branch, whose settings
/// digest push at start changes the schedule; not run on the base commit; a
/// scan of seeds 0..30 found 8, 22, 23 and 24); the name keeps the seed it was found at.
#[test]
fn regression_second_restart_after_an_install_seed_0_the_others_must_restart_at_view_1_too() {
    let stop = second_restart_after_an_install(8).unwrap();
    assert!(
        stop.installed == [4],
        "{} ({stop:?})",
        missed(8, "the stop with only n4 having installed the restart view")
    );
}

/// Issue 6, restart-mode liveness: a member falsely suspected during the restart. All five
/// restart; one of them (`victim`) stalls for a few suspicion timeouts early in the restart (its
/// poll loop does not run: a long replay, the scheduler), so the others suspect it, cut it and
/// restart without it. When it runs again every link is cut: it suspects the whole view it
/// restarts, ignores those rows, and used to wait forever (restart mode had no stop). Now it
/// stops with [`StopReason::RestartCutOff`]; restarted from its log (a new incarnation), it
/// learns from the others' view blocks that the group went on without it and joins again by
/// state transfer. Checked: the others complete the restart (replays identical, everything
/// delivered before a prefix), the victim stops saying why and installs nothing, and after its
/// restart every member ends in the same running view, the victim with the transferred
/// state, all delivering identically.
///
/// [`StopReason::RestartCutOff`]: squall_membership::StopReason::RestartCutOff
fn false_suspicion(seed: u64) -> Result<(), String> {
    let base = dir("false-suspicion", seed);
    let (logs, before) = first_life(seed, &base, 1500);
    let all = [0, 1, 2, 3, 4];
    let mut l = Life::start(seed + 1000, &base, &logs, &all, 1);
    let victim = l.sim.random(N as u64) as usize;
    // A few rounds in (so its heartbeat was heard), it stalls for 2 to 4 suspicion timeouts.
    for _ in 0..2 + l.sim.random(4) {
        l.step(false);
    }
    if l.restarted(victim) {
        return Err(format!("n{victim} restarted before it could stall"));
    }
    let stall = Duration::from_micros(3000 + 100 * l.sim.random(30));
    l.stall(victim, stall);
    let t0 = l.sim.now();
    let others: Vec<usize> = all.iter().copied().filter(|&i| i != victim).collect();
    let limit = Duration::from_millis(50);
    // The others restart without it; it runs again and must stop, not wait.
    loop {
        let g = l.groups[victim].as_ref().unwrap();
        if others.iter().all(|&i| l.restarted(i)) && g.stopped().is_some() {
            break;
        }
        if l.sim.now().saturating_since(t0) > limit {
            return Err(format!(
                "n{victim} (stalled {stall:?}) or the others did not end within {limit:?}: {}",
                l.state()
            ));
        }
        l.step(false);
    }
    // It stops in restart mode (`RestartCutOff`), or, when its first round after the stall
    // still installed the restart view from echoes it had seen, in that view (`Minority`).
    let why = l.groups[victim]
        .as_ref()
        .unwrap()
        .stopped()
        .unwrap()
        .to_string();
    let cut_off = why.contains("restart it from its log");
    if !cut_off && !why.contains("minority") {
        return Err(format!("n{victim} stopped, but not saying why: {why}"));
    }
    eprintln!("seed {seed}: n{victim} stalled {stall:?}, stopped: {why}");
    CUT_OFF.with(|c| c.set(c.get() + u64::from(cut_off)));
    if cut_off && !l.delivered[victim].is_empty() {
        return Err(format!("n{victim} delivered before it stopped"));
    }
    let replay = l.delivered[others[0]].clone();
    if let Some(i) = all.iter().find(|&&i| !is_prefix(&l.delivered[i], &replay)) {
        return Err(format!("n{i} replayed differently"));
    }
    if let Some(i) = (0..N).find(|&i| !is_prefix(&before[i], &replay)) {
        return Err(format!("n{i}'s deliveries are not a prefix of the replay"));
    }
    // Restarted from its log, it comes back: caught up, or joined again with the state.
    l.restart_member(victim);
    together_and_carrying_on(&mut l, &all, replay.len(), "the falsely suspected member")?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

thread_local! {
    /// How many runs of [`false_suspicion`] stopped the victim in restart mode.
    static CUT_OFF: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[test]
fn a_member_falsely_suspected_during_the_restart_stops_and_comes_back_when_restarted() {
    CUT_OFF.with(|c| c.set(0));
    check_seeds("restart_false_suspicion", 4, false_suspicion);
    assert!(
        CUT_OFF.with(std::cell::Cell::get) > 0,
        "no seed stopped the victim in restart mode: the sweep misses the case"
    );
}

/// Seed 1 of the sweep above: n1 stalls 4.1 ms early in the restart; the others cut it and
/// restart without it; n1, still restarting at view 0, suspects 0, 3 and 4 and, before
/// `StopReason::RestartCutOff`, waited forever (restart mode had no stop, and it ignores the
/// rows of members it suspects, so it could not catch up either).
#[test]
fn regression_false_suspicion_seed_1_the_cut_off_member_waited_forever() {
    CUT_OFF.with(|c| c.set(0));
    false_suspicion(1).unwrap();
    assert!(
        CUT_OFF.with(std::cell::Cell::get) == 1,
        "{}",
        missed(1, "the victim stopping in restart mode (RestartCutOff)")
    );
}

/// s21 (`docs/MEMBERSHIP.md`, thirty-first part): a total restart on one fabric whose
/// processes start again one after the other (members 0 to 4, in order, each from its log),
/// then member `victim` crashes and restarts again `bounce_at` steps into the restart. A
/// member started earlier never linked the old incarnations of those started after it (they
/// were down when its endpoint started: absent), so the fabric must not report them failed
/// when they restart (the transport's *Late links*). The simulator did: each earlier member
/// suspected every later one for good, and with the bounce the suspicions were asymmetric
/// (a member suspected by a peer still counts that peer, and a linked peer it never heard from
/// is never suspected for silence), so the restart waited for good (the replica simulator's
/// finding, `crates/smr-core/tests/sim_restart.rs`). Checked: every member ends active in one
/// running view naming them all, nobody stopped, within 50 ms of virtual time, and they deliver
/// identically after, extending what each delivered before.
fn restart_in_turn_with_a_bounce(seed: u64, bounce_at: usize, victim: usize) -> Result<(), String> {
    let base = dir(&format!("in-turn-{bounce_at}-{victim}"), seed);
    let (logs, before) = first_life(seed, &base, 1500);
    let all = [0, 1, 2, 3, 4];
    let mut l = Life::start(seed + 1000, &base, &logs, &all, 1);
    l.crash_all_and_restart_in_turn(&all);
    for _ in 0..bounce_at {
        l.step(false);
    }
    // Its new incarnation replays from its log again.
    l.delivered[victim].clear();
    l.restart_member(victim);
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &all, replayed, "the restarted members")?;
    for (i, b) in before.iter().enumerate() {
        if !is_prefix(b, &l.delivered[0]) {
            return Err(format!(
                "n{i}'s deliveries before the shutdown are not kept"
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

#[test]
fn a_total_restart_whose_processes_start_in_turn_completes_with_a_member_bouncing() {
    check_seeds("restart_in_turn_bounce", 2, |seed| {
        for (bounce_at, victim) in [(1, 0), (5, 0), (1, 2)] {
            restart_in_turn_with_a_bounce(seed, bounce_at, victim)
                .map_err(|e| format!("bounce of n{victim} at step {bounce_at}: {e}"))?;
        }
        Ok(())
    });
}

/// The first life of the rejoin-after-restart tests: five members deliver, member 0 crashes
/// (its log ends at view 0) and the others go on without it in view 1, then everyone stops.
fn first_life_without_0(seed: u64, base: &Path) -> (Vec<Vec<u8>>, Vec<Seq>) {
    let mut l = Life::start(seed, base, &vec![Vec::new(); N], &[0, 1, 2, 3, 4], 0);
    for _ in 0..300 {
        l.step(true);
    }
    let g = l.groups[0].take().unwrap();
    l.logs[0] = g.gms().log().bytes().to_vec();
    drop(g);
    l.sim.crash(NodeId(0));
    for _ in 0..1200 {
        l.step(true);
    }
    l.shutdown()
}

/// Whether members 1 to 4 all run (not restarting) a view that names node 0.
fn others_run_a_view_naming_0(l: &Life) -> bool {
    (1..N).all(|i| {
        l.groups[i].as_ref().is_some_and(|g| {
            g.gms().restarting().is_none() && g.view().is_some_and(|v| v.contains(NodeId(0)))
        })
    })
}

/// When the admitted joiner's process starts in [`adopted_join`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JoinerProcess {
    /// Before the others restart (linked), its program held back until they installed view 2.
    LinkedBefore,
    /// Only once the others installed view 2 (its link not up when their epoch starts).
    AfterTheView,
    /// Never: the others remove it after `GmsConfig::expected_link_timeout`.
    Never,
    /// Only once the others installed view 2, and its link never comes up at member 1, the
    /// leader of view 2 (a one-way absence, s23): 1 suspects it after
    /// `GmsConfig::expected_link_timeout`, the others adopt the suspicion and remove it.
    OneWayAtTheLeader,
    /// Once the others installed view 2, its link held back at every member: for good at
    /// member 3, whose `expected_link_timeout` is [`SHORT_LINK`] (the others'
    /// [`EXPECTED_LINK`]), and at 1, 2 and 4 until 3 suspected 0. 3 then names incarnation 0
    /// (no member it counts has linked 0), and the others link 0's process (incarnation 1)
    /// before 3's flag lands at them, so they do not adopt it (s24, forty-eighth part).
    LinkedElsewhereAfterTheBound,
}

/// What `f` makes of member `i`'s GMS table and node 0's row in it.
fn row0<R>(
    l: &Life,
    i: usize,
    f: impl Fn(&squall_sst::Sst<squall_transport::mux::MuxHandle<Gate>>, usize) -> R,
) -> Option<R> {
    (l.groups[i].as_ref()).and_then(|g| {
        let sst = g.gms().sst();
        sst.row_of(NodeId(0)).map(|r| f(sst, r))
    })
}

/// Member 3's `expected_link_timeout` in [`JoinerProcess::LinkedElsewhereAfterTheBound`]
/// (above the 1.5 ms suspicion timeout, below [`EXPECTED_LINK`]).
const SHORT_LINK: Duration = Duration::from_millis(2);

/// s21 (`docs/MEMBERSHIP.md`, thirty-first part; the replica simulator's second finding): a
/// member that asked to join again in one restart is admitted by a later restart that adopts
/// the logged decision, and must install that view. Member 0 crashes in the first life (its
/// log ends at view 0; the others go on in view 1). In the second life all restart; 0 finds
/// the group gone on and asks to join, the restart of view 1 decides `Join(0)`, and everyone
/// stops the moment a member holds that decision. In the third, 1 to 4 restart, adopt the
/// logged decision and install view 2 naming 0. With [`JoinerProcess::LinkedBefore`], 0's
/// process is up (linked, never heard, so never suspected) but its program runs only from then
/// on: it reads a peer two views ahead and joins again (`rejoined` `(0, 2)`). Before the fix it
/// accepted only views after 2 (`follow_as_outsider`), the others never proposed its join (it
/// is a member of view 2) nor suspected it (linked, live): view 2 waited for it for good.
/// Checked: all five end active in one running view naming them all within 50 ms of virtual
/// time and deliver identically after.
///
/// s22 (thirty-fifth part): with [`JoinerProcess::AfterTheView`] 0's process starts only once
/// the others installed view 2, so their epoch of view 2 starts with 0 absent (no link, its
/// regions unknown); before the s22 fix every one of them stopped at the install
/// ("round-robin epoch: large-message region on n0: have 0 bytes, need 2400"). Checked as
/// above. With [`JoinerProcess::Never`] the others must wait for 0 (nobody removes it before
/// `GmsConfig::expected_link_timeout` from their install), then remove it and carry on: all
/// four end in one running view without 0 within 50 ms after the bound and deliver
/// identically (before the s22 bound they waited for good).
fn adopted_join(seed: u64, process: JoinerProcess) -> Result<Moment, String> {
    use squall_membership::change::ChangeKind;
    let base = dir(&format!("adopted-join-{process:?}"), seed);
    let all = [0, 1, 2, 3, 4];
    let (logs, before) = first_life_without_0(seed, &base);
    let mut l = Life::start(seed + 1000, &base, &logs, &all, 1);
    let joins = |l: &Life| {
        (l.groups.iter().flatten()).any(|g| {
            (g.gms().decision()).is_some_and(|d| {
                (d.changes.iter()).any(|c| c.node == NodeId(0) && c.kind == ChangeKind::Join)
            })
        })
    };
    let t0 = l.sim.now();
    while !joins(&l) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("no member decided 0's join: {}", l.state()));
        }
        l.step(false);
    }
    // The members that logged it (a member holds a decision only once it logged it).
    let logged_join: Vec<usize> = (1..N)
        .filter(|&i| {
            (l.groups[i].as_ref()).is_some_and(|g| {
                (g.gms().decision()).is_some_and(|d| {
                    (d.changes.iter()).any(|c| c.node == NodeId(0) && c.kind == ChangeKind::Join)
                })
            })
        })
        .collect();
    let (logs, _) = l.shutdown();
    let mut bounds = vec![None; N];
    if process == JoinerProcess::LinkedElsewhereAfterTheBound {
        bounds[3] = Some(SHORT_LINK);
    }
    let mut l = Life::start_bounded(seed + 2000, &base, &logs, &[1, 2, 3, 4], 2, N, bounds);
    if process == JoinerProcess::LinkedBefore {
        // 0's process starts (its link comes up) but its program runs only once the others
        // installed view 2.
        l.start_late(0);
        l.stall(0, Duration::from_millis(100));
    }
    let t0 = l.sim.now();
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    while !others_run_a_view_naming_0(&l) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("the restart did not admit 0: {}", l.state()));
        }
        if (1..N).any(|i| runs_a_view_without_0(&l, i)) {
            return join_dropped(&mut l, &logged_join, &before, replayed, &base);
        }
        l.step(false);
    }
    match process {
        JoinerProcess::LinkedBefore => l.stalled[0] = None,
        JoinerProcess::AfterTheView => l.start_late(0),
        JoinerProcess::Never => {
            let t0 = l.sim.now();
            return removed_after_the_bound(&mut l, t0, EXPECTED_LINK, replayed, &base)
                .map(|()| Moment::Reached);
        }
        JoinerProcess::LinkedElsewhereAfterTheBound => {
            let t0 = l.sim.now();
            // 0's process starts now; its link is held back at every member, for good at 3.
            for i in 1..N {
                l.held[i].set(Some(NodeId(0)));
            }
            l.start_late(0);
            // 3's published flag for 0's row, once it suspects it.
            let flag_at_3 = |l: &Life| {
                row0(l, 3, |sst, r| {
                    let w = sst
                        .get_at(sst.my_row(), sst.schema().suspected(), r)
                        .unwrap_or(0);
                    if sst.is_suspected(r) { w } else { 0 }
                })
                .unwrap_or(0)
            };
            while flag_at_3(&l) == 0 {
                if l.sim.now().saturating_since(t0) > SHORT_LINK + Duration::from_millis(1) {
                    return Err(missed(seed, "member 3 suspecting 0 at its bound"));
                }
                l.step(false);
            }
            if flag_at_3(&l) != 1 {
                return Err(missed(seed, "member 3 naming incarnation 0 at its bound"));
            }
            // 3's bound passed with 0 linked nowhere: the others link it now, before 3's flag
            // lands at them.
            for i in [1, 2, 4] {
                l.held[i].set(None);
            }
            let linked = |l: &Life, i: usize| row0(l, i, |sst, r| !sst.is_absent(r)) == Some(true);
            let suspects =
                |l: &Life, i: usize| row0(l, i, |sst, r| sst.is_suspected(r)) == Some(true);
            let t1 = l.sim.now();
            while ![1, 2, 4].iter().all(|&i| linked(&l, i)) {
                if l.sim.now().saturating_since(t1) > Duration::from_micros(200) {
                    return Err(missed(seed, "members 1, 2 and 4 linking 0 after 3's bound"));
                }
                l.step(false);
            }
            if [1, 2, 4].iter().any(|&i| suspects(&l, i)) {
                return Err(missed(
                    seed,
                    "members 1, 2 and 4 linking 0 before they adopted 3's flag",
                ));
            }
            return removed_after_the_bound(&mut l, t0, SHORT_LINK, replayed, &base)
                .map(|()| Moment::Reached);
        }
        JoinerProcess::OneWayAtTheLeader => {
            let t0 = l.sim.now();
            l.held[1].set(Some(NodeId(0)));
            l.start_late(0);
            // The moment: 2 to 4 linked 0's process, 1 did not.
            let linked = |l: &Life, i: usize| {
                (l.groups[i].as_ref()).is_some_and(|g| {
                    let sst = g.gms().sst();
                    sst.row_of(NodeId(0)).is_some_and(|r| !sst.is_absent(r))
                })
            };
            while !(2..N).all(|i| linked(&l, i)) {
                if l.sim.now().saturating_since(t0) > Duration::from_millis(2) {
                    return Err(missed(seed, "members 2 to 4 linking 0's process"));
                }
                l.step(false);
            }
            if linked(&l, 1) {
                return Err(missed(seed, "member 1 holding 0's link back"));
            }
            return removed_after_the_bound(&mut l, t0, EXPECTED_LINK, replayed, &base)
                .map(|()| Moment::Reached);
        }
    }
    together_and_carrying_on(&mut l, &all, replayed, "the admitted joiner")?;
    let rejoined = l.groups[0].as_ref().and_then(|g| g.gms().rejoined());
    if rejoined != Some((0, 2)) {
        return Err(format!(
            "{} (rejoined {rejoined:?})",
            missed(seed, "member 0 joining again at view 2, which names it")
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(Moment::Reached)
}

/// Whether member `i` runs (not restarting) a view without node 0.
fn runs_a_view_without_0(l: &Life, i: usize) -> bool {
    l.groups[i].as_ref().is_some_and(|g| {
        g.gms().restarting().is_none() && g.view().is_some_and(|v| !v.contains(NodeId(0)))
    })
}

/// [`adopted_join`] when the restart of view 1 installs view 2 without 0 (s24, the soak
/// failure of seed 8; `docs/MEMBERSHIP.md`, "s24: seed 8, the restart that drops the join").
/// The second life logged the decision with `Join(0)` at the members of `logged_join` only.
/// Where they are fewer than a majority of view 1 (1 to 4), that decision was never chosen:
/// the third life may finish its ballot (2 to 4 echo what 1 re-published: view 2 names 0) or
/// 1's new, higher ballot may adopt it fitted (`Gms::restart_changes` drops adopted joins: view
/// 2 = [1, 2, 3, 4]). The second is a run that missed this test's moment, and its end state is
/// checked instead: members 1 to 4 run one view 2 = [1, 2, 3, 4] and carry on; 0's process then
/// starts (or its program runs again), reads peers two views ahead, joins again (`rejoined`
/// `(0, 2)`), and all five end active in one running view delivering identically, everything
/// delivered before the shutdown kept, no view id ever run with two member lists. A majority
/// logging the decision is outside that argument: such a run fails, to be looked at.
fn join_dropped(
    l: &mut Life,
    logged_join: &[usize],
    before: &[Seq],
    replayed: usize,
    base: &Path,
) -> Result<Moment, String> {
    if logged_join.len() > (N - 1) / 2 {
        return Err(format!(
            "a majority of view 1 ({logged_join:?}) logged the decision with 0's join and the \
             restart installed a view without 0 (not the seed-8 case): {}",
            l.state()
        ));
    }
    let four = [1, 2, 3, 4];
    together_and_carrying_on(l, &four, replayed, "the members without 0")?;
    let want = [NodeId(1), NodeId(2), NodeId(3), NodeId(4)];
    if let Some(i) = (1..N).find(|&i| {
        (l.groups[i].as_ref()).is_none_or(|g| g.view().is_none_or(|v| v.members != want))
    }) {
        return Err(format!("n{i} does not run [1, 2, 3, 4]: {}", l.state()));
    }
    if l.groups[0].is_some() {
        l.stalled[0] = None;
    } else {
        l.start_late(0);
    }
    let all = [0, 1, 2, 3, 4];
    together_and_carrying_on(l, &all, replayed, "the joiner whose join was dropped")?;
    let rejoined = l.groups[0].as_ref().and_then(|g| g.gms().rejoined());
    if rejoined != Some((0, 2)) {
        return Err(format!(
            "member 0 did not join again at view 2 (rejoined {rejoined:?})"
        ));
    }
    if let Some(d) = &l.disagreement {
        return Err(d.clone());
    }
    for (i, b) in before.iter().enumerate() {
        if !is_prefix(b, &l.delivered[1]) {
            return Err(format!(
                "n{i}'s deliveries before the shutdown are not kept"
            ));
        }
    }
    let _ = std::fs::remove_dir_all(base);
    Ok(Moment::Missed)
}

/// The moment [`adopted_join`] exists for: the restart of view 1 installs view 2 naming 0.
const ADOPTED_JOIN: &str = "the restart adopting the logged Join(0) (view 2 naming 0)";

/// [`adopted_join`] with [`JoinerProcess::Never`] (or [`JoinerProcess::OneWayAtTheLeader`],
/// [`JoinerProcess::LinkedElsewhereAfterTheBound`]): members 1 to 4 installed view 2 naming
/// the absent 0 at `t0`. None may remove it before `bound` (the shortest member's
/// `expected_link_timeout`) after that; then they must end in one running view without it and
/// carry on.
fn removed_after_the_bound(
    l: &mut Life,
    t0: squall_transport::Time,
    bound: Duration,
    replayed: usize,
    base: &Path,
) -> Result<(), String> {
    let four = [1, 2, 3, 4];
    let without_0 = |l: &Life| {
        four.iter().any(|&i| {
            (l.groups[i].as_ref()).is_some_and(|g| g.view().is_some_and(|v| !v.contains(NodeId(0))))
        })
    };
    while !without_0(l) {
        if l.sim.now().saturating_since(t0) > EXPECTED_LINK + Duration::from_millis(50) {
            return Err(format!("0 was never removed: {}", l.state()));
        }
        l.step(false);
    }
    let waited = l.sim.now().saturating_since(t0);
    if waited < bound {
        return Err(format!(
            "0 was removed {waited:?} after the install, before the bound {bound:?}"
        ));
    }
    together_and_carrying_on(l, &four, replayed, "the members without 0")?;
    let _ = std::fs::remove_dir_all(base);
    Ok(())
}

#[test]
fn a_joiner_admitted_by_a_restart_adopting_its_logged_join_installs_that_view() {
    check_seeds_reaching("restart_adopted_join", 2, ADOPTED_JOIN, |seed| {
        adopted_join(seed, JoinerProcess::LinkedBefore)
    });
}

#[test]
fn a_joiner_admitted_by_a_restart_whose_process_starts_only_after_the_view_installs_it() {
    check_seeds_reaching("restart_adopted_join_after", 2, ADOPTED_JOIN, |seed| {
        adopted_join(seed, JoinerProcess::AfterTheView)
    });
}

#[test]
fn a_joiner_admitted_by_a_restart_whose_process_never_starts_is_removed_after_the_bound() {
    check_seeds_reaching("restart_adopted_join_never", 2, ADOPTED_JOIN, |seed| {
        adopted_join(seed, JoinerProcess::Never)
    });
}

/// s23 (`docs/MEMBERSHIP.md`, forty-fourth part): [`JoinerProcess::OneWayAtTheLeader`].
/// Before the fix the leader's suspicion named incarnation 0, below the incarnation 1 that
/// members 2 to 4 linked: they never adopted it and view 2 stalled ("0 was never removed").
#[test]
fn a_joiner_admitted_by_a_restart_whose_link_never_comes_up_at_the_leader_is_removed_after_the_bound()
 {
    check_seeds_reaching("restart_adopted_join_one_way", 2, ADOPTED_JOIN, |seed| {
        adopted_join(seed, JoinerProcess::OneWayAtTheLeader)
    });
}

/// s24 (`docs/MEMBERSHIP.md`, forty-eighth part): [`JoinerProcess::LinkedElsewhereAfterTheBound`].
/// Member 3 named incarnation 0 at its bound, when no member it counts had linked 0; once they
/// linked 0's process (incarnation 1) it must name that one, or they never adopt its
/// suspicion and view 2 stalls (3 wedged, nobody removing 0).
#[test]
fn a_joiner_linked_elsewhere_only_after_a_members_bound_is_named_again_and_removed() {
    check_seeds_reaching("restart_adopted_join_renamed", 2, ADOPTED_JOIN, |seed| {
        adopted_join(seed, JoinerProcess::LinkedElsewhereAfterTheBound)
    });
}

/// s24 (`docs/MEMBERSHIP.md`, "s24: seed 8, the restart that drops the join"): [`adopted_join`]
/// at the seeds 8 and 9, where the restart of view 1 installs view 2 without 0 (8 and 10 when
/// written; re-seeded by a scan of 0..40 after the session's other merges shifted the
/// schedules: only 8 and 9 reach it now). At seed 8 the
/// second life stopped with the decision holding `Join(0)` logged at member 1 only (a minority
/// of view 1), and in the third 1 proposed a new ballot before 2 to 4 echoed the decision it
/// re-published, so its ballot adopted that decision fitted, the join dropped
/// (`Gms::restart_changes`). Checked as [`join_dropped`] says: all five end in one running
/// view, 0 having joined again at view 2. Fails as a missed moment if a seed admits 0 instead.
#[test]
fn a_joiner_whose_logged_join_a_new_restart_ballot_drops_joins_again() {
    for seed in [8, 9] {
        match adopted_join(seed, JoinerProcess::AfterTheView) {
            Ok(Moment::Missed) => {}
            Ok(Moment::Reached) => panic!("{}", missed(seed, "the restart dropping 0's join")),
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
}

/// s22 (`docs/MEMBERSHIP.md`, thirty-fifth part): a running group admits a joiner whose link
/// is not up at some members. Five members deliver; node 5 starts and asks to join while the
/// members of `held_at` (never the leader n0, which must read its request) hold its
/// `PeerConnected` back (see [`Gate`]): they install view 1 naming it with its link not up, so
/// their epoch starts with the joiner absent (its large-message region unknown). The links stay
/// held 500 µs more while everyone submits, large messages included. Before the fix every such
/// member stopped at the install ("round-robin epoch: large-message region on n5: have 0
/// bytes"). Checked: each held member installed view 1 while the link was held; then all six
/// end active in one running view and deliver identically. Reached when a held member's epoch
/// held back a chunk write for the joiner (`Stats::chunk_writes_held`), which its link's
/// coming up then posts.
fn late_linked_joiner(seed: u64, held_at: &[usize]) -> Result<Moment, String> {
    const U: usize = N + 1;
    let j = N;
    let tag = format!("late-linked-joiner-{}", held_at.len());
    let base = dir(&tag, seed);
    let mut l = Life::start_in(seed, &base, &vec![Vec::new(); U], &[0, 1, 2, 3, 4], 0, U);
    for _ in 0..600 {
        l.step(true);
    }
    for &k in held_at {
        l.held[k].set(Some(NodeId(j as u32)));
    }
    l.start_late(j);
    l.groups[j].as_mut().unwrap().join().unwrap();
    let installed = |l: &Life| {
        held_at.iter().all(|&k| {
            (l.groups[k].as_ref()).is_some_and(|g| {
                g.epoch().is_some() && g.view().is_some_and(|v| v.contains(NodeId(j as u32)))
            })
        })
    };
    let stopped =
        |l: &Life| (0..U).any(|i| (l.groups[i].as_ref()).is_some_and(|g| g.stopped().is_some()));
    let t0 = l.sim.now();
    while !installed(&l) {
        if stopped(&l) || l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!(
                "the held members did not install the joiner's view: {}",
                l.state()
            ));
        }
        l.step(true);
    }
    let held_chunks = |l: &Life| {
        (held_at.iter())
            .filter_map(|&k| l.groups[k].as_ref()?.epoch())
            .map(|e| e.stats().chunk_writes_held)
            .sum::<u64>()
    };
    let t1 = l.sim.now();
    while l.sim.now().saturating_since(t1) < Duration::from_micros(500) {
        if stopped(&l) {
            return Err(format!(
                "a member stopped with the joiner's link held: {}",
                l.state()
            ));
        }
        l.step(true);
    }
    let moment = if held_chunks(&l) > 0 {
        Moment::Reached
    } else {
        Moment::Missed
    };
    for &k in held_at {
        l.held[k].set(None);
    }
    let all: Vec<usize> = (0..U).collect();
    together_and_carrying_on(&mut l, &all, 0, "the joiner")?;
    if !delivered_own(&l, j, 0, 0) {
        return Err("the joiner delivered nothing of its own".into());
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(moment)
}

#[test]
fn a_running_group_admits_a_joiner_whose_link_is_not_up_at_some_members() {
    for held_at in [&[3][..], &[1, 2, 3, 4][..]] {
        check_seeds_reaching(
            &format!("late_linked_joiner_{held_at:?}"),
            2,
            "a chunk write held back for the joiner",
            |seed| late_linked_joiner(seed, held_at),
        );
    }
}

/// s22 (`docs/MEMBERSHIP.md`, thirty-third part; the replica simulator's third finding): a
/// member that asked to join again is named by a view the others *restart*, a view it never
/// installed. Member 0 crashes in the first life (its log ends at view 0; the others go on in
/// view 1). In the second life all restart; 0 finds the group gone on and asks to join, and its
/// program stops running from then on (its process stays up); the restart of view 1 decides
/// `Join(0)` and 1 to 4 install view 2 = [1, 2, 3, 4, 0], and everyone stops at that moment (0
/// never installed view 2). In the third life all five restart: 1 to 4 restart view 2 (their
/// logs hold it), 0 restarts at view 0, reads a peer two views ahead and asks to join again
/// (`rejoined` `(0, 2)`). An outsider installs no restarting view and 0's log cannot restart
/// view 2, so 1 to 4 must count it out: before the fix they waited for it for good, since
/// `Gms::outsider_in_restart` counted out only a linked member whose view block did not say
/// restarting, and 0's still said restarting at view 0. Checked: all five end active in one
/// running view naming them all within 50 ms of virtual time and deliver identically after,
/// and 0 joined by transfer in a view after the restart view (3).
fn restarting_view_joiner(seed: u64) -> Result<(), String> {
    let base = dir("restarting-view-joiner", seed);
    let all = [0, 1, 2, 3, 4];
    let (logs, before) = first_life_without_0(seed, &base);
    let mut l = Life::start(seed + 1000, &base, &logs, &all, 1);
    let t0 = l.sim.now();
    while !others_run_a_view_naming_0(&l) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("the restart did not admit 0: {}", l.state()));
        }
        l.step(false);
        let asked = (l.groups[0].as_ref()).is_some_and(|g| g.gms().rejoined().is_some());
        if asked && l.stalled[0].is_none() {
            l.stall(0, Duration::from_secs(1));
        }
    }
    if (l.groups[0].as_ref()).is_some_and(|g| g.view().is_some()) {
        return Err(missed(
            seed,
            "member 0 outside view 2 when the others installed it",
        ));
    }
    let (logs, _) = l.shutdown();
    let mut l = Life::start(seed + 2000, &base, &logs, &all, 2);
    let restarting_2 = (1..N).all(|i| {
        l.groups[i]
            .as_ref()
            .is_some_and(|g| g.gms().restarting().is_some() && g.view().is_some_and(|v| v.id == 2))
    });
    if !restarting_2 {
        return Err(missed(seed, "members 1 to 4 restarting view 2"));
    }
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(
        &mut l,
        &all,
        replayed,
        "the member named by the restarting view",
    )?;
    let g = l.groups[0].as_ref().ok_or("member 0 is down")?;
    if g.gms().rejoined() != Some((0, 2)) {
        return Err(format!(
            "{} (rejoined {:?})",
            missed(seed, "member 0 joining again at view 2, which names it"),
            g.gms().rejoined()
        ));
    }
    if g.view().is_none_or(|v| v.id <= 3) {
        return Err(format!(
            "member 0 ends in view {:?}, not one after the restart view 3",
            g.view().map(|v| v.id)
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

#[test]
fn a_joiner_named_by_a_view_the_others_restart_joins_after_they_count_it_out() {
    check_seeds("restart_restarting_view_joiner", 2, restarting_view_joiner);
}

/// Issue 6, a replay that stalls the poll loop: one member's application takes 20 µs per
/// upcall, so a replay of several hundred messages handed out by one `poll` keeps its program
/// from running for many milliseconds, more than the 1.5 ms suspicion timeout; its peers then
/// suspect it and it is removed from the restart view it just installed (or the restart goes
/// on without it). With `GroupConfig::replay_batch` = 8 each `poll` hands out at most 8
/// upcalls (160 µs of application time) and the next `poll` runs the heartbeats: every member
/// stays in the restart view, replays identically and carries on.
fn slow_replay(seed: u64, batch: usize) -> Result<(), String> {
    let base = dir(&format!("slow-replay-{batch}"), seed);
    let (logs, before) = first_life(seed, &base, 1500);
    let all = [0, 1, 2, 3, 4];
    // Every node late, then all started at once: the groups are created with the batch.
    let mut l = Life::start(seed + 1000, &base, &logs, &[], 1);
    let slow = (seed % N as u64) as usize;
    let per = Duration::from_micros(20);
    l.batch = Some(batch);
    l.cost = Some((slow, per));
    for i in all {
        l.start_late(i);
    }
    let replay_len = before.iter().map(Vec::len).max().unwrap_or(0);
    let unbatched = per * replay_len as u32;
    if unbatched < Duration::from_micros(3000) {
        return Err(format!(
            "the replay ({replay_len} messages, {unbatched:?} at once) would not outlast two suspicion timeouts"
        ));
    }
    let t0 = l.sim.now();
    let limit = Duration::from_millis(50);
    while !all.iter().all(|&i| l.restarted(i)) {
        if let Some(i) = all
            .iter()
            .find(|&&i| l.groups[i].as_ref().is_some_and(|g| g.stopped().is_some()))
        {
            return Err(format!("n{i} stopped during the restart: {}", l.state()));
        }
        if l.sim.now().saturating_since(t0) > limit {
            return Err(format!("the restart did not complete: {}", l.state()));
        }
        l.step(false);
    }
    for _ in 0..400 {
        l.step(true);
    }
    for _ in 0..1500 {
        l.step(false);
    }
    for i in all {
        let g = l.groups[i].as_ref().unwrap();
        if g.stopped().is_some() || g.view().is_none_or(|v| v.members.len() != N) {
            return Err(format!(
                "n{i} lost a member or stopped (n{slow} handles each upcall in {per:?}): {}",
                l.state()
            ));
        }
    }
    let after = &l.delivered[0];
    if let Some(i) = all.iter().find(|&&i| &l.delivered[i] != after) {
        return Err(format!("n{i} delivered differently"));
    }
    if let Some(i) = (0..N).find(|&i| !is_prefix(&before[i], after)) {
        return Err(format!("n{i}'s deliveries are not a prefix of the replay"));
    }
    let polls = l.groups[slow].as_ref().unwrap().stats().replay_polls;
    if (polls as usize) < replay_len / batch {
        return Err(format!(
            "n{slow}: the replay of {replay_len} went out in {polls} polls, with a batch of {batch}"
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// Issue 6, restart-mode liveness: a *late root* of the restart view. View 0 is `0..5`; node 5
/// joins (view 1 = `0..6`, its state by transfer); everyone stops the moment node 5 installed
/// view 1, and the logs are set as after a crash in which node 5 and member 0 (a minority of
/// view 0) logged view 1 but members 1–4 only logged the decision that ended view 0 (their
/// `Installed { 1 }` and what follows, and their epoch logs of view 1, are dropped: nothing
/// happens in an epoch before its view is logged). Members 1–4 restart (0 and 5 absent): a
/// majority of view 0, they complete its restart and run view 1. Then node 5 starts: its log
/// ends at view 1, so it restarts there — a root that is not a member of view 0, which the
/// restart of view 0 did not wait for — and must not restart alone at view 1 while the others
/// run it: it sees a peer *running* its view and joins again (state by transfer).
///
/// Two defects stood in the way first: every restarted member re-published the logged
/// decision (Join 5), so all echoes matched and they installed it without an inspector, and
/// an inspector adopted it whole — either way the restart view named the absent 0 and 5, and
/// every member stopped ("round-robin epoch: large-message region on n0: have 0 bytes").
/// Now only a decision of this restart (a ballot) is installed in restart mode, and the
/// inspector keeps an adopted decision's trim but adds its own failures and drops its joins.
/// Checked: the four replay identically and keep everything delivered before; node 5 ends in
/// the same running view as them, active with the transferred state, and all deliver
/// identically afterwards.
fn late_root(seed: u64, early: bool) -> Result<(), String> {
    const U: usize = N + 1;
    let j = N; // the joiner
    let base = dir(if early { "joiner-root" } else { "late-root" }, seed);
    let all: Vec<usize> = (0..U).collect();
    let mut l = Life::start_in(seed, &base, &vec![Vec::new(); U], &all, 0, U);
    for _ in 0..600 {
        l.step(true);
    }
    l.groups[j].as_mut().unwrap().join().unwrap();
    let mut joined = false;
    for _ in 0..20_000 {
        l.step(true);
        if l.groups[j]
            .as_ref()
            .unwrap()
            .view()
            .is_some_and(|v| v.id == 1)
        {
            joined = true;
            break;
        }
    }
    if !joined {
        return Err("the joiner never installed view 1".into());
    }
    let (mut logs, before) = l.shutdown();
    // Members 1–4 crashed before logging view 1.
    for (i, bytes) in logs.iter_mut().enumerate().take(N).skip(1) {
        let (_, rec) = MemLog::open(bytes.clone());
        let mut log = MemLog::default();
        for r in rec
            .records
            .iter()
            .take_while(|r| !matches!(r, Record::Installed { view: 1, .. }))
        {
            log.append(r).unwrap();
        }
        *bytes = log.bytes().to_vec();
        let epoch1 = config(&base, i, U).epoch_log(1).unwrap();
        let _ = std::fs::remove_file(epoch1);
    }
    let four = [1, 2, 3, 4];
    let up: &[usize] = if early { &[1, 2, 3, 4, N] } else { &four };
    let mut l = Life::start_in(seed + 1000, &base, &logs, up, 1, U);
    let t0 = l.sim.now();
    let limit = Duration::from_millis(50);
    while !four.iter().all(|&i| l.restarted(i)) {
        if l.sim.now().saturating_since(t0) > limit {
            return Err(format!(
                "the restart of view 0 did not complete: {}",
                l.state()
            ));
        }
        l.step(false);
    }
    let replay = l.delivered[1].clone();
    if let Some(i) = four.iter().find(|&&i| l.delivered[i] != replay) {
        return Err(format!("n{i} replayed differently"));
    }
    if let Some(i) = (0..U).find(|&i| !is_prefix(&before[i], &replay)) {
        return Err(format!("n{i}'s deliveries are not a prefix of the replay"));
    }
    for _ in 0..100 {
        l.step(false);
    }
    // The late root connects.
    if !early {
        l.start_late(j);
    }
    let five = [1, 2, 3, 4, j];
    together_and_carrying_on(&mut l, &five, replay.len(), "the late root")?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

#[test]
fn a_long_replay_handed_out_in_batches_keeps_a_slow_application_in_the_group() {
    check_seeds("restart_slow_replay", 3, |seed| slow_replay(seed, 8));
}

#[test]
fn a_late_root_of_the_restart_view_that_was_a_joiner_joins_the_running_view() {
    check_seeds("restart_late_root", 3, |seed| late_root(seed, false));
}

#[test]
fn a_joiner_root_present_during_the_restart_is_not_waited_for_and_joins_again() {
    check_seeds("restart_joiner_root", 3, |seed| late_root(seed, true));
}

/// Where the member of the dead branch starts in the third life of [`dead_branch`].
#[derive(Clone, Copy, Debug)]
enum DeadBranch {
    /// With the others: it restarts its view 1 beside theirs (same number, other members).
    WithTheOthers,
    /// Once the others run view 2: it is one view behind them, and catches up.
    AfterTheyRun,
}

/// The dead-branch tests' first life: `N` members and node `j` start, `j` asks to join, and
/// the life stops once `j` and member `p` installed view 1; the logs and what each delivered.
fn a_join_into_view_1(
    seed: u64,
    base: &std::path::Path,
    j: usize,
    p: usize,
) -> Result<(Vec<Vec<u8>>, Vec<Seq>), String> {
    joins_into_view_1(seed, base, &[j], p)
}

/// [`a_join_into_view_1`] with every node of `joiners` asking to join in the same round (the
/// universe is `N + joiners.len()`); the life stops once they and `p` installed view 1, which
/// must admit them all (one decision), or the run is an error.
fn joins_into_view_1(
    seed: u64,
    base: &std::path::Path,
    joiners: &[usize],
    p: usize,
) -> Result<(Vec<Vec<u8>>, Vec<Seq>), String> {
    let u = N + joiners.len();
    let all: Vec<usize> = (0..u).collect();
    let mut l = Life::start_in(seed, base, &vec![Vec::new(); u], &all, 0, u);
    for _ in 0..600 {
        l.step(true);
    }
    for &j in joiners {
        l.groups[j].as_mut().unwrap().join().unwrap();
    }
    let in_view_1 = |l: &Life, i: usize| {
        (l.groups[i].as_ref()).is_some_and(|g| g.view().is_some_and(|v| v.id == 1))
    };
    for _ in 0..20_000 {
        l.step(true);
        if joiners.iter().all(|&j| in_view_1(&l, j)) && in_view_1(&l, p) {
            let v = l.groups[p].as_ref().unwrap().view().unwrap();
            if v.members.len() != u {
                return Err(format!(
                    "view 1 did not admit every joiner: {:?}",
                    v.members
                ));
            }
            return Ok(l.shutdown());
        }
    }
    Err(format!("the joiners and n{p} never installed view 1"))
}

/// A view number installed twice, with other members (s23, forty-second part of
/// `docs/MEMBERSHIP.md`). Life 0: view 0 is 0–4, node 5 joins, and `p` = 4 and 5 install view
/// 1 = 0–5 while 0–3 crash after logging its decision, before logging the view (their
/// `Installed { 1 }` and view-1 epoch logs are cut). Life 1: 0–3 restart view 0 without 4
/// and 5; the inspector adopts the join decision and fits it (drops the join, fails the
/// absent 4): view 1 = 0–3, the *same number*, other members; they run it and everyone stops.
/// Life 2: 0–3 restart their view 1, and 4 restarts its own view 1 (0–5), with them or once
/// they run view 2. Before s23, 4 took the ballots and decisions of the others' view 1 for its
/// own (the blocks carry the number only: the inspector 0 has rank 0 in both, so its ballot's
/// rank matched 4's leader; every echo showed that ballot) and installed view 2 as 0–5, or
/// caught up with the others' decision applied to its own view 1 (0–5 again), while the others
/// installed view 2 as 0–3: two members running view 2 with different members. Now 4 sees a
/// peer's view 1 without it (or a peer's view 2 that is not what the peer's decision makes of
/// its own view 1) and joins again by state transfer.
///
/// Checked: nobody runs a view id with other members than another member ran it with (the
/// first disagreement is the error); 0–3 replay identically, with everything delivered in
/// lives 0 and 1 a prefix; and all five end active in one running view (4 with the
/// transferred state), delivering identically afterwards.
fn dead_branch(seed: u64, when: DeadBranch) -> Result<(), String> {
    const U: usize = N + 1;
    let (j, p) = (N, 4);
    let tag = match when {
        DeadBranch::WithTheOthers => "dead-branch",
        DeadBranch::AfterTheyRun => "dead-branch-late",
    };
    let base = dir(tag, seed);
    let (mut logs, before) = a_join_into_view_1(seed, &base, j, p)?;
    // Members 0–3 crashed after logging the decision, before logging view 1.
    for (i, bytes) in logs.iter_mut().enumerate().take(p) {
        let (_, rec) = MemLog::open(bytes.clone());
        if rec.decision_for(0).is_none() {
            return Err(format!("n{i} had not logged the decision for view 0"));
        }
        let mut log = MemLog::default();
        for r in
            (rec.records.iter()).take_while(|r| !matches!(r, Record::Installed { view: 1, .. }))
        {
            log.append(r).unwrap();
        }
        *bytes = log.bytes().to_vec();
        let epoch1 = config(&base, i, U).epoch_log(1).unwrap();
        let _ = std::fs::remove_file(epoch1);
    }
    // Life 1: 0–3 restart view 0 without 4 and 5, and run the restart view 1 = 0–3.
    let four = [0, 1, 2, 3];
    let mut l = Life::start_in(seed + 1000, &base, &logs, &four, 1, U);
    l.until_restarted(&four)?;
    let want: Vec<NodeId> = four.iter().map(|&i| NodeId(i as u32)).collect();
    for &i in &four {
        let v = l.groups[i].as_ref().unwrap().view().unwrap();
        if (v.id, &v.members) != (1, &want) {
            return Err(format!(
                "n{i}'s first restart view: {} {:?}",
                v.id, v.members
            ));
        }
    }
    for _ in 0..400 {
        l.step(true);
    }
    for _ in 0..1000 {
        l.step(false);
    }
    let (logs, life1) = l.shutdown();
    // Life 2: 0–3 restart the view 1 they ran; 4 restarts the view 1 it installed.
    let up: &[usize] = match when {
        DeadBranch::WithTheOthers => &[0, 1, 2, 3, p, j],
        DeadBranch::AfterTheyRun => &four,
    };
    let mut l = Life::start_in(seed + 2000, &base, &logs, up, 2, U);
    let restarted = l.until_restarted(&four);
    if let Some(d) = &l.disagreement {
        return Err(format!("virtual synchrony: {d}"));
    }
    restarted?;
    let replay = l.delivered[0].clone();
    if let Some(i) = four.iter().find(|&&i| l.delivered[i] != replay) {
        return Err(format!("n{i} replayed differently"));
    }
    if let Some(i) =
        (0..U).find(|&i| !is_prefix(&before[i], &replay) || !is_prefix(&life1[i], &replay))
    {
        return Err(format!("n{i}'s deliveries are not a prefix of the replay"));
    }
    if let DeadBranch::AfterTheyRun = when {
        for _ in 0..100 {
            l.step(false);
        }
        l.start_late(p);
    }
    let back: &[usize] = match when {
        DeadBranch::WithTheOthers => &[0, 1, 2, 3, p, j],
        DeadBranch::AfterTheyRun => &[0, 1, 2, 3, p],
    };
    together_and_carrying_on(&mut l, back, replay.len(), "the dead branch's members")?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// What the first two lives of [`behind_the_dead_branch`] left.
enum Branch {
    /// Life 1's restart installed the live view 1 = 1–4: the logs for life 2 and what each
    /// member delivered in life 0.
    Live(Vec<Vec<u8>>, Vec<Seq>),
    /// Life 1's restart stopped instead, every one of 1–4 with
    /// [`StopReason::RestartShortOfAdopted`] (1–4 are no majority of the adopted view 1, s25,
    /// sixty-fifth part): the life, stopped, and what each member delivered in life 0.
    Short(Box<Life>, Vec<Seq>),
}

/// The first two lives of [`dead_branch_behind`] and [`dead_branch_cut_off`]: nodes `joiners`
/// (from `N` on) join view 0 (0–4) in one decision, and `p` = 0 and the joiners install view 1
/// (every node); 1–4 crash after logging that decision, before logging the view. Life 1: 1–4
/// restart view 0 without 0 and the joiners and install view 1 = 1–4, and `q` = 1 then loses
/// its `Installed { 1 }` (and with `promise_only` the restart's decision, keeping its promise).
/// Since s25 (sixty-fifth part) that restart needs 1–4 to be a majority of the adopted view 1
/// too: with four joiners they are not, and it stops ([`Branch::Short`]).
fn behind_the_dead_branch(
    seed: u64,
    base: &Path,
    joiners: &[usize],
    promise_only: bool,
) -> Result<Branch, String> {
    let u = N + joiners.len();
    let (p, q) = (0, 1);
    let (mut logs, before) = joins_into_view_1(seed, base, joiners, p)?;
    let cut = |logs: &mut [Vec<u8>], i: usize| cut_view_1(logs, i, base, u);
    for i in 1..N {
        cut(&mut logs, i);
    }
    let four = [1, 2, 3, 4];
    let mut l = Life::start_in(seed + 1000, base, &logs, &four, 1, u);
    let short = |l: &Life| {
        four.iter().all(|&i| {
            (l.groups[i].as_ref()).is_some_and(|g| {
                matches!(
                    g.gms().stopped(),
                    Some(StopReason::RestartShortOfAdopted { .. })
                )
            })
        })
    };
    let t0 = l.sim.now();
    while !four.iter().all(|&i| l.restarted(i)) {
        if short(&l) {
            return Ok(Branch::Short(Box::new(l), before));
        }
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("the restart did not complete: {}", l.state()));
        }
        l.step(false);
    }
    let (mut logs, _) = l.shutdown();
    let (_, rec) = MemLog::open(logs[q].clone());
    let Some(ballot) = rec
        .decision_for(0)
        .map(|d| d.rank)
        .filter(|&r| squall_membership::restart::attempt_of(r) > 0)
    else {
        return Err(format!("n{q} did not log the restart's decision"));
    };
    cut(&mut logs, q);
    if promise_only {
        let (_, rec) = MemLog::open(logs[q].clone());
        let mut log = MemLog::default();
        for r in (rec.records.iter())
            .filter(|r| !matches!(r, Record::Decided { decision, .. } if decision.rank == ballot))
        {
            log.append(r).unwrap();
        }
        logs[q] = log.bytes().to_vec();
        let (_, rec) = MemLog::open(logs[q].clone());
        if rec.promised_for(0) != ballot || rec.decision_for(0).is_some_and(|d| d.rank == ballot) {
            return Err(format!("n{q}'s log does not hold the promise alone"));
        }
    }
    Ok(Branch::Live(logs, before))
}

/// Member `i` crashed before logging view 1: its log loses `Installed { 1 }` and what follows,
/// and its view-1 epoch log is removed.
fn cut_view_1(logs: &mut [Vec<u8>], i: usize, base: &Path, u: usize) {
    let (_, rec) = MemLog::open(logs[i].clone());
    let mut log = MemLog::default();
    for r in (rec.records.iter()).take_while(|r| !matches!(r, Record::Installed { view: 1, .. })) {
        log.append(r).unwrap();
    }
    logs[i] = log.bytes().to_vec();
    let epoch1 = config(base, i, u).epoch_log(1).unwrap();
    let _ = std::fs::remove_file(epoch1);
}

/// What [`dead_branch_cut_off`] saw of member 1 while the partition held.
#[derive(Debug)]
struct CutOff {
    /// 1 caught up into the dead view 1 (the one naming 0) in restart mode.
    caught_up: bool,
    /// Why 1 stopped, if it did.
    stopped: Option<StopReason>,
    /// Per member of the dead side (0, 1 and the joiners), why it stopped under the partition,
    /// if it did.
    dead_stops: Vec<Option<StopReason>>,
    /// Per member of the dead side, `Gms::rejoined` at the end (after the heal).
    rejoined: Vec<Option<(u64, u64)>>,
    /// Life 1's restart of view 0 stopped short of the adopted view ([`Branch::Short`]): no
    /// live branch was made, and the operator restarted every node instead of life 2's
    /// partition (the other fields are then empty).
    short: bool,
}

/// [`dead_branch_behind`] (`promise_only`) with 1 cut off from the live members (s25,
/// sixty-fourth part of `docs/MEMBERSHIP.md`): life 2 starts every node under a partition
/// between the dead branch's side (0, 1 and the joiners) and the live side (2–4), so 1 never
/// reads a live member's block, only 0's, and suspects 2–4 once its ops to them time out. 1
/// catches up into 0's view 1 (every node) and restarts it with 0 and the joiners; 2–4 restart
/// their view 1 (1–4) without 1. Then the partition heals and every member that stopped is
/// restarted as an operator would.
///
/// With one joiner (the dead view has six members), 1, 0 and the joiner are three of six: no
/// majority, so each stops with [`StopReason::RestartCutOff`] and installs nothing. With two
/// joiners (seven), they are four of seven, a majority: the dead view restarts and installs view
/// 2 beside the live side's view 2 (the defect the sixty-fourth part reports).
///
/// Checked: no view id run with two member lists (the error); 2–4 replay identically, with
/// everything delivered in life 0 a prefix; and after the heal and the restarts, every node
/// ends active in one running view, delivering identically.
fn dead_branch_cut_off(seed: u64, joiners: &[usize], live: &[usize]) -> Result<CutOff, String> {
    let u = N + joiners.len();
    let q = 1;
    let base = dir(
        &format!("dead-branch-cut-off-{}-{}", joiners.len(), live.len()),
        seed,
    );
    let all: Vec<usize> = (0..u).collect();
    let (logs, before) = match behind_the_dead_branch(seed, &base, joiners, true)? {
        Branch::Live(logs, before) => (logs, before),
        Branch::Short(l, before) => {
            all_restarted_after_a_short_stop(*l, seed, &base, &before)?;
            let _ = std::fs::remove_dir_all(&base);
            return Ok(CutOff {
                caught_up: false,
                stopped: None,
                dead_stops: Vec::new(),
                rejoined: Vec::new(),
                short: true,
            });
        }
    };
    let mut l = Life::start_in(seed + 2000, &base, &logs, &all, 2, u);
    let ids = |v: &[usize]| v.iter().map(|&i| NodeId(i as u32)).collect::<Vec<_>>();
    let dead: Vec<usize> = (0..u).filter(|i| !live.contains(i)).collect();
    l.sim.partition(&ids(&dead), &ids(live));
    let mut caught_up = false;
    let t0 = l.sim.now();
    while !settled(&l, live, &dead) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("under the partition: {}", l.state()));
        }
        l.step(false);
        if let Some(d) = l.disagreement.clone() {
            // Both sides carry on: what each member delivers of the messages of this life.
            for _ in 0..400 {
                l.step(true);
            }
            for _ in 0..1000 {
                l.step(false);
            }
            let new: Vec<usize> = (0..u)
                .map(|i| {
                    l.delivered[i]
                        .iter()
                        .filter(|(_, m)| m.first() == Some(&2))
                        .count()
                })
                .collect();
            return Err(format!(
                "virtual synchrony: {d} (n1 caught up into the dead view 1: {caught_up}); then \
                 each member delivered {new:?} messages of this life"
            ));
        }
        let g = l.groups[q].as_ref().unwrap();
        caught_up |= g.gms().restarting().is_some()
            && g.view().is_some_and(|v| v.id == 1 && v.contains(NodeId(0)));
    }
    let stopped = l.groups[q].as_ref().unwrap().gms().stopped().cloned();
    let dead_stops = (dead.iter())
        .map(|&i| l.groups[i].as_ref().unwrap().gms().stopped().cloned())
        .collect();
    let replay = l.delivered[live[0]].clone();
    if let Some(i) = live.iter().find(|&&i| l.delivered[i] != replay) {
        return Err(format!("n{i} replayed differently"));
    }
    if let Some(i) = (0..u).find(|&i| !is_prefix(&before[i], &replay)) {
        return Err(format!("n{i}'s deliveries are not a prefix of the replay"));
    }
    l.sim.heal();
    for &i in &all {
        if l.groups[i].as_ref().is_some_and(|g| g.stopped().is_some()) {
            l.restart_member(i);
        }
    }
    together_and_carrying_on(&mut l, &all, replay.len(), "the cut-off members")?;
    let _ = std::fs::remove_dir_all(&base);
    let rejoined = (dead.iter())
        .map(|&i| l.groups[i].as_ref().unwrap().gms().rejoined())
        .collect();
    Ok(CutOff {
        caught_up,
        stopped,
        dead_stops,
        rejoined,
        short: false,
    })
}

/// [`dead_branch_cut_off`]'s variant with the live members *not started* instead of
/// partitioned (s25, sixty-fifth part; the sixty-fourth part left it unrun): life 2 starts 0, 1
/// and the joiners only. For 40 ms of virtual time (ten times the absent timeout) nobody may run
/// a view: 1 holds its promise against 0's lower-ranked decision and, reading no majority of view
/// 0, stays restarting there; 0 and the joiners are no majority of the dead view without it.
/// Then 2–4 start, stopped members are restarted, and every node must end active in one running
/// view, delivering identically, with no view id run with two member lists and everything
/// delivered in life 0 a prefix. Returns what each dead-side member had done before 2–4
/// started: stopped (its reason) or still waiting (`None`).
fn dead_branch_live_absent(
    seed: u64,
    joiners: &[usize],
    live: &[usize],
) -> Result<Vec<Option<StopReason>>, String> {
    let u = N + joiners.len();
    let base = dir(&format!("dead-branch-absent-{}", joiners.len()), seed);
    let Branch::Live(logs, before) = behind_the_dead_branch(seed, &base, joiners, true)? else {
        return Err("life 1's restart stopped short of the adopted view".into());
    };
    let all: Vec<usize> = (0..u).collect();
    let dead: Vec<usize> = (0..u).filter(|i| !live.contains(i)).collect();
    let mut l = Life::start_in(seed + 2000, &base, &logs, &dead, 2, u);
    let t0 = l.sim.now();
    while l.sim.now().saturating_since(t0) < ABSENT * 10 {
        l.step(false);
        if let Some(i) = dead.iter().find(|&&i| l.restarted(i)) {
            return Err(format!(
                "n{i} ran a view without the live members: {}",
                l.state()
            ));
        }
    }
    let waited = (dead.iter())
        .map(|&i| {
            l.groups[i]
                .as_ref()
                .and_then(|g| g.gms().stopped().cloned())
        })
        .collect();
    for &i in live {
        l.start_late(i);
    }
    for &i in &dead {
        if l.groups[i].as_ref().is_some_and(|g| g.stopped().is_some()) {
            l.restart_member(i);
        }
    }
    let restarted = l.until_restarted(live);
    if let Some(d) = &l.disagreement {
        return Err(format!("virtual synchrony: {d}"));
    }
    restarted?;
    let replay = l.delivered[live[0]].clone();
    if let Some(i) = (0..u).find(|&i| !is_prefix(&before[i], &replay)) {
        return Err(format!("n{i}'s deliveries are not a prefix of the replay"));
    }
    together_and_carrying_on(&mut l, &all, replay.len(), "every node")?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(waited)
}

/// [`dead_branch_live_absent`] with two joiners, over 3 seeds (`SQUALL_SEEDS`): the live
/// members down instead of partitioned away. Before s25 (with fix A disabled) 1 caught up into
/// the dead view and restarted it with 0 and the joiners, four of its seven.
#[test]
fn a_member_behind_with_the_live_members_down_does_not_restart_the_dead_view() {
    check_seeds("restart_dead_branch_absent_2", 3, |seed| {
        dead_branch_live_absent(seed, &[N, N + 1], &[2, 3, 4]).map(|_| ())
    });
}

/// [`dead_branch_cut_off`] when life 1's restart stopped short of the adopted view 1
/// ([`Branch::Short`]): every one of 1–4 stopped naming 0 and the joiners to start, having
/// installed nothing. The operator's action: every node restarts from its log. 1–4 catch up
/// from 0 into view 1 (every node; the restart decided nothing under their promise, which they
/// read in a majority of view 0) and restart it with 0 and the joiners. Checked: no view id
/// run with two member lists, everything delivered in life 0 a prefix of the replay, and all
/// end active in one running view, delivering identically.
fn all_restarted_after_a_short_stop(
    l: Life,
    seed: u64,
    base: &Path,
    before: &[Seq],
) -> Result<(), String> {
    let u = l.u;
    let zero_and_joiners: Vec<NodeId> = (0..u)
        .filter(|i| !(1..N).contains(i))
        .map(|i| NodeId(i as u32))
        .collect();
    for i in 1..N {
        let why = l.groups[i]
            .as_ref()
            .and_then(|g| g.gms().stopped().cloned());
        let named = matches!(&why, Some(StopReason::RestartShortOfAdopted { view: 0, start, .. })
            if zero_and_joiners.iter().all(|n| start.contains(n)));
        if !named || l.restarted(i) {
            return Err(format!(
                "n{i} did not stop naming 0 and the joiners: {why:?}"
            ));
        }
    }
    let (logs, _) = l.shutdown();
    let all: Vec<usize> = (0..u).collect();
    let mut l = Life::start_in(seed + 2000, base, &logs, &all, 2, u);
    let restarted = l.until_restarted(&all);
    if let Some(d) = &l.disagreement {
        return Err(format!("virtual synchrony: {d}"));
    }
    restarted?;
    let replay = l.delivered[0].clone();
    if let Some(i) = (0..N).find(|&i| l.delivered[i] != replay) {
        return Err(format!("n{i} replayed differently"));
    }
    if let Some(i) = (0..u).find(|&i| !is_prefix(&before[i], &replay)) {
        return Err(format!("n{i}'s deliveries are not a prefix of the replay"));
    }
    together_and_carrying_on(&mut l, &all, replay.len(), "every node")
}

/// [`dead_branch`] with the roles moved so that a member one view *behind* meets the dead
/// branch: `p` = 0 keeps life 0's view 1 (0–5), 1–4 restart view 0 in life 1 and install view
/// 1 = 1–4, and 1 crashes after logging the restart's decision, before logging that view (its
/// `Installed { 1 }` is cut; nothing was delivered in the view: the life stops as the restart
/// completes). Life 2: all six start. 1 restarts view 0 holding the restart's decision (a
/// ballot); one view ahead it sees 0, restarting life 0's view 1 and publishing the join
/// decision that installed it (a lower, ordinary rank), and 2–4, restarting the restart's view
/// 1 and publishing the restart's decision. Checked as in [`dead_branch`]: no disagreement,
/// 1–4 replay identically, and all six end in one running view.
///
/// With `promise_only` (s24, forty-eighth part), 1's log also loses the restart's decision and
/// keeps only its promise of that ballot (it acknowledged the ballot and crashed before it
/// logged the decision; 2–4 installed without it): it holds no decision that ranks above 0's,
/// so it cannot tell 0's row for a dead branch by its own log (`Gms::dead_ahead`). Where 0's
/// row lands first, 1 catches up into 0's view 1 (0–5) and restarts it beside 2–4's view 1
/// (1–4); before s24 that hung (seed 1: "the restart did not complete: … n1: view 1 [0, 1, 2,
/// 3, 4, 5] …; n2, n3, n4: view 1 [1, 2, 3, 4]"). Now 1 reads 2–4's view 1, a strict subset
/// of its own, and joins again (`Gms::superseded_by`). Since s25 (sixty-fifth part) 1 does not
/// catch up from 0's row at all: 0's decision ranks below 1's promise, and 1 reads 2–4's
/// decision under that ballot or later first (`Gms::below_promise`). Then 2–4 replay
/// identically, and 1 ends in their group. Returns whether 1 was ever restarting in 0's view 1.
fn dead_branch_behind(seed: u64, promise_only: bool) -> Result<bool, String> {
    const U: usize = N + 1;
    let q = 1;
    let tag = if promise_only {
        "dead-branch-promise"
    } else {
        "dead-branch-behind"
    };
    let base = dir(tag, seed);
    let Branch::Live(logs, before) = behind_the_dead_branch(seed, &base, &[N], promise_only)?
    else {
        return Err("life 1's restart stopped short of the adopted view".into());
    };
    let all: Vec<usize> = (0..U).collect();
    let four = [1, 2, 3, 4];
    let mut l = Life::start_in(seed + 2000, &base, &logs, &all, 2, U);
    let replayers: &[usize] = if promise_only { &four[1..] } else { &four };
    let mut caught_up = false;
    let t0 = l.sim.now();
    let mut restarted = Ok(());
    while !replayers.iter().all(|&i| l.restarted(i)) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            restarted = Err(format!("the restart did not complete: {}", l.state()));
            break;
        }
        l.step(false);
        let g = l.groups[q].as_ref().unwrap();
        caught_up |= g.gms().restarting().is_some()
            && g.view().is_some_and(|v| v.id == 1 && v.contains(NodeId(0)));
    }
    if let Some(d) = &l.disagreement {
        return Err(format!("virtual synchrony: {d}"));
    }
    restarted?;
    let replay = l.delivered[replayers[0]].clone();
    if let Some(i) = replayers.iter().find(|&&i| l.delivered[i] != replay) {
        return Err(format!("n{i} replayed differently"));
    }
    if let Some(i) = (0..U).find(|&i| !is_prefix(&before[i], &replay)) {
        return Err(format!("n{i}'s deliveries are not a prefix of the replay"));
    }
    together_and_carrying_on(&mut l, &all, replay.len(), "the dead branch's members")?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(caught_up)
}

#[test]
fn a_member_one_view_behind_catches_up_past_a_dead_branch() {
    check_seeds("restart_dead_branch_behind", 3, |seed| {
        dead_branch_behind(seed, false).map(|_| ())
    });
}

/// [`dead_branch_behind`] with 1 holding only the restart ballot's promise, over 3 seeds
/// (`SQUALL_SEEDS`); whether 1 reads 0's row first depends on the schedule, so seeds that
/// miss the moment still check the end state.
#[test]
fn a_member_one_view_behind_holding_only_the_ballots_promise_catches_up_past_a_dead_branch() {
    check_seeds("restart_dead_branch_promise", 3, |seed| {
        dead_branch_behind(seed, true).map(|_| ())
    });
}

/// Seed 1 of the sweep above: 1 reads 0's row first. Before s24 (forty-eighth part) it caught
/// up into the dead view 1 (0–5) and restarted it for good beside 2–4's, and the restart hung;
/// in s24 it joined again on reading their view 1 (a strict subset of its own). Since s25
/// (sixty-fifth part) it never catches up into the dead view: 0's decision ranks below its
/// promise, and it reads 2–4's decision under the promised ballot first (`Gms::below_promise`).
#[test]
fn regression_dead_branch_promise_seed_1_the_member_behind_caught_up_into_the_dead_view() {
    let caught_up = dead_branch_behind(1, true).unwrap();
    assert!(!caught_up, "n1 caught up into the dead view 1");
}

/// [`dead_branch_cut_off`] with one joiner, over 3 seeds (`SQUALL_SEEDS`): 1, cut off from the
/// live members, does not catch up into the dead view 1 from 0's row (0's decision ranks below
/// 1's promise and 1 reads no majority of view 0, `Gms::below_promise`): it stops at view 0
/// with [`StopReason::RestartCutOff`]. 0 and the joiner (two of the dead view's six) stop cut
/// off at view 1; 2–4 go on without them. After the heal and a restart of the stopped
/// processes, 0 and 5 join again from the dead view 1 and 1 from view 0 on seeing 2–4's view
/// 2 (`rejoined` is `(1, 2)` and `(0, 2)`), and everyone ends in the live group. Until s25
/// (sixty-fourth part) 1 caught up into the dead view and stopped there, at every one of these
/// seeds; that fails here.
#[test]
fn a_member_behind_cut_off_from_every_live_peer_stops_and_rejoins_after_the_heal() {
    check_seeds("restart_dead_branch_cut_off", 3, cut_off_and_rejoined);
}

/// [`dead_branch_cut_off`] with one joiner at `seed`, and the outcome
/// [`a_member_behind_cut_off_from_every_live_peer_stops_and_rejoins_after_the_heal`] checks.
fn cut_off_and_rejoined(seed: u64) -> Result<(), String> {
    let c = dead_branch_cut_off(seed, &[N], &[2, 3, 4])?;
    let cut_off = |r: &Option<StopReason>| matches!(r, Some(StopReason::RestartCutOff { .. }));
    let rejoined = [Some((1, 2)), Some((0, 2)), Some((1, 2))];
    if c.short || !c.dead_stops.iter().all(cut_off) || c.rejoined != rejoined {
        return Err(format!(
            "0, 1 and 5 must stop cut off, then join again: {c:?}"
        ));
    }
    match &c.stopped {
        Some(StopReason::RestartCutOff { view: 0, .. }) if !c.caught_up => Ok(()),
        _ => Err(format!("n1 under the partition: {c:?}")),
    }
}

/// Seed 7 of [`a_member_behind_cut_off_from_every_live_peer_stops_and_rejoins_after_the_heal`]
/// (s26, sixty-seventh part of `docs/MEMBERSHIP.md`). After the heal the operator restarts 0, 1
/// and 5 in that order, so 1's new process links 5's old one, sees it fail when 5 restarts, and
/// holds 5's new incarnation pending. 0 joins view 3 (which names the new incarnations of 1 and
/// 5), readmits 1 (a whole-row push to it) and publishes view 3. 1 then reads 0's row with the
/// view block naming view 3 but its `admitted` words not yet landed: the whole-row write, posted
/// before 0 installed view 3, carried the view block (a fabric reads a write's source when it
/// applies it), the `admitted` words came in later writes. Taking only 0's words, 1 judged that
/// view 3 named 5's failed incarnation, failed 5 in its epoch from the start, wedged, was
/// suspected by 5 and removed, and stopped ("minority: in view 3 this member suspects [2, 3, 4,
/// 5, 0]"). Now an outsider takes the newest `admitted` word among every row running the view
/// it installs (`Gms::runners_of`).
#[test]
fn regression_dead_branch_cut_off_seed_7_a_rejoiner_read_a_view_block_before_its_admitted_words() {
    cut_off_and_rejoined(7).unwrap();
}

/// [`dead_branch_cut_off`] with two joiners: the dead view 1 has seven members, and 1, 0 and the
/// joiners would be four, a majority of it. Until s25 1 caught up into the dead view from 0's
/// row and they restarted it, installing view 2 = [0, 1, 5, 6] while 2–4 installed view 2 =
/// [2, 3, 4] (sixty-fourth part of `docs/MEMBERSHIP.md`). Now 1 holds its promise against 0's
/// lower-ranked decision (`Gms::below_promise`, sixty-fifth part) and stops cut off at view 0;
/// 0 and the joiners, three of seven, stop cut off too.
#[test]
fn a_member_behind_cut_off_from_every_live_peer_with_a_dead_majority_restarts_the_dead_view() {
    check_seeds("restart_dead_branch_cut_off_2", 3, |seed| {
        let c = dead_branch_cut_off(seed, &[N, N + 1], &[2, 3, 4])?;
        if c.short || c.caught_up {
            return Err(format!(
                "n1 caught up into the dead view, or life 1 stopped: {c:?}"
            ));
        }
        Ok(())
    });
}

/// The review's counterexample to fix A (s25, sixty-fifth part of `docs/MEMBERSHIP.md`, "At the
/// s25 merge", item 1): a member that promised two restart ballots `b < b2` for view 0, `b`
/// decided (fitted) and `b2` never decided. Life 0 as in [`behind_the_dead_branch`] with two
/// joiners: 0, 5 and 6 install the dead view 1 (every node), 1–4 log only the join decision
/// `D`. Life 1: 1–4 restart view 0 under ballot `b` and install the live view 1 = 1–4; then
/// (log surgery) 4 keeps only its promise of `b`, 1 and 2 keep `b`'s decision but lose
/// `Installed { 1 }`, and 3 keeps everything. Life 2 is written into the logs: 1 led ballot
/// `b2` > `b` for view 0, and 1, 2 and 4 logged `Promised { 0, b2 }`; nobody decided. Life 3:
/// 0, 2, 4, 5 and 6 start connected. 4 (holding `D` and the promise `b2`) reads 0 one view
/// ahead with `D`, 2 wedged at view 0 with `b`'s decision, and itself. Every decision it reads
/// ranks below `b2`, so fix A alone would clear and 4 would catch up into the dead view; but
/// 2's decision ranks above `D`, the decision 4 would catch up from. Once 4 has caught up, or
/// after 10 ms, a partition separates {0, 4, 5, 6} from {1, 2, 3}, and 1 and 3 start: 1–3 run
/// the live view 1 (three of its four) to a view 2, and 0, 4 and the joiners (four of the dead
/// view's seven) would restart the dead view to another view 2. Checked: no view id run with
/// two member lists and no dead-side member running a view under the partition; 1–3 replay
/// identically with life 0's deliveries a prefix. Then the partition heals and the operator
/// restarts only the stopped members (0, 4 and the joiners) from their logs; 1–3 run on. Each
/// restarted member must join again by transfer (`Gms::rejoined`), and all seven must end in
/// one running view, delivering identically, with no view id run with two member lists. (Until
/// s26 this stalled: `Sim::start_node` announced every running peer to 1 and 3, started late,
/// as incarnation 1, so they refused the restarted members' real incarnation 1 and kept
/// suspecting them; the test ended with a total restart of all seven instead; sixty-seventh
/// part of `docs/MEMBERSHIP.md`.) Returns whether 4 ever restarted inside the dead view.
fn two_promises_behind_the_dead_branch(seed: u64) -> Result<bool, String> {
    let joiners = [N, N + 1];
    let u = N + joiners.len();
    let base = dir("dead-branch-two-promises", seed);
    let (mut logs, before) = joins_into_view_1(seed, &base, &joiners, 0)?;
    for i in 1..N {
        cut_view_1(&mut logs, i, &base, u);
    }
    let four = [1, 2, 3, 4];
    let mut l = Life::start_in(seed + 1000, &base, &logs, &four, 1, u);
    l.until_restarted(&four)?;
    let (mut logs, _) = l.shutdown();
    let (_, rec) = MemLog::open(logs[4].clone());
    let Some(b) = rec
        .decision_for(0)
        .map(|d| d.rank)
        .filter(|&r| squall_membership::restart::attempt_of(r) > 0)
    else {
        return Err("n4 did not log the restart's decision".into());
    };
    for i in [1, 2, 4] {
        cut_view_1(&mut logs, i, &base, u);
    }
    let (_, rec) = MemLog::open(logs[4].clone());
    let mut log = MemLog::default();
    for r in (rec.records.iter())
        .filter(|r| !matches!(r, Record::Decided { decision, .. } if decision.rank == b))
    {
        log.append(r).unwrap();
    }
    logs[4] = log.bytes().to_vec();
    let b2 = squall_membership::restart::ballot(squall_membership::restart::attempt_of(b) + 1, 1);
    for i in [1, 2, 4] {
        let (mut log, _) = MemLog::open(logs[i].clone());
        log.append(&Record::Promised { view: 0, rank: b2 }).unwrap();
        logs[i] = log.bytes().to_vec();
    }
    let (first, late) = ([0, 2, 4, 5, 6], [1, 3]);
    let mut l = Life::start_in(seed + 3000, &base, &logs, &first, 3, u);
    let in_dead_view = |l: &Life| {
        let g = l.groups[4].as_ref().unwrap();
        g.gms().restarting().is_some()
            && g.view().is_some_and(|v| v.id == 1 && v.contains(NodeId(0)))
    };
    let t0 = l.sim.now();
    let mut caught_up = false;
    while !caught_up && l.sim.now().saturating_since(t0) < Duration::from_millis(10) {
        l.step(false);
        caught_up = in_dead_view(&l);
    }
    let ids = |v: &[usize]| v.iter().map(|&i| NodeId(i as u32)).collect::<Vec<_>>();
    let (dead, live) = ([0, 4, 5, 6], [1, 2, 3]);
    l.sim.partition(&ids(&dead), &ids(&live));
    for i in late {
        l.start_late(i);
    }
    let t0 = l.sim.now();
    while !settled(&l, &live, &dead) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("under the partition: {}", l.state()));
        }
        l.step(false);
        caught_up |= in_dead_view(&l);
        if let Some(d) = &l.disagreement {
            return Err(format!(
                "virtual synchrony: {d} (n4 caught up into the dead view 1: {caught_up})"
            ));
        }
    }
    if let Some(i) = dead.iter().find(|&&i| l.restarted(i)) {
        return Err(format!(
            "n{i} ran a view on the dead side (n4 caught up into the dead view 1: {caught_up}): {}",
            l.state()
        ));
    }
    let replay = l.delivered[live[0]].clone();
    if let Some(i) = live.iter().find(|&&i| l.delivered[i] != replay) {
        return Err(format!("n{i} replayed differently"));
    }
    if let Some(i) = (0..u).find(|&i| !is_prefix(&before[i], &replay)) {
        return Err(format!("n{i}'s deliveries are not a prefix of the replay"));
    }
    // The partition heals; the operator restarts the stopped members only (1–3 run on).
    l.sim.heal();
    for &i in &dead {
        l.restart_member(i);
    }
    let all: Vec<usize> = (0..u).collect();
    together_and_carrying_on(&mut l, &all, replay.len(), "every node")?;
    if let Some(&i) =
        (dead.iter()).find(|&&i| l.groups[i].as_ref().unwrap().gms().rejoined().is_none())
    {
        return Err(format!("n{i} did not join again by transfer"));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(caught_up)
}

/// [`two_promises_behind_the_dead_branch`] over 3 seeds (`SQUALL_SEEDS`): 4 holds its promise
/// against 0's join decision because 2's row shows a decision ranked above it, and the dead
/// view is never restarted beside the live one.
#[test]
fn a_member_that_promised_a_later_undecided_ballot_does_not_restart_the_dead_view() {
    check_seeds("restart_dead_branch_two_promises", 3, |seed| {
        if two_promises_behind_the_dead_branch(seed)? {
            return Err("n4 caught up into the dead view 1".into());
        }
        Ok(())
    });
}

/// [`dead_branch_cut_off`] with four joiners and 1 on the live side: 0 and the joiners are five
/// of the dead view's nine members, a majority without any member of the live view 1 (1–4).
/// They restart the dead view alone and install view 2 = [0, 5, 6, 7, 8] while 1–4 install view
/// 2 = [1, 2, 3, 4] (sixty-fourth part of `docs/MEMBERSHIP.md`: the cause is the restart of view
/// 0 in life 1, which fitted the join decision with a majority of view 0 alone). Since s25
/// (sixty-fifth part; withdrawn at the s25 merge, restored in s26, sixty-sixth part) that
/// restart needs a majority of the adopted view 1 too: 1–4, four of
/// nine, stop with [`StopReason::RestartShortOfAdopted`] naming 0 and the joiners, no live
/// branch is made, and the operator's restart of every node ends in one group
/// ([`all_restarted_after_a_short_stop`]).
#[test]
fn a_dead_branch_whose_own_members_are_a_majority_of_the_dead_view_restarts_it_alone() {
    check_seeds("restart_dead_branch_alone", 3, |seed| {
        let c = dead_branch_cut_off(seed, &[N, N + 1, N + 2, N + 3], &[1, 2, 3, 4])?;
        if !c.short {
            return Err(format!("life 1's restart did not stop short: {c:?}"));
        }
        Ok(())
    });
}

/// s26 (sixty-sixth part of `docs/MEMBERSHIP.md`): the stall that withdrew fix B at the s25
/// merge (`threaded_restart`'s total restart of all at seed 2), made deterministic. Life 0:
/// five members deliver; 4, then 3, then 2 crash (each log kept as it was), and the
/// survivors go through views 1 = 0–3, 2 = 0–2 and 3 = 0–1. Life 1: all five start from their
/// logs. 0 and 1 restart view 3; 2, 3 and 4, whose logs end one or more views behind, ask to
/// join again, and the restart's inspector admits them in its own decision (`wanted`). Where
/// that decision admits two or more of them, the restart view (0 and 1) is no majority of the
/// decision's next view; the adopted-decision rule (`adoption_short`) must not be applied to
/// the decision of the ballot being run, which is installed as it is, never fitted. Before
/// the fix both 0 and 1 stopped with `StopReason::RestartShortOfAdopted` naming the joiners,
/// as soon as the decision was logged. Checked: all five end active in one running view,
/// delivering identically, with every life-0 delivery a prefix and no view id run with two
/// member lists. The moment: the restart view (view 4) names at least two of the joiners.
fn restart_admitting_rejoiners(seed: u64) -> Result<Moment, String> {
    let base = dir("restart-admits-rejoiners", seed);
    let all: Vec<usize> = (0..N).collect();
    let (logs, before) = three_crashes(seed, &base)?;
    let mut l = Life::start(seed + 1000, &base, &logs, &all, 1);
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &all, replayed, "every node")?;
    if let Some(i) = (0..N).find(|&i| !is_prefix(&before[i], &l.delivered[0])) {
        return Err(format!("n{i}'s life-0 deliveries are not a prefix of n0's"));
    }
    let admitted = (l.running.get(&4)).map_or(0, |(_, m)| m.iter().filter(|n| n.0 >= 2).count());
    let _ = std::fs::remove_dir_all(&base);
    Ok(if admitted >= 2 {
        Moment::Reached
    } else {
        Moment::Missed
    })
}

/// Life 0 of [`restart_admitting_rejoiners`]: five members deliver; 4, then 3, then 2 crash
/// (each log kept as it was) and the survivors install views 1 = 0–3, 2 = 0–2 and 3 = 0–1.
/// Returns every member's log and what each delivered.
fn three_crashes(seed: u64, base: &Path) -> Result<(Vec<Vec<u8>>, Vec<Seq>), String> {
    crashes_in_turn(seed, base, &[4, 3, 2])
}

/// [`three_crashes`] with the members of `victims` crashing one after the other (each a
/// member of the views before, the highest first): the survivors install view `k` after the
/// `k`-th crash.
fn crashes_in_turn(
    seed: u64,
    base: &Path,
    victims: &[usize],
) -> Result<(Vec<Vec<u8>>, Vec<Seq>), String> {
    let all: Vec<usize> = (0..N).collect();
    let mut l = Life::start(seed, base, &vec![Vec::new(); N], &all, 0);
    for _ in 0..300 {
        l.step(true);
    }
    for (k, &victim) in victims.iter().enumerate() {
        if let Some(g) = l.groups[victim].take() {
            l.logs[victim] = g.gms().log().bytes().to_vec();
        }
        l.sim.crash(NodeId(victim as u32));
        let want = k as u64 + 1;
        let t0 = l.sim.now();
        while !(0..victim).all(|i| {
            l.groups[i]
                .as_ref()
                .is_some_and(|g| g.view().is_some_and(|v| v.id == want) && g.is_active())
        }) {
            if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
                return Err(format!("life 0: view {want} not installed: {}", l.state()));
            }
            l.step(true);
        }
        for _ in 0..100 {
            l.step(true);
        }
    }
    Ok(l.shutdown())
}

/// s26 (sixty-sixth part of `docs/MEMBERSHIP.md`): [`restart_admitting_rejoiners`] with a
/// crash inside the restart. Life 1 runs until 0, the inspector, logged its ballot's decision
/// `D` admitting two or more of 2, 3 and 4 (it decided; 1 has not logged it, nobody installed
/// view 4), then every process stops; the logs lose any `Installed { 4 }` and 1's any copy of
/// `D` (it crashed before it echoed). Life 2: all five start. 0 leads a new ballot and adopts
/// `D`; fitted (joins dropped) its restart view 0–1 is no majority of `D`'s next view. But `D`
/// cannot have been installed: 1, restarting and wedged in view 3, holds no decision ranked
/// as high and has promised the new ballot, and without it no majority of view 3 is left
/// (`Gms::may_have_installed`), so the s18 rule applies and the restart completes. Without
/// that, 0 and 1 stopped with `StopReason::RestartShortOfAdopted` naming 2–4, who run as
/// nodes asking to join: a stop no operator restart ends (seed 5), or 0 stopped alone while
/// 1, following 0's earlier ballot, installed `D`'s view. Checked: no view id run with two
/// member lists; every node that stopped is restarted from its log once (as an operator
/// would), and all five then end active in one running view, delivering identically.
fn refit_of_a_ballot_admitting_rejoiners(seed: u64) -> Result<Moment, String> {
    refit_rejoiners(seed, false)
}

/// [`refit_of_a_ballot_admitting_rejoiners`]; with `unstopped`, a node found stopped at the
/// operator's step fails it (s27, seventy-sixth part of `docs/MEMBERSHIP.md`).
fn refit_rejoiners(seed: u64, unstopped: bool) -> Result<Moment, String> {
    let base = dir("refit-rejoiners", seed);
    let all: Vec<usize> = (0..N).collect();
    let (logs, before) = three_crashes(seed, &base)?;
    let mut l = Life::start(seed + 1000, &base, &logs, &all, 1);
    let t0 = l.sim.now();
    let decided = |l: &Life| {
        l.groups[0].as_ref().is_some_and(|g| {
            let (_, rec) = MemLog::open(g.gms().log().bytes().to_vec());
            rec.records.iter().any(|r| {
                matches!(r, Record::Decided { decision: d, .. }
                    if squall_membership::restart::attempt_of(d.rank) > 0
                        && d.changes.iter().filter(|c| c.node.0 >= 2).count() >= 2)
            })
        })
    };
    while !decided(&l) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Ok(Moment::Missed);
        }
        l.step(false);
    }
    let (mut logs, _) = l.shutdown();
    for (i, bytes) in logs.iter_mut().enumerate() {
        let (_, rec) = MemLog::open(bytes.clone());
        let mut log = MemLog::default();
        for r in &rec.records {
            let ballot = matches!(r, Record::Decided { decision: d, .. }
                if squall_membership::restart::attempt_of(d.rank) > 0);
            if matches!(r, Record::Installed { view: 4, .. }) || (i == 1 && ballot) {
                break;
            }
            log.append(r).unwrap();
        }
        *bytes = log.bytes().to_vec();
        let _ = std::fs::remove_file(config(&base, i, N).epoch_log(4).unwrap());
    }
    let mut l = Life::start(seed + 2000, &base, &logs, &all, 2);
    let t0 = l.sim.now();
    while l.sim.now().saturating_since(t0) < Duration::from_millis(20) {
        l.step(false);
    }
    for i in 0..N {
        if l.groups[i].as_ref().is_some_and(|g| g.stopped().is_some()) {
            if unstopped {
                return Err(format!(
                    "n{i} stopped before the operator's step: {}",
                    l.state()
                ));
            }
            l.restart_member(i);
        }
    }
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &all, replayed, "every node")?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(Moment::Reached)
}

#[test]
fn a_restart_refitting_an_earlier_ballot_that_admitted_rejoiners_no_one_installed_completes() {
    check_seeds_reaching(
        "refit_rejoiners",
        6,
        "the inspector's ballot decision admitting two or more rejoiners logged before the crash",
        refit_of_a_ballot_admitting_rejoiners,
    );
}

#[test]
fn a_total_restart_whose_ballot_admits_more_rejoiners_than_it_restarts_completes() {
    check_seeds_reaching(
        "restart_admits_rejoiners",
        3,
        "the restart view naming two or more members that joined again",
        restart_admitting_rejoiners,
    );
}

/// Whether `log` holds a decision for view `vid` admitting every node of `joiners`, of a
/// restart ballot (`ballot`) or an ordinary one.
fn logged_admitting(log: &[u8], vid: u64, joiners: &[usize], ballot: bool) -> bool {
    use squall_membership::change::ChangeKind;
    let (_, rec) = MemLog::open(log.to_vec());
    rec.records.iter().any(|r| {
        matches!(r, Record::Decided { decision: d, .. }
            if d.trim.view == vid
                && (squall_membership::restart::attempt_of(d.rank) > 0) == ballot
                && joiners.iter().all(|&j| (d.changes.iter())
                    .any(|c| c.node.0 as usize == j && c.kind == ChangeKind::Join)))
    })
}

/// `logs` with every record from `Installed { vid }` on cut, and every epoch log of view `vid`
/// removed: each member crashed after logging the decision for `vid - 1`, before logging the
/// view it makes.
fn cut_installed(logs: &mut [Vec<u8>], base: &Path, vid: u64, u: usize) {
    for (i, bytes) in logs.iter_mut().enumerate() {
        let (_, rec) = MemLog::open(bytes.clone());
        let mut log = MemLog::default();
        for r in (rec.records.iter())
            .take_while(|r| !matches!(r, Record::Installed { view, .. } if *view == vid))
        {
            log.append(r).unwrap();
        }
        *bytes = log.bytes().to_vec();
        let _ = std::fs::remove_file(config(base, i, u).epoch_log(vid).unwrap());
    }
}

/// Steps `l` until 0 and 1 both logged the view-2 ballot decision admitting 3 and 4; false if
/// that takes more than 50 ms of virtual time (the seed misses the moment).
fn until_0_and_1_log_the_ballot_admitting_3_and_4(l: &mut Life) -> bool {
    let t0 = l.sim.now();
    let held = |l: &Life, i: usize| {
        (l.groups[i].as_ref())
            .is_some_and(|g| logged_admitting(g.gms().log().bytes(), 2, &[3, 4], true))
    };
    while !(held(l, 0) && held(l, 1)) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return false;
        }
        l.step(false);
    }
    true
}

/// s26 review, D1 (sixty-sixth part of `docs/MEMBERSHIP.md`, "s26 follow-up: review
/// findings"): a restart ballot's decision admitting rejoiners, interrupted once. Life 0: five
/// members deliver; 4, then 3 crash (views 1 = 0–3, 2 = 0–2). Life 1: 0, 1, 3 and 4 start, 2
/// stays down; 3 and 4, whose logs end behind, ask to join again; 0 counts 2 out and leads a
/// ballot deciding `D` = [Fail 2, Join 3, Join 4] (next view 0, 1, 3, 4). The life stops once
/// 0 and 1 logged `D`, and every `Installed { 3 }` is cut (nobody installed it). Life 2: the
/// same four start. 0 leads a new ballot and adopts `D`, which may have been installed (0 and
/// 1, a majority of view 2, hold it): fitted (joins dropped) its restart view 0–1 is two of
/// `D`'s four. Before the fix 0 and 1 stopped with `StopReason::RestartShortOfAdopted` naming
/// 3 and 4, in this life and every later one (3 and 4 run as nodes asking to join, which no
/// fitted restart view names). Now every member of `D`'s next view is here (0 and 1
/// restarted, 3 and 4 linked outsiders asking to join), so the inspector decides `D`'s changes
/// unchanged under its ballot (`Gms::adopted_whole_here`). Checked: the four end active in one
/// running view, delivering identically; no view id run with two member lists; every life-0
/// delivery a prefix of 0's replay. The moment: life 1 logged `D` at 0 and 1.
fn rejoiners_decided_then_interrupted(seed: u64) -> Result<Moment, String> {
    let base = dir("rejoiners-interrupted", seed);
    let four = [0, 1, 3, 4];
    let (logs, before) = crashes_in_turn(seed, &base, &[4, 3])?;
    let mut l = Life::start(seed + 1000, &base, &logs, &four, 1);
    if !until_0_and_1_log_the_ballot_admitting_3_and_4(&mut l) {
        return Ok(Moment::Missed);
    }
    let (mut logs, _) = l.shutdown();
    cut_installed(&mut logs, &base, 3, N);
    let mut l = Life::start(seed + 2000, &base, &logs, &four, 2);
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &four, replayed, "0, 1, 3 and 4")?;
    if let Some(i) = (0..N).find(|&i| !is_prefix(&before[i], &l.delivered[0])) {
        return Err(format!("n{i}'s life-0 deliveries are not a prefix of n0's"));
    }
    // `D` decided unchanged: view 3 is its next view.
    let mut view_3 = l
        .running
        .get(&3)
        .map(|(_, m)| m.clone())
        .unwrap_or_default();
    view_3.sort();
    if view_3 != four.map(|i| NodeId(i as u32)) {
        return Err(format!(
            "view 3 is not D's next view 0, 1, 3, 4: {view_3:?}"
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(Moment::Reached)
}

#[test]
fn a_restart_adopting_an_interrupted_ballot_that_admitted_rejoiners_completes_with_them() {
    check_seeds_reaching(
        "rejoiners_interrupted",
        3,
        "the ballot decision admitting 3 and 4 logged at 0 and 1",
        rejoiners_decided_then_interrupted,
    );
}

/// s26 review, R1 (sixty-sixth part of `docs/MEMBERSHIP.md`, "s26 follow-up: review
/// findings"): the stop check and the inspector disagreed where a holder of the adopted ballot
/// decision is counted out. Lives 0 and 1 as in [`rejoiners_decided_then_interrupted`], with 2
/// up in life 1 too: 0's ballot decides `D` admitting 3 and 4, and the life stops once 0 and 1
/// logged it. Log surgery: every `Installed { 3 }` cut; 2 loses `D` and promises a later
/// ballot (`Record::Promised`, led by 1; nobody decides). Life 2: 0, 2, 3 and 4 start, 1 stays
/// down. 0 counts 1 out; `D` may have been installed (0 and 1, a majority of view 2, hold it),
/// so the inspector waits under fix B (the restart view 0, 2 is no majority of `D`'s next
/// view). Before the fix the stop check saw only 0 holding `D`, applied the s18 rule and never
/// stopped: a silent wait. Now it counts the counted-out 1 with the holders, and 0 and 2 stop
/// with `StopReason::RestartShortOfAdopted` naming 1, 3 and 4. Then every node is started (the
/// stopped ones restarted from their logs, 1 from its own): the four-member next view is all
/// here and the five end in one running view. Checked: no view id run with two member lists.
fn counted_out_holder(seed: u64) -> Result<Moment, String> {
    let base = dir("counted-out-holder", seed);
    let all: Vec<usize> = (0..N).collect();
    let (logs, _) = crashes_in_turn(seed, &base, &[4, 3])?;
    let mut l = Life::start(seed + 1000, &base, &logs, &all, 1);
    if !until_0_and_1_log_the_ballot_admitting_3_and_4(&mut l) {
        return Ok(Moment::Missed);
    }
    let (mut logs, _) = l.shutdown();
    cut_installed(&mut logs, &base, 3, N);
    let (_, rec) = MemLog::open(logs[2].clone());
    let mut log = MemLog::default();
    let mut top = 0;
    for r in &rec.records {
        if let Record::Decided { decision: d, .. } = r
            && squall_membership::restart::attempt_of(d.rank) > 0
            && d.trim.view == 2
        {
            top = top.max(d.rank);
            continue;
        }
        if let Record::Promised { view: 2, rank } = r {
            top = top.max(*rank);
        }
        log.append(r).unwrap();
    }
    let later =
        squall_membership::restart::ballot(squall_membership::restart::attempt_of(top) + 1, 1);
    log.append(&Record::Promised {
        view: 2,
        rank: later,
    })
    .unwrap();
    logs[2] = log.bytes().to_vec();
    let up = [0, 2, 3, 4];
    let mut l = Life::start(seed + 2000, &base, &logs, &up, 2);
    let t0 = l.sim.now();
    let named = |l: &Life, i: usize| {
        l.groups[i].as_ref().is_some_and(|g| {
            matches!(g.gms().stopped(), Some(StopReason::RestartShortOfAdopted { view: 2, start, .. })
                if start.contains(&NodeId(1)))
        })
    };
    while !(named(&l, 0) && named(&l, 2)) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(30) {
            return Err(format!(
                "0 and 2 did not stop naming 1 within 30ms: {}",
                l.state()
            ));
        }
        l.step(false);
    }
    if let Some(d) = &l.disagreement {
        return Err(format!("virtual synchrony: {d}"));
    }
    let (logs, _) = l.shutdown();
    let mut l = Life::start(seed + 3000, &base, &logs, &all, 3);
    together_and_carrying_on(&mut l, &all, 0, "every node")?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(Moment::Reached)
}

#[test]
fn a_restart_whose_adopted_ballot_decision_a_counted_out_member_holds_stops_naming_it() {
    check_seeds_reaching(
        "counted_out_holder",
        3,
        "the ballot decision admitting 3 and 4 logged at 0 and 1",
        counted_out_holder,
    );
}

/// s26 review, D2 (sixty-sixth part of `docs/MEMBERSHIP.md`, "s26 follow-up: review
/// findings"): an ordinary join decision logged by every member and installed by nobody, its
/// joiners as many as the members. Life 0: view 0 = 0–4; 5–9 ask to join in the same round;
/// the life stops once 0–4 all logged the decision admitting the five (every `Installed { 1 }`
/// cut, the joiners' logs emptied: they never installed). Life 1: all ten start, the joiners
/// asking to join again. 0–4 restart view 0 and adopt the decision; fitted (joins dropped) the
/// restart view 0–4 is five of ten. Before the fix every member stopped with
/// `StopReason::RestartShortOfAdopted` naming 5–9, which, outsiders with empty logs, no fitted
/// restart view names: the stop's operator action could not complete. Now the decision is
/// adopted unchanged (every member of its next view is here). Checked: all ten end active in
/// one running view, delivering identically; no view id run with two member lists; life 0's
/// deliveries of 0–4 a prefix of 0's replay.
fn join_logged_installed_by_nobody(seed: u64) -> Result<Moment, String> {
    const U: usize = 2 * N;
    let base = dir("join-installed-by-nobody", seed);
    let all: Vec<usize> = (0..U).collect();
    let joiners: Vec<usize> = (N..U).collect();
    let mut l = Life::start_in(seed, &base, &vec![Vec::new(); U], &all, 0, U);
    for _ in 0..600 {
        l.step(true);
    }
    for &j in &joiners {
        l.groups[j].as_mut().unwrap().join().unwrap();
    }
    let held = |l: &Life, i: usize| {
        (l.groups[i].as_ref())
            .is_some_and(|g| logged_admitting(g.gms().log().bytes(), 0, &joiners, false))
    };
    let t0 = l.sim.now();
    while !(0..N).all(|i| held(&l, i)) {
        let installed = (0..U)
            .any(|i| (l.groups[i].as_ref()).is_some_and(|g| g.view().is_some_and(|v| v.id > 0)));
        if installed || l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Ok(Moment::Missed);
        }
        l.step(true);
    }
    let (mut logs, before) = l.shutdown();
    cut_installed(&mut logs, &base, 1, U);
    for &j in &joiners {
        logs[j].clear();
    }
    let mut l = Life::start_in(seed + 1000, &base, &logs, &all, 1, U);
    for &j in &joiners {
        l.groups[j].as_mut().unwrap().join().unwrap();
    }
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &all, replayed, "every node")?;
    if let Some(i) = (0..N).find(|&i| !is_prefix(&before[i], &l.delivered[0])) {
        return Err(format!("n{i}'s life-0 deliveries are not a prefix of n0's"));
    }
    // The decision adopted unchanged: view 1 names all ten.
    let view_1 = l.running.get(&1).map_or(0, |(_, m)| m.len());
    if view_1 != U {
        return Err(format!("view 1 does not name all ten: {view_1} members"));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(Moment::Reached)
}

#[test]
fn a_restart_adopting_a_join_no_one_installed_with_as_many_joiners_as_members_completes() {
    check_seeds_reaching(
        "join_installed_by_nobody",
        3,
        "0–4 logging one decision admitting 5–9 before anyone installed view 1",
        join_logged_installed_by_nobody,
    );
}

#[test]
fn a_member_restarting_a_view_number_installed_again_without_it_joins_again() {
    check_seeds("restart_dead_branch", 3, |seed| {
        dead_branch(seed, DeadBranch::WithTheOthers)
    });
}

#[test]
fn a_member_one_view_behind_a_view_number_installed_again_without_it_joins_again() {
    check_seeds("restart_dead_branch_late", 3, |seed| {
        dead_branch(seed, DeadBranch::AfterTheyRun)
    });
}

/// The read buffer of the restarts in `logs_much_larger_than_the_read_buffer` (bytes): at
/// least one record (at most 8 + 28 + 96 bytes here), far below the logs' sizes.
const SMALL_BUFFER: usize = 256;

/// The epoch logs are read in slices (issue 6): five members deliver long enough that each
/// one's epoch logs hold hundreds of times `SMALL_BUFFER`, all stop, and all restart with
/// `replay_buffer` = `SMALL_BUFFER` and `replay_batch` = 8. Every member must replay the same
/// sequence, of which everything delivered before is a prefix, carry on identically, and never
/// have held more than `SMALL_BUFFER` bytes of log at once (`GroupStats::replay_peak_buffer`,
/// the largest buffer of its skims and its replay's readers); the replay must have gone out
/// over at least `replayed / 8` polls. Mutation: the replay reading each log whole (a reader
/// buffer of the file's size in `ReplayStream::pull`) fails the peak check.
fn logs_much_larger_than_the_read_buffer(seed: u64) {
    let base = dir("slices", seed);
    let (logs, before) = first_life(seed, &base, 6000);
    let bytes: u64 = (std::fs::read_dir(base.join("n0")).unwrap())
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    assert!(
        bytes >= 100 * SMALL_BUFFER as u64,
        "seed {seed}: n0's epoch logs hold only {bytes} bytes"
    );
    let all = [0, 1, 2, 3, 4];
    let mut l = Life::start_in(seed + 1000, &base, &logs, &[], 1, N);
    l.batch = Some(8);
    l.buffer = Some(SMALL_BUFFER);
    for i in all {
        l.start_late(i);
    }
    restart_and_carry_on(&mut l, &before, &all, Duration::from_millis(50));
    for i in all {
        let stats = l.groups[i].as_ref().unwrap().stats();
        assert!(
            stats.replayed > 0 && stats.replay_peak_buffer > 0,
            "seed {seed}: n{i} replayed nothing"
        );
        assert!(
            stats.replay_peak_buffer <= SMALL_BUFFER as u64,
            "seed {seed}: n{i} held {} bytes of log at once (buffer {SMALL_BUFFER}, logs {bytes} bytes)",
            stats.replay_peak_buffer
        );
        assert!(
            stats.replay_polls >= stats.replayed / 8,
            "seed {seed}: n{i} replayed {} in {} polls",
            stats.replayed,
            stats.replay_polls
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_restart_with_logs_much_larger_than_the_read_buffer_replays_identically_within_it() {
    each_seed("restart_slices", 2, logs_much_larger_than_the_read_buffer);
}

/// A corrupt record in the middle of a member's last epoch log (a flipped payload byte: bit
/// rot, not a crash), before the index entry the skim at creation starts from (entries of
/// synced records every 64 bytes), is not seen by that skim, so the member publishes its
/// whole log's counts; its replay then meets the record
/// below the trim and must stop with `GroupError::ReplayLog`, having handed out only the
/// gap-free prefix before it (never a gap, never what followed the replay). Mutation: the
/// replay stream ignoring the reader's tail (treating the corrupt record as the log's end)
/// fails it: the member then stops on the end-position check instead ("replaying the epoch log
/// of view 0: position 948 where 1896 was expected", seed 0), not naming the checksum.
fn corrupt_record_mid_log(seed: u64) {
    let base = dir("corrupt", seed);
    let (logs, before) = first_life(seed, &base, 1500);
    // n1's last view's epoch log: flip the last payload byte of its middle record.
    let victim = 1;
    let mut files: Vec<PathBuf> = (std::fs::read_dir(base.join(format!("n{victim}"))).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    let path = files.last().unwrap().clone();
    let mut bytes = std::fs::read(&path).unwrap();
    let records = squall_round_robin::log::decode(&bytes).records;
    assert!(
        records.len() >= 20,
        "seed {seed}: {} records",
        records.len()
    );
    let k = records.len() / 2;
    let frame = |r: &squall_round_robin::log::Record| {
        squall_round_robin::log::FRAME + squall_round_robin::log::BODY_HEADER + r.payload.len()
    };
    let at = squall_round_robin::log::MAGIC.len() + records[..k].iter().map(frame).sum::<usize>();
    // The log synced, with an index of synced entries every 64 bytes (as a compaction or
    // `Log::open`'s rebuild leaves it): the damage lies before where the skim starts, so only
    // the replay reads it. (Without such an entry past it, a `Never` log's skim now verifies
    // the record and cuts the log there as a torn unsynced write: nothing proves it synced.)
    let index = squall_round_robin::log::rebuild_index(std::io::Cursor::new(&bytes), 64).unwrap();
    std::fs::write(squall_round_robin::log::index_path(&path), index).unwrap();
    bytes[at + frame(&records[k]) - 1] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    let mut l = Life::start(seed + 1000, &base, &logs, &[0, 1, 2, 3, 4], 1);
    l.batch = Some(8);
    let t0 = l.sim.now();
    let stopped = |l: &Life| {
        (l.groups[victim].as_ref())
            .and_then(|g| g.stopped().map(str::to_string))
            .filter(|s| s.contains("replaying the epoch log"))
    };
    while stopped(&l).is_none() {
        assert!(
            l.sim.now().saturating_since(t0) < Duration::from_millis(50),
            "seed {seed}: n{victim} did not stop on its corrupt record: {}",
            l.state()
        );
        l.step(false);
    }
    let why = stopped(&l).unwrap();
    assert!(why.contains("checksum"), "seed {seed}: {why}");
    // It handed out the records before the corrupt one, gap-free (the harness checks the
    // positions), and nothing of the restart view.
    let got = &l.delivered[victim];
    assert_eq!(
        got.last().map(|d| d.0),
        Some(records[k - 1].position),
        "seed {seed}: n{victim} handed out up to the corrupt record"
    );
    for b in &before {
        let n = b.len().min(got.len());
        assert_eq!(
            &b[..n],
            &got[..n],
            "seed {seed}: replay differs from what was delivered"
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_corrupt_record_mid_log_stops_the_replay_without_a_gap() {
    each_seed("restart_corrupt_mid_log", 2, corrupt_record_mid_log);
}

/// When the member absent from the restart starts again (see [`absent_rejoins`]).
#[derive(Clone, Copy, Debug)]
enum Start {
    /// This long after the restart began (all of them after the absent members' timeout).
    At(Duration),
    /// The moment the first restarted member installed the restart view (its replay, handed
    /// out in small batches, still under way).
    RestartView,
    /// The moment every restarted member handed out its whole replay.
    AfterReplay,
    /// The moment the first restarted member delivered a message of the new view.
    FirstDelivery,
}

/// Issue 6 (`tcp_restart::a_member_declared_failed_while_absent_from_a_restart_starts_later_joins_and_catches_up`,
/// which stalled in 2 of about 90 TCP runs), on the simulator: five members deliver, all stop;
/// a bare majority (0, 1, 2) restarts, 3 and 4 absent; the restart view is the three (after
/// the absent members' timeout, which suspects 3 and 4). Member 3 then starts as a new
/// process (new incarnation, fresh log, `Group::joining`) at `start`; it must be readmitted,
/// take the state by transfer and deliver what the others deliver. Checked: the three replay
/// identically (everything delivered before a prefix), then all four end in one running view,
/// active, and deliver identically with new messages of everyone.
fn absent_rejoins(seed: u64, start: Start) -> Result<(), String> {
    absent_rejoins_with(seed, start, None).map(drop)
}

/// [`absent_rejoins`], where member `slow`'s link to the new process comes up late, as it did
/// at one member in the TCP run that stalled: its `PeerConnected` is held back until that
/// member holds a decision naming the joiner (the others readmitted it, and the leader
/// proposed its join), or for at most 1 ms (below the 1.5 ms suspicion timeout). Returns
/// whether the moment came: while the link was held, the leader n0 saw that member's published
/// suspicion of the row (what holds the join back since the fix), or that member held the
/// decision (as it did before the fix); always reached without a slow member. The end state is
/// checked either way.
fn absent_rejoins_with(seed: u64, start: Start, slow: Option<usize>) -> Result<Moment, String> {
    let base = dir(&format!("absent-rejoins-{start:?}"), seed);
    let (logs, before) = first_life(seed, &base, 1500);
    let up = [0, 1, 2];
    let late = 3;
    // Every node late, then the three started at once: the groups are created with a small
    // replay batch, so the replay lasts several polls.
    let mut l = Life::start(seed + 1000, &base, &logs, &[], 1);
    l.batch = Some(4);
    for &i in &up {
        l.start_late(i);
    }
    let t0 = l.sim.now();
    let limit = Duration::from_millis(50);
    let mut started = false;
    let mut first_delivery: Vec<usize> = vec![0; N];
    while !started {
        if l.sim.now().saturating_since(t0) > limit {
            return Err(format!("{start:?} never came: {}", l.state()));
        }
        started = match start {
            Start::At(d) => l.sim.now().saturating_since(t0) >= d,
            Start::RestartView => up
                .iter()
                .any(|&i| l.groups[i].as_ref().is_some_and(|g| g.epoch().is_some())),
            Start::AfterReplay => up.iter().all(|&i| l.restarted(i)),
            Start::FirstDelivery => up
                .iter()
                .any(|&i| l.restarted(i) && l.delivered[i].len() > first_delivery[i]),
        };
        if started {
            break;
        }
        for &i in &up {
            if !l.restarted(i) {
                first_delivery[i] = l.delivered[i].len();
            }
        }
        l.step(!matches!(
            start,
            Start::At(_) | Start::RestartView | Start::AfterReplay
        ));
    }
    if let Some(k) = slow {
        l.held[k].set(Some(NodeId(late as u32)));
    }
    l.rejoin_fresh(late);
    let t1 = l.sim.now();
    let mut moment = Moment::Reached;
    if let Some(k) = slow {
        let names = |l: &Life| {
            (l.groups[k].as_ref())
                .and_then(|g| g.gms().decision())
                .is_some_and(|d| d.changes.iter().any(|c| c.node == NodeId(late as u32)))
        };
        // The moment: while `k`'s link is held, the leader n0 sees `k`'s published suspicion
        // of the row (the old incarnation's), which is what holds the join back since the fix
        // (without it the leader proposes the join and `k` holds that decision).
        let published = |l: &Life| {
            (l.groups[0].as_ref()).is_some_and(|g| {
                let sst = g.gms().sst();
                let flags = sst.schema().suspected();
                let (Some(r), Some(row)) = (
                    sst.row_of(NodeId(k as u32)),
                    sst.row_of(NodeId(late as u32)),
                ) else {
                    return false;
                };
                sst.get_at(r, flags, row).unwrap_or(0) != 0
            })
        };
        let mut seen = false;
        while !names(&l) && l.sim.now().saturating_since(t1) < Duration::from_millis(1) {
            l.step(false);
            seen |= published(&l);
        }
        if !seen && !names(&l) {
            eprintln!(
                "seed {seed}: n0 never saw n{k}'s published suspicion of n{late} within the hold"
            );
            moment = Moment::Missed;
        }
        l.held[k].set(None);
    }
    while !up.iter().all(|&i| l.restarted(i)) {
        if l.sim.now().saturating_since(t1) > limit {
            return Err(format!("the restart did not complete: {}", l.state()));
        }
        l.step(false);
    }
    let replay = l.delivered[0].clone();
    if let Some(i) = up
        .iter()
        .find(|&&i| !is_prefix(&replay, &l.delivered[i]) && !is_prefix(&l.delivered[i], &replay))
    {
        return Err(format!("n{i} replayed differently"));
    }
    if let Some(i) = (0..N).find(|&i| !is_prefix(&before[i], &l.delivered[0])) {
        return Err(format!("n{i}'s deliveries are not a prefix of the replay"));
    }
    together_and_carrying_on(&mut l, &[0, 1, 2, late], replay.len(), "the absent member")?;
    if !delivered_own(&l, late, 1, 0) {
        return Err("the absent member delivered nothing of its own".into());
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(moment)
}

#[test]
fn a_member_absent_from_a_restart_that_starts_later_as_a_new_process_joins_and_catches_up() {
    let starts = [
        Start::At(ABSENT + Duration::from_micros(200)),
        Start::At(ABSENT + Duration::from_micros(700)),
        Start::At(ABSENT + Duration::from_micros(1500)),
        Start::RestartView,
        Start::AfterReplay,
        Start::FirstDelivery,
    ];
    for s in starts {
        check_seeds(&format!("restart_absent_rejoins_{s:?}"), 2, |seed| {
            absent_rejoins(seed, s)
        });
    }
}

/// The stall `tcp_restart`'s absent-member test hit (2 of about 90 runs; reproduced with
/// `MP_LOGDIR`): member 2's link to the new process came up after the leader had readmitted it
/// and proposed its join. Member 2 then held the new incarnation pending, and a member does
/// not readmit while a proposal or decision names the node, so it installed view 2 with the
/// joiner's row suspected; its new epoch counted the joiner failed from the start and the
/// view delivered nothing, the joiner waiting for a state nobody sent. Fixed: the leader
/// proposes a restarted incarnation's join only once every member that suspected the earlier
/// incarnation readmitted it (`Gms::readmission_pending`). Fails without the fix ("the
/// absent member did not come into the running view within 50ms").
#[test]
fn regression_a_member_whose_link_to_the_new_process_comes_up_late_readmits_it_before_its_join() {
    check_seeds_reaching(
        "restart_absent_rejoins_late_link",
        3,
        "n0 seeing n2's published suspicion of n3 while n2's link to the new n3 is held",
        |seed| absent_rejoins_with(seed, Start::FirstDelivery, Some(2)),
    );
}

/// When the held-back link to the new process comes up at the slow member (see
/// [`crash_rejoin_late_link`]).
#[derive(Clone, Copy, Debug)]
enum LinkUp {
    /// Once it holds the decision that adds the node (before it installs the view).
    AtDecision,
    /// Once it installed the view that adds the node (its epoch of that view has started).
    AtInstall,
    /// That long after it installed that view.
    AfterInstall(Duration),
}

/// Member `x` of a running group crashes and starts at once as a new process under its id
/// (new incarnation, fresh log, `Group::joining`), while member `k`'s link to the new process
/// is held back (see [`Gate`]) until `up` (at most 1 ms after the restart). The others detect
/// the crash through the transport: a suspicion of a lower-ranked member they detect
/// themselves is published only after two heartbeats (50 µs each here), and `k` ranks above
/// `x`, so `k`'s suspicion is not yet published when the others, having removed the old
/// incarnation and readmitted the new one, decide its join: the leader's
/// `readmission_pending` cannot see that `k` still suspects it. Checked: `k` holds the
/// decision (resp. installs the view) while its link is still held (the scenario reached the
/// gap: [`Moment::Reached`], else [`Moment::Missed`] once the hold ran out), then all five end
/// in one running view, active, delivering identically, with messages of the new incarnation.
fn crash_rejoin_late_link(seed: u64, x: usize, k: usize, up: LinkUp) -> Result<Moment, String> {
    let base = dir(&format!("crash-rejoin-late-link-{x}-{k}-{up:?}"), seed);
    let all = [0, 1, 2, 3, 4];
    let mut l = Life::start(seed, &base, &vec![Vec::new(); N], &all, 0);
    for _ in 0..1500 {
        l.step(true);
    }
    l.held[k].set(Some(NodeId(x as u32)));
    l.rejoin_fresh(x);
    let t1 = l.sim.now();
    let v0 = (l.groups[k].as_ref().and_then(|g| g.view())).map_or(0, |v| v.id);
    let node = NodeId(x as u32);
    // The decision or view after the one removing the old incarnation that names the node.
    let reached = |l: &Life| {
        let g = l.groups[k].as_ref().unwrap();
        match up {
            LinkUp::AtDecision => g.gms().decision().is_some_and(|d| {
                g.view().is_some_and(|v| v.id > v0)
                    && d.changes.iter().any(|c| c.node == node && !c.removes())
            }),
            _ => g.view().is_some_and(|v| v.id >= v0 + 2 && v.contains(node)),
        }
    };
    let hold = Duration::from_millis(1);
    while !reached(&l) && l.sim.now().saturating_since(t1) < hold {
        l.step(true);
    }
    let moment = if reached(&l) {
        Moment::Reached
    } else {
        eprintln!(
            "seed {seed}: n{k} never reached {up:?} with its link held: {}",
            l.state()
        );
        Moment::Missed
    };
    if let (Moment::Reached, LinkUp::AfterInstall(d)) = (moment, up) {
        let t2 = l.sim.now();
        while l.sim.now().saturating_since(t2) < d {
            l.step(true);
        }
    }
    l.held[k].set(None);
    let before = l.delivered[k].len();
    together_and_carrying_on(&mut l, &all, before, "the restarted member")?;
    // From `before` on, past the view that removed the old incarnation: the new one's.
    if !delivered_own(&l, x, 0, before as u64) {
        return Err("the restarted member delivered nothing of its own".into());
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(moment)
}

/// Issue 6, the two rejoin gaps s17 left (docs/MEMBERSHIP.md, "A view that names an
/// incarnation not linked here yet"): a member whose suspicion of the old incarnation was
/// never published (deferred) and whose link to the new process comes up only once it holds
/// the decision adding it, or installed the view (its epoch started), or 400 µs later. Before
/// the fix it installed the view with the row suspected, its epoch counted the new member
/// failed from the start, and the view delivered nothing ("the restarted member did not come
/// into the running view within 50ms", every seed and pair). Now the member installing a
/// view that names an incarnation the leader readmitted waits for exactly that incarnation's
/// link (`Gms::expected_incarnation`, `RoundRobin::expect_incarnation`).
///
/// Each case must reach its moment (the slow member holds the decision, resp. installed the
/// view, with its link still held) at both default seeds; a soak (`SQUALL_SEEDS`) skips and
/// counts seeds that miss it (since s20's first-start hold, case `(0, 4, AtDecision)` misses
/// it at seed 4) and fails if fewer than 2 reach it (`group_sim::check_seeds_reaching`).
/// Case `(1, 3, AtDecision)` was `(2, 3, AtDecision)` until s26: once a leader no longer
/// proposes an unheard row's join (sixty-eighth part of `docs/MEMBERSHIP.md`), that case missed
/// its moment at seeds 0 and 4 (of 0 to 5); `(1, 3, AtDecision)` reaches it at seeds 0 to 3.
#[test]
fn regression_a_member_whose_unpublished_suspicion_and_late_link_meet_the_new_incarnations_join() {
    let cases = [
        (0, 3, LinkUp::AtInstall),
        (1, 4, LinkUp::AtInstall),
        (1, 3, LinkUp::AtDecision),
        (0, 4, LinkUp::AtDecision),
        (0, 4, LinkUp::AfterInstall(Duration::from_micros(400))),
        (2, 3, LinkUp::AfterInstall(Duration::from_micros(400))),
    ];
    for (x, k, up) in cases {
        check_seeds_reaching(
            &format!("crash_rejoin_late_link_{x}_{k}_{up:?}"),
            2,
            &format!("n{k} at {up:?} with its link to the new n{x} held"),
            |seed| crash_rejoin_late_link(seed, x, k, up),
        );
    }
}

/// Issue 6, the unbounded wait s18 left (docs/MEMBERSHIP.md, "the restart's waits bounded"):
/// as in [`crash_rejoin_late_link`], member `x` crashes and starts at once as a new process and
/// member `k`'s link to it is held back, but now it never comes up at `k` (a one-way
/// partition: the new process links `k`, `k` never sees it). `k` installs the view that names
/// the new incarnation and waits for its link (`Gms::expected_incarnation`); after
/// `expected_link_timeout` it counts the member failed as it would a silent one, its
/// suspicion (naming that incarnation) spreads to the members linked to it, and the others
/// remove it. Checked: `k` reached the wait (its view names `x`, whose link it expects), the
/// wait lasted at least the bound, and then the four others end in one running view without
/// `x`, active, delivering identically (new messages included). Without the bound `k` waits
/// for good, the view delivers nothing more, and it fails ("did not come into ...").
///
/// `published` (s29, ninety-fourth part of `docs/MEMBERSHIP.md`): `k` ranks below `x`, so it
/// publishes its suspicion of the old incarnation at once, before the join is proposed, and
/// the leader's `readmission_pending` holds the join for `k`'s readmission, which never comes.
/// The leader proposes it once it has held it for `expected_link_timeout` (checked: its `warn`
/// saying so), and from there the case is the one above: `k` starts waiting within that hold
/// plus 2 ms of the crash (else within 2 ms). Without the bound the join waits for good and it
/// fails ("never waited for the new incarnation's link"). Not `published` (`k`'s suspicion
/// deferred), the hold happens only where the deferral ran out before the join was proposed
/// (the torn schedules, eighty-eighth part); torn, either order is checked with its own limit,
/// and untorn a hold past the bound is an error (the deferred path is the one checked).
fn crash_rejoin_link_never_up(
    seed: u64,
    x: usize,
    k: usize,
    published: bool,
) -> Result<(), String> {
    let held = EventLog::held_joins();
    let _guard = tracing::subscriber::set_default(held.clone());
    let base = dir(&format!("crash-rejoin-link-never-up-{x}-{k}"), seed);
    let all = [0, 1, 2, 3, 4];
    let mut l = Life::start(seed, &base, &vec![Vec::new(); N], &all, 0);
    for _ in 0..1500 {
        l.step(true);
    }
    let node = NodeId(x as u32);
    l.held[k].set(Some(node));
    l.rejoin_fresh(x);
    let t1 = l.sim.now();
    let waiting = |l: &Life| {
        let g = l.groups[k].as_ref().unwrap();
        g.view().is_some_and(|v| v.contains(node)) && g.gms().expected_incarnation(node).is_some()
    };
    // Past the hold (the leader's `readmission_pending` bound) the join is proposed and `k`
    // waits within 2 ms; without a hold, within 2 ms of the crash.
    while !waiting(&l) {
        if l.sim.now().saturating_since(t1) > EXPECTED_LINK + Duration::from_millis(2) {
            return Err(format!(
                "seed {seed}: n{k} never waited for the new incarnation's link: {}",
                l.state()
            ));
        }
        l.step(true);
    }
    let held_past_the_bound = !held.with(&[&format!("node=Some(NodeId({x}))")]).is_empty();
    if published && !held_past_the_bound {
        return Err(format!(
            "seed {seed}: the join of n{x}'s new incarnation was not held for n{k}'s readmission"
        ));
    }
    // Untorn, a deferred suspicion is never published before the join is proposed: the
    // deferred path must be the one taken (s29 follow-up of the ninety-fourth part).
    if !published && held_past_the_bound && !sim_config(seed).torn_writes {
        return Err(format!(
            "seed {seed}: the join of n{x}'s new incarnation was held for n{k}'s readmission \
             past the bound, untorn: n{k}'s suspicion was not deferred"
        ));
    }
    let within = Duration::from_millis(2)
        + if held_past_the_bound {
            EXPECTED_LINK
        } else {
            Duration::ZERO
        };
    let took = l.sim.now().saturating_since(t1);
    if took > within {
        return Err(format!(
            "seed {seed}: n{k} waited for the new incarnation's link only {took:?} after the \
             crash (held for a readmission past the bound: {held_past_the_bound})"
        ));
    }
    let t2 = l.sim.now();
    while l.groups[k]
        .as_ref()
        .unwrap()
        .gms()
        .expected_incarnation(node)
        .is_some()
    {
        if l.sim.now().saturating_since(t2) > Duration::from_millis(50) {
            return Err(format!(
                "seed {seed}: n{k} still waits for the link of n{x}'s new incarnation after 50ms: {}",
                l.state()
            ));
        }
        l.step(true);
    }
    let waited = l.sim.now().saturating_since(t2);
    if waited + STEP < EXPECTED_LINK {
        return Err(format!(
            "seed {seed}: n{k} stopped waiting after {waited:?}, before the bound"
        ));
    }
    let others: Vec<usize> = all.iter().copied().filter(|&i| i != x).collect();
    let t3 = l.sim.now();
    let limit = Duration::from_millis(50);
    let together = |l: &Life| {
        let views: Vec<Option<u64>> = (others.iter())
            .map(|&i| l.groups[i].as_ref().and_then(|g| g.view().map(|v| v.id)))
            .collect();
        views.iter().all(|v| *v == views[0])
            && others.iter().all(|&i| {
                l.groups[i].as_ref().is_some_and(|g| {
                    g.is_active()
                        && g.stopped().is_none()
                        && g.view().is_some_and(|v| !v.contains(node))
                })
            })
    };
    while !together(&l) {
        if l.sim.now().saturating_since(t3) > limit {
            return Err(format!(
                "seed {seed}: the others did not come into one running view without n{x} within {limit:?}: {}",
                l.state()
            ));
        }
        l.step(true);
    }
    let before = l.delivered[others[0]].len();
    for _ in 0..400 {
        l.step(true);
    }
    for _ in 0..2000 {
        l.step(false);
    }
    let after = &l.delivered[others[0]];
    if after.len() <= before {
        return Err(format!("seed {seed}: nothing new without n{x}"));
    }
    if let Some(&i) = others.iter().find(|&&i| &l.delivered[i] != after) {
        return Err(format!("seed {seed}: n{i} delivered differently"));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// See [`crash_rejoin_link_never_up`]: a member whose link to a restarted member's new
/// process never comes up stops waiting for it after `expected_link_timeout` and the group
/// goes on without it. Two `(x, k)` pairs, 2 seeds each; `k` ranks above `x`, so its suspicion
/// of the old incarnation is deferred and the leader's `readmission_pending` does not hold the
/// join back for it: untorn, the leader's `warn` that it proposed the join past that hold is
/// an error, so the test pins the deferred path (s29 follow-up of the ninety-fourth part;
/// before it, the test also passed through the hold, and so with the hold's bound reverted).
/// Torn, the deferral may run out before the join is proposed (eighty-eighth part); then the
/// join is held for `k`'s readmission up to the bound, and `k`'s wait is checked against the
/// bound plus 2 ms (with the bound reverted it fails torn at seed 0).
#[test]
fn a_member_whose_link_to_the_new_incarnation_never_comes_up_suspects_it_after_the_bound() {
    for (x, k) in [(0, 3), (1, 4)] {
        check_seeds(&format!("crash_rejoin_link_never_up_{x}_{k}"), 2, |seed| {
            crash_rejoin_link_never_up(seed, x, k, false)
        });
    }
}

/// See [`crash_rejoin_link_never_up`] with `published` (s29, ninety-fourth part of
/// `docs/MEMBERSHIP.md`): `k` ranks below `x`, publishes its suspicion of the old incarnation
/// at once and never readmits the new one (its link never comes up). The leader holds the join
/// for that readmission only for `expected_link_timeout`, then proposes it; `k` waits for the
/// link for the same bound and suspects the incarnation, and the four others go on without
/// `x`. Two `(x, k)` pairs, 2 seeds each. Without the bound on the hold it fails: the join is
/// never proposed and `k` never waits ("never waited for the new incarnation's link").
#[test]
fn a_join_held_for_a_readmission_that_cannot_come_is_proposed_after_the_bound() {
    for (x, k) in [(4, 3), (3, 1)] {
        check_seeds(
            &format!("crash_rejoin_link_never_up_published_{x}_{k}"),
            2,
            |seed| crash_rejoin_link_never_up(seed, x, k, true),
        );
    }
}

/// The first life of the empty-log tests: view 0 is `0..5`; node 5 joins (`Group::joining`)
/// and its program stalls; everyone stops the moment members 0–4 all installed view 1, which
/// admits it, before 5 installed or logged it (checked).
/// The universe is `u` nodes (at least `N + 1`; the others are never started).
fn admitted_but_unlogged(
    seed: u64,
    base: &Path,
    u: usize,
) -> Result<(Vec<Vec<u8>>, Vec<Seq>), String> {
    let j = N;
    let first: Vec<usize> = (0..N).collect();
    let mut l = Life::start_in(seed, base, &vec![Vec::new(); u], &first, 0, u);
    for _ in 0..800 {
        l.step(true);
    }
    l.sim.start_node(NodeId(j as u32));
    let t = l.nodes[j].take().unwrap();
    l.groups[j] = Some(Group::joining(t, config(base, j, u), MemLog::default()).unwrap());
    // It links and asks; then its program stalls (below the suspicion timeout), so that the
    // members install the view admitting it before it can.
    for _ in 0..10 {
        l.step(true);
    }
    l.stall(j, Duration::from_micros(1000));
    let named = |l: &Life| {
        first.iter().all(|&i| {
            (l.groups[i].as_ref().and_then(|g| g.view()))
                .is_some_and(|v| v.contains(NodeId(j as u32)))
        })
    };
    let t0 = l.sim.now();
    while !named(&l) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(20) {
            return Err(format!("the joiner was never admitted: {}", l.state()));
        }
        l.step(true);
    }
    let gj = l.groups[j].as_ref().unwrap();
    if gj.view().is_some() || !gj.gms().log().bytes().is_empty() {
        return Err(format!(
            "seed {seed}: the joiner installed or logged the view that admitted it too soon ({:?}, {} log bytes)",
            gj.view().map(|v| v.id),
            gj.gms().log().bytes().len()
        ));
    }
    Ok(l.shutdown())
}

/// Issue 6 (s17 left it idle): a member of the last view whose log is empty. View 0 is
/// `0..5`; node 5 joins (`Group::joining`) and its program stalls; everyone stops the moment
/// members 0–4 all installed view 1, which admits it, before 5 installed (or logged) it. All six restart:
/// 0–4 at view 1, which names 5, and 5 from its empty log, an idle outsider (no view, no join
/// request). The restart goes on without it after the suspicion timeout (s17,
/// `regression_a_restart_does_not_wait_for_a_joiner_whose_log_is_empty`); then 5 must ask to
/// join by itself, take the state by transfer and deliver what the others deliver: all six
/// end in one running view, active, delivering identically (new messages of 5's included).
fn empty_log_member_joins(seed: u64) -> Result<(), String> {
    let base = dir("empty-log-member", seed);
    let u = N + 1;
    let j = N;
    let first: Vec<usize> = (0..N).collect();
    let (logs, _) = admitted_but_unlogged(seed, &base, u)?;
    let all: Vec<usize> = (0..u).collect();
    let mut l = Life::start_in(seed + 1000, &base, &logs, &all, 1, u);
    l.until_restarted(&first)?;
    let replayed = l.delivered[0].len();
    together_and_carrying_on(&mut l, &all, replayed, "the member with an empty log")?;
    if !delivered_own(&l, j, 1, 0) {
        return Err("the member with an empty log delivered nothing of its own".into());
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

#[test]
fn a_member_of_the_last_view_with_an_empty_log_joins_the_restarted_group_by_itself() {
    check_seeds("restart_empty_log_member_joins", 3, empty_log_member_joins);
}

/// Issue 6, the limitation s18 left (docs/MEMBERSHIP.md, "the restart's waits bounded"): as in
/// [`empty_log_member_joins`], node 5 was admitted by view 1 but logged nothing before
/// everyone stopped; now it does not restart with the others. Members 0–4 restart, 5 is absent
/// and counted out after the absent timeout, and the restart view [0..5) runs. Only then does
/// 5 start, from its empty log (`Group::new`: an idle outsider, not a joiner) as a new process
/// under its id (the others suspected the old one while it was absent). It never sees a
/// restarting block naming it; it must tell from a peer's decision block (the restart's
/// decision failed it) that the group went on without it, ask to join by itself, take the
/// state by transfer and deliver what the others deliver: all six end in one running view.
/// A spare node 6 (never a member) that starts the same way at the same time must stay idle.
/// Without the rule 5 stays idle too ("the late member with an empty log did not come into the
/// running view within 50ms").
fn late_empty_log_member_joins(seed: u64) -> Result<(), String> {
    let base = dir("late-empty-log-member", seed);
    let u = N + 2;
    let j = N;
    let spare = N + 1;
    let (logs, _) = admitted_but_unlogged(seed, &base, u)?;
    let first: Vec<usize> = (0..N).collect();
    let mut l = Life::start_in(seed + 1000, &base, &logs, &first, 1, u);
    l.until_restarted(&first)?;
    for _ in 0..200 {
        l.step(true);
    }
    start_empty_log_member_and_spare(&mut l, &base, j, spare);
    let replayed = l.delivered[0].len();
    let all: Vec<usize> = (0..=j).collect();
    together_and_carrying_on(&mut l, &all, replayed, "the late member with an empty log")?;
    let g = l.groups[spare].as_ref().unwrap();
    if g.view().is_some() || g.gms().rejoined().is_some() {
        return Err(format!("the spare node asked to join: {}", l.state()));
    }
    if !delivered_own(&l, j, 1, 0) {
        return Err("the late member with an empty log delivered nothing of its own".into());
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// Starts the empty-log member `j` as a new process under its id (its absent incarnation was
/// suspected) with `Group::new` and its empty log, an idle outsider, and the spare node `spare`
/// (never a member) the same way.
fn start_empty_log_member_and_spare(l: &mut Life, base: &Path, j: usize, spare: usize) {
    l.sim.crash(NodeId(j as u32));
    let t = gate(l.sim.restart_node(NodeId(j as u32)).unwrap(), &l.held[j]);
    let cfg = config(base, j, l.u);
    let (log, _) = MemLog::open(l.logs[j].clone());
    l.groups[j] = Some(Group::new(t, cfg, log, None).unwrap());
    l.start_late(spare);
}

/// Issue 6, the limitation s19 left: as in [`late_empty_log_member_joins`], but the group
/// decides a further view change before node 5 starts: node 7 (never started before) joins
/// the restart view, so every member's decision block now admits 7 and no longer fails 5.
/// Only then do 5 (its empty log, `Group::new`) and the spare 6 start. 5 must read from a
/// peer's published `gms_gone` word (a decision failed it out of a view that peer installed,
/// and no later view named it) that the group went on without it, ask to join by itself and
/// take the state by transfer: 0–5 and 7 end in one running view, delivering identically with
/// messages of 5. The spare 6 (no word names it) must stay idle. Without the word 5 stays idle
/// ("the member with an empty log, after a further view change, did not come into the
/// running view within 50ms").
fn late_empty_log_member_joins_after_a_further_view_change(seed: u64) -> Result<(), String> {
    let base = dir("late-empty-log-member-further", seed);
    let u = N + 3;
    let (j, spare, joiner) = (N, N + 1, N + 2);
    let (logs, _) = admitted_but_unlogged(seed, &base, u)?;
    let first: Vec<usize> = (0..N).collect();
    let mut l = Life::start_in(seed + 1000, &base, &logs, &first, 1, u);
    l.until_restarted(&first)?;
    let restart_view = l.groups[0].as_ref().and_then(|g| g.view()).map(|v| v.id);
    // The further view change: 7 joins the restarted group.
    l.sim.start_node(NodeId(joiner as u32));
    l.rejoin_fresh(joiner);
    let mut with_joiner = first.clone();
    with_joiner.push(joiner);
    let replayed = l.delivered[0].len();
    together_and_carrying_on(&mut l, &with_joiner, replayed, "the joiner")?;
    for &i in &first {
        let g = l.groups[i].as_ref().unwrap();
        let (Some(v), Some(r)) = (g.view(), restart_view) else {
            return Err(format!("n{i} has no view: {}", l.state()));
        };
        if v.id <= r || v.contains(NodeId(j as u32)) {
            return Err(format!(
                "n{i} runs view {} (restart view {r}): not a further view without 5",
                v.id
            ));
        }
    }
    start_empty_log_member_and_spare(&mut l, &base, j, spare);
    let replayed = l.delivered[0].len();
    let mut all: Vec<usize> = (0..=j).collect();
    all.push(joiner);
    together_and_carrying_on(
        &mut l,
        &all,
        replayed,
        "the member with an empty log, after a further view change,",
    )?;
    let g = l.groups[spare].as_ref().unwrap();
    if g.view().is_some() || g.gms().rejoined().is_some() {
        return Err(format!("the spare node asked to join: {}", l.state()));
    }
    if !delivered_own(&l, j, 1, 0) {
        return Err("the member with an empty log delivered nothing of its own".into());
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

#[test]
fn a_member_with_an_empty_log_that_starts_after_a_further_view_change_joins_by_itself() {
    check_seeds(
        "restart_late_empty_log_member_further_view",
        3,
        late_empty_log_member_joins_after_a_further_view_change,
    );
}

#[test]
fn a_member_of_the_last_view_with_an_empty_log_that_starts_after_the_restart_joins_by_itself() {
    check_seeds(
        "restart_late_empty_log_member_joins",
        3,
        late_empty_log_member_joins,
    );
}

/// The first life of the adopted-decision tests: five members deliver, 0 and 1 crash at the
/// same step, and everyone stops the moment a survivor logged a decision, which must be view
/// 1 = [2, 3, 4] with every log still ending at view 0.
fn first_life_deciding_without_0_and_1(
    seed: u64,
    base: &Path,
) -> Result<(Vec<Vec<u8>>, Vec<Seq>), String> {
    let mut l = Life::start(seed, base, &vec![Vec::new(); N], &[0, 1, 2, 3, 4], 0);
    for _ in 0..1000 {
        l.step(true);
    }
    // 0 and 1 crash at the same step (their logs kept as they were).
    for i in [0, 1] {
        let g = l.groups[i].take().unwrap();
        l.logs[i] = g.gms().log().bytes().to_vec();
        l.sim.crash(NodeId(i as u32));
    }
    let t0 = l.sim.now();
    let decided = loop {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("no survivor logged a decision: {}", l.state()));
        }
        l.step(true);
        let d = (2..N).find_map(|i| {
            l.groups[i]
                .as_ref()
                .and_then(|g| g.gms().decision().cloned())
        });
        if let Some(d) = d {
            break d;
        }
    };
    let next = decided.next_members(&[0, 1, 2, 3, 4].map(NodeId));
    if next != [2, 3, 4].map(NodeId) {
        return Err(format!("the decision is not view 1 = [2, 3, 4]: {next:?}"));
    }
    let (logs, before) = l.shutdown();
    for (i, b) in logs.iter().enumerate() {
        let last = MemLog::open(b.clone()).1.last_view().map(|v| v.0);
        if last != Some(0) {
            return Err(format!("n{i}'s log ends at view {last:?}, not 0"));
        }
    }
    Ok((logs, before))
}

/// Issue 6, seen once over TCP (`tcp_restart::a_bare_majority_restarts_without_the_members_that_never_come_back`):
/// a total restart that adopts a logged decision removing a restarted member. Members 0 and 1
/// crash; the survivors 2, 3, 4 (a majority of view 0) decide view 1 = [2, 3, 4] and some of
/// them log that decision, but everyone stops the moment a member logged it (before anyone
/// installs view 1). Then 1, 2, 3 restart from their logs (a majority of view 0), 0 and 4 never
/// come back (absent). The inspector adopts the logged decision (keeping its failures of 0 and 1:
/// 1 may lack messages below its trim) and adds the failure of absent 4, so the restart view
/// is [2, 3]: not a majority of view 0, but a majority of the adopted view 1 = [2, 3, 4].
/// Before the fix all three stopped as a minority ("in view 0 this member suspects [0, 1, 4]").
/// Checked: 2 and 3 install the restart view [2, 3] within 50 ms of virtual time, replay
/// identically and keep everything delivered before, and no restarted member stops meanwhile;
/// member 1, removed by the restart view, joins again by state transfer (it used to stop as
/// removed once the restart view was installed) and all three end in one running view,
/// delivering identically. Fails with either half of the fix reverted (the inspector's
/// adoption rule with the installer's relaxed check, or the removed member's rejoin).
fn adopted_decision_removing_a_restarted_member(seed: u64) -> Result<(), String> {
    let base = dir("adopted", seed);
    let (logs, before) = first_life_deciding_without_0_and_1(seed, &base)?;
    let up = [1, 2, 3];
    let mut l = Life::start(seed + 1000, &base, &logs, &up, 1);
    let t1 = l.sim.now();
    while !(l.restarted(2) && l.restarted(3)) {
        if l.sim.now().saturating_since(t1) > Duration::from_millis(50) {
            return Err(format!("the restart did not complete: {}", l.state()));
        }
        if let Some(why) = (l.groups.iter().flatten()).find_map(|g| g.stopped()) {
            return Err(format!("a restarted member stopped ({why}): {}", l.state()));
        }
        l.step(false);
    }
    for i in [2, 3] {
        let v = l.groups[i].as_ref().unwrap().view().unwrap();
        if v.members != [2, 3].map(NodeId) {
            return Err(format!("n{i}'s restart view is {:?}", v.members));
        }
    }
    let replay = l.delivered[2].clone();
    if l.delivered[3] != replay {
        return Err("n2 and n3 replayed differently".into());
    }
    for (i, b) in before.iter().enumerate() {
        if !is_prefix(b, &replay) {
            return Err(format!(
                "n{i} delivered {} messages before, not a prefix of the replay of {}",
                b.len(),
                replay.len()
            ));
        }
    }
    // Member 1, removed by the restart view, joins again by state transfer (it used to stop
    // as removed): all three end in one running view and deliver identically.
    if l.groups[1]
        .as_ref()
        .is_none_or(|g| g.gms().rejoined().is_none())
    {
        return Err(format!("n1 did not join again: {}", l.state()));
    }
    together_and_carrying_on(&mut l, &[2, 3, 1], replay.len(), "member 1")?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

#[test]
fn a_restart_adopting_a_decision_that_removed_a_restarted_member_completes() {
    check_seeds(
        "restart_adopted_removal",
        3,
        adopted_decision_removing_a_restarted_member,
    );
}

/// The wait of the adopted-decision rule, bounded (s19): 0, 1, 2 restart (a majority of view
/// 0), 3 and 4 never come back. The adopted decision (view 1 = [2, 3, 4]) keeps 0 and 1 out,
/// 3 and 4 are counted out after the absent timeout (final in this process), so the restart
/// view would be [2]: a majority neither of view 0 nor of view 1. Nobody installs anything,
/// nobody holds a restart decision (a logged ballot decision for [2] would be adopted by every
/// later attempt), and once 3 and 4 are counted out every restarted member stops with
/// `StopReason::RestartShortOfAdopted`, naming view 1 and the members to start, 3 and 4 (not
/// before the absent timeout: until then they might come). Then the operator's action: a new
/// total restart of all five from their logs completes, installs view 1's members, and 0 and
/// 1 join again; all five end in one running view delivering identically, everything
/// delivered before kept. Before s19 the members waited for good (checked: without the stop
/// this fails with "n0 did not stop as short of the adopted view").
#[test]
fn a_restart_adopting_a_decision_whose_next_view_it_lacks_a_majority_of_stops_naming_whom_to_start()
{
    each_seed("restart_adopted_short", 2, |seed| {
        let base = dir("adopted-short", seed);
        let (logs, before) = first_life_deciding_without_0_and_1(seed, &base).unwrap();
        let mut l = Life::start(seed + 1000, &base, &logs, &[0, 1, 2], 1);
        let stops =
            |l: &Life| [0, 1, 2].map(|i| l.groups[i].as_ref().unwrap().gms().stopped().cloned());
        while l.sim.now().saturating_since(squall_transport::Time::ZERO) < ABSENT * 10
            && stops(&l).iter().any(Option::is_none)
        {
            l.step(false);
            for i in [0, 1, 2] {
                let g = l.groups[i].as_ref().unwrap();
                assert!(
                    g.view().map(|v| v.id) == Some(0) && !l.restarted(i),
                    "n{i} installed a view: {}",
                    l.state()
                );
                assert!(
                    g.gms()
                        .decision()
                        .is_none_or(|d| squall_membership::restart::attempt_of(d.rank) == 0),
                    "n{i} holds a restart decision: {}",
                    l.state()
                );
            }
        }
        let took = l.sim.now().saturating_since(squall_transport::Time::ZERO);
        assert!(
            took >= ABSENT,
            "seed {seed}: stopped after {took:?}, before the absent timeout"
        );
        for (i, why) in stops(&l).into_iter().enumerate() {
            assert_eq!(
                why,
                Some(StopReason::RestartShortOfAdopted {
                    view: 0,
                    adopted: [2, 3, 4].map(NodeId).to_vec(),
                    start: [3, 4].map(NodeId).to_vec(),
                }),
                "n{i} did not stop as short of the adopted view: {}",
                l.state()
            );
        }
        // The operator's action: every member restarts again, 3 and 4 started too.
        let (logs, _) = l.shutdown();
        let all = [0, 1, 2, 3, 4];
        let mut l = Life::start(seed + 2000, &base, &logs, &all, 2);
        let t1 = l.sim.now();
        while !(2..N).all(|i| l.restarted(i)) {
            assert!(
                l.sim.now().saturating_since(t1) < Duration::from_millis(50),
                "the new total restart did not complete: {}",
                l.state()
            );
            assert!(
                (l.groups.iter().flatten()).all(|g| g.stopped().is_none()),
                "a member stopped in the new total restart: {}",
                l.state()
            );
            l.step(false);
        }
        for i in 2..N {
            let v = l.groups[i].as_ref().unwrap().view().unwrap();
            assert_eq!(v.members, [2, 3, 4].map(NodeId), "n{i}'s restart view");
        }
        let replay = l.delivered[2].clone();
        for (i, b) in before.iter().enumerate() {
            assert!(
                is_prefix(b, &replay),
                "n{i}'s deliveries before are not kept"
            );
        }
        together_and_carrying_on(&mut l, &all, replay.len(), "members 0 and 1").unwrap();
        let _ = std::fs::remove_dir_all(&base);
    });
}

/// Records each view any member holds now in `seen` (view id → members); an error names the
/// first view that two members installed with different members (no member may install a view
/// the others did not).
fn same_views(l: &Life, seen: &mut BTreeMap<u64, (usize, Vec<NodeId>)>) -> Result<(), String> {
    for (i, g) in l.groups.iter().enumerate() {
        let Some(v) = g.as_ref().and_then(|g| g.view()) else {
            continue;
        };
        match seen.get(&v.id) {
            Some((j, m)) if *m != v.members => {
                return Err(format!(
                    "view {}: n{j} installed it as {m:?}, n{i} as {:?}",
                    v.id, v.members
                ));
            }
            Some(_) => {}
            None => {
                seen.insert(v.id, (i, v.members.clone()));
            }
        }
    }
    Ok(())
}

/// s23 (`docs/MEMBERSHIP.md`, forty-fourth part): a *one-way absence*. Five members deliver;
/// node 5 starts and asks to join while the members of `held` (never the leader n0, which
/// must read the request) hold 5's `PeerConnected` back (see [`Gate`]): every other member
/// links 5, and all install view 1 naming it. With `release` `None` the link never comes up
/// at the held members: after `expected_link_timeout` each suspects 5
/// (`Gms::settle_absent`), and the members that linked 5 must adopt that suspicion (Derecho:
/// suspicions are shared) so that 5 is removed. Before the fix the flag named incarnation 0
/// (the only one a member knows of a row it never linked, `known + 1` = 1), below the
/// incarnation 1 the others linked: they never adopted it, the held members wedged and the
/// view stalled for good. Checked: no member installs a view that another installed with
/// other members; 5 stays in every view until the bound after view 1; then members 0 to 4
/// end active in one running view without 5 and deliver identically, new messages included,
/// and 5 has stopped. With `release` `Some(d)` (below the bound) the link comes up at the
/// held members `d` after view 1 (a slow link): then nobody may remove 5, and all six end
/// active in one running view and deliver identically.
fn one_way_absence(seed: u64, held: &[usize], release: Option<Duration>) -> Result<(), String> {
    const U: usize = N + 1;
    let x = N;
    let node = NodeId(x as u32);
    let at: String = held.iter().map(usize::to_string).collect();
    let tag = format!("one-way-absence-{at}-{}", release.is_some());
    let base = dir(&tag, seed);
    let all: Vec<usize> = (0..N).collect();
    let mut l = Life::start_in(seed, &base, &vec![Vec::new(); U], &all, 0, U);
    let mut seen = BTreeMap::new();
    for _ in 0..600 {
        l.step(true);
    }
    for &m in held {
        l.held[m].set(Some(node));
    }
    l.start_late(x);
    l.groups[x].as_mut().unwrap().join().unwrap();
    let names_x = |l: &Life, i: usize| {
        (l.groups[i].as_ref()).is_some_and(|g| g.view().is_some_and(|v| v.contains(node)))
    };
    let t0 = l.sim.now();
    while !all.iter().all(|&i| names_x(&l, i)) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!(
                "seed {seed}: members 0 to 4 did not install the joiner's view: {}",
                l.state()
            ));
        }
        l.step(true);
        same_views(&l, &mut seen)?;
    }
    let t1 = l.sim.now();
    let running = |i: usize| {
        (l.groups[i].as_ref()).is_some_and(|g| g.epoch().is_some() && g.stopped().is_none())
    };
    if !held.iter().all(|&m| running(m)) {
        return Err(missed(
            seed,
            &format!("{held:?} running view 1 with n5's link held"),
        ));
    }
    let ever_removed = |l: &Life| {
        (0..U).any(|i| {
            (l.groups[i].as_ref()).is_some_and(|g| g.view().is_some_and(|v| !v.contains(node)))
        })
    };
    if let Some(d) = release {
        while l.sim.now().saturating_since(t1) < d {
            l.step(true);
            same_views(&l, &mut seen)?;
            if ever_removed(&l) {
                return Err(format!(
                    "seed {seed}: n5 was removed while the link of {held:?} to it was only slow: {}",
                    l.state()
                ));
            }
        }
        for &m in held {
            l.held[m].set(None);
        }
        let everyone: Vec<usize> = (0..U).collect();
        together_and_carrying_on(&mut l, &everyone, 0, "the joiner with a slow link")?;
        same_views(&l, &mut seen)?;
        if ever_removed(&l)
            || seen
                .values()
                .any(|(_, v)| v.len() > N && !v.contains(&node))
        {
            return Err(format!(
                "seed {seed}: n5 was removed although the link of {held:?} to it came up in time: {}",
                l.state()
            ));
        }
        let _ = std::fs::remove_dir_all(&base);
        return Ok(());
    }
    while !ever_removed(&l) {
        if l.sim.now().saturating_since(t1) > Duration::from_millis(50) {
            let suspecting: Vec<usize> = (0..N)
                .filter(|&i| {
                    (l.groups[i].as_ref()).is_some_and(|g| {
                        let sst = g.gms().sst();
                        sst.row_of(node).is_some_and(|r| sst.is_suspected(r))
                    })
                })
                .collect();
            let wedged: Vec<usize> = (0..N)
                .filter(|&i| (l.groups[i].as_ref()).is_some_and(|g| g.gms().is_wedged()))
                .collect();
            return Err(format!(
                "seed {seed}: {held:?} never linked n5 and the view stalled: n5 was not removed \
                 within 50ms of view 1 (members suspecting n5: {suspecting:?}; wedged: {wedged:?}; a \
                 one-way absence whose suspicion the members that linked n5 did not adopt): {}",
                l.state()
            ));
        }
        l.step(true);
        same_views(&l, &mut seen)?;
    }
    let removed_after = l.sim.now().saturating_since(t1);
    if removed_after + STEP < EXPECTED_LINK {
        return Err(format!(
            "seed {seed}: n5 was removed {removed_after:?} after view 1, before the bound"
        ));
    }
    let t2 = l.sim.now();
    let together = |l: &Life| {
        let views: Vec<Option<u64>> = (all.iter())
            .map(|&i| l.groups[i].as_ref().and_then(|g| g.view().map(|v| v.id)))
            .collect();
        views.iter().all(|v| *v == views[0])
            && all.iter().all(|&i| {
                l.groups[i].as_ref().is_some_and(|g| {
                    g.is_active()
                        && g.stopped().is_none()
                        && g.view().is_some_and(|v| !v.contains(node))
                })
            })
    };
    while !together(&l) {
        if l.sim.now().saturating_since(t2) > Duration::from_millis(50) {
            return Err(format!(
                "seed {seed}: members 0 to 4 did not come into one running view without n5 \
                 within 50ms: {}",
                l.state()
            ));
        }
        l.step(true);
        same_views(&l, &mut seen)?;
    }
    let before = l.delivered[0].len();
    for _ in 0..400 {
        l.step(true);
        same_views(&l, &mut seen)?;
    }
    for _ in 0..2000 {
        l.step(false);
    }
    same_views(&l, &mut seen)?;
    let after = &l.delivered[0];
    if after.len() <= before {
        return Err(format!("seed {seed}: nothing new without n5"));
    }
    if let Some(&i) = all.iter().find(|&&i| &l.delivered[i] != after) {
        return Err(format!("seed {seed}: n{i} delivered differently"));
    }
    if (l.groups[x].as_ref()).is_some_and(|g| g.stopped().is_none()) {
        return Err(format!(
            "seed {seed}: n5, removed, did not stop: {}",
            l.state()
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// See [`one_way_absence`]: the link never comes up at member 3, at member 1, or at members
/// 1 to 4 (linked at the leader only).
#[test]
fn a_joiner_whose_link_never_comes_up_at_some_members_is_removed_after_the_bound() {
    for held in [&[3][..], &[1], &[1, 2, 3, 4]] {
        check_seeds(&format!("one_way_absence_{held:?}"), 2, |seed| {
            one_way_absence(seed, held, None)
        });
    }
}

/// See [`one_way_absence`]: the link comes up at member 3 3 ms after it installed view 1
/// (the bound is 4 ms): a slow link removes nobody.
#[test]
fn a_joiner_whose_link_at_one_member_is_slow_but_within_the_bound_stays() {
    check_seeds("one_way_slow_link", 2, |seed| {
        one_way_absence(seed, &[3], Some(Duration::from_millis(3)))
    });
}

/// s25 (`docs/MEMBERSHIP.md`, sixty-third part): the moment of [`counted_out_by_the_inspector`].
const COUNTED_OUT: &str =
    "members 1 to 3 holding the restart's decision that fails 4, not suspecting 4, 4 not echoing";

/// s25 (`docs/MEMBERSHIP.md`, sixty-third part): the restart's ballot fails a member that only
/// the inspector counts out. Five members deliver and stop; all five restart. Once 0 (the
/// inspector) linked 4 and before it decided, 0's endpoint hands it
/// `PeerFailed { peer: 4, cause: Remote }`, as if 4 had cut the link first: 0 is accused, so
/// its suspicion of 4 is never published, and 1 to 3 learn of 4's removal only from the
/// ballot's decision. With `dead`, 4's process crashes at that moment, for good; otherwise it
/// stays up, its heartbeats reaching 1 to 3, and it never sees the ballot (0 writes nothing to
/// a row it suspects).
///
/// The moment ([`COUNTED_OUT`]): each of 1 to 3 held the decision (a ballot, failing 4) while
/// its table did not suspect 4 and 4 held no decision (so it had published no echo). Their
/// `try_install` waits for 4's echo; what ends the wait is the catch-up: 0, which does not
/// count 4, installs the restart view on the others' echoes and publishes it, and a restarting
/// member reads a peer one view ahead before its own echoes (`Gms::restart_round`). Checked:
/// 1 to 3 each run the restart view [0, 1, 2, 3] within `suspicion_timeout` (1.5 ms) of the
/// accusation and while still not suspecting 4 (so neither their detector nor 4's silence
/// ended the wait), no view id runs with two member lists, 1 to 3 replay identically with
/// everything delivered before as a prefix, and 4 posts no op into a peer's epoch region set
/// while it runs no view (a restarting member runs no epoch: nothing of it can land in a set a
/// peer zeroes on leaving the restart's last view; checked until 1 to 3 installed, and at the
/// end if 4 runs no view then). Then 1 to 3 end in one running view and
/// carry on (0 may be removed meanwhile: 4, alive, times the silent 0 out, and its published
/// suspicion reaches them).
fn counted_out_by_the_inspector(seed: u64, dead: bool) -> Result<Moment, String> {
    let (f, inspector, followers) = (4usize, 0usize, [1usize, 2, 3]);
    let base = dir(
        if dead {
            "counted-out-dead"
        } else {
            "counted-out"
        },
        seed,
    );
    let (logs, before) = first_life(seed, &base, 1500);
    let all = [0, 1, 2, 3, 4];
    let sets = config(&base, 0, N).sets;
    EPOCH_SETS.with(|s| *s.borrow_mut() = sets.iter().flat_map(|&(t, l)| [t, l]).collect());
    EPOCH_POSTS.with(|p| p.borrow_mut().clear());
    let mut l = Life::start(seed + 1000, &base, &logs, &all, 1);
    let last = (l.groups[inspector]
        .as_ref()
        .and_then(|g| g.view())
        .map(|v| v.id))
    .ok_or("n0 has no view to restart")?;
    let row = |l: &Life, i: usize, n: usize| {
        let g = l.groups[i].as_ref()?;
        let sst = g.gms().sst();
        sst.row_of(NodeId(n as u32))
            .map(|r| (sst.is_absent(r), sst.is_suspected(r)))
    };
    // Until 0 linked 4; 0 must not have decided yet.
    let t0 = l.sim.now();
    while row(&l, inspector, f).is_none_or(|(absent, _)| absent) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(5) {
            return Err(format!("n0 never linked n4: {}", l.state()));
        }
        l.step(false);
    }
    if (l.groups[inspector].as_ref()).is_some_and(|g| g.gms().decision().is_some()) {
        return Ok(Moment::Missed);
    }
    ACCUSE.with(|a| a.set(Some((NodeId(inspector as u32), NodeId(f as u32)))));
    if dead {
        l.sim.crash(NodeId(f as u32));
        l.groups[f] = None;
    }
    let accused = l.sim.now();
    let bound = Duration::from_micros(1500);
    let mut held = [false; 3];
    let mut installed: [Option<Duration>; 3] = [None; 3];
    let mut f_ran = false;
    let want: Vec<NodeId> = (0..4).map(NodeId).collect();
    while installed.iter().any(Option::is_none) {
        let waited = l.sim.now().saturating_since(accused);
        if waited > Duration::from_millis(50) {
            return Err(format!("the restart did not complete: {}", l.state()));
        }
        let f_silent = (l.groups[f].as_ref()).is_none_or(|g| g.gms().decision().is_none());
        for (k, &i) in followers.iter().enumerate() {
            let g = l.groups[i].as_ref().ok_or(format!("n{i} is gone"))?;
            let unsuspected = row(&l, i, f).is_some_and(|(_, s)| !s);
            let fails_f = g.gms().decision().is_some_and(|d| {
                squall_membership::restart::attempt_of(d.rank) > 0
                    && (d.changes.iter()).any(|c| c.node == NodeId(f as u32))
            });
            held[k] |= g.gms().restarting().is_some() && fails_f && unsuspected && f_silent;
            if installed[k].is_none()
                && g.gms().restarting().is_none()
                && let Some(v) = g.view()
            {
                if (v.id, &v.members) != (last + 1, &want) {
                    return Err(format!("n{i}'s restart view: {} {:?}", v.id, v.members));
                }
                if !unsuspected {
                    // It counted 4 out itself: the moment, if reached, did not decide it.
                    return Ok(Moment::Missed);
                }
                if waited > bound {
                    return Err(format!(
                        "n{i} installed the restart view {waited:?} after the accusation, past \
                         the suspicion timeout {bound:?}: {}",
                        l.state()
                    ));
                }
                installed[k] = Some(waited);
            }
        }
        let posts_before = EPOCH_POSTS.with(|p| p.borrow().get(&NodeId(f as u32)).copied());
        let ran_before = runs_a_view(&l, f);
        l.step(false);
        f_ran |= ran_before || runs_a_view(&l, f);
        let posts = EPOCH_POSTS.with(|p| p.borrow().get(&NodeId(f as u32)).copied());
        if !f_ran && posts != posts_before {
            return Err(format!(
                "n4 posted into a peer's epoch region set before it ran a view: {posts:?}"
            ));
        }
        if let Some(d) = &l.disagreement {
            return Err(format!("virtual synchrony: {d}"));
        }
    }
    if !held.iter().all(|&h| h) {
        return Ok(Moment::Missed);
    }
    eprintln!("seed {seed}: 1 to 3 installed after {installed:?}");
    l.until_restarted(&followers)?;
    let replay = l.delivered[followers[0]].clone();
    if let Some(i) = followers.iter().find(|&&i| l.delivered[i] != replay) {
        return Err(format!("n{i} replayed differently"));
    }
    if let Some(i) = (0..N).find(|&i| !is_prefix(&before[i], &replay)) {
        return Err(format!("n{i}'s deliveries are not a prefix of the replay"));
    }
    together_and_carrying_on(&mut l, &followers, replay.len(), "1 to 3")?;
    let posted = EPOCH_POSTS.with(|p| p.borrow().get(&NodeId(f as u32)).copied());
    if !runs_a_view(&l, f) && posted.is_some() {
        return Err(format!(
            "n4 posted into a peer's epoch region set before it ran a view: {posted:?}"
        ));
    }
    eprintln!(
        "seed {seed}: n4 posted {posted:?} epoch ops; it runs a view at the end: {}",
        runs_a_view(&l, f)
    );
    let _ = std::fs::remove_dir_all(&base);
    Ok(Moment::Reached)
}

/// [`counted_out_by_the_inspector`] with 4 alive: its heartbeats keep 1 to 3 from ever
/// suspecting it before they install.
#[test]
fn a_member_only_the_restart_inspector_counts_out_is_not_waited_for_by_the_others() {
    check_seeds_reaching("restart_counted_out", 2, COUNTED_OUT, |seed| {
        counted_out_by_the_inspector(seed, false)
    });
}

/// [`counted_out_by_the_inspector`] with 4 dead for good at the accusation.
#[test]
fn a_dead_member_only_the_restart_inspector_counts_out_is_not_waited_for_by_the_others() {
    check_seeds_reaching("restart_counted_out_dead", 2, COUNTED_OUT, |seed| {
        counted_out_by_the_inspector(seed, true)
    });
}

/// Whether member `i` runs a view: out of restart mode, not stopped, with a view installed.
fn runs_a_view(l: &Life, i: usize) -> bool {
    (l.groups[i].as_ref()).is_some_and(|g| {
        g.gms().restarting().is_none() && g.stopped().is_none() && g.view().is_some()
    })
}

// s27 (seventy-fourth part of `docs/MEMBERSHIP.md`): a dead branch two views ahead.

/// How life 0 of [`two_views_ahead`] ended for the dead view's own members.
enum DeadSide {
    /// 0 and the joiners removed 1–4 and ran view 2 = 0 and the joiners, delivering in it: the
    /// logs, what each delivered, and what was run.
    RanView2(Vec<Vec<u8>>, Vec<Seq>, RunAcross),
    /// 0 and the joiners, no majority of view 1 without 1–4, stopped with
    /// [`StopReason::Minority`] in view 1 instead.
    Minority,
}

/// Life 0 of [`two_views_ahead`]: view 0 = 0–4, `joiners` (from `N` on) join in one decision
/// `D`, and once 0 and the joiners are active in view 1 (every node) 1–4 crash. 0 and the
/// joiners then suspect 1–4 and, if they are a majority of view 1, remove them in a view change
/// of the dead view's own: view 2 = 0 and the joiners, in which they deliver. 1–4's logs then
/// lose `Installed { 1 }` and their view-1 epoch logs ([`cut_view_1`]): they crashed after
/// logging `D`, before logging view 1, so view 1 was installed by 0 and the joiners only.
fn dead_view_runs_a_view_change(
    seed: u64,
    base: &Path,
    joiners: &[usize],
) -> Result<DeadSide, String> {
    let u = N + joiners.len();
    let all: Vec<usize> = (0..u).collect();
    let dead: Vec<usize> = (0..u).filter(|i| !(1..N).contains(i)).collect();
    let mut l = Life::start_in(seed, base, &vec![Vec::new(); u], &all, 0, u);
    for _ in 0..600 {
        l.step(true);
    }
    for &j in joiners {
        l.groups[j].as_mut().unwrap().join().unwrap();
    }
    let in_view = |l: &Life, i: usize, id: u64| {
        (l.groups[i].as_ref())
            .is_some_and(|g| g.is_active() && g.view().is_some_and(|v| v.id == id))
    };
    let t0 = l.sim.now();
    while !dead.iter().all(|&i| in_view(&l, i, 1)) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("life 0: view 1 not installed: {}", l.state()));
        }
        l.step(true);
    }
    let v1 = l.groups[0]
        .as_ref()
        .unwrap()
        .view()
        .unwrap()
        .members
        .clone();
    if v1.len() != u {
        return Err(format!("view 1 did not admit every joiner: {v1:?}"));
    }
    for i in 1..N {
        if let Some(g) = l.groups[i].take() {
            l.logs[i] = g.gms().log().bytes().to_vec();
        }
        l.sim.crash(NodeId(i as u32));
    }
    let want: Vec<NodeId> = dead.iter().map(|&i| NodeId(i as u32)).collect();
    let t0 = l.sim.now();
    loop {
        if dead.iter().all(|&i| in_view(&l, i, 2)) {
            break;
        }
        let minority = |i: &usize| {
            (l.groups[*i].as_ref()).is_some_and(|g| {
                matches!(
                    g.gms().stopped(),
                    Some(StopReason::Minority { view: 1, .. })
                )
            })
        };
        if dead.iter().all(minority) {
            return Ok(DeadSide::Minority);
        }
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!(
                "life 0: neither view 2 nor a minority stop: {}",
                l.state()
            ));
        }
        l.step(true);
    }
    let mut v2 = l.groups[0]
        .as_ref()
        .unwrap()
        .view()
        .unwrap()
        .members
        .clone();
    v2.sort();
    if v2 != want {
        return Err(format!("the dead view's view 2: {v2:?}"));
    }
    let at_view_2 = l.delivered[0].len();
    for _ in 0..400 {
        l.step(true);
    }
    for _ in 0..1000 {
        l.step(false);
    }
    if l.delivered[0].len() <= at_view_2 {
        return Err("nothing delivered in the dead branch's view 2".into());
    }
    let mut across = RunAcross::from(0);
    across.note(&l)?;
    let (mut logs, before) = l.shutdown();
    for i in 1..N {
        if !logged_admitting(&logs[i], 0, joiners, false) {
            return Err(format!("n{i} had not logged the join decision for view 0"));
        }
        cut_view_1(&mut logs, i, base, u);
    }
    Ok(DeadSide::RanView2(logs, before, across))
}

/// The dead branch two views ahead (s27, seventy-fourth part of `docs/MEMBERSHIP.md`).
/// Life 0: [`dead_view_runs_a_view_change`] with four joiners: the dead view 1 (0–8) runs a
/// view change of its own, view 2 = [0, 5, 6, 7, 8], and delivers in it. Life 1: 1–4 restart
/// view 0 without the others. They are a majority of view 0, and the inspector adopts `D`. Were
/// it to fit `D` (drop the joins, fail 0) it would install another view 1 = 1–4, and the dead
/// branch would be two views ahead of it. The rule that forbids it is fix B (`adoption_short`,
/// sixty-fifth and sixty-sixth parts): the fitted view must hold a majority of `D`'s next view,
/// and 1–4 are four of nine. So every one of 1–4 stops with
/// [`StopReason::RestartShortOfAdopted`] naming 0 and the joiners. Then the operator starts all
/// nine (life 2): 0 and the joiners restart view 2 and 1–4, two views behind them, join again
/// by transfer.
///
/// Checked: life 1 stops as above, installing nothing; no view id is run with two member lists
/// across the three lives; everything delivered in life 0 (view 2's deliveries included) is a
/// prefix of what every node ends with; 1–4 join again from view 0; all nine end active in one
/// running view, delivering identically.
///
/// Where life 1 does install a view 1 (fix B removed), the run goes on as an operator would
/// (life 1 delivers, life 2 starts all nine) and fails naming what broke.
fn two_views_ahead(seed: u64) -> Result<(), String> {
    let joiners = [N, N + 1, N + 2, N + 3];
    let u = N + joiners.len();
    let base = dir("dead-branch-two-ahead", seed);
    let DeadSide::RanView2(logs, before, mut across) =
        dead_view_runs_a_view_change(seed, &base, &joiners)?
    else {
        return Err("life 0: the dead view stopped as a minority".into());
    };
    let four = [1, 2, 3, 4];
    let all: Vec<usize> = (0..u).collect();
    let mut l = Life::start_in(seed + 1000, &base, &logs, &four, 1, u);
    let short = |l: &Life, i: usize| {
        (l.groups[i].as_ref()).is_some_and(|g| {
            matches!(
                g.gms().stopped(),
                Some(StopReason::RestartShortOfAdopted { .. })
            )
        })
    };
    let t0 = l.sim.now();
    while !four.iter().all(|&i| short(&l, i) || l.restarted(i)) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!(
                "life 1: the restart neither stopped nor completed: {}",
                l.state()
            ));
        }
        l.step(false);
    }
    let fitted = four.iter().any(|&i| l.restarted(i));
    if fitted {
        // The restart fitted `D`: the live view 1 delivers new messages too.
        for _ in 0..400 {
            l.step(true);
        }
        for _ in 0..1000 {
            l.step(false);
        }
    } else {
        let zero_and_joiners: Vec<NodeId> = (0..u)
            .filter(|i| !(1..N).contains(i))
            .map(|i| NodeId(i as u32))
            .collect();
        for &i in &four {
            let why = l.groups[i]
                .as_ref()
                .and_then(|g| g.gms().stopped().cloned());
            let named = matches!(&why, Some(StopReason::RestartShortOfAdopted { view: 0, start, .. })
                if zero_and_joiners.iter().all(|n| start.contains(n)));
            if !named {
                return Err(format!(
                    "n{i} did not stop naming 0 and the joiners: {why:?}"
                ));
            }
        }
    }
    let life1_runs = across.note(&l);
    let (logs, life1) = l.shutdown();
    // Life 2, the operator's end: every node starts from its log.
    let mut l = Life::start_in(seed + 2000, &base, &logs, &all, 2, u);
    l.earlier = before[0].clone();
    let together = come_together_and_carry_on(&mut l, &all, 0, "every node");
    let across = life1_runs.and(across.note(&l));
    let end = &l.delivered[0];
    let lost: Vec<String> = (0..u)
        .filter_map(|i| {
            [(0, &before[i]), (1, &life1[i])]
                .into_iter()
                .find(|(_, d)| !is_prefix(d, end))
                .map(|(life, d)| format!("n{i}'s {} deliveries of life {life}", d.len()))
        })
        .collect();
    if fitted || across.is_err() || !lost.is_empty() {
        return Err(format!(
            "life 1 installed a view 1 beside the dead branch: {fitted}; {}; not a prefix of n0's \
             {} at the end: {lost:?}; together: {together:?}",
            across
                .err()
                .unwrap_or_else(|| "no view id run with two member lists".into()),
            end.len()
        ));
    }
    together?;
    let last = |i: usize| (l.groups[i].as_ref()).and_then(|g| g.gms().rejoined().map(|r| r.0));
    if let Some(&i) = four.iter().find(|&&i| last(i) != Some(0)) {
        return Err(format!("n{i} did not join again from view 0"));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// [`two_views_ahead`] over 3 seeds (`SQUALL_SEEDS`).
#[test]
fn a_dead_branch_two_views_ahead_stops_the_restart_that_would_fit_its_join_decision() {
    check_seeds("restart_dead_branch_two_ahead", 3, two_views_ahead);
}

/// The dead view's own view change needs a majority of it (s27, seventy-fourth part of
/// `docs/MEMBERSHIP.md`): [`dead_view_runs_a_view_change`] with two joiners. 0, 5 and 6, three
/// of the dead view's seven, stop with [`StopReason::Minority`] in view 1 and never run a view
/// 2, so no dead branch two views ahead forms where the fitted live view (1–4, four of seven) is
/// allowed.
#[test]
fn a_dead_branch_without_a_majority_of_its_view_runs_no_view_change() {
    check_seeds("restart_dead_branch_two_ahead_minority", 2, |seed| {
        let base = dir("dead-branch-two-ahead-minority", seed);
        let r = dead_view_runs_a_view_change(seed, &base, &[N, N + 1])?;
        let _ = std::fs::remove_dir_all(&base);
        match r {
            DeadSide::Minority => Ok(()),
            DeadSide::RanView2(..) => Err("0, 5 and 6 ran a view 2 without 1–4".into()),
        }
    });
}

// s27 (seventy-third part of `docs/MEMBERSHIP.md`): a second fitting. The s25 review's risk 3:
// a restart adopting a ballot decision `D'` that itself fitted a join decision `D` fits it
// again, with no next-view rule about `D`'s dead view. The tests below build each form.

/// The views run in each life, kept across lives (view id → life, the first member seen
/// running it, its members), from view id `from` on. The second-fitting tests start at 2:
/// view 1 is the fitted number, run as the dead view by its installers and as each fitted view
/// by its own, by design (each test checks what keeps those apart); within one life every view
/// id is checked (`Life::disagreement`).
struct RunAcross {
    from: u64,
    seen: BTreeMap<u64, (u8, usize, Vec<NodeId>)>,
}

impl RunAcross {
    /// Checks view ids `from` and up.
    fn from(from: u64) -> Self {
        Self {
            from,
            seen: BTreeMap::new(),
        }
    }

    /// Records what `l` ran; an error names the first view id run with two member lists.
    fn note(&mut self, l: &Life) -> Result<(), String> {
        if let Some(d) = &l.disagreement {
            return Err(format!("virtual synchrony in life {}: {d}", l.life));
        }
        for (&vid, (i, members)) in l.running.range(self.from..) {
            match self.seen.get(&vid) {
                Some((life, j, m)) if m != members => {
                    return Err(format!(
                        "virtual synchrony across lives: view {vid} run as {m:?} by n{j} in life \
                         {life}, as {members:?} by n{i} in life {}",
                        l.life
                    ));
                }
                Some(_) => {}
                None => {
                    self.seen.insert(vid, (l.life, *i, members.clone()));
                }
            }
        }
        Ok(())
    }
}

/// The highest-ranked restart-ballot decision for view `vid` in `log`.
fn ballot_decision_for(log: &[u8], vid: u64) -> Option<squall_membership::change::Decision> {
    let (_, rec) = MemLog::open(log.to_vec());
    rec.decision_for(vid)
        .filter(|d| squall_membership::restart::attempt_of(d.rank) > 0)
        .cloned()
}

/// `log` without its decisions of rank `rank` (the member crashed after acknowledging that
/// ballot, before logging its decision; its promise stays).
fn without_decision(log: &[u8], rank: u64) -> Vec<u8> {
    let (_, rec) = MemLog::open(log.to_vec());
    let mut out = MemLog::default();
    for r in (rec.records.iter())
        .filter(|r| !matches!(r, Record::Decided { decision, .. } if decision.rank == rank))
    {
        out.append(r).unwrap();
    }
    out.bytes().to_vec()
}

/// Paxos's acceptance, read in the logs: a member that logged decisions for view `v` installs
/// view `v + 1` only as the highest-ranked of them makes it from the view `v` it logged (a
/// member never installs a next view under a decision ranked below one it accepted). A member
/// that joined (no decision for the view before in its log) is not checked, nor are the
/// records before its last `StateDropped` held against what it installs after (it joined
/// again as a new member; s29).
fn installed_as_decided(logs: &[Vec<u8>]) -> Result<(), String> {
    for (i, bytes) in logs.iter().enumerate() {
        let (_, rec) = MemLog::open(bytes.clone());
        let mut views: BTreeMap<u64, Vec<NodeId>> = BTreeMap::new();
        let mut best: BTreeMap<u64, squall_membership::change::Decision> = BTreeMap::new();
        for r in &rec.records {
            match r {
                Record::Decided { decision, .. } => {
                    let v = decision.trim.view;
                    if best.get(&v).is_none_or(|d| d.rank < decision.rank) {
                        best.insert(v, decision.clone());
                    }
                }
                Record::Installed { view, members } => {
                    if let Some(prev) = view.checked_sub(1)
                        && let (Some(d), Some(old)) = (best.get(&prev), views.get(&prev))
                        && &d.next_members(old) != members
                    {
                        return Err(format!(
                            "n{i} installed view {view} as {members:?} while the highest-ranked \
                             decision it logged for view {prev} (rank {}) makes {:?}",
                            d.rank,
                            d.next_members(old)
                        ));
                    }
                    views.insert(*view, members.clone());
                }
                // It joins again from here (a new member: state by transfer); its decisions
                // before belong to views it no longer runs (s29, ninety-third part).
                Record::StateDropped { .. } => {
                    views.clear();
                    best.clear();
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Every sequence in `earlier` is a prefix of `last` (nothing delivered in any life is lost or
/// delivered otherwise).
fn all_prefixes(earlier: &[Vec<Seq>], last: &Seq) -> Result<(), String> {
    for (life, seqs) in earlier.iter().enumerate() {
        if let Some(i) = (0..seqs.len()).find(|&i| !is_prefix(&seqs[i], last)) {
            return Err(format!(
                "n{i}'s deliveries of life {life} ({}) are not a prefix of the final sequence ({})",
                seqs[i].len(),
                last.len()
            ));
        }
    }
    Ok(())
}

/// What [`dead_view_then_first_fitting`] returns: the logs, what each member delivered per
/// life, and the first fitting's ballot `b1`.
type FirstFitting = (Vec<Vec<u8>>, Vec<Vec<Seq>>, u64);

/// Lives 0 and 1 of the second-fitting tests. Life 0 as in [`behind_the_dead_branch`] with two
/// joiners: 0, 5 and 6 install the dead view 1 = 0–6 (`N`), and 1–4 log only the join decision
/// `D` (rank 0). Life 1: 1–4 restart view 0 (0 and the joiners down) under ballot `b1` led by 1,
/// adopt `D` and fit it into `L + 1'` = 1–4, four of `N`'s seven (fix B holds). Returns the
/// logs, what each member delivered in lives 0 and 1, and `b1`; every one of 1–4 logged `b1`'s
/// decision `D'` (fail 0) and its promise.
fn dead_view_then_first_fitting(seed: u64, base: &Path) -> Result<FirstFitting, String> {
    let joiners = [N, N + 1];
    let u = N + joiners.len();
    let (mut logs, before) = joins_into_view_1(seed, base, &joiners, 0)?;
    for i in 1..N {
        cut_view_1(&mut logs, i, base, u);
    }
    let four = [1, 2, 3, 4];
    let mut l = Life::start_in(seed + 1000, base, &logs, &four, 1, u);
    l.until_restarted(&four)?;
    if let Some(d) = &l.disagreement {
        return Err(format!("virtual synchrony in life 1: {d}"));
    }
    let (logs, life1) = l.shutdown();
    let ids = |v: &[usize]| v.iter().map(|&i| NodeId(i as u32)).collect::<Vec<_>>();
    let mut b1 = None;
    for i in four {
        let d = ballot_decision_for(&logs[i], 0);
        match d {
            Some(d) if d.next_members(&ids(&[0, 1, 2, 3, 4])) == ids(&four) => {
                b1 = Some(d.rank);
            }
            _ => return Err(format!("n{i} did not log the first fitting: {d:?}")),
        }
    }
    let b1 = b1.ok_or("no first fitting")?;
    Ok((logs, vec![before, life1], b1))
}

/// Runs `l` for ten times the absent timeout: none of `waiting` may run a view, and none of
/// `bound` (members of `waiting` whose logs end before view 1) may restart inside the view 1
/// `dead` (it could reach it only by catching up from a decision ranked below one it promised
/// or logged). Returns an error naming the first that does.
fn none_runs(
    l: &mut Life,
    waiting: &[usize],
    bound: &[usize],
    dead: &[NodeId],
) -> Result<(), String> {
    let t0 = l.sim.now();
    while l.sim.now().saturating_since(t0) < ABSENT * 10 {
        l.step(false);
        if let Some(d) = &l.disagreement {
            return Err(format!("virtual synchrony in life {}: {d}", l.life));
        }
        if let Some(&i) = waiting.iter().find(|&&i| runs_a_view(l, i)) {
            return Err(format!("n{i} ran a view: {}", l.state()));
        }
        let inside = |i: usize| {
            (l.groups[i].as_ref()).is_some_and(|g| {
                g.gms().restarting().is_some()
                    && g.view().is_some_and(|v| v.id == 1 && v.members == dead)
            })
        };
        if let Some(&i) = bound.iter().find(|&&i| inside(i)) {
            return Err(format!(
                "n{i} caught up into the view 1 {dead:?}: {}",
                l.state()
            ));
        }
    }
    Ok(())
}

/// The second fitting with `L + 1'` installed by nobody (s27, seventy-third part of
/// `docs/MEMBERSHIP.md`, forms 1 and 3). Lives 0 and 1 from [`dead_view_then_first_fitting`]
/// (view 0 = 0–4, the dead view 1 `N` = 0–6 installed by 0, 5 and 6; `L + 1'` = 1–4 under
/// `b1`, led by 1), then log surgery: nobody logged `Installed { 1 }`, 1 and 2 logged `D'`,
/// and 3 and 4 keep only `b1`'s promise. Life 2: 2–4 restart view 0 (1, 0 and the joiners
/// down); 2 leads `b2`, adopts `D'` (the highest decision; it admits nobody, so fix B does not
/// apply) and fits it into `L + 1''` = 2–4 (1 fails too), a majority of view 0 but three of
/// `N`'s seven. They run it and deliver. The member of `L + 1'` left out, `m` = 1, holds `D'`.
///
/// With `third`, life 2's logs are cut as well (nobody installed `L + 1''`; 2 and 3 logged
/// `D''`, 4 keeps only `b2`'s promise), and life 3 is a third restart: 1–3 restart view 0, 1
/// leads `b3`, adopts `D''` and fits it into 2–3 (4 fails; 1, failed by `D''`, is removed and
/// joins again); 2 and 3 run it. Then `m` = 4, whose log holds `D` and promises only (`b1`,
/// `b2`).
///
/// The last life starts the dead side (0, 5, 6) and `m`: with `m`, four of `N`'s seven. For
/// ten absent timeouts nobody may run a view and `m` may not restart inside `N` (1 holds a
/// decision above `D` with another next view, `Gms::dead_ahead`; 4 holds promises above `D` and
/// reads no majority of view 0, fix A). Then the operator starts the live members and restarts
/// every stopped one: all seven end in one running view, delivering identically, with no view
/// id run with two member lists (in any life, and across lives from view 2 on), every
/// member's installs as its highest logged decision makes them ([`installed_as_decided`]), and
/// every delivery of every life a prefix of the final sequence.
fn refitted(seed: u64, third: bool) -> Result<(), String> {
    let u = N + 2;
    let base = dir(if third { "refitted-twice" } else { "refitted" }, seed);
    let ids = |v: &[usize]| v.iter().map(|&i| NodeId(i as u32)).collect::<Vec<_>>();
    let mut across = RunAcross::from(2);
    let (mut logs, mut lives, b1) = dead_view_then_first_fitting(seed, &base)?;
    for i in 1..N {
        cut_view_1(&mut logs, i, &base, u);
    }
    for i in [3, 4] {
        logs[i] = without_decision(&logs[i], b1);
    }
    let log_of = |l: &Life, i: usize| l.groups[i].as_ref().unwrap().gms().log().bytes().to_vec();
    let fitted_again = |log: &[u8], above: u64, into: &[usize]| {
        ballot_decision_for(log, 0)
            .filter(|d| d.rank > above && d.next_members(&ids(&[0, 1, 2, 3, 4])) == ids(into))
            .map(|d| d.rank)
    };
    let three = [2, 3, 4];
    let mut l = Life::start_in(seed + 2000, &base, &logs, &three, 2, u);
    l.until_restarted(&three)?;
    let b2 = fitted_again(&log_of(&l, 2), b1, &three)
        .ok_or_else(|| format!("life 2 did not fit D' into 2-4: {}", l.state()))?;
    if !third {
        for _ in 0..400 {
            l.step(true);
        }
        for _ in 0..1000 {
            l.step(false);
        }
    }
    across.note(&l)?;
    let (next, life2) = l.shutdown();
    logs = next;
    lives.push(life2);
    let (live, m, holds) = if !third {
        (vec![2, 3, 4], 1, b1)
    } else {
        for i in 2..N {
            cut_view_1(&mut logs, i, &base, u);
        }
        logs[4] = without_decision(&logs[4], b2);
        let (up, two) = ([1, 2, 3], [2, 3]);
        let mut l = Life::start_in(seed + 3000, &base, &logs, &up, 3, u);
        l.until_restarted(&two)?;
        if fitted_again(&log_of(&l, 2), b2, &two).is_none() {
            return Err(format!("life 3 did not fit D'' into 2-3: {}", l.state()));
        }
        // 1, removed by that view, crashes before it joins again (the last life's operator
        // restart brings it back; a log that starts with a transfer would make it a state
        // holder whose replay starts past position 0, which this harness does not track).
        if let Some(g) = l.groups[1].take() {
            l.logs[1] = g.gms().log().bytes().to_vec();
        }
        l.sim.crash(NodeId(1));
        for _ in 0..400 {
            l.step(true);
        }
        for _ in 0..1000 {
            l.step(false);
        }
        across.note(&l)?;
        let (next, life3) = l.shutdown();
        logs = next;
        lives.push(life3);
        (vec![1, 2, 3], 4, 0)
    };
    let (_, rec) = MemLog::open(logs[m].clone());
    if rec.decision_for(0).is_none_or(|d| d.rank != holds) || rec.promised_for(0) < b1 {
        return Err(format!(
            "n{m}'s log does not hold the decision ranked {holds} as its highest for view 0"
        ));
    }
    let dead_side = [0, m, N, N + 1];
    let all: Vec<usize> = (0..u).collect();
    let mut l = Life::start_in(seed + 4000, &base, &logs, &dead_side, 5, u);
    none_runs(&mut l, &dead_side, &[m], &ids(&all))?;
    for &i in &live {
        l.start_late(i);
    }
    for i in dead_side {
        if l.groups[i].as_ref().is_some_and(|g| g.stopped().is_some()) {
            l.restart_member(i);
        }
    }
    let replayed = lives.iter().flatten().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &all, replayed, "every node")?;
    across.note(&l)?;
    let last = l.delivered[2].clone();
    let (logs, _) = l.shutdown();
    installed_as_decided(&logs)?;
    all_prefixes(&lives, &last)?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// [`refitted`], form 1: `D'` refitted by a second restart, `L + 1'` installed by nobody.
#[test]
fn a_refit_of_a_fitted_join_decision_keeps_the_dead_view_from_restarting() {
    check_seeds("restart_refitted", 3, |seed| refitted(seed, false));
}

/// [`refitted`], form 3: a third restart refits the second fitting's decision.
#[test]
fn a_third_restart_refitting_the_refit_keeps_the_dead_view_from_restarting() {
    check_seeds("restart_refitted_twice", 3, |seed| refitted(seed, true));
}

/// The second fitting with `L + 1'` installed by one member (s27, seventy-third part of
/// `docs/MEMBERSHIP.md`, form 2). Lives 0 and 1 from [`dead_view_then_first_fitting`], then log
/// surgery: 1 keeps `Installed { 1 }` = 1–4 (`L + 1'`), 2–4 lose it; 1–3 keep `D'` and 4 only
/// `b1`'s promise (1 installed counting 1–3, a majority of view 0, with 4 suspected after it
/// acknowledged; were `D'` at all of 2–4, life 2 would install it unchanged, each restoring it
/// as its decision). Life 2: 2–4 restart view 0 (1 down); 2 leads
/// `b2`, adopts `D'` and fits it into `L + 1''` = 2–4 (1 fails), then log surgery again: 2 keeps
/// `Installed { 1 }` = 2–4, 3 and 4 lose it and keep `D''`. So each view 1 was installed by
/// one member. Life 3: 1, 3 and 4 start (2, 0 and the joiners down): 1 restarts `L + 1'`, and
/// 3 and 4, with 1, would be three of its four. For ten absent timeouts nobody may run a view,
/// and neither 3 nor 4 may restart inside `L + 1'` (their `D''` ranks above `D'` and makes
/// another next view: `Gms::dead_ahead`, and fix A's bound, `Gms::below_promise`). Then the
/// operator starts everyone else and restarts every stopped member: all seven end in one
/// running view, delivering identically, with the checks of [`refitted`].
fn refitted_after_one_install(seed: u64) -> Result<(), String> {
    let u = N + 2;
    let base = dir("refitted-one-install", seed);
    let ids = |v: &[usize]| v.iter().map(|&i| NodeId(i as u32)).collect::<Vec<_>>();
    let mut across = RunAcross::from(2);
    let (mut logs, mut lives, b1) = dead_view_then_first_fitting(seed, &base)?;
    for i in 2..N {
        cut_view_1(&mut logs, i, &base, u);
    }
    logs[4] = without_decision(&logs[4], b1);
    let three = [2, 3, 4];
    let mut l = Life::start_in(seed + 2000, &base, &logs, &three, 2, u);
    l.until_restarted(&three)?;
    let log2 = l.groups[2].as_ref().unwrap().gms().log().bytes().to_vec();
    if !ballot_decision_for(&log2, 0)
        .is_some_and(|d| d.rank > b1 && d.next_members(&ids(&[0, 1, 2, 3, 4])) == ids(&three))
    {
        return Err(format!("life 2 did not fit D' into 2-4: {}", l.state()));
    }
    across.note(&l)?;
    let (mut logs, life2) = l.shutdown();
    lives.push(life2);
    for i in [3, 4] {
        cut_view_1(&mut logs, i, &base, u);
    }
    let up = [1, 3, 4];
    let mut l = Life::start_in(seed + 3000, &base, &logs, &up, 3, u);
    none_runs(&mut l, &up, &[3, 4], &ids(&[1, 2, 3, 4]))?;
    for i in [2, 0, N, N + 1] {
        l.start_late(i);
    }
    for i in up {
        if l.groups[i].as_ref().is_some_and(|g| g.stopped().is_some()) {
            l.restart_member(i);
        }
    }
    let all: Vec<usize> = (0..u).collect();
    let replayed = lives.iter().flatten().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &all, replayed, "every node")?;
    across.note(&l)?;
    let last = l.delivered[2].clone();
    let (logs, _) = l.shutdown();
    installed_as_decided(&logs)?;
    all_prefixes(&lives, &last)?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// [`refitted_after_one_install`] over 3 seeds (`SQUALL_SEEDS`).
#[test]
fn a_refit_after_one_member_installed_the_first_fitting_keeps_both_from_restarting() {
    check_seeds(
        "restart_refitted_one_install",
        3,
        refitted_after_one_install,
    );
}

// s27 (seventy-second part of `docs/MEMBERSHIP.md`): a row read is not a promise.

/// What [`read_not_a_promise`] needs to call its moment reached.
const CLEAN_READ: &str = "4's row at 3 one view ahead while 3, having acknowledged the ballot \
                          that 0 decided, read 0-2 unsuspected without that decision, which 1 \
                          and 2 logged afterwards";

/// Member `i` starts now on the fabric (a late node) and restarts from its log like
/// [`Life::start_late`], but with `absent` as its `GmsConfig::restart_absent_timeout`.
fn start_late_with_absent(l: &mut Life, i: usize, absent: Duration) {
    l.sim.start_node(NodeId(i as u32));
    let t = l.nodes[i].take().unwrap();
    let (log, rec) = MemLog::open(l.logs[i].clone());
    let rec = (!rec.records.is_empty()).then_some(rec);
    let mut cfg = config(&l.base, i, l.u);
    cfg.gms.restart_absent_timeout = absent;
    l.groups[i] = Some(Group::new(t, cfg, log, rec.as_ref()).unwrap());
}

/// The rank of the highest-ranked decision for view 0 in member `i`'s log (0: none).
fn logged_rank_for_0(l: &Life, i: usize) -> u64 {
    let g = l.groups[i].as_ref().unwrap();
    let (_, rec) = MemLog::open(g.gms().log().bytes().to_vec());
    rec.decision_for(0).map_or(0, |d| d.rank)
}

/// Life 0 of [`read_not_a_promise`] and its variants: view 0 = 0–4, `joiners` join in one
/// decision that 4 and the joiners install as view 1, and 0–3's logs cut back to view 0 (they
/// crashed after logging the decision, before logging the view). Returns the logs and life 0's
/// deliveries.
fn joins_cut_to_view_0(
    seed: u64,
    base: &Path,
    joiners: &[usize],
) -> Result<(Vec<Vec<u8>>, Vec<Seq>), String> {
    let u = N + joiners.len();
    let (mut logs, before) = joins_into_view_1(seed, base, joiners, 4)?;
    for i in 0..4 {
        cut_view_1(&mut logs, i, base, u);
    }
    Ok((logs, before))
}

/// An error unless 0–3's `logs` each hold the join decision for view 0 (an ordinary rank) and
/// no promise.
fn join_decision_alone(logs: &[Vec<u8>]) -> Result<(), String> {
    use squall_membership::restart::attempt_of;
    for (i, log) in logs.iter().enumerate().take(4) {
        let (_, rec) = MemLog::open(log.clone());
        if rec.decision_for(0).is_none_or(|d| attempt_of(d.rank) > 0) || rec.promised_for(0) > 0 {
            return Err(format!("n{i} does not hold the join decision alone"));
        }
    }
    Ok(())
}

/// Steps `l` until 0 logged its restart ballot's decision, with `q` acknowledging that ballot
/// and kept by it; returns the ballot's rank. An error after 30 ms of virtual time, or if 0
/// decided without `q`.
fn until_0_decides_with(l: &mut Life, q: usize) -> Result<u64, String> {
    use squall_membership::restart::attempt_of;
    let t0 = l.sim.now();
    loop {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(30) {
            return Err(format!("0 decided no restart ballot: {}", l.state()));
        }
        l.step(false);
        let g = l.groups[0].as_ref().unwrap();
        if let Some(d) = g.gms().decision().filter(|d| attempt_of(d.rank) > 0) {
            let v0 = g.view().unwrap().members.clone();
            let acked =
                (l.groups[q].as_ref().unwrap().gms().proposal()).is_some_and(|(r, _)| r == d.rank);
            if !acked || !d.next_members(&v0).contains(&NodeId(q as u32)) {
                return Err(format!("0 decided {d:?} without 3: {}", l.state()));
            }
            return Ok(d.rank);
        }
    }
}

/// Whether every member of `live` restarted and every member of `dead` stopped or restarted.
fn settled(l: &Life, live: &[usize], dead: &[usize]) -> bool {
    live.iter().all(|&i| l.restarted(i))
        && dead.iter().all(|&i| {
            (l.groups[i].as_ref()).is_some_and(|g| g.stopped().is_some() || l.restarted(i))
        })
}

/// The end of [`read_not_a_promise`] and its crash variant, once the partition settled: 0–2
/// replayed identically with life 0's deliveries (`before`) a prefix; then a total restart of
/// every node on a fresh fabric must restart 0–2 and end in one running view, delivering
/// identically, with every earlier delivery a prefix. Returns whether 1 and 2 logged `b`'s
/// decision; removes `base`.
fn replayed_then_total_restart(
    l: Life,
    seed: u64,
    base: &Path,
    before: &[Seq],
    b: u64,
) -> Result<bool, String> {
    let (u, live) = (l.u, [0, 1, 2]);
    let echoed = [1, 2].iter().all(|&i| logged_rank_for_0(&l, i) == b);
    let replay = l.delivered[live[0]].clone();
    if let Some(i) = live.iter().find(|&&i| l.delivered[i] != replay) {
        return Err(format!("n{i} replayed differently"));
    }
    if let Some(i) = (0..u).find(|&i| !is_prefix(&before[i], &replay)) {
        return Err(format!("n{i}'s deliveries are not a prefix of the replay"));
    }
    let (logs, life1) = l.shutdown();
    let all: Vec<usize> = (0..u).collect();
    let mut l = Life::start_in(seed + 2000, base, &logs, &all, 2, u);
    let restarted = l.until_restarted(&live);
    if let Some(d) = &l.disagreement {
        return Err(format!("virtual synchrony after the total restart: {d}"));
    }
    restarted?;
    let replay = l.delivered[0].clone();
    if let Some(i) =
        (0..u).find(|&i| !is_prefix(&before[i], &replay) || !is_prefix(&life1[i], &replay))
    {
        return Err(format!(
            "n{i}'s deliveries are not a prefix of the last replay"
        ));
    }
    together_and_carrying_on(&mut l, &all, replay.len(), "every node")?;
    let _ = std::fs::remove_dir_all(base);
    Ok(echoed)
}

/// The s25 review's risk 2 (sixty-fifth part of `docs/MEMBERSHIP.md`, "At the s25 merge"),
/// built (s27, seventy-second part): a row read wedged with no decision above the peer's is not
/// a promise; its owner may log a higher-ranked decision right after the read.
///
/// Life 0: view 0 = 0–4, 5 and 6 join in one decision `D` (an ordinary rank `r`), and 4, 5 and
/// 6 install view 1 (the dead view, seven members); 0–3 crash after logging `D`, before logging
/// the view. Life 1 (one process each, no promise in any log): 0–3 restart view 0 and 4 its
/// view 1. 4's link comes up at 3 only (the [`Gate`] holds it at 0–2, which count 4 out after
/// a 300 µs absent timeout; their suspicion names 4's incarnation 0, which 3, linked to
/// incarnation 1, does not adopt), and a partition holds 4's writes to 3. The inspector 0
/// leads ballot `b`, 1–3 acknowledge it, and 0 decides `R`: `D` fitted (the joins dropped, 4
/// failed), next view [0, 1, 2, 3], four of the dead view's seven, so fix B holds. The moment
/// the test sees `R` (0's writes are delayed 10 µs, so it is still in flight to 3), the
/// partitions become {0, 1, 2} | {3, 4, 5, 6}, and 5 and 6 start. 3 then holds promise `b` and
/// `D`, and reads 4 one view ahead with `D` and 0–2 wedged at view 0 with nothing above `r`.
/// 1 and 2 log and echo `R`; 0–2 install `R`'s view 1 once they suspect 3 (restart mode's
/// `try_install` needs only the echoes of the members they do not suspect), then a view 2
/// without 3.
///
/// Before s27, 3 counted 0–2 as read and cleared (`Gms::promise_cleared`), caught up into the
/// dead view 1 and restarted it with 4–6, installing view 2 = [3, 4, 5, 6] beside 0–2's view 2
/// = [0, 1, 2], both delivering. Now 3 does not clear while the ballot it followed in this
/// process may still be decided by its leader (`Gms::ballot_may_decide`); it stops with
/// [`StopReason::RestartCutOff`] at view 0, and 4–6 at view 1. Checked: no view id run with two
/// member lists, no member of 3–6 running a view under the partition, 0–2 replaying identically
/// with life 0's deliveries a prefix; then a total restart of all seven ends in one running
/// view, delivering identically, with every earlier delivery a prefix. The moment
/// ([`CLEAN_READ`]): 3 polled at view 0 with 4's row landed and 0–2 unsuspected, before
/// logging `R`, and 1 and 2 logged `R` afterwards.
fn read_not_a_promise(seed: u64) -> Result<Moment, String> {
    let joiners = [N, N + 1];
    let u = N + joiners.len();
    let base = dir("read-not-a-promise", seed);
    let (logs, before) = joins_cut_to_view_0(seed, &base, &joiners)?;
    join_decision_alone(&logs)?;
    let (live, dead, q) = ([0, 1, 2], [3, 4, 5, 6], 3);
    let ids = |v: &[usize]| v.iter().map(|&i| NodeId(i as u32)).collect::<Vec<_>>();
    // Every node late; 0-3 and 4 start at once. 4's link never comes up at 0-2 (they count it
    // out after a short absent timeout, and their suspicion names incarnation 0, which 3,
    // linked to 4's incarnation 1, does not adopt), and 4's writes to 3 wait behind a partition
    // (shorter than the op timeout) until 0 decided.
    let mut l = Life::start_in(seed + 1000, &base, &logs, &[], 1, u);
    for &i in &live {
        l.held[i].set(Some(NodeId(4)));
    }
    l.sim.partition(&ids(&[0, 1, 2, q]), &ids(&[4, 5, 6]));
    for &i in &live {
        start_late_with_absent(&mut l, i, Duration::from_micros(300));
    }
    l.start_late(q);
    l.start_late(4);
    // 0's writes land 10 µs late: its decision is still in flight to 3 when the test sees it.
    l.sim.delay(NodeId(0), Duration::from_micros(10));
    let b = until_0_decides_with(&mut l, q)?;
    if let Some(i) = [1, 2, q]
        .into_iter()
        .find(|&i| logged_rank_for_0(&l, i) == b)
    {
        return Err(format!("n{i} logged the decision before the partition"));
    }
    // 4's writes reach 3 from now on; 0-2 and 3-6 are cut off from each other for good.
    l.sim.heal();
    l.sim.partition(&ids(&live), &ids(&dead));
    for i in 5..u {
        l.start_late(i);
    }
    let heartbeat = l.groups[q]
        .as_ref()
        .unwrap()
        .gms()
        .sst()
        .schema()
        .heartbeat();
    let clean_read = |l: &Life| {
        let g = l.groups[q].as_ref().unwrap();
        let sst = g.gms().sst();
        g.gms().restarting().is_some()
            && g.view().is_some_and(|v| v.id == 0)
            && sst
                .row_of(NodeId(4))
                .is_some_and(|r| sst.get(r, heartbeat) > 0)
            && live.iter().all(|&i| {
                sst.row_of(NodeId(i as u32))
                    .is_some_and(|r| !sst.is_suspected(r))
            })
            && logged_rank_for_0(l, q) < b
    };
    let in_dead_view = |l: &Life| {
        let g = l.groups[q].as_ref().unwrap();
        g.gms().restarting().is_some()
            && g.view().is_some_and(|v| v.id == 1 && v.contains(NodeId(4)))
    };
    let (mut armed, mut caught_up) = (false, false);
    let t0 = l.sim.now();
    while !settled(&l, &live, &dead) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("under the partition: {}", l.state()));
        }
        armed |= clean_read(&l);
        l.step(false);
        caught_up |= in_dead_view(&l);
        if let Some(d) = &l.disagreement {
            return Err(format!(
                "virtual synchrony: {d} (3 read 4's row with 0-2 clean: {armed}; caught up into \
                 the dead view 1: {caught_up}): {}",
                l.state()
            ));
        }
    }
    if let Some(i) = dead.iter().find(|&&i| l.restarted(i)) {
        // Both sides carry on: what each member delivers of the messages of this life.
        let state = l.state();
        for _ in 0..400 {
            l.step(true);
        }
        for _ in 0..1000 {
            l.step(false);
        }
        let new: Vec<usize> = (0..u)
            .map(|j| {
                (l.delivered[j].iter())
                    .filter(|(_, m)| m.first() == Some(&1))
                    .count()
            })
            .collect();
        return Err(format!(
            "n{i} ran a view on the dead side (3 caught up into the dead view 1: {caught_up}): \
             {state}; then each member delivered {new:?} messages of this life ({:?})",
            l.disagreement
        ));
    }
    // The operator restarts every node (a total restart on a fresh fabric): 0-2 restart their
    // view 2, 3 and 4-6 find the group past their logs and join again by transfer.
    let echoed = replayed_then_total_restart(l, seed, &base, &before, b)?;
    if caught_up {
        return Err("3 caught up into the dead view 1".into());
    }
    Ok(if armed && echoed {
        Moment::Reached
    } else {
        Moment::Missed
    })
}

/// [`read_not_a_promise`] over 3 seeds (`SQUALL_SEEDS`), each of which must reach the moment.
#[test]
fn a_member_that_promised_a_ballot_does_not_catch_up_on_reads_its_decision_follows() {
    check_seeds_reaching(
        "restart_read_not_a_promise",
        3,
        CLEAN_READ,
        read_not_a_promise,
    );
}

// ---- s27 (seventy-sixth part of `docs/MEMBERSHIP.md`): restart liveness corners ----

/// The events logged while an [`EventLog`] is the thread's subscriber, each as its fields
/// (`name=value`, the message included): those of the levels and text it was made to keep.
#[derive(Clone)]
struct EventLog {
    events: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Whether events of this level are kept.
    level: fn(&tracing::Level) -> bool,
    /// Text a kept event's fields contain (empty: any).
    needle: &'static str,
}

impl EventLog {
    /// The `warn` (and `error`) events.
    fn warnings() -> Self {
        EventLog {
            events: Default::default(),
            level: |l| *l <= tracing::Level::WARN,
            needle: "",
        }
    }

    /// The joins a leader proposed past the bound on its hold for a member's readmission
    /// (`Gms::readmission_held`'s `warn`; s29, ninety-fourth part), e.g. `node=Some(NodeId(4))`.
    fn held_joins() -> Self {
        EventLog {
            events: Default::default(),
            level: |l| *l == tracing::Level::WARN,
            needle: "without that readmission",
        }
    }

    /// The readmissions in restart mode through the linked clause only (`Gms::readmit_restarted`'s
    /// `info`; s29 follow-up of the ninety-fourth part), e.g. `me=n0 node=n3 linker=n2 …`.
    fn linked_readmissions() -> Self {
        EventLog {
            events: Default::default(),
            level: |l| *l == tracing::Level::INFO,
            needle: "links the new incarnation",
        }
    }

    /// The rounds a member skipped for a peer's block read torn (`Gms::poll`'s `trace` event
    /// "a peer's block is landing"; s28, eighty-eighth part), e.g. `me=n3 row=2
    /// block="decision" …`.
    fn torn_rounds() -> Self {
        EventLog {
            events: Default::default(),
            level: |l| *l == tracing::Level::TRACE,
            needle: "block is landing",
        }
    }

    /// The events kept so far that contain every one of `parts`.
    fn with(&self, parts: &[&str]) -> Vec<String> {
        let events = self.events.lock().unwrap();
        (events.iter())
            .filter(|e| parts.iter().all(|p| e.contains(p)))
            .cloned()
            .collect()
    }
}

impl tracing::Subscriber for EventLog {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        (self.level)(m.level())
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, e: &tracing::Event<'_>) {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={v:?} ", f.name()));
            }
        }
        let mut s = Fields(String::new());
        e.record(&mut s);
        if s.0.contains(self.needle) {
            self.events.lock().unwrap().push(s.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// How the joiner 4 of the adopted decision stays away in [`adopted_joiner_away`].
#[derive(Clone, Copy, Debug)]
enum Away {
    /// Its process is not started.
    Down,
    /// It starts as a new process (fresh log, asking to join) configured otherwise (another
    /// epoch window): the settings digest differs, so `Gms::wanted` never proposes its join.
    Misconfigured,
}

/// s27: the cost the sixty-sixth part's "s26 follow-up" accepted and did not test. Lives 0 and
/// 1 as in [`rejoiners_decided_then_interrupted`]: 0 and 1 logged the restart ballot's
/// decision `D` = [Fail 2, Join 3, Join 4] of view 2 (2 was down) and nobody installed view 3.
/// 2's log gets a promise of a later ballot of view 2 (led by 1, never decided: a restart
/// attempt between the lives), so that it does not accept `D`'s ballot when 0 re-publishes it.
/// Life 2: 0, 1, 2 and 3 start, and the joiner 4 stays away (`away`). 2 restarts without `D`,
/// so `D` is not echoed by every counted member and is not installed as logged; 0 leads a new
/// ballot and adopts it, and `D` may have been installed (0 and 1 hold it). Every member of view 2 that `D` keeps is here, so the stop check does
/// not stop; the inspector cannot decide `D` unchanged (4 is not here) and must not fit it (the
/// fitted view 0, 1 is no majority of `D`'s next view 0, 1, 3, 4), so the restart waits.
/// Checked for 20 ms of virtual time: nobody stopped (but a misconfigured 4, which must stop
/// with `StopReason::SettingsDiffer`, with the inspector's warning that its join is refused),
/// nobody runs a view, and the inspector's warning names 4 as not here. Then the operator's action: 4 started (from its own log when `Down`; as a new,
/// correctly configured process when `Misconfigured`). All five must end active in one running
/// view (2, which `D` removes, joins again), delivering identically, with view 3 `D`'s next
/// view, no view id run with two member lists, and life 0's deliveries a prefix.
fn adopted_joiner_away(seed: u64, away: Away) -> Result<Moment, String> {
    let warns = EventLog::warnings();
    let _guard = tracing::subscriber::set_default(warns.clone());
    let base = dir(&format!("adopted-joiner-{away:?}"), seed);
    let four = [0, 1, 3, 4];
    let (logs, before) = crashes_in_turn(seed, &base, &[4, 3])?;
    let mut l = Life::start(seed + 1000, &base, &logs, &four, 1);
    if !until_0_and_1_log_the_ballot_admitting_3_and_4(&mut l) {
        return Ok(Moment::Missed);
    }
    let (mut logs, _) = l.shutdown();
    cut_installed(&mut logs, &base, 3, N);
    promised_later_than_logged(&mut logs, 2, 1);
    let mut l = Life::start(seed + 2000, &base, &logs, &[0, 1, 2, 3], 2);
    if let Away::Misconfigured = away {
        l.sim.start_node(NodeId(4));
        let t = l.nodes[4].take().unwrap();
        let mut cfg = config(&base.join("other"), 4, N);
        cfg.epoch.window *= 2;
        l.groups[4] = Some(Group::joining(t, cfg, MemLog::default()).unwrap());
    }
    let t0 = l.sim.now();
    while l.sim.now().saturating_since(t0) < Duration::from_millis(20) {
        l.step(false);
    }
    for i in 0..N {
        let Some(g) = &l.groups[i] else {
            continue;
        };
        let settings = matches!(g.gms().stopped(), Some(StopReason::SettingsDiffer { .. }));
        match (i, g.stopped()) {
            (4, _) if settings => {}
            (4, _) => return Err(format!("the misconfigured 4 did not stop: {}", l.state())),
            (_, Some(why)) => return Err(format!("n{i} stopped while 4 was away: {why}")),
            _ if g.view().is_some_and(|v| v.id > 2) || runs_a_view(&l, i) => {
                return Err(format!(
                    "n{i} runs a view while 4 was away: {}; views run {:?}; warnings {:?}",
                    l.state(),
                    l.running,
                    warns.with(&["adopts"])
                ));
            }
            _ => {}
        }
    }
    let waiting = warns.with(&["waiting for more of its members", "not_here=[NodeId(4)]"]);
    if waiting.is_empty() {
        return Err(format!(
            "no warning naming 4 as not here; warnings: {:?}",
            warns.with(&["adopts"])
        ));
    }
    if let Away::Misconfigured = away
        && warns
            .with(&["join refused: its settings differ", "Some(NodeId(4))"])
            .is_empty()
    {
        return Err("no warning that 4's join is refused for its settings".into());
    }
    match away {
        Away::Down => l.start_late(4),
        Away::Misconfigured => l.rejoin_fresh(4),
    }
    let all: Vec<usize> = (0..N).collect();
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &all, replayed, "every node")?;
    if let Some(i) = (0..N).find(|&i| !is_prefix(&before[i], &l.delivered[0])) {
        return Err(format!("n{i}'s life-0 deliveries are not a prefix of n0's"));
    }
    let mut view_3 = (l.running.get(&3)).map_or(Vec::new(), |(_, m)| m.clone());
    view_3.sort();
    if view_3 != four.map(|i| NodeId(i as u32)) {
        return Err(format!(
            "view 3 is not D's next view 0, 1, 3, 4: {view_3:?}"
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(Moment::Reached)
}

#[test]
fn a_restart_whose_adopted_decisions_joiner_stays_down_waits_naming_it_and_completes_once_it_starts()
 {
    check_seeds_reaching(
        "adopted_joiner_down",
        2,
        "the ballot decision admitting 3 and 4 logged at 0 and 1",
        |seed| adopted_joiner_away(seed, Away::Down),
    );
}

#[test]
fn a_restart_whose_adopted_decisions_joiner_is_misconfigured_waits_and_completes_once_it_is_corrected()
 {
    check_seeds_reaching(
        "adopted_joiner_misconfigured",
        2,
        "the ballot decision admitting 3 and 4 logged at 0 and 1",
        |seed| adopted_joiner_away(seed, Away::Misconfigured),
    );
}

/// Appends to member `i`'s log a promise of a restart ballot of the view its log ends at, led
/// by member `leader`, ranked above every ballot `logs` hold for that view: a restart attempt
/// that `i` promised and nobody decided.
fn promised_later_than_logged(logs: &mut [Vec<u8>], i: usize, leader: u64) {
    let (_, rec) = MemLog::open(logs[i].clone());
    let vid = (rec.records.iter())
        .filter_map(|r| match r {
            Record::Installed { view, .. } => Some(*view),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let top = (logs.iter())
        .flat_map(|b| MemLog::open(b.clone()).1.records)
        .filter_map(|r| match r {
            Record::Decided { decision: d, .. } if d.trim.view == vid => Some(d.rank),
            Record::Promised { view, rank } if view == vid => Some(rank),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let later =
        squall_membership::restart::ballot(squall_membership::restart::attempt_of(top) + 1, leader);
    let mut log = MemLog::default();
    for r in &rec.records {
        log.append(r).unwrap();
    }
    log.append(&Record::Promised {
        view: vid,
        rank: later,
    })
    .unwrap();
    logs[i] = log.bytes().to_vec();
}

/// The extra one-way latency of the new incarnation's ops in [`expected_row_late`]: its row
/// lands at the slow member this long after that member readmitted it (well below the
/// 1.5 ms suspicion timeout, so that no member suspects it for the gap).
const ROW_DELAY: Duration = Duration::from_micros(300);

/// s27 (the fifty-ninth part's "Left"): a readmission through `Gms::settle_expected` while the
/// new incarnation's row is still the old one's. As in [`crash_rejoin_late_link`], member `x`
/// crashes and starts at once as a new process asking to join, and member `k`'s link to it is
/// held back, here in both directions (`x` holds `k`'s link too, so it posts nothing to `k`),
/// until `k` installed the view naming the new incarnation and waits for its link
/// (`Gms::expected_incarnation`), and 1.6 ms more (the old incarnation's last heartbeat is then
/// older than the 1.5 ms suspicion timeout). Then `x`'s ops are slowed by [`ROW_DELAY`] and
/// both links released: `k` readmits the incarnation as soon as its link is up, while `x`'s row at `k`
/// still holds the old incarnation's frozen words (its heartbeat among them) for about
/// `ROW_DELAY`. The moment: `k` readmitted it with the row's heartbeat still the frozen one.
/// Checked: no view run after the one naming the new incarnation lacks it (nobody counted it
/// failed on its frozen row, `k` included), all five end in one running view, active,
/// delivering identically, and the new incarnation delivers messages of its own.
fn expected_row_late(seed: u64, x: usize, k: usize) -> Result<Moment, String> {
    let base = dir(&format!("expected-row-late-{x}-{k}"), seed);
    let all = [0, 1, 2, 3, 4];
    let mut l = Life::start(seed, &base, &vec![Vec::new(); N], &all, 0);
    for _ in 0..1500 {
        l.step(true);
    }
    let node = NodeId(x as u32);
    l.held[k].set(Some(node));
    l.held[x].set(Some(NodeId(k as u32)));
    l.rejoin_fresh(x);
    let t1 = l.sim.now();
    let expects = |l: &Life| {
        let g = l.groups[k].as_ref().unwrap();
        g.view().is_some_and(|v| v.contains(node)) && g.gms().expected_incarnation(node).is_some()
    };
    while !expects(&l) && l.sim.now().saturating_since(t1) < Duration::from_millis(1) {
        l.step(true);
    }
    let mut moment = Moment::Missed;
    let named_in = (l.groups[k].as_ref().and_then(|g| g.view())).map_or(0, |v| v.id);
    if expects(&l) {
        let sst = l.groups[k].as_ref().unwrap().gms().sst();
        let row = sst.row_of(node).unwrap();
        let frozen = sst.get(row, sst.schema().heartbeat());
        // Held a while longer: the old incarnation's last heartbeat here is then more than a
        // suspicion timeout old when the row is readmitted.
        let t2 = l.sim.now();
        while l.sim.now().saturating_since(t2) < Duration::from_micros(1600) {
            l.step(true);
        }
        l.sim.delay(node, ROW_DELAY);
        l.held[k].set(None);
        l.held[x].set(None);
        let t2 = l.sim.now();
        while l.sim.now().saturating_since(t2) < 2 * ROW_DELAY {
            l.step(true);
            let sst = l.groups[k].as_ref().unwrap().gms().sst();
            if !sst.is_suspected(row) {
                if sst.get(row, sst.schema().heartbeat()) == frozen {
                    moment = Moment::Reached;
                }
                break;
            }
        }
        l.sim.delay(node, Duration::ZERO);
    } else {
        eprintln!(
            "seed {seed}: n{k} never expected n{x}'s new incarnation: {}",
            l.state()
        );
        l.held[k].set(None);
        l.held[x].set(None);
    }
    let before = l.delivered[k].len();
    together_and_carrying_on(&mut l, &all, before, "the restarted member")?;
    if let Some((id, (i, m))) =
        (l.running.iter()).find(|(id, (_, m))| **id >= named_in && !m.contains(&node))
    {
        return Err(format!("n{i} ran view {id} without n{x}: {m:?}"));
    }
    if !delivered_own(&l, x, 0, before as u64) {
        return Err("the restarted member delivered nothing of its own".into());
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(moment)
}

#[test]
fn a_member_that_readmits_an_expected_incarnation_before_its_row_lands_keeps_it() {
    check_seeds_reaching(
        "expected_row_late",
        2,
        "n4 readmitting the new n1 it expects while n1's row is still the old one's",
        |seed| expected_row_late(seed, 1, 4),
    );
}

/// s27 (the sixty-sixth part's "Left", item 4 of the seventy-sixth part): in
/// [`refit_of_a_ballot_admitting_rejoiners`] the stop check stopped 0 needlessly at seeds 0, 1,
/// 4 and 11 (of 12), and the test's operator step restarted it. Since the s26 follow-up the
/// check waits while the adopted decision admits members and no member of the view that its
/// next view keeps is counted out, so nobody stops there. Pinned at those four seeds: every
/// node must still run, unstopped, when the operator's step comes. Fails with that early
/// return reverted, at seed 0 ("n0 stopped before the operator's step: … restart of view 3: it
/// adopts a logged decision whose next view is …"); with it reverted, 0 stops at each of the
/// four seeds and at no other of the 12.
#[test]
fn regression_refit_seeds_0_1_4_11_the_stop_check_stopped_the_inspector_needlessly() {
    for seed in [0, 1, 4, 11] {
        match refit_rejoiners(seed, true) {
            Ok(Moment::Reached) => {}
            Ok(Moment::Missed) => panic!(
                "{}",
                missed(
                    seed,
                    "the inspector's ballot decision admitting rejoiners logged"
                )
            ),
            Err(why) => panic!("seed {seed}: {why}"),
        }
    }
}

// ---- s27 (seventy-second part of `docs/MEMBERSHIP.md`, "s27 follow-up: review findings") ----

/// What [`lost_ballot_leader`] needs to call its moment reached.
const LOST_LEADER: &str = "1-3 acknowledging 0's ballot, 0 crashed before deciding it, and 4's \
                           row one view ahead landed at 1-3 before they counted it out";

/// The review's finding 1 on the seventy-second part, built (s27): one lost ballot leader froze
/// the restart for good, silently.
///
/// Life 0 as in [`read_not_a_promise`]: view 0 = 0–4, 5 and 6 join in one decision `D`, 4–6
/// install view 1 (the dead view `V_D`, seven members), 0–3 crash after logging `D`, before
/// logging the view. Life 1: 0–3 restart view 0, 4 its view 1; 4's link is held at 0–3 (the
/// [`Gate`]). 0 leads ballot `b` (it counts 4, not yet counted out, so it cannot commit), 1–3
/// acknowledge it, and 0 crashes before deciding. Then 4's link comes up at 1–3, before their
/// absent timeout, and 5 and 6 start. 1–3 read 4 one view ahead with `D`, below their promise
/// `b`, whose leader shows no decision: before the fix `Gms::ballot_may_decide` held for good
/// once they suspected 0 (a suspected leader shows nothing), so they never caught up; 1 led a
/// second ballot counting 4, which never acknowledges at view 0; nothing stopped, and 4–6
/// waited with three of `V_D`'s seven logs. Now the members that promised a later ballot
/// without holding `b`'s decision, with 4 (one view ahead below `b`), are a majority of view 0
/// that never echoes `b`'s decision, so `b` cannot install, and 1–3 catch up into `V_D` and
/// restart it with 4–6, installing view 2 = [1 … 6].
///
/// Checked: 1–6 run one view within 40 ms of virtual time after 0's crash (the error names
/// where each member hangs otherwise); 1–3 warned, naming `b` and its leader 0, while the
/// ballot blocked their catch-up; no view id run with two member lists; then 0 restarts (its
/// log holds view 0 and `b`'s promise), finds the group two views past it and joins again by
/// transfer, and all seven end in one running view, delivering identically, with life 0's
/// deliveries a prefix.
fn lost_ballot_leader(seed: u64) -> Result<Moment, String> {
    use squall_membership::restart::attempt_of;
    let warns = EventLog::warnings();
    let _guard = tracing::subscriber::set_default(warns.clone());
    let joiners = [N, N + 1];
    let u = N + joiners.len();
    let base = dir("lost-ballot-leader", seed);
    let (logs, before) = joins_cut_to_view_0(seed, &base, &joiners)?;
    let followers = [1, 2, 3];
    let mut l = Life::start_in(seed + 1000, &base, &logs, &[], 1, u);
    for i in 0..4 {
        l.start_late(i);
    }
    // Until 1-3 acknowledged 0's ballot (0 counts 4, absent but not yet counted out).
    let t0 = l.sim.now();
    let b = loop {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(3) {
            return Ok(Moment::Missed);
        }
        l.step(false);
        let g = l.groups[0].as_ref().unwrap();
        let Some((b, _)) = g.gms().proposal().filter(|(b, _)| attempt_of(*b) > 0) else {
            continue;
        };
        if g.gms().decision().is_some_and(|d| d.rank == b) {
            return Err(format!("0 decided its ballot counting 4: {}", l.state()));
        }
        let acked = |i: usize| {
            (l.groups[i].as_ref().unwrap().gms().proposal()).is_some_and(|(r, _)| r == b)
        };
        if followers.iter().all(|&i| acked(i)) {
            break b;
        }
    };
    // 0 crashes before deciding; 4 starts (its link comes up at 1-3), and 5 and 6.
    l.groups[0] = None;
    l.sim.crash(NodeId(0));
    for i in 4..u {
        l.start_late(i);
    }
    let linked = |l: &Life, i: usize| {
        let sst = l.groups[i].as_ref().unwrap().gms().sst();
        sst.row_of(NodeId(4))
            .is_some_and(|r| !sst.is_suspected(r) && !sst.is_absent(r))
    };
    let (mut reached, t0) = (false, l.sim.now());
    let rest: Vec<usize> = (1..u).collect();
    while !rest.iter().all(|&i| l.restarted(i)) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(40) {
            return Err(format!(
                "after 0's crash 1-6 hang (4 linked at 1-3: {reached}): {}",
                l.state()
            ));
        }
        reached |= followers
            .iter()
            .all(|&i| linked(&l, i) && logged_rank_for_0(&l, i) < b);
        l.step(false);
        if let Some(i) = rest
            .iter()
            .find(|&&i| (l.groups[i].as_ref()).is_some_and(|g| g.stopped().is_some()))
        {
            return Err(format!("n{i} stopped: {}", l.state()));
        }
        if let Some(d) = &l.disagreement {
            return Err(format!("virtual synchrony: {d}"));
        }
    }
    let ballot = format!("ballot={b}");
    if let Some(i) = followers.iter().find(|&&i| {
        warns
            .with(&[&format!("me=n{i}"), &ballot, "leader=n0"])
            .is_empty()
    }) {
        return Err(format!("n{i} did not warn about ballot {b} of 0"));
    }
    // 0 restarts from its log: the group is two views past it, so it joins again.
    let t = l.sim.restart_node(NodeId(0)).unwrap();
    l.nodes[0] = Some(gate(t, &l.held[0]));
    l.boot(0);
    let all: Vec<usize> = (0..u).collect();
    let replayed = l.delivered[1].len();
    together_and_carrying_on(&mut l, &all, replayed, "every node")?;
    if let Some(i) = (0..u).find(|&i| !is_prefix(&before[i], &l.delivered[1])) {
        return Err(format!("n{i}'s life-0 deliveries are not a prefix of 1's"));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(if reached {
        Moment::Reached
    } else {
        Moment::Missed
    })
}

/// [`lost_ballot_leader`] over 3 seeds (`SQUALL_SEEDS`), each of which must reach the moment.
#[test]
fn a_ballot_whose_leader_crashed_before_deciding_does_not_freeze_its_followers() {
    check_seeds_reaching(
        "restart_lost_ballot_leader",
        3,
        LOST_LEADER,
        lost_ballot_leader,
    );
}

// ---- s27 follow-up (seventy-second part of `docs/MEMBERSHIP.md`): the crash variant ----

thread_local! {
    /// Per (node, peer, incarnation): that incarnation of `peer` never links at `node`, as over
    /// TCP a connection that had not come up when the peer's process died. [`never_linked`]
    /// applies it in every [`Gate`].
    static NEVER_LINK: std::cell::RefCell<Vec<(NodeId, NodeId, u64)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// The (node, peer) pairs whose last `PeerConnected` at the node [`NEVER_LINK`] dropped.
    static UNLINKED: std::cell::RefCell<Vec<(NodeId, NodeId)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether a [`Gate`] drops event `e` at node `me` ([`NEVER_LINK`]): the `PeerConnected` of an
/// incarnation that never links there, and then the `PeerFailed` of that peer (an absent peer
/// is never reported failed), until a `PeerConnected` of another incarnation passes.
fn never_linked(me: NodeId, e: Event) -> bool {
    match e {
        Event::PeerConnected { peer, incarnation } => {
            let dropped = NEVER_LINK.with(|n| n.borrow().contains(&(me, peer, incarnation)));
            UNLINKED.with(|u| {
                let mut u = u.borrow_mut();
                u.retain(|&k| k != (me, peer));
                if dropped {
                    u.push((me, peer));
                }
            });
            dropped
        }
        Event::PeerFailed { peer, .. } => UNLINKED.with(|u| u.borrow().contains(&(me, peer))),
        Event::Completion(_) => false,
    }
}

/// Clears [`NEVER_LINK`] and its state.
fn links_all() {
    NEVER_LINK.with(|n| n.borrow_mut().clear());
    UNLINKED.with(|u| u.borrow_mut().clear());
}

/// What [`crashed_after_promising`] needs to call its moment reached.
const CRASHED_READ: &str = "3's new process, its log holding the promise of the ballot that 0 \
                            decided and no decision above the join decision, at view 0 with \
                            2's row (wedged, without that decision) and 4's (one view ahead) \
                            landed, 0's and 1's unread, none of them suspected";

/// The seventy-second part's crash variant (s27 follow-up): a member that acknowledged the
/// restart ballot `b` crashes, and its next process reads a majority of view 0 clean before
/// `b`'s decision `R` reaches any row it reads.
///
/// Lives 0 and 1 as in [`read_not_a_promise`] (view 0 = 0–4, the dead view 1 = 0–6 installed
/// by 4, 5 and 6 with the join decision `D`; 0–3 restart view 0 with `D` and no promise), with
/// these changes. 2's link with 3's life-1 process `P` never comes up ([`NEVER_LINK`]), so `P`
/// follows `b` with 0, 1 and itself restarted. 0 and 1 count 4 out after 300 µs; 2 and 3 keep
/// the default absent timeout; 4 does not start yet. 0 leads `b`, 1–3 acknowledge it, and 0
/// decides `R` (`D` fitted into [0, 1, 2, 3]). 0's ops are delayed 10 µs, and the moment the
/// test sees `R` a partition {0} | {2, 3} holds it on its way to 2 and 3 (the schedule's
/// `Sim::delay` on 1 too left 1 without `R` when it learnt of `P`'s failure, and its stop check
/// stopped it). Once 1 logged `R`, `P` crashes, its log holding the promise of `b` and `D`, and
/// its next process `P′` starts with 4. 0 and 1 hold `P′` pending: they count 0, 1 and 2, a
/// majority, and they hold `R`, a restart decision made with `P`'s acknowledgement, so they do
/// not readmit it in restart mode although 2, a member they count, links it (the linked clause
/// of `Gms::readmissible_in_restart` refuses while a restart decision for the view is held or
/// read; checked: neither logs a readmission of 3 through that clause). 2, which never linked
/// `P`, links `P′` fresh and pushes its row (wedged at view 0, showing `D`), and so does 4
/// (restarting view 1 with `D`). `P′` reads 3, 2 and 4, three of five, with nothing above `D`. Once `P′` left
/// view 0, or 20 steps after that read, the partition is lifted, {0, 1, 2} | {3, 4, 5, 6}
/// starts, and 5 and 6 start.
///
/// Without the seeding of `RestartState::ballots` from the log's promise, `P′` cleared fix A
/// (`Gms::promise_cleared`: `b` was followed by `P`, not by `P′`), caught up into the dead view
/// 1 and restarted it with 4–6, beside 0–2's view 2. Now the logged promise binds `P′` as a
/// followed ballot binds its process: it stays at view 0 and stops with
/// [`StopReason::RestartCutOff`]. Checked as in [`read_not_a_promise`]: no view id run with two
/// member lists, no member of 3–6 running a view under the partition, 0–2 replaying
/// identically with life 0's deliveries a prefix, 1 and 2 logging `R`; then a total restart
/// of all seven ends in one running view, delivering identically, every earlier delivery a
/// prefix. The moment: [`CRASHED_READ`].
///
/// Before the s29 follow-up (ninety-fourth part of `docs/MEMBERSHIP.md`) 0 and 1 readmitted
/// `P′` through the linked clause at every seed while holding `R` (the sixteenth part's "gap"
/// precondition); the test passed, and now fails on the `info` event saying so.
fn crashed_after_promising(seed: u64) -> Result<Moment, String> {
    let linked = EventLog::linked_readmissions();
    let _guard = tracing::subscriber::set_default(linked.clone());
    let joiners = [N, N + 1];
    let u = N + joiners.len();
    let base = dir("crashed-after-promising", seed);
    let (logs, before) = joins_cut_to_view_0(seed, &base, &joiners)?;
    join_decision_alone(&logs)?;
    let d_rank = MemLog::open(logs[3].clone())
        .1
        .decision_for(0)
        .map_or(0, |d| d.rank);
    let (live, dead, q) = ([0, 1, 2], [3, 4, 5, 6], 3);
    let ids = |v: &[usize]| v.iter().map(|&i| NodeId(i as u32)).collect::<Vec<_>>();
    // Every node late. 2 and 3 (`P`, incarnation 1 on this fabric) never link; 4's link is
    // held at 0-2 from the start (0 and 1 count it out, and their suspicion reaches 2 and 3).
    links_all();
    NEVER_LINK.with(|n| {
        n.borrow_mut()
            .extend([(NodeId(2), NodeId(3), 1), (NodeId(3), NodeId(2), 1)])
    });
    let mut l = Life::start_in(seed + 1000, &base, &logs, &[], 1, u);
    for &i in &live {
        l.held[i].set(Some(NodeId(4)));
    }
    for i in [0, 1] {
        start_late_with_absent(&mut l, i, Duration::from_micros(300));
    }
    l.start_late(2);
    l.start_late(q);
    if [2, q]
        .iter()
        .any(|&i| l.sim.incarnation(NodeId(i as u32)) != 1)
    {
        return Err("2 or 3 does not start as incarnation 1".into());
    }
    // 0's writes land 10 µs late: its decision is still in flight when the test sees it.
    l.sim.delay(NodeId(0), Duration::from_micros(10));
    let b = until_0_decides_with(&mut l, q)?;
    let absent_at = |l: &Life, i: usize, peer: u32| {
        let sst = l.groups[i].as_ref().unwrap().gms().sst();
        sst.row_of(NodeId(peer)).is_some_and(|r| sst.is_absent(r))
    };
    if !absent_at(&l, 2, 3) || !absent_at(&l, q, 2) {
        return Err(format!("2 and 3 linked: {}", l.state()));
    }
    // `R` is held on its way to 2 and 3 (shorter than the op timeout), and lands at 1.
    l.sim.partition(&ids(&[0]), &ids(&[2, q]));
    let t0 = l.sim.now();
    while logged_rank_for_0(&l, 1) < b {
        if l.sim.now().saturating_since(t0) > Duration::from_micros(200) {
            return Err(format!("1 did not log the decision: {}", l.state()));
        }
        l.step(false);
    }
    if let Some(i) = [2, q].into_iter().find(|&i| logged_rank_for_0(&l, i) == b) {
        return Err(format!("n{i} logged the decision before 3 crashed"));
    }
    // `P` crashes; `P′` starts from its log (which links 2), and 4 starts.
    NEVER_LINK.with(|n| n.borrow_mut().retain(|&(at, _, _)| at != NodeId(3)));
    l.restart_member(q);
    let (_, rec) = MemLog::open(l.logs[q].clone());
    let logged = rec.decision_for(0).map_or(0, |d| d.rank);
    if rec.promised_for(0) != b || logged != d_rank {
        return Err(format!(
            "3's log holds promise {} and decision {logged}, not {b} and {d_rank}",
            rec.promised_for(0)
        ));
    }
    l.start_late(4);
    let heartbeat = l.groups[q]
        .as_ref()
        .unwrap()
        .gms()
        .sst()
        .schema()
        .heartbeat();
    let clean_read = |l: &Life| {
        let g = l.groups[q].as_ref().unwrap();
        let sst = g.gms().sst();
        let beat = |i: u32| sst.row_of(NodeId(i)).map_or(0, |r| sst.get(r, heartbeat));
        g.gms().restarting().is_some()
            && g.view().is_some_and(|v| v.id == 0)
            && beat(2) > 0
            && beat(4) > 0
            && beat(0) == 0
            && beat(1) == 0
            && [0, 1, 2, 4]
                .iter()
                .all(|&i| sst.row_of(NodeId(i)).is_some_and(|r| !sst.is_suspected(r)))
            && logged_rank_for_0(l, 2) < b
            && logged_rank_for_0(l, q) < b
    };
    let in_dead_view = |l: &Life| {
        let g = l.groups[q].as_ref().unwrap();
        g.view().is_some_and(|v| v.id == 1 && v.contains(NodeId(4)))
    };
    // Until `P′` caught up, or 20 steps after its clean read.
    let (mut armed, mut caught_up, mut after) = (false, false, 0);
    let t0 = l.sim.now();
    while !caught_up && after < 20 {
        if l.sim.now().saturating_since(t0) > Duration::from_micros(400) {
            return Err(format!("3's new process read no majority: {}", l.state()));
        }
        armed |= clean_read(&l);
        after += usize::from(armed);
        l.step(false);
        caught_up |= in_dead_view(&l);
    }
    l.sim.heal();
    // 0-2 and 3-6 are cut off from each other for good; 5 and 6 start.
    l.sim.partition(&ids(&live), &ids(&dead));
    for i in 5..u {
        l.start_late(i);
    }
    let t0 = l.sim.now();
    while !settled(&l, &live, &dead) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("under the partition: {}", l.state()));
        }
        l.step(false);
        caught_up |= in_dead_view(&l);
        if let Some(d) = &l.disagreement {
            return Err(format!(
                "virtual synchrony: {d} (3's new process read 2 and 4 with 0 and 1 unread: \
                 {armed}; caught up into the dead view 1: {caught_up}): {}",
                l.state()
            ));
        }
    }
    links_all();
    // 0 and 1 hold `R` throughout (0 decided it, 1 logged it before `P` crashed).
    if let Some(e) = ["me=n0 ", "me=n1 "]
        .iter()
        .find_map(|me| linked.with(&[me, "node=n3 "]).into_iter().next())
    {
        return Err(format!(
            "a member holding the restart decision R readmitted 3's new process through the \
             linked clause: {e}"
        ));
    }
    if let Some(i) = dead.iter().find(|&&i| l.restarted(i)) {
        return Err(format!(
            "n{i} ran a view on the dead side (3 caught up into the dead view 1: {caught_up}): {}",
            l.state()
        ));
    }
    // The operator restarts every node (a total restart on a fresh fabric).
    let echoed = replayed_then_total_restart(l, seed, &base, &before, b)?;
    if caught_up {
        return Err("3's new process caught up into the dead view 1".into());
    }
    Ok(if armed && echoed {
        Moment::Reached
    } else {
        Moment::Missed
    })
}

/// [`crashed_after_promising`] over 3 seeds (`SQUALL_SEEDS`), each of which must reach the
/// moment.
#[test]
fn a_member_that_promised_a_ballot_and_crashed_does_not_catch_up_in_its_next_process() {
    check_seeds_reaching(
        "restart_crashed_after_promising",
        3,
        CRASHED_READ,
        crashed_after_promising,
    );
}

// ---- s27 follow-up (seventy-fifth part of `docs/MEMBERSHIP.md`, "s27 follow-up: the second
// hang"): a member one view behind with no catch-up source ----

/// Steps `l` (without submissions) until `done`; an error naming `what` after 50 ms of virtual
/// time.
fn step_until(l: &mut Life, what: &str, done: impl Fn(&Life) -> bool) -> Result<(), String> {
    let t0 = l.sim.now();
    while !done(l) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("{what} did not come: {}", l.state()));
        }
        l.step(false);
    }
    Ok(())
}

/// Crashes member `i`'s process (its log kept).
fn crash_keeping_log(l: &mut Life, i: usize) {
    if let Some(g) = l.groups[i].take() {
        l.logs[i] = g.gms().log().bytes().to_vec();
    }
    l.sim.crash(NodeId(i as u32));
}

/// The minimal shape of `sim_restart_lives`'s second final-life hang, built directly. Life 0:
/// 4 crashes, and 0–3 install view 1 = [0, 1, 2, 3] with the decision `D0` (fail 4); 0 crashes
/// the moment it installed view 1, and 1–3 decide `D1` (fail 0) in view 1 and install view 2 =
/// [1, 2, 3]; then every process stops. The logs are cut as crashes between a decision and its
/// view would leave them: 0's log ends at view 0 holding `D0`, and 1–3's end at view 1 holding
/// `D1`. Life 1: all five start. 0 restarts view 0 and reads 1–3 one view ahead, but each
/// publishes `D1` (its decision for view 1), not `D0`: no catch-up source, so it waits (as 4
/// does). 1–3, a majority of view 1 restarted, wait for 0: it is linked and not suspected, so
/// it leads their ballot (rank 0) and must acknowledge any other's. Before the fix nobody
/// stopped. Now 1–3 count 0 out as an outsider (a linked member restarting an older view) a
/// suspicion timeout into their wait, 1 leads, adopts `D1` and installs view 2 = [1, 2, 3];
/// 0 and 4 read it (two views ahead of theirs) and join again. Checked: the logs have that
/// shape, view 2 runs as [1, 2, 3], 0 joined again from view 0 past view 2, no view id runs
/// with two member lists, and all five end in one running view delivering identically.
fn behind_with_no_catch_up_source(seed: u64) -> Result<(), String> {
    let base = dir("behind-no-source", seed);
    let all: Vec<usize> = (0..N).collect();
    let mut l = Life::start(seed, &base, &vec![Vec::new(); N], &all, 0);
    for _ in 0..300 {
        l.step(true);
    }
    crash_keeping_log(&mut l, 4);
    step_until(&mut l, "view 1 at 0", |l| {
        (l.groups[0].as_ref()).is_some_and(|g| g.view().is_some_and(|v| v.id == 1))
    })?;
    crash_keeping_log(&mut l, 0);
    step_until(&mut l, "view 2 at 1–3", |l| {
        [1, 2, 3].iter().all(|&i| {
            (l.groups[i].as_ref())
                .is_some_and(|g| g.is_active() && g.view().is_some_and(|v| v.id == 2))
        })
    })?;
    for _ in 0..100 {
        l.step(true);
    }
    let (mut logs, before) = l.shutdown();
    cut_view_1(&mut logs, 0, &base, N);
    cut_installed(&mut logs, &base, 2, N);
    let shape = |i: usize, last: u64| {
        let (_, rec) = MemLog::open(logs[i].clone());
        rec.last_view().map(|(v, _)| v) == Some(last) && rec.decision_for(last).is_some()
    };
    if !shape(0, 0) || ![1, 2, 3].iter().all(|&i| shape(i, 1)) {
        return Err(
            "the cut logs are not: 0 at view 0 with its decision, 1–3 at view 1 with theirs".into(),
        );
    }
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    let mut l = Life::start(seed + 1000, &base, &logs, &all, 1);
    together_and_carrying_on(&mut l, &all, replayed, "the members behind (0 and 4)")?;
    let view_2 = l.running.get(&2).map(|(_, m)| m.clone());
    if view_2.as_deref() != Some(&[1, 2, 3].map(NodeId)[..]) {
        return Err(format!("view 2 ran as {view_2:?}, not [1, 2, 3]"));
    }
    let rejoined = l.groups[0].as_ref().and_then(|g| g.gms().rejoined());
    if rejoined != Some((0, 2)) {
        return Err(format!(
            "n0 rejoined as {rejoined:?}, not from view 0 past view 2"
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// See [`behind_with_no_catch_up_source`]. Fails without the fix (the s27 follow-up of the
/// seventy-fifth part of `docs/MEMBERSHIP.md`) with "the members behind (0 and 4) did not come
/// into the running view within 50ms".
#[test]
fn a_member_one_view_behind_whose_peers_publish_only_their_own_decisions_is_counted_out_and_joins_again()
 {
    check_seeds(
        "behind_no_catch_up_source",
        3,
        behind_with_no_catch_up_source,
    );
}

// ---- s28 (eighty-second part of `docs/MEMBERSHIP.md`): a lost dead view that ran a view
// change ----

/// When the dead view's own members come back in [`dead_view_asked_a_change`].
#[derive(Clone, Copy, Debug)]
enum Back {
    /// With 1–4: all seven start at once in life 1, so the dead view is not dead yet.
    Before,
    /// During the fitting restart: as soon as one of 1–4 acknowledged a restart ballot.
    During,
    /// During the fitting restart, with 1–4 split on 0 (s29, ninety-fourth part): 2 and 4
    /// stall for 1.2 ms from 3.5 ms into life 1 (below the 1.5 ms suspicion timeout), so 1 and
    /// 3 alone count the absent 0 out at the 4 ms absent timeout; the dead side then starts,
    /// and 2 and 4 link 0's new process before their own timeout runs out.
    Split,
    /// After it: while 1–4 run the fitted view 1 and deliver in it.
    After,
    /// In a later total restart: life 1 ends with 1–4 running the fitted view, and life 2
    /// starts every node.
    Later,
}

/// Late member `i` starts from its log as a new process, a new incarnation on the fabric
/// (crashed first, so that its peers that already counted it out, reporting it failed, link
/// the new one: `Sim::start_node` links no peer that reported the node, whereas a process
/// started after the report is a newer incarnation over TCP, as in [`Life::rejoin_fresh`]).
fn start_anew(l: &mut Life, i: usize) {
    l.sim.crash(NodeId(i as u32));
    let t = l.sim.restart_node(NodeId(i as u32)).unwrap();
    l.nodes[i] = Some(gate(t, &l.held[i]));
    l.stalled[i] = None;
    l.boot(i);
}

/// Life 0 of [`dead_view_asked_a_change`]: view 0 = 0–4, 5 and 6 join in one decision `D`, and
/// once 0, 5 and 6 are active in view 1 (every node) 1–4 crash. The dead view then runs a view
/// change of its own: 5 asks to leave (its log holds `LeaveAsked { 1 }`), 0 proposes the leave
/// and 6 acknowledges it. Three of seven cannot decide it: each of 0, 5 and 6 stops with
/// [`StopReason::Minority`] once it suspects 1–4. Then 1–4's logs lose `Installed { 1 }` and
/// their view-1 epoch logs ([`cut_view_1`]): view 1 was installed by 0, 5 and 6 only. Returns
/// the logs and what each member delivered.
fn dead_view_proposes_a_leave(seed: u64, base: &Path) -> Result<(Vec<Vec<u8>>, Vec<Seq>), String> {
    use squall_membership::change::ChangeKind;
    let joiners = [N, N + 1];
    let u = N + joiners.len();
    let dead = [0, N, N + 1];
    let all: Vec<usize> = (0..u).collect();
    let mut l = Life::start_in(seed, base, &vec![Vec::new(); u], &all, 0, u);
    for _ in 0..600 {
        l.step(true);
    }
    for &j in &joiners {
        l.groups[j].as_mut().unwrap().join().unwrap();
    }
    let in_view_1 = |l: &Life, i: usize| {
        (l.groups[i].as_ref()).is_some_and(|g| g.is_active() && g.view().is_some_and(|v| v.id == 1))
    };
    step_until(&mut l, "0, 5 and 6 active in view 1", |l| {
        dead.iter().all(|&i| in_view_1(l, i))
    })?;
    for i in 1..N {
        if let Some(g) = l.groups[i].take() {
            l.logs[i] = g.gms().log().bytes().to_vec();
        }
        l.sim.crash(NodeId(i as u32));
    }
    l.groups[N].as_mut().unwrap().leave().unwrap();
    let leaves_5 = |g: &Group<Gate, MemLog>| {
        g.gms().proposal().is_some_and(|(r, ch)| {
            r == 0 && (ch.iter()).any(|c| c.node == NodeId(N as u32) && c.kind == ChangeKind::Leave)
        })
    };
    let (mut proposed, mut acked) = (false, false);
    let minority = |l: &Life, i: usize| {
        (l.groups[i].as_ref()).is_some_and(|g| {
            matches!(
                g.gms().stopped(),
                Some(StopReason::Minority { view: 1, .. })
            )
        })
    };
    let t0 = l.sim.now();
    while !dead.iter().all(|&i| minority(&l, i)) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("life 0: no minority stop: {}", l.state()));
        }
        if let Some(&i) = dead.iter().find(|&&i| {
            runs_a_view(&l, i) && {
                l.groups[i]
                    .as_ref()
                    .unwrap()
                    .view()
                    .is_some_and(|v| v.id > 1)
            }
        }) {
            return Err(format!(
                "n{i} ran a view after the dead view: {}",
                l.state()
            ));
        }
        proposed |= l.groups[0].as_ref().is_some_and(leaves_5);
        acked |= l.groups[N + 1].as_ref().is_some_and(leaves_5);
        l.step(false);
    }
    if !proposed || !acked {
        return Err(format!(
            "life 0: the leave was not proposed ({proposed}) and acknowledged ({acked})"
        ));
    }
    let (mut logs, before) = l.shutdown();
    let (_, rec) = MemLog::open(logs[N].clone());
    if rec.leave_pending(NodeId(N as u32)) != Some(1) {
        return Err("n5's log does not hold its leave asked in view 1".into());
    }
    for (i, log) in logs.iter().enumerate().filter(|(i, _)| dead.contains(i)) {
        let (_, rec) = MemLog::open(log.clone());
        if rec.decision_for(1).is_some() || rec.promised_for(1) != 0 {
            return Err(format!("n{i} logged a decision or a promise for view 1"));
        }
    }
    for i in 1..N {
        if !logged_admitting(&logs[i], 0, &joiners, false) {
            return Err(format!("n{i} had not logged the join decision for view 0"));
        }
        cut_view_1(&mut logs, i, base, u);
    }
    Ok((logs, before))
}

/// A lost dead view that ran a view change (s28, eighty-second part of `docs/MEMBERSHIP.md`).
/// Life 0: [`dead_view_proposes_a_leave`]: the dead view 1 (0–6), installed by 0, 5 and 6
/// only, proposes 5's leave, which three of seven cannot decide; 5's log holds the request.
/// Life 1: 1–4 restart view 0 and fit `D` into view 1 = 1–4 (fix B holds: four of seven),
/// unless the dead side comes back first (`back`, [`Back::During`]), in which case they may
/// catch up into the dead view instead, which is then no longer dead. The dead side comes back
/// at `back`.
///
/// Checked: no view id run with two member lists in any life, nor across lives from view 2 on
/// ([`RunAcross`]); every member's installs as its highest logged decision makes them
/// ([`installed_as_decided`]); every life's deliveries a prefix of the final sequence. 5, whose
/// application asked to leave, ends stopped with [`StopReason::Left`] (the group went on
/// without it, or its leave was asked again and decided); the other six end active in one
/// running view, delivering identically. Where the fitting completed, 0 and 6 join again
/// (`Gms::rejoined`).
fn dead_view_asked_a_change(seed: u64, back: Back) -> Result<(), String> {
    let linked = EventLog::linked_readmissions();
    let _guard = tracing::subscriber::set_default(linked.clone());
    let u = N + 2;
    let base = dir(&format!("dead-view-asked-{back:?}"), seed);
    let (logs, before) = dead_view_proposes_a_leave(seed, &base)?;
    let mut lives = vec![before];
    let mut across = RunAcross::from(2);
    let four = [1, 2, 3, 4];
    let dead = [0, N, N + 1];
    let ids = |v: &[usize]| v.iter().map(|&i| NodeId(i as u32)).collect::<Vec<_>>();
    let up: Vec<usize> = match back {
        Back::Before => (0..u).collect(),
        _ => four.to_vec(),
    };
    let mut l = Life::start_in(seed + 1000, &base, &logs, &up, 1, u);
    l.earlier = lives[0][0].clone();
    if let Back::During = back {
        let acked = |l: &Life| {
            four.iter().any(|&i| {
                (l.groups[i].as_ref()).is_some_and(|g| {
                    g.gms()
                        .proposal()
                        .is_some_and(|(r, _)| squall_membership::restart::attempt_of(r) > 0)
                })
            })
        };
        step_until(&mut l, "a restart ballot acknowledged", acked)?;
        for i in dead {
            start_anew(&mut l, i);
        }
    } else if let Back::Split = back {
        split_on_0(&mut l, seed)?;
        for i in dead {
            start_anew(&mut l, i);
        }
        let linked = |l: &Life, i: usize| {
            (l.groups[i].as_ref()).is_some_and(|g| {
                let sst = g.gms().sst();
                !sst.is_suspected(0) && !sst.is_absent(0) && sst.known_incarnation(0) > 0
            })
        };
        step_until(&mut l, "2 and 4 linking 0's new process", |l| {
            linked(l, 2) && linked(l, 4)
        })?;
    } else if !matches!(back, Back::Before) {
        l.until_restarted(&four)?;
        let v = l.groups[1]
            .as_ref()
            .unwrap()
            .view()
            .unwrap()
            .members
            .clone();
        if v != ids(&four) {
            return Err(format!("life 1 did not fit D into 1-4: {v:?}"));
        }
        for _ in 0..400 {
            l.step(true);
        }
        for _ in 0..1000 {
            l.step(false);
        }
        if let Back::After = back {
            for i in dead {
                start_anew(&mut l, i);
            }
        } else {
            across.note(&l)?;
            let (logs, life1) = l.shutdown();
            lives.push(life1);
            let all: Vec<usize> = (0..u).collect();
            l = Life::start_in(seed + 2000, &base, &logs, &all, 2, u);
            l.earlier = lives[0][0].clone();
        }
    }
    let left = |l: &Life| {
        (l.groups[N].as_ref())
            .is_some_and(|g| matches!(g.gms().stopped(), Some(StopReason::Left { .. })))
    };
    step_until(&mut l, "5 stopped as left", left)?;
    if matches!(back, Back::Split) && linked.with(&["node=n0 "]).is_empty() {
        return Err(format!(
            "the linked clause never let 0's new process in: {}",
            l.state()
        ));
    }
    let six: Vec<usize> = (0..u).filter(|&i| i != N).collect();
    let replayed = lives.iter().flatten().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &six, replayed, "every node but 5")?;
    if !left(&l) {
        return Err(format!("n5 did not stay left: {}", l.state()));
    }
    if let Back::Before = back {
        if let Some(i) =
            (0..u).find(|&i| (l.groups[i].as_ref()).is_some_and(|g| g.gms().rejoined().is_some()))
        {
            return Err(format!(
                "n{i} joined again, with the dead view not dead: {}",
                l.state()
            ));
        }
    } else if !matches!(back, Back::During | Back::Split) {
        let rejoined =
            |i: usize| (l.groups[i].as_ref()).is_some_and(|g| g.gms().rejoined().is_some());
        if let Some(&i) = [0, N + 1].iter().find(|&&i| !rejoined(i)) {
            return Err(format!("n{i} did not join again: {}", l.state()));
        }
    }
    across.note(&l)?;
    let last = l.delivered[1].clone();
    let (logs, _) = l.shutdown();
    installed_as_decided(&logs)?;
    all_prefixes(&lives, &last)?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// [`dead_view_asked_a_change`], the dead side starting with 1–4, 3 seeds: 1–4 catch up into
/// the dead view, which is then restarted by all seven (nothing is fitted), and 5's leave is
/// asked again there.
#[test]
fn a_dead_view_that_proposed_a_leave_restarts_whole_when_its_members_start_with_the_others() {
    check_seeds("restart_dead_view_asked_before", 3, |seed| {
        dead_view_asked_a_change(seed, Back::Before)
    });
}

/// [`dead_view_asked_a_change`], the dead side back during the fitting restart, 3 seeds.
#[test]
fn a_dead_view_that_proposed_a_leave_and_comes_back_during_the_fitting_ends_in_one_view() {
    check_seeds("restart_dead_view_asked_during", 3, |seed| {
        dead_view_asked_a_change(seed, Back::During)
    });
}

/// [`Back::Split`]'s moment in life 1 of [`dead_view_asked_a_change`]: 2 and 4 stall from
/// 3.5 ms into the life for 1.2 ms; within it 1 and 3 count the absent 0 out (suspect it) while
/// nothing is decided. An error (re-seed) if the schedule does not bring it.
fn split_on_0(l: &mut Life, seed: u64) -> Result<(), String> {
    let t0 = l.sim.now();
    let suspects_0 =
        |l: &Life, i: usize| (l.groups[i].as_ref()).is_some_and(|g| g.gms().sst().is_suspected(0));
    while l.sim.now().saturating_since(t0) < Duration::from_micros(3500) {
        l.step(false);
    }
    if (1..N).any(|i| suspects_0(l, i)) {
        return Err(group_sim::missed(
            seed,
            "1-4 not suspecting 0 3.5 ms into life 1",
        ));
    }
    for i in [2, 4] {
        l.stall(i, Duration::from_micros(1200));
    }
    let t1 = l.sim.now();
    while !(suspects_0(l, 1) && suspects_0(l, 3)) {
        if l.sim.now().saturating_since(t1) > Duration::from_micros(1000) {
            return Err(group_sim::missed(
                seed,
                "1 and 3 counting 0 out while 2 and 4 stall",
            ));
        }
        l.step(false);
    }
    // A restart ballot's decision (each of 1–4 holds the dead view's join decision `D`, an
    // ordinary one, from its log).
    let decided = |i: usize| {
        (l.groups[i].as_ref()).is_some_and(|g| {
            (g.gms().decision()).is_some_and(|d| squall_membership::restart::attempt_of(d.rank) > 0)
        })
    };
    if suspects_0(l, 2) || suspects_0(l, 4) || (1..N).any(decided) {
        return Err(group_sim::missed(
            seed,
            &format!(
                "1 and 3 alone counting 0 out, nothing decided ({})",
                l.state()
            ),
        ));
    }
    Ok(())
}

/// [`dead_view_asked_a_change`] with [`Back::Split`], 3 seeds (s29, ninety-fourth part of
/// `docs/MEMBERSHIP.md`): 1 and 3 suspect 0 and hold its new process pending, 2 and 4 link it
/// and count it, and each pair waits on the other's ballots. Restart mode readmits a pending
/// incarnation that a counted member links (`Gms::linked_by_a_counted_member`), so the seven
/// restart the dead view whole and 5 leaves; checked (s29 follow-up): some member logs that
/// readmission through the linked clause. Without that rule it fails at seed 0: "5 stopped
/// as left did not come", every member restarting view 1, 0 missing [1, 3] and 1 and 3
/// missing [0] (the torn schedule's seed 0 of
/// [`a_dead_view_that_proposed_a_leave_and_comes_back_during_the_fitting_ends_in_one_view`]).
#[test]
fn a_dead_view_that_proposed_a_leave_comes_back_while_the_fitting_members_are_split_on_its_leader()
{
    check_seeds("restart_dead_view_asked_split", 3, |seed| {
        dead_view_asked_a_change(seed, Back::Split)
    });
}

/// [`dead_view_asked_a_change`], the dead side back while the fitted view runs, 3 seeds.
#[test]
fn a_dead_view_that_proposed_a_leave_and_comes_back_after_the_fitting_joins_again_or_leaves() {
    check_seeds("restart_dead_view_asked_after", 3, |seed| {
        dead_view_asked_a_change(seed, Back::After)
    });
}

/// [`dead_view_asked_a_change`], the dead side back in a later total restart, 3 seeds.
#[test]
fn a_dead_view_that_proposed_a_leave_and_comes_back_in_a_later_restart_joins_again_or_leaves() {
    check_seeds("restart_dead_view_asked_later", 3, |seed| {
        dead_view_asked_a_change(seed, Back::Later)
    });
}

/// A dead view whose own view change could have been decided (s28, eighty-second part of
/// `docs/MEMBERSHIP.md`). Life 0: view 0 = 0–4, 5–8 join in one decision `D`, and once 0 and the
/// joiners are active in view 1 (every node) 1–4 crash. 5 asks to leave; 0 proposes it and 5–8
/// acknowledge it: five of nine, a majority of view 1, so 0 would decide it once it suspects
/// 1–4. Every member crashes first (nothing decided; 5's log holds `LeaveAsked { 1 }`), and
/// 1–4's logs lose `Installed { 1 }` ([`cut_view_1`]). Life 1: 1–4 restart view 0 and adopt `D`.
/// Fitting it would install another view 1 = 1–4 while a majority of the first one stands at
/// view 1 and acknowledged a change there; fix B (`adoption_short`) refuses it: each of 1–4
/// stops with [`StopReason::RestartShortOfAdopted`] naming 0 and 5–8. Life 2, the operator's
/// end: all nine start. 1–4 catch up into view 1, the nine restart it, 5's leave is asked again
/// and decided (5 stops with [`StopReason::Left`]), and the other eight end active in one
/// running view, delivering identically, with the checks of [`dead_view_asked_a_change`].
fn dead_view_could_have_decided(seed: u64) -> Result<(), String> {
    use squall_membership::change::ChangeKind;
    let joiners = [N, N + 1, N + 2, N + 3];
    let u = N + joiners.len();
    let base = dir("dead-view-could-decide", seed);
    let all: Vec<usize> = (0..u).collect();
    let dead: Vec<usize> = (0..u).filter(|i| !(1..N).contains(i)).collect();
    let mut l = Life::start_in(seed, &base, &vec![Vec::new(); u], &all, 0, u);
    for _ in 0..600 {
        l.step(true);
    }
    for &j in &joiners {
        l.groups[j].as_mut().unwrap().join().unwrap();
    }
    let in_view_1 = |l: &Life, i: usize| {
        (l.groups[i].as_ref()).is_some_and(|g| g.is_active() && g.view().is_some_and(|v| v.id == 1))
    };
    step_until(&mut l, "0 and the joiners active in view 1", |l| {
        dead.iter().all(|&i| in_view_1(l, i))
    })?;
    for i in 1..N {
        crash_keeping_log(&mut l, i);
    }
    l.groups[N].as_mut().unwrap().leave().unwrap();
    let leaves_5 = |l: &Life, i: usize| {
        (l.groups[i].as_ref()).is_some_and(|g| {
            g.gms().proposal().is_some_and(|(r, ch)| {
                r == 0
                    && (ch.iter())
                        .any(|c| c.node == NodeId(N as u32) && c.kind == ChangeKind::Leave)
            })
        })
    };
    step_until(&mut l, "the leave acknowledged by 0 and 5-8", |l| {
        dead.iter().all(|&i| leaves_5(l, i))
    })?;
    if let Some(&i) = dead.iter().find(|&&i| {
        (l.groups[i].as_ref()).is_none_or(|g| g.gms().decision().is_some() || g.stopped().is_some())
    }) {
        return Err(format!(
            "n{i} decided or stopped before the crash: {}",
            l.state()
        ));
    }
    let (mut logs, before) = l.shutdown();
    let (_, rec) = MemLog::open(logs[N].clone());
    if rec.leave_pending(NodeId(N as u32)) != Some(1) {
        return Err("n5's log does not hold its leave asked in view 1".into());
    }
    for i in 1..N {
        cut_view_1(&mut logs, i, &base, u);
    }
    let mut lives = vec![before];
    let mut across = RunAcross::from(2);
    let four = [1, 2, 3, 4];
    let mut l = Life::start_in(seed + 1000, &base, &logs, &four, 1, u);
    let short = |l: &Life, i: usize| {
        (l.groups[i].as_ref()).is_some_and(|g| {
            matches!(
                g.gms().stopped(),
                Some(StopReason::RestartShortOfAdopted { .. })
            )
        })
    };
    let t0 = l.sim.now();
    while !four.iter().all(|&i| short(&l, i) || l.restarted(i)) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!(
                "life 1: neither stopped nor completed: {}",
                l.state()
            ));
        }
        l.step(false);
    }
    let fitted = four.iter().any(|&i| l.restarted(i));
    if fitted {
        for _ in 0..400 {
            l.step(true);
        }
        for _ in 0..1000 {
            l.step(false);
        }
    } else {
        let named: Vec<NodeId> = dead.iter().map(|&i| NodeId(i as u32)).collect();
        for &i in &four {
            let why = l.groups[i]
                .as_ref()
                .and_then(|g| g.gms().stopped().cloned());
            if !matches!(&why, Some(StopReason::RestartShortOfAdopted { view: 0, start, .. })
                if named.iter().all(|n| start.contains(n)))
            {
                return Err(format!("n{i} did not stop naming 0 and 5-8: {why:?}"));
            }
        }
    }
    let life1 = across.note(&l);
    let (logs, delivered) = l.shutdown();
    lives.push(delivered);
    let mut l = Life::start_in(seed + 2000, &base, &logs, &all, 2, u);
    l.earlier = lives[0][0].clone();
    let left = |l: &Life| {
        (l.groups[N].as_ref())
            .is_some_and(|g| matches!(g.gms().stopped(), Some(StopReason::Left { .. })))
    };
    let gone = step_until(&mut l, "5 stopped as left", left);
    let rest: Vec<usize> = (0..u).filter(|&i| i != N).collect();
    let replayed = lives.iter().flatten().map(Vec::len).max().unwrap_or(0);
    let together =
        gone.and_then(|()| together_and_carrying_on(&mut l, &rest, replayed, "every node but 5"));
    let across = life1.and(across.note(&l));
    let last = l.delivered[1].clone();
    let (logs, _) = l.shutdown();
    let checks = across
        .and(installed_as_decided(&logs))
        .and(all_prefixes(&lives, &last));
    if fitted || checks.is_err() {
        return Err(format!(
            "life 1 fitted D into 1-4: {fitted}; {checks:?}; together: {together:?}"
        ));
    }
    together?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}

/// [`dead_view_could_have_decided`] over 3 seeds (`SQUALL_SEEDS`).
#[test]
fn a_dead_view_whose_majority_acknowledged_a_leave_stops_the_fitting_and_restarts_with_it() {
    check_seeds(
        "restart_dead_view_could_decide",
        3,
        dead_view_could_have_decided,
    );
}

// ---- s28 (eighty-third part of `docs/MEMBERSHIP.md`): `Gms::follow`'s `admitted` words in
// restart mode (the seventy-sixth part's item 2, argued there, built here). ----

/// The index, in member `at`'s GMS table region, of the word holding `of`'s `gms_admitted`
/// slot for `about` (the local copy of `of`'s row). The vector's first word comes from `at`'s
/// own slot, the last range a whole-row push posts (`Sst::row_push_last`: the GMS lists its
/// guards there, its own `admitted` slot last; pinned by
/// `gms::tests::a_whole_row_push_posts_the_gms_guards_last_from_construction`).
fn admitted_word(l: &Life, at: usize, of: usize, about: usize) -> Option<usize> {
    let sst = l.groups[at].as_ref()?.gms().sst();
    let own = *sst.row_push_last().last()?;
    if own.len != 8 {
        return None;
    }
    let first = (own.offset / 8).checked_sub(sst.my_row())?;
    let row = sst.row_of(NodeId(of as u32))?;
    let slot = sst.row_of(NodeId(about as u32))?;
    Some(row * sst.schema().row_len() / 8 + first + slot)
}

/// Member `at`'s GMS table region (its local copies of every row).
fn gms_table(l: &Life, at: usize) -> Option<&squall_transport::Region> {
    let sst = l.groups[at].as_ref()?.gms().sst();
    sst.transport().region(sst.config().region)
}

/// What [`follow_before_the_admitted_words`] saw when member 1 installed the restart view.
#[derive(Debug)]
struct FollowedAt {
    /// 1's copy of 0's `admitted` word for 2.
    copy: u64,
    /// 0's own `admitted` word for 2.
    leader: u64,
    /// 2's new incarnation.
    new: u64,
    /// Whether 1 still suspected row 2 (had not readmitted the new incarnation itself).
    suspected: bool,
}

/// A bare majority (0, 1, 2) restarts; 3 and 4 stay away. Member 2 crashes the moment 0, the
/// leader, holds the restart's decision, and its new process starts at once from its log: 0
/// and 1 linked the old incarnation, so both suspect it and hold the new one pending. 0
/// readmits it (without 2 it counts no majority of view 0; the twenty-second part's rule). With
/// `hold`, member 1's copy of 0's `admitted` word for 2 is held at its value from before the
/// crash until 1 installed the restart view, as if every write carrying it landed only then
/// (the simulator reads a write's source when it applies it, so a whole-row push or a block
/// push can carry 0's decision ahead of the word: the sixty-seventh part's seed-7 ordering,
/// here in `Gms::follow`, which reads the leader's row alone). The moment: 1 installs the
/// restart view with that word stale while 0's own word names 2's new incarnation. Then all
/// three must end active in one running view, delivering identically with what each
/// delivered before the shutdown a prefix, and no view of this life may lack 2: a follower
/// that failed 2's live new incarnation in its epoch would have it removed by a view change.
fn follow_before_the_admitted_words(seed: u64, hold: bool) -> Result<(Moment, FollowedAt), String> {
    let base = dir(&format!("follow-admitted-{hold}"), seed);
    let (logs, before) = first_life(seed, &base, 1500);
    let up = [0, 1, 2];
    let mut l = Life::start(seed + 1000, &base, &logs, &up, 1);
    let t0 = l.sim.now();
    while (l.groups[0].as_ref()).is_none_or(|g| g.gms().decision().is_none()) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("0 never decided the restart: {}", l.state()));
        }
        l.step(false);
    }
    let (Some(copy_at), Some(own_at)) = (admitted_word(&l, 1, 0, 2), admitted_word(&l, 0, 0, 2))
    else {
        return Err("no gms_admitted word found in the guards' list".into());
    };
    let stale = gms_table(&l, 1).map_or(0, |t| t.load(copy_at));
    l.delivered[2].clear();
    l.restart_member(2);
    let new = l.sim.incarnation(NodeId(2));
    let t0 = l.sim.now();
    while !l.restarted(1) {
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("the restart did not complete: {}", l.state()));
        }
        l.step(false);
        if hold && let Some(t) = gms_table(&l, 1) {
            t.store(copy_at, stale);
        }
    }
    let at = FollowedAt {
        copy: gms_table(&l, 1).map_or(0, |t| t.load(copy_at)),
        leader: gms_table(&l, 0).map_or(0, |t| t.load(own_at)),
        new,
        suspected: (l.groups[1].as_ref()).is_some_and(|g| g.gms().sst().is_suspected(2)),
    };
    // The held write lands.
    if let Some(t) = gms_table(&l, 1) {
        t.store(copy_at, at.leader.max(t.load(copy_at)));
    }
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &up, replayed, "the restarted members")
        .map_err(|e| format!("{e} ({at:?})"))?;
    if let Some((id, (i, m))) = (l.running.iter()).find(|(_, (_, m))| !m.contains(&NodeId(2))) {
        return Err(format!("n{i} ran view {id} as {m:?}, without 2 ({at:?})"));
    }
    for (i, b) in before.iter().enumerate() {
        if !is_prefix(b, &l.delivered[0]) {
            return Err(format!(
                "n{i}'s deliveries before the shutdown are not kept"
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    let reached = at.copy == stale && at.copy < at.new && at.leader >= at.new && !at.suspected;
    Ok((
        if reached {
            Moment::Reached
        } else {
            Moment::Missed
        },
        at,
    ))
}

/// s28 (eighty-third part): the seventy-sixth part's item 2 built. A follower in restart mode
/// that reads the leader's decision next to a stale `admitted` word for a bounced member
/// neither takes the old incarnation for the view's nor fails the new one: it installs only
/// once it readmitted the new incarnation itself (it counts no majority without it, as the
/// leader did when it readmitted it), so the leader's word is not what it goes by. With that
/// readmission taken from the follower (scratch edit: `readmit_restarted` skipping restart mode
/// at row 1), every seed fails with 1 cut off ("restart of view 0: this member suspects [2, 3,
/// 4] ... stopped"), with or without the hold.
#[test]
fn a_follower_reading_the_restart_decision_before_the_leaders_admitted_word_keeps_the_bounced_member()
 {
    check_seeds_reaching(
        "follow_before_admitted",
        2,
        "member 1 installing the restart view with 0's admitted word for 2 stale",
        |seed| follow_before_the_admitted_words(seed, true).map(|(m, _)| m),
    );
}

/// Without the hold the moment is not reached (1's copy of 0's word names 2's new
/// incarnation when it installs), so the test above reaches it by the hold, not by chance.
#[test]
fn without_the_hold_the_follower_reads_the_leaders_admitted_word_in_time() {
    check_seeds(
        "follow_before_admitted_unheld",
        2,
        |seed| match follow_before_the_admitted_words(seed, false)? {
            (Moment::Missed, at) if at.copy >= at.new => Ok(()),
            other => Err(format!("unheld: {other:?}")),
        },
    );
}

// ---- s28 (`docs/MEMBERSHIP.md`, eightieth part): torn writes ----

thread_local! {
    /// Whether the [`Life`]s this thread starts run the simulator's torn writes
    /// (`SimConfig::torn_writes`; also on for every test with `SQUALL_SIM_TORN_WRITES=1`).
    static TORN: Cell<bool> = const { Cell::new(false) };
}

/// The simulator settings of a [`Life`] with `seed`: torn writes if [`TORN`] is set here.
fn sim_config(seed: u64) -> SimConfig {
    let mut cfg = SimConfig::seeded(seed);
    cfg.torn_writes |= TORN.with(Cell::get);
    cfg
}

/// [`straggler`] with every write of every life torn (3 seeds, `SQUALL_SEEDS`): 0's process
/// starts while 1, 2 and 4 restart, so each of them pushes its whole GMS row to 0 and 0 pushes
/// its own to each, and the pieces of each push land over several steps while the readers
/// poll. The restart must wait for 0 and complete with it, as with whole writes. With the
/// GMS's guards not posted last (scratch: `sst.set_row_push_last(&last[..0])` in `Gms::build`,
/// one write per row as before s27) it hung at seed 0: "the restart did not complete within
/// 50ms of virtual time", 1 and 2 suspecting 0.
#[test]
fn a_straggler_whose_whole_row_pushes_land_torn_is_waited_for() {
    TORN.with(|t| t.set(true));
    each_seed("restart_absent_straggler_torn", 3, straggler);
}

// ---- s28 (eighty-fourth part of `docs/MEMBERSHIP.md`): the review of the s27 restart
// liveness rules ----

/// Whether member `i`'s log holds `Installed { vid }`.
fn logged_installed(l: &Life, i: usize, vid: u64) -> bool {
    (l.groups[i].as_ref()).is_some_and(|g| {
        let (_, rec) = MemLog::open(g.gms().log().bytes().to_vec());
        (rec.records.iter()).any(|r| matches!(r, Record::Installed { view, .. } if *view == vid))
    })
}

/// Starts crashed member `i` again as a new process from the log it had (an operator's
/// start).
fn start_again(l: &mut Life, i: usize) {
    let t = l.sim.restart_node(NodeId(i as u32)).unwrap();
    l.nodes[i] = Some(gate(t, &l.held[i]));
    l.stalled[i] = None;
    l.boot(i);
}

/// Item 3 of the s28 review: a set-aside joiner that crashes. Lives 0 and 1 as in
/// [`rejoiners_decided_then_interrupted`]: 4, then 3 crash (views 1 = 0–3, 2 = 0–2); in life 1
/// 0, 1, 3 and 4 start (2 down), and 0's ballot decides `D` = [Fail 2, Join 3, Join 4]. The life
/// runs until 0 and 1 logged `Installed { 3 }` (view 3 = [0, 1, 3, 4]); then every process
/// stops, and 3 and 4 get back their life-0 logs (ending at views 1 and 0: they never logged
/// view 3) with their epoch logs of view 3 removed. Life 2: the same four start. 0 and 1
/// restart view 3; 3 and 4 read them two or more views ahead and join again, so 0 and 1 set
/// them aside (`Gms::never_logged`) and count their majority over [0, 1]. Then 3 and 4 crash,
/// before the absent members' timeout counts them out, and 0 and 1 suspect them. Before the
/// fix the set-aside held only while the joiners' rows were unsuspected: they were back in the
/// count ([0, 1, 3, 4], two alive), and 0 and 1 stopped with `StopReason::RestartCutOff`
/// although the restart could complete. Now the set-aside is sticky, 0 and 1 install view 4 =
/// [0, 1]; 3 and 4 start again from their logs and join. Checked: no stop, the four end in one
/// running view delivering identically, and no view id run with two member lists. The moment:
/// 3 and 4 joined again while 0 and 1 were still restarting view 3.
fn set_aside_joiners_crash(seed: u64) -> Result<Moment, String> {
    let base = dir("set-aside-crash", seed);
    let four = [0, 1, 3, 4];
    let (life_0, before) = crashes_in_turn(seed, &base, &[4, 3])?;
    let mut l = Life::start(seed + 1000, &base, &life_0, &four, 1);
    if !until_0_and_1_log_the_ballot_admitting_3_and_4(&mut l) {
        return Ok(Moment::Missed);
    }
    step_until(&mut l, "Installed { 3 } at 0 and 1", |l| {
        logged_installed(l, 0, 3) && logged_installed(l, 1, 3)
    })?;
    let (mut logs, _) = l.shutdown();
    cut_installed(&mut logs, &base, 4, N);
    for j in [3, 4] {
        logs[j] = life_0[j].clone();
        let _ = std::fs::remove_file(config(&base, j, N).epoch_log(3).unwrap());
    }
    let mut l = Life::start(seed + 2000, &base, &logs, &four, 2);
    step_until(&mut l, "3 and 4 joining again", |l| {
        [3, 4]
            .iter()
            .all(|&j| (l.groups[j].as_ref()).is_some_and(|g| g.gms().rejoined().is_some()))
    })?;
    for _ in 0..100 {
        l.step(false);
    }
    let waiting = [0, 1].iter().all(|&i| {
        (l.groups[i].as_ref())
            .is_some_and(|g| g.gms().restarting().is_some() && g.view().is_some_and(|v| v.id == 3))
    });
    if !waiting {
        return Ok(Moment::Missed);
    }
    crash_keeping_log(&mut l, 3);
    crash_keeping_log(&mut l, 4);
    let t0 = l.sim.now();
    while ![0, 1].iter().all(|&i| l.restarted(i)) {
        if let Some(i) =
            (0..2).find(|&i| l.groups[i].as_ref().is_some_and(|g| g.stopped().is_some()))
        {
            let why = (l.groups[i].as_ref()).map(|g| format!("{:?}", g.gms().stopped()));
            return Err(format!("n{i} stopped: {why:?}: {}", l.state()));
        }
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("0 and 1 did not restart: {}", l.state()));
        }
        l.step(false);
    }
    start_again(&mut l, 3);
    start_again(&mut l, 4);
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &four, replayed, "0, 1, 3 and 4")?;
    let _ = std::fs::remove_dir_all(&base);
    Ok(Moment::Reached)
}

/// See [`set_aside_joiners_crash`].
#[test]
fn a_restart_whose_set_aside_joiners_crash_completes_without_them() {
    check_seeds_reaching(
        "set_aside_crash",
        3,
        "3 and 4 joining again while 0 and 1 restart view 3",
        set_aside_joiners_crash,
    );
}

/// Item 1 of the s28 review: dueling restart leaders with a counted-out member. Life 0: 4, then
/// 3 crash (views 1 = 0–3, 2 = 0–2). 0's log is cut before it logged the decision `d` that
/// installed view 2 (it ends at view 1), and it promised a restart ballot `bm` of view 1 led by
/// 3, above `d` (`promised_later_than_logged`). Life 1: 0, 1 and 2 start, 3 and 4 not. 0
/// restarts view 1 and reads 1 and 2 one view ahead with `d`, below its promise, while `bm` may
/// still decide (3 is away): it waits. 1 and 2 restart view 2, count 0 out after the timeout
/// (a linked member restarting an older view, `Gms::outsider_in_restart`), and 1 leads a
/// ballot `b`. At that moment 2 stalls for 1.2 ms (under the suspicion timeout) and 3 starts:
/// it reads `d` (which fails it) and joins again, so `bm` is dead and 0 catches up into view 2,
/// still restarting. There 0 leads (at 0 it is `alive.first()`) a ballot above `b`. Before the
/// fix 1 read 0's row among the others and moved to a ballot above 0's, 0 then moved above 1's,
/// and so on: 1 abandoned each ballot before it committed (seed 0: 150 ballots each, until the
/// duel happened to end). Now 1's `seen` leaves out the rows of the members it counted out,
/// and the restart completes without 0; 0 and 3 join again. Since s29 (ninety-second part of
/// `docs/MEMBERSHIP.md`) 1 and 2 also take 0 back once its row shows it restarting view 2 with
/// logged counts (`Gms::take_back_outsiders`): 0 then leads for all, and since the s29
/// follow-up it drops the failure of 0 from 1's proposal (a restart ballot drops a proposed
/// failure of a member in its `alive`), so the restart view 3 keeps 0 (at seeds 0-7: [0, 1, 2,
/// 3], 3 joining in it). With either rule the test passes; it fails with both reverted. Checked: 1 led at most two
/// ballots for view 2, 0, 1, 2 and 3 end in one running view delivering identically, with no
/// view id run with two member lists. The moment: 0 caught up into view 2 while 1 and 2 still
/// restarted it.
fn counted_out_leader_duel(seed: u64) -> Result<Moment, String> {
    let base = dir("counted-out-duel", seed);
    let (mut logs, before) = crashes_in_turn(seed, &base, &[4, 3])?;
    let (_, rec) = MemLog::open(logs[0].clone());
    let mut log = MemLog::default();
    for r in (rec.records.iter())
        .take_while(|r| !matches!(r, Record::Decided { decision: d, .. } if d.trim.view == 1))
    {
        log.append(r).unwrap();
    }
    logs[0] = log.bytes().to_vec();
    let _ = std::fs::remove_file(config(&base, 0, N).epoch_log(2).unwrap());
    promised_later_than_logged(&mut logs, 0, 3);
    let mut l = Life::start(seed + 1000, &base, &logs, &[0, 1, 2], 1);
    step_until(&mut l, "1 leading with 0 counted out", |l| {
        (l.groups[1].as_ref()).is_some_and(|g| {
            g.gms().restarting().is_some()
                && g.gms().leader() == Some(NodeId(1))
                && g.gms().proposal().is_some()
        })
    })?;
    l.stall(2, Duration::from_micros(1200));
    l.start_late(3);
    let at_2 = |l: &Life, i: usize| {
        (l.groups[i].as_ref())
            .is_some_and(|g| g.gms().restarting().is_some() && g.view().is_some_and(|v| v.id == 2))
    };
    let t0 = l.sim.now();
    while !at_2(&l, 0) {
        if !at_2(&l, 1) || l.sim.now().saturating_since(t0) > Duration::from_millis(5) {
            return Ok(Moment::Missed);
        }
        l.step(false);
    }
    if !at_2(&l, 1) {
        return Ok(Moment::Missed);
    }
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &[0, 1, 2, 3], replayed, "0, 1, 2 and 3")?;
    // 1 led at most a ballot or two of its own for view 2, not one for each of 0's.
    let led = (l.groups[1].as_ref()).map_or(0, |g| {
        let (_, rec) = MemLog::open(g.gms().log().bytes().to_vec());
        (rec.records.iter())
            .filter(|r| {
                matches!(r, Record::Promised { view: 2, rank }
                    if squall_membership::restart::rank_of(*rank) == 1)
            })
            .count()
    });
    if led > 2 {
        return Err(format!(
            "1 led {led} restart ballots for view 2, chasing 0's (dueling leaders)"
        ));
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(Moment::Reached)
}

/// See [`counted_out_leader_duel`].
#[test]
fn a_counted_out_member_leading_its_own_ballots_does_not_keep_the_restart_leader_from_committing() {
    check_seeds_reaching(
        "counted_out_duel",
        3,
        "0 caught up into view 2 while 1 and 2 restart it",
        counted_out_leader_duel,
    );
}

// ---- s28 (eighty-fifth part of `docs/MEMBERSHIP.md`): a bare-majority restart with a member
// bouncing before the absent timeout counted the absent members out. ----

/// When [`bounce_before_the_count_out`] crashes member 2.
#[derive(Clone, Copy, Debug)]
enum EarlyBounce {
    /// After this many steps of the restart's life.
    Step(usize),
    /// The moment 0, the leader, first holds a proposal of the restart.
    Proposal,
}

/// A bare majority (0, 1, 2) of the five-member view restarts; 3 and 4 never start (absent:
/// their links never come up). Member 2 crashes at `at` and its new process starts at once
/// from its log: 0 and 1 linked the old incarnation, so both suspect it and hold the new one
/// pending. The moment: at the crash neither 0 nor 1 suspects 3 or 4 (the absent timeout,
/// [`ABSENT`], has not counted them out) and 0 holds no decision of the restart. Before the
/// eighty-fifth part 0 and 1 waited for good ("missing [2, 3, 4]"): the absent timeout runs
/// only once a majority restarted, and the readmission of 2's new incarnation counted the
/// never-linked 3 and 4 as live members of the view (a majority with 0 and 1), so neither
/// wait ended. Checked: all three restart within 50 ms of virtual time and end active in one
/// running view, delivering identically, with what each delivered before the shutdown a
/// prefix, and no view id run with two member lists.
fn bounce_before_the_count_out(seed: u64, at: EarlyBounce) -> Result<Moment, String> {
    let base = dir("early-bounce", seed);
    let (logs, before) = first_life(seed, &base, 1500);
    let up = [0, 1, 2];
    let mut l = Life::start(seed + 1000, &base, &logs, &up, 1);
    let t0 = l.sim.now();
    let mut steps = 0;
    loop {
        let due = match at {
            EarlyBounce::Step(n) => steps >= n,
            EarlyBounce::Proposal => {
                (l.groups[0].as_ref()).is_some_and(|g| g.gms().proposal().is_some())
            }
        };
        if due {
            break;
        }
        if l.sim.now().saturating_since(t0) > Duration::from_millis(50) {
            return Err(format!("the bounce's moment never came: {}", l.state()));
        }
        l.step(false);
        steps += 1;
    }
    let counted_out = |l: &Life, i: usize| {
        (l.groups[i].as_ref()).is_none_or(|g| {
            g.gms().decision().is_some() || [3, 4].iter().any(|&r| g.gms().sst().is_suspected(r))
        })
    };
    if counted_out(&l, 0) || counted_out(&l, 1) || (0..3).any(|i| l.restarted(i)) {
        let _ = std::fs::remove_dir_all(&base);
        return Ok(Moment::Missed);
    }
    l.delivered[2].clear();
    l.restart_member(2);
    l.until_restarted(&up)?;
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    together_and_carrying_on(&mut l, &up, replayed, "the restarted members")?;
    for (i, b) in before.iter().enumerate() {
        if !is_prefix(b, &l.delivered[0]) {
            return Err(format!(
                "n{i}'s deliveries before the shutdown are not kept"
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(Moment::Reached)
}

/// [`bounce_before_the_count_out`] at step 50, 300 or 1500 of the restart (by seed, 3 seeds).
#[test]
fn a_member_bouncing_before_the_absent_timeout_of_a_bare_majority_restart_is_readmitted() {
    check_seeds_reaching(
        "early_bounce_step",
        3,
        "member 2 crashing before 3 and 4 are counted out",
        |seed| {
            let at = [50, 300, 1500][(seed % 3) as usize];
            bounce_before_the_count_out(seed, EarlyBounce::Step(at))
        },
    );
}

/// [`bounce_before_the_count_out`] the moment 0 first holds a proposal (2 seeds).
#[test]
fn a_member_bouncing_at_the_first_proposal_of_a_bare_majority_restart_is_readmitted() {
    check_seeds_reaching(
        "early_bounce_proposal",
        2,
        "member 2 crashing at 0's first proposal, before 3 and 4 are counted out",
        |seed| bounce_before_the_count_out(seed, EarlyBounce::Proposal),
    );
}

// ---- s28 (`docs/MEMBERSHIP.md`, eighty-eighth part): readers under torn writes ----

/// [`refitted`] (form 1) at seed 0 with every write of every life torn (s28, eighty-eighth
/// part). In life 2, 2–4 restart view 0 and 2 leads the ballot `b2`: at construction 2
/// published its logged decision `D'` (ranked `b1`), and once 3 and 4 acknowledged it decides
/// and rewrites its decision block with `b2`'s decision. 3 and 4 hold only `D` (the dead view's
/// join of 5 and 6, ranked below) and have promised `b2`, so their stop check
/// (`Gms::short_of_adopted_for_good`) reads the highest decision of every row. A poll while
/// the pieces of 2's rewrite land read 2's block torn, as no decision: `D` was the highest, 2–4
/// are no majority of its next view 0–6 with 0 and 1 counted out, and 3 and 4 stopped
/// (`RestartShortOfAdopted`); 2 then suspected both and stopped cut off (`RestartCutOff`).
/// Checked: the whole scenario completes torn, and some member's round waited on 2's decision
/// block (the moment is reached; a schedule change that misses it must be re-seeded). With the
/// wait removed (scratch: `Gms::poll` not returning when `Gms::torn_block` finds one) it fails
/// at seed 0 as above.
#[test]
fn a_restart_leaders_decision_block_read_while_it_lands_is_waited_for() {
    TORN.with(|t| t.set(true));
    check_seeds("restart_refitted_torn", 1, |seed| {
        let torn = EventLog::torn_rounds();
        let _guard = tracing::subscriber::set_default(torn.clone());
        refitted(seed, false)?;
        if torn.with(&["row=2", "block=\"decision\""]).is_empty() {
            return Err(format!(
                "seed {seed} no longer reaches a round reading 2's decision block torn; re-seed"
            ));
        }
        Ok(())
    });
}

// ---- s29 (ninety-third part of `docs/MEMBERSHIP.md`): a rejoined member's dead run ----

/// The records of `log` after its last `Installed { vid }` (all of them if none): what the
/// member did in its latest run of `vid`. Read here directly, not through
/// `Recovered::since_installed` (one of the rules under test).
fn after_last_install(log: &[u8], vid: u64) -> Vec<Record> {
    let (_, rec) = MemLog::open(log.to_vec());
    let from = (rec.records.iter())
        .rposition(|r| matches!(r, Record::Installed { view, .. } if *view == vid))
        .map_or(0, |k| k + 1);
    rec.records[from..].to_vec()
}

/// How many `Installed { vid }` records `log` holds (2: it ran `vid` twice).
fn installs_of(log: &[u8], vid: u64) -> usize {
    let (_, rec) = MemLog::open(log.to_vec());
    (rec.records.iter())
        .filter(|r| matches!(r, Record::Installed { view, .. } if *view == vid))
        .count()
}

/// Whether member `i` runs view `vid` (installed, out of restart mode).
fn runs_view(l: &Life, i: usize, vid: u64) -> bool {
    l.restarted(i) && (l.groups[i].as_ref()).is_some_and(|g| g.view().is_some_and(|v| v.id == vid))
}

/// The new run of view 3 decided nothing of the dead run: no member that ran it (1 and 2,
/// and every member whose log installed view 3 twice) logged, after its last `Installed { 3 }`,
/// a decision for view 3 with the changes of the dead run's `b2`.
fn no_dead_run_decision(
    logs: &[Vec<u8>],
    b2: &squall_membership::change::Decision,
) -> Result<(), String> {
    for (i, log) in logs.iter().enumerate() {
        if i != 1 && i != 2 && installs_of(log, 3) < 2 {
            continue;
        }
        for r in after_last_install(log, 3) {
            if let Record::Decided { decision: d, .. } = r
                && d.trim.view == 3
                && d.changes == b2.changes
            {
                return Err(format!(
                    "n{i} logged, in the new run of view 3, a decision with the changes of the \
                     dead run's {b2:?}: {d:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Whether member `i`'s table has `j`'s link up (`j` is not absent there).
fn linked(l: &Life, i: usize, j: usize) -> bool {
    (l.groups[i].as_ref()).is_some_and(|g| {
        let sst = g.gms().sst();
        sst.row_of(NodeId(j as u32))
            .is_some_and(|r| !sst.is_absent(r))
    })
}

/// How the new run of view 3 goes on in [`dead_run`] once 0, 3 and 4 started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DeadRunEnd {
    /// 3 and 4 install the running view 3; the group carries on.
    CarryOn,
    /// 4 stalls once its link with 1 is up (its row, restarting at view 3 with the dead run's
    /// blocks, lands at 1) and before it reads 1 running: 1 suspects it and decides a view
    /// change with its frozen row in the table; 3 installs the running view 3.
    Frozen,
    /// 3 and 4 install the running view 3, then every process stops; in life 4, 1–4 restart
    /// (0 later).
    Stop,
}

/// What the lives before the new run of [`dead_run`] leave.
struct DeadRun {
    logs: Vec<Vec<u8>>,
    /// What each member delivered in life 0.
    before: Vec<Seq>,
    /// The dead run's restart decision for view 3.
    b2: squall_membership::change::Decision,
}

/// Lives 0–2 of [`dead_run`]; `None` where the seed misses a moment.
fn dead_run_lives(seed: u64, base: &Path, runs: &mut RunAcross) -> Result<Option<DeadRun>, String> {
    let all: Vec<usize> = (0..N).collect();
    let (life_0, before) = crashes_in_turn(seed, base, &[4, 3])?;
    // Life 1: the restart of view 2 = [0, 1, 2] admits 3 and 4 under `b1`. Once 1 and 2
    // logged it (echoed), they stall, so that 0 installs view 3 alone; then they crash.
    let mut l = Life::start(seed + 1000, base, &life_0, &all, 1);
    let b1 = |l: &Life, i: usize| {
        (l.groups[i].as_ref())
            .is_some_and(|g| logged_admitting(g.gms().log().bytes(), 2, &[3, 4], true))
    };
    step_until(&mut l, "1 and 2 logging b1", |l| b1(l, 1) && b1(l, 2))?;
    if (1..3).any(|i| logged_installed(&l, i, 3)) {
        return Ok(None);
    }
    l.stall(1, Duration::from_secs(1));
    l.stall(2, Duration::from_secs(1));
    step_until(&mut l, "0 installing view 3", |l| logged_installed(l, 0, 3))?;
    crash_keeping_log(&mut l, 1);
    crash_keeping_log(&mut l, 2);
    step_until(&mut l, "3 and 4 installing view 3", |l| {
        logged_installed(l, 3, 3) && logged_installed(l, 4, 3)
    })?;
    runs.note(&l)?;
    let (logs, _) = l.shutdown();
    // Life 2: 0, 3 and 4 restart view 3 (1 and 2 down), count 1 and 2 out and decide `b2`
    // (fail 1 and 2); every process stops once the three logged it, before any of them
    // installed view 4.
    let mut l = Life::start(seed + 2000, base, &logs, &[0, 3, 4], 2);
    step_until(
        &mut l,
        "0, 3 and 4 logging the restart's decision for view 3",
        |l| {
            let b = |i: usize| {
                (l.groups[i].as_ref()).and_then(|g| ballot_decision_for(g.gms().log().bytes(), 3))
            };
            b(0).is_some() && b(0) == b(3) && b(0) == b(4)
        },
    )?;
    if (0..N).any(|i| logged_installed(&l, i, 4)) {
        return Ok(None);
    }
    runs.note(&l)?;
    let (logs, _) = l.shutdown();
    let Some(b2) = ballot_decision_for(&logs[0], 3) else {
        return Err("0's log lost b2".into());
    };
    Ok(Some(DeadRun { logs, before, b2 }))
}

/// s29 (ninety-third part of `docs/MEMBERSHIP.md`): the ninetieth part's item 1 on the
/// simulator. Life 0: 4, then 3 crash (views 1 = 0–3, 2 = 0–2). Life 1: all five start; the
/// restart of view 2 decides `b1` (attempt 1) admitting 3 and 4; 1 and 2 log it and stall, 0
/// installs view 3 = 0–4, 1 and 2 crash (their logs hold `b1`, no view 3), and 3 and 4
/// install view 3 as joiners. Life 2: 0, 3 and 4 restart view 3 (a majority of it), count 1
/// and 2 out and decide `b2` = [Fail 1, Fail 2]; every process stops once the three logged
/// it, before any of them installed view 4. Life 3: 1 and 2 start alone, restart view 2,
/// count 0 out and install the `b1` they hold: view 3 runs again, as decided, and 0, 3 and 4's
/// run of it is dead. Then 0, 3 and 4 start, restarting at view 3 and re-publishing `b2` and
/// their promise; 1 leads the new run (0's old incarnation is counted out). `end` says what
/// follows ([`DeadRunEnd`]): 3 and 4 (or 3 alone, 4 frozen) read 1 running view 3, join again
/// and install the running view 3 (`follow_as_outsider`), and the group carries on; or every
/// process stops at that moment and 1–4 restart from their logs in life 4. Checked: no member
/// that ran the new run of view 3 logged a decision for it with `b2`'s changes; the members
/// (1–4, 1–3 when 4 is frozen; all five `with_0`) end active in one running view delivering
/// identically; no view id from 3 on ran with two member lists in any life (`RunAcross`);
/// every install follows the highest decision its log holds since it last joined
/// (`installed_as_decided`); everything delivered in life 0 is a prefix of the end. With
/// `with_0`, once 1-4 run together, 0 (which the new run counted out while it held `b2`, and
/// whose first process every peer has failed) is restarted by the operator, and its new
/// process must join again from view 3 on reading view 4 (`rejoined() == (3, 4)`; see
/// [`regression_dead_run_holder_counted_out_of_the_new_run_joins_again`]).
/// The moment: 3 and 4 (3 when 4 is frozen) installed the running view 3 (and, `with_0`, 0
/// joined again so).
fn dead_run(seed: u64, end: DeadRunEnd, with_0: bool) -> Result<Moment, String> {
    let base = dir("dead-run", seed);
    let (together, who) = match (with_0, end) {
        (true, _) => ((0..N).collect::<Vec<_>>(), "every node"),
        (false, DeadRunEnd::Frozen) => (vec![1, 2, 3], "1-3"),
        (false, _) => (vec![1, 2, 3, 4], "1-4"),
    };
    let mut runs = RunAcross::from(3);
    let Some(DeadRun { logs, before, b2 }) = dead_run_lives(seed, &base, &mut runs)? else {
        return Ok(Moment::Missed);
    };
    let mut l = Life::start(seed + 3000, &base, &logs, &[1, 2], 3);
    step_until(&mut l, "1 and 2 running view 3 (or stopping)", |l| {
        [1, 2].iter().all(|&i| {
            runs_view(l, i, 3) || l.groups[i].as_ref().is_some_and(|g| g.stopped().is_some())
        })
    })?;
    if !(runs_view(&l, 1, 3) && runs_view(&l, 2, 3)) {
        return Ok(Moment::Missed);
    }
    for i in [0, 3, 4] {
        l.start_late(i);
    }
    let rejoining: &[usize] = if end == DeadRunEnd::Frozen {
        step_until(&mut l, "4 linked with 1", |l| {
            linked(l, 4, 1) && linked(l, 1, 4)
        })?;
        if (l.groups[4].as_ref()).is_some_and(|g| g.gms().rejoined().is_some()) {
            return Ok(Moment::Missed);
        }
        l.stall(4, Duration::from_millis(10));
        &[3]
    } else {
        &[3, 4]
    };
    step_until(&mut l, "3 and 4 installing the running view 3", |l| {
        rejoining.iter().all(|&i| {
            (l.groups[i].as_ref()).is_some_and(|g| installs_of(g.gms().log().bytes(), 3) == 2)
        })
    })?;
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    if with_0 {
        // 0's first process is failed at every peer (3 and 4 cut it as they joined the new
        // run, 1 and 2 named its incarnation failed without linking it) and waits at view 3
        // (ninety-fifth part, "Left"); the operator restarts it once 1-4 run.
        together_and_carrying_on(&mut l, &[1, 2, 3, 4], replayed, "1-4")?;
        l.restart_member(0);
    }
    if end == DeadRunEnd::Stop {
        runs.note(&l)?;
        let (logs, _) = l.shutdown();
        l = Life::start(seed + 4000, &base, &logs, &[1, 2, 3, 4], 4);
        step_until(&mut l, "1-4 running a view", |l| {
            (1..N).all(|i| l.restarted(i))
        })?;
        l.start_late(0);
    }
    together_and_carrying_on(&mut l, &together, replayed, who)?;
    // `with_0`'s moment: 0's second process joined again from view 3 on reading view 4.
    let rejoined_0 = (l.groups[0].as_ref()).and_then(|g| g.gms().rejoined());
    runs.note(&l)?;
    let (logs, end) = l.shutdown();
    all_prefixes(&[before], &end[together[0]])?;
    no_dead_run_decision(&logs, &b2)?;
    installed_as_decided(&logs)?;
    let _ = std::fs::remove_dir_all(&base);
    if with_0 && rejoined_0 != Some((3, 4)) {
        return Ok(Moment::Missed);
    }
    Ok(Moment::Reached)
}

/// The first seed of the [`dead_run`] tests: of seeds 0–23, 1, 4 and 6 (and 14–17, 19) miss
/// the moment (1 or 2 installs view 3 before it stalls, or a member installs view 4 in life
/// 2), 7–13 all reach it.
const DEAD_RUN_SEEDS: u64 = 7;

#[test]
fn a_rejoined_members_dead_run_decision_is_not_taken_by_the_new_runs_leader() {
    check_seeds_reaching(
        "dead_run",
        3,
        "3 and 4 installing the running view 3 over their dead run",
        |seed| dead_run(DEAD_RUN_SEEDS + seed, DeadRunEnd::Frozen, false),
    );
}

#[test]
fn a_total_restart_after_a_rejoin_into_the_new_run_does_not_count_the_dead_runs_decision() {
    check_seeds_reaching(
        "dead_run_stop",
        3,
        "3 and 4 installing the running view 3 over their dead run",
        |seed| dead_run(DEAD_RUN_SEEDS + seed, DeadRunEnd::Stop, false),
    );
}

/// [`dead_run`] with all five required at the end. 0 holds `b2` (the dead run's decision for
/// view 3, attempt 1, next view [0, 3, 4]) and restarts at view 3 after 1 and 2 counted its
/// old incarnation out; 1 decides view 4 = 1–4 (fail 0, rank 1). In its first process 0 is cut
/// off by 3 and 4 and reads no row of 1 or 2 (left open). Restarted from its log once 1-4
/// run, it reads all four at view 4. `Gms::dead_ahead` skips each (`b2` outranks their
/// decision for view 3 and makes another next view), and before s29 0 then waited at view 3
/// for good, without a stop (ninety-third part of `docs/MEMBERSHIP.md`). Now 3 and 4, two of
/// `b2`'s next view's three, run another view 4, so that view is dead (`Gms::next_view_dead`)
/// and 0 joins again (ninety-fifth part).
#[test]
fn regression_dead_run_holder_counted_out_of_the_new_run_joins_again() {
    check_seeds_reaching(
        "dead_run_with_0",
        3,
        "3 and 4 installing the running view 3 over their dead run, and 0 joining again from \
         view 3 on reading view 4",
        |seed| dead_run(DEAD_RUN_SEEDS + seed, DeadRunEnd::CarryOn, true),
    );
}

// ---- s29 (`docs/MEMBERSHIP.md`, ninety-second part): restart members that disagree on who is
// counted out ----

/// Life 0 of [`disagree_on_counted_out`]: a universe of six, view 0 = 0–4; node 5 joins
/// (view 1 = 0–5), then crashes (view 2 = 0–4), and everyone stops once 0–4 run view 2.
fn five_after_a_sixth_left(seed: u64, base: &Path) -> Result<(Vec<Vec<u8>>, Vec<Seq>), String> {
    const U: usize = N + 1;
    let all: Vec<usize> = (0..U).collect();
    let mut l = Life::start_in(seed, base, &vec![Vec::new(); U], &all, 0, U);
    for _ in 0..600 {
        l.step(true);
    }
    l.groups[N].as_mut().unwrap().join().unwrap();
    let in_view = |l: &Life, members: &[usize], vid: u64| {
        members.iter().all(|&i| {
            (l.groups[i].as_ref())
                .is_some_and(|g| g.is_active() && g.view().is_some_and(|v| v.id == vid))
        })
    };
    step_until(&mut l, "0–5 in view 1", |l| in_view(l, &all, 1))?;
    for _ in 0..100 {
        l.step(true);
    }
    crash_keeping_log(&mut l, N);
    step_until(&mut l, "0–4 in view 2", |l| in_view(l, &all[..N], 2))?;
    for _ in 0..100 {
        l.step(true);
    }
    Ok(l.shutdown())
}

/// s29 (the ninetieth part's item 4): restart members that disagree on who is counted out.
/// Life 0 ([`five_after_a_sixth_left`]): view 1 = 0–5, view 2 = 0–4 (the decision `d` of
/// view 1 fails 5). The log of `o` (0 or 3) is cut before `d` (it ends at view 1), and it
/// promised a restart ballot `bm` of view 1 led by 4, above `d` (`promised_later_than_logged`).
/// Life 1: 0–3 start, 4 and 5 not. `o` restarts view 1 and waits below its promise (`bm` may
/// decide: 4 is away, and the three others one view ahead below `bm` are no majority of view
/// 1). The three others restart view 2, a majority, and count `o` out as an outsider a
/// suspicion timeout later (`Gms::outsider_in_restart`: a linked member restarting an older
/// view); their leader `L` (1 for `o` = 0, else 0) leads with `alive` = the others and 4, which
/// is not yet counted out (the absent timeout is longer). Then 4 starts, restarting view 2 with
/// logged counts: `o` reads it one view ahead below `bm`, so `bm` is dead, and catches up into
/// view 2, restarting, before 4's own outsiders' clock runs out. So 4 never counts `o` out
/// while `L` and its followers do.
///
/// With `o` = 0 that is a split on the leader (`alive.first()`): 4's is 0, the others' is 1.
/// Before the fix 0 and 1 each waited for the other's followers and moved above the ballot
/// each read in 4's proposal block (which follows 0): on seeds 0–7 neither committed within
/// 50 ms, each leading about 4,150 ballots. Now the others take 0 back once its row shows it
/// restarting view 2 with logged counts (`Gms::take_back_outsiders`), and 0 leads for all. On
/// takeover it takes the most advanced proposal visible, 1's, and drops its failure of 0 (a
/// restart ballot drops a proposed failure of a member in its `alive`; s29 follow-up), so the
/// restart view 3 is 0–4 and 0 does not join again. With `o` = 3 (ranked above `L` = 0) every
/// member's leader is 0 either way; if 0's ballot failing 3 commits before 0 takes 3 back, 4,
/// which did not count 3 out, installs once 3 echoes it, and 3 joins again (seeds 1-4 and 6 of
/// 0-7); otherwise 3 stays.
///
/// Checked: 0–4 end in one running view delivering identically, with no view id run with two
/// member lists, and neither `o` nor `L` led more than two restart ballots for view 2; with
/// `o` = 0, 0 did not join again and 1 runs view 3 = 0–4. The moment: `o` caught up into view
/// 2 while 1–4 still restart it, `L` counts `o` out and 4 does not (`Gms::counted_out`), and
/// with `o` = 0, 1's leader is 1 and 4's is 0.
fn disagree_on_counted_out(seed: u64, o: usize) -> Result<Moment, String> {
    const U: usize = N + 1;
    let lead = if o == 0 { 1 } else { 0 };
    let base = dir(&format!("disagree-counted-out-{o}"), seed);
    let (mut logs, before) = five_after_a_sixth_left(seed, &base)?;
    let (_, rec) = MemLog::open(logs[o].clone());
    let mut log = MemLog::default();
    for r in (rec.records.iter())
        .take_while(|r| !matches!(r, Record::Decided { decision: d, .. } if d.trim.view == 1))
    {
        log.append(r).unwrap();
    }
    logs[o] = log.bytes().to_vec();
    let _ = std::fs::remove_file(config(&base, o, U).epoch_log(2).unwrap());
    promised_later_than_logged(&mut logs, o, 4);
    let mut l = Life::start_in(seed + 1000, &base, &logs, &[0, 1, 2, 3], 1, U);
    let fails_o = |ch: &[squall_membership::change::Change]| {
        (ch.iter()).any(|c| c.node == NodeId(o as u32) && c.removes())
    };
    step_until(&mut l, "L leading with o counted out", |l| {
        (l.groups[lead].as_ref()).is_some_and(|g| {
            g.gms().restarting().is_some()
                && g.gms().leader() == Some(NodeId(lead as u32))
                && g.gms().proposal().is_some_and(|(_, ch)| fails_o(ch))
        })
    })?;
    l.start_late(4);
    let at_2 = |l: &Life, i: usize| {
        (l.groups[i].as_ref())
            .is_some_and(|g| g.gms().restarting().is_some() && g.view().is_some_and(|v| v.id == 2))
    };
    let t0 = l.sim.now();
    while !at_2(&l, o) {
        if !at_2(&l, lead) || l.sim.now().saturating_since(t0) > Duration::from_millis(5) {
            return Ok(Moment::Missed);
        }
        l.step(false);
    }
    let leader_at = |l: &Life, i: usize| l.groups[i].as_ref().and_then(|g| g.gms().leader());
    let counts_o_out = |l: &Life, i: usize| {
        (l.groups[i].as_ref()).is_some_and(|g| g.gms().counted_out().contains(&NodeId(o as u32)))
    };
    let split = (0..N).all(|i| at_2(&l, i))
        && counts_o_out(&l, lead)
        && !counts_o_out(&l, 4)
        && leader_at(&l, 4) == Some(NodeId(0))
        && leader_at(&l, lead) == Some(NodeId(lead as u32));
    if !split {
        return Ok(Moment::Missed);
    }
    let five: Vec<usize> = (0..N).collect();
    let replayed = before.iter().map(Vec::len).max().unwrap_or(0);
    let together = together_and_carrying_on(&mut l, &five, replayed, "0–4");
    let led = |l: &Life, i: usize| {
        (l.groups[i].as_ref()).map_or(0, |g| {
            let (_, rec) = MemLog::open(g.gms().log().bytes().to_vec());
            (rec.records.iter())
                .filter(|r| {
                    matches!(r, Record::Promised { view: 2, rank }
                        if squall_membership::restart::rank_of(*rank) == i as u64)
                })
                .count()
        })
    };
    let (led_o, led_l) = (led(&l, o), led(&l, lead));
    together
        .map_err(|e| format!("{e} ({o} led {led_o} ballots for view 2, {lead} led {led_l})"))?;
    if led_o > 2 || led_l > 2 {
        return Err(format!(
            "{o} led {led_o} restart ballots for view 2 and {lead} led {led_l} (dueling leaders)"
        ));
    }
    // `o` = 0: once taken back, 0 is in `alive` everywhere, and the failure of it that 1
    // proposed is dropped from the restart ballot's proposal (s29 follow-up): 0 stays in the
    // restart view 3 and does not join again.
    if o == 0 {
        let g0 = l.groups[0].as_ref().map(|g| g.gms());
        let rejoined = g0.and_then(|g| g.rejoined());
        let at_1 = (l.groups[1].as_ref())
            .and_then(|g| g.view())
            .map(|v| (v.id, v.members.clone()));
        let five: Vec<NodeId> = (0..N as u32).map(NodeId).collect();
        if rejoined.is_some() || at_1.as_ref() != Some(&(3, five.clone())) {
            return Err(format!(
                "0 left the restart: 1 runs view {at_1:?} (expected view 3 = {five:?}), 0 \
                 joined again: {rejoined:?}"
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(Moment::Reached)
}

/// See [`disagree_on_counted_out`] (`o` = 0: the split on the leader).
#[test]
fn restart_members_that_disagree_on_who_is_counted_out_converge_on_one_leader() {
    check_seeds_reaching(
        "disagree_counted_out",
        3,
        "0 caught up into view 2, 1 leading and 4 following 0",
        |seed| disagree_on_counted_out(seed, 0),
    );
}

/// See [`disagree_on_counted_out`] (`o` = 3, ranked above the leader 0: no split on the
/// leader; this form completed before the fix too).
#[test]
fn a_member_counted_out_by_some_restart_members_only_ranked_above_their_leader_completes() {
    check_seeds_reaching(
        "disagree_counted_out_above",
        3,
        "3 caught up into view 2 while 0 leads a ballot failing it",
        |seed| disagree_on_counted_out(seed, 3),
    );
}
