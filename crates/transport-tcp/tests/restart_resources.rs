//! Issue 6/3: a peer's restarts do not pile up resources at the node that stays up. Each
//! restart fails the peer's old link; once its reader thread is done the link closes its
//! socket and its reader's epoll instance and frees its send and receive buffers, so the
//! node's open descriptors and buffer bytes stay flat however often the peer restarts. (One
//! test in its own binary: it counts the process's descriptors.)
mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use squall_transport::{
    Event, FailureCause, NodeId, Region, RegionId, RegionSpec, RemoteAddr, Transport,
};
use squall_transport_tcp::TcpNode;

/// The process's open file descriptors.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// Polls `a` (and drains `b`) until `done` holds for an event of `a`'s; panics after 10 s.
fn until(a: &mut TcpNode, b: &mut TcpNode, mut done: impl FnMut(&Event) -> bool) {
    let mut events = [Event::PeerFailed {
        peer: NodeId(0),
        cause: FailureCause::Local,
    }; 16];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "timed out");
        let n = a.poll(&mut events);
        if events[..n].iter().any(&mut done) {
            return;
        }
        while b.poll(&mut events) > 0 {}
        a.wait(Duration::from_millis(5));
    }
}

/// Kills node 1 (its process gone: the node shut down) and starts a new process under its id
/// on a fresh port; waits until node 0 linked the new incarnation and a fetch-add crossed it.
/// Node 0's driver is parked in `wait` when node 1 dies (most likely: it parks for 200 ms and
/// the kill comes 50 ms after it started), so the wake-up of the dead socket goes to the driver
/// and not to the link's reader thread, which the failure must wake by itself.
fn restart(nodes: &mut [TcpNode], config: &squall_transport_tcp::ClusterConfig) {
    let (a, b) = nodes.split_at_mut(1);
    std::thread::scope(|s| {
        s.spawn(|| a[0].wait(Duration::from_millis(200)));
        std::thread::sleep(Duration::from_millis(50));
        b[0].shutdown();
    });
    let region = Region::new(RegionSpec::new(RegionId(0), 4096)).expect("region");
    let fresh = TcpListener::bind("127.0.0.1:0").expect("bind");
    nodes[1] = TcpNode::rejoin_on(fresh, config.clone(), NodeId(1), vec![region]).expect("rejoins");
    let incarnation = nodes[1].incarnation();
    let (a, b) = nodes.split_at_mut(1);
    until(
        &mut a[0],
        &mut b[0],
        |e| matches!(e, Event::PeerConnected { peer: NodeId(1), incarnation: i } if *i == incarnation),
    );
    let op = a[0]
        .fetch_add(NodeId(1), RemoteAddr::new(RegionId(0), 0), 1)
        .expect("posted on the new link");
    until(
        &mut a[0],
        &mut b[0],
        |e| matches!(e, Event::Completion(c) if c.op == op && c.result == Ok(0)),
    );
}

/// What node 0 holds, once its failed links had time to be released: (descriptors of the
/// process, node 0's buffer bytes). Waits (up to 10 s) until both are at most `bound`, the
/// level after the first restart; returns what it saw last either way.
fn settled(node: &TcpNode, bound: Option<(usize, usize)>) -> (usize, usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = (open_fds(), node.buffer_bytes());
        match bound {
            Some((fds, bytes)) if (now.0 > fds || now.1 > bytes) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => return now,
        }
    }
}

#[test]
fn a_peer_restarted_many_times_leaves_no_descriptors_or_buffers_behind() {
    let (ls, addrs) = common::listeners(2);
    let config = common::test_config(&addrs);
    let mut nodes = common::start_cluster(&config, ls, &[RegionSpec::new(RegionId(0), 4096)]);
    // The first restart sets the level: one failed link behind, one live.
    restart(&mut nodes, &config);
    let base = settled(&nodes[0], Some((usize::MAX, usize::MAX)));
    const RESTARTS: usize = 6;
    for _ in 0..RESTARTS {
        restart(&mut nodes, &config);
    }
    let after = settled(&nodes[0], Some(base));
    // Before the release, each restart kept a socket and an epoll instance (2 descriptors) and
    // a 64 KiB receive buffer plus the send buffer: 12 descriptors and > 384 KiB more here.
    assert!(
        after.0 <= base.0,
        "{RESTARTS} restarts left {} more descriptors open",
        after.0 - base.0
    );
    assert!(
        after.1 <= base.1,
        "{RESTARTS} restarts left {} more buffer bytes",
        after.1 - base.1
    );
    assert!(base.1 > 0, "the live link's buffers are counted");
}
