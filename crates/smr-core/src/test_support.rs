//! Mock-backend pieces shared by the unit tests of `core` and `runtime`.

/// Implements `TotalOrder` for `$t` as an ordering backend that orders nothing, for the tests
/// whose subject is the state transfer side: node `$me`, and `submit` answers `$submit`. With
/// `naps`, `wait` sleeps (at most 1 ms) as a backend driven by a replica's thread must, so that
/// the thread does not spin; without, it returns at once.
macro_rules! inert_order {
    ($t:ty, $me:expr, $submit:expr) => {
        inert_order!(@impl $t, $me, $submit, _t, {});
    };
    ($t:ty, $me:expr, $submit:expr, naps) => {
        inert_order!(@impl $t, $me, $submit, t, {
            std::thread::sleep(t.min(std::time::Duration::from_millis(1)));
        });
    };
    (@impl $t:ty, $me:expr, $submit:expr, $w:ident, $wait:block) => {
        impl squall_ordering::TotalOrder for $t {
            fn me(&self) -> squall_transport::NodeId {
                squall_transport::NodeId($me)
            }
            fn submit(&mut self, _: &[u8]) -> Result<(), squall_ordering::SubmitError> {
                $submit
            }
            fn poll(
                &mut self,
                _: &mut Vec<squall_ordering::Upcall<squall_ordering::Delivery>>,
            ) -> bool {
                false
            }
            fn wait(&mut self, $w: std::time::Duration) $wait
            fn waker(&self) -> squall_transport::Waker {
                squall_transport::Waker::noop()
            }
        }
    };
}

/// The `StateTransfer` methods of a backend that holds its state and has no transfer under
/// way: it wants no state, accepts any it is given, and hands none over. Used inside an
/// `impl StateTransfer` block, beside the methods the test overrides.
macro_rules! holds_state_no_transfer {
    () => {
        fn holds_state(&self) -> bool {
            true
        }
        fn state_wanted(&self) -> bool {
            false
        }
        fn provide_state(&mut self, _: u64, _: &[u8]) -> Result<(), TransferError> {
            Ok(())
        }
        fn take_state(&mut self) -> Option<(u64, Vec<u8>)> {
            None
        }
    };
}
