//! What every Squall ordering backend offers, and how to check that it did.
//!
//! A backend orders payloads submitted by the members of a group ([`TotalOrder`]) or multicast
//! to several groups ([`AtomicMulticast`]). Backends are sans-IO cores: the caller drives them
//! with [`poll`](TotalOrder::poll), which never blocks and reports everything that happened as
//! [`Upcall`]s — deliveries in order, durability, view changes, wedges, and messages a view
//! change discarded (to be resubmitted). `smr-core` and the checkers work with any backend.
//!
//! The [`check`] module holds checkers over recorded delivery histories — integrity, agreement,
//! total (prefix) order, position consistency, and for multicast uniform prefix order and
//! acyclic order — usable by every backend's tests and by users' own.
//!
//! ```
//! use squall_ordering::check::History;
//! use squall_transport::NodeId;
//! let mut h = History::new();
//! h.submit(NodeId(0), "a", &[]);
//! h.deliver(NodeId(0), "a", 0);
//! h.deliver(NodeId(1), "a", 0);
//! assert!(h.check_total_order().is_ok());
//! ```

pub mod check;
pub mod linearizability;
mod types;

pub use types::{
    AtomicMulticast, Delivery, GroupId, MulticastDelivery, SubmitError, TotalOrder, Upcall, View,
};
