//! Quality metrics on fabrics whose figures can be worked out by hand.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use sm_core::generate::{FatTree2, GenSpec};
use sm_routing::{Metrics, MetricsOptions, Options, Routes, Topo, engine, metrics};
use support::{Build, ca_lid, generated, set, sw, sw_lid};

fn minhop(topo: &Topo<'_>) -> Routes {
    engine("minhop")
        .unwrap()
        .route(topo, &Options::default())
        .unwrap()
}

/// Figures that must agree whatever the tables.
fn consistent(m: &Metrics) {
    let h = &m.hops;
    let n = m.cas as u64;
    assert_eq!(h.pairs, n * n.saturating_sub(1));
    let routed: u64 = h.histogram.iter().sum();
    assert_eq!(routed + h.unrouted_pairs, h.pairs);
    // Every delivered flow ends on one switch-to-CA link, and crosses hops - 2 switch links.
    let a = &m.all_to_all;
    assert_eq!(a.flows, h.pairs);
    assert_eq!(a.ca_links.total, routed);
    let links: u64 = h
        .histogram
        .iter()
        .enumerate()
        .map(|(k, c)| (k as u64).saturating_sub(2) * c)
        .sum();
    assert_eq!(a.switch_links.total, links);
    assert!(a.switch_links.max as f64 >= a.switch_links.mean);
    // The per-link figures are the ones the statistics summarise.
    assert_eq!(a.per_link.len(), a.switch_links.links);
    assert_eq!(
        a.per_link.iter().map(|l| l.flows).sum::<u64>(),
        a.switch_links.total
    );
    let max = a.per_link.iter().map(|l| l.flows).max().unwrap_or(0);
    assert_eq!(max, a.switch_links.max);
    assert_eq!(a.per_ca.len(), a.ca_links.links);
    assert_eq!(
        a.per_ca.iter().map(|l| l.flows).sum::<u64>(),
        a.ca_links.total
    );
    assert!(a.per_ca.windows(2).all(|w| w[0].guid <= w[1].guid));
    assert!(
        m.shifts
            .per_shift
            .windows(2)
            .all(|w| w[0].shift < w[1].shift)
    );
    assert_eq!(m.shifts.shifts, m.shifts.per_shift.len());
    if let Some(b) = &m.bisection {
        assert!((0.0..=1.0).contains(&b.ebb), "{b:?}");
        assert!(b.min_sample <= b.ebb && b.ebb <= b.max_sample + 1e-12);
    }
    if let Some(d) = &m.diversity {
        assert!(d.mean_paths >= d.min_paths as f64);
        assert!((0.0..=1.0).contains(&d.disjoint_fraction));
    }
}

#[test]
fn radix4_fat_tree_by_hand() {
    // 4 leaves of 2 hosts, 2 spines; leaf port 3 to spine 0, port 4 to spine 1. minhop
    // takes remote LIDs in order, alternating uplinks: even hosts through spine 0, odd
    // hosts through spine 1, from every leaf.
    let f = generated(&GenSpec::FatTree2(FatTree2::new(4)), 0);
    let topo = Topo::new(&f).unwrap();
    let m = metrics(&topo, &minhop(&topo), &MetricsOptions::default());
    consistent(&m);
    assert_eq!(m.cas, 8);
    // 8 pairs on one leaf (2 links), 48 across leaves (4 links).
    assert_eq!(m.hops.histogram, [0, 0, 8, 0, 48]);
    assert_eq!((m.hops.min, m.hops.max), (2, 4));
    assert!((m.hops.mean - 208.0 / 56.0).abs() < 1e-12);
    // Each uplink carries its 2 hosts' flows to the 3 remote hosts of its parity; each
    // downlink the flows of the 6 remote hosts to one host.
    let s = &m.all_to_all.switch_links;
    assert_eq!((s.links, s.total, s.max), (16, 96, 6));
    assert_eq!((s.mean, s.stddev), (6.0, 0.0));
    let c = &m.all_to_all.ca_links;
    assert_eq!((c.links, c.total, c.max, c.stddev), (8, 56, 7, 0.0));
    // Every shift sends a leaf's two hosts to hosts of different parity: non-blocking.
    assert_eq!(m.shifts.shifts, 7);
    assert!(!m.shifts.sampled);
    assert_eq!(m.shifts.worst_max_load, 1);
    assert_eq!(m.shifts.mean_max_load, 1.0);
    // Random bisections are not: two hosts of a leaf may both send to even hosts.
    let b = m.bisection.as_ref().unwrap();
    assert_eq!((b.samples, b.flows_per_sample), (32, 8));
    assert!(b.ebb < 1.0 && b.ebb >= 0.5, "{b:?}");
    assert_eq!(b.unrouted_flows, 0);
    assert!(m.diversity.is_none(), "LMC 0 has one path per pair");
    // Same seed, same figures.
    assert_eq!(
        m,
        metrics(&topo, &minhop(&topo), &MetricsOptions::default())
    );
}

#[test]
fn lmc_paths_use_both_spines() {
    let f = generated(&GenSpec::FatTree2(FatTree2::new(4)), 1);
    let topo = Topo::new(&f).unwrap();
    let m = metrics(&topo, &minhop(&topo), &MetricsOptions::default());
    consistent(&m);
    let d = m.diversity.unwrap();
    // 8 hosts x 6 hosts on other leaves.
    assert_eq!(d.pairs, 48);
    assert_eq!(
        (d.mean_paths, d.min_paths, d.disjoint_fraction),
        (2.0, 2, 1.0)
    );
}

#[test]
fn ring_clockwise_loads() {
    let mut b = Build::new();
    for _ in 0..4 {
        b.switch(4);
    }
    for i in 0..4 {
        b.ca(1);
        b.ss(i, 2, (i + 1) % 4, 3);
    }
    for i in 0..4 {
        b.hs(i, i, 1);
    }
    let f = b.done(0);
    let topo = Topo::new(&f).unwrap();
    let mut r = Routes::empty("clockwise", &topo);
    for at in 0..4 {
        for (lid, port) in [(ca_lid(&f, at), 1), (sw_lid(&f, at), 0)] {
            for s in 0..4 {
                set(&mut r, sw(&topo, s), lid, if s == at { port } else { 2 });
            }
        }
    }
    let m = metrics(&topo, &r, &MetricsOptions::default());
    consistent(&m);
    // 4 pairs each 1, 2 and 3 switch hops apart.
    assert_eq!(m.hops.histogram, [0, 0, 0, 4, 4, 4]);
    // Clockwise channels carry 1 + 2 + 3 flows, counter-clockwise ones nothing.
    let s = &m.all_to_all.switch_links;
    assert_eq!((s.links, s.total, s.max), (8, 24, 6));
    assert_eq!((s.mean, s.stddev), (3.0, 3.0));
    // Shift k loads every clockwise channel with k flows.
    let loads: Vec<(u32, u32)> = m
        .shifts
        .per_shift
        .iter()
        .map(|s| (s.shift, s.max_load))
        .collect();
    assert_eq!(loads, [(1, 1), (2, 2), (3, 3)]);
    assert_eq!(
        (m.shifts.worst_max_load, m.shifts.worst_shift),
        (3, Some(3))
    );
}

#[test]
fn broken_tables_count_unrouted_flows() {
    let f = generated(&GenSpec::FatTree2(FatTree2::new(4)), 0);
    let topo = Topo::new(&f).unwrap();
    let mut r = minhop(&topo);
    // The spine another leaf uses towards host 0 forgets it: flows through it die.
    let cas: Vec<_> = topo
        .dests
        .iter()
        .filter(|d| d.kind == sm_core::NodeKind::Ca)
        .collect();
    let h0 = cas[0];
    let other = cas.iter().find(|d| d.sw != h0.sw).unwrap();
    let up = r.port(other.sw, h0.base_lid).unwrap();
    let spine = topo
        .adj(other.sw)
        .iter()
        .find(|a| a.port == up)
        .unwrap()
        .peer;
    r.lft[spine.idx()][h0.base_lid.0 as usize] = sm_core::dump::NO_ROUTE;
    let m = metrics(&topo, &r, &MetricsOptions::default());
    consistent(&m);
    assert!(m.hops.unrouted_pairs > 0);
    assert_eq!(m.all_to_all.unrouted_flows, m.hops.unrouted_pairs);
    // Nothing but empty tables: no panic, everything unrouted.
    let m = metrics(
        &topo,
        &Routes::empty("none", &topo),
        &MetricsOptions::default(),
    );
    consistent(&m);
    assert_eq!(m.hops.unrouted_pairs, 56);
    assert_eq!(m.bisection.unwrap().ebb, 0.0);
}

#[test]
fn shifts_are_sampled_beyond_the_limit() {
    let f = generated(&GenSpec::FatTree2(FatTree2::new(8)), 0);
    let topo = Topo::new(&f).unwrap();
    let r = minhop(&topo);
    let opts = MetricsOptions {
        max_shifts: 5,
        bisections: 3,
        ..MetricsOptions::default()
    };
    let m = metrics(&topo, &r, &opts);
    consistent(&m);
    assert!(m.shifts.sampled);
    assert_eq!(m.shifts.shifts, 5);
    assert!(
        m.shifts
            .per_shift
            .iter()
            .all(|s| (1..32).contains(&s.shift))
    );
    assert_eq!(m.bisection.as_ref().unwrap().samples, 3);
    let other = metrics(
        &topo,
        &r,
        &MetricsOptions {
            seed: 99,
            ..opts.clone()
        },
    );
    assert_ne!(
        other.shifts.per_shift, m.shifts.per_shift,
        "another seed, other shifts"
    );
    // Text report.
    let text = m.to_string();
    assert!(text.contains("shift permutations (5, sampled)"), "{text}");
}

#[test]
fn all_to_all_matches_walking_every_pair() {
    // A pruned 3-level tree, where minhop's loads are uneven: the per-destination push
    // must give exactly what walking each of the N(N-1) flows gives.
    let spec = GenSpec::FatTree3(sm_core::generate::FatTree3 {
        pods: Some(3),
        ..sm_core::generate::FatTree3::new(6)
    });
    let f = generated(&spec, 0);
    let topo = Topo::new(&f).unwrap();
    let r = minhop(&topo);
    let m = metrics(&topo, &r, &MetricsOptions::default());
    consistent(&m);

    let mut load = std::collections::BTreeMap::new();
    let cas: Vec<_> = topo
        .dests
        .iter()
        .filter(|d| d.kind == sm_core::NodeKind::Ca)
        .collect();
    for a in &cas {
        for b in &cas {
            if a.port == b.port {
                continue;
            }
            let mut s = a.sw;
            while s != b.sw {
                let p = r.port(s, b.base_lid).unwrap();
                *load.entry((s, p)).or_insert(0u64) += 1;
                s = topo.adj(s).iter().find(|x| x.port == p).unwrap().peer;
            }
        }
    }
    let links: usize = (0..topo.num_switches())
        .map(|s| topo.adj(sm_routing::SwIdx(s as u32)).len())
        .sum();
    let total: u64 = load.values().sum();
    let mean = total as f64 / links as f64;
    let var = (load
        .values()
        .map(|&l| (l as f64 - mean).powi(2))
        .sum::<f64>()
        + (links - load.len()) as f64 * mean * mean)
        / links as f64;
    let s = &m.all_to_all.switch_links;
    assert_eq!(s.links, links);
    assert_eq!(s.total, total);
    assert_eq!(s.max, *load.values().max().unwrap());
    assert!((s.mean - mean).abs() < 1e-9);
    assert!(
        (s.stddev - var.sqrt()).abs() < 1e-9,
        "{} vs {}",
        s.stddev,
        var.sqrt()
    );
    assert!(
        s.max as f64 > s.mean,
        "minhop is uneven on pruned 3-level trees"
    );
}
