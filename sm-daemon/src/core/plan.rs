//! The planner: what the fabric should hold, as a pure function of what was discovered,
//! the configuration and the LID store. No I/O, no clock (the routing time is measured
//! only when the parameters carry a stopwatch), so it is unit-tested on its own.
//!
//! A [`Plan`] has the LIDs (in its copy of the topology), the forwarding table of every
//! switch, the PortInfo every port should hold, and the P_Key, SL-to-VL and VL arbitration
//! blocks. Programming sends only what differs from what the nodes hold.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sm_core::dump::{Lfts, SwitchLft};
use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx};
use sm_core::idx::{CowVec, IdxVec, OptIdx};
use sm_core::lft::LftTable;
use sm_core::lid::{LidError, LidStore};
use sm_core::partitions::{PKeyTables, pkey_tables_with};
use sm_core::qos::{self, PortKind};
use sm_mad::port_info::{self, Mtu, VlCap};
use sm_mad::{Lid, PortNum, attr, lft, sl2vl, vl_arb};
use sm_routing::{PathSl, RouteError, Routes, SwIdx, Topo, TopoError};

use super::Params;
use super::model::Discovered;

/// Why no plan could be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    #[error("LID assignment: {0}")]
    Lids(#[from] LidError),
    #[error("routing snapshot: {0}")]
    Snapshot(#[from] TopoError),
    #[error("routing: {0}")]
    Routing(#[from] RouteError),
}

/// A P_Key, SL-to-VL or VL arbitration block for one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableBlock {
    /// The port addressed (its agent is where the Set goes).
    pub port: PortIdx,
    pub attr: u16,
    pub modifier: u32,
    pub data: [u8; 64],
}

/// What the subnet should hold.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The discovered topology with the LIDs to give every end port.
    pub fabric: Fabric,
    /// Forwarding tables of the switches (index = LID), in the routing snapshot's order;
    /// shared per switch, so a repair that changes a few switches copies only theirs.
    pub lfts: Vec<LftTable>,
    /// The engine that made them.
    pub engine: &'static str,
    /// The rule their paths follow (repairs keep to it).
    pub rule: sm_routing::Rule,
    /// The SL of every path, when the engine spreads paths over virtual lanes (per source
    /// switch and destination LID, indexed like `lfts`); `None`: every path on SL 0.
    pub sl: Option<Arc<PathSl>>,
    /// Entries repairs moved since the tables were computed whole, with the port each had
    /// then: they go back when their path works again.
    /// Sorted by (switch, LID).
    pub displaced: Arc<Vec<((NodeIdx, u16), u8)>>,
    /// Layered paths repairs gave another SL, with the SL each had then: a path that comes
    /// back tries it first.
    pub sl_displaced: Arc<BTreeMap<(SwIdx, Lid), u8>>,
    /// A plan routed whole by a heavy sweep: what it changed against the plan before.
    pub churn: Churn,
    /// The switch behind each routing table (`lfts[i]` is `switches[i]`'s).
    pub switches: Vec<NodeIdx>,
    /// A node's routing table, if it is a switch.
    pub sw_of: IdxVec<NodeIdx, OptIdx<SwIdx>>,
    /// LinearFDBTop of every switch.
    pub max_lid: Lid,
    /// LIDs in use (every LID of every LMC range).
    pub lids: usize,
    /// The LID store changed (new ports, new LMC): it should be persisted.
    pub lids_changed: bool,
    pub engine_used: String,
    /// Engines of the chain that declined, with why.
    pub fallbacks: Vec<String>,
    /// Adaptive-routing hints in their dump format, when asked for.
    pub ar_hints: Option<String>,
    /// Wall time of the routing run (zero without a stopwatch).
    pub routing_time: Duration,
    /// The PortInfo each port should hold; `None` where the port's own is unknown.
    pub settings: CowVec<PortIdx, Option<port_info::Repr>>,
    /// P_Key, SL2VL and VLArb blocks, in port order.
    pub tables: Arc<Vec<TableBlock>>,
    /// The data VLs `tables` map SLs onto (`None`: one). A repair may leave it above what
    /// the paths use, so that links going and coming do not send every table each time.
    pub table_vls: Option<u8>,
    pub pkeys: Arc<PKeyTables>,
    /// Layered: the layers' dependencies the routes make, kept for the next repair
    /// (taken by it; `None` until the first).
    pub deps: Arc<Mutex<Option<sm_routing::relayer::Deps>>>,
}

impl Plan {
    /// The forwarding table a switch should hold, index = LID.
    pub fn lft(&self, n: NodeIdx) -> Option<&LftTable> {
        let s = self.sw_of.get(n)?.get()?;
        self.lfts.get(s.idx())
    }

    /// Block `b` of switch `n`'s table (entries past the table's end unrouted).
    pub fn lft_block(&self, n: NodeIdx, b: usize) -> Option<[u8; lft::ENTRIES]> {
        let t = self.lft(n)?;
        if b * lft::ENTRIES > t.len() {
            return None;
        }
        let chunk = t.run(b * lft::ENTRIES, lft::ENTRIES);
        let mut block = [lft::NO_ROUTE.0; lft::ENTRIES];
        let len = chunk.len().min(lft::ENTRIES);
        block[..len].copy_from_slice(&chunk[..len]);
        Some(block)
    }

    /// Blocks in switch `n`'s table.
    pub fn lft_blocks(&self, n: NodeIdx) -> usize {
        self.lft(n).map_or(0, |t| t.len().div_ceil(lft::ENTRIES))
    }

    /// A plan of tables made elsewhere (read from dumps, or built for a benchmark): the
    /// switches' forwarding tables and the P_Key tables; no port settings.
    pub fn from_tables(fabric: Fabric, lfts: Vec<(NodeIdx, Vec<u8>)>, pkeys: PKeyTables) -> Plan {
        let mut sw_of = IdxVec::filled(OptIdx::NONE, fabric.nodes().len());
        let mut switches = Vec::with_capacity(lfts.len());
        let mut lft = Vec::with_capacity(lfts.len());
        for (n, table) in lfts {
            if sw_of.get(n).is_some_and(|s: &OptIdx<SwIdx>| s.is_none()) {
                sw_of[n] = OptIdx::some(SwIdx(switches.len() as u32));
                switches.push(n);
                lft.push(table);
            }
        }
        let max_lid = Lid(lft
            .iter()
            .map(|t| t.len().saturating_sub(1))
            .max()
            .unwrap_or(0) as u16);
        Plan {
            lfts: lft.into_iter().map(LftTable::from).collect(),
            engine: "external",
            rule: sm_routing::Rule::Shortest,
            sl: None,
            displaced: Arc::default(),
            sl_displaced: Arc::default(),
            churn: Churn::default(),
            switches,
            sw_of,
            max_lid,
            lids: 0,
            lids_changed: false,
            engine_used: "external".into(),
            fallbacks: Vec::new(),
            ar_hints: None,
            routing_time: Duration::ZERO,
            settings: CowVec::filled(None, fabric.ports().len()),
            tables: Arc::default(),
            table_vls: None,
            pkeys: Arc::new(pkeys),
            deps: Arc::default(),
            fabric,
        }
    }

    /// The tables as the routing crate's validation and metrics take them (a copy).
    pub fn to_routes(&self) -> Routes {
        Routes {
            engine: self.engine,
            lft: self.lfts.iter().map(|t| t.to_vec()).collect(),
            ar: None,
            rule: self.rule.clone(),
            sl: self.sl.clone(),
            method: None,
        }
    }

    /// The SL the routes give paths from end port `src` to `dlid` (a CA's paths start at
    /// its switch); `None` when the engine uses no SLs or `src` hangs off no switch.
    pub fn path_sl(&self, src: PortIdx, dlid: Lid) -> Option<u8> {
        let t = self.sl.as_ref()?;
        let port = self.fabric.port(src);
        let node = if self.fabric.node(port.node).kind == NodeKind::Switch {
            port.node
        } else {
            self.fabric.port(port.remote?).node
        };
        let s = self.sw_of.get(node)?.get()?;
        Some(t.get(s, dlid))
    }

    /// Data VLs the paths use, when the engine spreads them over VLs.
    pub fn vls_used(&self) -> Option<u8> {
        self.sl.as_ref().map(|t| t.max() + 1)
    }

    /// The tables in the dump formats' exchange type (a copy: for dumps and offline use).
    pub fn to_lfts(&self) -> Lfts {
        let mut out = Lfts::new();
        out.switches = (0..self.switches.len()).map(|i| self.lft_of(i)).collect();
        out
    }

    /// Each switch's table in the dump formats' exchange type, one at a time: all of
    /// them at once take as much memory again as the plan's tables.
    pub fn each_lft<E>(&self, mut each: impl FnMut(&SwitchLft) -> Result<(), E>) -> Result<(), E> {
        (0..self.switches.len()).try_for_each(|i| each(&self.lft_of(i)))
    }

    fn lft_of(&self, i: usize) -> SwitchLft {
        let mut t = SwitchLft::for_switch(&self.fabric, self.switches[i], Lid(0));
        t.ports = self.lfts.get(i).map(|t| t.to_vec()).unwrap_or_default();
        t
    }

    /// The directed route from the SM's port `own` to node `from` that retraces, backwards,
    /// the LID route `from` takes to the SM: the way its trap just came, so it avoids the
    /// link whose loss the trap reports even when the route discovery found crosses it.
    /// `None` if the tables do not lead from `from` to the SM.
    pub fn route_back(&self, own: PortIdx, from: NodeIdx) -> Option<super::model::DrPath> {
        let f = &self.fabric;
        let sm_lid = usize::from(self.lid_of(own).0);
        let target = f.port(own).node;
        let mut path = super::model::DrPath::new();
        let mut n = from;
        while n != target {
            let exit = self.lft(n)?.get(sm_lid)?;
            let r = f.port(f.port_of(n, exit)?).remote?;
            if !path.push(f.port(r).num) {
                return None;
            }
            n = f.port(r).node;
        }
        path.reverse();
        Some(path)
    }

    /// The LID of port `p` (its switch's, for a switch port) in this plan.
    /// Whether the tables lead from switch `from` to `lid`, the LID of a switch.
    pub fn routes_to(&self, from: NodeIdx, lid: Lid) -> bool {
        let f = &self.fabric;
        let mut n = from;
        for _ in 0..64 {
            let Some(e) = self.lft(n).and_then(|t| t.get(usize::from(lid.0))) else {
                return false;
            };
            if e == 0 {
                return f.port_of(n, 0).is_some_and(|p| f.port(p).lid == lid);
            }
            let Some(next) = f.port_of(n, e).and_then(|q| f.port(q).remote) else {
                return false;
            };
            n = f.port(next).node;
            if f.node(n).kind != NodeKind::Switch {
                return false;
            }
        }
        false
    }

    pub fn lid_of(&self, p: PortIdx) -> Lid {
        self.fabric.port(self.fabric.lid_port(p)).lid
    }
}

/// Plans the subnet: LIDs (remembered, then held, then fresh), routes (the engine chain;
/// minhop when every engine declines, as OpenSM falls back), the PortInfo of every port
/// and the table blocks.
///
/// With a `previous` plan (unless `whole`: a new routing configuration) the routes are
/// kept: when its switches are this fabric's, under its indices (see
/// [`Discovered::rebase`]), only the routes the changes since broke are routed again, as a
/// repair does, and routes moved off links that work again go back; else the engine it used
/// routes the whole fabric, keeping every route that is still legal where it is. A fault
/// never changes the engine.
///
/// `held`: the tables the switches hold, as a new master read them: with no previous plan
/// the engine keeps their routes wherever they are legal.
pub fn plan(
    d: &Discovered,
    lids: &mut LidStore,
    p: &Params,
    previous: Option<&Plan>,
    whole: bool,
    held: Option<&std::collections::HashMap<sm_mad::Guid, Vec<u8>>>,
) -> Result<Plan, PlanError> {
    let mut fabric = d.fabric.clone();
    let before = lids.clone();
    // reassign_lids: the first plan of a run gives fresh LIDs, later ones keep them.
    let adopt_held = !(p.reassign_lids && previous.is_none());
    lids.assign_with(&mut fabric, p.lmc, adopt_held)?;
    let lids_changed = *lids != before;

    let previous = previous.filter(|_| p.sticky_routes);
    let kept_engine;
    let p = match previous.filter(|_| !whole) {
        Some(prev) => {
            if let Some(plan) = keep(prev, d, fabric.clone(), p, lids_changed)? {
                return Ok(plan);
            }
            kept_engine = Params {
                routing: same_engine(&p.routing, &prev.engine_used),
                ..p.clone()
            };
            &kept_engine
        }
        None => p,
    };

    let t0 = p.stopwatch.map(|f| f());
    let routed = route(d, &fabric, p, previous, held)?;
    let routing_time = match (t0, p.stopwatch) {
        (Some(t0), Some(f)) => Duration::from_nanos(f().saturating_sub(t0)),
        _ => Duration::ZERO,
    };
    let (churn, mut displaced) = match previous {
        Some(pl) => churn(pl, &fabric, &routed.switches, &routed.routes.lft),
        None => Default::default(),
    };
    if whole {
        // Another routing: the ports entries had before a fault are no home to go back to.
        displaced.clear();
    }

    let own_lid = fabric.port(fabric.lid_port(d.own)).lid;
    let mut settings = port_settings(d, &fabric, own_lid, p);
    let vls = routed.routes.sl.as_ref().map(|t| t.max() + 1);
    let (tables, pkeys) = tables(d, &fabric, &mut settings, p, vls);
    // Layered: the layers' dependencies, so that the first repair need not walk every
    // path (a few seconds at 40,000 hosts; a repair after a failure here walks them).
    let deps = match (&routed.routes.rule, &routed.routes.sl) {
        (sm_routing::Rule::Layered, Some(sl)) if !routed.routes.lft.is_empty() => {
            let topo = Topo::new(&fabric)?;
            let lft: Vec<&[u8]> = routed.routes.lft.iter().map(Vec::as_slice).collect();
            sm_routing::relayer::Deps::of(&topo, &lft, sl, 16).ok()
        }
        _ => None,
    };
    Ok(Plan {
        engine: routed.routes.engine,
        rule: routed.routes.rule,
        sl: routed.routes.sl,
        displaced: Arc::new(displaced),
        sl_displaced: Arc::default(),
        churn,
        lfts: routed.routes.lft.into_iter().map(LftTable::from).collect(),
        switches: routed.switches,
        sw_of: routed.sw_of,
        max_lid: routed.max_lid,
        lids: routed.lids,
        lids_changed,
        engine_used: routed.engine_used,
        fallbacks: routed.fallbacks,
        ar_hints: routed.ar_hints,
        routing_time,
        settings: settings.into(),
        tables: Arc::new(tables),
        table_vls: vls,
        pkeys: Arc::new(pkeys),
        deps: Arc::new(Mutex::new(deps)),
        fabric,
    })
}

/// `prev` with `extra` (switches new in `f`, after every node `prev` knew) among its
/// switches, their tables empty: a repair then routes them and the LIDs behind them, and
/// every route that works stays. Under up*/down* a new switch ranks one below its
/// highest-ranked neighbour, so the order stays total (and the routes deadlock-free).
fn with_switches(prev: &Plan, f: &Fabric, extra: &[NodeIdx]) -> Plan {
    let mut out = prev.clone();
    // Its switches index this fabric (what was there before is `prev`'s to tell).
    out.fabric = f.clone();
    let width = usize::from(prev.max_lid.0) + 1;
    for &n in extra {
        out.switches.push(n);
        out.lfts.push(LftTable::from(vec![lft::NO_ROUTE.0; width]));
    }
    let mut sw_of = IdxVec::filled(OptIdx::NONE, f.nodes().len());
    for (i, &n) in out.switches.iter().enumerate() {
        sw_of[n] = OptIdx::some(SwIdx(i as u32));
    }
    out.sw_of = sw_of;
    if let sm_routing::Rule::UpDown { rank, .. } = &mut out.rule {
        let first = rank.len();
        let bottom = rank
            .iter()
            .copied()
            .filter(|&r| r != u32::MAX)
            .max()
            .unwrap_or(0)
            + 1;
        rank.resize(out.switches.len(), u32::MAX);
        // New switches may hang off each other: settle in a few passes.
        for _ in 0..extra.len() {
            for i in first..out.switches.len() {
                let n = out.switches[i];
                let best = f
                    .node_ports(n)
                    .filter_map(|q| f.port(q).remote)
                    .filter_map(|r| out.sw_of[f.port(r).node].get())
                    .map(|s| rank[s.idx()])
                    .filter(|&r| r != u32::MAX)
                    .min();
                if let Some(r) = best {
                    rank[i] = rank[i].min(r + 1);
                }
            }
        }
        for r in &mut rank[first..] {
            if *r == u32::MAX {
                *r = bottom;
            }
        }
    }
    out
}

/// The engine chain from the engine `used` on: a sweep after a fault routes with the
/// engine the fabric was routed with (`auto` resolved once), falling back only as the chain
/// would.
fn same_engine(chain: &str, used: &str) -> String {
    let names: Vec<&str> = chain
        .split(',')
        .map(str::trim)
        .flat_map(|n| {
            if n == "auto" {
                sm_routing::chain::AUTO.split(',').collect()
            } else {
                vec![n]
            }
        })
        .collect();
    match names.iter().position(|&n| n == used) {
        Some(i) => names[i..].join(","),
        None => chain.to_string(),
    }
}

/// A heavy sweep's plan with `prev`'s routes kept: `None` when `fabric` (laid out on
/// `prev`'s indices) has switches `prev` had not (then the engine routes it whole).
fn keep(
    prev: &Plan,
    d: &Discovered,
    fabric: Fabric,
    p: &Params,
    lids_changed: bool,
) -> Result<Option<Plan>, PlanError> {
    use super::repair::LinkChange;
    let (pf, f) = (&prev.fabric, &fabric);
    // Switches new since `prev` (laid out after the nodes it knew).
    let extra: Vec<NodeIdx> = f
        .switches()
        .filter(|n| n.idx() >= pf.nodes().len())
        .collect();
    let aligned = !prev.lfts.is_empty()
        && f.nodes().len() >= pf.nodes().len()
        && pf.nodes().iter().enumerate().all(|(i, n)| {
            let now = f.node(NodeIdx(i as u32));
            now.guid == n.guid && now.num_ports == n.num_ports
        })
        && f.switches().count() == prev.switches.len() + extra.len()
        // Layers are not extended to a new switch: the engine routes it whole.
        && (extra.is_empty() || !matches!(prev.rule, sm_routing::Rule::Layered));
    if !aligned {
        return Ok(None);
    }
    let extended;
    let prev = if extra.is_empty() {
        prev
    } else {
        extended = with_switches(prev, f, &extra);
        &extended
    };
    // What changed since `prev`, in their shared indices.
    let mut changes = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, port) in f.ports().iter().enumerate() {
        let q = PortIdx(i as u32);
        let was = (i < pf.ports().len()).then(|| pf.port(q).remote).flatten();
        let now = port.remote;
        if was == now {
            continue;
        }
        if let Some(r) = was {
            if seen.insert((false, q.min(r), q.max(r))) {
                changes.push(LinkChange::Down(q, r));
            }
        }
        if let Some(r) = now {
            if seen.insert((true, q.min(r), q.max(r))) {
                changes.push(LinkChange::Up(q, r));
            }
        }
    }
    // Nodes back from being cut off, and new switches: their tables are checked whole.
    let back: Vec<NodeIdx> = (0..pf.nodes().len() as u32)
        .map(NodeIdx)
        .filter(|&n| {
            pf.node_ports(n).all(|q| pf.port(q).remote.is_none())
                && f.node_ports(n).any(|q| f.port(q).remote.is_some())
        })
        .chain(extra.iter().copied())
        .collect();
    let (mut plan, repaired) = repair_on(prev, d, fabric, &changes, &[], &back, p)?;
    let own_lid = plan.fabric.port(plan.fabric.lid_port(d.own)).lid;
    let mut settings = port_settings(d, &plan.fabric, own_lid, p);
    let vls = plan.sl.as_ref().map(|t| t.max() + 1);
    let (tables, pkeys) = tables(d, &plan.fabric, &mut settings, p, vls);
    plan.settings = settings.into();
    plan.tables = Arc::new(tables);
    plan.table_vls = vls;
    plan.pkeys = Arc::new(pkeys);
    plan.lids_changed = lids_changed;
    plan.churn = Churn {
        moved: repaired.moved.len() as u64,
        had_to: repaired.moved_min,
        restored: repaired.restored,
    };
    if let Some(why) = &repaired.full_reroute {
        tracing::info!("heavy sweep: {why}; routes computed whole, the legal ones kept");
    }
    Ok(Some(plan))
}

/// An entry moved off its port by a repair (or a broken path), with that port.
type Displaced = ((NodeIdx, u16), u8);

/// What a sweep that routed whole changed against the plan before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Churn {
    /// Entries whose port changed.
    pub moved: u64,
    /// Of those, the ones whose old path no longer delivers on the fabric found now.
    pub had_to: u64,
    /// Of those, the ones back on the port they had before a repair moved them.
    pub restored: u64,
}

/// Whether the path `prev`'s tables give from switch `n` (of `f`) to `lid` still delivers
/// on `f`.
fn delivers(prev: &Plan, f: &Fabric, mut n: NodeIdx, lid: u16) -> bool {
    let covers = |p: PortIdx| {
        let port = f.port(p);
        let base = port.lid.0;
        base != 0 && lid >= base && u32::from(lid) < u32::from(base) + (1u32 << port.lmc)
    };
    for _ in 0..64 {
        let entry = prev
            .fabric
            .node_by_guid(f.node(n).guid)
            .and_then(|pn| prev.lft(pn))
            .and_then(|t| t.get(usize::from(lid)));
        let e = match entry {
            None => return false,
            Some(e) if e == lft::NO_ROUTE.0 => return false,
            Some(0) => return f.port_of(n, 0).is_some_and(covers),
            Some(e) => e,
        };
        let Some(r) = f.port_of(n, e).and_then(|q| f.port(q).remote) else {
            return false;
        };
        let t = f.port(r).node;
        if f.node(t).kind != NodeKind::Switch {
            return covers(r);
        }
        n = t;
    }
    false
}

/// What `lfts` (whole new tables of `switches`, on `f`) change against `prev`, and the
/// entries displaced afterwards: those `prev` remembered that are not back yet, and those
/// that moved because their path broke (their old port, to go back to when it works).
fn churn(
    prev: &Plan,
    f: &Fabric,
    switches: &[NodeIdx],
    lfts: &[Vec<u8>],
) -> (Churn, Vec<Displaced>) {
    let mut c = Churn::default();
    let mut displaced = Vec::new();
    let remembered = |pn: NodeIdx, lid: u16| {
        prev.displaced
            .binary_search_by_key(&(pn, lid), |e| e.0)
            .ok()
            .map(|j| prev.displaced[j].1)
    };
    let mut new_of = HashMap::new();
    for (&n, t) in switches.iter().zip(lfts) {
        let Some(pn) = prev.fabric.node_by_guid(f.node(n).guid) else {
            continue;
        };
        new_of.insert(pn, (n, t));
        let Some(old) = prev.lft(pn) else { continue };
        let mut at = 0;
        while at < t.len().min(old.len()) {
            let a = old.run(at, sm_core::lft::CHUNK);
            let b = t.get(at..at + a.len()).unwrap_or_default();
            if a != b {
                for (k, (&was, &now)) in a.iter().zip(b).enumerate() {
                    if was == now || was == lft::NO_ROUTE.0 {
                        continue;
                    }
                    let lid = (at + k) as u16;
                    c.moved += 1;
                    let orig = remembered(pn, lid);
                    if orig == Some(now) {
                        c.restored += 1;
                    } else if !delivers(prev, f, n, lid) {
                        c.had_to += 1;
                        displaced.push(((n, lid), orig.unwrap_or(was)));
                    } else if let Some(o) = orig {
                        displaced.push(((n, lid), o));
                    }
                }
            }
            at += a.len().max(1);
        }
    }
    // Remembered entries that did not move stay remembered.
    for &((pn, lid), orig) in prev.displaced.iter() {
        let Some(&(n, t)) = new_of.get(&pn) else {
            continue;
        };
        let now = t.get(usize::from(lid)).copied();
        let was = prev.lft(pn).and_then(|o| o.get(usize::from(lid)));
        if now == was && now != Some(orig) {
            displaced.push(((n, lid), orig));
        }
    }
    displaced.sort_unstable_by_key(|&(k, _)| k);
    displaced.dedup_by_key(|e| e.0);
    (c, displaced)
}

struct Routed {
    routes: Routes,
    switches: Vec<NodeIdx>,
    sw_of: IdxVec<NodeIdx, OptIdx<SwIdx>>,
    max_lid: Lid,
    lids: usize,
    engine_used: String,
    fallbacks: Vec<String>,
    ar_hints: Option<String>,
}

/// Data VLs every link can carry under the OperationalVLs the plan gives its ports (as
/// [`port_setting`] does): what an engine that spreads paths over VLs may use.
fn link_vls(d: &Discovered, fabric: &Fabric, max_op_vls: u8) -> u8 {
    let mut vls = 15;
    for (i, port) in fabric.ports().iter().enumerate() {
        let (Some(r), Some(a)) = (port.remote, d.port_info(PortIdx(i as u32))) else {
            continue;
        };
        let Some(b) = d.port_info(r) else {
            continue;
        };
        let code = a
            .vl_cap
            .to_raw_value()
            .min(b.vl_cap.to_raw_value())
            .min(max_op_vls)
            .max(1);
        vls = vls.min(VlCap::from_raw_value(code).data_vls().unwrap_or(1));
    }
    vls
}

/// The switches a plan's up/down ranking is rooted at (none for other rules).
fn kept_roots(pl: &Plan) -> Vec<sm_mad::Guid> {
    match &pl.rule {
        sm_routing::Rule::UpDown { rank, .. } => rank
            .iter()
            .zip(&pl.switches)
            .filter(|&(&r, _)| r == 0)
            .map(|(_, &n)| pl.fabric.node(n).guid)
            .collect(),
        _ => Vec::new(),
    }
}

fn route(
    d: &Discovered,
    fabric: &Fabric,
    p: &Params,
    previous: Option<&Plan>,
    held: Option<&std::collections::HashMap<sm_mad::Guid, Vec<u8>>>,
) -> Result<Routed, PlanError> {
    let mut sw_of = IdxVec::filled(OptIdx::NONE, fabric.nodes().len());
    if fabric.switches().next().is_none() {
        // End ports cabled to each other with no switch between: nothing to route.
        let lids = fabric
            .end_ports()
            .filter(|&q| fabric.port(q).lid.0 != 0)
            .map(|q| 1usize << fabric.port(q).lmc)
            .sum();
        return Ok(Routed {
            routes: Routes {
                engine: "none",
                lft: Vec::new(),
                ar: None,
                rule: sm_routing::Rule::Shortest,
                sl: None,
                method: None,
            },
            switches: Vec::new(),
            sw_of,
            max_lid: Lid(0),
            lids,
            engine_used: "none".into(),
            fallbacks: Vec::new(),
            ar_hints: None,
        });
    }
    let topo = Topo::new(fabric)?;
    let mut opts = p.routing_options.clone();
    let configured = match opts.vl_budget {
        0 => sm_routing::layered::DEFAULT_VL_BUDGET,
        n => n,
    };
    opts.vl_budget = configured.min(link_vls(d, fabric, p.max_op_vls));
    opts.sm_lid = Some(fabric.port(fabric.lid_port(d.own)).lid).filter(|l| l.0 != 0);
    if p.sticky_routes {
        opts.previous = previous.map(|pl| {
            let guids = pl
                .switches
                .iter()
                .map(|&n| pl.fabric.node(n).guid)
                .collect();
            let wanted = pl
                .displaced
                .iter()
                .map(|&((n, lid), port)| (pl.fabric.node(n).guid, lid, port));
            Arc::new(
                sm_routing::PreviousTables::from_tables(guids, pl.lfts.clone()).with_wanted(wanted),
            )
        });
        opts.keep_roots = previous.map(kept_roots).unwrap_or_default();
        if opts.previous.is_none() {
            opts.previous = held.filter(|h| !h.is_empty()).map(|h| {
                let (guids, tables): (Vec<sm_mad::Guid>, Vec<LftTable>) = h
                    .iter()
                    .map(|(&g, t)| (g, LftTable::from(t.clone())))
                    .unzip();
                Arc::new(sm_routing::PreviousTables::from_tables(guids, tables))
            });
        }
    }
    let chain = match sm_routing::route_chain(&p.routing, &topo, &opts) {
        Err(RouteError::ChainExhausted(why)) => {
            tracing::warn!(
                "no engine of {} could route ({why}); using minhop",
                p.routing
            );
            let mut r = sm_routing::route_chain("minhop", &topo, &opts)?;
            r.fallbacks.insert(
                0,
                sm_routing::engine::Fallback {
                    engine: "chain",
                    reason: why,
                },
            );
            r
        }
        other => other?,
    };
    let ar_hints = chain.routes.ar.as_ref().map(|_| {
        let mut out = Vec::new();
        // Writing into memory cannot fail.
        let _ = sm_routing::ar::write_ar(&chain.routes, &topo, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    });
    for (i, &n) in topo.switches.iter().enumerate() {
        sw_of[n] = OptIdx::some(SwIdx(i as u32));
    }
    if !chain.fallbacks.is_empty() {
        tracing::debug!(fallbacks = ?chain.fallbacks, engine = chain.routes.engine, "engine chain fell back");
    }
    if let Some(m) = &chain.routes.method {
        tracing::info!(engine = chain.routes.engine, method = %m, "routed");
    }
    Ok(Routed {
        engine_used: chain.routes.engine.to_string(),
        fallbacks: chain
            .fallbacks
            .iter()
            .map(|f| format!("{}: {}", f.engine, f.reason))
            .collect(),
        ar_hints,
        switches: topo.switches.clone(),
        sw_of,
        max_lid: topo.max_lid(),
        lids: topo.dests.iter().map(|d| 1usize << d.lmc).sum(),
        routes: chain.routes,
    })
}

/// The PortInfo each port with a known PortInfo should hold: LIDs, SM LID, prefix, M_Key
/// and timeouts on end ports; NeighborMTU, OperationalVLs and HOQLife on linked ports.
fn port_settings(
    d: &Discovered,
    fabric: &Fabric,
    own_lid: Lid,
    p: &Params,
) -> IdxVec<PortIdx, Option<port_info::Repr>> {
    d.ports
        .indices()
        .map(|q| port_setting(d, fabric, own_lid, p, q))
        .collect()
}

/// The PortInfo port `q` should hold, if its own is known.
fn port_setting(
    d: &Discovered,
    fabric: &Fabric,
    own_lid: Lid,
    p: &Params,
    q: PortIdx,
) -> Option<port_info::Repr> {
    let cur = *d.port_info(q)?;
    let mut want = cur;
    if d.is_end_port(q) {
        let port = fabric.port(q);
        want.lid = port.lid;
        want.lmc = port.lmc;
        want.master_sm_lid = own_lid;
        want.gid_prefix = p.subnet_prefix;
        want.m_key = super::mkeys::wanted(p.m_key, p.m_key_per_port, port.guid);
        want.m_key_protect_bits = p.m_key_protect_bits;
        want.m_key_lease_period = p.m_key_lease_period;
        want.subnet_timeout = p.subnet_timeout;
    }
    // LinkSpeedEnabled as OpenSM's force_link_speed: 0 leaves it, 15 asks for every
    // supported speed, else the mask itself; only where the port does not have it.
    if fabric.port(q).num != 0 && p.force_link_speed != 0 {
        let target = if p.force_link_speed == 15 {
            cur.link_speed_supported
        } else {
            p.force_link_speed
        };
        if cur.link_speed_enabled != target {
            want.link_speed_enabled = p.force_link_speed;
        }
    }
    // LinkSpeedExtEnabled likewise (force_link_speed_ext), on ports that have extended
    // speeds: 31 asks for every supported one, 30 for none.
    let fse = p.force_link_speed_ext;
    if fabric.port(q).num != 0 && fse != 0 && cur.link_speed_ext_supported != 0 {
        let target = match fse {
            31 => cur.link_speed_ext_supported,
            30 => 0,
            m => m,
        };
        if cur.link_speed_ext_enabled != target {
            want.link_speed_ext_enabled = fse;
        }
    }
    if let Some(r) = fabric.port(q).remote {
        if let Some(peer) = d.port_info(r) {
            let mtu = cur.mtu_cap.to_raw_value().min(peer.mtu_cap.to_raw_value());
            want.neighbor_mtu = Mtu::from_raw_value(mtu);
            let vls = cur
                .vl_cap
                .to_raw_value()
                .min(peer.vl_cap.to_raw_value())
                .min(p.max_op_vls)
                .max(1);
            want.operational_vls = VlCap::from_raw_value(vls);
            if d.is_switch(fabric.port(q).node) {
                want.hoq_life = if d.is_switch(fabric.port(r).node) {
                    p.hoq_life
                } else {
                    p.leaf_hoq_life
                };
            }
        }
    }
    Some(want)
}

/// One forwarding-table entry a repair changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    pub switch: NodeIdx,
    pub lid: Lid,
    pub old: u8,
    pub new: u8,
}

/// What a repair did to the routes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Entries that changed.
    pub moved: Vec<Moved>,
    /// Entries that had to change: their port no longer started a legal shortest path
    /// (after routes computed whole: their port's link is gone).
    pub moved_min: u64,
    /// Entries that went back where they were before an earlier repair.
    pub restored: u64,
    /// (switch with CAs, switch LID) pairs the up*/down* ranks leave without a legal path.
    pub unrouted: u64,
    /// Layered: (source switch, LID) paths that a repair gave another SL.
    pub paths_new_sl: u64,
    /// LIDs whose moved entries drop packets first, before any takes its new port.
    pub drain: Vec<Lid>,
    /// Of all the paths that changed, those whose traffic on the SL its hosts hold could
    /// close a credit loop while the repair is programmed or until they ask the SA again.
    pub paths_exposed: u64,
    /// Why the routes were computed whole rather than repaired, if they were.
    pub full_reroute: Option<String>,
}

/// The plan after links changed (`changes`, already in `d`'s fabric; `back`: nodes reached
/// again): the same LIDs and tables; only the routes that no longer deliver are routed
/// again (see [`sm_routing::repair`]), routes moved by earlier repairs go back where their
/// path works again, and the settings of `ports` follow their links. When the damage cannot
/// be repaired locally the routes are computed whole (keeping every port that is still
/// legal), and the report says why.
pub(super) fn repair(
    prev: &Plan,
    d: &Discovered,
    changes: &[super::repair::LinkChange],
    ports: &[PortIdx],
    back: &[NodeIdx],
    p: &Params,
) -> Result<(Plan, Repaired), PlanError> {
    let mut fabric = prev.fabric.clone();
    for c in changes {
        c.apply(&mut fabric);
    }
    repair_on(prev, d, fabric, changes, ports, back, p)
}

/// [`repair`] on `fabric`, `prev.fabric` with `changes` made (and maybe ports that are new
/// since: their LIDs are routed as for a port that came up); its switches are `prev`'s.
fn repair_on(
    prev: &Plan,
    d: &Discovered,
    fabric: Fabric,
    changes: &[super::repair::LinkChange],
    ports: &[PortIdx],
    back: &[NodeIdx],
    p: &Params,
) -> Result<(Plan, Repaired), PlanError> {
    use super::repair::LinkChange;
    let t0 = p.stopwatch.map(|f| f());
    let local = if fabric.switches().next().is_none() || prev.lfts.is_empty() {
        Err("no switch tables to repair".to_string())
    } else {
        let topo = Topo::new(&fabric)?;
        let mut damage = sm_routing::repair::Damage::default();
        let mut came_up = false;
        for c in changes {
            match *c {
                LinkChange::Down(a, b) => damage.link_down(&topo, a, b),
                LinkChange::Up(a, b) => {
                    came_up = true;
                    for q in [a, b] {
                        let n = fabric.port(q).node;
                        if fabric.node(n).kind != NodeKind::Switch {
                            damage.check_lids.extend(lids_of(&fabric, q));
                        }
                    }
                }
            }
        }
        for &n in back {
            if let Some(s) = topo.sw_of(n) {
                damage.check_switches.push(s);
            }
            for q in fabric.node_ports(n) {
                if d.is_end_port(q) {
                    damage.check_lids.extend(lids_of(&fabric, q));
                }
            }
        }
        // Entries moved off a link go back as soon as it works again, whichever repair
        // finds it so (its return may have been seen by a look that found nothing else).
        if came_up || !prev.displaced.is_empty() {
            damage.restore = prev
                .displaced
                .iter()
                .filter_map(|&((n, lid), port)| Some((topo.sw_of(n)?, Lid(lid), port)))
                .collect();
        }
        // Layered tables are repaired as shortest paths around the damage, and the paths
        // that changed are layered again below.
        let rule = match prev.rule {
            sm_routing::Rule::Layered => sm_routing::Rule::Shortest,
            ref r => r.clone(),
        };
        sm_routing::repair::repair(&topo, &rule, &prev.lfts, &damage)
            .map(|out| (out, topo))
            .map_err(|e| e.to_string())
    };
    let (out, topo) = match local {
        Ok(x) => x,
        Err(why) => return rerouted(prev, d, fabric, ports, p, why),
    };
    let switches = topo.switches.clone();
    let (sw_of, max_lid, lids) = {
        let mut sw_of = IdxVec::filled(OptIdx::NONE, fabric.nodes().len());
        for (i, &n) in topo.switches.iter().enumerate() {
            sw_of[n] = OptIdx::some(SwIdx(i as u32));
        }
        let lids: usize = topo.dests.iter().map(|d| 1usize << d.lmc).sum();
        (sw_of, prev.max_lid.max(topo.max_lid()), lids)
    };
    let mut lfts = prev.lfts.clone();
    let mut ms: Vec<&sm_routing::repair::Move> = out
        .moved
        .iter()
        .filter(|m| m.switch.idx() < lfts.len())
        .collect();
    ms.sort_unstable_by_key(|m| (m.switch, m.lid));
    let mut moved = Vec::with_capacity(ms.len());
    let keys: Vec<(SwIdx, Lid)> = ms.iter().map(|m| (m.switch, m.lid)).collect();
    for m in ms {
        // Only the chunk written is copied from the table the snapshot shares.
        lfts[m.switch.idx()].set(usize::from(m.lid.0), m.new, lft::NO_ROUTE.0);
        moved.push(Moved {
            switch: switches[m.switch.idx()],
            lid: m.lid,
            old: m.old,
            new: m.new,
        });
    }
    let mut sl_displaced = prev.sl_displaced.clone();
    let (mut paths_new_sl, mut paths_exposed) = (0, 0);
    let mut other_ports = Vec::new();
    let mut deps = None;
    let mut drain = Vec::new();
    let sl = match (&prev.rule, &prev.sl) {
        (sm_routing::Rule::Layered, Some(old)) if !out.moved.is_empty() => {
            let tables: Vec<&LftTable> = lfts.iter().collect();
            // Entries going back where they were before a repair stay there: the balanced
            // state returns.
            let changed: Vec<(SwIdx, Lid, bool)> = out
                .moved
                .iter()
                .map(|m| {
                    let key = (switches[m.switch.idx()], m.lid.0);
                    let back = prev
                        .displaced
                        .binary_search_by_key(&key, |e| e.0)
                        .is_ok_and(|i| prev.displaced[i].1 == m.new);
                    (m.switch, m.lid, !back)
                })
                .collect();
            // Within the VLs in use where the paths fit there (the relayer tries them
            // first): one more sends every port a new SL-to-VL table. Else within the
            // budget the routes were made with.
            let budget = match p.routing_options.vl_budget {
                0 => sm_routing::layered::DEFAULT_VL_BUDGET,
                n => n,
            }
            .min(link_vls(d, &fabric, p.max_op_vls));
            let before: Vec<&LftTable> = prev.lfts.iter().collect();
            let before_topo = Topo::new(&prev.fabric)?;
            let change = sm_routing::relayer::Change {
                topo: &topo,
                before_topo: &before_topo,
                before: &before,
                tables: &tables,
                old,
                first: &prev.sl_displaced,
                moved: &changed,
                budget,
            };
            let mut kept = prev.deps.lock().ok().and_then(|mut g| g.take());
            let placed = sm_routing::relayer::relayer(&change, &mut kept);
            deps = kept;
            match placed {
                Ok(r) => {
                    let mut map = (*prev.sl_displaced).clone();
                    paths_new_sl = r.placed.iter().filter(|pl| pl.was != pl.now).count() as u64;
                    paths_exposed = r.placed.iter().filter(|pl| !pl.safe).count() as u64;
                    other_ports = r.rerouted;
                    drain = r.drained;
                    for pl in r.placed {
                        let key = (pl.switch, pl.lid);
                        match map.get(&key) {
                            Some(&orig) if orig == pl.now => {
                                map.remove(&key);
                            }
                            None if pl.was != pl.now => {
                                map.insert(key, pl.was);
                            }
                            _ => {}
                        }
                    }
                    sl_displaced = Arc::new(map);
                    Some(Arc::new(r.sl))
                }
                Err(why) => {
                    drop(topo);
                    return rerouted(prev, d, fabric, ports, p, why);
                }
            }
        }
        (sm_routing::Rule::Layered, Some(old)) => {
            let kept = prev.deps.lock().ok().and_then(|mut g| g.take());
            let before_topo = Topo::new(&prev.fabric)?;
            let tables: Vec<&LftTable> = lfts.iter().collect();
            deps = sm_routing::relayer::Deps::carried(kept, &before_topo, &topo, &tables, old);
            prev.sl.clone()
        }
        _ => prev.sl.clone(),
    };
    drop(topo);
    // Moved entries the layers wanted elsewhere.
    for (x, lid, port) in other_ports {
        lfts[x.idx()].set(usize::from(lid.0), port, lft::NO_ROUTE.0);
        if let Ok(i) = keys.binary_search(&(x, lid)) {
            moved[i].new = port;
        }
    }
    let routing_time = match (t0, p.stopwatch) {
        (Some(t0), Some(f)) => Duration::from_nanos(f().saturating_sub(t0)),
        _ => Duration::ZERO,
    };
    let displaced = displace(&prev.displaced, &moved);
    let mut settings = settings_for(prev, d, &fabric, ports, p);
    let vls = sl.as_ref().map(|t| t.max() + 1);
    let (tables, table_vls, pkeys) = if back.is_empty() {
        let (tables, table_vls) = tables_for_vls(prev, d, &fabric, &mut settings, p, vls);
        (tables, table_vls, prev.pkeys.clone())
    } else {
        // Nodes back may have missed a change of partitions (or of their own tables)
        // while away, and the last plan may not know them: their tables are made again.
        let vls = vls.max(prev.table_vls);
        let mut all: IdxVec<PortIdx, Option<port_info::Repr>> = settings.iter().cloned().collect();
        let (tables, pkeys) = tables(d, &fabric, &mut all, p, vls);
        settings = all.into();
        (Arc::new(tables), vls, Arc::new(pkeys))
    };
    let plan = Plan {
        lfts,
        engine: prev.engine,
        rule: prev.rule.clone(),
        sl,
        displaced: Arc::new(displaced),
        sl_displaced,
        churn: Churn::default(),
        switches,
        sw_of,
        max_lid,
        lids,
        lids_changed: false,
        engine_used: prev.engine_used.clone(),
        fallbacks: prev.fallbacks.clone(),
        ar_hints: prev.ar_hints.clone(),
        routing_time,
        settings,
        tables,
        table_vls,
        pkeys,
        deps: Arc::new(Mutex::new(deps)),
        fabric,
    };
    Ok((
        plan,
        Repaired {
            moved,
            moved_min: out.must,
            restored: out.restored,
            unrouted: out.unrouted,
            paths_new_sl,
            drain,
            paths_exposed,
            full_reroute: None,
        },
    ))
}

/// The entries displaced after `moved` (sorted like `prev`): an entry moving for the first
/// time remembers its old port; one moving back to the port it had is no longer displaced.
fn displace(prev: &[((NodeIdx, u16), u8)], moved: &[Moved]) -> Vec<((NodeIdx, u16), u8)> {
    let mut ups: Vec<&Moved> = moved.iter().collect();
    ups.sort_unstable_by_key(|m| (m.switch, m.lid));
    let mut out = Vec::with_capacity(prev.len() + ups.len());
    let mut ups = ups.into_iter().peekable();
    let mut prev = prev.iter().peekable();
    loop {
        let key_up = ups.peek().map(|m| (m.switch, m.lid.0));
        let key_prev = prev.peek().map(|e| e.0);
        match (key_prev, key_up) {
            (None, None) => break,
            (Some(kp), Some(ku)) if kp == ku => {
                if let (Some(&(k, orig)), Some(m)) = (prev.next(), ups.next()) {
                    if m.new != orig {
                        out.push((k, orig));
                    }
                }
            }
            (Some(kp), ku) if ku.is_none_or(|ku| kp < ku) => out.extend(prev.next().copied()),
            _ => {
                if let Some(m) = ups.next() {
                    out.push(((m.switch, m.lid.0), m.old));
                }
            }
        }
    }
    out
}

/// Every LID of end port `q`.
fn lids_of(f: &Fabric, q: PortIdx) -> impl Iterator<Item = Lid> + use<> {
    let port = f.port(q);
    let (base, lmc) = (port.lid.0, port.lmc.min(7));
    (0..1u16 << lmc)
        .map(move |i| Lid(base.wrapping_add(i)))
        .filter(|l| l.0 != 0)
}

/// The settings of `prev` with those of `ports` made again for `fabric`.
fn settings_for(
    prev: &Plan,
    d: &Discovered,
    fabric: &Fabric,
    ports: &[PortIdx],
    p: &Params,
) -> CowVec<PortIdx, Option<port_info::Repr>> {
    let mut settings = prev.settings.clone();
    // Ports of nodes new since `prev` (a heavy sweep's) have none yet.
    while settings.len() < fabric.ports().len() {
        settings.push(None);
    }
    if ports.is_empty() {
        return settings;
    }
    let own_lid = fabric.port(fabric.lid_port(d.own)).lid;
    for &q in ports {
        settings[q] = port_setting(d, fabric, own_lid, p, q);
    }
    settings
}

/// The repair's fallback: the routes computed whole for `fabric` (the previous ones kept
/// wherever they are still legal), every entry that changed listed.
fn rerouted(
    prev: &Plan,
    d: &Discovered,
    fabric: Fabric,
    ports: &[PortIdx],
    p: &Params,
    why: String,
) -> Result<(Plan, Repaired), PlanError> {
    tracing::info!("repair: {why}; routes computed whole");
    let t0 = p.stopwatch.map(|f| f());
    let p = &Params {
        routing: same_engine(&p.routing, &prev.engine_used),
        ..p.clone()
    };
    let routed = route(d, &fabric, p, Some(prev), None)?;
    let routing_time = match (t0, p.stopwatch) {
        (Some(t0), Some(f)) => Duration::from_nanos(f().saturating_sub(t0)),
        _ => Duration::ZERO,
    };
    let mut moved = Vec::new();
    let mut lfts = Vec::with_capacity(routed.routes.lft.len());
    for (i, mut table) in routed.routes.lft.into_iter().enumerate() {
        let node = routed.switches[i];
        if let Some(old) = prev.lft(node) {
            for (l, e) in table.iter_mut().enumerate() {
                let was = old.get(l).unwrap_or(lft::NO_ROUTE.0);
                // Nothing reaches a LID with no path either way: no Set for it.
                if *e == lft::NO_ROUTE.0 && was != lft::NO_ROUTE.0 {
                    *e = was;
                }
                if *e != was {
                    moved.push(Moved {
                        switch: node,
                        lid: Lid(l as u16),
                        old: was,
                        new: *e,
                    });
                }
            }
            if old.eq_slice(&table) {
                lfts.push(old.clone());
                continue;
            }
        }
        lfts.push(LftTable::from(table));
    }
    moved.sort_by_key(|m| (m.lid, m.switch));
    // What had to move whatever the engine: entries whose port no longer leads to a
    // switch or to the LID's own port (its link went down, or what was behind it).
    let forced = |m: &Moved| {
        m.old != lft::NO_ROUTE.0
            && m.old != 0
            && fabric
                .port_of(m.switch, m.old)
                .and_then(|q| fabric.port(q).remote)
                .is_none_or(|r| d.absent.contains(&fabric.port(r).node))
    };
    let moved_min = moved.iter().filter(|m| forced(m)).count() as u64;
    // Those, and the ones displaced before, go back when their port works again.
    let was_displaced = |m: &Moved| {
        prev.displaced
            .binary_search_by_key(&(m.switch, m.lid.0), |e| e.0)
            .is_ok()
    };
    let remembered: Vec<Moved> = moved
        .iter()
        .filter(|m| forced(m) || was_displaced(m))
        .cloned()
        .collect();
    let displaced = displace(&prev.displaced, &remembered);
    let mut settings = settings_for(prev, d, &fabric, ports, p);
    let vls = routed.routes.sl.as_ref().map(|t| t.max() + 1);
    let (tables, table_vls) = tables_for_vls(prev, d, &fabric, &mut settings, p, vls);
    let plan = Plan {
        lfts,
        engine: routed.routes.engine,
        rule: routed.routes.rule,
        sl: routed.routes.sl,
        displaced: Arc::new(displaced),
        sl_displaced: Arc::default(),
        churn: Churn::default(),
        switches: routed.switches,
        sw_of: routed.sw_of,
        max_lid: prev.max_lid.max(routed.max_lid),
        lids: routed.lids,
        lids_changed: false,
        engine_used: routed.engine_used,
        fallbacks: routed.fallbacks,
        ar_hints: routed.ar_hints,
        routing_time,
        settings,
        tables,
        table_vls,
        pkeys: prev.pkeys.clone(),
        deps: Arc::default(),
        fabric,
    };
    Ok((
        plan,
        Repaired {
            moved,
            moved_min,
            restored: 0,
            unrouted: 0,
            paths_new_sl: 0,
            drain: Vec::new(),
            paths_exposed: 0,
            full_reroute: Some(why),
        },
    ))
}

/// The table blocks for paths on `vls` VLs: the previous plan's, unless the number of VLs
/// changed, when every port's SL-to-VL table (and the settings that go with it) changes.
fn tables_for_vls(
    prev: &Plan,
    d: &Discovered,
    fabric: &Fabric,
    settings: &mut CowVec<PortIdx, Option<port_info::Repr>>,
    p: &Params,
    vls: Option<u8>,
) -> (Arc<Vec<TableBlock>>, Option<u8>) {
    // Tables made for more VLs serve paths on fewer (SL i stays on VL i).
    if vls.unwrap_or(1) <= prev.table_vls.unwrap_or(1) {
        return (prev.tables.clone(), prev.table_vls);
    }
    let mut all: IdxVec<PortIdx, Option<port_info::Repr>> = settings.iter().cloned().collect();
    let (tables, _) = tables(d, fabric, &mut all, p, vls);
    *settings = all.into();
    (Arc::new(tables), vls)
}

/// An attribute as SMP data.
pub(super) fn emit_data<W: sm_mad::Wire>(w: &W) -> Option<[u8; 64]> {
    let mut data = [0u8; 64];
    w.emit(&mut data).ok().map(|_| data)
}

/// P_Key tables from the partitions, SL-to-VL and VL arbitration tables from QoS and from
/// the routes' SLs (`vls`: the data VLs the paths use, when the engine spreads them over
/// VLs); the PortInfo bits that go with them (enforcement, VLHighLimit) are set in
/// `settings`.
fn tables(
    d: &Discovered,
    fabric: &Fabric,
    settings: &mut IdxVec<PortIdx, Option<port_info::Repr>>,
    p: &Params,
    vls: Option<u8>,
) -> (Vec<TableBlock>, PKeyTables) {
    let mut out = Vec::new();
    let parts = pkey_tables_with(
        &p.partitions,
        fabric,
        fabric.port(d.own).guid,
        &p.pkey_options,
    );
    for (list, external) in [(&parts.end_ports, false), (&parts.switch_ports, true)] {
        for pk in list {
            let node = fabric.port(pk.port).node;
            let facts = &d.nodes[node];
            let cap = if external {
                facts.switch_info.map_or(0, |s| s.partition_enforcement_cap)
            } else {
                facts.info.partition_cap
            };
            let (blocks, dropped) = pk.blocks(cap);
            if !dropped.is_empty() {
                tracing::warn!(
                    node = %facts.info.node_guid,
                    port = pk.num,
                    dropped = dropped.len(),
                    "P_Key table larger than the port holds"
                );
                if external {
                    // As OpenSM does: no enforcement where the table does not fit.
                    continue;
                }
            }
            let port_bits = if d.is_switch(node) {
                u32::from(pk.num) << 16
            } else {
                0
            };
            for (b, block) in blocks.iter().enumerate() {
                if let Some(data) = emit_data(block) {
                    out.push(TableBlock {
                        port: pk.port,
                        attr: attr::P_KEY_TABLE,
                        modifier: b as u32 | port_bits,
                        data,
                    });
                }
            }
            if external {
                if let Some(w) = settings[pk.port].as_mut() {
                    let (inb, outb) = parts.enforcement.bits();
                    w.partition_enforcement_inbound = inb;
                    w.partition_enforcement_outbound = outb;
                }
            }
        }
    }
    if let Some(q) = vl_tables(&p.qos, vls) {
        qos_tables(d, settings, &q, &mut out);
    }
    (out, parts)
}

/// The QoS options that give every port its SL-to-VL and VL arbitration tables: the
/// configured ones, with the SL-to-VL map the routes need when their paths use more than
/// one VL (SL `i` on VL `i`, as `ibsm route --sl2vl-out` writes; deadlock freedom depends
/// on it, so it overrides `[qos] sl2vl`). Without QoS configured, the used VLs share the
/// low-priority arbitration table equally. `None`: no tables to program.
fn vl_tables(qos: &qos::QosOptions, vls: Option<u8>) -> Option<qos::QosOptions> {
    let vls = vls.filter(|&n| n > 1);
    let Some(n) = vls else {
        return qos.enabled.then(|| qos.clone());
    };
    let mut q = if qos.enabled {
        qos.clone()
    } else {
        let low: Vec<vl_arb::Entry> = (0..n).map(|vl| vl_arb::Entry::new(vl, 64)).collect();
        qos::QosOptions {
            enabled: true,
            high_limit: 0,
            vlarb_high: qos::VlArbTable::default(),
            vlarb_low: qos::VlArbTable::from_entries(&low).unwrap_or_default(),
            optimized_sl2vl: qos.optimized_sl2vl,
            ..qos::QosOptions::default()
        }
    };
    let map = std::array::from_fn(|sl| sm_routing::sl::vl_of(sl as u8, n));
    q.sl2vl = qos::Sl2Vl(map);
    for k in [&mut q.ca, &mut q.rtr, &mut q.sw0, &mut q.swe] {
        k.sl2vl = None;
    }
    Some(q)
}

fn qos_tables(
    d: &Discovered,
    settings: &mut IdxVec<PortIdx, Option<port_info::Repr>>,
    qos: &qos::QosOptions,
    out: &mut Vec<TableBlock>,
) {
    let f = &d.fabric;
    for (i, node) in f.nodes().iter().enumerate() {
        let n = NodeIdx(i as u32);
        let linked: Vec<PortIdx> = f
            .node_ports(n)
            .filter(|&q| f.port(q).num != 0 && f.port(q).remote.is_some())
            .collect();
        let kind = match node.kind {
            NodeKind::Switch => PortKind::SwitchExternal,
            NodeKind::Router => PortKind::Router,
            NodeKind::Ca => PortKind::Ca,
        };
        for &o in &linked {
            let Some(w) = settings[o].as_mut() else {
                continue;
            };
            let onum = f.port(o).num;
            let t = qos::tables(qos, kind, w.operational_vls);
            w.vl_high_limit = t.high_limit;
            if let Some(data) = emit_data(&sl2vl::Repr::new(t.sl2vl)) {
                if node.kind == NodeKind::Switch {
                    let block = |inum: u8| TableBlock {
                        port: o,
                        attr: attr::SL_TO_VL_MAPPING_TABLE,
                        modifier: sl2vl::Modifier::switch(PortNum(inum), PortNum(onum))
                            .to_attr_mod(),
                        data,
                    };
                    let si = d.nodes[n].switch_info;
                    let optimized = qos.optimized_sl2vl
                        && si.is_some_and(|si| si.optimized_sl_to_vl_mapping_programming & 1 != 0);
                    if optimized {
                        // One Set for every input port (as OpenSM's optimized SL2VL does;
                        // port 0 is among them only on an enhanced port 0).
                        out.push(TableBlock {
                            modifier: sl2vl::Modifier::all_inputs_to(PortNum(onum)).to_attr_mod(),
                            ..block(0)
                        });
                        if !si.is_some_and(|si| si.enhanced_port0) {
                            out.push(block(0));
                        }
                    } else {
                        // Input port 0 too: the switch's own packets leave by the same map.
                        let inputs =
                            std::iter::once(0).chain(linked.iter().map(|&i| f.port(i).num));
                        for inum in inputs {
                            out.push(block(inum));
                        }
                    }
                } else {
                    out.push(TableBlock {
                        port: o,
                        attr: attr::SL_TO_VL_MAPPING_TABLE,
                        modifier: 0,
                        data,
                    });
                }
            }
            if qos::QosTables::needs_vlarb(w.vl_cap) {
                for block in vl_arb::Block::ALL {
                    let Some(r) =
                        t.vlarb_block(block, w.vl_arbitration_low_cap, w.vl_arbitration_high_cap)
                    else {
                        continue;
                    };
                    let port_bits = if node.kind == NodeKind::Switch {
                        onum
                    } else {
                        0
                    };
                    let m = vl_arb::Modifier::switch_port(PortNum(port_bits), block);
                    if let Some(data) = emit_data(&r) {
                        out.push(TableBlock {
                            port: o,
                            attr: attr::VL_ARBITRATION_TABLE,
                            modifier: m.to_attr_mod(),
                            data,
                        });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_core::fabric::{NodeSpec, PortIdx};
    use sm_core::generate::{FatTree2, GenSpec, generate};
    use sm_mad::Guid;

    /// What discovery would find on a freshly powered `fabric` (no LIDs yet, linked ports
    /// in INIT), with the SM on the first linked CA port.
    fn discovered(fabric: Fabric) -> Discovered {
        let own = fabric
            .cas()
            .flat_map(|n| fabric.node_ports(n))
            .find(|&p| fabric.port(p).remote.is_some())
            .expect("a linked CA port");
        let params = crate::sa::DbParams {
            sm_port_guid: fabric.port(own).guid,
            ..crate::sa::DbParams::default()
        };
        let blank = Plan::from_tables(fabric, Vec::new(), PKeyTables::default());
        let mut d = crate::sa::reconstructed(&blank, &params);
        d.own = own;
        d
    }

    fn fat_tree() -> Fabric {
        generate(&GenSpec::FatTree2(FatTree2::new(4))).expect("a small fat-tree")
    }

    fn end_lids(plan: &Plan) -> Vec<(Guid, Lid)> {
        let f = &plan.fabric;
        let mut v: Vec<_> = f
            .end_ports()
            .filter(|&q| f.port(q).lid.0 != 0)
            .map(|q| (f.port(q).guid, f.port(q).lid))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn every_end_port_gets_a_lid_a_route_and_its_settings() {
        let d = discovered(fat_tree());
        let p = Params::default();
        let plan = plan(&d, &mut LidStore::new(), &p, None, false, None).expect("a plan");
        let f = &plan.fabric;
        let lids = end_lids(&plan);
        let expected = f.switches().count() + f.cas().count();
        assert_eq!(lids.len(), expected, "every switch and linked CA port");
        let mut seen: Vec<Lid> = lids.iter().map(|l| l.1).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), lids.len(), "LIDs are unique");
        assert_eq!(plan.max_lid, *seen.last().expect("LIDs"));
        assert!(plan.lids_changed);
        let own_lid = plan.lid_of(d.own);
        for n in f.switches() {
            let lft = plan.lft(n).expect("a switch has a table");
            for &lid in &seen {
                assert_ne!(
                    lft.get(lid.0 as usize),
                    Some(lft::NO_ROUTE.0),
                    "{} routes {lid}",
                    f.node(n).guid
                );
            }
        }
        for q in f.end_ports() {
            let Some(w) = &plan.settings[q] else { continue };
            assert_eq!(w.lid, f.port(q).lid);
            assert_eq!(w.master_sm_lid, own_lid);
            assert_eq!(w.gid_prefix, p.subnet_prefix);
        }
        // Switch-to-switch ports get the switch HOQLife, ports facing hosts the leaf one.
        for (q, w) in plan.settings.iter_enumerated() {
            let (Some(w), Some(r)) = (w, f.port(q).remote) else {
                continue;
            };
            if f.node(f.port(q).node).kind == NodeKind::Switch {
                let to_switch = f.node(f.port(r).node).kind == NodeKind::Switch;
                let want = if to_switch {
                    p.hoq_life
                } else {
                    p.leaf_hoq_life
                };
                assert_eq!(w.hoq_life, want);
            }
        }
    }

    #[test]
    fn plans_are_deterministic_and_keep_what_holds() {
        let d = discovered(fat_tree());
        let p = Params::default();
        let mut store = LidStore::new();
        let a = plan(&d, &mut store, &p, None, false, None).expect("a plan");
        let b = plan(&d, &mut LidStore::new(), &p, None, false, None).expect("a plan");
        assert_eq!(end_lids(&a), end_lids(&b));
        assert_eq!(a.lfts, b.lfts);
        // Again with the store and the previous plan: nothing moves.
        let c = plan(&d, &mut store, &p, Some(&a), false, None).expect("a plan");
        assert!(!c.lids_changed);
        assert_eq!(end_lids(&a), end_lids(&c));
        assert_eq!(a.lfts, c.lfts);
    }

    #[test]
    fn held_lids_are_kept_unless_lids_are_reassigned() {
        let mut d = discovered(fat_tree());
        // Every port already holds a LID, from a high range nobody else uses.
        let ends: Vec<PortIdx> = d.fabric.end_ports().collect();
        for (i, &q) in ends.iter().enumerate() {
            if let Some(pi) = d.ports[q].info.as_mut() {
                pi.lid = Lid(1000 + i as u16);
                d.fabric.port_mut(q).lid = pi.lid;
            }
        }
        let kept = plan(
            &d,
            &mut LidStore::new(),
            &Params::default(),
            None,
            false,
            None,
        )
        .expect("a plan");
        assert!(end_lids(&kept).iter().all(|(_, l)| l.0 >= 1000));
        let p = Params {
            reassign_lids: true,
            ..Params::default()
        };
        let fresh = plan(&d, &mut LidStore::new(), &p, None, false, None).expect("a plan");
        assert!(end_lids(&fresh).iter().all(|(_, l)| l.0 < 1000));
        // A later plan of the same run keeps what the first gave.
        let mut store = LidStore::new();
        let first = plan(&d, &mut store, &p, None, false, None).expect("a plan");
        let second = plan(&d, &mut store, &p, Some(&first), false, None).expect("a plan");
        assert_eq!(end_lids(&first), end_lids(&second));
    }

    #[test]
    fn m_key_protection_and_link_speed_are_planned() {
        let mut d = discovered(fat_tree());
        // One port runs fewer speeds than it supports.
        let slow = d
            .fabric
            .switches()
            .flat_map(|n| d.fabric.node_ports(n))
            .find(|&q| d.fabric.port(q).num != 0)
            .expect("a switch port");
        if let Some(pi) = d.ports[slow].info.as_mut() {
            pi.link_speed_supported = 7;
            pi.link_speed_enabled = 1;
        }
        let p = Params {
            m_key: 0x77,
            m_key_protect_bits: 2,
            m_key_lease_period: 60,
            ..Params::default()
        };
        let plan = plan(&d, &mut LidStore::new(), &p, None, false, None).expect("a plan");
        for (q, w) in plan.settings.iter_enumerated() {
            let Some(w) = w else { continue };
            if d.is_end_port(q) {
                assert_eq!(
                    (w.m_key, w.m_key_protect_bits, w.m_key_lease_period),
                    (0x77, 2, 60)
                );
            }
            let cur = d.port_info(q).expect("known");
            let lse = if q == slow {
                15
            } else {
                cur.link_speed_enabled
            };
            assert_eq!(w.link_speed_enabled, lse, "{q:?}");
        }
        let no_force = Params {
            force_link_speed: 0,
            ..Params::default()
        };
        let plan =
            super::plan(&d, &mut LidStore::new(), &no_force, None, false, None).expect("a plan");
        assert_eq!(plan.settings[slow].expect("known").link_speed_enabled, 1);
    }

    #[test]
    fn extended_speeds_are_forced_only_where_a_port_has_them() {
        use sm_mad::port_info::link_speed_ext::{EDR, HDR};
        let mut d = discovered(fat_tree());
        let mut ports = d
            .fabric
            .switches()
            .flat_map(|n| d.fabric.node_ports(n))
            .filter(|&q| d.fabric.port(q).num != 0);
        let (fast, plain) = (ports.next().unwrap(), ports.next().unwrap());
        if let Some(pi) = d.ports[fast].info.as_mut() {
            pi.link_speed_ext_supported = EDR | HDR;
            pi.link_speed_ext_enabled = EDR;
        }
        let with = |fse: u8| {
            let p = Params {
                force_link_speed_ext: fse,
                ..Params::default()
            };
            let plan = plan(&d, &mut LidStore::new(), &p, None, false, None).expect("a plan");
            let at = |q: PortIdx| plan.settings[q].expect("known").link_speed_ext_enabled;
            (at(fast), at(plain))
        };
        assert_eq!(with(0), (EDR, 0), "0 leaves it");
        assert_eq!(with(31), (31, 0), "every supported one, asked for");
        assert_eq!(with(30), (30, 0));
        assert_eq!(with(EDR), (EDR, 0), "already so: nothing to send");
        assert_eq!(with(HDR), (HDR, 0));
    }

    #[test]
    fn two_cas_cabled_back_to_back_are_planned_without_routes() {
        let mut f = Fabric::new();
        let a = f
            .add_node(NodeSpec::new(NodeKind::Ca, Guid(0x10), "a", 1))
            .expect("node a");
        let b = f
            .add_node(NodeSpec::new(NodeKind::Ca, Guid(0x20), "b", 1))
            .expect("node b");
        let (pa, pb) = (
            f.port_of(a, 1).expect("port"),
            f.port_of(b, 1).expect("port"),
        );
        f.connect(pa, pb).expect("a cable");
        let plan = plan(
            &discovered(f),
            &mut LidStore::new(),
            &Params::default(),
            None,
            false,
            None,
        )
        .expect("a plan without switches");
        assert!(plan.lfts.is_empty());
        assert_eq!(end_lids(&plan).len(), 2);
        assert_eq!(plan.lids, 2);
        assert!(plan.settings[pb].is_some());
    }
}
