//! The async client: one session, one request at a time, timeouts, and fail-over to the next
//! replica with the same command number (so a retried command is applied once).

use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::ConfigError;
use crate::wire::{self, ErrorCode, ReadMode, Request, Response};

/// Settings of a [`Client`].
///
/// ```
/// use squall_smr::ClientConfig;
/// let cfg = ClientConfig::new(vec!["127.0.0.1:7000".parse().unwrap()]);
/// assert!(cfg.validate().is_ok());
/// assert!(ClientConfig::new(vec![]).validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// The replicas' client addresses; the client starts with the first and moves on when one
    /// times out or cannot serve.
    pub replicas: Vec<SocketAddr>,
    /// How long to wait for one attempt's response.
    pub timeout: Duration,
    /// Attempts per request (across replicas) before giving up.
    pub attempts: usize,
    /// The largest response accepted.
    pub max_response: usize,
    /// The session id; `None` picks a random one.
    pub session: Option<u64>,
}

impl ClientConfig {
    /// Defaults for `replicas`: 2 s per attempt, 2 tries per replica, 16 MiB responses.
    pub fn new(replicas: Vec<SocketAddr>) -> ClientConfig {
        let attempts = replicas.len().max(1) * 2;
        ClientConfig {
            replicas,
            timeout: Duration::from_secs(2),
            attempts,
            max_response: 16 << 20,
            session: None,
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.replicas.is_empty() {
            return Err(ConfigError::new(
                "replicas",
                "list at least one replica's client address",
            ));
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::new("timeout", "must be positive"));
        }
        if self.attempts == 0 {
            return Err(ConfigError::new("attempts", "must be at least 1"));
        }
        Ok(())
    }
}

/// Why a request failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    /// A setting is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No replica answered within the attempts. For a command the outcome is unknown: it may
    /// have been applied.
    #[error("no replica answered after {attempts} attempts (last: {last})")]
    Unavailable {
        /// Attempts made.
        attempts: usize,
        /// The last failure.
        last: String,
    },
    /// A replica refused the request for a reason retrying cannot fix.
    #[error("refused ({code:?}): {message}")]
    Refused {
        /// The replica's code.
        code: ErrorCode,
        /// Its explanation.
        message: String,
    },
}

impl ClientError {
    /// Whether a command that failed this way may still have been applied.
    pub fn outcome_unknown(&self) -> bool {
        matches!(self, ClientError::Unavailable { .. })
    }
}

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// One client session.
///
/// ```no_run
/// # async fn f() -> Result<(), squall_smr::ClientError> {
/// use squall_smr::{Client, ClientConfig, wire::ReadMode};
/// let mut c = Client::new(ClientConfig::new(vec!["127.0.0.1:7000".parse().unwrap()]))?;
/// let response = c.execute(b"put x 1").await?;
/// let value = c.read(b"get x", ReadMode::Barrier).await?;
/// # Ok(()) }
/// ```
pub struct Client {
    cfg: ClientConfig,
    session: u64,
    /// The last command number used.
    seq: u64,
    /// The highest command number whose response arrived.
    acked: u64,
    conns: Vec<Option<Conn>>,
    current: usize,
    next_id: u64,
}

impl Client {
    /// A client for the replicas in `cfg` (connections open lazily).
    pub fn new(cfg: ClientConfig) -> Result<Client, ClientError> {
        cfg.validate()?;
        let session = cfg.session.unwrap_or_else(random_session);
        let conns = cfg.replicas.iter().map(|_| None).collect();
        Ok(Client {
            cfg,
            session,
            seq: 0,
            acked: 0,
            conns,
            current: 0,
            next_id: 0,
        })
    }

    /// This client's session id.
    pub fn session(&self) -> u64 {
        self.session
    }

    /// Prefers replica `index` (of the configured list) for the next request.
    pub fn prefer(&mut self, index: usize) {
        self.current = index % self.cfg.replicas.len();
    }

    /// Applies a command and returns the state machine's response. Retries go to the next
    /// replica with the same command number, so the command is applied at most once.
    pub async fn execute(&mut self, command: &[u8]) -> Result<Vec<u8>, ClientError> {
        self.seq += 1;
        let req = Request::Command {
            client: self.session,
            seq: self.seq,
            acked: self.acked,
            payload: command.to_vec(),
        };
        let r = self.call(&req).await;
        if r.is_ok() {
            self.acked = self.seq;
        }
        r
    }

    /// Runs a read-only query, served as `mode` says.
    pub async fn read(&mut self, query: &[u8], mode: ReadMode) -> Result<Vec<u8>, ClientError> {
        let req = Request::Read {
            mode,
            query: query.to_vec(),
        };
        self.call(&req).await
    }

    async fn call(&mut self, req: &Request) -> Result<Vec<u8>, ClientError> {
        let mut last = String::new();
        for _ in 0..self.cfg.attempts {
            let i = self.current;
            self.next_id += 1;
            let id = self.next_id;
            let attempt = tokio::time::timeout(self.cfg.timeout, self.attempt(i, id, req)).await;
            match attempt {
                Ok(Ok(Response::Ok(payload))) => return Ok(payload),
                Ok(Ok(Response::Error { code, message })) => match code {
                    ErrorCode::Busy | ErrorCode::Unavailable => {
                        last = format!("{}: {message}", self.cfg.replicas[i]);
                    }
                    _ => return Err(ClientError::Refused { code, message }),
                },
                Ok(Err(e)) => {
                    last = format!("{}: {e}", self.cfg.replicas[i]);
                    self.conns[i] = None;
                }
                Err(_) => {
                    last = format!(
                        "{}: no answer within {:?}",
                        self.cfg.replicas[i], self.cfg.timeout
                    );
                    // The late answer would arrive on this connection: drop it.
                    self.conns[i] = None;
                }
            }
            tracing::debug!(replica = %self.cfg.replicas[i], %last, "retrying at the next replica");
            self.current = (i + 1) % self.cfg.replicas.len();
        }
        Err(ClientError::Unavailable {
            attempts: self.cfg.attempts,
            last,
        })
    }

    async fn attempt(&mut self, i: usize, id: u64, req: &Request) -> io::Result<Response> {
        if self.conns[i].is_none() {
            let stream = TcpStream::connect(self.cfg.replicas[i]).await?;
            stream.set_nodelay(true)?;
            self.conns[i] = Some(Conn {
                stream,
                buf: Vec::new(),
            });
        }
        let max = self.cfg.max_response;
        let Some(conn) = self.conns[i].as_mut() else {
            return Err(io::Error::other("no connection"));
        };
        conn.stream.write_all(&req.encode(id)).await?;
        loop {
            let mut prefix = [0u8; 4];
            conn.stream.read_exact(&mut prefix).await?;
            let len = wire::frame_len(prefix, max).map_err(invalid)?;
            conn.buf.resize(len, 0);
            conn.stream.read_exact(&mut conn.buf).await?;
            let (got, resp) = Response::decode(&conn.buf, max).map_err(invalid)?;
            if got == id {
                return Ok(resp);
            }
            // An answer to an earlier attempt on this connection: skip it.
        }
    }
}

fn invalid(e: crate::DecodeError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// A random session id (the standard library's per-process random hash keys, plus the time).
fn random_session() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}
