//! The replicated state: an ordered map of byte keys to byte values.
//!
//! The map is a persistent one (`imbl::OrdMap`, a B-tree whose nodes are shared between
//! clones and copied on write): a checkpoint captures it in O(1)
//! ([`StateMachine::snapshot_encoder`]) and the membership group's writer thread encodes the
//! capture while the replica goes on applying commands. A state installed at a join or a
//! restart is decoded into a new map off the replica's thread too
//! ([`StateMachine::snapshot_decoder`]).

use std::ops::Bound;

use imbl::OrdMap;
use squall_smr::{RestoreError, StateDecoder, StateEncoder, StateMachine};

use crate::ops::{KvOp, KvResult};

/// The KV state machine: an ordered map of byte keys and values (a persistent map: see the
/// module's doc).
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
#[derive(Clone, Debug)]
pub struct KvMachine {
    map: OrdMap<Vec<u8>, Vec<u8>>,
    /// Whether checkpoints capture the map for another thread to encode
    /// ([`StateMachine::snapshot_encoder`]); `false`: the replica encodes them itself.
    capture: bool,
    /// Whether an installed state is decoded off the replica's thread
    /// ([`StateMachine::snapshot_decoder`]); `false`: the replica restores it itself.
    decode: bool,
}

impl Default for KvMachine {
    fn default() -> KvMachine {
        KvMachine {
            map: OrdMap::new(),
            capture: true,
            decode: true,
        }
    }
}

/// Two machines are equal when their maps are.
impl PartialEq for KvMachine {
    fn eq(&self, other: &KvMachine) -> bool {
        self.map == other.map
    }
}

impl Eq for KvMachine {}

impl KvMachine {
    /// A machine whose checkpoints are encoded on the replica's thread, as before the
    /// checkpoint encoder (`false`), or captured and encoded by the group's writer thread
    /// (`true`, the default). Only to measure the difference (`KvConfig::checkpoint_encode_inline`).
    ///
    /// ```
    /// use squall_smr::StateMachine;
    /// assert!(squall_kv::KvMachine::default().snapshot_encoder().is_some());
    /// assert!(squall_kv::KvMachine::default().capturing(false).snapshot_encoder().is_none());
    /// ```
    pub fn capturing(mut self, capture: bool) -> KvMachine {
        self.capture = capture;
        self
    }

    /// A machine whose installed states (a join's transfer, a restart's checkpoint) are
    /// restored on the replica's thread, as before the decoder (`false`), or decoded into a
    /// new map off it (`true`, the default). Only to measure the difference
    /// (`KvConfig::install_decode_inline`).
    ///
    /// ```
    /// use squall_smr::StateMachine;
    /// assert!(squall_kv::KvMachine::default().snapshot_decoder().is_some());
    /// assert!(squall_kv::KvMachine::default().decoding(false).snapshot_decoder().is_none());
    /// ```
    pub fn decoding(mut self, decode: bool) -> KvMachine {
        self.decode = decode;
        self
    }

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
    /// of each key and value first).
    fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        encode_map(&self.map, &mut out);
        out
    }

    /// An O(1) clone of the map (its nodes are shared until either side writes to them),
    /// encoded as [`snapshot`](Self::snapshot) by whichever thread runs it.
    fn snapshot_encoder(&self) -> Option<StateEncoder> {
        if !self.capture {
            return None;
        }
        let map = self.map.clone();
        Some(Box::new(move |out: &mut Vec<u8>| encode_map(&map, out)))
    }

    /// A fresh machine with this one's settings, [`restore`](Self::restore)d from the bytes
    /// by whichever thread runs it.
    fn snapshot_decoder(&self) -> Option<StateDecoder<KvMachine>> {
        if !self.decode {
            return None;
        }
        let settings = KvMachine {
            map: OrdMap::new(),
            ..*self
        };
        Some(Box::new(move |snapshot: &[u8]| {
            let mut fresh = settings;
            fresh.restore(snapshot).map(|()| fresh)
        }))
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

/// Appends `map` as `KvResult::Pairs`.
fn encode_map(map: &OrdMap<Vec<u8>, Vec<u8>>, out: &mut Vec<u8>) {
    let bytes: usize = map.iter().map(|(k, v)| k.len() + v.len()).sum();
    crate::ops::encode_pairs_into(
        out,
        map.len(),
        bytes,
        map.iter().map(|(k, v)| (&k[..], &v[..])),
    );
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

    /// The encoder is a capture: run on another thread after later puts, deletes and
    /// compare-and-swaps (which copy the shared nodes they touch), it encodes exactly what
    /// `snapshot` returned when it was taken; the machine's own state moved on.
    #[test]
    fn a_captured_snapshot_encodes_the_state_when_it_was_taken() {
        let mut m = KvMachine::default();
        let put = |k: u32, v: u32| KvOp::Put {
            key: format!("k{k:05}").into_bytes(),
            value: v.to_le_bytes().to_vec(),
        };
        for i in 0..5000u32 {
            m.apply(&put(i, i).encode());
        }
        let encode = m.snapshot_encoder().unwrap();
        let then = m.snapshot();
        for i in (0..5000u32).step_by(3) {
            m.apply(&put(i, i + 1).encode());
            let delete = KvOp::Delete {
                key: format!("k{:05}", i + 1).into_bytes(),
            };
            m.apply(&delete.encode());
        }
        let cas = KvOp::Cas {
            key: b"k00002".to_vec(),
            expected: Some(2u32.to_le_bytes().to_vec()),
            new: b"swapped".to_vec(),
        };
        m.apply(&cas.encode());
        let now = m.snapshot();
        assert_ne!(now, then, "the machine moved on");
        let out = std::thread::spawn(move || {
            let mut out = Vec::new();
            encode(&mut out);
            out
        })
        .join()
        .unwrap();
        assert_eq!(out, then);
        let mut fresh = Vec::new();
        m.snapshot_encoder().unwrap()(&mut fresh);
        assert_eq!(fresh, now);
    }

    /// The decoder, run on another thread, builds the machine `restore` builds from the same
    /// bytes, with the settings of the machine it was taken from, and fails where `restore`
    /// fails with its error.
    #[test]
    fn the_decoder_builds_what_restore_builds_and_fails_alike() {
        let mut m = KvMachine::default();
        for i in 0..3000u32 {
            let put = KvOp::Put {
                key: format!("k{:05}", i.wrapping_mul(7919) % 3000).into_bytes(),
                value: vec![i as u8; (i % 11) as usize],
            };
            m.apply(&put.encode());
        }
        let bytes = m.snapshot();
        let mut restored = KvMachine::default();
        restored.restore(&bytes).unwrap();
        let settings = KvMachine::default().capturing(false);
        let decode = settings.snapshot_decoder().unwrap();
        let decoded = std::thread::spawn(move || decode(&bytes))
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(decoded, restored);
        assert_eq!(decoded.snapshot(), m.snapshot());
        assert!(
            decoded.snapshot_encoder().is_none() && decoded.snapshot_decoder().is_some(),
            "the settings of the machine the decoder was taken from"
        );
        let mut torn = m.snapshot();
        torn.truncate(torn.len() - 3);
        for bad in [torn, KvResult::Done.encode(), vec![0xee; 9]] {
            let by_restore = KvMachine::default().restore(&bad).unwrap_err();
            let by_decoder = KvMachine::default().snapshot_decoder().unwrap()(&bad).unwrap_err();
            assert_eq!(by_decoder, by_restore);
        }
    }
}
