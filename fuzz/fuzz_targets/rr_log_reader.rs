//! Fuzzes the round-robin log's incremental reader against the whole-file decoder: whatever the
//! bytes and the buffer size (the input's first two bytes), `Reader` in `Verify` mode yields
//! the records `decode` finds, stops at the same valid length for the same reason, and never
//! buffers more than its buffer or the longest record it read; in `Skim` mode it finds the same
//! headers wherever no checksum is broken; both read a compacted log's base (`SQRRLOG2`) as
//! `decode` does. Never panics.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use squall_round_robin::log::{
    BASE_BODY, BODY_HEADER, FRAME, MAGIC_COMPACTED, ReadMode, Reader, TailError, decode,
};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let buffer = usize::from(u16::from_le_bytes([data[0], data[1]]));
    let bytes = &data[2..];
    let whole = decode(bytes);
    let read = |mode| {
        let mut r = Reader::new(Cursor::new(bytes), bytes.len() as u64, buffer, mode);
        let mut out = Vec::new();
        while let Some(rec) = r.next_record().expect("a slice never fails to read") {
            out.push(rec);
        }
        assert!(r.next_record().expect("done").is_none());
        assert_eq!(r.base(), whole.base.as_ref());
        (out, r.valid_len(), r.tail().cloned(), r.peak_buffer())
    };
    let (records, valid_len, tail, peak) = read(ReadMode::Verify);
    assert_eq!(records, whole.records);
    assert_eq!(valid_len, whole.valid_len);
    assert_eq!(tail, whole.tail);
    let broken = match whole.tail {
        Some(TailError::Checksum { offset, .. } | TailError::Order { offset, .. }) => {
            FRAME
                + u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
                    as usize
        }
        _ => 0,
    };
    let longest = (records.iter())
        .map(|r| FRAME + BODY_HEADER + r.payload.len())
        .max()
        .unwrap_or(0)
        .max(broken)
        .max(if bytes.starts_with(MAGIC_COMPACTED) { FRAME + BASE_BODY } else { 0 });
    assert!(peak <= buffer.max(FRAME + BODY_HEADER).max(longest));
    if !matches!(whole.tail, Some(TailError::Checksum { .. })) {
        let (skim, skim_len, skim_tail, _) = read(ReadMode::Skim);
        let headers = |rs: &[squall_round_robin::log::Record]| {
            rs.iter()
                .map(|r| (r.view, r.seq, r.position, r.sender))
                .collect::<Vec<_>>()
        };
        assert_eq!(headers(&skim), headers(&whole.records));
        assert_eq!((skim_len, skim_tail), (whole.valid_len, whole.tail));
    }
});
