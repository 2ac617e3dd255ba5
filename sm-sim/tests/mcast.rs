//! Multicast end to end on the simulated fabric: groups kept by the registry
//! (`sm_core::mcast`), trees and MFTs computed by `sm_routing::mcast`, tables written into
//! generated fabrics of every family, then a multicast packet traced from every member:
//! every receiving member but the sender gets one copy, nobody else (non-members, send-only
//! members) gets any, and no copy loops; after members leave, only the MFT blocks the diff
//! names are rewritten and the fabric still delivers exactly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use sm_core::fabric::{Fabric, NodeKind};
use sm_core::generate::{
    Dragonfly, DragonflyPlus, FatTree2, FatTree3, GenSpec, Grid, KaryNTree, Random, SplitMix64,
};
use sm_core::mcast::{CREATE_COMPS, JOIN_COMPS, McConfig, McRegistry, McRequest, PortTable};
use sm_core::partitions::Partitions;
use sm_mad::link::{Mtu, Rate};
use sm_mad::mcmember_record::{self as mcr, JoinState, Scope, ipoib_broadcast_mgid};
use sm_mad::{Gid, Guid, Lid, PKey};
use sm_routing::mcast::{McastPlanner, Mfts, TreeOrder};
use sm_routing::{Options, SwIdx, Topo};
use sm_sim::Sim;
use sm_sim::testkit::{BringUp, Direct, Programmer, programmed};

const PREFIX: u64 = 0xfe80_0000_0000_0000;

fn specs() -> Vec<GenSpec> {
    vec![
        GenSpec::FatTree2(FatTree2::new(8)),
        GenSpec::FatTree3(FatTree3::new(4)),
        GenSpec::KaryNTree(KaryNTree {
            radix: 4,
            levels: 3,
            ca_ports: 1,
        }),
        GenSpec::Torus(Grid::new(vec![3, 4], 2)),
        GenSpec::Mesh(Grid::new(vec![3, 3], 1)),
        GenSpec::Dragonfly(Dragonfly {
            groups: 4,
            switches_per_group: 3,
            hosts_per_switch: 2,
            global_per_switch: 1,
            radix: None,
            ca_ports: 1,
        }),
        GenSpec::DragonflyPlus(DragonflyPlus {
            groups: 3,
            leaves_per_group: 2,
            spines_per_group: 2,
            hosts_per_leaf: 2,
            global_per_spine: 1,
            radix: None,
            ca_ports: 1,
        }),
        GenSpec::Random(Random {
            switches: 10,
            radix: 8,
            hosts_per_switch: 2,
            links: None,
            seed: 7,
            ca_ports: 1,
        }),
        GenSpec::FatTree2(FatTree2 {
            ca_ports: 2,
            ..FatTree2::new(8)
        }),
    ]
}

/// End ports that may join: every CA port and every switch's port 0, as (GUID, LID).
fn end_ports(f: &Fabric) -> Vec<(Guid, Lid)> {
    f.end_ports()
        .filter(|&p| {
            let port = f.port(p);
            f.node(port.node).kind == NodeKind::Switch || port.remote.is_some()
        })
        .map(|p| (f.port(p).guid, f.port(p).lid))
        .collect()
}

fn directory(f: &Fabric) -> PortTable {
    let mut t = PortTable::new();
    for (g, _) in end_ports(f) {
        t.insert(g, Mtu::Mtu4096, Rate::Gbps100, vec![PKey(0xffff)]);
    }
    t
}

fn request(mgid: Gid, port: Guid, js: JoinState, comp_mask: u64) -> McRequest {
    McRequest {
        record: mcr::Repr {
            mgid,
            port_gid: Gid::new(PREFIX, port),
            q_key: 0x0b1b,
            p_key: PKey(0xffff),
            join_state: js,
            ..mcr::Repr::default()
        },
        comp_mask,
        requester: port,
    }
}

fn receives(js: JoinState) -> bool {
    js.0 & (JoinState::FULL_MEMBER.0 | JoinState::NON_MEMBER.0) != 0
}

/// Writes every MLID of `mlids` into the simulator as `mfts` has it.
fn program(sim: &mut Sim, topo: &Topo<'_>, mfts: &Mfts, mlids: &[Lid]) {
    let mut d = Direct { sim };
    for (i, t) in mfts.switches.iter().enumerate() {
        for &mlid in mlids {
            let ports: Vec<u8> = t.mask(mlid).ports().collect();
            d.set_mft(topo.switches[i], mlid, &ports).unwrap();
        }
    }
}

/// Traces from every member of every group; checks exact delivery. Returns copies traced.
fn check(sim: &Sim, reg: &McRegistry, lid_of: &dyn Fn(Guid) -> Lid, what: &str) -> usize {
    let mut n = 0;
    for g in reg.groups() {
        let members = g.tree_members();
        for &(src, _) in &members {
            let mut want: Vec<Guid> = members
                .iter()
                .filter(|&&(m, js)| m != src && receives(js))
                .map(|&(m, _)| m)
                .collect();
            want.sort_unstable();
            let out = sim
                .trace_multicast(lid_of(src), g.mlid)
                .unwrap_or_else(|e| panic!("{what}: {} from {src}: {e}", g.mgid));
            let mut got: Vec<Guid> = out.reached_guids.iter().map(|&(g, _)| g).collect();
            got.sort_unstable();
            assert_eq!(got, want, "{what}: group {} from {src}", g.mgid);
            // A copy dies only where nobody waits (a group of senders alone).
            assert!(
                out.drops.is_empty() || want.is_empty(),
                "{what}: group {} from {src}: {:?}",
                g.mgid,
                out.drops
            );
            n += got.len();
        }
    }
    n
}

/// One fabric, three groups of random members, then random leaves.
fn run(spec: &GenSpec, engine: &str, seed: u64) {
    let (f, _, mut sim) = programmed(spec, 0, &BringUp::default()).unwrap();
    let topo = Topo::new(&f).unwrap();
    // The order of the engine that routes the fabric (the chain moves on when it declines).
    let routes = sm_routing::engine(engine)
        .unwrap()
        .route(&topo, &Options::default());
    let order = match routes {
        Ok(_) => TreeOrder::for_engine(&topo, engine, &Options::default()).unwrap(),
        Err(_) => TreeOrder::Free,
    };
    let ranked = matches!(order, TreeOrder::Ranked(_));
    let mut planner = McastPlanner::new(&topo, order.clone());
    let ports = directory(&f);
    let eps = end_ports(&f);
    let lid_of = |g: Guid| eps.iter().find(|e| e.0 == g).unwrap().1;
    let what = format!("{} / {engine} / seed {seed}", spec.family());
    let mut rng = SplitMix64::new(seed);
    let mut reg = McRegistry::new(McConfig {
        mlid_capacity: 1024,
        ..McConfig::default()
    });

    // Half the cases leave switches out: then a tree on a fat-tree never needs to fall back
    // (two top switches as members have no common ancestor; see sm_routing::mcast).
    let switches_join = rng.below(2) == 0;
    let is_switch = |g: Guid| f.node_by_guid(g).is_some_and(|n| topo.sw_of(n).is_some());
    let eps: Vec<(Guid, Lid)> = eps
        .iter()
        .copied()
        .filter(|e| switches_join || !is_switch(e.0))
        .collect();
    let fat_tree = matches!(
        spec,
        GenSpec::FatTree2(_) | GenSpec::FatTree3(_) | GenSpec::KaryNTree(_)
    );

    // Three groups, SA-assigned MGIDs; each member with random bits.
    let mut mgids = Vec::new();
    for _ in 0..3 {
        let first = eps[rng.below(eps.len() as u64) as usize].0;
        let js = [JoinState::FULL_MEMBER, JoinState::SEND_ONLY_FULL_MEMBER][rng.below(2) as usize];
        let out = reg
            .join(&ports, &request(Gid::default(), first, js, CREATE_COMPS))
            .unwrap();
        mgids.push(out.mgid);
        for &(g, _) in &eps {
            if g == first || rng.below(3) != 0 {
                continue;
            }
            let js = JoinState(1 + rng.below(15) as u8);
            reg.join(&ports, &request(out.mgid, g, js, JOIN_COMPS))
                .unwrap();
        }
    }

    let mut mfts = Mfts::new(&topo);
    let mut trees = Vec::new();
    for g in reg.groups() {
        let t = planner.tree(g.mlid, &g.tree_members());
        assert!(t.unreachable.is_empty(), "{what}: {:?}", t.unreachable);
        if ranked && !t.fallback {
            let TreeOrder::Ranked(rank) = &order else {
                unreachable!()
            };
            for (s, link) in &t.switches {
                if let Some(l) = link {
                    let key = |x: SwIdx| (rank[x.idx()], topo.guid(x));
                    assert!(key(l.parent) < key(*s), "{what}: a tree link goes down");
                }
            }
        }
        assert!(
            !(ranked && fat_tree && !switches_join && t.fallback),
            "{what}: a fat-tree group of CAs fell back"
        );
        mfts.apply(&t);
        trees.push(t);
    }
    let mlids: Vec<Lid> = reg.groups().map(|g| g.mlid).collect();
    program(&mut sim, &topo, &mfts, &mlids);
    let copies = check(&sim, &reg, &lid_of, &what);
    assert!(copies > 0, "{what}: nothing delivered");

    // Random leaves (some groups die), then only what the diff names is rewritten.
    let before = mfts.clone();
    for &mgid in &mgids {
        let Some(g) = reg.get(&mgid) else { continue };
        let leaving: Vec<(Guid, JoinState)> = g
            .tree_members()
            .into_iter()
            .filter(|_| rng.below(2) == 0)
            .collect();
        for (port, js) in leaving {
            let Some(now) = reg
                .get(&mgid)
                .and_then(|g| g.member(port))
                .map(|m| m.join_state)
            else {
                continue;
            };
            let bits = JoinState(js.0 & now.0 & (1 + rng.below(15) as u8));
            if bits.is_empty() {
                continue;
            }
            let out = reg
                .leave(&ports, &request(mgid, port, bits, JOIN_COMPS))
                .unwrap();
            if out.deleted {
                mfts.clear(out.mlid);
            }
        }
        if let Some(g) = reg.get(&mgid) {
            mfts.apply(&planner.tree(g.mlid, &g.tree_members()));
        }
    }
    let diff = mfts.diff(&before);
    let mut replay = before.clone();
    for u in &diff.blocks {
        replay.switches[u.switch].set_block(u.modifier, &u.block);
    }
    assert_eq!(replay, mfts, "{what}: the diff misses a change");
    // Program only the MLIDs of changed blocks.
    let mut changed: Vec<Lid> = Vec::new();
    for u in &diff.blocks {
        for (slot, _) in u.block.port_mask_block.iter().enumerate() {
            let l = 0xc000 + u32::from(u.modifier.block) * 32 + slot as u32;
            if mlids.contains(&Lid(l as u16)) {
                changed.push(Lid(l as u16));
            }
        }
    }
    changed.sort_unstable();
    changed.dedup();
    program(&mut sim, &topo, &mfts, &changed);
    check(&sim, &reg, &lid_of, &format!("{what}, after leaves"));
}

#[test]
fn every_family_delivers_exactly() {
    for (i, spec) in specs().iter().enumerate() {
        for (j, engine) in ["updn", "ftree", "minhop"].iter().enumerate() {
            run(spec, engine, (i * 3 + j) as u64);
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    #[test]
    fn prop_random_groups_deliver_exactly(family in 0..9usize, engine in 0..3usize, seed: u64) {
        let specs = specs();
        run(&specs[family], ["updn", "ftree", "minhop"][engine], seed);
    }
}

#[test]
fn ipoib_broadcast_groups_of_two_partitions() {
    let conf = "Default=0x7fff, ipoib : ALL=full ;\n\
                Storage=0x0002, ipoib, scope=2 : ALL=full ;";
    let parts = Partitions::parse(conf, std::path::Path::new("p.conf")).unwrap();
    let (f, _, mut sim) =
        programmed(&GenSpec::FatTree2(FatTree2::new(8)), 0, &BringUp::default()).unwrap();
    let topo = Topo::new(&f).unwrap();
    let mut reg = McRegistry::default();
    let sync = reg.apply_partitions(&parts);
    assert!(sync.failed.is_empty());
    let default = ipoib_broadcast_mgid(PKey(0x7fff), Scope::LinkLocal);
    let storage = ipoib_broadcast_mgid(PKey(0x0002), Scope::LinkLocal);
    assert_eq!(reg.get(&default).unwrap().mlid, Lid(0xc000));
    assert_eq!(reg.get(&storage).unwrap().mlid, Lid(0xc001));

    // Every host joins the default group; the even ones the storage group too.
    let mut ports = PortTable::new();
    let eps = end_ports(&f);
    let cas: Vec<Guid> = eps
        .iter()
        .filter(|e| f.node(f.port(f.port_by_guid(e.0).unwrap()).node).kind == NodeKind::Ca)
        .map(|e| e.0)
        .collect();
    for (i, &g) in cas.iter().enumerate() {
        let keys = if i % 2 == 0 {
            vec![PKey(0xffff), PKey(0x8002)]
        } else {
            vec![PKey(0xffff)]
        };
        ports.insert(g, Mtu::Mtu4096, Rate::Gbps100, keys);
    }
    for (i, &g) in cas.iter().enumerate() {
        reg.join(
            &ports,
            &request(default, g, JoinState::FULL_MEMBER, JOIN_COMPS),
        )
        .unwrap();
        let res = reg.join(
            &ports,
            &request(storage, g, JoinState::FULL_MEMBER, JOIN_COMPS),
        );
        assert_eq!(res.is_ok(), i % 2 == 0, "{g}");
    }
    let mut planner = McastPlanner::new(
        &topo,
        TreeOrder::for_engine(&topo, "ftree", &Options::default()).unwrap(),
    );
    let mut mfts = Mfts::new(&topo);
    for g in reg.groups() {
        mfts.apply(&planner.tree(g.mlid, &g.tree_members()));
    }
    program(&mut sim, &topo, &mfts, &[Lid(0xc000), Lid(0xc001)]);
    let lid_of = |g: Guid| eps.iter().find(|e| e.0 == g).unwrap().1;
    let copies = check(&sim, &reg, &lid_of, "two partitions");
    assert_eq!(copies, 32 * 31 + 16 * 15);
    // An odd host sends to the storage MLID: it is no member, but its leaf is in the tree,
    // so the packet reaches the members (the fabric does not check membership; P_Keys do).
    let out = sim.trace_multicast(lid_of(cas[1]), Lid(0xc001)).unwrap();
    assert_eq!(out.reached_guids.len(), 16);
}
