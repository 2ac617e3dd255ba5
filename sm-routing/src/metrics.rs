//! Quality figures of forwarding tables: hop counts, link load under all-to-all and shift
//! traffic, an effective bisection bandwidth estimate, and path diversity with LMC.
//!
//! # Model
//!
//! The end points are the source ports of validation: CA ports (and router ports) hanging
//! off a switch, called CAs below, ordered by port GUID where an order matters. A flow from
//! CA `a` to CA `b` follows the tables from `a`'s switch to `b`'s base LID (one route per
//! pair); flows the tables do not deliver are counted as unrouted and load no link.
//!
//! - **Hops** are links traversed from the source CA to the destination CA: the CA's link
//!   to its switch, the switch-to-switch links, and the link to the destination (2 for two
//!   CAs on one switch). Over every ordered pair of distinct CAs.
//! - **All-to-all load**: every CA sends one flow to every other CA. Loads are counted per
//!   directed link: switch-to-switch channels, and switch-to-CA links (the last hop; every
//!   CA-to-switch link carries N-1 flows and is not reported). Max (the edge forwarding
//!   index), mean and population standard deviation over all links of each kind, idle ones
//!   included. Computed per destination by pushing source counts down the forwarding tree
//!   in O(switches), never by walking pairs.
//! - **Shift permutations**: CAs in port GUID order; shift `k` sends CA `i` to CA
//!   `(i + k) mod N`. A shift's load is its most loaded link (at least 1 when any flow is
//!   routed: CA links carry one flow each). Every shift `1..N` when `N - 1 <=
//!   max_shifts`, else a seeded sample of `max_shifts` distinct shifts. Each destination
//!   receives one flow per shift, so shifts are counted in the same per-destination pass,
//!   along the forwarding pointers it has already resolved.
//! - **Effective bisection bandwidth** (after Hoefler, Schneider and Lumsdaine): a sample
//!   shuffles the CAs, splits them into halves (one left out when N is odd) and pairs CA `i`
//!   of one half with CA `i` of the other, a random perfect matching across the bisection;
//!   both directions of each pair are flows. A flow gets bandwidth `1 / L`, `L` the largest
//!   number of flows on any link of its path (CA links carry one), 0 when unrouted. eBB is
//!   the mean over flows and samples: 1.0 is full bisection bandwidth.
//! - **Path diversity** (when some CA has LMC > 0): for each pair of CAs on different
//!   switches, the number of distinct switch-level paths (channel sequences) its
//!   destination's 2^LMC LIDs take from the source's switch, and whether those paths are
//!   pairwise disjoint (no switch-to-switch link in common).
//!
//! Randomness is [`SplitMix64`] from the seed in [`MetricsOptions`]; samples are drawn
//! before any parallel work, and all sums are integers or summed in a fixed order, so the
//! figures do not depend on the number of threads.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;
use sm_core::generate::SplitMix64;
use sm_core::{NodeKind, PortIdx};
use sm_mad::Guid;

use crate::routes::Routes;
use sm_core::idx::IdxVec;

use crate::topo::{DestIdx, SwIdx, Topo};
use crate::walk::{BLOCK, Block, ChanIdx, Col, Fate, Tracer, Wiring, walk_path};

/// How much to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsOptions {
    /// Seed of every random choice.
    pub seed: u64,
    /// Shift permutations evaluated at most (all when there are no more).
    pub max_shifts: usize,
    /// Random bisections for the eBB estimate (0 skips it).
    pub bisections: usize,
    /// Compute path diversity (walks every pair's 2^LMC paths).
    pub diversity: bool,
}

impl Default for MetricsOptions {
    fn default() -> Self {
        MetricsOptions {
            seed: 0x1b5_0001,
            max_shifts: 64,
            bisections: 32,
            diversity: true,
        }
    }
}

/// Hop counts over CA-to-CA pairs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HopStats {
    /// Ordered pairs of distinct CAs.
    pub pairs: u64,
    /// Pairs the tables do not deliver (not in the histogram).
    pub unrouted_pairs: u64,
    /// `histogram[h]` = delivered pairs `h` links apart.
    pub histogram: Vec<u64>,
    pub min: u32,
    pub max: u32,
    pub mean: f64,
}

/// Loads of one kind of link.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LoadStats {
    /// Directed links of this kind.
    pub links: usize,
    /// Sum of the loads.
    pub total: u64,
    pub max: u64,
    pub mean: f64,
    /// Population standard deviation.
    pub stddev: f64,
}

impl LoadStats {
    fn of(loads: &[u64]) -> LoadStats {
        let links = loads.len();
        let total: u64 = loads.iter().sum();
        let max = loads.iter().copied().max().unwrap_or(0);
        let mean = if links == 0 {
            0.0
        } else {
            total as f64 / links as f64
        };
        let var = if links == 0 {
            0.0
        } else {
            loads
                .iter()
                .map(|&l| (l as f64 - mean) * (l as f64 - mean))
                .sum::<f64>()
                / links as f64
        };
        LoadStats {
            links,
            total,
            max,
            mean,
            stddev: var.sqrt(),
        }
    }
}

/// All-to-all link load.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AllToAll {
    /// Flows (ordered pairs of distinct CAs).
    pub flows: u64,
    pub unrouted_flows: u64,
    /// Switch-to-switch channels.
    pub switch_links: LoadStats,
    /// Switch-to-CA links.
    pub ca_links: LoadStats,
    /// Every switch-to-switch channel with its flows, switches in snapshot order and each
    /// switch's links in port order; for pictures and per-link reports, so not serialised.
    #[serde(skip)]
    pub per_link: Vec<LinkLoad>,
    /// Every CA's last link (switch to CA) with its flows, in the CAs' port GUID order.
    #[serde(skip)]
    pub per_ca: Vec<CaLoad>,
}

/// The all-to-all flows on one direction of a switch-to-switch link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkLoad {
    pub from: SwIdx,
    /// The output port of `from`.
    pub port: u8,
    pub to: SwIdx,
    /// The input port of `to`.
    pub to_port: u8,
    pub flows: u64,
}

/// The all-to-all flows on the link from a switch to a CA port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaLoad {
    /// The CA port.
    pub port: PortIdx,
    pub guid: Guid,
    /// The switch it hangs off, and that switch's port.
    pub sw: SwIdx,
    pub sw_port: u8,
    pub flows: u64,
}

/// The load of one shift permutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ShiftLoad {
    pub shift: u32,
    pub max_load: u32,
}

/// Shift permutations.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Shifts {
    /// Shifts evaluated.
    pub shifts: usize,
    /// True when they are a sample of the `N - 1` shifts.
    pub sampled: bool,
    /// The worst shift's max link load (0 when nothing was evaluated).
    pub worst_max_load: u32,
    /// The first shift reaching it.
    pub worst_shift: Option<u32>,
    /// Mean over shifts of the max link load.
    pub mean_max_load: f64,
    pub unrouted_flows: u64,
    /// Every evaluated shift, ascending.
    pub per_shift: Vec<ShiftLoad>,
}

/// Effective bisection bandwidth estimate.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Bisection {
    pub samples: usize,
    /// Flows per sample (both directions of each matched pair).
    pub flows_per_sample: usize,
    /// Mean flow bandwidth over every flow of every sample (1.0 = full bisection).
    pub ebb: f64,
    pub min_sample: f64,
    pub max_sample: f64,
    pub unrouted_flows: u64,
}

/// Path diversity over pairs of CAs on different switches whose destination has more than
/// one LID.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Diversity {
    pub pairs: u64,
    /// Pairs none of whose LIDs is delivered (left out of the figures below).
    pub unrouted_pairs: u64,
    /// Mean number of distinct switch-level paths per pair.
    pub mean_paths: f64,
    pub min_paths: u32,
    /// Fraction of pairs whose paths share no switch-to-switch link.
    pub disjoint_fraction: f64,
}

/// Every figure.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Metrics {
    pub engine: String,
    /// CAs (source ports).
    pub cas: usize,
    pub hops: HopStats,
    pub all_to_all: AllToAll,
    pub shifts: Shifts,
    pub bisection: Option<Bisection>,
    pub diversity: Option<Diversity>,
}

impl fmt::Display for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "metrics of {} tables, {} CAs", self.engine, self.cas)?;
        let h = &self.hops;
        writeln!(
            f,
            "  hops (CA to CA, links): min {} max {} mean {:.3} over {} pairs ({} unrouted)",
            h.min, h.max, h.mean, h.pairs, h.unrouted_pairs
        )?;
        for (hops, n) in h.histogram.iter().enumerate().filter(|(_, n)| **n > 0) {
            writeln!(f, "    {hops:>3} hops: {n}")?;
        }
        let a = &self.all_to_all;
        for (what, l) in [
            ("switch-to-switch", &a.switch_links),
            ("switch-to-CA", &a.ca_links),
        ] {
            writeln!(
                f,
                "  all-to-all load on {} {what} links: max {} mean {:.2} stddev {:.2}",
                l.links, l.max, l.mean, l.stddev
            )?;
        }
        let s = &self.shifts;
        writeln!(
            f,
            "  shift permutations ({}{}): worst max link load {}{}, mean {:.2}",
            s.shifts,
            if s.sampled { ", sampled" } else { "" },
            s.worst_max_load,
            s.worst_shift
                .map(|k| format!(" (shift {k})"))
                .unwrap_or_default(),
            s.mean_max_load
        )?;
        if let Some(b) = &self.bisection {
            writeln!(
                f,
                "  effective bisection bandwidth: {:.4} ({} samples of {} flows, min {:.4} max {:.4})",
                b.ebb, b.samples, b.flows_per_sample, b.min_sample, b.max_sample
            )?;
        }
        if let Some(d) = &self.diversity {
            writeln!(
                f,
                "  path diversity over {} pairs: mean {:.3} distinct paths, min {}, disjoint {:.1}%",
                d.pairs,
                d.mean_paths,
                d.min_paths,
                d.disjoint_fraction * 100.0
            )?;
        }
        Ok(())
    }
}

struct Ctx<'a, 't> {
    topo: &'a Topo<'t>,
    routes: &'a Routes,
    w: &'a Wiring,
    /// The CAs in port GUID order.
    cas: Vec<DestIdx>,
    /// Position of every CA in `cas` (none for switches).
    pos: IdxVec<DestIdx, Option<u32>>,
    /// The shifts evaluated, ascending.
    ks: Vec<u32>,
    /// Per channel, per evaluated shift: flows (`channels × ks.len()`, channel-major: the
    /// flows of one destination under every shift converge on the same channels).
    shift_loads: Box<[AtomicU32]>,
}

/// Computes every figure of `routes` on `topo`.
pub fn metrics(topo: &Topo<'_>, routes: &Routes, opts: &MetricsOptions) -> Metrics {
    let w = Wiring::new(topo);
    let mut cas: Vec<DestIdx> = w.sources().to_vec();
    cas.sort_by_key(|&d| (topo.dests[d].guid, d));
    let mut pos = IdxVec::filled(None, topo.dests.len());
    for (i, &d) in cas.iter().enumerate() {
        pos[d] = Some(i as u32);
    }
    let (ks, sampled) = pick_shifts(cas.len(), opts);
    let ctx = Ctx {
        topo,
        routes,
        w: &w,
        shift_loads: (0..ks.len() * w.chans.len())
            .map(|_| AtomicU32::new(0))
            .collect(),
        cas,
        pos,
        ks,
    };
    let (hops, all_to_all, shift_unrouted) = ctx.all_to_all();
    let shifts = ctx.shifts(sampled, &shift_unrouted);
    let bisection = ctx.bisection(opts);
    let diversity = if opts.diversity {
        ctx.diversity()
    } else {
        None
    };
    Metrics {
        engine: routes.engine.to_string(),
        cas: ctx.cas.len(),
        hops,
        all_to_all,
        shifts,
        bisection,
        diversity,
    }
}

/// The shifts to evaluate: all of `1..n`, or a seeded sample of `max_shifts` of them
/// (ascending), and whether it is a sample.
fn pick_shifts(n: usize, opts: &MetricsOptions) -> (Vec<u32>, bool) {
    let all = n.saturating_sub(1);
    if all <= opts.max_shifts {
        return ((1..n as u32).collect(), false);
    }
    let mut pool: Vec<u32> = (1..n as u32).collect();
    let mut rng = SplitMix64::new(opts.seed);
    for i in 0..opts.max_shifts {
        let j = i + rng.below((pool.len() - i) as u64) as usize;
        pool.swap(i, j);
    }
    pool.truncate(opts.max_shifts);
    pool.sort_unstable();
    (pool, true)
}

#[derive(Debug, Default)]
struct A2aAcc {
    hist: Vec<u64>,
    unrouted: u64,
    loads: IdxVec<ChanIdx, u64>,
    ca_loads: IdxVec<DestIdx, u64>,
    /// Per evaluated shift: flows not delivered.
    shift_unrouted: Vec<u64>,
}

impl A2aAcc {
    fn merge(mut self, o: A2aAcc) -> A2aAcc {
        if self.hist.len() < o.hist.len() {
            self.hist.resize(o.hist.len(), 0);
        }
        for (a, b) in self.hist.iter_mut().zip(o.hist) {
            *a += b;
        }
        for (a, b) in self.loads.iter_mut().zip(&o.loads) {
            *a += b;
        }
        for (a, b) in self.ca_loads.iter_mut().zip(&o.ca_loads) {
            *a += b;
        }
        for (a, b) in self.shift_unrouted.iter_mut().zip(o.shift_unrouted) {
            *a += b;
        }
        self.unrouted += o.unrouted;
        self
    }
}

#[derive(Debug, Default)]
struct A2aScratch {
    tracer: Tracer,
    /// Per switch: flows to the destination passing it.
    cnt: IdxVec<SwIdx, u64>,
    bucket: Vec<u32>,
    order: Vec<SwIdx>,
}

impl Ctx<'_, '_> {
    fn new_acc(&self) -> A2aAcc {
        A2aAcc {
            hist: Vec::new(),
            unrouted: 0,
            loads: IdxVec::filled(0, self.w.chans.len()),
            ca_loads: IdxVec::filled(0, self.topo.dests.len()),
            shift_unrouted: vec![0; self.ks.len()],
        }
    }

    /// Hop histogram, all-to-all loads and shift loads, one destination base LID at a time.
    fn all_to_all(&self) -> (HopStats, AllToAll, Vec<u64>) {
        let top = self.topo.lid_dest.len();
        let blocks: Vec<usize> = (0..top.div_ceil(BLOCK)).collect();
        let acc = blocks
            .par_iter()
            .fold(
                || (self.new_acc(), Block::default(), A2aScratch::default()),
                |(mut acc, mut block, mut sc), &b| {
                    block.load(self.routes.into(), self.w.switches(), b * BLOCK);
                    for j in 0..BLOCK.min(top - b * BLOCK) {
                        let lid = b * BLOCK + j;
                        let Some(d) = self.topo.lid_dest[lid].get() else {
                            continue;
                        };
                        let dest = &self.topo.dests[d];
                        if dest.kind == NodeKind::Switch || dest.base_lid.0 as usize != lid {
                            continue;
                        }
                        self.push_counts(d, block.col(j), &mut acc, &mut sc);
                    }
                    (acc, block, sc)
                },
            )
            .map(|(acc, _, _)| acc)
            .reduce(|| self.new_acc(), A2aAcc::merge);

        let routed: u64 = acc.hist.iter().sum();
        let pairs = routed + acc.unrouted;
        let weighted: u64 = acc.hist.iter().enumerate().map(|(h, n)| h as u64 * n).sum();
        let present = || acc.hist.iter().enumerate().filter(|(_, n)| **n > 0);
        let hops = HopStats {
            pairs,
            unrouted_pairs: acc.unrouted,
            min: present().map(|(h, _)| h as u32).next().unwrap_or(0),
            max: present().map(|(h, _)| h as u32).next_back().unwrap_or(0),
            mean: if routed == 0 {
                0.0
            } else {
                weighted as f64 / routed as f64
            },
            histogram: acc.hist.clone(),
        };
        let ca_loads: Vec<u64> = self.w.sources().iter().map(|&d| acc.ca_loads[d]).collect();
        let per_link = self
            .w
            .chans
            .iter()
            .zip(&acc.loads)
            .map(|(c, &flows)| LinkLoad {
                from: c.from,
                port: c.port,
                to: c.to,
                to_port: c.to_port,
                flows,
            })
            .collect();
        let per_ca = self
            .cas
            .iter()
            .map(|&d| {
                let dest = &self.topo.dests[d];
                CaLoad {
                    port: dest.port,
                    guid: dest.guid,
                    sw: dest.sw,
                    sw_port: dest.sw_port,
                    flows: acc.ca_loads[d],
                }
            })
            .collect();
        let a2a = AllToAll {
            flows: pairs,
            unrouted_flows: acc.unrouted,
            switch_links: LoadStats::of(acc.loads.as_slice()),
            ca_links: LoadStats::of(&ca_loads),
            per_link,
            per_ca,
        };
        (hops, a2a, acc.shift_unrouted)
    }

    /// Traffic of every CA to `dests[d]`, pushed down the forwarding tree in order of
    /// decreasing distance.
    fn push_counts(&self, d: DestIdx, col: Col<'_>, acc: &mut A2aAcc, sc: &mut A2aScratch) {
        let (w, dests) = (self.w, &self.topo.dests);
        let dest_sw = dests[d].sw;
        sc.tracer.run(
            w,
            dests,
            Some(d),
            col,
            w.source_switches(),
            w.skip_for(dests, d),
        );
        let steps = &sc.tracer.steps;
        if sc.cnt.len() != w.switches() {
            sc.cnt = IdxVec::filled(0, w.switches());
        }
        for &s in &sc.tracer.visited {
            sc.cnt[s] = 0;
        }
        for &s in w.source_switches() {
            let mut c = w.sources_at(s).len() as u64;
            if s == dest_sw {
                c -= 1;
            }
            if c == 0 {
                continue;
            }
            let st = steps[s];
            if st.fate != Fate::Delivered {
                acc.unrouted += c;
                continue;
            }
            sc.cnt[s] = c;
            let links = st.hops as usize + 2;
            if acc.hist.len() <= links {
                acc.hist.resize(links + 1, 0);
            }
            acc.hist[links] += c;
        }
        // Counting sort of the delivering switches by decreasing hops: bucket[h] becomes
        // the start of hop count h in `order`.
        sc.bucket.clear();
        for &s in &sc.tracer.visited {
            let st = steps[s];
            if st.fate == Fate::Delivered {
                let h = st.hops as usize;
                if sc.bucket.len() <= h {
                    sc.bucket.resize(h + 1, 0);
                }
                sc.bucket[h] += 1;
            }
        }
        let mut start = 0u32;
        for b in sc.bucket.iter_mut().rev() {
            let len = *b;
            *b = start;
            start += len;
        }
        sc.order.clear();
        sc.order.resize(start as usize, SwIdx(0));
        for &s in &sc.tracer.visited {
            let st = steps[s];
            if st.fate == Fate::Delivered {
                let slot = &mut sc.bucket[st.hops as usize];
                sc.order[*slot as usize] = s;
                *slot += 1;
            }
        }
        for &s in &sc.order {
            let c = sc.cnt[s];
            match steps[s].chan.get() {
                None => acc.ca_loads[d] += c,
                Some(ch) => {
                    acc.loads[ch] += c;
                    sc.cnt[w.head(ch)] += c;
                }
            }
        }
        // Shift k brings this destination one flow, from the CA k places before it.
        let Some(i) = self.pos[d] else {
            return;
        };
        let (n, i) = (self.cas.len(), i as usize);
        let nk = self.ks.len();
        for (ki, &k) in self.ks.iter().enumerate() {
            let src = self.cas[(i + n - k as usize % n) % n];
            let s = dests[src].sw;
            if steps[s].fate != Fate::Delivered {
                acc.shift_unrouted[ki] += 1;
                continue;
            }
            let mut ch = steps[s].chan.get();
            while let Some(c) = ch {
                self.shift_loads[c.idx() * nk + ki].fetch_add(1, Ordering::Relaxed);
                ch = steps[w.head(c)].chan.get();
            }
        }
    }

    /// Walks the flow `src -> dst`, pushing its channels.
    fn flow(&self, src: DestIdx, dst: DestIdx, path: &mut Vec<ChanIdx>) -> bool {
        let (s, d) = (&self.topo.dests[src], &self.topo.dests[dst]);
        walk_path(
            self.w,
            self.routes.into(),
            &self.topo.dests,
            s.sw,
            d.base_lid,
            dst,
            path,
        )
    }

    /// The shift report from the loads the all-to-all pass collected.
    fn shifts(&self, sampled: bool, unrouted: &[u64]) -> Shifts {
        let n = self.cas.len() as u64;
        let nk = self.ks.len();
        let mut max = vec![0u32; nk];
        for row in self.shift_loads.chunks_exact(nk.max(1)) {
            for (m, l) in max.iter_mut().zip(row) {
                *m = (*m).max(l.load(Ordering::Relaxed));
            }
        }
        let per_shift: Vec<ShiftLoad> = self
            .ks
            .iter()
            .zip(max)
            .enumerate()
            .map(|(ki, (&k, max))| {
                let routed = unrouted.get(ki).is_some_and(|&u| u < n);
                ShiftLoad {
                    shift: k,
                    max_load: max.max(routed as u32),
                }
            })
            .collect();
        let worst = per_shift.iter().map(|s| s.max_load).max().unwrap_or(0);
        Shifts {
            shifts: per_shift.len(),
            sampled,
            worst_max_load: worst,
            worst_shift: per_shift
                .iter()
                .find(|s| s.max_load == worst)
                .map(|s| s.shift),
            mean_max_load: if per_shift.is_empty() {
                0.0
            } else {
                per_shift.iter().map(|s| s.max_load as u64).sum::<u64>() as f64
                    / per_shift.len() as f64
            },
            unrouted_flows: unrouted.iter().sum(),
            per_shift,
        }
    }

    fn bisection(&self, opts: &MetricsOptions) -> Option<Bisection> {
        let cas = &self.cas;
        let n = cas.len();
        if n < 2 || opts.bisections == 0 {
            return None;
        }
        let half = n / 2;
        let mut rng = SplitMix64::new(opts.seed ^ 0xb15e_c710);
        let seeds: Vec<u64> = (0..opts.bisections).map(|_| rng.next_u64()).collect();
        let results: Vec<(f64, u64)> = seeds
            .par_iter()
            .map_init(
                || {
                    let loads: IdxVec<ChanIdx, u32> = IdxVec::filled(0, self.w.chans.len());
                    (loads, Vec::new(), Vec::new())
                },
                |(loads, path, offs), &seed| {
                    let mut rng = SplitMix64::new(seed);
                    let mut perm: Vec<DestIdx> = cas.to_vec();
                    for i in (1..perm.len()).rev() {
                        let j = rng.below(i as u64 + 1) as usize;
                        perm.swap(i, j);
                    }
                    loads.iter_mut().for_each(|l| *l = 0);
                    path.clear();
                    offs.clear();
                    let mut delivered = Vec::with_capacity(2 * half);
                    for i in 0..half {
                        let (a, b) = (perm[i], perm[half + i]);
                        for (s, d) in [(a, b), (b, a)] {
                            let start = path.len();
                            let ok = self.flow(s, d, path);
                            if !ok {
                                path.truncate(start);
                            }
                            offs.push(start);
                            delivered.push(ok);
                        }
                    }
                    offs.push(path.len());
                    for &c in path.iter() {
                        loads[c] += 1;
                    }
                    let mut sum = 0.0;
                    let mut unrouted = 0;
                    for (f, &ok) in delivered.iter().enumerate() {
                        if !ok {
                            unrouted += 1;
                            continue;
                        }
                        let worst = path[offs[f]..offs[f + 1]]
                            .iter()
                            .map(|&c| loads[c])
                            .max()
                            .unwrap_or(1)
                            .max(1);
                        sum += 1.0 / worst as f64;
                    }
                    (sum / delivered.len().max(1) as f64, unrouted)
                },
            )
            .collect();
        let samples: Vec<f64> = results.iter().map(|r| r.0).collect();
        Some(Bisection {
            samples: samples.len(),
            flows_per_sample: 2 * half,
            ebb: samples.iter().sum::<f64>() / samples.len() as f64,
            min_sample: samples.iter().copied().fold(f64::INFINITY, f64::min),
            max_sample: samples.iter().copied().fold(0.0, f64::max),
            unrouted_flows: results.iter().map(|r| r.1).sum(),
        })
    }

    fn diversity(&self) -> Option<Diversity> {
        let targets: Vec<DestIdx> = self
            .w
            .sources()
            .iter()
            .copied()
            .filter(|&d| self.topo.dests[d].lmc > 0)
            .collect();
        if targets.is_empty() {
            return None;
        }
        #[derive(Default)]
        struct Sum {
            pairs: u64,
            unrouted: u64,
            paths: u64,
            min: u32,
            disjoint: u64,
        }
        let sum = targets
            .par_iter()
            .map_init(
                || (Vec::new(), Vec::new(), Vec::new(), Vec::new()),
                |(path, offs, idx, all), &d| {
                    let dest = &self.topo.dests[d];
                    let mut s = Sum {
                        min: u32::MAX,
                        ..Sum::default()
                    };
                    for sw in self.w.switch_indices() {
                        let c = self.w.sources_at(sw).len() as u64;
                        if c == 0 || sw == dest.sw {
                            continue;
                        }
                        s.pairs += c;
                        path.clear();
                        offs.clear();
                        for lid in dest.lids() {
                            let start = path.len();
                            if walk_path(
                                self.w,
                                self.routes.into(),
                                &self.topo.dests,
                                sw,
                                lid,
                                d,
                                path,
                            ) {
                                offs.push((start, path.len()));
                            } else {
                                path.truncate(start);
                            }
                        }
                        if offs.is_empty() {
                            s.unrouted += c;
                            continue;
                        }
                        idx.clear();
                        idx.extend(0..offs.len());
                        let seg = |i: usize| &path[offs[i].0..offs[i].1];
                        idx.sort_unstable_by(|&a, &b| seg(a).cmp(seg(b)));
                        let distinct =
                            1 + idx.windows(2).filter(|w| seg(w[0]) != seg(w[1])).count() as u32;
                        s.paths += c * distinct as u64;
                        s.min = s.min.min(distinct);
                        all.clear();
                        all.extend_from_slice(path);
                        all.sort_unstable();
                        // Two LIDs on one path share its links, so this also catches them.
                        if !all.windows(2).any(|w| w[0] == w[1]) {
                            s.disjoint += c;
                        }
                    }
                    s
                },
            )
            .reduce(
                || Sum {
                    min: u32::MAX,
                    ..Sum::default()
                },
                |a, b| Sum {
                    pairs: a.pairs + b.pairs,
                    unrouted: a.unrouted + b.unrouted,
                    paths: a.paths + b.paths,
                    min: a.min.min(b.min),
                    disjoint: a.disjoint + b.disjoint,
                },
            );
        let routed = sum.pairs - sum.unrouted;
        Some(Diversity {
            pairs: sum.pairs,
            unrouted_pairs: sum.unrouted,
            mean_paths: if routed == 0 {
                0.0
            } else {
                sum.paths as f64 / routed as f64
            },
            min_paths: if sum.min == u32::MAX { 0 } else { sum.min },
            disjoint_fraction: if routed == 0 {
                0.0
            } else {
                sum.disjoint as f64 / routed as f64
            },
        })
    }
}
