//! M_Key protection per IBA 14.2.4: protection levels, violations, the lease timer and
//! Trap 256, in virtual time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use sm_mad::notice::{self, ProducerType, Trap};
use sm_mad::{Lid, Method, attr};
use sm_sim::SimConfig;

const KEY: u64 = 0x1234_5678_9abc_def0;
const SECOND: u64 = 1_000_000_000;

/// host-2 protected at `level` with KEY and lease `lease` seconds; the SM then forgets it.
fn protected(level: u8, lease: u16) -> Sm {
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    sm.bring_up();
    sm.set_pi(HCA2, 1, |pi| {
        pi.m_key = KEY;
        pi.m_key_protect_bits = level;
        pi.m_key_lease_period = lease;
    })
    .unwrap();
    sm.m_key = 0;
    sm
}

fn violations(sm: &mut Sm) -> u16 {
    let keep = sm.m_key;
    sm.m_key = KEY;
    let v = sm.get_pi(HCA2, 1).unwrap().m_key_violations;
    sm.m_key = keep;
    v
}

/// A Set(PortInfo) of host-2 that keeps its settings (state fields say "no change").
fn try_set(sm: &mut Sm) -> bool {
    let pi = sm_mad::port_info::Repr {
        m_key: KEY,
        lid: Lid(4),
        master_sm_lid: Lid(1),
        m_key_protect_bits: 1,
        ..sm_mad::port_info::Repr::default()
    };
    let mut d = [0u8; 64];
    sm_mad::Wire::emit(&pi, &mut d).unwrap();
    sm.dr(Method::Set, attr::PORT_INFO, 1, HCA2, Some(d))
        .is_some()
}

#[test]
fn level_0_gets_pass_and_show_the_key() {
    let mut sm = protected(0, 0);
    let pi = sm.get_pi(HCA2, 1).unwrap();
    assert_eq!(pi.m_key, KEY);
    assert!(!try_set(&mut sm), "Set without the key fails");
    assert_eq!(violations(&mut sm), 1);
    sm.m_key = KEY;
    assert!(try_set(&mut sm), "with it, it works");
}

#[test]
fn level_1_hides_the_key_from_gets() {
    let mut sm = protected(1, 0);
    let pi = sm.get_pi(HCA2, 1).unwrap();
    assert_eq!(pi.m_key, 0);
    assert_eq!(pi.lid, Lid(4), "the rest reads as usual");
    assert_eq!(
        violations(&mut sm),
        0,
        "a Get is no violation below level 2"
    );
    sm.m_key = KEY;
    assert_eq!(sm.get_pi(HCA2, 1).unwrap().m_key, KEY);
    sm.m_key = 0;
    assert!(!try_set(&mut sm));
    assert_eq!(violations(&mut sm), 1);
    // Other attributes are answered too.
    assert!(sm.dr(Method::Get, attr::NODE_INFO, 0, HCA2, None).is_some());
}

#[test]
fn levels_2_and_3_need_the_key_for_everything() {
    for level in [2, 3] {
        let mut sm = protected(level, 0);
        assert!(sm.get_pi(HCA2, 1).is_none());
        assert!(sm.dr(Method::Get, attr::NODE_INFO, 0, HCA2, None).is_none());
        assert!(!try_set(&mut sm));
        sm.m_key = 0x1111;
        assert!(sm.get_pi(HCA2, 1).is_none(), "a wrong key is no key");
        assert_eq!(violations(&mut sm), 4);
        sm.m_key = KEY;
        let pi = sm.get_pi(HCA2, 1).unwrap();
        assert_eq!((pi.m_key, pi.m_key_protect_bits), (KEY, level));
        // Other ports are not affected.
        sm.m_key = 0;
        assert!(sm.get_pi(HCA4, 1).is_some());
    }
}

#[test]
fn a_switch_is_protected_by_its_port_0() {
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    sm.bring_up();
    sm.set_pi(SW2, 0, |pi| {
        pi.m_key = KEY;
        pi.m_key_protect_bits = 2;
    })
    .unwrap();
    assert!(sm.get_pi(SW2, 3).is_none());
    assert!(sm.lft_block0(SW2).is_none());
    assert!(sm.get_pi(HCA2, 1).is_some(), "forwarding is not checked");
    sm.m_key = KEY;
    assert!(sm.get_pi(SW2, 3).is_some());
    assert_eq!(sm.get_pi(SW2, 0).unwrap().m_key_violations, 2);
    // Trap 256 from the switch, producer type switch: one for both violations, which came
    // within one trap interval.
    let traps = sm.traps();
    assert_eq!(traps.len(), 1);
    let n: notice::Repr = traps[0].1.attribute().unwrap();
    assert_eq!(n.trap_number(), Some(256));
    assert_eq!(n.issuer_lid, Lid(3));
    assert!(matches!(
        n.kind,
        notice::Kind::Generic {
            producer_type: ProducerType::Switch,
            ..
        }
    ));
}

#[test]
fn lease_expiry_drops_protection() {
    let mut sm = protected(2, 2);
    assert!(sm.get_pi(HCA2, 1).is_none(), "violation: lease starts");
    sm.run(SECOND);
    assert!(sm.get_pi(HCA2, 1).is_none(), "still protected after 1 s");
    sm.run(SECOND);
    // Protection bits are 0 now: Gets pass, Sets still need the key.
    let pi = sm.get_pi(HCA2, 1).unwrap();
    assert_eq!(pi.m_key_protect_bits, 0);
    assert_eq!(pi.m_key, KEY);
    assert_eq!(pi.m_key_violations, 2);
    assert!(!try_set(&mut sm));
}

#[test]
fn the_right_key_stops_the_lease() {
    let mut sm = protected(2, 2);
    assert!(sm.get_pi(HCA2, 1).is_none());
    sm.run(SECOND);
    sm.m_key = KEY;
    assert!(sm.get_pi(HCA2, 1).is_some(), "the SM comes back in time");
    sm.m_key = 0;
    sm.run(5 * SECOND);
    assert!(sm.get_pi(HCA2, 1).is_none(), "still protected");
    // A lease of 0 never runs out.
    let mut sm = protected(2, 0);
    assert!(sm.get_pi(HCA2, 1).is_none());
    sm.run(100 * SECOND);
    assert!(sm.get_pi(HCA2, 1).is_none());
}

#[test]
fn trap_256_describes_the_offending_smp() {
    let mut sm = protected(2, 0);
    sm.m_key = 0xbad;
    assert!(sm.dr(Method::Get, attr::PORT_INFO, 1, HCA2, None).is_none());
    let traps = sm.traps();
    assert_eq!(traps.len(), 1);
    let (m, t) = &traps[0];
    assert_eq!(m.slid, Lid(4));
    assert_eq!(t.method, Method::Trap);
    let n: notice::Repr = t.attribute().unwrap();
    assert_eq!(n.issuer_lid, Lid(4));
    let Some(Trap::BadMKey(d)) = n.trap() else {
        panic!("{n:?}")
    };
    assert_eq!(d.method, Method::Get);
    assert_eq!(d.attribute_id, attr::PORT_INFO);
    assert_eq!(d.attribute_modifier, 1);
    assert_eq!(d.m_key, 0xbad);
    assert!(d.dr_notice);
    assert_eq!(d.dr_slid, Lid::PERMISSIVE);
    assert_eq!(d.dr_hop_count, 3);
    assert_eq!(&d.dr_notice_return_path.0[..4], &[1, 3, 1, 0]);
    assert!(matches!(
        n.kind,
        notice::Kind::Generic {
            producer_type: ProducerType::Ca,
            ..
        }
    ));
    // No SM LID, no trap (but still a violation).
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    sm.set_pi(HCA2, 1, |pi| {
        pi.m_key = KEY;
        pi.m_key_protect_bits = 2;
    })
    .unwrap();
    assert!(sm.get_pi(HCA2, 1).is_none());
    sm.run(1_000_000);
    assert!(sm.traps().is_empty());
}

#[test]
fn a_reboot_clears_the_key() {
    let f = fabric();
    let mut sm = protected(3, 0);
    sm.sim.reboot_node(node(&f, "host-2"), 0);
    let pi = sm.get_pi(HCA2, 1).unwrap();
    assert_eq!((pi.m_key, pi.m_key_protect_bits), (0, 0));
}
