//! Nodes in separate OS processes.
//!
//! The test binary re-executes itself as node `k` (the ignored test `child_node_process` is the
//! entry point). Each node's regions live in shared memory (`memfd_create` + `mmap`) that the
//! child and the parent both map, so the parent's programs read and write region memory directly,
//! while every Transport call is forwarded to the child over a control connection and every op
//! travels child to child over TCP. Crashing a node is `kill -9` of its process.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use squall_transport::conformance::{Fabric, Slot, Stalled};
use squall_transport::{
    Clock, Completion, Directory, Event, FailureCause, LocalSlice, NodeId, OpError, OpId, OpKind,
    PostError, Region, RegionError, RegionId, RegionSpec, RemoteAddr, Signal, SystemClock, Time,
    Transport, Waker,
};
use squall_transport_tcp::{ClusterConfig, TcpNode};

use super::{run_threads, test_config};

/// A shared mapping that backs one region.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory, only accessed atomically through `Region`.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped in `map_fd` with exactly this length.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

fn map_fd(fd: i32, spec: RegionSpec) -> Region {
    // SAFETY: mapping a memfd we own, MAP_SHARED, of the length it was truncated to.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            spec.len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    assert!(ptr != libc::MAP_FAILED, "mmap failed");
    let ptr = NonNull::new(ptr.cast::<u8>()).expect("non-null mapping");
    let owner = Arc::new(Mapping { ptr, len: spec.len });
    // SAFETY: the mapping is page-aligned, zero-filled (a fresh memfd), `spec.len` bytes long, lives
    // as long as `owner`, and is only accessed atomically, by this process and by the node's.
    unsafe { Region::from_raw(spec.id, ptr.cast::<AtomicU64>(), spec.len / 8, owner) }
}

fn memfd(len: usize) -> i32 {
    // SAFETY: plain syscalls; no CLOEXEC so the child inherits the fd.
    unsafe {
        let fd = libc::memfd_create(c"squall-region".as_ptr(), 0);
        assert!(fd >= 0, "memfd_create failed");
        assert_eq!(
            libc::ftruncate(fd, len as libc::off_t),
            0,
            "ftruncate failed"
        );
        fd
    }
}

// ---- the control protocol ----------------------------------------------------------------

#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
        self
    }
}

struct In<R: Read>(R);

impl<R: Read> In<R> {
    fn u8(&mut self) -> std::io::Result<u8> {
        let mut b = [0u8; 1];
        self.0.read_exact(&mut b)?;
        Ok(b[0])
    }
    fn u32(&mut self) -> std::io::Result<u32> {
        let mut b = [0u8; 4];
        self.0.read_exact(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn u64(&mut self) -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        self.0.read_exact(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn bytes(&mut self) -> std::io::Result<Vec<u8>> {
        let n = self.u32()? as usize;
        let mut v = vec![0u8; n];
        self.0.read_exact(&mut v)?;
        Ok(v)
    }
}

const C_WRITE: u8 = 1;
const C_READ: u8 = 2;
const C_CAS: u8 = 3;
const C_FAA: u8 = 4;
const C_SEND: u8 = 5;
const C_FENCE: u8 = 6;
const C_POLL: u8 = 7;
const C_RECV: u8 = 8;
const C_REPORT: u8 = 9;
const C_WAIT: u8 = 10;
const C_SILENCE: u8 = 11;

fn kind_code(k: OpKind) -> u8 {
    match k {
        OpKind::Write => 0,
        OpKind::Read => 1,
        OpKind::CompareAndSwap => 2,
        OpKind::FetchAdd => 3,
        OpKind::Send => 4,
        OpKind::Fence => 5,
    }
}

fn kind_of(c: u8) -> OpKind {
    match c {
        0 => OpKind::Write,
        1 => OpKind::Read,
        2 => OpKind::CompareAndSwap,
        3 => OpKind::FetchAdd,
        4 => OpKind::Send,
        _ => OpKind::Fence,
    }
}

fn cause_code(c: FailureCause) -> u8 {
    match c {
        FailureCause::TimedOut => 0,
        FailureCause::ConnectionLost => 1,
        FailureCause::Local => 2,
        FailureCause::Remote => 3,
    }
}

fn cause_of(c: u8) -> FailureCause {
    match c {
        0 => FailureCause::TimedOut,
        1 => FailureCause::ConnectionLost,
        2 => FailureCause::Local,
        _ => FailureCause::Remote,
    }
}

fn encode_post(o: &mut Out, r: Result<OpId, PostError>) {
    match r {
        Ok(op) => {
            o.u8(0).u64(op.0);
        }
        Err(e) => {
            let (tag, a, b, c, d, f) = match e {
                PostError::UnknownPeer { peer } => (1, u64::from(peer.0), 0, 0, 0, 0),
                PostError::UnknownLocalRegion { region } => (2, u64::from(region.0), 0, 0, 0, 0),
                PostError::UnknownRemoteRegion { peer, region } => {
                    (3, u64::from(peer.0), u64::from(region.0), 0, 0, 0)
                }
                PostError::OutOfBounds {
                    node,
                    source:
                        RegionError::OutOfBounds {
                            region,
                            offset,
                            len,
                            region_len,
                        },
                } => (
                    4,
                    u64::from(node.0),
                    u64::from(region.0),
                    offset as u64,
                    len as u64,
                    region_len as u64,
                ),
                PostError::Misaligned { region, offset } => {
                    (5, u64::from(region.0), offset as u64, 0, 0, 0)
                }
                PostError::MessageTooLarge { len, max } => (6, len as u64, max as u64, 0, 0, 0),
                PostError::QueueFull { peer, depth } => {
                    (7, u64::from(peer.0), depth as u64, 0, 0, 0)
                }
                PostError::NotConnected { peer } => (9, u64::from(peer.0), 0, 0, 0, 0),
                _ => (8, 0, 0, 0, 0, 0),
            };
            o.u8(tag).u64(a).u64(b).u64(c).u64(d).u64(f);
        }
    }
}

fn decode_post<R: Read>(i: &mut In<R>) -> std::io::Result<Result<OpId, PostError>> {
    let tag = i.u8()?;
    if tag == 0 {
        return Ok(Ok(OpId(i.u64()?)));
    }
    let (a, b, c, d, f) = (i.u64()?, i.u64()?, i.u64()?, i.u64()?, i.u64()?);
    Ok(Err(match tag {
        1 => PostError::UnknownPeer {
            peer: NodeId(a as u32),
        },
        2 => PostError::UnknownLocalRegion {
            region: RegionId(a as u32),
        },
        3 => PostError::UnknownRemoteRegion {
            peer: NodeId(a as u32),
            region: RegionId(b as u32),
        },
        4 => PostError::OutOfBounds {
            node: NodeId(a as u32),
            source: RegionError::OutOfBounds {
                region: RegionId(b as u32),
                offset: c as usize,
                len: d as usize,
                region_len: f as usize,
            },
        },
        5 => PostError::Misaligned {
            region: RegionId(a as u32),
            offset: b as usize,
        },
        6 => PostError::MessageTooLarge {
            len: a as usize,
            max: b as usize,
        },
        9 => PostError::NotConnected {
            peer: NodeId(a as u32),
        },
        7 => PostError::QueueFull {
            peer: NodeId(a as u32),
            depth: b as usize,
        },
        _ => PostError::Closed,
    }))
}

// ---- the child ----------------------------------------------------------------------------

/// The body of a node process: maps its regions, starts its TcpNode, serves the parent.
pub fn child_main(ctrl_addr: &str) -> ! {
    let me = NodeId(
        std::env::var("SQUALL_TCP_NODE")
            .ok()
            .and_then(|v| v.parse().ok())
            .expect("SQUALL_TCP_NODE"),
    );
    let regions: Vec<Region> = std::env::var("SQUALL_TCP_REGIONS")
        .expect("SQUALL_TCP_REGIONS")
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|item| {
            let v: Vec<usize> = item
                .split(':')
                .map(|x| x.parse().expect("number"))
                .collect();
            let r = map_fd(v[2] as i32, RegionSpec::new(RegionId(v[0] as u32), v[1]));
            // SAFETY: the inherited fd is ours; the mapping stays valid after close.
            unsafe { libc::close(v[2] as i32) };
            r
        })
        .collect();
    // The control connection lives in the parent's network namespace; everything the node
    // opens after `setns` (its listener, its links, its threads) lives in its own.
    let ctrl = TcpStream::connect(ctrl_addr).expect("control connection");
    if let Ok(ns) = std::env::var("SQUALL_TCP_NETNS") {
        enter_netns(&ns);
    }
    let bind = std::env::var("SQUALL_TCP_BIND").unwrap_or_else(|_| "127.0.0.1".into());
    let listener = TcpListener::bind((bind.as_str(), 0)).expect("bind");
    let port = listener.local_addr().expect("addr").port();
    ctrl.set_nodelay(true).expect("nodelay");
    let mut input = In(BufReader::new(ctrl.try_clone().expect("clone")));
    let mut output = BufWriter::new(ctrl);
    let mut hello = Out::default();
    hello.u32(me.0).u32(u32::from(port));
    output.write_all(&hello.0).expect("hello");
    output.flush().expect("flush");
    let config_text = String::from_utf8(input.bytes().expect("config")).expect("utf8");
    let config = ClusterConfig::from_toml(&config_text).expect("config");
    // A process started in place of a killed node comes back under its id as a new incarnation.
    let started = if std::env::var_os("SQUALL_TCP_REJOIN").is_some() {
        TcpNode::rejoin_on(listener, config, me, regions)
    } else {
        TcpNode::start_on(listener, config, me, regions)
    };
    let mut node = match started {
        Ok(n) => {
            let mut o = Out::default();
            o.u8(0).u64(n.incarnation());
            output.write_all(&o.0).expect("status");
            output.flush().expect("flush");
            n
        }
        Err(e) => {
            let mut o = Out::default();
            o.u8(1).bytes(e.to_string().as_bytes());
            let _ = output.write_all(&o.0);
            let _ = output.flush();
            std::process::exit(1);
        }
    };
    let mut events = vec![
        Event::PeerFailed {
            peer: NodeId(0),
            cause: FailureCause::Local
        };
        256
    ];
    let mut msg = Vec::new();
    loop {
        let Ok(cmd) = input.u8() else {
            std::process::exit(0); // the parent is gone
        };
        let mut o = Out::default();
        let r: std::io::Result<()> = (|| {
            match cmd {
                C_WRITE => {
                    let peer = NodeId(input.u32()?);
                    let src = LocalSlice::new(
                        RegionId(input.u32()?),
                        input.u64()? as usize,
                        input.u64()? as usize,
                    );
                    let dst = RemoteAddr::new(RegionId(input.u32()?), input.u64()? as usize);
                    let signal = if input.u8()? == 1 {
                        Signal::Signaled
                    } else {
                        Signal::Unsignaled
                    };
                    encode_post(&mut o, node.write(peer, src, dst, signal));
                }
                C_READ => {
                    let peer = NodeId(input.u32()?);
                    let src = RemoteAddr::new(RegionId(input.u32()?), input.u64()? as usize);
                    let dst = LocalSlice::new(
                        RegionId(input.u32()?),
                        input.u64()? as usize,
                        input.u64()? as usize,
                    );
                    encode_post(&mut o, node.read(peer, src, dst));
                }
                C_CAS => {
                    let peer = NodeId(input.u32()?);
                    let w = RemoteAddr::new(RegionId(input.u32()?), input.u64()? as usize);
                    let (e, n) = (input.u64()?, input.u64()?);
                    encode_post(&mut o, node.compare_and_swap(peer, w, e, n));
                }
                C_FAA => {
                    let peer = NodeId(input.u32()?);
                    let w = RemoteAddr::new(RegionId(input.u32()?), input.u64()? as usize);
                    let d = input.u64()?;
                    encode_post(&mut o, node.fetch_add(peer, w, d));
                }
                C_SEND => {
                    let peer = NodeId(input.u32()?);
                    let signal = if input.u8()? == 1 {
                        Signal::Signaled
                    } else {
                        Signal::Unsignaled
                    };
                    let data = input.bytes()?;
                    encode_post(&mut o, node.send(peer, &data, signal));
                }
                C_FENCE => {
                    let peer = NodeId(input.u32()?);
                    encode_post(&mut o, node.fence(peer));
                }
                C_POLL => {
                    let max = (input.u32()? as usize).min(events.len());
                    let n = node.poll(&mut events[..max]);
                    o.u32(n as u32);
                    for e in &events[..n] {
                        match *e {
                            Event::Completion(c) => {
                                o.u8(0).u64(c.op.0).u32(c.peer.0).u8(kind_code(c.kind));
                                match c.result {
                                    Ok(v) => o.u8(0).u64(v),
                                    Err(OpError::TimedOut) => o.u8(1).u64(0),
                                    Err(OpError::PeerFailed) => o.u8(2).u64(0),
                                };
                            }
                            Event::PeerFailed { peer, cause } => {
                                o.u8(1).u32(peer.0).u8(cause_code(cause));
                            }
                            Event::PeerConnected { peer, incarnation } => {
                                o.u8(2).u32(peer.0).u8(0).u64(incarnation);
                            }
                        }
                    }
                }
                C_RECV => match node.recv(&mut msg) {
                    Some(from) => {
                        o.u8(1).u32(from.0).bytes(&msg);
                    }
                    None => {
                        o.u8(0);
                    }
                },
                C_REPORT => {
                    node.report_failed(NodeId(input.u32()?));
                    o.u8(0);
                }
                C_WAIT => {
                    node.wait(Duration::from_nanos(input.u64()?));
                    o.u8(0);
                }
                C_SILENCE => {
                    node.silence(NodeId(input.u32()?));
                    o.u8(0);
                }
                other => panic!("unknown control command {other}"),
            }
            output.write_all(&o.0)?;
            output.flush()
        })();
        if r.is_err() {
            std::process::exit(0);
        }
    }
}

/// Moves the calling thread (and the threads it spawns later) into a named network namespace.
fn enter_netns(name: &str) {
    let path = std::ffi::CString::new(format!("/var/run/netns/{name}")).expect("path");
    // SAFETY: plain syscalls on a path we built; the fd is closed after use.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        assert!(fd >= 0, "cannot open network namespace {name}");
        assert_eq!(
            libc::setns(fd, libc::CLONE_NEWNET),
            0,
            "setns into {name} failed"
        );
        libc::close(fd);
    }
}

// ---- the parent's proxy --------------------------------------------------------------------

/// The parent's handle on a node process: region memory mapped here, Transport calls forwarded.
pub struct ProcNode {
    me: NodeId,
    dir: Directory,
    max_message_len: usize,
    clock: SystemClock,
    input: In<BufReader<TcpStream>>,
    output: BufWriter<TcpStream>,
    child: Child,
    alive: bool,
    incarnation: u64,
    config: ClusterConfig,
    layout: Vec<RegionSpec>,
}

impl ProcNode {
    /// The incarnation the node process started with.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// Starts a fresh process in place of this (killed) one, under the same id and on a new
    /// port: it comes back with [`TcpNode::rejoin_on`] as a new incarnation with zeroed regions.
    pub fn respawn(&self, place: &Place) -> ProcNode {
        let ctrl = TcpListener::bind("127.0.0.1:0").expect("control listener");
        let ctrl_addr = ctrl.local_addr().expect("addr");
        let (child, regions) = spawn_child(ctrl_addr, self.me, place, &self.layout, true);
        let (s, _) = ctrl.accept().expect("the respawned node reports in");
        s.set_nodelay(true).expect("nodelay");
        let mut input = In(BufReader::new(s.try_clone().expect("clone")));
        let id = input.u32().expect("node id");
        assert_eq!(id, self.me.0, "the respawned node's id");
        let port = input.u32().expect("port") as u16;
        let mut config = self.config.clone();
        config
            .nodes
            .insert(self.me, SocketAddr::new(place.ip, port));
        let mut output = BufWriter::new(s);
        let mut o = Out::default();
        o.bytes(config.to_toml().as_bytes());
        output.write_all(&o.0).expect("send config");
        output.flush().expect("flush");
        let status = input_status(&mut input);
        finish_start(
            self.me,
            status,
            input,
            output,
            regions,
            child,
            &config,
            &self.layout,
        )
    }

    fn call(&mut self, o: &Out) -> bool {
        if !self.alive {
            return false;
        }
        let ok = self.output.write_all(&o.0).is_ok() && self.output.flush().is_ok();
        if !ok {
            self.alive = false;
        }
        ok
    }

    fn post(&mut self, o: &Out) -> Result<OpId, PostError> {
        if !self.call(o) {
            return Err(PostError::Closed);
        }
        match decode_post(&mut self.input) {
            Ok(r) => r,
            Err(_) => {
                self.alive = false;
                Err(PostError::Closed)
            }
        }
    }

    fn ack(&mut self, o: &Out) {
        if self.call(o) && self.input.u8().is_err() {
            self.alive = false;
        }
    }

    /// Kills the process (SIGKILL): the kernel closes its sockets, as in a crash.
    pub fn kill(&mut self) {
        self.alive = false;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Asks the node to silence its link to `peer`.
    pub fn silence(&mut self, peer: NodeId) {
        let mut o = Out::default();
        o.u8(C_SILENCE).u32(peer.0);
        self.ack(&o);
    }

    /// The node process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ProcNode {
    fn drop(&mut self) {
        self.kill();
    }
}

fn signal_code(s: Signal) -> u8 {
    u8::from(s == Signal::Signaled)
}

impl Transport for ProcNode {
    fn local_id(&self) -> NodeId {
        self.me
    }
    fn peers(&self) -> &[NodeId] {
        self.dir.peers()
    }
    fn region(&self, id: RegionId) -> Option<&Region> {
        self.dir.local(id)
    }
    fn remote_region_len(&self, peer: NodeId, id: RegionId) -> Option<usize> {
        self.dir.remote_len(peer, id)
    }
    fn max_message_len(&self) -> usize {
        self.max_message_len
    }
    fn now(&self) -> Time {
        self.clock.now()
    }
    fn write(
        &mut self,
        peer: NodeId,
        src: LocalSlice,
        dst: RemoteAddr,
        signal: Signal,
    ) -> Result<OpId, PostError> {
        self.dir.check_write(peer, src, dst)?;
        let mut o = Out::default();
        o.u8(C_WRITE)
            .u32(peer.0)
            .u32(src.region.0)
            .u64(src.offset as u64)
            .u64(src.len as u64)
            .u32(dst.region.0)
            .u64(dst.offset as u64)
            .u8(signal_code(signal));
        self.post(&o)
    }
    fn read(&mut self, peer: NodeId, src: RemoteAddr, dst: LocalSlice) -> Result<OpId, PostError> {
        self.dir.check_remote(peer, src, dst.len)?;
        self.dir.check_local(dst)?;
        let mut o = Out::default();
        o.u8(C_READ)
            .u32(peer.0)
            .u32(src.region.0)
            .u64(src.offset as u64)
            .u32(dst.region.0)
            .u64(dst.offset as u64)
            .u64(dst.len as u64);
        self.post(&o)
    }
    fn compare_and_swap(
        &mut self,
        peer: NodeId,
        word: RemoteAddr,
        expected: u64,
        new: u64,
    ) -> Result<OpId, PostError> {
        self.dir.check_atomic(peer, word)?;
        let mut o = Out::default();
        o.u8(C_CAS)
            .u32(peer.0)
            .u32(word.region.0)
            .u64(word.offset as u64)
            .u64(expected)
            .u64(new);
        self.post(&o)
    }
    fn fetch_add(&mut self, peer: NodeId, word: RemoteAddr, delta: u64) -> Result<OpId, PostError> {
        self.dir.check_atomic(peer, word)?;
        let mut o = Out::default();
        o.u8(C_FAA)
            .u32(peer.0)
            .u32(word.region.0)
            .u64(word.offset as u64)
            .u64(delta);
        self.post(&o)
    }
    fn send(&mut self, peer: NodeId, data: &[u8], signal: Signal) -> Result<OpId, PostError> {
        self.dir
            .check_send(peer, data.len(), self.max_message_len)?;
        let mut o = Out::default();
        o.u8(C_SEND).u32(peer.0).u8(signal_code(signal)).bytes(data);
        self.post(&o)
    }
    fn fence(&mut self, peer: NodeId) -> Result<OpId, PostError> {
        self.dir.check_fence(peer)?;
        let mut o = Out::default();
        o.u8(C_FENCE).u32(peer.0);
        self.post(&o)
    }
    fn poll(&mut self, out: &mut [Event]) -> usize {
        let mut o = Out::default();
        o.u8(C_POLL).u32(out.len() as u32);
        if !self.call(&o) {
            return 0;
        }
        let r: std::io::Result<usize> = (|| {
            let n = self.input.u32()? as usize;
            for slot in out.iter_mut().take(n) {
                let tag = self.input.u8()?;
                *slot = if tag == 0 {
                    let op = OpId(self.input.u64()?);
                    let peer = NodeId(self.input.u32()?);
                    let kind = kind_of(self.input.u8()?);
                    let tag = self.input.u8()?;
                    let v = self.input.u64()?;
                    let result = match tag {
                        0 => Ok(v),
                        1 => Err(OpError::TimedOut),
                        _ => Err(OpError::PeerFailed),
                    };
                    Event::Completion(Completion {
                        op,
                        peer,
                        kind,
                        result,
                    })
                } else {
                    let peer = NodeId(self.input.u32()?);
                    let cause = cause_of(self.input.u8()?);
                    if tag == 2 {
                        Event::PeerConnected {
                            peer,
                            incarnation: self.input.u64()?,
                        }
                    } else {
                        Event::PeerFailed { peer, cause }
                    }
                };
            }
            Ok(n)
        })();
        r.unwrap_or_else(|_| {
            self.alive = false;
            0
        })
    }
    fn recv(&mut self, buf: &mut Vec<u8>) -> Option<NodeId> {
        let mut o = Out::default();
        o.u8(C_RECV);
        if !self.call(&o) {
            return None;
        }
        let r: std::io::Result<Option<NodeId>> = (|| {
            if self.input.u8()? == 0 {
                return Ok(None);
            }
            let from = NodeId(self.input.u32()?);
            *buf = self.input.bytes()?;
            Ok(Some(from))
        })();
        r.unwrap_or_else(|_| {
            self.alive = false;
            None
        })
    }
    fn is_absent(&self, peer: NodeId) -> bool {
        self.dir.is_absent(peer)
    }

    fn report_failed(&mut self, peer: NodeId) {
        let mut o = Out::default();
        o.u8(C_REPORT).u32(peer.0);
        self.ack(&o);
    }
    /// The proxy forwards `wait` to its node process; nothing in the tests wakes it from
    /// another thread.
    fn waker(&self) -> Waker {
        Waker::noop()
    }
    fn wait(&mut self, timeout: Duration) {
        let mut o = Out::default();
        o.u8(C_WAIT).u64(timeout.as_nanos() as u64);
        self.ack(&o);
    }
}

/// The parent's end of one control connection.
type Control = (In<BufReader<TcpStream>>, BufWriter<TcpStream>);

/// Spawns `n` node processes with `layout`, links them over loopback TCP, and returns the
/// parent's proxies. `tweak` may adjust the cluster config (it has the real addresses).
pub fn spawn_cluster(
    n: usize,
    layout: &[RegionSpec],
    tweak: impl FnOnce(&mut ClusterConfig),
) -> Vec<ProcNode> {
    let places = (0..n).map(|_| Place::loopback()).collect::<Vec<_>>();
    spawn_cluster_at(&places, layout, tweak)
}

/// Where a node process runs: a network namespace (or the parent's) and the address it binds.
#[derive(Clone, Debug)]
pub struct Place {
    /// A namespace made with `ip netns add`, or `None` for the parent's.
    pub netns: Option<String>,
    /// The IP address the node listens on.
    pub ip: std::net::IpAddr,
}

impl Place {
    /// Loopback in the parent's namespace.
    pub fn loopback() -> Place {
        Place {
            netns: None,
            ip: std::net::IpAddr::from([127, 0, 0, 1]),
        }
    }
}

/// Spawns one node process per place; see [`spawn_cluster`].
pub fn spawn_cluster_at(
    places: &[Place],
    layout: &[RegionSpec],
    tweak: impl FnOnce(&mut ClusterConfig),
) -> Vec<ProcNode> {
    spawn_procs(places, places.len(), layout, tweak).0
}

/// A node process that reported its address but has not been told to start: it is a late
/// node of its cluster (listed in [`ClusterConfig::late`]) until [`start`](Self::start).
pub struct PendingNode {
    me: NodeId,
    control: Control,
    regions: Vec<Region>,
    child: Child,
    config: ClusterConfig,
    layout: Vec<RegionSpec>,
}

impl PendingNode {
    /// The node's id.
    pub fn id(&self) -> NodeId {
        self.me
    }

    /// Sends the node its config: it starts (dialling every configured peer) and is returned
    /// as a running node.
    pub fn start(self) -> ProcNode {
        let (mut input, mut output) = self.control;
        let mut o = Out::default();
        o.bytes(self.config.to_toml().as_bytes());
        output.write_all(&o.0).expect("send config");
        output.flush().expect("flush");
        finish_start(
            self.me,
            input_status(&mut input),
            input,
            output,
            self.regions,
            self.child,
            &self.config,
            &self.layout,
        )
    }

    /// Kills the process before it ever starts: its address refuses connections.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The start status a node process reports: its incarnation, or why it did not start.
fn input_status(input: &mut In<BufReader<TcpStream>>) -> Result<u64, String> {
    let status = input.u8().expect("start status");
    if status != 0 {
        return Err(String::from_utf8_lossy(&input.bytes().unwrap_or_default()).into_owned());
    }
    Ok(input.u64().expect("incarnation"))
}

#[allow(clippy::too_many_arguments)]
fn finish_start(
    me: NodeId,
    status: Result<u64, String>,
    input: In<BufReader<TcpStream>>,
    output: BufWriter<TcpStream>,
    regions: Vec<Region>,
    child: Child,
    config: &ClusterConfig,
    layout: &[RegionSpec],
) -> ProcNode {
    let incarnation = status.unwrap_or_else(|why| panic!("node {me} failed to start: {why}"));
    let mut dir = Directory::new(me);
    for r in regions {
        dir.add_local(r).expect("unique regions");
    }
    // Every peer is known to the proxy: ops to absent peers go to the node, which refuses them.
    for &p in config.nodes.keys() {
        dir.add_peer(p, layout);
    }
    ProcNode {
        me,
        dir,
        max_message_len: config.max_message_len,
        clock: SystemClock::new(),
        input,
        output,
        child,
        alive: true,
        incarnation,
        config: config.clone(),
        layout: layout.to_vec(),
    }
}

/// Spawns the test binary as node `me`'s process (it reports in at `ctrl_addr`), with fresh
/// shared-memory regions of `layout`; `rejoin` makes it start as a restarted node.
fn spawn_child(
    ctrl_addr: SocketAddr,
    me: NodeId,
    place: &Place,
    layout: &[RegionSpec],
    rejoin: bool,
) -> (Child, Vec<Region>) {
    let exe = std::env::current_exe().expect("test binary");
    let mut regions = Vec::new();
    let mut spec_env = Vec::new();
    let mut fds = Vec::new();
    for s in layout {
        let fd = memfd(s.len);
        regions.push(map_fd(fd, *s));
        spec_env.push(format!("{}:{}:{}", s.id.0, s.len, fd));
        fds.push(fd);
    }
    let mut cmd = Command::new(&exe);
    if let Some(ns) = &place.netns {
        cmd.env("SQUALL_TCP_NETNS", ns);
    }
    if rejoin {
        cmd.env("SQUALL_TCP_REJOIN", "1");
    }
    let child = cmd
        .args([
            "child_node_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("SQUALL_TCP_CTRL", ctrl_addr.to_string())
        .env("SQUALL_TCP_NODE", me.0.to_string())
        .env("SQUALL_TCP_BIND", place.ip.to_string())
        .env("SQUALL_TCP_REGIONS", spec_env.join(","))
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn node process");
    for fd in fds {
        // SAFETY: our own fd; the child has its copy, the mapping keeps the memory.
        unsafe { libc::close(fd) };
    }
    (child, regions)
}

/// Spawns one node process per place and starts the first `started` of them; the others are
/// the config's late nodes, returned unstarted.
pub fn spawn_procs(
    places: &[Place],
    started: usize,
    layout: &[RegionSpec],
    tweak: impl FnOnce(&mut ClusterConfig),
) -> (Vec<ProcNode>, Vec<PendingNode>) {
    let n = places.len();
    let ctrl = TcpListener::bind("127.0.0.1:0").expect("control listener");
    let ctrl_addr = ctrl.local_addr().expect("addr");
    let mut children = Vec::new();
    let mut locals = Vec::new();
    for (k, place) in places.iter().enumerate() {
        let (child, regions) = spawn_child(ctrl_addr, NodeId(k as u32), place, layout, false);
        children.push(Some(child));
        locals.push(regions);
    }
    ctrl.set_nonblocking(true).expect("nonblocking");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut conns: Vec<Option<Control>> = (0..n).map(|_| None).collect();
    let mut addrs: Vec<Option<SocketAddr>> = vec![None; n];
    let mut got = 0;
    while got < n {
        match ctrl.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).expect("blocking");
                s.set_nodelay(true).expect("nodelay");
                let mut input = In(BufReader::new(s.try_clone().expect("clone")));
                let id = input.u32().expect("node id") as usize;
                let port = input.u32().expect("port") as u16;
                addrs[id] = Some(SocketAddr::new(places[id].ip, port));
                conns[id] = Some((input, BufWriter::new(s)));
                got += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    Instant::now() < deadline,
                    "node processes did not report in"
                );
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => panic!("control accept: {e}"),
        }
    }
    let addrs: Vec<SocketAddr> = addrs.into_iter().map(|a| a.expect("address")).collect();
    let mut config = test_config(&addrs);
    config.late = (started..n).map(|i| NodeId(i as u32)).collect();
    tweak(&mut config);
    let text = config.to_toml();
    for c in conns.iter_mut().take(started) {
        let (_, output) = c.as_mut().expect("connection");
        let mut o = Out::default();
        o.bytes(text.as_bytes());
        output.write_all(&o.0).expect("send config");
        output.flush().expect("flush");
    }
    let mut nodes = Vec::new();
    let mut pending = Vec::new();
    for (k, (c, regions)) in conns.into_iter().zip(locals).enumerate() {
        let (mut input, output) = c.expect("connection");
        let me = NodeId(k as u32);
        let child = children[k].take().expect("child");
        if k >= started {
            pending.push(PendingNode {
                me,
                control: (input, output),
                regions,
                child,
                config: config.clone(),
                layout: layout.to_vec(),
            });
            continue;
        }
        let status = input_status(&mut input);
        nodes.push(finish_start(
            me, status, input, output, regions, child, &config, layout,
        ));
    }
    (nodes, pending)
}

/// Every node in its own OS process on loopback.
pub struct MultiProcess {
    timeout: Duration,
}

impl MultiProcess {
    pub fn new() -> MultiProcess {
        MultiProcess {
            timeout: test_config(&[]).op_timeout,
        }
    }
}

impl Fabric for MultiProcess {
    type Node = ProcNode;

    fn name(&self) -> String {
        "tcp(one process per node, loopback)".into()
    }

    fn build(&mut self, n: usize, layout: &[RegionSpec]) -> Vec<ProcNode> {
        spawn_cluster(n, layout, |_| {})
    }

    fn run(
        &mut self,
        nodes: &mut [ProcNode],
        programs: Vec<Slot<'_, ProcNode>>,
    ) -> Result<(), Stalled> {
        run_threads(nodes, programs, Duration::from_secs(60))
    }

    fn crash(&mut self, nodes: &mut [ProcNode], victim: NodeId) {
        nodes[victim.index()].kill();
    }

    fn restart(&mut self, nodes: &mut [ProcNode], victim: NodeId) -> Option<u64> {
        let fresh = nodes[victim.index()].respawn(&Place::loopback());
        let incarnation = fresh.incarnation();
        nodes[victim.index()] = fresh;
        Some(incarnation)
    }

    fn partition(&mut self, nodes: &mut [ProcNode], a: NodeId, b: NodeId) -> bool {
        nodes[a.index()].silence(b);
        nodes[b.index()].silence(a);
        true
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }
}
