//! In-process fabrics implementing the Squall transport contract.
//!
//! - [`threaded`]: regions are shared memory in one process and ops apply at once on the posting
//!   thread, so real threads truly race. The fast fabric for demos, benchmarks and loom tests.
//! - [`sim`]: every op is an event; a seeded scheduler picks the next event among links (FIFO
//!   within a link), advances a virtual clock, and injects the faults a test asks for — crash,
//!   partition, delay, slow node, heal. The same seed gives the same run, byte for byte.
//!
//! Both pass the whole conformance suite of `squall-transport`.
//!
//! ```
//! use squall_transport::{RegionId, RegionSpec, Transport};
//! use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
//! let nodes = ThreadedFabric::new(ThreadedConfig::default())
//!     .unwrap()
//!     .cluster(3, &[RegionSpec::new(RegionId(0), 64)])
//!     .unwrap();
//! assert_eq!(nodes[0].peers().len(), 2);
//! ```

mod apply;
mod config;
pub mod gate;
pub mod sim;

pub mod threaded;

pub use config::ConfigError;
