//! Shrinking a failing case: schedule events are dropped, in halves, then quarters, down
//! to one at a time, as long as the case still breaks one of the invariants it broke.

use super::{Case, Limits, Nanos, Outcome, run};

/// Virtual time left after the last event when a shrunk case is cut short.
const QUIET: Nanos = 60_000_000_000;

/// The smallest case found that still breaks `target` (by default the invariant `failed`
/// broke first), and its outcome. At most `budget` runs.
pub fn shrink(
    case: &Case,
    failed: &Outcome,
    limits: &Limits,
    budget: usize,
    target: Option<&str>,
) -> (Case, Outcome) {
    let first = failed
        .violations
        .iter()
        .min_by_key(|v| v.at)
        .map(|v| v.invariant);
    let want: Vec<&str> = match target {
        Some(t) => vec![t],
        None => first.into_iter().collect(),
    };
    let still = |o: &Outcome| o.broken().iter().any(|b| want.contains(b));
    let mut best = case.clone();
    let mut best_out = failed.clone();
    let mut runs = 0;
    let try_case = |c: &Case, runs: &mut usize| -> Option<Outcome> {
        if *runs >= budget {
            return None;
        }
        *runs += 1;
        let o = run(c, limits);
        still(&o).then_some(o)
    };
    let mut chunk = best.schedule.events.len().div_ceil(2).max(1);
    loop {
        let mut changed = false;
        let mut at = 0;
        while at < best.schedule.events.len() && runs < budget {
            let mut c = best.clone();
            let end = (at + chunk).min(c.schedule.events.len());
            c.schedule.events.drain(at..end);
            if let Some(o) = try_case(&c, &mut runs) {
                best = c;
                best_out = o;
                changed = true;
            } else {
                at += chunk;
            }
        }
        if runs >= budget || (chunk == 1 && !changed) {
            break;
        }
        if !changed {
            chunk = chunk.div_ceil(2);
        }
    }
    // A shorter run, if it still fails.
    let last = best.schedule.events.iter().map(|e| e.at).max().unwrap_or(0);
    let first_bad = best_out.violations.iter().map(|v| v.at).min().unwrap_or(0);
    let end = (last + QUIET).max(first_bad + 1_000_000_000);
    if end < best.run_for {
        let mut c = best.clone();
        c.run_for = end;
        if let Some(o) = try_case(&c, &mut runs) {
            best = c;
            best_out = o;
        }
    }
    for (i, e) in best.schedule.events.iter_mut().enumerate() {
        e.line = i + 1;
    }
    (best, best_out)
}
