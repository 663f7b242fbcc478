//! Squall's TCP fabric: the verbs-shaped [`Transport`](squall_transport::Transport) contract
//! over one TCP connection per node pair.
//!
//! It is the fallback for every deployment without RDMA, and it gives exactly the semantics of
//! the other fabrics — one-sided writes, reads, compare-and-swap and fetch-and-add applied to
//! registered regions in link order, two-sided sends, fences, completions, and per-peer failure
//! reporting — not a message API in disguise. It passes the whole conformance suite of
//! `squall-transport`, with every node in its own OS process.
//!
//! - [`ClusterConfig`]: node id → address, cluster id, timeouts and bounds, from TOML or code,
//!   validated with errors that say what to fix.
//! - [`TcpNode`]: one node. A handshake checks cluster id, protocol version, node identity and a
//!   fresh incarnation, and exchanges region directories; one reader thread per link applies
//!   the peer's ops in order and answers reads and atomics; a timer thread sends heartbeats and
//!   fails silent peers; small posted writes are coalesced into one syscall; `TCP_NODELAY`.
//! - [`frame`]: the compact, versioned little-endian wire format and its decoder, which returns
//!   typed errors on any input (fuzzed in `fuzz/`).
//!
//! ```no_run
//! use squall_transport::{LocalSlice, NodeId, Region, RegionId, RegionSpec, RemoteAddr, Signal, Transport};
//! use squall_transport_tcp::{ClusterConfig, TcpNode};
//! let config = ClusterConfig::from_toml(r#"
//!     cluster_id = 1
//!     [nodes]
//!     0 = "10.0.0.1:7000"
//!     1 = "10.0.0.2:7000"
//! "#)?;
//! let r = RegionId(0);
//! let mut node = TcpNode::start(config, NodeId(0), vec![Region::new(RegionSpec::new(r, 4096))?])?;
//! node.region(r).unwrap().store(0, 42);
//! node.write(NodeId(1), LocalSlice::new(r, 0, 8), RemoteAddr::new(r, 0), Signal::Signaled)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
pub mod frame;
mod handshake;
mod node;
mod sys;

pub use config::{
    ClusterConfig, ConfigError, MAX_CLOCK_SKEW, MAX_FRAME_DATA, MAX_REDIAL, MAX_SPIN, MIN_REDIAL,
};
pub use handshake::StartError;
pub use node::TcpNode;
