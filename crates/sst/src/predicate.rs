//! Predicates and triggers: one-time, recurrent and transition (false to true).
//!
//! A predicate reads the local copy of the table; its trigger may write the local row, push,
//! and insert or remove predicates (its own included). Triggers run on the driver's thread and
//! must not block: Derecho's deadlocks (#70, #105, #109, #195) all came from blocking upcalls.
//! Predicates inserted by a trigger are first evaluated in the next round; a predicate removed
//! by a trigger is not evaluated again, even later in the same round.

use squall_transport::Transport;

use crate::table::Sst;

/// When a trigger fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PredicateKind {
    /// The first time the predicate holds; then the predicate is removed.
    OneTime,
    /// Every round in which the predicate holds.
    Recurrent,
    /// Every round in which the predicate holds after a round in which it did not (the state
    /// before registration counts as "did not").
    Transition,
}

/// Names a registered predicate, for [`Sst::remove`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PredicateHandle(u64);

type Pred<T> = Box<dyn FnMut(&Sst<T>) -> bool>;
type Trigger<T> = Box<dyn FnMut(&mut Sst<T>)>;

struct Entry<T: Transport> {
    id: u64,
    kind: PredicateKind,
    pred: Pred<T>,
    trigger: Trigger<T>,
    last: bool,
    done: bool,
}

/// The registered predicates of one table.
pub(crate) struct Registry<T: Transport> {
    live: Vec<Entry<T>>,
    removed: Vec<u64>,
    next: u64,
}

impl<T: Transport> Registry<T> {
    pub(crate) fn new() -> Registry<T> {
        Registry {
            live: Vec::new(),
            removed: Vec::new(),
            next: 0,
        }
    }
}

impl<T: Transport> Sst<T> {
    /// Registers `pred` with `trigger`. Returns a handle for [`remove`](Sst::remove).
    ///
    /// ```
    /// # use squall_sst::{PredicateKind, SchemaBuilder, Sst, SstConfig};
    /// # use squall_transport::{NodeId, RegionId, RegionSpec};
    /// # use squall_transport_mem::threaded::{ThreadedConfig, ThreadedFabric};
    /// # let mut b = SchemaBuilder::new(1);
    /// let c = b.counter("c");
    /// # let schema = b.build().unwrap();
    /// # let node = ThreadedFabric::new(ThreadedConfig::default()).unwrap()
    /// #     .cluster(1, &[RegionSpec::new(RegionId(0), schema.table_len())]).unwrap().remove(0);
    /// let mut sst = Sst::new(node, schema, SstConfig::new(RegionId(0), vec![NodeId(0)])).unwrap();
    /// sst.insert(
    ///     PredicateKind::Recurrent,
    ///     move |s| s.get(s.my_row(), c) < 3,
    ///     move |s| { let v = s.get(s.my_row(), c); s.set(c, v + 1) },
    /// );
    /// for _ in 0..10 { sst.poll_once().unwrap(); }
    /// assert_eq!(sst.get(0, c), 3);
    /// ```
    pub fn insert(
        &mut self,
        kind: PredicateKind,
        pred: impl FnMut(&Sst<T>) -> bool + 'static,
        trigger: impl FnMut(&mut Sst<T>) + 'static,
    ) -> PredicateHandle {
        let id = self.registry.next;
        self.registry.next += 1;
        self.registry.live.push(Entry {
            id,
            kind,
            pred: Box::new(pred),
            trigger: Box::new(trigger),
            last: false,
            done: false,
        });
        PredicateHandle(id)
    }

    /// Removes a predicate. Removing one that already fired (one-time) or was removed is a no-op.
    pub fn remove(&mut self, handle: PredicateHandle) {
        self.registry.live.retain(|e| e.id != handle.0);
        self.registry.removed.push(handle.0);
    }

    /// How many predicates are registered.
    pub fn predicates(&self) -> usize {
        self.registry.live.len()
    }

    /// Evaluates every predicate once; returns how many triggers fired.
    pub(crate) fn evaluate(&mut self) -> usize {
        let mut list = std::mem::take(&mut self.registry.live);
        self.registry.removed.clear();
        let mut fired = 0;
        for e in list.iter_mut() {
            if self.registry.removed.contains(&e.id) {
                e.done = true;
                continue;
            }
            let holds = (e.pred)(self);
            self.evaluations += 1;
            let fire = match e.kind {
                PredicateKind::OneTime | PredicateKind::Recurrent => holds,
                PredicateKind::Transition => holds && !e.last,
            };
            e.last = holds;
            if fire {
                if e.kind == PredicateKind::OneTime {
                    e.done = true;
                }
                fired += 1;
                (e.trigger)(self);
            }
        }
        let removed = std::mem::take(&mut self.registry.removed);
        list.retain(|e| !e.done && !removed.contains(&e.id));
        // Predicates inserted by triggers during this round.
        let added = std::mem::take(&mut self.registry.live);
        list.extend(added.into_iter().filter(|e| !removed.contains(&e.id)));
        self.registry.live = list;
        fired
    }
}
