//! Virtual-synchrony membership for Squall (issue 6), after Derecho (TOCS 2019 §2.2–2.4, §3.5,
//! appendices B and C): numbered [`View`](view::View)s, a sans-IO membership core ([`Gms`]) over its own SST
//! region, the ragged [`trim`], and a durable view/trim [`log`].
//!
//! The core never blocks, sleeps or spawns: a driver calls [`Gms::poll`] in a loop with the
//! current multicast [`Epoch`] and acts on the [`GmsEvent`]s (wedge the epoch, deliver up to the
//! trim, start the next epoch). [`group::Group`] is that driver over `squall-round-robin` epochs,
//! as a `squall_ordering::TotalOrder` endpoint; the core's own tests drive it with a model epoch
//! in the deterministic simulator.
//!
//! Protocol in one paragraph: the leader is the lowest-ranked member a node does not suspect. A
//! suspicion (gossiped and ORed through the table), a join request or a leave request makes the
//! leader propose changes; every member wedges (publishing its received counts) and copies the
//! leader's proposal, which is its acknowledgement. When every unsuspected member acknowledged
//! and they are a majority, the leader decides: it adopts the highest-ranked decision it can see
//! for the view, or computes the trim itself, logs the decision and publishes it tagged with its
//! rank; members log and echo it; a member installs the next view once every member it does not
//! suspect echoed the same decision and they are a majority. A member that sees less than a
//! majority stops ([`StopReason::Minority`]).
//!
//! ```
//! use squall_membership::{Epoch, Gms, GmsConfig, GmsEvent, log::MemLog, view::View};
//! use squall_transport::{NodeId, RegionId};
//! use squall_transport_mem::sim::{Sim, SimConfig};
//! use std::time::Duration;
//!
//! struct Idle;
//! impl Epoch for Idle {
//!     fn wedge(&mut self, view: &View) -> Vec<u64> { vec![0; view.members.len()] }
//! }
//! let ids: Vec<NodeId> = (0..3).map(NodeId).collect();
//! let mut cfg = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
//! cfg.heartbeat_interval = Duration::from_micros(50);
//! cfg.suspicion_timeout = Duration::from_micros(1500);
//! let layout = [Gms::<squall_transport_mem::sim::SimNode, MemLog>::layout(&cfg)?];
//! let (sim, nodes) = Sim::cluster(SimConfig::seeded(1), 3, &layout).unwrap();
//! let mut gms: Vec<_> = nodes
//!     .into_iter()
//!     .map(|t| Gms::new(t, cfg.clone(), MemLog::default(), None))
//!     .collect::<Result<_, _>>()?;
//! sim.crash(NodeId(2));
//! let mut events = Vec::new();
//! for _ in 0..2000 {
//!     for g in &mut gms[..2] {
//!         g.poll(&mut Idle, &mut events)?;
//!     }
//!     sim.advance(Duration::from_micros(2));
//! }
//! assert!(events.iter().any(|e| matches!(e, GmsEvent::ViewInstalled { view, .. } if view.id == 1)));
//! assert_eq!(gms[0].view().unwrap().members, vec![NodeId(0), NodeId(1)]);
//! # Ok::<(), squall_membership::GmsError>(())
//! ```

pub mod block;
pub mod change;
mod config;
mod gms;
pub mod group;
pub mod log;
pub mod restart;
pub mod settings;
pub mod snapshot;
pub mod transfer;
pub mod trim;
pub mod view;

pub use config::{ConfigError, DEFAULT_EXPECTED_LINK_FACTOR, GmsConfig};
pub use gms::{Epoch, Gms, GmsError, GmsEvent, LeaveStatus, StopReason};
