//! The whole conformance suite over real RDMA hardware, and the no-device path of `VerbsNic`.
//!
//! The suite runs when `SQUALL_RDMA_DEVICE` names a device (`ibv_devices` lists them), with
//! `SQUALL_RDMA_PORT` (default 1) and `SQUALL_RDMA_GID_INDEX` (default 0; on RoCE v2 pick the
//! RoCE v2 entry with the interface's address, `show_gids`). All three nodes live in this process
//! on that one device, connected through loopback side channels. Without the variable it prints
//! why it skipped; the suite runs on the mock provider in `conformance_mock.rs` either way.
//!
//! ```text
//! SQUALL_RDMA_DEVICE=mlx5_0 SQUALL_RDMA_GID_INDEX=3 \
//!     cargo nextest run -p squall-transport-rdma --features verbs --test hardware --no-capture
//! ```
#![cfg(feature = "verbs")]

mod common;

use std::time::Duration;

use squall_transport::conformance::{Fabric, Slot, Stalled, run_all, run_on_threads};
use squall_transport::{NodeId, RegionSpec, Transport};
use squall_transport_rdma::{ErrorInjector, ProviderError, RdmaConfig, RdmaNode, VerbsNic};

const DEVICE_VAR: &str = "SQUALL_RDMA_DEVICE";

fn device() -> Option<String> {
    std::env::var(DEVICE_VAR)
        .ok()
        .filter(|d| !d.trim().is_empty())
}

fn env_u8(name: &str, default: u8) -> u8 {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number from 0 to 255")),
        Err(_) => default,
    }
}

fn hardware_config(device: &str) -> RdmaConfig {
    RdmaConfig {
        device: Some(device.to_owned()),
        port: env_u8("SQUALL_RDMA_PORT", 1),
        gid_index: env_u8("SQUALL_RDMA_GID_INDEX", 0),
        // 4.096 us x 2^12 = 16.8 ms per try, 4 tries: about 67 ms before retry-exceeded.
        retry_timeout_exp: 12,
        retry_count: 3,
        ..common::config()
    }
}

/// A cluster on one real device: every node opens its own context, protection domain,
/// completion queue and queue pairs, as separate processes would.
struct Hardware {
    cfg: RdmaConfig,
    injectors: Vec<ErrorInjector>,
}

impl Fabric for Hardware {
    type Node = RdmaNode<VerbsNic>;

    fn name(&self) -> String {
        format!(
            "rdma-verbs({})",
            self.cfg.device.as_deref().unwrap_or("first device")
        )
    }

    fn build(&mut self, n: usize, layout: &[RegionSpec]) -> Vec<Self::Node> {
        let (listeners, addrs) = common::listeners(n);
        let nics: Vec<VerbsNic> = (0..n)
            .map(|_| VerbsNic::open(&self.cfg).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        self.injectors = nics.iter().map(VerbsNic::error_injector).collect();
        let cfg = &self.cfg;
        std::thread::scope(|s| {
            let handles: Vec<_> = nics
                .into_iter()
                .zip(listeners)
                .enumerate()
                .map(|(i, (nic, l))| {
                    let addrs = &addrs;
                    s.spawn(move || {
                        RdmaNode::connect_on(l, cfg.clone(), nic, NodeId(i as u32), addrs, layout)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .expect("no panic")
                        .unwrap_or_else(|e| panic!("connect: {e}"))
                })
                .collect()
        })
    }

    fn run(
        &mut self,
        nodes: &mut [Self::Node],
        programs: Vec<Slot<'_, Self::Node>>,
    ) -> Result<(), Stalled> {
        run_on_threads(nodes, programs, Duration::from_secs(30))
    }

    /// Every queue pair of the victim, on both sides of each of its links, goes to the error
    /// state: the victim's own at once (it stops applying anything), the survivors' at their
    /// NIC's next call, so they learn of it from flushed completions.
    fn crash(&mut self, nodes: &mut [Self::Node], victim: NodeId) {
        let peers: Vec<NodeId> = nodes
            .iter()
            .map(Transport::local_id)
            .filter(|&p| p != victim)
            .collect();
        if let Some(v) = nodes.iter_mut().find(|n| n.local_id() == victim) {
            for &p in &peers {
                // The victim's program never runs again; its own report is never read.
                v.report_failed(p);
            }
        }
        for &p in &peers {
            if let Some(inj) = self.injectors.get(p.0 as usize) {
                inj.set_error(victim);
            }
        }
    }

    /// A real fabric cannot be cut from inside the process.
    fn partition(&mut self, _nodes: &mut [Self::Node], _a: NodeId, _b: NodeId) -> bool {
        false
    }

    /// The NIC may wait up to four times the nominal timeout per try (InfiniBand spec).
    fn timeout(&self) -> Duration {
        self.cfg.op_timeout() * 4
    }
}

#[test]
fn conformance_on_hardware() {
    let Some(dev) = device() else {
        println!(
            "skipped: {DEVICE_VAR} is not set (no RDMA hardware); the conformance suite ran on \
             the mock provider instead (tests/conformance_mock.rs)"
        );
        return;
    };
    let mut fabric = Hardware {
        cfg: hardware_config(&dev),
        injectors: Vec::new(),
    };
    let results = run_all(&mut fabric);
    let mut failed = Vec::new();
    for (name, r) in &results {
        match r {
            Ok(()) => println!("ok: {name} on {}", fabric.name()),
            Err(v) => {
                println!("FAILED: {v}");
                failed.push(*name);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "conformance checks failed on {}: {failed:?}",
        fabric.name()
    );
}

fn assert_names_what_is_missing(msg: &str) {
    let named = [
        "no RDMA device found",
        "kernel has no RDMA support",
        "libibverbs is not installed",
        "does not exist",
        "device list could not be read",
    ];
    assert!(
        named.iter().any(|n| msg.contains(n)),
        "the message does not say what is missing: {msg}"
    );
    assert!(
        msg.contains("squall-transport-tcp"),
        "the message does not point to the TCP transport: {msg}"
    );
}

#[test]
fn open_without_a_device_says_what_is_missing() {
    match VerbsNic::open(&RdmaConfig::default()) {
        Err(ProviderError::NoDevice(msg)) => {
            assert_names_what_is_missing(&msg);
            println!("no RDMA device here, as expected: {msg}");
        }
        Ok(nic) => println!(
            "skipped: an RDMA device exists here ({}); the no-device path cannot be checked",
            nic.device_name()
        ),
        Err(other) => println!(
            "skipped: an RDMA device exists here but cannot be used with the defaults ({other})"
        ),
    }
}

#[test]
fn open_of_a_missing_named_device_says_what_is_missing() {
    let cfg = RdmaConfig {
        device: Some("squall-no-such-device".into()),
        ..RdmaConfig::default()
    };
    match VerbsNic::open(&cfg) {
        Err(ProviderError::NoDevice(msg)) => {
            assert_names_what_is_missing(&msg);
            println!("{msg}");
        }
        Ok(nic) => panic!(
            "opened {} when asked for a device that does not exist",
            nic.device_name()
        ),
        Err(other) => panic!("expected NoDevice, got {other:?}"),
    }
}
