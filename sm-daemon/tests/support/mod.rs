//! Checks the in-process tests share: every CA pair delivered by the data-path tracer,
//! every linked port ACTIVE, and a run in virtual time that watches every step.

#![allow(dead_code)]

use sm_core::fabric::{Fabric, PortIdx};
use sm_daemon::core::{Event, SweepReport};
use sm_daemon::transport::sim::SimDriver;
use sm_mad::port_info::PortState;
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
