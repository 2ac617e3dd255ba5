//! The subnet management agent of every simulated node: Get and Set of each SMP attribute
//! with the attribute's rules (read-only fields stay, bad modifiers and values get the MAD
//! status a real agent returns, the port state machine refuses illegal transitions).

use sm_core::fabric::{NodeIdx, NodeKind, PortIdx};
use sm_mad::attr;
use sm_mad::port_info::{self, PhysPortState, PortState};
use sm_mad::{
    Guid, Lid, MadStatus, Method, Wire, guid_info, lft, mft, node_info, pkey_table, sl2vl,
    switch_info, vl_arb,
};

use crate::state::{GUID_CAP, LFT_CAP, MFT_CAP, PKEY_CAP, SimNode, SimPort};

/// A link-level consequence of a Set the fabric must carry out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// The port was set Down (or Polling): the link retrains, both ends come back to Init.
    Retrain(PortIdx),
    /// The port was disabled: the link goes down and stays down.
    Disable(PortIdx),
}

/// The outcome of one request at an SMA.
pub(crate) struct Answer {
    pub status: MadStatus,
    pub data: [u8; 64],
    pub effects: Vec<Effect>,
}

fn status_only(status: MadStatus, data: &[u8; 64]) -> Answer {
    Answer {
        status,
        data: *data,
        effects: Vec::new(),
    }
}

/// Mutable view of the fabric state one SMA may touch.
pub(crate) struct Agent<'a> {
    pub nodes: &'a mut [SimNode],
    pub ports: &'a mut [SimPort],
}

/// PortInfo attribute modifier bit 31, SMSupportsExtendedSpeeds.
const SM_SUPPORTS_EXTENDED_SPEEDS: u32 = 1 << 31;

impl Agent<'_> {
    fn port_idx(&self, n: NodeIdx, num: u8) -> Option<PortIdx> {
        let node = &self.nodes[n.idx()];
        let lowest = if node.kind == NodeKind::Switch { 0 } else { 1 };
        if num < lowest || num > node.num_ports {
            return None;
        }
        let base = node.first_port + if node.kind == NodeKind::Switch { 0 } else { 1 };
        Some(PortIdx(base + (num - lowest) as u32))
    }

    /// Handles Get or Set of `attr_id` arriving at node `n` on port `in_port`.
    pub(crate) fn handle(
        &mut self,
        n: NodeIdx,
        in_port: u8,
        method: Method,
        attr_id: u16,
        attr_mod: u32,
        data: &[u8; 64],
    ) -> Answer {
        if !matches!(method, Method::Get | Method::Set) {
            return status_only(MadStatus::METHOD_UNSUPPORTED, data);
        }
        let set = method == Method::Set;
        let r = match attr_id {
            attr::NODE_DESCRIPTION if !set => self.nodes[n.idx()].desc.emit_data(),
            attr::NODE_INFO if !set => self.node_info(n, in_port),
            attr::SWITCH_INFO => self.switch_info(n, set, attr_mod, data),
            attr::GUID_INFO => self.guid_info(n, in_port, set, attr_mod, data),
            attr::PORT_INFO => return self.port_info(n, in_port, set, attr_mod, data),
            attr::P_KEY_TABLE => self.pkey_table(n, in_port, set, attr_mod, data),
            attr::SL_TO_VL_MAPPING_TABLE => self.sl2vl(n, in_port, set, attr_mod, data),
            attr::VL_ARBITRATION_TABLE => self.vl_arb(n, in_port, set, attr_mod, data),
            attr::LINEAR_FORWARDING_TABLE => self.lft(n, set, attr_mod, data),
            attr::MULTICAST_FORWARDING_TABLE => self.mft(n, set, attr_mod, data),
            _ => Err(MadStatus::METHOD_ATTR_UNSUPPORTED),
        };
        match r {
            Ok(d) => Answer {
                status: MadStatus::OK,
                data: d,
                effects: Vec::new(),
            },
            Err(s) => status_only(s, data),
        }
    }

    fn node_info(&self, n: NodeIdx, in_port: u8) -> Result<[u8; 64], MadStatus> {
        let node = &self.nodes[n.idx()];
        let mut info: node_info::Repr = node.info;
        info.local_port_num = in_port;
        if node.kind != NodeKind::Switch {
            let p = self.port_idx(n, in_port).ok_or(MadStatus::INVALID_FIELD)?;
            info.port_guid = self.ports[p.idx()].guid;
        }
        emit(&info)
    }

    fn switch_mut(&mut self, n: NodeIdx) -> Result<&mut crate::state::SwitchState, MadStatus> {
        self.nodes[n.idx()]
            .switch
            .as_deref_mut()
            .ok_or(MadStatus::METHOD_ATTR_UNSUPPORTED)
    }

    fn switch_info(
        &mut self,
        n: NodeIdx,
        set: bool,
        attr_mod: u32,
        data: &[u8; 64],
    ) -> Result<[u8; 64], MadStatus> {
        if attr_mod != 0 {
            return Err(MadStatus::INVALID_FIELD);
        }
        let sw = self.switch_mut(n)?;
        if set {
            let new = switch_info::Repr::parse(data).map_err(|_| MadStatus::INVALID_FIELD)?;
            if new.linear_fdb_top.0 >= LFT_CAP
                || !(new.multicast_fdb_top.0 == 0
                    || new.multicast_fdb_top.0 == 0xBFFF
                    || (0xC000..0xC000 + MFT_CAP).contains(&new.multicast_fdb_top.0))
            {
                return Err(MadStatus::INVALID_FIELD);
            }
            let i = &mut sw.info;
            i.linear_fdb_top = new.linear_fdb_top;
            i.default_port = new.default_port;
            i.default_multicast_primary_port = new.default_multicast_primary_port;
            i.default_multicast_not_primary_port = new.default_multicast_not_primary_port;
            i.life_time_value = new.life_time_value;
            // Writing 1 clears PortStateChange.
            if new.port_state_change {
                i.port_state_change = false;
            }
            i.lids_per_port = new.lids_per_port;
            i.multicast_fdb_top = new.multicast_fdb_top;
        }
        emit(&sw.info)
    }

    fn guid_info(
        &mut self,
        n: NodeIdx,
        in_port: u8,
        set: bool,
        attr_mod: u32,
        data: &[u8; 64],
    ) -> Result<[u8; 64], MadStatus> {
        let node = &self.nodes[n.idx()];
        let num = if node.kind == NodeKind::Switch {
            0
        } else {
            in_port
        };
        let p = self.port_idx(n, num).ok_or(MadStatus::INVALID_FIELD)?;
        let cap = self.ports[p.idx()].info.guid_cap.min(GUID_CAP) as u32;
        if attr_mod * 8 >= cap.max(1) {
            return Err(MadStatus::INVALID_FIELD);
        }
        let port = &mut self.ports[p.idx()];
        if set {
            let b = guid_info::Repr::parse(data).map_err(|_| MadStatus::INVALID_FIELD)?;
            // Entry 0 of block 0 is the port GUID and read-only.
            for (i, g) in b.guid_block.iter().enumerate().skip(1) {
                port.guids[i] = *g;
            }
        }
        let mut block = [Guid(0); 8];
        block.copy_from_slice(&port.guids[..8]);
        emit(&guid_info::Repr { guid_block: block })
    }

    /// The port PortInfo, P_KeyTable, ... address: switches take it from the modifier,
    /// everything else answers for the port the SMP came in on.
    fn addressed_port(&self, n: NodeIdx, in_port: u8, num: u32) -> Result<PortIdx, MadStatus> {
        let node = &self.nodes[n.idx()];
        let num = if node.kind == NodeKind::Switch {
            num
        } else if num == 0 || num == in_port as u32 {
            in_port as u32
        } else {
            return Err(MadStatus::INVALID_FIELD);
        };
        if num > node.num_ports as u32 {
            return Err(MadStatus::INVALID_FIELD);
        }
        self.port_idx(n, num as u8).ok_or(MadStatus::INVALID_FIELD)
    }

    fn port_info(
        &mut self,
        n: NodeIdx,
        in_port: u8,
        set: bool,
        attr_mod: u32,
        data: &[u8; 64],
    ) -> Answer {
        // Bit 31: the SM supports extended speeds (IBA 14.2.5.6); the rest is reserved.
        let ext_ok = attr_mod & SM_SUPPORTS_EXTENDED_SPEEDS != 0;
        let attr_mod = attr_mod & !SM_SUPPORTS_EXTENDED_SPEEDS;
        let p = match self.addressed_port(n, in_port, attr_mod & 0xff) {
            Ok(p) if attr_mod >> 8 == 0 => p,
            _ => return status_only(MadStatus::INVALID_FIELD, data),
        };
        let mut effects = Vec::new();
        if set {
            match self.set_port_info(n, p, data) {
                Ok(e) => effects = e,
                Err(s) => return status_only(s, data),
            }
        }
        let mut info = self.ports[p.idx()].info;
        info.local_port_num = in_port;
        if !ext_ok && info.link_speed_ext_supported | info.link_speed_ext_supported2 != 0 {
            // An SM that does not say it knows extended speeds is not shown them, as
            // HDR, NDR and XDR ports do.
            info.link_speed_ext_active = 0;
            info.link_speed_ext_supported = 0;
            info.link_speed_ext_enabled = 0;
            info.link_speed_ext_active2 = 0;
            info.link_speed_ext_supported2 = 0;
            info.link_speed_ext_enabled2 = 0;
        }
        match emit(&info) {
            Ok(d) => Answer {
                status: MadStatus::OK,
                data: d,
                effects,
            },
            Err(s) => status_only(s, data),
        }
    }

    /// Validates a PortInfo Set completely, then applies it; nothing changes on refusal.
    fn set_port_info(
        &mut self,
        n: NodeIdx,
        p: PortIdx,
        data: &[u8; 64],
    ) -> Result<Vec<Effect>, MadStatus> {
        let new = port_info::Repr::parse(data).map_err(|_| MadStatus::INVALID_FIELD)?;
        let is_switch = self.nodes[n.idx()].kind == NodeKind::Switch;
        let stubborn = self.nodes[n.idx()].stubborn;
        let port = &self.ports[p.idx()];
        let cur = port.info;
        let endport = !is_switch || port.num == 0;
        let neighbour_state = port
            .remote
            .map(|r| self.ports[r.idx()].info.port_state)
            .unwrap_or(PortState::Down);

        // Port state machine.
        let mut effects = Vec::new();
        let state = match new.port_state {
            PortState::NoChange => cur.port_state,
            _ if is_switch && port.num == 0 => return Err(MadStatus::INVALID_FIELD),
            PortState::Down => {
                if cur.port_state != PortState::Down {
                    effects.push(Effect::Retrain(p));
                }
                cur.port_state
            }
            PortState::Armed if matches!(cur.port_state, PortState::Init | PortState::Armed) => {
                PortState::Armed
            }
            PortState::Active
                if cur.port_state == PortState::Active
                    || (cur.port_state == PortState::Armed
                        && matches!(neighbour_state, PortState::Armed | PortState::Active)) =>
            {
                PortState::Active
            }
            _ => return Err(MadStatus::INVALID_FIELD),
        };
        match new.port_physical_state {
            PhysPortState::NoChange => {}
            PhysPortState::Polling => effects.push(Effect::Retrain(p)),
            PhysPortState::Disabled => effects.push(Effect::Disable(p)),
            _ => return Err(MadStatus::INVALID_FIELD),
        }
        if new.lmc > 7 {
            return Err(MadStatus::INVALID_FIELD);
        }
        let mtu_ok = |m: port_info::Mtu| {
            m.bytes().is_some() && m.to_raw_value() <= cur.mtu_cap.to_raw_value()
        };
        if new.neighbor_mtu.to_raw_value() != 0 && !mtu_ok(new.neighbor_mtu) {
            return Err(MadStatus::INVALID_FIELD);
        }
        let op_vls = new.operational_vls.to_raw_value();
        if op_vls > cur.vl_cap.to_raw_value() || op_vls > 5 {
            return Err(MadStatus::INVALID_FIELD);
        }
        let width = new.link_width_enabled;
        let width_ok = width == 0 || width == 255 || width & !cur.link_width_supported == 0;
        let speed = new.link_speed_enabled;
        let speed_ok = speed == 0 || speed == 15 || speed & !cur.link_speed_supported == 0;
        let ext = new.link_speed_ext_enabled;
        let ext_ok = ext == 0 || ext == 30 || ext == 31 || ext & !cur.link_speed_ext_supported == 0;
        if !width_ok || !speed_ok || !ext_ok {
            return Err(MadStatus::INVALID_FIELD);
        }

        let port = &mut self.ports[p.idx()];
        let i = &mut port.info;
        i.m_key = new.m_key;
        i.gid_prefix = new.gid_prefix;
        if endport {
            i.lid = new.lid;
            i.master_sm_lid = new.master_sm_lid;
            i.lmc = new.lmc;
            i.master_sm_sl = new.master_sm_sl;
            // The bit is an event for the host (reads back 0): counted, not kept.
            if new.client_reregister
                && i.capability_mask & port_info::cap::IS_CLIENT_REREGISTRATION_SUPPORTED != 0
            {
                port.reregistrations += 1;
            }
            i.client_reregister = false;
            i.subnet_timeout = new.subnet_timeout;
        }
        if !stubborn {
            i.m_key_lease_period = new.m_key_lease_period;
        }
        i.m_key_protect_bits = new.m_key_protect_bits;
        match width {
            0 => {}
            255 => i.link_width_enabled = i.link_width_supported,
            w => i.link_width_enabled = w,
        }
        match speed {
            _ if stubborn => {}
            0 => {}
            15 => i.link_speed_enabled = i.link_speed_supported,
            s => i.link_speed_enabled = s,
        }
        match ext {
            0 => {}
            30 => i.link_speed_ext_enabled = 0,
            31 => i.link_speed_ext_enabled = i.link_speed_ext_supported,
            e => i.link_speed_ext_enabled = e,
        }
        if new.link_down_default_state.to_raw_value() != 0 {
            i.link_down_default_state = new.link_down_default_state;
        }
        if new.neighbor_mtu.to_raw_value() != 0 {
            i.neighbor_mtu = new.neighbor_mtu;
        }
        i.vl_high_limit = new.vl_high_limit;
        i.vl_stall_count = new.vl_stall_count;
        i.hoq_life = new.hoq_life;
        if op_vls != 0 {
            i.operational_vls = new.operational_vls;
        }
        i.partition_enforcement_inbound = new.partition_enforcement_inbound;
        i.partition_enforcement_outbound = new.partition_enforcement_outbound;
        i.filter_raw_inbound = new.filter_raw_inbound;
        i.filter_raw_outbound = new.filter_raw_outbound;
        i.m_key_violations = new.m_key_violations;
        i.p_key_violations = new.p_key_violations;
        i.q_key_violations = new.q_key_violations;
        i.local_phy_errors = new.local_phy_errors;
        i.overrun_errors = new.overrun_errors;
        i.port_state = state;
        Ok(effects)
    }

    fn pkey_table(
        &mut self,
        n: NodeIdx,
        in_port: u8,
        set: bool,
        attr_mod: u32,
        data: &[u8; 64],
    ) -> Result<[u8; 64], MadStatus> {
        let block = (attr_mod & 0xffff) as usize;
        let p = self.addressed_port(n, in_port, (attr_mod >> 16) & 0xff)?;
        if attr_mod >> 24 != 0 || (block + 1) * pkey_table::ENTRIES > PKEY_CAP as usize {
            return Err(MadStatus::INVALID_FIELD);
        }
        let port = &mut self.ports[p.idx()];
        if set {
            let t = pkey_table::Repr::parse(data).map_err(|_| MadStatus::INVALID_FIELD)?;
            port.pkeys_mut()[block * 32..block * 32 + 32].copy_from_slice(&t.p_key_table);
        }
        emit(&pkey_table::Repr::from_keys(&port.pkey_block(block)))
    }

    fn sl2vl(
        &mut self,
        n: NodeIdx,
        in_port: u8,
        set: bool,
        attr_mod: u32,
        data: &[u8; 64],
    ) -> Result<[u8; 64], MadStatus> {
        let node = &self.nodes[n.idx()];
        let num_ports = node.num_ports;
        let new = if set {
            let t = sl2vl::Repr::parse(data).map_err(|_| MadStatus::INVALID_FIELD)?;
            let mut v = [0u8; 16];
            for (d, s) in v.iter_mut().zip(t.sl_to_vl.iter()) {
                *d = s.0;
            }
            Some(v)
        } else {
            None
        };
        if node.kind != NodeKind::Switch {
            if attr_mod != 0 {
                return Err(MadStatus::INVALID_FIELD);
            }
            let p = self.port_idx(n, in_port).ok_or(MadStatus::INVALID_FIELD)?;
            let port = &mut self.ports[p.idx()];
            if let Some(v) = new {
                port.sl2vl = v;
            }
            return emit(&sl2vl::Repr::new(port.sl2vl));
        }
        let m = sl2vl::Modifier::from_attr_mod(attr_mod).map_err(|_| MadStatus::INVALID_FIELD)?;
        let (input, output) = ((attr_mod >> 8) as u8, attr_mod as u8);
        if input > num_ports || output > num_ports {
            return Err(MadStatus::INVALID_FIELD);
        }
        let sw = self.switch_mut(n)?;
        if m.is_optimized() {
            // Optimized programming (advertised in SwitchInfo): a Set of many pairs at
            // once, answered with the table set; a Get names one pair.
            let Some(v) = new else {
                return Err(MadStatus::INVALID_FIELD);
            };
            let enhanced = sw.info.enhanced_port0;
            for i in m.input_ports(num_ports, enhanced) {
                for o in m.output_ports(num_ports, enhanced) {
                    sw.set_sl2vl(num_ports, i, o, v);
                }
            }
            let mut echo = [0u8; 64];
            echo.copy_from_slice(data);
            return Ok(echo);
        }
        if let Some(v) = new {
            sw.set_sl2vl(num_ports, input, output, v);
        }
        emit(&sl2vl::Repr::new(sw.sl2vl(num_ports, input, output)))
    }

    fn vl_arb(
        &mut self,
        n: NodeIdx,
        in_port: u8,
        set: bool,
        attr_mod: u32,
        data: &[u8; 64],
    ) -> Result<[u8; 64], MadStatus> {
        let m = vl_arb::Modifier::from_attr_mod(attr_mod).map_err(|_| MadStatus::INVALID_FIELD)?;
        let num = attr_mod & 0xff;
        let p = self.addressed_port(n, in_port, num)?;
        let port = &mut self.ports[p.idx()];
        let block = m.block;
        let first = block.first_entry();
        if set {
            let t = vl_arb::Repr::parse(data).map_err(|_| MadStatus::INVALID_FIELD)?;
            let tables = port.vlarb.get_or_insert_with(Default::default);
            let table = if block.is_high_priority() {
                &mut tables.high
            } else {
                &mut tables.low
            };
            table[first..first + 32].copy_from_slice(&t.vl_arbitration_table);
        }
        let mut out = [vl_arb::Entry::new(0, 0); 32];
        if let Some(tables) = &port.vlarb {
            let table = if block.is_high_priority() {
                &tables.high
            } else {
                &tables.low
            };
            out.copy_from_slice(&table[first..first + 32]);
        }
        emit(&vl_arb::Repr {
            vl_arbitration_table: out,
        })
    }

    fn lft(
        &mut self,
        n: NodeIdx,
        set: bool,
        attr_mod: u32,
        data: &[u8; 64],
    ) -> Result<[u8; 64], MadStatus> {
        let sw = self.switch_mut(n)?;
        let block = attr_mod as usize;
        if (block + 1) * lft::ENTRIES > LFT_CAP as usize {
            return Err(MadStatus::INVALID_FIELD);
        }
        if set && !sw.set_lft_block(block, data) {
            return Err(MadStatus::INVALID_FIELD);
        }
        Ok(sw.lft_block(block))
    }

    fn mft(
        &mut self,
        n: NodeIdx,
        set: bool,
        attr_mod: u32,
        data: &[u8; 64],
    ) -> Result<[u8; 64], MadStatus> {
        let num_ports = self.nodes[n.idx()].num_ports;
        let m = mft::Modifier::from_attr_mod(attr_mod).map_err(|_| MadStatus::INVALID_FIELD)?;
        let (block, pos) = (m.block as usize, m.position as usize);
        if (block + 1) * mft::ENTRIES > MFT_CAP as usize || pos * 16 > num_ports as usize {
            return Err(MadStatus::INVALID_FIELD);
        }
        let sw = self.switch_mut(n)?;
        if set && sw.mft.is_empty() {
            sw.mft = vec![[0; 16]; MFT_CAP as usize];
        }
        let new = if set {
            Some(mft::Repr::parse(data).map_err(|_| MadStatus::INVALID_FIELD)?)
        } else {
            None
        };
        let mut out = mft::Repr {
            port_mask_block: [0; mft::ENTRIES],
        };
        for (slot, mask) in out.port_mask_block.iter_mut().enumerate() {
            let mlid = block * mft::ENTRIES + slot;
            if let Some(row) = sw.mft.get_mut(mlid) {
                if let Some(t) = &new {
                    row[pos] = t.port_mask_block[slot];
                }
                *mask = row[pos];
            }
        }
        emit(&out)
    }
}

fn emit<W: Wire>(w: &W) -> Result<[u8; 64], MadStatus> {
    let mut d = [0u8; 64];
    w.emit(&mut d).map_err(|_| MadStatus::INVALID_FIELD)?;
    Ok(d)
}

trait EmitData {
    fn emit_data(&self) -> Result<[u8; 64], MadStatus>;
}

impl EmitData for sm_mad::node_description::Repr {
    fn emit_data(&self) -> Result<[u8; 64], MadStatus> {
        emit(self)
    }
}

/// The LID range an end port answers to.
pub(crate) fn owns_lid(info: &port_info::Repr, lid: Lid) -> bool {
    let base = info.lid.0 as u32;
    base != 0 && (lid.0 as u32) >= base && (lid.0 as u32) < base + (1u32 << info.lmc.min(7))
}
