//! The conformance suite: the transport contract as executable checks.
//!
//! Every transport in Squall runs this suite, and so can any user's own transport: implement
//! [`Fabric`] for a harness that builds clusters of your nodes and steps programs on them, then
//! call [`run_all`] or expand [`conformance_tests!`](crate::conformance_tests) in a test module.
//!
//! Checks are written as small per-node programs ([`Program`]) that only use the [`Transport`]
//! trait. The fabric decides how they run: real fabrics give each its own thread so they truly
//! race; the simulator interleaves them under a seeded scheduler. Each check returns a
//! [`Violation`] naming the guarantee that broke and how.
//!
//! ```
//! # #[cfg(feature = "conformance")] {
//! use squall_transport::conformance::{CHECKS, Fabric};
//! assert!(CHECKS.iter().any(|(name, _)| *name == "fifo_per_link"));
//! # }
//! ```

mod checks;

pub use checks::*;

use std::fmt;
use std::time::Duration;

use crate::ids::NodeId;
use crate::op::Event;
use crate::region::RegionSpec;
use crate::transport::Transport;

/// What one step of a program achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// It did something; step it again soon.
    Busy,
    /// It is waiting for the fabric; the runner may park the node briefly.
    Idle,
    /// It has finished.
    Done,
}

/// A per-node program: stepped repeatedly by a fabric's runner until it returns
/// [`Progress::Done`]. Any `FnMut(&mut T) -> Progress + Send` closure is a program.
///
/// ```
/// use squall_transport::conformance::{Program, Progress};
/// fn assert_program<T: squall_transport::Transport, P: Program<T>>(_: &P) {}
/// # fn demo<T: squall_transport::Transport>() {
/// let mut steps = 0;
/// let p = move |_node: &mut T| { steps += 1; if steps > 3 { Progress::Done } else { Progress::Busy } };
/// assert_program::<T, _>(&p);
/// # }
/// ```
pub trait Program<T: Transport>: Send {
    /// Runs one step on `node`.
    fn step(&mut self, node: &mut T) -> Progress;
}

impl<T: Transport, F: FnMut(&mut T) -> Progress + Send> Program<T> for F {
    fn step(&mut self, node: &mut T) -> Progress {
        self(node)
    }
}

/// A program slot: `None` for a node that runs nothing in this phase (it still serves remote
/// ops, as a passive memory node does).
pub type Slot<'a, T> = Option<Box<dyn Program<T> + 'a>>;

/// A runner's verdict when programs did not all finish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stalled {
    /// How long (in the fabric's time) the runner waited.
    pub after: Duration,
    /// Indices of the programs still running.
    pub unfinished: Vec<usize>,
}

impl fmt::Display for Stalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "programs {:?} had not finished after {:?}",
            self.unfinished, self.after
        )
    }
}

/// A harness that builds clusters of one transport and runs programs on them.
pub trait Fabric {
    /// The transport endpoint of one node.
    type Node: Transport;

    /// A short name for reports ("mem-threaded", "sim(seed=7)", "tcp").
    fn name(&self) -> String;

    /// Builds a fresh cluster of `n` nodes with ids `NodeId(0)..NodeId(n)`, all linked to each
    /// other, each with the regions of `layout` registered (zeroed).
    fn build(&mut self, n: usize, layout: &[RegionSpec]) -> Vec<Self::Node>;

    /// Runs `programs[i]` on `nodes[i]` until all finish, or gives up with [`Stalled`] after a
    /// bound generous enough for the fabric's timeout to have fired several times.
    fn run(
        &mut self,
        nodes: &mut [Self::Node],
        programs: Vec<Slot<'_, Self::Node>>,
    ) -> Result<(), Stalled>;

    /// Crashes `victim`: it stops applying and sending anything, as a killed process does.
    fn crash(&mut self, nodes: &mut [Self::Node], victim: NodeId);

    /// Cuts the link between `a` and `b` both ways: traffic is held, as on a silent network, so
    /// ops time out. Returns `false` if this fabric cannot partition.
    fn partition(&mut self, nodes: &mut [Self::Node], a: NodeId, b: NodeId) -> bool;

    /// The op timeout the fabric's nodes were configured with.
    fn timeout(&self) -> Duration;

    /// Builds a cluster of `n` configured nodes of which only `NodeId(0)..NodeId(started)` run
    /// (their endpoints are returned); the others are *absent* until
    /// [`start_late`](Self::start_late) starts them, in id order. `None` (the default) if this
    /// fabric cannot start nodes late: the `late_links` check is then skipped.
    fn build_late(
        &mut self,
        n: usize,
        started: usize,
        layout: &[RegionSpec],
    ) -> Option<Vec<Self::Node>> {
        let _ = (n, started, layout);
        None
    }

    /// Starts the next absent node of a cluster from [`build_late`](Self::build_late) (the one
    /// with id `nodes.len()`) and appends its endpoint to `nodes`.
    fn start_late(&mut self, nodes: &mut Vec<Self::Node>) {
        let _ = nodes;
    }

    /// Restarts `victim`, crashed before by [`crash`](Self::crash), under the same id as a new
    /// incarnation with fresh (zeroed) regions, and puts its new endpoint at
    /// `nodes[victim.index()]`. Returns the new incarnation, or `None` (the default) if this
    /// fabric cannot restart nodes: the `rejoin_new_incarnation` check is then skipped.
    fn restart(&mut self, nodes: &mut [Self::Node], victim: NodeId) -> Option<u64> {
        let _ = (nodes, victim);
        None
    }
}

/// A broken guarantee.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The check that failed.
    pub check: &'static str,
    /// What was observed.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "conformance check `{}` failed: {}",
            self.check, self.detail
        )
    }
}

impl std::error::Error for Violation {}

/// A conformance check.
pub type Check<F> = fn(&mut F) -> Result<(), Violation>;

/// Runs every check in [`CHECKS`] on `fabric` and returns each one's outcome.
pub fn run_all<F: Fabric>(fabric: &mut F) -> Vec<(&'static str, Result<(), Violation>)> {
    checks::all::<F>()
        .into_iter()
        .map(|(name, check)| (name, check(fabric)))
        .collect()
}

/// Runs `programs[i]` on `nodes[i]`, each on its own OS thread, until all finish or `limit`
/// passes: the runner for real fabrics (threaded, TCP, RDMA), where programs must truly race.
/// An idle program parks its node for up to a millisecond.
pub fn run_on_threads<T: Transport + Send>(
    nodes: &mut [T],
    programs: Vec<Slot<'_, T>>,
    limit: Duration,
) -> Result<(), Stalled> {
    let start = std::time::Instant::now();
    let unfinished: Vec<usize> = std::thread::scope(|scope| {
        let handles: Vec<_> = nodes
            .iter_mut()
            .zip(programs)
            .enumerate()
            .filter_map(|(i, (node, prog))| prog.map(|p| (i, node, p)))
            .map(|(i, node, mut prog)| {
                scope.spawn(move || {
                    loop {
                        match prog.step(node) {
                            Progress::Done => return None,
                            Progress::Busy => {}
                            Progress::Idle => node.wait(Duration::from_millis(1)),
                        }
                        if start.elapsed() > limit {
                            return Some(i);
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    if unfinished.is_empty() {
        Ok(())
    } else {
        Err(Stalled {
            after: start.elapsed(),
            unfinished,
        })
    }
}

/// Drains every pending event of `node` into `f`, without allocating.
///
/// ```
/// # fn demo<T: squall_transport::Transport>(node: &mut T) {
/// let mut n = 0;
/// squall_transport::conformance::drain(node, |_event| n += 1);
/// # }
/// ```
pub fn drain<T: Transport>(node: &mut T, mut f: impl FnMut(Event)) -> usize {
    let mut buf = [Event::PeerFailed {
        peer: NodeId(u32::MAX),
        cause: crate::FailureCause::Local,
    }; 64];
    let mut total = 0;
    loop {
        let n = node.poll(&mut buf);
        for e in &buf[..n] {
            f(*e);
        }
        total += n;
        if n < buf.len() {
            return total;
        }
    }
}

/// Expands to one `#[test]` per conformance check, each building its fabric with `$make`.
///
/// ```ignore
/// squall_transport::conformance_tests!(my_fabric::Fabric::new(Default::default()));
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@each $make;
            fifo_per_link, fence_makes_writes_visible, no_torn_words, cas_linearizable,
            fetch_add_exact, reads_see_applied_state, messages_intact_and_ordered,
            bad_ops_refused, peer_failure_reported_once, timeouts_fire,
            failed_peer_writes_dropped, failed_peer_in_flight_writes_dropped, late_links,
            rejoin_new_incarnation,
            absent_peer_reported_failed);
    };
    (@each $make:expr; $($check:ident),*) => {
        $(
            #[test]
            fn $check() {
                let mut fabric = $make;
                if let Err(v) = $crate::conformance::$check(&mut fabric) {
                    panic!("{} on {}", v, $crate::conformance::Fabric::name(&fabric));
                }
            }
        )*
    };
}
