//! Repairs in proportion to the damage: after links went down or came back, only the routes
//! that no longer deliver are routed again, under the [`Rule`] the tables were made with;
//! every other entry keeps its port.
//!
//! # Why the untouched routes may stay
//!
//! For one destination LID, a switch whose path avoids every link that went down still
//! delivers, and its path is still shortest among the legal ones: taking links away
//! lengthens no path that avoids them. So only the switches whose path crossed a dead link
//! are *broken*. They are found backwards from the switches that hold a dead port (a switch
//! forwarding into a broken switch is broken), and no unbroken switch forwards into a
//! broken one, so their entries can change without touching anyone else's path.
//!
//! # Routing the broken switches
//!
//! The broken set is labelled by a shortest-path search seeded from the paths around it:
//! each unbroken neighbour offers its path's length and whether the path only goes down. A
//! move into a neighbour is legal when the rule allows it (up, then down, never down then
//! up; for [`Rule::Shortest`] every move is legal). On equal lengths an all-down label wins,
//! as in the engines, since it keeps the switch usable by the switches above it; when that
//! greedy choice strands a switch, the search is run again with every all-down path labelled
//! first. A broken switch keeps its port when the port still starts a path with the label
//! found; otherwise it takes, of the ports that do, the one this repair moved the fewest
//! routes onto (the tables were balanced: moved routes spread evenly keep them so), and
//! labels found for one LID serve the other LIDs of the same destination switch.
//!
//! # Coming back
//!
//! Entries moved by earlier repairs remember their old port. When links return, a LID's
//! remembered entries go back together, if with them every switch whose path passes through
//! them delivers, legally, and no further than before: the balanced state returns and
//! nothing else moves.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use sm_core::dump::NO_ROUTE;
use sm_core::fabric::{NodeKind, PortIdx};
use sm_core::idx::OptIdx;
use sm_core::lft::LftRead;
use sm_mad::{Guid, Lid};

use crate::routes::{Dir, Rule};
use crate::topo::{SwIdx, Topo};

/// Paths longer than this are not routed (as in the engines).
const MAX_LEN: u8 = 126;

/// What changed since the tables were computed, in the new snapshot's switch indices.
#[derive(Debug, Clone, Default)]
pub struct Damage {
    /// Switch ports whose link went down (the switch end of each dead link).
    pub failed: Vec<DeadPort>,
    /// Switches whose every entry is checked (they came back and may hold stale routes).
    pub check_switches: Vec<SwIdx>,
    /// LIDs checked at every switch (their port came back, maybe elsewhere).
    pub check_lids: Vec<Lid>,
    /// Entries earlier repairs moved, with the port each had before.
    pub restore: Vec<(SwIdx, Lid, u8)>,
}

impl Damage {
    /// Records the link between ports `a` and `b` as down: a [`DeadPort`] for each switch
    /// end. `topo` may be of the fabric before or after the link went: only its nodes
    /// and port numbers are read.
    pub fn link_down(&mut self, topo: &Topo<'_>, a: PortIdx, b: PortIdx) {
        let f = topo.fabric;
        for (q, r) in [(a, b), (b, a)] {
            if let Some(s) = topo.sw_of(f.port(q).node) {
                self.failed.push(DeadPort {
                    switch: s,
                    port: f.port(q).num,
                    peer: topo.sw_of(f.port(r).node),
                });
            }
        }
    }
}

/// A switch port whose link went down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadPort {
    pub switch: SwIdx,
    pub port: u8,
    /// The switch that was at the other end, if it was one: where the broken paths went.
    pub peer: Option<SwIdx>,
}

/// One entry a repair changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub switch: SwIdx,
    pub lid: Lid,
    pub old: u8,
    pub new: u8,
}

/// What a repair did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Every changed entry, by LID then switch.
    pub moved: Vec<Move>,
    /// Entries that had to change: their port no longer started a legal path of the
    /// shortest length (the port was on a dead link, or the path behind it got longer or
    /// illegal). `moved.len() - must` entries moved for another reason (returning, or
    /// keeping the all-down labels the engines prefer).
    pub must: u64,
    /// Entries of `moved` that went back to the port they had before an earlier repair.
    pub restored: u64,
    /// (switch with CAs, switch LID) pairs left without a legal path: the up*/down* ranks
    /// allow none any more (see [`repair`]).
    pub unrouted: u64,
}

/// Why the damage cannot be repaired locally.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepairError {
    #[error(
        "switch {switch} has no legal path to LID {lid} under the ranks the tables were made \
         with"
    )]
    Stranded { switch: Guid, lid: Lid },
    #[error("the tables are for {tables} switches, the fabric has {switches}")]
    Shape { tables: usize, switches: usize },
    #[error("layered tables are rerouted whole: a moved route can close a cycle in its layer")]
    Layered,
}

/// A path's label: hops to the destination switch and whether every move goes down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lab {
    len: u8,
    down: bool,
}

/// The label of `x` when it moves (`dir`) into a switch labelled `l`; `None` when the move
/// is illegal.
fn step(dir: Dir, l: Lab) -> Option<Lab> {
    if l.len >= MAX_LEN {
        return None;
    }
    match dir {
        Dir::Never => None,
        Dir::Up => Some(Lab {
            len: l.len + 1,
            down: false,
        }),
        Dir::Down => l.down.then_some(Lab {
            len: l.len + 1,
            down: true,
        }),
    }
}

/// A search event: (length, up?, look-up rather than offer?, switch); offers come before
/// look-ups at the same label.
type Event = (u8, bool, bool, u32);

/// `a` is a better label than `b` (shorter; all-down on equal lengths).
fn better(a: Lab, b: Option<Lab>) -> bool {
    b.is_none_or(|b| (a.len, !a.down) < (b.len, !b.down))
}

/// The search key of a bound (the very start when there is none).
fn key_of(b: Option<Lab>) -> (u8, bool) {
    b.map_or((0, false), |l| (l.len, !l.down))
}

/// Repairs `tables` (index = switch in `topo`, each indexed by LID) for `damage`; `topo` is
/// the fabric as it is now. Returns the entries to change.
pub fn repair<T: LftRead>(
    topo: &Topo<'_>,
    rule: &Rule,
    tables: &[T],
    damage: &Damage,
) -> Result<Outcome, RepairError> {
    if *rule == Rule::Layered {
        return Err(RepairError::Layered);
    }
    if tables.len() != topo.num_switches() {
        return Err(RepairError::Shape {
            tables: tables.len(),
            switches: topo.num_switches(),
        });
    }
    let mut r = Repairer::new(topo, rule, tables);
    // Which LIDs to look at, and where each one's damage starts.
    let mut seeds: BTreeMap<u16, Vec<SwIdx>> = BTreeMap::new();
    for d in &damage.failed {
        r.mark_dead(d);
        // A switch cut off from everything (going away whole) is nobody's way any more.
        if topo.adj(d.switch).is_empty() {
            continue;
        }
        for (lid, e) in tables[d.switch.idx()].entries().enumerate() {
            if e == d.port {
                seeds.entry(lid as u16).or_default().push(d.switch);
            }
        }
    }
    let mut restore: BTreeMap<u16, Vec<(SwIdx, u8)>> = BTreeMap::new();
    for &(s, lid, port) in &damage.restore {
        restore.entry(lid.0).or_default().push((s, port));
    }
    let mut check: BTreeMap<u16, ()> = damage.check_lids.iter().map(|l| (l.0, ())).collect();
    if !damage.check_switches.is_empty() {
        check.extend(topo.dests.iter().flat_map(|d| d.lids()).map(|l| (l.0, ())));
    }
    let mut lids: Vec<u16> = seeds
        .keys()
        .chain(restore.keys())
        .chain(check.keys())
        .copied()
        .collect();
    lids.sort_unstable();
    lids.dedup();
    // By destination switch: the labels found for one of its LIDs serve the others.
    lids.sort_by_key(|&l| (topo.dest_of(Lid(l)).map(|d| d.sw), l));
    let mut out = Outcome::default();
    for lid in lids {
        let lid = Lid(lid);
        let Some(dest) = topo.dest_of(lid) else {
            continue;
        };
        r.begin(lid, dest.sw, dest.sw_port);
        if let Some(back) = restore.get(&lid.0) {
            out.restored += r.restore(back);
        }
        let mut broken: Vec<SwIdx> = seeds.get(&lid.0).cloned().unwrap_or_default();
        if check.contains_key(&lid.0) {
            let all = damage.check_lids.contains(&lid);
            let from: Vec<SwIdx> = if all {
                (0..topo.num_switches() as u32).map(SwIdx).collect()
            } else {
                damage.check_switches.clone()
            };
            let mut failing = Vec::new();
            for s in from {
                r.failing_on_path(s, &mut failing);
            }
            broken.extend(failing);
        }
        // A seed whose entry was restored may deliver again.
        broken.retain(|&s| r.walk(s).is_none());
        if !broken.is_empty() {
            out.must += r.reroute(&broken)?;
        }
        r.finish(&mut out.moved);
    }
    out.moved.sort_unstable_by_key(|m| (m.lid, m.switch));
    out.unrouted = r.unrouted;
    Ok(out)
}

/// The state of one repair: the tables, and per LID the entries changed so far.
struct Repairer<'t, 'f, T> {
    topo: &'t Topo<'f>,
    rule: &'t Rule,
    tables: &'t [T],
    /// Switch at the far end of each (switch, port): `off[s] + port`.
    off: Vec<usize>,
    peer: Vec<OptIdx<SwIdx>>,
    /// The switch that was behind each dead port, same layout.
    dead: Vec<OptIdx<SwIdx>>,
    /// Connected component of every switch (switches in another component than a
    /// destination cannot reach it, and are left alone).
    comp: Vec<u32>,
    /// Switches with CAs or routers: losing every legal path is not allowed for them.
    has_ends: Vec<bool>,
    /// Routes this repair moved onto each (switch, port): `off[s] + port`.
    moved_to: Vec<u32>,
    // The LID at hand.
    lid: Lid,
    dest: SwIdx,
    dest_port: u8,
    /// Entries changed for this LID: stamped with `over_gen`.
    over_gen: Vec<u32>,
    over: Vec<u8>,
    over_at: u32,
    changed: Vec<SwIdx>,
    /// Walk results, stamped with `memo_gen`.
    memo_gen: Vec<u32>,
    memo: Vec<Option<Lab>>,
    memo_at: u32,
    /// Membership of the broken set, stamped.
    in_set: Vec<u32>,
    set_at: u32,
    label: Vec<Option<Lab>>,
    /// Set members labelled in this search (stamped with `set_at`), and their best offer
    /// so far.
    done: Vec<u32>,
    tentative: Vec<Option<Lab>>,
    /// The switch each set member forwards into, and its label before the damage (no
    /// new label can be better).
    parent: Vec<OptIdx<SwIdx>>,
    bound: Vec<Option<Lab>>,
    /// The port a member's look settled on (`NO_ROUTE`: none).
    choice: Vec<u8>,
    /// Labels for the destination switch at hand, stamped with `d_at`: the same for all
    /// its LIDs.
    d_gen: Vec<u32>,
    d_lab: Vec<Option<Lab>>,
    d_at: u32,
    d_sw: Option<SwIdx>,
    /// Switches with CAs left without a legal path to a switch's LID.
    unrouted: u64,
}

impl<'t, 'f, T: LftRead> Repairer<'t, 'f, T> {
    fn new(topo: &'t Topo<'f>, rule: &'t Rule, tables: &'t [T]) -> Self {
        let n = topo.num_switches();
        let mut off = Vec::with_capacity(n + 1);
        let mut total = 0;
        for s in 0..n {
            off.push(total);
            total += usize::from(topo.radix(SwIdx(s as u32))) + 1;
        }
        off.push(total);
        let mut peer = vec![OptIdx::NONE; total];
        for (s, &base) in off.iter().take(n).enumerate() {
            for a in topo.adj(SwIdx(s as u32)) {
                if let Some(slot) = peer.get_mut(base + usize::from(a.port)) {
                    *slot = OptIdx::some(a.peer);
                }
            }
        }
        let mut comp = vec![u32::MAX; n];
        let mut queue = Vec::new();
        for s in 0..n {
            if comp[s] != u32::MAX {
                continue;
            }
            comp[s] = s as u32;
            queue.push(SwIdx(s as u32));
            while let Some(x) = queue.pop() {
                for a in topo.adj(x) {
                    if comp[a.peer.idx()] == u32::MAX {
                        comp[a.peer.idx()] = s as u32;
                        queue.push(a.peer);
                    }
                }
            }
        }
        let mut has_ends = vec![false; n];
        for d in topo.dests.iter() {
            if d.kind != NodeKind::Switch {
                has_ends[d.sw.idx()] = true;
            }
        }
        Repairer {
            topo,
            rule,
            tables,
            off,
            dead: vec![OptIdx::NONE; peer.len()],
            peer,
            comp,
            has_ends,
            moved_to: vec![0; total],
            lid: Lid(0),
            dest: SwIdx(0),
            dest_port: 0,
            over_gen: vec![0; n],
            over: vec![NO_ROUTE; n],
            over_at: 0,
            changed: Vec::new(),
            memo_gen: vec![0; n],
            memo: vec![None; n],
            memo_at: 0,
            in_set: vec![0; n],
            set_at: 0,
            label: vec![None; n],
            done: vec![0; n],
            tentative: vec![None; n],
            parent: vec![OptIdx::NONE; n],
            bound: vec![None; n],
            choice: vec![NO_ROUTE; n],
            d_gen: vec![0; n],
            d_lab: vec![None; n],
            d_at: 0,
            d_sw: None,
            unrouted: 0,
        }
    }

    fn begin(&mut self, lid: Lid, dest: SwIdx, dest_port: u8) {
        if self.d_sw != Some(dest) {
            self.d_at += 1;
            self.d_sw = Some(dest);
        }
        self.lid = lid;
        self.dest = dest;
        self.dest_port = dest_port;
        self.over_at += 1;
        self.memo_at += 1;
        self.changed.clear();
    }

    /// The entry as the tables hold it.
    fn base(&self, s: SwIdx) -> u8 {
        self.tables[s.idx()]
            .entry(usize::from(self.lid.0))
            .unwrap_or(NO_ROUTE)
    }

    /// The entry with this LID's changes.
    fn entry(&self, s: SwIdx) -> u8 {
        if self.over_gen[s.idx()] == self.over_at {
            self.over[s.idx()]
        } else {
            self.base(s)
        }
    }

    fn set(&mut self, s: SwIdx, port: u8) {
        if self.over_gen[s.idx()] != self.over_at {
            self.over_gen[s.idx()] = self.over_at;
            self.changed.push(s);
        }
        self.over[s.idx()] = port;
    }

    fn peer(&self, s: SwIdx, port: u8) -> Option<SwIdx> {
        if port == 0 || port == NO_ROUTE {
            return None;
        }
        self.peer.get(self.off[s.idx()] + usize::from(port))?.get()
    }

    #[inline]
    fn dir(&self, s: SwIdx, t: SwIdx) -> Dir {
        match self.rule {
            Rule::Shortest => Dir::Down,
            _ => self.rule.dir(self.topo, s, t),
        }
    }

    /// The label of `s`'s path as the entries stand; `None`: it does not deliver legally.
    fn walk(&mut self, s: SwIdx) -> Option<Lab> {
        let mut path: Vec<SwIdx> = Vec::new();
        let mut at = s;
        let mut result = loop {
            if self.memo_gen[at.idx()] == self.memo_at {
                break self.memo[at.idx()];
            }
            // Provisional: a walk that comes back here is a loop.
            self.memo_gen[at.idx()] = self.memo_at;
            self.memo[at.idx()] = None;
            if at == self.dest {
                let l = (self.entry(at) == self.dest_port).then_some(Lab { len: 0, down: true });
                self.memo[at.idx()] = l;
                break l;
            }
            path.push(at);
            match self.peer(at, self.entry(at)) {
                Some(next) => at = next,
                None => break None,
            }
        };
        while let Some(x) = path.pop() {
            let e = self.entry(x);
            result = match (result, self.peer(x, e)) {
                (Some(l), Some(next)) => step(self.dir(x, next), l),
                _ => None,
            };
            self.memo[x.idx()] = result;
        }
        result
    }

    /// Adds to `broken` every switch on `s`'s path that does not deliver.
    fn failing_on_path(&mut self, s: SwIdx, broken: &mut Vec<SwIdx>) {
        if self.walk(s).is_some() || self.comp[s.idx()] != self.comp[self.dest.idx()] {
            return;
        }
        let mut at = s;
        for _ in 0..=MAX_LEN {
            if self.walk(at).is_some() {
                return;
            }
            broken.push(at);
            match self.peer(at, self.entry(at)) {
                Some(next) if next != s => at = next,
                _ => return,
            }
        }
    }

    /// Puts back the remembered entries of this LID when that works (see the module
    /// documentation); returns how many went back.
    fn restore(&mut self, back: &[(SwIdx, u8)]) -> u64 {
        let live: Vec<(SwIdx, u8)> = back
            .iter()
            .copied()
            .filter(|&(s, p)| (s == self.dest && p == self.dest_port) || self.peer(s, p).is_some())
            .filter(|&(s, p)| self.entry(s) != p)
            .collect();
        if live.is_empty() {
            return 0;
        }
        let starts: Vec<SwIdx> = live.iter().map(|&(s, _)| s).collect();
        // A path through a returning entry keeps its switches up to the first of them, and
        // labels only grow along a path: when no start's label gets worse (longer, or
        // no longer all-down), no path through them does, and nobody upstream need be
        // walked.
        if self.try_set(&live, &starts, true) {
            return live.len() as u64;
        }
        // Everyone whose path passes through a returning entry: the same switches before
        // and after (the entries leading to the first of them do not change).
        let upstream = self.closure(&starts);
        if self.try_set(&live, &upstream, false) {
            return live.len() as u64;
        }
        0
    }

    /// Sets `live`, and keeps it if every switch of `who` still delivers by a path no
    /// longer than before (and, with `keep_down`, still all-down where it was); else
    /// takes it back.
    fn try_set(&mut self, live: &[(SwIdx, u8)], who: &[SwIdx], keep_down: bool) -> bool {
        let was: Vec<Option<Lab>> = who.iter().map(|&w| self.walk(w)).collect();
        for &(s, p) in live {
            self.set(s, p);
        }
        self.memo_at += 1;
        let ok = who
            .iter()
            .zip(&was)
            .all(|(&w, was)| match (self.walk(w), was) {
                (None, _) => false,
                (Some(a), Some(b)) => a.len <= b.len && (!keep_down || a.down || !b.down),
                (Some(_), None) => true,
            });
        if !ok {
            for &(s, _) in live {
                let b = self.base(s);
                self.set(s, b);
            }
            self.memo_at += 1;
        }
        ok
    }

    /// `starts` and every switch whose path leads into them, each after the one it forwards
    /// into (noted in `parent`).
    fn closure(&mut self, starts: &[SwIdx]) -> Vec<SwIdx> {
        self.set_at += 1;
        let mut out: Vec<SwIdx> = Vec::new();
        for &s in starts {
            if self.in_set[s.idx()] != self.set_at {
                self.in_set[s.idx()] = self.set_at;
                self.parent[s.idx()] = OptIdx::NONE;
                out.push(s);
            }
        }
        let mut head = 0;
        while head < out.len() {
            let x = out[head];
            head += 1;
            for a in self.topo.adj(x) {
                let y = a.peer;
                if self.in_set[y.idx()] != self.set_at && self.entry(y) == a.peer_port {
                    self.in_set[y.idx()] = self.set_at;
                    self.parent[y.idx()] = OptIdx::some(x);
                    out.push(y);
                }
            }
        }
        out
    }

    /// Routes again the switches whose paths go through `seeds`; returns the entries that
    /// had to move.
    fn reroute(&mut self, seeds: &[SwIdx]) -> Result<u64, RepairError> {
        // Labels of the paths around the set (final: none of them enters it).
        self.memo_at += 1;
        let mut set = self.search_lazy(seeds);
        let mut set_at = self.set_at;
        if let Rule::UpDown { .. } = self.rule {
            if set
                .iter()
                .any(|&x| self.label[x.idx()].is_none() && self.reachable(x))
            {
                // Greedy labels stranded a switch: everything behind the damage, all-down
                // paths first. These labels are not the destination's greedy ones: not kept.
                set = self.closure(seeds);
                set_at = self.set_at;
                for &x in &set {
                    self.label[x.idx()] = None;
                }
                self.d_at += 1;
                self.search(&set, set_at, true);
                self.d_at += 1;
            }
        }
        // A switch's own LID (its management agent) may be left without a legal path from
        // some switches (a leaf that lost its only link to a top switch cannot reach it by
        // up*/down* moves): those entries stay, unrouted, as OpenSM leaves them, since an
        // illegal path there can close a credit loop. A CA's LID must stay reachable.
        let to_switch = self
            .topo
            .dest_of(self.lid)
            .is_some_and(|d| d.kind == NodeKind::Switch);
        let mut must = 0;
        for &x in &set {
            let Some(l) = self.label[x.idx()] else {
                if self.reachable(x) && self.has_ends[x.idx()] {
                    if !to_switch {
                        return Err(RepairError::Stranded {
                            switch: self.topo.guid(x),
                            lid: self.lid,
                        });
                    }
                    self.unrouted += 1;
                }
                continue;
            };
            if x == self.dest && l.len == 0 {
                if self.entry(x) != self.dest_port {
                    must += 1;
                    let p = self.dest_port;
                    self.set(x, p);
                }
                continue;
            }
            let old = self.entry(x);
            // Most broken switches keep their port: the switch behind it found another way
            // as short as before.
            let by_old = match self.peer(x, old) {
                Some(y) => self
                    .label_of(y, set_at)
                    .and_then(|ly| step(self.dir(x, y), ly)),
                None => None,
            };
            if by_old == Some(l) {
                continue;
            }
            if by_old.is_none_or(|c| c.len != l.len) {
                must += 1;
            }
            // The look that labelled it found its route already.
            let chosen = self.choice[x.idx()];
            if chosen != NO_ROUTE {
                let offer = self
                    .peer(x, chosen)
                    .and_then(|y| Some((y, self.label_of(y, set_at)?)))
                    .and_then(|(y, ly)| step(self.dir(x, y), ly));
                if offer == Some(l) {
                    self.shift_load(x, old, chosen);
                    self.set(x, chosen);
                    continue;
                }
            }
            let mut best: Option<((u32, u8), u8)> = None;
            let topo = self.topo;
            for &a in topo.adj(x) {
                let Some(ly) = self.label_of(a.peer, set_at) else {
                    continue;
                };
                if step(self.dir(x, a.peer), ly) != Some(l) {
                    continue;
                }
                let load = self.load(x, a.port);
                if best.is_none_or(|(bl, _)| load < bl) {
                    best = Some((load, a.port));
                }
            }
            if let Some((_, p)) = best {
                self.shift_load(x, old, p);
                self.set(x, p);
            }
        }
        Ok(must)
    }

    /// Labels the switches whose paths the damage broke or lengthened: a shortest-path
    /// search from the paths around them, all-down labels winning ties. It starts at the
    /// seeds and grows only where a label got worse (the switches forwarding into one join),
    /// so the switches behind a switch that found another way as short are never looked at.
    /// A switch's old label bounds its new one: it looks at its neighbours only when the
    /// search reaches that bound without having given it the label through the switch it
    /// forwards to. Returns the set, in the order switches joined it.
    fn search_lazy(&mut self, seeds: &[SwIdx]) -> Vec<SwIdx> {
        self.set_at += 1;
        let set_at = self.set_at;
        let mut set = Vec::new();
        let mut heap: BinaryHeap<Reverse<Event>> = BinaryHeap::new();
        // A seed's old path, over the dead links, gives its old label: a bound on its new one.
        for &s in seeds {
            if self.in_set[s.idx()] != set_at {
                let b = self.old_label(s);
                self.join(s, b, (0, false), &mut set, &mut heap);
            }
        }
        while let Some(Reverse((len, up, scan, x))) = heap.pop() {
            let x = SwIdx(x);
            let cur = (len, up);
            if self.label[x.idx()].is_some() {
                continue;
            }
            if scan {
                let mut best: Option<Lab> = None;
                let mut waiting = Vec::new();
                let topo = self.topo;
                let adj = topo.adj(x);
                // Looking from a different neighbour for each LID, the first that offers the
                // old label (nothing can be better) ends the look and takes the route: the
                // routes moving off one port spread over the others.
                let turn = usize::from(self.lid.0) % adj.len().max(1);
                let bound = self.bound[x.idx()];
                for a in adj[turn..].iter().chain(&adj[..turn]) {
                    let y = a.peer;
                    let ly = if self.in_set[y.idx()] == set_at {
                        self.label[y.idx()]
                    } else {
                        let l = self.label_of(y, set_at);
                        if l.is_none() {
                            waiting.push(y);
                        }
                        l
                    };
                    if let Some(c) = ly.and_then(|ly| step(self.dir(x, y), ly)) {
                        if better(c, best) {
                            best = Some(c);
                            if Some(c) == bound {
                                self.choice[x.idx()] = a.port;
                                waiting.clear();
                                break;
                            }
                        }
                    }
                }
                // A neighbour whose path leads into the set waits for it: it joins when
                // even its old label would offer better than what is known.
                for y in waiting {
                    let offer = match self.bound_through_set(y) {
                        Some(Some(lb)) => step(self.dir(x, y), lb).is_some_and(|c| better(c, best)),
                        Some(None) => true,
                        None => false,
                    };
                    if offer {
                        self.pull(y, cur, &mut set, &mut heap);
                    }
                }
                if let Some(c) = best.filter(|&c| better(c, self.tentative[x.idx()])) {
                    self.tentative[x.idx()] = Some(c);
                    heap.push(Reverse((c.len, !c.down, false, x.0)));
                }
                continue;
            }
            let l = Lab { len, down: !up };
            if self.tentative[x.idx()] != Some(l) {
                continue;
            }
            self.label[x.idx()] = Some(l);
            self.d_gen[x.idx()] = self.d_at;
            self.d_lab[x.idx()] = Some(l);
            let worse = self.bound[x.idx()] != Some(l);
            let topo = self.topo;
            for &a in topo.adj(x) {
                let z = a.peer;
                if self.in_set[z.idx()] != set_at {
                    // Behind a switch whose label got worse, every path through it did.
                    if !worse || self.entry(z) != a.peer_port {
                        continue;
                    }
                    let b = self.bound[x.idx()].and_then(|lb| step(self.dir(z, x), lb));
                    self.join(z, b, cur, &mut set, &mut heap);
                }
                if self.label[z.idx()].is_some() {
                    continue;
                }
                if let Some(c) = step(self.dir(z, x), l) {
                    if better(c, self.tentative[z.idx()]) {
                        self.tentative[z.idx()] = Some(c);
                        heap.push(Reverse((c.len, !c.down, false, z.0)));
                    }
                }
            }
        }
        set
    }

    /// Adds `x` to the set with its old label `bound`; it will look around when the
    /// search reaches that label (not before `cur`).
    fn join(
        &mut self,
        x: SwIdx,
        bound: Option<Lab>,
        cur: (u8, bool),
        set: &mut Vec<SwIdx>,
        heap: &mut BinaryHeap<Reverse<Event>>,
    ) {
        self.in_set[x.idx()] = self.set_at;
        self.label[x.idx()] = None;
        self.tentative[x.idx()] = None;
        self.bound[x.idx()] = bound;
        self.choice[x.idx()] = NO_ROUTE;
        set.push(x);
        if self.d_gen[x.idx()] == self.d_at {
            if let Some(l) = self.d_lab[x.idx()] {
                self.tentative[x.idx()] = Some(l);
                heap.push(Reverse((l.len, !l.down, false, x.0)));
                return;
            }
        }
        if x == self.dest {
            self.tentative[x.idx()] = Some(Lab { len: 0, down: true });
            heap.push(Reverse((0, false, false, x.0)));
            return;
        }
        let k = key_of(bound).max(cur);
        heap.push(Reverse((k.0, k.1, true, x.0)));
    }

    /// Notes a dead link end, so old paths can still be followed over it.
    fn mark_dead(&mut self, d: &DeadPort) {
        if let (Some(t), Some(slot)) = (
            d.peer,
            self.dead
                .get_mut(self.off[d.switch.idx()] + usize::from(d.port)),
        ) {
            *slot = OptIdx::some(t);
        }
    }

    /// The label `s`'s path had before the damage (over the dead links).
    fn old_label(&self, s: SwIdx) -> Option<Lab> {
        let mut path = Vec::new();
        let mut at = s;
        let mut l = loop {
            if at == self.dest {
                break (self.entry(at) == self.dest_port).then_some(Lab { len: 0, down: true });
            }
            if path.len() > usize::from(MAX_LEN) || path.contains(&at) {
                break None;
            }
            path.push(at);
            let e = self.entry(at);
            let next = self.peer(at, e).or_else(|| {
                (e != 0 && e != NO_ROUTE)
                    .then(|| self.dead.get(self.off[at.idx()] + usize::from(e)))
                    .flatten()
                    .and_then(|t| t.get())
            });
            match next {
                Some(n) => at = n,
                None => break None,
            }
        };
        let mut next = at;
        while let Some(node) = path.pop() {
            l = l.and_then(|l| step(self.dir(node, next), l));
            next = node;
        }
        l
    }

    /// The old label of a switch outside the set whose path leads into it: `None` when the
    /// path does not, `Some(None)` when the label is unknown.
    fn bound_through_set(&self, y: SwIdx) -> Option<Option<Lab>> {
        let set_at = self.set_at;
        let mut path = vec![y];
        let mut at = y;
        let m = loop {
            if path.len() > usize::from(MAX_LEN) {
                return None;
            }
            match self.peer(at, self.entry(at)) {
                Some(n) if self.in_set[n.idx()] == set_at => break n,
                Some(n) if n != self.dest && !path.contains(&n) => {
                    path.push(n);
                    at = n;
                }
                _ => return None,
            }
        };
        let mut l = self.bound[m.idx()];
        let mut next = m;
        while let Some(node) = path.pop() {
            l = l.and_then(|l| step(self.dir(node, next), l));
            next = node;
        }
        Some(l)
    }

    /// A switch `y` outside the set whose walk fails: when its path leads into the set,
    /// it and the switches before it on the way join (their labels follow the set's).
    fn pull(
        &mut self,
        y: SwIdx,
        cur: (u8, bool),
        set: &mut Vec<SwIdx>,
        heap: &mut BinaryHeap<Reverse<Event>>,
    ) {
        let set_at = self.set_at;
        let mut path = vec![y];
        let mut at = y;
        let m = loop {
            if path.len() > usize::from(MAX_LEN) {
                return;
            }
            match self.peer(at, self.entry(at)) {
                Some(n) if self.in_set[n.idx()] == set_at => break n,
                Some(n) if n != self.dest && !path.contains(&n) => {
                    path.push(n);
                    at = n;
                }
                _ => return,
            }
        };
        let mut next = m;
        while let Some(node) = path.pop() {
            let b = self.bound[next.idx()].and_then(|lb| step(self.dir(node, next), lb));
            self.join(node, b, cur, set, heap);
            if let Some(c) = self.label[next.idx()].and_then(|ln| step(self.dir(node, next), ln)) {
                if better(c, self.tentative[node.idx()]) {
                    self.tentative[node.idx()] = Some(c);
                    heap.push(Reverse((c.len, !c.down, false, node.0)));
                }
            }
            next = node;
        }
    }

    /// Labels the set: a shortest-path search from the paths around it, all-down labels
    /// winning ties; with `down_first`, every all-down path is labelled before any other.
    /// Labels found earlier for the same destination switch are final and reused.
    fn search(&mut self, set: &[SwIdx], set_at: u32, down_first: bool) {
        let passes: &[Option<bool>] = if down_first {
            &[Some(true), Some(false)]
        } else {
            &[None]
        };
        let better = |a: Lab, b: Option<Lab>| b.is_none_or(|b| (a.len, !a.down) < (b.len, !b.down));
        for &only in passes {
            if only.is_none() {
                for &x in set {
                    if self.d_gen[x.idx()] == self.d_at {
                        self.label[x.idx()] = self.d_lab[x.idx()];
                        self.done[x.idx()] = set_at;
                    }
                }
            }
            // Tentative labels, best first.
            let mut heap: BinaryHeap<Reverse<(u8, bool, u32)>> = BinaryHeap::new();
            for &x in set {
                if self.done[x.idx()] == set_at && (only.is_none() || self.label[x.idx()].is_some())
                {
                    continue;
                }
                let mut best: Option<Lab> = None;
                if x == self.dest {
                    best = Some(Lab { len: 0, down: true });
                } else {
                    let topo = self.topo;
                    for a in topo.adj(x) {
                        let y = a.peer;
                        if self.in_set[y.idx()] == set_at && self.label[y.idx()].is_none() {
                            continue;
                        }
                        let Some(ly) = self.label_of(y, set_at) else {
                            continue;
                        };
                        if let Some(c) = step(self.dir(x, y), ly) {
                            if only.is_none_or(|d| d == c.down) && better(c, best) {
                                best = Some(c);
                            }
                        }
                    }
                }
                self.tentative[x.idx()] = best;
                if let Some(c) = best {
                    heap.push(Reverse((c.len, !c.down, x.0)));
                }
            }
            while let Some(Reverse((len, up, x))) = heap.pop() {
                let x = SwIdx(x);
                let l = Lab { len, down: !up };
                if self.label[x.idx()].is_some() || self.tentative[x.idx()] != Some(l) {
                    continue;
                }
                self.label[x.idx()] = Some(l);
                self.done[x.idx()] = set_at;
                if only.is_none() {
                    self.d_gen[x.idx()] = self.d_at;
                    self.d_lab[x.idx()] = Some(l);
                }
                let topo = self.topo;
                for a in topo.adj(x) {
                    let z = a.peer;
                    if self.in_set[z.idx()] != set_at || self.label[z.idx()].is_some() {
                        continue;
                    }
                    if let Some(c) = step(self.dir(z, x), l) {
                        if only.is_none_or(|d| d == c.down) && better(c, self.tentative[z.idx()]) {
                            self.tentative[z.idx()] = Some(c);
                            heap.push(Reverse((c.len, !c.down, z.0)));
                        }
                    }
                }
            }
        }
    }

    /// The label of `y`: found by the search inside the set, by a walk outside it (kept
    /// for the other LIDs of the destination switch: a path that still works is still
    /// shortest).
    fn label_of(&mut self, y: SwIdx, set_at: u32) -> Option<Lab> {
        if self.in_set[y.idx()] == set_at {
            return self.label[y.idx()];
        }
        if self.d_gen[y.idx()] == self.d_at {
            return self.d_lab[y.idx()];
        }
        let l = self.walk(y);
        if l.is_some() {
            self.d_gen[y.idx()] = self.d_at;
            self.d_lab[y.idx()] = l;
        }
        l
    }

    fn reachable(&self, x: SwIdx) -> bool {
        self.comp[x.idx()] == self.comp[self.dest.idx()]
    }

    /// The rank of `port` of `s` as a new home for a route: the routes this repair moved
    /// onto it, then a turn that starts at a different port for each LID. The tables were
    /// balanced; moved routes spread evenly over the candidates keep them so, without
    /// counting whole tables.
    fn load(&self, s: SwIdx, port: u8) -> (u32, u8) {
        let moved = self.moved_to[self.off[s.idx()] + usize::from(port)];
        (moved, port.wrapping_sub(self.lid.0 as u8))
    }

    fn shift_load(&mut self, s: SwIdx, _from: u8, to: u8) {
        self.moved_to[self.off[s.idx()] + usize::from(to)] += 1;
    }

    /// This LID's changes, against the tables.
    fn finish(&mut self, out: &mut Vec<Move>) {
        let mut changed = std::mem::take(&mut self.changed);
        changed.sort_unstable();
        for &s in &changed {
            let (old, new) = (self.base(s), self.entry(s));
            if old != new {
                out.push(Move {
                    switch: s,
                    lid: self.lid,
                    old,
                    new,
                });
            }
        }
        self.changed = changed;
    }
}
