//! ServiceRecord (IBA 15.2.5.14): a service registered with the SA. 176 bytes.

use crate::attr::SaAttrId;
use crate::bits::wire_via_inherent;
use crate::bits::{Field, WireScalar, WireValue};
use crate::{Bytes, Error, Gid, PKey, Result};
use core::fmt;

/// SA attribute id of ServiceRecord.
pub const ATTR_ID: u16 = SaAttrId::ServiceRecord.to_raw_value();

/// Length on the wire.
pub const LEN: usize = 176;

/// A 64-bit service identifier (ServiceRecord, PathRecord, MultiPathRecord).
/// Serialises as a hex string, like GUIDs.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct ServiceId(pub u64);

impl WireScalar for ServiceId {
    #[inline(always)]
    fn from_raw(raw: u64) -> Self {
        ServiceId(raw)
    }
    #[inline(always)]
    fn to_raw(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ServiceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}
impl fmt::Debug for ServiceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServiceId({:#018x})", self.0)
    }
}
impl serde::Serialize for ServiceId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A service lease, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(transparent)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Lease(pub u32);

impl Lease {
    /// The lease that never expires.
    pub const INFINITE: Lease = Lease(0xFFFF_FFFF);
    /// True for [`Lease::INFINITE`].
    pub const fn is_infinite(self) -> bool {
        self.0 == Lease::INFINITE.0
    }
}

impl WireScalar for Lease {
    #[inline(always)]
    fn from_raw(raw: u64) -> Self {
        Lease(raw as u32)
    }
    #[inline(always)]
    fn to_raw(self) -> u64 {
        self.0 as u64
    }
}

/// ServiceName: 64 bytes of UTF-8, NUL padded. Keeps every byte so parse -> emit is exact;
/// serialises as the text up to the first NUL.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct ServiceName(pub [u8; 64]);

impl Default for ServiceName {
    fn default() -> Self {
        ServiceName([0; 64])
    }
}

impl ServiceName {
    /// A name from a string, cut to 64 bytes at a character boundary.
    pub fn new(s: &str) -> ServiceName {
        let mut b = [0u8; 64];
        let mut end = s.len().min(64);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        b[..end].copy_from_slice(&s.as_bytes()[..end]);
        ServiceName(b)
    }

    /// The text up to the first NUL, with invalid UTF-8 replaced.
    pub fn as_string(&self) -> String {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(64);
        String::from_utf8_lossy(&self.0[..end]).into_owned()
    }
}

impl fmt::Debug for ServiceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServiceName({:?})", self.as_string())
    }
}

impl serde::Serialize for ServiceName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_string())
    }
}

impl WireValue for ServiceName {
    #[inline]
    fn read(buf: &[u8], offset: usize, width: usize) -> Self {
        ServiceName(Bytes::<64>::read(buf, offset, width).0)
    }
    #[inline]
    fn write(self, buf: &mut [u8], offset: usize, width: usize) {
        Bytes(self.0).write(buf, offset, width)
    }
}

/// Bit layout (spec bit numbering). Bytes 26..28 are reserved.
pub mod field {
    use super::*;

    pub const SERVICE_ID: Field<ServiceId> = Field::new("service_id", 0, 64);
    pub const SERVICE_GID: Field<Gid> = Field::new("service_gid", 64, 128);
    pub const SERVICE_P_KEY: Field<PKey> = Field::new("service_p_key", 192, 16);
    pub const SERVICE_LEASE: Field<Lease> = Field::new("service_lease", 224, 32);
    pub const SERVICE_KEY: Field<Bytes<16>> = Field::new("service_key", 256, 128);
    pub const SERVICE_NAME: Field<ServiceName> = Field::new("service_name", 384, 512);

    /// ServiceData8 entry `i` (0..16).
    pub const fn service_data8(i: usize) -> Field<u8> {
        assert!(i < 16);
        Field::new("service_data8", 896 + 8 * i, 8)
    }
    /// ServiceData16 entry `i` (0..8).
    pub const fn service_data16(i: usize) -> Field<u16> {
        assert!(i < 8);
        Field::new("service_data16", 1024 + 16 * i, 16)
    }
    /// ServiceData32 entry `i` (0..4).
    pub const fn service_data32(i: usize) -> Field<u32> {
        assert!(i < 4);
        Field::new("service_data32", 1152 + 32 * i, 32)
    }
    /// ServiceData64 entry `i` (0..2).
    pub const fn service_data64(i: usize) -> Field<u64> {
        assert!(i < 2);
        Field::new("service_data64", 1280 + 64 * i, 64)
    }

    /// Every field as (name, bit offset, bit width); all other bits are reserved.
    pub const ALL: &[(&str, usize, usize)] = &[
        ("service_id", 0, 64),
        ("service_gid", 64, 128),
        ("service_p_key", 192, 16),
        ("service_lease", 224, 32),
        ("service_key", 256, 128),
        ("service_name", 384, 512),
        ("service_data8", 896, 128),
        ("service_data16", 1024, 128),
        ("service_data32", 1152, 128),
        ("service_data64", 1280, 128),
    ];
}

/// Component mask bits, one per field (each ServiceData entry has its own bit).
pub mod comp {
    pub const SERVICE_ID: u64 = 1 << 0;
    pub const SERVICE_GID: u64 = 1 << 1;
    pub const SERVICE_P_KEY: u64 = 1 << 2;
    // bit 3: reserved
    pub const SERVICE_LEASE: u64 = 1 << 4;
    pub const SERVICE_KEY: u64 = 1 << 5;
    pub const SERVICE_NAME: u64 = 1 << 6;

    /// ServiceData8 entry `i` (0..16).
    pub const fn service_data8(i: u32) -> u64 {
        1 << (7 + i)
    }
    /// ServiceData16 entry `i` (0..8).
    pub const fn service_data16(i: u32) -> u64 {
        1 << (23 + i)
    }
    /// ServiceData32 entry `i` (0..4).
    pub const fn service_data32(i: u32) -> u64 {
        1 << (31 + i)
    }
    /// ServiceData64 entry `i` (0..2).
    pub const fn service_data64(i: u32) -> u64 {
        1 << (35 + i)
    }

    /// All sixteen ServiceData8 bits.
    pub const SERVICE_DATA8: u64 = 0xFFFF << 7;
    /// All eight ServiceData16 bits.
    pub const SERVICE_DATA16: u64 = 0xFF << 23;
    /// All four ServiceData32 bits.
    pub const SERVICE_DATA32: u64 = 0xF << 31;
    /// Both ServiceData64 bits.
    pub const SERVICE_DATA64: u64 = 0x3 << 35;
}

/// Zero-copy view over a buffer holding a ServiceRecord.
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
                what: "ServiceRecord",
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

    /// Fails on the first reserved bit that is set.
    pub fn check_reserved(&self) -> Result<()> {
        crate::bits::check_reserved("ServiceRecord", self.buffer.as_ref(), LEN, field::ALL)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes one field.
    #[inline]
    pub fn set<V: crate::WireValue>(&mut self, f: Field<V>, v: V) {
        f.set(self.buffer.as_mut(), v)
    }
}

/// ServiceRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Repr {
    pub service_id: ServiceId,
    pub service_gid: Gid,
    pub service_p_key: PKey,
    pub service_lease: Lease,
    /// Opaque key; the SA hides it in answers to untrusted requesters.
    pub service_key: Bytes<16>,
    pub service_name: ServiceName,
    pub service_data8: [u8; 16],
    pub service_data16: [u16; 8],
    pub service_data32: [u32; 4],
    pub service_data64: [u64; 2],
}

impl Repr {
    /// Parses the record; the reserved bytes are ignored.
    pub fn parse(buf: &[u8]) -> Result<Repr> {
        let p = Packet::new_checked(buf)?;
        let mut r = Repr {
            service_id: p.get(field::SERVICE_ID),
            service_gid: p.get(field::SERVICE_GID),
            service_p_key: p.get(field::SERVICE_P_KEY),
            service_lease: p.get(field::SERVICE_LEASE),
            service_key: p.get(field::SERVICE_KEY),
            service_name: p.get(field::SERVICE_NAME),
            ..Repr::default()
        };
        for (i, v) in r.service_data8.iter_mut().enumerate() {
            *v = p.get(field::service_data8(i));
        }
        for (i, v) in r.service_data16.iter_mut().enumerate() {
            *v = p.get(field::service_data16(i));
        }
        for (i, v) in r.service_data32.iter_mut().enumerate() {
            *v = p.get(field::service_data32(i));
        }
        for (i, v) in r.service_data64.iter_mut().enumerate() {
            *v = p.get(field::service_data64(i));
        }
        Ok(r)
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the record; reserved bytes are zeroed.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let got = buf.len();
        if got < LEN {
            return Err(Error::BufferTooSmall {
                what: "ServiceRecord",
                need: LEN,
                got,
            });
        }
        let buf = &mut buf[..LEN];
        buf.fill(0);
        let mut p = Packet { buffer: buf };
        p.set(field::SERVICE_ID, self.service_id);
        p.set(field::SERVICE_GID, self.service_gid);
        p.set(field::SERVICE_P_KEY, self.service_p_key);
        p.set(field::SERVICE_LEASE, self.service_lease);
        p.set(field::SERVICE_KEY, self.service_key);
        p.set(field::SERVICE_NAME, self.service_name);
        for (i, &v) in self.service_data8.iter().enumerate() {
            p.set(field::service_data8(i), v);
        }
        for (i, &v) in self.service_data16.iter().enumerate() {
            p.set(field::service_data16(i), v);
        }
        for (i, &v) in self.service_data32.iter().enumerate() {
            p.set(field::service_data32(i), v);
        }
        for (i, &v) in self.service_data64.iter().enumerate() {
            p.set(field::service_data64(i), v);
        }
        Ok(())
    }
}

wire_via_inherent!("ServiceRecord", LEN);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Guid;

    // OpenSM 3.3.23's answer to `saquery -d -d -d -S` on ibsim's net.2sw2path4hca, after a
    // test client on "Hca2" registered the service (Set(ServiceRecord)). OpenSM hides the
    // ServiceKey from saquery; ServiceData64[1] came back zero although it was registered
    // as 0x6400000000000002 (as OpenSM answered it, under the simulator).
    const BYTES: [u8; 176] = [
        0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0xab, 0xcd, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x04, 0xff, 0xff, 0x00, 0x00, 0xff, 0xff,
        0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x69, 0x62, 0x73, 0x6d, 0x2d, 0x74, 0x65, 0x73, 0x74, 0x2d, 0x73, 0x65,
        0x72, 0x76, 0x69, 0x63, 0x65, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
        0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf, 0x16, 0x00, 0x16, 0x01, 0x16, 0x02, 0x16,
        0x03, 0x16, 0x04, 0x16, 0x05, 0x16, 0x06, 0x16, 0x07, 0x32, 0x00, 0x00, 0x00, 0x32, 0x00,
        0x00, 0x01, 0x32, 0x00, 0x00, 0x02, 0x32, 0x00, 0x00, 0x03, 0x64, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    fn repr() -> Repr {
        let mut data8 = [0u8; 16];
        for (i, v) in data8.iter_mut().enumerate() {
            *v = 0xa0 + i as u8;
        }
        Repr {
            service_id: ServiceId(0x1000_0000_0000_abcd),
            service_gid: Gid::new(0xfe80_0000_0000_0000, Guid(0x10_0004)),
            service_p_key: PKey(0xffff),
            service_lease: Lease::INFINITE,
            service_key: Bytes([0; 16]),
            service_name: ServiceName::new("ibsm-test-service"),
            service_data8: data8,
            service_data16: [
                0x1600, 0x1601, 0x1602, 0x1603, 0x1604, 0x1605, 0x1606, 0x1607,
            ],
            service_data32: [0x3200_0000, 0x3200_0001, 0x3200_0002, 0x3200_0003],
            service_data64: [0x6400_0000_0000_0001, 0],
        }
    }

    #[test]
    fn parse_and_emit() {
        let r = Repr::parse(&BYTES).unwrap();
        assert_eq!(r, repr());
        assert!(r.service_lease.is_infinite());
        assert_eq!(r.service_name.as_string(), "ibsm-test-service");
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
        assert_eq!(p.get(field::service_data16(7)), 0x1607);
        assert_eq!(p.get(field::service_data64(0)), 0x6400_0000_0000_0001);
        p.set(field::SERVICE_KEY, Bytes([0x5a; 16]));
        p.set(field::service_data64(1), 0x6400_0000_0000_0002);
        p.set(field::SERVICE_LEASE, Lease(60));
        assert_eq!(&buf[32..48], &[0x5a; 16]);
        assert_eq!(&buf[168..176], &0x6400_0000_0000_0002u64.to_be_bytes());
        assert_eq!(&buf[28..32], &[0, 0, 0, 60]);
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.service_key, Bytes([0x5a; 16]));
        assert_eq!(r.service_data64[1], 0x6400_0000_0000_0002);
    }

    #[test]
    fn reserved_bytes() {
        let mut buf = BYTES;
        buf[27] = 0x01;
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert!(matches!(
            p.check_reserved(),
            Err(Error::ReservedBitsSet {
                offset: 27,
                after: "service_p_key",
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
            Repr::parse(&BYTES[..175]),
            Err(Error::Truncated {
                need: 176,
                got: 175,
                ..
            })
        ));
        assert!(matches!(
            repr().emit(&mut [0u8; 175]),
            Err(Error::BufferTooSmall { need: 176, .. })
        ));
    }

    #[test]
    fn names() {
        let long = "x".repeat(70);
        assert_eq!(ServiceName::new(&long).as_string().len(), 64);
        let s = format!("a{}", "é".repeat(40));
        assert_eq!(ServiceName::new(&s).as_string().len(), 63);
        // A name that fills all 64 bytes has no terminating NUL.
        let full = ServiceName([b'n'; 64]);
        assert_eq!(full.as_string().len(), 64);
    }

    #[test]
    fn component_mask() {
        assert_eq!(comp::service_data8(0), 1 << 7);
        assert_eq!(comp::service_data8(15), 1 << 22);
        assert_eq!(comp::service_data16(0), 1 << 23);
        assert_eq!(comp::service_data32(3), 1 << 34);
        assert_eq!(comp::service_data64(1), 1 << 36);
        let all = comp::SERVICE_ID
            | comp::SERVICE_GID
            | comp::SERVICE_P_KEY
            | comp::SERVICE_LEASE
            | comp::SERVICE_KEY
            | comp::SERVICE_NAME
            | comp::SERVICE_DATA8
            | comp::SERVICE_DATA16
            | comp::SERVICE_DATA32
            | comp::SERVICE_DATA64;
        // Every bit up to 36 except the reserved bit 3.
        assert_eq!(all, ((1u64 << 37) - 1) & !(1 << 3));
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(repr()).unwrap();
        assert_eq!(v["service_id"], "0x100000000000abcd");
        assert_eq!(v["service_name"], "ibsm-test-service");
        assert_eq!(v["service_lease"], 0xffff_ffffu32);
        assert_eq!(v["service_p_key"], "0xffff");
        assert_eq!(v["service_data16"][7], 0x1607);
        assert_eq!(v["service_key"], "00000000000000000000000000000000");
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
