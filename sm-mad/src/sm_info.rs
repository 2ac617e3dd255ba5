//! SMInfo (IBA 14.2.5.13): what SMs tell one another while electing a master. 21 bytes.
//!
//! A Get carries attribute modifier 0. A Set carries an [`SmInfoControl`] in the attribute
//! modifier, the action the receiving SM is asked to take.

use crate::bits::{wire_enum, wire_struct};
use crate::{Guid, SmpAttribute};

wire_enum! {
    /// The state of an SM.
    pub enum SmState: u8 {
        NotActive = 0,
        Discovering = 1,
        Standby = 2,
        Master = 3,
    }
}

wire_enum! {
    /// The attribute modifier of Set(SMInfo).
    pub enum SmInfoControl: u32 {
        /// The master hands the subnet over to the receiver.
        Handover = 1,
        /// The receiver of a handover confirms it.
        Acknowledge = 2,
        /// Go to NotActive.
        Disable = 3,
        /// Go to Standby.
        Standby = 4,
        /// Go to Discovering.
        Discover = 5,
    }
}

wire_struct! {
    /// SMInfo.
    struct "SMInfo", 21;
    fields {
        /// Port GUID of the SM.
        guid: Guid = GUID @ 0, 64;
        /// The key the subnet's SMs share; answered as 0 to a requester the SM does not trust.
        sm_key: u64 = SM_KEY @ 64, 64;
        /// Activity counter: a master keeps incrementing it while it works.
        act_count: u32 = ACT_COUNT @ 128, 32;
        /// 0..=15, the higher wins the election.
        priority: u8 = PRIORITY @ 160, 4;
        sm_state: SmState = SM_STATE @ 164, 4;
    }
}

impl SmpAttribute for Repr {
    const ID: u16 = crate::attr::SM_INFO;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    // ibsim net.2sw2path4hca with `opensm -p 5` resident on Switch1: `sminfo` run as Hca1
    // (SIM_HOST=Hca1) after the sweep, LID-routed to SM LID 1. ibsim hands SMInfo to the
    // node's SM client, so these are OpenSM's own bytes.
    const MASTER: [u8; 21] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x59, 0x53,
    ];

    fn master() -> Repr {
        Repr {
            guid: Guid(0x20_0000),
            sm_key: 1,
            act_count: 89,
            priority: 5,
            sm_state: SmState::Master,
        }
    }

    #[test]
    fn parse_and_emit() {
        assert_eq!(Repr::parse(&MASTER).unwrap(), master());
        let mut out = [0xa5u8; 21];
        master().emit(&mut out).unwrap();
        assert_eq!(out, MASTER);
        // The SMP data area is 64 bytes; the rest is left to the SMP.
        let mut data = [0xa5u8; 64];
        master().emit(&mut data).unwrap();
        assert_eq!(&data[..21], &MASTER);
        assert_eq!(data[21], 0xa5);
    }

    #[test]
    fn view_accessors() {
        let mut buf = MASTER;
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        assert!(p.check_reserved().is_ok());
        assert_eq!(p.get(field::SM_STATE), SmState::Master);
        p.set(field::SM_STATE, SmState::Standby);
        p.set(field::PRIORITY, 15);
        p.set(field::ACT_COUNT, 0x0102_0304);
        assert_eq!(buf[20], 0xf2);
        assert_eq!(&buf[16..20], &[1, 2, 3, 4]);
    }

    #[test]
    fn unknown_state_survives() {
        let mut buf = MASTER;
        buf[20] = 0x5c;
        let r = Repr::parse(&buf).unwrap();
        assert_eq!(r.sm_state, SmState::Unknown(12));
        let mut out = [0u8; 21];
        r.emit(&mut out).unwrap();
        assert_eq!(out, buf);
    }

    #[test]
    fn control_codes() {
        assert_eq!(SmInfoControl::from_raw_value(1), SmInfoControl::Handover);
        assert_eq!(SmInfoControl::Discover.to_raw_value(), 5);
        assert_eq!(SmInfoControl::from(9), SmInfoControl::Unknown(9));
        assert_eq!(SmInfoControl::Acknowledge.to_string(), "Acknowledge");
    }

    #[test]
    fn short_buffers() {
        assert!(matches!(
            Repr::parse(&MASTER[..20]),
            Err(Error::Truncated {
                need: 21,
                got: 20,
                ..
            })
        ));
        let mut small = [0u8; 20];
        assert!(matches!(
            master().emit(&mut small),
            Err(Error::BufferTooSmall {
                need: 21,
                got: 20,
                ..
            })
        ));
    }

    #[test]
    fn json() {
        let v = serde_json::to_value(master()).unwrap();
        assert_eq!(v["sm_state"], "Master");
        assert_eq!(v["guid"], "0x0000000000200000");
    }

    proptest::proptest! {
        // Any input parses; emit keeps every field and clears only reserved bits.
        #[test]
        fn any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, 21)) {
            let r = Repr::parse(&b).unwrap();
            let mut out = [0xa5u8; 21];
            r.emit(&mut out).unwrap();
            proptest::prop_assert!(Packet::new_checked(&out[..]).unwrap().check_reserved().is_ok());
            for (o, i) in out.iter().zip(&b) {
                proptest::prop_assert_eq!(o & !i, 0);
            }
            proptest::prop_assert_eq!(Repr::parse(&out).unwrap(), r);
        }
    }
}
