//! The operator's requests to one running replica (`squall-kv client … status` and `… leave`),
//! on the replica's client port.
//!
//! An admin connection opens with the 8-byte [`PREAMBLE`] (`SQKVADM1`). Read as a client
//! protocol frame's little-endian length prefix its first four bytes are about 1.4 GB, far
//! beyond any frame a replica accepts (`ServerConfig::max_request`), so no client-protocol
//! connection starts with them and a replica tells the two apart by the first bytes alone
//! ([`serve`]). After the preamble the asker sends one request frame and reads one response
//! frame, each a 4-byte little-endian length and a body of at most [`MAX_FRAME`] bytes; then
//! the replica closes the connection. A body starts with [`ADMIN_VERSION`] and a tag.
//!
//! - [`AdminRequest::Status`] → [`AdminResponse::Status`]: the replica's view, members, role,
//!   whether it serves, and where its leave stands ([`StatusReport`]).
//! - [`AdminRequest::Leave`] → [`AdminResponse::Leave`]: the replica asks its group to let it
//!   leave ([`squall_smr::ReplicaHandle::leave`]) and answers once the leave completed
//!   ([`LeaveOutcome::Left`]; `kv serve` then exits 0), at once when the group holds it back
//!   until the membership changes ([`LeaveOutcome::Held`]: the rest would be no majority, or
//!   the replica is its shard's only one), or when the asker's wait ends: `Held` if it waits
//!   for a transfer and stayed held for [`AdminConfig::settle`], else
//!   [`LeaveOutcome::Pending`]. A held or pending request stays asked and goes through by
//!   itself once nothing holds it back. By default a leave is accepted only from the
//!   replica's own host ([`AdminConfig::leave_from_any_host`]).
//!
//! The decoders never panic: a short, malformed or over-long input is an [`AdminError`]
//! (fuzzed by `fuzz/fuzz_targets/kv_admin.rs`).
//!
//! ```
//! use std::time::Duration;
//! use squall_kv::admin::{AdminRequest, AdminResponse, LeaveOutcome};
//! let req = AdminRequest::Leave { wait: Duration::from_secs(5) };
//! assert_eq!(AdminRequest::decode(&req.encode())?, req);
//! let resp = AdminResponse::Leave(LeaveOutcome::Held("leave held back in view 3".into()));
//! assert_eq!(AdminResponse::decode(&resp.encode())?, resp);
//! # Ok::<(), squall_kv::admin::AdminError>(())
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::time::{Duration, Instant};

use squall_smr::server::ServerConfig;
use squall_smr::{ReplicaHandle, ReplicaStatus};
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};

/// What an admin connection sends first.
pub const PREAMBLE: [u8; 8] = *b"SQKVADM1";

/// The admin encoding's version (the first byte of every body).
pub const ADMIN_VERSION: u8 = 1;

/// The longest admin frame body accepted.
pub const MAX_FRAME: usize = 1 << 16;

/// The longest a leave waits for its outcome, whatever the asker asks.
pub const MAX_LEAVE_WAIT: Duration = Duration::from_secs(600);

/// How long a replica waits for an admin connection's request, and an asker for the
/// replica's answer beyond the leave's wait.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

const TAG_STATUS: u8 = 1;
const TAG_LEAVE: u8 = 2;
const TAG_ERROR: u8 = 3;
const LEAVE_LEFT: u8 = 1;
const LEAVE_HELD: u8 = 2;
const LEAVE_PENDING: u8 = 3;
const LEAVE_REFUSED: u8 = 4;

/// Why an admin exchange failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AdminError {
    /// The input ended inside a field.
    #[error("truncated admin message: {0} is incomplete")]
    Truncated(&'static str),
    /// Another encoding version.
    #[error("unsupported admin encoding version {0} (this build speaks {ADMIN_VERSION})")]
    Version(u8),
    /// An unknown tag.
    #[error("unknown admin {what} tag {tag}")]
    Tag {
        /// What the tag selects.
        what: &'static str,
        /// The tag found.
        tag: u8,
    },
    /// Bytes left after a complete message.
    #[error("{0} trailing bytes after an admin message")]
    Trailing(usize),
    /// Text that is not UTF-8.
    #[error("admin message text ({0}) is not UTF-8")]
    Utf8(&'static str),
    /// A frame longer than [`MAX_FRAME`].
    #[error("admin frame of {0} bytes (at most {MAX_FRAME})")]
    TooLong(usize),
    /// The connection did not start with [`PREAMBLE`].
    #[error("not an admin connection")]
    Preamble,
    /// The peer did not answer in time.
    #[error("no admin answer within {0:?}")]
    Timeout(Duration),
    /// The connection failed.
    #[error("admin connection: {0}")]
    Io(#[from] std::io::Error),
}

/// What an operator asks a replica.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdminRequest {
    /// Where the replica stands ([`StatusReport`]).
    Status,
    /// Leave the group gracefully; answer once it left or is held back, or after `wait`
    /// (at most [`MAX_LEAVE_WAIT`]; encoded in whole milliseconds).
    Leave {
        /// How long the replica waits for the outcome before it answers `Pending`.
        wait: Duration,
    },
}

/// How a leave asked through [`AdminRequest::Leave`] stands when the replica answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaveOutcome {
    /// The group installed a view without the replica (the backend's reason); `kv serve`
    /// exits 0.
    Left(String),
    /// The group holds the leave back (no other member of its shard holds the state, or the
    /// rest would be no majority): why. The request stays asked.
    Held(String),
    /// Neither within the wait: where it stands. The request stays asked.
    Pending(String),
    /// The replica cannot leave (a fixed group, a replica outside any view, one that stopped).
    Refused(String),
}

/// A view as [`StatusReport`] carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ViewReport {
    /// The view number.
    pub id: u64,
    /// Its members' replica ids, in rank order.
    pub members: Vec<u32>,
    /// Its leader, if the backend has one.
    pub leader: Option<u32>,
}

/// Where one replica stands: [`squall_smr::ReplicaStatus`] with the replica's id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatusReport {
    /// The replica's id.
    pub id: u32,
    /// Its last view.
    pub view: Option<ViewReport>,
    /// What it runs in that view (the backend's words; none on a fixed group).
    pub role: Option<String>,
    /// It applies and answers requests.
    pub serving: bool,
    /// It waits for a transferred state.
    pub joining: bool,
    /// It restarts from its logs: why it cannot serve yet.
    pub restarting: Option<String>,
    /// Its group is between a wedge and the next view.
    pub wedged: bool,
    /// It asked to leave.
    pub leaving: bool,
    /// Where its leave stands, as its backend last said.
    pub leave: Option<String>,
    /// The group holds its leave back.
    pub leave_held: bool,
    /// Its leave completed: the backend's reason.
    pub left: Option<String>,
    /// It stopped for another reason: why.
    pub stopped: Option<String>,
}

impl StatusReport {
    /// The report of replica `id` from its [`ReplicaStatus`].
    ///
    /// ```
    /// use squall_kv::admin::StatusReport;
    /// let r = StatusReport::from_status(2, &squall_smr::ReplicaStatus::default());
    /// assert_eq!((r.id, r.serving, r.leave_state()), (2, false, "not asked"));
    /// ```
    pub fn from_status(id: u32, s: &ReplicaStatus) -> StatusReport {
        StatusReport {
            id,
            view: s.view.as_ref().map(|v| ViewReport {
                id: v.id,
                members: v.members.iter().map(|m| m.0).collect(),
                leader: v.leader.map(|l| l.0),
            }),
            role: s.role.clone(),
            serving: s.serving,
            joining: s.joining,
            restarting: s.restarting.clone(),
            wedged: s.wedged,
            leaving: s.leaving,
            leave: s.leave.as_ref().map(|l| l.message.clone()),
            leave_held: s.leave.as_ref().is_some_and(|l| l.held),
            left: s.left.clone(),
            stopped: s.stopped.clone(),
        }
    }

    /// The leave in one word: `not asked`, `asked`, `held`, or `left`.
    pub fn leave_state(&self) -> &'static str {
        if self.left.is_some() {
            "left"
        } else if self.leave_held {
            "held"
        } else if self.leaving {
            "asked"
        } else {
            "not asked"
        }
    }

    /// The report as one JSON object (for `squall-kv client … status --json`).
    ///
    /// ```
    /// use squall_kv::admin::StatusReport;
    /// let mut r = StatusReport::default();
    /// (r.id, r.serving) = (1, true);
    /// assert!(r.to_json().starts_with(r#"{"id":1,"view":null,"#));
    /// ```
    pub fn to_json(&self) -> String {
        let view = match &self.view {
            None => "null".to_owned(),
            Some(v) => format!(
                r#"{{"id":{},"members":[{}],"leader":{}}}"#,
                v.id,
                v.members
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                v.leader.map_or("null".to_owned(), |l| l.to_string())
            ),
        };
        format!(
            r#"{{"id":{},"view":{view},"role":{},"serving":{},"joining":{},"restarting":{},"wedged":{},"leave":{{"state":"{}","status":{},"held":{}}},"left":{},"stopped":{}}}"#,
            self.id,
            json_opt(self.role.as_deref()),
            self.serving,
            self.joining,
            json_opt(self.restarting.as_deref()),
            self.wedged,
            self.leave_state(),
            json_opt(self.leave.as_deref()),
            self.leave_held,
            json_opt(self.left.as_deref()),
            json_opt(self.stopped.as_deref()),
        )
    }
}

impl std::fmt::Display for StatusReport {
    /// The human form, one fact a line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = if let Some(why) = &self.left {
            format!("left the group ({why})")
        } else if let Some(why) = &self.stopped {
            format!("stopped ({why})")
        } else if let Some(why) = &self.restarting {
            format!("restarting ({why})")
        } else if self.joining {
            "joining (waiting for its state)".to_owned()
        } else if self.wedged {
            "wedged (a view change is under way)".to_owned()
        } else if self.serving {
            "serving".to_owned()
        } else {
            "not serving".to_owned()
        };
        writeln!(f, "replica {}: {state}", self.id)?;
        match &self.view {
            Some(v) => {
                write!(f, "view {}: members {:?}", v.id, v.members)?;
                match v.leader {
                    Some(l) => writeln!(f, ", leader {l}")?,
                    None => writeln!(f)?,
                }
            }
            None => writeln!(f, "view: none yet")?,
        }
        writeln!(f, "role: {}", self.role.as_deref().unwrap_or("-"))?;
        match &self.leave {
            Some(s) => write!(f, "leave: {} ({s})", self.leave_state()),
            None => write!(f, "leave: {}", self.leave_state()),
        }
    }
}

/// `s` as a JSON string, or `null`.
fn json_opt(s: Option<&str>) -> String {
    let Some(s) = s else {
        return "null".to_owned();
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What a replica answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdminResponse {
    /// To [`AdminRequest::Status`].
    Status(StatusReport),
    /// To [`AdminRequest::Leave`].
    Leave(LeaveOutcome),
    /// The request could not be served (it did not decode, the replica is busy).
    Error(String),
}

struct Rd<'a>(&'a [u8]);

impl<'a> Rd<'a> {
    fn take(&mut self, what: &'static str, n: usize) -> Result<&'a [u8], AdminError> {
        if self.0.len() < n {
            return Err(AdminError::Truncated(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, AdminError> {
        Ok(self.take(what, 1)?[0])
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, AdminError> {
        let b = self.take(what, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, AdminError> {
        let b = self.take(what, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn bool(&mut self, what: &'static str) -> Result<bool, AdminError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            tag => Err(AdminError::Tag { what, tag }),
        }
    }

    fn text(&mut self, what: &'static str) -> Result<String, AdminError> {
        let n = self.u32(what)? as usize;
        let b = self.take(what, n)?;
        String::from_utf8(b.to_vec()).map_err(|_| AdminError::Utf8(what))
    }

    fn opt_text(&mut self, what: &'static str) -> Result<Option<String>, AdminError> {
        Ok(if self.bool(what)? {
            Some(self.text(what)?)
        } else {
            None
        })
    }

    fn header(&mut self, what: &'static str) -> Result<u8, AdminError> {
        let v = self.u8("version")?;
        if v != ADMIN_VERSION {
            return Err(AdminError::Version(v));
        }
        self.u8(what)
    }

    fn end(&self) -> Result<(), AdminError> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(AdminError::Trailing(n)),
        }
    }
}

fn put_text(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_opt_text(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            out.push(1);
            put_text(out, s);
        }
        None => out.push(0),
    }
}

impl AdminRequest {
    /// The request's body: version, tag, and for a leave its wait in milliseconds (`u64`
    /// little-endian).
    pub fn encode(&self) -> Vec<u8> {
        match self {
            AdminRequest::Status => vec![ADMIN_VERSION, TAG_STATUS],
            AdminRequest::Leave { wait } => {
                let mut out = vec![ADMIN_VERSION, TAG_LEAVE];
                let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                out.extend_from_slice(&ms.to_le_bytes());
                out
            }
        }
    }

    /// Decodes a request body; never panics.
    pub fn decode(bytes: &[u8]) -> Result<AdminRequest, AdminError> {
        let mut r = Rd(bytes);
        let req = match r.header("request")? {
            TAG_STATUS => AdminRequest::Status,
            TAG_LEAVE => AdminRequest::Leave {
                wait: Duration::from_millis(r.u64("leave wait")?),
            },
            tag => {
                return Err(AdminError::Tag {
                    what: "request",
                    tag,
                });
            }
        };
        r.end()?;
        Ok(req)
    }
}

impl AdminResponse {
    /// The response's body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![ADMIN_VERSION];
        match self {
            AdminResponse::Status(s) => {
                out.push(TAG_STATUS);
                out.extend_from_slice(&s.id.to_le_bytes());
                match &s.view {
                    Some(v) => {
                        out.push(1);
                        out.extend_from_slice(&v.id.to_le_bytes());
                        out.extend_from_slice(&(v.members.len() as u32).to_le_bytes());
                        for m in &v.members {
                            out.extend_from_slice(&m.to_le_bytes());
                        }
                        match v.leader {
                            Some(l) => {
                                out.push(1);
                                out.extend_from_slice(&l.to_le_bytes());
                            }
                            None => out.push(0),
                        }
                    }
                    None => out.push(0),
                }
                put_opt_text(&mut out, s.role.as_deref());
                out.push(u8::from(s.serving));
                out.push(u8::from(s.joining));
                put_opt_text(&mut out, s.restarting.as_deref());
                out.push(u8::from(s.wedged));
                out.push(u8::from(s.leaving));
                put_opt_text(&mut out, s.leave.as_deref());
                out.push(u8::from(s.leave_held));
                put_opt_text(&mut out, s.left.as_deref());
                put_opt_text(&mut out, s.stopped.as_deref());
            }
            AdminResponse::Leave(o) => {
                out.push(TAG_LEAVE);
                let (tag, text) = match o {
                    LeaveOutcome::Left(t) => (LEAVE_LEFT, t),
                    LeaveOutcome::Held(t) => (LEAVE_HELD, t),
                    LeaveOutcome::Pending(t) => (LEAVE_PENDING, t),
                    LeaveOutcome::Refused(t) => (LEAVE_REFUSED, t),
                };
                out.push(tag);
                put_text(&mut out, text);
            }
            AdminResponse::Error(t) => {
                out.push(TAG_ERROR);
                put_text(&mut out, t);
            }
        }
        out
    }

    /// Decodes a response body; never panics (a member count is checked against the bytes
    /// left before anything is allocated for it).
    pub fn decode(bytes: &[u8]) -> Result<AdminResponse, AdminError> {
        let mut r = Rd(bytes);
        let resp = match r.header("response")? {
            TAG_STATUS => {
                let id = r.u32("replica id")?;
                let view = if r.bool("view")? {
                    let vid = r.u64("view id")?;
                    let n = r.u32("member count")? as usize;
                    if n > r.0.len() / 4 {
                        return Err(AdminError::Truncated("members"));
                    }
                    let members = (0..n)
                        .map(|_| r.u32("members"))
                        .collect::<Result<Vec<_>, _>>()?;
                    let leader = if r.bool("leader")? {
                        Some(r.u32("leader")?)
                    } else {
                        None
                    };
                    Some(ViewReport {
                        id: vid,
                        members,
                        leader,
                    })
                } else {
                    None
                };
                AdminResponse::Status(StatusReport {
                    id,
                    view,
                    role: r.opt_text("role")?,
                    serving: r.bool("serving")?,
                    joining: r.bool("joining")?,
                    restarting: r.opt_text("restarting")?,
                    wedged: r.bool("wedged")?,
                    leaving: r.bool("leaving")?,
                    leave: r.opt_text("leave status")?,
                    leave_held: r.bool("leave held")?,
                    left: r.opt_text("left")?,
                    stopped: r.opt_text("stopped")?,
                })
            }
            TAG_LEAVE => {
                let tag = r.u8("leave outcome")?;
                let text = r.text("leave outcome")?;
                AdminResponse::Leave(match tag {
                    LEAVE_LEFT => LeaveOutcome::Left(text),
                    LEAVE_HELD => LeaveOutcome::Held(text),
                    LEAVE_PENDING => LeaveOutcome::Pending(text),
                    LEAVE_REFUSED => LeaveOutcome::Refused(text),
                    tag => {
                        return Err(AdminError::Tag {
                            what: "leave outcome",
                            tag,
                        });
                    }
                })
            }
            TAG_ERROR => AdminResponse::Error(r.text("error")?),
            tag => {
                return Err(AdminError::Tag {
                    what: "response",
                    tag,
                });
            }
        };
        r.end()?;
        Ok(resp)
    }
}

async fn write_frame(s: &mut TcpStream, body: &[u8]) -> Result<(), AdminError> {
    if body.len() > MAX_FRAME {
        return Err(AdminError::TooLong(body.len()));
    }
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    s.write_all(&out).await?;
    Ok(())
}

async fn read_frame(s: &mut TcpStream) -> Result<Vec<u8>, AdminError> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await?;
    let n = u32::from_le_bytes(len) as usize;
    if n > MAX_FRAME {
        return Err(AdminError::TooLong(n));
    }
    let mut body = vec![0u8; n];
    s.read_exact(&mut body).await?;
    Ok(body)
}

/// Sends `req` to the replica whose client port is `addr` and returns its answer. The
/// answer is waited for [`ADMIN_TIMEOUT`], plus a leave's own wait.
///
/// ```no_run
/// # async fn f() -> Result<(), squall_kv::admin::AdminError> {
/// use squall_kv::admin::{AdminRequest, AdminResponse, ask};
/// if let AdminResponse::Status(s) = ask("127.0.0.1:7100".parse().unwrap(), &AdminRequest::Status).await? {
///     println!("{s}");
/// }
/// # Ok(()) }
/// ```
pub async fn ask(addr: SocketAddr, req: &AdminRequest) -> Result<AdminResponse, AdminError> {
    let limit = match req {
        AdminRequest::Leave { wait } => ADMIN_TIMEOUT + (*wait).min(MAX_LEAVE_WAIT),
        AdminRequest::Status => ADMIN_TIMEOUT,
    };
    let exchange = async {
        let mut s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let body = req.encode();
        let mut first = PREAMBLE.to_vec();
        first.extend_from_slice(&(body.len() as u32).to_le_bytes());
        first.extend_from_slice(&body);
        s.write_all(&first).await?;
        let body = read_frame(&mut s).await?;
        AdminResponse::decode(&body)
    };
    tokio::time::timeout(limit, exchange)
        .await
        .map_err(|_| AdminError::Timeout(limit))?
}

/// Admin connections being answered now (a replica that left waits for them before its
/// process exits, so the asker reads the outcome).
#[derive(Clone, Debug, Default)]
pub struct InFlight(Arc<Answering>);

/// The count behind [`InFlight`], and the wake-up of a [`drained`](InFlight::drained) wait.
#[derive(Debug, Default)]
struct Answering {
    count: AtomicUsize,
    idle: Notify,
}

impl InFlight {
    /// How many are being answered.
    pub fn count(&self) -> usize {
        self.0.count.load(AtomicOrdering::Acquire)
    }

    /// Waits until none is being answered, at most `within`.
    pub async fn drained(&self, within: Duration) {
        let until = Instant::now() + within;
        loop {
            // Registered before the count is read, so a last answer ending between the two
            // still wakes this wait.
            let idle = self.0.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            let left = until.saturating_duration_since(Instant::now());
            if tokio::time::timeout(left, idle).await.is_err() {
                return;
            }
        }
    }
}

struct Counted(Arc<Answering>);

impl Drop for Counted {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, AtomicOrdering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// The most admin connections [`serve`] answers at once ([`AdminConfig::max_connections`]'s
/// default). A leave's answer can take up to [`MAX_LEAVE_WAIT`], so without a cap anyone
/// reaching the client port could hold any number of tasks; one beyond it is answered
/// [`AdminResponse::Error`] at once.
pub const MAX_ADMIN_CONNECTIONS: usize = 16;

/// How [`serve`] answers admin connections.
///
/// ```
/// use std::time::Duration;
/// use squall_kv::admin::AdminConfig;
/// let c = AdminConfig::new(Duration::from_millis(500));
/// assert_eq!(c.settle, Duration::from_millis(500));
/// assert!(!c.leave_from_any_host);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdminConfig {
    /// How long a leave that waits for a transfer (held back until named members hold the
    /// state) must have stayed held, continuously, for the answer at the end of the wait to
    /// be [`LeaveOutcome::Held`] rather than [`LeaveOutcome::Pending`]. `kv serve` sets the
    /// cluster's suspicion timeout (`heartbeat_timeout_ms`): just after a leave is asked the
    /// leaver counts no other holder until the members' published words land (a round or
    /// two; a member silent for a whole suspicion timeout is suspected instead), so a hold
    /// seen for less than that may be only that lag.
    pub settle: Duration,
    /// The most admin connections answered at once ([`MAX_ADMIN_CONNECTIONS`]).
    pub max_connections: usize,
    /// Accept [`AdminRequest::Leave`] from any host. By default only from a loopback
    /// address (the replica's own host): a leave is for good, and the client port carries
    /// no authentication. [`AdminRequest::Status`] is answered to anyone.
    pub leave_from_any_host: bool,
}

impl AdminConfig {
    /// The defaults with `settle` ([`settle`](Self::settle)).
    pub fn new(settle: Duration) -> AdminConfig {
        AdminConfig {
            settle,
            max_connections: MAX_ADMIN_CONNECTIONS,
            leave_from_any_host: false,
        }
    }
}

/// The client-protocol frame length that [`PREAMBLE`]'s first four bytes read as: a
/// [`ServerConfig::max_request`] at or above it would let a client frame start like an
/// admin connection ([`serve`] refuses such a setting).
pub const PREAMBLE_AS_LENGTH: usize =
    u32::from_le_bytes([PREAMBLE[0], PREAMBLE[1], PREAMBLE[2], PREAMBLE[3]]) as usize;

/// Accepts connections on `listener` for `replica`: an admin connection ([`PREAMBLE`]) is
/// answered here, any other is served as a client-protocol connection
/// ([`squall_smr::server::serve_connection`]). Runs until the listener fails. `in_flight`
/// counts the admin connections being answered. Refuses (`InvalidInput`) a `cfg` that does
/// not validate, or whose `max_request` reaches [`PREAMBLE_AS_LENGTH`] (a client frame could
/// then start with the preamble's bytes).
pub async fn serve(
    listener: TcpListener,
    replica: ReplicaHandle,
    cfg: ServerConfig,
    admin: AdminConfig,
    in_flight: InFlight,
) -> std::io::Result<()> {
    cfg.validate()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    if cfg.max_request >= PREAMBLE_AS_LENGTH {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "max_request {} must be below {PREAMBLE_AS_LENGTH} (the admin preamble read as a frame length), or admin and client connections cannot be told apart",
                cfg.max_request
            ),
        ));
    }
    let slots = Arc::new(Semaphore::new(admin.max_connections));
    loop {
        let (stream, peer) = listener.accept().await?;
        let replica = replica.clone();
        let cfg = cfg.clone();
        let admin = admin.clone();
        let in_flight = in_flight.clone();
        let slots = Arc::clone(&slots);
        tokio::spawn(async move {
            match is_admin(&stream).await {
                Ok(true) => {
                    in_flight.0.count.fetch_add(1, AtomicOrdering::AcqRel);
                    let _counted = Counted(Arc::clone(&in_flight.0));
                    let Ok(_slot) = slots.try_acquire_owned() else {
                        tracing::warn!(%peer, "too many admin connections; refusing one");
                        let _ = refuse(stream, "too many admin connections; ask again").await;
                        return;
                    };
                    if let Err(e) = answer(stream, peer, &replica, &admin).await {
                        tracing::warn!(%peer, error = %e, "admin connection failed");
                    }
                }
                Ok(false) => {
                    if let Err(e) = squall_smr::server::serve_connection(stream, replica, cfg).await
                    {
                        tracing::debug!(%peer, error = %e, "client connection ended");
                    }
                }
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "connection ended before its first bytes")
                }
            }
        });
    }
}

/// Whether the connection starts with [`PREAMBLE`], from its first bytes (peeked, not
/// consumed). A connection that sends a prefix of it and then nothing for
/// [`ADMIN_TIMEOUT`] is an error.
async fn is_admin(stream: &TcpStream) -> std::io::Result<bool> {
    let until = Instant::now() + ADMIN_TIMEOUT;
    let mut buf = [0u8; PREAMBLE.len()];
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 || buf[..n] != PREAMBLE[..n] {
            // Closed, or not the preamble: the client protocol's server handles it.
            return Ok(false);
        }
        if n == PREAMBLE.len() {
            return Ok(true);
        }
        if Instant::now() > until {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "a partial admin preamble, then nothing",
            ));
        }
        // A prefix of the preamble so far: the rest is on its way.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Answers an admin connection [`AdminResponse::Error`] `why` without reading its request.
async fn refuse(mut stream: TcpStream, why: &str) -> Result<(), AdminError> {
    write_frame(&mut stream, &AdminResponse::Error(why.into()).encode()).await?;
    stream.shutdown().await?;
    Ok(())
}

/// Answers one admin connection from `peer`.
async fn answer(
    mut stream: TcpStream,
    peer: SocketAddr,
    replica: &ReplicaHandle,
    admin: &AdminConfig,
) -> Result<(), AdminError> {
    let mut pre = [0u8; PREAMBLE.len()];
    stream.read_exact(&mut pre).await?;
    if pre != PREAMBLE {
        return Err(AdminError::Preamble);
    }
    let body = tokio::time::timeout(ADMIN_TIMEOUT, read_frame(&mut stream))
        .await
        .map_err(|_| AdminError::Timeout(ADMIN_TIMEOUT))?;
    let resp = match body {
        // A length beyond the bound: answered, then the connection is closed unread.
        Err(e @ AdminError::TooLong(_)) => AdminResponse::Error(format!("the request: {e}")),
        Err(e) => return Err(e),
        Ok(body) => match AdminRequest::decode(&body) {
            Err(e) => AdminResponse::Error(format!("the request did not decode: {e}")),
            Ok(AdminRequest::Status) => {
                match status_within(replica, Instant::now() + ADMIN_TIMEOUT).await {
                    Polled::Got(s) => {
                        AdminResponse::Status(StatusReport::from_status(replica.id().0, &s))
                    }
                    Polled::Busy => AdminResponse::Error(BUSY.into()),
                    Polled::TimedOut => AdminResponse::Error(format!(
                        "the replica did not answer within {ADMIN_TIMEOUT:?}; ask again"
                    )),
                    Polled::Gone => AdminResponse::Error(stopped(replica)),
                }
            }
            Ok(AdminRequest::Leave { .. })
                if !admin.leave_from_any_host && !peer.ip().is_loopback() =>
            {
                tracing::warn!(%peer, "a leave asked from another host: refused");
                AdminResponse::Leave(LeaveOutcome::Refused(format!(
                    "a leave is accepted only from this replica's host (asked from {}); `serve --admin-leave-from-any-host` accepts it from anywhere",
                    peer.ip()
                )))
            }
            Ok(AdminRequest::Leave { wait }) => {
                leave(replica, wait.min(MAX_LEAVE_WAIT), admin.settle).await
            }
        },
    };
    write_frame(&mut stream, &resp.encode()).await?;
    stream.shutdown().await?;
    Ok(())
}

/// The answer when the replica's job queue is full.
const BUSY: &str = "the replica is busy (its request queue is full); ask again";

/// Why the replica answers nothing: it stopped, or it is shutting down.
fn stopped(replica: &ReplicaHandle) -> String {
    match replica.backend_stopped() {
        Some(e) => format!("the replica stopped: {e}"),
        None => "the replica is shutting down".into(),
    }
}

/// What one status round trip to the replica's thread gave.
enum Polled {
    /// Its status.
    Got(ReplicaStatus),
    /// Its job queue was full: nothing was asked.
    Busy,
    /// No answer by the deadline.
    TimedOut,
    /// Its thread ended (it stopped, or is shutting down).
    Gone,
}

/// Asks the replica's status and waits for it until `by`.
async fn status_within(replica: &ReplicaHandle, by: Instant) -> Polled {
    let Ok(rx) = replica.status() else {
        return Polled::Busy;
    };
    match tokio::time::timeout(by.saturating_duration_since(Instant::now()), rx).await {
        Ok(Ok(s)) => Polled::Got(s),
        Ok(Err(_)) => Polled::Gone,
        Err(_) => Polled::TimedOut,
    }
}

/// How often a leave's outcome is looked at.
const LEAVE_POLL: Duration = Duration::from_millis(20);

/// Asks the replica to leave and answers, at most `wait` later (plus the round trips, each
/// bounded: the asker waits [`ADMIN_TIMEOUT`] beyond `wait`):
///
/// - [`LeaveOutcome::Left`] once the leave completed;
/// - [`LeaveOutcome::Held`] at once when the hold needs a membership change (the rest would
///   be no majority, or this replica is its shard's only one: nothing clears it by itself);
///   at the end of the wait when it waits for a transfer and stayed held, continuously, for
///   at least `settle` ([`AdminConfig::settle`]);
/// - [`LeaveOutcome::Pending`] at the end of the wait otherwise, or when a round trip to the
///   replica's thread took past its bound;
/// - [`LeaveOutcome::Refused`] when the replica refused the request, or stopped (for another
///   reason than the leave: [`ReplicaHandle::backend_stopped`]);
/// - [`AdminResponse::Error`] when its job queue was full when asked (nothing was asked).
async fn leave(replica: &ReplicaHandle, wait: Duration, settle: Duration) -> AdminResponse {
    use AdminResponse::Leave as L;
    if let Some(why) = replica.left_reason() {
        return L(LeaveOutcome::Left(why));
    }
    let start = Instant::now();
    let until = start + wait;
    // Round trips may run past the wait by at most half of what the asker allows beyond it.
    let answer_by = until + ADMIN_TIMEOUT / 2;
    let Ok(asked) = replica.leave() else {
        return AdminResponse::Error(BUSY.into());
    };
    match tokio::time::timeout(answer_by.saturating_duration_since(start), asked).await {
        Ok(Ok(Ok(()))) => tracing::info!("leave asked by an operator"),
        Ok(Ok(Err(e))) => return L(LeaveOutcome::Refused(e.to_string())),
        Ok(Err(_)) => return L(LeaveOutcome::Refused(stopped(replica))),
        Err(_) => {
            return L(LeaveOutcome::Pending(
                "the replica has not taken the request yet (it stays queued)".into(),
            ));
        }
    }
    let mut held_since: Option<Instant> = None;
    loop {
        if let Some(why) = replica.left_reason() {
            return L(LeaveOutcome::Left(why));
        }
        if let Some(e) = replica.backend_stopped() {
            return L(LeaveOutcome::Refused(format!(
                "the replica stopped before its leave completed: {e}"
            )));
        }
        let polled = status_within(replica, answer_by.min(Instant::now() + ADMIN_TIMEOUT)).await;
        let now = Instant::now();
        let last = match polled {
            Polled::Got(s) => {
                let message = s.leave.as_ref().map(|l| l.message.clone());
                match s.leave {
                    Some(l) if l.blocked => return L(LeaveOutcome::Held(l.message)),
                    Some(l) if l.held => {
                        let since = *held_since.get_or_insert(now);
                        if now >= until && now.duration_since(since) >= settle {
                            return L(LeaveOutcome::Held(l.message));
                        }
                    }
                    _ => held_since = None,
                }
                message.unwrap_or_else(|| "asked".into())
            }
            // A full queue: this poll is skipped.
            Polled::Busy => "asked (the replica was busy when last asked)".into(),
            Polled::TimedOut => {
                return L(LeaveOutcome::Pending(
                    "asked; the replica did not answer its status in time".into(),
                ));
            }
            // Its thread ended: the checks above say why, at the next turn.
            Polled::Gone => {
                if replica.left_reason().is_none() && replica.backend_stopped().is_none() {
                    return AdminResponse::Error(stopped(replica));
                }
                continue;
            }
        };
        if now >= until {
            return L(LeaveOutcome::Pending(last));
        }
        tokio::select! {
            why = replica.left() => return L(LeaveOutcome::Left(why)),
            _ = replica.stopped() => {}
            _ = tokio::time::sleep(LEAVE_POLL.min(until - now)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    /// One response of every kind (the fuzz seeds are these).
    pub(crate) fn samples() -> Vec<AdminResponse> {
        vec![
            AdminResponse::Status(StatusReport {
                id: 2,
                view: Some(ViewReport {
                    id: 3,
                    members: vec![0, 1, 2],
                    leader: Some(0),
                }),
                role: Some(
                    "subgroup 0 shard 0 of view 3, members [0, 1, 2], holds the state".into(),
                ),
                serving: true,
                leaving: true,
                leave: Some("leave held back in view 3: \"quoted\"".into()),
                leave_held: true,
                ..StatusReport::default()
            }),
            AdminResponse::Status(StatusReport {
                id: 7,
                restarting: Some("waiting for members [1]".into()),
                left: Some("left: view 4".into()),
                stopped: Some("x".into()),
                joining: true,
                wedged: true,
                view: Some(ViewReport {
                    id: 0,
                    members: Vec::new(),
                    leader: None,
                }),
                ..StatusReport::default()
            }),
            AdminResponse::Leave(LeaveOutcome::Left(
                "left: view 4 was installed without it".into(),
            )),
            AdminResponse::Leave(LeaveOutcome::Held("held".into())),
            AdminResponse::Leave(LeaveOutcome::Pending("asked in view 2".into())),
            AdminResponse::Leave(LeaveOutcome::Refused("fixed group".into())),
            AdminResponse::Error("busy".into()),
        ]
    }

    #[test]
    fn every_message_round_trips_and_every_cut_or_extension_is_refused() {
        let reqs = [
            AdminRequest::Status,
            AdminRequest::Leave {
                wait: Duration::from_millis(1500),
            },
        ];
        for req in &reqs {
            let b = req.encode();
            assert_eq!(&AdminRequest::decode(&b).unwrap(), req);
            for cut in 0..b.len() {
                assert!(
                    AdminRequest::decode(&b[..cut]).is_err(),
                    "{req:?} cut at {cut}"
                );
            }
            let mut longer = b.clone();
            longer.push(0);
            assert!(matches!(
                AdminRequest::decode(&longer),
                Err(AdminError::Trailing(1))
            ));
        }
        for resp in samples() {
            let b = resp.encode();
            assert_eq!(AdminResponse::decode(&b).unwrap(), resp);
            for cut in 0..b.len() {
                assert!(
                    AdminResponse::decode(&b[..cut]).is_err(),
                    "{resp:?} cut at {cut}"
                );
            }
            let mut longer = b.clone();
            longer.push(0);
            assert!(AdminResponse::decode(&longer).is_err());
        }
        assert!(matches!(
            AdminRequest::decode(&[2, TAG_STATUS]),
            Err(AdminError::Version(2))
        ));
        assert!(matches!(
            AdminRequest::decode(&[ADMIN_VERSION, 9]),
            Err(AdminError::Tag { tag: 9, .. })
        ));
    }

    /// The fuzz target's seeds (`fuzz/seeds/kv_admin`) are whole messages of each kind.
    #[test]
    fn the_fuzz_seeds_decode_whole() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/kv_admin");
        let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
        assert_eq!(
            AdminRequest::decode(&read("request_status")).unwrap(),
            AdminRequest::Status
        );
        assert_eq!(
            AdminRequest::decode(&read("request_leave")).unwrap(),
            AdminRequest::Leave {
                wait: Duration::from_millis(1500)
            }
        );
        assert_eq!(
            AdminResponse::decode(&read("response_status")).unwrap(),
            samples()[0]
        );
        assert_eq!(
            AdminResponse::decode(&read("response_leave_held")).unwrap(),
            AdminResponse::Leave(LeaveOutcome::Held("held".into()))
        );
        assert_eq!(
            AdminResponse::decode(&read("response_error")).unwrap(),
            AdminResponse::Error("busy".into())
        );
    }

    #[test]
    fn a_huge_member_count_is_refused_before_any_allocation() {
        let mut b = vec![ADMIN_VERSION, TAG_STATUS, 0, 0, 0, 0, 1];
        b.extend_from_slice(&5u64.to_le_bytes());
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            AdminResponse::decode(&b),
            Err(AdminError::Truncated("members"))
        ));
    }

    #[test]
    fn the_preamble_is_no_client_protocol_frame() {
        let as_len = u32::from_le_bytes([PREAMBLE[0], PREAMBLE[1], PREAMBLE[2], PREAMBLE[3]]);
        assert!(as_len as usize > ServerConfig::default().max_request * 1000);
    }

    #[test]
    fn the_json_form_escapes_text_and_names_every_field() {
        let AdminResponse::Status(s) = &samples()[0] else {
            panic!("the first sample is a status");
        };
        let j = s.to_json();
        assert!(
            j.contains(r#""view":{"id":3,"members":[0,1,2],"leader":0}"#),
            "{j}"
        );
        assert!(j.contains(r#""leave":{"state":"held","status":"leave held back in view 3: \"quoted\"","held":true}"#), "{j}");
        assert!(j.ends_with(r#""left":null,"stopped":null}"#), "{j}");
        let human = s.to_string();
        assert!(
            human.starts_with("replica 2: serving\nview 3: members [0, 1, 2], leader 0\n"),
            "{human}"
        );
    }

    /// What the scripted backend of [`Scripted`] says; the test changes it as it goes.
    #[derive(Default)]
    struct Script {
        asked: bool,
        /// The leave status once asked.
        report: Option<squall_smr::LeaveReport>,
        /// The backend's stop.
        stop: Option<String>,
        /// Its poll blocks while set (the driver takes no job).
        stuck: bool,
    }

    /// A membership backend whose leave and stop a test scripts.
    struct Scripted(Arc<std::sync::Mutex<Script>>);

    impl squall_ordering::TotalOrder for Scripted {
        fn me(&self) -> squall_transport::NodeId {
            squall_transport::NodeId(2)
        }
        fn submit(&mut self, _: &[u8]) -> Result<(), squall_ordering::SubmitError> {
            Err(squall_ordering::SubmitError::WindowFull)
        }
        fn poll(
            &mut self,
            _: &mut Vec<squall_ordering::Upcall<squall_ordering::Delivery>>,
        ) -> bool {
            while self.0.lock().unwrap().stuck {
                std::thread::sleep(Duration::from_millis(1));
            }
            false
        }
        fn wait(&mut self, t: Duration) {
            std::thread::sleep(t.min(Duration::from_millis(1)));
        }
        fn waker(&self) -> squall_transport::Waker {
            squall_transport::Waker::noop()
        }
    }

    impl squall_smr::StateTransfer for Scripted {
        fn holds_state(&self) -> bool {
            true
        }
        fn state_wanted(&self) -> bool {
            false
        }
        fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), squall_smr::TransferError> {
            Ok(())
        }
        fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
            None
        }
        fn leave(&mut self) -> Result<(), squall_smr::TransferError> {
            self.0.lock().unwrap().asked = true;
            Ok(())
        }
        fn leave_status(&self) -> Option<squall_smr::LeaveReport> {
            let s = self.0.lock().unwrap();
            if s.asked { s.report.clone() } else { None }
        }
        fn stopped(&self) -> Option<String> {
            self.0.lock().unwrap().stop.clone()
        }
    }

    /// A replica on a [`Scripted`] backend whose leave status, once asked, is `report`.
    fn scripted(
        report: Option<squall_smr::LeaveReport>,
        queue: usize,
    ) -> (
        squall_smr::Replica<crate::KvMachine>,
        Arc<std::sync::Mutex<Script>>,
    ) {
        let script = Arc::new(std::sync::Mutex::new(Script {
            report,
            ..Script::default()
        }));
        let backend = Scripted(Arc::clone(&script));
        let cfg = squall_smr::ReplicaConfig {
            queue,
            ..squall_smr::ReplicaConfig::default()
        };
        let replica = squall_smr::Replica::spawn_joinable(
            squall_transport::NodeId(2),
            move || Ok::<_, String>(backend),
            crate::KvMachine::default(),
            cfg,
        )
        .unwrap();
        (replica, script)
    }

    /// The wait for in-flight answers ends when the last one ends (woken, not polled), at once
    /// when none is in flight, and at its limit when one never ends.
    #[test]
    fn in_flight_answers_drain_when_the_last_ends() {
        rt().block_on(async {
            let none = InFlight::default();
            let t = Instant::now();
            none.drained(Duration::from_secs(60)).await;
            assert!(t.elapsed() < Duration::from_secs(30));

            let one = InFlight::default();
            one.0.count.fetch_add(1, AtomicOrdering::AcqRel);
            let counted = Counted(Arc::clone(&one.0));
            let ends = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(counted);
            });
            let t = Instant::now();
            one.drained(Duration::from_secs(60)).await;
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "woken when the answer ended"
            );
            assert_eq!(one.count(), 0);
            ends.await.unwrap();

            let stuck = InFlight::default();
            stuck.0.count.fetch_add(1, AtomicOrdering::AcqRel);
            let t = Instant::now();
            stuck.drained(Duration::from_millis(30)).await;
            assert!(t.elapsed() >= Duration::from_millis(30));
            assert_eq!(stuck.count(), 1);
        });
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    const HOLD: &str = "leave held back in view 2: no other member of subgroup 0 shard 0 holds its state yet; it leaves once one of [NodeId(5)] holds it";

    /// s27 review D1: a replica asked to leave, held, then stopped for another reason (its
    /// group lost its majority) is answered `Refused` with the stop, never `Left`, and its
    /// handle reports the stop, not a leave (so `kv serve` exits 3).
    #[test]
    fn a_leave_that_ends_in_another_stop_is_no_leave() {
        let (replica, script) = scripted(Some(squall_smr::LeaveReport::held(HOLD)), 1024);
        let h = replica.handle();
        let rt = rt();
        let s2 = Arc::clone(&script);
        let asked = rt.block_on(async {
            let answer = tokio::spawn({
                let h = h.clone();
                async move { leave(&h, Duration::from_secs(10), Duration::from_secs(10)).await }
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            {
                let mut s = s2.lock().unwrap();
                s.report = None;
                s.stop = Some("minority: view 2 lost its majority".into());
            }
            answer.await.unwrap()
        });
        match asked {
            AdminResponse::Leave(LeaveOutcome::Refused(why)) => {
                assert!(why.contains("minority"), "{why}")
            }
            other => panic!("a minority stop answered {other:?}"),
        }
        assert!(h.backend_stopped().is_some());
        assert_eq!(h.left_reason(), None);
        assert!(matches!(
            replica.shutdown(),
            Err(squall_smr::RuntimeError::BackendStopped(_))
        ));
    }

    /// s27 review D2: `--wait 0` on a leave whose first status is the transient hold (the
    /// members' words not landed yet) answers `Pending`, not `Held` (exit 5, not 4).
    #[test]
    fn wait_0_answers_a_transient_hold_pending() {
        let (replica, _script) = scripted(Some(squall_smr::LeaveReport::held(HOLD)), 1024);
        let h = replica.handle();
        let got = rt().block_on(leave(&h, Duration::ZERO, Duration::from_millis(500)));
        assert_eq!(
            got,
            AdminResponse::Leave(LeaveOutcome::Pending(HOLD.into()))
        );
        replica.shutdown().unwrap();
    }

    /// s27 review R1: a hold that needs a membership change is answered `Held` at once, and a
    /// transfer's hold that outlasts the settle and the wait is answered `Held` at the end.
    #[test]
    fn a_blocked_leave_is_held_at_once_and_a_lasting_hold_at_the_end() {
        let why = "leave held back in view 2: the members left would not be a majority of the view";
        let (replica, _script) = scripted(Some(squall_smr::LeaveReport::blocked(why)), 1024);
        let h = replica.handle();
        let rt = rt();
        let t = Instant::now();
        let got = rt.block_on(leave(&h, Duration::from_secs(30), Duration::from_secs(30)));
        assert_eq!(got, AdminResponse::Leave(LeaveOutcome::Held(why.into())));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        replica.shutdown().unwrap();
        let (replica, _script) = scripted(Some(squall_smr::LeaveReport::held(HOLD)), 1024);
        let h = replica.handle();
        let got = rt.block_on(leave(
            &h,
            Duration::from_millis(300),
            Duration::from_millis(100),
        ));
        assert_eq!(got, AdminResponse::Leave(LeaveOutcome::Held(HOLD.into())));
        replica.shutdown().unwrap();
    }

    /// s27 review R1: a transfer's hold that clears by itself within the wait (here after
    /// 700 ms, longer than the 500 ms the first version settled for) ends `Left`.
    #[test]
    fn a_transient_hold_that_clears_within_the_wait_is_answered_left() {
        let (replica, script) = scripted(Some(squall_smr::LeaveReport::held(HOLD)), 1024);
        let h = replica.handle();
        let got = rt().block_on(async {
            let answer = tokio::spawn({
                let h = h.clone();
                async move { leave(&h, Duration::from_secs(10), Duration::from_secs(2)).await }
            });
            tokio::time::sleep(Duration::from_millis(700)).await;
            {
                let mut s = script.lock().unwrap();
                s.report = Some(squall_smr::LeaveReport::left("left: view 3"));
                s.stop = Some("left: view 3 was installed without this member".into());
            }
            answer.await.unwrap()
        });
        assert!(
            matches!(&got, AdminResponse::Leave(LeaveOutcome::Left(why)) if why.starts_with("left")),
            "{got:?}"
        );
        assert!(replica.shutdown().is_ok());
    }

    /// s29: a status asked together with the leave (both taken in one batch, before the
    /// replica's next poll) already reports the backend's leave status, not "asked".
    #[test]
    fn a_status_taken_with_the_leave_reports_the_backends_leave_status() {
        let (replica, script) = scripted(Some(squall_smr::LeaveReport::held(HOLD)), 1024);
        let h = replica.handle();
        script.lock().unwrap().stuck = true;
        // The driver parks in its poll; both jobs queue behind it.
        std::thread::sleep(Duration::from_millis(50));
        let asked = h.leave().unwrap();
        let status = h.status().unwrap();
        script.lock().unwrap().stuck = false;
        let (asked, status) = rt().block_on(async { (asked.await, status.await) });
        assert!(matches!(asked, Ok(Ok(()))), "{asked:?}");
        let leave = status.unwrap().leave.map(|l| l.message);
        assert_eq!(leave.as_deref(), Some(HOLD));
        replica.shutdown().unwrap();
    }

    /// s27 review D3 and R5: a full job queue when the leave is asked is an error ("ask
    /// again"), not a refusal; a replica whose thread does not answer within the bound is
    /// answered `Pending`, not waited on for ever.
    #[test]
    fn a_busy_replica_is_an_error_and_a_silent_one_pending() {
        let (replica, script) = scripted(Some(squall_smr::LeaveReport::held(HOLD)), 1);
        let h = replica.handle();
        script.lock().unwrap().stuck = true;
        // The driver is stuck in its poll: the queue of one fills.
        let mut kept = Vec::new();
        while let Ok(rx) = h.status() {
            kept.push(rx);
            assert!(kept.len() < 8, "the queue of one never filled");
        }
        let rt = rt();
        let got = rt.block_on(leave(&h, Duration::ZERO, Duration::ZERO));
        let polled = rt.block_on(status_within(
            &h,
            Instant::now() + Duration::from_millis(50),
        ));
        // Unstuck before any assertion: a failing one would otherwise hang on the driver.
        script.lock().unwrap().stuck = false;
        assert_eq!(got, AdminResponse::Error(BUSY.into()));
        assert!(matches!(polled, Polled::Busy));
        drop(kept);
        replica.shutdown().unwrap();
        // Stuck with room in the queue: the round trip ends at its deadline.
        let (replica, script) = scripted(None, 1024);
        let h = replica.handle();
        script.lock().unwrap().stuck = true;
        // The driver's next poll blocks (it takes its jobs before polling).
        std::thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        let polled = rt.block_on(status_within(&h, t + Duration::from_millis(50)));
        let took = t.elapsed();
        script.lock().unwrap().stuck = false;
        assert!(matches!(polled, Polled::TimedOut));
        assert!(took < Duration::from_secs(2), "{took:?}");
        replica.shutdown().unwrap();
    }

    /// Serves one admin exchange: `raw` written after connecting, the answer read.
    async fn exchange(addr: SocketAddr, raw: &[u8]) -> AdminResponse {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(raw).await.unwrap();
        AdminResponse::decode(&read_frame(&mut s).await.unwrap()).unwrap()
    }

    /// Review tests: bytes after the preamble that are no request, or a frame length past the
    /// bound, are answered with an error; a connection beyond the cap is answered with an
    /// error; a `max_request` that reaches the preamble read as a length is refused.
    #[test]
    fn garbage_after_the_preamble_and_too_many_connections_are_answered_errors() {
        let (replica, _script) = scripted(None, 1024);
        let h = replica.handle();
        let rt = rt();
        rt.block_on(async {
            let huge = ServerConfig {
                max_request: PREAMBLE_AS_LENGTH,
                ..ServerConfig::default()
            };
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let e = serve(
                l,
                h.clone(),
                huge,
                AdminConfig::new(Duration::ZERO),
                InFlight::default(),
            )
            .await
            .unwrap_err();
            assert!(e.to_string().contains("max_request"), "{e}");

            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            tokio::spawn(serve(
                l,
                h.clone(),
                ServerConfig::default(),
                AdminConfig::new(Duration::ZERO),
                InFlight::default(),
            ));
            let mut raw = PREAMBLE.to_vec();
            raw.extend_from_slice(&3u32.to_le_bytes());
            raw.extend_from_slice(&[9, 9, 9]);
            let got = exchange(addr, &raw).await;
            assert!(
                matches!(&got, AdminResponse::Error(why) if why.contains("did not decode")),
                "{got:?}"
            );
            let mut raw = PREAMBLE.to_vec();
            raw.extend_from_slice(&u32::MAX.to_le_bytes());
            let got = exchange(addr, &raw).await;
            assert!(
                matches!(&got, AdminResponse::Error(why) if why.contains("bytes")),
                "{got:?}"
            );

            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let mut none = AdminConfig::new(Duration::ZERO);
            none.max_connections = 0;
            tokio::spawn(serve(
                l,
                h.clone(),
                ServerConfig::default(),
                none,
                InFlight::default(),
            ));
            let got = ask(addr, &AdminRequest::Status).await.unwrap();
            assert!(
                matches!(&got, AdminResponse::Error(why) if why.contains("too many")),
                "{got:?}"
            );
        });
        replica.shutdown().unwrap();
    }

    /// R4: a leave from another host is refused unless `leave_from_any_host`; a status is
    /// answered.
    #[test]
    fn a_leave_from_another_host_is_refused_by_default() {
        let (replica, script) = scripted(None, 1024);
        let h = replica.handle();
        rt().block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let remote: SocketAddr = "192.0.2.7:4000".parse().unwrap();
            for req in [
                AdminRequest::Leave {
                    wait: Duration::ZERO,
                },
                AdminRequest::Status,
            ] {
                let asker = tokio::spawn(async move { ask(addr, &req).await.unwrap() });
                let (stream, _) = l.accept().await.unwrap();
                assert!(is_admin(&stream).await.unwrap());
                answer(stream, remote, &h, &AdminConfig::new(Duration::ZERO))
                    .await
                    .unwrap();
                match asker.await.unwrap() {
                    AdminResponse::Leave(LeaveOutcome::Refused(why)) => {
                        assert!(why.contains("192.0.2.7"), "{why}")
                    }
                    AdminResponse::Status(s) => assert!(!s.leaving, "{s:?}"),
                    other => panic!("{other:?}"),
                }
            }
        });
        assert!(!script.lock().unwrap().asked, "the remote leave was asked");
        replica.shutdown().unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("SQUALL_PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256)
        ))]

        /// Any bytes: an error or a message that re-encodes to exactly them; never a panic.
        #[test]
        fn decoders_never_panic_and_keep_what_they_take(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
            if let Ok(r) = AdminRequest::decode(&bytes) {
                prop_assert_eq!(r.encode(), bytes.clone());
            }
            if let Ok(r) = AdminResponse::decode(&bytes) {
                prop_assert_eq!(r.encode(), bytes);
            }
        }

        /// A sample with one byte flipped: an error or a message that re-encodes to it.
        #[test]
        fn flipped_samples_never_panic(which in 0usize..7, at in any::<usize>(), to in any::<u8>()) {
            let mut b = samples()[which].encode();
            let i = at % b.len();
            b[i] = to;
            if let Ok(r) = AdminResponse::decode(&b) {
                prop_assert_eq!(r.encode(), b);
            }
        }
    }
}
