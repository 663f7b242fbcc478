//! Conformance harnesses for both in-process fabrics.
#![allow(dead_code, unreachable_pub)]

use std::time::{Duration, Instant};

use squall_transport::conformance::{Fabric, Progress, Slot, Stalled};
use squall_transport::{NodeId, RegionSpec};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric, ThreadedNode};

/// The threaded fabric: one OS thread per program, real races.
pub struct Threaded {
    pub fabric: ThreadedFabric,
}

impl Threaded {
    pub fn new() -> Threaded {
        Threaded {
            fabric: ThreadedFabric::new(ThreadedConfig {
                op_timeout: Duration::from_millis(50),
                ..Default::default()
            })
            .expect("valid config"),
        }
    }
}

impl Fabric for Threaded {
    type Node = ThreadedNode;

    fn name(&self) -> String {
        "mem-threaded".into()
    }

    fn build(&mut self, n: usize, layout: &[RegionSpec]) -> Vec<ThreadedNode> {
        self.fabric.cluster(n, layout).expect("valid cluster")
    }

    fn run(
        &mut self,
        nodes: &mut [ThreadedNode],
        programs: Vec<Slot<'_, ThreadedNode>>,
    ) -> Result<(), Stalled> {
        let limit = Duration::from_secs(20);
        let start = Instant::now();
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
                                Progress::Idle => squall_transport::Transport::wait(
                                    node,
                                    Duration::from_millis(1),
                                ),
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
                .filter_map(|h| h.join().expect("program panicked"))
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

    fn crash(&mut self, nodes: &mut [ThreadedNode], victim: NodeId) {
        nodes[0].faults().crash(victim);
    }

    fn partition(&mut self, nodes: &mut [ThreadedNode], a: NodeId, b: NodeId) -> bool {
        nodes[0].faults().partition(a, b);
        true
    }

    fn timeout(&self) -> Duration {
        self.fabric.config().op_timeout
    }
}
