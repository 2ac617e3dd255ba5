//! Fault injection in virtual time: links down, up and flapping, removed, rebooted, slow
//! and silent nodes, moved cables, faults on one link or node, seeded randomness, and
//! scenario scripts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use sm_core::fabric::{Fabric, NodeKind, NodeSpec, PortIdx};
use sm_mad::notice;
use sm_mad::port_info::{PhysPortState, PortState};
use sm_mad::smp;
use sm_mad::{Guid, Lid, Method, Tid, attr, node_info};
use sm_sim::scenario::{Action, FaultParam, ScenarioErrorKind, Target};
use sm_sim::{Fault, FaultError, Faults, Scenario, Sim, SimConfig};

fn state(sim: &Sim, p: PortIdx) -> (PortState, PhysPortState) {
    let i = &sim.port(p).info;
    (i.port_state, i.port_physical_state)
}

const DOWN: (PortState, PhysPortState) = (PortState::Down, PhysPortState::Polling);
const INIT: (PortState, PhysPortState) = (PortState::Init, PhysPortState::LinkUp);

/// Trap 128 issuer LIDs among what the SM received.
fn trap_128_from(sm: &mut Sm) -> Vec<Lid> {
    sm.traps()
        .into_iter()
        .filter_map(|(_, t)| {
            let n: notice::Repr = t.attribute().ok()?;
            (n.trap_number() == Some(128)).then_some(n.issuer_lid)
        })
        .collect()
}

#[test]
fn a_ca_link_change_is_noticed_by_its_switch() {
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    sm.bring_up();
    assert!(!sm.switch_info(SW2).unwrap().port_state_change);
    let hca2 = port(&f, "host-2", 1);
    sm.sim.link_down(hca2);
    assert_eq!(state(&sm.sim, hca2), DOWN);
    assert_eq!(state(&sm.sim, port(&f, "sw-b", 1)), DOWN);
    sm.run(1_000_000);
    assert_eq!(trap_128_from(&mut sm), vec![Lid(3)]);
    assert!(sm.switch_info(SW2).unwrap().port_state_change);
    assert!(sm.get_pi(HCA2, 1).is_none(), "no way to host-2");
    sm.sim.link_up(hca2);
    assert_eq!(state(&sm.sim, hca2), INIT);
    assert_eq!(sm.get_pi(HCA2, 1).unwrap().port_state, PortState::Init);
}

#[test]
fn flapping_link_follows_its_schedule() {
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    sm.bring_up();
    let p = port(&f, "sw-a", 3);
    let t0 = sm.sim.now() + 1_000;
    sm.sim
        .schedule_fault(
            t0,
            Fault::Flap {
                port: p,
                period: 100_000,
                count: 3,
                down: Some(30_000),
            },
        )
        .unwrap();
    // Sample every 10 us: down in [k*100, k*100+30) us for k = 0, 1, 2.
    let mut seen = Vec::new();
    for step in 0..40u64 {
        sm.sim.advance(t0 + step * 10_000);
        seen.push(state(&sm.sim, p) == DOWN);
    }
    let expect: Vec<bool> = (0..40u64).map(|s| s < 30 && s % 10 < 3).collect();
    assert_eq!(seen, expect);
    assert_eq!(state(&sm.sim, port(&f, "sw-b", 3)), INIT);
    // Both switches noticed. sw-b's trap routes over the flapping link and is lost
    // while it is down: its repeat, a trap interval later, gets through.
    assert_eq!(trap_128_from(&mut sm), vec![Lid(2)]);
    sm.run(SimConfig::default().trap_interval_ns);
    let mut from = trap_128_from(&mut sm);
    from.sort();
    from.dedup();
    assert_eq!(from, vec![Lid(2), Lid(3)]);
    // Bad flaps are refused.
    assert_eq!(
        sm.sim.schedule_fault(
            0,
            Fault::Flap {
                port: p,
                period: 10,
                count: 1,
                down: Some(10)
            }
        ),
        Err(FaultError::BadFlap)
    );
    assert_eq!(
        sm.sim.apply_fault(Fault::LinkDown(port(&f, "sw-a", 0))),
        Err(FaultError::NotACablePort(port(&f, "sw-a", 0).0))
    );
}

#[test]
fn removed_node_answers_nothing_and_its_links_are_gone() {
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    sm.bring_up();
    let sw2 = node(&f, "sw-b");
    sm.sim.remove_node(sw2);
    assert!(sm.get_pi(SW2, 0).is_none());
    assert!(sm.get_pi(HCA2, 1).is_none());
    for num in [3, 5] {
        let p = port(&f, "sw-a", num);
        assert_eq!(state(&sm.sim, p), DOWN);
        assert_eq!(sm.sim.port(p).remote, None);
    }
    assert_eq!(state(&sm.sim, port(&f, "host-2", 1)), DOWN);
    // Link-up cannot bring a removed node back.
    sm.sim.link_up(port(&f, "sw-a", 3));
    assert_eq!(state(&sm.sim, port(&f, "sw-a", 3)), DOWN);
    sm.sim.reboot_node(sw2, 0);
    assert!(sm.get_pi(SW2, 0).is_none());
    assert_eq!(trap_128_from(&mut sm), vec![Lid(2)]);
    assert!(sm.lid_reachable(5), "the rest of the fabric works");
}

#[test]
fn reboot_resets_the_node_and_retrains_its_links() {
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    sm.bring_up();
    // Arm the sw-a - sw-b link on both ends first.
    for (path, num) in [(SW1, 3u8), (SW2, 3)] {
        sm.set_pi(path, num, |pi| pi.port_state = PortState::Armed)
            .unwrap();
    }
    assert_eq!(sm.get_pi(SW1, 3).unwrap().port_state, PortState::Armed);
    assert!(sm.lid_reachable(3));
    let sw2 = node(&f, "sw-b");
    sm.sim.reboot_node(sw2, 2_000_000);
    // While it reboots: nothing answers, its links are down on the far ends.
    assert!(sm.get_pi(SW2, 0).is_none());
    assert_eq!(state(&sm.sim, port(&f, "sw-a", 3)), DOWN);
    assert_eq!(state(&sm.sim, port(&f, "host-2", 1)), DOWN);
    sm.run(2_000_000);
    // Back at power-up state.
    let pi0 = sm.get_pi(SW2, 0).unwrap();
    assert_eq!((pi0.lid, pi0.master_sm_lid), (Lid(0), Lid(0)));
    let si = sm.switch_info(SW2).unwrap();
    assert_eq!(si.linear_fdb_top, Lid(0));
    assert!(si.port_state_change);
    assert_eq!(sm.lft_block0(SW2).unwrap(), [255; 64]);
    for (p, path, num) in [
        (port(&f, "sw-a", 3), SW1, 3u8),
        (port(&f, "sw-b", 3), SW2, 3),
        (port(&f, "host-2", 1), HCA2, 1),
    ] {
        assert_eq!(state(&sm.sim, p), INIT, "{path:?}[{num}]");
        assert_eq!(sm.get_pi(path, num).unwrap().port_state, PortState::Init);
    }
    assert!(!sm.lid_reachable(3), "its LID is gone");
    // sw-a noticed (trap); the rebooted switch has no LID to trap with.
    assert_eq!(trap_128_from(&mut sm), vec![Lid(2)]);
    assert!(!sm.sim.trap_pending(sw2));
}

/// A rebooted node comes back as it was built: its end ports still declare extended speeds
/// (and XDR's field in CapabilityMask2), and its links train to XDR again.
#[test]
fn a_rebooted_node_keeps_its_speeds() {
    use sm_mad::port_info::cap;
    use sm_mad::port_info::cap2;
    let mut f = fabric();
    let links: Vec<(PortIdx, PortIdx)> = f.links().collect();
    for (a, b) in links {
        for p in [a, b] {
            f.port_mut(p).speed = sm_core::fabric::Speed::from_name("XDR").unwrap();
        }
    }
    let mut sm = Sm::new(&f, SimConfig::default());
    sm.bring_up();
    let sw2 = node(&f, "sw-b");
    let p0 = port(&f, "sw-b", 0);
    let declared = |sim: &Sim| {
        let i = &sim.port(p0).info;
        (
            i.capability_mask & cap::IS_EXTENDED_SPEEDS_SUPPORTED != 0,
            i.has_capability2(cap2::IS_EXTENDED_SPEEDS_2_SUPPORTED),
        )
    };
    assert_eq!(declared(&sm.sim), (true, true));
    sm.sim.reboot_node(sw2, 2_000_000);
    sm.run(2_000_000);
    assert_eq!(declared(&sm.sim), (true, true));
    for p in [port(&f, "sw-b", 3), port(&f, "host-2", 1)] {
        let i = &sm.sim.port(p).info;
        assert_eq!(
            (i.link_speed_ext_active2, i.link_speed_ext_active),
            (1, 0),
            "{p:?}"
        );
    }
}

#[test]
fn silent_and_slow_nodes() {
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    let sw2 = node(&f, "sw-b");
    sm.sim.set_silent(sw2, true);
    assert!(sm.get_pi(SW2, 0).is_none());
    assert!(
        sm.get_pi(HCA2, 1).is_some(),
        "a silent agent still forwards"
    );
    sm.sim.set_silent(sw2, false);
    assert!(sm.get_pi(SW2, 0).is_some());

    // A normal answer takes microseconds; a slow node adds its delay.
    let t = |sm: &mut Sm| {
        let sent = sm.sim.now();
        sm.send(
            Lid::PERMISSIVE,
            smp::Repr::dr_get(Tid(0), attr::NODE_INFO, 0, SW2).unwrap(),
        );
        sm.run(10_000_000);
        sm.drain()[0].at - sent
    };
    let normal = t(&mut sm);
    assert!(normal < 10_000, "{normal}");
    sm.sim.set_slow(sw2, 5_000_000);
    assert_eq!(t(&mut sm), normal + 5_000_000);
    sm.sim.set_slow(sw2, 0);
    assert_eq!(t(&mut sm), normal);
}

#[test]
fn recabling_moves_a_link_and_both_changes_are_noticed() {
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    sm.bring_up();
    let s2p1 = port(&f, "sw-b", 1);
    let hca2 = port(&f, "host-2", 1);
    let hca1p2 = port(&f, "host-1", 2);
    // The cable from sw-b[1] moves from host-2[1] to host-1[2].
    sm.sim.recable(s2p1, hca1p2).unwrap();
    assert_eq!(sm.sim.port(s2p1).remote, Some(hca1p2));
    assert_eq!(sm.sim.port(hca1p2).remote, Some(s2p1));
    assert_eq!(sm.sim.port(hca2).remote, None);
    assert_eq!(state(&sm.sim, hca2), DOWN);
    assert_eq!(state(&sm.sim, hca1p2), INIT);
    assert_eq!(state(&sm.sim, s2p1), INIT);
    // Directed route [1,3,1] now ends at host-1 port 2.
    let ni: sm_mad::node_info::Repr = sm
        .dr(Method::Get, attr::NODE_INFO, 0, HCA2, None)
        .unwrap()
        .attribute()
        .unwrap();
    assert_eq!((ni.node_guid, ni.local_port_num), (Guid(0x10_0000), 2));
    assert!(sm.switch_info(SW2).unwrap().port_state_change);
    assert_eq!(trap_128_from(&mut sm), vec![Lid(3)]);
    assert_eq!(sm.sim.recable(s2p1, s2p1), Err(FaultError::SelfLink));
}

#[test]
fn faults_on_one_link_or_one_node() {
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    let lossy = Faults {
        loss: 1.0,
        ..Faults::default()
    };
    sm.sim.set_link_faults(port(&f, "sw-a", 3), Some(lossy));
    assert!(sm.get_pi(SW2, 0).is_none(), "lost on the 3-3 link");
    assert!(sm.get_pi(&[1, 5], 0).is_some(), "the 5-5 link is clean");
    assert!(sm.get_pi(HCA3, 1).is_some());
    // Set on one end, it holds for the other end's direction too.
    assert_eq!(
        sm.sim.port(port(&f, "sw-b", 3)).faults.as_deref(),
        Some(&lossy)
    );
    sm.sim.set_link_faults(port(&f, "sw-b", 3), None);
    assert!(sm.get_pi(SW2, 0).is_some());

    // A node's faults hit its agent, not what it forwards.
    let sw2 = node(&f, "sw-b");
    sm.sim.set_node_faults(sw2, Some(lossy));
    assert!(sm.get_pi(SW2, 0).is_none());
    assert!(sm.get_pi(HCA2, 1).is_some());
    sm.sim.set_node_faults(sw2, None);

    // A delay on a link adds to each crossing.
    let rtt = |sm: &mut Sm| {
        let sent = sm.sim.now();
        sm.send(
            Lid::PERMISSIVE,
            smp::Repr::dr_get(Tid(0), attr::NODE_INFO, 0, HCA2).unwrap(),
        );
        sm.run(1_000_000);
        sm.drain()[0].at - sent
    };
    let base = rtt(&mut sm);
    sm.sim.set_link_faults(
        port(&f, "sw-b", 3),
        Some(Faults {
            delay_ns: 7_000,
            ..Faults::default()
        }),
    );
    assert_eq!(rtt(&mut sm), base + 14_000);
}

/// (TID, arrival time) of everything 300 lossy, duplicating, reordering requests bring back.
fn noisy_run(seed: u64) -> (Vec<(u64, u64)>, sm_sim::SimStats) {
    let f = fabric();
    let cfg = SimConfig {
        seed,
        faults: Faults {
            loss: 0.2,
            duplicate: 0.2,
            reorder: 0.5,
            jitter_ns: 5_000,
            delay_ns: 0,
        },
        ..SimConfig::default()
    };
    let mut sm = Sm::new(&f, cfg);
    sm.sim.set_link_faults(
        port(&f, "sw-a", 3),
        Some(Faults {
            loss: 0.1,
            ..Faults::default()
        }),
    );
    for _ in 0..300 {
        sm.send(
            Lid::PERMISSIVE,
            smp::Repr::dr_get(Tid(0), attr::NODE_INFO, 0, HCA2).unwrap(),
        );
        sm.run(1_000);
    }
    sm.run(1_000_000);
    let got = sm
        .drain()
        .iter()
        .map(|m| (smp::Repr::parse(&m.mad).unwrap().tid.0, m.at))
        .collect();
    (got, sm.sim.stats())
}

#[test]
fn seeded_faults_are_deterministic() {
    let (a, sa) = noisy_run(7);
    let (b, sb) = noisy_run(7);
    assert_eq!(a, b);
    assert_eq!(sa, sb);
    let (c, _) = noisy_run(8);
    assert_ne!(a, c);
    // Some lost, some twice, some overtaken.
    let mut tids: Vec<u64> = a.iter().map(|x| x.0).collect();
    assert!(tids.len() < 300 && tids.len() > 100, "{}", tids.len());
    assert!(tids.windows(2).any(|w| w[0] > w[1]), "reordered");
    let n = tids.len();
    tids.sort();
    tids.dedup();
    assert!(tids.len() < n, "duplicated");
    assert!(sa.dropped > 0);
}

#[test]
fn scenario_drives_the_fabric() {
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    sm.bring_up();
    let text = r#"
        # sw-b's agent hangs for a while; a cable is pulled and put back.
        at 0     silent "sw-b"
        at 2ms   silent "sw-b" off
        at 3ms   link-down "host-2"[1]
        at 4ms   link-up 0x0000000000200001[1]
        at 5ms   loss 1 link "sw-a"[2]
        at 6ms   clear-faults link "host-3"[1]
        at 7ms   slow "sw-b" 1ms
        at 8ms   recable "sw-b"[2] "host-3"[2]
        at 9ms   reboot "sw-a" down 1ms
        at 12ms  remove "host-4"
    "#;
    let s = Scenario::parse("inline.scn", text).unwrap();
    let start = sm.sim.now();
    sm.sim.load_scenario(&s).unwrap();
    let at = |ms: u64| start + ms * 1_000_000;
    sm.sim.advance(at(1));
    assert!(sm.get_pi(SW2, 0).is_none(), "silent");
    sm.sim.advance(at(2));
    assert!(sm.get_pi(SW2, 0).is_some());
    sm.sim.advance(at(3));
    assert_eq!(state(&sm.sim, port(&f, "host-2", 1)), DOWN);
    sm.sim.advance(at(4));
    assert_eq!(state(&sm.sim, port(&f, "host-2", 1)), INIT);
    sm.sim.advance(at(5));
    assert!(sm.get_pi(HCA3, 1).is_none(), "lossy link");
    sm.sim.advance(at(6));
    assert!(sm.get_pi(HCA3, 1).is_some());
    sm.sim.advance(at(8));
    let hca4 = port(&f, "host-4", 1);
    assert_eq!(sm.sim.port(hca4).remote, None);
    assert_eq!(
        sm.sim.port(port(&f, "host-3", 2)).remote,
        Some(port(&f, "sw-b", 2))
    );
    sm.sim.advance(at(9) + 500_000);
    assert!(sm.get_pi(SW1, 0).is_none(), "rebooting");
    sm.sim.advance(at(11));
    assert_eq!(sm.get_pi(SW1, 0).unwrap().lid, Lid(0));
    sm.sim.advance(at(12));
    assert!(!sm.sim.node(node(&f, "host-4")).alive);
}

#[test]
fn a_cloned_node_answers_with_the_first_ones_guids() {
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    let ni = |sm: &mut Sm, path: &[u8]| -> node_info::Repr {
        sm.dr(Method::Get, attr::NODE_INFO, 0, path, None)
            .unwrap()
            .attribute()
            .unwrap()
    };
    let (host1, sw_a) = (ni(&mut sm, &[]), ni(&mut sm, SW1));
    let text = "at 0 clone-guid \"host-1\" \"host-4\"\nat 0 clone-guid \"sw-a\" \"sw-b\"";
    sm.sim
        .load_scenario(&Scenario::parse("clone.scn", text).unwrap())
        .unwrap();
    sm.run(0);
    let host4 = ni(&mut sm, HCA4);
    assert_eq!(
        (host4.node_guid, host4.port_guid, host4.system_image_guid),
        (host1.node_guid, host1.port_guid, host1.system_image_guid)
    );
    assert_eq!(host4.local_port_num, 1);
    let sw_b = ni(&mut sm, SW2);
    assert_eq!(
        (sw_b.node_guid, sw_b.port_guid),
        (sw_a.node_guid, sw_a.port_guid)
    );
    assert_eq!(sw_b.local_port_num, 3, "still itself otherwise");
    // A later scenario naming the GUID means the first node in the file.
    let text = format!("at 0 silent {:#x}", host1.node_guid.0);
    sm.sim
        .load_scenario(&Scenario::parse("later.scn", &text).unwrap())
        .unwrap();
    sm.run(0);
    assert!(sm.sim.node(node(&f, "host-1")).silent);
    assert!(!sm.sim.node(node(&f, "host-4")).silent);
}

#[test]
fn scenario_errors_name_file_line_and_what() {
    let f = fabric();
    let mut sim = Sim::new(&f, SimConfig::default());
    let load = |sim: &mut Sim, text: &str| {
        sim.load_scenario(&Scenario::parse("x.scn", text).unwrap())
            .unwrap_err()
    };
    let e = load(&mut sim, "at 0 loss 0.1\nat 1ms remove \"sw-z\"");
    assert_eq!((e.file.as_str(), e.line), ("x.scn", 2));
    assert_eq!(e.kind, ScenarioErrorKind::UnknownNode("\"sw-z\"".into()));
    assert_eq!(e.to_string(), "x.scn:2: no node \"sw-z\"");
    let e = load(&mut sim, "at 0 link-down \"host-1\"[3]");
    assert_eq!(
        e.kind,
        ScenarioErrorKind::NoSuchPort {
            node: "\"host-1\"".into(),
            port: 3
        }
    );
    let e = load(&mut sim, "at 0 link-down \"sw-a\"[0]");
    assert!(matches!(e.kind, ScenarioErrorKind::NotLinked(_)));
    let e = load(&mut sim, "at 0 start-sm \"sw-a\"[3]");
    assert!(matches!(e.kind, ScenarioErrorKind::NotAnEndPort(_)), "{e}");
    let e = load(&mut sim, "at 0 recable \"host-1\"[2] 0x100001[2]");
    assert!(matches!(e.kind, ScenarioErrorKind::SelfLink(_)), "{e}");
    let e = load(&mut sim, "at 0 remove 0xdead");
    assert_eq!(
        e.kind,
        ScenarioErrorKind::UnknownNode("0x000000000000dead".into())
    );
    // Nothing of a failed load is scheduled.
    assert_eq!(sim.next_event(), None);

    // Two nodes with one description.
    let mut g = Fabric::new();
    for guid in [1, 2] {
        g.add_node(NodeSpec::new(NodeKind::Switch, Guid(guid), "twin", 4))
            .unwrap();
    }
    let mut sim = Sim::new(&g, SimConfig::default());
    let e = load(&mut sim, "\n\nat 0 silent \"twin\"");
    assert_eq!(e.line, 3);
    assert_eq!(
        e.kind,
        ScenarioErrorKind::AmbiguousNode("\"twin\"".into(), 2)
    );
    // By GUID it works.
    sim.load_scenario(&Scenario::parse("ok", "at 0 silent 0x2").unwrap())
        .unwrap();
    sim.advance(0);
    assert!(sim.node(sm_core::fabric::NodeIdx(1)).silent);
}

#[test]
fn resolved_faults_from_code() {
    let f = fabric();
    let mut sim = Sim::new(&f, SimConfig::default());
    let p = port(&f, "sw-a", 2);
    sim.schedule_fault(
        1_000,
        Fault::Fault {
            target: Target::Link(p),
            param: FaultParam::Loss(0.5),
        },
    )
    .unwrap();
    sim.advance(999);
    assert!(sim.port(p).faults.is_none());
    sim.advance(1_000);
    assert_eq!(sim.port(p).faults.as_deref().unwrap().loss, 0.5);
    assert_eq!(
        sim.port(port(&f, "host-3", 1))
            .faults
            .as_deref()
            .unwrap()
            .loss,
        0.5,
        "both ends"
    );
    sim.apply_fault(Action::ClearFaults(Target::Link(p)))
        .unwrap();
    assert!(sim.port(p).faults.is_none());
    sim.apply_fault(Fault::Fault {
        target: Target::Fabric,
        param: FaultParam::Reorder(0.25, 3_000),
    })
    .unwrap();
    assert_eq!(sim.config().faults.reorder, 0.25);
    assert_eq!(sim.config().faults.jitter_ns, 3_000);
    assert_eq!(
        sim.apply_fault(Fault::Remove(sm_core::fabric::NodeIdx(99))),
        Err(FaultError::NoSuchNode(99))
    );
}

#[test]
fn scenario_files_are_read_with_their_name() {
    let dir = std::env::temp_dir().join(format!("sm-sim-scn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.scn");
    std::fs::write(&path, "at 0 loss 0.1\nat 1ms reboot\n").unwrap();
    let e = Scenario::read(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}:2: missing a node", path.display())
    );
    std::fs::write(&path, "at 0 loss 0.1\n").unwrap();
    assert_eq!(Scenario::read(&path).unwrap().events.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
    let e = Scenario::read(&dir.join("none.scn")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&dir.join("none.scn").display().to_string())
    );
}

mod random {
    use super::*;
    use proptest::prelude::*;

    const NODES: &[&str] = &[
        "\"sw-a\"",
        "\"sw-b\"",
        "\"host-1\"",
        "\"host-2\"",
        "\"host-3\"",
        "\"host-4\"",
        "0x200000",
        "0x100001",
        "\"nobody\"",
    ];

    fn line() -> impl Strategy<Value = String> {
        let node = proptest::sample::select(NODES);
        let port =
            (proptest::sample::select(NODES), 0u8..10).prop_map(|(n, p)| format!("{n}[{p}]"));
        let t = (0u64..20_000).prop_map(|us| format!("{us}us"));
        (
            t,
            0..13u8,
            node,
            port.clone(),
            port,
            0.0f64..1.0,
            1u64..500,
            0u32..5,
        )
            .prop_map(|(t, kind, n, p, q, prob, us, count)| {
                let a = match kind {
                    0 => format!("link-down {p}"),
                    1 => format!("link-up {p}"),
                    2 => format!("flap {p} period {}us count {count}", us + 1),
                    3 => format!("reboot {n} down {us}us"),
                    4 => format!("remove {n}"),
                    5 => format!("silent {n}"),
                    6 => format!("slow {n} {us}us"),
                    7 => format!("recable {p} {q}"),
                    8 => format!("loss {prob} link {p}"),
                    9 => format!("duplicate {prob} node {n}"),
                    10 => format!("reorder {prob} {us}ns"),
                    11 => format!("clone-guid {n} \"host-2\""),
                    _ => format!("clear-faults link {p}"),
                };
                format!("at {t} {a}")
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Any mix of faults, resolved or refused, runs without panicking while an SM
        /// keeps asking, and the same seed replays the same run.
        #[test]
        fn random_scenarios_run(lines in proptest::collection::vec(line(), 0..12), seed in 0u64..4) {
            let text = lines.join("\n");
            let f = fabric();
            let run = || {
                let mut sm = Sm::new(&f, SimConfig { seed, ..SimConfig::default() });
                if let Ok(s) = Scenario::parse("r.scn", &text) {
                    let _ = sm.sim.load_scenario(&s);
                }
                let mut answers = 0;
                for path in [SW1, SW2, HCA2, HCA3, HCA4].iter().cycle().take(25) {
                    answers += sm.get_pi(path, 0).is_some() as u32;
                }
                (answers, sm.sim.stats())
            };
            prop_assert_eq!(run(), run());
        }
    }
}

#[test]
fn sm_starts_and_stops_go_to_the_driver_in_time_order() {
    let f = fabric();
    let mut sim = Sim::new(&f, SimConfig::default());
    let text = "at 2ms stop-sm \"host-1\"[1]\nat 1ms start-sm \"sw-a\"[0] priority 7";
    sim.load_scenario(&Scenario::parse("sm.scn", text).unwrap())
        .unwrap();
    sim.advance(500_000);
    assert_eq!(sim.poll_sm_event(), None);
    sim.advance(3_000_000);
    assert_eq!(
        sim.poll_sm_event(),
        Some(sm_sim::SmEvent::Start {
            port: port(&f, "sw-a", 0),
            priority: 7,
            sm_key: None,
        })
    );
    assert_eq!(
        sim.poll_sm_event(),
        Some(sm_sim::SmEvent::Stop {
            port: port(&f, "host-1", 1)
        })
    );
    assert_eq!(sim.poll_sm_event(), None);
}

#[test]
fn an_unplugged_node_is_dead_until_plugged_in_afresh() {
    let f = fabric();
    let mut sm = Sm::new(&f, SimConfig::default());
    sm.bring_up();
    let sw2 = node(&f, "sw-b");
    sm.sim.unplug_node(sw2);
    assert!(sm.get_pi(SW2, 0).is_none());
    assert!(sm.get_pi(HCA2, 1).is_none());
    let a3 = port(&f, "sw-a", 3);
    assert_eq!(state(&sm.sim, a3), DOWN);
    // Unlike a removal, the cable stays; unlike a reboot, nothing brings it back by itself.
    assert!(sm.sim.port(a3).remote.is_some());
    sm.sim.link_up(a3);
    sm.sim.reboot_node(sw2, 0);
    sm.run(10_000_000);
    assert_eq!(state(&sm.sim, a3), DOWN);
    assert!(sm.get_pi(SW2, 0).is_none());
    let mut from = trap_128_from(&mut sm);
    from.dedup();
    assert_eq!(from, vec![Lid(2)], "sw-a noticed");

    sm.sim.plug_node(sw2);
    assert_eq!(state(&sm.sim, a3), INIT);
    let pi0 = sm.get_pi(SW2, 0).unwrap();
    assert_eq!((pi0.lid, pi0.master_sm_lid), (Lid(0), Lid(0)));
    assert_eq!(sm.lft_block0(SW2).unwrap(), [255; 64]);
    assert_eq!(sm.get_pi(HCA2, 1).unwrap().port_state, PortState::Init);
}

#[test]
fn reloads_and_sa_client_requests_go_to_the_driver() {
    let f = fabric();
    let mut sim = Sim::new(&f, SimConfig::default());
    let text = "at 1ms reload \"next.toml\"\n\
                at 2ms join \"host-2\"[1] 0xff12 pkey 0x8001\n\
                at 3ms leave \"host-2\"[1] 0xff12\n\
                at 4ms service \"host-3\"[1] 0x42 lease 5\n\
                at 5ms unplug \"host-4\"\n\
                at 6ms plug \"host-4\"";
    sim.load_scenario(&Scenario::parse("c.scn", text).unwrap())
        .unwrap();
    sim.advance(10_000_000);
    let h2 = port(&f, "host-2", 1);
    assert_eq!(
        std::iter::from_fn(|| sim.poll_sm_event()).collect::<Vec<_>>(),
        vec![
            sm_sim::SmEvent::Reload {
                file: "next.toml".into()
            },
            sm_sim::SmEvent::Join {
                port: h2,
                mgid: 0xff12,
                pkey: 0x8001,
                send_only: false
            },
            sm_sim::SmEvent::Leave {
                port: h2,
                mgid: 0xff12
            },
            sm_sim::SmEvent::Service {
                port: port(&f, "host-3", 1),
                id: 0x42,
                lease: Some(5)
            },
        ]
    );
    // Plugged back: the host's link trained again.
    assert_eq!(state(&sim, port(&f, "host-4", 1)), INIT);
    // A switch port other than 0 holds no SA client.
    let e = sim
        .load_scenario(&Scenario::parse("c.scn", "at 0 join \"sw-a\"[3] 0x1").unwrap())
        .unwrap_err();
    assert_eq!(e.line, 1);
}
