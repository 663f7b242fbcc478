//! Snapshots: a replica's whole state at a log position, as checksummed bytes.

use crate::codec::{DecodeError, Reader, put_bytes, put_u32, put_u64};
use crate::core::Session;

/// Version of the snapshot format.
pub const SNAPSHOT_VERSION: u8 = 1;
const MAGIC: &[u8; 8] = b"SQSMRSN1";

/// A replica's state after `applied` deliveries: the state machine's snapshot and the client
/// sessions (so deduplication survives state transfer).
///
/// ```
/// use squall_smr::Snapshot;
/// let s = Snapshot::new(3, b"state".to_vec());
/// let bytes = s.encode();
/// assert_eq!(Snapshot::decode(&bytes)?, s);
/// let mut torn = bytes.clone();
/// torn[20] ^= 1;
/// assert!(Snapshot::decode(&torn).is_err());
/// # Ok::<(), squall_smr::DecodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Deliveries applied before it was taken.
    pub applied: u64,
    /// `(client, session)`, sorted by client.
    pub(crate) sessions: Vec<(u64, Session)>,
    /// The state machine's own snapshot.
    pub state: Vec<u8>,
}

impl Snapshot {
    /// A snapshot of a state machine's bytes after `applied` deliveries, with no client
    /// sessions (e.g. seeding replicas from an export).
    pub fn new(applied: u64, state: Vec<u8>) -> Snapshot {
        Snapshot {
            applied,
            sessions: Vec::new(),
            state,
        }
    }

    /// Client sessions it holds.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// `MAGIC, version, applied, sessions, state, crc32` (little-endian).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.state.len() + 64 + self.sessions.len() * 32);
        encode_with(self.applied, &self.sessions, &mut out, |o| {
            o.extend_from_slice(&self.state)
        });
        out
    }

    /// Decodes and verifies a snapshot.
    pub fn decode(bytes: &[u8]) -> Result<Snapshot, DecodeError> {
        if bytes.len() < MAGIC.len() + 4 {
            return Err(DecodeError::Truncated {
                field: "snapshot",
                need: MAGIC.len() + 4,
                have: bytes.len(),
            });
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        let mut c = [0u8; 4];
        c.copy_from_slice(crc);
        if crc32fast::hash(body) != u32::from_le_bytes(c) {
            return Err(DecodeError::Checksum("snapshot"));
        }
        let mut r = Reader::new(body);
        if r.take("magic", MAGIC.len())? != MAGIC {
            return Err(DecodeError::Kind {
                what: "snapshot magic",
                found: body[0],
            });
        }
        r.version("snapshot", SNAPSHOT_VERSION)?;
        let applied = r.u64("applied")?;
        let count = r.u64("session count")?;
        // Each session takes at least 28 bytes: a count beyond that is corrupt, not a reason
        // to allocate.
        if count > (body.len() / 28) as u64 {
            return Err(DecodeError::TooLong {
                field: "session count",
                len: count,
                max: body.len() / 28,
            });
        }
        let mut sessions = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let client = r.u64("client")?;
            let seq = r.u64("seq")?;
            let last_used = r.u64("last used")?;
            let response = r.bytes("response")?.to_vec();
            sessions.push((
                client,
                Session {
                    seq,
                    response,
                    last_used,
                },
            ));
        }
        let state = r.bytes("state")?.to_vec();
        r.finish("snapshot")?;
        Ok(Snapshot {
            applied,
            sessions,
            state,
        })
    }
}

/// Appends to `out` the encoding of a [`Snapshot`] after `applied` deliveries with `sessions`
/// and the state `state` appends: exactly [`Snapshot::encode`]'s bytes, without the state
/// being a vector of its own first (a checkpoint's encoder runs the state machine's encoder
/// into `out` directly, on the writer thread).
pub(crate) fn encode_with(
    applied: u64,
    sessions: &[(u64, Session)],
    out: &mut Vec<u8>,
    state: impl FnOnce(&mut Vec<u8>),
) {
    let start = out.len();
    out.extend_from_slice(MAGIC);
    out.push(SNAPSHOT_VERSION);
    put_u64(out, applied);
    put_u64(out, sessions.len() as u64);
    for (client, s) in sessions {
        put_u64(out, *client);
        put_u64(out, s.seq);
        put_u64(out, s.last_used);
        put_bytes(out, &s.response);
    }
    // The state's length is known once it is appended: a placeholder, then the length as
    // `put_bytes` writes it.
    let len_at = out.len();
    put_u32(out, 0);
    state(out);
    let len = out.len() - len_at - 4;
    let len = u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes();
    out[len_at..len_at + 4].copy_from_slice(&len);
    let crc = crc32fast::hash(&out[start..]);
    put_u32(out, crc);
}
