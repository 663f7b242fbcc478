//! Garbage, truncated frames and oversized length fields, on a node's listening port and on an
//! established link: the node closes that connection (logging why) and keeps serving its other
//! peers.
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use squall_transport::{
    Event, FailureCause, LocalSlice, NodeId, RegionId, RegionSpec, RemoteAddr, Signal, Transport,
};
use squall_transport_tcp::frame::{self, Frame, Hello, PROTOCOL_VERSION};
use squall_transport_tcp::{ClusterConfig, TcpNode};

const R: RegionId = RegionId(0);

fn layout() -> [RegionSpec; 1] {
    [RegionSpec::new(R, 4096)]
}

/// Reads until the node closes the connection; returns what it sent first (a refusal, maybe).
fn until_closed(mut s: TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("the node did not close a connection that sent garbage: {e}"),
        }
    }
}

fn refusal(bytes: &[u8]) -> String {
    match frame::decode(bytes, 0) {
        Ok(Some((Frame::Refuse(r), _))) => r.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn hello(config: &ClusterConfig, from: u32, to: u32) -> Hello {
    Hello {
        version: PROTOCOL_VERSION,
        cluster_id: config.cluster_id,
        from,
        to,
        incarnation: 1,
        max_message_len: config.max_message_len as u32,
        regions: vec![(R.0, 4096)],
    }
}

fn send_and_close(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(bytes).expect("write");
    let _ = s.shutdown(std::net::Shutdown::Write);
    until_closed(s)
}

/// A CAS each way between two live nodes, and a fenced write: the link still works.
fn still_serving(nodes: &mut [TcpNode], a: usize, b: usize) {
    for (from, to) in [(a, b), (b, a)] {
        let peer = NodeId(to as u32);
        let before = nodes[to].region(R).expect("region").load(1);
        let cas = nodes[from]
            .compare_and_swap(peer, RemoteAddr::new(R, 8), before, before + 1)
            .expect("posted");
        nodes[from].region(R).expect("region").store(2, 0xabcd);
        nodes[from]
            .write(
                peer,
                LocalSlice::new(R, 16, 8),
                RemoteAddr::new(R, 24),
                Signal::Unsignaled,
            )
            .expect("posted");
        let fence = nodes[from].fence(peer).expect("posted");
        let mut done = (false, false);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut events = [Event::PeerFailed {
            peer,
            cause: FailureCause::Local,
        }; 16];
        while done != (true, true) {
            assert!(Instant::now() < deadline, "ops between live nodes stalled");
            let n = nodes[from].poll(&mut events);
            for e in &events[..n] {
                match e {
                    Event::Completion(c) if c.op == cas => {
                        assert_eq!(c.result, Ok(before));
                        done.0 = true;
                    }
                    Event::Completion(c) if c.op == fence => {
                        assert_eq!(c.result, Ok(0));
                        done.1 = true;
                    }
                    Event::PeerFailed { peer: p, .. } if *p == peer => {
                        panic!("live peer {p} was reported failed")
                    }
                    _ => {}
                }
            }
            nodes[from].wait(Duration::from_millis(1));
        }
        assert_eq!(nodes[to].region(R).expect("region").load(3), 0xabcd);
    }
}

#[test]
fn garbage_on_the_listening_port_is_refused_and_the_node_keeps_serving() {
    let (ls, addrs) = common::listeners(2);
    let config = common::test_config(&addrs);
    let mut nodes = common::start_cluster(&config, ls, &layout());
    let port = nodes[0].local_addr();

    // Random garbage.
    let mut x = 0x1234_5678_9abc_def0u64;
    let garbage: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    send_and_close(port, &garbage);
    // An oversized length field: refused from the header alone, without waiting for the body.
    let s = TcpStream::connect(port).expect("connect");
    (&s).write_all(&[0xff, 0xff, 0xff, 0x7f, 1]).expect("write");
    until_closed(s);
    // A truncated handshake: the header promises more than ever arrives.
    let mut h = Vec::new();
    frame::encode_hello(&mut h, &hello(&config, 1, 0));
    send_and_close(port, &h[..h.len() / 2]);
    // Data frames instead of a handshake: one with a body is cut off at its header, an empty
    // one is refused with a reason.
    let mut f = Vec::new();
    frame::encode_cas(&mut f, 0, 0, 0, 1);
    assert!(send_and_close(port, &f).is_empty());
    f.clear();
    frame::encode_fence(&mut f);
    let r = refusal(&send_and_close(port, &f));
    assert!(r.contains("expected a Hello"), "{r}");
    // Well-formed handshakes that are wrong: another cluster, a wrong identity, a node that is
    // already linked with a larger incarnation than the one it announces.
    let mut wrong = hello(&config, 1, 0);
    wrong.cluster_id ^= 1;
    let mut b = Vec::new();
    frame::encode_hello(&mut b, &wrong);
    let r = refusal(&send_and_close(port, &b));
    assert!(r.contains("cluster id"), "{r}");
    b.clear();
    frame::encode_hello(&mut b, &hello(&config, 1, 5));
    let r = refusal(&send_and_close(port, &b));
    assert!(r.contains("check the addresses"), "{r}");
    b.clear();
    frame::encode_hello(&mut b, &hello(&config, 1, 0));
    let r = refusal(&send_and_close(port, &b));
    assert!(r.contains("already linked"), "{r}");
    // A lower id dialling a higher one it is linked to: taken for a restart of it, and refused
    // because its incarnation is not larger than the linked one's.
    b.clear();
    frame::encode_hello(&mut b, &hello(&config, 0, 1));
    let r = refusal(&send_and_close(nodes[1].local_addr(), &b));
    assert!(r.contains("larger incarnation"), "{r}");

    still_serving(&mut nodes, 0, 1);
    let mut events = [Event::PeerFailed {
        peer: NodeId(9),
        cause: FailureCause::Local,
    }; 4];
    assert_eq!(nodes[0].poll(&mut events), 0, "no failure may be reported");
}

/// A fake node 2 completes real handshakes with nodes 0 and 1, then sends each of them bytes that
/// are not valid frames on the established link. Each fails the fake peer once and keeps its link
/// to the other real node.
#[test]
fn invalid_frames_on_a_link_close_only_that_link() {
    let (mut ls, addrs) = common::listeners(3);
    let config = common::test_config(&addrs);
    drop(ls.pop()); // node 2 is the fake below; it only dials
    let starting: Vec<_> = ls
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let config = config.clone();
            std::thread::spawn(move || {
                let regions = vec![squall_transport::Region::new(layout()[0]).expect("region")];
                TcpNode::start_on(l, config, NodeId(i as u32), regions)
            })
        })
        .collect();
    let mut fakes = Vec::new();
    for to in 0..2u32 {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut s = loop {
            match TcpStream::connect(addrs[to as usize]) {
                Ok(s) => break s,
                Err(e) => {
                    assert!(Instant::now() < deadline, "node {to} never listened: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        };
        let mut b = Vec::new();
        frame::encode_hello(&mut b, &hello(&config, 2, to));
        s.write_all(&b).expect("hello");
        let mut head = [0u8; frame::HEADER_LEN];
        s.read_exact(&mut head).expect("welcome header");
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).expect("welcome body");
        let mut whole = head.to_vec();
        whole.extend_from_slice(&body);
        assert!(matches!(
            frame::decode(&whole, 0),
            Ok(Some((Frame::Welcome(_), _)))
        ));
        fakes.push(s);
    }
    let mut nodes: Vec<TcpNode> = starting
        .into_iter()
        .map(|h| h.join().expect("thread").expect("node starts"))
        .collect();
    let mut fakes = fakes.into_iter();
    // Node 0 gets a valid write and a valid `Writes` batch, then a batch naming a region index
    // it never announced (it has one region), then an unknown frame kind.
    let mut to0 = fakes.next().expect("fake link");
    let mut b = Vec::new();
    frame::encode_write_header(&mut b, R.0, 64, 8, false);
    b.extend_from_slice(&7u64.to_le_bytes());
    let at = frame::open_write_batch(&mut b);
    frame::encode_write_record(&mut b, at, 0, 16, &5u64.to_le_bytes());
    let at = frame::open_write_batch(&mut b);
    frame::encode_write_record(&mut b, at, 1, 24, &6u64.to_le_bytes());
    b.extend_from_slice(&[3, 0, 0, 0, 0xee, 1, 2, 3]);
    to0.write_all(&b).expect("garbage");
    // Node 1 gets a batch whose record lies past the end of its region, then a write past the
    // end, then an oversized length field.
    let mut to1 = fakes.next().expect("fake link");
    b.clear();
    let at = frame::open_write_batch(&mut b);
    frame::encode_write_record(&mut b, at, 0, 4090, &[9u8; 8]);
    frame::encode_write_header(&mut b, R.0, 4090, 8, false);
    b.extend_from_slice(&[9u8; 8]);
    b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 10]);
    to1.write_all(&b).expect("garbage");

    for (i, fake) in [to0, to1].into_iter().enumerate() {
        until_closed(fake);
        let mut failures = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut events = [Event::PeerFailed {
            peer: NodeId(9),
            cause: FailureCause::Local,
        }; 8];
        while failures.is_empty() {
            assert!(
                Instant::now() < deadline,
                "node {i} never reported the fake peer failed"
            );
            let n = nodes[i].poll(&mut events);
            failures.extend(events[..n].iter().copied());
            nodes[i].wait(Duration::from_millis(1));
        }
        assert_eq!(
            failures,
            vec![Event::PeerFailed {
                peer: NodeId(2),
                cause: FailureCause::ConnectionLost
            }]
        );
    }
    // The valid writes before the garbage were applied; the bad ones were not.
    assert_eq!(nodes[0].region(R).expect("region").load(8), 7);
    assert_eq!(nodes[0].region(R).expect("region").load(2), 5);
    assert_eq!(nodes[0].region(R).expect("region").load(3), 0);
    assert!(
        nodes[1]
            .region(R)
            .expect("region")
            .snapshot()
            .iter()
            .all(|&v| v == 0)
    );
    still_serving(&mut nodes, 0, 1);
    // Ops to the cut-off fake peer fail.
    let op = nodes[0].fence(NodeId(2)).expect("posted");
    let mut events = [Event::PeerFailed {
        peer: NodeId(9),
        cause: FailureCause::Local,
    }; 8];
    let n = nodes[0].poll(&mut events);
    assert!(
        events[..n]
            .iter()
            .any(|e| matches!(e, Event::Completion(c) if c.op == op && c.result.is_err()))
    );
}
