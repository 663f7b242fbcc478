//! The checkers accept every valid history and catch every kind of corruption.
use proptest::prelude::*;
use squall_ordering::GroupId;
use squall_ordering::check::History;
use squall_transport::NodeId;

/// A valid single-group history: one global order, each process delivers a prefix of it.
fn valid(total: usize, prefixes: &[usize]) -> History<u32> {
    let mut h = History::new();
    for m in 0..total as u32 {
        h.submit(NodeId(m % 3), m, &[]);
    }
    for (p, &len) in prefixes.iter().enumerate() {
        for m in 0..len.min(total) as u32 {
            h.deliver(NodeId(p as u32), m, u64::from(m) * 10);
        }
    }
    h
}

proptest! {
    #[test]
    fn valid_histories_pass(total in 0usize..40, prefixes in proptest::collection::vec(0usize..40, 1..6)) {
        let h = valid(total, &prefixes);
        prop_assert!(h.check_total_order().is_ok());
        prop_assert!(h.check_acyclic_order().is_ok());
    }

    #[test]
    fn a_swap_is_caught(total in 3usize..40, at in 0usize..38) {
        let at = at % (total - 1);
        let mut h = History::new();
        for m in 0..total as u32 {
            h.submit(NodeId(0), m, &[]);
        }
        for p in 0..2u32 {
            for m in 0..total as u32 {
                let m = if p == 1 && m as usize == at { m + 1 } else if p == 1 && m as usize == at + 1 { m - 1 } else { m };
                h.deliver(NodeId(p), m, u64::from(m));
            }
        }
        prop_assert!(h.check_total_order().is_err());
    }
}

#[test]
fn gaps_duplicates_and_inventions_are_caught() {
    let mut gap = valid(5, &[5, 5]);
    gap.deliver(NodeId(2), 0, 0);
    gap.deliver(NodeId(2), 2, 20);
    assert_eq!(
        gap.check_total_order().expect_err("a violation").property,
        "total order"
    );

    let mut dup = valid(5, &[5]);
    dup.deliver(NodeId(0), 3, 99);
    assert_eq!(
        dup.check_integrity().expect_err("a violation").property,
        "integrity"
    );

    let mut invented = valid(5, &[5]);
    invented.deliver(NodeId(0), 77, 1000);
    assert_eq!(
        invented
            .check_integrity()
            .expect_err("a violation")
            .property,
        "integrity"
    );

    let mut moved = valid(5, &[5, 5]);
    moved.deliver(NodeId(2), 0, 1); // same message, another position
    assert_eq!(
        moved.check_positions().expect_err("a violation").property,
        "positions"
    );
}

#[test]
fn agreement_and_validity_need_every_correct_process() {
    let mut h = valid(4, &[4, 2]);
    h.crash(NodeId(0));
    // n0 delivered 2 and 3 before crashing; n1 (correct) never did: uniform agreement fails.
    assert_eq!(
        h.check_agreement(&[NodeId(1)])
            .expect_err("a violation")
            .property,
        "agreement"
    );
    // Message 3 was submitted by n0; with n0 correct, n1 must deliver it too.
    let both = valid(4, &[4, 2]);
    let err = both.check_validity(&[NodeId(0), NodeId(1)]);
    assert_eq!(err.expect_err("a violation").property, "validity");
    assert!(
        both.check_validity(&[NodeId(1)]).is_ok(),
        "n1 delivered all n1 submitted"
    );
    let done = valid(4, &[4, 4]);
    assert!(done.check_agreement(&[NodeId(0), NodeId(1)]).is_ok());
}

#[test]
fn multicast_prefix_and_cycles() {
    let (g, h) = (GroupId(0), GroupId(1));
    let (p, q) = (NodeId(0), NodeId(1));
    let build = |p_order: &[&'static str], q_order: &[&'static str]| {
        let mut hist = History::new();
        hist.member(p, g);
        hist.member(q, h);
        hist.submit(NodeId(9), "m", &[g, h]);
        hist.submit(NodeId(9), "m2", &[g, h]);
        for (i, m) in p_order.iter().enumerate() {
            hist.deliver(p, *m, i as u64 + 1);
        }
        for (i, m) in q_order.iter().enumerate() {
            hist.deliver(q, *m, i as u64 + 1);
        }
        hist
    };
    assert!(build(&["m", "m2"], &["m", "m2"]).check_multicast().is_ok());
    // Opposite orders: a cycle.
    let cyc = build(&["m", "m2"], &["m2", "m"]);
    assert!(cyc.check_acyclic_order().is_err());
    // p delivers only m, q delivers only m2: uniform prefix order broken.
    let split = build(&["m"], &["m2"]);
    assert_eq!(
        split
            .check_prefix_order()
            .expect_err("a violation")
            .property,
        "uniform prefix order"
    );
    assert!(
        split.check_acyclic_order().is_ok(),
        "no cycle, but prefix order still fails"
    );
    // Delivered outside its destination.
    let mut outside = build(&["m"], &["m"]);
    outside.submit(NodeId(9), "only-g", &[g]);
    outside.deliver(q, "only-g", 9);
    assert_eq!(
        outside.check_integrity().expect_err("a violation").property,
        "integrity"
    );
}
