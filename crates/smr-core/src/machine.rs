//! What a user replicates: a deterministic state machine.

use thiserror::Error;

/// A deterministic state machine, replicated by applying the same commands in the same order on
/// every replica.
///
/// `apply` must be a pure function of the current state and the command: no clocks, no
/// randomness, no I/O, no iteration over hash maps with per-process seeds. Replicas that apply
/// the same sequence must reach byte-identical snapshots; the tests of this crate check that.
///
/// Commands, queries and responses are bytes: the service defines their encoding (see
/// `squall-kv` for a typed one). A command or query the machine cannot decode is the service's
/// to answer (e.g. with an error response); it must not panic, since every replica would.
///
/// ```
/// use squall_smr::{RestoreError, StateMachine};
///
/// /// A counter: every command adds its first byte; queries read the total.
/// #[derive(Default)]
/// struct Counter(u64);
///
/// impl StateMachine for Counter {
///     fn apply(&mut self, command: &[u8]) -> Vec<u8> {
///         self.0 += u64::from(command.first().copied().unwrap_or(0));
///         self.0.to_le_bytes().to_vec()
///     }
///     fn query(&self, _query: &[u8]) -> Vec<u8> {
///         self.0.to_le_bytes().to_vec()
///     }
///     fn snapshot(&self) -> Vec<u8> {
///         self.0.to_le_bytes().to_vec()
///     }
///     fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
///         let bytes: [u8; 8] = snapshot.try_into().map_err(|_| RestoreError::new("want 8 bytes"))?;
///         self.0 = u64::from_le_bytes(bytes);
///         Ok(())
///     }
/// }
///
/// let mut c = Counter::default();
/// assert_eq!(c.apply(&[5]), 5u64.to_le_bytes());
/// let mut d = Counter::default();
/// d.restore(&c.snapshot())?;
/// assert_eq!(d.query(&[]), c.query(&[]));
/// # Ok::<(), RestoreError>(())
/// ```
pub trait StateMachine: Send + 'static {
    /// Applies `command` and returns the response for the client that submitted it.
    fn apply(&mut self, command: &[u8]) -> Vec<u8>;

    /// Answers a read-only `query` from the current state. Must not change the state (it runs
    /// on one replica only).
    fn query(&self, query: &[u8]) -> Vec<u8>;

    /// The whole state as bytes, to restore another replica (or this one after a restart).
    fn snapshot(&self) -> Vec<u8>;

    /// Replaces the state with one taken by [`snapshot`](Self::snapshot).
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError>;
}

/// A snapshot the state machine could not restore.
///
/// ```
/// let e = squall_smr::RestoreError::new("truncated map");
/// assert_eq!(e.to_string(), "cannot restore the snapshot: truncated map");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("cannot restore the snapshot: {0}")]
pub struct RestoreError(pub String);

impl RestoreError {
    /// An error with a reason.
    pub fn new(reason: impl Into<String>) -> RestoreError {
        RestoreError(reason.into())
    }
}
