//! Simulated fabric throughput: directed-route Get(PortInfo) round trips through one
//! endpoint at 0..=4 hops, and building the radix-48 3-level fat-tree into a `Sim`.
//!
//! `cargo bench -p sm-sim --bench sim`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sm_core::fabric::{Fabric, NodeKind};
use sm_core::generate::{FatTree3, GenSpec, generate};
use sm_mad::smp;
use sm_mad::{Lid, Tid, attr};
use sm_sim::{Sim, SimConfig};

/// A directed route of `depth` hops from host 0: at every node the highest-numbered linked
/// port that does not lead straight back (leaf -> spine -> core -> spine of another pod).
fn path(f: &Fabric, depth: usize) -> Vec<u8> {
    let host = f.cas().next().unwrap();
    let mut at = f.port_of(host, 1).unwrap();
    let mut out = vec![1u8];
    let mut prev = host;
    let (mut node, _) = f.peer(at).unwrap();
    while out.len() < depth {
        let next = f
            .node_ports(node)
            .filter(|&p| f.peer(p).is_some_and(|(n, _)| n != prev))
            .last()
            .unwrap();
        out.push(f.port(next).num);
        at = next;
        prev = node;
        node = f.peer(at).unwrap().0;
    }
    out.truncate(depth);
    out
}

fn round_trips(c: &mut Criterion) {
    let f = generate(&GenSpec::FatTree3(FatTree3::new(8))).unwrap();
    let mut g = c.benchmark_group("dr_get_port_info");
    g.throughput(Throughput::Elements(1));
    for depth in 0..=4 {
        let mut sim = Sim::new(&f, SimConfig::default());
        let host = f.cas().next().unwrap();
        let ep = sim.attach(f.port_of(host, 1).unwrap());
        let p = path(&f, depth);
        let req = smp::Repr::dr_get(Tid(1), attr::PORT_INFO, 1, &p)
            .unwrap()
            .to_bytes()
            .unwrap();
        // The request is answered.
        sim.send(ep, Lid::PERMISSIVE, &req).unwrap();
        sim.advance(sim.now() + 1_000_000);
        assert!(sim.recv(ep).is_some(), "depth {depth} path {p:?}");
        g.bench_function(BenchmarkId::from_parameter(depth), |b| {
            b.iter(|| {
                sim.send(ep, Lid::PERMISSIVE, black_box(&req)).unwrap();
                let t = sim.now() + 100_000;
                sim.advance(t);
                black_box(sim.recv(ep).unwrap());
            })
        });
    }
    g.finish();
}

fn build_big(c: &mut Criterion) {
    let f = generate(&GenSpec::FatTree3(FatTree3::new(48))).unwrap();
    assert_eq!(f.cas().count(), 27_648);
    assert_eq!(
        f.nodes()
            .iter()
            .filter(|n| n.kind == NodeKind::Switch)
            .count(),
        2_880
    );
    let mut g = c.benchmark_group("build");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("fat_tree3_radix48", |b| {
        b.iter(|| black_box(Sim::new(&f, SimConfig::default())))
    });
    g.finish();
}

criterion_group!(benches, round_trips, build_big);
criterion_main!(benches);
