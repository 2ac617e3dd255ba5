//! VLArbitrationTable (IBA 14.2.5.9): 32 (VL, weight) entries of 2 bytes each, VL in the
//! low nibble of the first byte (its high nibble is reserved), weight in the second.
//!
//! A port has a low- and a high-priority table of up to 64 entries each (PortInfo's
//! VLArbitrationLowCap / HighCap), so the attribute modifier names one of four 32-entry
//! blocks (bits 16..=31) and, on a switch, the port (bits 0..=7).

use crate::bits::WireScalar;
use crate::table::{TableEntry, table_attribute};
use crate::{Error, PortNum, Result, Vl};

/// Entries per block.
pub const ENTRIES: usize = 32;

const WHAT: &str = "VLArbitrationTable";
const MOD_WHAT: &str = "VLArbitrationTable attribute modifier";

/// The four blocks, numbered as the attribute modifier numbers them (and as OpenSM,
/// ibsim and infiniband-diags use them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Block {
    /// Low-priority table, entries 0..=31.
    #[serde(rename = "low_0_to_31")]
    Low0To31 = 1,
    /// Low-priority table, entries 32..=63.
    #[serde(rename = "low_32_to_63")]
    Low32To63 = 2,
    /// High-priority table, entries 0..=31.
    #[serde(rename = "high_0_to_31")]
    High0To31 = 3,
    /// High-priority table, entries 32..=63.
    #[serde(rename = "high_32_to_63")]
    High32To63 = 4,
}

impl Block {
    /// All four, in modifier order.
    pub const ALL: [Block; 4] = [
        Block::Low0To31,
        Block::Low32To63,
        Block::High0To31,
        Block::High32To63,
    ];

    /// The block numbered `n` (1..=4).
    pub const fn from_number(n: u16) -> Option<Block> {
        match n {
            1 => Some(Block::Low0To31),
            2 => Some(Block::Low32To63),
            3 => Some(Block::High0To31),
            4 => Some(Block::High32To63),
            _ => None,
        }
    }

    /// The block's number in the attribute modifier.
    pub const fn number(self) -> u16 {
        self as u16
    }

    /// Part of the high-priority table.
    pub const fn is_high_priority(self) -> bool {
        matches!(self, Block::High0To31 | Block::High32To63)
    }

    /// Index in its table of the block's first entry: 0 or 32.
    pub const fn first_entry(self) -> usize {
        match self {
            Block::Low0To31 | Block::High0To31 => 0,
            Block::Low32To63 | Block::High32To63 => ENTRIES,
        }
    }

    /// How many of the block's 32 entries a port implements, given the capacity of the
    /// table the block belongs to (VLArbitrationLowCap or HighCap).
    pub const fn implemented(self, cap: u8) -> usize {
        let rest = (cap as usize).saturating_sub(self.first_entry());
        if rest > ENTRIES { ENTRIES } else { rest }
    }

    /// The blocks a port with these capacities implements, in modifier order.
    pub fn present(low_cap: u8, high_cap: u8) -> impl Iterator<Item = Block> {
        Block::ALL.into_iter().filter(move |b| {
            let cap = if b.is_high_priority() {
                high_cap
            } else {
                low_cap
            };
            b.implemented(cap) > 0
        })
    }
}

/// Which block of which port's tables a MAD addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Modifier {
    pub block: Block,
    /// On a switch, the port whose table is meant; 0 (ignored) for channel adapters.
    pub port: PortNum,
}

impl Modifier {
    /// A block of an end port's tables (or a switch's enhanced port 0).
    pub const fn new(block: Block) -> Modifier {
        Modifier {
            block,
            port: PortNum(0),
        }
    }

    /// A block of switch port `port`'s tables.
    pub const fn switch_port(port: PortNum, block: Block) -> Modifier {
        Modifier { block, port }
    }

    /// The 32-bit attribute modifier.
    pub const fn to_attr_mod(self) -> u32 {
        ((self.block.number() as u32) << 16) | self.port.0 as u32
    }

    /// Splits an attribute modifier; block numbers outside 1..=4 and reserved bits
    /// 8..=15 are rejected.
    pub fn from_attr_mod(attr_mod: u32) -> Result<Modifier> {
        if attr_mod & 0xff00 != 0 {
            return Err(Error::InvalidField {
                what: MOD_WHAT,
                field: "reserved",
                value: attr_mod as u64,
            });
        }
        let n = (attr_mod >> 16) as u16;
        let block = Block::from_number(n).ok_or(Error::InvalidField {
            what: MOD_WHAT,
            field: "block",
            value: n as u64,
        })?;
        Ok(Modifier {
            block,
            port: PortNum(attr_mod as u8),
        })
    }
}

/// One arbitration entry: send up to `weight` x 64 bytes from `vl` before moving on.
/// Weight 0 skips the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Entry {
    pub vl: Vl,
    pub weight: u8,
}

impl Entry {
    /// An entry.
    pub const fn new(vl: u8, weight: u8) -> Entry {
        Entry { vl: Vl(vl), weight }
    }
}

/// Four reserved bits, the VL in the low nibble of the first byte, the weight in the
/// second.
impl WireScalar for Entry {
    #[inline(always)]
    fn from_raw(raw: u64) -> Self {
        Entry {
            vl: Vl((raw >> 8) as u8 & 0x0f),
            weight: raw as u8,
        }
    }
    #[inline(always)]
    fn to_raw(self) -> u64 {
        u64::from(self.vl.0 & 0x0f) << 8 | u64::from(self.weight)
    }
}

impl TableEntry for Entry {
    const BITS: usize = 16;
    const FIELDS: &'static [(&'static str, usize, usize)] = &[("vl", 4, 4), ("weight", 8, 8)];

    /// The VL's check is the SL-to-VL table's (`sl2vl`): 0..=15.
    #[inline(always)]
    fn check(self, what: &'static str) -> Result<()> {
        self.vl.check(what)
    }

    // Byte by byte: the optimiser vectorises this, not the raw-bits round trip (emit
    // took three times as long).
    #[inline(always)]
    fn read(buf: &[u8], i: usize) -> Self {
        Entry {
            vl: Vl(buf[2 * i] & 0x0f),
            weight: buf[2 * i + 1],
        }
    }

    // `check` has passed, so the VL needs no mask.
    #[inline(always)]
    fn write(self, buf: &mut [u8], i: usize) {
        buf[2 * i] = self.vl.0;
        buf[2 * i + 1] = self.weight;
    }
}

table_attribute! {
    /// One 32-entry block of a VL arbitration table.
    #[derive(Default)]
    pub struct Repr(WHAT, id = crate::attr::VL_ARBITRATION_TABLE, modifier = Modifier) {
        pub vl_arbitration_table: [Entry; ENTRIES],
    }
}

impl Repr {
    /// A block holding `entries` from slot 0 (at most 32 are taken); the rest are
    /// (VL0, weight 0), which arbitration skips.
    pub fn from_entries(entries: &[Entry]) -> Repr {
        let mut r = Repr::default();
        for (slot, e) in r.vl_arbitration_table.iter_mut().zip(entries) {
            *slot = *e;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ibsim net.2sw2path4hca after `opensm -o` (OpenSM's default QoS tables): from
    // `smpquery -d -d -d -D vlarb 0 1` (Switch1 port 1, VLArbitrationLowCap = HighCap = 8),
    // the low-priority block, attribute modifier 0x00010001.
    const LOW: [u8; 64] = [
        0x00, 0x00, 0x01, 0x04, 0x02, 0x04, 0x03, 0x04, 0x04, 0x04, 0x05, 0x04, 0x06, 0x04, 0x07,
        0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];
    // Same query, the high-priority block, attribute modifier 0x00030001.
    const HIGH: [u8; 64] = [
        0x00, 0x04, 0x01, 0x00, 0x02, 0x00, 0x03, 0x00, 0x04, 0x00, 0x05, 0x00, 0x06, 0x00, 0x07,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn parse_and_emit() {
        let low = Repr::parse(&LOW).unwrap();
        let mut expect = vec![Entry::new(0, 0)];
        expect.extend((1..8).map(|vl| Entry::new(vl, 4)));
        assert_eq!(low, Repr::from_entries(&expect));
        let high = Repr::parse(&HIGH).unwrap();
        let mut expect = vec![Entry::new(0, 4)];
        expect.extend((1..8).map(|vl| Entry::new(vl, 0)));
        assert_eq!(high, Repr::from_entries(&expect));
        for (r, bytes) in [(low, LOW), (high, HIGH)] {
            let mut out = [0xa5u8; 64];
            r.emit(&mut out).unwrap();
            assert_eq!(out, bytes);
        }
    }

    #[test]
    fn reserved_nibble() {
        let mut buf = LOW;
        buf[2] = 0x31;
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(
            p.check_reserved(),
            Err(Error::ReservedBitsSet {
                what: "VLArbitrationTable",
                // The nibble follows entry 0's weight and precedes entry 1's VL.
                after: "weight",
                offset: 2,
                mask: 0x30
            })
        );
        assert!(
            Packet::new_checked(&LOW[..])
                .unwrap()
                .check_reserved()
                .is_ok()
        );
        // Parsing ignores the reserved bits; emitting zeroes them.
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.vl_arbitration_table[1], Entry::new(1, 4));
        let mut out = [0u8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(out, LOW);
    }

    #[test]
    fn any_bytes_round_trip_without_reserved_bits() {
        let buf: [u8; 64] = core::array::from_fn(|i| {
            let x = (i as u8).wrapping_mul(73) ^ 0xc5;
            if i % 2 == 0 { x & 0x0f } else { x }
        });
        let mut out = [0u8; 64];
        Repr::parse(&buf).unwrap().emit(&mut out).unwrap();
        assert_eq!(out, buf);
    }

    #[test]
    fn view_accessors() {
        let mut buf = HIGH;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.entry(0), Some(Entry::new(0, 4)));
        assert_eq!(p.entry(32), None);
        p.set_entry(31, Entry::new(15, 255)).unwrap();
        assert!(p.set_entry(32, Entry::new(0, 1)).is_err());
        assert!(p.set_entry(0, Entry::new(16, 1)).is_err());
        assert_eq!(&buf[62..], &[0x0f, 0xff]);
        assert_eq!(Packet::new_unchecked(&buf[..4]).entry(2), None);
    }

    #[test]
    fn bad_vl_is_refused() {
        let r = Repr::from_entries(&[Entry::new(16, 1)]);
        assert!(matches!(
            r.emit(&mut [0u8; 64]),
            Err(Error::InvalidField { field: "vl", .. })
        ));
    }

    #[test]
    fn modifier() {
        // What smpquery sent for port 1's low and high blocks.
        assert_eq!(
            Modifier::from_attr_mod(0x0001_0001).unwrap(),
            Modifier::switch_port(PortNum(1), Block::Low0To31)
        );
        assert_eq!(
            Modifier::switch_port(PortNum(1), Block::High0To31).to_attr_mod(),
            0x0003_0001
        );
        assert_eq!(Modifier::new(Block::High32To63).to_attr_mod(), 0x0004_0000);
        for b in Block::ALL {
            let m = Modifier::switch_port(PortNum(36), b);
            assert_eq!(Modifier::from_attr_mod(m.to_attr_mod()).unwrap(), m);
        }
        assert!(matches!(
            Modifier::from_attr_mod(0x0000_0001),
            Err(Error::InvalidField { field: "block", .. })
        ));
        assert!(matches!(
            Modifier::from_attr_mod(0x0005_0001),
            Err(Error::InvalidField { field: "block", .. })
        ));
        assert!(matches!(
            Modifier::from_attr_mod(0x0001_0101),
            Err(Error::InvalidField {
                field: "reserved",
                ..
            })
        ));
    }

    #[test]
    fn blocks_and_caps() {
        assert_eq!(Block::Low0To31.implemented(8), 8);
        assert_eq!(Block::Low32To63.implemented(8), 0);
        assert_eq!(Block::High32To63.implemented(64), 32);
        assert_eq!(Block::High32To63.implemented(40), 8);
        assert_eq!(Block::High0To31.implemented(255), 32);
        assert!(Block::High0To31.is_high_priority() && !Block::Low32To63.is_high_priority());
        assert_eq!(Block::Low32To63.first_entry(), 32);
        let v: Vec<_> = Block::present(8, 8).collect();
        assert_eq!(v, [Block::Low0To31, Block::High0To31]);
        let v: Vec<_> = Block::present(64, 0).collect();
        assert_eq!(v, [Block::Low0To31, Block::Low32To63]);
        assert_eq!(Block::from_number(0), None);
        assert_eq!(Block::from_number(4).map(Block::number), Some(4));
    }

    #[test]
    fn short_buffers() {
        assert_eq!(
            Repr::parse(&LOW[..63]),
            Err(Error::Truncated {
                what: "VLArbitrationTable",
                need: 64,
                got: 63
            })
        );
        assert!(Packet::new_checked(&LOW[..63]).is_err());
        let mut small = [0u8; 63];
        assert!(matches!(
            Repr::default().emit(&mut small),
            Err(Error::BufferTooSmall { need: 64, .. })
        ));
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(Repr::parse(&LOW).unwrap()).unwrap();
        let t = v["vl_arbitration_table"].as_array().unwrap();
        assert_eq!(t.len(), 32);
        assert_eq!(t[1], serde_json::json!({"vl": 1, "weight": 4}));
        let m = serde_json::to_value(Modifier::switch_port(PortNum(3), Block::High32To63));
        assert_eq!(
            m.unwrap(),
            serde_json::json!({"block": "high_32_to_63", "port": 3})
        );
    }

    proptest::proptest! {
        #[test]
        fn prop_modifier_round_trips(block in 1u32..=4, port: u8, junk: u32) {
            let m = block << 16 | port as u32;
            let x = Modifier::from_attr_mod(m).unwrap();
            proptest::prop_assert_eq!(x.to_attr_mod(), m);
            if let Ok(x) = Modifier::from_attr_mod(junk) {
                proptest::prop_assert_eq!(x.to_attr_mod(), junk);
            }
        }

        #[test]
        fn prop_byte_access_matches_raw_bits(b: [u8; 2], vl in 0u8..16, weight: u8) {
            let raw = u64::from(u16::from_be_bytes(b));
            proptest::prop_assert_eq!(Entry::read(&b, 0), Entry::from_raw(raw));
            let e = Entry::new(vl, weight);
            let mut out = [0xa5u8; 2];
            e.write(&mut out, 0);
            proptest::prop_assert_eq!(out, (e.to_raw() as u16).to_be_bytes());
        }

        #[test]
        fn prop_bytes_round_trip_less_reserved(buf: [u8; 32], buf2: [u8; 32]) {
            let mut all = [0u8; 64];
            all[..32].copy_from_slice(&buf);
            all[32..].copy_from_slice(&buf2);
            let mut out = [0u8; 64];
            Repr::parse(&all).unwrap().emit(&mut out).unwrap();
            let clean = Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok();
            proptest::prop_assert!(clean);
            for (i, (o, a)) in out.iter().zip(&all).enumerate() {
                let keep = if i % 2 == 0 { 0x0f } else { 0xff };
                proptest::prop_assert_eq!(*o, a & keep);
            }
        }
    }
}
