//! Derecho's leader-free round-robin atomic multicast over the Squall SST (Derecho TOCS 2019,
//! §3.3, §3.6 and appendix B.2), for a fixed view.
//!
//! - **Sequencing**: sender `k` of `n` numbers its messages `i = 0, 1, ...`; message `i` has
//!   sequence number `i·n + k`. Every member publishes, per sender, how many of its messages it
//!   has received (an SST vector); a message is *stable* once the minimum over that column
//!   passes it, and ordered modes deliver stable messages in sequence order — receivers that
//!   fall behind deliver whole batches at once.
//! - **Null messages**: a sender that would hold up the order (others sent, it did not) sends a
//!   run of nulls in one SMC slot; receivers advance by the run's length; nulls never reach the
//!   application, and delivery positions count application messages only (gapless from 0).
//! - **Flow control**: a window of `window` messages per sender; [`submit`](squall_ordering::TotalOrder::submit)
//!   returns [`SubmitError::WindowFull`](squall_ordering::SubmitError::WindowFull) rather than
//!   block.
//! - **Modes** ([`Mode`]): unordered (FIFO per sender), atomic, durable (each member appends
//!   the gap-free prefix it has received, in sequence order, to a local checksummed [`log`] and
//!   syncs it per the [`FsyncPolicy`] *before* counting it received; so a stable message is in
//!   every member's log, and [`Upcall::Durable`](squall_ordering::Upcall::Durable) reports
//!   the delivered positions synced in every member's log: all of them under
//!   `FsyncPolicy::EveryBatch`, up to the last syncs under `EveryRecords`, none under
//!   `Never`).
//! - **Large messages** (above `slot_size`): the payload is written, in `chunk_size` one-sided
//!   writes each followed by an arrival marker, into the sender's receive buffer at every member
//!   — directly from the sender in groups smaller than `binomial_from` (4); in larger ones
//!   relayed chunk by chunk along a binomial tree rooted at the sender, or by RDMC's binomial
//!   pipeline (a hypercube exchange, twin vertices for other sizes; [`Relay`]) — and announced by an SMC
//!   slot that joins the same order; a receiver takes it once every chunk's marker has landed.
//! - **Failures**: a suspected member wedges the group ([`Upcall::Wedged`](squall_ordering::Upcall::Wedged));
//!   nothing past the stable prefix is delivered. View changes are the membership layer's.
//!
//! See [`RoundRobin`] for an example.

mod config;
mod error;
mod group;
pub mod log;
mod schedule;

pub use config::{Config, Mode, Relay};
pub use error::{ConfigError, Error, StopReason, TrimError};
pub use group::{RoundRobin, Stats, seq_prefix_counts};
pub use log::{FsyncPolicy, SyncMode};
