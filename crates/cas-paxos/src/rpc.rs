//! The two-sided fallback for exhausted proposal numbers (Velos §5.2).
//!
//! A slot word holds proposals of 18 bits. Once an acceptor's `min_proposal` for a slot reaches
//! the configured threshold, that word is frozen: no proposer CASes it again, and every proposer
//! talks to that acceptor, for that slot, with the classic two-sided Paxos acceptor RPC
//! (Algorithm 1) instead. The acceptor's [`RpcAcceptor`] takes its state over from the frozen
//! word the first time it is asked and from then on keeps it in local memory with 32-bit
//! proposals. A proposer whose proposal reaches the threshold first freezes the words it still
//! predicts below it with one CAS that raises `min_proposal` to exactly the threshold (a promise
//! no higher than its proposal, so always safe to make), then continues over RPC.
//!
//! Messages are `[tag][step][slot: u64][attempt: u64][proposal: u32]` and, for replies,
//! `[ok][min: u32][accepted: u32][writer + 1][origin + 1]`, all little-endian; [`Message::decode`]
//! checks every byte it reads (fuzzed by `fuzz/fuzz_targets/cas_paxos_message.rs`).
//!
//! ```
//! use squall_cas_paxos::rpc::{Message, Request, Step};
//! let m = Message::Request(Request { step: Step::Prepare, slot: 9, attempt: 2, proposal: 70_000, value: None });
//! assert_eq!(Message::decode(&m.encode()), Ok(m));
//! ```

use std::collections::BTreeMap;

use squall_transport::Region;
use thiserror::Error;

use crate::layout::Layout;
use crate::word::{SlotWord, ValueRef, lap_of};

const REQUEST: u8 = 0x52;
const REPLY: u8 = 0x53;

/// Which acceptor step a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Promise not to accept below the proposal.
    Prepare,
    /// Accept the value at the proposal.
    Accept,
}

/// A proposer's request to one acceptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// The step.
    pub step: Step,
    /// Absolute slot.
    pub slot: u64,
    /// The proposer's attempt it belongs to (echoed in the reply).
    pub attempt: u64,
    /// The proposal.
    pub proposal: u32,
    /// The value to accept (accept only).
    pub value: Option<ValueRef>,
}

/// An acceptor's answer: whether it promised or accepted, and its state after the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The step answered.
    pub step: Step,
    /// Absolute slot.
    pub slot: u64,
    /// The request's attempt.
    pub attempt: u64,
    /// The request's proposal.
    pub proposal: u32,
    /// Whether the step succeeded.
    pub ok: bool,
    /// The acceptor's state for the slot after the step (`lap` and `back` unused).
    pub state: AcceptorState,
}

/// An acceptor's Paxos state for one slot, with proposals wider than the slot word's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AcceptorState {
    /// Highest promise.
    pub min_proposal: u32,
    /// Proposal of the accepted value (0: none).
    pub accepted_proposal: u32,
    /// The accepted value.
    pub value: Option<ValueRef>,
}

/// A message between a proposer and an RPC acceptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// Proposer to acceptor.
    Request(Request),
    /// Acceptor to proposer.
    Reply(Reply),
}

/// Bytes that are not a valid message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Fewer bytes than the message needs.
    #[error("message truncated: {0} bytes")]
    Truncated(usize),
    /// An unknown tag, step or flag byte.
    #[error("invalid byte {value:#x} at offset {offset}")]
    Invalid {
        /// Where.
        offset: usize,
        /// What.
        value: u8,
    },
    /// Bytes after the message.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

const REQUEST_LEN: usize = 1 + 1 + 8 + 8 + 4 + 2;
const REPLY_LEN: usize = 1 + 1 + 8 + 8 + 4 + 1 + 4 + 4 + 2;

fn put_value(out: &mut Vec<u8>, v: Option<ValueRef>) {
    match v {
        Some(v) => out.extend_from_slice(&[v.writer.wrapping_add(1), v.origin.wrapping_add(1)]),
        None => out.extend_from_slice(&[0, 0]),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let b = self
            .bytes
            .get(self.at..self.at + N)
            .ok_or(DecodeError::Truncated(self.bytes.len()))?;
        self.at += N;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    fn invalid(&self, back: usize, value: u8) -> DecodeError {
        DecodeError::Invalid {
            offset: self.at - back,
            value,
        }
    }
    fn step(&mut self) -> Result<Step, DecodeError> {
        match self.u8()? {
            0 => Ok(Step::Prepare),
            1 => Ok(Step::Accept),
            b => Err(self.invalid(1, b)),
        }
    }
    fn value(&mut self) -> Result<Option<ValueRef>, DecodeError> {
        let [w, o] = self.take::<2>()?;
        match (w, o) {
            (0, 0) => Ok(None),
            (0, b) | (b, 0) => Err(self.invalid(2, b)),
            (w, o) => Ok(Some(ValueRef {
                writer: w - 1,
                origin: o - 1,
            })),
        }
    }
}

impl Message {
    /// Whether `bytes` look like an RPC message (by their tag), as opposed to a forwarded command.
    pub fn is_rpc(bytes: &[u8]) -> bool {
        matches!(bytes.first(), Some(&REQUEST | &REPLY))
    }

    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(REPLY_LEN);
        let head = |out: &mut Vec<u8>, tag: u8, step: Step, slot: u64, attempt: u64, p: u32| {
            out.push(tag);
            out.push(step as u8);
            out.extend_from_slice(&slot.to_le_bytes());
            out.extend_from_slice(&attempt.to_le_bytes());
            out.extend_from_slice(&p.to_le_bytes());
        };
        match self {
            Message::Request(r) => {
                head(&mut out, REQUEST, r.step, r.slot, r.attempt, r.proposal);
                put_value(&mut out, r.value);
            }
            Message::Reply(r) => {
                head(&mut out, REPLY, r.step, r.slot, r.attempt, r.proposal);
                out.push(u8::from(r.ok));
                out.extend_from_slice(&r.state.min_proposal.to_le_bytes());
                out.extend_from_slice(&r.state.accepted_proposal.to_le_bytes());
                put_value(&mut out, r.state.value);
            }
        }
        out
    }

    /// Parses a message; every malformed input is an error.
    pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
        let mut r = Reader { bytes, at: 0 };
        let tag = r.u8()?;
        let len = match tag {
            REQUEST => REQUEST_LEN,
            REPLY => REPLY_LEN,
            b => return Err(r.invalid(1, b)),
        };
        if bytes.len() < len {
            return Err(DecodeError::Truncated(bytes.len()));
        }
        let (step, slot, attempt, proposal) = (r.step()?, r.u64()?, r.u64()?, r.u32()?);
        let m = if tag == REQUEST {
            Message::Request(Request {
                step,
                slot,
                attempt,
                proposal,
                value: r.value()?,
            })
        } else {
            let ok = match r.u8()? {
                0 => false,
                1 => true,
                b => return Err(r.invalid(1, b)),
            };
            Message::Reply(Reply {
                step,
                slot,
                attempt,
                proposal,
                ok,
                state: AcceptorState {
                    min_proposal: r.u32()?,
                    accepted_proposal: r.u32()?,
                    value: r.value()?,
                },
            })
        };
        if r.at != bytes.len() {
            return Err(DecodeError::Trailing(bytes.len() - r.at));
        }
        Ok(m)
    }
}

/// The two-sided acceptor of one node: the state of every slot whose word reached the threshold.
#[derive(Debug)]
pub struct RpcAcceptor {
    layout: Layout,
    threshold: u32,
    states: BTreeMap<u64, AcceptorState>,
    served: u64,
}

impl RpcAcceptor {
    /// An acceptor for words that freeze at `threshold`.
    pub fn new(layout: Layout, threshold: u32) -> RpcAcceptor {
        RpcAcceptor {
            layout,
            threshold,
            states: BTreeMap::new(),
            served: 0,
        }
    }

    /// Requests served so far.
    pub fn served(&self) -> u64 {
        self.served
    }

    /// The state of `slot` if it moved to RPC (for checkers).
    pub fn state(&self, slot: u64) -> Option<AcceptorState> {
        self.states.get(&slot).copied()
    }

    /// Every slot state this acceptor holds (for checkers).
    pub fn states(&self) -> Vec<(u64, AcceptorState)> {
        self.states.iter().map(|(s, a)| (*s, *a)).collect()
    }

    /// Forgets slots below `slot` (their positions were reset for the next lap).
    pub fn forget_below(&mut self, slot: u64) {
        self.states = self.states.split_off(&slot);
    }

    /// Runs one request against this node's slot words (`words`, the `SLOTS` region): the
    /// state is taken over from the word on first use, freezing it at the threshold if it was
    /// not frozen yet. A request for a slot whose position is in another lap is refused.
    pub fn handle(&mut self, words: &Region, req: &Request) -> Reply {
        self.served += 1;
        let pos = self.layout.position(req.slot);
        let lap = lap_of(req.slot, self.layout.slots);
        let threshold = self.threshold;
        let state = match self.states.get_mut(&req.slot) {
            Some(s) => Some(s),
            None => {
                let mut w = words.load(pos);
                let taken = loop {
                    let word = SlotWord::unpack(w);
                    if word.lap != lap {
                        break None;
                    }
                    if word.min_proposal >= threshold {
                        break Some(word);
                    }
                    let frozen = SlotWord {
                        min_proposal: threshold,
                        ..word
                    };
                    match words.compare_and_swap(pos, w, frozen.pack()) {
                        Ok(_) => break Some(frozen),
                        Err(actual) => w = actual,
                    }
                };
                taken.map(|word| {
                    self.states.entry(req.slot).or_insert(AcceptorState {
                        min_proposal: word.min_proposal,
                        accepted_proposal: word.accepted_proposal,
                        value: word.value,
                    })
                })
            }
        };
        let Some(state) = state else {
            return Reply {
                step: req.step,
                slot: req.slot,
                attempt: req.attempt,
                proposal: req.proposal,
                ok: false,
                state: AcceptorState {
                    min_proposal: u32::MAX,
                    ..AcceptorState::default()
                },
            };
        };
        // Algorithm 1. Proposal numbers belong to one proposer each, so `>=` lets a proposer
        // repeat its own request.
        let ok = req.proposal >= state.min_proposal
            && (req.step == Step::Prepare || req.value.is_some());
        if ok {
            state.min_proposal = req.proposal;
            if req.step == Step::Accept {
                state.accepted_proposal = req.proposal;
                state.value = req.value;
            }
        }
        Reply {
            step: req.step,
            slot: req.slot,
            attempt: req.attempt,
            proposal: req.proposal,
            ok,
            state: *state,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_transport::{RegionId, RegionSpec};

    #[test]
    fn decode_rejects_what_encode_never_makes() {
        let r = Message::Reply(Reply {
            step: Step::Accept,
            slot: u64::MAX,
            attempt: 7,
            proposal: 300_000,
            ok: true,
            state: AcceptorState {
                min_proposal: 300_000,
                accepted_proposal: 300_000,
                value: Some(ValueRef {
                    writer: 2,
                    origin: 1,
                }),
            },
        });
        let bytes = r.encode();
        assert_eq!(Message::decode(&bytes), Ok(r));
        for cut in 0..bytes.len() {
            assert!(Message::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(Message::decode(&long), Err(DecodeError::Trailing(1)));
        let mut bad = bytes.clone();
        bad[1] = 9;
        assert!(matches!(
            Message::decode(&bad),
            Err(DecodeError::Invalid { offset: 1, .. })
        ));
        let mut half = bytes;
        let n = half.len();
        half[n - 1] = 0;
        assert!(Message::decode(&half).is_err());
    }

    #[test]
    fn the_acceptor_takes_over_a_word_and_freezes_it() {
        let layout = Layout {
            proposers: 3,
            slots: 4,
            max_value_len: 8,
        };
        let words = Region::new(RegionSpec::new(RegionId(1), 32)).expect("region");
        let v = ValueRef {
            writer: 1,
            origin: 1,
        };
        let before = SlotWord {
            min_proposal: 5,
            accepted_proposal: 5,
            value: Some(v),
            lap: 1,
            back: 0,
        };
        words.store(2, before.pack());
        let mut a = RpcAcceptor::new(layout, 10);
        let prepare = |p| Request {
            step: Step::Prepare,
            slot: 6, // lap 1, position 2
            attempt: 1,
            proposal: p,
            value: None,
        };
        // Below the frozen threshold: refused, and the word now reads as frozen.
        let r = a.handle(&words, &prepare(8));
        assert!(!r.ok);
        assert_eq!(SlotWord::unpack(words.load(2)).min_proposal, 10);
        assert_eq!(r.state.value, Some(v), "the accepted value carries over");
        let r = a.handle(&words, &prepare(11));
        assert!(r.ok);
        assert_eq!(r.state.min_proposal, 11);
        let accept = Request {
            step: Step::Accept,
            proposal: 11,
            value: Some(ValueRef {
                writer: 0,
                origin: 2,
            }),
            ..prepare(11)
        };
        assert!(a.handle(&words, &accept).ok);
        assert!(!a.handle(&words, &prepare(9)).ok);
        // Another lap's slot at the same position is refused outright.
        assert!(
            !a.handle(
                &words,
                &Request {
                    slot: 2,
                    ..prepare(50)
                }
            )
            .ok
        );
    }
}
