//! Sweeps that finish despite what the fabric does to them: heavy MAD loss, agents that never
//! answer or answer late. The subnet comes up for everything that answers, what does not is
//! listed, later sweeps try it again, and no port is asked for a client reregistration twice.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx};
use sm_core::generate::{GenSpec, generate};
use sm_core::lid::LidStore;
use sm_daemon::core::{Event, Params, SweepReport};
use sm_daemon::transport::sim::SimDriver;
use sm_mad::Sl;
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
            r.duplicate_guids.is_empty(),
            "seed {seed}: {:?}",
            r.duplicate_guids
        );
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

// Duplicated GUIDs: a cloned or mis-flashed device answers with a GUID another one has.

fn node(f: &Fabric, desc: &str) -> NodeIdx {
    NodeIdx(
        f.nodes()
            .iter()
            .position(|n| n.description == desc)
            .unwrap() as u32,
    )
}

/// `GUID[port]` of the port linked to `p`.
fn peer(f: &Fabric, p: PortIdx) -> String {
    let r = f.port(p).remote.unwrap();
    format!("{}[{}]", f.node(f.port(r).node).guid, f.port(r).num)
}

/// The report's places behind each port (`behind GUID[port] ...`), as `GUID[port]`.
fn behind(places: &[String]) -> BTreeSet<String> {
    places
        .iter()
        .map(|p| {
            let rest = p.strip_prefix("behind ").unwrap_or_else(|| panic!("{p}"));
            rest.split(' ').next().unwrap().to_string()
        })
        .collect()
}

/// Every CA pair of the SM's plan is delivered through what the switches hold.
fn plan_pairs_delivered(d: &SimDriver, what: &str) {
    support::traced_without_credit_loops(d, what, |_, _| Sl(0));
}

#[test]
fn a_host_with_another_hosts_guid_is_reported_and_left_out() {
    let f = ft2_32();
    let (first, copy) = (node(&f, "host 5 leaf 1"), node(&f, "host 10 leaf 2"));
    let (first_port, copy_port) = (f.port_of(first, 1).unwrap(), f.port_of(copy, 1).unwrap());
    let scenario = "at 0 clone-guid \"host 5 leaf 1\" \"host 10 leaf 2\"";
    let mut d = driver(&f, 0.0, 1, scenario);
    let r = first_sweep(&mut d);
    assert!(r.subnet_up, "{:?}", r.errors);
    assert_eq!(r.nodes, f.nodes().len() - 1, "the copy is left out");
    assert_eq!(r.duplicate_guids.len(), 1, "{:?}", r.duplicate_guids);
    let dup = &r.duplicate_guids[0];
    assert_eq!(dup.guid, f.node(first).guid.to_string());
    assert_eq!(dup.kind, "node");
    assert_eq!(
        behind(std::slice::from_ref(&dup.kept)),
        [peer(&f, first_port)].into()
    );
    assert_eq!(behind(&dup.left_out), [peer(&f, copy_port)].into());
    // One error, naming both places; the SM holds the same list.
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    assert!(
        r.errors[0].contains(&peer(&f, first_port)) && r.errors[0].contains(&peer(&f, copy_port)),
        "{}",
        r.errors[0]
    );
    assert_eq!(d.sm.duplicate_guids(), r.duplicate_guids.as_slice());
    // Everything else is up, the first host too; the copy's link is left short of ACTIVE.
    all_active_but(&d, &f, &[copy_port]);
    assert_ne!(d.sim.port(copy_port).info.port_state, PortState::Active);
    plan_pairs_delivered(&d, "the rest");
    // No sweep storm: the next heavy sweep is asked for, and finds it again.
    d.sm.request_sweep(sm_daemon::core::Instant::from_nanos(d.now()), true);
    let r2 = first_sweep(&mut d);
    assert_eq!(r2.sweep, r.sweep + 1);
    assert!(r2.subnet_up);
    assert_eq!(r2.duplicate_guids, r.duplicate_guids);
}

#[test]
fn a_host_with_the_sms_own_guid_is_left_out() {
    let f = ft2_32();
    let own = f.port(sm_port(&f)).node;
    let copy = node(&f, "host 14 leaf 3");
    let copy_port = f.port_of(copy, 1).unwrap();
    let scenario = format!(
        "at 0 clone-guid \"{}\" \"host 14 leaf 3\"",
        f.node(own).description
    );
    let mut d = driver(&f, 0.0, 1, &scenario);
    let r = first_sweep(&mut d);
    assert!(r.subnet_up, "{:?}", r.errors);
    assert_eq!(r.nodes, f.nodes().len() - 1);
    assert_eq!(r.duplicate_guids.len(), 1, "{:?}", r.duplicate_guids);
    let dup = &r.duplicate_guids[0];
    assert_eq!(dup.guid, f.node(own).guid.to_string());
    assert_eq!(dup.kept, "the SM's own node");
    assert_eq!(behind(&dup.left_out), [peer(&f, copy_port)].into());
    all_active_but(&d, &f, &[copy_port]);
    plan_pairs_delivered(&d, "the rest");
}

/// Leaf 2 answers with leaf 1's GUID. Either may be met first (under loss the order
/// changes): that one is kept with its hosts, the other is left out with its hosts, and
/// every spine port that leads to it is named.
fn check_switch_copy(f: &Fabric, d: &SimDriver, r: &SweepReport, what: &str) {
    let (l1, l2) = (node(f, "leaf 1"), node(f, "leaf 2"));
    assert!(r.subnet_up, "{what}: {:?}", r.errors);
    assert_eq!(
        r.duplicate_guids.len(),
        1,
        "{what}: {:?}",
        r.duplicate_guids
    );
    let dup = &r.duplicate_guids[0];
    assert_eq!(dup.guid, f.node(l1).guid.to_string(), "{what}");
    let uplinks = |n: NodeIdx| -> Vec<PortIdx> {
        f.node_ports(n)
            .filter(|&p| {
                f.port(p)
                    .remote
                    .is_some_and(|r| f.node(f.port(r).node).kind == NodeKind::Switch)
            })
            .collect()
    };
    let spine_ends =
        |n: NodeIdx| -> BTreeSet<String> { uplinks(n).into_iter().map(|p| peer(f, p)).collect() };
    let left_out = behind(&dup.left_out);
    let (kept, gone) = if left_out == spine_ends(l2) {
        (l1, l2)
    } else {
        assert_eq!(left_out, spine_ends(l1), "{what}: {dup:?}");
        (l2, l1)
    };
    assert!(
        spine_ends(kept).contains(behind(std::slice::from_ref(&dup.kept)).first().unwrap()),
        "{what}: {dup:?}"
    );
    // The copy left out and its hosts; its links, uplinks and host links, not in the model.
    let hosts = f
        .node_ports(gone)
        .filter(|&p| f.port(p).remote.is_some())
        .count()
        - uplinks(gone).len();
    assert_eq!(r.nodes, f.nodes().len() - 1 - hosts, "{what}");
    assert_eq!(
        r.links,
        f.counts().links - hosts - uplinks(gone).len(),
        "{what}: the kept leaf's links are its own"
    );
    let cut: Vec<PortIdx> = f.node_ports(gone).collect();
    all_active_but(d, f, &cut);
    plan_pairs_delivered(d, what);
}

#[test]
fn a_switch_with_another_switchs_guid_is_reported_and_left_out_with_its_hosts() {
    let f = ft2_32();
    // The SM is on leaf 0: the two leaves are met at the same depth, through the same
    // spines, each through several.
    let scenario = "at 0 clone-guid \"leaf 1\" \"leaf 2\"";
    let mut d = driver(&f, 0.0, 1, scenario);
    let r = first_sweep(&mut d);
    check_switch_copy(&f, &d, &r, "no loss");
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    for seed in 1..=4 {
        let mut d = driver(&f, 0.1, seed, scenario);
        let r = first_sweep(&mut d);
        check_switch_copy(&f, &d, &r, &format!("10 % loss, seed {seed}"));
    }
}

#[test]
fn a_node_whose_nodeinfo_disagrees_is_another_device() {
    // A host answering with a leaf's GUID: the NodeInfo of a CA where a switch was met.
    let f = ft2_32();
    let copy = node(&f, "host 16 leaf 4");
    let copy_port = f.port_of(copy, 1).unwrap();
    let mut d = driver(&f, 0.0, 1, "at 0 clone-guid \"leaf 1\" \"host 16 leaf 4\"");
    let r = first_sweep(&mut d);
    assert!(r.subnet_up, "{:?}", r.errors);
    assert_eq!(r.nodes, f.nodes().len() - 1);
    assert_eq!(r.duplicate_guids.len(), 1, "{:?}", r.duplicate_guids);
    let dup = &r.duplicate_guids[0];
    assert_eq!(dup.guid, f.node(node(&f, "leaf 1")).guid.to_string());
    assert!(dup.why.contains("NodeInfo"), "{dup:?}");
    assert_eq!(behind(&dup.left_out), [peer(&f, copy_port)].into());
    all_active_but(&d, &f, &[copy_port]);
}

#[test]
fn switches_met_through_many_paths_are_no_duplicates() {
    // Every switch of a three-level tree is met through several links; MADs lost,
    // delivered twice and overtaken change the order answers come in, never the verdict.
    let f = ft3_128();
    let faults = "at 0 duplicate 0.1\nat 0 reorder 0.2 20us";
    for seed in 1..=4 {
        let mut d = driver(&f, 0.1, seed, faults);
        let r = first_sweep(&mut d);
        assert!(r.subnet_up, "seed {seed}: {:?}", r.errors);
        assert!(
            r.duplicate_guids.is_empty() && r.errors.is_empty(),
            "seed {seed}: {:?}",
            r.duplicate_guids
        );
        assert!(d.sm.duplicate_guids().is_empty());
    }
}
