//! Each routing engine on (a) the pruned radix-36 3-level fat-tree of 8 pods (2,592 CAs,
//! 612 switches; OpenSM on this machine: minhop 1.15 s, updn 1.27 s, ftree 0.66 s) and (b)
//! the full radix-48 3-level fat-tree (27,648 CAs, 2,880 switches), LIDs from
//! `LidStore::assign`. Goals: >= 10x OpenSM on (a); on (b) ftree <= 2 s, updn and minhop
//! <= 5 s on 2 cores.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use sm_core::generate::{FatTree3, GenSpec, generate};
use sm_core::lid::LidStore;
use sm_routing::{Options, Topo, engine};

fn fabric(radix: u32, pods: Option<u32>) -> sm_core::fabric::Fabric {
    let mut f = generate(&GenSpec::FatTree3(FatTree3 {
        pods,
        ..FatTree3::new(radix)
    }))
    .unwrap();
    LidStore::new().assign(&mut f, 0).unwrap();
    f
}

fn bench(c: &mut Criterion) {
    let opts = Options::default();
    let small = fabric(36, Some(8));
    let topo = Topo::new(&small).unwrap();
    let mut g = c.benchmark_group("radix36_8pods");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    for name in ["minhop", "updn", "ftree"] {
        let e = engine(name).unwrap();
        g.bench_function(name, |b| {
            b.iter(|| e.route(black_box(&topo), &opts).unwrap())
        });
    }
    g.finish();

    let big = fabric(48, None);
    let topo = Topo::new(&big).unwrap();
    let mut g = c.benchmark_group("radix48_full");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    for name in ["minhop", "updn", "ftree"] {
        let e = engine(name).unwrap();
        g.bench_function(name, |b| {
            b.iter(|| e.route(black_box(&topo), &opts).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
