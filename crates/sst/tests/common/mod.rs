//! A simulated cluster of tables: programs interleaved with scheduler steps, all chosen by the
//! seed, with slow nodes and crashes.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use squall_sst::{Counter, Flag, Schema, SchemaBuilder, Smc, SmcConfig, SmcFields, Sst, SstConfig};
use squall_transport::{NodeId, RegionId, RegionSpec};
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

pub const REGION: RegionId = RegionId(0);

/// The fields every test table has.
#[derive(Clone, Copy, Debug)]
pub struct Fields {
    pub count: Counter,
    pub flag: Flag,
    pub smc: SmcFields,
}

pub fn schema(n: usize, smc: SmcConfig) -> (Schema, Fields) {
    let mut b = SchemaBuilder::new(n);
    let count = b.counter("count");
    let flag = b.flag("flag");
    let smc = Smc::declare(&mut b, smc).expect("valid smc config");
    (
        b.build().expect("valid schema"),
        Fields { count, flag, smc },
    )
}

/// Detector timing used in simulations: the sim's op timeout is 1 ms.
pub fn sst_config(n: usize) -> SstConfig {
    SstConfig {
        heartbeat_interval: Duration::from_micros(50),
        suspicion_timeout: Duration::from_micros(1500),
        ..SstConfig::new(REGION, (0..n as u32).map(NodeId).collect())
    }
}

pub struct Cluster {
    /// Nodes whose table is not polled any more (a hung process: links stay up).
    pub hung: Vec<bool>,
    /// The error each node stopped with, if any.
    pub stopped: Vec<Option<squall_sst::SstError>>,
    pub sim: Sim,
    pub nodes: Vec<Option<Sst<SimNode>>>,
    pub smc: Vec<Smc>,
    pub fields: Fields,
    pub n: usize,
}

impl Cluster {
    pub fn new(seed: u64, n: usize, smc: SmcConfig) -> Cluster {
        Cluster::with(seed, n, smc, sst_config(n))
    }

    pub fn with(seed: u64, n: usize, smc: SmcConfig, cfg: SstConfig) -> Cluster {
        Cluster::with_sim(SimConfig::seeded(seed), n, smc, cfg)
    }

    pub fn with_sim(sim_cfg: SimConfig, n: usize, smc: SmcConfig, cfg: SstConfig) -> Cluster {
        let (schema, fields) = schema(n, smc);
        let (sim, endpoints) =
            Sim::cluster(sim_cfg, n, &[RegionSpec::new(REGION, schema.table_len())])
                .expect("valid sim");
        let mut nodes: Vec<Option<Sst<SimNode>>> = endpoints
            .into_iter()
            .map(|t| Some(Sst::new(t, schema.clone(), cfg.clone()).expect("valid table")))
            .collect();
        let smc = nodes
            .iter_mut()
            .map(|s| Smc::new(fields.smc, s.as_mut().expect("just built")))
            .collect();
        Cluster {
            hung: vec![false; n],
            stopped: vec![None; n],
            sim,
            nodes,
            smc,
            fields,
            n,
        }
    }

    pub fn sst(&mut self, i: usize) -> &mut Sst<SimNode> {
        self.nodes[i].as_mut().expect("node is live")
    }

    pub fn is_live(&self, i: usize) -> bool {
        self.nodes[i].is_some()
    }

    /// Crashes node `i`: the fabric stops it and its table is dropped.
    pub fn crash(&mut self, i: usize) {
        self.sim.crash(NodeId(i as u32));
        self.nodes[i] = None;
    }

    /// Lets the fabric move by a random quantum of 0–3 µs of virtual time, applying what
    /// becomes ready meanwhile (in the seed's random order across links). Time never jumps
    /// ahead of the programs: a real node is never frozen for a whole op timeout between two
    /// rounds, so a jump would only cause false suspicions.
    pub fn step_fabric(&mut self) {
        let quantum = self.sim.random(3001);
        self.sim.advance(Duration::from_nanos(quantum));
    }

    /// The live nodes that take a turn this round (slow nodes skip rounds).
    pub fn turns(&mut self) -> Vec<usize> {
        (0..self.n)
            .filter(|&i| self.is_live(i) && self.sim.takes_turn(NodeId(i as u32)))
            .collect()
    }
}

/// A test message: sender, index, a length-dependent pattern, and a checksum of all that.
pub fn encode(sender: u32, index: u64, len: usize) -> Vec<u8> {
    assert!(len >= 20);
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&sender.to_le_bytes());
    m.extend_from_slice(&index.to_le_bytes());
    for i in 0..len - 20 {
        m.push((index as usize * 31 + i * 7 + sender as usize) as u8);
    }
    let sum = checksum(&m);
    m.extend_from_slice(&sum.to_le_bytes());
    m
}

fn checksum(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Checks a delivered message: its tag must name `from` and `index`, its checksum must hold.
pub fn check(from: NodeId, index: u64, m: &[u8]) -> Result<(), String> {
    if m.len() < 20 {
        return Err(format!("message {index} from {from} is {} bytes", m.len()));
    }
    let (body, sum) = m.split_at(m.len() - 8);
    let mut s = [0u8; 8];
    s.copy_from_slice(sum);
    if checksum(body) != u64::from_le_bytes(s) {
        return Err(format!(
            "message {index} from {from}: checksum mismatch (torn or overwritten slot)"
        ));
    }
    let mut w = [0u8; 4];
    w.copy_from_slice(&m[..4]);
    let mut x = [0u8; 8];
    x.copy_from_slice(&m[4..12]);
    if u32::from_le_bytes(w) != from.0 || u64::from_le_bytes(x) != index {
        return Err(format!(
            "slot for message {index} from {from} holds message {} from n{}",
            u64::from_le_bytes(x),
            u32::from_le_bytes(w)
        ));
    }
    Ok(())
}

impl Cluster {
    /// One round: every live, unhung, unstopped node that takes its turn polls its table once;
    /// then the fabric moves.
    pub fn round(&mut self) {
        for i in self.turns() {
            if self.hung[i] || self.stopped[i].is_some() {
                continue;
            }
            if let Err(e) = self.sst(i).poll_once() {
                self.stopped[i] = Some(e);
            }
        }
        self.step_fabric();
    }

    /// Runs rounds until `done` holds or `limit` of virtual time passes; returns whether `done`.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&Cluster) -> bool) -> bool {
        let end = self.sim.now() + limit;
        while self.sim.now() < end {
            if done(self) {
                return true;
            }
            self.round();
        }
        done(self)
    }

    /// Whether node `i` is live, unhung and running.
    pub fn running(&self, i: usize) -> bool {
        self.is_live(i) && !self.hung[i] && self.stopped[i].is_none()
    }

    pub fn table(&self, i: usize) -> &Sst<SimNode> {
        self.nodes[i].as_ref().expect("node is live")
    }
}

// ---- one cut link ----------------------------------------------------------------------------

/// How one cut-link run ended.
#[derive(Debug)]
pub struct CutOutcome {
    /// The endpoints of the cut link.
    pub ends: [usize; 2],
    /// Members lost: stopped, or suspected by a member still running.
    pub lost: Vec<usize>,
    /// Whether the running members agreed on exactly `lost`, and every lost member stopped.
    pub settled: bool,
}

/// Members stopped, or suspected by some running member.
pub fn lost(c: &Cluster) -> Vec<usize> {
    (0..c.n)
        .filter(|&i| {
            c.stopped[i].is_some() || (0..c.n).any(|j| c.running(j) && c.table(j).is_suspected(i))
        })
        .collect()
}

/// Every running member suspects exactly the lost members, and every lost member stopped.
pub fn settled(c: &Cluster) -> bool {
    let lost = lost(c);
    (0..c.n).all(|i| {
        if lost.contains(&i) {
            c.stopped[i].is_some()
        } else {
            c.running(i) && (0..c.n).all(|j| c.table(i).is_suspected(j) == lost.contains(&j))
        }
    })
}

/// Five members; after a random warm-up the link between two of them (chosen by the seed) is
/// cut, both ways, and nothing else fails. Runs until the table settles, at least 5 ms after
/// the cut so a late cascade would still show (or 20 ms of virtual time pass).
pub fn cut_link_run(seed: u64, cfg: SstConfig) -> CutOutcome {
    let n = cfg.members.len();
    let smc = SmcConfig {
        window: 2,
        slot_size: 32,
    };
    let mut c = Cluster::with(seed, n, smc, cfg);
    let a = c.sim.random(n as u64) as usize;
    let b = (a + 1 + c.sim.random(n as u64 - 1) as usize) % n;
    let warmup = Duration::from_micros(100 + c.sim.random(2000));
    c.run_until(warmup, |_| false);
    c.sim.partition(&[NodeId(a as u32)], &[NodeId(b as u32)]);
    let cut_at = c.sim.now();
    c.run_until(Duration::from_millis(20), |c| {
        c.sim.now() - cut_at > Duration::from_millis(5) && settled(c)
    });
    CutOutcome {
        ends: [a, b],
        lost: lost(&c),
        settled: settled(&c),
    }
}

/// Runs [`cut_link_run`] over the seed sweep (`SQUALL_SEEDS`, default 40), prints the figure
/// (`--nocapture`) and returns the runs.
pub fn cut_link_sweep(cfg: SstConfig) -> Vec<(u64, CutOutcome)> {
    let runs: Vec<(u64, CutOutcome)> = squall_transport_mem::sim::seeds(40)
        .into_iter()
        .map(|s| (s, cut_link_run(s, cfg.clone())))
        .collect();
    let n = cfg.members.len();
    let total: usize = runs.iter().map(|(_, o)| o.lost.len()).sum();
    let both = runs
        .iter()
        .filter(|(_, o)| o.ends.iter().all(|e| o.lost.contains(e)))
        .count();
    let beyond = runs
        .iter()
        .filter(|(_, o)| o.lost.iter().any(|m| !o.ends.contains(m)))
        .count();
    let everyone = runs.iter().filter(|(_, o)| o.lost.len() == n).count();
    eprintln!(
        "one cut link, {n} members, {} seeds: {:.2} members lost on average; both endpoints lost \
         in {both}, a third member in {beyond}, everyone in {everyone}",
        runs.len(),
        total as f64 / runs.len() as f64,
    );
    runs
}
