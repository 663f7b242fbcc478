//! Fuzzes `squall-kv`'s admin request and response decoders (`squall-kv client … status` and
//! `… leave`, `squall_kv::admin`): never a panic, and whatever decodes re-encodes to the same
//! bytes. Seeds: `fuzz/seeds/kv_admin` (a status and a leave request; a status, a held leave
//! and an error response).
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_kv::admin::{AdminRequest, AdminResponse};

fuzz_target!(|bytes: &[u8]| {
    if let Ok(req) = AdminRequest::decode(bytes) {
        assert_eq!(req.encode(), bytes);
    }
    if let Ok(resp) = AdminResponse::decode(bytes) {
        assert_eq!(resp.encode(), bytes);
    }
});
