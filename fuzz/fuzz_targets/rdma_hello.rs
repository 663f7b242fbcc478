//! The RDMA side channel's hello decoder, on arbitrary bytes: it must return an error, never
//! panic, and anything it accepts must re-encode to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_transport_rdma::exchange::Hello;

fuzz_target!(|data: &[u8]| {
    if let Ok(hello) = Hello::decode(data) {
        assert_eq!(hello.encode(), data);
    }
    let _ = Hello::read_from(&mut &data[..]);
});
