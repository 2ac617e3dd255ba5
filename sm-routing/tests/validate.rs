//! Validation on hand-built fabrics and tables with known answers, and on the tables
//! OpenSM produced for ibsim fabrics (sm-core/tests/data/dumps).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sm_core::dump::NO_ROUTE;
use sm_core::fabric::Fabric;
use sm_mad::{Guid, Lid};
use sm_routing::validate::{Channel, DeadEnd, Failure, SwitchPort};
use sm_routing::{Fate, Options, Routes, Topo, ValidateOptions, Validation, engine, validate};
use support::{Build, ca_lid, set, sw, sw_lid};

/// S0 and S1 linked by their port 3; H0 on S0 port 1, H2 on S0 port 2, H1 on S1 port 1.
fn pair() -> Fabric {
    let mut b = Build::new();
    for _ in 0..2 {
        b.switch(8);
    }
    for _ in 0..3 {
        b.ca(1);
    }
    b.ss(0, 3, 1, 3);
    b.hs(0, 0, 1);
    b.hs(2, 0, 2);
    b.hs(1, 1, 1);
    b.done(0)
}

fn minhop(topo: &Topo<'_>) -> Routes {
    engine("minhop")
        .unwrap()
        .route(topo, &Options::default())
        .unwrap()
}

fn check(topo: &Topo<'_>, routes: &Routes) -> Validation {
    let v = validate(topo, routes, &ValidateOptions::default());
    // The counts always add up.
    let f = &v.by_fate;
    let all = f.delivered
        + f.no_entry
        + f.bad_port
        + f.not_cabled
        + f.wrong_end_port
        + f.not_owner
        + f.forwarding_loop;
    assert_eq!(all, v.pairs_checked);
    assert_eq!(v.pairs_checked - f.delivered, v.unreachable_pairs);
    assert_eq!(v.forwarding_loops, f.forwarding_loop);
    assert_eq!(v.pairs_checked, v.ca_to_ca_pairs + v.ca_to_switch_pairs);
    v
}

const H0: Guid = Guid(0x10_0001);
const H1: Guid = Guid(0x10_0011);
const H2: Guid = Guid(0x10_0021);
const S0: Guid = Guid(0x20_0000);
const S1: Guid = Guid(0x20_0001);

/// The failures as (source, fate, switch, port, hops), sorted.
fn failed(v: &Validation) -> Vec<(Guid, Fate, Guid, u8, u32)> {
    let mut out: Vec<_> = v
        .failures
        .iter()
        .map(|x| (x.source, x.fate, x.switch, x.port, x.hops))
        .collect();
    out.sort();
    out
}

#[test]
fn correct_tables_are_valid() {
    let f = pair();
    let topo = Topo::new(&f).unwrap();
    let v = check(&topo, &minhop(&topo));
    assert!(v.is_valid(), "{v}");
    assert_eq!((v.sources, v.lids, v.switches), (3, 5, 2));
    assert_eq!((v.ca_to_ca_pairs, v.ca_to_switch_pairs), (6, 6));
    assert_eq!(v.non_minimal_pairs, 0);
    assert_eq!(v.max_stretch, 1.0);
    assert_eq!(v.credit_loops, 0);
    assert_eq!(v.vls.len(), 1);
    // H0 and H2 reach H1 through S0 -> S1 and back: no two channels in a row, so no
    // dependency at all.
    assert_eq!(v.vls[0].dependencies, 0);
}

#[test]
fn missing_entry() {
    let f = pair();
    let topo = Topo::new(&f).unwrap();
    let mut r = minhop(&topo);
    let h1 = ca_lid(&f, 1);
    set(&mut r, sw(&topo, 1), h1, NO_ROUTE);
    let v = check(&topo, &r);
    assert_eq!(v.unreachable_pairs, 2);
    assert_eq!(v.by_fate.no_entry, 2);
    assert_eq!(
        failed(&v),
        [
            (H0, Fate::NoEntry, S1, NO_ROUTE, 1),
            (H2, Fate::NoEntry, S1, NO_ROUTE, 1)
        ]
    );
    let x = &v.failures[0];
    assert_eq!((x.lid, x.dest, x.switch_desc.as_str()), (h1, H1, "S1"));
    assert!(!v.is_valid());
    // The text form names the switch and what went wrong.
    let text = v.to_string();
    assert!(text.contains("no forwarding entry at switch 0x0000000000200001 ('S1')"));
}

#[test]
fn dead_end_bad_port_port0_and_ca_transit() {
    let f = pair();
    let topo = Topo::new(&f).unwrap();
    let h1 = ca_lid(&f, 1);
    for (port, fate) in [
        (5, Fate::NotCabled),
        (9, Fate::BadPort),
        (200, Fate::BadPort),
        (0, Fate::NotOwner),
        (2, Fate::WrongEndPort),
    ] {
        let mut r = minhop(&topo);
        set(&mut r, sw(&topo, 0), h1, port);
        let v = check(&topo, &r);
        assert_eq!(v.unreachable_pairs, 2, "port {port}");
        assert_eq!(
            failed(&v),
            [(H0, fate, S0, port, 0), (H2, fate, S0, port, 0)],
            "port {port}"
        );
        let reached = if fate == Fate::WrongEndPort {
            Some(H2)
        } else {
            None
        };
        assert!(v.failures.iter().all(|x| x.reached == reached));
        // H1's own switch still reaches everything else.
        assert_eq!(v.forwarding_loops, 0);
    }
}

#[test]
fn short_and_missing_tables_are_findings() {
    let f = pair();
    let topo = Topo::new(&f).unwrap();
    let mut r = minhop(&topo);
    r.lft[sw(&topo, 1).idx()].truncate(1);
    r.lft.truncate(1);
    let v = check(&topo, &r);
    // Everything towards or through S1 dies there: H0, H2 -> H1, S1 (2 each) and H1 -> any.
    assert_eq!(v.unreachable_pairs, 4 + 4);
    assert_eq!(v.by_fate.no_entry, 8);
    let v = check(&topo, &Routes { lft: vec![], ..r });
    assert_eq!(v.unreachable_pairs, v.pairs_checked);
}

#[test]
fn forwarding_loop_is_a_credit_loop_too() {
    let f = pair();
    let topo = Topo::new(&f).unwrap();
    let mut r = minhop(&topo);
    let h1 = ca_lid(&f, 1);
    set(&mut r, sw(&topo, 1), h1, 3);
    let v = check(&topo, &r);
    assert_eq!(v.forwarding_loops, 2);
    assert_eq!(v.unreachable_pairs, 2);
    // The walk from S0 enters S1 and comes back to S0: S0 is the first switch seen twice.
    assert_eq!(
        failed(&v),
        [(H0, Fate::Loop, S0, 3, 2), (H2, Fate::Loop, S0, 3, 2)]
    );
    assert_eq!(v.credit_loops, 1);
    let c = v.credit_loop.as_ref().unwrap();
    let ch = |a, b| Channel {
        from: SwitchPort { guid: a, port: 3 },
        to: SwitchPort { guid: b, port: 3 },
    };
    assert_eq!(c.channels, [ch(S0, S1), ch(S1, S0)]);
}

#[test]
fn stale_lid() {
    let f = pair();
    let topo = Topo::new(&f).unwrap();
    let mut r = minhop(&topo);
    set(&mut r, sw(&topo, 0), Lid(40), 3);
    let v = check(&topo, &r);
    assert_eq!(v.unreachable_pairs, 0);
    assert_eq!(v.stale_lid_count, 1);
    assert_eq!(v.stale_lids.len(), 1);
    let s = &v.stale_lids[0];
    assert_eq!((s.lid, s.switches), (Lid(40), 1));
    assert_eq!(
        s.ends,
        [DeadEnd {
            fate: Fate::NoEntry,
            switch: S1,
            switch_desc: "S1".into(),
            port: NO_ROUTE,
            reached: None,
        }]
    );
    assert!(!v.is_valid());
}

#[test]
fn detour_is_non_minimal() {
    let mut b = Build::new();
    for _ in 0..3 {
        b.switch(8);
    }
    b.ca(1);
    b.ca(1);
    b.ss(0, 3, 1, 3);
    b.ss(1, 4, 2, 4);
    b.ss(0, 5, 2, 5);
    b.hs(0, 0, 1);
    b.hs(1, 1, 1);
    let f = b.done(0);
    let topo = Topo::new(&f).unwrap();
    let mut r = minhop(&topo);
    let h1 = ca_lid(&f, 1);
    set(&mut r, sw(&topo, 0), h1, 5);
    set(&mut r, sw(&topo, 2), h1, 4);
    let v = check(&topo, &r);
    assert_eq!(v.unreachable_pairs, 0);
    assert_eq!(v.non_minimal_pairs, 1);
    assert_eq!(v.max_extra_hops, 1);
    assert!((v.max_stretch - 4.0 / 3.0).abs() < 1e-12);
    assert!(v.is_valid(), "non-minimal routes are still valid");
}

/// Four switches in a ring, switch `i` port 2 cabled to switch `i+1` port 3, one CA on port
/// 1 of each; every LID routed clockwise.
fn ring() -> (Fabric, Vec<(Lid, usize, u8)>) {
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
    // (LID, switch it hangs off, delivery port)
    let mut lids = Vec::new();
    for i in 0..4 {
        lids.push((ca_lid(&f, i), i, 1));
        lids.push((sw_lid(&f, i), i, 0));
    }
    (f, lids)
}

fn clockwise(topo: &Topo<'_>, lids: &[(Lid, usize, u8)]) -> Routes {
    let mut r = Routes::empty("clockwise", topo);
    for &(lid, at, port) in lids {
        for s in 0..4 {
            set(&mut r, sw(topo, s), lid, if s == at { port } else { 2 });
        }
    }
    r
}

#[test]
fn ring_routed_clockwise_has_a_credit_loop() {
    let (f, lids) = ring();
    let topo = Topo::new(&f).unwrap();
    let v = check(&topo, &clockwise(&topo, &lids));
    assert_eq!(v.unreachable_pairs, 0);
    // Three hops clockwise where one counter-clockwise would do: 1 CA per switch, so
    // 4 sources x (CA + switch LID) at distance 3, and at distance 2 nothing is shorter.
    assert_eq!(v.non_minimal_pairs, 8);
    assert_eq!(v.max_extra_hops, 2);
    assert_eq!(v.credit_loops, 1);
    assert_eq!(v.vls[0].largest_scc, 4);
    let ch = |a: u64| Channel {
        from: SwitchPort {
            guid: Guid(0x20_0000 + a),
            port: 2,
        },
        to: SwitchPort {
            guid: Guid(0x20_0000 + (a + 1) % 4),
            port: 3,
        },
    };
    let c = v.credit_loop.as_ref().unwrap();
    assert_eq!(c.vl, 0);
    assert_eq!(c.channels, [ch(0), ch(1), ch(2), ch(3)]);
    assert_eq!(
        c.to_string(),
        "VL 0: [0x0000000000200000/2 -> 0x0000000000200001/3] => \
         [0x0000000000200001/2 -> 0x0000000000200002/3] => \
         [0x0000000000200002/2 -> 0x0000000000200003/3] => \
         [0x0000000000200003/2 -> 0x0000000000200000/3]"
    );
}

#[test]
fn ring_split_over_two_vls_has_no_credit_loop() {
    let (f, lids) = ring();
    let topo = Topo::new(&f).unwrap();
    let r = clockwise(&topo, &lids);
    // The dateline idea with one VL per path: traffic towards switches 0 and 1 on VL 1,
    // towards 2 and 3 on VL 0. A path that takes S2->S3 then S3->S0 ends at S0 or S1, so
    // VL 0 lacks that dependency; a path taking S0->S1 then S1->S2 ends at S2 or S3, so
    // VL 1 lacks that one. Neither graph closes the ring.
    let mut vl_of = [0u8; 64];
    for &(lid, at, _) in &lids {
        vl_of[lid.0 as usize] = u8::from(at < 2);
    }
    let opts = ValidateOptions {
        vl: Some(Arc::new(move |_, lid: Lid| vl_of[lid.0 as usize])),
        ..ValidateOptions::default()
    };
    let v = validate(&topo, &r, &opts);
    assert_eq!(v.unreachable_pairs, 0);
    assert_eq!(v.credit_loops, 0, "{v}");
    assert_eq!(v.vls.iter().map(|g| g.vl).collect::<Vec<_>>(), [0, 1]);
    assert!(v.vls.iter().all(|g| g.dependencies > 0));
    assert!(v.credit_loop.is_none());
    assert!(v.is_valid());

    // All on one VL through the same option: the loop is back.
    let one = ValidateOptions {
        vl: Some(Arc::new(|_, _| 0)),
        ..ValidateOptions::default()
    };
    assert_eq!(validate(&topo, &r, &one).credit_loops, 1);
    // And the check can be skipped.
    let off = ValidateOptions {
        credit_loops: false,
        ..ValidateOptions::default()
    };
    let v = validate(&topo, &r, &off);
    assert!(!v.credit_loops_checked && v.vls.is_empty());
}

// ---------------------------------------------------------------------------------------
// Tables OpenSM computed for ibsim fabrics.

fn dumps(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sm-core/tests/data/dumps")
        .join(name)
}

fn load(name: &str, topo_file: &str, lft_file: &str) -> (Fabric, sm_core::dump::Lfts) {
    let f = sm_core::read_topology(&dumps(name).join(topo_file))
        .unwrap_or_else(|e| panic!("{e}"))
        .fabric;
    let l = sm_core::dump::read_lfts(&dumps(name).join(lft_file)).unwrap_or_else(|e| panic!("{e}"));
    (f, l)
}

fn validate_dump(name: &str, topo_file: &str, lft_file: &str) -> Validation {
    let (f, l) = load(name, topo_file, lft_file);
    let topo = Topo::new(&f).unwrap();
    let routes = Routes::from_lfts(&l, &topo).unwrap();
    check(&topo, &routes)
}

#[test]
fn opensm_tables_are_valid() {
    for name in [
        "2sw2path4hca2port",
        "2sw2path4hca",
        "net",
        "fattree-3leaf",
        "top64",
    ] {
        let v = validate_dump(name, "ibnetdiscover.txt", "opensm-lfts.dump");
        assert!(v.is_valid(), "{name}: {v}");
        assert_eq!(v.forwarding_loops, 0, "{name}");
        assert_eq!(v.non_minimal_pairs, 0, "{name}: {v}");
        assert!(v.pairs_checked > 0);
        // ibroute read the same tables back from the switches.
        let w = validate_dump(name, "ibnetdiscover.txt", "ibroute.txt");
        if name == "top64" {
            // ibroute never prints the top LID when it is a multiple of 64 (see the
            // dumps README): LID 64 shows as missing on every switch.
            assert_eq!(w.by_fate.no_entry, w.unreachable_pairs);
            assert!(w.failures.iter().all(|x| x.lid == Lid(64)));
            assert!(w.unreachable_pairs > 0);
        } else {
            assert_eq!(w, v, "{name}");
        }
    }
}

#[test]
fn fattree_3leaf_counts() {
    // 2 spines, 3 leaves, H1..H4 and H6 with one port, H5 with two, LMC 1: 7 CA ports
    // with 2 LIDs each and 5 switch LIDs.
    let v = validate_dump("fattree-3leaf", "ibnetdiscover.txt", "opensm-lfts.dump");
    assert_eq!((v.sources, v.switches, v.lids), (7, 5, 19));
    assert_eq!(v.ca_to_ca_pairs, 7 * 6 * 2);
    assert_eq!(v.ca_to_switch_pairs, 7 * 5);
    assert_eq!(v.vls.len(), 1);
    assert!(v.vls[0].dependencies > 0);
}

#[test]
fn stale_routes_after_a_cut_link() {
    // H6 was cut off after OpenSM programmed the switches: its LIDs 20 and 21 are still
    // routed everywhere, and every walk ends at Leaf3's port 2, where the cable was.
    let leaf3 = DeadEnd {
        fate: Fate::NotCabled,
        switch: Guid(0x20_0002),
        switch_desc: "Leaf3".into(),
        port: 2,
        reached: None,
    };
    for file in ["ibroute-unlinked.txt", "opensm-lfts.dump"] {
        let v = validate_dump("fattree-3leaf", "ibnetdiscover-unlinked.txt", file);
        assert_eq!(v.unreachable_pairs, 0, "{file}: {v}");
        assert_eq!(v.credit_loops, 0);
        assert_eq!(v.stale_lid_count, 2, "{file}: {v}");
        for (s, lid) in v.stale_lids.iter().zip([20, 21]) {
            assert_eq!(s.lid, Lid(lid));
            assert_eq!(s.switches, 5, "every switch still routes LID {lid}");
            assert_eq!(s.ends, std::slice::from_ref(&leaf3));
        }
        assert!(!v.is_valid());
        assert!(v.to_string().contains(
            "LID 20: routed by 5 switch(es); entry names a port with no link at \
             0x0000000000200002 ('Leaf3') port 2;"
        ));
    }
    // On the fabric as it was, the same tables are fine.
    let v = validate_dump("fattree-3leaf", "ibnetdiscover.txt", "ibroute-unlinked.txt");
    assert!(v.is_valid(), "{v}");
}

#[test]
fn failures_are_capped_but_counted() {
    let f = pair();
    let topo = Topo::new(&f).unwrap();
    let r = Routes::empty("none", &topo);
    let opts = ValidateOptions {
        max_failures: 3,
        ..ValidateOptions::default()
    };
    let v = validate(&topo, &r, &opts);
    assert_eq!(v.unreachable_pairs, 12);
    assert_eq!(v.failures.len(), 3);
    // The first ones by LID.
    let lids: Vec<Lid> = v.failures.iter().map(|x: &Failure| x.lid).collect();
    let mut sorted = lids.clone();
    sorted.sort();
    assert_eq!(lids, sorted);
    assert_eq!(lids[0], Lid(1));
    // JSON for the report.
    let json = serde_json::to_string(&v).unwrap();
    assert!(json.contains("\"unreachable_pairs\":12"), "{json}");
    assert!(json.contains("\"fate\":\"no_entry\""), "{json}");
}
