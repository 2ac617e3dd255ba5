//! The data-path tracer on the 2,592-CA 3-level fat-tree (radix 36, 8 pods, 612 switches;
//! `ibsm gen fat-tree --levels 3 --radix 36 --pods 8`) programmed with minhop: all pairs
//! (6.7 M) should take well under 5 s on 2 cores.
//!
//! `cargo bench -p sm-sim --bench trace`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use sm_core::generate::{FatTree3, GenSpec};
use sm_mad::{Lid, PKey, Sl};

use sm_sim::testkit::{BringUp, min_hop_ar, programmed};
use sm_sim::trace::{AllPairsOptions, Tracer};

fn bench(c: &mut Criterion) {
    let spec = GenSpec::FatTree3(FatTree3 {
        pods: Some(8),
        ..FatTree3::new(36)
    });
    let t0 = Instant::now();
    let (f, _, sim) = programmed(&spec, 0, &BringUp::default()).unwrap();
    eprintln!("generated, routed and programmed in {:?}", t0.elapsed());
    let opts = AllPairsOptions::default();
    let t = Tracer::new(&sim);
    let all = t.check_all_pairs(&opts);
    assert_eq!(all.pairs, 2592 * 2592);
    assert!(all.all_delivered(), "{:?}", all.dropped);
    eprintln!("{} pairs, longest path {} links", all.pairs, all.max_hops());

    let mut g = c.benchmark_group("trace");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("all_pairs_fat_tree3_r36_p8", |b| {
        b.iter(|| t.check_all_pairs(black_box(&opts)).delivered)
    });
    g.bench_function("snapshot_and_all_pairs_fat_tree3_r36_p8", |b| {
        b.iter(|| {
            Tracer::new(black_box(&sim))
                .check_all_pairs(&opts)
                .delivered
        })
    });
    let ar = min_hop_ar(&f).unwrap();
    g.bench_function("all_pairs_adaptive_fat_tree3_r36_p8", |b| {
        b.iter(|| t.check_all_pairs_adaptive(black_box(&opts), &ar).delivered)
    });
    let cas: Vec<Lid> = f
        .cas()
        .filter_map(|n| f.port_of(n, 1))
        .map(|p| f.port(p).lid)
        .collect();
    let (src, dst) = (cas[0], cas[cas.len() - 1]);
    assert_eq!(
        t.trace(src, dst, Sl(0), PKey::DEFAULT).unwrap().hops.len(),
        6
    );
    g.bench_function("one_trace", |b| {
        b.iter(|| t.trace(black_box(src), dst, Sl(0), PKey::DEFAULT).is_ok())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
