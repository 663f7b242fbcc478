//! The side channel: what two nodes tell each other over TCP before their queue pairs connect,
//! and the versioned byte format it travels in.
//!
//! ```
//! use squall_transport::{NodeId, RegionId};
//! use squall_transport_rdma::exchange::{Hello, RemoteRegion};
//! use squall_transport_rdma::provider::{MemoryKeys, QpEndpoint};
//! let keys = MemoryKeys { addr: 4096, len: 64, lkey: 0, rkey: 2 }; // local keys never travel
//! let hello = Hello {
//!     cluster_id: 7,
//!     node: NodeId(1),
//!     qp: QpEndpoint { qp_number: 9, psn: 3, lid: 0, gid: [0; 16] },
//!     control: keys,
//!     regions: vec![RemoteRegion { id: RegionId(0), keys }],
//! };
//! assert_eq!(Hello::decode(&hello.encode()).unwrap(), hello);
//! assert!(Hello::decode(&hello.encode()[..10]).is_err());
//! ```

use std::io::{Read, Write};

use squall_transport::{NodeId, RegionId};
use thiserror::Error;

use crate::provider::{MemoryKeys, QpEndpoint};

/// "SQRD", little-endian.
pub const MAGIC: u32 = 0x4452_5153;
/// The side-channel format version (2 since s27: an accepted link echoes the accepting
/// side's per-attempt nonce after the hellos, which version 1 did not).
pub const VERSION: u16 = 2;
/// The largest hello accepted (bounds what a bad peer can make us allocate).
pub const MAX_HELLO: usize = 64 * 1024;

/// A region a peer registered, with the keys to reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteRegion {
    /// The region.
    pub id: RegionId,
    /// Where it is and its remote key.
    pub keys: MemoryKeys,
}

/// What a node sends a peer at connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The cluster it belongs to.
    pub cluster_id: u64,
    /// Who it is.
    pub node: NodeId,
    /// Its queue pair for this link.
    pub qp: QpEndpoint,
    /// Its control region (fence word).
    pub control: MemoryKeys,
    /// Its registered regions.
    pub regions: Vec<RemoteRegion>,
}

/// Why a hello could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// It ended early.
    #[error("truncated: needed {needed} more bytes")]
    Truncated {
        /// Bytes missing.
        needed: usize,
    },
    /// Not a Squall RDMA hello.
    #[error("bad magic {0:#010x}: the peer is not a Squall RDMA node")]
    Magic(u32),
    /// A version this build does not speak.
    #[error(
        "side-channel version {0}, this build speaks {VERSION}; run the same Squall version on every node"
    )]
    Version(u16),
    /// Bytes after the end.
    #[error("{0} unexpected trailing bytes")]
    Trailing(usize),
    /// A length field beyond the limit.
    #[error("hello of {0} bytes exceeds the {MAX_HELLO}-byte limit")]
    TooLarge(usize),
}

struct Cursor<'a> {
    bytes: &'a [u8],
}

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        if self.bytes.len() < N {
            return Err(DecodeError::Truncated {
                needed: N - self.bytes.len(),
            });
        }
        let (head, rest) = self.bytes.split_at(N);
        self.bytes = rest;
        let mut out = [0u8; N];
        out.copy_from_slice(head);
        Ok(out)
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        self.take().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        self.take().map(u64::from_le_bytes)
    }
    fn keys(&mut self) -> Result<MemoryKeys, DecodeError> {
        Ok(MemoryKeys {
            addr: self.u64()?,
            len: self.u64()?,
            lkey: 0,
            rkey: self.u32()?,
        })
    }
}

fn put_keys(out: &mut Vec<u8>, k: &MemoryKeys) {
    out.extend_from_slice(&k.addr.to_le_bytes());
    out.extend_from_slice(&k.len.to_le_bytes());
    out.extend_from_slice(&k.rkey.to_le_bytes());
}

impl Hello {
    /// The wire form. Local keys are never sent.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.regions.len() * 24);
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.cluster_id.to_le_bytes());
        out.extend_from_slice(&self.node.0.to_le_bytes());
        out.extend_from_slice(&self.qp.qp_number.to_le_bytes());
        out.extend_from_slice(&self.qp.psn.to_le_bytes());
        out.extend_from_slice(&self.qp.lid.to_le_bytes());
        out.extend_from_slice(&self.qp.gid);
        put_keys(&mut out, &self.control);
        out.extend_from_slice(&(self.regions.len() as u16).to_le_bytes());
        for r in &self.regions {
            out.extend_from_slice(&r.id.0.to_le_bytes());
            put_keys(&mut out, &r.keys);
        }
        out
    }

    /// Parses the wire form; never panics, whatever the bytes.
    pub fn decode(bytes: &[u8]) -> Result<Hello, DecodeError> {
        if bytes.len() > MAX_HELLO {
            return Err(DecodeError::TooLarge(bytes.len()));
        }
        let mut c = Cursor { bytes };
        let magic = c.u32()?;
        if magic != MAGIC {
            return Err(DecodeError::Magic(magic));
        }
        let version = c.u16()?;
        if version != VERSION {
            return Err(DecodeError::Version(version));
        }
        let cluster_id = c.u64()?;
        let node = NodeId(c.u32()?);
        let qp = QpEndpoint {
            qp_number: c.u32()?,
            psn: c.u32()?,
            lid: c.u16()?,
            gid: c.take()?,
        };
        let control = c.keys()?;
        let count = c.u16()?;
        let mut regions = Vec::with_capacity(usize::from(count).min(c.bytes.len() / 24));
        for _ in 0..count {
            let id = RegionId(c.u32()?);
            regions.push(RemoteRegion {
                id,
                keys: c.keys()?,
            });
        }
        if !c.bytes.is_empty() {
            return Err(DecodeError::Trailing(c.bytes.len()));
        }
        Ok(Hello {
            cluster_id,
            node,
            qp,
            control,
            regions,
        })
    }

    /// Writes a length-prefixed hello.
    pub fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        let body = self.encode();
        w.write_all(&(body.len() as u32).to_le_bytes())?;
        w.write_all(&body)?;
        w.flush()
    }

    /// Reads a length-prefixed hello, refusing lengths over [`MAX_HELLO`] before allocating.
    pub fn read_from(r: &mut impl Read) -> Result<Hello, ReadError> {
        let mut len = [0u8; 4];
        r.read_exact(&mut len)?;
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_HELLO {
            return Err(ReadError::Decode(DecodeError::TooLarge(len)));
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body)?;
        Ok(Hello::decode(&body)?)
    }
}

/// Reading a hello failed.
#[derive(Debug, Error)]
pub enum ReadError {
    /// The socket failed.
    #[error("side channel: {0}")]
    Io(#[from] std::io::Error),
    /// The bytes were not a valid hello.
    #[error("side channel: {0}")]
    Decode(#[from] DecodeError),
}
