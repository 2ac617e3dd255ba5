//! The partitions parser never panics, accepts every well-formed file, and the tables it
//! leads to keep their invariants.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use sm_core::fabric::{Fabric, NodeKind};
use sm_core::partitions::{Partitions, TableOptions, pkey_tables_with};
use sm_core::read_topology;
use sm_mad::{Guid, PKey};

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z_]{0,8}",
        "(0x|0)?[0-9a-fA-F]{0,18}",
        "[=,:;# \t\n]",
        "(ALL|ALL_CAS|ALL_SWITCHES|ALL_ROUTERS|SELF|NONE|full|limited|both|f|l|b)",
        "(ipoib|indx0|defmember|mtu|rate|sl|scope|Q_Key|TClass|FlowLabel|mgid)(=[0-9a-fx:]{0,6})?",
        "ff[0-9a-f]{2}:(401b|601b)?:[0-9a-f:]{0,12}",
        ".{0,6}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn grammar_soup_never_panics(parts in proptest::collection::vec(fragment(), 0..40)) {
        let text = parts.concat();
        if let Err(e) = Partitions::parse(&text, Path::new("soup.conf")) {
            prop_assert!(e.line >= 1 && e.line <= text.lines().count().max(1) + 1, "{e}");
            prop_assert!(e.column >= 1, "{e}");
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = Partitions::parse(&text, Path::new("fuzz.conf"));
    }
}

fn fabric() -> &'static Fabric {
    static F: OnceLock<Fabric> = OnceLock::new();
    F.get_or_init(|| {
        let net = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/partitions/net.pk");
        read_topology(Path::new(net)).unwrap().fabric
    })
}

/// The GUIDs of net.pk's end ports, and two that are not there.
const GUIDS: [u64; 9] = [
    0x100001, 0x100002, 0x100004, 0x100006, 0x100008, 0x200000, 0x200001, 0x999, 0xabcdef,
];

#[derive(Debug, Clone)]
struct Def {
    /// Index of an earlier definition to repeat (same name and P_Key), else a new one.
    repeat: Option<prop::sample::Index>,
    named: bool,
    explicit_pkey: bool,
    full_bit: bool,
    flags: Vec<String>,
    members: Vec<(String, Option<&'static str>)>,
    mgroups: usize,
    sep: &'static str,
}

fn member() -> impl Strategy<Value = (String, Option<&'static str>)> {
    let who = prop_oneof![
        Just("ALL".to_string()),
        Just("ALL_CAS".to_string()),
        Just("ALL_SWITCHES".to_string()),
        Just("ALL_ROUTERS".to_string()),
        Just("SELF".to_string()),
        Just("NONE".to_string()),
        (prop::sample::select(GUIDS.to_vec()), 0..3u8).prop_map(|(g, base)| match base {
            0 => format!("{g:#x}"),
            1 => format!("{g}"),
            _ => format!("0{g:o}"),
        }),
    ];
    let how = prop::option::of(prop::sample::select(vec![
        "full", "limited", "both", "limi", "f", "b",
    ]));
    (who, how)
}

fn flag() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("ipoib".to_string()),
        Just("indx0".to_string()),
        prop::sample::select(vec!["full", "limited", "both"])
            .prop_map(|m| format!("defmember={m}")),
        (1..=5u8).prop_map(|v| format!("mtu={v}")),
        (2..=24u8).prop_map(|v| format!("rate={v}")),
        (0..=15u8).prop_map(|v| format!("sl={v}")),
        (1..=15u8).prop_map(|v| format!("scope={v}")),
        any::<u32>().prop_map(|v| format!("Q_Key={v:#x}")),
        any::<u8>().prop_map(|v| format!("TClass={v}")),
        (0..=0xfffffu32).prop_map(|v| format!("FlowLabel={v}")),
    ]
}

fn def() -> impl Strategy<Value = Def> {
    (
        prop::option::weighted(0.2, any::<prop::sample::Index>()),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        proptest::collection::vec(flag(), 0..4),
        proptest::collection::vec(member(), 0..6),
        0..3usize,
        prop::sample::select(vec![",", ", ", " ,\n  ", ",\n", "\n", "\n# note\n  "]),
    )
        .prop_map(
            |(repeat, named, explicit_pkey, full_bit, flags, members, mgroups, sep)| Def {
                repeat,
                named,
                explicit_pkey,
                full_bit,
                flags,
                members,
                mgroups,
                sep,
            },
        )
}

/// Renders definitions; returns the text, the member count (NONE excluded) and the number
/// of groups.
fn render(defs: &[Def]) -> (String, usize, usize) {
    let mut text = String::from("# generated\n");
    let mut heads: Vec<(Option<String>, Option<u16>)> = Vec::new();
    let (mut members, mut groups) = (0, 0);
    for (i, d) in defs.iter().enumerate() {
        // Explicit P_Keys from 0x1000 never meet generated ones (counted from 1).
        let (name, pkey) = match d.repeat {
            Some(ix) if !heads.is_empty() => heads[ix.index(heads.len())].clone(),
            _ => {
                let name = d.named.then(|| format!("P{i}"));
                let pkey = (d.explicit_pkey || name.is_none()).then_some(0x1000 + i as u16);
                (name, pkey)
            }
        };
        heads.push((name.clone(), pkey));
        let mut h = name.unwrap_or_default();
        if let Some(k) = pkey {
            let k = if d.full_bit { k | 0x8000 } else { k };
            h.push_str(&format!(" = {k:#06x}"));
        }
        for f in &d.flags {
            // IP groups need the partition's rate and MTU; keep groups non-IP instead.
            h.push_str(&format!(", {f}"));
        }
        text.push_str(&h);
        text.push_str(" :");
        let mut items: Vec<String> = Vec::new();
        for (who, how) in &d.members {
            if who != "NONE" {
                members += 1;
            }
            items.push(match how {
                Some(m) => format!("{who}={m}"),
                None => who.clone(),
            });
        }
        text.push_str(&items.join(d.sep));
        for g in 0..d.mgroups {
            groups += 1;
            text.push_str(&format!("\n  mgid=ff12::{:x}:{g:x},sl=1 # group\n", i + 1));
        }
        text.push_str(" ;\n");
    }
    (text, members, groups)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn well_formed_files_parse_and_give_sound_tables(
        defs in proptest::collection::vec(def(), 0..8),
        allow_both in any::<bool>(),
    ) {
        let (text, members, groups) = render(&defs);
        let parts = match Partitions::parse(&text, Path::new("gen.conf")) {
            Ok(p) => p,
            Err(e) => return Err(TestCaseError::fail(format!("{e}\n{text}"))),
        };
        let rules: usize = parts.partitions.iter().map(|p| p.rules.len()).sum();
        prop_assert_eq!(rules, members, "{}", text);
        let mgroups: usize = parts.partitions.iter().map(|p| p.mgroups.len()).sum();
        prop_assert_eq!(mgroups, groups);

        let fabric = fabric();
        let opts = TableOptions { allow_both_pkeys: allow_both, ..TableOptions::default() };
        let t = pkey_tables_with(&parts, fabric, Guid(0x100001), &opts);
        prop_assert_eq!(t.end_ports.len(), 7);
        let known: HashSet<u16> = parts
            .partitions
            .iter()
            .map(|p| p.pkey.0)
            .chain([0x7fff])
            .collect();
        for p in &t.end_ports {
            // Every port is in the default partition, so index 0 is empty only when
            // allow_both_pkeys reserves it for the full default key (as OpenSM does).
            prop_assert!(!p.keys.is_empty(), "{:?}", p);
            prop_assert!(!p.keys[0].is_invalid() || allow_both, "{:?}", p);
            let mut seen = HashSet::new();
            for k in p.keys.iter().filter(|k| !k.is_invalid()) {
                prop_assert!(known.contains(&k.base()), "{:?}", k);
                let id = if allow_both { k.0 } else { k.base() };
                prop_assert!(seen.insert(id), "duplicate {:?} in {:?}", k, p);
            }
            prop_assert!(p.keys[1..].iter().all(|k| !k.is_invalid()), "{:?}", p);
        }
        for s in &t.switch_ports {
            let (node, _) = fabric.peer(s.port).unwrap();
            prop_assert_ne!(fabric.node(node).kind, NodeKind::Switch);
            let peer = fabric.port(s.port).remote.unwrap();
            let ca = t.get(peer).unwrap();
            for k in &s.keys {
                prop_assert!(ca.keys.contains(k));
                prop_assert!(k.is_full() || !s.keys.contains(&PKey(k.0 | 0x8000)));
            }
        }
    }
}
