//! Checkers over recorded delivery histories.
//!
//! Record what each process submitted and delivered (in order, with the position or timestamp
//! the backend reported) and which processes crashed; then check the properties a backend
//! promises. Messages are named by any identity type `M` (a payload, a `(sender, seq)` pair).
//! Every checker returns the first [`Violation`] it finds, naming the property and the evidence.
//!
//! Properties (atomic multicast as defined in the Heron paper; total order is the single-group
//! case with gapless delivery):
//!
//! - **integrity**: a process delivers a message at most once, only if it was submitted, and (for
//!   multicast, when group membership is recorded) only if the process is in one of its groups;
//! - **total order**: within a group, any two processes' delivery sequences are prefixes of one
//!   another (same order, no gaps), crashed processes included;
//! - **positions**: every process reports the same position (timestamp) for the same message, and
//!   positions strictly increase along each process's sequence;
//! - **agreement** (after the run settles): every message delivered by anyone — even a process
//!   that crashed later — is delivered by every correct process in its destination;
//! - **validity** (after the run settles): every message a correct process submitted is delivered
//!   by every correct process in its destination;
//! - **uniform prefix order**: for messages `m`, `m'` and processes `p ∈ g`, `q ∈ h` with
//!   `{g, h} ⊆ m.dst ∩ m'.dst`, if `p` delivers `m` and `q` delivers `m'`, then `p` delivers `m'`
//!   before `m` or `q` delivers `m` before `m'`;
//! - **acyclic order**: the relation "some process delivers `m` before `m'`" has no cycle.
//!
//! ```
//! use squall_ordering::check::History;
//! use squall_transport::NodeId;
//! let (p, q) = (NodeId(0), NodeId(1));
//! let mut h = History::new();
//! for m in ["a", "b"] {
//!     h.submit(p, m, &[]);
//! }
//! h.deliver(p, "a", 0);
//! h.deliver(p, "b", 1);
//! h.deliver(q, "b", 1); // q skipped "a"
//! assert_eq!(h.check_total_order().expect_err("a violation").property, "total order");
//! ```

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Debug;

use squall_transport::NodeId;

use crate::types::GroupId;

/// A property a history broke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The property.
    pub property: &'static str,
    /// The evidence.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} violated: {}", self.property, self.detail)
    }
}

impl std::error::Error for Violation {}

fn violation(property: &'static str, detail: String) -> Result<(), Violation> {
    Err(Violation { property, detail })
}

/// A recorded history of submissions and deliveries.
#[derive(Clone, Debug)]
pub struct History<M> {
    submitted: BTreeMap<M, (NodeId, Vec<GroupId>)>,
    delivered: BTreeMap<NodeId, Vec<(M, u64)>>,
    groups: BTreeMap<NodeId, GroupId>,
    crashed: BTreeSet<NodeId>,
}

impl<M: Ord + Clone + Debug> Default for History<M> {
    fn default() -> Self {
        History::new()
    }
}

impl<M: Ord + Clone + Debug> History<M> {
    /// An empty history.
    pub fn new() -> History<M> {
        History {
            submitted: BTreeMap::new(),
            delivered: BTreeMap::new(),
            groups: BTreeMap::new(),
            crashed: BTreeSet::new(),
        }
    }

    /// Records that `process` belongs to `group` (multicast histories).
    pub fn member(&mut self, process: NodeId, group: GroupId) {
        self.groups.insert(process, group);
    }

    /// Records that `sender` submitted `m` to `dst` (empty for a single-group backend).
    pub fn submit(&mut self, sender: NodeId, m: M, dst: &[GroupId]) {
        self.submitted.insert(m, (sender, dst.to_vec()));
    }

    /// Records that `process` delivered `m` at `position` (or timestamp), after everything it
    /// delivered before.
    pub fn deliver(&mut self, process: NodeId, m: M, position: u64) {
        self.delivered
            .entry(process)
            .or_default()
            .push((m, position));
    }

    /// Records that `process` crashed (it need not deliver anything more).
    pub fn crash(&mut self, process: NodeId) {
        self.crashed.insert(process);
    }

    /// What `process` delivered, in order.
    pub fn deliveries(&self, process: NodeId) -> impl Iterator<Item = &M> {
        self.delivered
            .get(&process)
            .into_iter()
            .flatten()
            .map(|(m, _)| m)
    }

    fn in_dst(&self, process: NodeId, m: &M) -> bool {
        match (self.submitted.get(m), self.groups.get(&process)) {
            (Some((_, dst)), Some(g)) if !dst.is_empty() => dst.contains(g),
            _ => true,
        }
    }

    /// Integrity: at most once, only if submitted, only to processes in a destination group.
    pub fn check_integrity(&self) -> Result<(), Violation> {
        for (p, seq) in &self.delivered {
            let mut seen = BTreeSet::new();
            for (m, _) in seq {
                if !seen.insert(m) {
                    return violation("integrity", format!("{p} delivered {m:?} twice"));
                }
                if !self.submitted.contains_key(m) {
                    return violation(
                        "integrity",
                        format!("{p} delivered {m:?}, which nobody submitted"),
                    );
                }
                if !self.in_dst(*p, m) {
                    return violation(
                        "integrity",
                        format!("{p} delivered {m:?}, which was not addressed to its group"),
                    );
                }
            }
        }
        Ok(())
    }

    /// Positions: the same message has the same position everywhere, and positions strictly
    /// increase along every process's sequence.
    pub fn check_positions(&self) -> Result<(), Violation> {
        let mut at: BTreeMap<&M, (NodeId, u64)> = BTreeMap::new();
        for (p, seq) in &self.delivered {
            for pair in seq.windows(2) {
                if pair[0].1 >= pair[1].1 {
                    return violation(
                        "positions",
                        format!(
                            "{p} delivered {:?} at {} after {:?} at {}",
                            pair[1].0, pair[1].1, pair[0].0, pair[0].1
                        ),
                    );
                }
            }
            for (m, pos) in seq {
                match at.get(m) {
                    Some(&(q, other)) if other != *pos => {
                        return violation(
                            "positions",
                            format!("{m:?} is at {pos} on {p} but at {other} on {q}"),
                        );
                    }
                    _ => {
                        at.insert(m, (*p, *pos));
                    }
                }
            }
        }
        Ok(())
    }

    /// Total order within one group: integrity, positions, and every two processes' sequences
    /// are prefixes of one another.
    pub fn check_total_order(&self) -> Result<(), Violation> {
        self.check_integrity()?;
        self.check_positions()?;
        let seqs: Vec<(&NodeId, &Vec<(M, u64)>)> = self.delivered.iter().collect();
        for (i, (p, a)) in seqs.iter().enumerate() {
            for (q, b) in &seqs[i + 1..] {
                if let Some(k) = a.iter().zip(b.iter()).position(|(x, y)| x.0 != y.0) {
                    return violation(
                        "total order",
                        format!(
                            "{p} and {q} differ at their delivery #{k}: {:?} vs {:?}",
                            a[k].0, b[k].0
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// Uniform agreement, checked once the run has settled: every message anyone delivered is
    /// delivered by every process in `correct` that is in its destination.
    pub fn check_agreement(&self, correct: &[NodeId]) -> Result<(), Violation> {
        let all: BTreeSet<&M> = self.delivered.values().flatten().map(|(m, _)| m).collect();
        self.everyone_delivers("agreement", correct, all)
    }

    /// Validity, checked once the run has settled: every message a process in `correct`
    /// submitted is delivered by every process in `correct` in its destination.
    pub fn check_validity(&self, correct: &[NodeId]) -> Result<(), Violation> {
        let from_correct: BTreeSet<&M> = self
            .submitted
            .iter()
            .filter(|(_, (sender, _))| correct.contains(sender))
            .map(|(m, _)| m)
            .collect();
        self.everyone_delivers("validity", correct, from_correct)
    }

    fn everyone_delivers(
        &self,
        property: &'static str,
        correct: &[NodeId],
        msgs: BTreeSet<&M>,
    ) -> Result<(), Violation> {
        for p in correct {
            let mine: BTreeSet<&M> = self.deliveries(*p).collect();
            if let Some(m) = msgs
                .iter()
                .find(|m| self.in_dst(*p, m) && !mine.contains(*m))
            {
                return violation(
                    property,
                    format!("correct process {p} never delivered {m:?}"),
                );
            }
        }
        Ok(())
    }

    /// Uniform prefix order (multicast).
    pub fn check_prefix_order(&self) -> Result<(), Violation> {
        let index: BTreeMap<NodeId, BTreeMap<&M, usize>> = self
            .delivered
            .iter()
            .map(|(p, seq)| {
                (
                    *p,
                    seq.iter().enumerate().map(|(i, (m, _))| (m, i)).collect(),
                )
            })
            .collect();
        let dst = |m: &M| {
            self.submitted
                .get(m)
                .map(|(_, d)| d.clone())
                .unwrap_or_default()
        };
        for (p, pi) in &index {
            for (q, qi) in &index {
                let (Some(g), Some(h)) = (self.groups.get(p), self.groups.get(q)) else {
                    continue;
                };
                for (m, &pm) in pi {
                    let dm = dst(m);
                    if !(dm.contains(g) && dm.contains(h)) {
                        continue;
                    }
                    for (m2, &qm2) in qi {
                        let d2 = dst(m2);
                        if m == m2 || !(d2.contains(g) && d2.contains(h)) {
                            continue;
                        }
                        let p_m2_first = pi.get(m2).is_some_and(|&x| x < pm);
                        let q_m_first = qi.get(m).is_some_and(|&x| x < qm2);
                        if !p_m2_first && !q_m_first {
                            return violation(
                                "uniform prefix order",
                                format!(
                                    "{p} delivered {m:?} without {m2:?} before it, and {q} delivered {m2:?} without {m:?} before it"
                                ),
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Acyclic order: "some process delivers `m` before `m'`" has no cycle.
    pub fn check_acyclic_order(&self) -> Result<(), Violation> {
        let mut edges: BTreeMap<&M, BTreeSet<&M>> = BTreeMap::new();
        let mut indegree: BTreeMap<&M, usize> = BTreeMap::new();
        for seq in self.delivered.values() {
            for (m, _) in seq {
                indegree.entry(m).or_insert(0);
            }
            for pair in seq.windows(2) {
                if edges.entry(&pair[0].0).or_default().insert(&pair[1].0) {
                    *indegree.entry(&pair[1].0).or_insert(0) += 1;
                }
            }
        }
        let mut ready: VecDeque<&M> = indegree
            .iter()
            .filter(|(_, d)| **d == 0)
            .map(|(m, _)| *m)
            .collect();
        let mut done = 0;
        while let Some(m) = ready.pop_front() {
            done += 1;
            for next in edges.get(m).into_iter().flatten() {
                let d = indegree
                    .get_mut(next)
                    .unwrap_or_else(|| unreachable!("every target has an indegree"));
                *d -= 1;
                if *d == 0 {
                    ready.push_back(next);
                }
            }
        }
        if done < indegree.len() {
            let stuck: Vec<&&M> = indegree
                .iter()
                .filter(|(_, d)| **d > 0)
                .map(|(m, _)| m)
                .take(4)
                .collect();
            return violation(
                "acyclic order",
                format!("the delivery order has a cycle through {stuck:?}"),
            );
        }
        Ok(())
    }

    /// Everything atomic multicast promises about order: integrity, positions (timestamps),
    /// uniform prefix order and acyclic order.
    pub fn check_multicast(&self) -> Result<(), Violation> {
        self.check_integrity()?;
        self.check_positions()?;
        self.check_prefix_order()?;
        self.check_acyclic_order()
    }
}
