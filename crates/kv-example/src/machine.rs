//! The replicated state: an ordered map of byte keys to byte values.

use std::collections::BTreeMap;
use std::ops::Bound;

use squall_smr::{RestoreError, StateMachine};

use crate::ops::{KvOp, KvResult};

/// The KV state machine: a `BTreeMap` of byte keys and values.
///
/// ```
/// use squall_kv::{KvMachine, KvOp, KvResult};
/// use squall_smr::StateMachine;
/// let mut m = KvMachine::default();
/// let put = KvOp::Put { key: b"a".to_vec(), value: b"1".to_vec() };
/// assert_eq!(KvResult::decode(&m.apply(&put.encode()))?, KvResult::Done);
/// let get = KvOp::Get { key: b"a".to_vec() };
/// assert_eq!(KvResult::decode(&m.query(&get.encode()))?, KvResult::Value(Some(b"1".to_vec())));
/// # Ok::<(), squall_kv::OpsError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KvMachine {
    map: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl KvMachine {
    /// Number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn run(&mut self, op: &KvOp) -> KvResult {
        match op {
            KvOp::Put { key, value } => {
                self.map.insert(key.clone(), value.clone());
                KvResult::Done
            }
            KvOp::Delete { key } => {
                self.map.remove(key);
                KvResult::Done
            }
            KvOp::Cas { key, expected, new } => {
                let previous = self.map.get(key).cloned();
                let swapped = previous == *expected;
                if swapped {
                    self.map.insert(key.clone(), new.clone());
                }
                KvResult::Cas { swapped, previous }
            }
            KvOp::Batch(ops) => KvResult::Batch(ops.iter().map(|o| self.run(o)).collect()),
            read => self.read(read),
        }
    }

    fn read(&self, op: &KvOp) -> KvResult {
        match op {
            KvOp::Get { key } => KvResult::Value(self.map.get(key).cloned()),
            KvOp::Scan { start, end, limit } => {
                let upper = if end.is_empty() {
                    Bound::Unbounded
                } else {
                    Bound::Excluded(end.clone())
                };
                if !end.is_empty() && end <= start {
                    return KvResult::Pairs(Vec::new());
                }
                KvResult::Pairs(
                    self.map
                        .range((Bound::Included(start.clone()), upper))
                        .take(*limit as usize)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                )
            }
            KvOp::Batch(ops) => KvResult::Batch(ops.iter().map(|o| self.read(o)).collect()),
            _ => KvResult::Invalid("a write cannot be served as a read".into()),
        }
    }
}

impl StateMachine for KvMachine {
    fn apply(&mut self, command: &[u8]) -> Vec<u8> {
        match KvOp::decode(command) {
            Ok(op) => self.run(&op),
            Err(e) => KvResult::Invalid(e.to_string()),
        }
        .encode()
    }

    fn query(&self, query: &[u8]) -> Vec<u8> {
        match KvOp::decode(query) {
            Ok(op) => self.read(&op),
            Err(e) => KvResult::Invalid(e.to_string()),
        }
        .encode()
    }

    /// `KvResult::Pairs` of every pair in key order, encoded straight from the map (no copy
    /// of each key and value first: this runs on the replica's thread at every checkpoint).
    fn snapshot(&self) -> Vec<u8> {
        let bytes = self.map.iter().map(|(k, v)| k.len() + v.len()).sum();
        crate::ops::encode_pairs(
            self.map.len(),
            bytes,
            self.map.iter().map(|(k, v)| (&k[..], &v[..])),
        )
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
        match KvResult::decode(snapshot) {
            Ok(KvResult::Pairs(pairs)) => {
                self.map = pairs.into_iter().collect();
                Ok(())
            }
            Ok(other) => Err(RestoreError::new(format!(
                "expected key-value pairs, found {other:?}"
            ))),
            Err(e) => Err(RestoreError::new(e.to_string())),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_is_the_pairs_result_and_restores() {
        let mut m = KvMachine::default();
        for i in 0..100u32 {
            let put = KvOp::Put {
                key: format!("k{i}").into_bytes(),
                value: vec![i as u8; (i % 7) as usize],
            };
            m.apply(&put.encode());
        }
        let pairs: Vec<_> = m.map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let snap = m.snapshot();
        assert_eq!(snap, KvResult::Pairs(pairs).encode());
        let mut back = KvMachine::default();
        back.restore(&snap).unwrap();
        assert_eq!(back, m);
        assert_eq!(
            KvMachine::default().snapshot(),
            KvResult::Pairs(Vec::new()).encode()
        );
    }
}
