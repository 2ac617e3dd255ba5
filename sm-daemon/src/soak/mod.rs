//! Simulation testing: from a seed, a fabric, a configuration and a schedule of faults and
//! requests are drawn ([`draw`]); the SM runs through them against the simulated fabric in
//! virtual time ([`run`]), and invariants are checked after every sweep or repair that
//! settles and at the end. A failing case shrinks to a short schedule ([`shrink`]) and is
//! saved as files that replay it ([`Case::save`], docs/TESTING.md).
//!
//! The same seed draws the same case and the same run, on any machine: the simulator and
//! the core read no clock and no unseeded randomness.

mod check;
mod draw;
mod files;
mod runner;
mod shrink;

pub use draw::{DrawOptions, draw};
pub use files::CaseError;
pub use runner::{Limits, run};
pub use shrink::shrink;

use sm_core::fabric::Fabric;
use sm_mad::Guid;
use sm_sim::scenario::Scenario;

/// Virtual nanoseconds.
pub type Nanos = u64;

/// One simulation test: the fabric, the SM's configuration, the schedule, and how long to
/// run.
#[derive(Debug, Clone)]
pub struct Case {
    /// The seed it was drawn from (0 for a case written by hand).
    pub seed: u64,
    /// What was drawn, in words.
    pub summary: String,
    /// The fabric, as written to `fabric.net` (read back from that text, so a replay from
    /// the files builds exactly this fabric).
    pub net: String,
    pub fabric: Fabric,
    /// The SM's configuration (`ibsm.toml`).
    pub config: String,
    /// Configurations a `reload` line names: file name and text.
    pub reloads: Vec<(String, String)>,
    /// The port of the SM under test: node GUID and port number.
    pub sm_port: (Guid, u8),
    /// Faults, SMs and requests in time (`schedule.scn`).
    pub schedule: Scenario,
    /// Virtual time to run.
    pub run_for: Nanos,
    /// Seed of the simulated fabric's own randomness (loss, reordering).
    pub sim_seed: u64,
}

/// An invariant broken, with when and what.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// The invariant's name (docs/TESTING.md lists them).
    pub invariant: &'static str,
    /// Virtual time of the check.
    pub at: Nanos,
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at {}: {}",
            self.invariant,
            sm_sim::scenario::format_time(self.at),
            self.detail
        )
    }
}

/// How a case ran.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Outcome {
    /// Every invariant broken (the first few of each kind).
    pub violations: Vec<Violation>,
    /// Schedule lines carried out.
    pub events: usize,
    /// Heavy sweeps and repairs that finished.
    pub sweeps: u64,
    pub light_sweeps: u64,
    /// Settled states checked in full (reachability, churn, LIDs, SA, ...).
    pub checked: u64,
    /// Virtual time reached.
    pub virtual_ns: Nanos,
    /// Wall time taken.
    pub wall_ms: u64,
    /// LFT entries moved over the run, and how many of them the checker found forced or
    /// restored.
    pub lft_moved: u64,
    pub lft_forced: u64,
    pub lft_restored: u64,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The invariants broken, each named once, in order.
    pub fn broken(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = Vec::new();
        for x in &self.violations {
            if !v.contains(&x.invariant) {
                v.push(x.invariant);
            }
        }
        v
    }
}
