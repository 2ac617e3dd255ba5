//! Fat-tree routing on full k-ary n-trees: with CAs indexed in leaf order, every shift
//! permutation (CA `i` sends to CA `i + c`) uses every link at most once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{fabric, has_credit_loop, walk};
use sm_core::NodeKind;
use sm_core::generate::{FatTree3, GenSpec, KaryNTree};
use sm_routing::{Options, Routes, Topo, engine};

/// Maximum load of any switch-to-switch link over all shift permutations.
fn max_shift_load(topo: &Topo<'_>, r: &Routes) -> usize {
    // CAs in generator (= leaf index) order.
    let cas: Vec<_> = topo
        .dests
        .iter()
        .filter(|d| d.kind == NodeKind::Ca)
        .collect();
    let n = cas.len();
    let mut off = vec![0usize; topo.num_switches() + 1];
    for s in 0..topo.num_switches() {
        off[s + 1] = off[s] + topo.adj(sm_routing::SwIdx(s as u32)).len();
    }
    let mut worst = 0;
    let mut load = vec![0usize; off[topo.num_switches()]];
    for c in 1..n {
        load.iter_mut().for_each(|l| *l = 0);
        for (i, src) in cas.iter().enumerate() {
            let dst = cas[(i + c) % n];
            for (s, link) in walk(topo, r, src.sw, dst.base_lid).unwrap() {
                load[off[s.idx()] + link] += 1;
            }
        }
        worst = worst.max(load.iter().copied().max().unwrap_or(0));
    }
    worst
}

fn ftree(spec: &GenSpec) -> (sm_core::fabric::Fabric, GenSpec) {
    (fabric(spec, 0), spec.clone())
}

#[test]
fn shift_permutations_are_contention_free_on_kary_n_trees() {
    for (k, levels) in [(2, 2), (3, 2), (4, 2), (2, 3), (3, 3)] {
        let (f, spec) = ftree(&GenSpec::KaryNTree(KaryNTree {
            radix: 2 * k,
            levels,
            ca_ports: 1,
        }));
        let topo = Topo::new(&f).unwrap();
        let r = engine("ftree")
            .unwrap()
            .route(&topo, &Options::default())
            .unwrap();
        assert_eq!(max_shift_load(&topo, &r), 1, "{spec:?}");
        assert!(!has_credit_loop(&topo, &r));
    }
}

#[test]
fn shift_permutations_on_a_full_3_level_tree() {
    // k = 2: 4 pods of 2 leaves, 2 hosts each.
    let (f, _) = ftree(&GenSpec::FatTree3(FatTree3::new(4)));
    let topo = Topo::new(&f).unwrap();
    let r = engine("ftree")
        .unwrap()
        .route(&topo, &Options::default())
        .unwrap();
    assert_eq!(max_shift_load(&topo, &r), 1);
}

#[test]
fn minhop_is_not_contention_free_where_ftree_is() {
    let (f, _) = ftree(&GenSpec::KaryNTree(KaryNTree {
        radix: 6,
        levels: 3,
        ca_ports: 1,
    }));
    let topo = Topo::new(&f).unwrap();
    let r = engine("minhop")
        .unwrap()
        .route(&topo, &Options::default())
        .unwrap();
    assert!(max_shift_load(&topo, &r) > 1);
}

#[test]
fn lmc_lids_of_a_port_take_different_roots() {
    let f = fabric(
        &GenSpec::KaryNTree(KaryNTree {
            radix: 4,
            levels: 2,
            ca_ports: 1,
        }),
        1,
    );
    let topo = Topo::new(&f).unwrap();
    let r = engine("ftree")
        .unwrap()
        .route(&topo, &Options::default())
        .unwrap();
    common::check_reach(&topo, &r);
    let d = topo.dests.iter().find(|d| d.kind == NodeKind::Ca).unwrap();
    let other_leaf = topo
        .dests
        .iter()
        .find(|x| x.kind == NodeKind::Ca && x.sw != d.sw)
        .unwrap()
        .sw;
    let ports: Vec<u8> = d.lids().map(|l| r.port(other_leaf, l).unwrap()).collect();
    assert_ne!(ports[0], ports[1]);
}
