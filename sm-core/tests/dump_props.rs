//! The forwarding-table readers never panic, whatever they are fed, and what the writers
//! print reads back to the same tables.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use sm_core::dump::{self, IbrouteOptions, LftFormat, Lfts, NO_ROUTE, SwitchLft};
use sm_core::fabric::Fabric;
use sm_core::read_topology;
use sm_mad::{Guid, Lid};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/dumps")
        .join(name)
}

/// Every way of reading `text`, and when one succeeds, checking and writing the result.
fn exercise(text: &str, f: &Fabric) {
    let name = Path::new("fuzz.dump");
    let _ = dump::detect_format(text);
    for r in [
        dump::read_lfts_str(text, name),
        dump::read_lfts_as(text, name, LftFormat::OpenSm),
        dump::read_lfts_as(text, name, LftFormat::Ibroute),
    ] {
        match r {
            Ok(l) => {
                let _ = l.check_against(f);
                let mut out = Vec::new();
                dump::write_opensm_lfts(&l, f, &mut out).unwrap();
                dump::write_ibroute(&l, f, IbrouteOptions::default(), &mut out).unwrap();
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
}

fn num() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,3}",
        "0x[0-9a-f]{1,5}",
        "0x[0-9a-fA-F]{15,18}",
        "[0-9]{15,22}",
        "-?[0-9a-z]{0,3}",
    ]
}

fn entry() -> impl Strategy<Value = String> {
    (num(), num(), 0..9u8, num(), "[ -~]{0,8}").prop_map(|(lid, port, style, guid, desc)| {
        let dest = match style {
            0 => format!("# Channel Adapter portguid {guid}: '{desc}'"),
            1 => "# unknown node and type".to_string(),
            2 => format!(": (Switch portguid {guid}: '{desc}')"),
            3 => format!(": (path #{port} out of {lid}: portguid {guid})"),
            4 => format!(": (path #{port} - illegal port)"),
            5 => ": (illegal port)".to_string(),
            6 => ": (unknown node and type)".to_string(),
            7 => format!("# {desc} portguid {guid}"),
            _ => String::new(),
        };
        format!("{lid} {port} {dest}")
    })
}

fn line() -> impl Strategy<Value = String> {
    let header = (num(), num(), num(), num(), "[ -~]{0,8}", 0..4u8).prop_map(
        |(a, b, lid, guid, desc, style)| {
            let who = match style {
                0 => format!("Lid {lid}"),
                1 => format!("Lid {lid} Gid fe80::1"),
                2 => format!("DR path slid 65535; dlid 65535; 0,{lid}"),
                _ => lid,
            };
            let d = if style % 2 == 0 {
                format!("'{desc}'")
            } else {
                desc
            };
            format!("Unicast lids [{a}-{b}] of switch {who} guid {guid} ({d}):")
        },
    );
    prop_oneof![
        Just(String::new()),
        header,
        entry(),
        entry().prop_map(|e| format!("0x{e}")),
        (num(), "(valid )?").prop_map(|(n, v)| format!("{n} {v}lids dumped ")),
        Just("  Lid  Out   Destination".to_string()),
        Just("       Port     Info ".to_string()),
        Just("Multicast mlids [0xc000-0xc001] of switch Lid 1 guid 0x1 (s):".to_string()),
        "ibwarn: .{0,10}",
        "#.{0,10}",
        ".{0,40}",
    ]
}

/// A line-level edit of a real file.
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize),
    Duplicate(usize),
    Swap(usize, usize),
    Cut(usize, usize),
    Insert(usize, String),
    Byte(usize, usize, char),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Duplicate),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Cut(a, b)),
        (any::<usize>(), line()).prop_map(|(a, l)| Edit::Insert(a, l)),
        (any::<usize>(), any::<usize>(), any::<char>()).prop_map(|(a, b, c)| Edit::Byte(a, b, c)),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    for e in edits {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match e {
            Edit::Delete(i) => {
                lines.remove(i % n);
            }
            Edit::Duplicate(i) => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            Edit::Swap(a, b) => lines.swap(a % n, b % n),
            Edit::Cut(i, at) => {
                let l = &mut lines[i % n];
                let cut = l
                    .char_indices()
                    .map(|(k, _)| k)
                    .nth(at % (l.chars().count() + 1));
                l.truncate(cut.unwrap_or(l.len()));
            }
            Edit::Insert(i, l) => lines.insert(i % (n + 1), l.clone()),
            Edit::Byte(i, at, c) => {
                let l = &mut lines[i % n];
                let k = l
                    .char_indices()
                    .map(|(k, _)| k)
                    .nth(at % (l.chars().count() + 1));
                l.insert(k.unwrap_or(l.len()), *c);
            }
        }
    }
    lines.join("\n")
}

fn fixtures() -> &'static [(String, Fabric)] {
    static FIXTURES: OnceLock<Vec<(String, Fabric)>> = OnceLock::new();
    FIXTURES.get_or_init(load_fixtures)
}

fn load_fixtures() -> Vec<(String, Fabric)> {
    let mut v = Vec::new();
    for name in ["2sw2path4hca2port", "fattree-3leaf"] {
        let f = read_topology(&data(name).join("ibnetdiscover.txt"))
            .unwrap()
            .fabric;
        for file in [
            "opensm-lfts.dump",
            "ibroute.txt",
            "ibroute-all.txt",
            "ibroute-brief.txt",
        ] {
            v.push((
                std::fs::read_to_string(data(name).join(file)).unwrap(),
                f.clone(),
            ));
        }
    }
    v
}

fn tables() -> impl Strategy<Value = Vec<SwitchLft>> {
    let port = prop_oneof![0..=36u8, Just(NO_ROUTE), any::<u8>()];
    let table = (
        any::<u64>(),
        any::<u16>(),
        "[ -~]{0,16}",
        proptest::collection::vec(port, 1..200),
    )
        .prop_map(|(g, lid, desc, ports)| SwitchLft {
            guid: Guid(g),
            lid: Lid(lid),
            desc,
            ports,
        });
    proptest::collection::vec(table, 0..4).prop_map(|mut v| {
        v.sort_by_key(|s| s.guid);
        v.dedup_by_key(|s| s.guid);
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        exercise(&String::from_utf8_lossy(&bytes), &Fabric::new());
    }

    #[test]
    fn structured_garbage_never_panics(lines in proptest::collection::vec(line(), 0..30)) {
        exercise(&lines.join("\n"), &Fabric::new());
    }

    #[test]
    fn edited_real_files_never_panic(which in any::<usize>(), edits in proptest::collection::vec(edit(), 1..6)) {
        let fx = fixtures();
        let (text, f) = &fx[which % fx.len()];
        exercise(&apply(text, &edits), f);
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn written_tables_read_back(switches in tables()) {
        let f = Fabric::new();
        let l = Lfts { switches, destinations: Vec::new() };
        let name = Path::new("written");

        let mut out = Vec::new();
        dump::write_opensm_lfts(&l, &f, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let back = dump::read_lfts_str(&text, name).unwrap();
        // OpenSM never prints LID 0.
        let mut want = l.clone();
        for s in &mut want.switches {
            s.ports[0] = NO_ROUTE;
        }
        prop_assert_eq!(&back.switches, &want.switches, "{}", text);

        // ibroute skips the top LID when it is a multiple of 64 (and prints nothing for
        // a table whose top is 0).
        for s in &mut want.switches {
            let top = s.ports.len() - 1;
            if top % 64 == 0 {
                s.ports[top] = NO_ROUTE;
            }
            s.ports[0] = l.switch(s.guid).unwrap().ports[0];
            if top == 0 {
                s.ports[0] = NO_ROUTE;
            }
        }
        for opts in [
            IbrouteOptions::default(),
            IbrouteOptions { all: true, brief: false },
            IbrouteOptions { all: false, brief: true },
        ] {
            let mut out = Vec::new();
            dump::write_ibroute(&l, &f, opts, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            let back = dump::read_lfts_str(&text, name).unwrap();
            prop_assert_eq!(&back.switches, &want.switches, "{:?}\n{}", opts, text);
        }
    }
}
