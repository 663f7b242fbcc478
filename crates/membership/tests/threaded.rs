//! Real concurrency: members on their own threads over the threaded mem fabric (shared memory,
//! real races between a block landing and a reader checking it). A crash, then a join: every
//! member installs the same views and applies the same trim.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use squall_membership::log::MemLog;
use squall_membership::view::View;
use squall_membership::{Epoch, Gms, GmsConfig, GmsError, GmsEvent};
use squall_transport::{NodeId, RegionId};
use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric, ThreadedNode};

/// Received counts that differ per member, so the trim is a real minimum.
struct Counts(u32);

impl Epoch for Counts {
    fn wedge(&mut self, view: &View) -> Vec<u64> {
        (0..view.members.len())
            .map(|k| 3 + u64::from((self.0 + k as u32) % 3))
            .collect()
    }
}

#[test]
fn threads_agree_on_views_and_trims_through_a_crash_and_a_join() {
    let mut cfg = GmsConfig::new(
        RegionId(0),
        (0..5).map(NodeId).collect(),
        (0..4).map(NodeId).collect(),
    );
    cfg.heartbeat_interval = Duration::from_millis(5);
    cfg.suspicion_timeout = Duration::from_secs(5);
    let layout = [Gms::<ThreadedNode, MemLog>::layout(&cfg).unwrap()];
    let nodes = ThreadedFabric::new(ThreadedConfig::default())
        .and_then(|f| f.cluster(5, &layout))
        .unwrap();
    let faults = nodes[0].faults();
    let crashed = Arc::new(AtomicBool::new(false));
    let view1 = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<(u32, GmsEvent)>();
    let handles: Vec<_> = nodes
        .into_iter()
        .enumerate()
        .map(|(i, node)| {
            let (cfg, tx) = (cfg.clone(), tx.clone());
            let (crashed, view1) = (crashed.clone(), view1.clone());
            std::thread::spawn(move || {
                let mut g = Gms::new(node, cfg, MemLog::default(), None).unwrap();
                let mut epoch = Counts(i as u32);
                let mut out = Vec::new();
                let deadline = Instant::now() + Duration::from_secs(60);
                let mut asked = false;
                let mut linger: Option<Instant> = None;
                while Instant::now() < deadline {
                    if i == 3 && crashed.load(Ordering::Acquire) {
                        return; // the harness crashed this node
                    }
                    if i == 4 && !asked && view1.load(Ordering::Acquire) {
                        g.request_join().unwrap();
                        asked = true;
                    }
                    let r = g.poll(&mut epoch, &mut out);
                    for e in out.drain(..) {
                        tx.send((i as u32, e)).unwrap();
                    }
                    match r {
                        Ok(true) => {}
                        Ok(false) => g.wait(Duration::from_millis(2)),
                        Err(_) if i == 3 && crashed.load(Ordering::Acquire) => return,
                        Err(GmsError::Stopped(why)) => panic!("n{i} stopped: {why}"),
                        Err(e) => panic!("n{i}: {e}"),
                    }
                    // Once in view 2, keep serving a little so the others see every echo.
                    if g.view().is_some_and(|v| v.id == 2) {
                        let until = *linger
                            .get_or_insert_with(|| Instant::now() + Duration::from_millis(300));
                        if Instant::now() > until {
                            return;
                        }
                    }
                }
            })
        })
        .collect();
    drop(tx);
    std::thread::sleep(Duration::from_millis(50));
    crashed.store(true, Ordering::Release);
    faults.crash(NodeId(3));
    let mut views: Vec<Vec<View>> = vec![Vec::new(); 5];
    let mut trims = Vec::new();
    let mut in_view1 = 0;
    for (i, e) in rx {
        if let GmsEvent::ViewInstalled { view, trim } = e {
            if view.id == 1 {
                in_view1 += 1;
                if in_view1 == 3 {
                    view1.store(true, Ordering::Release);
                }
            }
            if let Some(t) = trim {
                trims.push((i, t));
            }
            views[i as usize].push(view);
        }
    }
    for h in handles {
        h.join().unwrap();
    }
    let ids = |m: &[u32]| m.iter().map(|&x| NodeId(x)).collect::<Vec<_>>();
    for i in [0usize, 1, 2] {
        let got: Vec<(u64, Vec<NodeId>)> =
            views[i].iter().map(|v| (v.id, v.members.clone())).collect();
        assert_eq!(
            got,
            vec![(1, ids(&[0, 1, 2])), (2, ids(&[0, 1, 2, 4]))],
            "n{i}"
        );
    }
    assert_eq!(views[4].iter().map(|v| v.id).collect::<Vec<_>>(), vec![2]);
    // One trim per ended view, the same at every member that applied it.
    let first: Vec<_> = trims
        .iter()
        .filter(|(_, t)| t.view == 0)
        .map(|(_, t)| t.clone())
        .collect();
    assert_eq!(first.len(), 3);
    assert!(first.windows(2).all(|w| w[0] == w[1]));
    // min over n0..n2 of 3 + (i + k) % 3 per sender k, cut to the gap-free prefix.
    let counts: Vec<u64> = first[0].counts.iter().map(|c| c.1).collect();
    assert_eq!(
        counts,
        squall_membership::trim::ragged_prefix(&[3, 3, 3, 3])
    );
}
