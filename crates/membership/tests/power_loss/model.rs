//! A model of what a file system keeps after a power loss, fed the traced system calls of one
//! directory tree (ALICE / CrashMonkey style).
//!
//! Per file (inode): the bytes made durable by its last `fsync`/`fdatasync`, and the writes and
//! truncations since (pending). After a crash each pending write is independently dropped,
//! kept, or torn (a prefix kept and garbage after it, to the write's length); kept writes past
//! a dropped one leave zeros between (a hole); pending truncations are kept or dropped.
//!
//! Directory operations (a file created, renamed or removed) are durable per [`Model`]:
//! - [`Model::Posix`]: only once `fsync` of the parent directory completed after them (POSIX
//!   and fsync(2): "an explicit fsync() on a file descriptor for the directory is also
//!   needed"); each non-durable one is independently kept or undone.
//! - [`Model::Ext4`]: ext4 with its journal (`data=ordered`, no `fast_commit`): metadata
//!   changes enter one running transaction at a time, transactions commit in order, and an
//!   `fsync`/`fdatasync` of a file waits for the transaction of that file's last metadata
//!   change (its creation, a size change, a truncation) to commit, which commits every
//!   metadata change before it, directory entries of other files included. So a directory
//!   operation is durable once some file changed after it was synced; the non-durable ones
//!   that survive are a prefix (in order).
//!
//! Everything is applied in completion order of the traced calls, but an `fsync`/`fdatasync`
//! makes durable only what completed before it *started* (s26: with several threads doing
//! file work, the log's syncer and a compaction's thread, another thread's write may
//! complete while a sync runs, and the sync need not cover it; [`Call::start`]).

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::trace::{Call, fd, ret_num, string};

/// Which directory-durability rule to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// A directory entry is durable only after an `fsync` of its directory.
    Posix,
    /// ext4's journal: any sync of a file commits every metadata change up to the file's last.
    Ext4,
    /// [`Model::Ext4`]'s directory rule, and file data as ext4 `data=ordered` keeps it (s20):
    /// a file's data is flushed before the journal commits the size change that exposes it,
    /// so a crash keeps an in-order prefix of the file's unsynced writes and truncations, and
    /// never garbage or a hole (the write at the prefix's end may be kept in part, as a
    /// transaction boundary between its pages can leave it).
    Ext4Ordered,
}

#[derive(Clone, Debug)]
enum Pend {
    Write(u64, Vec<u8>),
    Trunc(u64),
}

#[derive(Clone, Debug, Default)]
struct Inode {
    durable: Vec<u8>,
    cur: Vec<u8>,
    pending: Vec<Pend>,
    /// The op index of each of `pending`.
    pending_at: Vec<usize>,
    /// The op index of its last metadata change (creation, size change, truncation).
    meta_at: usize,
    /// The op indexes of every metadata change, in order.
    meta_hist: Vec<usize>,
}

impl Inode {
    fn pend(&mut self, n: usize, p: Pend) {
        self.pending.push(p);
        self.pending_at.push(n);
    }

    fn meta(&mut self, n: usize) {
        self.meta_at = n;
        self.meta_hist.push(n);
    }

    /// An `fsync` that started at op `start`: the pending operations applied before it are
    /// durable (a prefix: they are in op order); returns the op index of the last metadata
    /// change before it (what ext4's sync commits up to).
    fn sync_from(&mut self, start: usize) -> usize {
        let k = self.pending_at.iter().take_while(|&&at| at < start).count();
        for p in self.pending.drain(..k) {
            match p {
                Pend::Trunc(len) => self.durable.resize(len as usize, 0),
                Pend::Write(off, data) => {
                    let (off, end) = (off as usize, off as usize + data.len());
                    if self.durable.len() < end {
                        self.durable.resize(end, 0);
                    }
                    self.durable[off..end].copy_from_slice(&data);
                }
            }
        }
        self.pending_at.drain(..k);
        self.meta_hist
            .iter()
            .rev()
            .find(|&&at| at < start)
            .copied()
            .unwrap_or(0)
    }
}

#[derive(Clone, Debug)]
enum DirKind {
    Link { path: String, ino: usize },
    Rename { from: String, to: String },
    Unlink { path: String },
}

#[derive(Clone, Debug)]
struct DirOp {
    at: usize,
    kind: DirKind,
    durable: bool,
    /// Under [`Model::Posix`] with an exemption: the new file whose own sync makes this entry
    /// durable.
    with_file: Option<usize>,
}

#[derive(Clone, Debug)]
enum Target {
    File(usize),
    Dir(String),
}

#[derive(Clone, Debug)]
struct Fd {
    target: Target,
    off: u64,
    append: bool,
}

/// Small deterministic generator (xorshift64*): the crash states are a function of the seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The modelled tree under `root` after some prefix of the trace.
#[derive(Clone, Debug)]
pub struct Fs {
    root: String,
    model: Model,
    inodes: Vec<Inode>,
    names: BTreeMap<String, usize>,
    dir_ops: Vec<DirOp>,
    fds: HashMap<i64, Fd>,
    dirs: BTreeSet<String>,
    /// Files (by name) whose creation, under [`Model::Posix`], becomes durable with the file's
    /// own sync, as on ext4, XFS and btrfs (a known gap excluded from the strict check).
    exempt: Option<fn(&str) -> bool>,
    /// Op index: how many calls were applied.
    pub n: usize,
}

fn parent(p: &str) -> String {
    p.rsplit_once('/')
        .map_or(String::new(), |(d, _)| d.to_string())
}

/// What a crash keeps of the pending (unsynced) state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Nothing unsynced survives.
    Nothing,
    /// Everything written survives (what a process crash leaves).
    Everything,
    /// Each pending write dropped, kept or torn, each undurable directory op undone or kept
    /// (per the model), chosen by the generator.
    Random,
}

impl Fs {
    /// An empty tree at `root` (its directories `dirs` exist and are durable: the harness made
    /// them before the workload's first marker).
    pub fn new(root: &str, dirs: &[String], model: Model) -> Fs {
        Fs {
            root: root.to_string(),
            model,
            inodes: Vec::new(),
            names: BTreeMap::new(),
            dir_ops: Vec::new(),
            fds: HashMap::new(),
            dirs: dirs.iter().cloned().chain([root.to_string()]).collect(),
            exempt: None,
            n: 0,
        }
    }

    /// `self` with new files named as `exempt` accepts durable once synced themselves.
    pub fn exempt(mut self, exempt: fn(&str) -> bool) -> Fs {
        self.exempt = Some(exempt);
        self
    }

    fn under(&self, p: &str) -> bool {
        p.starts_with(&self.root)
            && (p.len() == self.root.len() || p[self.root.len()..].starts_with('/'))
    }

    fn dir_op(&mut self, kind: DirKind) {
        let with_file = match (&kind, self.exempt) {
            (DirKind::Link { path, ino }, Some(f)) if f(path) => Some(*ino),
            _ => None,
        };
        self.dir_ops.push(DirOp {
            at: self.n,
            kind,
            durable: false,
            with_file,
        });
    }

    /// Whether `c` is an `fsync`/`fdatasync` of a file or directory of the tree.
    pub fn is_sync(&self, c: &Call) -> bool {
        matches!(c.name.as_str(), "fsync" | "fdatasync")
            && c.args
                .first()
                .and_then(|a| fd(a).ok())
                .is_some_and(|(_, p)| self.under(&p))
    }

    /// Applies one traced call; returns a marker line if it wrote one to stdout.
    pub fn apply(&mut self, c: &Call) -> Result<Option<String>, String> {
        let n = self.n;
        self.n += 1;
        let ret = ret_num(&c.ret).unwrap_or(-1);
        if ret < 0 {
            return Ok(None);
        }
        let arg_fd = |i: usize| c.args.get(i).map(|a| fd(a)).transpose();
        match c.name.as_str() {
            "openat" | "open" | "creat" => {
                let (num, path) = fd(&c.ret)?;
                if !self.under(&path) {
                    return Ok(None);
                }
                let flags = c
                    .args
                    .get(if c.name == "openat" { 2 } else { 1 })
                    .cloned()
                    .unwrap_or_default();
                let target = if self.dirs.contains(&path) {
                    Target::Dir(path)
                } else if let Some(&ino) = self.names.get(&path) {
                    if flags.contains("O_TRUNC") {
                        let i = &mut self.inodes[ino];
                        i.cur.clear();
                        i.pend(n, Pend::Trunc(0));
                        i.meta(n);
                    }
                    Target::File(ino)
                } else {
                    if !flags.contains("O_CREAT") {
                        return Err(format!("open of an unknown file {path} without O_CREAT"));
                    }
                    let ino = self.inodes.len();
                    self.inodes.push(Inode {
                        meta_at: n,
                        meta_hist: vec![n],
                        ..Inode::default()
                    });
                    self.names.insert(path.clone(), ino);
                    self.dir_op(DirKind::Link {
                        path: path.clone(),
                        ino,
                    });
                    Target::File(ino)
                };
                self.fds.insert(
                    num,
                    Fd {
                        target,
                        off: 0,
                        append: flags.contains("O_APPEND"),
                    },
                );
            }
            "write" | "pwrite64" => {
                let Some((num, path)) = arg_fd(0)? else {
                    return Ok(None);
                };
                if num == 1 && c.name == "write" {
                    let data = string(&c.args[1])?;
                    let s = String::from_utf8_lossy(&data[..(ret as usize).min(data.len())])
                        .into_owned();
                    return Ok(s.starts_with("PL-").then(|| s.trim_end().to_string()));
                }
                if !self.under(&path) {
                    return Ok(None);
                }
                let Some(f) = self.fds.get_mut(&num) else {
                    return Err(format!("write to an fd opened before the trace: {path}"));
                };
                let Target::File(ino) = f.target else {
                    return Err(format!("write to a directory {path}"));
                };
                let mut data = string(&c.args[1])?;
                data.truncate(ret as usize);
                let i = &mut self.inodes[ino];
                let off = if c.name == "pwrite64" {
                    c.args
                        .get(3)
                        .and_then(|a| a.parse().ok())
                        .ok_or("pwrite64 offset")?
                } else if f.append {
                    i.cur.len() as u64
                } else {
                    f.off
                };
                let end = off as usize + data.len();
                if end > i.cur.len() {
                    i.cur.resize(end, 0);
                    i.meta(n);
                }
                i.cur[off as usize..end].copy_from_slice(&data);
                i.pend(n, Pend::Write(off, data));
                if c.name == "write" {
                    f.off = end as u64;
                }
            }
            // `std::io::copy` between files (the epoch log's compaction): the bytes come from
            // the source's modelled contents at its offset (both offsets NULL: the files'
            // positions, advanced by the copy).
            "copy_file_range" => {
                let (Some((src, spath)), Some((dst, path))) = (arg_fd(0)?, arg_fd(2)?) else {
                    return Ok(None);
                };
                if !self.under(&path) {
                    return Ok(None);
                }
                if c.args.get(1).map(String::as_str) != Some("NULL")
                    || c.args.get(3).map(String::as_str) != Some("NULL")
                {
                    return Err(format!(
                        "copy_file_range to {path} with explicit offsets: not modelled"
                    ));
                }
                let (Some(sf), Some(df)) = (self.fds.get(&src), self.fds.get(&dst)) else {
                    return Err(format!(
                        "copy_file_range from {spath} to {path}: an fd opened before the trace"
                    ));
                };
                let (&Target::File(si), &Target::File(di)) = (&sf.target, &df.target) else {
                    return Err(format!(
                        "copy_file_range from {spath} to {path}: a directory"
                    ));
                };
                let from = sf.off as usize;
                let data = (self.inodes[si].cur)
                    .get(from..from + ret as usize)
                    .ok_or_else(|| format!("copy_file_range past the end of {spath}"))?
                    .to_vec();
                let off = if df.append {
                    self.inodes[di].cur.len() as u64
                } else {
                    df.off
                };
                let end = off as usize + data.len();
                let i = &mut self.inodes[di];
                if end > i.cur.len() {
                    i.cur.resize(end, 0);
                    i.meta(n);
                }
                i.cur[off as usize..end].copy_from_slice(&data);
                i.pend(n, Pend::Write(off, data));
                if let Some(f) = self.fds.get_mut(&src) {
                    f.off += ret as u64;
                }
                if let Some(f) = self.fds.get_mut(&dst) {
                    f.off = end as u64;
                }
            }
            "writev" | "pwritev" | "pwritev2" | "sendfile" | "fallocate" => {
                if let Some((_, path)) = arg_fd(0)?
                    && self.under(&path)
                {
                    return Err(format!("{} on {path}: not modelled", c.name));
                }
            }
            "read" => {
                if let Some((num, _)) = arg_fd(0)?
                    && let Some(f) = self.fds.get_mut(&num)
                {
                    f.off += ret as u64;
                }
            }
            "lseek" => {
                if let Some((num, _)) = arg_fd(0)?
                    && let Some(f) = self.fds.get_mut(&num)
                {
                    f.off = ret as u64;
                }
            }
            "ftruncate" => {
                if let Some((num, path)) = arg_fd(0)?
                    && let Some(f) = self.fds.get(&num)
                {
                    let Target::File(ino) = f.target else {
                        return Err(format!("ftruncate of a directory {path}"));
                    };
                    let len: u64 = c
                        .args
                        .get(1)
                        .and_then(|a| a.parse().ok())
                        .ok_or("ftruncate length")?;
                    let i = &mut self.inodes[ino];
                    i.cur.resize(len as usize, 0);
                    i.pend(n, Pend::Trunc(len));
                    i.meta(n);
                }
            }
            "fsync" | "fdatasync" => {
                if let Some((num, path)) = arg_fd(0)?
                    && self.under(&path)
                    && !self.fds.contains_key(&num)
                {
                    // A sync the model would drop silently hides what it makes durable.
                    return Err(format!(
                        "{} of {path} on an fd the model lost track of",
                        c.name
                    ));
                }
                if let Some((num, path)) = arg_fd(0)?
                    && let Some(f) = self.fds.get(&num)
                {
                    // What completed before the sync started (s26: another thread's write
                    // completing meanwhile need not be covered).
                    let start = c.start.min(n);
                    let upto = match &f.target {
                        Target::File(ino) => self.inodes[*ino].sync_from(start),
                        Target::Dir(d) => (self.dir_ops.iter())
                            .filter(|op| op.at < start && op_dirs(&op.kind).contains(d))
                            .map(|op| op.at)
                            .max()
                            .unwrap_or(0),
                    };
                    for op in &mut self.dir_ops {
                        let durable = match (self.model, &f.target) {
                            (Model::Ext4 | Model::Ext4Ordered, _) => op.at <= upto,
                            (Model::Posix, Target::Dir(d)) => {
                                op.at < start && op_dirs(&op.kind).contains(d)
                            }
                            (Model::Posix, Target::File(ino)) => op.with_file == Some(*ino),
                        };
                        op.durable |= durable;
                    }
                    let _ = path;
                }
            }
            "rename" | "renameat" | "renameat2" => {
                let (a, b) = if c.name == "rename" { (0, 1) } else { (1, 3) };
                let from = String::from_utf8_lossy(&string(&c.args[a])?).into_owned();
                let to = String::from_utf8_lossy(&string(&c.args[b])?).into_owned();
                if !self.under(&from) && !self.under(&to) {
                    return Ok(None);
                }
                if !from.starts_with('/') || !to.starts_with('/') {
                    return Err(format!("relative rename {from} -> {to}"));
                }
                let ino = self
                    .names
                    .remove(&from)
                    .ok_or_else(|| format!("rename of unknown {from}"))?;
                self.names.insert(to.clone(), ino);
                self.dir_op(DirKind::Rename {
                    from: from.clone(),
                    to: to.clone(),
                });
            }
            "unlink" | "unlinkat" => {
                let a = usize::from(c.name == "unlinkat");
                let path = String::from_utf8_lossy(&string(&c.args[a])?).into_owned();
                if !self.under(&path) {
                    return Ok(None);
                }
                if !path.starts_with('/') {
                    return Err(format!("relative unlink {path}"));
                }
                self.names
                    .remove(&path)
                    .ok_or_else(|| format!("unlink of unknown {path}"))?;
                self.dir_op(DirKind::Unlink { path: path.clone() });
            }
            "truncate" | "rmdir" => {
                let path = String::from_utf8_lossy(&string(&c.args[0])?).into_owned();
                if self.under(&path) {
                    return Err(format!(
                        "{} {path} during the workload: not modelled",
                        c.name
                    ));
                }
            }
            "mkdir" | "mkdirat" => {
                let a = usize::from(c.name == "mkdirat");
                let path = String::from_utf8_lossy(&string(&c.args[a])?).into_owned();
                if self.under(&path) {
                    return Err(format!("mkdir {path} during the workload: not modelled"));
                }
            }
            "close" => {
                if let Some((num, _)) = arg_fd(0)? {
                    // A close printed with `(deleted)` closes a file a rename replaced (the
                    // compacted epoch log's old file, closed on another thread). The kernel
                    // freed its number inside the call, so an `openat` printed before the
                    // close's completion may already hold the number again, for a directory
                    // (`sync_dir`) or a file that still has a name: that newer open stays.
                    let replaced = c.args.first().is_some_and(|a| a.ends_with("(deleted)"));
                    let newer = self.fds.get(&num).is_some_and(|f| match f.target {
                        Target::Dir(_) => true,
                        Target::File(i) => self.names.values().any(|&x| x == i),
                    });
                    if !(replaced && newer) {
                        self.fds.remove(&num);
                    }
                }
            }
            _ => {}
        }
        Ok(None)
    }

    /// The tree as the running program saw it (no crash): path (relative to the root) →
    /// contents.
    pub fn current(&self) -> BTreeMap<String, Vec<u8>> {
        self.names
            .iter()
            .map(|(p, &ino)| (self.rel(p), self.inodes[ino].cur.clone()))
            .collect()
    }

    /// Per file of the running program's tree: how many bytes its last sync made durable.
    pub fn synced_lens(&self) -> BTreeMap<String, usize> {
        self.names
            .iter()
            .map(|(p, &ino)| (self.rel(p), self.inodes[ino].durable.len()))
            .collect()
    }

    fn rel(&self, p: &str) -> String {
        p[self.root.len()..].trim_start_matches('/').to_string()
    }

    /// A state a power loss at this point may leave: path (relative to the root) → contents.
    pub fn crash(&self, keep: Keep, rng: &mut Rng) -> BTreeMap<String, Vec<u8>> {
        let pending: Vec<usize> = (0..self.dir_ops.len())
            .filter(|&k| !self.dir_ops[k].durable)
            .collect();
        let kept_ops: BTreeSet<usize> = match (keep, self.model) {
            (Keep::Nothing, _) => BTreeSet::new(),
            (Keep::Everything, _) => pending.iter().copied().collect(),
            (Keep::Random, Model::Ext4 | Model::Ext4Ordered) => {
                let k = rng.below(pending.len() as u64 + 1) as usize;
                pending[..k].iter().copied().collect()
            }
            (Keep::Random, Model::Posix) => pending
                .iter()
                .copied()
                .filter(|_| rng.below(2) == 0)
                .collect(),
        };
        let mut names: BTreeMap<String, usize> = BTreeMap::new();
        for (k, op) in self.dir_ops.iter().enumerate() {
            if !(op.durable || kept_ops.contains(&k)) {
                continue;
            }
            match &op.kind {
                DirKind::Link { path, ino } => {
                    names.insert(path.clone(), *ino);
                }
                DirKind::Rename { from, to } => {
                    if let Some(ino) = names.remove(from) {
                        names.insert(to.clone(), ino);
                    }
                }
                DirKind::Unlink { path } => {
                    names.remove(path);
                }
            }
        }
        let mut out = BTreeMap::new();
        for (p, ino) in names {
            let i = &self.inodes[ino];
            let mut b = i.durable.clone();
            // Ext4Ordered: the first `prefix` pending operations kept, the next one in part.
            let prefix = match (keep, self.model) {
                (Keep::Random, Model::Ext4Ordered) => {
                    Some(rng.below(i.pending.len() as u64 + 1) as usize)
                }
                _ => None,
            };
            for (k, pend) in i.pending.iter().enumerate() {
                let choice = match (keep, prefix) {
                    (Keep::Nothing, _) => 0,
                    (Keep::Everything, _) => 1,
                    (Keep::Random, Some(n)) if k < n => 1,
                    (Keep::Random, Some(n)) if k == n => 3,
                    (Keep::Random, Some(_)) => 0,
                    (Keep::Random, None) => rng.below(3),
                };
                match (pend, choice) {
                    (_, 0) => {}
                    // Kept in part, no garbage: a prefix of the write (none of a truncation).
                    (Pend::Trunc(_), 3) => {}
                    (Pend::Write(off, data), 3) => {
                        let cut = rng.below(data.len() as u64 + 1) as usize;
                        let (off, end) = (*off as usize, *off as usize + cut);
                        if b.len() < end {
                            b.resize(end, 0);
                        }
                        b[off..end].copy_from_slice(&data[..cut]);
                    }
                    (Pend::Trunc(len), _) => b.resize(*len as usize, 0),
                    (Pend::Write(off, data), c) => {
                        let mut data = data.clone();
                        if c == 2 && !data.is_empty() {
                            let cut = rng.below(data.len() as u64) as usize;
                            for x in &mut data[cut..] {
                                *x = rng.next() as u8;
                            }
                        }
                        let (off, end) = (*off as usize, *off as usize + data.len());
                        if b.len() < end {
                            b.resize(end, 0);
                        }
                        b[off..end].copy_from_slice(&data);
                    }
                }
            }
            out.insert(self.rel(&p), b);
        }
        out
    }
}

fn op_dirs(k: &DirKind) -> Vec<String> {
    match k {
        DirKind::Link { path, .. } | DirKind::Unlink { path } => vec![parent(path)],
        DirKind::Rename { from, to } => vec![parent(from), parent(to)],
    }
}

#[cfg(test)]
mod tests {
    use super::super::trace::calls;
    use super::*;

    fn fs_after(model: Model, text: &str) -> Fs {
        let mut fs = Fs::new("/r", &["/r/d".to_string()], model);
        for c in calls(text).unwrap() {
            fs.apply(&c).unwrap();
        }
        fs
    }

    // "/r/d/a" = \x2f\x72\x2f\x64\x2f\x61, "/r/d" = \x2f\x72\x2f\x64
    const CREATE_WRITE: &str = "1 openat(AT_FDCWD, \"\\x2f\\x72\\x2f\\x64\\x2f\\x61\", O_RDWR|O_CREAT, 0666) = 3<\\x2f\\x72\\x2f\\x64\\x2f\\x61>\n\
        1 write(3<\\x2f\\x72\\x2f\\x64\\x2f\\x61>, \"\\x61\\x62\", 2) = 2\n\
        1 fdatasync(3<\\x2f\\x72\\x2f\\x64\\x2f\\x61>) = 0\n\
        1 write(3<\\x2f\\x72\\x2f\\x64\\x2f\\x61>, \"\\x63\", 1) = 1\n";

    /// s26: with two threads, an `fsync` covers what completed before it started, not a
    /// write or rename another thread completed while it ran. Fails with the s19 rule (all
    /// that completed before the sync's completion durable) at its first check ("abc").
    #[test]
    fn an_fsync_covers_only_what_completed_before_it_started() {
        const A: &str = "3<\\x2f\\x72\\x2f\\x64\\x2f\\x61>";
        let text = format!(
            "1 openat(AT_FDCWD, \"\\x2f\\x72\\x2f\\x64\\x2f\\x61\", O_RDWR|O_CREAT, 0666) = {A}\n\
             1 write({A}, \"\\x61\\x62\", 2) = 2\n\
             2 fdatasync({A} <unfinished ...>\n\
             1 write({A}, \"\\x63\", 1) = 1\n\
             2 <... fdatasync resumed>) = 0\n"
        );
        let mut rng = Rng::new(1);
        let ext4 = fs_after(Model::Ext4, &text);
        assert_eq!(
            ext4.crash(Keep::Nothing, &mut rng)
                .get("d/a")
                .map(Vec::as_slice),
            Some(&b"ab"[..])
        );
        // A rename completed during a sync of its directory (strict POSIX).
        let dir = format!(
            "{text}1 openat(AT_FDCWD, \"\\x2f\\x72\\x2f\\x64\", O_RDONLY) = 4<\\x2f\\x72\\x2f\\x64>\n\
             2 fsync(4<\\x2f\\x72\\x2f\\x64> <unfinished ...>\n\
             1 rename(\"\\x2f\\x72\\x2f\\x64\\x2f\\x61\", \"\\x2f\\x72\\x2f\\x64\\x2f\\x62\") = 0\n\
             1 write({A}, \"\\x64\", 1) = 1\n\
             2 <... fsync resumed>) = 0\n"
        );
        let posix = fs_after(Model::Posix, &dir);
        let state = posix.crash(Keep::Nothing, &mut rng);
        assert_eq!(state.get("d/a").map(Vec::as_slice), Some(&b"ab"[..]));
        assert!(!state.contains_key("d/b"), "{state:?}");
    }

    #[test]
    fn ext4_ordered_data_keeps_a_prefix_of_the_unsynced_writes_and_no_garbage() {
        // After CREATE_WRITE ("ab" synced, "c" not) one more unsynced write, "d".
        let text =
            format!("{CREATE_WRITE}1 write(3<\\x2f\\x72\\x2f\\x64\\x2f\\x61>, \"\\x64\", 1) = 1\n");
        let (ordered, any) = (
            fs_after(Model::Ext4Ordered, &text),
            fs_after(Model::Ext4, &text),
        );
        let (mut seen, mut seen_any) = (BTreeSet::new(), BTreeSet::new());
        let mut rng = Rng::new(3);
        for _ in 0..200 {
            seen.insert(ordered.crash(Keep::Random, &mut rng)["d/a"].clone());
            seen_any.insert(any.crash(Keep::Random, &mut rng)["d/a"].clone());
        }
        let prefixes: BTreeSet<Vec<u8>> = [&b"ab"[..], b"abc", b"abcd"]
            .iter()
            .map(|p| p.to_vec())
            .collect();
        assert_eq!(seen, prefixes);
        // The any-order model also keeps "d" without "c" (a hole) and garbage.
        assert!(seen_any.iter().any(|f| !prefixes.contains(f)));
    }

    #[test]
    fn a_synced_new_file_survives_on_ext4_but_needs_its_directory_synced_under_posix() {
        let mut rng = Rng::new(1);
        let ext4 = fs_after(Model::Ext4, CREATE_WRITE);
        assert_eq!(
            ext4.crash(Keep::Nothing, &mut rng)
                .get("d/a")
                .map(Vec::as_slice),
            Some(&b"ab"[..])
        );
        assert_eq!(
            ext4.crash(Keep::Everything, &mut rng)
                .get("d/a")
                .map(Vec::as_slice),
            Some(&b"abc"[..])
        );
        let posix = fs_after(Model::Posix, CREATE_WRITE);
        assert!(posix.crash(Keep::Nothing, &mut rng).is_empty());
        let synced = format!(
            "{CREATE_WRITE}1 openat(AT_FDCWD, \"\\x2f\\x72\\x2f\\x64\", O_RDONLY) = 4<\\x2f\\x72\\x2f\\x64>\n1 fsync(4<\\x2f\\x72\\x2f\\x64>) = 0\n"
        );
        let posix = fs_after(Model::Posix, &synced);
        assert_eq!(
            posix
                .crash(Keep::Nothing, &mut rng)
                .get("d/a")
                .map(Vec::as_slice),
            Some(&b"ab"[..])
        );
        assert_eq!(
            posix.current().get("d/a").map(Vec::as_slice),
            Some(&b"abc"[..])
        );
    }
}
