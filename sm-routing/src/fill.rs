//! Filling forwarding tables from per-switch candidate sets, shared by every engine.
//!
//! An engine describes, for a switch `s` and every destination switch `D`, the set of links
//! of `s` that are minimal next hops obeying its deadlock rule (a bit mask over
//! [`Topo::adj`]). This module then walks the LIDs in the engine's order and picks, per LID,
//! one port of the set: the engine's preferred one if it names one, otherwise the least
//! loaded, as OpenSM's minhop balances (links towards a next switch that another LID of the
//! same port already uses come last, so the 2^LMC LIDs of a port take different paths where
//! they can; then fewest LIDs so far; then the lowest port). The same sets, deduplicated per
//! switch, are the adaptive-routing groups. Switches are independent, so they are filled in
//! parallel and the result does not depend on the number of threads.

use std::collections::BTreeMap;

use sm_core::NodeKind;
use sm_core::idx::{IdxVec, OptIdx};
use sm_core::lft::LftTable;
use sm_mad::Lid;

use crate::routes::{Routes, SwitchAr};
use crate::topo::{Adj, DestIdx, SwIdx, Topo};

sm_core::dense_index!(
    /// An engine's own number for a job (the fat-tree chain), in job order.
    pub(crate) struct Tag
);

/// One LID to route: the LID, its owner and an engine-specific tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Job {
    pub(crate) lid: Lid,
    pub(crate) dest: DestIdx,
    pub(crate) tag: OptIdx<Tag>,
}

/// Every LID in the order of [`Topo::dests`].
pub(crate) fn jobs_in_dest_order(topo: &Topo<'_>) -> Vec<Job> {
    let mut jobs = Vec::with_capacity(topo.max_lid().0 as usize);
    for (i, d) in topo.dests.iter_enumerated() {
        for lid in d.lids() {
            jobs.push(Job {
                lid,
                dest: i,
                tag: OptIdx::NONE,
            });
        }
    }
    jobs
}

/// What an engine tells the filler.
pub(crate) trait Policy: Sync {
    /// Candidate masks of `s` towards every switch: `out[d * words..][..words]`, bit `i` set
    /// when link `i` of [`Topo::adj`]`(s)` is a legal minimal next hop towards switch `d`.
    fn masks(&self, s: SwIdx, words: usize, out: &mut [u64]);

    /// Narrows the candidates of `job`, whose tag is `tag`, to the links the engine prefers:
    /// writes a subset of `mask` into `out` and returns true, or returns false for no
    /// preference. The filler balances load within the subset (within `mask` if the subset
    /// is empty). `port_adj[p]` is the index of port `p` in `adj`. Not called for untagged
    /// jobs, nor when `mask` has a single candidate.
    #[allow(clippy::too_many_arguments)]
    fn narrow(
        &self,
        _s: SwIdx,
        _adj: &[Adj],
        _port_adj: &[u8; 256],
        _job: &Job,
        _tag: Tag,
        _mask: &[u64],
        _out: &mut [u64; 4],
    ) -> bool {
        false
    }
}

/// Builds the candidate masks of a switch with `deg` links towards `n` destination switches
/// from per-link bit columns: `col(i, start, len)` returns bit `j` set when link `i` is a
/// candidate towards destination `start + j` (`len` <= 64). Columns of 64 destinations are
/// computed in registers, then turned into rows by a bit-matrix transpose.
pub(crate) fn build_masks(
    n: usize,
    deg: usize,
    words: usize,
    out: &mut [u64],
    mut col: impl FnMut(usize, usize, usize) -> u64,
) {
    let mut block = [[0u64; 64]; 4];
    for start in (0..n).step_by(64) {
        let len = (n - start).min(64);
        for (w, b) in block.iter_mut().enumerate().take(words) {
            for (j, slot) in b.iter_mut().enumerate() {
                let i = w * 64 + j;
                *slot = if i < deg { col(i, start, len) } else { 0 };
            }
            transpose64(b);
        }
        for j in 0..len {
            let row = &mut out[(start + j) * words..(start + j + 1) * words];
            for (w, r) in row.iter_mut().enumerate() {
                *r = block[w][j];
            }
        }
    }
}

/// Transposes a 64x64 bit matrix, bit `c` of `a[r]` being element `(r, c)`.
fn transpose64(a: &mut [u64; 64]) {
    let mut j = 32;
    let mut m: u64 = 0x0000_0000_FFFF_FFFF;
    while j != 0 {
        let mut k = 0;
        while k < 64 {
            let t = ((a[k] >> j) ^ a[k + j]) & m;
            a[k + j] ^= t;
            a[k] ^= t << j;
            k = (k + j + 1) & !j;
        }
        j >>= 1;
        m ^= m << j;
    }
}

/// Mask words needed for the links of a switch (at least 1, at most 4: 254 ports).
pub(crate) fn words_for(adj: &[Adj]) -> usize {
    adj.len().div_ceil(64).max(1)
}

#[derive(Default)]
struct Scratch {
    masks: Vec<u64>,
    /// Adaptive-routing group of each destination switch, once known.
    gid: IdxVec<SwIdx, Option<u16>>,
}

/// Routes every job on every switch.
pub(crate) fn fill<P: Policy>(
    engine: &'static str,
    topo: &Topo<'_>,
    policy: &P,
    jobs: &[Job],
    opts: &crate::routes::Options,
) -> Routes {
    let adaptive = opts.adaptive;
    let previous = opts.previous.as_deref();
    let mut routes = Routes::empty(engine, topo);
    let mut ar: Vec<SwitchAr> = if adaptive {
        vec![SwitchAr::default(); topo.num_switches()]
    } else {
        Vec::new()
    };
    // The SM LID's candidates at each switch where it had a free choice.
    let mut sm_sets: Vec<[u64; 4]> = if opts.sm_lid.is_some() {
        vec![[0; 4]; topo.num_switches()]
    } else {
        Vec::new()
    };
    let lid_len = routes.lft.first().map_or(0, Vec::len);
    let work = |sc: &mut Scratch, s: usize, cell: &mut Cell<'_>| {
        let guid = topo.guid(SwIdx(s as u32));
        let prev = previous
            .and_then(|p| p.get(guid))
            .map(|t| (t, previous.map_or(&[][..], |p| p.wanted(guid))));
        fill_switch(
            topo,
            policy,
            jobs,
            SwIdx(s as u32),
            cell,
            (lid_len, opts.sm_lid),
            prev,
            sc,
        )
    };
    let cells = topo.num_switches() * lid_len;
    let (mut ar_it, mut sm_it) = (ar.iter_mut(), sm_sets.iter_mut());
    let mut per_switch: Vec<Cell<'_>> = routes
        .lft
        .iter_mut()
        .map(|table| Cell {
            table,
            ar: ar_it.next(),
            sm_set: sm_it.next(),
        })
        .collect();
    crate::par::each(&mut per_switch, cells, Scratch::default, work);
    drop(per_switch);
    if adaptive {
        routes.ar = Some(ar);
    }
    if let Some(sm) = opts.sm_lid {
        spread_sm_lid(topo, &mut routes.lft, sm, &sm_sets);
    }
    routes
}

/// What one switch's fill writes.
struct Cell<'a> {
    table: &'a mut Vec<u8>,
    ar: Option<&'a mut SwitchAr>,
    /// The SM LID's candidates, when it had a choice here (none without an SM LID).
    sm_set: Option<&'a mut [u64; 4]>,
}

#[allow(clippy::too_many_arguments)]
fn fill_switch<P: Policy>(
    topo: &Topo<'_>,
    policy: &P,
    jobs: &[Job],
    s: SwIdx,
    cell: &mut Cell<'_>,
    (lid_len, sm_lid): (usize, Option<Lid>),
    prev: Option<(&LftTable, &[(u16, u8)])>,
    sc: &mut Scratch,
) {
    let table = &mut *cell.table;
    let mut ar = cell.ar.as_deref_mut();
    let n = topo.num_switches();
    let adj = topo.adj(s);
    let words = words_for(adj);
    sc.masks.clear();
    sc.masks.resize(n * words, 0);
    policy.masks(s, words, &mut sc.masks);

    let mut interned: BTreeMap<[u64; 4], u32> = BTreeMap::new();
    if let Some(ar) = ar.as_deref_mut() {
        ar.lid_group = vec![u16::MAX; lid_len];
        sc.gid = IdxVec::filled(None, n);
    }

    // keys[i] = LIDs routed through link i so far << 8 | its port: the least key is the
    // least loaded link, ties to the lowest port.
    let mut keys = [u32::MAX; 256];
    let mut port_adj = [0u8; 256];
    for (i, a) in adj.iter().enumerate() {
        keys[i] = u32::from(a.port);
        port_adj[a.port as usize] = i as u8;
    }
    let mut used_peers: Vec<SwIdx> = Vec::new();
    let mut last_dest = None;
    for job in jobs {
        let d = &topo.dests[job.dest];
        if Some(job.dest) != last_dest {
            used_peers.clear();
            last_dest = Some(job.dest);
        }
        let port = if d.sw == s {
            d.sw_port
        } else {
            let dsw = d.sw;
            let mask = &sc.masks[dsw.idx() * words..(dsw.idx() + 1) * words];
            let legal = |p: u8| {
                let i = port_adj[p as usize] as usize;
                (i < adj.len()
                    && adj[i].port == p
                    && mask.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0))
                .then_some(i)
            };
            // The port it should go back to, else the one it uses, if legal.
            let kept = prev.and_then(|(t, wanted)| {
                let lid = job.lid.0;
                wanted
                    .binary_search_by_key(&lid, |e| e.0)
                    .ok()
                    .and_then(|k| legal(wanted[k].1))
                    .or_else(|| t.get(usize::from(lid)).and_then(legal))
            });
            let pick = match (kept, single(mask)) {
                (Some(i), _) => Some(i),
                (None, Some(one)) => Some(one),
                (None, None) => {
                    if Some(job.lid) == sm_lid {
                        if let Some(set) = cell.sm_set.as_deref_mut() {
                            set[..words].copy_from_slice(mask);
                        }
                    }
                    let mut narrowed = [0u64; 4];
                    let pick = if job.tag.get().is_some_and(|tag| {
                        policy.narrow(s, adj, &port_adj, job, tag, mask, &mut narrowed)
                    }) {
                        for (n, &m) in narrowed.iter_mut().zip(mask) {
                            *n &= m;
                        }
                        least_loaded(adj, &narrowed[..words], &keys, &port_adj, &used_peers)
                    } else {
                        None
                    };
                    pick.or_else(|| least_loaded(adj, mask, &keys, &port_adj, &used_peers))
                }
            };
            let Some(i) = pick else { continue };
            let a = adj[i];
            keys[i] += 1 << 8;
            if d.lmc > 0 {
                used_peers.push(a.peer);
            }
            if let Some(ar) = ar.as_deref_mut() {
                let g = group_of(ar, &mut interned, &mut sc.gid, dsw, adj, mask);
                if let Some(slot) = ar.lid_group.get_mut(job.lid.0 as usize) {
                    *slot = g;
                }
            }
            a.port
        };
        if let Some(e) = table.get_mut(job.lid.0 as usize) {
            *e = port;
        }
    }
}

/// The index of the only set bit, if exactly one is set (`count_ones` is slow without the
/// popcnt target feature).
#[inline]
fn single(mask: &[u64]) -> Option<usize> {
    let mut nonzero = mask.iter().enumerate().filter(|(_, w)| **w != 0);
    let (fw, &first) = nonzero.next()?;
    (first & (first - 1) == 0 && nonzero.next().is_none())
        .then(|| fw * 64 + first.trailing_zeros() as usize)
}

/// The least loaded candidate (see the module doc).
#[inline]
fn least_loaded(
    adj: &[Adj],
    mask: &[u64],
    keys: &[u32; 256],
    port_adj: &[u8; 256],
    used: &[SwIdx],
) -> Option<usize> {
    if let Some(one) = single(mask) {
        return Some(one);
    }
    if used.is_empty() {
        // Minimum key over the set bits (the port in the key's low byte names the link).
        let mut best = u32::MAX;
        for (w, &bits) in mask.iter().enumerate() {
            let mut b = bits;
            let base = &keys[w * 64..];
            while b != 0 {
                let k = base[b.trailing_zeros() as usize];
                b &= b - 1;
                best = best.min(k);
            }
        }
        return (best != u32::MAX).then(|| port_adj[(best & 0xFF) as usize] as usize);
    }
    let mut best = u64::MAX;
    let mut pick = None;
    for (w, &bits) in mask.iter().enumerate() {
        let mut b = bits;
        while b != 0 {
            let i = w * 64 + b.trailing_zeros() as usize;
            b &= b - 1;
            let Some(a) = adj.get(i) else { break };
            let key = u64::from(used.contains(&a.peer)) << 32 | u64::from(keys[i]);
            if key < best {
                best = key;
                pick = Some(i);
            }
        }
    }
    pick
}

/// Spreads the SM's LID where no CA's traffic to the SM passes (see
/// [`crate::Options::sm_lid`]): a switch that only switches' traps cross forwards it on
/// one of its candidates chosen by a hash of its GUID, not by load. The switches CA
/// traffic crosses keep the engine's choice, so the CA flows, and the balance, are those
/// of the tables made without an SM LID.
fn spread_sm_lid(topo: &Topo<'_>, lft: &mut [Vec<u8>], sm: Lid, sets: &[[u64; 4]]) {
    let Some(d) = topo.dest_of(sm) else { return };
    let at = usize::from(sm.0);
    let n = topo.num_switches();
    let mut crossed = vec![false; n];
    crossed[d.sw.idx()] = true;
    for src in topo.dests.iter().filter(|x| x.kind != NodeKind::Switch) {
        let mut s = src.sw;
        // Bounded, in case the tables loop.
        for _ in 0..n {
            if std::mem::replace(&mut crossed[s.idx()], true) {
                break;
            }
            let port = lft[s.idx()].get(at).copied();
            match topo.adj(s).iter().find(|a| Some(a.port) == port) {
                Some(a) => s = a.peer,
                None => break,
            }
        }
    }
    for (i, set) in sets.iter().enumerate() {
        let count: u32 = set.iter().map(|w| w.count_ones()).sum();
        if crossed[i] || count < 2 {
            continue;
        }
        let s = SwIdx(i as u32);
        let nth = crate::mcast::mix(topo.guid(s).0) % u64::from(count);
        let pick = (0..set.len() * 64)
            .filter(|&b| set[b / 64] >> (b % 64) & 1 != 0)
            .nth(nth as usize);
        if let (Some(a), Some(e)) = (pick.and_then(|k| topo.adj(s).get(k)), lft[i].get_mut(at)) {
            *e = a.port;
        }
    }
}

/// The adaptive-routing group of a candidate set (`u16::MAX` for a single port).
fn group_of(
    ar: &mut SwitchAr,
    interned: &mut BTreeMap<[u64; 4], u32>,
    gid: &mut IdxVec<SwIdx, Option<u16>>,
    dsw: SwIdx,
    adj: &[Adj],
    mask: &[u64],
) -> u16 {
    if let Some(g) = gid[dsw] {
        return g;
    }
    let count: u32 = mask.iter().map(|w| w.count_ones()).sum();
    let g = if count < 2 {
        u16::MAX
    } else {
        let mut key = [0u64; 4];
        for (k, &w) in key.iter_mut().zip(mask) {
            *k = w;
        }
        let next = ar.groups.len() as u32;
        let id = *interned.entry(key).or_insert(next);
        if id == next {
            let mut ports = Vec::with_capacity(count as usize);
            for (w, &bits) in mask.iter().enumerate() {
                let mut b = bits;
                while b != 0 {
                    let i = w * 64 + b.trailing_zeros() as usize;
                    b &= b - 1;
                    if let Some(a) = adj.get(i) {
                        ports.push(a.port);
                    }
                }
            }
            ports.sort_unstable();
            ports.dedup();
            ar.groups.push(ports);
        }
        id.min(u32::from(u16::MAX - 1)) as u16
    };
    gid[dsw] = Some(g);
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_matches_the_definition() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut a = [0u64; 64];
        for v in &mut a {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = x;
        }
        let orig = a;
        transpose64(&mut a);
        for (r, row) in orig.iter().enumerate() {
            for (c, col) in a.iter().enumerate() {
                assert_eq!(col >> r & 1, row >> c & 1, "({r}, {c})");
            }
        }
    }
}
