//! Fuzzes `squall-kv`'s operation and result decoders: never a panic, and whatever decodes
//! re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_kv::{KvOp, KvResult};

fuzz_target!(|bytes: &[u8]| {
    if let Ok(op) = KvOp::decode(bytes) {
        assert_eq!(op.encode(), bytes);
    }
    if let Ok(r) = KvResult::decode(bytes) {
        assert_eq!(r.encode(), bytes);
    }
});
