//! Ranks of switches: breadth-first distances from a set of roots, and the fat-tree shape
//! (roots farthest from the leaves, every compute node on the leaf rank, every pair
//! reachable up then down). `ftree` routes on that shape; `updn` takes the shape the compute
//! nodes give for its roots when the fabric has it, and ranks from its own roots otherwise.
//! Both then order switches by rank.

use sm_core::NodeKind;

use crate::labels::{DOWN, Dirs, Labels, NEVER, UP, unreached_pair_of};
use crate::routes::Options;
use crate::topo::{Dest, SwIdx, Topo};

/// Most switch levels handled (OpenSM's limit).
pub const MAX_LEVELS: u32 = 8;

/// A detected fat-tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// Rank of every switch, 0 = root.
    pub rank: Vec<u32>,
    /// The rank of the leaves.
    pub leaf_rank: u32,
    /// Per destination (index into [`Topo::dests`]): a compute node.
    pub cn: Vec<bool>,
}

/// Breadth-first distances from a set of switches (`u32::MAX` = unreached).
pub(crate) fn bfs_ranks(topo: &Topo<'_>, from: &[SwIdx]) -> Vec<u32> {
    let mut rank = vec![u32::MAX; topo.num_switches()];
    let mut queue: Vec<SwIdx> = Vec::with_capacity(topo.num_switches());
    for &r in from {
        if rank[r.idx()] == u32::MAX {
            rank[r.idx()] = 0;
            queue.push(r);
        }
    }
    let mut head = 0;
    while head < queue.len() {
        let s = queue[head];
        head += 1;
        let next = rank[s.idx()] + 1;
        for a in topo.adj(s) {
            if rank[a.peer.idx()] == u32::MAX {
                rank[a.peer.idx()] = next;
                queue.push(a.peer);
            }
        }
    }
    rank
}

/// A switch as error messages name it: GUID and description.
pub(crate) fn sw_name(topo: &Topo<'_>, s: SwIdx) -> String {
    let n = topo.fabric.node(topo.switches[s.idx()]);
    format!("{} ('{}')", n.guid, n.description)
}

/// A detected fat-tree with the directions and up/down labels `ftree` routes by.
#[derive(Debug)]
pub(crate) struct Detected {
    pub(crate) tree: Tree,
    pub(crate) dirs: Dirs,
    pub(crate) labels: Labels,
}

/// Detects the fat-tree shape by the rules of the [`crate::ftree`] module doc ("Detecting
/// the tree"); the error is the reason the fabric is not one. The tree is the one `ftree`
/// routes on, but whether every pair is reachable on it is only checked when two leaf sets
/// compete (see [`detect`]).
pub fn detect_tree(topo: &Topo<'_>, opts: &Options) -> Result<Tree, String> {
    choose(topo, opts, false).map(|(t, _)| t)
}

/// [`detect_tree`] and the check that every switch with CAs reaches every destination
/// switch going up then down, with the labels it checked that by.
pub(crate) fn detect(topo: &Topo<'_>, opts: &Options) -> Result<Detected, String> {
    let (tree, checked) = choose(topo, opts, true)?;
    let (dirs, labels) = match checked {
        Some(x) => x,
        None => labelled(topo, &tree)?,
    };
    Ok(Detected { tree, dirs, labels })
}

/// The tree, and its labels when they were computed (always when `check`, which then
/// refuses a tree that leaves a pair unreachable).
fn choose(
    topo: &Topo<'_>,
    opts: &Options,
    check: bool,
) -> Result<(Tree, Option<(Dirs, Labels)>), String> {
    let cn = compute_nodes(topo, opts)?;
    let finish = |t: Tree| -> Result<(Tree, Option<(Dirs, Labels)>), String> {
        if check {
            let l = labelled(topo, &t)?;
            Ok((t, Some(l)))
        } else {
            Ok((t, None))
        }
    };
    if !opts.roots.is_empty() {
        let roots = given_roots(topo, opts)?;
        return finish(shape(topo, cn, &roots, true)?);
    }
    // Leaves are the switches with CAs, compute nodes or not; failing that, the switches
    // with compute nodes, so that I/O nodes may hang off switches above the leaves.
    let with_cas = switches_with(topo, |_, d| d.kind != NodeKind::Switch);
    let with_cns = switches_with(topo, |i, _| cn[i]);
    let from = |leaves: &[SwIdx]| {
        farthest_from(topo, leaves).and_then(|roots| shape(topo, cn.clone(), &roots, false))
    };
    let first = from(&with_cas);
    if with_cas == with_cns {
        return finish(first?);
    }
    // Two leaf sets: the first wins when its tree reaches every pair.
    let first = first.and_then(|t| {
        let l = labelled(topo, &t)?;
        Ok((t, Some(l)))
    });
    if first.is_ok() {
        return first;
    }
    from(&with_cns).and_then(finish).map_err(|second| {
        format!(
            "with every switch with CAs as a leaf, {}; with the switches with compute nodes \
             as leaves, {second}",
            first.err().unwrap_or_default()
        )
    })
}

/// The tree shape as the compute nodes' switches give it, without the reachability check
/// (`updn` takes its roots from it).
pub(crate) fn shape_from_compute_nodes(topo: &Topo<'_>, opts: &Options) -> Result<Tree, String> {
    let cn = compute_nodes(topo, opts)?;
    let with_cns = switches_with(topo, |i, _| cn[i]);
    let roots = farthest_from(topo, &with_cns)?;
    shape(topo, cn, &roots, false)
}

/// Per destination: a compute node. Refuses fabrics with fewer than 2 of them or 2 switches.
fn compute_nodes(topo: &Topo<'_>, opts: &Options) -> Result<Vec<bool>, String> {
    let n = topo.num_switches();
    let mut cn_list = opts.compute_nodes.clone();
    cn_list.sort_unstable();
    let cn: Vec<bool> = topo
        .dests
        .iter()
        .map(|d| {
            d.kind == NodeKind::Ca && (cn_list.is_empty() || cn_list.binary_search(&d.guid).is_ok())
        })
        .collect();
    let cns = cn.iter().filter(|&&c| c).count();
    if !cn_list.is_empty() && cns == 0 {
        return Err(format!(
            "none of the {} compute-node GUID(s) is a CA port of the fabric",
            cn_list.len()
        ));
    }
    if n < 2 {
        return Err(format!(
            "the fabric has {n} switch; a fat-tree needs at least 2"
        ));
    }
    if cns < 2 {
        return Err(format!(
            "the fabric has {cns} compute node(s); a fat-tree needs at least 2"
        ));
    }
    Ok(cn)
}

/// The switches of [`Options::roots`].
fn given_roots(topo: &Topo<'_>, opts: &Options) -> Result<Vec<SwIdx>, String> {
    let found = topo.switches_named(&opts.roots);
    if found.is_empty() {
        return Err(format!(
            "none of the {} root GUID(s) names a switch of the fabric",
            opts.roots.len()
        ));
    }
    Ok(found)
}

/// The switches some destinations hang off (`pick(index, dest)`), ascending.
fn switches_with(topo: &Topo<'_>, pick: impl Fn(usize, &Dest) -> bool) -> Vec<SwIdx> {
    let mut v: Vec<SwIdx> = topo
        .dests
        .iter()
        .enumerate()
        .filter(|(i, d)| pick(*i, d))
        .map(|(_, d)| d.sw)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The switches farthest from `leaves`: the top rank.
fn farthest_from(topo: &Topo<'_>, leaves: &[SwIdx]) -> Result<Vec<SwIdx>, String> {
    let up = bfs_ranks(topo, leaves);
    let height = up
        .iter()
        .copied()
        .filter(|&r| r != u32::MAX)
        .max()
        .unwrap_or(0);
    if height == 0 {
        return Err(
            "every switch has CAs attached: there are no switch levels above the leaves"
                .to_string(),
        );
    }
    Ok((0..topo.num_switches() as u32)
        .map(SwIdx)
        .filter(|s| up[s.idx()] == height)
        .collect())
}

/// Ranks from `roots` and the checks of the shape: every switch ranked, every compute node
/// on the leaf rank, nothing below it, 2 to [`MAX_LEVELS`] levels. `given`: the roots come
/// from [`Options::roots`] (the leaf rank is then the first compute node's).
fn shape(topo: &Topo<'_>, cn: Vec<bool>, roots: &[SwIdx], given: bool) -> Result<Tree, String> {
    let n = topo.num_switches();
    let mut rank = bfs_ranks(topo, roots);
    // A switch with no link and no CA (one an SM keeps while it is away) is outside the
    // tree: nothing passes it. It sits at the leaf rank, with no routes to give.
    let cas_on: Vec<bool> = {
        let mut v = vec![false; n];
        for d in topo.dests.iter().filter(|d| d.kind != NodeKind::Switch) {
            v[d.sw.idx()] = true;
        }
        v
    };
    let isolated = |s: SwIdx| topo.adj(s).is_empty() && !cas_on[s.idx()];
    if let Some(s) = (0..n as u32)
        .map(SwIdx)
        .find(|&s| rank[s.idx()] == u32::MAX && !isolated(s))
    {
        return Err(format!(
            "switch {} is not connected to the roots",
            sw_name(topo, s)
        ));
    }
    let outside: Vec<SwIdx> = (0..n as u32)
        .map(SwIdx)
        .filter(|s| rank[s.idx()] == u32::MAX)
        .collect();
    for s in &outside {
        rank[s.idx()] = 0;
    }
    let first_cn = topo
        .dests
        .iter()
        .zip(&cn)
        .find(|(_, c)| **c)
        .map(|(d, _)| d.sw);
    let max_rank = rank.iter().copied().max().unwrap_or(0);
    let leaf_rank = if !given {
        // The rank of most CNs (ties: the higher one), so the error names the odd one out.
        let mut count = vec![0usize; max_rank as usize + 1];
        for (d, _) in topo.dests.iter().zip(&cn).filter(|(_, c)| **c) {
            count[rank[d.sw.idx()] as usize] += 1;
        }
        (0..=max_rank)
            .max_by_key(|&r| (count[r as usize], r))
            .unwrap_or(max_rank)
    } else {
        first_cn.map_or(0, |s| rank[s.idx()])
    };
    for (d, _) in topo.dests.iter().zip(&cn).filter(|(_, c)| **c) {
        let r = rank[d.sw.idx()];
        if r != leaf_rank {
            return Err(format!(
                "CA {} hangs off switch {} at rank {r}, not a leaf (leaves are at rank {leaf_rank})",
                d.guid,
                sw_name(topo, d.sw)
            ));
        }
    }
    if !given && leaf_rank != max_rank {
        if let Some(s) = (0..n as u32).map(SwIdx).find(|s| rank[s.idx()] == max_rank) {
            return Err(format!(
                "switch {} at rank {max_rank} is below the leaves (rank {leaf_rank})",
                sw_name(topo, s)
            ));
        }
    }
    for s in &outside {
        rank[s.idx()] = leaf_rank;
    }
    let levels = leaf_rank + 1;
    if !(2..=MAX_LEVELS).contains(&levels) {
        return Err(format!(
            "the tree has {levels} switch level(s); fat-tree routing handles 2 to {MAX_LEVELS}"
        ));
    }
    Ok(Tree {
        rank,
        leaf_rank,
        cn,
    })
}

/// The up/down labels of a tree (ranks as the order, links within a rank unused); refuses
/// the tree when a switch with CAs has no up-then-down path to some destination switch,
/// since ftree would leave those pairs unrouted.
fn labelled(topo: &Topo<'_>, tree: &Tree) -> Result<(Dirs, Labels), String> {
    let rank = &tree.rank;
    let dirs = Dirs::new(topo, |s, t| {
        let (rs, rt) = (rank[s.idx()], rank[t.idx()]);
        if rt < rs {
            UP
        } else if rt > rs {
            DOWN
        } else {
            NEVER
        }
    });
    let labels = Labels::new(&dirs);
    // Every CA reaches every CA. A switch's own LID may be left without a legal path from
    // some switches (a degraded tree): it carries only management traffic, which the SM
    // sends along directed routes, and OpenSM leaves such pairs too.
    let is_ca = |d: &Dest| d.kind != NodeKind::Switch;
    if let Some((s, d)) = unreached_pair_of(topo, &labels, is_ca, is_ca) {
        return Err(format!(
            "switch {} (with CAs) has no up-then-down path to switch {} (with CAs): they have no common ancestor",
            sw_name(topo, s),
            sw_name(topo, d)
        ));
    }
    Ok((dirs, labels))
}
