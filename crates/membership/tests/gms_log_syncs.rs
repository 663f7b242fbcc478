//! How often a view change writes and syncs the GMS log (s22, `docs/MEMBERSHIP.md`,
//! thirty-ninth part): members with real [`FileLog`]s on the simulator, each log wrapped to
//! record every call that reaches the file. [`FileLog`] turns each such call into one `write`
//! and one `fdatasync` (no `fdatasync` for `append_installed` with `set_sync_installed(false)`),
//! so the calls are the writes and syncs. The records a view change logs at the same moment go
//! in one call: a view's `Shards`, `Verdict` and `Installed`; a decision is its own call,
//! synced before the member echoes it.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use common::config;
use squall_membership::log::{Durable, FileLog, LogError, Record};
use squall_membership::view::{EvenShards, View};
use squall_membership::{Epoch, Gms};
use squall_transport::NodeId;
use squall_transport_mem::sim::{Sim, SimConfig, SimNode};

/// A [`FileLog`] that records the records of every call reaching the file, in order.
struct Counting {
    inner: FileLog,
    calls: Vec<Vec<Record>>,
}

impl Durable for Counting {
    fn append(&mut self, record: &Record) -> Result<(), LogError> {
        self.calls.push(vec![record.clone()]);
        self.inner.append(record)
    }

    fn append_all(&mut self, records: &[Record]) -> Result<(), LogError> {
        self.calls.push(records.to_vec());
        self.inner.append_all(records)
    }

    fn append_installed(&mut self, records: &[Record]) -> Result<(), LogError> {
        self.calls.push(records.to_vec());
        self.inner.append_installed(records)
    }
}

/// An epoch that received nothing.
struct Idle;

impl Epoch for Idle {
    fn wedge(&mut self, view: &View) -> Vec<u64> {
        vec![0; view.members.len()]
    }
}

/// A record's kind and view, for the assertions' messages.
fn kind(r: &Record) -> String {
    match r {
        Record::Installed { view, .. } => format!("Installed {view}"),
        Record::Decided { decision, .. } => format!("Decided {}", decision.trim.view),
        Record::Shards { view, .. } => format!("Shards {view}"),
        Record::Verdict { view, .. } => format!("Verdict {view}"),
        Record::Settings { .. } => "Settings".to_string(),
        other => format!("{other:?}"),
    }
}

/// Four members in two shards of `min..=2`: node 3 crashes once view 0 runs, and the three
/// survivors install view 1. Returns, per survivor, the calls that reached its log (each the
/// kinds of its records) and view 1 as it installed it; checks that each log reads back.
fn view_change(name: &str, min: usize) -> Vec<(Vec<Vec<String>>, View)> {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("gms-log-syncs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cfg = config(4, 4);
    cfg.shards = EvenShards {
        shards: 2,
        min,
        max: 2,
    };
    let spec = Gms::<SimNode, Counting>::layout(&cfg).unwrap();
    let (sim, nodes) = Sim::cluster(SimConfig::seeded(5), 4, &[spec]).unwrap();
    let mut gs: Vec<Gms<SimNode, Counting>> = nodes
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let (inner, rec) = FileLog::open(&dir.join(format!("n{i}.log"))).unwrap();
            let log = Counting {
                inner,
                calls: Vec::new(),
            };
            Gms::new(t, cfg.clone(), log, Some(&rec)).unwrap()
        })
        .collect();
    let mut out = Vec::new();
    for _ in 0..200 {
        for g in &mut gs {
            g.poll(&mut Idle, &mut out).unwrap();
        }
        sim.advance(std::time::Duration::from_micros(50));
    }
    assert!(gs.iter().all(|g| g.view().is_some_and(|v| v.id == 0)));
    sim.crash(NodeId(3));
    gs.truncate(3);
    for _ in 0..5000 {
        if gs.iter().all(|g| g.view().is_some_and(|v| v.id == 1)) {
            break;
        }
        for g in &mut gs {
            g.poll(&mut Idle, &mut out).unwrap();
        }
        sim.advance(std::time::Duration::from_micros(50));
    }
    let got = gs
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let v1 = g.view().filter(|v| v.id == 1).cloned();
            let v1 = v1.unwrap_or_else(|| panic!("n{i} did not install view 1"));
            let (_, rec) = FileLog::open(&dir.join(format!("n{i}.log"))).unwrap();
            assert_eq!(rec.truncated, None, "n{i}");
            assert_eq!(rec.members_of(1), Some(&v1.members[..]), "n{i}");
            let shards: Vec<Vec<NodeId>> = v1.shards.iter().map(|s| s.members.clone()).collect();
            assert_eq!(rec.shards_for(1), Some(&shards[..]), "n{i}");
            assert_eq!(rec.verdict_for(1), v1.inadequate.as_ref(), "n{i}");
            let calls = (g.log().calls.iter())
                .map(|c| c.iter().map(kind).collect())
                .collect();
            (calls, v1)
        })
        .collect();
    std::fs::remove_dir_all(&dir).ok();
    got
}

/// An adequate view change in two shards: each survivor writes and syncs its log twice, the
/// decision (before echoing it) and view 1's `Shards` with its `Installed`; view 0 was one
/// write and sync too (with the settings digest logged before it since s24). Until s22 each record was its own write and sync: view 0 took two
/// and the view change three (`Decided`, `Shards`, `Installed`).
#[test]
fn a_view_change_in_two_shards_writes_and_syncs_the_gms_log_twice() {
    for (i, (calls, v1)) in view_change("adequate", 1).into_iter().enumerate() {
        assert!(v1.inadequate.is_none(), "{v1:?}");
        assert_eq!(
            calls,
            vec![
                vec!["Settings", "Shards 0", "Installed 0"],
                vec!["Decided 0"],
                vec!["Shards 1", "Installed 1"],
            ],
            "n{i}: the calls that reached the GMS log (one write and fdatasync each)"
        );
    }
}

/// An inadequate view change (shard 1 left with one member of at least two): its verdict
/// joins the batch, still two writes and syncs per survivor (four until s22).
#[test]
fn an_inadequate_view_change_writes_and_syncs_the_gms_log_twice() {
    for (i, (calls, v1)) in view_change("inadequate", 2).into_iter().enumerate() {
        assert!(v1.inadequate.is_some(), "{v1:?}");
        assert_eq!(
            calls,
            vec![
                vec!["Settings", "Shards 0", "Installed 0"],
                vec!["Decided 0"],
                vec!["Shards 1", "Verdict 1", "Installed 1"],
            ],
            "n{i}: the calls that reached the GMS log (one write and fdatasync each)"
        );
    }
}
