//! `ibsm soak`: simulation testing. Draws cases from seeds, runs the SM through each in
//! virtual time and checks the invariants (docs/TESTING.md); a failure is shrunk, saved as
//! files and printed with the command that replays it.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sm_daemon::soak::{self, Case, DrawOptions, Limits, Outcome};

/// Arguments of `ibsm soak`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Each seed draws a fabric (every generator family, 16 to 2,000 hosts), a configuration
(engine, LMC, partitions, QoS, M_Key, health, 1-3 SMs) and a schedule of 5-50 faults and
requests; the SM runs through it in virtual time and every invariant is checked after each
sweep or repair that settles and at the end. Exit status: 0 when every seed passed, 1 when
one failed (its shrunk case is saved; the line printed replays it).")]
pub(crate) struct Args {
    /// The first seed (with --count or --minutes), or the only one.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seeds to run, from --seed on.
    #[arg(long)]
    count: Option<u64>,
    /// Run seeds from --seed on for this many minutes of wall time (a long soak).
    #[arg(long)]
    minutes: Option<f64>,
    /// Seeds run at once (each run is single-threaded apart from routing).
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Replay the case saved in this directory instead of drawing one.
    #[arg(long, value_name = "DIR")]
    replay: Option<PathBuf>,
    /// Where failing cases are saved, one directory per seed.
    #[arg(long, value_name = "DIR", default_value = "soak-failures")]
    save: PathBuf,
    /// Save failing cases as drawn, without shrinking them first.
    #[arg(long)]
    no_shrink: bool,
    /// Runs a shrink may take.
    #[arg(long, default_value_t = 200)]
    shrink_runs: usize,
    /// Shrink to a case that breaks this invariant (default: the one broken first).
    #[arg(long, value_name = "INVARIANT")]
    target: Option<String>,
    /// Write the drawn case of --seed into DIR and stop (to read it or edit it).
    #[arg(long, value_name = "DIR")]
    draw_only: Option<PathBuf>,
    /// The largest fabric drawn, in hosts.
    #[arg(long, default_value_t = 2_000)]
    max_hosts: usize,
    /// The most events a schedule has.
    #[arg(long, default_value_t = 50)]
    max_events: usize,
    /// Wall-time limit of one run, in seconds: longer is a hang.
    #[arg(long, default_value_t = 600)]
    wall_limit: u64,
    /// Print one JSON object per seed and a summary, instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Default, serde::Serialize)]
struct Totals {
    seeds: u64,
    passed: u64,
    failed: u64,
    events: u64,
    sweeps: u64,
    light_sweeps: u64,
    checked: u64,
    lft_moved: u64,
    lft_forced: u64,
    lft_restored: u64,
    virtual_s: f64,
    wall_s: f64,
    failures: Vec<u64>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let limits = Limits {
        wall: Duration::from_secs(args.wall_limit),
        ..Limits::default()
    };
    let draw_opts = DrawOptions {
        max_hosts: args.max_hosts.max(16),
        max_events: args.max_events.max(5),
        ..DrawOptions::default()
    };
    if let Some(dir) = &args.replay {
        let case = Case::load(dir).with_context(|| format!("replaying {}", dir.display()))?;
        let out = soak::run(&case, &limits);
        report(&args, &case, &out);
        if !out.passed() {
            bail!("{} broke {}", dir.display(), out.broken().join(", "));
        }
        return Ok(());
    }
    if let Some(dir) = &args.draw_only {
        let case = soak::draw(args.seed, &draw_opts);
        case.save(dir, &[], None)?;
        println!("seed {}: {}", args.seed, case.summary);
        println!("written to {}", dir.display());
        return Ok(());
    }
    let start = Instant::now();
    let deadline = args
        .minutes
        .map(|m| start + Duration::from_secs_f64((m * 60.0).max(0.0)));
    let count = match (args.count, deadline) {
        (Some(c), _) => c,
        (None, Some(_)) => u64::MAX,
        (None, None) => 1,
    };
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let totals = Mutex::new(Totals::default());
    std::thread::scope(|s| {
        for _ in 0..args.jobs.max(1) {
            s.spawn(|| {
                loop {
                    if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d)
                    {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    let seed = args.seed.wrapping_add(i);
                    let case = soak::draw(seed, &draw_opts);
                    let out = soak::run(&case, &limits);
                    let saved = if out.passed() {
                        None
                    } else {
                        Some(save_failure(&args, &case, &out, &limits))
                    };
                    if let Ok(mut t) = totals.lock() {
                        t.seeds += 1;
                        t.events += out.events as u64;
                        t.sweeps += out.sweeps;
                        t.light_sweeps += out.light_sweeps;
                        t.checked += out.checked;
                        t.lft_moved += out.lft_moved;
                        t.lft_forced += out.lft_forced;
                        t.lft_restored += out.lft_restored;
                        t.virtual_s += out.virtual_ns as f64 / 1e9;
                        if out.passed() {
                            t.passed += 1;
                        } else {
                            t.failed += 1;
                            t.failures.push(seed);
                        }
                        report(&args, &case, &out);
                        if let Some(line) = saved {
                            println!("{line}");
                        }
                    }
                }
            });
        }
    });
    let mut t = totals.into_inner().unwrap_or_default();
    t.wall_s = start.elapsed().as_secs_f64();
    t.failures.sort_unstable();
    if args.json {
        println!("{}", serde_json::to_string(&t)?);
    } else {
        println!(
            "{} seeds: {} passed, {} failed; {} events, {} sweeps and repairs, {} light sweeps, \
             {} settled states checked; LFT entries moved {} ({} forced, {} restored); \
             {:.0} s virtual in {:.1} s",
            t.seeds,
            t.passed,
            t.failed,
            t.events,
            t.sweeps,
            t.light_sweeps,
            t.checked,
            t.lft_moved,
            t.lft_forced,
            t.lft_restored,
            t.virtual_s,
            t.wall_s
        );
    }
    if t.failed > 0 {
        let seeds: Vec<String> = t.failures.iter().map(u64::to_string).collect();
        bail!("failing seeds: {}", seeds.join(" "));
    }
    Ok(())
}

/// Shrinks and saves a failing case; the line that replays it.
fn save_failure(args: &Args, case: &Case, out: &Outcome, limits: &Limits) -> String {
    let (small, small_out) = if args.no_shrink {
        (case.clone(), out.clone())
    } else {
        soak::shrink(case, out, limits, args.shrink_runs, args.target.as_deref())
    };
    let dir = args.save.join(format!("seed-{}", case.seed));
    let from = (small.schedule.events.len() != case.schedule.events.len())
        .then_some(case.schedule.events.len());
    match small.save(&dir, &small_out.broken(), from) {
        Ok(()) => format!(
            "  saved ({} of {} events): replay with `ibsm soak --replay {}`",
            small.schedule.events.len(),
            case.schedule.events.len(),
            dir.display()
        ),
        Err(e) => format!(
            "  could not save the case: {e}; replay with `ibsm soak --seed {}`",
            case.seed
        ),
    }
}

fn report(args: &Args, case: &Case, out: &Outcome) {
    if args.json {
        let v = serde_json::json!({
            "seed": case.seed,
            "summary": case.summary,
            "passed": out.passed(),
            "outcome": out,
        });
        println!("{v}");
        return;
    }
    let verdict = if out.passed() { "pass" } else { "FAIL" };
    println!(
        "seed {}: {verdict} ({} events, {} sweeps, {} checked, {:.1} s) {}",
        case.seed,
        out.events,
        out.sweeps,
        out.checked,
        out.wall_ms as f64 / 1e3,
        case.summary
    );
    for v in &out.violations {
        println!("  {v}");
    }
}
