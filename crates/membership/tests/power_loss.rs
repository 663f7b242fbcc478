//! Power-loss tests of the durable files: what each `fsync` promises, checked.
//!
//! The simulator's crash tests only see *process* crashes, where every `write` reaches the
//! file. Here the file-system operations of a real durable workload are recorded with
//! `strace`, fed to a model of what a power loss keeps ([`power_loss::model`]), and every crash
//! state the model allows at the chosen points is materialised in a scratch directory and
//! restarted from (a total restart of real `Group`s with `FileLog`s on the simulator fabric).
//!
//! **The workload** ([`workload_child`], the test binary re-run under `strace` with that
//! ignored test as its entry point): four nodes on the simulator, `0..3` the first view, each
//! with its GMS log (`FileLog`, `Installed` synced: the default) and `FsyncPolicy::EveryBatch`
//! epochs in its own directory; a hash-chain application checkpoints every few deliveries
//! (`Group::checkpoint`); node 3 joins by state transfer (view 1: its transferred state is
//! written as a snapshot file), and later node 2 is crashed and removed (view 2). It prints a
//! marker line to stdout, in the same trace, for each thing it was promised is durable:
//!
//! ```text
//! PL-START                         everything before is the harness's (durable)
//! PL-VIEW <node> <view>            the View upcall: its Installed record was synced first
//! PL-DURABLE <node> <position>     Upcall::Durable: every position up to it is persisted by
//!                                  every member of the view (EveryBatch: fdatasync'ed)
//! PL-CKPT <node> <position>        take_checkpoint_outcome said Written (file, directory and
//!                                  record synced)
//! PL-CHAIN <p>:<hash>,…            at the end: the chain value after every position
//! ```
//!
//! **The checks**, per crash state: every member's GMS log opens (or fails with a typed
//! `LogError`, never a panic) and holds every view the node was told it installed and every
//! checkpoint it was told is written, whose file reads back; then the total restart of every
//! node with a log completes, without a panic, and every member of the last logged view runs
//! the restart view past every position any node was told is durable, delivering and
//! restoring only values of the recorded chain.
//!
//! A restart that does not complete is a failure, a power loss during the very first start
//! included (tolerated as the "start-up window" until s19's fix); a member
//! refused with a typed error over a file none of whose bytes were ever synced (a new log
//! whose header the crash tore) is reported, and that state's restart not attempted.
//!
//! Three checks, one per model (see `power_loss/model.rs`): ext4's journal
//! ([`a_power_loss_on_ext4_keeps_every_durable_promise`]), strict POSIX
//! ([`a_power_loss_under_strict_posix_keeps_every_durable_promise`]; it found the epoch logs'
//! unsynced directory entries, fixed in s19) and strict POSIX with only the
//! epoch logs' entries taken as ext4 makes them
//! ([`a_power_loss_under_strict_posix_keeps_every_durable_promise_but_the_epoch_log_entries`]).
//!
//! Knobs: `SQUALL_POWER_LOSS_STATES=<n>` crash states per check (default 24: half at sync
//! points, spread quadratically so the early run where files are new is denser, with nothing
//! unsynced kept; half at random calls with random choices), `SQUALL_POWER_LOSS_SEED=<s>`
//! (the workload's and the choices' seed, default 7). The tests skip, saying why, when
//! `strace` is missing or `ptrace` is refused. See `docs/MEMBERSHIP.md`, twentieth part.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::FileLog;
use squall_membership::snapshot::{CheckpointError, Checkpointed};
use squall_ordering::{Delivery, View};
use squall_round_robin::{FsyncPolicy, Mode};
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

mod group_sim;
mod power_loss {
    pub mod model;
    pub mod trace;
}
use group_sim::chain::{self, App, Checked, Hooks, Nodes, Outcome, Started};
use power_loss::model::{Fs, Keep, Model, Rng};
use power_loss::trace;

/// Universe: view 0 is `0..3`, node 3 joins.
const U: usize = 4;
/// Checkpoint every this many deliveries.
const EVERY: u64 = 12;
/// The GMS log's name in a node's directory.
const GMS: &str = "gms.log";

fn config(base: &Path, i: usize) -> GroupConfig {
    // The checkpoint's file work inside the call (the thread writer runs the same file code).
    let mut cfg = chain::checkpoint_config(U, 3);
    cfg.epoch.mode = Mode::Durable {
        path: node_dir(base, i),
        fsync: FsyncPolicy::EveryBatch,
    };
    cfg
}

fn node_dir(base: &Path, i: usize) -> PathBuf {
    base.join(format!("n{i}"))
}

/// One marker line, in one `write` (so it has one place in the trace).
fn mark(line: &str) {
    let mut out = std::io::stdout().lock();
    out.write_all(format!("{line}\n").as_bytes()).unwrap();
    out.flush().unwrap();
}

/// Per position: the chain value after it.
type Chain = BTreeMap<u64, u64>;

/// A cluster of `Group`s with file logs on the simulator.
struct Run {
    /// The nodes, their applications and the positions of the states they restored.
    n: Nodes<FileLog>,
    /// Print the markers (the traced workload) or not (a restart).
    marking: bool,
    /// Checkpoint (the workload) or not.
    checkpoints: bool,
    written: Vec<u64>,
    views: Vec<u64>,
}

impl Run {
    fn step(&mut self, chain: &mut Chain, submit: bool) -> Result<(), String> {
        let mut checks = Checks {
            chain,
            marking: self.marking,
            checkpoints: self.checkpoints,
            written: &mut self.written,
            views: &mut self.views,
        };
        self.n.step(submit, &mut checks)
    }

    fn run_until(
        &mut self,
        chain: &mut Chain,
        submit: bool,
        steps: usize,
        done: impl Fn(&Run) -> bool,
    ) -> Result<bool, String> {
        for _ in 0..steps {
            if done(self) {
                return Ok(true);
            }
            self.step(chain, submit)?;
        }
        Ok(done(self))
    }
}

/// This suite's part of a step: the markers (the traced workload); the recorded chain
/// (a restart checks against it, the workload records it); checkpoints every [`EVERY`]
/// deliveries if `checkpoints`.
struct Checks<'a> {
    chain: &'a mut Chain,
    marking: bool,
    checkpoints: bool,
    written: &'a mut [u64],
    views: &'a mut [u64],
}

impl Hooks<FileLog> for Checks<'_> {
    fn checkpoint_ended(&mut self, i: usize, out: Outcome, _in_flight: Option<u64>) -> Checked {
        // The poll logged the record of the checkpoint started in the previous step: only
        // now is it durable (a view change in between abandons it).
        match out {
            Some(Ok(Checkpointed::Written { position, .. })) => {
                if self.marking {
                    mark(&format!("PL-CKPT {i} {position}"));
                }
                self.written[i] += 1;
                Ok(())
            }
            Some(Err(CheckpointError::Abandoned { .. })) | None => Ok(()),
            Some(other) => Err(format!("n{i}: checkpoint ended {other:?}")),
        }
    }

    fn view(&mut self, i: usize, v: &View) {
        if self.marking {
            mark(&format!("PL-VIEW {i} {}", v.id));
        }
        self.views[i] = v.id;
    }

    fn restored(&mut self, i: usize, position: u64, hash: u64) -> Result<(), String> {
        if let Some(p) = position.checked_sub(1)
            && !self.marking
            && self.chain.get(&p) != Some(&hash)
        {
            return Err(format!(
                "n{i}: restored state at {position} is not the recorded chain"
            ));
        }
        Ok(())
    }

    fn delivered(&mut self, i: usize, d: &Delivery, hash: u64) -> Result<(), String> {
        if self.marking {
            if let Some(h) = self.chain.insert(d.position, hash)
                && h != hash
            {
                return Err(format!("n{i}: position {} differs", d.position));
            }
        } else if let Some(&h) = self.chain.get(&d.position)
            && h != hash
        {
            return Err(format!(
                "n{i}: position {} after the restart is not the recorded chain",
                d.position
            ));
        }
        Ok(())
    }

    fn durable(&mut self, i: usize, position: u64) {
        if self.marking {
            mark(&format!("PL-DURABLE {i} {position}"));
        }
    }

    fn checkpoint_due(&self, _i: usize, app: &App, _g: &Group<SimNode, FileLog>) -> bool {
        self.checkpoints && app.next >= app.checkpointed + EVERY
    }

    fn checkpoint_started(&mut self, i: usize, at: u64, r: Started) -> Checked {
        match r {
            Ok(Checkpointed::Started { .. }) => Ok(()),
            Ok(other) => Err(format!("n{i}: checkpoint: {other:?}")),
            Err(CheckpointError::NotNow(_) | CheckpointError::InFlight { .. }) => Ok(()),
            Err(e) => Err(format!("n{i}: checkpoint at {at}: {e}")),
        }
    }
}

fn new_run(seed: u64, marking: bool) -> (Run, Vec<SimNode>) {
    let layout = Group::<SimNode, FileLog>::layout(&config(Path::new("/"), 0)).unwrap();
    let (sim, nodes) = Sim::cluster(SimConfig::seeded(seed), U, &layout).unwrap();
    let run = Run {
        n: Nodes::new(
            sim,
            (0..U).map(|_| None).collect(),
            vec![App::default(); U],
            Vec::new(),
        ),
        marking,
        checkpoints: marking,
        written: vec![0; U],
        views: vec![0; U],
    };
    (run, nodes)
}

/// The traced workload (run by [`record`] under strace; `PL_DIR` names the prepared tree).
#[test]
#[ignore = "entry point of the traced workload child (run by the power-loss tests)"]
fn workload_child() {
    let Ok(base) = std::env::var("PL_DIR") else {
        return;
    };
    let base = PathBuf::from(base);
    let seed: u64 = std::env::var("PL_SEED").unwrap().parse().unwrap();
    if let Err(e) = workload(&base, seed) {
        mark(&format!("PL-FAIL {e}"));
        panic!("workload: {e}");
    }
}

fn workload(base: &Path, seed: u64) -> Result<(), String> {
    mark("PL-START");
    let (mut r, nodes) = new_run(seed, true);
    let mut chain = Chain::new();
    for (i, t) in nodes.into_iter().enumerate() {
        if i < 3 {
            let (log, _) =
                FileLog::open(&node_dir(base, i).join(GMS)).map_err(|e| e.to_string())?;
            r.n.groups[i] =
                Some(Group::new(t, config(base, i), log, None).map_err(|e| e.to_string())?);
            r.n.apps[i].has_state = true;
        } else {
            r.n.sim.crash(NodeId(3));
        }
    }
    if !r.run_until(&mut chain, true, 20_000, |r| {
        r.written[..3].iter().all(|&w| w > 0)
    })? {
        return Err("no checkpoint in view 0".into());
    }
    let t =
        r.n.sim
            .restart_node(NodeId(3))
            .ok_or("node 3 cannot start")?;
    let (log, _) = FileLog::open(&node_dir(base, 3).join(GMS)).map_err(|e| e.to_string())?;
    r.n.groups[3] = Some(Group::joining(t, config(base, 3), log).map_err(|e| e.to_string())?);
    if !r.run_until(&mut chain, true, 20_000, |r| {
        r.n.groups[3].as_ref().is_some_and(Group::is_active) && r.written[3] > 0
    })? {
        return Err("node 3 never joined and checkpointed".into());
    }
    r.run_until(&mut chain, true, 150, |_| false)?;
    // A removal: view 2 without node 2.
    r.n.sim.crash(NodeId(2));
    r.n.groups[2] = None;
    if !r.run_until(&mut chain, false, 20_000, |r| r.views[0] >= 2)? {
        return Err("node 2 was never removed".into());
    }
    r.run_until(&mut chain, true, 150, |_| false)?;
    let line: Vec<String> = chain.iter().map(|(p, h)| format!("{p}:{h}")).collect();
    mark(&format!("PL-CHAIN {}", line.join(",")));
    Ok(())
}

/// What the traced workload left: its calls, the tree's root, and the tree at the end.
struct Recording {
    root: String,
    dirs: Vec<String>,
    calls: Vec<trace::Call>,
    end_tree: BTreeMap<String, Vec<u8>>,
    took: Duration,
}

const TRACED: &str = "openat,open,creat,read,lseek,write,pwrite64,writev,pwritev,pwritev2,fsync,fdatasync,\
rename,renameat,renameat2,unlink,unlinkat,ftruncate,truncate,mkdir,mkdirat,rmdir,close,fallocate,copy_file_range,sendfile";

fn seed() -> u64 {
    std::env::var("SQUALL_POWER_LOSS_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(7)
}

fn states_wanted() -> usize {
    std::env::var("SQUALL_POWER_LOSS_STATES")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(24)
        .max(2)
}

/// Every plain file under `dir` (recursively), relative path → contents.
fn read_tree(dir: &Path, rel: &str, out: &mut BTreeMap<String, Vec<u8>>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        let rel = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if e.file_type().unwrap().is_dir() {
            read_tree(&e.path(), &rel, out);
        } else {
            out.insert(rel, std::fs::read(e.path()).unwrap());
        }
    }
}

/// Runs [`workload_child`] under strace. `Ok(None)`: skipped (no strace, or ptrace refused),
/// with the reason printed.
fn record(tag: &str, seed: u64) -> Result<Option<Recording>, String> {
    if Command::new("strace").arg("-V").output().is_err() {
        println!(
            "SKIPPED: power-loss test {tag}: `strace` is not installed (apt-get install strace; .ci/run installs it)"
        );
        return Ok(None);
    }
    let base = group_sim::scratch_dir("power-loss", tag, seed);
    let dirs: Vec<PathBuf> = (0..U).map(|i| node_dir(&base, i)).collect();
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    let root = base.canonicalize().unwrap();
    let trace_file = base.with_extension("strace");
    let t0 = std::time::Instant::now();
    let out = Command::new("strace")
        .args(["-f", "-y", "-xx", "-s", "16777216", "--seccomp-bpf", "-e"])
        .arg(format!("trace={TRACED}"))
        .arg("-o")
        .arg(&trace_file)
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args([
            "workload_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PL_DIR", &root)
        .env("PL_SEED", seed.to_string())
        .env_remove("RUST_LOG")
        .output()
        .map_err(|e| format!("strace: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        if stderr.contains("ptrace")
            && (stderr.contains("Operation not permitted") || stderr.contains("EPERM"))
        {
            println!(
                "SKIPPED: power-loss test {tag}: ptrace is refused here ({})",
                stderr.lines().next().unwrap_or("")
            );
            return Ok(None);
        }
        return Err(format!(
            "the traced workload failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| !l.starts_with("PL-"))
                .collect::<Vec<_>>()
                .join("\n"),
            stderr
                .lines()
                .rev()
                .take(30)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        ));
    }
    let text = std::fs::read_to_string(&trace_file).map_err(|e| e.to_string())?;
    let calls = trace::calls(&text)?;
    let mut end_tree = BTreeMap::new();
    read_tree(&root, "", &mut end_tree);
    std::fs::remove_file(&trace_file).ok();
    std::fs::remove_dir_all(&base).ok();
    Ok(Some(Recording {
        root: root.to_string_lossy().into_owned(),
        dirs: dirs
            .iter()
            .map(|d| {
                root.join(d.file_name().unwrap())
                    .to_string_lossy()
                    .into_owned()
            })
            .collect(),
        calls,
        end_tree,
        took: t0.elapsed(),
    }))
}

/// What the markers before a crash point promise.
#[derive(Clone, Debug, Default)]
struct Promised {
    views: Vec<Option<u64>>,
    checkpoints: Vec<Option<u64>>,
    durable: Option<u64>,
}

impl Promised {
    fn add(&mut self, line: &str) -> Result<(), String> {
        let w: Vec<&str> = line.split(' ').collect();
        let num = |k: usize| -> Result<u64, String> {
            w.get(k)
                .and_then(|x| x.parse().ok())
                .ok_or_else(|| format!("bad marker {line:.60}"))
        };
        match w[0] {
            "PL-VIEW" => {
                let i = num(1)? as usize;
                self.views[i] = self.views[i].max(Some(num(2)?));
            }
            "PL-CKPT" => {
                let i = num(1)? as usize;
                self.checkpoints[i] = self.checkpoints[i].max(Some(num(2)?));
            }
            "PL-DURABLE" => self.durable = self.durable.max(Some(num(2)?)),
            _ => {}
        }
        Ok(())
    }
}

/// One crash state to check.
struct State {
    /// Calls applied before the power loss.
    point: usize,
    keep: Keep,
    tree: BTreeMap<String, Vec<u8>>,
    /// Per file: the bytes synced before the crash.
    synced: BTreeMap<String, usize>,
    promised: Promised,
}

impl State {
    /// The state a power loss leaves after the `point` calls `fs` applied.
    fn at(fs: &Fs, rng: &mut Rng, point: usize, keep: Keep, promised: &Promised) -> State {
        State {
            point,
            keep,
            tree: fs.crash(keep, rng),
            synced: fs.synced_lens(),
            promised: promised.clone(),
        }
    }
}

/// Replays the recording through the model: checks that the model with nothing lost is the
/// tree the workload left, and returns the crash states (sync points sampled evenly with
/// nothing unsynced kept, then random points with random choices) and the recorded chain.
fn crash_states(
    rec: &Recording,
    model: Model,
    exempt: Option<fn(&str) -> bool>,
    wanted: usize,
    seed: u64,
) -> Result<(Vec<State>, Chain, usize), String> {
    let new_fs = || {
        let fs = Fs::new(&rec.root, &rec.dirs, model);
        match exempt {
            Some(f) => fs.exempt(f),
            None => fs,
        }
    };
    let mut fs = new_fs();
    let mut markers = Vec::new();
    let mut syncs = Vec::new();
    for c in &rec.calls {
        if fs.is_sync(c) {
            syncs.push(fs.n);
        }
        if let Some(m) = fs.apply(c)? {
            markers.push((fs.n, m));
        }
    }
    if fs.current() != rec.end_tree {
        let a: Vec<_> = fs
            .current()
            .iter()
            .map(|(k, v)| (k.clone(), v.len()))
            .collect();
        let b: Vec<_> = rec
            .end_tree
            .iter()
            .map(|(k, v)| (k.clone(), v.len()))
            .collect();
        return Err(format!(
            "the model of the trace is not the tree the workload left:\nmodel {a:?}\ndisk  {b:?}"
        ));
    }
    let start = markers
        .iter()
        .find(|m| m.1 == "PL-START")
        .ok_or("no PL-START marker")?
        .0;
    if let Some(f) = markers.iter().find(|m| m.1.starts_with("PL-FAIL")) {
        return Err(f.1.clone());
    }
    let chain: Chain = markers
        .iter()
        .find_map(|m| m.1.strip_prefix("PL-CHAIN "))
        .ok_or("no PL-CHAIN marker")?
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (p, h) = kv.split_once(':').unwrap();
            (p.parse().unwrap(), h.parse().unwrap())
        })
        .collect();
    let end = fs.n;
    let sync_points: Vec<usize> = syncs
        .iter()
        .filter(|&&s| s > start)
        .flat_map(|&s| [s, s + 1])
        .collect();
    let mut rng = Rng::new(seed);
    let mut points: Vec<(usize, Keep)> = Vec::new();
    let even = wanted / 2;
    // Spread quadratically: denser early, where every file is new (first start, first
    // checkpoint, the join, the first view change); the rest of the run repeats itself.
    for k in 0..even {
        let at = (k * k * sync_points.len()) / (even * even);
        points.push((sync_points[at], Keep::Nothing));
    }
    for _ in even..wanted {
        let p = start + 1 + rng.below((end - start) as u64) as usize;
        points.push((p, Keep::Random));
    }
    points.sort_by_key(|p| p.0);
    let mut fs = new_fs();
    let mut promised = Promised {
        views: vec![None; U],
        checkpoints: vec![None; U],
        durable: None,
    };
    let mut states = Vec::new();
    let mut next = points.iter().peekable();
    for c in &rec.calls {
        while let Some(&(p, keep)) = next.next_if(|p| p.0 == fs.n) {
            states.push(State::at(&fs, &mut rng, p, keep, &promised));
        }
        if let Some(m) = fs.apply(c)? {
            promised.add(&m)?;
        }
    }
    for &(p, keep) in next {
        states.push(State::at(&fs, &mut rng, p, keep, &promised));
    }
    Ok((states, chain, sync_points.len() / 2))
}

/// Runs `f`, turning a panic into an error naming `what`.
fn no_panic<R>(what: &str, f: impl FnOnce() -> R) -> Result<R, String> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_default();
        format!("{what} panicked: {msg}")
    })
}

/// Materialises `st` under `base` and restarts from it; `Ok(notes)` if every promise holds.
fn check_state(st: &State, chain: &Chain, base: &Path, seed: u64) -> Result<Vec<String>, String> {
    let _ = std::fs::remove_dir_all(base);
    for i in 0..U {
        std::fs::create_dir_all(node_dir(base, i)).unwrap();
    }
    for (rel, bytes) in &st.tree {
        std::fs::write(base.join(rel), bytes).unwrap();
    }
    let mut notes = Vec::new();
    let pr = &st.promised;
    let (mut run, nodes) = new_run(seed ^ (st.point as u64) << 20, false);
    let mut logs = Vec::new();
    for i in 0..U {
        let dir = node_dir(base, i);
        let promised_any = pr.views[i].is_some() || pr.checkpoints[i].is_some();
        match no_panic("FileLog::open", || FileLog::open(&dir.join(GMS)))? {
            Err(e) if promised_any => {
                return Err(format!(
                    "n{i}: its GMS log does not open ({e}), yet it was told view {:?} and checkpoint {:?} are durable",
                    pr.views[i], pr.checkpoints[i]
                ));
            }
            Err(e) => {
                notes.push(format!("n{i}: typed error {e}"));
                logs.push(None);
            }
            Ok((log, rec)) => {
                let last = rec.last_view().map(|v| v.0);
                if pr.views[i] > last {
                    return Err(format!(
                        "n{i}: installed view {:?} (its View upcall came), but its log's last view is {last:?}",
                        pr.views[i]
                    ));
                }
                if let Some(at) = pr.checkpoints[i] {
                    match rec.last_snapshot() {
                        Some(squall_membership::log::Record::Snapshot {
                            position, file, ..
                        }) if *position >= at => {
                            no_panic("snapshot::read", || squall_membership::snapshot::read(&dir, file, 1 << 20))?
                                .map_err(|e| format!("n{i}: its log names snapshot {file}, which does not read back: {e}"))?;
                        }
                        other => {
                            return Err(format!(
                                "n{i}: checkpoint at {at} was Written, but its log's last snapshot is {other:?}"
                            ));
                        }
                    }
                }
                logs.push(Some((log, rec)));
            }
        }
    }
    let newest = logs
        .iter()
        .flatten()
        .filter_map(|(_, r)| r.last_view().map(|v| v.0))
        .max();
    let Some(newest) = newest else {
        if pr.durable.is_some() {
            return Err(format!(
                "no log holds a view, yet position {:?} was durable",
                pr.durable
            ));
        }
        notes.push("no log holds a view: nothing to restart".into());
        return Ok(notes);
    };
    let members: Vec<usize> = (0..U)
        .filter(|&i| {
            logs[i]
                .as_ref()
                .is_some_and(|(_, r)| r.last_view().map(|v| v.0) == Some(newest))
        })
        .collect();
    for ((i, t), l) in nodes.into_iter().enumerate().zip(logs) {
        let cfg = config(base, i);
        let g = match l {
            Some((log, rec)) if rec.last_view().is_some() => {
                no_panic("Group::new", || Group::new(t, cfg, log, Some(&rec)))?
            }
            Some((log, _)) if i < 3 => no_panic("Group::new", || Group::new(t, cfg, log, None))?,
            // An initial member whose GMS log the power loss took (never created durably):
            // the operator starts it as the first time, with a new log.
            None if i < 3 => {
                let (log, _) = FileLog::open(&node_dir(base, i).join(GMS))
                    .map_err(|e| format!("n{i}: a new GMS log: {e}"))?;
                no_panic("Group::new", || Group::new(t, cfg, log, None))?
            }
            _ => {
                run.n.sim.crash(NodeId(i as u32));
                continue;
            }
        };
        match g {
            Ok(g) => {
                run.n.apps[i].has_state = g.is_active();
                run.n.groups[i] = Some(g);
            }
            Err(e) if members.contains(&i) => {
                // Refusing a file none of whose bytes were ever synced (a new log whose header
                // the crash tore) loses nothing durable, but stops the restart until the
                // operator moves the file away: reported, and the restart is not attempted.
                let msg = e.to_string();
                let never_synced = st.synced.iter().any(|(rel, &len)| {
                    len == 0 && msg.contains(&*base.join(rel).to_string_lossy())
                });
                if !never_synced {
                    return Err(format!("n{i}: Group::new on its files failed: {e}"));
                }
                notes.push(format!("refused: n{i}: Group::new: typed error {e}"));
                return Ok(notes);
            }
            Err(e) => {
                notes.push(format!("n{i}: Group::new: typed error {e}"));
                run.n.sim.crash(NodeId(i as u32));
            }
        }
    }
    let mut chain = chain.clone();
    let running = |r: &Run, i: usize| {
        r.n.groups[i].as_ref().is_some_and(|g| {
            g.is_active()
                && g.gms().restarting().is_none()
                && g.view().is_some_and(|v| v.id > newest)
                && g.replay_backlog() == 0
        })
    };
    let done = no_panic("the restart", || {
        run.run_until(&mut chain, false, 15_000, |r| {
            members.iter().all(|&i| running(r, i))
        })
    })??;
    // Every restart must complete, a power loss during the very first start included (s19:
    // until the twenty-first part's fix, members that logged view 0 restarted it while one
    // whose log was empty started afresh, and they waited for each other; such states were
    // tolerated as the "start-up window").
    if !done {
        let at: Vec<String> = (0..U)
            .map(|i| match &run.n.groups[i] {
                Some(g) => format!(
                    "n{i}: view {:?} restarting {:?} active {} stopped {:?}",
                    g.view().map(|v| v.id),
                    g.gms().restarting(),
                    g.is_active(),
                    g.stopped()
                ),
                None => format!("n{i}: down"),
            })
            .collect();
        return Err(format!(
            "the restart of view {newest} (members {members:?}) never completed: {}",
            at.join("; ")
        ));
    }
    for &i in &members {
        let next = run.n.apps[i].next;
        if pr.durable.is_some_and(|d| next <= d) {
            return Err(format!(
                "n{i} runs the restart view at position {next}, but {:?} was durable (lost)",
                pr.durable
            ));
        }
    }
    Ok(notes)
}

/// Records the workload, generates the crash states of `model` and checks each.
fn check_model(model: Model, tag: &str, exempt: Option<fn(&str) -> bool>) {
    let seed = seed();
    let Some(rec) = record(tag, seed).unwrap() else {
        return;
    };
    let started = std::time::Instant::now();
    let (states, chain, syncs) = crash_states(&rec, model, exempt, states_wanted(), seed).unwrap();
    let base = group_sim::scratch_dir("power-loss-state", tag, seed);
    let mut failures = Vec::new();
    let (mut typed, mut refused) = (0, Vec::new());
    for st in &states {
        match check_state(st, &chain, &base, seed) {
            Ok(notes) => {
                typed += notes
                    .iter()
                    .filter(|n| n.starts_with('n') && n.contains("typed error"))
                    .count();
                refused.extend(
                    notes
                        .iter()
                        .filter(|n| n.starts_with("refused"))
                        .map(|n| format!("after call {}: {n}", st.point)),
                );
            }
            Err(e) => {
                let files: Vec<String> = st
                    .tree
                    .iter()
                    .map(|(k, v)| format!("{k}:{}", v.len()))
                    .collect();
                failures.push(format!(
                    "crash after call {} ({:?}): {e}\n    files: {}",
                    st.point,
                    st.keep,
                    files.join(" ")
                ));
            }
        }
    }
    std::fs::remove_dir_all(&base).ok();
    println!(
        "power loss ({model:?}{}): workload traced in {:.1}s ({} calls, {syncs} sync points); {} crash states checked in {:.1}s: \
{typed} typed open errors, {} refused a never-synced file, {} failures",
        if exempt.is_some() {
            ", epoch-log entries exempt"
        } else {
            ""
        },
        rec.took.as_secs_f64(),
        rec.calls.len(),
        states.len(),
        started.elapsed().as_secs_f64(),
        refused.len(),
        failures.len()
    );
    for r in &refused {
        println!("  {r}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} crash states lose a promise (SQUALL_POWER_LOSS_SEED={seed}):\n{}",
        failures.len(),
        states.len(),
        failures.join("\n")
    );
}

/// ext4 (the journal commits every earlier metadata change with a file's sync): every crash
/// state keeps every promise.
#[test]
fn a_power_loss_on_ext4_keeps_every_durable_promise() {
    check_model(Model::Ext4, "ext4", None);
}

/// Strict POSIX: a new file's directory entry is durable only after its directory's fsync.
/// (Ignored until s19 fixed round-robin's log creation: a new epoch log's directory entry was
/// never synced, and a power loss could drop the file with deliveries reported `Durable`:
/// "n0 runs the restart view at position 19, but Some(21) was durable". Logs are now created
/// whole: header to `<log>.new`, synced, renamed, the directory synced.)
#[test]
fn a_power_loss_under_strict_posix_keeps_every_durable_promise() {
    check_model(Model::Posix, "posix", None);
}

/// Whether `path` names an epoch log or its index (the files the strict test above found
/// unprotected before s19).
fn is_epoch_log(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("epoch-") && (name.ends_with(".log") || name.ends_with(".log.idx"))
}

/// Strict POSIX for every file but the epoch logs, whose new entries count as durable with the
/// file's own `fdatasync` (as ext4, XFS and btrfs make them; the gap the strict test above
/// found before s19): the GMS log's creation and the snapshot's rename must be made durable by their
/// directory's `fsync`, as `FileLog::open` and `snapshot::write_as` do.
#[test]
fn a_power_loss_under_strict_posix_keeps_every_durable_promise_but_the_epoch_log_entries() {
    check_model(Model::Posix, "posix-but-epoch-logs", Some(is_epoch_log));
}

/// Finding 3 of the twentieth part (seen in a 400-state soak): a power loss between a new
/// log's header `write` and its first `fdatasync` may leave the 8 header bytes torn (garbage,
/// or zeros on file systems that expose unwritten blocks). Opening such an epoch or GMS log
/// must not panic; today it is refused with a typed error naming the file (the restart then
/// waits for the operator, though nothing durable was in it); a repair that opens it empty
/// would pass too.
#[test]
fn regression_a_new_logs_header_torn_by_a_power_loss_is_refused_typed_or_repaired() {
    let dir = group_sim::scratch_dir("power-loss", "torn-header", 0);
    std::fs::create_dir_all(&dir).unwrap();
    for (k, header) in [[0u8; 8], *b"SQ\xffRLOG\x01", *b"SQGMSLGx"]
        .iter()
        .enumerate()
    {
        let epoch = dir.join(format!("epoch-{k}.log"));
        std::fs::write(&epoch, header).unwrap();
        match no_panic("Log::open", || {
            squall_round_robin::log::Log::open(&epoch, FsyncPolicy::EveryBatch)
        })
        .unwrap()
        {
            Ok((_, rec)) => assert!(rec.last.is_none(), "a torn header opened with records"),
            Err(e) => assert!(e.to_string().contains(&*epoch.to_string_lossy()), "{e}"),
        }
        let gms = dir.join(format!("gms-{k}.log"));
        std::fs::write(&gms, header).unwrap();
        match no_panic("FileLog::open", || FileLog::open(&gms)).unwrap() {
            Ok((_, rec)) => assert!(rec.records.is_empty(), "a torn header opened with records"),
            Err(e) => assert!(e.to_string().contains(&*gms.to_string_lossy()), "{e}"),
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
