//! A mock provider: a perfect NIC over shared memory, with injectable faults.
//!
//! All NICs of a [`MockFabric`] share one lock, and a work request is executed when posted, so
//! ordering and atomicity are those of a real RC queue pair. Faults: a partition or a crashed or
//! cut-off peer holds work requests until the retry timeout, then fails the oldest with
//! `RetryExceeded` and flushes the rest, as a NIC does; [`MockFabric::inject_qp_error`],
//! [`MockFabric::inject_retry_exceeded`] and [`MockFabric::inject_cq_overrun`] produce the other
//! failures a transport must survive.
//!
//! ```
//! use squall_transport::NodeId;
//! use squall_transport_rdma::mock::MockFabric;
//! let fabric = MockFabric::new(std::time::Duration::from_millis(20), 4096);
//! let nic = fabric.nic(NodeId(0));
//! # drop(nic);
//! ```

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crossbeam_utils::sync::{Parker, Unparker};
use squall_transport::{NodeId, Region, Waker};

use crate::provider::{
    MemoryKeys, Provider, ProviderError, QpEndpoint, Sge, WcStatus, WorkCompletion, WorkOp,
    WorkRequest,
};

/// A set of mock NICs that can reach each other.
#[derive(Clone)]
pub struct MockFabric {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for MockFabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockFabric").finish_non_exhaustive()
    }
}

struct State {
    retry_timeout: Duration,
    cq_depth: usize,
    nics: BTreeMap<NodeId, NicState>,
    /// Unordered pairs that cannot reach each other.
    partitions: BTreeSet<(NodeId, NodeId)>,
    next_qpn: u32,
    next_key: u32,
}

struct NicState {
    crashed: bool,
    mrs: Vec<(MemoryKeys, Region)>,
    qps: BTreeMap<NodeId, Qp>,
    cq: VecDeque<WorkCompletion>,
    overrun: bool,
    unparker: Unparker,
}

#[derive(Default)]
struct Qp {
    qpn: u32,
    remote_qpn: Option<u32>,
    error: bool,
    held: VecDeque<(WorkRequest, Instant)>,
    recvs: VecDeque<(u64, Sge)>,
    inject_retry: bool,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn pair(a: NodeId, b: NodeId) -> (NodeId, NodeId) {
    (a.min(b), a.max(b))
}

impl MockFabric {
    /// A fabric whose NICs give up on an unreachable peer after `retry_timeout`, with completion
    /// queues of `cq_depth` entries.
    pub fn new(retry_timeout: Duration, cq_depth: usize) -> MockFabric {
        MockFabric {
            state: Arc::new(Mutex::new(State {
                retry_timeout,
                cq_depth,
                nics: BTreeMap::new(),
                partitions: BTreeSet::new(),
                next_qpn: 1,
                next_key: 1,
            })),
        }
    }

    /// The NIC of `node` (one per node).
    pub fn nic(&self, node: NodeId) -> MockNic {
        let parker = Parker::new();
        lock(&self.state).nics.insert(
            node,
            NicState {
                crashed: false,
                mrs: Vec::new(),
                qps: BTreeMap::new(),
                cq: VecDeque::new(),
                overrun: false,
                unparker: parker.unparker().clone(),
            },
        );
        MockNic {
            fabric: self.clone(),
            node,
            parker,
        }
    }

    /// `node` dies: nothing reaches it or leaves it any more.
    pub fn crash(&self, node: NodeId) {
        let mut s = lock(&self.state);
        if let Some(nic) = s.nics.get_mut(&node) {
            nic.crashed = true;
        }
        s.wake_all();
    }

    /// `a` and `b` can no longer reach each other; their work requests wait and time out.
    pub fn partition(&self, a: NodeId, b: NodeId) {
        lock(&self.state).partitions.insert(pair(a, b));
    }

    /// Undoes a partition; held work requests go through in order.
    pub fn heal(&self, a: NodeId, b: NodeId) {
        let mut s = lock(&self.state);
        s.partitions.remove(&pair(a, b));
        s.progress();
    }

    /// Moves `node`'s queue pair to `peer` into the error state, as a NIC fault would.
    pub fn inject_qp_error(&self, node: NodeId, peer: NodeId) {
        lock(&self.state).qp_to_error(node, peer);
    }

    /// The next work request `node` posts to `peer` fails with `RetryExceeded`.
    pub fn inject_retry_exceeded(&self, node: NodeId, peer: NodeId) {
        if let Some(qp) = lock(&self.state)
            .nics
            .get_mut(&node)
            .and_then(|n| n.qps.get_mut(&peer))
        {
            qp.inject_retry = true;
        }
    }

    /// `node`'s completion queue overflows.
    pub fn inject_cq_overrun(&self, node: NodeId) {
        let mut s = lock(&self.state);
        if let Some(nic) = s.nics.get_mut(&node) {
            nic.overrun = true;
            nic.unparker.unpark();
        }
    }
}

impl State {
    fn wake_all(&self) {
        self.nics.values().for_each(|n| n.unparker.unpark());
    }

    fn complete(&mut self, node: NodeId, wc: WorkCompletion) {
        let depth = self.cq_depth;
        if let Some(nic) = self.nics.get_mut(&node) {
            if nic.cq.len() >= depth {
                nic.overrun = true;
            } else {
                nic.cq.push_back(wc);
            }
            nic.unparker.unpark();
        }
    }

    fn qp_to_error(&mut self, node: NodeId, peer: NodeId) {
        let held: Vec<WorkRequest> =
            match self.nics.get_mut(&node).and_then(|n| n.qps.get_mut(&peer)) {
                Some(qp) => {
                    qp.error = true;
                    qp.held.drain(..).map(|(wr, _)| wr).collect()
                }
                None => return,
            };
        for wr in held {
            self.complete(node, failed(&wr, peer, WcStatus::Flushed));
        }
    }

    /// Whether `src` cannot reach `dst` right now (the work request must wait).
    fn unreachable(&self, src: NodeId, dst: NodeId) -> bool {
        let remote_qp_dead = self
            .nics
            .get(&dst)
            .is_none_or(|n| n.crashed || n.qps.get(&src).is_none_or(|qp| qp.error));
        remote_qp_dead || self.partitions.contains(&pair(src, dst))
    }

    fn region(
        &self,
        node: NodeId,
        addr: u64,
        len: u64,
        key: u32,
        remote: bool,
    ) -> Option<(Region, usize)> {
        let nic = self.nics.get(&node)?;
        nic.mrs.iter().find_map(|(k, r)| {
            let key_ok = if remote { k.rkey == key } else { k.lkey == key };
            let inside = addr >= k.addr && addr.checked_add(len)? <= k.addr + k.len;
            (key_ok && inside).then(|| (r.clone(), (addr - k.addr) as usize))
        })
    }

    /// Executes one work request; `None` means it must keep waiting (no receive buffer yet).
    fn execute(&mut self, src: NodeId, dst: NodeId, wr: &WorkRequest) -> Option<WcStatus> {
        let l = wr.local;
        let Some((local, loff)) = self.region(src, l.addr, u64::from(l.len), l.lkey, false) else {
            return Some(WcStatus::Other(4)); // local protection error
        };
        let remote =
            |s: &State, addr: u64, len: u64, rkey: u32| s.region(dst, addr, len, rkey, true);
        let status = match wr.op {
            WorkOp::Write { remote_addr, rkey } => {
                match remote(self, remote_addr, u64::from(l.len), rkey) {
                    Some((r, off)) => {
                        let _ = r.copy_from(off, &local, loff, l.len as usize);
                        WcStatus::Success
                    }
                    None => WcStatus::RemoteAccess,
                }
            }
            WorkOp::Read { remote_addr, rkey } => {
                match remote(self, remote_addr, u64::from(l.len), rkey) {
                    Some((r, off)) => {
                        let _ = local.copy_from(loff, &r, off, l.len as usize);
                        WcStatus::Success
                    }
                    None => WcStatus::RemoteAccess,
                }
            }
            WorkOp::CompareAndSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                match remote(self, remote_addr, 8, rkey)
                    .filter(|(_, off)| off % 8 == 0 && l.len == 8)
                {
                    Some((r, off)) => {
                        let old = match r.compare_and_swap(off / 8, compare, swap) {
                            Ok(v) | Err(v) => v,
                        };
                        let _ = local.write_bytes(loff, &old.to_le_bytes());
                        WcStatus::Success
                    }
                    None => WcStatus::RemoteAccess,
                }
            }
            WorkOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => {
                match remote(self, remote_addr, 8, rkey)
                    .filter(|(_, off)| off % 8 == 0 && l.len == 8)
                {
                    Some((r, off)) => {
                        let old = r.fetch_add(off / 8, add);
                        let _ = local.write_bytes(loff, &old.to_le_bytes());
                        WcStatus::Success
                    }
                    None => WcStatus::RemoteAccess,
                }
            }
            WorkOp::Send => {
                let recv = self
                    .nics
                    .get_mut(&dst)?
                    .qps
                    .get_mut(&src)?
                    .recvs
                    .pop_front()?;
                let (id, buf) = recv;
                if buf.len < l.len {
                    WcStatus::Other(1) // local length error at the receiver: the sender sees it too
                } else {
                    let (target, toff) =
                        self.region(dst, buf.addr, u64::from(l.len), buf.lkey, false)?;
                    let _ = target.copy_from(toff, &local, loff, l.len as usize);
                    let wc = WorkCompletion {
                        wr_id: id,
                        peer: src,
                        status: WcStatus::Success,
                        is_recv: true,
                        byte_len: l.len,
                    };
                    self.complete(dst, wc);
                    WcStatus::Success
                }
            }
        };
        if let Some(nic) = self.nics.get(&dst) {
            nic.unparker.unpark();
        }
        Some(status)
    }

    /// Runs held work requests that can go now, and times out those that waited too long.
    fn progress(&mut self) {
        let now = Instant::now();
        let links: Vec<(NodeId, NodeId)> = self
            .nics
            .iter()
            .flat_map(|(&n, nic)| {
                nic.qps
                    .iter()
                    .filter(|(_, qp)| !qp.held.is_empty())
                    .map(move |(&p, _)| (n, p))
            })
            .collect();
        for (src, dst) in links {
            while let Some(&(wr, since)) = self.head(src, dst) {
                if self.unreachable(src, dst) {
                    if now.duration_since(since) < self.retry_timeout {
                        break;
                    }
                    self.pop_held(src, dst);
                    self.complete(src, failed(&wr, dst, WcStatus::RetryExceeded));
                    self.qp_to_error(src, dst);
                    break;
                }
                // `None`: the receiver has no buffer posted; retried forever, as with
                // rnr_retry = 7.
                let Some(status) = self.execute(src, dst, &wr) else {
                    break;
                };
                self.pop_held(src, dst);
                self.finish(src, dst, &wr, status);
            }
        }
    }

    fn head(&self, src: NodeId, dst: NodeId) -> Option<&(WorkRequest, Instant)> {
        self.nics.get(&src)?.qps.get(&dst)?.held.front()
    }

    fn pop_held(&mut self, src: NodeId, dst: NodeId) {
        if let Some(qp) = self.nics.get_mut(&src).and_then(|n| n.qps.get_mut(&dst)) {
            qp.held.pop_front();
        }
    }

    fn finish(&mut self, src: NodeId, dst: NodeId, wr: &WorkRequest, status: WcStatus) {
        if status != WcStatus::Success {
            self.complete(src, failed(wr, dst, status));
            self.qp_to_error(src, dst);
        } else if wr.signaled {
            self.complete(
                src,
                WorkCompletion {
                    wr_id: wr.wr_id,
                    peer: dst,
                    status,
                    is_recv: false,
                    byte_len: 0,
                },
            );
        }
    }

    fn has_held(&self) -> bool {
        self.nics
            .values()
            .any(|n| n.qps.values().any(|q| !q.held.is_empty()))
    }
}

fn failed(wr: &WorkRequest, peer: NodeId, status: WcStatus) -> WorkCompletion {
    WorkCompletion {
        wr_id: wr.wr_id,
        peer,
        status,
        is_recv: false,
        byte_len: 0,
    }
}

/// One node's mock NIC.
pub struct MockNic {
    fabric: MockFabric,
    node: NodeId,
    parker: Parker,
}

impl std::fmt::Debug for MockNic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockNic")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl MockNic {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.fabric.state)
    }

    fn verbs_error(call: &'static str, detail: &str) -> ProviderError {
        ProviderError::Verbs {
            call,
            detail: detail.into(),
        }
    }
}

impl Provider for MockNic {
    fn register(&mut self, region: &Region) -> Result<MemoryKeys, ProviderError> {
        let mut s = self.state();
        let key = s.next_key;
        s.next_key += 1;
        let keys = MemoryKeys {
            addr: region.as_ptr() as u64,
            len: region.len() as u64,
            lkey: key,
            rkey: key | 0x8000_0000,
        };
        let nic = s
            .nics
            .get_mut(&self.node)
            .ok_or_else(|| Self::verbs_error("ibv_reg_mr", "no such NIC"))?;
        nic.mrs.push((keys, region.clone()));
        Ok(keys)
    }

    fn create_qp(&mut self, peer: NodeId) -> Result<QpEndpoint, ProviderError> {
        let mut s = self.state();
        let qpn = s.next_qpn;
        s.next_qpn += 1;
        let nic = s
            .nics
            .get_mut(&self.node)
            .ok_or_else(|| Self::verbs_error("ibv_create_qp", "no such NIC"))?;
        nic.qps.insert(
            peer,
            Qp {
                qpn,
                ..Qp::default()
            },
        );
        let mut gid = [0u8; 16];
        gid[..4].copy_from_slice(&self.node.0.to_be_bytes());
        Ok(QpEndpoint {
            qp_number: qpn,
            psn: qpn & 0xff_ffff,
            lid: 0,
            gid,
        })
    }

    fn connect_qp(&mut self, peer: NodeId, remote: &QpEndpoint) -> Result<(), ProviderError> {
        let mut s = self.state();
        let me = self.node;
        let actual = s
            .nics
            .get(&peer)
            .and_then(|n| n.qps.get(&me))
            .map(|qp| qp.qpn);
        if actual != Some(remote.qp_number) {
            return Err(Self::verbs_error(
                "ibv_modify_qp",
                &format!(
                    "{peer} has no queue pair {} for {me} (it has {actual:?})",
                    remote.qp_number
                ),
            ));
        }
        let qp = s
            .nics
            .get_mut(&me)
            .and_then(|n| n.qps.get_mut(&peer))
            .ok_or_else(|| Self::verbs_error("ibv_modify_qp", "connect before create"))?;
        qp.remote_qpn = Some(remote.qp_number);
        Ok(())
    }

    fn post_send(&mut self, peer: NodeId, wr: &WorkRequest) -> Result<(), ProviderError> {
        let mut s = self.state();
        let me = self.node;
        let qp = s
            .nics
            .get_mut(&me)
            .and_then(|n| n.qps.get_mut(&peer))
            .ok_or_else(|| Self::verbs_error("ibv_post_send", "no queue pair for that peer"))?;
        if qp.remote_qpn.is_none() {
            return Err(Self::verbs_error(
                "ibv_post_send",
                "queue pair not connected",
            ));
        }
        if qp.error {
            s.complete(me, failed(wr, peer, WcStatus::Flushed));
            return Ok(());
        }
        if std::mem::take(&mut qp.inject_retry) {
            s.complete(me, failed(wr, peer, WcStatus::RetryExceeded));
            s.qp_to_error(me, peer);
            return Ok(());
        }
        let must_wait = !qp.held.is_empty();
        if must_wait || s.unreachable(me, peer) {
            if let Some(qp) = s.nics.get_mut(&me).and_then(|n| n.qps.get_mut(&peer)) {
                qp.held.push_back((*wr, Instant::now()));
            }
            return Ok(());
        }
        match s.execute(me, peer, wr) {
            Some(status) => s.finish(me, peer, wr, status),
            None => {
                if let Some(qp) = s.nics.get_mut(&me).and_then(|n| n.qps.get_mut(&peer)) {
                    qp.held.push_back((*wr, Instant::now()));
                }
            }
        }
        Ok(())
    }

    fn post_recv(&mut self, peer: NodeId, wr_id: u64, buf: Sge) -> Result<(), ProviderError> {
        let mut s = self.state();
        let qp = s
            .nics
            .get_mut(&self.node)
            .and_then(|n| n.qps.get_mut(&peer))
            .ok_or_else(|| Self::verbs_error("ibv_post_recv", "no queue pair for that peer"))?;
        qp.recvs.push_back((wr_id, buf));
        s.progress();
        Ok(())
    }

    fn poll(&mut self, out: &mut [WorkCompletion]) -> Result<usize, ProviderError> {
        let mut s = self.state();
        if s.has_held() {
            s.progress();
        }
        let nic = s
            .nics
            .get_mut(&self.node)
            .ok_or_else(|| Self::verbs_error("ibv_poll_cq", "no such NIC"))?;
        if nic.overrun {
            return Err(ProviderError::CqOverrun);
        }
        let n = out.len().min(nic.cq.len());
        for (slot, wc) in out.iter_mut().zip(nic.cq.drain(..n)) {
            *slot = wc;
        }
        Ok(n)
    }

    fn set_error(&mut self, peer: NodeId) {
        self.state().qp_to_error(self.node, peer);
    }

    fn waker(&self) -> Waker {
        let unparker = self.parker.unparker().clone();
        Waker::new(move || unparker.unpark())
    }

    fn wait(&mut self, timeout: Duration) {
        let timeout = {
            let mut s = self.state();
            s.progress();
            let nic = s.nics.get(&self.node);
            if nic.is_none_or(|n| !n.cq.is_empty() || n.overrun) {
                return;
            }
            if s.has_held() {
                timeout.min(s.retry_timeout / 4)
            } else {
                timeout
            }
        };
        self.parker.park_timeout(timeout);
    }
}
