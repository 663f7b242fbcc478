//! Table basics on the threaded fabric, single-threaded: setup validation, typed field access,
//! push to all and to a subset, reducers and knowledge over suspected rows.

use squall_sst::{SchemaBuilder, SetupError, Sst, SstConfig, SstError};
use squall_transport::{NodeId, RegionId, RegionSpec};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric, ThreadedNode};

const R: RegionId = RegionId(0);

fn nodes(n: usize, len: usize) -> Vec<ThreadedNode> {
    ThreadedFabric::new(ThreadedConfig::default())
        .expect("valid")
        .cluster(n, &[RegionSpec::new(R, len)])
        .expect("valid")
}

fn members(n: u32) -> Vec<NodeId> {
    (0..n).map(NodeId).collect()
}

#[test]
fn setup_is_validated_with_clear_errors() {
    let schema = SchemaBuilder::new(3).build().expect("valid");
    let mut ns = nodes(3, schema.table_len());
    let short = SchemaBuilder::new(2).build().expect("valid");
    assert!(matches!(
        Sst::new(ns.remove(0), short, SstConfig::new(R, members(3))),
        Err(SetupError::MemberCount {
            schema: 2,
            members: 3
        })
    ));
    assert!(matches!(
        Sst::new(
            ns.remove(0),
            schema.clone(),
            SstConfig::new(R, vec![NodeId(0), NodeId(2), NodeId(0)])
        ),
        Err(SetupError::NotAMember(NodeId(1)))
    ));
    let mut tiny = nodes(3, 8);
    assert!(matches!(
        Sst::new(
            tiny.remove(0),
            schema.clone(),
            SstConfig::new(R, members(3))
        ),
        Err(SetupError::Region { have: 8, .. })
    ));
    let mut cfg = SstConfig::new(R, members(3));
    cfg.suspicion_timeout = cfg.heartbeat_interval;
    assert!(matches!(
        Sst::new(ns.remove(0), schema, cfg),
        Err(SetupError::Detector(_))
    ));
}

#[test]
fn fields_push_and_reducers() {
    let mut b = SchemaBuilder::new(3);
    let c = b.counter("c");
    let f = b.flag("f");
    let v = b.vector("v", 2);
    let s = b.bytes("s", 5);
    let schema = b.build().expect("valid");
    let mut t: Vec<Sst<ThreadedNode>> = nodes(3, schema.table_len())
        .into_iter()
        .map(|n| Sst::new(n, schema.clone(), SstConfig::new(R, members(3))).expect("valid"))
        .collect();
    t[0].set(c, 5);
    t[0].set_flag(f, true);
    t[0].set_at(v, 1, 9).expect("in range");
    t[0].write_bytes(s, b"hey").expect("fits");
    assert!(matches!(
        t[0].set_at(v, 2, 1),
        Err(SstError::VectorIndex {
            index: 2,
            len: 2,
            ..
        })
    ));
    assert!(matches!(
        t[0].write_bytes(s, b"toolong"),
        Err(SstError::SlotOverflow { len: 7, cap: 5, .. })
    ));
    // Push only the counter, and only to n1.
    t[0].push_to(c.range(), &[NodeId(1)]).expect("posted");
    assert_eq!(t[1].get(0, c), 5);
    assert_eq!(t[2].get(0, c), 0);
    assert!(!t[1].flag(0, f), "only the counter's range was pushed");
    // Push the whole row to everyone.
    let row = t[0].schema().row_range();
    t[0].push(row).expect("posted");
    assert!(t[2].flag(0, f));
    assert_eq!(t[2].get_at(0, v, 1).expect("in range"), 9);
    let mut out = [0u8; 3];
    t[2].read_bytes(0, s, &mut out).expect("fits");
    assert_eq!(&out, b"hey");
    // Reducers as n2 sees them: rows 0, 1, 2 hold 5, 0, 7.
    t[2].set(c, 7);
    assert_eq!((t[2].min(c), t[2].max(c), t[2].sum(c)), (0, 7, 12));
    assert_eq!(t[2].count_where(|r| t[2].get(r, c) > 0), 2);
    assert!(!t[2].all_reached(c, 1));
    // Once n2 suspects n1, n1's row no longer counts for knowledge.
    t[2].suspect(NodeId(1)).expect("1 of 3 is a minority");
    assert_eq!(t[2].min_unsuspected(c), 5);
    assert!(t[2].all_reached(c, 5));
    assert_eq!(t[2].min(c), 0, "plain min still reads the frozen row");
    // The suspicion travelled in n2's row to n0.
    let flags = t[0].schema().suspected();
    assert_eq!(t[0].get_at(2, flags, 1).expect("in range"), 1);
    t[0].poll_once().expect("adopts the suspicion");
    assert!(t[0].is_suspected(1));
    assert_eq!(t[0].suspicions()[0].1, squall_sst::Suspicion::Gossip);
}

#[test]
fn smc_refuses_oversized_messages_and_a_full_window_without_sending() {
    use squall_sst::{Smc, SmcConfig, SmcError};
    let mut b = SchemaBuilder::new(2);
    let fields = Smc::declare(
        &mut b,
        SmcConfig {
            window: 2,
            slot_size: 30,
        },
    )
    .expect("valid");
    let schema = b.build().expect("valid");
    let mut t: Vec<Sst<ThreadedNode>> = nodes(2, schema.table_len())
        .into_iter()
        .map(|n| Sst::new(n, schema.clone(), SstConfig::new(R, members(2))).expect("valid"))
        .collect();
    let mut a = Smc::new(fields, &mut t[0]);
    let mut rx = Smc::new(fields, &mut t[1]);
    assert_eq!(
        a.send(&mut t[0], &[0; 31]),
        Err(SmcError::TooLarge { len: 31, max: 30 })
    );
    assert_eq!(a.send(&mut t[0], &[1; 30]), Ok(0));
    assert_eq!(a.send(&mut t[0], &[2; 5]), Ok(1));
    assert_eq!(
        a.send(&mut t[0], &[3; 5]),
        Err(SmcError::WindowFull {
            in_flight: 2,
            window: 2
        })
    );
    assert_eq!(a.sent(), 2, "refused sends staged nothing");
    // Nothing is visible to the receiver before the flush publishes the guard.
    assert_eq!(rx.receive(&mut t[1], |_, _, _| {}).expect("ok"), 0);
    a.flush(&mut t[0]).expect("posted");
    let mut got = Vec::new();
    rx.receive(&mut t[1], |from, i, m| got.push((from, i, m.to_vec())))
        .expect("ok");
    assert_eq!(
        got,
        vec![(NodeId(0), 0, vec![1; 30]), (NodeId(0), 1, vec![2; 5])]
    );
    // The sender's own delivery acknowledges its row; then the window opens.
    t[0].poll_once().expect("runs");
    a.receive(&mut t[0], |_, _, _| {}).expect("ok");
    assert_eq!(a.in_flight(&t[0]), 0);
    assert_eq!(a.send(&mut t[0], &[3; 5]), Ok(2));
}

/// A member that learns it is suspected (a peer cut the link to it) neither retaliates nor
/// accuses anyone else: a third member that reads its row before the original suspicion (rows
/// are read in order, and the accused n0's row comes first) adopts nothing from it.
#[test]
fn an_accused_member_accuses_nobody() {
    let schema = SchemaBuilder::new(5).build().expect("valid");
    let mut t: Vec<Sst<ThreadedNode>> = nodes(5, schema.table_len())
        .into_iter()
        .map(|n| Sst::new(n, schema.clone(), SstConfig::new(R, members(5))).expect("valid"))
        .collect();
    t[4].suspect(NodeId(0)).expect("1 of 5 is a minority");
    t[0].poll_once().expect("2 of 5 is a minority");
    // n0 learned that n4 cut it: it freezes n4's row, and is accused.
    assert!(t[0].is_accused() && t[0].is_suspected(4));
    assert_eq!(t[0].suspicions()[0].1, squall_sst::Suspicion::Remote);
    // Its own suspicions from now on stay local, whatever their cause.
    t[0].suspect(NodeId(2)).expect("2 of 5 is a minority");
    assert!(t[0].is_suspected(2));
    let flags = t[0].schema().suspected();
    for peer in [1, 3] {
        assert_eq!(t[peer].get_at(0, flags, 2).expect("in range"), 0, "n{peer}");
        assert_eq!(t[peer].get_at(0, flags, 4).expect("in range"), 0, "n{peer}");
    }
    t[1].poll_once().expect("1 of 5 is a minority");
    assert_eq!(
        t[1].suspects(),
        vec![NodeId(0)],
        "only n4's suspicion spreads"
    );
    assert!(!t[1].is_accused() && !t[4].is_accused());
}
