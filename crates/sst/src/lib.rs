//! The Shared State Table (SST) of Squall, after Derecho (TOCS 2019, §3.2–3.5, §3.7).
//!
//! A table has one row per member in one registered region; every member keeps a full copy and
//! writes only its own row, which it [`push`](Sst::push)es — a field range, one transport write
//! per peer — to the others. On top:
//!
//! - a typed, validated [`schema`] (counters, flags, fixed vectors, byte slots; 8-byte aligned);
//! - [`predicate`]s — one-time, recurrent, transition — whose triggers may insert and remove
//!   predicates and never block; reducers (min, max, sum, count, min over unsuspected rows) and
//!   knowledge helpers ([`Sst::all_reached`]);
//! - the [`Driver`] loop: poll, spin briefly, then park on the transport, no fixed sleeps;
//! - [`failure`] handling: heartbeat column plus signaled writes, freeze on suspicion,
//!   epidemic propagation, partition safety on by default, no retaliation by a suspect and a
//!   rank tie-break (one cut link costs one member);
//! - [`smc`], the small-message multicast: a [`ring`] of slots per sender inside the table.
//!
//! # Measured (threaded mem fabric, 2 shared cores, load average 3.5–8 from other builds)
//!
//! Reproduce with `cargo bench -p squall-benches --bench sst -- --warm-up-time 1
//! --measurement-time 3`; the idle figure with `cargo test -p squall-sst --test idle_cpu --
//! --nocapture`.
//!
//! | what | figure (range over 3–4 runs; ratio = SMC ÷ raw in the same run) |
//! | --- | --- |
//! | `poll_once` with 10 predicates | 126–225 ns: 44–79 M evaluations/s |
//! | `poll_once` with 100 predicates | 0.59–1.15 µs: 87–169 M evaluations/s |
//! | SMC 64 B, 3 members, a thread each | 1.1–7.5 M msg/s vs raw writes to 2 peers 5.1–11.1 M/s: 0.23–0.67× |
//! | SMC 64 B, 3 members on one thread | 5.2–10.4 M msg/s vs raw 5.1–6.2 M/s: 0.84–2.0× (a batch is one write per peer) |
//! | SMC 1 KiB, a thread each | 0.15–1.03 M msg/s vs raw 2.7–5.3 M/s: 0.05–0.20× |
//! | SMC 1 KiB, one thread | 0.51–0.55 M msg/s vs raw 2.75–3.0 M/s: 0.17–0.20× (six 1 KiB copies per message vs two) |
//! | three idle drivers, 10 ms heartbeats, 2 s | 2 % of one core in total (5 % before re-parking at once when woken for nothing); `busy_poll`: ~110 % |
//!
//! The per-thread SMC figures swing with the machine's load: three spinning threads on two
//! shared cores wait on the scheduler, not on the protocol.
//!
//! The table is sans-IO: it touches the world only through its [`Transport`](squall_transport::Transport)
//! (time included), never spawns, sleeps or reads the wall clock, so the same code runs in the
//! deterministic simulator and on real fabrics.
//!
//! ```
//! use squall_sst::{PredicateKind, SchemaBuilder, Sst, SstConfig};
//! use squall_transport::{NodeId, RegionId, RegionSpec};
//! use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
//! use std::{cell::Cell, rc::Rc};
//!
//! let mut b = SchemaBuilder::new(2);
//! let done = b.counter("done");
//! let schema = b.build()?;
//! let region = RegionId(0);
//! let mut nodes = ThreadedFabric::new(ThreadedConfig::default())?
//!     .cluster(2, &[RegionSpec::new(region, schema.table_len())])?;
//! let members = vec![NodeId(0), NodeId(1)];
//! let n1 = nodes.pop().unwrap();
//! let mut a = Sst::new(nodes.pop().unwrap(), schema.clone(), SstConfig::new(region, members.clone()))?;
//! let mut b = Sst::new(n1, schema, SstConfig::new(region, members))?;
//!
//! // b learns when everyone (as far as b knows) has done at least 3.
//! let fired = Rc::new(Cell::new(false));
//! let flag = fired.clone();
//! b.insert(PredicateKind::OneTime, move |s| s.all_reached(done, 3), move |_| flag.set(true));
//! a.set(done, 3);
//! a.push(done.range())?;
//! b.poll_once()?;
//! assert!(!fired.get()); // b's own row is still at 0
//! b.set(done, 5);
//! b.poll_once()?;
//! assert!(fired.get());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod driver;
mod error;
pub mod failure;
pub mod predicate;
pub mod ring;
pub mod schema;
pub mod smc;
mod table;
#[cfg(test)]
mod ticket_tests;

pub use driver::{Driver, DriverConfig};
pub use error::{SchemaError, SetupError, SmcError, SstError};
pub use failure::Suspicion;
pub use predicate::{PredicateHandle, PredicateKind};
pub use schema::{Bytes, Counter, FieldRange, Flag, Schema, SchemaBuilder, Vector};
pub use smc::{Smc, SmcConfig, SmcFields};
pub use table::{Detector, Progress, Sst, SstConfig, Ticket};
