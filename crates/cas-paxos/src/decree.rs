//! Single-decree consensus by CAS: Velos's streamlined one-sided abortable consensus
//! (Algorithm 5), turned into consensus by retrying with randomized backoff, with value
//! indirection (§5.2) and decisions learned from local memory (§5.4).
//!
//! Every node is an acceptor (its memory is passive: it runs nothing for the protocol) and may be
//! a proposer. A proposer keeps a *predicted* state for every acceptor's slot word and moves it
//! with one CAS per acceptor per phase:
//!
//! 1. **prepare**: raise the proposal past every predicted `min_proposal`, then CAS each acceptor
//!    from its predicted state to `(proposal, accepted_proposal, value)`; a majority of answers
//!    with no failed CAS means promises from a majority. A failed CAS returns the actual state,
//!    which becomes the new prediction (and the attempt aborts).
//! 2. **adopt**: the highest accepted value among the promises wins; if another proposer wrote it,
//!    one RDMA read fetches it from the acceptor that holds it.
//! 3. **accept**: write the value into this proposer's own buffer at every acceptor, then CAS each
//!    from its prediction to `(proposal, proposal, this value)`. FIFO links mean a successful CAS
//!    implies the value landed there. A majority of successes decides.
//! 4. **learn**: the decider writes the decision word to every node after the value; each node
//!    learns by reading its own memory.
//!
//! An aborted attempt waits a random backoff (from the node's seeded generator, in transport
//! time) and retries: with a single proposer left running, it decides after at most one abort per
//! mispredicted acceptor. The node never blocks and never reads the wall clock.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use squall_transport::{
    Event, FailureCause, LocalSlice, NodeId, OpId, PostError, Region, RemoteAddr, Signal, Time,
    Transport,
};
use thiserror::Error;

use crate::layout::{DECISIONS, Layout, SLOTS, STAGING, VALUES};
use crate::rpc::{AcceptorState, Message, Reply, Request, RpcAcceptor, Step};
use crate::word::{MAX_PROPOSAL, MAX_PROPOSERS, SlotWord, ValueRef, lap_of};

/// Settings of a consensus node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Sizes (proposers = nodes).
    pub layout: Layout,
    /// Shortest backoff after an abort.
    pub backoff_min: Duration,
    /// Longest backoff after an abort.
    pub backoff_max: Duration,
    /// Seed of the node's backoff generator.
    pub seed: u64,
    /// How the decider tells the others (see [`Announce`]).
    pub announce: Announce,
    /// Proposal number at which an acceptor's slot word freezes and the two-sided fallback
    /// takes over for it ([`crate::rpc`], Velos §5.2): above the node count, at most
    /// [`MAX_PROPOSAL`]. Normally [`default_rpc_threshold`]; tests make it small.
    pub rpc_threshold: u32,
}

/// The paper's threshold: the largest a word holds, less the node count.
pub fn default_rpc_threshold(nodes: usize) -> u32 {
    MAX_PROPOSAL - nodes as u32
}

/// How a decider makes its decision known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Announce {
    /// Write the decision word to every node right away (single-decree use).
    Write,
    /// Only record it locally; the owner (the log) piggybacks it on a later accept (at most
    /// `scan` slots later, the distance learners look ahead for it) or writes it with
    /// [`Decree::write_decision`].
    Defer {
        /// How far ahead of a slot learners look for its piggybacked decision (at most
        /// [`MAX_BACK`]).
        scan: usize,
    },
}

/// A decision this node made, as the log needs it for piggybacking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decided {
    /// The deciding proposal.
    pub proposal: u32,
    /// Whether every acceptor took part through its slot word (none frozen): only then can a
    /// piggyback claim, which followers check against their own word, announce it.
    pub in_words: bool,
}

/// A setting that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Too many or too few proposers.
    #[error(
        "{0} nodes: CAS-Paxos needs between 1 and {MAX_PROPOSERS} (value references are 6 bits)"
    )]
    Proposers(usize),
    /// The backoff range is inverted or empty.
    #[error("backoff_min must be positive and at most backoff_max")]
    Backoff,
    /// The RPC threshold is out of range.
    #[error("rpc_threshold = {0} must exceed the node count and be at most {MAX_PROPOSAL}")]
    Threshold(u32),
    /// The transport lacks the layout's regions or peers.
    #[error("the transport does not match the layout: {0}")]
    Transport(String),
}

/// Why a proposal could not be made.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ProposeError {
    /// The value is larger than the layout's buffers.
    #[error("value of {len} bytes exceeds max_value_len = {max}")]
    TooLarge {
        /// Length.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// This node already proposed a value for the slot.
    #[error("this node already proposed for the slot")]
    AlreadyProposed,
    /// Proposal numbers ran out even for the two-sided fallback (32 bits).
    #[error("proposal numbers exhausted (32 bits, two-sided fallback included)")]
    Exhausted,
}

/// One CAS in flight.
#[derive(Clone, Copy, Debug)]
struct CasOp {
    acceptor: usize,
    expected: SlotWord,
    move_to: SlotWord,
    attempt: u64,
    step: Step,
    /// A CAS that only freezes the word at the threshold; the step goes over RPC after.
    freeze: bool,
}

#[derive(Clone, Copy, Debug)]
enum Pending {
    Cas(CasOp),
    Fetch { attempt: u64, origin: u8 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Waiting {
        attempt: u64,
        step: Step,
        ok: usize,
        failed: bool,
        answered: Vec<bool>,
        unreachable: usize,
    },
    Fetching {
        attempt: u64,
    },
    Backoff(Time),
    /// Promises from a majority, no accepted value to adopt, and no value of our own yet: the
    /// next [`Decree::propose`] goes straight to the accept phase (one CAS round trip).
    Prepared,
    Decided,
}

/// One node of single-decree CAS consensus.
pub struct Decree<T: Transport> {
    t: T,
    me: usize,
    nodes: usize,
    cfg: Config,
    /// The absolute slot.
    slot: u64,
    /// Its ring position.
    pos: usize,
    /// Its lap tag.
    lap: u8,
    predicted: Vec<SlotWord>,
    /// Piggyback field for the next accept (see [`SlotWord::back`]).
    back: u8,
    /// Every proposal this node ran an accept at, in this slot.
    accepts: Vec<u32>,
    /// The last state each frozen (two-sided) acceptor reported.
    rpc: Vec<Option<AcceptorState>>,
    /// This node's two-sided acceptor (shared by a node's instances).
    acceptor: Rc<RefCell<RpcAcceptor>>,
    /// RPC requests this instance sent.
    rpc_requests: u64,
    pending: BTreeMap<OpId, Pending>,
    proposal: u32,
    attempt: u64,
    phase: Phase,
    /// The value being proposed: origin and bytes.
    value: Option<(u8, Vec<u8>)>,
    own: bool,
    learned: Option<Vec<u8>>,
    /// This node decided (and so already told everyone).
    decided_here: bool,
    /// [`Decree::take_decision`] returned it.
    decision_taken: bool,
    /// This node relayed a decision it learned.
    relayed: bool,
    /// An acceptor's word for this position is already in a later lap: the slot is long gone.
    stale: bool,
    rng: u64,
    events: Vec<Event>,
}

impl<T: Transport> std::fmt::Debug for Decree<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decree")
            .field("me", &self.me)
            .field("phase", &self.phase)
            .field("proposal", &self.proposal)
            .field("predicted", &self.predicted)
            .field("rpc", &self.rpc)
            .finish_non_exhaustive()
    }
}

fn region<T: Transport>(t: &T, id: squall_transport::RegionId) -> Region {
    t.region(id)
        .cloned()
        .unwrap_or_else(|| unreachable!("regions are checked in Decree::new"))
}

impl<T: Transport> Decree<T> {
    /// A node for absolute slot `slot` (at ring position `slot mod layout.slots`). Node ids must
    /// be `0..nodes` (the node's index is its proposer index), and the transport must have
    /// registered `cfg.layout.regions()`.
    pub fn new(t: T, cfg: Config, slot: u64) -> Result<Decree<T>, ConfigError> {
        let nodes = t.peers().len() + 1;
        if nodes > MAX_PROPOSERS || cfg.layout.proposers != nodes {
            return Err(ConfigError::Proposers(nodes));
        }
        if cfg.backoff_min.is_zero() || cfg.backoff_min > cfg.backoff_max {
            return Err(ConfigError::Backoff);
        }
        if cfg.rpc_threshold as usize <= nodes || cfg.rpc_threshold > MAX_PROPOSAL {
            return Err(ConfigError::Threshold(cfg.rpc_threshold));
        }
        for spec in cfg.layout.regions() {
            if t.region(spec.id).is_none_or(|r| r.len() < spec.len) {
                return Err(ConfigError::Transport(format!(
                    "region {} is missing or short",
                    spec.id
                )));
            }
        }
        if cfg.layout.slots == 0 {
            return Err(ConfigError::Transport(
                "layout.slots must be positive".into(),
            ));
        }
        let me = t.local_id().index();
        let lap = lap_of(slot, cfg.layout.slots);
        let pos = cfg.layout.position(slot);
        // Predict every acceptor to be where this node's own acceptor is: after a leader change
        // that is the old leader's prepared (or accepted) state, so the new leader's first
        // prepare succeeds in one round (Velos §5.1). A wrong guess only costs a failed CAS.
        let local = t
            .region(SLOTS)
            .map(|r| SlotWord::unpack(r.load(pos)))
            .filter(|w| w.lap == lap && w.min_proposal < cfg.rpc_threshold)
            .unwrap_or(SlotWord::empty(lap));
        Ok(Decree {
            me,
            nodes,
            slot,
            pos,
            lap,
            predicted: vec![local; nodes],
            back: 0,
            accepts: Vec::new(),
            rpc: vec![None; nodes],
            acceptor: Rc::new(RefCell::new(RpcAcceptor::new(
                cfg.layout,
                cfg.rpc_threshold,
            ))),
            rpc_requests: 0,
            pending: BTreeMap::new(),
            proposal: 0,
            attempt: 0,
            phase: Phase::Idle,
            value: None,
            own: false,
            learned: None,
            decided_here: false,
            decision_taken: false,
            relayed: false,
            stale: false,
            rng: cfg.seed ^ 0x9e37_79b9_7f4a_7c15 ^ (me as u64) << 32,
            events: Vec::new(),
            cfg,
            t,
        })
    }

    /// Shares a node-wide two-sided acceptor (the log gives every slot instance the same one);
    /// by default an instance has its own.
    pub fn with_acceptor(mut self, acceptor: Rc<RefCell<RpcAcceptor>>) -> Decree<T> {
        self.acceptor = acceptor;
        self
    }

    /// This instance's two-sided acceptor.
    pub fn acceptor(&self) -> &Rc<RefCell<RpcAcceptor>> {
        &self.acceptor
    }

    /// RPC requests this instance sent (the fallback in use).
    pub fn rpc_requests(&self) -> u64 {
        self.rpc_requests
    }

    /// Handles a message for this slot from `from`: a request is served by this instance's
    /// acceptor and answered; a reply counts as that acceptor's answer. Malformed bytes and
    /// other slots' messages are ignored (returns whether it was used).
    pub fn on_message(&mut self, from: NodeId, bytes: &[u8]) -> bool {
        match Message::decode(bytes) {
            Ok(Message::Request(req)) if req.slot == self.slot => {
                let reply = {
                    let words = region(&self.t, SLOTS);
                    self.acceptor.borrow_mut().handle(&words, &req)
                };
                let r = self
                    .t
                    .send(from, &Message::Reply(reply).encode(), Signal::Unsignaled);
                self.note_post_error(r);
                true
            }
            Ok(Message::Reply(reply)) if reply.slot == self.slot => {
                self.on_reply(from.index(), reply);
                true
            }
            _ => false,
        }
    }

    /// The transport (for drivers and tests).
    pub fn transport(&mut self) -> &mut T {
        &mut self.t
    }

    /// The decided value, once this node has learned it.
    pub fn learned(&self) -> Option<&[u8]> {
        self.learned.as_deref()
    }

    /// The current proposal number (for tests and metrics).
    pub fn proposal(&self) -> u32 {
        self.proposal
    }

    /// Proposes `value`. Progress happens in [`poll`](Self::poll).
    pub fn propose(&mut self, value: &[u8]) -> Result<(), ProposeError> {
        let max = self.cfg.layout.max_value_len;
        if value.len() > max {
            return Err(ProposeError::TooLarge {
                len: value.len(),
                max,
            });
        }
        if self.own {
            return Err(ProposeError::AlreadyProposed);
        }
        self.own = true;
        self.stage(self.me as u8, value);
        if self.value.is_none() {
            self.value = Some((self.me as u8, value.to_vec()));
        }
        match self.phase {
            _ if self.learned.is_some() => {}
            Phase::Prepared => self.accept(),
            Phase::Idle => self.prepare()?,
            // Prepare or accept in flight, or backing off: the value is used when it gets there.
            _ => {}
        }
        Ok(())
    }

    /// Runs the prepare phase ahead of any value (a stable leader pre-prepares a window of slots,
    /// Velos §5.1). If an acceptor already accepted a value for the slot, it is adopted and
    /// driven to a decision; otherwise the slot waits [`prepared`](Self::prepared).
    pub fn prepare_only(&mut self) -> Result<(), ProposeError> {
        if self.phase == Phase::Idle && self.learned.is_none() {
            self.prepare()?;
        }
        Ok(())
    }

    /// Whether the slot is prepared with nothing to adopt, waiting for a value.
    pub fn prepared(&self) -> bool {
        self.phase == Phase::Prepared
    }

    /// Whether this node is driving a value for the slot (its own or an adopted one).
    pub fn has_value(&self) -> bool {
        self.value.is_some()
    }

    fn majority(&self) -> usize {
        self.nodes / 2 + 1
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: deterministic from the seed.
        let mut x = self.rng.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Writes `[slot + 1][len][bytes]` into this node's staging buffer for `(slot, origin)`.
    fn stage(&self, origin: u8, value: &[u8]) {
        let at = self
            .cfg
            .layout
            .staging_offset(self.pos, usize::from(origin));
        let staging = region(&self.t, STAGING);
        let _ = staging.write_bytes(at + 16, value);
        staging.store(at / 8 + 1, value.len() as u64);
        staging.store(at / 8, self.slot + 1);
    }

    fn prepare(&mut self) -> Result<(), ProposeError> {
        let n = self.nodes as u32;
        let floor = self
            .predicted
            .iter()
            .map(|p| p.min_proposal)
            .chain(self.rpc.iter().flatten().map(|s| s.min_proposal))
            .max()
            .unwrap_or(0);
        while self.proposal <= floor || self.proposal == 0 {
            let next = if self.proposal == 0 {
                Some(self.me as u32 + 1)
            } else {
                self.proposal.checked_add(n)
            };
            let Some(next) = next else {
                self.phase = Phase::Idle;
                return Err(ProposeError::Exhausted);
            };
            self.proposal = next;
        }
        let targets: Vec<SlotWord> = self
            .predicted
            .iter()
            .map(|p| SlotWord {
                min_proposal: self.proposal,
                ..*p
            })
            .collect();
        self.round(Step::Prepare, targets);
        Ok(())
    }

    fn accept(&mut self) {
        let Some((origin, _)) = self.value else {
            self.phase = Phase::Prepared;
            return;
        };
        let chosen = SlotWord {
            min_proposal: self.proposal,
            accepted_proposal: self.proposal,
            value: Some(ValueRef {
                writer: self.me as u8,
                origin,
            }),
            lap: self.lap,
            back: 0,
        };
        // Piggybacked decisions ride on the first accept only: a retry has another proposal,
        // which the claim names.
        let back = std::mem::take(&mut self.back);
        let targets = vec![SlotWord { back, ..chosen }; self.nodes];
        if self.accepts.last() != Some(&self.proposal) {
            self.accepts.push(self.proposal);
        }
        // The value goes to this node's own buffers everywhere first (FIFO before the CAS).
        let layout = self.cfg.layout;
        let src = LocalSlice::new(
            STAGING,
            layout.staging_offset(self.pos, usize::from(origin)),
            layout.buffer_len(),
        );
        let dst = layout.buffer_offset(self.me, self.pos, usize::from(origin));
        let _ =
            region(&self.t, VALUES).copy_from(dst, &region(&self.t, STAGING), src.offset, src.len);
        for peer in self.t.peers().to_vec() {
            let r = self
                .t
                .write(peer, src, RemoteAddr::new(VALUES, dst), Signal::Unsignaled);
            self.note_post_error(r);
        }
        self.round(Step::Accept, targets);
    }

    fn note_post_error(&self, r: Result<OpId, PostError>) {
        if let Err(e) = r {
            tracing::warn!(me = self.me, error = %e, "cas-paxos: post refused");
        }
    }

    /// Posts one CAS per acceptor from its prediction to `targets[p]`.
    fn round(&mut self, step: Step, targets: Vec<SlotWord>) {
        self.attempt += 1;
        let attempt = self.attempt;
        self.phase = Phase::Waiting {
            attempt,
            step,
            ok: 0,
            failed: false,
            answered: vec![false; self.nodes],
            unreachable: 0,
        };
        let word = RemoteAddr::new(SLOTS, self.pos * 8);
        let threshold = self.cfg.rpc_threshold;
        for (acceptor, move_to) in targets.into_iter().enumerate() {
            let expected = self.predicted[acceptor];
            if expected.min_proposal >= threshold {
                self.send_rpc(acceptor, step, attempt);
                continue;
            }
            // A proposal the word cannot take: freeze the word at the threshold (a promise below
            // this proposal) and go on over RPC.
            let freeze = self.proposal >= threshold;
            let move_to = if freeze {
                SlotWord {
                    min_proposal: threshold,
                    ..expected
                }
            } else {
                move_to
            };
            let op = CasOp {
                acceptor,
                expected,
                move_to,
                attempt,
                step,
                freeze,
            };
            if acceptor == self.me {
                let old = match region(&self.t, SLOTS).compare_and_swap(
                    self.pos,
                    expected.pack(),
                    move_to.pack(),
                ) {
                    Ok(v) | Err(v) => v,
                };
                self.on_cas(op, Some(old));
                continue;
            }
            match self.t.compare_and_swap(
                NodeId(acceptor as u32),
                word,
                expected.pack(),
                move_to.pack(),
            ) {
                Ok(id) => {
                    self.pending.insert(id, Pending::Cas(op));
                }
                Err(e) => {
                    tracing::warn!(me = self.me, acceptor, error = %e, "cas-paxos: CAS refused")
                }
            }
        }
    }

    /// Sends `step` at the current proposal to a frozen acceptor (or runs it locally).
    fn send_rpc(&mut self, acceptor: usize, step: Step, attempt: u64) {
        let value = match (step, &self.value) {
            (Step::Accept, Some((origin, _))) => Some(ValueRef {
                writer: self.me as u8,
                origin: *origin,
            }),
            _ => None,
        };
        let req = Request {
            step,
            slot: self.slot,
            attempt,
            proposal: self.proposal,
            value,
        };
        self.rpc_requests += 1;
        if acceptor == self.me {
            let reply = {
                let words = region(&self.t, SLOTS);
                self.acceptor.borrow_mut().handle(&words, &req)
            };
            self.on_reply(acceptor, reply);
            return;
        }
        let r = self.t.send(
            NodeId(acceptor as u32),
            &Message::Request(req).encode(),
            Signal::Unsignaled,
        );
        self.note_post_error(r);
    }

    /// A frozen acceptor's answer.
    fn on_reply(&mut self, acceptor: usize, reply: Reply) {
        if acceptor >= self.nodes || reply.proposal != self.proposal {
            return;
        }
        if reply.state.min_proposal == u32::MAX && !reply.ok {
            // The acceptor's position is in a later lap: this slot is long gone.
            self.stale = true;
            return;
        }
        self.rpc[acceptor] = Some(reply.state);
        self.on_answer(acceptor, reply.attempt, reply.step, reply.ok);
    }

    /// Handles one CAS answer (`None`: the acceptor is unreachable).
    fn on_cas(&mut self, op: CasOp, old: Option<u64>) {
        let CasOp {
            acceptor,
            expected,
            move_to,
            attempt,
            step,
            freeze,
        } = op;
        if let Some(old) = old {
            let actual = SlotWord::unpack(old);
            let frozen = actual.lap == self.lap && actual.min_proposal >= self.cfg.rpc_threshold;
            if old == expected.pack() && freeze || frozen {
                // The word is frozen (by us or another): this acceptor answers over RPC now.
                self.predicted[acceptor] = if frozen { actual } else { move_to };
                if self.phase_waiting_for(attempt, step) {
                    self.send_rpc(acceptor, step, attempt);
                }
                return;
            }
        }
        // Another lap's state: the acceptor has not reset the position for this lap yet (or this
        // slot is long gone there). It cannot take part in this round: keep predicting the empty
        // state and count it as unreachable, not as a refusal that would abort the round.
        let old = old.filter(|&w| {
            let actual = SlotWord::unpack(w);
            if actual.lap != self.lap {
                self.predicted[acceptor] = SlotWord::empty(self.lap);
                self.stale |= actual.lap.wrapping_sub(self.lap) < 128;
            }
            actual.lap == self.lap
        });
        let success = match old {
            Some(old) if old == expected.pack() => {
                self.predicted[acceptor] = move_to;
                true
            }
            Some(old) => {
                self.predicted[acceptor] = SlotWord::unpack(old);
                false
            }
            None => {
                // Unreachable: if too few acceptors remain to form a majority, retry later.
                let (nodes, majority) = (self.nodes, self.majority());
                if let Phase::Waiting {
                    attempt: current,
                    unreachable,
                    ..
                } = &mut self.phase
                {
                    if *current == attempt {
                        *unreachable += 1;
                        if nodes - *unreachable < majority {
                            self.abort();
                        }
                    }
                }
                return;
            }
        };
        self.on_answer(acceptor, attempt, step, success);
    }

    fn phase_waiting_for(&self, attempt: u64, step: Step) -> bool {
        matches!(self.phase, Phase::Waiting { attempt: a, step: s, .. } if a == attempt && s == step)
    }

    /// Counts one acceptor's answer to the current round.
    fn on_answer(&mut self, acceptor: usize, attempt: u64, step: Step, success: bool) {
        let majority = self.majority();
        let Phase::Waiting {
            attempt: current,
            step: s,
            ok,
            failed,
            answered,
            ..
        } = &mut self.phase
        else {
            return;
        };
        if *current != attempt || *s != step || answered[acceptor] {
            return;
        }
        answered[acceptor] = true;
        if success {
            *ok += 1;
        } else {
            *failed = true;
        }
        let answers = answered.iter().filter(|a| **a).count();
        if answers < majority {
            return;
        }
        // A majority answered: everyone still in flight is optimistically predicted to succeed
        // (Algorithm 5, lines 28-29); its answer corrects the prediction when it arrives.
        let failed = *failed;
        for p in self.pending.values() {
            if let Pending::Cas(op) = *p {
                if op.attempt == attempt && !op.freeze && !self.phase_answered(op.acceptor) {
                    self.predicted[op.acceptor] = op.move_to;
                }
            }
        }
        if failed {
            self.abort();
            return;
        }
        match step {
            Step::Prepare => self.adopt(),
            Step::Accept => self.decide(),
        }
    }

    fn phase_answered(&self, acceptor: usize) -> bool {
        matches!(&self.phase, Phase::Waiting { answered, .. } if answered[acceptor])
    }

    /// After promises from a majority: adopt the highest accepted value, if any.
    fn adopt(&mut self) {
        let threshold = self.cfg.rpc_threshold;
        let best = (0..self.nodes)
            .filter_map(|a| {
                let w = self.predicted[a];
                if w.min_proposal >= threshold {
                    let s = self.rpc[a]?;
                    (s.min_proposal == self.proposal).then_some((s.accepted_proposal, a, s.value?))
                } else {
                    (w.min_proposal == self.proposal).then_some((w.accepted_proposal, a, w.value?))
                }
            })
            .max_by_key(|(ap, ..)| *ap);
        match best {
            None => self.accept(),
            Some((_, _, v)) if usize::from(v.writer) == self.me => {
                // Our own buffer: staged locally already.
                let staged = self.read_staged(v.origin);
                self.value = staged.map(|b| (v.origin, b));
                self.accept();
            }
            Some((_, acceptor, v)) => {
                let layout = self.cfg.layout;
                let at =
                    layout.buffer_offset(usize::from(v.writer), self.pos, usize::from(v.origin));
                if acceptor == self.me {
                    let mut buf = vec![0u8; layout.buffer_len()];
                    let _ = region(&self.t, VALUES).read_bytes(at, &mut buf);
                    self.fetched(v.origin, &buf);
                    return;
                }
                let dst = LocalSlice::new(STAGING, layout.landing_offset(), layout.buffer_len());
                match self
                    .t
                    .read(NodeId(acceptor as u32), RemoteAddr::new(VALUES, at), dst)
                {
                    Ok(op) => {
                        self.pending.insert(
                            op,
                            Pending::Fetch {
                                attempt: self.attempt,
                                origin: v.origin,
                            },
                        );
                        self.phase = Phase::Fetching {
                            attempt: self.attempt,
                        };
                    }
                    Err(_) => self.abort(),
                }
            }
        }
    }

    fn read_staged(&self, origin: u8) -> Option<Vec<u8>> {
        let at = self
            .cfg
            .layout
            .staging_offset(self.pos, usize::from(origin));
        let mut buf = vec![0u8; self.cfg.layout.buffer_len()];
        region(&self.t, STAGING).read_bytes(at, &mut buf).ok()?;
        self.parse(&buf)
    }

    /// Parses a buffer; `None` if it is not this slot's.
    fn parse(&self, buf: &[u8]) -> Option<Vec<u8>> {
        parse_buffer(buf, self.slot, self.cfg.layout.max_value_len)
    }

    fn fetched(&mut self, origin: u8, buf: &[u8]) {
        match self.parse(buf) {
            Some(value) => {
                self.stage(origin, &value);
                self.value = Some((origin, value));
                self.accept();
            }
            None => {
                tracing::warn!(
                    me = self.me,
                    "cas-paxos: an accepted value's buffer did not hold this slot"
                );
                self.abort();
            }
        }
    }

    fn decide(&mut self) {
        let Some((origin, value)) = self.value.clone() else {
            return;
        };
        let decision = SlotWord {
            min_proposal: 0,
            accepted_proposal: self.proposal,
            value: Some(ValueRef {
                writer: self.me as u8,
                origin,
            }),
            lap: self.lap,
            back: 0,
        };
        region(&self.t, DECISIONS).store(self.pos, decision.pack());
        if self.cfg.announce == Announce::Write {
            let all = vec![true; self.nodes];
            self.write_decision(&all);
        }
        tracing::debug!(me = self.me, proposal = self.proposal, "cas-paxos: decided");
        self.learned = Some(value);
        self.decided_here = true;
        self.phase = Phase::Decided;
    }

    fn abort(&mut self) {
        let span = self
            .cfg
            .backoff_max
            .saturating_sub(self.cfg.backoff_min)
            .as_nanos() as u64;
        let wait = self.cfg.backoff_min + Duration::from_nanos(self.next_random() % span.max(1));
        self.phase = Phase::Backoff(self.t.now() + wait);
    }

    /// This node's decision, once, if it made one (for the log's piggybacking).
    pub fn take_decision(&mut self) -> Option<Decided> {
        if !self.decided_here || self.decision_taken {
            return None;
        }
        self.decision_taken = true;
        Some(Decided {
            proposal: self.proposal,
            in_words: self.words_only(),
        })
    }

    /// Sets the piggyback field of the next accept: `back = k` tells every acceptor that each
    /// slot below `slot - k` in which this node ran an accept at the proposal the accept carries
    /// (the caller checks it is [`proposal`](Self::proposal)) was chosen with that accept's
    /// value. Used by the first accept only.
    pub fn piggyback(&mut self, back: u8) {
        self.back = back;
    }

    /// Whether the current proposal goes through every acceptor's slot word (no frozen word,
    /// proposal below the threshold): a piggyback set now reaches every acceptor.
    pub fn words_only(&self) -> bool {
        let t = self.cfg.rpc_threshold;
        self.proposal < t && self.predicted.iter().all(|p| p.min_proposal < t)
    }

    /// Starts over with a fresh prepare if the instance is idle, prepared with nothing to adopt,
    /// or backing off: a node stuck on a slot others decided uses this to adopt the decision.
    pub fn retry(&mut self) {
        if self.learned.is_none()
            && matches!(
                self.phase,
                Phase::Idle | Phase::Prepared | Phase::Backoff(_)
            )
            && self.prepare().is_err()
        {
            tracing::error!(me = self.me, "cas-paxos: proposal numbers exhausted");
        }
    }

    /// Whether the instance has nothing in flight and is not backing off.
    pub fn idle(&self) -> bool {
        matches!(self.phase, Phase::Idle | Phase::Prepared)
    }

    /// Proposals at which this node ran an accept in this slot that were not how it decided:
    /// their values may not be the chosen one.
    pub fn undecided_accepts(&self) -> impl Iterator<Item = u32> + '_ {
        let decided = self.decided_here.then_some(self.proposal);
        self.accepts
            .iter()
            .copied()
            .filter(move |p| Some(*p) != decided)
    }

    /// Writes this node's decision word to the peers marked in `to` (after the value, which FIFO
    /// already put there before the accept).
    pub fn write_decision(&mut self, to: &[bool]) {
        let src = LocalSlice::new(DECISIONS, self.pos * 8, 8);
        for peer in self.t.peers().to_vec() {
            if !to.get(peer.index()).copied().unwrap_or(false) {
                continue;
            }
            let r = self.t.write(
                peer,
                src,
                RemoteAddr::new(DECISIONS, self.pos * 8),
                Signal::Unsignaled,
            );
            self.note_post_error(r);
        }
    }

    /// Whether an acceptor's word showed a later lap: this slot's state is gone everywhere that
    /// matters, and the node fell more than a ring behind.
    pub fn stale(&self) -> bool {
        self.stale
    }

    /// Learns a decision from local memory.
    fn learn(&mut self) {
        if self.learned.is_some() {
            return;
        }
        let scan = match self.cfg.announce {
            Announce::Write => 0,
            Announce::Defer { scan } => scan,
        };
        if let Some((value, _)) = learn_local(&self.t, &self.cfg.layout, self.slot, scan) {
            self.learned = Some(value);
            self.phase = Phase::Decided;
        }
    }

    /// Relays a decision this node did not make, once, if it has a proposal of its own in play:
    /// the decider may have crashed before its decision reached everyone, and a node that is not
    /// proposing has no other way to learn. The value buffer goes first, then (FIFO) the word.
    fn relay(&mut self) {
        if self.relayed || !self.own || self.decided_here {
            return;
        }
        let word = SlotWord::unpack(region(&self.t, DECISIONS).load(self.pos));
        let (Some(v), true) = (word.value, word.lap == self.lap) else {
            return;
        };
        self.relayed = true;
        let layout = self.cfg.layout;
        let at = layout.buffer_offset(usize::from(v.writer), self.pos, usize::from(v.origin));
        let src = LocalSlice::new(VALUES, at, layout.buffer_len());
        let decision = LocalSlice::new(DECISIONS, self.pos * 8, 8);
        for peer in self.t.peers().to_vec() {
            let r = self
                .t
                .write(peer, src, RemoteAddr::new(VALUES, at), Signal::Unsignaled);
            self.note_post_error(r);
            let r = self.t.write(
                peer,
                decision,
                RemoteAddr::new(DECISIONS, self.pos * 8),
                Signal::Unsignaled,
            );
            self.note_post_error(r);
        }
    }

    /// Does whatever is ready: completions, learning, retries after backoff. Never blocks.
    /// Returns whether anything changed.
    pub fn poll(&mut self) -> bool {
        let before = (self.phase.clone(), self.learned.is_some());
        let mut buf = [Event::PeerFailed {
            peer: NodeId(u32::MAX),
            cause: FailureCause::Local,
        }; 32];
        loop {
            let n = self.t.poll(&mut buf);
            self.events.extend_from_slice(&buf[..n]);
            if n < buf.len() {
                break;
            }
        }
        for e in std::mem::take(&mut self.events) {
            let Event::Completion(c) = e else { continue };
            match self.pending.remove(&c.op) {
                Some(Pending::Cas(op)) => self.on_cas(op, c.result.ok()),
                Some(Pending::Fetch { attempt, origin })
                    if self.phase == (Phase::Fetching { attempt }) =>
                {
                    match c.result {
                        Ok(_) => {
                            let layout = self.cfg.layout;
                            let mut b = vec![0u8; layout.buffer_len()];
                            let _ = region(&self.t, STAGING)
                                .read_bytes(layout.landing_offset(), &mut b);
                            self.fetched(origin, &b);
                        }
                        Err(_) => self.abort(),
                    }
                }
                Some(Pending::Fetch { .. }) | None => {}
            }
        }
        self.learn();
        if self.learned.is_some() {
            self.relay();
        }
        if let Phase::Backoff(until) = self.phase {
            if self.t.now() >= until && self.learned.is_none() && self.prepare().is_err() {
                tracing::error!(me = self.me, "cas-paxos: proposal numbers exhausted");
            }
        }
        // A stalled attempt (its majority unreachable) is retried after a backoff.
        (self.phase.clone(), self.learned.is_some()) != before
    }

    /// Whether this node is waiting for answers from acceptors.
    pub fn waiting(&self) -> bool {
        matches!(self.phase, Phase::Waiting { .. } | Phase::Fetching { .. })
    }

    /// Gives up on the current attempt (e.g. a driver's timeout for an unreachable majority) and
    /// retries after a backoff.
    pub fn restart_attempt(&mut self) {
        if self.waiting() {
            self.abort();
        }
    }
}

/// Parses a value buffer `[slot + 1][len][bytes]`; `None` if it holds another slot's value (an
/// older lap's) or is malformed.
pub(crate) fn parse_buffer(buf: &[u8], slot: u64, max_len: usize) -> Option<Vec<u8>> {
    let word = |i: usize| {
        buf.get(i * 8..i * 8 + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    let (tag, len) = (word(0)?, usize::try_from(word(1)?).ok()?);
    if tag != slot.wrapping_add(1) || len > max_len {
        return None;
    }
    buf.get(16..16 + len).map(<[u8]>::to_vec)
}

/// Largest distance a piggybacked decision can point back.
pub const MAX_BACK: usize = u8::MAX as usize;

/// Learns absolute `slot`'s decision from this node's own memory, without any communication:
/// from its decision word, or from a piggyback on a later slot's word (Velos §5.4) — some word
/// `s = slot + k` (`k <= scan`, in its own lap) with `s - back > slot`, whose writer and accepted
/// proposal match this node's own word for `slot`. The writer claims with `back` that every slot
/// below `s - back` in which it ran an accept at that proposal was chosen with that accept's
/// value; a proposer uses one value per proposal, so the local word then holds the decided
/// value. Returns the value and whether it came through a piggyback (then
/// the decision word is recorded locally, so it can be relayed).
pub(crate) fn learn_local<T: Transport>(
    t: &T,
    layout: &Layout,
    slot: u64,
    scan: usize,
) -> Option<(Vec<u8>, bool)> {
    let ring = layout.slots;
    let pos = layout.position(slot);
    let lap = lap_of(slot, ring);
    let decisions = t.region(DECISIONS)?;
    let read_value = |v: ValueRef| {
        let at = layout.buffer_offset(usize::from(v.writer), pos, usize::from(v.origin));
        let mut buf = vec![0u8; layout.buffer_len()];
        t.region(VALUES)?.read_bytes(at, &mut buf).ok()?;
        parse_buffer(&buf, slot, layout.max_value_len)
    };
    let d = SlotWord::unpack(decisions.load(pos));
    if let (Some(v), true) = (d.value, d.lap == lap) {
        if let Some(value) = read_value(v) {
            return Some((value, false));
        }
    }
    let slots = t.region(SLOTS)?;
    let mine = SlotWord::unpack(slots.load(pos));
    let v = mine.value.filter(|_| mine.lap == lap)?;
    let found = (1..=scan.min(MAX_BACK).min(ring - 1)).any(|k| {
        let s = slot + k as u64;
        let w = SlotWord::unpack(slots.load(layout.position(s)));
        w.back != 0
            && usize::from(w.back) < k
            && w.lap == lap_of(s, ring)
            && w.accepted_proposal == mine.accepted_proposal
            && w.value.map(|x| x.writer) == Some(v.writer)
    });
    if !found {
        return None;
    }
    let value = read_value(v)?;
    let decision = SlotWord {
        min_proposal: 0,
        back: 0,
        ..mine
    };
    decisions.store(pos, decision.pack());
    Some((value, true))
}

/// Whether a later slot's word (within `scan`, in its own lap) claims that `slot` is decided —
/// whatever this node's own word for `slot` holds. FIFO puts the claim after that word's accept,
/// so a node that sees the claim but cannot learn from its word knows its word missed the value.
pub(crate) fn claimed_past<T: Transport>(t: &T, layout: &Layout, slot: u64, scan: usize) -> bool {
    let ring = layout.slots;
    let Some(slots) = t.region(SLOTS) else {
        return false;
    };
    (1..=scan.min(MAX_BACK).min(ring - 1)).any(|k| {
        let s = slot + k as u64;
        let w = SlotWord::unpack(slots.load(layout.position(s)));
        w.back != 0 && usize::from(w.back) < k && w.lap == lap_of(s, ring)
    })
}
