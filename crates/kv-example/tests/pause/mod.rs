//! The store and log entries shared by the pause benchmarks (`install_pause.rs`,
//! `serve_pause.rs`): a `KvMachine` of about `mb` megabytes (keys of 19 bytes, values of 80)
//! and `ENTRIES` commands of 4 clients, each a batch of `PUTS` overwrites.
#![allow(dead_code, unreachable_pub)]

use squall_kv::{KvMachine, KvOp};
use squall_ordering::{Delivery, Upcall, View};
use squall_smr::StateMachine;
use squall_smr::wire::Entry;
use squall_transport::NodeId;

/// Log entries a benchmark's backend hands out.
pub const ENTRIES: usize = 10_000;
/// Overwrites per entry.
pub const PUTS: usize = 50;
/// Entries the backend hands out per poll.
pub const PER_POLL: usize = 4;

/// A put of `key` (hashed into a 19-byte key) with a value of `value_len` bytes of `tag`.
pub fn put(key: u64, value_len: usize, tag: u8) -> KvOp {
    KvOp::Put {
        key: format!("key{:016x}", key.wrapping_mul(0x9E37_79B9_7F4A_7C15)).into_bytes(),
        value: vec![tag; value_len],
    }
}

/// A store of about `mb` megabytes.
pub fn store(mb: usize) -> KvMachine {
    let keys = (mb << 20) / 100;
    let mut m = KvMachine::default();
    for chunk in (0..keys as u64).collect::<Vec<_>>().chunks(1000) {
        let batch = KvOp::Batch(chunk.iter().map(|&k| put(k, 80, b'v')).collect());
        m.apply(&batch.encode());
    }
    m
}

/// `ENTRIES` commands of 4 clients, each `PUTS` puts: the `n`-th put of the log writes key
/// `key_of(n)` with a value of `value_len` bytes.
pub fn entries(key_of: impl Fn(usize) -> u64, value_len: usize) -> Vec<Vec<u8>> {
    (0..ENTRIES)
        .map(|i| {
            let ops = (0..PUTS)
                .map(|j| put(key_of(i * PUTS + j), value_len, b'w'))
                .collect();
            let seq = (i / 4 + 1) as u64;
            Entry::Command {
                client: 1 + (i % 4) as u64,
                seq,
                acked: seq - 1,
                payload: &KvOp::Batch(ops).encode(),
            }
            .encode()
        })
        .collect()
}

/// One poll of a benchmark's backend: view 1 of members 0 and 1 (led by `leader`) on the
/// first call (`view_sent`), then the next `PER_POLL` of `entries` from `*next`, sent by
/// member 1. Whether entries are left.
pub fn hand_out(
    view_sent: &mut bool,
    leader: NodeId,
    entries: &[Vec<u8>],
    next: &mut usize,
    out: &mut Vec<Upcall<Delivery>>,
) -> bool {
    if !*view_sent {
        *view_sent = true;
        out.push(Upcall::View(View {
            id: 1,
            members: vec![NodeId(0), NodeId(1)],
            leader: Some(leader),
        }));
    }
    let end = (*next + PER_POLL).min(entries.len());
    for (i, payload) in entries[*next..end].iter().enumerate() {
        out.push(Upcall::Deliver(Delivery {
            position: (*next + i) as u64,
            sender: NodeId(1),
            payload: payload.clone(),
        }));
    }
    *next = end;
    *next < entries.len()
}
