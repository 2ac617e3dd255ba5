//! InformInfo (IBA 13.4.8.3): a subscription to traps/notices, sent to the SA with
//! Set(InformInfo). 36 bytes.
//!
//! Two fields change meaning with `is_generic`: TrapNumber / DeviceID and
//! ProducerType / VendorID share their bits. The `Repr` keeps the generic names; use
//! [`Repr::device_id`] and [`Repr::vendor_id`] for vendor-specific subscriptions.
//! InformInfo has no component mask: the SA takes every field of a Set.

use crate::bits::{wire_enum, wire_struct};
use crate::{Gid, Lid};

/// Attribute id of InformInfo (common to the classes that forward traps).
pub const ATTR_ID: u16 = crate::attr::INFORM_INFO;

/// LIDRangeBegin value meaning "every LID" (LIDRangeEnd is then ignored).
pub const ALL_LIDS: Lid = Lid(0xFFFF);

/// TrapNumber value meaning "every trap number".
pub const ALL_TRAPS: u16 = 0xFFFF;

wire_enum! {
    /// The notice type a subscription selects.
    pub enum NoticeType: u16 {
        Fatal = 0,
        Urgent = 1,
        Security = 2,
        SubnetManagement = 3,
        Informational = 4,
        /// Every type.
        All = 0xFFFF,
    }
}

wire_enum! {
    /// The producer type of generic notices (24 bits).
    pub enum ProducerType: u32 {
        Ca = 1,
        Switch = 2,
        Router = 3,
        ClassManager = 4,
        /// Every producer type.
        All = 0xFF_FFFF,
    }
}

wire_struct! {
    /// InformInfo.
    struct "InformInfo", 36;
    fields {
        /// The port whose notices are wanted; zero to select by LID range instead.
        gid: Gid = GID @ 0, 128;
        lid_range_begin: Lid = LID_RANGE_BEGIN @ 128, 16;
        lid_range_end: Lid = LID_RANGE_END @ 144, 16;
        /// True for generic notices; false for vendor-specific ones. The byte holds 1 or 0:
        /// its upper seven bits are reserved, so a value other than 0 or 1 fails
        /// `check_reserved` instead of being lost on emit.
        is_generic: bool = IS_GENERIC @ 183, 1;
        /// True to subscribe, false to unsubscribe (1 or 0, like IsGeneric).
        subscribe: bool = SUBSCRIBE @ 191, 1;
        r#type: NoticeType = TYPE @ 192, 16;
        /// TrapNumber if generic, else DeviceID.
        trap_number: u16 = TRAP_NUMBER @ 208, 16;
        /// The subscriber's QP for Report(Notice); the SA zeroes it in InformInfoRecords.
        qpn: u32 = QPN @ 224, 24;
        /// The subscriber's response time: 4.096 us x 2^resp_time_value.
        resp_time_value: u8 = RESP_TIME_VALUE @ 251, 5;
        /// ProducerType if generic (see [`Repr::producer`]), else VendorID.
        producer_type: u32 = PRODUCER_TYPE @ 264, 24;
    }
}

impl Repr {
    /// The producer type of a generic subscription.
    pub fn producer(&self) -> Option<ProducerType> {
        self.is_generic
            .then(|| ProducerType::from_raw_value(self.producer_type))
    }

    /// The DeviceID of a vendor-specific subscription.
    pub fn device_id(&self) -> Option<u16> {
        (!self.is_generic).then_some(self.trap_number)
    }

    /// The VendorID of a vendor-specific subscription.
    pub fn vendor_id(&self) -> Option<u32> {
        (!self.is_generic).then_some(self.producer_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // OpenSM 3.3.23's answer to Set(InformInfo) from a test client on "Hca2" of ibsim's
    // net.2sw2path4hca: generic, subscribe, all types, trap 64, every LID, QPN 1,
    // RespTimeValue 18, producer type class manager.
    const BYTES: [u8; 36] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0xff, 0xff, 0x00, 0x40, 0x00, 0x00,
        0x01, 0x12, 0x00, 0x00, 0x00, 0x04,
    ];

    fn repr() -> Repr {
        Repr {
            gid: Gid::default(),
            lid_range_begin: ALL_LIDS,
            lid_range_end: Lid(0),
            is_generic: true,
            subscribe: true,
            r#type: NoticeType::All,
            trap_number: 64,
            qpn: 1,
            resp_time_value: 18,
            producer_type: 4,
        }
    }

    #[test]
    fn parse_and_emit() {
        let r = Repr::parse(&BYTES).unwrap();
        assert_eq!(r, repr());
        assert_eq!(r.producer(), Some(ProducerType::ClassManager));
        assert_eq!(r.device_id(), None);
        let mut out = [0xa5u8; 36];
        repr().emit(&mut out).unwrap();
        assert_eq!(out, BYTES);
        assert!(
            Packet::new_checked(&BYTES[..])
                .unwrap()
                .check_reserved()
                .is_ok()
        );
    }

    #[test]
    fn vendor_view() {
        let r = Repr {
            is_generic: false,
            trap_number: 0x1003,
            producer_type: 0x02c9,
            ..repr()
        };
        assert_eq!(r.device_id(), Some(0x1003));
        assert_eq!(r.vendor_id(), Some(0x02c9));
        assert_eq!(r.producer(), None);
    }

    #[test]
    fn view_accessors() {
        let mut buf = BYTES;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::TYPE), NoticeType::All);
        assert_eq!(p.get(field::QPN), 1);
        p.set(field::QPN, 0xab_cdef);
        p.set(field::RESP_TIME_VALUE, 0x1f);
        p.set(field::PRODUCER_TYPE, 0xff_ffff);
        p.set(field::SUBSCRIBE, false);
        assert_eq!(
            &buf[28..36],
            &[0xab, 0xcd, 0xef, 0x1f, 0x00, 0xff, 0xff, 0xff]
        );
        assert_eq!(buf[23], 0);
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.producer(), Some(ProducerType::All));
    }

    #[test]
    fn reserved_and_unknown() {
        let mut buf = BYTES;
        buf[31] |= 0xe0; // the three bits between QPN and RespTimeValue
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(crate::Error::ReservedBitsSet {
                offset: 31,
                mask: 0xe0,
                ..
            })
        ));
        let mut buf = BYTES;
        buf[24..26].copy_from_slice(&[0x00, 0x07]);
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.r#type, NoticeType::Unknown(7));
        let mut out = [0u8; 36];
        r.emit(&mut out).unwrap();
        assert_eq!(out, buf);
    }

    #[test]
    fn flag_bytes_other_than_0_or_1_are_reserved() {
        // IsGeneric 2 would come back as 1: the strict check names it instead.
        let mut buf = BYTES;
        buf[22] = 2;
        assert_eq!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(crate::Error::ReservedBitsSet {
                what: "InformInfo",
                after: "lid_range_end",
                offset: 22,
                mask: 2
            })
        );
        assert!(!Repr::parse(&buf).unwrap().is_generic);
    }

    #[test]
    fn short_buffers() {
        assert!(matches!(
            Repr::parse(&BYTES[..35]),
            Err(crate::Error::Truncated {
                need: 36,
                got: 35,
                ..
            })
        ));
        assert!(repr().emit(&mut [0u8; 35]).is_err());
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(repr()).unwrap();
        assert_eq!(v["type"], "All");
        assert_eq!(v["is_generic"], true);
        assert_eq!(v["lid_range_begin"], 0xffff);
        assert_eq!(v["trap_number"], 64);
        assert_eq!(v["resp_time_value"], 18);
    }
}
