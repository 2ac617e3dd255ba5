//! LinearForwardingTableRecord (IBA 15.2.5.6): one 64-LID block of a switch's linear
//! forwarding table, named by the LID of the switch's port 0. 72 bytes, a multiple of 8
//! already (attribute offset 9).

use crate::attr::SaAttrId;
use crate::bits::wire_record;
use crate::{Lid, PortNum, lft};

/// SA attribute id of LinearForwardingTableRecord.
pub const ATTR_ID: u16 = SaAttrId::LinearForwardingTableRecord.to_raw_value();

wire_record! {
    /// LinearForwardingTableRecord.
    struct "LinearForwardingTableRecord", 72;
    fields {
        /// The LID of the switch's port 0.
        lid: Lid = LID @ 0, 16;
        /// The block: LIDs `64 * block_num ..= 64 * block_num + 63`.
        block_num: u16 = BLOCK_NUM @ 16, 16;
    }
    attributes {
        linear_forwarding_table: lft::Repr = LINEAR_FORWARDING_TABLE @ 8;
    }
}

impl Repr {
    /// The output port the block gives `lid`, `None` when `lid` is outside the block.
    pub fn port(&self, lid: Lid) -> Option<PortNum> {
        if lft::block_of(lid) != self.block_num {
            return None;
        }
        self.linear_forwarding_table
            .port_block
            .get(lft::slot_of(lid))
            .copied()
    }
}

/// Component mask bits, in field order. The table's 64 entries would not fit the mask and
/// have none.
pub mod comp {
    pub const LID: u64 = 1 << 0;
    pub const BLOCK_NUM: u64 = 1 << 1;
    // bit 2: reserved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_vectors::{bytes, expect, sa_payload};
    use crate::{Error, sa};

    // ibsim net.2sw2path4hca with OpenSM 3.3.23 (minhop), run on Hca1: `saquery LFTR 1/0`,
    // block 0 of Switch1's table (component mask LID | BlockNum): LIDs 1..=6 routed.
    const REQ: &str = include_str!("../tests/vectors/sa_lftrecord.req.mad");
    const SWITCH1: &str = include_str!("../tests/vectors/sa_lftrecord.resp.mad");

    fn switch1_block0() -> Repr {
        let mut table = [255u8; 64];
        table[..7].copy_from_slice(&[255, 0, 1, 3, 3, 2, 5]);
        Repr {
            lid: Lid(1),
            block_num: 0,
            linear_forwarding_table: lft::Repr::from_table(&table, 0),
        }
    }

    #[test]
    fn parse_and_emit() {
        let (offset, payload) = sa_payload(SWITCH1);
        assert_eq!((offset, payload.len()), (9, 72));
        let r = Repr::parse(&payload).unwrap();
        assert_eq!(r, switch1_block0());
        for lid in 1..=5u16 {
            let key = format!("linear_forwarding_table.port[{lid}]");
            let want: u8 = expect(SWITCH1, &key).unwrap().parse().unwrap();
            assert_eq!(r.port(Lid(lid)), Some(PortNum(want)), "{key}");
        }
        assert_eq!(r.port(Lid(64)), None);
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
        assert_eq!((t.lid, t.block_num), (Lid(1), 0));
    }

    #[test]
    fn view_accessors() {
        let (_, mut buf) = sa_payload(SWITCH1);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::BLOCK_NUM), 0);
        assert_eq!(p.attribute(field::LINEAR_FORWARDING_TABLE)[3], 3);
        p.set(field::BLOCK_NUM, lft::MAX_BLOCK);
        p.attribute_mut(field::LINEAR_FORWARDING_TABLE)[63] = 7;
        assert_eq!(buf[2..4], [0x02, 0xff]);
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.port(Lid(0xbfff)), Some(PortNum(7)));
    }

    #[test]
    fn reserved_and_short() {
        let (_, mut buf) = sa_payload(SWITCH1);
        buf[5] = 0x10;
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet {
                offset: 5,
                after: "block_num",
                ..
            })
        ));
        assert!(matches!(
            Repr::parse(&buf[..71]),
            Err(Error::Truncated {
                need: 72,
                got: 71,
                ..
            })
        ));
        assert!(switch1_block0().emit(&mut [0u8; 71]).is_err());
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(switch1_block0()).unwrap();
        assert_eq!(v["block_num"], 0);
        assert_eq!(v["linear_forwarding_table"]["port_block"][3], 3);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, LEN)) {
            let out = crate::test_vectors::any_bytes::<Repr>(&b)?;
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
        }
    }
}
