//! Big-endian bit fields numbered as the IBA specification numbers them: bit 0 is the most
//! significant bit of byte 0, so a field's (offset, width) pair is copied straight from the
//! spec's attribute tables.

use core::marker::PhantomData;

/// A value that lives in a wire field.
pub trait WireValue: Copy {
    /// Reads the value from `width` bits at bit `offset`.
    fn read(buf: &[u8], offset: usize, width: usize) -> Self;
    /// Writes the value into `width` bits at bit `offset`.
    fn write(self, buf: &mut [u8], offset: usize, width: usize);
    /// The value as a field of `width` bits keeps it: what `read` returns after `write`.
    #[inline(always)]
    fn truncated(self, _width: usize) -> Self {
        self
    }
}

/// A value that fits a field of at most 64 bits.
pub trait WireScalar: Copy {
    /// Builds the value from the field's raw bits (already masked to the field width).
    fn from_raw(raw: u64) -> Self;
    /// The raw bits to store; bits above the field width are dropped on emit.
    fn to_raw(self) -> u64;
}

impl<S: WireScalar> WireValue for S {
    #[inline(always)]
    fn read(buf: &[u8], offset: usize, width: usize) -> Self {
        S::from_raw(get_bits(buf, offset, width))
    }
    #[inline(always)]
    fn write(self, buf: &mut [u8], offset: usize, width: usize) {
        set_bits(buf, offset, width, self.to_raw())
    }
    #[inline(always)]
    fn truncated(self, width: usize) -> Self {
        S::from_raw(self.to_raw() & mask(width))
    }
}

/// A byte-aligned array of `N` bytes (descriptions, service names, opaque data).
/// Serialises as a hex string.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Bytes<const N: usize>(pub [u8; N]);

impl<const N: usize> Default for Bytes<N> {
    fn default() -> Self {
        Bytes([0; N])
    }
}

impl<const N: usize> core::fmt::Debug for Bytes<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Bytes(")?;
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

impl<const N: usize> serde::Serialize for Bytes<N> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        struct Hex<'a>(&'a [u8]);
        impl core::fmt::Display for Hex<'_> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                for b in self.0 {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
        }
        s.collect_str(&Hex(&self.0))
    }
}

impl<const N: usize> WireValue for Bytes<N> {
    #[inline]
    fn read(buf: &[u8], offset: usize, _width: usize) -> Self {
        let mut b = [0u8; N];
        b.copy_from_slice(&buf[offset / 8..offset / 8 + N]);
        Bytes(b)
    }
    #[inline]
    fn write(self, buf: &mut [u8], offset: usize, _width: usize) {
        buf[offset / 8..offset / 8 + N].copy_from_slice(&self.0)
    }
}

impl WireValue for crate::Gid {
    #[inline]
    fn read(buf: &[u8], offset: usize, _width: usize) -> Self {
        crate::Gid::from_slice(&buf[offset / 8..])
    }
    #[inline]
    fn write(self, buf: &mut [u8], offset: usize, _width: usize) {
        buf[offset / 8..offset / 8 + 16].copy_from_slice(&self.0)
    }
}

macro_rules! impl_wire_int {
    ($($t:ty),*) => {$(
        impl WireScalar for $t {
            #[inline(always)]
            fn from_raw(raw: u64) -> Self {
                raw as $t
            }
            #[inline(always)]
            fn to_raw(self) -> u64 {
                self as u64
            }
        }
    )*};
}
impl_wire_int!(u8, u16, u32, u64);

impl WireScalar for bool {
    #[inline(always)]
    fn from_raw(raw: u64) -> Self {
        raw != 0
    }
    #[inline(always)]
    fn to_raw(self) -> u64 {
        self as u64
    }
}

/// A named field at a bit offset, of a bit width, holding a `V`.
#[derive(Debug)]
pub struct Field<V> {
    /// The field's name as the specification spells it, in snake_case.
    pub name: &'static str,
    /// Offset of the field's most significant bit from bit 0 of the structure.
    pub offset: usize,
    /// Width in bits: 1..=64 for scalars, the whole size for byte-aligned GIDs and arrays.
    pub width: usize,
    _value: PhantomData<fn() -> V>,
}

impl<V> Clone for Field<V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V> Copy for Field<V> {}

impl<V: WireValue> Field<V> {
    /// A field; the layout macros check at compile time that it fits its structure.
    pub const fn new(name: &'static str, offset: usize, width: usize) -> Self {
        assert!(width >= 1);
        Field {
            name,
            offset,
            width,
            _value: PhantomData,
        }
    }

    /// One past the last byte the field touches.
    pub const fn end_byte(&self) -> usize {
        (self.offset + self.width).div_ceil(8)
    }

    /// Reads the field. The caller guarantees `buf.len() >= self.end_byte()`.
    #[inline(always)]
    pub fn get(&self, buf: &[u8]) -> V {
        V::read(buf, self.offset, self.width)
    }

    /// Writes the field, leaving every other bit alone.
    /// The caller guarantees `buf.len() >= self.end_byte()`.
    #[inline(always)]
    pub fn set(&self, buf: &mut [u8], value: V) {
        value.write(buf, self.offset, self.width)
    }
}

#[inline(always)]
const fn mask(width: usize) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Reads `width` bits at bit `offset` (spec numbering) as an unsigned integer.
#[inline(always)]
pub fn get_bits(buf: &[u8], offset: usize, width: usize) -> u64 {
    let first = offset / 8;
    let end = (offset + width - 1) / 8 + 1;
    // One slice (one bounds check) per field; `end` is exclusive so no RangeInclusive
    // overflow check is left for the optimiser.
    let bytes = &buf[first..end];
    let shift = end * 8 - (offset + width);
    if bytes.len() <= 8 {
        let mut acc = 0u64;
        for &b in bytes {
            acc = (acc << 8) | b as u64;
        }
        (acc >> shift) & mask(width)
    } else {
        let mut acc = 0u128;
        for &b in bytes {
            acc = (acc << 8) | b as u128;
        }
        (acc >> shift) as u64 & mask(width)
    }
}

/// Writes the low `width` bits of `value` at bit `offset` (spec numbering).
#[inline(always)]
pub fn set_bits(buf: &mut [u8], offset: usize, width: usize, value: u64) {
    let value = value & mask(width);
    let first = offset / 8;
    let end = (offset + width - 1) / 8 + 1;
    let bytes = &mut buf[first..end];
    let shift = end * 8 - (offset + width);
    let n = bytes.len();
    if offset % 8 == 0 && width % 8 == 0 {
        // Whole bytes: nothing of the old value survives.
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (value >> (8 * (n - 1 - i))) as u8;
        }
    } else if n <= 8 {
        let mut acc = 0u64;
        for &b in bytes.iter() {
            acc = (acc << 8) | b as u64;
        }
        let m = mask(width) << shift;
        acc = (acc & !m) | (value << shift);
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (acc >> (8 * (n - 1 - i))) as u8;
        }
    } else {
        let mut acc = 0u128;
        for &b in bytes.iter() {
            acc = (acc << 8) | b as u128;
        }
        let m = (mask(width) as u128) << shift;
        acc = (acc & !m) | ((value as u128) << shift);
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (acc >> (8 * (n - 1 - i))) as u8;
        }
    }
}

/// Checks that no bit outside the declared `fields` (name, bit offset, bit width) is set in
/// the first `len` bytes of `buf`: everything a layout does not name is reserved.
pub fn check_reserved(
    what: &'static str,
    buf: &[u8],
    len: usize,
    fields: &[(&'static str, usize, usize)],
) -> crate::Result<()> {
    let len = len.min(buf.len());
    let mut used = [0u8; 256];
    let used = &mut used[..len.min(256)];
    for &(_, offset, width) in fields {
        let mut bit = offset;
        while bit < offset + width {
            let chunk = (offset + width - bit).min(64);
            set_bits(used, bit, chunk, u64::MAX);
            bit += chunk;
        }
    }
    for (i, (&b, &u)) in buf.iter().zip(used.iter()).enumerate() {
        let stray = b & !u;
        if stray != 0 {
            // The field before the first stray bit, which may share its byte.
            let bit = i * 8 + stray.leading_zeros() as usize;
            let after = fields
                .iter()
                .filter(|f| f.1 < bit)
                .max_by_key(|f| f.1)
                .map_or("(start)", |f| f.0);
            return Err(crate::Error::ReservedBitsSet {
                what,
                after,
                offset: i,
                mask: stray,
            });
        }
    }
    Ok(())
}

/// The zero-copy view every structure has: `Packet<T>` with `new_unchecked`, `new_checked`
/// (which refuses a buffer shorter than `$len`) and `into_inner`. Accessors go in further
/// `impl` blocks.
macro_rules! packet_view {
    ($(#[$meta:meta])* view $what:expr, $len:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Wraps a buffer without checking its length; accessors that index it may panic
            /// on a short buffer.
            pub const fn new_unchecked(buffer: T) -> Self {
                Packet { buffer }
            }

            /// Wraps a buffer after checking that the whole structure lies inside it.
            pub fn new_checked(buffer: T) -> $crate::Result<Self> {
                let got = buffer.as_ref().len();
                if got < $len {
                    return Err($crate::Error::Truncated { what: $what, need: $len, got });
                }
                Ok(Packet { buffer })
            }

            /// The wrapped buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}
pub(crate) use packet_view;

/// `Wire` for a `Repr` whose inherent `parse` and `emit` do the work.
macro_rules! wire_via_inherent {
    ($what:expr, $len:expr) => {
        impl $crate::Wire for Repr {
            const NAME: &'static str = $what;
            const LEN: usize = $len;
            fn parse(buf: &[u8]) -> $crate::Result<Self> {
                Repr::parse(buf)
            }
            fn emit(&self, buf: &mut [u8]) -> $crate::Result<()> {
                Repr::emit(self, buf)
            }
        }
    };
}
pub(crate) use wire_via_inherent;

/// An enumeration over a wire field that keeps values it does not know, so that
/// parse -> emit round-trips every input. Serialises as the variant name, or the number
/// when unknown.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident : $repr:ty {
            $( $(#[$vmeta:meta])* $variant:ident = $value:expr, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A value this codec does not name.
            Unknown($repr),
        }

        impl $name {
            /// The wire value.
            pub const fn to_raw_value(self) -> $repr {
                match self {
                    $( $name::$variant => $value, )*
                    $name::Unknown(v) => v,
                }
            }

            /// The enumeration for a wire value.
            pub const fn from_raw_value(v: $repr) -> Self {
                match v {
                    $( x if x == $value => $name::$variant, )*
                    other => $name::Unknown(other),
                }
            }

            /// The variant's name, or `None` when unknown.
            pub const fn name(self) -> Option<&'static str> {
                match self {
                    $( $name::$variant => Some(stringify!($variant)), )*
                    $name::Unknown(_) => None,
                }
            }
        }

        impl From<$repr> for $name {
            fn from(v: $repr) -> Self {
                Self::from_raw_value(v)
            }
        }

        impl From<$name> for $repr {
            fn from(v: $name) -> Self {
                v.to_raw_value()
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::from_raw_value(0)
            }
        }

        impl $crate::bits::WireScalar for $name {
            #[inline(always)]
            fn from_raw(raw: u64) -> Self {
                Self::from_raw_value(raw as $repr)
            }
            #[inline(always)]
            fn to_raw(self) -> u64 {
                self.to_raw_value() as u64
            }
        }

        // Any wire value, so a known value is always its named variant (as `parse` gives it).
        #[cfg(feature = "arbitrary")]
        impl<'a> arbitrary::Arbitrary<'a> for $name {
            fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
                Ok(Self::from_raw_value(<$repr as arbitrary::Arbitrary<'a>>::arbitrary(u)?))
            }
            fn size_hint(depth: usize) -> (usize, Option<usize>) {
                <$repr as arbitrary::Arbitrary<'a>>::size_hint(depth)
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "Unknown({:#x})", self.to_raw_value()),
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
                match self.name() {
                    Some(n) => s.serialize_str(n),
                    None => s.serialize_u64(self.to_raw_value() as u64),
                }
            }
        }
    };
}
pub(crate) use wire_enum;

/// A fixed-size structure made of scalar bit fields: generates, in the invoking module,
/// `LEN`, `mod field` (one typed [`Field`] constant per field, plus the reserved ranges),
/// the zero-copy `Packet<T>` view and the owned `Repr` with `parse` / `buffer_len` / `emit`.
///
/// Field lines read like the specification's table: `name: Type = CONST @ bit_offset, bit_width;`.
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        struct $what:literal, $len:expr;
        $( check $check:path; )?
        fields {
            $(
                $(#[$fmeta:meta])*
                $field:ident : $ty:ty = $konst:ident @ $off:expr, $width:expr;
            )*
        }
    ) => {
        /// Length of the structure on the wire, in bytes.
        pub const LEN: usize = $len;

        /// Bit layout of the structure (spec bit numbering).
        pub mod field {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[allow(missing_docs)]
                pub const $konst: $crate::bits::Field<$ty> =
                    $crate::bits::Field::new(stringify!($field), $off, $width);
            )*
            /// Every field as (name, bit offset, bit width); all other bits are reserved.
            pub const ALL: &[(&str, usize, usize)] = &[ $( (stringify!($field), $off, $width), )* ];

            #[allow(clippy::int_plus_one)] // 1-bit fields expand to `off + 1 <= len`
            const _: () = {
                $( assert!($off + $width <= super::LEN * 8, concat!("field ", stringify!($field), " overruns the structure")); )*
            };
        }

        $crate::bits::packet_view! {
            /// Zero-copy view over a buffer holding the structure.
            view $what, LEN
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Reads one field.
            #[inline]
            pub fn get<V: $crate::bits::WireValue>(&self, f: $crate::bits::Field<V>) -> V {
                f.get(self.buffer.as_ref())
            }

            /// Fails on the first reserved bit that is set.
            pub fn check_reserved(&self) -> $crate::Result<()> {
                $crate::bits::check_reserved($what, self.buffer.as_ref(), LEN, field::ALL)
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            /// Writes one field.
            #[inline]
            pub fn set<V: $crate::bits::WireValue>(&mut self, f: $crate::bits::Field<V>, v: V) {
                f.set(self.buffer.as_mut(), v)
            }
        }

        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
        #[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
        pub struct Repr {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl Repr {
            /// This structure as the wire carries it: every field cut to its bit width,
            /// which is what `parse` returns after `emit`.
            pub fn truncated(&self) -> Repr {
                Repr { $( $field: $crate::bits::WireValue::truncated(self.$field, $width), )* }
            }

            /// Parses and validates the structure from the start of `buf`; reserved bits are
            /// ignored (see `Packet::check_reserved` for the strict check).
            #[inline]
            pub fn parse(buf: &[u8]) -> $crate::Result<Self> {
                let got = buf.len();
                if got < LEN {
                    return Err($crate::Error::Truncated { what: $what, need: LEN, got });
                }
                let buf = &buf[..LEN];
                let repr = Repr { $( $field: field::$konst.get(buf), )* };
                $( $check(&repr)?; )?
                Ok(repr)
            }

            /// Bytes `emit` writes.
            pub const fn buffer_len(&self) -> usize {
                LEN
            }

            /// Writes every field into the start of `buf`; reserved bits are zeroed.
            #[inline]
            pub fn emit(&self, buf: &mut [u8]) -> $crate::Result<()> {
                let got = buf.len();
                if got < LEN {
                    return Err($crate::Error::BufferTooSmall { what: $what, need: LEN, got });
                }
                let buf = &mut buf[..LEN];
                buf.fill(0);
                $( field::$konst.set(buf, self.$field); )*
                Ok(())
            }
        }

        impl $crate::Wire for Repr {
            const NAME: &'static str = $what;
            const LEN: usize = LEN;
            fn parse(buf: &[u8]) -> $crate::Result<Self> {
                Repr::parse(buf)
            }
            fn emit(&self, buf: &mut [u8]) -> $crate::Result<()> {
                Repr::emit(self, buf)
            }
            fn check_reserved(buf: &[u8]) -> $crate::Result<()> {
                Packet::new_checked(buf)?.check_reserved()
            }
            fn truncated(&self) -> Self {
                Repr::truncated(self)
            }
        }
    };
}
pub(crate) use wire_struct;

/// An SA record that embeds whole attributes (NodeRecord holds a NodeInfo, PortInfoRecord a
/// PortInfo, ...): scalar fields laid out as in [`wire_struct!`], then each embedded
/// attribute parsed and emitted by its own `Repr` at a byte offset. Generates, in the invoking
/// module, `LEN`, `mod field` (a typed [`Field`] per scalar field and a byte range per
/// attribute), the `Packet<T>` view and the owned `Repr`, whose JSON nests each attribute as
/// an object under its field name.
///
/// Attribute lines read `name: Type = CONST @ byte_offset;`. `Packet::check_reserved` checks
/// the record's own reserved bits; an attribute's are its own module's business.
macro_rules! wire_record {
    (
        $(#[$meta:meta])*
        struct $what:literal, $len:expr;
        fields {
            $(
                $(#[$fmeta:meta])*
                $field:ident : $ty:ty = $konst:ident @ $off:expr, $width:expr;
            )*
        }
        attributes {
            $(
                $(#[$ameta:meta])*
                $attr:ident : $aty:ty = $akonst:ident @ $aoff:expr;
            )+
        }
    ) => {
        /// Length of the record on the wire, in bytes (before any padding to the attribute
        /// offset).
        pub const LEN: usize = $len;

        /// Layout of the record: bit fields (spec bit numbering) and attribute byte ranges.
        pub mod field {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[allow(missing_docs)]
                pub const $konst: $crate::bits::Field<$ty> =
                    $crate::bits::Field::new(stringify!($field), $off, $width);
            )*
            $(
                #[allow(missing_docs)]
                pub const $akonst: core::ops::Range<usize> =
                    $aoff..$aoff + <$aty as $crate::Wire>::LEN;
            )+
            /// Every field and attribute as (name, bit offset, bit width); all other bits are
            /// reserved.
            pub const ALL: &[(&str, usize, usize)] = &[
                $( (stringify!($field), $off, $width), )*
                $( (stringify!($attr), $aoff * 8, <$aty as $crate::Wire>::LEN * 8), )+
            ];

            #[allow(clippy::int_plus_one)] // 1-bit fields expand to `off + 1 <= len`
            const _: () = {
                $( assert!($off + $width <= super::LEN * 8, concat!("field ", stringify!($field), " overruns the record")); )*
                $( assert!($akonst.end <= super::LEN, concat!("attribute ", stringify!($attr), " overruns the record")); )+
            };
        }

        $crate::bits::packet_view! {
            /// Zero-copy view over a buffer holding the record.
            view $what, LEN
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Reads one field.
            #[inline]
            pub fn get<V: $crate::bits::WireValue>(&self, f: $crate::bits::Field<V>) -> V {
                f.get(self.buffer.as_ref())
            }

            /// The bytes of one embedded attribute (`range` is one of the `field` ranges).
            pub fn attribute(&self, range: core::ops::Range<usize>) -> &[u8] {
                &self.buffer.as_ref()[range]
            }

            /// Fails on the first reserved bit of the record that is set, the embedded
            /// attributes' reserved bits included.
            pub fn check_reserved(&self) -> $crate::Result<()> {
                let buf = self.buffer.as_ref();
                $crate::bits::check_reserved($what, buf, LEN, field::ALL)?;
                $(
                    if let Some(b) = buf.get(field::$akonst) {
                        <$aty as $crate::Wire>::check_reserved(b).map_err(|e| match e {
                            $crate::Error::ReservedBitsSet { what, after, offset, mask } => {
                                $crate::Error::ReservedBitsSet { what, after, offset: offset + $aoff, mask }
                            }
                            other => other,
                        })?;
                    }
                )+
                Ok(())
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            /// Writes one field.
            #[inline]
            pub fn set<V: $crate::bits::WireValue>(&mut self, f: $crate::bits::Field<V>, v: V) {
                f.set(self.buffer.as_mut(), v)
            }

            /// The bytes of one embedded attribute, writable.
            pub fn attribute_mut(&mut self, range: core::ops::Range<usize>) -> &mut [u8] {
                &mut self.buffer.as_mut()[range]
            }
        }

        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
        #[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
        pub struct Repr {
            $( $(#[$fmeta])* pub $field: $ty, )*
            $( $(#[$ameta])* pub $attr: $aty, )+
        }

        impl Repr {
            /// The record as the wire carries it (see `Wire::truncated`).
            pub fn truncated(&self) -> Repr {
                Repr {
                    $( $field: $crate::bits::WireValue::truncated(self.$field, $width), )*
                    $( $attr: $crate::Wire::truncated(&self.$attr), )+
                }
            }

            /// Parses the record from the start of `buf` (padding after it is ignored);
            /// reserved bits are ignored (see `Packet::check_reserved`).
            pub fn parse(buf: &[u8]) -> $crate::Result<Self> {
                let got = buf.len();
                if got < LEN {
                    return Err($crate::Error::Truncated { what: $what, need: LEN, got });
                }
                let buf = &buf[..LEN];
                Ok(Repr {
                    $( $field: field::$konst.get(buf), )*
                    $( $attr: <$aty as $crate::Wire>::parse(&buf[field::$akonst])?, )+
                })
            }

            /// Bytes `emit` writes.
            pub const fn buffer_len(&self) -> usize {
                LEN
            }

            /// Writes the record into the start of `buf`; reserved bits are zeroed.
            pub fn emit(&self, buf: &mut [u8]) -> $crate::Result<()> {
                let got = buf.len();
                if got < LEN {
                    return Err($crate::Error::BufferTooSmall { what: $what, need: LEN, got });
                }
                let buf = &mut buf[..LEN];
                buf.fill(0);
                $( field::$konst.set(buf, self.$field); )*
                $( $crate::Wire::emit(&self.$attr, &mut buf[field::$akonst])?; )+
                Ok(())
            }
        }

        impl $crate::Wire for Repr {
            const NAME: &'static str = $what;
            const LEN: usize = LEN;
            fn parse(buf: &[u8]) -> $crate::Result<Self> {
                Repr::parse(buf)
            }
            fn emit(&self, buf: &mut [u8]) -> $crate::Result<()> {
                Repr::emit(self, buf)
            }
            fn check_reserved(buf: &[u8]) -> $crate::Result<()> {
                Packet::new_checked(buf)?.check_reserved()
            }
            fn truncated(&self) -> Self {
                Repr::truncated(self)
            }
        }
    };
}
pub(crate) use wire_record;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_unaligned_bits() {
        let buf = [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x11];
        assert_eq!(get_bits(&buf, 0, 8), 0x12);
        assert_eq!(get_bits(&buf, 8, 16), 0x3456);
        assert_eq!(get_bits(&buf, 0, 4), 0x1);
        assert_eq!(get_bits(&buf, 4, 4), 0x2);
        assert_eq!(get_bits(&buf, 4, 12), 0x234);
        assert_eq!(get_bits(&buf, 3, 64), 0x91a2_b3c4_d5e6_f780);
        assert_eq!(get_bits(&buf, 15, 1), 0);
        assert_eq!(get_bits(&buf, 14, 1), 0);
        assert_eq!(get_bits(&buf, 13, 1), 1);
    }

    #[test]
    fn set_leaves_neighbours_alone() {
        let mut buf = [0xa5u8; 9];
        set_bits(&mut buf, 4, 12, 0);
        assert_eq!(buf[..2], [0xa0, 0x00]);
        assert_eq!(buf[2], 0xa5);
        set_bits(&mut buf, 3, 64, 0x91a2_b3c4_d5e6_f788);
        assert_eq!(get_bits(&buf, 3, 64), 0x91a2_b3c4_d5e6_f788);
        assert_eq!(get_bits(&buf, 0, 3), 0b101);
        set_bits(&mut buf, 13, 1, 1);
        assert_eq!(get_bits(&buf, 13, 1), 1);
    }

    #[test]
    fn reserved_reports_byte_and_mask() {
        let fields = [("a", 0, 12), ("b", 16, 8)];
        let buf = [0xff, 0b1111_0100, 0xff];
        let err = check_reserved("t", &buf, 3, &fields).unwrap_err();
        assert_eq!(
            err,
            crate::Error::ReservedBitsSet {
                what: "t",
                after: "a",
                offset: 1,
                mask: 0b0000_0100
            }
        );
        assert!(check_reserved("t", &[0xff, 0xf0, 0xff], 3, &fields).is_ok());
    }
}
