//! Bounds-checked little-endian reading and writing shared by every wire format of the crate.

use thiserror::Error;

/// Bytes that are not a valid encoding. Every decoder of this crate returns this instead of
/// panicking, whatever the input.
///
/// ```
/// use squall_smr::wire::Entry;
/// let err = Entry::decode(&[9, 9]).unwrap_err();
/// assert!(err.to_string().contains("version"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ended inside a field.
    #[error("truncated: {field} needs {need} more bytes, {have} left")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes that were left.
        have: usize,
    },
    /// The format version is not one this build speaks.
    #[error("unsupported {what} version {found} (this build speaks {supported})")]
    Version {
        /// Which format.
        what: &'static str,
        /// The version found.
        found: u8,
        /// The version this build speaks.
        supported: u8,
    },
    /// An unknown kind byte.
    #[error("unknown {what} kind {found}")]
    Kind {
        /// Which format.
        what: &'static str,
        /// The byte found.
        found: u8,
    },
    /// Bytes after the end of a complete encoding.
    #[error("{0} trailing bytes after a complete {1}")]
    Trailing(usize, &'static str),
    /// A length field larger than the configured bound.
    #[error("{field} of {len} bytes exceeds the limit of {max}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// The declared length.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// A checksum did not match.
    #[error("checksum mismatch in {0} (corrupt or torn)")]
    Checksum(&'static str),
    /// Text that is not UTF-8.
    #[error("{0} is not UTF-8")]
    Utf8(&'static str),
}

/// A cursor over bytes that refuses to read past the end.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    pub(crate) fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError::Truncated {
                field,
                need: n,
                have: self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(field, 1)?[0])
    }

    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(field, 4)?);
        Ok(u32::from_le_bytes(b))
    }

    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(field, 8)?);
        Ok(u64::from_le_bytes(b))
    }

    /// A `u32` length followed by that many bytes.
    pub(crate) fn bytes(&mut self, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let len = self.u32(field)? as usize;
        self.take(field, len)
    }

    /// Everything that is left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    /// Checks the version byte.
    pub(crate) fn version(&mut self, what: &'static str, supported: u8) -> Result<(), DecodeError> {
        let found = self.u8("version")?;
        if found != supported {
            return Err(DecodeError::Version {
                what,
                found,
                supported,
            });
        }
        Ok(())
    }

    /// Fails if anything is left.
    pub(crate) fn finish(self, what: &'static str) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Trailing(self.buf.len(), what))
        }
    }
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A `u32` length and the bytes. Lengths beyond `u32::MAX` cannot occur: every caller bounds
/// its payloads far below (backends carry at most a few MiB).
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, u32::try_from(b.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(b);
}
