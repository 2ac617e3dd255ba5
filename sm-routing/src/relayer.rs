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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use sm_core::NodeKind;
use sm_core::lft::LftRead;
use sm_mad::Lid;

use crate::layered::Dfs;
use crate::routes::PathSl;
use crate::topo::{SwIdx, Topo};

/// Dependencies this many bits at most (a layer's bits times the layers) are built;
/// beyond, the caller routes everything again.
const MAX_BITS: usize = 1 << 32;

/// No switch behind a channel.
const NONE: u32 = u32::MAX;

/// Channels of the topology, numbered by where they leave: port `p` of switch `s` is
/// channel `s * width + p`, whether or not its link is up, so that numbers stay the same
/// while links go and come.
struct Channels {
    width: usize,
    /// The switch each channel leads to, `NONE` where no link is up.
    head: Vec<u32>,
    /// Per switch, the connected part of the fabric it is in: paths to a destination cut
    /// off from a source (gone, or going) are not walked.
    part: Vec<u32>,
}

impl Channels {
    fn new(topo: &Topo<'_>) -> Channels {
        let n = topo.num_switches();
        let width = (0..n)
            .map(|s| usize::from(topo.radix(SwIdx(s as u32))) + 1)
            .max()
            .unwrap_or(1);
        let mut head = vec![NONE; n * width];
        for s in (0..n).map(|i| SwIdx(i as u32)) {
            for a in topo.adj(s) {
                head[s.idx() * width + usize::from(a.port)] = a.peer.0;
            }
        }
        let mut part = vec![NONE; n];
        for start in 0..n {
            if part[start] != NONE {
                continue;
            }
            part[start] = start as u32;
            let mut stack = vec![start];
            while let Some(x) = stack.pop() {
                for &y in &head[x * width..(x + 1) * width] {
                    if y != NONE && part[y as usize] == NONE {
                        part[y as usize] = start as u32;
                        stack.push(y as usize);
                    }
                }
            }
        }
        Channels { width, head, part }
    }

    /// The port `s` leaves by towards `lid`, if the table names a link that is up.
    fn next<T: LftRead + ?Sized>(&self, tables: &[&T], s: SwIdx, lid: Lid) -> Option<u8> {
        let p = tables.get(s.idx())?.entry(usize::from(lid.0))?;
        (usize::from(p) < self.width && self.head[self.chan(s, p) as usize] != NONE).then_some(p)
    }

    fn chan(&self, s: SwIdx, p: u8) -> u32 {
        (s.idx() * self.width + usize::from(p)) as u32
    }

    fn head(&self, c: u32) -> SwIdx {
        SwIdx(self.head[c as usize])
    }

    /// The turn from channel `c` into port `p` of the switch it leads to.
    fn turn(&self, c: u32, p: u8) -> usize {
        c as usize * self.width + usize::from(p)
    }

    fn turns(&self) -> usize {
        self.head.len() * self.width
    }
}

/// The layers' dependencies the routes make, kept with the plan between repairs: per
/// layer, per turn, how many LIDs have a path making it. A repair takes out the LIDs
/// whose entries moved and puts them back as they are after it, instead of walking every
/// LID's paths again.
#[derive(Debug, Clone)]
pub struct Deps {
    switches: usize,
    width: usize,
    /// Per layer (empty: no turn), indexed by turn.
    count: Vec<Vec<u16>>,
    /// Per layer, a bit per turn whose count is not 0 (what the searches read).
    on: Vec<Vec<u64>>,
}

impl PartialEq for Deps {
    /// The same counts (a layer never counted equals one counted down to zero).
    fn eq(&self, o: &Deps) -> bool {
        let layer = |d: &Deps, l: usize| d.count.get(l).filter(|v| !v.is_empty()).cloned();
        let n = self.count.len().max(o.count.len());
        self.switches == o.switches
            && self.width == o.width
            && (0..n).all(|l| match (layer(self, l), layer(o, l)) {
                (Some(a), Some(b)) => a == b,
                (Some(v), None) | (None, Some(v)) => v.iter().all(|&c| c == 0),
                (None, None) => true,
            })
    }
}

impl Deps {
    /// The dependencies of `tables` (index = switch of `topo`) with the paths' SLs `sl`
    /// on at most `layers` layers, walked anew.
    pub fn of<T: LftRead + Sync + ?Sized>(
        topo: &Topo<'_>,
        tables: &[&T],
        sl: &PathSl,
        layers: usize,
    ) -> Result<Deps, String> {
        let ch = Channels::new(topo);
        let sources = sources(topo);
        let w = LidWalk {
            ch: &ch,
            tables,
            over: None,
            sl,
            layers: layers.clamp(1, 16),
            sources: &sources,
            skip: None,
        };
        build(&w, &all_lids(topo))
    }

    /// The dependencies kept from before a repair that moved no entry of `tables`
    /// (layered on `sl`): the same, unless a switch gained its first host or lost its
    /// last (its paths to every LID came or went), when they are walked anew.
    pub fn carried<T: LftRead + Sync + ?Sized>(
        kept: Option<Deps>,
        before: &Topo<'_>,
        topo: &Topo<'_>,
        tables: &[&T],
        sl: &PathSl,
    ) -> Option<Deps> {
        match kept {
            Some(d) if sources(before) == sources(topo) => Some(d),
            _ => Deps::of(topo, tables, sl, 16).ok(),
        }
    }

    fn new(ch: &Channels) -> Deps {
        Deps {
            switches: ch.head.len() / ch.width,
            width: ch.width,
            count: Vec::new(),
            on: Vec::new(),
        }
    }

    fn fits(&self, ch: &Channels) -> bool {
        self.width == ch.width && self.switches * self.width == ch.head.len()
    }

    fn bump(&mut self, layer: usize, turn: usize, up: bool) {
        if self.count.len() <= layer {
            self.count.resize_with(layer + 1, Vec::new);
            self.on.resize_with(layer + 1, Vec::new);
        }
        let turns = self.switches * self.width * self.width;
        let v = &mut self.count[layer];
        if v.is_empty() {
            v.resize(turns, 0);
            self.on[layer].resize(turns.div_ceil(64), 0);
        }
        let c = &mut v[turn];
        *c = if up {
            c.saturating_add(1)
        } else {
            c.saturating_sub(1)
        };
        let w = &mut self.on[layer][turn / 64];
        if *c > 0 {
            *w |= 1 << (turn % 64);
        } else {
            *w &= !(1 << (turn % 64));
        }
    }

    fn has(&self, layer: usize, turn: usize) -> bool {
        self.on
            .get(layer)
            .and_then(|v| v.get(turn / 64))
            .is_some_and(|&w| w >> (turn % 64) & 1 != 0)
    }

    fn merge(mut self, o: Deps) -> Deps {
        if self.count.len() < o.count.len() {
            self.count.resize_with(o.count.len(), Vec::new);
            self.on.resize_with(o.count.len(), Vec::new);
        }
        for ((a, b), (ab, bb)) in self
            .count
            .iter_mut()
            .zip(o.count)
            .zip(self.on.iter_mut().zip(o.on))
        {
            if a.is_empty() {
                (*a, *ab) = (b, bb);
            } else if !b.is_empty() {
                for (x, y) in a.iter_mut().zip(b) {
                    *x = x.saturating_add(y);
                }
                for (x, y) in ab.iter_mut().zip(bb) {
                    *x |= y;
                }
            }
        }
        self
    }
}

/// The graphs placement works on: the kept dependencies (`base`), and bits added over
/// them, per graph: the final state's graphs first, then those of all the traffic.
struct Layers<'a> {
    base: &'a Deps,
    layers: usize,
    bits: Vec<Vec<u64>>,
    /// Per graph, a topological order of its channels once searches there have cost
    /// enough to pay for one; kept as turns are added (Pearce and Kelly's dynamic
    /// topological sort), and still valid when they are taken away.
    order: Vec<Option<Order>>,
    /// Per graph, channels the plain searches visited; `u64::MAX` once ordering failed.
    spent: Vec<u64>,
    /// Visits (times the channels) after which a graph gets an order.
    order_after: u64,
}

/// A topological order: each channel's position, and the channel at each position.
struct Order {
    pos: Vec<u32>,
    at: Vec<u32>,
}

/// Channels visited by plain searches, times the channels, before a graph gets an order.
const ORDER_AFTER: u64 = 8;

impl Layers<'_> {
    fn has(&self, graph: usize, i: usize) -> bool {
        self.bits[graph][i / 64] >> (i % 64) & 1 != 0 || self.base.has(graph % self.layers, i)
    }

    fn set(&mut self, graph: usize, i: usize, on: bool) {
        let w = &mut self.bits[graph][i / 64];
        if on {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }

    /// The channels `c` turns into in `graph`. A channel's turns are `width` bits in a
    /// row, read a word at a time: a search visits each channel once, and checking every
    /// port's bit alone made the visit cost as much as the radix.
    fn succ<'t>(
        &'t self,
        ch: &'t Channels,
        _topo: &'t Topo<'_>,
        graph: usize,
        c: u32,
    ) -> impl Iterator<Item = u32> + 't {
        let first = ch.turn(c, 0);
        let end = first + ch.width;
        let out = ch.head(c).idx() * ch.width;
        let (own, kept) = (&self.bits[graph], self.base.on.get(graph % self.layers));
        (first / 64..end.div_ceil(64)).flat_map(move |w| {
            let mut word = own.get(w).copied().unwrap_or(0)
                | kept.and_then(|k| k.get(w)).copied().unwrap_or(0);
            let lo = (w * 64).max(first);
            let hi = (w * 64 + 64).min(end);
            word &= (!0u64 >> (64 - (hi - lo))) << (lo - w * 64);
            std::iter::from_fn(move || {
                (word != 0).then(|| {
                    let b = word.trailing_zeros() as usize;
                    word &= word - 1;
                    (out + w * 64 + b - first) as u32
                })
            })
            .filter(move |&q| ch.head[q as usize] != NONE)
        })
    }

    /// The channels that turn into `c` in `graph`.
    fn pred<'t>(
        &'t self,
        ch: &'t Channels,
        topo: &'t Topo<'_>,
        graph: usize,
        c: u32,
    ) -> impl Iterator<Item = u32> + 't {
        let (y, p) = (
            SwIdx((c as usize / ch.width) as u32),
            (c as usize % ch.width) as u8,
        );
        topo.adj(y)
            .iter()
            .map(move |a| ch.chan(a.peer, a.peer_port))
            .filter(move |&q| self.has(graph, ch.turn(q, p)))
    }

    /// A topological order of `graph` (Kahn's algorithm); `None` if it has a cycle.
    fn ordered(&self, ch: &Channels, topo: &Topo<'_>, graph: usize) -> Option<Order> {
        let n = ch.head.len();
        let mut indeg = vec![0u32; n];
        for c in (0..n as u32).filter(|&c| ch.head[c as usize] != NONE) {
            for q in self.succ(ch, topo, graph, c) {
                indeg[q as usize] += 1;
            }
        }
        let mut ready: Vec<u32> = (0..n as u32).filter(|&c| indeg[c as usize] == 0).collect();
        let (mut pos, mut at) = (vec![0u32; n], Vec::with_capacity(n));
        while let Some(c) = ready.pop() {
            pos[c as usize] = at.len() as u32;
            at.push(c);
            if ch.head[c as usize] == NONE {
                continue;
            }
            for q in self.succ(ch, topo, graph, c) {
                indeg[q as usize] -= 1;
                if indeg[q as usize] == 0 {
                    ready.push(q);
                }
            }
        }
        (at.len() == n).then_some(Order { pos, at })
    }

    /// Whether the turn from channel `a` into channel `b` closes a cycle in `graph`;
    /// if not, the order (where there is one) is made to hold with it.
    fn closes(
        &mut self,
        ch: &Channels,
        topo: &Topo<'_>,
        graph: usize,
        a: u32,
        b: u32,
        seen: &mut Dfs,
    ) -> bool {
        let enough = self.order_after.saturating_mul(ch.head.len() as u64);
        if self.order[graph].is_none() && self.spent[graph] >= enough {
            self.order[graph] = self.ordered(ch, topo, graph);
            if self.order[graph].is_none() {
                self.spent[graph] = u64::MAX;
            }
        }
        let Some(order) = self.order[graph].take() else {
            return self.reaches(ch, topo, graph, b, a, seen);
        };
        let mut order = order;
        let closed = self.reorder(ch, topo, graph, &mut order, a, b, seen);
        self.order[graph] = Some(order);
        closed
    }

    /// Pearce and Kelly: for a turn `a` -> `b` against the order, the channels after `b`
    /// and before `a` are searched (reaching `a` is a cycle), and the ones found are
    /// given their positions again, those reaching `a` first.
    #[allow(clippy::too_many_arguments)]
    fn reorder(
        &self,
        ch: &Channels,
        topo: &Topo<'_>,
        graph: usize,
        o: &mut Order,
        a: u32,
        b: u32,
        seen: &mut Dfs,
    ) -> bool {
        let (lb, ub) = (o.pos[b as usize], o.pos[a as usize]);
        if lb > ub {
            return false;
        }
        if a == b {
            return true;
        }
        let mut fwd = Vec::new();
        seen.begin();
        seen.mark[b as usize] = seen.epoch;
        seen.stack.clear();
        seen.stack.push(b);
        while let Some(w) = seen.stack.pop() {
            fwd.push(w);
            for z in self.succ(ch, topo, graph, w) {
                if z == a {
                    return true;
                }
                let zi = z as usize;
                if o.pos[zi] < ub && seen.mark[zi] != seen.epoch {
                    seen.mark[zi] = seen.epoch;
                    seen.stack.push(z);
                }
            }
        }
        let mut back = Vec::new();
        seen.begin();
        seen.mark[a as usize] = seen.epoch;
        seen.stack.push(a);
        while let Some(w) = seen.stack.pop() {
            back.push(w);
            for z in self.pred(ch, topo, graph, w) {
                let zi = z as usize;
                if o.pos[zi] > lb && seen.mark[zi] != seen.epoch {
                    seen.mark[zi] = seen.epoch;
                    seen.stack.push(z);
                }
            }
        }
        back.sort_unstable_by_key(|&c| o.pos[c as usize]);
        fwd.sort_unstable_by_key(|&c| o.pos[c as usize]);
        let mut slots: Vec<u32> = back
            .iter()
            .chain(&fwd)
            .map(|&c| o.pos[c as usize])
            .collect();
        slots.sort_unstable();
        for (&c, &p) in back.iter().chain(&fwd).zip(&slots) {
            o.pos[c as usize] = p;
            o.at[p as usize] = c;
        }
        false
    }

    /// Whether channel `to` is reachable from channel `from` in `graph`.
    fn reaches(
        &mut self,
        ch: &Channels,
        topo: &Topo<'_>,
        graph: usize,
        from: u32,
        to: u32,
        seen: &mut Dfs,
    ) -> bool {
        seen.begin();
        seen.stack.clear();
        seen.stack.push(from);
        let mut visited = 0u64;
        let mut found = false;
        while let Some(c) = seen.stack.pop() {
            if c == to {
                found = true;
                break;
            }
            let mark = &mut seen.mark[c as usize];
            if *mark == seen.epoch {
                continue;
            }
            *mark = seen.epoch;
            visited += 1;
            seen.stack.extend(self.succ(ch, topo, graph, c));
        }
        self.spent[graph] = self.spent[graph].saturating_add(visited);
        found
    }

    /// Adds the turns of every path of `paths` (channels, in order) to `graph` if it
    /// stays acyclic, each bit set into `log`; false (and unchanged) otherwise.
    fn try_fit(
        &mut self,
        ch: &Channels,
        topo: &Topo<'_>,
        graph: usize,
        paths: &[Vec<u32>],
        seen: &mut Dfs,
        log: &mut Vec<(usize, usize)>,
    ) -> bool {
        let start = log.len();
        for path in paths {
            for w in path.windows(2) {
                let (a, b) = (w[0], w[1]);
                let i = ch.turn(a, (b as usize % ch.width) as u8);
                if self.has(graph, i) {
                    continue;
                }
                if self.closes(ch, topo, graph, a, b, seen) {
                    self.undo(log, start);
                    return false;
                }
                self.set(graph, i, true);
                log.push((graph, i));
            }
        }
        true
    }

    /// Clears the bits `log` set from `start` on.
    fn undo(&mut self, log: &mut Vec<(usize, usize)>, start: usize) {
        for (graph, i) in log.drain(start..) {
            self.set(graph, i, false);
        }
    }
}

/// Scratch of the per-LID walk.
struct Scratch {
    /// Layers of the paths passing each switch.
    through: Vec<u16>,
    touched: Vec<SwIdx>,
    /// 0 unknown, 1 on the way, 2 clean, 3 passes a moved entry.
    state: Vec<u8>,
}

impl Scratch {
    fn new(n: usize) -> Scratch {
        Scratch {
            through: vec![0; n],
            touched: Vec::new(),
            state: vec![0; n],
        }
    }
}

/// One LID's paths to walk: from `sources` along `tables` to `dest`, each on the layer
/// `sl` gives; paths through a switch of `skip` are listed in `redo` instead.
struct LidWalk<'a, T: ?Sized> {
    ch: &'a Channels,
    tables: &'a [&'a T],
    /// Entries taken instead of the tables' (switch, LID) -> port.
    over: Option<&'a HashMap<(SwIdx, Lid), u8>>,
    sl: &'a PathSl,
    layers: usize,
    sources: &'a [SwIdx],
    /// Per LID, switches whose entry moved.
    skip: Option<&'a BTreeMap<Lid, HashSet<SwIdx>>>,
}

impl<T: LftRead + ?Sized> LidWalk<'_, T> {
    /// Every (layer, turn) the paths make, once each, into `out`.
    fn deps(
        &self,
        sc: &mut Scratch,
        dest: SwIdx,
        lid: Lid,
        redo: &mut Vec<(SwIdx, Lid)>,
        out: &mut impl FnMut(usize, usize),
    ) -> Result<(), String> {
        let ch = self.ch;
        let port = |x: SwIdx| match self.over.and_then(|o| o.get(&(x, lid))) {
            Some(&p) => Some(p),
            None => ch.next(self.tables, x, lid),
        };
        let next = |x: SwIdx| port(x).map(|p| ch.chan(x, p));
        let skip = self.skip.and_then(|k| k.get(&lid));
        let apart = |s: SwIdx| ch.part[s.idx()] != ch.part[dest.idx()];
        if let Some(m) = skip {
            sc.state.fill(0);
            for &s in self.sources {
                if apart(s) {
                    continue;
                }
                let mut stack = vec![s];
                while let Some(&x) = stack.last() {
                    if sc.state[x.idx()] >= 2 {
                        stack.pop();
                        continue;
                    }
                    if m.contains(&x) || x == dest {
                        sc.state[x.idx()] = if x == dest { 2 } else { 3 };
                        stack.pop();
                        continue;
                    }
                    let y = next(x)
                        .map(|c| ch.head(c))
                        .ok_or_else(|| format!("LID {lid} is not reached from every switch"))?;
                    match sc.state[y.idx()] {
                        0 => {
                            sc.state[x.idx()] = 1;
                            stack.push(y);
                        }
                        1 => return Err(format!("LID {lid}: the tables loop")),
                        v => {
                            sc.state[x.idx()] = v;
                            stack.pop();
                        }
                    }
                }
                if sc.state[s.idx()] == 3 {
                    redo.push((s, lid));
                }
            }
        }
        for &s in self.sources {
            if apart(s) || (skip.is_some() && sc.state[s.idx()] == 3) {
                continue;
            }
            let layer = usize::from(self.sl.get(s, lid)).min(self.layers - 1);
            let mut add = (1u16 << layer) & !sc.through[s.idx()];
            let mut cur = s;
            let mut hops = 0;
            while add != 0 && cur != dest && hops <= sc.through.len() {
                if sc.through[cur.idx()] == 0 {
                    sc.touched.push(cur);
                }
                sc.through[cur.idx()] |= add;
                let Some(c) = next(cur) else {
                    break;
                };
                cur = ch.head(c);
                add &= !sc.through[cur.idx()];
                hops += 1;
            }
        }
        for k in 0..sc.touched.len() {
            let x = sc.touched[k];
            let mut bits = std::mem::take(&mut sc.through[x.idx()]);
            let Some(c) = next(x) else {
                continue;
            };
            let y = ch.head(c);
            if y == dest {
                continue;
            }
            let Some(p) = port(y) else {
                continue;
            };
            while bits != 0 {
                let layer = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                out(layer, ch.turn(c, p));
            }
        }
        sc.touched.clear();
        Ok(())
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
    g: Layers<'a>,
    seen: Dfs,
    log: Vec<(usize, usize)>,
}

/// One moved entry overridden while a LID's paths are placed: (switch, port).
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
            cur = self.ch.head(c);
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
            cur = self.ch.head(c);
            if prefix.len() > self.topo.num_switches() {
                break;
            }
        }
        Some(all)
    }

    fn fit(&mut self, layer: usize, paths: &[Vec<u32>]) -> bool {
        self.g.try_fit(
            self.ch,
            self.topo,
            layer,
            paths,
            &mut self.seen,
            &mut self.log,
        )
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
    /// while programmed on the layer its hosts send on. All or none: on failure the
    /// graphs are as they were, and the error is the index in `group` of the path that
    /// did not fit (tried first next time: failing costs least there).
    fn place_safely(
        &mut self,
        over: Over,
        drain: bool,
        group: &[SwIdx],
        dest: SwIdx,
        lid: Lid,
        moved: &HashSet<SwIdx>,
    ) -> Result<Vec<Placed>, usize> {
        self.log.clear();
        let mut out = Vec::with_capacity(group.len());
        for (k, &s) in group.iter().enumerate() {
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
                return Err(k);
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
        Ok(out)
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
    /// port).
    fn candidates(&self, dest: SwIdx, lid: Lid, moved: &HashSet<SwIdx>) -> Vec<(usize, SwIdx, u8)> {
        let mut out = Vec::new();
        let mut m: Vec<SwIdx> = moved.iter().copied().collect();
        m.sort_unstable();
        let mut scratch = Vec::new();
        for x in m {
            let cur = self.next(self.tables, None, x, lid);
            for j in self.topo.adj(x).iter().map(|a| a.port) {
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

/// A repair of layered tables, as [`relayer`] reads it.
pub struct Change<'a, T: ?Sized> {
    /// The fabric now.
    pub topo: &'a Topo<'a>,
    /// The fabric the tables before the repair were made for (same switches).
    pub before_topo: &'a Topo<'a>,
    /// The tables before the repair and after it (index = switch).
    pub before: &'a [&'a T],
    pub tables: &'a [&'a T],
    /// The SLs the paths had.
    pub old: &'a PathSl,
    /// The SL a path had before any repair, for paths that changed it since.
    pub first: &'a BTreeMap<(SwIdx, Lid), u8>,
    /// Entries that changed (switch, LID, whether it may take another port).
    pub moved: &'a [(SwIdx, Lid, bool)],
    /// The layers (VLs) there may be at most.
    pub budget: u8,
}

/// The LIDs of the switches' tables, by destination switch.
fn all_lids(topo: &Topo<'_>) -> Vec<(SwIdx, Lid)> {
    topo.dests
        .iter()
        .flat_map(|d| d.lids().map(move |l| (d.sw, l)))
        .collect()
}

/// Switches with hosts: where paths start.
fn sources(topo: &Topo<'_>) -> Vec<SwIdx> {
    topo.dests
        .iter()
        .filter(|d| d.kind != NodeKind::Switch)
        .map(|d| d.sw)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Every LID's dependencies, walked anew.
fn build<T: LftRead + Sync + ?Sized>(
    w: &LidWalk<'_, T>,
    lids: &[(SwIdx, Lid)],
) -> Result<Deps, String> {
    let n = w.ch.head.len() / w.ch.width;
    let fresh = || (Deps::new(w.ch), Scratch::new(n), Ok(()));
    let step = |(mut d, mut sc, mut r): (Deps, Scratch, Result<(), String>),
                chunk: &[(SwIdx, Lid)]| {
        let mut redo = Vec::new();
        for &(dest, lid) in chunk {
            if r.is_ok() {
                r = w.deps(&mut sc, dest, lid, &mut redo, &mut |l, t| {
                    d.bump(l, t, true)
                });
            }
        }
        (d, sc, r)
    };
    let (d, _, r) = if crate::par::worth(lids.len() * n) {
        use rayon::prelude::*;
        // One share per thread: each holds counts for every turn.
        let share = lids.len().div_ceil(rayon::current_num_threads()).max(1);
        lids.par_chunks(share)
            .map(|chunk| chunk.chunks(256).fold(fresh(), step))
            .reduce(fresh, |a, b| (a.0.merge(b.0), a.1, a.2.and(b.2)))
    } else {
        lids.chunks(256).fold(fresh(), step)
    };
    r.map(|()| d)
}

/// The (layer, turn) dependencies of each LID of `lids`, and the paths `w` skips.
type Walked = (Vec<(u8, u32)>, Vec<(SwIdx, Lid)>);

fn walk_each<T: LftRead + Sync + ?Sized>(
    w: &LidWalk<'_, T>,
    lids: &[(SwIdx, Lid)],
) -> Result<Vec<Walked>, String> {
    let n = w.ch.head.len() / w.ch.width;
    let one = |sc: &mut Scratch, &(dest, lid): &(SwIdx, Lid)| {
        let (mut deps, mut redo) = (Vec::new(), Vec::new());
        w.deps(sc, dest, lid, &mut redo, &mut |l, t| {
            deps.push((l as u8, t as u32))
        })
        .map(|()| (deps, redo))
    };
    if crate::par::worth(lids.len() * n) {
        use rayon::prelude::*;
        lids.par_iter().map_init(|| Scratch::new(n), one).collect()
    } else {
        let mut sc = Scratch::new(n);
        lids.iter().map(|l| one(&mut sc, l)).collect()
    }
}

fn apply(d: &mut Deps, walked: &[Walked], up: bool) {
    for (deps, _) in walked {
        for &(l, t) in deps {
            d.bump(usize::from(l), t as usize, up);
        }
    }
}

/// New SLs for layered tables after a repair moved entries (`c`): see the module doc.
/// `deps` holds the dependencies of the tables before, kept from the last call (built
/// if absent or for other switches); it is left holding those of the tables after, or
/// `None` on an error.
///
/// While the repair is programmed a path's hosts send on the SL they have, over any mix
/// the switches can hold: the old route up to a switch that already took its new entry,
/// the new route from there (the entries go out downstream first). A path stays in its
/// layer only if all of those, and its new route, fit there. Where a LID's paths do not
/// fit so, other ports are tried for its moved entries (a few, shortest routes first);
/// where none does, the paths go where their new routes fit and are not `safe`.
pub fn relayer<T: LftRead + Sync + ?Sized>(
    c: &Change<'_, T>,
    deps: &mut Option<Deps>,
) -> Result<Relayered, String> {
    let (topo, old) = (c.topo, c.old);
    let ch = Channels::new(topo);
    let before_ch = Channels::new(c.before_topo);
    let layers = (usize::from(old.max()) + 1)
        .max(usize::from(c.budget))
        .min(16);
    let per_layer = ch.turns();
    if per_layer.saturating_mul(layers) > MAX_BITS || before_ch.head.len() != ch.head.len() {
        *deps = None;
        return Err(format!(
            "{per_layer} dependency bits a layer are too many to layer again, or the switches \
             changed"
        ));
    }
    let sources = sources(topo);
    let before_sources = self::sources(c.before_topo);
    let mut by_lid: BTreeMap<Lid, HashSet<SwIdx>> = BTreeMap::new();
    let mut free: HashSet<(SwIdx, Lid)> = HashSet::new();
    for &(s, lid, may) in c.moved {
        by_lid.entry(lid).or_default().insert(s);
        if may {
            free.insert((s, lid));
        }
    }
    let before_walk = LidWalk {
        ch: &before_ch,
        tables: c.before,
        over: None,
        sl: old,
        layers,
        sources: &before_sources,
        skip: None,
    };
    let mut d = match deps.take() {
        Some(d) if d.fits(&ch) => d,
        _ => build(&before_walk, &all_lids(c.before_topo))?,
    };
    // The LIDs whose entries moved: their dependencies taken out as they were, and put
    // back for the paths that did not change.
    let dest_of = |t: &Topo<'_>, lid: Lid| t.dest_of(lid).map(|x| x.sw);
    let was: Vec<(SwIdx, Lid)> = by_lid
        .keys()
        .filter_map(|&l| Some((dest_of(c.before_topo, l)?, l)))
        .collect();
    apply(&mut d, &walk_each(&before_walk, &was)?, false);
    let now: Vec<(SwIdx, Lid)> = by_lid
        .keys()
        .map(|&l| dest_of(topo, l).map(|x| (x, l)).ok_or("a LID with no port"))
        .collect::<Result<_, _>>()?;
    let unchanged = LidWalk {
        ch: &ch,
        tables: c.tables,
        over: None,
        sl: old,
        layers,
        sources: &sources,
        skip: Some(&by_lid),
    };
    let kept = walk_each(&unchanged, &now)?;
    apply(&mut d, &kept, true);
    let mut redo: Vec<(SwIdx, Lid)> = kept.iter().flat_map(|k| k.1.iter().copied()).collect();
    redo.sort_unstable_by_key(|&(s, lid)| (lid, s));
    let words = per_layer.div_ceil(64);
    let mut pl = Placer {
        ch: &ch,
        topo,
        before: c.before,
        tables: c.tables,
        old,
        first: c.first,
        layers,
        // The final state's graphs, then those of every route there may be while and
        // after the repair is programmed.
        g: Layers {
            base: &d,
            layers,
            bits: vec![vec![0u64; words]; 2 * layers],
            order: (0..2 * layers).map(|_| None).collect(),
            spent: vec![0; 2 * layers],
            order_after: ORDER_AFTER,
        },
        seen: Dfs::new(ch.head.len()),
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
        let mut sources: Vec<SwIdx> = group.iter().map(|&(s, _)| s).collect();
        let moved_here = by_lid.get(&lid).unwrap_or(&none);
        let first_fail = |sources: &mut Vec<SwIdx>, r: Result<Vec<Placed>, usize>| match r {
            Ok(g) => Some(g),
            Err(k) => {
                sources[..=k].rotate_right(1);
                None
            }
        };
        // Ways to place the LID's paths, best first: as the repair routed them, while
        // the old entries still forward; with the moved entries dropping first (an extra
        // Set of their blocks); then so, with another port for one moved entry.
        let mut got = None;
        for drain in [false, true] {
            let r = pl.place_safely(None, drain, &sources, dest, lid, moved_here);
            got = first_fail(&mut sources, r).map(|g| (g, drain));
            if got.is_some() {
                break;
            }
        }
        if got.is_none() && tried < TRIES_IN_ALL {
            let tries = pl.candidates(dest, lid, moved_here).into_iter();
            let left = TRIES.min(TRIES_IN_ALL - tried);
            for (_, x, j) in tries.filter(|c| free.contains(&(c.1, lid))).take(left) {
                tried += 1;
                let r = pl.place_safely(Some((x, j)), true, &sources, dest, lid, moved_here);
                if let Some(g) = first_fail(&mut sources, r) {
                    rerouted.push((x, lid, j));
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
    drop(pl);
    // Their dependencies as they are now, in place of those of the unchanged paths.
    apply(&mut d, &kept, false);
    let over: HashMap<(SwIdx, Lid), u8> = rerouted.iter().map(|&(x, l, p)| ((x, l), p)).collect();
    let after = LidWalk {
        ch: &ch,
        tables: c.tables,
        over: Some(&over),
        sl: &sl,
        layers,
        sources: &sources,
        skip: None,
    };
    if sources == before_sources {
        apply(&mut d, &walk_each(&after, &now)?, true);
    } else {
        // A switch gained its first host or lost its last: its paths to every LID came
        // or went, not only those of the LIDs that moved.
        d = build(&after, &all_lids(topo))?;
    }
    *deps = Some(d);
    Ok(Relayered {
        sl,
        placed,
        rerouted,
        drained,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use sm_core::generate::{Dragonfly, GenSpec, generate};

    /// The kept order answers every turn as the plain search does, while turns are added
    /// and taken away at random.
    #[test]
    fn the_kept_order_finds_the_cycles_the_search_finds() {
        let mut f = generate(&GenSpec::Dragonfly(Dragonfly::new(9, 4, 2))).unwrap();
        sm_core::lid::LidStore::new().assign(&mut f, 0).unwrap();
        let topo = Topo::new(&f).unwrap();
        let ch = Channels::new(&topo);
        let base = Deps::new(&ch);
        let words = ch.turns().div_ceil(64);
        let layers = |order_after| Layers {
            base: &base,
            layers: 1,
            bits: vec![vec![0u64; words]],
            order: vec![None],
            spent: vec![0],
            order_after,
        };
        let (mut kept, mut plain) = (layers(0), layers(u64::MAX));
        let seen = || Dfs::new(ch.head.len());
        let (mut s1, mut s2) = (seen(), seen());
        let ch = &ch;
        let turns: Vec<(u32, u32)> = (0..topo.num_switches())
            .map(|i| SwIdx(i as u32))
            .flat_map(|x| topo.adj(x).iter().map(move |a| (x, a)))
            .flat_map(|(x, a)| {
                let c = ch.chan(x, a.port);
                topo.adj(a.peer)
                    .iter()
                    .map(move |b| (c, ch.chan(a.peer, b.port)))
            })
            .collect();
        let (mut rng, mut refused, mut log1, mut log2) = (7u64, 0, Vec::new(), Vec::new());
        for step in 0..4000 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (a, b) = turns[(rng >> 33) as usize % turns.len()];
            if step % 10 == 9 && !log1.is_empty() {
                // Take a few turns away again, in both.
                let k = log1.len().saturating_sub(3);
                kept.undo(&mut log1, k);
                let k = log2.len().saturating_sub(3);
                plain.undo(&mut log2, k);
                continue;
            }
            let path = [vec![a, b]];
            let x = kept.try_fit(ch, &topo, 0, &path, &mut s1, &mut log1);
            let y = plain.try_fit(ch, &topo, 0, &path, &mut s2, &mut log2);
            assert_eq!(x, y, "step {step}: turn {a} -> {b}");
            refused += usize::from(!x);
        }
        assert!(kept.order[0].is_some(), "no order was kept");
        assert!(refused > 100, "only {refused} turns closed a cycle");
    }
}
