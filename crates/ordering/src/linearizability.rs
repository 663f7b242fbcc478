//! A linearizability checker (Wing & Gong's search with Lowe's memoisation, as in Porcupine),
//! for any sequential model, with a key-value model built in.
//!
//! Record each client operation with its invocation and response times (any monotonic clock:
//! real or virtual) and its output; an operation whose outcome is unknown (its client crashed, or
//! it timed out) has no response and may or may not have taken effect. [`check`] searches for a
//! sequential order consistent with real time in which the model produces every recorded output.
//! It never places an operation with an unknown outcome that leaves the state as it is (a read
//! whose client gave up): such an operation need not take effect and explains no output, and
//! placing it or not at every point after its call would double the orders searched.
//! Histories split into independent parts by key ([`Model::partition`]) are checked part by
//! part, which keeps the search small.
//!
//! ```
//! use squall_ordering::linearizability::{check, kv::{Kv, KvInput, KvOutput}, Operation};
//! let put = Operation { client: 1, input: KvInput::Put(1, 10), call: 0, ret: Some(5), output: Some(KvOutput::Ok) };
//! let get = Operation { client: 2, input: KvInput::Get(1), call: 6, ret: Some(8), output: Some(KvOutput::Value(Some(10))) };
//! assert!(check(&Kv, &[put.clone(), get]).is_ok());
//! let stale = Operation { client: 2, input: KvInput::Get(1), call: 6, ret: Some(8), output: Some(KvOutput::Value(None)) };
//! assert!(check(&Kv, &[put, stale]).is_err());
//! ```

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;

use thiserror::Error;

/// A sequential specification.
pub trait Model {
    /// The abstract state.
    type State: Clone + Eq + Hash + Debug;
    /// An operation's input.
    type Input: Clone + Debug;
    /// An operation's output.
    type Output: Clone + PartialEq + Debug;

    /// The initial state.
    fn init(&self) -> Self::State;

    /// Applies `input` to `state`: the next state and the output the operation must return.
    fn step(&self, state: &Self::State, input: &Self::Input) -> (Self::State, Self::Output);

    /// Splits operations (by index) into groups that touch disjoint parts of the state and can
    /// be checked independently. The default is one group.
    fn partition(&self, inputs: &[&Self::Input]) -> Vec<Vec<usize>> {
        vec![(0..inputs.len()).collect()]
    }
}

/// One client operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Operation<I, O> {
    /// The client that issued it (operations of one client never overlap).
    pub client: u64,
    /// What it asked.
    pub input: I,
    /// When it was invoked.
    pub call: u64,
    /// When it returned; `None` if its outcome is unknown (it may or may not have taken effect).
    pub ret: Option<u64>,
    /// What it returned; `None` if unknown.
    pub output: Option<O>,
}

/// The history is not linearizable (or could not be decided within the budget).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum NotLinearizable {
    /// No sequential order explains the outputs.
    #[error(
        "not linearizable: no order of the {ops} operations of partition {partition} explains their outputs; first operation that could not be placed: {witness}"
    )]
    Violation {
        /// Which partition.
        partition: usize,
        /// Operations in it.
        ops: usize,
        /// The operation (debug form) the search got stuck on most.
        witness: String,
    },
    /// The search exceeded its step budget without deciding.
    #[error("undecided: the search for partition {partition} exceeded {steps} steps")]
    Undecided {
        /// Which partition.
        partition: usize,
        /// The budget.
        steps: u64,
    },
    /// A response came before its invocation.
    #[error("operation {index} returns at {ret} before it is called at {call}")]
    BadTimes {
        /// The operation's index.
        index: usize,
        /// Invocation.
        call: u64,
        /// Response.
        ret: u64,
    },
}

/// The default search budget per partition.
pub const DEFAULT_BUDGET: u64 = 5_000_000;

/// Checks `history` against `model` with the default budget.
pub fn check<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
) -> Result<(), NotLinearizable> {
    check_with_budget(model, history, DEFAULT_BUDGET)
}

/// Checks `history` against `model`, giving up as [`NotLinearizable::Undecided`] after `budget`
/// search steps in one partition.
pub fn check_with_budget<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    budget: u64,
) -> Result<(), NotLinearizable> {
    for (index, op) in history.iter().enumerate() {
        if let Some(ret) = op.ret {
            if ret < op.call {
                return Err(NotLinearizable::BadTimes {
                    index,
                    call: op.call,
                    ret,
                });
            }
        }
    }
    let inputs: Vec<&M::Input> = history.iter().map(|o| &o.input).collect();
    for (partition, members) in model.partition(&inputs).into_iter().enumerate() {
        let ops: Vec<&Operation<M::Input, M::Output>> =
            members.iter().map(|&i| &history[i]).collect();
        search(model, &ops, partition, budget)?;
    }
    Ok(())
}

#[derive(Clone, Copy)]
struct Entry {
    op: usize,
    is_call: bool,
    prev: usize,
    next: usize,
}

const HEAD: usize = 0;
const NIL: usize = usize::MAX;

fn search<M: Model>(
    model: &M,
    ops: &[&Operation<M::Input, M::Output>],
    partition: usize,
    budget: u64,
) -> Result<(), NotLinearizable> {
    // Events sorted by time; at equal times calls come first (overlapping is the lenient reading).
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(ops.len() * 2);
    for (i, op) in ops.iter().enumerate() {
        events.push((op.call, true, i));
        events.push((op.ret.unwrap_or(u64::MAX), false, i));
    }
    events.sort_by_key(|&(t, is_call, i)| (t, !is_call, i));
    // A doubly linked list with a sentinel head at index 0.
    let mut list = vec![Entry {
        op: NIL,
        is_call: false,
        prev: NIL,
        next: NIL,
    }];
    let mut ret_of = vec![0; ops.len()];
    for &(_, is_call, op) in &events {
        let idx = list.len();
        let prev = idx - 1;
        list[prev].next = idx;
        list.push(Entry {
            op,
            is_call,
            prev,
            next: NIL,
        });
        if !is_call {
            ret_of[op] = idx;
        }
    }
    let unlink = |list: &mut Vec<Entry>, i: usize| {
        let (p, n) = (list[i].prev, list[i].next);
        list[p].next = n;
        if n != NIL {
            list[n].prev = p;
        }
    };
    let relink = |list: &mut Vec<Entry>, i: usize| {
        let (p, n) = (list[i].prev, list[i].next);
        list[p].next = i;
        if n != NIL {
            list[n].prev = i;
        }
    };

    let words = ops.len().div_ceil(64).max(1);
    let mut linearized = vec![0u64; words];
    let mut cache: HashSet<(Vec<u64>, M::State)> = HashSet::new();
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut state = model.init();
    let mut cursor = list[HEAD].next;
    let mut steps = 0u64;
    let mut deepest = (0usize, NIL);
    loop {
        steps += 1;
        if steps > budget {
            return Err(NotLinearizable::Undecided {
                partition,
                steps: budget,
            });
        }
        // Done when only operations with unknown outcomes remain (their returns, at the end,
        // included: they need not be placed).
        let mut rest = list[HEAD].next;
        while rest != NIL && ops[list[rest].op].ret.is_none() {
            rest = list[rest].next;
        }
        if rest == NIL {
            return Ok(());
        }
        if cursor != NIL && list[cursor].is_call {
            let op = list[cursor].op;
            let (next_state, output) = model.step(&state, &ops[op].input);
            // An operation with an unknown outcome need not be placed at all, and placing one
            // that leaves the state as it is never helps: any order that completes from the
            // configuration with it placed completes, operation for operation, from the one
            // without it (it constrains no other operation's place, and the states agree).
            // Skipping it keeps pending reads (a client that gave up on a get or a scan) from
            // doubling the configurations to search each.
            let unneeded = ops[op].ret.is_none() && next_state == state;
            let matches = ops[op].output.as_ref().is_none_or(|o| *o == output);
            let mut bits = linearized.clone();
            bits[op / 64] |= 1 << (op % 64);
            if !unneeded && matches && cache.insert((bits.clone(), next_state.clone())) {
                stack.push((cursor, state));
                state = next_state;
                linearized = bits;
                unlink(&mut list, cursor);
                unlink(&mut list, ret_of[op]);
                if stack.len() > deepest.0 {
                    deepest = (stack.len(), NIL);
                }
                cursor = list[HEAD].next;
            } else {
                cursor = list[cursor].next;
            }
            continue;
        }
        // A return (or the end) was reached before its operation was placed: backtrack.
        if deepest.1 == NIL || stack.len() >= deepest.0 {
            deepest.1 = if cursor != NIL { list[cursor].op } else { NIL };
        }
        let Some((call, previous)) = stack.pop() else {
            let witness = match deepest.1 {
                NIL => "none".to_string(),
                op => format!("{:?}", ops[op]),
            };
            return Err(NotLinearizable::Violation {
                partition,
                ops: ops.len(),
                witness,
            });
        };
        let op = list[call].op;
        relink(&mut list, ret_of[op]);
        relink(&mut list, call);
        linearized[op / 64] &= !(1 << (op % 64));
        state = previous;
        cursor = list[call].next;
    }
}

pub mod kv {
    //! The key-value model: get, put, delete, compare-and-set and range scans over `u64` keys
    //! and values (tests map their keys and values to numbers).

    use std::collections::BTreeMap;

    use super::Model;

    /// A key-value operation.
    #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    pub enum KvInput {
        /// Read a key.
        Get(u64),
        /// Write a key.
        Put(u64, u64),
        /// Remove a key.
        Delete(u64),
        /// Set `key` to `new` if it holds `expected` (`None`: absent).
        Cas(u64, Option<u64>, u64),
        /// Read every key in `lo..hi`.
        Scan(u64, u64),
    }

    /// A key-value result.
    #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    pub enum KvOutput {
        /// Put or delete done.
        Ok,
        /// A get's value.
        Value(Option<u64>),
        /// Whether a CAS swapped, and the value it saw.
        Cas(bool, Option<u64>),
        /// A scan's pairs, ascending.
        Scan(Vec<(u64, u64)>),
    }

    /// The model; its state is the whole map (a partition's slice of it).
    #[derive(Clone, Copy, Debug, Default)]
    pub struct Kv;

    impl Model for Kv {
        type State = BTreeMap<u64, u64>;
        type Input = KvInput;
        type Output = KvOutput;

        fn init(&self) -> Self::State {
            BTreeMap::new()
        }

        fn step(&self, s: &Self::State, input: &KvInput) -> (Self::State, KvOutput) {
            let mut next = s.clone();
            let out = match *input {
                KvInput::Get(k) => KvOutput::Value(s.get(&k).copied()),
                KvInput::Put(k, v) => {
                    next.insert(k, v);
                    KvOutput::Ok
                }
                KvInput::Delete(k) => {
                    next.remove(&k);
                    KvOutput::Ok
                }
                KvInput::Cas(k, expected, new) => {
                    let seen = s.get(&k).copied();
                    let swap = seen == expected;
                    if swap {
                        next.insert(k, new);
                    }
                    KvOutput::Cas(swap, seen)
                }
                KvInput::Scan(lo, hi) => {
                    KvOutput::Scan(s.range(lo..hi).map(|(k, v)| (*k, *v)).collect())
                }
            };
            (next, out)
        }

        /// One partition per key, unless a scan spans keys (then one partition).
        fn partition(&self, inputs: &[&KvInput]) -> Vec<Vec<usize>> {
            if inputs.iter().any(|i| matches!(i, KvInput::Scan(..))) {
                return vec![(0..inputs.len()).collect()];
            }
            let mut by_key: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
            for (i, input) in inputs.iter().enumerate() {
                let key = match **input {
                    KvInput::Get(k)
                    | KvInput::Put(k, _)
                    | KvInput::Delete(k)
                    | KvInput::Cas(k, ..) => k,
                    KvInput::Scan(lo, _) => lo,
                };
                by_key.entry(key).or_default().push(i);
            }
            by_key.into_values().collect()
        }
    }
}
