//! VLArbitrationTableRecord (IBA 15.2.5.9): one 32-entry block of a port's VL arbitration
//! tables, named by the LID of the end port (a switch's port 0), the output port and the
//! block number (1..=4, as in the SMP's attribute modifier; see [`vl_arb::Block`]). 72 bytes,
//! a multiple of 8 already (attribute offset 9).

use crate::attr::SaAttrId;
use crate::bits::wire_record;
use crate::{Lid, PortNum, vl_arb};

/// SA attribute id of VLArbitrationTableRecord.
pub const ATTR_ID: u16 = SaAttrId::VlArbitrationTableRecord.to_raw_value();

wire_record! {
    /// VLArbitrationTableRecord.
    struct "VLArbitrationTableRecord", 72;
    fields {
        /// The LID of the end port: of port 0 for a switch.
        lid: Lid = LID @ 0, 16;
        /// On a switch, the port whose tables these are.
        output_port_num: u8 = OUTPUT_PORT_NUM @ 16, 8;
        /// 1..=4: see [`vl_arb::Block`].
        block_num: u8 = BLOCK_NUM @ 24, 8;
    }
    attributes {
        vl_arbitration_table: vl_arb::Repr = VL_ARBITRATION_TABLE @ 8;
    }
}

impl Repr {
    /// The block, `None` for a number outside 1..=4.
    pub const fn block(&self) -> Option<vl_arb::Block> {
        vl_arb::Block::from_number(self.block_num as u16)
    }

    /// The block and port as the SMP's attribute modifier names them.
    pub const fn modifier(&self) -> Option<vl_arb::Modifier> {
        match self.block() {
            Some(b) => Some(vl_arb::Modifier::switch_port(
                PortNum(self.output_port_num),
                b,
            )),
            None => None,
        }
    }
}

/// Component mask bits, in field order. The table's entries have none.
pub mod comp {
    pub const LID: u64 = 1 << 0;
    pub const OUTPUT_PORT_NUM: u64 = 1 << 1;
    pub const BLOCK_NUM: u64 = 1 << 2;
    // bit 3: reserved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_vectors::{bytes, sa_payload};
    use crate::vl_arb::{Block, Entry};
    use crate::{Error, sa};

    // ibsim net.2sw2path4hca with OpenSM 3.3.23, run on Hca1: `saquery VLAR 4/1/1`, the low
    // priority entries 0..=31 of Hca2 port 1 (component mask LID | OutputPortNum | BlockNum).
    // OpenSM answers from what it keeps, all zero here.
    const REQ: &str = include_str!("../tests/vectors/sa_vlarbrecord.req.mad");
    const HCA2: &str = include_str!("../tests/vectors/sa_vlarbrecord.resp.mad");

    // Built by hand: the table ibsim's SMA reports for that port (`smpquery vlarb 4 1`, low
    // priority: VL n with weight 4 for n in 1..=7, VL 0 with weight 0), as a record.
    fn ibsim_low() -> Repr {
        let mut entries = [Entry::default(); 8];
        for (i, e) in entries.iter_mut().enumerate() {
            *e = Entry::new(i as u8, if i == 0 { 0 } else { 4 });
        }
        Repr {
            lid: Lid(4),
            output_port_num: 1,
            block_num: 1,
            vl_arbitration_table: vl_arb::Repr::from_entries(&entries),
        }
    }

    fn ibsim_low_bytes() -> [u8; 72] {
        let mut b = [0u8; 72];
        b[..4].copy_from_slice(&[0, 4, 1, 1]);
        for i in 0..8 {
            b[8 + 2 * i] = i as u8;
            b[9 + 2 * i] = if i == 0 { 0 } else { 4 };
        }
        b
    }

    #[test]
    fn parse_and_emit() {
        let (offset, payload) = sa_payload(HCA2);
        assert_eq!((offset, payload.len()), (9, 72));
        let r = Repr::parse(&payload).unwrap();
        assert_eq!(
            r,
            Repr {
                vl_arbitration_table: vl_arb::Repr::default(),
                ..ibsim_low()
            }
        );
        assert_eq!(r.block(), Some(Block::Low0To31));
        let mut out = [0xa5u8; 72];
        r.emit(&mut out).unwrap();
        assert_eq!(out[..], payload[..]);
        assert_eq!(sa::pack_records(&[r]).unwrap(), (offset, payload));

        let b = ibsim_low_bytes();
        let r = Repr::parse(&b).unwrap();
        assert_eq!(r, ibsim_low());
        assert_eq!(
            r.modifier(),
            Some(vl_arb::Modifier::switch_port(PortNum(1), Block::Low0To31))
        );
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn query_template() {
        let q = sa::Repr::parse(&bytes(REQ)).unwrap();
        assert_eq!(q.attr_id, ATTR_ID);
        assert_eq!(
            q.component_mask,
            comp::LID | comp::OUTPUT_PORT_NUM | comp::BLOCK_NUM
        );
        let t = Repr::parse(&q.data.0).unwrap();
        assert_eq!((t.lid, t.output_port_num, t.block_num), (Lid(4), 1, 1));
    }

    #[test]
    fn view_accessors() {
        let mut b = ibsim_low_bytes();
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(p.get(field::BLOCK_NUM), 1);
        p.set(field::BLOCK_NUM, 3);
        let t = vl_arb::Packet::new_checked(p.attribute(field::VL_ARBITRATION_TABLE)).unwrap();
        assert_eq!(t.entry(7), Some(Entry::new(7, 4)));
        let r = Repr::parse(&b).unwrap();
        assert_eq!(r.block(), Some(Block::High0To31));
    }

    #[test]
    fn reserved_unknown_and_short() {
        let mut b = ibsim_low_bytes();
        b[6] = 0xff;
        assert!(matches!(
            Packet::new_checked(&b[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet { offset: 6, .. })
        ));
        b[6] = 0;
        b[3] = 9; // no such block: kept as a number
        let r = Repr::parse(&b).unwrap();
        assert_eq!((r.block_num, r.block(), r.modifier()), (9, None, None));
        let mut out = [0u8; 72];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
        assert!(matches!(
            Repr::parse(&b[..71]),
            Err(Error::Truncated {
                need: 72,
                got: 71,
                ..
            })
        ));
        assert!(r.emit(&mut [0u8; 71]).is_err());
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(ibsim_low()).unwrap();
        assert_eq!(v["block_num"], 1);
        assert_eq!(
            v["vl_arbitration_table"]["vl_arbitration_table"][1]["weight"],
            4
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
