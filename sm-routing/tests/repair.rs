//! Repairs: after links go down only the broken routes move, the result is valid under
//! the engine's rule, and when the links return the tables come back as they were.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{fabric, has_credit_loop};
use sm_core::NodeKind;
use sm_core::fabric::{Fabric, PortIdx};
use sm_core::generate::{FatTree2, FatTree3, GenSpec, Grid};
use sm_mad::Lid;
use sm_routing::repair::{Damage, Move, Outcome, repair};
use sm_routing::{Options, Routes, SwIdx, Topo, ValidateOptions, chain, validate};

fn route(name: &str, f: &Fabric) -> Routes {
    let topo = Topo::new(f).unwrap();
    chain::engine(name)
        .unwrap()
        .route(&topo, &Options::default())
        .unwrap()
}

fn apply(r: &Routes, moved: &[Move]) -> Routes {
    let mut out = r.clone();
    for m in moved {
        assert_eq!(out.lft[m.switch.idx()][usize::from(m.lid.0)], m.old);
        out.lft[m.switch.idx()][usize::from(m.lid.0)] = m.new;
    }
    out
}

/// No credit loop when the rule promises it; every pair reaches, but for up*/down*, whose
/// ranks may leave a switch's own LID without a legal path from some leaves (never a CA's).
fn assert_valid(f: &Fabric, r: &Routes, what: &str) {
    let topo = Topo::new(f).unwrap();
    let opts = ValidateOptions {
        max_failures: usize::MAX,
        ..ValidateOptions::default()
    };
    let v = validate(&topo, r, &opts);
    if r.engine == "minhop" {
        assert_eq!(v.unreachable_pairs, 0, "{what}: {:?}", v.failures);
        return;
    }
    assert!(!has_credit_loop(&topo, r), "{what}: credit loop");
    for x in &v.failures {
        let n = f.node_by_guid(x.dest).unwrap();
        assert_eq!(f.node(n).kind, NodeKind::Switch, "{what}: {x:?}");
    }
}

/// Switch-to-switch links (a, b) of the fabric.
fn switch_links(f: &Fabric) -> Vec<(PortIdx, PortIdx)> {
    f.links()
        .filter(|&(a, b)| {
            f.node(f.port(a).node).kind == NodeKind::Switch
                && f.node(f.port(b).node).kind == NodeKind::Switch
        })
        .collect()
}

/// Cuts the links and repairs for it.
fn cut(f: &mut Fabric, r: &Routes, links: &[(PortIdx, PortIdx)]) -> (Routes, Outcome) {
    let mut damage = Damage::default();
    {
        let topo = Topo::new(f).unwrap();
        for &(a, b) in links {
            damage.link_down(&topo, a, b);
        }
    }
    for &(a, _) in links {
        f.disconnect(a);
    }
    let topo = Topo::new(f).unwrap();
    let out = repair(&topo, &r.rule, &r.lft, &damage).unwrap();
    (apply(r, &out.moved), out)
}

/// Puts the links back and repairs, returning the entries `moved` moved.
fn mend(f: &mut Fabric, r: &Routes, links: &[(PortIdx, PortIdx)], moved: &[Move]) -> Routes {
    for &(a, b) in links {
        f.connect(a, b).unwrap();
    }
    let topo = Topo::new(f).unwrap();
    let damage = Damage {
        restore: moved.iter().map(|m| (m.switch, m.lid, m.old)).collect(),
        ..Damage::default()
    };
    let out = repair(&topo, &r.rule, &r.lft, &damage).unwrap();
    assert_eq!(out.restored as usize, out.moved.len());
    apply(r, &out.moved)
}

/// Entries whose old port no longer starts a shortest path in `after` (computed from
/// scratch): what any repair keeping minimal paths must move.
fn must_move_minhop(after: &Fabric, old: &Routes) -> u64 {
    let topo = Topo::new(after).unwrap();
    let hops = topo.hop_matrix();
    let mut n = 0;
    for d in topo.dests.iter() {
        for lid in d.lids() {
            for s in 0..topo.num_switches() as u32 {
                let s = SwIdx(s);
                let want = hops.get(s, d.sw);
                if want == u8::MAX || s == d.sw {
                    continue;
                }
                let e = old.lft[s.idx()][usize::from(lid.0)];
                let ok = topo
                    .adj(s)
                    .iter()
                    .any(|a| a.port == e && hops.get(a.peer, d.sw) + 1 == want);
                n += u64::from(!ok);
            }
        }
    }
    n
}

/// Whether `s`'s path to `lid` in `r` over `f` uses one of `links`.
fn crosses(f: &Fabric, r: &Routes, s: SwIdx, lid: Lid, links: &[(PortIdx, PortIdx)]) -> bool {
    let topo = Topo::new(f).unwrap();
    let dead: Vec<(SwIdx, u8)> = links
        .iter()
        .flat_map(|&(a, b)| [a, b])
        .filter_map(|q| Some((topo.sw_of(f.port(q).node)?, f.port(q).num)))
        .collect();
    let mut at = s;
    for _ in 0..64 {
        let e = r.lft[at.idx()][usize::from(lid.0)];
        if dead.contains(&(at, e)) {
            return true;
        }
        match topo.adj(at).iter().find(|a| a.port == e) {
            Some(a) => at = a.peer,
            None => return false,
        }
    }
    false
}

fn ft3() -> Fabric {
    fabric(
        &GenSpec::FatTree3(FatTree3 {
            pods: Some(4),
            ..FatTree3::new(8)
        }),
        0,
    )
}

#[test]
fn minhop_moves_exactly_the_entries_that_must_move() {
    for pick in [0usize, 7, 40, 95] {
        let mut f = ft3();
        let r = route("minhop", &f);
        let before = f.clone();
        let links = switch_links(&f);
        let link = links[pick % links.len()];
        let (fixed, out) = cut(&mut f, &r, &[link]);
        assert_valid(&f, &fixed, "after the cut");
        let must = must_move_minhop(&f, &r);
        assert!(must > 0);
        assert_eq!(out.moved.len() as u64, must, "link {pick}");
        assert_eq!(out.must, must);
        // Only routes that crossed the dead link moved.
        for m in &out.moved {
            assert!(crosses(&before, &r, m.switch, m.lid, &[link]), "{m:?}");
        }
        let back = mend(&mut f, &fixed, &[link], &out.moved);
        assert!(back == r, "the tables come back as they were");
    }
}

#[test]
fn updn_and_ftree_repairs_stay_deadlock_free() {
    for engine in ["updn", "ftree"] {
        for pick in [3usize, 17, 64] {
            let mut f = ft3();
            let r = route(engine, &f);
            let before = f.clone();
            let links = switch_links(&f);
            let link = links[pick % links.len()];
            let (fixed, out) = cut(&mut f, &r, &[link]);
            assert_valid(&f, &fixed, engine);
            assert!(!out.moved.is_empty());
            for m in &out.moved {
                assert!(crosses(&before, &r, m.switch, m.lid, &[link]), "{m:?}");
            }
            let back = mend(&mut f, &fixed, &[link], &out.moved);
            assert!(back == r, "{engine}: the tables come back as they were");
        }
    }
}

#[test]
fn a_switch_going_away_and_coming_back() {
    for engine in ["minhop", "updn", "ftree"] {
        let mut f = ft3();
        let r = route(engine, &f);
        // A middle switch of pod 0: every one of its links.
        let mid = f
            .switches()
            .find(|&n| f.node(n).description.starts_with("spine"))
            .unwrap();
        let links: Vec<(PortIdx, PortIdx)> = f
            .node_ports(mid)
            .filter_map(|q| Some((q, f.port(q).remote?)))
            .collect();
        assert!(links.len() > 2);
        let (fixed, out) = cut(&mut f, &r, &links);
        // The switch itself is cut off: its own LID is unreachable, everything else valid.
        let topo = Topo::new(&f).unwrap();
        let v = validate(&topo, &fixed, &ValidateOptions::default());
        let own = f.port(f.port_of(mid, 0).unwrap()).lid;
        assert!(
            v.failures.iter().all(|x| x.lid == own),
            "{engine}: {:?}",
            v.failures
        );
        let back = mend(&mut f, &fixed, &links, &out.moved);
        assert!(back == r, "{engine}");
    }
}

#[test]
fn failures_one_after_another_then_all_back() {
    let mut f = fabric(&GenSpec::FatTree2(FatTree2::new(8)), 0);
    for engine in ["minhop", "updn"] {
        let r0 = route(engine, &f);
        let links = switch_links(&f);
        let mut r = r0.clone();
        let mut down = Vec::new();
        let mut moved: Vec<Move> = Vec::new();
        for i in [1usize, 9, 14] {
            let link = links[i];
            let (next, out) = cut(&mut f, &r, &[link]);
            assert_valid(&f, &next, "one more down");
            // The first move of an entry remembers where it was before any repair.
            for m in out.moved {
                if !moved.iter().any(|x| x.switch == m.switch && x.lid == m.lid) {
                    moved.push(m);
                }
            }
            down.push(link);
            r = next;
        }
        let back = mend(&mut f, &r, &down, &moved);
        assert_valid(&f, &back, "all back");
        assert!(back == r0, "{engine}");
    }
}

#[test]
fn a_torus_under_updn_survives_a_cut() {
    let mut f = fabric(&GenSpec::Torus(Grid::new(vec![4, 4], 1)), 0);
    let r = route("updn", &f);
    let links = switch_links(&f);
    let (fixed, _) = cut(&mut f, &r, &links[5..6]);
    assert_valid(&f, &fixed, "torus");
}

#[test]
fn a_host_moving_to_another_switch_is_routed_to_its_new_place() {
    // Three hosts on leaves of four host ports: every leaf has a free port.
    let spec = FatTree2 {
        hosts_per_leaf: Some(3),
        uplinks: Some(4),
        ..FatTree2::new(8)
    };
    let mut f = fabric(&GenSpec::FatTree2(spec), 0);
    let r = route("minhop", &f);
    let host = f.cas().next().unwrap();
    let hp = f.port_of(host, 1).unwrap();
    let lid = f.port(hp).lid;
    let leaf = f
        .switches()
        .filter(|&n| f.node(n).description.starts_with("leaf"))
        .last()
        .unwrap();
    f.disconnect(hp);
    let free = f
        .node_ports(leaf)
        .find(|&q| f.port(q).num != 0 && f.port(q).remote.is_none())
        .unwrap();
    f.connect(hp, free).unwrap();
    let topo = Topo::new(&f).unwrap();
    let damage = Damage {
        check_lids: vec![lid],
        ..Damage::default()
    };
    let out = repair(&topo, &r.rule, &r.lft, &damage).unwrap();
    assert!(!out.moved.is_empty());
    assert!(out.moved.iter().all(|m| m.lid == lid));
    assert_valid(&f, &apply(&r, &out.moved), "host moved");
}
