//! PortInfoRecord (IBA 15.2.5.3): the PortInfo of one port, named by the LID of its end
//! port (a switch's port 0 for every switch port) and its port number. 68 bytes; the SA pads
//! it to 72 (attribute offset 9).

use crate::attr::SaAttrId;
use crate::bits::wire_record;
use crate::{Lid, port_info};

/// SA attribute id of PortInfoRecord.
pub const ATTR_ID: u16 = SaAttrId::PortInfoRecord.to_raw_value();

/// Bits of the Options byte.
pub mod options {
    /// Set in a query (with the [`OPTIONS`](super::comp::OPTIONS) component) by a requester
    /// that understands extended link speeds: the SA then reports LinkSpeedActive,
    /// LinkSpeedEnabled and LinkSpeedSupported as the port does. Without it, OpenSM adds
    /// the QDR bit to those fields of ports running an extended speed, so that older clients
    /// see a fast link.
    pub const QDR_NOT_OVERLOADED: u8 = 0x80;
}

wire_record! {
    /// PortInfoRecord.
    struct "PortInfoRecord", 68;
    fields {
        /// The LID of the end port: of port 0 for a switch.
        endport_lid: Lid = ENDPORT_LID @ 0, 16;
        port_num: u8 = PORT_NUM @ 16, 8;
        /// See [`options`].
        options: u8 = OPTIONS @ 24, 8;
    }
    attributes {
        port_info: port_info::Repr = PORT_INFO @ 4;
    }
}

/// Component mask bits, in field order: the record's three fields, then one per PortInfo
/// field, reserved fields included.
pub mod comp {
    pub const ENDPORT_LID: u64 = 1 << 0;
    pub const PORT_NUM: u64 = 1 << 1;
    pub const OPTIONS: u64 = 1 << 2;
    pub const M_KEY: u64 = 1 << 3;
    pub const GID_PREFIX: u64 = 1 << 4;
    pub const LID: u64 = 1 << 5;
    pub const MASTER_SM_LID: u64 = 1 << 6;
    pub const CAPABILITY_MASK: u64 = 1 << 7;
    pub const DIAG_CODE: u64 = 1 << 8;
    pub const M_KEY_LEASE_PERIOD: u64 = 1 << 9;
    pub const LOCAL_PORT_NUM: u64 = 1 << 10;
    pub const LINK_WIDTH_ENABLED: u64 = 1 << 11;
    pub const LINK_WIDTH_SUPPORTED: u64 = 1 << 12;
    pub const LINK_WIDTH_ACTIVE: u64 = 1 << 13;
    pub const LINK_SPEED_SUPPORTED: u64 = 1 << 14;
    pub const PORT_STATE: u64 = 1 << 15;
    pub const PORT_PHYSICAL_STATE: u64 = 1 << 16;
    pub const LINK_DOWN_DEFAULT_STATE: u64 = 1 << 17;
    pub const M_KEY_PROTECT_BITS: u64 = 1 << 18;
    // bit 19: reserved (3 bits before LMC)
    pub const LMC: u64 = 1 << 20;
    pub const LINK_SPEED_ACTIVE: u64 = 1 << 21;
    pub const LINK_SPEED_ENABLED: u64 = 1 << 22;
    pub const NEIGHBOR_MTU: u64 = 1 << 23;
    pub const MASTER_SM_SL: u64 = 1 << 24;
    pub const VL_CAP: u64 = 1 << 25;
    pub const INIT_TYPE: u64 = 1 << 26;
    pub const VL_HIGH_LIMIT: u64 = 1 << 27;
    pub const VL_ARBITRATION_HIGH_CAP: u64 = 1 << 28;
    pub const VL_ARBITRATION_LOW_CAP: u64 = 1 << 29;
    pub const INIT_TYPE_REPLY: u64 = 1 << 30;
    pub const MTU_CAP: u64 = 1 << 31;
    pub const VL_STALL_COUNT: u64 = 1 << 32;
    pub const HOQ_LIFE: u64 = 1 << 33;
    pub const OPERATIONAL_VLS: u64 = 1 << 34;
    pub const PARTITION_ENFORCEMENT_INBOUND: u64 = 1 << 35;
    pub const PARTITION_ENFORCEMENT_OUTBOUND: u64 = 1 << 36;
    pub const FILTER_RAW_INBOUND: u64 = 1 << 37;
    pub const FILTER_RAW_OUTBOUND: u64 = 1 << 38;
    pub const M_KEY_VIOLATIONS: u64 = 1 << 39;
    pub const P_KEY_VIOLATIONS: u64 = 1 << 40;
    pub const Q_KEY_VIOLATIONS: u64 = 1 << 41;
    pub const GUID_CAP: u64 = 1 << 42;
    pub const CLIENT_REREGISTER: u64 = 1 << 43;
    /// Reserved in older editions of the specification (and in OpenSM's table).
    pub const MULTICAST_PKEY_TRAP_SUPPRESSION_ENABLED: u64 = 1 << 44;
    pub const SUBNET_TIMEOUT: u64 = 1 << 45;
    // bit 46: reserved (3 bits before RespTimeValue)
    pub const RESP_TIME_VALUE: u64 = 1 << 47;
    pub const LOCAL_PHY_ERRORS: u64 = 1 << 48;
    pub const OVERRUN_ERRORS: u64 = 1 << 49;
    pub const MAX_CREDIT_HINT: u64 = 1 << 50;
    // bit 51: reserved (the byte before LinkRoundTripLatency)
    pub const LINK_ROUND_TRIP_LATENCY: u64 = 1 << 52;
    pub const CAPABILITY_MASK2: u64 = 1 << 53;
    pub const LINK_SPEED_EXT_ACTIVE: u64 = 1 << 54;
    pub const LINK_SPEED_EXT_SUPPORTED: u64 = 1 << 55;
    // bit 56: reserved (3 bits before LinkSpeedExtEnabled)
    pub const LINK_SPEED_EXT_ENABLED: u64 = 1 << 57;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port_info::{
        LinkDownDefaultState, Mtu, PhysPortState, PortState, VlCap, cap, link_speed, link_width,
    };
    use crate::test_vectors::{bytes, sa_payload};
    use crate::{Error, Sl, sa};

    // ibsim net.2sw2path4hca with OpenSM 3.3.23 as SA, queries run on Hca1.
    // `saquery PIR 4/1`: Hca2's port 1 (component mask EndportLID | PortNum).
    const REQ: &str = include_str!("../tests/vectors/sa_portinforecord.req.mad");
    const HCA: &str = include_str!("../tests/vectors/sa_portinforecord.resp.mad");
    // `saquery PIR 1/0`: Switch1's port 0.
    const SWITCH_PORT0: &str =
        include_str!("../tests/vectors/sa_portinforecord_switch_port0.resp.mad");
    // `saquery -s`: every port whose CapabilityMask has IsSM (component mask CapabilityMask).
    const ISSM_REQ: &str = include_str!("../tests/vectors/sa_portinforecord_issm.req.mad");

    fn hca2_port1() -> Repr {
        Repr {
            endport_lid: Lid(4),
            port_num: 1,
            options: 0,
            port_info: port_info::Repr {
                m_key: 0,
                gid_prefix: 0xfe80_0000_0000_0000,
                lid: Lid(4),
                master_sm_lid: Lid(1),
                capability_mask: 0x0050_c048,
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
                capability_mask2: 0x30,
                link_speed_ext_active: 0,
                link_speed_ext_supported: 0,
                link_speed_ext_enabled: 0,
            },
        }
    }

    #[test]
    fn parse_and_emit() {
        let (offset, payload) = sa_payload(HCA);
        assert_eq!((offset, payload.len()), (9, 72));
        let r = Repr::parse(&payload).unwrap();
        assert_eq!(r, hca2_port1());
        assert!(
            r.port_info
                .has_capability(cap::IS_CAPABILITY_MASK2_SUPPORTED)
        );
        let mut out = [0xa5u8; 72];
        r.emit(&mut out).unwrap();
        assert_eq!(out[..LEN], payload[..LEN]);
        assert_eq!(out[LEN..], [0xa5; 4]);
        assert_eq!(sa::pack_records(&[r]).unwrap(), (offset, payload));

        let (_, payload) = sa_payload(SWITCH_PORT0);
        let s = Repr::parse(&payload).unwrap();
        assert_eq!((s.endport_lid, s.port_num), (Lid(1), 0));
        assert_eq!(s.port_info.lid, Lid(1));
        assert!(s.port_info.has_capability(cap::IS_SM));
        assert_eq!(s.port_info.neighbor_mtu, Mtu::Mtu256);
        assert_eq!(s.port_info.mtu_cap, Mtu::Mtu1024);
        assert_eq!(s.port_info.resp_time_value, 8);
        s.emit(&mut out).unwrap();
        assert_eq!(out[..LEN], payload[..LEN]);
    }

    #[test]
    fn query_templates() {
        let q = sa::Repr::parse(&bytes(REQ)).unwrap();
        assert_eq!(q.attr_id, ATTR_ID);
        assert_eq!(q.component_mask, comp::ENDPORT_LID | comp::PORT_NUM);
        let t = Repr::parse(&q.data.0).unwrap();
        assert_eq!((t.endport_lid, t.port_num), (Lid(4), 1));

        // saquery -s matches on CapabilityMask == IsSM.
        let q = sa::Repr::parse(&bytes(ISSM_REQ)).unwrap();
        assert_eq!(q.component_mask, comp::CAPABILITY_MASK);
        let t = Repr::parse(&q.data.0).unwrap();
        assert_eq!(t.port_info.capability_mask, cap::IS_SM);
        assert_eq!(
            t,
            Repr {
                port_info: port_info::Repr {
                    capability_mask: cap::IS_SM,
                    ..port_info::Repr::default()
                },
                ..Repr::default()
            }
        );
    }

    #[test]
    fn view_accessors() {
        let (_, mut buf) = sa_payload(HCA);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::ENDPORT_LID), Lid(4));
        assert_eq!(p.get(field::PORT_NUM), 1);
        p.set(field::OPTIONS, options::QDR_NOT_OVERLOADED);
        p.set(field::PORT_NUM, 2);
        let pi = port_info::Packet::new_checked(p.attribute(field::PORT_INFO)).unwrap();
        assert_eq!(pi.get(port_info::field::PORT_STATE), PortState::Active);
        assert_eq!(&buf[..4], &[0x00, 0x04, 0x02, 0x80]);
    }

    #[test]
    fn reserved_and_unknown() {
        let (_, mut buf) = sa_payload(HCA);
        // PortState 7 and a NeighborMTU of 9: not named, kept.
        buf[4 + 32] = (buf[4 + 32] & 0xf0) | 7;
        buf[4 + 36] = (buf[4 + 36] & 0x0f) | 0x90;
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.port_info.port_state, PortState::Unknown(7));
        assert_eq!(r.port_info.neighbor_mtu, Mtu::Unknown(9));
        let mut out = [0u8; LEN];
        r.emit(&mut out).unwrap();
        assert_eq!(out[..], buf[..LEN]);
        assert!(
            Packet::new_checked(&out[..])
                .unwrap()
                .check_reserved()
                .is_ok()
        );
    }

    #[test]
    fn short_buffers() {
        let (_, payload) = sa_payload(HCA);
        assert!(matches!(
            Repr::parse(&payload[..67]),
            Err(Error::Truncated {
                need: 68,
                got: 67,
                ..
            })
        ));
        assert!(matches!(
            hca2_port1().emit(&mut [0u8; 67]),
            Err(Error::BufferTooSmall {
                need: 68,
                got: 67,
                ..
            })
        ));
    }

    #[test]
    fn component_mask() {
        // The masks the captured queries used.
        assert_eq!(comp::ENDPORT_LID | comp::PORT_NUM, 0x3);
        assert_eq!(comp::CAPABILITY_MASK, 0x80);
        assert_eq!(comp::LINK_SPEED_EXT_ENABLED, 1 << 57);
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(hca2_port1()).unwrap();
        assert_eq!(v["endport_lid"], 4);
        assert_eq!(v["port_num"], 1);
        assert_eq!(v["port_info"]["port_state"], "Active");
        assert_eq!(v["port_info"]["neighbor_mtu"], "Mtu2048");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, LEN)) {
            let out = crate::test_vectors::any_bytes::<Repr>(&b)?;
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
        }
    }
}
