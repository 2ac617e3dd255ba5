//! minhop on generated fabrics: every CA reaches every LID along a shortest path.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use sm_core::fabric::Fabric;
use sm_core::generate::{FatTree2, GenSpec, Grid, generate};
use sm_core::lid::LidStore;
use sm_routing::{Options, Topo, engine};

fn fabric(spec: &GenSpec, lmc: u8) -> Fabric {
    let mut f = generate(spec).unwrap();
    LidStore::new().assign(&mut f, lmc).unwrap();
    f
}

/// Walks the tables from every destination's switch set and checks shortest paths.
fn check_all_pairs(f: &Fabric) {
    let topo = Topo::new(f).unwrap();
    let routes = engine("minhop")
        .unwrap()
        .route(&topo, &Options::default())
        .unwrap();
    let hops = topo.hop_matrix();
    for d in &topo.dests {
        for lid in d.lids() {
            for s in 0..topo.num_switches() as u32 {
                let mut cur = sm_routing::SwIdx(s);
                let mut n = 0u32;
                loop {
                    let p = routes.port(cur, lid).expect("route");
                    if cur == d.sw {
                        assert_eq!(p, d.sw_port);
                        break;
                    }
                    let a = topo
                        .adj(cur)
                        .iter()
                        .find(|a| a.port == p)
                        .expect("port has a switch peer");
                    cur = a.peer;
                    n += 1;
                    assert!(n <= topo.num_switches() as u32, "loop");
                }
                assert_eq!(n, hops.get(sm_routing::SwIdx(s), d.sw) as u32);
            }
        }
    }
}

#[test]
fn fat_tree_and_torus() {
    check_all_pairs(&fabric(&GenSpec::FatTree2(FatTree2::new(8)), 0));
    check_all_pairs(&fabric(&GenSpec::FatTree2(FatTree2::new(8)), 2));
    check_all_pairs(&fabric(&GenSpec::Torus(Grid::new(vec![4, 3], 1)), 0));
}

#[test]
fn lmc_lids_spread_over_next_switches() {
    let f = fabric(&GenSpec::FatTree2(FatTree2::new(8)), 2);
    let topo = Topo::new(&f).unwrap();
    let routes = engine("minhop")
        .unwrap()
        .route(&topo, &Options::default())
        .unwrap();
    // A leaf forwards the 4 LIDs of a remote CA through 4 different spines.
    let leaf = topo
        .dests
        .iter()
        .find(|d| d.kind == sm_core::NodeKind::Ca)
        .unwrap()
        .sw;
    let remote = topo
        .dests
        .iter()
        .find(|d| d.kind == sm_core::NodeKind::Ca && d.sw != leaf)
        .unwrap();
    let ports: std::collections::BTreeSet<u8> = remote
        .lids()
        .map(|l| routes.port(leaf, l).unwrap())
        .collect();
    assert_eq!(ports.len(), 4, "{ports:?}");
}
