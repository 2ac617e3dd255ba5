//! Repairs on the big fat-trees: one link down between a middle switch and a top switch
//! (the core link), one between a leaf and a middle switch, and a middle switch going away
//! whole, under minhop, with the damage as the SM's repair would see it. The 3-level
//! radix-36 tree (11,664 CAs, 1,620 switches) and the radix-64 tree pruned to 40 pods
//! (40,960 CAs, 3,584 switches: `ibsm gen fat-tree --levels 3 --radix 64 --pods 40`).
//!
//! `cargo bench -p sm-routing --bench repair`; the figures are in docs/PERFORMANCE.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use sm_core::fabric::{Fabric, PortIdx};
use sm_core::generate::{FatTree3, GenSpec, generate};
use sm_core::lid::LidStore;
use sm_routing::repair::{Damage, repair};
use sm_routing::{Options, Topo, engine};

/// The links of `node`'s ports `nums` (all linked ports when empty).
fn links_of(f: &Fabric, desc: &str, nums: &[u8]) -> Vec<(PortIdx, PortIdx)> {
    let n = f
        .nodes()
        .iter()
        .position(|x| x.description == desc)
        .map(|i| sm_core::fabric::NodeIdx(i as u32))
        .unwrap();
    f.node_ports(n)
        .filter(|&q| nums.is_empty() || nums.contains(&f.port(q).num))
        .filter_map(|q| Some((q, f.port(q).remote?)))
        .collect()
}

fn bench(c: &mut Criterion) {
    let trees = [
        ("ft3_radix36", FatTree3::new(36), 19u8),
        (
            "ft3_radix64_pods40",
            FatTree3 {
                pods: Some(40),
                ..FatTree3::new(64)
            },
            33,
        ),
    ];
    let mut g = c.benchmark_group("repair");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for (name, spec, up) in trees {
        let mut f = generate(&GenSpec::FatTree3(spec)).unwrap();
        LidStore::new().assign(&mut f, 0).unwrap();
        let routes = {
            let topo = Topo::new(&f).unwrap();
            engine("minhop")
                .unwrap()
                .route(&topo, &Options::default())
                .unwrap()
        };
        let cases = [
            ("core_link", links_of(&f, "spine 0 pod 0", &[up])),
            ("leaf_link", links_of(&f, "leaf 0 pod 0", &[up])),
            ("spine_switch", links_of(&f, "spine 0 pod 0", &[])),
        ];
        for (case, links) in cases {
            let mut cut = f.clone();
            let mut damage = Damage::default();
            {
                let topo = Topo::new(&f).unwrap();
                for &(a, b) in &links {
                    damage.link_down(&topo, a, b);
                }
            }
            for &(a, _) in &links {
                cut.disconnect(a);
            }
            g.bench_function(format!("{name}/{case}"), |b| {
                b.iter_batched(
                    || (),
                    |()| {
                        let topo = Topo::new(&cut).unwrap();
                        repair(&topo, &routes.rule, &routes.lft, &damage).unwrap()
                    },
                    BatchSize::SmallInput,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
