//! The KV operations and results, and their versioned byte encoding (what travels inside the
//! replicated log and the client protocol).

use thiserror::Error;

/// Version of the operation encoding.
pub const OPS_VERSION: u8 = 1;

/// A key-value operation. Keys and values are bytes; keys order lexicographically.
///
/// ```
/// use squall_kv::KvOp;
/// let op = KvOp::Put { key: b"k".to_vec(), value: b"v".to_vec() };
/// assert_eq!(KvOp::decode(&op.encode())?, op);
/// assert!(!op.is_read_only());
/// # Ok::<(), squall_kv::OpsError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvOp {
    /// Read one key.
    Get {
        /// The key.
        key: Vec<u8>,
    },
    /// Write one key.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Remove one key.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// Set `key` to `new` if it currently holds `expected` (`None`: absent).
    Cas {
        /// The key.
        key: Vec<u8>,
        /// The value it must hold.
        expected: Option<Vec<u8>>,
        /// The value to set.
        new: Vec<u8>,
    },
    /// Read up to `limit` keys in `start..end` (an empty `end` means no upper bound).
    Scan {
        /// First key (inclusive).
        start: Vec<u8>,
        /// Last key (exclusive); empty for unbounded.
        end: Vec<u8>,
        /// Most pairs returned.
        limit: u32,
    },
    /// Several operations applied atomically, in order, as one log entry.
    Batch(Vec<KvOp>),
}

/// The result of a [`KvOp`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvResult {
    /// A put or delete was applied.
    Done,
    /// A get's value.
    Value(Option<Vec<u8>>),
    /// Whether a CAS swapped, and the value the key held before.
    Cas {
        /// It swapped.
        swapped: bool,
        /// The value seen.
        previous: Option<Vec<u8>>,
    },
    /// A scan's pairs in key order.
    Pairs(Vec<(Vec<u8>, Vec<u8>)>),
    /// A batch's results, one per operation.
    Batch(Vec<KvResult>),
    /// The operation could not be run (it did not decode); the message says why.
    Invalid(String),
}

/// Bytes that are not a valid KV operation or result.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum OpsError {
    /// The input ended inside a field.
    #[error("truncated KV encoding: {0} is incomplete")]
    Truncated(&'static str),
    /// Wrong version.
    #[error("unsupported KV encoding version {0} (this build speaks {OPS_VERSION})")]
    Version(u8),
    /// Unknown tag.
    #[error("unknown KV {what} tag {tag}")]
    Tag {
        /// Operation or result.
        what: &'static str,
        /// The tag found.
        tag: u8,
    },
    /// Bytes left after a complete encoding.
    #[error("{0} trailing bytes after a KV encoding")]
    Trailing(usize),
    /// Batches nest too deeply.
    #[error("KV batches nest deeper than {0} levels")]
    TooDeep(usize),
    /// Text that is not UTF-8.
    #[error("error text is not UTF-8")]
    Utf8,
}

const MAX_DEPTH: usize = 4;

struct Rd<'a>(&'a [u8]);

impl<'a> Rd<'a> {
    fn take(&mut self, what: &'static str, n: usize) -> Result<&'a [u8], OpsError> {
        if self.0.len() < n {
            return Err(OpsError::Truncated(what));
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Ok(h)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, OpsError> {
        Ok(self.take(what, 1)?[0])
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, OpsError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(what, 4)?);
        Ok(u32::from_le_bytes(b))
    }
    fn bytes(&mut self, what: &'static str) -> Result<Vec<u8>, OpsError> {
        let n = self.u32(what)? as usize;
        Ok(self.take(what, n)?.to_vec())
    }
    fn opt(&mut self, what: &'static str) -> Result<Option<Vec<u8>>, OpsError> {
        match self.u8(what)? {
            0 => Ok(None),
            1 => Ok(Some(self.bytes(what)?)),
            tag => Err(OpsError::Tag { what, tag }),
        }
    }
    /// A count of items that each take at least `min` bytes: refuse counts the input cannot
    /// hold instead of allocating for them.
    fn count(&mut self, what: &'static str, min: usize) -> Result<usize, OpsError> {
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min) > self.0.len() {
            return Err(OpsError::Truncated(what));
        }
        Ok(n)
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&u32::try_from(b.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(b);
}

/// The body of [`KvResult::Pairs`] holding the `n` pairs of `pairs`.
fn put_pairs<'a>(out: &mut Vec<u8>, n: usize, pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>) {
    out.push(4);
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
    for (k, v) in pairs {
        put_bytes(out, k);
        put_bytes(out, v);
    }
}

/// Appends the bytes of `KvResult::Pairs` of the `n` pairs of `pairs` (whose keys and values
/// hold `bytes` bytes in all), written straight from borrowed pairs: a snapshot of a large
/// store without copying every key and value into a `KvResult` first.
pub(crate) fn encode_pairs_into<'a>(
    out: &mut Vec<u8>,
    n: usize,
    bytes: usize,
    pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) {
    out.reserve(6 + bytes + 8 * n);
    out.push(OPS_VERSION);
    put_pairs(out, n, pairs);
}

fn put_opt(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => out.push(0),
        Some(b) => {
            out.push(1);
            put_bytes(out, b);
        }
    }
}

impl KvOp {
    /// Whether the operation only reads (served as a read, not a command).
    pub fn is_read_only(&self) -> bool {
        match self {
            KvOp::Get { .. } | KvOp::Scan { .. } => true,
            KvOp::Batch(ops) => ops.iter().all(KvOp::is_read_only),
            _ => false,
        }
    }

    /// The bytes of the operation.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![OPS_VERSION];
        self.put(&mut out);
        out
    }

    fn put(&self, out: &mut Vec<u8>) {
        match self {
            KvOp::Get { key } => {
                out.push(1);
                put_bytes(out, key);
            }
            KvOp::Put { key, value } => {
                out.push(2);
                put_bytes(out, key);
                put_bytes(out, value);
            }
            KvOp::Delete { key } => {
                out.push(3);
                put_bytes(out, key);
            }
            KvOp::Cas { key, expected, new } => {
                out.push(4);
                put_bytes(out, key);
                put_opt(out, expected.as_deref());
                put_bytes(out, new);
            }
            KvOp::Scan { start, end, limit } => {
                out.push(5);
                put_bytes(out, start);
                put_bytes(out, end);
                out.extend_from_slice(&limit.to_le_bytes());
            }
            KvOp::Batch(ops) => {
                out.push(6);
                out.extend_from_slice(&u32::try_from(ops.len()).unwrap_or(u32::MAX).to_le_bytes());
                for op in ops {
                    op.put(out);
                }
            }
        }
    }

    /// Decodes an operation.
    pub fn decode(bytes: &[u8]) -> Result<KvOp, OpsError> {
        let mut r = Rd(bytes);
        let v = r.u8("version")?;
        if v != OPS_VERSION {
            return Err(OpsError::Version(v));
        }
        let op = KvOp::get(&mut r, 0)?;
        if !r.0.is_empty() {
            return Err(OpsError::Trailing(r.0.len()));
        }
        Ok(op)
    }

    fn get(r: &mut Rd<'_>, depth: usize) -> Result<KvOp, OpsError> {
        Ok(match r.u8("operation tag")? {
            1 => KvOp::Get {
                key: r.bytes("key")?,
            },
            2 => KvOp::Put {
                key: r.bytes("key")?,
                value: r.bytes("value")?,
            },
            3 => KvOp::Delete {
                key: r.bytes("key")?,
            },
            4 => KvOp::Cas {
                key: r.bytes("key")?,
                expected: r.opt("expected")?,
                new: r.bytes("new")?,
            },
            5 => KvOp::Scan {
                start: r.bytes("start")?,
                end: r.bytes("end")?,
                limit: r.u32("limit")?,
            },
            6 => {
                if depth >= MAX_DEPTH {
                    return Err(OpsError::TooDeep(MAX_DEPTH));
                }
                let n = r.count("batch", 5)?;
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    ops.push(KvOp::get(r, depth + 1)?);
                }
                KvOp::Batch(ops)
            }
            tag => {
                return Err(OpsError::Tag {
                    what: "operation",
                    tag,
                });
            }
        })
    }
}

impl KvResult {
    /// The bytes of the result.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![OPS_VERSION];
        self.put(&mut out);
        out
    }

    fn put(&self, out: &mut Vec<u8>) {
        match self {
            KvResult::Done => out.push(1),
            KvResult::Value(v) => {
                out.push(2);
                put_opt(out, v.as_deref());
            }
            KvResult::Cas { swapped, previous } => {
                out.push(3);
                out.push(u8::from(*swapped));
                put_opt(out, previous.as_deref());
            }
            KvResult::Pairs(pairs) => {
                put_pairs(
                    out,
                    pairs.len(),
                    pairs.iter().map(|(k, v)| (&k[..], &v[..])),
                );
            }
            KvResult::Batch(rs) => {
                out.push(5);
                out.extend_from_slice(&u32::try_from(rs.len()).unwrap_or(u32::MAX).to_le_bytes());
                for r in rs {
                    r.put(out);
                }
            }
            KvResult::Invalid(msg) => {
                out.push(6);
                put_bytes(out, msg.as_bytes());
            }
        }
    }

    /// Decodes a result.
    ///
    /// ```
    /// use squall_kv::KvResult;
    /// let r = KvResult::Cas { swapped: false, previous: Some(b"x".to_vec()) };
    /// assert_eq!(KvResult::decode(&r.encode())?, r);
    /// assert!(KvResult::decode(&[1, 99]).is_err());
    /// # Ok::<(), squall_kv::OpsError>(())
    /// ```
    pub fn decode(bytes: &[u8]) -> Result<KvResult, OpsError> {
        let mut r = Rd(bytes);
        let v = r.u8("version")?;
        if v != OPS_VERSION {
            return Err(OpsError::Version(v));
        }
        let res = KvResult::get(&mut r, 0)?;
        if !r.0.is_empty() {
            return Err(OpsError::Trailing(r.0.len()));
        }
        Ok(res)
    }

    fn get(r: &mut Rd<'_>, depth: usize) -> Result<KvResult, OpsError> {
        Ok(match r.u8("result tag")? {
            1 => KvResult::Done,
            2 => KvResult::Value(r.opt("value")?),
            3 => KvResult::Cas {
                swapped: match r.u8("swapped")? {
                    0 => false,
                    1 => true,
                    tag => {
                        return Err(OpsError::Tag {
                            what: "swapped",
                            tag,
                        });
                    }
                },
                previous: r.opt("previous")?,
            },
            4 => {
                let n = r.count("pairs", 8)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    pairs.push((r.bytes("key")?, r.bytes("value")?));
                }
                KvResult::Pairs(pairs)
            }
            5 => {
                if depth >= MAX_DEPTH {
                    return Err(OpsError::TooDeep(MAX_DEPTH));
                }
                let n = r.count("batch", 1)?;
                let mut rs = Vec::with_capacity(n);
                for _ in 0..n {
                    rs.push(KvResult::get(r, depth + 1)?);
                }
                KvResult::Batch(rs)
            }
            6 => KvResult::Invalid(
                String::from_utf8(r.bytes("message")?).map_err(|_| OpsError::Utf8)?,
            ),
            tag => {
                return Err(OpsError::Tag {
                    what: "result",
                    tag,
                });
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..8)
    }

    fn op() -> impl Strategy<Value = KvOp> {
        let leaf = prop_oneof![
            bytes().prop_map(|key| KvOp::Get { key }),
            (bytes(), bytes()).prop_map(|(key, value)| KvOp::Put { key, value }),
            bytes().prop_map(|key| KvOp::Delete { key }),
            (bytes(), proptest::option::of(bytes()), bytes())
                .prop_map(|(key, expected, new)| KvOp::Cas { key, expected, new }),
            (bytes(), bytes(), any::<u32>()).prop_map(|(start, end, limit)| KvOp::Scan {
                start,
                end,
                limit
            }),
        ];
        leaf.prop_recursive(2, 16, 4, |inner| {
            proptest::collection::vec(inner, 0..4).prop_map(KvOp::Batch)
        })
    }

    proptest! {
        #[test]
        fn ops_round_trip(op in op()) {
            prop_assert_eq!(KvOp::decode(&op.encode()), Ok(op));
        }

        #[test]
        fn decoders_never_panic(b in proptest::collection::vec(any::<u8>(), 0..48)) {
            let _ = KvOp::decode(&b);
            let _ = KvResult::decode(&b);
        }
    }

    #[test]
    fn huge_counts_are_refused_without_allocating() {
        let mut b = vec![OPS_VERSION, 6];
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(KvOp::decode(&b), Err(OpsError::Truncated("batch")));
    }
}
