//! What the SA answers from: the SM's model of the subnet and its plan, shared with the core
//! (not copied), and the indexes queries need (a LID table, a port-GUID map, each port's
//! rate and P_Key table).
//!
//! The attributes are those of the model ([`Discovered`]): NodeInfo, NodeDescription,
//! SwitchInfo and PortInfo as the nodes last reported them (the discovery Get, then the
//! GetResp to each of our Sets). The topology, the LFTs and the P_Key tables are the plan's
//! ([`Plan`]). SL2VL / VLArb tables are the blocks the plan programs (QoS enabled); without
//! them the SA answers all-zero tables, as OpenSM does without QoS.
//!
//! [`Db::build`] makes a snapshot from a fabric model, forwarding tables and P_Key tables
//! alone (what a benchmark or an offline tool has): every attribute is then reconstructed
//! from the model's fields ([`reconstructed`]).
//!
//! Rates and MTUs along paths are precomputed per port (PortInfo's active width and speed,
//! extended speeds when the port's capability mask says they are valid, as OpenSM does).

use crate::core::DrPath;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use sm_core::dump::Lfts;
use sm_core::fabric::{Fabric, Node, NodeIdx, NodeKind, PortIdx};
use sm_core::idx::{IdxVec, OptIdx};
use sm_core::lft::LftTable;
use sm_core::partitions::PKeyTables;
use sm_mad::link::Rate;
use sm_mad::port_info::{self, Mtu, VlCap, link_width};
use sm_mad::sm_info::{self, SmState};
use sm_mad::{
    Guid, Lid, PKey, attr, lft, mft, node_description, node_info, sl2vl, switch_info, vl_arb,
};

use crate::core::{Discovered, NodeFacts, Plan, PortFacts};

/// Subnet-wide facts the records need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbParams {
    pub subnet_prefix: u64,
    /// The SM's own port (its GUID) and LID.
    pub sm_port_guid: Guid,
    pub sm_lid: Lid,
    pub sm_priority: u8,
    pub sm_state: SmState,
    /// PortInfo.SubnetTimeout the SM programs: OpenSM's PathRecord PacketLifeTime.
    pub subnet_timeout: u8,
    /// The subnet's LMC (LinkRecord LIDs are compared under its mask, as OpenSM does).
    pub lmc: u8,
    /// QoS tables were programmed (ClassPortInfo says so; SL2VL records are real).
    pub qos: bool,
}

impl Default for DbParams {
    fn default() -> Self {
        DbParams {
            subnet_prefix: 0xfe80_0000_0000_0000,
            sm_port_guid: Guid(0),
            sm_lid: Lid(0),
            sm_priority: 0,
            sm_state: SmState::Master,
            subnet_timeout: 18,
            lmc: 0,
            qos: false,
        }
    }
}

/// One port's P_Key table: the keys by index (0 = empty slot), and the valid ones in
/// OpenSM's map order (by the network-order base read as a little-endian number).
#[derive(Debug, Clone, Default)]
pub(crate) struct PKeyTable {
    pub(crate) by_index: Vec<PKey>,
    pub(crate) sorted: Vec<PKey>,
}

impl PKeyTable {
    pub(crate) fn new(keys: &[PKey]) -> PKeyTable {
        let mut sorted: Vec<PKey> = keys.iter().copied().filter(|k| !k.is_invalid()).collect();
        sorted.sort_by_key(|k| (k.base().swap_bytes(), !k.is_full()));
        sorted.dedup_by_key(|k| k.base());
        PKeyTable {
            by_index: keys.to_vec(),
            sorted,
        }
    }
}

/// A node as the records see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeRef<'a> {
    pub(crate) kind: NodeKind,
    pub(crate) info: &'a node_info::Repr,
    pub(crate) node: &'a Node,
    pub(crate) num_ports: u8,
    /// SwitchInfo, for a switch.
    pub(crate) switch: Option<&'a switch_info::Repr>,
}

impl NodeRef<'_> {
    pub(crate) fn desc(&self) -> node_description::Repr {
        node_description::Repr::new(&self.node.description)
    }
}

/// A port as the records see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PortRef<'a> {
    pub(crate) node: NodeIdx,
    pub(crate) num: u8,
    /// False for the unused slot 0 of CAs.
    pub(crate) exists: bool,
    /// The SM knows this port's PortInfo (linked ports, switch ports, ports it read).
    pub(crate) known: bool,
    pub(crate) guid: Guid,
    /// PortInfo as last reported (all zero when unknown).
    pub(crate) info: &'a port_info::Repr,
    /// The port at the other end of the link.
    pub(crate) remote: Option<PortIdx>,
    /// MTUCap code.
    pub(crate) mtu_cap: u8,
    /// PathRecord rate code of the link at this port.
    pub(crate) rate: u8,
}

/// The SA's snapshot of the subnet.
#[derive(Debug, Clone)]
pub struct Db {
    pub(crate) p: DbParams,
    model: Arc<Discovered>,
    plan: Arc<Plan>,
    /// End port per LID (every LID of an LMC range).
    lid_port: Vec<OptIdx<PortIdx>>,
    /// End port (CA port, switch port 0) per port GUID.
    guid_port: HashMap<Guid, PortIdx>,
    rate: IdxVec<PortIdx, u8>,
    /// P_Key table per port (shared between ports with the same keys); `None`: no table
    /// known, which shares with everyone, as OpenSM treats an empty table.
    pkeys: IdxVec<PortIdx, Option<Arc<PKeyTable>>>,
    /// SL2VL per (output port, input port number).
    pub(crate) sl2vl: BTreeMap<(PortIdx, u8), sl2vl::Repr>,
    /// VLArb per (port, block 1..=4).
    pub(crate) vlarb: BTreeMap<(PortIdx, u8), vl_arb::Repr>,
    /// MFT blocks per (switch node, block, position): empty until multicast routing.
    pub(crate) mft: BTreeMap<(NodeIdx, u16, u8), mft::Repr>,
    /// Service level per partition (P_Key base), from the partition configuration.
    pub(crate) partition_sl: HashMap<u16, u8>,
    /// QP0 MADs the SM has sent (SMInfo ActCount), updated by the core.
    pub(crate) act_count: u32,
    /// The other SMs the core found, with their LIDs (SMInfoRecord lists them too).
    pub(crate) remote_sms: Vec<(Lid, sm_info::Repr)>,
    /// What an unknown port's PortInfo reads as.
    unknown: port_info::Repr,
}

/// PortInfo's rate code for the active width and speed (OpenSM's `compute_rate`): the
/// extended speed when `extended` (the capability mask has IsExtendedSpeedsSupported) and
/// one is active, else LinkSpeedActive.
/// An XDR link's rate by width; 8x and 12x (1.6 and 2.4 Tb/s) have no rate code and get the
/// highest there is.
fn xdr_rate(width: u8) -> Rate {
    use Rate::*;
    match width {
        link_width::X2 => Gbps400,
        link_width::X4 => Gbps800,
        link_width::X8 | link_width::X12 => Gbps1200,
        _ => Gbps200,
    }
}

pub fn port_rate(width: u8, speed: u8, ext: u8, extended: bool) -> Rate {
    // Per width: 1x, 4x, 8x, 12x, 2x.
    let pick = |t: [Rate; 5]| match width {
        link_width::X1 => t[0],
        link_width::X4 => t[1],
        link_width::X8 => t[2],
        link_width::X12 => t[3],
        link_width::X2 => t[4],
        _ => t[0],
    };
    use Rate::*;
    if extended {
        match ext {
            1 => return pick([Gbps14, Gbps56, Gbps112, Gbps168, Gbps28]),
            2 => return pick([Gbps25, Gbps100, Gbps200, Gbps300, Gbps50]),
            4 => return pick([Gbps50, Gbps200, Gbps400, Gbps600, Gbps100]),
            8 => return pick([Gbps100, Gbps400, Gbps800, Gbps1200, Gbps200]),
            _ => {}
        }
    }
    match speed {
        2 => pick([Gbps5, Gbps20, Gbps40, Gbps60, Gbps10]),
        4 => pick([Gbps10, Gbps40, Gbps80, Gbps120, Gbps20]),
        _ => pick([Gbps2_5, Gbps10, Gbps20, Gbps30, Gbps5]),
    }
}

/// `extended2`: the port declares the second extended speed field (XDR) valid.
fn pi_rate(pi: &port_info::Repr, extended: bool, extended2: bool) -> u8 {
    if extended2 && pi.link_speed_ext_active2 & port_info::link_speed_ext2::XDR != 0 {
        return xdr_rate(pi.link_width_active).to_raw_value();
    }
    port_rate(
        pi.link_width_active,
        pi.link_speed_active,
        pi.link_speed_ext_active,
        extended,
    )
    .to_raw_value()
}

impl Db {
    /// The snapshot of a subnet the SM programmed: its model and plan, shared.
    pub fn new(model: Arc<Discovered>, plan: Arc<Plan>, p: DbParams) -> Db {
        let n = plan.fabric.ports().len();
        let mut db = Db {
            p,
            model,
            plan,
            lid_port: Vec::new(),
            guid_port: HashMap::new(),
            rate: IdxVec::filled(0, n),
            pkeys: IdxVec::filled(None, n),
            sl2vl: BTreeMap::new(),
            vlarb: BTreeMap::new(),
            mft: BTreeMap::new(),
            partition_sl: HashMap::new(),
            act_count: 0,
            remote_sms: Vec::new(),
            unknown: port_info::Repr::default(),
        };
        db.index();
        db
    }

    /// A snapshot from the fabric model (with LIDs), the forwarding tables and the P_Key
    /// tables, every attribute reconstructed (see the module documentation).
    pub fn build(fabric: &Fabric, lfts: &Lfts, pkeys: &PKeyTables, p: DbParams) -> Db {
        let tables = lfts
            .switches
            .iter()
            .filter_map(|s| Some((fabric.node_by_guid(s.guid)?, s.ports.clone())))
            .collect();
        let plan = Plan::from_tables(fabric.clone(), tables, pkeys.clone());
        let model = reconstructed(&plan, &p);
        Db::new(Arc::new(model), Arc::new(plan), p)
    }

    /// The indexes: LIDs, GUIDs, rates, P_Key tables, SL2VL and VLArb.
    fn index(&mut self) {
        let f = &self.plan.fabric;
        let mut lid_port = Vec::new();
        for (i, port) in f.ports().iter().enumerate() {
            let q = PortIdx(i as u32);
            let Some(info) = self.model.port_info(q) else {
                continue;
            };
            let node = f.node(port.node);
            let end = port.exists && (node.kind != NodeKind::Switch || port.num == 0);
            if !end || !self.model.present(port.node) {
                continue;
            }
            self.guid_port.insert(port.guid, q);
            let base = info.lid.0 as usize;
            if base == 0 || !info.lid.is_unicast() {
                continue;
            }
            let lmc = if self.lmc_capable(port.node) {
                info.lmc.min(7)
            } else {
                0
            };
            let top = (base + (1 << lmc) - 1).min(0xBFFF);
            if lid_port.len() <= top {
                lid_port.resize(top + 1, OptIdx::NONE);
            }
            for slot in &mut lid_port[base..=top] {
                *slot = OptIdx::some(q);
            }
        }
        self.lid_port = lid_port;
        for q in self.rate.indices().collect::<Vec<_>>() {
            self.rate[q] = self.rate_of(q);
        }
        let mut shared: HashMap<&[PKey], Arc<PKeyTable>> = HashMap::new();
        for t in self
            .plan
            .pkeys
            .end_ports
            .iter()
            .chain(&self.plan.pkeys.switch_ports)
        {
            let table = shared
                .entry(&t.keys)
                .or_insert_with(|| Arc::new(PKeyTable::new(&t.keys)));
            if let Some(slot) = self.pkeys.get_mut(t.port) {
                *slot = Some(Arc::clone(table));
            }
        }
        for tb in self.plan.tables.iter() {
            let is_switch = f.node(f.port(tb.port).node).kind == NodeKind::Switch;
            match tb.attr {
                attr::SL_TO_VL_MAPPING_TABLE => {
                    let Ok(t) = sl2vl::Repr::parse(&tb.data) else {
                        continue;
                    };
                    let m = sl2vl::Modifier::from_attr_mod(tb.modifier).ok();
                    if is_switch && m.is_some_and(|m| m.all_input_ports) {
                        // One optimized Set for every linked input port.
                        let node = f.port(tb.port).node;
                        for q in f.node_ports(node) {
                            if f.port(q).num != 0 && f.port(q).remote.is_some() {
                                self.sl2vl.insert((tb.port, f.port(q).num), t);
                            }
                        }
                    } else {
                        let inp = if is_switch {
                            (tb.modifier >> 8) as u8
                        } else {
                            0
                        };
                        self.sl2vl.insert((tb.port, inp), t);
                    }
                }
                attr::VL_ARBITRATION_TABLE => {
                    if let Ok(t) = vl_arb::Repr::parse(&tb.data) {
                        self.vlarb.insert((tb.port, (tb.modifier >> 16) as u8), t);
                    }
                }
                _ => {}
            }
        }
    }

    /// OpenSM's rate of a port: a switch port looks at port 0's capability mask for
    /// extended speeds.
    fn rate_of(&self, q: PortIdx) -> u8 {
        let f = &self.plan.fabric;
        let Some(info) = self.model.port_info(q) else {
            return 0;
        };
        let node = f.port(q).node;
        let caps = if f.node(node).kind == NodeKind::Switch {
            f.port_of(node, 0).and_then(|p0| self.model.port_info(p0))
        } else {
            Some(info)
        };
        let extended = caps
            .is_some_and(|c| c.capability_mask & port_info::cap::IS_EXTENDED_SPEEDS_SUPPORTED != 0);
        let extended2 = caps
            .is_some_and(|c| c.has_capability2(port_info::cap2::IS_EXTENDED_SPEEDS_2_SUPPORTED));
        pi_rate(info, extended, extended2)
    }

    /// Whether a node's end ports take an LMC range (CAs and routers; a switch only with an
    /// enhanced port 0).
    fn lmc_capable(&self, n: NodeIdx) -> bool {
        let node = self.plan.fabric.node(n);
        node.kind != NodeKind::Switch
            || self.model.nodes[n]
                .switch_info
                .is_some_and(|s| s.enhanced_port0)
    }

    /// Overrides a node's NodeInfo and NodeDescription (tests of what the SA shows).
    pub fn set_node_info(&mut self, n: NodeIdx, info: node_info::Repr, desc: &str) {
        Arc::make_mut(&mut self.model).nodes[n].info = info;
        Arc::make_mut(&mut self.plan).fabric.node_mut(n).description = desc.to_string();
    }

    /// Forgets every MFT block of a switch.
    pub fn clear_mft(&mut self, switch: NodeIdx) {
        self.mft.retain(|&(n, _, _), _| n != switch);
    }

    /// One MFT block (for MulticastForwardingTableRecord).
    pub fn set_mft(&mut self, switch: NodeIdx, block: u16, position: u8, table: mft::Repr) {
        self.mft.insert((switch, block, position), table);
    }

    /// The service level of a partition (PathRecord SL when the query names none).
    pub fn set_partition_sl(&mut self, pkey: PKey, sl: u8) {
        self.partition_sl.insert(pkey.base(), sl);
    }

    /// The parameters.
    pub fn params(&self) -> &DbParams {
        &self.p
    }

    /// The SMInfo ActCount (the core keeps it current).
    pub fn set_act_count(&mut self, n: u32) {
        self.act_count = n;
    }

    /// The other SMs of the subnet (their SM_Key is never shown).
    pub fn set_remote_sms(&mut self, sms: Vec<(Lid, sm_info::Repr)>) {
        self.remote_sms = sms
            .into_iter()
            .map(|(l, i)| (l, sm_info::Repr { sm_key: 0, ..i }))
            .collect();
    }

    // ---------------------------------------------------------------------------------
    // Lookups.

    /// Every node index (nodes cut off since the sweep left out).
    pub(crate) fn node_indices(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        (0..self.plan.fabric.nodes().len() as u32)
            .map(NodeIdx)
            .filter(|&n| self.model.present(n))
    }

    /// Every port slot index (absent slot 0 of CAs included; ports of nodes cut off left
    /// out).
    pub(crate) fn port_indices(&self) -> impl Iterator<Item = PortIdx> + '_ {
        let f = &self.plan.fabric;
        (0..f.ports().len() as u32)
            .map(PortIdx)
            .filter(|&q| self.model.present(f.port(q).node))
    }

    /// The end port owning `lid` (any LID of its range).
    pub(crate) fn port_by_lid(&self, lid: Lid) -> Option<PortIdx> {
        self.lid_port.get(lid.0 as usize)?.get()
    }

    /// LIDs the LID table spans (highest + 1).
    pub(crate) fn lid_span(&self) -> usize {
        self.lid_port.len()
    }

    /// The GUIDs of every end port the SM knows.
    pub(crate) fn end_port_guids(&self) -> impl Iterator<Item = Guid> + '_ {
        self.guid_port.keys().copied()
    }

    /// The end port with this port GUID.
    pub(crate) fn port_by_guid(&self, g: Guid) -> Option<PortIdx> {
        self.guid_port.get(&g).copied()
    }

    pub(crate) fn node(&self, n: NodeIdx) -> NodeRef<'_> {
        let node = self.plan.fabric.node(n);
        let facts = &self.model.nodes[n];
        NodeRef {
            kind: node.kind,
            info: &facts.info,
            node,
            num_ports: node.num_ports,
            switch: facts.switch_info.as_ref(),
        }
    }

    pub(crate) fn port(&self, q: PortIdx) -> PortRef<'_> {
        let f = &self.plan.fabric;
        let port = f.port(q);
        let info = self.model.port_info(q);
        let known = port.exists && info.is_some();
        let info = info.unwrap_or(&self.unknown);
        PortRef {
            node: port.node,
            num: port.num,
            exists: port.exists,
            known,
            guid: port.guid,
            info,
            remote: port.remote,
            mtu_cap: info.mtu_cap.to_raw_value(),
            rate: self.rate[q],
        }
    }

    /// Port `num` of node `n`, when it exists.
    pub(crate) fn port_of(&self, n: NodeIdx, num: u8) -> Option<PortIdx> {
        self.plan.fabric.port_of(n, num)
    }

    /// The port that carries the LID of port `q`'s node (port 0 of a switch).
    /// The fabric the snapshot's port indices are of.
    pub(crate) fn fabric(&self) -> &sm_core::fabric::Fabric {
        &self.plan.fabric
    }

    pub(crate) fn lid_port_of(&self, q: PortIdx) -> PortIdx {
        self.plan.fabric.lid_port(q)
    }

    /// Base and last LID of the end port `q` (or of its switch's port 0).
    pub(crate) fn lid_range(&self, q: PortIdx) -> (u16, u16) {
        let lp = self.lid_port_of(q);
        let port = self.port(lp);
        let base = port.info.lid.0;
        let lmc = if self.lmc_capable(port.node) {
            port.info.lmc.min(7)
        } else {
            0
        };
        (base, base.saturating_add((1u16 << lmc) - 1))
    }

    /// Whether node `n` is a switch (has a forwarding table).
    pub(crate) fn is_switch(&self, n: NodeIdx) -> bool {
        self.plan.fabric.node(n).kind == NodeKind::Switch
    }

    /// The LFT of switch node `n`: the output port for `dlid` (255 = none).
    #[inline]
    pub(crate) fn route(&self, n: NodeIdx, dlid: Lid) -> u8 {
        self.plan
            .lft(n)
            .and_then(|t| t.get(dlid.0 as usize))
            .unwrap_or(lft::NO_ROUTE.0)
    }

    /// The SL the routes give paths from end port `src` to `dlid`, if they use SLs.
    pub(crate) fn path_sl(&self, src: PortIdx, dlid: Lid) -> Option<u8> {
        self.plan.path_sl(src, dlid)
    }

    /// Switch node `n`'s whole LFT.
    pub(crate) fn lft(&self, n: NodeIdx) -> &LftTable {
        static EMPTY: LftTable = LftTable::new();
        self.plan.lft(n).unwrap_or(&EMPTY)
    }

    /// The P_Key table of a port, if one is known.
    pub(crate) fn pkey_table(&self, q: PortIdx) -> Option<&PKeyTable> {
        self.pkeys.get(q)?.as_deref()
    }

    /// OpenSM's `osm_physp_share_pkey`: the same port, or a port without a known table,
    /// or a partition both tables hold with at least one full member.
    pub(crate) fn share_pkey(&self, a: PortIdx, b: PortIdx) -> bool {
        if a == b {
            return true;
        }
        match (self.pkey_table(a), self.pkey_table(b)) {
            (Some(x), Some(y)) if !x.sorted.is_empty() && !y.sorted.is_empty() => {
                common_pkey(x, y).is_some()
            }
            _ => true,
        }
    }

    /// OpenSM's `osm_physp_find_common_pkey`: the first key of `a`'s table, in map order,
    /// that `b` shares (with at least one full member), as `a` holds it.
    pub(crate) fn common_pkey(&self, a: PortIdx, b: PortIdx) -> Option<PKey> {
        common_pkey(self.pkey_table(a)?, self.pkey_table(b)?)
    }

    /// OpenSM's `osm_physp_share_this_pkey`.
    pub(crate) fn share_this_pkey(&self, a: PortIdx, b: PortIdx, key: PKey) -> bool {
        let find = |p: PortIdx| {
            self.pkey_table(p)
                .and_then(|t| t.sorted.iter().find(|k| k.base() == key.base()).copied())
        };
        match (find(a), find(b)) {
            (Some(x), Some(y)) => x.is_full() || y.is_full(),
            _ => false,
        }
    }
}

/// The model an SM would have read from a subnet it programmed after `plan`: NodeInfo,
/// SwitchInfo and PortInfo reconstructed from the model's fields (for snapshots made
/// without a discovery: benchmarks, offline tools).
pub fn reconstructed(plan: &Plan, p: &DbParams) -> Discovered {
    let f = &plan.fabric;
    let mut nodes = IdxVec::new();
    for (i, n) in f.nodes().iter().enumerate() {
        let idx = NodeIdx(i as u32);
        let is_switch = n.kind == NodeKind::Switch;
        let own_port = |num: u8| f.port_of(idx, num).map(|q| f.port(q).guid);
        let switch_info = is_switch.then(|| switch_info::Repr {
            linear_fdb_cap: 49152,
            multicast_fdb_cap: 0,
            default_port: 0,
            life_time_value: 18,
            lids_per_port: 0,
            partition_enforcement_cap: 32,
            enhanced_port0: n.enhanced_port0,
            linear_fdb_top: Lid(plan.lft(idx).map_or(0, |t| t.len().saturating_sub(1)) as u16),
            ..switch_info::Repr::default()
        });
        nodes.push(NodeFacts {
            info: node_info::Repr {
                base_version: 1,
                class_version: 1,
                node_type: n.kind.node_type(),
                num_ports: n.num_ports,
                system_image_guid: n.system_guid,
                node_guid: n.guid,
                port_guid: own_port(if is_switch { 0 } else { 1 }).unwrap_or(n.guid),
                partition_cap: 32,
                device_id: n.device_id,
                revision: n.revision,
                local_port_num: if is_switch { 0 } else { 1 },
                vendor_id: n.vendor_id,
            },
            switch_info,
            path: DrPath::new(),
        });
    }
    let mut ports = IdxVec::new();
    for port in f.ports() {
        let is_switch = f.node(port.node).kind == NodeKind::Switch;
        let end = !is_switch || port.num == 0;
        let known = port.exists && (is_switch || port.remote.is_some());
        // A switch's external ports report the switch's LID on port 0 only.
        let (lid, lmc) = if end {
            (port.lid, port.lmc)
        } else {
            (Lid(0), 0)
        };
        let neighbor = port
            .remote
            .map(|r| f.port(r).mtu_cap.min(port.mtu_cap))
            .unwrap_or(port.mtu_cap);
        let info = port_info::Repr {
            gid_prefix: p.subnet_prefix,
            lid,
            master_sm_lid: if end { p.sm_lid } else { Lid(0) },
            capability_mask: if port.guid == p.sm_port_guid && end {
                port_info::cap::IS_SM
            } else {
                0
            } | if port.speed.ext != 0 {
                port_info::cap::IS_EXTENDED_SPEEDS_SUPPORTED
            } else {
                0
            },
            local_port_num: port.num,
            link_width_enabled: port.width,
            link_width_supported: port.width,
            link_width_active: port.width,
            link_speed_supported: port.speed.speed,
            port_state: port.state,
            port_physical_state: port.phys_state,
            lmc,
            link_speed_active: port.speed.speed,
            link_speed_enabled: port.speed.speed,
            neighbor_mtu: Mtu::from_raw_value(neighbor),
            vl_cap: VlCap::from_raw_value(port.vl_cap),
            mtu_cap: Mtu::from_raw_value(port.mtu_cap),
            operational_vls: VlCap::from_raw_value(port.vl_cap),
            subnet_timeout: if end { p.subnet_timeout } else { 0 },
            guid_cap: u8::from(end),
            link_speed_ext_active: port.speed.ext,
            link_speed_ext_supported: port.speed.ext,
            link_speed_ext_enabled: port.speed.ext,
            ..port_info::Repr::default()
        };
        ports.push(PortFacts {
            info: known.then_some(info),
            path: None,
        });
    }
    let own = f
        .port_by_guid(p.sm_port_guid)
        .or_else(|| f.end_ports().next())
        .unwrap_or(PortIdx(0));
    Discovered {
        fabric: f.clone(),
        nodes: nodes.into(),
        ports: ports.into(),
        own,
        sms: Vec::new(),
        untrusted: Vec::new(),
        sm_asks: 0,
        missing: Vec::new(),
        former_peers: Default::default(),
        absent: Default::default(),
    }
}

fn common_pkey(a: &PKeyTable, b: &PKeyTable) -> Option<PKey> {
    let (mut i, mut j) = (0, 0);
    while let (Some(x), Some(y)) = (a.sorted.get(i), b.sorted.get(j)) {
        if x.base() == y.base() && (x.is_full() || y.is_full()) {
            return Some(*x);
        }
        let (kx, ky) = (x.base().swap_bytes(), y.base().swap_bytes());
        if kx == ky {
            i += 1;
            j += 1;
        } else if ky < kx {
            j += 1;
        } else {
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(keys: &[u16]) -> PKeyTable {
        PKeyTable::new(&keys.iter().map(|&k| PKey(k)).collect::<Vec<_>>())
    }

    #[test]
    fn common_keys_in_opensm_order() {
        // 0x8001 sorts before 0xffff in OpenSM's map (0x0180 < 0xff7f on little endian).
        let a = table(&[0xffff, 0x8001, 0x0002]);
        let b = table(&[0x7fff, 0x0001, 0x8002]);
        assert_eq!(common_pkey(&a, &b), Some(PKey(0x8001)));
        let limited = table(&[0x7fff]);
        assert_eq!(common_pkey(&limited, &limited), None);
        assert_eq!(common_pkey(&limited, &a), Some(PKey(0x7fff)));
    }

    #[test]
    fn rates() {
        assert_eq!(port_rate(link_width::X4, 1, 0, false), Rate::Gbps10);
        assert_eq!(port_rate(link_width::X4, 4, 0, false), Rate::Gbps40);
        assert_eq!(port_rate(link_width::X1, 2, 0, false), Rate::Gbps5);
        assert_eq!(port_rate(link_width::X12, 4, 0, false), Rate::Gbps120);
        assert_eq!(port_rate(link_width::X4, 4, 1, true), Rate::Gbps56);
        assert_eq!(port_rate(link_width::X4, 4, 1, false), Rate::Gbps40);
        assert_eq!(port_rate(link_width::X2, 4, 2, true), Rate::Gbps50);
        assert_eq!(port_rate(link_width::X4, 4, 4, true), Rate::Gbps200);
        let xdr = port_info::Repr {
            link_width_active: link_width::X4,
            link_speed_active: 4,
            link_speed_ext_active: 8,
            link_speed_ext_active2: port_info::link_speed_ext2::XDR,
            ..port_info::Repr::default()
        };
        assert_eq!(pi_rate(&xdr, true, true), Rate::Gbps800.to_raw_value());
        assert_eq!(
            pi_rate(&xdr, true, false),
            Rate::Gbps400.to_raw_value(),
            "NDR"
        );
        assert_eq!(xdr_rate(link_width::X12), Rate::Gbps1200);
    }
}
