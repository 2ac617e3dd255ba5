//! SLtoVLMappingTableRecord (IBA 15.2.5.4): the SL-to-VL table of one port, or of one
//! (input port, output port) pair of a switch, named by the LID of the end port (a switch's
//! port 0). 16 bytes, a multiple of 8 already (attribute offset 2).

use crate::attr::SaAttrId;
use crate::bits::wire_record;
use crate::{Lid, PortNum, sl2vl};

/// SA attribute id of SLtoVLMappingTableRecord.
pub const ATTR_ID: u16 = SaAttrId::SlToVlMappingTableRecord.to_raw_value();

wire_record! {
    /// SLtoVLMappingTableRecord.
    struct "SLtoVLMappingTableRecord", 16;
    fields {
        /// The LID of the end port: of port 0 for a switch.
        lid: Lid = LID @ 0, 16;
        /// On a switch, the port packets arrive on; reserved for channel adapters.
        input_port_num: u8 = INPUT_PORT_NUM @ 16, 8;
        /// On a switch, the port packets leave by; reserved for channel adapters.
        output_port_num: u8 = OUTPUT_PORT_NUM @ 24, 8;
    }
    attributes {
        sl_to_vl_mapping_table: sl2vl::Repr = SL_TO_VL_MAPPING_TABLE @ 8;
    }
}

impl Repr {
    /// The (input, output) pair as the SMP's attribute modifier names it.
    pub const fn modifier(&self) -> sl2vl::Modifier {
        sl2vl::Modifier::switch(PortNum(self.input_port_num), PortNum(self.output_port_num))
    }
}

/// Component mask bits, in field order. The table's entries have none.
pub mod comp {
    pub const LID: u64 = 1 << 0;
    pub const INPUT_PORT_NUM: u64 = 1 << 1;
    pub const OUTPUT_PORT_NUM: u64 = 1 << 2;
    // bit 3: reserved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_vectors::{bytes, sa_payload};
    use crate::{Error, Sl, Vl, sa};

    // ibsim net.2sw2path4hca with OpenSM 3.3.23, run on Hca1. `saquery SL2VL 4`: Hca2's table
    // (component mask LID). OpenSM maps every SL to VL 0 in what it keeps.
    const HCA2: &str = include_str!("../tests/vectors/sa_sl2vlrecord.resp.mad");
    // `saquery SL2VL 1/1/3`: Switch1, from port 1 to port 3 (LID | InputPortNum |
    // OutputPortNum).
    const SWITCH_REQ: &str = include_str!("../tests/vectors/sa_sl2vlrecord_switch.req.mad");
    const SWITCH: &str = include_str!("../tests/vectors/sa_sl2vlrecord_switch.resp.mad");

    // Built by hand: Switch1's 1 -> 3 table with ibsim's own default mapping (SL n on VL n,
    // SL 15 on VL 7), as its SMA reports it, to catch a nibble out of place.
    const SPREAD: [u8; 16] = [
        0x00, 0x01, 0x01, 0x03, 0, 0, 0, 0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xe7,
    ];

    fn spread() -> Repr {
        Repr {
            lid: Lid(1),
            input_port_num: 1,
            output_port_num: 3,
            sl_to_vl_mapping_table: sl2vl::Repr::new([
                0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7,
            ]),
        }
    }

    #[test]
    fn parse_and_emit() {
        for (text, lid, input, output) in [(HCA2, 4, 0, 0), (SWITCH, 1, 1, 3)] {
            let (offset, payload) = sa_payload(text);
            assert_eq!((offset, payload.len()), (2, 16));
            let r = Repr::parse(&payload).unwrap();
            assert_eq!(
                r,
                Repr {
                    lid: Lid(lid),
                    input_port_num: input,
                    output_port_num: output,
                    sl_to_vl_mapping_table: sl2vl::Repr::default(),
                }
            );
            let mut out = [0xa5u8; 16];
            r.emit(&mut out).unwrap();
            assert_eq!(out[..], payload[..]);
            assert_eq!(sa::pack_records(&[r]).unwrap(), (offset, payload));
        }
        let r = Repr::parse(&SPREAD).unwrap();
        assert_eq!(r, spread());
        assert_eq!(r.sl_to_vl_mapping_table.vl(Sl(15)), Some(Vl(7)));
        assert_eq!(
            r.modifier(),
            sl2vl::Modifier::switch(PortNum(1), PortNum(3))
        );
        let mut out = [0xa5u8; 16];
        r.emit(&mut out).unwrap();
        assert_eq!(out, SPREAD);
    }

    #[test]
    fn query_template() {
        let q = sa::Repr::parse(&bytes(SWITCH_REQ)).unwrap();
        assert_eq!(q.attr_id, ATTR_ID);
        assert_eq!(
            q.component_mask,
            comp::LID | comp::INPUT_PORT_NUM | comp::OUTPUT_PORT_NUM
        );
        let t = Repr::parse(&q.data.0).unwrap();
        assert_eq!((t.lid, t.input_port_num, t.output_port_num), (Lid(1), 1, 3));
    }

    #[test]
    fn view_accessors() {
        let mut buf = SPREAD;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::OUTPUT_PORT_NUM), 3);
        p.set(field::INPUT_PORT_NUM, 2);
        let t = sl2vl::Packet::new_checked(p.attribute(field::SL_TO_VL_MAPPING_TABLE)).unwrap();
        assert_eq!(t.vl(Sl(3)), Some(Vl(3)));
        assert_eq!(buf[2], 2);
    }

    #[test]
    fn reserved_bad_vl_and_short() {
        let mut buf = SPREAD;
        buf[4] = 0x40;
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet { offset: 4, .. })
        ));
        assert_eq!(Repr::parse(&buf).unwrap(), spread());
        let mut bad = spread();
        bad.sl_to_vl_mapping_table.sl_to_vl[0] = Vl(16);
        assert!(matches!(
            bad.emit(&mut [0u8; 16]),
            Err(Error::InvalidField { .. })
        ));
        assert!(matches!(
            Repr::parse(&SPREAD[..15]),
            Err(Error::Truncated {
                need: 16,
                got: 15,
                ..
            })
        ));
        assert!(spread().emit(&mut [0u8; 15]).is_err());
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(spread()).unwrap();
        assert_eq!(v["input_port_num"], 1);
        assert_eq!(v["sl_to_vl_mapping_table"]["sl_to_vl"][15], 7);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, LEN)) {
            let out = crate::test_vectors::any_bytes::<Repr>(&b)?;
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
        }
    }
}
