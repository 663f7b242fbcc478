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

    /// A capture of the state as it is now that encodes itself later, on another thread:
    /// called by the replica for a checkpoint
    /// ([`CoreConfig::snapshot_every`](crate::CoreConfig::snapshot_every)) and for the state
    /// it provides to a joiner
    /// ([`ReplicaCore::serve_off_thread`](crate::ReplicaCore::serve_off_thread)), so that
    /// encoding a large state does not pause the replica's thread. The encoder must append exactly the
    /// bytes [`snapshot`](Self::snapshot) returns now, however many commands the replica
    /// applies meanwhile, so taking it must be cheap (e.g. an O(1) clone of a persistent map,
    /// as `squall-kv` does). The default, `None`: the replica encodes
    /// [`snapshot`](Self::snapshot) on its own thread.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use squall_smr::{RestoreError, StateEncoder, StateMachine};
    ///
    /// /// A log of commands kept in an `Arc`'d vector per 64 entries (a cheap capture).
    /// #[derive(Default)]
    /// struct Log(Vec<Arc<Vec<u8>>>);
    /// impl StateMachine for Log {
    ///     fn apply(&mut self, c: &[u8]) -> Vec<u8> {
    ///         match self.0.last_mut() {
    ///             Some(last) if last.len() < 64 => Arc::make_mut(last).push(c.first().copied().unwrap_or(0)),
    ///             _ => self.0.push(Arc::new(c.iter().take(1).copied().collect())),
    ///         }
    ///         Vec::new()
    ///     }
    ///     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    ///     fn snapshot(&self) -> Vec<u8> { self.0.iter().flat_map(|c| c.iter().copied()).collect() }
    ///     fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> {
    ///         self.0 = s.chunks(64).map(|c| Arc::new(c.to_vec())).collect();
    ///         Ok(())
    ///     }
    ///     fn snapshot_encoder(&self) -> Option<StateEncoder> {
    ///         let capture = self.0.clone(); // clones the `Arc`s, not the bytes
    ///         Some(Box::new(move |out: &mut Vec<u8>| {
    ///             capture.iter().for_each(|c| out.extend_from_slice(c))
    ///         }))
    ///     }
    /// }
    /// let mut log = Log::default();
    /// log.apply(&[1]);
    /// let (encode, then) = (log.snapshot_encoder().unwrap(), log.snapshot());
    /// log.apply(&[2]); // applied after the capture: not in it
    /// let mut out = Vec::new();
    /// std::thread::spawn(move || { encode(&mut out); out }).join().map(|out| assert_eq!(out, then)).unwrap();
    /// ```
    fn snapshot_encoder(&self) -> Option<StateEncoder> {
        None
    }

    /// A decoder that builds a new state machine from a snapshot on another thread: called by
    /// a replica that installs a large state (a joiner's transferred state, a restart's
    /// checkpoint) so that decoding it does not pause the replica's thread, which meanwhile
    /// goes on driving its group, answering requests `Unavailable` and keeping the deliveries
    /// that follow the state for after it. The replica then swaps the decoded machine in (one
    /// move). The decoder must build exactly the machine [`restore`](Self::restore) of the
    /// same bytes makes of this one (settings included: it is taken from this machine), and
    /// fail where `restore` fails, with its error. The default, `None`: the replica calls
    /// [`restore`](Self::restore) on its own thread.
    ///
    /// ```
    /// use squall_smr::{RestoreError, StateDecoder, StateMachine};
    ///
    /// #[derive(Debug, Default, PartialEq)]
    /// struct Words(Vec<String>);
    /// impl StateMachine for Words {
    ///     fn apply(&mut self, c: &[u8]) -> Vec<u8> {
    ///         self.0.push(String::from_utf8_lossy(c).into_owned());
    ///         Vec::new()
    ///     }
    ///     fn query(&self, _: &[u8]) -> Vec<u8> { Vec::new() }
    ///     fn snapshot(&self) -> Vec<u8> { self.0.join(" ").into_bytes() }
    ///     fn restore(&mut self, s: &[u8]) -> Result<(), RestoreError> {
    ///         let text = std::str::from_utf8(s).map_err(|e| RestoreError::new(e.to_string()))?;
    ///         self.0 = text.split_whitespace().map(str::to_owned).collect();
    ///         Ok(())
    ///     }
    ///     fn snapshot_decoder(&self) -> Option<StateDecoder<Words>> {
    ///         // Exactly `restore` into a fresh machine.
    ///         Some(Box::new(|s: &[u8]| {
    ///             let mut fresh = Words::default();
    ///             fresh.restore(s).map(|()| fresh)
    ///         }))
    ///     }
    /// }
    /// let mut w = Words::default();
    /// w.apply(b"hello");
    /// w.apply(b"world");
    /// let (decode, bytes) = (Words::default().snapshot_decoder().unwrap(), w.snapshot());
    /// let decoded = std::thread::spawn(move || decode(&bytes)).join().unwrap()?;
    /// assert_eq!(decoded, w);
    /// let bad = Words::default().snapshot_decoder().unwrap()(&[0xff]);
    /// assert_eq!(bad, Err(Words::default().restore(&[0xff]).unwrap_err()));
    /// # Ok::<(), RestoreError>(())
    /// ```
    fn snapshot_decoder(&self) -> Option<StateDecoder<Self>>
    where
        Self: Sized,
    {
        None
    }
}

/// A decoder of a snapshot into a new state machine ([`StateMachine::snapshot_decoder`]):
/// called once, on any thread, with the bytes [`snapshot`](StateMachine::snapshot) returned;
/// the machine [`restore`](StateMachine::restore) would make of them, or its error.
///
/// ```
/// use squall_smr::{RestoreError, StateDecoder};
/// let decode: StateDecoder<u64> = Box::new(|s: &[u8]| {
///     let bytes: [u8; 8] = s.try_into().map_err(|_| RestoreError::new("want 8 bytes"))?;
///     Ok(u64::from_le_bytes(bytes))
/// });
/// let decoded = std::thread::spawn(move || decode(&7u64.to_le_bytes())).join().unwrap();
/// assert_eq!(decoded, Ok(7));
/// ```
pub type StateDecoder<S> = Box<dyn FnOnce(&[u8]) -> Result<S, RestoreError> + Send>;

/// A state machine's state captured at one point ([`StateMachine::snapshot_encoder`]): called
/// once, on any thread, it appends the state's [`snapshot`](StateMachine::snapshot) bytes to
/// the vector it is given.
pub type StateEncoder = Box<dyn FnOnce(&mut Vec<u8>) + Send>;

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
