//! Properties of validation and metrics over generated fabrics of every family routed
//! with minhop, and over arbitrary tables.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use proptest::prelude::*;
use sm_core::generate::{
    Dragonfly, DragonflyPlus, FatTree2, FatTree3, GenSpec, Grid, KaryNTree, Random,
};
use sm_routing::{
    MetricsOptions, Options, Routes, Topo, ValidateOptions, engine, metrics, validate,
};
use support::generated;

fn spec() -> impl Strategy<Value = GenSpec> {
    prop_oneof![
        prop::sample::select(vec![4u32, 6, 8]).prop_map(|r| GenSpec::FatTree2(FatTree2::new(r))),
        (1u32..=4).prop_map(|pods| GenSpec::FatTree3(FatTree3 {
            pods: Some(pods),
            ..FatTree3::new(4)
        })),
        (2u32..=3, prop::sample::select(vec![4u32, 6])).prop_map(|(levels, radix)| {
            GenSpec::KaryNTree(KaryNTree {
                radix,
                levels,
                ca_ports: 1,
            })
        }),
        (prop::collection::vec(2u32..=4, 1..=2), 1u32..=2)
            .prop_map(|(d, h)| GenSpec::Torus(Grid::new(d, h))),
        (prop::collection::vec(2u32..=4, 1..=2), 1u32..=2)
            .prop_map(|(d, h)| GenSpec::Mesh(Grid::new(d, h))),
        (2u32..=5, 2u32..=3, 1u32..=2)
            .prop_map(|(g, a, p)| GenSpec::Dragonfly(Dragonfly::new(g, a, p))),
        (2u32..=4, 1u32..=3, 1u32..=2, 1u32..=2).prop_map(|(g, l, s, p)| {
            GenSpec::DragonflyPlus(DragonflyPlus {
                groups: g,
                leaves_per_group: l,
                spines_per_group: s,
                hosts_per_leaf: p,
                global_per_spine: (g - 1).div_ceil(s).max(1),
                radix: None,
                ca_ports: 1,
            })
        }),
        (2u32..=10, 1u32..=2, any::<u64>()).prop_map(|(n, h, seed)| GenSpec::Random(Random {
            switches: n,
            radix: 6,
            hosts_per_switch: h,
            links: None,
            seed,
            ca_ports: 1,
        })),
    ]
}

fn is_tree(s: &GenSpec) -> bool {
    matches!(
        s,
        GenSpec::FatTree2(_) | GenSpec::FatTree3(_) | GenSpec::KaryNTree(_)
    )
}

fn small() -> MetricsOptions {
    MetricsOptions {
        max_shifts: 8,
        bisections: 4,
        ..MetricsOptions::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn minhop_tables_are_valid_and_minimal(spec in spec(), lmc in 0u8..=1) {
        let f = generated(&spec, lmc);
        let topo = Topo::new(&f).unwrap();
        let routes = engine("minhop").unwrap().route(&topo, &Options::default()).unwrap();
        let v = validate(&topo, &routes, &ValidateOptions::default());
        prop_assert_eq!(v.unreachable_pairs, 0, "{}", v);
        prop_assert_eq!(v.forwarding_loops, 0);
        prop_assert_eq!(v.non_minimal_pairs, 0, "{}", v);
        prop_assert_eq!(v.stale_lid_count, 0);
        let cas = v.sources as u64;
        let lids_per_ca = 1u64 << lmc;
        prop_assert_eq!(v.ca_to_ca_pairs, cas * (cas - 1) * lids_per_ca);
        prop_assert_eq!(v.ca_to_switch_pairs, cas * v.switches as u64);
        if is_tree(&spec) {
            // Shortest paths in these trees go up then down: no credit loop.
            prop_assert_eq!(v.credit_loops, 0, "{}", v);
        }

        let m = metrics(&topo, &routes, &small());
        prop_assert_eq!(m.hops.unrouted_pairs, 0);
        prop_assert_eq!(m.hops.pairs, cas * (cas - 1));
        let links: u64 = m.hops.histogram.iter().enumerate()
            .map(|(k, c)| (k as u64 - 2.min(k as u64)) * c).sum();
        prop_assert_eq!(m.all_to_all.switch_links.total, links);
        prop_assert_eq!(m.all_to_all.ca_links.total, m.hops.pairs);
        // Minimal routes: the hop histogram is the distance histogram.
        let hm = topo.hop_matrix();
        let src: Vec<_> = topo.dests.iter().filter(|d| d.kind != sm_core::NodeKind::Switch).collect();
        let mut hist = vec![0u64; m.hops.histogram.len()];
        for a in &src {
            for b in &src {
                if a.port != b.port {
                    hist[hm.get(a.sw, b.sw) as usize + 2] += 1;
                }
            }
        }
        prop_assert_eq!(&hist, &m.hops.histogram);
        if let Some(b) = &m.bisection {
            prop_assert!(b.ebb > 0.0 && b.ebb <= 1.0);
        }
        if lmc > 0 && cas > 1 && v.switches > 1 {
            let d = m.diversity.as_ref().unwrap();
            prop_assert!(d.min_paths >= 1 && d.mean_paths <= 2.0);
        }
    }

    #[test]
    fn arbitrary_tables_never_panic(spec in spec(), seed in any::<u64>(), density in 0u8..=255) {
        let f = generated(&spec, 0);
        let topo = Topo::new(&f).unwrap();
        let mut routes = Routes::empty("random", &topo);
        let mut rng = sm_core::generate::SplitMix64::new(seed);
        for row in &mut routes.lft {
            // Some tables longer than the LID space in use, some shorter.
            let len = (row.len() as u64 + rng.below(8)).saturating_sub(4) as usize;
            row.resize(len, sm_core::dump::NO_ROUTE);
            for e in row.iter_mut() {
                if (rng.next_u64() & 0xff) < density as u64 {
                    *e = rng.below(12) as u8;
                }
            }
        }
        let v = validate(&topo, &routes, &ValidateOptions::default());
        let f = &v.by_fate;
        prop_assert_eq!(
            f.delivered + f.no_entry + f.bad_port + f.not_cabled + f.wrong_end_port
                + f.not_owner + f.forwarding_loop,
            v.pairs_checked
        );
        prop_assert_eq!(v.pairs_checked - f.delivered, v.unreachable_pairs);
        prop_assert!(v.failures.len() as u64 <= v.unreachable_pairs);
        let m = metrics(&topo, &routes, &small());
        prop_assert_eq!(m.hops.histogram.iter().sum::<u64>() + m.hops.unrouted_pairs, m.hops.pairs);
    }
}

/// The reports do not depend on the number of threads.
#[test]
fn results_do_not_depend_on_thread_count() {
    let specs = [
        GenSpec::FatTree2(FatTree2::new(8)),
        GenSpec::Torus(Grid::new(vec![4, 4], 2)),
    ];
    for spec in specs {
        let f = generated(&spec, 1);
        let topo = Topo::new(&f).unwrap();
        let routes = engine("minhop")
            .unwrap()
            .route(&topo, &Options::default())
            .unwrap();
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    let v = validate(&topo, &routes, &ValidateOptions::default());
                    let m = metrics(&topo, &routes, &MetricsOptions::default());
                    (
                        serde_json::to_string(&v).unwrap(),
                        serde_json::to_string(&m).unwrap(),
                    )
                })
        };
        let one = run(1);
        assert_eq!(one, run(3));
        assert_eq!(one, run(8));
    }
}

/// The SM keeps its tables in chunks ([`sm_core::lft::LftTable`]); validating them there
/// gives the report validating the engine's rows gives, across chunk boundaries (1,344
/// LIDs) and with a broken entry in one table.
#[test]
fn chunked_tables_validate_as_rows() {
    let f = generated(&GenSpec::FatTree3(FatTree3::new(16)), 0);
    let topo = Topo::new(&f).unwrap();
    let mut routes = engine("minhop")
        .unwrap()
        .route(&topo, &Options::default())
        .unwrap();
    assert!(routes.lft[0].len() > 1024);
    routes.lft[3][1100] = 255;
    let chunked: Vec<sm_core::lft::LftTable> = routes
        .lft
        .iter()
        .map(|t| sm_core::lft::LftTable::from_slice(t))
        .collect();
    let opts = ValidateOptions::default();
    let rows = validate(&topo, &routes, &opts);
    let tables = sm_routing::validate_tables(
        &topo,
        sm_routing::Tables::Chunked(&chunked),
        routes.sl.as_ref(),
        routes.engine,
        &opts,
    );
    assert!(rows.unreachable_pairs > 0);
    assert_eq!(
        serde_json::to_string(&rows).unwrap(),
        serde_json::to_string(&tables).unwrap()
    );
}
