//! The server against OpenSM's own answers: the captured `saquery` exchanges of sm-mad's
//! test vectors (ibsim's `net.2sw2path4hca`, OpenSM 3.3.23), replayed on a snapshot built
//! from the same fabric with OpenSM's LIDs. Where every field of a record follows from the
//! fabric (links, paths, errors, empty tables, SMInfo), the answer must be byte for byte
//! OpenSM's, TID aside (its upper half was rewritten on the way).

use std::path::Path;

use sm_core::fabric::{Fabric, NodeIdx};
use sm_core::partitions::{Partitions, pkey_tables};
use sm_mad::{Guid, Lid, node_info};

use super::*;
use crate::core::Instant;

/// ibsim's `net.2sw2path4hca`, the fabric the OpenSM vectors were captured on.
const NET: &str = include_str!("../../tests/data/2sw2path4hca.net");

/// The MAD of a captured vector file.
fn vector(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sm-mad/tests/vectors")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let digits: Vec<u8> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .flat_map(|l| l.bytes())
        .filter(u8::is_ascii_hexdigit)
        .map(|c| (c as char).to_digit(16).unwrap() as u8)
        .collect();
    digits.chunks(2).map(|p| (p[0] << 4) | p[1]).collect()
}

/// The fabric as ibsim and OpenSM left it: OpenSM's LIDs (Switch1 1, Hca1 2, Switch2 3,
/// Hca2 4, Hca3 5, Hca4 6), every link ACTIVE at 4x SDR with 2048-byte MTUs, minhop routes.
fn opensm_db() -> Db {
    let mut f: Fabric = sm_core::read_topology_str(NET, Path::new("net"))
        .unwrap()
        .fabric;
    let lids = [
        ("Switch1", 1),
        ("Hca1", 2),
        ("Switch2", 3),
        ("Hca2", 4),
        ("Hca3", 5),
        ("Hca4", 6),
    ];
    for (desc, lid) in lids {
        let n = f
            .nodes()
            .iter()
            .position(|n| n.description == desc)
            .unwrap();
        let n = NodeIdx(n as u32);
        let num = if f.node(n).kind == sm_core::fabric::NodeKind::Switch {
            0
        } else {
            1
        };
        let p = f.port_of(n, num).unwrap();
        f.port_mut(p).lid = Lid(lid);
    }
    let ports: Vec<_> = (0..f.ports().len() as u32).map(sm_core::PortIdx).collect();
    for p in ports {
        let port = f.port_mut(p);
        port.mtu_cap = 4;
        if port.remote.is_some() {
            port.state = sm_mad::port_info::PortState::Active;
        }
    }
    let topo = sm_routing::Topo::new(&f).unwrap();
    let chain = sm_routing::route_chain("minhop", &topo, &sm_routing::Options::default()).unwrap();
    let lfts = chain.routes.to_lfts(&topo);
    let sm_guid = Guid(0x20_0000);
    let pk = pkey_tables(&Partitions::no_file(), &f, sm_guid);
    let params = DbParams {
        sm_port_guid: sm_guid,
        sm_lid: Lid(1),
        ..DbParams::default()
    };
    let mut db = Db::build(&f, &lfts, &pk, params);
    // NodeInfo as ibsim's agents answer it.
    for (i, n) in f.nodes().iter().enumerate() {
        let idx = NodeIdx(i as u32);
        let info = node_info::Repr {
            base_version: 1,
            class_version: 1,
            node_type: n.kind.node_type(),
            num_ports: n.num_ports,
            system_image_guid: n.guid,
            node_guid: n.guid,
            port_guid: n.guid,
            partition_cap: if n.kind == sm_core::fabric::NodeKind::Switch {
                8
            } else {
                0x40
            },
            device_id: 0,
            revision: 0xa1,
            local_port_num: 0,
            vendor_id: 0,
        };
        db.set_node_info(idx, info, &n.description);
    }
    db.set_act_count(118);
    db
}

fn server(db: Db) -> Server {
    let mut s = Server::new(SaConfig {
        rmpp: RmppMode::Kernel,
        ..SaConfig::default()
    });
    s.set_db(db);
    s
}

/// Our answer to a captured request, as the kernel transport would hand it over.
fn answer(srv: &Server, req: &str) -> Vec<u8> {
    let mut r = vector(req);
    r.resize(256, 0);
    match srv.query(Instant::ZERO, Requester::at(Lid(2)), &r).unwrap() {
        Answer::Single(b) => b.to_vec(),
        Answer::Table { header, payload } => {
            let mut h = *header;
            h.rmpp = rmpp::Repr {
                rmpp_flags: RmppFlags::ACTIVE,
                ..rmpp::Repr::default()
            };
            let mut m = vec![0u8; sa::HEADER_LEN];
            h.emit_header(&mut m).unwrap();
            m.extend_from_slice(&payload);
            m
        }
    }
}

/// Equal to OpenSM's answer, TID upper half aside (and the 24 bytes the shim garbles at
/// the end of a full MAD).
fn same_as_opensm(srv: &Server, name: &str) {
    let ours = answer(srv, &format!("{name}.req.mad"));
    let theirs = vector(&format!("{name}.resp.mad"));
    let n = theirs.len().min(232);
    let mask = |b: &[u8]| {
        let mut b = b[..n].to_vec();
        b[8..12].fill(0);
        b
    };
    assert!(
        ours.len() >= n,
        "{name}: {} bytes, OpenSM {}",
        ours.len(),
        theirs.len()
    );
    assert_eq!(mask(&ours), mask(&theirs), "{name}");
    if theirs.len() < 256 {
        assert_eq!(
            ours.len(),
            theirs.len(),
            "{name}: table answers have OpenSM's length"
        );
    }
}

#[test]
fn answers_are_opensms_byte_for_byte() {
    let srv = server(opensm_db());
    for name in [
        "sa_linkrecord",
        "sa_pathrecord",
        "sa_pathrecord_same_switch",
        "sa_pkeytablerecord_untrusted",
        "sa_mftrecord_empty",
        "sa_sminforecord",
        "sa_noderecord",
        "sa_noderecord_switch",
        "sa_guidinforecord",
        "sa_sl2vlrecord",
        "sa_vlarbrecord",
    ] {
        same_as_opensm(&srv, name);
    }
}

#[test]
fn class_port_info_differs_from_opensms_only_in_what_is_not_served() {
    let srv = server(opensm_db());
    let ours = answer(&srv, "sa_classportinfo.req.mad");
    let theirs = vector("sa_classportinfo.resp.mad");
    let (a, b) = (
        sm_mad::class_port_info::Repr::parse(&ours[56..]).unwrap(),
        sm_mad::class_port_info::Repr::parse(&theirs[56..]).unwrap(),
    );
    // OpenSM also claims Get/Set(Notice) on the SA (bit 1), alias GUIDs (bit 5) and
    // multicast service records (bit 8), which ibsm does not serve.
    assert_eq!(b.capability_mask & !a.capability_mask, 1 << 1);
    assert_eq!(a.capability_mask & !b.capability_mask, 0);
    assert_eq!(
        b.capability_mask2 & !a.capability_mask2,
        (1 << 5) | (1 << 8)
    );
    assert_eq!(a.capability_mask2 & !b.capability_mask2, 0);
    let strip = |mut r: sm_mad::class_port_info::Repr| {
        r.capability_mask = 0;
        r.capability_mask2 = 0;
        r
    };
    assert_eq!(strip(a), strip(b));
    assert_eq!(ours[..56].len(), 56);
    let mut h = ours[..24].to_vec();
    h[8..12].fill(0);
    let mut t = theirs[..24].to_vec();
    t[8..12].fill(0);
    assert_eq!(h, t);
}

#[test]
fn segment_mode_table_answers_are_rmpp_transfers() {
    let mut srv = Server::new(SaConfig::default());
    srv.set_db(opensm_db());
    let mut req = vector("sa_linkrecord.req.mad");
    req.resize(256, 0);
    // Every link (mask 0): 12 records of 8 bytes, one segment, acknowledged by the client.
    req[48..56].fill(0);
    srv.handle_mad(Instant::ZERO, Requester::at(Lid(2)), &req);
    let seg = srv.poll_transmit().unwrap();
    assert!(srv.poll_transmit().is_none());
    let r = rmpp::Repr::parse_mad(&seg.mad).unwrap();
    assert_eq!(r.rmpp_type, RmppType::Data);
    assert!(r.rmpp_flags.first() && r.rmpp_flags.last());
    assert_eq!(r.payload_length(), 20 + 12 * 8);
    assert_eq!(srv.transfers(), 1);
    // Unacknowledged: sent again after the ACK timeout, then given up.
    let t = srv.poll_timeout().unwrap();
    srv.handle_timeout(t);
    assert_eq!(srv.poll_transmit().unwrap().mad, seg.mad);
    let mut rx = RmppReceiver::sa();
    rx.handle_mad(&seg.mad).unwrap();
    let ack = rx.poll_transmit().unwrap();
    srv.handle_mad(t, Requester::at(Lid(2)), &ack);
    assert_eq!(srv.transfers(), 0);
    assert_eq!(srv.stats().transfers_done, 1);
    assert_eq!(srv.poll_timeout(), None);
}

#[test]
fn nothing_before_a_snapshot_and_nothing_to_responses() {
    let mut srv = Server::new(SaConfig::default());
    let mut req = vector("sa_noderecord.req.mad");
    req.resize(256, 0);
    srv.handle_mad(Instant::ZERO, Requester::at(Lid(2)), &req);
    assert!(
        srv.poll_transmit().is_none(),
        "C15-0.1.3: silent until the subnet is up"
    );
    srv.set_db(opensm_db());
    let mut resp = req.clone();
    resp[3] |= 0x80;
    srv.handle_mad(Instant::ZERO, Requester::at(Lid(2)), &resp);
    assert!(srv.poll_transmit().is_none());
    srv.handle_mad(Instant::ZERO, Requester::at(Lid(2)), &req);
    assert!(srv.poll_transmit().is_some());
}

#[test]
fn no_resources_and_unknown_requesters() {
    let mut srv = Server::new(SaConfig {
        max_transfers: 0,
        ..SaConfig::default()
    });
    srv.set_db(opensm_db());
    let mut req = vector("sa_linkrecord.req.mad");
    req.resize(256, 0);
    srv.handle_mad(Instant::ZERO, Requester::at(Lid(2)), &req);
    let r = srv.poll_transmit().unwrap();
    assert_eq!(
        u16::from_be_bytes([r.mad[4], r.mad[5]]),
        0x0100,
        "ERR_NO_RESOURCES"
    );
    assert_eq!(r.mad[3], 0x92);
    assert_eq!(r.mad.len(), 256);
    // A requester LID the SA does not know.
    let srv = server(opensm_db());
    let Answer::Single(b) = srv
        .query(Instant::ZERO, Requester::at(Lid(0x4444)), &req)
        .unwrap()
    else {
        panic!("an error answer")
    };
    assert_eq!(u16::from_be_bytes([b[4], b[5]]), 0x0200, "ERR_REQ_INVALID");
}
