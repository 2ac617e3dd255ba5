//! MulticastForwardingTable (IBA 14.2.5.12): for 32 consecutive multicast LIDs, a 16-bit
//! mask of the output ports a packet is replicated to.
//!
//! The attribute modifier's bits 0..=8 select the block (MLIDs `0xC000 + 32 * block ..`)
//! and bits 28..=31 the position: which group of 16 ports the masks cover (bit `i` of a mask
//! is port `16 * position + i`). Switches with more than 15 ports need several positions
//! per block.

use core::ops::RangeInclusive;

use crate::table::{TableEntry, table_attribute};
use crate::{Error, Lid, PortNum, Result};

/// MLIDs per block.
pub const ENTRIES: usize = 32;
/// Ports per mask.
pub const PORTS_PER_MASK: u8 = 16;
/// Highest block (MLIDs 0xFFE0..=0xFFFF).
pub const MAX_BLOCK: u16 = 511;
/// Highest position (ports 240..=255).
pub const MAX_POSITION: u8 = 15;

const WHAT: &str = "MulticastForwardingTable";
const MOD_WHAT: &str = "MulticastForwardingTable attribute modifier";

/// The block that holds `mlid`'s entry, or `None` for a LID below 0xC000.
pub const fn block_of(mlid: Lid) -> Option<u16> {
    match mlid.0.checked_sub(Lid::MIN_MULTICAST.0) {
        Some(off) => Some(off / ENTRIES as u16),
        None => None,
    }
}

/// The slot of `mlid`'s entry in its block.
pub const fn slot_of(mlid: Lid) -> usize {
    mlid.0 as usize % ENTRIES
}

/// The MLIDs block `block` covers (saturating at 0xFFFF beyond block 511).
pub fn mlid_range(block: u16) -> RangeInclusive<Lid> {
    let first = (Lid::MIN_MULTICAST.0 as u32 + block as u32 * ENTRIES as u32).min(0xffff) as u16;
    Lid(first)..=Lid(first.saturating_add(ENTRIES as u16 - 1))
}

/// The position whose masks hold `port`.
pub const fn position_of(port: PortNum) -> u8 {
    port.0 / PORTS_PER_MASK
}

/// `port`'s bit in the masks of its position.
pub const fn bit_of(port: PortNum) -> u16 {
    1 << (port.0 % PORTS_PER_MASK)
}

/// Positions needed to cover ports 0..=`num_ports` (NodeInfo.NumPorts).
pub const fn positions_for(num_ports: u8) -> u8 {
    position_of(PortNum(num_ports)) + 1
}

/// Which block and which group of 16 ports a MAD addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub struct Modifier {
    /// MLIDs `0xC000 + 32 * block ..= 0xC000 + 32 * block + 31`; 0..=511.
    pub block: u16,
    /// Ports `16 * position ..= 16 * position + 15`; 0..=15.
    pub position: u8,
}

impl Modifier {
    /// A modifier; `block` must be at most 511 and `position` at most 15.
    pub fn new(block: u16, position: u8) -> Result<Modifier> {
        if block > MAX_BLOCK {
            return Err(Error::InvalidField {
                what: MOD_WHAT,
                field: "block",
                value: block as u64,
            });
        }
        if position > MAX_POSITION {
            return Err(Error::InvalidField {
                what: MOD_WHAT,
                field: "position",
                value: position as u64,
            });
        }
        Ok(Modifier { block, position })
    }

    /// The block and position holding `mlid`'s bit for `port`; `None` for a LID below
    /// 0xC000 or the permissive LID.
    pub const fn for_mlid_port(mlid: Lid, port: PortNum) -> Option<Modifier> {
        if !mlid.is_multicast() {
            return None;
        }
        match block_of(mlid) {
            Some(block) => Some(Modifier {
                block,
                position: position_of(port),
            }),
            None => None,
        }
    }

    /// The 32-bit attribute modifier (fields beyond their width are dropped).
    pub const fn to_attr_mod(self) -> u32 {
        ((self.position as u32 & 0xf) << 28) | (self.block as u32 & 0x1ff)
    }

    /// Splits an attribute modifier; reserved bits 9..=27 are rejected.
    pub fn from_attr_mod(attr_mod: u32) -> Result<Modifier> {
        if attr_mod & 0x0fff_fe00 != 0 {
            return Err(Error::InvalidField {
                what: MOD_WHAT,
                field: "reserved",
                value: attr_mod as u64,
            });
        }
        Ok(Modifier {
            block: (attr_mod & 0x1ff) as u16,
            position: (attr_mod >> 28) as u8,
        })
    }
}

/// An entry is a port mask, 16 bits.
impl TableEntry for u16 {
    const BITS: usize = 16;
    const FIELDS: &'static [(&'static str, usize, usize)] = &[("port_mask", 0, 16)];
}

table_attribute! {
    /// One block at one position: `port_mask_block[slot]` is the mask of MLID
    /// `0xC000 + 32 * block + slot` over ports `16 * position ..`. An unused MLID has mask 0.
    #[derive(Default)]
    pub struct Repr(WHAT, id = crate::attr::MULTICAST_FORWARDING_TABLE, modifier = Modifier) {
        pub port_mask_block: [u16; ENTRIES],
    }
    json = HexMask;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The port mask in slot `i` (0..32).
    pub fn port_mask(&self, i: usize) -> Option<u16> {
        self.entry(i)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the port mask in slot `i` (0..32).
    pub fn set_port_mask(&mut self, i: usize, mask: u16) -> Result<()> {
        self.set_entry(i, mask)
    }
}

impl Repr {
    /// Whether the mask in `slot` includes `port` (which must belong to this block's
    /// position; only its bit is looked at).
    pub fn has_port(&self, slot: usize, port: PortNum) -> bool {
        self.port_mask_block
            .get(slot)
            .is_some_and(|m| m & bit_of(port) != 0)
    }

    /// Adds `port` to the mask in `slot` (slots past 31 are ignored).
    pub fn add_port(&mut self, slot: usize, port: PortNum) {
        if let Some(m) = self.port_mask_block.get_mut(slot) {
            *m |= bit_of(port);
        }
    }
}

/// A port mask in JSON: a hex string, so the port bits read at a glance.
struct HexMask(u16);

impl serde::Serialize for HexMask {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:#06x}", self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ibsim net.2sw2path4hca with OpenSM running; Hca1, Hca4 and Hca2 then joined the IPoIB
    // broadcast group (MGID ff12:401b:ffff::ffff:ffff, MLID 0xC000) with an SA
    // MCMemberRecord Set (JoinState full) sent through libibumad under the shim.
    // `ibroute -d -d -d -M 1`: Switch1, block 0, position 0 (modifier 0): 0xC000 -> ports 1, 3.
    const SWITCH1_BLOCK0: [u8; 64] = [
        0x00, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];
    // Same run, `ibroute -d -d -d -M 3`: Switch2, block 0, position 0: 0xC000 -> ports 1, 2, 3.
    const SWITCH2_BLOCK0: [u8; 64] = [
        0x00, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn parse_and_emit() {
        let r = Repr::parse(&SWITCH1_BLOCK0).unwrap();
        assert_eq!(r.port_mask_block[0], 0x000a);
        assert!(r.has_port(0, PortNum(1)) && r.has_port(0, PortNum(3)));
        assert!(!r.has_port(0, PortNum(2)) && !r.has_port(1, PortNum(1)));
        assert!(!r.has_port(32, PortNum(1)));
        assert!(r.port_mask_block[1..].iter().all(|&m| m == 0));
        let mut out = [0xa5u8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(out, SWITCH1_BLOCK0);

        let mut built = Repr::default();
        for p in [1, 2, 3] {
            built.add_port(slot_of(Lid(0xc000)), PortNum(p));
        }
        built.add_port(40, PortNum(1));
        assert_eq!(Repr::parse(&SWITCH2_BLOCK0).unwrap(), built);
        let mut out = [0xa5u8; 64];
        built.emit(&mut out).unwrap();
        assert_eq!(out, SWITCH2_BLOCK0);
    }

    #[test]
    fn any_bytes_round_trip() {
        let buf: [u8; 64] = core::array::from_fn(|i| (i as u8).wrapping_mul(151) ^ 0x69);
        let mut out = [0u8; 64];
        Repr::parse(&buf).unwrap().emit(&mut out).unwrap();
        assert_eq!(out, buf);
    }

    #[test]
    fn view_accessors() {
        let mut buf = SWITCH1_BLOCK0;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.port_mask(0), Some(0x000a));
        assert_eq!(p.port_mask(32), None);
        p.set_port_mask(31, 0x8001).unwrap();
        assert!(p.set_port_mask(32, 1).is_err());
        assert_eq!(&buf[62..], &[0x80, 0x01]);
        assert_eq!(Packet::new_unchecked(&buf[..3]).port_mask(1), None);
    }

    #[test]
    fn modifier() {
        // ibroute -M reads block 0 at position 0 with modifier 0, then blocks 1, 2, ...
        assert_eq!(Modifier::from_attr_mod(0).unwrap(), Modifier::default());
        assert_eq!(
            Modifier::from_attr_mod(0x0000_001f).unwrap(),
            Modifier::new(31, 0).unwrap()
        );
        let m = Modifier::new(MAX_BLOCK, MAX_POSITION).unwrap();
        assert_eq!(m.to_attr_mod(), 0xf000_01ff);
        assert_eq!(Modifier::from_attr_mod(0xf000_01ff).unwrap(), m);
        assert_eq!(Modifier::new(2, 1).unwrap().to_attr_mod(), 0x1000_0002);
        assert!(matches!(
            Modifier::new(512, 0),
            Err(Error::InvalidField { field: "block", .. })
        ));
        assert!(matches!(
            Modifier::new(0, 16),
            Err(Error::InvalidField {
                field: "position",
                ..
            })
        ));
        assert!(matches!(
            Modifier::from_attr_mod(0x0000_0200),
            Err(Error::InvalidField {
                field: "reserved",
                ..
            })
        ));
        assert!(Modifier::from_attr_mod(0x0800_0000).is_err());
    }

    #[test]
    fn lid_and_port_helpers() {
        assert_eq!(block_of(Lid(0xc000)), Some(0));
        assert_eq!(block_of(Lid(0xc020)), Some(1));
        assert_eq!(block_of(Lid(0xfffe)), Some(MAX_BLOCK));
        assert_eq!(block_of(Lid(0xbfff)), None);
        assert_eq!(slot_of(Lid(0xc021)), 1);
        assert_eq!(mlid_range(0), Lid(0xc000)..=Lid(0xc01f));
        assert_eq!(mlid_range(MAX_BLOCK), Lid(0xffe0)..=Lid(0xffff));
        assert_eq!(mlid_range(u16::MAX), Lid(0xffff)..=Lid(0xffff));
        assert_eq!(position_of(PortNum(15)), 0);
        assert_eq!(position_of(PortNum(16)), 1);
        assert_eq!(position_of(PortNum(255)), MAX_POSITION);
        assert_eq!(bit_of(PortNum(17)), 0x0002);
        assert_eq!(positions_for(8), 1);
        assert_eq!(positions_for(36), 3);
        assert_eq!(
            Modifier::for_mlid_port(Lid(0xc041), PortNum(33)),
            Some(Modifier {
                block: 2,
                position: 2
            })
        );
        assert_eq!(Modifier::for_mlid_port(Lid(0x0041), PortNum(1)), None);
        assert_eq!(Modifier::for_mlid_port(Lid::PERMISSIVE, PortNum(1)), None);
    }

    #[test]
    fn short_buffers() {
        assert_eq!(
            Repr::parse(&SWITCH1_BLOCK0[..63]),
            Err(Error::Truncated {
                what: "MulticastForwardingTable",
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
        let v = serde_json::to_value(Repr::parse(&SWITCH2_BLOCK0).unwrap()).unwrap();
        let t = v["port_mask_block"].as_array().unwrap();
        assert_eq!(t.len(), 32);
        assert_eq!(t[0], "0x000e");
        assert_eq!(t[31], "0x0000");
    }

    proptest::proptest! {
        #[test]
        fn prop_modifier_round_trips(m: u32) {
            let m = m & 0xf000_01ff;
            let x = Modifier::from_attr_mod(m).unwrap();
            proptest::prop_assert_eq!(x.to_attr_mod(), m);
            proptest::prop_assert_eq!(Modifier::new(x.block, x.position), Ok(x));
        }

        #[test]
        fn prop_mlid_port_lands_in_its_block(mlid in 0xc000u16..=0xfffe, port: u8) {
            let m = Modifier::for_mlid_port(Lid(mlid), PortNum(port)).unwrap();
            proptest::prop_assert!(mlid_range(m.block).contains(&Lid(mlid)));
            proptest::prop_assert_eq!(Modifier::from_attr_mod(m.to_attr_mod()).unwrap(), m);
            let mut r = Repr::default();
            r.add_port(slot_of(Lid(mlid)), PortNum(port));
            proptest::prop_assert!(r.has_port(slot_of(Lid(mlid)), PortNum(port)));
        }
    }
}
