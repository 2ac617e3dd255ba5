//! SMInfoRecord (IBA 15.2.5.10): the SMInfo of one SM in the subnet, named by the LID of its
//! port. 25 bytes; the SA pads it to 32 (attribute offset 4).
//!
//! The SA fills SM_Key in only for a requester that presents the SM_Key itself.

use crate::attr::SaAttrId;
use crate::bits::wire_record;
use crate::{Lid, sm_info};

/// SA attribute id of SMInfoRecord.
pub const ATTR_ID: u16 = SaAttrId::SmInfoRecord.to_raw_value();

wire_record! {
    /// SMInfoRecord.
    struct "SMInfoRecord", 25;
    fields {
        /// The LID of the SM's port.
        lid: Lid = LID @ 0, 16;
    }
    attributes {
        sm_info: sm_info::Repr = SM_INFO @ 4;
    }
}

/// Component mask bits, in field order: the record's LID and reserved field, then one per
/// SMInfo field.
pub mod comp {
    pub const LID: u64 = 1 << 0;
    // bit 1: reserved
    pub const GUID: u64 = 1 << 2;
    pub const SM_KEY: u64 = 1 << 3;
    pub const ACT_COUNT: u64 = 1 << 4;
    pub const PRIORITY: u64 = 1 << 5;
    pub const SM_STATE: u64 = 1 << 6;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sm_info::SmState;
    use crate::test_vectors::{bytes, sa_payload};
    use crate::{Error, Guid, sa};

    // ibsim net.2sw2path4hca with OpenSM 3.3.23 (priority 0) on Switch1, run on Hca1:
    // `saquery SMIR`, every SM (component mask 0): the master, with SM_Key hidden.
    const REQ: &str = include_str!("../tests/vectors/sa_sminforecord.req.mad");
    const MASTER: &str = include_str!("../tests/vectors/sa_sminforecord.resp.mad");

    fn master() -> Repr {
        Repr {
            lid: Lid(1),
            sm_info: sm_info::Repr {
                guid: Guid(0x20_0000),
                sm_key: 0,
                act_count: 118,
                priority: 0,
                sm_state: SmState::Master,
            },
        }
    }

    #[test]
    fn parse_and_emit() {
        let (offset, payload) = sa_payload(MASTER);
        assert_eq!((offset, payload.len()), (4, 32));
        let r = Repr::parse(&payload).unwrap();
        assert_eq!(r, master());
        let mut out = [0xa5u8; 32];
        r.emit(&mut out).unwrap();
        assert_eq!(out[..LEN], payload[..LEN]);
        assert_eq!(out[LEN..], [0xa5; 7]);
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
        assert_eq!(q.component_mask, 0);
        assert_eq!(Repr::parse(&q.data.0).unwrap(), Repr::default());
    }

    #[test]
    fn view_accessors() {
        let (_, mut buf) = sa_payload(MASTER);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::LID), Lid(1));
        let mut s = sm_info::Packet::new_checked(p.attribute_mut(field::SM_INFO)).unwrap();
        s.set(sm_info::field::PRIORITY, 15);
        s.set(sm_info::field::SM_STATE, SmState::Standby);
        assert_eq!(buf[24], 0xf2);
    }

    #[test]
    fn reserved_unknown_and_short() {
        let (_, mut buf) = sa_payload(MASTER);
        buf[2] = 0x01;
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet { offset: 2, .. })
        ));
        buf[2] = 0;
        buf[24] = 0x0c; // SM state 12
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.sm_info.sm_state, SmState::Unknown(12));
        let mut out = [0u8; LEN];
        r.emit(&mut out).unwrap();
        assert_eq!(out[..], buf[..LEN]);
        assert!(matches!(
            Repr::parse(&buf[..24]),
            Err(Error::Truncated {
                need: 25,
                got: 24,
                ..
            })
        ));
        assert!(master().emit(&mut [0u8; 24]).is_err());
    }

    #[test]
    fn component_mask() {
        assert_eq!(comp::SM_STATE, 0x40);
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(master()).unwrap();
        assert_eq!(v["lid"], 1);
        assert_eq!(v["sm_info"]["guid"], "0x0000000000200000");
        assert_eq!(v["sm_info"]["sm_state"], "Master");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, LEN)) {
            let out = crate::test_vectors::any_bytes::<Repr>(&b)?;
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
        }
    }
}
