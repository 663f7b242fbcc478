//! The whole conformance suite on the simulated fabric: once per check as its own test, then a
//! sweep over many seeds, and proof that the suite catches a fabric that breaks FIFO or atomicity.
mod common;

use squall_transport::conformance::{self, run_all};
use squall_transport_mem::sim::{Sabotage, check_seeds};

squall_transport::conformance_tests!(common::Simulated::new(1));

#[test]
fn every_check_over_many_seeds() {
    check_seeds("every_check_over_many_seeds", 100, |seed| {
        let mut fabric = common::Simulated::new(seed);
        for (name, outcome) in run_all(&mut fabric) {
            outcome.map_err(|v| format!("{name}: {v}"))?;
        }
        Ok(())
    });
}

#[test]
fn suite_catches_a_fabric_that_reorders_a_link() {
    let caught = (0..4).any(|seed| {
        let mut fabric = common::Simulated::sabotaged(seed, Sabotage::ReorderLinks);
        conformance::fifo_per_link(&mut fabric).is_err()
    });
    assert!(
        caught,
        "fifo_per_link passed on a fabric that reorders ops within a link"
    );
}

#[test]
fn suite_catches_non_atomic_compare_and_swap() {
    let caught = (0..4).any(|seed| {
        let mut fabric = common::Simulated::sabotaged(seed, Sabotage::SplitAtomics);
        conformance::cas_linearizable(&mut fabric).is_err()
            && conformance::fetch_add_exact(&mut fabric).is_err()
    });
    assert!(
        caught,
        "the atomics checks passed on a fabric whose CAS and fetch-add are not atomic"
    );
}
