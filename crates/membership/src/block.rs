//! The membership table's multi-word blocks as words: the frame every block is written in, and
//! the `dec` (decision), `prop` (proposal) and `wedge` blocks a member reads from its peers'
//! rows (the `view` block is [`View::encode`](crate::view::View::encode) /
//! [`View::decode`](crate::view::View::decode)). See the `gms` module docs (and
//! `docs/MEMBERSHIP.md`) for what each block means in the protocol.
//!
//! The words come from a peer's row: every decoder here checks everything and returns a typed
//! [`BlockError`], never panics, and accepts only a payload its encoder writes (so what decodes
//! re-encodes to the same words). Fuzzed: `fuzz/fuzz_targets/gms_decision.rs`.
//!
//! ```
//! use squall_membership::block::{self, DecisionBlock};
//! use squall_membership::change::{Change, ChangeKind};
//! use squall_transport::NodeId;
//! let universe: Vec<NodeId> = (0..3).map(NodeId).collect();
//! let d = DecisionBlock {
//!     view: 4,
//!     rank: 1,
//!     changes: vec![Change { kind: ChangeKind::Fail, node: NodeId(2) }],
//!     trim: vec![7, 7, 5],
//!     holders: Some(vec![true, true, false]),
//! };
//! let payload = d.encode(universe.len(), 3)?;
//! let words = block::seal(1, &payload, payload.len() + 2)?;
//! let read = block::open(&words)?;
//! assert_eq!(DecisionBlock::decode(read, &universe, 3)?, d);
//! // A torn read (one word changed under the check) is refused, not guessed at.
//! let mut torn = words.clone();
//! torn[3] ^= 1;
//! assert_eq!(block::open(&torn), Err(block::BlockError::Torn));
//! # Ok::<(), block::BlockError>(())
//! ```

use squall_transport::NodeId;
use thiserror::Error;

use crate::change::Change;

/// Why a block's words were refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum BlockError {
    /// Fewer words than a frame needs (sequence number, check).
    #[error("a block of {len} words: a block needs at least 2 (sequence number and check)")]
    Short {
        /// The words given.
        len: usize,
    },
    /// The sequence number is 0: the row never wrote this block.
    #[error("the block was never written (sequence number 0)")]
    Unwritten,
    /// The check word does not match: a read that raced a write, or not a block at all.
    #[error("the block's check word does not match its words (torn read or not a block)")]
    Torn,
    /// The payload is not the length the block has for this table.
    #[error("a payload of {have} words where this block has {need}")]
    Length {
        /// Words given.
        have: usize,
        /// Words the block has.
        need: usize,
    },
    /// The payload's first word (`view + 1`) is 0.
    #[error("the block names no view (its first word is 0)")]
    NoView,
    /// The view is [`MAX_VIEW_ID`](crate::view::MAX_VIEW_ID) or above: no decision, proposal
    /// or wedge ends it (the next view's id would be above the bound).
    #[error("view id {0}: no block ends a view at or above the largest a group can reach")]
    ViewId(u64),
    /// More changes than the table holds.
    #[error("{n} changes, above the table's max_pending_changes {max}")]
    TooManyChanges {
        /// The count.
        n: u64,
        /// The table's limit.
        max: usize,
    },
    /// A change word no change encodes to.
    #[error("word {word:#x} is not a change")]
    BadChange {
        /// The word.
        word: u64,
    },
    /// A change names a node outside the universe.
    #[error("a change names {node}, which is not in the universe")]
    NotInUniverse {
        /// The node.
        node: NodeId,
    },
    /// More trim counts or holders than the universe has nodes.
    #[error("{n} {what} for a universe of {universe}")]
    TooMany {
        /// What.
        what: &'static str,
        /// How many.
        n: usize,
        /// The universe's size.
        universe: usize,
    },
    /// A word the encoder leaves 0 is not (past the changes, or past the universe's holder
    /// bits, or a holder bitmap after a "not known" flag).
    #[error("word {at} of the payload is {word:#x} where the encoder writes 0")]
    Padding {
        /// Its index in the payload.
        at: usize,
        /// The word.
        word: u64,
    },
    /// The decision's holder flag is neither 0 nor [`HOLDERS_KNOWN`].
    #[error("holder flag {0:#x}: neither 0 (not known) nor HOLDERS_KNOWN")]
    HolderFlag(u64),
    /// The wedge block's holds word is neither 0 nor 1.
    #[error("holds word {0}: neither 0 nor 1")]
    Holds(u64),
}

fn mix(h: u64, w: u64) -> u64 {
    // splitmix64 over the running hash.
    let mut z = (h ^ w).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The check word of a block whose other words are `words` (sequence number and payload).
pub(crate) fn check(words: &[u64]) -> u64 {
    words.iter().fold(0x5151_a11c_0ffe_e000, |h, &w| mix(h, w))
}

/// A block of `len` words: `[seq, payload…, 0 padding…, check]`.
///
/// ```
/// use squall_membership::block::{open, seal, BlockError};
/// let w = seal(3, &[10, 11], 5)?;
/// assert_eq!(open(&w)?, &[10, 11, 0]);
/// assert!(seal(3, &[10, 11], 3).is_err());
/// # Ok::<(), BlockError>(())
/// ```
pub fn seal(seq: u64, payload: &[u64], len: usize) -> Result<Vec<u64>, BlockError> {
    if len < 2 || payload.len() > len - 2 {
        return Err(BlockError::Length {
            have: payload.len(),
            need: len.saturating_sub(2),
        });
    }
    let mut words = vec![0u64; len];
    words[0] = seq;
    words[1..=payload.len()].copy_from_slice(payload);
    words[len - 1] = check(&words[..len - 1]);
    Ok(words)
}

/// The payload of a block's `words` (see [`seal`]) if it was written and reads consistently.
pub fn open(words: &[u64]) -> Result<&[u64], BlockError> {
    let [seq, payload @ .., last] = words else {
        return Err(BlockError::Short { len: words.len() });
    };
    if *seq == 0 {
        return Err(BlockError::Unwritten);
    }
    if *last != check(&words[..words.len() - 1]) {
        return Err(BlockError::Torn);
    }
    Ok(payload)
}

/// The first word of a decision block's holder section when the holders follow.
pub const HOLDERS_KNOWN: u64 = 0x484f_4c44; // "HOLD"

/// Words of a decision block's holder section for a universe of `u`: the flag, then one bit
/// per rank.
pub(crate) fn holder_words(u: usize) -> usize {
    1 + u.div_ceil(64)
}

fn need_len(p: &[u64], need: usize) -> Result<(), BlockError> {
    if p.len() == need {
        Ok(())
    } else {
        Err(BlockError::Length {
            have: p.len(),
            need,
        })
    }
}

fn view_of(w: u64) -> Result<u64, BlockError> {
    let v = w.checked_sub(1).ok_or(BlockError::NoView)?;
    // These blocks end view `v`: the next one, `v + 1`, must be a view id a block may carry.
    if v >= crate::view::MAX_VIEW_ID {
        return Err(BlockError::ViewId(v));
    }
    Ok(v)
}

fn zeros(p: &[u64], from: usize) -> Result<(), BlockError> {
    match p.iter().enumerate().skip(from).find(|(_, w)| **w != 0) {
        Some((at, &word)) => Err(BlockError::Padding { at, word }),
        None => Ok(()),
    }
}

/// `[n, changes…, 0 padding]` (`1 + max` words) at `at` of a payload.
fn decode_changes(
    p: &[u64],
    at: usize,
    universe: &[NodeId],
    max: usize,
) -> Result<Vec<Change>, BlockError> {
    let words = p.get(at..at + 1 + max).ok_or(BlockError::Length {
        have: p.len(),
        need: at + 1 + max,
    })?;
    let n = words[0];
    let k = usize::try_from(n)
        .ok()
        .filter(|&k| k <= max)
        .ok_or(BlockError::TooManyChanges { n, max })?;
    let mut out = Vec::with_capacity(k);
    for &word in &words[1..=k] {
        let c = Change::decode(word).ok_or(BlockError::BadChange { word })?;
        if !universe.contains(&c.node) {
            return Err(BlockError::NotInUniverse { node: c.node });
        }
        out.push(c);
    }
    zeros(&p[..at + 1 + max], at + 1 + k)?;
    Ok(out)
}

fn encode_changes(changes: &[Change], max: usize, out: &mut Vec<u64>) -> Result<(), BlockError> {
    if changes.len() > max {
        return Err(BlockError::TooManyChanges {
            n: changes.len() as u64,
            max,
        });
    }
    out.push(changes.len() as u64);
    out.extend(changes.iter().map(|c| c.encode()));
    out.resize(out.len() + max - changes.len(), 0);
    Ok(())
}

/// The `dec` block's payload: the decision a member logged and published (leader) or echoed
/// (follower) for a view: `[view+1, rank, n, changes… (padded to max_pending_changes), trim
/// counts… (padded to the universe), holder flag, holder bitmap…]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionBlock {
    /// The view the decision ends.
    pub view: u64,
    /// The deciding leader's rank (in restart mode, its ballot).
    pub rank: u64,
    /// The changes.
    pub changes: Vec<Change>,
    /// The trim's counts by rank in the ending view (decoded: one per universe node, the ones
    /// past the view's members 0).
    pub trim: Vec<u64>,
    /// The members (by rank in the ending view) whose wedge said they held their shard's state
    /// (decoded: one per universe node); `None`: not known.
    pub holders: Option<Vec<bool>>,
}

impl DecisionBlock {
    /// The payload's length for a universe of `universe` nodes and `max_changes` pending changes.
    pub fn payload_len(universe: usize, max_changes: usize) -> usize {
        3 + max_changes + universe + holder_words(universe)
    }

    /// The payload (see the type docs); refused if it does not fit the table.
    pub fn encode(&self, universe: usize, max_changes: usize) -> Result<Vec<u64>, BlockError> {
        for (what, n) in [
            ("trim counts", self.trim.len()),
            ("holders", self.holders.as_ref().map_or(0, Vec::len)),
        ] {
            if n > universe {
                return Err(BlockError::TooMany { what, n, universe });
            }
        }
        let mut p = vec![
            self.view.checked_add(1).ok_or(BlockError::NoView)?,
            self.rank,
        ];
        encode_changes(&self.changes, max_changes, &mut p)?;
        p.extend(&self.trim);
        p.resize(3 + max_changes + universe, 0);
        let flag = p.len();
        p.resize(Self::payload_len(universe, max_changes), 0);
        if let Some(h) = &self.holders {
            p[flag] = HOLDERS_KNOWN;
            for (i, _) in h.iter().enumerate().filter(|(_, h)| **h) {
                p[flag + 1 + i / 64] |= 1 << (i % 64);
            }
        }
        Ok(p)
    }

    /// Reads a payload (see [`encode`](Self::encode)) for a table over `universe` with
    /// `max_changes` pending changes: every change known and in the universe, every padding
    /// word 0, the holder flag one of the two values.
    pub fn decode(
        p: &[u64],
        universe: &[NodeId],
        max_changes: usize,
    ) -> Result<DecisionBlock, BlockError> {
        let u = universe.len();
        need_len(p, Self::payload_len(u, max_changes))?;
        let view = view_of(p[0])?;
        let changes = decode_changes(p, 2, universe, max_changes)?;
        let t = 3 + max_changes;
        let trim = p[t..t + u].to_vec();
        let h = &p[t + u..];
        let holders = match h[0] {
            HOLDERS_KNOWN => {
                let bits: Vec<bool> = (0..u).map(|i| h[1 + i / 64] >> (i % 64) & 1 != 0).collect();
                // The bits past the universe are 0.
                if let Some(i) =
                    (u..64 * (h.len() - 1)).find(|i| h[1 + i / 64] >> (i % 64) & 1 != 0)
                {
                    return Err(BlockError::Padding {
                        at: t + u + 1 + i / 64,
                        word: h[1 + i / 64],
                    });
                }
                Some(bits)
            }
            0 => {
                zeros(p, t + u + 1)?;
                None
            }
            w => return Err(BlockError::HolderFlag(w)),
        };
        Ok(DecisionBlock {
            view,
            rank: p[1],
            changes,
            trim,
            holders,
        })
    }
}

/// The `prop` block's payload: the proposal a member published (leader) or copied (follower:
/// its acknowledgement): `[view+1, rank, n, changes… (padded to max_pending_changes)]`.
///
/// ```
/// use squall_membership::block::ProposalBlock;
/// use squall_membership::change::{Change, ChangeKind};
/// use squall_transport::NodeId;
/// let universe: Vec<NodeId> = (0..4).map(NodeId).collect();
/// let p = ProposalBlock { view: 0, rank: 2, changes: vec![Change { kind: ChangeKind::Join, node: NodeId(3) }] };
/// let words = p.encode(4)?;
/// assert_eq!(ProposalBlock::decode(&words, &universe, 4), Ok(p));
/// // A change of a node outside the universe is refused.
/// assert!(ProposalBlock::decode(&words, &universe[..3], 4).is_err());
/// # Ok::<(), squall_membership::block::BlockError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposalBlock {
    /// The view the proposal would end.
    pub view: u64,
    /// The proposing leader's rank (in restart mode, its ballot).
    pub rank: u64,
    /// The changes.
    pub changes: Vec<Change>,
}

impl ProposalBlock {
    /// The payload's length for `max_changes` pending changes.
    pub fn payload_len(max_changes: usize) -> usize {
        3 + max_changes
    }

    /// The payload; refused with more than `max_changes` changes.
    pub fn encode(&self, max_changes: usize) -> Result<Vec<u64>, BlockError> {
        let mut p = vec![
            self.view.checked_add(1).ok_or(BlockError::NoView)?,
            self.rank,
        ];
        encode_changes(&self.changes, max_changes, &mut p)?;
        Ok(p)
    }

    /// Reads a payload (see [`encode`](Self::encode)).
    pub fn decode(
        p: &[u64],
        universe: &[NodeId],
        max_changes: usize,
    ) -> Result<ProposalBlock, BlockError> {
        need_len(p, Self::payload_len(max_changes))?;
        Ok(ProposalBlock {
            view: view_of(p[0])?,
            rank: p[1],
            changes: decode_changes(p, 2, universe, max_changes)?,
        })
    }
}

/// The `wedge` block's payload: `[view+1, received… (padded to the universe), holds]`, the
/// per-sender received counts (rank order) a member wedged with and whether it then held its
/// shard's state.
///
/// ```
/// use squall_membership::block::WedgeBlock;
/// let w = WedgeBlock { view: 3, received: vec![5, 4, 0, 0], holds: true };
/// let words = w.encode(4)?;
/// assert_eq!(words, vec![4, 5, 4, 0, 0, 1]);
/// assert_eq!(WedgeBlock::decode(&words, 4), Ok(w));
/// # Ok::<(), squall_membership::block::BlockError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WedgeBlock {
    /// The view wedged.
    pub view: u64,
    /// Received counts by rank (decoded: one per universe node).
    pub received: Vec<u64>,
    /// Whether the member held its shard's state.
    pub holds: bool,
}

impl WedgeBlock {
    /// The payload's length for a universe of `universe` nodes.
    pub fn payload_len(universe: usize) -> usize {
        2 + universe
    }

    /// The payload; refused with more counts than the universe has nodes.
    pub fn encode(&self, universe: usize) -> Result<Vec<u64>, BlockError> {
        if self.received.len() > universe {
            return Err(BlockError::TooMany {
                what: "received counts",
                n: self.received.len(),
                universe,
            });
        }
        let mut p = vec![self.view.checked_add(1).ok_or(BlockError::NoView)?];
        p.extend(&self.received);
        p.resize(1 + universe, 0);
        p.push(u64::from(self.holds));
        Ok(p)
    }

    /// Reads a payload (see [`encode`](Self::encode)).
    pub fn decode(p: &[u64], universe: usize) -> Result<WedgeBlock, BlockError> {
        need_len(p, Self::payload_len(universe))?;
        let holds = match p[1 + universe] {
            0 => false,
            1 => true,
            w => return Err(BlockError::Holds(w)),
        };
        Ok(WedgeBlock {
            view: view_of(p[0])?,
            received: p[1..=universe].to_vec(),
            holds,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::change::ChangeKind;

    fn universe(u: u32) -> Vec<NodeId> {
        (0..u).map(NodeId).collect()
    }

    /// A decision with holders round-trips past one word of bits; without, it reads as not
    /// known; a flag word neither value, a bitmap after "not known", a bit past the universe,
    /// a change word past `n` and an unknown change are refused.
    #[test]
    fn a_decision_block_round_trips_and_anything_its_encoder_never_writes_is_refused() {
        for u in [3usize, 70] {
            let uni = universe(u as u32);
            let c = u;
            let mut d = DecisionBlock {
                view: 9,
                rank: 2,
                changes: vec![Change {
                    kind: ChangeKind::Fail,
                    node: NodeId(1),
                }],
                trim: (0..u as u64).collect(),
                holders: Some((0..u).map(|i| i % 3 == 1 || i == u - 1).collect()),
            };
            let p = d.encode(u, c).unwrap();
            assert_eq!(p.len(), DecisionBlock::payload_len(u, c));
            assert_eq!(DecisionBlock::decode(&p, &uni, c), Ok(d.clone()));
            let flag = 3 + c + u;
            let mut bad = p.clone();
            bad[flag] = 7;
            assert_eq!(
                DecisionBlock::decode(&bad, &uni, c),
                Err(BlockError::HolderFlag(7))
            );
            let mut bad = p.clone();
            bad[flag + 1 + (u - 1) / 64] |= 1 << (u % 64);
            assert!(matches!(
                DecisionBlock::decode(&bad, &uni, c),
                Err(BlockError::Padding { .. })
            ));
            let mut bad = p.clone();
            bad[4] = Change {
                kind: ChangeKind::Join,
                node: NodeId(0),
            }
            .encode();
            assert!(matches!(
                DecisionBlock::decode(&bad, &uni, c),
                Err(BlockError::Padding { at: 4, .. })
            ));
            let mut bad = p.clone();
            bad[3] = 7 << 32;
            assert_eq!(
                DecisionBlock::decode(&bad, &uni, c),
                Err(BlockError::BadChange { word: 7 << 32 })
            );
            let mut bad = p.clone();
            bad[2] = c as u64 + 1;
            assert!(matches!(
                DecisionBlock::decode(&bad, &uni, c),
                Err(BlockError::TooManyChanges { .. })
            ));
            d.holders = None;
            let p = d.encode(u, c).unwrap();
            assert_eq!(DecisionBlock::decode(&p, &uni, c), Ok(d.clone()));
            let mut bad = p.clone();
            bad[flag + 1] = 1;
            assert!(matches!(
                DecisionBlock::decode(&bad, &uni, c),
                Err(BlockError::Padding { .. })
            ));
            assert!(DecisionBlock::decode(&p[1..], &uni, c).is_err());
        }
    }

    /// Found while exposing the encoders for the `gms_decision` fuzz target (by reading, not by
    /// the fuzzer): `publish_decision` wrote change words past `max_pending_changes` into the
    /// trim section (and past the block, out of bounds) instead of refusing, and `view + 1`
    /// overflowed for view `u64::MAX`.
    #[test]
    fn encoders_refuse_what_does_not_fit_the_table() {
        let ch = Change {
            kind: ChangeKind::Leave,
            node: NodeId(0),
        };
        let d = DecisionBlock {
            view: 0,
            rank: 0,
            changes: vec![ch; 3],
            trim: vec![],
            holders: None,
        };
        assert!(matches!(
            d.encode(2, 2),
            Err(BlockError::TooManyChanges { n: 3, max: 2 })
        ));
        let d = DecisionBlock {
            view: u64::MAX,
            changes: vec![],
            ..d
        };
        assert_eq!(d.encode(2, 2), Err(BlockError::NoView));
        let w = WedgeBlock {
            view: 0,
            received: vec![1, 2, 3],
            holds: false,
        };
        assert!(w.encode(2).is_err());
    }

    /// Found by the `gms_decision` fuzz target (its first crash, within 4000 runs): a decision
    /// block of view `2^64 - 2` decoded, and the view after it (`id + 1 = 2^64 - 1`) overflowed
    /// in `View::encode` (`id + 1`), a panic in debug builds and a block that reads as unset in
    /// release ones; a joiner adopting a peer's view block with such an id got there too. Ids
    /// above `MAX_VIEW_ID` are refused by every decoder now.
    #[test]
    fn a_view_id_no_group_reaches_is_refused() {
        use crate::view::{EvenShards, MAX_VIEW_ID, ShardLayout, View, ViewBlockError};
        let uni = universe(2);
        let d = DecisionBlock {
            view: MAX_VIEW_ID - 1,
            rank: 0,
            changes: vec![],
            trim: vec![1, 1],
            holders: None,
        };
        let mut p = d.encode(2, 2).unwrap();
        assert_eq!(DecisionBlock::decode(&p, &uni, 2), Ok(d));
        // Found by the fuzz target with the first fix (bound at `view > MAX_VIEW_ID`): a
        // decision ending view `MAX_VIEW_ID` made a next view no view block may carry.
        p[0] = MAX_VIEW_ID + 1;
        assert_eq!(
            DecisionBlock::decode(&p, &uni, 2),
            Err(BlockError::ViewId(MAX_VIEW_ID))
        );
        p[0] = u64::MAX - 1;
        assert_eq!(
            DecisionBlock::decode(&p, &uni, 2),
            Err(BlockError::ViewId(u64::MAX - 2))
        );
        let w = WedgeBlock::decode(&[u64::MAX, 0, 0, 0], 2);
        assert_eq!(w, Err(BlockError::ViewId(u64::MAX - 1)));
        let layout = EvenShards {
            shards: 1,
            min: 1,
            max: 2,
        };
        let mut v = View::new(MAX_VIEW_ID, uni.clone(), &layout).encode();
        assert!(View::decode(&v, &layout.shape(), None).is_ok());
        v[0] = u64::MAX;
        assert_eq!(
            View::decode(&v, &layout.shape(), None),
            Err(ViewBlockError::Id(u64::MAX - 1))
        );
    }

    /// The frame: a never-written block, a torn one and a too short one are refused.
    #[test]
    fn the_frame_refuses_unwritten_torn_and_short_blocks() {
        let w = seal(1, &[5, 6], 4).unwrap();
        assert_eq!(open(&w), Ok(&[5u64, 6][..]));
        assert_eq!(open(&[0, 5, 6, w[3]]), Err(BlockError::Unwritten));
        assert_eq!(open(&[1, 5, 7, w[3]]), Err(BlockError::Torn));
        assert_eq!(open(&[1]), Err(BlockError::Short { len: 1 }));
        assert!(seal(1, &[5, 6, 7], 4).is_err());
        let p = WedgeBlock::decode(&[1, 0, 0, 2], 2);
        assert_eq!(p, Err(BlockError::Holds(2)));
    }

    /// The `gms_decision` fuzz target's seeds are valid encodings (byte 0: universe − 1, byte
    /// 1: max pending changes, then words): each decodes as the block its name says.
    #[test]
    fn the_fuzz_seeds_decode() {
        macro_rules! seed {
            ($name:literal) => {
                (
                    $name,
                    &include_bytes!(concat!("../../../fuzz/seeds/gms_decision/", $name))[..],
                )
            };
        }
        for (name, bytes) in [
            seed!("decision_with_holders"),
            seed!("decision_not_known"),
            seed!("decision_restart_ballot"),
            seed!("decision_70_holders"),
            seed!("proposal"),
            seed!("wedge"),
            seed!("framed_decision"),
            seed!("framed_wedge"),
        ] {
            let u = 1 + usize::from(bytes[0]) % 70;
            let c = usize::from(bytes[1]) % 72;
            let uni = universe(u as u32);
            let words: Vec<u64> = bytes[2..]
                .chunks(8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
                .collect();
            let (kind, p) = match name.strip_prefix("framed_") {
                Some(kind) => (kind, open(&words).unwrap()),
                None => (name.split('_').next().unwrap(), &words[..]),
            };
            let ok = match kind {
                "decision" => DecisionBlock::decode(p, &uni, c).map(|d| d.encode(u, c)),
                "proposal" => ProposalBlock::decode(p, &uni, c).map(|b| b.encode(c)),
                _ => WedgeBlock::decode(p, u).map(|b| b.encode(u)),
            };
            assert_eq!(ok, Ok(Ok(p.to_vec())), "{name}");
        }
    }
}
