//! NodeRecord (IBA 15.2.5.2): the NodeInfo and NodeDescription of the node behind one LID.
//! 108 bytes; the SA pads it to 112 (attribute offset 14).

use crate::attr::SaAttrId;
use crate::bits::wire_record;
use crate::{Lid, node_description, node_info};

/// SA attribute id of NodeRecord.
pub const ATTR_ID: u16 = SaAttrId::NodeRecord.to_raw_value();

wire_record! {
    /// NodeRecord.
    struct "NodeRecord", 108;
    fields {
        /// The LID of the port the record describes (the base LID of a switch's port 0).
        lid: Lid = LID @ 0, 16;
    }
    attributes {
        node_info: node_info::Repr = NODE_INFO @ 4;
        node_description: node_description::Repr = NODE_DESCRIPTION @ 44;
    }
}

/// Component mask bits, in field order: the record's own, then one per NodeInfo field, then
/// the NodeDescription.
pub mod comp {
    pub const LID: u64 = 1 << 0;
    // bit 1: reserved
    pub const BASE_VERSION: u64 = 1 << 2;
    pub const CLASS_VERSION: u64 = 1 << 3;
    pub const NODE_TYPE: u64 = 1 << 4;
    pub const NUM_PORTS: u64 = 1 << 5;
    pub const SYSTEM_IMAGE_GUID: u64 = 1 << 6;
    pub const NODE_GUID: u64 = 1 << 7;
    pub const PORT_GUID: u64 = 1 << 8;
    pub const PARTITION_CAP: u64 = 1 << 9;
    pub const DEVICE_ID: u64 = 1 << 10;
    pub const REVISION: u64 = 1 << 11;
    pub const LOCAL_PORT_NUM: u64 = 1 << 12;
    pub const VENDOR_ID: u64 = 1 << 13;
    pub const NODE_DESCRIPTION: u64 = 1 << 14;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_info::NodeType;
    use crate::test_vectors::{bytes, expect, sa_payload};
    use crate::{Error, Guid, sa};

    // `saquery NR 4` run on Hca1 of ibsim's net.2sw2path4hca with OpenSM 3.3.23 as SA: the
    // request (component mask LID) and the answer, one record for Hca2.
    const REQ: &str = include_str!("../tests/vectors/sa_noderecord.req.mad");
    const HCA: &str = include_str!("../tests/vectors/sa_noderecord.resp.mad");
    // `saquery NR 1` on the same fabric: Switch1's port 0.
    const SWITCH: &str = include_str!("../tests/vectors/sa_noderecord_switch.resp.mad");

    fn hca2() -> Repr {
        Repr {
            lid: Lid(4),
            node_info: node_info::Repr {
                base_version: 1,
                class_version: 1,
                node_type: NodeType::Ca,
                num_ports: 2,
                system_image_guid: Guid(0x10_0003),
                node_guid: Guid(0x10_0003),
                port_guid: Guid(0x10_0004),
                partition_cap: 64,
                device_id: 0,
                revision: 0xa1,
                local_port_num: 1,
                vendor_id: 0,
            },
            node_description: node_description::Repr::new("Hca2"),
        }
    }

    #[test]
    fn parse_and_emit() {
        let (offset, payload) = sa_payload(HCA);
        assert_eq!(offset, 14);
        assert_eq!(payload.len(), 112);
        let r = Repr::parse(&payload).unwrap();
        assert_eq!(r, hca2());
        assert_eq!(
            r.node_description.as_string(),
            expect(HCA, "node_description.node_string").unwrap()
        );
        let mut out = [0xa5u8; 112];
        r.emit(&mut out).unwrap();
        assert_eq!(out[..LEN], payload[..LEN]);
        assert_eq!(out[LEN..], [0xa5; 4], "emit stays inside the record");
        // OpenSM's padding: the same attribute offset and zeroed tail.
        assert_eq!(sa::pack_records(&[r]).unwrap(), (offset, payload));
        assert!(
            Packet::new_checked(&out[..])
                .unwrap()
                .check_reserved()
                .is_ok()
        );

        let (_, payload) = sa_payload(SWITCH);
        let s = Repr::parse(&payload).unwrap();
        assert_eq!(s.lid, Lid(1));
        assert_eq!(s.node_info.node_type, NodeType::Switch);
        assert_eq!(s.node_info.num_ports, 8);
        assert_eq!(s.node_info.port_guid, Guid(0x20_0000));
        assert_eq!(s.node_info.local_port_num, 0);
        assert_eq!(s.node_description.as_string(), "Switch1");
        s.emit(&mut out).unwrap();
        assert_eq!(out[..LEN], payload[..LEN]);
    }

    #[test]
    fn query_template() {
        let b = bytes(REQ);
        let q = sa::Repr::parse(&b).unwrap();
        assert_eq!(q.attr_id, ATTR_ID);
        assert_eq!(q.component_mask, comp::LID);
        let r = Repr::parse(&q.data.0).unwrap();
        assert_eq!(
            r,
            Repr {
                lid: Lid(4),
                ..Repr::default()
            }
        );
    }

    #[test]
    fn view_accessors() {
        let (_, mut buf) = sa_payload(HCA);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::LID), Lid(4));
        assert_eq!(&p.attribute(field::NODE_DESCRIPTION)[..4], b"Hca2");
        p.set(field::LID, Lid(0x1234));
        p.attribute_mut(field::NODE_INFO)[2] = 3;
        assert_eq!(&buf[..7], &[0x12, 0x34, 0, 0, 1, 1, 3]);
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.node_info.node_type, NodeType::Router);
    }

    #[test]
    fn reserved_and_unknown() {
        let (_, mut buf) = sa_payload(HCA);
        buf[2] = 0x80;
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet {
                offset: 2,
                after: "lid",
                ..
            })
        ));
        buf[2] = 0;
        buf[6] = 0x7f; // node type 127
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.node_info.node_type, NodeType::Unknown(0x7f));
        let mut out = [0u8; LEN];
        r.emit(&mut out).unwrap();
        assert_eq!(out[..], buf[..LEN]);
    }

    #[test]
    fn short_buffers() {
        let (_, payload) = sa_payload(HCA);
        assert!(matches!(
            Repr::parse(&payload[..LEN - 1]),
            Err(Error::Truncated {
                need: 108,
                got: 107,
                ..
            })
        ));
        assert!(matches!(
            hca2().emit(&mut [0u8; LEN - 1]),
            Err(Error::BufferTooSmall {
                need: 108,
                got: 107,
                ..
            })
        ));
        assert!(Packet::new_checked(&payload[..50]).is_err());
    }

    #[test]
    fn component_mask() {
        assert_eq!(comp::NODE_GUID, 0x80);
        assert_eq!(comp::NODE_DESCRIPTION, 0x4000);
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(hca2()).unwrap();
        assert_eq!(v["lid"], 4);
        assert_eq!(v["node_info"]["node_type"], "Ca");
        assert_eq!(v["node_info"]["port_guid"], "0x0000000000100004");
        assert_eq!(v["node_description"]["node_string"], "Hca2");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, LEN)) {
            let out = crate::test_vectors::any_bytes::<Repr>(&b)?;
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
        }
    }
}
