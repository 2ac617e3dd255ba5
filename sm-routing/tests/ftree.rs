//! Fat-tree routing on full k-ary n-trees: with CAs indexed in leaf order, every shift
//! permutation (CA `i` sends to CA `i + c`) uses every link at most once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{fabric, has_credit_loop, walk};
use sm_core::NodeKind;
use sm_core::generate::{FatTree2, FatTree3, GenSpec, KaryNTree};
use sm_routing::{Options, Routes, Topo, ValidateOptions, engine, validate};

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

/// A radix-4 two-level tree (4 leaves of 2 CAs under 2 spines) with compute nodes on the
/// first 2 leaves only.
fn half_cn_tree() -> (sm_core::fabric::Fabric, Options) {
    let f = fabric(&GenSpec::FatTree2(FatTree2::new(4)), 0);
    let topo = Topo::new(&f).unwrap();
    let mut leaves = common::ca_switches(&topo);
    leaves.sort_by_key(|&s| topo.guid(s));
    assert_eq!(leaves.len(), 4);
    let cns = topo
        .dests
        .iter()
        .filter(|d| d.kind == NodeKind::Ca && leaves[..2].contains(&d.sw))
        .map(|d| d.guid)
        .collect();
    let opts = Options {
        compute_nodes: cns,
        ..Options::default()
    };
    (f, opts)
}

#[test]
fn leaves_without_compute_nodes_are_still_leaves() {
    let (f, opts) = half_cn_tree();
    let topo = Topo::new(&f).unwrap();
    // Taking the two leaves without compute nodes for roots left 12 pairs unreachable:
    // each root's 2 CAs to the other root's CAs and LID.
    let r = engine("ftree").unwrap().route(&topo, &opts).unwrap();
    let v = validate(&topo, &r, &ValidateOptions::default());
    assert_eq!(v.unreachable_pairs, 0, "{:?}", v.failures);
    assert_eq!(v.credit_loops, 0);
    common::check_reach(&topo, &r);
    // The spines are the roots, every CA's switch is a leaf.
    let tree = sm_routing::ftree::detect(&topo, &opts).unwrap();
    let mut roots = sm_routing::ftree::roots(&topo, &tree);
    roots.sort();
    let cas = common::ca_switches(&topo);
    let mut spines: Vec<_> = (0..topo.num_switches() as u32)
        .map(sm_routing::SwIdx)
        .filter(|s| !cas.contains(s))
        .map(|s| topo.guid(s))
        .collect();
    spines.sort();
    assert_eq!(roots, spines);
    assert_eq!(tree.leaf_rank, 1);
    // Multicast trees climb in the order ftree routes by.
    assert_eq!(
        sm_routing::TreeOrder::for_engine(&topo, "ftree", &opts).unwrap(),
        sm_routing::TreeOrder::Ranked(tree.rank)
    );
}

/// Compute nodes on any subset of the leaves (the other CAs are I/O nodes): ftree finds the
/// tree and leaves no pair unrouted, on 2- and 3-level trees.
#[test]
fn compute_nodes_on_any_leaves_route_every_pair() {
    let specs = [
        GenSpec::FatTree2(FatTree2::new(4)),
        GenSpec::FatTree3(FatTree3 {
            pods: Some(3),
            ..FatTree3::new(4)
        }),
    ];
    for spec in &specs {
        let f = fabric(spec, 0);
        let topo = Topo::new(&f).unwrap();
        let leaves = common::ca_switches(&topo);
        for set in 1u32..1 << leaves.len() {
            let cns: Vec<_> = topo
                .dests
                .iter()
                .filter(|d| {
                    d.kind == NodeKind::Ca
                        && leaves
                            .iter()
                            .position(|&l| l == d.sw)
                            .is_some_and(|i| set & 1 << i != 0)
                })
                .map(|d| d.guid)
                .collect();
            let opts = Options {
                compute_nodes: cns,
                ..Options::default()
            };
            let tree = sm_routing::ftree::detect(&topo, &opts).unwrap();
            for &l in &leaves {
                assert_eq!(tree.rank[l.idx()], tree.leaf_rank, "{spec:?} {set:#b}");
            }
            let r = engine("ftree").unwrap().route(&topo, &opts).unwrap();
            let v = validate(&topo, &r, &ValidateOptions::default());
            assert_eq!(
                v.unreachable_pairs, 0,
                "{spec:?} {set:#b}: {:?}",
                v.failures
            );
            assert_eq!(v.credit_loops, 0, "{spec:?} {set:#b}");
        }
    }
}

#[test]
fn a_switch_with_no_link_and_no_ca_does_not_stop_the_tree() {
    // What an SM keeps of a switch while it is away: the node, its LID, no link.
    let (mut f, _) = ftree(&GenSpec::FatTree3(FatTree3::new(4)));
    let spec = sm_core::fabric::NodeSpec {
        kind: NodeKind::Switch,
        guid: sm_mad::Guid(0x0002_00ff_0000_0001),
        system_guid: sm_mad::Guid(0x0002_00ff_0000_0001),
        description: "away".into(),
        num_ports: 4,
        vendor_id: 0,
        device_id: 0,
        revision: 0,
        enhanced_port0: false,
        port_guids: None,
    };
    let n = f.add_node(spec).unwrap();
    let p0 = f.port_of(n, 0).unwrap();
    let top = f.ports().iter().map(|p| p.lid.0).max().unwrap_or(0);
    f.port_mut(p0).lid = sm_mad::Lid(top + 1);
    let topo = Topo::new(&f).unwrap();
    let r = engine("ftree")
        .unwrap()
        .route(&topo, &Options::default())
        .expect("the tree is still a tree");
    // Every CA still reaches every CA, as fast as before.
    for d in topo.dests.iter().filter(|d| d.kind == NodeKind::Ca) {
        for s in common::ca_switches(&topo) {
            walk(&topo, &r, s, d.base_lid).unwrap();
        }
    }
    assert_eq!(max_shift_load(&topo, &r), 1);
}
