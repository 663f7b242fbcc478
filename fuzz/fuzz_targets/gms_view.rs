//! Fuzzes the membership table's view block decoder (`View::decode`, what a joiner reads from
//! its peers' rows): whatever the words, it never panics, and a view it accepts re-encodes to a
//! block that decodes to the same view.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_membership::view::{ShardLayout, SubgroupPolicy, Subgroups, View};

fuzz_target!(|data: &[u8]| {
    let shape = Subgroups::new(vec![
        SubgroupPolicy::even_shards(1, 2, 3),
        SubgroupPolicy::fixed_even_shards(2, 2),
    ])
    .shape();
    let words: Vec<u64> = data
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();
    if let Ok(v) = View::decode(&words, &shape, None) {
        assert_eq!(View::decode(&v.encode(), &shape, None), Ok(v));
    }
});
