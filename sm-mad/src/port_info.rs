//! PortInfo (IBA 14.2.5.6): the state and configuration of one port. 64 bytes.
//!
//! The attribute modifier is the port number: on a switch it selects any port, 0 being the
//! management port; a channel adapter or router answers for the port named. [`attr_mod`]
//! builds it.
//!
//! Besides the layout, the module holds what an SM needs to read the link fields: the
//! capability bits ([`cap`], [`cap2`]), the width and speed bit masks ([`link_width`],
//! [`link_speed`], [`link_speed_ext`]) and the data rate of an active link ([`Rate`]) in the
//! encoding PathRecord uses.

use crate::bits::{wire_enum, wire_struct};
use crate::{Lid, Sl, SmpAttribute};

/// The attribute modifier that addresses `port`.
pub const fn attr_mod(port: u8) -> u32 {
    port as u32
}

wire_enum! {
    /// The logical link state (PortState). Sent as `NoChange` in a Set that must not move it.
    pub enum PortState: u8 {
        NoChange = 0,
        Down = 1,
        Init = 2,
        Armed = 3,
        Active = 4,
        ActiveDefer = 5,
    }
}

wire_enum! {
    /// The physical link state (PortPhysicalState).
    pub enum PhysPortState: u8 {
        NoChange = 0,
        Sleep = 1,
        Polling = 2,
        Disabled = 3,
        PortConfigurationTraining = 4,
        LinkUp = 5,
        LinkErrorRecovery = 6,
        PhyTest = 7,
    }
}

wire_enum! {
    /// The physical state a port falls back to when its link goes down.
    pub enum LinkDownDefaultState: u8 {
        NoChange = 0,
        Sleep = 1,
        Polling = 2,
    }
}

pub use crate::link::{Mtu, Rate};

wire_enum! {
    /// The data virtual lanes a port supports (VLCap) or runs (OperationalVLs).
    pub enum VlCap: u8 {
        /// VL0 only.
        Vl0 = 1,
        Vl0To1 = 2,
        Vl0To3 = 3,
        Vl0To7 = 4,
        Vl0To14 = 5,
    }
}

impl VlCap {
    /// How many data VLs the code stands for, `None` when it is not defined.
    pub const fn data_vls(self) -> Option<u8> {
        match self {
            VlCap::Vl0 => Some(1),
            VlCap::Vl0To1 => Some(2),
            VlCap::Vl0To3 => Some(4),
            VlCap::Vl0To7 => Some(8),
            VlCap::Vl0To14 => Some(15),
            VlCap::Unknown(_) => None,
        }
    }
}

/// CapabilityMask bits (a `u32` as on the wire, bit 0 least significant).
pub mod cap {
    pub const IS_SM: u32 = 1 << 1;
    pub const IS_NOTICE_SUPPORTED: u32 = 1 << 2;
    pub const IS_TRAP_SUPPORTED: u32 = 1 << 3;
    pub const IS_OPTIONAL_IPD_SUPPORTED: u32 = 1 << 4;
    pub const IS_AUTOMATIC_MIGRATION_SUPPORTED: u32 = 1 << 5;
    pub const IS_SL_MAPPING_SUPPORTED: u32 = 1 << 6;
    pub const IS_M_KEY_NVRAM: u32 = 1 << 7;
    pub const IS_P_KEY_NVRAM: u32 = 1 << 8;
    pub const IS_LED_INFO_SUPPORTED: u32 = 1 << 9;
    pub const IS_SM_DISABLED: u32 = 1 << 10;
    pub const IS_SYSTEM_IMAGE_GUID_SUPPORTED: u32 = 1 << 11;
    pub const IS_P_KEY_SWITCH_EXTERNAL_PORT_TRAP_SUPPORTED: u32 = 1 << 12;
    pub const IS_CABLE_INFO_SUPPORTED: u32 = 1 << 13;
    /// LinkSpeedExt* fields are valid.
    pub const IS_EXTENDED_SPEEDS_SUPPORTED: u32 = 1 << 14;
    /// CapabilityMask2 is valid.
    pub const IS_CAPABILITY_MASK2_SUPPORTED: u32 = 1 << 15;
    pub const IS_COMMUNICATION_MANAGEMENT_SUPPORTED: u32 = 1 << 16;
    pub const IS_SNMP_TUNNELING_SUPPORTED: u32 = 1 << 17;
    pub const IS_REINIT_SUPPORTED: u32 = 1 << 18;
    pub const IS_DEVICE_MANAGEMENT_SUPPORTED: u32 = 1 << 19;
    pub const IS_VENDOR_CLASS_SUPPORTED: u32 = 1 << 20;
    pub const IS_DR_NOTICE_SUPPORTED: u32 = 1 << 21;
    pub const IS_CAPABILITY_MASK_NOTICE_SUPPORTED: u32 = 1 << 22;
    pub const IS_BOOT_MANAGEMENT_SUPPORTED: u32 = 1 << 23;
    pub const IS_LINK_ROUND_TRIP_LATENCY_SUPPORTED: u32 = 1 << 24;
    /// The port honours ClientReregister.
    pub const IS_CLIENT_REREGISTRATION_SUPPORTED: u32 = 1 << 25;
    pub const IS_OTHER_LOCAL_CHANGES_NOTICE_SUPPORTED: u32 = 1 << 26;
    pub const IS_LINK_SPEED_WIDTH_PAIRS_TABLE_SUPPORTED: u32 = 1 << 27;
    pub const IS_VENDOR_SPECIFIC_MADS_TABLE_SUPPORTED: u32 = 1 << 28;
    pub const IS_MCAST_PKEY_TRAP_SUPPRESSION_SUPPORTED: u32 = 1 << 29;
    /// The switch honours SwitchInfo.MulticastFDBTop.
    pub const IS_MULTICAST_FDB_TOP_SUPPORTED: u32 = 1 << 30;
    pub const IS_HIERARCHY_INFO_SUPPORTED: u32 = 1 << 31;
}

/// CapabilityMask2 bits (valid when [`cap::IS_CAPABILITY_MASK2_SUPPORTED`] is set).
pub mod cap2 {
    pub const IS_SET_NODE_DESCRIPTION_SUPPORTED: u16 = 1 << 0;
    pub const IS_PORT_INFO_EXTENDED_SUPPORTED: u16 = 1 << 1;
    pub const IS_VIRTUALIZATION_SUPPORTED: u16 = 1 << 2;
    pub const IS_SWITCH_PORT_STATE_TABLE_SUPPORTED: u16 = 1 << 3;
    pub const IS_LINK_WIDTH_2X_SUPPORTED: u16 = 1 << 4;
    pub const IS_LINK_SPEED_HDR_SUPPORTED: u16 = 1 << 5;
    pub const IS_LINK_SPEED_NDR_SUPPORTED: u16 = 1 << 10;
    /// The LinkSpeedExt*2 fields (XDR) are valid.
    pub const IS_EXTENDED_SPEEDS_2_SUPPORTED: u16 = 1 << 11;
    pub const IS_LINK_SPEED_XDR_SUPPORTED: u16 = 1 << 12;
}

/// LinkSpeedExtActive2 / LinkSpeedExtSupported2 / LinkSpeedExtEnabled2 bits.
pub mod link_speed_ext2 {
    /// 212.5 Gb/s per lane (200 Gb/s of data).
    pub const XDR: u8 = 1;
}

/// LinkWidthEnabled / LinkWidthSupported / LinkWidthActive bits. Active holds one bit.
pub mod link_width {
    pub const X1: u8 = 1;
    pub const X4: u8 = 2;
    pub const X8: u8 = 4;
    pub const X12: u8 = 8;
    pub const X2: u8 = 16;
    /// In a Set of LinkWidthEnabled: enable every supported width.
    pub const SET_TO_SUPPORTED: u8 = 255;

    /// Lanes of an active width, `None` unless exactly one known bit is set.
    pub const fn lanes(active: u8) -> Option<u32> {
        match active {
            X1 => Some(1),
            X2 => Some(2),
            X4 => Some(4),
            X8 => Some(8),
            X12 => Some(12),
            _ => None,
        }
    }
}

/// LinkSpeedEnabled / LinkSpeedSupported / LinkSpeedActive bits (4-bit fields).
pub mod link_speed {
    /// 2.5 Gb/s per lane.
    pub const SDR: u8 = 1;
    /// 5 Gb/s per lane.
    pub const DDR: u8 = 2;
    /// 10 Gb/s per lane.
    pub const QDR: u8 = 4;
    /// In a Set of LinkSpeedEnabled: enable every supported speed.
    pub const SET_TO_SUPPORTED: u8 = 15;

    /// Nominal signalling rate of one lane in Mb/s for an active speed.
    pub const fn lane_mbps(active: u8) -> Option<u32> {
        match active {
            SDR => Some(2_500),
            DDR => Some(5_000),
            QDR => Some(10_000),
            _ => None,
        }
    }
}

/// LinkSpeedExtActive / LinkSpeedExtSupported (4-bit) and LinkSpeedExtEnabled (5-bit) bits.
pub mod link_speed_ext {
    /// 14.0625 Gb/s per lane.
    pub const FDR: u8 = 1;
    /// 25.78125 Gb/s per lane.
    pub const EDR: u8 = 2;
    /// 53.125 Gb/s per lane.
    pub const HDR: u8 = 4;
    /// 106.25 Gb/s per lane.
    pub const NDR: u8 = 8;
    /// In a Set of LinkSpeedExtEnabled: disable every extended speed.
    pub const DISABLE: u8 = 30;
    /// In a Set of LinkSpeedExtEnabled: enable every supported extended speed.
    pub const SET_TO_SUPPORTED: u8 = 31;

    /// Nominal data rate of one lane in Mb/s (as the PathRecord rates name it).
    pub const fn lane_mbps(active: u8) -> Option<u32> {
        match active {
            FDR => Some(14_000),
            EDR => Some(25_000),
            HDR => Some(50_000),
            NDR => Some(100_000),
            _ => None,
        }
    }
}

/// The data rate of a link from its active width and speeds. A non-zero extended speed
/// overrides the base speed.
pub fn link_rate(width_active: u8, speed_active: u8, speed_ext_active: u8) -> Option<Rate> {
    let lanes = link_width::lanes(width_active)?;
    let lane = if speed_ext_active != 0 {
        link_speed_ext::lane_mbps(speed_ext_active)?
    } else {
        link_speed::lane_mbps(speed_active)?
    };
    Rate::from_mbps(lanes * lane)
}

wire_struct! {
    /// PortInfo.
    struct "PortInfo", 64;
    fields {
        m_key: u64 = M_KEY @ 0, 64;
        gid_prefix: u64 = GID_PREFIX @ 64, 64;
        lid: Lid = LID @ 128, 16;
        master_sm_lid: Lid = MASTER_SM_LID @ 144, 16;
        /// See [`cap`].
        capability_mask: u32 = CAPABILITY_MASK @ 160, 32;
        diag_code: u16 = DIAG_CODE @ 192, 16;
        m_key_lease_period: u16 = M_KEY_LEASE_PERIOD @ 208, 16;
        /// The port the SMP arrived on.
        local_port_num: u8 = LOCAL_PORT_NUM @ 224, 8;
        /// See [`link_width`].
        link_width_enabled: u8 = LINK_WIDTH_ENABLED @ 232, 8;
        link_width_supported: u8 = LINK_WIDTH_SUPPORTED @ 240, 8;
        link_width_active: u8 = LINK_WIDTH_ACTIVE @ 248, 8;
        /// See [`link_speed`].
        link_speed_supported: u8 = LINK_SPEED_SUPPORTED @ 256, 4;
        port_state: PortState = PORT_STATE @ 260, 4;
        port_physical_state: PhysPortState = PORT_PHYSICAL_STATE @ 264, 4;
        link_down_default_state: LinkDownDefaultState = LINK_DOWN_DEFAULT_STATE @ 268, 4;
        m_key_protect_bits: u8 = M_KEY_PROTECT_BITS @ 272, 2;
        lmc: u8 = LMC @ 277, 3;
        link_speed_active: u8 = LINK_SPEED_ACTIVE @ 280, 4;
        link_speed_enabled: u8 = LINK_SPEED_ENABLED @ 284, 4;
        neighbor_mtu: Mtu = NEIGHBOR_MTU @ 288, 4;
        master_sm_sl: Sl = MASTER_SM_SL @ 292, 4;
        vl_cap: VlCap = VL_CAP @ 296, 4;
        init_type: u8 = INIT_TYPE @ 300, 4;
        vl_high_limit: u8 = VL_HIGH_LIMIT @ 304, 8;
        vl_arbitration_high_cap: u8 = VL_ARBITRATION_HIGH_CAP @ 312, 8;
        vl_arbitration_low_cap: u8 = VL_ARBITRATION_LOW_CAP @ 320, 8;
        init_type_reply: u8 = INIT_TYPE_REPLY @ 328, 4;
        mtu_cap: Mtu = MTU_CAP @ 332, 4;
        vl_stall_count: u8 = VL_STALL_COUNT @ 336, 3;
        hoq_life: u8 = HOQ_LIFE @ 339, 5;
        operational_vls: VlCap = OPERATIONAL_VLS @ 344, 4;
        partition_enforcement_inbound: bool = PARTITION_ENFORCEMENT_INBOUND @ 348, 1;
        partition_enforcement_outbound: bool = PARTITION_ENFORCEMENT_OUTBOUND @ 349, 1;
        filter_raw_inbound: bool = FILTER_RAW_INBOUND @ 350, 1;
        filter_raw_outbound: bool = FILTER_RAW_OUTBOUND @ 351, 1;
        m_key_violations: u16 = M_KEY_VIOLATIONS @ 352, 16;
        p_key_violations: u16 = P_KEY_VIOLATIONS @ 368, 16;
        q_key_violations: u16 = Q_KEY_VIOLATIONS @ 384, 16;
        guid_cap: u8 = GUID_CAP @ 400, 8;
        /// Set by the SM to make the port's clients register again with the SA.
        client_reregister: bool = CLIENT_REREGISTER @ 408, 1;
        multicast_pkey_trap_suppression_enabled: u8 = MULTICAST_PKEY_TRAP_SUPPRESSION_ENABLED @ 409, 2;
        subnet_timeout: u8 = SUBNET_TIMEOUT @ 411, 5;
        resp_time_value: u8 = RESP_TIME_VALUE @ 419, 5;
        local_phy_errors: u8 = LOCAL_PHY_ERRORS @ 424, 4;
        overrun_errors: u8 = OVERRUN_ERRORS @ 428, 4;
        max_credit_hint: u16 = MAX_CREDIT_HINT @ 432, 16;
        /// See [`link_speed_ext2`]; valid where CapabilityMask2 has
        /// [`cap2::IS_EXTENDED_SPEEDS_2_SUPPORTED`].
        link_speed_ext_active2: u8 = LINK_SPEED_EXT_ACTIVE2 @ 449, 2;
        link_speed_ext_supported2: u8 = LINK_SPEED_EXT_SUPPORTED2 @ 451, 2;
        link_speed_ext_enabled2: u8 = LINK_SPEED_EXT_ENABLED2 @ 453, 3;
        link_round_trip_latency: u32 = LINK_ROUND_TRIP_LATENCY @ 456, 24;
        /// See [`cap2`].
        capability_mask2: u16 = CAPABILITY_MASK2 @ 480, 16;
        /// See [`link_speed_ext`].
        link_speed_ext_active: u8 = LINK_SPEED_EXT_ACTIVE @ 496, 4;
        link_speed_ext_supported: u8 = LINK_SPEED_EXT_SUPPORTED @ 500, 4;
        link_speed_ext_enabled: u8 = LINK_SPEED_EXT_ENABLED @ 507, 5;
    }
}

impl Repr {
    /// Whether every bit of `bits` (see [`cap`]) is set in CapabilityMask.
    pub const fn has_capability(&self, bits: u32) -> bool {
        self.capability_mask & bits == bits
    }

    /// Whether every bit of `bits` (see [`cap2`]) is set in CapabilityMask2; false when the
    /// port does not declare CapabilityMask2.
    pub const fn has_capability2(&self, bits: u16) -> bool {
        self.has_capability(cap::IS_CAPABILITY_MASK2_SUPPORTED)
            && self.capability_mask2 & bits == bits
    }

    /// The data rate of the active link. The extended speed counts only on a port that
    /// declares extended speeds (the field is reserved elsewhere).
    pub fn rate(&self) -> Option<Rate> {
        if self.has_capability2(cap2::IS_EXTENDED_SPEEDS_2_SUPPORTED)
            && self.link_speed_ext_active2 & link_speed_ext2::XDR != 0
        {
            // Rates above 1.2 Tb/s (XDR 8x, 12x) have no code: the highest there is.
            let lanes = link_width::lanes(self.link_width_active)?;
            return Rate::from_mbps(lanes * 200_000).or(Some(Rate::Gbps1200));
        }
        let ext = if self.has_capability(cap::IS_EXTENDED_SPEEDS_SUPPORTED) {
            self.link_speed_ext_active
        } else {
            0
        };
        link_rate(self.link_width_active, self.link_speed_active, ext)
    }
}

impl SmpAttribute for Repr {
    const ID: u16 = crate::attr::PORT_INFO;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    // ibsim net.2sw2path4hca after `opensm -o`: `smpquery -D portinfo 0,1 1` from Switch1,
    // i.e. Hca1 port 1 (a CA port with LID 2, SM LID 1, ACTIVE).
    const CA_PORT: [u8; 64] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x02, 0x00, 0x01, 0x00, 0x50, 0xc0, 0x48, 0x00, 0x00, 0x0f, 0xf9, 0x01, 0x02,
        0x1f, 0x02, 0x74, 0x52, 0x00, 0x11, 0x40, 0x40, 0x00, 0x08, 0x08, 0x04, 0xe0, 0x40, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x1f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x30, 0x00, 0x00,
    ];

    // The same port before any SM ran: no LID, no SM, INIT.
    const CA_PORT_NO_SM: [u8; 64] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x50, 0xc0, 0x48, 0x00, 0x00, 0x0f, 0xf9, 0x01, 0x02,
        0x1f, 0x02, 0x72, 0x52, 0x00, 0x11, 0x40, 0x40, 0x00, 0x08, 0x08, 0x04, 0xe0, 0x40, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x1f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x30, 0x00, 0x00,
    ];

    // ibsim net.2sw2path4hca after `opensm -o`: `smpquery -D portinfo 0 0`, Switch1's
    // management port 0 (LID 1, itself the SM LID of the sweep).
    const SWITCH_PORT0: [u8; 64] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0xc0, 0x48, 0x00, 0x00, 0x0f, 0xf9, 0x00, 0x02,
        0x1f, 0x02, 0x74, 0x52, 0x00, 0x11, 0x10, 0x40, 0x00, 0x08, 0x08, 0x03, 0x00, 0x40, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x1f, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x30, 0x00, 0x00,
    ];

    // The same before any SM ran: no GID prefix, LID or SM LID.
    const SWITCH_PORT0_NO_SM: [u8; 64] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x48, 0x00, 0x00, 0x0f, 0xf9, 0x00, 0x02,
        0x1f, 0x02, 0x74, 0x52, 0x00, 0x11, 0x10, 0x40, 0x00, 0x08, 0x08, 0x03, 0x00, 0x40, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x1f, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x30, 0x00, 0x00,
    ];

    // ibsim net.2sw2path4hca after `opensm -o`: `smpquery -D portinfo 0 3`, Switch1 port 3,
    // an inter-switch link (OpenSM set HOQLife 18 and VLStallCount 7).
    const SWITCH_PORT3: [u8; 64] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
        0x1f, 0x02, 0x74, 0x52, 0x00, 0x11, 0x40, 0x40, 0x00, 0x08, 0x08, 0x04, 0xf2, 0x40, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    // ibsim net.2sw2path4hca after `opensm -o`: `smpquery -D portinfo 0 4`, Switch1 port 4,
    // which has no cable (DOWN, POLLING).
    const SWITCH_PORT4_DOWN: [u8; 64] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
        0x1f, 0x02, 0x71, 0x22, 0x00, 0x11, 0x40, 0x40, 0x00, 0x08, 0x08, 0x04, 0xe0, 0x40, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    fn ca_port() -> Repr {
        Repr {
            m_key: 0,
            gid_prefix: 0xfe80_0000_0000_0000,
            lid: Lid(2),
            master_sm_lid: Lid(1),
            capability_mask: cap::IS_TRAP_SUPPORTED
                | cap::IS_SL_MAPPING_SUPPORTED
                | cap::IS_EXTENDED_SPEEDS_SUPPORTED
                | cap::IS_CAPABILITY_MASK2_SUPPORTED
                | cap::IS_VENDOR_CLASS_SUPPORTED
                | cap::IS_CAPABILITY_MASK_NOTICE_SUPPORTED,
            diag_code: 0,
            m_key_lease_period: 4089,
            local_port_num: 1,
            link_width_enabled: link_width::X4,
            link_width_supported: 0x1f,
            link_width_active: link_width::X4,
            link_speed_supported: 7,
            port_state: PortState::Active,
            port_physical_state: PhysPortState::LinkUp,
            link_down_default_state: LinkDownDefaultState::Polling,
            m_key_protect_bits: 0,
            lmc: 0,
            link_speed_active: link_speed::SDR,
            link_speed_enabled: link_speed::SDR,
            neighbor_mtu: Mtu::Mtu2048,
            master_sm_sl: Sl(0),
            vl_cap: VlCap::Vl0To7,
            init_type: 0,
            vl_high_limit: 0,
            vl_arbitration_high_cap: 8,
            vl_arbitration_low_cap: 8,
            init_type_reply: 0,
            mtu_cap: Mtu::Mtu2048,
            vl_stall_count: 7,
            hoq_life: 0,
            operational_vls: VlCap::Vl0To7,
            partition_enforcement_inbound: false,
            partition_enforcement_outbound: false,
            filter_raw_inbound: false,
            filter_raw_outbound: false,
            m_key_violations: 0,
            p_key_violations: 0,
            q_key_violations: 0,
            guid_cap: 32,
            client_reregister: false,
            multicast_pkey_trap_suppression_enabled: 0,
            subnet_timeout: 31,
            resp_time_value: 0,
            local_phy_errors: 0,
            overrun_errors: 0,
            max_credit_hint: 0,
            link_speed_ext_active2: 0,
            link_speed_ext_supported2: 0,
            link_speed_ext_enabled2: 0,
            link_round_trip_latency: 0,
            capability_mask2: cap2::IS_LINK_WIDTH_2X_SUPPORTED | cap2::IS_LINK_SPEED_HDR_SUPPORTED,
            link_speed_ext_active: 0,
            link_speed_ext_supported: 0,
            link_speed_ext_enabled: 0,
        }
    }

    fn round_trip(bytes: &[u8; 64]) -> Repr {
        let r = Repr::parse(bytes).unwrap();
        let mut out = [0xa5u8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(&out, bytes);
        assert!(
            Packet::new_checked(&bytes[..])
                .unwrap()
                .check_reserved()
                .is_ok()
        );
        r
    }

    #[test]
    fn ca_port_parse_and_emit() {
        assert_eq!(round_trip(&CA_PORT), ca_port());
        let mut out = [0xa5u8; 64];
        ca_port().emit(&mut out).unwrap();
        assert_eq!(out, CA_PORT);
    }

    #[test]
    fn before_the_sm() {
        let r = round_trip(&CA_PORT_NO_SM);
        assert_eq!(
            r,
            Repr {
                gid_prefix: 0,
                lid: Lid::NONE,
                master_sm_lid: Lid::NONE,
                port_state: PortState::Init,
                ..ca_port()
            }
        );
        let sw = round_trip(&SWITCH_PORT0_NO_SM);
        assert_eq!(
            (sw.lid, sw.master_sm_lid, sw.gid_prefix),
            (Lid(0), Lid(0), 0)
        );
        assert_eq!(sw.port_state, PortState::Active);
    }

    #[test]
    fn switch_ports() {
        let p0 = round_trip(&SWITCH_PORT0);
        assert_eq!((p0.lid, p0.master_sm_lid), (Lid(1), Lid(1)));
        assert_eq!(p0.local_port_num, 0);
        assert_eq!(p0.capability_mask, 0xc048);
        assert!(!p0.has_capability(cap::IS_SM));
        assert_eq!(p0.neighbor_mtu, Mtu::Mtu256);
        assert_eq!(p0.mtu_cap, Mtu::Mtu1024);
        assert_eq!((p0.guid_cap, p0.resp_time_value), (1, 8));
        assert_eq!((p0.vl_stall_count, p0.hoq_life), (0, 0));

        let p3 = round_trip(&SWITCH_PORT3);
        assert_eq!(p3.port_state, PortState::Active);
        assert_eq!(p3.port_physical_state, PhysPortState::LinkUp);
        assert_eq!((p3.vl_stall_count, p3.hoq_life), (7, 18));
        assert_eq!(p3.lid, Lid::NONE);
        assert_eq!(p3.capability_mask, 0);
        assert_eq!(p3.rate(), Some(Rate::Gbps10));

        let p4 = round_trip(&SWITCH_PORT4_DOWN);
        assert_eq!(p4.port_state, PortState::Down);
        assert_eq!(p4.port_physical_state, PhysPortState::Polling);
        assert_eq!(p4.local_phy_errors, 4);
    }

    #[test]
    fn capabilities_and_rate() {
        let r = ca_port();
        assert!(r.has_capability(cap::IS_TRAP_SUPPORTED | cap::IS_SL_MAPPING_SUPPORTED));
        assert!(!r.has_capability(cap::IS_CLIENT_REREGISTRATION_SUPPORTED));
        assert!(r.has_capability2(cap2::IS_LINK_WIDTH_2X_SUPPORTED));
        let no_cap2 = Repr {
            capability_mask: 0,
            ..r
        };
        assert!(!no_cap2.has_capability2(cap2::IS_LINK_WIDTH_2X_SUPPORTED));
        assert_eq!(r.rate(), Some(Rate::Gbps10));
        let edr = Repr {
            link_speed_ext_active: link_speed_ext::EDR,
            ..r
        };
        assert_eq!(edr.rate(), Some(Rate::Gbps100));
        // Without IsExtendedSpeedsSupported the extended field does not count.
        let legacy = Repr {
            capability_mask: 0,
            ..edr
        };
        assert_eq!(legacy.rate(), Some(Rate::Gbps10));
        // XDR, where CapabilityMask2 says the second extended field is valid.
        let xdr = Repr {
            link_speed_ext_active2: link_speed_ext2::XDR,
            capability_mask2: r.capability_mask2 | cap2::IS_EXTENDED_SPEEDS_2_SUPPORTED,
            ..edr
        };
        assert_eq!(xdr.rate(), Some(Rate::Gbps800));
        let wide = Repr {
            link_width_active: link_width::X12,
            ..xdr
        };
        assert_eq!(wide.rate(), Some(Rate::Gbps1200), "2.4 Tb/s has no code");
        let unsure = Repr {
            capability_mask2: r.capability_mask2,
            ..xdr
        };
        assert_eq!(
            unsure.rate(),
            Some(Rate::Gbps100),
            "not declared: EDR counts"
        );
    }

    /// LinkSpeedExt*2 sit in byte 56 (bits 449-455), as libibmad places them.
    #[test]
    fn xdr_fields_sit_in_byte_56() {
        let mut d = [0u8; 64];
        // Reserved bit, then 01, 01, 011.
        d[56] = 0b0010_1011;
        let r = Repr::parse(&d).unwrap();
        assert_eq!(
            (
                r.link_speed_ext_active2,
                r.link_speed_ext_supported2,
                r.link_speed_ext_enabled2
            ),
            (1, 1, 3)
        );
        let mut back = [0u8; 64];
        r.emit(&mut back).unwrap();
        assert_eq!(back[56], d[56]);
    }

    #[test]
    fn rate_table() {
        use link_speed::*;
        use link_speed_ext::*;
        use link_width::*;
        let cases = [
            (X1, SDR, 0, Rate::Gbps2_5),
            (X2, SDR, 0, Rate::Gbps5),
            (X4, SDR, 0, Rate::Gbps10),
            (X12, SDR, 0, Rate::Gbps30),
            (X4, DDR, 0, Rate::Gbps20),
            (X8, DDR, 0, Rate::Gbps40),
            (X4, QDR, 0, Rate::Gbps40),
            (X12, QDR, 0, Rate::Gbps120),
            (X4, QDR, FDR, Rate::Gbps56),
            (X2, 0, FDR, Rate::Gbps28),
            (X12, 0, FDR, Rate::Gbps168),
            (X4, 0, EDR, Rate::Gbps100),
            (X2, 0, EDR, Rate::Gbps50),
            (X4, 0, HDR, Rate::Gbps200),
            (X12, 0, HDR, Rate::Gbps600),
            (X1, 0, NDR, Rate::Gbps100),
            (X4, 0, NDR, Rate::Gbps400),
            (X8, 0, NDR, Rate::Gbps800),
            (X12, 0, NDR, Rate::Gbps1200),
        ];
        for (w, s, e, want) in cases {
            assert_eq!(link_rate(w, s, e), Some(want), "{w} {s} {e}");
        }
        assert_eq!(link_rate(X4 | X1, SDR, 0), None);
        assert_eq!(link_rate(X4, 0, 0), None);
        assert_eq!(link_rate(X4, SDR, 3), None);
        assert_eq!(Rate::Gbps56.to_raw_value(), 12);
        assert_eq!(Rate::Gbps2_5.mbps(), Some(2_500));
        assert_eq!(Rate::Unknown(63).mbps(), None);
        assert_eq!(Rate::from_mbps(7), None);
    }

    #[test]
    fn mtu_and_vls() {
        assert_eq!(Mtu::Mtu256.bytes(), Some(256));
        assert_eq!(Mtu::Mtu4096.bytes(), Some(4096));
        assert_eq!(Mtu::from_raw_value(6).bytes(), None);
        assert_eq!(VlCap::Vl0To14.data_vls(), Some(15));
        assert_eq!(VlCap::Unknown(0).data_vls(), None);
        assert_eq!(attr_mod(3), 3);
    }

    #[test]
    fn view_accessors() {
        let mut buf = CA_PORT;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::LID), Lid(2));
        assert_eq!(p.get(field::PORT_STATE), PortState::Active);
        assert_eq!(p.get(field::HOQ_LIFE), 0);
        p.set(field::PORT_STATE, PortState::NoChange);
        p.set(field::PORT_PHYSICAL_STATE, PhysPortState::Disabled);
        p.set(field::LMC, 2);
        p.set(field::CLIENT_REREGISTER, true);
        p.set(
            field::LINK_SPEED_EXT_ENABLED,
            link_speed_ext::SET_TO_SUPPORTED,
        );
        p.set(field::LINK_ROUND_TRIP_LATENCY, 0x12_3456);
        assert_eq!(buf[32], 0x70);
        assert_eq!(buf[33], 0x32);
        assert_eq!(buf[34], 0x02);
        assert_eq!(buf[51], 0x9f);
        assert_eq!(&buf[56..60], &[0x00, 0x12, 0x34, 0x56]);
        assert_eq!(buf[63], 0x1f);
        let r = Repr::parse(&buf).unwrap();
        assert!(r.client_reregister);
        assert_eq!(r.lmc, 2);
        assert_eq!(r.link_speed_ext_enabled, 31);
    }

    #[test]
    fn reserved_bits() {
        let mut buf = CA_PORT;
        buf[34] |= 0x08; // between M_KeyProtectBits and LMC
        let err = Packet::new_checked(&buf[..])
            .unwrap()
            .check_reserved()
            .unwrap_err();
        assert!(matches!(
            err,
            Error::ReservedBitsSet {
                offset: 34,
                mask: 0x08,
                ..
            }
        ));
        // Parse ignores reserved bits; emit clears them.
        let mut out = [0u8; 64];
        Repr::parse(&buf).unwrap().emit(&mut out).unwrap();
        assert_eq!(out, CA_PORT);
    }

    #[test]
    fn unknown_values_survive() {
        let mut buf = CA_PORT;
        buf[32] = 0x77; // PortState 7
        buf[33] = 0xf2; // PortPhysicalState 15, LinkDownDefaultState 2
        buf[36] = 0x70; // NeighborMTU 7
        buf[37] = 0x70; // VLCap 7
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.port_state, PortState::Unknown(7));
        assert_eq!(r.port_physical_state, PhysPortState::Unknown(15));
        assert_eq!(r.neighbor_mtu, Mtu::Unknown(7));
        assert_eq!(r.vl_cap, VlCap::Unknown(7));
        let mut out = [0u8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(out, buf);
    }

    #[test]
    fn short_buffers() {
        assert_eq!(
            Repr::parse(&CA_PORT[..63]),
            Err(Error::Truncated {
                what: "PortInfo",
                need: 64,
                got: 63
            })
        );
        assert!(Packet::new_checked(&CA_PORT[..10]).is_err());
        let mut small = [0u8; 63];
        assert!(matches!(
            ca_port().emit(&mut small),
            Err(Error::BufferTooSmall {
                need: 64,
                got: 63,
                ..
            })
        ));
    }

    #[test]
    fn json_keys() {
        let v = serde_json::to_value(ca_port()).unwrap();
        assert_eq!(v["port_state"], "Active");
        assert_eq!(v["neighbor_mtu"], "Mtu2048");
        assert_eq!(v["lid"], 2);
        assert_eq!(v["link_speed_ext_enabled"], 0);
    }

    #[test]
    fn through_an_smp() {
        use crate::smp;
        let id = <Repr as SmpAttribute>::ID;
        let mut s = smp::Repr::dr_get(crate::Tid(1), id, attr_mod(1), &[1]).unwrap();
        s.set_attribute(&ca_port()).unwrap();
        assert_eq!(s.data.0, CA_PORT);
        assert_eq!(s.attribute::<Repr>().unwrap(), ca_port());
    }

    proptest::proptest! {
        // Any input parses; emit keeps every field and clears only reserved bits.
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, 64)) {
            let r = Repr::parse(&b).unwrap();
            let mut out = [0xa5u8; 64];
            r.emit(&mut out).unwrap();
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
            for (o, i) in out.iter().zip(&b) {
                proptest::prop_assert_eq!(o & !i, 0);
            }
            proptest::prop_assert_eq!(Repr::parse(&out).unwrap(), r);
        }
    }
}
