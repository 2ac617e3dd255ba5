//! LinkRecord (IBA 15.2.5.13): one direction of a physical link, from a port to the port at
//! its other end. Ports are named by the LID of their node's end port (a switch's port 0)
//! and their port number. 6 bytes; the SA pads it to 8 (attribute offset 1).

use crate::Lid;
use crate::attr::SaAttrId;
use crate::bits::wire_struct;

/// SA attribute id of LinkRecord.
pub const ATTR_ID: u16 = SaAttrId::LinkRecord.to_raw_value();

wire_struct! {
    /// LinkRecord.
    struct "LinkRecord", 6;
    fields {
        from_lid: Lid = FROM_LID @ 0, 16;
        from_port: u8 = FROM_PORT @ 16, 8;
        to_port: u8 = TO_PORT @ 24, 8;
        to_lid: Lid = TO_LID @ 32, 16;
    }
}

/// Component mask bits, in field order.
pub mod comp {
    pub const FROM_LID: u64 = 1 << 0;
    pub const FROM_PORT: u64 = 1 << 1;
    pub const TO_PORT: u64 = 1 << 2;
    pub const TO_LID: u64 = 1 << 3;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_vectors::{bytes, sa_payload};
    use crate::{Error, sa};

    // ibsim net.2sw2path4hca with OpenSM 3.3.23, run on Hca1: `saquery LR 4/1`, the link
    // from Hca2's port 1 (component mask FromLID | FromPort): to Switch2 (LID 3) port 1.
    const REQ: &str = include_str!("../tests/vectors/sa_linkrecord.req.mad");
    const HCA2: &str = include_str!("../tests/vectors/sa_linkrecord.resp.mad");
    // net.2sw2path4hca2port: `saquery LR 6/2`, Hca2's second port, to Switch2 port 2.
    const HCA2_PORT2: &str = include_str!("../tests/vectors/sa_linkrecord_port2.resp.mad");

    #[test]
    fn parse_and_emit() {
        let (offset, payload) = sa_payload(HCA2);
        assert_eq!(offset, 1);
        let r = Repr::parse(&payload).unwrap();
        let want = Repr {
            from_lid: Lid(4),
            from_port: 1,
            to_port: 1,
            to_lid: Lid(3),
        };
        assert_eq!(r, want);
        let mut out = [0xa5u8; 8];
        r.emit(&mut out).unwrap();
        assert_eq!(out[..6], payload[..6]);
        assert_eq!(out[6..], [0xa5; 2]);
        assert_eq!(sa::pack_records(&[r]).unwrap(), (offset, payload));

        let (_, payload) = sa_payload(HCA2_PORT2);
        let r = Repr::parse(&payload).unwrap();
        assert_eq!(
            (r.from_lid, r.from_port, r.to_port, r.to_lid),
            (Lid(6), 2, 2, Lid(3))
        );
    }

    #[test]
    fn query_template() {
        let q = sa::Repr::parse(&bytes(REQ)).unwrap();
        assert_eq!(q.attr_id, ATTR_ID);
        assert_eq!(q.component_mask, comp::FROM_LID | comp::FROM_PORT);
        let t = Repr::parse(&q.data.0).unwrap();
        assert_eq!((t.from_lid, t.from_port), (Lid(4), 1));
    }

    #[test]
    fn view_accessors() {
        let (_, mut buf) = sa_payload(HCA2);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::TO_LID), Lid(3));
        p.set(field::TO_PORT, 7);
        p.set(field::TO_LID, Lid(0xbfff));
        assert_eq!(buf[..6], [0, 4, 1, 7, 0xbf, 0xff]);
    }

    #[test]
    fn reserved_and_short() {
        let (_, payload) = sa_payload(HCA2);
        assert!(matches!(
            Repr::parse(&payload[..5]),
            Err(Error::Truncated {
                need: 6,
                got: 5,
                ..
            })
        ));
        let r = Repr::parse(&payload).unwrap();
        assert!(r.emit(&mut [0u8; 5]).is_err());
        // The padding is not part of the record.
        let mut padded = payload.clone();
        padded[7] = 0xff;
        assert_eq!(Repr::parse(&padded).unwrap(), r);
        assert!(
            Packet::new_checked(&padded[..])
                .unwrap()
                .check_reserved()
                .is_ok()
        );
    }

    #[test]
    fn json() {
        let (_, payload) = sa_payload(HCA2);
        let v = serde_json::to_value(Repr::parse(&payload).unwrap()).unwrap();
        assert_eq!(v["from_lid"], 4);
        assert_eq!(v["to_lid"], 3);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, LEN)) {
            let out = crate::test_vectors::any_bytes::<Repr>(&b)?;
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
        }
    }
}
