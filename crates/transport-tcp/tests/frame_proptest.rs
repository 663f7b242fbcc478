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
        0u8..16,
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        proptest::collection::vec(any::<u8>(), 0..64),
    )
}

fn build(buf: &mut Vec<u8>, (k, a, b, c, data): &(u8, u32, u64, u64, Vec<u8>)) {
    if (12..14).contains(k) {
        // A `Writes` batch of one to three records cut from `data`.
        let at = frame::open_write_batch(buf);
        let records = 1 + (c % 3) as usize;
        for (i, chunk) in data
            .chunks(data.len() / records + 1)
            .take(records)
            .enumerate()
        {
            frame::encode_write_record(buf, at, i as u8, a.wrapping_add(i as u32), chunk);
        }
        if data.is_empty() {
            frame::encode_write_record(buf, at, 0, *a, &[]);
        }
        return;
    }
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

/// The fuzz seeds (`fuzz/seeds/tcp_frame/`: a 2-byte limit, then frames) are what their names
/// say: every seed decodes whole except the truncated one, which is a prefix, not an error.
#[test]
fn fuzz_seeds_decode_as_named() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/tcp_frame");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("seeds folder") {
        let path = entry.expect("entry").path();
        let input = std::fs::read(&path).expect("seed");
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let (limit, bytes) = input.split_at(2);
        let limit = usize::from(u16::from_le_bytes([limit[0], limit[1]]));
        let mut pos = 0;
        let mut batches = 0;
        loop {
            match frame::decode(&bytes[pos..], limit) {
                Ok(Some((f, used))) => {
                    batches += usize::from(matches!(f, Frame::Writes(_)));
                    pos += used;
                }
                Ok(None) => break,
                Err(e) => panic!("seed {name}: {e}"),
            }
        }
        if name.starts_with("truncated") {
            assert!(pos < bytes.len(), "seed {name} is whole");
        } else {
            assert_eq!(pos, bytes.len(), "seed {name} has trailing bytes");
        }
        if name.contains("batch") && !name.starts_with("truncated") {
            assert!(batches > 0, "seed {name} holds no Writes batch");
        }
        seen += 1;
    }
    assert!(seen >= 8, "only {seen} seeds");
}
