//! P_KeyTableRecord (IBA 15.2.5.11): one 32-key block of a port's P_Key table, named by the
//! LID of the end port (a switch's port 0), the block number and, on a switch, the port.
//! 72 bytes, a multiple of 8 already (attribute offset 9).
//!
//! OpenSM answers it only to a requester that presents the SM_Key.

use crate::attr::SaAttrId;
use crate::bits::wire_record;
use crate::{Lid, PKey, pkey_table};

/// SA attribute id of P_KeyTableRecord.
pub const ATTR_ID: u16 = SaAttrId::PKeyTableRecord.to_raw_value();

wire_record! {
    /// P_KeyTableRecord.
    struct "P_KeyTableRecord", 72;
    fields {
        /// The LID of the end port: of port 0 for a switch.
        lid: Lid = LID @ 0, 16;
        /// Entries `32 * block_num ..= 32 * block_num + 31`.
        block_num: u16 = BLOCK_NUM @ 16, 16;
        /// On a switch, the port whose table this is; reserved for channel adapters.
        port_num: u8 = PORT_NUM @ 32, 8;
    }
    attributes {
        p_key_table: pkey_table::Repr = P_KEY_TABLE @ 8;
    }
}

impl Repr {
    /// Entry `index` of the port's whole table, `None` when it is outside this block.
    pub fn p_key(&self, index: usize) -> Option<PKey> {
        let first = self.block_num as usize * pkey_table::ENTRIES;
        let slot = index.checked_sub(first)?;
        self.p_key_table.p_key_table.get(slot).copied()
    }
}

/// Component mask bits, in field order. The table's entries have none.
pub mod comp {
    pub const LID: u64 = 1 << 0;
    pub const BLOCK_NUM: u64 = 1 << 1;
    pub const PORT_NUM: u64 = 1 << 2;
    // bit 3: reserved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_vectors::{bytes, sa_payload};
    use crate::{Error, sa};

    // ibsim net.2sw2path4hca with OpenSM 3.3.23, run on Hca1: `saquery --smkey 1 PKTR 4/1/0`,
    // block 0 of Hca2 port 1's table (component mask LID | BlockNum | PortNum).
    const REQ: &str = include_str!("../tests/vectors/sa_pkeytablerecord.req.mad");
    const HCA2: &str = include_str!("../tests/vectors/sa_pkeytablerecord.resp.mad");

    fn hca2() -> Repr {
        Repr {
            lid: Lid(4),
            block_num: 0,
            port_num: 1,
            p_key_table: pkey_table::Repr::from_keys(&[PKey::DEFAULT]),
        }
    }

    #[test]
    fn parse_and_emit() {
        let (offset, payload) = sa_payload(HCA2);
        assert_eq!((offset, payload.len()), (9, 72));
        let r = Repr::parse(&payload).unwrap();
        assert_eq!(r, hca2());
        assert_eq!(r.p_key(0), Some(PKey::DEFAULT));
        assert_eq!(r.p_key(31), Some(PKey(0)));
        assert_eq!(r.p_key(32), None);
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
        assert_eq!(q.sm_key, 1);
        assert_eq!(
            q.component_mask,
            comp::LID | comp::BLOCK_NUM | comp::PORT_NUM
        );
        let t = Repr::parse(&q.data.0).unwrap();
        assert_eq!((t.lid, t.block_num, t.port_num), (Lid(4), 0, 1));
    }

    #[test]
    fn view_accessors() {
        let (_, mut buf) = sa_payload(HCA2);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::PORT_NUM), 1);
        p.set(field::BLOCK_NUM, 2);
        p.set(field::PORT_NUM, 9);
        let mut t = pkey_table::Packet::new_checked(p.attribute_mut(field::P_KEY_TABLE)).unwrap();
        t.set_entry(1, PKey(0x8001)).unwrap();
        assert_eq!(buf[..5], [0, 4, 0, 2, 9]);
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.p_key(65), Some(PKey(0x8001)));
        assert_eq!(r.p_key(1), None);
    }

    #[test]
    fn reserved_and_short() {
        let (_, mut buf) = sa_payload(HCA2);
        buf[7] = 1;
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet {
                offset: 7,
                after: "port_num",
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
    fn json() {
        let v = serde_json::to_value(hca2()).unwrap();
        assert_eq!(v["port_num"], 1);
        assert_eq!(v["p_key_table"]["p_key_table"][0], "0xffff");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, LEN)) {
            let out = crate::test_vectors::any_bytes::<Repr>(&b)?;
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
        }
    }
}
