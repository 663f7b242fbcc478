//! A deliberate settings change at a total restart, over real `squall-kv serve` processes
//! (docs/MEMBERSHIP.md, sixty-first part): a durable cluster written under `fsync = "never"` is
//! killed whole and its config changed to `fsync = "batch"`. A change of the replicas list
//! too is refused with no hint to accept it. A plain restart is refused at
//! every replica before it connects, naming the digest to accept; a restart with `--settings-from` that digest
//! keeps every acknowledged write and takes new ones; the restart after it needs no flag.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{Procs, wait_serving};
use squall_kv::{Fsync, KvClient, ReplicaAddr};
use squall_smr::ClientConfig;

fn client(addrs: Vec<SocketAddr>) -> KvClient {
    let mut cfg = ClientConfig::new(addrs.clone());
    cfg.timeout = Duration::from_millis(700);
    cfg.attempts = addrs.len() * 2;
    KvClient::new(cfg).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Waits (at most 30 s) for replica `id`'s process to exit; returns its exit code.
fn wait_exit(procs: &mut Procs, id: usize) -> Option<i32> {
    let start = Instant::now();
    let mut child = procs.children[id].take().unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("replica {id} did not exit; its log:\n{}", procs.log(id));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every key of `written` reads back with its value from every replica.
fn check_written(procs: &Procs, rt: &tokio::runtime::Runtime, written: &[(Vec<u8>, Vec<u8>)]) {
    for (i, addr) in procs.cfg.client_addrs().into_iter().enumerate() {
        let mut kv = client(vec![addr]);
        for (k, v) in written {
            let got = rt.block_on(kv.get(k)).unwrap();
            assert_eq!(
                got.as_deref(),
                Some(&v[..]),
                "replica {i}: key {}; its log:\n{}",
                String::from_utf8_lossy(k),
                procs.log(i)
            );
        }
    }
}

#[test]
fn an_fsync_change_at_a_total_restart_needs_settings_from_and_keeps_every_write() {
    let rt = runtime();
    let mut procs = Procs::loopback_durable(3, "settings-change", Fsync::Never);
    rt.block_on(wait_serving(&procs));
    let addrs = procs.cfg.client_addrs();
    let mut kv = client(addrs.clone());
    let mut written = Vec::new();
    for i in 0..40 {
        let (k, v) = (
            format!("k{i:03}").into_bytes(),
            format!("v{i}").into_bytes(),
        );
        rt.block_on(kv.put(&k, &v)).unwrap();
        written.push((k, v));
    }
    procs.kill_all();

    // The config changes while the cluster is down. First also its replicas list (a fourth
    // replica): refused before it connects, with no `--settings-from` hint (the membership
    // settings cannot change at a restart; s25).
    procs.cfg.fsync = Fsync::Batch;
    let mut wider = procs.cfg.clone();
    wider.replicas.push(ReplicaAddr {
        id: 3,
        transport: "127.0.0.1:9".parse().unwrap(),
        client: "127.0.0.1:10".parse().unwrap(),
    });
    std::fs::write(procs.dir.join("cluster.toml"), wider.to_toml()).unwrap();
    let before = procs.log(0).len();
    procs.spawn(0);
    let code = wait_exit(&mut procs, 0);
    let log = procs.log(0)[before..].to_string();
    assert_eq!(code, Some(1), "replica 0, a fourth replica listed: {log}");
    assert!(
        log.contains("differ from those the log was written under")
            && log.contains("the replicas list cannot change at a restart")
            && !log.contains("--settings-from"),
        "replica 0, a fourth replica listed: {log}"
    );
    std::fs::write(procs.dir.join("cluster.toml"), procs.cfg.to_toml()).unwrap();
    let logged_before: Vec<usize> = (0..3).map(|i| procs.log(i).len()).collect();

    // A plain restart is refused at every replica, naming the digest; before it connects:
    // each is started alone, with no peer up.
    let mut digest = None;
    for (i, &before) in logged_before.iter().enumerate() {
        procs.spawn(i);
        let code = wait_exit(&mut procs, i);
        let log = procs.log(i)[before..].to_string();
        assert_eq!(code, Some(1), "replica {i}: {log}");
        assert!(
            log.contains("differ from those the log was written under"),
            "replica {i}: {log}"
        );
        let at = log.find("serve --settings-from ").unwrap() + "serve --settings-from ".len();
        let d = log[at..at + 16].to_string();
        assert!(digest.as_ref().is_none_or(|x| *x == d), "{log}");
        digest = Some(d);
    }
    let digest = digest.unwrap();

    // With the log's digest named, the restart completes under the new settings.
    for id in 0..3 {
        procs.spawn_with(id, &["--settings-from", &digest]);
    }
    rt.block_on(wait_serving(&procs));
    for i in 0..3 {
        assert!(
            procs
                .log(i)
                .contains("restarting under changed driver (epoch) settings"),
            "replica {i}: {}",
            procs.log(i)
        );
    }
    check_written(&procs, &rt, &written);
    let mut kv = client(addrs);
    rt.block_on(kv.put(b"after", b"new")).unwrap();
    written.push((b"after".to_vec(), b"new".to_vec()));
    procs.kill_all();

    // The new digest was logged with the restart view: the next restart needs no flag.
    for id in 0..3 {
        procs.spawn(id);
    }
    rt.block_on(wait_serving(&procs));
    check_written(&procs, &rt, &written);
}
