//! Where acceptor state lives in each node's registered memory.
//!
//! Every node is an acceptor and registers three regions:
//!
//! - [`SLOTS`]: one [`SlotWord`](crate::word::SlotWord) per ring position, the target of every
//!   CAS. Absolute slot `s` lives at position `s mod slots`; the word's lap tag says which use of
//!   the position it holds, and an acceptor resets a position for its next lap only once every
//!   live node has delivered the slot that used it;
//! - [`VALUES`]: value buffers indexed by `(writer, slot, origin)`. A proposer writes the value it
//!   is about to propose into *its own* buffers at every acceptor before its accept CAS (FIFO on
//!   the link means the value has landed whenever the CAS succeeds). The value of `origin` for a
//!   slot is unique — a proposer submits at most one command of its own per slot — so a buffer is
//!   written with at most one value, ever: an accepted value reference can never point at a
//!   buffer that was later overwritten with something else;
//! - [`DECISIONS`]: one word per slot, written by the decider after the value buffer, from which
//!   every node learns the decision locally.
//!
//! A buffer is `[absolute slot + 1: u64][len: u64][bytes, padded to 8]`, so a buffer of an older
//! lap is never read as the current one's.
//!
//! ```
//! use squall_cas_paxos::layout::Layout;
//! let l = Layout { proposers: 3, slots: 4, max_value_len: 100 };
//! assert_eq!(l.buffer_len(), 16 + 104);
//! assert!(l.buffer_offset(2, 3, 2) + l.buffer_len() <= l.values_len());
//! ```

use squall_transport::{RegionId, RegionSpec};

/// The slot words.
pub const SLOTS: RegionId = RegionId(0x5041_0000);
/// The value buffers.
pub const VALUES: RegionId = RegionId(0x5041_0001);
/// The decision words.
pub const DECISIONS: RegionId = RegionId(0x5041_0002);
/// Local staging for values this node writes to others (the source of its writes and the landing
/// place of its reads).
pub const STAGING: RegionId = RegionId(0x5041_0003);

/// The sizes that fix the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Number of proposers (every node may propose).
    pub proposers: usize,
    /// Ring positions: how many consecutive slots can be in use (undelivered somewhere) at once.
    /// Slots are reused modulo this.
    pub slots: usize,
    /// Largest value in bytes.
    pub max_value_len: usize,
}

impl Layout {
    /// One buffer's length.
    pub fn buffer_len(&self) -> usize {
        16 + self.max_value_len.div_ceil(8) * 8
    }

    /// Ring position of absolute slot `slot`.
    pub fn position(&self, slot: u64) -> usize {
        (slot % self.slots as u64) as usize
    }

    /// Offset of buffer `(writer, position, origin)` in [`VALUES`].
    pub fn buffer_offset(&self, writer: usize, slot: usize, origin: usize) -> usize {
        ((writer * self.slots + slot) * self.proposers + origin) * self.buffer_len()
    }

    /// Length of [`VALUES`].
    pub fn values_len(&self) -> usize {
        self.proposers * self.slots * self.proposers * self.buffer_len()
    }

    /// Offset of this node's staging buffer for `(slot, origin)` in [`STAGING`]; the last buffer
    /// is where reads of other proposers' buffers land.
    pub fn staging_offset(&self, slot: usize, origin: usize) -> usize {
        (slot * self.proposers + origin) * self.buffer_len()
    }

    /// The read landing buffer in [`STAGING`].
    pub fn landing_offset(&self) -> usize {
        self.slots * self.proposers * self.buffer_len()
    }

    /// The regions every node registers.
    pub fn regions(&self) -> Vec<RegionSpec> {
        vec![
            RegionSpec::new(SLOTS, self.slots * 8),
            RegionSpec::new(VALUES, self.values_len()),
            RegionSpec::new(DECISIONS, self.slots * 8),
            RegionSpec::new(STAGING, self.landing_offset() + self.buffer_len()),
        ]
    }
}
