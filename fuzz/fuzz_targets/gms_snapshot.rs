//! Fuzzes the decoder of a persisted transferred state (`squall_membership::snapshot`): whatever
//! the bytes, it never panics, refuses a state above the bound, and what it accepts re-encodes
//! to exactly the same bytes (so every field and both checksums were checked).
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_membership::snapshot::{decode, encode};

fuzz_target!(|data: &[u8]| {
    let max = 1 << 16;
    if let Ok(s) = decode(data, max) {
        assert!(s.state.len() as u64 <= max);
        assert!(s.position >= s.first_position);
        assert_eq!(encode(&s), data);
    }
});
