//! The acceptor's state for one slot, packed into one 8-byte word so that every acceptor step is
//! a single remote compare-and-swap (Velos §5.2).
//!
//! Layout (most significant first): `min_proposal` (24 bits), `accepted_proposal` (24 bits),
//! `writer` (8 bits), `origin` (8 bits). `writer`/`origin` name where the accepted value lives
//! (see [`crate::layout`]); both 0 means no value accepted. Proposal numbers are 1-based; 0 means
//! "none".
//!
//! ```
//! use squall_cas_paxos::word::{SlotWord, ValueRef};
//! let w = SlotWord { min_proposal: 7, accepted_proposal: 5, value: Some(ValueRef { writer: 2, origin: 0 }) };
//! assert_eq!(SlotWord::unpack(w.pack()), w);
//! assert_eq!(SlotWord::unpack(0), SlotWord::EMPTY);
//! ```

/// Largest proposal number the word can hold.
pub const MAX_PROPOSAL: u32 = (1 << 24) - 1;
/// Largest proposer index a value reference can name (writer and origin are stored plus one).
pub const MAX_PROPOSERS: usize = 255;

/// Where an accepted value lives: the buffer `writer` wrote, holding the value first proposed by
/// `origin` (proposer indices).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ValueRef {
    /// The proposer that wrote the buffer and ran the accept.
    pub writer: u8,
    /// The proposer whose command the value is.
    pub origin: u8,
}

/// One acceptor's state for one slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotWord {
    /// The highest proposal this acceptor promised not to undercut.
    pub min_proposal: u32,
    /// The proposal of the accepted value (0 if none).
    pub accepted_proposal: u32,
    /// The accepted value, if any.
    pub value: Option<ValueRef>,
}

impl SlotWord {
    /// The initial state: nothing promised, nothing accepted.
    pub const EMPTY: SlotWord = SlotWord {
        min_proposal: 0,
        accepted_proposal: 0,
        value: None,
    };

    /// Packs into a word. Proposals are masked to 24 bits (callers keep them below
    /// [`MAX_PROPOSAL`]).
    pub fn pack(self) -> u64 {
        let (writer, origin) = match self.value {
            Some(v) => (u64::from(v.writer) + 1, u64::from(v.origin) + 1),
            None => (0, 0),
        };
        (u64::from(self.min_proposal & MAX_PROPOSAL) << 40)
            | (u64::from(self.accepted_proposal & MAX_PROPOSAL) << 16)
            | ((writer & 0xff) << 8)
            | (origin & 0xff)
    }

    /// Unpacks a word (any 64-bit value decodes).
    pub fn unpack(w: u64) -> SlotWord {
        let (writer, origin) = ((w >> 8) & 0xff, w & 0xff);
        SlotWord {
            min_proposal: ((w >> 40) & u64::from(MAX_PROPOSAL)) as u32,
            accepted_proposal: ((w >> 16) & u64::from(MAX_PROPOSAL)) as u32,
            value: (writer != 0 && origin != 0).then(|| ValueRef {
                writer: (writer - 1) as u8,
                origin: (origin - 1) as u8,
            }),
        }
    }
}
