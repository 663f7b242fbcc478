//! loom checks of SMC's ring-buffer protocol, with the exact code the table runs
//! ([`Ring::put`], [`Ring::get`], [`Ring::has_room`]) and the threaded fabric's write primitive
//! ([`copy_between`], which applies every one-sided write there):
//!
//! the writer waits for room (every receiver acknowledged the slot's previous message), writes
//! the message into its own row, copies the slot to the receiver's copy (the data write), and
//! only then stores the guard there (a separate, later write). The reader acquires the guard,
//! reads every message below it (the ring checks each slot's tag), then stores its
//! acknowledgement, which is the writer's signal to reuse the slot.

use std::sync::atomic::Ordering;

use loom::sync::Arc;
use loom::sync::atomic::AtomicU64;
use squall_sst::ring::Ring;
use squall_transport::NodeId;
use squall_transport::word::{AtomicWord, copy_between};

/// A loom atomic word, so the protocol core runs unchanged under the model checker.
struct W(AtomicU64);

impl AtomicWord for W {
    fn load(&self, order: Ordering) -> u64 {
        self.0.load(order)
    }
    fn store(&self, value: u64, order: Ordering) {
        self.0.store(value, order)
    }
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        self.0.compare_exchange(current, new, success, failure)
    }
    fn fetch_add(&self, delta: u64, order: Ordering) -> u64 {
        self.0.fetch_add(delta, order)
    }
    fn spin() {
        loom::thread::yield_now();
    }
}

fn words(n: usize) -> Arc<Vec<W>> {
    Arc::new((0..n).map(|_| W(AtomicU64::new(0))).collect())
}

fn payload(i: u64) -> [u8; 8] {
    [i as u8 + 1; 8]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Bug {
    None,
    /// The guard travels before the data (as if in the same write, landing in any order).
    GuardFirst,
    /// The writer reuses a slot without waiting for the acknowledgement.
    NoAck,
}

/// One sender, one receiver, `messages` messages through a ring of `slots` slots.
fn protocol(slots: usize, messages: u64, bug: Bug) {
    let ring = Ring::new(slots, 8).expect("valid ring");
    let own = words(ring.words()); // the writer's row
    let copy = words(ring.words() + 1); // the receiver's copy of it; the last word is the guard
    let ack = Arc::new(W(AtomicU64::new(0))); // the writer's copy of the receiver's ack
    let writer = {
        let (own, copy, ack) = (own.clone(), copy.clone(), ack.clone());
        loom::thread::spawn(move || {
            let guard = &copy[ring.words()];
            for i in 0..messages {
                while bug != Bug::NoAck && !ring.has_room(i, ack.load(Ordering::Acquire)) {
                    W::spin();
                }
                ring.put(&own[..], i, &payload(i)).expect("fits");
                let stride = ring.stride();
                let at = (i as usize % slots) * stride;
                if bug == Bug::GuardFirst {
                    guard.store(i + 1, Ordering::Release);
                }
                // The data write: the slot, word by word, as the threaded fabric applies it.
                copy_between(&own[..], at * 8, &copy[..], at * 8, stride * 8);
                if bug != Bug::GuardFirst {
                    guard.store(i + 1, Ordering::Release);
                }
            }
        })
    };
    let mut next = 0u64;
    let mut out = Vec::new();
    let guard = &copy[ring.words()];
    while next < messages {
        let g = guard.load(Ordering::Acquire);
        if g == next {
            W::spin();
            continue;
        }
        for i in next..g {
            ring.get(&copy[..ring.words()], i, NodeId(0), &mut out)
                .expect("slot holds the message the guard published");
            assert_eq!(out, payload(i), "message {i} read torn or overwritten");
        }
        next = g;
        ack.store(next, Ordering::Release);
    }
    writer.join().expect("writer");
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

#[test]
fn ring_protocol_delivers_in_order_with_slot_reuse() {
    model(|| protocol(1, 3, Bug::None));
}

#[test]
fn ring_protocol_two_slots() {
    model(|| protocol(2, 3, Bug::None));
}

#[test]
#[should_panic(expected = "read torn or overwritten")]
fn loom_catches_a_guard_written_before_its_data() {
    model(|| protocol(2, 2, Bug::GuardFirst));
}

#[test]
#[should_panic(expected = "read torn or overwritten")]
fn loom_catches_slot_reuse_before_the_ack() {
    model(|| protocol(1, 2, Bug::NoAck));
}
