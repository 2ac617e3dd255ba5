//! Checks the in-process tests share: every CA pair delivered by the data-path tracer,
//! every linked port ACTIVE, and a run in virtual time that watches every step.

#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};

use sm_core::fabric::{Fabric, PortIdx};
use sm_core::lid::LidStore;
use sm_daemon::core::{Event, Params, SweepReport};
use sm_daemon::transport::sim::SimDriver;
use sm_mad::port_info::PortState;
use sm_mad::{Guid, Lid, PKey, Sl};
use sm_sim::trace::AllPairsOptions;

/// The tracer delivers every CA pair over the tables the switches hold.
pub(crate) fn all_pairs_delivered(d: &SimDriver, what: &str) {
    let r = d.sim.check_all_pairs(&AllPairsOptions::default());
    assert!(r.pairs > 0, "{what}: no pairs");
    assert!(
        r.all_delivered(),
        "{what}: {:?} first failures {:?}",
        r.dropped,
        r.failures
    );
}

/// Every linked port is ACTIVE, except those in `skip`.
pub(crate) fn all_active_but(d: &SimDriver, f: &Fabric, skip: &[PortIdx]) {
    for (a, b) in f.links() {
        if skip.contains(&a) || skip.contains(&b) {
            continue;
        }
        for p in [a, b] {
            assert_eq!(
                d.sim.port(p).info.port_state,
                PortState::Active,
                "{:?}",
                f.port(p)
            );
        }
    }
}

/// Runs `span` nanoseconds of virtual time, calling `each` after every step; returns the
/// sweeps that ended meanwhile.
pub(crate) fn run_watching(
    d: &mut SimDriver,
    span: u64,
    mut each: impl FnMut(&SimDriver),
) -> Vec<SweepReport> {
    let end = d.now() + span;
    let mut sweeps = Vec::new();
    let mut collect = |d: &mut SimDriver| {
        while let Some(e) = d.sm.poll_event() {
            if let Event::SweepDone(r) = e {
                sweeps.push(*r);
            }
        }
    };
    while d.now() < end {
        collect(d);
        if !d.step() {
            break;
        }
        each(d);
    }
    collect(d);
    sweeps
}

/// Traces every CA-to-CA pair (base LIDs, as the SM's plan gives them) through what the
/// simulated switches hold, each on the SL `sl_of(source port in the plan, DLID)` gives,
/// and checks that every one is delivered and that the channels a packet holds one after
/// the other ((link, VL) after (link, VL), the VLs from the programmed SL-to-VL tables)
/// form no cycle: a credit-loop check of what was programmed that does not trust the SM's
/// own validation. Returns the VLs the packets used.
pub(crate) fn traced_without_credit_loops(
    d: &SimDriver,
    what: &str,
    mut sl_of: impl FnMut(PortIdx, Lid) -> Sl,
) -> BTreeSet<u8> {
    let mut g = Deps::default();
    for (_, slid, dlid, sl) in pairs(d, what, false, |s, l| Some(sl_of(s, l))) {
        let path = d
            .sim
            .trace(slid, dlid, sl, PKey(0xffff))
            .unwrap_or_else(|e| panic!("{what}: {slid} -> {dlid} on SL {}: {e}", sl.0));
        g.add(&path);
    }
    g.cycle(what).map_or(g.vls, |e| panic!("{e}"))
}

/// As [`traced_without_credit_loops`], for a state in the middle of a repair, and for
/// two sets of pairs at once: every pair `sl_of` gives an SL, and those of them `keep`
/// takes. A packet dropped on its way (a table still points at the lost link) holds no
/// channel for long, so only the pairs delivered count. Paths from the hosts of one
/// switch share their channels between switches (a switch's paths have one SL per
/// LID), and cycles form only there, so one host per switch is traced. The cycle found
/// among all, and among those kept, if any.
pub(crate) fn delivered_credit_loops(
    d: &SimDriver,
    what: &str,
    sl_of: impl FnMut(PortIdx, Lid) -> Option<Sl>,
    mut keep: impl FnMut(PortIdx, Lid) -> bool,
) -> (Option<String>, Option<String>) {
    let (mut all, mut kept) = (Deps::default(), Deps::default());
    for (src, slid, dlid, sl) in pairs(d, what, true, sl_of) {
        let Ok(path) = d.sim.trace(slid, dlid, sl, PKey(0xffff)) else {
            continue;
        };
        all.add(&path);
        if keep(src, dlid) {
            kept.add(&path);
        }
    }
    (all.cycle(what), kept.cycle(what))
}

/// (source port, its LID, DLID, SL) of the CA pairs traced, one source per switch if
/// `per_switch`.
fn pairs(
    d: &SimDriver,
    what: &str,
    per_switch: bool,
    mut sl_of: impl FnMut(PortIdx, Lid) -> Option<Sl>,
) -> Vec<(PortIdx, Lid, Lid, Sl)> {
    let f = &d.sm.plan().expect("a plan").fabric;
    let ends: Vec<(PortIdx, Lid)> = f
        .cas()
        .flat_map(|n| f.node_ports(n))
        .filter(|&p| f.port(p).remote.is_some() && f.port(p).lid.0 != 0)
        .map(|p| (p, f.port(p).lid))
        .collect();
    assert!(ends.len() > 1, "{what}: no pairs");
    let mut from = BTreeSet::new();
    let mut out = Vec::new();
    for &(s, slid) in &ends {
        let sw = f.port(s).remote.map(|r| f.port(r).node);
        if per_switch && !from.insert(sw) {
            continue;
        }
        for &(_, dlid) in &ends {
            if slid != dlid {
                if let Some(sl) = sl_of(s, dlid) {
                    out.push((s, slid, dlid, sl));
                }
            }
        }
    }
    out
}

/// A channel: the link leaving (node, port), on a VL.
type Chan = (Guid, u8, u8);

/// Channels packets hold one after the other.
#[derive(Default)]
struct Deps {
    next: HashMap<Chan, BTreeSet<Chan>>,
    vls: BTreeSet<u8>,
}

impl Deps {
    fn add(&mut self, path: &sm_sim::trace::Path) {
        let chans: Vec<Chan> = path
            .hops
            .iter()
            .map(|h| (h.node, h.out_port, h.vl.0))
            .collect();
        for w in chans.windows(2) {
            self.next.entry(w[0]).or_default().insert(w[1]);
        }
        self.vls.extend(chans.iter().map(|c| c.2));
    }

    /// Kahn's algorithm: the graph empties exactly when it has no cycle.
    fn cycle(&self, what: &str) -> Option<String> {
        let mut indegree: HashMap<Chan, usize> = HashMap::new();
        for (&c, outs) in &self.next {
            indegree.entry(c).or_default();
            for &o in outs {
                *indegree.entry(o).or_default() += 1;
            }
        }
        let mut ready: Vec<Chan> = indegree
            .iter()
            .filter(|&(_, &n)| n == 0)
            .map(|(&c, _)| c)
            .collect();
        let mut removed = 0;
        while let Some(c) = ready.pop() {
            removed += 1;
            for o in self.next.get(&c).into_iter().flatten() {
                let n = indegree.get_mut(o).expect("counted");
                *n -= 1;
                if *n == 0 {
                    ready.push(*o);
                }
            }
        }
        let cyclic: Vec<&Chan> = indegree
            .iter()
            .filter(|&(_, &n)| n > 0)
            .map(|(c, _)| c)
            .collect();
        (removed != indegree.len()).then(|| {
            format!(
                "{what}: the traced channels depend on each other in a cycle (credit loop) \
                 among {} channels, e.g. {:?}",
                cyclic.len(),
                &cyclic[..cyclic.len().min(4)]
            )
        })
    }
}

/// The first linked CA port: where the tests put the SM.
pub(crate) fn first_ca_port(f: &Fabric) -> PortIdx {
    f.cas()
        .flat_map(|n| f.node_ports(n))
        .find(|&p| f.port(p).remote.is_some())
        .expect("a linked CA port")
}

/// The first link between two switches.
pub(crate) fn switch_link(f: &Fabric) -> (PortIdx, PortIdx) {
    switch_links(f)[0]
}

/// The SM on the first linked CA port of a freshly powered `f`, started (nothing run yet).
pub(crate) fn started(f: &Fabric, params: Params) -> SimDriver {
    let mut d = SimDriver::new(
        f,
        first_ca_port(f),
        params,
        LidStore::new(),
        sm_sim::SimConfig::default(),
    );
    d.start();
    d
}

/// [`started`], run until its first sweep brings the subnet up.
pub(crate) fn up(f: &Fabric, params: Params) -> SimDriver {
    let mut d = started(f, params);
    d.run_until(
        60_000_000_000,
        |e| matches!(e, Event::SweepDone(r) if r.subnet_up),
    )
    .expect("subnet up");
    d
}

/// Every link between two switches.
pub(crate) fn switch_links(f: &Fabric) -> Vec<(PortIdx, PortIdx)> {
    f.links()
        .filter(|&(a, b)| {
            f.node(f.port(a).node).kind == sm_core::NodeKind::Switch
                && f.node(f.port(b).node).kind == sm_core::NodeKind::Switch
        })
        .collect()
}

/// Flaps the links at `ports` from now on, each starting `stagger` ns after the one before:
/// `count` times down for `down` ns of every `period`.
pub(crate) fn flap(
    d: &mut SimDriver,
    ports: impl IntoIterator<Item = PortIdx>,
    stagger: u64,
    period: u64,
    count: u32,
    down: u64,
) {
    let now = d.now();
    for (i, port) in ports.into_iter().enumerate() {
        d.sim
            .schedule_fault(
                now + i as u64 * stagger,
                sm_sim::Fault::Flap {
                    port,
                    period,
                    count,
                    down: Some(down),
                },
            )
            .expect("a flap on a cabled port");
    }
}
