//! Three CAS-Paxos nodes in three OS processes over the TCP transport. Every node submits a
//! paced stream of commands; when the leader (node 0) has delivered a good part of it, the test
//! kills it with SIGKILL. The survivors must notice (heartbeats in acceptor memory stop moving),
//! elect node 1, let it take over the slots with one prepare round, and keep deciding: every
//! command a survivor submits after it trusts the new leader is delivered by both survivors, and
//! the histories of all three processes (the dead leader's prefix included) pass the ordering
//! checkers.
//!
//! The test binary re-executes itself as each node (the ignored test `paxos_child_node` is the
//! entry point), like the round-robin and TCP crates' multi-process tests.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use squall_cas_paxos::layout::Layout;
use squall_cas_paxos::log::{CasPaxos, LogConfig, default_rpc_threshold};
use squall_ordering::check::History;
use squall_ordering::{SubmitError, TotalOrder, Upcall};
use squall_transport::{NodeId, Region};
use squall_transport_tcp::{ClusterConfig, TcpNode};

const NODES: usize = 3;
const PER_NODE: u64 = 300;
/// One command per node every this often (the stream must outlast the failover).
const PACE: Duration = Duration::from_millis(2);
/// The leader is killed once it has delivered this many commands.
const KILL_AFTER: usize = 120;

fn config() -> LogConfig {
    LogConfig {
        layout: Layout {
            proposers: NODES,
            slots: 128,
            max_value_len: 64,
        },
        window: 16,
        max_pending: 64,
        backoff: (Duration::from_micros(50), Duration::from_micros(500)),
        heartbeat_period: Duration::from_millis(10),
        leader_timeout: Duration::from_millis(150),
        recycle_timeout: Duration::from_secs(1),
        seed: 7,
        rpc_threshold: default_rpc_threshold(NODES),
    }
}

#[test]
#[ignore = "entry point of the node processes that kill_the_leader_mid_stream spawns"]
fn paxos_child_node() {
    let (Ok(me), Ok(cluster)) = (std::env::var("PAXOS_NODE"), std::env::var("PAXOS_CLUSTER"))
    else {
        return;
    };
    let me: u32 = me.parse().expect("node id");
    // libtest printed "test paxos_child_node ... " without a newline: end that line first.
    println!();
    // Bind port 0 and keep the listener; report the port, then learn every node's address.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    println!("PORT {}", listener.local_addr().expect("addr").port());
    std::io::stdout().flush().expect("flush");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).expect("addresses");
    let addrs: Vec<SocketAddr> = (line.trim().strip_prefix("ADDRS ").expect("ADDRS a,b,…"))
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
    let regions = cfg
        .regions()
        .into_iter()
        .map(|s| Region::new(s).expect("region"))
        .collect();
    let node = TcpNode::start_on(listener, tcp, NodeId(me), regions).expect("tcp node starts");
    let mut log = CasPaxos::new(node, cfg).expect("log");
    let mut sent = 0u64;
    let mut next_submit = Instant::now();
    let mut upcalls = Vec::new();
    let mut delivered = std::collections::BTreeSet::new();
    let mut late = Vec::new();
    let mut new_leader = false;
    let mut last_delivery = Instant::now();
    let start = Instant::now();
    loop {
        if sent < PER_NODE && Instant::now() >= next_submit {
            let cmd = format!("n{me}#{sent}");
            match log.submit(cmd.as_bytes()) {
                Ok(()) => {
                    println!("S {cmd}");
                    if new_leader {
                        println!("L {cmd}");
                        late.push(cmd);
                    }
                    sent += 1;
                    next_submit += PACE;
                }
                Err(SubmitError::WindowFull) => {}
                Err(e) => panic!("n{me} submit: {e}"),
            }
        }
        let busy = log.poll(&mut upcalls);
        for u in upcalls.drain(..) {
            match u {
                Upcall::Deliver(d) => {
                    let cmd = String::from_utf8(d.payload).expect("utf-8 command");
                    println!("D {} {cmd}", d.position);
                    delivered.insert(cmd);
                    last_delivery = Instant::now();
                }
                Upcall::View(v) => {
                    let leader = v.leader.expect("a leader").0;
                    println!("V {leader}");
                    new_leader |= leader != 0;
                }
                Upcall::Durable(_) => {}
                other => panic!("n{me}: unexpected {other:?}"),
            }
        }
        let all_late_in = late.iter().all(|c| delivered.contains(c));
        if sent == PER_NODE
            && !late.is_empty()
            && all_late_in
            && last_delivery.elapsed() > Duration::from_secs(1)
        {
            println!("DONE {:?}", log.stats());
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "n{me} hung: {} delivered, {} of {} late commands in",
            delivered.len(),
            late.iter().filter(|c| delivered.contains(*c)).count(),
            late.len()
        );
        if !busy {
            let until = next_submit.saturating_duration_since(Instant::now());
            log.wait(until.clamp(Duration::from_micros(100), Duration::from_millis(1)));
        }
    }
}

/// A child process with a thread collecting its stdout lines.
struct Node {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

fn spawn(k: usize) -> Node {
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "paxos_child_node",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PAXOS_NODE", k.to_string())
        .env("PAXOS_CLUSTER", u64::from(std::process::id()).to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn node process");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let out = child.stdout.take().expect("stdout");
    let sink = lines.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            sink.lock().expect("lines").push(line);
        }
    });
    Node {
        child,
        lines,
        reader: Some(reader),
    }
}

impl Node {
    /// The address the node bound and reported (`PORT <port>`); panics after `deadline`.
    fn addr(&mut self, deadline: Instant) -> String {
        loop {
            let port = (self.lines.lock().expect("lines").iter())
                .find_map(|l| l.strip_prefix("PORT ").map(str::to_string));
            if let Some(p) = port {
                return format!("127.0.0.1:{p}");
            }
            if Instant::now() > deadline || self.child.try_wait().ok().flatten().is_some() {
                panic!("a node reported no port");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    fn count(&self, prefix: &str) -> usize {
        let lines = self.lines.lock().expect("lines");
        lines.iter().filter(|l| l.starts_with(prefix)).count()
    }
    fn finish(&mut self) -> Vec<String> {
        if let Some(r) = self.reader.take() {
            r.join().expect("reader");
        }
        std::mem::take(&mut *self.lines.lock().expect("lines"))
    }
}

#[test]
fn kill_the_leader_mid_stream() {
    let mut nodes: Vec<Node> = (0..NODES).map(spawn).collect();
    let deadline = Instant::now() + Duration::from_secs(90);
    // Every node binds its own port and reports it (no port is released between its choice
    // and its use); then each learns every node's address.
    let addrs: Vec<String> = nodes.iter_mut().map(|n| n.addr(deadline)).collect();
    for n in &mut nodes {
        let stdin = n.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "ADDRS {}", addrs.join(",")).expect("addresses to a node");
    }
    let kill_all = |nodes: &mut Vec<Node>| {
        for n in nodes.iter_mut() {
            n.child.kill().ok();
        }
    };
    // Kill -9 the leader (SIGKILL: no clean shutdown, its TCP connections just die) mid-stream.
    while nodes[0].count("D ") < KILL_AFTER {
        if Instant::now() > deadline || nodes[0].child.try_wait().ok().flatten().is_some() {
            kill_all(&mut nodes);
            panic!("the leader never delivered {KILL_AFTER} commands");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    nodes[0].child.kill().expect("SIGKILL the leader");
    nodes[0].child.wait().expect("reap");
    for k in 1..NODES {
        loop {
            match nodes[k].child.try_wait().expect("wait") {
                Some(status) => {
                    assert!(status.success(), "node {k} failed: {status}");
                    break;
                }
                None if Instant::now() > deadline => {
                    kill_all(&mut nodes);
                    panic!("node {k} hung");
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
    let outputs: Vec<Vec<String>> = nodes.iter_mut().map(Node::finish).collect();
    let mut history = History::new();
    let mut late = Vec::new();
    for (k, lines) in outputs.iter().enumerate() {
        let id = NodeId(k as u32);
        for l in lines {
            if let Some(cmd) = l.strip_prefix("S ") {
                history.submit(id, cmd.to_string(), &[]);
            } else if let Some(rest) = l.strip_prefix("D ") {
                let (pos, cmd) = rest.split_once(' ').expect("D <pos> <cmd>");
                history.deliver(id, cmd.to_string(), pos.parse().expect("position"));
            } else if let Some(cmd) = l.strip_prefix("L ") {
                late.push(cmd.to_string());
            } else if l.starts_with("DONE") {
                eprintln!("n{k}: {l}");
            }
        }
    }
    history.crash(NodeId(0));
    let survivors = [NodeId(1), NodeId(2)];
    history.check_total_order().expect("one total order");
    history.check_agreement(&survivors).expect("agreement");
    let at_leader = history.deliveries(NodeId(0)).count();
    let at_survivor = history.deliveries(NodeId(1)).count();
    assert!(at_leader >= KILL_AFTER, "the leader delivered {at_leader}");
    assert!(
        at_survivor >= at_leader + 100,
        "the new leader did not carry on: {at_survivor} delivered after the old one's {at_leader}"
    );
    assert!(
        !late.is_empty(),
        "no command was submitted after the takeover"
    );
    for s in survivors {
        let mine: std::collections::BTreeSet<&String> = history.deliveries(s).collect();
        for c in &late {
            assert!(
                mine.contains(c),
                "{s} never delivered {c}, submitted after the takeover"
            );
        }
    }
}
