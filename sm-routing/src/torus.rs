//! Tori and meshes, found in the switch graph and routed dimension by dimension.
//!
//! The switch graph is split into its Cartesian factors: two links are of one factor when
//! they are opposite sides of a square, or meet at a switch without a square holding both
//! (the product relation of Imrich and Klavžar). Removing one factor's links leaves one
//! piece per coordinate along it; the pieces, joined by the factor's links, form a ring (a
//! torus dimension), a path (a mesh dimension) or a single link. A 4-ring is the product
//! of two single links and is found as such. Every switch then has a coordinate per
//! factor, and the split is kept only when the coordinates account for every switch and
//! every link.
//!
//! Routes correct the factors in order, each the short way round (a tie, half way round
//! an even ring, goes one way or the other by the destination's coordinate and the LID's
//! place among its switch's LIDs, so both directions carry half). Turns only go from a factor to a later one, so a cycle
//! of channel dependencies can only run round one ring. A ring of five or more switches
//! gets two datelines, at positions 0 and `k / 2`: a path never passes straight through
//! both, so each path is put on the layer (SL) whose dateline it does not pass in every
//! ring, and no layer holds a whole ring's dependencies. With `d` such rings that is
//! `2^d` layers: 8 on a 3D torus, as OpenSM's torus-2QoS needs a configuration file to do.

use std::collections::HashMap;

use rayon::prelude::*;
use sm_mad::Lid;

use crate::routes::{PathSl, Routes};
use crate::topo::{SwIdx, Topo};

/// The most links a switch may have to other switches for the search to be tried (eight
/// dimensions, both ways).
const MAX_DEGREE: usize = 16;

/// A factor of the switch graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Factor {
    /// Coordinates along it.
    pub k: u16,
    /// The last coordinate links back to the first.
    pub ring: bool,
}

impl Factor {
    /// Needs datelines: a ring long enough for a shortest path to pass straight through
    /// a switch.
    fn dateline(&self) -> bool {
        self.ring && self.k >= 5
    }
}

/// A torus or mesh found in the switch graph.
#[derive(Debug, Clone)]
pub(crate) struct Grid {
    pub factors: Vec<Factor>,
    /// Each switch's coordinates, `factors.len()` per switch.
    coord: Vec<u16>,
}

impl Grid {
    /// The grid the switches form, if they form one.
    pub(crate) fn detect(topo: &Topo<'_>) -> Option<Grid> {
        let n = topo.num_switches();
        if n < 2 {
            return None;
        }
        // The simple graph: each switch's distinct neighbours.
        let mut nbrs: Vec<Vec<u32>> = Vec::with_capacity(n);
        for s in 0..n {
            let mut v: Vec<u32> = topo
                .adj(SwIdx(s as u32))
                .iter()
                .map(|a| a.peer.0)
                .filter(|&p| p as usize != s)
                .collect();
            v.sort_unstable();
            v.dedup();
            if v.is_empty() || v.len() > MAX_DEGREE {
                return None;
            }
            nbrs.push(v);
        }
        // Each link's id, by the slot of its higher end in its lower end's neighbours.
        let mut off = Vec::with_capacity(n + 1);
        let mut total = 0usize;
        for vs in &nbrs {
            off.push(total);
            total += vs.len();
        }
        let mut slot_edge = vec![usize::MAX; total];
        let mut ends: Vec<(u32, u32)> = Vec::new();
        for (u, vs) in nbrs.iter().enumerate() {
            for (j, &v) in vs.iter().enumerate() {
                if (u as u32) < v {
                    slot_edge[off[u] + j] = ends.len();
                    ends.push((u as u32, v));
                }
            }
        }
        let id = |a: u32, b: u32| {
            let (lo, hi) = (a.min(b) as usize, a.max(b));
            let j = nbrs[lo].binary_search(&hi).ok()?;
            slot_edge.get(off[lo] + j).copied()
        };
        let mut classes = UnionFind::new(ends.len());
        let mut common = Vec::new();
        for (u, vs) in nbrs.iter().enumerate() {
            let u = u as u32;
            for (i, &v) in vs.iter().enumerate() {
                for &w in &vs[i + 1..] {
                    common.clear();
                    intersect(&nbrs[v as usize], &nbrs[w as usize], u, &mut common);
                    let (uv, uw) = (id(u, v)?, id(u, w)?);
                    match common[..] {
                        [] => classes.union(uv, uw),
                        [x] => {
                            classes.union(uv, id(w, x)?);
                            classes.union(uw, id(v, x)?);
                        }
                        // In a grid two neighbours of a switch share at most one other
                        // (fat-trees and dragonflies share many: they stop here).
                        _ => return None,
                    }
                }
            }
        }
        // Factors in the order of their first link, for a result that depends on the
        // fabric alone.
        let mut order: Vec<usize> = Vec::new();
        let mut of_class: HashMap<usize, usize> = HashMap::new();
        let class: Vec<usize> = (0..ends.len())
            .map(|e| {
                let r = classes.find(e);
                *of_class.entry(r).or_insert_with(|| {
                    order.push(r);
                    order.len() - 1
                })
            })
            .collect();
        let nf = order.len();
        if nf > 16 {
            return None;
        }
        let mut factors = Vec::with_capacity(nf);
        let mut coord = vec![0u16; n * nf];
        for f in 0..nf {
            // The pieces left without this factor's links: one per coordinate.
            let mut pieces = UnionFind::new(n);
            for (e, &(a, b)) in ends.iter().enumerate() {
                if class[e] != f {
                    pieces.union(a as usize, b as usize);
                }
            }
            let mut piece_of: HashMap<usize, usize> = HashMap::new();
            let piece: Vec<usize> = (0..n)
                .map(|s| {
                    let r = pieces.find(s);
                    let next = piece_of.len();
                    *piece_of.entry(r).or_insert(next)
                })
                .collect();
            let k = piece_of.len();
            if k < 2 || k > usize::from(u16::MAX) {
                return None;
            }
            // The pieces joined by this factor's links.
            let mut joined: Vec<Vec<usize>> = vec![Vec::new(); k];
            for (e, &(a, b)) in ends.iter().enumerate() {
                if class[e] == f {
                    let (pa, pb) = (piece[a as usize], piece[b as usize]);
                    if pa == pb {
                        return None;
                    }
                    joined[pa].push(pb);
                    joined[pb].push(pa);
                }
            }
            for j in &mut joined {
                j.sort_unstable();
                j.dedup();
            }
            let ends_of_path: Vec<usize> = (0..k).filter(|&p| joined[p].len() == 1).collect();
            let ring = match ends_of_path.len() {
                0 if k >= 3 && joined.iter().all(|j| j.len() == 2) => true,
                2 if joined.iter().all(|j| (1..=2).contains(&j.len())) => false,
                _ => return None,
            };
            // Number the pieces along the ring (from switch 0's piece) or the path (from
            // the end with the lower piece).
            let start = if ring { piece[0] } else { ends_of_path[0] };
            let mut pos = vec![u16::MAX; k];
            let (mut prev, mut at) = (usize::MAX, start);
            for c in 0..k {
                pos[at] = c as u16;
                let next = joined[at]
                    .iter()
                    .copied()
                    .find(|&p| p != prev && pos[p] == u16::MAX);
                match next {
                    Some(p) => (prev, at) = (at, p),
                    None if c + 1 == k => {}
                    None => return None,
                }
            }
            for s in 0..n {
                coord[s * nf + f] = pos[piece[s]];
            }
            factors.push(Factor { k: k as u16, ring });
        }
        let grid = Grid { factors, coord };
        grid.accounts_for(&nbrs).then_some(grid)
    }

    fn at(&self, s: usize) -> &[u16] {
        let nf = self.factors.len();
        &self.coord[s * nf..(s + 1) * nf]
    }

    /// Every coordinate is one switch's, and each switch's neighbours are exactly the
    /// coordinates one step away along one factor.
    fn accounts_for(&self, nbrs: &[Vec<u32>]) -> bool {
        let n = nbrs.len();
        let total = self
            .factors
            .iter()
            .try_fold(1usize, |a, f| a.checked_mul(usize::from(f.k)));
        if total != Some(n) {
            return false;
        }
        let mut seen: HashMap<&[u16], usize> = HashMap::with_capacity(n);
        for s in 0..n {
            if seen.insert(self.at(s), s).is_some() {
                return false;
            }
        }
        for (s, vs) in nbrs.iter().enumerate() {
            let mut want: Vec<u32> = Vec::new();
            let mut c = self.at(s).to_vec();
            for (f, fac) in self.factors.iter().enumerate() {
                let x = c[f];
                for step in [1i32, -1] {
                    let y = i32::from(x) + step;
                    let y = match (fac.ring, y) {
                        (true, y) => y.rem_euclid(i32::from(fac.k)),
                        (false, y) if y < 0 || y >= i32::from(fac.k) => continue,
                        (false, y) => y,
                    };
                    c[f] = y as u16;
                    match seen.get(&c[..]) {
                        Some(&t) => want.push(t as u32),
                        None => return false,
                    }
                }
                c[f] = x;
            }
            want.sort_unstable();
            want.dedup();
            if want != *vs {
                return false;
            }
        }
        true
    }

    /// The factors, as `8-ring x 8-ring` (a torus) or `4-path x 3-path` (a mesh); a ring
    /// of four shows as two 2-paths (single links).
    pub(crate) fn shape(&self) -> String {
        self.factors
            .iter()
            .map(|f| format!("{}-{}", f.k, if f.ring { "ring" } else { "path" }))
            .collect::<Vec<_>>()
            .join(" x ")
    }

    /// Layers the routes need: two per ring with datelines, multiplied.
    pub(crate) fn layers(&self) -> u32 {
        let d = self.factors.iter().filter(|f| f.dateline()).count();
        1u32.checked_shl(d as u32).unwrap_or(u32::MAX)
    }

    /// Dimension-order routes with their layers.
    pub(crate) fn route(&self, topo: &Topo<'_>, engine: &'static str) -> (Routes, PathSl) {
        let n = topo.num_switches();
        let nf = self.factors.len();
        let mut routes = Routes::empty(engine, topo);
        let lid_len = routes.lft.first().map_or(0, Vec::len);
        let mut sl = PathSl::new(n, lid_len);
        // The ports of each switch one step along each factor, down (0) and up (1).
        let by_coord: HashMap<&[u16], usize> = (0..n).map(|s| (self.at(s), s)).collect();
        let mut ports: Vec<Vec<u8>> = vec![Vec::new(); n * nf * 2];
        let mut c = Vec::with_capacity(nf);
        for s in 0..n {
            for f in 0..nf {
                for up in [false, true] {
                    c.clear();
                    c.extend_from_slice(self.at(s));
                    c[f] = self.step(f, c[f], up);
                    if let Some(&t) = by_coord.get(&c[..]) {
                        ports[(s * nf + f) * 2 + usize::from(up)] = topo
                            .adj(SwIdx(s as u32))
                            .iter()
                            .filter(|a| a.peer.idx() == t)
                            .map(|a| a.port)
                            .collect();
                    }
                }
            }
        }
        // Each LID's place among those of its switch: ties alternate on it, so the LIDs
        // of one switch go half one way, half the other.
        let mut on_switch = vec![0u32; n];
        let mut lids: Vec<(Lid, usize, u32, u8)> = Vec::new();
        for d in topo.dests.iter() {
            let dsw = d.sw.idx();
            for lid in d.lids() {
                lids.push((lid, dsw, on_switch[dsw], d.sw_port));
                on_switch[dsw] += 1;
            }
        }
        // Each switch's table and SLs on their own: in parallel.
        let each = |(s, (table, sls)): (usize, (&mut Vec<u8>, &mut [u8]))| {
            let sc = self.at(s);
            for &(lid, dsw, tie, sw_port) in &lids {
                let dc = self.at(dsw);
                let port = if s == dsw {
                    Some(sw_port)
                } else {
                    (0..nf).find(|&f| sc[f] != dc[f]).and_then(|f| {
                        let up = self.forward(f, sc[f], dc[f], tie);
                        let links = &ports[(s * nf + f) * 2 + usize::from(up)];
                        // Parallel links share the LIDs.
                        links.get(usize::from(lid.0) % links.len().max(1)).copied()
                    })
                };
                let Some(port) = port else { continue };
                let l = usize::from(lid.0);
                if let Some(e) = table.get_mut(l) {
                    *e = port;
                }
                if let Some(e) = sls.get_mut(l) {
                    *e = self.layer(sc, dc, tie);
                }
            }
        };
        let (cells, width) = sl.cells_mut();
        if crate::par::worth(n * lids.len()) {
            routes
                .lft
                .par_iter_mut()
                .zip(cells.par_chunks_mut(width))
                .enumerate()
                .for_each(each);
        } else {
            routes
                .lft
                .iter_mut()
                .zip(cells.chunks_mut(width))
                .enumerate()
                .for_each(each);
        }
        (routes, sl)
    }

    /// Whether the path from `from` to `to` along factor `f` goes up the coordinates;
    /// `tie` decides half way round.
    fn forward(&self, f: usize, from: u16, to: u16, tie: u32) -> bool {
        let fac = self.factors[f];
        if !fac.ring {
            return to > from;
        }
        let k = i32::from(fac.k);
        let up = (i32::from(to) - i32::from(from)).rem_euclid(k);
        if up * 2 == k {
            // Half way round: by the destination, so each way carries half.
            (u32::from(to) + tie) % 2 == 0
        } else {
            up * 2 < k
        }
    }

    /// One step from `x` along factor `f` (off a path's end: a coordinate no switch has,
    /// or `x` itself).
    fn step(&self, f: usize, x: u16, up: bool) -> u16 {
        let (x, k) = (u32::from(x), u32::from(self.factors[f].k));
        let y = match (up, self.factors[f].ring) {
            (true, true) => (x + 1) % k,
            (false, true) => (x + k - 1) % k,
            (true, false) => x + 1,
            (false, false) => x.saturating_sub(1),
        };
        u16::try_from(y).unwrap_or(u16::MAX)
    }

    /// The layer of the path from switch coordinates `sc` to `dc`: per ring with
    /// datelines, a bit set when the path passes straight through position 0 there (it
    /// then cannot pass through `k / 2`).
    fn layer(&self, sc: &[u16], dc: &[u16], tie: u32) -> u8 {
        let mut layer = 0u8;
        let mut bit = 0;
        for (f, fac) in self.factors.iter().enumerate() {
            if !fac.dateline() {
                continue;
            }
            // Along factor f the path starts at the source's coordinate: the factors
            // before it change no coordinate of f.
            let (from, to) = (sc[f], dc[f]);
            let (from32, to32, k) = (u32::from(from), u32::from(to), u32::from(fac.k));
            if from != to {
                // Steps to go, and the step at which the path is at position 0.
                let (dist, zero) = if self.forward(f, from, to, tie) {
                    ((to32 + k - from32) % k, (k - from32) % k)
                } else {
                    ((from32 + k - to32) % k, from32)
                };
                if zero >= 1 && zero < dist {
                    // Fewer than 8 rings with datelines: the route is only taken when
                    // their layers fit the budget.
                    layer |= 1u8.checked_shl(bit).unwrap_or(0);
                }
            }
            bit += 1;
        }
        layer
    }
}

/// `a ∩ b` without `skip` (both sorted) into `out`.
fn intersect(a: &[u32], b: &[u32], skip: u32, out: &mut Vec<u32>) {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                if a[i] != skip {
                    out.push(a[i]);
                }
                i += 1;
                j += 1;
            }
        }
    }
}

struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> UnionFind {
        UnionFind {
            parent: (0..n).collect(),
        }
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            // The lower root wins: the classes do not depend on the order of unions.
            let (lo, hi) = (ra.min(rb), ra.max(rb));
            self.parent[hi] = lo;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_core::generate::{FatTree2, GenSpec, Grid as Dims, generate, remove_links};

    fn detected(spec: &GenSpec) -> Option<Vec<(u16, bool)>> {
        let mut f = generate(spec).unwrap();
        sm_core::lid::LidStore::new().assign(&mut f, 0).unwrap();
        let topo = Topo::new(&f).unwrap();
        let mut shape: Vec<(u16, bool)> = Grid::detect(&topo)?
            .factors
            .iter()
            .map(|f| (f.k, f.ring))
            .collect();
        shape.sort_unstable();
        Some(shape)
    }

    #[test]
    fn tori_and_meshes_are_found_factor_by_factor() {
        let torus = |d: Vec<u32>| GenSpec::Torus(Dims::new(d, 1));
        let mesh = |d: Vec<u32>| GenSpec::Mesh(Dims::new(d, 1));
        assert_eq!(detected(&torus(vec![8, 8, 8])), Some(vec![(8, true); 3]));
        assert_eq!(
            detected(&torus(vec![5, 3, 7])),
            Some(vec![(3, true), (5, true), (7, true)])
        );
        // A ring of four is two single links: routed across them, it needs no dateline.
        assert_eq!(
            detected(&torus(vec![4, 6])),
            Some(vec![(2, false), (2, false), (6, true)])
        );
        assert_eq!(detected(&torus(vec![9])), Some(vec![(9, true)]));
        assert_eq!(
            detected(&mesh(vec![4, 3])),
            Some(vec![(3, false), (4, false)])
        );
        // Parallel links are one link of the grid.
        let mut doubled = Dims::new(vec![5, 5], 1);
        doubled.parallel = vec![2];
        assert_eq!(detected(&GenSpec::Torus(doubled)), Some(vec![(5, true); 2]));
    }

    #[test]
    fn other_shapes_are_not_taken_for_grids() {
        assert_eq!(detected(&GenSpec::FatTree2(FatTree2::new(4))), None);
        let mut f = generate(&GenSpec::Torus(Dims::new(vec![6, 6], 1))).unwrap();
        remove_links(&mut f, 0.02, 3);
        sm_core::lid::LidStore::new().assign(&mut f, 0).unwrap();
        let topo = Topo::new(&f).unwrap();
        assert!(Grid::detect(&topo).is_none(), "a torus missing a link");
    }

    #[test]
    fn a_path_takes_the_layer_of_the_dateline_it_does_not_pass() {
        let g = Grid {
            factors: vec![Factor { k: 8, ring: true }],
            coord: Vec::new(),
        };
        // 6 -> 1 goes up through 7 and 0: past dateline 0, so on the other layer.
        assert_eq!(g.layer(&[6], &[1], 0), 1);
        // 1 -> 4 passes 2 and 3: layer 0.
        assert_eq!(g.layer(&[1], &[4], 0), 0);
        // Half way round: the LID's place picks the way, and the way the layer.
        let (a, b) = (g.layer(&[6], &[2], 0), g.layer(&[6], &[2], 1));
        assert_ne!(a, b);
    }
}
