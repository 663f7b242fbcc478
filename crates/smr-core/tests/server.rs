//! The runtime, the client-protocol server and the async client end to end on the threaded
//! fabric: bad input gets an error reply and the server keeps serving; a client fails over
//! when its replica crashes, and its command is applied exactly once.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use squall_cas_paxos::layout::Layout;
use squall_cas_paxos::log::{CasPaxos, LogConfig};
use squall_smr::wire::{ErrorCode, ReadMode, Request, Response};
use squall_smr::{Client, ClientConfig, Replica, ReplicaConfig, RestoreError, StateMachine};
use squall_transport::{NodeId, Transport};
use squall_transport_mem::threaded::{Faults, ThreadedConfig, ThreadedFabric};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Appends commands; the response is the log's length (not idempotent: a double apply shows).
#[derive(Default)]
struct Append(Vec<Vec<u8>>);

impl StateMachine for Append {
    fn apply(&mut self, c: &[u8]) -> Vec<u8> {
        self.0.push(c.to_vec());
        (self.0.len() as u64).to_le_bytes().to_vec()
    }
    fn query(&self, _: &[u8]) -> Vec<u8> {
        (self.0.len() as u64).to_le_bytes().to_vec()
    }
    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }
    fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> {
        Ok(())
    }
}

fn log_config(seed: u64) -> LogConfig {
    LogConfig {
        layout: Layout {
            proposers: 3,
            slots: 4096,
            max_value_len: 256,
        },
        window: 8,
        max_pending: 256,
        backoff: (Duration::from_micros(20), Duration::from_micros(200)),
        heartbeat_period: Duration::from_millis(1),
        leader_timeout: Duration::from_millis(20),
        recycle_timeout: Duration::from_millis(500),
        seed,
        rpc_threshold: squall_cas_paxos::decree::default_rpc_threshold(3),
    }
}

struct Cluster {
    faults: Faults,
    replicas: Vec<Replica<Append>>,
    addrs: Vec<SocketAddr>,
    rt: tokio::runtime::Runtime,
}

fn cluster() -> Cluster {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cfg = ThreadedConfig {
        op_timeout: Duration::from_millis(50),
        ..ThreadedConfig::default()
    };
    let fabric = ThreadedFabric::new(cfg).unwrap();
    let nodes = fabric.cluster(3, &log_config(0).regions()).unwrap();
    let faults = nodes[0].faults();
    let mut replicas = Vec::new();
    let mut addrs = Vec::new();
    for t in nodes {
        let id = t.local_id();
        let r = Replica::spawn(
            id,
            move || CasPaxos::new(t, log_config(u64::from(id.0) + 1)),
            Append::default(),
            ReplicaConfig::default(),
        )
        .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        addrs.push(listener.local_addr().unwrap());
        rt.spawn(squall_smr::server::serve(
            listener,
            r.handle(),
            Default::default(),
        ));
        replicas.push(r);
    }
    Cluster {
        faults,
        replicas,
        addrs,
        rt,
    }
}

async fn roundtrip(s: &mut TcpStream, frame: &[u8]) -> (u64, Response) {
    s.write_all(frame).await.unwrap();
    let mut p = [0u8; 4];
    s.read_exact(&mut p).await.unwrap();
    let len = squall_smr::wire::frame_len(p, 1 << 20).unwrap();
    let mut body = vec![0; len];
    s.read_exact(&mut body).await.unwrap();
    Response::decode(&body, 1 << 20).unwrap()
}

#[test]
fn malformed_requests_get_an_error_and_the_server_carries_on() {
    let c = cluster();
    c.rt.block_on(async {
        let mut s = TcpStream::connect(c.addrs[0]).await.unwrap();
        // A frame of the right length whose version is wrong.
        let mut bad = Request::Read { mode: ReadMode::Barrier, query: vec![] }.encode(5);
        bad[4] = 99;
        let (id, r) = roundtrip(&mut s, &bad).await;
        assert_eq!(id, 5);
        assert!(matches!(r, Response::Error { code: ErrorCode::Malformed, ref message } if message.contains("version")), "{r:?}");
        // An unknown request kind, then garbage inside a well-framed request.
        let mut kind = Request::Read { mode: ReadMode::Barrier, query: vec![] }.encode(6);
        kind[5] = 77;
        assert!(matches!(roundtrip(&mut s, &kind).await.1, Response::Error { code: ErrorCode::Malformed, .. }));
        let mut mode = Request::Read { mode: ReadMode::Barrier, query: vec![] }.encode(7);
        mode[14] = 9;
        assert!(matches!(roundtrip(&mut s, &mode).await.1, Response::Error { code: ErrorCode::Malformed, .. }));
        // The same connection still works.
        let ok = Request::Command { client: 1, seq: 1, acked: 0, payload: b"x".to_vec() }.encode(8);
        assert_eq!(roundtrip(&mut s, &ok).await, (8, Response::Ok(1u64.to_le_bytes().to_vec())));
        // An absurd length cannot be skipped: that connection gets an answer and is closed...
        let mut huge = TcpStream::connect(c.addrs[0]).await.unwrap();
        huge.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
        let (_, r) = {
            let mut p = [0u8; 4];
            huge.read_exact(&mut p).await.unwrap();
            let mut body = vec![0; squall_smr::wire::frame_len(p, 1 << 20).unwrap()];
            huge.read_exact(&mut body).await.unwrap();
            Response::decode(&body, 1 << 20).unwrap()
        };
        assert!(matches!(r, Response::Error { code: ErrorCode::Malformed, .. }));
        let mut rest = Vec::new();
        assert_eq!(huge.read_to_end(&mut rest).await.unwrap(), 0, "closed");
        // ...and the others, old and new, carry on.
        let read = Request::Read { mode: ReadMode::Barrier, query: vec![] }.encode(9);
        assert_eq!(roundtrip(&mut s, &read).await, (9, Response::Ok(1u64.to_le_bytes().to_vec())));
        let mut client = Client::new(ClientConfig::new(c.addrs.clone())).unwrap();
        assert_eq!(client.execute(b"y").await.unwrap(), 2u64.to_le_bytes());
    });
}

#[test]
fn a_client_fails_over_when_its_replica_crashes_and_applies_once() {
    let c = cluster();
    let mut client = {
        let mut cfg = ClientConfig::new(c.addrs.clone());
        cfg.timeout = Duration::from_millis(300);
        Client::new(cfg).unwrap()
    };
    c.rt.block_on(async {
        for i in 1..=20u64 {
            assert_eq!(client.execute(b"a").await.unwrap(), i.to_le_bytes());
        }
    });
    // The client talks to replica 0, which is also the leader: crash it.
    c.faults.crash(NodeId(0));
    c.rt.block_on(async {
        for i in 21..=40u64 {
            assert_eq!(
                client.execute(b"b").await.unwrap(),
                i.to_le_bytes(),
                "command {i}"
            );
        }
        assert_eq!(
            client.read(b"", ReadMode::Barrier).await.unwrap(),
            40u64.to_le_bytes()
        );
        assert_eq!(
            client.read(b"", ReadMode::Ordered).await.unwrap(),
            40u64.to_le_bytes()
        );
    });
    let Cluster { replicas, rt, .. } = c;
    drop(rt);
    let states: Vec<Vec<Vec<u8>>> = replicas
        .into_iter()
        .skip(1)
        .map(|r| r.shutdown().unwrap().0)
        .collect();
    assert_eq!(states[0].len(), 40, "every command applied exactly once");
    assert_eq!(states[0], states[1]);
}

/// A backend that accepts everything and orders nothing (an entry lost with a crashed leader).
struct BlackHole {
    thread: std::thread::Thread,
}

impl squall_ordering::TotalOrder for BlackHole {
    fn me(&self) -> NodeId {
        NodeId(0)
    }
    fn submit(&mut self, _: &[u8]) -> Result<(), squall_ordering::SubmitError> {
        Ok(())
    }
    fn poll(&mut self, _: &mut Vec<squall_ordering::Upcall<squall_ordering::Delivery>>) -> bool {
        false
    }
    fn wait(&mut self, timeout: Duration) {
        std::thread::park_timeout(timeout);
    }
    fn waker(&self) -> squall_transport::Waker {
        let t = self.thread.clone();
        squall_transport::Waker::new(move || t.unpark())
    }
}

#[test]
fn a_request_the_backend_lost_is_answered_unavailable_after_the_request_timeout() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let replica = Replica::spawn(
        NodeId(0),
        || {
            Ok::<_, String>(BlackHole {
                thread: std::thread::current(),
            })
        },
        Append::default(),
        ReplicaConfig::default(),
    )
    .unwrap();
    let cfg = squall_smr::server::ServerConfig {
        request_timeout: Duration::from_millis(200),
        ..Default::default()
    };
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(squall_smr::server::serve(listener, replica.handle(), cfg));
        let mut s = TcpStream::connect(addr).await.unwrap();
        let start = std::time::Instant::now();
        let cmd = Request::Command { client: 1, seq: 1, acked: 0, payload: b"x".to_vec() }.encode(1);
        let (_, r) = roundtrip(&mut s, &cmd).await;
        assert!(matches!(r, Response::Error { code: ErrorCode::Unavailable, ref message } if message.contains("within")), "{r:?}");
        assert!(start.elapsed() >= Duration::from_millis(200));
    });
    assert!(replica.shutdown().unwrap().0.is_empty());
}
