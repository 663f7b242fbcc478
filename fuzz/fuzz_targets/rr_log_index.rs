//! Fuzzes the round-robin log's side index and the skim that starts from it.
//!
//! Input: `[buffer: u16][every: u16][cut: u8][truncate at: u16][flip at: u16][flip: u8]
//! [index bytes length: u16][index bytes][log bytes]` (little endian). Two checks:
//!
//! - the raw index bytes: `decode_index` and `scan` with whatever entries they hold never
//!   panic, and `scan` either reads from the start or from an entry of the index;
//! - an honest index of the log bytes' valid prefix (`rebuild_index`: an entry every `every`
//!   bytes, as `Log` writes it), the log then truncated and one byte flipped: the skim from the index either
//!   falls back to the start (and is the whole-file skim) or agrees with the whole-file skim on
//!   the length kept, the reason, the cut and the last record wherever the bytes before where
//!   it started are intact; where they are not, the whole-file decoder finds the damage there
//!   or before.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use squall_round_robin::log::{
    INDEX_MAGIC, IndexEntry, Scan, TailError, decode, decode_index, rebuild_index, scan,
};

fn scan_of(bytes: &[u8], index: &[IndexEntry], seq: u64, buffer: usize) -> Scan {
    scan(
        &mut Cursor::new(bytes),
        bytes.len() as u64,
        index,
        seq,
        None,
        buffer,
    )
    .expect("a slice never fails to read")
}

fn tail_offset(t: &TailError) -> usize {
    match t {
        TailError::BadMagic | TailError::Base { .. } => 0,
        TailError::Torn { offset, .. }
        | TailError::Checksum { offset, .. }
        | TailError::Length { offset, .. }
        | TailError::Order { offset, .. } => *offset,
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 14 {
        return;
    }
    let u16_at = |i: usize| u16::from_le_bytes([data[i], data[i + 1]]);
    let buffer = usize::from(u16_at(0));
    let every = u64::from(u16_at(2)).max(1);
    let seq = match data[4] {
        255 => u64::MAX,
        c => u64::from(c),
    };
    let (truncate, flip_at, flip) = (usize::from(u16_at(5)), usize::from(u16_at(7)), data[9]);
    let split = usize::from(u16_at(10)).min(data.len() - 12);
    let (raw_index, log) = data[12..].split_at(split);

    // Raw index bytes: no panic; a start is an entry's offset.
    let raw = decode_index(raw_index);
    let s = scan_of(log, &raw, seq, buffer);
    assert!(s.skimmed.started_at == 0 || raw.iter().any(|e| e.offset == s.skimmed.started_at));
    assert!(s.index_keep <= raw.len());

    // An honest index of the valid prefix.
    let idx = rebuild_index(Cursor::new(log), every).expect("a slice never fails to read");
    let index = decode_index(&idx);
    assert_eq!(
        index.len(),
        (idx.len() - INDEX_MAGIC.len()) / 64,
        "an honest index decodes whole"
    );
    let mut bytes = log.to_vec();
    bytes.truncate(truncate);
    if flip != 0 && !bytes.is_empty() {
        let i = flip_at % bytes.len();
        bytes[i] ^= flip;
    }
    let full = scan_of(&bytes, &[], seq, buffer);
    let fast = scan_of(&bytes, &index, seq, buffer);
    assert_eq!(full.skimmed.started_at, 0);
    let start = fast.skimmed.started_at as usize;
    let outcome = |s: &Scan| (s.keep, s.tail.clone(), s.cut, s.skimmed.last.clone());
    if start == 0 {
        let mut fell_back = fast.clone();
        (fell_back.index_keep, fell_back.skimmed.peak_buffer) = (0, full.skimmed.peak_buffer);
        assert_eq!(fell_back, full);
    } else {
        assert!(index.iter().any(|e| e.offset as usize == start));
        if outcome(&fast) != outcome(&full) {
            assert!(
                bytes[..start] != log[..start],
                "intact before {start}, yet they differ"
            );
            let d = decode(&bytes);
            assert!(d.tail.as_ref().is_some_and(|t| tail_offset(t) <= start));
        }
    }
});
