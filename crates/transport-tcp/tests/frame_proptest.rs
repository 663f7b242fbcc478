//! The frame decoder on arbitrary bytes: never panics, and whatever it accepts re-encodes to
//! exactly the bytes it consumed. (The same property is fuzzed by `fuzz/fuzz_targets/tcp_frame.rs`.)

use proptest::prelude::*;
use squall_transport_tcp::frame::{self, Frame};

/// Decodes a whole buffer frame by frame, as a link's reader does; checks each frame re-encodes
/// to its own bytes.
fn check_stream(bytes: &[u8], max_body: usize) -> Result<usize, TestCaseError> {
    let mut pos = 0;
    let mut frames = 0;
    while pos < bytes.len() {
        match frame::decode(&bytes[pos..], max_body) {
            Ok(None) => break,
            Ok(Some((f, used))) => {
                prop_assert!(used >= frame::HEADER_LEN && pos + used <= bytes.len());
                let mut again = Vec::new();
                frame::encode(&mut again, &f);
                prop_assert_eq!(&again[..], &bytes[pos..pos + used]);
                pos += used;
                frames += 1;
            }
            Err(_) => break,
        }
    }
    Ok(frames)
}

fn any_frame() -> impl Strategy<Value = (u8, u32, u64, u64, Vec<u8>)> {
    (
        0u8..15,
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        proptest::collection::vec(any::<u8>(), 0..64),
    )
}

fn build(buf: &mut Vec<u8>, (k, a, b, c, data): &(u8, u32, u64, u64, Vec<u8>)) {
    let f = match k {
        0 => Frame::Write {
            region: *a,
            offset: *b,
            data,
            signaled: c % 2 == 0,
        },
        1 => Frame::Read {
            region: *a,
            offset: *b,
            len: *a,
        },
        2 => Frame::Cas {
            region: *a,
            offset: *b,
            expected: *c,
            new: *b ^ *c,
        },
        3 => Frame::FetchAdd {
            region: *a,
            offset: *b,
            delta: *c,
        },
        4 => Frame::Send {
            data,
            signaled: c % 2 == 1,
        },
        5 => Frame::Fence,
        6 => Frame::Applied { seq: *b },
        7 => Frame::ReadData { seq: *b, data },
        8 => Frame::AtomicResult { seq: *b, old: *c },
        9 => Frame::Heartbeat,
        10 => Frame::Cut,
        11 => Frame::Refuse("no"),
        _ => Frame::Hello(frame::Hello {
            version: frame::PROTOCOL_VERSION,
            cluster_id: *b,
            from: *a,
            to: a.wrapping_add(1),
            incarnation: *c,
            max_message_len: *a,
            regions: data
                .iter()
                .map(|&x| (u32::from(x), u64::from(x) * 8))
                .collect(),
        }),
    };
    frame::encode(buf, &f);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), max in 0usize..1024) {
        check_stream(&bytes, max)?;
    }

    #[test]
    fn valid_frames_decode_whole_even_after_corruption(
        frames in proptest::collection::vec(any_frame(), 1..8),
        flip in any::<(usize, u8)>(),
        cut in any::<usize>(),
    ) {
        let mut buf = Vec::new();
        for f in &frames {
            build(&mut buf, f);
        }
        // Intact: every frame comes back.
        prop_assert_eq!(check_stream(&buf, 1 << 16)?, frames.len());
        // Truncated: a prefix of the frames, never an error from a complete prefix.
        let cut = cut % (buf.len() + 1);
        check_stream(&buf[..cut], 1 << 16)?;
        // Corrupted: no panic, and anything accepted still re-encodes exactly.
        let at = flip.0 % buf.len();
        buf[at] ^= flip.1 | 1;
        check_stream(&buf, 1 << 16)?;
    }
}
