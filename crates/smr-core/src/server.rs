//! The client-facing TCP server of a replica (tokio).
//!
//! Each connection carries [client protocol](crate::wire) frames; requests are pipelined (a
//! client may send many before reading) and answered as they complete, tagged with the
//! client's request id. A frame that does not decode gets an
//! [`ErrorCode::Malformed`] answer and the connection
//! carries on; a length prefix beyond the configured bound cannot be skipped safely, so it is
//! answered and then that connection (only) is closed.

use std::io;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};

use crate::ConfigError;
use crate::runtime::ReplicaHandle;
use crate::wire::{self, ErrorCode, Request, Response};

/// Settings of the client-facing server.
///
/// ```
/// assert!(squall_smr::server::ServerConfig::default().validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The largest request body accepted (command or query plus its header fields).
    pub max_request: usize,
    /// Responses queued per connection before the server stops reading more requests from it.
    pub per_connection: usize,
    /// How long a request may wait for the replica before it is answered
    /// [`Unavailable`](crate::wire::ErrorCode::Unavailable) and forgotten (an entry the backend
    /// lost, e.g. forwarded to a leader that crashed, would otherwise be waited on forever).
    pub request_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            max_request: 1 << 20,
            per_connection: 4096,
            request_timeout: Duration::from_secs(30),
        }
    }
}

impl ServerConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_request < 32 {
            return Err(ConfigError::new(
                "max_request",
                "must be at least 32 bytes (a command header alone is 24)",
            ));
        }
        if self.per_connection == 0 {
            return Err(ConfigError::new("per_connection", "must be at least 1"));
        }
        if self.request_timeout.is_zero() {
            return Err(ConfigError::new("request_timeout", "must be positive"));
        }
        Ok(())
    }
}

/// Accepts connections on `listener` and serves them from `replica` until the listener fails.
/// Run it as a task on a tokio runtime; one connection's errors never affect another.
///
/// ```no_run
/// # async fn f(handle: squall_smr::ReplicaHandle) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:7000").await?;
/// squall_smr::server::serve(listener, handle, Default::default()).await
/// # }
/// ```
pub async fn serve(
    listener: TcpListener,
    replica: ReplicaHandle,
    cfg: ServerConfig,
) -> io::Result<()> {
    cfg.validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    loop {
        let (stream, peer) = listener.accept().await?;
        let replica = replica.clone();
        let cfg = cfg.clone();
        tokio::spawn(async move {
            if let Err(e) = connection(stream, replica, cfg).await {
                tracing::debug!(%peer, error = %e, "client connection ended");
            }
        });
    }
}

/// Serves one accepted connection from `replica` until the client closes it, as [`serve`]
/// serves each of its connections. For a server that accepts connections itself, e.g. to
/// answer some of them with another protocol (`squall-kv`'s admin requests, told apart by
/// their first bytes) and hand the rest here.
///
/// ```no_run
/// # async fn f(handle: squall_smr::ReplicaHandle) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:7000").await?;
/// let (stream, _) = listener.accept().await?;
/// squall_smr::server::serve_connection(stream, handle, Default::default()).await
/// # }
/// ```
pub async fn serve_connection(
    stream: TcpStream,
    replica: ReplicaHandle,
    cfg: ServerConfig,
) -> io::Result<()> {
    cfg.validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    connection(stream, replica, cfg).await
}

/// One connection, served by one task: it reads frames (a cancel-safe framed reader), hands
/// each request to the replica, and writes responses as they complete, batching those that are
/// ready into one write. No task per request and no writer task: a response costs one wake-up
/// of this task.
async fn connection(
    stream: TcpStream,
    replica: ReplicaHandle,
    cfg: ServerConfig,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let (rd, mut wr) = stream.into_split();
    let codec = LengthDelimitedCodec::builder()
        .little_endian()
        .length_field_length(4)
        .max_frame_length(cfg.max_request + wire::FRAME_HEADER - 4)
        .new_codec();
    let mut frames = FramedRead::new(rd, codec);
    let mut inflight = FuturesUnordered::new();
    let mut out = Vec::new();
    let limit = cfg.request_timeout;
    loop {
        tokio::select! {
            // Answers first: they free room, and the client waits for them.
            Some((id, resp)) = inflight.next(), if !inflight.is_empty() => {
                let resp: Response = resp;
                out.clear();
                out.extend_from_slice(&resp.encode(id));
                // Everything else already answered goes out in the same write.
                while let Some(Some((id, resp))) = inflight.next().now_or_never() {
                    out.extend_from_slice(&resp.encode(id));
                }
                wr.write_all(&out).await?;
            }
            frame = frames.next(), if inflight.len() < cfg.per_connection => {
                let body = match frame {
                    None => break,
                    Some(Ok(body)) => body,
                    Some(Err(e)) => {
                        // An unreadable length cannot be skipped: answer, then close this
                        // connection only.
                        tracing::warn!(error = %e, "unreadable frame length; closing this connection");
                        wr.write_all(&malformed(0, &e.to_string())).await?;
                        break;
                    }
                };
                match Request::decode(&body, cfg.max_request) {
                    Ok((id, req)) => match replica.submit(req) {
                        Ok(pending) => inflight.push(async move {
                            let resp = match tokio::time::timeout(limit, pending).await {
                                Ok(Ok(r)) => r,
                                Ok(Err(_)) => Response::Error {
                                    code: ErrorCode::Unavailable,
                                    message: "the replica shut down".into(),
                                },
                                // Dropping the receiver lets the replica forget the request.
                                Err(_) => Response::Error {
                                    code: ErrorCode::Unavailable,
                                    message: format!("no answer from the replica within {limit:?}"),
                                },
                            };
                            (id, resp)
                        }),
                        Err(busy) => {
                            let r = Response::Error {
                                code: ErrorCode::Busy,
                                message: busy.to_string(),
                            };
                            wr.write_all(&r.encode(id)).await?;
                        }
                    },
                    Err(e) => {
                        tracing::debug!(error = %e, "malformed request");
                        let id = body
                            .get(2..10)
                            .and_then(|b| b.try_into().ok())
                            .map_or(0, u64::from_le_bytes);
                        wr.write_all(&malformed(id, &e.to_string())).await?;
                    }
                }
            }
            else => break,
        }
    }
    // The client closed its side: answer what is still in flight, then close.
    while let Some((id, resp)) = inflight.next().await {
        wr.write_all(&resp.encode(id)).await?;
    }
    Ok(())
}

fn malformed(id: u64, why: &str) -> Vec<u8> {
    Response::Error {
        code: ErrorCode::Malformed,
        message: format!("malformed request: {why}"),
    }
    .encode(id)
}
