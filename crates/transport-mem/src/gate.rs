//! The admission gate of one directed link: how the threaded fabric stops applying a failed
//! peer's ops without locks on the hot path.
//!
//! A poster *enters* the gate (one fetch-add) before applying an op to the peer's memory and
//! *leaves* it (one fetch-sub) after. Breaking the link sets a flag bit and then waits until no
//! poster is inside, so once [`Gate::close`] returns no op from that link is being applied or
//! ever will be. A second flag marks the link *held* (a partition): posters queue instead of
//! applying. A restart reopens a closed gate ([`Gate::reopen`]) after storing the node's new
//! life, which a poster checks inside the gate. The loom tests in `tests/loom.rs` check this
//! protocol, the reopening included.

use std::sync::atomic::{AtomicU64, Ordering};

use squall_transport::word::AtomicWord;

const CLOSED: u64 = 1 << 63;
const HELD: u64 = 1 << 62;
const COUNT: u64 = HELD - 1;

/// What a poster found when it tried to enter a gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// It is inside: apply the op, then call [`Gate::leave`].
    Open,
    /// The link is closed: the op fails. (The poster is not inside.)
    Closed,
    /// The link is held by a partition: queue the op. (The poster is not inside.)
    Held,
}

/// The gate of one directed link. Generic over the word so loom can check it.
///
/// ```
/// use squall_transport_mem::gate::{Entry, Gate};
/// let g: Gate = Gate::default();
/// assert_eq!(g.enter(), Entry::Open);
/// g.leave();
/// g.close();
/// assert_eq!(g.enter(), Entry::Closed);
/// ```
#[derive(Debug, Default)]
pub struct Gate<A: AtomicWord = AtomicU64> {
    state: A,
}

impl<A: AtomicWord> Gate<A> {
    /// A gate over `word`, which must start at zero (open, nobody inside).
    pub fn with_word(word: A) -> Gate<A> {
        Gate { state: word }
    }

    /// Tries to enter.
    pub fn enter(&self) -> Entry {
        let prev = self.state.fetch_add(1, Ordering::Acquire);
        if prev & (CLOSED | HELD) == 0 {
            return Entry::Open;
        }
        self.leave();
        if prev & CLOSED != 0 {
            Entry::Closed
        } else {
            Entry::Held
        }
    }

    /// Enters even though the link is held (to drain the held queue); fails only if closed.
    pub fn enter_held(&self) -> Entry {
        let prev = self.state.fetch_add(1, Ordering::Acquire);
        if prev & CLOSED == 0 {
            return Entry::Open;
        }
        self.leave();
        Entry::Closed
    }

    /// Leaves after applying.
    pub fn leave(&self) {
        self.state.fetch_add(u64::MAX, Ordering::Release); // wrapping -1
    }

    fn set(&self, bit: u64, on: bool) -> u64 {
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            let new = if on { cur | bit } else { cur & !bit };
            match self
                .state
                .compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return cur,
                Err(actual) => cur = actual,
            }
        }
    }

    fn wait_empty(&self) {
        while self.state.load(Ordering::Acquire) & COUNT != 0 {
            A::spin();
        }
    }

    /// Closes the link for good and waits until no poster is applying. Returns whether this
    /// call was the one that closed it.
    pub fn close(&self) -> bool {
        let prev = self.set(CLOSED, true);
        self.wait_empty();
        prev & CLOSED == 0
    }

    /// Opens a closed link again, for a new life of one of its ends (a restart): posters enter
    /// from then on. A hold stays as it was. Nobody is applying through a closed gate, so
    /// there is nothing to wait for; the poster's own checks keep ops of the old life out.
    ///
    /// ```
    /// use squall_transport_mem::gate::{Entry, Gate};
    /// let g: Gate = Gate::default();
    /// g.close();
    /// g.reopen();
    /// assert_eq!(g.enter(), Entry::Open);
    /// ```
    pub fn reopen(&self) {
        self.set(CLOSED, false);
    }

    /// Holds the link (posters queue) and waits until no poster is applying.
    pub fn hold(&self) {
        self.set(HELD, true);
        self.wait_empty();
    }

    /// Releases a hold.
    pub fn release(&self) {
        self.set(HELD, false);
    }

    /// Whether the link is closed.
    pub fn is_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) & CLOSED != 0
    }

    /// Whether the link is held.
    pub fn is_held(&self) -> bool {
        self.state.load(Ordering::Acquire) & HELD != 0
    }
}
