//! Conformance harnesses for both in-process fabrics.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use squall_transport::conformance::{Fabric, Progress, Slot, Stalled, run_on_threads};
use squall_transport::{NodeId, RegionSpec, Transport};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric, ThreadedNode};

/// The threaded fabric: one OS thread per program, real races.
pub struct Threaded {
    pub fabric: ThreadedFabric,
    /// Late nodes not started yet, the next one last.
    waiting: Vec<ThreadedNode>,
}

impl Threaded {
    pub fn new() -> Threaded {
        Threaded {
            fabric: ThreadedFabric::new(ThreadedConfig {
                op_timeout: Duration::from_millis(50),
                ..Default::default()
            })
            .expect("valid config"),
            waiting: Vec::new(),
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
        run_on_threads(nodes, programs, Duration::from_secs(20))
    }

    fn crash(&mut self, nodes: &mut [ThreadedNode], victim: NodeId) {
        nodes[0].faults().crash(victim);
    }

    fn restart(&mut self, nodes: &mut [ThreadedNode], victim: NodeId) -> Option<u64> {
        let faults = nodes[victim.index()].faults();
        nodes[victim.index()] = faults.restart_node(victim)?;
        Some(faults.incarnation(victim))
    }

    fn partition(&mut self, nodes: &mut [ThreadedNode], a: NodeId, b: NodeId) -> bool {
        nodes[0].faults().partition(a, b);
        true
    }

    fn build_late(
        &mut self,
        n: usize,
        started: usize,
        layout: &[RegionSpec],
    ) -> Option<Vec<ThreadedNode>> {
        let late: Vec<NodeId> = (started as u32..n as u32).map(NodeId).collect();
        let mut all = self
            .fabric
            .cluster_late(n, layout, &late)
            .expect("valid cluster");
        self.waiting = all.split_off(started);
        self.waiting.reverse();
        Some(all)
    }

    fn start_late(&mut self, nodes: &mut Vec<ThreadedNode>) {
        if let Some(node) = self.waiting.pop() {
            node.faults().start_node(node.local_id());
            nodes.push(node);
        }
    }

    fn timeout(&self) -> Duration {
        self.fabric.config().op_timeout
    }
}

use squall_transport_mem::sim::{Sabotage, Sim, SimConfig, SimNode};

/// The simulated fabric: programs interleaved with scheduler steps, all chosen by the seed.
pub struct Simulated {
    pub config: SimConfig,
    pub sim: Option<Sim>,
    builds: u64,
    /// Late nodes not started yet, the next one last.
    waiting: Vec<SimNode>,
}

impl Simulated {
    pub fn new(seed: u64) -> Simulated {
        Simulated::with(SimConfig::seeded(seed))
    }

    pub fn sabotaged(seed: u64, sabotage: Sabotage) -> Simulated {
        Simulated::with(SimConfig {
            sabotage,
            ..SimConfig::seeded(seed)
        })
    }

    pub fn with(config: SimConfig) -> Simulated {
        Simulated {
            config,
            sim: None,
            builds: 0,
            waiting: Vec::new(),
        }
    }

    fn sim(&self) -> &Sim {
        self.sim.as_ref().expect("build() was called first")
    }
}

impl Simulated {
    fn build_with_late(
        &mut self,
        n: usize,
        layout: &[RegionSpec],
        late: &[NodeId],
    ) -> Vec<SimNode> {
        // Each cluster of one check gets its own seed derived from the fabric's.
        let seed = self
            .config
            .seed
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(self.builds);
        self.builds += 1;
        let (sim, nodes) = Sim::cluster_late(
            SimConfig {
                seed,
                ..self.config.clone()
            },
            n,
            layout,
            late,
        )
        .expect("valid sim");
        self.sim = Some(sim);
        nodes
    }
}

impl Fabric for Simulated {
    type Node = SimNode;

    fn name(&self) -> String {
        format!("mem-sim(seed={})", self.config.seed)
    }

    fn build(&mut self, n: usize, layout: &[RegionSpec]) -> Vec<SimNode> {
        self.build_with_late(n, layout, &[])
    }

    fn build_late(
        &mut self,
        n: usize,
        started: usize,
        layout: &[RegionSpec],
    ) -> Option<Vec<SimNode>> {
        let late: Vec<NodeId> = (started as u32..n as u32).map(NodeId).collect();
        let mut all = self.build_with_late(n, layout, &late);
        self.waiting = all.split_off(started);
        self.waiting.reverse();
        Some(all)
    }

    fn start_late(&mut self, nodes: &mut Vec<SimNode>) {
        if let Some(node) = self.waiting.pop() {
            self.sim().start_node(node.local_id());
            nodes.push(node);
        }
    }

    fn run(
        &mut self,
        nodes: &mut [SimNode],
        programs: Vec<Slot<'_, SimNode>>,
    ) -> Result<(), Stalled> {
        let sim = self.sim().clone();
        let start = sim.now();
        let deadline = start + sim.op_timeout() * 200;
        let mut programs: Vec<_> = programs
            .into_iter()
            .map(|p| p.map(|p| (p, false)))
            .collect();
        loop {
            for (i, slot) in programs.iter_mut().enumerate() {
                if let Some((prog, done)) = slot {
                    if !*done && sim.takes_turn(NodeId(i as u32)) {
                        *done = prog.step(&mut nodes[i]) == Progress::Done;
                    }
                }
            }
            let unfinished: Vec<usize> = programs
                .iter()
                .enumerate()
                .filter(|(_, s)| matches!(s, Some((_, false))))
                .map(|(i, _)| i)
                .collect();
            if unfinished.is_empty() {
                return Ok(());
            }
            if sim.now() > deadline {
                return Err(Stalled {
                    after: sim.now() - start,
                    unfinished,
                });
            }
            let burst = 1 + sim.random(3);
            let progressed = (0..burst).filter(|_| sim.step()).count();
            if progressed == 0 {
                // Nothing in flight: the programs wait on each other or on time itself.
                sim.advance(Duration::from_micros(2));
            }
        }
    }

    fn crash(&mut self, _nodes: &mut [SimNode], victim: NodeId) {
        self.sim().crash(victim);
    }

    fn restart(&mut self, nodes: &mut [SimNode], victim: NodeId) -> Option<u64> {
        nodes[victim.index()] = self.sim().restart_node(victim)?;
        Some(self.sim().incarnation(victim))
    }

    fn partition(&mut self, _nodes: &mut [SimNode], a: NodeId, b: NodeId) -> bool {
        self.sim().partition(&[a], &[b]);
        true
    }

    fn timeout(&self) -> Duration {
        self.config.op_timeout
    }
}
