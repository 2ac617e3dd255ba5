//! LinearForwardingTable (IBA 14.2.5.10): the output port of 64 consecutive unicast LIDs,
//! one byte each. The attribute modifier is the block number, LID / 64.
//!
//! Unrouted entries: OpenSM fills every entry it has no route for (LID 0, LIDs nobody holds,
//! everything up to the end of the last block) with 255, its "no path" marker, which is not a
//! port any switch has, so the switch drops such packets. [`NO_ROUTE`] is that value and
//! [`Repr::default`] is a block of it. A switch's own LIDs map to port 0.

use core::ops::RangeInclusive;

use crate::table::{TableEntry, table_attribute};
use crate::{Error, Lid, PortNum, Result};

/// LIDs per block.
pub const ENTRIES: usize = 64;
/// Highest block: unicast LIDs end at 0xBFFF (LinearFDBCap is at most 49152).
pub const MAX_BLOCK: u16 = 767;
/// The output port of an unrouted LID (what OpenSM writes; see the module docs).
pub const NO_ROUTE: PortNum = PortNum(255);

const WHAT: &str = "LinearForwardingTable";

/// The block that holds `lid`'s entry.
pub const fn block_of(lid: Lid) -> u16 {
    lid.0 / ENTRIES as u16
}

/// The slot of `lid`'s entry in its block.
pub const fn slot_of(lid: Lid) -> usize {
    lid.0 as usize % ENTRIES
}

/// The LIDs block `block` covers (saturating at 0xFFFF beyond block 1023).
pub fn lid_range(block: u16) -> RangeInclusive<Lid> {
    let first = (block as u32 * ENTRIES as u32).min(0xffff) as u16;
    Lid(first)..=Lid(first.saturating_add(ENTRIES as u16 - 1))
}

/// Blocks needed to cover LIDs 0..=`top` (SwitchInfo.LinearFDBTop).
pub const fn blocks_for_top(top: Lid) -> u16 {
    block_of(top) + 1
}

/// Which block a MAD addresses: the whole attribute modifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub struct Modifier {
    /// LIDs `64 * block ..= 64 * block + 63`; 0..=767.
    pub block: u16,
}

impl Modifier {
    /// A modifier; `block` must be at most [`MAX_BLOCK`].
    pub fn new(block: u16) -> Result<Modifier> {
        Modifier::from_attr_mod(u32::from(block))
    }

    /// The block holding `lid`'s entry (any LID: multicast ones give blocks above
    /// [`MAX_BLOCK`], which `from_attr_mod` refuses).
    pub const fn for_lid(lid: Lid) -> Modifier {
        Modifier {
            block: block_of(lid),
        }
    }

    /// The 32-bit attribute modifier.
    pub const fn to_attr_mod(self) -> u32 {
        self.block as u32
    }

    /// The block an attribute modifier names; anything above [`MAX_BLOCK`] is rejected.
    pub fn from_attr_mod(attr_mod: u32) -> Result<Modifier> {
        if attr_mod > MAX_BLOCK as u32 {
            return Err(Error::InvalidField {
                what: "LinearForwardingTable attribute modifier",
                field: "block",
                value: attr_mod as u64,
            });
        }
        Ok(Modifier {
            block: attr_mod as u16,
        })
    }
}

/// The attribute modifier for `block` (as [`Modifier::to_attr_mod`]).
pub const fn attr_mod(block: u16) -> u32 {
    Modifier { block }.to_attr_mod()
}

/// The block an attribute modifier names (as [`Modifier::from_attr_mod`]).
pub fn block_from_attr_mod(attr_mod: u32) -> Result<u16> {
    Modifier::from_attr_mod(attr_mod).map(|m| m.block)
}

/// An entry is the output port, one byte.
impl TableEntry for PortNum {
    const BITS: usize = 8;
    const FIELDS: &'static [(&'static str, usize, usize)] = &[("port", 0, 8)];
}

table_attribute! {
    /// One block: the output ports of LIDs `64 * block ..= 64 * block + 63`.
    pub struct Repr(WHAT, id = crate::attr::LINEAR_FORWARDING_TABLE, modifier = Modifier) {
        pub port_block: [PortNum; ENTRIES],
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The output port in slot `i` (0..64).
    pub fn port(&self, i: usize) -> Option<PortNum> {
        self.entry(i)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the output port in slot `i` (0..64).
    pub fn set_port(&mut self, i: usize, port: PortNum) -> Result<()> {
        self.set_entry(i, port)
    }
}

impl Default for Repr {
    /// Every LID unrouted.
    fn default() -> Self {
        Repr {
            port_block: [NO_ROUTE; ENTRIES],
        }
    }
}

impl Repr {
    /// Block `block` of a whole table indexed by LID (one port byte per LID, as routing
    /// produces it); LIDs past the end of `table` are unrouted.
    pub fn from_table(table: &[u8], block: u16) -> Repr {
        let start = (block as usize * ENTRIES).min(table.len());
        let end = (start + ENTRIES).min(table.len());
        let mut r = Repr::default();
        for (slot, &p) in r.port_block.iter_mut().zip(&table[start..end]) {
            *slot = PortNum(p);
        }
        r
    }

    /// The block as bytes, one per LID.
    pub fn to_ports(&self) -> [u8; ENTRIES] {
        self.port_block.map(|p| p.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ibsim net.2sw2path4hca after `opensm -o` (minhop): `ibroute -d -d -d 1`, block 0 of
    // Switch1 (LID 1). LID 0 and LIDs 7..=63 are unrouted (255); LID 1 is the switch itself.
    const SWITCH1_BLOCK0: [u8; 64] = [
        0xff, 0x00, 0x01, 0x03, 0x03, 0x02, 0x05, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff,
    ];
    // Same fabric, OpenSM running (minhop): `ibroute -d -d -d 3`, block 0 of Switch2 (LID 3).
    const SWITCH2_BLOCK0: [u8; 64] = [
        0xff, 0x03, 0x03, 0x00, 0x01, 0x05, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff,
    ];

    #[test]
    fn parse_and_emit() {
        let r = Repr::parse(&SWITCH1_BLOCK0).unwrap();
        assert_eq!(r, Repr::from_table(&[255, 0, 1, 3, 3, 2, 5], 0));
        assert_eq!(r.port_block[slot_of(Lid(1))], PortNum(0));
        assert_eq!(r.port_block[slot_of(Lid(6))], PortNum(5));
        assert!(r.port_block[7..].iter().all(|&p| p == NO_ROUTE));
        let mut out = [0xa5u8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(out, SWITCH1_BLOCK0);

        let r = Repr::parse(&SWITCH2_BLOCK0).unwrap();
        assert_eq!(r.port_block[3], PortNum(0));
        let mut out = [0xa5u8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(out, SWITCH2_BLOCK0);
    }

    #[test]
    fn from_table_cuts_blocks() {
        let table: Vec<u8> = (0..=129u32).map(|l| (l % 36) as u8).collect();
        let b1 = Repr::from_table(&table, 1);
        assert_eq!(b1.port_block[0], PortNum(64 % 36));
        let b2 = Repr::from_table(&table, 2);
        assert_eq!(b2.port_block[1], PortNum(129 % 36));
        assert!(b2.port_block[2..].iter().all(|&p| p == NO_ROUTE));
        assert_eq!(Repr::from_table(&table, 700), Repr::default());
        assert_eq!(Repr::from_table(&table, u16::MAX), Repr::default());
    }

    #[test]
    fn view_accessors() {
        let mut buf = SWITCH1_BLOCK0;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.port(2), Some(PortNum(1)));
        assert_eq!(p.port(64), None);
        p.set_port(63, PortNum(36)).unwrap();
        assert!(p.set_port(64, PortNum(1)).is_err());
        assert_eq!(buf[63], 36);
        assert_eq!(Packet::new_unchecked(&buf[..3]).port(3), None);
    }

    #[test]
    fn lid_helpers() {
        assert_eq!(block_of(Lid(63)), 0);
        assert_eq!(block_of(Lid(64)), 1);
        assert_eq!(block_of(Lid::MAX_UNICAST), MAX_BLOCK);
        assert_eq!(slot_of(Lid(130)), 2);
        assert_eq!(lid_range(0), Lid(0)..=Lid(63));
        assert_eq!(lid_range(MAX_BLOCK), Lid(0xbfc0)..=Lid(0xbfff));
        assert_eq!(lid_range(1023), Lid(0xffc0)..=Lid(0xffff));
        assert_eq!(lid_range(u16::MAX), Lid(0xffff)..=Lid(0xffff));
        assert!(lid_range(block_of(Lid(1000))).contains(&Lid(1000)));
        assert_eq!(blocks_for_top(Lid(6)), 1);
        assert_eq!(blocks_for_top(Lid(64)), 2);
        assert_eq!(attr_mod(5), 5);
        assert_eq!(block_from_attr_mod(767), Ok(767));
        assert_eq!(Modifier::for_lid(Lid(0x1234)).to_attr_mod(), 0x48);
        assert_eq!(Modifier::new(MAX_BLOCK), Modifier::from_attr_mod(767));
        assert!(Modifier::new(MAX_BLOCK + 1).is_err());
        assert!(Modifier::from_attr_mod(Modifier::for_lid(Lid(0xc000)).to_attr_mod()).is_err());
        assert!(matches!(
            block_from_attr_mod(768),
            Err(Error::InvalidField { field: "block", .. })
        ));
    }

    #[test]
    fn short_buffers() {
        assert_eq!(
            Repr::parse(&SWITCH1_BLOCK0[..63]),
            Err(Error::Truncated {
                what: "LinearForwardingTable",
                need: 64,
                got: 63
            })
        );
        assert!(Packet::new_checked(&SWITCH1_BLOCK0[..63]).is_err());
        let mut small = [0u8; 63];
        assert!(matches!(
            Repr::default().emit(&mut small),
            Err(Error::BufferTooSmall { need: 64, .. })
        ));
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(Repr::parse(&SWITCH1_BLOCK0).unwrap()).unwrap();
        let t = v["port_block"].as_array().unwrap();
        assert_eq!(t.len(), 64);
        assert_eq!(t[..7], [255, 0, 1, 3, 3, 2, 5]);
    }

    proptest::proptest! {
        #[test]
        fn prop_lid_is_in_its_block(lid: u16) {
            let lid = Lid(lid);
            let range = lid_range(block_of(lid));
            proptest::prop_assert!(range.contains(&lid));
            proptest::prop_assert_eq!(range.start().0 as usize + slot_of(lid), lid.0 as usize);
        }

        #[test]
        fn prop_bytes_round_trip(buf: [u8; 32], buf2: [u8; 32]) {
            let mut all = [0u8; 64];
            all[..32].copy_from_slice(&buf);
            all[32..].copy_from_slice(&buf2);
            let mut out = [0u8; 64];
            Repr::parse(&all).unwrap().emit(&mut out).unwrap();
            proptest::prop_assert_eq!(out, all);
        }
    }
}
