//! minhop, updn and ftree on hand-made and generated fabrics: every switch with CAs reaches
//! every LID without loops, up/down and fat-tree routes have no credit loop, the chain falls
//! back with a reason, adaptive groups follow the rules, and results do not depend on the
//! thread count.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{check_ar, check_reach, fabric, has_credit_loop, walk};
use proptest::prelude::*;
use sm_core::NodeKind;
use sm_core::fabric::{Fabric, NodeSpec};
use sm_core::generate::{
    Dragonfly, DragonflyPlus, FatTree2, FatTree3, GenSpec, Grid, KaryNTree, Random,
};
use sm_core::lid::LidStore;
use sm_mad::Guid;
use sm_routing::{
    Options, RouteError, Routes, SwIdx, Topo, ValidateOptions, engine, route_chain, validate,
};

fn route(name: &str, topo: &Topo<'_>, adaptive: bool) -> Result<Routes, RouteError> {
    let opts = Options {
        adaptive,
        ..Options::default()
    };
    engine(name).unwrap().route(topo, &opts)
}

/// A 3-level fat-tree of `radix`-port switches with `pods` pods.
fn fat_tree3(radix: u32, pods: u32) -> GenSpec {
    GenSpec::FatTree3(FatTree3 {
        pods: Some(pods),
        ..FatTree3::new(radix)
    })
}

/// A ring of `n` switches, one CA each.
fn ring(n: u32) -> Fabric {
    let mut f = Fabric::new();
    let mut sw = Vec::new();
    for i in 0..n {
        let ca = f
            .add_node(NodeSpec::new(
                NodeKind::Ca,
                Guid(0x100 + u64::from(i)),
                format!("ca {i}"),
                1,
            ))
            .unwrap();
        let s = f
            .add_node(NodeSpec::new(
                NodeKind::Switch,
                Guid(0x200 + u64::from(i)),
                format!("sw {i}"),
                3,
            ))
            .unwrap();
        f.connect(f.port_of(ca, 1).unwrap(), f.port_of(s, 1).unwrap())
            .unwrap();
        sw.push(s);
    }
    for i in 0..n as usize {
        let j = (i + 1) % n as usize;
        f.connect(f.port_of(sw[i], 2).unwrap(), f.port_of(sw[j], 3).unwrap())
            .unwrap();
    }
    LidStore::new().assign(&mut f, 0).unwrap();
    f
}

#[test]
fn ring_updn_has_no_credit_loop_but_minhop_does() {
    let f = ring(6);
    let topo = Topo::new(&f).unwrap();
    let minhop = route("minhop", &topo, false).unwrap();
    check_reach(&topo, &minhop);
    assert!(
        has_credit_loop(&topo, &minhop),
        "the cycle check should see minhop's ring loop"
    );
    let updn = route("updn", &topo, true).unwrap();
    check_reach(&topo, &updn);
    assert!(!has_credit_loop(&topo, &updn));
    check_ar(&topo, &updn);
    // A ring is no fat-tree: every switch has a CA.
    let err = route("ftree", &topo, false).unwrap_err();
    assert!(matches!(err, RouteError::NotApplicable { .. }), "{err}");
}

#[test]
fn updn_roots_from_options() {
    let f = ring(5);
    let topo = Topo::new(&f).unwrap();
    let ranking = sm_routing::updn::ranking(&topo, &[Guid(0x202)]).unwrap();
    assert_eq!(ranking.roots, vec![SwIdx(2)]);
    assert_eq!(ranking.rank[2], 0);
    let opts = Options {
        roots: vec![Guid(0x202), Guid(0xdead)],
        ..Options::default()
    };
    let r = engine("updn").unwrap().route(&topo, &opts).unwrap();
    check_reach(&topo, &r);
    assert!(!has_credit_loop(&topo, &r));
    let opts = Options {
        roots: vec![Guid(0xdead)],
        ..Options::default()
    };
    let err = engine("updn").unwrap().route(&topo, &opts).unwrap_err();
    assert!(
        err.to_string().contains("none of the 1 root GUID(s)"),
        "{err}"
    );
}

#[test]
fn updn_auto_roots_are_the_tree_top() {
    let f = fabric(&fat_tree3(4, 2), 0);
    let topo = Topo::new(&f).unwrap();
    let ranking = sm_routing::updn::ranking(&topo, &[]).unwrap();
    assert_eq!(ranking.source, sm_routing::updn::RootSource::TreeTop);
    assert!(
        ranking
            .roots
            .iter()
            .all(|&s| topo.guid(s).0 >> 32 & 0xffff == 3),
        "cores"
    );
    assert_eq!(ranking.roots.len(), 4);
}

#[test]
fn chain_on_torus_uses_updn_and_names_the_ftree_reason() {
    let f = fabric(&GenSpec::Torus(Grid::new(vec![4, 3], 1)), 0);
    let topo = Topo::new(&f).unwrap();
    let r = route_chain("ftree,updn,minhop", &topo, &Options::default()).unwrap();
    assert_eq!(r.routes.engine, "updn");
    assert_eq!(r.fallbacks.len(), 1);
    assert_eq!(r.fallbacks[0].engine, "ftree");
    assert!(
        r.fallbacks[0].reason.contains("every switch has CAs"),
        "{}",
        r.fallbacks[0].reason
    );
    check_reach(&topo, &r.routes);
    assert!(!has_credit_loop(&topo, &r.routes));
}

#[test]
fn ftree_reasons_name_the_culprit() {
    // A CA on a spine of a 2-level tree.
    let mut f = generate_ft2(4);
    let spine = f
        .switches()
        .find(|&n| f.node(n).description == "spine 0")
        .unwrap();
    let ca = f
        .add_node(NodeSpec::new(NodeKind::Ca, Guid(0x77_0000), "stray", 1))
        .unwrap();
    let free = f.port_of(spine, 4).unwrap();
    assert!(f.port(free).remote.is_none());
    f.connect(f.port_of(ca, 1).unwrap(), free).unwrap();
    LidStore::new().assign(&mut f, 0).unwrap();
    let topo = Topo::new(&f).unwrap();
    let err = route("ftree", &topo, false).unwrap_err().to_string();
    assert!(
        err.contains("0x0000000000770001") && err.contains("not a leaf"),
        "{err}"
    );
    // With compute nodes given, the stray CA is an I/O node. From a root it cannot reach
    // the other root's LID going up then down: that switch LID is left unrouted (management
    // traffic only, as OpenSM leaves it), every CA pair is routed, and the verdict holds.
    let cns: Vec<Guid> = topo
        .dests
        .iter()
        .filter(|d| d.kind == NodeKind::Ca && d.guid != Guid(0x77_0001))
        .map(|d| d.guid)
        .collect();
    let opts = Options {
        compute_nodes: cns,
        ..Options::default()
    };
    let r = engine("ftree").unwrap().route(&topo, &opts).unwrap();
    let v = validate(&topo, &r, &ValidateOptions::default());
    assert!(v.unrouted_switch_pairs > 0, "{v}");
    assert_eq!(
        v.unreachable_pairs, v.unrouted_switch_pairs,
        "{:?}",
        v.failures
    );
    assert!(v.failures.iter().all(|f| f.dest != Guid(0x77_0000)));
    assert!(v.is_valid());
    assert!(!has_credit_loop(&topo, &r));
    // A CA that cannot reach another CA going up then down: ftree declines, naming them,
    // and the chain moves on.
    let mut g = generate_ft2(4);
    let spine1 = g
        .switches()
        .find(|&n| g.node(n).description == "spine 1")
        .unwrap();
    for i in 0..2u64 {
        let ca = g
            .add_node(NodeSpec::new(
                NodeKind::Ca,
                Guid(0x78_0000 + i * 0x100),
                format!("stray {i}"),
                1,
            ))
            .unwrap();
        let spine = if i == 0 { spine } else { spine1 };
        let free = g.port_of(spine, 4).unwrap();
        assert!(g.port(free).remote.is_none());
        g.connect(g.port_of(ca, 1).unwrap(), free).unwrap();
    }
    LidStore::new().assign(&mut g, 0).unwrap();
    let topo = Topo::new(&g).unwrap();
    let cns: Vec<Guid> = topo
        .dests
        .iter()
        .filter(|d| d.kind == NodeKind::Ca && d.guid.0 & 0xff_0000 != 0x78_0000)
        .map(|d| d.guid)
        .collect();
    let opts = Options {
        compute_nodes: cns,
        ..Options::default()
    };
    let err = engine("ftree")
        .unwrap()
        .route(&topo, &opts)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("(with CAs) has no up-then-down path to switch"),
        "{err}"
    );
    let r = route_chain("ftree,updn", &topo, &opts).unwrap();
    assert_eq!(r.routes.engine, "updn");
    let v = validate(&topo, &r.routes, &ValidateOptions::default());
    assert_eq!(v.unreachable_pairs, 0, "{:?}", v.failures);
    assert!(!has_credit_loop(&topo, &r.routes));
}

/// A 2-level tree with 3 leaves, so every spine has a free port.
fn generate_ft2(radix: u32) -> Fabric {
    let spec = FatTree2 {
        leaves: Some(3),
        ..FatTree2::new(radix)
    };
    sm_core::generate::generate(&GenSpec::FatTree2(spec)).unwrap()
}

#[test]
fn ftree_declines_dragonfly_plus_with_no_common_ancestor() {
    let spec = GenSpec::DragonflyPlus(DragonflyPlus {
        groups: 3,
        leaves_per_group: 2,
        spines_per_group: 2,
        hosts_per_leaf: 2,
        global_per_spine: 1,
        radix: None,
        ca_ports: 1,
    });
    let f = fabric(&spec, 0);
    let topo = Topo::new(&f).unwrap();
    let err = route("ftree", &topo, false).unwrap_err().to_string();
    assert!(err.contains("no common ancestor"), "{err}");
}

#[test]
fn same_tables_with_one_or_two_threads() {
    let specs = [
        fat_tree3(8, 4),
        GenSpec::Random(Random {
            switches: 40,
            radix: 8,
            hosts_per_switch: 2,
            links: None,
            seed: 7,
            ca_ports: 1,
        }),
    ];
    for spec in &specs {
        let f = fabric(spec, 1);
        let topo = Topo::new(&f).unwrap();
        for name in ["minhop", "updn", "ftree"] {
            let run = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                pool.install(|| route(name, &topo, true))
            };
            let (a, b) = (run(1), run(2));
            assert_eq!(a.is_ok(), b.is_ok(), "{name}");
            if let (Ok(a), Ok(b)) = (a, b) {
                assert_eq!(a, b, "{name} on {}", spec.family());
            }
        }
    }
}

#[test]
fn ar_dump_formats() {
    let f = fabric(&GenSpec::FatTree2(FatTree2::new(4)), 0);
    let topo = Topo::new(&f).unwrap();
    let r = route("ftree", &topo, true).unwrap();
    let mut text = Vec::new();
    sm_routing::ar::write_ar(&r, &topo, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("# ibsm adaptive-routing hints, engine ftree")
    );
    assert_eq!(lines.next(), Some("Switch 0x0002000100000000 ('leaf 0')"));
    assert_eq!(lines.next(), Some("group 0: 3 4"));
    let lid_line = lines.next().unwrap();
    let parts: Vec<&str> = lid_line.split(' ').collect();
    assert_eq!(parts.len(), 3, "{lid_line}");
    assert!(parts[0].starts_with("0x"));
    assert_eq!(parts[2], "0");
    let json = serde_json::to_value(sm_routing::ar::ArDump::new(&r, &topo)).unwrap();
    assert_eq!(json["engine"], "ftree");
    assert_eq!(json["switches"][0]["guid"], "0x0002000100000000");
    assert_eq!(json["switches"][0]["groups"][0], serde_json::json!([3, 4]));
}

// ---------------------------------------------------------------------------------------
// Generated families.

fn family() -> impl Strategy<Value = GenSpec> {
    prop_oneof![
        (2u32..=4, prop::option::of(1u32..=3)).prop_map(|(h, hosts)| GenSpec::FatTree2(FatTree2 {
            hosts_per_leaf: hosts.map(|x| x.min(2 * h - 1)),
            ..FatTree2::new(2 * h)
        })),
        (2u32..=3, 1u32..=4).prop_map(|(h, pods)| GenSpec::FatTree3(FatTree3 {
            pods: Some(pods.min(2 * h)),
            ..FatTree3::new(2 * h)
        })),
        (2u32..=3, 2u32..=3).prop_map(|(k, n)| GenSpec::KaryNTree(KaryNTree {
            radix: 2 * k,
            levels: n,
            ca_ports: 1
        })),
        (prop::collection::vec(1u32..=4, 1..=2), 1u32..=2)
            .prop_map(|(dims, h)| GenSpec::Torus(Grid::new(dims, h))),
        (prop::collection::vec(1u32..=4, 1..=2), 1u32..=2)
            .prop_map(|(dims, h)| GenSpec::Mesh(Grid::new(dims, h))),
        (2u32..=4, 2u32..=3, 1u32..=2)
            .prop_map(|(g, a, p)| GenSpec::Dragonfly(Dragonfly::new(g, a, p))),
        (2u32..=4, 1u32..=3, 1u32..=2).prop_map(|(g, l, s)| GenSpec::DragonflyPlus(
            DragonflyPlus {
                groups: g,
                leaves_per_group: l,
                spines_per_group: s,
                hosts_per_leaf: 2,
                global_per_spine: (g - 1).div_ceil(s),
                radix: None,
                ca_ports: 1,
            }
        )),
        (2u32..=30, any::<u64>()).prop_map(|(n, seed)| GenSpec::Random(Random {
            switches: n,
            radix: 6,
            hosts_per_switch: 1,
            links: None,
            seed,
            ca_ports: 1,
        })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn every_engine_reaches_everything(spec in family(), lmc in 0u8..=1, adaptive in any::<bool>()) {
        let f = fabric(&spec, lmc);
        let topo = Topo::new(&f).unwrap();
        let hops = topo.hop_matrix();
        for name in ["minhop", "updn", "ftree"] {
            let r = match route(name, &topo, adaptive) {
                Ok(r) => r,
                Err(RouteError::NotApplicable { engine: "ftree", .. }) => continue,
                Err(e) => panic!("{name} on {spec:?}: {e}"),
            };
            check_reach(&topo, &r);
            if name == "minhop" {
                for s in common::ca_switches(&topo) {
                    for d in &topo.dests {
                        let len = walk(&topo, &r, s, d.base_lid).unwrap().len();
                        prop_assert_eq!(len, hops.get(s, d.sw) as usize);
                    }
                }
            } else {
                prop_assert!(!has_credit_loop(&topo, &r), "{} on {:?} has a credit loop", name, spec);
            }
            if adaptive {
                check_ar(&topo, &r);
            }
        }
        // Fat-trees are fat-trees.
        if matches!(spec, GenSpec::FatTree2(_) | GenSpec::FatTree3(_) | GenSpec::KaryNTree(_)) {
            let r = route("ftree", &topo, false);
            prop_assert!(r.is_ok(), "{:?}: {:?}", spec, r.err());
        }
    }
}

#[test]
fn ftree_with_given_roots_and_compute_nodes() {
    let f = fabric(&fat_tree3(4, 3), 0);
    let topo = Topo::new(&f).unwrap();
    let cores: Vec<Guid> = (0..topo.num_switches() as u32)
        .map(|s| topo.guid(SwIdx(s)))
        .filter(|g| g.0 >> 32 & 0xffff == 3)
        .collect();
    let opts = Options {
        roots: cores,
        adaptive: true,
        ..Options::default()
    };
    let r = engine("ftree").unwrap().route(&topo, &opts).unwrap();
    check_reach(&topo, &r);
    check_ar(&topo, &r);
    assert!(!has_credit_loop(&topo, &r));

    let opts = Options {
        roots: vec![Guid(0xdead)],
        ..Options::default()
    };
    let err = engine("ftree")
        .unwrap()
        .route(&topo, &opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains("none of the 1 root GUID(s)"), "{err}");

    let opts = Options {
        compute_nodes: vec![Guid(0xbeef)],
        ..Options::default()
    };
    let err = engine("ftree")
        .unwrap()
        .route(&topo, &opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains("none of the 1 compute-node GUID(s)"), "{err}");
}

#[test]
fn unknown_engine_stops_the_chain() {
    let f = fabric(&GenSpec::FatTree2(FatTree2::new(4)), 0);
    let topo = Topo::new(&f).unwrap();
    let err = route_chain("ftree,nosuch", &topo, &Options::default());
    // ftree routes first, so the unknown name is never reached...
    assert_eq!(err.unwrap().routes.engine, "ftree");
    // ...but it stops a chain that gets to it.
    let torus = fabric(&GenSpec::Torus(Grid::new(vec![3, 3], 1)), 0);
    let topo = Topo::new(&torus).unwrap();
    let err = route_chain("ftree,nosuch,updn", &topo, &Options::default()).unwrap_err();
    assert!(matches!(err, RouteError::UnknownEngine(_)), "{err}");
}

/// The SM's LID breaks its ties per switch where no CA's traffic to the SM passes: those
/// switches send their traps through many neighbours instead of all through one (so a lost
/// link silences few of them), every choice is still one the engine allows, as short as
/// before, and every entry a CA's flow uses is the engine's own, so the balance is kept.
#[test]
fn the_sms_lid_is_spread_where_no_ca_traffic_passes() {
    let f = fabric(&fat_tree3(8, 8), 0);
    let topo = Topo::new(&f).unwrap();
    let sm = topo
        .dests
        .iter()
        .find(|d| d.kind == NodeKind::Ca)
        .unwrap()
        .base_lid;
    // Switches some CA's route to the SM crosses.
    let crossed = |r: &Routes| {
        let mut on = vec![false; topo.num_switches()];
        for d in topo.dests.iter().filter(|d| d.kind == NodeKind::Ca) {
            on[d.sw.idx()] = true;
            for (s, i) in walk(&topo, r, d.sw, sm).unwrap() {
                on[s.idx()] = true;
                on[topo.adj(s)[i].peer.idx()] = true;
            }
        }
        on
    };
    // The most switches no CA traffic crosses that send the SM's LID through one neighbour.
    let busiest = |r: &Routes, crossed: &[bool]| {
        let mut through = vec![0usize; topo.num_switches()];
        for s in (0..topo.num_switches()).map(|i| SwIdx(i as u32)) {
            let p = r.port(s, sm).unwrap();
            if let Some(a) = topo.adj(s).iter().find(|a| a.port == p) {
                through[a.peer.idx()] += usize::from(!crossed[s.idx()]);
            }
        }
        through.into_iter().max().unwrap()
    };
    let figures = |r: &Routes| {
        let m = sm_routing::metrics(&topo, r, &sm_routing::MetricsOptions::default());
        (m.all_to_all, m.shifts)
    };
    for name in ["minhop", "updn", "ftree"] {
        let plain = engine(name)
            .unwrap()
            .route(&topo, &Options::default())
            .unwrap();
        let opts = Options {
            sm_lid: Some(sm),
            ..Options::default()
        };
        let spread = engine(name).unwrap().route(&topo, &opts).unwrap();
        let on = crossed(&plain);
        assert_eq!(
            crossed(&spread),
            on,
            "{name}: CA traffic takes other switches"
        );
        assert!(
            busiest(&spread, &on) < busiest(&plain, &on),
            "{name}: {} switches still send the SM's LID through one neighbour (plain: {})",
            busiest(&spread, &on),
            busiest(&plain, &on)
        );
        for s in (0..topo.num_switches()).map(|i| SwIdx(i as u32)) {
            assert_eq!(
                walk(&topo, &spread, s, sm).unwrap().len(),
                walk(&topo, &plain, s, sm).unwrap().len(),
                "{name}: a longer way to the SM"
            );
            for lid in 1..=topo.max_lid().0 {
                let lid = sm_mad::Lid(lid);
                if lid != sm || on[s.idx()] {
                    assert_eq!(spread.port(s, lid), plain.port(s, lid), "{name}: LID {lid}");
                }
            }
        }
        assert_eq!(figures(&spread), figures(&plain), "{name}: balance");
        check_reach(&topo, &spread);
        if name != "minhop" {
            assert!(!has_credit_loop(&topo, &spread), "{name}: credit loop");
        }
    }
}

/// Sticky routing: a held port that is legal is kept; a wanted port (where a repair moved
/// the entry from) wins over it where legal, and an illegal wanted port changes nothing.
#[test]
fn held_ports_are_kept_and_wanted_ones_win_where_legal() {
    use sm_core::lft::LftTable;
    use sm_routing::engine::PreviousTables;
    let f = fabric(&fat_tree3(8, 4), 0);
    let topo = Topo::new(&f).unwrap();
    let fresh = route("minhop", &topo, false).unwrap();
    let leaf = (0..topo.num_switches())
        .map(|i| SwIdx(i as u32))
        .find(|&s| topo.dests.iter().any(|d| d.sw == s))
        .unwrap();
    let ups: Vec<u8> = topo.adj(leaf).iter().map(|a| a.port).collect();
    // Every host of another leaf moves to the leaf's next uplink: as legal (every uplink
    // is on a shortest way), not as balanced.
    let mut held = fresh.lft.clone();
    let mut turned = Vec::new();
    for d in topo
        .dests
        .iter()
        .filter(|d| d.kind == NodeKind::Ca && d.sw != leaf)
    {
        let lid = usize::from(d.base_lid.0);
        let e = &mut held[leaf.idx()][lid];
        let k = ups.iter().position(|&p| p == *e).unwrap();
        turned.push((lid as u16, *e));
        *e = ups[(k + 1) % ups.len()];
    }
    assert!(turned.len() > 10);
    let guids: Vec<Guid> = (0..topo.num_switches())
        .map(|i| topo.guid(SwIdx(i as u32)))
        .collect();
    let tables = || held.iter().map(|t| LftTable::from_slice(t)).collect();
    let run = |prev: PreviousTables| {
        let opts = Options {
            previous: Some(std::sync::Arc::new(prev)),
            ..Options::default()
        };
        engine("minhop").unwrap().route(&topo, &opts).unwrap()
    };
    let g = topo.guid(leaf);
    let kept = run(PreviousTables::from_tables(guids.clone(), tables()));
    let diff = |a: &Routes, b: &Vec<Vec<u8>>| {
        let mut d = Vec::new();
        for (s, (x, y)) in a.lft.iter().zip(b).enumerate() {
            for (lid, (p, q)) in x.iter().zip(y).enumerate() {
                if p != q {
                    d.push((s, lid, *p, *q));
                }
            }
        }
        d.truncate(8);
        d
    };
    assert_eq!(diff(&kept, &held), [], "legal held ports moved");
    let wanted = turned.iter().map(|&(lid, p)| (g, lid, p));
    let back = run(PreviousTables::from_tables(guids.clone(), tables()).with_wanted(wanted));
    assert_eq!(
        diff(&back, &fresh.lft),
        [],
        "the wanted ports were not taken back"
    );
    // A host's port is no way up: wanting it keeps the held port.
    let host_port = topo.dests.iter().find(|d| d.sw == leaf).unwrap().sw_port;
    let wrong = turned.iter().map(|&(lid, _)| (g, lid, host_port));
    let same = run(PreviousTables::from_tables(guids, tables()).with_wanted(wrong));
    assert_eq!(diff(&same, &held), [], "an illegal wanted port was taken");
}
