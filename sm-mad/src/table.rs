//! The shape the five table attributes share: a block of `N` fixed-width entries packed
//! back to back from bit 0, and an attribute modifier saying which block (and, on a switch,
//! which port or port pair) a MAD carries.
//!
//! | attribute | entries | entry |
//! |---|---|---|
//! | LinearForwardingTable | 64 | 8-bit output port |
//! | MulticastForwardingTable | 32 | 16-bit port mask |
//! | P_KeyTable | 32 | 16-bit P_Key |
//! | SLtoVLMappingTable | 16 | 4-bit VL |
//! | VLArbitrationTable | 32 | 16 bits: 4 reserved, 4-bit VL, 8-bit weight |
//!
//! An entry type says how wide it is and which of its bits are fields ([`TableEntry`]);
//! `table_attribute!` then writes the module's `LEN`, `Packet` view (`entry`, `set_entry`,
//! `check_reserved`) and `Repr` (`parse`, `buffer_len`, `emit`, JSON, [`Wire`],
//! [`SmpAttribute`], [`Table`]) from it. What differs between the tables (helpers over
//! LIDs, ports and SLs, the modifier layout, the default block) stays in their modules.

use crate::bits::{WireScalar, get_bits, set_bits};
use crate::{Error, Result, SmpAttribute};

/// One entry of a table attribute.
pub trait TableEntry: WireScalar {
    /// Width on the wire, in bits.
    const BITS: usize;
    /// The entry's fields as (name, bit offset from the entry's first bit, width), in
    /// offset order; bits no field names are reserved (parsed as zero, emitted as zero).
    const FIELDS: &'static [(&'static str, usize, usize)];

    /// Refuses a value the entry's bits cannot carry (emit fails rather than cut it).
    #[inline(always)]
    fn check(self, what: &'static str) -> Result<()> {
        let _ = what;
        Ok(())
    }

    /// Reads entry `i` of a block; the caller guarantees it lies in `buf`. An entry made
    /// of whole-byte fields may read them byte by byte instead of through its raw bits,
    /// which the optimiser vectorises better.
    #[inline(always)]
    fn read(buf: &[u8], i: usize) -> Self {
        Self::from_raw(raw_at::<Self>(buf, i))
    }

    /// Writes entry `i` of a block, reserved bits zeroed, once `check` has passed; the
    /// caller guarantees it lies in `buf`. May be done byte by byte as `read`.
    #[inline(always)]
    fn write(self, buf: &mut [u8], i: usize) {
        set_raw_at::<Self>(buf, i, self.to_raw())
    }
}

/// An attribute modifier of a table attribute.
pub trait AttrModifier: Sized + Copy {
    /// The 32-bit attribute modifier.
    fn to_attr_mod(self) -> u32;
    /// Splits an attribute modifier, refusing reserved bits and out-of-range blocks.
    fn from_attr_mod(attr_mod: u32) -> Result<Self>;
}

/// A table attribute: a block of [`Table::ENTRIES`] entries.
pub trait Table: SmpAttribute {
    /// What one slot holds.
    type Entry: TableEntry;
    /// Which block a MAD addresses.
    type Modifier: AttrModifier;
    /// Entries per block.
    const ENTRIES: usize;
    /// The block's entries, slot 0 first.
    fn entries(&self) -> &[Self::Entry];
    /// The same, writable.
    fn entries_mut(&mut self) -> &mut [Self::Entry];
}

/// The field list of a whole block (every entry's fields at its offset), for the reserved
/// bit check. `M` is the block's entry count times the entry's field count.
pub const fn block_fields<const M: usize>(
    fields: &[(&'static str, usize, usize)],
    bits: usize,
) -> [(&'static str, usize, usize); M] {
    let mut out = [("", 0, 0); M];
    let mut i = 0;
    while i < M {
        let f = fields[i % fields.len()];
        out[i] = (f.0, (i / fields.len()) * bits + f.1, f.2);
        i += 1;
    }
    out
}

/// The raw bits of entry `i`; the caller guarantees the entry lies in `buf`.
#[inline(always)]
fn raw_at<E: TableEntry>(buf: &[u8], i: usize) -> u64 {
    // The width is a constant per entry type, so one arm is left; whole bytes are read as
    // integers, which the optimiser turns into wide loads.
    match E::BITS {
        8 => u64::from(buf[i]),
        16 => u64::from(u16::from_be_bytes([buf[2 * i], buf[2 * i + 1]])),
        _ => get_bits(buf, i * E::BITS, E::BITS),
    }
}

#[inline(always)]
fn set_raw_at<E: TableEntry>(buf: &mut [u8], i: usize, raw: u64) {
    match E::BITS {
        8 => buf[i] = raw as u8,
        16 => buf[2 * i..2 * i + 2].copy_from_slice(&(raw as u16).to_be_bytes()),
        _ => set_bits(buf, i * E::BITS, E::BITS, raw),
    }
}

/// The largest block: an SMP's data field.
pub(crate) const MAX_LEN: usize = 64;

/// One past the last byte of entry `i`.
#[inline(always)]
const fn end_byte(bits: usize, i: usize) -> usize {
    ((i + 1) * bits).div_ceil(8)
}

/// Parses `out.len()` entries from the start of `buf` into `out` (in place: the
/// optimiser then copies whole-byte blocks with wide loads).
#[inline]
pub(crate) fn parse<E: TableEntry>(what: &'static str, buf: &[u8], out: &mut [E]) -> Result<()> {
    let need = out.len() * E::BITS / 8;
    let got = buf.len();
    if got < need {
        return Err(Error::Truncated { what, need, got });
    }
    if E::BITS % 8 == 0 {
        // Whole-byte entries (a constant per type): chunks leave no bounds check. `buf` is
        // not cut to the block first: with a trip count only known at run time the loop is
        // vectorised as a loop (masked wide copies) instead of unrolled into byte moves.
        for (e, b) in out.iter_mut().zip(buf.chunks_exact(E::BITS / 8)) {
            *e = E::read(b, 0);
        }
    } else {
        for (i, e) in out.iter_mut().enumerate() {
            *e = E::read(buf, i);
        }
    }
    Ok(())
}

/// Writes `entries` into the start of `buf`; nothing is written when an entry fails its
/// check. Reserved bits come out zero.
#[inline]
pub(crate) fn emit<E: TableEntry>(what: &'static str, entries: &[E], buf: &mut [u8]) -> Result<()> {
    let need = entries.len() * E::BITS / 8;
    let got = buf.len();
    if got < need {
        return Err(Error::BufferTooSmall { what, need, got });
    }
    for e in entries {
        e.check(what)?;
    }
    // Every bit of the block belongs to some entry, so writing each whole entry (reserved
    // bits included, as zero from `to_raw`) leaves nothing stale. As in `parse`, `buf` is
    // not cut to the block first, which keeps the loops vectorised.
    if E::BITS == 8 {
        // Through a local block: the optimiser cannot always tell that `buf` and `entries`
        // do not overlap, and then copies byte by byte.
        let mut block = [0u8; MAX_LEN];
        for (b, e) in block.iter_mut().zip(entries) {
            e.write(core::slice::from_mut(b), 0);
        }
        buf[..need].copy_from_slice(&block[..need]);
    } else if E::BITS % 8 == 0 {
        for (b, e) in buf.chunks_exact_mut(E::BITS / 8).zip(entries) {
            e.write(b, 0);
        }
    } else {
        for (i, e) in entries.iter().enumerate() {
            e.write(buf, i);
        }
    }
    Ok(())
}

/// Entry `i` of a block of `n` in `buf`; `None` past the block or the buffer.
#[inline]
pub(crate) fn get<E: TableEntry>(buf: &[u8], n: usize, i: usize) -> Option<E> {
    if i >= n || buf.len() < end_byte(E::BITS, i) {
        return None;
    }
    Some(E::read(buf, i))
}

/// Writes entry `i` of a block of `n` in `buf`, leaving the other entries alone.
#[inline]
pub(crate) fn set<E: TableEntry>(
    what: &'static str,
    buf: &mut [u8],
    n: usize,
    i: usize,
    e: E,
) -> Result<()> {
    e.check(what)?;
    if i >= n || buf.len() < end_byte(E::BITS, i) {
        return Err(Error::InvalidField {
            what,
            field: "index",
            value: i as u64,
        });
    }
    e.write(buf, i);
    Ok(())
}

/// Writes, in the invoking module, `LEN`, the `Packet` view and the `Repr` of a table
/// attribute whose entries are `[Entry; ENTRIES]` in field `name` (see the module doc).
/// `json = Wrapper` serialises each entry as `Wrapper(entry)` instead of itself.
macro_rules! table_attribute {
    (
        $(#[$meta:meta])*
        pub struct Repr($what:expr, id = $id:expr, modifier = $modifier:ty) {
            $(#[$fmeta:meta])*
            pub $field:ident: [$entry:ty; $n:ident],
        }
        $( json = $json:path; )?
    ) => {
        /// Length on the wire.
        pub const LEN: usize = $n * <$entry as $crate::table::TableEntry>::BITS / 8;

        const _: () = assert!(
            $n * <$entry as $crate::table::TableEntry>::BITS == LEN * 8,
            "the entries must fill whole bytes"
        );
        const _: () = assert!(LEN <= $crate::table::MAX_LEN, "a block fits an SMP");

        /// Every field of the block as (name, bit offset, bit width); the other bits are
        /// reserved.
        const FIELDS: [(&str, usize, usize);
            $n * <$entry as $crate::table::TableEntry>::FIELDS.len()] =
            $crate::table::block_fields(
                <$entry as $crate::table::TableEntry>::FIELDS,
                <$entry as $crate::table::TableEntry>::BITS,
            );

        $crate::bits::packet_view! {
            /// Zero-copy view over one block.
            view $what, LEN
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Entry `i` of the block; `None` past the block or the buffer.
            #[inline]
            pub fn entry(&self, i: usize) -> Option<$entry> {
                $crate::table::get(self.buffer.as_ref(), $n, i)
            }

            /// Fails on the first reserved bit that is set.
            pub fn check_reserved(&self) -> $crate::Result<()> {
                $crate::bits::check_reserved($what, self.buffer.as_ref(), LEN, &FIELDS)
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            /// Writes entry `i` of the block, which must pass the entry's check.
            #[inline]
            pub fn set_entry(&mut self, i: usize, e: $entry) -> $crate::Result<()> {
                $crate::table::set($what, self.buffer.as_mut(), $n, i, e)
            }
        }

        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
        pub struct Repr {
            $(#[$fmeta])*
            pub $field: [$entry; $n],
        }

        impl Repr {
            /// Parses a block; reserved bits are ignored (see `Packet::check_reserved`).
            pub fn parse(buf: &[u8]) -> $crate::Result<Repr> {
                let mut r = Repr {
                    $field: [<$entry as $crate::WireScalar>::from_raw(0); $n],
                };
                $crate::table::parse($what, buf, &mut r.$field)?;
                Ok(r)
            }

            /// Bytes `emit` writes.
            pub const fn buffer_len(&self) -> usize {
                LEN
            }

            /// Writes the block with reserved bits zeroed; an entry that fails its check is
            /// an error rather than silently cut.
            #[inline]
            pub fn emit(&self, buf: &mut [u8]) -> $crate::Result<()> {
                $crate::table::emit($what, &self.$field, buf)
            }
        }

        impl serde::Serialize for Repr {
            fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct;
                let mut st = s.serialize_struct($what, 1)?;
                $crate::table::table_attribute!(@json st, stringify!($field), &self.$field $(, $json)?);
                st.end()
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
        }

        impl $crate::SmpAttribute for Repr {
            const ID: u16 = $id;
        }

        impl $crate::table::Table for Repr {
            type Entry = $entry;
            type Modifier = $modifier;
            const ENTRIES: usize = $n;
            fn entries(&self) -> &[$entry] {
                &self.$field
            }
            fn entries_mut(&mut self) -> &mut [$entry] {
                &mut self.$field
            }
        }

        impl $crate::table::AttrModifier for $modifier {
            fn to_attr_mod(self) -> u32 {
                <$modifier>::to_attr_mod(self)
            }
            fn from_attr_mod(attr_mod: u32) -> $crate::Result<Self> {
                <$modifier>::from_attr_mod(attr_mod)
            }
        }
    };
    (@json $st:ident, $name:expr, $entries:expr) => {
        $st.serialize_field($name, &$entries[..])?
    };
    (@json $st:ident, $name:expr, $entries:expr, $json:path) => {
        $st.serialize_field($name, &$crate::table::Each($entries, $json))?
    };
}
pub(crate) use table_attribute;

/// Entries serialised each through a wrapper (a JSON sequence).
pub(crate) struct Each<'a, E, W>(pub(crate) &'a [E], pub(crate) fn(E) -> W);

impl<E: Copy, W: serde::Serialize> serde::Serialize for Each<'_, E, W> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|&e| (self.1)(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 12-bit entry: 3 reserved bits, then a 9-bit value; odd widths cross bytes.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    struct Odd(u16);

    impl WireScalar for Odd {
        fn from_raw(raw: u64) -> Self {
            Odd(raw as u16 & 0x1ff)
        }
        fn to_raw(self) -> u64 {
            u64::from(self.0 & 0x1ff)
        }
    }

    impl TableEntry for Odd {
        const BITS: usize = 12;
        const FIELDS: &'static [(&'static str, usize, usize)] = &[("value", 3, 9)];
        fn check(self, what: &'static str) -> Result<()> {
            if self.0 > 0x1ff {
                return Err(Error::InvalidField {
                    what,
                    field: "value",
                    value: u64::from(self.0),
                });
            }
            Ok(())
        }
    }

    #[test]
    fn odd_widths_cross_bytes() {
        // Raw entries 0x123, 0xeab (reserved bits set), 0x0ff, 0x1ff.
        let buf = [0x12, 0x3e, 0xab, 0x0f, 0xf1, 0xff];
        let mut e = [Odd(0); 4];
        parse("t", &buf, &mut e).unwrap();
        assert_eq!(e, [Odd(0x123), Odd(0x0ab), Odd(0x0ff), Odd(0x1ff)]);
        let mut out = [0xa5u8; 7];
        emit("t", &e, &mut out).unwrap();
        // Reserved bits zeroed, the byte after the block untouched.
        assert_eq!(out, [0x12, 0x30, 0xab, 0x0f, 0xf1, 0xff, 0xa5]);
        assert_eq!(get::<Odd>(&out, 4, 1), Some(Odd(0x0ab)));
        assert_eq!(get::<Odd>(&out[..2], 4, 1), None);
        assert_eq!(get::<Odd>(&out, 4, 4), None);
        set("t", &mut out, 4, 2, Odd(0x100)).unwrap();
        assert_eq!(out[..6], [0x12, 0x30, 0xab, 0x10, 0x01, 0xff]);
        assert!(set("t", &mut out, 4, 4, Odd(0)).is_err());
        assert_eq!(
            emit("t", &[Odd(0x200)], &mut out),
            Err(Error::InvalidField {
                what: "t",
                field: "value",
                value: 0x200
            })
        );
        assert_eq!(out[..2], [0x12, 0x30], "nothing written on a refused entry");
    }

    /// What every table attribute promises, through the traits only.
    fn shape<T: Table + Default + PartialEq + core::fmt::Debug>(mods: &[u32]) {
        assert_eq!(T::ENTRIES * <T::Entry as TableEntry>::BITS, T::LEN * 8);
        let mut t = T::default();
        assert_eq!(t.entries().len(), T::ENTRIES);
        let last = T::ENTRIES - 1;
        t.entries_mut()[last] = <T::Entry as WireScalar>::from_raw(1);
        let mut buf = [0xa5u8; 64];
        t.emit(&mut buf).unwrap();
        assert_eq!(T::parse(&buf).unwrap(), t);
        assert_eq!(T::check_reserved(&buf), Ok(()));
        let mut accepted = 0;
        for &m in mods {
            if let Ok(x) = T::Modifier::from_attr_mod(m) {
                assert_eq!(x.to_attr_mod(), m, "{}", T::NAME);
                accepted += 1;
            }
        }
        assert!(accepted > 0, "{}", T::NAME);
    }

    #[test]
    fn every_table_has_the_shape() {
        let mods = [0, 5, 0x0001_0003, 0x0003_0205, 0x1000_0002];
        shape::<crate::lft::Repr>(&mods);
        shape::<crate::mft::Repr>(&mods);
        shape::<crate::pkey_table::Repr>(&mods);
        shape::<crate::sl2vl::Repr>(&mods);
        shape::<crate::vl_arb::Repr>(&mods);
    }

    #[test]
    fn block_field_list() {
        let f: [_; 3] = block_fields(Odd::FIELDS, Odd::BITS);
        assert_eq!(f, [("value", 3, 9), ("value", 15, 9), ("value", 27, 9)]);
        let mut buf = [0u8; 5];
        buf[1] = 0x20; // bit 10: entry 0's value
        assert!(crate::bits::check_reserved("t", &buf, 5, &f).is_ok());
        buf[1] = 0x01; // bit 15: entry 1's first value bit
        assert!(crate::bits::check_reserved("t", &buf, 5, &f).is_ok());
        buf[1] = 0x08; // bit 12: entry 1's reserved bits
        assert!(crate::bits::check_reserved("t", &buf, 5, &f).is_err());
    }
}
