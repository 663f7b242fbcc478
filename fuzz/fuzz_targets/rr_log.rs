//! Fuzzes the round-robin durable log's decoder: whatever the bytes, it never panics, keeps a
//! valid prefix that decodes again cleanly, and never reports more bytes than it was given. A
//! compacted log's base frame (`SQRRLOG2`) is decoded strictly: `decode_base` on the input
//! itself never panics and, when it accepts a frame, re-encodes it byte for byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_round_robin::log::{
    BASE_BODY, FRAME, MAGIC, MAGIC_COMPACTED, decode, decode_base, encode_base, encode_record,
};

fuzz_target!(|data: &[u8]| {
    let d = decode(data);
    assert!(d.valid_len <= data.len());
    let again = decode(&data[..d.valid_len]);
    assert_eq!(again.records, d.records);
    assert!(again.tail.is_none());
    assert_eq!(again.base, d.base);
    if let Ok(b) = decode_base(data) {
        let mut out = Vec::new();
        encode_base(&b, &mut out);
        assert_eq!(&out[..], &data[..FRAME + BASE_BODY]);
    }
    // Re-encoding what was kept gives back the same bytes.
    if d.valid_len > 0 {
        let mut out = match &d.base {
            Some(b) => {
                let mut out = MAGIC_COMPACTED.to_vec();
                encode_base(b, &mut out);
                out
            }
            None => MAGIC.to_vec(),
        };
        for r in &d.records {
            encode_record(r, &mut out);
        }
        assert_eq!(&out[..], &data[..d.valid_len]);
    }
});
