//! Wall and CPU time of routing, validation and metrics on the benchmark fabrics, for
//! figures on a shared machine (CPU time does not count other processes' turns):
//!
//! `RAYON_NUM_THREADS=1 cargo run --release -p sm-routing --example analysis_time -- ft3-48`
//!
//! Fabrics: `ft2-36` (648 CAs), `ft3-36-8` (2,592 CAs), `ft3-48` (27,648 CAs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use sm_core::generate::{FatTree2, FatTree3, GenSpec, generate};
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

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    let out = f();
    println!(
        "{what:>10}: wall {:>8.3} s  cpu {:>7.2} s",
        wall.elapsed().as_secs_f64(),
        cpu_seconds() - cpu
    );
    out
}

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "ft3-48".into());
    let spec = match name.as_str() {
        "ft2-36" => GenSpec::FatTree2(FatTree2::new(36)),
        "ft3-36-8" => GenSpec::FatTree3(FatTree3 {
            pods: Some(8),
            ..FatTree3::new(36)
        }),
        "ft3-48" => GenSpec::FatTree3(FatTree3::new(48)),
        other => {
            eprintln!("unknown fabric {other}: ft2-36, ft3-36-8 or ft3-48");
            std::process::exit(2);
        }
    };
    let mut f = generate(&spec).unwrap();
    LidStore::new().assign(&mut f, 0).unwrap();
    let topo = Topo::new(&f).unwrap();
    let routes = timed("minhop", || {
        engine("minhop")
            .unwrap()
            .route(&topo, &Options::default())
            .unwrap()
    });
    let v = timed("validate", || {
        validate(&topo, &routes, &ValidateOptions::default())
    });
    let m = timed("metrics", || {
        metrics(&topo, &routes, &MetricsOptions::default())
    });
    print!("{v}{m}");
}
