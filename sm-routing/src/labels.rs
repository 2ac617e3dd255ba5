//! The deadlock rule shared by `updn` and `ftree`: every path goes up zero or more times, then
//! down zero or more times, where "up" and "down" come from a total order on switches, and
//! the tables are destination-based, so one output port per (switch, destination) must work
//! for every packet that can be at that switch.
//!
//! # The labelling
//!
//! For a destination switch `D`, every switch `s` gets a *label*: the length of its path to
//! `D` and its *phase*:
//! - **down** (`D`-labelled): the path from `s` only goes down. A packet that entered `s`
//!   by a down move must continue down, so only down-labelled switches may be entered by a
//!   down move, and they leave by a down move into another down-labelled switch.
//! - **up** (`U`-labelled): the path first goes up. Nothing enters an up-labelled switch by
//!   a down move, so it may leave by an up move into any labelled switch.
//!
//! Following these rules from any switch gives `up* down*`, each step one shorter, so there
//! is no loop and no down-then-up turn. That makes the channel dependency graph acyclic: a
//! dependency `(a→b) → (b→c)` is up-up (the order decreases), down-down (it increases), or
//! up-down; a cycle would need a down-up turn somewhere.
//!
//! # The construction: a level-by-level search from `D`, with a safety net
//!
//! 1. **Greedy, minimal**: a breadth-first search backwards from `D` (label `down`, length
//!    0). When all switches of length `k-1` are known, a switch `y` not yet labelled gets
//!    length `k` if a neighbour `t` of length `k-1` offers a legal step `y → t`: a *down*
//!    step into a down-labelled `t` (then `y` is down-labelled), or an *up* step into any
//!    `t` (then `y` is up-labelled). When both exist, `down` wins: it keeps `y` usable by
//!    switches above it. Every switch gets its shortest legal path, given the labels
//!    of the switches nearer to `D`.
//! 2. **Check**: greedy can strand a switch. If `t` has an all-down path to `D` that is
//!    longer than an up-down path, `t` becomes up-labelled and a switch `x` whose only legal
//!    path is `x → t` (down) then down is left without one. A switch has a legal path
//!    exactly when it has an all-down path, or an up step to a switch that has one. So a
//!    second search collects the switches with an all-down path to `D`; if greedy
//!    down-labelled all of them, greedy reached every switch with any legal path (induction
//!    on the up steps). Otherwise a third search counts the switches with a legal path, and
//!    only if greedy labelled fewer is a switch stranded.
//! 3. **Fallback** (only when the check fails, for that destination only): every switch with
//!    an all-down path is down-labelled with its shortest all-down length, then up-labelled
//!    switches are found in order of length from there (a bucketed breadth-first search
//!    with sources at different lengths). This reaches every switch with a legal path, at
//!    the price of some all-down paths longer than the shortest legal path.
//!
//! The labels live in a switch-major byte matrix (`row(s)[D]`), so a switch's table is
//! computed from its own row and its neighbours' rows. A label byte is the length (bits
//! 0..7) plus [`DOWN_FLAG`]; [`UNREACHABLE`] means no legal path (paths longer than 126 hops
//! are not routed).

use crate::topo::{Dest, SwIdx, Topo};

/// The move `s → t` goes up (towards the roots).
pub(crate) const UP: u8 = 1;
/// The move `s → t` goes down.
pub(crate) const DOWN: u8 = 2;
/// The link is never used (e.g. between two switches of one fat-tree rank).
pub(crate) const NEVER: u8 = 0;

/// Bit 7 of a label: the switch's path only goes down.
pub(crate) const DOWN_FLAG: u8 = 0x80;
/// No legal path.
pub(crate) const UNREACHABLE: u8 = 0x7F;
const MAX_LEN: u8 = 126;
const UNSET: u8 = 0xFF;
/// In `Scratch::down`: a legal path, but no all-down one.
const LEGAL_ONLY: u8 = 0xFF;

/// The direction of every link end, in compressed rows parallel to [`Topo::adj`].
#[derive(Debug, Clone)]
pub(crate) struct Dirs {
    off: Vec<u32>,
    /// (peer, direction of the move from the row's switch to the peer).
    adj: Vec<(u32, u8)>,
}

impl Dirs {
    /// Directions from a rule `dir(s, t)` ([`UP`], [`DOWN`] or [`NEVER`]).
    pub(crate) fn new(topo: &Topo<'_>, dir: impl Fn(SwIdx, SwIdx) -> u8) -> Dirs {
        let n = topo.num_switches();
        let mut off = Vec::with_capacity(n + 1);
        let mut adj = Vec::new();
        for s in 0..n {
            off.push(adj.len() as u32);
            let s = SwIdx(s as u32);
            for a in topo.adj(s) {
                adj.push((a.peer.0, dir(s, a.peer)));
            }
        }
        off.push(adj.len() as u32);
        Dirs { off, adj }
    }

    /// Links of `s` with their directions, in the order of [`Topo::adj`].
    #[inline]
    pub(crate) fn of(&self, s: usize) -> &[(u32, u8)] {
        &self.adj[self.off[s] as usize..self.off[s + 1] as usize]
    }
}

/// Labels of every switch towards every switch, switch-major.
#[derive(Debug, Clone)]
pub(crate) struct Labels {
    n: usize,
    m: Vec<u8>,
    /// Destinations for which the greedy search was replaced by the fallback (read by the
    /// tests; a diagnostic).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fallbacks: usize,
}

impl Labels {
    /// Labels of switch `s` towards every destination switch.
    #[inline]
    pub(crate) fn row(&self, s: usize) -> &[u8] {
        &self.m[s * self.n..(s + 1) * self.n]
    }

    /// Label of `s` towards `d`.
    #[inline]
    pub(crate) fn get(&self, s: usize, d: usize) -> u8 {
        self.m[s * self.n + d]
    }

    /// Computes the labels (in parallel over destinations; the result does not depend on the
    /// thread count).
    pub(crate) fn new(dirs: &Dirs) -> Labels {
        let n = dirs.off.len() - 1;
        let mut by_dest = vec![UNREACHABLE; n * n];
        let fallbacks = crate::par::chunks_sum(&mut by_dest, n, Scratch::default, |sc, d, col| {
            usize::from(label_to(dirs, d, col, sc))
        });
        // Transpose into switch-major rows, a block of rows per task.
        const B: usize = 64;
        let mut m = vec![UNREACHABLE; n * n];
        crate::par::chunks(
            &mut m,
            B * n,
            || (),
            |_, blk, out| {
                let s0 = blk * B;
                let rows = out.len() / n.max(1);
                for d in 0..n {
                    let src = &by_dest[d * n + s0..d * n + s0 + rows];
                    for (r, &v) in src.iter().enumerate() {
                        out[r * n + d] = v;
                    }
                }
            },
        );
        Labels { n, m, fallbacks }
    }
}

#[derive(Default)]
struct Scratch {
    cur: Vec<u32>,
    next: Vec<u32>,
    opt: Vec<u8>,
    down: Vec<u8>,
    buckets: Vec<Vec<u32>>,
}

/// Labels every switch towards `d` into `col`; true when the fallback was needed.
fn label_to(dirs: &Dirs, d: usize, col: &mut [u8], sc: &mut Scratch) -> bool {
    let n = col.len();
    col.fill(UNSET);
    sc.opt.clear();
    sc.opt.resize(n, 0);
    // 1. Greedy.
    col[d] = DOWN_FLAG;
    let mut down_labelled = 1usize;
    sc.cur.clear();
    sc.cur.push(d as u32);
    let mut k = 0u8;
    while !sc.cur.is_empty() && k < MAX_LEN {
        k += 1;
        sc.next.clear();
        for &t in &sc.cur {
            let t_down = col[t as usize] & DOWN_FLAG != 0;
            for &(y, dir) in dirs.of(t as usize) {
                let yi = y as usize;
                if col[yi] != UNSET {
                    continue;
                }
                // `dir` is the move t → y; the packet moves y → t, the other way.
                let bit = match dir {
                    UP if t_down => 1,
                    DOWN => 2,
                    _ => continue,
                };
                if sc.opt[yi] == 0 {
                    sc.next.push(y);
                }
                sc.opt[yi] |= bit;
            }
        }
        for &y in &sc.next {
            let yi = y as usize;
            col[yi] = if sc.opt[yi] & 1 != 0 {
                down_labelled += 1;
                DOWN_FLAG | k
            } else {
                k
            };
            sc.opt[yi] = 0;
        }
        std::mem::swap(&mut sc.cur, &mut sc.next);
    }
    // 2. Every switch with an all-down path must be down-labelled. `down[s]` = length of the
    //    shortest all-down path + 1 (0 = none).
    sc.down.clear();
    sc.down.resize(n, 0);
    sc.down[d] = 1;
    sc.cur.clear();
    sc.cur.push(d as u32);
    let mut head = 0;
    while head < sc.cur.len() {
        let t = sc.cur[head] as usize;
        head += 1;
        let len = sc.down[t];
        if len > MAX_LEN {
            continue;
        }
        for &(y, dir) in dirs.of(t) {
            // t → y up means y → t is a down move.
            if dir == UP && sc.down[y as usize] == 0 {
                sc.down[y as usize] = len + 1;
                sc.cur.push(y);
            }
        }
    }
    let mut fallback = false;
    if sc.cur.len() != down_labelled {
        // Some switch with an all-down path went up; that strands a switch only if fewer
        // switches were labelled than have a legal path (all-down, or up steps to one).
        let labelled = col.iter().filter(|&&v| v != UNSET).count();
        let mut legal = sc.cur.len();
        let mut head = 0;
        let mut queue = std::mem::take(&mut sc.next);
        queue.clear();
        queue.extend_from_slice(&sc.cur);
        while head < queue.len() {
            let t = queue[head] as usize;
            head += 1;
            for &(y, dir) in dirs.of(t) {
                // t → y down means y → t is an up move.
                if dir == DOWN && sc.down[y as usize] == 0 {
                    sc.down[y as usize] = LEGAL_ONLY;
                    legal += 1;
                    queue.push(y);
                }
            }
        }
        sc.next = queue;
        fallback = legal > labelled;
    }
    if fallback {
        // 3. Down-labels fixed first, up-labels by bucketed search.
        col.fill(UNSET);
        for b in &mut sc.buckets {
            b.clear();
        }
        sc.buckets.resize_with(MAX_LEN as usize + 2, Vec::new);
        for &s in &sc.cur {
            let len = sc.down[s as usize].saturating_sub(1);
            col[s as usize] = DOWN_FLAG | len;
            sc.buckets[len as usize].push(s);
        }
        for k in 0..=MAX_LEN as usize {
            let mut i = 0;
            while i < sc.buckets[k].len() {
                let t = sc.buckets[k][i] as usize;
                i += 1;
                if k == MAX_LEN as usize {
                    continue;
                }
                for &(y, dir) in dirs.of(t) {
                    // t → y down means y → t is an up move.
                    if dir == DOWN && col[y as usize] == UNSET {
                        col[y as usize] = k as u8 + 1;
                        sc.buckets[k + 1].push(y);
                    }
                }
            }
        }
    }
    for v in col.iter_mut() {
        if *v == UNSET {
            *v = UNREACHABLE;
        }
    }
    fallback
}

/// Candidate masks from labels: bit `i` of `out[d]` is set when link `i` of `s` is a
/// minimal legal next hop towards `d` (see the module doc).
pub(crate) fn label_masks(labels: &Labels, dirs: &Dirs, s: SwIdx, words: usize, out: &mut [u64]) {
    let row_s = labels.row(s.idx());
    let links = dirs.of(s.idx());
    crate::fill::build_masks(labels.n, links.len(), words, out, |i, start, len| {
        let (p, dir) = links[i];
        let ls = &row_s[start..start + len];
        let lp = &labels.row(p as usize)[start..start + len];
        let mut m = 0u64;
        match dir {
            DOWN => {
                for (j, (&ls, &lp)) in ls.iter().zip(lp).enumerate() {
                    // s down-labelled, p down-labelled one shorter.
                    let ok = ls & DOWN_FLAG != 0 && ls != DOWN_FLAG && lp == ls.wrapping_sub(1);
                    m |= u64::from(ok) << j;
                }
            }
            UP => {
                for (j, (&ls, &lp)) in ls.iter().zip(lp).enumerate() {
                    // s up-labelled (and reachable), p any label one shorter.
                    let ok = ls & DOWN_FLAG == 0 && ls != UNREACHABLE && (lp & 0x7F) + 1 == ls;
                    m |= u64::from(ok) << j;
                }
            }
            _ => {}
        }
        m
    });
}

/// A switch with sources (destinations `source` selects) and a destination switch it has
/// no legal path to.
pub(crate) fn unreached_pair(
    topo: &Topo<'_>,
    labels: &Labels,
    source: impl Fn(&Dest) -> bool,
) -> Option<(SwIdx, SwIdx)> {
    unreached_pair_of(topo, labels, &source, |_| true)
}

/// [`unreached_pair`] with only the destinations `dest` takes.
pub(crate) fn unreached_pair_of(
    topo: &Topo<'_>,
    labels: &Labels,
    source: impl Fn(&Dest) -> bool,
    dest: impl Fn(&Dest) -> bool,
) -> Option<(SwIdx, SwIdx)> {
    let n = topo.num_switches();
    let mut has_ca = vec![false; n];
    let mut is_dest = vec![false; n];
    for d in &topo.dests {
        if dest(d) {
            is_dest[d.sw.idx()] = true;
        }
        if source(d) {
            has_ca[d.sw.idx()] = true;
        }
    }
    for s in (0..n).filter(|&s| has_ca[s]) {
        let row = labels.row(s);
        if let Some(d) = (0..n).find(|&d| is_dest[d] && row[d] == UNREACHABLE) {
            return Some((SwIdx(s as u32), SwIdx(d as u32)));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_core::NodeKind;
    use sm_core::fabric::{Fabric, NodeSpec};
    use sm_core::lid::LidStore;
    use sm_mad::Guid;

    /// Switches named by their order key (GUID), linked as given; up = towards a lower GUID.
    fn labels_of(keys: &[u64], links: &[(usize, usize)]) -> (Labels, Vec<u64>) {
        let mut f = Fabric::new();
        let nodes: Vec<_> = keys
            .iter()
            .map(|&k| {
                f.add_node(NodeSpec::new(
                    NodeKind::Switch,
                    Guid(k),
                    format!("sw {k}"),
                    4,
                ))
                .unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        let mut next = vec![1u8; keys.len()];
        for &(a, b) in links {
            let pa = f
                .port_of(nodes[a], next[a])
                .unwrap_or_else(|| panic!("port"));
            let pb = f
                .port_of(nodes[b], next[b])
                .unwrap_or_else(|| panic!("port"));
            next[a] += 1;
            next[b] += 1;
            f.connect(pa, pb).unwrap_or_else(|e| panic!("{e}"));
        }
        LidStore::new()
            .assign(&mut f, 0)
            .unwrap_or_else(|e| panic!("{e}"));
        let topo = Topo::new(&f).unwrap_or_else(|e| panic!("{e}"));
        let dirs = Dirs::new(&topo, |s, t| {
            if topo.guid(t) < topo.guid(s) {
                UP
            } else {
                DOWN
            }
        });
        let guids = (0..keys.len() as u32)
            .map(|s| topo.guid(SwIdx(s)).0)
            .collect();
        (Labels::new(&dirs), guids)
    }

    #[test]
    fn greedy_would_strand_a_switch_so_the_fallback_runs() {
        // Keys: d 10, t 5, a 6, b 7, v 3, s 4. t's shortest path is up via v (2 hops), its
        // all-down path t-a-b-d is 3; s's only legal path is down through t.
        let keys = [10, 5, 6, 7, 3, 4];
        let (d, t, a, b, v, s) = (0, 1, 2, 3, 4, 5);
        let (labels, guids) = labels_of(&keys, &[(t, a), (a, b), (b, d), (t, v), (v, d), (s, t)]);
        assert_eq!(guids, keys.to_vec());
        assert!(labels.fallbacks > 0);
        assert_eq!(labels.get(s, d), DOWN_FLAG | 4);
        assert_eq!(labels.get(t, d), DOWN_FLAG | 3);
        assert_eq!(labels.get(v, d), DOWN_FLAG | 1);
    }

    #[test]
    fn greedy_keeps_shortest_paths_when_nothing_is_stranded() {
        // A ring 1-2-3-4-5-1: from 3 towards 5 the path 3-4-5 is all down.
        let keys = [1, 2, 3, 4, 5];
        let (labels, _) = labels_of(&keys, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]);
        assert_eq!(labels.fallbacks, 0);
        assert_eq!(labels.get(2, 4), DOWN_FLAG | 2);
        // 2 towards 5 has an all-down path 2-3-4-5 but goes up to 1 (shorter), stranding
        // nobody: no fallback.
        assert_eq!(labels.get(1, 4), 2);
        // 2 towards 5: up to 1, then down to 5.
        assert_eq!(labels.get(1, 4), 2);
        for s in 0..5 {
            for d in 0..5 {
                assert_ne!(labels.get(s, d), UNREACHABLE);
            }
        }
    }
}
