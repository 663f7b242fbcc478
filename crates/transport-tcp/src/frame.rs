//! The wire format: compact little-endian frames, and a decoder that never panics.
//!
//! Every frame is a 5-byte header — the body length (`u32`, little-endian) and a kind byte —
//! followed by the body. Integers are little-endian; offsets are `u64`, region ids `u32`.
//! The protocol version travels in the handshake ([`Hello`]), which both ends check before any
//! other frame is accepted; a connection whose version differs is refused.
//!
//! | kind | frame | body |
//! | --- | --- | --- |
//! | 1 | `Hello` | magic `u32`, version `u16`, cluster `u64`, from `u32`, to `u32`, incarnation `u64`, max message `u32`, region count `u32`, then (id `u32`, len `u64`) per region |
//! | 2 | `Welcome` | as `Hello` (the acceptor's answer) |
//! | 3 | `Refuse` | UTF-8 reason |
//! | 10/11 | `Write` unsignaled / signaled | region `u32`, offset `u64`, data |
//! | 12 | `Read` | region `u32`, offset `u64`, len `u32` |
//! | 13 | `Cas` | region `u32`, offset `u64`, expected `u64`, new `u64` |
//! | 14 | `FetchAdd` | region `u32`, offset `u64`, delta `u64` |
//! | 15/16 | `Send` unsignaled / signaled | data |
//! | 17 | `Fence` | empty |
//! | 18 | `Writes` | a batch of short unsignaled writes: one or more records (data length `u8`, region *index* `u8` into the receiver's handshake directory, offset `u32`, data) |
//! | 20 | `Applied` | seq `u64`: every request up to `seq` was applied |
//! | 21 | `ReadData` | seq `u64`, data |
//! | 22 | `AtomicResult` | seq `u64`, old value `u64` |
//! | 30 | `Heartbeat` | empty |
//! | 31 | `Cut` | empty: the sender declared the receiver failed |
//!
//! Requests (kinds 10–18) are numbered implicitly from 1 in the order they travel on a
//! connection (each record of a `Writes` batch is one request); responses name the request they
//! answer by that number, and every response also says that all earlier requests were applied
//! (links are FIFO).
//!
//! A `Writes` record costs 6 bytes besides its data, where a `Write` frame costs 17: an 8-byte
//! write is 14 bytes on the wire (protocol version 2). The sender appends records to the open
//! batch while it stages unsignaled writes of at most [`SHORT_WRITE_MAX`] bytes to a region among
//! the receiver's first 256 at an offset below 4 GiB; anything else goes as a `Write` frame.
//!
//! ```
//! use squall_transport_tcp::frame::{self, Frame};
//! let mut buf = Vec::new();
//! frame::encode_cas(&mut buf, 3, 64, 1, 2);
//! let (f, used) = frame::decode(&buf, 1024).unwrap().unwrap();
//! assert_eq!(used, buf.len());
//! assert_eq!(f, Frame::Cas { region: 3, offset: 64, expected: 1, new: 2 });
//! // A truncated frame is not an error yet: more bytes may come.
//! assert_eq!(frame::decode(&buf[..7], 1024), Ok(None));
//! ```

use thiserror::Error;

/// The protocol version this build speaks. Both ends of a connection must speak the same one.
///
/// Version 2 added the `Writes` batch (kind 18).
pub const PROTOCOL_VERSION: u16 = 2;

/// The first four bytes of every handshake body ("SQTC").
pub const MAGIC: u32 = u32::from_le_bytes(*b"SQTC");

/// Header length: body length `u32` and kind `u8`.
pub const HEADER_LEN: usize = 5;

/// The largest handshake body accepted (a directory of many regions fits easily).
pub const MAX_HANDSHAKE_BODY: usize = 1 << 20;

const K_HELLO: u8 = 1;
const K_WELCOME: u8 = 2;
const K_REFUSE: u8 = 3;
const K_WRITE: u8 = 10;
const K_WRITE_SIGNALED: u8 = 11;
const K_READ: u8 = 12;
const K_CAS: u8 = 13;
const K_FETCH_ADD: u8 = 14;
const K_SEND: u8 = 15;
const K_SEND_SIGNALED: u8 = 16;
const K_FENCE: u8 = 17;
const K_WRITES: u8 = 18;
const K_APPLIED: u8 = 20;
const K_READ_DATA: u8 = 21;
const K_ATOMIC_RESULT: u8 = 22;
const K_HEARTBEAT: u8 = 30;
const K_CUT: u8 = 31;

/// Bytes of a write frame besides its data.
pub const WRITE_OVERHEAD: usize = HEADER_LEN + 12;

/// The largest write a `Writes` record carries (its length is one byte).
pub const SHORT_WRITE_MAX: usize = u8::MAX as usize;

/// Bytes of a `Writes` record besides its data: length `u8`, region index `u8`, offset `u32`.
pub const RECORD_OVERHEAD: usize = 6;

/// A `Writes` batch: one or more short write records, checked whole by [`decode`] (every record
/// complete, none past the body's end), so iterating it cannot fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteBatch<'a> {
    bytes: &'a [u8],
    count: u32,
}

impl<'a> WriteBatch<'a> {
    /// Checks a batch body: at least one record, each whole.
    fn parse(bytes: &'a [u8]) -> Option<WriteBatch<'a>> {
        let mut pos = 0usize;
        let mut count = 0u32;
        while pos < bytes.len() {
            let len = usize::from(bytes[pos]);
            pos = pos.checked_add(RECORD_OVERHEAD + len)?;
            count = count.checked_add(1)?;
        }
        (count > 0 && pos == bytes.len()).then_some(WriteBatch { bytes, count })
    }

    /// How many writes (requests) the batch holds.
    pub fn count(&self) -> u64 {
        u64::from(self.count)
    }

    /// The batch's body on the wire.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The records in order.
    pub fn iter(&self) -> WriteRecords<'a> {
        WriteRecords { rest: self.bytes }
    }
}

impl<'a> IntoIterator for WriteBatch<'a> {
    type Item = WriteRecord<'a>;
    type IntoIter = WriteRecords<'a>;
    fn into_iter(self) -> WriteRecords<'a> {
        self.iter()
    }
}

/// One short write of a [`WriteBatch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteRecord<'a> {
    /// The target region's index in the receiver's handshake directory.
    pub region_index: u8,
    /// Byte offset.
    pub offset: u32,
    /// The bytes.
    pub data: &'a [u8],
}

/// The records of a [`WriteBatch`].
#[derive(Clone, Debug)]
pub struct WriteRecords<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for WriteRecords<'a> {
    type Item = WriteRecord<'a>;

    #[inline]
    fn next(&mut self) -> Option<WriteRecord<'a>> {
        // The batch was checked whole; `get` keeps this total anyway.
        let head = self.rest.get(..RECORD_OVERHEAD)?;
        let len = usize::from(head[0]);
        let data = self.rest.get(RECORD_OVERHEAD..RECORD_OVERHEAD + len)?;
        let record = WriteRecord {
            region_index: head[1],
            offset: u32::from_le_bytes([head[2], head[3], head[4], head[5]]),
            data,
        };
        self.rest = &self.rest[RECORD_OVERHEAD + len..];
        Some(record)
    }
}

/// The handshake: who is speaking, to whom, in which cluster, and what it registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Protocol version of the sender.
    pub version: u16,
    /// Cluster id of the sender's config.
    pub cluster_id: u64,
    /// The sender's node id.
    pub from: u32,
    /// The node id the sender believes it is talking to.
    pub to: u32,
    /// The sender's incarnation: fresh on every process start.
    pub incarnation: u64,
    /// The sender's largest accepted message.
    pub max_message_len: u32,
    /// The sender's regions: (id, length in bytes).
    pub regions: Vec<(u32, u64)>,
}

/// One decoded frame. Data fields borrow from the decode buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Handshake from the connecting node.
    Hello(Hello),
    /// Handshake answer from the accepting node.
    Welcome(Hello),
    /// The handshake was refused, and why.
    Refuse(&'a str),
    /// A one-sided write.
    Write {
        /// Target region.
        region: u32,
        /// Byte offset.
        offset: u64,
        /// The bytes.
        data: &'a [u8],
        /// Whether the poster wants a completion.
        signaled: bool,
    },
    /// A one-sided read.
    Read {
        /// Source region.
        region: u32,
        /// Byte offset.
        offset: u64,
        /// Bytes to read.
        len: u32,
    },
    /// A compare-and-swap of one aligned word.
    Cas {
        /// Region.
        region: u32,
        /// Byte offset (8-aligned).
        offset: u64,
        /// Expected old value.
        expected: u64,
        /// New value.
        new: u64,
    },
    /// A fetch-and-add of one aligned word.
    FetchAdd {
        /// Region.
        region: u32,
        /// Byte offset (8-aligned).
        offset: u64,
        /// Wrapping addend.
        delta: u64,
    },
    /// A two-sided message.
    Send {
        /// The bytes.
        data: &'a [u8],
        /// Whether the poster wants a completion.
        signaled: bool,
    },
    /// A batch of short unsignaled writes, each one request.
    Writes(WriteBatch<'a>),
    /// Completes once every earlier request was applied.
    Fence,
    /// Every request up to `seq` was applied.
    Applied {
        /// Request number.
        seq: u64,
    },
    /// The answer to read request `seq`.
    ReadData {
        /// Request number.
        seq: u64,
        /// The bytes read.
        data: &'a [u8],
    },
    /// The old value of atomic request `seq`.
    AtomicResult {
        /// Request number.
        seq: u64,
        /// The word's value before the atomic.
        old: u64,
    },
    /// Liveness, sent when a link is otherwise idle.
    Heartbeat,
    /// The sender declared the receiver failed and closes the link.
    Cut,
}

impl Frame<'_> {
    /// Whether this frame is a request (numbered, applied in order at the receiver).
    pub fn is_request(&self) -> bool {
        self.requests() > 0
    }

    /// How many requests this frame is: one for a request, a batch's record count for
    /// `Writes`, zero for responses and control frames.
    pub fn requests(&self) -> u64 {
        match self {
            Frame::Write { .. }
            | Frame::Read { .. }
            | Frame::Cas { .. }
            | Frame::FetchAdd { .. }
            | Frame::Send { .. }
            | Frame::Fence => 1,
            Frame::Writes(batch) => batch.count(),
            _ => 0,
        }
    }
}

/// Why bytes are not a valid frame.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum FrameError {
    /// The kind byte names no frame.
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    /// The length field exceeds what this connection accepts.
    #[error("frame body of {len} bytes exceeds the limit of {max} bytes")]
    Oversized {
        /// The announced body length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The body is shorter or longer than its kind requires.
    #[error("frame kind {kind} has a body of {len} bytes, which is malformed")]
    BadLength {
        /// The kind byte.
        kind: u8,
        /// The body length.
        len: usize,
    },
    /// A handshake did not start with the magic number: not a Squall peer.
    #[error("bad magic {0:#010x}: the peer does not speak the Squall TCP protocol")]
    BadMagic(u32),
    /// A refusal reason is not UTF-8.
    #[error("refusal reason is not valid UTF-8")]
    BadUtf8,
}

/// A little-endian cursor over a frame body; every read is checked.
struct Body<'a> {
    kind: u8,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Body<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        match end {
            Some(end) => {
                let s = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.bad()),
        }
    }

    fn bad(&self) -> FrameError {
        FrameError::BadLength {
            kind: self.kind,
            len: self.bytes.len(),
        }
    }

    fn u16(&mut self) -> Result<u16, FrameError> {
        let mut b = [0u8; 2];
        b.copy_from_slice(self.take(2)?);
        Ok(u16::from_le_bytes(b))
    }

    fn u32(&mut self) -> Result<u32, FrameError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, FrameError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn rest(&mut self) -> &'a [u8] {
        let s = &self.bytes[self.pos..];
        self.pos = self.bytes.len();
        s
    }

    fn end(&self) -> Result<(), FrameError> {
        if self.pos == self.bytes.len() {
            Ok(())
        } else {
            Err(self.bad())
        }
    }
}

/// Decodes the frame at the start of `buf`.
///
/// Returns `Ok(Some((frame, bytes used)))`, `Ok(None)` when `buf` holds only part of a frame, or
/// an error when the bytes cannot be a valid frame. A length field larger than `max_body` is an
/// error at once, before the body arrives. Never panics, whatever the bytes.
///
/// ```
/// use squall_transport_tcp::frame::{decode, FrameError};
/// // An oversized length field is refused from the header alone.
/// let bytes = [0xff, 0xff, 0xff, 0x7f, 10];
/// assert!(matches!(decode(&bytes, 4096), Err(FrameError::Oversized { .. })));
/// ```
pub fn decode(buf: &[u8], max_body: usize) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    let kind = buf[4];
    // The common case first: a whole write frame (the general path below decodes it the same).
    if (kind == K_WRITE || kind == K_WRITE_SIGNALED)
        && (12..=max_body).contains(&len)
        && buf.len() >= HEADER_LEN + len
    {
        let mut r = [0u8; 4];
        r.copy_from_slice(&buf[5..9]);
        let mut o = [0u8; 8];
        o.copy_from_slice(&buf[9..17]);
        let frame = Frame::Write {
            region: u32::from_le_bytes(r),
            offset: u64::from_le_bytes(o),
            data: &buf[HEADER_LEN + 12..HEADER_LEN + len],
            signaled: kind == K_WRITE_SIGNALED,
        };
        return Ok(Some((frame, HEADER_LEN + len)));
    }
    if kind == K_WRITES && len <= max_body && buf.len() >= HEADER_LEN + len {
        let body = &buf[HEADER_LEN..HEADER_LEN + len];
        let batch = WriteBatch::parse(body).ok_or(FrameError::BadLength { kind, len })?;
        return Ok(Some((Frame::Writes(batch), HEADER_LEN + len)));
    }
    let max = match kind {
        K_HELLO | K_WELCOME | K_REFUSE => MAX_HANDSHAKE_BODY,
        _ => max_body,
    };
    if len > max {
        return Err(FrameError::Oversized { len, max });
    }
    if !known_kind(kind) {
        return Err(FrameError::UnknownKind(kind));
    }
    let total = HEADER_LEN + len;
    if buf.len() < total {
        return Ok(None);
    }
    let mut b = Body {
        kind,
        bytes: &buf[HEADER_LEN..total],
        pos: 0,
    };
    let frame = match kind {
        K_HELLO | K_WELCOME => {
            let magic = b.u32()?;
            if magic != MAGIC {
                return Err(FrameError::BadMagic(magic));
            }
            let version = b.u16()?;
            let cluster_id = b.u64()?;
            let from = b.u32()?;
            let to = b.u32()?;
            let incarnation = b.u64()?;
            let max_message_len = b.u32()?;
            let count = b.u32()? as usize;
            // Check the count against the body before allocating anything.
            if count.checked_mul(12) != Some(b.bytes.len() - b.pos) {
                return Err(b.bad());
            }
            let mut regions = Vec::with_capacity(count);
            for _ in 0..count {
                regions.push((b.u32()?, b.u64()?));
            }
            let h = Hello {
                version,
                cluster_id,
                from,
                to,
                incarnation,
                max_message_len,
                regions,
            };
            if kind == K_HELLO {
                Frame::Hello(h)
            } else {
                Frame::Welcome(h)
            }
        }
        K_REFUSE => Frame::Refuse(std::str::from_utf8(b.rest()).map_err(|_| FrameError::BadUtf8)?),
        K_WRITE | K_WRITE_SIGNALED => Frame::Write {
            region: b.u32()?,
            offset: b.u64()?,
            data: b.rest(),
            signaled: kind == K_WRITE_SIGNALED,
        },
        K_READ => Frame::Read {
            region: b.u32()?,
            offset: b.u64()?,
            len: b.u32()?,
        },
        K_CAS => Frame::Cas {
            region: b.u32()?,
            offset: b.u64()?,
            expected: b.u64()?,
            new: b.u64()?,
        },
        K_FETCH_ADD => Frame::FetchAdd {
            region: b.u32()?,
            offset: b.u64()?,
            delta: b.u64()?,
        },
        K_SEND | K_SEND_SIGNALED => Frame::Send {
            data: b.rest(),
            signaled: kind == K_SEND_SIGNALED,
        },
        K_WRITES => Frame::Writes(WriteBatch::parse(b.rest()).ok_or(b.bad())?),
        K_FENCE => Frame::Fence,
        K_APPLIED => Frame::Applied { seq: b.u64()? },
        K_READ_DATA => Frame::ReadData {
            seq: b.u64()?,
            data: b.rest(),
        },
        K_ATOMIC_RESULT => Frame::AtomicResult {
            seq: b.u64()?,
            old: b.u64()?,
        },
        K_HEARTBEAT => Frame::Heartbeat,
        K_CUT => Frame::Cut,
        other => return Err(FrameError::UnknownKind(other)),
    };
    b.end()?;
    Ok(Some((frame, total)))
}

fn known_kind(kind: u8) -> bool {
    matches!(
        kind,
        K_HELLO
            | K_WELCOME
            | K_REFUSE
            | K_WRITE
            | K_WRITE_SIGNALED
            | K_READ
            | K_CAS
            | K_FETCH_ADD
            | K_SEND
            | K_SEND_SIGNALED
            | K_FENCE
            | K_WRITES
            | K_APPLIED
            | K_READ_DATA
            | K_ATOMIC_RESULT
            | K_HEARTBEAT
            | K_CUT
    )
}

fn header(buf: &mut Vec<u8>, kind: u8, body_len: usize) {
    // Callers bound every body by the connection's limit, which fits in a u32.
    let len = u32::try_from(body_len).unwrap_or(u32::MAX);
    buf.extend_from_slice(&len.to_le_bytes());
    buf.push(kind);
}

fn encode_hello_kind(buf: &mut Vec<u8>, kind: u8, h: &Hello) {
    header(buf, kind, 38 + 12 * h.regions.len());
    buf.extend_from_slice(&MAGIC.to_le_bytes());
    buf.extend_from_slice(&h.version.to_le_bytes());
    buf.extend_from_slice(&h.cluster_id.to_le_bytes());
    buf.extend_from_slice(&h.from.to_le_bytes());
    buf.extend_from_slice(&h.to.to_le_bytes());
    buf.extend_from_slice(&h.incarnation.to_le_bytes());
    buf.extend_from_slice(&h.max_message_len.to_le_bytes());
    let count = u32::try_from(h.regions.len()).unwrap_or(u32::MAX);
    buf.extend_from_slice(&count.to_le_bytes());
    for (id, len) in &h.regions {
        buf.extend_from_slice(&id.to_le_bytes());
        buf.extend_from_slice(&len.to_le_bytes());
    }
}

/// Appends a `Hello` frame.
pub fn encode_hello(buf: &mut Vec<u8>, h: &Hello) {
    encode_hello_kind(buf, K_HELLO, h)
}

/// Appends a `Welcome` frame.
pub fn encode_welcome(buf: &mut Vec<u8>, h: &Hello) {
    encode_hello_kind(buf, K_WELCOME, h)
}

/// Appends a `Refuse` frame (the reason is cut to fit the handshake limit).
pub fn encode_refuse(buf: &mut Vec<u8>, reason: &str) {
    let mut end = reason.len().min(MAX_HANDSHAKE_BODY);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    header(buf, K_REFUSE, end);
    buf.extend_from_slice(&reason.as_bytes()[..end]);
}

/// Appends the header and address of a write whose `len` data bytes the caller appends next.
///
/// ```
/// use squall_transport_tcp::frame::{decode, encode_write_header, Frame};
/// let mut buf = Vec::new();
/// encode_write_header(&mut buf, 0, 8, 3, true);
/// buf.extend_from_slice(b"abc");
/// let (f, _) = decode(&buf, 64).unwrap().unwrap();
/// assert_eq!(f, Frame::Write { region: 0, offset: 8, data: b"abc", signaled: true });
/// ```
pub fn encode_write_header(
    buf: &mut Vec<u8>,
    region: u32,
    offset: u64,
    len: usize,
    signaled: bool,
) {
    // One append of a fixed-size array (posting small writes is the hot path).
    let kind = if signaled { K_WRITE_SIGNALED } else { K_WRITE };
    // Callers bound every body by the connection's limit, which fits in a u32.
    let body = u32::try_from(12 + len).unwrap_or(u32::MAX);
    let mut h = [0u8; HEADER_LEN + 12];
    h[..4].copy_from_slice(&body.to_le_bytes());
    h[4] = kind;
    h[5..9].copy_from_slice(&region.to_le_bytes());
    h[9..].copy_from_slice(&offset.to_le_bytes());
    buf.extend_from_slice(&h);
}

/// Opens a `Writes` batch at the end of `buf` (empty: add records with
/// [`encode_write_record`], each of which keeps the batch's length field true). Returns where
/// the batch starts, which [`encode_write_record`] needs.
///
/// ```
/// use squall_transport_tcp::frame::{decode, encode_write_record, open_write_batch, Frame};
/// let mut buf = Vec::new();
/// let batch = open_write_batch(&mut buf);
/// encode_write_record(&mut buf, batch, 0, 64, b"abcdefgh");
/// encode_write_record(&mut buf, batch, 1, 8, b"xy");
/// assert_eq!(buf.len(), 5 + 6 + 8 + 6 + 2);
/// let Ok(Some((Frame::Writes(w), used))) = decode(&buf, 1024) else { panic!() };
/// assert_eq!(used, buf.len());
/// let records: Vec<_> = w.iter().map(|r| (r.region_index, r.offset, r.data)).collect();
/// assert_eq!(records, [(0, 64, &b"abcdefgh"[..]), (1, 8, &b"xy"[..])]);
/// ```
pub fn open_write_batch(buf: &mut Vec<u8>) -> usize {
    let at = buf.len();
    header(buf, K_WRITES, 0);
    at
}

/// Appends one record to the `Writes` batch that starts at `batch` in `buf` (which must be the
/// last frame in `buf`) and updates the batch's length. `data` is at most [`SHORT_WRITE_MAX`]
/// bytes (longer data is cut: callers send longer writes as `Write` frames).
pub fn encode_write_record(
    buf: &mut Vec<u8>,
    batch: usize,
    region_index: u8,
    offset: u32,
    data: &[u8],
) {
    let data = &data[..data.len().min(SHORT_WRITE_MAX)];
    write_record_header(buf, region_index, offset, data.len());
    buf.extend_from_slice(data);
    close_write_record(buf, batch);
}

/// Appends the head of a `Writes` record whose `len` (at most [`SHORT_WRITE_MAX`]) data bytes
/// the caller appends next, then calls [`close_write_record`].
pub fn write_record_header(buf: &mut Vec<u8>, region_index: u8, offset: u32, len: usize) {
    let o = offset.to_le_bytes();
    let len = u8::try_from(len).unwrap_or(u8::MAX);
    buf.extend_from_slice(&[len, region_index, o[0], o[1], o[2], o[3]]);
}

/// Sets the length of the `Writes` batch starting at `batch` to cover the rest of `buf`.
pub fn close_write_record(buf: &mut [u8], batch: usize) {
    let body = buf.len().saturating_sub(batch + HEADER_LEN);
    let body = u32::try_from(body).unwrap_or(u32::MAX).to_le_bytes();
    if let Some(field) = buf.get_mut(batch..batch + 4) {
        field.copy_from_slice(&body);
    }
}

/// Appends a read request.
pub fn encode_read(buf: &mut Vec<u8>, region: u32, offset: u64, len: u32) {
    header(buf, K_READ, 16);
    buf.extend_from_slice(&region.to_le_bytes());
    buf.extend_from_slice(&offset.to_le_bytes());
    buf.extend_from_slice(&len.to_le_bytes());
}

/// Appends a compare-and-swap request.
pub fn encode_cas(buf: &mut Vec<u8>, region: u32, offset: u64, expected: u64, new: u64) {
    header(buf, K_CAS, 28);
    buf.extend_from_slice(&region.to_le_bytes());
    buf.extend_from_slice(&offset.to_le_bytes());
    buf.extend_from_slice(&expected.to_le_bytes());
    buf.extend_from_slice(&new.to_le_bytes());
}

/// Appends a fetch-and-add request.
pub fn encode_fetch_add(buf: &mut Vec<u8>, region: u32, offset: u64, delta: u64) {
    header(buf, K_FETCH_ADD, 20);
    buf.extend_from_slice(&region.to_le_bytes());
    buf.extend_from_slice(&offset.to_le_bytes());
    buf.extend_from_slice(&delta.to_le_bytes());
}

/// Appends a two-sided message.
pub fn encode_send(buf: &mut Vec<u8>, data: &[u8], signaled: bool) {
    header(
        buf,
        if signaled { K_SEND_SIGNALED } else { K_SEND },
        data.len(),
    );
    buf.extend_from_slice(data);
}

/// Appends a fence.
pub fn encode_fence(buf: &mut Vec<u8>) {
    header(buf, K_FENCE, 0);
}

/// Appends an `Applied` response.
pub fn encode_applied(buf: &mut Vec<u8>, seq: u64) {
    header(buf, K_APPLIED, 8);
    buf.extend_from_slice(&seq.to_le_bytes());
}

/// Appends the header of a `ReadData` response whose `len` bytes the caller appends next.
pub fn encode_read_data_header(buf: &mut Vec<u8>, seq: u64, len: usize) {
    header(buf, K_READ_DATA, 8 + len);
    buf.extend_from_slice(&seq.to_le_bytes());
}

/// Appends an `AtomicResult` response.
pub fn encode_atomic_result(buf: &mut Vec<u8>, seq: u64, old: u64) {
    header(buf, K_ATOMIC_RESULT, 16);
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend_from_slice(&old.to_le_bytes());
}

/// Appends a heartbeat.
pub fn encode_heartbeat(buf: &mut Vec<u8>) {
    header(buf, K_HEARTBEAT, 0);
}

/// Appends a `Cut`.
pub fn encode_cut(buf: &mut Vec<u8>) {
    header(buf, K_CUT, 0);
}

/// Appends any frame; [`decode`] of the result gives the frame back.
///
/// ```
/// use squall_transport_tcp::frame::{decode, encode, Frame};
/// let mut buf = Vec::new();
/// encode(&mut buf, &Frame::ReadData { seq: 3, data: b"xyz" });
/// assert_eq!(decode(&buf, 64).unwrap().unwrap().0, Frame::ReadData { seq: 3, data: b"xyz" });
/// ```
pub fn encode(buf: &mut Vec<u8>, f: &Frame<'_>) {
    match f {
        Frame::Hello(h) => encode_hello(buf, h),
        Frame::Welcome(h) => encode_welcome(buf, h),
        Frame::Refuse(r) => encode_refuse(buf, r),
        Frame::Write {
            region,
            offset,
            data,
            signaled,
        } => {
            encode_write_header(buf, *region, *offset, data.len(), *signaled);
            buf.extend_from_slice(data);
        }
        Frame::Read {
            region,
            offset,
            len,
        } => encode_read(buf, *region, *offset, *len),
        Frame::Cas {
            region,
            offset,
            expected,
            new,
        } => encode_cas(buf, *region, *offset, *expected, *new),
        Frame::FetchAdd {
            region,
            offset,
            delta,
        } => encode_fetch_add(buf, *region, *offset, *delta),
        Frame::Send { data, signaled } => encode_send(buf, data, *signaled),
        Frame::Writes(batch) => {
            header(buf, K_WRITES, batch.as_bytes().len());
            buf.extend_from_slice(batch.as_bytes());
        }
        Frame::Fence => encode_fence(buf),
        Frame::Applied { seq } => encode_applied(buf, *seq),
        Frame::ReadData { seq, data } => {
            encode_read_data_header(buf, *seq, data.len());
            buf.extend_from_slice(data);
        }
        Frame::AtomicResult { seq, old } => encode_atomic_result(buf, *seq, *old),
        Frame::Heartbeat => encode_heartbeat(buf),
        Frame::Cut => encode_cut(buf),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(buf: &[u8]) -> Frame<'_> {
        let (f, used) = decode(buf, 1 << 16).expect("valid").expect("complete");
        assert_eq!(used, buf.len());
        for cut in 0..buf.len() {
            assert_eq!(decode(&buf[..cut], 1 << 16), Ok(None), "prefix {cut}");
        }
        f
    }

    #[test]
    fn every_frame_round_trips() {
        let hello = Hello {
            version: PROTOCOL_VERSION,
            cluster_id: 9,
            from: 1,
            to: 2,
            incarnation: 77,
            max_message_len: 4096,
            regions: vec![(0, 4096), (1, 8192)],
        };
        let mut b = Vec::new();
        encode_hello(&mut b, &hello);
        assert_eq!(roundtrip(&b), Frame::Hello(hello.clone()));
        b.clear();
        encode_welcome(&mut b, &hello);
        assert_eq!(roundtrip(&b), Frame::Welcome(hello));
        b.clear();
        encode_refuse(&mut b, "wrong cluster");
        assert_eq!(roundtrip(&b), Frame::Refuse("wrong cluster"));
        b.clear();
        encode_read(&mut b, 1, 2, 3);
        assert_eq!(
            roundtrip(&b),
            Frame::Read {
                region: 1,
                offset: 2,
                len: 3
            }
        );
        b.clear();
        encode_fetch_add(&mut b, 1, 8, 5);
        assert_eq!(
            roundtrip(&b),
            Frame::FetchAdd {
                region: 1,
                offset: 8,
                delta: 5
            }
        );
        b.clear();
        encode_send(&mut b, b"hi", false);
        assert_eq!(
            roundtrip(&b),
            Frame::Send {
                data: b"hi",
                signaled: false
            }
        );
        b.clear();
        encode_fence(&mut b);
        assert_eq!(roundtrip(&b), Frame::Fence);
        b.clear();
        encode_applied(&mut b, 12);
        assert_eq!(roundtrip(&b), Frame::Applied { seq: 12 });
        b.clear();
        encode_read_data_header(&mut b, 4, 2);
        b.extend_from_slice(b"ok");
        assert_eq!(
            roundtrip(&b),
            Frame::ReadData {
                seq: 4,
                data: b"ok"
            }
        );
        b.clear();
        encode_atomic_result(&mut b, 4, 99);
        assert_eq!(roundtrip(&b), Frame::AtomicResult { seq: 4, old: 99 });
        b.clear();
        encode_heartbeat(&mut b);
        assert_eq!(roundtrip(&b), Frame::Heartbeat);
        b.clear();
        encode_cut(&mut b);
        assert_eq!(roundtrip(&b), Frame::Cut);
    }

    #[test]
    fn write_batches_round_trip_and_count_their_records() {
        let mut b = Vec::new();
        let at = open_write_batch(&mut b);
        encode_write_record(&mut b, at, 0, 0, b"");
        encode_write_record(&mut b, at, 255, u32::MAX, &[7u8; SHORT_WRITE_MAX]);
        encode_write_record(&mut b, at, 3, 8, b"12345678");
        assert_eq!(
            b.len(),
            HEADER_LEN + 3 * RECORD_OVERHEAD + SHORT_WRITE_MAX + 8
        );
        let Frame::Writes(w) = roundtrip(&b) else {
            panic!("not a batch")
        };
        assert_eq!(w.count(), 3);
        assert_eq!(Frame::Writes(w).requests(), 3);
        let got: Vec<_> = w
            .iter()
            .map(|r| (r.region_index, r.offset, r.data.len()))
            .collect();
        assert_eq!(
            got,
            [(0, 0, 0), (255, u32::MAX, SHORT_WRITE_MAX), (3, 8, 8)]
        );
        let mut again = Vec::new();
        encode(&mut again, &Frame::Writes(w));
        assert_eq!(again, b);
        // Records go after any earlier frame in the buffer, and the batch's length follows them.
        let mut b = Vec::new();
        encode_fence(&mut b);
        let at = open_write_batch(&mut b);
        write_record_header(&mut b, 1, 16, 2);
        b.extend_from_slice(b"hi");
        close_write_record(&mut b, at);
        let (f, used) = decode(&b, 64).expect("valid").expect("whole");
        assert_eq!((f, used), (Frame::Fence, HEADER_LEN));
        let (f, used) = decode(&b[used..], 64).expect("valid").expect("whole");
        assert_eq!(used, b.len() - HEADER_LEN);
        let Frame::Writes(w) = f else {
            panic!("not a batch")
        };
        let r = w.iter().next().expect("one record");
        assert_eq!((r.region_index, r.offset, r.data), (1, 16, &b"hi"[..]));
    }

    #[test]
    fn malformed_write_batches_are_typed_errors() {
        let batch = |body: &[u8]| {
            let mut b = vec![0u8; HEADER_LEN];
            b[..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
            b[4] = K_WRITES;
            b.extend_from_slice(body);
            b
        };
        let bad = |len| {
            Err(FrameError::BadLength {
                kind: K_WRITES,
                len,
            })
        };
        // An empty batch.
        assert_eq!(decode(&batch(&[]), 64), bad(0));
        // A record head cut short (fewer than 6 bytes).
        assert_eq!(decode(&batch(&[0, 0, 0, 0, 0]), 64), bad(5));
        // A record whose data runs past the body.
        assert_eq!(decode(&batch(&[3, 0, 0, 0, 0, 0, 1, 2]), 64), bad(8));
        // A good record followed by a truncated one.
        assert_eq!(decode(&batch(&[1, 0, 0, 0, 0, 0, 9, 200, 0]), 64), bad(9));
        // A record length of 255 with less data than that.
        let mut body = vec![255, 0, 0, 0, 0, 0];
        body.extend_from_slice(&[0u8; 254]);
        assert_eq!(decode(&batch(&body), 1024), bad(260));
        // A batch over the connection's limit is refused from the header alone.
        assert_eq!(
            decode(&[65, 0, 0, 0, K_WRITES], 64),
            Err(FrameError::Oversized { len: 65, max: 64 })
        );
        // Incomplete, not malformed: more bytes may come.
        let whole = batch(&[2, 0, 0, 0, 0, 0, 1, 2]);
        for cut in 0..whole.len() {
            assert_eq!(decode(&whole[..cut], 64), Ok(None), "prefix {cut}");
        }
        assert!(decode(&whole, 64).is_ok_and(|f| f.is_some()));
    }

    #[test]
    fn malformed_frames_are_typed_errors() {
        assert_eq!(
            decode(&[0, 0, 0, 0, 99], 64),
            Err(FrameError::UnknownKind(99))
        );
        assert_eq!(
            decode(&[1, 0, 0, 0, K_FENCE, 0], 64),
            Err(FrameError::BadLength {
                kind: K_FENCE,
                len: 1
            })
        );
        assert_eq!(
            decode(&[3, 0, 0, 0, K_CAS, 0, 0, 0], 64),
            Err(FrameError::BadLength {
                kind: K_CAS,
                len: 3
            })
        );
        assert_eq!(
            decode(&[65, 0, 0, 0, K_SEND], 64),
            Err(FrameError::Oversized { len: 65, max: 64 })
        );
        let mut b = Vec::new();
        encode_hello(
            &mut b,
            &Hello {
                version: 1,
                cluster_id: 1,
                from: 0,
                to: 1,
                incarnation: 1,
                max_message_len: 1,
                regions: vec![],
            },
        );
        b[5] ^= 0xff;
        assert!(matches!(decode(&b, 64), Err(FrameError::BadMagic(_))));
        // A region count that does not match the body.
        let mut b = Vec::new();
        encode_hello(
            &mut b,
            &Hello {
                version: 1,
                cluster_id: 1,
                from: 0,
                to: 1,
                incarnation: 1,
                max_message_len: 1,
                regions: vec![(0, 8)],
            },
        );
        let count_at = HEADER_LEN + 38 - 4;
        b[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode(&b, 64), Err(FrameError::BadLength { .. })));
        assert_eq!(
            decode(&[2, 0, 0, 0, K_REFUSE, 0xff, 0xfe], 64),
            Err(FrameError::BadUtf8)
        );
    }
}
