//! Programming: the difference between the plan and what the nodes hold, as Sets.
//!
//! Three rounds. First, all at once (they do not depend on one another): every port's
//! settings where they differ (a linked port still in INIT moves to ARMED in the same Set),
//! SwitchInfo where it differs, the LFT blocks a switch does not hold, and the P_Key /
//! SL2VL / VLArb blocks not held. Then every port still INIT to ARMED; then every ARMED
//! port to ACTIVE. Each round is a cursor that makes the next Set only when the request
//! window has room, so no round is ever materialised whole.
//!
//! One function per kind of Set decides whether it is needed and what it carries
//! ([`port_settings`], [`switch_info`], [`lft_block`], [`table_block`], [`port_state`]).
//!
//! A Set that goes unanswered after its retries does not stop the sweep. When the three
//! rounds are done and some went unanswered, they run again (up to [`PASSES`]): each
//! function sends only what the nodes still do not hold, so a pass costs what was lost.
//! What is still unanswered after the last pass is reported as missing.

use sm_core::fabric::{NodeIdx, PortIdx};
use sm_core::idx::IdxVec;
use sm_mad::port_info::{self, PhysPortState, PortState};
use sm_mad::{Guid, Lid, MadStatus, attr, lft, smp, switch_info};

use super::discover::PASSES;
use super::model::{Discovered, Missing};
use super::plan::{Plan, TableBlock, emit_data};
use super::report::SweepReport;
use super::shadow::{Shadow, TableKey};
use super::{Params, Purpose, Target, Work};

/// The round under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Settings, SwitchInfo, LFT and table blocks.
    Settings,
    /// A repair's LFT Sets of one phase (see [`Scope::phases`]).
    LftPhase(u32),
    Armed,
    Active,
    /// Multicast trees, once the ports are up and the SA has its snapshot.
    Mcast,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cursor {
    Ports(u32),
    Switches(u32),
    Lft {
        node: u32,
        block: u32,
    },
    /// Blocks a repair touched that a switch still does not hold (a later pass).
    Touched(u32),
    Tables(u32),
    Phase(u32),
    States(u32),
    Done,
}

/// One LFT Set of a repair: the block as it should be after this phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LftSet {
    pub(super) node: NodeIdx,
    pub(super) block: u16,
    pub(super) data: [u8; 64],
    /// The block's final contents (the plan's).
    pub(super) last: bool,
}

/// What a repair programs, instead of the whole fabric.
#[derive(Debug, Default)]
pub(super) struct Scope {
    /// Ports whose settings and states are programmed.
    pub(super) ports: Vec<PortIdx>,
    /// Switches whose SwitchInfo is programmed.
    pub(super) switches: Vec<NodeIdx>,
    /// Switches (and nodes) programmed whole: every LFT block and table block (they came
    /// back without their state). Sorted.
    pub(super) whole: Vec<NodeIdx>,
    /// The LFT Sets of the routes that moved, phase by phase: in phase `k` the entries
    /// whose switch is `k + 1` hops from its destination along the new routes. A phase goes
    /// out when the one before is answered, so a switch takes its new route only after every
    /// switch downstream has: no state in between has a forwarding loop.
    pub(super) phases: Vec<Vec<LftSet>>,
    /// Every block the phases touch (a later pass sends those still not held).
    pub(super) touched: Vec<(NodeIdx, u16)>,
    /// The multicast trees are computed again: a link they may use went down, or nodes
    /// came back. Links between switches coming back leave the trees valid as they are.
    pub(super) mcast_trees: bool,
    /// The table blocks changed (the paths now use another number of VLs): every block
    /// a port does not hold goes out, not only those of `whole`.
    pub(super) all_tables: bool,
}

/// A programming round and how far its cursor got.
#[derive(Debug)]
pub(super) struct Programming {
    pub(super) stage: Stage,
    cursor: Cursor,
    /// Which pass over the rounds this is (0 first).
    pass: u32,
    /// Sets of this pass that went unanswered.
    pub(super) lost: Vec<Missing>,
    /// A repair's: what it covers (a heavy sweep covers everything).
    pub(super) scope: Option<Box<Scope>>,
}

/// What the rounds read.
pub(super) struct Ctx<'a> {
    pub(super) model: &'a Discovered,
    pub(super) plan: &'a Plan,
    pub(super) held: &'a Shadow,
    pub(super) p: &'a Params,
    /// End ports that took a client reregistration from this master already.
    pub(super) reregistered: &'a std::collections::HashSet<Guid>,
    /// The MulticastFDBTop a switch should hold as the multicast trees stand.
    pub(super) mcast_top: &'a dyn Fn(Guid) -> Lid,
}

/// A PortInfo Set with a port's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SettingsSet {
    pub(super) data: [u8; 64],
    /// The Set also moves the port from INIT to ARMED.
    pub(super) armed: bool,
    /// The Set asks the port's SA clients to register again.
    pub(super) rereg: bool,
}

impl Programming {
    pub(super) fn new(stage: Stage) -> Programming {
        Programming {
            stage,
            cursor: Self::start(stage),
            pass: 0,
            lost: Vec::new(),
            scope: None,
        }
    }

    /// A repair's programming: only `scope`.
    pub(super) fn repair(scope: Scope) -> Programming {
        Programming {
            scope: Some(Box::new(scope)),
            ..Programming::new(Stage::Settings)
        }
    }

    /// Whether another pass may follow this one.
    pub(super) fn passes_left(&self) -> bool {
        self.pass + 1 < PASSES
    }

    fn start(stage: Stage) -> Cursor {
        match stage {
            Stage::Settings => Cursor::Ports(0),
            Stage::LftPhase(_) => Cursor::Phase(0),
            Stage::Armed | Stage::Active => Cursor::States(0),
            Stage::Mcast => Cursor::Done,
        }
    }

    fn phases(&self) -> u32 {
        self.scope.as_ref().map_or(0, |s| s.phases.len() as u32)
    }

    /// The round after this one: the next stage; after ACTIVE, when Sets went unanswered
    /// or ports do not hold what they should (`unsettled`) and passes are left, the first
    /// round again; `None` after the multicast round.
    pub(super) fn next(mut self, unsettled: usize) -> Option<Programming> {
        let again = !self.lost.is_empty() || unsettled > 0;
        let phases = if self.pass == 0 { self.phases() } else { 0 };
        let stage = match self.stage {
            Stage::Settings if phases > 0 => Stage::LftPhase(0),
            Stage::Settings => Stage::Armed,
            Stage::LftPhase(k) if k + 1 < phases => Stage::LftPhase(k + 1),
            Stage::LftPhase(_) => Stage::Armed,
            Stage::Armed => Stage::Active,
            Stage::Active if again && self.pass + 1 < PASSES => {
                tracing::debug!(
                    pass = self.pass + 1,
                    lost = self.lost.len(),
                    unsettled,
                    "programming again what is not in place"
                );
                self.pass += 1;
                self.lost.clear();
                Stage::Settings
            }
            Stage::Active => Stage::Mcast,
            Stage::Mcast => return None,
        };
        self.stage = stage;
        self.cursor = Self::start(stage);
        Some(self)
    }

    /// The next Set of this round, counted in `report`; `None` when the round has sent
    /// everything.
    pub(super) fn next_work(&mut self, c: &Ctx<'_>, report: &mut SweepReport) -> Option<Work> {
        let f = &c.model.fabric;
        let scope = self.scope.as_deref();
        let port_at = |i: u32| match scope {
            Some(s) => s.ports.get(i as usize).copied(),
            None => (i < f.ports().len() as u32).then_some(PortIdx(i)),
        };
        loop {
            match self.cursor {
                Cursor::Ports(i) => {
                    let Some(port) = port_at(i) else {
                        self.cursor = Cursor::Switches(0);
                        continue;
                    };
                    self.cursor = Cursor::Ports(i + 1);
                    if let Some(s) = port_settings(c.model, c.plan, c.held, port, c.reregistered) {
                        report.port_info_sets += 1;
                        report.merged_armed += u64::from(s.armed);
                        report.client_reregisters += u64::from(s.rereg);
                        return Some(settings_work(c.model, port, s.armed, s.rereg, s.data));
                    }
                }
                Cursor::Switches(i) => {
                    let node = match scope {
                        Some(s) => s.switches.get(i as usize).copied(),
                        None => (i < f.nodes().len() as u32).then_some(NodeIdx(i)),
                    };
                    let Some(node) = node else {
                        self.cursor = Cursor::Lft { node: 0, block: 0 };
                        continue;
                    };
                    self.cursor = Cursor::Switches(i + 1);
                    // A node out of reach (kept while it is away) gets nothing: every Set
                    // would only time out.
                    if c.model.absent.contains(&node) {
                        continue;
                    }
                    if let Some(data) = switch_info(c, node) {
                        report.switch_info_sets += 1;
                        return Some(Work::set(
                            Purpose::SetSwitchInfo { node },
                            attr::SWITCH_INFO,
                            0,
                            Target::Node(node),
                            data,
                        ));
                    }
                }
                Cursor::Lft { node, block } => {
                    let n = match scope {
                        Some(s) => s.whole.get(node as usize).copied(),
                        None => (node < f.nodes().len() as u32).then_some(NodeIdx(node)),
                    };
                    let Some(n) = n else {
                        self.cursor = if scope.is_some() && self.pass > 0 {
                            Cursor::Touched(0)
                        } else {
                            Cursor::Tables(0)
                        };
                        continue;
                    };
                    if block as usize >= c.plan.lft_blocks(n) || c.model.absent.contains(&n) {
                        self.cursor = Cursor::Lft {
                            node: node + 1,
                            block: 0,
                        };
                        continue;
                    }
                    self.cursor = Cursor::Lft {
                        node,
                        block: block + 1,
                    };
                    if let Some(data) = lft_block(c.model, c.plan, c.held, n, block as usize) {
                        report.lft_blocks_sent += 1;
                        return Some(lft_work(n, block as u16, data, true));
                    }
                }
                Cursor::Touched(i) => {
                    let Some(&(n, block)) = scope.and_then(|s| s.touched.get(i as usize)) else {
                        self.cursor = Cursor::Tables(0);
                        continue;
                    };
                    self.cursor = Cursor::Touched(i + 1);
                    if let Some(data) = lft_block(c.model, c.plan, c.held, n, usize::from(block)) {
                        report.lft_blocks_sent += 1;
                        return Some(lft_work(n, block, data, true));
                    }
                }
                Cursor::Phase(i) => {
                    let Stage::LftPhase(k) = self.stage else {
                        self.cursor = Cursor::Done;
                        continue;
                    };
                    let set = scope
                        .and_then(|s| s.phases.get(k as usize))
                        .and_then(|p| p.get(i as usize));
                    let Some(set) = set else {
                        self.cursor = Cursor::Done;
                        continue;
                    };
                    self.cursor = Cursor::Phase(i + 1);
                    report.lft_blocks_sent += 1;
                    return Some(lft_work(set.node, set.block, set.data, set.last));
                }
                Cursor::Tables(i) => {
                    let Some(tb) = c.plan.tables.get(i as usize) else {
                        self.cursor = Cursor::Done;
                        continue;
                    };
                    self.cursor = Cursor::Tables(i + 1);
                    if c.model.absent.contains(&f.port(tb.port).node) {
                        continue;
                    }
                    if let Some(s) = scope {
                        if !s.all_tables && s.whole.binary_search(&f.port(tb.port).node).is_err() {
                            continue;
                        }
                    }
                    if let Some(key) = table_block(c.model, c.held, tb) {
                        if tb.attr == attr::P_KEY_TABLE {
                            report.pkey_blocks_sent += 1;
                        } else {
                            report.qos_sets += 1;
                        }
                        return Some(Work::set(
                            Purpose::SetTable { key, data: tb.data },
                            tb.attr,
                            tb.modifier,
                            Target::Port(tb.port),
                            tb.data,
                        ));
                    }
                }
                Cursor::States(i) => {
                    let Some(port) = port_at(i) else {
                        self.cursor = Cursor::Done;
                        continue;
                    };
                    self.cursor = Cursor::States(i + 1);
                    let (from, to) = match self.stage {
                        Stage::Armed => (PortState::Init, PortState::Armed),
                        _ => (PortState::Armed, PortState::Active),
                    };
                    if let Some(data) = port_state(c.model, port, from, to) {
                        report.port_info_sets += 1;
                        report.port_state_sets += 1;
                        return Some(Work::set(
                            Purpose::SetPortState { port, want: to },
                            attr::PORT_INFO,
                            u32::from(f.port(port).num),
                            Target::Port(port),
                            data,
                        ));
                    }
                }
                Cursor::Done => return None,
            }
        }
    }
}

fn lft_work(node: NodeIdx, block: u16, data: [u8; 64], last: bool) -> Work {
    Work::set(
        Purpose::SetLft { node, block, last },
        attr::LINEAR_FORWARDING_TABLE,
        u32::from(block),
        Target::Node(node),
        data,
    )
}

fn settings_work(m: &Discovered, port: PortIdx, armed: bool, rereg: bool, data: [u8; 64]) -> Work {
    let mut w = Work::set(
        Purpose::SetPortInfo {
            port,
            armed,
            rereg,
            tries: 0,
        },
        attr::PORT_INFO,
        u32::from(m.fabric.port(port).num),
        Target::Port(port),
        data,
    );
    if rereg {
        // Once: unanswered, the port is read to see whether it arrived.
        w.retries = Some(0);
    }
    w
}

/// The settings Set a port needs, if its PortInfo differs from the plan's (or the port is
/// to be asked for a client reregistration: it has not taken one from this master yet).
pub(super) fn port_settings(
    m: &Discovered,
    plan: &Plan,
    held: &Shadow,
    port: PortIdx,
    reregistered: &std::collections::HashSet<Guid>,
) -> Option<SettingsSet> {
    let (cur, want) = (m.port_info(port)?, plan.settings[port].as_ref()?);
    let rereg = !reregistered.contains(&m.fabric.port(port).guid)
        && m.is_end_port(port)
        && cur.capability_mask & port_info::cap::IS_CLIENT_REREGISTRATION_SUPPORTED != 0;
    if same_settings(cur, want) && !rereg {
        return None;
    }
    m.route_to(port)?;
    let p = m.fabric.port(port);
    // A linked port still in INIT goes to ARMED with its settings.
    let armed = cur.port_state == PortState::Init
        && p.remote.is_some()
        && !(m.is_switch(p.node) && p.num == 0);
    let plain = !armed && !rereg && essentials_differ(cur, want).is_none();
    let want = port_info::Repr {
        client_reregister: rereg,
        ..*want
    };
    let data = settings_data(&want, cur, armed)?;
    // The same Set to a port that answered it and kept what it reports now would be sent
    // every pass and every sweep, to no effect.
    if plain && held.settings_declined(port_key(m, port), declined_digest(&data, cur)) {
        return None;
    }
    Some(SettingsSet { data, armed, rereg })
}

/// A port as the shadow keys it.
fn port_key(m: &Discovered, port: PortIdx) -> (Guid, u8) {
    let p = m.fabric.port(port);
    (m.fabric.node(p.node).guid, p.num)
}

/// A settings Set together with the writable values a port reported (see
/// [`Shadow::settings_declined`]).
fn declined_digest(data: &[u8; 64], cur: &port_info::Repr) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    data.hash(&mut h);
    (
        cur.gid_prefix,
        cur.m_key_protect_bits,
        cur.m_key_lease_period,
        cur.link_speed_enabled,
        cur.link_speed_ext_enabled,
        cur.subnet_timeout,
        cur.neighbor_mtu.to_raw_value(),
        cur.operational_vls.to_raw_value(),
        cur.partition_enforcement_inbound,
        cur.partition_enforcement_outbound,
        cur.vl_high_limit,
        cur.hoq_life,
    )
        .hash(&mut h);
    h.finish()
}

/// The SwitchInfo Set a switch needs: LinearFDBTop, LifeTimeValue, PortStateChange
/// cleared, and MulticastFDBTop where supported, unless it already holds them.
pub(super) fn switch_info(c: &Ctx<'_>, node: NodeIdx) -> Option<[u8; 64]> {
    let m = c.model;
    let mut si: switch_info::Repr = m.nodes[node].switch_info?;
    let guid = m.fabric.node(node).guid;
    let port0 = m.fabric.port_of(node, 0).and_then(|p| m.port_info(p));
    let has_top = c.p.sa.mcast_top
        && port0.is_some_and(|pi| {
            pi.capability_mask & port_info::cap::IS_MULTICAST_FDB_TOP_SUPPORTED != 0
        });
    let mtop = (c.mcast_top)(guid);
    let max_lid = c.plan.max_lid;
    if si.linear_fdb_top == max_lid
        && si.life_time_value == c.p.switch_life_time
        && !si.port_state_change
        && c.held.top(guid) == Some(max_lid)
        && (!has_top || si.multicast_fdb_top == mtop)
    {
        return None;
    }
    if has_top {
        si.multicast_fdb_top = mtop;
    }
    si.linear_fdb_top = max_lid;
    si.life_time_value = c.p.switch_life_time;
    // PortStateChange as read: 1 (seen set) clears it, 0 leaves a change since for the
    // light sweep.
    emit_data(&si)
}

/// Block `block` of a switch's LFT, unless the switch holds it.
pub(super) fn lft_block(
    m: &Discovered,
    plan: &Plan,
    held: &Shadow,
    node: NodeIdx,
    block: usize,
) -> Option<[u8; 64]> {
    let guid = m.fabric.node(node).guid;
    if held.lft_held(guid, block) {
        return None;
    }
    plan.lft_block(node, block)
}

/// A P_Key / SL2VL / VLArb block's key, unless its node holds it already.
pub(super) fn table_block(m: &Discovered, held: &Shadow, tb: &TableBlock) -> Option<TableKey> {
    let p = m.fabric.port(tb.port);
    let key = (m.fabric.node(p.node).guid, p.num, tb.attr, tb.modifier);
    if held.table_held(&key, &tb.data) {
        return None;
    }
    m.route_to(tb.port)?;
    Some(key)
}

/// The PortInfo Set that moves a linked port from `from` to `to`.
pub(super) fn port_state(
    m: &Discovered,
    port: PortIdx,
    from: PortState,
    to: PortState,
) -> Option<[u8; 64]> {
    let cur = m.port_info(port)?;
    let p = m.fabric.port(port);
    if p.num == 0 || p.remote.is_none() || cur.port_state != from {
        return None;
    }
    m.route_to(port)?;
    let set = port_info::Repr {
        port_state: to,
        // Everything else "no change" or the values we already set.
        ..state_only(cur)
    };
    emit_data(&set)
}

/// A programming Set that went unanswered after its retries, as the report names it;
/// `None` for work that is not programming's.
pub(super) fn lost(m: &Discovered, w: &Work) -> Option<Missing> {
    let at = |p: PortIdx| {
        let port = m.fabric.port(p);
        (m.fabric.node(port.node).guid, Some(port.num))
    };
    let (guid, port, what) = match &w.purpose {
        Purpose::SetPortInfo { port, .. } | Purpose::VerifySettings { port, .. } => {
            let (g, n) = at(*port);
            (g, n, "PortInfo settings".to_string())
        }
        Purpose::SetPortState { port, want } | Purpose::VerifyPortState { port, want } => {
            let (g, n) = at(*port);
            (g, n, format!("PortState {want:?}"))
        }
        Purpose::SetSwitchInfo { node } => (m.fabric.node(*node).guid, None, "SwitchInfo".into()),
        Purpose::SetLft { node, block, .. } => (
            m.fabric.node(*node).guid,
            None,
            format!("LFT block {block}"),
        ),
        Purpose::SetTable { key, .. } => (key.0, Some(key.1), format!("table {:#06x}", key.2)),
        Purpose::SetMft { guid, modifier } => (
            *guid,
            None,
            format!(
                "MFT block {} position {}",
                modifier.block, modifier.position
            ),
        ),
        Purpose::SetMcastTop { guid } => (*guid, None, "MulticastFDBTop".into()),
        _ => return None,
    };
    Some(Missing {
        guid,
        port,
        behind: false,
        what,
    })
}

/// Ports that answer and do not hold what the plan says: settings not in place, or a
/// linked port (its neighbour known) not ACTIVE.
/// A repair looks only at the ports it programmed (`only`): the others did not change.
pub(super) fn unsettled(m: &Discovered, plan: &Plan, only: Option<&[PortIdx]>) -> Vec<Missing> {
    let mut out = Vec::new();
    let ports: Box<dyn Iterator<Item = PortIdx>> = match only {
        Some(qs) => Box::new(qs.iter().copied()),
        None => Box::new(m.ports.indices()),
    };
    for q in ports {
        let Some(cur) = m.ports.get(q).and_then(|f| f.info.as_ref()) else {
            continue;
        };
        let p = m.fabric.port(q);
        let guid = m.fabric.node(p.node).guid;
        let mut not = |what: String| {
            out.push(Missing {
                guid,
                port: Some(p.num),
                behind: false,
                what,
            })
        };
        if let Some(field) = plan.settings[q]
            .as_ref()
            .and_then(|w| essentials_differ(cur, w))
        {
            not(format!("PortInfo {field} not held"));
        }
        let peer_known = p.remote.is_some_and(|r| m.port_info(r).is_some());
        if p.num != 0 && peer_known && cur.port_state != PortState::Active {
            not(format!("not ACTIVE ({:?})", cur.port_state));
        }
    }
    out
}

/// What became of a programming answer.
#[derive(Debug)]
pub(super) enum Answered {
    Done,
    /// A settings Set with a client reregistration arrived (the port holds its settings).
    Arrived(PortIdx),
    /// Sent again differently (settings without the move to ARMED; a read of a port whose
    /// move was refused).
    Again(Box<Work>),
    Failed(String),
}

/// Takes a programming answer into the model and the shadow.
pub(super) fn on_answer(
    m: &mut Discovered,
    plan: &Plan,
    held: &mut Shadow,
    purpose: Purpose,
    s: &smp::Repr,
    retries: u32,
) -> Answered {
    let ok = s.status == MadStatus::OK;
    match purpose {
        Purpose::SetPortInfo {
            port,
            armed: true,
            rereg,
            ..
        } if !ok => {
            let data = match (plan.settings[port].as_ref(), m.port_info(port)) {
                (Some(w), Some(cur)) => settings_data(w, cur, false),
                _ => None,
            };
            let Some(data) = data else {
                return Answered::Failed(format!("{purpose:?}: status {:#06x}", s.status.0));
            };
            tracing::debug!(
                ?port,
                status = s.status.0,
                "settings with ARMED refused; sending them alone"
            );
            Answered::Again(Box::new(settings_work(m, port, false, rereg, data)))
        }
        Purpose::SetPortState { port, want } if !ok => {
            let num = m.fabric.port(port).num;
            Answered::Again(Box::new(Work::get(
                Purpose::VerifyPortState { port, want },
                attr::PORT_INFO,
                u32::from(num),
                Target::Port(port),
            )))
        }
        _ if !ok => Answered::Failed(format!("{purpose:?}: status {:#06x}", s.status.0)),
        Purpose::VerifySettings { port, tries } => {
            let Ok(pi) = s.attribute::<port_info::Repr>() else {
                return Answered::Done;
            };
            m.ports[port].info = Some(pi);
            match plan.settings[port].as_ref() {
                Some(w) if essentials_differ(&pi, w).is_none() => Answered::Arrived(port),
                // It never arrived: again, while tries are left (else the next pass).
                _ if tries < retries => {
                    match port_settings(m, plan, held, port, &Default::default()) {
                        Some(s) => {
                            let mut w = settings_work(m, port, s.armed, s.rereg, s.data);
                            if let Purpose::SetPortInfo { tries: t, .. } = &mut w.purpose {
                                *t = tries + 1;
                            }
                            Answered::Again(Box::new(w))
                        }
                        None => Answered::Done,
                    }
                }
                _ => Answered::Done,
            }
        }
        Purpose::VerifyPortState { port, .. } => {
            // Where the port is now; one still short of where it should be is taken up by
            // the next pass (its neighbour may not have been ARMED yet).
            if let Ok(pi) = s.attribute::<port_info::Repr>() {
                m.ports[port].info = Some(pi);
            }
            Answered::Done
        }
        Purpose::SetPortInfo { port, .. } => {
            if let Ok(pi) = s.attribute::<port_info::Repr>() {
                m.ports[port].info = Some(pi);
                if let Some(want) = plan.settings[port].as_ref() {
                    let kept = match (essentials_differ(&pi, want), settings_differ(&pi, want)) {
                        (None, Some(_)) => settings_data(want, &pi, false),
                        _ => None,
                    };
                    let digest = kept.map(|d| declined_digest(&d, &pi));
                    held.settings_answered(port_key(m, port), digest);
                }
            }
            Answered::Done
        }
        Purpose::SetPortState { port, .. } => {
            if let Ok(pi) = s.attribute::<port_info::Repr>() {
                m.ports[port].info = Some(pi);
            }
            Answered::Done
        }
        Purpose::SetSwitchInfo { node } => {
            if let Ok(si) = s.attribute::<switch_info::Repr>() {
                held.top_stored(m.fabric.node(node).guid, si.linear_fdb_top);
                m.nodes[node].switch_info = Some(si);
            }
            Answered::Done
        }
        Purpose::SetTable { key, data } => {
            held.table_stored(key, data);
            Answered::Done
        }
        Purpose::SetLft { node, block, last } => {
            // A block of a phase before its last holds neither the old nor the new table.
            if last {
                held.lft_stored(m.fabric.node(node).guid, usize::from(block));
            }
            Answered::Done
        }
        other => {
            tracing::debug!(?other, "not a programming answer");
            Answered::Done
        }
    }
}

/// The PortInfo Set that gives a port the settings of `want` (and moves it from INIT to
/// ARMED with `armed`); everything that is not ours to change is "no change" or zero.
fn settings_data(want: &port_info::Repr, cur: &port_info::Repr, armed: bool) -> Option<[u8; 64]> {
    let mut set = *want;
    set.port_state = if armed {
        PortState::Armed
    } else {
        PortState::NoChange
    };
    set.port_physical_state = PhysPortState::NoChange;
    set.link_width_enabled = 0;
    // The plan's LinkSpeedEnabled is what to write where it must change (0 elsewhere:
    // "no change").
    if set.link_speed_enabled == cur.link_speed_enabled {
        set.link_speed_enabled = 0;
    }
    if set.link_speed_ext_enabled == cur.link_speed_ext_enabled {
        set.link_speed_ext_enabled = 0;
    }
    set.link_down_default_state = port_info::LinkDownDefaultState::from_raw_value(0);
    emit_data(&set)
}

/// The writable settings the SM cares about are already in place.
fn same_settings(cur: &port_info::Repr, want: &port_info::Repr) -> bool {
    settings_differ(cur, want).is_none()
}

/// The settings a port must hold for the subnet to work through it: its LIDs, its SM, its
/// M_Key. (Agents may ignore the others, ibsim's the lease period and LinkSpeedEnabled 15,
/// "every supported speed"; they are sent where they differ, as OpenSM sends them.)
fn essentials_differ(cur: &port_info::Repr, want: &port_info::Repr) -> Option<&'static str> {
    let checks = [
        (cur.lid == want.lid, "LID"),
        (cur.lmc == want.lmc, "LMC"),
        (cur.master_sm_lid == want.master_sm_lid, "MasterSMLID"),
        (cur.m_key == want.m_key, "M_Key"),
    ];
    checks.iter().find(|c| !c.0).map(|c| c.1)
}

/// The first writable setting the SM cares about that is not in place.
fn settings_differ(cur: &port_info::Repr, want: &port_info::Repr) -> Option<&'static str> {
    // 15 is not a value a port reports: it asks for every speed the port supports.
    let speed_held = cur.link_speed_enabled == want.link_speed_enabled
        || (want.link_speed_enabled == 15 && cur.link_speed_enabled == cur.link_speed_supported);
    let ext_held = cur.link_speed_ext_enabled == want.link_speed_ext_enabled
        || (want.link_speed_ext_enabled == 31
            && cur.link_speed_ext_enabled == cur.link_speed_ext_supported)
        || (want.link_speed_ext_enabled == 30 && cur.link_speed_ext_enabled == 0);
    let checks = [
        (cur.lid == want.lid, "LID"),
        (cur.lmc == want.lmc, "LMC"),
        (cur.master_sm_lid == want.master_sm_lid, "MasterSMLID"),
        (cur.gid_prefix == want.gid_prefix, "GIDPrefix"),
        (cur.m_key == want.m_key, "M_Key"),
        (
            cur.m_key_protect_bits == want.m_key_protect_bits,
            "M_KeyProtectBits",
        ),
        (
            cur.m_key_lease_period == want.m_key_lease_period,
            "M_KeyLeasePeriod",
        ),
        (speed_held, "LinkSpeedEnabled"),
        (ext_held, "LinkSpeedExtEnabled"),
        (cur.subnet_timeout == want.subnet_timeout, "SubnetTimeOut"),
        (cur.neighbor_mtu == want.neighbor_mtu, "NeighborMTU"),
        (
            cur.operational_vls == want.operational_vls,
            "OperationalVLs",
        ),
        (
            cur.partition_enforcement_inbound == want.partition_enforcement_inbound,
            "PartitionEnforcementInbound",
        ),
        (
            cur.partition_enforcement_outbound == want.partition_enforcement_outbound,
            "PartitionEnforcementOutbound",
        ),
        (cur.vl_high_limit == want.vl_high_limit, "VLHighLimit"),
        (cur.hoq_life == want.hoq_life, "HOQLife"),
    ];
    checks.iter().find(|c| !c.0).map(|c| c.1)
}

/// A PortInfo Set that changes nothing but what the caller overrides.
///
/// OperationalVLs and NeighborMTU repeat the port's current values rather than 0: ibsim
/// stores OperationalVLs as given (0 would switch the port's VLs off), and 0 is not a valid
/// NeighborMTU.
pub(super) fn state_only(cur: &port_info::Repr) -> port_info::Repr {
    port_info::Repr {
        port_state: PortState::NoChange,
        port_physical_state: PhysPortState::NoChange,
        link_width_enabled: 0,
        link_speed_enabled: 0,
        link_down_default_state: port_info::LinkDownDefaultState::from_raw_value(0),
        ..*cur
    }
}

/// A repair's LFT Sets in phases (see [`Scope::phases`]), and every block they touch.
/// `old` holds the tables before the repair, `new` after; both have the same switches in
/// the same order. The moved entries of the `drain` LIDs (sorted) first drop packets, in
/// a phase of their own: no packet then follows an old route into a new one.
pub(super) fn phases(
    old: &Plan,
    new: &Plan,
    moved: &[super::plan::Moved],
    drain: &[Lid],
) -> (Vec<Vec<LftSet>>, Vec<(NodeIdx, u16)>) {
    let f = &new.fabric;
    // The next switch from `at` towards `lid` along the new tables, if any.
    let next = |at: NodeIdx, lid: Lid| -> Option<NodeIdx> {
        let e = new.lft(at)?.get(usize::from(lid.0))?;
        if e == 0 {
            return None;
        }
        f.port_of(at, e)
            .and_then(|q| f.port(q).remote)
            .map(|r| f.port(r).node)
            .filter(|&t| f.node(t).kind == sm_core::fabric::NodeKind::Switch)
    };
    /// One moved entry: its block, its slot, its switch's depth, its new port, whether
    /// it drops first.
    struct Entry {
        node: NodeIdx,
        block: u16,
        slot: u8,
        depth: u32,
        port: u8,
        drain: bool,
    }
    // Hops from each moved entry's switch to the switch that delivers its LID, along the
    // new tables; the paths of one LID share their tails, so each LID's depths are
    // remembered while its entries are walked.
    let mut order: Vec<usize> = (0..moved.len()).collect();
    order.sort_unstable_by_key(|&i| (moved[i].lid, moved[i].switch));
    // Depth per node, valid where its stamp is the current LID's.
    let mut memo: IdxVec<NodeIdx, (u32, u32)> = IdxVec::filled((u32::MAX, 0), f.nodes().len());
    let mut path = Vec::new();
    let mut entries = Vec::with_capacity(moved.len());
    for i in order {
        let m = &moved[i];
        let stamp = u32::from(m.lid.0);
        path.clear();
        let mut at = m.switch;
        // Depth of the first remembered switch reached, or of the path's end.
        let mut base = loop {
            match memo.get(at) {
                Some(&(st, d)) if st == stamp => break d,
                None => break 0,
                _ => {}
            }
            path.push(at);
            if path.len() >= 64 {
                break 0;
            }
            match next(at, m.lid) {
                Some(t) => at = t,
                None => break 0,
            }
        };
        for &s in path.iter().rev() {
            base = (base + 1).min(64);
            memo[s] = (stamp, base);
        }
        entries.push(Entry {
            node: m.switch,
            block: m.lid.0 / lft::ENTRIES as u16,
            slot: (usize::from(m.lid.0) % lft::ENTRIES) as u8,
            depth: memo.get(m.switch).map_or(1, |&(_, d)| d),
            port: m.new,
            drain: drain.binary_search(&m.lid).is_ok(),
        });
    }
    entries.sort_unstable_by_key(|e| (e.node, e.block, e.depth));
    let mut depths: Vec<u32> = entries.iter().map(|e| e.depth).collect();
    depths.sort_unstable();
    depths.dedup();
    let first = usize::from(entries.iter().any(|e| e.drain));
    let mut phases: Vec<Vec<LftSet>> = vec![Vec::new(); depths.len() + first];
    let mut touched = Vec::new();
    for block in entries.chunk_by(|a, b| (a.node, a.block) == (b.node, b.block)) {
        let (node, b) = (block[0].node, block[0].block);
        touched.push((node, b));
        let mut data = old
            .lft_block(node, usize::from(b))
            .unwrap_or([lft::NO_ROUTE.0; lft::ENTRIES]);
        if block.iter().any(|e| e.drain) {
            for e in block.iter().filter(|e| e.drain) {
                data[usize::from(e.slot)] = lft::NO_ROUTE.0;
            }
            phases[0].push(LftSet {
                node,
                block: b,
                data,
                last: false,
            });
        }
        let last = block[block.len() - 1].depth;
        for same in block.chunk_by(|a, b| a.depth == b.depth) {
            for e in same {
                data[usize::from(e.slot)] = e.port;
            }
            let d = same[0].depth;
            let k = depths.binary_search(&d).unwrap_or(0) + first;
            phases[k].push(LftSet {
                node,
                block: b,
                data,
                last: d == last,
            });
        }
    }
    (phases, touched)
}
