//! The whole conformance suite on the threaded fabric.
mod common;

squall_transport::conformance_tests!(common::Threaded::new());
