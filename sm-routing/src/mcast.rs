//! Multicast: a spanning tree per group over the switch graph, the port masks it gives every
//! switch for the group's MLID, the multicast forwarding tables (MFTs) of all groups, and
//! the MFT blocks that changed between two states.
//!
//! # The tree
//!
//! Members are end ports (CA and router ports, switch ports 0) with their JoinState. Every
//! member's switch (the switch a CA port is cabled to, or the switch itself) is in the tree:
//! a sender's packet enters the fabric there and is replicated along the tree. Ports that
//! *receive* are full members and non-members (JoinState bits 0 and 1); send-only members
//! (bits 2 and 3) never get a copy (IBA 15.2.5.17: a send-only member does not receive).
//!
//! Like OpenSM's default multicast routing, the tree is rooted at a central switch: the one
//! with the smallest greatest distance to the member switches (a CA member counting one hop
//! more than its switch). Ties go to the smallest sum of distances over the members, then
//! to a hash of the MLID among the tied switches in GUID order, so groups with equal claims
//! (the spines of a fat-tree) are spread over them rather than piled on the first.
//!
//! Unlike OpenSM, which sends each member's branch down the first shortest port from the root
//! and can thus reach one switch twice, the tree here is a true tree: every switch gets one
//! parent, a neighbour one hop nearer the root (ties: the lowest rank, then a hash of MLID
//! and switch GUID over the candidate links in (GUID, port) order, spreading groups over
//! parallel links and equal paths). The tree is the union of the member switches' paths to
//! the root, so its depth is the root's greatest distance to a member switch: minimal over
//! all roots.
//!
//! # Credit loops
//!
//! With up/down (`updn`) or fat-tree (`ftree`) unicast routing, switches have a total order,
//! (rank, GUID), and every unicast path goes up zero or more times, then down. A
//! [`TreeOrder::Ranked`] tree uses only parent links that go *up* in that order, and the
//! root is a switch every member switch reaches by going up. A multicast copy then climbs
//! towards the root and turns down into other branches, never up after down: every turn it
//! takes is one an up/down path may take, so multicast adds no cycle to the channel
//! dependency graph of the unicast routes (the union of up*down* paths under one order is
//! acyclic). When no switch is above all member switches (two spines with no link at their
//! rank, members under both), the tree falls back to any shortest links and says so
//! ([`GroupTree::fallback`]); OpenSM never checks this. [`TreeOrder::Free`] (minhop, whose
//! unicast routes have no deadlock rule either) uses any link.
//!
//! # Masks
//!
//! A switch's mask for the group holds: the ports of its receiving members (port 0 when the
//! switch itself receives), the link to each tree child whose subtree holds a receiver, and
//! the link to its parent when a receiver lies outside its subtree. A switch whose mask would
//! be empty is left out. Copies thus go only where a receiver waits; switches forward to
//! every port of the mask but the one a packet came in on, so a tree delivers one copy to
//! every receiver but the sender and loops nowhere.
//!
//! # Tables
//!
//! [`Mfts`] holds every switch's table (port masks by MLID, as many 16-port positions as the
//! switch needs) and [`Mfts::diff`] lists the (block, position) pairs whose 32 masks changed,
//! ready for `Set(MulticastForwardingTable)` with `sm_mad::mft::Modifier`.

use sm_mad::mcmember_record::JoinState;
use sm_mad::{Guid, Lid, mft};

use sm_core::idx::IdxVec;

use crate::routes::{Options, RouteError};
use crate::topo::{SwIdx, Topo};

/// A set of ports 0..=255: bit `p % 16` of word `p / 16`, the layout of an MFT entry across
/// its positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortMask(pub [u16; 16]);

impl PortMask {
    /// No port.
    pub const EMPTY: PortMask = PortMask([0; 16]);

    /// Adds a port.
    pub fn set(&mut self, port: u8) {
        self.0[port as usize / 16] |= 1 << (port % 16);
    }

    /// Whether the port is in.
    pub fn has(&self, port: u8) -> bool {
        self.0[port as usize / 16] & (1 << (port % 16)) != 0
    }

    /// No port is in.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    /// The ports, ascending.
    pub fn ports(&self) -> impl Iterator<Item = u8> + '_ {
        (0..=255u8).filter(move |&p| self.has(p))
    }

    /// The 16-bit mask of one position (ports `16 * position ..`).
    pub fn word(&self, position: u8) -> u16 {
        self.0.get(position as usize).copied().unwrap_or(0)
    }
}

/// Which links a tree may climb towards its root (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeOrder {
    /// Any link.
    Free,
    /// Up/down order of the unicast routes: a move `s -> t` is up when
    /// `(rank[t], GUID t) < (rank[s], GUID s)`; one rank per switch in [`Topo`] order.
    Ranked(Vec<u32>),
}

impl TreeOrder {
    /// The order of routes made under `rule`: its ranks for up*/down* (the same as
    /// [`TreeOrder::for_engine`] gives for the engine that made them, without computing
    /// them again), [`TreeOrder::Free`] otherwise.
    pub fn for_rule(rule: &crate::Rule) -> TreeOrder {
        match rule {
            crate::Rule::UpDown { rank, .. } => TreeOrder::Ranked(rank.clone()),
            crate::Rule::Shortest | crate::Rule::Layered => TreeOrder::Free,
        }
    }

    /// The order that keeps multicast free of credit loops with the unicast routes of an
    /// engine: `updn`'s ranks (with the same choice of roots the engine makes), `ftree`'s
    /// ranks, and [`TreeOrder::Free`] for any other engine.
    pub fn for_engine(
        topo: &Topo<'_>,
        engine: &str,
        opts: &Options,
    ) -> Result<TreeOrder, RouteError> {
        match engine {
            "updn" => Ok(TreeOrder::Ranked(crate::updn::chosen(topo, opts)?.0.rank)),
            "ftree" => crate::rank::detect_tree(topo, opts)
                .map(|t| TreeOrder::Ranked(t.rank))
                .map_err(|reason| RouteError::NotApplicable {
                    engine: "ftree",
                    reason,
                }),
            _ => Ok(TreeOrder::Free),
        }
    }
}

/// A tree switch's link to its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeLink {
    /// The switch's port.
    pub port: u8,
    pub parent: SwIdx,
    /// The parent's port.
    pub parent_port: u8,
}

/// A group's tree and the masks it gives the switches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupTree {
    pub mlid: Lid,
    /// The root; `None` when no member is in the fabric.
    pub root: Option<SwIdx>,
    /// Every switch of the tree with its link to its parent (none for the root), in switch
    /// order.
    pub switches: Vec<(SwIdx, Option<TreeLink>)>,
    /// The non-empty masks, in switch order.
    pub masks: Vec<(SwIdx, PortMask)>,
    /// Member ports the tree does not reach: unknown GUIDs, ports without a LID or off the
    /// switch fabric, and ports cut off from the root.
    pub unreachable: Vec<Guid>,
    /// An order was given but no tree obeying it spans the members, so links were used
    /// regardless of it (see the module doc).
    pub fallback: bool,
    /// Links from the root to the farthest member switch.
    pub depth: u32,
}

impl GroupTree {
    /// The mask of a switch (empty when it is not programmed for the group).
    pub fn mask(&self, s: SwIdx) -> PortMask {
        self.masks
            .binary_search_by_key(&s, |(x, _)| *x)
            .map_or(PortMask::EMPTY, |i| self.masks[i].1)
    }
}

/// In a distance table: not reached.
const FAR: u32 = u32::MAX;

/// SplitMix64 finaliser: a deterministic spread of (MLID, switch) over candidates.
pub(crate) fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn pick(n: usize, key: u64) -> usize {
    if n <= 1 {
        0
    } else {
        (mix(key) % n as u64) as usize
    }
}

/// Builds group trees over one snapshot; keeps its scratch between groups.
#[derive(Debug)]
pub struct McastPlanner<'t, 'f> {
    topo: &'t Topo<'f>,
    /// Rank per switch when ordered.
    rank: Option<Vec<u32>>,
    /// Per link of [`Topo::adj`] (flattened): the move from the row's switch is up.
    up: Vec<bool>,
    off: Vec<u32>,
    // Scratch, one slot per switch.
    dist: IdxVec<SwIdx, u32>,
    cnt: IdxVec<SwIdx, u32>,
    maxd: IdxVec<SwIdx, u32>,
    sum: IdxVec<SwIdx, u64>,
    queue: Vec<SwIdx>,
}

/// A resolved member.
#[derive(Debug, Clone, Copy)]
struct Resolved {
    guid: Guid,
    sw: SwIdx,
    port: u8,
    receives: bool,
}

impl<'t, 'f> McastPlanner<'t, 'f> {
    /// A planner for the snapshot and order. A ranked order of the wrong length is used as
    /// far as it goes (missing ranks count as unranked, after every other switch).
    pub fn new(topo: &'t Topo<'f>, order: TreeOrder) -> McastPlanner<'t, 'f> {
        let n = topo.num_switches();
        let rank = match order {
            TreeOrder::Free => None,
            TreeOrder::Ranked(mut r) => {
                r.resize(n, u32::MAX);
                Some(r)
            }
        };
        let mut off = Vec::with_capacity(n + 1);
        let mut up = Vec::new();
        for s in 0..n {
            off.push(up.len() as u32);
            let s = SwIdx(s as u32);
            for a in topo.adj(s) {
                up.push(match &rank {
                    None => true,
                    Some(r) => (r[a.peer.idx()], topo.guid(a.peer)) < (r[s.idx()], topo.guid(s)),
                });
            }
        }
        off.push(up.len() as u32);
        McastPlanner {
            topo,
            rank,
            up,
            off,
            dist: IdxVec::filled(FAR, n),
            cnt: IdxVec::filled(0, n),
            maxd: IdxVec::filled(0, n),
            sum: IdxVec::filled(0, n),
            queue: Vec::with_capacity(n),
        }
    }

    fn ups(&self, s: SwIdx) -> &[bool] {
        &self.up[self.off[s.idx()] as usize..self.off[s.idx() + 1] as usize]
    }

    /// Resolves members to (switch, port); the unresolvable go to `lost`.
    fn resolve(&self, members: &[(Guid, JoinState)], lost: &mut Vec<Guid>) -> Vec<Resolved> {
        let f = self.topo.fabric;
        let mut out: Vec<Resolved> = Vec::with_capacity(members.len());
        for &(guid, js) in members {
            let receives = js.0 & (JoinState::FULL_MEMBER.0 | JoinState::NON_MEMBER.0) != 0;
            let dest = f
                .port_by_guid(guid)
                .map(|p| f.port(f.lid_port(p)).lid)
                .filter(|l| l.is_unicast())
                .and_then(|l| self.topo.dest_of(l))
                .filter(|d| d.guid == guid);
            match dest {
                Some(d) => out.push(Resolved {
                    guid,
                    sw: d.sw,
                    port: d.sw_port,
                    receives,
                }),
                None => lost.push(guid),
            }
        }
        // One entry per port: a GUID given twice receives if either says so.
        out.sort_unstable_by_key(|m| (m.sw, m.port));
        out.dedup_by(|b, a| {
            let same = a.sw == b.sw && a.port == b.port;
            if same {
                a.receives |= b.receives;
            }
            same
        });
        out
    }

    /// Scores every switch as a root for the member switches `msw` (with their weights):
    /// fills `cnt`, `maxd`, `sum`. `ordered` restricts the searches to up moves.
    fn score(&mut self, msw: &[(SwIdx, u32, u32)], ordered: bool) {
        let n = self.topo.num_switches();
        self.cnt.clear();
        self.cnt.resize(n, 0);
        self.maxd.clear();
        self.maxd.resize(n, 0);
        self.sum.clear();
        self.sum.resize(n, 0);
        for &(m, w, k) in msw {
            self.dist.clear();
            self.dist.resize(n, FAR);
            self.queue.clear();
            self.dist[m] = 0;
            self.queue.push(m);
            let mut head = 0;
            while head < self.queue.len() {
                let s = self.queue[head];
                head += 1;
                let d = self.dist[s];
                self.cnt[s] += 1;
                self.maxd[s] = self.maxd[s].max(d + w);
                self.sum[s] += u64::from(d + w) * u64::from(k);
                let adj = self.topo.adj(s);
                let lo = self.off[s.idx()] as usize;
                for (i, a) in adj.iter().enumerate() {
                    if (ordered && !self.up[lo + i]) || self.dist[a.peer] != FAR {
                        continue;
                    }
                    self.dist[a.peer] = d + 1;
                    self.queue.push(a.peer);
                }
            }
        }
    }

    /// The best root after [`Self::score`]: the most member switches covered, then the
    /// smallest greatest distance, then the smallest sum, then the MLID's hash over the
    /// tied switches in GUID order.
    fn best_root(&self, mlid: Lid) -> Option<(SwIdx, u32)> {
        let key = |s: SwIdx| (u32::MAX - self.cnt[s], self.maxd[s], self.sum[s]);
        let best = self
            .cnt
            .indices()
            .filter(|&s| self.cnt[s] > 0)
            .map(key)
            .min()?;
        let mut ties: Vec<SwIdx> = self
            .cnt
            .indices()
            .filter(|&s| self.cnt[s] > 0 && key(s) == best)
            .collect();
        ties.sort_unstable_by_key(|&s| self.topo.guid(s));
        let root = ties[pick(ties.len(), u64::from(mlid.0))];
        Some((root, self.cnt[root]))
    }

    /// Distances from every switch to `root` over moves towards it that go up (any move
    /// when not ordered), into `dist`.
    fn dist_to_root(&mut self, root: SwIdx, ordered: bool) {
        self.dist.clear();
        self.dist.resize(self.topo.num_switches(), FAR);
        self.queue.clear();
        self.dist[root] = 0;
        self.queue.push(root);
        let mut head = 0;
        while head < self.queue.len() {
            let x = self.queue[head];
            head += 1;
            let d = self.dist[x];
            let lo = self.off[x.idx()] as usize;
            for (i, a) in self.topo.adj(x).iter().enumerate() {
                // The move peer -> x must be up: the move x -> peer is then down (the order
                // is total, GUIDs being distinct).
                if (ordered && self.up[lo + i]) || self.dist[a.peer] != FAR {
                    continue;
                }
                self.dist[a.peer] = d + 1;
                self.queue.push(a.peer);
            }
        }
    }

    /// The parent link of `s` (not the root) towards the root after
    /// [`Self::dist_to_root`]: (index into `adj(s)`).
    fn parent_link(&self, s: SwIdx, mlid: Lid, ordered: bool) -> Option<usize> {
        let d = self.dist[s];
        let ups = self.ups(s);
        let adj = self.topo.adj(s);
        let mut cand: Vec<usize> = (0..adj.len())
            .filter(|&i| (!ordered || ups[i]) && d > 0 && self.dist[adj[i].peer] == d - 1)
            .collect();
        if let Some(r) = &self.rank {
            if let Some(low) = cand.iter().map(|&i| r[adj[i].peer.idx()]).min() {
                cand.retain(|&i| r[adj[i].peer.idx()] == low);
            }
        }
        cand.sort_unstable_by_key(|&i| (self.topo.guid(adj[i].peer), adj[i].port));
        let key = (u64::from(mlid.0) << 48) ^ self.topo.guid(s).0;
        cand.get(pick(cand.len(), key)).copied()
    }

    /// The tree of a group: `members` are (port GUID, JoinState) pairs (a GUID may appear
    /// once; a switch's GUID names its port 0). Never fails: members it cannot reach are
    /// listed in [`GroupTree::unreachable`].
    pub fn tree(&mut self, mlid: Lid, members: &[(Guid, JoinState)]) -> GroupTree {
        let mut unreachable = Vec::new();
        let resolved = self.resolve(members, &mut unreachable);
        let mut out = GroupTree {
            mlid,
            root: None,
            switches: Vec::new(),
            masks: Vec::new(),
            unreachable,
            fallback: false,
            depth: 0,
        };
        // Member switches: (switch, weight: 1 with a CA member, members there).
        let mut msw: Vec<(SwIdx, u32, u32)> = Vec::new();
        for m in &resolved {
            let w = u32::from(m.port != 0);
            match msw.last_mut() {
                Some(last) if last.0 == m.sw => {
                    last.1 = last.1.max(w);
                    last.2 += 1;
                }
                _ => msw.push((m.sw, w, 1)),
            }
        }
        if msw.is_empty() {
            return out;
        }
        let mut ordered = self.rank.is_some();
        self.score(&msw, ordered);
        let mut best = self.best_root(mlid);
        if ordered && best.is_none_or(|(_, c)| (c as usize) < msw.len()) {
            // No switch is above every member switch: any links, if they cover more.
            let covered = best.map_or(0, |b| b.1);
            self.score(&msw, false);
            let free = self.best_root(mlid);
            if free.is_some_and(|(_, c)| c > covered) {
                best = free;
                ordered = false;
                out.fallback = true;
            }
        }
        let Some((root, _)) = best else {
            out.unreachable.extend(resolved.iter().map(|m| m.guid));
            return out;
        };
        out.root = Some(root);
        self.dist_to_root(root, ordered);

        let n = self.topo.num_switches();
        // parent[s]: the index of s's parent link in adj(s); in_tree marks tree switches.
        let mut parent: IdxVec<SwIdx, Option<usize>> = IdxVec::filled(None, n);
        let mut in_tree = IdxVec::filled(false, n);
        let mut tree: Vec<SwIdx> = Vec::new();
        in_tree[root] = true;
        tree.push(root);
        for &(m, _, _) in &msw {
            if self.dist[m] == FAR {
                continue;
            }
            let mut s = m;
            while !in_tree[s] {
                in_tree[s] = true;
                tree.push(s);
                let Some(i) = self.parent_link(s, mlid, ordered) else {
                    break;
                };
                parent[s] = Some(i);
                s = self.topo.adj(s)[i].peer;
            }
        }
        // Receivers per switch, then per subtree (children before parents).
        let mut sub: IdxVec<SwIdx, u32> = IdxVec::filled(0, n);
        for m in &resolved {
            if self.dist[m.sw] == FAR {
                out.unreachable.push(m.guid);
            } else if m.receives {
                sub[m.sw] += 1;
            }
        }
        tree.sort_unstable_by_key(|&s| std::cmp::Reverse(self.dist[s]));
        out.depth = tree.first().map_or(0, |&s| self.dist[s]);
        for &s in &tree {
            if let Some(i) = parent[s] {
                let p = self.topo.adj(s)[i].peer;
                sub[p] += sub[s];
            }
        }
        let total = sub[root];
        let mut masks = IdxVec::filled(PortMask::EMPTY, n);
        for m in &resolved {
            if m.receives && in_tree[m.sw] {
                masks[m.sw].set(m.port);
            }
        }
        for &s in &tree {
            let Some(i) = parent[s] else {
                continue;
            };
            let a = self.topo.adj(s)[i];
            if total > sub[s] {
                masks[s].set(a.port);
            }
            if sub[s] > 0 {
                masks[a.peer].set(a.peer_port);
            }
        }
        tree.sort_unstable();
        out.switches = tree
            .iter()
            .map(|&s| {
                let link = parent[s].map(|i| {
                    let a = self.topo.adj(s)[i];
                    TreeLink {
                        port: a.port,
                        parent: a.peer,
                        parent_port: a.peer_port,
                    }
                });
                (s, link)
            })
            .collect();
        out.masks = tree
            .iter()
            .filter(|&&s| !masks[s].is_empty())
            .map(|&s| (s, masks[s]))
            .collect();
        out.unreachable.sort_unstable();
        out
    }
}

// ---------------------------------------------------------------------------------------
// Tables.

/// One switch's multicast forwarding table: a port mask per MLID from 0xC000, over the
/// positions its ports need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchMft {
    pub guid: Guid,
    pub num_ports: u8,
    positions: u8,
    /// MLID-major: `positions` words per MLID.
    words: Vec<u16>,
}

impl SwitchMft {
    /// An empty table for a switch with `num_ports` ports.
    pub fn new(guid: Guid, num_ports: u8) -> SwitchMft {
        SwitchMft {
            guid,
            num_ports,
            positions: mft::positions_for(num_ports),
            words: Vec::new(),
        }
    }

    /// 16-port groups the switch has (MFT positions).
    pub fn positions(&self) -> u8 {
        self.positions
    }

    fn offset(mlid: Lid) -> Option<usize> {
        mlid.is_multicast()
            .then(|| (mlid.0 - Lid::MIN_MULTICAST.0) as usize)
    }

    /// The mask of an MLID.
    pub fn mask(&self, mlid: Lid) -> PortMask {
        let mut m = PortMask::EMPTY;
        let p = self.positions as usize;
        if let Some(w) = Self::offset(mlid).and_then(|o| self.words.get(o * p..o * p + p)) {
            m.0[..p].copy_from_slice(w);
        }
        m
    }

    /// Sets the mask of an MLID (ports beyond NumPorts are dropped); false for a LID that is
    /// not multicast.
    pub fn set(&mut self, mlid: Lid, mask: &PortMask) -> bool {
        let Some(o) = Self::offset(mlid) else {
            return false;
        };
        let p = self.positions as usize;
        let mut m = *mask;
        for port in (u16::from(self.num_ports) + 1)..=255 {
            m.0[port as usize / 16] &= !(1 << (port % 16));
        }
        if m.is_empty() && self.words.len() <= o * p {
            return true;
        }
        if self.words.len() < (o + 1) * p {
            self.words.resize((o + 1) * p, 0);
        }
        self.words[o * p..o * p + p].copy_from_slice(&m.0[..p]);
        // Keep no trailing empty entries, so the length gives the top.
        while self.words.len() >= p && self.words[self.words.len() - p..].iter().all(|&w| w == 0) {
            self.words.truncate(self.words.len() - p);
        }
        true
    }

    /// The highest MLID with a non-empty mask (what MulticastFDBTop should cover).
    pub fn top(&self) -> Option<Lid> {
        let p = self.positions as usize;
        (self.words.len() / p.max(1))
            .checked_sub(1)
            .map(|o| Lid(Lid::MIN_MULTICAST.0 + o as u16))
    }

    /// Blocks up to the one holding [`SwitchMft::top`] (0 when empty).
    pub fn blocks(&self) -> u16 {
        self.top().and_then(mft::block_of).map_or(0, |b| b + 1)
    }

    /// One block at one position, as Set(MulticastForwardingTable) carries it.
    pub fn block(&self, block: u16, position: u8) -> mft::Repr {
        let mut r = mft::Repr::default();
        for (slot, e) in r.port_mask_block.iter_mut().enumerate() {
            let mlid = u32::from(Lid::MIN_MULTICAST.0)
                + u32::from(block) * mft::ENTRIES as u32
                + slot as u32;
            if let Ok(l) = u16::try_from(mlid) {
                *e = self.mask(Lid(l)).word(position);
            }
        }
        r
    }

    /// Writes one block at one position (what a switch answers to Get, or a Set did).
    pub fn set_block(&mut self, m: mft::Modifier, block: &mft::Repr) {
        if m.position >= self.positions {
            return;
        }
        for (slot, &w) in block.port_mask_block.iter().enumerate() {
            let mlid = u32::from(Lid::MIN_MULTICAST.0)
                + u32::from(m.block) * mft::ENTRIES as u32
                + slot as u32;
            let Ok(l) = u16::try_from(mlid) else { continue };
            let mut mask = self.mask(Lid(l));
            mask.0[m.position as usize] = w;
            self.set(Lid(l), &mask);
        }
    }
}

/// Every switch's MFT, in [`Topo`] switch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mfts {
    pub switches: Vec<SwitchMft>,
}

/// One block to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MftUpdate {
    /// Index into [`Mfts::switches`] of the new state.
    pub switch: usize,
    pub guid: Guid,
    pub modifier: mft::Modifier,
    pub block: mft::Repr,
}

/// What changed between two states.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MftDiff {
    /// Blocks whose masks changed, by switch then block then position.
    pub blocks: Vec<MftUpdate>,
    /// Switches whose highest programmed MLID changed (`None`: no entry left), for
    /// SwitchInfo.MulticastFDBTop.
    pub tops: Vec<(usize, Guid, Option<Lid>)>,
}

impl Mfts {
    /// Empty tables for every switch of the snapshot.
    pub fn new(topo: &Topo<'_>) -> Mfts {
        Mfts {
            switches: (0..topo.num_switches())
                .map(|s| {
                    let s = SwIdx(s as u32);
                    SwitchMft::new(topo.guid(s), topo.radix(s))
                })
                .collect(),
        }
    }

    /// Removes an MLID from every table.
    pub fn clear(&mut self, mlid: Lid) {
        for t in &mut self.switches {
            t.set(mlid, &PortMask::EMPTY);
        }
    }

    /// Programs a group's tree: its MLID is cleared everywhere, then set on the tree's
    /// switches (masks of switches this state does not have are ignored).
    pub fn apply(&mut self, tree: &GroupTree) {
        self.clear(tree.mlid);
        for (s, m) in &tree.masks {
            if let Some(t) = self.switches.get_mut(s.idx()) {
                t.set(tree.mlid, m);
            }
        }
    }

    /// The table of a switch by GUID.
    pub fn get(&self, guid: Guid) -> Option<&SwitchMft> {
        self.switches.iter().find(|t| t.guid == guid)
    }

    /// The blocks to send to go from `old` (what the switches hold, matched by GUID) to
    /// `self`: for a switch `old` has, the (block, position) pairs whose masks differ, up to
    /// the higher of the two tops; for a switch it lacks (its contents unknown), every block
    /// up to the new top at every position.
    pub fn diff(&self, old: &Mfts) -> MftDiff {
        let mut index: Vec<(Guid, usize)> = old
            .switches
            .iter()
            .enumerate()
            .map(|(i, t)| (t.guid, i))
            .collect();
        index.sort_unstable();
        let mut out = MftDiff::default();
        for (i, new) in self.switches.iter().enumerate() {
            let prev = index
                .binary_search_by_key(&new.guid, |e| e.0)
                .ok()
                .map(|k| &old.switches[index[k].1]);
            let blocks = new.blocks().max(prev.map_or(0, SwitchMft::blocks));
            for b in 0..blocks {
                for pos in 0..new.positions {
                    let nb = new.block(b, pos);
                    if prev.is_some_and(|o| o.block(b, pos) == nb) {
                        continue;
                    }
                    out.blocks.push(MftUpdate {
                        switch: i,
                        guid: new.guid,
                        modifier: mft::Modifier {
                            block: b,
                            position: pos,
                        },
                        block: nb,
                    });
                }
            }
            if prev.map(SwitchMft::top) != Some(new.top()) {
                out.tops.push((i, new.guid, new.top()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
