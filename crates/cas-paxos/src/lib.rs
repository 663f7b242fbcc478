//! Velos's one-sided Paxos for Squall: every acceptor step is a remote compare-and-swap.
//!
//! Acceptors are passive memory: a proposer prepares and accepts by CAS on the acceptors' packed
//! slot words ([`word`]), writes values into its own write-exclusive buffers first ([`layout`]),
//! and everyone learns decisions from local memory. [`decree::Decree`] is single-decree consensus
//! (Algorithm 5 with retries); [`log::CasPaxos`] is the replicated log on top (a ring of reused
//! slots, a pre-prepared window, Ω leader election, decisions piggybacked on the next accept,
//! [`squall_ordering::TotalOrder`]); [`rpc`] is the two-sided fallback for exhausted proposal
//! numbers (Velos §5.2).
//!
//! ```
//! use squall_cas_paxos::word::SlotWord;
//! assert_eq!(SlotWord::unpack(SlotWord::EMPTY.pack()), SlotWord::EMPTY);
//! ```

pub mod decree;
pub mod layout;
pub mod log;
pub mod rpc;
pub mod word;
