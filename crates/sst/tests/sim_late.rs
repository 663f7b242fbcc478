//! Late members and the detector switch, in the simulator: a member that starts after the
//! others is absent (never suspected for it), then catches up; a table with
//! `Detector::TransportOnly` posts no heartbeats and still suspects on transport failures; a
//! member that gives up on a new incarnation it never linked (`Sst::suspect_incarnation`)
//! makes the members linked to it suspect it too; a whole-row push with guards set posts them
//! last, in order, each its own write (SMC's `smc_sent` among them).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use squall_sst::{
    Counter, Detector, Schema, SchemaBuilder, Smc, SmcConfig, Sst, SstConfig, Suspicion,
};
use squall_transport::{
    Event, LocalSlice, NodeId, OpId, PostError, Region, RegionId, RegionSpec, RemoteAddr, Signal,
    Time, Transport, Waker,
};
use squall_transport_mem::sim::{Sim, SimConfig, SimNode, check_seeds};

const REGION: RegionId = RegionId(0);

fn schema(n: usize) -> (Schema, Counter) {
    let mut b = SchemaBuilder::new(n);
    let count = b.counter("count");
    (b.build().expect("valid schema"), count)
}

fn config(n: usize) -> SstConfig {
    SstConfig {
        heartbeat_interval: Duration::from_micros(50),
        suspicion_timeout: Duration::from_micros(1500),
        ..SstConfig::new(REGION, (0..n as u32).map(NodeId).collect())
    }
}

/// Polls every running table and lets `step` of virtual time pass, until `done` or `limit`.
fn run(
    sim: &Sim,
    ssts: &mut [Option<Sst<SimNode>>],
    limit: Duration,
    mut done: impl FnMut(&mut [Option<Sst<SimNode>>]) -> bool,
) -> Result<bool, String> {
    let end = sim.now() + limit;
    while sim.now() < end {
        for (i, s) in ssts.iter_mut().enumerate() {
            if let Some(s) = s
                && !sim.is_crashed(NodeId(i as u32))
            {
                s.poll_once().map_err(|e| format!("n{i}: {e}"))?;
            }
        }
        if done(ssts) {
            return Ok(true);
        }
        sim.advance(Duration::from_micros(5));
    }
    Ok(false)
}

fn late_member(seed: u64) -> Result<(), String> {
    let n = 4;
    let (schema, count) = schema(n);
    let layout = [RegionSpec::new(REGION, schema.table_len())];
    let (sim, mut endpoints) =
        Sim::cluster_late(SimConfig::seeded(seed), n, &layout, &[NodeId(3)]).expect("valid sim");
    let late_endpoint = endpoints.pop().expect("four endpoints");
    let mut ssts: Vec<Option<Sst<SimNode>>> = endpoints
        .into_iter()
        .map(|t| Some(Sst::new(t, schema.clone(), config(n)).expect("valid table")))
        .collect();
    ssts.push(None);
    for (i, s) in ssts.iter_mut().enumerate().take(3) {
        let s = s.as_mut().expect("running");
        if !s.is_absent(3) {
            return Err(format!("n{i} does not see n3 absent"));
        }
        s.set(count, 10 + i as u64);
        // Pushing skips the absent member: no error upward.
        s.push(count.range())
            .map_err(|e| format!("n{i} push: {e}"))?;
    }
    // Absent for ten suspicion timeouts: nobody suspects anybody.
    run(&sim, &mut ssts, Duration::from_millis(15), |_| false)?;
    for (i, s) in ssts.iter().enumerate().take(3) {
        let s = s.as_ref().expect("running");
        if !s.suspicions().is_empty() || !s.is_absent(3) {
            return Err(format!("n{i} while n3 was absent: {:?}", s.suspicions()));
        }
    }
    // Start it: it begins with the others' rows zero and sees them fill in.
    sim.start_node(NodeId(3));
    let mut late = Sst::new(late_endpoint, schema.clone(), config(n)).expect("valid table");
    if (0..3).any(|r| late.get(r, count) != 0 || !late.is_absent(r)) {
        return Err("the late table did not start with absent, zero rows".into());
    }
    late.set(count, 13);
    late.push(count.range())
        .map_err(|e| format!("n3 push: {e}"))?;
    ssts[3] = Some(late);
    let converged = run(&sim, &mut ssts, Duration::from_millis(5), |ssts| {
        ssts.iter().all(|s| {
            let s = s.as_ref().expect("running");
            (0..4).all(|r| s.get(r, count) == 10 + r as u64)
        })
    })?;
    if !converged {
        return Err("rows did not converge after the late member started".into());
    }
    run(&sim, &mut ssts, Duration::from_millis(5), |_| false)?;
    for (i, s) in ssts.iter().enumerate() {
        let s = s.as_ref().expect("running");
        if !s.suspicions().is_empty() || (0..4).any(|r| s.is_absent(r)) {
            return Err(format!("n{i} after the start: {:?}", s.suspicions()));
        }
    }
    // Connected, then crashed: suspected as usual.
    sim.crash(NodeId(3));
    let suspected = run(&sim, &mut ssts, Duration::from_millis(10), |ssts| {
        ssts.iter()
            .take(3)
            .all(|s| s.as_ref().expect("running").is_suspected(3))
    })?;
    if !suspected {
        return Err("the crashed late member was not suspected".into());
    }
    Ok(())
}

#[test]
fn a_late_member_is_not_suspected_while_absent_then_catches_up() {
    check_seeds(
        "a_late_member_is_not_suspected_while_absent_then_catches_up",
        8,
        late_member,
    );
}

#[test]
fn transport_only_detector_posts_no_heartbeats_and_suspects_on_peer_failed() {
    let n = 3;
    let (schema, count) = schema(n);
    let layout = [RegionSpec::new(REGION, schema.table_len())];
    let (sim, endpoints) = Sim::cluster(SimConfig::seeded(5), n, &layout).expect("valid sim");
    let cfg = SstConfig {
        detector: Detector::TransportOnly,
        ..config(n)
    };
    let mut ssts: Vec<Option<Sst<SimNode>>> = endpoints
        .into_iter()
        .map(|t| Some(Sst::new(t, schema.clone(), cfg.clone()).expect("valid table")))
        .collect();
    let hb = schema.heartbeat();
    // n2 hangs (not polled) far beyond the suspicion timeout: nobody suspects it, and no
    // heartbeat is ever bumped.
    let mut hung = ssts.pop().flatten().expect("three");
    run(&sim, &mut ssts, Duration::from_millis(10), |_| false).expect("runs");
    for s in ssts.iter().flatten() {
        assert!(
            s.suspicions().is_empty(),
            "suspected on a timeout: {:?}",
            s.suspicions()
        );
        assert!((0..3).all(|r| s.get(r, hb) == 0), "a heartbeat was posted");
    }
    hung.poll_once().expect("runs");
    assert_eq!(hung.get(2, hb), 0, "the hung member bumped its heartbeat");
    // A transport failure is still a suspicion: n2 crashes, n0's push to it times out.
    sim.crash(NodeId(2));
    let s0 = ssts[0].as_mut().expect("running");
    s0.set(count, 1);
    s0.push(count.range()).expect("push");
    let ok = run(&sim, &mut ssts, Duration::from_millis(10), |ssts| {
        ssts[0].as_ref().expect("running").is_suspected(2)
    })
    .expect("runs");
    assert!(ok, "a PeerFailed did not make n0 suspect n2");
    let (who, why, _) = ssts[0].as_ref().expect("running").suspicions()[0];
    assert_eq!((who, why), (NodeId(2), Suspicion::Transport));
}

#[test]
fn transport_only_is_validated() {
    // The detector switch keeps the timing checks (heartbeat_interval still scales the
    // accusation delay), with the same clear errors.
    let bad = SstConfig {
        detector: Detector::TransportOnly,
        heartbeat_interval: Duration::ZERO,
        ..config(2)
    };
    assert!(bad.validate().is_err());
}

/// `Sst::suspect_incarnation` on a row already suspected (the membership layer's bound on the
/// wait for an expected incarnation's link): n2 crashes and both n0 and n1 suspect it
/// (incarnation 0); n2 restarts as incarnation 1, which n1 readmits while n0 never does (its
/// link is "late" forever: n0 is told to give up). n0's flag then names incarnation 1, and n1,
/// which counts that incarnation, adopts the suspicion (its flag of incarnation 0 alone would
/// be stale there). Checked against the same run without the call: n1 keeps n2 live.
fn give_up_on_an_incarnation(seed: u64, give_up: bool) -> Result<bool, String> {
    let n = 3;
    let (schema, _) = schema(n);
    let layout = [RegionSpec::new(REGION, schema.table_len())];
    let (sim, endpoints) = Sim::cluster(SimConfig::seeded(seed), n, &layout).expect("valid sim");
    let mut ssts: Vec<Option<Sst<SimNode>>> = endpoints
        .into_iter()
        .map(|t| Some(Sst::new(t, schema.clone(), config(n)).expect("valid table")))
        .collect();
    run(&sim, &mut ssts, Duration::from_millis(1), |_| false)?;
    sim.crash(NodeId(2));
    ssts[2] = None;
    let both = |s: &mut [Option<Sst<SimNode>>]| {
        (0..2).all(|i| s[i].as_ref().is_some_and(|t| t.is_suspected(2)))
    };
    if !run(&sim, &mut ssts, Duration::from_millis(10), both)? {
        return Err("the crash was not suspected".into());
    }
    let t = sim.restart_node(NodeId(2)).expect("restarts");
    ssts[2] = Some(Sst::new(t, schema.clone(), config(n)).expect("valid table"));
    let pending = |s: &mut [Option<Sst<SimNode>>]| {
        s[1].as_ref()
            .is_some_and(|t| t.pending_incarnation(2).is_some())
    };
    if !run(&sim, &mut ssts, Duration::from_millis(5), pending)? {
        return Err("n1 never held the new incarnation pending".into());
    }
    let s1 = ssts[1].as_mut().expect("running");
    let k = s1.pending_incarnation(2).expect("pending");
    s1.readmit(2).map_err(|e| e.to_string())?;
    if give_up {
        let s0 = ssts[0].as_mut().expect("running");
        s0.suspect_incarnation(NodeId(2), k)
            .map_err(|e| e.to_string())?;
        if s0.known_incarnation(2) != k || !s0.is_suspected(2) {
            return Err("n0 does not suspect the incarnation it gave up on".into());
        }
    }
    let again = |s: &mut [Option<Sst<SimNode>>]| s[1].as_ref().is_some_and(|t| t.is_suspected(2));
    run(&sim, &mut ssts, Duration::from_millis(1), again)
}

#[test]
fn a_suspicion_of_an_incarnation_never_linked_here_spreads_to_the_members_linked_to_it() {
    check_seeds("sst_give_up_on_an_incarnation", 3, |seed| {
        if !give_up_on_an_incarnation(seed, true)? {
            return Err("n1 did not adopt n0's suspicion of the new incarnation".into());
        }
        if give_up_on_an_incarnation(seed, false)? {
            return Err("n1 suspected the new incarnation without n0 giving up on it".into());
        }
        Ok(())
    });
}

/// A transport that records the (offset, length) of every write it posts, by peer.
struct Recording {
    inner: SimNode,
    writes: Rc<RefCell<Vec<(NodeId, usize, usize)>>>,
}

impl Transport for Recording {
    fn local_id(&self) -> NodeId {
        self.inner.local_id()
    }
    fn peers(&self) -> &[NodeId] {
        self.inner.peers()
    }
    fn region(&self, id: RegionId) -> Option<&Region> {
        self.inner.region(id)
    }
    fn remote_region_len(&self, peer: NodeId, id: RegionId) -> Option<usize> {
        self.inner.remote_region_len(peer, id)
    }
    fn max_message_len(&self) -> usize {
        self.inner.max_message_len()
    }
    fn now(&self) -> Time {
        self.inner.now()
    }
    fn write(
        &mut self,
        peer: NodeId,
        src: LocalSlice,
        dst: RemoteAddr,
        signal: Signal,
    ) -> Result<OpId, PostError> {
        self.writes.borrow_mut().push((peer, src.offset, src.len));
        self.inner.write(peer, src, dst, signal)
    }
    fn read(&mut self, peer: NodeId, src: RemoteAddr, dst: LocalSlice) -> Result<OpId, PostError> {
        self.inner.read(peer, src, dst)
    }
    fn compare_and_swap(
        &mut self,
        peer: NodeId,
        word: RemoteAddr,
        expected: u64,
        new: u64,
    ) -> Result<OpId, PostError> {
        self.inner.compare_and_swap(peer, word, expected, new)
    }
    fn fetch_add(&mut self, peer: NodeId, word: RemoteAddr, delta: u64) -> Result<OpId, PostError> {
        self.inner.fetch_add(peer, word, delta)
    }
    fn send(&mut self, peer: NodeId, data: &[u8], signal: Signal) -> Result<OpId, PostError> {
        self.inner.send(peer, data, signal)
    }
    fn fence(&mut self, peer: NodeId) -> Result<OpId, PostError> {
        self.inner.fence(peer)
    }
    fn poll(&mut self, out: &mut [Event]) -> usize {
        self.inner.poll(out)
    }
    fn recv(&mut self, buf: &mut Vec<u8>) -> Option<NodeId> {
        self.inner.recv(buf)
    }
    fn is_absent(&self, peer: NodeId) -> bool {
        self.inner.is_absent(peer)
    }
    fn report_failed(&mut self, peer: NodeId) {
        self.inner.report_failed(peer)
    }
    fn wait(&mut self, timeout: Duration) {
        self.inner.wait(timeout)
    }
    fn waker(&self) -> Waker {
        self.inner.waker()
    }
}

/// With ranges to post last (`Sst::set_row_push_last`; s25 as a single tail, s27 as an ordered
/// list), the whole-row push to a late member is first the runs of words in none of them (in
/// ascending order), then each range in the order given, each its own write (a fabric orders
/// writes on a link, not the words within one): here the guard `after` and then `tail`,
/// against their order in the row. Every word of the row is posted once, and the late
/// member's copy of the row ends the same. A table with none set pushes its row in one write.
#[test]
fn a_whole_row_push_to_a_late_member_posts_the_guards_last_in_order() {
    let n = 3;
    let mut b = SchemaBuilder::new(n);
    let before = b.counter("before");
    let tail = b.vector("tail", 2);
    let after = b.counter("after");
    let rest = b.counter("rest");
    let schema = b.build().expect("valid schema");
    let row_len = schema.row_range().len;
    let layout = [RegionSpec::new(REGION, schema.table_len())];
    let (sim, mut endpoints) =
        Sim::cluster_late(SimConfig::seeded(3), n, &layout, &[NodeId(2)]).expect("valid sim");
    let late = endpoints.pop().expect("three endpoints");
    let writes = Rc::new(RefCell::new(Vec::new()));
    let recording = |inner: SimNode| Recording {
        inner,
        writes: Rc::clone(&writes),
    };
    let mut ssts: Vec<Option<Sst<Recording>>> = endpoints
        .into_iter()
        .map(|t| Some(Sst::new(recording(t), schema.clone(), config(n)).expect("valid table")))
        .collect();
    for (i, s) in ssts.iter_mut().enumerate() {
        let s = s.as_mut().expect("running");
        s.set(before, 10 + i as u64);
        s.set(after, 20 + i as u64);
        s.set(rest, 40 + i as u64);
        s.set_at(tail, 1, 30 + i as u64).expect("in the vector");
    }
    ssts[0]
        .as_mut()
        .expect("running")
        .set_row_push_last(&[after.range(), tail.range()]);
    sim.start_node(NodeId(2));
    ssts.push(Some(
        Sst::new(recording(late), schema.clone(), config(n)).expect("valid table"),
    ));
    let end = sim.now() + Duration::from_millis(2);
    while sim.now() < end {
        for s in ssts.iter_mut().flatten() {
            s.poll_once().expect("no failure");
        }
        sim.advance(Duration::from_micros(5));
    }
    let writes = writes.borrow();
    let first_to_late = |from: usize| -> Vec<(usize, usize)> {
        let start = from * row_len;
        let row: Vec<(usize, usize)> = (writes.iter())
            .filter(|&&(peer, at, len)| {
                peer == NodeId(2) && at >= start && at + len <= start + row_len
            })
            .map(|&(_, at, len)| (at - start, len))
            .collect();
        let whole = row.iter().position(|&(at, _)| at == 0).expect("a row push");
        row[whole..].to_vec()
    };
    let (t, a, r) = (tail.range(), after.range(), rest.range());
    let split = first_to_late(0);
    assert_eq!(
        split[..4],
        [
            (0, t.offset),
            (r.offset, r.len),
            (a.offset, a.len),
            (t.offset, t.len)
        ],
        "n0's pushes to n2: {split:?}"
    );
    assert_eq!(r.offset + r.len, row_len, "`rest` ends the row");
    let whole = first_to_late(1);
    assert_eq!(whole[0], (0, row_len), "n1's pushes to n2: {whole:?}");
    let late = ssts[2].as_ref().expect("running");
    for r in 0..2 {
        assert_eq!(late.get(r, before), 10 + r as u64);
        assert_eq!(late.get(r, after), 20 + r as u64);
        assert_eq!(late.get(r, rest), 40 + r as u64);
        assert_eq!(
            late.get_at(r, tail, 1).expect("in the vector"),
            30 + r as u64
        );
    }
}

/// SMC lists its guard `smc_sent` among the ranges a whole-row push posts last (s28,
/// `docs/MEMBERSHIP.md`, eightieth part): a member that sent before a late member's link came
/// up pushes its ring's slots (and every other word) first and the guard last, its own write.
/// Before, the row went in one write, and a fabric that places a write's words in any order
/// could land the guard before the slots it vouches for.
#[test]
fn a_whole_row_push_of_an_smc_table_posts_smc_sent_after_the_slots() {
    smc_row_push(false);
}

/// A list the table's user sets after `Smc::new` (as the GMS does at construction) keeps
/// `smc_sent` posted last, after the user's ranges (s28 review R2, `docs/MEMBERSHIP.md`,
/// eightieth part, "s28 follow-up"). Before, `Sst::set_row_push_last` replaced the whole list,
/// dropping SMC's guard silently.
#[test]
fn a_row_push_list_set_after_smc_new_keeps_smc_sent_posted_last() {
    smc_row_push(true);
}

/// n0 sends one message before n2's link comes up and pushes its whole row to n2; with
/// `user_list`, every table lists `after` (`set_row_push_last`) after `Smc::new` registered
/// `smc_sent`. The push must post the unlisted words first, in ascending runs, then `after`
/// (if listed), then `smc_sent`; n2 delivers the message.
fn smc_row_push(user_list: bool) {
    let n = 3;
    let mut b = SchemaBuilder::new(n);
    let before = b.counter("before");
    let fields = Smc::declare(
        &mut b,
        SmcConfig {
            window: 4,
            slot_size: 24,
        },
    )
    .expect("valid smc config");
    let after = b.counter("after");
    let schema = b.build().expect("valid schema");
    let row_len = schema.row_range().len;
    let layout = [RegionSpec::new(REGION, schema.table_len())];
    let (sim, mut endpoints) =
        Sim::cluster_late(SimConfig::seeded(5), n, &layout, &[NodeId(2)]).expect("valid sim");
    let late = endpoints.pop().expect("three endpoints");
    let writes = Rc::new(RefCell::new(Vec::new()));
    let recording = |inner: SimNode| Recording {
        inner,
        writes: Rc::clone(&writes),
    };
    let mut ssts: Vec<Sst<Recording>> = (endpoints.into_iter())
        .map(|t| Sst::new(recording(t), schema.clone(), config(n)).expect("valid table"))
        .collect();
    let mut smcs: Vec<Smc> = ssts.iter_mut().map(|s| Smc::new(fields, s)).collect();
    for s in &mut ssts {
        s.set(before, 1);
        s.set(after, 2);
        if user_list {
            s.set_row_push_last(&[after.range()]);
        }
    }
    smcs[0].send(&mut ssts[0], b"early").expect("room");
    smcs[0].flush(&mut ssts[0]).expect("pushed");
    sim.start_node(NodeId(2));
    ssts.push(Sst::new(recording(late), schema.clone(), config(n)).expect("valid table"));
    smcs.push(Smc::new(fields, &mut ssts[2]));
    if user_list {
        ssts[2].set_row_push_last(&[after.range()]);
    }
    let mut got = Vec::new();
    let end = sim.now() + Duration::from_millis(1);
    while sim.now() < end {
        for (i, (s, smc)) in ssts.iter_mut().zip(&mut smcs).enumerate() {
            s.poll_once().expect("no failure");
            smc.poll(s, |from, k, m| {
                if i == 2 {
                    got.push((from, k, m.to_vec()));
                }
            })
            .expect("no corrupt slot");
        }
        sim.advance(Duration::from_micros(5));
    }
    let sent = fields.sent().range();
    let to_late: Vec<(usize, usize)> = (writes.borrow().iter())
        .filter(|&&(peer, at, len)| peer == NodeId(2) && at + len <= row_len)
        .map(|&(_, at, len)| (at, len))
        .collect();
    let whole = to_late
        .iter()
        .position(|&(at, _)| at == 0)
        .expect("a row push");
    let mut listed = vec![(sent.offset, 8)];
    if user_list {
        listed.insert(0, (after.range().offset, 8));
    }
    let mut want = Vec::new();
    let mut at = 0;
    for &(start, len) in listed.iter().collect::<std::collections::BTreeSet<_>>() {
        if start > at {
            want.push((at, start - at));
        }
        at = start + len;
    }
    if row_len > at {
        want.push((at, row_len - at));
    }
    want.extend(listed);
    assert_eq!(
        to_late.get(whole..whole + want.len()),
        Some(&want[..]),
        "n0's pushes to n2: {to_late:?}"
    );
    assert_eq!(got, vec![(NodeId(0), 0, b"early".to_vec())]);
}
