//! Sweeps that finish despite what the fabric does to them: heavy MAD loss, agents that never
//! answer or answer late. The subnet comes up for everything that answers, what does not is
//! listed, later sweeps try it again, and no port is asked for a client reregistration twice.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use sm_core::fabric::{Fabric, PortIdx};
use sm_core::generate::{GenSpec, generate};
use sm_core::lid::LidStore;
use sm_daemon::core::{Event, Params, SweepReport};
use sm_daemon::transport::sim::SimDriver;
use sm_mad::port_info::PortState;
use sm_sim::SimConfig;
use sm_sim::scenario::Scenario;
use sm_sim::trace::AllPairsOptions;
use support::all_active_but;

const S: u64 = 1_000_000_000;

fn fabric(json: &str) -> Fabric {
    generate(&serde_json::from_str::<GenSpec>(json).unwrap()).unwrap()
}

fn ft3_128() -> Fabric {
    fabric(r#"{"family":"fat-tree3","radix":8}"#)
}

fn ft2_32() -> Fabric {
    fabric(r#"{"family":"fat-tree2","radix":8}"#)
}

fn sm_port(f: &Fabric) -> PortIdx {
    f.cas()
        .flat_map(|n| f.node_ports(n))
        .find(|&p| f.port(p).remote.is_some())
        .unwrap()
}

fn driver(f: &Fabric, loss: f64, seed: u64, scenario: &str) -> SimDriver {
    driver_with(f, Params::default(), loss, seed, scenario)
}

fn driver_with(f: &Fabric, params: Params, loss: f64, seed: u64, scenario: &str) -> SimDriver {
    let cfg = SimConfig {
        seed,
        faults: sm_sim::Faults {
            loss,
            ..sm_sim::Faults::default()
        },
        ..SimConfig::default()
    };
    let mut d = SimDriver::new(f, sm_port(f), params, LidStore::new(), cfg);
    if !scenario.is_empty() {
        d.sim
            .load_scenario(&Scenario::parse("test", scenario).unwrap())
            .unwrap();
    }
    d.start();
    d
}

/// The first heavy sweep's report.
fn first_sweep(d: &mut SimDriver) -> SweepReport {
    match d.run_until(60 * S, |e| matches!(e, Event::SweepDone(_))) {
        Some(Event::SweepDone(r)) => *r,
        other => panic!("no sweep finished: {other:?}"),
    }
}

#[test]
fn twenty_percent_loss_brings_every_node_up_on_the_first_sweep() {
    let f = ft3_128();
    for seed in 1..=6 {
        let mut d = driver(&f, 0.2, seed, "");
        let r = first_sweep(&mut d);
        assert!(r.subnet_up, "seed {seed}: {:?}", r.errors);
        assert!(
            r.unresponsive.is_empty(),
            "seed {seed}: {:?}",
            r.unresponsive
        );
        assert_eq!(r.nodes, f.nodes().len(), "seed {seed}");
        assert!(
            r.mads_lost > 0,
            "seed {seed}: 20 % loss loses some requests whole"
        );
        all_active_but(&d, &f, &[]);
        let all = d.sim.check_all_pairs(&AllPairsOptions::default());
        assert!(all.all_delivered(), "seed {seed}: {:?}", all.failures);
    }
}

#[test]
fn a_silent_host_is_listed_and_everything_else_comes_up() {
    let f = ft2_32();
    let silent = f
        .cas()
        .find(|&n| f.node(n).description == "host 3 leaf 0")
        .unwrap();
    let host_port = f.port_of(silent, 1).unwrap();
    let leaf_port = f.port(host_port).remote.unwrap();
    let mut d = driver(&f, 0.0, 1, "at 0 silent \"host 3 leaf 0\"");
    let r = first_sweep(&mut d);
    assert!(r.subnet_up, "{:?}", r.errors);
    assert_eq!(r.nodes, f.nodes().len() - 1);
    let leaf = f.node(f.port(leaf_port).node);
    let where_ = format!("behind {}[{}]", leaf.guid, f.port(leaf_port).num);
    assert_eq!(r.unresponsive.len(), 1, "{:?}", r.unresponsive);
    assert_eq!(r.unresponsive[0].node, where_);
    assert_eq!(r.unresponsive[0].what, ["NodeInfo"]);
    all_active_but(&d, &f, &[host_port, leaf_port]);
    // The next sweep leaves it alone (it stopped answering), and once it answers again a
    // later sweep brings it up.
    d.sm.request_sweep(sm_daemon::core::Instant::from_nanos(d.now()), true);
    let r2 = first_sweep(&mut d);
    assert!(r2.subnet_up);
    d.sim
        .load_scenario(&Scenario::parse("t", "at 0 silent \"host 3 leaf 0\" off").unwrap())
        .unwrap();
    let mut up = false;
    for _ in 0..8 {
        d.sm.request_sweep(sm_daemon::core::Instant::from_nanos(d.now()), true);
        let r = first_sweep(&mut d);
        if r.nodes == f.nodes().len() && r.unresponsive.is_empty() {
            up = true;
            break;
        }
    }
    assert!(up, "the host came back and was never configured");
    assert_eq!(d.sim.port(host_port).info.port_state, PortState::Active);
}

#[test]
fn a_silent_leaf_leaves_only_its_hosts_out() {
    let f = ft2_32();
    let mut d = driver(&f, 0.0, 1, "at 0 silent \"leaf 1\"");
    let r = first_sweep(&mut d);
    assert!(r.subnet_up, "{:?}", r.errors);
    // The leaf and its four hosts are not in the model; every spine reports the leaf
    // behind one of its ports.
    assert_eq!(r.nodes, f.nodes().len() - 5);
    assert!(!r.unresponsive.is_empty());
    assert!(r.unresponsive.iter().all(|u| u.node.starts_with("behind ")));
}

#[test]
fn a_host_that_answers_late_comes_up_with_the_rest() {
    let f = ft2_32();
    let mut d = driver(&f, 0.0, 1, "at 0 slow \"host 5 leaf 1\" 50ms");
    let r = first_sweep(&mut d);
    assert!(r.subnet_up, "{:?}", r.errors);
    assert!(r.unresponsive.is_empty(), "{:?}", r.unresponsive);
    assert_eq!(r.nodes, f.nodes().len());
    all_active_but(&d, &f, &[]);
}

/// Every switch's agent keeps LinkSpeedEnabled and the M_Key lease period, as ibsim's do;
/// the SM asks for a lease of 60 s, which those agents answer and keep at 0.
fn stubborn_switches(f: &Fabric, loss: f64, seed: u64) -> SimDriver {
    let scenario: String = f
        .switches()
        .map(|n| format!("at 0 stubborn \"{}\"\n", f.node(n).description))
        .collect();
    let params = Params {
        m_key_lease_period: 60,
        ..Params::default()
    };
    driver_with(f, params, loss, seed, &scenario)
}

#[test]
fn a_setting_an_agent_keeps_is_not_sent_to_it_again() {
    let f = ft3_128();
    let mut d = stubborn_switches(&f, 0.0, 1);
    let r = first_sweep(&mut d);
    assert!(r.subnet_up, "{:?}", r.errors);
    // One settings Set per port with settings; the switches kept the lease.
    let per_port = r.port_info_sets;
    let switch_port = f
        .switches()
        .flat_map(|n| f.node_ports(n))
        .find(|&p| f.port(p).num == 1)
        .unwrap();
    assert_eq!(d.sim.port(switch_port).info.m_key_lease_period, 0);
    // A heavy sweep finds the lease still 0 on every switch port and sends nothing: those
    // agents answered that very Set already.
    d.sm.request_sweep(sm_daemon::core::Instant::from_nanos(d.now()), true);
    let r = first_sweep(&mut d);
    assert!(r.subnet_up);
    assert_eq!(r.port_info_sets, 0, "{r:?}");
    // Under loss, a second pass over the rounds sends again only what went unanswered.
    for seed in 1..=3 {
        let mut d = stubborn_switches(&f, 0.1, seed);
        let r = first_sweep(&mut d);
        assert!(r.subnet_up, "seed {seed}: {:?}", r.errors);
        assert!(r.mads_lost > 0, "seed {seed}: nothing lost, no second pass");
        assert!(
            r.port_info_sets <= per_port + r.mads_lost,
            "seed {seed}: {} settings Sets for {per_port} ports with {} lost",
            r.port_info_sets,
            r.mads_lost
        );
    }
}

#[test]
fn under_loss_no_port_is_asked_to_reregister_twice() {
    let f = ft3_128();
    let mut d = driver(&f, 0.1, 7, "");
    let r = first_sweep(&mut d);
    assert!(r.subnet_up);
    // Two seconds of sweeping at 10 % loss, light and heavy (a heavy one every 300 ms).
    let start = d.now();
    while d.now() < start + 2 * S {
        d.sm.request_sweep(sm_daemon::core::Instant::from_nanos(d.now()), true);
        d.run_while(300_000_000, |_| false);
    }
    let mut asked = 0;
    for p in f.cas().flat_map(|n| f.node_ports(n)) {
        let n = d.sim.port(p).reregistrations;
        assert!(n <= 1, "{:?} was asked {n} times", f.port(p));
        asked += n;
    }
    assert_eq!(asked as usize, f.cas().count(), "each host once");
}

#[test]
fn thirty_percent_loss_still_comes_up() {
    let f = ft2_32();
    for seed in 1..=3 {
        let mut d = driver(&f, 0.3, seed, "");
        let r = first_sweep(&mut d);
        assert!(r.subnet_up, "seed {seed}: {:?}", r.errors);
        assert!(r.nodes > f.nodes().len() / 2, "seed {seed}: {}", r.nodes);
    }
}
