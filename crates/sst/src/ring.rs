//! The ring-buffer protocol core of SMC, generic over [`AtomicWord`] so that the loom test checks
//! exactly the code the table runs.
//!
//! A ring is `slots` slots of `1 + payload / 8` words: a header word (the message's tag and
//! length) followed by the payload. The protocol, for one sender and its receivers:
//!
//! 1. the writer claims message `i`'s slot only when every receiver has acknowledged message
//!    `i - slots` ([`Ring::has_room`]), writes it ([`Ring::put`]) into its own row,
//! 2. copies the written slots to each receiver (one write), and only then, in a *separate,
//!    later* write, the guard counter (Derecho #47: nothing larger than a word is atomic, so a
//!    guard in the same write as its data may land before it);
//! 3. a receiver that sees the guard at `g` reads every message below `g` ([`Ring::get`], which
//!    checks the header's tag, so a slot overwritten too early is detected, never delivered) and
//!    then writes its acknowledgement counter.

use std::sync::atomic::Ordering;

use squall_transport::NodeId;
use squall_transport::word::{AtomicWord, copy_in, copy_out};

use crate::error::SmcError;

/// The geometry of one sender's ring.
///
/// ```
/// use squall_sst::ring::Ring;
/// use std::sync::atomic::AtomicU64;
/// let ring = Ring::new(2, 16).unwrap();
/// let words: Vec<AtomicU64> = (0..ring.words()).map(|_| AtomicU64::new(0)).collect();
/// ring.put(&words, 0, b"hello").unwrap();
/// let mut out = Vec::new();
/// ring.get(&words, 0, squall_transport::NodeId(0), &mut out).unwrap();
/// assert_eq!(out, b"hello");
/// assert!(ring.get(&words, 2, squall_transport::NodeId(0), &mut out).is_err()); // wrong tag
/// assert!(ring.put(&words, 1, &[0; 17]).is_err()); // too large, never truncated
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    slots: usize,
    /// The configured largest message.
    max: usize,
    /// Payload bytes per slot: `max` rounded up to whole words.
    payload: usize,
}

impl Ring {
    /// A ring of `slots` slots, each holding up to `max_payload` bytes (rounded up to whole
    /// words).
    pub fn new(slots: usize, max_payload: usize) -> Result<Ring, SmcError> {
        if slots == 0 {
            return Err(SmcError::Config("the window needs at least one slot"));
        }
        if max_payload == 0 || max_payload > u32::MAX as usize {
            return Err(SmcError::Config(
                "slot_size must be between 1 byte and 4 GiB",
            ));
        }
        Ok(Ring {
            slots,
            max: max_payload,
            payload: max_payload.div_ceil(8) * 8,
        })
    }

    /// Number of slots (the flow-control window).
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The largest message accepted (as configured; the slot itself is rounded up to words).
    pub fn max_payload(&self) -> usize {
        self.max
    }

    /// Words per slot, header included.
    pub fn stride(&self) -> usize {
        1 + self.payload / 8
    }

    /// Words in the whole ring.
    pub fn words(&self) -> usize {
        self.slots * self.stride()
    }

    fn base(&self, index: u64) -> usize {
        (index % self.slots as u64) as usize * self.stride()
    }

    fn header(index: u64, len: usize) -> u64 {
        (u64::from((index as u32).wrapping_add(1)) << 32) | len as u64
    }

    /// Whether message `next` may be written, given that every receiver has acknowledged
    /// (received) the first `acked` messages.
    pub fn has_room(&self, next: u64, acked: u64) -> bool {
        next.saturating_sub(acked) < self.slots as u64
    }

    /// Writes message `index` into its slot of `ring`: payload first, then the header.
    pub fn put<A: AtomicWord>(
        &self,
        ring: &[A],
        index: u64,
        payload: &[u8],
    ) -> Result<(), SmcError> {
        if payload.len() > self.max {
            return Err(SmcError::TooLarge {
                len: payload.len(),
                max: self.max,
            });
        }
        let base = self.base(index);
        copy_in(ring, (base + 1) * 8, payload);
        ring[base].store(Self::header(index, payload.len()), Ordering::Release);
        Ok(())
    }

    /// Reads message `index` from its slot into `out`, checking that the slot holds that message.
    pub fn get<A: AtomicWord>(
        &self,
        ring: &[A],
        index: u64,
        sender: NodeId,
        out: &mut Vec<u8>,
    ) -> Result<(), SmcError> {
        let base = self.base(index);
        let header = ring[base].load(Ordering::Acquire);
        let len = (header & 0xffff_ffff) as usize;
        if header >> 32 != u64::from((index as u32).wrapping_add(1)) || len > self.max {
            return Err(SmcError::Corrupt {
                sender,
                index,
                header,
            });
        }
        out.resize(len, 0);
        copy_out(ring, (base + 1) * 8, out);
        Ok(())
    }

    /// The word ranges `(start, len)` of the ring that hold messages `from..to`, as at most two
    /// contiguous runs (split where the ring wraps). The last message's run ends after its
    /// payload (`last_len` bytes), not at the end of its slot.
    pub fn spans(&self, from: u64, to: u64, last_len: usize) -> [Option<(usize, usize)>; 2] {
        if to <= from {
            return [None, None];
        }
        let count = (to - from).min(self.slots as u64) as usize;
        let first = (from % self.slots as u64) as usize;
        let tail = 1 + last_len.div_ceil(8); // words used in the last slot
        let stride = self.stride();
        if first + count <= self.slots {
            let len = (count - 1) * stride + tail;
            [Some((first * stride, len)), None]
        } else {
            let a = self.slots - first;
            let b = count - a;
            [
                Some((first * stride, a * stride)),
                Some((0, (b - 1) * stride + tail)),
            ]
        }
    }

    /// The payload length recorded in the header of message `index`'s slot.
    pub fn len_at<A: AtomicWord>(&self, ring: &[A], index: u64) -> usize {
        (ring[self.base(index)].load(Ordering::Acquire) & 0xffff_ffff) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_split_at_the_wrap_and_trim_the_last_slot() {
        let r = Ring::new(4, 16).expect("valid");
        assert_eq!(r.stride(), 3);
        assert_eq!(r.spans(0, 1, 5), [Some((0, 2)), None]);
        assert_eq!(r.spans(1, 3, 16), [Some((3, 6)), None]);
        assert_eq!(r.spans(3, 5, 8), [Some((9, 3)), Some((0, 2))]);
        assert_eq!(r.spans(2, 2, 8), [None, None]);
    }

    #[test]
    fn the_configured_size_is_the_limit_not_the_rounded_slot() {
        let r = Ring::new(1, 12).expect("valid");
        assert_eq!(r.stride(), 3);
        let words: Vec<std::sync::atomic::AtomicU64> = (0..r.words())
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect();
        assert!(r.put(&words, 0, &[1; 12]).is_ok());
        assert_eq!(
            r.put(&words, 0, &[1; 13]),
            Err(SmcError::TooLarge { len: 13, max: 12 })
        );
    }

    #[test]
    fn room_is_the_window() {
        let r = Ring::new(2, 8).expect("valid");
        assert!(r.has_room(0, 0));
        assert!(r.has_room(1, 0));
        assert!(!r.has_room(2, 0));
        assert!(r.has_room(2, 1));
    }
}
