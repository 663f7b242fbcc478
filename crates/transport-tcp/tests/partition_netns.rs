//! A real network partition between real processes: three node processes, each in its own
//! network namespace, joined by veth pairs to a bridge in a fourth namespace. Taking one node's
//! veth down (`ip link set eth0 down`) must make both ends of each cut link report the other
//! failed within the configured heartbeat timeout, fail the ops in flight, and leave the link
//! between the other two nodes working. Nothing may hang.
//!
//! Needs root and iproute2 (`ip`); without them the test prints why and skips. It only creates
//! namespaces named `sqt<pid>-*`, interfaces inside them, and addresses in 10.77.0.0/24 inside
//! them; everything is deleted at the end.
mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::procs::{Place, ProcNode, spawn_cluster_at};
use squall_transport::{Event, FailureCause, NodeId, RegionId, RegionSpec, RemoteAddr, Transport};

const R: RegionId = RegionId(0);

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

/// The namespaces of one test run; deleted (with their interfaces) on drop.
struct Netns {
    names: Vec<String>,
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = ip(&["netns", "del", n]);
        }
    }
}

/// Builds the bridge namespace and `n` node namespaces; node k gets 10.77.0.(k+1) on `eth0`.
fn topology(n: usize) -> Result<(Netns, Vec<String>), String> {
    let tag = format!("sqt{}", std::process::id());
    let bridge = format!("{tag}-br");
    let mut ns = Netns { names: Vec::new() };
    ip(&["netns", "add", &bridge])?;
    ns.names.push(bridge.clone());
    ip(&["-n", &bridge, "link", "add", "br0", "type", "bridge"])?;
    ip(&["-n", &bridge, "link", "set", "br0", "up"])?;
    let mut nodes = Vec::new();
    for k in 0..n {
        let name = format!("{tag}-n{k}");
        ip(&["netns", "add", &name])?;
        ns.names.push(name.clone());
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
            &format!("10.77.0.{}/24", k + 1),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", &name, "link", "set", "eth0", "up"])?;
        ip(&["-n", &bridge, "link", "set", &port, "master", "br0"])?;
        ip(&["-n", &bridge, "link", "set", &port, "up"])?;
        nodes.push(name);
    }
    Ok((ns, nodes))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Polls `node` until `done` says so, or panics after `limit`; returns every event seen.
fn poll_until(
    node: &mut ProcNode,
    limit: Duration,
    what: &str,
    mut done: impl FnMut(&[Event]) -> bool,
) -> Vec<Event> {
    let start = Instant::now();
    let mut seen = Vec::new();
    let mut buf = [Event::PeerFailed {
        peer: NodeId(99),
        cause: FailureCause::Local,
    }; 64];
    loop {
        let n = node.poll(&mut buf);
        seen.extend_from_slice(&buf[..n]);
        if done(&seen) {
            return seen;
        }
        assert!(
            start.elapsed() < limit,
            "{what}: not done after {limit:?}; saw {seen:?}"
        );
        node.wait(Duration::from_millis(2));
    }
}

fn failed(seen: &[Event], peer: NodeId) -> usize {
    seen.iter()
        .filter(|e| matches!(e, Event::PeerFailed { peer: p, cause: FailureCause::TimedOut | FailureCause::ConnectionLost } if *p == peer))
        .count()
}

fn op_ok(nodes: &mut [ProcNode], from: usize, to: usize) {
    let op = nodes[from]
        .fetch_add(NodeId(to as u32), RemoteAddr::new(R, 8 * (1 + from)), 1)
        .expect("posted");
    poll_until(
        &mut nodes[from],
        Duration::from_secs(10),
        "fetch-add between connected nodes",
        |seen| {
            seen.iter()
                .any(|e| matches!(e, Event::Completion(c) if c.op == op && c.result.is_ok()))
        },
    );
}

#[test]
fn cutting_a_veth_fails_both_ends_within_the_timeout() {
    if !is_root() {
        println!(
            "SKIPPED cutting_a_veth_fails_both_ends_within_the_timeout: needs root to create network namespaces"
        );
        return;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        println!(
            "SKIPPED cutting_a_veth_fails_both_ends_within_the_timeout: needs iproute2 (`ip`); apt-get install -y iproute2"
        );
        return;
    }
    let (_guard, names) = match topology(3) {
        Ok(t) => t,
        Err(e) => {
            // Root without CAP_SYS_ADMIN/CAP_NET_ADMIN (an unprivileged container) cannot do this.
            println!(
                "SKIPPED cutting_a_veth_fails_both_ends_within_the_timeout: cannot create network namespaces: {e}"
            );
            return;
        }
    };
    let places: Vec<Place> = names
        .iter()
        .enumerate()
        .map(|(k, n)| Place {
            netns: Some(n.clone()),
            ip: std::net::IpAddr::from([10, 77, 0, (k + 1) as u8]),
        })
        .collect();
    let heartbeat_timeout = Duration::from_millis(500);
    let mut nodes = spawn_cluster_at(&places, &[RegionSpec::new(R, 4096)], |c| {
        c.heartbeat_period = Duration::from_millis(50);
        c.heartbeat_timeout = heartbeat_timeout;
        c.op_timeout = Duration::from_millis(800);
    });
    for (a, b) in [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)] {
        op_ok(&mut nodes, a, b);
    }

    // Cut node 1 off: its only link to the bridge goes down.
    ip(&["-n", &names[1], "link", "set", "eth0", "down"]).expect("link down");
    let cut = Instant::now();
    // Ops in flight across the cut must fail too.
    let op = nodes[0]
        .fetch_add(NodeId(1), RemoteAddr::new(R, 0), 1)
        .expect("posted");
    // Detection takes the heartbeat timeout plus a tick or two; allow scheduling slack.
    let limit = heartbeat_timeout + Duration::from_millis(700);
    let seen0 = poll_until(&mut nodes[0], limit, "node 0 detecting the cut", |s| {
        failed(s, NodeId(1)) > 0
            && s.iter()
                .any(|e| matches!(e, Event::Completion(c) if c.op == op))
    });
    let seen2 = poll_until(
        &mut nodes[2],
        limit.saturating_sub(cut.elapsed()) + Duration::from_millis(1),
        "node 2 detecting the cut",
        |s| failed(s, NodeId(1)) > 0,
    );
    let seen1 = poll_until(
        &mut nodes[1],
        limit.saturating_sub(cut.elapsed()) + Duration::from_millis(1),
        "node 1 detecting the cut",
        |s| failed(s, NodeId(0)) > 0 && failed(s, NodeId(2)) > 0,
    );
    let took = cut.elapsed();
    assert!(
        took >= heartbeat_timeout / 2,
        "failure reported after {took:?}, before any timeout could fire"
    );
    assert!(
        seen0
            .iter()
            .any(|e| matches!(e, Event::Completion(c) if c.op == op && c.result.is_err()))
    );
    // The link between nodes 0 and 2 still works, and nobody reported it failed.
    op_ok(&mut nodes, 0, 2);
    op_ok(&mut nodes, 2, 0);
    let mut rest0 = poll_until(&mut nodes[0], Duration::from_secs(1), "drain", |_| true);
    rest0.extend(seen0);
    let mut rest2 = poll_until(&mut nodes[2], Duration::from_secs(1), "drain", |_| true);
    rest2.extend(seen2);
    assert_eq!(
        failed(&rest0, NodeId(1)),
        1,
        "node 0 must report node 1 once: {rest0:?}"
    );
    assert_eq!(
        failed(&rest2, NodeId(1)),
        1,
        "node 2 must report node 1 once: {rest2:?}"
    );
    assert_eq!(
        failed(&rest0, NodeId(2)) + failed(&rest2, NodeId(0)),
        0,
        "the 0-2 link must survive"
    );
    assert_eq!(failed(&seen1, NodeId(0)), 1);
    assert_eq!(failed(&seen1, NodeId(2)), 1);
}

/// Entry point of the node processes this binary spawns; does nothing when run by hand.
#[test]
#[ignore = "entry point of the node processes that the other tests spawn"]
fn child_node_process() {
    if let Ok(addr) = std::env::var("SQUALL_TCP_CTRL") {
        common::procs::child_main(&addr);
    }
}
