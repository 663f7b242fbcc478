//! A real network partition of one replica: three `squall-kv serve` processes, each in its own
//! network namespace, joined by veth pairs to a bridge namespace where the test's clients run.
//! Mid-workload one replica's link is taken down (`ip link set eth0 down`): the CAS-Paxos
//! majority keeps serving, clients of the cut-off replica fail over, and the whole history is
//! checked linearizable.
//!
//! Needs root and iproute2 (`ip`); without them the test prints why and skips. It creates only
//! namespaces named `sqkv<pid>-*` and addresses in 10.78.0.0/24 inside them, and deletes them
//! at the end.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Procs, Recorder, client, wait_serving};
use squall_kv::{KvConfig, Ordering, ReplicaAddr};

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

struct Netns(Vec<String>);

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = ip(&["netns", "del", n]);
        }
    }
}

/// A bridge namespace (the clients' home, 10.78.0.100) and `n` replica namespaces
/// (10.78.0.k+1 on `eth0`).
fn topology(n: usize) -> Result<(Netns, String, Vec<String>), String> {
    let tag = format!("sqkv{}", std::process::id());
    let bridge = format!("{tag}-br");
    let mut ns = Netns(Vec::new());
    ip(&["netns", "add", &bridge])?;
    ns.0.push(bridge.clone());
    ip(&["-n", &bridge, "link", "add", "br0", "type", "bridge"])?;
    ip(&["-n", &bridge, "addr", "add", "10.78.0.100/24", "dev", "br0"])?;
    ip(&["-n", &bridge, "link", "set", "br0", "up"])?;
    ip(&["-n", &bridge, "link", "set", "lo", "up"])?;
    let mut nodes = Vec::new();
    for k in 0..n {
        let name = format!("{tag}-n{k}");
        ip(&["netns", "add", &name])?;
        ns.0.push(name.clone());
        let port = format!("p{k}");
        ip(&[
            "-n", &name, "link", "add", "eth0", "type", "veth", "peer", "name", &port, "netns",
            &bridge,
        ])?;
        ip(&["-n", &name, "link", "set", "lo", "up"])?;
        ip(&[
            "-n",
            &name,
            "addr",
            "add",
            &format!("10.78.0.{}/24", k + 1),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", &name, "link", "set", "eth0", "up"])?;
        ip(&["-n", &bridge, "link", "set", &port, "master", "br0"])?;
        ip(&["-n", &bridge, "link", "set", &port, "up"])?;
        nodes.push(name);
    }
    Ok((ns, bridge, nodes))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Moves the calling thread into network namespace `name`.
fn enter(name: &str) -> Result<(), String> {
    let f = std::fs::File::open(format!("/run/netns/{name}")).map_err(|e| e.to_string())?;
    // SAFETY: setns on a valid namespace fd affects only the calling thread.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(())
}

#[test]
fn cas_paxos_partition_one_replica() {
    if !is_root() || Command::new("ip").arg("-V").output().is_err() {
        eprintln!("skipped: needs root and iproute2 to create network namespaces");
        return;
    }
    let (_ns, bridge, nodes) = match topology(3) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("skipped: cannot build the namespaces ({e})");
            return;
        }
    };
    let replicas = (0..3u32)
        .map(|id| ReplicaAddr {
            id,
            transport: format!("10.78.0.{}:7000", id + 1).parse().unwrap(),
            client: format!("10.78.0.{}:7100", id + 1).parse().unwrap(),
        })
        .collect();
    let cfg = KvConfig {
        cluster_id: 9,
        ordering: Ordering::CasPaxos,
        heartbeat_period_ms: 50,
        heartbeat_timeout_ms: 600,
        replicas,
        data_dir: None,
        fsync: Default::default(),
        snapshot_every: KvConfig::DEFAULT_SNAPSHOT_EVERY,
        checkpoint_inline: false,
        checkpoint_encode_inline: false,
        install_decode_inline: false,
    };
    let prefix = nodes
        .iter()
        .map(|n| vec!["ip".to_string(), "netns".into(), "exec".into(), n.clone()])
        .collect();
    let procs = Procs::start(cfg, "netns", prefix);
    let victim = 2;
    let cut = nodes[victim].clone();
    let addrs = procs.cfg.client_addrs();
    // The clients live in the bridge namespace, on one thread with a current-thread runtime,
    // so every socket they open is there.
    let worker = std::thread::spawn(move || {
        enter(&bridge).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            wait_serving(&procs).await;
            let rec = Recorder::new();
            let until = Instant::now() + Duration::from_secs(5);
            let tasks: Vec<_> = (0..6)
                .map(|c| tokio::spawn(client(addrs.clone(), c, 4, until, rec.clone())))
                .collect();
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let before = rec.completed();
            ip(&["-n", &cut, "link", "set", "eth0", "down"]).unwrap();
            let cut_at = rec.start.elapsed();
            for t in tasks {
                t.await.unwrap();
            }
            let after = rec.completed_after(cut_at + Duration::from_millis(1500));
            eprintln!(
                "{} operations, {before} completed before the cut, {after} well after it",
                rec.ops.lock().unwrap().len()
            );
            if let Err(e) = rec.check() {
                for i in 0..3 {
                    eprintln!("--- replica {i}\n{}", procs.log(i));
                }
                panic!("not linearizable: {e}");
            }
            assert!(before > 50, "only {before} operations before the cut");
            assert!(
                after > 20,
                "the majority served only {after} operations after the cut"
            );
        });
    });
    worker.join().unwrap();
}
