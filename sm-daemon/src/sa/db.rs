//! What the SA answers from: a snapshot of the subnet as the SM last brought it up, laid out
//! for queries (dense arrays indexed like the [`Fabric`]'s nodes and ports, a LID table and a
//! port-GUID map at the edges).
//!
//! [`Db::build`] reconstructs every attribute from the fabric model, the forwarding tables
//! and the partition tables alone (what a benchmark or an offline tool has). The SM core
//! then overrides what it knows first hand ([`Db::set_node_info`], [`Db::set_port_info`],
//! [`Db::set_switch_info`], [`Db::set_sl2vl`], [`Db::set_vlarb`]):
//!
//! | attribute | live (from the SM core) | reconstructed (`build` alone) |
//! |---|---|---|
//! | NodeInfo, NodeDescription | as the node answered during discovery | from the model's node fields |
//! | PortInfo | as the port last answered: the discovery Get, then the GetResp to each of our Sets (LID, SM LID, state ARMED/ACTIVE, MTU, VLs...) | LID, LMC, state, width, speed, MTU cap, VL cap, SM LID, prefix, subnet timeout |
//! | SwitchInfo | as the switch answered our last Set | LinearFDBTop from the table, caps defaulted |
//! | LFT | the tables the SM computed (and programmed) | same |
//! | P_Key tables | the tables the SM computed from the partitions | same |
//! | SL2VL / VLArb | the blocks the SM programmed (QoS enabled) | none: all-zero tables, as OpenSM answers without QoS |
//!
//! Rates and MTUs along paths are precomputed per port (PortInfo's active width and speed,
//! extended speeds when the port's capability mask says they are valid, as OpenSM does).

use std::collections::{BTreeMap, HashMap};

use sm_core::dump::Lfts;
use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx};
use sm_core::partitions::PKeyTables;
use sm_mad::link::Rate;
use sm_mad::port_info::{self, Mtu, VlCap, link_width};
use sm_mad::sm_info::{self, SmState};
use sm_mad::{Guid, Lid, PKey, lft, mft, node_description, node_info, sl2vl, switch_info, vl_arb};

/// "None" in the dense index arrays.
pub(crate) const NONE: u32 = u32::MAX;

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

#[derive(Debug, Clone)]
pub(crate) struct NodeEntry {
    pub(crate) kind: NodeKind,
    pub(crate) info: node_info::Repr,
    pub(crate) desc: node_description::Repr,
    /// The slot of port 0 (absent for CAs) in `ports`.
    pub(crate) first_port: u32,
    pub(crate) num_ports: u8,
    /// Index into `switches`, or [`NONE`].
    pub(crate) switch: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct PortEntry {
    pub(crate) node: u32,
    pub(crate) num: u8,
    /// False for the unused slot 0 of CAs.
    pub(crate) exists: bool,
    /// The SM knows this port's PortInfo (linked ports, switch ports, ports it read).
    pub(crate) known: bool,
    pub(crate) guid: Guid,
    pub(crate) info: port_info::Repr,
    /// The port at the other end of the link, or [`NONE`].
    pub(crate) remote: u32,
    /// Index into the P_Key tables, or [`NONE`] (no table known: shares with everyone,
    /// as OpenSM treats an empty table).
    pub(crate) pkeys: u32,
    /// MTUCap code.
    pub(crate) mtu_cap: u8,
    /// PathRecord rate code of the link at this port.
    pub(crate) rate: u8,
}

#[derive(Debug, Clone)]
pub(crate) struct SwitchEntry {
    pub(crate) info: switch_info::Repr,
    /// Output port per LID.
    pub(crate) lft: Vec<u8>,
}

/// One port's P_Key table: the keys by index (0 = empty slot), and the valid ones in
/// OpenSM's map order (by the network-order base read as a little-endian number).
#[derive(Debug, Clone, Default)]
pub(crate) struct PKeyTable {
    pub(crate) by_index: Vec<PKey>,
    pub(crate) sorted: Vec<PKey>,
}

impl PKeyTable {
    fn new(keys: &[PKey]) -> PKeyTable {
        let mut sorted: Vec<PKey> = keys.iter().copied().filter(|k| !k.is_invalid()).collect();
        sorted.sort_by_key(|k| (k.base().swap_bytes(), !k.is_full()));
        sorted.dedup_by_key(|k| k.base());
        PKeyTable {
            by_index: keys.to_vec(),
            sorted,
        }
    }
}

/// The SA's snapshot of the subnet.
#[derive(Debug, Clone)]
pub struct Db {
    pub(crate) p: DbParams,
    pub(crate) nodes: Vec<NodeEntry>,
    pub(crate) ports: Vec<PortEntry>,
    pub(crate) switches: Vec<SwitchEntry>,
    /// End port per LID (every LID of an LMC range), or [`NONE`].
    pub(crate) lid_port: Vec<u32>,
    /// End port (CA port, switch port 0) per port GUID.
    pub(crate) guid_port: HashMap<Guid, u32>,
    pub(crate) pkeys: Vec<PKeyTable>,
    /// SL2VL per (output port slot, input port number).
    pub(crate) sl2vl: BTreeMap<(u32, u8), sl2vl::Repr>,
    /// VLArb per (port slot, block 1..=4).
    pub(crate) vlarb: BTreeMap<(u32, u8), vl_arb::Repr>,
    /// MFT blocks per (switch node, block, position): empty until multicast routing.
    pub(crate) mft: BTreeMap<(u32, u16, u8), mft::Repr>,
    /// Service level per partition (P_Key base), from the partition configuration.
    pub(crate) partition_sl: HashMap<u16, u8>,
    /// QP0 MADs the SM has sent (SMInfo ActCount), updated by the core.
    pub(crate) act_count: u32,
    /// The other SMs the core found, with their LIDs (SMInfoRecord lists them too).
    pub(crate) remote_sms: Vec<(Lid, sm_info::Repr)>,
}

/// PortInfo's rate code for the active width and speed (OpenSM's `compute_rate`): the
/// extended speed when `extended` (the capability mask has IsExtendedSpeedsSupported) and
/// one is active, else LinkSpeedActive.
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

fn pi_rate(pi: &port_info::Repr, extended: bool) -> u8 {
    port_rate(
        pi.link_width_active,
        pi.link_speed_active,
        pi.link_speed_ext_active,
        extended,
    )
    .to_raw_value()
}

impl Db {
    /// A snapshot from the fabric model (with LIDs), the forwarding tables and the P_Key
    /// tables, every attribute reconstructed (see the module documentation).
    pub fn build(fabric: &Fabric, lfts: &Lfts, pkeys: &PKeyTables, p: DbParams) -> Db {
        let mut nodes = Vec::with_capacity(fabric.nodes().len());
        let mut ports: Vec<PortEntry> = Vec::with_capacity(fabric.ports().len());
        let mut first = vec![NONE; fabric.nodes().len()];
        for (i, port) in fabric.ports().iter().enumerate() {
            let slot = &mut first[port.node.idx()];
            if *slot == NONE {
                *slot = i as u32;
            }
        }
        let mut switches = Vec::new();
        for (i, n) in fabric.nodes().iter().enumerate() {
            let switch = if n.kind == NodeKind::Switch {
                switches.push(SwitchEntry {
                    info: switch_info::Repr {
                        linear_fdb_cap: 49152,
                        multicast_fdb_cap: 0,
                        default_port: 0,
                        life_time_value: 18,
                        lids_per_port: 0,
                        partition_enforcement_cap: 32,
                        enhanced_port0: n.enhanced_port0,
                        ..switch_info::Repr::default()
                    },
                    lft: Vec::new(),
                });
                (switches.len() - 1) as u32
            } else {
                NONE
            };
            let idx = NodeIdx(i as u32);
            let own_port = |num: u8| fabric.port_of(idx, num).map(|p| fabric.port(p).guid);
            nodes.push(NodeEntry {
                kind: n.kind,
                info: node_info::Repr {
                    base_version: 1,
                    class_version: 1,
                    node_type: n.kind.node_type(),
                    num_ports: n.num_ports,
                    system_image_guid: n.system_guid,
                    node_guid: n.guid,
                    port_guid: own_port(if n.kind == NodeKind::Switch { 0 } else { 1 })
                        .unwrap_or(n.guid),
                    partition_cap: 32,
                    device_id: n.device_id,
                    revision: n.revision,
                    local_port_num: if n.kind == NodeKind::Switch { 0 } else { 1 },
                    vendor_id: n.vendor_id,
                },
                desc: node_description::Repr::new(&n.description),
                first_port: first[i],
                num_ports: n.num_ports,
                switch,
            });
        }
        for port in fabric.ports() {
            let node = &fabric.nodes()[port.node.idx()];
            let is_switch = node.kind == NodeKind::Switch;
            let end = !is_switch || port.num == 0;
            // A switch's external ports report the switch's LID on port 0 only.
            let (lid, lmc) = if end {
                (port.lid, port.lmc)
            } else {
                (Lid(0), 0)
            };
            let neighbor = port
                .remote
                .map(|r| fabric.port(r).mtu_cap.min(port.mtu_cap))
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
            ports.push(PortEntry {
                node: port.node.0,
                num: port.num,
                exists: port.exists,
                known: port.exists && (is_switch || port.remote.is_some()),
                guid: port.guid,
                info,
                remote: port.remote.map_or(NONE, |r| r.0),
                pkeys: NONE,
                mtu_cap: port.mtu_cap,
                rate: 0,
            });
        }
        let mut db = Db {
            p,
            nodes,
            ports,
            switches,
            lid_port: Vec::new(),
            guid_port: HashMap::new(),
            pkeys: Vec::new(),
            sl2vl: BTreeMap::new(),
            vlarb: BTreeMap::new(),
            mft: BTreeMap::new(),
            partition_sl: HashMap::new(),
            act_count: 0,
            remote_sms: Vec::new(),
        };
        for s in &lfts.switches {
            if let Some(n) = fabric.node_by_guid(s.guid) {
                let sw = db.nodes[n.idx()].switch;
                if let Some(e) = db.switches.get_mut(sw as usize) {
                    e.lft = s.ports.clone();
                    e.info.linear_fdb_top = Lid(s.ports.len().saturating_sub(1) as u16);
                }
            }
        }
        for t in pkeys.end_ports.iter().chain(&pkeys.switch_ports) {
            if let Some(e) = db.ports.get_mut(t.port.idx()) {
                e.pkeys = db.pkeys.len() as u32;
                db.pkeys.push(PKeyTable::new(&t.keys));
            }
        }
        db.reindex();
        db
    }

    /// Recomputes the derived indexes (LID table, GUID map, rates) after overrides.
    fn reindex(&mut self) {
        self.lid_port.clear();
        self.guid_port.clear();
        for (i, port) in self.ports.iter().enumerate() {
            let node = &self.nodes[port.node as usize];
            let end = port.exists && (node.kind != NodeKind::Switch || port.num == 0);
            if !end || !port.known {
                continue;
            }
            self.guid_port.insert(port.guid, i as u32);
            let base = port.info.lid.0 as usize;
            if base == 0 || !port.info.lid.is_unicast() {
                continue;
            }
            let lmc = if node.kind == NodeKind::Switch && !self.lmc_capable(port.node) {
                0
            } else {
                port.info.lmc.min(7)
            };
            let top = (base + (1 << lmc) - 1).min(0xBFFF);
            if self.lid_port.len() <= top {
                self.lid_port.resize(top + 1, NONE);
            }
            for l in base..=top {
                self.lid_port[l] = i as u32;
            }
        }
        for i in 0..self.ports.len() {
            self.ports[i].rate = self.rate_of(i as u32);
            self.ports[i].mtu_cap = self.ports[i].info.mtu_cap.to_raw_value();
        }
    }

    /// OpenSM's rate of a port: a switch port looks at port 0's capability mask for
    /// extended speeds.
    fn rate_of(&self, p: u32) -> u8 {
        let port = &self.ports[p as usize];
        let node = &self.nodes[port.node as usize];
        let caps = if node.kind == NodeKind::Switch {
            self.ports
                .get(node.first_port as usize)
                .map_or(0, |p0| p0.info.capability_mask)
        } else {
            port.info.capability_mask
        };
        pi_rate(
            &port.info,
            caps & port_info::cap::IS_EXTENDED_SPEEDS_SUPPORTED != 0,
        )
    }

    /// Whether a switch's port 0 takes an LMC range (enhanced port 0 with LMC > 0).
    fn lmc_capable(&self, node: u32) -> bool {
        let n = &self.nodes[node as usize];
        self.switches
            .get(n.switch as usize)
            .is_some_and(|s| s.info.enhanced_port0)
    }

    /// Overrides a node's NodeInfo (as discovered) and NodeDescription.
    pub fn set_node_info(&mut self, n: NodeIdx, info: node_info::Repr, desc: &str) {
        if let Some(e) = self.nodes.get_mut(n.idx()) {
            e.info = info;
            e.desc = node_description::Repr::new(desc);
        }
    }

    /// Overrides a port's PortInfo (as the port last reported it).
    pub fn set_port_info(&mut self, p: PortIdx, info: port_info::Repr) {
        if let Some(e) = self.ports.get_mut(p.idx()) {
            e.info = info;
            e.known = e.exists;
        }
    }

    /// Overrides a switch's SwitchInfo.
    pub fn set_switch_info(&mut self, n: NodeIdx, info: switch_info::Repr) {
        let sw = self.nodes.get(n.idx()).map_or(NONE, |e| e.switch);
        if let Some(e) = self.switches.get_mut(sw as usize) {
            e.info = info;
        }
    }

    /// The SL-to-VL table a port uses for packets from `in_port` (0 on CAs).
    pub fn set_sl2vl(&mut self, out_port: PortIdx, in_port: u8, table: sl2vl::Repr) {
        self.sl2vl.insert((out_port.0, in_port), table);
    }

    /// One VL arbitration block (1..=4) of a port.
    pub fn set_vlarb(&mut self, port: PortIdx, block: u8, table: vl_arb::Repr) {
        self.vlarb.insert((port.0, block), table);
    }

    /// Forgets every MFT block of a switch.
    pub fn clear_mft(&mut self, switch: NodeIdx) {
        self.mft.retain(|&(n, _, _), _| n != switch.0);
    }

    /// One MFT block (for MulticastForwardingTableRecord).
    pub fn set_mft(&mut self, switch: NodeIdx, block: u16, position: u8, table: mft::Repr) {
        self.mft.insert((switch.0, block, position), table);
    }

    /// The service level of a partition (PathRecord SL when the query names none).
    pub fn set_partition_sl(&mut self, pkey: PKey, sl: u8) {
        self.partition_sl.insert(pkey.base(), sl);
    }

    /// Call after the overrides: recomputes LIDs, GUIDs and rates.
    pub fn finish(mut self) -> Db {
        self.reindex();
        self
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

    /// The end port owning `lid` (any LID of its range).
    pub(crate) fn port_by_lid(&self, lid: Lid) -> Option<u32> {
        match self.lid_port.get(lid.0 as usize) {
            Some(&p) if p != NONE => Some(p),
            _ => None,
        }
    }

    /// The end port with this port GUID.
    pub(crate) fn port_by_guid(&self, g: Guid) -> Option<u32> {
        self.guid_port.get(&g).copied()
    }

    pub(crate) fn port(&self, p: u32) -> &PortEntry {
        &self.ports[p as usize]
    }

    pub(crate) fn node_of(&self, p: u32) -> &NodeEntry {
        &self.nodes[self.ports[p as usize].node as usize]
    }

    /// Port `num` of node `n`, when it exists.
    pub(crate) fn port_of(&self, n: u32, num: u8) -> Option<u32> {
        let node = self.nodes.get(n as usize)?;
        if num > node.num_ports || (num == 0 && node.kind != NodeKind::Switch) {
            return None;
        }
        let p = node.first_port + num as u32;
        self.ports.get(p as usize).filter(|e| e.exists).map(|_| p)
    }

    /// The port that carries the LID of port `p`'s node (port 0 of a switch).
    pub(crate) fn lid_port_of(&self, p: u32) -> u32 {
        let node = self.node_of(p);
        if node.kind == NodeKind::Switch {
            node.first_port
        } else {
            p
        }
    }

    /// Base LID and LMC of the end port `p` (or of its switch's port 0).
    pub(crate) fn lid_range(&self, p: u32) -> (u16, u16) {
        let lp = self.lid_port_of(p);
        let port = self.port(lp);
        let base = port.info.lid.0;
        let node = self.node_of(lp);
        let lmc = if node.kind == NodeKind::Switch && !self.lmc_capable(port.node) {
            0
        } else {
            port.info.lmc.min(7)
        };
        (base, base.saturating_add((1u16 << lmc) - 1))
    }

    /// The LFT of switch node `n`: the output port for `dlid` (255 = none).
    #[inline]
    pub(crate) fn route(&self, n: u32, dlid: Lid) -> u8 {
        let sw = self.nodes[n as usize].switch;
        self.switches
            .get(sw as usize)
            .and_then(|s| s.lft.get(dlid.0 as usize))
            .copied()
            .unwrap_or(lft::NO_ROUTE.0)
    }

    /// The P_Key table of a port, if one is known.
    pub(crate) fn pkey_table(&self, p: u32) -> Option<&PKeyTable> {
        self.pkeys.get(self.port(p).pkeys as usize)
    }

    /// OpenSM's `osm_physp_share_pkey`: the same port, or a port without a known table,
    /// or a partition both tables hold with at least one full member.
    pub(crate) fn share_pkey(&self, a: u32, b: u32) -> bool {
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
    pub(crate) fn common_pkey(&self, a: u32, b: u32) -> Option<PKey> {
        common_pkey(self.pkey_table(a)?, self.pkey_table(b)?)
    }

    /// OpenSM's `osm_physp_share_this_pkey`.
    pub(crate) fn share_this_pkey(&self, a: u32, b: u32, key: PKey) -> bool {
        let find = |p: u32| {
            self.pkey_table(p)
                .and_then(|t| t.sorted.iter().find(|k| k.base() == key.base()).copied())
        };
        match (find(a), find(b)) {
            (Some(x), Some(y)) => x.is_full() || y.is_full(),
            _ => false,
        }
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
    }
}
