//! State-transfer chunks as a joiner reads them from its receive slot: `decode_chunk` and
//! `ChunkHeader::decode` must return errors, never panic, and anything accepted must be
//! consistent with the bounds it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_membership::transfer::{ChunkHeader, decode_chunk};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = ChunkHeader::decode(data) {
        assert!(h.offset + h.len <= h.total_len);
        assert_eq!(ChunkHeader::decode(&h.encode()), Ok(h));
    }
    let chunk_size = 1 + usize::from(data.first().copied().unwrap_or(0)) * 8;
    if let Ok((h, d)) = decode_chunk(data, chunk_size, 1 << 20) {
        assert_eq!(d.len() as u64, h.len);
        assert!(h.len <= chunk_size as u64 && h.total_len <= 1 << 20);
    }
});
