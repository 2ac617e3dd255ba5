//! P_Key tables from partitions files, compared with the tables OpenSM 3.3.23 programmed
//! for the same files on the same ibsim fabric (`tests/data/partitions/`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use sm_core::partitions::{
    Enforcement, PKeyTables, Partitions, TableOptions, pkey_tables, pkey_tables_with,
    write_pkey_tables,
};
use sm_core::read_topology;
use sm_mad::{Guid, PKey};

/// OpenSM ran on CA H1's first port.
const SM_PORT: Guid = Guid(0x100001);

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/partitions")
        .join(name)
}

fn keys(k: &[PKey]) -> String {
    k.iter().map(|k| format!(" {:#06x}", k.0)).collect()
}

/// Our tables in capture.sh's format.
fn lines(t: &PKeyTables) -> (BTreeSet<String>, BTreeSet<String>) {
    let end = t
        .end_ports
        .iter()
        .map(|p| format!("end {:#018x}:{}", p.guid.0, keys(&p.keys)))
        .collect();
    let sw = t
        .switch_ports
        .iter()
        .map(|p| format!("switch {:#018x} {}:{}", p.guid.0, p.num, keys(&p.keys)))
        .collect();
    (end, sw)
}

fn compare(case: &str, parts: &Partitions, opts: &TableOptions) {
    let fabric = read_topology(&data("net.pk")).unwrap().fabric;
    let ours = pkey_tables_with(parts, &fabric, SM_PORT, opts);
    assert!(
        ours.unknown_guids.is_empty(),
        "{case}: {:?}",
        ours.unknown_guids
    );
    let (end, sw) = lines(&ours);
    let text = std::fs::read_to_string(data(&format!("{case}.expected"))).unwrap();
    let theirs_end: BTreeSet<String> = text
        .lines()
        .filter(|l| l.starts_with("end "))
        .map(str::to_string)
        .collect();
    assert_eq!(end, theirs_end, "{case}: end port tables");
    // OpenSM leaves switch ports between switches alone (ibsim starts them at 0xffff).
    let theirs_sw: BTreeSet<String> = text
        .lines()
        .filter(|l| l.starts_with("switch ") && !l.ends_with(": 0xffff"))
        .map(str::to_string)
        .collect();
    let ours_sw: BTreeSet<String> = sw
        .into_iter()
        .filter(|l| !l.ends_with(": 0xffff"))
        .collect();
    assert_eq!(ours_sw, theirs_sw, "{case}: switch port tables");
    assert_eq!(ours.switch_ports.len(), 5, "{case}: one per CA port");
}

fn file_case(case: &str, opts: &TableOptions) {
    let parts = Partitions::read(&data(&format!("{case}.conf"))).unwrap();
    compare(case, &parts, opts);
}

#[test]
fn basic_matches_opensm() {
    file_case("basic", &TableOptions::default());
}

#[test]
fn features_match_opensm() {
    // Byte-swapped partition order, indx0, defmember, merged definitions, generated P_Key,
    // unnamed partition, "both" without allow_both_pkeys, multicast groups, overrides.
    file_case("features", &TableOptions::default());
}

#[test]
fn allow_both_pkeys_matches_opensm() {
    let opts = TableOptions {
        allow_both_pkeys: true,
        ..TableOptions::default()
    };
    file_case("allow-both", &opts);
}

#[test]
fn allow_both_pkeys_leaves_index_0_to_the_full_default_key() {
    let opts = TableOptions {
        allow_both_pkeys: true,
        ..TableOptions::default()
    };
    file_case("allow-both-limited", &opts);
}

#[test]
fn limited_default_matches_opensm() {
    // The file may demote even the SM's own port.
    file_case("limited-default", &TableOptions::default());
}

#[test]
fn no_file_matches_opensm() {
    compare("no-file", &Partitions::no_file(), &TableOptions::default());
}

#[test]
fn enforcement_off_gives_no_switch_tables() {
    let fabric = read_topology(&data("net.pk")).unwrap().fabric;
    let parts = Partitions::read(&data("basic.conf")).unwrap();
    let opts = TableOptions {
        enforcement: Enforcement::Off,
        ..TableOptions::default()
    };
    let t = pkey_tables_with(&parts, &fabric, SM_PORT, &opts);
    assert!(t.switch_ports.is_empty());
    assert_eq!(t.end_ports, pkey_tables(&parts, &fabric, SM_PORT).end_ports);
}

#[test]
fn shipped_example_files_parse() {
    for f in [
        "basic",
        "features",
        "allow-both",
        "allow-both-limited",
        "limited-default",
    ] {
        let p = Partitions::read(&data(&format!("{f}.conf"))).unwrap();
        assert!(!p.partitions.is_empty(), "{f}");
    }
    let f = Partitions::read(&data("features.conf")).unwrap();
    let mc = f.by_name("Mc").unwrap();
    assert_eq!(mc.mgroups.len(), 2);
    assert_eq!(
        mc.mgroups[0].mgid.to_string(),
        "ff12:401b:8500:0000:0000:0000:0000:0001"
    );
    assert_eq!(f.by_name("Gen").unwrap().pkey, PKey(1));
    let e = Partitions::read(&data("no-such-file.conf")).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e.to_string().contains("cannot read file"), "{e}");
}

#[test]
fn written_tables_list_every_port_and_its_keys() {
    let fabric = read_topology(&data("net.pk")).unwrap().fabric;
    let parts = Partitions::read(&data("basic.conf")).unwrap();
    let t = pkey_tables_with(&parts, &fabric, SM_PORT, &TableOptions::default());
    let mut out = Vec::new();
    write_pkey_tables(&t, &fabric, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("enforcement on switch ports facing CAs and routers: both\n"));
    let body: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(body.len(), t.end_ports.len() + t.switch_ports.len());
    for (p, l) in t.end_ports.iter().zip(&body) {
        assert!(
            l.contains(&format!(" port {} guid {:#018x} ", p.num, p.guid.0)),
            "{l}"
        );
        assert!(l.ends_with(&format!("\":{}", keys(&p.keys))), "{l}");
    }
    for (p, l) in t.switch_ports.iter().zip(&body[t.end_ports.len()..]) {
        assert!(l.starts_with("Switch ") && l.contains(&format!(" port {} enforcing ", p.num)));
        assert!(l.ends_with(&format!("\":{}", keys(&p.keys))), "{l}");
    }
    // Limited members show: basic.conf has some.
    assert!(
        body.iter()
            .any(|l| l.split(' ').any(|k| k.starts_with("0x0") && k != "0x0000"))
    );
}
