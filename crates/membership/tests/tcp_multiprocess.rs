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

/// Rejoin under the same id across real processes: member 3 is SIGKILLed mid-stream, the rest
/// install view 1 without it, a fresh process starts under id 3 (a new TCP incarnation on a
/// new port, a fresh log, `Group::joining`), is readmitted once view 1 is installed, joins in
/// view 2 with the state, and from its state's position on delivers exactly what the others
/// deliver (positions, payloads, hash chain), its own new messages included.
#[test]
fn a_killed_member_restarts_under_its_id_rejoins_and_agrees_from_its_join_position() {
    use std::collections::BTreeSet;
    use std::time::Duration;
    let places = vec![Place::loopback(); 5];
    let victim = 3usize;
    let settings = Settings::default().relaxed();
    let mut c = mp::Cluster::start("member_child", &places, settings);
    c.warm_up(300);
    let survivors = c.kill_and_rejoin(victim);
    c.wait_for(
        "the restarted member's state, and deliveries in view 2 everywhere",
        Duration::from_secs(60),
        |r| {
            r[victim].transferred.is_some()
                && r.iter().all(|r| r.delivered_after(2) >= 200)
                && r[victim]
                    .delivered
                    .iter()
                    .any(|d| d.sender == victim as u32)
        },
    );
    let reports = c.finish();
    for (k, r) in reports.iter().enumerate() {
        assert!(r.odd.is_empty(), "member {k} reported {:?}", r.odd);
        assert!(r.stop.is_none(), "member {k} stopped: {:?}", r.stop);
        for (i, d) in r.delivered.iter().enumerate() {
            assert_eq!(
                d.position,
                r.first_position() + i as u64,
                "member {k}: gapless"
            );
            let p = mp::payload(d.sender, d.seq);
            assert_eq!(
                (d.len, d.digest),
                (p.len(), mp::digest(&p)),
                "member {k}: genuine"
            );
        }
    }
    for &k in &survivors {
        let ids: Vec<(u64, Vec<u32>)> = (reports[k].views.iter())
            .map(|v| (v.id, v.members.clone()))
            .collect();
        assert_eq!(
            ids,
            [(1, vec![0, 1, 2, 4]), (2, vec![0, 1, 2, 4, 3])],
            "survivor {k}'s views"
        );
    }
    for id in [1, 2] {
        let at: BTreeSet<u64> = survivors
            .iter()
            .map(|&k| reports[k].view(id).unwrap().before)
            .collect();
        assert_eq!(
            at.len(),
            1,
            "view {id} installed at different positions: {at:?}"
        );
    }
    // The restarted member: only view 2, the state at or after view 2's start, equal to the
    // others' chain there, then the same deliveries.
    let r = &reports[victim];
    assert_eq!(r.views.iter().map(|v| v.id).collect::<Vec<_>>(), [2]);
    let (pos, chain, _, _) = r.transferred.unwrap();
    let start2 = reports[0].view(2).unwrap().before;
    assert!(pos >= start2, "state at {pos}, view 2 starts at {start2}");
    let at = |k: usize, p: u64| {
        let o = &reports[k];
        o.delivered
            .get(usize::try_from(p - o.first_position()).ok()?)
            .copied()
    };
    assert_eq!(
        Some(chain),
        at(0, pos - 1).map(|d| d.chain),
        "transferred chain"
    );
    for &k in &survivors {
        let to = r.next_position().min(reports[k].next_position());
        for p in pos..to {
            assert_eq!(
                at(victim, p),
                at(k, p),
                "position {p}: restarted member vs {k}"
            );
        }
    }
    println!(
        "rejoin: view 2 with the restarted member {} us after it asked; state at position {pos}; \
         it then delivered {} messages, {} of them its own",
        r.view(2)
            .unwrap()
            .at
            .saturating_sub(r.join_requested.unwrap()),
        r.delivered.len(),
        r.delivered
            .iter()
            .filter(|d| d.sender == victim as u32)
            .count()
    );
}
