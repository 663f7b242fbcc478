//! The TCP fabric over loopback, each figure beside its raw-TCP baseline measured in the same run:
#![allow(missing_docs)] // criterion_group! generates undocumented items
//! posted 8 B, 64 B and 1 KiB writes per second against two raw TCP streams of equal-sized
//! frames (buffered like ours, TCP_NODELAY, the receiver parsing every frame and copying its
//! payload): `raw_tcp_stream` frames carry a length only (the receiver copies every payload to
//! the same place), `raw_tcp_stream_addressed` frames also carry the destination offset that any
//! remote write needs (the sender copies the payload from its source buffer, the receiver
//! bounds-checks the offset and copies the payload there). CAS and read round trips (driver
//! busy-polling, and parked in `wait`) against a raw TCP ping-pong of the same sizes.

use std::hint::black_box;
use std::io::{BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use squall_benches::{REGION, await_completions};
use squall_transport::{
    Event, FailureCause, LocalSlice, NodeId, PostError, RemoteAddr, Signal, Transport,
};
use squall_transport_tcp::TcpNode;

const BATCH: u64 = 1024;

/// A thread's scheduler accounting from `/proc/.../schedstat`: nanoseconds on a CPU, and
/// nanoseconds runnable but waiting for one (descheduled by other load). Zeros where the file
/// is missing (not Linux, or no scheduler statistics).
fn sched_stat(path: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut f = text
        .split_whitespace()
        .map(|v| v.parse::<u64>().unwrap_or(0));
    (f.next().unwrap_or(0), f.next().unwrap_or(0))
}

/// The `schedstat` path of this process's newest thread named `name` (a pair just dropped may
/// still have one of that name on its way out), if there is one.
fn thread_named(name: &str) -> Option<String> {
    let newest = std::fs::read_dir("/proc/self/task")
        .ok()?
        .filter_map(|t| {
            let dir = t.ok()?.path();
            let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
            let tid: u64 = dir.file_name()?.to_str()?.parse().ok()?;
            (comm.trim() == name).then_some((tid, dir))
        })
        .max_by_key(|(tid, _)| *tid)?;
    Some(newest.1.join("schedstat").to_string_lossy().into_owned())
}

/// Prints the CPU time per write of the sending and the receiving thread over a benchmark
/// (warm-up and measurement), and the time each spent runnable but waiting for a CPU: on a
/// loaded machine the throughput ratios swing with the load, these per-write costs much less.
fn report_cpu(name: &str, writes: u64, sender: (u64, u64), receiver: (u64, u64)) {
    if writes == 0 {
        return;
    }
    let w = writes as f64;
    eprintln!(
        "{name}: per write: sender {:.1} ns on CPU ({:.1} ns waiting for one), receiver {:.1} ns ({:.1} ns waiting)",
        sender.0 as f64 / w,
        sender.1 as f64 / w,
        receiver.0 as f64 / w,
        receiver.1 as f64 / w
    );
}

/// `b - a`, per field.
fn delta(a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
    (b.0.saturating_sub(a.0), b.1.saturating_sub(a.1))
}

/// Two TCP nodes on loopback, one region of `len` bytes each.
fn tcp_pair(len: usize) -> Vec<TcpNode> {
    squall_benches::tcp_cluster(2, len)
}

/// Two TCP nodes on loopback like [`tcp_pair`], with `spin_before_park` and `read_lease` set.
fn tcp_pair_with(len: usize, spin: Duration, lease: Duration) -> Vec<TcpNode> {
    use squall_transport::{Region, RegionSpec};
    use squall_transport_tcp::ClusterConfig;
    let ls: Vec<TcpListener> = (0..2)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    let addrs: Vec<_> = ls.iter().map(|l| l.local_addr().expect("addr")).collect();
    let mut config = ClusterConfig::new(1, [(NodeId(0), addrs[0]), (NodeId(1), addrs[1])]);
    config.op_timeout = Duration::from_secs(5);
    config.heartbeat_timeout = Duration::from_secs(5);
    config.spin_before_park = spin;
    config.read_lease = lease;
    let handles: Vec<_> = (ls.into_iter().enumerate())
        .map(|(i, l)| {
            let config = config.clone();
            thread::spawn(move || {
                let region = Region::new(RegionSpec::new(REGION, len)).expect("region");
                TcpNode::start_on(l, config, NodeId(i as u32), vec![region]).expect("starts")
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("start"))
        .collect()
}

/// A connected loopback socket pair with TCP_NODELAY.
fn raw_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let a = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
    let (b, _) = l.accept().expect("accept");
    a.set_nodelay(true).expect("nodelay");
    b.set_nodelay(true).expect("nodelay");
    (a, b)
}

fn writes(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_posted_write");
    g.throughput(Throughput::Elements(BATCH));
    for size in [8usize, 64, 1024] {
        let mut nodes = tcp_pair(1 << 20);
        let peer = NodeId(1);
        // A thread names itself when it first runs: look until the reader thread has.
        let rx_thread = (0..1000).find_map(|_| {
            thread_named("squall-tcp-n1-r").or_else(|| {
                thread::sleep(Duration::from_millis(1));
                None
            })
        });
        let rx_stat = || rx_thread.as_deref().map_or((0, 0), sched_stat);
        let (tx0, rx0, mut writes) = (sched_stat("/proc/thread-self/schedstat"), rx_stat(), 0);
        g.bench_with_input(BenchmarkId::new("squall_tcp", size), &size, |b, &size| {
            b.iter(|| {
                writes += BATCH;
                for i in 0..BATCH as usize {
                    let off = (i * size) % (512 * 1024);
                    let src = LocalSlice::new(REGION, off, size);
                    loop {
                        match nodes[0].write(
                            peer,
                            src,
                            RemoteAddr::new(REGION, off),
                            Signal::Unsignaled,
                        ) {
                            Ok(op) => {
                                black_box(op);
                                break;
                            }
                            // The receiver is behind: flush and let it catch up.
                            Err(PostError::QueueFull { .. }) => {
                                nodes[0].poll(&mut []);
                            }
                            Err(e) => panic!("write refused: {e}"),
                        }
                    }
                }
                nodes[0].poll(&mut []); // flush the tail of the batch
            })
        });
        report_cpu(
            &format!("squall_tcp/{size}"),
            writes,
            delta(tx0, sched_stat("/proc/thread-self/schedstat")),
            delta(rx0, rx_stat()),
        );
        // Everything posted was applied before the next figure.
        let fence = nodes[0].fence(peer).expect("fence");
        black_box(fence);
        await_completions(&mut nodes[0], 1);
        drop(nodes);

        // Summed over the closure's calls (criterion calls it once per sample).
        let mut raw = (0u64, (0u64, 0u64), (0u64, 0u64));
        g.bench_with_input(
            BenchmarkId::new("raw_tcp_stream", size),
            &size,
            |b, &size| {
                let (tx, mut rx) = raw_pair();
                let receiver = thread::spawn(move || {
                    // Parse every frame and copy its payload, as a receiver applying writes would.
                    let start = sched_stat("/proc/thread-self/schedstat");
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut sink = vec![0u8; 1024];
                    let (mut filled, mut frames) = (0usize, 0u64);
                    loop {
                        match rx.read(&mut buf[filled..]) {
                            Ok(0) | Err(_) => {
                                let end = sched_stat("/proc/thread-self/schedstat");
                                return (frames, delta(start, end));
                            }
                            Ok(n) => filled += n,
                        }
                        let mut pos = 0;
                        while filled - pos >= 4 {
                            let len = u32::from_le_bytes([
                                buf[pos],
                                buf[pos + 1],
                                buf[pos + 2],
                                buf[pos + 3],
                            ]) as usize;
                            if filled - pos < 4 + len {
                                break;
                            }
                            sink[..len].copy_from_slice(&buf[pos + 4..pos + 4 + len]);
                            pos += 4 + len;
                            frames += 1;
                        }
                        buf.copy_within(pos..filled, 0);
                        filled -= pos;
                    }
                });
                let mut w = BufWriter::with_capacity(16 * 1024, tx);
                let payload = vec![7u8; size];
                let tx0 = sched_stat("/proc/thread-self/schedstat");
                b.iter(|| {
                    for _ in 0..BATCH {
                        w.write_all(&(size as u32).to_le_bytes()).expect("write");
                        w.write_all(black_box(&payload)).expect("write");
                    }
                    w.flush().expect("flush");
                });
                let tx = delta(tx0, sched_stat("/proc/thread-self/schedstat"));
                drop(w);
                if let Ok((frames, rx)) = receiver.join() {
                    raw.0 += frames;
                    raw.1 = (raw.1.0 + tx.0, raw.1.1 + tx.1);
                    raw.2 = (raw.2.0 + rx.0, raw.2.1 + rx.1);
                }
            },
        );
        report_cpu(&format!("raw_tcp_stream/{size}"), raw.0, raw.1, raw.2);

        g.bench_with_input(
            BenchmarkId::new("raw_tcp_stream_addressed", size),
            &size,
            |b, &size| {
                let (tx, mut rx) = raw_pair();
                let receiver = thread::spawn(move || {
                    // Parse every frame, bounds-check its offset, copy its payload there.
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut memory = vec![0u8; 1 << 20];
                    let (mut filled, mut frames) = (0usize, 0u64);
                    loop {
                        match rx.read(&mut buf[filled..]) {
                            Ok(0) | Err(_) => return (frames, memory[0]),
                            Ok(n) => filled += n,
                        }
                        let mut pos = 0;
                        while filled - pos >= 12 {
                            let b = &buf[pos..];
                            let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
                            if filled - pos < 12 + len {
                                break;
                            }
                            let mut o = [0u8; 8];
                            o.copy_from_slice(&b[4..12]);
                            let off = u64::from_le_bytes(o) as usize;
                            let Some(dst) = memory.get_mut(off..off.saturating_add(len)) else {
                                return (frames, 0); // out of bounds: a protocol error
                            };
                            dst.copy_from_slice(&b[12..12 + len]);
                            pos += 12 + len;
                            frames += 1;
                        }
                        buf.copy_within(pos..filled, 0);
                        filled -= pos;
                    }
                });
                let mut w = BufWriter::with_capacity(16 * 1024, tx);
                let source = vec![7u8; 1 << 20];
                b.iter(|| {
                    for i in 0..BATCH as usize {
                        let off = (i * size) % (512 * 1024);
                        w.write_all(&(size as u32).to_le_bytes()).expect("write");
                        w.write_all(&(off as u64).to_le_bytes()).expect("write");
                        w.write_all(black_box(&source[off..off + size]))
                            .expect("write");
                    }
                    w.flush().expect("flush");
                });
                drop(w);
                black_box(receiver.join().ok());
            },
        );
    }
    g.finish();
}

/// A raw ping-pong server: reads `req`-byte requests, answers each with `resp` bytes.
fn ping_pong_server(mut s: TcpStream, req: usize, resp: usize) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut r = vec![0u8; req];
        let out = vec![1u8; resp];
        while s.read_exact(&mut r).is_ok() {
            if s.write_all(&out).is_err() {
                return;
            }
        }
    })
}

/// Waits for one completion, parking between polls; returns its value.
fn await_parked(node: &mut TcpNode) -> u64 {
    let mut events = [Event::PeerFailed {
        peer: NodeId(u32::MAX),
        cause: FailureCause::Local,
    }; 4];
    loop {
        let n = node.poll(&mut events);
        for e in &events[..n] {
            if let Event::Completion(c) = e {
                return c.result.unwrap_or(u64::MAX);
            }
        }
        node.wait(Duration::from_millis(1));
    }
}

fn round_trips(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_round_trip");
    g.throughput(Throughput::Elements(1));
    let mut nodes = tcp_pair(64 * 1024);
    let word = RemoteAddr::new(REGION, 0);
    let mut expected = 0u64;
    g.bench_function("squall_tcp_cas", |b| {
        b.iter(|| {
            let r = nodes[0].compare_and_swap(NodeId(1), word, expected, expected + 1);
            black_box(r.is_ok());
            expected = await_completions(&mut nodes[0], 1) + 1;
        })
    });
    // The same, but the driver parks in `wait` between polls instead of spinning (what a driver
    // without busy_poll does): the answer wakes the driver, which reads it itself.
    g.bench_function("squall_tcp_cas_parked", |b| {
        b.iter(|| {
            let r = nodes[0].compare_and_swap(NodeId(1), word, expected, expected + 1);
            black_box(r.is_ok());
            expected = await_parked(&mut nodes[0]) + 1;
        })
    });
    // With 20 µs of spinning before parking (the default is none), and with socket ownership
    // off (the reader thread takes whatever arrives before the driver blocks in `wait`: the
    // hand-off before issue 3's ownership change).
    for (name, spin, lease) in [
        (
            "squall_tcp_cas_parked_spin20",
            Duration::from_micros(20),
            Duration::from_millis(1),
        ),
        (
            "squall_tcp_cas_parked_noown",
            Duration::ZERO,
            Duration::ZERO,
        ),
    ] {
        let mut pair = tcp_pair_with(64 * 1024, spin, lease);
        let mut expected = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                let r = pair[0].compare_and_swap(NodeId(1), word, expected, expected + 1);
                black_box(r.is_ok());
                expected = await_parked(&mut pair[0]) + 1;
            })
        });
    }
    // The same bytes as our CAS request and answer: 5-byte header + 28 and 5 + 16.
    g.bench_function("raw_tcp_ping_pong_cas", |b| {
        let (mut client, server) = raw_pair();
        let srv = ping_pong_server(server, 33, 21);
        let req = [0u8; 33];
        let mut resp = [0u8; 21];
        b.iter(|| {
            client.write_all(&req).expect("write");
            client.read_exact(&mut resp).expect("read");
        });
        drop(client);
        let _ = srv.join();
    });
    for size in [8usize, 64, 1024] {
        g.bench_with_input(
            BenchmarkId::new("squall_tcp_read", size),
            &size,
            |b, &size| {
                b.iter(|| {
                    let r = nodes[0].read(
                        NodeId(1),
                        RemoteAddr::new(REGION, 0),
                        LocalSlice::new(REGION, 4096, size),
                    );
                    black_box(r.is_ok());
                    await_completions(&mut nodes[0], 1);
                })
            },
        );
        g.bench_with_input(
            BenchmarkId::new("squall_tcp_read_parked", size),
            &size,
            |b, &size| {
                b.iter(|| {
                    let r = nodes[0].read(
                        NodeId(1),
                        RemoteAddr::new(REGION, 0),
                        LocalSlice::new(REGION, 4096, size),
                    );
                    black_box(r.is_ok());
                    await_parked(&mut nodes[0]);
                })
            },
        );
        // Our read request is 5 + 16 bytes; the answer 5 + 8 + size.
        g.bench_with_input(
            BenchmarkId::new("raw_tcp_ping_pong_read", size),
            &size,
            |b, &size| {
                let (mut client, server) = raw_pair();
                let srv = ping_pong_server(server, 21, 13 + size);
                let req = [0u8; 21];
                let mut resp = vec![0u8; 13 + size];
                b.iter(|| {
                    client.write_all(&req).expect("write");
                    client.read_exact(&mut resp).expect("read");
                });
                drop(client);
                let _ = srv.join();
            },
        );
    }
    g.finish();
}

criterion_group!(benches, writes, round_trips);
criterion_main!(benches);
