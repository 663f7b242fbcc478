//! Loom model checks of the synchronisation the in-process fabrics rely on, run on the very code
//! the fabrics execute (it is generic over `AtomicWord`; here the word is loom's model).
//!
//! - the link gate: once `close` returns, no op from that link is applied, ever;
//! - a gate closed and reopened for a node's new life (a restart: the life bumped first): no op
//!   of the old life is applied once `close` returns, though the gate opens again;
//! - partial-word writes by two writers to different bytes of one word lose neither update;
//! - the guard protocol: data written before a guard (release) is seen by a reader that acquires
//!   the guard — the ordering every SST push and SMC slot depends on;
//! - aligned words are never torn.

use std::sync::atomic::Ordering;

use loom::sync::Arc;
use loom::sync::atomic::AtomicU64;
use squall_transport::word::{AtomicWord, copy_in, copy_out};
use squall_transport_mem::gate::{Entry, Gate};

struct LoomWord(AtomicU64);

impl LoomWord {
    fn new(v: u64) -> LoomWord {
        LoomWord(AtomicU64::new(v))
    }
}

impl AtomicWord for LoomWord {
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

#[test]
fn nothing_applies_after_a_gate_closes() {
    loom::model(|| {
        let gate = Arc::new(Gate::with_word(LoomWord::new(0)));
        let memory = Arc::new(LoomWord::new(0));
        let poster = {
            let (gate, memory) = (gate.clone(), memory.clone());
            loom::thread::spawn(move || {
                for v in 1..=2 {
                    if gate.enter() == Entry::Open {
                        memory.store(v, Ordering::Relaxed);
                        gate.leave();
                    }
                }
            })
        };
        gate.close();
        let at_close = memory.load(Ordering::Relaxed);
        poster.join().expect("poster");
        assert_eq!(
            memory.load(Ordering::Relaxed),
            at_close,
            "an op applied after close returned"
        );
        assert_eq!(gate.enter(), Entry::Closed);
    });
}

#[test]
fn a_reopened_gate_admits_no_op_of_the_life_before() {
    loom::model(|| {
        let gate = Arc::new(Gate::with_word(LoomWord::new(0)));
        let life = Arc::new(LoomWord::new(0));
        let memory = Arc::new(LoomWord::new(0));
        let poster = {
            let (gate, life, memory) = (gate.clone(), life.clone(), memory.clone());
            loom::thread::spawn(move || {
                // An endpoint of life 0, checking its life inside the gate as `post` does.
                for v in 1..=2 {
                    if gate.enter() == Entry::Open {
                        if life.load(Ordering::Acquire) == 0 {
                            memory.store(v, Ordering::Relaxed);
                        }
                        gate.leave();
                    }
                }
            })
        };
        // The restart, as `Faults::restart_node` orders it: the new life first, then the link
        // closed (waiting out a poster inside) and opened again.
        life.store(1, Ordering::Release);
        gate.close();
        let at_close = memory.load(Ordering::Relaxed);
        gate.reopen();
        poster.join().expect("poster");
        assert_eq!(
            memory.load(Ordering::Relaxed),
            at_close,
            "an op of the old life applied after the restart closed the gate"
        );
        assert_eq!(gate.enter(), Entry::Open, "the new life's posters enter");
        gate.leave();
    });
}

#[test]
fn held_gate_queues_and_release_reopens() {
    loom::model(|| {
        let gate = Arc::new(Gate::with_word(LoomWord::new(0)));
        let memory = Arc::new(LoomWord::new(0));
        let poster = {
            let (gate, memory) = (gate.clone(), memory.clone());
            loom::thread::spawn(move || match gate.enter() {
                Entry::Open => {
                    memory.store(1, Ordering::Relaxed);
                    gate.leave();
                    true
                }
                Entry::Held => false,
                Entry::Closed => unreachable!("never closed"),
            })
        };
        gate.hold();
        let at_hold = memory.load(Ordering::Relaxed);
        let applied = poster.join().expect("poster");
        assert_eq!(
            memory.load(Ordering::Relaxed),
            at_hold,
            "an op applied through a held gate"
        );
        assert_eq!(applied, at_hold == 1);
        gate.release();
        assert_eq!(gate.enter(), Entry::Open);
        gate.leave();
    });
}

#[test]
fn partial_word_writers_keep_each_others_bytes() {
    loom::model(|| {
        let words = Arc::new([LoomWord::new(0)]);
        let other = {
            let words = words.clone();
            loom::thread::spawn(move || copy_in(&*words, 0, &[0xaa, 0xaa]))
        };
        copy_in(&*words, 4, &[0xbb, 0xbb]);
        other.join().expect("writer");
        let mut out = [0u8; 8];
        copy_out(&*words, 0, &mut out);
        assert_eq!(out, [0xaa, 0xaa, 0, 0, 0xbb, 0xbb, 0, 0]);
    });
}

#[test]
fn data_before_guard_is_visible_after_guard() {
    loom::model(|| {
        let words = Arc::new([LoomWord::new(0), LoomWord::new(0), LoomWord::new(0)]);
        let writer = {
            let words = words.clone();
            loom::thread::spawn(move || {
                copy_in(&words[..2], 0, &[7u8; 16]); // the data
                copy_in(&words[2..], 0, &1u64.to_le_bytes()); // then the guard, in a later write
            })
        };
        let mut guard = [0u8; 8];
        copy_out(&words[2..], 0, &mut guard);
        if u64::from_le_bytes(guard) == 1 {
            let mut data = [0u8; 16];
            copy_out(&words[..2], 0, &mut data);
            assert_eq!(data, [7u8; 16], "saw the guard but not the data it guards");
        }
        writer.join().expect("writer");
    });
}

#[test]
fn aligned_words_are_never_torn() {
    loom::model(|| {
        let words = Arc::new([LoomWord::new(0)]);
        let writer = {
            let words = words.clone();
            loom::thread::spawn(move || copy_in(&*words, 0, &u64::MAX.to_le_bytes()))
        };
        let mut out = [0u8; 8];
        copy_out(&*words, 0, &mut out);
        let v = u64::from_le_bytes(out);
        assert!(v == 0 || v == u64::MAX, "torn word {v:#x}");
        writer.join().expect("writer");
    });
}
