//! The verbs-shaped transport of Squall.
//!
//! A node registers [`Region`]s of memory; each peer link carries posted one-sided ops (write,
//! read, compare-and-swap, fetch-and-add), two-sided sends and fences, applied in FIFO order, with
//! completions and per-peer failure reported through [`Transport::poll`]. This crate holds the
//! [`Transport`] trait, the region and op types, typed errors, the shared op validation
//! ([`Directory`]), and — behind the `conformance` feature — the suite every transport must pass.
//!
//! Implementations: `squall-transport-mem` (threaded and simulated in-process fabrics); TCP and
//! RDMA verbs fabrics follow the same contract.
//!
//! ```
//! use squall_transport::{Region, RegionId, RegionSpec};
//! let r = Region::new(RegionSpec::new(RegionId(0), 16)).unwrap();
//! r.store(1, 7);
//! assert_eq!(r.load(1), 7);
//! ```

#[cfg(feature = "conformance")]
pub mod conformance;
mod directory;
mod error;
mod ids;
pub mod mux;
mod op;
mod region;
mod time;
mod transport;
mod waker;
pub mod word;

pub use directory::Directory;
pub use error::{FailureCause, OpError, PostError, RegionError};
pub use ids::{NodeId, OpId, RegionId};
pub use op::{Completion, Event, LocalSlice, OpKind, RemoteAddr, Signal};
pub use region::{REGION_ALIGN, Region, RegionSpec};
pub use time::{Clock, SystemClock, Time};
pub use transport::Transport;
pub use waker::Waker;
