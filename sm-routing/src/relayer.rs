//! Virtual layers again after a repair of layered tables: the paths a repair changed go
//! back into layers, each layer kept free of cycles; every other path keeps its SL.
//!
//! A repair moves only the entries of switches whose path broke (or, when links return,
//! entries going back), so for one LID the paths that change are those of the sources
//! whose new path passes through a switch whose entry moved: a source whose path avoids
//! them follows the same switches as before. The layers' channel dependency graphs are
//! built from the unchanged paths; each changed path goes into the layer it had before
//! any repair if the caller remembers one (a path coming back gets its SL back), else its
//! old layer, else into the first layer that takes it, opening a new one within the
//! budget if none does. A path that fits no layer is an error: the caller routes
//! everything again.
//!
//! # The traffic hosts send meanwhile
//!
//! Hosts send on the SL the SA gave them until they ask again, and the switches hold a
//! mix of old and new entries while the repair is programmed. A second set of graphs
//! holds all that traffic: each path's new route on its new layer and on the layer its
//! hosts hold, and there every route it can take on the way (the old route up to a
//! switch that took its new entry, the new one from there; entries go out downstream
//! first). Per LID, in this order, the paths are placed so that this stays acyclic:
//! - as the repair routed them;
//! - with the LID's moved entries dropping packets first ([`Relayered::drained`]: one
//!   more Set of their blocks), so that no packet follows an old route into a new one;
//! - so drained, with another port for one of its moved entries (a few, shortest first).
//!
//! Failing all, the paths go where the final state needs them and those whose traffic
//! may close a cycle are reported ([`Placed::safe`]): a path that fits its old layer in
//! no way must change SL, and hosts keeping the old one are exposed until they ask again.
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

/// Scratch of the reachability search: the channels seen carry the current stamp.
struct Seen {
    at: Vec<u32>,
    stamp: u32,
    stack: Vec<u32>,
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
    fn reaches(&self, ch: &Channels, layer: usize, from: u32, to: u32, seen: &mut Seen) -> bool {
        seen.stamp = seen.stamp.wrapping_add(1);
        if seen.stamp == 0 {
            seen.at.fill(0);
            seen.stamp = 1;
        }
        seen.stack.clear();
        seen.stack.push(from);
        while let Some(c) = seen.stack.pop() {
            if c == to {
                return true;
            }
            let mark = &mut seen.at[c as usize];
            if *mark == seen.stamp {
                continue;
            }
            *mark = seen.stamp;
            let y = ch.head[c as usize];
            let deg = (ch.off[y.idx() + 1] - ch.off[y.idx()]) as u8;
            for j in 0..deg {
                if self.has(layer, self.index(c, j)) {
                    seen.stack.push(ch.chan(y, j));
                }
            }
        }
        false
    }

    /// Adds the turns of every path of `paths` (channels, in order) to `layer` if it stays
    /// acyclic, each bit set into `log`; false (and unchanged) otherwise.
    fn try_fit(
        &mut self,
        ch: &Channels,
        layer: usize,
        paths: &[Vec<u32>],
        seen: &mut Seen,
        log: &mut Vec<(usize, usize)>,
    ) -> bool {
        let start = log.len();
        for path in paths {
            for w in path.windows(2) {
                let (a, b) = (w[0], w[1]);
                let i = self.index(a, (b - ch.off[ch.head[a as usize].idx()]) as u8);
                if self.has(layer, i) {
                    continue;
                }
                if self.reaches(ch, layer, b, a, seen) {
                    self.undo(log, start);
                    return false;
                }
                self.set(layer, i, true);
                log.push((layer, i));
            }
        }
        true
    }

    /// Clears the bits `log` set from `start` on.
    fn undo(&mut self, log: &mut Vec<(usize, usize)>, start: usize) {
        for (layer, i) in log.drain(start..) {
            self.set(layer, i, false);
        }
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
    /// Traffic on the SL it had (`was`) closes no cycle, whatever mix of old and new
    /// entries the switches hold while the repair programs them, and afterwards (hosts
    /// keep the SL they asked for until they ask again). False when no route found fits
    /// its old layer so: until the repair is programmed and its hosts ask the SA again,
    /// its traffic may close a credit loop there.
    pub safe: bool,
}

/// What [`relayer`] decided.
#[derive(Debug, Clone)]
pub struct Relayered {
    pub sl: PathSl,
    /// Every path placed again.
    pub placed: Vec<Placed>,
    /// Moved entries (switch, LID, port) given another port than the repair chose: a
    /// route of the same or more hops that keeps the paths through it in their layers.
    pub rerouted: Vec<(SwIdx, Lid, u8)>,
    /// LIDs whose moved entries must drop packets before any of them takes its new
    /// port: then no packet follows an old route into a new one. Sorted.
    pub drained: Vec<Lid>,
}

/// Candidate ports tried per LID whose paths fit their layers in no other way, and in
/// all (each try places every path of the LID again).
const TRIES: usize = 32;
const TRIES_IN_ALL: usize = 256;

/// Places the changed paths, LID by LID, into the layers' graphs.
struct Placer<'a, T: ?Sized> {
    ch: &'a Channels,
    topo: &'a Topo<'a>,
    before: &'a [&'a T],
    tables: &'a [&'a T],
    old: &'a PathSl,
    first: &'a BTreeMap<(SwIdx, Lid), u8>,
    layers: usize,
    g: Layers,
    seen: Seen,
    log: Vec<(usize, usize)>,
}

/// One moved entry overridden while a LID's paths are placed: (switch, link index).
type Over = Option<(SwIdx, u8)>;

impl<T: LftRead + ?Sized> Placer<'_, T> {
    fn next(&self, t: &[&T], over: Over, s: SwIdx, lid: Lid) -> Option<u8> {
        match over {
            Some((x, j)) if x == s => Some(j),
            _ => {
                t.get(s.idx())?;
                self.ch.next(t, s, lid)
            }
        }
    }

    /// Appends the channels from `s` to `dest` along `t` (with `over`) to `out`; false
    /// where a table names no link or the walk loops.
    fn walk(
        &self,
        t: &[&T],
        over: Over,
        s: SwIdx,
        dest: SwIdx,
        lid: Lid,
        out: &mut Vec<u32>,
    ) -> bool {
        let (mut cur, limit) = (s, out.len() + self.topo.num_switches());
        while cur != dest && out.len() <= limit {
            let Some(i) = self.next(t, over, cur, lid) else {
                return false;
            };
            let c = self.ch.chan(cur, i);
            out.push(c);
            cur = self.ch.head[c as usize];
        }
        cur == dest
    }

    /// Every route the path from `s` can take while the repair is programmed, its new
    /// one first: the old one (if it still delivers), and the old one up to each switch
    /// whose entry moved followed by the new one from there.
    fn routes(
        &self,
        over: Over,
        s: SwIdx,
        dest: SwIdx,
        lid: Lid,
        moved: &HashSet<SwIdx>,
    ) -> Option<Vec<Vec<u32>>> {
        let mut new = Vec::new();
        if !self.walk(self.tables, over, s, dest, lid, &mut new) {
            return None;
        }
        let mut all = vec![new];
        let mut prefix = Vec::new();
        let mut cur = s;
        loop {
            if cur == dest {
                all.push(prefix);
                break;
            }
            if cur != s && moved.contains(&cur) {
                let mut m = prefix.clone();
                if self.walk(self.tables, over, cur, dest, lid, &mut m) {
                    all.push(m);
                }
            }
            let Some(i) = self.next(self.before, None, cur, lid) else {
                break;
            };
            let c = self.ch.chan(cur, i);
            prefix.push(c);
            cur = self.ch.head[c as usize];
            if prefix.len() > self.topo.num_switches() {
                break;
            }
        }
        Some(all)
    }

    fn fit(&mut self, layer: usize, paths: &[Vec<u32>]) -> bool {
        self.g
            .try_fit(self.ch, layer, paths, &mut self.seen, &mut self.log)
    }

    /// Fits `new` (a path's new route) into `layer` of both graphs; unchanged if either
    /// refuses.
    fn fit_both(&mut self, layer: usize, new: &[Vec<u32>]) -> bool {
        let start = self.log.len();
        if self.fit(layer, new) && self.fit(self.layers + layer, new) {
            return true;
        }
        self.g.undo(&mut self.log, start);
        false
    }

    /// The layer a path had (`was`) and had before any repair, if other.
    fn layers_of(&self, s: SwIdx, lid: Lid) -> (usize, Option<usize>) {
        let was = usize::from(self.old.get(s, lid)).min(self.layers - 1);
        let orig = self
            .first
            .get(&(s, lid))
            .map(|&l| usize::from(l).min(self.layers - 1))
            .filter(|&l| l != was);
        (was, orig)
    }

    /// Places every path of `group` (sources of `lid`) so that the new routes stay
    /// acyclic with all the traffic there may be: back into the layer the path had
    /// before any repair if it fits there, else in its own; and every route it can take
    /// while programmed on the layer its hosts send on. All or none: `None` leaves the
    /// graphs as they were.
    fn place_safely(
        &mut self,
        over: Over,
        drain: bool,
        group: &[SwIdx],
        dest: SwIdx,
        lid: Lid,
        moved: &HashSet<SwIdx>,
    ) -> Option<Vec<Placed>> {
        self.log.clear();
        let mut out = Vec::with_capacity(group.len());
        for &s in group {
            let fitted = self
                .routes(over, s, dest, lid, moved)
                .and_then(|mut routes| {
                    if drain {
                        routes.truncate(1);
                    }
                    let (was, orig) = self.layers_of(s, lid);
                    let new = &routes[..1];
                    let now = orig
                        .filter(|&o| self.fit_both(o, new))
                        .or_else(|| self.fit_both(was, new).then_some(was))?;
                    self.fit(self.layers + was, &routes).then_some((was, now))
                });
            let Some((was, now)) = fitted else {
                self.g.undo(&mut self.log, 0);
                return None;
            };
            out.push(Placed {
                switch: s,
                lid,
                was: was as u8,
                now: now as u8,
                safe: true,
            });
        }
        self.log.clear();
        Some(out)
    }

    /// Places the paths of `group` one by one where their new routes fit, as the final
    /// state needs: back, in their own layer, else in the first that takes them. A path
    /// is safe if the traffic there may be fits as well (see [`Placer::place_safely`]).
    fn place_anyhow(
        &mut self,
        group: &[SwIdx],
        dest: SwIdx,
        lid: Lid,
        moved: &HashSet<SwIdx>,
    ) -> Result<Vec<Placed>, String> {
        let mut out = Vec::with_capacity(group.len());
        for &s in group {
            self.log.clear();
            let mut routes = self
                .routes(None, s, dest, lid, moved)
                .ok_or("a repaired path ends early")?;
            // Drained first: only the new routes carry traffic.
            routes.truncate(1);
            let new = &routes[..1];
            let (was, orig) = self.layers_of(s, lid);
            let now = orig
                .into_iter()
                .chain(std::iter::once(was))
                .chain((0..self.layers).filter(|&l| l != was))
                .find(|&l| self.fit(l, new))
                .ok_or_else(|| {
                    format!(
                        "the repaired path from switch {} to LID {lid} fits none of the {} \
                         layers",
                        self.topo.guid(s),
                        self.layers
                    )
                })?;
            let start = self.log.len();
            let h = self.layers;
            let safe = self.fit(h + now, new) && self.fit(h + was, &routes);
            if !safe {
                self.g.undo(&mut self.log, start);
            }
            out.push(Placed {
                switch: s,
                lid,
                was: was as u8,
                now: now as u8,
                safe,
            });
        }
        self.log.clear();
        Ok(out)
    }

    /// Other ports for the moved entries of `lid`, shortest routes first: (hops, switch,
    /// link index).
    fn candidates(&self, dest: SwIdx, lid: Lid, moved: &HashSet<SwIdx>) -> Vec<(usize, SwIdx, u8)> {
        let mut out = Vec::new();
        let mut m: Vec<SwIdx> = moved.iter().copied().collect();
        m.sort_unstable();
        let mut scratch = Vec::new();
        for x in m {
            let cur = self.next(self.tables, None, x, lid);
            for j in 0..self.topo.adj(x).len() as u8 {
                if Some(j) == cur {
                    continue;
                }
                scratch.clear();
                if self.walk(self.tables, Some((x, j)), x, dest, lid, &mut scratch) {
                    out.push((scratch.len(), x, j));
                }
            }
        }
        out.sort_unstable();
        out
    }
}

/// New SLs for layered tables after `moved` entries (switch, LID, whether it may take
/// another port) changed from `before` to `tables`: see the module doc. `old` is the SLs the tables had before, `first` the
/// SL a path had before any repair (tried first), `budget` the layers (VLs) there may be
/// at most.
///
/// While the repair is programmed a path's hosts send on the SL they have, over any mix
/// the switches can hold: the old route up to a switch that already took its new entry,
/// the new route from there (the entries go out downstream first). A path stays in its
/// layer only if all of those, and its new route, fit there. Where a LID's paths do not
/// fit so, other ports are tried for its moved entries (a few, shortest routes first);
/// where none does, the paths go where their new routes fit and are not `safe`.
pub fn relayer<T: LftRead + Sync + ?Sized>(
    topo: &Topo<'_>,
    before: &[&T],
    tables: &[&T],
    old: &PathSl,
    first: &BTreeMap<(SwIdx, Lid), u8>,
    moved: &[(SwIdx, Lid, bool)],
    budget: u8,
) -> Result<Relayered, String> {
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
    let mut free: HashSet<(SwIdx, Lid)> = HashSet::new();
    for &(s, lid, may) in moved {
        by_lid.entry(lid).or_default().insert(s);
        if may {
            free.insert((s, lid));
        }
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
    let mut redo = part.redo;
    redo.sort_unstable_by_key(|&(s, lid)| (lid, s));
    let mut pl = Placer {
        ch: &ch,
        topo,
        before,
        tables,
        old,
        first,
        layers,
        // The final state's graphs, then the same with every route there may be while
        // and after the repair is programmed.
        g: Layers {
            bits: [part.bits.clone(), part.bits].concat(),
            width: ch.width,
        },
        seen: Seen {
            at: vec![0; ch.head.len()],
            stamp: 0,
            stack: Vec::new(),
        },
        log: Vec::new(),
    };
    let mut sl = old.clone();
    let (mut placed, mut rerouted) = (Vec::with_capacity(redo.len()), Vec::new());
    let (mut drained, mut tried) = (Vec::new(), 0);
    let none = HashSet::new();
    for group in redo.chunk_by(|a, b| a.1 == b.1) {
        let lid = group[0].1;
        let dest = topo
            .dest_of(lid)
            .map(|d| d.sw)
            .ok_or("a LID with no port")?;
        let sources: Vec<SwIdx> = group.iter().map(|&(s, _)| s).collect();
        let moved_here = by_lid.get(&lid).unwrap_or(&none);
        // Ways to place the LID's paths, best first: as the repair routed them, while
        // the old entries still forward; with the moved entries dropping first (an extra
        // Set of their blocks); then so, with another port for one moved entry.
        let mut got = None;
        for drain in [false, true] {
            got = pl
                .place_safely(None, drain, &sources, dest, lid, moved_here)
                .map(|g| (g, drain));
            if got.is_some() {
                break;
            }
        }
        if got.is_none() && tried < TRIES_IN_ALL {
            let tries = pl.candidates(dest, lid, moved_here).into_iter();
            let left = TRIES.min(TRIES_IN_ALL - tried);
            for (_, x, j) in tries.filter(|c| free.contains(&(c.1, lid))).take(left) {
                tried += 1;
                let g = pl.place_safely(Some((x, j)), true, &sources, dest, lid, moved_here);
                if let Some(g) = g {
                    rerouted.push((x, lid, topo.adj(x)[usize::from(j)].port));
                    got = Some((g, true));
                    break;
                }
            }
        }
        let (got, drain) = match got {
            Some(g) => g,
            None => (pl.place_anyhow(&sources, dest, lid, moved_here)?, true),
        };
        if drain {
            drained.push(lid);
        }
        for p in got {
            sl.set(p.switch, lid, p.now);
            placed.push(p);
        }
    }
    Ok(Relayered {
        sl,
        placed,
        rerouted,
        drained,
    })
}
