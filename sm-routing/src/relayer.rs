//! Virtual layers again after a repair of layered tables: the paths a repair changed go
//! back into layers, each layer kept free of cycles; every other path keeps its SL.
//!
//! A repair moves only the entries of switches whose path broke (or, when links return,
//! entries going back), so for one LID the paths that change are those of the sources
//! whose new path passes through a switch whose entry moved: a source whose path avoids
//! them follows the same switches as before. The layers' channel dependency graphs are
//! built from the unchanged paths; each changed path goes into the layer it had before
//! any repair if the caller remembers one (a path coming back gets its SL back), else its
//! old layer, if that stays acyclic (hosts keep the SL they asked the SA for), else into
//! the first layer that does, opening a new one within the budget if none does. A path
//! that fits no layer is an error: the caller routes everything again.
//!
//! The graphs are built per LID over its tree, not per path: each switch collects the
//! layers of the sources whose paths pass it (pushed down the tree, stopping where the
//! bits are already there), and each switch's turn is a dependency in those layers. A
//! dependency is a bit per (channel in, exit of the switch it leads to) and layer.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use sm_core::NodeKind;
use sm_core::lft::LftRead;
use sm_mad::Lid;

use crate::routes::PathSl;
use crate::topo::{SwIdx, Topo};

/// Dependencies this many bits at most (a layer's bits times the layers) are built;
/// beyond, the caller routes everything again.
const MAX_BITS: usize = 1 << 32;

/// Channels of the topology: link `i` of switch `s` is channel `off[s] + i`.
struct Channels {
    off: Vec<u32>,
    /// The switch each channel leads to.
    head: Vec<SwIdx>,
    /// Index in `adj(s)` of each port of `s`, `u8::MAX` for none.
    exit: Vec<[u8; 256]>,
    /// Most links of any switch.
    width: usize,
}

impl Channels {
    fn new(topo: &Topo<'_>) -> Channels {
        let n = topo.num_switches();
        let (mut off, mut head, mut exit) = (Vec::with_capacity(n + 1), Vec::new(), Vec::new());
        let mut width = 1;
        for s in (0..n).map(|i| SwIdx(i as u32)) {
            off.push(head.len() as u32);
            let mut e = [u8::MAX; 256];
            for (i, a) in topo.adj(s).iter().enumerate() {
                e[usize::from(a.port)] = i as u8;
                head.push(a.peer);
            }
            exit.push(e);
            width = width.max(topo.adj(s).len());
        }
        off.push(head.len() as u32);
        Channels {
            off,
            head,
            exit,
            width,
        }
    }

    /// The link index `s` leaves by towards `lid`, if the table names a link.
    fn next<T: LftRead + ?Sized>(&self, tables: &[&T], s: SwIdx, lid: Lid) -> Option<u8> {
        let p = tables[s.idx()].entry(usize::from(lid.0))?;
        let i = self.exit[s.idx()][usize::from(p)];
        (i != u8::MAX).then_some(i)
    }

    fn chan(&self, s: SwIdx, i: u8) -> u32 {
        self.off[s.idx()] + u32::from(i)
    }
}

/// Dependency graphs, one bit set per layer: bit `c * width + j` means a path turns from
/// channel `c` into link `j` of the switch `c` leads to.
struct Layers {
    bits: Vec<Vec<u64>>,
    width: usize,
}

impl Layers {
    fn index(&self, c: u32, j: u8) -> usize {
        c as usize * self.width + usize::from(j)
    }

    fn has(&self, layer: usize, i: usize) -> bool {
        self.bits[layer][i / 64] >> (i % 64) & 1 != 0
    }

    fn set(&mut self, layer: usize, i: usize, on: bool) {
        let w = &mut self.bits[layer][i / 64];
        if on {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }

    /// Whether channel `to` is reachable from channel `from` in `layer`.
    fn reaches(
        &self,
        ch: &Channels,
        layer: usize,
        from: u32,
        to: u32,
        seen: &mut HashSet<u32>,
    ) -> bool {
        seen.clear();
        let mut stack = vec![from];
        while let Some(c) = stack.pop() {
            if c == to {
                return true;
            }
            if !seen.insert(c) {
                continue;
            }
            let y = ch.head[c as usize];
            let deg = (ch.off[y.idx() + 1] - ch.off[y.idx()]) as u8;
            for j in 0..deg {
                if self.has(layer, self.index(c, j)) {
                    stack.push(ch.chan(y, j));
                }
            }
        }
        false
    }

    /// Adds the turns of `path` (channels, in order) to `layer` if it stays acyclic;
    /// false (and unchanged) otherwise.
    fn try_fit(
        &mut self,
        ch: &Channels,
        layer: usize,
        path: &[u32],
        seen: &mut HashSet<u32>,
    ) -> bool {
        let mut added = Vec::new();
        for w in path.windows(2) {
            let (a, b) = (w[0], w[1]);
            let i = self.index(a, (b - ch.off[ch.head[a as usize].idx()]) as u8);
            if self.has(layer, i) {
                continue;
            }
            if self.reaches(ch, layer, b, a, seen) {
                for &k in &added {
                    self.set(layer, k, false);
                }
                return false;
            }
            self.set(layer, i, true);
            added.push(i);
        }
        true
    }
}

/// What one worker gathers over its LIDs.
struct Part {
    /// Dependency bits per layer.
    bits: Vec<Vec<u64>>,
    /// Paths (source switch, LID) that changed.
    redo: Vec<(SwIdx, Lid)>,
    /// Scratch: layers passing each switch, the switches touched, the moved-entry search.
    through: Vec<u16>,
    touched: Vec<SwIdx>,
    state: Vec<u8>,
    err: Option<String>,
}

impl Part {
    fn merge(mut self, o: Part) -> Part {
        for (a, b) in self.bits.iter_mut().zip(&o.bits) {
            for (x, y) in a.iter_mut().zip(b) {
                *x |= y;
            }
        }
        self.redo.extend(o.redo);
        self.err = self.err.or(o.err);
        self
    }

    fn set(&mut self, width: usize, layer: usize, c: u32, j: u8) {
        let i = c as usize * width + usize::from(j);
        self.bits[layer][i / 64] |= 1 << (i % 64);
    }
}

/// The inputs of the per-LID pass.
struct Pass<'a, T: ?Sized> {
    ch: &'a Channels,
    tables: &'a [&'a T],
    old: &'a PathSl,
    sources: &'a [SwIdx],
    by_lid: &'a BTreeMap<Lid, HashSet<SwIdx>>,
    layers: usize,
    width: usize,
}

impl<T: LftRead + ?Sized> Pass<'_, T> {
    /// The dependencies of `lid`'s unchanged paths into `part`, its changed paths into
    /// `part.redo`.
    fn lid(&self, part: &mut Part, dest: SwIdx, lid: Lid) {
        let ch = self.ch;
        let changed = self.by_lid.get(&lid);
        if let Some(m) = changed {
            // 0 unknown, 1 on the way, 2 clean, 3 passes a moved entry.
            part.state.fill(0);
            for &s in self.sources {
                let mut stack = vec![s];
                while let Some(&x) = stack.last() {
                    if part.state[x.idx()] >= 2 {
                        stack.pop();
                        continue;
                    }
                    if m.contains(&x) || x == dest {
                        part.state[x.idx()] = if x == dest { 2 } else { 3 };
                        stack.pop();
                        continue;
                    }
                    let Some(i) = ch.next(self.tables, x, lid) else {
                        part.err
                            .get_or_insert(format!("LID {lid} is not reached from every switch"));
                        return;
                    };
                    let y = ch.head[ch.chan(x, i) as usize];
                    match part.state[y.idx()] {
                        0 => {
                            part.state[x.idx()] = 1;
                            stack.push(y);
                        }
                        1 => {
                            part.err
                                .get_or_insert(format!("LID {lid}: the tables loop"));
                            return;
                        }
                        v => {
                            part.state[x.idx()] = v;
                            stack.pop();
                        }
                    }
                }
                if part.state[s.idx()] == 3 {
                    part.redo.push((s, lid));
                }
            }
        }
        for &s in self.sources {
            if changed.is_some() && part.state[s.idx()] == 3 {
                continue;
            }
            let layer = usize::from(self.old.get(s, lid)).min(self.layers - 1);
            let mut add = (1u16 << layer) & !part.through[s.idx()];
            let mut cur = s;
            while add != 0 && cur != dest {
                if part.through[cur.idx()] == 0 {
                    part.touched.push(cur);
                }
                part.through[cur.idx()] |= add;
                let Some(i) = ch.next(self.tables, cur, lid) else {
                    break;
                };
                cur = ch.head[ch.chan(cur, i) as usize];
                add &= !part.through[cur.idx()];
            }
        }
        for k in 0..part.touched.len() {
            let x = part.touched[k];
            let mut bits = std::mem::take(&mut part.through[x.idx()]);
            let Some(i) = ch.next(self.tables, x, lid) else {
                continue;
            };
            let c = ch.chan(x, i);
            let y = ch.head[c as usize];
            if y == dest {
                continue;
            }
            let Some(j) = ch.next(self.tables, y, lid) else {
                continue;
            };
            while bits != 0 {
                let layer = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                part.set(self.width, layer, c, j);
            }
        }
        part.touched.clear();
    }
}

/// A path placed again: its source switch and LID, the SL it had and the SL it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    pub switch: SwIdx,
    pub lid: Lid,
    pub was: u8,
    pub now: u8,
}

/// New SLs for layered tables after `moved` entries (switch, LID) changed in `tables`:
/// see the module doc. `old` is the SLs the tables had before, `first` the SL a path had
/// before any repair (tried first), `budget` the layers (VLs) there may be at most.
/// Returns the SLs and every path placed again.
pub fn relayer<T: LftRead + Sync + ?Sized>(
    topo: &Topo<'_>,
    tables: &[&T],
    old: &PathSl,
    first: &BTreeMap<(SwIdx, Lid), u8>,
    moved: &[(SwIdx, Lid)],
    budget: u8,
) -> Result<(PathSl, Vec<Placed>), String> {
    let n = topo.num_switches();
    let ch = Channels::new(topo);
    let layers = (usize::from(old.max()) + 1)
        .max(usize::from(budget))
        .min(16);
    let per_layer = ch.head.len() * ch.width;
    if per_layer.saturating_mul(layers) > MAX_BITS {
        return Err(format!(
            "{per_layer} dependency bits a layer are too many to layer again"
        ));
    }
    let sources: Vec<SwIdx> = topo
        .dests
        .iter()
        .filter(|d| d.kind != NodeKind::Switch)
        .map(|d| d.sw)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut by_lid: BTreeMap<Lid, HashSet<SwIdx>> = BTreeMap::new();
    for &(s, lid) in moved {
        by_lid.entry(lid).or_default().insert(s);
    }
    let lids: Vec<(SwIdx, Lid)> = topo
        .dests
        .iter()
        .flat_map(|d| d.lids().map(move |l| (d.sw, l)))
        .collect();
    let words = per_layer.div_ceil(64);
    let pass = Pass {
        ch: &ch,
        tables,
        old,
        sources: &sources,
        by_lid: &by_lid,
        layers,
        width: ch.width,
    };
    let fresh = || Part {
        bits: vec![vec![0u64; words]; layers],
        redo: Vec::new(),
        through: vec![0u16; n],
        touched: Vec::new(),
        state: vec![0u8; n],
        err: None,
    };
    let part = if crate::par::worth(lids.len() * n) {
        use rayon::prelude::*;
        lids.par_chunks(256)
            .fold(fresh, |mut part, chunk| {
                for &(dest, lid) in chunk {
                    pass.lid(&mut part, dest, lid);
                }
                part
            })
            .reduce(fresh, Part::merge)
    } else {
        let mut part = fresh();
        for &(dest, lid) in &lids {
            pass.lid(&mut part, dest, lid);
        }
        part
    };
    if let Some(e) = part.err {
        return Err(e);
    }
    let mut g = Layers {
        bits: part.bits,
        width: ch.width,
    };
    let mut redo = part.redo;
    redo.sort_unstable_by_key(|&(s, lid)| (lid, s));
    let mut sl = old.clone();
    let mut placed_all = Vec::with_capacity(redo.len());
    let mut seen = HashSet::new();
    let mut path = Vec::new();
    for (s, lid) in redo {
        let dest = topo
            .dest_of(lid)
            .map(|d| d.sw)
            .ok_or("a LID with no port")?;
        path.clear();
        let mut cur = s;
        while cur != dest && path.len() <= n {
            let i = ch
                .next(tables, cur, lid)
                .ok_or("a repaired path ends early")?;
            let c = ch.chan(cur, i);
            path.push(c);
            cur = ch.head[c as usize];
        }
        let was = usize::from(old.get(s, lid)).min(layers - 1);
        let orig = first
            .get(&(s, lid))
            .map(|&l| usize::from(l).min(layers - 1));
        let order = orig
            .into_iter()
            .chain(std::iter::once(was))
            .chain((0..layers).filter(|&l| l != was && Some(l) != orig));
        let mut placed = false;
        for layer in order {
            if g.try_fit(&ch, layer, &path, &mut seen) {
                sl.set(s, lid, layer as u8);
                placed_all.push(Placed {
                    switch: s,
                    lid,
                    was: was as u8,
                    now: layer as u8,
                });
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
    Ok((sl, placed_all))
}
