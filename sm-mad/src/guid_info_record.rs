//! GUIDInfoRecord (IBA 15.2.5.18): one eight-GUID block of a port's GUID table, named by the
//! port's LID and the block number. 72 bytes, a multiple of 8 already (attribute offset 9).

use crate::attr::SaAttrId;
use crate::bits::wire_record;
use crate::{Guid, Lid, guid_info};

/// SA attribute id of GUIDInfoRecord.
pub const ATTR_ID: u16 = SaAttrId::GuidInfoRecord.to_raw_value();

wire_record! {
    /// GUIDInfoRecord.
    struct "GUIDInfoRecord", 72;
    fields {
        lid: Lid = LID @ 0, 16;
        /// GUID indices `8 * block_num .. 8 * block_num + 8`.
        block_num: u8 = BLOCK_NUM @ 16, 8;
    }
    attributes {
        guid_info: guid_info::Repr = GUID_INFO @ 8;
    }
}

impl Repr {
    /// GUID `index` of the port's table, `None` when it is outside this block.
    pub fn guid(&self, index: usize) -> Option<Guid> {
        let first = self.block_num as usize * guid_info::BLOCK_LEN;
        let slot = index.checked_sub(first)?;
        self.guid_info.guid_block.get(slot).copied()
    }
}

/// Component mask bits, in field order: the record's fields, then one per GUID of the
/// block.
pub mod comp {
    pub const LID: u64 = 1 << 0;
    pub const BLOCK_NUM: u64 = 1 << 1;
    // bits 2 and 3: reserved (8 and 32 bits)
    pub const GUID0: u64 = 1 << 4;
    pub const GUID1: u64 = 1 << 5;
    pub const GUID2: u64 = 1 << 6;
    pub const GUID3: u64 = 1 << 7;
    pub const GUID4: u64 = 1 << 8;
    pub const GUID5: u64 = 1 << 9;
    pub const GUID6: u64 = 1 << 10;
    pub const GUID7: u64 = 1 << 11;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_vectors::{bytes, sa_payload};
    use crate::{Error, sa};

    // ibsim net.2sw2path4hca with OpenSM 3.3.23, run on Hca1: `saquery GIR 4/0`, block 0 of
    // Hca2 port 1's GUID table (component mask LID | BlockNum): only the port GUID is set.
    const REQ: &str = include_str!("../tests/vectors/sa_guidinforecord.req.mad");
    const HCA2: &str = include_str!("../tests/vectors/sa_guidinforecord.resp.mad");

    fn hca2() -> Repr {
        let mut guid_block = [Guid(0); guid_info::BLOCK_LEN];
        guid_block[0] = Guid(0x10_0004);
        Repr {
            lid: Lid(4),
            block_num: 0,
            guid_info: guid_info::Repr { guid_block },
        }
    }

    #[test]
    fn parse_and_emit() {
        let (offset, payload) = sa_payload(HCA2);
        assert_eq!((offset, payload.len()), (9, 72));
        let r = Repr::parse(&payload).unwrap();
        assert_eq!(r, hca2());
        assert_eq!(r.guid(0), Some(Guid(0x10_0004)));
        assert_eq!(r.guid(8), None);
        let mut out = [0xa5u8; 72];
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
        assert_eq!(q.component_mask, comp::LID | comp::BLOCK_NUM);
        let t = Repr::parse(&q.data.0).unwrap();
        assert_eq!((t.lid, t.block_num), (Lid(4), 0));
    }

    #[test]
    fn view_accessors() {
        let (_, mut buf) = sa_payload(HCA2);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set(field::BLOCK_NUM, 3);
        let mut g = guid_info::Packet::new_checked(p.attribute_mut(field::GUID_INFO)).unwrap();
        g.set_guid(7, Guid(0x0002_c903_0000_0001)).unwrap();
        assert_eq!(buf[2], 3);
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.guid(31), Some(Guid(0x0002_c903_0000_0001)));
        assert_eq!(r.guid(0), None);
    }

    #[test]
    fn reserved_and_short() {
        let (_, mut buf) = sa_payload(HCA2);
        buf[3] = 0x20;
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet {
                offset: 3,
                after: "block_num",
                ..
            })
        ));
        assert_eq!(Repr::parse(&buf).unwrap(), hca2());
        assert!(matches!(
            Repr::parse(&buf[..71]),
            Err(Error::Truncated {
                need: 72,
                got: 71,
                ..
            })
        ));
        assert!(hca2().emit(&mut [0u8; 71]).is_err());
    }

    #[test]
    fn component_mask() {
        assert_eq!(comp::GUID0, 0x10);
        assert_eq!(comp::GUID7, 0x800);
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(hca2()).unwrap();
        assert_eq!(v["block_num"], 0);
        assert_eq!(v["guid_info"]["guid_block"][0], "0x0000000000100004");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, LEN)) {
            let out = crate::test_vectors::any_bytes::<Repr>(&b)?;
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
        }
    }
}
