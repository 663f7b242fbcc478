//! The hash-chain model application's driver, shared by the suites that restart `Group`s with
//! durable state (`sim_checkpoint.rs`, `sim_transfer_restart.rs`, `power_loss.rs`): one
//! [`Nodes::step`] polls every running member, applies its `View`/`Deliver` upcalls to its
//! [`App`] (a restored state replaces it; deliveries must be gapless from it), takes the
//! outcome of its checkpoint, provides state when it is wanted and starts a checkpoint when
//! one is due.
//! What a suite checks or records on the way are its [`Hooks`].
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::Durable;
use squall_membership::snapshot::{CheckpointError, CheckpointWriter, Checkpointed};
use squall_ordering::{Delivery, TotalOrder, Upcall, View};
use squall_transport_mem::sim::{Sim, SimNode};

use crate::group_sim::{self, mix};

/// The checkpointing suites' group ([`group_sim::config`]): transfer chunks of 64 bytes in a
/// window of 4, skim marks every 64 bytes (a replay starts the snapshot's view's log near its
/// position) and the simulator's deterministic checkpoint writer (the file is written inside
/// `checkpoint`, the record appended by the next poll; the thread's is
/// `checkpoint_writer.rs`'s).
pub fn checkpoint_config(universe: usize, initial: usize) -> GroupConfig {
    let mut cfg = group_sim::config(universe, initial);
    cfg.transfer.chunk_size = 64;
    cfg.transfer.window = 4;
    cfg.replay_buffer = 64;
    cfg.checkpoint_writer = CheckpointWriter::Inline;
    cfg
}

/// One node's model application: the chain value after every delivery applied so far.
#[derive(Clone, Debug, Default)]
pub struct App {
    pub hash: u64,
    /// The next position to apply.
    pub next: u64,
    pub has_state: bool,
    /// The position of its latest checkpoint (or restored state).
    pub checkpointed: u64,
}

impl App {
    /// Its state as handed to the group: `[hash][next]`.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = self.hash.to_le_bytes().to_vec();
        b.extend_from_slice(&self.next.to_le_bytes());
        b
    }
}

/// Across lives: per position, the payload and the chain value after it.
pub type Chain = BTreeMap<u64, (Vec<u8>, u64)>;

/// A state restored at `position` with chain value `hash` must be the chain's value at the
/// position before.
pub fn check_restored(chain: &Chain, i: usize, position: u64, hash: u64) -> Result<(), String> {
    if let Some(p) = position.checked_sub(1) {
        let there = chain.get(&p).map(|c| c.1);
        if there != Some(hash) {
            return Err(format!(
                "n{i}: restored state at {position} is not the chain there ({there:?} vs {hash})"
            ));
        }
    }
    Ok(())
}

/// A delivery applied with chain value `hash` after it must hold the payload and value every
/// other member had there (recorded by the first to get there).
pub fn check_delivered(chain: &mut Chain, i: usize, d: &Delivery, hash: u64) -> Result<(), String> {
    match chain.get(&d.position) {
        Some((p, h)) if *p == d.payload && *h == hash => Ok(()),
        Some(_) => Err(format!(
            "n{i}: position {} holds a different message or chain value than elsewhere",
            d.position
        )),
        None => {
            chain.insert(d.position, (d.payload.clone(), hash));
            Ok(())
        }
    }
}

/// What a poll said of a node's checkpoint (`Group::take_checkpoint_outcome`).
pub type Outcome = Option<Result<Checkpointed, CheckpointError>>;

/// What `Group::checkpoint` answered.
pub type Started = Result<Checkpointed, CheckpointError>;

/// A hook's verdict: `Err` says what is wrong.
pub type Checked = Result<(), String>;

/// What a suite does at the points where the suites differ; every method defaults to doing
/// nothing (and allowing everything).
pub trait Hooks<L: Durable> {
    /// The outcome of node `i`'s checkpoint the poll reported (`app.checkpointed` is already
    /// the position of a `Written` one), checked right after the poll; `in_flight`: the
    /// position of a checkpoint still in flight after it.
    fn checkpoint_ended(&mut self, _i: usize, _out: Outcome, _in_flight: Option<u64>) -> Checked {
        Ok(())
    }

    /// A `View` upcall at node `i`, before the state it may come with is taken.
    fn view(&mut self, _i: usize, _v: &View) {}

    /// A state node `i` restored (transfer or snapshot) at `position`, chain value `hash`,
    /// before it replaces the application.
    fn restored(&mut self, _i: usize, _position: u64, _hash: u64) -> Result<(), String> {
        Ok(())
    }

    /// A `View` upcall at node `i`, after its state (if any) replaced the application.
    fn viewed(&mut self, _i: usize, _v: &View, _app: &App) {}

    /// A delivery node `i` applied (gapless: checked), `hash` the chain value after it.
    fn delivered(&mut self, _i: usize, _d: &Delivery, _hash: u64) -> Result<(), String> {
        Ok(())
    }

    /// An `Upcall::Durable` at node `i`.
    fn durable(&mut self, _i: usize, _position: u64) {}

    /// After node `i`'s upcalls, with every node's group: whether it provides state if one
    /// is wanted (its application has one).
    fn serves(&mut self, _i: usize, _groups: &[Option<Group<SimNode, L>>]) -> Result<bool, String> {
        Ok(true)
    }

    /// Whether node `i` starts a checkpoint of `app` now (it has a state).
    fn checkpoint_due(&self, _i: usize, _app: &App, _g: &Group<SimNode, L>) -> bool {
        false
    }

    /// What `Group::checkpoint` answered node `i` for a checkpoint at `at`.
    fn checkpoint_started(&mut self, _i: usize, _at: u64, _r: Started) -> Checked {
        Ok(())
    }
}

/// The nodes [`Nodes::step`] drives, with their applications.
pub struct Nodes<L: Durable> {
    pub sim: Sim,
    /// Per node: its group, `None` while it is down.
    pub groups: Vec<Option<Group<SimNode, L>>>,
    pub apps: Vec<App>,
    /// Per node: the positions of the states it restored (transfer or snapshot).
    pub restored: Vec<Vec<u64>>,
    /// Payloads taken so far.
    pub counter: u32,
    /// What every payload starts with (then the sender's index and the counter).
    pub tag: Vec<u8>,
}

impl<L: Durable> Nodes<L> {
    /// `groups` and `apps` per node, nothing restored or submitted yet.
    pub fn new(
        sim: Sim,
        groups: Vec<Option<Group<SimNode, L>>>,
        apps: Vec<App>,
        tag: Vec<u8>,
    ) -> Self {
        let restored = vec![Vec::new(); groups.len()];
        Nodes {
            sim,
            groups,
            apps,
            restored,
            counter: 0,
            tag,
        }
    }

    /// One step of every running node in index order — if `submit`, with odds 1/3 a payload
    /// (`tag`, its index, `counter`; 1 in 4 padded to 60 bytes: a large message); poll;
    /// checkpoint outcome; upcalls; state provision; checkpoint start — then 2 µs of
    /// simulated time.
    pub fn step<H: Hooks<L>>(&mut self, submit: bool, hooks: &mut H) -> Result<(), String> {
        let Nodes {
            sim,
            groups,
            apps,
            restored,
            counter,
            tag,
        } = self;
        for i in 0..groups.len() {
            let Some(g) = &mut groups[i] else {
                continue;
            };
            if submit && sim.random(3) == 0 {
                let mut p = tag.clone();
                p.push(i as u8);
                p.extend_from_slice(&counter.to_le_bytes());
                if sim.random(4) == 0 {
                    p.resize(60, 7);
                }
                if group_sim::submit_during_restart(g, i, &p)? {
                    *counter += 1;
                }
            }
            let mut up = Vec::new();
            g.poll(&mut up);
            let app = &mut apps[i];
            let outcome = g.take_checkpoint_outcome();
            if let Some(Ok(Checkpointed::Written { position, .. })) = &outcome {
                app.checkpointed = *position;
            }
            hooks.checkpoint_ended(i, outcome, g.checkpoint_in_flight())?;
            for u in up {
                match u {
                    Upcall::View(v) => {
                        hooks.view(i, &v);
                        if let Some(s) = g.take_state() {
                            let hash = u64::from_le_bytes(s.state[..8].try_into().unwrap());
                            let at = u64::from_le_bytes(s.state[8..16].try_into().unwrap());
                            if at != s.position {
                                return Err(format!(
                                    "n{i}: state at {at} handed out for position {}",
                                    s.position
                                ));
                            }
                            hooks.restored(i, s.position, hash)?;
                            *app = App {
                                hash,
                                next: s.position,
                                has_state: true,
                                checkpointed: s.position,
                            };
                            restored[i].push(s.position);
                        }
                        hooks.viewed(i, &v, app);
                    }
                    Upcall::Deliver(d) => {
                        if !app.has_state || d.position != app.next {
                            return Err(format!(
                                "n{i}: delivered position {} when it expected {} (state: {})",
                                d.position, app.next, app.has_state
                            ));
                        }
                        app.hash = mix(app.hash, &d.payload);
                        app.next += 1;
                        hooks.delivered(i, &d, app.hash)?;
                    }
                    Upcall::Durable(p) => hooks.durable(i, p),
                    _ => {}
                }
            }
            let serves = hooks.serves(i, groups)?;
            let Some(g) = &mut groups[i] else {
                continue;
            };
            let app = &apps[i];
            if serves && g.state_wanted() && app.has_state {
                let _ = g.provide_state(app.next, &app.encode());
            }
            if app.has_state && hooks.checkpoint_due(i, app, g) {
                let r = g.checkpoint(app.next, app.encode());
                hooks.checkpoint_started(i, app.next, r)?;
            }
        }
        sim.advance(Duration::from_micros(2));
        Ok(())
    }
}
