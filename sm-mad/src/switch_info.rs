//! SwitchInfo (IBA 14.2.5.4): a switch's forwarding capacities and settings. 20 bytes;
//! the attribute modifier is 0.

use crate::bits::wire_struct;
use crate::{Lid, SmpAttribute};

wire_struct! {
    /// SwitchInfo.
    struct "SwitchInfo", 20;
    fields {
        /// Entries the linear forwarding table can hold.
        linear_fdb_cap: u16 = LINEAR_FDB_CAP @ 0, 16;
        random_fdb_cap: u16 = RANDOM_FDB_CAP @ 16, 16;
        /// Multicast LIDs the multicast forwarding table can hold.
        multicast_fdb_cap: u16 = MULTICAST_FDB_CAP @ 32, 16;
        /// Highest LID the linear forwarding table forwards; the SM sets it.
        linear_fdb_top: Lid = LINEAR_FDB_TOP @ 48, 16;
        default_port: u8 = DEFAULT_PORT @ 64, 8;
        default_multicast_primary_port: u8 = DEFAULT_MULTICAST_PRIMARY_PORT @ 72, 8;
        default_multicast_not_primary_port: u8 = DEFAULT_MULTICAST_NOT_PRIMARY_PORT @ 80, 8;
        /// Packet lifetime in the switch: 4.096 us * 2^value.
        life_time_value: u8 = LIFE_TIME_VALUE @ 88, 5;
        /// Set by the switch when a port changes state; a Set writing 1 clears it.
        port_state_change: bool = PORT_STATE_CHANGE @ 93, 1;
        optimized_sl_to_vl_mapping_programming: u8 = OPTIMIZED_SL_TO_VL_MAPPING_PROGRAMMING @ 94, 2;
        lids_per_port: u16 = LIDS_PER_PORT @ 96, 16;
        /// P_Key entries available on each external port (0: no enforcement).
        partition_enforcement_cap: u16 = PARTITION_ENFORCEMENT_CAP @ 112, 16;
        inbound_enforcement_cap: bool = INBOUND_ENFORCEMENT_CAP @ 128, 1;
        outbound_enforcement_cap: bool = OUTBOUND_ENFORCEMENT_CAP @ 129, 1;
        filter_raw_inbound_cap: bool = FILTER_RAW_INBOUND_CAP @ 130, 1;
        filter_raw_outbound_cap: bool = FILTER_RAW_OUTBOUND_CAP @ 131, 1;
        /// Port 0 is an enhanced port 0, not a base one.
        enhanced_port0: bool = ENHANCED_PORT0 @ 132, 1;
        /// Upper bound of the multicast forwarding table the switch uses; honoured when
        /// PortInfo declares IsMulticastFDBTopSupported.
        multicast_fdb_top: Lid = MULTICAST_FDB_TOP @ 144, 16;
    }
}

impl SmpAttribute for Repr {
    const ID: u16 = crate::attr::SWITCH_INFO;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    // ibsim net.2sw2path4hca, `smpquery -D switchinfo 0` (Switch1) before any SM ran:
    // PortStateChange is set, LinearFDBTop 0.
    const NO_SM: [u8; 20] = [
        0x78, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
        0x40, 0x30, 0x00, 0x00, 0x00,
    ];

    // The same after `opensm -o`: LinearFDBTop 6, LifeTimeValue 18, PortStateChange cleared.
    const AFTER_SM: [u8; 20] = [
        0x78, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x90, 0x00, 0x00, 0x00,
        0x40, 0x30, 0x00, 0x00, 0x00,
    ];

    fn after_sm() -> Repr {
        Repr {
            linear_fdb_cap: 30720,
            random_fdb_cap: 0,
            multicast_fdb_cap: 1024,
            linear_fdb_top: Lid(6),
            default_port: 0,
            default_multicast_primary_port: 0,
            default_multicast_not_primary_port: 0,
            life_time_value: 18,
            port_state_change: false,
            optimized_sl_to_vl_mapping_programming: 0,
            lids_per_port: 0,
            partition_enforcement_cap: 64,
            inbound_enforcement_cap: false,
            outbound_enforcement_cap: false,
            filter_raw_inbound_cap: true,
            filter_raw_outbound_cap: true,
            enhanced_port0: false,
            multicast_fdb_top: Lid(0),
        }
    }

    #[test]
    fn parse_and_emit() {
        assert_eq!(Repr::parse(&AFTER_SM).unwrap(), after_sm());
        let mut out = [0xa5u8; 20];
        after_sm().emit(&mut out).unwrap();
        assert_eq!(out, AFTER_SM);

        let before = Repr::parse(&NO_SM).unwrap();
        assert_eq!(
            before,
            Repr {
                linear_fdb_top: Lid(0),
                life_time_value: 0,
                port_state_change: true,
                ..after_sm()
            }
        );
        let mut out = [0xa5u8; 20];
        before.emit(&mut out).unwrap();
        assert_eq!(out, NO_SM);
    }

    #[test]
    fn view_accessors() {
        let mut buf = AFTER_SM;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert!(p.check_reserved().is_ok());
        assert_eq!(p.get(field::LIFE_TIME_VALUE), 18);
        p.set(field::PORT_STATE_CHANGE, true);
        p.set(field::OPTIMIZED_SL_TO_VL_MAPPING_PROGRAMMING, 3);
        p.set(field::ENHANCED_PORT0, true);
        p.set(field::MULTICAST_FDB_TOP, Lid(0xc010));
        p.set(field::LINEAR_FDB_TOP, Lid(0x1234));
        assert_eq!(buf[11], 0x97);
        assert_eq!(buf[16], 0x38);
        assert_eq!(&buf[18..20], &[0xc0, 0x10]);
        assert_eq!(&buf[6..8], &[0x12, 0x34]);
    }

    #[test]
    fn reserved_bits() {
        let mut buf = AFTER_SM;
        buf[17] = 0x01;
        assert!(matches!(
            Packet::new_checked(&buf[..]).unwrap().check_reserved(),
            Err(Error::ReservedBitsSet { offset: 17, .. })
        ));
        let mut out = [0xa5u8; 20];
        Repr::parse(&buf).unwrap().emit(&mut out).unwrap();
        assert_eq!(out, AFTER_SM);
    }

    #[test]
    fn short_buffers() {
        assert!(matches!(
            Repr::parse(&AFTER_SM[..19]),
            Err(Error::Truncated {
                need: 20,
                got: 19,
                ..
            })
        ));
        let mut small = [0u8; 19];
        assert!(matches!(
            after_sm().emit(&mut small),
            Err(Error::BufferTooSmall {
                need: 20,
                got: 19,
                ..
            })
        ));
    }

    #[test]
    fn through_an_smp() {
        let mut data = [0u8; 64];
        data[..20].copy_from_slice(&AFTER_SM);
        let smp = crate::smp::Repr {
            data: crate::Bytes(data),
            ..crate::smp::Repr::request(
                crate::Method::GetResp,
                crate::Tid(1),
                <Repr as SmpAttribute>::ID,
                0,
                crate::smp::Route::Lid,
            )
        };
        assert_eq!(smp.attribute::<Repr>().unwrap(), after_sm());
        assert_eq!(
            serde_json::to_value(after_sm()).unwrap()["linear_fdb_cap"],
            30720
        );
    }

    proptest::proptest! {
        // Any input parses; emit keeps every field and clears only reserved bits.
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, 20)) {
            let r = Repr::parse(&b).unwrap();
            let mut out = [0xa5u8; 20];
            r.emit(&mut out).unwrap();
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
            for (o, i) in out.iter().zip(&b) {
                proptest::prop_assert_eq!(o & !i, 0);
            }
            proptest::prop_assert_eq!(Repr::parse(&out).unwrap(), r);
        }
    }
}
