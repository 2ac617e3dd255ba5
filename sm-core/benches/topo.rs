//! Reading a big ibnetdiscover dump: the radix-48 3-level fat-tree written as ibnetdiscover
//! prints it (30,528 nodes). Target: under 300 ms.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sm_core::generate::{FatTree3, GenSpec, generate};
use sm_core::read_topology_str;
use sm_core::topo::{WriteOptions, write_ibnetdiscover};

fn bench(c: &mut Criterion) {
    let fabric = generate(&GenSpec::FatTree3(FatTree3::new(48))).unwrap();
    let mut out = Vec::new();
    write_ibnetdiscover(&fabric, &WriteOptions::default(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let nodes = fabric.nodes().len();
    let mut g = c.benchmark_group("topology");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(nodes as u64));
    g.bench_function(format!("read_ibnetdiscover_{nodes}_nodes"), |b| {
        b.iter(|| read_topology_str(black_box(&text), Path::new("bench.net")).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
