//! `ibsm decode` on captured MADs, as a user runs it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn vector(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sm-mad/tests/vectors")
        .join(name)
}

fn ibsm(args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ibsm"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(s) = stdin {
        child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn json_keys_are_spec_field_names() {
    let v = vector("dr_nodeinfo_switch.resp.mad");
    let (ok, out, err) = ibsm(&["decode", "--json", v.to_str().unwrap()], None);
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["mad"]["method"], "GetResp");
    assert_eq!(j["attribute_name"], "NodeInfo");
    let ni = &j["records"][0];
    assert_eq!(ni["attribute"], "NodeInfo");
    assert_eq!(ni["node_type"], "Switch");
    assert_eq!(ni["num_ports"], 8);
    assert!(ni["node_guid"].as_str().unwrap().starts_with("0x"));
    assert_eq!(j["smp"]["routing"], "directed");
}

#[test]
fn text_from_stdin_with_aligned_fields() {
    let text = std::fs::read_to_string(vector("dr_portinfo_hca_local.resp.mad")).unwrap();
    let (ok, out, err) = ibsm(&["decode"], Some(&text));
    assert!(ok, "{err}");
    assert!(out.contains("PortInfo"), "{out}");
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("port_state "))
        .unwrap();
    assert!(line.ends_with("Init"), "{line}");
    assert!(out.contains("attribute modifier    port 1"), "{out}");
}

#[test]
fn bad_hex_names_line_and_column() {
    let (ok, _, err) = ibsm(&["decode"], Some("0181 0101\n01x1\n"));
    assert!(!ok);
    assert!(err.contains("<stdin>:2:3"), "{err}");
    let (ok, _, err) = ibsm(&["decode"], Some("0201 0101"));
    assert!(!ok);
    assert!(err.contains("not a MAD"), "{err}");
}
