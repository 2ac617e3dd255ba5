//! Topology generators: exact counts per family, structural invariants (port budgets,
//! connectivity, unique GUIDs), determinism, write → read round trips and parameter errors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;

use sm_core::fabric::{Fabric, NodeIdx, NodeKind};
use sm_core::generate::{
    Dragonfly, DragonflyPlus, FatTree2, FatTree3, GenError, GenSpec, Grid, KaryNTree, Random,
    Ratio, generate,
};
use sm_core::read_topology_str;
use sm_core::topo::{WriteOptions, write_ibnetdiscover};

fn text(f: &Fabric) -> String {
    let mut out = Vec::new();
    write_ibnetdiscover(f, &WriteOptions::default(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Everything the text format carries, in a comparable form (as in tests/topo.rs).
fn projection(f: &Fabric) -> Vec<String> {
    let mut out = Vec::new();
    for n in f.nodes() {
        out.push(format!(
            "node {:?} {} {} sys={} ports={}",
            n.kind, n.guid, n.description, n.system_guid, n.num_ports
        ));
    }
    for p in f.end_ports() {
        let port = f.port(p);
        out.push(format!("port {} {}", port.guid, port.num));
    }
    for (a, b) in f.links() {
        let (pa, pb) = (f.port(a), f.port(b));
        out.push(format!(
            "link {}[{}] {}[{}]",
            f.node(pa.node).guid,
            pa.num,
            f.node(pb.node).guid,
            pb.num
        ));
    }
    out.sort();
    out
}

/// Nodes reachable from node 0.
fn reachable(f: &Fabric) -> usize {
    if f.nodes().is_empty() {
        return 0;
    }
    let mut seen = vec![false; f.nodes().len()];
    let mut queue = VecDeque::from([NodeIdx(0)]);
    seen[0] = true;
    let mut count = 1;
    while let Some(n) = queue.pop_front() {
        for p in f.node_ports(n) {
            if let Some((m, _)) = f.peer(p) {
                if !seen[m.idx()] {
                    seen[m.idx()] = true;
                    count += 1;
                    queue.push_back(m);
                }
            }
        }
    }
    count
}

/// Invariants every generated fabric must hold.
fn check(f: &Fabric, radix: u8) {
    assert_eq!(reachable(f), f.nodes().len(), "fabric is not connected");
    let mut guids = HashSet::new();
    for n in f.nodes() {
        assert!(guids.insert(n.guid), "duplicate node GUID {}", n.guid);
        assert!(!n.description.is_empty() && n.description.len() < 64);
        if n.kind == NodeKind::Switch {
            assert!(
                n.num_ports <= radix,
                "{} has {} ports",
                n.description,
                n.num_ports
            );
        }
    }
    for p in f.end_ports() {
        let port = f.port(p);
        if f.node(port.node).kind != NodeKind::Switch {
            assert!(guids.insert(port.guid), "duplicate port GUID {}", port.guid);
        }
    }
    // Every CA port is cabled to a switch; no switch port is cabled to itself.
    for c in f.cas() {
        for p in f.node_ports(c) {
            let (m, _) = f.peer(p).expect("unlinked CA port");
            assert_eq!(f.node(m).kind, NodeKind::Switch);
        }
    }
    for (a, b) in f.links() {
        assert_ne!(a, b);
    }
}

fn gen_ok(spec: &GenSpec) -> Fabric {
    generate(spec).unwrap_or_else(|e| panic!("{spec:?}: {e}"))
}

/// Switch-to-switch links.
fn switch_links(f: &Fabric) -> usize {
    f.counts().links - f.cas().map(|c| f.node(c).num_ports as usize).sum::<usize>()
}

/// Parallel-link multiplicity between switch pairs, by description.
fn pair_links(f: &Fabric) -> HashMap<(String, String), usize> {
    let mut m = HashMap::new();
    for (a, b) in f.links() {
        let (na, nb) = (f.node(f.port(a).node), f.node(f.port(b).node));
        if na.kind == NodeKind::Switch && nb.kind == NodeKind::Switch {
            let (x, y) = (na.description.clone(), nb.description.clone());
            let k = if x < y { (x, y) } else { (y, x) };
            *m.entry(k).or_insert(0) += 1;
        }
    }
    m
}

fn round_trip(f: &Fabric) {
    let t = text(f);
    let again = read_topology_str(&t, Path::new("generated.net")).unwrap();
    assert_eq!(projection(f), projection(&again.fabric));
}

#[test]
fn fat_tree2_full_radix_36() {
    let f = gen_ok(&GenSpec::FatTree2(FatTree2::new(36)));
    let c = f.counts();
    assert_eq!((c.cas, c.switches), (648, 54));
    assert_eq!(switch_links(&f), 36 * 18);
    check(&f, 36);
    // One link from every leaf to every spine.
    let pairs = pair_links(&f);
    assert_eq!(pairs.len(), 36 * 18);
    assert!(pairs.values().all(|&n| n == 1));
    assert_eq!(f.node(NodeIdx(0)).description, "host 0 leaf 0");
    assert_eq!(f.node(NodeIdx(17)).description, "host 17 leaf 0");
    assert_eq!(f.node(NodeIdx(18)).description, "host 18 leaf 1");
}

#[test]
fn fat_tree2_fewer_spines_get_even_parallel_links() {
    let spec = FatTree2 {
        spines: Some(5),
        ..FatTree2::new(8)
    };
    // More spines (5) than uplinks per leaf (4) is refused.
    assert!(matches!(
        generate(&GenSpec::FatTree2(spec)),
        Err(GenError::Param {
            param: "spines",
            ..
        })
    ));
    let spec = FatTree2 {
        spines: Some(3),
        leaves: Some(5),
        ..FatTree2::new(8)
    };
    let f = gen_ok(&GenSpec::FatTree2(spec));
    check(&f, 8);
    assert_eq!(f.counts().cas, 20);
    // 20 uplinks over 3 spines: 7, 7, 6 links; every leaf reaches every spine.
    let mut per_spine: HashMap<String, usize> = HashMap::new();
    let pairs = pair_links(&f);
    for ((a, b), n) in &pairs {
        let spine = if a.starts_with("spine") { a } else { b };
        *per_spine.entry(spine.clone()).or_insert(0) += n;
    }
    let mut loads: Vec<usize> = per_spine.values().copied().collect();
    loads.sort();
    assert_eq!(loads, vec![6, 7, 7]);
    assert_eq!(pairs.len(), 5 * 3);
    round_trip(&f);

    // Default leaves fill the spines: 9 spines × 36 ports / 18 uplinks = 18 leaves.
    let f = gen_ok(&GenSpec::FatTree2(FatTree2 {
        spines: Some(9),
        ..FatTree2::new(36)
    }));
    assert_eq!((f.counts().cas, f.counts().switches), (18 * 18, 27));
    assert!(pair_links(&f).values().all(|&n| n == 2));
    check(&f, 36);
}

#[test]
fn fat_tree2_oversubscription() {
    let f = gen_ok(&GenSpec::FatTree2(FatTree2 {
        oversubscription: Some(Ratio { down: 2, up: 1 }),
        ..FatTree2::new(36)
    }));
    // 24 hosts and 12 uplinks per leaf, 12 spines, 36 leaves.
    assert_eq!((f.counts().cas, f.counts().switches), (864, 48));
    check(&f, 36);
    let f = gen_ok(&GenSpec::FatTree2(FatTree2 {
        hosts_per_leaf: Some(6),
        uplinks: Some(2),
        leaves: Some(3),
        ..FatTree2::new(8)
    }));
    assert_eq!((f.counts().cas, f.counts().switches), (18, 5));
    check(&f, 8);
    round_trip(&f);
}

#[test]
fn fat_tree3_radix_36_and_48() {
    let f = gen_ok(&GenSpec::FatTree3(FatTree3::new(36)));
    assert_eq!((f.counts().cas, f.counts().switches), (11_664, 1_620));
    // Host links + leaf–spine + spine–core.
    assert_eq!(f.counts().links, 11_664 + 36 * 18 * 18 * 2);
    check(&f, 36);
    let f = gen_ok(&GenSpec::FatTree3(FatTree3::new(48)));
    assert_eq!((f.counts().cas, f.counts().switches), (27_648, 2_880));
    check(&f, 48);
}

#[test]
fn fat_tree3_pruned_to_8_pods_is_the_2592_host_fabric() {
    let f = gen_ok(&GenSpec::FatTree3(FatTree3 {
        pods: Some(8),
        ..FatTree3::new(36)
    }));
    assert_eq!((f.counts().cas, f.counts().switches), (2_592, 612));
    check(&f, 36);
    round_trip(&f);
    let core = f
        .switches()
        .find(|&s| f.node(s).description == "core 0")
        .unwrap();
    let used = f
        .node_ports(core)
        .filter(|&p| f.port(p).remote.is_some())
        .count();
    assert_eq!(used, 8);
}

#[test]
fn fat_tree3_small_round_trips() {
    let f = gen_ok(&GenSpec::FatTree3(FatTree3 {
        hosts_per_leaf: Some(1),
        ..FatTree3::new(4)
    }));
    // 4 pods × (2 leaves + 2 spines) + 4 cores; 8 hosts.
    assert_eq!((f.counts().cas, f.counts().switches), (8, 20));
    check(&f, 4);
    round_trip(&f);
}

#[test]
fn kary_ntree_counts() {
    for (radix, levels, hosts, switches) in [
        (36, 3, 5_832, 972),
        (48, 3, 13_824, 1_728),
        (4, 4, 16, 32),
        (8, 1, 4, 1),
        (2, 3, 1, 3),
    ] {
        let f = gen_ok(&GenSpec::KaryNTree(KaryNTree {
            radix,
            levels,
            ca_ports: 1,
        }));
        assert_eq!(
            (f.counts().cas, f.counts().switches),
            (hosts, switches),
            "radix {radix} levels {levels}"
        );
        check(&f, radix as u8);
        // Every tier boundary carries k^n links; the top tier uses only its k down ports.
        let k = radix as usize / 2;
        assert_eq!(switch_links(&f), (levels as usize - 1) * k.pow(levels));
    }
    let f = gen_ok(&GenSpec::KaryNTree(KaryNTree {
        radix: 6,
        levels: 3,
        ca_ports: 1,
    }));
    round_trip(&f);
}

#[test]
fn torus_and_mesh() {
    let f = gen_ok(&GenSpec::Torus(Grid::new(vec![4, 4, 4], 2)));
    assert_eq!((f.counts().cas, f.counts().switches), (128, 64));
    assert_eq!(switch_links(&f), 3 * 64);
    check(&f, 8);
    // Every switch: 2 hosts + 6 neighbours, all ports used.
    for s in f.switches() {
        assert_eq!(f.node(s).num_ports, 8);
        assert!(f.node_ports(s).skip(1).all(|p| f.port(p).remote.is_some()));
    }

    // Size 2: one link between the pair, not two; size 1: none.
    let f = gen_ok(&GenSpec::Torus(Grid::new(vec![4, 3, 2, 1], 1)));
    assert_eq!(f.counts().switches, 24);
    assert_eq!(switch_links(&f), 24 + 24 + 12);
    assert_eq!(
        f.node(f.switches().next().unwrap()).num_ports,
        1 + 2 + 2 + 1
    );
    assert!(pair_links(&f).values().all(|&n| n == 1));
    check(&f, 6);
    round_trip(&f);

    let f = gen_ok(&GenSpec::Mesh(Grid::new(vec![8, 8], 1)));
    assert_eq!(switch_links(&f), 2 * 8 * 7);
    check(&f, 5);

    let f = gen_ok(&GenSpec::Torus(Grid {
        parallel: vec![2, 1],
        radix: Some(12),
        ..Grid::new(vec![3, 5], 2)
    }));
    assert_eq!(switch_links(&f), 2 * 15 + 15);
    assert!(f.switches().all(|s| f.node(s).num_ports == 12));
    check(&f, 12);
    round_trip(&f);
    assert_eq!(
        f.node(f.switches().nth(4).unwrap()).description,
        "switch 1,1"
    );
}

#[test]
fn dragonfly_balanced() {
    let spec = GenSpec::Dragonfly(Dragonfly {
        groups: 9,
        switches_per_group: 4,
        hosts_per_switch: 2,
        global_per_switch: 2,
        radix: None,
        ca_ports: 1,
    });
    let f = gen_ok(&spec);
    assert_eq!((f.counts().cas, f.counts().switches), (72, 36));
    assert_eq!(switch_links(&f), 9 * 6 + 36);
    check(&f, 2 + 3 + 2);
    // Exactly one global link between every pair of groups.
    let group = |d: &str| -> u32 { d.rsplit(' ').next().unwrap().parse().unwrap() };
    let mut groups: HashMap<(u32, u32), usize> = HashMap::new();
    for ((a, b), n) in pair_links(&f) {
        let (ga, gb) = (group(&a), group(&b));
        if ga != gb {
            *groups.entry((ga.min(gb), ga.max(gb))).or_insert(0) += n;
        }
    }
    assert_eq!(groups.len(), 36);
    assert!(groups.values().all(|&n| n == 1));
    round_trip(&f);
}

#[test]
fn dragonfly_fewer_groups_and_plus() {
    let f = gen_ok(&GenSpec::Dragonfly(Dragonfly {
        groups: 4,
        switches_per_group: 3,
        hosts_per_switch: 1,
        global_per_switch: 2,
        radix: Some(10),
        ca_ports: 1,
    }));
    // 6 global ports per group, 3 other groups: 2 links per pair of groups.
    assert_eq!(switch_links(&f), 4 * 3 + 4 * 6 / 2);
    check(&f, 10);

    let f = gen_ok(&GenSpec::DragonflyPlus(DragonflyPlus {
        groups: 5,
        leaves_per_group: 2,
        spines_per_group: 2,
        hosts_per_leaf: 2,
        global_per_spine: 2,
        radix: None,
        ca_ports: 1,
    }));
    assert_eq!((f.counts().cas, f.counts().switches), (20, 20));
    assert_eq!(switch_links(&f), 5 * 4 + 10);
    check(&f, 4);
    // Leaves carry no global links.
    for (a, b) in f.links() {
        let (na, nb) = (f.node(f.port(a).node), f.node(f.port(b).node));
        if na.description.starts_with("leaf") && nb.kind == NodeKind::Switch {
            let ga = na.description.rsplit(' ').next();
            assert_eq!(ga, nb.description.rsplit(' ').next());
        }
    }
    round_trip(&f);
}

fn random_spec(seed: u64) -> GenSpec {
    GenSpec::Random(Random {
        switches: 50,
        radix: 16,
        hosts_per_switch: 4,
        links: None,
        seed,
        ca_ports: 1,
    })
}

#[test]
fn random_graph() {
    let f = gen_ok(&random_spec(7));
    assert_eq!((f.counts().cas, f.counts().switches), (200, 50));
    assert_eq!(switch_links(&f), 50 * 12 / 2);
    check(&f, 16);
    round_trip(&f);
    assert_eq!(text(&f), text(&gen_ok(&random_spec(7))));
    assert_ne!(text(&f), text(&gen_ok(&random_spec(8))));

    // A sparse one: a spanning tree plus a few links.
    let f = gen_ok(&GenSpec::Random(Random {
        switches: 30,
        radix: 8,
        hosts_per_switch: 2,
        links: Some(35),
        seed: 1,
        ca_ports: 2,
    }));
    assert_eq!(switch_links(&f), 35);
    assert_eq!(f.counts().cas, 60);
    check(&f, 8);

    // Tiny ones where free ports end up on one switch.
    for seed in 0..200 {
        for (n, r) in [(3, 4), (2, 3), (4, 5), (3, 6)] {
            let spec = GenSpec::Random(Random {
                switches: n,
                radix: r,
                hosts_per_switch: 0,
                links: None,
                seed,
                ca_ports: 1,
            });
            let f = gen_ok(&spec);
            assert_eq!(switch_links(&f) as u32, n * r / 2, "{spec:?}");
            check(&f, r as u8);
        }
    }
    // A single switch takes no links (a cable from a switch to itself is not generated).
    let f = gen_ok(&GenSpec::Random(Random {
        switches: 1,
        radix: 4,
        hosts_per_switch: 2,
        links: None,
        seed: 0,
        ca_ports: 1,
    }));
    assert_eq!(switch_links(&f), 0);
    check(&f, 4);
}

#[test]
fn every_family_is_deterministic() {
    let specs = [
        GenSpec::FatTree2(FatTree2::new(12)),
        GenSpec::FatTree3(FatTree3::new(6)),
        GenSpec::KaryNTree(KaryNTree {
            radix: 6,
            levels: 3,
            ca_ports: 1,
        }),
        GenSpec::Torus(Grid::new(vec![3, 3, 3], 1)),
        GenSpec::Mesh(Grid::new(vec![5, 4], 2)),
        random_spec(3),
    ];
    for s in &specs {
        assert_eq!(text(&gen_ok(s)), text(&gen_ok(s)), "{s:?}");
    }
}

#[test]
fn spec_serde_round_trip() {
    let specs = [
        GenSpec::FatTree2(FatTree2 {
            oversubscription: Some(Ratio { down: 3, up: 1 }),
            ..FatTree2::new(36)
        }),
        GenSpec::FatTree3(FatTree3 {
            pods: Some(8),
            ..FatTree3::new(36)
        }),
        GenSpec::Torus(Grid::new(vec![4, 4, 4], 2)),
        random_spec(9),
    ];
    for s in &specs {
        let json = serde_json::to_string(s).unwrap();
        let back: GenSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(&back, s, "{json}");
    }
    let s: GenSpec =
        serde_json::from_str(r#"{"family":"fat-tree2","radix":8,"oversubscription":"3:1"}"#)
            .unwrap();
    assert_eq!(
        s,
        GenSpec::FatTree2(FatTree2 {
            oversubscription: Some(Ratio { down: 3, up: 1 }),
            ..FatTree2::new(8)
        })
    );
    assert!(
        serde_json::from_str::<GenSpec>(
            r#"{"family":"torus","dims":[2],"hosts_per_switch":1,"bogus":1}"#
        )
        .is_err()
    );
    assert!(
        serde_json::from_str::<GenSpec>(
            r#"{"family":"fat-tree2","radix":8,"oversubscription":"x"}"#
        )
        .is_err()
    );
}

fn param_of(spec: GenSpec) -> (&'static str, String) {
    match generate(&spec) {
        Err(GenError::Param { param, reason, .. }) => (param, reason),
        other => panic!("{spec:?}: expected a parameter error, got {other:?}"),
    }
}

#[test]
fn parameter_errors_name_the_parameter() {
    assert_eq!(param_of(GenSpec::FatTree2(FatTree2::new(300))).0, "radix");
    assert_eq!(param_of(GenSpec::FatTree2(FatTree2::new(1))).0, "radix");
    assert_eq!(param_of(GenSpec::FatTree3(FatTree3::new(35))).0, "radix");
    let (p, why) = param_of(GenSpec::FatTree2(FatTree2 {
        oversubscription: Some(Ratio { down: 5, up: 2 }),
        ..FatTree2::new(36)
    }));
    assert_eq!(p, "oversubscription");
    assert!(why.contains("does not divide"), "{why}");
    let (p, _) = param_of(GenSpec::FatTree2(FatTree2 {
        oversubscription: Some(Ratio { down: 1, up: 1 }),
        hosts_per_leaf: Some(2),
        ..FatTree2::new(36)
    }));
    assert_eq!(p, "hosts_per_leaf");
    let (p, _) = param_of(GenSpec::FatTree2(FatTree2 {
        hosts_per_leaf: Some(36),
        ..FatTree2::new(36)
    }));
    assert_eq!(p, "hosts_per_leaf");
    let (p, _) = param_of(GenSpec::FatTree2(FatTree2 {
        uplinks: Some(u32::MAX),
        ..FatTree2::new(36)
    }));
    assert_eq!(p, "uplinks");
    let (p, _) = param_of(GenSpec::FatTree2(FatTree2 {
        leaves: Some(37),
        ..FatTree2::new(36)
    }));
    assert_eq!(p, "leaves");
    let (p, _) = param_of(GenSpec::FatTree2(FatTree2 {
        ca_ports: 0,
        ..FatTree2::new(36)
    }));
    assert_eq!(p, "ca_ports");
    let (p, _) = param_of(GenSpec::FatTree3(FatTree3 {
        pods: Some(37),
        ..FatTree3::new(36)
    }));
    assert_eq!(p, "pods");
    let (p, _) = param_of(GenSpec::FatTree3(FatTree3 {
        hosts_per_leaf: Some(19),
        ..FatTree3::new(36)
    }));
    assert_eq!(p, "hosts_per_leaf");
    let (p, _) = param_of(GenSpec::KaryNTree(KaryNTree {
        radix: 8,
        levels: 0,
        ca_ports: 1,
    }));
    assert_eq!(p, "levels");
    let (p, _) = param_of(GenSpec::KaryNTree(KaryNTree {
        radix: 8,
        levels: 2,
        ca_ports: 2,
    }));
    assert_eq!(p, "ca_ports");
    assert_eq!(param_of(GenSpec::Torus(Grid::new(vec![], 1))).0, "dims");
    assert_eq!(param_of(GenSpec::Torus(Grid::new(vec![4, 0], 1))).0, "dims");
    assert_eq!(param_of(GenSpec::Torus(Grid::new(vec![1], 0))).0, "dims");
    assert_eq!(
        param_of(GenSpec::Mesh(Grid::new(vec![4], 300))).0,
        "hosts_per_switch"
    );
    let (p, _) = param_of(GenSpec::Torus(Grid {
        parallel: vec![1, 2],
        ..Grid::new(vec![4, 4, 4], 1)
    }));
    assert_eq!(p, "parallel");
    let (p, _) = param_of(GenSpec::Torus(Grid {
        radix: Some(6),
        ..Grid::new(vec![4, 4, 4], 1)
    }));
    assert_eq!(p, "radix");
    let df = Dragonfly {
        groups: 10,
        switches_per_group: 4,
        hosts_per_switch: 2,
        global_per_switch: 2,
        radix: None,
        ca_ports: 1,
    };
    assert_eq!(param_of(GenSpec::Dragonfly(df.clone())).0, "groups");
    let (p, _) = param_of(GenSpec::Dragonfly(Dragonfly {
        groups: 2,
        hosts_per_switch: 250,
        ..df.clone()
    }));
    assert_eq!(p, "radix");
    let (p, _) = param_of(GenSpec::Dragonfly(Dragonfly {
        groups: 2,
        radix: Some(4),
        ..df
    }));
    assert_eq!(p, "radix");
    let (p, _) = param_of(GenSpec::DragonflyPlus(DragonflyPlus {
        groups: 6,
        leaves_per_group: 2,
        spines_per_group: 2,
        hosts_per_leaf: 2,
        global_per_spine: 2,
        radix: None,
        ca_ports: 1,
    }));
    assert_eq!(p, "groups");
    let rnd = Random {
        switches: 10,
        radix: 8,
        hosts_per_switch: 4,
        links: Some(5),
        seed: 0,
        ca_ports: 1,
    };
    assert_eq!(param_of(GenSpec::Random(rnd.clone())).0, "links");
    let (p, _) = param_of(GenSpec::Random(Random {
        links: Some(21),
        ..rnd.clone()
    }));
    assert_eq!(p, "links");
    let (p, _) = param_of(GenSpec::Random(Random {
        hosts_per_switch: 7,
        links: None,
        ..rnd.clone()
    }));
    assert_eq!(p, "hosts_per_switch");
    let (p, _) = param_of(GenSpec::Random(Random {
        hosts_per_switch: 9,
        ..rnd
    }));
    assert_eq!(p, "hosts_per_switch");

    // Too large to build: refused before allocating.
    assert!(matches!(
        generate(&GenSpec::KaryNTree(KaryNTree {
            radix: 254,
            levels: 12,
            ca_ports: 1,
        })),
        Err(GenError::TooLarge { .. })
    ));
    assert!(matches!(
        generate(&GenSpec::Torus(Grid::new(vec![u32::MAX, u32::MAX, 9], 1))),
        Err(GenError::TooLarge { .. })
    ));
    // Error text names the parameter.
    let e = generate(&GenSpec::FatTree2(FatTree2::new(300))).unwrap_err();
    assert_eq!(e.to_string(), "radix = 300: a switch has 1 to 254 ports");
}

#[test]
fn written_text_loads_as_ibsim_net_file_header() {
    // The writer's header is plain comments; the first node record is host 0.
    let f = gen_ok(&GenSpec::FatTree2(FatTree2::new(4)));
    let t = text(&f);
    let first = t.lines().find(|l| l.starts_with("Ca")).unwrap();
    assert!(first.contains("\"host 0 leaf 0\""), "{first}");
}
