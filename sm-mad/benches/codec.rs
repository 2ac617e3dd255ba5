//! Codec speed: parse and emit of every attribute and record, the MAD layers, and the
//! headline case, a whole directed-route GetResp(PortInfo) SMP decoded and re-encoded.
//! Bytes come from the captured vectors (`tests/vectors`) where one exists.
//!
//! `cargo bench -p sm-mad`; each bench reports time per call and calls per second.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use sm_mad::{
    Gid, Guid, Lid, MAD_LEN, class_port_info, guid_info, inform_info, inform_info_record, lft, mad,
    mcmember_record, mft, multipath_record, node_description, node_info, notice, path_record,
    pkey_table, port_info, rmpp, sa, service_record, sl2vl, sm_info, smp, switch_info, vl_arb,
};

/// A full 256-byte directed-route GetResp(PortInfo), three hops out (Hca1 port 1 seen from
/// the far HCA).
const PORT_INFO_SMP: &str = "dr_portinfo_hca_3hop.resp";

/// The attribute data of a captured SMP response.
fn smp_data(name: &str) -> Vec<u8> {
    support::mad(name)[smp::field::DATA].to_vec()
}

/// The first record of a captured SA response.
fn sa_data(name: &str) -> Vec<u8> {
    support::mad(name)[sa::field::DATA].to_vec()
}

/// Bytes of structures no capture holds, emitted from plausible values.
fn emitted(f: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut b = vec![0u8; sa::DATA_LEN];
    f(&mut b);
    b
}

fn group<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(1));
    g
}

/// Parse and emit benches for each `name => module, bytes`.
macro_rules! parse_emit {
    ($c:expr; $( $name:literal => $($m:ident)::+, $bytes:expr; )*) => {{
        let inputs: Vec<(&str, Vec<u8>)> = vec![$( ($name, $bytes), )*];
        let mut g = group($c, "parse");
        let mut i = inputs.iter();
        $(
            let (_, b) = i.next().unwrap();
            $($m)::+::Repr::parse(b).unwrap();
            g.bench_function($name, |bn| bn.iter(|| $($m)::+::Repr::parse(black_box(b))));
        )*
        g.finish();
        let mut g = group($c, "emit");
        let mut i = inputs.iter();
        $(
            let (_, b) = i.next().unwrap();
            let r = $($m)::+::Repr::parse(b).unwrap();
            let mut out = [0u8; MAD_LEN];
            g.bench_function($name, |bn| bn.iter(|| black_box(&r).emit(black_box(&mut out))));
        )*
        g.finish();
    }};
}

fn attributes_and_records(c: &mut Criterion) {
    let gid = Gid::new(0xfe80 << 48, Guid(0x0002_c903_0000_1234));
    parse_emit! { c;
        "mad_header" => mad, support::mad(PORT_INFO_SMP).to_vec();
        "rmpp_header" => rmpp, support::mad("sa_noderecord.resp")[rmpp::OFFSET..].to_vec();
        "smp" => smp, support::mad(PORT_INFO_SMP).to_vec();
        "sa" => sa, support::mad("sa_noderecord.resp").to_vec();
        "node_info" => node_info, smp_data("dr_nodeinfo_switch.resp");
        "node_description" => node_description, smp_data("dr_nodedesc_switch.resp");
        "switch_info" => switch_info, smp_data("dr_switchinfo.resp");
        "guid_info" => guid_info, smp_data("dr_guidinfo_hca.resp");
        "port_info" => port_info, smp_data(PORT_INFO_SMP);
        "pkey_table" => pkey_table, smp_data("dr_pkeys_switch_port0.resp");
        "sl2vl" => sl2vl, smp_data("dr_sl2vl_hca.resp");
        "vl_arb" => vl_arb, smp_data("dr_vlarb_low_hca.resp");
        "lft" => lft, smp_data("dr_lft_block0.resp");
        "mft" => mft, smp_data("lr_mft_block0.resp");
        "sm_info" => sm_info, smp_data("dr_sminfo.resp");
        "notice" => notice, emitted(|b| notice::Repr::trap_128(Lid(3), Lid(3)).emit(b).unwrap());
        "class_port_info" => class_port_info, sa_data("sa_classportinfo.resp");
        "path_record" => path_record, sa_data("sa_pathrecord.resp");
        "multipath_record" => multipath_record, emitted(|b| {
            multipath_record::Repr::between(&[gid; 2], &[gid; 3]).unwrap().emit(b).unwrap()
        });
        "mcmember_record" => mcmember_record, sa_data("sa_mcmemberrecord.resp");
        "service_record" => service_record, emitted(|b| {
            service_record::Repr {
                service_gid: gid,
                service_name: service_record::ServiceName::new("ibsm.bench"),
                service_lease: service_record::Lease::INFINITE,
                ..Default::default()
            }
            .emit(b)
            .unwrap()
        });
        "inform_info" => inform_info, emitted(|b| subscription().emit(b).unwrap());
        "inform_info_record" => inform_info_record, emitted(|b| {
            inform_info_record::Repr {
                subscriber_gid: gid,
                r#enum: 1,
                inform_info: subscription(),
            }
            .emit(b)
            .unwrap()
        });
    }
}

fn subscription() -> inform_info::Repr {
    inform_info::Repr {
        lid_range_begin: inform_info::ALL_LIDS,
        is_generic: true,
        subscribe: true,
        r#type: inform_info::NoticeType::All,
        trap_number: 64,
        qpn: 1,
        resp_time_value: 18,
        producer_type: 4,
        ..Default::default()
    }
}

/// The headline: decode a whole DR GetResp(PortInfo) and its PortInfo, encode both again.
fn port_info_smp(c: &mut Criterion) {
    let bytes = support::mad(PORT_INFO_SMP);
    let mut out = [0u8; MAD_LEN];
    let mut once = || {
        let mut s = smp::Repr::parse(black_box(&bytes[..])).unwrap();
        let pi = port_info::Repr::parse(&s.data.0).unwrap();
        pi.emit(&mut s.data.0).unwrap();
        s.emit(black_box(&mut out[..])).unwrap();
    };
    let mut g = group(c, "smp");
    g.bench_function("PortInfo SMP parse+emit", |bn| bn.iter(&mut once));
    // The same, timed in batches of 1000 calls and reported at the fastest batch's rate: on
    // a shared machine the other batches include time the thread spent descheduled.
    g.bench_function("PortInfo SMP parse+emit, fastest batch", |bn| {
        bn.iter_custom(|iters| {
            let mut best = Duration::MAX;
            let mut done = 0;
            while done < iters {
                let n = (iters - done).min(1000);
                let t = Instant::now();
                for _ in 0..n {
                    once();
                }
                best = best.min(t.elapsed().div_f64(n as f64));
                done += n;
            }
            best.mul_f64(iters as f64)
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = port_info_smp, attributes_and_records
}
criterion_main!(benches);
