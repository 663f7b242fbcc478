//! Membership across real processes over TCP: the node program and the parent's harness.
//!
//! Each member is its own OS process: the test binary re-executes itself with the ignored test
//! `member_child` as the entry point (every test file that uses this module declares it and
//! calls [`child_main`]). A member runs a [`Group`] over a [`TcpNode`] with a [`FileLog`] in a
//! scratch directory, submits a numbered stream of messages (every fifth one large) at a fixed
//! pace, and writes one line per event to stdout:
//!
//! ```text
//! PORT <port>                                  bound, waiting for "ADDRS a,b,…" on stdin
//! READY <t>                                    linked to every peer, group running
//! D <pos> <sender> <seq> <len> <digest> <chain> [replay]
//!                                              a delivery (`replay`: a restarted member's
//!                                              replay of its epoch logs)
//! M <m1,m2,…> <t>                              restarting: the last view's members it still
//!                                              waits for (each time that changes)
//! X <seq>                                      one of its own messages discarded by a trim
//! S <node> <cause> <t>                         it suspects <node> (first time)
//! W <view> <t>                                 it wedged view <view>
//! V <id> <m1,m2,…> <deliveries before> <t>     it installed view <id>
//! STOP <t> <reason>                            the group stopped (minority, removed, …)
//! RJ <from> <to> <t>                           it asks to join again by itself
//!                                              (`Gms::rejoined`: view `to` went on without it)
//! CRASH <t>                                    the crash point of `Settings::crash` reached:
//!                                              it SIGKILLs itself right after this line
//! FROZEN <t>                                   `Settings::freeze_after_join`: it stopped
//!                                              polling its group (its threads run on)
//! FIRST <t>                                    its first delivery not replayed
//! END <submitted>                              it read QUIT: nothing more is printed
//! ```
//!
//! Times `<t>` are microseconds of `CLOCK_MONOTONIC`, which every process (and every network
//! namespace) of the machine shares, so the parent can subtract them from its own.
//!
//! The parent ([`Cluster`]) parses the lines as they come, waits for events by polling what
//! was parsed (never by sleeping a fixed time), kills members with SIGKILL, and ends a run by
//! writing `QUIT` to every member: a member stops polling its group at once (so a peer quitting
//! first cannot change what it reports), prints `END`, and exits when its stdin closes.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use squall_membership::GmsConfig;
use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::FileLog;
use squall_membership::view::{Layout, ShardPolicy, SubgroupPolicy, Subgroups};
use squall_ordering::{SubmitError, TotalOrder, Upcall};
use squall_round_robin::{Config as EpochConfig, FsyncPolicy, Mode};
use squall_transport::{NodeId, Region, RegionId};
use squall_transport_tcp::{ClusterConfig, TcpNode};

/// Microseconds of `CLOCK_MONOTONIC`: one clock for every process of the machine.
pub fn now_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

// ---- phase tracing (MP_TRACE) ----------------------------------------------------------

/// The membership crate's `tracing` events (debug and above) as `TR <t> <message>|<fields>`
/// lines, collected by a minimal subscriber when the child runs with `MP_TRACE=1` (the
/// failover profile); the member loop drains them into its stdout between polls, so they
/// interleave with its other lines in order.
mod trace {
    use std::fmt::Write as _;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    pub(super) static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

    struct Fields {
        message: String,
        rest: String,
    }

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                let _ = write!(self.message, "{value:?}");
            } else {
                let _ = write!(self.rest, " {}={value:?}", field.name());
            }
        }
    }

    pub(super) struct Collector {
        next: AtomicU64,
    }

    impl Subscriber for Collector {
        fn enabled(&self, m: &Metadata<'_>) -> bool {
            m.target().starts_with("squall_membership") && *m.level() <= Level::DEBUG
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, e: &Event<'_>) {
            let mut f = Fields {
                message: String::new(),
                rest: String::new(),
            };
            e.record(&mut f);
            let line = format!("TR {} {}|{}", super::now_us(), f.message, f.rest.trim());
            if let Ok(mut l) = LINES.lock() {
                l.push(line);
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// `MP_LOGDIR`: info-level events of the membership, table and TCP transport crates,
    /// written as they happen to `<dir>/n<me>-<pid>.log` (a stall's who-waits-for-what; the
    /// member's report does not carry them).
    struct ToFile {
        next: AtomicU64,
        file: Mutex<std::fs::File>,
    }

    impl Subscriber for ToFile {
        fn enabled(&self, m: &Metadata<'_>) -> bool {
            let t = m.target();
            (t.starts_with("squall_membership")
                || t.starts_with("squall_sst")
                || t.starts_with("squall_transport_tcp"))
                && *m.level() <= Level::INFO
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, e: &Event<'_>) {
            use std::io::Write as _;
            let mut f = Fields {
                message: String::new(),
                rest: String::new(),
            };
            e.record(&mut f);
            if let Ok(mut file) = self.file.lock() {
                let _ = writeln!(
                    file,
                    "{} {} {}|{}",
                    super::now_us(),
                    e.metadata().target(),
                    f.message,
                    f.rest.trim()
                );
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// Installs the file writer of `MP_LOGDIR` as the process's subscriber.
    pub(super) fn install_file(dir: &str, me: u32) {
        let path = std::path::Path::new(dir).join(format!("n{me}-{}.log", std::process::id()));
        if let Ok(file) = std::fs::File::create(path) {
            let _ = tracing::subscriber::set_global_default(ToFile {
                next: AtomicU64::new(0),
                file: Mutex::new(file),
            });
        }
    }

    /// Installs the collector as the process's subscriber.
    pub(super) fn install() {
        let _ = tracing::subscriber::set_global_default(Collector {
            next: AtomicU64::new(0),
        });
    }

    /// Moves the collected lines to `out`.
    pub(super) fn drain(out: &mut impl std::io::Write) {
        let lines = LINES.lock().map(|mut l| std::mem::take(&mut *l));
        for l in lines.unwrap_or_default() {
            let _ = writeln!(out, "{l}");
        }
    }
}

// ---- the messages -----------------------------------------------------------------------

/// The length of message `seq`: every fifth one large (chunked one-sided writes), the rest
/// inline in an SMC slot.
pub fn length(seq: u64) -> usize {
    if seq % 5 == 4 {
        1000 + (seq as usize * 397) % 11_000
    } else {
        16 + (seq as usize * 13) % 200
    }
}

/// Message `seq` of `sender`: `[sender u32][seq u64]` then bytes derived from both.
pub fn payload(sender: u32, seq: u64) -> Vec<u8> {
    let n = length(seq);
    let mut p = Vec::with_capacity(n);
    p.extend_from_slice(&sender.to_le_bytes());
    p.extend_from_slice(&seq.to_le_bytes());
    let mut x = u64::from(sender) << 32 ^ seq ^ 0x9e37_79b9_7f4a_7c15;
    while p.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p.push(x as u8);
    }
    p
}

/// FNV-1a over the payload.
pub fn digest(p: &[u8]) -> u64 {
    p.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// One step of the application's hash chain.
pub fn chain_step(chain: u64, digest: u64) -> u64 {
    let mut z = (chain ^ digest).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^ (z >> 31)
}

/// The 256 bytes the application's filler repeats: byte `i` is `(chain >> 8 (i mod 8)) ^ i`.
fn filler_block(chain: u64) -> [u8; 256] {
    let mut b = [0u8; 256];
    for (i, x) in b.iter_mut().enumerate() {
        *x = (chain >> (8 * (i % 8))) as u8 ^ i as u8;
    }
    b
}

/// The application's state: the chain, then `filler` bytes derived from it (built by copying
/// blocks: an 8 MiB state byte by byte took 70 ms in the test profile, a stall of the member's
/// loop that the suspicion timeout had to cover).
fn state(chain: u64, filler: usize) -> Vec<u8> {
    let block = filler_block(chain);
    let mut v = Vec::with_capacity(8 + filler);
    v.extend_from_slice(&chain.to_le_bytes());
    while v.len() < 8 + filler {
        let n = (8 + filler - v.len()).min(block.len());
        v.extend_from_slice(&block[..n]);
    }
    v
}

/// The chain of a state, if the state is well formed.
fn state_chain(st: &[u8], filler: usize) -> Option<u64> {
    let c = u64::from_le_bytes(st.get(..8)?.try_into().ok()?);
    let block = filler_block(c);
    let rest = &st[8..];
    (rest.len() == filler && rest.chunks(256).all(|ch| ch == &block[..ch.len()])).then_some(c)
}

fn header(p: &[u8]) -> Option<(u32, u64)> {
    let s = u32::from_le_bytes(p.get(..4)?.try_into().ok()?);
    let q = u64::from_le_bytes(p.get(4..12)?.try_into().ok()?);
    Some((s, q))
}

// ---- the settings -----------------------------------------------------------------------

/// What a run's members are configured with; passed to the children in the environment.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Members of view 0 (node ids `0..members`).
    pub members: usize,
    /// Processes (node ids `0..universe`); those from `members` on start outside the group and
    /// join when the parent says `JOIN`.
    pub universe: usize,
    /// Bytes of filler in the application state after its 8-byte hash chain (what a joiner's
    /// state transfer carries).
    pub state_bytes: usize,
    /// GMS heartbeat interval.
    pub gms_heartbeat: Duration,
    /// GMS suspicion timeout.
    pub gms_suspicion: Duration,
    /// TCP heartbeat period.
    pub tcp_heartbeat: Duration,
    /// TCP heartbeat timeout (a silent link fails its peer).
    pub tcp_timeout: Duration,
    /// TCP op timeout.
    pub op_timeout: Duration,
    /// Each member submits one message per `pace`.
    pub pace: Duration,
    /// A child that has not been told to quit by then exits with an error.
    pub child_deadline: Duration,
    /// Members report the membership crate's tracing events (`TR` lines, the failover
    /// profile's phases).
    pub trace: bool,
    /// State transfer `(chunk_size, window)` instead of `TransferConfig::new`'s defaults.
    pub transfer: Option<(usize, usize)>,
    /// Durable epochs (`Mode::Durable` in `epochs-<k>/` of the run's directory) with this
    /// fsync policy; `None`: atomic epochs (nothing to replay after a restart).
    pub durable: Option<FsyncPolicy>,
    /// `GmsConfig::restart_absent_timeout`: how long a restart waits for a member of the last
    /// view that never connected once a majority restarted.
    pub restart_absent: Duration,
    /// `FileLog::set_sync_installed`: whether the GMS log fsyncs the `Installed` record of a
    /// view change. Off by default: the members' epochs are atomic or never fsynced, so a
    /// process crash is all their state has to survive.
    pub sync_installed: bool,
    /// `GroupConfig::replay_buffer` (`None`: its default): the epoch log bytes a restart
    /// holds in memory at once.
    pub replay_buffer: Option<usize>,
    /// A member's first process (life 0, not a respawn) SIGKILLs itself at this point of the
    /// protocol (see [`Crash`]): a process crash at an exact step, which a SIGKILL from the
    /// parent could only hit by chance.
    pub crash: Option<Crash>,
    /// The life whose processes [`crash`](Settings::crash) applies to instead of the first
    /// (0): a total restart's (respawns excepted).
    pub crash_life: u64,
    /// A joiner stops polling its group a few polls after it asked to join (its request sent;
    /// its process and links stay up): it never installs, so never logs, the view that admits
    /// it.
    pub freeze_after_join: bool,
    /// A member's first process submits nothing (its group runs, nothing is delivered).
    pub quiet_first_life: bool,
    /// `GmsConfig::expected_link_timeout` (`None`: its default, 10 x the suspicion timeout):
    /// how long a member waits for a member of its view whose link never came up here.
    pub expected_link: Option<Duration>,
    /// Co-located hosts (`GmsConfig::hosts`, docs/MEMBERSHIP.md forty-seventh part): the
    /// members of view 0 split into two subgroups of one shard each, "cache" (the first half of
    /// the ids) and "store" (the second half), each member pinned to its subgroup, and host `h`
    /// = {`h`, `h + members / 2`}. Each member is still its own process; a host is the
    /// configuration's grouping (see [`Settings::host_groups`]).
    pub colocated: bool,
}

/// Where a member's first process crashes itself ([`Settings::crash`]); it prints `CRASH <t>`
/// first, after every line of that poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    /// Right after the poll in which it logged a decision (`Gms::decision`: a leader logs it
    /// before publishing, a follower before echoing), whatever else that poll did.
    Decision,
    /// Right after the poll in which it installed a view numbered at least this.
    View(u64),
    /// As [`Decision`](Crash::Decision), but the leader crashes 200 ms later (above the poll
    /// stalls of a loaded machine, below the GMS suspicion timeout), only waiting on the
    /// endpoint in between (no poll): its decision reaches the followers (the TCP node flushes
    /// its staged writes there), which log it too before its crash fails it there, and it acts
    /// on nothing more. A follower crashes right after the poll that logged the decision, as
    /// with `Decision` (its echo, staged, mostly never sent): nobody installs the view.
    DecisionSent,
}

impl Default for Settings {
    /// Detection quick on loopback but not flaky on a loaded 2-core machine (a load average
    /// of 15 was seen to starve a member for over 100 ms): GMS heartbeats every 5 ms,
    /// suspicion after 250 ms of silence; TCP heartbeats every 20 ms failing a silent link
    /// after 600 ms (so in a partition the GMS timeout decides), ops time out after 1 s; every
    /// member submits one message per 2 ms. The measurement uses [`Settings::fast`].
    fn default() -> Settings {
        Settings {
            gms_suspicion: Duration::from_millis(250),
            tcp_timeout: Duration::from_millis(600),
            ..Settings::fast()
        }
    }
}

impl Settings {
    /// As [`default`](Settings::default) with a 100 ms GMS suspicion timeout and a 400 ms TCP
    /// heartbeat timeout: the failover measurement's settings (run it on a quiet machine).
    pub fn fast() -> Settings {
        Settings {
            members: 5,
            universe: 5,
            state_bytes: 0,
            gms_heartbeat: Duration::from_millis(5),
            gms_suspicion: Duration::from_millis(100),
            tcp_heartbeat: Duration::from_millis(20),
            tcp_timeout: Duration::from_millis(400),
            op_timeout: Duration::from_secs(1),
            pace: Duration::from_millis(2),
            child_deadline: Duration::from_secs(120),
            trace: false,
            transfer: None,
            durable: None,
            restart_absent: Duration::from_secs(1),
            sync_installed: false,
            replay_buffer: None,
            crash: None,
            crash_life: 0,
            freeze_after_join: false,
            quiet_first_life: false,
            expected_link: None,
            colocated: false,
        }
    }

    /// `self` with the relaxed detection of the rejoin tests (a member starved by the loaded
    /// machine must not be removed too) and a 16 KiB state.
    pub fn relaxed(self) -> Settings {
        Settings {
            gms_suspicion: Duration::from_millis(800),
            tcp_timeout: Duration::from_millis(1500),
            op_timeout: Duration::from_secs(2),
            state_bytes: 16 << 10,
            ..self
        }
    }

    /// As [`default`](Settings::default) with durable epochs that never `fsync` (what the
    /// restart tests use): a SIGKILL is a process crash, which keeps what was written to the
    /// page cache, so every record a member wrote survives it (a power loss is not simulated).
    /// The GMS suspicion timeout is 500 ms (TCP heartbeat timeout 1 s): at a restart every
    /// member fsyncs its GMS log several times (promise, decision, view) and cuts and reads its
    /// epoch logs, all members at once on one loaded disk, and a member's poll was seen to
    /// stall for 257 ms there (its peers then removed it, a false suspicion).
    pub fn durable() -> Settings {
        Settings {
            durable: Some(FsyncPolicy::Never),
            gms_suspicion: Duration::from_millis(500),
            tcp_timeout: Duration::from_secs(1),
            ..Settings::default()
        }
    }
}

fn env_us(name: &str) -> Duration {
    Duration::from_micros(
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing")),
    )
}

impl Settings {
    fn to_env(&self, cmd: &mut Command) {
        cmd.env("MP_MEMBERS", self.members.to_string());
        cmd.env("MP_UNIVERSE", self.universe.to_string());
        cmd.env("MP_STATE_BYTES", self.state_bytes.to_string());
        cmd.env("MP_TRACE", if self.trace { "1" } else { "0" });
        cmd.env(
            "MP_SYNC_INSTALLED",
            if self.sync_installed { "1" } else { "0" },
        );
        match self.replay_buffer {
            Some(b) => cmd.env("MP_REPLAY_BUFFER", b.to_string()),
            None => cmd.env_remove("MP_REPLAY_BUFFER"),
        };
        match self.transfer {
            Some((chunk, window)) => cmd.env("MP_TRANSFER", format!("{chunk},{window}")),
            None => cmd.env_remove("MP_TRANSFER"),
        };
        match self.crash {
            Some(Crash::Decision) => cmd.env("MP_CRASH", "decision"),
            Some(Crash::DecisionSent) => cmd.env("MP_CRASH", "decision-sent"),
            Some(Crash::View(v)) => cmd.env("MP_CRASH", format!("view:{v}")),
            None => cmd.env_remove("MP_CRASH"),
        };
        cmd.env("MP_CRASH_LIFE", self.crash_life.to_string());
        cmd.env(
            "MP_FREEZE_JOIN",
            if self.freeze_after_join { "1" } else { "0" },
        );
        cmd.env("MP_QUIET", if self.quiet_first_life { "1" } else { "0" });
        cmd.env("MP_COLOCATED", if self.colocated { "1" } else { "0" });
        match self.expected_link {
            Some(d) => cmd.env("MP_EXPECTED_LINK_US", d.as_micros().to_string()),
            None => cmd.env_remove("MP_EXPECTED_LINK_US"),
        };
        match self.durable {
            Some(FsyncPolicy::Never) => cmd.env("MP_DURABLE", "never"),
            Some(FsyncPolicy::EveryBatch) => cmd.env("MP_DURABLE", "batch"),
            Some(FsyncPolicy::EveryRecords(n)) => cmd.env("MP_DURABLE", n.to_string()),
            None => cmd.env_remove("MP_DURABLE"),
        };
        for (k, d) in [
            ("MP_GMS_HB_US", self.gms_heartbeat),
            ("MP_GMS_SUSPECT_US", self.gms_suspicion),
            ("MP_TCP_HB_US", self.tcp_heartbeat),
            ("MP_TCP_TIMEOUT_US", self.tcp_timeout),
            ("MP_OP_TIMEOUT_US", self.op_timeout),
            ("MP_PACE_US", self.pace),
            ("MP_DEADLINE_US", self.child_deadline),
            ("MP_RESTART_ABSENT_US", self.restart_absent),
        ] {
            cmd.env(k, d.as_micros().to_string());
        }
    }

    fn from_env() -> Settings {
        Settings {
            members: std::env::var("MP_MEMBERS")
                .ok()
                .and_then(|v| v.parse().ok())
                .expect("MP_MEMBERS"),
            universe: std::env::var("MP_UNIVERSE")
                .ok()
                .and_then(|v| v.parse().ok())
                .expect("MP_UNIVERSE"),
            state_bytes: std::env::var("MP_STATE_BYTES")
                .ok()
                .and_then(|v| v.parse().ok())
                .expect("MP_STATE_BYTES"),
            gms_heartbeat: env_us("MP_GMS_HB_US"),
            gms_suspicion: env_us("MP_GMS_SUSPECT_US"),
            tcp_heartbeat: env_us("MP_TCP_HB_US"),
            tcp_timeout: env_us("MP_TCP_TIMEOUT_US"),
            op_timeout: env_us("MP_OP_TIMEOUT_US"),
            pace: env_us("MP_PACE_US"),
            child_deadline: env_us("MP_DEADLINE_US"),
            trace: std::env::var("MP_TRACE").is_ok_and(|v| v == "1"),
            transfer: std::env::var("MP_TRANSFER").ok().map(|v| {
                let (c, w) = v.split_once(',').expect("MP_TRANSFER chunk,window");
                (c.parse().expect("chunk"), w.parse().expect("window"))
            }),
            durable: std::env::var("MP_DURABLE").ok().map(|v| match v.as_str() {
                "never" => FsyncPolicy::Never,
                "batch" => FsyncPolicy::EveryBatch,
                n => FsyncPolicy::EveryRecords(n.parse().expect("MP_DURABLE")),
            }),
            restart_absent: env_us("MP_RESTART_ABSENT_US"),
            sync_installed: std::env::var("MP_SYNC_INSTALLED").is_ok_and(|v| v == "1"),
            replay_buffer: std::env::var("MP_REPLAY_BUFFER")
                .ok()
                .map(|v| v.parse().expect("MP_REPLAY_BUFFER")),
            crash: std::env::var("MP_CRASH").ok().map(|v| match v.as_str() {
                "decision" => Crash::Decision,
                "decision-sent" => Crash::DecisionSent,
                v => Crash::View(
                    (v.strip_prefix("view:").and_then(|n| n.parse().ok())).expect("MP_CRASH"),
                ),
            }),
            crash_life: (std::env::var("MP_CRASH_LIFE").ok())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            freeze_after_join: std::env::var("MP_FREEZE_JOIN").is_ok_and(|v| v == "1"),
            quiet_first_life: std::env::var("MP_QUIET").is_ok_and(|v| v == "1"),
            expected_link: std::env::var("MP_EXPECTED_LINK_US")
                .ok()
                .map(|_| env_us("MP_EXPECTED_LINK_US")),
            colocated: std::env::var("MP_COLOCATED").is_ok_and(|v| v == "1"),
        }
    }

    /// With [`colocated`](Settings::colocated): the members of the two subgroups, "cache" and
    /// "store" (the first and the second half of view 0's ids).
    pub fn subgroups(&self) -> [Vec<usize>; 2] {
        let half = self.members / 2;
        [(0..half).collect(), (half..self.members).collect()]
    }

    /// With [`colocated`](Settings::colocated): each host's members, {`h`, `h + members / 2`}.
    pub fn host_groups(&self) -> Vec<Vec<usize>> {
        let half = self.members / 2;
        (0..half).map(|h| vec![h, h + half]).collect()
    }

    /// The group configuration every member uses; `epochs`: the member's directory of durable
    /// epoch logs (used when [`durable`](Self::durable) is set).
    pub fn group_config(&self, epochs: &std::path::Path) -> GroupConfig {
        let ids: Vec<NodeId> = (0..self.members as u32).map(NodeId).collect();
        let universe: Vec<NodeId> = (0..self.universe as u32).map(NodeId).collect();
        let mut gms = GmsConfig::new(RegionId(0), universe, ids.clone());
        gms.heartbeat_interval = self.gms_heartbeat;
        gms.suspicion_timeout = self.gms_suspicion;
        gms.restart_absent_timeout = self.restart_absent;
        gms.expected_link_timeout = self.expected_link;
        let mode = match self.durable {
            Some(fsync) => Mode::Durable {
                path: epochs.to_path_buf(),
                fsync,
            },
            None => Mode::Atomic,
        };
        let epoch = EpochConfig {
            window: 8,
            slot_size: 256,
            max_payload: 12 << 10,
            chunk_size: 4 << 10,
            mode,
            ..EpochConfig::new(ids)
        };
        if self.colocated {
            let [cache, store] = self.subgroups();
            let pinned = |members: &[usize]| SubgroupPolicy {
                shards: vec![ShardPolicy {
                    min: 1,
                    max: members.len(),
                    reserved: members.iter().map(|&k| NodeId(k as u32)).collect(),
                }],
            };
            gms.layout = Some(Layout::new(Subgroups::new(vec![
                pinned(&cache),
                pinned(&store),
            ])));
            gms.hosts = (self.host_groups().iter())
                .map(|h| h.iter().map(|&k| NodeId(k as u32)).collect())
                .collect();
        }
        let mut cfg = GroupConfig::new(gms, epoch);
        if let Some((chunk, window)) = self.transfer {
            cfg.transfer.chunk_size = chunk;
            cfg.transfer.window = window;
        }
        if let Some(b) = self.replay_buffer {
            cfg.replay_buffer = b;
        }
        cfg
    }
}

// ---- the child ----------------------------------------------------------------------------

/// A member reports (`SLOW <what> <µs> <t>`) a poll, a state provision or a gap between two
/// rounds of its loop longer than this: the stalls a suspicion timeout has to cover.
const STALL_US: u64 = 20_000;

/// Moves the calling thread (and the threads it spawns later) into a named network namespace.
fn enter_netns(name: &str) {
    let path = std::ffi::CString::new(format!("/var/run/netns/{name}")).expect("path");
    // SAFETY: plain syscalls on a path we built; the fd is closed after use.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        assert!(fd >= 0, "cannot open network namespace {name}");
        assert_eq!(
            libc::setns(fd, libc::CLONE_NEWNET),
            0,
            "setns into {name} failed"
        );
        libc::close(fd);
    }
}

/// The body of a member process (see the module docs). Returns only if this process is not a
/// member child (`MP_NODE` unset).
pub fn child_main() {
    let Ok(me) = std::env::var("MP_NODE") else {
        return;
    };
    let me: u32 = me.parse().expect("MP_NODE");
    let s = Settings::from_env();
    if std::env::var("MP_TRACE").is_ok_and(|v| v == "1") {
        trace::install();
    } else if let Ok(dir) = std::env::var("MP_LOGDIR") {
        trace::install_file(&dir, me);
    }
    let cluster: u64 = std::env::var("MP_CLUSTER")
        .ok()
        .and_then(|v| v.parse().ok())
        .expect("MP_CLUSTER");
    let dir = PathBuf::from(std::env::var("MP_DIR").expect("MP_DIR"));
    if let Ok(ns) = std::env::var("MP_NETNS") {
        enter_netns(&ns);
    }
    let bind: IpAddr = std::env::var("MP_BIND")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(IpAddr::from([127, 0, 0, 1]));
    let listener = TcpListener::bind((bind, 0)).expect("bind");
    let mut out = BufWriter::new(std::io::stdout());
    // libtest has written "test member_child ... " without a newline: end that line first.
    writeln!(
        out,
        "\nPORT {}",
        listener.local_addr().expect("addr").port()
    )
    .unwrap();
    out.flush().unwrap();

    let mut stdin = BufReader::new(std::io::stdin());
    let mut line = String::new();
    stdin.read_line(&mut line).expect("stdin");
    let addrs: Vec<SocketAddr> = line
        .trim()
        .strip_prefix("ADDRS ")
        .expect("ADDRS line")
        .split(',')
        .map(|a| a.parse().expect("address"))
        .collect();
    let quit = Arc::new(AtomicBool::new(false));
    let eof = Arc::new(AtomicBool::new(false));
    let join = Arc::new(AtomicBool::new(false));
    {
        let (quit, eof, join) = (quit.clone(), eof.clone(), join.clone());
        std::thread::spawn(move || {
            let mut l = String::new();
            loop {
                l.clear();
                match stdin.read_line(&mut l) {
                    Ok(0) | Err(_) => break,
                    Ok(_) if l.trim() == "QUIT" => quit.store(true, Ordering::Release),
                    Ok(_) if l.trim() == "JOIN" => join.store(true, Ordering::Release),
                    Ok(_) => {}
                }
            }
            quit.store(true, Ordering::Release);
            eof.store(true, Ordering::Release);
        });
    }

    let mut tcp = ClusterConfig::new(
        cluster,
        addrs
            .iter()
            .enumerate()
            .map(|(i, a)| (NodeId(i as u32), *a)),
    );
    tcp.heartbeat_period = s.tcp_heartbeat;
    tcp.heartbeat_timeout = s.tcp_timeout;
    tcp.op_timeout = s.op_timeout;
    tcp.connect_timeout = Duration::from_secs(30);
    // Every member runs on this host, on one clock: a member declared failed while absent
    // links again as soon as a new process of it starts (no skew to allow for).
    tcp.clock_skew = Duration::ZERO;
    // Late nodes (started after the others, see `Cluster::start_late`): the same list in every
    // member's config.
    if let Ok(late) = std::env::var("MP_LATE") {
        tcp.late = (late.split(','))
            .filter(|v| !v.is_empty())
            .map(|v| NodeId(v.parse().expect("MP_LATE")))
            .collect();
    }
    // Life 0 starts fresh; a later life restarts from what the member's earlier lives logged
    // (its GMS log and its durable epoch logs, in the run's directory).
    let life: u64 = std::env::var("MP_LIFE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // `MP_REJOIN=k`: this process restarts a killed member under its id (the k-th restart): a
    // new TCP incarnation, a fresh log and epoch directory, and a join by state transfer (see
    // `Cluster::respawn`).
    let rejoin: u64 = std::env::var("MP_REJOIN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // `MP_FILES=k`: the log and epoch directory of the k-th respawn (a total restart of a
    // member that rejoined reopens those).
    let files: u64 = std::env::var("MP_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(rejoin);
    let rejoin = if life > 0 { 0 } else { rejoin };
    let epochs = match files {
        0 => dir.join(format!("epochs-{me}")),
        k => dir.join(format!("epochs-{me}-restart{k}")),
    };
    std::fs::create_dir_all(&epochs).expect("epoch log directory");
    let cfg = s.group_config(&epochs);
    let regions = Group::<TcpNode, FileLog>::layout(&cfg)
        .expect("layout")
        .into_iter()
        .map(|r| Region::new(r).expect("region"))
        .collect();
    // Open (and fsync) the log before linking: once linked, the peers' suspicion timers run,
    // and an fsync on a busy disk can take longer than the suspicion timeout.
    let log_name = match files {
        0 => format!("gms-{me}.log"),
        k => format!("gms-{me}-restart{k}.log"),
    };
    // A restarted member whose GMS log file is gone (never written: its first process died
    // before it logged anything, or an operator removed it after a power loss) starts with a
    // new log, as an operator would start it: `Group::new` with nothing recovered.
    let log_path = dir.join(log_name);
    let fresh_log = life > 0 && !log_path.exists();
    let (mut log, recovered) = FileLog::open(&log_path).expect("log");
    assert!(
        s.sync_installed || !matches!(s.durable, Some(FsyncPolicy::EveryBatch)),
        "epochs that survive a power loss need the Installed record synced"
    );
    log.set_sync_installed(s.sync_installed);
    assert_eq!(
        recovered.records.is_empty(),
        life == 0 || fresh_log,
        "n{me}: a fresh member has an empty log, a restarted one its earlier lives' records"
    );
    // `MP_OUTSIDER=1` with a respawn: the new process starts from its empty log with
    // `Group::new` (an idle outsider, as a member of the last view whose log is empty would
    // restart), not as a joiner: nobody tells it to join.
    let outsider = std::env::var("MP_OUTSIDER").is_ok_and(|v| v == "1");
    let mut g = if rejoin > 0 && outsider {
        let node =
            TcpNode::rejoin_on(listener, tcp, NodeId(me), regions).expect("tcp node restarts");
        Group::new(node, cfg, log, None).expect("group")
    } else if rejoin == 0 {
        let node = TcpNode::start_on(listener, tcp, NodeId(me), regions).expect("tcp node starts");
        let recovered = (life > 0 && !fresh_log).then_some(&recovered);
        Group::new(node, cfg, log, recovered).expect("group")
    } else {
        let node =
            TcpNode::rejoin_on(listener, tcp, NodeId(me), regions).expect("tcp node restarts");
        let g = Group::joining(node, cfg, log).expect("group");
        writeln!(out, "J {}", now_us()).unwrap();
        g
    };
    // Restarting: the last view its log holds. A view newer than that with a state is a join
    // again by transfer (no replay follows); one not newer is its persisted snapshot's.
    let logged_view = g.view().map(|v| v.id);
    writeln!(out, "READY {}", now_us()).unwrap();
    out.flush().unwrap();

    let start = Instant::now();
    // Each life numbers its messages from `life << 32`, and a process restarted under a killed
    // member's id from `rejoin * 1_000_000`, so no (sender, seq) repeats.
    let mut seq = (life << 32) + files * 1_000_000;
    // A restarted member's deliveries before its first view are its epoch logs' replay (one
    // started with a new log has none: it runs view 0 afresh until it joins its peers' restart).
    let mut replaying = life > 0 && !fresh_log;
    // The freeze applies to a member's first process only, the crash point to its process of
    // life `crash_life` (the first by default).
    let first_process = life == 0 && rejoin == 0;
    let crash = s.crash.filter(|_| life == s.crash_life && rejoin == 0);
    let mut frozen = false;
    let mut join_polls = 0u32;
    let mut rejoined = None;
    let mut missing: Option<Vec<NodeId>> = None;
    let mut delivered_new = false;
    let mut next = Instant::now();
    // The application: a hash chain over the delivered payloads, and the next position.
    let mut applied = 0u64;
    let mut chain = 0u64;
    let mut joined = rejoin > 0 || outsider;
    let mut suspected = 0usize;
    let mut ups = Vec::new();
    let mut stopped = false;
    let mut t_last = now_us();
    while !quit.load(Ordering::Acquire) {
        assert!(
            start.elapsed() < s.child_deadline,
            "n{me}: not told to quit within {:?}",
            s.child_deadline
        );
        if frozen {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        if !joined && join.load(Ordering::Acquire) {
            joined = true;
            g.join().expect("join request");
            writeln!(out, "J {}", now_us()).unwrap();
        }
        // Restarting (before the restart view) the group has no epoch: nothing to submit to
        // (it answers `NotASender`, as if this member were a spare).
        // A member started with a new log runs view 0 afresh until it joins its peers' restart.
        let quiet = s.quiet_first_life && first_process || g.gms().restarting().is_some();
        if !stopped && !replaying && !quiet && g.is_active() && Instant::now() >= next {
            match g.submit(&payload(me, seq)) {
                Ok(()) => {
                    seq += 1;
                    next = Instant::now() + s.pace;
                }
                Err(SubmitError::WindowFull | SubmitError::Wedged) => {}
                Err(SubmitError::Stopped(_)) => {}
                Err(e) => panic!("n{me}: submit: {e}"),
            }
        }
        let t_poll = now_us();
        let busy = g.poll(&mut ups);
        let t = now_us();
        if t - t_poll > STALL_US {
            writeln!(out, "SLOW poll {} {t}", t - t_poll).unwrap();
        }
        for (node, why, _) in &g.gms().sst().suspicions()[suspected..] {
            writeln!(out, "S {} {why:?} {t}", node.0).unwrap();
        }
        suspected = g.gms().sst().suspicions().len();
        for u in ups.drain(..) {
            match u {
                Upcall::Deliver(d) => {
                    let (sender, q) = header(&d.payload).unwrap_or((u32::MAX, u64::MAX));
                    let dg = digest(&d.payload);
                    if d.position != applied {
                        writeln!(out, "BAD position {} where {applied} was next", d.position)
                            .unwrap();
                    }
                    chain = chain_step(chain, dg);
                    applied = d.position + 1;
                    if !replaying && !delivered_new {
                        delivered_new = true;
                        writeln!(out, "FIRST {t}").unwrap();
                    }
                    writeln!(
                        out,
                        "D {} {} {q} {} {dg} {chain}{}",
                        d.position,
                        d.sender.0,
                        d.payload.len(),
                        if replaying { " replay" } else { "" },
                    )
                    .unwrap();
                    if sender != d.sender.0 {
                        writeln!(out, "BAD header names {sender}, sent by {}", d.sender.0).unwrap();
                    }
                }
                Upcall::Discarded(p) => {
                    let (_, q) = header(&p).unwrap_or((u32::MAX, u64::MAX));
                    writeln!(out, "X {q}").unwrap();
                }
                Upcall::Wedged => {
                    let v = g.view().map_or(u64::MAX, |v| v.id);
                    writeln!(out, "W {v} {t}").unwrap();
                }
                Upcall::View(v) => {
                    // A joiner's first view: restore the state it was sent. A restarted member
                    // that entered by transfer restores its persisted state the same way, then
                    // replays its epoch logs from there, before the restart view.
                    let restored = g.take_state();
                    if restored.is_none() || life == 0 || logged_view.is_none_or(|l| v.id > l) {
                        replaying = false;
                    }
                    if let Some(st) = restored {
                        match state_chain(&st.state, s.state_bytes) {
                            Some(c) => {
                                chain = c;
                                applied = st.position;
                                writeln!(out, "T {} {c} {} {t}", st.position, st.state.len())
                                    .unwrap();
                            }
                            None => writeln!(out, "BAD state of {} bytes", st.state.len()).unwrap(),
                        }
                    }
                    let m: Vec<String> = v.members.iter().map(|m| m.0.to_string()).collect();
                    writeln!(out, "V {} {} {applied} {t}", v.id, m.join(",")).unwrap();
                }
                _ => {}
            }
        }
        let now_missing = g.gms().restarting().map(<[NodeId]>::to_vec);
        if now_missing != missing {
            if let Some(m) = &now_missing {
                let m: Vec<String> = m.iter().map(|n| n.0.to_string()).collect();
                writeln!(out, "M {} {t}", m.join(",")).unwrap();
            }
            missing = now_missing;
        }
        if t_poll.saturating_sub(t_last) > STALL_US {
            writeln!(out, "SLOW loop {} {t}", t_poll.saturating_sub(t_last)).unwrap();
        }
        if g.state_wanted() {
            g.provide_state(applied, &state(chain, s.state_bytes))
                .expect("provide the state");
            writeln!(out, "P {applied} {t}").unwrap();
            let d = now_us() - t;
            if d > STALL_US {
                writeln!(out, "SLOW provide {d} {t}").unwrap();
            }
        }
        if !stopped && let Some(why) = g.stopped() {
            stopped = true;
            writeln!(out, "STOP {t} {why}").unwrap();
        }
        if rejoined.is_none()
            && let Some((from, to)) = g.gms().rejoined()
        {
            rejoined = Some((from, to));
            writeln!(out, "RJ {from} {to} {t}").unwrap();
        }
        if s.freeze_after_join && first_process && joined && g.view().is_none() {
            // Three polls after the request: it has left (staged writes go out on a poll).
            join_polls += 1;
            if join_polls >= 3 {
                frozen = true;
                writeln!(out, "FROZEN {t}").unwrap();
            }
        }
        trace::drain(&mut out);
        let crash_now = match crash {
            Some(Crash::Decision | Crash::DecisionSent) => g.gms().decision().is_some(),
            Some(Crash::View(v)) => g.view().is_some_and(|w| w.id >= v),
            None => false,
        };
        if crash_now {
            if crash == Some(Crash::DecisionSent) && g.gms().leader() == Some(NodeId(me)) {
                // Waiting on the endpoint sends what the poll staged (the TCP node flushes
                // its batched writes there) without acting on anything.
                let until = Instant::now() + Duration::from_millis(200);
                while Instant::now() < until {
                    g.wait(Duration::from_millis(1));
                }
            }
            writeln!(out, "CRASH {t}").unwrap();
            out.flush().unwrap();
            // SAFETY: kill(2) on this very process; nothing of it runs afterwards.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        out.flush().unwrap();
        t_last = now_us();
        if !busy {
            let until = next.saturating_duration_since(Instant::now());
            g.wait(until.clamp(Duration::from_micros(100), Duration::from_millis(1)));
        }
    }
    writeln!(out, "END {seq}").unwrap();
    out.flush().unwrap();
    // Keep the process (and its links) up, silent, until the parent closes stdin.
    while !eof.load(Ordering::Acquire) {
        assert!(
            start.elapsed() < s.child_deadline,
            "n{me}: stdin not closed in time"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(g);
    std::process::exit(0);
}

// ---- what a member reported ----------------------------------------------------------------

/// One delivery as a member reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivered {
    pub position: u64,
    pub sender: u32,
    pub seq: u64,
    pub len: usize,
    pub digest: u64,
    /// The application's hash chain after applying it.
    pub chain: u64,
}

/// A view as a member reported installing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    pub id: u64,
    pub members: Vec<u32>,
    /// Its first position (deliveries before it; for a joiner, the transferred state's).
    pub before: u64,
    pub at: u64,
}

/// Everything one member reported.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub port: Option<u16>,
    pub ready: Option<u64>,
    pub delivered: Vec<Delivered>,
    pub discarded: Vec<u64>,
    /// (suspect, cause, time).
    pub suspicions: Vec<(u32, String, u64)>,
    /// (view, time).
    pub wedged: Vec<(u64, u64)>,
    pub views: Vec<Installed>,
    pub stop: Option<(u64, String)>,
    pub end: Option<u64>,
    /// A joiner: when it asked to join.
    pub join_requested: Option<u64>,
    /// A joiner: the state it received (position, chain, bytes, time).
    pub transferred: Option<(u64, u64, usize, u64)>,
    /// A member: the states it provided (position, time).
    pub provided: Vec<(u64, u64)>,
    /// Lines that say something is wrong (`BAD …`) or that were not understood.
    pub odd: Vec<String>,
    /// `MP_TRACE=1`: the membership crate's tracing events (time, message, fields).
    pub trace: Vec<(u64, String, String)>,
    /// Stalls of the member's loop (what, µs, time), see [`STALL_US`].
    pub stalls: Vec<(String, u64, u64)>,
    /// A restarted member: how many of its first deliveries were its epoch logs' replay.
    pub replayed: usize,
    /// When it first delivered a message that was not replayed.
    pub first_new: Option<u64>,
    /// Its last line, if the process died in the middle of writing it (not parsed).
    pub torn: Option<String>,
    /// A restarting member: the members of its last view it waited for, each time that changed
    /// (list, time).
    pub missing: Vec<(Vec<u32>, u64)>,
    /// It asked to join again by itself (`Gms::rejoined`): (its view, the view that went on
    /// without it, time).
    pub rejoined: Option<(u64, u64, u64)>,
    /// It reached its crash point ([`Settings::crash`]) and killed itself (time).
    pub crashed: Option<u64>,
    /// It stopped polling its group ([`Settings::freeze_after_join`]; time).
    pub frozen: Option<u64>,
}

impl Report {
    fn take(&mut self, line: &str) {
        let w: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> Option<u64> { w.get(i)?.parse().ok() };
        let ok = match w.first().copied() {
            Some("PORT") => num(1).map(|p| self.port = Some(p as u16)),
            Some("READY") => num(1).map(|t| self.ready = Some(t)),
            Some("D") => (|| {
                self.delivered.push(Delivered {
                    position: num(1)?,
                    sender: num(2)? as u32,
                    seq: num(3)?,
                    len: num(4)? as usize,
                    digest: num(5)?,
                    chain: num(6)?,
                });
                match w.get(7) {
                    Some(&"replay") => self.replayed += 1,
                    Some(_) => return None,
                    None => {}
                }
                Some(())
            })(),
            Some("M") => (|| {
                let (list, t) = match w.len() {
                    2 => ("", num(1)?),
                    _ => (*w.get(1)?, num(2)?),
                };
                let m = (list.split(','))
                    .filter(|v| !v.is_empty())
                    .map(|v| v.parse().ok())
                    .collect::<Option<_>>()?;
                self.missing.push((m, t));
                Some(())
            })(),
            Some("X") => num(1).map(|q| self.discarded.push(q)),
            Some("J") => num(1).map(|t| self.join_requested = Some(t)),
            Some("P") => (|| {
                self.provided.push((num(1)?, num(2)?));
                Some(())
            })(),
            Some("T") => (|| {
                self.transferred = Some((num(1)?, num(2)?, num(3)? as usize, num(4)?));
                Some(())
            })(),
            Some("S") => (|| {
                self.suspicions
                    .push((num(1)? as u32, w.get(2)?.to_string(), num(3)?));
                Some(())
            })(),
            Some("W") => (|| {
                self.wedged.push((num(1)?, num(2)?));
                Some(())
            })(),
            Some("V") => (|| {
                self.views.push(Installed {
                    id: num(1)?,
                    members: w
                        .get(2)?
                        .split(',')
                        .map(|m| m.parse().ok())
                        .collect::<Option<_>>()?,
                    before: num(3)?,
                    at: num(4)?,
                });
                Some(())
            })(),
            Some("STOP") => (|| {
                let t = num(1)?;
                let why = line.splitn(3, ' ').nth(2)?.to_string();
                self.stop = Some((t, why));
                Some(())
            })(),
            Some("END") => num(1).map(|n| self.end = Some(n)),
            Some("RJ") => (|| {
                self.rejoined = Some((num(1)?, num(2)?, num(3)?));
                Some(())
            })(),
            Some("CRASH") => num(1).map(|t| self.crashed = Some(t)),
            Some("FROZEN") => num(1).map(|t| self.frozen = Some(t)),
            Some("FIRST") => num(1).map(|t| self.first_new = Some(t)),
            Some("SLOW") => (|| {
                self.stalls.push((w.get(1)?.to_string(), num(2)?, num(3)?));
                Some(())
            })(),
            Some("TR") => (|| {
                let t = num(1)?;
                let rest = line.splitn(3, ' ').nth(2)?;
                let (msg, fields) = rest.split_once('|')?;
                self.trace.push((t, msg.to_string(), fields.to_string()));
                Some(())
            })(),
            // libtest's own lines
            Some("running" | "test" | "successes:" | "failures:") | None => Some(()),
            _ => None,
        };
        if ok.is_none() || line.starts_with("BAD") {
            self.odd.push(line.to_string());
        }
    }

    /// The first position this member delivered (a joiner's transferred state's).
    pub fn first_position(&self) -> u64 {
        self.transferred.map_or(0, |t| t.0)
    }

    /// The next position this member will deliver.
    pub fn next_position(&self) -> u64 {
        self.first_position() + self.delivered.len() as u64
    }

    /// Deliveries after view `id` was installed (0 if it was not).
    pub fn delivered_after(&self, id: u64) -> u64 {
        self.views
            .iter()
            .find(|v| v.id == id)
            .map_or(0, |v| self.next_position().saturating_sub(v.before))
    }

    /// When this member first traced `message` about view `view` (`MP_TRACE=1`).
    pub fn traced(&self, message: &str, view: u64) -> Option<u64> {
        let v = format!("view={view}");
        self.trace
            .iter()
            .find(|(_, m, f)| m == message && f.split_whitespace().any(|w| w == v))
            .map(|t| t.0)
    }

    /// The durations (µs) of the GMS log's appends (write + fsync), `MP_TRACE=1`.
    pub fn log_syncs(&self) -> Vec<u64> {
        self.trace
            .iter()
            .filter(|(_, m, _)| m == "membership log: appended and synced")
            .filter_map(|(_, _, f)| {
                f.split_whitespace()
                    .find_map(|w| w.strip_prefix("us=")?.parse().ok())
            })
            .collect()
    }

    /// When this member first suspected `node`.
    pub fn suspected_at(&self, node: u32) -> Option<u64> {
        self.suspicions.iter().find(|s| s.0 == node).map(|s| s.2)
    }

    /// The view `id`, if installed.
    pub fn view(&self, id: u64) -> Option<&Installed> {
        self.views.iter().find(|v| v.id == id)
    }
}

// ---- the parent ---------------------------------------------------------------------------

/// Where a member runs: loopback, or a network namespace with its own address.
#[derive(Clone, Debug)]
pub struct Place {
    pub netns: Option<String>,
    pub ip: IpAddr,
}

impl Place {
    pub fn loopback() -> Place {
        Place {
            netns: None,
            ip: IpAddr::from([127, 0, 0, 1]),
        }
    }
}

struct Member {
    child: Child,
    stdin: Option<ChildStdin>,
    report: Arc<Mutex<Report>>,
    stderr: Arc<Mutex<String>>,
    killed: bool,
}

/// The member processes of one run.
pub struct Cluster {
    members: Vec<Member>,
    dir: PathBuf,
    cluster_id: u64,
    /// Restarts so far (see [`respawn`](Self::respawn)).
    restarts: u64,
    pub settings: Settings,
    /// The `ADDRS` line, kept for late members (they get it when they are started).
    addrs_line: String,
    /// The ignored test the member processes run.
    entry: String,
    places: Vec<Place>,
    /// Each member's life: 0 for its first process, one more at each restart.
    lives: Vec<u64>,
    /// Per member, the [`respawn`](Self::respawn) whose fresh log and epoch directory it uses
    /// (0: its first ones); a total restart reopens those.
    files: Vec<u64>,
    /// Members whose next respawn starts as an idle outsider ([`respawn_outsider`](Self::respawn_outsider)).
    outsiders: BTreeSet<usize>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            let _ = m.child.kill();
            let _ = m.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Cluster {
    /// Starts one member process per place (node ids in order) running `entry` (the name of
    /// the ignored test that calls [`child_main`]), hands them each other's addresses, and
    /// waits until every one is linked and running its group.
    pub fn start(entry: &str, places: &[Place], settings: Settings) -> Cluster {
        Self::start_with_late(entry, places, settings, &[])
    }

    /// Like [`start`](Self::start), but the members in `late` are the TCP config's late nodes:
    /// their processes bind their addresses now and start their nodes (and groups) only when
    /// [`start_late`](Self::start_late) says so; until then they are absent to the others.
    pub fn start_with_late(
        entry: &str,
        places: &[Place],
        settings: Settings,
        late: &[usize],
    ) -> Cluster {
        assert_eq!(places.len(), settings.universe);
        static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let run = RUN.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("squall-mp-{}-{entry}-{run}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let mut c = Cluster {
            members: Vec::new(),
            dir,
            restarts: 0,
            settings,
            addrs_line: String::new(),
            entry: entry.to_string(),
            places: places.to_vec(),
            cluster_id: u64::from(std::process::id()) << 16 | u64::from(run),
            lives: vec![0; places.len()],
            files: vec![0; places.len()],
            outsiders: BTreeSet::new(),
        };
        let all: Vec<usize> = (0..places.len()).collect();
        c.members = all.iter().map(|&k| c.spawn(k, late, 0)).collect();
        c.link(&all, late, "every member to link and start its group");
        c
    }

    /// Starts member `k`'s process (its current life), with `late` as the TCP config's late
    /// nodes; `rejoin > 0`: the `rejoin`-th process restarted under a killed member's id (see
    /// [`respawn`](Self::respawn)).
    fn spawn(&self, k: usize, late: &[usize], rejoin: u64) -> Member {
        let late_env: Vec<String> = late.iter().map(|k| k.to_string()).collect();
        let exe = std::env::current_exe().expect("test binary");
        let place = &self.places[k];
        let mut cmd = Command::new(&exe);
        cmd.args([
            self.entry.as_str(),
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("MP_NODE", k.to_string())
        .env("MP_CLUSTER", self.cluster_id.to_string())
        .env("MP_DIR", &self.dir)
        .env("MP_BIND", place.ip.to_string())
        .env("MP_LATE", late_env.join(","))
        .env("MP_LIFE", self.lives[k].to_string())
        .env("MP_REJOIN", rejoin.to_string())
        .env("MP_FILES", self.files[k].to_string())
        .env(
            "MP_OUTSIDER",
            if self.outsiders.contains(&k) {
                "1"
            } else {
                "0"
            },
        )
        .env_remove("MP_NETNS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        if let Some(ns) = &place.netns {
            cmd.env("MP_NETNS", ns);
        }
        self.settings.to_env(&mut cmd);
        let mut child = cmd.spawn().expect("spawn member process");
        let report = Arc::new(Mutex::new(Report::default()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("stdout");
        let r = report.clone();
        std::thread::spawn(move || {
            let mut out = BufReader::new(out);
            let mut l = String::new();
            loop {
                l.clear();
                match out.read_line(&mut l) {
                    Ok(0) | Err(_) => break,
                    // A line cut short by a SIGKILL: kept aside, never parsed.
                    Ok(_) if !l.ends_with('\n') => r.lock().unwrap().torn = Some(l.clone()),
                    Ok(_) => r.lock().unwrap().take(l.trim_end_matches('\n')),
                }
            }
        });
        let err = child.stderr.take().expect("stderr");
        let e = stderr.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines() {
                let Ok(l) = l else { break };
                let mut e = e.lock().unwrap();
                e.push_str(&l);
                e.push('\n');
            }
        });
        Member {
            stdin: child.stdin.take(),
            child,
            report,
            stderr,
            killed: false,
        }
    }

    /// Waits until the members `started` bound their ports, hands them every member's address
    /// (members not started get a port nobody listens on), and waits until those not in `late`
    /// linked and run their groups.
    fn link(&mut self, started: &[usize], late: &[usize], what: &str) {
        self.wait_for("every member to bind", Duration::from_secs(30), |r| {
            started.iter().all(|&k| r[k].port.is_some())
        });
        let reports = self.reports();
        let addrs: Vec<String> = (0..self.places.len())
            .map(|k| {
                let ip = self.places[k].ip;
                let port = match reports[k].port {
                    Some(p) if started.contains(&k) => p,
                    // A member that stays down: an address nothing listens on.
                    _ => port_nobody_binds(ip),
                };
                SocketAddr::new(ip, port).to_string()
            })
            .collect();
        let line = format!("ADDRS {}\n", addrs.join(","));
        for &k in started {
            if late.contains(&k) {
                continue;
            }
            let s = self.members[k].stdin.as_mut().unwrap();
            s.write_all(line.as_bytes()).expect("addresses to a member");
            s.flush().expect("flush");
        }
        self.addrs_line = line;
        self.wait_for(what, Duration::from_secs(40), |r| {
            (started.iter()).all(|&k| late.contains(&k) || r[k].ready.is_some())
        });
    }

    /// Restarts the members `ks` (each killed before) from their directories: new processes
    /// (their next life: they restart from the GMS and epoch logs their earlier lives wrote)
    /// on new ports, the cluster config rebuilt with them; the members not restarted are late
    /// nodes in it that never start (absent to the restarted ones, never connected). Waits
    /// until every restarted member linked and runs its group (restarting). Their reports
    /// start empty; the earlier lives' reports should be taken before.
    pub fn restart(&mut self, ks: &[usize]) {
        self.restart_with_late(ks, &[]);
    }

    /// Like [`restart`](Self::restart), but the members `later` (some of `ks`) are late TCP
    /// nodes of the rebuilt config: their new processes bind now and start their groups only
    /// when [`start_late`](Self::start_late) says so, absent to the others until then.
    pub fn restart_with_late(&mut self, ks: &[usize], later: &[usize]) {
        let absent: Vec<usize> = (0..self.places.len())
            .filter(|k| !ks.contains(k) || later.contains(k))
            .collect();
        for &k in ks {
            assert!(self.members[k].killed, "member {k} must be killed first");
            self.lives[k] += 1;
            self.members[k] = self.spawn(k, &absent, 0);
        }
        self.link(
            ks,
            later,
            "every restarted member to link and start its group",
        );
    }

    /// The directory of the run (every member's GMS log and epoch logs).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// SIGKILLs `victim` once, waits until every other member installed view 1 (without it),
    /// and [`respawn`](Self::respawn)s it under its id. Returns the survivors.
    pub fn kill_and_rejoin(&mut self, victim: usize) -> Vec<usize> {
        self.kill(victim);
        let survivors: Vec<usize> = (0..self.members.len()).filter(|&k| k != victim).collect();
        self.wait_for("view 1 without the victim", Duration::from_secs(30), |r| {
            survivors.iter().all(|&k| r[k].view(1).is_some())
        });
        self.respawn(victim);
        survivors
    }

    /// Starts a fresh process in place of killed member `k`, under the same id (on a new
    /// port): its TCP node restarts as a new incarnation (`TcpNode::rejoin_on`) with a fresh
    /// log and joins (`Group::joining`, state transfer). Its report starts empty. Waits until
    /// it runs its group.
    pub fn respawn(&mut self, k: usize) {
        assert!(self.members[k].killed, "member {k} must be killed first");
        self.restarts += 1;
        self.files[k] = self.restarts;
        let m = self.spawn(k, &[], self.restarts);
        self.members[k] = m;
        self.wait_for(
            "the restarted member to bind",
            Duration::from_secs(30),
            |r| r[k].port.is_some(),
        );
        let line = self.addrs_line.clone();
        let s = self.members[k].stdin.as_mut().expect("a live member");
        s.write_all(line.as_bytes()).expect("addresses to a member");
        s.flush().expect("flush");
        self.wait_for(
            "the restarted member to start",
            Duration::from_secs(40),
            |r| r[k].ready.is_some(),
        );
    }

    /// Like [`respawn`](Self::respawn), but the new process starts from its empty log with
    /// `Group::new` (an idle outsider: a member of the last view that lost, or never wrote, its
    /// log), not as a joiner; nothing tells it to join.
    pub fn respawn_outsider(&mut self, k: usize) {
        self.outsiders.insert(k);
        self.respawn(k);
        self.outsiders.remove(&k);
    }

    /// Waits until member `late`, started after the others' total restart, installed a view,
    /// received the state and delivered messages of its own, and every member of `started`
    /// delivered 100 messages after that view; ends the run and checks it with
    /// [`check_late_member`]. Returns the final reports.
    pub fn finish_with_late_member(mut self, started: &[usize], late: usize) -> Vec<Report> {
        self.wait_for(
            "the late member's state, its own deliveries, and deliveries after its view everywhere",
            Duration::from_secs(60),
            |r| {
                let Some(v) = r[late].views.first() else {
                    return false;
                };
                r[late].transferred.is_some()
                    && r[late].delivered.iter().any(|d| d.sender == late as u32)
                    && started.iter().all(|&k| r[k].delivered_after(v.id) >= 100)
            },
        );
        let reports = self.finish();
        check_late_member(&reports, started, late);
        reports
    }

    /// Waits until member `k`, which reported reaching its crash point
    /// ([`Settings::crash`]), has exited, and counts it killed.
    pub fn reap_crashed(&mut self, k: usize) {
        let m = &mut self.members[k];
        assert!(
            m.report.lock().unwrap().crashed.is_some(),
            "member {k} did not crash itself"
        );
        let _ = m.child.wait();
        m.killed = true;
    }

    /// Starts late member `k` (see [`start_with_late`](Self::start_with_late)): it gets the
    /// addresses, starts its TCP node (which dials every configured peer) and its group, and
    /// this waits until it reports ready.
    pub fn start_late(&mut self, k: usize) {
        let line = self.addrs_line.clone();
        let s = self.members[k].stdin.as_mut().expect("a live member");
        s.write_all(line.as_bytes()).expect("addresses to a member");
        s.flush().expect("flush");
        self.wait_for("the late member to start", Duration::from_secs(40), |r| {
            r[k].ready.is_some()
        });
    }

    /// A snapshot of every member's report.
    pub fn reports(&self) -> Vec<Report> {
        self.members
            .iter()
            .map(|m| m.report.lock().unwrap().clone())
            .collect()
    }

    /// Each member's stderr, for failure messages.
    pub fn stderr(&self) -> String {
        let mut s = String::new();
        for (k, m) in self.members.iter().enumerate() {
            let e = m.stderr.lock().unwrap();
            let tail: String = e
                .lines()
                .rev()
                .take(30)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            s.push_str(&format!("--- member {k} stderr (tail)\n{tail}\n"));
        }
        s
    }

    fn summary(&self) -> String {
        let mut s = String::new();
        for (k, r) in self.reports().iter().enumerate() {
            s.push_str(&format!(
                "member {k}: {} delivered, views {:?}, suspicions {:?}, stop {:?}, stalls {:?}, odd {:?}\n",
                r.delivered.len(),
                r.views
                    .iter()
                    .map(|v| (v.id, v.members.clone(), v.before))
                    .collect::<Vec<_>>(),
                r.suspicions,
                r.stop,
                r.stalls.iter().take(8).collect::<Vec<_>>(),
                r.odd.iter().take(3).collect::<Vec<_>>()
            ));
        }
        s
    }

    /// Polls the members' reports until `done` holds; panics (with what every member
    /// reported) after `limit`, or if a member that was not killed exits early.
    pub fn wait_for(
        &mut self,
        what: &str,
        limit: Duration,
        mut done: impl FnMut(&[Report]) -> bool,
    ) {
        let start = Instant::now();
        loop {
            if done(&self.reports()) {
                return;
            }
            for (k, m) in self.members.iter_mut().enumerate() {
                if !m.killed
                    && let Ok(Some(status)) = m.child.try_wait()
                {
                    // Let the reader threads catch up before reporting.
                    std::thread::sleep(Duration::from_millis(50));
                    // It crashed itself at its crash point (`Settings::crash`): as if killed.
                    if m.report.lock().unwrap().crashed.is_some() {
                        m.killed = true;
                        continue;
                    }
                    panic!(
                        "waiting for {what}: member {k} exited ({status})\n{}{}",
                        self.summary(),
                        self.stderr()
                    );
                }
            }
            if start.elapsed() > limit {
                panic!(
                    "waiting for {what}: not done after {limit:?}\n{}{}",
                    self.summary(),
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Writes `line` to member `k`'s stdin.
    pub fn tell(&mut self, k: usize, line: &str) {
        let s = self.members[k].stdin.as_mut().expect("a live member");
        s.write_all(line.as_bytes()).expect("write to a member");
        s.write_all(b"\n").expect("write to a member");
        s.flush().expect("flush");
    }

    /// SIGKILLs member `k`; returns the time (µs of `CLOCK_MONOTONIC`) just before the signal.
    pub fn kill(&mut self, k: usize) -> u64 {
        let m = &mut self.members[k];
        m.killed = true;
        let t = now_us();
        m.child.kill().expect("SIGKILL");
        let _ = m.child.wait();
        t
    }

    /// SIGKILLs the members `ks` as nearly at once as it can (every signal sent before waiting
    /// for any), so that the others have no time to change views in between; returns the time
    /// (µs of `CLOCK_MONOTONIC`) just before the last signal.
    pub fn kill_all(&mut self, ks: &[usize]) -> u64 {
        let mut t = 0;
        for &k in ks {
            let m = &mut self.members[k];
            m.killed = true;
            t = now_us();
            m.child.kill().expect("SIGKILL");
        }
        for &k in ks {
            let _ = self.members[k].child.wait();
        }
        t
    }

    /// Like [`kill_all`](Self::kill_all), but first freezes every member of `ks` with SIGSTOP,
    /// then SIGKILLs them: a frozen process keeps its connections open and is silent for far
    /// less than a suspicion timeout, so the others notice nothing before the first SIGKILL,
    /// and the members of `ks` can no longer act between two SIGKILLs. (`kill_all`'s
    /// signals can be tens of milliseconds apart when the parent is descheduled on a loaded
    /// machine: idle members changed views in between, seen once in 30 runs of
    /// `tcp_restart_rules`.) Returns the time (µs of `CLOCK_MONOTONIC`) just before the first
    /// SIGKILL.
    pub fn freeze_and_kill_all(&mut self, ks: &[usize]) -> u64 {
        for &k in ks {
            let pid = i32::try_from(self.members[k].child.id()).expect("pid");
            // SAFETY: kill(2) on a child process of ours that has not been waited for.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
        }
        let t = now_us();
        self.kill_all(ks);
        t
    }

    /// The last view member `k`'s GMS log holds (read without changing the file).
    pub fn logged_view(&self, k: usize) -> Option<(u64, Vec<u32>)> {
        let bytes = std::fs::read(self.dir.join(format!("gms-{k}.log"))).ok()?;
        let (_, rec) = squall_membership::log::MemLog::open(bytes);
        rec.last_view()
            .map(|(v, m)| (v, m.iter().map(|n| n.0).collect()))
    }

    /// Ends the run: every live member stops reporting (`QUIT`), then every member exits
    /// (stdin closed). Returns the final reports. Panics if a member does not end in time.
    pub fn finish(mut self) -> Vec<Report> {
        for m in self.members.iter_mut().filter(|m| !m.killed) {
            let s = m.stdin.as_mut().unwrap();
            let _ = s.write_all(b"QUIT\n");
            let _ = s.flush();
        }
        let live: Vec<bool> = self.members.iter().map(|m| !m.killed).collect();
        self.wait_for("every member to end", Duration::from_secs(20), |r| {
            r.iter().zip(&live).all(|(r, &l)| !l || r.end.is_some())
        });
        for m in &mut self.members {
            m.stdin = None;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for k in 0..self.members.len() {
            loop {
                let m = &mut self.members[k];
                match m.child.try_wait().expect("wait") {
                    Some(status) => {
                        assert!(
                            m.killed || status.success(),
                            "member {k} ended with {status}\n{}",
                            self.stderr()
                        );
                        break;
                    }
                    None if Instant::now() > deadline => {
                        panic!("member {k} did not exit after its stdin closed")
                    }
                    None => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }
        // END is each live member's last line, so everything before it has been parsed.
        self.reports()
    }
}

// ---- the checks ---------------------------------------------------------------------------

/// Checks a run in which `lost` (killed or cut off) left view 0 and the others went on in
/// view 1 = `view1`; members of `view1` that were not in view 0 are joiners:
///
/// - every member's positions are gapless (from 0; a joiner's from its transferred state's),
///   and every payload is the genuine message its header names (length and digest);
/// - all members' delivery sequences (the lost ones' included) are identical on the positions
///   they share, positions and the application's hash chain included; a joiner's transferred
///   chain is the others' chain at its position;
/// - every survivor installed exactly view 1 = `view1`, the initial members after the same
///   number of deliveries everywhere (virtual synchrony; a joiner at or after it), delivered
///   at least `min_after` messages in it, and did not stop;
/// - every discarded message was the survivor's own and is delivered nowhere; each sender's
///   stream is delivered in order with no duplicates, and for a survivor its delivered and
///   discarded messages together leave no gap.
pub fn check_run(reports: &[Report], lost: &[usize], view1: &[u32], min_after: u64) {
    let n = reports.len();
    let survivors: Vec<usize> = (0..n).filter(|k| !lost.contains(k)).collect();
    let joiner = |k: usize| reports[k].transferred.is_some() || reports[k].join_requested.is_some();
    for (k, r) in reports.iter().enumerate() {
        check_genuine(&format!("member {k}"), r);
    }
    let at = |k: usize, pos: u64| -> Option<&Delivered> {
        let r = &reports[k];
        r.delivered
            .get(usize::try_from(pos.checked_sub(r.first_position())?).ok()?)
    };
    for a in 0..n {
        for b in a + 1..n {
            let from = reports[a].first_position().max(reports[b].first_position());
            let to = reports[a].next_position().min(reports[b].next_position());
            if let Some(i) = (from..to).find(|&i| at(a, i) != at(b, i)) {
                panic!(
                    "members {a} and {b} differ at position {i}: {:?} vs {:?}",
                    at(a, i),
                    at(b, i)
                );
            }
        }
    }
    let mut before = BTreeSet::new();
    for &k in &survivors {
        let r = &reports[k];
        assert!(r.stop.is_none(), "survivor {k} stopped: {:?}", r.stop);
        let ids: Vec<u64> = r.views.iter().map(|v| v.id).collect();
        assert_eq!(ids, vec![1], "survivor {k} must install exactly view 1");
        assert_eq!(r.views[0].members, view1, "survivor {k}'s view 1");
        if !joiner(k) {
            before.insert(r.views[0].before);
        }
        let after = r.delivered_after(1);
        assert!(
            after >= min_after,
            "survivor {k} delivered only {after} messages in view 1"
        );
    }
    assert_eq!(
        before.len(),
        1,
        "view 1 installed after different numbers of deliveries: {before:?}"
    );
    let start1 = *before.first().unwrap();
    for k in (0..n).filter(|&k| joiner(k)) {
        let (pos, chain, _, _) = reports[k]
            .transferred
            .unwrap_or_else(|| panic!("joiner {k} received no state"));
        assert!(
            pos >= start1,
            "joiner {k}'s state at {pos} is older than view 1 ({start1})"
        );
        let expect = if pos == 0 {
            Some(0)
        } else {
            (0..n)
                .filter(|&o| !joiner(o))
                .find_map(|o| at(o, pos - 1).map(|d| d.chain))
        };
        assert_eq!(
            Some(chain),
            expect,
            "joiner {k}'s transferred state differs from the others' at position {pos}"
        );
    }
    for &k in lost {
        assert!(
            reports[k].views.is_empty(),
            "lost member {k} installed {:?}",
            reports[k].views
        );
    }
    // Per sender streams, over the longest sequence (the others are prefixes of it).
    let longest = reports
        .iter()
        .filter(|r| r.first_position() == 0)
        .max_by_key(|r| r.delivered.len())
        .map(|r| &r.delivered)
        .unwrap();
    let streams = sender_streams(longest);
    for &k in &survivors {
        let r = &reports[k];
        let mine = streams.get(&(k as u32)).cloned().unwrap_or_default();
        for q in &r.discarded {
            assert!(
                reports.iter().all(|o| o
                    .delivered
                    .iter()
                    .all(|d| (d.sender, d.seq) != (k as u32, *q))),
                "member {k}'s discarded message {q} was delivered"
            );
        }
        let all: BTreeSet<u64> = mine.iter().chain(&r.discarded).copied().collect();
        assert_eq!(
            all.len(),
            mine.len() + r.discarded.len(),
            "member {k}: a message both delivered and discarded"
        );
        if let Some(&top) = mine.last() {
            let missing: Vec<u64> = (0..top).filter(|q| !all.contains(q)).collect();
            assert!(
                missing.is_empty(),
                "member {k}: messages {missing:?} neither delivered nor discarded"
            );
        }
    }
}

// ---- network namespaces -------------------------------------------------------------------

pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The namespaces of one run; deleted (with their interfaces) on drop.
pub struct Netns {
    pub names: Vec<String>,
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = ip(&["netns", "del", n]);
        }
    }
}

/// Why namespaces cannot be used here, if they cannot.
pub fn netns_unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root to create network namespaces".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("needs iproute2 (`ip`); apt-get install -y iproute2".into());
    }
    None
}

/// A bridge namespace and `n` member namespaces joined to it by veth pairs; member k gets
/// 10.79.0.(k+1) on its `eth0`. Names are `sqm<pid>-<tag>-*`.
pub fn topology(n: usize, tag: &str) -> Result<(Netns, Vec<Place>), String> {
    let base = format!("sqm{}-{tag}", std::process::id());
    let bridge = format!("{base}-br");
    let mut ns = Netns { names: Vec::new() };
    ip(&["netns", "add", &bridge])?;
    ns.names.push(bridge.clone());
    ip(&["-n", &bridge, "link", "add", "br0", "type", "bridge"])?;
    ip(&["-n", &bridge, "link", "set", "br0", "up"])?;
    let mut places = Vec::new();
    for k in 0..n {
        let name = format!("{base}-n{k}");
        ip(&["netns", "add", &name])?;
        ns.names.push(name.clone());
        let port = format!("p{k}");
        ip(&[
            "-n", &name, "link", "add", "eth0", "type", "veth", "peer", "name", &port, "netns",
            &bridge,
        ])?;
        ip(&["-n", &name, "link", "set", "lo", "up"])?;
        let addr = format!("10.79.0.{}", k + 1);
        ip(&[
            "-n",
            &name,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", &name, "link", "set", "eth0", "up"])?;
        ip(&["-n", &bridge, "link", "set", &port, "master", "br0"])?;
        ip(&["-n", &bridge, "link", "set", &port, "up"])?;
        places.push(Place {
            netns: Some(name),
            ip: addr.parse().unwrap(),
        });
    }
    Ok((ns, places))
}

// ---- one failure run ----------------------------------------------------------------------

/// How a run's failure is caused.
pub enum Failure<'a> {
    /// SIGKILL of the member.
    Kill(usize),
    /// `ip link set eth0 down` in the member's namespace (one of `places`).
    Cut(usize, &'a [Place]),
}

impl Failure<'_> {
    /// The member lost.
    pub fn victim(&self) -> usize {
        match self {
            Failure::Kill(k) | Failure::Cut(k, _) => *k,
        }
    }
}

/// What one failure run measured, in µs of `CLOCK_MONOTONIC`.
#[derive(Clone, Debug)]
pub struct Timing {
    /// Failure → the first survivor suspects the victim.
    pub detect_us: u64,
    /// First suspicion → view 1 installed at the last survivor.
    pub protocol_us: u64,
    /// First suspicion → view 1 installed at the first survivor.
    pub first_view_us: u64,
    /// With [`Settings::trace`]: each phase of the view change, µs after the failure (see
    /// [`PHASES`]); `None` where no survivor traced it.
    pub phases: Vec<Option<u64>>,
    /// With [`Settings::trace`]: every GMS log append (write + fsync) the survivors made, µs.
    pub syncs: Vec<u64>,
}

/// How a phase's time is taken over the survivors that traced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Over {
    /// The first survivor (the leader's steps).
    First,
    /// The last survivor (steps every member, or every follower, takes).
    Last,
}

/// The view change's phases, in protocol order: label, traced message (`gms.rs`, `log.rs`;
/// `None`: the member's own `V` line), the view the event names relative to the changing
/// one, and whose time counts.
pub const PHASES: &[(&str, Option<&str>, u64, Over)] = &[
    (
        "every survivor wedged",
        Some("membership: wedged"),
        0,
        Over::Last,
    ),
    (
        "leader proposes",
        Some("membership: proposing"),
        0,
        Over::First,
    ),
    (
        "every follower acked",
        Some("membership: acking"),
        0,
        Over::Last,
    ),
    (
        "leader decides",
        Some("membership: decided"),
        0,
        Over::First,
    ),
    (
        "leader logged the decision (fsync), publishes",
        Some("membership: publishing the decision"),
        0,
        Over::First,
    ),
    (
        "every follower saw the decision",
        Some("membership: decision seen"),
        0,
        Over::Last,
    ),
    (
        "every follower logged it (fsync), echoes",
        Some("membership: echoing"),
        0,
        Over::Last,
    ),
    (
        "every survivor saw every echo",
        Some("membership: every echo seen"),
        0,
        Over::Last,
    ),
    (
        "every survivor logged the view (fsync unless off)",
        Some("membership: view installed"),
        1,
        Over::Last,
    ),
    (
        "every survivor's group installed it (trim delivered, epoch started)",
        None,
        1,
        Over::Last,
    ),
];

/// The phases of the view change from view `view` to `view + 1` at `survivors`, µs after
/// `from` (see [`PHASES`]).
pub fn phases(reports: &[Report], survivors: &[usize], view: u64, from: u64) -> Vec<Option<u64>> {
    PHASES
        .iter()
        .map(|&(_, msg, dv, over)| {
            let times = survivors.iter().filter_map(|&k| match msg {
                Some(m) => reports[k].traced(m, view + dv),
                None => reports[k].view(view + dv).map(|v| v.at),
            });
            let t = match over {
                Over::First => times.min(),
                Over::Last => times.max(),
            };
            t.map(|t| t.saturating_sub(from))
        })
        .collect()
}

/// Starts members at `places`, lets deliveries flow (`warmup` each), causes `failure`, waits
/// until every survivor installed view 1 and delivered `after` messages in it, ends the run and
/// checks it with [`check_run`]. For a cut, the victim must also stop as a minority and
/// install nothing. Returns the reports and the timing.
pub fn failure_run(
    entry: &str,
    places: &[Place],
    settings: Settings,
    failure: Failure<'_>,
    warmup: u64,
    after: u64,
) -> (Vec<Report>, Timing) {
    let n = places.len();
    let victim = failure.victim();
    let mut c = Cluster::start(entry, places, settings);
    c.warm_up(warmup);
    let t0 = match failure {
        Failure::Kill(k) => c.kill(k),
        Failure::Cut(k, places) => {
            let ns = places[k].netns.as_deref().expect("a member in a namespace");
            let t = now_us();
            ip(&["-n", ns, "link", "set", "eth0", "down"]).expect("cut the member's link");
            t
        }
    };
    let is_cut = matches!(failure, Failure::Cut(..));
    c.wait_for(
        "view 1 and deliveries in it at every survivor",
        Duration::from_secs(40),
        |r| {
            (0..n)
                .filter(|&k| k != victim)
                .all(|k| r[k].delivered_after(1) >= after)
                && (!is_cut || r[victim].stop.is_some())
        },
    );
    let reports = c.finish();
    let view1: Vec<u32> = (0..n as u32).filter(|&k| k as usize != victim).collect();
    check_run(&reports, &[victim], &view1, after);
    if is_cut {
        let (_, why) = reports[victim].stop.as_ref().unwrap();
        assert!(
            why.starts_with("minority"),
            "the cut-off member must stop as a minority, not: {why}"
        );
    }
    let survivors = (0..n).filter(|&k| k != victim);
    let first = survivors
        .clone()
        .filter_map(|k| reports[k].suspected_at(victim as u32))
        .min()
        .expect("a survivor suspected the victim");
    let views: Vec<u64> = survivors.map(|k| reports[k].view(1).unwrap().at).collect();
    let last = *views.iter().max().unwrap();
    let earliest = *views.iter().min().unwrap();
    let alive: Vec<usize> = (0..n).filter(|&k| k != victim).collect();
    let timing = Timing {
        detect_us: first.saturating_sub(t0),
        protocol_us: last.saturating_sub(first),
        first_view_us: earliest.saturating_sub(first),
        phases: phases(&reports, &alive, 0, t0),
        syncs: alive.iter().flat_map(|&k| reports[k].log_syncs()).collect(),
    };
    (reports, timing)
}

/// What one join run measured, in µs of `CLOCK_MONOTONIC`.
#[derive(Clone, Copy, Debug)]
pub struct JoinTiming {
    /// The joiner asks → it installed view 1 with the state (active).
    pub join_us: u64,
    /// Bytes of state transferred.
    pub state_len: usize,
}

/// Starts `settings.universe` processes on loopback: `settings.members` initial members and
/// joiners after them (linked from the start: `TcpNode` has no late links yet, so a joiner
/// process starts with the others and stays outside the group, submitting nothing, until told
/// `JOIN`). Once deliveries flow, the last process asks to join; every process must install
/// view 1 with it, the joiner must receive the state (the hash chain at its position, plus
/// `settings.state_bytes` bytes) and then deliver exactly what the others deliver, with the
/// same chain at every position. Checked with [`check_run`].
pub fn join_run(
    entry: &str,
    settings: Settings,
    warmup: u64,
    after: u64,
) -> (Vec<Report>, JoinTiming) {
    join_run_with(entry, settings, warmup, after, false)
}

/// Like [`join_run`], but the joiner's process is a late TCP node: it is *started* (its
/// `TcpNode` and `Group` created) only once the members are streaming, absent to them until
/// then, and asks to join as soon as it is ready.
pub fn late_join_run(
    entry: &str,
    settings: Settings,
    warmup: u64,
    after: u64,
) -> (Vec<Report>, JoinTiming) {
    join_run_with(entry, settings, warmup, after, true)
}

fn join_run_with(
    entry: &str,
    settings: Settings,
    warmup: u64,
    after: u64,
    late: bool,
) -> (Vec<Report>, JoinTiming) {
    let n = settings.universe;
    let joiner = n - 1;
    let members = settings.members;
    let places = vec![Place::loopback(); n];
    let late_nodes: &[usize] = if late { &[joiner] } else { &[] };
    let mut c = Cluster::start_with_late(entry, &places, settings, late_nodes);
    c.wait_for(
        "deliveries from every member at every member",
        Duration::from_secs(30),
        |r| {
            r[..members].iter().all(|r| {
                let senders: BTreeSet<u32> = r.delivered.iter().map(|d| d.sender).collect();
                r.delivered.len() as u64 >= warmup && senders.len() == members
            })
        },
    );
    if late {
        assert!(
            c.reports()[joiner].ready.is_none(),
            "the late joiner started before it was told to"
        );
        c.start_late(joiner);
    }
    c.tell(joiner, "JOIN");
    c.wait_for(
        "the joiner's state and deliveries in view 1 everywhere",
        Duration::from_secs(60),
        |r| {
            r[joiner].transferred.is_some()
                && r.iter().all(|r| r.delivered_after(1) >= after)
                && r[joiner]
                    .delivered
                    .iter()
                    .any(|d| d.sender == joiner as u32)
        },
    );
    let reports = c.finish();
    let view1: Vec<u32> = (0..n as u32).collect();
    check_run(&reports, &[], &view1, after);
    let r = &reports[joiner];
    let t = r.transferred.unwrap();
    let timing = JoinTiming {
        join_us: r
            .view(1)
            .unwrap()
            .at
            .saturating_sub(r.join_requested.unwrap()),
        state_len: t.2,
    };
    (reports, timing)
}

/// Each sender's messages in `delivered`, in delivery order; panics if a sender's stream is
/// out of order or has a duplicate.
fn sender_streams(delivered: &[Delivered]) -> BTreeMap<u32, Vec<u64>> {
    let mut streams: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for d in delivered {
        streams.entry(d.sender).or_default().push(d.seq);
    }
    for (s, seqs) in &streams {
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "sender {s}'s messages delivered out of order or twice"
        );
    }
    streams
}

// ---- total restart ------------------------------------------------------------------------

/// Checks one member's deliveries: positions gapless from its first (0, or a joiner's state's)
/// and every payload the genuine message its header names (length and digest); nothing odd
/// reported.
pub fn check_genuine(what: &str, r: &Report) {
    assert!(r.odd.is_empty(), "{what} reported {:?}", r.odd);
    for (i, d) in r.delivered.iter().enumerate() {
        let i = i as u64 + r.first_position();
        assert_eq!(d.position, i, "{what}: positions must be gapless");
        let p = payload(d.sender, d.seq);
        assert_eq!(
            (d.len, d.digest),
            (p.len(), digest(&p)),
            "{what}: position {i} is not the genuine message {}:{}",
            d.sender,
            d.seq
        );
    }
}

/// Checks a total restart: `before` is what every member reported in its earlier lives (all
/// killed), `after` what the members `started` reported since they restarted (the others are
/// absent); `restarted` are the restart view's members (the others started must stop,
/// removed, installing nothing). Every restarted member replays the same sequence (positions and the
/// application's chain included) and installs the same restart view = `restarted` right
/// after it; every sequence any member delivered before (the killed ones' included) is a
/// prefix of the replay, so nothing delivered is lost; after the replay the restarted members
/// deliver identically at the following positions, at least `min_new` messages each, among
/// them messages every restarted member submitted in its new life; no sender's stream is
/// delivered out of order or twice; no member stopped. Returns the replayed sequence.
pub fn check_restart(
    before: &[Report],
    after: &[Report],
    started: &[usize],
    restarted: &[usize],
    min_new: u64,
) -> Vec<Delivered> {
    for (k, r) in before.iter().enumerate() {
        check_genuine(&format!("member {k} before the restart"), r);
    }
    for &k in started {
        check_genuine(&format!("member {k} after the restart"), &after[k]);
    }
    // Started, but not in the restart view: a view went on without it (installed before the
    // kill, or a decision logged before it and adopted by the inspector), so it must learn
    // that it was removed: it either stops with nothing installed, or joins the restarted group
    // again as a new member (state by transfer, no replay; checked below against the others).
    let k0 = restarted[0];
    for k in started.iter().filter(|k| !restarted.contains(k)) {
        let r = &after[*k];
        let stopped = r.stop.is_some() && r.views.is_empty() && r.delivered.is_empty();
        let rejoined = r.stop.is_none()
            && r.replayed == 0
            && !r.views.is_empty()
            && (r.views.iter()).all(|v| {
                v.members.contains(&(*k as u32))
                    && after[k0]
                        .views
                        .first()
                        .is_some_and(|first| v.id >= first.id)
            });
        assert!(
            stopped || rejoined,
            "member {k} is not in the last view but neither stopped with nothing installed nor \
             joined again after the restart view: {:?}",
            (&r.stop, &r.views, r.delivered.len(), r.replayed)
        );
        // A member that joined again delivers exactly what the restarted members delivered at
        // the same positions.
        for d in &r.delivered {
            if let Some(o) = after[k0]
                .delivered
                .iter()
                .find(|o| o.position == d.position)
            {
                assert_eq!(
                    (o.sender, o.seq, o.digest),
                    (d.sender, d.seq, d.digest),
                    "member {k} (joined again) and member {k0} differ at position {}",
                    d.position
                );
            }
        }
    }
    let replay = after[k0].delivered[..after[k0].replayed].to_vec();
    for &k in restarted {
        let r = &after[k];
        assert_eq!(
            r.replayed,
            replay.len(),
            "members {k0} and {k} replayed different lengths"
        );
        if let Some(i) = (0..replay.len()).find(|&i| r.delivered[i] != replay[i]) {
            panic!(
                "members {k0} and {k} replayed differently at position {i}: {:?} vs {:?}",
                replay[i], r.delivered[i]
            );
        }
        assert!(r.stop.is_none(), "member {k} stopped: {:?}", r.stop);
        let views: Vec<(u64, &[u32], u64)> = (r.views.iter())
            .map(|v| (v.id, v.members.as_slice(), v.before))
            .collect();
        // The restart view first; later views only add back members of the run that joined
        // again (rejoin under the same id), never drop a restarted one.
        // The restarted members, and any member that joined it again right away (a late root
        // whose log ended at this view's number).
        let want: Vec<u32> = (after[k0].views.first()).map_or_else(
            || restarted.iter().map(|&m| m as u32).collect(),
            |v| v.members.clone(),
        );
        assert_eq!(views[0].1, want, "member {k}'s restart view: {views:?}");
        for v in &views[1..] {
            assert!(
                want.iter().all(|m| v.1.contains(m))
                    && v.1.iter().all(|&m| started.contains(&(m as usize))),
                "member {k}: after the restart view only members that joined again may come in: {views:?}"
            );
        }
        assert_eq!(
            views[0].2,
            replay.len() as u64,
            "member {k} installed the restart view after other than its replay"
        );
        assert_eq!(
            views[0].0, after[k0].views[0].id,
            "members {k0} and {k} installed different restart views"
        );
        let new = r.delivered.len() as u64 - replay.len() as u64;
        assert!(
            new >= min_new,
            "member {k} delivered only {new} messages after the replay"
        );
        for &s in restarted {
            assert!(
                r.delivered[replay.len()..]
                    .iter()
                    .any(|d| d.sender == s as u32 && d.seq >= 1 << 32),
                "member {k} delivered nothing that member {s} submitted after restarting"
            );
        }
    }
    for (k, r) in before.iter().enumerate() {
        let n = r.delivered.len();
        assert!(
            n <= replay.len(),
            "member {k} delivered {n} messages before the restart, the replay has only {}: \
             delivered messages were lost",
            replay.len()
        );
        if let Some(i) = (0..n).find(|&i| r.delivered[i] != replay[i]) {
            panic!(
                "member {k} delivered {:?} at position {i} before the restart, the replay has {:?}",
                r.delivered[i], replay[i]
            );
        }
    }
    for a in restarted {
        for b in restarted {
            let (ra, rb) = (&after[*a].delivered, &after[*b].delivered);
            if let Some(i) = (0..ra.len().min(rb.len())).find(|&i| ra[i] != rb[i]) {
                panic!(
                    "members {a} and {b} differ at position {i} after the restart: {:?} vs {:?}",
                    ra[i], rb[i]
                );
            }
        }
    }
    let longest = (restarted.iter())
        .map(|&k| &after[k].delivered)
        .max_by_key(|d| d.len())
        .unwrap();
    sender_streams(longest);
    for &k in restarted {
        for q in &after[k].discarded {
            assert!(
                !longest.iter().any(|d| (d.sender, d.seq) == (k as u32, *q)),
                "member {k}'s discarded message {q} was delivered"
            );
        }
    }
    replay
}

/// Checks a member `late` that came into the running group of the members `started` after
/// their total restart, as a new process (a joiner, or an outsider that joined by itself):
/// nothing odd and nobody stopped; every view it installed names it and the others installed
/// the same one at the same position (its first at or before the state it was sent); its
/// transferred state is the others' chain at its position; from there it delivered what each
/// of them delivered, at least 50 messages.
pub fn check_late_member(reports: &[Report], started: &[usize], late: usize) {
    for &k in started.iter().chain([&late]) {
        let r = &reports[k];
        assert!(r.odd.is_empty(), "member {k} reported {:?}", r.odd);
        assert!(r.stop.is_none(), "member {k} stopped: {:?}", r.stop);
        check_genuine(&format!("member {k}"), r);
    }
    // Every view the late member installed has it, and the others installed the same one at
    // the same position (its first at or before the state it was sent: a joiner reports the
    // state's position there).
    let r = &reports[late];
    for (i, v) in r.views.iter().enumerate() {
        assert!(v.members.contains(&(late as u32)), "its view {v:?}");
        for &k in started {
            let o = reports[k].view(v.id).expect("the same view at the others");
            assert_eq!(o.members, v.members, "view {} at member {k}", v.id);
            if i == 0 {
                assert!(
                    o.before <= v.before,
                    "view {} at member {k}: {o:?}, {v:?}",
                    v.id
                );
            } else {
                assert_eq!(o.before, v.before, "view {} at member {k}", v.id);
            }
        }
    }
    // Its state is the others' chain at its position; from there on, the same deliveries.
    let (pos, chain, _, _) = r.transferred.expect("a transferred state");
    let at = |k: usize, p: u64| {
        let o = &reports[k];
        (o.delivered)
            .get(usize::try_from(p.checked_sub(o.first_position())?).ok()?)
            .copied()
    };
    assert_eq!(
        Some(chain),
        at(started[0], pos - 1).map(|d| d.chain),
        "transferred chain"
    );
    assert!(
        r.delivered.len() >= 50,
        "it delivered {}",
        r.delivered.len()
    );
    for &k in started {
        let to = r.next_position().min(reports[k].next_position());
        assert!(to > pos, "member {k} and the late member share no position");
        for p in pos..to {
            assert_eq!(at(late, p), at(k, p), "position {p}: late member vs {k}");
        }
    }
}

/// What one restart run measured, µs of `CLOCK_MONOTONIC`.
#[derive(Clone, Copy, Debug)]
pub struct RestartTiming {
    /// The fresh start, for comparison: processes spawned → every member delivered.
    pub fresh_us: u64,
    /// Messages replayed (every member delivered them before the restart, or some did).
    pub replayed: usize,
    /// Bytes of payload replayed.
    pub replayed_bytes: usize,
    /// Restarted processes spawned → every one linked (its group created, restarting).
    pub linked_us: u64,
    /// Restarted processes spawned → every one installed the restart view (its replay done).
    pub view_us: u64,
    /// Restarted processes spawned → every one delivered a new message (delivering again).
    pub delivering_us: u64,
    /// The last SIGKILL → restarted processes spawned (the harness's own time).
    pub gap_us: u64,
    /// The longest single `Group::poll` of a restarted member (0: none reached the 20 ms the
    /// member program reports, `SLOW poll`): the stall of its loop the replay causes.
    pub poll_us: u64,
    /// The longest gap between two rounds of a restarted member's loop (`SLOW loop`; 0: none
    /// reached 20 ms): a poll plus handling what it handed out.
    pub loop_us: u64,
}

/// The restart view's members, as the members `started` that installed it reported (the
/// earliest first view among them): the members of the newest logged view that restarted, unless the inspector
/// adopted a decision logged before the kill, which may remove members too.
pub fn restart_view(reports: &[Report], started: &[usize]) -> Vec<usize> {
    // The earliest first view: a started member that rejoined after the restart (removed by
    // the restart view, then readmitted) has a later view first.
    (started.iter())
        .filter_map(|&k| reports[k].views.first())
        .min_by_key(|v| v.id)
        .expect("a restart view")
        .members
        .iter()
        .map(|&m| m as usize)
        .collect()
}

impl Cluster {
    /// Waits until every member delivered `warmup` messages, from every member among them.
    pub fn warm_up(&mut self, warmup: u64) {
        let n = self.members.len();
        self.wait_for(
            "deliveries from every sender at every member",
            Duration::from_secs(60),
            |r| {
                r.iter().all(|r| {
                    let senders: BTreeSet<u32> = r.delivered.iter().map(|d| d.sender).collect();
                    r.delivered.len() as u64 >= warmup && senders.len() == n
                })
            },
        );
    }

    /// After [`restart`](Self::restart) of the members `started`: waits until each either
    /// installed the restart view, replayed, and delivered `after` new messages including
    /// some from every member of that view, or stopped (a view it is not in went on: it learns
    /// that from the others' logs).
    pub fn wait_restarted(&mut self, started: &[usize], after: u64) {
        self.wait_for(
            "every restarted member's replay, restart view and new deliveries",
            Duration::from_secs(20),
            |r| {
                let settled = |k: usize| {
                    r[k].stop.is_some()
                        || r[k].views.first().is_some_and(|v| {
                            r[k].delivered.len() as u64 >= v.before + after
                                && v.members.iter().all(|&s| {
                                    r[k].delivered[v.before as usize..]
                                        .iter()
                                        .any(|d| d.sender == s)
                                })
                        })
                };
                started.iter().all(|&k| settled(k))
                    && started.iter().any(|&k| !r[k].views.is_empty())
            },
        );
    }
}

/// How a restart run kills every member.
#[derive(Clone, Debug)]
pub enum KillAll {
    /// One SIGKILL after the other in this order, each waited for: the members still alive
    /// may change views in between (decisions logged at some members only).
    OneByOne(Vec<usize>),
    /// Every SIGKILL sent before waiting for any: no time for a view change.
    AtOnce,
}

/// Starts five members with durable epochs (`settings`), lets each deliver `warmup`
/// messages, SIGKILLs every member (`kill`, no QUIT), restarts the members `pick` chooses
/// from their directories (given each member's last logged view; the others never come back),
/// waits until each restarted member either installed the restart view, replayed and delivered
/// `after` new messages, or stopped (removed: not in that view), ends the run and checks it
/// with [`check_restart`]. Returns the reports of the earlier lives, the restarted lives', the
/// restart view's members, and the timing.
pub fn restart_run(
    entry: &str,
    settings: Settings,
    warmup: u64,
    kill: KillAll,
    pick: impl FnOnce(&[Option<(u64, Vec<u32>)>]) -> Vec<usize>,
    after: u64,
) -> (Vec<Report>, Vec<Report>, Vec<usize>, RestartTiming) {
    assert!(
        settings.durable.is_some(),
        "a restart run needs durable epochs"
    );
    let n = settings.universe;
    let places = vec![Place::loopback(); n];
    let t_spawn = now_us();
    let mut c = Cluster::start(entry, &places, settings);
    c.warm_up(warmup);
    let fresh = c.reports();
    let fresh_us = fresh
        .iter()
        .map(|r| r.first_new.expect("a first delivery"))
        .max()
        .unwrap()
        .saturating_sub(t_spawn);
    let t_kill = match &kill {
        KillAll::OneByOne(order) => {
            assert!((0..n).all(|k| order.contains(&k)), "every member is killed");
            order.iter().map(|&k| c.kill(k)).last().unwrap()
        }
        KillAll::AtOnce => c.kill_all(&(0..n).collect::<Vec<_>>()),
    };
    // Let the reader threads take the killed members' last lines.
    std::thread::sleep(Duration::from_millis(100));
    let before = c.reports();
    let logged: Vec<Option<(u64, Vec<u32>)>> = (0..n).map(|k| c.logged_view(k)).collect();
    let started = pick(&logged);
    let t_restart = now_us();
    c.restart(&started);
    let linked = c.reports();
    c.wait_restarted(&started, after);
    let reports = c.finish();
    // A member of the restart view that replayed nothing joined it again by state transfer: a
    // late root (its log ended at that view's number, which the others installed anew; s16).
    let restarted: Vec<usize> = (restart_view(&reports, &started).into_iter())
        .filter(|&k| reports[k].replayed > 0)
        .collect();
    let replay = check_restart(&before, &reports, &started, &restarted, after);
    let at = |f: &dyn Fn(&Report) -> Option<u64>, rs: &[Report]| {
        (restarted.iter())
            .map(|&k| f(&rs[k]).expect("a time"))
            .max()
            .unwrap()
            .saturating_sub(t_restart)
    };
    // The longest stall of this kind (`SLOW <what>`) a restarted member reported; 0: none.
    let longest = |what: &str| {
        (restarted.iter())
            .flat_map(|&k| reports[k].stalls.iter())
            .filter(|s| s.0 == what)
            .map(|s| s.1)
            .max()
            .unwrap_or(0)
    };
    let timing = RestartTiming {
        fresh_us,
        replayed: replay.len(),
        replayed_bytes: replay.iter().map(|d| d.len).sum(),
        linked_us: (started.iter())
            .map(|&k| linked[k].ready.expect("ready"))
            .max()
            .unwrap()
            .saturating_sub(t_restart),
        view_us: at(&|r| r.views.first().map(|v| v.at), &reports),
        delivering_us: at(&|r| r.first_new, &reports),
        gap_us: t_restart.saturating_sub(t_kill),
        poll_us: longest("poll"),
        loop_us: longest("loop"),
    };
    (before, reports, restarted, timing)
}

/// A port on `ip` that nothing listens on now and that no process of these tests will be
/// given: below the kernel's ephemeral range (`ip_local_port_range`), where a bind to port 0
/// (every member's, every test's) never lands. A port taken from the ephemeral range and
/// released could be handed to a member started later, which then dialled itself at the
/// address of the member that stays down (a CI run of `tcp_restart`: "this is n3, but n3
/// dialled it as n4").
fn port_nobody_binds(ip: IpAddr) -> u16 {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| {
            r.split_whitespace()
                .next()
                .and_then(|p| p.parse::<u16>().ok())
        })
        .unwrap_or(32768);
    let floor = 10_000u16.min(low.saturating_sub(1)).max(1024);
    let span = low.saturating_sub(floor).max(1);
    // Start at a place that differs between processes and calls, then walk the range.
    let start = (std::process::id() as u64 ^ now_us()) % u64::from(span);
    (0..u64::from(span))
        .map(|k| floor + ((start + k) % u64::from(span)) as u16)
        .find(|&port| TcpListener::bind((ip, port)).is_ok())
        .expect("a free port below the ephemeral range")
}
