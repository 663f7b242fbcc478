//! A simulated endpoint with a [`Tap`]: the test sees the one-sided ops its node posts and may
//! hold back or filter the events it polls, everything else forwarded to the [`SimNode`].

use std::time::Duration;

use squall_transport::{
    Event, LocalSlice, NodeId, OpId, PostError, Region, RegionId, RemoteAddr, Signal, Time,
    Transport, Waker,
};
use squall_transport_mem::sim::SimNode;

/// What a test endpoint adds to the simulator's. Every method defaults to adding nothing.
pub trait Tap {
    /// `inner`'s node posted a write, compare-and-swap or fetch-and-add to `peer` at `at`.
    fn posted(&mut self, _inner: &SimNode, _peer: NodeId, _at: RemoteAddr) {}
    /// The simulator took that op (after [`posted`](Tap::posted)) and numbered it `op`: the
    /// number its trace entry carries (`squall_transport_mem::sim::TraceEntry::op`).
    fn accepted(&mut self, _inner: &SimNode, _peer: NodeId, _at: RemoteAddr, _op: OpId) {}
    /// Polls events (by default `inner`'s, as they come).
    fn poll(&mut self, inner: &mut SimNode, out: &mut [Event]) -> usize {
        inner.poll(out)
    }
    /// Whether `peer` reads as absent (by default as `inner` says).
    fn is_absent(&self, inner: &SimNode, peer: NodeId) -> bool {
        inner.is_absent(peer)
    }
    /// The length of `peer`'s region `id` (by default as `inner` says).
    fn remote_region_len(&self, inner: &SimNode, peer: NodeId, id: RegionId) -> Option<usize> {
        inner.remote_region_len(peer, id)
    }
}

/// A simulated endpoint whose ops and events pass through `tap`.
pub struct Tapped<T> {
    pub inner: SimNode,
    pub tap: T,
}

impl<T: Tap> Transport for Tapped<T> {
    fn local_id(&self) -> NodeId {
        self.inner.local_id()
    }
    fn peers(&self) -> &[NodeId] {
        self.inner.peers()
    }
    fn region(&self, id: RegionId) -> Option<&Region> {
        self.inner.region(id)
    }
    fn remote_region_len(&self, peer: NodeId, id: RegionId) -> Option<usize> {
        self.tap.remote_region_len(&self.inner, peer, id)
    }
    fn max_message_len(&self) -> usize {
        self.inner.max_message_len()
    }
    fn now(&self) -> Time {
        self.inner.now()
    }
    fn write(
        &mut self,
        peer: NodeId,
        src: LocalSlice,
        dst: RemoteAddr,
        signal: Signal,
    ) -> Result<OpId, PostError> {
        self.tap.posted(&self.inner, peer, dst);
        let op = self.inner.write(peer, src, dst, signal)?;
        self.tap.accepted(&self.inner, peer, dst, op);
        Ok(op)
    }
    fn read(&mut self, peer: NodeId, src: RemoteAddr, dst: LocalSlice) -> Result<OpId, PostError> {
        self.inner.read(peer, src, dst)
    }
    fn compare_and_swap(
        &mut self,
        peer: NodeId,
        word: RemoteAddr,
        expected: u64,
        new: u64,
    ) -> Result<OpId, PostError> {
        self.tap.posted(&self.inner, peer, word);
        let op = self.inner.compare_and_swap(peer, word, expected, new)?;
        self.tap.accepted(&self.inner, peer, word, op);
        Ok(op)
    }
    fn fetch_add(&mut self, peer: NodeId, word: RemoteAddr, delta: u64) -> Result<OpId, PostError> {
        self.tap.posted(&self.inner, peer, word);
        let op = self.inner.fetch_add(peer, word, delta)?;
        self.tap.accepted(&self.inner, peer, word, op);
        Ok(op)
    }
    fn send(&mut self, peer: NodeId, data: &[u8], signal: Signal) -> Result<OpId, PostError> {
        self.inner.send(peer, data, signal)
    }
    fn fence(&mut self, peer: NodeId) -> Result<OpId, PostError> {
        self.inner.fence(peer)
    }
    fn poll(&mut self, out: &mut [Event]) -> usize {
        self.tap.poll(&mut self.inner, out)
    }
    fn recv(&mut self, buf: &mut Vec<u8>) -> Option<NodeId> {
        self.inner.recv(buf)
    }
    fn is_absent(&self, peer: NodeId) -> bool {
        self.tap.is_absent(&self.inner, peer)
    }
    fn report_failed(&mut self, peer: NodeId) {
        self.inner.report_failed(peer);
    }
    fn wait(&mut self, timeout: Duration) {
        self.inner.wait(timeout);
    }
    fn waker(&self) -> Waker {
        self.inner.waker()
    }
}
