//! Wall and CPU time of routing, validation and metrics on the benchmark fabrics, for
//! figures on a shared machine (CPU time does not count other processes' turns):
//!
//! `RAYON_NUM_THREADS=1 cargo run --release -p sm-routing --example analysis_time -- ft3-48 [RUNS]`
//!
//! Fabrics: `ft2-36` (648 CAs), `ft3-36-8` (2,592 CAs), `ft3-36` (11,664 CAs), `ft3-48`
//! (27,648 CAs), `torus-12` (12x12x12 torus, 2 CAs a switch) and `torus-24` (24x24x24, 1 CA
//! a switch): minhop's tables on a torus have credit loops, so the channel dependency graph
//! is one big strongly connected component. Validation runs twice, with and without the
//! credit-loop check, so the difference is what that check costs. With RUNS > 1 every
//! validation is repeated and the fastest run is printed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use sm_core::generate::{FatTree2, FatTree3, GenSpec, Grid, generate};
use sm_core::lid::LidStore;
use sm_routing::{MetricsOptions, Options, Topo, ValidateOptions, engine, metrics, validate};

/// CPU time of this process (user + system), from /proc; 0 where that is unavailable.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// Runs `f` `runs` times; prints the fastest run's wall and CPU time, returns its result.
fn timed<T>(what: &str, runs: usize, mut f: impl FnMut() -> T) -> T {
    let mut best: Option<(f64, f64, T)> = None;
    for _ in 0..runs.max(1) {
        let (wall, cpu) = (Instant::now(), cpu_seconds());
        let out = f();
        let (w, c) = (wall.elapsed().as_secs_f64(), cpu_seconds() - cpu);
        if best.as_ref().is_none_or(|b| w < b.0) {
            best = Some((w, c, out));
        }
    }
    let (w, c, out) = best.expect("at least one run");
    println!("{what:>10}: wall {w:>8.3} s  cpu {c:>7.2} s");
    out
}

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "ft3-48".into());
    let runs: usize = std::env::args()
        .nth(2)
        .map_or(1, |r| r.parse().expect("RUNS is a number"));
    let spec = match name.as_str() {
        "ft2-36" => GenSpec::FatTree2(FatTree2::new(36)),
        "ft3-36-8" => GenSpec::FatTree3(FatTree3 {
            pods: Some(8),
            ..FatTree3::new(36)
        }),
        "ft3-36" => GenSpec::FatTree3(FatTree3::new(36)),
        "ft3-48" => GenSpec::FatTree3(FatTree3::new(48)),
        "torus-12" => GenSpec::Torus(Grid::new(vec![12, 12, 12], 2)),
        "torus-24" => GenSpec::Torus(Grid::new(vec![24, 24, 24], 1)),
        other => {
            eprintln!(
                "unknown fabric {other}: ft2-36, ft3-36-8, ft3-36, ft3-48, torus-12 or torus-24"
            );
            std::process::exit(2);
        }
    };
    let mut f = generate(&spec).unwrap();
    LidStore::new().assign(&mut f, 0).unwrap();
    let topo = Topo::new(&f).unwrap();
    let routes = timed("minhop", 1, || {
        engine("minhop")
            .unwrap()
            .route(&topo, &Options::default())
            .unwrap()
    });
    let v = timed("validate", runs, || {
        validate(&topo, &routes, &ValidateOptions::default())
    });
    let no_cdg = ValidateOptions {
        credit_loops: false,
        ..ValidateOptions::default()
    };
    timed("no-cdg", runs, || validate(&topo, &routes, &no_cdg));
    let m = timed("metrics", 1, || {
        metrics(&topo, &routes, &MetricsOptions::default())
    });
    print!("{v}{m}");
}
