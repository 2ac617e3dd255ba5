//! What every simulated node holds: the attributes its SMA answers with, per node and per
//! port, laid out in vectors parallel to the fabric's nodes and ports.

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx, Speed};
use sm_mad::port_info::{self, LinkDownDefaultState, Mtu, PhysPortState, PortState, VlCap, cap};
use sm_mad::{Guid, Lid, PKey, Vl, node_description, node_info, switch_info, vl_arb};

/// Linear forwarding table capacity of simulated switches (the whole unicast space).
pub const LFT_CAP: u16 = 0xC000;
/// Multicast forwarding table capacity (MLIDs).
pub const MFT_CAP: u16 = 1024;
/// P_Key table entries of every port.
pub const PKEY_CAP: u16 = 32;
/// GUIDInfo entries of CA ports.
pub const GUID_CAP: u8 = 8;

/// A switch's forwarding state.
#[derive(Debug, Clone)]
pub struct SwitchState {
    pub info: switch_info::Repr,
    /// Output port per LID, 255 = none. Grows by whole 64-entry blocks as blocks are set
    /// (up to `LFT_CAP` entries); an entry beyond its end reads 255.
    pub lft: Vec<u8>,
    /// Port masks per MLID and position, allocated on first use.
    pub mft: Vec<[u16; 16]>,
    /// SL-to-VL tables per (input, output) port pair, allocated on first Set.
    pub sl2vl: Vec<[u8; 16]>,
}

/// A simulated node.
#[derive(Debug, Clone)]
pub struct SimNode {
    pub kind: NodeKind,
    pub num_ports: u8,
    pub first_port: u32,
    /// NodeInfo as the node reports it; `port_guid` and `local_port_num` are per query.
    pub info: node_info::Repr,
    pub desc: node_description::Repr,
    pub switch: Option<Box<SwitchState>>,
    /// False while the node is removed or rebooting: it answers nothing and passes nothing.
    pub alive: bool,
    /// Removed for good: its links are gone.
    pub removed: bool,
    /// Unplugged: its cables stay, it is dead until plugged in again.
    pub unplugged: bool,
    /// Receives MADs but never answers (a hung SMA).
    pub silent: bool,
    /// Its agent answers PortInfo Sets but keeps LinkSpeedEnabled and M_KeyLeasePeriod as
    /// they are, as ibsim's agents keep a LinkSpeedEnabled of 15 and any lease period.
    pub stubborn: bool,
    /// Extra SMA processing time, in virtual nanoseconds.
    pub extra_delay: u64,
    /// Faults on every SMP this node's agent receives or sends.
    pub faults: Option<Box<crate::Faults>>,
    /// Times it powered up again (a reboot, a plug): what it held was lost each time.
    pub power_ups: u32,
}

/// What a port is built as: the values it comes back to at power-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortHw {
    /// LinkWidthEnabled at power-up (one width bit).
    pub width: u8,
    pub speed: Speed,
    /// MTUCap code.
    pub mtu_cap: u8,
    /// VLCap code.
    pub vl_cap: u8,
    /// Some port of the node runs extended speeds: its end ports say so.
    pub node_ext: bool,
    /// Some port of the node runs XDR: its end ports declare the second extended field.
    pub node_xdr: bool,
}

/// The M_Key lease timer of a port (IBA 14.2.4.2), in virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lease {
    /// When the protection bits fall back to 0, while the timer runs.
    pub expires: Option<u64>,
    /// Bumped whenever the timer starts or stops, so a stale expiry event is ignored.
    pub(crate) generation: u32,
    /// When the port last sent a Trap 256: it sends at most one per trap interval, as
    /// agents throttle their traps (a refused TrapRepress of a Trap 256 would otherwise
    /// start another at once).
    pub(crate) last_trap: Option<u64>,
}

/// A simulated port.
#[derive(Debug, Clone)]
pub struct SimPort {
    pub node: NodeIdx,
    pub num: u8,
    pub exists: bool,
    pub guid: Guid,
    pub info: port_info::Repr,
    /// The P_Key table; empty until the first Set, which reads as the power-up table
    /// (the default P_Key 0xFFFF first, then zeros). See [`SimPort::pkey_block`].
    pub pkeys: Vec<PKey>,
    /// CA and switch port 0: one SL-to-VL table.
    pub sl2vl: [u8; 16],
    /// VL arbitration tables, allocated on the first Set (all zero until then).
    pub vlarb: Option<Box<VlArb>>,
    pub guids: [Guid; GUID_CAP as usize],
    /// The cable: where this port's link goes while the physical link is up.
    pub remote: Option<PortIdx>,
    pub hw: PortHw,
    /// M_Key lease timer (meaningful on CA ports and switch port 0).
    pub lease: Lease,
    /// Faults on each crossing of this port's link (set on both ends).
    pub faults: Option<Box<crate::Faults>>,
    /// Client reregistration requests received (PortInfo Sets with ClientReregister on an
    /// end port): each tells the host's SA clients to register again.
    pub reregistrations: u32,
    /// Times this port's link went down since power-on of the simulation: a count no
    /// management packet clears (LinkDownedCounter can be), for tests that must know
    /// whether a link bounced between two looks.
    pub link_downs: u64,
    /// The port's PortCounters, as its performance management agent answers them (they
    /// stop at their maximum, as the hardware's do).
    pub counters: sm_mad::perf::Repr,
    /// Its PortCountersExtended (64-bit traffic counters).
    pub ext_counters: sm_mad::perf::ext::Repr,
}

/// A port's VL arbitration tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlArb {
    pub low: [vl_arb::Entry; 64],
    pub high: [vl_arb::Entry; 64],
}

impl Default for VlArb {
    fn default() -> Self {
        VlArb {
            low: [vl_arb::Entry::new(0, 0); 64],
            high: [vl_arb::Entry::new(0, 0); 64],
        }
    }
}

fn ca_capabilities() -> u32 {
    cap::IS_TRAP_SUPPORTED
        | cap::IS_SL_MAPPING_SUPPORTED
        | cap::IS_SYSTEM_IMAGE_GUID_SUPPORTED
        | cap::IS_CAPABILITY_MASK2_SUPPORTED
        | cap::IS_COMMUNICATION_MANAGEMENT_SUPPORTED
        | cap::IS_VENDOR_CLASS_SUPPORTED
        | cap::IS_CLIENT_REREGISTRATION_SUPPORTED
}

fn switch_port0_capabilities() -> u32 {
    cap::IS_TRAP_SUPPORTED
        | cap::IS_SL_MAPPING_SUPPORTED
        | cap::IS_SYSTEM_IMAGE_GUID_SUPPORTED
        | cap::IS_VENDOR_CLASS_SUPPORTED
        | cap::IS_MULTICAST_FDB_TOP_SUPPORTED
}

/// PortInfo of a port straight after power-up, before any SM.
pub(crate) fn initial_port_info(
    kind: NodeKind,
    num: u8,
    hw: PortHw,
    linked: bool,
) -> port_info::Repr {
    let is_switch = kind == NodeKind::Switch;
    let endport = !is_switch || num == 0;
    let (state, phys) = if is_switch && num == 0 {
        (PortState::Active, PhysPortState::LinkUp)
    } else if linked {
        (PortState::Init, PhysPortState::LinkUp)
    } else {
        (PortState::Down, PhysPortState::Polling)
    };
    let vl_cap = VlCap::from_raw_value(hw.vl_cap);
    let node_caps = match (hw.node_ext, hw.node_xdr) {
        (_, true) => cap::IS_EXTENDED_SPEEDS_SUPPORTED | cap::IS_CAPABILITY_MASK2_SUPPORTED,
        (true, false) => cap::IS_EXTENDED_SPEEDS_SUPPORTED,
        _ => 0,
    };
    port_info::Repr {
        capability_mask: if !endport {
            0
        } else if is_switch {
            switch_port0_capabilities() | node_caps
        } else {
            ca_capabilities() | node_caps
        },
        m_key_lease_period: 0,
        local_port_num: num,
        link_width_enabled: hw.width,
        link_width_supported: port_info::link_width::X1
            | port_info::link_width::X4
            | port_info::link_width::X8
            | port_info::link_width::X12
            | port_info::link_width::X2,
        link_width_active: if linked || num == 0 { hw.width } else { 0 },
        link_speed_supported: 7,
        port_state: state,
        port_physical_state: phys,
        link_down_default_state: LinkDownDefaultState::Polling,
        link_speed_active: if linked { hw.speed.speed } else { 0 },
        link_speed_enabled: 7,
        neighbor_mtu: Mtu::from_raw_value(hw.mtu_cap),
        vl_cap,
        vl_high_limit: 0,
        vl_arbitration_high_cap: 8,
        vl_arbitration_low_cap: 8,
        mtu_cap: Mtu::from_raw_value(hw.mtu_cap),
        vl_stall_count: 7,
        operational_vls: VlCap::Vl0,
        guid_cap: if endport && !is_switch { GUID_CAP } else { 1 },
        subnet_timeout: 0,
        capability_mask2: if endport && hw.node_xdr {
            port_info::cap2::IS_EXTENDED_SPEEDS_2_SUPPORTED
                | port_info::cap2::IS_LINK_SPEED_XDR_SUPPORTED
        } else {
            0
        },
        link_speed_ext_active: if linked { hw.speed.ext } else { 0 },
        link_speed_ext_supported: if hw.speed.ext | hw.speed.ext2 != 0 {
            15
        } else {
            0
        },
        link_speed_ext_enabled: if hw.speed.ext | hw.speed.ext2 != 0 {
            15
        } else {
            0
        },
        link_speed_ext_active2: if linked { hw.speed.ext2 } else { 0 },
        link_speed_ext_supported2: hw.speed.ext2,
        link_speed_ext_enabled2: hw.speed.ext2,
        ..port_info::Repr::default()
    }
}

/// Builds the node and port state of a freshly powered fabric.
pub(crate) fn build(fabric: &Fabric) -> (Vec<SimNode>, Vec<SimPort>) {
    let mut nodes = Vec::with_capacity(fabric.nodes().len());
    for (i, n) in fabric.nodes().iter().enumerate() {
        let ni = NodeIdx(i as u32);
        let first_port = fabric
            .port_of(ni, if n.kind == NodeKind::Switch { 0 } else { 1 })
            .map_or(0, |p| p.0 - if n.kind == NodeKind::Switch { 0 } else { 1 });
        let switch = (n.kind == NodeKind::Switch).then(|| Box::new(new_switch()));
        nodes.push(SimNode {
            kind: n.kind,
            num_ports: n.num_ports,
            first_port,
            info: node_info::Repr {
                base_version: 1,
                class_version: 1,
                node_type: n.kind.node_type(),
                num_ports: n.num_ports,
                system_image_guid: n.system_guid,
                node_guid: n.guid,
                port_guid: n.guid,
                partition_cap: PKEY_CAP,
                device_id: n.device_id,
                revision: n.revision,
                local_port_num: 0,
                vendor_id: n.vendor_id,
            },
            desc: node_description::Repr::new(&n.description),
            switch,
            alive: true,
            unplugged: false,
            removed: false,
            silent: false,
            stubborn: false,
            extra_delay: 0,
            faults: None,
            power_ups: 0,
        });
    }
    let mut ports = Vec::with_capacity(fabric.ports().len());
    for p in fabric.ports() {
        let hw = PortHw {
            width: p.width,
            speed: p.speed,
            mtu_cap: p.mtu_cap,
            vl_cap: p.vl_cap,
            node_ext: false,
            node_xdr: false,
        };
        let port = SimPort {
            node: p.node,
            num: p.num,
            exists: p.exists,
            guid: p.guid,
            info: port_info::Repr::default(),
            pkeys: Vec::new(),
            counters: sm_mad::perf::Repr::default(),
            ext_counters: sm_mad::perf::ext::Repr::default(),
            sl2vl: [0; 16],
            vlarb: None,
            guids: [Guid(0); GUID_CAP as usize],
            remote: p.remote,
            hw,
            lease: Lease::default(),
            faults: None,
            reregistrations: 0,
            link_downs: 0,
        };
        ports.push(port);
    }
    // A node with extended-speed ports says so in its end ports' CapabilityMask (a
    // switch's port 0 speaks for its other ports), after every power-up too.
    for n in &nodes {
        let first = n.first_port as usize + usize::from(n.kind != NodeKind::Switch);
        let mine = first..=n.first_port as usize + usize::from(n.num_ports);
        let Some(ps) = ports.get_mut(mine) else {
            continue;
        };
        let live = || ps.iter().filter(|p| p.exists);
        let ext = live().any(|p| p.hw.speed.ext | p.hw.speed.ext2 != 0);
        let xdr = live().any(|p| p.hw.speed.ext2 != 0);
        for p in ps.iter_mut() {
            p.hw.node_ext = ext;
            p.hw.node_xdr = xdr;
            p.power_up(n.kind);
        }
    }
    (nodes, ports)
}

impl SimPort {
    /// P_Key table block `block` (32 entries).
    pub fn pkey_block(&self, block: usize) -> [PKey; 32] {
        let mut out = [PKey(0); 32];
        match self.pkeys.get(block * 32..block * 32 + 32) {
            Some(b) => out.copy_from_slice(b),
            None if block == 0 => out[0] = PKey::DEFAULT,
            None => {}
        }
        out
    }

    /// The P_Key table as the port holds it (power-up contents until first set).
    pub fn pkeys(&self) -> &[PKey] {
        const POWER_UP: [PKey; 1] = [PKey::DEFAULT];
        if self.pkeys.is_empty() {
            &POWER_UP
        } else {
            &self.pkeys
        }
    }

    /// The whole P_Key table, allocated at its power-up contents on first use.
    pub(crate) fn pkeys_mut(&mut self) -> &mut [PKey] {
        if self.pkeys.is_empty() {
            self.pkeys = vec![PKey(0); PKEY_CAP as usize];
            self.pkeys[0] = PKey::DEFAULT;
        }
        &mut self.pkeys
    }

    /// Everything an SM can set goes back to its power-up value; the cable, the hardware
    /// and the fault settings stay.
    pub(crate) fn power_up(&mut self, kind: NodeKind) {
        self.info = if self.exists {
            initial_port_info(kind, self.num, self.hw, self.remote.is_some())
        } else {
            port_info::Repr::default()
        };
        self.pkeys = Vec::new();
        self.sl2vl = [0; 16];
        self.vlarb = None;
        self.guids = [Guid(0); GUID_CAP as usize];
        self.guids[0] = self.guid;
        self.lease.expires = None;
        self.lease.generation = self.lease.generation.wrapping_add(1);
    }
}

pub(crate) fn new_switch() -> SwitchState {
    SwitchState {
        info: switch_info::Repr {
            linear_fdb_cap: LFT_CAP,
            multicast_fdb_cap: MFT_CAP,
            linear_fdb_top: Lid(0),
            life_time_value: 18,
            port_state_change: true,
            partition_enforcement_cap: PKEY_CAP,
            inbound_enforcement_cap: true,
            outbound_enforcement_cap: true,
            filter_raw_inbound_cap: true,
            filter_raw_outbound_cap: true,
            multicast_fdb_top: Lid(0),
            // Optimized SL-to-VL programming: the "all input / output ports" modifier bits.
            optimized_sl_to_vl_mapping_programming: 1,
            ..switch_info::Repr::default()
        },
        lft: Vec::new(),
        mft: Vec::new(),
        sl2vl: Vec::new(),
    }
}

impl SwitchState {
    /// The output port for `lid` (255 = none).
    #[inline]
    pub fn lft_entry(&self, lid: Lid) -> u8 {
        self.lft.get(lid.0 as usize).copied().unwrap_or(255)
    }

    /// LFT block `block` (64 entries); unprogrammed entries read 255.
    pub fn lft_block(&self, block: usize) -> [u8; 64] {
        let mut out = [255u8; 64];
        if let Some(b) = self.lft.get(block * 64..block * 64 + 64) {
            out.copy_from_slice(b);
        }
        out
    }

    /// Sets LFT block `block`; `false` (nothing changes) beyond the capacity.
    pub fn set_lft_block(&mut self, block: usize, entries: &[u8; 64]) -> bool {
        let end = (block + 1) * 64;
        if end > LFT_CAP as usize {
            return false;
        }
        if self.lft.len() < end {
            self.lft.resize(end, 255);
        }
        self.lft[block * 64..end].copy_from_slice(entries);
        true
    }

    /// The SL-to-VL table for traffic entering `input` and leaving `output`.
    pub fn sl2vl(&self, num_ports: u8, input: u8, output: u8) -> [u8; 16] {
        let n = num_ports as usize + 1;
        self.sl2vl
            .get(input as usize * n + output as usize)
            .copied()
            .unwrap_or([0; 16])
    }

    /// Sets one (input, output) table, allocating the matrix on first use.
    pub fn set_sl2vl(&mut self, num_ports: u8, input: u8, output: u8, table: [u8; 16]) {
        let n = num_ports as usize + 1;
        if self.sl2vl.is_empty() {
            self.sl2vl = vec![[0; 16]; n * n];
        }
        if let Some(t) = self.sl2vl.get_mut(input as usize * n + output as usize) {
            *t = table;
        }
    }
}

/// The VL an SL maps to in a table.
pub fn vl_of(table: &[u8; 16], sl: u8) -> Vl {
    Vl(table[(sl & 15) as usize])
}
