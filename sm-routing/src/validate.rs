//! Validation of forwarding tables, ours or another SM's: reachability, forwarding loops,
//! path length against the shortest path, stale routes, and credit loops.
//!
//! Nothing about the tables is assumed: a missing entry, a port beyond the radix, a port
//! with no link, a CA (or router) port used as transit, port 0 of a switch that does not own
//! the LID and forwarding loops are all findings, never panics.
//!
//! # Pairs
//!
//! Sources are the end ports that are not switches (CA ports, and router ports if any),
//! each entering the fabric at the switch it hangs off. Destinations are every LID of every
//! end port: all 2^LMC LIDs of each CA port, and each switch's LID. A pair is (source port,
//! destination LID) with the source not owning the LID; `pairs_checked` counts them, split
//! into CA-to-CA and CA-to-switch pairs. A pair is reachable when walking the tables from
//! the source's switch delivers the packet to the port that owns the LID (through the
//! switch port it hangs off, or port 0 for a switch's own LID).
//! `unreachable_pairs` counts every pair that is not, whatever the cause;
//! `forwarding_loops` counts those among them whose walk revisits a switch.
//!
//! # Algorithm
//!
//! Per destination LID, one memoised walk resolves every switch (delivered after `h`
//! switch-to-switch hops, or died where and how) in O(switches); pairs are then counted per
//! switch with the number of sources hanging off it. LIDs are processed in parallel in
//! blocks of 64; every count is a sum and the failure lists are ordered by LID, so the
//! report does not depend on the number of threads.
//!
//! # Credit loops
//!
//! Channels are the directed switch-to-switch links (one per link direction, so parallel
//! links are distinct channels). For each destination LID, traffic is propagated from the
//! switches that have sources along the tables; a switch `u` carrying it to switch `s`
//! (channel `u->s`), which forwards it to switch `t`, gives the dependency
//! `(u->s) -> (s->t)`. [`ValidateOptions::vl`] gives each pair a virtual lane (default: all
//! on VL 0, the VL being constant along a path, as SL-based spreading with an identity
//! SL-to-VL map gives); one channel dependency graph is built per VL, deduplicated with a
//! 256-bit set of output ports per channel. `credit_loops` is the number of strongly
//! connected components with a cycle (more than one channel, or a channel depending on
//! itself), summed over the VLs: 0 means deadlock-free. One concrete cycle is reported.
//! The components come from an iterative search (`Cdg::sccs`): the graphs of tables with
//! credit loops are too deep for a recursive one.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use sm_core::NodeKind;
use sm_core::dump::NO_ROUTE;
use sm_mad::{Guid, Lid};

use crate::routes::{PathSl, Routes};
use sm_core::idx::{IdxVec, OptIdx};

use crate::topo::{Dest, DestIdx, SwIdx, Topo};
use crate::walk::{BLOCK, Block, ChanIdx, Col, Fate, Tables, Target, Tracer, Wiring};

/// A virtual lane per (source port, destination LID).
pub type VlFn = dyn Fn(&Dest, Lid) -> u8 + Send + Sync;

/// What to check and how much to say.
#[derive(Clone)]
pub struct ValidateOptions {
    /// How many failed pairs (and stale LIDs) to describe; the counts cover them all.
    pub max_failures: usize,
    /// The VL each pair travels on; `None` takes the routes' own SLs (SL `i` on VL `i`),
    /// and puts everything on VL 0 when they have none. Values above 15 count as 15. With a
    /// function, it is called once per (source, LID) pair.
    pub vl: Option<Arc<VlFn>>,
    /// Build the channel dependency graphs and look for credit loops.
    pub credit_loops: bool,
}

impl Default for ValidateOptions {
    fn default() -> Self {
        ValidateOptions {
            max_failures: 20,
            vl: None,
            credit_loops: true,
        }
    }
}

impl fmt::Debug for ValidateOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValidateOptions")
            .field("max_failures", &self.max_failures)
            .field("vl", &self.vl.as_ref().map(|_| "fn"))
            .field("credit_loops", &self.credit_loops)
            .finish()
    }
}

/// One pair that was not delivered.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Failure {
    /// The source port's GUID.
    pub source: Guid,
    /// The destination LID.
    pub lid: Lid,
    /// The port owning the LID.
    pub dest: Guid,
    /// How the walk ended.
    pub fate: Fate,
    /// The switch where it ended (for a loop: a switch of the loop, reached after `hops`).
    pub switch: Guid,
    /// That switch's description.
    pub switch_desc: String,
    /// Its entry for the LID ([`NO_ROUTE`] = none).
    pub port: u8,
    /// For [`Fate::WrongEndPort`]: the end port the entry leads to.
    pub reached: Option<Guid>,
    /// Switch-to-switch links walked from the source's switch to `switch`.
    pub hops: u32,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} -> LID {} ({}): {} at switch {} ('{}')",
            self.source,
            self.lid,
            self.dest,
            self.fate.describe(),
            self.switch,
            self.switch_desc
        )?;
        if self.port != NO_ROUTE {
            write!(f, " port {}", self.port)?;
        }
        if let Some(r) = self.reached {
            write!(f, " (reaches {r})")?;
        }
        write!(f, " after {} switch hop(s)", self.hops)
    }
}

/// Where walks towards a stale LID end.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct DeadEnd {
    pub fate: Fate,
    pub switch: Guid,
    pub switch_desc: String,
    pub port: u8,
    /// For [`Fate::WrongEndPort`]: the end port the entry leads to.
    pub reached: Option<Guid>,
}

/// A LID that no switch-attached port of the snapshot holds, yet some switch routes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StaleLid {
    pub lid: Lid,
    /// Switches with an entry for it.
    pub switches: u32,
    /// Where the walks from those switches end (distinct, sorted).
    pub ends: Vec<DeadEnd>,
}

/// Pairs per fate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FateCounts {
    pub delivered: u64,
    pub no_entry: u64,
    pub bad_port: u64,
    pub not_cabled: u64,
    pub wrong_end_port: u64,
    pub not_owner: u64,
    pub forwarding_loop: u64,
}

impl FateCounts {
    fn from_array(a: [u64; 7]) -> FateCounts {
        FateCounts {
            delivered: a[0],
            no_entry: a[1],
            bad_port: a[2],
            not_cabled: a[3],
            wrong_end_port: a[4],
            not_owner: a[5],
            forwarding_loop: a[6],
        }
    }
}

/// A switch port: one end of a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SwitchPort {
    pub guid: Guid,
    pub port: u8,
}

/// A channel: a directed switch-to-switch link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Channel {
    pub from: SwitchPort,
    pub to: SwitchPort,
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} -> {}/{}",
            self.from.guid, self.from.port, self.to.guid, self.to.port
        )
    }
}

/// The channel dependency graph of one VL.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VlGraph {
    pub vl: u8,
    /// Channels with at least one dependency (in or out).
    pub channels: u64,
    /// Distinct dependencies.
    pub dependencies: u64,
    /// Strongly connected components containing a cycle.
    pub cyclic_sccs: u64,
    /// Channels in the largest of them (0 when none).
    pub largest_scc: u64,
}

/// One cycle of a channel dependency graph: each channel waits on the next, the last on
/// the first.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CreditLoop {
    pub vl: u8,
    pub channels: Vec<Channel>,
}

impl fmt::Display for CreditLoop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VL {}: ", self.vl)?;
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                f.write_str(" => ")?;
            }
            write!(f, "[{c}]")?;
        }
        Ok(())
    }
}

/// The verdict.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Validation {
    /// The engine that made the tables.
    pub engine: String,
    pub switches: usize,
    /// Source ports (CA and router ports hanging off a switch).
    pub sources: usize,
    /// Destination LIDs (every LID of every end port).
    pub lids: usize,
    /// End ports with LIDs but no switch to reach them through (not checked).
    pub isolated_ports: usize,
    pub pairs_checked: u64,
    pub ca_to_ca_pairs: u64,
    pub ca_to_switch_pairs: u64,
    pub unreachable_pairs: u64,
    /// Of the unreachable pairs, CA-to-switch pairs whose walk ends at a switch with no
    /// entry for the switch's LID. Under up*/down* ranks ([`Rule::UpDown`]) a degraded
    /// tree can leave a switch's LID without a legal path from some switches: that LID
    /// carries only management traffic, and OpenSM leaves such pairs too. They do not fail
    /// the verdict of tables that declare such ranks (`ranked`).
    pub unrouted_switch_pairs: u64,
    /// The tables follow up*/down* ranks: unrouted switch pairs are expected (known only
    /// of tables routed here, not of tables read from a file).
    #[serde(skip)]
    pub ranked: bool,
    /// Unreachable pairs whose walk revisits a switch.
    pub forwarding_loops: u64,
    pub by_fate: FateCounts,
    /// The first `max_failures` failed pairs, by LID, then by the source's switch.
    pub failures: Vec<Failure>,
    /// Delivered pairs whose switch-to-switch hops exceed the shortest distance.
    pub non_minimal_pairs: u64,
    /// Most extra switch-to-switch hops of a delivered pair over its shortest path.
    pub max_extra_hops: u32,
    /// Largest ratio of links walked to links on a shortest path (end-to-end, CA links
    /// included), over delivered pairs; 1.0 when every route is minimal.
    pub max_stretch: f64,
    /// LIDs some switch routes although no port of the snapshot holds them (left-overs of
    /// ports that left the fabric; ports cut off from every switch count as absent): the
    /// first `max_failures`.
    pub stale_lids: Vec<StaleLid>,
    /// Number of such LIDs.
    pub stale_lid_count: u64,
    /// Whether the channel dependency graphs were built.
    pub credit_loops_checked: bool,
    /// Cyclic strongly connected components over all VLs' dependency graphs (0 = free of
    /// credit loops).
    pub credit_loops: u64,
    /// Per VL that carries traffic.
    pub vls: Vec<VlGraph>,
    /// One cycle, from the lowest VL that has one.
    pub credit_loop: Option<CreditLoop>,
}

impl Validation {
    /// Every pair reachable (but switches' LIDs the ranks leave unrouted), no stale routes,
    /// no credit loop.
    pub fn is_valid(&self) -> bool {
        self.unreachable_pairs == self.excused_pairs()
            && self.stale_lid_count == 0
            && self.credit_loops == 0
    }

    /// Unreachable pairs that do not fail the verdict: switch LIDs up*/down* ranks leave
    /// without a legal path.
    pub fn excused_pairs(&self) -> u64 {
        if self.ranked {
            self.unrouted_switch_pairs
        } else {
            0
        }
    }
}

impl fmt::Display for Validation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "validation of {} tables: {}",
            self.engine,
            if self.is_valid() { "VALID" } else { "INVALID" }
        )?;
        writeln!(
            f,
            "  {} switches, {} source ports, {} LIDs, {} pairs ({} CA-to-CA, {} CA-to-switch)",
            self.switches,
            self.sources,
            self.lids,
            self.pairs_checked,
            self.ca_to_ca_pairs,
            self.ca_to_switch_pairs
        )?;
        writeln!(
            f,
            "  unreachable pairs: {} (forwarding loops: {})",
            self.unreachable_pairs, self.forwarding_loops
        )?;
        for x in &self.failures {
            writeln!(f, "    {x}")?;
        }
        if (self.failures.len() as u64) < self.unreachable_pairs {
            writeln!(
                f,
                "    ... {} more",
                self.unreachable_pairs - self.failures.len() as u64
            )?;
        }
        writeln!(
            f,
            "  non-minimal pairs: {} (max extra hops {}, max stretch {:.3})",
            self.non_minimal_pairs, self.max_extra_hops, self.max_stretch
        )?;
        writeln!(f, "  stale LIDs: {}", self.stale_lid_count)?;
        for s in &self.stale_lids {
            write!(f, "    LID {}: routed by {} switch(es);", s.lid, s.switches)?;
            for e in &s.ends {
                write!(
                    f,
                    " {} at {} ('{}') port {};",
                    e.fate.describe(),
                    e.switch,
                    e.switch_desc,
                    e.port
                )?;
            }
            writeln!(f)?;
        }
        if self.credit_loops_checked {
            writeln!(f, "  credit loops: {}", self.credit_loops)?;
            for g in &self.vls {
                writeln!(
                    f,
                    "    VL {}: {} channels, {} dependencies, {} cyclic SCC(s), largest {}",
                    g.vl, g.channels, g.dependencies, g.cyclic_sccs, g.largest_scc
                )?;
            }
            if let Some(c) = &self.credit_loop {
                writeln!(f, "    cycle on {c}")?;
            }
        }
        if self.isolated_ports > 0 {
            writeln!(
                f,
                "  isolated end ports (not checked): {}",
                self.isolated_ports
            )?;
        }
        Ok(())
    }
}

/// Per-range accumulator of the parallel pass.
#[derive(Debug, Default)]
struct Acc {
    fates: [u64; 7],
    ca_pairs: u64,
    sw_pairs: u64,
    sw_no_entry: u64,
    non_minimal: u64,
    max_extra: u32,
    max_stretch: f64,
    failures: Vec<Failure>,
    stale: Vec<StaleLid>,
    stale_count: u64,
}

impl Acc {
    fn merge(mut self, o: Acc, max: usize) -> Acc {
        for (a, b) in self.fates.iter_mut().zip(o.fates) {
            *a += b;
        }
        self.ca_pairs += o.ca_pairs;
        self.sw_pairs += o.sw_pairs;
        self.sw_no_entry += o.sw_no_entry;
        self.non_minimal += o.non_minimal;
        self.max_extra = self.max_extra.max(o.max_extra);
        self.max_stretch = self.max_stretch.max(o.max_stretch);
        self.failures.extend(o.failures);
        self.failures.sort_by_key(|x| x.lid);
        self.failures.truncate(max);
        self.stale.extend(o.stale);
        self.stale.sort_by_key(|x| x.lid);
        self.stale.truncate(max);
        self.stale_count += o.stale_count;
        self
    }
}

/// Per-thread buffers.
#[derive(Debug, Default)]
struct Scratch {
    block: Block,
    work: Work,
}

/// Per-thread buffers of one LID.
#[derive(Debug, Default)]
struct Work {
    tracer: Tracer,
    /// Per switch: VLs of the traffic passing it (only with a VL function).
    through: IdxVec<SwIdx, u16>,
    starts: Vec<SwIdx>,
}

/// Sets the dependency of channel `c` on the channel leaving its head through `port`.
#[inline]
fn mark(w: &Wiring, set: &DepSets, c: ChanIdx, port: u8) {
    let words = w.dep_words(c);
    let Some(word) = set.get(words.start + port as usize / 64) else {
        return;
    };
    let bit = 1u64 << (port % 64);
    if word.load(Ordering::Relaxed) & bit == 0 {
        word.fetch_or(bit, Ordering::Relaxed);
    }
}

/// Dependency bit sets of one VL: per channel, a bit per port of its head switch (laid out
/// by [`Wiring::dep_words`]).
type DepSets = Box<[AtomicU64]>;

struct Ctx<'a, 't> {
    topo: &'a Topo<'t>,
    tables: Tables<'a>,
    w: &'a Wiring,
    hops: &'a crate::topo::HopMatrix,
    opts: &'a ValidateOptions,
    /// VLs that carry traffic (bit per VL).
    used: AtomicU32,
    deps: [OnceLock<DepSets>; 16],
}

/// One past the highest LID to check: every LID a table or the fabric knows.
fn lid_top(topo: &Topo<'_>, tables: Tables<'_>) -> usize {
    tables
        .max_len()
        .max(topo.lid_dest.len())
        .min(Lid::MAX_UNICAST.0 as usize + 1)
}

/// Validates `routes` on `topo`.
pub fn validate(topo: &Topo<'_>, routes: &Routes, opts: &ValidateOptions) -> Validation {
    let mut v = validate_tables(topo, routes.into(), routes.sl.as_ref(), routes.engine, opts);
    v.ranked = matches!(routes.rule, crate::routes::Rule::UpDown { .. });
    v
}

/// Validates forwarding tables on `topo`, with the SLs of their paths where they have
/// them; `engine` names what made them in the report.
pub fn validate_tables(
    topo: &Topo<'_>,
    tables: Tables<'_>,
    sl: Option<&Arc<PathSl>>,
    engine: &str,
    opts: &ValidateOptions,
) -> Validation {
    let w = Wiring::new(topo);
    let hops = topo.hop_matrix();
    let n = w.switches();
    let top = lid_top(topo, tables);
    let own;
    let opts = match (&opts.vl, sl) {
        (None, Some(sl)) => {
            let sl = Arc::clone(sl);
            own = ValidateOptions {
                vl: Some(Arc::new(move |src: &Dest, lid| sl.get(src.sw, lid))),
                ..opts.clone()
            };
            &own
        }
        _ => opts,
    };
    let ctx = Ctx {
        topo,
        tables,
        w: &w,
        hops: &hops,
        opts,
        used: AtomicU32::new(0),
        deps: Default::default(),
    };
    let acc = ctx.walk(top);
    let (vls, credit_loop) = if opts.credit_loops {
        ctx.cdg_report()
    } else {
        (Vec::new(), None)
    };
    let unreachable: u64 = acc.fates[1..].iter().sum();
    Validation {
        engine: engine.to_string(),
        switches: n,
        sources: w.sources().len(),
        lids: topo.dests.iter().map(|d| 1usize << d.lmc).sum::<usize>(),
        isolated_ports: topo.isolated.len(),
        pairs_checked: acc.ca_pairs + acc.sw_pairs,
        ca_to_ca_pairs: acc.ca_pairs,
        ca_to_switch_pairs: acc.sw_pairs,
        unreachable_pairs: unreachable,
        unrouted_switch_pairs: acc.sw_no_entry,
        ranked: false,
        forwarding_loops: acc.fates[6],
        by_fate: FateCounts::from_array(acc.fates),
        failures: acc.failures,
        non_minimal_pairs: acc.non_minimal,
        max_extra_hops: acc.max_extra,
        max_stretch: if acc.fates[0] > 0 {
            acc.max_stretch.max(1.0)
        } else {
            0.0
        },
        stale_lids: acc.stale,
        stale_lid_count: acc.stale_count,
        credit_loops_checked: opts.credit_loops,
        credit_loops: vls.iter().map(|g| g.cyclic_sccs).sum(),
        vls,
        credit_loop,
    }
}

impl<'a> Ctx<'a, '_> {
    /// Walks every LID below `top` (and fills the dependency sets).
    fn walk(&self, top: usize) -> Acc {
        let max = self.opts.max_failures;
        let blocks: Vec<usize> = (0..top.div_ceil(BLOCK)).collect();
        blocks
            .par_iter()
            .fold(
                || (Acc::default(), Scratch::default()),
                |(mut acc, mut sc), &b| {
                    self.block(b * BLOCK, top, &mut acc, &mut sc);
                    (acc, sc)
                },
            )
            .map(|(acc, _)| acc)
            .reduce(Acc::default, |a, b| a.merge(b, max))
    }

    fn desc(&self, s: SwIdx) -> String {
        let node = self.topo.switches[s.idx()];
        self.topo.fabric.node(node).description.clone()
    }

    fn reached(&self, s: SwIdx, port: u8) -> Option<Guid> {
        match self.w.target(s, port) {
            Some(Target::End { dest }) => self.topo.dests.get(dest).map(|d| d.guid),
            _ => None,
        }
    }

    /// LIDs `first .. first + 64` (below `top`).
    fn block(&self, first: usize, top: usize, acc: &mut Acc, sc: &mut Scratch) {
        let Scratch { block, work } = sc;
        block.load(self.tables, self.w.switches(), first);
        for j in 0..BLOCK.min(top - first) {
            let lid = first + j;
            if lid == 0 {
                continue;
            }
            let col = block.col(j);
            match self.topo.lid_dest.get(lid).and_then(|d| d.get()) {
                Some(d) => self.owned(d, col, acc, work),
                None => self.stale(col, acc, work),
            }
        }
    }

    /// A LID held by `dests[d]`: count its pairs, describe failures, collect dependencies.
    fn owned(&self, d: DestIdx, col: Col<'_>, acc: &mut Acc, sc: &mut Work) {
        let dests = &self.topo.dests;
        let dest = &dests[d];
        let lid = col.lid();
        let w = self.w;
        sc.tracer.run(
            w,
            dests,
            Some(d),
            col,
            w.source_switches(),
            w.skip_for(dests, d),
        );
        let to_ca = dest.kind != NodeKind::Switch;
        let dist = self.hops.to(dest.sw);
        let end_links = if to_ca { 2 } else { 1 };
        for &s in w.source_switches() {
            let srcs = w.sources_at(s);
            let mut count = srcs.len() as u64;
            if to_ca && dest.sw == s {
                count -= 1; // the destination itself
            }
            if count == 0 {
                continue;
            }
            if to_ca {
                acc.ca_pairs += count;
            } else {
                acc.sw_pairs += count;
            }
            let step = sc.tracer.steps[s];
            acc.fates[step.fate as usize] += count;
            if !to_ca && step.fate == Fate::NoEntry {
                acc.sw_no_entry += count;
            }
            if step.fate == Fate::Delivered {
                let best = dist[s.idx()] as u32;
                if step.hops > best {
                    acc.non_minimal += count;
                    acc.max_extra = acc.max_extra.max(step.hops - best);
                    let stretch = (step.hops + end_links) as f64 / (best + end_links).max(1) as f64;
                    acc.max_stretch = acc.max_stretch.max(stretch);
                }
                continue;
            }
            for &src in srcs {
                if acc.failures.len() >= self.opts.max_failures {
                    break;
                }
                if src == d {
                    continue;
                }
                acc.failures.push(Failure {
                    source: dests[src].guid,
                    lid,
                    dest: dest.guid,
                    fate: step.fate,
                    switch: self.topo.guid(step.at),
                    switch_desc: self.desc(step.at),
                    port: step.port,
                    reached: if step.fate == Fate::WrongEndPort {
                        self.reached(step.at, step.port)
                    } else {
                        None
                    },
                    hops: step.hops,
                });
            }
        }
        if self.opts.credit_loops {
            self.dependencies(d, lid, sc);
        }
    }

    /// Marks the dependencies the traffic to one LID creates. Every switch the trace
    /// visited carries traffic of some source (walks start only at switches with sources).
    fn dependencies(&self, d: DestIdx, lid: Lid, sc: &mut Work) {
        let w = self.w;
        let steps = &sc.tracer.steps;
        let Some(f) = &self.opts.vl else {
            // Everything on VL 0.
            if sc.tracer.visited.is_empty() {
                return;
            }
            if self.used.load(Ordering::Relaxed) & 1 == 0 {
                self.used.fetch_or(1, Ordering::Relaxed);
            }
            let set = self.dep_set(0);
            for &s in &sc.tracer.visited {
                let Some(c1) = steps[s].chan.get() else {
                    continue;
                };
                if let Some(c2) = steps[w.head(c1)].chan.get() {
                    mark(w, set, c1, w.tail_port(c2));
                }
            }
            return;
        };
        // Per VL: each source switch's VLs, pushed down the channels (only new bits).
        if sc.through.len() != w.switches() {
            sc.through = IdxVec::filled(0, w.switches());
        }
        for &s in &sc.tracer.visited {
            sc.through[s] = 0;
        }
        let mut all = 0u16;
        for &s in w.source_switches() {
            let mut own = 0u16;
            for &src in w.sources_at(s) {
                if src != d {
                    own |= 1 << f(&self.topo.dests[src], lid).min(15);
                }
            }
            all |= own;
            let (mut cur, mut add) = (s, own & !sc.through[s]);
            while add != 0 {
                sc.through[cur] |= add;
                let Some(c) = steps[cur].chan.get() else {
                    break;
                };
                cur = w.head(c);
                add &= !sc.through[cur];
            }
        }
        if self.used.load(Ordering::Relaxed) & all as u32 != all as u32 {
            self.used.fetch_or(all as u32, Ordering::Relaxed);
        }
        for &s in &sc.tracer.visited {
            let Some(c1) = steps[s].chan.get() else {
                continue;
            };
            let Some(c2) = steps[w.head(c1)].chan.get() else {
                continue;
            };
            let mut v = sc.through[s];
            while v != 0 {
                let vl = v.trailing_zeros() as usize;
                v &= v - 1;
                mark(w, self.dep_set(vl), c1, w.tail_port(c2));
            }
        }
    }

    /// The dependency sets of a VL, allocated on first use.
    fn dep_set(&self, vl: usize) -> &DepSets {
        self.deps[vl].get_or_init(|| (0..self.w.dep_len()).map(|_| AtomicU64::new(0)).collect())
    }

    /// A LID nobody holds: report it when some switch routes it.
    fn stale(&self, col: Col<'_>, acc: &mut Acc, sc: &mut Work) {
        sc.starts.clear();
        sc.starts
            .extend(self.w.switch_indices().filter(|&s| col.port(s) != NO_ROUTE));
        if sc.starts.is_empty() {
            return;
        }
        acc.stale_count += 1;
        if acc.stale.len() >= self.opts.max_failures {
            return;
        }
        sc.tracer
            .run(self.w, &self.topo.dests, None, col, &sc.starts, None);
        let mut ends: Vec<(Fate, SwIdx, u8)> = sc
            .starts
            .iter()
            .map(|&s| {
                let st = sc.tracer.steps[s];
                (st.fate, st.at, st.port)
            })
            .collect();
        ends.sort_unstable();
        ends.dedup();
        ends.truncate(self.opts.max_failures.max(1));
        acc.stale.push(StaleLid {
            lid: col.lid(),
            switches: sc.starts.len() as u32,
            ends: ends
                .into_iter()
                .map(|(fate, at, port)| DeadEnd {
                    fate,
                    switch: self.topo.guid(at),
                    switch_desc: self.desc(at),
                    port,
                    reached: if fate == Fate::WrongEndPort {
                        self.reached(at, port)
                    } else {
                        None
                    },
                })
                .collect(),
        });
    }

    /// The channel dependency graph of every VL that carries traffic (`None`: no
    /// dependency at all on it).
    fn cdgs(&self) -> Vec<(u8, Option<Cdg<'a>>)> {
        let used = self.used.load(Ordering::Relaxed);
        (0..16u8)
            .filter(|&vl| used & 1 << vl != 0)
            .map(|vl| {
                let g = self.deps[vl as usize].get().map(|sets| Cdg {
                    w: self.w,
                    bits: sets.iter().map(|x| x.load(Ordering::Relaxed)).collect(),
                });
                (vl, g)
            })
            .collect()
    }

    /// Strongly connected components of every VL's graph, and one cycle.
    fn cdg_report(&self) -> (Vec<VlGraph>, Option<CreditLoop>) {
        let results: Vec<(VlGraph, Option<CreditLoop>)> = self
            .cdgs()
            .par_iter()
            .map(|(vl, g)| match g {
                Some(g) => g.analyse(self.topo, *vl),
                None => {
                    let empty = VlGraph {
                        vl: *vl,
                        channels: 0,
                        dependencies: 0,
                        cyclic_sccs: 0,
                        largest_scc: 0,
                    };
                    (empty, None)
                }
            })
            .collect();
        let mut example = None;
        let mut out = Vec::with_capacity(results.len());
        for (g, c) in results {
            if example.is_none() {
                example = c;
            }
            out.push(g);
        }
        (out, example)
    }
}

/// In [`Sccs::comp`]: a channel without any dependency, either way. Component numbers
/// count down from below it.
const NO_COMP: u32 = u32::MAX;

/// What [`Cdg::sccs`] finds.
#[derive(Debug, PartialEq, Eq)]
struct Sccs {
    /// Component number of every channel ([`NO_COMP`] for a channel without any
    /// dependency, either way).
    comp: IdxVec<ChanIdx, u32>,
    /// Components with a cycle: more than one channel, or a channel depending on itself.
    cyclic: u64,
    /// Channels in the largest of those.
    largest: u64,
    /// The lowest channel of any of those.
    first_cyclic: Option<ChanIdx>,
}

/// One VL's channel dependency graph: successors of channel `c` are the channels leaving
/// its head switch through the ports set in its words of `bits` ([`Wiring::dep_words`]).
struct Cdg<'a> {
    w: &'a Wiring,
    bits: Vec<u64>,
}

impl Cdg<'_> {
    /// Number of channels.
    fn len(&self) -> usize {
        self.w.chans.len()
    }

    /// Whether channel `c` depends on anything.
    fn has_out(&self, c: ChanIdx) -> bool {
        self.bits[self.w.dep_words(c)].iter().any(|&x| x != 0)
    }

    /// The first successor of `c` at or after output port `from` (as port, channel).
    fn next_succ(&self, c: ChanIdx, from: u16) -> Option<(u16, ChanIdx)> {
        let set = &self.bits[self.w.dep_words(c)];
        let head = self.w.head(c);
        let mut p = from as usize;
        while p < set.len() * 64 {
            let word = set[p / 64] >> (p % 64);
            if word == 0 {
                p = (p / 64 + 1) * 64;
                continue;
            }
            p += word.trailing_zeros() as usize;
            if let Some(s) = self.w.chan_at(head, p as u8) {
                return Some((p as u16, s));
            }
            p += 1;
        }
        None
    }

    fn analyse(&self, topo: &Topo<'_>, vl: u8) -> (VlGraph, Option<CreditLoop>) {
        let (channels, dependencies) = self.counts();
        let sccs = self.sccs();
        let example = sccs
            .first_cyclic
            .and_then(|c| self.cycle_through(c, &sccs.comp, topo, vl));
        (
            VlGraph {
                vl,
                channels,
                dependencies,
                cyclic_sccs: sccs.cyclic,
                largest_scc: sccs.largest,
            },
            example,
        )
    }

    /// Channels with a dependency either way, and dependencies.
    fn counts(&self) -> (u64, u64) {
        let mut has_in = IdxVec::filled(false, self.len());
        let mut dependencies = 0u64;
        for c in self.w.chans.indices() {
            let mut p = 0u16;
            while let Some((q, s)) = self.next_succ(c, p) {
                dependencies += 1;
                has_in[s] = true;
                p = q + 1;
            }
        }
        let channels = self
            .w
            .chans
            .indices()
            .filter(|&c| has_in[c] || self.has_out(c))
            .count() as u64;
        (channels, dependencies)
    }

    /// Strongly connected components by Pearce's variant of Tarjan's algorithm (one number
    /// per channel instead of Tarjan's index, low link and stack flag), iterative: the
    /// depth-first search keeps its path in a vector, as deep as the graph makes it.
    /// (petgraph's `TarjanScc` is the same algorithm but recurses once per channel on the
    /// path, and on a torus with credit loops that path is tens of thousands of channels
    /// long: a stack overflow. Its iterative Kosaraju needs the reversed graph and two
    /// passes and is twice as slow; docs/PERFORMANCE.md has the figures, and the tests check
    /// this against both.)
    fn sccs(&self) -> Sccs {
        // 0: not visited yet. Then the visit number, lowered to the lowest one the channel
        // reaches while its component is open. Then the component's number, counted down
        // from below `NO_COMP`, so above every visit number.
        let mut num: IdxVec<ChanIdx, u32> = IdxVec::filled(0, self.len());
        // Visited channels whose component is not complete, in visit order.
        let mut open: Vec<ChanIdx> = Vec::new();
        // The search's path: (channel, next port to try, no lower number reached yet).
        let mut path: Vec<(ChanIdx, u16, bool)> = Vec::new();
        let mut next_visit = 1u32;
        let mut next_comp = NO_COMP - 1;
        let (mut cyclic, mut largest) = (0u64, 0u64);
        let mut first_cyclic: Option<ChanIdx> = None;
        for start in self.w.chans.indices() {
            if num[start] != 0 || !self.has_out(start) {
                continue;
            }
            num[start] = next_visit;
            next_visit += 1;
            path.push((start, 0, true));
            'path: while let Some(&(v, mut from, mut root)) = path.last() {
                // The successors not tried yet, with v's number kept at hand.
                let mut low = num[v];
                while let Some((p, w)) = self.next_succ(v, from) {
                    from = p + 1;
                    let nw = num[w];
                    if nw == 0 {
                        num[v] = low;
                        if let Some(top) = path.last_mut() {
                            *top = (v, from, root);
                        }
                        num[w] = next_visit;
                        next_visit += 1;
                        path.push((w, 0, true));
                        continue 'path;
                    }
                    if nw < low {
                        low = nw;
                        root = false;
                    }
                }
                num[v] = low;
                path.pop();
                if root {
                    // `v` and the open channels visited after it are a component.
                    let mut size = 1u64;
                    let mut min_c = v;
                    while let Some(&w) = open.last() {
                        if num[w] < low {
                            break;
                        }
                        open.pop();
                        num[w] = next_comp;
                        size += 1;
                        min_c = min_c.min(w);
                    }
                    num[v] = next_comp;
                    next_comp -= 1;
                    if size > 1 || self.succ_contains(v, v) {
                        cyclic += 1;
                        largest = largest.max(size);
                        if first_cyclic.is_none_or(|c| min_c < c) {
                            first_cyclic = Some(min_c);
                        }
                    }
                } else {
                    open.push(v);
                }
                if let Some(&mut (u, _, ref mut u_root)) = path.last_mut() {
                    if num[v] < num[u] {
                        num[u] = num[v];
                        *u_root = false;
                    }
                }
            }
        }
        for n in num.iter_mut() {
            if *n == 0 {
                *n = NO_COMP;
            }
        }
        Sccs {
            comp: num,
            cyclic,
            largest,
            first_cyclic,
        }
    }

    fn succ_contains(&self, c: ChanIdx, target: ChanIdx) -> bool {
        let mut p = 0u16;
        while let Some((q, s)) = self.next_succ(c, p) {
            if s == target {
                return true;
            }
            p = q + 1;
        }
        false
    }

    /// The shortest cycle through `start` inside its component, by breadth-first search.
    fn cycle_through(
        &self,
        start: ChanIdx,
        comp: &IdxVec<ChanIdx, u32>,
        topo: &Topo<'_>,
        vl: u8,
    ) -> Option<CreditLoop> {
        let mut parent: IdxVec<ChanIdx, OptIdx<ChanIdx>> = IdxVec::filled(OptIdx::NONE, self.len());
        let mut queue = vec![start];
        let mut head = 0;
        let mut last = None;
        'bfs: while head < queue.len() {
            let v = queue[head];
            head += 1;
            let mut p = 0u16;
            while let Some((q, s)) = self.next_succ(v, p) {
                p = q + 1;
                if s == start {
                    last = Some(v);
                    break 'bfs;
                }
                if comp[s] == comp[start] && parent[s].is_none() {
                    parent[s] = OptIdx::some(v);
                    queue.push(s);
                }
            }
        }
        let mut v = last?;
        let mut cycle = vec![v];
        while v != start {
            v = parent[v].get()?;
            cycle.push(v);
        }
        cycle.reverse();
        Some(CreditLoop {
            vl,
            channels: cycle
                .into_iter()
                .map(|c| {
                    let (a, ap, b, bp) = self.w.chan_ends(topo, c);
                    Channel {
                        from: SwitchPort { guid: a, port: ap },
                        to: SwitchPort { guid: b, port: bp },
                    }
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests;
