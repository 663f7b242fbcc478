//! Total restart: the inspector's ballots.
//!
//! After every member stopped, members restart from their logs: [`Gms::new`](crate::Gms::new)
//! with what the log held puts the member in *restart mode* for its last logged view `L`. It
//! wedges at once (its received counts are what its epoch log holds) and publishes that, its
//! highest-ranked logged decision for `L`, the highest restart ballot it promised for `L`, and
//! the decision that ended `L - 1` (so peers one view behind can catch up). The restart leader
//! (the *inspector*: the lowest-ranked restarted member of `L` that nobody suspects) waits
//! until a majority of `L` restarted, then runs the ordinary view change of `L` with an empty
//! change list plus a failure for every member that did not restart, under a *ballot* instead
//! of its plain rank: it adopts the highest-ranked decision logged for `L` by anyone it can
//! see, or computes the trim from the logged counts (per sender the minimum over the restarted
//! members, cut to the gap-free round-robin prefix). Every member logs the decision, truncates
//! its epoch log past the trim, replays its log up to it, and the group installs `L + 1`.
//!
//! Why ballots: in a running view a leader's rank only grows (a suspected member never comes
//! back in that view), which is why "adopt the highest-ranked decision" is safe. Across
//! restarts the same member can lead again, so an inspector tags its proposal and decision with
//! [`ballot`]`(attempt, rank)`, above every ordinary rank, where `attempt` exceeds every ballot
//! a restarted member promised or logged. A member logs a [`Record::Promised`] before it
//! acknowledges an inspector's proposal and never acknowledges or accepts a lower ballot after.
//! This is Paxos' first phase on top of the GMS protocol: a decision that a majority logged
//! (and only those are acted on) is seen by the majority of every later attempt, which adopts
//! it; so a repeated restart reuses the decision an earlier attempt acted on.
//!
//! [`Record::Promised`]: crate::log::Record::Promised
//!
//! ```
//! use squall_membership::restart::{attempt_of, ballot, rank_of, INSPECTOR};
//! let b = ballot(2, 1);
//! assert!(b >= INSPECTOR);
//! assert_eq!((attempt_of(b), rank_of(b)), (2, 1));
//! assert_eq!(attempt_of(3), 0); // an ordinary rank
//! ```

/// The lowest inspector ballot: ordinary leader ranks (a position in a view) are below it.
pub const INSPECTOR: u64 = 1 << 32;

/// The ballot of restart attempt `attempt` (1 or more) led by the member of rank `rank`.
pub fn ballot(attempt: u64, rank: u64) -> u64 {
    (attempt << 32) | (rank & 0xffff_ffff)
}

/// The attempt of a ballot (0 for an ordinary rank).
pub fn attempt_of(ballot: u64) -> u64 {
    ballot >> 32
}

/// The leader rank of a ballot (the ordinary rank itself for an ordinary rank).
pub fn rank_of(ballot: u64) -> u64 {
    ballot & 0xffff_ffff
}
