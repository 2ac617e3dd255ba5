//! P_KeyTable (IBA 14.2.5.7): one block of 32 partition keys, 2 bytes each.
//!
//! The attribute modifier selects the block (bits 0..=15) and, on a switch, the port whose
//! table is meant (bits 16..=23); channel adapters ignore the port.

use crate::table::{TableEntry, table_attribute};
use crate::{Error, PKey, PortNum, Result};

/// Keys per block.
pub const ENTRIES: usize = 32;
/// Highest block number: PartitionCap is 16 bits, so a table holds at most 65536 keys.
pub const MAX_BLOCK: u16 = 2047;

const WHAT: &str = "P_KeyTable";
const MOD_WHAT: &str = "P_KeyTable attribute modifier";

/// Blocks needed to cover a table of `partition_cap` keys (NodeInfo.PartitionCap for an
/// end port or a switch's port 0, SwitchInfo.PartitionEnforcementCap for switch ports).
pub const fn blocks_for_cap(partition_cap: u16) -> u16 {
    (partition_cap as u32).div_ceil(ENTRIES as u32) as u16
}

/// Which block of which port's table a MAD addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub struct Modifier {
    /// Entries `32 * block ..= 32 * block + 31`.
    pub block: u16,
    /// On a switch, the port whose table is meant; 0 (ignored) for channel adapters.
    pub port: PortNum,
}

impl Modifier {
    /// A block of an end port's (or a switch port 0's) table.
    pub const fn new(block: u16) -> Modifier {
        Modifier {
            block,
            port: PortNum(0),
        }
    }

    /// A block of the table of switch port `port`.
    pub const fn switch_port(port: PortNum, block: u16) -> Modifier {
        Modifier { block, port }
    }

    /// The block that holds table entry `index` of `port`, and the entry's slot in it.
    pub const fn for_index(port: PortNum, index: u16) -> (Modifier, usize) {
        (
            Modifier {
                block: index / ENTRIES as u16,
                port,
            },
            index as usize % ENTRIES,
        )
    }

    /// The 32-bit attribute modifier.
    pub const fn to_attr_mod(self) -> u32 {
        ((self.port.0 as u32) << 16) | self.block as u32
    }

    /// Splits an attribute modifier; reserved bits 24..=31 and blocks above
    /// [`MAX_BLOCK`] are rejected.
    pub fn from_attr_mod(attr_mod: u32) -> Result<Modifier> {
        if attr_mod >> 24 != 0 {
            return Err(Error::InvalidField {
                what: MOD_WHAT,
                field: "reserved",
                value: attr_mod as u64,
            });
        }
        let block = attr_mod as u16;
        if block > MAX_BLOCK {
            return Err(Error::InvalidField {
                what: MOD_WHAT,
                field: "block",
                value: block as u64,
            });
        }
        Ok(Modifier {
            block,
            port: PortNum((attr_mod >> 16) as u8),
        })
    }
}

/// An entry is a P_Key, 16 bits.
impl TableEntry for PKey {
    const BITS: usize = 16;
    const FIELDS: &'static [(&'static str, usize, usize)] = &[("p_key", 0, 16)];
}

table_attribute! {
    /// One block of a P_KeyTable. Unused entries hold 0 (an invalid key).
    #[derive(Default)]
    pub struct Repr(WHAT, id = crate::attr::P_KEY_TABLE, modifier = Modifier) {
        /// Entries `32 * block ..= 32 * block + 31` of the port's table.
        pub p_key_table: [PKey; ENTRIES],
    }
}

impl Repr {
    /// A block holding `keys` from slot 0 (at most 32 are taken); the rest are invalid (0).
    pub fn from_keys(keys: &[PKey]) -> Repr {
        let mut r = Repr::default();
        for (slot, k) in r.p_key_table.iter_mut().zip(keys) {
            *slot = *k;
        }
        r
    }

    /// The slot of the first valid key of the same partition as `key`, whatever its
    /// membership bit.
    pub fn find_partition(&self, key: PKey) -> Option<usize> {
        self.p_key_table
            .iter()
            .position(|k| !k.is_invalid() && k.base() == key.base())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ibsim net.2sw2path4hca, OpenSM 3.3.23 run with a partitions.conf of
    //   Default=0x7fff,ipoib : ALL=full;
    //   Storage=0x0001 : 0x0000000000100001=full, 0x000000000010000a=limited;
    // then `smpquery -d -d -d pkeys 2` (Hca1, block 0). `smpquery -d -d -d pkeys 1 1`
    // (Switch1 port 1, attribute modifier 0x00010000) returned the same 64 bytes.
    const HCA1_BLOCK0: [u8; 64] = [
        0xff, 0xff, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];
    // Same fabric and run, `smpquery -d -d -d pkeys 6` (Hca4, a limited member of 0x0001).
    const HCA4_BLOCK0: [u8; 64] = [
        0xff, 0xff, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn parse_and_emit() {
        let r = Repr::parse(&HCA1_BLOCK0).unwrap();
        assert_eq!(r, Repr::from_keys(&[PKey::DEFAULT, PKey(0x8001)]));
        assert!(r.p_key_table[2..].iter().all(|k| k.is_invalid()));
        let mut out = [0xa5u8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(out, HCA1_BLOCK0);

        let r = Repr::parse(&HCA4_BLOCK0).unwrap();
        assert!(!r.p_key_table[1].is_full());
        assert_eq!(r.find_partition(PKey(0x8001)), Some(1));
        assert_eq!(r.find_partition(PKey(0x7fff)), Some(0));
        assert_eq!(r.find_partition(PKey(0x8002)), None);
        let mut out = [0xa5u8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(out, HCA4_BLOCK0);
    }

    #[test]
    fn any_bytes_round_trip() {
        let mut buf = [0u8; 64];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37) ^ 0x5a;
        }
        let mut out = [0u8; 64];
        Repr::parse(&buf).unwrap().emit(&mut out).unwrap();
        assert_eq!(out, buf);
    }

    #[test]
    fn view_accessors() {
        let mut buf = HCA1_BLOCK0;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.entry(1), Some(PKey(0x8001)));
        assert_eq!(p.entry(32), None);
        p.set_entry(31, PKey(0x1234)).unwrap();
        assert!(p.set_entry(32, PKey(1)).is_err());
        assert_eq!(&buf[62..], &[0x12, 0x34]);
        assert_eq!(Packet::new_unchecked(&buf[..10]).entry(5), None);
    }

    #[test]
    fn modifier() {
        // The modifiers smpquery sent for `pkeys 1 1` (switch port 1, blocks 0 and 1).
        assert_eq!(
            Modifier::from_attr_mod(0x0001_0000).unwrap(),
            Modifier::switch_port(PortNum(1), 0)
        );
        assert_eq!(
            Modifier::switch_port(PortNum(1), 1).to_attr_mod(),
            0x0001_0001
        );
        assert_eq!(Modifier::new(3).to_attr_mod(), 3);
        assert_eq!(
            Modifier::for_index(PortNum(7), 65),
            (Modifier::switch_port(PortNum(7), 2), 1)
        );
        let max = Modifier::switch_port(PortNum(255), MAX_BLOCK);
        assert_eq!(Modifier::from_attr_mod(max.to_attr_mod()).unwrap(), max);
        assert!(matches!(
            Modifier::from_attr_mod(0x0100_0000),
            Err(Error::InvalidField {
                field: "reserved",
                ..
            })
        ));
        assert!(matches!(
            Modifier::from_attr_mod(2048),
            Err(Error::InvalidField { field: "block", .. })
        ));
        assert_eq!(blocks_for_cap(0), 0);
        assert_eq!(blocks_for_cap(8), 1);
        assert_eq!(blocks_for_cap(64), 2);
        assert_eq!(blocks_for_cap(65), 3);
        assert_eq!(blocks_for_cap(u16::MAX), 2048);
    }

    #[test]
    fn short_buffers() {
        assert_eq!(
            Repr::parse(&HCA1_BLOCK0[..63]),
            Err(Error::Truncated {
                what: "P_KeyTable",
                need: 64,
                got: 63
            })
        );
        assert!(Packet::new_checked(&HCA1_BLOCK0[..63]).is_err());
        let mut small = [0u8; 63];
        assert!(matches!(
            Repr::default().emit(&mut small),
            Err(Error::BufferTooSmall { need: 64, .. })
        ));
    }

    #[test]
    fn json() {
        let r = Repr::parse(&HCA4_BLOCK0).unwrap();
        let v = serde_json::to_value(r).unwrap();
        let t = v["p_key_table"].as_array().unwrap();
        assert_eq!(t.len(), 32);
        assert_eq!(t[0], "0xffff");
        assert_eq!(t[1], "0x0001");
    }

    proptest::proptest! {
        #[test]
        fn prop_modifier_round_trips(port: u8, block in 0u16..=MAX_BLOCK, junk: u32) {
            let m = (port as u32) << 16 | block as u32;
            let x = Modifier::from_attr_mod(m).unwrap();
            proptest::prop_assert_eq!(x, Modifier::switch_port(PortNum(port), block));
            proptest::prop_assert_eq!(x.to_attr_mod(), m);
            if let Ok(x) = Modifier::from_attr_mod(junk) {
                proptest::prop_assert_eq!(x.to_attr_mod(), junk);
            }
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
