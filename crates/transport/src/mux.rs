//! Several protocol cores sharing one transport endpoint.
//!
//! A node often runs more than one sans-IO core over the same links — one consensus instance per
//! log slot, a failure detector beside a multicast. [`Mux::handle`] gives each core its own
//! [`Transport`] view: ops it posts go out on the shared endpoint, their completions come back to
//! it alone, and every [`Event::PeerFailed`] and [`Event::PeerConnected`] reaches every handle. Messages (`recv`) go to
//! whichever handle asks first, so at most one core per node should use two-sided messages.
//! Single-threaded by design (the handles share the endpoint through `Rc<RefCell<_>>`).
//!
//! ```
//! # fn demo<T: squall_transport::Transport>(endpoint: T) {
//! use squall_transport::{mux::Mux, Transport};
//! let mux = Mux::new(endpoint, &[squall_transport::RegionId(0)]);
//! let (mut a, mut b) = (mux.handle(), mux.handle());
//! assert_eq!(a.local_id(), b.local_id());
//! # }
//! ```

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use crate::error::{FailureCause, PostError};
use crate::ids::{NodeId, OpId, RegionId};
use crate::op::{Event, LocalSlice, RemoteAddr, Signal};
use crate::region::Region;
use crate::time::Time;
use crate::transport::Transport;

struct Shared<T> {
    endpoint: T,
    /// Which handle posted each op still in flight.
    owner: BTreeMap<OpId, usize>,
    /// One queue per live handle (`None` once the handle is dropped).
    queues: Vec<Option<VecDeque<Event>>>,
}

impl<T: Transport> Shared<T> {
    /// Pulls every pending event from the endpoint and routes it.
    fn pump(&mut self) {
        let mut buf = [Event::PeerFailed {
            peer: NodeId(u32::MAX),
            cause: FailureCause::Local,
        }; 64];
        loop {
            let n = self.endpoint.poll(&mut buf);
            for e in &buf[..n] {
                match e {
                    Event::Completion(c) => {
                        let owner = self.owner.remove(&c.op);
                        if let Some(q) = owner.and_then(|h| self.queues[h].as_mut()) {
                            q.push_back(*e);
                        }
                    }
                    Event::PeerFailed { .. } | Event::PeerConnected { .. } => self
                        .queues
                        .iter_mut()
                        .flatten()
                        .for_each(|q| q.push_back(*e)),
                }
            }
            if n < buf.len() {
                return;
            }
        }
    }

    fn track(&mut self, handle: usize, r: Result<OpId, PostError>) -> Result<OpId, PostError> {
        if let Ok(op) = r {
            self.owner.insert(op, handle);
        }
        r
    }
}

/// The shared endpoint. Create handles with [`Mux::handle`].
pub struct Mux<T> {
    shared: Rc<RefCell<Shared<T>>>,
    regions: Vec<Region>,
}

impl<T: Transport> Mux<T> {
    /// Wraps an endpoint; every handle exposes the endpoint's regions named in `regions` through
    /// [`Transport::region`] (the trait cannot enumerate them).
    pub fn new(endpoint: T, regions: &[RegionId]) -> Mux<T> {
        let regions = regions
            .iter()
            .filter_map(|id| endpoint.region(*id).cloned())
            .collect();
        Mux {
            shared: Rc::new(RefCell::new(Shared {
                endpoint,
                owner: BTreeMap::new(),
                queues: Vec::new(),
            })),
            regions,
        }
    }

    /// A new view of the endpoint for one core.
    pub fn handle(&self) -> MuxHandle<T> {
        let mut s = self.shared.borrow_mut();
        let index = match s.queues.iter().position(Option::is_none) {
            Some(free) => {
                s.queues[free] = Some(VecDeque::new());
                free
            }
            None => {
                s.queues.push(Some(VecDeque::new()));
                s.queues.len() - 1
            }
        };
        MuxHandle {
            index,
            me: s.endpoint.local_id(),
            peers: s.endpoint.peers().to_vec(),
            max_message_len: s.endpoint.max_message_len(),
            shared: Rc::clone(&self.shared),
            regions: self.regions.clone(),
        }
    }

    /// Runs `f` on the endpoint itself (for setup and tests).
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.shared.borrow_mut().endpoint)
    }
}

/// One core's view of a shared endpoint.
pub struct MuxHandle<T> {
    index: usize,
    me: NodeId,
    peers: Vec<NodeId>,
    max_message_len: usize,
    shared: Rc<RefCell<Shared<T>>>,
    regions: Vec<Region>,
}

impl<T> std::fmt::Debug for MuxHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MuxHandle")
            .field("me", &self.me)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl<T: Transport> MuxHandle<T> {
    fn post(
        &mut self,
        f: impl FnOnce(&mut T) -> Result<OpId, PostError>,
    ) -> Result<OpId, PostError> {
        let mut s = self.shared.borrow_mut();
        let r = f(&mut s.endpoint);
        s.track(self.index, r)
    }
}

impl<T: Transport> Transport for MuxHandle<T> {
    fn local_id(&self) -> NodeId {
        self.me
    }

    fn peers(&self) -> &[NodeId] {
        &self.peers
    }

    fn region(&self, id: RegionId) -> Option<&Region> {
        self.regions.iter().find(|r| r.id() == id)
    }

    fn remote_region_len(&self, peer: NodeId, id: RegionId) -> Option<usize> {
        self.shared.borrow().endpoint.remote_region_len(peer, id)
    }

    fn max_message_len(&self) -> usize {
        self.max_message_len
    }

    fn now(&self) -> Time {
        self.shared.borrow().endpoint.now()
    }

    fn write(
        &mut self,
        peer: NodeId,
        src: LocalSlice,
        dst: RemoteAddr,
        signal: Signal,
    ) -> Result<OpId, PostError> {
        self.post(|t| t.write(peer, src, dst, signal))
    }

    fn read(&mut self, peer: NodeId, src: RemoteAddr, dst: LocalSlice) -> Result<OpId, PostError> {
        self.post(|t| t.read(peer, src, dst))
    }

    fn compare_and_swap(
        &mut self,
        peer: NodeId,
        word: RemoteAddr,
        expected: u64,
        new: u64,
    ) -> Result<OpId, PostError> {
        self.post(|t| t.compare_and_swap(peer, word, expected, new))
    }

    fn fetch_add(&mut self, peer: NodeId, word: RemoteAddr, delta: u64) -> Result<OpId, PostError> {
        self.post(|t| t.fetch_add(peer, word, delta))
    }

    fn send(&mut self, peer: NodeId, data: &[u8], signal: Signal) -> Result<OpId, PostError> {
        self.post(|t| t.send(peer, data, signal))
    }

    fn fence(&mut self, peer: NodeId) -> Result<OpId, PostError> {
        self.post(|t| t.fence(peer))
    }

    fn poll(&mut self, out: &mut [Event]) -> usize {
        let mut s = self.shared.borrow_mut();
        s.pump();
        let Some(q) = s.queues[self.index].as_mut() else {
            return 0;
        };
        let n = out.len().min(q.len());
        for (slot, e) in out.iter_mut().zip(q.drain(..n)) {
            *slot = e;
        }
        n
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> Option<NodeId> {
        self.shared.borrow_mut().endpoint.recv(buf)
    }

    fn is_absent(&self, peer: NodeId) -> bool {
        self.shared.borrow().endpoint.is_absent(peer)
    }

    fn report_failed(&mut self, peer: NodeId) {
        self.shared.borrow_mut().endpoint.report_failed(peer);
    }

    fn waker(&self) -> crate::Waker {
        self.shared.borrow().endpoint.waker()
    }

    fn wait(&mut self, timeout: Duration) {
        let mut s = self.shared.borrow_mut();
        s.pump();
        if s.queues[self.index].as_ref().is_none_or(VecDeque::is_empty) {
            s.endpoint.wait(timeout);
        }
    }
}

impl<T> Drop for MuxHandle<T> {
    fn drop(&mut self) {
        // Frees the queue; completions of ops it still had in flight are dropped.
        if let Ok(mut s) = self.shared.try_borrow_mut() {
            s.queues[self.index] = None;
        }
    }
}
