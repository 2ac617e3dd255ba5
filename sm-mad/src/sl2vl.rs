//! SLtoVLMappingTable (IBA 14.2.5.8): the VL each of the 16 SLs travels on, 4 bits each,
//! SL0 in the high nibble of byte 0. 8 bytes.
//!
//! On a switch there is one table per (input port, output port) pair; the attribute
//! modifier names the pair (output port in bits 0..=7, input port in bits 8..=15). Switches
//! that advertise SwitchInfo.OptimizedSLtoVLMappingProgramming also take bit 16 ("all
//! output ports") and bit 17 ("all input ports") on a Set, as OpenSM 3.3.23 sends them
//! (0x30000 for every pair, 0x20000 | out for every input to one output).

use core::ops::RangeInclusive;

use crate::table::{TableEntry, table_attribute};
use crate::{Error, PortNum, Result, Sl, Vl};

/// Service levels, hence entries.
pub const ENTRIES: usize = 16;

const WHAT: &str = "SLtoVLMappingTable";
const MOD_WHAT: &str = "SLtoVLMappingTable attribute modifier";
const ALL_OUTPUT_PORTS: u32 = 1 << 16;
const ALL_INPUT_PORTS: u32 = 1 << 17;

/// Which table(s) of a switch a MAD addresses. End ports ignore the modifier (send 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub struct Modifier {
    pub output_port: PortNum,
    pub input_port: PortNum,
    /// Set only: the table applies to every output port (`output_port` is ignored).
    pub all_output_ports: bool,
    /// Set only: the table applies to every input port (`input_port` is ignored).
    pub all_input_ports: bool,
}

impl Modifier {
    /// The table of an end port (CA or router port): modifier 0.
    pub const END_PORT: Modifier = Modifier {
        output_port: PortNum(0),
        input_port: PortNum(0),
        all_output_ports: false,
        all_input_ports: false,
    };

    /// The table a switch uses for packets from `input` leaving by `output`.
    pub const fn switch(input: PortNum, output: PortNum) -> Modifier {
        Modifier {
            output_port: output,
            input_port: input,
            all_output_ports: false,
            all_input_ports: false,
        }
    }

    /// Optimized programming: one Set for every (input, output) pair.
    pub const fn all_ports() -> Modifier {
        Modifier {
            all_output_ports: true,
            all_input_ports: true,
            ..Modifier::END_PORT
        }
    }

    /// Optimized programming: one Set for every input port towards `output`.
    pub const fn all_inputs_to(output: PortNum) -> Modifier {
        Modifier {
            output_port: output,
            all_input_ports: true,
            ..Modifier::END_PORT
        }
    }

    /// Uses an "all ports" bit, so only switches with optimized programming accept it.
    pub const fn is_optimized(self) -> bool {
        self.all_output_ports || self.all_input_ports
    }

    /// The 32-bit attribute modifier.
    pub const fn to_attr_mod(self) -> u32 {
        (self.all_input_ports as u32) << 17
            | (self.all_output_ports as u32) << 16
            | (self.input_port.0 as u32) << 8
            | self.output_port.0 as u32
    }

    /// Splits an attribute modifier; reserved bits 18..=31 are rejected.
    pub fn from_attr_mod(attr_mod: u32) -> Result<Modifier> {
        if attr_mod >> 18 != 0 {
            return Err(Error::InvalidField {
                what: MOD_WHAT,
                field: "reserved",
                value: attr_mod as u64,
            });
        }
        Ok(Modifier {
            output_port: PortNum(attr_mod as u8),
            input_port: PortNum((attr_mod >> 8) as u8),
            all_output_ports: attr_mod & ALL_OUTPUT_PORTS != 0,
            all_input_ports: attr_mod & ALL_INPUT_PORTS != 0,
        })
    }

    /// The input ports a Set with this modifier programs on a switch of `num_ports`
    /// external ports. "All" spans 1..=num_ports, plus port 0 when it is an enhanced port 0
    /// (the range OpenSM assumes when it reads such a table back).
    pub const fn input_ports(self, num_ports: u8, enhanced_port0: bool) -> RangeInclusive<u8> {
        if self.all_input_ports {
            (!enhanced_port0) as u8..=num_ports
        } else {
            self.input_port.0..=self.input_port.0
        }
    }

    /// The output ports a Set with this modifier programs; see [`Modifier::input_ports`].
    pub const fn output_ports(self, num_ports: u8, enhanced_port0: bool) -> RangeInclusive<u8> {
        if self.all_output_ports {
            (!enhanced_port0) as u8..=num_ports
        } else {
            self.output_port.0..=self.output_port.0
        }
    }
}

/// An entry is a VL, 4 bits; VLs above 15 do not fit.
impl TableEntry for Vl {
    const BITS: usize = 4;
    const FIELDS: &'static [(&'static str, usize, usize)] = &[("vl", 0, 4)];

    #[inline(always)]
    fn check(self, what: &'static str) -> Result<()> {
        if self.0 > 15 {
            return Err(Error::InvalidField {
                what,
                field: "vl",
                value: self.0 as u64,
            });
        }
        Ok(())
    }
}

table_attribute! {
    /// An SLtoVLMappingTable, indexed by SL. VL15 marks an SL whose packets are dropped.
    #[derive(Default)]
    pub struct Repr(WHAT, id = crate::attr::SL_TO_VL_MAPPING_TABLE, modifier = Modifier) {
        /// `sl_to_vl[sl]` is the VL for SL `sl` (the spec's SL0toVL .. SL15toVL).
        pub sl_to_vl: [Vl; ENTRIES],
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The VL of `sl`.
    pub fn vl(&self, sl: Sl) -> Option<Vl> {
        self.entry(sl.0 as usize)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Maps `sl` to `vl`; both must be 0..=15.
    pub fn set_vl(&mut self, sl: Sl, vl: Vl) -> Result<()> {
        self.set_entry(sl.0 as usize, vl).map_err(|e| match e {
            Error::InvalidField {
                what,
                field: "index",
                value,
            } => Error::InvalidField {
                what,
                field: "sl",
                value,
            },
            e => e,
        })
    }
}

impl Repr {
    /// A table from 16 VL numbers, SL0 first.
    pub const fn new(vls: [u8; ENTRIES]) -> Repr {
        let mut sl_to_vl = [Vl(0); ENTRIES];
        let mut i = 0;
        while i < ENTRIES {
            sl_to_vl[i] = Vl(vls[i]);
            i += 1;
        }
        Repr { sl_to_vl }
    }

    /// Every SL on VL `sl % data_vls` (the usual spread for a port with `data_vls`
    /// operational data VLs; 0 is taken as 1).
    pub fn spread(data_vls: u8) -> Repr {
        let n = data_vls.clamp(1, 15);
        let mut r = Repr::default();
        for (sl, vl) in r.sl_to_vl.iter_mut().enumerate() {
            *vl = Vl(sl as u8 % n);
        }
        r
    }

    /// The VL of `sl`, or `None` for an SL above 15.
    pub fn vl(&self, sl: Sl) -> Option<Vl> {
        self.sl_to_vl.get(sl.0 as usize).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ibsim net.2sw2path4hca after `opensm -o`: `smpquery -d -d -d -D sl2vl 0 1`
    // (Switch1, input port 0 to output port 1, attribute modifier 0x00000001); every
    // other input port (modifiers 0x101 .. 0x801) returned the same table.
    const SWITCH1_IN0_OUT1: [u8; 8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xe7];

    fn repr() -> Repr {
        Repr::new([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7])
    }

    #[test]
    fn parse_and_emit() {
        // The attribute sits in the first 8 bytes of the SMP's 64-byte data field.
        let mut data = [0u8; 64];
        data[..8].copy_from_slice(&SWITCH1_IN0_OUT1);
        let r = Repr::parse(&data).unwrap();
        assert_eq!(r, repr());
        assert_eq!(r.vl(Sl(0)), Some(Vl(0)));
        assert_eq!(r.vl(Sl(15)), Some(Vl(7)));
        assert_eq!(r.vl(Sl(16)), None);
        let mut out = [0xa5u8; 8];
        r.emit(&mut out).unwrap();
        assert_eq!(out, SWITCH1_IN0_OUT1);
    }

    #[test]
    fn any_bytes_round_trip() {
        for seed in 0..=255u8 {
            let buf: [u8; 8] = core::array::from_fn(|i| seed.wrapping_mul(i as u8 + 1) ^ 0x3c);
            let mut out = [0u8; 8];
            Repr::parse(&buf).unwrap().emit(&mut out).unwrap();
            assert_eq!(out, buf);
        }
    }

    #[test]
    fn bad_vl_is_refused() {
        let mut r = repr();
        r.sl_to_vl[3] = Vl(16);
        let mut out = [0u8; 8];
        assert_eq!(
            r.emit(&mut out),
            Err(Error::InvalidField {
                what: "SLtoVLMappingTable",
                field: "vl",
                value: 16
            })
        );
    }

    #[test]
    fn view_accessors() {
        let mut buf = SWITCH1_IN0_OUT1;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.vl(Sl(14)), Some(Vl(14)));
        assert_eq!(p.vl(Sl(15)), Some(Vl(7)));
        assert_eq!(p.vl(Sl(16)), None);
        p.set_vl(Sl(0), Vl(15)).unwrap();
        p.set_vl(Sl(15), Vl(1)).unwrap();
        assert!(p.set_vl(Sl(16), Vl(0)).is_err());
        assert!(p.set_vl(Sl(1), Vl(16)).is_err());
        assert_eq!(buf[0], 0xf1);
        assert_eq!(buf[7], 0xe1);
    }

    #[test]
    fn modifier() {
        // What smpquery sent for input port 2, output port 1.
        let m = Modifier::from_attr_mod(0x0000_0201).unwrap();
        assert_eq!(m, Modifier::switch(PortNum(2), PortNum(1)));
        assert!(!m.is_optimized());
        assert_eq!(m.input_ports(8, false), 2..=2);
        assert_eq!(Modifier::END_PORT.to_attr_mod(), 0);
        // What OpenSM sends for optimized programming.
        assert_eq!(Modifier::all_ports().to_attr_mod(), 0x0003_0000);
        let m = Modifier::all_inputs_to(PortNum(5));
        assert_eq!(m.to_attr_mod(), 0x0002_0005);
        assert_eq!(Modifier::from_attr_mod(0x0002_0005).unwrap(), m);
        assert_eq!(m.input_ports(8, false), 1..=8);
        assert_eq!(m.input_ports(8, true), 0..=8);
        assert_eq!(m.output_ports(8, false), 5..=5);
        let m = Modifier::from_attr_mod(0x0001_0300).unwrap();
        assert!(m.all_output_ports && !m.all_input_ports);
        assert_eq!(m.output_ports(36, false), 1..=36);
        assert!(matches!(
            Modifier::from_attr_mod(0x0004_0000),
            Err(Error::InvalidField {
                field: "reserved",
                ..
            })
        ));
        assert!(Modifier::from_attr_mod(0x8000_0000).is_err());
    }

    #[test]
    fn spread() {
        let r = Repr::spread(4);
        assert_eq!(r.vl(Sl(5)), Some(Vl(1)));
        assert_eq!(Repr::spread(0), Repr::default());
    }

    #[test]
    fn short_buffers() {
        assert_eq!(
            Repr::parse(&SWITCH1_IN0_OUT1[..7]),
            Err(Error::Truncated {
                what: "SLtoVLMappingTable",
                need: 8,
                got: 7
            })
        );
        assert!(Packet::new_checked(&SWITCH1_IN0_OUT1[..7]).is_err());
        assert_eq!(
            Packet::new_unchecked(&SWITCH1_IN0_OUT1[..3]).vl(Sl(6)),
            None
        );
        let mut small = [0u8; 7];
        assert!(matches!(
            repr().emit(&mut small),
            Err(Error::BufferTooSmall { need: 8, .. })
        ));
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(repr()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"sl_to_vl": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7]})
        );
    }

    proptest::proptest! {
        #[test]
        fn prop_modifier_round_trips(m in 0u32..1 << 18, junk: u32) {
            let x = Modifier::from_attr_mod(m).unwrap();
            proptest::prop_assert_eq!(x.to_attr_mod(), m);
            if let Ok(x) = Modifier::from_attr_mod(junk) {
                proptest::prop_assert_eq!(x.to_attr_mod(), junk);
            }
        }

        #[test]
        fn prop_bytes_round_trip(buf: [u8; 8]) {
            let mut out = [0u8; 8];
            Repr::parse(&buf).unwrap().emit(&mut out).unwrap();
            proptest::prop_assert_eq!(out, buf);
        }
    }
}
