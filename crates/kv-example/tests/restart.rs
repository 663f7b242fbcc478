//! Durable mode over real processes: a 3-replica membership KV cluster with `data_dir` takes
//! writes, every replica is killed with SIGKILL at once, and all are started again on the same
//! config and data directories. The restarted cluster must serve every acknowledged write with
//! its value from every replica, and take new writes. Restart time against a fresh start with
//! the same number of keys: `SQUALL_KV_RESTART_BENCH=<keys>` (see `restart_time`).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Procs, wait_serving};
use squall_kv::{Fsync, KvClient, KvError, KvOp, KvResult};
use squall_smr::ClientConfig;
use squall_smr::wire::{ErrorCode, Request, Response, frame_len};

fn client(addrs: Vec<SocketAddr>) -> KvClient {
    let mut cfg = ClientConfig::new(addrs.clone());
    cfg.timeout = Duration::from_millis(700);
    cfg.attempts = addrs.len() * 2;
    KvClient::new(cfg).unwrap()
}

/// What the writers learned: per key, the value of an acknowledged write, or `None` for a
/// write whose outcome is unknown (cut by the kill: it may or may not have been applied).
type Acked = Arc<Mutex<BTreeMap<Vec<u8>, Option<Vec<u8>>>>>;

/// Writer `w` puts keys `w-<i>` (each once, value `v<i>`) one at a time until `stop`.
async fn writer(addrs: Vec<SocketAddr>, w: usize, acked: Acked, stop: Arc<Mutex<bool>>) {
    let mut kv = client(addrs.clone());
    kv.prefer(w % addrs.len());
    for i in 0.. {
        if *stop.lock().unwrap() {
            return;
        }
        let key = format!("w{w}-{i:06}").into_bytes();
        let value = format!("v{w}-{i}").into_bytes();
        let r = kv.put(&key, &value).await;
        let failed = r.is_err();
        {
            let mut a = acked.lock().unwrap();
            match r {
                Ok(()) => a.insert(key, Some(value)),
                Err(KvError::Client(e)) if e.outcome_unknown() => a.insert(key, None),
                Err(e) => panic!("writer {w}: {e}"),
            };
        }
        if failed {
            // The cluster is down or changing views: back off.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Three writers (one per replica) running on `rt` until [`stop`](Writers::stop).
struct Writers {
    acked: Acked,
    stop: Arc<Mutex<bool>>,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

impl Writers {
    fn start(rt: &tokio::runtime::Runtime, addrs: &[SocketAddr]) -> Writers {
        let acked: Acked = Arc::default();
        let stop = Arc::new(Mutex::new(false));
        let handles = (0..3)
            .map(|w| rt.spawn(writer(addrs.to_vec(), w, acked.clone(), stop.clone())))
            .collect();
        Writers {
            acked,
            stop,
            handles,
        }
    }

    /// Records `key` as acknowledged with `value` (a write the test made itself).
    fn note(&self, key: &[u8], value: &[u8]) {
        (self.acked.lock().unwrap()).insert(key.to_vec(), Some(value.to_vec()));
    }

    /// Stops the writers and returns what they learned.
    fn stop(self, rt: &tokio::runtime::Runtime) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
        *self.stop.lock().unwrap() = true;
        for w in self.handles {
            rt.block_on(w).unwrap();
        }
        self.acked.lock().unwrap().clone()
    }
}

/// The tests' client runtime.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Sends one request straight to replica `addr` over the client protocol (no client library:
/// the test picks the session and the command number), retrying while it answers
/// `Unavailable`.
fn raw_call(addr: SocketAddr, req: &Request) -> Response {
    use std::io::{Read, Write};
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&req.encode(1)).unwrap();
        let mut prefix = [0; 4];
        s.read_exact(&mut prefix).unwrap();
        let mut body = vec![0; frame_len(prefix, 1 << 20).unwrap()];
        s.read_exact(&mut body).unwrap();
        let (_, r) = Response::decode(&body, 1 << 20).unwrap();
        match r {
            Response::Error {
                code: ErrorCode::Unavailable,
                ..
            } if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            r => return r,
        }
    }
}

/// Command 1 of a session the test numbers itself: sets `once` to `1` if it is unset. Applied
/// a second time it would answer `swapped: false`, so its answer tells a duplicate (answered
/// from the session table) from a second application.
fn once_command() -> Request {
    Request::Command {
        client: 0x5e55_1011,
        seq: 1,
        acked: 0,
        payload: KvOp::Cas {
            key: b"once".to_vec(),
            expected: None,
            new: b"1".to_vec(),
        }
        .encode(),
    }
}

fn swapped() -> Response {
    Response::Ok(
        KvResult::Cas {
            swapped: true,
            previous: None,
        }
        .encode(),
    )
}

/// Waits until `acked` holds `n` more entries than now.
fn wait_writes(acked: &Acked, n: usize) {
    let target = acked.lock().unwrap().len() + n;
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.lock().unwrap().len() < target {
        assert!(Instant::now() < deadline, "the cluster took too few writes");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until every replica's log says it recorded a checkpoint ("group: checkpoint
/// durable": its file synced and renamed on the group's writer thread, its record in the GMS
/// log). The 300 writes before the kill do not bound that: the first checkpoint's `fsync`s on
/// the writer thread can take longer than the writes on a loaded box (s24 CI: replica 0's
/// first checkpoint, started at position 21, was not recorded 210 ms later at the kill, so
/// its restart could not be from a checkpoint; docs/MEMBERSHIP.md, forty-ninth part).
fn wait_checkpoint_durable(procs: &Procs) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0..procs.cfg.replicas.len() {
        while !procs.log(i).contains("group: checkpoint durable") {
            assert!(
                Instant::now() < deadline,
                "replica {i} recorded no checkpoint in 30 s:\n{}",
                procs.log(i)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Every pair replica `i` holds (barrier reads answered from its own state), in pages.
async fn contents(addr: SocketAddr) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut kv = client(vec![addr]);
    let mut out = BTreeMap::new();
    let mut start = Vec::new();
    loop {
        let page = kv.scan(&start, b"", 1000).await.unwrap();
        let Some((last, _)) = page.last() else {
            return out;
        };
        start = last.clone();
        start.push(0);
        out.extend(page);
    }
}

fn check_everything_acked_is_there(procs: &Procs, acked: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut first: Option<BTreeMap<Vec<u8>, Vec<u8>>> = None;
    for (i, addr) in procs.cfg.client_addrs().into_iter().enumerate() {
        let held = rt.block_on(contents(addr));
        for (k, v) in acked {
            match (v, held.get(k)) {
                (Some(v), Some(h)) => assert_eq!(
                    h,
                    v,
                    "replica {i}: key {} holds another value",
                    String::from_utf8_lossy(k)
                ),
                (Some(_), None) => panic!(
                    "replica {i} lost the acknowledged write of {} (it holds {} keys of {} acknowledged); its log:\n{}",
                    String::from_utf8_lossy(k),
                    held.len(),
                    acked.values().flatten().count(),
                    procs.log(i)
                ),
                (None, _) => {} // cut by the kill: either way is right
            }
        }
        for k in held.keys() {
            assert!(
                acked.contains_key(k),
                "replica {i} holds {}, which nobody wrote",
                String::from_utf8_lossy(k)
            );
        }
        match &first {
            None => first = Some(held),
            Some(f) => assert_eq!(f, &held, "replicas 0 and {i} hold different pairs"),
        }
    }
}

/// Restarts every replica and returns how long until all serve.
fn restart_all(procs: &mut Procs, rt: &tokio::runtime::Runtime) -> Duration {
    let start = Instant::now();
    for id in 0..procs.cfg.replicas.len() {
        procs.spawn(id);
    }
    rt.block_on(wait_serving(procs));
    start.elapsed()
}

#[test]
fn a_durable_cluster_killed_whole_restarts_from_its_logs_with_every_acknowledged_write() {
    killed_whole("restart-all", 0);
}

/// The same with a checkpoint every 20 applied entries: every replica restarts from its latest
/// checkpoint (store and sessions) and replays only what follows it.
#[test]
fn a_checkpointing_cluster_killed_whole_restarts_from_its_checkpoints() {
    killed_whole("restart-checkpoints", 20);
}

/// Three durable replicas (`snapshot_every`: see `KvConfig`) killed mid-stream and restarted:
/// every acknowledged write is there, a retried command is answered from its session, new
/// writes work.
fn killed_whole(tag: &str, snapshot_every: u64) {
    let rt = runtime();
    let t0 = Instant::now();
    let mut procs = Procs::loopback_durable_every(3, tag, Fsync::Never, snapshot_every);
    rt.block_on(wait_serving(&procs));
    let fresh = t0.elapsed();
    let addrs = procs.cfg.client_addrs();
    let writers = Writers::start(&rt, &addrs);
    assert_eq!(raw_call(addrs[1], &once_command()), swapped());
    writers.note(b"once", b"1");
    // Kill mid-stream, once enough writes were acknowledged (and, with checkpoints, once every
    // replica made one durable).
    wait_writes(&writers.acked, 300);
    if snapshot_every > 0 {
        wait_checkpoint_durable(&procs);
    }
    procs.kill_all();
    let acked = writers.stop(&rt);
    let written = acked.values().flatten().count();
    assert!(written >= 290, "only {written} writes acknowledged");

    let restart = restart_all(&mut procs, &rt);
    for i in 0..3 {
        let log = procs.log(i);
        assert!(
            log.contains("restarting from its logs")
                && (snapshot_every == 0
                    || (log.contains("checkpoint durable")
                        && log.contains("restarting from a persisted snapshot"))),
            "replica {i} did not restart from its logs (and checkpoint):\n{log}"
        );
    }
    check_everything_acked_is_there(&procs, &acked);
    // The session table came back with the replay: a retry of a command acknowledged before
    // the kill is answered as it was, not applied again.
    for addr in &addrs {
        assert_eq!(raw_call(*addr, &once_command()), swapped());
    }
    // New writes work, at every replica, and the old ones are still there.
    let mut acked = acked;
    for (i, addr) in addrs.iter().enumerate() {
        let mut kv = client(vec![*addr]);
        let key = format!("after-{i}").into_bytes();
        rt.block_on(kv.put(&key, b"new")).unwrap();
        acked.insert(key, Some(b"new".to_vec()));
    }
    check_everything_acked_is_there(&procs, &acked);
    eprintln!(
        "restart of 3 replicas with {written} acknowledged writes: serving after {restart:?} (fresh start {fresh:?}, ratio {:.2})",
        restart.as_secs_f64() / fresh.as_secs_f64()
    );
}

#[test]
fn a_replica_that_rejoined_by_transfer_restarts_from_its_persisted_state_after_a_total_kill() {
    let rt = runtime();
    let mut procs = Procs::loopback_durable(3, "restart-transfer", Fsync::Never);
    rt.block_on(wait_serving(&procs));
    let addrs = procs.cfg.client_addrs();
    let writers = Writers::start(&rt, &addrs);
    assert_eq!(raw_call(addrs[0], &once_command()), swapped());
    writers.note(b"once", b"1");
    wait_writes(&writers.acked, 150);
    // Replica 2 crashes; the others remove it and go on; it comes back under its id with no
    // logs and joins by state transfer (everything written so far is in that state only).
    procs.kill(2);
    wait_writes(&writers.acked, 100);
    procs.spawn_with(2, &["--rejoin"]);
    rt.block_on(wait_serving(&procs));
    assert!(
        procs.log(2).contains("installed a transferred state"),
        "replica 2 did not join by transfer:\n{}",
        procs.log(2)
    );
    wait_writes(&writers.acked, 150);
    procs.kill_all();
    let acked = writers.stop(&rt);
    restart_all(&mut procs, &rt);
    assert!(
        procs
            .log(2)
            .contains("restarting from a persisted snapshot"),
        "replica 2 did not restart from its persisted state:\n{}",
        procs.log(2)
    );
    check_everything_acked_is_there(&procs, &acked);
    // Its sessions came back with the persisted state: the retry of a command applied before
    // its transfer is a duplicate at replica 2 too.
    assert_eq!(raw_call(addrs[2], &once_command()), swapped());
    check_everything_acked_is_there(&procs, &acked);
    eprintln!(
        "{} writes acknowledged, replica 2 restored its transferred state",
        acked.values().flatten().count()
    );
}

/// One replica killed and started again on its logs (plain `serve`, no `--rejoin`) while the
/// others run on: its restart finds the group went on without it, so it joins again by state
/// transfer (smr-core: the restart completes without a state, and the replica waits for one as
/// a joiner) and ends holding every acknowledged write.
#[test]
fn one_replica_restarted_on_its_logs_while_the_others_run_joins_again_by_transfer() {
    let rt = runtime();
    let mut procs = Procs::loopback_durable(3, "restart-one", Fsync::Never);
    rt.block_on(wait_serving(&procs));
    let addrs = procs.cfg.client_addrs();
    let writers = Writers::start(&rt, &addrs);
    wait_writes(&writers.acked, 150);
    procs.kill(2);
    wait_writes(&writers.acked, 100);
    procs.spawn(2);
    rt.block_on(wait_serving(&procs));
    wait_writes(&writers.acked, 100);
    let acked = writers.stop(&rt);
    let log = procs.log(2);
    assert!(
        log.contains("restarting from its logs")
            && log.contains("joining again by transfer")
            && log.contains("installed a transferred state"),
        "replica 2 did not restart, then join again by transfer:\n{log}"
    );
    check_everything_acked_is_there(&procs, &acked);
}

/// Puts `keys` keys through the cluster in batches of `batch` (each batch one log entry), from
/// 4 clients at once.
async fn load(
    addrs: Vec<SocketAddr>,
    keys: usize,
    batch: usize,
) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    let tasks: Vec<_> = (0..4)
        .map(|c| {
            let addrs = addrs.clone();
            tokio::spawn(async move {
                let mut kv = client(addrs);
                kv.prefer(c);
                let mut out = BTreeMap::new();
                for b in (c * batch..keys).step_by(4 * batch) {
                    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (b..(b + batch).min(keys))
                        .map(|i| (format!("k{i:09}").into_bytes(), format!("{i}").into_bytes()))
                        .collect();
                    let op = KvOp::Batch(
                        pairs
                            .iter()
                            .map(|(key, value)| KvOp::Put {
                                key: key.clone(),
                                value: value.clone(),
                            })
                            .collect(),
                    );
                    // A view change under load may cut a batch: its outcome is unknown.
                    let done = match kv.run(&op).await {
                        Ok(_) => true,
                        Err(KvError::Client(e)) if e.outcome_unknown() => false,
                        Err(e) => panic!("loader {c}: {e}"),
                    };
                    out.extend(pairs.into_iter().map(|(k, v)| (k, done.then_some(v))));
                }
                out
            })
        })
        .collect();
    let mut all = BTreeMap::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

/// The figure: a fresh start of 3 durable replicas against their restart after all were
/// killed holding `SQUALL_KV_RESTART_BENCH` keys (default: skipped), `SQUALL_KV_RESTART_FSYNC`
/// `batch` (default) or `never`, `SQUALL_KV_SNAPSHOT_EVERY` the replicas' `snapshot_every`
/// (default: `KvConfig::DEFAULT_SNAPSHOT_EVERY`; 0: no checkpoints, a restart replays every
/// log), `SQUALL_KV_RESTART_BATCH` the puts per log entry (default 50),
/// `SQUALL_KV_RESTORE_INLINE=1` restores the checkpoint on the replica's thread
/// (`install_decode_inline`, as before s22). Each time runs from spawning the processes until
/// a read succeeds at every replica. Also printed: per replica of the restart, how long
/// installing its checkpoint held the replica's thread (`us=` of "installed a transferred
/// state" inline, `swap_us=` when decoded off the thread) and its longest driver turn.
#[test]
fn restart_time() {
    let Some(keys) = std::env::var("SQUALL_KV_RESTART_BENCH")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        eprintln!("skipped: set SQUALL_KV_RESTART_BENCH=<keys> to measure");
        return;
    };
    let fsync = match std::env::var("SQUALL_KV_RESTART_FSYNC").as_deref() {
        Ok("never") => Fsync::Never,
        _ => Fsync::Batch,
    };
    let every = std::env::var("SQUALL_KV_SNAPSHOT_EVERY")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(squall_kv::KvConfig::DEFAULT_SNAPSHOT_EVERY);
    let batch = std::env::var("SQUALL_KV_RESTART_BATCH")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(50)
        .max(1);
    let restore_inline = std::env::var("SQUALL_KV_RESTORE_INLINE").is_ok_and(|v| v == "1");
    let rt = runtime();
    let t0 = Instant::now();
    let mut procs = Procs::loopback_durable_with(3, "restart-bench", |cfg| {
        cfg.fsync = fsync;
        cfg.snapshot_every = every;
        cfg.install_decode_inline = restore_inline;
    });
    rt.block_on(wait_serving(&procs));
    let fresh = t0.elapsed();
    let t = Instant::now();
    let acked = rt.block_on(load(procs.cfg.client_addrs(), keys, batch));
    let loaded = t.elapsed();
    procs.kill_all();
    let restart = restart_all(&mut procs, &rt);
    check_everything_acked_is_there(&procs, &acked);
    if std::env::var("SQUALL_KV_RESTART_BENCH_LOG").is_ok() {
        // Replica 0's milestones, both lives (where a restart spends its time).
        for line in procs.log(0).lines().filter(|l| {
            [
                "restart",
                "snapshot",
                "checkpoint",
                "installed",
                "replay",
                "view installed",
                "starting",
            ]
            .iter()
            .any(|k| l.contains(k))
        }) {
            eprintln!("  {line}");
        }
    }
    let (mut logs, mut snaps) = (0u64, 0u64);
    for e in std::fs::read_dir(procs.dir.join("data/replica-0/epochs")).unwrap() {
        let e = e.unwrap();
        let len = e.metadata().unwrap().len();
        if e.file_name().to_string_lossy().starts_with("snapshot-") {
            snaps += len;
        } else {
            logs += len;
        }
    }
    let held: Vec<String> = (0..3)
        .map(|i| {
            // The restarted life: from its last "restarting from durable logs" line.
            let log = procs.log(i);
            let life = log
                .rfind("restarting from durable logs")
                .map_or(&log[..], |at| &log[at..]);
            let install = life
                .lines()
                .filter(|l| l.contains("installed a transferred state"))
                .filter_map(|l| field(l, "swap_us").or_else(|| field(l, "us")))
                .max();
            format!(
                "replica {i}: install held {} µs, longest turn {} µs",
                install.map_or("-".into(), |us| us.to_string()),
                longest_turn_us(life)
            )
        })
        .collect();
    eprintln!(
        "fsync {fsync}, snapshot_every {every}, restore {}, {keys} keys in batches of {batch} (loaded in {loaded:?}; replica 0 at the kill: epoch logs {logs} bytes, snapshot {snaps} bytes): fresh start {fresh:?}, restart {restart:?}, restart / fresh = {:.2}; {}",
        if restore_inline {
            "inline"
        } else {
            "off-thread"
        },
        restart.as_secs_f64() / fresh.as_secs_f64(),
        held.join("; ")
    );
}

/// The longest turn of a replica's driver loop (the longest its backend went unpolled, its
/// heartbeats unsent) in `log`, from its "longest driver turn so far" lines (µs; 0: none of
/// 5 ms or more).
fn longest_turn_us(log: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains("longest driver turn so far"))
        .filter_map(|l| {
            let at = l.find(" us=")? + 4;
            l[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .max()
        .unwrap_or(0)
}

/// The value of `field=` (an integer) in a log line.
fn field(line: &str, field: &str) -> Option<u64> {
    let at = line.find(&format!(" {field}="))? + field.len() + 2;
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Per checkpoint in `log`, the time it held the replica's thread (µs): its "checkpoint
/// started" line's `us` (encoding the snapshot and handing it over: with the inline writer
/// that includes writing and syncing the file) plus its "checkpoint durable" line's
/// `record_us` (the record and the removals, in a later poll).
fn checkpoint_holds(log: &str) -> Vec<u64> {
    let mut started = BTreeMap::new();
    let mut out = Vec::new();
    for l in log.lines() {
        if l.contains("checkpoint started") {
            if let (Some(p), Some(us)) = (field(l, "position"), field(l, "us")) {
                started.insert(p, us);
            }
        } else if l.contains("group: checkpoint durable")
            && let (Some(p), Some(us)) = (field(l, "position"), field(l, "record_us"))
            && let Some(s) = started.remove(&p)
        {
            out.push(s + us);
        }
    }
    out
}

/// The figure of the checkpoint writer thread: the longest pause of a replica's driver loop
/// while 3 durable replicas load `SQUALL_KV_CHECKPOINT_BENCH` keys (default: skipped; in
/// batches of `SQUALL_KV_RESTART_BATCH`, default 50, fsync `batch`) checkpointing every
/// `SQUALL_KV_SNAPSHOT_EVERY` entries (default `KvConfig::DEFAULT_SNAPSHOT_EVERY`), in the
/// same run: without checkpoints (the baseline), with the snapshot encoded and the file
/// written on the replica's thread (`checkpoint_inline` and `checkpoint_encode_inline`: s18),
/// with the snapshot encoded on the replica's thread and the file written by the writer
/// thread (`checkpoint_encode_inline`: s19), and with the store captured and the snapshot
/// encoded by the writer thread too (the default, s20). Each is the maximum over the three
/// replicas; `loaded in` is the load's wall time (its throughput).
#[test]
fn checkpoint_pause() {
    let Some(keys) = std::env::var("SQUALL_KV_CHECKPOINT_BENCH")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        eprintln!("skipped: set SQUALL_KV_CHECKPOINT_BENCH=<keys> to measure");
        return;
    };
    let every = std::env::var("SQUALL_KV_SNAPSHOT_EVERY")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(squall_kv::KvConfig::DEFAULT_SNAPSHOT_EVERY);
    let batch = std::env::var("SQUALL_KV_RESTART_BATCH")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(50)
        .max(1);
    let rt = runtime();
    let mut pauses = Vec::new();
    for (i, (name, every, inline, encode_inline)) in [
        ("no checkpoints", 0, false, false),
        ("inline (s18)", every, true, true),
        (
            "writer thread, encoded on the replica (s19)",
            every,
            false,
            true,
        ),
        (
            "writer thread, captured and encoded there (s20)",
            every,
            false,
            false,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let tag = format!("ckpt-pause-{i}");
        let mut procs = Procs::loopback_durable_with(3, &tag, |cfg| {
            cfg.fsync = Fsync::Batch;
            cfg.snapshot_every = every;
            cfg.checkpoint_inline = inline;
            cfg.checkpoint_encode_inline = encode_inline;
        });
        rt.block_on(wait_serving(&procs));
        let t = Instant::now();
        let acked = rt.block_on(load(procs.cfg.client_addrs(), keys, batch));
        let loaded = t.elapsed();
        procs.kill_all();
        assert!(acked.values().filter(|v| v.is_some()).count() * 10 >= keys * 9);
        let (mut longest, mut holds, mut worst) = (0u64, Vec::new(), 0);
        for i in 0..3 {
            let log = procs.log(i);
            let l = longest_turn_us(&log);
            if l >= longest {
                (longest, worst) = (l, i);
            }
            holds.extend(checkpoint_holds(&log));
        }
        holds.sort_unstable();
        let checkpoints = holds.len();
        let ms = |us: u64| us as f64 / 1000.0;
        let hold_max = holds.last().copied().unwrap_or(0);
        let hold_median = holds.get(checkpoints / 2).copied().unwrap_or(0);
        if std::env::var("SQUALL_KV_RESTART_BENCH_LOG").is_ok() {
            // The slowest replica's long turns and checkpoints.
            for line in procs.log(worst).lines().filter(|l| {
                ["longest driver turn", "checkpoint"]
                    .iter()
                    .any(|k| l.contains(k))
            }) {
                eprintln!("  {line}");
            }
        }
        eprintln!(
            "{name}: snapshot_every {every}, {keys} keys in batches of {batch}: loaded in {loaded:?}, {checkpoints} checkpoints (3 replicas) held the replica thread {:.1} ms at most ({:.1} ms median); longest driver turn {:.1} ms",
            ms(hold_max),
            ms(hold_median),
            ms(longest)
        );
        pauses.push((longest.max(1) as f64, hold_max.max(1) as f64));
    }
    eprintln!(
        "checkpoint's longest hold of the replica thread: s19 / s18 = {:.3}, s20 / s19 = {:.3}; longest driver turn: s18 / none = {:.2}, s19 / none = {:.2}, s20 / none = {:.2}, s20 / s19 = {:.2}",
        pauses[2].1 / pauses[1].1,
        pauses[3].1 / pauses[2].1,
        pauses[1].0 / pauses[0].0,
        pauses[2].0 / pauses[0].0,
        pauses[3].0 / pauses[0].0,
        pauses[3].0 / pauses[2].0
    );
}
