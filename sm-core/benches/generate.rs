//! Generating and writing big fabrics: the radix-48 3-level fat-tree (27,648 hosts, 2,880
//! switches) should take well under a second.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use sm_core::generate::{FatTree3, GenSpec, generate};
use sm_core::topo::{WriteOptions, write_ibnetdiscover};

fn bench(c: &mut Criterion) {
    let spec = GenSpec::FatTree3(FatTree3::new(48));
    let mut g = c.benchmark_group("generate");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("fat_tree3_radix48", |b| {
        b.iter(|| generate(black_box(&spec)).unwrap())
    });
    let fabric = generate(&spec).unwrap();
    let mut out = Vec::with_capacity(32 << 20);
    g.bench_function("write_fat_tree3_radix48", |b| {
        b.iter(|| {
            out.clear();
            write_ibnetdiscover(black_box(&fabric), &WriteOptions::default(), &mut out).unwrap();
            out.len()
        })
    });
    g.bench_function("generate_and_write_fat_tree3_radix48", |b| {
        b.iter(|| {
            let f = generate(black_box(&spec)).unwrap();
            out.clear();
            write_ibnetdiscover(&f, &WriteOptions::default(), &mut out).unwrap();
            out.len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
