//! PathRecord (IBA 15.2.5.16): how to reach one port from another. 64 bytes.
//!
//! Also home of the path property codes that PathRecord, MultiPathRecord and MCMemberRecord
//! share: [`Selector`], [`Mtu`], [`Rate`] and the packet lifetime code.

use crate::attr::SaAttrId;
use crate::bits::{wire_enum, wire_struct};
use crate::service_record::ServiceId;
use crate::{Gid, Lid, PKey, Sl};

/// SA attribute id of PathRecord.
pub const ATTR_ID: u16 = SaAttrId::PathRecord.to_raw_value();

wire_enum! {
    /// How a query's MTU, rate or packet lifetime compares with the path's (2 bits).
    pub enum Selector: u8 {
        GreaterThan = 0,
        LessThan = 1,
        Exactly = 2,
        /// The largest available (for packet lifetime: the smallest).
        Largest = 3,
    }
}

pub use crate::link::{Mtu, Rate};

/// The duration a packet lifetime code stands for, in nanoseconds: 4.096 us x 2^code,
/// saturating at `u64::MAX`.
pub const fn packet_life_time_ns(code: u8) -> u64 {
    let code = code & 0x3f;
    if code >= 52 {
        return u64::MAX;
    }
    4096u64 << code
}

wire_struct! {
    /// PathRecord.
    struct "PathRecord", 64;
    fields {
        service_id: ServiceId = SERVICE_ID @ 0, 64;
        dgid: Gid = DGID @ 64, 128;
        sgid: Gid = SGID @ 192, 128;
        dlid: Lid = DLID @ 320, 16;
        slid: Lid = SLID @ 336, 16;
        /// The path carries raw (non-IBA transport) packets.
        raw_traffic: bool = RAW_TRAFFIC @ 352, 1;
        flow_label: u32 = FLOW_LABEL @ 356, 20;
        hop_limit: u8 = HOP_LIMIT @ 376, 8;
        tclass: u8 = TCLASS @ 384, 8;
        reversible: bool = REVERSIBLE @ 392, 1;
        /// In queries, the maximum number of paths to return; undefined in responses.
        numb_path: u8 = NUMB_PATH @ 393, 7;
        p_key: PKey = P_KEY @ 400, 16;
        qos_class: u16 = QOS_CLASS @ 416, 12;
        sl: Sl = SL @ 428, 4;
        mtu_selector: Selector = MTU_SELECTOR @ 432, 2;
        mtu: Mtu = MTU @ 434, 6;
        rate_selector: Selector = RATE_SELECTOR @ 440, 2;
        rate: Rate = RATE @ 442, 6;
        packet_life_time_selector: Selector = PACKET_LIFE_TIME_SELECTOR @ 448, 2;
        /// Exponent: 4.096 us x 2^packet_life_time (see [`packet_life_time_ns`]).
        packet_life_time: u8 = PACKET_LIFE_TIME @ 450, 6;
        /// Lower is better among the records of one answer.
        preference: u8 = PREFERENCE @ 456, 8;
    }
}

/// Component mask bits: which fields of a query record are significant.
/// The 64-bit ServiceID takes two bits (it replaced two 32-bit reserved fields).
pub mod comp {
    pub const SERVICE_ID_MSB: u64 = 1 << 0;
    pub const SERVICE_ID_LSB: u64 = 1 << 1;
    /// Both halves of the ServiceID.
    pub const SERVICE_ID: u64 = SERVICE_ID_MSB | SERVICE_ID_LSB;
    pub const DGID: u64 = 1 << 2;
    pub const SGID: u64 = 1 << 3;
    pub const DLID: u64 = 1 << 4;
    pub const SLID: u64 = 1 << 5;
    pub const RAW_TRAFFIC: u64 = 1 << 6;
    // bit 7: reserved
    pub const FLOW_LABEL: u64 = 1 << 8;
    pub const HOP_LIMIT: u64 = 1 << 9;
    pub const TCLASS: u64 = 1 << 10;
    pub const REVERSIBLE: u64 = 1 << 11;
    pub const NUMB_PATH: u64 = 1 << 12;
    pub const P_KEY: u64 = 1 << 13;
    pub const QOS_CLASS: u64 = 1 << 14;
    pub const SL: u64 = 1 << 15;
    pub const MTU_SELECTOR: u64 = 1 << 16;
    pub const MTU: u64 = 1 << 17;
    pub const RATE_SELECTOR: u64 = 1 << 18;
    pub const RATE: u64 = 1 << 19;
    pub const PACKET_LIFE_TIME_SELECTOR: u64 = 1 << 20;
    pub const PACKET_LIFE_TIME: u64 = 1 << 21;
    pub const PREFERENCE: u64 = 1 << 22;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Guid;
    use core::cmp::Ordering;

    // First record of OpenSM 3.3.23's answer to `saquery -d -d -d --src-to-dst 2:1`, run on
    // "Hca2" of ibsim's net.2sw2path4hca (LID 2 is Switch1's port 0, LID 1 is Hca1).
    const BYTES: [u8; 64] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x80, 0xff, 0xff, 0x00, 0x00, 0x83, 0x83, 0x92, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    // The query record saquery sent for the answer above (component mask 0x1030).
    const QUERY: [u8; 64] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    // OpenSM's answer to a Get(PathRecord) by SGID/DGID from Hca2 (fe80::10:4) to Hca1
    // (fe80::10:1), same fabric: both ends are CAs, so the MTU is 2048.
    const CA_TO_CA: [u8; 64] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x04, 0x00, 0x01, 0x00, 0x04, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x80, 0xff, 0xff, 0x00, 0x00, 0x84, 0x83, 0x92, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    const PREFIX: u64 = 0xfe80_0000_0000_0000;

    fn repr() -> Repr {
        Repr {
            service_id: ServiceId(0),
            dgid: Gid::new(PREFIX, Guid(0x10_0001)),
            sgid: Gid::new(PREFIX, Guid(0x20_0000)),
            dlid: Lid(1),
            slid: Lid(2),
            raw_traffic: false,
            flow_label: 0,
            hop_limit: 0,
            tclass: 0,
            reversible: true,
            numb_path: 0,
            p_key: PKey(0xffff),
            qos_class: 0,
            sl: Sl(0),
            mtu_selector: Selector::Exactly,
            mtu: Mtu::Mtu1024,
            rate_selector: Selector::Exactly,
            rate: Rate::Gbps10,
            packet_life_time_selector: Selector::Exactly,
            packet_life_time: 18,
            preference: 0,
        }
    }

    #[test]
    fn parse_and_emit() {
        assert_eq!(Repr::parse(&BYTES).unwrap(), repr());
        let mut out = [0xa5u8; 64];
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
    fn query_record_and_mask() {
        let q = Repr::parse(&QUERY).unwrap();
        assert_eq!((q.dlid, q.slid, q.numb_path), (Lid(1), Lid(2), 0x7f));
        assert!(!q.reversible);
        assert_eq!(comp::DLID | comp::SLID | comp::NUMB_PATH, 0x1030);
        let mut out = [0xa5u8; 64];
        q.emit(&mut out).unwrap();
        assert_eq!(out, QUERY);
    }

    #[test]
    fn ca_to_ca() {
        let r = Repr::parse(&CA_TO_CA).unwrap();
        assert_eq!((r.slid, r.dlid), (Lid(4), Lid(1)));
        assert_eq!(r.mtu, Mtu::Mtu2048);
        assert_eq!(r.mtu.bytes(), Some(2048));
        let mut out = [0u8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(out, CA_TO_CA);
    }

    #[test]
    fn view_accessors() {
        let mut buf = BYTES;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::RATE), Rate::Gbps10);
        assert_eq!(p.get(field::PACKET_LIFE_TIME), 18);
        p.set(field::RAW_TRAFFIC, true);
        p.set(field::FLOW_LABEL, 0xabcde);
        p.set(field::HOP_LIMIT, 0xff);
        p.set(field::SL, Sl(0xc));
        p.set(field::QOS_CLASS, 0x123);
        p.set(field::SERVICE_ID, ServiceId(0x1122_3344_5566_7788));
        assert_eq!(&buf[44..48], &[0x8a, 0xbc, 0xde, 0xff]);
        assert_eq!(&buf[52..54], &[0x12, 0x3c]);
        assert_eq!(&buf[..8], &0x1122_3344_5566_7788u64.to_be_bytes());
    }

    #[test]
    fn reserved_bits_are_reported_and_dropped() {
        let mut buf = BYTES;
        buf[44] |= 0x10; // between RawTraffic and FlowLabel
        buf[63] = 1;
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert!(matches!(
            p.check_reserved(),
            Err(crate::Error::ReservedBitsSet { offset: 44, .. })
        ));
        let mut out = [0u8; 64];
        Repr::parse(&buf).unwrap().emit(&mut out).unwrap();
        assert_eq!(out, BYTES);
    }

    #[test]
    fn unknown_codes_survive() {
        let mut buf = BYTES;
        buf[54] = 0x80 | 0x3f; // MTU code 63
        buf[55] = 0x40 | 0x30; // rate code 48
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.mtu, Mtu::Unknown(63));
        assert_eq!(r.rate_selector, Selector::LessThan);
        assert_eq!(r.rate, Rate::Unknown(48));
        let mut out = [0u8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(out, buf);
    }

    #[test]
    fn short_buffers() {
        assert!(matches!(
            Repr::parse(&BYTES[..63]),
            Err(crate::Error::Truncated {
                need: 64,
                got: 63,
                ..
            })
        ));
        assert!(matches!(
            repr().emit(&mut [0u8; 63]),
            Err(crate::Error::BufferTooSmall {
                need: 64,
                got: 63,
                ..
            })
        ));
    }

    #[test]
    fn rates_order_by_speed_not_code() {
        let mut last = 0;
        for r in Rate::ASCENDING {
            let m = r.mbps().unwrap();
            assert!(m > last, "{r} out of order");
            last = m;
        }
        // Every named code appears once in the ordered list.
        for code in 0..64u8 {
            let r = Rate::from_raw_value(code);
            assert_eq!(
                r.name().is_some(),
                Rate::ASCENDING.contains(&r),
                "code {code}"
            );
        }
        assert_eq!(
            Rate::Gbps14.cmp_speed(Rate::Gbps10),
            Some(Ordering::Greater)
        );
        assert!(Rate::Gbps14.to_raw_value() > Rate::Gbps30.to_raw_value());
        assert_eq!(Rate::Gbps14.cmp_speed(Rate::Gbps30), Some(Ordering::Less));
        assert_eq!(Rate::Gbps2_5.gbps(), Some(2.5));
        assert_eq!(Rate::from_mbps(56_000), Some(Rate::Gbps56));
        assert_eq!(Rate::Gbps10.slower(), Some(Rate::Gbps5));
        assert_eq!(Rate::Gbps10.faster(), Some(Rate::Gbps14));
        assert_eq!(Rate::Gbps2_5.slower(), None);
        assert_eq!(Rate::Gbps1200.faster(), None);
        assert_eq!(Rate::Unknown(0).cmp_speed(Rate::Gbps10), None);
    }

    #[test]
    fn life_time() {
        assert_eq!(packet_life_time_ns(0), 4096);
        assert_eq!(packet_life_time_ns(18), 4096 << 18);
        assert_eq!(packet_life_time_ns(51), 1 << 63);
        assert_eq!(packet_life_time_ns(63), u64::MAX);
    }

    #[test]
    fn json_names() {
        let v = serde_json::to_value(repr()).unwrap();
        assert_eq!(v["dgid"], "fe80:0000:0000:0000:0000:0000:0010:0001");
        assert_eq!(v["p_key"], "0xffff");
        assert_eq!(v["mtu"], "Mtu1024");
        assert_eq!(v["rate"], "Gbps10");
        assert_eq!(v["rate_selector"], "Exactly");
        assert_eq!(v["service_id"], "0x0000000000000000");
        assert_eq!(v["numb_path"], 0);
    }
}
