//! GUIDInfo (IBA 14.2.5.5): one block of a port's GUID table, eight GUIDs. 64 bytes.
//!
//! The attribute modifier is the block number: block `b` holds GUID indices `8b..8b+8`, and
//! PortInfo's GUIDCap says how many indices the port has. Index 0 is the port GUID.

use crate::bits::wire_via_inherent;
use crate::{Error, Guid, Result, SmpAttribute};

/// Length on the wire.
pub const LEN: usize = 64;
/// GUIDs per block.
pub const BLOCK_LEN: usize = 8;

/// The attribute modifier that addresses `block`.
pub const fn attr_mod(block: u8) -> u32 {
    block as u32
}

/// The block and the position inside it of GUID table index `index`.
pub const fn block_of(index: u8) -> (u8, usize) {
    (index / BLOCK_LEN as u8, index as usize % BLOCK_LEN)
}

fn check_index(index: usize) -> Result<()> {
    if index < BLOCK_LEN {
        Ok(())
    } else {
        Err(Error::InvalidField {
            what: "GUIDInfo",
            field: "guid_block index",
            value: index as u64,
        })
    }
}

/// Zero-copy view over a GUIDInfo block.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer of at least 64 bytes.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let got = buffer.as_ref().len();
        if got < LEN {
            return Err(Error::Truncated {
                what: "GUIDInfo",
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

    /// The GUID at position `index` (0..8) of the block.
    pub fn guid(&self, index: usize) -> Result<Guid> {
        check_index(index)?;
        let start = index * 8;
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buffer.as_ref()[start..start + 8]);
        Ok(Guid(u64::from_be_bytes(b)))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the GUID at position `index` (0..8) of the block.
    pub fn set_guid(&mut self, index: usize, guid: Guid) -> Result<()> {
        check_index(index)?;
        let start = index * 8;
        self.buffer.as_mut()[start..start + 8].copy_from_slice(&guid.0.to_be_bytes());
        Ok(())
    }
}

/// One GUIDInfo block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Repr {
    /// Eight GUIDs; an unassigned entry is 0.
    pub guid_block: [Guid; BLOCK_LEN],
}

impl Repr {
    /// Parses a block.
    pub fn parse(buf: &[u8]) -> Result<Repr> {
        let p = Packet::new_checked(buf)?;
        let mut guid_block = [Guid(0); BLOCK_LEN];
        for (i, g) in guid_block.iter_mut().enumerate() {
            *g = p.guid(i)?;
        }
        Ok(Repr { guid_block })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the block.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let got = buf.len();
        if got < LEN {
            return Err(Error::BufferTooSmall {
                what: "GUIDInfo",
                need: LEN,
                got,
            });
        }
        for (chunk, g) in buf[..LEN].chunks_exact_mut(8).zip(&self.guid_block) {
            chunk.copy_from_slice(&g.0.to_be_bytes());
        }
        Ok(())
    }
}

wire_via_inherent!("GUIDInfo", LEN);

impl SmpAttribute for Repr {
    const ID: u16 = crate::attr::GUID_INFO;
}

#[cfg(test)]
mod tests {
    use super::*;

    // ibsim net.2sw2path4hca after `opensm -o`: `smpquery -D GUIDInfo 0,1` (Hca1), block 0.
    // Only index 0, the port GUID, is assigned; GUIDCap is 32.
    const HCA1_BLOCK0: [u8; 64] = {
        let mut b = [0u8; 64];
        b[5] = 0x10;
        b[7] = 0x01;
        b
    };

    // Built by hand: a block with every entry assigned, to catch an entry emitted in the
    // wrong place.
    fn full() -> Repr {
        let mut guid_block = [Guid(0); 8];
        for (i, g) in guid_block.iter_mut().enumerate() {
            *g = Guid(0x0002_c903_0000_0000 | ((i as u64 + 1) << 8) | (0xa0 + i as u64));
        }
        Repr { guid_block }
    }

    fn full_bytes() -> [u8; 64] {
        let mut b = [0u8; 64];
        for i in 0..8 {
            b[i * 8..i * 8 + 8].copy_from_slice(&[
                0x00,
                0x02,
                0xc9,
                0x03,
                0,
                0,
                i as u8 + 1,
                0xa0 + i as u8,
            ]);
        }
        b
    }

    #[test]
    fn captured_block() {
        let r = Repr::parse(&HCA1_BLOCK0).unwrap();
        assert_eq!(r.guid_block[0], Guid(0x10_0001));
        assert!(r.guid_block[1..].iter().all(|g| *g == Guid(0)));
        let mut out = [0xa5u8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(out, HCA1_BLOCK0);
    }

    #[test]
    fn full_block() {
        let b = full_bytes();
        assert_eq!(Repr::parse(&b).unwrap(), full());
        let mut out = [0xa5u8; 64];
        full().emit(&mut out).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn view_accessors() {
        let mut buf = HCA1_BLOCK0;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.guid(0).unwrap(), Guid(0x10_0001));
        p.set_guid(7, Guid(0x1122_3344_5566_7788)).unwrap();
        assert!(p.set_guid(8, Guid(1)).is_err());
        assert!(p.guid(8).is_err());
        assert_eq!(
            &buf[56..],
            &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]
        );
    }

    #[test]
    fn blocks() {
        assert_eq!(block_of(0), (0, 0));
        assert_eq!(block_of(9), (1, 1));
        assert_eq!(block_of(255), (31, 7));
        assert_eq!(attr_mod(3), 3);
    }

    #[test]
    fn short_buffers() {
        assert!(matches!(
            Repr::parse(&HCA1_BLOCK0[..63]),
            Err(Error::Truncated {
                need: 64,
                got: 63,
                ..
            })
        ));
        let mut small = [0u8; 63];
        assert!(matches!(
            full().emit(&mut small),
            Err(Error::BufferTooSmall {
                need: 64,
                got: 63,
                ..
            })
        ));
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(Repr::parse(&HCA1_BLOCK0).unwrap()).unwrap();
        assert_eq!(v["guid_block"][0], "0x0000000000100001");
        assert_eq!(v["guid_block"].as_array().unwrap().len(), 8);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, 64)) {
            let r = Repr::parse(&b).unwrap();
            let mut out = [0xa5u8; 64];
            r.emit(&mut out).unwrap();
            proptest::prop_assert_eq!(&out[..], &b[..]);
        }
    }
}
