//! The `squall-kv` binary: `demo`, `serve`, `client` and `bench`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use squall_kv::admin::{AdminConfig, AdminRequest, AdminResponse, InFlight, LeaveOutcome};
use squall_kv::workload::{self, Progress, Report, Workload};
use squall_kv::{KvClient, KvConfig, KvOp, KvResult, Ordering, ReplicaAddr};
use squall_smr::wire::ReadMode;
use squall_smr::{ClientConfig, Replica};

#[derive(Parser)]
#[command(
    name = "squall-kv",
    version,
    about = "A replicated key-value store on Squall"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum TransportKind {
    /// Every replica its own OS process, over TCP loopback.
    Tcp,
    /// Every replica a thread of this process, on the in-memory threaded fabric.
    Mem,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Reads {
    Barrier,
    Ordered,
    Local,
}

impl From<Reads> for ReadMode {
    fn from(r: Reads) -> ReadMode {
        match r {
            Reads::Barrier => ReadMode::Barrier,
            Reads::Ordered => ReadMode::Ordered,
            Reads::Local => ReadMode::Local,
        }
    }
}

#[derive(clap::Args, Clone)]
struct Embedded {
    /// Where the replicas run.
    #[arg(long, value_enum, default_value_t = TransportKind::Tcp)]
    transport: TransportKind,
    /// The ordering backend.
    #[arg(long, value_enum, default_value_t = Ordering::RoundRobin)]
    ordering: Ordering,
    /// Number of replicas.
    #[arg(long, default_value_t = 3)]
    replicas: usize,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start a local cluster (no setup), run a mixed workload, print the results.
    Demo {
        #[command(flatten)]
        cluster: Embedded,
        /// Concurrent clients.
        #[arg(long, default_value_t = 16)]
        clients: usize,
        /// Seconds to run.
        #[arg(long, default_value_t = 5.0)]
        duration: f64,
        /// Bytes per value.
        #[arg(long, default_value_t = 64)]
        value_size: usize,
        /// Fraction of reads.
        #[arg(long, default_value_t = 0.5)]
        read_ratio: f64,
        /// How reads are served.
        #[arg(long, value_enum, default_value_t = Reads::Barrier)]
        reads: Reads,
    },
    /// Run one replica of a cluster described by a TOML file. Exits 0 after SIGINT or
    /// SIGTERM, and 0 once the replica left its group gracefully (`squall-kv client --id N
    /// leave`); 3 as soon as the replica stops for good by itself (its group stopped, e.g. it
    /// lost its majority, or the replica stopped itself), printing why and what to do; 1 on
    /// any other error.
    Serve {
        /// The cluster file (see `KvConfig`).
        #[arg(long)]
        config: PathBuf,
        /// This replica's id.
        #[arg(long)]
        id: u32,
        /// Membership only: this replica crashed and the others removed it; start it under
        /// its id as a new member that joins the running group and takes the state by
        /// transfer (in durable mode its old logs are discarded first).
        #[arg(long)]
        rejoin: bool,
        /// Local cluster (`squall-kv bench`/`demo` over TCP): bind both ports on 127.0.0.1
        /// port 0, write them to this file, then wait for `--config` to be written with them.
        #[arg(long, hide = true, conflicts_with = "rejoin")]
        announce: Option<PathBuf>,
        /// Durable mode, at a total restart: accept a deliberate change of `fsync` since the
        /// cluster was stopped. DIGEST is the settings digest this replica's log was written
        /// under, as the refusal of a plain restart prints it (16 hex digits); restart every
        /// replica with it. A log written under another digest, or a change of anything else
        /// that must agree, is still refused.
        #[arg(long, value_name = "DIGEST", value_parser = parse_digest, conflicts_with_all = ["rejoin", "announce"])]
        settings_from: Option<u64>,
        /// Accept `client … leave` from any host. By default a leave is accepted only from
        /// this replica's own host (a loopback address): a leave is for good, and the client
        /// port carries no authentication. `status` is answered to anyone.
        #[arg(long)]
        admin_leave_from_any_host: bool,
    },
    /// Send one operation to a cluster, or ask one replica its status or to leave.
    ///
    /// `status` and `leave` go to one replica: `--config FILE --id N`, or `--replicas ADDR`
    /// with one address. `leave` exits 0 once the replica left (its `serve` then exits 0), 4
    /// if the group holds the leave back (printing why; the leave stays asked and goes
    /// through by itself once nothing holds it back), 5 if it neither left nor was held
    /// within `--wait` (it stays asked), 1 if it was refused (a fixed group, a replica that
    /// stopped, a leave asked from another host than the replica's without `serve
    /// --admin-leave-from-any-host`) or on any other error (e.g. the replica was busy).
    Client {
        /// The cluster file (its replicas' client addresses are used).
        #[arg(long, conflicts_with = "replicas")]
        config: Option<PathBuf>,
        /// Client addresses, comma-separated, instead of a cluster file.
        #[arg(long, value_delimiter = ',')]
        replicas: Vec<SocketAddr>,
        /// With `--config`: the replica that `status` or `leave` asks.
        #[arg(long, requires = "config")]
        id: Option<u32>,
        #[command(subcommand)]
        op: ClientOp,
    },
    /// Closed-loop load generator: a clients × batch-size table beside a raw TCP baseline.
    Bench {
        /// An existing cluster; without it an embedded one is started as in `demo`.
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        cluster: Embedded,
        /// Client counts to measure.
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,64,256")]
        clients: Vec<usize>,
        /// Operations per request.
        #[arg(long, value_delimiter = ',', default_value = "1,8")]
        batch: Vec<usize>,
        /// Seconds per cell.
        #[arg(long, default_value_t = 2.0)]
        duration: f64,
        /// Bytes per value.
        #[arg(long, default_value_t = 64)]
        value_size: usize,
        /// Fraction of reads.
        #[arg(long, default_value_t = 0.0)]
        read_ratio: f64,
    },
}

#[derive(Subcommand)]
enum ClientOp {
    #[command(flatten)]
    Kv(KvCmd),
    /// One replica's view, members, role, whether it serves, and where its leave stands.
    Status {
        /// One JSON object instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Ask one replica to leave its group gracefully (membership ordering): the others
    /// install a view without it, not as a failure, and its `serve` exits 0.
    Leave {
        /// Seconds to wait for the outcome, 0 to 600 (the replica's bound). At the end: exit 4
        /// if the leave waits for a transfer and stayed held for the cluster's suspicion
        /// timeout (`heartbeat_timeout_ms`; a shorter hold may be the members' published
        /// words still on their way), else 5. A hold that needs a membership change (no
        /// majority without it, or it is its shard's only member) exits 4 at once.
        #[arg(long, default_value_t = 30.0)]
        wait: f64,
    },
}

/// The operations `client` sends to a cluster.
#[derive(Subcommand)]
enum KvCmd {
    /// Read a key.
    Get { key: String },
    /// Write a key.
    Put { key: String, value: String },
    /// Remove a key.
    Delete { key: String },
    /// Set KEY to NEW if it holds --expected OLD (or is not set, with --absent).
    Cas {
        key: String,
        new: String,
        /// The value KEY must hold.
        #[arg(long, required_unless_present = "absent", conflicts_with = "absent")]
        expected: Option<String>,
        /// KEY must not be set.
        #[arg(long)]
        absent: bool,
    },
    /// List keys in START..END (END empty: to the end).
    Scan {
        start: String,
        #[arg(default_value = "")]
        end: String,
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
}

fn main() {
    let cli = Cli::parse();
    let verbose = matches!(cli.cmd, Cmd::Serve { .. });
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(if verbose { "info" } else { "warn" })
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run(cli) {
        eprintln!("squall-kv: {e}");
        std::process::exit(exit_code(e.as_ref()));
    }
}

/// The process's exit code for an error `run` returned.
fn exit_code(e: &(dyn std::error::Error + 'static)) -> i32 {
    if e.downcast_ref::<ReplicaStopped>().is_some() {
        EXIT_REPLICA_STOPPED
    } else if let Some(l) = e.downcast_ref::<LeaveNotDone>() {
        l.code()
    } else {
        1
    }
}

/// `squall-kv client … leave`'s exit code when the group holds the leave back.
const EXIT_LEAVE_HELD: i32 = 4;

/// `squall-kv client … leave`'s exit code when the leave neither completed nor was held
/// within `--wait`.
const EXIT_LEAVE_PENDING: i32 = 5;

/// A leave asked with `client … leave` that has not completed: held back by the group
/// ([`EXIT_LEAVE_HELD`]) or still under way at the end of the wait ([`EXIT_LEAVE_PENDING`]).
#[derive(Debug, thiserror::Error)]
enum LeaveNotDone {
    /// The group holds it back.
    #[error("replica {0}: the leave is held back (it stays asked): {1}")]
    Held(SocketAddr, String),
    /// Neither left nor held within the wait.
    #[error("replica {0}: the leave did not complete within the wait (it stays asked): {1}")]
    Pending(SocketAddr, String),
}

impl LeaveNotDone {
    fn code(&self) -> i32 {
        match self {
            LeaveNotDone::Held(..) => EXIT_LEAVE_HELD,
            LeaveNotDone::Pending(..) => EXIT_LEAVE_PENDING,
        }
    }
}

/// `squall-kv serve`'s exit code when its replica stopped for good ([`ReplicaStopped`]);
/// documented in the README.
const EXIT_REPLICA_STOPPED: i32 = 3;

/// A served replica stopped for good by itself: its backend stopped (majority lost, shard
/// lost, a log failure, a refused join, ...) or the replica stopped itself. `serve` exits
/// with [`EXIT_REPLICA_STOPPED`], printing this on one line: why, and what to do.
#[derive(Debug, thiserror::Error)]
#[error("replica {id} stopped: {}; {}", one_line(&stop.to_string()), advice(*ordering, stop.phase))]
struct ReplicaStopped {
    id: u32,
    ordering: Ordering,
    stop: squall_smr::BackendStopped,
}

/// `s` with its line breaks replaced by spaces (a stop reason printed as one line).
fn one_line(s: &str) -> String {
    s.split(['\r', '\n'])
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the operator of a replica that stopped for good does next.
fn advice(ordering: Ordering, phase: squall_smr::StopPhase) -> &'static str {
    use squall_smr::StopPhase;
    match (ordering, phase) {
        (Ordering::Membership, StopPhase::Restarting) => {
            "remove the cause, then start it again (without --rejoin) together with the other \
             replicas of its last view"
        }
        (Ordering::Membership, StopPhase::Joining) => {
            "remove the cause (e.g. a cluster file that differs from the running replicas'), \
             then start it again with --rejoin"
        }
        (Ordering::Membership, _) => {
            "start it again with --rejoin while a majority of the group runs, or start every \
             replica again if none runs"
        }
        (Ordering::RoundRobin | Ordering::CasPaxos, _) => {
            "this ordering's group is fixed and cannot take the replica back: start every \
             replica again"
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn run(cli: Cli) -> Res<()> {
    match cli.cmd {
        Cmd::Demo {
            cluster,
            clients,
            duration,
            value_size,
            read_ratio,
            reads,
        } => {
            let w = Workload {
                clients,
                duration: secs(duration)?,
                value_size,
                read_ratio: ratio(read_ratio)?,
                read_mode: reads.into(),
                ..Workload::default()
            };
            demo(&cluster, &w)
        }
        Cmd::Serve {
            config,
            id,
            rejoin,
            announce,
            settings_from,
            admin_leave_from_any_host,
        } => serve(
            &config,
            id,
            rejoin,
            announce.as_deref(),
            settings_from,
            admin_leave_from_any_host,
        ),
        Cmd::Client {
            config,
            replicas,
            id,
            op,
        } => match op {
            ClientOp::Status { json } => {
                admin(config.as_deref(), replicas, id, AdminRequest::Status, json)
            }
            ClientOp::Leave { wait } => admin(
                config.as_deref(),
                replicas,
                id,
                AdminRequest::Leave {
                    wait: leave_wait(wait)?,
                },
                false,
            ),
            ClientOp::Kv(op) => client(config.as_deref(), replicas, op),
        },
        Cmd::Bench {
            config,
            cluster,
            clients,
            batch,
            duration,
            value_size,
            read_ratio,
        } => bench(
            config.as_deref(),
            &cluster,
            &clients,
            &batch,
            secs(duration)?,
            value_size,
            ratio(read_ratio)?,
        ),
    }
}

/// `--settings-from`: a settings digest, 16 hex digits (an optional `0x` allowed), never 0.
fn parse_digest(s: &str) -> Result<u64, String> {
    let hex = s.strip_prefix("0x").unwrap_or(s);
    match u64::from_str_radix(hex, 16) {
        Ok(0) | Err(_) => Err(format!(
            "not a settings digest: {s:?} (16 hex digits, as a refused restart prints it)"
        )),
        Ok(d) => Ok(d),
    }
}

fn secs(s: f64) -> Res<Duration> {
    if !(s.is_finite() && s > 0.0) {
        return Err(format!("--duration must be a positive number of seconds, not {s}").into());
    }
    Ok(Duration::from_secs_f64(s))
}

/// `leave --wait`: a number of seconds, 0 (answer at once) up to the replica's bound.
fn leave_wait(s: f64) -> Res<Duration> {
    let max = squall_kv::admin::MAX_LEAVE_WAIT;
    if !(s.is_finite() && (0.0..=max.as_secs_f64()).contains(&s)) {
        return Err(format!(
            "--wait must be between 0 and {} seconds, not {s}",
            max.as_secs()
        )
        .into());
    }
    Ok(Duration::from_secs_f64(s))
}

fn ratio(r: f64) -> Res<f64> {
    if !(0.0..=1.0).contains(&r) {
        return Err(format!("--read-ratio must be between 0 and 1, not {r}").into());
    }
    Ok(r)
}

fn runtime() -> Res<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// A cluster this process started: child processes (TCP) or in-process replicas (mem) with
/// their client servers.
struct Local {
    addrs: Vec<SocketAddr>,
    children: Vec<Child>,
    replicas: Vec<Replica<squall_kv::KvMachine>>,
    dir: Option<PathBuf>,
    describe: String,
}

impl Drop for Local {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for r in self.replicas.drain(..) {
            let _ = r.shutdown();
        }
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// How long a local cluster's replica waits for the cluster file after announcing its ports,
/// and the parent for every replica's announcement.
const ANNOUNCE_WAIT: Duration = Duration::from_secs(60);

fn start_local(c: &Embedded, rt: &tokio::runtime::Runtime) -> Res<Local> {
    if c.replicas < 2 {
        return Err("--replicas must be at least 2 (3 to survive a failure)".into());
    }
    match c.transport {
        TransportKind::Mem => {
            let replicas = squall_kv::start_mem_cluster(c.ordering, c.replicas)?;
            let mut addrs = Vec::new();
            for r in &replicas {
                let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
                addrs.push(listener.local_addr()?);
                rt.spawn(squall_smr::server::serve(
                    listener,
                    r.handle(),
                    Default::default(),
                ));
            }
            Ok(Local {
                addrs,
                children: Vec::new(),
                replicas,
                dir: None,
                describe: format!(
                    "{} replicas as threads on the in-memory fabric, {} ordering",
                    c.replicas, c.ordering
                ),
            })
        }
        TransportKind::Tcp => {
            let dir = std::env::temp_dir().join(format!("squall-kv-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let path = dir.join("cluster.toml");
            let exe = std::env::current_exe()?;
            let mut local = Local {
                addrs: Vec::new(),
                children: Vec::new(),
                replicas: Vec::new(),
                dir: Some(dir.clone()),
                describe: format!(
                    "{} replicas as separate processes over TCP loopback, {} ordering",
                    c.replicas, c.ordering
                ),
            };
            // Each replica binds its own ports and announces them; the cluster file naming
            // them is written once all have (no port is free between its choice and its use).
            let announced = (0..c.replicas)
                .map(|id| dir.join(format!("replica-{id}.addr")))
                .collect::<Vec<_>>();
            for (id, file) in announced.iter().enumerate() {
                let log = std::fs::File::create(dir.join(format!("replica-{id}.log")))?;
                let child = Command::new(&exe)
                    .args(["serve", "--config"])
                    .arg(&path)
                    .args(["--id", &id.to_string(), "--announce"])
                    .arg(file)
                    .stdin(Stdio::null())
                    .stdout(log.try_clone()?)
                    .stderr(log)
                    .spawn()?;
                local.children.push(child);
            }
            let children = &mut local.children;
            let addrs =
                squall_kv::announce::collect(&announced, ANNOUNCE_WAIT, || exited(children, &dir))?;
            let replicas = (0..c.replicas as u32)
                .zip(addrs)
                .map(|(id, (transport, client))| ReplicaAddr {
                    id,
                    transport,
                    client,
                })
                .collect::<Vec<_>>();
            let cfg = KvConfig {
                cluster_id: u64::from(std::process::id()),
                ordering: c.ordering,
                heartbeat_period_ms: 50,
                heartbeat_timeout_ms: 500,
                replicas,
                data_dir: None,
                fsync: Default::default(),
                snapshot_every: KvConfig::DEFAULT_SNAPSHOT_EVERY,
                checkpoint_inline: false,
                checkpoint_encode_inline: false,
                install_decode_inline: false,
            };
            cfg.validate()?;
            squall_kv::announce::write_atomically(&path, &cfg.to_toml())?;
            local.addrs = cfg.client_addrs();
            wait_ready(&mut local, &announced)?;
            Ok(local)
        }
    }
}

/// The file a local cluster's replica writes once it serves clients (its client port is bound
/// from the announcement on, so a connection succeeding says nothing).
fn ready_file(announce: &Path) -> PathBuf {
    announce.with_extension("ready")
}

/// An error naming the first of `children` that exited, with its log from `dir`.
fn exited(children: &mut [Child], dir: &Path) -> Result<(), String> {
    for (i, c) in children.iter_mut().enumerate() {
        let status = c.try_wait().map_err(|e| format!("replica {i}: {e}"))?;
        if let Some(status) = status {
            let log =
                std::fs::read_to_string(dir.join(format!("replica-{i}.log"))).unwrap_or_default();
            return Err(format!(
                "replica {i} exited ({status}) while starting:\n{log}"
            ));
        }
    }
    Ok(())
}

/// Waits until every replica serves clients (its `ready` file exists), or one of them exits.
fn wait_ready(local: &mut Local, announced: &[PathBuf]) -> Res<()> {
    let start = Instant::now();
    let dir = local.dir.clone().unwrap_or_default();
    while !announced.iter().all(|a| ready_file(a).exists()) {
        exited(&mut local.children, &dir)?;
        if start.elapsed() > ANNOUNCE_WAIT {
            return Err(
                format!("the replicas did not all start serving within {ANNOUNCE_WAIT:?}").into(),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn demo(c: &Embedded, w: &Workload) -> Res<()> {
    let rt = runtime()?;
    println!("Starting {} …", describe_plan(c));
    let local = start_local(c, &rt)?;
    println!("{} up; client addresses {:?}", local.describe, local.addrs);
    println!(
        "Workload: {} clients, closed loop, {:.0}% reads ({:?}), {} B values over {} keys, {:.1} s",
        w.clients,
        w.read_ratio * 100.0,
        w.read_mode,
        w.value_size,
        w.keys,
        w.duration.as_secs_f64()
    );
    let report = with_progress(&rt, &local.addrs, w)?;
    print_results(&report);
    print_histogram(&report);
    Ok(())
}

fn describe_plan(c: &Embedded) -> String {
    format!(
        "{} {} replicas ({} ordering)",
        c.replicas,
        match c.transport {
            TransportKind::Tcp => "TCP",
            TransportKind::Mem => "in-memory",
        },
        c.ordering
    )
}

fn with_progress(rt: &tokio::runtime::Runtime, addrs: &[SocketAddr], w: &Workload) -> Res<Report> {
    let progress = Arc::new(Progress::default());
    let bar = ProgressBar::new(w.duration.as_millis() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40.cyan/blue} {elapsed_precise} {msg}")
            .map_err(|e| e.to_string())?,
    );
    let (addrs, w2, p2) = (addrs.to_vec(), w.clone(), Arc::clone(&progress));
    let task = rt.spawn(async move { workload::run(addrs, &w2, p2).await });
    let start = Instant::now();
    while !task.is_finished() {
        let ops = progress.ops.load(AtomicOrdering::Relaxed);
        let secs = start.elapsed().as_secs_f64().max(1e-3);
        bar.set_position((start.elapsed().as_millis() as u64).min(w.duration.as_millis() as u64));
        bar.set_message(format!(
            "{ops} ops ({:.0}/s), {} errors",
            ops as f64 / secs,
            progress.errors.load(AtomicOrdering::Relaxed)
        ));
        std::thread::sleep(Duration::from_millis(100));
    }
    bar.finish_and_clear();
    Ok(rt.block_on(task)??)
}

fn print_results(r: &Report) {
    println!();
    println!("| metric | value |");
    println!("| --- | --- |");
    println!(
        "| operations | {} ({} requests, {} failed) |",
        r.ops, r.requests, r.errors
    );
    println!("| throughput | {:.0} ops/s |", r.ops_per_sec());
    println!("| latency p50 | {} µs |", r.percentile_us(50.0));
    println!("| latency p99 | {} µs |", r.percentile_us(99.0));
    println!("| latency p99.9 | {} µs |", r.percentile_us(99.9));
    println!("| latency max | {} µs |", r.latency.max());
}

fn print_histogram(r: &Report) {
    println!();
    println!("Request latency (µs), log2 buckets:");
    let mut rows = Vec::new();
    let mut lo = 1u64;
    while lo <= r.latency.max().max(1) {
        let hi = lo * 2;
        let count = r.latency.count_between(lo, hi - 1);
        rows.push((lo, hi, count));
        lo = hi;
    }
    let top = rows.iter().map(|x| x.2).max().unwrap_or(0).max(1);
    for (lo, hi, count) in rows.into_iter().skip_while(|x| x.2 == 0) {
        let bar = "#".repeat(((count * 50).div_ceil(top)) as usize);
        println!("{lo:>8} – {:<8} {count:>9} {bar}", hi - 1);
    }
}

fn serve(
    config: &Path,
    id: u32,
    rejoin: bool,
    announce: Option<&Path>,
    settings_from: Option<u64>,
    leave_from_any_host: bool,
) -> Res<()> {
    // With `--announce`: this process's ports, bound before the config naming them exists.
    let bound = match announce {
        Some(file) => {
            let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
            let listeners = squall_kv::announce::bind_and_announce(ip, file)?;
            squall_kv::announce::wait_for_file(config, ANNOUNCE_WAIT)?;
            Some(listeners)
        }
        None => None,
    };
    let cfg = KvConfig::from_file(config)?;
    let me = cfg
        .replicas
        .iter()
        .find(|r| r.id == id)
        .cloned()
        .ok_or_else(|| format!("replica {id} is not in {}", config.display()))?;
    tracing::info!(id, ordering = %cfg.ordering, transport = %me.transport, client = %me.client,
        "starting replica; waiting for every peer to connect");
    let (replica, client) = match bound {
        Some((transport, client)) => {
            if transport.local_addr()? != me.transport || client.local_addr()? != me.client {
                return Err(format!(
                    "{} names other addresses for replica {id} than it announced",
                    config.display()
                )
                .into());
            }
            let replica = squall_kv::start_tcp_replica_on(&cfg, id, transport)?;
            (replica, Some(client))
        }
        None if rejoin => (squall_kv::rejoin_tcp_replica(&cfg, id)?, None),
        None => match settings_from {
            Some(from) => (
                squall_kv::start_tcp_replica_changing_settings(&cfg, id, from)?,
                None,
            ),
            None => (squall_kv::start_tcp_replica(&cfg, id)?, None),
        },
    };
    tracing::info!(id, "replica running; serving clients");
    let rt = runtime()?;
    rt.block_on(async {
        let listener = match client {
            Some(l) => {
                l.set_nonblocking(true)?;
                tokio::net::TcpListener::from_std(l)?
            }
            None => tokio::net::TcpListener::bind(me.client).await?,
        };
        if let Some(file) = announce {
            squall_kv::announce::write_atomically(&ready_file(file), "")?;
        }
        let handle = replica.handle();
        let in_flight = InFlight::default();
        // Client-protocol connections and operators' admin requests, on the client port.
        // A transfer's hold is reported `Held` once it outlasted the suspicion timeout.
        let mut admin = AdminConfig::new(Duration::from_millis(cfg.heartbeat_timeout_ms));
        admin.leave_from_any_host = leave_from_any_host;
        let server = squall_kv::admin::serve(
            listener,
            handle.clone(),
            Default::default(),
            admin,
            in_flight.clone(),
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = server => r?,
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; shutting down"),
            _ = term.recv() => tracing::info!("terminated; shutting down"),
            // Woken by the replica's driver as it stops, not polled.
            stop = handle.stopped() => {
                tracing::error!(id, error = %stop, "the replica stopped for good; exiting");
            }
            // A graceful leave (an operator's `client … leave`) completed: exit 0, once the
            // asker has its answer.
            why = handle.left() => {
                tracing::info!(id, %why, "left the group; exiting");
                in_flight.drained(squall_kv::admin::ADMIN_TIMEOUT).await;
            }
        }
        Res::Ok(())
    })?;
    tracing::info!(metrics = %replica.handle().metrics(), "replica stopped");
    let left = replica.handle().left_reason();
    serve_exit(id, cfg.ordering, left, replica.shutdown().map(drop))
}

/// `serve`'s outcome from its replica's shutdown. A replica that left exits 0 whatever its
/// shutdown says (its operator was told "left"; a stop after the leave completed changes
/// nothing); any other `BackendStopped` is a [`ReplicaStopped`] (exit 3).
fn serve_exit(
    id: u32,
    ordering: Ordering,
    left: Option<String>,
    shutdown: Result<(), squall_smr::RuntimeError>,
) -> Res<()> {
    match shutdown {
        Ok(()) => Ok(()),
        Err(squall_smr::RuntimeError::BackendStopped(stop)) => match left {
            Some(why) => {
                tracing::warn!(id, %why, error = %stop, "stopped after it left the group; exiting 0");
                Ok(())
            }
            None => Err(ReplicaStopped { id, ordering, stop }.into()),
        },
        Err(e) => Err(e.into()),
    }
}

fn client(config: Option<&Path>, replicas: Vec<SocketAddr>, op: KvCmd) -> Res<()> {
    let addrs = match config {
        Some(p) => KvConfig::from_file(p)?.client_addrs(),
        None if !replicas.is_empty() => replicas,
        None => return Err("give --config FILE or --replicas ADDR,ADDR,…".into()),
    };
    let op = match op {
        KvCmd::Get { key } => KvOp::Get {
            key: key.into_bytes(),
        },
        KvCmd::Put { key, value } => KvOp::Put {
            key: key.into_bytes(),
            value: value.into_bytes(),
        },
        KvCmd::Delete { key } => KvOp::Delete {
            key: key.into_bytes(),
        },
        KvCmd::Cas {
            key,
            expected,
            new,
            absent,
        } => KvOp::Cas {
            key: key.into_bytes(),
            expected: if absent {
                None
            } else {
                expected.map(String::into_bytes)
            },
            new: new.into_bytes(),
        },
        KvCmd::Scan { start, end, limit } => KvOp::Scan {
            start: start.into_bytes(),
            end: end.into_bytes(),
            limit,
        },
    };
    let rt = runtime()?;
    let result = rt.block_on(async {
        let mut kv = KvClient::new(ClientConfig::new(addrs))?;
        kv.run(&op).await
    })?;
    let show = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match result {
        KvResult::Done => println!("ok"),
        KvResult::Value(None) => println!("(not set)"),
        KvResult::Value(Some(v)) => println!("{}", show(&v)),
        KvResult::Cas { swapped, previous } => println!(
            "{} (was {})",
            if swapped { "swapped" } else { "not swapped" },
            previous.map_or("not set".into(), |p| show(&p))
        ),
        KvResult::Pairs(pairs) => {
            for (k, v) in pairs {
                println!("{}\t{}", show(&k), show(&v));
            }
        }
        other => println!("{other:?}"),
    }
    Ok(())
}

/// `client … status` and `client … leave`: one replica's client address, asked.
fn admin(
    config: Option<&Path>,
    replicas: Vec<SocketAddr>,
    id: Option<u32>,
    req: AdminRequest,
    json: bool,
) -> Res<()> {
    let addr = match (config, id) {
        (Some(p), Some(id)) => KvConfig::from_file(p)?
            .replicas
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.client)
            .ok_or_else(|| format!("replica {id} is not in {}", p.display()))?,
        (Some(_), None) => return Err("status and leave ask one replica: give --id N".into()),
        (None, _) => match replicas.as_slice() {
            [one] => *one,
            _ => {
                return Err(
                    "status and leave ask one replica: give --config FILE --id N or --replicas ADDR"
                        .into(),
                );
            }
        },
    };
    let rt = runtime()?;
    match rt.block_on(squall_kv::admin::ask(addr, &req))? {
        AdminResponse::Status(s) if json => println!("{}", s.to_json()),
        AdminResponse::Status(s) => println!("{s}"),
        AdminResponse::Leave(LeaveOutcome::Left(why)) => println!("left: {why}"),
        AdminResponse::Leave(LeaveOutcome::Held(why)) => {
            return Err(LeaveNotDone::Held(addr, why).into());
        }
        AdminResponse::Leave(LeaveOutcome::Pending(why)) => {
            return Err(LeaveNotDone::Pending(addr, why).into());
        }
        AdminResponse::Leave(LeaveOutcome::Refused(why)) => {
            return Err(format!("replica at {addr} refused to leave: {why}").into());
        }
        AdminResponse::Error(why) => return Err(format!("replica at {addr}: {why}").into()),
        other => return Err(format!("replica at {addr}: unexpected answer {other:?}").into()),
    }
    Ok(())
}

fn bench(
    config: Option<&Path>,
    c: &Embedded,
    clients: &[usize],
    batches: &[usize],
    duration: Duration,
    value_size: usize,
    read_ratio: f64,
) -> Res<()> {
    if clients.is_empty() || batches.is_empty() || clients.contains(&0) || batches.contains(&0) {
        return Err("--clients and --batch need positive numbers".into());
    }
    let rt = runtime()?;
    let (addrs, _local, describe) = match config {
        Some(p) => {
            let cfg = KvConfig::from_file(p)?;
            let d = format!("the cluster in {} ({} ordering)", p.display(), cfg.ordering);
            (cfg.client_addrs(), None, d)
        }
        None => {
            let local = start_local(c, &rt)?;
            let d = local.describe.clone();
            (local.addrs.clone(), Some(local), d)
        }
    };
    println!("# squall-kv bench: {describe}");
    println!(
        "# closed loop, {value_size} B values, {:.0}% reads, {:.1} s per cell; baseline: the same loop over a raw TCP echo of equal-sized frames",
        read_ratio * 100.0,
        duration.as_secs_f64()
    );
    println!();
    println!(
        "| clients | batch | ops/s | req/s | p50 µs | p99 µs | raw echo req/s | raw p50 µs | req/s vs raw |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for &n in clients {
        let raw = rt.block_on(workload::raw_echo(n, duration, value_size))?;
        let raw_rps = raw.requests as f64 / raw.elapsed.as_secs_f64().max(1e-9);
        for &b in batches {
            let w = Workload {
                clients: n,
                duration,
                value_size,
                read_ratio,
                batch: b,
                ..Workload::default()
            };
            let r = rt.block_on(workload::run(
                addrs.clone(),
                &w,
                Arc::new(Progress::default()),
            ))?;
            let rps = r.requests as f64 / r.elapsed.as_secs_f64().max(1e-9);
            println!(
                "| {n} | {b} | {:.0} | {rps:.0} | {} | {} | {raw_rps:.0} | {} | {:.2} |{}",
                r.ops_per_sec(),
                r.percentile_us(50.0),
                r.percentile_us(99.0),
                raw.percentile_us(50.0),
                rps / raw_rps.max(1e-9),
                if r.errors > 0 {
                    format!(" {} errors", r.errors)
                } else {
                    String::new()
                }
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// s26 (docs/MEMBERSHIP.md, seventieth part; review N7): `serve --settings-from` takes a
    /// digest as a refused restart prints it (16 hex digits, `0x` allowed); 0 (no log holds
    /// it; `GmsConfig::validate` refuses it too) and anything not hex are refused by the
    /// parser, naming the value.
    #[test]
    fn a_zero_or_malformed_settings_digest_is_refused() {
        assert_eq!(parse_digest("00000000deadbeef"), Ok(0xdead_beef));
        assert_eq!(parse_digest("0x1f"), Ok(0x1f));
        for bad in [
            "0",
            "0000000000000000",
            "0x0",
            "",
            "xyz",
            "12345678901234567",
        ] {
            let e = parse_digest(bad).expect_err(bad);
            assert!(
                e.contains("not a settings digest") && e.contains(bad),
                "{bad}: {e}"
            );
        }
        let cli = Cli::try_parse_from([
            "squall-kv",
            "serve",
            "--config",
            "c.toml",
            "--id",
            "0",
            "--settings-from",
            "0",
        ]);
        assert!(cli.is_err(), "--settings-from 0 was taken");
    }

    /// s27 review R3: a replica that left exits 0 even when its shutdown reports a stop (its
    /// operator was told "left"); one that did not leave exits 3.
    #[test]
    fn a_replica_that_left_exits_0_whatever_its_shutdown_says() {
        let stop = || {
            Err(squall_smr::RuntimeError::BackendStopped(
                squall_smr::BackendStopped {
                    reason: "the replica stopped itself".into(),
                    phase: squall_smr::StopPhase::Replica,
                },
            ))
        };
        assert!(serve_exit(1, Ordering::Membership, Some("left: view 3".into()), stop()).is_ok());
        match serve_exit(1, Ordering::Membership, None, stop()) {
            Err(e) => assert_eq!(exit_code(e.as_ref()), EXIT_REPLICA_STOPPED),
            Ok(()) => panic!("a stop without a leave exited 0"),
        }
        assert!(serve_exit(1, Ordering::Membership, None, Ok(())).is_ok());
    }

    /// A replica that stopped for good exits with its own code and says, on one line, why
    /// and what to do.
    #[test]
    fn a_replica_that_stopped_exits_3_naming_why_and_what_to_do() {
        let stop = squall_smr::BackendStopped {
            reason: "lost its majority\nin view 4".into(),
            phase: squall_smr::StopPhase::Member,
        };
        let e: Box<dyn std::error::Error> = ReplicaStopped {
            id: 2,
            ordering: Ordering::Membership,
            stop,
        }
        .into();
        assert_eq!(exit_code(e.as_ref()), EXIT_REPLICA_STOPPED);
        assert_eq!(
            e.to_string(),
            "replica 2 stopped: this replica's backend stopped: lost its majority in view 4; \
             start it again with --rejoin while a majority of the group runs, or start every \
             replica again if none runs"
        );
        let joining = squall_smr::BackendStopped {
            reason: "settings differ".into(),
            phase: squall_smr::StopPhase::Joining,
        };
        let e = ReplicaStopped {
            id: 3,
            ordering: Ordering::Membership,
            stop: joining.clone(),
        };
        assert!(e.to_string().contains("--rejoin"), "{e}");
        let fixed = ReplicaStopped {
            id: 3,
            ordering: Ordering::RoundRobin,
            stop: joining,
        };
        assert!(
            fixed.to_string().contains("start every replica again"),
            "{fixed}"
        );
        let other: Box<dyn std::error::Error> = "no such file".into();
        assert_eq!(exit_code(other.as_ref()), 1);
    }
}
