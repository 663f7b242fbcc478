//! s27 (docs/MEMBERSHIP.md, seventy-seventh part): an operator's graceful leave and status
//! query, across real `squall-kv serve` processes on loopback. `squall-kv client … leave`
//! makes a replica leave; it exits 0, the others install a view without it and keep serving
//! writes; a leave the group holds back is reported to the asker (exit 4), not waited on.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use common::{BIN, Procs, wait_serving};
use squall_kv::{KvClient, Ordering};
use squall_smr::ClientConfig;

/// Runs `squall-kv client --config <cluster> --id <id> <args>`.
fn admin(procs: &Procs, id: usize, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["client", "--config"])
        .arg(procs.dir.join("cluster.toml"))
        .args(["--id", &id.to_string()])
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `status --json` of replica `id`.
fn status_json(procs: &Procs, id: usize) -> String {
    let o = admin(procs, id, &["status", "--json"]);
    assert_eq!(o.status.code(), Some(0), "status of {id}: {}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

fn logs(procs: &Procs) -> String {
    (0..procs.cfg.replicas.len())
        .map(|k| format!("--- replica {k}\n{}", procs.log(k)))
        .collect()
}

/// Waits up to 10 s until replica `id`'s status names `members` as its view's.
fn wait_view(procs: &Procs, id: usize, members: &str) -> String {
    let want = format!(r#""members":[{members}]"#);
    let start = std::time::Instant::now();
    loop {
        let s = status_json(procs, id);
        if s.contains(&want) {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "replica {id} never reported a view of [{members}]: {s}\n{}",
            logs(procs)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn membership_a_replica_leaves_by_the_command_exits_0_and_the_others_serve_on_without_it() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut procs = Procs::loopback(Ordering::Membership, 3, "leave-cmd");
    rt.block_on(wait_serving(&procs));

    // Before: every replica serves in view [0, 1, 2], its leave not asked.
    let before = wait_view(&procs, 2, "0,1,2");
    assert!(
        before.starts_with(r#"{"id":2,"view":{"id":"#)
            && before.contains(r#""serving":true"#)
            && before.contains(r#""leave":{"state":"not asked","status":null,"held":false}"#)
            && before.contains(r#""left":null,"stopped":null}"#),
        "{before}"
    );
    assert!(
        before.contains(r#""role":"subgroup 0 shard 0 of view "#),
        "{before}"
    );
    let human = admin(&procs, 0, &["status"]);
    let h = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.status.success()
            && h.starts_with("replica 0: serving\nview ")
            && h.contains("members [0, 1, 2]")
            && h.contains("leave: not asked"),
        "{}",
        text(&human)
    );

    // Replica 2 leaves by the command: the asker hears it left, and its process exits 0.
    let left = admin(&procs, 2, &["leave", "--wait", "20"]);
    assert_eq!(
        left.status.code(),
        Some(0),
        "{}\n{}",
        text(&left),
        logs(&procs)
    );
    assert!(
        String::from_utf8_lossy(&left.stdout).starts_with("left: "),
        "{}",
        text(&left)
    );
    let exit = procs.wait_exit(2, Duration::from_secs(10));
    assert_eq!(
        exit.and_then(|s| s.code()),
        Some(0),
        "the leaver's serve: {exit:?}\n{}",
        logs(&procs)
    );
    assert!(
        procs.log(2).contains("left the group; exiting"),
        "{}",
        procs.log(2)
    );

    // The others report a view without it, serve, and did not count it as a failure.
    for id in [0, 1] {
        let after = wait_view(&procs, id, "0,1");
        assert!(
            after.contains(r#""serving":true"#) && after.contains(r#""state":"not asked""#),
            "{after}"
        );
        // That view is the one the leave decided: the leaver stopped as "left: view V ...,
        // as it asked", and this replica installed view V with the same members (one decision
        // per view number). Its transport then reports the leaver's closed connection as a
        // lost peer (sometimes a few µs before it installs V), which changes no view.
        let left_in = procs
            .log(2)
            .split("left: view ")
            .nth(1)
            .filter(|rest| rest.contains("was installed without this member, as it asked"))
            .and_then(|rest| rest.split(' ').next().map(str::to_owned))
            .unwrap_or_else(|| panic!("the leaver's log names no leave:\n{}", procs.log(2)));
        let installed =
            format!("view installed me=n{id} view={left_in} members=[NodeId(0), NodeId(1)]");
        assert!(
            procs.log(id).contains(&installed),
            "replica {id} did not install the leave's view {left_in}:\n{}",
            procs.log(id)
        );
    }
    let addrs = vec![procs.cfg.replicas[0].client, procs.cfg.replicas[1].client];
    rt.block_on(async {
        let mut cfg = ClientConfig::new(addrs);
        cfg.timeout = Duration::from_secs(2);
        let mut kv = KvClient::new(cfg).unwrap();
        for i in 0..20u32 {
            kv.put(format!("k{i}").as_bytes(), b"v").await.unwrap();
        }
        assert_eq!(kv.get(b"k19").await.unwrap(), Some(b"v".to_vec()));
    });

    // Replica 1 asks too: [0] alone would be no majority of [0, 1], so the group holds the
    // leave back. The asker is told so at once (exit 4), and replica 1 serves on, its
    // status saying the leave is held.
    let asked = std::time::Instant::now();
    let held = admin(&procs, 1, &["leave", "--wait", "20"]);
    let took = asked.elapsed();
    assert_eq!(
        held.status.code(),
        Some(4),
        "{}\n{}",
        text(&held),
        logs(&procs)
    );
    assert!(
        took < Duration::from_secs(5),
        "the held leave was answered only after {took:?} (its wait was 20 s)"
    );
    assert!(
        String::from_utf8_lossy(&held.stderr).contains("held back"),
        "{}",
        text(&held)
    );
    let s = status_json(&procs, 1);
    assert!(
        s.contains(r#""leave":{"state":"held","#)
            && s.contains(r#""held":true"#)
            && s.contains(r#""serving":true"#),
        "{s}"
    );
    assert!(
        procs.wait_exit(1, Duration::from_millis(300)).is_none(),
        "replica 1 exited while its leave is held"
    );
}

#[test]
fn a_fixed_group_refuses_a_leave_and_reports_no_role() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut procs = Procs::loopback(Ordering::RoundRobin, 3, "leave-fixed");
    rt.block_on(wait_serving(&procs));
    let refused = admin(&procs, 1, &["leave", "--wait", "5"]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("refused to leave"),
        "{}",
        text(&refused)
    );
    let s = status_json(&procs, 1);
    assert!(
        s.contains(r#""role":null"#) && s.contains(r#""state":"not asked""#),
        "{s}"
    );
    assert!(procs.wait_exit(1, Duration::from_millis(200)).is_none());
}
