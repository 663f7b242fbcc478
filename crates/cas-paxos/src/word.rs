//! The acceptor's state for one slot, packed into one 8-byte word so that every acceptor step is
//! a single remote compare-and-swap (Velos §5.2).
//!
//! Layout (most significant first):
//!
//! | bits | field |
//! | --- | --- |
//! | 18 | `min_proposal` |
//! | 18 | `accepted_proposal` |
//! | 6 | `writer` + 1 (0: no value) |
//! | 6 | `origin` + 1 (0: no value) |
//! | 8 | `lap` — which use of the ring position this is (the absolute slot divided by the ring size, modulo 256), so an old lap's state is never taken for the current one |
//! | 8 | `back` — the decision piggyback (Velos §5.4): non-zero means "every slot below `s - back` whose word holds this word's `writer` and `accepted_proposal` holds the chosen value" |
//!
//! `writer`/`origin` name where the accepted value lives (see [`crate::layout`]). Proposal
//! numbers are 1-based; 0 means "none". A word whose `min_proposal` reaches the configured
//! threshold belongs to the two-sided fallback ([`crate::rpc`]) and is never CASed again.
//!
//! ```
//! use squall_cas_paxos::word::{SlotWord, ValueRef};
//! let w = SlotWord { min_proposal: 7, accepted_proposal: 5, value: Some(ValueRef { writer: 2, origin: 0 }), lap: 3, back: 1 };
//! assert_eq!(SlotWord::unpack(w.pack()), w);
//! assert_eq!(SlotWord::unpack(0), SlotWord::EMPTY);
//! ```

/// Largest proposal number the word can hold.
pub const MAX_PROPOSAL: u32 = (1 << 18) - 1;
/// Most proposers a value reference can name (writer and origin are 6 bits, stored plus one).
pub const MAX_PROPOSERS: usize = 63;

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
    /// The lap (use of this ring position) the state belongs to, modulo 256.
    pub lap: u8,
    /// Decision piggyback: slots below `s - back` holding this word's writer and accepted
    /// proposal are decided (0: no claim).
    pub back: u8,
}

impl SlotWord {
    /// The initial state of lap 0: nothing promised, nothing accepted.
    pub const EMPTY: SlotWord = SlotWord::empty(0);

    /// The initial state of a lap.
    pub const fn empty(lap: u8) -> SlotWord {
        SlotWord {
            min_proposal: 0,
            accepted_proposal: 0,
            value: None,
            lap,
            back: 0,
        }
    }

    /// Packs into a word. Proposals are masked to 18 bits and proposer indices to 6 (callers
    /// keep them in range).
    pub fn pack(self) -> u64 {
        let (writer, origin) = match self.value {
            Some(v) => (u64::from(v.writer) + 1, u64::from(v.origin) + 1),
            None => (0, 0),
        };
        let p = u64::from(MAX_PROPOSAL);
        ((u64::from(self.min_proposal) & p) << 46)
            | ((u64::from(self.accepted_proposal) & p) << 28)
            | ((writer & 0x3f) << 22)
            | ((origin & 0x3f) << 16)
            | (u64::from(self.lap) << 8)
            | u64::from(self.back)
    }

    /// Unpacks a word (any 64-bit value decodes).
    pub fn unpack(w: u64) -> SlotWord {
        let (writer, origin) = ((w >> 22) & 0x3f, (w >> 16) & 0x3f);
        let p = u64::from(MAX_PROPOSAL);
        SlotWord {
            min_proposal: ((w >> 46) & p) as u32,
            accepted_proposal: ((w >> 28) & p) as u32,
            value: (writer != 0 && origin != 0).then(|| ValueRef {
                writer: (writer - 1) as u8,
                origin: (origin - 1) as u8,
            }),
            lap: (w >> 8) as u8,
            back: w as u8,
        }
    }

    /// The same state without the piggyback field (what Paxos compares).
    pub fn without_back(self) -> SlotWord {
        SlotWord { back: 0, ..self }
    }
}

/// The lap tag of absolute slot `slot` in a ring of `ring` positions.
pub fn lap_of(slot: u64, ring: usize) -> u8 {
    (slot / ring as u64) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_do_not_overlap() {
        let full = SlotWord {
            min_proposal: MAX_PROPOSAL,
            accepted_proposal: MAX_PROPOSAL,
            value: Some(ValueRef {
                writer: (MAX_PROPOSERS - 1) as u8,
                origin: (MAX_PROPOSERS - 1) as u8,
            }),
            lap: 255,
            back: 255,
        };
        assert_eq!(full.pack(), u64::MAX);
        // Every field but the value reference (which needs both halves) round-trips alone.
        for shift in (0..16).chain(28..64) {
            let w = 1u64 << shift;
            assert_eq!(SlotWord::unpack(w).pack(), w, "bit {shift}");
        }
    }
}
