//! Deadlock-free, globally balanced routing on any topology, with virtual layers.
//!
//! # Routes
//!
//! Every destination LID gets a tree towards its switch: a shortest-path tree under link
//! costs `hop_cost + load`, where `load` counts the CA flows (one per CA source whose path
//! uses the directed link) the other LIDs' trees put on that link, and a hop costs one
//! destination's worth of flows. Heavily used links grow expensive, so trees go round them,
//! on longer paths if need be: balance is global, over all destinations, not per switch.
//! A first pass routes every LID in turn; a second takes each LID's flows off and routes it
//! again knowing every other LID's, then layers it. The 2^LMC LIDs of a port are separate
//! destinations and spread the same way. In the second pass a helper thread searches the
//! trees ahead of the layering; the tables are those of doing it in turn.
//!
//! LIDs go in batches of [`BATCH`], one LID per destination switch in turn (so a batch
//! rarely holds two LIDs of one switch); the trees of a batch are computed in parallel from
//! the loads before it, then committed in order. The batches do not depend on the number
//! of threads, nor do the tables.
//!
//! # Layers
//!
//! Each source switch's path to a LID goes into one virtual layer; a layer's channel
//! dependency graph (channels = directed switch-to-switch links, a dependency where a path
//! turns from one into the next) must stay acyclic, so each layer is deadlock-free on its
//! own and layers never depend on each other. A path goes into the first layer it keeps
//! acyclic (checked incrementally on a maintained topological order, after Pearce and
//! Kelly). The layer is the service level of the path, and with the identity SL-to-VL map
//! its virtual lane. A path that fits no layer may instead leave its switch another way,
//! through a neighbour whose path is placed, when that one turn fits that path's layer.
//!
//! The last half of the budget (at least one layer) are *escape* layers: each holds only
//! paths that obey up*/down* under its own ranking, which are acyclic together whatever
//! else is in it. The first ranking is [`crate::updn`]'s; each next one is rooted at the
//! switch farthest from the roots before it. A path that fits no other layer goes into an
//! escape layer whose rule it obeys; when some path of a tree fits nowhere, the tree is
//! replaced by the balanced up*/down* tree towards the same LID under the ranking that
//! makes it cheapest, all of it in that ranking's escape layer. Spread over several roots,
//! the escape trees do not crowd one root's links. So the result is deadlock-free within
//! any budget, down to one virtual lane (where every tree is a balanced up*/down* one),
//! and never falls back to a deadlocking one.
//!
//! Where over a quarter of the paths went into escape layers (tori), the routing is done
//! again with all but two layers escape layers, and the result with the lower max link
//! load is kept. The layers a result leaves empty are closed up, so the SLs run from 0.

use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};

use rayon::prelude::*;
use sm_core::NodeKind;
use sm_mad::Lid;

use crate::routes::{Dir, Engine, Options, PathSl, RouteError, Routes, Rule};
use crate::topo::{DestIdx, SwIdx, Topo};

/// Virtual lanes used when the options name no budget.
pub const DEFAULT_VL_BUDGET: u8 = 8;

/// LIDs whose trees are computed together from the same loads.
pub const BATCH: usize = 16;

/// The engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layered;

impl Engine for Layered {
    fn name(&self) -> &'static str {
        "layered"
    }

    fn route(&self, topo: &Topo<'_>, opts: &Options) -> Result<Routes, RouteError> {
        let budget = match opts.vl_budget {
            0 => DEFAULT_VL_BUDGET,
            b @ 1..=15 => b,
            b => {
                return Err(RouteError::BadOptions {
                    engine: "layered",
                    reason: format!("a budget of {b} virtual lanes (1 to 15 data VLs exist)"),
                });
            }
        };
        // Tori and meshes have a better answer than the general search: dimension order,
        // perfectly spread, with a dateline layer split.
        if let Some(grid) = crate::torus::Grid::detect(topo)
            && grid.layers() <= u32::from(budget)
        {
            let (mut routes, mut sl) = grid.route(topo, self.name());
            routes.method = Some(format!(
                "grid {}: dimension order on {} layer(s)",
                grid.shape(),
                grid.layers()
            ));
            sl.compact();
            routes.sl = Some(std::sync::Arc::new(sl));
            routes.rule = Rule::Layered;
            return Ok(routes);
        }
        self.route_any(topo, opts, budget)
    }
}

impl Layered {
    /// The general search, for any topology.
    fn route_any(&self, topo: &Topo<'_>, opts: &Options, budget: u8) -> Result<Routes, RouteError> {
        let (ranking, _, _) = crate::updn::chosen(topo, opts).map_err(|e| match e {
            RouteError::NotApplicable { reason, .. } => RouteError::NotApplicable {
                engine: "layered",
                reason,
            },
            other => other,
        })?;
        // Half the budget for escape layers (at least one), each under its own up*/down*
        // ranking with its root far from the others': the trees that fit no other layer
        // spread over several roots instead of crowding one.
        let k = usize::from(budget / 2).max(1);
        // Where many paths end up in escape layers (tori, meshes), more escape roots and
        // fewer general layers often spread them better: that split is tried as well, and
        // the one with the lower max link load is kept.
        let wide = usize::from(budget.saturating_sub(2)).max(k);
        let rules = escape_rules(topo, &ranking, wide);
        let mut best = attempt(topo, &rules[..k], budget, self.name());
        if wide > k && best.escaped * 4 > best.paths {
            let other = attempt(topo, &rules, budget, self.name());
            if other.max_load < best.max_load {
                best = other;
            }
        }
        let mut sl = best.sl;
        // Layers number the SLs; the ones a result leaves empty are closed up.
        sl.compact();
        let mut routes = best.routes;
        routes.sl = Some(std::sync::Arc::new(sl));
        routes.rule = Rule::Layered;
        Ok(routes)
    }
}

/// `count` up*/down* rankings: `ranking` first, then each rooted at the switch farthest
/// from the roots before it.
fn escape_rules(topo: &Topo<'_>, ranking: &crate::updn::Ranking, count: usize) -> Vec<Rule> {
    let mut rules = vec![Rule::UpDown {
        rank: ranking.rank.clone(),
        tie_by_guid: true,
    }];
    let mut roots: Vec<SwIdx> = ranking.roots.clone();
    while rules.len() < count {
        // The switch farthest from every root so far.
        let mut best = (0u8, SwIdx(0));
        let (mut row, mut q) = (Vec::new(), Vec::new());
        let mut far = vec![u8::MAX; topo.num_switches()];
        for &r0 in &roots {
            topo.bfs_to(r0, &mut row, &mut q);
            for (i, &h) in row.iter().enumerate() {
                far[i] = far[i].min(h);
            }
        }
        for (i, &h) in far.iter().enumerate() {
            if h != u8::MAX && h > best.0 {
                best = (h, SwIdx(i as u32));
            }
        }
        roots.push(best.1);
        rules.push(Rule::UpDown {
            rank: crate::rank::bfs_ranks(topo, &[best.1]),
            tie_by_guid: true,
        });
    }
    rules
}

/// One routing with `rules.len()` escape layers.
struct Attempt {
    routes: Routes,
    sl: PathSl,
    /// The highest CA flow count on a switch-to-switch link.
    max_load: u64,
    /// (source switch, CA LID) paths, and of them those in escape layers.
    paths: u64,
    escaped: u64,
}

fn attempt(topo: &Topo<'_>, rules: &[Rule], budget: u8, name: &'static str) -> Attempt {
    let k = rules.len();
    let g = Graph::new(topo, rules);
    let mut r = Router::new(&g, budget, k);
    let mut routes = Routes::empty(name, topo);
    let lid_len = routes.lft.first().map_or(0, Vec::len);
    let mut sl = PathSl::new(topo.num_switches(), lid_len);
    let jobs = interleaved(topo);
    // The first pass only spreads loads for the second, which routes LID by LID on
    // exact loads.
    let mut first = Columns::new(g.len(), lid_len);
    let mut searches: Vec<Search> = Vec::new();
    for batch in jobs.chunks(BATCH) {
        searches.resize_with(batch.len(), || Search::new(g.len()));
        let load = &r.load;
        // A switch's LID carries no CA flows: its first tree would change no load, and
        // the second pass takes nothing off for it.
        let each = |(s, &(d, _)): (&mut Search, &(DestIdx, Lid))| {
            if topo.dests[d].kind != NodeKind::Switch {
                s.tree(&g, load, topo.dests[d].sw, None);
            }
        };
        if crate::par::worth(batch.len() * g.chans.len()) {
            searches.par_iter_mut().zip(batch).for_each(each);
        } else {
            searches.iter_mut().zip(batch).for_each(each);
        }
        for (s, &(d, lid)) in searches.iter_mut().zip(batch) {
            let dest = &topo.dests[d];
            if dest.kind != NodeKind::Switch {
                r.commit(s, dest.sw, true);
                first.write(&g, s, d, lid);
            }
        }
    }
    if rayon::current_num_threads() > 1 && crate::par::worth(jobs.len() * g.chans.len()) {
        // A helper searches the trees ahead while these are layered. The hand-overs are
        // spins on channels: a pool's fork per LID costs a wake-up, as much as the
        // search itself.
        let (g, first, jobs) = (&g, &first, &jobs);
        std::thread::scope(|sc| {
            let (to_tx, to_rx) = mpsc::channel::<ToAhead>();
            let (back_tx, back_rx) = mpsc::channel::<Searched>();
            let spawned = std::thread::Builder::new()
                .name("layered-search".into())
                .spawn_scoped(sc, move || search_ahead(g, first, jobs, &to_rx, &back_tx));
            let helper = spawned.is_ok().then_some((&to_tx, &back_rx));
            r.final_pass(jobs, first, &mut routes, &mut sl, helper);
        });
    } else {
        r.final_pass(&jobs, &first, &mut routes, &mut sl, None);
    }
    Attempt {
        max_load: r.load.iter().copied().max().unwrap_or(0),
        paths: r.paths,
        escaped: r.escaped,
        routes,
        sl,
    }
}

/// The first pass's trees, LID by LID: each switch's port towards the LID. The second
/// pass takes a LID's first tree off the loads from here, reading one LID's entries in a
/// row rather than one from every switch's table.
struct Columns {
    switches: usize,
    ports: Vec<u8>,
}

const NO_PORT: u8 = u8::MAX;

impl Columns {
    fn new(switches: usize, lids: usize) -> Columns {
        Columns {
            switches,
            ports: vec![NO_PORT; switches * lids],
        }
    }

    fn get(&self, lid: Lid) -> &[u8] {
        let at = lid.0 as usize * self.switches;
        self.ports.get(at..at + self.switches).unwrap_or(&[])
    }

    fn write(&mut self, g: &Graph<'_, '_>, s: &Search, d: DestIdx, lid: Lid) {
        let dest = &g.topo.dests[d];
        let at = lid.0 as usize * self.switches;
        let Some(col) = self.ports.get_mut(at..at + self.switches) else {
            return;
        };
        for (x, e) in col.iter_mut().enumerate() {
            *e = if x == dest.sw.idx() {
                dest.sw_port
            } else {
                s.parent[x].map_or(NO_PORT, |c| g.chans[c as usize].port)
            };
        }
    }
}

/// The tree of `s` into every switch's entry for `lid`.
fn write(g: &Graph<'_, '_>, routes: &mut Routes, s: &Search, d: DestIdx, lid: Lid) {
    let dest = &g.topo.dests[d];
    for (x, table) in routes.lft.iter_mut().enumerate() {
        let port = if x == dest.sw.idx() {
            Some(dest.sw_port)
        } else {
            s.parent[x].map(|c| g.chans[c as usize].port)
        };
        if let (Some(p), Some(e)) = (port, table.get_mut(lid.0 as usize)) {
            *e = p;
        }
    }
}

/// Trees searched ahead of the layering, at most this many at a time.
const AHEAD: usize = 8;

/// What the layering tells the helper.
enum ToAhead {
    /// A search to fill again.
    Spare(Search),
    /// Search again from job `from` on `load`, which holds every tree before it as
    /// placed and the first pass's trees of the rest; results carry `round`.
    Restart {
        round: u32,
        from: usize,
        load: Vec<u64>,
    },
}

/// A tree the helper searched: job `at`'s, in generation `round`.
struct Searched {
    round: u32,
    at: usize,
    search: Search,
}

/// The helper: searches job after job, each on the loads the trees before it leave when
/// the layering keeps them as searched. When it does not, the layering restarts the
/// helper on its exact loads, and the trees searched meanwhile are thrown away.
fn search_ahead(
    g: &Graph<'_, '_>,
    first: &Columns,
    jobs: &[(DestIdx, Lid)],
    rx: &Receiver<ToAhead>,
    tx: &Sender<Searched>,
) {
    // Idle until the first restart.
    let mut st = AheadState {
        round: 0,
        at: jobs.len(),
        load: Vec::new(),
        spares: Vec::new(),
    };
    loop {
        loop {
            match rx.try_recv() {
                Ok(msg) => st.on(msg),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        let job = jobs.get(st.at).copied();
        match (job, st.spares.pop()) {
            (Some((d, lid)), Some(mut s)) => {
                let dest = &g.topo.dests[d];
                unload(g, first, d, lid, &mut st.load, |_| {});
                s.tree(g, &st.load, dest.sw, None);
                if dest.kind != NodeKind::Switch {
                    s.flows(g, dest.sw, &mut st.load, |_| {});
                }
                let (round, at) = (st.round, st.at);
                if tx
                    .send(Searched {
                        round,
                        at,
                        search: s,
                    })
                    .is_err()
                {
                    return;
                }
                st.at += 1;
            }
            (_, spare) => {
                st.spares.extend(spare);
                match spin_recv(rx) {
                    Some(msg) => st.on(msg),
                    None => return,
                }
            }
        }
    }
}

struct AheadState {
    round: u32,
    /// The next job to search.
    at: usize,
    load: Vec<u64>,
    spares: Vec<Search>,
}

impl AheadState {
    fn on(&mut self, msg: ToAhead) {
        match msg {
            ToAhead::Spare(s) => self.spares.push(s),
            ToAhead::Restart { round, from, load } => {
                (self.round, self.at, self.load) = (round, from, load);
            }
        }
    }
}

/// The next message, spinning while the channel is empty (yielding after a while);
/// `None` once the sender is gone.
fn spin_recv<T>(rx: &Receiver<T>) -> Option<T> {
    let mut spins = 0u32;
    loop {
        match rx.try_recv() {
            Ok(v) => return Some(v),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {
                spins = spins.saturating_add(1);
                if spins < 1 << 16 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
}

/// Every LID, one per destination switch in turn (switches in order, each switch's LIDs
/// in destination order).
fn interleaved(topo: &Topo<'_>) -> Vec<(DestIdx, Lid)> {
    let mut per: Vec<Vec<(DestIdx, Lid)>> = vec![Vec::new(); topo.num_switches()];
    for (di, d) in topo.dests.iter_enumerated() {
        per[d.sw.idx()].extend(d.lids().map(|l| (di, l)));
    }
    let mut out = Vec::with_capacity(per.iter().map(Vec::len).sum());
    let mut next = vec![0usize; per.len()];
    loop {
        let before = out.len();
        for (s, lids) in per.iter().enumerate() {
            if let Some(&j) = lids.get(next[s]) {
                out.push(j);
                next[s] += 1;
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

/// Takes the flows of `lid`'s first-pass tree off `load`; `touched` hears of every
/// channel whose load changes.
fn unload(
    g: &Graph<'_, '_>,
    first: &Columns,
    d: DestIdx,
    lid: Lid,
    load: &mut [u64],
    mut touched: impl FnMut(u32),
) {
    let dest = &g.topo.dests[d];
    if dest.kind == NodeKind::Switch {
        return;
    }
    let col = first.get(lid);
    for s in (0..g.len() as u32).map(SwIdx) {
        let n = g.sources[s.idx()];
        if n == 0 {
            continue;
        }
        let mut at = s;
        let mut hops = 0;
        while at != dest.sw && hops < 64 {
            let Some(&p) = col.get(at.idx()).filter(|&&p| p != NO_PORT) else {
                break;
            };
            let Some(c) = g.chan_at(at, p) else {
                break;
            };
            load[c] = load[c].saturating_sub(n);
            touched(c as u32);
            at = g.chans[c].to;
            hops += 1;
        }
    }
}

/// A directed switch-to-switch link.
#[derive(Debug, Clone, Copy)]
struct Chan {
    from: SwIdx,
    to: SwIdx,
    /// Output port at `from`.
    port: u8,
}

/// The switch graph as the engine reads it.
struct Graph<'a, 't> {
    topo: &'a Topo<'t>,
    chans: Vec<Chan>,
    /// First channel of each switch (CSR over [`Topo::adj`]), and one past the last.
    off: Vec<u32>,
    /// Channels into each switch (CSR, `off` as for the channels out): the source
    /// switch and the channel, in the order of the channels back.
    inn: Vec<(SwIdx, u32)>,
    inn_off: Vec<u32>,
    /// The channel out of each switch's port: `by_port[s * stride + port]`.
    by_port: Vec<u32>,
    stride: usize,
    /// CA sources hanging off each switch.
    sources: Vec<u64>,
    hop_cost: u64,
    /// Per escape ranking, the direction of every channel.
    dirs: Vec<Vec<Dir>>,
}

impl<'a, 't> Graph<'a, 't> {
    fn new(topo: &'a Topo<'t>, rules: &[Rule]) -> Graph<'a, 't> {
        let n = topo.num_switches();
        let mut chans = Vec::new();
        let mut off = Vec::with_capacity(n + 1);
        for s in (0..n as u32).map(SwIdx) {
            off.push(chans.len() as u32);
            for a in topo.adj(s) {
                chans.push(Chan {
                    from: s,
                    to: a.peer,
                    port: a.port,
                });
            }
        }
        off.push(chans.len() as u32);
        let mut rev = vec![u32::MAX; chans.len()];
        for s in (0..n as u32).map(SwIdx) {
            for (i, a) in topo.adj(s).iter().enumerate() {
                let c = off[s.idx()] as usize + i;
                let back = topo.adj(a.peer).iter().position(|b| b.port == a.peer_port);
                if let Some(j) = back {
                    rev[c] = off[a.peer.idx()] + j as u32;
                }
            }
        }
        let inn = chans
            .iter()
            .enumerate()
            .filter_map(|(back, _)| {
                let c = rev[back];
                (c != u32::MAX).then(|| (chans[c as usize].from, c))
            })
            .collect::<Vec<_>>();
        let mut inn_off = Vec::with_capacity(n + 1);
        let mut k = 0u32;
        for s in 0..n {
            inn_off.push(k);
            k += (off[s]..off[s + 1])
                .filter(|&b| rev[b as usize] != u32::MAX)
                .count() as u32;
        }
        inn_off.push(k);
        let stride = chans
            .iter()
            .map(|c| usize::from(c.port) + 1)
            .max()
            .unwrap_or(1);
        let mut by_port = vec![u32::MAX; n * stride];
        for (i, c) in chans.iter().enumerate() {
            by_port[c.from.idx() * stride + usize::from(c.port)] = i as u32;
        }
        let mut sources = vec![0u64; n];
        for d in &topo.dests {
            if d.kind != NodeKind::Switch {
                sources[d.sw.idx()] += 1;
            }
        }
        let cas: u64 = sources.iter().sum();
        Graph {
            topo,
            off,
            inn,
            inn_off,
            by_port,
            stride,
            dirs: rules
                .iter()
                .map(|ru| chans.iter().map(|c| ru.dir(topo, c.from, c.to)).collect())
                .collect(),
            chans,
            sources,
            hop_cost: cas.max(1),
        }
    }

    /// Number of switches.
    fn len(&self) -> usize {
        self.sources.len()
    }

    /// The channel out of `s`'s port `port`.
    fn chan_at(&self, s: SwIdx, port: u8) -> Option<usize> {
        if usize::from(port) >= self.stride {
            return None;
        }
        let c = *self
            .by_port
            .get(s.idx() * self.stride + usize::from(port))?;
        (c != u32::MAX).then_some(c as usize)
    }

    /// The channels into `t`: (source switch, channel).
    fn in_chans(&self, t: SwIdx) -> &[(SwIdx, u32)] {
        &self.inn[self.inn_off[t.idx()] as usize..self.inn_off[t.idx() + 1] as usize]
    }

    fn out_chans(&self, s: SwIdx) -> std::ops::Range<usize> {
        self.off[s.idx()] as usize..self.off[s.idx() + 1] as usize
    }

    /// Whether the turn from channel `a` into `b` breaks up*/down*.
    fn illegal(&self, e: usize, a: u32, b: u32) -> bool {
        self.dirs[e][a as usize] == Dir::Down && self.dirs[e][b as usize] == Dir::Up
    }
}

/// One tree search's state: a worker's scratch.
struct Search {
    dist: Vec<u64>,
    /// The tree: each switch's channel towards the destination.
    parent: Vec<Option<u32>>,
    /// Switches in the order they settled (the destination's switch first).
    order: Vec<SwIdx>,
    /// CA sources behind each switch (after [`Search::flows`]).
    acc: Vec<u64>,
    cone: Vec<bool>,
    settled: Vec<bool>,
    /// Settled switches whose channels were relaxed (seeds are settled before).
    expanded: Vec<bool>,
    heap: RadixHeap,
}

/// A monotone priority queue (a radix heap): Dijkstra never pushes a key below the last
/// one popped, so entries sit in buckets by the highest bit where they differ from it.
struct RadixHeap {
    last: u64,
    len: usize,
    /// Boxed: a search moves between threads.
    buckets: Box<[Vec<(u64, u32)>; 65]>,
}

impl Default for RadixHeap {
    fn default() -> Self {
        RadixHeap {
            last: 0,
            len: 0,
            buckets: Box::new(std::array::from_fn(|_| Vec::new())),
        }
    }
}

impl RadixHeap {
    fn clear(&mut self) {
        self.last = 0;
        self.len = 0;
        for b in self.buckets.iter_mut() {
            b.clear();
        }
    }

    fn bucket(&self, key: u64) -> usize {
        (64 - (key ^ self.last).leading_zeros()) as usize
    }

    /// `key` must not be below the last key popped.
    fn push(&mut self, key: u64, v: u32) {
        let b = self.bucket(key);
        self.buckets[b].push((key, v));
        self.len += 1;
    }

    fn pop(&mut self) -> Option<(u64, u32)> {
        if self.len == 0 {
            return None;
        }
        if self.buckets[0].is_empty() {
            let i = self.buckets.iter().position(|b| !b.is_empty())?;
            let moved = std::mem::take(&mut self.buckets[i]);
            self.last = moved.iter().map(|e| e.0).min()?;
            for &(k, v) in &moved {
                let b = self.bucket(k);
                self.buckets[b].push((k, v));
            }
            // Keep the allocation.
            let mut moved = moved;
            moved.clear();
            if self.buckets[i].is_empty() {
                self.buckets[i] = moved;
            }
        }
        self.len -= 1;
        self.buckets[0].pop()
    }
}

impl Search {
    fn new(n: usize) -> Search {
        Search {
            dist: vec![u64::MAX; n],
            parent: vec![None; n],
            order: Vec::with_capacity(n),
            acc: vec![0; n],
            cone: vec![false; n],
            settled: vec![false; n],
            expanded: vec![false; n],
            heap: RadixHeap::default(),
        }
    }

    /// Adds the tree's CA flows to `load`: each channel carries the sources behind it.
    /// `touched` hears of every channel whose load changes.
    fn flows(
        &mut self,
        g: &Graph<'_, '_>,
        dsw: SwIdx,
        load: &mut [u64],
        mut touched: impl FnMut(u32),
    ) {
        self.acc.fill(0);
        for &x in self.order.iter().rev() {
            if x == dsw {
                continue;
            }
            let Some(c) = self.parent[x.idx()] else {
                continue;
            };
            let a = self.acc[x.idx()] + g.sources[x.idx()];
            self.acc[x.idx()] = a;
            self.acc[g.chans[c as usize].to.idx()] += a;
            load[c as usize] += a;
            touched(c);
        }
    }

    /// Dijkstra from `dsw` over reversed channels; with `updn`, only up*/down* paths.
    fn tree(&mut self, g: &Graph<'_, '_>, load: &[u64], dsw: SwIdx, updn: Option<usize>) {
        self.dist.fill(u64::MAX);
        self.parent.fill(None);
        self.order.clear();
        self.dist[dsw.idx()] = 0;
        self.order.push(dsw);
        let Some(e) = updn else {
            self.search(g, load, |_, _, _| true);
            return;
        };
        let dirs = &g.dirs[e];
        // The cone: switches that reach dsw going down only. They must go down, so a
        // packet that went down never has to go up again.
        self.search(g, load, |_, _, c| dirs[c] == Dir::Down);
        self.cone.fill(false);
        for &s in &self.order {
            self.cone[s.idx()] = true;
        }
        let cone = std::mem::take(&mut self.cone);
        self.search(g, load, |from, to, c| {
            !cone[from.idx()] && (dirs[c] == Dir::Up || cone[to.idx()])
        });
        self.cone = cone;
    }

    /// Dijkstra extending the switches of `order` (final, distances set), relaxing `s`
    /// from `t` over the channel `s -> t` when `allowed`; appends switches to `order` as
    /// they settle.
    fn search(
        &mut self,
        g: &Graph<'_, '_>,
        load: &[u64],
        allowed: impl Fn(SwIdx, SwIdx, usize) -> bool,
    ) {
        self.heap.clear();
        self.settled.fill(false);
        for &s in &self.order {
            self.settled[s.idx()] = true;
        }
        // Seeds in distance order: the heap's keys never go below the last popped.
        let mut seeds: Vec<(u64, u32)> = self
            .order
            .iter()
            .map(|s| (self.dist[s.idx()], s.0))
            .collect();
        seeds.sort_unstable();
        for (d, s) in seeds {
            self.heap.push(d, s);
        }
        while let Some((dt, t)) = self.heap.pop() {
            let t = SwIdx(t);
            if dt != self.dist[t.idx()] {
                continue;
            }
            if !self.settled[t.idx()] {
                self.settled[t.idx()] = true;
                self.order.push(t);
            } else if self.expanded[t.idx()] {
                continue;
            }
            self.expanded[t.idx()] = true;
            for &(from, c) in g.in_chans(t) {
                let s = from.idx();
                if self.settled[s] || !allowed(from, t, c as usize) {
                    continue;
                }
                let nd = dt + g.hop_cost + load[c as usize];
                if nd < self.dist[s] {
                    self.dist[s] = nd;
                    self.parent[s] = Some(c);
                    self.heap.push(nd, s as u32);
                }
            }
        }
        self.expanded.fill(false);
    }
}

struct Router<'g, 'a, 't> {
    g: &'g Graph<'a, 't>,
    /// CA flows routed over each channel so far.
    load: Vec<u64>,
    /// Layers with a dependency graph; the escape layers (after them) keep none.
    layers: Vec<Layer>,
    /// The first escape layer (escape layer `e` obeys ranking `e` of [`Graph::dirs`]).
    escape: u8,
    /// Layer of each source switch's path to the current LID.
    layer: Vec<u8>,
    /// Switches whose path to the current LID is placed (and the destination switch).
    done: Vec<bool>,
    deps: Vec<(u32, u32)>,
    /// Dependencies the current LID added, by layer, to take back if it goes up*/down*.
    log: Vec<(u8, u32, u32)>,
    /// Layering sent some switch of the current tree another way.
    moved: bool,
    /// (source switch, CA LID) paths recorded, and of them those in escape layers.
    paths: u64,
    escaped: u64,
}

impl<'g, 'a, 't> Router<'g, 'a, 't> {
    fn new(g: &'g Graph<'a, 't>, budget: u8, k: usize) -> Router<'g, 'a, 't> {
        let n = g.len();
        let general = budget as usize - k;
        Router {
            g,
            load: vec![0; g.chans.len()],
            layers: (0..general).map(|_| Layer::new(g.chans.len())).collect(),
            escape: general as u8,
            layer: vec![0; n],
            done: vec![false; n],
            deps: Vec::new(),
            log: Vec::new(),
            moved: false,
            paths: 0,
            escaped: 0,
        }
    }

    /// Takes the flows of `lid`'s first-pass tree off the loads.
    fn unload(&mut self, first: &Columns, d: DestIdx, lid: Lid) {
        unload(self.g, first, d, lid, &mut self.load, |_| {});
    }

    /// The second pass: each LID's flows off, its tree again on the exact loads of all
    /// the others, layered, committed.
    ///
    /// With a `helper`, the trees are searched ahead (see [`search_ahead`]) while these
    /// are layered; layering seldom changes a tree, and when it does the helper starts
    /// again after it. The tables are those of doing it in turn.
    fn final_pass(
        &mut self,
        jobs: &[(DestIdx, Lid)],
        first: &Columns,
        routes: &mut Routes,
        sl: &mut PathSl,
        helper: Option<(&Sender<ToAhead>, &Receiver<Searched>)>,
    ) {
        let g = self.g;
        let mut round = 0u32;
        let mut helper = helper.filter(|(tx, _)| {
            let restart = ToAhead::Restart {
                round,
                from: 0,
                load: self.load.clone(),
            };
            tx.send(restart).is_ok()
                && (0..AHEAD).all(|_| tx.send(ToAhead::Spare(Search::new(g.len()))).is_ok())
        });
        let mut own = None;
        for (i, &(d, lid)) in jobs.iter().enumerate() {
            let dest = &g.topo.dests[d];
            let ca = dest.kind != NodeKind::Switch;
            self.unload(first, d, lid);
            let mut cur = None;
            while let Some((tx, rx)) = helper {
                match spin_recv(rx) {
                    Some(got) if got.round == round && got.at == i => {
                        cur = Some(got.search);
                        break;
                    }
                    // Searched before the last restart.
                    Some(stale) => {
                        let _ = tx.send(ToAhead::Spare(stale.search));
                    }
                    // The helper is gone: on alone.
                    None => helper = None,
                }
            }
            let mut cur = match cur {
                Some(s) => s,
                None => {
                    let mut s = own.take().unwrap_or_else(|| Search::new(g.len()));
                    s.tree(g, &self.load, dest.sw, None);
                    s
                }
            };
            let kept = self.place_or_escape(&mut cur, dest.sw);
            self.commit(&mut cur, dest.sw, ca);
            self.record(&cur, routes, sl, d, lid);
            match helper {
                Some((tx, _)) => {
                    let more = i + 1 < jobs.len();
                    let restarted = kept || !more || {
                        round += 1;
                        let restart = ToAhead::Restart {
                            round,
                            from: i + 1,
                            load: self.load.clone(),
                        };
                        tx.send(restart).is_ok()
                    };
                    if !restarted || tx.send(ToAhead::Spare(cur)).is_err() {
                        helper = None;
                    }
                }
                None => own = Some(cur),
            }
        }
    }

    /// The tree of `s` into the tables, with its layers.
    fn record(&mut self, s: &Search, routes: &mut Routes, sl: &mut PathSl, d: DestIdx, lid: Lid) {
        let g = self.g;
        write(g, routes, s, d, lid);
        let dest = &g.topo.dests[d];
        for (x, &l) in self.layer.iter().enumerate() {
            if l != 0 {
                sl.set(SwIdx(x as u32), lid, l);
            }
            if dest.kind != NodeKind::Switch && g.sources[x] > 0 && x != dest.sw.idx() {
                self.paths += 1;
                self.escaped += u64::from(l >= self.escape);
            }
        }
    }

    /// Layers the tree of `s` (see [`Self::place`]); when some path fits nowhere, the
    /// tree becomes the balanced up*/down* one, in the escape layer.
    /// True when the tree is still the one searched.
    fn place_or_escape(&mut self, s: &mut Search, dsw: SwIdx) -> bool {
        self.moved = false;
        if self.place(s, dsw) {
            return !self.moved;
        }
        for (li, x, y) in self.log.drain(..) {
            self.layers[li as usize].unlink(x, y);
        }
        let k = self.g.dirs.len();
        let mut best = (u64::MAX, 0usize);
        for e in 0..k {
            s.tree(self.g, &self.load, dsw, Some(e));
            let cost: u64 = (0..self.g.len())
                .filter(|&x| s.dist[x] != u64::MAX)
                .map(|x| s.dist[x].saturating_mul(self.g.sources[x]))
                .fold(0u64, |a, b| a.saturating_add(b));
            if cost < best.0 {
                best = (cost, e);
            }
        }
        if best.1 != k - 1 {
            s.tree(self.g, &self.load, dsw, Some(best.1));
        }
        self.layer.fill(self.escape + best.1 as u8);
        false
    }

    /// Adds the tree's CA flows to the loads (and counts the sources behind each switch,
    /// along the tree as placed).
    fn commit(&mut self, s: &mut Search, dsw: SwIdx, ca_dest: bool) {
        if ca_dest {
            s.flows(self.g, dsw, &mut self.load, |_| {});
        }
    }

    /// Puts every source switch's path into the first layer it keeps acyclic, or the
    /// escape layer if it obeys up*/down*, or sends it another way
    /// ([`Self::reparent`]); false when some path fits nowhere.
    ///
    /// Switches go nearest the destination first. A path contains the path of the next
    /// source switch on it, whose layer is known: layer graphs only grow, so no lower
    /// layer can take the longer path, and in that layer only the prefix is new.
    fn place(&mut self, sr: &mut Search, dsw: SwIdx) -> bool {
        let g = self.g;
        self.log.clear();
        self.layer.fill(0);
        self.done.fill(false);
        self.done[dsw.idx()] = true;
        for i in 0..sr.order.len() {
            let s = sr.order[i];
            if g.sources[s.idx()] == 0 || s == dsw || sr.parent[s.idx()].is_none() {
                continue;
            }
            self.done[s.idx()] = true;
            self.deps.clear();
            let mut at = s;
            let mut prefix = None;
            let mut from = 0u8;
            while let Some(c) = sr.parent[at.idx()] {
                let t = g.chans[c as usize].to;
                match sr.parent[t.idx()] {
                    Some(next) if t != dsw => self.deps.push((c, next)),
                    _ => break,
                }
                if prefix.is_none() && g.sources[t.idx()] > 0 {
                    prefix = Some(self.deps.len());
                    from = self.layer[t.idx()];
                }
                at = t;
            }
            if self.deps.is_empty() {
                continue;
            }
            let mut placed = false;
            if from < self.escape {
                for li in from as usize..self.layers.len() {
                    let deps = match prefix {
                        Some(k) if li == from as usize => &self.deps[..k],
                        _ => &self.deps[..],
                    };
                    let layer = &mut self.layers[li];
                    if layer.try_add(deps) {
                        self.log
                            .extend(layer.added.drain(..).map(|(x, y)| (li as u8, x, y)));
                        self.layer[s.idx()] = li as u8;
                        placed = true;
                        break;
                    }
                }
            }
            if !placed {
                let k = g.dirs.len();
                let es: Vec<usize> = if from >= self.escape {
                    vec![(from - self.escape) as usize]
                } else {
                    (0..k).collect()
                };
                let legal = es
                    .into_iter()
                    .find(|&e| self.deps.iter().all(|&(a, b)| !g.illegal(e, a, b)));
                if let Some(e) = legal {
                    self.layer[s.idx()] = self.escape + e as u8;
                } else if !self.reparent(sr, s, dsw) {
                    return false;
                }
            }
        }
        true
    }

    /// Sends `s` another way: to a neighbour whose path is placed, with the one new
    /// dependency fitting that path's layer (cheapest neighbour first). Switches behind
    /// `s` are placed later, along the new way.
    fn reparent(&mut self, sr: &mut Search, s: SwIdx, dsw: SwIdx) -> bool {
        let g = self.g;
        let current = sr.parent[s.idx()];
        let mut cands: Vec<(u64, u32)> = g
            .out_chans(s)
            .filter(|&c| Some(c as u32) != current && self.done[g.chans[c].to.idx()])
            .map(|c| {
                let t = g.chans[c].to;
                (sr.dist[t.idx()] + g.hop_cost + self.load[c], c as u32)
            })
            .collect();
        cands.sort_unstable();
        for (_, c) in cands {
            let t = g.chans[c as usize].to;
            if t == dsw {
                self.moved = true;
                sr.parent[s.idx()] = Some(c);
                self.layer[s.idx()] = 0;
                return true;
            }
            let Some(next) = sr.parent[t.idx()] else {
                continue;
            };
            let li = self.layer[t.idx()];
            let fits = if li >= self.escape {
                !g.illegal((li - self.escape) as usize, c, next)
            } else {
                let layer = &mut self.layers[li as usize];
                let ok = layer.try_add(&[(c, next)]);
                if ok {
                    self.log
                        .extend(layer.added.drain(..).map(|(x, y)| (li, x, y)));
                }
                ok
            };
            if fits {
                self.moved = true;
                sr.parent[s.idx()] = Some(c);
                self.layer[s.idx()] = li;
                return true;
            }
        }
        false
    }
}

/// One layer's channel dependency graph, kept acyclic with a topological order.
struct Layer {
    out: Vec<Vec<u32>>,
    inn: Vec<Vec<u32>>,
    /// Position of each channel in a topological order of the graph.
    ord: Vec<u32>,
    // Search scratch.
    dfs: Dfs,
    fwd: Vec<u32>,
    bwd: Vec<u32>,
    added: Vec<(u32, u32)>,
    /// Dependencies that closed a cycle on their own: they always will.
    bad: std::collections::HashSet<u64, std::hash::BuildHasherDefault<KeyHasher>>,
}

impl Layer {
    fn new(chans: usize) -> Layer {
        Layer {
            out: vec![Vec::new(); chans],
            inn: vec![Vec::new(); chans],
            ord: (0..chans as u32).collect(),
            dfs: Dfs::new(chans),
            fwd: Vec::new(),
            bwd: Vec::new(),
            added: Vec::new(),
            bad: Default::default(),
        }
    }

    /// Adds every dependency (the new ones left in `added`), or none when they would
    /// close a cycle.
    fn try_add(&mut self, deps: &[(u32, u32)]) -> bool {
        self.added.clear();
        for &(x, y) in deps {
            if self.out[x as usize].contains(&y) {
                continue;
            }
            let ok = !self.bad.contains(&key(x, y)) && self.insert(x, y);
            if !ok {
                if self.added.is_empty() {
                    // It closes a cycle by itself, and will while the graph only grows.
                    self.bad.insert(key(x, y));
                }
                let added = std::mem::take(&mut self.added);
                for &(x, y) in &added {
                    self.unlink(x, y);
                }
                self.added = added;
                self.added.clear();
                return false;
            }
            self.added.push((x, y));
        }
        true
    }

    /// Takes a dependency back; the order stays topological.
    fn unlink(&mut self, x: u32, y: u32) {
        remove(&mut self.out[x as usize], y);
        remove(&mut self.inn[y as usize], x);
    }

    /// Pearce-Kelly insertion of `x -> y`; false (graph unchanged) when it closes a cycle.
    fn insert(&mut self, x: u32, y: u32) -> bool {
        let (ox, oy) = (self.ord[x as usize], self.ord[y as usize]);
        if ox < oy {
            self.link(x, y);
            return true;
        }
        if x == y {
            return false;
        }
        // Forward from y among positions below ox: reaching x closes a cycle. Then
        // backward from x among positions above oy.
        let ord = &self.ord;
        self.dfs.begin();
        if self.dfs.run(
            &self.out,
            y,
            |w| ord[w as usize] < ox,
            Some(x),
            &mut self.fwd,
        ) {
            return false;
        }
        self.dfs
            .run(&self.inn, x, |w| ord[w as usize] > oy, None, &mut self.bwd);
        // Those that reach x go first, then those y reaches, into the same positions.
        self.bwd.sort_unstable_by_key(|&v| ord[v as usize]);
        self.fwd.sort_unstable_by_key(|&v| ord[v as usize]);
        let mut slots: Vec<u32> = self
            .bwd
            .iter()
            .chain(self.fwd.iter())
            .map(|&v| ord[v as usize])
            .collect();
        slots.sort_unstable();
        for (&v, &p) in self.bwd.iter().chain(self.fwd.iter()).zip(&slots) {
            self.ord[v as usize] = p;
        }
        self.link(x, y);
        true
    }

    fn link(&mut self, x: u32, y: u32) {
        self.out[x as usize].push(y);
        self.inn[y as usize].push(x);
    }
}

/// Hashes the one `u64` key of [`Layer::bad`] with a multiply (keys are channel pairs, not
/// chosen by anyone).
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, k: u64) {
        self.0 = (k ^ self.0)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
}

fn key(x: u32, y: u32) -> u64 {
    u64::from(x) << 32 | u64::from(y)
}

/// A depth-first search bounded to part of a graph, with marks that one new epoch clears.
/// The relayer's searches use it too.
pub(crate) struct Dfs {
    pub(crate) mark: Vec<u32>,
    pub(crate) epoch: u32,
    pub(crate) stack: Vec<u32>,
}

impl Dfs {
    /// Scratch for a graph of `nodes` nodes.
    pub(crate) fn new(nodes: usize) -> Dfs {
        Dfs {
            mark: vec![0; nodes],
            epoch: 0,
            stack: Vec::new(),
        }
    }

    /// A new epoch: nothing is marked. Searches in one epoch never revisit each other's
    /// nodes.
    pub(crate) fn begin(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.mark.fill(0);
            self.epoch = 1;
        }
    }

    /// Visits what `start` reaches along `adj` through nodes `within` allows, into
    /// `visited`; true (and stops) on reaching `target`.
    fn run(
        &mut self,
        adj: &[Vec<u32>],
        start: u32,
        within: impl Fn(u32) -> bool,
        target: Option<u32>,
        visited: &mut Vec<u32>,
    ) -> bool {
        let ep = self.epoch;
        visited.clear();
        self.stack.clear();
        self.stack.push(start);
        self.mark[start as usize] = ep;
        while let Some(v) = self.stack.pop() {
            visited.push(v);
            for &w in &adj[v as usize] {
                if Some(w) == target {
                    return true;
                }
                if within(w) && self.mark[w as usize] != ep {
                    self.mark[w as usize] = ep;
                    self.stack.push(w);
                }
            }
        }
        false
    }
}

fn remove(v: &mut Vec<u32>, x: u32) {
    if let Some(i) = v.iter().rposition(|&e| e == x) {
        v.swap_remove(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_core::generate::{GenSpec, Grid, generate};

    /// A torus fills its general layers; the split with more escape layers is tried too
    /// and kept when its max link load is lower, and the SLs it uses have no gaps.
    #[test]
    fn a_torus_keeps_the_better_split_with_its_sls_closed_up() {
        let mut f = generate(&GenSpec::Torus(Grid::new(vec![6, 6, 6], 1))).unwrap();
        sm_core::lid::LidStore::new().assign(&mut f, 0).unwrap();
        let topo = Topo::new(&f).unwrap();
        // Eight VLs: four escape layers, or six with two general ones (better here).
        let opts = Options {
            vl_budget: 8,
            ..Options::default()
        };
        let routes = Layered.route_any(&topo, &opts, 8).unwrap();
        let (ranking, _, _) = crate::updn::chosen(&topo, &opts).unwrap();
        let rules = escape_rules(&topo, &ranking, 6);
        let half = attempt(&topo, &rules[..4], 8, "layered");
        let wide = attempt(&topo, &rules, 8, "layered");
        assert!(
            half.escaped * 4 > half.paths,
            "{} of {} paths escaped",
            half.escaped,
            half.paths
        );
        assert!(
            wide.max_load < half.max_load,
            "{} {}",
            wide.max_load,
            half.max_load
        );
        assert_eq!(routes.lft, wide.routes.lft);
        let sl = routes.sl.as_deref().unwrap();
        let mut used = [false; 16];
        for s in 0..topo.num_switches() as u32 {
            for l in 0..routes.lft[0].len() as u16 {
                used[usize::from(sl.get(SwIdx(s), Lid(l)))] = true;
            }
        }
        let n = used.iter().filter(|&&u| u).count();
        assert!(used[..n].iter().all(|&u| u), "{used:?}");
    }

    #[test]
    fn compact_closes_up_unused_sls() {
        let mut sl = PathSl::new(2, 3);
        sl.set(SwIdx(0), Lid(1), 3);
        sl.set(SwIdx(1), Lid(2), 6);
        sl.set(SwIdx(1), Lid(0), 3);
        sl.compact();
        assert_eq!(
            [
                sl.get(SwIdx(0), Lid(1)),
                sl.get(SwIdx(1), Lid(2)),
                sl.get(SwIdx(1), Lid(0))
            ],
            [1, 2, 1]
        );
        assert_eq!(sl.get(SwIdx(0), Lid(0)), 0);
    }
}
