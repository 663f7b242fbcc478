//! `squall-kv`: a replicated key-value store on Squall, as a library and as the `squall-kv`
//! binary.
//!
//! - [`KvMachine`]: the replicated state (an ordered map of byte keys and values) as a
//!   [`squall_smr::StateMachine`]; [`KvOp`] / [`KvResult`] are its versioned operations (get,
//!   put, delete, compare-and-set, range scan, atomic batches).
//! - [`KvClient`]: a typed async client; writes apply exactly once, reads are linearizable.
//! - [`KvConfig`]: a cluster in TOML; [`start_tcp_replica`] runs one replica per process over
//!   TCP, [`start_mem_cluster`] a whole cluster in one process on the threaded fabric; every
//!   backend ([`Ordering`]: round-robin, CAS-Paxos, membership) runs it unchanged.
//!   [`MemCluster`] on the membership backend adds replicas while it runs (they join and take
//!   the state by transfer), lets them leave, and kills them.
//!   With `data_dir` set ([`KvConfig::data_dir`], membership only) each replica keeps durable
//!   logs and the cluster survives a total shutdown; [`rejoin_tcp_replica`] brings back a
//!   replica the others removed.
//! - [`admin`]: an operator's status query and graceful leave, asked of one running replica
//!   on its client port (`squall-kv client … status`, `… leave`).
//! - [`workload`]: the closed-loop load generator behind `squall-kv demo` and `bench`, and its
//!   raw-TCP baseline.
//!
//! ```
//! use squall_kv::{KvMachine, KvOp, KvResult};
//! use squall_smr::StateMachine;
//! let mut kv = KvMachine::default();
//! let cas = KvOp::Cas { key: b"k".to_vec(), expected: None, new: b"1".to_vec() };
//! let r = KvResult::decode(&kv.apply(&cas.encode()))?;
//! assert_eq!(r, KvResult::Cas { swapped: true, previous: None });
//! # Ok::<(), squall_kv::OpsError>(())
//! ```

pub mod admin;
pub mod announce;
mod client;
mod cluster;
mod machine;
mod ops;
pub mod workload;

pub use client::{KvClient, KvError};
pub use cluster::{
    ClusterError, Fsync, KvConfig, MemCluster, Ordering, ReplicaAddr, cas_paxos_config,
    membership_config, rejoin_tcp_replica, round_robin_config, start_mem_cluster,
    start_tcp_replica, start_tcp_replica_changing_settings, start_tcp_replica_on,
};
pub use machine::KvMachine;
pub use ops::{KvOp, KvResult, OPS_VERSION, OpsError};
pub use workload::{Report, Workload};
