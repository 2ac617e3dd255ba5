//! What every routing engine takes and gives: the [`Engine`] trait, its [`Options`], the
//! [`Routes`] it returns and why it may decline ([`RouteError`]). Engines depend on this
//! module and nothing above it; [`crate::chain`] picks an engine by name.

use sm_core::dump::{Lfts, NO_ROUTE, SwitchLft};
use sm_core::lft::LftTable;
use sm_mad::{Guid, Lid};

use crate::topo::{SwIdx, Topo};

/// What every engine may be told.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Root switches (up/down, fat-tree); empty = detect.
    pub roots: Vec<Guid>,
    /// Compute nodes (fat-tree): CA port GUIDs to route with priority; empty = every CA.
    pub compute_nodes: Vec<Guid>,
    /// Also compute adaptive-routing port groups.
    pub adaptive: bool,
    /// Tables the switches hold now: a LID keeps its port wherever that port is still one
    /// of the engine's legal minimal choices, so a change moves only the routes it must.
    pub previous: Option<std::sync::Arc<PreviousTables>>,
    /// Virtual lanes a layering engine may use (0 = its default, 8).
    pub vl_budget: u8,
    /// The SM's LID. It is routed as any other LID wherever a CA's traffic to the SM
    /// passes, so the balance does not depend on which port the SM sits on; at the other
    /// switches, which only switches' traps cross, it takes a candidate chosen per switch
    /// instead of the engine's, so that few switches send their traps through any one
    /// neighbour: when a link fails and the trap of the end whose route crossed it dies
    /// with it, the SM has few ports to read at the other end.
    pub sm_lid: Option<Lid>,
    /// The roots the tables in `previous` were ranked from (up/down). Where `roots` is
    /// empty, detection keeps these while they are still switches of the fabric and still
    /// give every pair a legal path: a fault that shifts a detection threshold (a host
    /// gone, a link down) must not re-rank the fabric and so move routes that still work.
    pub keep_roots: Vec<Guid>,
}

/// Forwarding tables by switch GUID (index = LID), as an SM last programmed them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreviousTables {
    by_guid: std::collections::HashMap<Guid, usize>,
    tables: Vec<LftTable>,
    /// Per switch, (LID, port) sorted by LID: a port to go back to before keeping the one
    /// held, where it is legal (an entry a repair moved off the port it had).
    wanted: std::collections::HashMap<Guid, Vec<(u16, u8)>>,
}

impl PreviousTables {
    /// From the exchange type of the dump formats.
    pub fn from_lfts(lfts: &Lfts) -> PreviousTables {
        PreviousTables {
            by_guid: lfts
                .switches
                .iter()
                .enumerate()
                .map(|(i, t)| (t.guid, i))
                .collect(),
            tables: lfts
                .switches
                .iter()
                .map(|t| LftTable::from_slice(&t.ports))
                .collect(),
            wanted: Default::default(),
        }
    }

    /// From tables an SM keeps (shared, not copied): `guids[i]` holds `tables[i]`.
    pub fn from_tables(guids: Vec<Guid>, tables: Vec<LftTable>) -> PreviousTables {
        PreviousTables {
            by_guid: guids.into_iter().enumerate().map(|(i, g)| (g, i)).collect(),
            tables,
            wanted: Default::default(),
        }
    }

    /// Ports to go back to where they are legal, preferred to the ports held: per switch,
    /// (LID, port).
    pub fn with_wanted(mut self, wanted: impl IntoIterator<Item = (Guid, u16, u8)>) -> Self {
        for (g, lid, port) in wanted {
            self.wanted.entry(g).or_default().push((lid, port));
        }
        for w in self.wanted.values_mut() {
            w.sort_unstable();
            w.dedup_by_key(|e| e.0);
        }
        self
    }

    /// The ports switch `guid` should go back to (sorted by LID).
    pub fn wanted(&self, guid: Guid) -> &[(u16, u8)] {
        self.wanted.get(&guid).map_or(&[], Vec::as_slice)
    }

    /// The table of one switch.
    pub fn get(&self, guid: Guid) -> Option<&LftTable> {
        let i = *self.by_guid.get(&guid)?;
        self.tables.get(i)
    }
}

/// Why an engine did not route.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// The fabric is not one this engine handles; the chain moves on.
    #[error("{engine}: not applicable: {reason}")]
    NotApplicable {
        engine: &'static str,
        reason: String,
    },
    /// Options the engine cannot honour.
    #[error("{engine}: {reason}")]
    BadOptions {
        engine: &'static str,
        reason: String,
    },
    #[error("unknown routing engine \"{0}\" (known: minhop, updn, ftree, layered)")]
    UnknownEngine(String),
    #[error("every engine of the chain declined: {0}")]
    ChainExhausted(String),
}

/// Adaptive-routing hints of one switch: port groups, and per LID the group of equal-cost
/// ports that obey the engine's deadlock rule (the static port always among them).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SwitchAr {
    /// Group id -> sorted port set.
    pub groups: Vec<Vec<u8>>,
    /// Per LID: group id, `u16::MAX` when the LID has no alternative (or no route).
    pub lid_group: Vec<u16>,
}

/// Forwarding tables, per switch in [`Topo`] order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Routes {
    /// The engine that produced them.
    pub engine: &'static str,
    /// `lft[s][lid]` = output port, [`NO_ROUTE`] when unset; every table spans at least
    /// `0..=max_lid`. Tables read from elsewhere ([`Routes::from_lfts`]) keep entries beyond
    /// the snapshot's highest LID: stale routes to LIDs nobody holds any more are findings.
    pub lft: Vec<Vec<u8>>,
    /// Adaptive-routing hints, when asked for.
    pub ar: Option<Vec<SwitchAr>>,
    /// The rule every path follows, so a repair can keep to it.
    pub rule: Rule,
    /// Service level of every path, for engines that layer; `None` when every path may
    /// use any SL (all on SL 0).
    pub sl: Option<std::sync::Arc<PathSl>>,
    /// How the engine went about it, where it has more than one way (the layered engine
    /// on a torus or mesh); for reports.
    pub method: Option<String>,
}

/// The service level of every path: per (source switch, destination LID), as every CA on
/// one switch follows the same path to a LID.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PathSl {
    lids: usize,
    sl: Vec<u8>,
}

impl PathSl {
    /// All on SL 0, for `switches` switches and LIDs `0..lids`.
    pub fn new(switches: usize, lids: usize) -> PathSl {
        PathSl {
            lids,
            sl: vec![0; switches * lids],
        }
    }

    /// The SL of paths from switch `s` to `lid` (0 outside the table).
    #[inline]
    pub fn get(&self, s: SwIdx, lid: Lid) -> u8 {
        let l = lid.0 as usize;
        if l >= self.lids {
            return 0;
        }
        self.sl.get(s.idx() * self.lids + l).copied().unwrap_or(0)
    }

    /// Sets the SL of paths from switch `s` to `lid` (ignored outside the table).
    #[inline]
    pub fn set(&mut self, s: SwIdx, lid: Lid, sl: u8) {
        let l = lid.0 as usize;
        if l < self.lids {
            if let Some(e) = self.sl.get_mut(s.idx() * self.lids + l) {
                *e = sl;
            }
        }
    }

    /// The SLs, a row of `lids` per switch, and the row's length.
    pub(crate) fn cells_mut(&mut self) -> (&mut [u8], usize) {
        (&mut self.sl, self.lids.max(1))
    }

    /// Renumbers the SLs in use to 0, 1, 2 ... in their order (SL 0 stays 0).
    pub fn compact(&mut self) {
        let mut used = [false; 256];
        used[0] = true;
        for &s in &self.sl {
            used[usize::from(s)] = true;
        }
        let mut to = [0u8; 256];
        let mut next = 0u8;
        for (s, &u) in used.iter().enumerate() {
            if u {
                to[s] = next;
                next = next.saturating_add(1);
            }
        }
        for s in &mut self.sl {
            *s = to[usize::from(*s)];
        }
    }

    /// The highest SL used.
    pub fn max(&self) -> u8 {
        self.sl.iter().copied().max().unwrap_or(0)
    }
}

/// The rule an engine's paths follow, kept with its tables so that a repair moving a few
/// routes keeps to it (see [`crate::repair`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Rule {
    /// Shortest paths, any direction (minhop): no turn is forbidden.
    #[default]
    Shortest,
    /// Up*/down* (updn, ftree): "up" means towards a lower `rank` (index = [`SwIdx`]).
    /// Between switches of equal rank the move goes up towards the lower GUID with
    /// `tie_by_guid` (updn's total order), and is never taken without (ftree's siblings).
    UpDown { rank: Vec<u32>, tie_by_guid: bool },
    /// Paths of any shape, kept deadlock-free by virtual layers ([`Routes::sl`]): moving
    /// one route can close a cycle in its layer, so changes are rerouted whole.
    Layered,
}

/// Directions of a move under a [`Rule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Up,
    Down,
    Never,
}

impl Rule {
    /// The direction of the move `s → t`.
    pub fn dir(&self, topo: &Topo<'_>, s: SwIdx, t: SwIdx) -> Dir {
        match self {
            Rule::Shortest | Rule::Layered => Dir::Down,
            Rule::UpDown { rank, tie_by_guid } => {
                let (rs, rt) = (rank.get(s.idx()), rank.get(t.idx()));
                match rt.cmp(&rs) {
                    std::cmp::Ordering::Less => Dir::Up,
                    std::cmp::Ordering::Greater => Dir::Down,
                    std::cmp::Ordering::Equal if *tie_by_guid => {
                        if topo.guid(t) < topo.guid(s) {
                            Dir::Up
                        } else {
                            Dir::Down
                        }
                    }
                    std::cmp::Ordering::Equal => Dir::Never,
                }
            }
        }
    }
}

impl Routes {
    /// Empty tables for every switch.
    pub fn empty(engine: &'static str, topo: &Topo<'_>) -> Routes {
        let len = topo.max_lid().0 as usize + 1;
        Routes {
            engine,
            lft: vec![vec![NO_ROUTE; len]; topo.num_switches()],
            ar: None,
            rule: Rule::Shortest,
            sl: None,
            method: None,
        }
    }

    /// The output port of switch `s` for `lid`.
    #[inline]
    pub fn port(&self, s: SwIdx, lid: Lid) -> Option<u8> {
        self.lft[s.idx()]
            .get(lid.0 as usize)
            .copied()
            .filter(|&p| p != NO_ROUTE)
    }

    /// The service level of paths from switch `s` to `lid` (0 without layers).
    #[inline]
    pub fn sl(&self, s: SwIdx, lid: Lid) -> u8 {
        self.sl.as_ref().map_or(0, |t| t.get(s, lid))
    }

    /// Virtual lanes the paths use (the identity SL-to-VL map: highest SL + 1).
    pub fn vls_used(&self) -> u8 {
        self.sl.as_ref().map_or(1, |t| t.max() + 1)
    }

    /// As the exchange type of the dump formats.
    pub fn to_lfts(&self, topo: &Topo<'_>) -> Lfts {
        let mut out = Lfts::new();
        for (i, table) in self.lft.iter().enumerate() {
            let n = topo.switches[i];
            let mut t = SwitchLft::for_switch(topo.fabric, n, Lid(0));
            t.ports = table.clone();
            out.switches.push(t);
        }
        out
    }

    /// Tables produced elsewhere, laid out for this snapshot. Switches without a table get
    /// an empty one; tables of switches the snapshot lacks are an error naming them. A
    /// table longer than the snapshot's LID range is kept whole (its entries above
    /// `max_lid` route LIDs nobody holds, which validation reports).
    pub fn from_lfts(lfts: &Lfts, topo: &Topo<'_>) -> Result<Routes, Guid> {
        let mut r = Routes::empty("external", topo);
        for t in &lfts.switches {
            let s = topo
                .fabric
                .node_by_guid(t.guid)
                .and_then(|n| topo.sw_of(n))
                .ok_or(t.guid)?;
            let row = &mut r.lft[s.idx()];
            if row.len() < t.ports.len() {
                row.resize(t.ports.len(), NO_ROUTE);
            }
            row[..t.ports.len()].copy_from_slice(&t.ports);
        }
        Ok(r)
    }
}

/// A routing engine.
pub trait Engine: Sync {
    /// The name used on the command line and in reports.
    fn name(&self) -> &'static str;
    /// Computes forwarding tables for every switch of the snapshot.
    fn route(&self, topo: &Topo<'_>, opts: &Options) -> Result<Routes, RouteError>;
}
