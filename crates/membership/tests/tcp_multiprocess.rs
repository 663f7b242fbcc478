//! Membership across real processes over TCP loopback: five members, each its own OS process
//! (`Group` over `TcpNode`, a file GMS log, every member submitting a paced stream of small and
//! large messages). One is killed with SIGKILL once deliveries flow; the four survivors must
//! install view 1 without it after the same number of deliveries, keep delivering in it, and
//! agree: identical delivery sequences and positions up to the shortest, discarded messages
//! delivered nowhere, each sender's stream in order with no gaps. See `tests/mp/mod.rs` for the
//! node program and the checks. The join tests add a sixth process: linked from the start and
//! passive until told to join, or (`..._started_late_...`) a late TCP node whose process starts
//! its node and group only once the others stream, absent to them until then.
#![allow(clippy::unwrap_used)]

mod mp;

use mp::{Failure, Place, Settings, failure_run};

/// Entry point of the member processes this binary spawns; does nothing when run by hand.
#[test]
#[ignore = "entry point of the member processes that the other tests spawn"]
fn member_child() {
    mp::child_main();
}

fn kill_run(victim: usize) {
    let places = vec![Place::loopback(); 5];
    let (reports, t) = failure_run(
        "member_child",
        &places,
        Settings::default(),
        Failure::Kill(victim),
        400,
        400,
    );
    let r = &reports[(victim + 1) % 5];
    println!(
        "SIGKILL of member {victim}: first suspicion after {} us, view 1 everywhere {} us later; \
         view 1 after {} deliveries, {} delivered in it, {} discarded at member {}",
        t.detect_us,
        t.protocol_us,
        r.views[0].before,
        r.delivered_after(1),
        r.discarded.len(),
        (victim + 1) % 5,
    );
}

#[test]
fn sigkill_of_a_follower_mid_stream_the_rest_install_a_view_and_continue() {
    kill_run(3);
}

#[test]
fn sigkill_of_the_leader_mid_stream_the_rest_install_a_view_and_continue() {
    kill_run(0);
}

#[test]
fn a_sixth_process_joins_mid_stream_takes_the_state_and_agrees_at_every_position() {
    let settings = Settings {
        universe: 6,
        state_bytes: 64 << 10,
        ..Settings::default()
    };
    let (reports, t) = mp::join_run("member_child", settings, 400, 400);
    let j = &reports[5];
    println!(
        "join: view 1 with the state ({} bytes at position {}) {} us after asking; the joiner \
         then delivered {} messages, {} of them its own",
        t.state_len,
        j.first_position(),
        t.join_us,
        j.delivered.len(),
        j.delivered.iter().filter(|d| d.sender == 5).count()
    );
}

#[test]
fn a_sixth_process_started_late_joins_mid_stream_takes_the_state_and_agrees_at_every_position() {
    let settings = Settings {
        universe: 6,
        state_bytes: 64 << 10,
        ..Settings::default()
    };
    let (reports, t) = mp::late_join_run("member_child", settings, 400, 400);
    let j = &reports[5];
    println!(
        "late join: the sixth process started once the others streamed; view 1 with the state \
         ({} bytes at position {}) {} us after asking; the joiner then delivered {} messages, \
         {} of them its own",
        t.state_len,
        j.first_position(),
        t.join_us,
        j.delivered.len(),
        j.delivered.iter().filter(|d| d.sender == 5).count()
    );
}
