//! The side-channel decoder never panics and round-trips what the encoder writes.
use proptest::prelude::*;
use squall_transport::{NodeId, RegionId};
use squall_transport_rdma::exchange::{Hello, RemoteRegion};
use squall_transport_rdma::provider::{MemoryKeys, QpEndpoint};

fn hello() -> impl Strategy<Value = Hello> {
    let keys =
        (any::<u64>(), any::<u64>(), any::<u32>()).prop_map(|(addr, len, rkey)| MemoryKeys {
            addr,
            len,
            lkey: 0,
            rkey,
        });
    (
        any::<u64>(),
        any::<u32>(),
        any::<(u32, u32, u16)>(),
        any::<[u8; 16]>(),
        keys.clone(),
        proptest::collection::vec((any::<u32>(), keys), 0..20),
    )
        .prop_map(
            |(cluster_id, node, (qp_number, psn, lid), gid, control, regions)| Hello {
                cluster_id,
                node: NodeId(node),
                qp: QpEndpoint {
                    qp_number,
                    psn,
                    lid,
                    gid,
                },
                control,
                regions: regions
                    .into_iter()
                    .map(|(id, keys)| RemoteRegion {
                        id: RegionId(id),
                        keys,
                    })
                    .collect(),
            },
        )
}

proptest! {
    #[test]
    fn round_trips(h in hello()) {
        prop_assert_eq!(Hello::decode(&h.encode()), Ok(h));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = Hello::decode(&bytes);
        let _ = Hello::read_from(&mut bytes.as_slice());
    }

    #[test]
    fn every_truncation_and_corruption_is_an_error(h in hello(), cut in any::<usize>(), flip in any::<(usize, u8)>()) {
        let bytes = h.encode();
        let cut = cut % bytes.len();
        prop_assert!(Hello::decode(&bytes[..cut]).is_err());
        let mut corrupt = bytes.clone();
        let at = flip.0 % 6; // magic and version
        corrupt[at] ^= flip.1.max(1);
        prop_assert!(Hello::decode(&corrupt).is_err());
    }
}

#[test]
fn oversized_length_is_refused_before_allocating() {
    let mut framed = (u32::MAX).to_le_bytes().to_vec();
    framed.extend_from_slice(&[0; 16]);
    let err = Hello::read_from(&mut framed.as_slice()).expect_err("refused");
    assert!(err.to_string().contains("exceeds"), "{err}");
}
