//! A closed-loop load generator: `clients` sessions, each sending its next request as soon as
//! the previous one is answered, for a fixed time; and the same loop over a raw TCP echo
//! server, the baseline measured the same way.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use squall_smr::ClientConfig;
use squall_smr::wire::ReadMode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::client::{KvClient, KvError};
use crate::ops::KvOp;

/// What the load generator sends.
///
/// ```
/// let w = squall_kv::Workload::default();
/// assert_eq!((w.clients, w.value_size, w.batch), (16, 64, 1));
/// ```
#[derive(Clone, Debug)]
pub struct Workload {
    /// Concurrent client sessions.
    pub clients: usize,
    /// How long to run.
    pub duration: Duration,
    /// Bytes per value.
    pub value_size: usize,
    /// Distinct keys.
    pub keys: u64,
    /// Fraction of requests that are reads (0.0 – 1.0).
    pub read_ratio: f64,
    /// Operations per request (a batch is one log entry).
    pub batch: usize,
    /// How reads are served.
    pub read_mode: ReadMode,
    /// Per-attempt timeout of the clients.
    pub timeout: Duration,
}

impl Default for Workload {
    fn default() -> Workload {
        Workload {
            clients: 16,
            duration: Duration::from_secs(5),
            value_size: 64,
            keys: 10_000,
            read_ratio: 0.5,
            batch: 1,
            read_mode: ReadMode::Barrier,
            timeout: Duration::from_secs(2),
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// Requests answered.
    pub requests: u64,
    /// Operations answered (requests × batch).
    pub ops: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Request latency in microseconds.
    pub latency: Histogram<u64>,
}

impl Report {
    fn empty() -> Report {
        Report {
            requests: 0,
            ops: 0,
            errors: 0,
            elapsed: Duration::ZERO,
            latency: histogram(),
        }
    }

    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// A latency percentile in microseconds.
    pub fn percentile_us(&self, p: f64) -> u64 {
        self.latency.value_at_quantile(p / 100.0)
    }
}

fn histogram() -> Histogram<u64> {
    // 1 µs .. 60 s, 3 significant digits: fixed, valid bounds.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("fixed, valid histogram bounds")
}

/// A tiny deterministic generator per client (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Live counters a caller can watch while [`run`] works (for a progress bar).
#[derive(Debug, Default)]
pub struct Progress {
    /// Operations answered so far.
    pub ops: AtomicU64,
    /// Requests failed so far.
    pub errors: AtomicU64,
}

/// Runs `w` against the replicas at `replicas`, spreading the clients over them.
pub async fn run(
    replicas: Vec<SocketAddr>,
    w: &Workload,
    progress: Arc<Progress>,
) -> Result<Report, KvError> {
    let n = replicas.len().max(1);
    let start = Instant::now();
    let deadline = start + w.duration;
    let mut tasks = Vec::with_capacity(w.clients);
    for c in 0..w.clients {
        let mut cfg = ClientConfig::new(replicas.clone());
        cfg.timeout = w.timeout;
        let mut client = KvClient::new(cfg)?;
        client.prefer(c % n);
        client.set_read_mode(w.read_mode);
        let w = w.clone();
        let progress = Arc::clone(&progress);
        tasks.push(tokio::spawn(async move {
            let mut rng =
                Rng(0x9e37_79b9_7f4a_7c15 ^ (c as u64 + 1).wrapping_mul(0xff51_afd7_ed55_8ccd));
            let mut hist = histogram();
            let (mut requests, mut errors) = (0u64, 0u64);
            let value = vec![b'v'; w.value_size];
            while Instant::now() < deadline {
                let read = (rng.next() % 1_000_000) as f64 / 1_000_000.0 < w.read_ratio;
                let mut ops: Vec<KvOp> = (0..w.batch)
                    .map(|_| {
                        let key = format!("key{:08}", rng.next() % w.keys.max(1)).into_bytes();
                        if read {
                            KvOp::Get { key }
                        } else {
                            KvOp::Put {
                                key,
                                value: value.clone(),
                            }
                        }
                    })
                    .collect();
                let op = if ops.len() == 1 {
                    ops.remove(0)
                } else {
                    KvOp::Batch(ops)
                };
                let t = Instant::now();
                match client.run(&op).await {
                    Ok(_) => {
                        let us = t.elapsed().as_micros().max(1) as u64;
                        let _ = hist.record(us.min(60_000_000));
                        requests += 1;
                        progress.ops.fetch_add(w.batch as u64, Ordering::Relaxed);
                    }
                    Err(e) => {
                        errors += 1;
                        progress.errors.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(error = %e, "request failed");
                    }
                }
            }
            (requests, errors, hist)
        }));
    }
    let mut report = Report::empty();
    for t in tasks {
        if let Ok((r, e, h)) = t.await {
            report.requests += r;
            report.errors += e;
            let _ = report.latency.add(&h);
        }
    }
    report.elapsed = start.elapsed();
    report.ops = report.requests * w.batch as u64;
    Ok(report)
}

/// The baseline: the same closed loop (`clients` connections, one request in flight each) over
/// a raw TCP echo server on loopback, with request and response frames the size of a KV put
/// of `value_size` bytes and its answer. No replication, no ordering: what the network and the
/// runtime alone cost.
pub async fn raw_echo(
    clients: usize,
    duration: Duration,
    value_size: usize,
) -> std::io::Result<Report> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let server_stop = Arc::clone(&stop);
    // Request: the frame a put of `value_size` bytes with a 12-byte key takes; response: an
    // acknowledgement frame.
    let req_len = 14 + 24 + 1 + 1 + 4 + 12 + 4 + value_size;
    let resp_len = 14 + 2;
    let server = tokio::spawn(async move {
        while !server_stop.load(Ordering::Relaxed) {
            let Ok((mut s, _)) = listener.accept().await else {
                break;
            };
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut buf = vec![0u8; req_len];
                let resp = vec![0u8; resp_len];
                while s.read_exact(&mut buf).await.is_ok() {
                    if s.write_all(&resp).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for _ in 0..clients {
        tasks.push(tokio::spawn(async move {
            let mut hist = histogram();
            let mut n = 0u64;
            let mut s = TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            let req = vec![1u8; req_len];
            let mut resp = vec![0u8; resp_len];
            while Instant::now() < deadline {
                let t = Instant::now();
                s.write_all(&req).await?;
                s.read_exact(&mut resp).await?;
                let _ = hist.record(t.elapsed().as_micros().max(1) as u64);
                n += 1;
            }
            std::io::Result::Ok((n, hist))
        }));
    }
    let mut report = Report::empty();
    for t in tasks {
        match t.await {
            Ok(Ok((n, h))) => {
                report.requests += n;
                let _ = report.latency.add(&h);
            }
            _ => report.errors += 1,
        }
    }
    report.elapsed = start.elapsed();
    report.ops = report.requests;
    stop.store(true, Ordering::Relaxed);
    server.abort();
    Ok(report)
}
