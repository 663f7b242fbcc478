//! Real `squall-kv serve` processes and clients that record what they observe, for the
//! linearizability checker.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use squall_kv::{KvClient, KvConfig, KvError, KvOp, KvResult, Ordering, ReplicaAddr};
use squall_ordering::linearizability::kv::{KvInput, KvOutput};
use squall_ordering::linearizability::{Operation, check};
use squall_smr::ClientConfig;

pub const BIN: &str = env!("CARGO_BIN_EXE_squall-kv");

/// Replica processes; killed on drop.
pub struct Procs {
    pub cfg: KvConfig,
    pub children: Vec<Option<Child>>,
    pub dir: PathBuf,
    /// Command prefix per replica (e.g. `ip netns exec NS`).
    pub prefix: Vec<Vec<String>>,
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Procs {
    /// Writes `cfg` and starts every replica (`prefix[i]` runs before the binary, if given).
    pub fn start(cfg: KvConfig, tag: &str, prefix: Vec<Vec<String>>) -> Procs {
        let dir = Procs::dir_for(tag);
        let _ = std::fs::remove_dir_all(&dir); // a leftover of an earlier run with this pid
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cluster.toml");
        std::fs::write(&path, cfg.to_toml()).unwrap();
        let mut procs = Procs {
            children: Vec::new(),
            dir: dir.clone(),
            prefix,
            cfg,
        };
        for id in 0..procs.cfg.replicas.len() {
            procs.children.push(None);
            procs.spawn(id);
        }
        procs
    }

    /// Starts `n` replicas on loopback ports each binds itself: `cfg` (its `replicas` are
    /// replaced) is written once every replica announced its ports (`serve --announce`, see
    /// `squall_kv::announce`), so no port is free between its choice and its use. A replica
    /// restarted later ([`spawn`](Self::spawn)) binds its port from the config again.
    pub fn start_announced(mut cfg: KvConfig, n: usize, tag: &str) -> Procs {
        let dir = Procs::dir_for(tag);
        let _ = std::fs::remove_dir_all(&dir); // a leftover of an earlier run with this pid
        std::fs::create_dir_all(&dir).unwrap();
        cfg.replicas = Vec::new();
        let mut procs = Procs {
            children: (0..n).map(|_| None).collect(),
            dir: dir.clone(),
            prefix: Vec::new(),
            cfg,
        };
        let files: Vec<PathBuf> = (0..n)
            .map(|id| dir.join(format!("replica-{id}.addr")))
            .collect();
        for (id, file) in files.iter().enumerate() {
            procs.spawn_with(id, &["--announce", &file.to_string_lossy()]);
        }
        let children = &mut procs.children;
        let addrs =
            squall_kv::announce::collect(&files, Duration::from_secs(60), || {
                match children
                    .iter_mut()
                    .flatten()
                    .find_map(|c| c.try_wait().ok().flatten())
                {
                    Some(status) => Err(format!("a replica exited ({status}) before announcing")),
                    None => Ok(()),
                }
            })
            .unwrap();
        procs.cfg.replicas = (0..n as u32)
            .zip(addrs)
            .map(|(id, (transport, client))| ReplicaAddr {
                id,
                transport,
                client,
            })
            .collect();
        procs.cfg.validate().unwrap();
        squall_kv::announce::write_atomically(&dir.join("cluster.toml"), &procs.cfg.to_toml())
            .unwrap();
        procs
    }

    /// Starts replica `id`'s process (again, after a kill: same config, same ports, same data
    /// directory); its output is appended to its log file.
    pub fn spawn(&mut self, id: usize) {
        self.spawn_with(id, &[]);
    }

    /// [`spawn`](Self::spawn) with more arguments for `serve` (e.g. `--rejoin`).
    pub fn spawn_with(&mut self, id: usize, extra: &[&str]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("replica-{id}.log")))
            .unwrap();
        let pre = self.prefix.get(id).cloned().unwrap_or_default();
        let mut cmd = if pre.is_empty() {
            Command::new(BIN)
        } else {
            let mut c = Command::new(&pre[0]);
            c.args(&pre[1..]).arg(BIN);
            c
        };
        cmd.args(["serve", "--config"])
            .arg(self.dir.join("cluster.toml"))
            .args(["--id", &id.to_string()])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        assert!(self.children[id].is_none(), "replica {id} still runs");
        self.children[id] = Some(cmd.spawn().unwrap());
    }

    /// Kill -9 every replica: every SIGKILL is sent before any is waited for (no time for a
    /// view change in between).
    pub fn kill_all(&mut self) {
        for c in self.children.iter_mut().flatten() {
            c.kill().unwrap();
        }
        for c in &mut self.children {
            if let Some(mut c) = c.take() {
                let _ = c.wait();
            }
        }
    }

    /// The directory of a test's files (`dir()` of [`Procs::start`] with this tag).
    pub fn dir_for(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("squall-kv-test-{tag}-{}", std::process::id()))
    }

    /// A loopback config of `n` replicas, their addresses not yet known
    /// ([`start_announced`](Self::start_announced) fills them in).
    fn loopback_config(ordering: Ordering) -> KvConfig {
        KvConfig {
            cluster_id: 7,
            ordering,
            heartbeat_period_ms: 50,
            heartbeat_timeout_ms: 600,
            replicas: Vec::new(),
            data_dir: None,
            fsync: Default::default(),
            snapshot_every: KvConfig::DEFAULT_SNAPSHOT_EVERY,
            checkpoint_inline: false,
            checkpoint_encode_inline: false,
            install_decode_inline: false,
        }
    }

    pub fn loopback(ordering: Ordering, n: usize, tag: &str) -> Procs {
        Procs::start_announced(Procs::loopback_config(ordering), n, tag)
    }

    /// [`loopback`](Self::loopback) for the membership ordering in durable mode: the replicas
    /// keep their logs under `<dir>/data` (`fsync`: see [`squall_kv::Fsync`]).
    pub fn loopback_durable(n: usize, tag: &str, fsync: squall_kv::Fsync) -> Procs {
        Procs::loopback_durable_every(n, tag, fsync, KvConfig::DEFAULT_SNAPSHOT_EVERY)
    }

    /// [`loopback_durable`](Self::loopback_durable) with `snapshot_every` (0: no checkpoints).
    pub fn loopback_durable_every(
        n: usize,
        tag: &str,
        fsync: squall_kv::Fsync,
        snapshot_every: u64,
    ) -> Procs {
        Procs::loopback_durable_with(n, tag, |cfg| {
            cfg.fsync = fsync;
            cfg.snapshot_every = snapshot_every;
        })
    }

    /// [`loopback_durable`](Self::loopback_durable) with the config as `set` leaves it.
    pub fn loopback_durable_with(n: usize, tag: &str, set: impl FnOnce(&mut KvConfig)) -> Procs {
        let mut cfg = Procs::loopback_config(Ordering::Membership);
        cfg.data_dir = Some(Procs::dir_for(tag).join("data"));
        set(&mut cfg);
        Procs::start_announced(cfg, n, tag)
    }

    pub fn log(&self, id: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("replica-{id}.log"))).unwrap_or_default()
    }

    /// Waits up to `within` for replica `id`'s process to exit by itself; its status, or
    /// `None` if it still runs (it is left running).
    pub fn wait_exit(&mut self, id: usize, within: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        let child = self.children[id].as_mut()?;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.children[id] = None;
                return Some(status);
            }
            if start.elapsed() > within {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kill -9 replica `id`.
    pub fn kill(&mut self, id: usize) {
        if let Some(mut c) = self.children[id].take() {
            c.kill().unwrap();
            let _ = c.wait();
        }
    }
}

/// Waits until a KV request succeeds at every replica (they are all up and ordering).
pub async fn wait_serving(procs: &Procs) {
    let start = Instant::now();
    for (i, addr) in procs.cfg.client_addrs().into_iter().enumerate() {
        loop {
            let mut cfg = ClientConfig::new(vec![addr]);
            cfg.timeout = Duration::from_millis(500);
            cfg.attempts = 1;
            let mut c = KvClient::new(cfg).unwrap();
            if c.get(b"k0").await.is_ok() {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "replica {i} does not serve; the replicas' logs:\n{}",
                (0..procs.cfg.replicas.len())
                    .map(|k| format!("--- replica {k}\n{}", procs.log(k)))
                    .collect::<String>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

pub type Op = Operation<KvInput, KvOutput>;

/// The shared history of a test's clients, on one clock.
#[derive(Clone)]
pub struct Recorder {
    pub start: Instant,
    pub ops: Arc<Mutex<Vec<Op>>>,
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            start: Instant::now(),
            ops: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    pub fn completed(&self) -> usize {
        self.ops
            .lock()
            .unwrap()
            .iter()
            .filter(|o| o.ret.is_some())
            .count()
    }

    /// Operations invoked more than `after` into the run that completed.
    pub fn completed_after(&self, after: Duration) -> usize {
        let t = after.as_nanos() as u64;
        self.ops
            .lock()
            .unwrap()
            .iter()
            .filter(|o| o.ret.is_some() && o.call > t)
            .count()
    }

    pub fn check(&self) -> Result<(), String> {
        let ops = self.ops.lock().unwrap().clone();
        check(&squall_ordering::linearizability::kv::Kv, &ops).map_err(|e| e.to_string())
    }
}

fn key(k: u64) -> Vec<u8> {
    format!("k{k}").into_bytes()
}

fn num(v: &[u8]) -> u64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

/// Pause between a client's operations: keeps histories (and CAS-Paxos's fixed-capacity log)
/// small enough for a test.
pub const PACE: Duration = Duration::from_millis(4);

/// One client: random operations over `keys` keys until `until`, each recorded with its
/// invocation and response times; failed reads are dropped (no effect), failed writes kept
/// with an unknown outcome.
pub async fn client(addrs: Vec<SocketAddr>, c: u64, keys: u64, until: Instant, rec: Recorder) {
    let mut cfg = ClientConfig::new(addrs.clone());
    cfg.timeout = Duration::from_millis(700);
    cfg.attempts = addrs.len() * 2;
    let mut kv = KvClient::new(cfg).unwrap();
    kv.prefer(c as usize % addrs.len());
    let mut counter = 0u64;
    let mut x = c.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut rnd = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    while Instant::now() < until {
        counter += 1;
        let k = rnd(keys);
        let v = c * 1_000_000 + counter;
        let input = match rnd(10) {
            0..=3 => KvInput::Get(k),
            4..=6 => KvInput::Put(k, v),
            7 => KvInput::Delete(k),
            _ => KvInput::Cas(k, Some(v - 1 - rnd(2)), v),
        };
        let op = match input {
            KvInput::Get(k) => KvOp::Get { key: key(k) },
            KvInput::Put(k, v) => KvOp::Put {
                key: key(k),
                value: v.to_string().into_bytes(),
            },
            KvInput::Delete(k) => KvOp::Delete { key: key(k) },
            KvInput::Cas(k, e, v) => KvOp::Cas {
                key: key(k),
                expected: e.map(|e| e.to_string().into_bytes()),
                new: v.to_string().into_bytes(),
            },
            KvInput::Scan(..) => unreachable!(),
        };
        let call = rec.now();
        let result = kv.run(&op).await;
        let ret = rec.now();
        let output = match result {
            Ok(KvResult::Done) => Some(KvOutput::Ok),
            Ok(KvResult::Value(v)) => Some(KvOutput::Value(v.map(|v| num(&v)))),
            Ok(KvResult::Cas { swapped, previous }) => {
                Some(KvOutput::Cas(swapped, previous.map(|p| num(&p))))
            }
            Ok(other) => panic!("unexpected result {other:?}"),
            Err(KvError::Client(e)) if e.outcome_unknown() => None,
            Err(e) => panic!("client {c}: {e}"),
        };
        let failed = output.is_none();
        if !(failed && matches!(input, KvInput::Get(_))) {
            rec.ops.lock().unwrap().push(Operation {
                client: c,
                input,
                call,
                ret: output.as_ref().map(|_| ret),
                output,
            });
        }
        if failed {
            // The service is unavailable: back off instead of piling up unknown outcomes.
            tokio::time::sleep(Duration::from_millis(300)).await;
        } else {
            tokio::time::sleep(PACE).await;
        }
    }
}
