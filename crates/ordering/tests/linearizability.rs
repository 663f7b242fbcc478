//! The linearizability checker accepts histories produced by a linearizable store and rejects
//! stale reads, lost writes and reordered effects.
use proptest::prelude::*;
use squall_ordering::linearizability::kv::{Kv, KvInput, KvOutput};
use squall_ordering::linearizability::{
    Model, NotLinearizable, Operation, check, check_with_budget,
};

type Op = Operation<KvInput, KvOutput>;

fn input() -> impl Strategy<Value = KvInput> {
    prop_oneof![
        (0u64..3).prop_map(KvInput::Get),
        (0u64..3, 0u64..4).prop_map(|(k, v)| KvInput::Put(k, v)),
        (0u64..3).prop_map(KvInput::Delete),
        (0u64..3, proptest::option::of(0u64..4), 0u64..4)
            .prop_map(|(k, e, n)| KvInput::Cas(k, e, n)),
    ]
}

/// Builds a history by executing each op atomically at a random point inside its interval.
/// `unknown` ops lose their response (their effect still happened, or not, as chosen).
fn linearizable_history(spec: Vec<(KvInput, u64, u64, u64, bool, bool)>) -> Vec<Op> {
    let mut ops: Vec<(u64, usize, Op)> = spec
        .into_iter()
        .enumerate()
        .map(|(i, (input, start, len, at, unknown, applied))| {
            let (call, ret) = (start * 10, start * 10 + 1 + len);
            let point = call + at % (ret - call + 1);
            let op = Op {
                client: i as u64,
                input,
                call,
                ret: Some(ret),
                output: None,
            };
            (
                if unknown && !applied { u64::MAX } else { point },
                if unknown { 1 } else { 0 },
                op,
            )
        })
        .collect();
    ops.sort_by_key(|(point, ..)| *point);
    let mut state = Kv.init();
    let mut out = Vec::new();
    for (point, unknown, mut op) in ops {
        if point != u64::MAX {
            let (next, result) = Kv.step(&state, &op.input);
            state = next;
            op.output = Some(result);
        }
        if unknown == 1 {
            op.ret = None;
            op.output = None;
        }
        out.push(op);
    }
    out
}

proptest! {
    #[test]
    fn histories_of_a_linearizable_store_pass(
        spec in proptest::collection::vec((input(), 0u64..12, 0u64..40, any::<u64>(), proptest::bool::weighted(0.1), any::<bool>()), 0..24)
    ) {
        let h = linearizable_history(spec);
        prop_assert_eq!(check(&Kv, &h), Ok(()));
    }
}

fn op(client: u64, input: KvInput, call: u64, ret: u64, output: KvOutput) -> Op {
    Op {
        client,
        input,
        call,
        ret: Some(ret),
        output: Some(output),
    }
}

#[test]
fn stale_read_after_a_completed_write_is_caught() {
    let h = vec![
        op(1, KvInput::Put(7, 1), 0, 10, KvOutput::Ok),
        op(2, KvInput::Get(7), 20, 30, KvOutput::Value(None)),
    ];
    assert!(matches!(
        check(&Kv, &h),
        Err(NotLinearizable::Violation { .. })
    ));
}

#[test]
fn concurrent_read_may_see_either_value() {
    for seen in [None, Some(1)] {
        let h = vec![
            op(1, KvInput::Put(7, 1), 0, 10, KvOutput::Ok),
            op(2, KvInput::Get(7), 5, 30, KvOutput::Value(seen)),
        ];
        assert_eq!(check(&Kv, &h), Ok(()), "{seen:?}");
    }
}

#[test]
fn two_successful_cas_from_the_same_value_is_caught() {
    let h = vec![
        op(
            1,
            KvInput::Cas(1, None, 5),
            0,
            10,
            KvOutput::Cas(true, None),
        ),
        op(
            2,
            KvInput::Cas(1, None, 6),
            0,
            10,
            KvOutput::Cas(true, None),
        ),
    ];
    assert!(check(&Kv, &h).is_err(), "a lost update must be caught");
}

#[test]
fn reads_must_agree_on_write_order() {
    // Two writes overlap; one reader sees 1 then 2, another sees 2 then 1, both after the writes
    // completed: impossible.
    let h = vec![
        op(1, KvInput::Put(3, 1), 0, 10, KvOutput::Ok),
        op(2, KvInput::Put(3, 2), 0, 10, KvOutput::Ok),
        op(3, KvInput::Get(3), 11, 12, KvOutput::Value(Some(1))),
        op(3, KvInput::Get(3), 13, 14, KvOutput::Value(Some(2))),
    ];
    assert!(check(&Kv, &h).is_err());
}

#[test]
fn unknown_outcomes_may_or_may_not_have_happened() {
    let lost = Op {
        client: 1,
        input: KvInput::Put(2, 9),
        call: 0,
        ret: None,
        output: None,
    };
    for seen in [None, Some(9)] {
        let h = vec![
            lost.clone(),
            op(2, KvInput::Get(2), 50, 60, KvOutput::Value(seen)),
        ];
        assert_eq!(check(&Kv, &h), Ok(()), "{seen:?}");
    }
}

#[test]
fn scans_are_checked_across_keys() {
    let h = vec![
        op(1, KvInput::Put(1, 1), 0, 1, KvOutput::Ok),
        op(1, KvInput::Put(2, 2), 2, 3, KvOutput::Ok),
        op(2, KvInput::Scan(0, 10), 4, 5, KvOutput::Scan(vec![(2, 2)])),
    ];
    assert!(
        check(&Kv, &h).is_err(),
        "a scan missing an earlier write must be caught"
    );
}

#[test]
fn bad_times_and_budget_are_reported() {
    let h = vec![op(1, KvInput::Get(0), 10, 5, KvOutput::Value(None))];
    assert!(matches!(
        check(&Kv, &h),
        Err(NotLinearizable::BadTimes { .. })
    ));
    let many: Vec<Op> = (0..12)
        .map(|i| op(i, KvInput::Put(0, i), 0, 100, KvOutput::Ok))
        .chain([op(99, KvInput::Get(0), 200, 201, KvOutput::Value(Some(77)))])
        .collect();
    assert!(matches!(
        check_with_budget(&Kv, &many, 1000),
        Err(NotLinearizable::Undecided { .. })
    ));
}
