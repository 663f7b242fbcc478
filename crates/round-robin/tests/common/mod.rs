//! A simulated round-robin group: every node's program and the fabric's steps interleaved by
//! the seed, with slow nodes and crashes; test messages that carry their sender, index and a
//! checksum, so a null, a torn or an invented message can never pass for a real one.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use squall_ordering::check::History;
use squall_ordering::{Delivery, TotalOrder, Upcall};
use squall_round_robin::{Config, Mode, RoundRobin};
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

/// Detector timing for simulations: the sim's op timeout is 1 ms.
pub fn sim_config(n: usize) -> Config {
    Config {
        heartbeat_interval: Duration::from_micros(50),
        suspicion_timeout: Duration::from_micros(1500),
        ..Config::new((0..n as u32).map(NodeId).collect())
    }
}

pub struct Group {
    pub sim: Sim,
    pub nodes: Vec<Option<RoundRobin<SimNode>>>,
    pub n: usize,
    pub history: History<(u32, u64)>,
    /// Per node: positions delivered so far (the next expected position).
    pub next_position: Vec<u64>,
    /// Per node: whether it reported a wedge.
    pub wedged: Vec<bool>,
    /// Per node: the delivered messages in order.
    pub delivered: Vec<Vec<(u32, u64)>>,
    /// Per node: the highest durable position reported.
    pub durable: Vec<Option<u64>>,
    pub upcalls: Vec<Upcall<Delivery>>,
}

impl Group {
    pub fn new(seed: u64, cfgs: Vec<Config>) -> Group {
        let n = cfgs.len();
        let layout = RoundRobin::<SimNode>::layout(&cfgs[0]).expect("valid config");
        let (sim, endpoints) =
            Sim::cluster(SimConfig::seeded(seed), n, &layout).expect("valid sim");
        let nodes = endpoints
            .into_iter()
            .zip(cfgs)
            .map(|(t, c)| Some(RoundRobin::new(t, c).expect("valid group")))
            .collect();
        Group {
            sim,
            nodes,
            n,
            history: History::new(),
            next_position: vec![0; n],
            wedged: vec![false; n],
            delivered: vec![Vec::new(); n],
            durable: vec![None; n],
            upcalls: Vec::new(),
        }
    }

    pub fn is_live(&self, i: usize) -> bool {
        self.nodes[i].is_some()
    }

    pub fn crash(&mut self, i: usize) {
        self.sim.crash(NodeId(i as u32));
        self.nodes[i] = None;
        self.history.crash(NodeId(i as u32));
    }

    pub fn turns(&mut self) -> Vec<usize> {
        (0..self.n)
            .filter(|&i| self.is_live(i) && self.sim.takes_turn(NodeId(i as u32)))
            .collect()
    }

    pub fn step_fabric(&mut self) {
        let quantum = self.sim.random(3001);
        self.sim.advance(Duration::from_nanos(quantum));
    }

    /// Submits test message `index` of node `i` with `len` bytes; records it when accepted.
    pub fn submit(
        &mut self,
        i: usize,
        index: u64,
        len: usize,
    ) -> Result<(), squall_ordering::SubmitError> {
        let node = self.nodes[i].as_mut().expect("live");
        node.submit(&encode(i as u32, index, len))?;
        self.history
            .submit(NodeId(i as u32), (i as u32, index), &[]);
        Ok(())
    }

    /// Polls node `i` and records and checks what it reports: positions gapless from 0, every
    /// delivered payload a genuine test message from the sender it is attributed to, nothing
    /// delivered after a wedge.
    pub fn poll(&mut self, i: usize) -> Result<bool, String> {
        let node = self.nodes[i].as_mut().expect("live");
        self.upcalls.clear();
        let busy = node.poll(&mut self.upcalls);
        for u in self.upcalls.drain(..) {
            match u {
                Upcall::Deliver(d) => {
                    if self.wedged[i] {
                        return Err(format!("n{i} delivered {:?} after its wedge", d.position));
                    }
                    if d.position != self.next_position[i] {
                        return Err(format!(
                            "n{i} delivered position {} expected {} (gap or repeat)",
                            d.position, self.next_position[i]
                        ));
                    }
                    self.next_position[i] += 1;
                    let (s, idx) = check(&d.payload)
                        .map_err(|e| format!("n{i} delivered a bad payload: {e}"))?;
                    if NodeId(s) != d.sender {
                        return Err(format!("n{i}: message of n{s} attributed to {}", d.sender));
                    }
                    self.history.deliver(NodeId(i as u32), (s, idx), d.position);
                    self.delivered[i].push((s, idx));
                }
                Upcall::Durable(p) => {
                    if p >= self.next_position[i] {
                        return Err(format!("n{i}: durable {p} before delivering it"));
                    }
                    if self.durable[i].is_some_and(|q| q >= p) {
                        return Err(format!(
                            "n{i}: durable went back from {:?} to {p}",
                            self.durable[i]
                        ));
                    }
                    self.durable[i] = Some(p);
                }
                Upcall::Wedged => {
                    if self.wedged[i] {
                        return Err(format!("n{i} reported its wedge twice"));
                    }
                    self.wedged[i] = true;
                }
                other => return Err(format!("n{i}: unexpected upcall {other:?}")),
            }
        }
        Ok(busy)
    }

    /// The checkers over the recorded history.
    pub fn check_history(&self, correct: &[NodeId]) -> Result<(), String> {
        let h = &self.history;
        h.check_integrity().map_err(|e| e.to_string())?;
        h.check_positions().map_err(|e| e.to_string())?;
        h.check_total_order().map_err(|e| e.to_string())?;
        if !correct.is_empty() {
            h.check_agreement(correct).map_err(|e| e.to_string())?;
            h.check_validity(correct).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// `cfg` in durable mode with its log at `path`, never synced.
pub fn durable(cfg: Config, path: std::path::PathBuf) -> Config {
    durable_with(cfg, path, squall_round_robin::FsyncPolicy::Never)
}

/// `cfg` in durable mode with its log at `path` under `fsync`.
pub fn durable_with(
    cfg: Config,
    path: std::path::PathBuf,
    fsync: squall_round_robin::FsyncPolicy,
) -> Config {
    Config {
        mode: Mode::Durable { path, fsync },
        ..cfg
    }
}

/// Per member `i` of `n`: `base` in durable mode, its log at `dir/n{i}.log` under `fsync`.
pub fn durable_members(
    base: &Config,
    dir: &std::path::Path,
    n: usize,
    fsync: squall_round_robin::FsyncPolicy,
) -> Vec<Config> {
    (0..n)
        .map(|i| durable_with(base.clone(), dir.join(format!("n{i}.log")), fsync))
        .collect()
}

/// A scratch file `name` in this test process's directory `squall-rr-<tag>-<pid>` under the
/// system's temporary directory (created).
pub fn scratch_file(tag: &str, name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("squall-rr-{tag}-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&d) {
        panic!("creating the scratch directory {}: {e}", d.display());
    }
    d.join(name)
}

/// Removes a log, its index and the temporary files of a compaction.
pub fn remove_log(path: &std::path::Path) {
    use squall_round_robin::log;
    for p in [
        path.to_path_buf(),
        log::index_path(path),
        log::compact_tmp_path(path),
        log::index_tmp_path(path),
    ] {
        let _ = std::fs::remove_file(p);
    }
}

/// A test message: sender, index, a pattern, and a checksum of all that.
pub fn encode(sender: u32, index: u64, len: usize) -> Vec<u8> {
    let len = len.max(20);
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

/// Checks a delivered payload and returns its (sender, index).
pub fn check(m: &[u8]) -> Result<(u32, u64), String> {
    if m.len() < 20 {
        return Err(format!("{} bytes: not a test message (a null?)", m.len()));
    }
    let (body, sum) = m.split_at(m.len() - 8);
    let mut s = [0u8; 8];
    s.copy_from_slice(sum);
    if checksum(body) != u64::from_le_bytes(s) {
        return Err("checksum mismatch (torn, overwritten or invented)".into());
    }
    let mut w = [0u8; 4];
    w.copy_from_slice(&body[..4]);
    let mut x = [0u8; 8];
    x.copy_from_slice(&body[4..12]);
    Ok((u32::from_le_bytes(w), u64::from_le_bytes(x)))
}
