//! Multicast trees and credit loops: with the order of `updn` or `ftree`, the channel
//! dependencies of many multicast trees added to those of the engine's unicast routes stay
//! acyclic; a tree that had to fall back (members with no common ancestor) can close a
//! cycle, which is why it says so.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Channel, fabric, has_credit_loop, has_credit_loop_with};
use sm_core::NodeKind;
use sm_core::generate::{
    Dragonfly, FatTree2, FatTree3, GenSpec, Grid, KaryNTree, Random, SplitMix64,
};
use sm_mad::mcmember_record::JoinState;
use sm_mad::{Guid, Lid};
use sm_routing::mcast::{GroupTree, McastPlanner, TreeOrder};
use sm_routing::{Options, SwIdx, Topo, engine};

/// The turns multicast copies take: into switch `s` over a link its tree neighbour sends on,
/// out over every other link of `s`'s mask.
fn turns(topo: &Topo<'_>, t: &GroupTree) -> Vec<(Channel, Channel)> {
    let mut out = Vec::new();
    for &(s, mask) in &t.masks {
        for a in topo.adj(s) {
            // Does the neighbour send to s?
            let q = a.peer;
            let Some((qi, _)) = topo
                .adj(q)
                .iter()
                .enumerate()
                .find(|(_, b)| b.peer == s && b.port == a.peer_port)
            else {
                continue;
            };
            if !t.mask(q).has(a.peer_port) {
                continue;
            }
            for (j, b) in topo.adj(s).iter().enumerate() {
                if b.port != a.port && mask.has(b.port) {
                    out.push(((q, qi), (s, j)));
                }
            }
        }
    }
    out
}

fn ca_guids(topo: &Topo<'_>) -> Vec<Guid> {
    topo.dests
        .iter()
        .filter(|d| d.kind != NodeKind::Switch)
        .map(|d| d.guid)
        .collect()
}

fn check(spec: &GenSpec, name: &str, groups: u16, seed: u64) {
    let f = fabric(spec, 0);
    let topo = Topo::new(&f).unwrap();
    let opts = Options::default();
    let routes = engine(name).unwrap().route(&topo, &opts).unwrap();
    assert!(!has_credit_loop(&topo, &routes));
    let order = TreeOrder::for_engine(&topo, name, &opts).unwrap();
    let mut planner = McastPlanner::new(&topo, order);
    let cas = ca_guids(&topo);
    let mut rng = SplitMix64::new(seed);
    let mut extra = Vec::new();
    for k in 0..groups {
        let mut members: Vec<(Guid, JoinState)> = Vec::new();
        for &g in &cas {
            if rng.below(3) == 0 {
                members.push((g, JoinState(1 + rng.below(15) as u8)));
            }
        }
        let t = planner.tree(Lid(0xc000 + k), &members);
        assert!(
            !t.fallback,
            "{} / {name}: group {k} fell back",
            spec.family()
        );
        extra.extend(turns(&topo, &t));
    }
    assert!(!extra.is_empty());
    assert!(
        !has_credit_loop_with(&topo, &routes, &extra),
        "{} / {name}: multicast closes a credit loop",
        spec.family()
    );
}

#[test]
fn multicast_adds_no_credit_loop_to_up_down_routes() {
    let specs = [
        GenSpec::FatTree2(FatTree2::new(8)),
        GenSpec::FatTree3(FatTree3::new(4)),
        GenSpec::KaryNTree(KaryNTree {
            radix: 4,
            levels: 3,
            ca_ports: 1,
        }),
        GenSpec::Torus(Grid::new(vec![4, 4], 1)),
        GenSpec::Mesh(Grid::new(vec![3, 4], 1)),
        GenSpec::Dragonfly(Dragonfly {
            groups: 5,
            switches_per_group: 2,
            hosts_per_switch: 1,
            global_per_switch: 2,
            radix: None,
            ca_ports: 1,
        }),
        GenSpec::Random(Random {
            switches: 12,
            radix: 8,
            hosts_per_switch: 1,
            links: None,
            seed: 3,
            ca_ports: 1,
        }),
    ];
    for (i, spec) in specs.iter().enumerate() {
        check(spec, "updn", 24, i as u64);
    }
    for (i, spec) in specs.iter().take(3).enumerate() {
        check(spec, "ftree", 24, 100 + i as u64);
    }
}

#[test]
fn a_fallback_tree_can_close_a_credit_loop() {
    // Two spines of a leaf/spine tree as members: no switch is above both, so every tree
    // joins them through a leaf (down, then up). Groups that turn at different leaves close
    // a cycle with the unicast routes through the spines.
    let f = fabric(&GenSpec::FatTree2(FatTree2::new(8)), 0);
    let topo = Topo::new(&f).unwrap();
    let opts = Options::default();
    let routes = engine("updn").unwrap().route(&topo, &opts).unwrap();
    let order = TreeOrder::for_engine(&topo, "updn", &opts).unwrap();
    let spines: Vec<SwIdx> = (0..topo.num_switches() as u32)
        .map(SwIdx)
        .filter(|&s| {
            !topo
                .dests
                .iter()
                .any(|d| d.sw == s && d.kind != NodeKind::Switch)
        })
        .collect();
    let members = [
        (topo.guid(spines[0]), JoinState::FULL_MEMBER),
        (topo.guid(spines[1]), JoinState::FULL_MEMBER),
    ];
    let mut planner = McastPlanner::new(&topo, order);
    let mut extra = Vec::new();
    let mut valleys = Vec::new();
    for k in 0..16 {
        let t = planner.tree(Lid(0xc000 + k), &members);
        assert!(t.fallback);
        valleys.push(t.root);
        extra.extend(turns(&topo, &t));
    }
    valleys.sort_unstable();
    valleys.dedup();
    assert!(valleys.len() > 1);
    assert!(has_credit_loop_with(&topo, &routes, &extra));
}
