//! The whole conformance suite over the RDMA transport on the mock NIC.
mod common;

squall_transport::conformance_tests!(common::Mock::new());
