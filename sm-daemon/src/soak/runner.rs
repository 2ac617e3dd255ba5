//! Running a case: the SM under test (and the SMs the schedule starts) against the
//! simulated fabric, in virtual time, with the checker watching every step.

use std::path::Path;
use std::time::{Duration, Instant};

use sm_core::config::Config;
use sm_core::lid::LidStore;
use sm_sim::SimConfig;

use super::check::Checker;
use super::{Case, Outcome, Violation};
use crate::transport::sim::SimDriver;

/// Limits of one run, beyond the case's own virtual time.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall time: a run that takes longer is a hang.
    pub wall: Duration,
    /// Steps in a row at one virtual instant: more is a livelock.
    pub same_instant_steps: u64,
    /// Resident memory of the process at the end of a run (bytes): more is a leak.
    pub max_rss: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall: Duration::from_secs(600),
            same_instant_steps: 1_000_000,
            max_rss: 8 << 30,
        }
    }
}

/// Runs `case` and checks it. Never panics: a panic of the SM is a violation.
pub fn run(case: &Case, limits: &Limits) -> Outcome {
    let wall = Instant::now();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner(case, limits, wall)));
    let mut out = match r {
        Ok(o) => o,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            Outcome {
                violations: vec![Violation {
                    invariant: "no-panic",
                    at: 0,
                    detail: msg,
                }],
                ..Outcome::default()
            }
        }
    };
    out.wall_ms = wall.elapsed().as_millis() as u64;
    out
}

fn setup_error(what: &str, e: impl std::fmt::Display) -> Outcome {
    Outcome {
        violations: vec![Violation {
            invariant: "case",
            at: 0,
            detail: format!("{what}: {e}"),
        }],
        ..Outcome::default()
    }
}

/// The parameters of a configuration text.
fn params_of(name: &str, text: &str) -> Result<crate::core::Params, String> {
    let path = Path::new(name);
    let cfg = Config::from_toml_str(text, path).map_err(|e| e.to_string())?;
    crate::config::params(&cfg, path).map_err(|e| e.to_string())
}

fn inner(case: &Case, limits: &Limits, wall: Instant) -> Outcome {
    let f = &case.fabric;
    let Some(sm_port) = f
        .node_by_guid(case.sm_port.0)
        .and_then(|n| f.port_of(n, case.sm_port.1))
    else {
        return setup_error(
            "sm port",
            format!(
                "{}[{}] is not in the fabric",
                case.sm_port.0, case.sm_port.1
            ),
        );
    };
    let params = match params_of("ibsm.toml", &case.config) {
        Ok(p) => p,
        Err(e) => return setup_error("configuration", e),
    };
    let cfg = SimConfig {
        seed: case.sim_seed,
        ..SimConfig::default()
    };
    let mut d = SimDriver::new(f, sm_port, params, LidStore::new(), cfg);
    let reloads = case.reloads.clone();
    d.reloader = Some(Box::new(move |file: &str| {
        let (name, text) = reloads
            .iter()
            .find(|(n, _)| n == file)
            .ok_or_else(|| format!("{file}: no such file in the case"))?;
        params_of(name, text)
    }));
    if let Err(e) = d.sim.load_scenario(&case.schedule) {
        return setup_error("schedule", e);
    }
    let mut ck = Checker::new(case);
    ck.out.events = case.schedule.events.len();
    d.start();
    let mut same = 0u64;
    let mut steps = 0u64;
    while d.now() < case.run_for {
        let before = d.now();
        ck.before_step(&mut d, case);
        if !d.step() {
            break;
        }
        steps += 1;
        ck.after_step(&mut d, case);
        if d.now() == before {
            same += 1;
            if same > limits.same_instant_steps {
                let detail = format!("{same} steps without virtual time moving on");
                ck.violate("no-hang", d.now(), detail);
                break;
            }
        } else {
            same = 0;
        }
        if steps % 1024 == 0 && wall.elapsed() > limits.wall {
            let detail = format!(
                "{} s of wall time for {} of {} of virtual time",
                limits.wall.as_secs(),
                sm_sim::scenario::format_time(d.now()),
                sm_sim::scenario::format_time(case.run_for)
            );
            ck.violate("no-hang", d.now(), detail);
            break;
        }
    }
    ck.finish(&mut d, case);
    if let Some(rss) = resident_bytes() {
        if rss > limits.max_rss {
            let detail = format!("{} MiB resident at the end of the run", rss >> 20);
            ck.violate("memory", d.now(), detail);
        }
    }
    ck.out.virtual_ns = d.now();
    ck.out
}

/// This process's resident memory, where the system tells.
fn resident_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
