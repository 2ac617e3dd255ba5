//! The layered engine: on any connected topology every pair is delivered, no forwarding
//! loop, no credit loop on any virtual lane, within the VL budget; deterministic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use proptest::prelude::*;
use sm_core::generate::{Dragonfly, GenSpec, Grid, Random, remove_links};
use sm_routing::validate::VlFn;
use sm_routing::{Options, Routes, Topo, ValidateOptions, Validation, engine, validate};
use std::sync::Arc;
use support::generated;

fn layered(topo: &Topo<'_>, vls: u8) -> Routes {
    engine("layered")
        .unwrap()
        .route(
            topo,
            &Options {
                vl_budget: vls,
                ..Options::default()
            },
        )
        .unwrap()
}

/// Validation with each pair on the VL of its SL (the identity SL-to-VL map).
fn check(topo: &Topo<'_>, routes: &Routes) -> Validation {
    let sl = routes.sl.clone().expect("the layered engine gives SLs");
    let vl: Arc<VlFn> = Arc::new(move |src, lid| sl.get(src.sw, lid));
    validate(
        topo,
        routes,
        &ValidateOptions {
            vl: Some(vl),
            ..ValidateOptions::default()
        },
    )
}

fn assert_deadlock_free(v: &Validation, budget: u8, routes: &Routes) {
    assert_eq!(v.unreachable_pairs, 0, "{v}");
    assert_eq!(v.forwarding_loops, 0, "{v}");
    assert_eq!(v.credit_loops, 0, "{v}");
    assert!(
        routes.vls_used() <= budget,
        "{} > {budget}",
        routes.vls_used()
    );
    for g in &v.vls {
        assert!(g.vl < budget, "VL {} used with a budget of {budget}", g.vl);
    }
}

fn spec() -> impl Strategy<Value = GenSpec> {
    prop_oneof![
        (2u32..=24, 1u32..=2, 4u8..=10, any::<u64>()).prop_map(|(n, h, r, seed)| {
            GenSpec::Random(Random {
                switches: n,
                radix: u32::from(r),
                hosts_per_switch: h,
                links: None,
                seed,
                ca_ports: 1,
            })
        }),
        (prop::collection::vec(2u32..=6, 1..=3), 1u32..=2)
            .prop_map(|(d, h)| GenSpec::Torus(Grid::new(d, h))),
        (prop::collection::vec(2u32..=5, 1..=3), 1u32..=2)
            .prop_map(|(d, h)| GenSpec::Mesh(Grid::new(d, h))),
        (2u32..=6, 2u32..=4, 1u32..=2)
            .prop_map(|(g, a, p)| GenSpec::Dragonfly(Dragonfly::new(g, a, p))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_topology_is_routed_deadlock_free_within_the_budget(
        spec in spec(),
        lmc in 0u8..=1,
        budget in 1u8..=8,
        cut in 0.0f64..0.3,
        seed in any::<u64>(),
    ) {
        let mut f = generated(&spec, lmc);
        remove_links(&mut f, cut, seed);
        let topo = Topo::new(&f).unwrap();
        let routes = layered(&topo, budget);
        let v = check(&topo, &routes);
        prop_assert_eq!(v.unreachable_pairs, 0, "{}", v);
        prop_assert_eq!(v.forwarding_loops, 0, "{}", v);
        prop_assert_eq!(v.credit_loops, 0, "{}", v);
        prop_assert!(routes.vls_used() <= budget);
    }
}

#[test]
fn one_virtual_lane_is_enough_on_a_torus() {
    // Shortest paths on a torus need several layers (four here, two rings of five); with
    // one VL every tree is up*/down*.
    let f = generated(&GenSpec::Torus(Grid::new(vec![5, 5, 3], 1)), 0);
    let topo = Topo::new(&f).unwrap();
    for budget in [1, 2, 8] {
        let routes = layered(&topo, budget);
        assert_deadlock_free(&check(&topo, &routes), budget, &routes);
    }
    // Without the SLs (everything on one VL) the 8-VL tables would deadlock: the layers are
    // what makes them safe.
    let routes = layered(&topo, 8);
    assert!(routes.vls_used() > 1);
    let one_vl = ValidateOptions {
        vl: Some(std::sync::Arc::new(|_, _| 0)),
        ..ValidateOptions::default()
    };
    let flat = validate(&topo, &routes, &one_vl);
    assert!(flat.credit_loops > 0, "{flat}");
}

#[test]
fn tori_and_meshes_go_dimension_by_dimension_on_every_link_alike() {
    // (shape, VLs: two per ring of five or more, multiplied; a ring of four is two
    // single links and needs none).
    let cases = [
        (GenSpec::Torus(Grid::new(vec![6, 6, 6], 2)), 8, true),
        (GenSpec::Torus(Grid::new(vec![4, 4, 4], 1)), 1, true),
        (GenSpec::Torus(Grid::new(vec![7, 5], 2)), 4, false),
        (GenSpec::Torus(Grid::new(vec![3, 8], 1)), 2, false),
        (GenSpec::Mesh(Grid::new(vec![5, 4], 1)), 1, false),
    ];
    for (spec, vls, even) in cases {
        let f = generated(&spec, 0);
        let topo = Topo::new(&f).unwrap();
        let routes = layered(&topo, 8);
        let v = check(&topo, &routes);
        assert_deadlock_free(&v, 8, &routes);
        assert_eq!(routes.vls_used(), vls, "{spec:?}");
        assert_eq!(v.non_minimal_pairs, 0, "{spec:?}: {v}");
        if even {
            // A cube: every switch link carries the same number of flows.
            let a = sm_routing::metrics(&topo, &routes, &sm_routing::MetricsOptions::default())
                .all_to_all
                .switch_links;
            assert_eq!(a.max as f64, a.mean, "{spec:?}");
        }
    }
    // Too few VLs for the datelines: the general search, still deadlock-free.
    let f = generated(&GenSpec::Torus(Grid::new(vec![6, 6, 6], 1)), 0);
    let topo = Topo::new(&f).unwrap();
    // Switches' tables are made in parallel: the same on one thread.
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| layered(&topo, 8));
    assert_eq!(one, layered(&topo, 8));
    let routes = layered(&topo, 4);
    assert_deadlock_free(&check(&topo, &routes), 4, &routes);
}

#[test]
fn a_dragonfly_is_balanced_better_than_up_down() {
    let f = generated(&GenSpec::Dragonfly(Dragonfly::new(9, 4, 2)), 0);
    let topo = Topo::new(&f).unwrap();
    let routes = layered(&topo, 8);
    assert_deadlock_free(&check(&topo, &routes), 8, &routes);
    let updn = engine("updn")
        .unwrap()
        .route(&topo, &Options::default())
        .unwrap();
    let m = |r: &Routes| {
        sm_routing::metrics(&topo, r, &sm_routing::MetricsOptions::default())
            .all_to_all
            .switch_links
            .max
    };
    let (ours, theirs) = (m(&routes), m(&updn));
    assert!(ours < theirs, "layered max link load {ours}, updn {theirs}");
}

#[test]
fn the_same_input_gives_the_same_tables() {
    // Big enough that the trees are searched in parallel, and the next LID's tree
    // ahead of this one's layering.
    let mut f = generated(&GenSpec::Torus(Grid::new(vec![8, 8], 2)), 1);
    remove_links(&mut f, 0.1, 7);
    let topo = Topo::new(&f).unwrap();
    let pool = |n: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    let a = pool(2).install(|| layered(&topo, 4));
    let b = pool(1).install(|| layered(&topo, 4));
    assert_eq!(a, b);
    assert_eq!(a, layered(&topo, 4));
}

#[test]
fn a_budget_beyond_the_data_vls_is_refused() {
    let f = generated(&GenSpec::Torus(Grid::new(vec![3, 3], 1)), 0);
    let topo = Topo::new(&f).unwrap();
    let err = engine("layered")
        .unwrap()
        .route(
            &topo,
            &Options {
                vl_budget: 16,
                ..Options::default()
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("16 virtual lanes"), "{err}");
}

/// After links go down, the broken routes repaired as shortest paths and the changed
/// paths layered again (`relayer`): every pair is delivered with no credit loop on the
/// new SLs, every path that did not change keeps its SL, and the budget holds.
#[test]
fn repaired_paths_go_back_into_acyclic_layers_and_the_others_keep_their_sl() {
    use sm_routing::relayer::{Change, Deps, relayer};
    use sm_routing::repair::{Damage, repair};
    let spec = GenSpec::Dragonfly(Dragonfly::new(9, 4, 2));
    for seed in 0..6usize {
        let mut f = generated(&spec, 0);
        let before = {
            let topo = Topo::new(&f).unwrap();
            layered(&topo, 4)
        };
        let links: Vec<_> = f
            .links()
            .filter(|&(a, b)| {
                [a, b]
                    .iter()
                    .all(|&p| f.node(f.port(p).node).kind == sm_core::NodeKind::Switch)
            })
            .collect();
        let (a, b) = links[(seed * 7) % links.len()];
        let mut damage = Damage::default();
        damage.link_down(&Topo::new(&f).unwrap(), a, b);
        let whole = f.clone();
        f.disconnect(a);
        let topo = Topo::new(&f).unwrap();
        let out = repair(&topo, &sm_routing::Rule::Shortest, &before.lft, &damage).unwrap();
        assert!(!out.moved.is_empty(), "seed {seed}: nothing moved");
        let mut after = before.clone();
        for m in &out.moved {
            after.lft[m.switch.idx()][usize::from(m.lid.0)] = m.new;
        }
        let old = before.sl.clone().unwrap();
        let tables: Vec<&[u8]> = after.lft.iter().map(Vec::as_slice).collect();
        let changed: Vec<_> = out.moved.iter().map(|m| (m.switch, m.lid, true)).collect();
        let before_tables: Vec<&[u8]> = before.lft.iter().map(Vec::as_slice).collect();
        let before_topo = Topo::new(&whole).unwrap();
        let change = Change {
            topo: &topo,
            before_topo: &before_topo,
            before: &before_tables,
            tables: &tables,
            old: &old,
            first: &Default::default(),
            moved: &changed,
            budget: 4,
        };
        let mut deps = None;
        let r = relayer(&change, &mut deps).unwrap();
        for &(x, lid, port) in &r.rerouted {
            after.lft[x.idx()][usize::from(lid.0)] = port;
        }
        let (sl, placed) = (r.sl, r.placed);
        assert!(sl.max() < 4, "seed {seed}: over the budget");
        let moved_pairs: std::collections::BTreeSet<_> =
            placed.iter().map(|p| (p.switch, p.lid)).collect();
        for s in (0..topo.num_switches()).map(|i| sm_routing::SwIdx(i as u32)) {
            for d in &topo.dests {
                if !moved_pairs.contains(&(s, d.base_lid)) {
                    assert_eq!(
                        sl.get(s, d.base_lid),
                        old.get(s, d.base_lid),
                        "seed {seed}: a path not placed again changed its SL"
                    );
                }
            }
        }
        // The dependencies kept for the next repair are those of the new tables and SLs.
        let now: Vec<&[u8]> = after.lft.iter().map(Vec::as_slice).collect();
        let fresh = Deps::of(&topo, &now, &sl, 4).unwrap();
        assert!(deps == Some(fresh), "seed {seed}: kept dependencies differ");
        after.sl = Some(Arc::new(sl));
        let v = check(&topo, &after);
        assert_eq!(v.credit_loops, 0, "seed {seed}: {v}");
        assert_eq!(v.forwarding_loops, 0, "seed {seed}: {v}");
        assert!(v.failures.is_empty(), "seed {seed}: {v}");
    }
}
