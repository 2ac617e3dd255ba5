//! Newtypes for the identifiers that travel in MADs.

use crate::bits::WireScalar;
use core::fmt;

macro_rules! newtype {
    ($(#[$meta:meta])* $name:ident($inner:ty)) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        #[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
        pub struct $name(pub $inner);

        impl WireScalar for $name {
            #[inline(always)]
            fn from_raw(raw: u64) -> Self {
                $name(raw as $inner)
            }
            #[inline(always)]
            fn to_raw(self) -> u64 {
                self.0 as u64
            }
        }

        impl From<$inner> for $name {
            fn from(v: $inner) -> Self {
                $name(v)
            }
        }

        impl From<$name> for $inner {
            fn from(v: $name) -> Self {
                v.0
            }
        }
    };
}

newtype!(
    /// A local identifier. 0x0001..=0xBFFF unicast, 0xC000..=0xFFFE multicast, 0xFFFF permissive.
    Lid(u16)
);
newtype!(
    /// A 64-bit globally unique identifier (node, port or system image).
    Guid(u64)
);
newtype!(
    /// A partition key: bit 15 is the membership bit (1 = full), bits 0..=14 the partition.
    PKey(u16)
);
newtype!(
    /// A service level, 0..=15.
    Sl(u8)
);
newtype!(
    /// A virtual lane, 0..=15 (VL15 carries subnet management).
    Vl(u8)
);
newtype!(
    /// A port number: 0 is a switch's management port, 255 is reserved.
    PortNum(u8)
);
newtype!(
    /// A transaction identifier. Kernels rewrite the upper 32 bits; match on [`Tid::low32`].
    Tid(u64)
);

impl Lid {
    /// The reserved LID 0 (no LID assigned).
    pub const NONE: Lid = Lid(0);
    /// The permissive LID, used by directed-route SMPs.
    pub const PERMISSIVE: Lid = Lid(0xFFFF);
    /// Highest unicast LID.
    pub const MAX_UNICAST: Lid = Lid(0xBFFF);
    /// Lowest multicast LID.
    pub const MIN_MULTICAST: Lid = Lid(0xC000);

    /// 0x0001..=0xBFFF.
    pub const fn is_unicast(self) -> bool {
        self.0 >= 1 && self.0 <= 0xBFFF
    }
    /// 0xC000..=0xFFFE.
    pub const fn is_multicast(self) -> bool {
        self.0 >= 0xC000 && self.0 <= 0xFFFE
    }
}

impl PKey {
    /// The default partition, full membership.
    pub const DEFAULT: PKey = PKey(0xFFFF);
    /// Bit 15: full membership when set, limited when clear.
    pub const fn is_full(self) -> bool {
        self.0 & 0x8000 != 0
    }
    /// The partition number without the membership bit.
    pub const fn base(self) -> u16 {
        self.0 & 0x7FFF
    }
    /// An invalid (empty) entry: partition 0.
    pub const fn is_invalid(self) -> bool {
        self.base() == 0
    }
}

impl Tid {
    /// The part of the TID that survives the kernel's agent rewriting.
    pub const fn low32(self) -> u32 {
        self.0 as u32
    }
}

impl fmt::Display for Lid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl fmt::Debug for Lid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lid({:#06x})", self.0)
    }
}
impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}
impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guid({:#018x})", self.0)
    }
}
impl fmt::Display for PKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#06x}", self.0)
    }
}
impl fmt::Debug for PKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PKey({:#06x})", self.0)
    }
}
impl fmt::Debug for Sl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sl({})", self.0)
    }
}
impl fmt::Debug for Vl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Vl({})", self.0)
    }
}
impl fmt::Debug for PortNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PortNum({})", self.0)
    }
}
impl fmt::Display for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}
impl fmt::Debug for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tid({:#018x})", self.0)
    }
}

// JSON: 64-bit identifiers as hex strings (JSON numbers lose precision above 2^53),
// small ones as numbers.
impl serde::Serialize for Guid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
impl serde::Serialize for Tid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
impl serde::Serialize for PKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
macro_rules! serialize_as_number {
    ($($t:ident),*) => {$(
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
                serde::Serialize::serialize(&self.0, s)
            }
        }
    )*};
}
serialize_as_number!(Lid, Sl, Vl, PortNum);

/// Why a text is not a GUID ([`Guid`]'s `FromStr`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseGuidError {
    /// Nothing to parse (an empty string, or `0x` alone).
    #[error("no digits")]
    Empty,
    /// A character that is not a digit of the number's base.
    #[error("{0:?} is not a digit here")]
    BadDigit(char),
    /// The value does not fit in 64 bits.
    #[error("more than 64 bits")]
    TooLarge,
    /// A colon-separated GUID that is not four groups of four hex digits.
    #[error("expected four groups of four hex digits between colons")]
    BadGroups,
}

/// Parses the forms GUIDs are written in by the tools and files an SM meets:
/// - `0x0002c90300001234` (or `0X`): hexadecimal, as ibnetdiscover, OpenSM and `Display`
///   write it;
/// - `0002:c903:0000:1234`: four groups of four hex digits, as sysfs (`node_guid`) and
///   ibstat print it;
/// - `1234`: decimal, as a bare number in OpenSM's GUID files (read with `strtoull`; a
///   leading zero does not mean octal here).
///
/// No sign, no whitespace, no digit separators: callers trim.
impl core::str::FromStr for Guid {
    type Err = ParseGuidError;

    fn from_str(s: &str) -> core::result::Result<Guid, ParseGuidError> {
        if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            return number(hex, 16).map(Guid);
        }
        if s.contains(':') {
            let mut v = 0u64;
            let mut groups = 0;
            for g in s.split(':') {
                groups += 1;
                if groups > 4 || g.len() != 4 {
                    return Err(ParseGuidError::BadGroups);
                }
                v = v << 16 | number(g, 16)?;
            }
            return if groups == 4 {
                Ok(Guid(v))
            } else {
                Err(ParseGuidError::BadGroups)
            };
        }
        number(s, 10).map(Guid)
    }
}

/// Digits of `radix` only (`u64::from_str_radix` would also take a sign).
fn number(digits: &str, radix: u32) -> core::result::Result<u64, ParseGuidError> {
    if digits.is_empty() {
        return Err(ParseGuidError::Empty);
    }
    digits.chars().try_fold(0u64, |v, c| {
        let d = c.to_digit(radix).ok_or(ParseGuidError::BadDigit(c))?;
        v.checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(ParseGuidError::TooLarge)
    })
}

/// A 128-bit global identifier: 64-bit subnet prefix then 64-bit interface id (port GUID).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// Builds a GID from prefix and interface id.
    pub fn new(prefix: u64, guid: Guid) -> Gid {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&prefix.to_be_bytes());
        b[8..].copy_from_slice(&guid.0.to_be_bytes());
        Gid(b)
    }
    /// The subnet prefix.
    pub fn prefix(&self) -> u64 {
        let mut p = [0u8; 8];
        p.copy_from_slice(&self.0[..8]);
        u64::from_be_bytes(p)
    }
    /// The interface id.
    pub fn guid(&self) -> Guid {
        let mut p = [0u8; 8];
        p.copy_from_slice(&self.0[8..]);
        Guid(u64::from_be_bytes(p))
    }
    /// Reads a GID from the first 16 bytes of `buf` (the caller checks the length).
    pub fn from_slice(buf: &[u8]) -> Gid {
        let mut b = [0u8; 16];
        b.copy_from_slice(&buf[..16]);
        Gid(b)
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}
impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}
impl serde::Serialize for Gid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lid_classes() {
        assert!(!Lid(0).is_unicast());
        assert!(Lid(1).is_unicast() && Lid(0xBFFF).is_unicast());
        assert!(Lid(0xC000).is_multicast() && !Lid(0xFFFF).is_multicast());
    }

    #[test]
    fn gid_parts_and_text() {
        let g = Gid::new(0xfe80_0000_0000_0000, Guid(0x0002_c903_0000_1234));
        assert_eq!(g.prefix(), 0xfe80_0000_0000_0000);
        assert_eq!(g.guid(), Guid(0x0002_c903_0000_1234));
        assert_eq!(g.to_string(), "fe80:0000:0000:0000:0002:c903:0000:1234");
    }

    #[test]
    fn guid_text_forms() {
        let g = Guid(0x0002_c903_0000_1234);
        for text in [
            "0x0002c90300001234",
            "0X0002C90300001234",
            "0x2c90300001234",
            "0002:c903:0000:1234",
            "0002:C903:0000:1234",
            "783964675510836",
        ] {
            assert_eq!(text.parse::<Guid>(), Ok(g), "{text}");
        }
        assert_eq!("0".parse::<Guid>(), Ok(Guid(0)));
        // A leading zero is not octal.
        assert_eq!("010".parse::<Guid>(), Ok(Guid(10)));
        assert_eq!("0xffffffffffffffff".parse::<Guid>(), Ok(Guid(u64::MAX)));
        assert_eq!("18446744073709551615".parse::<Guid>(), Ok(Guid(u64::MAX)));
        assert_eq!(g.to_string().parse::<Guid>(), Ok(g));
    }

    #[test]
    fn guid_text_errors() {
        use ParseGuidError::*;
        for (text, err) in [
            ("", Empty),
            ("0x", Empty),
            ("0x+12", BadDigit('+')),
            ("+12", BadDigit('+')),
            ("-1", BadDigit('-')),
            ("0xzz", BadDigit('z')),
            ("12ab", BadDigit('a')),
            (" 0x12", BadDigit(' ')),
            ("0x12 ", BadDigit(' ')),
            ("0x1_000", BadDigit('_')),
            ("0x1é", BadDigit('é')),
            ("0x10000000000000000", TooLarge),
            ("18446744073709551616", TooLarge),
            ("0002:c903:0000", BadGroups),
            ("0002:c903:0000:1234:5678", BadGroups),
            ("02:c903:0000:1234", BadGroups),
            ("0002:c903::1234", BadGroups),
            ("0002:c903:0000:123g", BadDigit('g')),
            (":", BadGroups),
        ] {
            assert_eq!(text.parse::<Guid>(), Err(err), "{text:?}");
        }
        assert_eq!(
            "0xzz".parse::<Guid>().map_err(|e| e.to_string()),
            Err("'z' is not a digit here".to_string())
        );
    }

    #[test]
    fn pkey_bits() {
        assert!(PKey(0xFFFF).is_full());
        assert_eq!(PKey(0x7FFF).base(), 0x7FFF);
        assert!(PKey(0x8000).is_invalid());
    }
}
