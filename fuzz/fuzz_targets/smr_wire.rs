//! Fuzzes every decoder of `squall-smr`'s byte formats (log entries, client requests and
//! responses, snapshots): any bytes, any limit; never a panic, and whatever decodes re-encodes
//! to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_smr::Snapshot;
use squall_smr::wire::{Entry, Request, Response, frame_len};

fuzz_target!(|input: &[u8]| {
    let (limit, bytes) = match input.split_first_chunk::<2>() {
        Some((l, rest)) => (usize::from(u16::from_le_bytes(*l)), rest),
        None => (0, input),
    };
    if let Ok(e) = Entry::decode(bytes) {
        assert_eq!(e.encode(), bytes);
    }
    if let Ok((id, r)) = Request::decode(bytes, limit) {
        assert_eq!(&r.encode(id)[4..], bytes);
    }
    if let Ok((id, r)) = Response::decode(bytes, limit) {
        assert_eq!(&r.encode(id)[4..], bytes);
    }
    if let Some((prefix, _)) = bytes.split_first_chunk::<4>() {
        if let Ok(len) = frame_len(*prefix, limit) {
            assert!(len <= limit + 10);
        }
    }
    if let Ok(s) = Snapshot::decode(bytes) {
        assert_eq!(s.encode(), bytes);
    }
});
