//! Time as protocol cores see it: a monotonic clock they are given, never the wall clock.

use std::ops::{Add, Sub};
use std::time::Duration;

/// A point on a transport's monotonic clock, in nanoseconds since the clock's epoch.
///
/// Real fabrics count from their start; the simulator counts virtual time from zero.
///
/// ```
/// use squall_transport::Time;
/// use std::time::Duration;
/// let t = Time::ZERO + Duration::from_micros(3);
/// assert_eq!(t.as_nanos(), 3_000);
/// assert_eq!(t - Time::ZERO, Duration::from_micros(3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

impl Time {
    /// The clock's epoch.
    pub const ZERO: Time = Time(0);

    /// The instant `nanos` nanoseconds after the epoch.
    ///
    /// ```
    /// assert_eq!(squall_transport::Time::from_nanos(5).as_nanos(), 5);
    /// ```
    pub const fn from_nanos(nanos: u64) -> Time {
        Time(nanos)
    }

    /// Nanoseconds since the epoch.
    ///
    /// ```
    /// assert_eq!(squall_transport::Time::ZERO.as_nanos(), 0);
    /// ```
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time elapsed from `earlier` to `self`, zero if `earlier` is later.
    ///
    /// ```
    /// use squall_transport::Time;
    /// assert_eq!(Time::from_nanos(1).saturating_since(Time::from_nanos(9)).as_nanos(), 0);
    /// ```
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }
}

impl Sub for Time {
    type Output = Duration;
    fn sub(self, earlier: Time) -> Duration {
        self.saturating_since(earlier)
    }
}

/// A monotonic clock. Protocol cores read time only through a clock they are handed.
///
/// ```
/// use squall_transport::{Clock, SystemClock};
/// let clock = SystemClock::new();
/// let a = clock.now();
/// assert!(clock.now() >= a);
/// ```
pub trait Clock {
    /// The current time.
    fn now(&self) -> Time;
}

/// The operating system's monotonic clock, counted from when this value was created.
///
/// ```
/// use squall_transport::{Clock, SystemClock};
/// assert!(SystemClock::new().now().as_nanos() < 1_000_000_000);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    epoch: std::time::Instant,
}

impl SystemClock {
    /// A clock whose epoch is now.
    pub fn new() -> SystemClock {
        SystemClock {
            epoch: std::time::Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Time {
        Time(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}
