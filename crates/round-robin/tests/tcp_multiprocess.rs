//! Three members in three OS processes over the TCP transport, every member a sender, mixed
//! small (inline SMC) and large (chunked one-sided writes) messages: every process delivers the
//! identical sequence of all messages.
//!
//! The test binary re-executes itself as each node (the ignored test `rr_child_node` is the
//! entry point), like the TCP crate's multi-process tests.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use squall_ordering::{SubmitError, TotalOrder, Upcall};
use squall_round_robin::{Config, RoundRobin};
use squall_transport::{NodeId, Region};
use squall_transport_tcp::{ClusterConfig, TcpNode};

const MEMBERS: usize = 3;
const PER_SENDER: u64 = 60;

fn config() -> Config {
    Config {
        window: 8,
        slot_size: 1024,
        max_payload: 32 << 10,
        chunk_size: 16 << 10,
        heartbeat_interval: Duration::from_millis(20),
        suspicion_timeout: Duration::from_secs(2),
        ..Config::new((0..MEMBERS as u32).map(NodeId).collect())
    }
}

/// Message `i` of a sender: every third one large.
fn length(i: u64) -> usize {
    if i % 3 == 2 {
        2000 + (i as usize * 397) % 30000
    } else {
        20 + (i as usize * 13) % 1000
    }
}

#[test]
#[ignore = "entry point of the node processes that rr_three_processes_all_senders spawns"]
fn rr_child_node() {
    let (Ok(me), Ok(cluster)) = (std::env::var("RR_NODE"), std::env::var("RR_CLUSTER")) else {
        return;
    };
    let me: u32 = me.parse().expect("node id");
    // Bind port 0 and keep the listener; report the port, then learn every member's address.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    println!("RR-PORT {port}");
    std::io::stdout().flush().expect("flush");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).expect("addresses");
    let addrs: Vec<SocketAddr> = (line
        .trim()
        .strip_prefix("RR-ADDRS ")
        .expect("RR-ADDRS a,b,…"))
    .split(',')
    .map(|a| a.parse().expect("addr"))
    .collect();
    let mut tcp = ClusterConfig::new(
        cluster.parse().expect("cluster id"),
        addrs
            .iter()
            .enumerate()
            .map(|(i, a)| (NodeId(i as u32), *a)),
    );
    tcp.op_timeout = Duration::from_secs(2);
    tcp.heartbeat_timeout = Duration::from_secs(2);
    tcp.connect_timeout = Duration::from_secs(20);
    let cfg = config();
    let regions = RoundRobin::<TcpNode>::layout(&cfg)
        .expect("layout")
        .into_iter()
        .map(|s| Region::new(s).expect("region"))
        .collect();
    let node = TcpNode::start_on(listener, tcp, NodeId(me), regions).expect("tcp node starts");
    let mut rr = RoundRobin::new(node, cfg).expect("group");
    let total = PER_SENDER * MEMBERS as u64;
    let mut sent = 0;
    let mut seq = Vec::new();
    let mut upcalls = Vec::new();
    let start = Instant::now();
    let mut finished: Option<Instant> = None;
    loop {
        if sent < PER_SENDER {
            match rr.submit(&common::encode(me, sent, length(sent))) {
                Ok(()) => sent += 1,
                Err(SubmitError::WindowFull) => {}
                Err(e) => panic!("n{me} submit: {e}"),
            }
        }
        let busy = rr.poll(&mut upcalls);
        for u in upcalls.drain(..) {
            match u {
                Upcall::Deliver(d) => {
                    let (s, i) = common::check(&d.payload).expect("genuine message");
                    assert_eq!(NodeId(s), d.sender);
                    assert_eq!(d.payload.len(), length(i));
                    assert_eq!(d.position, seq.len() as u64);
                    seq.push(format!("{s}:{i}"));
                }
                Upcall::Wedged if finished.is_some() => {}
                other => panic!("n{me}: unexpected {other:?} after {} deliveries", seq.len()),
            }
        }
        if seq.len() as u64 == total && finished.is_none() {
            finished = Some(Instant::now());
            println!("RR-SEQ {me} {}", seq.join(","));
            println!("RR-STATS {me} {:?}", rr.stats());
        }
        // Keep serving the others for a while before exiting.
        if finished.is_some_and(|t| t.elapsed() > Duration::from_millis(1500)) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "n{me} hung after {} deliveries",
            seq.len()
        );
        if !busy {
            rr.wait(Duration::from_millis(1));
        }
    }
}

#[test]
fn rr_three_processes_all_senders_mixed_sizes() {
    let exe = std::env::current_exe().expect("test binary");
    let mut children: Vec<_> = (0..MEMBERS)
        .map(|k| {
            Command::new(&exe)
                .args([
                    "rr_child_node",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("RR_NODE", k.to_string())
                .env("RR_CLUSTER", u64::from(std::process::id()).to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn node process")
        })
        .collect();
    // Every member binds its own port and reports it (no port is released between its choice
    // and its use); then each learns every member's address.
    let mut stdouts: Vec<BufReader<ChildStdout>> = (children.iter_mut())
        .map(|c| BufReader::new(c.stdout.take().expect("stdout")))
        .collect();
    let addrs: Vec<String> = (stdouts.iter_mut().enumerate())
        .map(|(k, out)| {
            loop {
                let mut l = String::new();
                assert_ne!(
                    out.read_line(&mut l).expect("read"),
                    0,
                    "node {k} reported no port"
                );
                // The line may follow the harness's "test rr_child_node ... " on the same line.
                if let Some((_, p)) = l.trim().split_once("RR-PORT ") {
                    break format!("127.0.0.1:{p}");
                }
            }
        })
        .collect();
    for c in &mut children {
        let stdin = c.stdin.as_mut().expect("stdin");
        writeln!(stdin, "RR-ADDRS {}", addrs.join(",")).expect("addresses to a node");
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut outputs = Vec::new();
    for (k, (c, stdout)) in children.iter_mut().zip(&mut stdouts).enumerate() {
        loop {
            match c.try_wait().expect("wait") {
                Some(status) => {
                    let mut out = String::new();
                    let mut err = String::new();
                    stdout.read_to_string(&mut out).ok();
                    c.stderr
                        .take()
                        .expect("stderr")
                        .read_to_string(&mut err)
                        .ok();
                    assert!(status.success(), "node {k} failed: {status}\n{out}\n{err}");
                    outputs.push(out);
                    break;
                }
                None if Instant::now() > deadline => {
                    for c in children.iter_mut() {
                        c.kill().ok();
                    }
                    panic!("node {k} hung");
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
    let seqs: Vec<&str> = outputs
        .iter()
        .enumerate()
        .map(|(k, o)| {
            o.lines()
                .find_map(|l| l.split_once(&format!("RR-SEQ {k} ")).map(|(_, s)| s))
                .unwrap_or_else(|| panic!("node {k} printed no sequence:\n{o}"))
        })
        .collect();
    assert_eq!(
        seqs[0].split(',').count() as u64,
        PER_SENDER * MEMBERS as u64
    );
    for k in 1..MEMBERS {
        assert_eq!(
            seqs[k], seqs[0],
            "node {k}'s sequence differs from node 0's"
        );
    }
    for o in &outputs {
        if let Some(l) = o.lines().find(|l| l.contains("RR-STATS")) {
            eprintln!("{l}");
        }
    }
}
