//! QoS tables compared with what OpenSM 3.3.23 programmed on an ibsim fabric for the same
//! options (`tests/data/qos/`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use sm_core::fabric::NodeKind;
use sm_core::qos::{DEFAULT_MAX_OP_VLS, PortKind, QosOptions, operational_vls, tables};
use sm_core::read_topology;
use sm_mad::Guid;
use sm_mad::port_info::VlCap;
use sm_mad::vl_arb::{Block, Entry};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/qos")
        .join(name)
}

/// One `## ...` section of the capture: SL2VL rows and the VLArb tables.
#[derive(Default, Debug)]
struct Section {
    head: String,
    sl2vl_rows: Vec<Vec<u8>>,
    low: Vec<Entry>,
    high: Vec<Entry>,
}

fn cells(line: &str) -> Vec<u8> {
    let (_, rest) = line.rsplit_once(':').unwrap();
    rest.split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|c| match c.strip_prefix("0x") {
            Some(h) => u8::from_str_radix(h, 16).unwrap(),
            None => c.parse().unwrap(),
        })
        .collect()
}

fn sections(text: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut high = false;
    let mut vls = Vec::new();
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            out.push(Section {
                head: h.to_string(),
                ..Section::default()
            });
            continue;
        }
        let s = out.last_mut().unwrap();
        if line.starts_with("ports:") {
            s.sl2vl_rows.push(cells(line));
        } else if line.starts_with("# Low priority") {
            high = false;
        } else if line.starts_with("# High priority") {
            high = true;
        } else if line.starts_with("VL ") {
            vls = cells(line);
        } else if line.starts_with("WEIGHT:") {
            let t: Vec<Entry> = vls
                .iter()
                .zip(cells(line))
                .map(|(&v, w)| Entry::new(v, w))
                .collect();
            if high { s.high = t } else { s.low = t }
        }
    }
    out
}

#[test]
fn tables_match_opensm() {
    let path = data("opensm-qos.conf");
    let opts =
        QosOptions::from_opensm_conf(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
    assert!(opts.enabled);
    let fabric = read_topology(&data("net.pk")).unwrap().fabric;
    let text = std::fs::read_to_string(data("opensm-qos.expected")).unwrap();
    let mut checked = 0;
    for s in sections(&text) {
        let words: Vec<&str> = s.head.split_whitespace().collect();
        let guid = words[1].parse::<Guid>().unwrap();
        let port = match words[0] {
            "end" => fabric.port_by_guid(guid).unwrap(),
            _ => {
                let n = fabric.node_by_guid(guid).unwrap();
                fabric.port_of(n, words[2].parse().unwrap()).unwrap()
            }
        };
        let p = fabric.port(port);
        // OpenSM leaves ports without a link alone.
        let Some(remote) = p.remote else { continue };
        let kind = match fabric.node(p.node).kind {
            NodeKind::Switch => PortKind::SwitchExternal,
            NodeKind::Router => PortKind::Router,
            NodeKind::Ca => PortKind::Ca,
        };
        let op = operational_vls(
            VlCap::from_raw_value(p.vl_cap),
            Some(VlCap::from_raw_value(fabric.port(remote).vl_cap)),
            DEFAULT_MAX_OP_VLS,
        );
        assert_eq!(op, VlCap::Vl0To7, "ibsim ports run VL0-7");
        let t = tables(&opts, kind, op);
        assert!(!s.sl2vl_rows.is_empty(), "{}", s.head);
        for row in &s.sl2vl_rows {
            assert_eq!(row.as_slice(), &t.sl2vl, "{}: SL2VL", s.head);
        }
        // ibsim ports have 8 low and 8 high entries.
        let low = t.vlarb_block(Block::Low0To31, 8, 8).unwrap();
        let high = t.vlarb_block(Block::High0To31, 8, 8).unwrap();
        assert_eq!(s.low, low.vl_arbitration_table[..8], "{}: low", s.head);
        assert_eq!(s.high, high.vl_arbitration_table[..8], "{}: high", s.head);
        checked += 1;
    }
    // Five CA ports and the five switch ports facing them, plus two inter-switch ends.
    assert_eq!(checked, 12);
}
