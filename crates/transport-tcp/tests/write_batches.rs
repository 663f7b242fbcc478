//! Short unsignaled writes travel as records of `Writes` batches (protocol version 2): these
//! tests check that a stream mixing short and long writes, several regions and signaled writes
//! lands exactly as applied in order, with batches split at the peer's frame limit.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use squall_transport::{
    Event, FailureCause, LocalSlice, NodeId, PostError, RegionId, RegionSpec, RemoteAddr, Signal,
    Transport,
};
use squall_transport_tcp::TcpNode;

/// Two regions whose ids are not their indices, so a receiver that took a record's region index
/// for an id (or the sender the id for the index) writes to the wrong one.
const A: RegionId = RegionId(7);
const B: RegionId = RegionId(3);
const LEN: usize = 4096;

fn layout() -> [RegionSpec; 2] {
    [RegionSpec::new(A, LEN), RegionSpec::new(B, LEN)]
}

/// Polls `node` until op `op` completes; fails on a peer failure or after 20 s.
fn await_op(node: &mut TcpNode, op: squall_transport::OpId) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut events = [Event::PeerFailed {
        peer: NodeId(9),
        cause: FailureCause::Local,
    }; 16];
    loop {
        let n = node.poll(&mut events);
        for e in &events[..n] {
            match e {
                Event::Completion(c) if c.op == op => {
                    assert!(c.result.is_ok(), "{c:?}");
                    return;
                }
                Event::Completion(c) => assert!(c.result.is_ok(), "{c:?}"),
                Event::PeerFailed { .. } => panic!("link failed: {e:?}"),
                _ => {}
            }
        }
        assert!(Instant::now() < deadline, "op {op:?} never completed");
        node.wait(Duration::from_millis(1));
    }
}

#[test]
fn mixed_short_and_long_writes_land_in_order_across_regions_and_split_batches() {
    let (ls, addrs) = common::listeners(2);
    let mut config = common::test_config(&addrs);
    config.op_timeout = Duration::from_secs(10);
    config.heartbeat_timeout = Duration::from_secs(10);
    // A small message limit: the peer accepts frame bodies of LEN + 32 bytes at most, so the
    // 16 KiB staged between flushes must be split into several batches.
    config.max_message_len = 64;
    let mut nodes = common::start_cluster(&config, ls, &layout());
    let peer = NodeId(1);
    // Distinct source bytes everywhere, in both local regions.
    let pattern = |region: RegionId, i: usize| (i * 31 + region.0 as usize * 7 + 1) as u8;
    for id in [A, B] {
        let bytes: Vec<u8> = (0..LEN).map(|i| pattern(id, i)).collect();
        nodes[0].region(id).unwrap().write_bytes(0, &bytes).unwrap();
    }
    let mut model = [vec![0u8; LEN], vec![0u8; LEN]];
    // Short aligned, short unaligned, the longest short, the shortest long, long, one byte.
    let sizes = [8usize, 16, 3, 255, 256, 300, 1, 64];
    // Stretches of short writes only, long enough (about 30 KiB) to need several batches.
    let short = [8usize, 16, 3, 255, 1, 64];
    let mut last = None;
    for i in 0..4000 {
        let len = if (i / 500) % 2 == 0 {
            short[i % short.len()]
        } else {
            sizes[i % sizes.len()]
        };
        let (src_id, dst_id, dst_idx) = if (i / 5) % 2 == 0 {
            (B, A, 0)
        } else {
            (A, B, 1)
        };
        let src = (i * 13) % (LEN - 300);
        // Overlapping destinations: the final bytes depend on the order of application.
        let dst = (i * 40) % (LEN - 300);
        let signal = if i % 701 == 0 {
            Signal::Signaled
        } else {
            Signal::Unsignaled
        };
        let posted = loop {
            match nodes[0].write(
                peer,
                LocalSlice::new(src_id, src, len),
                RemoteAddr::new(dst_id, dst),
                signal,
            ) {
                Err(PostError::QueueFull { .. }) => {
                    nodes[0].poll(&mut []);
                }
                other => break other.expect("write posted"),
            }
        };
        last = Some(posted);
        for k in 0..len {
            model[dst_idx][dst + k] = pattern(src_id, src + k);
        }
        // Posting never blocks on the peer: hand the staged writes over only now and then.
        if i % 1500 == 1499 {
            nodes[0].poll(&mut []);
        }
    }
    assert!(last.is_some());
    let fence = nodes[0].fence(peer).expect("fence");
    await_op(&mut nodes[0], fence);
    assert!(
        nodes[1].region(A).unwrap().snapshot() == model[0],
        "region A differs"
    );
    assert!(
        nodes[1].region(B).unwrap().snapshot() == model[1],
        "region B differs"
    );
}

/// The fast path of short unsignaled writes (no atomic per write, an allowance armed by the
/// general path) still stops at `max_outstanding`: with a window of 16 and nothing handed over
/// in between, writes 1–16 are accepted and the 17th is `QueueFull` (a fast path that ignores
/// its allowance, or does not count its writes, accepts more: checked by breaking each). A
/// driver that parks in `wait` on `QueueFull`, as the benchmark's does, resumes as soon as
/// acknowledgements arrive (whoever reads them, the arrival is queued in the driver's epoll
/// instance), never after its timeout. Everything lands in order.
#[test]
fn the_fast_path_stops_at_max_outstanding_and_a_driver_parked_on_queue_full_wakes_when_the_window_reopens()
 {
    let (ls, addrs) = common::listeners(2);
    let mut config = common::test_config(&addrs);
    config.op_timeout = Duration::from_secs(20);
    config.heartbeat_timeout = Duration::from_secs(20);
    config.max_outstanding = 16;
    let mut nodes = common::start_cluster(&config, ls, &layout());
    let peer = NodeId(1);
    let words = LEN / 8;
    for w in 0..words {
        nodes[0].region(A).unwrap().store(w, w as u64 * 3 + 1);
    }
    let mut model = vec![0u64; words];
    let (mut first_full, mut fulls) = (None, 0);
    for i in 0..3000usize {
        let (src, dst) = ((i * 5) % words, (i * 7) % words);
        loop {
            match nodes[0].write(
                peer,
                LocalSlice::new(A, src * 8, 8),
                RemoteAddr::new(B, dst * 8),
                Signal::Unsignaled,
            ) {
                Err(PostError::QueueFull { .. }) => {
                    first_full.get_or_insert(i);
                    fulls += 1;
                    let parked = Instant::now();
                    nodes[0].wait(Duration::from_secs(10));
                    assert!(
                        parked.elapsed() < Duration::from_secs(5),
                        "a driver parked on QueueFull slept {:?}: not woken when the window reopened",
                        parked.elapsed()
                    );
                }
                other => {
                    other.expect("write posted");
                    break;
                }
            }
        }
        model[dst] = src as u64 * 3 + 1;
    }
    assert_eq!(
        first_full,
        Some(16),
        "the 17th write must find the window full"
    );
    assert!(fulls > 0);
    let fence = nodes[0].fence(peer).expect("fence");
    await_op(&mut nodes[0], fence);
    let landed: Vec<u64> = (0..words)
        .map(|w| nodes[1].region(B).unwrap().load(w))
        .collect();
    assert!(
        landed == model,
        "region B differs from the writes applied in order"
    );
}
