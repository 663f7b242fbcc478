//! A real network partition of one member: five member processes (see `tests/mp/mod.rs`), each
//! in its own network namespace, joined by veth pairs to a bridge namespace. Once deliveries
//! flow, one member's link is taken down (`ip link set eth0 down`). The cut-off member must
//! stop as a minority and install nothing further; the four others must install view 1
//! without it after the same number of deliveries, keep delivering, and agree with each other
//! and with everything the cut-off member delivered. Nothing may hang: every member process
//! ends within a deadline.
//!
//! Needs root and iproute2 (`ip`); without them the test prints why and skips. It creates only
//! namespaces named `sqm<pid>-*`, interfaces inside them, and addresses in 10.79.0.0/24 inside
//! them; everything is deleted at the end.
#![allow(clippy::unwrap_used)]

mod mp;

use mp::{Failure, Settings, failure_run, netns_unavailable, topology};

/// Entry point of the member processes this binary spawns; does nothing when run by hand.
#[test]
#[ignore = "entry point of the member processes that the other tests spawn"]
fn member_child() {
    mp::child_main();
}

#[test]
fn a_member_cut_off_by_its_link_stops_as_a_minority_while_the_majority_continues() {
    const NAME: &str =
        "a_member_cut_off_by_its_link_stops_as_a_minority_while_the_majority_continues";
    if let Some(why) = netns_unavailable() {
        println!("SKIPPED {NAME}: {why}");
        return;
    }
    let (_guard, places) = match topology(5, "cut") {
        Ok(t) => t,
        // Root without CAP_SYS_ADMIN/CAP_NET_ADMIN (an unprivileged container) cannot do this.
        Err(e) => {
            println!("SKIPPED {NAME}: cannot create network namespaces: {e}");
            return;
        }
    };
    let victim = 2;
    let (reports, t) = failure_run(
        "member_child",
        &places,
        Settings::default(),
        Failure::Cut(victim, &places),
        400,
        400,
    );
    let cut = &reports[victim];
    println!(
        "link of member {victim} cut: first suspicion after {} us, view 1 everywhere {} us later; \
         the cut member delivered {} and stopped ({})",
        t.detect_us,
        t.protocol_us,
        cut.delivered.len(),
        cut.stop.as_ref().unwrap().1
    );
}
