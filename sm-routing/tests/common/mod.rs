//! Checks shared by the engine tests: walking tables, a small channel-dependency cycle
//! check, and the adaptive-routing group rules.

#![allow(dead_code, unreachable_pub)]

use sm_core::NodeKind;
use sm_core::fabric::Fabric;
use sm_core::generate::{GenSpec, generate};
use sm_core::lid::LidStore;
use sm_mad::Lid;
use sm_routing::{Routes, SwIdx, Topo};

pub fn fabric(spec: &GenSpec, lmc: u8) -> Fabric {
    let mut f = generate(spec).unwrap();
    LidStore::new().assign(&mut f, lmc).unwrap();
    f
}

/// Follows `lid` from switch `from`: the links used (switch, index into `topo.adj`), or why
/// the walk failed.
pub fn walk(
    topo: &Topo<'_>,
    r: &Routes,
    from: SwIdx,
    lid: Lid,
) -> Result<Vec<(SwIdx, usize)>, String> {
    let d = topo.dest_of(lid).ok_or("no owner")?;
    let mut cur = from;
    let mut path = Vec::new();
    loop {
        let p = r
            .port(cur, lid)
            .ok_or_else(|| format!("switch {} has no route to LID {lid}", topo.guid(cur)))?;
        if cur == d.sw {
            return if p == d.sw_port {
                Ok(path)
            } else {
                Err(format!(
                    "LID {lid} leaves its own switch by port {p}, not {}",
                    d.sw_port
                ))
            };
        }
        let (i, a) = topo
            .adj(cur)
            .iter()
            .enumerate()
            .find(|(_, a)| a.port == p)
            .ok_or_else(|| {
                format!(
                    "switch {} port {p} leads to no switch (LID {lid})",
                    topo.guid(cur)
                )
            })?;
        path.push((cur, i));
        cur = a.peer;
        if path.len() > topo.num_switches() {
            return Err(format!("LID {lid} loops"));
        }
    }
}

/// Switches with CAs (or routers) attached.
pub fn ca_switches(topo: &Topo<'_>) -> Vec<SwIdx> {
    let mut v: Vec<SwIdx> = topo
        .dests
        .iter()
        .filter(|d| d.kind != NodeKind::Switch)
        .map(|d| d.sw)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Every switch with CAs reaches every LID; returns the number of walks.
pub fn check_reach(topo: &Topo<'_>, r: &Routes) -> usize {
    let mut n = 0;
    for s in ca_switches(topo) {
        for d in &topo.dests {
            for lid in d.lids() {
                if let Err(e) = walk(topo, r, s, lid) {
                    panic!("{}: from {}: {e}", r.engine, topo.guid(s));
                }
                n += 1;
            }
        }
    }
    n
}

/// Global channel index of link `i` of switch `s`.
fn channel(off: &[usize], s: SwIdx, i: usize) -> usize {
    off[s.idx()] + i
}

/// True when the channel dependency graph of the tables (every switch, every LID, every
/// port in the LID's adaptive group as well as the static one) has a cycle.
pub fn has_credit_loop(topo: &Topo<'_>, r: &Routes) -> bool {
    has_credit_loop_with(topo, r, &[])
}

/// A switch-to-switch channel: link `i` of `topo.adj(s)`.
pub type Channel = (SwIdx, usize);

/// [`has_credit_loop`] with more dependencies (multicast turns, say).
pub fn has_credit_loop_with(topo: &Topo<'_>, r: &Routes, extra: &[(Channel, Channel)]) -> bool {
    let n = topo.num_switches();
    let mut off = vec![0usize; n + 1];
    for s in 0..n {
        off[s + 1] = off[s] + topo.adj(SwIdx(s as u32)).len();
    }
    let channels = off[n];
    // Ports usable at switch s for lid.
    let ports = |s: SwIdx, lid: usize| -> Vec<u8> {
        let mut v: Vec<u8> = r.lft[s.idx()]
            .get(lid)
            .copied()
            .into_iter()
            .filter(|&p| p != 255)
            .collect();
        if let Some(ar) = &r.ar {
            let g = ar[s.idx()].lid_group.get(lid).copied().unwrap_or(u16::MAX);
            if g != u16::MAX {
                v.extend(&ar[s.idx()].groups[g as usize]);
            }
        }
        v
    };
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for lid in 1..=topo.max_lid().0 as usize {
        for s in (0..n as u32).map(SwIdx) {
            for p in ports(s, lid) {
                let Some((i, a)) = topo.adj(s).iter().enumerate().find(|(_, a)| a.port == p) else {
                    continue;
                };
                for q in ports(a.peer, lid) {
                    if let Some((j, _)) = topo
                        .adj(a.peer)
                        .iter()
                        .enumerate()
                        .find(|(_, b)| b.port == q)
                    {
                        edges.push((channel(&off, s, i) as u32, channel(&off, a.peer, j) as u32));
                    }
                }
            }
        }
    }
    for &((s, i), (t, j)) in extra {
        edges.push((channel(&off, s, i) as u32, channel(&off, t, j) as u32));
    }
    edges.sort_unstable();
    edges.dedup();
    // Kahn's algorithm.
    let mut indeg = vec![0u32; channels];
    let mut eoff = vec![0usize; channels + 1];
    for &(a, b) in &edges {
        indeg[b as usize] += 1;
        eoff[a as usize + 1] += 1;
    }
    for c in 0..channels {
        eoff[c + 1] += eoff[c];
    }
    let mut stack: Vec<usize> = (0..channels).filter(|&c| indeg[c] == 0).collect();
    let mut removed = 0;
    while let Some(c) = stack.pop() {
        removed += 1;
        for &(_, b) in &edges[eoff[c]..eoff[c + 1]] {
            indeg[b as usize] -= 1;
            if indeg[b as usize] == 0 {
                stack.push(b as usize);
            }
        }
    }
    removed != channels
}

/// Adaptive-routing rules: the static port is in its group, groups are sorted sets of at
/// least two ports, and every port of a group is one hop nearer by the static routes
/// (`len` = hops of the static walk from a switch).
pub fn check_ar(topo: &Topo<'_>, r: &Routes) {
    let ar = r.ar.as_ref().expect("adaptive hints");
    assert_eq!(ar.len(), topo.num_switches());
    for (s, sw) in ar.iter().enumerate() {
        let s = SwIdx(s as u32);
        for g in &sw.groups {
            assert!(g.len() >= 2, "{g:?}");
            assert!(g.windows(2).all(|w| w[0] < w[1]), "{g:?}");
        }
        for (lid, &g) in sw.lid_group.iter().enumerate() {
            if g == u16::MAX {
                continue;
            }
            let lid = Lid(lid as u16);
            let group = &sw.groups[g as usize];
            let stat = r.port(s, lid).expect("static port");
            assert!(
                group.contains(&stat),
                "{}: static {stat} not in {group:?}",
                r.engine
            );
            let here = walk(topo, r, s, lid).expect("walk").len();
            for &p in group {
                let a = topo
                    .adj(s)
                    .iter()
                    .find(|a| a.port == p)
                    .expect("group port leads to a switch");
                let there = walk(topo, r, a.peer, lid).expect("walk").len();
                assert_eq!(
                    there + 1,
                    here,
                    "{}: port {p} of switch {} is not minimal for LID {lid}",
                    r.engine,
                    topo.guid(s)
                );
            }
        }
    }
}
