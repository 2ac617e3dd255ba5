//! M_Key in the simulated fabric: per-port keys that the SM programs and presents (also
//! after a restart, from its stores), a port holding a key the SM does not know (left out,
//! then taken over once its lease runs out), and Trap 256 from a host probing without the
//! key.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use sm_core::fabric::{Fabric, NodeKind, PortIdx};
use sm_core::generate::{GenSpec, generate};
use sm_core::lid::LidStore;
use sm_core::mkey::derive;
use sm_daemon::core::{Event, Instant, Params};
use sm_mad::Guid;
use support::{all_pairs_delivered, run_watching};

const MS: u64 = 1_000_000;
const KEY: u64 = 0x5eed_0000_0000_0077;

fn fabric() -> Fabric {
    generate(&serde_json::from_str::<GenSpec>(r#"{"family":"fat-tree2","radix":8}"#).unwrap())
        .unwrap()
}

fn protected(per_port: bool) -> Params {
    Params {
        m_key: KEY,
        m_key_protect_bits: 2,
        m_key_per_port: per_port,
        ..Params::default()
    }
}

/// Every end port (CA ports, switch port 0): the key holder's GUID and the port.
fn end_ports(f: &Fabric) -> Vec<(Guid, PortIdx)> {
    f.ports()
        .iter()
        .enumerate()
        .map(|(i, p)| (p, PortIdx(i as u32)))
        .filter(|(p, _)| {
            let sw = f.node(p.node).kind == NodeKind::Switch;
            p.exists && (if sw { p.num == 0 } else { p.remote.is_some() })
        })
        .map(|(p, q)| (p.guid, q))
        .collect()
}

#[test]
fn per_port_keys_are_programmed_presented_and_kept_across_a_restart() {
    let f = fabric();
    let mut d = support::up(&f, protected(true));
    all_pairs_delivered(&d, "with per-port keys");
    let ends = end_ports(&f);
    let mut seen = std::collections::BTreeSet::new();
    for &(g, q) in &ends {
        eprintln!(
            "DBG {:?} key={:#x} want={:#x} viol={} bits={}",
            f.port(q).guid,
            d.sim.port(q).info.m_key,
            derive(KEY, g),
            d.sim.port(q).info.m_key_violations,
            d.sim.port(q).info.m_key_protect_bits
        );
    }
    for &(g, q) in &ends {
        let info = &d.sim.port(q).info;
        assert_eq!(info.m_key, derive(KEY, g), "{:?}", f.port(q));
        assert_eq!(info.m_key_protect_bits, 2);
        // The SM never presented a wrong key.
        assert_eq!(info.m_key_violations, 0, "{:?}", f.port(q));
        seen.insert(info.m_key);
    }
    assert_eq!(seen.len(), ends.len(), "every port its own key");
    let (keys, neighbors) = d.sm.key_stores();
    for &(g, _) in &ends {
        assert_eq!(keys.get(g), Some(derive(KEY, g)));
    }
    let links = f.ports().iter().filter(|p| p.remote.is_some()).count();
    assert_eq!(
        neighbors.len(),
        links + 1,
        "every linked port, and the SM's own"
    );

    // A new SM on the same port with the stores finds its way in: no port is asked with a
    // wrong key, not even before discovery has read it.
    let mut p = protected(true);
    (p.m_keys, p.neighbors) = (keys.clone(), neighbors.clone());
    d.sm = sm_daemon::core::Sm::new(p, LidStore::new());
    d.sm.start(Instant::from_nanos(d.now()));
    let sweeps = run_watching(&mut d, 2_000 * MS, |_| {});
    assert!(sweeps.iter().any(|r| r.subnet_up), "{sweeps:?}");
    for &(_, q) in &ends {
        assert_eq!(d.sim.port(q).info.m_key_violations, 0, "{:?}", f.port(q));
    }
    all_pairs_delivered(&d, "after the restart");

    // Without them, the SM cannot even read its own port: protection holds.
    d.sm = sm_daemon::core::Sm::new(protected(true), LidStore::new());
    d.sm.start(Instant::from_nanos(d.now()));
    let sweeps = run_watching(&mut d, 2_000 * MS, |_| {});
    assert!(sweeps.iter().all(|r| !r.subnet_up), "{sweeps:?}");
}

#[test]
fn a_port_with_an_unknown_key_is_taken_over_once_its_lease_runs_out() {
    let f = fabric();
    let host = f
        .cas()
        .nth(5)
        .and_then(|n| f.node_ports(n).find(|&p| f.port(p).remote.is_some()))
        .unwrap();
    let mut d = support::started(&f, protected(false));
    // Left by another SM: its key, level 2, a 3 s lease.
    d.sim.set_m_key(host, 0xbad, 2, 3);
    let mut events = Vec::new();
    let mut sweeps = Vec::new();
    let end = d.now() + 40_000 * MS;
    while d.now() < end && d.step() {
        while let Some(e) = d.sm.poll_event() {
            match e {
                Event::SweepDone(r) => sweeps.push(*r),
                e => events.push(e),
            }
        }
    }
    // Up at once without it, the host listed unresponsive (once).
    let first = sweeps.iter().find(|r| r.subnet_up).expect("subnet up");
    let leaf = f.port(host).remote.unwrap();
    let behind = format!("{}[{}]", f.node(f.port(leaf).node).guid, f.port(leaf).num);
    assert!(
        first.unresponsive.len() == 1
            && first.unresponsive[0].node.contains(&behind)
            && first.unresponsive[0]
                .what
                .iter()
                .any(|w| w.contains("NodeInfo")),
        "{behind}: {:?}",
        first.unresponsive
    );
    // Then taken over: its lease ran out, the SM read its key and installed ours.
    let info = &d.sim.port(host).info;
    assert_eq!(info.m_key, KEY, "{sweeps:#?}");
    assert_eq!(info.m_key_protect_bits, 2);
    assert_ne!(info.lid.0, 0);
    all_pairs_delivered(&d, "after the takeover");
    // Not a loop: a handful of heavy sweeps over 40 s, not one per timeout.
    assert!(sweeps.len() < 15, "{} sweeps", sweeps.len());
}
