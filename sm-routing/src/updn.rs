//! Up/down routing, deadlock-free on any topology.
//!
//! # Roots and ranks
//!
//! Root switches come from [`Options::roots`] (OpenSM's `root_guid_file`; GUIDs that name
//! no switch are ignored, and when none is left the engine declines). Without them they are
//! detected:
//! 1. if the fabric is a tree in the fat-tree engine's sense (every CA on a leaf, all leaves
//!    at one distance from the switches farthest from any CA), the roots are those farthest
//!    switches, the top rank;
//! 2. otherwise as OpenSM does: a switch is a root when one hop count covers more than 90%
//!    of the CAs and no other hop count more than 5% (a spine sees every CA at one
//!    distance);
//! 3. when no switch qualifies (a torus, where every switch sees CAs at every distance),
//!    the most central switch: smallest eccentricity, then smallest total distance to the
//!    CAs, then lowest GUID.
//!
//! Several detected roots can leave a switch with CAs without a legal path to some LID (in
//! a dragonfly+, two spines of different groups joined by nothing at their rank); then the
//! single most central switch is the root instead, with which every pair of a connected
//! fabric has a path (up the breadth-first tree to the root, down it to the destination).
//! Given roots are used as they are.
//!
//! Ranks are breadth-first distances from the roots. A move `s → t` goes *up* when
//! `(rank, GUID)` of `t` is smaller than that of `s`, down otherwise: a total order, so links
//! between switches of one rank (roots included; OpenSM treats root-to-root links as up in
//! both directions) have a direction too. Switches the roots do not reach rank after all
//! others.
//!
//! # Routes
//!
//! `labels.rs` labels every switch towards every destination switch (shortest legal
//! `up* down*` path, with the down phase consistent for destination-based tables, and a
//! per-destination fallback that guarantees every switch with any legal path gets one);
//! `fill.rs` then picks one port per LID among the minimal legal ones with minhop's
//! load balancing. The adaptive-routing groups are those same sets.

use sm_mad::Guid;

use crate::fill::{Policy, fill, jobs_in_dest_order};
use crate::labels::{DOWN, Dirs, Labels, UP, label_masks, unreached_pair};
use crate::rank::{bfs_ranks, shape_from_compute_nodes};
use crate::routes::{Engine, Options, RouteError, Routes, Rule};
use crate::topo::{SwIdx, Topo};

/// The engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct UpDown;

/// How the roots were chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum RootSource {
    /// From [`Options::roots`].
    Given,
    /// The top rank of a fat-tree.
    TreeTop,
    /// OpenSM's hop-count histogram.
    Histogram,
    /// The most central switch.
    Center,
    /// The roots of the tables held before ([`Options::keep_roots`]).
    Kept,
}

/// Roots and ranks of a fabric, as up/down routing sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranking {
    /// Root switches, in switch order.
    pub roots: Vec<SwIdx>,
    /// Rank of every switch (0 = root; `u32::MAX` = not reached from any root).
    pub rank: Vec<u32>,
    pub source: RootSource,
}

impl Engine for UpDown {
    fn name(&self) -> &'static str {
        "updn"
    }

    fn route(&self, topo: &Topo<'_>, opts: &Options) -> Result<Routes, RouteError> {
        let (ranking, dirs, labels) = chosen(topo, opts)?;
        let policy = LabelPolicy {
            labels: &labels,
            dirs: &dirs,
        };
        let jobs = jobs_in_dest_order(topo);
        let mut routes = fill(self.name(), topo, &policy, &jobs, opts);
        routes.rule = Rule::UpDown {
            rank: ranking.rank,
            tie_by_guid: true,
        };
        Ok(routes)
    }
}

/// The ranking the engine routes with (see the module doc: several detected roots that
/// leave pairs without a legal path give way to the most central switch), with its labels.
pub(crate) fn chosen(
    topo: &Topo<'_>,
    opts: &Options,
) -> Result<(Ranking, Dirs, Labels), RouteError> {
    if opts.roots.is_empty()
        && let Some(kept) = kept_ranking(topo, &opts.keep_roots)
    {
        return Ok(kept);
    }
    let ranking = ranking(topo, &opts.roots).map_err(|reason| RouteError::NotApplicable {
        engine: "updn",
        reason,
    })?;
    let (dirs, labels) = label(topo, &ranking);
    if ranking.source != RootSource::Given
        && ranking.roots.len() > 1
        && !ca_switches_reach_all(topo, &labels)
    {
        // Several roots can leave pairs without a legal path (two roots with nothing
        // between them at their rank); one root never does.
        return Ok(rooted(topo, vec![center(topo)], RootSource::Center));
    }
    Ok((ranking, dirs, labels))
}

/// The ranking from the roots the tables were made with, where those still rank the fabric
/// as well as detection would: at least one of them is still a switch here, together they
/// reach every switch with CAs, and every pair of those has a legal path.
fn kept_ranking(topo: &Topo<'_>, keep: &[Guid]) -> Option<(Ranking, Dirs, Labels)> {
    if keep.is_empty() {
        return None;
    }
    let roots = topo.switches_named(keep);
    if roots.is_empty() {
        return None;
    }
    let (ranking, dirs, labels) = rooted(topo, roots, RootSource::Kept);
    ca_switches_reach_all(topo, &labels).then_some((ranking, dirs, labels))
}

/// The ranking from `roots` (breadth-first), with its labels.
fn rooted(topo: &Topo<'_>, roots: Vec<SwIdx>, source: RootSource) -> (Ranking, Dirs, Labels) {
    let rank = bfs_ranks(topo, &roots);
    let ranking = Ranking {
        roots,
        rank,
        source,
    };
    let (dirs, labels) = label(topo, &ranking);
    (ranking, dirs, labels)
}

fn label(topo: &Topo<'_>, ranking: &Ranking) -> (Dirs, Labels) {
    let key = |s: SwIdx| (ranking.rank[s.idx()], topo.guid(s));
    let dirs = Dirs::new(topo, |s, t| if key(t) < key(s) { UP } else { DOWN });
    let labels = Labels::new(&dirs);
    (dirs, labels)
}

/// Every switch with CAs has a legal path to every switch that owns a LID.
pub(crate) fn ca_switches_reach_all(topo: &Topo<'_>, labels: &Labels) -> bool {
    unreached_pair(topo, labels, |d| d.kind != sm_core::NodeKind::Switch).is_none()
}

/// Candidates from up/down labels, no preference.
pub(crate) struct LabelPolicy<'a> {
    pub(crate) labels: &'a Labels,
    pub(crate) dirs: &'a Dirs,
}

impl Policy for LabelPolicy<'_> {
    fn masks(&self, s: SwIdx, words: usize, out: &mut [u64]) {
        label_masks(self.labels, self.dirs, s, words, out);
    }
}

/// Chooses the roots (see the module doc) and ranks every switch.
pub fn ranking(topo: &Topo<'_>, roots: &[Guid]) -> Result<Ranking, String> {
    let (roots, source) = if roots.is_empty() {
        detect_roots(topo)
    } else {
        let found = topo.switches_named(roots);
        if found.is_empty() {
            return Err(format!(
                "none of the {} root GUID(s) names a switch of the fabric",
                roots.len()
            ));
        }
        (found, RootSource::Given)
    };
    let rank = bfs_ranks(topo, &roots);
    Ok(Ranking {
        roots,
        rank,
        source,
    })
}

fn detect_roots(topo: &Topo<'_>) -> (Vec<SwIdx>, RootSource) {
    let n = topo.num_switches();
    if let Ok(tree) = shape_from_compute_nodes(topo, &Options::default()) {
        let roots: Vec<SwIdx> = (0..n as u32)
            .map(SwIdx)
            .filter(|s| tree.rank[s.idx()] == 0)
            .collect();
        if !roots.is_empty() {
            return (roots, RootSource::TreeTop);
        }
    }
    // CAs (and routers) per switch.
    let mut cas = vec![0u32; n];
    let mut total = 0u64;
    for d in &topo.dests {
        if d.kind != sm_core::NodeKind::Switch {
            cas[d.sw.idx()] += 1;
            total += 1;
        }
    }
    let hops = topo.hop_matrix();
    let mut roots = Vec::new();
    for s in (0..n as u32).map(SwIdx) {
        let mut hist = [0u64; 256];
        for (t, &h) in hops.to(s).iter().enumerate() {
            if h != u8::MAX {
                hist[h as usize] += u64::from(cas[t]);
            }
        }
        let over90 = hist.iter().filter(|&&c| c * 10 > total * 9).count();
        let over5 = hist.iter().filter(|&&c| c * 20 > total).count();
        if total > 0 && over90 == 1 && over5 == 1 {
            roots.push(s);
        }
    }
    if !roots.is_empty() {
        return (roots, RootSource::Histogram);
    }
    (vec![center_of(topo, &hops, &cas)], RootSource::Center)
}

/// The most central switch (see the module doc).
fn center(topo: &Topo<'_>) -> SwIdx {
    let mut cas = vec![0u32; topo.num_switches()];
    for d in &topo.dests {
        if d.kind != sm_core::NodeKind::Switch {
            cas[d.sw.idx()] += 1;
        }
    }
    center_of(topo, &topo.hop_matrix(), &cas)
}

fn center_of(topo: &Topo<'_>, hops: &crate::topo::HopMatrix, cas: &[u32]) -> SwIdx {
    let n = topo.num_switches();
    // (switches it does not reach, eccentricity, hop sum, GUID): a switch cut off from
    // the rest (one the SM keeps while it is away) is nobody's centre.
    let mut best: Option<((usize, u8, u64, Guid), SwIdx)> = None;
    for s in (0..n as u32).map(SwIdx) {
        let mut ecc = 0u8;
        let mut sum = 0u64;
        let mut unreached = 0usize;
        for (t, &h) in hops.to(s).iter().enumerate() {
            if h == u8::MAX {
                unreached += 1;
                continue;
            }
            ecc = ecc.max(h);
            // Switches with CAs count once, however many: a host plugged or gone must
            // not move the root (and with it every route) of a fabric that is otherwise
            // the same.
            sum += u64::from(h) * u64::from(cas[t] > 0);
        }
        let key = (unreached, ecc, sum, topo.guid(s));
        if best.is_none_or(|b| key < b.0) {
            best = Some((key, s));
        }
    }
    best.map_or(SwIdx(0), |b| b.1)
}
