//! Port health in the simulated fabric: a link that keeps flapping is taken out of the
//! subnet (not routed over, left in INIT), its later flaps move nothing and start no heavy
//! sweep, the port list survives in the report, and clearing the port brings the link back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use sm_core::fabric::{Fabric, PortIdx};
use sm_core::generate::{GenSpec, generate};
use sm_daemon::core::{HealthConfig, Params};
use sm_mad::port_info::PortState;
use support::{all_pairs_delivered, run_watching};

const MS: u64 = 1_000_000;

fn fabric() -> Fabric {
    generate(&serde_json::from_str::<GenSpec>(r#"{"family":"fat-tree2","radix":8}"#).unwrap())
        .unwrap()
}

#[test]
fn a_flapping_link_is_taken_out_and_comes_back_when_cleared() {
    let f = fabric();
    let params = Params {
        health: HealthConfig {
            link_flaps: 3,
            flap_window: Duration::from_secs(10),
            ..HealthConfig::default()
        },
        ..Params::default()
    };
    let mut d = support::up(&f, params);
    let (a, b): (PortIdx, PortIdx) = support::switch_link(&f);
    let (ga, na) = (f.node(f.port(a).node).guid, f.port(a).num);
    let (gb, nb) = (f.node(f.port(b).node).guid, f.port(b).num);
    // Six times down for 10 ms, every 40 ms.
    support::flap(&mut d, [a], 0, 40 * MS, 6, 10 * MS);
    let sweeps = run_watching(&mut d, 600 * MS, |_| {});
    assert!(sweeps.iter().all(|r| !r.heavy), "no heavy sweep for flaps");
    let bad = d.sm.unhealthy_ports();
    let ids: Vec<_> = bad.iter().map(|u| (u.node, u.port)).collect();
    assert_eq!(ids.len(), 2, "{bad:?}");
    assert!(
        ids.contains(&(ga, na)) && ids.contains(&(gb, nb)),
        "{bad:?}"
    );
    assert!(bad[0].reason.contains("3 times"), "{bad:?}");
    // The report says so, and once unhealthy, the later flaps moved nothing.
    let last = sweeps.last().unwrap();
    assert_eq!(last.unhealthy_ports.len(), 2);
    let marked = sweeps
        .iter()
        .position(|r| !r.unhealthy_ports.is_empty())
        .unwrap();
    for r in &sweeps[marked + 1..] {
        assert_eq!(r.lft_entries_moved, 0, "{}: {}", r.trigger, r.reroute);
    }
    // Up again physically, but left out: not ACTIVE, no route leaves through it.
    assert_ne!(d.sim.port(a).info.port_state, PortState::Down);
    assert_ne!(d.sim.port(a).info.port_state, PortState::Active);
    let lft = &d.sim.node(f.port(a).node).switch.as_ref().unwrap().lft;
    assert!(
        !lft.contains(&na),
        "a route still leaves through the unhealthy port"
    );
    all_pairs_delivered(&d, "with the link left out");

    // A heavy sweep keeps it out.
    let now = sm_daemon::core::Instant::from_nanos(d.now());
    d.sm.request_sweep(now, true);
    let sweeps = run_watching(&mut d, 300 * MS, |_| {});
    assert!(sweeps.iter().any(|r| r.heavy && r.subnet_up));
    assert_ne!(d.sim.port(a).info.port_state, PortState::Active);

    // Cleared: back in the subnet.
    assert!(d.sm.clear_unhealthy(now, ga, na));
    assert!(!d.sm.clear_unhealthy(now, ga, na), "already cleared");
    let sweeps = run_watching(&mut d, 300 * MS, |_| {});
    assert!(sweeps.iter().any(|r| r.heavy && r.subnet_up));
    assert_eq!(
        d.sm.unhealthy_ports().len(),
        1,
        "the other end stays until cleared"
    );
    assert!(d.sm.clear_unhealthy(now, gb, nb));
    let _ = run_watching(&mut d, 300 * MS, |_| {});
    assert!(d.sm.unhealthy_ports().is_empty());
    assert_eq!(d.sim.port(a).info.port_state, PortState::Active);
    assert_eq!(d.sim.port(b).info.port_state, PortState::Active);
    all_pairs_delivered(&d, "after clearing");
}

#[test]
fn a_forged_trap_is_ignored_and_a_babbling_link_is_muted() {
    use sm_mad::smp::{self, Route};
    use sm_mad::{Method, Tid, attr, notice};
    let f = fabric();
    let cas: Vec<PortIdx> = f
        .cas()
        .flat_map(|n| f.node_ports(n))
        .filter(|&p| f.port(p).remote.is_some())
        .collect();
    let params = Params {
        // Flaps alone must not take the link out here: the muting is what is tested.
        health: HealthConfig {
            link_flaps: 0,
            flap_window: Duration::from_secs(10),
            ..HealthConfig::default()
        },
        ..Params::default()
    };
    let mut d = support::up(&f, params);
    let plan = d.sm.plan().unwrap().clone();
    let sw = plan.fabric.switches().next().unwrap();
    let sw_lid = plan.fabric.port(plan.fabric.port_of(sw, 0).unwrap()).lid;
    let sm_lid = d.sm.own_lid();

    // A host sends a trap 128 in a switch's name.
    let host = d.sim.attach(*cas.last().unwrap());
    let n = notice::Repr::generic(
        notice::ProducerType::Switch,
        sw_lid,
        notice::Trap::LinkStateChange(notice::details_128::Repr { lid_addr: sw_lid }),
    );
    let mut req = smp::Repr::request(Method::Trap, Tid(0x77), attr::NOTICE, 0, Route::Lid);
    req.set_attribute(&n).unwrap();
    d.sim.send(host, sm_lid, &req.to_bytes().unwrap()).unwrap();
    let sweeps = run_watching(&mut d, 50 * MS, |_| {});
    assert_eq!(d.sm.traps_ignored(), (0, 1), "counted as forged");
    assert!(sweeps.is_empty(), "no repair for a forged trap: {sweeps:?}");

    // A link flapping every millisecond for half a second: its switches are muted, the
    // repairs and heavy sweeps stay few, and the subnet is whole once it stops.
    let (a, _) = support::switch_link(&f);
    support::flap(&mut d, [a], 0, MS, 500, MS / 2);
    let sweeps = run_watching(&mut d, 600 * MS, |_| {});
    let (muted, forged) = d.sm.traps_ignored();
    assert!(muted > 100, "muted {muted}");
    assert_eq!(forged, 1);
    let heavy: Vec<&str> = sweeps
        .iter()
        .filter(|r| r.heavy)
        .map(|r| r.trigger.as_str())
        .collect();
    // A repair the storm left unfinished lets the next traps start heavy sweeps, until
    // the issuers are muted: a few, not one per trap.
    assert!(heavy.len() <= 10, "heavy sweeps in a storm: {heavy:?}");
    assert!(
        sweeps.len() < 120,
        "{} repairs for 1,000 flaps",
        sweeps.len()
    );
    // Light sweeps (every 10 s) see the link as it is once the storm is over.
    let _ = run_watching(&mut d, 25_000 * MS, |_| {});
    assert!(d.sm.is_up());
    assert_eq!(d.sim.port(a).info.port_state, PortState::Active);
    all_pairs_delivered(&d, "after the storm");
}

#[test]
fn the_performance_manager_reads_every_port_and_counts_link_downs() {
    use sm_daemon::perf::{PerfConfig, PerfMgr};
    let f = fabric();
    let mut d = support::started(&f, Params::default());
    d.perf = Some(PerfMgr::new(PerfConfig {
        interval: Duration::from_secs(1),
        ..PerfConfig::default()
    }));
    let _ = run_watching(&mut d, 1_500 * MS, |_| {});
    let p = d.perf.as_ref().unwrap();
    let (sweep, n) = p.last_sweep().expect("a counter sweep");
    let linked = f
        .ports()
        .iter()
        .filter(|p| p.num != 0 && p.remote.is_some())
        .count();
    assert_eq!(
        (sweep.ports, sweep.answered, sweep.lost),
        (linked, linked, 0)
    );
    assert!(n >= 1);
    assert!(p.stats().values().all(|s| s.totals.link_downed == 0));
    // A switch link goes down three times: both ends count it.
    let (a, b) = support::switch_link(&f);
    support::flap(&mut d, [a], 0, 40 * MS, 3, 10 * MS);
    let _ = run_watching(&mut d, 2_500 * MS, |_| {});
    let p = d.perf.as_ref().unwrap();
    let key = |q: PortIdx| (f.node(f.port(q).node).guid, f.port(q).num);
    for q in [a, b] {
        assert_eq!(p.stats()[&key(q)].totals.link_downed, 3, "{:?}", f.port(q));
    }
    let others: u64 = p
        .stats()
        .iter()
        .filter(|(k, _)| **k != key(a) && **k != key(b))
        .map(|(_, s)| s.totals.link_downed)
        .sum();
    assert_eq!(others, 0);
    assert_eq!(
        d.sim.port(a).counters.link_downed,
        3,
        "the PMA's own counter"
    );
}

#[test]
fn simulated_counters_follow_the_traffic_and_loss_shows_as_receive_errors() {
    use sm_daemon::perf::{PerfConfig, PerfMgr};
    use sm_sim::scenario::{FaultParam, Target};
    let f = fabric();
    let mut d = support::up(&f, Params::default());
    // Every packet one end of a link sends, the other end receives.
    let linked: Vec<(PortIdx, PortIdx)> = f
        .ports()
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((PortIdx(i as u32), p.remote?)))
        .filter(|(a, _)| f.port(*a).num != 0)
        .collect();
    let mut total = 0;
    for &(a, b) in &linked {
        let (sa, sb) = (&d.sim.port(a).ext_counters, &d.sim.port(b).ext_counters);
        assert_eq!(
            sa.xmit_pkts,
            sb.rcv_pkts,
            "{:?} -> {:?}",
            f.port(a),
            f.port(b)
        );
        assert_eq!(sa.xmit_data, sa.xmit_pkts * 72, "words per MAD");
        assert_eq!(d.sim.port(b).counters.rcv_errors, 0);
        total += sa.xmit_pkts;
    }
    assert!(total > 0, "bringing the subnet up crosses links");

    // Half the MADs over one switch link are lost while the manager reads the counters.
    let (a, b) = support::switch_link(&f);
    d.sim
        .apply_fault(sm_sim::Fault::Fault {
            target: Target::Link(a),
            param: FaultParam::Loss(0.5),
        })
        .unwrap();
    d.perf = Some(PerfMgr::new(PerfConfig {
        interval: Duration::from_secs(1),
        ..PerfConfig::default()
    }));
    let _ = run_watching(&mut d, 3_500 * MS, |_| {});
    d.sim
        .apply_fault(sm_sim::Fault::ClearFaults(Target::Link(a)))
        .unwrap();
    let _ = run_watching(&mut d, 1_500 * MS, |_| {});
    let errors = |q: PortIdx| u64::from(d.sim.port(q).counters.rcv_errors);
    assert!(errors(a) + errors(b) > 0, "lost MADs are receive errors");
    for &(q, _) in &linked {
        if q != a && q != b {
            assert_eq!(errors(q), 0, "no loss at {:?}", f.port(q));
        }
    }
    // The manager's totals are the agents' counters: the extended ones for the traffic.
    let p = d.perf.as_ref().unwrap();
    let key = |q: PortIdx| (f.node(f.port(q).node).guid, f.port(q).num);
    for q in [a, b] {
        let s = &p.stats()[&key(q)];
        assert!(s.extended);
        assert_eq!(s.totals.rcv_errors, errors(q));
        // Read before the manager's own last answers went out: at most those behind.
        let pma = d.sim.port(q).ext_counters.xmit_pkts;
        assert!(s.totals.xmit_pkts > 0 && s.totals.xmit_pkts <= pma);
    }
}

#[test]
fn with_disable_ports_an_unhealthy_link_is_switched_off_and_back_on_when_cleared() {
    use sm_mad::port_info::PhysPortState;
    let f = fabric();
    let params = Params {
        health: HealthConfig {
            link_flaps: 3,
            flap_window: Duration::from_secs(10),
            disable_ports: true,
            ..HealthConfig::default()
        },
        ..Params::default()
    };
    let mut d = support::up(&f, params);
    let (a, b): (PortIdx, PortIdx) = support::switch_link(&f);
    let (ga, na) = (f.node(f.port(a).node).guid, f.port(a).num);
    support::flap(&mut d, [a], 0, 40 * MS, 6, 10 * MS);
    let _ = run_watching(&mut d, 600 * MS, |_| {});
    assert_eq!(d.sm.unhealthy_ports().len(), 2);
    // One end is switched off; the link stays down through the later flaps.
    let phys = |d: &sm_daemon::transport::sim::SimDriver, q: PortIdx| {
        d.sim.port(q).info.port_physical_state
    };
    let off: Vec<PortIdx> = [a, b]
        .into_iter()
        .filter(|&q| phys(&d, q) == PhysPortState::Disabled)
        .collect();
    assert_eq!(off.len(), 1, "{:?} {:?}", phys(&d, a), phys(&d, b));
    for q in [a, b] {
        assert_eq!(d.sim.port(q).info.port_state, PortState::Down);
    }
    all_pairs_delivered(&d, "with the link switched off");
    // Cleared at both ends: switched on, and back in the subnet.
    let now = sm_daemon::core::Instant::from_nanos(d.now());
    let (gb, nb) = (f.node(f.port(b).node).guid, f.port(b).num);
    assert!(d.sm.clear_unhealthy(now, ga, na));
    assert!(d.sm.clear_unhealthy(now, gb, nb));
    let _ = run_watching(&mut d, 1_000 * MS, |_| {});
    for q in [a, b] {
        assert_eq!(phys(&d, q), PhysPortState::LinkUp);
        assert_eq!(d.sim.port(q).info.port_state, PortState::Active);
    }
    assert!(d.sm.unhealthy_ports().is_empty());
    all_pairs_delivered(&d, "after clearing");
}
