//! Validation and metrics of minhop's tables on big fat-trees: the radix-36 2-level tree
//! (648 CAs, 54 switches), the radix-36 3-level tree pruned to 8 pods (2,592 CAs, 612
//! switches: `ibsm gen fat-tree --levels 3 --radix 36 --pods 8`) and the full radix-48
//! 3-level tree (27,648 CAs, 2,880 switches).
//!
//! `cargo bench -p sm-routing --bench analysis`; the figures are in docs/PERFORMANCE.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use sm_core::generate::{FatTree2, FatTree3, GenSpec, generate};
use sm_core::lid::LidStore;
use sm_routing::{MetricsOptions, Options, Topo, ValidateOptions, engine, metrics, validate};

fn bench(c: &mut Criterion) {
    let fabrics = [
        ("fat_tree2_radix36", GenSpec::FatTree2(FatTree2::new(36))),
        (
            "fat_tree3_radix36_pods8",
            GenSpec::FatTree3(FatTree3 {
                pods: Some(8),
                ..FatTree3::new(36)
            }),
        ),
        ("fat_tree3_radix48", GenSpec::FatTree3(FatTree3::new(48))),
    ];
    let mut g = c.benchmark_group("analysis");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    for (name, spec) in fabrics {
        let mut f = generate(&spec).unwrap();
        LidStore::new().assign(&mut f, 0).unwrap();
        let topo = Topo::new(&f).unwrap();
        let routes = engine("minhop")
            .unwrap()
            .route(&topo, &Options::default())
            .unwrap();
        let v = validate(&topo, &routes, &ValidateOptions::default());
        assert!(v.is_valid(), "{v}");
        let m = metrics(&topo, &routes, &MetricsOptions::default());
        eprintln!("{name}:\n{v}{m}");
        g.bench_function(format!("validate_{name}"), |b| {
            b.iter(|| validate(black_box(&topo), &routes, &ValidateOptions::default()))
        });
        g.bench_function(format!("metrics_{name}"), |b| {
            b.iter(|| metrics(black_box(&topo), &routes, &MetricsOptions::default()))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
