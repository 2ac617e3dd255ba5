//! MultiPathRecord (IBA 15.2.5.20): a GetMulti query for paths between sets of ports.
//! A 24-byte header, then `sgid_count` source GIDs and `dgid_count` destination GIDs.
//!
//! The GID list is variable in the specification; like OpenSM we take as many as fit the
//! 200-byte SA data field of one MAD ([`MAX_GIDS`] = 11), so [`LEN`] is 200. `parse` needs
//! only the header and the GIDs the counts announce; `emit` writes all 200 bytes, zeroing
//! the unused slots. The ServiceID is split on the wire (8 + 56 bits) and whole in `Repr`.

use crate::attr::SaAttrId;
use crate::bits::Field;
use crate::bits::{packet_view, wire_via_inherent};
use crate::path_record::{Mtu, Rate, Selector};
use crate::service_record::ServiceId;
use crate::{Error, Gid, PKey, Result, Sl};

/// SA attribute id of MultiPathRecord.
pub const ATTR_ID: u16 = SaAttrId::MultiPathRecord.to_raw_value();

/// Bytes before the GID list.
pub const HEADER_LEN: usize = 24;

/// Most GIDs (sources plus destinations) one record carries.
pub const MAX_GIDS: usize = 11;

/// Length on the wire with the GID list full.
pub const LEN: usize = HEADER_LEN + 16 * MAX_GIDS;

/// Bit layout of the header (spec bit numbering).
pub mod field {
    use super::*;

    pub const RAW_TRAFFIC: Field<bool> = Field::new("raw_traffic", 0, 1);
    pub const FLOW_LABEL: Field<u32> = Field::new("flow_label", 4, 20);
    pub const HOP_LIMIT: Field<u8> = Field::new("hop_limit", 24, 8);
    pub const TCLASS: Field<u8> = Field::new("tclass", 32, 8);
    pub const REVERSIBLE: Field<bool> = Field::new("reversible", 40, 1);
    pub const NUMB_PATH: Field<u8> = Field::new("numb_path", 41, 7);
    pub const P_KEY: Field<PKey> = Field::new("p_key", 48, 16);
    pub const QOS_CLASS: Field<u16> = Field::new("qos_class", 64, 12);
    pub const SL: Field<Sl> = Field::new("sl", 76, 4);
    pub const MTU_SELECTOR: Field<Selector> = Field::new("mtu_selector", 80, 2);
    pub const MTU: Field<Mtu> = Field::new("mtu", 82, 6);
    pub const RATE_SELECTOR: Field<Selector> = Field::new("rate_selector", 88, 2);
    pub const RATE: Field<Rate> = Field::new("rate", 90, 6);
    pub const PACKET_LIFE_TIME_SELECTOR: Field<Selector> =
        Field::new("packet_life_time_selector", 96, 2);
    pub const PACKET_LIFE_TIME: Field<u8> = Field::new("packet_life_time", 98, 6);
    pub const SERVICE_ID_8MSB: Field<u8> = Field::new("service_id_8msb", 104, 8);
    pub const INDEPENDENCE_SELECTOR: Field<u8> = Field::new("independence_selector", 112, 2);
    pub const SGID_COUNT: Field<u8> = Field::new("sgid_count", 120, 8);
    pub const DGID_COUNT: Field<u8> = Field::new("dgid_count", 128, 8);
    pub const SERVICE_ID_56LSB: Field<u64> = Field::new("service_id_56lsb", 136, 56);

    /// GID `i` of the list (sources first, then destinations), `i < MAX_GIDS`.
    pub const fn sdgid(i: usize) -> Field<Gid> {
        assert!(i < MAX_GIDS);
        Field::new("sdgid", 192 + 128 * i, 128)
    }

    /// Every header field as (name, bit offset, bit width); other header bits are reserved.
    pub const ALL: &[(&str, usize, usize)] = &[
        ("raw_traffic", 0, 1),
        ("flow_label", 4, 20),
        ("hop_limit", 24, 8),
        ("tclass", 32, 8),
        ("reversible", 40, 1),
        ("numb_path", 41, 7),
        ("p_key", 48, 16),
        ("qos_class", 64, 12),
        ("sl", 76, 4),
        ("mtu_selector", 80, 2),
        ("mtu", 82, 6),
        ("rate_selector", 88, 2),
        ("rate", 90, 6),
        ("packet_life_time_selector", 96, 2),
        ("packet_life_time", 98, 6),
        ("service_id_8msb", 104, 8),
        ("independence_selector", 112, 2),
        ("sgid_count", 120, 8),
        ("dgid_count", 128, 8),
        ("service_id_56lsb", 136, 56),
    ];
}

/// Component mask bits, in field order.
pub mod comp {
    pub const RAW_TRAFFIC: u64 = 1 << 0;
    // bit 1: reserved
    pub const FLOW_LABEL: u64 = 1 << 2;
    pub const HOP_LIMIT: u64 = 1 << 3;
    pub const TCLASS: u64 = 1 << 4;
    pub const REVERSIBLE: u64 = 1 << 5;
    pub const NUMB_PATH: u64 = 1 << 6;
    pub const P_KEY: u64 = 1 << 7;
    pub const QOS_CLASS: u64 = 1 << 8;
    pub const SL: u64 = 1 << 9;
    pub const MTU_SELECTOR: u64 = 1 << 10;
    pub const MTU: u64 = 1 << 11;
    pub const RATE_SELECTOR: u64 = 1 << 12;
    pub const RATE: u64 = 1 << 13;
    pub const PACKET_LIFE_TIME_SELECTOR: u64 = 1 << 14;
    pub const PACKET_LIFE_TIME: u64 = 1 << 15;
    pub const SERVICE_ID_8MSB: u64 = 1 << 16;
    pub const INDEPENDENCE_SELECTOR: u64 = 1 << 17;
    // bit 18: reserved
    pub const SGID_COUNT: u64 = 1 << 19;
    pub const DGID_COUNT: u64 = 1 << 20;
    pub const SERVICE_ID_56LSB: u64 = 1 << 21;
    /// Both parts of the ServiceID.
    pub const SERVICE_ID: u64 = SERVICE_ID_8MSB | SERVICE_ID_56LSB;
}

packet_view! {
    /// Zero-copy view over a full [`LEN`]-byte record, so that every accessor, GID slots
    /// included, stays inside it.
    view "MultiPathRecord", LEN
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Reads one field.
    #[inline]
    pub fn get<V: crate::WireValue>(&self, f: Field<V>) -> V {
        f.get(self.buffer.as_ref())
    }

    /// The ServiceID, put together from its two parts.
    pub fn service_id(&self) -> ServiceId {
        ServiceId(
            (u64::from(self.get(field::SERVICE_ID_8MSB)) << 56) | self.get(field::SERVICE_ID_56LSB),
        )
    }

    /// Fails on the first reserved header bit that is set.
    pub fn check_reserved(&self) -> Result<()> {
        crate::bits::check_reserved(
            "MultiPathRecord",
            self.buffer.as_ref(),
            HEADER_LEN,
            field::ALL,
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes one field.
    #[inline]
    pub fn set<V: crate::WireValue>(&mut self, f: Field<V>, v: V) {
        f.set(self.buffer.as_mut(), v)
    }

    /// Writes the ServiceID into its two parts.
    pub fn set_service_id(&mut self, id: ServiceId) {
        self.set(field::SERVICE_ID_8MSB, (id.0 >> 56) as u8);
        self.set(field::SERVICE_ID_56LSB, id.0);
    }
}

fn truncated(need: usize, got: usize) -> Error {
    Error::Truncated {
        what: "MultiPathRecord",
        need,
        got,
    }
}

fn gid_total(sgid_count: u8, dgid_count: u8) -> Result<usize> {
    let n = usize::from(sgid_count) + usize::from(dgid_count);
    if n > MAX_GIDS {
        return Err(Error::InvalidField {
            what: "MultiPathRecord",
            field: "sgid_count + dgid_count",
            value: n as u64,
        });
    }
    Ok(n)
}

/// MultiPathRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Repr {
    pub raw_traffic: bool,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub tclass: u8,
    pub reversible: bool,
    /// The maximum number of paths to return.
    pub numb_path: u8,
    pub p_key: PKey,
    pub qos_class: u16,
    pub sl: Sl,
    pub mtu_selector: Selector,
    pub mtu: Mtu,
    pub rate_selector: Selector,
    pub rate: Rate,
    pub packet_life_time_selector: Selector,
    pub packet_life_time: u8,
    pub service_id: ServiceId,
    /// How independent the returned paths must be (2 bits).
    pub independence_selector: u8,
    /// Source GIDs: the first `sgid_count` entries of `gids`.
    pub sgid_count: u8,
    /// Destination GIDs: the `dgid_count` entries after the sources.
    pub dgid_count: u8,
    /// The GID list; entries past the counts are zero after `parse` and ignored by `emit`.
    pub gids: [Gid; MAX_GIDS],
}

impl Repr {
    /// A query from `sgids` to `dgids` with every other field zero.
    pub fn between(sgids: &[Gid], dgids: &[Gid]) -> Result<Repr> {
        let too_many = |field, n: usize| Error::InvalidField {
            what: "MultiPathRecord",
            field,
            value: n as u64,
        };
        let s = u8::try_from(sgids.len()).map_err(|_| too_many("sgid_count", sgids.len()))?;
        let d = u8::try_from(dgids.len()).map_err(|_| too_many("dgid_count", dgids.len()))?;
        gid_total(s, d)?;
        let mut r = Repr {
            sgid_count: s,
            dgid_count: d,
            ..Repr::default()
        };
        for (slot, g) in r.gids.iter_mut().zip(sgids.iter().chain(dgids)) {
            *slot = *g;
        }
        Ok(r)
    }

    /// The source GIDs.
    pub fn sgids(&self) -> &[Gid] {
        let s = usize::from(self.sgid_count).min(MAX_GIDS);
        &self.gids[..s]
    }

    /// The destination GIDs.
    pub fn dgids(&self) -> &[Gid] {
        let s = usize::from(self.sgid_count).min(MAX_GIDS);
        let e = (s + usize::from(self.dgid_count)).min(MAX_GIDS);
        &self.gids[s..e]
    }

    /// Parses the header and the GIDs it announces (the buffer may end after them);
    /// reserved bits are ignored.
    pub fn parse(buf: &[u8]) -> Result<Repr> {
        let got = buf.len();
        if got < HEADER_LEN {
            return Err(truncated(HEADER_LEN, got));
        }
        let n = gid_total(field::SGID_COUNT.get(buf), field::DGID_COUNT.get(buf))?;
        let need = HEADER_LEN + 16 * n;
        if got < need {
            return Err(truncated(need, got));
        }
        let p = Packet::new_unchecked(buf);
        let mut r = Repr {
            raw_traffic: p.get(field::RAW_TRAFFIC),
            flow_label: p.get(field::FLOW_LABEL),
            hop_limit: p.get(field::HOP_LIMIT),
            tclass: p.get(field::TCLASS),
            reversible: p.get(field::REVERSIBLE),
            numb_path: p.get(field::NUMB_PATH),
            p_key: p.get(field::P_KEY),
            qos_class: p.get(field::QOS_CLASS),
            sl: p.get(field::SL),
            mtu_selector: p.get(field::MTU_SELECTOR),
            mtu: p.get(field::MTU),
            rate_selector: p.get(field::RATE_SELECTOR),
            rate: p.get(field::RATE),
            packet_life_time_selector: p.get(field::PACKET_LIFE_TIME_SELECTOR),
            packet_life_time: p.get(field::PACKET_LIFE_TIME),
            service_id: p.service_id(),
            independence_selector: p.get(field::INDEPENDENCE_SELECTOR),
            sgid_count: p.get(field::SGID_COUNT),
            dgid_count: p.get(field::DGID_COUNT),
            gids: [Gid::default(); MAX_GIDS],
        };
        for (i, g) in r.gids.iter_mut().enumerate().take(n) {
            *g = p.get(field::sdgid(i));
        }
        Ok(r)
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the whole 200-byte record; reserved bits and unused GID slots are zeroed.
    /// Fails if the counts exceed [`MAX_GIDS`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let n = gid_total(self.sgid_count, self.dgid_count)?;
        let got = buf.len();
        if got < LEN {
            return Err(Error::BufferTooSmall {
                what: "MultiPathRecord",
                need: LEN,
                got,
            });
        }
        let buf = &mut buf[..LEN];
        buf.fill(0);
        let mut p = Packet { buffer: buf };
        p.set(field::RAW_TRAFFIC, self.raw_traffic);
        p.set(field::FLOW_LABEL, self.flow_label);
        p.set(field::HOP_LIMIT, self.hop_limit);
        p.set(field::TCLASS, self.tclass);
        p.set(field::REVERSIBLE, self.reversible);
        p.set(field::NUMB_PATH, self.numb_path);
        p.set(field::P_KEY, self.p_key);
        p.set(field::QOS_CLASS, self.qos_class);
        p.set(field::SL, self.sl);
        p.set(field::MTU_SELECTOR, self.mtu_selector);
        p.set(field::MTU, self.mtu);
        p.set(field::RATE_SELECTOR, self.rate_selector);
        p.set(field::RATE, self.rate);
        p.set(
            field::PACKET_LIFE_TIME_SELECTOR,
            self.packet_life_time_selector,
        );
        p.set(field::PACKET_LIFE_TIME, self.packet_life_time);
        p.set_service_id(self.service_id);
        p.set(field::INDEPENDENCE_SELECTOR, self.independence_selector);
        p.set(field::SGID_COUNT, self.sgid_count);
        p.set(field::DGID_COUNT, self.dgid_count);
        for (i, g) in self.gids.iter().enumerate().take(n) {
            p.set(field::sdgid(i), *g);
        }
        Ok(())
    }
}

wire_via_inherent!("MultiPathRecord", LEN);

impl serde::Serialize for Repr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("MultiPathRecord", 21)?;
        st.serialize_field("raw_traffic", &self.raw_traffic)?;
        st.serialize_field("flow_label", &self.flow_label)?;
        st.serialize_field("hop_limit", &self.hop_limit)?;
        st.serialize_field("tclass", &self.tclass)?;
        st.serialize_field("reversible", &self.reversible)?;
        st.serialize_field("numb_path", &self.numb_path)?;
        st.serialize_field("p_key", &self.p_key)?;
        st.serialize_field("qos_class", &self.qos_class)?;
        st.serialize_field("sl", &self.sl)?;
        st.serialize_field("mtu_selector", &self.mtu_selector)?;
        st.serialize_field("mtu", &self.mtu)?;
        st.serialize_field("rate_selector", &self.rate_selector)?;
        st.serialize_field("rate", &self.rate)?;
        st.serialize_field("packet_life_time_selector", &self.packet_life_time_selector)?;
        st.serialize_field("packet_life_time", &self.packet_life_time)?;
        st.serialize_field("service_id", &self.service_id)?;
        st.serialize_field("independence_selector", &self.independence_selector)?;
        st.serialize_field("sgid_count", &self.sgid_count)?;
        st.serialize_field("dgid_count", &self.dgid_count)?;
        st.serialize_field("sgids", self.sgids())?;
        st.serialize_field("dgids", self.dgids())?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Guid;

    // Built by hand from the specification: a GetMulti query from fe80::10:4 (Hca2) to
    // fe80::10:1 (Hca1) with NumbPath 1 and component mask NumbPath | SGIDCount | DGIDCount.
    // Sent to OpenSM 3.3.23 on ibsim's net.2sw2path4hca, it was answered with the PathRecord
    // LID 4 -> LID 1, which confirms the header layout and GID position.
    const QUERY: [u8; 56] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x04, 0xfe, 0x80, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01,
    ];

    const PREFIX: u64 = 0xfe80_0000_0000_0000;

    fn query() -> Repr {
        let mut r = Repr::between(
            &[Gid::new(PREFIX, Guid(0x10_0004))],
            &[Gid::new(PREFIX, Guid(0x10_0001))],
        )
        .unwrap();
        r.numb_path = 1;
        r.p_key = PKey(0xffff);
        r
    }

    #[test]
    fn parse_and_emit() {
        let r = Repr::parse(&QUERY).unwrap();
        assert_eq!(r, query());
        assert_eq!(r.sgids(), &[Gid::new(PREFIX, Guid(0x10_0004))]);
        assert_eq!(r.dgids(), &[Gid::new(PREFIX, Guid(0x10_0001))]);
        let mut out = [0xa5u8; LEN];
        query().emit(&mut out).unwrap();
        assert_eq!(out[..56], QUERY);
        assert!(out[56..].iter().all(|&b| b == 0));
        assert_eq!(
            comp::NUMB_PATH | comp::SGID_COUNT | comp::DGID_COUNT,
            0x18_0040
        );
    }

    #[test]
    fn full_list_and_split_service_id() {
        let gids: Vec<Gid> = (0..MAX_GIDS as u64)
            .map(|i| Gid::new(PREFIX, Guid(0x100 + i)))
            .collect();
        let mut r = Repr::between(&gids[..4], &gids[4..]).unwrap();
        r.service_id = ServiceId(0x1122_3344_5566_7788);
        r.raw_traffic = true;
        r.flow_label = 0xfffff;
        r.independence_selector = 3;
        r.rate = Rate::Gbps100;
        r.mtu = Mtu::Mtu4096;
        let mut buf = [0u8; LEN];
        r.emit(&mut buf).unwrap();
        assert_eq!(buf[13], 0x11);
        assert_eq!(&buf[17..24], &[0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
        assert_eq!(buf[14], 0xc0);
        assert_eq!(&buf[..4], &[0x8f, 0xff, 0xff, 0x00]);
        assert_eq!(&buf[184..200], &gids[10].0);
        let back = Repr::parse(&buf).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.dgids().len(), 7);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.service_id(), ServiceId(0x1122_3344_5566_7788));
        assert!(p.check_reserved().is_ok());
    }

    #[test]
    fn view_accessors() {
        let mut buf = [0u8; LEN];
        buf[..56].copy_from_slice(&QUERY);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::SGID_COUNT), 1);
        assert_eq!(p.get(field::sdgid(1)), Gid::new(PREFIX, Guid(0x10_0001)));
        p.set(field::SL, Sl(5));
        p.set(field::REVERSIBLE, true);
        p.set_service_id(ServiceId(0xaa00_0000_0000_00bb));
        assert_eq!(buf[9], 0x05);
        assert_eq!(buf[5], 0x81);
        assert_eq!((buf[13], buf[23]), (0xaa, 0xbb));
    }

    #[test]
    fn counts_are_checked() {
        let mut buf = [0u8; LEN];
        buf[..56].copy_from_slice(&QUERY);
        buf[15] = 6;
        buf[16] = 6;
        assert!(matches!(
            Repr::parse(&buf),
            Err(Error::InvalidField { value: 12, .. })
        ));
        let r = Repr {
            sgid_count: 11,
            dgid_count: 1,
            ..Repr::default()
        };
        assert!(r.emit(&mut buf).is_err());
        let many = [Gid::default(); 12];
        assert!(Repr::between(&many, &[]).is_err());
        // Accessors stay in bounds even for inconsistent counts.
        assert_eq!(r.sgids().len(), 11);
        assert_eq!(r.dgids().len(), 0);
    }

    #[test]
    fn short_buffers() {
        assert!(matches!(
            Repr::parse(&QUERY[..23]),
            Err(Error::Truncated {
                need: 24,
                got: 23,
                ..
            })
        ));
        assert!(matches!(
            Repr::parse(&QUERY[..55]),
            Err(Error::Truncated {
                need: 56,
                got: 55,
                ..
            })
        ));
        assert!(matches!(
            Packet::new_checked(&QUERY[..]),
            Err(Error::Truncated {
                need: LEN,
                got: 56,
                ..
            })
        ));
        assert!(matches!(
            query().emit(&mut [0u8; LEN - 1]),
            Err(Error::BufferTooSmall { need: LEN, .. })
        ));
    }

    #[test]
    fn reserved_and_unknown() {
        let mut buf = QUERY;
        buf[14] = 0x01; // reserved bits after IndependenceSelector
        assert!(matches!(
            Packet::new_unchecked(&buf[..]).check_reserved(),
            Err(Error::ReservedBitsSet { offset: 14, .. })
        ));
        let mut buf = QUERY;
        buf[11] = 0x3f; // rate selector GreaterThan, unknown rate 63
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.rate, Rate::Unknown(63));
        let mut out = [0u8; LEN];
        r.emit(&mut out).unwrap();
        assert_eq!(out[..56], buf);
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(query()).unwrap();
        assert_eq!(v["sgids"][0], "fe80:0000:0000:0000:0000:0000:0010:0004");
        assert_eq!(v["dgids"][0], "fe80:0000:0000:0000:0000:0000:0010:0001");
        assert_eq!(v["dgids"].as_array().unwrap().len(), 1);
        assert_eq!(v["service_id"], "0x0000000000000000");
        assert_eq!(v["numb_path"], 1);
    }

    proptest::proptest! {
        // Any input either fails cleanly or survives parse -> emit -> parse.
        #[test]
        fn arbitrary_input(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            if let Ok(r) = Repr::parse(&bytes) {
                let mut out = [0u8; LEN];
                r.emit(&mut out).unwrap();
                proptest::prop_assert_eq!(Repr::parse(&out).unwrap(), r);
            }
        }
    }
}
