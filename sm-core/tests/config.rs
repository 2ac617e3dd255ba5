//! The shipped example configuration documents every option with its default.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use sm_core::config::Config;

fn example() -> (PathBuf, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ibsm.example.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

#[test]
fn example_is_the_defaults() {
    let (path, text) = example();
    let c = Config::from_toml_str(&text, &path).unwrap();
    assert_eq!(c, Config::default());
}

/// Every key the defaults serialise to is set in the example, and every optional one
/// (unset by default) appears there commented out.
#[test]
fn example_shows_every_option() {
    let (_, text) = example();
    let set: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(" = ").map(|(k, _)| k))
        .collect();
    let table = toml::Table::try_from(Config::default()).unwrap();
    let mut leaves = Vec::new();
    fn walk(prefix: &str, t: &toml::Table, out: &mut Vec<String>) {
        for (k, v) in t {
            match v {
                toml::Value::Table(sub) => walk(&format!("{prefix}{k}."), sub, out),
                _ => out.push(format!("{prefix}{k}")),
            }
        }
    }
    walk("", &table, &mut leaves);
    for key in &leaves {
        let leaf = key.rsplit('.').next().unwrap();
        assert!(set.contains(&leaf), "{key} is not set in ibsm.example.toml");
    }
    assert_eq!(leaves.len(), set.len(), "keys set in the example: {set:?}");
    for optional in [
        "port_guid",
        "roots_file",
        "compute_nodes_file",
        "file",
        "text",
        "[qos.ca]",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("# {optional}"))),
            "{optional} is not shown commented out"
        );
    }
}

/// The commented-out examples are valid too.
#[test]
fn commented_examples_parse() {
    let (path, text) = example();
    let code = |l: &str| {
        let l = l.strip_prefix("# ").unwrap_or("");
        let key = l.split_once(" = ").map(|(k, _)| k).unwrap_or("");
        let is_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_');
        is_key || l.starts_with('[') || l.starts_with("\"\"\"") || l.contains(" : ")
    };
    let uncommented: String = text
        .lines()
        .filter(|l| *l != "# file = \"/etc/ibsm/partitions.conf\"")
        .map(|l| if code(l) { &l[2..] } else { l })
        .map(|l| format!("{l}\n"))
        .collect();
    let c = Config::from_toml_str(&uncommented, &path).unwrap();
    assert_eq!(c.sm.port_guid, Some(0x0002_c903_0000_1234));
    assert_eq!(c.qos.ca.max_vls, Some(8));
    assert!(c.routing.roots_file.is_some() && c.log.file.is_some());
    let p = c.partitions.load(&path).unwrap();
    assert_eq!(p.partitions.len(), 2);
}

#[test]
fn load_reports_a_missing_file() {
    let e = Config::load(Path::new("/nonexistent/ibsm.toml")).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e.to_string().contains("cannot read file"), "{e}");
}
