//! What the persistent map (`imbl::OrdMap`, s20) costs on the ordinary apply path, against the
//! `BTreeMap` `KvMachine` used before, in the same run: `SQUALL_KV_APPLY_BENCH=<keys>` (default:
//! skipped) applies `<keys>` puts of fresh keys, then as many overwrites, in entries of 50 puts
//! (as `restart.rs`'s load does), decoded and applied as the replica does (`StateMachine::apply`).
//! Three variants, alternating, three rounds: the `BTreeMap` (a copy of the old `KvMachine`'s
//! put path), `KvMachine`, and `KvMachine` with a checkpoint capture taken every 1000 entries
//! and held for the next 250 (the writer encoding it meanwhile: the writes copy the nodes they
//! touch).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use squall_kv::{KvMachine, KvOp, KvResult};
use squall_smr::StateMachine;

/// The old `KvMachine`'s apply for puts and batches of puts.
#[derive(Default)]
struct Old(BTreeMap<Vec<u8>, Vec<u8>>);

impl Old {
    fn run(&mut self, op: &KvOp) -> KvResult {
        match op {
            KvOp::Put { key, value } => {
                self.0.insert(key.clone(), value.clone());
                KvResult::Done
            }
            KvOp::Batch(ops) => KvResult::Batch(ops.iter().map(|o| self.run(o)).collect()),
            other => panic!("not in this bench: {other:?}"),
        }
    }

    fn apply(&mut self, command: &[u8]) -> Vec<u8> {
        self.run(&KvOp::decode(command).unwrap()).encode()
    }
}

fn entries(keys: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for pass in 0..2u32 {
        for chunk in (0..keys).collect::<Vec<_>>().chunks(50) {
            let ops = chunk
                .iter()
                .map(|&k| KvOp::Put {
                    // Spread over the key space, as a hash-keyed load does.
                    key: format!("key{:016x}", (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
                        .into_bytes(),
                    value: format!("value {k} pass {pass}").into_bytes(),
                })
                .collect();
            out.push(KvOp::Batch(ops).encode());
        }
    }
    out
}

#[test]
fn apply_cost() {
    let Some(keys) = std::env::var("SQUALL_KV_APPLY_BENCH")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        eprintln!("skipped: set SQUALL_KV_APPLY_BENCH=<keys> to measure");
        return;
    };
    let entries = entries(keys);
    let puts = (2 * keys) as f64;
    let mut best = [Duration::MAX; 3];
    for round in 0..3 {
        let t = Instant::now();
        let mut old = Old::default();
        for e in &entries {
            std::hint::black_box(old.apply(e));
        }
        let old_t = t.elapsed();
        drop(old);
        let t = Instant::now();
        let mut new = KvMachine::default();
        for e in &entries {
            std::hint::black_box(new.apply(e));
        }
        let new_t = t.elapsed();
        drop(new);
        let t = Instant::now();
        let mut cap = KvMachine::default();
        let mut held = None;
        for (i, e) in entries.iter().enumerate() {
            match i % 1000 {
                0 => held = cap.snapshot_encoder(),
                250 => drop(held.take()),
                _ => {}
            }
            std::hint::black_box(cap.apply(e));
        }
        drop(held);
        let cap_t = t.elapsed();
        eprintln!(
            "round {round}: {keys} keys, {puts} puts in {} entries: BTreeMap {:.0} puts/s, imbl {:.0} puts/s, imbl with captures {:.0} puts/s; imbl / BTreeMap time {:.2}, with captures {:.2}",
            entries.len(),
            puts / old_t.as_secs_f64(),
            puts / new_t.as_secs_f64(),
            puts / cap_t.as_secs_f64(),
            new_t.as_secs_f64() / old_t.as_secs_f64(),
            cap_t.as_secs_f64() / old_t.as_secs_f64(),
        );
        for (b, t) in best.iter_mut().zip([old_t, new_t, cap_t]) {
            *b = (*b).min(t);
        }
    }
    eprintln!(
        "best of 3: imbl / BTreeMap apply time {:.2}, with captures {:.2}",
        best[1].as_secs_f64() / best[0].as_secs_f64(),
        best[2].as_secs_f64() / best[0].as_secs_f64()
    );
    // A restart's or joiner's install: restoring the whole store from its snapshot (the old
    // machine collected the decoded pairs into a `BTreeMap`).
    let mut m = KvMachine::default();
    for e in &entries {
        m.apply(e);
    }
    let snapshot = m.snapshot();
    drop(m);
    for round in 0..3 {
        let t = Instant::now();
        let Ok(KvResult::Pairs(pairs)) = KvResult::decode(&snapshot) else {
            panic!("a snapshot is pairs");
        };
        let old: BTreeMap<Vec<u8>, Vec<u8>> = pairs.into_iter().collect();
        let old_t = t.elapsed();
        drop(old);
        let t = Instant::now();
        let mut new = KvMachine::default();
        new.restore(&snapshot).unwrap();
        let new_t = t.elapsed();
        eprintln!(
            "restore round {round}: {} bytes: BTreeMap {old_t:?}, imbl {new_t:?} ({:.2})",
            snapshot.len(),
            new_t.as_secs_f64() / old_t.as_secs_f64()
        );
    }
}
