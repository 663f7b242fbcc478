//! State transfer to joiners, point to point over the transport (Derecho TOCS 2019 §3.5).
//!
//! Every universe node registers one *transfer region* ([`TransferConfig::region`]). A joiner
//! that installed its first view stays **passive**: its epoch runs (it receives and
//! acknowledges messages, so the others are not held up) but its deliveries are buffered. It
//! asks one member for the state by writing a request word into that member's region; the
//! member's application hands the group a snapshot ([`Group::provide_state`]) taken at any
//! position at or after the view's first position; the member streams it in chunks into the
//! joiner's receive slots, each chunk `[guard][header][data]`: the data and header in one
//! write, then the guard word (view and chunk sequence) in a second write, so FIFO order per
//! link makes the guard land last. The joiner checks the header (length, offset, CRC-32 of the
//! data, a check word over the header) and acknowledges each chunk with a write into the
//! sender's region (a window of chunks is in flight). When the last chunk arrived the joiner
//! learns the snapshot's position and the view's first position, hands the application the
//! state ([`Group::take_state`]), then its buffered deliveries from the snapshot's position
//! on, and becomes active.
//!
//! Crashes: a sender stops sending once it wedges, so every chunk it wrote precedes its
//! acknowledgement of the next view on each FIFO link. A joiner still passive when the next
//! view is installed drops what it buffered and received and asks that view's member again
//! (the sender may have crashed; the new one restarts from its own snapshot). A joiner that
//! fails is removed by the membership core as usual; its sender drops the transfer.
//!
//! A state above the member's [`TransferConfig::max_state_bytes`] is refused for the view
//! (s23): the member sends each joiner that asks one header with the state's length and no
//! data, and the joiner stops with [`TransferError::TooLarge`] (its own bound is lower) or
//! [`TransferError::SenderRefused`] instead of waiting for good.
//!
//! [`Group::provide_state`]: crate::group::Group::provide_state
//! [`Group::take_state`]: crate::group::Group::take_state

use squall_round_robin::log::crc32;
use squall_transport::{Event, LocalSlice, NodeId, RegionId, RemoteAddr, Signal, Transport};
use thiserror::Error;

/// Bytes of a chunk header.
pub const HEADER_BYTES: usize = 64;
/// Bytes of a receive (or staging) slot before its data: the guard word and the header.
const SLOT_HEAD: usize = 8 + HEADER_BYTES;
/// The largest chunk size accepted by [`TransferConfig::validate`].
pub const MAX_CHUNK_SIZE: usize = 4 << 20;
/// The largest window accepted by [`TransferConfig::validate`].
pub const MAX_WINDOW: usize = 256;

/// State transfer settings; every bound is validated by [`validate`](TransferConfig::validate).
///
/// ```
/// use squall_membership::transfer::TransferConfig;
/// use squall_transport::RegionId;
/// let mut cfg = TransferConfig::new(RegionId(5));
/// assert!(cfg.validate().is_ok());
/// cfg.chunk_size = 100; // not a multiple of 8
/// assert!(cfg.validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransferConfig {
    /// The transfer region every universe node registers.
    pub region: RegionId,
    /// Bytes of state per chunk (a multiple of 8, at most [`MAX_CHUNK_SIZE`]).
    pub chunk_size: usize,
    /// Chunks a sender may have in flight to one joiner (1..=[`MAX_WINDOW`]).
    pub window: usize,
    /// Joiners one member serves at the same time (at least 1); others wait their turn.
    pub parallel: usize,
    /// The largest state accepted, in bytes: a sender refuses a bigger snapshot and a joiner
    /// a header announcing one.
    pub max_state_bytes: usize,
    /// Deliveries a passive joiner buffers while its transfer runs; beyond that it stops with
    /// [`TransferError::BufferFull`] (raise it, or send smaller states).
    pub max_buffered: usize,
}

impl TransferConfig {
    /// Defaults on `region`: 64 KiB chunks, a window of 16 (1 MiB in flight per joiner), 2
    /// joiners served at once, states up to 1 GiB, 1 Mi buffered deliveries. The region is then
    /// about 3 MiB per node. Over TCP between processes (loopback, loaded 2-core box) an 8 MiB
    /// state moved at 35 MB/s with these, 12 MB/s with the former 16 KiB x 8, measured in the
    /// same run (`tcp_failover_bench`): the transfer advances once per poll of both ends, so
    /// it is bounded by bytes per round trip, not by the link.
    pub fn new(region: RegionId) -> TransferConfig {
        TransferConfig {
            region,
            chunk_size: 64 << 10,
            window: 16,
            parallel: 2,
            max_state_bytes: 1 << 30,
            max_buffered: 1 << 20,
        }
    }

    /// Checks every setting, with a message that says what to change.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.chunk_size == 0 || self.chunk_size % 8 != 0 || self.chunk_size > MAX_CHUNK_SIZE {
            return Err("transfer chunk_size must be a positive multiple of 8, at most 4 MiB");
        }
        if self.window == 0 || self.window > MAX_WINDOW {
            return Err("transfer window must be between 1 and 256 chunks");
        }
        if self.parallel == 0 {
            return Err("transfer parallel must be at least 1");
        }
        if self.max_state_bytes == 0 {
            return Err("transfer max_state_bytes must be positive");
        }
        if (self.max_state_bytes as u64).div_ceil(self.chunk_size as u64) >= u64::from(u32::MAX) {
            return Err("transfer max_state_bytes / chunk_size must stay below 2^32 chunks");
        }
        if self.max_buffered == 0 {
            return Err("transfer max_buffered must be positive");
        }
        Ok(())
    }

    fn slot_len(&self) -> usize {
        SLOT_HEAD + self.chunk_size
    }

    /// Bytes of the transfer region for a universe of `universe` nodes.
    pub fn region_len(&self, universe: usize) -> usize {
        self.recv_base(universe) + self.window * self.slot_len() * (1 + self.parallel)
    }

    /// Control words: `ctl_in[u]` at `8u`, `active_in[u]` at `8(U + u)`, then this node's
    /// outgoing control and active words.
    fn out_ctl(universe: usize) -> usize {
        16 * universe
    }

    fn recv_base(&self, universe: usize) -> usize {
        16 * universe + 16
    }

    fn recv_slot(&self, universe: usize, seq: u64) -> usize {
        self.recv_base(universe) + (seq % self.window as u64) as usize * self.slot_len()
    }

    fn staging_slot(&self, universe: usize, set: usize, seq: u64) -> usize {
        self.recv_base(universe)
            + self.window * self.slot_len() * (1 + set)
            + (seq % self.window as u64) as usize * self.slot_len()
    }
}

/// What went wrong with a transfer.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum TransferError {
    /// A chunk header that cannot be right (a bug or corruption at the sender).
    #[error("malformed state-transfer chunk: {0}")]
    Malformed(&'static str),
    /// A chunk whose data does not match its checksum.
    #[error("state-transfer chunk at offset {offset} fails its CRC-32 check")]
    Checksum {
        /// Where the chunk starts in the state.
        offset: u64,
    },
    /// A state larger than [`TransferConfig::max_state_bytes`].
    #[error("state of {len} bytes exceeds max_state_bytes = {max}; raise it in TransferConfig")]
    TooLarge {
        /// Its length.
        len: u64,
        /// The bound.
        max: usize,
    },
    /// A passive joiner buffered [`TransferConfig::max_buffered`] deliveries and its transfer
    /// had not completed.
    #[error(
        "a joiner buffered {max} deliveries while waiting for its state transfer (max_buffered); raise it or send smaller states"
    )]
    BufferFull {
        /// The bound.
        max: usize,
    },
    /// `provide_state` with a position outside the current view.
    #[error(
        "a snapshot's position must lie between the view's first position {first} and the next position to deliver {next}; got {position}"
    )]
    Position {
        /// The position given.
        position: u64,
        /// The view's first position.
        first: u64,
        /// The next position the group delivers.
        next: u64,
    },
    /// `provide_state` on a member that is not active in a view.
    #[error("only an active member in a view can provide state")]
    NotActive,
    /// The member a joiner asked refused to send its state of `len` bytes: above that
    /// member's [`TransferConfig::max_state_bytes`] (it announces the length with no data; a
    /// joiner whose own bound is lower reports [`TransferError::TooLarge`] instead).
    #[error(
        "the member asked for the state refused to send it: {len} bytes is above its max_state_bytes; raise it in TransferConfig"
    )]
    SenderRefused {
        /// The state's length.
        len: u64,
    },
}

/// A decoded chunk header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHeader {
    /// The view the transfer belongs to.
    pub view: u64,
    /// Bytes of the whole state.
    pub total_len: u64,
    /// Where this chunk starts in the state.
    pub offset: u64,
    /// Bytes of data in this chunk.
    pub len: u64,
    /// The first position of the view (the joiner's epoch positions are relative to it).
    pub first_position: u64,
    /// The snapshot's position: it reflects every delivery before it.
    pub state_position: u64,
    /// CRC-32 of the chunk's data.
    pub crc: u32,
}

fn check_word(words: &[u64]) -> u64 {
    words.iter().fold(0x7a4e_5f3a_11d0_c0de_u64, |h, &w| {
        let mut z = (h ^ w).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

impl ChunkHeader {
    fn words(&self) -> [u64; 7] {
        [
            self.view,
            self.total_len,
            self.offset,
            self.len,
            self.first_position,
            self.state_position,
            u64::from(self.crc),
        ]
    }

    /// The header's bytes: seven little-endian words and a check word over them.
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let w = self.words();
        let mut out = [0u8; HEADER_BYTES];
        for (i, x) in w.iter().chain([check_word(&w)].iter()).enumerate() {
            out[8 * i..8 * i + 8].copy_from_slice(&x.to_le_bytes());
        }
        out
    }

    /// Decodes a header; never panics. Checks the check word and that the fields are
    /// consistent (`offset + len <= total_len`, the CRC fits 32 bits).
    ///
    /// ```
    /// use squall_membership::transfer::ChunkHeader;
    /// let h = ChunkHeader { view: 3, total_len: 10, offset: 0, len: 10, first_position: 7,
    ///                       state_position: 9, crc: 42 };
    /// assert_eq!(ChunkHeader::decode(&h.encode()), Ok(h));
    /// let mut bad = h.encode();
    /// bad[20] ^= 1;
    /// assert!(ChunkHeader::decode(&bad).is_err());
    /// assert!(ChunkHeader::decode(&[0u8; 5]).is_err());
    /// ```
    pub fn decode(bytes: &[u8]) -> Result<ChunkHeader, TransferError> {
        let b = bytes
            .get(..HEADER_BYTES)
            .ok_or(TransferError::Malformed("header shorter than 64 bytes"))?;
        let mut w = [0u64; 8];
        for (i, x) in w.iter_mut().enumerate() {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[8 * i..8 * i + 8]);
            *x = u64::from_le_bytes(a);
        }
        if check_word(&w[..7]) != w[7] {
            return Err(TransferError::Malformed("header check word does not match"));
        }
        let crc =
            u32::try_from(w[6]).map_err(|_| TransferError::Malformed("CRC wider than 32 bits"))?;
        let h = ChunkHeader {
            view: w[0],
            total_len: w[1],
            offset: w[2],
            len: w[3],
            first_position: w[4],
            state_position: w[5],
            crc,
        };
        if h.offset
            .checked_add(h.len)
            .is_none_or(|end| end > h.total_len)
        {
            return Err(TransferError::Malformed(
                "chunk extends past the state's length",
            ));
        }
        if h.state_position < h.first_position {
            return Err(TransferError::Malformed(
                "snapshot position before the view's first position",
            ));
        }
        Ok(h)
    }
}

/// Decodes one received chunk (`[header][data…]`, as it lies in a receive slot after the
/// guard) and checks it against the bounds: the header ([`ChunkHeader::decode`]), `len <=
/// chunk_size`, `total_len <= max_state`, the data's CRC. Never panics; the fuzz target
/// `fuzz/fuzz_targets/state_transfer.rs` feeds it arbitrary bytes.
///
/// ```
/// use squall_membership::transfer::{decode_chunk, encode_chunk};
/// let bytes = encode_chunk(1, 5, 0, 2, 7, b"hello");
/// let (h, data) = decode_chunk(&bytes, 64, 1024)?;
/// assert_eq!((h.total_len, h.state_position, data), (5, 7, &b"hello"[..]));
/// let mut bad = bytes.clone();
/// *bad.last_mut().unwrap() ^= 1;
/// assert!(decode_chunk(&bad, 64, 1024).is_err());
/// # Ok::<(), squall_membership::transfer::TransferError>(())
/// ```
pub fn decode_chunk(
    bytes: &[u8],
    chunk_size: usize,
    max_state: usize,
) -> Result<(ChunkHeader, &[u8]), TransferError> {
    let h = ChunkHeader::decode(bytes)?;
    if h.total_len > max_state as u64 {
        return Err(TransferError::TooLarge {
            len: h.total_len,
            max: max_state,
        });
    }
    if h.len > chunk_size as u64 {
        return Err(TransferError::Malformed("chunk longer than chunk_size"));
    }
    let data = bytes
        .get(HEADER_BYTES..)
        .and_then(|d| d.get(..h.len as usize))
        .ok_or(TransferError::Malformed(
            "chunk data shorter than its header says",
        ))?;
    if crc32(data) != h.crc {
        return Err(TransferError::Checksum { offset: h.offset });
    }
    Ok((h, data))
}

/// Encodes one chunk as [`decode_chunk`] reads it (header then data), for tests and fuzzing.
pub fn encode_chunk(
    view: u64,
    total_len: u64,
    offset: u64,
    first_position: u64,
    state_position: u64,
    data: &[u8],
) -> Vec<u8> {
    let h = ChunkHeader {
        view,
        total_len,
        offset,
        len: data.len() as u64,
        first_position,
        state_position,
        crc: crc32(data),
    };
    let mut out = h.encode().to_vec();
    out.extend_from_slice(data);
    out
}

/// The state a joiner received: the application's snapshot and the position it was taken at
/// (it reflects every delivery before `position`; deliveries from `position` on follow).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransferredState {
    /// The first position not reflected in `state`.
    pub position: u64,
    /// The application's snapshot bytes.
    pub state: Vec<u8>,
}

/// A completed transfer, as the group needs it.
#[derive(Debug)]
pub(crate) struct Completed {
    pub first_position: u64,
    pub state: TransferredState,
}

#[derive(Debug)]
struct Incoming {
    sender: NodeId,
    consumed: u64,
    data: Vec<u8>,
}

#[derive(Debug)]
struct Outgoing {
    peer: NodeId,
    set: usize,
    sent: u64,
}

#[derive(Debug)]
struct Snapshot {
    position: u64,
    /// The length announced to joiners: `bytes.len()`, or, for a state refused as too large
    /// (`bytes` empty), its length, so that each joiner that asks learns of the refusal.
    declared: u64,
    bytes: Vec<u8>,
}

fn tag(view: u64) -> u64 {
    (view + 1) << 32
}

/// The count of a joiner's request word that withdraws its request (never a chunk count: a
/// sender skips a word with a nonzero count as acknowledgements of a finished transfer).
const WITHDRAWN: u64 = 0xffff_ffff;

/// The transfer machinery of one node (sans-IO over its own transport handle).
pub(crate) struct Transfer<T: Transport> {
    t: T,
    cfg: TransferConfig,
    universe: Vec<NodeId>,
    /// Nodes active from the start (the initial members), less every one whose incarnation
    /// this node saw fail: a later incarnation of it holds no state until it announces it.
    initial: Vec<NodeId>,
    /// Peers reported failed (or whose ops failed) since the last [`failed_peers`](Self::failed_peers).
    failed: Vec<NodeId>,
    me_index: usize,
    /// The view the machinery runs in, and its first position when known (active members).
    view: Option<(u64, Vec<NodeId>)>,
    first_position: Option<u64>,
    incoming: Option<Incoming>,
    outgoing: Vec<Outgoing>,
    snapshot: Option<Snapshot>,
    wanted: bool,
    events: Vec<Event>,
    /// Transfers this node completed as sender.
    pub served: u64,
    /// Bytes of chunk data this node sent.
    pub bytes_sent: u64,
}

impl<T: Transport> std::fmt::Debug for Transfer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transfer")
            .field("view", &self.view)
            .field(
                "incoming",
                &self.incoming.as_ref().map(|i| (i.sender, i.consumed)),
            )
            .field("outgoing", &self.outgoing)
            .finish_non_exhaustive()
    }
}

impl<T: Transport> Transfer<T> {
    pub(crate) fn new(
        t: T,
        cfg: TransferConfig,
        universe: Vec<NodeId>,
        initial: Vec<NodeId>,
    ) -> Transfer<T> {
        let me = t.local_id();
        let me_index = universe.iter().position(|&u| u == me).unwrap_or(0);
        Transfer {
            t,
            cfg,
            universe,
            initial,
            failed: Vec::new(),
            me_index,
            view: None,
            first_position: None,
            incoming: None,
            outgoing: Vec::new(),
            snapshot: None,
            wanted: false,
            events: vec![
                Event::PeerFailed {
                    peer: NodeId(u32::MAX),
                    cause: squall_transport::FailureCause::Local,
                };
                32
            ],
            served: 0,
            bytes_sent: 0,
        }
    }

    fn u(&self) -> usize {
        self.universe.len()
    }

    fn load(&self, offset: usize) -> u64 {
        self.t
            .region(self.cfg.region)
            .map_or(0, |r| r.load(offset / 8))
    }

    fn store(&self, offset: usize, value: u64) {
        if let Some(r) = self.t.region(self.cfg.region) {
            r.store(offset / 8, value);
        }
    }

    fn write(&mut self, peer: NodeId, offset: usize, len: usize, dst: usize) -> bool {
        let region = self.cfg.region;
        self.t
            .write(
                peer,
                LocalSlice::new(region, offset, len),
                RemoteAddr::new(region, dst),
                Signal::Unsignaled,
            )
            .is_ok()
    }

    /// A new view: everything of the previous one is dropped. `first_position` is known to
    /// active members only.
    pub(crate) fn enter_view(&mut self, view: u64, members: Vec<NodeId>, first: Option<u64>) {
        self.view = Some((view, members));
        self.first_position = first;
        self.incoming = None;
        self.outgoing.clear();
        self.snapshot = None;
        self.wanted = false;
    }

    pub(crate) fn leave_views(&mut self) {
        self.view = None;
        self.incoming = None;
        self.outgoing.clear();
        self.snapshot = None;
        self.wanted = false;
    }

    /// Whether a joiner asked this member for state that was not provided yet.
    pub(crate) fn wanted(&self) -> bool {
        self.wanted && self.snapshot.is_none()
    }

    /// Keeps `bytes` (borrowed: copied; owned: moved) as this view's state at `position`.
    pub(crate) fn provide(
        &mut self,
        position: u64,
        next: u64,
        bytes: std::borrow::Cow<'_, [u8]>,
    ) -> Result<(), TransferError> {
        let first = self.first_position.ok_or(TransferError::NotActive)?;
        if self.view.is_none() {
            return Err(TransferError::NotActive);
        }
        if position < first || position > next {
            return Err(TransferError::Position {
                position,
                first,
                next,
            });
        }
        if bytes.len() > self.cfg.max_state_bytes {
            // Refused, and no retry in this view can succeed: each joiner that asks is sent
            // the length alone, and stops saying why instead of waiting.
            self.snapshot = Some(Snapshot {
                position,
                declared: bytes.len() as u64,
                bytes: Vec::new(),
            });
            return Err(TransferError::TooLarge {
                len: bytes.len() as u64,
                max: self.cfg.max_state_bytes,
            });
        }
        self.snapshot = Some(Snapshot {
            position,
            declared: bytes.len() as u64,
            bytes: bytes.into_owned(),
        });
        Ok(())
    }

    /// This joiner became active in its view, which started at `first`: it can serve
    /// transfers now; every universe node is told.
    pub(crate) fn activate(&mut self, first: u64) {
        self.first_position = Some(first);
        self.incoming = None;
        self.announce_active();
    }

    /// Tells every universe node that this node is active (it can serve transfers).
    fn announce_active(&mut self) {
        let at = Transfer::<T>::out_active(self.u());
        self.store(at, 1);
        for k in 0..self.u() {
            let peer = self.universe[k];
            if k != self.me_index {
                let dst = 8 * (self.u() + self.me_index);
                self.write(peer, at, 8, dst);
            }
        }
    }

    fn out_active(universe: usize) -> usize {
        TransferConfig::out_ctl(universe) + 8
    }

    fn known_active(&self, n: NodeId) -> bool {
        self.initial.contains(&n) || self.announced(n)
    }

    /// Whether `n` announced itself active (after its transfer, or a restart from its logs).
    fn announced(&self, n: NodeId) -> bool {
        (self.universe.iter().position(|&u| u == n))
            .is_some_and(|k| self.load(8 * (self.u() + k)) != 0)
    }

    /// Whether `peer` asked this node for the state in `view` and got none from it (its request
    /// word here is the view's tag, no chunk acknowledged, not withdrawn): a joiner of the view,
    /// waiting for a transfer itself. (A joiner serves nobody, so a joiner's request words are
    /// all of this kind.)
    fn asks_me(&self, peer: NodeId, view: u64) -> bool {
        self.index_of(peer)
            .is_some_and(|k| k != self.me_index && self.load(8 * k) == tag(view))
    }

    /// `n`'s index in the universe.
    fn index_of(&self, n: NodeId) -> Option<usize> {
        self.universe.iter().position(|&u| u == n)
    }

    /// The member this joiner asked for the state in its current view, while it waits for it.
    pub(crate) fn asking(&self) -> Option<NodeId> {
        self.incoming.as_ref().map(|i| i.sender)
    }

    /// Drains the handle's events: notes the peers reported failed or whose ops failed (for
    /// the next [`failed_peers`](Self::failed_peers)), and forgets the state-holder standing of
    /// every incarnation reported failed. The group calls it every round, so that a peer's
    /// failure is seen before a later incarnation of that peer can announce itself active.
    pub(crate) fn track_failures(&mut self) {
        loop {
            let n = self.t.poll(&mut self.events);
            for i in 0..n {
                match self.events[i] {
                    Event::PeerFailed { peer, .. } => {
                        self.forget_holder(peer);
                        self.note_failed(peer);
                    }
                    Event::Completion(c) if c.result.is_err() => self.note_failed(c.peer),
                    Event::Completion(_) | Event::PeerConnected { .. } => {}
                }
            }
            if n < self.events.len() {
                return;
            }
        }
    }

    fn note_failed(&mut self, peer: NodeId) {
        if !self.failed.contains(&peer) {
            self.failed.push(peer);
        }
    }

    /// `peer` restarted without its shard's state (its restart row says so): being an initial
    /// member does not make it a state holder; only its own announcement, after a transfer of
    /// its own, does.
    pub(crate) fn not_a_holder(&mut self, peer: NodeId) {
        if self.initial.contains(&peer) {
            tracing::debug!(me = %self.universe[self.me_index], %peer, "transfer: a member restarted without state holds none");
            self.initial.retain(|&n| n != peer);
        }
    }

    /// The incarnation of `peer` this node knew failed: what made it a state holder (being an
    /// initial member, or its announcement) was about that incarnation. A later incarnation
    /// (it restarted under its id) joins by state transfer like any joiner, so it must not be
    /// asked for state until it announces itself active again.
    fn forget_holder(&mut self, peer: NodeId) {
        let was_initial = self.initial.contains(&peer);
        self.initial.retain(|&n| n != peer);
        if let Some(k) = self.universe.iter().position(|&u| u == peer)
            && k != self.me_index
        {
            let at = 8 * (self.u() + k);
            if was_initial || self.load(at) != 0 {
                tracing::debug!(me = %self.universe[self.me_index], %peer, "transfer: a failed incarnation holds no state any more");
            }
            self.store(at, 0);
            // Its request word too: a later incarnation that restarted with state may serve
            // this node, and must not be taken for a joiner asking it (see `poll_joiner`).
            self.store(8 * k, 0);
        }
    }

    /// Drains the handle's events; returns the peers reported failed or whose ops failed since
    /// the last call.
    fn failed_peers(&mut self) -> Vec<NodeId> {
        self.track_failures();
        std::mem::take(&mut self.failed)
    }

    /// One round as a passive joiner: ask for the state, take what arrived, acknowledge.
    /// `suspected` says whom the membership core suspects. Returns the completed transfer.
    pub(crate) fn poll_joiner(
        &mut self,
        suspected: &dyn Fn(NodeId) -> bool,
    ) -> Result<Option<Completed>, TransferError> {
        let _ = self.failed_peers();
        let Some((view, members)) = self.view.clone() else {
            return Ok(None);
        };
        let u = self.u();
        let ctl = TransferConfig::out_ctl(u);
        // The requests crossed: the member asked asks this joiner in turn, so it is a joiner
        // too. The higher-indexed of the two withdraws its request and asks another; the lower
        // one keeps waiting, and is served once the other is active (s30, hundredth part of
        // `docs/MEMBERSHIP.md`). The withdrawal is safe: the lower one sends nothing while it
        // waits on this joiner, and it sends only after this joiner's chunks, which follow the
        // withdrawal on the same link.
        if let Some(inc) = &self.incoming
            && inc.consumed == 0
            && self.index_of(inc.sender) < Some(self.me_index)
            && self.asks_me(inc.sender, view)
        {
            let sender = inc.sender;
            let mine = 8 * self.me_index;
            self.store(mine, tag(view) | WITHDRAWN);
            self.write(sender, mine, 8, mine);
            tracing::debug!(me = %self.universe[self.me_index], %sender, view, "transfer: the member asked for the state asks this joiner too; asking another");
            self.incoming = None;
        }
        if self.incoming.is_none() {
            let me = self.universe[self.me_index];
            // A member that announced itself active first: an initial member is a holder only
            // by default, and after a total restart it may be a member that joins again by
            // transfer itself, asking this one (s28, seventy-ninth part of
            // `docs/MEMBERSHIP.md`: two such joiners asked each other for good).
            // Never one that asked this joiner for the state in this view: it is a joiner
            // itself, with no state to send (s30, hundredth part: two members that joined again
            // after a total restart asked each other when the restarted holder's announcement
            // had not landed yet; a request waiting at a joiner is served once it is active).
            let candidates = || {
                (members.iter().copied())
                    .filter(|&m| m != me && !suspected(m) && !self.asks_me(m, view))
            };
            let Some(sender) = candidates()
                .find(|&m| self.announced(m))
                .or_else(|| candidates().find(|&m| self.known_active(m)))
            else {
                return Ok(None);
            };
            tracing::debug!(me = %me, %sender, view, "transfer: asking for the state");
            self.store(ctl, tag(view));
            self.write(sender, ctl, 8, 8 * self.me_index);
            self.incoming = Some(Incoming {
                sender,
                consumed: 0,
                data: Vec::new(),
            });
        }
        let mut acked = false;
        let mut done = None;
        while let Some(inc) = &self.incoming {
            let seq = inc.consumed;
            let slot = self.cfg.recv_slot(u, seq);
            if self.load(slot) != tag(view) | (seq + 1) {
                break;
            }
            let region = self
                .t
                .region(self.cfg.region)
                .ok_or(TransferError::Malformed("transfer region missing"))?;
            let mut bytes = vec![0u8; HEADER_BYTES + self.cfg.chunk_size];
            region
                .read_bytes(slot + 8, &mut bytes)
                .map_err(|_| TransferError::Malformed("receive slot out of range"))?;
            let (h, data) = decode_chunk(&bytes, self.cfg.chunk_size, self.cfg.max_state_bytes)?;
            let Some(inc) = &mut self.incoming else { break };
            if h.view != view {
                return Err(TransferError::Malformed("chunk of another view"));
            }
            if h.offset != inc.data.len() as u64 {
                return Err(TransferError::Malformed("chunk out of order"));
            }
            if h.len == 0 && h.total_len != 0 {
                return Err(TransferError::SenderRefused { len: h.total_len });
            }
            inc.data.extend_from_slice(data);
            inc.consumed += 1;
            acked = true;
            if inc.data.len() as u64 == h.total_len {
                done = Some(Completed {
                    first_position: h.first_position,
                    state: TransferredState {
                        position: h.state_position,
                        state: std::mem::take(&mut inc.data),
                    },
                });
                break;
            }
        }
        if acked && let Some(inc) = &self.incoming {
            let (sender, consumed) = (inc.sender, inc.consumed);
            self.store(ctl, tag(view) | consumed);
            self.write(sender, ctl, 8, 8 * self.me_index);
        }
        if done.is_some() {
            self.incoming = None;
        }
        Ok(done)
    }

    /// One round as an active member: serve the joiners that asked. Returns whether it did
    /// anything.
    pub(crate) fn poll_sender(&mut self) -> bool {
        let failed = self.failed_peers();
        self.outgoing.retain(|o| !failed.contains(&o.peer));
        let Some((view, members)) = self.view.clone() else {
            return false;
        };
        let u = self.u();
        let mut busy = false;
        // New requests.
        for (k, &peer) in self.universe.iter().enumerate() {
            if k == self.me_index || !members.contains(&peer) || failed.contains(&peer) {
                continue;
            }
            let w = self.load(8 * k);
            if w & !0xffff_ffff != tag(view) || self.outgoing.iter().any(|o| o.peer == peer) {
                continue;
            }
            if w & 0xffff_ffff != 0 {
                continue; // acks of a transfer this node already finished
            }
            if self.snapshot.is_none() {
                self.wanted = true;
                continue;
            }
            let Some(set) =
                (0..self.cfg.parallel).find(|s| self.outgoing.iter().all(|o| o.set != *s))
            else {
                continue;
            };
            tracing::debug!(me = %self.universe[self.me_index], joiner = %peer, view, "transfer: serving");
            self.outgoing.push(Outgoing { peer, set, sent: 0 });
        }
        let Some(snap) = self.snapshot.take() else {
            return busy;
        };
        let chunks = (snap.bytes.len() as u64)
            .div_ceil(self.cfg.chunk_size as u64)
            .max(1);
        let first = self.first_position.unwrap_or(0);
        let mut outgoing = std::mem::take(&mut self.outgoing);
        outgoing.retain_mut(|o| {
            let k = self.universe.iter().position(|&n| n == o.peer).unwrap_or(0);
            let w = self.load(8 * k);
            let acked = if w & !0xffff_ffff == tag(view) {
                w & 0xffff_ffff
            } else {
                0
            };
            if acked >= chunks {
                self.served += 1;
                tracing::debug!(joiner = %o.peer, view, "transfer: served");
                return false;
            }
            while o.sent < chunks && o.sent < acked + self.cfg.window as u64 {
                let seq = o.sent;
                let start = (seq as usize) * self.cfg.chunk_size;
                let end = (start + self.cfg.chunk_size).min(snap.bytes.len());
                let data = snap.bytes.get(start..end).unwrap_or(&[]);
                let bytes = encode_chunk(
                    view,
                    snap.declared,
                    start as u64,
                    first,
                    snap.position,
                    data,
                );
                let slot = self.cfg.staging_slot(u, o.set, seq);
                let Some(region) = self.t.region(self.cfg.region) else {
                    return false;
                };
                let mut padded = bytes;
                padded.resize(padded.len().next_multiple_of(8), 0);
                if region.write_bytes(slot + 8, &padded).is_err() {
                    return false;
                }
                region.store(slot / 8, tag(view) | (seq + 1));
                let dst = self.cfg.recv_slot(u, seq);
                if !self.write(o.peer, slot + 8, padded.len(), dst + 8)
                    || !self.write(o.peer, slot, 8, dst)
                {
                    return false;
                }
                self.bytes_sent += data.len() as u64;
                o.sent += 1;
                busy = true;
            }
            true
        });
        self.outgoing = outgoing;
        self.snapshot = Some(snap);
        busy
    }
}
