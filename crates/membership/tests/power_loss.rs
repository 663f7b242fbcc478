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
//! restoring only values of the recorded chain, the restarted members agreeing with each
//! other. (Since s26 the chain binds only the positions the recording delivered in the views
//! the crash state holds, and a view's records past the trim that ended it promise nothing
//! once the crash state holds that end: a later view or its logged decision. A view change
//! cuts such records and the next view reuses their positions; see
//! `regression_a_restart_may_deliver_the_records_its_view_logged_past_the_recorded_trim`.)
//!
//! A restart that does not complete is a failure, a power loss during the very first start
//! included (tolerated as the "start-up window" until s19's fix); a member
//! refused with a typed error over a file none of whose bytes were ever synced (a new log
//! whose header the crash tore) is reported, and that state's restart not attempted.
//!
//! The s19 checks, one per model (see `power_loss/model.rs`): ext4's journal
//! ([`a_power_loss_on_ext4_keeps_every_durable_promise`]), strict POSIX
//! ([`a_power_loss_under_strict_posix_keeps_every_durable_promise`]; it found the epoch logs'
//! unsynced directory entries, fixed in s19) and strict POSIX with only the
//! epoch logs' entries taken as ext4 makes them
//! ([`a_power_loss_under_strict_posix_keeps_every_durable_promise_but_the_epoch_log_entries`]).
//!
//! **Wider (s20)**: a [`Variant`] of the workload (the epochs' `FsyncPolicy`, two shards, a
//! small index) and a [`Boot`] for the restarts (another boot: the workload runs in a private
//! mount namespace whose `boot_id` names a made-up boot). Whatever the policy, a restart must
//! run past every position whose record the syncs made durable at every member of its view
//! and shard (derived from the trace through the model); `Upcall::Durable` is a power-loss
//! promise with `EveryBatch` only, and there every report is checked against the syncs before
//! it in the trace. See `docs/MEMBERSHIP.md`, twentieth part, "Wider coverage (s20)". A
//! member stopped with `LogError::Compacted` (its checkpoint past the restart's trim) is a
//! typed refusal under `Never` only (s22, thirty-sixth part: `Check::compacted_allowed`).
//!
//! Knobs: `SQUALL_POWER_LOSS_STATES=<n>` crash states per check (default 24: half at sync
//! points, spread quadratically so the early run where files are new is denser, with nothing
//! unsynced kept; half at random calls with random choices), `SQUALL_POWER_LOSS_SEED=<s>`
//! (the workload's and the choices' seed, default 7); for debugging
//! `SQUALL_POWER_LOSS_KEEP_TRACE=1` (keep the trace of a passing run too: a failing run
//! keeps its trace and failing states' files anyway, and names the trace in its message),
//! `SQUALL_POWER_LOSS_TRACE=<file>` (check a kept trace instead of recording) and
//! `SQUALL_POWER_LOSS_ONLY=<call>` (check only the states after that call, keeping them). The
//! tests skip, saying why, when `strace` is missing or `ptrace` is refused, and the
//! another-boot ones without a private mount namespace. See `docs/MEMBERSHIP.md`, twentieth
//! part.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::FileLog;
use squall_membership::snapshot::{CheckpointError, CheckpointWriter, Checkpointed};
use squall_membership::view::EvenShards;
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

/// Checkpoint every this many deliveries.
const EVERY: u64 = 12;
/// The GMS log's name in a node's directory.
const GMS: &str = "gms.log";

/// What a check runs: the workload's shape and durability settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Variant {
    /// The epochs' fsync policy.
    fsync: FsyncPolicy,
    /// Shards of the group: 1 (nodes `0..3` the first view, node 3 joins, node 2 is removed)
    /// or 2 (nodes `0..4` the first view in two shards, node 4 joins, a member of its shard
    /// is removed).
    shards: usize,
    /// The epoch logs' index granularity (`Config::log_index_every`): small, every log's
    /// index holds entries past its first record, so its boot tags matter.
    index_every: u64,
    /// The checkpoint writer on its thread (`CheckpointWriter::Thread`, the default; s26):
    /// each checkpoint's file and the epoch log's compaction run on threads of their own
    /// (`squall-log-compact`), concurrently with the log's writes. Otherwise inline.
    threaded: bool,
}

/// The s19 workload: `EveryBatch`, one shard, the default index (one entry per log here).
const S19: Variant = Variant {
    fsync: FsyncPolicy::EveryBatch,
    shards: 1,
    index_every: squall_round_robin::log::DEFAULT_INDEX_EVERY,
    threaded: false,
};

/// An index entry about every other record.
const SMALL_INDEX: u64 = 64;

impl Variant {
    fn universe(&self) -> usize {
        if self.shards == 1 { 4 } else { 5 }
    }

    /// The first view is `0..initial()`; node `initial()` joins.
    fn initial(&self) -> usize {
        self.universe() - 1
    }

    /// Whether every batch is synced before it counts as received (`EveryBatch`; the
    /// others leave several writes unsynced, and promise only what was synced). Since s21
    /// `Upcall::Durable` is a power-loss promise under every policy (under `EveryRecords` it
    /// reports what every member synced, under `Never` nothing), so every check checks it.
    fn syncs_every_batch(&self) -> bool {
        self.fsync == FsyncPolicy::EveryBatch
    }

    /// For the child's environment.
    fn encode(&self) -> String {
        let f = match self.fsync {
            FsyncPolicy::EveryBatch => "b".to_string(),
            FsyncPolicy::EveryRecords(k) => format!("r{k}"),
            FsyncPolicy::Never => "n".to_string(),
        };
        let t = if self.threaded { "t" } else { "i" };
        format!("{f}/{}/{}/{t}", self.shards, self.index_every)
    }

    fn decode(s: &str) -> Variant {
        let w: Vec<&str> = s.split('/').collect();
        let fsync = match w[0] {
            "b" => FsyncPolicy::EveryBatch,
            "n" => FsyncPolicy::Never,
            r => FsyncPolicy::EveryRecords(r[1..].parse().unwrap()),
        };
        Variant {
            fsync,
            shards: w[1].parse().unwrap(),
            index_every: w[2].parse().unwrap(),
            threaded: w.get(3) == Some(&"t"),
        }
    }
}

fn config(base: &Path, i: usize, v: &Variant) -> GroupConfig {
    // The checkpoint's file work inside the call (the thread writer runs the same file code).
    let mut cfg = chain::checkpoint_config(v.universe(), v.initial());
    if v.shards > 1 {
        cfg.gms.shards = EvenShards {
            shards: v.shards,
            min: 1,
            max: 3,
        };
    }
    cfg.epoch.mode = Mode::Durable {
        path: node_dir(base, i),
        fsync: v.fsync,
    };
    cfg.epoch.log_index_every = v.index_every;
    if v.threaded {
        cfg.checkpoint_writer = CheckpointWriter::Thread;
    }
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
    /// Per node: the chain value after each position it delivered (or restored a state at the
    /// next one), checked against its shard's chain once the shards are known.
    got: Vec<Chain>,
    /// Per node: its shard, once it ran one (a member never changes shards).
    shard_of: Vec<Option<usize>>,
    /// The views whose shards were marked (`PL-MEMBERS`).
    marked: std::collections::BTreeSet<u64>,
}

impl Run {
    fn step(&mut self, submit: bool) -> Result<(), String> {
        let mut checks = Checks {
            marking: self.marking,
            checkpoints: self.checkpoints,
            written: &mut self.written,
            views: &mut self.views,
            got: &mut self.got,
        };
        self.n.step(submit, &mut checks)?;
        for (i, g) in self.n.groups.iter().enumerate() {
            let Some(g) = g else { continue };
            if let Some(s) = g.shard() {
                if self.shard_of[i].is_some_and(|t| t != s) {
                    return Err(format!(
                        "n{i} moved from shard {:?} to {s}",
                        self.shard_of[i]
                    ));
                }
                self.shard_of[i] = Some(s);
            }
            if let Some(v) = g.view()
                && self.marking
                && v.inadequate.is_none()
                && self.marked.insert(v.id)
            {
                for (s, sh) in v.shards.iter().enumerate() {
                    let m: Vec<String> = sh.members.iter().map(|n| n.0.to_string()).collect();
                    mark(&format!("PL-MEMBERS {} {s} {}", v.id, m.join(",")));
                }
            }
        }
        Ok(())
    }

    fn run_until(
        &mut self,
        submit: bool,
        steps: usize,
        done: impl Fn(&Run) -> bool,
    ) -> Result<bool, String> {
        for _ in 0..steps {
            if done(self) {
                return Ok(true);
            }
            self.step(submit)?;
        }
        Ok(done(self))
    }

    /// Per shard, the chain every member's deliveries agree on (an error if two differ).
    fn chains(&self) -> Result<BTreeMap<usize, Chain>, String> {
        let mut out: BTreeMap<usize, Chain> = BTreeMap::new();
        for (i, got) in self.got.iter().enumerate() {
            if got.is_empty() {
                continue;
            }
            let s = self.shard_of[i].ok_or_else(|| format!("n{i} delivered in no shard"))?;
            let c = out.entry(s).or_default();
            for (&p, &h) in got {
                if c.insert(p, h).is_some_and(|x| x != h) {
                    return Err(format!("n{i}: position {p} of shard {s} differs"));
                }
            }
        }
        Ok(out)
    }
}

/// This suite's part of a step: the markers (the traced workload), what each node delivered,
/// checkpoints every [`EVERY`] deliveries if `checkpoints`.
struct Checks<'a> {
    marking: bool,
    checkpoints: bool,
    written: &'a mut [u64],
    views: &'a mut [u64],
    got: &'a mut [Chain],
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
            && self.got[i].insert(p, hash).is_some_and(|h| h != hash)
        {
            return Err(format!(
                "n{i}: restored state at {position} is not what it delivered"
            ));
        }
        Ok(())
    }

    fn delivered(&mut self, i: usize, d: &Delivery, hash: u64) -> Result<(), String> {
        if self.got[i]
            .insert(d.position, hash)
            .is_some_and(|h| h != hash)
        {
            return Err(format!(
                "n{i}: position {} delivered twice, differently",
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

fn new_run(seed: u64, marking: bool, v: &Variant) -> (Run, Vec<SimNode>) {
    let u = v.universe();
    let layout = Group::<SimNode, FileLog>::layout(&config(Path::new("/"), 0, v)).unwrap();
    let (sim, nodes) = Sim::cluster(SimConfig::seeded(seed), u, &layout).unwrap();
    let run = Run {
        n: Nodes::new(
            sim,
            (0..u).map(|_| None).collect(),
            vec![App::default(); u],
            Vec::new(),
        ),
        marking,
        checkpoints: marking,
        written: vec![0; u],
        views: vec![0; u],
        got: vec![Chain::new(); u],
        shard_of: vec![None; u],
        marked: Default::default(),
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
    let v = Variant::decode(&std::env::var("PL_VARIANT").unwrap());
    if let Err(e) = workload(&base, seed, &v) {
        mark(&format!("PL-FAIL {e}"));
        panic!("workload: {e}");
    }
}

fn workload(base: &Path, seed: u64, v: &Variant) -> Result<(), String> {
    mark("PL-START");
    mark(&format!(
        "PL-BOOT {}",
        squall_round_robin::log::boot_tag().unwrap_or(0)
    ));
    let (mut r, nodes) = new_run(seed, true, v);
    let (init, joiner) = (v.initial(), v.initial());
    for (i, t) in nodes.into_iter().enumerate() {
        if i < init {
            let (log, _) =
                FileLog::open(&node_dir(base, i).join(GMS)).map_err(|e| e.to_string())?;
            r.n.groups[i] =
                Some(Group::new(t, config(base, i, v), log, None).map_err(|e| e.to_string())?);
            r.n.apps[i].has_state = true;
        } else {
            r.n.sim.crash(NodeId(i as u32));
        }
    }
    if !r.run_until(true, 20_000, |r| r.written[..init].iter().all(|&w| w > 0))? {
        return Err("no checkpoint in view 0".into());
    }
    let t =
        r.n.sim
            .restart_node(NodeId(joiner as u32))
            .ok_or("the joiner cannot start")?;
    let (log, _) = FileLog::open(&node_dir(base, joiner).join(GMS)).map_err(|e| e.to_string())?;
    r.n.groups[joiner] =
        Some(Group::joining(t, config(base, joiner, v), log).map_err(|e| e.to_string())?);
    if !r.run_until(true, 20_000, |r| {
        r.n.groups[joiner].as_ref().is_some_and(Group::is_active) && r.written[joiner] > 0
    })? {
        return Err("the joiner never joined and checkpointed".into());
    }
    r.run_until(true, 150, |_| false)?;
    // A removal: with one shard node 2; with two, the joiner's highest shard-mate.
    let victim = if v.shards == 1 {
        2
    } else {
        (0..init)
            .rev()
            .find(|&i| r.shard_of[i] == r.shard_of[joiner])
            .ok_or("the joiner has no shard-mate")?
    };
    let before = r.views[0];
    r.n.sim.crash(NodeId(victim as u32));
    r.n.groups[victim] = None;
    if !r.run_until(false, 20_000, |r| r.views[0] > before)? {
        return Err(format!("node {victim} was never removed"));
    }
    r.run_until(true, 150, |_| false)?;
    for (s, chain) in r.chains()? {
        let line: Vec<String> = chain.iter().map(|(p, h)| format!("{p}:{h}")).collect();
        mark(&format!("PL-CHAIN {s} {}", line.join(",")));
    }
    Ok(())
}

/// What the traced workload left: its calls, the tree's root, and the tree at the end.
struct Recording {
    root: String,
    dirs: Vec<String>,
    calls: Vec<trace::Call>,
    /// The tree the workload left (none: a kept trace, `SQUALL_POWER_LOSS_TRACE`).
    end_tree: Option<BTreeMap<String, Vec<u8>>>,
    took: Duration,
    variant: Variant,
    /// The boot the workload ran in (relative to the restarts').
    boot: Boot,
    /// The trace file, kept until every check of it passed (then removed unless
    /// `SQUALL_POWER_LOSS_KEEP_TRACE` is set), so that a failure names a trace to reproduce it
    /// from (`SQUALL_POWER_LOSS_TRACE`); `None` for a kept trace being checked again.
    trace: Option<PathBuf>,
}

const TRACED: &str = "openat,open,creat,read,lseek,write,pwrite64,writev,pwritev,pwritev2,fsync,fdatasync,\
rename,renameat,renameat2,unlink,unlinkat,ftruncate,truncate,mkdir,mkdirat,rmdir,close,fallocate,copy_file_range,sendfile";

fn seed() -> u64 {
    std::env::var("SQUALL_POWER_LOSS_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(7)
}

/// `SQUALL_POWER_LOSS_STATES`, or `default` (24 for the s19 checks, 12 for the s20 ones,
/// which share their recordings: the default run stays short).
fn states_wanted(default: usize) -> usize {
    std::env::var("SQUALL_POWER_LOSS_STATES")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
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

/// In which boot the restarts run, relative to the traced workload's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Boot {
    /// The same boot (the restart trusts index entries tagged with the running boot: what a
    /// process crash allows; a real power loss always comes with a new boot).
    Same,
    /// Another boot: the workload runs in a private mount namespace (`unshare -m`) whose
    /// `/proc/sys/kernel/random/boot_id` is a bind-mounted file naming a made-up boot, the
    /// file `squall_round_robin::log::boot_tag` reads; the restarts run in the real one. No
    /// library code knows.
    Another,
}

/// The command prefix that runs a program in another boot (see [`Boot::Another`]): `unshare
/// -m sh -c 'mount --bind <file> /proc/sys/kernel/random/boot_id && exec "$@"'`, after
/// checking that it works here; `Err`: why not (the test is skipped).
fn another_boot(fake: &Path, seed: u64) -> Result<Vec<String>, String> {
    const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
    let id = format!(
        "0badb007-{:04x}-4000-8000-{:012x}",
        seed & 0xffff,
        std::process::id()
    );
    std::fs::write(fake, format!("{id}\n")).map_err(|e| e.to_string())?;
    let prefix: Vec<String> = [
        "unshare",
        "-m",
        "--",
        "sh",
        "-c",
        &format!("mount --bind \"$0\" {BOOT_ID} && exec \"$@\""),
        &fake.to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = Command::new(&prefix[0])
        .args(&prefix[1..])
        .args(["cat", BOOT_ID])
        .output()
        .map_err(|e| format!("unshare: {e}"))?;
    let seen = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || seen.trim() != id {
        return Err(format!(
            "a private mount namespace with another {BOOT_ID} is refused here ({}; root with CAP_SYS_ADMIN needed)",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(prefix)
}

/// Runs [`workload_child`] of `variant` under strace (in another boot if `boot` says so).
/// `Ok(None)`: skipped (no strace, ptrace refused, or no other boot to be had), with the
/// reason printed.
fn record(
    tag: &str,
    seed: u64,
    variant: &Variant,
    mut boot: Boot,
) -> Result<Option<Recording>, String> {
    if Command::new("strace").arg("-V").output().is_err() {
        println!(
            "SKIPPED: power-loss test {tag}: `strace` is not installed (apt-get install strace; .ci/run installs it)"
        );
        return Ok(None);
    }
    if let Some(kept) = std::env::var_os("SQUALL_POWER_LOSS_TRACE") {
        // Debugging: a trace kept by an earlier run (`SQUALL_POWER_LOSS_KEEP_TRACE`) of the
        // same check, instead of a new recording (the workload's traces differ from run to
        // run); its tree is gone, so the model is not compared with it.
        let kept = PathBuf::from(kept);
        let root = kept.with_extension("");
        let text = std::fs::read_to_string(&kept).map_err(|e| e.to_string())?;
        return Ok(Some(Recording {
            root: root.to_string_lossy().into_owned(),
            dirs: (0..variant.universe())
                .map(|i| node_dir(&root, i).to_string_lossy().into_owned())
                .collect(),
            calls: trace::calls(&text)?,
            end_tree: None,
            took: Duration::ZERO,
            variant: *variant,
            boot,
            trace: None,
        }));
    }
    let base = group_sim::scratch_dir("power-loss", tag, seed);
    let dirs: Vec<PathBuf> = (0..variant.universe())
        .map(|i| node_dir(&base, i))
        .collect();
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    let root = base.canonicalize().unwrap();
    let trace_file = base.with_extension("strace");
    let prefix = match boot {
        Boot::Same => Vec::new(),
        Boot::Another => match another_boot(&base.with_extension("boot_id"), seed) {
            Ok(p) => p,
            // `EveryBatch` writes only entries of synced records (tag 0), which every boot
            // trusts: the same boot checks the same (many containers refuse the namespace).
            Err(e) if variant.syncs_every_batch() => {
                println!("power-loss test {tag}: restarting in the same boot ({e})");
                boot = Boot::Same;
                Vec::new()
            }
            Err(e) => {
                println!("SKIPPED: power-loss test {tag}: {e}");
                std::fs::remove_dir_all(&base).ok();
                return Ok(None);
            }
        },
    };
    let t0 = std::time::Instant::now();
    let mut cmd = match prefix.split_first() {
        Some((p, rest)) => {
            let mut c = Command::new(p);
            c.args(rest).arg("strace");
            c
        }
        None => Command::new("strace"),
    };
    let out = cmd
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
        .env("PL_VARIANT", variant.encode())
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
            "the traced workload failed ({}; trace {}):\n{}\n{}",
            out.status,
            trace_file.display(),
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
    if std::env::var_os("SQUALL_POWER_LOSS_KEEP_TRACE").is_some() {
        println!("trace kept: {}", trace_file.display());
    }
    std::fs::remove_file(base.with_extension("boot_id")).ok();
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
        end_tree: Some(end_tree),
        took: t0.elapsed(),
        variant: *variant,
        boot,
        trace: Some(trace_file),
    }))
}

/// Per view and shard: its members (the `PL-MEMBERS` markers).
type Members = BTreeMap<(u64, usize), Vec<usize>>;

/// Per view and shard: the first position the recording logged in it (the view before's
/// trim, plus one).
type Starts = BTreeMap<(u64, usize), u64>;

/// The positions of the epoch-log records a traced write (`write`/`pwrite64` to an epoch log
/// of `root`) wrote, with their views, as (node, view, shard, position): the write's bytes
/// decoded as whole records (a write that does not start at a record, or the `.compact`
/// and `.new` files, give none).
fn logged_by(c: &trace::Call, root: &str) -> Vec<(usize, u64, usize, u64)> {
    if !matches!(c.name.as_str(), "write" | "pwrite64") {
        return Vec::new();
    }
    let Some(Ok((_, path))) = c.args.first().map(|a| trace::fd(a)) else {
        return Vec::new();
    };
    let Some((i, _, s)) = path
        .strip_prefix(root)
        .and_then(|r| r.strip_prefix('/'))
        .and_then(epoch_log_of)
    else {
        return Vec::new();
    };
    let Some(Ok(mut data)) = c.args.get(1).map(|a| trace::string(a)) else {
        return Vec::new();
    };
    data.truncate(trace::ret_num(&c.ret).map_or(0, |n| n.max(0) as usize));
    let magic = squall_round_robin::log::MAGIC;
    let mut bytes = if data.starts_with(magic) {
        Vec::new()
    } else {
        magic.to_vec()
    };
    bytes.extend_from_slice(&data);
    squall_round_robin::log::decode(&bytes)
        .records
        .iter()
        .map(|r| (i, r.view, s, r.position))
        .collect()
}

/// The shard node `i` runs in view `view`, if any.
fn shard_in(members: &Members, view: u64, i: usize) -> Option<usize> {
    members
        .iter()
        .find(|((v, _), m)| *v == view && m.contains(&i))
        .map(|((_, s), _)| *s)
}

/// `n<i>/epoch-<view>.log` or `n<i>/epoch-<view>-shard<s>.log` → (node, view, shard).
fn epoch_log_of(rel: &str) -> Option<(usize, u64, usize)> {
    let (node, name) = rel.split_once('/')?;
    let i = node.strip_prefix('n')?.parse().ok()?;
    let stem = name.strip_prefix("epoch-")?.strip_suffix(".log")?;
    let (v, s) = match stem.split_once("-shard") {
        Some((v, s)) => (v, s.parse().ok()?),
        None => (stem, 0),
    };
    Some((i, v.parse().ok()?, s))
}

/// What the markers and syncs before a crash point promise.
#[derive(Clone, Debug, Default)]
struct Promised {
    views: Vec<Option<u64>>,
    checkpoints: Vec<Option<u64>>,
    /// Per shard: the largest position an `Upcall::Durable` named (a power-loss promise with
    /// `EveryBatch` only; the other policies promise it for a process crash).
    durable: BTreeMap<usize, u64>,
    /// Per view and shard: the largest position of that view whose record a power loss here
    /// keeps in the epoch log of every member of its view and shard (what the syncs made
    /// durable, whatever the policy; a restart must run past it, unless the crash state holds
    /// a later view, which cut the view's records at its first position: see
    /// [`Promised::required`]).
    synced: BTreeMap<(u64, usize), u64>,
    /// Per (node, view, shard): what a power loss keeps of its epoch log, the most so far
    /// (once durable everywhere, a later checkpoint may replace the log).
    logged: BTreeMap<(usize, u64, usize), Kept>,
}

/// What a power loss keeps of one epoch log.
#[derive(Clone, Debug, Default)]
struct Kept {
    /// The largest sequence number (the view's round-robin order, the same at every member).
    max_seq: u64,
    /// Sequence number → position of the records kept. A member that entered the view
    /// passive (a joiner) counts its log's positions from 0: only the others' are the
    /// group's positions.
    positions: BTreeMap<u64, u64>,
}

impl Promised {
    fn new(u: usize) -> Promised {
        Promised {
            views: vec![None; u],
            checkpoints: vec![None; u],
            ..Promised::default()
        }
    }

    /// Takes a marker in; `Ok(Some(..))`: an `Upcall::Durable` for a position not synced by
    /// every member of its shard.
    fn add(&mut self, line: &str, members: &Members) -> Result<Option<String>, String> {
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
                self.recount(members);
            }
            "PL-CKPT" => {
                let i = num(1)? as usize;
                self.checkpoints[i] = self.checkpoints[i].max(Some(num(2)?));
            }
            "PL-DURABLE" => {
                let (i, p) = (num(1)? as usize, num(2)?);
                // An initial member gets no `View` upcall for view 0.
                let v = self.views[i].unwrap_or(0);
                let s = shard_in(members, v, i).ok_or_else(|| {
                    format!("n{i}: Durable in view {v}, whose shards are not known")
                })?;
                let d = self.durable.entry(s).or_default();
                *d = (*d).max(p);
                if self.synced_in(s).is_none_or(|q| q < p) {
                    let at: Vec<String> = members[&(v, s)]
                        .iter()
                        .map(|&m| {
                            let k = self.logged.get(&(m, v, s));
                            format!(
                                "n{m}: seq {:?} (position {:?})",
                                k.map(|k| k.max_seq),
                                k.and_then(|k| k.positions.last_key_value().map(|x| *x.1))
                            )
                        })
                        .collect();
                    return Ok(Some(format!(
                        "n{i} reported Durable({p}) in view {v} (shard {s}), but what a power loss keeps of the members' epoch logs of that view ends at {} (synced everywhere: {:?})",
                        at.join(", "),
                        self.synced_in(s)
                    )));
                }
            }
            _ => {}
        }
        Ok(None)
    }

    /// After a sync: what a power loss keeps now (`tree`, nothing unsynced kept) of every
    /// epoch log; a position is synced everywhere once the record of its sequence number is
    /// kept by every member of its view and shard.
    fn synced_now(&mut self, tree: &BTreeMap<String, Vec<u8>>, members: &Members) {
        for (rel, bytes) in tree {
            let Some(key) = epoch_log_of(rel) else {
                continue;
            };
            let d = squall_round_robin::log::decode(bytes);
            let base = d.base.map(|b| (b.max_seq, b.seq, b.position));
            let last = d.records.last().map(|r| r.seq).or(base.map(|b| b.0));
            let Some(last) = last else {
                continue;
            };
            let k = self.logged.entry(key).or_default();
            k.max_seq = k.max_seq.max(last);
            for (seq, p) in d
                .records
                .iter()
                .map(|r| (r.seq, r.position))
                .chain(base.map(|b| (b.1, b.2)))
            {
                k.positions.insert(seq, p);
            }
        }
        self.recount(members);
    }

    /// Recomputes [`Promised::synced`]: per view and shard, the members that must hold a
    /// record for it to be durable are its members, or once a later view is installed
    /// anywhere, those that survive into it (the view change's trim delivers, and reports
    /// `Durable`, what every survivor logged).
    fn recount(&mut self, members: &Members) {
        for (&(v, s), all) in members {
            let later = self.views.iter().flatten().any(|&w| w > v);
            let m: Vec<usize> = all
                .iter()
                .copied()
                .filter(|&i| {
                    !later
                        || members
                            .iter()
                            .any(|(&(w, _), n)| w == v + 1 && n.contains(&i))
                })
                .collect();
            let Some(seq) = m
                .iter()
                .map(|&i| self.logged.get(&(i, v, s)).map(|k| k.max_seq))
                .collect::<Option<Vec<u64>>>()
                .and_then(|l| l.into_iter().min())
            else {
                continue;
            };
            // The group's positions: the members that were in the view before (every one
            // of view 0).
            let counted = m.iter().filter(|&&i| {
                v == 0
                    || members
                        .iter()
                        .any(|(&(w, _), n)| w + 1 == v && n.contains(&i))
            });
            let p = counted
                .filter_map(|&i| self.logged.get(&(i, v, s)))
                .filter_map(|k| k.positions.range(..=seq).next_back().map(|x| *x.1))
                .max();
            if let Some(p) = p {
                let q = self.synced.entry((v, s)).or_default();
                *q = (*q).max(p);
            }
        }
    }

    /// The largest position of shard `s` synced everywhere, in any view.
    fn synced_in(&self, s: usize) -> Option<u64> {
        self.synced
            .iter()
            .filter(|((_, t), _)| *t == s)
            .map(|(_, &p)| p)
            .max()
    }

    /// What a restart of a member of shard `s` must run past, and why, from a crash state
    /// that holds the end of every view up to `ended` (a later view installed, or the
    /// decision that ends it logged; `None`: of none, nothing is discounted).
    ///
    /// A view change cuts the records a view's members logged past its trim (received after
    /// the wedge): the next view reuses those positions, from `starts` (the first position of
    /// each view in the recording). Once the crash state holds view `v`'s end, the restart
    /// ends `v` at that trim and `v`'s cut records are never delivered: they count up to the
    /// position before the next view's first. Without it the restart trims view `v` itself,
    /// from the logs, and they count (s26: shown by
    /// `squall-power-loss-1801-records-thread-ext4-7.strace`, where the per-shard maximum
    /// counted view 1's cut 399 as a promise about view 2's 399; a logged decision without
    /// the next view installed anywhere was a third recording's shape).
    fn required(
        &self,
        s: usize,
        ended: Option<u64>,
        starts: &Starts,
    ) -> Option<(u64, &'static str)> {
        let synced = self
            .synced
            .iter()
            .filter(|((_, t), _)| *t == s)
            .filter_map(|(&(v, _), &p)| match starts.get(&(v + 1, s)) {
                Some(&first) if ended.is_some_and(|e| v <= e) && p >= first => first.checked_sub(1),
                _ => Some(p),
            })
            .max()
            .map(|p| (p, "synced everywhere"));
        let durable = self.durable.get(&s).map(|&p| (p, "reported Durable"));
        synced.max(durable)
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

/// What [`crash_states`] found in a recording.
struct Derived {
    states: Vec<State>,
    /// Per shard: the recorded chain.
    chains: BTreeMap<usize, Chain>,
    members: Members,
    /// The first position of each view.
    starts: Starts,
    /// Sync points.
    syncs: usize,
    /// `Upcall::Durable` reports of positions not synced everywhere (in trace order).
    unsynced_durable: Vec<String>,
    /// The boot tag the workload ran in.
    boot: u64,
}

/// Replays the recording through the model: checks that the model with nothing lost is the
/// tree the workload left, and returns the crash states (sync points sampled evenly with
/// nothing unsynced kept, then random points with random choices), the recorded chains, and
/// every `Durable` report of a position a power loss at that point could take.
fn crash_states(
    rec: &Recording,
    model: Model,
    exempt: Option<fn(&str) -> bool>,
    wanted: usize,
    seed: u64,
) -> Result<Derived, String> {
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
    let mut logged = Vec::new();
    for c in &rec.calls {
        if fs.is_sync(c) {
            syncs.push(fs.n);
        }
        logged.extend(logged_by(c, &rec.root));
        if let Some(m) = fs.apply(c)? {
            markers.push((fs.n, m));
        }
    }
    if let Some(end_tree) = &rec.end_tree
        && &fs.current() != end_tree
    {
        let a: Vec<_> = fs
            .current()
            .iter()
            .map(|(k, v)| (k.clone(), v.len()))
            .collect();
        let b: Vec<_> = end_tree.iter().map(|(k, v)| (k.clone(), v.len())).collect();
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
    let boot = markers
        .iter()
        .find_map(|m| m.1.strip_prefix("PL-BOOT "))
        .ok_or("no PL-BOOT marker")?
        .parse()
        .map_err(|_| "bad PL-BOOT marker")?;
    let mut chains = BTreeMap::new();
    let mut members = Members::new();
    for (_, m) in &markers {
        if let Some(rest) = m.strip_prefix("PL-CHAIN ") {
            let (s, line) = rest.split_once(' ').unwrap_or((rest, ""));
            let chain: Chain = line
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|kv| {
                    let (p, h) = kv.split_once(':').unwrap();
                    (p.parse().unwrap(), h.parse().unwrap())
                })
                .collect();
            chains.insert(s.parse::<usize>().unwrap(), chain);
        } else if let Some(rest) = m.strip_prefix("PL-MEMBERS ") {
            let w: Vec<&str> = rest.split(' ').collect();
            let m = w[2].split(',').map(|n| n.parse().unwrap()).collect();
            members.insert((w[0].parse().unwrap(), w[1].parse().unwrap()), m);
        }
    }
    if chains.is_empty() {
        return Err("no PL-CHAIN marker".into());
    }
    // A joiner counts its first view's positions from 0: only the members of the view before
    // log the group's positions.
    let mut starts = Starts::new();
    for (i, v, s, p) in logged {
        if v == 0
            || members
                .iter()
                .any(|(&(w, _), n)| w + 1 == v && n.contains(&i))
        {
            let f = starts.entry((v, s)).or_insert(p);
            *f = (*f).min(p);
        }
    }
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
    let mut promised = Promised::new(rec.variant.universe());
    let mut states = Vec::new();
    let mut unsynced_durable = Vec::new();
    // Reports not synced at their call, settled by the node's next marker: a view change's
    // trim delivers, and reports `Durable`, what every *survivor* logged, before the node's
    // `View` upcall; so a report followed by that node's `PL-VIEW v + 1` is checked against
    // the survivors into `v + 1` (found at the s20 merge: the member removed there lagged).
    let mut pending: Vec<(usize, u64, Option<usize>, u64, String)> = Vec::new();
    let mut next = points.iter().peekable();
    for c in &rec.calls {
        while let Some(&(p, keep)) = next.next_if(|p| p.0 == fs.n) {
            states.push(State::at(&fs, &mut rng, p, keep, &promised));
        }
        let sync = fs.is_sync(c);
        if let Some(m) = fs.apply(c)? {
            let report = promised.add(&m, &members)?;
            let w: Vec<&str> = m.split(' ').collect();
            let num = |k: usize| w.get(k).and_then(|x| x.parse::<u64>().ok());
            if let Some(i) = num(1)
                .map(|i| i as usize)
                .filter(|_| w[0].starts_with("PL-"))
            {
                let (settled, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut pending)
                    .into_iter()
                    .partition(|x| x.0 == i);
                pending = kept;
                for (_, v, s, p, msg) in settled {
                    let trim = w[0] == "PL-VIEW"
                        && num(2) == Some(v + 1)
                        && s.is_some_and(|s| promised.synced_in(s).is_some_and(|q| q >= p));
                    if !trim {
                        unsynced_durable.push(msg);
                    }
                }
                if let Some(msg) = report {
                    let v = promised.views[i].unwrap_or(0);
                    let p = num(2).unwrap_or(0);
                    let msg = format!("after call {}: {msg}", fs.n);
                    pending.push((i, v, shard_in(&members, v, i), p, msg));
                }
            }
        }
        if sync {
            promised.synced_now(&fs.crash(Keep::Nothing, &mut Rng::new(0)), &members);
        }
    }
    unsynced_durable.extend(pending.into_iter().map(|x| x.4));
    for &(p, keep) in next {
        states.push(State::at(&fs, &mut rng, p, keep, &promised));
    }
    Ok(Derived {
        states,
        chains,
        members,
        starts,
        syncs: sync_points.len() / 2,
        unsynced_durable,
        boot,
    })
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
fn check_state(
    st: &State,
    d: &Derived,
    c: &Check,
    base: &Path,
    seed: u64,
) -> Result<Vec<String>, String> {
    let v = &c.variant;
    let (u, init) = (v.universe(), v.initial());
    let _ = std::fs::remove_dir_all(base);
    for i in 0..u {
        std::fs::create_dir_all(node_dir(base, i)).unwrap();
    }
    for (rel, bytes) in &st.tree {
        std::fs::write(base.join(rel), bytes).unwrap();
    }
    if std::env::var_os("SQUALL_POWER_LOSS_ONLY").is_some() {
        // Debugging: the crash state as materialised, before the restart changes it.
        let before = base.with_extension("before");
        let _ = std::fs::remove_dir_all(&before);
        for (rel, bytes) in &st.tree {
            let to = before.join(rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::write(to, bytes).unwrap();
        }
    }
    let mut notes = Vec::new();
    let pr = &st.promised;
    let (mut run, nodes) = new_run(seed ^ (st.point as u64) << 20, false, v);
    let mut logs = Vec::new();
    for i in 0..u {
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
        let any: Vec<_> = (0..v.shards)
            .filter_map(|s| pr.required(s, None, &d.starts))
            .collect();
        if !any.is_empty() {
            return Err(format!(
                "no log holds a view, yet positions {any:?} were durable"
            ));
        }
        notes.push("no log holds a view: nothing to restart".into());
        return Ok(notes);
    };
    // The last view whose end this state holds: every view before the newest logged, and the
    // newest too once a member logged the decision that ends it (the recording's: its next
    // view starts right after that trim).
    let ended = if logs
        .iter()
        .flatten()
        .any(|(_, r)| r.decision_for(newest).is_some())
    {
        Some(newest)
    } else {
        newest.checked_sub(1)
    };
    let members: Vec<usize> = (0..u)
        .filter(|&i| {
            logs[i]
                .as_ref()
                .is_some_and(|(_, r)| r.last_view().map(|v| v.0) == Some(newest))
        })
        .collect();
    for ((i, t), l) in nodes.into_iter().enumerate().zip(logs) {
        let cfg = config(base, i, v);
        let g = match l {
            Some((log, rec)) if rec.last_view().is_some() => {
                no_panic("Group::new", || Group::new(t, cfg, log, Some(&rec)))?
            }
            Some((log, _)) if i < init => no_panic("Group::new", || Group::new(t, cfg, log, None))?,
            // An initial member whose GMS log the power loss took (never created durably):
            // the operator starts it as the first time, with a new log.
            None if i < init => {
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
    let running = |r: &Run, i: usize| {
        r.n.groups[i].as_ref().is_some_and(|g| {
            g.is_active()
                && g.gms().restarting().is_none()
                && g.view().is_some_and(|v| v.id > newest)
                && g.replay_backlog() == 0
        })
    };
    fn stopped(r: &Run, i: usize) -> Option<String> {
        r.n.groups[i]
            .as_ref()
            .and_then(|g| g.stopped().map(|w| w.to_string()))
    }
    let weak = !v.syncs_every_batch();
    let done = no_panic("the restart", || {
        run.run_until(false, 15_000, |r| {
            members
                .iter()
                .all(|&i| running(r, i) || (weak && stopped(r, i).is_some()))
        })
    })??;
    // Under `Never` a member's checkpoint (synced, its log compacted up to it) can be past
    // what the others' logs keep after a power loss: the restart's trim then reaches into its
    // compacted prefix and it stops with that typed error (it cannot take its state back),
    // and if that leaves no majority, so do the others. Reported, not failed, where
    // `c.compacted_allowed` says: that policy promises survival of a process crash only.
    // (Under `EveryRecords` a checkpoint waits for every member's sync since the
    // thirty-sixth part, finding 10: there such a stop is a failure.)
    let compacted =
        |why: &str| c.compacted_allowed && why.contains("reaches into its compacted prefix");
    // With several unsynced writes in a log, a power loss can tear one that is not the last
    // (its bytes garbage, a later write kept): the skim checks the checksum of the last
    // record only, so the replay finds it and stops the member with that typed error. Not
    // promised lost if no byte of it was ever synced; reported where `c.torn_unsynced` says.
    // Only a record whose frame is whole and whose body fails its checksum: a broken frame
    // (a dropped write's zeros, a cut length) ends a skim of the whole file, which cuts it
    // there; a skim that starts past it (an index entry trusted in the wrong boot) does not.
    let torn_unsynced = |why: &str| {
        let Some(rest) = why.strip_prefix("replaying the epoch log of view ") else {
            return false;
        };
        if !why.contains(": checksum ") {
            return false;
        }
        let Some((path, at)) = rest
            .split_once(" (")
            .and_then(|(_, r)| r.split_once("): "))
            .and_then(|(p, r)| Some((p, r.split_once("record at byte ")?.1)))
        else {
            return false;
        };
        let at: Option<usize> = at.split(':').next().and_then(|n| n.parse().ok());
        let rel = Path::new(path)
            .strip_prefix(base)
            .map(|r| r.to_string_lossy().into_owned());
        match (at, rel) {
            (Some(at), Ok(rel)) => st.synced.get(&rel).is_some_and(|&len| at >= len),
            _ => false,
        }
    };
    let stops: Vec<(usize, String)> = members
        .iter()
        .filter_map(|&i| stopped(&run, i).map(|w| (i, w)))
        .collect();
    let done = done
        && if stops.is_empty() {
            true
        } else {
            // `Never` syncs no epoch record (only compactions do): a crash can keep a later
            // view's unsynced records and lose the earlier view's tail (no view-change sync,
            // by the policy), and the replay stops over the gap, typed.
            let never = v.fsync == FsyncPolicy::Never;
            let typed = |w: &str| {
                compacted(w)
                    || (c.torn_unsynced && torn_unsynced(w))
                    || (never && w.starts_with("replaying the epoch log"))
            };
            let allowed = stops.iter().any(|(_, w)| typed(w))
                && stops
                    .iter()
                    .all(|(_, w)| typed(w) || w.contains("minority"));
            if allowed {
                notes.push(format!(
                    "refused: {}",
                    stops
                        .iter()
                        .map(|(i, w)| format!("n{i}: {w}"))
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
            }
            allowed
        };
    // Every restart must complete, a power loss during the very first start included (s19:
    // until the twenty-first part's fix, members that logged view 0 restarted it while one
    // whose log was empty started afresh, and they waited for each other; such states were
    // tolerated as the "start-up window").
    if !done {
        let at: Vec<String> = (0..u)
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
    // One view per id: a member that rebuilt its last logged view otherwise than its peers
    // installs the restart view with other shards (s21: a power loss kept a view's
    // `Installed` record without its `Shards`; `docs/MEMBERSHIP.md`, twenty-seventh part).
    let mut first: BTreeMap<u64, (usize, Vec<Vec<NodeId>>)> = BTreeMap::new();
    for (i, g) in run.n.groups.iter().enumerate() {
        let Some(v) = g.as_ref().and_then(|g| g.view()) else {
            continue;
        };
        let shards: Vec<Vec<NodeId>> = v.shards.iter().map(|s| s.members.clone()).collect();
        match first.get(&v.id) {
            Some((k, other)) if *other != shards => {
                return Err(format!(
                    "a split view: n{i} installed view {} with shards {shards:?}, n{k} with {other:?}; {}",
                    v.id,
                    restart_summary(&run)
                ));
            }
            Some(_) => {}
            None => {
                first.insert(v.id, (i, shards));
            }
        }
    }
    for &i in &members {
        if stopped(&run, i).is_some() {
            continue;
        }
        let next = run.n.apps[i].next;
        if let Some(s) = shard_in(&d.members, newest, i)
            && let Some((p, why)) = pr.required(s, ended, &d.starts)
            && next <= p
        {
            return Err(format!(
                "n{i} runs the restart view at position {next} (shard {s}), but position {p} was durable ({why}; lost); {}",
                restart_summary(&run)
            ));
        }
        if let Some(at) = pr.checkpoints[i]
            && next < at
        {
            return Err(format!(
                "n{i} runs the restart view at position {next}, but its checkpoint at {at} was Written"
            ));
        }
    }
    // The restarted members agree with each other at every position they delivered.
    run.chains()
        .map_err(|e| format!("{e} after the restart; {}", restart_summary(&run)))?;
    // (No recorded chains: a regression's fixture, whose restart is checked alone.)
    for i in (0..u).filter(|_| !d.chains.is_empty()) {
        let Some(s) = run.shard_of[i].or_else(|| shard_in(&d.members, newest, i)) else {
            continue;
        };
        // The recorded chain binds the positions the recording delivered in the views the
        // crash state holds: from the first position of the view after `newest` on, it holds
        // what that view decided after the crash point (it reused the positions of the
        // records `newest` logged past its trim, which this restart may deliver in `newest`:
        // s26, `squall-power-loss-14344-records-thread-ext4-7.strace`).
        let bound = d.starts.get(&(newest + 1, s)).copied().unwrap_or(u64::MAX);
        let chain = d.chains.get(&s);
        for (&p, &h) in run.got[i].range(..bound) {
            if chain.and_then(|c| c.get(&p)).is_some_and(|&x| x != h) {
                return Err(format!(
                    "n{i}: position {p} of shard {s} after the restart is not the recorded chain; {}",
                    restart_summary(&run)
                ));
            }
        }
        for &q in &run.n.restored[i] {
            if let Some(p) = q.checked_sub(1).filter(|&p| p < bound)
                && chain.and_then(|c| c.get(&p)) != run.got[i].get(&p)
            {
                return Err(format!(
                    "n{i}: restored state at {q} (shard {s}) is not the recorded chain; {}",
                    restart_summary(&run)
                ));
            }
        }
    }
    Ok(notes)
}

/// What each node of a restart ended with, for a failure's message: its view (id and
/// shards), whether it runs, the states it restored and the positions it delivered.
fn restart_summary(run: &Run) -> String {
    let at: Vec<String> = (run.n.groups.iter().enumerate())
        .map(|(i, g)| match g {
            Some(g) => format!(
                "n{i}: view {:?} shards {:?} active {} restarting {:?} stopped {:?} restored at {:?} delivered {:?}",
                g.view().map(|v| v.id),
                g.view()
                    .map(|v| v.shards.iter().map(|s| s.members.clone()).collect::<Vec<_>>()),
                g.is_active(),
                g.gms().restarting(),
                g.stopped().map(|w| w.to_string()),
                run.n.restored[i],
                run.got[i]
                    .keys()
                    .next()
                    .zip(run.got[i].keys().next_back())
                    .map(|(a, b)| a..=b),
            ),
            None => format!("n{i}: down"),
        })
        .collect();
    format!("after the restart: {}", at.join("; "))
}

/// One power-loss check: the workload, the file-system model, the boot of the restarts.
#[derive(Clone, Copy)]
struct Check {
    tag: &'static str,
    model: Model,
    /// Files whose creation counts as durable with their own sync under [`Model::Posix`].
    exempt: Option<fn(&str) -> bool>,
    variant: Variant,
    boot: Boot,
    /// Whether a member that the replay stops over a torn record none of whose bytes were
    /// synced is reported rather than failed (by default with the policies that leave
    /// several writes unsynced; with `EveryBatch` only the last write is, and the skim cuts
    /// it).
    torn_unsynced: bool,
    /// Whether a member stopped with `LogError::Compacted` (its checkpoint past the restart's
    /// trim) is reported rather than failed: only under `Never`, whose checkpoints are
    /// promised for a process crash only. Under `EveryRecords` a checkpoint is recorded once
    /// every member synced past it (finding 10, thirty-sixth part), so such a stop fails.
    compacted_allowed: bool,
}

impl Check {
    fn new(tag: &'static str, model: Model, variant: Variant, boot: Boot) -> Check {
        Check {
            tag,
            model,
            exempt: None,
            variant,
            boot,
            torn_unsynced: !variant.syncs_every_batch(),
            compacted_allowed: variant.fsync == FsyncPolicy::Never,
        }
    }
}

/// Records the workload, generates the crash states of `c`'s model and checks each.
fn check_model(c: Check) {
    check_models(&[c], 24);
}

/// Records the workload once (the checks share their variant and boot) and runs each check
/// on it, `default` crash states each.
fn check_models(checks: &[Check], default: usize) {
    let seed = seed();
    let c = &checks[0];
    assert!(
        checks
            .iter()
            .all(|k| k.variant == c.variant && k.boot == c.boot),
        "checks sharing a recording share its variant and boot"
    );
    let Some(rec) = record(c.tag, seed, &c.variant, c.boot).unwrap() else {
        return;
    };
    for c in checks {
        check_recorded(c, &rec, seed, default);
    }
    // Every check passed (a failure panics above, leaving the trace named in its message).
    if let Some(t) = &rec.trace
        && std::env::var_os("SQUALL_POWER_LOSS_KEEP_TRACE").is_none()
    {
        std::fs::remove_file(t).ok();
    }
}

/// Generates the crash states of `c`'s model from `rec` and checks each.
fn check_recorded(c: &Check, rec: &Recording, seed: u64, default: usize) {
    let c = *c;
    let started = std::time::Instant::now();
    let d = crash_states(rec, c.model, c.exempt, states_wanted(default), seed).unwrap();
    let here = squall_round_robin::log::boot_tag().unwrap_or(0);
    match rec.boot {
        Boot::Same => assert_eq!(d.boot, here, "the workload ran in another boot"),
        Boot::Another => assert_ne!(d.boot, here, "the workload ran in this boot"),
    }
    let base = group_sim::scratch_dir("power-loss-state", c.tag, seed);
    let mut failures = Vec::new();
    let (mut typed, mut refused) = (0, Vec::new());
    // Debugging: `SQUALL_POWER_LOSS_ONLY=<call>` checks only the states after that call (the
    // same states as without it) and keeps the last one's files.
    let only: Option<usize> = std::env::var("SQUALL_POWER_LOSS_ONLY")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    for st in d
        .states
        .iter()
        .filter(|st| only.is_none_or(|p| p == st.point))
    {
        match check_state(st, &d, &c, &base, seed) {
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
                // The failing state's files as the restart left them (the crash state itself:
                // `SQUALL_POWER_LOSS_ONLY=<call>` with the trace, `….before`).
                let kept = base.with_extension(format!("fail-{}", st.point));
                let _ = std::fs::remove_dir_all(&kept);
                if std::fs::rename(&base, &kept).is_ok() {
                    println!("failed state kept: {}", kept.display());
                }
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
    if only.is_some() {
        println!("files kept: {}", base.display());
    } else {
        std::fs::remove_dir_all(&base).ok();
    }
    let promised: Vec<String> = (0..c.variant.shards)
        .map(|s| {
            let last = d.states.last().map(|st| &st.promised);
            format!(
                "shard {s}: Durable up to {:?}, synced everywhere up to {:?}",
                last.and_then(|p| p.durable.get(&s)),
                last.and_then(|p| p.synced_in(s))
            )
        })
        .collect();
    println!(
        "power loss ({:?}{}, {:?}, {} shard(s), index every {} B, {:?} boot): workload traced in {:.1}s ({} calls, {} sync points); \
{} crash states checked in {:.1}s: {typed} typed open errors, {} refused (typed: a never-synced file, a checkpoint past the trim), {} failures; \
{} Durable reports of positions not synced everywhere; at the last state {}",
        c.model,
        if c.exempt.is_some() {
            ", epoch-log entries exempt"
        } else {
            ""
        },
        c.variant.fsync,
        c.variant.shards,
        c.variant.index_every,
        rec.boot,
        rec.took.as_secs_f64(),
        rec.calls.len(),
        d.syncs,
        d.states.len(),
        started.elapsed().as_secs_f64(),
        refused.len(),
        failures.len(),
        d.unsynced_durable.len(),
        promised.join("; ")
    );
    for r in &refused {
        println!("  {r}");
    }
    let again = match &rec.trace {
        Some(t) => format!(
            "; trace kept: reproduce with SQUALL_POWER_LOSS_TRACE={} (and SQUALL_POWER_LOSS_ONLY=<call> to keep one state's files)",
            t.display()
        ),
        None => String::new(),
    };
    assert!(
        d.unsynced_durable.is_empty(),
        "{} Durable reports of positions a power loss could take (SQUALL_POWER_LOSS_SEED={seed}{again}); the first:\n{}",
        d.unsynced_durable.len(),
        d.unsynced_durable
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        failures.is_empty(),
        "{} of {} crash states lose a promise (SQUALL_POWER_LOSS_SEED={seed}{again}):\n{}",
        failures.len(),
        d.states.len(),
        failures.join("\n")
    );
}

/// ext4 (the journal commits every earlier metadata change with a file's sync): every crash
/// state keeps every promise.
#[test]
fn a_power_loss_on_ext4_keeps_every_durable_promise() {
    check_model(Check::new("ext4", Model::Ext4, S19, Boot::Same));
}

/// Strict POSIX: a new file's directory entry is durable only after its directory's fsync.
/// (Ignored until s19 fixed round-robin's log creation: a new epoch log's directory entry was
/// never synced, and a power loss could drop the file with deliveries reported `Durable`:
/// "n0 runs the restart view at position 19, but Some(21) was durable". Logs are now created
/// whole: header to `<log>.new`, synced, renamed, the directory synced.)
#[test]
fn a_power_loss_under_strict_posix_keeps_every_durable_promise() {
    check_model(Check::new("posix", Model::Posix, S19, Boot::Same));
}

/// `EveryRecords(5)` epochs with an index entry about every other record.
const EVERY_RECORDS: Variant = Variant {
    fsync: FsyncPolicy::EveryRecords(5),
    shards: 1,
    index_every: SMALL_INDEX,
    threaded: false,
};

/// `Never`-synced epochs with an index entry about every other record.
const NEVER: Variant = Variant {
    fsync: FsyncPolicy::Never,
    shards: 1,
    index_every: SMALL_INDEX,
    threaded: false,
};

/// Two shards, `EveryBatch`.
const TWO_SHARDS: Variant = Variant {
    fsync: FsyncPolicy::EveryBatch,
    shards: 2,
    index_every: SMALL_INDEX,
    threaded: false,
};

/// `EveryBatch` with an index entry about every other record (so the index is used and
/// rewritten by the compactions), on ext4, restarted in another boot.
#[test]
fn every_batch_with_a_small_index_on_ext4_after_a_reboot_keeps_every_durable_promise() {
    let v = Variant {
        index_every: SMALL_INDEX,
        ..S19
    };
    check_models(
        &[Check::new(
            "batch-index-ext4",
            Model::Ext4,
            v,
            Boot::Another,
        )],
        12,
    );
}

/// `EveryRecords(k)`, restarted in another boot, on one recording: under ext4, strict POSIX,
/// and ext4 with its `data=ordered` file data ([`Model::Ext4Ordered`]: a prefix of each
/// file's unsynced writes survives, no garbage, no hole; there the torn-record stops of
/// finding 8 count as failures: on the deployment file system they do not happen). What
/// every member synced survives (its `Durable` reports promise survival of a process crash
/// only, and are not checked as more), every GMS promise holds, every restart completes but
/// for the typed stops the policy allows (since s22 no `Compacted` stop: a checkpoint's
/// record waits until every member synced past it, finding 10); the index entries of
/// unsynced records, tagged with the workload's boot, are not trusted.
#[test]
fn every_records_after_a_reboot_keeps_what_was_synced() {
    check_models(
        &[
            Check::new("records-ext4", Model::Ext4, EVERY_RECORDS, Boot::Another),
            Check::new("records-posix", Model::Posix, EVERY_RECORDS, Boot::Another),
            Check {
                torn_unsynced: false,
                ..Check::new(
                    "records-ordered",
                    Model::Ext4Ordered,
                    EVERY_RECORDS,
                    Boot::Another,
                )
            },
        ],
        12,
    );
}

/// `Never` on ext4, restarted in another boot: only what the checkpoints (and the
/// compactions they cause) synced is promised.
#[test]
fn never_on_ext4_after_a_reboot_keeps_what_was_synced() {
    check_models(
        &[Check::new("never-ext4", Model::Ext4, NEVER, Boot::Another)],
        12,
    );
}

/// Two shards (`EveryBatch`), restarted in another boot, on one recording: under ext4 and
/// strict POSIX.
#[test]
fn two_shards_keep_every_durable_promise() {
    check_models(
        &[
            Check::new("shards-ext4", Model::Ext4, TWO_SHARDS, Boot::Another),
            Check::new("shards-posix", Model::Posix, TWO_SHARDS, Boot::Another),
        ],
        12,
    );
}

/// s26: the checkpoint writer on its thread (`CheckpointWriter::Thread`, the default), so
/// each epoch log's compaction runs on its thread while the log is written, its final phase
/// holding the writers and releasing them at the rename. `EveryBatch` with a small index
/// (the compactions copy, rename and rewrite it), one recording, under ext4 and strict
/// POSIX: every crash state keeps every promise. The model takes an `fsync` to cover only
/// what completed before it started (the trace's calls of several threads interleave).
#[test]
fn the_threaded_checkpoint_writer_keeps_every_durable_promise() {
    let v = Variant {
        index_every: SMALL_INDEX,
        threaded: true,
        ..S19
    };
    check_models(
        &[
            Check::new("thread-ext4", Model::Ext4, v, Boot::Same),
            Check::new("thread-posix", Model::Posix, v, Boot::Same),
        ],
        24,
    );
}

/// `EveryRecords(k)` with the checkpoint writer on its thread (s26), restarted in another
/// boot, under ext4: what every member synced survives, as with the inline writer. Ignored
/// in the seventy-first part (it failed in some recordings, two shapes); both were checker
/// artefacts of a view change whose trim cut records every member had logged past it (the
/// next view reuses their positions), fixed in the checker (s26 follow-up:
/// [`regression_a_restart_may_deliver_the_records_its_view_logged_past_the_recorded_trim`],
/// [`regression_a_views_records_cut_at_the_view_change_promise_nothing_about_the_next`]; see
/// `docs/MEMBERSHIP.md`, seventy-first part, "s26 follow-up").
#[test]
fn every_records_with_the_threaded_checkpoint_writer_keeps_what_was_synced() {
    let v = Variant {
        threaded: true,
        ..EVERY_RECORDS
    };
    check_models(
        &[Check::new(
            "records-thread-ext4",
            Model::Ext4,
            v,
            Boot::Another,
        )],
        12,
    );
}

/// `EveryRecords(k)` restarted in the same boot: the index entries of unsynced records are
/// trusted, as they may be after a process crash, though the power loss took bytes before
/// them. A real power loss always comes with a new boot, so this is a demonstration of what
/// the boot tags are for, not a defect: about 1 state in 400 fails (seed 7, s20: "replaying
/// the epoch log of view 0 (…): corrupt record at byte 224: body length 0 out of range": the
/// skim started at an entry tagged with the running boot, past a write the power loss
/// dropped), where the same checks in another boot pass.
#[test]
#[ignore = "a power loss without a reboot does not happen; see the doc comment"]
fn every_records_on_ext4_in_the_same_boot() {
    check_model(Check::new(
        "records-ext4-same",
        Model::Ext4,
        EVERY_RECORDS,
        Boot::Same,
    ));
}

/// `EveryRecords(k)`: every `Durable` report names a position every member's log has synced
/// at that point of the trace (finding 7, fixed in s21). Before s21 `Upcall::Durable(p)` said
/// `p` is in every member's log *written to the OS*, so most reports named positions a power
/// loss can take (seed 7: 229 reports; the first, after call 200: "n1 reported Durable(5) in
/// view 0 (shard 0), but what a power loss keeps of the members' epoch logs of that view ends
/// at n0: seq Some(4) (position Some(4)), …"). Now round-robin reports `Durable` only below
/// the minimum of its `rr_synced` column (what each member's `fdatasync`s covered). Since
/// s21 every check checks the reports; this one keeps the default 24 crash states.
#[test]
fn every_records_durable_reports_are_synced() {
    check_model(Check::new(
        "records-upcalls",
        Model::Ext4,
        EVERY_RECORDS,
        Boot::Another,
    ));
}

/// `EveryRecords(k)` with a member's stop over a torn record that was never synced counted as
/// a failure (finding 8; fixed in s21). With several unsynced writes in a log the model may
/// tear one and keep a later one; until s21 `Log::skim` checked the checksum of the last
/// record only (it read frames and headers), so the torn record stayed and the replay
/// (`ReadMode::Verify`) stopped the member (s20, seed 7: 3 of 400 states, e.g. after call
/// 369 "n1: replaying the epoch log of view 0 (…/n1/epoch-…0.log): corrupt record at byte
/// 101: checksum …"). Now the restart's skims are told the epochs' policy
/// (`Log::skim_with`) and, under `EveryRecords`/`Never`, verify every record they read and
/// cut the log at the first that fails (round-robin's `log_power_loss` tests).
#[test]
fn every_records_a_torn_unsynced_record_stops_no_member() {
    check_model(Check {
        torn_unsynced: false,
        ..Check::new("records-torn", Model::Ext4, EVERY_RECORDS, Boot::Another)
    });
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
    check_model(Check {
        exempt: Some(is_epoch_log),
        ..Check::new("posix-but-epoch-logs", Model::Posix, S19, Boot::Same)
    });
}

/// Regression (s20; found by the 400-state soak of
/// [`every_batch_with_a_small_index_on_ext4_after_a_reboot_keeps_every_durable_promise`],
/// seed 7, 3 states of 400, the one after call 1817 kept in `power_loss/stale-index-mark/`):
/// n2's epoch log of view 1 was compacted, and its side index rewritten in place
/// (truncated, new entries); the power loss kept a later entry of the new index but neither
/// the truncation nor the entries before it, so the index read back as three entries of the
/// file before the compaction, then one of the new file that checks out. The skim started at
/// that one and handed the three before it out as marks, unchecked; the replay from the
/// snapshot (position 75) started at the mark of offset 265 (an old record's, position 49),
/// where the compacted file holds position 80: "replaying the epoch log of view 1: position
/// 80 where 75 was expected", and n2 stopped. With `EveryBatch`. Now the replay checks the
/// first record it reads at a mark and reads the log from its start if it is not the
/// mark's. (The two-shard soak's "torn record at byte 224: 315 of 117901071 bytes present"
/// was the same: a stale mark inside a record.)
#[test]
fn regression_a_stale_index_entry_handed_out_as_a_replay_mark_does_not_stop_the_restart() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/power_loss/stale-index-mark");
    let mut tree = BTreeMap::new();
    read_tree(&fixture, "", &mut tree);
    let st = State {
        point: 1817,
        keep: Keep::Random,
        tree,
        synced: BTreeMap::new(),
        promised: Promised::new(4),
    };
    let d = Derived {
        states: Vec::new(),
        chains: BTreeMap::new(),
        members: [((1, 0), vec![0, 1, 2, 3])].into(),
        starts: Starts::new(),
        syncs: 0,
        unsynced_durable: Vec::new(),
        boot: 0,
    };
    let variant = Variant {
        index_every: SMALL_INDEX,
        ..S19
    };
    let c = Check::new("stale-mark", Model::Ext4, variant, Boot::Another);
    let base = group_sim::scratch_dir("power-loss-state", "stale-mark", 0);
    let r = check_state(&st, &d, &c, &base, 7);
    std::fs::remove_dir_all(&base).ok();
    r.unwrap();
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

/// A crash state kept as a fixture (`tests/power_loss/<name>/`, the recorded chain around it
/// in `<name>.chain`, `PL-CHAIN`'s format), with what the recording knew at its crash point,
/// checked as [`every_records_with_the_threaded_checkpoint_writer_keeps_what_was_synced`]
/// checks it: `Ok` or the failure. `tamper`: a position whose chain value is changed.
fn check_fixture(
    name: &str,
    point: usize,
    promised: Promised,
    starts: Starts,
    tamper: Option<u64>,
) -> Result<(), String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/power_loss");
    let mut tree = BTreeMap::new();
    read_tree(&dir.join(name), "", &mut tree);
    let text = std::fs::read_to_string(dir.join(format!("{name}.chain"))).unwrap();
    let mut chain: Chain = text
        .trim()
        .split(',')
        .filter_map(|kv| kv.split_once(':'))
        .map(|(p, h)| (p.parse().unwrap(), h.parse().unwrap()))
        .collect();
    if let Some(h) = tamper.and_then(|p| chain.get_mut(&p)) {
        *h ^= 1;
    }
    let st = State {
        point,
        keep: Keep::Random,
        tree,
        synced: BTreeMap::new(),
        promised,
    };
    let d = Derived {
        states: Vec::new(),
        chains: [(0, chain)].into(),
        members: [
            ((0, 0), vec![0, 1, 2]),
            ((1, 0), vec![0, 1, 2, 3]),
            ((2, 0), vec![0, 1, 3]),
        ]
        .into(),
        starts,
        syncs: 0,
        unsynced_durable: Vec::new(),
        boot: 0,
    };
    let variant = Variant {
        threaded: true,
        ..EVERY_RECORDS
    };
    let c = Check::new("records-thread-ext4", Model::Ext4, variant, Boot::Another);
    let base = group_sim::scratch_dir("power-loss-state", name, 0);
    let r = check_state(&st, &d, &c, &base, 7);
    std::fs::remove_dir_all(&base).ok();
    r.map(|_| ())
}

/// The first open finding of the seventy-first part (s26,
/// `squall-power-loss-14344-records-thread-ext4-7.strace`, crash after call 2481): every
/// member logged view 1's records to position 163, but the recording's view change (node 2
/// removed) trimmed view 1 at 148 (they came after the wedge) and view 2 reused positions 149
/// on for new messages. The crash came before any member logged view 2, so the restart
/// trims view 1 itself, from the logs, and delivers view 1's 149–163 (every member the same,
/// from logs that agree): no member had delivered anything at 149 before the crash (one that
/// delivered in view 2 would hold it in its GMS log). The checker compared them with the
/// recorded chain, view 2's: "n0: position 149 of shard 0 after the restart is not the
/// recorded chain". A checker artefact: the chain now binds only the positions before the
/// first of the view after the crash state's newest, and the restarted members must agree.
#[test]
fn regression_a_restart_may_deliver_the_records_its_view_logged_past_the_recorded_trim() {
    let promised = || Promised {
        views: vec![Some(1); 4],
        checkpoints: vec![Some(138), Some(149), Some(135), Some(138)],
        durable: [(0, 148)].into(),
        synced: [((0, 0), 70), ((1, 0), 160)].into(),
        logged: BTreeMap::new(),
    };
    let starts: Starts = [((0, 0), 0), ((1, 0), 71), ((2, 0), 149)].into();
    let name = "view-tail-past-trim";
    check_fixture(name, 2481, promised(), starts.clone(), None).unwrap();
    // Not knowing where view 2 starts, the whole chain binds: the s26 failure.
    let mut unknown = starts.clone();
    unknown.remove(&(2, 0));
    let e = check_fixture(name, 2481, promised(), unknown, None).unwrap_err();
    assert!(
        e.contains("position 149 of shard 0 after the restart is not the recorded chain"),
        "{e}"
    );
    // The positions before view 2's first still bind.
    let e = check_fixture(name, 2481, promised(), starts.clone(), Some(148)).unwrap_err();
    assert!(e.contains("position 148 of shard 0"), "{e}");
    // View 1's records past the recorded trim, synced everywhere, still count while the
    // crash state holds no later view (the restart delivers them in view 1): a promise past
    // what the logs hold fails.
    let mut more = promised();
    more.synced.insert((1, 0), 164);
    let e = check_fixture(name, 2481, more, starts, None).unwrap_err();
    assert!(e.contains("but position 164 was durable"), "{e}");
}

/// The second open finding of the seventy-first part (s26,
/// `squall-power-loss-1801-records-thread-ext4-7.strace`, crash after call 5614): n0, n1 and
/// n3 had each synced view 1's records to position 399, past view 1's trim (view 2 starts at
/// 384), and the view change cut them; the checker's maximum per shard counted them as a
/// promise about view 2's 399, which n0 had not synced (its last view-2 sync covered 397):
/// "n0 runs the restart view at position 398 (shard 0), but position 399 was durable (synced
/// everywhere; lost)". A checker artefact: the crash state holds view 2 (every survivor's
/// GMS log), so the restart runs view 2 and view 1's records from 384 on are never
/// delivered; the maximum is now per view, and a view's counts only below the next view's
/// first position once the crash state holds a later view.
#[test]
fn regression_a_views_records_cut_at_the_view_change_promise_nothing_about_the_next() {
    let promised = |view2: u64| Promised {
        views: vec![Some(2), Some(2), Some(1), Some(2)],
        checkpoints: vec![Some(381), Some(396), Some(367), Some(384)],
        durable: [(0, 397)].into(),
        synced: [((0, 0), 259), ((1, 0), 399), ((2, 0), view2)].into(),
        logged: BTreeMap::new(),
    };
    let starts: Starts = [((0, 0), 0), ((1, 0), 260), ((2, 0), 384)].into();
    let name = "view-tail-cut";
    check_fixture(name, 5614, promised(397), starts.clone(), None).unwrap();
    // Not knowing where view 2 starts, view 1's 399 counts: the s26 failure.
    let mut unknown = starts.clone();
    unknown.remove(&(2, 0));
    let e = check_fixture(name, 5614, promised(397), unknown, None).unwrap_err();
    assert!(e.contains("but position 399 was durable"), "{e}");
    // The chain binds here (no view after 2 in the recording).
    let e = check_fixture(name, 5614, promised(397), starts.clone(), Some(390)).unwrap_err();
    assert!(e.contains("position 390 of shard 0"), "{e}");
    // View 2's own synced positions still count.
    let e = check_fixture(name, 5614, promised(398), starts, None).unwrap_err();
    assert!(e.contains("but position 398 was durable"), "{e}");
}

/// A third shape, seen once in 30 runs with 48 states after the two above were fixed (s26,
/// a recording whose view 2 starts at 112; crash after call 2984): no member had installed
/// view 2, but n0 and n1 had logged the decision that ends view 1 (its trim: 111), while
/// every member had synced view 1's records to 120, past it. The restart ends view 1 at the
/// logged decision's trim (the protocol: a member may have delivered up to it) and delivers
/// nothing past 111 in it, which is sound (nobody delivered 112–120 in view 1, no `Durable`
/// named them); the checker, counting view 1 whole while no later view was logged, said
/// "n0 runs the restart view at position 112 (shard 0), but position 120 was durable
/// (synced everywhere; lost)". A checker artefact: a logged decision fixes its view's end
/// as a later view does.
#[test]
fn regression_a_logged_decision_ends_its_view_at_the_recorded_trim() {
    let promised = || Promised {
        views: vec![Some(1); 4],
        checkpoints: vec![Some(103), Some(112), Some(97), Some(101)],
        durable: [(0, 111)].into(),
        synced: [((0, 0), 20), ((1, 0), 120)].into(),
        logged: BTreeMap::new(),
    };
    let starts: Starts = [((0, 0), 0), ((1, 0), 21), ((2, 0), 112)].into();
    let name = "view-decided";
    check_fixture(name, 2984, promised(), starts.clone(), None).unwrap();
    // Not knowing where view 2 starts, view 1's 120 counts: the failure.
    let mut unknown = starts.clone();
    unknown.remove(&(2, 0));
    let e = check_fixture(name, 2984, promised(), unknown, None).unwrap_err();
    assert!(e.contains("but position 120 was durable"), "{e}");
    // The positions before the trim still bind.
    let e = check_fixture(name, 2984, promised(), starts, Some(105)).unwrap_err();
    assert!(e.contains("position 105 of shard 0"), "{e}");
}
