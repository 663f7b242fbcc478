//! Fuzzes the membership log's decoder: whatever the bytes, it never panics, keeps a valid
//! prefix that decodes again cleanly, and re-encoding what it kept gives back the same bytes.
//! Every record kind goes through `decode` and `encode_record` here (`Installed`, `Decided` with
//! and without holders, `Promised`, `Shards`, `Snapshot`, `StateDropped`, `Verdict`,
//! `Settings`, `LeaveAsked`); the seeds in `fuzz/seeds/gms_log` hold one of each, and so does
//! the log the unit proptest `decode_keeps_a_reencodable_prefix_of_any_bytes` starts from. Run:
//! `cargo +nightly fuzz run gms_log /tmp/gms_log_corpus fuzz/seeds/gms_log -- -runs=50000`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_membership::log::{MAGIC, decode, encode_record};

fuzz_target!(|data: &[u8]| {
    let d = decode(data);
    assert!(d.valid_len <= data.len());
    let again = decode(&data[..d.valid_len]);
    assert_eq!(again.records, d.records);
    assert!(again.tail.is_none());
    if d.valid_len > 0 {
        let mut out = MAGIC.to_vec();
        for r in &d.records {
            encode_record(r, &mut out);
        }
        assert_eq!(&out[..], &data[..d.valid_len]);
    }
});
