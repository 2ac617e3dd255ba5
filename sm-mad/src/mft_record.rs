//! MulticastForwardingTableRecord (IBA 15.2.5.8): one block of 32 MLIDs of a switch's
//! multicast forwarding table at one position (a group of 16 ports), named by the LID of the
//! switch's port 0. 72 bytes, a multiple of 8 already (attribute offset 9).
//!
//! Position and block number share the second 16 bits of the record as they share the
//! attribute modifier of the SMP: position in the top 4 bits, block number in the low 9.

use crate::attr::SaAttrId;
use crate::bits::wire_record;
use crate::{Lid, mft};

/// SA attribute id of MulticastForwardingTableRecord.
pub const ATTR_ID: u16 = SaAttrId::MulticastForwardingTableRecord.to_raw_value();

wire_record! {
    /// MulticastForwardingTableRecord.
    struct "MulticastForwardingTableRecord", 72;
    fields {
        /// The LID of the switch's port 0.
        lid: Lid = LID @ 0, 16;
        /// Ports `16 * position ..= 16 * position + 15`.
        position: u8 = POSITION @ 16, 4;
        /// MLIDs `0xC000 + 32 * block_num ..= 0xC000 + 32 * block_num + 31`.
        block_num: u16 = BLOCK_NUM @ 23, 9;
    }
    attributes {
        multicast_forwarding_table: mft::Repr = MULTICAST_FORWARDING_TABLE @ 8;
    }
}

impl Repr {
    /// The block and position as the SMP's attribute modifier names them.
    pub const fn modifier(&self) -> mft::Modifier {
        mft::Modifier {
            block: self.block_num,
            position: self.position,
        }
    }
}

/// Component mask bits, in field order. The table's entries have none.
pub mod comp {
    pub const LID: u64 = 1 << 0;
    pub const POSITION: u64 = 1 << 1;
    // bit 2: reserved (3 bits)
    pub const BLOCK_NUM: u64 = 1 << 3;
    // bit 4: reserved (32 bits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_vectors::{bytes, sa_payload};
    use crate::{Error, PortNum, sa};

    // ibsim net.2sw2path4hca with OpenSM 3.3.23, run on Hca1: `saquery MFTR 1/0/0`
    // (component mask LID | Position | BlockNum). No port had joined a group, so the answer
    // is an empty table (attribute offset 0).
    const REQ: &str = include_str!("../tests/vectors/sa_mftrecord_empty.req.mad");
    const EMPTY: &str = include_str!("../tests/vectors/sa_mftrecord_empty.resp.mad");

    // Built by hand from the layout, as no captured answer holds a record: Switch LID 0x0012,
    // position 1 (ports 16..=31), block 0x1ab, MLID slot 0 forwarding to ports 16 and 17,
    // slot 31 to port 31.
    const BYTES: [u8; 72] = {
        let mut b = [0u8; 72];
        b[1] = 0x12;
        b[2] = 0x11; // position 1, reserved 0, block bit 8 set
        b[3] = 0xab;
        b[8] = 0x00;
        b[9] = 0x03;
        b[70] = 0x80;
        b
    };

    fn repr() -> Repr {
        let mut t = mft::Repr::default();
        t.add_port(0, PortNum(16));
        t.add_port(0, PortNum(17));
        t.add_port(31, PortNum(31));
        Repr {
            lid: Lid(0x12),
            position: 1,
            block_num: 0x1ab,
            multicast_forwarding_table: t,
        }
    }

    #[test]
    fn parse_and_emit() {
        let r = Repr::parse(&BYTES).unwrap();
        assert_eq!(r, repr());
        assert_eq!(r.modifier(), mft::Modifier::new(0x1ab, 1).unwrap());
        assert!(r.multicast_forwarding_table.has_port(0, PortNum(17)));
        let mut out = [0xa5u8; 72];
        r.emit(&mut out).unwrap();
        assert_eq!(out, BYTES);
        assert_eq!(sa::pack_records(&[r]).unwrap(), (9, BYTES.to_vec()));
        assert!(
            Packet::new_checked(&out[..])
                .unwrap()
                .check_reserved()
                .is_ok()
        );
    }

    #[test]
    fn captured_query_and_empty_answer() {
        let q = sa::Repr::parse(&bytes(REQ)).unwrap();
        assert_eq!(q.attr_id, ATTR_ID);
        assert_eq!(
            q.component_mask,
            comp::LID | comp::POSITION | comp::BLOCK_NUM
        );
        let t = Repr::parse(&q.data.0).unwrap();
        assert_eq!((t.lid, t.position, t.block_num), (Lid(1), 0, 0));
        let (offset, payload) = sa_payload(EMPTY);
        assert_eq!(sa::records::<Repr>(&payload, offset).unwrap().count(), 0);
    }

    #[test]
    fn view_accessors() {
        let mut buf = BYTES;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::POSITION), 1);
        assert_eq!(p.get(field::BLOCK_NUM), 0x1ab);
        p.set(field::POSITION, 15);
        p.set(field::BLOCK_NUM, 2);
        assert_eq!(buf[2..4], [0xf0, 0x02]);
    }

    #[test]
    fn reserved_and_short() {
        let mut buf = BYTES;
        buf[2] |= 0x0e; // the 3 reserved bits between position and block number
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet {
                offset: 2,
                mask: 0x0e,
                ..
            })
        ));
        assert_eq!(Repr::parse(&buf).unwrap(), repr());
        assert!(matches!(
            Repr::parse(&BYTES[..71]),
            Err(Error::Truncated {
                need: 72,
                got: 71,
                ..
            })
        ));
        assert!(repr().emit(&mut [0u8; 71]).is_err());
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(repr()).unwrap();
        assert_eq!(v["position"], 1);
        assert_eq!(v["block_num"], 0x1ab);
        assert_eq!(
            v["multicast_forwarding_table"]["port_mask_block"][0],
            "0x0003"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, LEN)) {
            let out = crate::test_vectors::any_bytes::<Repr>(&b)?;
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
        }
    }
}
