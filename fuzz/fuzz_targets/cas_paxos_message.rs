//! CAS-Paxos's two-sided fallback messages: decoding arbitrary bytes never panics, and whatever
//! decodes re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_cas_paxos::rpc::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::decode(data) {
        assert_eq!(m.encode(), data);
    }
});
