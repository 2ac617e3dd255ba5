//! Ranks of switches: breadth-first distances from a set of roots, and the fat-tree shape
//! (roots farthest from the compute nodes, every compute node on the leaf rank). `ftree`
//! routes on that shape; `updn` takes it for its roots when the fabric has it, and ranks
//! from its own roots otherwise. Both then order switches by rank.

use sm_core::NodeKind;

use crate::routes::Options;
use crate::topo::{SwIdx, Topo};

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

/// Detects the fat-tree shape by the rules of the [`crate::ftree`] module doc ("Detecting
/// the tree"); the error is the reason the fabric is not one.
pub fn detect_tree(topo: &Topo<'_>, opts: &Options) -> Result<Tree, String> {
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
    let roots: Vec<SwIdx> = if opts.roots.is_empty() {
        let ca_switches: Vec<SwIdx> = topo
            .dests
            .iter()
            .zip(&cn)
            .filter(|(_, c)| **c)
            .map(|(d, _)| d.sw)
            .collect();
        let up = bfs_ranks(topo, &ca_switches);
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
        (0..n as u32)
            .map(SwIdx)
            .filter(|s| up[s.idx()] == height)
            .collect()
    } else {
        let mut want = opts.roots.clone();
        want.sort_unstable();
        let found: Vec<SwIdx> = (0..n as u32)
            .map(SwIdx)
            .filter(|&s| want.binary_search(&topo.guid(s)).is_ok())
            .collect();
        if found.is_empty() {
            return Err(format!(
                "none of the {} root GUID(s) names a switch of the fabric",
                opts.roots.len()
            ));
        }
        found
    };
    let rank = bfs_ranks(topo, &roots);
    if let Some(s) = (0..n as u32).map(SwIdx).find(|s| rank[s.idx()] == u32::MAX) {
        return Err(format!(
            "switch {} is not connected to the roots",
            sw_name(topo, s)
        ));
    }
    let first_cn = topo
        .dests
        .iter()
        .zip(&cn)
        .find(|(_, c)| **c)
        .map(|(d, _)| d.sw);
    let max_rank = rank.iter().copied().max().unwrap_or(0);
    let leaf_rank = if opts.roots.is_empty() {
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
    if opts.roots.is_empty() && leaf_rank != max_rank {
        if let Some(s) = (0..n as u32).map(SwIdx).find(|s| rank[s.idx()] == max_rank) {
            return Err(format!(
                "switch {} at rank {max_rank} is below the leaves (rank {leaf_rank})",
                sw_name(topo, s)
            ));
        }
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
