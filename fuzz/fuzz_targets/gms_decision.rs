//! Fuzzes the membership table's block decoders (`squall_membership::block`): the frame
//! (`open`: sequence number and check), the decision block (members' changes, trim, rank and
//! the holder flag word and bits), the proposal block and the wedge block, all read from words a
//! peer wrote. Whatever the words, nothing panics; what a decoder accepts re-encodes to exactly
//! the same words (every padding word and bit was checked); and an accepted decision applied to
//! a view (`Decision::next_members`, `View::next_holding` with the decision's holders, as a
//! restarting member's catch-up does) gives a view whose block round-trips (unless it has no
//! members: no member installs such a view).
//!
//! Input: byte 0 picks the universe (1 + b % 70 nodes, so the holder bitmap spans two words),
//! byte 1 `max_pending_changes` (b % 72), the rest are little-endian words. The words go to
//! `open` as they are, and, cut or padded with zeros to each block's payload length, to the
//! three payload decoders. Seeds: `fuzz/seeds/gms_decision` (valid encodings; the unit test
//! `block::tests::the_fuzz_seeds_decode` checks they still do). Run:
//! `cargo +nightly fuzz run gms_decision /tmp/gms_decision_corpus fuzz/seeds/gms_decision -- -runs=1000000`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_membership::block::{DecisionBlock, ProposalBlock, WedgeBlock, open};
use squall_membership::change::Decision;
use squall_membership::trim::Trim;
use squall_membership::view::{EvenShards, ShardLayout, View};
use squall_transport::NodeId;

fuzz_target!(|data: &[u8]| {
    let (Some(&b0), Some(&b1)) = (data.first(), data.get(1)) else {
        return;
    };
    let u = 1 + usize::from(b0) % 70;
    let c = usize::from(b1) % 72;
    let universe: Vec<NodeId> = (0..u as u32).map(NodeId).collect();
    let words: Vec<u64> = data[2..]
        .chunks(8)
        .map(|ch| {
            let mut w = [0u8; 8];
            w[..ch.len()].copy_from_slice(ch);
            u64::from_le_bytes(w)
        })
        .collect();
    let sized = |n: usize| {
        let mut w = words.clone();
        w.resize(n, 0);
        w
    };
    if let Ok(p) = open(&words) {
        let _ = DecisionBlock::decode(p, &universe, c);
        let _ = ProposalBlock::decode(p, &universe, c);
        let _ = WedgeBlock::decode(p, u);
    }
    let p = sized(ProposalBlock::payload_len(c));
    if let Ok(b) = ProposalBlock::decode(&p, &universe, c) {
        assert_eq!(b.encode(c).as_ref(), Ok(&p));
    }
    let p = sized(WedgeBlock::payload_len(u));
    if let Ok(b) = WedgeBlock::decode(&p, u) {
        assert_eq!(b.encode(u).as_ref(), Ok(&p));
    }
    let p = sized(DecisionBlock::payload_len(u, c));
    let Ok(d) = DecisionBlock::decode(&p, &universe, c) else {
        return;
    };
    assert_eq!(d.encode(u, c).as_ref(), Ok(&p));
    assert_eq!(d.trim.len(), u);
    assert!(d.holders.as_ref().is_none_or(|h| h.len() == u));
    // Apply it to a view of the whole universe, as a catch-up does.
    let layout = EvenShards {
        shards: 2,
        min: 1,
        max: u,
    };
    let view = View::new(d.view.min(u64::MAX - 1), universe.clone(), &layout);
    let decision = Decision {
        rank: d.rank,
        changes: d.changes.clone(),
        trim: Trim {
            view: view.id,
            counts: universe.iter().copied().zip(d.trim.iter().copied()).collect(),
        },
    };
    let next_members = decision.next_members(&view.members);
    assert!(next_members.iter().all(|m| universe.contains(m)));
    let holders: Option<Vec<NodeId>> = d.holders.as_ref().map(|h| {
        (view.members.iter().zip(h))
            .filter(|(_, b)| **b)
            .map(|(&m, _)| m)
            .collect()
    });
    let next = View::next_holding(
        view.id + 1,
        next_members,
        Some(&view.shards),
        holders.as_deref(),
        &layout,
    );
    // A decision removing every member gives a view with none, which no member installs (the
    // core never installs a view without a majority of its predecessor; a catch-up finds
    // itself not in it and joins again) and no view block carries.
    if !next.members.is_empty() {
        let shape = layout.shape();
        assert_eq!(View::decode(&next.encode(), &shape, Some(&universe)), Ok(next));
    }
});
