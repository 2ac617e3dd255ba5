//! Deadlock-free, globally balanced routing on any topology, with virtual layers.
//!
//! # Routes
//!
//! Destination LIDs are routed one at a time, in [`Topo::dests`] order. Each gets a tree
//! towards its switch: a shortest-path tree under link costs `hop_cost + load`, where
//! `load` counts the CA flows (one per CA source whose path uses the directed link) that
//! every tree routed so far put on that link. Heavily used links grow expensive, so later
//! destinations go round them, on longer paths if need be: balance is global, over all
//! destinations, not per switch. The 2^LMC LIDs of a port are separate destinations and
//! spread the same way.
//!
//! # Layers
//!
//! Every destination's tree goes into one virtual layer; a layer's channel dependency graph
//! (channels = directed switch-to-switch links, a dependency where a tree turns from one
//! into the next) must stay acyclic, so each layer is deadlock-free on its own and layers
//! never depend on each other. A tree goes into the first layer it keeps acyclic (checked
//! incrementally on a maintained topological order, Pearce and Kelly's algorithm). The
//! layer is the service level of every path to that LID, and with the identity SL-to-VL
//! map its virtual lane.
//!
//! The last layer of the budget is the *escape* layer: it holds only trees that obey
//! up*/down* (ranks of [`crate::updn`]), which are acyclic together whatever else is in
//! it. A tree that fits no other layer is replaced by the balanced up*/down* tree towards
//! the same LID and goes there. So the result is deadlock-free within any budget, down to
//! one virtual lane (where every tree is the balanced up*/down* one), and never falls back
//! to a deadlocking one.
//!
//! Everything is sequential and in a fixed order, so the tables do not depend on the
//! number of threads.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use sm_core::NodeKind;

use crate::routes::{Dir, Engine, Options, PathSl, RouteError, Routes, Rule};
use crate::topo::{DestIdx, SwIdx, Topo};

/// Virtual lanes used when the options name no budget.
pub const DEFAULT_VL_BUDGET: u8 = 8;

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
        let (ranking, _, _) = crate::updn::chosen(topo, opts).map_err(|e| match e {
            RouteError::NotApplicable { reason, .. } => RouteError::NotApplicable {
                engine: "layered",
                reason,
            },
            other => other,
        })?;
        let rule = Rule::UpDown {
            rank: ranking.rank,
            tie_by_guid: true,
        };
        let mut r = Router::new(topo, &rule, budget);
        let mut routes = Routes::empty(self.name(), topo);
        let lid_len = routes.lft.first().map_or(0, Vec::len);
        let mut sl = PathSl::new(topo.num_switches(), lid_len);
        // A first pass routes every LID for balance alone; the second routes each again
        // knowing every other LID's flows (its own taken off), and layers it.
        {
            for (di, d) in topo.dests.iter_enumerated() {
                for lid in d.lids() {
                    r.balance(di);
                    for (s, table) in routes.lft.iter_mut().enumerate() {
                        if s != d.sw.idx() {
                            if let (Some(c), Some(e)) = (r.parent[s], table.get_mut(lid.0 as usize)) {
                                *e = r.chans[c as usize].port;
                            }
                        }
                    }
                }
            }
        }
        for (di, d) in topo.dests.iter_enumerated() {
            for lid in d.lids() {
                r.unload(&routes, di, lid);
                r.route(di);
                for (s, table) in routes.lft.iter_mut().enumerate() {
                    let port = if s == d.sw.idx() {
                        Some(d.sw_port)
                    } else {
                        r.parent[s].map(|c| r.chans[c as usize].port)
                    };
                    if let (Some(p), Some(e)) = (port, table.get_mut(lid.0 as usize)) {
                        *e = p;
                    }
                    if r.layer[s] != 0 {
                        sl.set(SwIdx(s as u32), lid, r.layer[s]);
                    }
                }
            }
        }
        routes.sl = Some(std::sync::Arc::new(sl));
        routes.rule = Rule::Layered;
        Ok(routes)
    }
}

/// A directed switch-to-switch link.
#[derive(Debug, Clone, Copy)]
struct Chan {
    from: SwIdx,
    to: SwIdx,
    /// Output port at `from`.
    port: u8,
    dir: Dir,
}

struct Router<'a, 't> {
    topo: &'a Topo<'t>,
    chans: Vec<Chan>,
    /// First channel of each switch (CSR over [`Topo::adj`]), and one past the last.
    off: Vec<u32>,
    /// The channel in the other direction.
    rev: Vec<u32>,
    /// CA flows routed over each channel so far.
    load: Vec<u64>,
    hop_cost: u64,
    /// CA sources hanging off each switch.
    sources: Vec<u64>,
    /// Layers with a dependency graph; the escape layer (the last) keeps none.
    layers: Vec<Layer>,
    escape: u8,
    // Per-destination scratch.
    dist: Vec<u64>,
    parent: Vec<Option<u32>>,
    order: Vec<SwIdx>,
    acc: Vec<u64>,
    cone: Vec<bool>,
    settled: Vec<bool>,
    /// Settled switches whose channels were relaxed (seeds are settled before).
    expanded: Vec<bool>,
    deps: Vec<(u32, u32)>,
    /// Layer of each source switch's path to the current LID.
    layer: Vec<u8>,
    /// Dependencies the current LID added, by layer, to take back if it goes up*/down*.
    log: Vec<(u8, u32, u32)>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
}

impl<'a, 't> Router<'a, 't> {
    fn new(topo: &'a Topo<'t>, rule: &Rule, budget: u8) -> Router<'a, 't> {
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
                    dir: rule.dir(topo, s, a.peer),
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
        let mut sources = vec![0u64; n];
        for d in &topo.dests {
            if d.kind != NodeKind::Switch {
                sources[d.sw.idx()] += 1;
            }
        }
        let cas: u64 = sources.iter().sum();
        let layers = (0..budget - 1).map(|_| Layer::new(chans.len())).collect();
        Router {
            topo,
            load: vec![0; chans.len()],
            // A hop costs as much as four destinations' worth of flows through one link:
            // paths stay short until links are clearly imbalanced.
            hop_cost: 4 * cas.max(1),
            rev,
            off,
            chans,
            sources,
            layers,
            escape: budget - 1,
            dist: vec![u64::MAX; n],
            parent: vec![None; n],
            order: Vec::with_capacity(n),
            acc: vec![0; n],
            cone: vec![false; n],
            settled: vec![false; n],
            expanded: vec![false; n],
            deps: Vec::new(),
            layer: vec![0; n],
            log: Vec::new(),
            heap: BinaryHeap::new(),
        }
    }

    fn out_chans(&self, s: SwIdx) -> std::ops::Range<usize> {
        self.off[s.idx()] as usize..self.off[s.idx() + 1] as usize
    }

    /// Routes one LID of `d` for balance only (a first pass).
    fn balance(&mut self, d: DestIdx) {
        let dest = &self.topo.dests[d];
        let dsw = dest.sw;
        self.tree(dsw, false);
        self.dependencies(dsw);
        if dest.kind != NodeKind::Switch {
            self.commit_load();
        }
    }

    /// Takes the flows of `lid`'s path, as the tables hold it, off the loads.
    fn unload(&mut self, routes: &Routes, d: DestIdx, lid: sm_mad::Lid) {
        let dest = &self.topo.dests[d];
        if dest.kind == NodeKind::Switch {
            return;
        }
        for s in (0..self.topo.num_switches() as u32).map(SwIdx) {
            let n = self.sources[s.idx()];
            if n == 0 {
                continue;
            }
            let mut at = s;
            let mut hops = 0;
            while at != dest.sw && hops < 64 {
                let Some(p) = routes.port(at, lid) else { break };
                let Some(c) = self.out_chans(at).find(|&c| self.chans[c].port == p) else {
                    break;
                };
                self.load[c] -= n;
                at = self.chans[c].to;
                hops += 1;
            }
        }
    }

    /// Routes one LID of `d`: leaves its tree in `parent` and the layer of each source
    /// switch's path in `layer`.
    fn route(&mut self, d: DestIdx) {
        let dest = &self.topo.dests[d];
        let dsw = dest.sw;
        let ca_dest = dest.kind != NodeKind::Switch;
        self.tree(dsw, false);
        self.dependencies(dsw);
        if !self.place(dsw) {
            // Some path fits no layer and breaks up*/down*: the whole tree goes up*/down*,
            // into the escape layer.
            for (li, x, y) in self.log.drain(..) {
                self.layers[li as usize].unlink(x, y);
            }
            self.tree(dsw, true);
            self.dependencies(dsw);
            for s in 0..self.layer.len() {
                self.layer[s] = self.escape;
            }
        }
        if ca_dest {
            self.commit_load();
        }
    }

    /// Puts every source switch's path into the first layer it keeps acyclic, or the
    /// escape layer if it obeys up*/down*; false when some path fits nowhere.
    ///
    /// Switches go nearest the destination first. A path contains the path of the next
    /// source switch on it, whose layer is known: layer graphs only grow, so no lower
    /// layer can take the longer path, and in that layer only the prefix is new.
    fn place(&mut self, dsw: SwIdx) -> bool {
        self.log.clear();
        self.layer.fill(0);
        let order = std::mem::take(&mut self.order);
        let mut ok = true;
        for &s in &order {
            if self.sources[s.idx()] == 0 || s == dsw || self.parent[s.idx()].is_none() {
                continue;
            }
            self.deps.clear();
            let mut at = s;
            let mut prefix = None;
            let mut from = 0u8;
            while let Some(c) = self.parent[at.idx()] {
                let t = self.chans[c as usize].to;
                match self.parent[t.idx()] {
                    Some(next) if t != dsw => self.deps.push((c, next)),
                    _ => break,
                }
                if prefix.is_none() && self.sources[t.idx()] > 0 {
                    prefix = Some(self.deps.len());
                    from = self.layer[t.idx()];
                }
                at = t;
            }
            if self.deps.is_empty() {
                continue;
            }
            let mut placed = false;
            if from != self.escape {
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
                if !self.legal() {
                    ok = false;
                    break;
                }
                self.layer[s.idx()] = self.escape;
            }
        }
        self.order = order;
        ok
    }

    /// Dijkstra from `dsw` over reversed channels; with `updn`, only up*/down* paths.
    fn tree(&mut self, dsw: SwIdx, updn: bool) {
        self.dist.fill(u64::MAX);
        self.parent.fill(None);
        self.order.clear();
        self.dist[dsw.idx()] = 0;
        self.order.push(dsw);
        if !updn {
            self.search(|_| true);
            return;
        }
        // The cone: switches that reach dsw going down only. They must go down, so a
        // packet that went down never has to go up again.
        self.search(|c| c.dir == Dir::Down);
        self.cone.fill(false);
        for &s in &self.order {
            self.cone[s.idx()] = true;
        }
        let cone = std::mem::take(&mut self.cone);
        self.search(|c| !cone[c.from.idx()] && (c.dir == Dir::Up || cone[c.to.idx()]));
        self.cone = cone;
    }

    /// Dijkstra extending the switches of `order` (final, distances set), relaxing `s`
    /// from `t` over the channel `s -> t` when `allowed`; appends switches to `order` as
    /// they settle.
    fn search(&mut self, allowed: impl Fn(&Chan) -> bool) {
        self.heap.clear();
        self.settled.fill(false);
        for &s in &self.order {
            self.settled[s.idx()] = true;
            self.heap.push(Reverse((self.dist[s.idx()], s.0)));
        }
        while let Some(Reverse((dt, t))) = self.heap.pop() {
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
            for back in self.out_chans(t) {
                let c = self.rev[back];
                if c == u32::MAX {
                    continue;
                }
                let ch = self.chans[c as usize];
                let s = ch.from.idx();
                if self.settled[s] || !allowed(&ch) {
                    continue;
                }
                let nd = dt + self.hop_cost + self.load[c as usize];
                if nd < self.dist[s] {
                    self.dist[s] = nd;
                    self.parent[s] = Some(c);
                    self.heap.push(Reverse((nd, s as u32)));
                }
            }
        }
        self.expanded.fill(false);
    }

    /// CA sources behind every switch of the tree (`acc`).
    fn dependencies(&mut self, dsw: SwIdx) {
        self.acc.fill(0);
        for &s in self.order.iter().rev() {
            if s == dsw {
                continue;
            }
            let Some(c) = self.parent[s.idx()] else {
                continue;
            };
            let a = self.acc[s.idx()] + self.sources[s.idx()];
            self.acc[s.idx()] = a;
            let t = self.chans[c as usize].to;
            self.acc[t.idx()] += a;
        }
    }

    /// Whether every turn of the path in `deps` obeys up*/down*.
    fn legal(&self) -> bool {
        self.deps.iter().all(|&(a, b)| {
            !(self.chans[a as usize].dir == Dir::Down && self.chans[b as usize].dir == Dir::Up)
        })
    }

    /// Adds the tree's CA flows to the channel loads (`acc` from [`Self::dependencies`]).
    fn commit_load(&mut self) {
        for (p, &a) in self.parent.iter().zip(&self.acc) {
            if let Some(c) = p {
                self.load[*c as usize] += a;
            }
        }
    }
}

/// One layer's channel dependency graph, kept acyclic with a topological order.
struct Layer {
    out: Vec<Vec<u32>>,
    inn: Vec<Vec<u32>>,
    /// Position of each channel in a topological order of the graph.
    ord: Vec<u32>,
    // Search scratch.
    mark: Vec<u32>,
    epoch: u32,
    fwd: Vec<u32>,
    bwd: Vec<u32>,
    stack: Vec<u32>,
    added: Vec<(u32, u32)>,
    /// Dependencies that closed a cycle on their own: they always will.
    bad: std::collections::HashSet<u64>,
}

impl Layer {
    fn new(chans: usize) -> Layer {
        Layer {
            out: vec![Vec::new(); chans],
            inn: vec![Vec::new(); chans],
            ord: (0..chans as u32).collect(),
            mark: vec![0; chans],
            epoch: 0,
            fwd: Vec::new(),
            bwd: Vec::new(),
            stack: Vec::new(),
            added: Vec::new(),
            bad: std::collections::HashSet::new(),
        }
    }

    /// Adds every dependency (the new ones left in `added`), or none when they would
    /// close a cycle.
    fn try_add(&mut self, deps: &[(u32, u32)]) -> bool {
        self.added.clear();
        if deps.iter().any(|&(x, y)| self.bad.contains(&key(x, y))) {
            return false;
        }
        for &(x, y) in deps {
            if self.out[x as usize].contains(&y) {
                continue;
            }
            if !self.insert(x, y) {
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
        // Forward from y among positions below ox: reaching x closes a cycle.
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.mark.fill(0);
            self.epoch = 1;
        }
        let ep = self.epoch;
        self.fwd.clear();
        self.stack.clear();
        self.stack.push(y);
        self.mark[y as usize] = ep;
        while let Some(v) = self.stack.pop() {
            self.fwd.push(v);
            for &w in &self.out[v as usize] {
                if w == x {
                    return false;
                }
                let ow = self.ord[w as usize];
                if ow < ox && self.mark[w as usize] != ep {
                    self.mark[w as usize] = ep;
                    self.stack.push(w);
                }
            }
        }
        // Backward from x among positions above oy.
        self.bwd.clear();
        self.stack.push(x);
        self.mark[x as usize] = ep;
        while let Some(v) = self.stack.pop() {
            self.bwd.push(v);
            for &w in &self.inn[v as usize] {
                let ow = self.ord[w as usize];
                if ow > oy && self.mark[w as usize] != ep {
                    self.mark[w as usize] = ep;
                    self.stack.push(w);
                }
            }
        }
        // Those that reach x go first, then those y reaches, into the same positions.
        let ord = &self.ord;
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

fn key(x: u32, y: u32) -> u64 {
    u64::from(x) << 32 | u64::from(y)
}

fn remove(v: &mut Vec<u32>, x: u32) {
    if let Some(i) = v.iter().rposition(|&e| e == x) {
        v.swap_remove(i);
    }
}
