//! Waking a parked driver from another thread.

use std::fmt;
use std::sync::Arc;

/// A handle that wakes the driver of one endpoint from any thread.
///
/// A driver parks in [`Transport::wait`](crate::Transport::wait) when it has nothing to do; the
/// fabric wakes it when something lands. Work that arrives from *outside* the fabric — a client
/// request handed over by a network thread, a shutdown — wakes it through this handle instead of
/// making the driver poll on a short timeout. A wake that arrives while the driver is not parked
/// makes its next `wait` return at once, so no wake is lost.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use squall_transport::Waker;
///
/// let hits = Arc::new(AtomicUsize::new(0));
/// let h = Arc::clone(&hits);
/// let waker = Waker::new(move || {
///     h.fetch_add(1, Ordering::Relaxed);
/// });
/// waker.clone().wake();
/// assert_eq!(hits.load(Ordering::Relaxed), 1);
/// Waker::noop().wake(); // does nothing
/// ```
#[derive(Clone)]
pub struct Waker(Option<Arc<dyn Fn() + Send + Sync>>);

impl Waker {
    /// A waker that calls `wake` (which must not block).
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Waker {
        Waker(Some(Arc::new(wake)))
    }

    /// A waker that does nothing: for endpoints whose `wait` never blocks in real time (the
    /// simulator, which runs every node on the caller's thread).
    pub fn noop() -> Waker {
        Waker(None)
    }

    /// Wakes the driver (or makes its next `wait` return at once).
    pub fn wake(&self) {
        if let Some(f) = &self.0 {
            f();
        }
    }
}

impl fmt::Debug for Waker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Waker"
        } else {
            "Waker(noop)"
        })
    }
}
