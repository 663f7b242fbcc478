//! The crate's byte formats: log entries (what replicas submit to the ordering backend) and the
//! client protocol (what clients and replicas exchange over TCP). Each is versioned, every
//! decoder returns [`DecodeError`] on any input, and `fuzz/` has a target for each.
//!
//! Client protocol frames are `[len: u32][version: u8][kind: u8][id: u64][body]`, little-endian,
//! where `len` counts everything after itself and `id` is the client's own tag for matching a
//! response to its request (responses may come back out of order on a connection).

use crate::codec::{DecodeError, Reader, put_bytes, put_u32, put_u64};

/// Version of the log-entry format.
pub const ENTRY_VERSION: u8 = 1;
/// Version of the client protocol.
pub const PROTOCOL_VERSION: u8 = 1;
/// Bytes before a client frame's body: length, version, kind, id.
pub const FRAME_HEADER: usize = 4 + 1 + 1 + 8;

const E_COMMAND: u8 = 1;
const E_READ: u8 = 2;
const E_BARRIER: u8 = 3;

/// One entry of the replicated log.
///
/// ```
/// use squall_smr::wire::Entry;
/// let e = Entry::Command { client: 7, seq: 1, acked: 0, payload: b"put x" };
/// let bytes = e.encode();
/// assert_eq!(Entry::decode(&bytes)?, e);
/// # Ok::<(), squall_smr::DecodeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    /// A client command, applied by every replica once per `(client, seq)`.
    Command {
        /// The client's session id.
        client: u64,
        /// The command's number in the session (from 1, one at a time).
        seq: u64,
        /// The highest `seq` whose response the client has received (0: none yet).
        acked: u64,
        /// The command for the state machine.
        payload: &'a [u8],
    },
    /// An ordered read: the submitting replica answers `query` at this position.
    Read {
        /// The replica that holds the request.
        replica: u32,
        /// Its tag for the request.
        id: u64,
        /// The query for the state machine.
        query: &'a [u8],
    },
    /// A read barrier: the submitting replica answers every read it queued before submitting
    /// barrier `id`, once the barrier is delivered.
    Barrier {
        /// The replica that submitted it.
        replica: u32,
        /// Its barrier number.
        id: u64,
    },
}

impl<'a> Entry<'a> {
    /// The bytes to submit.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        out.push(ENTRY_VERSION);
        match *self {
            Entry::Command {
                client,
                seq,
                acked,
                payload,
            } => {
                out.push(E_COMMAND);
                put_u64(&mut out, client);
                put_u64(&mut out, seq);
                put_u64(&mut out, acked);
                out.extend_from_slice(payload);
            }
            Entry::Read { replica, id, query } => {
                out.push(E_READ);
                put_u32(&mut out, replica);
                put_u64(&mut out, id);
                out.extend_from_slice(query);
            }
            Entry::Barrier { replica, id } => {
                out.push(E_BARRIER);
                put_u32(&mut out, replica);
                put_u64(&mut out, id);
            }
        }
        out
    }

    /// Decodes an entry; borrows the payload from `bytes`.
    pub fn decode(bytes: &'a [u8]) -> Result<Entry<'a>, DecodeError> {
        let mut r = Reader::new(bytes);
        r.version("log entry", ENTRY_VERSION)?;
        match r.u8("kind")? {
            E_COMMAND => Ok(Entry::Command {
                client: r.u64("client")?,
                seq: r.u64("seq")?,
                acked: r.u64("acked")?,
                payload: r.rest(),
            }),
            E_READ => Ok(Entry::Read {
                replica: r.u32("replica")?,
                id: r.u64("id")?,
                query: r.rest(),
            }),
            E_BARRIER => {
                let e = Entry::Barrier {
                    replica: r.u32("replica")?,
                    id: r.u64("id")?,
                };
                r.finish("barrier")?;
                Ok(e)
            }
            found => Err(DecodeError::Kind {
                what: "log entry",
                found,
            }),
        }
    }
}

/// How a read is served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReadMode {
    /// Batched behind a barrier in the total order (the default): linearizable, and one tiny
    /// barrier entry serves every read that arrived at the replica meanwhile. See the crate
    /// docs for the argument.
    #[default]
    Barrier,
    /// The query itself travels through the total order and is answered at its position:
    /// linearizable, one log entry per read.
    Ordered,
    /// Answered at once from the replica's current state. **Not linearizable**: a lagging
    /// replica returns stale data (sequentially consistent per replica only). For monitoring
    /// and for tests that show the checker catching it.
    Local,
}

impl ReadMode {
    fn to_byte(self) -> u8 {
        match self {
            ReadMode::Barrier => 0,
            ReadMode::Ordered => 1,
            ReadMode::Local => 2,
        }
    }

    fn from_byte(b: u8) -> Result<ReadMode, DecodeError> {
        match b {
            0 => Ok(ReadMode::Barrier),
            1 => Ok(ReadMode::Ordered),
            2 => Ok(ReadMode::Local),
            found => Err(DecodeError::Kind {
                what: "read mode",
                found,
            }),
        }
    }
}

const R_COMMAND: u8 = 1;
const R_READ: u8 = 2;
const P_OK: u8 = 1;
const P_ERROR: u8 = 2;

/// What a client asks a replica.
///
/// ```
/// use squall_smr::wire::{ReadMode, Request};
/// let r = Request::Read { mode: ReadMode::Barrier, query: b"get x".to_vec() };
/// let frame = r.encode(42);
/// let (id, back) = Request::decode(&frame[4..], 1 << 20)?;
/// assert_eq!((id, back), (42, r));
/// # Ok::<(), squall_smr::DecodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Apply a command (deduplicated per `(client, seq)`).
    Command {
        /// Session id, chosen at random by the client.
        client: u64,
        /// Number in the session, from 1; a retry repeats it.
        seq: u64,
        /// The highest `seq` whose response the client has received (0: none yet). A replica
        /// that has no session for `client` starts one only when this is 0; otherwise the
        /// session was evicted and the command is refused as
        /// [`SessionExpired`](ErrorCode::SessionExpired) rather than applied twice.
        acked: u64,
        /// The command.
        payload: Vec<u8>,
    },
    /// Run a read-only query.
    Read {
        /// How to serve it.
        mode: ReadMode,
        /// The query.
        query: Vec<u8>,
    },
}

impl Request {
    /// A whole frame (with its length prefix) tagged `id`.
    pub fn encode(&self, id: u64) -> Vec<u8> {
        let mut out = frame_start(
            id,
            match self {
                Request::Command { .. } => R_COMMAND,
                Request::Read { .. } => R_READ,
            },
        );
        match self {
            Request::Command {
                client,
                seq,
                acked,
                payload,
            } => {
                put_u64(&mut out, *client);
                put_u64(&mut out, *seq);
                put_u64(&mut out, *acked);
                out.extend_from_slice(payload);
            }
            Request::Read { mode, query } => {
                out.push(mode.to_byte());
                out.extend_from_slice(query);
            }
        }
        frame_finish(out)
    }

    /// Decodes a frame without its 4-byte length prefix; `max` bounds the body.
    pub fn decode(frame: &[u8], max: usize) -> Result<(u64, Request), DecodeError> {
        let (id, kind, mut r) = frame_open(frame, max)?;
        let req = match kind {
            R_COMMAND => Request::Command {
                client: r.u64("client")?,
                seq: r.u64("seq")?,
                acked: r.u64("acked")?,
                payload: r.rest().to_vec(),
            },
            R_READ => Request::Read {
                mode: ReadMode::from_byte(r.u8("read mode")?)?,
                query: r.rest().to_vec(),
            },
            found => {
                return Err(DecodeError::Kind {
                    what: "request",
                    found,
                });
            }
        };
        Ok((id, req))
    }
}

/// Why a replica refused or could not serve a request. Stable codes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ErrorCode {
    /// The request could not be decoded (the message says why). Not retried.
    Malformed = 1,
    /// The replica's queue is full; retry later or elsewhere.
    Busy = 2,
    /// The replica cannot order requests now (wedged, stopped, or shutting down); retry at
    /// another replica.
    Unavailable = 3,
    /// A command older than the session's latest was sent again; its response is gone.
    Stale = 4,
    /// The session was evicted (the replica keeps a bounded number); start a new client.
    SessionExpired = 5,
    /// The command or query exceeds what the backend carries.
    TooLarge = 6,
}

impl ErrorCode {
    fn from_byte(b: u8) -> Result<ErrorCode, DecodeError> {
        Ok(match b {
            1 => ErrorCode::Malformed,
            2 => ErrorCode::Busy,
            3 => ErrorCode::Unavailable,
            4 => ErrorCode::Stale,
            5 => ErrorCode::SessionExpired,
            6 => ErrorCode::TooLarge,
            found => {
                return Err(DecodeError::Kind {
                    what: "error code",
                    found,
                });
            }
        })
    }
}

/// A replica's answer.
///
/// ```
/// use squall_smr::wire::{ErrorCode, Response};
/// let r = Response::Error { code: ErrorCode::Busy, message: "queue full".into() };
/// let frame = r.encode(3);
/// assert_eq!(Response::decode(&frame[4..], 1024)?, (3, r));
/// # Ok::<(), squall_smr::DecodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// The state machine's response.
    Ok(Vec<u8>),
    /// The request failed.
    Error {
        /// What kind of failure.
        code: ErrorCode,
        /// Details for a person.
        message: String,
    },
}

impl Response {
    /// A whole frame (with its length prefix) tagged `id`.
    pub fn encode(&self, id: u64) -> Vec<u8> {
        match self {
            Response::Ok(payload) => {
                let mut out = frame_start(id, P_OK);
                out.extend_from_slice(payload);
                frame_finish(out)
            }
            Response::Error { code, message } => {
                let mut out = frame_start(id, P_ERROR);
                out.push(*code as u8);
                put_bytes(&mut out, message.as_bytes());
                frame_finish(out)
            }
        }
    }

    /// Decodes a frame without its 4-byte length prefix; `max` bounds the body.
    pub fn decode(frame: &[u8], max: usize) -> Result<(u64, Response), DecodeError> {
        let (id, kind, mut r) = frame_open(frame, max)?;
        let resp = match kind {
            P_OK => Response::Ok(r.rest().to_vec()),
            P_ERROR => {
                let code = ErrorCode::from_byte(r.u8("error code")?)?;
                let message = std::str::from_utf8(r.bytes("message")?)
                    .map_err(|_| DecodeError::Utf8("message"))?
                    .to_owned();
                r.finish("error response")?;
                Response::Error { code, message }
            }
            found => {
                return Err(DecodeError::Kind {
                    what: "response",
                    found,
                });
            }
        };
        Ok((id, resp))
    }
}

/// Reads a frame's length prefix: the length of the rest of the frame, refusing lengths outside
/// `FRAME_HEADER - 4 ..= max + FRAME_HEADER - 4`.
///
/// ```
/// use squall_smr::wire::frame_len;
/// assert_eq!(frame_len([10, 0, 0, 0], 100)?, 10);
/// assert!(frame_len([0xff, 0xff, 0xff, 0xff], 100).is_err());
/// # Ok::<(), squall_smr::DecodeError>(())
/// ```
pub fn frame_len(prefix: [u8; 4], max: usize) -> Result<usize, DecodeError> {
    let len = u32::from_le_bytes(prefix) as usize;
    let min = FRAME_HEADER - 4;
    if len < min {
        return Err(DecodeError::Truncated {
            field: "frame header",
            need: min,
            have: len,
        });
    }
    if len - min > max {
        return Err(DecodeError::TooLong {
            field: "frame body",
            len: (len - min) as u64,
            max,
        });
    }
    Ok(len)
}

fn frame_start(id: u64, kind: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    put_u32(&mut out, 0);
    out.push(PROTOCOL_VERSION);
    out.push(kind);
    put_u64(&mut out, id);
    out
}

fn frame_finish(mut out: Vec<u8>) -> Vec<u8> {
    let len = u32::try_from(out.len() - 4).unwrap_or(u32::MAX);
    out[..4].copy_from_slice(&len.to_le_bytes());
    out
}

fn frame_open(frame: &[u8], max: usize) -> Result<(u64, u8, Reader<'_>), DecodeError> {
    if frame.len() > max + FRAME_HEADER - 4 {
        return Err(DecodeError::TooLong {
            field: "frame body",
            len: (frame.len() + 4 - FRAME_HEADER) as u64,
            max,
        });
    }
    let mut r = Reader::new(frame);
    r.version("client protocol", PROTOCOL_VERSION)?;
    let kind = r.u8("kind")?;
    let id = r.u64("request id")?;
    Ok((id, kind, r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Entry::decode(&bytes);
            let _ = Request::decode(&bytes, 32);
            let _ = Response::decode(&bytes, 32);
        }

        #[test]
        fn requests_round_trip(client: u64, seq: u64, id: u64, payload in proptest::collection::vec(any::<u8>(), 0..40)) {
            let r = Request::Command { client, seq, acked: seq / 2, payload: payload.clone() };
            let f = r.encode(id);
            prop_assert_eq!(frame_len([f[0], f[1], f[2], f[3]], 64).ok(), Some(f.len() - 4));
            prop_assert_eq!(Request::decode(&f[4..], 64), Ok((id, r)));
            let e = Entry::Read { replica: 3, id, query: &payload };
            let bytes = e.encode();
            prop_assert_eq!(Entry::decode(&bytes), Ok(e));
        }
    }

    #[test]
    fn oversized_and_wrong_version_are_refused() {
        let f = Request::Read {
            mode: ReadMode::Local,
            query: vec![0; 100],
        }
        .encode(1);
        assert!(matches!(
            Request::decode(&f[4..], 99),
            Err(DecodeError::TooLong { .. })
        ));
        let mut bad = f[4..].to_vec();
        bad[0] = 2;
        assert!(matches!(
            Request::decode(&bad, 1000),
            Err(DecodeError::Version { found: 2, .. })
        ));
        assert!(matches!(
            Entry::decode(&[
                ENTRY_VERSION,
                E_BARRIER,
                0,
                0,
                0,
                0,
                1,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                9
            ]),
            Err(DecodeError::Trailing(1, _))
        ));
    }
}
