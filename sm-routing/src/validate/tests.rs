//! The credit-loop search checked against petgraph's SCC algorithms, which see the channel
//! dependency graph through their visitor traits (nothing copied into a `petgraph::Graph`),
//! and the timing that keeps the search our own (`scc_speed`, ignored: run it in release).

use std::time::{Duration, Instant};

use petgraph::algo::{TarjanScc, kosaraju_scc};
use petgraph::visit::{
    GraphBase, IntoNeighbors, IntoNeighborsDirected, IntoNodeIdentifiers, NodeIndexable, VisitMap,
    Visitable,
};
use proptest::prelude::*;
use sm_core::fabric::Fabric;
use sm_core::generate::{FatTree2, FatTree3, GenSpec, Grid, Random, SplitMix64, generate};
use sm_core::lid::LidStore;

use super::*;
use crate::Options;

impl GraphBase for Cdg<'_> {
    type NodeId = ChanIdx;
    type EdgeId = (ChanIdx, ChanIdx);
}

/// Every channel, in order.
type Channels = std::iter::Map<std::ops::Range<u32>, fn(u32) -> ChanIdx>;

fn channels(m: usize) -> Channels {
    (0..m as u32).map(ChanIdx as fn(u32) -> ChanIdx)
}

/// The successors of one channel, in port order.
pub(super) struct Succs<'g, 'w> {
    g: &'g Cdg<'w>,
    c: ChanIdx,
    from: u16,
}

impl Iterator for Succs<'_, '_> {
    type Item = ChanIdx;

    fn next(&mut self) -> Option<ChanIdx> {
        let (p, s) = self.g.next_succ(self.c, self.from)?;
        self.from = p + 1;
        Some(s)
    }
}

impl<'g, 'w> IntoNeighbors for &'g Cdg<'w> {
    type Neighbors = Succs<'g, 'w>;

    fn neighbors(self, c: ChanIdx) -> Succs<'g, 'w> {
        Succs {
            g: self,
            c,
            from: 0,
        }
    }
}

impl IntoNodeIdentifiers for &Cdg<'_> {
    type NodeIdentifiers = Channels;

    fn node_identifiers(self) -> Channels {
        channels(self.len())
    }
}

impl NodeIndexable for Cdg<'_> {
    fn node_bound(&self) -> usize {
        self.len()
    }

    fn to_index(&self, c: ChanIdx) -> usize {
        c.idx()
    }

    fn from_index(&self, i: usize) -> ChanIdx {
        ChanIdx(i as u32)
    }
}

/// Visited channels, one flag each.
pub(super) struct Seen(Vec<bool>);

impl VisitMap<ChanIdx> for Seen {
    fn visit(&mut self, c: ChanIdx) -> bool {
        !std::mem::replace(&mut self.0[c.idx()], true)
    }

    fn is_visited(&self, c: &ChanIdx) -> bool {
        self.0[c.idx()]
    }

    fn unvisit(&mut self, c: ChanIdx) -> bool {
        std::mem::replace(&mut self.0[c.idx()], false)
    }
}

/// The graph with its reversed edges, which Kosaraju walks first: the bit sets only give
/// successors, so predecessors are indexed once (compressed rows).
pub(super) struct TwoWay<'g, 'w> {
    g: &'g Cdg<'w>,
    off: Vec<u32>,
    pred: Vec<ChanIdx>,
}

impl<'g, 'w> TwoWay<'g, 'w> {
    fn new(g: &'g Cdg<'w>) -> Self {
        let m = g.len();
        let mut off = vec![0u32; m + 1];
        for c in channels(m) {
            for s in g.neighbors(c) {
                off[s.idx() + 1] += 1;
            }
        }
        for i in 0..m {
            off[i + 1] += off[i];
        }
        let mut next = off.clone();
        let mut pred = vec![ChanIdx(0); off[m] as usize];
        for c in channels(m) {
            for s in g.neighbors(c) {
                pred[next[s.idx()] as usize] = c;
                next[s.idx()] += 1;
            }
        }
        TwoWay { g, off, pred }
    }
}

impl GraphBase for TwoWay<'_, '_> {
    type NodeId = ChanIdx;
    type EdgeId = (ChanIdx, ChanIdx);
}

impl Visitable for TwoWay<'_, '_> {
    type Map = Seen;

    fn visit_map(&self) -> Seen {
        Seen(vec![false; self.g.len()])
    }

    fn reset_map(&self, map: &mut Seen) {
        map.0.fill(false);
    }
}

impl<'g, 'w> IntoNeighbors for &TwoWay<'g, 'w> {
    type Neighbors = Succs<'g, 'w>;

    fn neighbors(self, c: ChanIdx) -> Succs<'g, 'w> {
        self.g.neighbors(c)
    }
}

/// Successors or predecessors.
pub(super) enum Either<'g, 'w, 'p> {
    Out(Succs<'g, 'w>),
    In(std::iter::Copied<std::slice::Iter<'p, ChanIdx>>),
}

impl Iterator for Either<'_, '_, '_> {
    type Item = ChanIdx;

    fn next(&mut self) -> Option<ChanIdx> {
        match self {
            Either::Out(s) => s.next(),
            Either::In(p) => p.next(),
        }
    }
}

impl<'p, 'g, 'w> IntoNeighborsDirected for &'p TwoWay<'g, 'w> {
    type NeighborsDirected = Either<'g, 'w, 'p>;

    fn neighbors_directed(self, c: ChanIdx, d: petgraph::Direction) -> Either<'g, 'w, 'p> {
        match d {
            petgraph::Direction::Outgoing => Either::Out(self.g.neighbors(c)),
            petgraph::Direction::Incoming => {
                let (a, b) = (self.off[c.idx()], self.off[c.idx() + 1]);
                Either::In(self.pred[a as usize..b as usize].iter().copied())
            }
        }
    }
}

impl IntoNodeIdentifiers for &TwoWay<'_, '_> {
    type NodeIdentifiers = Channels;

    fn node_identifiers(self) -> Channels {
        channels(self.g.len())
    }
}

/// A partition into components as sorted channel lists, leaving out channels without any
/// dependency (which our search never visits).
fn normal(g: &Cdg<'_>, comps: impl IntoIterator<Item = Vec<ChanIdx>>) -> Vec<Vec<ChanIdx>> {
    let m = g.len();
    let mut linked = vec![false; m];
    for c in channels(m) {
        for s in g.neighbors(c) {
            linked[c.idx()] = true;
            linked[s.idx()] = true;
        }
    }
    let mut out: Vec<Vec<ChanIdx>> = comps
        .into_iter()
        .map(|mut v| {
            v.sort_unstable();
            v
        })
        .filter(|v| v.iter().any(|&c| linked[c.idx()]))
        .collect();
    out.sort();
    out
}

fn ours(g: &Cdg<'_>) -> (Vec<Vec<ChanIdx>>, Sccs) {
    let sccs = g.sccs();
    let mut comps: std::collections::BTreeMap<u32, Vec<ChanIdx>> = Default::default();
    for (c, &k) in sccs.comp.iter_enumerated() {
        if k != NO_COMP {
            comps.entry(k).or_default().push(c);
        }
    }
    (normal(g, comps.into_values()), sccs)
}

/// (cyclic components, largest of them, lowest channel of any of them).
fn cyclic_summary(g: &Cdg<'_>, comps: &[Vec<ChanIdx>]) -> (u64, u64, Option<ChanIdx>) {
    let cyclic: Vec<&Vec<ChanIdx>> = comps
        .iter()
        .filter(|v| v.len() > 1 || g.succ_contains(v[0], v[0]))
        .collect();
    (
        cyclic.len() as u64,
        cyclic.iter().map(|v| v.len() as u64).max().unwrap_or(0),
        cyclic.iter().map(|v| v[0]).min(),
    )
}

fn check_against_petgraph(g: &Cdg<'_>) {
    let (mine, sccs) = ours(g);
    let mut tarjan = Vec::new();
    TarjanScc::new().run(g, |scc| tarjan.push(scc.to_vec()));
    let tarjan = normal(g, tarjan);
    let kosaraju = normal(g, kosaraju_scc(&TwoWay::new(g)));
    assert_eq!(mine, tarjan);
    assert_eq!(mine, kosaraju);
    assert_eq!(
        (sccs.cyclic, sccs.largest, sccs.first_cyclic),
        cyclic_summary(g, &mine)
    );
}

fn fabric(spec: &GenSpec) -> Fabric {
    let mut f = generate(spec).unwrap();
    LidStore::new().assign(&mut f, 0).unwrap();
    f
}

fn small_fabrics() -> Vec<Fabric> {
    vec![
        fabric(&GenSpec::Torus(Grid::new(vec![3, 3], 1))),
        fabric(&GenSpec::FatTree2(FatTree2::new(8))),
        fabric(&GenSpec::Random(Random {
            switches: 10,
            radix: 8,
            hosts_per_switch: 1,
            links: None,
            seed: 7,
            ca_ports: 1,
        })),
    ]
}

/// The graphs `validate` builds for minhop's tables on `f`.
fn with_cdgs(f: &Fabric, each: impl FnMut(u8, &Cdg<'_>)) {
    let topo = Topo::new(f).unwrap();
    let routes = crate::engine("minhop")
        .unwrap()
        .route(&topo, &Options::default())
        .unwrap();
    with_cdgs_of(&topo, &routes, each);
}

fn with_cdgs_of(topo: &Topo<'_>, routes: &Routes, mut each: impl FnMut(u8, &Cdg<'_>)) {
    let w = Wiring::new(topo);
    let hops = topo.hop_matrix();
    let opts = ValidateOptions::default();
    let ctx = Ctx {
        topo,
        tables: routes.into(),
        w: &w,
        hops: &hops,
        opts: &opts,
        used: AtomicU32::new(0),
        deps: Default::default(),
    };
    ctx.walk(lid_top(topo, routes.into()));
    for (vl, g) in ctx.cdgs() {
        if let Some(g) = g {
            each(vl, &g);
        }
    }
}

#[test]
fn real_graphs_match_petgraph() {
    let mut cyclic = 0;
    for f in small_fabrics() {
        with_cdgs(&f, |_, g| {
            check_against_petgraph(g);
            cyclic += g.sccs().cyclic;
        });
    }
    // minhop's tables on the torus loop.
    assert!(cyclic > 0);
}

proptest! {
    // Any dependency sets over a real fabric's channels (dense and sparse), not only those
    // tables make.
    #[test]
    fn random_graphs_match_petgraph(seed in any::<u64>(), fabric_i in 0usize..3, density in 1u32..6) {
        let fabrics = small_fabrics();
        let topo = Topo::new(&fabrics[fabric_i]).unwrap();
        let w = Wiring::new(&topo);
        let mut rng = SplitMix64::new(seed);
        let bits = (0..w.dep_len())
            .map(|_| (0..density).fold(u64::MAX, |a, _| a & rng.next_u64()))
            .collect();
        check_against_petgraph(&Cdg { w: &w, bits });
    }
}

/// The longest path the depth-first search holds at once: how deep a recursive search
/// would recurse.
fn dfs_depth(g: &Cdg<'_>) -> usize {
    let m = g.len();
    let mut seen = vec![false; m];
    let mut path: Vec<(ChanIdx, u16)> = Vec::new();
    let mut deepest = 0;
    for root in channels(m) {
        if seen[root.idx()] {
            continue;
        }
        seen[root.idx()] = true;
        path.push((root, 0));
        while let Some(&mut (v, ref mut from)) = path.last_mut() {
            match g.next_succ(v, *from) {
                Some((p, s)) => {
                    *from = p + 1;
                    if !seen[s.idx()] {
                        seen[s.idx()] = true;
                        path.push((s, 0));
                        deepest = deepest.max(path.len());
                    }
                }
                None => {
                    path.pop();
                }
            }
        }
    }
    deepest
}

/// Fastest of `runs` runs of `f`.
fn best<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Our search against petgraph's on the graphs of big fabrics: what `analyse` needs from
/// each (components, cyclic ones, largest, lowest cyclic channel), fastest of 5 runs.
/// Everything runs on a thread with a 1 GiB stack: petgraph's Tarjan recurses once per
/// channel on the search's path (printed as "depth"), and on the 24x24x24 torus that
/// overflows the 2 MiB stack of an ordinary thread, even in a release build.
///
/// `cargo test --release -p sm-routing --lib scc_speed -- --ignored --nocapture`
#[test]
#[ignore = "a benchmark: minutes, and only meaningful in release"]
fn scc_speed() {
    let fabrics = [
        ("ft3-36", GenSpec::FatTree3(FatTree3::new(36))),
        ("torus-12", GenSpec::Torus(Grid::new(vec![12, 12, 12], 2))),
        ("torus-24", GenSpec::Torus(Grid::new(vec![24, 24, 24], 1))),
    ];
    println!(
        "fabric   | channels | dependencies | depth | ours | petgraph Tarjan | petgraph Kosaraju"
    );
    for (name, spec) in fabrics {
        let f = fabric(&spec);
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .stack_size(1 << 30)
                .spawn_scoped(s, || with_cdgs(&f, |_, g| time_sccs(name, g)))
                .unwrap()
                .join()
                .unwrap()
        });
    }
}

fn time_sccs(name: &str, g: &Cdg<'_>) {
    check_against_petgraph(g);
    let ours = best(5, || g.sccs());
    let tarjan = best(5, || {
        let mut comp = vec![NO_COMP; g.len()];
        let mut n = 0;
        let mut cyclic = Vec::new();
        TarjanScc::new().run(g, |scc| {
            for &c in scc {
                comp[c.idx()] = n;
            }
            n += 1;
            if scc.len() > 1 || g.succ_contains(scc[0], scc[0]) {
                cyclic.push((scc.len(), scc.iter().min().copied()));
            }
        });
        (comp, cyclic)
    });
    let kosaraju = best(5, || {
        let comps = kosaraju_scc(&TwoWay::new(g));
        let mut comp = vec![NO_COMP; g.len()];
        for (i, v) in comps.iter().enumerate() {
            for &c in v {
                comp[c.idx()] = i as u32;
            }
        }
        let cyclic: Vec<(usize, Option<ChanIdx>)> = comps
            .iter()
            .filter(|v| v.len() > 1 || g.succ_contains(v[0], v[0]))
            .map(|v| (v.len(), v.iter().min().copied()))
            .collect();
        (comp, cyclic)
    });
    let (channels, deps) = g.counts();
    println!(
        "{name:8} | {channels:8} | {deps:12} | {:5} | {ours:?} | {tarjan:?} | {kosaraju:?}",
        dfs_depth(g)
    );
}
