//! Attribute ids of the subnet management (SMP) and subnet administration (SA) classes.

use crate::bits::wire_enum;

/// ClassPortInfo (both classes).
pub const CLASS_PORT_INFO: u16 = 0x0001;
/// Notice (traps; SA Report).
pub const NOTICE: u16 = 0x0002;
/// InformInfo (subscriptions).
pub const INFORM_INFO: u16 = 0x0003;
/// NodeDescription.
pub const NODE_DESCRIPTION: u16 = 0x0010;
/// NodeInfo.
pub const NODE_INFO: u16 = 0x0011;
/// SwitchInfo.
pub const SWITCH_INFO: u16 = 0x0012;
/// GUIDInfo.
pub const GUID_INFO: u16 = 0x0014;
/// PortInfo.
pub const PORT_INFO: u16 = 0x0015;
/// P_KeyTable.
pub const P_KEY_TABLE: u16 = 0x0016;
/// SLtoVLMappingTable.
pub const SL_TO_VL_MAPPING_TABLE: u16 = 0x0017;
/// VLArbitrationTable.
pub const VL_ARBITRATION_TABLE: u16 = 0x0018;
/// LinearForwardingTable.
pub const LINEAR_FORWARDING_TABLE: u16 = 0x0019;
/// RandomForwardingTable.
pub const RANDOM_FORWARDING_TABLE: u16 = 0x001A;
/// MulticastForwardingTable.
pub const MULTICAST_FORWARDING_TABLE: u16 = 0x001B;
/// SMInfo.
pub const SM_INFO: u16 = 0x0020;

wire_enum! {
    /// Attribute ids of the subnet management classes (0x01, 0x81).
    pub enum SmpAttrId: u16 {
        ClassPortInfo = 0x0001,
        Notice = 0x0002,
        InformInfo = 0x0003,
        NodeDescription = 0x0010,
        NodeInfo = 0x0011,
        SwitchInfo = 0x0012,
        GuidInfo = 0x0014,
        PortInfo = 0x0015,
        PKeyTable = 0x0016,
        SlToVlMappingTable = 0x0017,
        VlArbitrationTable = 0x0018,
        LinearForwardingTable = 0x0019,
        RandomForwardingTable = 0x001A,
        MulticastForwardingTable = 0x001B,
        LinkSpeedWidthPairsTable = 0x001C,
        VendorSpecificMadsTable = 0x001D,
        HierarchyInfo = 0x001E,
        SmInfo = 0x0020,
        VendorDiag = 0x0030,
        LedInfo = 0x0031,
        CableInfo = 0x0032,
        PortInfoExtended = 0x0033,
    }
}

wire_enum! {
    /// Attribute ids of the subnet administration class (0x03).
    pub enum SaAttrId: u16 {
        ClassPortInfo = 0x0001,
        Notice = 0x0002,
        InformInfo = 0x0003,
        NodeRecord = 0x0011,
        PortInfoRecord = 0x0012,
        SlToVlMappingTableRecord = 0x0013,
        SwitchInfoRecord = 0x0014,
        LinearForwardingTableRecord = 0x0015,
        RandomForwardingTableRecord = 0x0016,
        MulticastForwardingTableRecord = 0x0017,
        SmInfoRecord = 0x0018,
        LinkSpeedWidthPairsTableRecord = 0x0019,
        LinkRecord = 0x0020,
        GuidInfoRecord = 0x0030,
        ServiceRecord = 0x0031,
        PKeyTableRecord = 0x0033,
        PathRecord = 0x0035,
        VlArbitrationTableRecord = 0x0036,
        McMemberRecord = 0x0038,
        TraceRecord = 0x0039,
        MultiPathRecord = 0x003A,
        ServiceAssociationRecord = 0x003B,
        InformInfoRecord = 0x00F3,
    }
}
