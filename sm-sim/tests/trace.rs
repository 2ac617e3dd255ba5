//! The data-path tracer on generated fat-trees programmed with minhop: every pair arrives
//! after a full bring-up (directly or by SMPs), each drop reason comes from one broken
//! setting, the memoised all-pairs check agrees with pair-by-pair walks, adaptive routing
//! spreads flows over the uplinks, and multicast reaches exactly the MFT tree's members.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx};
use sm_core::generate::{FatTree2, GenSpec, SplitMix64};
use sm_mad::port_info::{PortState, VlCap};
use sm_mad::{Lid, PKey, Sl};
use sm_routing::Routes;
use sm_sim::testkit::{
    BringUp, BySmp, Direct, Programmer, bring_up, min_hop_ar, programmed, routed,
};
use sm_sim::trace::{AllPairsOptions, DropReason, Dropped, PKeyCheck, PKeyChoice, Tracer};
use sm_sim::{Sim, SimConfig};

/// 2-level fat-tree of 8-port switches: 32 hosts on 8 leaves, 4 spines.
fn spec() -> GenSpec {
    GenSpec::FatTree2(FatTree2::new(8))
}

fn ft2(lmc: u8) -> (Fabric, Routes, Sim) {
    programmed(&spec(), lmc, &BringUp::default()).unwrap()
}

fn ca_ports(f: &Fabric) -> Vec<PortIdx> {
    f.cas().flat_map(|n| f.node_ports(n)).collect()
}

fn lid(f: &Fabric, p: PortIdx) -> Lid {
    f.port(f.lid_port(p)).lid
}

/// The switch a CA port hangs off, and its port there.
fn leaf(f: &Fabric, p: PortIdx) -> (NodeIdx, u8) {
    f.peer(p).unwrap()
}

fn lft(sim: &Sim, n: NodeIdx, l: Lid) -> u8 {
    sim.node(n).switch.as_ref().unwrap().lft[l.0 as usize]
}

fn pair_on_two_leaves(f: &Fabric) -> (PortIdx, PortIdx) {
    let cas = ca_ports(f);
    let a = cas[0];
    let b = *cas.iter().find(|&&b| leaf(f, b).0 != leaf(f, a).0).unwrap();
    (a, b)
}

fn drop_of(sim: &Sim, a: Lid, b: Lid, sl: u8, pkey: u16) -> Dropped {
    sim.trace(a, b, Sl(sl), PKey(pkey)).unwrap_err()
}

#[test]
fn every_pair_is_delivered_after_bring_up() {
    for lmc in [0, 1] {
        let (f, _, sim) = ft2(lmc);
        let all = sim.check_all_pairs(&AllPairsOptions::default());
        assert_eq!(all.pairs, 32 * 32 * (1 << lmc));
        assert!(all.all_delivered(), "{all:#?}");
        assert_eq!(all.max_hops(), 4);
        // Same leaf: 2 links; other leaves: 4; loopback: 0.
        assert_eq!(all.hops[0], 32 * (1 << lmc));
        assert_eq!(all.hops[2], 32 * 3 * (1 << lmc));
        let base = sim.check_all_pairs(&AllPairsOptions {
            base_lids_only: true,
            ..AllPairsOptions::default()
        });
        assert_eq!(base.pairs, 32 * 32);
        assert!(base.all_delivered());

        let (a, b) = pair_on_two_leaves(&f);
        let path = sim
            .trace(lid(&f, a), lid(&f, b), Sl(0), PKey::DEFAULT)
            .unwrap();
        assert_eq!(path.hops.len(), 4);
        assert_eq!(path.hops[0].node, f.node(f.port(a).node).guid);
        assert_eq!(path.hops[0].in_port, 0);
        assert_eq!(path.hops[1].node, f.node(leaf(&f, a).0).guid);
        assert_eq!(path.hops[1].in_port, leaf(&f, a).1);
        assert_eq!(path.hops[3].out_port, leaf(&f, b).1);
        assert_eq!(path.dest_node, f.node(f.port(b).node).guid);
        assert_eq!(path.pkey, PKey::DEFAULT);
    }
}

#[test]
fn switch_lids_are_sources_and_destinations() {
    let (f, _, sim) = ft2(0);
    let (a, _) = pair_on_two_leaves(&f);
    let sw = f.switches().last().unwrap();
    let sw_lid = f.port(f.port_of(sw, 0).unwrap()).lid;
    let to_sw = sim.trace(lid(&f, a), sw_lid, Sl(0), PKey::DEFAULT).unwrap();
    assert_eq!(to_sw.dest_port, 0);
    assert_eq!(to_sw.dest_node, f.node(sw).guid);
    let from_sw = sim.trace(sw_lid, lid(&f, a), Sl(0), PKey::DEFAULT).unwrap();
    assert_eq!(from_sw.hops[0].node, f.node(sw).guid);
    assert_eq!(from_sw.hops[0].in_port, 0);
    assert_eq!(from_sw.hops.len(), 2);
}

#[test]
fn programming_by_smp_gives_the_same_fabric() {
    let (f, routes) = routed(&spec(), 1).unwrap();
    let mut sim = Sim::new(&f, SimConfig::default());
    let sm_port = ca_ports(&f)[0];
    let cfg = BringUp {
        sm_lid: lid(&f, sm_port),
        operational_vls: Some(VlCap::Vl0To3),
        activate: true,
    };
    let mut smp = BySmp::new(&mut sim, sm_port).unwrap();
    bring_up(&mut smp, &f, &routes, &cfg).unwrap();
    assert!(smp.requests > 500);
    let by_smp = sim.check_all_pairs(&AllPairsOptions::default());
    assert!(by_smp.all_delivered(), "{by_smp:#?}");

    let (_, _, direct) = programmed(&spec(), 1, &cfg).unwrap();
    assert_eq!(direct.check_all_pairs(&AllPairsOptions::default()), by_smp);
    for n in f.switches() {
        let a = sim.node(n).switch.as_ref().unwrap();
        let b = direct.node(n).switch.as_ref().unwrap();
        assert_eq!(a.info.linear_fdb_top, b.info.linear_fdb_top);
        assert_eq!(a.lft, b.lft);
    }
    for p in 0..f.ports().len() {
        let p = PortIdx(p as u32);
        let (x, y) = (&sim.port(p).info, &direct.port(p).info);
        assert_eq!(
            (x.lid, x.lmc, x.port_state, x.operational_vls),
            (y.lid, y.lmc, y.port_state, y.operational_vls),
            "port slot {p:?}"
        );
    }
}

#[test]
fn unknown_source_and_bad_destination() {
    let (f, _, sim) = ft2(0);
    let a = lid(&f, ca_ports(&f)[0]);
    assert_eq!(
        drop_of(&sim, Lid(0x999), a, 0, 0xffff),
        Dropped::UnknownSource { lid: Lid(0x999) }
    );
    assert_eq!(
        drop_of(&sim, a, Lid(0xC001), 0, 0xffff),
        Dropped::BadDestination { lid: Lid(0xC001) }
    );
    assert!(matches!(
        sim.trace_multicast(a, Lid(5)),
        Err(Dropped::BadDestination { .. })
    ));
    // A CA port without a LID sends nothing and gets nothing.
    let (_, _, mut sim) = ft2(0);
    let p = ca_ports(&f)[5];
    Direct { sim: &mut sim }
        .set_lid(p, Lid::NONE, 0, Lid::NONE)
        .unwrap();
    let all = sim.check_all_pairs(&AllPairsOptions::default());
    assert_eq!(all.pairs, 32 * 31);
    assert_eq!(all.dropped.unknown_source, 31);
    assert_eq!(all.dropped.total(), 31);
    assert_eq!(
        all.failures[0].why,
        Dropped::UnknownSource { lid: Lid::NONE }
    );
}

#[test]
fn missing_lft_entry_and_linear_fdb_top() {
    let (f, _, mut sim) = ft2(0);
    let (a, b) = pair_on_two_leaves(&f);
    let (lb, _) = leaf(&f, b);
    Direct { sim: &mut sim }
        .set_lft_entry(lb, lid(&f, b), 255)
        .unwrap();
    assert_eq!(
        drop_of(&sim, lid(&f, a), lid(&f, b), 0, 0xffff),
        Dropped::NoRoute {
            node: f.node(lb).guid,
            lid: lid(&f, b),
            top: sim.node(lb).switch.as_ref().unwrap().info.linear_fdb_top,
        }
    );
    let all = sim.check_all_pairs(&AllPairsOptions::default());
    // Every source but b itself (loopback) dies at b's leaf.
    assert_eq!(all.dropped.no_route, 31);
    assert_eq!(all.dropped.total(), 31);
    assert_eq!(all.failures.len(), 16);
    assert!(
        all.failures
            .iter()
            .all(|x| x.dst_lid == lid(&f, b) && x.why.reason() == DropReason::NoRoute)
    );

    // LinearFDBTop below a LID hides its entry.
    let (_, _, mut sim) = ft2(0);
    let top = Lid(lid(&f, b).0 - 1);
    let table = sim.node(lb).switch.as_ref().unwrap().lft.clone();
    Direct { sim: &mut sim }.set_lft(lb, top, &table).unwrap();
    assert!(matches!(
        drop_of(&sim, lid(&f, a), lid(&f, b), 0, 0xffff),
        Dropped::NoRoute { top: t, .. } if t == top
    ));
}

#[test]
fn ports_left_armed() {
    let (f, _, mut sim) = ft2(0);
    let (a, b) = pair_on_two_leaves(&f);
    Direct { sim: &mut sim }
        .set_state(a, PortState::Armed)
        .unwrap();
    let a_guid = f.node(f.port(a).node).guid;
    assert_eq!(
        drop_of(&sim, lid(&f, a), lid(&f, b), 0, 0xffff),
        Dropped::PortNotActive {
            node: a_guid,
            port: 1,
            state: PortState::Armed
        }
    );
    // Towards a: the last link's far end.
    assert_eq!(
        drop_of(&sim, lid(&f, b), lid(&f, a), 0, 0xffff),
        Dropped::PortNotActive {
            node: a_guid,
            port: 1,
            state: PortState::Armed
        }
    );
    // An uplink of b's leaf, on b's way: its switch end.
    let (_, _, mut sim) = ft2(0);
    let (lb, _) = leaf(&f, b);
    let up = lft(&sim, lb, lid(&f, a));
    let up_port = f.port_of(lb, up).unwrap();
    Direct { sim: &mut sim }
        .set_state(up_port, PortState::Armed)
        .unwrap();
    assert_eq!(
        drop_of(&sim, lid(&f, b), lid(&f, a), 0, 0xffff),
        Dropped::PortNotActive {
            node: f.node(lb).guid,
            port: up,
            state: PortState::Armed
        }
    );
    let all = sim.check_all_pairs(&AllPairsOptions::default());
    assert!(all.dropped.port_not_active > 0);
    assert_eq!(all.dropped.total(), all.dropped.port_not_active);
}

#[test]
fn partition_rules() {
    let (f, _, mut sim) = ft2(0);
    let cas = ca_ports(&f);
    let (a, b) = pair_on_two_leaves(&f);
    let c = *cas.iter().find(|&&c| c != a && c != b).unwrap();
    let (la, lb, lc) = (lid(&f, a), lid(&f, b), lid(&f, c));
    {
        let mut d = Direct { sim: &mut sim };
        // a and b: limited members of partition 1 only; c: full member of 1 and default.
        d.set_pkeys(a, &[PKey(0x0001)]).unwrap();
        d.set_pkeys(b, &[PKey(0x0001)]).unwrap();
        d.set_pkeys(c, &[PKey::DEFAULT, PKey(0x8001)]).unwrap();
    }
    let guid = |p: PortIdx| f.node(f.port(p).node).guid;
    assert_eq!(
        drop_of(&sim, la, lb, 0, 0x8001),
        Dropped::PKey {
            node: guid(b),
            port: 1,
            pkey: PKey(0x0001),
            check: PKeyCheck::BothLimited
        }
    );
    assert!(matches!(
        drop_of(&sim, la, lc, 0, 0xffff),
        Dropped::PKey {
            check: PKeyCheck::SourceLacks,
            ..
        }
    ));
    assert!(matches!(
        drop_of(&sim, lc, la, 0, 0xffff),
        Dropped::PKey {
            check: PKeyCheck::DestinationLacks,
            ..
        }
    ));
    // Limited to full and full to limited are fine; the packet carries the sender's entry.
    assert_eq!(
        sim.trace(la, lc, Sl(0), PKey(0x8001)).unwrap().pkey,
        PKey(0x0001)
    );
    assert_eq!(
        sim.trace(lc, la, Sl(0), PKey(0x0001)).unwrap().pkey,
        PKey(0x8001)
    );

    // Best shared key per pair: a-b share only a limited pair, a and the others nothing.
    let best = sim.check_all_pairs(&AllPairsOptions {
        pkey: PKeyChoice::BestShared,
        max_failures: 10_000,
        ..AllPairsOptions::default()
    });
    // a and b to themselves and each other: both limited (4). a and b to the 29 ports
    // with the default partition only, and back: nothing shared (116). With c they talk.
    let both_limited = best
        .failures
        .iter()
        .filter(|x| {
            matches!(
                x.why,
                Dropped::PKey {
                    check: PKeyCheck::BothLimited,
                    ..
                }
            )
        })
        .count();
    let not_shared = best
        .failures
        .iter()
        .filter(|x| {
            matches!(
                x.why,
                Dropped::PKey {
                    check: PKeyCheck::NotShared,
                    ..
                }
            )
        })
        .count();
    assert_eq!(both_limited, 4);
    assert_eq!(not_shared, 4 * 29);
    assert_eq!(best.dropped.pkey, best.dropped.total());
    assert_eq!(best.dropped.total(), 4 + 4 * 29);

    // Switch enforcement: c's leaf port checks inbound and outbound against its own table.
    let (lcn, lcp) = leaf(&f, c);
    let port = f.port_of(lcn, lcp).unwrap();
    {
        let mut d = Direct { sim: &mut sim };
        d.set_pkeys(port, &[PKey::DEFAULT]).unwrap();
        d.set_enforcement(port, true, true).unwrap();
    }
    assert!(sim.trace(lc, lb, Sl(0), PKey::DEFAULT).is_err()); // b lacks the default
    assert_eq!(
        drop_of(&sim, lc, la, 0, 0x8001),
        Dropped::PKey {
            node: f.node(lcn).guid,
            port: lcp,
            pkey: PKey(0x8001),
            check: PKeyCheck::SwitchInbound
        }
    );
    assert_eq!(
        drop_of(&sim, la, lc, 0, 0x8001),
        Dropped::PKey {
            node: f.node(lcn).guid,
            port: lcp,
            pkey: PKey(0x0001),
            check: PKeyCheck::SwitchOutbound
        }
    );
    let other = *cas.iter().find(|&&x| x != a && x != b && x != c).unwrap();
    assert!(sim.trace(lc, lid(&f, other), Sl(0), PKey::DEFAULT).is_ok());
}

#[test]
fn sl_to_vl15_and_operational_vls() {
    let (f, _, mut sim) = ft2(0);
    let (a, b) = pair_on_two_leaves(&f);
    let (la, lb) = (lid(&f, a), lid(&f, b));
    let mut table = [0u8; 16];
    table[3] = 15;
    table[1] = 2;
    Direct { sim: &mut sim }.set_sl2vl_port(a, table).unwrap();
    let a_guid = f.node(f.port(a).node).guid;
    assert_eq!(
        drop_of(&sim, la, lb, 3, 0xffff),
        Dropped::Vl15 {
            node: a_guid,
            in_port: 0,
            out_port: 1,
            sl: 3
        }
    );
    // VL2 needs OperationalVLs of 4 data VLs at both ends; every port has VL0 only.
    assert_eq!(
        drop_of(&sim, la, lb, 1, 0xffff),
        Dropped::VlNotOperational {
            node: a_guid,
            port: 1,
            vl: 2,
            data_vls: 1
        }
    );
    let (l, lp) = leaf(&f, a);
    {
        let mut d = Direct { sim: &mut sim };
        d.set_operational_vls(a, VlCap::Vl0To3).unwrap();
        assert_eq!(
            drop_of(d.sim, la, lb, 1, 0xffff),
            Dropped::VlNotOperational {
                node: f.node(l).guid,
                port: lp,
                vl: 2,
                data_vls: 1
            }
        );
        d.set_operational_vls(f.port_of(l, lp).unwrap(), VlCap::Vl0To3)
            .unwrap();
    }
    // The switches map SL1 to VL0 (their tables are all VL0), so the rest is fine.
    let path = sim.trace(la, lb, Sl(1), PKey::DEFAULT).unwrap();
    assert_eq!(path.hops[0].vl.0, 2);
    assert!(path.hops[1..].iter().all(|h| h.vl.0 == 0));

    // A switch that maps SL0 to VL15 from a's port to its uplink.
    let up = lft(&sim, l, lb);
    let mut t = [0u8; 16];
    t[0] = 15;
    Direct { sim: &mut sim }
        .set_sl2vl_switch(l, lp, up, t)
        .unwrap();
    assert_eq!(
        drop_of(&sim, la, lb, 0, 0xffff),
        Dropped::Vl15 {
            node: f.node(l).guid,
            in_port: lp,
            out_port: up,
            sl: 0
        }
    );
    let all = sim.check_all_pairs(&AllPairsOptions::default());
    assert_eq!(all.dropped.vl15, all.dropped.total());
    // a's packets to the destinations minhop sends through that uplink.
    assert!((1..=28).contains(&all.dropped.vl15), "{:?}", all.dropped);
}

#[test]
fn forwarding_loop() {
    let (f, _, mut sim) = ft2(0);
    let (a, b) = pair_on_two_leaves(&f);
    let (la, lb) = (lid(&f, a), lid(&f, b));
    let (l, _) = leaf(&f, a);
    let up = lft(&sim, l, lb);
    let (spine, spine_port) = f.peer(f.port_of(l, up).unwrap()).unwrap();
    // The spine sends b's LID back down to a's leaf, which sends it up again.
    Direct { sim: &mut sim }
        .set_lft_entry(spine, lb, spine_port)
        .unwrap();
    assert_eq!(
        drop_of(&sim, la, lb, 0, 0xffff),
        Dropped::Loop {
            node: f.node(l).guid,
            hops: 3
        }
    );
    let all = sim.check_all_pairs(&AllPairsOptions::default());
    assert!(all.dropped.loops >= 4, "{:?}", all.dropped);
    assert_eq!(all.dropped.total(), all.dropped.loops);
}

#[test]
fn lid_not_owned_where_it_arrives() {
    let (f, _, mut sim) = ft2(0);
    let (a, b) = pair_on_two_leaves(&f);
    let c = *ca_ports(&f)
        .iter()
        .find(|&&c| leaf(&f, c).0 != leaf(&f, a).0 && leaf(&f, c).0 != leaf(&f, b).0)
        .unwrap();
    let (la, lb, lc) = (lid(&f, a), lid(&f, b), lid(&f, c));
    // b and c swap LIDs behind the LFTs' back.
    let mut d = Direct { sim: &mut sim };
    d.set_lid(b, lc, 0, Lid::NONE).unwrap();
    d.set_lid(c, lb, 0, Lid::NONE).unwrap();
    assert_eq!(
        drop_of(&sim, la, lb, 0, 0xffff),
        Dropped::WrongLid {
            node: f.node(f.port(b).node).guid,
            port: 1,
            lid: lb
        }
    );
    // To each of the two LIDs every source but its new owner (loopback) arrives wrongly.
    let all = sim.check_all_pairs(&AllPairsOptions::default());
    assert_eq!(all.dropped.wrong_lid, 2 * 31);
    assert_eq!(all.dropped.total(), 2 * 31);
}

/// Breaks random settings and compares the memoised check with pair-by-pair walks.
#[test]
fn memoised_all_pairs_agree_with_walks() {
    for seed in 1..=12u64 {
        let (f, _, mut sim) = ft2(1);
        let mut rng = SplitMix64::new(seed);
        let cas = ca_ports(&f);
        let switches: Vec<NodeIdx> = f.switches().collect();
        let lids: Vec<Lid> = cas.iter().map(|&p| lid(&f, p)).collect();
        let links: Vec<(PortIdx, PortIdx)> = f.links().collect();
        let mut d = Direct { sim: &mut sim };
        let mut fresh_lid = 0x300u16;
        for _ in 0..6 {
            let pick = |rng: &mut SplitMix64, n: usize| rng.below(n as u64) as usize;
            match rng.below(9) {
                0 => {
                    let s = switches[pick(&mut rng, switches.len())];
                    let l = Lid(lids[pick(&mut rng, lids.len())].0 + rng.below(2) as u16);
                    let port = if rng.below(3) == 0 {
                        255
                    } else {
                        rng.below(9) as u8
                    };
                    d.set_lft_entry(s, l, port).unwrap();
                }
                1 => {
                    let (x, y) = links[pick(&mut rng, links.len())];
                    d.set_state(if rng.below(2) == 0 { x } else { y }, PortState::Armed)
                        .unwrap();
                }
                2 => {
                    let keys = [
                        vec![PKey(0x0001)],
                        vec![PKey(0x8001)],
                        vec![PKey(0x7fff), PKey(0x0001)],
                        vec![PKey::DEFAULT, PKey(0x0001)],
                    ];
                    let k = &keys[pick(&mut rng, keys.len())];
                    d.set_pkeys(cas[pick(&mut rng, cas.len())], k).unwrap();
                }
                3 => {
                    let (x, y) = links[pick(&mut rng, links.len())];
                    let p = if f.node(f.port(x).node).kind == NodeKind::Switch {
                        x
                    } else {
                        y
                    };
                    d.set_pkeys(p, &[PKey(0x8001)]).unwrap();
                    d.set_enforcement(p, rng.below(2) == 0, rng.below(2) == 0)
                        .unwrap();
                }
                4 => {
                    let mut t = [0u8; 16];
                    t[0] = [15, 1, 3][pick(&mut rng, 3)];
                    d.set_sl2vl_port(cas[pick(&mut rng, cas.len())], t).unwrap();
                }
                5 => {
                    let s = switches[pick(&mut rng, switches.len())];
                    let mut t = [0u8; 16];
                    t[0] = [15, 1][pick(&mut rng, 2)];
                    let (i, o) = (rng.below(9) as u8, 1 + rng.below(8) as u8);
                    d.set_sl2vl_switch(s, i, o, t).unwrap();
                }
                6 => {
                    let (x, y) = links[pick(&mut rng, links.len())];
                    d.set_operational_vls(x, VlCap::Vl0To1).unwrap();
                    d.set_operational_vls(y, VlCap::Vl0To1).unwrap();
                }
                7 => {
                    let p = cas[pick(&mut rng, cas.len())];
                    fresh_lid += 2;
                    d.set_lid(p, Lid(fresh_lid), 1, Lid::NONE).unwrap();
                }
                _ => {
                    // A loop between a leaf and a spine for one LID.
                    let s = switches[pick(&mut rng, switches.len())];
                    let l = lids[pick(&mut rng, lids.len())];
                    let out = lft(d.sim, s, l);
                    if let Some((peer, back)) = f.port_of(s, out).and_then(|p| f.peer(p)) {
                        if f.node(peer).kind == NodeKind::Switch {
                            d.set_lft_entry(peer, l, back).unwrap();
                        }
                    }
                }
            }
        }
        let t = Tracer::new(&sim);
        for pkey in [
            PKeyChoice::Fixed(PKey::DEFAULT),
            PKeyChoice::Fixed(PKey(0x8001)),
            PKeyChoice::BestShared,
        ] {
            for sl in [0, 1] {
                let opts = AllPairsOptions {
                    sl: Sl(sl),
                    pkey,
                    max_failures: usize::MAX,
                    ..AllPairsOptions::default()
                };
                let memo = t.check_all_pairs(&opts);
                let walked = t.check_all_pairs(&AllPairsOptions {
                    link_load: true,
                    ..opts
                });
                assert_eq!(memo.pairs, walked.pairs);
                assert_eq!(
                    memo.delivered, walked.delivered,
                    "seed {seed} {pkey:?} sl {sl}"
                );
                assert_eq!(memo.dropped, walked.dropped, "seed {seed} {pkey:?} sl {sl}");
                assert_eq!(memo.hops, walked.hops, "seed {seed}");
                assert_eq!(memo.failures, walked.failures, "seed {seed}");
                // Every failure's detail is the single trace's.
                for x in memo.failures.iter().take(50) {
                    if let Dropped::PKey {
                        check: PKeyCheck::NotShared,
                        ..
                    } = x.why
                    {
                        continue;
                    }
                    let single = t.trace(x.src_lid, x.dst_lid, Sl(sl), x.pkey);
                    assert_eq!(single, Err(x.why), "seed {seed}");
                }
            }
        }
    }
}

/// Flows of one pair over a leaf's uplinks: static takes one, adaptive all of them.
#[test]
fn adaptive_routing_spreads_flows_over_all_uplinks() {
    let (f, _, mut sim) = ft2(0);
    let ar = min_hop_ar(&f).unwrap();
    let (a, b) = pair_on_two_leaves(&f);
    let (la, lb) = (lid(&f, a), lid(&f, b));
    let (l, _) = leaf(&f, a);
    let uplinks: Vec<u8> = f
        .node_ports(l)
        .filter(|&p| {
            f.peer(p)
                .is_some_and(|(n, _)| f.node(n).kind == NodeKind::Switch)
        })
        .map(|p| f.port(p).num)
        .collect();
    assert_eq!(uplinks.len(), 4);
    let first_hop = |path: &sm_sim::trace::Path| path.hops[1].out_port;
    let t = Tracer::new(&sim);
    let mut used = Vec::new();
    for flow in 0..64 {
        let p = t
            .trace_adaptive(la, lb, Sl(0), PKey::DEFAULT, &ar, flow)
            .unwrap();
        assert_eq!(p.hops.len(), 4);
        used.push(first_hop(&p));
        // Deterministic.
        assert_eq!(
            t.trace_adaptive(la, lb, Sl(0), PKey::DEFAULT, &ar, flow)
                .unwrap(),
            p
        );
    }
    used.sort_unstable();
    used.dedup();
    assert_eq!(used, uplinks);
    let fixed = t.trace(la, lb, Sl(0), PKey::DEFAULT).unwrap();
    assert!(uplinks.contains(&first_hop(&fixed)));

    // All pairs: every uplink of every leaf carries flows, and evenly.
    let opts = AllPairsOptions::default();
    let all = t.check_all_pairs_adaptive(&opts, &ar);
    assert!(all.all_delivered());
    assert_eq!(
        t.check_all_pairs_adaptive(&opts, &ar),
        all,
        "same flows, same counts"
    );
    let mut loads = Vec::new();
    for n in f.switches() {
        for p in f.node_ports(n) {
            let up = f
                .peer(p)
                .is_some_and(|(m, _)| f.node(m).kind == NodeKind::Switch);
            let is_leaf = f.node_ports(n).any(|q| {
                f.peer(q)
                    .is_some_and(|(m, _)| f.node(m).kind == NodeKind::Ca)
            });
            if up && is_leaf {
                loads.push(all.link_flows[p.idx()]);
            }
        }
    }
    assert_eq!(loads.len(), 32);
    // 4 hosts × 28 remote destinations = 112 flows per leaf over 4 uplinks.
    assert_eq!(loads.iter().sum::<u64>(), 8 * 112);
    let (min, max) = (*loads.iter().min().unwrap(), *loads.iter().max().unwrap());
    assert!(min >= 14 && max <= 45, "uplink flows {loads:?}");
    drop(t);

    // A dead uplink: adaptive flows from the leaf avoid it; the static route to some
    // destination dies on it.
    let dead = f.port_of(l, uplinks[0]).unwrap();
    sim.link_down(dead);
    let t = Tracer::new(&sim);
    for &b in &ca_ports(&f) {
        if leaf(&f, b).0 == l {
            continue;
        }
        for flow in 0..8 {
            let p = t
                .trace_adaptive(la, lid(&f, b), Sl(0), PKey::DEFAULT, &ar, flow)
                .unwrap();
            assert_ne!(p.hops[1].out_port, uplinks[0]);
        }
    }
    let fixed = t.check_all_pairs(&opts);
    assert!(fixed.dropped.port_not_active > 0);
}

/// An MFT tree rooted at one spine: only the members receive; a second path is a loop; a
/// missing entry cuts off a branch.
#[test]
fn multicast_reaches_exactly_the_tree() {
    let (f, routes) = routed(&spec(), 0).unwrap();
    let mut sim = Sim::new(&f, SimConfig::default());
    let cas = ca_ports(&f);
    let mut smp = BySmp::new(&mut sim, cas[0]).unwrap();
    bring_up(&mut smp, &f, &routes, &BringUp::default()).unwrap();

    let mlid = Lid(0xC005);
    let members = [cas[0], cas[1], cas[6], cas[17], cas[30]];
    let spines: Vec<NodeIdx> = f
        .switches()
        .filter(|&n| {
            f.node_ports(n).all(|p| {
                f.peer(p)
                    .is_none_or(|(m, _)| f.node(m).kind == NodeKind::Switch)
            })
        })
        .collect();
    assert_eq!(spines.len(), 4);
    let root = spines[0];
    // Leaves of the members: their host ports plus the uplink to the root.
    let mut leaves: Vec<NodeIdx> = members.iter().map(|&m| leaf(&f, m).0).collect();
    leaves.sort_unstable();
    leaves.dedup();
    let up_to = |l: NodeIdx, s: NodeIdx| {
        f.node_ports(l)
            .find(|&p| f.peer(p).is_some_and(|(n, _)| n == s))
            .map(|p| f.port(p).num)
            .unwrap()
    };
    let mut root_ports = Vec::new();
    for &l in &leaves {
        let mut ports: Vec<u8> = members
            .iter()
            .filter(|&&m| leaf(&f, m).0 == l)
            .map(|&m| leaf(&f, m).1)
            .collect();
        ports.push(up_to(l, root));
        smp.set_mft(l, mlid, &ports).unwrap();
        root_ports.push(up_to(root, l));
    }
    smp.set_mft(root, mlid, &root_ports).unwrap();
    drop(smp);

    let t = Tracer::new(&sim);
    let m = t.trace_multicast(lid(&f, members[0]), mlid).unwrap();
    assert!(m.drops.is_empty(), "{:?}", m.drops);
    assert_eq!(m.reached, members[1..].to_vec());
    assert_eq!(m.reached_guids.len(), 4);
    // From the member on its own leaf with another: the rest, never itself.
    let m = t.trace_multicast(lid(&f, members[3]), mlid).unwrap();
    let mut want = members.to_vec();
    want.retain(|&x| x != members[3]);
    assert_eq!(m.reached, want);
    drop(t);

    // A second spine joins two member leaves: the copy comes round again.
    let other = spines[1];
    let mut d = Direct { sim: &mut sim };
    let (l0, l1) = (leaves[0], leaves[1]);
    let mut ports: Vec<u8> = members
        .iter()
        .filter(|&&m| leaf(&f, m).0 == l0)
        .map(|&m| leaf(&f, m).1)
        .collect();
    ports.extend([up_to(l0, root), up_to(l0, other)]);
    d.set_mft(l0, mlid, &ports).unwrap();
    d.set_mft(other, mlid, &[up_to(other, l0), up_to(other, l1)])
        .unwrap();
    let m = sim.trace_multicast(lid(&f, members[0]), mlid).unwrap();
    assert!(
        m.drops
            .iter()
            .any(|x| matches!(x, Dropped::Loop { node, .. } if *node == f.node(l1).guid)),
        "{:?}",
        m.drops
    );
    assert_eq!(m.reached, members[1..].to_vec());

    // No entry at the root: only the source's own leaf mates get it.
    let mut d = Direct { sim: &mut sim };
    d.set_mft(other, mlid, &[]).unwrap();
    d.set_mft(root, mlid, &[]).unwrap();
    let m = sim.trace_multicast(lid(&f, members[0]), mlid).unwrap();
    assert_eq!(m.reached, vec![members[1]]);
    assert!(
        m.drops
            .iter()
            .any(|x| matches!(x, Dropped::NoRoute { node, .. } if *node == f.node(root).guid))
    );
}
