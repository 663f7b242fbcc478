//! A typed client for the replicated KV store.

use squall_smr::wire::ReadMode;
use squall_smr::{Client, ClientConfig, ClientError};
use thiserror::Error;

use crate::ops::{KvOp, KvResult, OpsError};

/// Why a KV request failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum KvError {
    /// The replicated service failed the request.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The response did not decode.
    #[error("undecodable response: {0}")]
    Response(#[from] OpsError),
    /// The replicas could not run the operation.
    #[error("the replicas refused the operation: {0}")]
    Invalid(String),
    /// The response was of the wrong kind for the operation.
    #[error("unexpected response {0:?}")]
    Unexpected(KvResult),
}

/// A KV client session over [`squall_smr::Client`]: writes go through the log exactly once,
/// reads are linearizable (barrier reads by default).
///
/// ```no_run
/// # async fn f() -> Result<(), squall_kv::KvError> {
/// use squall_kv::KvClient;
/// use squall_smr::ClientConfig;
/// let mut kv = KvClient::new(ClientConfig::new(vec!["127.0.0.1:7100".parse().unwrap()]))?;
/// kv.put(b"k", b"v").await?;
/// assert_eq!(kv.get(b"k").await?, Some(b"v".to_vec()));
/// # Ok(()) }
/// ```
pub struct KvClient {
    inner: Client,
    read_mode: ReadMode,
}

impl KvClient {
    /// A client for the replicas in `cfg`.
    pub fn new(cfg: ClientConfig) -> Result<KvClient, KvError> {
        Ok(KvClient {
            inner: Client::new(cfg)?,
            read_mode: ReadMode::Barrier,
        })
    }

    /// How reads are served from now on.
    pub fn set_read_mode(&mut self, mode: ReadMode) {
        self.read_mode = mode;
    }

    /// Prefers replica `index` of the configured list.
    pub fn prefer(&mut self, index: usize) {
        self.inner.prefer(index);
    }

    /// Runs any operation: reads as reads, anything that writes as a command.
    pub async fn run(&mut self, op: &KvOp) -> Result<KvResult, KvError> {
        let bytes = if op.is_read_only() {
            self.inner.read(&op.encode(), self.read_mode).await?
        } else {
            self.inner.execute(&op.encode()).await?
        };
        match KvResult::decode(&bytes)? {
            KvResult::Invalid(why) => Err(KvError::Invalid(why)),
            r => Ok(r),
        }
    }

    /// The value of `key`.
    pub async fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        match self.run(&KvOp::Get { key: key.to_vec() }).await? {
            KvResult::Value(v) => Ok(v),
            other => Err(KvError::Unexpected(other)),
        }
    }

    /// Sets `key` to `value`.
    pub async fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        let op = KvOp::Put {
            key: key.to_vec(),
            value: value.to_vec(),
        };
        self.expect_done(&op).await
    }

    /// Removes `key`.
    pub async fn delete(&mut self, key: &[u8]) -> Result<(), KvError> {
        self.expect_done(&KvOp::Delete { key: key.to_vec() }).await
    }

    /// Sets `key` to `new` if it holds `expected`; returns whether it swapped and what it held.
    pub async fn cas(
        &mut self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: &[u8],
    ) -> Result<(bool, Option<Vec<u8>>), KvError> {
        let op = KvOp::Cas {
            key: key.to_vec(),
            expected: expected.map(<[u8]>::to_vec),
            new: new.to_vec(),
        };
        match self.run(&op).await? {
            KvResult::Cas { swapped, previous } => Ok((swapped, previous)),
            other => Err(KvError::Unexpected(other)),
        }
    }

    /// Up to `limit` pairs with keys in `start..end` (empty `end`: unbounded).
    pub async fn scan(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: u32,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, KvError> {
        let op = KvOp::Scan {
            start: start.to_vec(),
            end: end.to_vec(),
            limit,
        };
        match self.run(&op).await? {
            KvResult::Pairs(p) => Ok(p),
            other => Err(KvError::Unexpected(other)),
        }
    }

    async fn expect_done(&mut self, op: &KvOp) -> Result<(), KvError> {
        match self.run(op).await? {
            KvResult::Done => Ok(()),
            other => Err(KvError::Unexpected(other)),
        }
    }
}
