//! The client-facing TCP server of a replica (tokio).
//!
//! Each connection carries [client protocol](crate::wire) frames; requests are pipelined (a
//! client may send many before reading) and answered as they complete, tagged with the
//! client's request id. A frame that does not decode gets an
//! [`ErrorCode::Malformed`](crate::wire::ErrorCode::Malformed) answer and the connection
//! carries on; a length prefix beyond the configured bound cannot be skipped safely, so it is
//! answered and then that connection (only) is closed.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

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

async fn connection(
    stream: TcpStream,
    replica: ReplicaHandle,
    cfg: ServerConfig,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let (mut rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(cfg.per_connection);
    // The writer drains whatever responses are ready into one buffer per syscall.
    let writer = tokio::spawn(async move {
        let mut buf = Vec::new();
        while let Some(frame) = rx.recv().await {
            buf.clear();
            buf.extend_from_slice(&frame);
            while let Ok(more) = rx.try_recv() {
                buf.extend_from_slice(&more);
            }
            wr.write_all(&buf).await?;
        }
        io::Result::Ok(())
    });
    let max_frame = cfg.max_request + wire::FRAME_HEADER;
    let mut body = Vec::new();
    let result = loop {
        let mut prefix = [0u8; 4];
        match rd.read_exact(&mut prefix).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break Ok(()),
            Err(e) => break Err(e),
        }
        let len = match wire::frame_len(prefix, cfg.max_request) {
            Ok(len) => len,
            Err(e) => {
                tracing::warn!(error = %e, "unreadable frame length; closing this connection");
                let _ = tx.send(malformed(0, &e.to_string())).await;
                break Ok(());
            }
        };
        debug_assert!(len <= max_frame);
        body.resize(len, 0);
        if let Err(e) = rd.read_exact(&mut body).await {
            break Err(e);
        }
        match Request::decode(&body, cfg.max_request) {
            Ok((id, req)) => match replica.submit(req) {
                Ok(pending) => {
                    let tx = tx.clone();
                    let limit = cfg.request_timeout;
                    tokio::spawn(async move {
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
                        let _ = tx.send(resp.encode(id)).await;
                    });
                }
                Err(busy) => {
                    let r = Response::Error {
                        code: ErrorCode::Busy,
                        message: busy.to_string(),
                    };
                    if tx.send(r.encode(id)).await.is_err() {
                        break Ok(());
                    }
                }
            },
            Err(e) => {
                tracing::debug!(error = %e, "malformed request");
                let id = body
                    .get(2..10)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_le_bytes);
                if tx.send(malformed(id, &e.to_string())).await.is_err() {
                    break Ok(());
                }
            }
        }
    };
    drop(tx);
    let _ = writer.await;
    result
}

fn malformed(id: u64, why: &str) -> Vec<u8> {
    Response::Error {
        code: ErrorCode::Malformed,
        message: format!("malformed request: {why}"),
    }
    .encode(id)
}
