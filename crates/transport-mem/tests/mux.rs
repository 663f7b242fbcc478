//! Several cores sharing one endpoint through `squall_transport::mux`.
use squall_transport::conformance::drain;
use squall_transport::mux::Mux;
use squall_transport::{Event, FailureCause, NodeId, RegionId, RegionSpec, RemoteAddr, Transport};
use squall_transport_mem::sim::{Sim, SimConfig};

const R: RegionId = RegionId(0);

#[test]
fn completions_reach_their_poster_and_failures_reach_everyone() {
    let (sim, mut nodes) =
        Sim::cluster(SimConfig::seeded(3), 2, &[RegionSpec::new(R, 64)]).expect("valid");
    let _peer = nodes.pop();
    let mux = Mux::new(nodes.pop().expect("two nodes"), &[R]);
    let (mut a, mut b) = (mux.handle(), mux.handle());
    assert!(
        a.region(R).is_some(),
        "exposed regions are reachable through every handle"
    );
    let op_a = a
        .fetch_add(NodeId(1), RemoteAddr::new(R, 0), 1)
        .expect("valid");
    let op_b = b
        .fetch_add(NodeId(1), RemoteAddr::new(R, 0), 1)
        .expect("valid");
    sim.run_until_idle(100);
    let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
    drain(&mut a, |e| seen_a.push(e));
    drain(&mut b, |e| seen_b.push(e));
    assert!(
        matches!(seen_a.as_slice(), [Event::Completion(c)] if c.op == op_a),
        "{seen_a:?}"
    );
    assert!(
        matches!(seen_b.as_slice(), [Event::Completion(c)] if c.op == op_b),
        "{seen_b:?}"
    );
    a.report_failed(NodeId(1));
    let (mut fa, mut fb) = (Vec::new(), Vec::new());
    drain(&mut a, |e| fa.push(e));
    drain(&mut b, |e| fb.push(e));
    let failed = Event::PeerFailed {
        peer: NodeId(1),
        cause: FailureCause::Local,
    };
    assert_eq!(fa, vec![failed]);
    assert_eq!(fb, vec![failed]);
}
