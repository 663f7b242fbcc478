//! `Group` with real concurrency: four members on their own threads over the threaded mem
//! fabric, all submitting; one crashes. The survivors install view 1 after the same number of
//! deliveries, their delivery sequences (positions included) are prefixes of one another, they
//! keep delivering in view 1, and no message reported as discarded is delivered anywhere.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use squall_membership::GmsConfig;
use squall_membership::group::{Group, GroupConfig};
use squall_membership::log::MemLog;
use squall_ordering::{SubmitError, TotalOrder, Upcall};
use squall_round_robin::Config;
use squall_transport::{NodeId, RegionId};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric, ThreadedNode};

#[derive(Default)]
struct Record {
    delivered: Vec<(u64, Vec<u8>)>,
    discarded: Vec<Vec<u8>>,
    /// (view id, deliveries before it).
    views: Vec<(u64, u64)>,
}

#[test]
fn threaded_group_survives_a_crash_with_agreement() {
    let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
    let mut gms = GmsConfig::new(RegionId(0), ids.clone(), ids.clone());
    gms.heartbeat_interval = Duration::from_millis(5);
    gms.suspicion_timeout = Duration::from_secs(5);
    let epoch = Config {
        window: 4,
        slot_size: 32,
        max_payload: 200,
        chunk_size: 64,
        ..Config::new(ids)
    };
    let cfg = GroupConfig::new(gms, epoch);
    let layout = Group::<ThreadedNode, MemLog>::layout(&cfg).unwrap();
    let nodes = ThreadedFabric::new(ThreadedConfig::default())
        .and_then(|f| f.cluster(4, &layout))
        .unwrap();
    let faults = nodes[0].faults();
    let crashed = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = nodes
        .into_iter()
        .enumerate()
        .map(|(i, node)| {
            let cfg = cfg.clone();
            let crashed = crashed.clone();
            std::thread::spawn(move || {
                let mut g = Group::new(node, cfg, MemLog::default(), None).unwrap();
                let mut rec = Record::default();
                let mut ups = Vec::new();
                let mut k = 0u32;
                let deadline = Instant::now() + Duration::from_secs(60);
                let mut linger: Option<Instant> = None;
                while Instant::now() < deadline {
                    if i == 3 && crashed.load(Ordering::Acquire) {
                        return rec;
                    }
                    let mut p = vec![i as u8];
                    p.extend_from_slice(&k.to_le_bytes());
                    if k % 5 == 0 {
                        p.resize(100, 7); // a large message
                    }
                    match g.submit(&p) {
                        Ok(()) => k += 1,
                        Err(SubmitError::WindowFull | SubmitError::Wedged) => {}
                        Err(e) => panic!("n{i}: submit: {e}"),
                    }
                    let busy = g.poll(&mut ups);
                    for u in ups.drain(..) {
                        match u {
                            Upcall::Deliver(d) => rec.delivered.push((d.position, d.payload)),
                            Upcall::Discarded(p) => rec.discarded.push(p),
                            Upcall::View(v) => rec.views.push((v.id, rec.delivered.len() as u64)),
                            _ => {}
                        }
                    }
                    if let Some(why) = g.stopped() {
                        // The crash can land while the victim is inside `poll`: it then sees
                        // every link fail and stops as a minority, which is right for it.
                        if i == 3 && crashed.load(Ordering::Acquire) {
                            return rec;
                        }
                        panic!("n{i} stopped: {why}");
                    }
                    if !busy {
                        g.wait(Duration::from_millis(1));
                    }
                    // Once in view 1 with traffic delivered in it, serve a little longer.
                    if let Some(&(1, at)) = rec.views.last()
                        && rec.delivered.len() as u64 > at + 50
                    {
                        let until = *linger
                            .get_or_insert_with(|| Instant::now() + Duration::from_millis(200));
                        if Instant::now() > until {
                            return rec;
                        }
                    }
                }
                panic!("n{i}: no progress in view 1 within the deadline");
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(40));
    crashed.store(true, Ordering::Release);
    faults.crash(NodeId(3));
    let recs: Vec<Record> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let survivors = &recs[..3];
    let at1: Vec<u64> = survivors
        .iter()
        .map(|r| r.views.iter().find(|v| v.0 == 1).unwrap().1)
        .collect();
    assert!(
        at1.windows(2).all(|w| w[0] == w[1]),
        "view 1 installed at {at1:?}"
    );
    for (i, r) in recs.iter().enumerate() {
        for (j, d) in r.delivered.iter().enumerate() {
            assert_eq!(d.0, j as u64, "n{i}: positions are gapless from 0");
        }
        for s in survivors {
            let n = r.delivered.len().min(s.delivered.len());
            assert_eq!(r.delivered[..n], s.delivered[..n], "n{i}: not a prefix");
        }
    }
    for (i, r) in survivors.iter().enumerate() {
        for p in &r.discarded {
            assert_eq!(p[0] as usize, i, "a discard reported to another sender");
            assert!(
                recs.iter().all(|o| o.delivered.iter().all(|d| &d.1 != p)),
                "n{i}: a discarded message was delivered"
            );
        }
    }
}
