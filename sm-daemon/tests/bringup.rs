//! The SM brings up simulated fabrics in virtual time, and the data-path tracer proves every
//! pair can talk: every generator family with every engine, link failures and recovery,
//! partitions, restarts, loss and reordering.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use sm_core::fabric::{Fabric, PortIdx};
use sm_core::generate::{GenSpec, generate};
use sm_core::lid::LidStore;
use sm_core::partitions::Partitions;
use sm_daemon::core::{Event, Params, SweepReport};
use sm_daemon::transport::sim::SimDriver;
use sm_mad::port_info::PortState;
use sm_mad::{Lid, PKey, Sl};
use sm_sim::trace::{AllPairsOptions, PKeyChoice};
use sm_sim::{Fault, SimConfig};
use support::{all_active_but, all_pairs_delivered, run_watching};

fn spec(json: &str) -> GenSpec {
    serde_json::from_str(json).unwrap()
}

fn families() -> Vec<(&'static str, GenSpec)> {
    vec![
        ("fat-tree2", spec(r#"{"family":"fat-tree2","radix":8}"#)),
        (
            "fat-tree3",
            spec(r#"{"family":"fat-tree3","radix":8,"pods":2}"#),
        ),
        (
            "k-ary-n-tree",
            spec(r#"{"family":"kary-n-tree","radix":4,"levels":3}"#),
        ),
        (
            "torus",
            spec(r#"{"family":"torus","dims":[3,3],"hosts_per_switch":1}"#),
        ),
        (
            "mesh",
            spec(r#"{"family":"mesh","dims":[2,3],"hosts_per_switch":2}"#),
        ),
        (
            "dragonfly",
            spec(
                r#"{"family":"dragonfly","groups":4,"switches_per_group":2,"hosts_per_switch":2,"global_per_switch":2}"#,
            ),
        ),
        (
            "dragonfly+",
            spec(
                r#"{"family":"dragonfly-plus","groups":3,"leaves_per_group":2,"spines_per_group":2,"hosts_per_leaf":2,"global_per_spine":1}"#,
            ),
        ),
        (
            "random",
            spec(r#"{"family":"random","switches":8,"radix":8,"hosts_per_switch":2,"seed":3}"#),
        ),
    ]
}

fn sm_port(f: &Fabric) -> PortIdx {
    f.cas()
        .flat_map(|n| f.node_ports(n))
        .find(|&p| f.port(p).remote.is_some())
        .unwrap()
}

fn up_with(f: &Fabric, params: Params, lids: LidStore, cfg: SimConfig) -> (SimDriver, SweepReport) {
    let mut d = SimDriver::new(f, sm_port(f), params, lids, cfg);
    d.start();
    let r = next_up(&mut d);
    (d, r)
}

fn next_up(d: &mut SimDriver) -> SweepReport {
    let e = d
        .run_until(
            60_000_000_000,
            |e| matches!(e, Event::SweepDone(r) if r.subnet_up),
        )
        .expect("subnet up");
    let Event::SweepDone(r) = e else {
        unreachable!()
    };
    *r
}

fn bring_up(f: &Fabric, params: Params) -> (SimDriver, SweepReport) {
    up_with(f, params, LidStore::new(), SimConfig::default())
}

#[test]
fn every_family_with_every_engine_delivers_every_pair() {
    for (name, spec) in families() {
        let f = generate(&spec).unwrap();
        for chain in ["minhop", "updn", "ftree,updn,minhop"] {
            let params = Params {
                routing: chain.into(),
                ..Params::default()
            };
            let (d, r) = bring_up(&f, params);
            let what = format!("{name} / {chain} (used {})", r.engine_used);
            assert_eq!(r.nodes, f.nodes().len(), "{what}");
            // Switches met through many links are never taken for duplicated GUIDs.
            assert!(r.errors.is_empty(), "{what}: {:?}", r.errors);
            assert_eq!(r.links, f.counts().links, "{what}");
            assert_eq!(r.lids, f.end_ports().count(), "{what}");
            all_active_but(&d, &f, &[]);
            all_pairs_delivered(&d, &what);
            // The fewest SMPs discovery needs, counted on the fabric itself, and the whole
            // sweep within 10 % of the fewest it could have sent.
            let linked = |n| {
                f.node_ports(n)
                    .filter(|&p| f.port(p).remote.is_some())
                    .count()
            };
            let ports: usize = f
                .nodes()
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let idx = sm_core::NodeIdx(i as u32);
                    if n.kind == sm_core::fabric::NodeKind::Switch {
                        usize::from(n.num_ports) + 1
                    } else {
                        linked(idx)
                    }
                })
                .sum();
            let c = f.counts();
            let want = c.links + 1 + c.nodes + c.switches + ports;
            assert_eq!(r.discovery_min, want as u64, "{what}");
            assert!(
                r.mads_sent as f64 <= r.mads_min as f64 * 1.10 && r.mads_min > r.discovery_min,
                "{what}: {} SMPs sent, {} at least",
                r.mads_sent,
                r.mads_min
            );
            if chain.starts_with("ftree") && !name.starts_with("fat-tree") && name != "k-ary-n-tree"
            {
                assert_ne!(r.engine_used, "ftree", "{what}: ftree should decline");
                assert!(!r.fallbacks.is_empty(), "{what}");
            }
        }
    }
}

/// The blocks whose contents differ between two sets of tables, per switch GUID.
fn changed_blocks(a: &sm_core::dump::Lfts, b: &sm_core::dump::Lfts) -> u64 {
    let mut n = 0;
    for sb in &b.switches {
        let sa = a.switches.iter().find(|s| s.guid == sb.guid);
        let blocks = sb.ports.len().div_ceil(64);
        for i in 0..blocks {
            let new = sb.block(i);
            if sa.is_none_or(|s| s.block(i) != new) {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn link_down_traps_reroutes_and_sends_only_changed_blocks() {
    // 128 hosts and 24 switches: 3 LFT blocks per switch.
    let f = generate(&spec(r#"{"family":"fat-tree2","radix":16}"#)).unwrap();
    let (mut d, first) = bring_up(&f, Params::default());
    let before = d.sm.lfts().unwrap().clone();
    // Cut one leaf-spine link.
    let (a, _) = f
        .links()
        .find(|&(a, b)| {
            let (na, nb) = (f.port(a).node, f.port(b).node);
            f.node(na).kind == sm_core::NodeKind::Switch
                && f.node(nb).kind == sm_core::NodeKind::Switch
        })
        .unwrap();
    d.sim.link_down(a);
    let mut traps = 0;
    let e = d
        .run_until(60_000_000_000, |e| {
            if matches!(
                e,
                Event::Trap {
                    trap_number: 128,
                    ..
                }
            ) {
                traps += 1;
            }
            matches!(e, Event::SweepDone(r) if r.subnet_up)
        })
        .unwrap();
    let Event::SweepDone(r) = e else {
        unreachable!()
    };
    assert!(traps >= 1, "a trap started the sweep");
    assert_eq!(r.links, first.links - 1);
    all_pairs_delivered(&d, "after link down");
    let after = d.sm.lfts().unwrap().clone();
    // Only changed blocks; a block whose entries belong to different phases of the
    // downstream-first order goes once per phase.
    let changed = changed_blocks(&before, &after);
    assert!(
        (changed..=changed + 20).contains(&r.lft_blocks_sent),
        "{} sent for {changed} changed",
        r.lft_blocks_sent
    );
    assert!(!r.heavy, "a repair, not a heavy sweep: {}", r.trigger);
    assert!(r.lft_blocks_sent < first.lft_blocks_sent);
    // No PortInfo needs a LID again: only what changed is programmed.
    assert!(r.port_info_sets < first.port_info_sets);

    d.sim.link_up(a);
    let r = next_up(&mut d);
    assert_eq!(r.links, first.links);
    all_pairs_delivered(&d, "after link up");
}

#[test]
fn partitions_are_enforced() {
    let f = generate(&spec(r#"{"family":"fat-tree2","radix":6}"#)).unwrap();
    // Hosts of leaf 0 and leaf 1 in partition 0x10 (full); the default partition limited for
    // everyone but the SM, so hosts reach only the SM and their own partition.
    let guids: Vec<String> = f
        .cas()
        .filter(|&n| {
            let d = &f.node(n).description;
            d.ends_with("leaf 0") || d.ends_with("leaf 1")
        })
        .flat_map(|n| f.node_ports(n))
        .map(|p| format!("{:#018x}=full", f.port(p).guid.0))
        .collect();
    let text = format!(
        "Default=0x7fff : ALL=limited, SELF=full ;\nblue=0x0010 : {} ;\n",
        guids.join(", ")
    );
    let parts = Partitions::parse(&text, std::path::Path::new("test.conf")).unwrap();
    let params = Params {
        partitions: parts,
        ..Params::default()
    };
    let (d, r) = bring_up(&f, params);
    assert!(r.pkey_blocks_sent > 0);
    let fab = d.sm.fabric().unwrap();
    let lid_of = |desc_end: &str, nth: usize| -> Lid {
        let n = fab
            .cas()
            .filter(|&n| fab.node(n).description.ends_with(desc_end))
            .nth(nth)
            .unwrap();
        fab.port(fab.node_ports(n).next().unwrap()).lid
    };
    let (blue_a, blue_b, other) = (
        lid_of("leaf 0", 0),
        lid_of("leaf 1", 0),
        lid_of("leaf 2", 0),
    );
    let blue = PKey(0x8010);
    assert!(
        d.sim.trace(blue_a, blue_b, Sl(0), blue).is_ok(),
        "members reach each other"
    );
    assert!(
        d.sim.trace(blue_a, other, Sl(0), blue).is_err(),
        "a non-member never receives"
    );
    assert!(d.sim.trace(other, blue_a, Sl(0), PKey(0x0010)).is_err());
    // Two limited members of the default partition cannot talk...
    assert!(
        d.sim
            .trace(other, lid_of("leaf 3", 0), Sl(0), PKey(0x7fff))
            .is_err()
    );
    // ...but everyone reaches the SM (full member).
    let sm_lid = d.sm.own_lid();
    let t = d.sim.trace(other, sm_lid, Sl(0), PKey(0x7fff));
    assert!(t.is_ok(), "{t:?}");
    // Per pair, the best shared partition: exactly the pairs the partitions allow.
    let all = d.sim.check_all_pairs(&AllPairsOptions {
        pkey: PKeyChoice::BestShared,
        ..AllPairsOptions::default()
    });
    assert!(all.dropped.pkey > 0);
    assert_eq!(all.dropped.pkey + all.delivered, all.pairs);
}

#[test]
fn restart_keeps_every_lid() {
    let f = generate(&spec(
        r#"{"family":"torus","dims":[3,2],"hosts_per_switch":2}"#,
    ))
    .unwrap();
    let (d, _) = bring_up(&f, Params::default());
    let store = d.sm.lid_store().clone();
    let lids = |d: &SimDriver| -> Vec<(u64, u16)> {
        f.end_ports()
            .map(|p| (f.port(p).guid.0, d.sim.port(p).info.lid.0))
            .collect()
    };
    let first = lids(&d);
    // A new SM on a freshly powered fabric, with the stored LIDs.
    let (d2, _) = up_with(
        &f,
        Params::default(),
        store,
        SimConfig {
            seed: 9,
            ..SimConfig::default()
        },
    );
    assert_eq!(lids(&d2), first);
}

#[test]
fn loss_and_reordering_converge_to_the_same_tables() {
    let f = generate(&spec(r#"{"family":"fat-tree2","radix":6}"#)).unwrap();
    let (clean, _) = bring_up(&f, Params::default());
    let reference = clean.sm.lfts().unwrap().clone();
    let mut retried = 0;
    for seed in 1..=20 {
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
            smp_timeout: std::time::Duration::from_millis(1),
            smp_retries: 8,
            ..Params::default()
        };
        let (d, r) = up_with(&f, params, LidStore::new(), cfg);
        assert_eq!(d.sm.lfts().unwrap(), reference, "seed {seed}");
        all_active_but(&d, &f, &[]);
        all_pairs_delivered(&d, &format!("seed {seed}"));
        retried += r.mads_retried;
    }
    assert!(retried > 0, "5% loss must have cost retries");
}

#[test]
fn a_chain_that_cannot_route_falls_back_to_minhop() {
    // ftree alone on a torus: it declines, and the SM routes with minhop, as OpenSM does.
    let f = generate(&spec(
        r#"{"family":"torus","dims":[3,3],"hosts_per_switch":1}"#,
    ))
    .unwrap();
    let params = Params {
        routing: "ftree".into(),
        ..Params::default()
    };
    let (d, r) = bring_up(&f, params);
    assert_eq!(r.engine_used, "minhop");
    assert!(
        r.fallbacks.iter().any(|f| f.contains("ftree")),
        "{:?}",
        r.fallbacks
    );
    all_pairs_delivered(&d, "ftree on a torus");
}

/// Two hosts cabled to each other with no switch come up as OpenSM brings them up: each
/// port gets a LID, both go ACTIVE, and each reaches the other.
#[test]
fn two_cas_back_to_back_come_up() {
    use sm_core::fabric::{NodeKind, NodeSpec};
    let mut f = Fabric::new();
    let a = f
        .add_node(NodeSpec::new(NodeKind::Ca, sm_mad::Guid(0x10), "a", 1))
        .unwrap();
    let b = f
        .add_node(NodeSpec::new(NodeKind::Ca, sm_mad::Guid(0x20), "b", 1))
        .unwrap();
    let (pa, pb) = (f.port_of(a, 1).unwrap(), f.port_of(b, 1).unwrap());
    f.connect(pa, pb).unwrap();
    let (d, r) = up_with(&f, Params::default(), LidStore::new(), SimConfig::default());
    assert_eq!((r.nodes, r.switches, r.links, r.lids), (2, 0, 1, 2));
    for p in [pa, pb] {
        let pi = &d.sim.port(p).info;
        assert_eq!(pi.port_state, PortState::Active, "{p:?}");
        assert_ne!(pi.lid, Lid(0));
        assert_eq!(pi.master_sm_lid, d.sm.own_lid());
    }
    let all = d.sim.check_all_pairs(&AllPairsOptions::default());
    // Every (source port, destination LID) pair, each host's own LID included.
    assert_eq!((all.pairs, all.delivered), (4, 4));
}

/// HDR links: the SM sees their speeds (it sets PortInfo attribute modifier bit 31, without
/// which such agents hide them), forces LinkSpeedExtEnabled as asked, and a second sweep
/// finds it held (no PortInfo Set for it).
#[test]
fn extended_speeds_are_seen_and_forced_once() {
    use sm_mad::port_info::link_speed_ext::{EDR, HDR};
    let mut f = generate(&spec(r#"{"family":"fat-tree2","radix":8}"#)).unwrap();
    let links: Vec<(PortIdx, PortIdx)> = f.links().collect();
    for (a, b) in links {
        for p in [a, b] {
            f.port_mut(p).speed.ext = HDR;
        }
    }
    let params = Params {
        force_link_speed_ext: EDR,
        ..Params::default()
    };
    let (mut d, first) = bring_up(&f, params);
    let ext_ports: Vec<PortIdx> = (0..f.ports().len() as u32)
        .map(PortIdx)
        .filter(|&p| f.port(p).remote.is_some())
        .collect();
    for &p in &ext_ports {
        let i = &d.sim.port(p).info;
        assert_eq!(i.link_speed_ext_enabled, EDR, "{:?}", f.port(p));
    }
    // The SA's rates come from the extended speed the ports reported: 4x HDR.
    let plan_f = &d.sm.plan().unwrap().fabric;
    assert!(ext_ports.iter().all(|&p| plan_f.port(p).speed.ext == HDR));
    let now = sm_daemon::core::Instant::from_nanos(d.now());
    d.sm.request_sweep(now, true);
    let again = next_up(&mut d);
    assert!(first.port_info_sets > 0);
    assert_eq!(again.port_info_sets, 0, "{again:?}");
}

/// Max switch-to-switch link load under all-to-all traffic and the worst shift
/// permutation's load, of `routes` on `f`.
fn balance(topo: &sm_routing::Topo<'_>, routes: &sm_routing::Routes) -> (u64, u32) {
    let m = sm_routing::metrics(
        topo,
        routes,
        &sm_routing::MetricsOptions {
            bisections: 0,
            diversity: false,
            ..sm_routing::MetricsOptions::default()
        },
    );
    assert_eq!(m.all_to_all.unrouted_flows, 0);
    (m.all_to_all.switch_links.max, m.shifts.worst_max_load)
}

/// Wherever the SM runs, the tables it programs into a fat-tree's switches, with the LIDs
/// it gives the ports (read back from the simulated fabric), load the links as evenly as
/// the tables routed offline for the same fabric (LIDs in fabric order, no SM), with LMC
/// 0 to 2, dual-ported hosts and 2 or 3 levels. A leaf's uplink that fails and returns
/// leaves those very tables behind.
#[test]
fn fat_tree_tables_are_as_balanced_as_offline_whichever_port_the_sm_is_on() {
    use sm_routing::{Options, Routes, Topo, route_chain};
    let trees = [
        ("ft2 radix 8", r#"{"family":"fat-tree2","radix":8}"#, 0),
        (
            "ft3 radix 8, 3 pods",
            r#"{"family":"fat-tree3","radix":8,"pods":3}"#,
            1,
        ),
        (
            "ft2 radix 12, 2 ports per CA",
            r#"{"family":"fat-tree2","radix":12,"ca_ports":2}"#,
            2,
        ),
    ];
    for (name, json, lmc) in trees {
        let f = generate(&spec(json)).unwrap();
        let mut offline = f.clone();
        LidStore::new().assign(&mut offline, lmc).unwrap();
        let topo = Topo::new(&offline).unwrap();
        let routed = route_chain("auto", &topo, &Options::default()).unwrap();
        assert_eq!(routed.routes.engine, "ftree", "{name}");
        let want = balance(&topo, &routed.routes);

        let ports: Vec<PortIdx> = f
            .cas()
            .flat_map(|n| f.node_ports(n))
            .filter(|&p| f.port(p).remote.is_some())
            .collect();
        // The first and the last host, one between, and a second port of a host.
        let mut sms = vec![ports[0], ports[ports.len() / 2], ports[ports.len() - 1]];
        sms.extend(ports.iter().copied().find(|&p| f.port(p).num == 2));
        for sm in sms {
            let what = format!("{name}, LMC {lmc}, SM on {}", f.port(sm).guid);
            let params = Params {
                routing: "auto".into(),
                lmc,
                sweep_interval: std::time::Duration::ZERO,
                ..Params::default()
            };
            let mut d = SimDriver::new(&f, sm, params, LidStore::new(), SimConfig::default());
            d.start();
            let r = next_up(&mut d);
            assert_eq!(r.engine_used, "ftree", "{what}");
            // The fabric as programmed: the LIDs its ports hold, the tables its switches
            // hold.
            let mut held = f.clone();
            for p in f.end_ports() {
                let info = &d.sim.port(p).info;
                let port = held.port_mut(p);
                (port.lid, port.lmc) = (info.lid, info.lmc);
            }
            let topo = Topo::new(&held).unwrap();
            let lfts = |d: &SimDriver| -> Vec<Vec<u8>> {
                let table = |n| d.sim.node(n).switch.as_ref().unwrap().lft.clone();
                topo.switches.iter().map(|&n| table(n)).collect()
            };
            let mut programmed = Routes::empty("programmed", &topo);
            for (row, lft) in programmed.lft.iter_mut().zip(lfts(&d)) {
                for (lid, e) in row.iter_mut().enumerate() {
                    *e = lft.get(lid).copied().unwrap_or(255);
                }
            }
            assert_eq!(balance(&topo, &programmed), want, "{what}");

            let before = lfts(&d);
            let uplink = f
                .links()
                .find(|&(a, b)| {
                    let name = |p: PortIdx| &f.node(f.port(p).node).description;
                    name(a).starts_with("leaf") && name(b).starts_with("spine")
                })
                .unwrap()
                .0;
            for (fault, back) in [
                (Fault::LinkDown(uplink), false),
                (Fault::LinkUp(uplink), true),
            ] {
                let step = format!("{what}, {fault:?}");
                d.sim.apply_fault(fault).unwrap();
                let sweeps = run_watching(&mut d, 100_000_000, |_| {});
                assert!(!sweeps.is_empty(), "{step}: no repair");
                assert!(sweeps.iter().all(|r| r.subnet_up && !r.heavy), "{step}");
                assert_eq!(lfts(&d) == before, back, "{step}");
            }
        }
    }
}
