use super::*;
use sm_core::NodeKind;
use sm_core::fabric::{Fabric, NodeSpec};
use sm_core::generate::{FatTree2, GenSpec, Grid, generate};
use sm_core::lid::LidStore;

const FULL: JoinState = JoinState::FULL_MEMBER;
const NON: JoinState = JoinState::NON_MEMBER;
const SON: JoinState = JoinState::SEND_ONLY_NON_MEMBER;
const SOF: JoinState = JoinState::SEND_ONLY_FULL_MEMBER;
const MLID: Lid = Lid(0xc000);

/// Switches (GUID, ports), switch links (a, port, b, port), CAs (GUID, switch, port): the
/// CA's port GUID is its GUID + 1.
fn build(sw: &[(u64, u8)], links: &[(usize, u8, usize, u8)], cas: &[(u64, usize, u8)]) -> Fabric {
    let mut f = Fabric::new();
    let nodes: Vec<_> = sw
        .iter()
        .map(|&(g, n)| {
            f.add_node(NodeSpec::new(
                NodeKind::Switch,
                Guid(g),
                format!("sw{g:x}"),
                n,
            ))
            .unwrap()
        })
        .collect();
    for &(a, pa, b, pb) in links {
        let (x, y) = (
            f.port_of(nodes[a], pa).unwrap(),
            f.port_of(nodes[b], pb).unwrap(),
        );
        f.connect(x, y).unwrap();
    }
    for &(g, s, p) in cas {
        let c = f
            .add_node(NodeSpec::new(NodeKind::Ca, Guid(g), format!("ca{g:x}"), 1))
            .unwrap();
        let (x, y) = (f.port_of(c, 1).unwrap(), f.port_of(nodes[s], p).unwrap());
        f.connect(x, y).unwrap();
    }
    LidStore::new().assign(&mut f, 0).unwrap();
    f
}

fn generated(spec: &GenSpec) -> Fabric {
    let mut f = generate(spec).unwrap();
    LidStore::new().assign(&mut f, 0).unwrap();
    f
}

/// Follows the masks from a member port: the end ports reached (GUIDs), or a loop.
fn deliver(topo: &Topo<'_>, tree: &GroupTree, src: Guid) -> Result<Vec<Guid>, String> {
    let d = topo
        .dests
        .iter()
        .find(|d| d.guid == src)
        .ok_or("no source")?;
    let mut queue = std::collections::VecDeque::from([(d.sw, d.sw_port)]);
    let mut seen = vec![false; topo.num_switches()];
    let mut got = Vec::new();
    while let Some((s, in_port)) = queue.pop_front() {
        if std::mem::replace(&mut seen[s.idx()], true) {
            return Err(format!("switch {} reached twice", topo.guid(s)));
        }
        for p in tree.mask(s).ports().filter(|&p| p != in_port) {
            if let Some(a) = topo.adj(s).iter().find(|a| a.port == p) {
                queue.push_back((a.peer, a.peer_port));
            } else if let Some(e) = topo.dests.iter().find(|e| e.sw == s && e.sw_port == p) {
                got.push(e.guid);
            } else {
                return Err(format!("switch {} port {p} leads nowhere", topo.guid(s)));
            }
        }
    }
    got.sort_unstable();
    Ok(got)
}

/// Every member reaches exactly the receivers but itself.
fn check_delivery(topo: &Topo<'_>, tree: &GroupTree, members: &[(Guid, JoinState)]) {
    let mut receivers: Vec<Guid> = members
        .iter()
        .filter(|m| m.1.0 & 3 != 0)
        .map(|m| m.0)
        .collect();
    receivers.sort_unstable();
    for &(g, _) in members {
        let want: Vec<Guid> = receivers.iter().copied().filter(|&r| r != g).collect();
        assert_eq!(deliver(topo, tree, g).unwrap(), want, "from {g}");
    }
}

fn ca_guids(f: &Fabric) -> Vec<Guid> {
    f.cas()
        .flat_map(|n| f.node_ports(n))
        .map(|p| f.port(p).guid)
        .collect()
}

fn ranks(topo: &Topo<'_>) -> TreeOrder {
    TreeOrder::for_engine(topo, "updn", &Options::default()).unwrap()
}

#[test]
fn port_masks() {
    let mut m = PortMask::EMPTY;
    assert!(m.is_empty());
    for p in [0, 15, 16, 36, 255] {
        m.set(p);
    }
    assert!(m.has(36) && !m.has(35));
    assert_eq!(m.ports().collect::<Vec<_>>(), vec![0, 15, 16, 36, 255]);
    assert_eq!((m.word(0), m.word(1), m.word(2)), (0x8001, 0x0001, 0x0010));
    assert_eq!(m.word(15), 0x8000);
    assert_eq!(m.word(16), 0);
}

#[test]
fn a_fat_tree_group_is_rooted_at_a_spine() {
    // 8 leaves of 4 hosts, 4 spines.
    let f = generated(&GenSpec::FatTree2(FatTree2::new(8)));
    let topo = Topo::new(&f).unwrap();
    let cas = ca_guids(&f);
    // Members on two leaves: hosts 0, 1 (leaf 0) and 4 (leaf 1); host 5 sends only.
    let members = vec![(cas[0], FULL), (cas[1], NON), (cas[4], FULL), (cas[5], SON)];
    for order in [TreeOrder::Free, ranks(&topo)] {
        let mut planner = McastPlanner::new(&topo, order);
        let t = planner.tree(MLID, &members);
        assert!(!t.fallback && t.unreachable.is_empty());
        let root = t.root.unwrap();
        assert!(
            topo.fabric
                .node(topo.switches[root.idx()])
                .description
                .contains("spine"),
            "{}",
            topo.fabric.node(topo.switches[root.idx()]).description
        );
        assert_eq!(t.depth, 1);
        // Root and two leaves.
        assert_eq!(t.switches.len(), 3);
        assert_eq!(t.masks.len(), 3);
        check_delivery(&topo, &t, &members);
        // The send-only member's port is in no mask; neither is a non-member's.
        let d5 = topo.dests.iter().find(|d| d.guid == cas[5]).unwrap();
        assert!(!t.mask(d5.sw).has(d5.sw_port));
        let d6 = topo.dests.iter().find(|d| d.guid == cas[6]).unwrap();
        assert!(!t.mask(d6.sw).has(d6.sw_port));
        // A non-member on a tree switch may send; it reaches every receiver.
        let got = deliver(&topo, &t, cas[6]).unwrap();
        assert_eq!(got, vec![cas[0], cas[1], cas[4]]);
    }
}

#[test]
fn groups_spread_over_the_spines() {
    let f = generated(&GenSpec::FatTree2(FatTree2::new(8)));
    let topo = Topo::new(&f).unwrap();
    let members: Vec<(Guid, JoinState)> = ca_guids(&f).into_iter().map(|g| (g, FULL)).collect();
    let mut planner = McastPlanner::new(&topo, ranks(&topo));
    let mut roots: Vec<SwIdx> = (0..32)
        .map(|i| planner.tree(Lid(0xc000 + i), &members).root.unwrap())
        .collect();
    // Deterministic...
    assert_eq!(planner.tree(MLID, &members).root, Some(roots[0]));
    // ... and spread.
    roots.sort_unstable();
    roots.dedup();
    assert!(roots.len() >= 3, "{roots:?}");
}

#[test]
fn small_groups() {
    let f = generated(&GenSpec::FatTree2(FatTree2::new(4)));
    let topo = Topo::new(&f).unwrap();
    let cas = ca_guids(&f);
    let mut p = McastPlanner::new(&topo, ranks(&topo));
    // No member.
    let t = p.tree(MLID, &[]);
    assert!(t.root.is_none() && t.masks.is_empty());
    // One receiver: its own leaf, its own port.
    let t = p.tree(MLID, &[(cas[0], FULL)]);
    let d = topo.dests.iter().find(|d| d.guid == cas[0]).unwrap();
    assert_eq!(t.root, Some(d.sw));
    assert_eq!(
        t.masks,
        vec![(d.sw, {
            let mut m = PortMask::EMPTY;
            m.set(d.sw_port);
            m
        })]
    );
    // Only senders: a tree, but no mask.
    let t = p.tree(MLID, &[(cas[0], SOF), (cas[3], SON)]);
    assert!(t.root.is_some() && t.masks.is_empty() && !t.switches.is_empty());
    // Unknown GUIDs are reported, the rest served.
    let members = [(Guid(0x1234), FULL), (cas[0], FULL), (cas[3], NON)];
    let t = p.tree(MLID, &members);
    assert_eq!(t.unreachable, vec![Guid(0x1234)]);
    check_delivery(&topo, &t, &members[1..]);
    // A GUID twice: receives when either says so.
    let t = p.tree(MLID, &[(cas[0], SON), (cas[0], NON), (cas[3], FULL)]);
    check_delivery(&topo, &t, &[(cas[0], NON), (cas[3], FULL)]);
}

#[test]
fn switches_can_be_members() {
    let f = generated(&GenSpec::FatTree2(FatTree2::new(4)));
    let topo = Topo::new(&f).unwrap();
    let cas = ca_guids(&f);
    let sw: Vec<Guid> = (0..topo.num_switches() as u32)
        .map(|s| topo.guid(SwIdx(s)))
        .collect();
    let members = vec![(sw[0], FULL), (sw[3], NON), (cas[0], FULL), (sw[1], SON)];
    let mut p = McastPlanner::new(&topo, TreeOrder::Free);
    let t = p.tree(MLID, &members);
    check_delivery(&topo, &t, &members);
    assert!(t.mask(SwIdx(0)).has(0) && !t.mask(SwIdx(1)).has(0));
}

#[test]
fn ordered_trees_climb_and_fall_back_when_nothing_is_above_all() {
    // A chain a - b - c with a CA on a and on c.
    let f = build(
        &[(0x10, 4), (0x20, 4), (0x30, 4)],
        &[(0, 1, 1, 1), (1, 2, 2, 1)],
        &[(0x100, 0, 3), (0x200, 2, 3)],
    );
    let topo = Topo::new(&f).unwrap();
    let members = [(Guid(0x101), FULL), (Guid(0x201), FULL)];
    // b above both: b is the root.
    let mut p = McastPlanner::new(&topo, TreeOrder::Ranked(vec![1, 0, 1]));
    let t = p.tree(MLID, &members);
    assert_eq!(t.root, Some(SwIdx(1)));
    assert!(!t.fallback);
    check_delivery(&topo, &t, &members);
    // a and c both roots, b below them: no switch above both, the tree falls back.
    let mut p = McastPlanner::new(&topo, TreeOrder::Ranked(vec![0, 1, 0]));
    let t = p.tree(MLID, &members);
    assert!(t.fallback);
    check_delivery(&topo, &t, &members);
    // Unordered, the middle switch is the most central.
    let t = McastPlanner::new(&topo, TreeOrder::Free).tree(MLID, &members);
    assert_eq!(t.root, Some(SwIdx(1)));
    assert!(!t.fallback);
}

#[test]
fn ranked_tree_links_all_climb() {
    // A 4x4 torus: updn picks a root; every tree link must go up in its order.
    let f = generated(&GenSpec::Torus(Grid::new(vec![4, 4], 2)));
    let topo = Topo::new(&f).unwrap();
    let order = ranks(&topo);
    let TreeOrder::Ranked(rank) = order.clone() else {
        panic!("updn gives ranks")
    };
    let cas = ca_guids(&f);
    let mut p = McastPlanner::new(&topo, order);
    for k in 0..16u16 {
        let members: Vec<(Guid, JoinState)> = cas
            .iter()
            .enumerate()
            .filter(|(i, _)| (i * 7 + k as usize) % 5 < 2)
            .map(|(i, &g)| (g, [FULL, NON, SON, SOF][i % 4]))
            .collect();
        let t = p.tree(Lid(0xc000 + k), &members);
        assert!(!t.fallback);
        for &(s, link) in &t.switches {
            if let Some(l) = link {
                let key = |x: SwIdx| (rank[x.idx()], topo.guid(x));
                assert!(key(l.parent) < key(s));
            } else {
                assert_eq!(Some(s), t.root);
            }
        }
        check_delivery(&topo, &t, &members);
    }
}

#[test]
fn a_disconnected_member_is_unreachable() {
    // Two switch islands.
    let f = build(
        &[(0x10, 4), (0x20, 4), (0x30, 4)],
        &[(0, 1, 1, 1)],
        &[(0x100, 0, 3), (0x200, 1, 3), (0x300, 2, 3)],
    );
    let topo = Topo::new(&f).unwrap();
    let members = [
        (Guid(0x101), FULL),
        (Guid(0x201), FULL),
        (Guid(0x301), FULL),
    ];
    for order in [TreeOrder::Free, TreeOrder::Ranked(vec![0, 1, 0])] {
        let t = McastPlanner::new(&topo, order).tree(MLID, &members);
        assert_eq!(t.unreachable, vec![Guid(0x301)]);
        check_delivery(&topo, &t, &members[..2]);
    }
    // An order shorter than the switch list is padded.
    let t = McastPlanner::new(&topo, TreeOrder::Ranked(vec![])).tree(MLID, &members[..2]);
    check_delivery(&topo, &t, &members[..2]);
}

#[test]
fn parallel_links_carry_one_copy() {
    // Two switches joined by three links.
    let f = build(
        &[(0x10, 8), (0x20, 8)],
        &[(0, 1, 1, 1), (0, 2, 1, 2), (0, 3, 1, 3)],
        &[(0x100, 0, 5), (0x200, 1, 5), (0x300, 1, 6)],
    );
    let topo = Topo::new(&f).unwrap();
    let members = [(Guid(0x101), FULL), (Guid(0x201), NON), (Guid(0x301), FULL)];
    let mut used = Vec::new();
    let mut p = McastPlanner::new(&topo, TreeOrder::Free);
    for k in 0..16 {
        let t = p.tree(Lid(0xc000 + k), &members);
        check_delivery(&topo, &t, &members);
        let links: Vec<u8> = t.mask(SwIdx(0)).ports().filter(|&p| p <= 3).collect();
        assert_eq!(links.len(), 1);
        used.push(links[0]);
    }
    used.sort_unstable();
    used.dedup();
    assert!(
        used.len() > 1,
        "groups spread over parallel links: {used:?}"
    );
}

#[test]
fn tables_and_their_diff() {
    // A 20-port switch (two positions) and an 8-port one.
    let f = build(
        &[(0x10, 20), (0x20, 8)],
        &[(0, 1, 1, 1)],
        &[(0x100, 0, 18), (0x200, 0, 3), (0x300, 1, 5)],
    );
    let topo = Topo::new(&f).unwrap();
    let mut p = McastPlanner::new(&topo, TreeOrder::Free);
    let empty = Mfts::new(&topo);
    assert_eq!(empty.switches[0].positions(), 2);
    assert_eq!(empty.switches[1].positions(), 1);
    let g1 = [(Guid(0x101), FULL), (Guid(0x301), FULL)];
    let g2 = [(Guid(0x201), FULL), (Guid(0x301), NON)];
    let mut state = empty.clone();
    state.apply(&p.tree(Lid(0xc000), &g1));
    state.apply(&p.tree(Lid(0xc021), &g2));
    let sw0 = &state.switches[0];
    assert_eq!(
        sw0.mask(Lid(0xc000)).ports().collect::<Vec<_>>(),
        vec![1, 18]
    );
    assert_eq!(
        sw0.mask(Lid(0xc021)).ports().collect::<Vec<_>>(),
        vec![1, 3]
    );
    assert_eq!(sw0.top(), Some(Lid(0xc021)));
    assert_eq!(sw0.blocks(), 2);
    let b = sw0.block(0, 1);
    assert_eq!(b.port_mask_block[0], 1 << 2);
    assert_eq!(sw0.block(1, 0).port_mask_block[1], (1 << 1) | (1 << 3));

    // From empty switches: only blocks with something in them.
    let d = state.diff(&empty);
    let mods: Vec<(Guid, u16, u8)> = d
        .blocks
        .iter()
        .map(|u| (u.guid, u.modifier.block, u.modifier.position))
        .collect();
    assert_eq!(
        mods,
        vec![
            (Guid(0x10), 0, 0),
            (Guid(0x10), 0, 1),
            (Guid(0x10), 1, 0),
            (Guid(0x20), 0, 0),
            (Guid(0x20), 1, 0),
        ]
    );
    assert_eq!(
        d.tops,
        vec![
            (0, Guid(0x10), Some(Lid(0xc021))),
            (1, Guid(0x20), Some(Lid(0xc021)))
        ]
    );
    // Replaying the diff on the old state gives the new one.
    let mut replay = empty.clone();
    for u in &d.blocks {
        replay.switches[u.switch].set_block(u.modifier, &u.block);
    }
    assert_eq!(replay, state);
    assert!(state.diff(&state).blocks.is_empty() && state.diff(&state).tops.is_empty());

    // 0x301 leaves group 1: only switch 0x10's position-1 block 0 keeps its entry; the
    // 0x20 switch loses it.
    let mut next = state.clone();
    next.apply(&p.tree(Lid(0xc000), &g1[..1]));
    let d = next.diff(&state);
    let mods: Vec<(Guid, u16, u8)> = d
        .blocks
        .iter()
        .map(|u| (u.guid, u.modifier.block, u.modifier.position))
        .collect();
    assert_eq!(mods, vec![(Guid(0x10), 0, 0), (Guid(0x20), 0, 0)]);
    assert!(d.tops.is_empty());
    // Deleting the high group lowers the tops and clears its blocks.
    next.clear(Lid(0xc021));
    let d = next.diff(&state);
    assert_eq!(
        d.tops,
        vec![(0, Guid(0x10), Some(Lid(0xc000))), (1, Guid(0x20), None)]
    );
    assert!(d.blocks.iter().any(|u| u.modifier.block == 1));
    // A switch the old state lacks gets every block up to its top, at every position.
    let one = Mfts {
        switches: vec![state.switches[1].clone()],
    };
    let d = state.diff(&one);
    assert_eq!(d.blocks.iter().filter(|u| u.guid == Guid(0x10)).count(), 4);
    assert!(d.blocks.iter().all(|u| u.guid == Guid(0x10)));
}

#[test]
fn switch_tables_ignore_what_they_cannot_hold() {
    let mut t = SwitchMft::new(Guid(1), 8);
    let mut m = PortMask::EMPTY;
    m.set(3);
    m.set(9); // beyond NumPorts
    assert!(t.set(Lid(0xc005), &m));
    assert_eq!(t.mask(Lid(0xc005)).ports().collect::<Vec<_>>(), vec![3]);
    assert!(!t.set(Lid(5), &m));
    assert!(!t.set(Lid(0xffff), &m));
    assert_eq!(t.mask(Lid(0x10)), PortMask::EMPTY);
    assert_eq!(t.top(), Some(Lid(0xc005)));
    t.set(Lid(0xc005), &PortMask::EMPTY);
    assert_eq!((t.top(), t.blocks()), (None, 0));
    // The last block: MLIDs up to 0xFFFE; 0xFFFF is no MLID.
    let mut t = SwitchMft::new(Guid(1), 8);
    t.set(Lid(0xfffe), &m);
    assert_eq!(t.blocks(), 512);
    assert_eq!(t.block(511, 0).port_mask_block[30], 1 << 3);
    assert_eq!(t.block(511, 0).port_mask_block[31], 0);
    t.set_block(
        mft::Modifier {
            block: 511,
            position: 3,
        },
        &mft::Repr::default(),
    );
    t.set_block(
        mft::Modifier {
            block: 511,
            position: 0,
        },
        &mft::Repr {
            port_mask_block: [0xffff; 32],
        },
    );
    assert_eq!(t.mask(Lid(0xffff)), PortMask::EMPTY);
    assert_eq!(t.mask(Lid(0xfffe)).ports().count(), 9);
}
