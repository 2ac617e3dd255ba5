//! Repairs in the simulated fabric: links and a whole switch go down and come back, a
//! host leaves and returns, twenty links flap at once. Every state the switches pass
//! through while a repair programs them (each time any table changes) is checked for
//! forwarding loops and credit loops; afterwards every pair is delivered, no heavy sweep
//! ran, LIDs are the same, and once everything is back the tables are the original ones.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeSet, HashMap};

use sm_core::NodeKind;
use sm_core::fabric::{Fabric, NodeIdx, PortIdx};
use sm_core::generate::{GenSpec, generate};
use sm_core::lid::LidStore;
use sm_daemon::core::{Event, Params, Plan, SweepReport};
use sm_daemon::transport::sim::SimDriver;
use sm_mad::Guid;
use sm_routing::{Routes, Topo, ValidateOptions, validate};
use sm_sim::{Fault, SimConfig};
use support::{all_pairs_delivered, run_watching};

const MS: u64 = 1_000_000;

fn fat_tree() -> Fabric {
    let spec: GenSpec =
        serde_json::from_str(r#"{"family":"fat-tree3","radix":8,"pods":4}"#).unwrap();
    generate(&spec).unwrap()
}

/// A 3-level fat tree of 24-port switches in two pods: a core has 2 of its ports linked.
fn two_pods() -> Fabric {
    let spec: GenSpec =
        serde_json::from_str(r#"{"family":"fat-tree3","radix":24,"pods":2}"#).unwrap();
    generate(&spec).unwrap()
}

fn up(f: &Fabric, routing: &str) -> (SimDriver, SweepReport) {
    up_with(
        f,
        Params {
            routing: routing.into(),
            ..Params::default()
        },
    )
}

fn up_with(f: &Fabric, params: Params) -> (SimDriver, SweepReport) {
    let sm = f
        .cas()
        .flat_map(|n| f.node_ports(n))
        .find(|&p| f.port(p).remote.is_some())
        .unwrap();
    let mut d = SimDriver::new(f, sm, params, LidStore::new(), SimConfig::default());
    d.start();
    let e = d
        .run_until(
            60_000 * MS,
            |e| matches!(e, Event::SweepDone(r) if r.subnet_up),
        )
        .expect("subnet up");
    let Event::SweepDone(r) = e else {
        unreachable!()
    };
    (d, *r)
}

/// Up under minhop with no light sweeps: one due as a link goes would send its
/// LID-routed Gets the dead way, and the tests that use this count the repairs' own.
fn up_quiet(f: &Fabric) -> SimDriver {
    let params = Params {
        routing: "minhop".into(),
        sweep_interval: std::time::Duration::ZERO,
        ..Params::default()
    };
    up_with(f, params).0
}

/// Every switch's table as the simulated switch holds it, by switch GUID.
fn tables(d: &SimDriver, f: &Fabric) -> HashMap<Guid, Vec<u8>> {
    f.switches()
        .filter_map(|n| {
            let sw = d.sim.node(n).switch.as_ref()?;
            Some((f.node(n).guid, sw.lft.clone()))
        })
        .collect()
}

/// The tables the switches hold now, checked against the fabric as the SM's plan has it
/// (its LIDs, the links it knows): no forwarding loop and no credit loop, whatever is
/// half programmed.
fn check_state(d: &SimDriver, held: &HashMap<Guid, Vec<u8>>, credit: bool, what: &str) {
    let m = &d.sm.plan().expect("a plan").fabric;
    let topo = Topo::new(m).unwrap();
    let mut r = Routes::empty("sim", &topo);
    for (i, &n) in topo.switches.iter().enumerate() {
        if let Some(t) = held.get(&m.node(n).guid) {
            for (lid, e) in r.lft[i].iter_mut().enumerate() {
                *e = t.get(lid).copied().unwrap_or(255);
            }
        }
    }
    let v = validate(&topo, &r, &ValidateOptions::default());
    assert_eq!(v.forwarding_loops, 0, "{what}: forwarding loop\n{v}");
    if credit {
        assert_eq!(v.credit_loops, 0, "{what}: credit loop\n{v}");
    }
}

/// Runs `span` of virtual time, checking every state the tables pass through; returns
/// the sweeps that ended meanwhile and how many distinct states were checked.
fn run_checked(
    d: &mut SimDriver,
    f: &Fabric,
    span: u64,
    credit: bool,
    what: &str,
) -> (Vec<SweepReport>, usize) {
    let mut last = tables(d, f);
    let mut states = 0;
    let sweeps = run_watching(d, span, |d| {
        let now = tables(d, f);
        if now != last {
            states += 1;
            check_state(d, &now, credit, &format!("{what}, state {states}"));
            last = now;
        }
    });
    (sweeps, states)
}

fn repairs_only(sweeps: &[SweepReport], what: &str) {
    assert!(!sweeps.is_empty(), "{what}: nothing happened");
    for r in sweeps {
        assert!(!r.heavy, "{what}: a heavy sweep ({})", r.trigger);
        assert!(r.subnet_up, "{what}: {:?}", r.errors);
        assert_eq!(r.reroute, "only the broken routes", "{what}: {}", r.trigger);
    }
}

/// Only repairs, none retrying or losing a Get (none went a dead way).
fn repairs_losing_nothing(sweeps: &[SweepReport], what: &str) {
    repairs_only(sweeps, what);
    for r in sweeps {
        assert_eq!(
            (r.mads_retried, r.mads_lost),
            (0, 0),
            "{what}: a Get went the dead way ({})",
            r.trigger
        );
    }
}

/// Applies `fault` and runs 100 ms: [`repairs_losing_nothing`], each at most its LFT
/// blocks + 20 SMPs.
fn repaired_cleanly(d: &mut SimDriver, fault: Fault, what: &str) -> Vec<SweepReport> {
    d.sim.apply_fault(fault).unwrap();
    let sweeps = run_watching(d, 100 * MS, |_| {});
    repairs_losing_nothing(&sweeps, what);
    for r in &sweeps {
        assert!(
            r.mads_sent <= r.lft_blocks_sent + 20,
            "{what}: {} SMPs for {} blocks ({})",
            r.mads_sent,
            r.lft_blocks_sent,
            r.trigger
        );
    }
    sweeps
}

/// A switch-to-switch link of `f` between the named nodes' levels.
fn link(f: &Fabric, from: &str, to: &str) -> PortIdx {
    f.links()
        .find_map(|(a, b)| {
            let (na, nb) = (f.node(f.port(a).node), f.node(f.port(b).node));
            let pick = |x: PortIdx, nx: &sm_core::fabric::Node, ny: &sm_core::fabric::Node| {
                (nx.description.starts_with(from) && ny.description.starts_with(to)).then_some(x)
            };
            pick(a, na, nb).or_else(|| pick(b, nb, na))
        })
        .unwrap()
}

#[test]
fn links_and_a_switch_go_and_return_through_loop_free_states() {
    let f = fat_tree();
    // Up/down routes are free of credit loops in every state; minhop (as OpenSM's) makes
    // no such promise on a degraded tree, so only forwarding loops are ruled out there.
    for (routing, credit) in [("updn", true), ("minhop", false)] {
        let (mut d, _) = up(&f, routing);
        let original = tables(&d, &f);
        let lids = d.sm.lid_store().clone();
        let events: [(&str, Vec<Fault>, Vec<Fault>); 3] = [
            (
                "spine-core link",
                vec![Fault::LinkDown(link(&f, "spine 1 pod 1", "core"))],
                vec![Fault::LinkUp(link(&f, "spine 1 pod 1", "core"))],
            ),
            (
                "leaf-spine link",
                vec![Fault::LinkDown(link(&f, "leaf 2 pod 2", "spine"))],
                vec![Fault::LinkUp(link(&f, "leaf 2 pod 2", "spine"))],
            ),
            (
                "spine reboot",
                vec![Fault::Reboot {
                    node: f
                        .nodes()
                        .iter()
                        .position(|n| n.description == "spine 2 pod 3")
                        .map(|i| NodeIdx(i as u32))
                        .unwrap(),
                    down: 50 * MS,
                }],
                Vec::new(),
            ),
        ];
        for (name, down, back) in events {
            let what = format!("{routing}: {name}");
            for fault in down {
                d.sim.apply_fault(fault).unwrap();
            }
            let (sweeps, states) = run_checked(&mut d, &f, 200 * MS, credit, &what);
            repairs_only(&sweeps, &what);
            assert!(states > 0, "{what}: no table changed");
            for r in &sweeps {
                assert_eq!(
                    r.lft_entries_moved,
                    r.lft_entries_moved_min + r.lft_entries_restored,
                    "{what}: only the broken routes move ({})",
                    r.trigger
                );
            }
            all_pairs_delivered(&d, &what);
            // A rebooted switch comes back by itself.
            if !back.is_empty() {
                for fault in back {
                    d.sim.apply_fault(fault).unwrap();
                }
                let what = format!("{what} back");
                let (sweeps, _) = run_checked(&mut d, &f, 200 * MS, credit, &what);
                repairs_only(&sweeps, &what);
            }
            all_pairs_delivered(&d, &format!("{what} back"));
            assert!(
                tables(&d, &f) == original,
                "{what}: the tables are not the original ones once everything is back"
            );
            assert_eq!(d.sm.lid_store(), &lids, "{what}: LIDs changed");
        }
    }
}

#[test]
fn a_host_that_leaves_is_absent_and_returns_with_its_lid() {
    let f = fat_tree();
    let (mut d, first) = up(&f, "minhop");
    let lids = d.sm.lid_store().clone();
    // A host other than the SM's.
    let host = f
        .cas()
        .filter(|&n| f.node(n).description.contains("pod 2"))
        .flat_map(|n| f.node_ports(n))
        .find(|&p| f.port(p).remote.is_some())
        .unwrap();
    let guid = f.node(f.port(host).node).guid;
    d.sim.apply_fault(Fault::LinkDown(host)).unwrap();
    let (sweeps, _) = run_checked(&mut d, &f, 200 * MS, false, "host down");
    repairs_only(&sweeps, "host down");
    let r = sweeps.last().unwrap();
    assert_eq!(r.cas, first.cas - 1, "the host is not counted");
    let m = d.sm.model().unwrap();
    let n = m.fabric.node_by_guid(guid).unwrap();
    assert!(!m.present(n), "the host is absent from the model");
    assert!(!d.sm.lfts().unwrap().switches.is_empty(), "the tables stay");

    d.sim.apply_fault(Fault::LinkUp(host)).unwrap();
    let (sweeps, _) = run_checked(&mut d, &f, 200 * MS, false, "host back");
    repairs_only(&sweeps, "host back");
    assert_eq!(sweeps.last().unwrap().cas, first.cas);
    let m = d.sm.model().unwrap();
    assert!(m.present(m.fabric.node_by_guid(guid).unwrap()));
    assert_eq!(d.sm.lid_store(), &lids, "LIDs changed");
    all_pairs_delivered(&d, "host back");
}

/// The ports of `s` each (switch, LID) entry leaves by in `t`, walked to the LID: the
/// switch ports along its path.
fn path_ports(f: &Fabric, t: &HashMap<Guid, Vec<u8>>, s: NodeIdx, lid: usize) -> Vec<PortIdx> {
    let mut out = Vec::new();
    let mut at = s;
    for _ in 0..f.switches().count() {
        let Some(&e) = t.get(&f.node(at).guid).and_then(|l| l.get(lid)) else {
            break;
        };
        let Some(p) = f.port_of(at, e).filter(|_| e != 0 && e != 255) else {
            break;
        };
        out.push(p);
        match f.port(p).remote.map(|r| f.port(r).node) {
            Some(n) if f.node(n).kind == NodeKind::Switch => at = n,
            _ => break,
        }
    }
    out
}

#[test]
fn a_flap_storm_ends_valid_with_lids_kept_and_untouched_routes_never_moved() {
    let f = fat_tree();
    let (mut d, _) = up(&f, "minhop");
    let original = tables(&d, &f);
    let lids = d.sm.lid_store().clone();
    // Twenty switch-to-switch links, spread over the fabric.
    let switch_links = support::switch_links(&f);
    let flapped: Vec<(PortIdx, PortIdx)> = switch_links
        .iter()
        .copied()
        .step_by(switch_links.len() / 20)
        .take(20)
        .collect();
    assert_eq!(flapped.len(), 20);
    let dead: BTreeSet<PortIdx> = flapped.iter().flat_map(|&(a, b)| [a, b]).collect();
    // Entries whose path crosses none of the flapped links must never change.
    let max_lid = original.values().map(Vec::len).max().unwrap();
    let mut untouched = Vec::new();
    for s in f.switches() {
        for lid in 1..max_lid {
            let path = path_ports(&f, &original, s, lid);
            let crosses = path
                .iter()
                .any(|p| dead.contains(p) || f.port(*p).remote.is_some_and(|r| dead.contains(&r)));
            if !path.is_empty() && !crosses {
                untouched.push((f.node(s).guid, lid, original[&f.node(s).guid][lid]));
            }
        }
    }
    assert!(untouched.len() > 1000);
    // Each link down for 2 ms of every 5, starting a little apart: 200 ms of flapping.
    let ends = flapped.iter().map(|&(a, _)| a);
    support::flap(&mut d, ends, 100_000, 5 * MS, 40, 2 * MS);
    let sweeps = run_watching(&mut d, 1_000 * MS, |d| {
        let held = tables(d, &f);
        for &(g, lid, port) in &untouched {
            assert_eq!(
                held[&g].get(lid).copied(),
                Some(port),
                "{g} LID {lid} moved although its path crosses no flapped link"
            );
        }
    });
    assert!(sweeps.len() > 1, "the storm caused repairs");
    for r in &sweeps {
        assert!(!r.heavy, "a heavy sweep in the storm: {}", r.trigger);
    }
    all_pairs_delivered(&d, "after the storm");
    assert!(tables(&d, &f) == original, "the tables came back");
    assert_eq!(d.sm.lid_store(), &lids, "LIDs changed");
}

/// A link that comes back while its loss is being repaired, from switches whose further
/// traps are not acted on (muted): the light sweep finds the return by PortStateChange.
/// The repair clears that bit before it reads the ports; cleared after them, it wiped out
/// a return that fell between, and the routes stayed on their detour for good.
#[test]
fn a_link_back_during_its_repair_is_found_though_its_traps_are_muted() {
    let f = fat_tree();
    let a = link(&f, "spine 1 pod 1", "core");
    let mut stuck = Vec::new();
    for k in 0..80u64 {
        let mut params = Params {
            routing: "minhop".into(),
            sweep_interval: std::time::Duration::from_secs(1),
            ..Params::default()
        };
        // One trap per switch is acted on; the next ones are muted.
        params.health.link_flaps = 0;
        params.health.trap_burst = 1;
        params.health.trap_rate = 0.001;
        let (mut d, _) = up_with(&f, params);
        let original = tables(&d, &f);
        d.sim.apply_fault(Fault::LinkDown(a)).unwrap();
        // Back 2 ms (the traps gathered) plus 0 to 20 us later: during the repair, which
        // takes a few microseconds here.
        let back = d.now() + 2 * MS + k * 250;
        d.sim.schedule_fault(back, Fault::LinkUp(a)).unwrap();
        run_watching(&mut d, 1_500 * MS, |_| {});
        if tables(&d, &f) != original {
            stuck.push(k * 250);
        }
    }
    assert!(
        stuck.is_empty(),
        "routes left on their detour when the link came back 2 ms + {stuck:?} ns after it went"
    );
}

/// A link that fails while a light sweep is out: the sweep's Gets that crossed it are
/// given up when the repair starts, not retried while the repair waits for them.
#[test]
fn a_failure_during_a_light_sweep_is_repaired_without_waiting_for_it() {
    let f = fat_tree();
    let interval = 10_000 * MS;
    let a = link(&f, "spine 0 pod 1", "core");
    let mut waited = Vec::new();
    for k in 0..20u64 {
        let params = Params {
            routing: "minhop".into(),
            sweep_interval: std::time::Duration::from_nanos(interval),
            ..Params::default()
        };
        let (mut d, _) = up_with(&f, params);
        // The light sweep starts `interval` after the subnet came up; the link goes 0 to
        // 19 us after, while its Gets are out.
        let light = d.now() + interval;
        d.sim
            .schedule_fault(light + k * 1_000, Fault::LinkDown(a))
            .unwrap();
        let sweeps = run_watching(&mut d, interval + 500 * MS, |_| {});
        repairs_only(&sweeps, "a link down during a light sweep");
        if sweeps
            .iter()
            .any(|r| r.mads_retried > 0 || r.discovery_ns > MS)
        {
            waited.push(k);
        }
        all_pairs_delivered(&d, "after the repair");
    }
    assert!(
        waited.is_empty(),
        "repairs waited for a light sweep's retries: link down {waited:?} us into it"
    );
}

#[test]
fn a_dragonfly_stays_deadlock_free_through_a_flap_storm_under_the_layered_engine() {
    use sm_core::generate::Dragonfly;
    let f = generate(&GenSpec::Dragonfly(Dragonfly::new(9, 4, 2))).unwrap();
    let (mut d, _) = up(&f, "layered");
    let lids = d.sm.lid_store().clone();
    let switch_links = support::switch_links(&f);
    let ends = switch_links.iter().step_by(7).take(6).map(|&(a, _)| a);
    support::flap(&mut d, ends, 300_000, 7 * MS, 12, 3 * MS);
    // Half-programmed states may mix old and new paths on their SLs: only forwarding loops
    // are ruled out while the storm lasts.
    let (sweeps, states) = run_checked(&mut d, &f, 1_000 * MS, false, "dragonfly storm");
    assert!(states > 0 && sweeps.len() > 1, "the storm caused repairs");
    let last = sweeps.last().unwrap();
    assert!(last.subnet_up, "{:?}", last.errors);
    all_pairs_delivered(&d, "after the storm");
    let plan = d.sm.plan().unwrap().clone();
    assert!(plan.vls_used().is_some_and(|n| n >= 2), "layered SLs kept");
    let vls = support::traced_without_credit_loops(&d, "after the storm", |s, dlid| {
        sm_mad::Sl(plan.path_sl(s, dlid).unwrap())
    });
    assert!(vls.len() >= 2, "{vls:?}");
    let topo = Topo::new(&plan.fabric).unwrap();
    let v = validate(&topo, &plan.to_routes(), &ValidateOptions::default());
    assert_eq!(v.credit_loops, 0, "{v}");
    assert_eq!(d.sm.lid_store(), &lids, "LIDs changed");
}

/// Every switch-to-switch link outside the SM's pod goes down and comes back. The look
/// reads the switches that trapped along the way their traps came and represses each
/// trap the same way, so no Get crosses the dead link (nothing retried, nothing lost)
/// and no trap repeats into another repair: where the link carried neither end's traps,
/// one repair sees both ends. Every repair costs at most its LFT blocks + 20 SMPs.
#[test]
fn each_link_loss_is_looked_at_along_the_way_its_traps_came() {
    let f = fat_tree();
    let mut d = up_quiet(&f);
    let original = tables(&d, &f);
    let sm_lid = usize::from(d.sm.own_lid().0);
    let pod0 = |p: PortIdx| f.node(f.port(p).node).description.ends_with("pod 0");
    let switch = |p: PortIdx| f.node(f.port(p).node).kind == NodeKind::Switch;
    let links: Vec<(PortIdx, PortIdx)> = f
        .links()
        .filter(|&(a, b)| switch(a) && switch(b) && !pod0(a) && !pod0(b))
        .collect();
    assert!(links.len() >= 64, "{} links", links.len());
    let mut lone = 0;
    for (a, b) in links {
        let name =
            |p: PortIdx| format!("{}[{}]", f.node(f.port(p).node).description, f.port(p).num);
        let what = format!("{} - {}", name(a), name(b));
        // Does the link carry one end's traps to the SM? Then that end's trap dies.
        let carries = [a, b]
            .iter()
            .any(|&p| original[&f.node(f.port(p).node).guid].get(sm_lid) == Some(&f.port(p).num));
        for (fault, step) in [(Fault::LinkDown(a), "down"), (Fault::LinkUp(a), "up")] {
            let what = format!("{what} {step}");
            let sweeps = repaired_cleanly(&mut d, fault, &what);
            if step == "down" && carries {
                lone += 1;
            } else {
                assert_eq!(sweeps.len(), 1, "{what}: {} repairs", sweeps.len());
                let guids = [a, b].map(|p| f.node(f.port(p).node).guid.to_string());
                assert!(
                    guids.iter().all(|g| sweeps[0].trigger.contains(g.as_str())),
                    "{what}: one end's trap is missing ({})",
                    sweeps[0].trigger
                );
            }
        }
        all_pairs_delivered(&d, &what);
    }
    assert!(lone > 0, "no link carried an end's traps");
    assert!(
        tables(&d, &f) == original,
        "the tables are not the original ones"
    );
}

/// In the SM's pod every core of a group reaches the SM only through that pod's spine of
/// the group, the pod's leaves reach it through the one spine the balanced routes give
/// the SM's LID, and the SM's leaf hears from every spine of the pod only across their
/// links to it: when such a link goes, its far end's trap dies with it and the spine (or
/// leaf) traps alone, with all those ports likely. Rather than read each, the repair
/// sends a few directed-route probes, each out one likely link and back in another, and
/// reads only the ports of the probe that does not come back (the SM's leaf's host ports
/// only after its spines' probes). Every link of a spine of the SM's pod and of the SM's
/// leaf goes down and comes back: the repair costs fewer SMPs than there are likely
/// links, nothing is lost or retried, and the tables end as they began.
#[test]
fn a_lone_switchs_likely_links_are_probed_not_each_read() {
    let f = two_pods();
    let mut d = up_quiet(&f);
    let original = tables(&d, &f);
    let sm_port = f
        .cas()
        .flat_map(|n| f.node_ports(n))
        .find(|&p| f.port(p).remote.is_some())
        .unwrap();
    let sm_leaf = f.port(f.port(sm_port).remote.unwrap()).node;
    let spine = f.port(link(&f, "spine 0 pod 0", "core")).node;
    let switch = |p: PortIdx| f.node(f.port(p).node).kind == NodeKind::Switch;
    let mut links: Vec<(PortIdx, PortIdx)> = f
        .links()
        .filter(|&(a, b)| switch(a) && switch(b))
        .filter(|&(a, b)| {
            [a, b]
                .iter()
                .any(|&p| [spine, sm_leaf].contains(&f.port(p).node))
        })
        .collect();
    links.sort();
    links.dedup();
    assert_eq!(
        links.len(),
        12 + 12 + 11,
        "a spine's 24 links and the SM's leaf's 12"
    );
    // A lone switch's likely links: those whose far switch sends the SM's LID across.
    let sm_lid = usize::from(d.sm.own_lid().0);
    let likely = |trigger: &str| {
        let s = f
            .switches()
            .find(|&n| trigger.contains(&f.node(n).guid.to_string()))
            .unwrap();
        f.node_ports(s)
            .filter_map(|p| f.port(p).remote)
            .filter(|&r| {
                let t = f.node(f.port(r).node);
                original.get(&t.guid).and_then(|l| l.get(sm_lid)) == Some(&f.port(r).num)
            })
            .count() as u64
    };
    let mut probed = 0;
    for (a, b) in links {
        let name =
            |p: PortIdx| format!("{}[{}]", f.node(f.port(p).node).description, f.port(p).num);
        for (fault, step) in [(Fault::LinkDown(a), "down"), (Fault::LinkUp(a), "up")] {
            let what = format!("{} - {} {step}", name(a), name(b));
            for r in &repaired_cleanly(&mut d, fault, &what) {
                let over = r.mads_sent - r.lft_blocks_sent;
                if step == "down" && !r.trigger.contains(", ") && r.lft_blocks_sent > 0 {
                    // Read one by one, the likely links of a lone spine (its 12 cores and
                    // the pod's leaves that reach the SM through it) cost an SMP each
                    // and one more, those of the SM's leaf (12 spines, then or with them
                    // its 12 hosts) 13 or 25.
                    let n = likely(&r.trigger);
                    assert!(n >= 12, "{what}: {n} likely links ({})", r.trigger);
                    assert!(over < n, "{what}: {over} SMPs ({})", r.trigger);
                    probed += 1;
                }
            }
        }
    }
    assert!(probed >= 12, "only {probed} lone traps");
    all_pairs_delivered(&d, "after every link");
    assert!(
        tables(&d, &f) == original,
        "the tables are not the original ones"
    );

    // A host of the SM's leaf leaves: the probes of the spines' links all come back, and
    // the hosts' ports are read next.
    let host = f
        .node_ports(sm_leaf)
        .filter_map(|p| f.port(p).remote)
        .find(|&r| f.node(f.port(r).node).kind != NodeKind::Switch && r != sm_port)
        .unwrap();
    let guid = f.node(f.port(host).node).guid;
    d.sim.apply_fault(Fault::LinkDown(host)).unwrap();
    let sweeps = run_watching(&mut d, 100 * MS, |_| {});
    repairs_only(&sweeps, "a host of the SM's leaf down");
    let r = sweeps.last().unwrap();
    assert!(
        r.mads_sent <= r.lft_blocks_sent + 20,
        "{} SMPs",
        r.mads_sent
    );
    let m = d.sm.model().unwrap();
    assert!(
        !m.present(m.fabric.node_by_guid(guid).unwrap()),
        "the host is not absent"
    );
    d.sim.apply_fault(Fault::LinkUp(host)).unwrap();
    let sweeps = run_watching(&mut d, 100 * MS, |_| {});
    repairs_only(&sweeps, "a host of the SM's leaf back");
    let m = d.sm.model().unwrap();
    assert!(
        m.present(m.fabric.node_by_guid(guid).unwrap()),
        "the host is not back"
    );

    // A link that bounces (down, and up again before the repair looks) passes the probes:
    // the first repair reads its ports, finds them trained again and brings them back to
    // ACTIVE (its far end's trap, repeated later, would have found it too, later).
    let a = link(&f, "spine 1 pod 0", "core");
    d.sim.apply_fault(Fault::LinkDown(a)).unwrap();
    d.sim
        .schedule_fault(d.now() + MS / 2, Fault::LinkUp(a))
        .unwrap();
    let first = d.run_until(100 * MS, |e| matches!(e, Event::SweepDone(_)));
    let Some(Event::SweepDone(r)) = first else {
        panic!("a bounce: no repair");
    };
    assert!(
        !r.heavy && r.subnet_up,
        "a bounce: {} {:?}",
        r.trigger,
        r.errors
    );
    for q in [a, f.port(a).remote.unwrap()] {
        assert_eq!(
            d.sim.port(q).info.port_state,
            sm_mad::port_info::PortState::Active,
            "a bounce: {} is not ACTIVE after the first repair ({})",
            f.node(f.port(q).node).description,
            r.trigger
        );
    }
    let sweeps = run_watching(&mut d, 200 * MS, |_| {});
    repairs_only(&sweeps, "after a bounce");
    all_pairs_delivered(&d, "after a bounce");
    assert!(tables(&d, &f) == original, "a bounce: the tables moved");
}

/// Every spine and core switch outside the SM's pod reboots in turn (dark for 50 ms, back
/// with empty tables). Some of its neighbours send their traps to the SM through it, so
/// theirs die with it; the repair finds their side anyway, and every repair ends with the
/// subnet up, every pair delivered and, once the switch is back, the original tables.
/// With few pods a core's ports are mostly unused. When a core traps alone (the spine
/// across sent the SM's LID, and so its trap, over the link that went), those ports wait
/// behind the linked ones: read first, they cost one SMP each.
#[test]
fn a_lone_cores_unused_ports_are_read_last() {
    let f = two_pods();
    let mut d = up_quiet(&f);
    let is_core = |n: NodeIdx| f.node(n).description.starts_with("core");
    let mut lone_cores = 0;
    for spine in ["spine 0 pod 1", "spine 1 pod 1"] {
        let s = f
            .switches()
            .find(|&n| f.node(n).description == spine)
            .unwrap();
        let ups: Vec<PortIdx> = f
            .node_ports(s)
            .filter(|&p| f.port(p).remote.is_some_and(|r| is_core(f.port(r).node)))
            .collect();
        for a in ups {
            let core = f.port(f.port(a).remote.unwrap()).node;
            let guid = f.node(core).guid.to_string();
            for (fault, step) in [(Fault::LinkDown(a), "down"), (Fault::LinkUp(a), "up")] {
                let what = format!("{spine}[{}] {step}", f.port(a).num);
                for r in repaired_cleanly(&mut d, fault, &what) {
                    let lone = r.trigger.ends_with(&guid) && !r.trigger.contains(", ");
                    lone_cores += usize::from(lone && r.lft_blocks_sent > 0);
                }
            }
        }
    }
    assert!(lone_cores >= 2, "only {lone_cores} lone cores' repairs");
    all_pairs_delivered(&d, "after every link");
}

/// A heavy sweep while a link is down keeps the routes repairs moved off it (they are
/// legal), and must remember where they were: when the link returns, they go back, and
/// the tables are the balanced ones again.
#[test]
fn routes_moved_off_a_link_return_to_it_after_a_heavy_sweep_between() {
    let f = fat_tree();
    let mut d = up_quiet(&f);
    let original = tables(&d, &f);
    let a = link(&f, "spine 1 pod 1", "core");
    repaired_cleanly(&mut d, Fault::LinkDown(a), "core link down");
    let moved = tables(&d, &f);
    assert!(moved != original, "the link's routes did not move");
    d.sm.request_sweep(sm_daemon::core::Instant::from_nanos(d.now()), true);
    let sweeps = run_watching(&mut d, 100 * MS, |_| {});
    assert!(
        sweeps.iter().any(|r| r.heavy && r.subnet_up),
        "no heavy sweep"
    );
    assert!(tables(&d, &f) == moved, "the heavy sweep moved routes");
    let back = repaired_cleanly(&mut d, Fault::LinkUp(a), "core link back");
    assert!(
        back.iter().any(|r| r.lft_entries_restored > 0),
        "nothing restored"
    );
    all_pairs_delivered(&d, "after the link's return");
    assert!(
        tables(&d, &f) == original,
        "the tables are not the balanced ones again"
    );
}

#[test]
fn every_switch_away_from_the_sm_reboots_with_its_silenced_neighbours_found() {
    let f = fat_tree();
    for routing in ["updn", "minhop"] {
        let (mut d, _) = up(&f, routing);
        let original = tables(&d, &f);
        let switches: Vec<NodeIdx> = f
            .switches()
            .filter(|&n| {
                let desc = &f.node(n).description;
                !desc.starts_with("leaf") && !desc.ends_with("pod 0")
            })
            .collect();
        assert!(switches.len() >= 20, "{} switches", switches.len());
        reboot_each(&mut d, &f, &original, switches, &format!("{routing}: "));
    }
}

/// Reboots each of `switches` in turn (dark for 50 ms, back with empty tables): every
/// repair ends with the subnet up, every pair delivered and, once the switch is back,
/// the original tables.
fn reboot_each(
    d: &mut SimDriver,
    f: &Fabric,
    original: &HashMap<Guid, Vec<u8>>,
    switches: Vec<NodeIdx>,
    label: &str,
) {
    for n in switches {
        let what = format!("{label}{} reboots", f.node(n).description);
        d.sim
            .apply_fault(Fault::Reboot {
                node: n,
                down: 50 * MS,
            })
            .unwrap();
        let sweeps = run_watching(d, 300 * MS, |_| {});
        repairs_only(&sweeps, &what);
        all_pairs_delivered(d, &what);
        assert!(
            tables(d, f) == *original,
            "{what}: the tables are not the original ones once it is back"
        );
    }
}

/// The spines of the SM's pod reboot in turn: every core of the spine's group sent its
/// traps to the SM through it, so all of them are silenced at once and read along routes
/// around it (one search for all). Every repair ends with the subnet up, every pair
/// delivered and, once the spine is back, the original tables.
#[test]
fn a_spine_of_the_sms_pod_reboots_with_its_silenced_cores_found() {
    let f = fat_tree();
    let (mut d, _) = up(&f, "minhop");
    let original = tables(&d, &f);
    let spines: Vec<NodeIdx> = f
        .switches()
        .filter(|&n| {
            let desc = &f.node(n).description;
            desc.starts_with("spine") && desc.ends_with("pod 0")
        })
        .collect();
    assert_eq!(spines.len(), 4);
    reboot_each(&mut d, &f, &original, spines, "");
}

/// Runs `span` under a layered plan, checking every state the tables pass through for
/// credit loops among the traffic hosts send: on the SLs of `before` (the SA gives the
/// new ones only once the repair is programmed, and hosts keep theirs until they ask
/// again), every pair whose SL the repair keeps, and every pair when the repair reports
/// none exposed. The paths given another SL are counted in `paths_new_sl`. The same
/// checks hold once it is done.
fn run_layered_checked(
    d: &mut SimDriver,
    f: &Fabric,
    before: &Plan,
    what: &str,
) -> (Vec<SweepReport>, usize) {
    // A host that was away had no SL: it asks the SA when it comes back.
    let kept = |d: &SimDriver, src: PortIdx, dlid| {
        let was = before.path_sl(src, dlid)?;
        (d.sm.plan().unwrap().path_sl(src, dlid) == Some(was)).then_some(sm_mad::Sl(was))
    };
    let held = |src: PortIdx, dlid| before.path_sl(src, dlid).map(sm_mad::Sl);
    let mut last = tables(d, f);
    let (mut states, mut loops) = (0, Vec::new());
    let mut check = |d: &SimDriver, at: &str| {
        let (all, kept) =
            support::delivered_credit_loops(d, at, held, |s, l| kept(d, s, l).is_some());
        if let Some(e) = kept {
            panic!("{e}");
        }
        loops.extend(all);
    };
    let sweeps = run_watching(d, 300 * MS, |d| {
        let now = tables(d, f);
        if now != last {
            states += 1;
            check(d, &format!("{what}, state {states}"));
            last = now;
        }
    });
    check(d, &format!("{what}, done"));
    let exposed: u64 = sweeps.iter().map(|r| r.paths_exposed).sum();
    if exposed == 0 {
        assert!(loops.is_empty(), "none exposed, yet {}", loops[0]);
    }
    // The layers' dependencies kept from repair to repair are those of the tables and
    // SLs now, as a walk of every path finds them.
    let plan = d.sm.plan().unwrap();
    let routes = plan.to_routes();
    let topo = Topo::new(&plan.fabric).unwrap();
    let now: Vec<&[u8]> = routes.lft.iter().map(Vec::as_slice).collect();
    let fresh = sm_routing::relayer::Deps::of(&topo, &now, plan.sl.as_ref().unwrap(), 16);
    let kept = plan.deps.lock().unwrap().clone();
    assert!(kept.is_some(), "{what}: no dependencies kept");
    assert!(kept == fresh.ok(), "{what}: the kept dependencies drifted");
    let old = before.sl.as_ref().unwrap();
    let new = d.sm.plan().unwrap().sl.clone().unwrap();
    let topo = Topo::new(&before.fabric).unwrap();
    let changed = (0..topo.num_switches())
        .map(|i| sm_routing::SwIdx(i as u32))
        .flat_map(|s| topo.dests.iter().map(move |t| (s, t.base_lid)))
        .filter(|&(s, lid)| old.get(s, lid) != new.get(s, lid))
        .count() as u64;
    let reported: u64 = sweeps.iter().map(|r| r.paths_new_sl).sum();
    assert_eq!(reported, changed, "{what}: paths given another SL");
    (sweeps, states)
}

/// Under the layered engine a link loss moves only the broken routes too: they go round
/// the lost link, and the paths that changed are placed again into virtual layers that
/// stay free of cycles. Every path that did not change keeps its SL (hosts keep what the
/// SA told them), and what the switches hold is free of credit loops on the SLs the plan
/// gives (an independent trace of every CA pair), and in every state on the way on the
/// SLs hosts hold, among the paths that keep theirs. When the link returns, the tables
/// and the SLs are the original ones.
#[test]
fn a_layered_link_loss_moves_only_the_broken_routes_and_keeps_every_other_sl() {
    use sm_core::generate::Dragonfly;
    let f = generate(&GenSpec::Dragonfly(Dragonfly::new(9, 4, 2))).unwrap();
    let (mut d, _) = up(&f, "layered");
    let original = tables(&d, &f);
    let links = support::switch_links(&f);
    let (mut repaired, mut kept_all) = (0, 0);
    for &(a, _) in links.iter().step_by(5).take(8) {
        let what = format!("link {a:?}");
        let before = d.sm.plan().unwrap().clone();
        d.sim.apply_fault(Fault::LinkDown(a)).unwrap();
        let (sweeps, states) = run_layered_checked(&mut d, &f, &before, &what);
        assert!(states > 0, "{what}: the tables never changed");
        repairs_only(&sweeps, &what);
        for r in &sweeps {
            assert_eq!(
                r.lft_entries_moved, r.lft_entries_moved_min,
                "{what}: {}",
                r.trigger
            );
        }
        repaired += sweeps.iter().filter(|r| r.lft_entries_moved > 0).count();
        kept_all += usize::from(sweeps.iter().all(|r| r.paths_new_sl == 0));
        let plan = d.sm.plan().unwrap().clone();
        // Paths whose switches all kept their entry for the LID keep their SL.
        let topo = Topo::new(&plan.fabric).unwrap();
        let (old, new) = (before.to_routes(), plan.to_routes());
        let (old_sl, new_sl) = (before.sl.as_ref().unwrap(), plan.sl.as_ref().unwrap());
        for s in (0..topo.num_switches()).map(|i| sm_routing::SwIdx(i as u32)) {
            for dst in &topo.dests {
                let lid = dst.base_lid;
                let mut cur = s;
                let mut same = true;
                for _ in 0..topo.num_switches() {
                    if cur == dst.sw {
                        break;
                    }
                    let p = new.port(cur, lid);
                    same &= old.port(cur, lid) == p;
                    let Some(a) = topo.adj(cur).iter().find(|a| Some(a.port) == p) else {
                        break;
                    };
                    cur = a.peer;
                }
                if same {
                    assert_eq!(
                        old_sl.get(s, lid),
                        new_sl.get(s, lid),
                        "{what}: an unchanged path changed its SL"
                    );
                }
            }
        }
        support::traced_without_credit_loops(&d, &what, |src, dlid| {
            sm_mad::Sl(plan.path_sl(src, dlid).unwrap())
        });
        d.sim.apply_fault(Fault::LinkUp(a)).unwrap();
        let back_what = format!("{what} back");
        let (sweeps, states) = run_layered_checked(&mut d, &f, &plan, &back_what);
        assert!(states > 0, "{back_what}: the tables never changed");
        repairs_only(&sweeps, &back_what);
        assert!(
            tables(&d, &f) == original,
            "{what}: not the original tables once back"
        );
        let back = d.sm.plan().unwrap();
        assert!(
            back.sl == before.sl,
            "{what}: not the SLs of before once back"
        );
        assert!(back.sl_displaced.is_empty(), "{what}: SLs still displaced");
    }
    assert!(repaired >= 4, "{repaired} repairs moved routes");
    assert!(kept_all >= 1, "no repair kept every SL");
}

/// A switch whose every host leaves starts no path any more, to any LID, and starts them
/// again when they return: the layers' dependencies kept between repairs follow (checked
/// by `run_layered_checked` against a fresh walk), and every state on the way is free of
/// credit loops as there.
#[test]
fn a_switch_losing_its_hosts_keeps_the_layers_dependencies_right() {
    use sm_core::generate::Dragonfly;
    let f = generate(&GenSpec::Dragonfly(Dragonfly::new(9, 4, 2))).unwrap();
    let (mut d, _) = up(&f, "layered");
    let sw = f.switches().nth(5).unwrap();
    let hosts: Vec<PortIdx> = f
        .node_ports(sw)
        .filter(|&q| {
            f.port(q)
                .remote
                .is_some_and(|r| f.node(f.port(r).node).kind != NodeKind::Switch)
        })
        .collect();
    assert!(hosts.len() >= 2, "{} hosts", hosts.len());
    for (up, what) in [(false, "hosts gone"), (true, "hosts back")] {
        let before = d.sm.plan().unwrap().clone();
        for &q in &hosts {
            let fault = if up {
                Fault::LinkUp(q)
            } else {
                Fault::LinkDown(q)
            };
            d.sim.apply_fault(fault).unwrap();
        }
        let (sweeps, _) = run_layered_checked(&mut d, &f, &before, what);
        assert!(!sweeps.is_empty(), "{what}: nothing happened");
        for r in &sweeps {
            assert!(r.subnet_up, "{what}: {:?}", r.errors);
        }
    }
}

/// Every link of a spine goes at once (it is cut off, tables kept), then every one comes
/// back at once. The spine's own trap left it while it still had a link: the Gets of the
/// look along its way back are given up as soon as a read shows that way cut, and its
/// neighbours whose traps went through it are read around it, so the repair sees it cut
/// off with nothing lost (before: 24 Gets lost and 1.6 s of retries). On its return the
/// look reads its end of every link it is found across, so one repair brings every port
/// to ACTIVE with the original tables.
#[test]
fn a_switch_whose_links_all_go_and_return_at_once_costs_no_lost_gets() {
    let f = fat_tree();
    let (mut d, _) = up(&f, "minhop");
    let original = tables(&d, &f);
    let n = f
        .switches()
        .find(|&n| f.node(n).description == "spine 1 pod 1")
        .unwrap();
    let ports: Vec<PortIdx> = f
        .node_ports(n)
        .filter(|&p| f.port(p).remote.is_some())
        .collect();
    for (fault, step) in [
        (Fault::LinkDown as fn(PortIdx) -> Fault, "down"),
        (Fault::LinkUp, "up"),
    ] {
        for &p in &ports {
            d.sim.apply_fault(fault(p)).unwrap();
        }
        let sweeps = run_watching(&mut d, 300 * MS, |_| {});
        repairs_losing_nothing(&sweeps, step);
        let present = d.sm.model().unwrap().present(n);
        assert_eq!(
            present,
            step == "up",
            "{step}: the spine present: {present}"
        );
    }
    for &p in &ports {
        for q in [p, f.port(p).remote.unwrap()] {
            let state = d.sim.port(q).info.port_state;
            assert_eq!(state, sm_mad::port_info::PortState::Active, "{q:?}");
        }
    }
    all_pairs_delivered(&d, "every link back");
    assert!(
        tables(&d, &f) == original,
        "the tables are not the original ones"
    );
}
