//! SwitchInfoRecord (IBA 15.2.5.5): the SwitchInfo of one switch, named by the LID of its
//! port 0. 24 bytes, a multiple of 8 already (attribute offset 3).

use crate::attr::SaAttrId;
use crate::bits::wire_record;
use crate::{Lid, switch_info};

/// SA attribute id of SwitchInfoRecord.
pub const ATTR_ID: u16 = SaAttrId::SwitchInfoRecord.to_raw_value();

wire_record! {
    /// SwitchInfoRecord.
    struct "SwitchInfoRecord", 24;
    fields {
        /// The LID of the switch's port 0.
        lid: Lid = LID @ 0, 16;
    }
    attributes {
        switch_info: switch_info::Repr = SWITCH_INFO @ 4;
    }
}

/// Component mask bits, in field order: the record's LID and reserved field, then one per
/// SwitchInfo field, reserved fields included.
pub mod comp {
    pub const LID: u64 = 1 << 0;
    // bit 1: reserved
    pub const LINEAR_FDB_CAP: u64 = 1 << 2;
    pub const RANDOM_FDB_CAP: u64 = 1 << 3;
    pub const MULTICAST_FDB_CAP: u64 = 1 << 4;
    pub const LINEAR_FDB_TOP: u64 = 1 << 5;
    pub const DEFAULT_PORT: u64 = 1 << 6;
    pub const DEFAULT_MULTICAST_PRIMARY_PORT: u64 = 1 << 7;
    pub const DEFAULT_MULTICAST_NOT_PRIMARY_PORT: u64 = 1 << 8;
    pub const LIFE_TIME_VALUE: u64 = 1 << 9;
    pub const PORT_STATE_CHANGE: u64 = 1 << 10;
    /// Reserved in editions before the field existed.
    pub const OPTIMIZED_SL_TO_VL_MAPPING_PROGRAMMING: u64 = 1 << 11;
    pub const LIDS_PER_PORT: u64 = 1 << 12;
    pub const PARTITION_ENFORCEMENT_CAP: u64 = 1 << 13;
    pub const INBOUND_ENFORCEMENT_CAP: u64 = 1 << 14;
    pub const OUTBOUND_ENFORCEMENT_CAP: u64 = 1 << 15;
    pub const FILTER_RAW_INBOUND_CAP: u64 = 1 << 16;
    pub const FILTER_RAW_OUTBOUND_CAP: u64 = 1 << 17;
    pub const ENHANCED_PORT0: u64 = 1 << 18;
    // bit 19: reserved (the 11 bits after EnhancedPort0)
    /// MulticastFDBTop took 16 of the bits that followed the reserved field; by the
    /// field-order rule it is the next component.
    pub const MULTICAST_FDB_TOP: u64 = 1 << 20;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_vectors::{bytes, sa_payload};
    use crate::{Error, sa};

    // ibsim net.2sw2path4hca with OpenSM 3.3.23, run on Hca1: `saquery SWIR 1`, Switch1's
    // SwitchInfo as OpenSM keeps it (component mask LID).
    const REQ: &str = include_str!("../tests/vectors/sa_switchinforecord.req.mad");
    const SWITCH1: &str = include_str!("../tests/vectors/sa_switchinforecord.resp.mad");

    fn switch1() -> Repr {
        Repr {
            lid: Lid(1),
            switch_info: switch_info::Repr {
                linear_fdb_cap: 30720,
                random_fdb_cap: 0,
                multicast_fdb_cap: 1024,
                linear_fdb_top: Lid(6),
                default_port: 0,
                default_multicast_primary_port: 0,
                default_multicast_not_primary_port: 0,
                life_time_value: 18,
                port_state_change: false,
                optimized_sl_to_vl_mapping_programming: 0,
                lids_per_port: 0,
                partition_enforcement_cap: 64,
                inbound_enforcement_cap: false,
                outbound_enforcement_cap: false,
                filter_raw_inbound_cap: true,
                filter_raw_outbound_cap: true,
                enhanced_port0: false,
                multicast_fdb_top: Lid(0),
            },
        }
    }

    #[test]
    fn parse_and_emit() {
        let (offset, payload) = sa_payload(SWITCH1);
        assert_eq!((offset, payload.len()), (3, 24));
        let r = Repr::parse(&payload).unwrap();
        assert_eq!(r, switch1());
        let mut out = [0xa5u8; 24];
        r.emit(&mut out).unwrap();
        assert_eq!(out[..], payload[..]);
        assert_eq!(sa::pack_records(&[r]).unwrap(), (offset, payload));
        assert!(
            Packet::new_checked(&out[..])
                .unwrap()
                .check_reserved()
                .is_ok()
        );
    }

    #[test]
    fn query_template() {
        let q = sa::Repr::parse(&bytes(REQ)).unwrap();
        assert_eq!(q.attr_id, ATTR_ID);
        assert_eq!(q.component_mask, comp::LID);
        assert_eq!(
            Repr::parse(&q.data.0).unwrap(),
            Repr {
                lid: Lid(1),
                ..Repr::default()
            }
        );
    }

    #[test]
    fn view_accessors() {
        let (_, mut buf) = sa_payload(SWITCH1);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::LID), Lid(1));
        p.set(field::LID, Lid(0x0102));
        let si = switch_info::Packet::new_checked(p.attribute(field::SWITCH_INFO)).unwrap();
        assert_eq!(si.get(switch_info::field::LINEAR_FDB_TOP), Lid(6));
        let mut si = switch_info::Packet::new_checked(p.attribute_mut(field::SWITCH_INFO)).unwrap();
        si.set(switch_info::field::PORT_STATE_CHANGE, true);
        assert_eq!(buf[..2], [0x01, 0x02]);
        assert_eq!(buf[4 + 11], 0x94);
    }

    #[test]
    fn reserved_and_short() {
        let (_, mut buf) = sa_payload(SWITCH1);
        buf[3] = 1;
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet { offset: 3, .. })
        ));
        assert_eq!(Repr::parse(&buf).unwrap(), switch1());
        assert!(matches!(
            Repr::parse(&buf[..23]),
            Err(Error::Truncated {
                need: 24,
                got: 23,
                ..
            })
        ));
        assert!(switch1().emit(&mut [0u8; 23]).is_err());
    }

    #[test]
    fn component_mask() {
        assert_eq!(comp::LINEAR_FDB_TOP, 0x20);
        assert_eq!(comp::ENHANCED_PORT0, 0x4_0000);
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(switch1()).unwrap();
        assert_eq!(v["lid"], 1);
        assert_eq!(v["switch_info"]["linear_fdb_top"], 6);
        assert_eq!(v["switch_info"]["life_time_value"], 18);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, LEN)) {
            let out = crate::test_vectors::any_bytes::<Repr>(&b)?;
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
        }
    }
}
