//! Routes a generated fabric once and prints how long each phase took:
//! `cargo run --release -p sm-routing --example route -- ENGINE[,ENGINE..] SPEC [THREADS]`
//! where SPEC is `ft3:RADIX[:PODS]`, `ft2:RADIX`, `kary:RADIX:LEVELS` or `torus:AxB..`.
//! Run it under `/usr/bin/time -v` for the peak memory of one routing run; `REPEAT=n` routes
//! n times and prints the fastest wall time and the mean CPU time.

use std::time::Instant;

use sm_core::generate::{FatTree2, FatTree3, GenSpec, Grid, KaryNTree, generate};
use sm_core::lid::LidStore;
use sm_routing::{Options, Topo, route_chain};

fn spec(s: &str) -> Option<GenSpec> {
    let parts: Vec<&str> = s.split(':').collect();
    let num = |i: usize| parts.get(i).and_then(|p| p.parse::<u32>().ok());
    Some(match *parts.first()? {
        "ft3" => GenSpec::FatTree3(FatTree3 {
            pods: num(2),
            ..FatTree3::new(num(1)?)
        }),
        "ft2" => GenSpec::FatTree2(FatTree2::new(num(1)?)),
        "kary" => GenSpec::KaryNTree(KaryNTree {
            radix: num(1)?,
            levels: num(2)?,
            ca_ports: 1,
        }),
        "torus" => GenSpec::Torus(Grid::new(
            parts
                .get(1)?
                .split('x')
                .map(|d| d.parse().ok())
                .collect::<Option<Vec<u32>>>()?,
            2,
        )),
        _ => return None,
    })
}

/// CPU time of the process so far (user + system), from `/proc/self/stat`; zero elsewhere.
fn cpu_time() -> std::time::Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1.split_whitespace().collect::<Vec<_>>();
            Some(rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0);
    std::time::Duration::from_millis(ticks * 10)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(chain), Some(spec)) = (args.get(1), args.get(2).and_then(|s| spec(s))) else {
        eprintln!(
            "usage: route ENGINE[,ENGINE..] ft3:RADIX[:PODS]|ft2:RADIX|kary:RADIX:LEVELS|torus:AxB [THREADS] [ar]"
        );
        std::process::exit(2);
    };
    let threads: usize = args.get(3).and_then(|t| t.parse().ok()).unwrap_or(0);
    let adaptive = args.get(4).is_some_and(|a| a == "ar");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap_or_else(|e| panic!("thread pool: {e}"));
    let t = Instant::now();
    let mut f = generate(&spec).unwrap_or_else(|e| panic!("{e}"));
    LidStore::new()
        .assign(&mut f, 0)
        .unwrap_or_else(|e| panic!("{e}"));
    let gen_t = t.elapsed();
    let t = Instant::now();
    let topo = Topo::new(&f).unwrap_or_else(|e| panic!("{e}"));
    let topo_t = t.elapsed();
    let opts = Options {
        adaptive,
        ..Options::default()
    };
    // REPEAT=n routes n times and reports the fastest wall time and the mean CPU time.
    let repeat: u32 = std::env::var("REPEAT")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut route_t = std::time::Duration::MAX;
    let c = cpu_time();
    let mut r = None;
    for _ in 0..repeat {
        let t = Instant::now();
        r = Some(pool.install(|| route_chain(chain, &topo, &opts)));
        route_t = route_t.min(t.elapsed());
    }
    let route_cpu = cpu_time().saturating_sub(c) / repeat;
    let Some(r) = r else { return };
    match r {
        Ok(r) => println!(
            "{}: {} switches, {} LIDs: generate {:.3?}, snapshot {:.3?}, route {:.3?} (CPU {:.2?}){}",
            r.routes.engine,
            topo.num_switches(),
            topo.max_lid().0,
            gen_t,
            topo_t,
            route_t,
            route_cpu,
            r.fallbacks
                .iter()
                .map(|f| format!(" [{}: {}]", f.engine, f.reason))
                .collect::<String>()
        ),
        Err(e) => println!("error: {e}"),
    }
}
