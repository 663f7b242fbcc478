//! `squall-kv serve --announce`: each replica process binds its own ports and announces them
//! (`squall_kv::announce`), so a local cluster never hands a child a port it released.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_squall-kv");

/// Kills the children on drop (a failed assertion included).
struct Kill(Vec<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn n_children_announce_distinct_ports_they_hold() {
    let n = 4;
    let dir = std::env::temp_dir().join(format!("squall-kv-announce-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The cluster file is never written: the children announce, then wait for it.
    let config = dir.join("cluster.toml");
    let files: Vec<PathBuf> = (0..n)
        .map(|k| dir.join(format!("replica-{k}.addr")))
        .collect();
    let mut children = Kill(Vec::new());
    for (k, file) in files.iter().enumerate() {
        let child = Command::new(BIN)
            .args(["serve", "--config"])
            .arg(&config)
            .args(["--id", &k.to_string(), "--announce"])
            .arg(file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        children.0.push(child);
    }
    let procs = &mut children.0;
    let addrs = squall_kv::announce::collect(&files, Duration::from_secs(60), || {
        match procs.iter_mut().find_map(|c| c.try_wait().ok().flatten()) {
            Some(status) => Err(format!("a child exited ({status})")),
            None => Ok(()),
        }
    })
    .unwrap();
    let all: Vec<_> = addrs.iter().flat_map(|&(t, c)| [t, c]).collect();
    assert_eq!(all.len(), 2 * n);
    let distinct: BTreeSet<_> = all.iter().collect();
    assert_eq!(distinct.len(), 2 * n, "ports announced twice: {all:?}");
    for a in &all {
        assert_ne!(a.port(), 0, "{a}");
        // Held by its child while it waits for the cluster file: nobody else can bind it.
        let e = TcpListener::bind(a).expect_err("an announced port is held by its child");
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{a}: {e}");
    }
    drop(children);
    let _ = std::fs::remove_dir_all(&dir);
}
