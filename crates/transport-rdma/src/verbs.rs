//! `VerbsNic`: the [`Provider`] over a real RDMA device, through the `sideway` crate.
//!
//! sideway loads libibverbs with `dlopen` at run time, so a binary built with the `verbs` feature
//! starts on a machine without rdma-core; [`VerbsNic::open`] then fails with one
//! [`ProviderError::NoDevice`] message that names what is missing.
//!
//! One protection domain, one completion queue shared by every queue pair, and one RC queue pair
//! per peer. Regions are registered for local write and remote read, write and atomic access.
//!
//! Two details differ from a plain verbs program, both because of what sideway 0.4.3 exposes:
//!
//! * **Which peer a completion belongs to.** sideway's work completions carry no QP number, and
//!   the opcode of an error completion is undefined, so the work-request id the NIC sees encodes
//!   the peer and the queue: bit 63 marks a receive, bits 48..63 hold the peer's index and bits
//!   0..48 a per-queue sequence number. Each queue keeps a FIFO of `(sequence, caller's wr_id)`;
//!   a queue pair completes its requests in order, so a completion retires every earlier entry
//!   (the unsignaled ones before it) and hands the caller's own `wr_id` back.
//! * **Waiting.** sideway creates completion channels but does not wrap `ibv_req_notify_cq` or
//!   `ibv_get_cq_event`, so [`Provider::wait`] busy-polls the completion queue for
//!   [`SPIN`], then sleeps in steps of at most [`NAP`] between polls until the timeout.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sideway::ibverbs::AccessFlags;
use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::{
    BasicCompletionQueue, GenericCompletionQueue, PollCompletionQueueError, WorkCompletionStatus,
};
use sideway::ibverbs::device::{DeviceInfo, DeviceList, GetDeviceListErrorKind};
use sideway::ibverbs::device_context::{
    AtomicCapability, DeviceContext, LinkLayer, Mtu, PortState,
};
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{
    BasicQueuePair, PostSendGuard, QueuePair, QueuePairAttribute, QueuePairState,
    SetScatterGatherEntry, WorkRequestFlags,
};
use squall_transport::{NodeId, Region, Waker};

use crate::config::RdmaConfig;
use crate::provider::{
    MemoryKeys, Provider, ProviderError, QpEndpoint, Sge, WcStatus, WorkCompletion, WorkOp,
    WorkRequest,
};

/// How long [`Provider::wait`] busy-polls before it starts sleeping.
pub const SPIN: Duration = Duration::from_micros(50);
/// The longest sleep between two polls in [`Provider::wait`].
pub const NAP: Duration = Duration::from_micros(200);

/// Completions taken from the device per `ibv_poll_cq`.
const POLL_BATCH: u32 = 64;
/// Inline data the queue pairs are created for (small writes could be posted without a lookup).
const MAX_INLINE: u32 = 64;
/// Hop limit of the global route header (RoCE v2 packets are routable IP).
const HOP_LIMIT: u8 = 64;
/// Minimum RNR NAK timer (12 = 0.64 ms), for a peer that is briefly out of receive buffers.
const MIN_RNR_TIMER: u8 = 12;

const RECV_TAG: u64 = 1 << 63;
const PEER_SHIFT: u32 = 48;
const SEQ_MASK: u64 = (1 << PEER_SHIFT) - 1;
/// Peers one NIC can address through the work-request id encoding.
const MAX_PEERS: usize = 1 << 15;

const FALLBACK: &str =
    "; the RDMA transport cannot run here, use squall-transport-tcp (the TCP fabric) instead";

fn verbs(call: &'static str, e: impl std::error::Error) -> ProviderError {
    ProviderError::Verbs {
        call,
        detail: chain(&e),
    }
}

/// An error with its sources: sideway's errors say what failed, the OS error is a source.
fn chain(e: &dyn std::error::Error) -> String {
    let mut detail = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !detail.contains(&text) {
            detail.push_str(": ");
            detail.push_str(&text);
        }
        source = s.source();
    }
    detail
}

fn no_device(what: String) -> ProviderError {
    ProviderError::NoDevice(format!("{what}{FALLBACK}"))
}

/// Explains why the device list could not be read.
fn list_error(errno: Option<i32>, error: &dyn std::fmt::Display) -> ProviderError {
    const ENOSYS: i32 = 38;
    const EOPNOTSUPP: i32 = 95;
    match errno {
        Some(ENOSYS) => no_device(
            "no RDMA device: the kernel has no RDMA support (ibv_get_device_list: ENOSYS; \
             load the driver, e.g. `modprobe mlx5_ib`, or set up soft-RoCE with \
             `rdma link add rxe0 type rxe netdev <if>`)"
                .into(),
        ),
        Some(EOPNOTSUPP) => no_device(
            "no RDMA device: libibverbs is not installed (ibv_get_device_list: EOPNOTSUPP; \
             install the `libibverbs1` and `ibverbs-providers` packages)"
                .into(),
        ),
        _ => no_device(format!(
            "no RDMA device: the device list could not be read ({error})"
        )),
    }
}

fn mtu(bytes: u32) -> Mtu {
    match bytes {
        256 => Mtu::Mtu256,
        512 => Mtu::Mtu512,
        1024 => Mtu::Mtu1024,
        2048 => Mtu::Mtu2048,
        _ => Mtu::Mtu4096,
    }
}

fn mtu_bytes(m: Mtu) -> u32 {
    match m {
        Mtu::Mtu256 => 256,
        Mtu::Mtu512 => 512,
        Mtu::Mtu1024 => 1024,
        Mtu::Mtu2048 => 2048,
        Mtu::Mtu4096 => 4096,
    }
}

/// The status a completion ended with, as the transport distinguishes it.
fn status(code: u32) -> WcStatus {
    use WorkCompletionStatus as S;
    match code {
        c if c == S::Success as u32 => WcStatus::Success,
        c if c == S::RetryCounterExceededError as u32
            || c == S::ResponderNotReadyRetryCounterExceededError as u32 =>
        {
            WcStatus::RetryExceeded
        }
        c if c == S::RemoteAccessError as u32
            || c == S::RemoteOperationError as u32
            || c == S::RemoteInvalidRequestError as u32 =>
        {
            WcStatus::RemoteAccess
        }
        c if c == S::WorkRequestFlushedError as u32 => WcStatus::Flushed,
        c => WcStatus::Other(c),
    }
}

/// One queue of a queue pair: the requests it holds, oldest first.
#[derive(Default)]
struct Fifo {
    next: u64,
    posted: VecDeque<(u64, u64)>,
}

impl Fifo {
    fn tag(&self, recv: bool, index: usize) -> u64 {
        (if recv { RECV_TAG } else { 0 }) | ((index as u64) << PEER_SHIFT) | (self.next & SEQ_MASK)
    }

    fn push(&mut self, wr_id: u64) {
        self.posted.push_back((self.next & SEQ_MASK, wr_id));
        self.next = self.next.wrapping_add(1);
    }

    /// The caller's id of the request with sequence number `seq`, retiring it and every request
    /// posted before it.
    fn complete(&mut self, seq: u64) -> Option<u64> {
        if !self.posted.iter().any(|&(s, _)| s == seq) {
            return None;
        }
        while let Some((s, wr_id)) = self.posted.pop_front() {
            if s == seq {
                return Some(wr_id);
            }
        }
        None
    }
}

/// Moves a [`VerbsNic`]'s queue pairs to the error state from another thread — what a NIC fault,
/// or the death of the peer's process, does to this side of a link. For fault-injection tests:
/// the NIC applies it at its next call (post, poll or wait), so the transport above learns of it
/// through error completions, as it would of a real fault.
#[derive(Clone, Debug, Default)]
pub struct ErrorInjector {
    inner: Arc<Injected>,
}

#[derive(Debug, Default)]
struct Injected {
    any: AtomicBool,
    peers: Mutex<Vec<NodeId>>,
}

impl ErrorInjector {
    /// The NIC's queue pair to `peer` goes to the error state at its next call.
    pub fn set_error(&self, peer: NodeId) {
        self.inner
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(peer);
        self.inner.any.store(true, Ordering::Release);
    }

    fn take(&self) -> Vec<NodeId> {
        if !self.inner.any.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.inner.any.store(false, Ordering::Release);
        std::mem::take(
            &mut *self
                .inner
                .peers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

struct Qp {
    peer: NodeId,
    qp: BasicQueuePair,
    psn: u32,
    sends: Fifo,
    recvs: Fifo,
}

/// A real RDMA NIC, through sideway: one queue pair per peer on one completion queue.
///
/// ```no_run
/// use squall_transport_rdma::{RdmaConfig, VerbsNic};
/// let cfg = RdmaConfig { device: Some("mlx5_0".into()), gid_index: 3, ..RdmaConfig::default() };
/// match VerbsNic::open(&cfg) {
///     Ok(nic) => println!("opened {}", nic.device_name()),
///     Err(e) => eprintln!("{e}"),
/// }
/// ```
pub struct VerbsNic {
    // Field order is drop order: queue pairs go before the memory regions they could access, and
    // each memory region is deregistered before the `Region` clone that keeps its memory alive.
    qps: Vec<Qp>,
    index: BTreeMap<NodeId, usize>,
    mrs: Vec<(Arc<MemoryRegion>, Region)>,
    cq: Arc<BasicCompletionQueue>,
    pd: Arc<ProtectionDomain>,
    _ctx: Arc<DeviceContext>,
    name: String,
    port: u8,
    gid_index: u8,
    gid: Gid,
    lid: u16,
    mtu: Mtu,
    sq_depth: u32,
    rq_depth: u32,
    retry_timeout_exp: u8,
    retry_count: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    polled: VecDeque<WorkCompletion>,
    poll_error: Option<ProviderError>,
    injector: ErrorInjector,
    /// Set by a [`Waker`]; `wait` returns when it sees it (the nap is the longest delay).
    woken: Arc<AtomicBool>,
}

impl std::fmt::Debug for VerbsNic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsNic")
            .field("device", &self.name)
            .field("port", &self.port)
            .field("gid_index", &self.gid_index)
            .field("lid", &self.lid)
            .field("queue_pairs", &self.qps.len())
            .finish_non_exhaustive()
    }
}

fn to_u32(call: &'static str, name: &'static str, v: usize) -> Result<u32, ProviderError> {
    u32::try_from(v).map_err(|_| ProviderError::Verbs {
        call,
        detail: format!("{name} = {v} does not fit the device's 32-bit limit"),
    })
}

impl VerbsNic {
    /// Opens `cfg.device` (or the first device), checks `cfg.port` is active, allocates a
    /// protection domain and a completion queue of `cfg.cq_depth` entries.
    ///
    /// With no usable device this is [`ProviderError::NoDevice`], whose message says what is
    /// missing — a kernel without RDMA, libibverbs, any device at all, or the named device (it
    /// lists those that exist) — and points to the TCP transport.
    pub fn open(cfg: &RdmaConfig) -> Result<VerbsNic, ProviderError> {
        let list = DeviceList::new().map_err(|e| {
            let errno = match &e.0 {
                GetDeviceListErrorKind::Ibverbs(io) => io.raw_os_error(),
                _ => None,
            };
            list_error(errno, &chain(&e))
        })?;
        let names: Vec<String> = list.iter().map(|d| d.name()).collect();
        if names.is_empty() {
            return Err(no_device(
                "no RDMA device found (ibv_get_device_list returned none; `ibv_devices` lists \
                 them; for testing, soft-RoCE: `rdma link add rxe0 type rxe netdev <if>`)"
                    .into(),
            ));
        }
        let device = match &cfg.device {
            Some(want) => list.iter().find(|d| d.name() == *want).ok_or_else(|| {
                no_device(format!(
                    "the RDMA device `{want}` does not exist; the devices here are: {}",
                    names.join(", ")
                ))
            })?,
            None => list
                .iter()
                .next()
                .ok_or_else(|| no_device("no RDMA device found".into()))?,
        };
        let name = device.name();
        let ctx = device.open().map_err(|e| verbs("ibv_open_device", e))?;
        drop(list);

        let dev = ctx
            .query_device()
            .map_err(|e| verbs("ibv_query_device", e))?;
        let port = ctx
            .query_port(cfg.port)
            .map_err(|e| verbs("ibv_query_port", e))?;
        if !matches!(port.port_state(), PortState::Active) {
            return Err(ProviderError::Verbs {
                call: "ibv_query_port",
                detail: format!(
                    "port {} of {name} is {:?}, not active; check the link (`ibv_devinfo -d {name}`)",
                    cfg.port,
                    port.port_state()
                ),
            });
        }
        match dev.atomic_capability() {
            AtomicCapability::None => {
                return Err(ProviderError::Verbs {
                    call: "ibv_query_device",
                    detail: format!(
                        "{name} supports no RDMA atomics (atomic_cap = IBV_ATOMIC_NONE); Squall's \
                         compare-and-swap and fetch-and-add need them: use another device or \
                         squall-transport-tcp"
                    ),
                });
            }
            AtomicCapability::HostChannelAdapter => tracing::warn!(
                device = %name,
                "atomics are atomic only among this NIC's own operations (IBV_ATOMIC_HCA), not \
                 against CPU atomics on the same word"
            ),
            AtomicCapability::Global => {}
        }
        let ethernet = matches!(port.link_layer(), LinkLayer::Ethernet);
        let gid = ctx
            .query_gid(cfg.port, u32::from(cfg.gid_index))
            .map_err(|e| verbs("ibv_query_gid", e))?;
        if ethernet && gid.is_zero() {
            return Err(ProviderError::Verbs {
                call: "ibv_query_gid",
                detail: format!(
                    "GID index {} of {name} port {} is empty; on RoCE set gid_index to a RoCE v2 \
                     entry holding the interface's address (`show_gids`)",
                    cfg.gid_index, cfg.port
                ),
            });
        }
        let active = port.active_mtu();
        let mut path_mtu = mtu(cfg.mtu);
        if path_mtu > active {
            tracing::warn!(
                device = %name, configured = cfg.mtu, active = mtu_bytes(active),
                "path MTU lowered to the port's active MTU"
            );
            path_mtu = active;
        }
        let clamp = |v: i32| u8::try_from(v.clamp(1, 16)).unwrap_or(1);

        let pd = ctx.alloc_pd().map_err(|e| verbs("ibv_alloc_pd", e))?;
        let cqe = to_u32("ibv_create_cq", "cq_depth", cfg.cq_depth)?;
        let mut cq = ctx
            .create_cq_builder()
            .setup_cqe(cqe)
            .build()
            .map_err(|e| verbs("ibv_create_cq", e))?;
        if let (Some(cq), Some(batch)) =
            (Arc::get_mut(&mut cq), std::num::NonZeroU32::new(POLL_BATCH))
        {
            cq.setup_poll_batch(batch);
        }
        tracing::info!(
            device = %name, port = cfg.port, gid_index = cfg.gid_index, %gid, lid = port.lid(),
            link = if ethernet { "ethernet" } else { "infiniband" }, mtu = mtu_bytes(path_mtu),
            "rdma device opened"
        );
        Ok(VerbsNic {
            qps: Vec::new(),
            index: BTreeMap::new(),
            mrs: Vec::new(),
            cq,
            pd,
            _ctx: ctx,
            name,
            port: cfg.port,
            gid_index: cfg.gid_index,
            gid,
            lid: if ethernet { 0 } else { port.lid() },
            mtu: path_mtu,
            sq_depth: to_u32("ibv_create_qp", "sq_depth", cfg.sq_depth)?,
            rq_depth: to_u32("ibv_create_qp", "rq_depth", cfg.rq_depth)?,
            retry_timeout_exp: cfg.retry_timeout_exp,
            retry_count: cfg.retry_count,
            max_rd_atomic: clamp(dev.max_qp_init_rd_atom()),
            max_dest_rd_atomic: clamp(dev.max_qp_rd_atom()),
            polled: VecDeque::new(),
            poll_error: None,
            injector: ErrorInjector::default(),
            woken: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The name of the opened device, e.g. `mlx5_0`.
    pub fn device_name(&self) -> &str {
        &self.name
    }

    /// A handle that moves this NIC's queue pairs to the error state from elsewhere (tests).
    pub fn error_injector(&self) -> ErrorInjector {
        self.injector.clone()
    }

    fn apply_injected(&mut self) {
        for peer in self.injector.take() {
            tracing::warn!(device = %self.name, %peer, "injected: queue pair to the error state");
            self.set_error(peer);
        }
    }

    fn qp(&mut self, peer: NodeId, call: &'static str) -> Result<(usize, &mut Qp), ProviderError> {
        let i = *self.index.get(&peer).ok_or_else(|| ProviderError::Verbs {
            call,
            detail: format!("no queue pair to {peer}"),
        })?;
        Ok((i, &mut self.qps[i]))
    }

    fn modify(qp: &mut Qp, attr: &QueuePairAttribute, to: &str) -> Result<(), ProviderError> {
        qp.qp.modify(attr).map_err(|e| ProviderError::Verbs {
            call: "ibv_modify_qp",
            detail: format!("queue pair to {} -> {to}: {}", qp.peer, chain(&e)),
        })
    }

    /// Takes one batch of completions from the device into `self.polled`.
    fn fill(&mut self) {
        if self.poll_error.is_some() {
            return;
        }
        let mut poller = match self.cq.start_poll() {
            Ok(p) => p,
            Err(PollCompletionQueueError::CompletionQueueEmpty) => return,
            Err(e) => {
                self.poll_error = Some(verbs("ibv_poll_cq", e));
                return;
            }
        };
        // At most one batch: the poller holds exactly the entries one ibv_poll_cq returned, and
        // going on would poll again into a buffer this loop might not finish.
        for _ in 0..POLL_BATCH {
            let Some(wc) = poller.next() else { break };
            let id = wc.wr_id();
            let recv = id & RECV_TAG != 0;
            let index = ((id & !RECV_TAG) >> PEER_SHIFT) as usize;
            let Some(qp) = self.qps.get_mut(index) else {
                tracing::warn!(wr_id = id, "completion for an unknown queue pair; ignored");
                continue;
            };
            let fifo = if recv { &mut qp.recvs } else { &mut qp.sends };
            let Some(wr_id) = fifo.complete(id & SEQ_MASK) else {
                tracing::warn!(wr_id = id, peer = %qp.peer, "completion for an unknown work request; ignored");
                continue;
            };
            self.polled.push_back(WorkCompletion {
                wr_id,
                peer: qp.peer,
                status: status(wc.status()),
                is_recv: recv,
                byte_len: if recv { wc.byte_len() } else { 0 },
            });
        }
    }
}

impl Provider for VerbsNic {
    fn register(&mut self, region: &Region) -> Result<MemoryKeys, ProviderError> {
        let addr = region.as_ptr() as usize;
        let len = region.len();
        // SAFETY: `addr..addr + len` is the region's own allocation, valid for `len` bytes. The
        // `Region` clone stored next to the memory region keeps that allocation alive until the
        // memory region is deregistered (it is dropped first, see the field order of `VerbsNic`),
        // and the queue pairs that could access it are destroyed before either.
        let mr = unsafe {
            self.pd.reg_mr(
                addr,
                len,
                AccessFlags::LocalWrite
                    | AccessFlags::RemoteWrite
                    | AccessFlags::RemoteRead
                    | AccessFlags::RemoteAtomic,
            )
        }
        .map_err(|e| verbs("ibv_reg_mr", e))?;
        let keys = MemoryKeys {
            addr: addr as u64,
            len: len as u64,
            lkey: mr.lkey(),
            rkey: mr.rkey(),
        };
        self.mrs.push((mr, region.clone()));
        Ok(keys)
    }

    fn create_qp(&mut self, peer: NodeId) -> Result<QpEndpoint, ProviderError> {
        if self.index.contains_key(&peer) {
            return Err(ProviderError::Verbs {
                call: "ibv_create_qp",
                detail: format!("a queue pair to {peer} already exists"),
            });
        }
        if self.qps.len() >= MAX_PEERS {
            return Err(ProviderError::Verbs {
                call: "ibv_create_qp",
                detail: format!("at most {MAX_PEERS} peers per node"),
            });
        }
        let cq = GenericCompletionQueue::from(Arc::clone(&self.cq));
        let qp = self
            .pd
            .create_qp_builder()
            .setup_send_cq(cq.clone())
            .setup_recv_cq(cq)
            .setup_max_send_wr(self.sq_depth)
            .setup_max_recv_wr(self.rq_depth)
            .setup_max_send_sge(1)
            .setup_max_recv_sge(1)
            .setup_max_inline_data(MAX_INLINE)
            .build()
            .map_err(|e| verbs("ibv_create_qp", e))?;
        let qp_number = qp.qp_number();
        // A 24-bit starting PSN that differs per queue pair and per run.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let psn = (qp_number.wrapping_mul(2_654_435_761) ^ nanos) & 0x00ff_ffff;
        let mut slot = Qp {
            peer,
            qp,
            psn,
            sends: Fifo::default(),
            recvs: Fifo::default(),
        };
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::Init)
            .setup_pkey_index(0)
            .setup_port(self.port)
            .setup_access_flags(
                AccessFlags::LocalWrite
                    | AccessFlags::RemoteWrite
                    | AccessFlags::RemoteRead
                    | AccessFlags::RemoteAtomic,
            );
        Self::modify(&mut slot, &attr, "INIT")?;
        self.index.insert(peer, self.qps.len());
        self.qps.push(slot);
        Ok(QpEndpoint {
            qp_number,
            psn,
            lid: self.lid,
            gid: self.gid.raw,
        })
    }

    fn connect_qp(&mut self, peer: NodeId, remote: &QpEndpoint) -> Result<(), ProviderError> {
        let (port, gid_index, lid, mtu) = (self.port, self.gid_index, self.lid, self.mtu);
        let (timeout, retry, rd, dest_rd) = (
            self.retry_timeout_exp,
            self.retry_count,
            self.max_rd_atomic,
            self.max_dest_rd_atomic,
        );
        let (_, qp) = self.qp(peer, "ibv_modify_qp")?;

        let mut av = AddressHandleAttribute::new();
        av.setup_port(port).setup_service_level(0);
        let remote_gid = Gid { raw: remote.gid };
        if !remote_gid.is_zero() {
            // RoCE needs the GRH; on InfiniBand it is harmless within a subnet.
            av.setup_grh_dest_gid(&remote_gid)
                .setup_grh_src_gid_index(gid_index)
                .setup_grh_hop_limit(HOP_LIMIT);
        }
        if lid != 0 {
            // InfiniBand: route by LID. RoCE ports have none.
            av.setup_dest_lid(remote.lid);
        }
        let mut rtr = QueuePairAttribute::new();
        rtr.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(mtu)
            .setup_dest_qp_num(remote.qp_number)
            .setup_rq_psn(remote.psn)
            .setup_max_dest_read_atomic(dest_rd)
            .setup_min_rnr_timer(MIN_RNR_TIMER)
            .setup_address_vector(&av);
        Self::modify(qp, &rtr, "RTR")?;

        let mut rts = QueuePairAttribute::new();
        rts.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(qp.psn)
            .setup_timeout(timeout)
            .setup_retry_cnt(retry)
            .setup_rnr_retry(7)
            .setup_max_read_atomic(rd);
        Self::modify(qp, &rts, "RTS")
    }

    fn post_send(&mut self, peer: NodeId, wr: &WorkRequest) -> Result<(), ProviderError> {
        self.apply_injected();
        let (i, qp) = self.qp(peer, "ibv_post_send")?;
        let tag = qp.sends.tag(false, i);
        let mut flags = WorkRequestFlags::none();
        if wr.signaled {
            flags |= WorkRequestFlags::Signaled;
        }
        if wr.fence {
            flags |= WorkRequestFlags::Fence;
        }
        let l = wr.local;
        let mut guard = qp.qp.start_post_send();
        let handle = guard.construct_wr(tag, flags);
        let local = match wr.op {
            WorkOp::Write { remote_addr, rkey } => handle.setup_write(rkey, remote_addr),
            WorkOp::Read { remote_addr, rkey } => handle.setup_read(rkey, remote_addr),
            WorkOp::CompareAndSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => handle.setup_atomic_compare_swap(rkey, remote_addr, compare, swap),
            WorkOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => handle.setup_atomic_fetch_add(rkey, remote_addr, add),
            WorkOp::Send => handle.setup_send(),
        };
        if l.len > 0 {
            // SAFETY: the caller's SGE lies in memory registered through `register` (its lkey
            // says so, and the NIC checks it), which stays alive as long as this NIC holds its
            // `Region` clone — longer than the queue pair that could still be using it.
            unsafe { local.setup_sge(l.lkey, l.addr, l.len) };
        }
        // A zero-length request carries no SGE: a zero-length SGE means 2 GiB to some NICs.
        guard.post().map_err(|e| verbs("ibv_post_send", e))?;
        qp.sends.push(wr.wr_id);
        Ok(())
    }

    fn post_recv(&mut self, peer: NodeId, wr_id: u64, buf: Sge) -> Result<(), ProviderError> {
        self.apply_injected();
        let (i, qp) = self.qp(peer, "ibv_post_recv")?;
        let tag = qp.recvs.tag(true, i);
        let mut guard = qp.qp.start_post_recv();
        let handle = guard.construct_wr(tag);
        // SAFETY: as in `post_send`: the buffer lies in registered memory that outlives the
        // queue pair.
        unsafe { handle.setup_sge(buf.lkey, buf.addr, buf.len) };
        guard.post().map_err(|e| verbs("ibv_post_recv", e))?;
        qp.recvs.push(wr_id);
        Ok(())
    }

    fn poll(&mut self, out: &mut [WorkCompletion]) -> Result<usize, ProviderError> {
        self.apply_injected();
        if self.polled.len() < out.len() {
            self.fill();
        }
        // Completions already taken are handed over before a poll error is reported.
        if self.polled.is_empty() {
            if let Some(e) = self.poll_error.clone() {
                return Err(e);
            }
        }
        let n = out.len().min(self.polled.len());
        for (slot, wc) in out.iter_mut().zip(self.polled.drain(..n)) {
            *slot = wc;
        }
        Ok(n)
    }

    fn set_error(&mut self, peer: NodeId) {
        let Ok((_, qp)) = self.qp(peer, "ibv_modify_qp") else {
            return;
        };
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::Error);
        if let Err(e) = Self::modify(qp, &attr, "ERROR") {
            tracing::error!(%peer, error = %e, "could not move a queue pair to the error state");
        }
    }

    fn waker(&self) -> Waker {
        let woken = Arc::clone(&self.woken);
        Waker::new(move || woken.store(true, Ordering::Release))
    }

    // Spins, then naps: a one-sided write from a peer makes no completion here, so a
    // completion channel could not wake a driver for it (see ARCHITECTURE, RDMA fabric).
    fn wait(&mut self, timeout: Duration) {
        self.apply_injected();
        let start = Instant::now();
        loop {
            if !self.polled.is_empty() || self.poll_error.is_some() {
                return;
            }
            self.fill();
            if !self.polled.is_empty()
                || self.poll_error.is_some()
                || self.woken.swap(false, Ordering::AcqRel)
            {
                return;
            }
            let elapsed = start.elapsed();
            if elapsed >= timeout {
                return;
            }
            if elapsed < SPIN {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(NAP.min(timeout - elapsed));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_retires_earlier_requests_in_order() {
        let mut f = Fifo::default();
        for id in 10..15 {
            let tag = f.tag(false, 3);
            assert_eq!(tag >> PEER_SHIFT, 3);
            f.push(id);
        }
        assert_eq!(f.complete(2), Some(12));
        assert_eq!(f.posted.len(), 2);
        assert_eq!(f.complete(0), None, "already retired");
        assert_eq!(f.complete(4), Some(14));
        assert!(f.posted.is_empty());
    }

    #[test]
    fn fifo_sequence_wraps() {
        let mut f = Fifo {
            next: SEQ_MASK,
            ..Fifo::default()
        };
        let a = f.tag(true, 1);
        f.push(7);
        let b = f.tag(true, 1);
        f.push(8);
        assert_eq!(a & SEQ_MASK, SEQ_MASK);
        assert_eq!(b & SEQ_MASK, 0);
        assert_ne!(a & RECV_TAG, 0);
        assert_eq!(f.complete(a & SEQ_MASK), Some(7));
        assert_eq!(f.complete(b & SEQ_MASK), Some(8));
    }

    #[test]
    fn statuses_map() {
        use WorkCompletionStatus as S;
        assert_eq!(status(S::Success as u32), WcStatus::Success);
        assert_eq!(
            status(S::RetryCounterExceededError as u32),
            WcStatus::RetryExceeded
        );
        assert_eq!(
            status(S::ResponderNotReadyRetryCounterExceededError as u32),
            WcStatus::RetryExceeded
        );
        assert_eq!(status(S::RemoteAccessError as u32), WcStatus::RemoteAccess);
        assert_eq!(
            status(S::RemoteOperationError as u32),
            WcStatus::RemoteAccess
        );
        assert_eq!(status(S::WorkRequestFlushedError as u32), WcStatus::Flushed);
        let code = S::LocalProtectionError as u32;
        assert_eq!(status(code), WcStatus::Other(code));
    }

    #[test]
    fn list_errors_name_what_is_missing() {
        let e = list_error(Some(38), &"x").to_string();
        assert!(e.contains("kernel has no RDMA support") && e.contains("squall-transport-tcp"));
        let e = list_error(Some(95), &"x").to_string();
        assert!(e.contains("libibverbs is not installed") && e.contains("squall-transport-tcp"));
    }

    #[test]
    fn mtus_round_trip() {
        for b in [256, 512, 1024, 2048, 4096] {
            assert_eq!(mtu_bytes(mtu(b)), b);
        }
    }
}
