//! ClassPortInfo (IBA 13.4.8.1): what a management class supports and where its requests
//! and traps go. 72 bytes, the same layout in every class; the attribute modifier is 0.
//!
//! At 72 bytes it does not fit the 64-byte data field of an SMP, so it is carried by the
//! GSI classes (subnet administration above all) and does not implement
//! [`SmpAttribute`](crate::SmpAttribute).

use crate::bits::wire_struct;
use crate::{Gid, Lid, PKey, Sl};

/// The attribute id (the same in every class).
pub const ATTR_ID: u16 = crate::attr::CLASS_PORT_INFO;

/// CapabilityMask bits every class defines; bits 8..=15 are class specific.
pub mod cap {
    /// The class sends Trap() MADs.
    pub const IS_TRAP_SUPPORTED: u16 = 1 << 0;
    /// The class answers Get(Notice) and Set(Notice).
    pub const IS_GET_SET_NOTICE_SUPPORTED: u16 = 1 << 1;
    /// CapabilityMask2 holds class-specific capabilities.
    pub const IS_CAPABILITY_MASK2_SUPPORTED: u16 = 1 << 2;
}

wire_struct! {
    /// ClassPortInfo.
    struct "ClassPortInfo", 72;
    fields {
        base_version: u8 = BASE_VERSION @ 0, 8;
        /// The highest class version the class supports.
        class_version: u8 = CLASS_VERSION @ 8, 8;
        /// See [`cap`].
        capability_mask: u16 = CAPABILITY_MASK @ 16, 16;
        capability_mask2: u32 = CAPABILITY_MASK2 @ 32, 27;
        /// Longest expected response time: 4.096 us * 2^value.
        resp_time_value: u8 = RESP_TIME_VALUE @ 59, 5;
        redirect_gid: Gid = REDIRECT_GID @ 64, 128;
        redirect_tc: u8 = REDIRECT_TC @ 192, 8;
        redirect_sl: Sl = REDIRECT_SL @ 200, 4;
        redirect_fl: u32 = REDIRECT_FL @ 204, 20;
        redirect_lid: Lid = REDIRECT_LID @ 224, 16;
        redirect_p_key: PKey = REDIRECT_P_KEY @ 240, 16;
        redirect_qp: u32 = REDIRECT_QP @ 264, 24;
        redirect_q_key: u32 = REDIRECT_Q_KEY @ 288, 32;
        trap_gid: Gid = TRAP_GID @ 320, 128;
        trap_tc: u8 = TRAP_TC @ 448, 8;
        trap_sl: Sl = TRAP_SL @ 456, 4;
        trap_fl: u32 = TRAP_FL @ 460, 20;
        trap_lid: Lid = TRAP_LID @ 480, 16;
        trap_p_key: PKey = TRAP_P_KEY @ 496, 16;
        trap_hl: u8 = TRAP_HL @ 512, 8;
        trap_qp: u32 = TRAP_QP @ 520, 24;
        trap_q_key: u32 = TRAP_Q_KEY @ 544, 32;
    }
}

impl Repr {
    /// Whether every bit of `bits` (see [`cap`]) is set in CapabilityMask.
    pub const fn has_capability(&self, bits: u16) -> bool {
        self.capability_mask & bits == bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, Guid};

    // ibsim net.2sw2path4hca with `opensm` resident on Switch1: `saquery -c` run as Hca1,
    // the SA's answer from byte 56 of the SA MAD (class version 2, RespTimeValue 16).
    const OPENSM_SA: [u8; 72] = [
        0x01, 0x02, 0x26, 0x02, 0x00, 0x16, 0xbd, 0x10, 0x00, 0x00, 0x00, 0x00, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, //
        0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x01, 0x00, 0x00, //
    ];

    // Built by hand from the layout (no captured peer redirects or sets a trap destination):
    // every redirect and trap field non-zero and distinct.
    const EVERY_FIELD: [u8; 72] = [
        0x01, 0x01, 0x00, 0x07, 0x00, 0x00, 0x00, 0x33, // versions, masks, resp time 19
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // redirect GID prefix
        0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x12, 0x34, // redirect GID interface id
        0x12, 0x5a, 0xbc, 0xde, 0x00, 0x42, 0xff, 0xff, // TC, SL 5, FL 0xabcde, LID, P_Key
        0x00, 0x12, 0x34, 0x56, 0x80, 0x01, 0x00, 0x00, // QP, Q_Key
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // trap GID prefix
        0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x01, // trap GID interface id
        0x34, 0xf0, 0x00, 0x01, 0x00, 0x01, 0x7f, 0xff, // TC 0x34, SL 15, FL 1, LID 1, P_Key
        0xff, 0x00, 0x00, 0x01, 0x80, 0x01, 0x00, 0x00, // HL 255, QP 1, Q_Key
    ];

    fn opensm_sa() -> Repr {
        Repr {
            base_version: 1,
            class_version: 2,
            capability_mask: 0x2602,
            capability_mask2: 0xb5e8,
            resp_time_value: 16,
            redirect_qp: 1,
            redirect_q_key: 0x8001_0000,
            trap_q_key: 0x8001_0000,
            ..Repr::default()
        }
    }

    fn every_field() -> Repr {
        Repr {
            base_version: 1,
            class_version: 1,
            capability_mask: cap::IS_TRAP_SUPPORTED
                | cap::IS_GET_SET_NOTICE_SUPPORTED
                | cap::IS_CAPABILITY_MASK2_SUPPORTED,
            capability_mask2: 1,
            resp_time_value: 19,
            redirect_gid: Gid::new(0xfe80_0000_0000_0000, Guid(0x0002_c903_0000_1234)),
            redirect_tc: 0x12,
            redirect_sl: Sl(5),
            redirect_fl: 0xabcde,
            redirect_lid: Lid(0x42),
            redirect_p_key: PKey::DEFAULT,
            redirect_qp: 0x12_3456,
            redirect_q_key: 0x8001_0000,
            trap_gid: Gid::new(0xfe80_0000_0000_0000, Guid(0x0002_c903_0000_0001)),
            trap_tc: 0x34,
            trap_sl: Sl(15),
            trap_fl: 1,
            trap_lid: Lid(1),
            trap_p_key: PKey(0x7fff),
            trap_hl: 255,
            trap_qp: 1,
            trap_q_key: 0x8001_0000,
        }
    }

    #[test]
    fn parse_and_emit() {
        for (bytes, repr) in [(OPENSM_SA, opensm_sa()), (EVERY_FIELD, every_field())] {
            assert_eq!(Repr::parse(&bytes).unwrap(), repr);
            let mut out = [0xa5u8; 72];
            repr.emit(&mut out).unwrap();
            assert_eq!(out, bytes);
            assert!(
                Packet::new_checked(&bytes[..])
                    .unwrap()
                    .check_reserved()
                    .is_ok()
            );
        }
        assert!(opensm_sa().has_capability(cap::IS_GET_SET_NOTICE_SUPPORTED));
        assert!(!opensm_sa().has_capability(cap::IS_TRAP_SUPPORTED));
    }

    #[test]
    fn view_accessors() {
        let mut buf = OPENSM_SA;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::CAPABILITY_MASK2), 0xb5e8);
        assert_eq!(p.get(field::RESP_TIME_VALUE), 16);
        p.set(field::RESP_TIME_VALUE, 0x1f);
        p.set(field::TRAP_LID, Lid(7));
        p.set(field::TRAP_HL, 64);
        assert_eq!(&buf[4..8], &[0x00, 0x16, 0xbd, 0x1f]);
        assert_eq!(&buf[60..62], &[0x00, 0x07]);
        assert_eq!(&buf[64..68], &[0x40, 0x00, 0x00, 0x00]);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set(field::TRAP_GID, Gid::new(1, Guid(2)));
        assert_eq!(buf[47], 1);
        assert_eq!(buf[55], 2);
    }

    #[test]
    fn reserved_bits() {
        let mut buf = EVERY_FIELD;
        buf[32] = 0x01; // the byte before RedirectQP
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet {
                offset: 32,
                after: "redirect_p_key",
                ..
            })
        ));
        let mut out = [0u8; 72];
        Repr::parse(&buf).unwrap().emit(&mut out).unwrap();
        assert_eq!(out, EVERY_FIELD);
    }

    #[test]
    fn short_buffers() {
        // An SMP's 64-byte data field cannot hold it.
        assert!(matches!(
            Repr::parse(&OPENSM_SA[..64]),
            Err(Error::Truncated {
                what: "ClassPortInfo",
                need: 72,
                got: 64
            })
        ));
        let mut small = [0u8; 71];
        assert!(matches!(
            every_field().emit(&mut small),
            Err(Error::BufferTooSmall {
                need: 72,
                got: 71,
                ..
            })
        ));
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(every_field()).unwrap();
        assert_eq!(v["redirect_gid"], "fe80:0000:0000:0000:0002:c903:0000:1234");
        assert_eq!(v["trap_p_key"], "0x7fff");
        assert_eq!(v["capability_mask2"], 1);
    }

    proptest::proptest! {
        // Any input parses; emit keeps every field and clears only reserved bits.
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, 72)) {
            let r = Repr::parse(&b).unwrap();
            let mut out = [0xa5u8; 72];
            r.emit(&mut out).unwrap();
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
            for (o, i) in out.iter().zip(&b) {
                proptest::prop_assert_eq!(o & !i, 0);
            }
            proptest::prop_assert_eq!(Repr::parse(&out).unwrap(), r);
        }
    }
}
