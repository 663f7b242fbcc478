//! A replica's counters, readable from any thread while it runs.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The counters themselves (see [`Metrics`]).
#[derive(Debug, Default)]
pub struct Counters {
    /// Commands applied to the state machine (duplicates excluded).
    pub commands_applied: AtomicU64,
    /// Retried commands answered from the session table instead of being applied again.
    pub duplicates: AtomicU64,
    /// Reads served behind barriers.
    pub reads_barrier: AtomicU64,
    /// Reads served at their own log position.
    pub reads_ordered: AtomicU64,
    /// Reads served from local state without ordering.
    pub reads_local: AtomicU64,
    /// Barriers submitted (each serves a batch of reads).
    pub barriers: AtomicU64,
    /// Submissions the backend asked to retry later (flow control, wedge).
    pub submit_retries: AtomicU64,
    /// Log entries that could not be decoded and were skipped (on every replica alike).
    pub undecodable: AtomicU64,
    /// Sessions evicted to stay within `max_sessions`.
    pub sessions_evicted: AtomicU64,
    /// Commands refused because their session had been evicted.
    pub sessions_expired: AtomicU64,
    /// Requests refused because the request queue was full.
    pub busy: AtomicU64,
    /// States provided to joining replicas (state transfer).
    pub states_provided: AtomicU64,
    /// Of [`states_provided`](Self::states_provided): those encoded off the replica's thread
    /// ([`ReplicaCore::serve_off_thread`](crate::ReplicaCore::serve_off_thread)).
    pub states_provided_off_thread: AtomicU64,
    /// States for joiners the backend refused (e.g. [`TransferError::TooLarge`]): at most one
    /// per view, since a refused replica offers no state again until the next view change.
    ///
    /// [`TransferError::TooLarge`]: crate::TransferError::TooLarge
    pub states_refused: AtomicU64,
    /// Transferred states installed (once per join of this replica).
    pub states_installed: AtomicU64,
    /// States dropped because the backend stopped holding one while the replica held it
    /// (its group joins again by transfer, s23): each is followed by an install.
    pub states_dropped: AtomicU64,
    /// Backends that stopped for good under this replica, joining, restarting or serving
    /// ([`BackendStopped`](crate::BackendStopped)); the replica stopped (at most 1). A stop of
    /// the replica's own ([`StopPhase::Replica`](crate::StopPhase::Replica)) is not counted.
    pub backends_stopped: AtomicU64,
    /// States encoded off the replica's thread for a joiner and dropped as stale: the view
    /// changed and deliveries followed their capture. After two in a row the next serve is
    /// encoded on the replica's thread ([`ReplicaCore::provide_encoded`](crate::ReplicaCore::provide_encoded)).
    pub serves_stale: AtomicU64,
    /// Checkpoints the backend made durable ([`CoreConfig::snapshot_every`](crate::CoreConfig::snapshot_every)).
    pub checkpoints: AtomicU64,
    /// The longest turn of the replica's driver loop so far, in microseconds, parks
    /// excluded: the longest the backend went unpolled (its heartbeats unsent) while the
    /// replica worked — applying a batch, installing a state, encoding a checkpoint. A turn
    /// of 5 ms or more that sets a new maximum is also logged (`info`, "longest driver turn
    /// so far").
    pub longest_turn_us: AtomicU64,
    /// The longest the replica's thread spent installing one transferred or restored state,
    /// in microseconds: decoding and restoring it where it is restored on that thread
    /// ([`StateMachine::restore`](crate::StateMachine::restore)), swapping it in where it was
    /// decoded off it ([`StateMachine::snapshot_decoder`](crate::StateMachine::snapshot_decoder)).
    pub longest_install_us: AtomicU64,
    /// The longest the replica's thread spent in one step of providing its state to a
    /// joiner, in microseconds: encoding the snapshot and handing it to the backend where it
    /// is encoded on that thread; capturing it, or handing the bytes encoded off it to the
    /// backend, where it is encoded off it
    /// ([`ReplicaCore::serve_off_thread`](crate::ReplicaCore::serve_off_thread)).
    pub longest_serve_us: AtomicU64,
}

/// A shared handle to a replica's [`Counters`]; clones see the same counters.
///
/// ```
/// use std::sync::atomic::Ordering;
/// let m = squall_smr::Metrics::default();
/// m.add(&m.barriers, 2);
/// assert_eq!(m.clone().barriers.load(Ordering::Relaxed), 2);
/// assert!(m.to_string().contains("barriers=2"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Metrics(Arc<Counters>);

impl Metrics {
    /// Adds `n` to one of this handle's counters.
    pub fn add(&self, counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

impl Deref for Metrics {
    type Target = Counters;
    fn deref(&self) -> &Counters {
        &self.0
    }
}

impl std::fmt::Display for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.0;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        write!(
            f,
            "applied={} duplicates={} reads(barrier/ordered/local)={}/{}/{} barriers={} \
             submit_retries={} undecodable={} sessions(evicted/expired)={}/{} busy={} \
             states(provided/off-thread/refused/installed/dropped)={}/{}/{}/{}/{} backends_stopped={} \
             serves_stale={} checkpoints={} longest_turn_us={} \
             longest_install_us={} longest_serve_us={}",
            l(&c.commands_applied),
            l(&c.duplicates),
            l(&c.reads_barrier),
            l(&c.reads_ordered),
            l(&c.reads_local),
            l(&c.barriers),
            l(&c.submit_retries),
            l(&c.undecodable),
            l(&c.sessions_evicted),
            l(&c.sessions_expired),
            l(&c.busy),
            l(&c.states_provided),
            l(&c.states_provided_off_thread),
            l(&c.states_refused),
            l(&c.states_installed),
            l(&c.states_dropped),
            l(&c.backends_stopped),
            l(&c.serves_stale),
            l(&c.checkpoints),
            l(&c.longest_turn_us),
            l(&c.longest_install_us),
            l(&c.longest_serve_us),
        )
    }
}
