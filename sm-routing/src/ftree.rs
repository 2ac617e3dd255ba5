//! Fat-tree routing for k-ary n-trees and real 2- to 8-level fat-trees, after OpenSM's
//! `ftree`.
//!
//! # Detecting the tree
//!
//! Compute nodes (CNs) are the CA ports of [`Options::compute_nodes`], or every CA port;
//! the other CAs are I/O nodes. Ranks come from the roots: those of [`Options::roots`]
//! (GUIDs naming no switch are ignored), or else the switches farthest from the leaves (a
//! breadth-first search from them; when every switch is a leaf there is nothing above the
//! leaves and the fabric is not a fat-tree). Leaves are the switches with CAs, compute nodes
//! or not; when that gives no tree that routes every pair (an I/O node on a switch above
//! the leaves), the switches with CNs, so I/O nodes may also hang off upper switches. Ranks
//! are breadth-first distances from the roots, so a link joins adjacent ranks (up/down) or
//! one rank (a sibling link, never used). The leaf rank is the rank of most CNs, which must
//! be the highest rank (with roots given: the rank of the first CN's switch). Every CN must
//! hang off a switch at the leaf rank, the tree must have 2 to 8 levels, every switch must
//! be ranked, and every switch with CAs (CNs or I/O nodes) must reach every destination by
//! going up then down (a common ancestor), so the engine never returns tables that leave a
//! pair unrouted. Any failure declines with [`RouteError::NotApplicable`] naming the switch
//! or CA at fault, so a chain moves on. Unlike OpenSM, trees whose ranks differ in link
//! counts (oversubscribed, pruned pods, uneven parallel links) are routed, not refused, and
//! LMC > 0 is supported (each LID of a port is routed as its own destination, round by
//! round).
//!
//! # Routing
//!
//! Destinations are taken in a fixed order: leaves in tree order (by the lowest GUID of
//! their ancestors at each rank from the top, then their own GUID: on a k-ary n-tree this is
//! the index order), CNs of a leaf by port; then the other CAs; then switches. For each CA
//! destination a *chain* is built upwards from its switch to a root: at each switch the
//! parent whose links carry the fewest destinations downwards so far (ties: lowest GUID),
//! and among parallel links the least loaded one; the counts are updated as we go (the
//! later LIDs of a port with LMC > 0 first avoid the switches of its earlier chains). Every
//! switch then forwards a CA's LID
//! - down along the chain when it is on it,
//! - otherwise up towards the nearest chain switch above it when that gives a shortest
//!   legal path, or down towards the chain's next switch when that is a neighbour,
//! - otherwise, when no chain switch is in reach (a switch only its own traffic passes,
//!   such as a spine outside the chain's core group), on the minimal legal port chosen by
//!   the destination's position in the order, which spreads them without counting;
//! - switch LIDs on the least loaded minimal legal port, as minhop.
//!
//! On a full k-ary n-tree, destination `d`'s chain climbs at level `l` through the up port
//! equal to digit `l` of `d`'s index (least significant first): the `k` CNs of a leaf take
//! the `k` up ports in turn, and each level-2 switch sees the leaves of its subtree in turn,
//! and so on. So every source reaches `d` through the root named by `d`'s low digits, and a
//! shift permutation uses every link at most once.
//!
//! All moves follow the up/down labels of `labels.rs` with ranks as the order and
//! sibling links excluded, so routes are `up* down*` and free of credit loops; the
//! adaptive-routing groups are the minimal legal port sets of those labels.

use sm_core::NodeKind;
use sm_mad::Guid;

use sm_core::idx::{IdxVec, OptIdx};

use crate::fill::{Job, Policy, Tag, fill};
use crate::labels::{DOWN_FLAG, Dirs, Labels, label_masks};
use crate::rank::Detected;
pub use crate::rank::{MAX_LEVELS, Tree, detect_tree as detect};
use crate::routes::{Engine, Options, RouteError, Routes, Rule};
use crate::topo::{Adj, DestIdx, SwIdx, Topo};

/// The engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct FatTree;

fn na(reason: String) -> RouteError {
    RouteError::NotApplicable {
        engine: "ftree",
        reason,
    }
}

impl Engine for FatTree {
    fn name(&self) -> &'static str {
        "ftree"
    }

    fn route(&self, topo: &Topo<'_>, opts: &Options) -> Result<Routes, RouteError> {
        let Detected { tree, dirs, labels } = crate::rank::detect(topo, opts).map_err(na)?;
        let (jobs, chains) = chains(topo, &tree);
        let up = UpLinks::new(topo, &tree.rank);
        let policy = TreePolicy {
            topo,
            tree: &tree,
            labels: &labels,
            dirs: &dirs,
            chains: &chains,
            up: &up,
        };
        let mut routes = fill(self.name(), topo, &policy, &jobs, opts);
        routes.rule = Rule::UpDown {
            rank: tree.rank.clone(),
            tie_by_guid: false,
        };
        Ok(routes)
    }
}

/// One switch of a chain: the switch and its port down towards the chain's next switch.
/// A chain that stops short of the roots (a switch without up links) leaves the slots above
/// it without a switch.
#[derive(Debug, Clone, Copy)]
struct Link {
    sw: OptIdx<SwIdx>,
    port: u8,
}

/// Chains of every CA LID, indexed by rank: `links[off[tag] + r]` is the chain's switch at
/// rank `r` (for ranks below the destination switch's).
struct Chains {
    off: Vec<u32>,
    links: Vec<Link>,
}

impl Chains {
    fn get(&self, tag: Tag) -> &[Link] {
        let t = tag.idx();
        match (self.off.get(t), self.off.get(t + 1)) {
            (Some(&a), Some(&b)) => &self.links[a as usize..b as usize],
            _ => &[],
        }
    }
}

/// Tree order of the leaves: by the lowest GUID among their ancestors at each rank from
/// the top, then their own GUID.
fn leaf_order(topo: &Topo<'_>, tree: &Tree, leaves: &mut [SwIdx]) {
    let n = topo.num_switches();
    let lr = tree.leaf_rank as usize;
    // sig[s * lr + r] = lowest ancestor GUID at rank r (< rank(s)).
    let mut sig = vec![u64::MAX; n * lr];
    let mut order: Vec<SwIdx> = (0..n as u32).map(SwIdx).collect();
    order.sort_by_key(|s| tree.rank[s.idx()]);
    for &sw in &order {
        let s = sw.idx();
        let rs = tree.rank[s] as usize;
        if rs == 0 || rs > lr {
            continue;
        }
        for a in topo.adj(sw) {
            let p = a.peer.idx();
            if tree.rank[p] as usize + 1 != rs {
                continue;
            }
            let g = topo.guid(a.peer).0;
            let slot = &mut sig[s * lr + rs - 1];
            *slot = (*slot).min(g);
            for r in 0..rs - 1 {
                let v = sig[p * lr + r];
                let slot = &mut sig[s * lr + r];
                *slot = (*slot).min(v);
            }
        }
    }
    leaves.sort_by(|a, b| {
        let sa = &sig[a.idx() * lr..(a.idx() + 1) * lr];
        let sb = &sig[b.idx() * lr..(b.idx() + 1) * lr];
        sa.cmp(sb).then(topo.guid(*a).cmp(&topo.guid(*b)))
    });
}

/// The routing order of every LID, and the chains of the CA LIDs.
fn chains(topo: &Topo<'_>, tree: &Tree) -> (Vec<Job>, Chains) {
    let n = topo.num_switches();
    // CN destinations per leaf, by port.
    let mut by_sw: IdxVec<SwIdx, Vec<DestIdx>> = IdxVec::filled(Vec::new(), n);
    for (i, d) in topo.dests.iter_enumerated() {
        if tree.cn[i.idx()] {
            by_sw[d.sw].push(i);
        }
    }
    let mut leaves: Vec<SwIdx> = by_sw
        .iter_enumerated()
        .filter(|(_, cns)| !cns.is_empty())
        .map(|(s, _)| s)
        .collect();
    leaf_order(topo, tree, &mut leaves);
    for &l in &leaves {
        by_sw[l].sort_by_key(|&i| topo.dests[i].sw_port);
    }
    let rounds = topo.dests.iter().map(|d| 1u16 << d.lmc).max().unwrap_or(1);
    let mut order: Vec<(DestIdx, u16)> = Vec::new();
    for o in 0..rounds {
        for &l in &leaves {
            for &i in &by_sw[l] {
                if o < 1u16 << topo.dests[i].lmc {
                    order.push((i, o));
                }
            }
        }
    }
    for (i, d) in topo.dests.iter_enumerated() {
        if !tree.cn[i.idx()] && d.kind != NodeKind::Switch {
            for o in 0..1u16 << d.lmc {
                order.push((i, o));
            }
        }
    }

    // Up groups of every switch: (parent, links), parents by GUID.
    let mut groups: Vec<Vec<(SwIdx, Vec<usize>)>> = vec![Vec::new(); n];
    for (s, g) in groups.iter_mut().enumerate() {
        let s = SwIdx(s as u32);
        for (i, a) in topo.adj(s).iter().enumerate() {
            if tree.rank[a.peer.idx()] + 1 != tree.rank[s.idx()] {
                continue;
            }
            match g.iter_mut().find(|(p, _)| *p == a.peer) {
                Some((_, links)) => links.push(i),
                None => g.push((a.peer, vec![i])),
            }
        }
        g.sort_by_key(|(p, _)| topo.guid(*p));
    }
    // Destinations carried downwards by each link end (on the lower switch).
    let mut adj_off = Vec::with_capacity(n + 1);
    let mut total = 0usize;
    for s in 0..n {
        adj_off.push(total);
        total += topo.adj(SwIdx(s as u32)).len();
    }
    let mut down_load = vec![0u32; total];

    let mut jobs = Vec::with_capacity(topo.max_lid().0 as usize);
    let mut chains = Chains {
        off: vec![0],
        links: Vec::new(),
    };
    // Chains of the earlier LIDs of each port: later LIDs avoid their switches.
    let mut earlier: IdxVec<DestIdx, Vec<Tag>> = IdxVec::filled(Vec::new(), topo.dests.len());
    for &(i, o) in &order {
        let d = &topo.dests[i];
        let start = chains.links.len();
        let mut x = d.sw;
        let r0 = tree.rank[x.idx()] as usize;
        chains.links.resize(
            start + r0,
            Link {
                sw: OptIdx::NONE,
                port: 0,
            },
        );
        while tree.rank[x.idx()] > 0 {
            let base = adj_off[x.idx()];
            let adj = topo.adj(x);
            let r_up = tree.rank[x.idx()] as usize - 1;
            let prev = &earlier[i];
            let best = groups[x.idx()]
                .iter()
                .min_by_key(|(p, links)| {
                    let load: u64 = links.iter().map(|&l| u64::from(down_load[base + l])).sum();
                    let used = prev.iter().any(|&t| {
                        chains
                            .links
                            .get(chains.off[t.idx()] as usize + r_up)
                            .and_then(|l| l.sw.get())
                            == Some(*p)
                    });
                    (used, load, topo.guid(*p))
                })
                .and_then(|(_, links)| {
                    links
                        .iter()
                        .copied()
                        .min_by_key(|&l| (down_load[base + l], adj[l].port))
                });
            let Some(l) = best else { break };
            down_load[base + l] += 1;
            let a = adj[l];
            let r = tree.rank[a.peer.idx()] as usize;
            if let Some(slot) = chains.links.get_mut(start + r) {
                *slot = Link {
                    sw: OptIdx::some(a.peer),
                    port: a.peer_port,
                };
            }
            x = a.peer;
        }
        chains.off.push(chains.links.len() as u32);
        let tag = Tag((chains.off.len() - 2) as u32);
        earlier[i].push(tag);
        jobs.push(Job {
            lid: sm_mad::Lid(d.base_lid.0 + o),
            dest: i,
            tag: OptIdx::some(tag),
        });
    }
    for (i, d) in topo.dests.iter_enumerated() {
        if d.kind == NodeKind::Switch {
            jobs.push(Job {
                lid: d.base_lid,
                dest: i,
                tag: OptIdx::NONE,
            });
        }
    }
    (jobs, chains)
}

const NO_LINK: u8 = 0xFF;
const MANY: u8 = 0xFE;

/// For every switch `s` and every switch `a` above it: the one up link of `s` from which
/// `a` can be reached going up, [`MANY`] when several can, [`NO_LINK`] when `a` is not
/// above `s`. Switch-major.
struct UpLinks {
    n: usize,
    m: Vec<u8>,
}

impl UpLinks {
    fn new(topo: &Topo<'_>, rank: &[u32]) -> UpLinks {
        let n = topo.num_switches();
        let mut m = vec![NO_LINK; n * n];
        crate::par::chunks(
            &mut m,
            n,
            || (vec![u32::MAX; n], Vec::new()),
            |(stamp, queue): &mut (Vec<u32>, Vec<SwIdx>), s, row| {
                let s = SwIdx(s as u32);
                for (i, a) in topo.adj(s).iter().enumerate() {
                    if rank[a.peer.idx()] + 1 != rank[s.idx()] {
                        continue;
                    }
                    // Stamp = this link, so each link's up-cone is walked once.
                    let tag = (s.0 as u64 * 256 + i as u64) as u32;
                    queue.clear();
                    queue.push(a.peer);
                    stamp[a.peer.idx()] = tag;
                    let mut head = 0;
                    while head < queue.len() {
                        let x = queue[head];
                        head += 1;
                        let cell = &mut row[x.idx()];
                        *cell = if *cell == NO_LINK || *cell == i as u8 {
                            i as u8
                        } else {
                            MANY
                        };
                        for b in topo.adj(x) {
                            if rank[b.peer.idx()] + 1 == rank[x.idx()] && stamp[b.peer.idx()] != tag
                            {
                                stamp[b.peer.idx()] = tag;
                                queue.push(b.peer);
                            }
                        }
                    }
                }
            },
        );
        UpLinks { n, m }
    }

    #[inline]
    fn get(&self, s: usize, a: usize) -> u8 {
        self.m[s * self.n + a]
    }
}

struct TreePolicy<'a, 'f> {
    topo: &'a Topo<'f>,
    tree: &'a Tree,
    labels: &'a Labels,
    dirs: &'a Dirs,
    chains: &'a Chains,
    up: &'a UpLinks,
}

fn set_bit(out: &mut [u64; 4], i: usize) {
    if let Some(w) = out.get_mut(i / 64) {
        *w |= 1 << (i % 64);
    }
}

impl Policy for TreePolicy<'_, '_> {
    fn masks(&self, s: SwIdx, words: usize, out: &mut [u64]) {
        label_masks(self.labels, self.dirs, s, words, out);
    }

    fn narrow(
        &self,
        s: SwIdx,
        adj: &[Adj],
        port_adj: &[u8; 256],
        job: &Job,
        tag: Tag,
        mask: &[u64],
        out: &mut [u64; 4],
    ) -> bool {
        let chain = self.chains.get(tag);
        let Some(dest) = self.topo.dests.get(job.dest) else {
            return false;
        };
        let dsw = dest.sw.idx();
        let rs = self.tree.rank[s.idx()] as usize;
        let label = self.labels.get(s.idx(), dsw);
        let mut any = false;
        if label & DOWN_FLAG != 0 {
            // Down: along the chain, or towards its next switch.
            if let Some(l) = chain.get(rs).filter(|l| l.sw.get() == Some(s)) {
                let i = port_adj[l.port as usize] as usize;
                if adj.get(i).is_some_and(|a| a.port == l.port) {
                    set_bit(out, i);
                    return true;
                }
            }
            let next = if rs + 1 == chain.len() {
                Some(dest.sw)
            } else {
                chain.get(rs + 1).and_then(|l| l.sw.get())
            };
            for_bits(mask, |i| {
                if adj.get(i).is_some_and(|a| Some(a.peer) == next) {
                    set_bit(out, i);
                    any = true;
                }
            });
        } else {
            // Up: towards the nearest chain switch above, if that path is a shortest one.
            let rd = self.tree.rank[dsw] as usize;
            for r in (0..rs.min(chain.len())).rev() {
                let Some(a) = chain[r].sw.get() else {
                    continue;
                };
                let a = a.idx();
                let link = self.up.get(s.idx(), a);
                if link == NO_LINK {
                    continue;
                }
                if (rs - r) + (rd - r) != (label & 0x7F) as usize {
                    break;
                }
                if link != MANY {
                    set_bit(out, link as usize);
                    return true;
                }
                for_bits(mask, |i| {
                    if let Some(b) = adj.get(i) {
                        let p = b.peer.idx();
                        if p == a || self.up.get(p, a) != NO_LINK {
                            set_bit(out, i);
                            any = true;
                        }
                    }
                });
                return any;
            }
        }
        if !any {
            // No chain switch in reach (switch-originated traffic only): spread the
            // destinations over the candidates by their order.
            if let Some(i) = spread(mask, tag.0) {
                set_bit(out, i);
                any = true;
            }
        }
        any
    }
}

/// A set bit of `mask` picked by `n`: the first at or after a position that `n` moves
/// evenly over the span of the set bits (wrapping), in the first non-empty word.
#[inline]
fn spread(mask: &[u64], n: u32) -> Option<usize> {
    let (w, &bits) = mask.iter().enumerate().find(|(_, b)| **b != 0)?;
    let lo = bits.trailing_zeros();
    let hi = 63 - bits.leading_zeros();
    let start = lo + n % (hi - lo + 1);
    let above = bits >> start << start;
    let pick = if above != 0 {
        above.trailing_zeros()
    } else {
        lo
    };
    Some(w * 64 + pick as usize)
}

/// Calls `f` with the index of every set bit.
#[inline]
fn for_bits(mask: &[u64], mut f: impl FnMut(usize)) {
    for (w, &m) in mask.iter().enumerate() {
        let mut b = m;
        while b != 0 {
            f(w * 64 + b.trailing_zeros() as usize);
            b &= b - 1;
        }
    }
}

/// Switch GUIDs of a detected tree's top rank (for reports).
pub fn roots(topo: &Topo<'_>, tree: &Tree) -> Vec<Guid> {
    (0..topo.num_switches() as u32)
        .map(SwIdx)
        .filter(|s| tree.rank[s.idx()] == 0)
        .map(|s| topo.guid(s))
        .collect()
}
