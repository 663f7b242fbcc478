//! Fuzzes the TCP frame decoder: any bytes, any limit; it must never panic, never claim more
//! bytes than it was given, and whatever it accepts must re-encode to exactly the bytes consumed.
//! A `Writes` batch it accepts must iterate to exactly its record count, records covering the
//! body. Seeds: `fuzz/seeds/tcp_frame/` (`cargo +nightly fuzz run tcp_frame fuzz/seeds/tcp_frame
//! -- -dict=fuzz/tcp_frame.dict`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_transport_tcp::frame;

fuzz_target!(|input: &[u8]| {
    let (limit, bytes) = match input.split_first_chunk::<2>() {
        Some((l, rest)) => (usize::from(u16::from_le_bytes(*l)), rest),
        None => (0, input),
    };
    let mut pos = 0;
    while pos < bytes.len() {
        match frame::decode(&bytes[pos..], limit) {
            Ok(Some((f, used))) => {
                assert!(used >= frame::HEADER_LEN && pos + used <= bytes.len());
                let mut again = Vec::new();
                frame::encode(&mut again, &f);
                assert_eq!(&again[..], &bytes[pos..pos + used]);
                if let frame::Frame::Writes(batch) = f {
                    let mut n = 0u64;
                    let mut covered = 0;
                    for w in batch {
                        n += 1;
                        covered += frame::RECORD_OVERHEAD + w.data.len();
                        assert!(w.data.len() <= frame::SHORT_WRITE_MAX);
                    }
                    assert!(n > 0 && n == batch.count());
                    assert_eq!(covered, batch.as_bytes().len());
                }
                pos += used;
            }
            Ok(None) | Err(_) => break,
        }
    }
});
