//! Byte access over arrays of atomic 8-byte words.
//!
//! Region memory is shared with remote writers, so local code never sees it as `&[u8]`. These
//! routines copy bytes in and out of a word array with the contract's guarantees: every aligned
//! 8-byte word is read and written whole (never torn), stores release and loads acquire, and a
//! partial word is merged with a compare-and-swap loop so that two writers of different bytes in
//! one word never lose each other's update. They are generic over [`AtomicWord`] so that the loom
//! tests check exactly the code that the fabrics run.

use std::sync::atomic::{AtomicU64, Ordering};

/// An atomic 8-byte word: [`AtomicU64`] in production, a loom model in tests.
///
/// ```
/// use squall_transport::word::AtomicWord;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let w = AtomicU64::new(1);
/// assert_eq!(AtomicWord::fetch_add(&w, 2, Ordering::AcqRel), 1);
/// assert_eq!(AtomicWord::load(&w, Ordering::Acquire), 3);
/// ```
pub trait AtomicWord {
    /// Loads the word.
    fn load(&self, order: Ordering) -> u64;
    /// Stores the word.
    fn store(&self, value: u64, order: Ordering);
    /// Compare-and-swap; `Ok(old)` on success, `Err(actual)` on failure.
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64>;
    /// Adds (wrapping) and returns the previous value.
    fn fetch_add(&self, delta: u64, order: Ordering) -> u64;
    /// What a spin loop does while waiting on this word.
    fn spin() {
        std::hint::spin_loop();
    }
}

impl AtomicWord for AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    fn store(&self, value: u64, order: Ordering) {
        AtomicU64::store(self, value, order)
    }
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        AtomicU64::compare_exchange(self, current, new, success, failure)
    }
    fn fetch_add(&self, delta: u64, order: Ordering) -> u64 {
        AtomicU64::fetch_add(self, delta, order)
    }
}

/// Copies `dst.len()` bytes starting at byte `offset` of `words` into `dst` (little-endian).
///
/// Each word is loaded once with acquire ordering. The caller checks bounds: `offset + dst.len()`
/// must not exceed `8 * words.len()`, or this panics.
///
/// ```
/// use squall_transport::word::{copy_in, copy_out};
/// use std::sync::atomic::AtomicU64;
/// let words: Vec<AtomicU64> = (0..2).map(|_| AtomicU64::new(0)).collect();
/// copy_in(&words, 3, b"hello");
/// let mut out = [0u8; 5];
/// copy_out(&words, 3, &mut out);
/// assert_eq!(&out, b"hello");
/// ```
pub fn copy_out<A: AtomicWord>(words: &[A], offset: usize, dst: &mut [u8]) {
    let mut pos = 0;
    while pos < dst.len() {
        let at = offset + pos;
        let (w, skip) = (at / 8, at % 8);
        let take = (8 - skip).min(dst.len() - pos);
        let bytes = words[w].load(Ordering::Acquire).to_le_bytes();
        dst[pos..pos + take].copy_from_slice(&bytes[skip..skip + take]);
        pos += take;
    }
}

/// Copies `src` into `words` starting at byte `offset` (little-endian).
///
/// Whole words are stored with release ordering; partial words at either end are merged with a
/// compare-and-swap loop so concurrent writers of other bytes of the same word are preserved.
/// Words are written in ascending order. The caller checks bounds, or this panics.
///
/// ```
/// use squall_transport::word::{copy_in, AtomicWord};
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let words = [AtomicU64::new(u64::MAX)];
/// copy_in(&words, 0, &[0, 0]);
/// assert_eq!(AtomicWord::load(&words[0], Ordering::Acquire), u64::MAX << 16);
/// ```
pub fn copy_in<A: AtomicWord>(words: &[A], offset: usize, src: &[u8]) {
    let mut pos = 0;
    while pos < src.len() {
        let at = offset + pos;
        let (w, skip) = (at / 8, at % 8);
        let take = (8 - skip).min(src.len() - pos);
        if take == 8 {
            let mut b = [0u8; 8];
            b.copy_from_slice(&src[pos..pos + 8]);
            words[w].store(u64::from_le_bytes(b), Ordering::Release);
        } else {
            merge_bytes(&words[w], skip, &src[pos..pos + take]);
        }
        pos += take;
    }
}

/// Overwrites bytes `skip..skip + part.len()` of one word, leaving its other bytes as they are.
fn merge_bytes<A: AtomicWord>(word: &A, skip: usize, part: &[u8]) {
    let mut current = word.load(Ordering::Acquire);
    loop {
        let mut bytes = current.to_le_bytes();
        bytes[skip..skip + part.len()].copy_from_slice(part);
        let new = u64::from_le_bytes(bytes);
        match word.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(actual) => {
                current = actual;
                A::spin();
            }
        }
    }
}

/// Copies `len` bytes between two word arrays without an intermediate buffer when both sides
/// are word-aligned, word by word, in ascending order; otherwise through a small stack buffer.
///
/// ```
/// use squall_transport::word::{copy_between, copy_in, copy_out};
/// use std::sync::atomic::AtomicU64;
/// let a: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
/// let b: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
/// copy_in(&a, 0, &[9u8; 20]);
/// copy_between(&a, 0, &b, 5, 20);
/// let mut out = [0u8; 20];
/// copy_out(&b, 5, &mut out);
/// assert_eq!(out, [9u8; 20]);
/// ```
pub fn copy_between<A: AtomicWord, B: AtomicWord>(
    src: &[A],
    src_offset: usize,
    dst: &[B],
    dst_offset: usize,
    len: usize,
) {
    if src_offset % 8 == 0 && dst_offset % 8 == 0 && len % 8 == 0 {
        let (s, d) = (src_offset / 8, dst_offset / 8);
        for i in 0..len / 8 {
            dst[d + i].store(src[s + i].load(Ordering::Acquire), Ordering::Release);
        }
        return;
    }
    let mut buf = [0u8; 256];
    let mut pos = 0;
    while pos < len {
        let take = buf.len().min(len - pos);
        copy_out(src, src_offset + pos, &mut buf[..take]);
        copy_in(dst, dst_offset + pos, &buf[..take]);
        pos += take;
    }
}
