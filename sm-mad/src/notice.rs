//! Notice (IBA 13.4.8.2): the attribute of the SM classes' Trap and TrapRepress and of SA
//! Report. The attribute is 80 bytes; an SMP's 64-byte data field carries only the first 64,
//! so a trap has no IssuerGID (the SM knows the issuer from its LID and supplies the GID when
//! it forwards the notice in a Report).
//!
//! A generic notice's 54 bytes of DataDetails are laid out per trap number. [`Trap`] decodes
//! the traps an SM acts on and keeps the raw bytes of every other number, so parse -> emit
//! reproduces any input. The `details_*` layouts count bits from the start of DataDetails:
//! add 80 for the offsets within the Notice.
//!
//! # TrapRepress
//!
//! A trap sender may repeat a Trap until it is repressed. The SM represses a Trap by sending back the
//! same SMP — same TID, attribute id, attribute modifier and Notice — with method TrapRepress
//! (0x07, no response bit) and status 0, to the trap's source LID; a directed-route trap
//! gets the direction bit set. The SM may put the issuer port's M_Key in the M_Key field.
//! [`trap_repress`] builds it.

use crate::bits::packet_view;
use core::ops::Range;

use crate::bits::{Field, wire_enum};
use crate::{Bytes, Error, Gid, Lid, Method, Result, SmpAttribute, Wire, smp};

/// Bytes an SMP carries: everything up to and including DataDetails.
pub const LEN: usize = 64;
/// Bytes of the whole attribute, with IssuerGID (SA Report).
pub const FULL_LEN: usize = 80;
/// Bytes of DataDetails.
pub const DATA_DETAILS_LEN: usize = 54;

wire_enum! {
    /// Notice type: how serious the event is.
    pub enum NoticeType: u8 {
        Fatal = 0,
        Urgent = 1,
        Security = 2,
        SubnetManagement = 3,
        Informational = 4,
        /// Nothing to report (a Get(Notice) on an empty queue).
        EmptyNotice = 0x7f,
    }
}

wire_enum! {
    /// What kind of device (or manager) issued a generic notice.
    pub enum ProducerType: u32 {
        /// Channel adapter.
        Ca = 1,
        Switch = 2,
        Router = 3,
        /// A class manager, such as the SM/SA.
        ClassManager = 4,
    }
}

/// Trap numbers of generic notices, with their names.
pub mod trap {
    /// A port's GID is now in service (SA Report).
    pub const GID_IN_SERVICE: u16 = 64;
    /// A port's GID is out of service (SA Report).
    pub const GID_OUT_OF_SERVICE: u16 = 65;
    /// A multicast group was created (SA Report).
    pub const MCAST_GROUP_CREATED: u16 = 66;
    /// A multicast group was deleted (SA Report).
    pub const MCAST_GROUP_DELETED: u16 = 67;
    /// Paths became unusable (obsolete).
    pub const UNPATH: u16 = 68;
    /// Paths were recomputed (obsolete).
    pub const REPATH: u16 = 69;
    /// The link state of at least one port of a switch changed.
    pub const LINK_STATE_CHANGE: u16 = 128;
    /// A port reached its local link integrity error threshold.
    pub const LINK_INTEGRITY_THRESHOLD: u16 = 129;
    /// A port reached its excessive buffer overrun threshold.
    pub const BUFFER_OVERRUN_THRESHOLD: u16 = 130;
    /// A switch port's flow control update watchdog timer expired.
    pub const FLOW_CONTROL_WATCHDOG: u16 = 131;
    /// CapabilityMask or another local attribute of a port changed.
    pub const LOCAL_CHANGES: u16 = 144;
    /// A node's SystemImageGUID changed.
    pub const SYSTEM_IMAGE_GUID_CHANGE: u16 = 145;
    /// An SMP arrived with a bad M_Key.
    pub const BAD_M_KEY: u16 = 256;
    /// A packet arrived with a bad P_Key.
    pub const BAD_P_KEY: u16 = 257;
    /// A packet arrived with a bad Q_Key.
    pub const BAD_Q_KEY: u16 = 258;
    /// A switch port's partition enforcement dropped a packet.
    pub const BAD_SWITCH_P_KEY: u16 = 259;

    /// Every named trap number with its name.
    pub const ALL: &[(u16, &str)] = &[
        (GID_IN_SERVICE, "GidInService"),
        (GID_OUT_OF_SERVICE, "GidOutOfService"),
        (MCAST_GROUP_CREATED, "McastGroupCreated"),
        (MCAST_GROUP_DELETED, "McastGroupDeleted"),
        (UNPATH, "Unpath"),
        (REPATH, "Repath"),
        (LINK_STATE_CHANGE, "LinkStateChange"),
        (LINK_INTEGRITY_THRESHOLD, "LinkIntegrityThreshold"),
        (BUFFER_OVERRUN_THRESHOLD, "BufferOverrunThreshold"),
        (FLOW_CONTROL_WATCHDOG, "FlowControlWatchdog"),
        (LOCAL_CHANGES, "LocalChanges"),
        (SYSTEM_IMAGE_GUID_CHANGE, "SystemImageGuidChange"),
        (BAD_M_KEY, "BadMKey"),
        (BAD_P_KEY, "BadPKey"),
        (BAD_Q_KEY, "BadQKey"),
        (BAD_SWITCH_P_KEY, "BadSwitchPKey"),
    ];

    /// The name of a trap number, or `None` when it has none here.
    pub fn name(number: u16) -> Option<&'static str> {
        ALL.iter()
            .find(|(n, _)| *n == number)
            .map(|(_, name)| *name)
    }
}

/// DataDetails of traps 64-67: the port GID or multicast GID concerned.
pub mod details_64_67 {
    use crate::Gid;
    use crate::bits::wire_struct;

    wire_struct! {
        /// DataDetails of traps 64, 65, 66 and 67.
        struct "Notice details 64-67", super::DATA_DETAILS_LEN;
        fields {
            gid_addr: Gid = GID_ADDR @ 48, 128;
        }
    }
}

/// DataDetails of trap 128: the switch whose link state changed.
pub mod details_128 {
    use crate::Lid;
    use crate::bits::wire_struct;

    wire_struct! {
        /// DataDetails of trap 128.
        struct "Notice details 128", super::DATA_DETAILS_LEN;
        fields {
            lid_addr: Lid = LID_ADDR @ 0, 16;
        }
    }
}

/// DataDetails of traps 129-131: the port that hit a threshold.
pub mod details_129_131 {
    use crate::bits::wire_struct;
    use crate::{Lid, PortNum};

    wire_struct! {
        /// DataDetails of traps 129, 130 and 131.
        struct "Notice details 129-131", super::DATA_DETAILS_LEN;
        fields {
            lid_addr: Lid = LID_ADDR @ 16, 16;
            port_no: PortNum = PORT_NO @ 32, 8;
        }
    }
}

/// DataDetails of trap 144: what changed locally at a port.
pub mod details_144 {
    use crate::Lid;
    use crate::bits::wire_struct;

    wire_struct! {
        /// DataDetails of trap 144.
        struct "Notice details 144", super::DATA_DETAILS_LEN;
        fields {
            lid_addr: Lid = LID_ADDR @ 16, 16;
            /// Something changed that none of the flags below names.
            other_local_changes: bool = OTHER_LOCAL_CHANGES @ 47, 1;
            /// The port's new PortInfo:CapabilityMask.
            capability_mask: u32 = CAPABILITY_MASK @ 48, 32;
            capability_mask2_change: bool = CAPABILITY_MASK2_CHANGE @ 90, 1;
            hierarchy_info_change: bool = HIERARCHY_INFO_CHANGE @ 91, 1;
            sm_priority_change: bool = SM_PRIORITY_CHANGE @ 92, 1;
            link_speed_enabled_change: bool = LINK_SPEED_ENABLED_CHANGE @ 93, 1;
            link_width_enabled_change: bool = LINK_WIDTH_ENABLED_CHANGE @ 94, 1;
            node_description_change: bool = NODE_DESCRIPTION_CHANGE @ 95, 1;
            /// The port's new PortInfo:CapabilityMask2.
            capability_mask2: u16 = CAPABILITY_MASK2 @ 96, 16;
        }
    }
}

/// DataDetails of trap 145: a node's new SystemImageGUID.
pub mod details_145 {
    use crate::bits::wire_struct;
    use crate::{Guid, Lid};

    wire_struct! {
        /// DataDetails of trap 145.
        struct "Notice details 145", super::DATA_DETAILS_LEN;
        fields {
            lid_addr: Lid = LID_ADDR @ 16, 16;
            system_image_guid: Guid = SYSTEM_IMAGE_GUID @ 48, 64;
        }
    }
}

/// DataDetails of trap 256: an SMP with a bad M_Key.
pub mod details_256 {
    use crate::bits::wire_struct;
    use crate::{Bytes, Lid, Method};

    wire_struct! {
        /// DataDetails of trap 256.
        struct "Notice details 256", super::DATA_DETAILS_LEN;
        fields {
            /// Source LID of the offending SMP.
            lid_addr: Lid = LID_ADDR @ 16, 16;
            /// DrSLID of the offending SMP, when directed route.
            dr_slid: Lid = DR_SLID @ 32, 16;
            method: Method = METHOD @ 48, 8;
            attribute_id: u16 = ATTRIBUTE_ID @ 64, 16;
            attribute_modifier: u32 = ATTRIBUTE_MODIFIER @ 80, 32;
            m_key: u64 = M_KEY @ 112, 64;
            /// The offending SMP was directed route.
            dr_notice: bool = DR_NOTICE @ 184, 1;
            /// Its return path did not fit `dr_notice_return_path`.
            dr_path_truncated: bool = DR_PATH_TRUNCATED @ 185, 1;
            dr_hop_count: u8 = DR_HOP_COUNT @ 186, 6;
            /// The offending SMP's return path.
            dr_notice_return_path: Bytes<30> = DR_NOTICE_RETURN_PATH @ 192, 240;
        }
    }
}

/// DataDetails of traps 257 and 258: a packet with a bad P_Key or Q_Key.
pub mod details_257_258 {
    use crate::bits::wire_struct;
    use crate::{Gid, Lid, Sl};

    wire_struct! {
        /// DataDetails of traps 257 and 258.
        struct "Notice details 257-258", super::DATA_DETAILS_LEN;
        fields {
            /// Source LID of the offending packet.
            lid_addr1: Lid = LID_ADDR1 @ 16, 16;
            /// Its destination LID.
            lid_addr2: Lid = LID_ADDR2 @ 32, 16;
            /// The offending P_Key (low 16 bits) or Q_Key.
            key: u32 = KEY @ 48, 32;
            sl: Sl = SL @ 80, 4;
            /// Source QP.
            qp1: u32 = QP1 @ 88, 24;
            /// Destination QP.
            qp2: u32 = QP2 @ 120, 24;
            /// Source GID, zero without a GRH.
            gid_addr1: Gid = GID_ADDR1 @ 144, 128;
            /// Destination GID, zero without a GRH.
            gid_addr2: Gid = GID_ADDR2 @ 272, 128;
        }
    }
}

/// DataDetails of trap 259: a packet dropped by a switch port's partition enforcement.
pub mod details_259 {
    use crate::bits::wire_struct;
    use crate::{Gid, Lid, PKey, PortNum, Sl};

    wire_struct! {
        /// DataDetails of trap 259.
        struct "Notice details 259", super::DATA_DETAILS_LEN;
        fields {
            /// One bit per field below that holds a value.
            data_valid: u16 = DATA_VALID @ 0, 16;
            lid_addr1: Lid = LID_ADDR1 @ 16, 16;
            lid_addr2: Lid = LID_ADDR2 @ 32, 16;
            p_key: PKey = P_KEY @ 48, 16;
            sl: Sl = SL @ 64, 4;
            qp1: u32 = QP1 @ 72, 24;
            qp2: u32 = QP2 @ 104, 24;
            gid_addr1: Gid = GID_ADDR1 @ 128, 128;
            gid_addr2: Gid = GID_ADDR2 @ 256, 128;
            /// The switch that dropped the packet.
            sw_lid_addr: Lid = SW_LID_ADDR @ 384, 16;
            /// The switch port that dropped it.
            port_no: PortNum = PORT_NO @ 400, 8;
        }
    }
}

/// The DataDetails of a generic notice, decoded by trap number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Trap {
    /// 64.
    GidInService(details_64_67::Repr),
    /// 65.
    GidOutOfService(details_64_67::Repr),
    /// 66.
    McastGroupCreated(details_64_67::Repr),
    /// 67.
    McastGroupDeleted(details_64_67::Repr),
    /// 128.
    LinkStateChange(details_128::Repr),
    /// 129.
    LinkIntegrityThreshold(details_129_131::Repr),
    /// 130.
    BufferOverrunThreshold(details_129_131::Repr),
    /// 131.
    FlowControlWatchdog(details_129_131::Repr),
    /// 144.
    LocalChanges(details_144::Repr),
    /// 145.
    SystemImageGuidChange(details_145::Repr),
    /// 256.
    BadMKey(details_256::Repr),
    /// 257.
    BadPKey(details_257_258::Repr),
    /// 258.
    BadQKey(details_257_258::Repr),
    /// 259.
    BadSwitchPKey(details_259::Repr),
    /// A trap number decoded nowhere above; DataDetails kept as they came. `emit` refuses
    /// a number that has its own variant ([`Trap::is_decoded`]).
    Other {
        trap_number: u16,
        data_details: Bytes<DATA_DETAILS_LEN>,
    },
}

impl Trap {
    /// Decodes DataDetails (at least 54 bytes) for `trap_number`.
    pub fn parse(trap_number: u16, data_details: &[u8]) -> Result<Trap> {
        let dd = data_details;
        Ok(match trap_number {
            trap::GID_IN_SERVICE => Trap::GidInService(details_64_67::Repr::parse(dd)?),
            trap::GID_OUT_OF_SERVICE => Trap::GidOutOfService(details_64_67::Repr::parse(dd)?),
            trap::MCAST_GROUP_CREATED => Trap::McastGroupCreated(details_64_67::Repr::parse(dd)?),
            trap::MCAST_GROUP_DELETED => Trap::McastGroupDeleted(details_64_67::Repr::parse(dd)?),
            trap::LINK_STATE_CHANGE => Trap::LinkStateChange(details_128::Repr::parse(dd)?),
            trap::LINK_INTEGRITY_THRESHOLD => {
                Trap::LinkIntegrityThreshold(details_129_131::Repr::parse(dd)?)
            }
            trap::BUFFER_OVERRUN_THRESHOLD => {
                Trap::BufferOverrunThreshold(details_129_131::Repr::parse(dd)?)
            }
            trap::FLOW_CONTROL_WATCHDOG => {
                Trap::FlowControlWatchdog(details_129_131::Repr::parse(dd)?)
            }
            trap::LOCAL_CHANGES => Trap::LocalChanges(details_144::Repr::parse(dd)?),
            trap::SYSTEM_IMAGE_GUID_CHANGE => {
                Trap::SystemImageGuidChange(details_145::Repr::parse(dd)?)
            }
            trap::BAD_M_KEY => Trap::BadMKey(details_256::Repr::parse(dd)?),
            trap::BAD_P_KEY => Trap::BadPKey(details_257_258::Repr::parse(dd)?),
            trap::BAD_Q_KEY => Trap::BadQKey(details_257_258::Repr::parse(dd)?),
            trap::BAD_SWITCH_P_KEY => Trap::BadSwitchPKey(details_259::Repr::parse(dd)?),
            trap_number => {
                let got = dd.len();
                let Some(raw) = dd.get(..DATA_DETAILS_LEN) else {
                    return Err(Error::Truncated {
                        what: "Notice data details",
                        need: DATA_DETAILS_LEN,
                        got,
                    });
                };
                let mut data_details = [0u8; DATA_DETAILS_LEN];
                data_details.copy_from_slice(raw);
                Trap::Other {
                    trap_number,
                    data_details: Bytes(data_details),
                }
            }
        })
    }

    /// Writes DataDetails into the first 54 bytes of `buf`; reserved bits are zeroed.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        match self {
            Trap::GidInService(d)
            | Trap::GidOutOfService(d)
            | Trap::McastGroupCreated(d)
            | Trap::McastGroupDeleted(d) => d.emit(buf),
            Trap::LinkStateChange(d) => d.emit(buf),
            Trap::LinkIntegrityThreshold(d)
            | Trap::BufferOverrunThreshold(d)
            | Trap::FlowControlWatchdog(d) => d.emit(buf),
            Trap::LocalChanges(d) => d.emit(buf),
            Trap::SystemImageGuidChange(d) => d.emit(buf),
            Trap::BadMKey(d) => d.emit(buf),
            Trap::BadPKey(d) | Trap::BadQKey(d) => d.emit(buf),
            Trap::BadSwitchPKey(d) => d.emit(buf),
            // It would come back as the decoded variant: only one form per trap number.
            Trap::Other { trap_number, .. } if Trap::is_decoded(*trap_number) => {
                Err(bad_trap_number(*trap_number))
            }
            Trap::Other { data_details, .. } => {
                let got = buf.len();
                let Some(out) = buf.get_mut(..DATA_DETAILS_LEN) else {
                    return Err(Error::BufferTooSmall {
                        what: "Notice data details",
                        need: DATA_DETAILS_LEN,
                        got,
                    });
                };
                out.copy_from_slice(&data_details.0);
                Ok(())
            }
        }
    }

    /// Whether `trap_number` has a variant of its own (not `Other`).
    pub const fn is_decoded(trap_number: u16) -> bool {
        matches!(
            trap_number,
            trap::GID_IN_SERVICE
                | trap::GID_OUT_OF_SERVICE
                | trap::MCAST_GROUP_CREATED
                | trap::MCAST_GROUP_DELETED
                | trap::LINK_STATE_CHANGE
                | trap::LINK_INTEGRITY_THRESHOLD
                | trap::BUFFER_OVERRUN_THRESHOLD
                | trap::FLOW_CONTROL_WATCHDOG
                | trap::LOCAL_CHANGES
                | trap::SYSTEM_IMAGE_GUID_CHANGE
                | trap::BAD_M_KEY
                | trap::BAD_P_KEY
                | trap::BAD_Q_KEY
                | trap::BAD_SWITCH_P_KEY
        )
    }

    /// The trap number.
    pub const fn number(&self) -> u16 {
        match self {
            Trap::GidInService(_) => trap::GID_IN_SERVICE,
            Trap::GidOutOfService(_) => trap::GID_OUT_OF_SERVICE,
            Trap::McastGroupCreated(_) => trap::MCAST_GROUP_CREATED,
            Trap::McastGroupDeleted(_) => trap::MCAST_GROUP_DELETED,
            Trap::LinkStateChange(_) => trap::LINK_STATE_CHANGE,
            Trap::LinkIntegrityThreshold(_) => trap::LINK_INTEGRITY_THRESHOLD,
            Trap::BufferOverrunThreshold(_) => trap::BUFFER_OVERRUN_THRESHOLD,
            Trap::FlowControlWatchdog(_) => trap::FLOW_CONTROL_WATCHDOG,
            Trap::LocalChanges(_) => trap::LOCAL_CHANGES,
            Trap::SystemImageGuidChange(_) => trap::SYSTEM_IMAGE_GUID_CHANGE,
            Trap::BadMKey(_) => trap::BAD_M_KEY,
            Trap::BadPKey(_) => trap::BAD_P_KEY,
            Trap::BadQKey(_) => trap::BAD_Q_KEY,
            Trap::BadSwitchPKey(_) => trap::BAD_SWITCH_P_KEY,
            Trap::Other { trap_number, .. } => *trap_number,
        }
    }

    /// The notice type issuers conventionally give this trap (`Informational` for others).
    pub const fn notice_type(&self) -> NoticeType {
        match self {
            Trap::GidInService(_)
            | Trap::GidOutOfService(_)
            | Trap::McastGroupCreated(_)
            | Trap::McastGroupDeleted(_) => NoticeType::SubnetManagement,
            Trap::LinkStateChange(_)
            | Trap::LinkIntegrityThreshold(_)
            | Trap::BufferOverrunThreshold(_)
            | Trap::FlowControlWatchdog(_) => NoticeType::Urgent,
            Trap::BadMKey(_) | Trap::BadPKey(_) | Trap::BadQKey(_) | Trap::BadSwitchPKey(_) => {
                NoticeType::Security
            }
            Trap::LocalChanges(_) | Trap::SystemImageGuidChange(_) | Trap::Other { .. } => {
                NoticeType::Informational
            }
        }
    }

    /// Fails on the first reserved bit set in the decoded layout (never for `Other`).
    /// Offsets in the error count from the start of DataDetails.
    pub fn check_reserved(trap_number: u16, data_details: &[u8]) -> Result<()> {
        use crate::bits::check_reserved as check;
        let (what, fields) = match trap_number {
            64..=67 => ("Notice details 64-67", details_64_67::field::ALL),
            trap::LINK_STATE_CHANGE => ("Notice details 128", details_128::field::ALL),
            129..=131 => ("Notice details 129-131", details_129_131::field::ALL),
            trap::LOCAL_CHANGES => ("Notice details 144", details_144::field::ALL),
            trap::SYSTEM_IMAGE_GUID_CHANGE => ("Notice details 145", details_145::field::ALL),
            trap::BAD_M_KEY => ("Notice details 256", details_256::field::ALL),
            257..=258 => ("Notice details 257-258", details_257_258::field::ALL),
            trap::BAD_SWITCH_P_KEY => ("Notice details 259", details_259::field::ALL),
            _ => return Ok(()),
        };
        check(what, data_details, DATA_DETAILS_LEN, fields)
    }
}

impl serde::Serialize for Trap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        match self {
            Trap::GidInService(d)
            | Trap::GidOutOfService(d)
            | Trap::McastGroupCreated(d)
            | Trap::McastGroupDeleted(d) => d.serialize(s),
            Trap::LinkStateChange(d) => d.serialize(s),
            Trap::LinkIntegrityThreshold(d)
            | Trap::BufferOverrunThreshold(d)
            | Trap::FlowControlWatchdog(d) => d.serialize(s),
            Trap::LocalChanges(d) => d.serialize(s),
            Trap::SystemImageGuidChange(d) => d.serialize(s),
            Trap::BadMKey(d) => d.serialize(s),
            Trap::BadPKey(d) | Trap::BadQKey(d) => d.serialize(s),
            Trap::BadSwitchPKey(d) => d.serialize(s),
            Trap::Other { data_details, .. } => data_details.serialize(s),
        }
    }
}

/// Generic or vendor-specific: what the IsGeneric bit selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Kind {
    /// IsGeneric = 1: a numbered trap of the specification.
    Generic {
        producer_type: ProducerType,
        trap: Trap,
    },
    /// IsGeneric = 0: the vendor's own event, DataDetails opaque.
    Vendor {
        /// IEEE OUI, 24 bits.
        vendor_id: u32,
        device_id: u16,
        data_details: Bytes<DATA_DETAILS_LEN>,
    },
}

/// Bit layout of the Notice header (spec bit numbering).
pub mod field {
    use super::*;

    pub const IS_GENERIC: Field<bool> = Field::new("is_generic", 0, 1);
    pub const TYPE: Field<NoticeType> = Field::new("type", 1, 7);
    /// Generic notices only.
    pub const PRODUCER_TYPE: Field<ProducerType> = Field::new("producer_type", 8, 24);
    /// Vendor notices only (same bits as `PRODUCER_TYPE`).
    pub const VENDOR_ID: Field<u32> = Field::new("vendor_id", 8, 24);
    /// Generic notices only.
    pub const TRAP_NUMBER: Field<u16> = Field::new("trap_number", 32, 16);
    /// Vendor notices only (same bits as `TRAP_NUMBER`).
    pub const DEVICE_ID: Field<u16> = Field::new("device_id", 32, 16);
    pub const ISSUER_LID: Field<Lid> = Field::new("issuer_lid", 48, 16);
    pub const NOTICE_TOGGLE: Field<bool> = Field::new("notice_toggle", 64, 1);
    pub const NOTICE_COUNT: Field<u16> = Field::new("notice_count", 65, 15);
    /// Bytes of DataDetails.
    pub const DATA_DETAILS: Range<usize> = 10..64;
    /// Bytes of IssuerGID; absent from SMPs.
    pub const ISSUER_GID: Range<usize> = 64..80;
}

packet_view! {
    /// Zero-copy view over a buffer holding a Notice (64 bytes, or 80 with IssuerGID).
    view "Notice", LEN
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Reads one header field.
    #[inline]
    pub fn get<V: crate::WireValue>(&self, f: Field<V>) -> V {
        f.get(self.buffer.as_ref())
    }

    /// The trap number of a generic notice.
    pub fn trap_number(&self) -> Option<u16> {
        self.get(field::IS_GENERIC)
            .then(|| self.get(field::TRAP_NUMBER))
    }

    /// The 54 bytes of DataDetails.
    pub fn data_details(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA_DETAILS]
    }

    /// IssuerGID, when the buffer is long enough to hold it (not in an SMP).
    pub fn issuer_gid(&self) -> Option<Gid> {
        self.buffer
            .as_ref()
            .get(field::ISSUER_GID)
            .map(Gid::from_slice)
    }

    /// Fails on the first reserved bit set in DataDetails of a decoded trap number.
    pub fn check_reserved(&self) -> Result<()> {
        match self.trap_number() {
            Some(n) => Trap::check_reserved(n, self.data_details()),
            None => Ok(()),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes one header field.
    #[inline]
    pub fn set<V: crate::WireValue>(&mut self, f: Field<V>, v: V) {
        f.set(self.buffer.as_mut(), v)
    }

    /// The 54 bytes of DataDetails, writable.
    pub fn data_details_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA_DETAILS]
    }

    /// Writes IssuerGID; fails if the buffer is shorter than 80 bytes.
    pub fn set_issuer_gid(&mut self, gid: Gid) -> Result<()> {
        let buf = self.buffer.as_mut();
        let got = buf.len();
        let Some(out) = buf.get_mut(field::ISSUER_GID) else {
            return Err(Error::BufferTooSmall {
                what: "Notice",
                need: FULL_LEN,
                got,
            });
        };
        out.copy_from_slice(&gid.0);
        Ok(())
    }
}

/// A Notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Repr {
    /// Type (JSON key `type`).
    pub notice_type: NoticeType,
    /// IsGeneric with the fields it selects: ProducerType, TrapNumber and decoded
    /// DataDetails, or VendorID, DeviceID and raw DataDetails.
    pub kind: Kind,
    pub issuer_lid: Lid,
    /// Flips with each new notice the issuer queues (notice queues, not traps).
    pub notice_toggle: bool,
    /// Notices queued behind this one (15 bits).
    pub notice_count: u16,
    /// `None` when parsed from (or to be sent in) an SMP, which has no room for it.
    pub issuer_gid: Option<Gid>,
}

impl Repr {
    /// A generic notice with the trap's own notice type, no GID, toggle and count zero.
    pub const fn generic(producer_type: ProducerType, issuer_lid: Lid, trap: Trap) -> Repr {
        Repr {
            notice_type: trap.notice_type(),
            kind: Kind::Generic {
                producer_type,
                trap,
            },
            issuer_lid,
            notice_toggle: false,
            notice_count: 0,
            issuer_gid: None,
        }
    }

    /// Trap 128 from a switch: the link state of one of its ports changed.
    /// `lid_addr` is the switch's LID (the issuer itself, as switches send it).
    pub const fn trap_128(issuer_lid: Lid, lid_addr: Lid) -> Repr {
        Repr::generic(
            ProducerType::Switch,
            issuer_lid,
            Trap::LinkStateChange(details_128::Repr { lid_addr }),
        )
    }

    /// Trap 129, 130 or 131 (by `trap_number`) about port `port_no` of the issuer.
    pub fn port_threshold(
        trap_number: u16,
        producer_type: ProducerType,
        issuer_lid: Lid,
        port_no: crate::PortNum,
    ) -> Result<Repr> {
        let d = details_129_131::Repr {
            lid_addr: issuer_lid,
            port_no,
        };
        let trap = match trap_number {
            trap::LINK_INTEGRITY_THRESHOLD => Trap::LinkIntegrityThreshold(d),
            trap::BUFFER_OVERRUN_THRESHOLD => Trap::BufferOverrunThreshold(d),
            trap::FLOW_CONTROL_WATCHDOG => Trap::FlowControlWatchdog(d),
            other => return Err(bad_trap_number(other)),
        };
        Ok(Repr::generic(producer_type, issuer_lid, trap))
    }

    /// Trap 144: a port's capability mask or another local attribute changed.
    pub const fn trap_144(
        producer_type: ProducerType,
        issuer_lid: Lid,
        details: details_144::Repr,
    ) -> Repr {
        Repr::generic(producer_type, issuer_lid, Trap::LocalChanges(details))
    }

    /// Trap 145: the issuer's node has a new SystemImageGUID.
    pub const fn trap_145(
        producer_type: ProducerType,
        issuer_lid: Lid,
        system_image_guid: crate::Guid,
    ) -> Repr {
        Repr::generic(
            producer_type,
            issuer_lid,
            Trap::SystemImageGuidChange(details_145::Repr {
                lid_addr: issuer_lid,
                system_image_guid,
            }),
        )
    }

    /// Trap 64, 65, 66 or 67 as the SA reports it: issued by the SM at `sm_lid` / `sm_gid`
    /// about `gid_addr` (a port GID, or a multicast GID for 66 and 67).
    pub fn sa_gid_notice(
        trap_number: u16,
        sm_lid: Lid,
        sm_gid: Gid,
        gid_addr: Gid,
    ) -> Result<Repr> {
        let d = details_64_67::Repr { gid_addr };
        let trap = match trap_number {
            trap::GID_IN_SERVICE => Trap::GidInService(d),
            trap::GID_OUT_OF_SERVICE => Trap::GidOutOfService(d),
            trap::MCAST_GROUP_CREATED => Trap::McastGroupCreated(d),
            trap::MCAST_GROUP_DELETED => Trap::McastGroupDeleted(d),
            other => return Err(bad_trap_number(other)),
        };
        let mut r = Repr::generic(ProducerType::ClassManager, sm_lid, trap);
        r.issuer_gid = Some(sm_gid);
        Ok(r)
    }

    /// IsGeneric.
    pub const fn is_generic(&self) -> bool {
        matches!(self.kind, Kind::Generic { .. })
    }

    /// The decoded DataDetails of a generic notice.
    pub const fn trap(&self) -> Option<&Trap> {
        match &self.kind {
            Kind::Generic { trap, .. } => Some(trap),
            Kind::Vendor { .. } => None,
        }
    }

    /// The trap number of a generic notice.
    pub const fn trap_number(&self) -> Option<u16> {
        match &self.kind {
            Kind::Generic { trap, .. } => Some(trap.number()),
            Kind::Vendor { .. } => None,
        }
    }

    /// Parses a Notice. Reads IssuerGID only when `buf` holds 80 bytes or more: pass an SMP's
    /// 64-byte data field, or the SA data area of a Report.
    pub fn parse(buf: &[u8]) -> Result<Repr> {
        let p = Packet::new_checked(buf)?;
        let data_details = p.data_details();
        let kind = if p.get(field::IS_GENERIC) {
            Kind::Generic {
                producer_type: p.get(field::PRODUCER_TYPE),
                trap: Trap::parse(p.get(field::TRAP_NUMBER), data_details)?,
            }
        } else {
            let mut raw = [0u8; DATA_DETAILS_LEN];
            raw.copy_from_slice(data_details);
            Kind::Vendor {
                vendor_id: p.get(field::VENDOR_ID),
                device_id: p.get(field::DEVICE_ID),
                data_details: Bytes(raw),
            }
        };
        Ok(Repr {
            notice_type: p.get(field::TYPE),
            kind,
            issuer_lid: p.get(field::ISSUER_LID),
            notice_toggle: p.get(field::NOTICE_TOGGLE),
            notice_count: p.get(field::NOTICE_COUNT),
            issuer_gid: p.issuer_gid(),
        })
    }

    /// Bytes `emit` writes: 80 with IssuerGID, else 64.
    pub const fn buffer_len(&self) -> usize {
        if self.issuer_gid.is_some() {
            FULL_LEN
        } else {
            LEN
        }
    }

    /// Writes the Notice into the start of `buf`: 64 bytes, or 80 with IssuerGID (which
    /// an SMP cannot carry: clear it before emitting into an SMP).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let need = self.buffer_len();
        let got = buf.len();
        let Some(buf) = buf.get_mut(..need) else {
            return Err(Error::BufferTooSmall {
                what: "Notice",
                need,
                got,
            });
        };
        buf.fill(0);
        let mut p = Packet::new_unchecked(&mut *buf);
        p.set(field::TYPE, self.notice_type);
        match &self.kind {
            Kind::Generic {
                producer_type,
                trap,
            } => {
                p.set(field::IS_GENERIC, true);
                p.set(field::PRODUCER_TYPE, *producer_type);
                p.set(field::TRAP_NUMBER, trap.number());
                trap.emit(p.data_details_mut())?;
            }
            Kind::Vendor {
                vendor_id,
                device_id,
                data_details,
            } => {
                p.set(field::IS_GENERIC, false);
                p.set(field::VENDOR_ID, *vendor_id);
                p.set(field::DEVICE_ID, *device_id);
                p.data_details_mut().copy_from_slice(&data_details.0);
            }
        }
        p.set(field::ISSUER_LID, self.issuer_lid);
        p.set(field::NOTICE_TOGGLE, self.notice_toggle);
        p.set(field::NOTICE_COUNT, self.notice_count);
        if let Some(gid) = self.issuer_gid {
            p.set_issuer_gid(gid)?;
        }
        Ok(())
    }
}

fn bad_trap_number(n: u16) -> Error {
    Error::InvalidField {
        what: "Notice",
        field: "trap_number",
        value: n as u64,
    }
}

impl Wire for Repr {
    const NAME: &'static str = "Notice";
    /// The SMP form; `Repr::buffer_len` is 80 when IssuerGID is present.
    const LEN: usize = LEN;
    fn parse(buf: &[u8]) -> Result<Self> {
        Repr::parse(buf)
    }
    fn emit(&self, buf: &mut [u8]) -> Result<()> {
        Repr::emit(self, buf)
    }
}

impl SmpAttribute for Repr {
    const ID: u16 = crate::attr::NOTICE;
}

impl serde::Serialize for Repr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Notice", 9)?;
        st.serialize_field("is_generic", &self.is_generic())?;
        st.serialize_field("type", &self.notice_type)?;
        match &self.kind {
            Kind::Generic {
                producer_type,
                trap,
            } => {
                st.serialize_field("producer_type", producer_type)?;
                st.serialize_field("trap_number", &trap.number())?;
            }
            Kind::Vendor {
                vendor_id,
                device_id,
                ..
            } => {
                st.serialize_field("vendor_id", vendor_id)?;
                st.serialize_field("device_id", device_id)?;
            }
        }
        st.serialize_field("issuer_lid", &self.issuer_lid)?;
        st.serialize_field("notice_toggle", &self.notice_toggle)?;
        st.serialize_field("notice_count", &self.notice_count)?;
        match &self.kind {
            Kind::Generic { trap, .. } => st.serialize_field("data_details", trap)?,
            Kind::Vendor { data_details, .. } => {
                st.serialize_field("data_details", data_details)?
            }
        }
        match &self.issuer_gid {
            Some(gid) => st.serialize_field("issuer_gid", gid)?,
            None => st.skip_field("issuer_gid")?,
        }
        st.end()
    }
}

/// The TrapRepress that answers `trap`: the same SMP with method TrapRepress and status 0
/// (direction bit set if directed route). Fails unless `trap` is a Trap(Notice).
pub fn trap_repress(trap: &smp::Repr) -> Result<smp::Repr> {
    if trap.method != Method::Trap {
        return Err(Error::InvalidField {
            what: "Trap",
            field: "method",
            value: trap.method.to_raw_value() as u64,
        });
    }
    if trap.attr_id != crate::attr::NOTICE {
        return Err(Error::InvalidField {
            what: "Trap",
            field: "attr_id",
            value: trap.attr_id as u64,
        });
    }
    let mut r = *trap;
    r.method = Method::TrapRepress;
    r.status = crate::MadStatus::OK;
    if let smp::Route::Directed(d) = &mut r.route {
        d.direction = true;
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Guid, MadStatus, PKey, PortNum, Sl, Tid};

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s
            .bytes()
            .filter(u8::is_ascii_hexdigit)
            .map(|c| (c as char).to_digit(16).unwrap() as u8)
            .collect();
        digits.chunks(2).map(|p| (p[0] << 4) | p[1]).collect()
    }

    fn padded(s: &str, len: usize) -> Vec<u8> {
        let mut v = hex(s);
        assert!(v.len() <= len);
        v.resize(len, 0);
        v
    }

    // Captured from ibsim 0.10 (net.2sw2path4hca, `ibsim -v -v -v` packet dumps) with OpenSM
    // 3.3.23 attached to Hca1 as SM (LID 1): after `Unlink "Switch2"[5]` on ibsim's console,
    // Switch2 (LID 3) sent this Trap 128. MAD bytes 0..224 are from the dump, the rest is
    // zero (ibsim clears the request before encoding).
    const TRAP_128_SMP: &str = "
        0101 0105 0000 0000 0000 0000 0000 0000 0002 0000 0000 0000 0000 0000 0000 0000
        0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000
        8100 0002 0080 0003 0000 0003";

    // OpenSM's TrapRepress for that trap, as ibsim received it. Only the first 128 bytes
    // are used: OpenSM leaves stale bytes in the unused directed-route area (224..256).
    const TRAP_128_REPRESS: &str = "
        0101 0107 0000 0000 0000 0000 0000 0000 0002 0000 0000 0000 0000 0000 0000 0000
        0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000
        8100 0002 0080 0003 0000 0003";

    // The Notice of that trap (the SMP's data field).
    const TRAP_128: [u8; 64] = [
        0x81, 0x00, 0x00, 0x02, 0x00, 0x80, 0x00, 0x03, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    // Same capture session: `ibportstate -D 0 1 speed 7` from Hca3 (LID 5) changed its
    // LinkSpeedEnabled, and ibsim sent this Trap 144 (producer CA) to the SM. OpenSM logged
    // lid 5, local_changes 0, new_cap_mask 0x0050c048, change_flags 0, cap_mask2 0.
    const TRAP_144: [u8; 64] = [
        0x84, 0x00, 0x00, 0x01, 0x00, 0x90, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00,
        0x00, 0x00, 0x50, 0xc0, 0x48, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    fn round_trip(bytes: &[u8], expected: &Repr) {
        let r = Repr::parse(bytes).unwrap();
        assert_eq!(&r, expected);
        assert_eq!(r.buffer_len(), bytes.len());
        let mut out = vec![0xa5u8; bytes.len()];
        r.emit(&mut out).unwrap();
        assert_eq!(out, bytes);
    }

    #[test]
    fn trap_128_from_ibsim() {
        round_trip(&TRAP_128, &Repr::trap_128(Lid(3), Lid(3)));
        let r = Repr::parse(&TRAP_128).unwrap();
        assert_eq!(r.notice_type, NoticeType::Urgent);
        assert_eq!(r.trap_number(), Some(trap::LINK_STATE_CHANGE));
        assert!(matches!(
            r.kind,
            Kind::Generic {
                producer_type: ProducerType::Switch,
                trap: Trap::LinkStateChange(details_128::Repr { lid_addr: Lid(3) }),
            }
        ));
        assert_eq!(r.issuer_gid, None);
        assert!(
            Packet::new_checked(&TRAP_128[..])
                .unwrap()
                .check_reserved()
                .is_ok()
        );
    }

    #[test]
    fn trap_144_from_ibsim() {
        let details = details_144::Repr {
            lid_addr: Lid(5),
            capability_mask: 0x0050_c048,
            ..Default::default()
        };
        round_trip(
            &TRAP_144,
            &Repr::trap_144(ProducerType::Ca, Lid(5), details),
        );
    }

    #[test]
    fn smp_trap_and_its_repress() {
        let trap_bytes = padded(TRAP_128_SMP, 256);
        let t = smp::Repr::parse(&trap_bytes).unwrap();
        assert_eq!(t.method, Method::Trap);
        assert_eq!(t.route, smp::Route::Lid);
        let n: Repr = t.attribute().unwrap();
        assert_eq!(n, Repr::trap_128(Lid(3), Lid(3)));

        let r = trap_repress(&t).unwrap();
        assert_eq!(
            (r.method, r.tid, r.status),
            (Method::TrapRepress, t.tid, MadStatus::OK)
        );
        assert_eq!(
            r.to_bytes().unwrap().to_vec(),
            padded(TRAP_128_REPRESS, 256)
        );

        // An SM building the trap from scratch sends the same bytes.
        let mut built = smp::Repr::request(Method::Trap, Tid(0), Repr::ID, 0, smp::Route::Lid);
        built
            .set_attribute(&Repr::trap_128(Lid(3), Lid(3)))
            .unwrap();
        assert_eq!(built.to_bytes().unwrap().to_vec(), trap_bytes);
    }

    #[test]
    fn repress_rules() {
        let mut t = smp::Repr::dr_get(Tid(9), crate::attr::NOTICE, 0, &[1, 2]).unwrap();
        assert!(matches!(
            trap_repress(&t),
            Err(Error::InvalidField {
                field: "method",
                value: 1,
                ..
            })
        ));
        t.method = Method::Trap;
        let r = trap_repress(&t).unwrap();
        assert!(matches!(r.route, smp::Route::Directed(d) if d.direction && d.hop_count == 2));
        t.attr_id = crate::attr::PORT_INFO;
        assert!(matches!(
            trap_repress(&t),
            Err(Error::InvalidField {
                field: "attr_id",
                ..
            })
        ));
    }

    // Built by hand from the trap 144 layout: OtherLocalChanges, LinkSpeedEnabled and
    // LinkWidthEnabled changed, CapabilityMask2 0x0010.
    #[test]
    fn trap_144_change_bits() {
        let bytes = padded(
            "8400 0001 0090 0005 0000  0000 0005 0001 0050 c048 0006 0010",
            64,
        );
        let details = details_144::Repr {
            lid_addr: Lid(5),
            other_local_changes: true,
            capability_mask: 0x0050_c048,
            link_speed_enabled_change: true,
            link_width_enabled_change: true,
            capability_mask2: 0x0010,
            ..Default::default()
        };
        round_trip(&bytes, &Repr::trap_144(ProducerType::Ca, Lid(5), details));
        // Each change flag on its own, at the bit the layout gives it.
        for (f, bit) in [
            (details_144::field::CAPABILITY_MASK2_CHANGE, 0x20),
            (details_144::field::HIERARCHY_INFO_CHANGE, 0x10),
            (details_144::field::SM_PRIORITY_CHANGE, 0x08),
            (details_144::field::LINK_SPEED_ENABLED_CHANGE, 0x04),
            (details_144::field::LINK_WIDTH_ENABLED_CHANGE, 0x02),
            (details_144::field::NODE_DESCRIPTION_CHANGE, 0x01),
        ] {
            let mut dd = [0u8; DATA_DETAILS_LEN];
            let mut p = details_144::Packet::new_checked(&mut dd[..]).unwrap();
            p.set(f, true);
            assert_eq!(dd[10..12], [0, bit], "{}", f.name);
        }
    }

    // Built by hand from the spec layouts (the values are those infiniband-diags'
    // ibsendtrap uses; it is not packaged here, so nothing was captured).
    #[test]
    fn traps_129_145_from_the_spec() {
        let bytes = padded("8100 0001 0081 0005 0000  0000 0005 01", 64);
        let r = Repr::port_threshold(129, ProducerType::Ca, Lid(5), PortNum(1)).unwrap();
        round_trip(&bytes, &r);
        assert!(Repr::port_threshold(132, ProducerType::Ca, Lid(5), PortNum(1)).is_err());
        let r130 = Repr::port_threshold(130, ProducerType::Switch, Lid(2), PortNum(7)).unwrap();
        assert_eq!(r130.trap_number(), Some(trap::BUFFER_OVERRUN_THRESHOLD));
        assert_eq!(r130.notice_type, NoticeType::Urgent);

        let bytes = padded(
            "8400 0002 0091 0002 0000  0000 0002 0000 1234 5678 1234 5678",
            64,
        );
        let r = Repr::trap_145(ProducerType::Switch, Lid(2), Guid(0x1234_5678_1234_5678));
        round_trip(&bytes, &r);
    }

    #[test]
    fn security_traps_from_the_spec() {
        // 256, bad M_Key on a directed-route Get(PortInfo) of 4 hops.
        let bytes = padded(
            "8200 0001 0100 0005 0000  0000 0005 ffff 0100 0015 0000 0012 1234 5678 1234 5678
             0084 0506 0708",
            64,
        );
        let mut path = [0u8; 30];
        path[..4].copy_from_slice(&[5, 6, 7, 8]);
        let d = details_256::Repr {
            lid_addr: Lid(5),
            dr_slid: Lid::PERMISSIVE,
            method: Method::Get,
            attribute_id: crate::attr::PORT_INFO,
            attribute_modifier: 0x12,
            m_key: 0x1234_5678_1234_5678,
            dr_notice: true,
            dr_path_truncated: false,
            dr_hop_count: 4,
            dr_notice_return_path: Bytes(path),
        };
        round_trip(
            &bytes,
            &Repr::generic(ProducerType::Ca, Lid(5), Trap::BadMKey(d)),
        );

        // 257, bad P_Key on SL 3 from LID 1 QP 0x010101 to LID 2 QP 0x020202.
        let bytes = padded(
            "8200 0001 0101 0005 0000  0000 0001 0002 1234 5678 3001 0101 0002 0202
             f8c0 0000 0000 0001 1111 2222 3333 4444 f8c0 0000 0000 0001 5678 5678 1234 1234",
            64,
        );
        let d = details_257_258::Repr {
            lid_addr1: Lid(1),
            lid_addr2: Lid(2),
            key: 0x1234_5678,
            sl: Sl(3),
            qp1: 0x01_0101,
            qp2: 0x02_0202,
            gid_addr1: Gid::new(0xf8c0_0000_0000_0001, Guid(0x1111_2222_3333_4444)),
            gid_addr2: Gid::new(0xf8c0_0000_0000_0001, Guid(0x5678_5678_1234_1234)),
        };
        let r = Repr::generic(ProducerType::Ca, Lid(5), Trap::BadPKey(d));
        assert_eq!(r.notice_type, NoticeType::Security);
        round_trip(&bytes, &r);
        let mut q = bytes.clone();
        q[5] = 0x02;
        round_trip(
            &q,
            &Repr::generic(ProducerType::Ca, Lid(5), Trap::BadQKey(d)),
        );

        // 259, switch 2 port 3 dropped a packet with P_Key 0x8001.
        let bytes = padded(
            "8200 0002 0103 0002 0000  00ff 0001 0002 8001 5000 0011 0000 0022
             fe80 0000 0000 0000 0000 0000 0010 0001 fe80 0000 0000 0000 0000 0000 0010 0002
             0002 03",
            64,
        );
        let d = details_259::Repr {
            data_valid: 0xff,
            lid_addr1: Lid(1),
            lid_addr2: Lid(2),
            p_key: PKey(0x8001),
            sl: Sl(5),
            qp1: 0x11,
            qp2: 0x22,
            gid_addr1: Gid::new(0xfe80 << 48, Guid(0x10_0001)),
            gid_addr2: Gid::new(0xfe80 << 48, Guid(0x10_0002)),
            sw_lid_addr: Lid(2),
            port_no: PortNum(3),
        };
        round_trip(
            &bytes,
            &Repr::generic(ProducerType::Switch, Lid(2), Trap::BadSwitchPKey(d)),
        );
    }

    // Trap 64 as the SA reports it: 80 bytes, IssuerGID = the SM's port GID.
    #[test]
    fn sa_report_with_issuer_gid() {
        let bytes = padded(
            "8300 0004 0040 0001 0000  0000 0000 0000 fe80 0000 0000 0000 0000 0000 0010 0007",
            64,
        );
        let mut full = bytes.clone();
        full.extend(hex("fe80 0000 0000 0000 0000 0000 0010 0001"));
        let sm_gid = Gid::new(0xfe80 << 48, Guid(0x10_0001));
        let port_gid = Gid::new(0xfe80 << 48, Guid(0x10_0007));
        let r = Repr::sa_gid_notice(64, Lid(1), sm_gid, port_gid).unwrap();
        assert_eq!(r.notice_type, NoticeType::SubnetManagement);
        round_trip(&full, &r);
        assert!(Repr::sa_gid_notice(68, Lid(1), sm_gid, port_gid).is_err());

        // Within an SA data area (200 bytes) the GID is read; an SMP's 64 bytes have none.
        let mut sa_data = full.clone();
        sa_data.resize(200, 0);
        assert_eq!(Repr::parse(&sa_data).unwrap().issuer_gid, Some(sm_gid));
        let smp_form = Repr::parse(&full[..64]).unwrap();
        assert_eq!(smp_form.issuer_gid, None);
        assert_eq!(smp_form.trap(), r.trap());

        // An SMP cannot take the GID.
        let mut small = [0u8; 64];
        assert_eq!(
            r.emit(&mut small),
            Err(Error::BufferTooSmall {
                what: "Notice",
                need: 80,
                got: 64
            })
        );
        let mut smp = smp::Repr::request(Method::Trap, Tid(1), Repr::ID, 0, smp::Route::Lid);
        assert!(smp.set_attribute(&r).is_err());
        assert!(
            smp.set_attribute(&Repr {
                issuer_gid: None,
                ..r
            })
            .is_ok()
        );
    }

    #[test]
    fn unknown_values_survive() {
        // Vendor notice: VendorID 0x123456, DeviceID 0xabcd, toggle set, count 5.
        let bytes = padded("0412 3456 abcd 0007 8005  dead beef 0102 0304 ffff", 64);
        let r = Repr::parse(&bytes).unwrap();
        assert!(!r.is_generic());
        assert_eq!(r.trap_number(), None);
        assert!(matches!(
            r.kind,
            Kind::Vendor { vendor_id: 0x12_3456, device_id: 0xabcd, data_details }
                if data_details.0[..4] == [0xde, 0xad, 0xbe, 0xef]
        ));
        assert!(r.notice_toggle);
        assert_eq!(r.notice_count, 5);
        round_trip(&bytes, &r);

        // Unknown type, producer and trap number: DataDetails kept raw.
        let bytes = padded("9100 0009 03e8 0004 7fff  0102 0304 0506 0708", 64);
        let r = Repr::parse(&bytes).unwrap();
        assert_eq!(r.notice_type, NoticeType::Unknown(0x11));
        assert_eq!(r.notice_count, 0x7fff);
        let Kind::Generic {
            producer_type,
            trap:
                Trap::Other {
                    trap_number,
                    data_details,
                },
        } = r.kind
        else {
            panic!("not an unknown generic trap: {r:?}")
        };
        assert_eq!(
            (producer_type, trap_number),
            (ProducerType::Unknown(9), 1000)
        );
        assert_eq!(data_details.0[..8], [1, 2, 3, 4, 5, 6, 7, 8]);
        round_trip(&bytes, &r);

        // Obsolete trap 68 is named but not decoded.
        assert_eq!(trap::name(trap::UNPATH), Some("Unpath"));
        let mut b = bytes;
        b[4..6].copy_from_slice(&68u16.to_be_bytes());
        assert!(matches!(
            Repr::parse(&b).unwrap().trap(),
            Some(Trap::Other {
                trap_number: 68,
                ..
            })
        ));
    }

    #[test]
    fn reserved_bits_in_details() {
        let mut b = TRAP_128;
        b[12] = 0x40;
        // Parsing ignores it, emitting clears it, the strict check names it.
        assert_eq!(Repr::parse(&b).unwrap(), Repr::trap_128(Lid(3), Lid(3)));
        let err = Packet::new_checked(&b[..])
            .unwrap()
            .check_reserved()
            .unwrap_err();
        assert_eq!(
            err,
            Error::ReservedBitsSet {
                what: "Notice details 128",
                after: "lid_addr",
                offset: 2,
                mask: 0x40
            }
        );
        // Vendor and unknown DataDetails have no reserved bits.
        b[0] = 0x04;
        assert!(
            Packet::new_checked(&b[..])
                .unwrap()
                .check_reserved()
                .is_ok()
        );
    }

    #[test]
    fn view_accessors() {
        let mut buf = TRAP_128;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert!(p.get(field::IS_GENERIC));
        assert_eq!(p.get(field::TYPE), NoticeType::Urgent);
        assert_eq!(p.get(field::PRODUCER_TYPE), ProducerType::Switch);
        assert_eq!(p.trap_number(), Some(128));
        assert_eq!(p.get(field::ISSUER_LID), Lid(3));
        assert_eq!(p.issuer_gid(), None);
        assert!(p.set_issuer_gid(Gid::default()).is_err());
        p.set(field::NOTICE_TOGGLE, true);
        p.set(field::NOTICE_COUNT, 0x1234);
        p.set(field::TYPE, NoticeType::EmptyNotice);
        p.data_details_mut()[1] = 0x09;
        assert_eq!(&buf[..2], &[0xff, 0x00]);
        assert_eq!(&buf[8..12], &[0x92, 0x34, 0x00, 0x09]);

        let mut long = [0u8; 80];
        let mut p = Packet::new_checked(&mut long[..]).unwrap();
        let g = Gid::new(1, Guid(2));
        p.set_issuer_gid(g).unwrap();
        assert_eq!(p.issuer_gid(), Some(g));
    }

    #[test]
    fn short_buffers() {
        assert_eq!(
            Repr::parse(&TRAP_128[..63]),
            Err(Error::Truncated {
                what: "Notice",
                need: 64,
                got: 63
            })
        );
        assert!(Packet::new_checked(&TRAP_128[..10]).is_err());
        let mut small = [0u8; 63];
        assert_eq!(
            Repr::trap_128(Lid(3), Lid(3)).emit(&mut small),
            Err(Error::BufferTooSmall {
                what: "Notice",
                need: 64,
                got: 63
            })
        );
        assert!(Trap::parse(1000, &[0; 53]).is_err());
        assert!(Trap::parse(128, &[0; 53]).is_err());
        let other = Trap::Other {
            trap_number: 1000,
            data_details: Bytes([0; 54]),
        };
        assert!(other.emit(&mut [0; 53]).is_err());
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(Repr::parse(&TRAP_128).unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "is_generic": true,
                "type": "Urgent",
                "producer_type": "Switch",
                "trap_number": 128,
                "issuer_lid": 3,
                "notice_toggle": false,
                "notice_count": 0,
                "data_details": { "lid_addr": 3 },
            })
        );
        let vendor = Repr::parse(&padded("0412 3456 abcd 0007 0000  dead", 64)).unwrap();
        let v = serde_json::to_value(vendor).unwrap();
        assert_eq!(v["vendor_id"], 0x12_3456);
        assert_eq!(v["device_id"], 0xabcd);
        assert!(v["data_details"].as_str().unwrap().starts_with("dead00"));
        let sa = Repr::sa_gid_notice(65, Lid(1), Gid::new(0xfe80 << 48, Guid(1)), Gid::default());
        let v = serde_json::to_value(sa.unwrap()).unwrap();
        assert_eq!(v["issuer_gid"], "fe80:0000:0000:0000:0000:0000:0000:0001");
        assert_eq!(
            v["data_details"]["gid_addr"],
            "0000:0000:0000:0000:0000:0000:0000:0000"
        );
    }

    #[test]
    fn trap_table() {
        assert_eq!(trap::name(128), Some("LinkStateChange"));
        assert_eq!(trap::name(1), None);
        for &(n, name) in trap::ALL {
            let t = Trap::parse(n, &[0; DATA_DETAILS_LEN]).unwrap();
            assert_eq!(t.number(), n);
            assert_eq!(Trap::is_decoded(n), !matches!(t, Trap::Other { .. }));
            let other = Trap::Other {
                trap_number: n,
                data_details: Bytes([0; DATA_DETAILS_LEN]),
            };
            assert_eq!(
                other.emit(&mut [0; DATA_DETAILS_LEN]).is_err(),
                Trap::is_decoded(n)
            );
            // Decoded traps carry the table's name as their variant name.
            if !matches!(t, Trap::Other { .. }) {
                assert!(format!("{t:?}").starts_with(name), "{n} {name} {t:?}");
            }
        }
    }
}
