//! Virtual layers again after a repair of layered tables: the paths a repair changed go
//! back into layers, each layer kept free of cycles; every other path keeps its SL.
//!
//! A repair moves only the entries of switches whose path broke (or, when links return,
//! entries going back), so for one LID the paths that change are those of the sources
//! whose new path passes through a switch whose entry moved: a source whose path avoids
//! them follows the same switches as before. The layers' channel dependency graphs are
//! built from the unchanged paths; each changed path goes into its old layer if that stays
//! acyclic (hosts keep the SL they asked the SA for), else into the first layer that does,
//! opening a new one within the budget if none does. A path that fits no layer is an
//! error: the caller routes everything again.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use sm_core::NodeKind;
use sm_core::lft::LftRead;
use sm_mad::Lid;

use crate::routes::PathSl;
use crate::topo::{SwIdx, Topo};

/// Channel dependency graphs, one per layer: channel `c` (link `i` of switch `s`, numbered
/// `off[s] + i`) to the channels a path takes next.
struct Layers {
    next: Vec<Vec<Vec<u32>>>,
    edges: Vec<HashSet<(u32, u32)>>,
}

impl Layers {
    fn new(layers: usize, channels: usize) -> Layers {
        Layers {
            next: (0..layers).map(|_| vec![Vec::new(); channels]).collect(),
            edges: (0..layers).map(|_| HashSet::new()).collect(),
        }
    }

    fn add(&mut self, layer: usize, (a, b): (u32, u32)) -> bool {
        if self.edges[layer].insert((a, b)) {
            self.next[layer][a as usize].push(b);
            true
        } else {
            false
        }
    }

    fn remove(&mut self, layer: usize, (a, b): (u32, u32)) {
        self.edges[layer].remove(&(a, b));
        let v = &mut self.next[layer][a as usize];
        if let Some(i) = v.iter().position(|&x| x == b) {
            v.swap_remove(i);
        }
    }

    /// Whether `to` is reachable from `from` in `layer`.
    fn reaches(&self, layer: usize, from: u32, to: u32, seen: &mut HashSet<u32>) -> bool {
        seen.clear();
        let mut stack = vec![from];
        while let Some(c) = stack.pop() {
            if c == to {
                return true;
            }
            if seen.insert(c) {
                stack.extend(self.next[layer][c as usize].iter().copied());
            }
        }
        false
    }

    /// Adds the dependencies `deps` to `layer` if it stays acyclic; false (and unchanged)
    /// otherwise.
    fn try_fit(&mut self, layer: usize, deps: &[(u32, u32)], seen: &mut HashSet<u32>) -> bool {
        let mut added = Vec::new();
        for &(a, b) in deps {
            if self.edges[layer].contains(&(a, b)) {
                continue;
            }
            if a == b || self.reaches(layer, b, a, seen) {
                for &e in added.iter().rev() {
                    self.remove(layer, e);
                }
                return false;
            }
            self.add(layer, (a, b));
            added.push((a, b));
        }
        true
    }
}

/// The channels of the path from `s` to `lid` under `tables` into `out`, and the switches
/// it enters into `hops`; false if it does not reach the LID's switch `dest`.
#[allow(clippy::too_many_arguments)]
fn path<T: LftRead + ?Sized>(
    topo: &Topo<'_>,
    tables: &[&T],
    off: &[u32],
    s: SwIdx,
    lid: Lid,
    dest: SwIdx,
    out: &mut Vec<u32>,
    hops: &mut Vec<SwIdx>,
) -> bool {
    out.clear();
    hops.clear();
    let mut cur = s;
    while cur != dest {
        let Some(p) = tables[cur.idx()].entry(usize::from(lid.0)) else {
            return false;
        };
        let Some(i) = topo.adj(cur).iter().position(|a| a.port == p) else {
            return false;
        };
        out.push(off[cur.idx()] + i as u32);
        cur = topo.adj(cur)[i].peer;
        hops.push(cur);
        if out.len() > topo.num_switches() {
            return false;
        }
    }
    true
}

/// New SLs for layered tables after `moved` entries (switch, LID) changed in `tables`:
/// see the module doc. `old` is the SLs the tables had before; `budget` the layers (VLs)
/// there may be at most.
pub fn relayer<T: LftRead + ?Sized>(
    topo: &Topo<'_>,
    tables: &[&T],
    old: &PathSl,
    moved: &[(SwIdx, Lid)],
    budget: u8,
) -> Result<PathSl, String> {
    let n = topo.num_switches();
    let mut off = Vec::with_capacity(n + 1);
    let mut total = 0u32;
    for s in 0..n {
        off.push(total);
        total += topo.adj(SwIdx(s as u32)).len() as u32;
    }
    off.push(total);
    let sources: BTreeSet<SwIdx> = topo
        .dests
        .iter()
        .filter(|d| d.kind != NodeKind::Switch)
        .map(|d| d.sw)
        .collect();
    let mut by_lid: BTreeMap<Lid, HashSet<SwIdx>> = BTreeMap::new();
    for &(s, lid) in moved {
        by_lid.entry(lid).or_default().insert(s);
    }
    let layers = (usize::from(old.max()) + 1).max(usize::from(budget));
    let mut g = Layers::new(layers, total as usize);
    let mut redo: Vec<(SwIdx, Lid, Vec<u32>)> = Vec::new();
    let mut chans = Vec::new();
    let mut hops = Vec::new();
    for d in &topo.dests {
        for lid in d.lids() {
            let changed = by_lid.get(&lid);
            for &s in &sources {
                if !path(topo, tables, &off, s, lid, d.sw, &mut chans, &mut hops) {
                    if changed.is_some() {
                        return Err(format!("LID {lid} is not reached from every switch"));
                    }
                    continue;
                }
                let through_moved =
                    changed.is_some_and(|m| m.contains(&s) || hops.iter().any(|h| m.contains(h)));
                if through_moved {
                    redo.push((s, lid, chans.clone()));
                    continue;
                }
                let layer = usize::from(old.get(s, lid)).min(layers - 1);
                for w in chans.windows(2) {
                    g.add(layer, (w[0], w[1]));
                }
            }
        }
    }
    let mut sl = old.clone();
    let mut seen = HashSet::new();
    for (s, lid, chans) in redo {
        let deps: Vec<(u32, u32)> = chans.windows(2).map(|w| (w[0], w[1])).collect();
        let was = usize::from(old.get(s, lid)).min(layers - 1);
        let order = std::iter::once(was).chain((0..layers).filter(|&l| l != was));
        let mut placed = false;
        for layer in order {
            if g.try_fit(layer, &deps, &mut seen) {
                sl.set(s, lid, layer as u8);
                placed = true;
                break;
            }
        }
        if !placed {
            return Err(format!(
                "the repaired path from switch {} to LID {lid} fits none of the {layers} layers",
                topo.guid(s)
            ));
        }
    }
    Ok(sl)
}
