//! Property tests of the QoS value grammars and tables, and of the configuration loader.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use proptest::prelude::*;
use sm_core::config::{Config, LogLevel};
use sm_core::partitions::Enforcement;
use sm_core::qos::{PortKind, QosOptions, Sl2Vl, VlArbTable, operational_vls, tables};
use sm_mad::port_info::VlCap;
use sm_mad::vl_arb::Entry;

fn example() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ibsm.example.toml"))
        .unwrap()
}

fn entries() -> impl Strategy<Value = Vec<Entry>> {
    proptest::collection::vec((0..=14u8, any::<u8>()), 0..=64)
        .prop_map(|v| v.into_iter().map(|(vl, w)| Entry::new(vl, w)).collect())
}

fn vl_cap() -> impl Strategy<Value = VlCap> {
    (0..=7u8).prop_map(VlCap::from_raw_value)
}

fn kind() -> impl Strategy<Value = PortKind> {
    prop::sample::select(vec![
        PortKind::Ca,
        PortKind::Router,
        PortKind::SwitchPort0,
        PortKind::SwitchExternal,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn qos_values_never_panic(s in "[0-9x:, a-f]{0,80}|.{0,40}") {
        let _ = VlArbTable::parse(&s);
        let _ = Sl2Vl::parse(&s);
    }

    #[test]
    fn qos_values_round_trip(e in entries(), map in proptest::array::uniform16(0..=15u8)) {
        let t = VlArbTable::from_entries(&e).unwrap();
        prop_assert_eq!(VlArbTable::parse(&t.to_string()).unwrap(), t);
        let m = Sl2Vl(map);
        prop_assert_eq!(Sl2Vl::parse(&m.to_string()).unwrap(), m);
    }

    #[test]
    fn tables_stay_within_the_operational_vls(
        high in entries(),
        low in entries(),
        map in proptest::array::uniform16(0..=15u8),
        kind in kind(),
        op in vl_cap(),
    ) {
        let o = QosOptions {
            vlarb_high: VlArbTable::from_entries(&high).unwrap(),
            vlarb_low: VlArbTable::from_entries(&low).unwrap(),
            sl2vl: Sl2Vl(map),
            ..QosOptions::default()
        };
        let t = tables(&o, kind, op);
        let vls = op.data_vls().unwrap_or(if op.to_raw_value() == 0 { 1 } else { 15 });
        for (&v, &orig) in t.sl2vl.iter().zip(&map) {
            prop_assert!(v < vls || (v == 15 && orig == 15), "{:?} {:?}", t.sl2vl, op);
        }
        prop_assert_eq!(t.vlarb_high.len(), high.len());
        for e in t.vlarb_high.iter().chain(&t.vlarb_low) {
            prop_assert!(e.vl.0 < vls);
        }
    }

    #[test]
    fn operational_vls_never_exceed_either_end_or_the_cap(
        a in vl_cap(), b in prop::option::of(vl_cap()), max in 0..=8u8,
    ) {
        let op = operational_vls(a, b, max).to_raw_value();
        prop_assert!((1..=5).contains(&op));
        prop_assert!(op <= max.max(1));
        prop_assert!(op <= a.to_raw_value().max(1));
        if let Some(b) = b {
            prop_assert!(op <= b.to_raw_value().max(1));
        }
    }

    #[test]
    fn config_text_never_panics(s in ".{0,200}") {
        if let Err(e) = Config::from_toml_str(&s, Path::new("fuzz.toml")) {
            prop_assert!(e.line >= 1, "{}", e);
        }
    }

    #[test]
    fn mutated_example_never_panics(at in any::<prop::sample::Index>(), c in any::<char>()) {
        let mut text = example();
        let mut i = at.index(text.len());
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        text.insert(i, c);
        if let Err(e) = Config::from_toml_str(&text, Path::new("m.toml")) {
            prop_assert!(e.line >= 1 && e.line <= text.lines().count() + 1, "{}", e);
        }
    }

    #[test]
    fn configs_round_trip_through_toml(
        lmc in 0..=7u8,
        prio in 0..=15u8,
        keys in any::<(u64, u64, u64)>(),
        guid in prop::option::of(any::<u64>()),
        timeouts in (1..=u32::MAX, 1..=u32::MAX, any::<u32>()),
        vls in 1..=5u8,
        enf in prop::sample::select(vec![Enforcement::Both, Enforcement::In, Enforcement::Out, Enforcement::Off]),
        level in prop::sample::select(vec![LogLevel::Error, LogLevel::Warn, LogLevel::Info, LogLevel::Debug, LogLevel::Trace]),
        engines in proptest::collection::vec(prop::sample::select(sm_core::config::KNOWN_ENGINES.to_vec()), 1..4),
        ca_high in prop::option::of(entries()),
    ) {
        let mut c = Config::default();
        c.sm.lmc = lmc;
        c.sm.sm_priority = prio;
        (c.sm.sm_key, c.sm.m_key, c.sm.subnet_prefix) = keys;
        c.sm.port_guid = guid;
        (c.sm.smp_timeout_ms, c.sm.max_outstanding_smps, c.sm.smp_retries) = timeouts;
        c.sm.max_op_vls = vls;
        c.partitions.enforcement = enf;
        c.log.level = level;
        c.routing.engines = engines.into_iter().map(String::from).collect();
        c.qos.ca.vlarb_high = ca_high.map(|e| VlArbTable::from_entries(&e).unwrap());
        let text = c.to_toml();
        prop_assert_eq!(Config::from_toml_str(&text, Path::new("rt.toml")).unwrap(), c);
    }
}
