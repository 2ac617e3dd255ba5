//! PathRecord queries answered by the SA module, in process, on one core: the 2,592-CA
//! 3-level fat-tree (radix 36, 8 pods, 612 switches; `ibsm gen fat-tree --levels 3 --radix
//! 36 --pods 8`) with LIDs and minhop tables, the SA snapshot built from them
//! (`sa::Db::build`). Goal: >= 200,000 PathRecord queries per second.
//!
//! Each iteration is one whole request through `Server::handle_mad` and the answer out of
//! `Server::poll_transmit`: parse, requester lookup, the walk through the LFTs both ways
//! (reversibility), P_Key sharing, the answer MAD. Source and destination cycle over a
//! fixed pseudo-random list of CA pairs (6-link paths mostly).
//!
//! `cargo bench -p sm-daemon --bench sa`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sm_core::generate::{FatTree3, GenSpec};
use sm_core::partitions::{Partitions, pkey_tables};
use sm_daemon::sa::{Db, DbParams, Requester, RmppMode, SaConfig, Server};
use sm_mad::{Lid, Method, Tid, node_record, path_record, sa};
use sm_routing::Topo;
use sm_sim::testkit::routed;

fn request(method: Method, attr: u16, mask: u64, rec: &impl sm_mad::Wire, tid: u64) -> [u8; 256] {
    let mut r = sa::Repr::request(method, Tid(tid), attr, mask);
    rec.emit(&mut r.data.0).unwrap();
    r.to_bytes().unwrap()
}

fn bench(c: &mut Criterion) {
    let spec = GenSpec::FatTree3(FatTree3 {
        pods: Some(8),
        ..FatTree3::new(36)
    });
    let t0 = Instant::now();
    let (f, routes) = routed(&spec, 0).unwrap();
    let lfts = routes.to_lfts(&Topo::new(&f).unwrap());
    let cas: Vec<Lid> = f
        .cas()
        .filter_map(|n| f.port_of(n, 1))
        .map(|p| f.port(p).lid)
        .collect();
    assert_eq!(cas.len(), 2592);
    let sm = f.port_of(f.cas().next().unwrap(), 1).unwrap();
    let pk = pkey_tables(&Partitions::no_file(), &f, f.port(sm).guid);
    let params = DbParams {
        sm_port_guid: f.port(sm).guid,
        sm_lid: f.port(sm).lid,
        ..DbParams::default()
    };
    let t1 = Instant::now();
    let db = Db::build(&f, &lfts, &pk, params);
    eprintln!(
        "fabric generated and routed in {:?}; SA snapshot built in {:?}",
        t1 - t0,
        t1.elapsed()
    );
    let mut srv = Server::new(SaConfig {
        rmpp: RmppMode::Kernel,
        ..SaConfig::default()
    });
    srv.set_db(db);

    // Pseudo-random CA pairs; the requester is the source (as for a client asking).
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mask = path_record::comp::SLID | path_record::comp::DLID;
    let pairs: Vec<(Lid, [u8; 256], [u8; 256])> = (0..4096)
        .map(|i| {
            let s = cas[(next() % cas.len() as u64) as usize];
            let d = cas[(next() % cas.len() as u64) as usize];
            let pr = path_record::Repr {
                slid: s,
                dlid: d,
                ..Default::default()
            };
            (
                s,
                request(Method::Get, path_record::ATTR_ID, mask, &pr, i),
                request(Method::GetTable, path_record::ATTR_ID, mask, &pr, i),
            )
        })
        .collect();
    // Every answer is a path.
    for (s, get, _) in &pairs[..64] {
        srv.handle_mad(sm_daemon::core::Instant::ZERO, Requester::at(*s), get);
        let r = srv.poll_transmit().unwrap();
        assert_eq!(u16::from_be_bytes([r.mad[4], r.mad[5]]), 0, "status");
    }

    let mut g = c.benchmark_group("sa");
    g.sample_size(20).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    g.bench_function("get_path_record_fat_tree3_r36_p8", |b| {
        b.iter(|| {
            let (s, req, _) = &pairs[i % pairs.len()];
            i += 1;
            srv.handle_mad(
                sm_daemon::core::Instant::ZERO,
                Requester::at(*s),
                black_box(req),
            );
            black_box(srv.poll_transmit().unwrap().mad.len())
        })
    });
    g.bench_function("gettable_path_record_fat_tree3_r36_p8", |b| {
        b.iter(|| {
            let (s, _, req) = &pairs[i % pairs.len()];
            i += 1;
            srv.handle_mad(
                sm_daemon::core::Instant::ZERO,
                Requester::at(*s),
                black_box(req),
            );
            black_box(srv.poll_transmit().unwrap().mad.len())
        })
    });
    let nr: Vec<(Lid, [u8; 256])> = pairs
        .iter()
        .map(|(s, _, _)| {
            let q = node_record::Repr {
                lid: *s,
                ..Default::default()
            };
            (
                *s,
                request(
                    Method::Get,
                    node_record::ATTR_ID,
                    node_record::comp::LID,
                    &q,
                    1,
                ),
            )
        })
        .collect();
    g.bench_function("get_node_record_fat_tree3_r36_p8", |b| {
        b.iter(|| {
            let (s, req) = &nr[i % nr.len()];
            i += 1;
            srv.handle_mad(
                sm_daemon::core::Instant::ZERO,
                Requester::at(*s),
                black_box(req),
            );
            black_box(srv.poll_transmit().unwrap().mad.len())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
