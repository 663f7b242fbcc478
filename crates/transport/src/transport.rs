//! The transport trait: what a verbs-shaped fabric offers one node.

use std::time::Duration;

use crate::error::PostError;
use crate::ids::{NodeId, OpId, RegionId};
use crate::op::{Event, LocalSlice, RemoteAddr, Signal};
use crate::region::Region;
use crate::time::Time;
use crate::waker::Waker;

/// One node's endpoint on a fabric: its registered regions and a reliable link to each peer.
///
/// The shape is that of RDMA reliable-connected queue pairs. Every op is *posted*: the call
/// validates it and returns at once, and the outcome arrives later through [`poll`](Self::poll).
/// Implementations guarantee, and the conformance suite checks:
///
/// - ops on one link are applied at the peer in the order they were posted (FIFO), sends included;
/// - aligned 8-byte words are never torn, and nothing larger is atomic;
/// - atomics are linearizable per word, together with the owner's local atomics on that word;
/// - a completed read returns the bytes as they were when it was applied;
/// - a fence, or a signaled op, completes only after every earlier op on its link was applied;
/// - a failed peer is reported once ([`Event::PeerFailed`]), and every pending and later op to it
///   completes with an error; from then on nothing it sends is applied to local regions;
/// - nothing waits forever: every posted op completes or fails within the configured timeout;
/// - an op that is out of bounds, misaligned or names an unknown region or peer is refused with a
///   [`PostError`] and never applied.
///
/// **Late links.** A node of the configured cluster may start after the others (a joiner). Until
/// its link is first established such a peer is *absent*: it is listed in
/// [`peers`](Self::peers), [`is_absent`](Self::is_absent) says so, and every op posted to it is
/// refused at once with [`PostError::NotConnected`] — not a failure, never a
/// [`Event::PeerFailed`], and nothing times out: an absent node is just not there yet. When the
/// link comes up the endpoint reports [`Event::PeerConnected`] once, with the peer's
/// incarnation; from the moment that event is polled the peer is connected and the contract
/// above holds for it. A peer declared failed ([`report_failed`](Self::report_failed)) while
/// absent is reported failed once, and the process of it that may have been running then never
/// connects. A fabric that can tell a later process of the peer from that one links the later
/// one as a new incarnation (see *Incarnations*: [`Event::PeerConnected`] with its incarnation,
/// after the one `PeerFailed`): the simulator's restart of a node, and TCP for a process
/// started after the report (incarnations are start times; the TCP config bounds the clock
/// skew it allows for). This is the verbs shape of a queue pair that
/// reaches the ready-to-send state after the others: posting to a QP that is not connected
/// fails at post time.
///
/// **Incarnations.** A peer's process may crash and start again under the same id (a
/// *restart*); each start is a new *incarnation* with a larger number. The endpoint fails the
/// old incarnation as usual ([`Event::PeerFailed`], once, every op queued to it completing with
/// an error; nothing of it is ever applied on the new link) and, when the new incarnation has
/// linked, reports [`Event::PeerConnected`] with its incarnation. The new link goes live when
/// that event is polled: until then ops to the peer go to the failed old link and fail. So the
/// incarnation a caller talks to is always the one of the last `PeerConnected` of that peer it
/// polled (or the initial link), and [`report_failed`](Self::report_failed) names exactly that
/// incarnation: a report about an older incarnation never cuts a newer one's link. A fabric
/// refuses an incarnation not larger than one it already linked. Several cores sharing one
/// endpoint through a [`Mux`](crate::mux::Mux) keep the rule per core: the mux drops a report
/// from a core that has not yet polled the newest `PeerConnected` of that peer.
///
/// Protocol cores are written against this trait and never sleep or spawn; a driver calls
/// [`wait`](Self::wait) when a core has nothing to do.
///
/// ```
/// use squall_transport::{Event, LocalSlice, RegionId, RegionSpec, RemoteAddr, Signal, Transport};
/// # fn demo<T: Transport>(a: &mut T) -> Result<(), squall_transport::PostError> {
/// let peer = a.peers()[0];
/// let r = RegionId(0);
/// a.region(r).unwrap().store(0, 42);
/// a.write(peer, LocalSlice::new(r, 0, 8), RemoteAddr::new(r, 0), Signal::Unsignaled)?;
/// let fence = a.fence(peer)?;
/// let mut events = [Event::PeerFailed { peer, cause: squall_transport::FailureCause::Local }; 8];
/// loop {
///     let n = a.poll(&mut events);
///     if events[..n].iter().any(|e| matches!(e, Event::Completion(c) if c.op == fence)) {
///         break; // the write has landed at the peer
///     }
///     a.wait(std::time::Duration::from_millis(1));
/// }
/// # Ok(()) }
/// ```
pub trait Transport {
    /// This node.
    fn local_id(&self) -> NodeId;

    /// The peers this node has links to, in ascending order (never this node itself).
    fn peers(&self) -> &[NodeId];

    /// A region registered on this node.
    fn region(&self, id: RegionId) -> Option<&Region>;

    /// The length of a region a peer registered, as learned at connect time.
    fn remote_region_len(&self, peer: NodeId, id: RegionId) -> Option<usize>;

    /// The largest two-sided message this transport accepts.
    fn max_message_len(&self) -> usize;

    /// Now, on this transport's clock (virtual in the simulator).
    fn now(&self) -> Time;

    /// Posts a one-sided write of `src` (local) to `dst` on `peer`.
    ///
    /// The source bytes are read at some point before the op is applied; every aligned word is
    /// read whole, but a caller that changes the source before a later fence completes may send
    /// either the old or the new value of each word.
    fn write(
        &mut self,
        peer: NodeId,
        src: LocalSlice,
        dst: RemoteAddr,
        signal: Signal,
    ) -> Result<OpId, PostError>;

    /// Posts a one-sided read of `dst.len` bytes at `src` on `peer` into the local range `dst`.
    /// Always signaled: the bytes are in `dst` when the completion is polled.
    fn read(&mut self, peer: NodeId, src: RemoteAddr, dst: LocalSlice) -> Result<OpId, PostError>;

    /// Posts a compare-and-swap of the aligned word at `word` on `peer`. Completes with the old
    /// value: the swap happened iff it equals `expected`.
    fn compare_and_swap(
        &mut self,
        peer: NodeId,
        word: RemoteAddr,
        expected: u64,
        new: u64,
    ) -> Result<OpId, PostError>;

    /// Posts a wrapping fetch-and-add to the aligned word at `word` on `peer`. Completes with the
    /// old value.
    fn fetch_add(&mut self, peer: NodeId, word: RemoteAddr, delta: u64) -> Result<OpId, PostError>;

    /// Posts a two-sided message; the peer receives it with [`recv`](Self::recv) once every
    /// earlier op on the link has been applied.
    fn send(&mut self, peer: NodeId, data: &[u8], signal: Signal) -> Result<OpId, PostError>;

    /// Posts a fence: it completes once every earlier op on the link has been applied at the peer.
    fn fence(&mut self, peer: NodeId) -> Result<OpId, PostError>;

    /// Moves up to `out.len()` pending events into `out` and returns how many. Never blocks and
    /// never allocates.
    fn poll(&mut self, out: &mut [Event]) -> usize;

    /// Takes the next received message into `buf` (replacing its contents) and returns its
    /// sender, or `None` if no message is waiting.
    fn recv(&mut self, buf: &mut Vec<u8>) -> Option<NodeId>;

    /// Whether `peer` is *absent*: a configured peer whose link has not been established yet
    /// (ops to it are refused with [`PostError::NotConnected`]). False for unknown peers, for
    /// peers linked from the start, and from the moment [`Event::PeerConnected`] for `peer` was
    /// polled. A peer that is failed while absent stays absent (and failed) until a later
    /// incarnation of it connects (see *Late links*).
    fn is_absent(&self, peer: NodeId) -> bool;

    /// Declares `peer` failed: from now on nothing it sends is applied here, ops to it fail, and
    /// the peer's own ops to this node fail too. Reported through [`poll`](Self::poll) like any
    /// other failure (once). Does nothing if the peer is already failed or unknown. An absent
    /// peer declared failed is reported failed (once) and its process then running never
    /// connects; a later incarnation may (see *Late links*).
    ///
    /// The report is about the peer's incarnation whose link this caller last saw: the initial
    /// link, or the one of the last [`Event::PeerConnected`] for `peer` it polled (see
    /// *Incarnations* above). A newer incarnation whose `PeerConnected` is still unpolled is not
    /// affected: its link comes up when that event is polled.
    fn report_failed(&mut self, peer: NodeId);

    /// Parks the calling driver until something may have changed (an event, a message, a remote
    /// write into a local region) or `timeout` passes. May return early. In the simulator this
    /// advances the simulation instead of sleeping.
    fn wait(&mut self, timeout: Duration);

    /// A handle that wakes this endpoint's driver from another thread (see [`Waker`]): a wake
    /// makes a blocked [`wait`](Self::wait) return, or the next one return at once.
    fn waker(&self) -> Waker;
}
