//! Several protocol cores sharing one transport endpoint.
//!
//! A node often runs more than one sans-IO core over the same links — one consensus instance per
//! log slot, a failure detector beside a multicast. [`Mux::handle`] gives each core its own
//! [`Transport`] view: ops it posts go out on the shared endpoint, their completions come back to
//! it alone, and every [`Event::PeerFailed`] and [`Event::PeerConnected`] reaches every handle. Messages (`recv`) go to
//! whichever handle asks first, so at most one core per node should use two-sided messages.
//! Single-threaded by design (the handles share the endpoint through `Rc<RefCell<_>>`).
//!
//! **Stale failure reports.** [`Transport::report_failed`] names the incarnation whose link
//! the caller last saw (see the trait's *Incarnations*). Each handle sees the endpoint's
//! events later than the endpoint itself: when a peer restarts, the endpoint may already have
//! handed out `PeerConnected` for the new incarnation while a handle still works through the
//! old one's `PeerFailed`. A `report_failed(peer)` from a handle that has not yet polled the
//! newest `PeerConnected` of that peer is about an incarnation that is already failed, so the
//! mux drops it instead of cutting the new link.
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
    /// Per peer: how many [`Event::PeerConnected`] the endpoint has handed out (each is a new
    /// link, of a new incarnation).
    connected: BTreeMap<NodeId, u64>,
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
                    Event::PeerFailed { .. } | Event::PeerConnected { .. } => {
                        if let Event::PeerConnected { peer, .. } = e {
                            *self.connected.entry(*peer).or_default() += 1;
                        }
                        self.queues
                            .iter_mut()
                            .flatten()
                            .for_each(|q| q.push_back(*e));
                    }
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
                connected: BTreeMap::new(),
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
            // A new handle starts with nothing queued: it has seen every link so far.
            seen: s.connected.clone(),
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
    /// Per peer: how many [`Event::PeerConnected`] this handle has polled.
    seen: BTreeMap<NodeId, u64>,
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
            if let Event::PeerConnected { peer, .. } = e {
                *self.seen.entry(peer).or_default() += 1;
            }
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

    /// Reports `peer` failed, unless this handle has not yet polled the newest
    /// [`Event::PeerConnected`] of `peer` that the endpoint handed out: then the report is about
    /// an older incarnation, already failed, and is dropped (the newer link stays up).
    fn report_failed(&mut self, peer: NodeId) {
        let mut s = self.shared.borrow_mut();
        let links = s.connected.get(&peer).copied().unwrap_or(0);
        if self.seen.get(&peer).copied().unwrap_or(0) < links {
            return; // stale: about an incarnation before the newest link
        }
        s.endpoint.report_failed(peer);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An endpoint that hands out scripted events and records the failure reports it gets,
    /// cutting the newest link of the peer as a real fabric would.
    struct Scripted {
        peers: Vec<NodeId>,
        events: VecDeque<Event>,
        /// The failure reports that reached the endpoint.
        reports: Vec<NodeId>,
    }

    impl Transport for Scripted {
        fn local_id(&self) -> NodeId {
            NodeId(0)
        }
        fn peers(&self) -> &[NodeId] {
            &self.peers
        }
        fn region(&self, _: RegionId) -> Option<&Region> {
            None
        }
        fn remote_region_len(&self, _: NodeId, _: RegionId) -> Option<usize> {
            None
        }
        fn max_message_len(&self) -> usize {
            0
        }
        fn now(&self) -> Time {
            Time::ZERO
        }
        fn write(
            &mut self,
            _: NodeId,
            _: LocalSlice,
            _: RemoteAddr,
            _: Signal,
        ) -> Result<OpId, PostError> {
            Err(PostError::Closed)
        }
        fn read(&mut self, _: NodeId, _: RemoteAddr, _: LocalSlice) -> Result<OpId, PostError> {
            Err(PostError::Closed)
        }
        fn compare_and_swap(
            &mut self,
            _: NodeId,
            _: RemoteAddr,
            _: u64,
            _: u64,
        ) -> Result<OpId, PostError> {
            Err(PostError::Closed)
        }
        fn fetch_add(&mut self, _: NodeId, _: RemoteAddr, _: u64) -> Result<OpId, PostError> {
            Err(PostError::Closed)
        }
        fn send(&mut self, _: NodeId, _: &[u8], _: Signal) -> Result<OpId, PostError> {
            Err(PostError::Closed)
        }
        fn fence(&mut self, _: NodeId) -> Result<OpId, PostError> {
            Err(PostError::Closed)
        }
        fn poll(&mut self, out: &mut [Event]) -> usize {
            let n = out.len().min(self.events.len());
            for (slot, e) in out.iter_mut().zip(self.events.drain(..n)) {
                *slot = e;
            }
            n
        }
        fn recv(&mut self, _: &mut Vec<u8>) -> Option<NodeId> {
            None
        }
        fn is_absent(&self, _: NodeId) -> bool {
            false
        }
        fn report_failed(&mut self, peer: NodeId) {
            self.reports.push(peer);
        }
        fn wait(&mut self, _: Duration) {}
        fn waker(&self) -> crate::Waker {
            crate::Waker::noop()
        }
    }

    fn poll_one<T: Transport>(h: &mut T) -> Option<Event> {
        let mut ev = [Event::PeerConnected {
            peer: NodeId(0),
            incarnation: 0,
        }];
        (h.poll(&mut ev) == 1).then_some(ev[0])
    }

    /// A peer restarts: the endpoint hands out the old incarnation's failure and the new one's
    /// link. A core that reacts to the failure before it polled the new link must not cut it;
    /// once it polled the new link, its reports count again.
    #[test]
    fn a_report_from_a_handle_behind_the_newest_link_is_dropped() {
        let peer = NodeId(1);
        let endpoint = Scripted {
            peers: vec![peer],
            events: VecDeque::from([
                Event::PeerFailed {
                    peer,
                    cause: FailureCause::ConnectionLost,
                },
                Event::PeerConnected {
                    peer,
                    incarnation: 2,
                },
            ]),
            reports: Vec::new(),
        };
        let mux = Mux::new(endpoint, &[]);
        let (mut fast, mut slow) = (mux.handle(), mux.handle());
        // `fast` polls both events (the mux pumps the endpoint dry), `slow` only the failure.
        assert!(matches!(
            poll_one(&mut fast),
            Some(Event::PeerFailed { .. })
        ));
        assert!(matches!(
            poll_one(&mut fast),
            Some(Event::PeerConnected { .. })
        ));
        assert!(matches!(
            poll_one(&mut slow),
            Some(Event::PeerFailed { .. })
        ));
        // `slow` reacts to the old incarnation's failure: stale, dropped.
        slow.report_failed(peer);
        assert_eq!(mux.with(|e| e.reports.clone()), Vec::<NodeId>::new());
        // A handle created now has nothing to catch up on: its report counts.
        let mut late = mux.handle();
        assert_eq!(poll_one(&mut late), None);
        // Once `slow` polled the new link, its report is about the new incarnation.
        assert!(matches!(
            poll_one(&mut slow),
            Some(Event::PeerConnected { .. })
        ));
        slow.report_failed(peer);
        fast.report_failed(peer);
        late.report_failed(peer);
        assert_eq!(mux.with(|e| e.reports.clone()), vec![peer; 3]);
    }
}
