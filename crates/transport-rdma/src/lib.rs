//! The RDMA verbs fabric of Squall: the transport contract over reliable-connected queue pairs.
//!
//! [`RdmaNode`] implements [`squall_transport::Transport`] on any [`Provider`] — the small trait
//! for what one node's NIC does. The default build tests all of the transport's logic against
//! [`mock::MockNic`], a perfect NIC over shared memory with injectable faults (QP to error,
//! retry exceeded, CQ overrun, partitions, crashes), including the full conformance suite. The
//! `verbs` feature adds `VerbsNic`, the provider over real devices through the `sideway` crate,
//! which loads libibverbs at run time.
//!
//! Connection setup exchanges queue pair numbers, GIDs and region keys over a TCP side channel
//! ([`exchange`]). See `docs/RDMA.md` for running over RoCE or InfiniBand.
//!
//! Late links: an [`RdmaNode`] connects every configured peer when it starts, so no peer is
//! ever absent ([`is_absent`](squall_transport::Transport::is_absent) is always false) and no
//! `PeerConnected` event is reported; a node that must start late needs another fabric for now.
//!
//! ```
//! use squall_transport_rdma::RdmaConfig;
//! assert!(RdmaConfig::default().validate(4).is_ok());
//! ```

mod config;
pub mod exchange;
pub mod mock;
mod node;
pub mod provider;
#[cfg(feature = "verbs")]
pub mod verbs;

pub use config::{ConfigError, RdmaConfig};
pub use node::{ConnectOnError, RdmaNode, SidePhase, StartError};
pub use provider::{Provider, ProviderError};
#[cfg(feature = "verbs")]
pub use verbs::{ErrorInjector, VerbsNic};
