//! The driver loop: poll, spin briefly while nothing happens, then park until the transport
//! wakes the thread (a write landed, a completion arrived) or the next heartbeat is due. No fixed
//! sleeps: Derecho's 1 ms idle sleep became 1 ms latency spikes (#93).

use std::ops::ControlFlow;
use std::time::Duration;

use squall_transport::{Time, Transport};

use crate::error::SstError;
use crate::table::Sst;

/// How a driver trades CPU for latency.
///
/// ```
/// use squall_sst::DriverConfig;
/// let cfg = DriverConfig { busy_poll: true, ..Default::default() };
/// assert!(cfg.busy_poll);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverConfig {
    /// Keep polling this long after the last progress before parking...
    pub spin_for: Duration,
    /// ... but at most this many idle polls (on a virtual clock, as in the simulator, time does
    /// not pass while spinning).
    pub spin_polls: u32,
    /// The longest single park (the next heartbeat bounds it too).
    pub max_park: Duration,
    /// Never park: burn a core for the lowest latency.
    pub busy_poll: bool,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            spin_for: Duration::from_micros(50),
            spin_polls: 1000,
            max_park: Duration::from_millis(50),
            busy_poll: false,
        }
    }
}

/// Runs a table's loop on the calling thread.
///
/// ```
/// use std::ops::ControlFlow;
/// use squall_sst::{Driver, DriverConfig, SchemaBuilder, Sst, SstConfig};
/// use squall_transport::{NodeId, RegionId, RegionSpec};
/// use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
/// let mut b = SchemaBuilder::new(1);
/// let c = b.counter("c");
/// let schema = b.build()?;
/// let node = ThreadedFabric::new(ThreadedConfig::default())?
///     .cluster(1, &[RegionSpec::new(RegionId(0), schema.table_len())])?.remove(0);
/// let mut sst = Sst::new(node, schema, SstConfig::new(RegionId(0), vec![NodeId(0)]))?;
/// let mut driver = Driver::new(DriverConfig::default());
/// driver.run(&mut sst, |s| {
///     let v = s.get(0, c);
///     if v == 5 { return Ok(ControlFlow::Break(())); }
///     s.set(c, v + 1);
///     Ok(ControlFlow::Continue(true)) // made progress
/// })?;
/// assert_eq!(sst.get(0, c), 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Driver {
    config: DriverConfig,
    idle_since: Option<Time>,
    idle_polls: u32,
    /// The last round ended in a park and nothing has happened since.
    woke: bool,
    parks: u64,
    polls: u64,
}

impl Driver {
    /// A driver with `config`.
    pub fn new(config: DriverConfig) -> Driver {
        Driver {
            config,
            idle_since: None,
            idle_polls: 0,
            woke: false,
            parks: 0,
            polls: 0,
        }
    }

    /// How many times it parked.
    pub fn parks(&self) -> u64 {
        self.parks
    }

    /// How many rounds it polled.
    pub fn polls(&self) -> u64 {
        self.polls
    }

    /// One round: polls the table, runs `work` (the caller's own progress, such as SMC), and
    /// parks if neither did anything for longer than `spin_for`. Returns `Break` when `work` asks
    /// to stop.
    pub fn step<T: Transport>(
        &mut self,
        sst: &mut Sst<T>,
        work: &mut impl FnMut(&mut Sst<T>) -> Result<ControlFlow<(), bool>, SstError>,
    ) -> Result<ControlFlow<()>, SstError> {
        self.polls += 1;
        let progress = sst.poll_once()?;
        let busy = match work(sst)? {
            ControlFlow::Break(()) => return Ok(ControlFlow::Break(())),
            ControlFlow::Continue(b) => b,
        };
        if busy || progress.is_busy() || self.config.busy_poll {
            self.idle_since = None;
            self.idle_polls = 0;
            self.woke = false;
            return Ok(ControlFlow::Continue(()));
        }
        let now = sst.now();
        match self.idle_since {
            // Woken for nothing (a heartbeat landed, the park timed out): park again at once;
            // spinning pays off only right after real progress.
            _ if self.woke => self.park(sst),
            None => self.idle_since = Some(now),
            Some(since)
                if now.saturating_since(since) >= self.config.spin_for
                    || self.idle_polls >= self.config.spin_polls =>
            {
                self.park(sst)
            }
            Some(_) => {
                self.idle_polls += 1;
                std::hint::spin_loop()
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    fn park<T: Transport>(&mut self, sst: &mut Sst<T>) {
        self.parks += 1;
        sst.wait(self.config.max_park);
        self.idle_since = None;
        self.idle_polls = 0;
        self.woke = true;
    }

    /// Loops [`step`](Driver::step) until `work` breaks or the table stops with an error.
    pub fn run<T: Transport>(
        &mut self,
        sst: &mut Sst<T>,
        mut work: impl FnMut(&mut Sst<T>) -> Result<ControlFlow<(), bool>, SstError>,
    ) -> Result<(), SstError> {
        loop {
            if self.step(sst, &mut work)?.is_break() {
                return Ok(());
            }
        }
    }
}
