//! NodeInfo (IBA 14.2.5.3): what a node is. 40 bytes.

use crate::bits::{wire_enum, wire_struct};
use crate::{Guid, SmpAttribute};

wire_enum! {
    /// Node type.
    pub enum NodeType: u8 {
        /// Channel adapter (a host).
        Ca = 1,
        Switch = 2,
        Router = 3,
    }
}

wire_struct! {
    /// NodeInfo.
    struct "NodeInfo", 40;
    fields {
        base_version: u8 = BASE_VERSION @ 0, 8;
        class_version: u8 = CLASS_VERSION @ 8, 8;
        node_type: NodeType = NODE_TYPE @ 16, 8;
        num_ports: u8 = NUM_PORTS @ 24, 8;
        system_image_guid: Guid = SYSTEM_IMAGE_GUID @ 32, 64;
        node_guid: Guid = NODE_GUID @ 96, 64;
        /// The GUID of the port the SMP arrived on (a switch's ports share one).
        port_guid: Guid = PORT_GUID @ 160, 64;
        partition_cap: u16 = PARTITION_CAP @ 224, 16;
        device_id: u16 = DEVICE_ID @ 240, 16;
        revision: u32 = REVISION @ 256, 32;
        /// The port the SMP arrived on.
        local_port_num: u8 = LOCAL_PORT_NUM @ 288, 8;
        vendor_id: u32 = VENDOR_ID @ 296, 24;
    }
}

impl SmpAttribute for Repr {
    const ID: u16 = crate::attr::NODE_INFO;
}

#[cfg(test)]
mod tests {
    use super::*;

    // NodeInfo of ibsim's "Switch1" (net.2sw2path4hca), as returned to `smpquery -D nodeinfo 0`.
    const BYTES: [u8; 40] = [
        0x01, 0x01, 0x02, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x08,
        0x00, 0x00, 0x00, 0x00, 0x00, 0xa1, 0x00, 0x00, 0x00, 0x00,
    ];

    fn repr() -> Repr {
        Repr {
            base_version: 1,
            class_version: 1,
            node_type: NodeType::Switch,
            num_ports: 8,
            system_image_guid: Guid(0x20_0000),
            node_guid: Guid(0x20_0000),
            port_guid: Guid(0x20_0000),
            partition_cap: 8,
            device_id: 0,
            revision: 0xa1,
            local_port_num: 0,
            vendor_id: 0,
        }
    }

    #[test]
    fn parse_and_emit() {
        assert_eq!(Repr::parse(&BYTES).unwrap(), repr());
        let mut out = [0xa5u8; 40];
        repr().emit(&mut out).unwrap();
        assert_eq!(out, BYTES);
    }

    #[test]
    fn view_accessors() {
        let mut buf = BYTES;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::NODE_TYPE), NodeType::Switch);
        p.set(field::VENDOR_ID, 0x02c9);
        p.set(field::LOCAL_PORT_NUM, 3);
        assert_eq!(&buf[36..40], &[3, 0x00, 0x02, 0xc9]);
    }

    #[test]
    fn short_buffer() {
        assert!(matches!(
            Repr::parse(&BYTES[..39]),
            Err(crate::Error::Truncated {
                need: 40,
                got: 39,
                ..
            })
        ));
        let mut small = [0u8; 10];
        assert!(repr().emit(&mut small).is_err());
    }
}
