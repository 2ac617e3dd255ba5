//! A multicast join storm, as when every host of a fabric starts IPoIB at once: the SM
//! brings up the 2,592-CA 3-level fat-tree (radix 36, 8 pods; `ibsm gen fat-tree --levels 3
//! --radix 36 --pods 8`) in the simulated fabric, then every CA port sends its join to the
//! default partition's broadcast group in the same instant. One iteration is the wall time
//! from the joins being sent to every answer received and every MFT Set acknowledged (the
//! SA's joins, the tree's recomputation, the blocks through the simulated fabric); the
//! leaves that reset the group between iterations are not timed.
//!
//! `cargo bench -p sm-daemon --bench mcast`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use sm_core::generate::{FatTree3, GenSpec, generate};
use sm_core::lid::LidStore;
use sm_daemon::core::{Event, Params};
use sm_daemon::transport::sim::SimDriver;
use sm_mad::mcmember_record::{self as mcr, JoinState, Scope};
use sm_mad::{Gid, Guid, Lid, Method, PKey, Tid, sa};
use sm_sim::{EndpointId, SimConfig};

fn join(mgid: Gid, guid: Guid, method: Method, tid: u64) -> [u8; 256] {
    let rec = mcr::Repr {
        mgid,
        port_gid: Gid::new(0xfe80_0000_0000_0000, guid),
        join_state: JoinState::FULL_MEMBER,
        ..mcr::Repr::default()
    };
    let mut r = sa::Repr::request(method, Tid(tid), mcr::ATTR_ID, sm_core::mcast::JOIN_COMPS);
    rec.emit(&mut r.data.0).unwrap();
    r.to_bytes().unwrap()
}

/// Sends every member's request at once and runs until all are answered and nothing is
/// left to do within a millisecond of virtual time.
fn storm(d: &mut SimDriver, sm_lid: Lid, members: &[(EndpointId, Guid)], method: Method, tid: u64) {
    let mgid = mcr::ipoib_broadcast_mgid(PKey(0xffff), Scope::LinkLocal);
    for (i, &(ep, g)) in members.iter().enumerate() {
        d.sim
            .send(ep, sm_lid, &join(mgid, g, method, tid + i as u64))
            .unwrap();
    }
    let mut answered = 0;
    while answered < members.len() || d.next_deadline().is_some_and(|t| t <= d.now() + 1_000_000) {
        if !d.step() {
            break;
        }
        for &(ep, _) in members {
            while let Some(m) = d.sim.recv(ep) {
                let h = sa::Repr::parse(&m.mad).unwrap();
                assert_eq!(h.status, sm_mad::MadStatus::OK);
                answered += 1;
            }
        }
    }
    assert_eq!(answered, members.len());
}

fn bench(c: &mut Criterion) {
    let f = generate(&GenSpec::FatTree3(FatTree3 {
        pods: Some(8),
        ..FatTree3::new(36)
    }))
    .unwrap();
    let ports: Vec<_> = f
        .cas()
        .filter_map(|n| f.port_of(n, 1))
        .filter(|&p| f.port(p).remote.is_some())
        .collect();
    assert_eq!(ports.len(), 2592);
    let mut d = SimDriver::new(
        &f,
        ports[0],
        Params::default(),
        LidStore::new(),
        SimConfig::default(),
    );
    d.start();
    d.run_until(
        600_000_000_000,
        |e| matches!(e, Event::SweepDone(r) if r.subnet_up),
    )
    .expect("subnet up");
    let sm_lid = d.sm.own_lid();
    let members: Vec<(EndpointId, Guid)> = ports[1..]
        .iter()
        .map(|&p| (d.sim.attach(p), f.port(p).guid))
        .collect();
    let mut g = c.benchmark_group("mcast");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    let mut tid = 0x1000_0000u64;
    g.bench_function("join_storm_2591_hosts_fat_tree3_r36_p8", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t = Instant::now();
                storm(&mut d, sm_lid, &members, Method::Set, tid);
                total += t.elapsed();
                tid += 10_000;
                storm(&mut d, sm_lid, &members, Method::Delete, tid);
                tid += 10_000;
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
