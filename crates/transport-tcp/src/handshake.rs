//! Start-up: the listener, dialling peers, and the handshake that checks who is who.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use squall_transport::{NodeId, RegionError, RegionId, RegionSpec};
use thiserror::Error;

use crate::config::{ClusterConfig, ConfigError};
use crate::frame::{self, Frame, FrameError, Hello, MAX_HANDSHAKE_BODY, PROTOCOL_VERSION};
use crate::node::{Connected, lock};

/// Why a node could not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StartError {
    /// The config is invalid.
    #[error("invalid cluster config: {0}")]
    Config(#[from] ConfigError),
    /// The regions are invalid.
    #[error("invalid regions: {0}")]
    Region(#[from] RegionError),
    /// The listening address could not be bound.
    #[error("cannot listen on {addr}: {source}; is another process using that port?")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// A peer could not be reached before the connect timeout.
    #[error(
        "cannot reach {peer} at {addr} within connect_timeout: {source}; is it running, and is its address in [nodes] right?"
    )]
    Unreachable {
        /// The peer.
        peer: NodeId,
        /// Its configured address.
        addr: SocketAddr,
        /// The last connect error.
        source: io::Error,
    },
    /// The peer refused this node's handshake.
    #[error("{peer} refused the handshake: {reason}")]
    Refused {
        /// The peer.
        peer: NodeId,
        /// What the peer said.
        reason: String,
    },
    /// This node refused the peer's handshake answer.
    #[error("refused {peer}'s handshake: {reason}")]
    Mismatch {
        /// The peer.
        peer: NodeId,
        /// What differed.
        reason: String,
    },
    /// The handshake broke off or was not understood.
    #[error("handshake with {peer} failed: {detail}")]
    Handshake {
        /// The peer.
        peer: NodeId,
        /// What happened.
        detail: String,
    },
    /// Peers that should have dialled this node did not, in time.
    #[error(
        "{missing:?} did not connect within connect_timeout{}",
        if refused.is_empty() { String::new() } else { format!("; refused meanwhile: {}", refused.join("; ")) }
    )]
    Timeout {
        /// The peers that never completed a handshake.
        missing: Vec<NodeId>,
        /// Handshakes this node refused meanwhile, and why.
        refused: Vec<String>,
    },
    /// A socket option could not be set.
    #[error("socket setup for {peer} failed: {source}")]
    Socket {
        /// The peer.
        peer: NodeId,
        /// Why.
        source: io::Error,
    },
    /// An I/O thread could not be spawned.
    #[error("cannot spawn an I/O thread: {0}")]
    Thread(io::Error),
}

impl StartError {
    /// Whether the handshake failed because the process at the peer's address belongs to
    /// another cluster (its cluster id differs, on either end).
    fn foreign(&self) -> bool {
        matches!(self, StartError::Refused { reason, .. } | StartError::Mismatch { reason, .. } if reason.starts_with(FOREIGN))
    }
}

struct AcceptState {
    tx: Option<mpsc::Sender<Connected>>,
    /// The peers linked so far, with the incarnation of their latest link: a later handshake
    /// from one is admitted only with a larger incarnation (a restart of the peer).
    taken: BTreeMap<NodeId, u64>,
    /// Peers this node is dialling right now (late nodes may dial each other at once).
    dialing: BTreeSet<NodeId>,
    /// Peers declared failed while absent, with the incarnation a handshake must exceed (see
    /// [`Acceptor::bar`]).
    floors: BTreeMap<NodeId, u64>,
    refused: Vec<String>,
}

struct AcceptCtx {
    me: NodeId,
    config: ClusterConfig,
    hello: Hello,
    state: Mutex<AcceptState>,
    closing: AtomicBool,
}

/// The listener thread. It keeps running after start-up: it accepts the handshakes of configured
/// nodes that were not linked yet (late nodes, see [`ClusterConfig::late`]) with the same checks,
/// admits a peer that linked before only with a larger incarnation (a restart of it; the node
/// then replaces the old link), refuses the rest, and closes connections that send garbage.
pub(crate) struct Acceptor {
    ctx: Arc<AcceptCtx>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

/// Dials peers again after start-up (a late node's peers that were down when it started, see
/// [`ClusterConfig::redial_period`]), under the same rules as the dials at start.
pub(crate) struct Dialer {
    ctx: Arc<AcceptCtx>,
}

impl Dialer {
    /// Dials `peer` once unless it is linked or being dialled already; a connection made is
    /// handed to the node (installed and announced like a peer dialling in). Blocks for at
    /// most the connect time-out (capped at 2 s).
    pub(crate) fn redial(&self, peer: NodeId) {
        let ctx = &self.ctx;
        {
            let mut st = lock(&ctx.state);
            if st.tx.is_none() || st.taken.contains_key(&peer) || st.dialing.contains(&peer) {
                return;
            }
            st.dialing.insert(peer);
        }
        let deadline = Instant::now() + ctx.config.connect_timeout.min(Duration::from_secs(2));
        let r = dial(&ctx.config, ctx.me, peer, &ctx.hello, deadline, false);
        let mut st = lock(&ctx.state);
        st.dialing.remove(&peer);
        match r {
            Ok(c) if !st.taken.contains_key(&peer) && st.tx.is_some() => {
                st.taken.insert(peer, c.incarnation);
                tracing::info!(me = %ctx.me, %peer, "tcp transport: a peer absent at start linked on a later dial");
                if let Some(tx) = &st.tx {
                    let _ = tx.send(c);
                }
            }
            // Linked through the listener meanwhile (or shutting down): keep that link.
            Ok(c) => {
                let _ = c.stream.shutdown(std::net::Shutdown::Both);
            }
            Err(e @ StartError::Unreachable { .. }) => {
                tracing::debug!(me = %ctx.me, %peer, error = %e, "tcp transport: absent peer still not reachable");
            }
            Err(e) => {
                tracing::warn!(me = %ctx.me, %peer, error = %e, "tcp transport: absent peer did not link");
            }
        }
    }
}

impl Acceptor {
    /// A handle that dials peers again after start-up (see [`Dialer`]).
    pub(crate) fn dialer(&self) -> Dialer {
        Dialer {
            ctx: Arc::clone(&self.ctx),
        }
    }

    /// From now on a handshake from `peer` is refused unless its incarnation exceeds `floor`
    /// (the peer was declared failed while absent: only a process started after that links).
    pub(crate) fn bar(&self, peer: NodeId, floor: u64) {
        let mut st = lock(&self.ctx.state);
        let f = st.floors.entry(peer).or_insert(floor);
        *f = (*f).max(floor);
    }

    /// Stops the listener and waits for its thread.
    pub(crate) fn stop(mut self) {
        self.ctx.closing.store(true, Ordering::Release);
        lock(&self.ctx.state).tx = None;
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            });
        }
        // Wake the blocking accept; if this fails the thread is left to the process's end.
        if TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok()
            && let Some(t) = self.thread.take()
        {
            let _ = t.join();
        }
    }
}

/// Reads one handshake frame (blocking, under the socket's read timeout).
fn read_frame(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut bytes = vec![0u8; frame::HEADER_LEN];
    stream
        .read_exact(&mut bytes)
        .map_err(|e| format!("reading the handshake: {e}"))?;
    // Checks the length field before reading the body.
    if let Err(e @ (FrameError::Oversized { .. } | FrameError::UnknownKind(_))) =
        frame::decode(&bytes, 0)
    {
        return Err(e.to_string());
    }
    let len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    if len > MAX_HANDSHAKE_BODY {
        return Err(format!("handshake frame of {len} bytes is too large"));
    }
    bytes.resize(frame::HEADER_LEN + len, 0);
    stream
        .read_exact(&mut bytes[frame::HEADER_LEN..])
        .map_err(|e| format!("reading the handshake: {e}"))?;
    Ok(bytes)
}

fn region_specs(h: &Hello) -> Result<Vec<RegionSpec>, String> {
    let specs: Vec<RegionSpec> = h
        .regions
        .iter()
        .map(|&(id, len)| {
            usize::try_from(len)
                .map(|len| RegionSpec::new(RegionId(id), len))
                .map_err(|_| format!("region r{id} of {len} bytes is too large"))
        })
        .collect::<Result<_, _>>()?;
    RegionSpec::validate_all(&specs).map_err(|e| format!("bad region directory: {e}"))?;
    Ok(specs)
}

/// The checks both ends make of the other's handshake.
fn check_common(config: &ClusterConfig, ours: &Hello, h: &Hello) -> Result<(), String> {
    if h.version != PROTOCOL_VERSION {
        return Err(format!(
            "protocol version {} differs from this node's {PROTOCOL_VERSION}; run the same Squall release on every node",
            h.version
        ));
    }
    if h.cluster_id != config.cluster_id {
        return Err(format!(
            "{FOREIGN} {} differs from this node's {}; the node belongs to another cluster or runs another config",
            h.cluster_id, config.cluster_id
        ));
    }
    if h.max_message_len != ours.max_message_len {
        return Err(format!(
            "max_message_len {} differs from this node's {}; use the same config on every node",
            h.max_message_len, ours.max_message_len
        ));
    }
    Ok(())
}

impl AcceptCtx {
    fn check_hello(&self, h: &Hello) -> Result<(NodeId, Vec<RegionSpec>), String> {
        check_common(&self.config, &self.hello, h)?;
        let from = NodeId(h.from);
        if h.to != self.me.0 {
            return Err(format!(
                "this is {}, but {from} dialled it as n{}; check the addresses in [nodes]",
                self.me, h.to
            ));
        }
        if !self.config.nodes.contains_key(&from) {
            return Err(format!("{from} is not in this node's cluster config"));
        }
        let specs = region_specs(h)?;
        Ok((from, specs))
    }

    fn refuse(&self, stream: &mut TcpStream, peer: Option<SocketAddr>, reason: String) {
        tracing::error!(me = %self.me, ?peer, %reason, "tcp transport: refused a handshake");
        let mut buf = Vec::new();
        frame::encode_refuse(&mut buf, &reason);
        let _ = stream.write_all(&buf);
        let mut st = lock(&self.state);
        if st.refused.len() < 16 {
            st.refused.push(reason);
        }
    }

    fn handle_incoming(self: Arc<Self>, mut stream: TcpStream) {
        let addr = stream.peer_addr().ok();
        let _ = stream.set_nodelay(true);
        if stream
            .set_read_timeout(Some(self.config.connect_timeout))
            .is_err()
        {
            return;
        }
        let bytes = match read_frame(&mut stream) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(me = %self.me, peer = ?addr, error = %e, "tcp transport: bad handshake; connection closed");
                return;
            }
        };
        let hello = match frame::decode(&bytes, 0) {
            Ok(Some((Frame::Hello(h), _))) => h,
            Ok(_) => {
                self.refuse(&mut stream, addr, "expected a Hello handshake frame".into());
                return;
            }
            Err(e) => {
                tracing::error!(me = %self.me, peer = ?addr, error = %e, "tcp transport: invalid handshake frame; connection closed");
                return;
            }
        };
        let (from, regions) = match self.check_hello(&hello) {
            Ok(x) => x,
            Err(reason) => return self.refuse(&mut stream, addr, reason),
        };
        let linked_before = {
            let mut st = lock(&self.state);
            let linked_before = st.taken.get(&from).copied();
            if from <= self.me && !self.config.is_late(from) && linked_before.is_none() {
                drop(st);
                return self.refuse(
                    &mut stream,
                    addr,
                    format!(
                        "{from} dialled {}, but only higher ids dial lower ones (and late or restarted nodes dial every node)",
                        self.me
                    ),
                );
            }
            if st.dialing.contains(&from) && from < self.me {
                // Two late nodes dialling each other at once: the higher id's dial wins.
                drop(st);
                return self.refuse(
                    &mut stream,
                    addr,
                    format!("{CROSSED}: {} is dialling {from} too", self.me),
                );
            }
            if let Some(&floor) = st.floors.get(&from)
                && hello.incarnation <= floor
            {
                drop(st);
                return self.refuse(
                    &mut stream,
                    addr,
                    format!(
                        "{BARRED}: {from} was declared failed by {} while it was absent; only a process started after that links (incarnation {} is not above {floor}, the report's time plus the clock_skew allowance); start it again",
                        self.me, hello.incarnation
                    ),
                );
            }
            if linked_before.is_some_and(|i| hello.incarnation <= i) || st.tx.is_none() {
                drop(st);
                return self.refuse(
                    &mut stream,
                    addr,
                    format!(
                        "{from} is already linked to {} with incarnation {} and announced {} (or the node is shutting down); a restarted node comes back with a larger incarnation",
                        self.me,
                        linked_before.unwrap_or(0),
                        hello.incarnation
                    ),
                );
            }
            st.taken.insert(from, hello.incarnation);
            linked_before
        };
        let mut answer = self.hello.clone();
        answer.to = from.0;
        let mut buf = Vec::new();
        frame::encode_welcome(&mut buf, &answer);
        // A dialler that closed its end already (its hello was queued while this node had
        // bound its port but not started, and it gave up waiting): answering would link a
        // dead connection. (A refusal above still goes out to a half-closed dialler.)
        let sent = if dialler_gone(&stream) {
            Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the dialler gave up",
            ))
        } else {
            stream.write_all(&buf)
        };
        if let Err(e) = sent {
            tracing::warn!(me = %self.me, peer = %from, error = %e, "tcp transport: handshake answer failed");
            let mut st = lock(&self.state);
            match linked_before {
                Some(i) => st.taken.insert(from, i),
                None => st.taken.remove(&from),
            };
            return;
        }
        let c = Connected {
            peer: from,
            stream,
            incarnation: hello.incarnation,
            regions,
        };
        let st = lock(&self.state);
        if let Some(tx) = &st.tx {
            let _ = tx.send(c);
        }
    }
}

/// Whether the other end of `stream` closed it (end of stream after what was read so far).
fn dialler_gone(stream: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    let gone = stream.set_nonblocking(true).is_ok() && matches!(stream.peek(&mut b), Ok(0));
    let _ = stream.set_nonblocking(false);
    gone
}

/// How a refusal of crossed dials starts (the dialler then waits for the other dial instead).
const CROSSED: &str = "crossed dials, the higher id's dial wins";

/// How the refusal of a process declared failed while absent starts (the dialler leaves that
/// peer absent: it will never link with this process, but the others may).
const BARRED: &str = "declared failed while absent";

/// How a refusal over the cluster id starts: the process at a peer's address belongs to
/// another cluster (or runs another config).
const FOREIGN: &str = "cluster id";

fn dial(
    config: &ClusterConfig,
    me: NodeId,
    peer: NodeId,
    ours: &Hello,
    deadline: Instant,
    retry: bool,
) -> Result<Connected, StartError> {
    let addr = config.nodes[&peer];
    let mut stream = loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match TcpStream::connect_timeout(
            &addr,
            remaining.clamp(Duration::from_millis(1), Duration::from_secs(1)),
        ) {
            Ok(s) => break s,
            Err(source) => {
                if !retry || Instant::now() >= deadline {
                    return Err(StartError::Unreachable { peer, addr, source });
                }
                // Start-up only: the peer may not be listening yet.
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    let socket = |source| StartError::Socket { peer, source };
    stream.set_nodelay(true).map_err(socket)?;
    let remaining = deadline.saturating_duration_since(Instant::now());
    stream
        .set_read_timeout(Some(remaining.max(Duration::from_millis(100))))
        .map_err(socket)?;
    let mut hello = ours.clone();
    hello.to = peer.0;
    let mut buf = Vec::new();
    frame::encode_hello(&mut buf, &hello);
    stream.write_all(&buf).map_err(socket)?;
    let bytes = read_frame(&mut stream).map_err(|detail| StartError::Handshake { peer, detail })?;
    match frame::decode(&bytes, 0) {
        Ok(Some((Frame::Welcome(h), _))) => {
            let checked = check_common(config, ours, &h).and_then(|()| {
                if h.from != peer.0 || h.to != me.0 {
                    return Err(format!(
                        "n{} answered at {peer}'s address {addr} (and took this node for n{}); check the addresses in [nodes]",
                        h.from, h.to
                    ));
                }
                region_specs(&h)
            });
            match checked {
                Ok(regions) => Ok(Connected {
                    peer,
                    stream,
                    incarnation: h.incarnation,
                    regions,
                }),
                Err(reason) => {
                    tracing::error!(%me, %peer, %reason, "tcp transport: refused a handshake answer");
                    let mut buf = Vec::new();
                    frame::encode_refuse(&mut buf, &reason);
                    let _ = stream.write_all(&buf);
                    Err(StartError::Mismatch { peer, reason })
                }
            }
        }
        Ok(Some((Frame::Refuse(reason), _))) => {
            tracing::error!(%me, %peer, %reason, "tcp transport: handshake refused by peer");
            Err(StartError::Refused {
                peer,
                reason: reason.to_string(),
            })
        }
        Ok(_) => Err(StartError::Handshake {
            peer,
            detail: "expected a Welcome or Refuse frame".into(),
        }),
        Err(e) => Err(StartError::Handshake {
            peer,
            detail: e.to_string(),
        }),
    }
}

/// What start-up hands to the node: the listener, the links established during start-up, and
/// the handshakes the listener completes afterwards (late links).
pub(crate) type Established = (Acceptor, Vec<Connected>, mpsc::Receiver<Connected>);

/// Starts the listener and links up. A founder (a node not in [`ClusterConfig::late`]) dials
/// every lower founder and waits for every higher one; a late node dials every configured peer
/// and leaves the ones it cannot reach absent (its node dials them again later, see
/// [`Dialer`]). Returns the connections once handshaken; the
/// listener keeps accepting handshakes from configured nodes not linked yet.
///
/// `late` is [`ClusterConfig::is_late`] for a first start; a restart of a node under its old id
/// starts late whatever the config says (its peers run already).
pub(crate) fn establish(
    listener: TcpListener,
    config: &ClusterConfig,
    me: NodeId,
    incarnation: u64,
    regions: &[RegionSpec],
    late: bool,
) -> Result<Established, StartError> {
    let addr = listener.local_addr().map_err(|source| StartError::Bind {
        addr: config.nodes[&me],
        source,
    })?;
    let hello = Hello {
        version: PROTOCOL_VERSION,
        cluster_id: config.cluster_id,
        from: me.0,
        to: 0,
        incarnation,
        max_message_len: u32::try_from(config.max_message_len).unwrap_or(u32::MAX),
        regions: regions.iter().map(|s| (s.id.0, s.len as u64)).collect(),
    };
    let (tx, rx) = mpsc::channel();
    let ctx = Arc::new(AcceptCtx {
        me,
        config: config.clone(),
        hello: hello.clone(),
        state: Mutex::new(AcceptState {
            tx: Some(tx),
            taken: BTreeMap::new(),
            dialing: BTreeSet::new(),
            floors: BTreeMap::new(),
            refused: Vec::new(),
        }),
        closing: AtomicBool::new(false),
    });
    let c = Arc::clone(&ctx);
    let thread = std::thread::Builder::new()
        .name(format!("squall-tcp-{me}-accept"))
        .spawn(move || {
            for conn in listener.incoming() {
                if c.closing.load(Ordering::Acquire) {
                    return;
                }
                match conn {
                    Ok(stream) => {
                        let c2 = Arc::clone(&c);
                        let spawned = std::thread::Builder::new()
                            .name("squall-tcp-handshake".into())
                            .spawn(move || c2.handle_incoming(stream));
                        if let Err(e) = spawned {
                            tracing::error!(error = %e, "tcp transport: cannot spawn a handshake thread");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "tcp transport: accept failed");
                    }
                }
            }
        })
        .map_err(StartError::Thread)?;
    let acceptor = Acceptor {
        ctx: Arc::clone(&ctx),
        addr,
        thread: Some(thread),
    };
    let deadline = Instant::now() + config.connect_timeout;
    let mut connected = Vec::new();
    // A late node: the peers whose address answered as another cluster's node, and the last
    // such refusal (returned if every peer dialled answered so: then the config is at fault).
    let (mut foreign, mut last_foreign) = (0, None);
    let dial_to: Vec<NodeId> = if late {
        config.nodes.keys().copied().filter(|&p| p != me).collect()
    } else {
        (config.nodes.keys().copied())
            .filter(|&p| p < me && !config.is_late(p))
            .collect()
    };
    for &peer in &dial_to {
        {
            let mut st = lock(&ctx.state);
            if st.taken.contains_key(&peer) {
                continue; // it dialled this node first
            }
            st.dialing.insert(peer);
        }
        let r = dial(config, me, peer, &hello, deadline, !late);
        let mut st = lock(&ctx.state);
        st.dialing.remove(&peer);
        match r {
            Ok(c) if !st.taken.contains_key(&peer) => {
                st.taken.insert(peer, c.incarnation);
                connected.push(c);
            }
            Ok(c) => {
                // Linked through the listener meanwhile: keep that link.
                let _ = c.stream.shutdown(std::net::Shutdown::Both);
            }
            // Its dial to this node wins (or already won): the listener takes it.
            Err(StartError::Refused { reason, .. })
                if reason.starts_with(CROSSED) || st.taken.contains_key(&peer) => {}
            // A late node leaves a peer it cannot reach, or whose handshake breaks off, absent
            // (it dials in when it starts); a refusal says the configs differ, and stops it.
            Err(e @ (StartError::Unreachable { .. } | StartError::Handshake { .. })) if late => {
                tracing::info!(%me, %peer, error = %e, "tcp transport: peer not reachable; absent until it dials");
            }
            // A peer that declared this node failed before this process started (within the
            // clock allowance) never links with it: absent for good; the others may link.
            Err(StartError::Refused { reason, .. }) if late && reason.starts_with(BARRED) => {
                tracing::warn!(%me, %peer, %reason, "tcp transport: refused by a peer that declared this node failed; it stays absent");
            }
            // A late node starts while some members may be down: the port of one that is down
            // can be taken by another program, here another cluster's node. That peer is absent
            // (it dials in when it starts), unless every peer answers so (a config at fault).
            Err(e) if late && e.foreign() => {
                tracing::warn!(%me, %peer, error = %e, "tcp transport: another cluster's node answered at this peer's address (its port taken while it is down?); absent until it dials");
                foreign += 1;
                last_foreign = Some(e);
            }
            Err(e) => {
                drop(st);
                acceptor.stop();
                return Err(e);
            }
        }
    }
    if let Some(e) = last_foreign
        && foreign == dial_to.len()
    {
        acceptor.stop();
        return Err(e);
    }
    let mut missing: BTreeSet<NodeId> = if late {
        BTreeSet::new()
    } else {
        (config.nodes.keys().copied())
            .filter(|&p| p > me && !config.is_late(p))
            .collect()
    };
    while !missing.is_empty() {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(remaining) {
            Ok(c) => {
                missing.remove(&c.peer);
                connected.push(c);
            }
            Err(_) => {
                let refused = std::mem::take(&mut lock(&ctx.state).refused);
                acceptor.stop();
                return Err(StartError::Timeout {
                    missing: missing.into_iter().collect(),
                    refused,
                });
            }
        }
    }
    // Late nodes that linked while this founder waited for the others: linked from the start.
    while let Ok(c) = rx.try_recv() {
        connected.push(c);
    }
    Ok((acceptor, connected, rx))
}
