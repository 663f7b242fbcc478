//! The whole conformance suite over real loopback TCP, every node in this process.
mod common;

squall_transport::conformance_tests!(common::InProcess::new());
