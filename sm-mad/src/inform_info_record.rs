//! InformInfoRecord (IBA 15.2.5.12): one subscription as the SA lists it. 60 bytes
//! (the SA pads it to 64 with the attribute offset).

use crate::attr::SaAttrId;
use crate::bits::Field;
use crate::bits::wire_via_inherent;
use crate::{Error, Gid, Result, inform_info};

/// SA attribute id of InformInfoRecord.
pub const ATTR_ID: u16 = SaAttrId::InformInfoRecord.to_raw_value();

/// Length on the wire.
pub const LEN: usize = 60;

/// Bit layout (spec bit numbering). Bytes 18..24 are reserved.
pub mod field {
    use super::*;

    pub const SUBSCRIBER_GID: Field<Gid> = Field::new("subscriber_gid", 0, 128);
    pub const ENUM: Field<u16> = Field::new("enum", 128, 16);
    /// The embedded InformInfo.
    pub const INFORM_INFO: core::ops::Range<usize> = 24..60;

    /// Every field as (name, bit offset, bit width); all other bits are reserved
    /// (the InformInfo's own reserved bits are checked by its view).
    pub const ALL: &[(&str, usize, usize)] = &[
        ("subscriber_gid", 0, 128),
        ("enum", 128, 16),
        ("inform_info", 192, 288),
    ];
}

/// Component mask bits: the record's own fields, then the InformInfo's, flattened.
pub mod comp {
    pub const SUBSCRIBER_GID: u64 = 1 << 0;
    pub const ENUM: u64 = 1 << 1;
    // bit 2: reserved
    pub const GID: u64 = 1 << 3;
    pub const LID_RANGE_BEGIN: u64 = 1 << 4;
    pub const LID_RANGE_END: u64 = 1 << 5;
    // bit 6: reserved
    pub const IS_GENERIC: u64 = 1 << 7;
    pub const SUBSCRIBE: u64 = 1 << 8;
    pub const TYPE: u64 = 1 << 9;
    pub const TRAP_NUMBER: u64 = 1 << 10;
    /// Same bit as [`TRAP_NUMBER`] (vendor-specific subscriptions).
    pub const DEVICE_ID: u64 = TRAP_NUMBER;
    pub const QPN: u64 = 1 << 11;
    // bit 12: reserved
    pub const RESP_TIME_VALUE: u64 = 1 << 13;
    // bit 14: reserved
    pub const PRODUCER_TYPE: u64 = 1 << 15;
    /// Same bit as [`PRODUCER_TYPE`] (vendor-specific subscriptions).
    pub const VENDOR_ID: u64 = PRODUCER_TYPE;
}

/// Zero-copy view over a buffer holding an InformInfoRecord.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer after checking that the whole record lies inside it.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let got = buffer.as_ref().len();
        if got < LEN {
            return Err(Error::Truncated {
                what: "InformInfoRecord",
                need: LEN,
                got,
            });
        }
        Ok(Packet { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Reads one field.
    #[inline]
    pub fn get<V: crate::WireValue>(&self, f: Field<V>) -> V {
        f.get(self.buffer.as_ref())
    }

    /// A view of the embedded InformInfo.
    pub fn inform_info(&self) -> inform_info::Packet<&[u8]> {
        inform_info::Packet::new_unchecked(&self.buffer.as_ref()[field::INFORM_INFO])
    }

    /// Fails on the first reserved bit that is set, here or in the InformInfo.
    pub fn check_reserved(&self) -> Result<()> {
        crate::bits::check_reserved("InformInfoRecord", self.buffer.as_ref(), LEN, field::ALL)?;
        self.inform_info().check_reserved()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes one field.
    #[inline]
    pub fn set<V: crate::WireValue>(&mut self, f: Field<V>, v: V) {
        f.set(self.buffer.as_mut(), v)
    }

    /// A mutable view of the embedded InformInfo.
    pub fn inform_info_mut(&mut self) -> inform_info::Packet<&mut [u8]> {
        inform_info::Packet::new_unchecked(&mut self.buffer.as_mut()[field::INFORM_INFO])
    }
}

/// InformInfoRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Repr {
    pub subscriber_gid: Gid,
    /// Tells apart several subscriptions of one subscriber.
    pub r#enum: u16,
    pub inform_info: inform_info::Repr,
}

impl Repr {
    /// Parses the record; reserved bits are ignored.
    pub fn parse(buf: &[u8]) -> Result<Repr> {
        let p = Packet::new_checked(buf)?;
        Ok(Repr {
            subscriber_gid: p.get(field::SUBSCRIBER_GID),
            r#enum: p.get(field::ENUM),
            inform_info: inform_info::Repr::parse(&buf[field::INFORM_INFO])?,
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the record; reserved bits are zeroed.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let got = buf.len();
        if got < LEN {
            return Err(Error::BufferTooSmall {
                what: "InformInfoRecord",
                need: LEN,
                got,
            });
        }
        let buf = &mut buf[..LEN];
        buf.fill(0);
        field::SUBSCRIBER_GID.set(buf, self.subscriber_gid);
        field::ENUM.set(buf, self.r#enum);
        self.inform_info.emit(&mut buf[field::INFORM_INFO])
    }
}

wire_via_inherent!("InformInfoRecord", LEN);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inform_info::NoticeType;
    use crate::{Guid, Lid};

    // OpenSM 3.3.23's answer to `saquery -d -d -d -I` on ibsim's net.2sw2path4hca after a
    // test client on "Hca2" (fe80::10:4) subscribed with Set(InformInfo). OpenSM zeroes the
    // QPN it lists.
    const BYTES: [u8; 60] = [
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,
        0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x01, 0xff, 0xff, 0x00, 0x40, 0x00, 0x00, 0x00, 0x12, 0x00, 0x00, 0x00, 0x04,
    ];

    fn repr() -> Repr {
        Repr {
            subscriber_gid: Gid::new(0xfe80_0000_0000_0000, Guid(0x10_0004)),
            r#enum: 0,
            inform_info: inform_info::Repr {
                gid: Gid::default(),
                lid_range_begin: inform_info::ALL_LIDS,
                lid_range_end: Lid(0),
                is_generic: true,
                subscribe: true,
                r#type: NoticeType::All,
                trap_number: 64,
                qpn: 0,
                resp_time_value: 18,
                producer_type: 4,
            },
        }
    }

    #[test]
    fn parse_and_emit() {
        let r = Repr::parse(&BYTES).unwrap();
        assert_eq!(r, repr());
        assert_eq!(r.inform_info.r#type, NoticeType::All);
        assert_eq!(r.inform_info.lid_range_begin, Lid(0xffff));
        let mut out = [0xa5u8; LEN];
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
    fn view_accessors() {
        let mut buf = BYTES;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.get(field::ENUM), 0);
        assert_eq!(p.inform_info().get(inform_info::field::TRAP_NUMBER), 64);
        p.set(field::ENUM, 0x0102);
        p.inform_info_mut().set(inform_info::field::QPN, 0x00_0001);
        assert_eq!(&buf[16..18], &[0x01, 0x02]);
        assert_eq!(&buf[52..56], &[0x00, 0x00, 0x01, 0x12]);
    }

    #[test]
    fn reserved_bits() {
        let mut buf = BYTES;
        buf[20] = 0x40;
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet {
                what: "InformInfoRecord",
                offset: 20,
                ..
            })
        ));
        let mut buf = BYTES;
        buf[56] = 0x01; // reserved byte inside the InformInfo
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet {
                what: "InformInfo",
                offset: 32,
                ..
            })
        ));
        let mut out = [0u8; LEN];
        Repr::parse(&buf).unwrap().emit(&mut out).unwrap();
        assert_eq!(out, BYTES);
    }

    #[test]
    fn short_buffers() {
        assert!(matches!(
            Repr::parse(&BYTES[..59]),
            Err(Error::Truncated {
                what: "InformInfoRecord",
                need: 60,
                got: 59
            })
        ));
        assert!(matches!(
            repr().emit(&mut [0u8; 59]),
            Err(Error::BufferTooSmall { need: 60, .. })
        ));
    }

    #[test]
    fn component_mask() {
        assert_eq!(comp::DEVICE_ID, comp::TRAP_NUMBER);
        assert_eq!(comp::PRODUCER_TYPE, 1 << 15);
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(repr()).unwrap();
        assert_eq!(
            v["subscriber_gid"],
            "fe80:0000:0000:0000:0000:0000:0010:0004"
        );
        assert_eq!(v["enum"], 0);
        assert_eq!(v["inform_info"]["type"], "All");
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
