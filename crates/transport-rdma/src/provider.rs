//! The small provider trait the RDMA transport is written against: what one node's NIC does.
//!
//! The transport's logic — work-request tracking, periodic signaling, atomic result slots,
//! receive buffers, mapping QP errors to peer failures — sits above this trait, so it is tested
//! against [`MockNic`](crate::mock::MockNic) in the default build and runs unchanged over real
//! verbs (`VerbsNic`, feature `verbs`).

use std::time::Duration;

use squall_transport::{NodeId, Region, Waker};
use thiserror::Error;

/// Where a registered region lives and the keys that grant access to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryKeys {
    /// Virtual address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Local key (for the NIC reading or writing it on this node's behalf).
    pub lkey: u32,
    /// Remote key (for peers' one-sided access).
    pub rkey: u32,
}

/// What a peer needs to connect its queue pair to one of ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QpEndpoint {
    /// Queue pair number.
    pub qp_number: u32,
    /// Initial packet sequence number.
    pub psn: u32,
    /// Local identifier (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// Global identifier (required on RoCE).
    pub gid: [u8; 16],
}

/// A scatter-gather entry: local registered memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge {
    /// Address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Local key of the region it lies in.
    pub lkey: u32,
}

/// The remote half of a one-sided work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkOp {
    /// RDMA WRITE of the local SGE to `remote_addr`.
    Write {
        /// Target address.
        remote_addr: u64,
        /// Target region's remote key.
        rkey: u32,
    },
    /// RDMA READ from `remote_addr` into the local SGE.
    Read {
        /// Source address.
        remote_addr: u64,
        /// Source region's remote key.
        rkey: u32,
    },
    /// 8-byte compare-and-swap; the old value lands in the local SGE.
    CompareAndSwap {
        /// Target word.
        remote_addr: u64,
        /// Target region's remote key.
        rkey: u32,
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// 8-byte fetch-and-add; the old value lands in the local SGE.
    FetchAdd {
        /// Target word.
        remote_addr: u64,
        /// Target region's remote key.
        rkey: u32,
        /// Addend.
        add: u64,
    },
    /// Two-sided SEND of the local SGE.
    Send,
}

/// A send-queue work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkRequest {
    /// Returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: WorkOp,
    /// The local memory involved.
    pub local: Sge,
    /// Generate a completion on success.
    pub signaled: bool,
    /// Wait for earlier reads and atomics on the QP before starting (IBV_SEND_FENCE).
    pub fence: bool,
}

/// Completion status, as the transport distinguishes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcStatus {
    /// The op succeeded.
    Success,
    /// The peer stopped answering: transport retries (or RNR retries) exhausted.
    RetryExceeded,
    /// The peer refused the access (bad key, bounds, or its QP is gone).
    RemoteAccess,
    /// Flushed because the QP is in the error state.
    Flushed,
    /// Any other error status, with the provider's code.
    Other(u32),
}

/// A completion from the node's completion queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The work request's id.
    pub wr_id: u64,
    /// The peer whose queue pair it came from.
    pub peer: NodeId,
    /// How it ended.
    pub status: WcStatus,
    /// A receive completion (rather than a send-queue one).
    pub is_recv: bool,
    /// Bytes received, for receive completions.
    pub byte_len: u32,
}

/// A provider failure.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ProviderError {
    /// No RDMA device, or the verbs library is missing. The message names what is missing.
    #[error("{0}")]
    NoDevice(String),
    /// The completion queue overflowed: completions were lost, so every queue pair on it is
    /// unusable. Size `cq_depth` to at least the sum of all send and receive queue depths.
    #[error(
        "completion queue overrun; raise cq_depth (it must cover every outstanding work request)"
    )]
    CqOverrun,
    /// A verbs call failed.
    #[error("{call} failed: {detail}")]
    Verbs {
        /// The call.
        call: &'static str,
        /// What the library said.
        detail: String,
    },
}

/// One node's NIC: registers memory, owns one RC queue pair per peer and one completion queue.
pub trait Provider: Send {
    /// Registers `region` for local and remote read, write and atomic access.
    fn register(&mut self, region: &Region) -> Result<MemoryKeys, ProviderError>;

    /// Creates (and moves to INIT) the queue pair for `peer`; returns what the peer needs.
    fn create_qp(&mut self, peer: NodeId) -> Result<QpEndpoint, ProviderError>;

    /// Connects the queue pair for `peer` to the peer's endpoint (INIT → RTR → RTS).
    fn connect_qp(&mut self, peer: NodeId, remote: &QpEndpoint) -> Result<(), ProviderError>;

    /// Posts a work request on `peer`'s queue pair.
    fn post_send(&mut self, peer: NodeId, wr: &WorkRequest) -> Result<(), ProviderError>;

    /// Posts a receive buffer on `peer`'s queue pair.
    fn post_recv(&mut self, peer: NodeId, wr_id: u64, buf: Sge) -> Result<(), ProviderError>;

    /// Moves up to `out.len()` completions into `out`.
    fn poll(&mut self, out: &mut [WorkCompletion]) -> Result<usize, ProviderError>;

    /// Moves `peer`'s queue pair to the error state: outstanding requests flush with errors and
    /// nothing more from the peer is applied to this node's memory.
    fn set_error(&mut self, peer: NodeId);

    /// Parks until a completion may be ready or `timeout` passes.
    fn wait(&mut self, timeout: Duration);

    /// A handle that makes a blocked [`wait`](Self::wait) return (or the next one return at
    /// once), from any thread.
    fn waker(&self) -> Waker;
}
