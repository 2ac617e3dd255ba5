//! `ibsm route` and `ibsm analyze` as a user runs them: on generated fabrics, and on the
//! tables OpenSM computed for ibsim fabrics (`sm-core/tests/data/dumps/`, see its README).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn ibsm(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ibsm"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Runs `ibsm` expecting success and one JSON object on stdout.
fn json(args: &[&str]) -> Value {
    let (ok, out, err) = ibsm(args);
    assert!(ok, "ibsm {args:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("ibsm {args:?}: not JSON ({e}): {out}"))
}

/// Runs `ibsm` expecting a JSON report on stdout; returns the exit status with it, which
/// must be 0 for VALID tables and 2 for INVALID ones.
fn verdict(args: &[&str]) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_ibsm"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let j: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("ibsm {args:?}: not JSON ({e}); stderr: {err}"));
    let code = out.status.code().unwrap();
    match j["valid"].as_bool() {
        Some(true) => assert_eq!(code, 0, "VALID: {err}"),
        Some(false) => {
            assert_eq!(code, 2, "INVALID: {err}");
            assert!(err.contains("INVALID"), "{err}");
        }
        None => panic!("no verdict: {j}"),
    }
    (code, j)
}

/// Runs `ibsm` expecting failure; returns stderr.
fn fails(args: &[&str]) -> String {
    let (ok, out, err) = ibsm(args);
    assert!(!ok, "ibsm {args:?} should fail; stdout: {out}");
    assert!(out.is_empty(), "nothing on stdout when failing: {out}");
    err
}

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ibsm-route-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `ibsm gen ARGS -o DIR/NAME`.
fn generated(dir: &Path, name: &str, args: &str) -> PathBuf {
    let path = dir.join(name);
    let mut argv: Vec<&str> = vec!["gen"];
    argv.extend(args.split_whitespace());
    argv.extend(["-o", s(&path)]);
    let (ok, _, err) = ibsm(&argv);
    assert!(ok, "{err}");
    path
}

fn dumps(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sm-core/tests/data/dumps")
        .join(name)
}

/// The keys every report carries, with values that make sense together.
fn sane(j: &Value) {
    for key in [
        "topology",
        "engine",
        "engine_used",
        "fallbacks",
        "nodes",
        "switches",
        "cas",
        "lids",
        "lid_source",
        "valid",
        "unreachable_pairs",
        "forwarding_loops",
        "credit_loops",
        "hops",
        "max_link_load",
        "mean_link_load",
        "route_ms",
        "validation",
        "metrics",
    ] {
        assert!(j.get(key).is_some(), "missing key {key} in {j}");
    }
    for key in ["min", "max", "mean"] {
        assert!(j["hops"][key].is_number(), "hops.{key}");
    }
    let (min, max, mean) = (
        j["hops"]["min"].as_f64().unwrap(),
        j["hops"]["max"].as_f64().unwrap(),
        j["hops"]["mean"].as_f64().unwrap(),
    );
    assert!(min <= mean && mean <= max, "{}", j["hops"]);
    assert!(j["max_link_load"].as_f64().unwrap() >= j["mean_link_load"].as_f64().unwrap());
    assert_eq!(
        j["valid"],
        j["validation"]["unreachable_pairs"] == 0 && j["credit_loops"] == 0 && j["stale_lids"] == 0
    );
    assert_eq!(j["switches"], j["validation"]["switches"]);
    assert_eq!(j["unreachable_pairs"], j["validation"]["unreachable_pairs"]);
    assert_eq!(j["credit_loops"], j["validation"]["credit_loops"]);
    assert_eq!(
        j["max_link_load"],
        j["metrics"]["all_to_all"]["switch_links"]["max"]
    );
}

/// Valid, every pair reachable, no loop of either kind.
fn clean(j: &Value) {
    sane(j);
    assert_eq!(j["valid"], true, "{}", j["validation"]);
    assert_eq!(j["unreachable_pairs"], 0);
    assert_eq!(j["forwarding_loops"], 0);
    assert_eq!(j["credit_loops"], 0, "{}", j["validation"]);
}

#[test]
fn every_engine_routes_a_fat_tree() {
    let dir = scratch("engines");
    let net = generated(&dir, "ft.net", "fat-tree --levels 2 --radix 12");
    for engine in ["minhop", "updn", "ftree"] {
        let j = json(&[
            "route",
            s(&net),
            "--engine",
            engine,
            "--report",
            "json",
            "--shifts",
            "16",
        ]);
        clean(&j);
        assert_eq!(j["engine"], engine);
        assert_eq!(j["engine_used"], engine);
        assert_eq!(j["fallbacks"], serde_json::json!([]));
        assert_eq!(
            (j["switches"].as_u64(), j["cas"].as_u64()),
            (Some(18), Some(72))
        );
        // 18 switch LIDs and 72 CA LIDs, assigned since the generated file has none.
        assert_eq!(j["lids"], 90);
        assert_eq!(j["lid_source"], "assigned");
        assert!(j["route_ms"].as_f64().unwrap() >= 0.0);
        assert_eq!(j["hops"]["min"], 2);
        assert_eq!(j["hops"]["max"], 4);
        if engine == "ftree" {
            // A full 2-level tree: ftree spreads destinations evenly over the spines.
            assert_eq!(j["metrics"]["all_to_all"]["switch_links"]["stddev"], 0.0);
            assert_eq!(j["worst_shift_load"], 1);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_torus_is_found_and_the_report_says_how_it_was_routed() {
    let dir = scratch("grid");
    let net = generated(&dir, "torus.net", "torus --dims 5x6 --hosts 1");
    let j = json(&["route", s(&net), "--report", "json"]);
    clean(&j);
    assert_eq!(j["engine_used"], "layered");
    assert_eq!(
        j["engine_method"],
        "grid 5-ring x 6-ring: dimension order on 4 layer(s)"
    );
    assert_eq!(j["vls_used"], 4);
    assert_eq!(j["credit_loops"], 0);
    assert_eq!(j["non_minimal_pairs"], 0);
    // A fat-tree is no grid: nothing to say.
    let tree = generated(&dir, "tree.net", "fat-tree --levels 2 --radix 8");
    let j = json(&["route", s(&tree), "--engine", "layered", "--report", "json"]);
    assert!(j.get("engine_method").is_none(), "{j}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_chain_falls_back_and_says_why() {
    let dir = scratch("chain");
    let net = generated(&dir, "torus.net", "torus --dims 3x3 --hosts 1");
    let j = json(&[
        "route",
        s(&net),
        "--engine",
        "ftree,updn",
        "--report",
        "json",
    ]);
    clean(&j);
    assert_eq!(j["engine"], "ftree,updn");
    assert_eq!(j["engine_used"], "updn");
    let f = j["fallbacks"].as_array().unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["engine"], "ftree");
    assert!(!f[0]["reason"].as_str().unwrap().is_empty());
    // The text report names the engine that declined.
    let (ok, out, err) = ibsm(&["route", s(&net), "--engine", "ftree,updn"]);
    assert!(ok, "{err}");
    assert!(out.contains("declined") && out.contains("ftree:"), "{out}");

    let err = fails(&["route", s(&net), "--engine", "ftree"]);
    assert!(err.contains("ftree"), "{err}");
    let err = fails(&["route", s(&net), "--engine", "lash"]);
    assert!(err.contains("unknown routing engine \"lash\""), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn opensm_tables_analyse_valid() {
    for name in [
        "2sw2path4hca2port",
        "2sw2path4hca",
        "net",
        "fattree-3leaf",
        "top64",
    ] {
        let topo = dumps(name).join("ibnetdiscover.txt");
        let lfts = dumps(name).join("opensm-lfts.dump");
        let j = json(&[
            "analyze",
            "--topo",
            s(&topo),
            "--lfts",
            s(&lfts),
            "--report",
            "json",
        ]);
        clean(&j);
        assert_eq!(j["engine"], "external", "{name}");
        assert_eq!(j["engine_used"], s(&lfts));
        assert_eq!(j["route_ms"], Value::Null);
        assert_eq!(j["lid_source"], "topology");
        assert_eq!(j["tables"]["format"], "opensm");
        assert_eq!(j["non_minimal_pairs"], 0, "{name}");

        // ibroute read the same tables back from the switches.
        let ib = dumps(name).join("ibroute.txt");
        let (_, k) = verdict(&[
            "analyze",
            "--topo",
            s(&topo),
            "--lfts",
            s(&ib),
            "--report",
            "json",
        ]);
        sane(&k);
        assert_eq!(k["tables"]["format"], "ibroute");
        if name == "top64" {
            // ibroute never prints a top LID that is a multiple of 64 (see the README).
            assert_eq!(k["valid"], false);
            assert!(k["unreachable_pairs"].as_u64().unwrap() > 0);
        } else {
            assert_eq!(k["validation"], j["validation"], "{name}");
            assert_eq!(k["max_link_load"], j["max_link_load"], "{name}");
        }
    }
}

#[test]
fn lids_from_guid2lid_or_from_the_tables_dump() {
    // The ibsim net file has no LIDs; OpenSM's guid2lid of the same run gives them.
    let net = dumps("net.fattree-3leaf");
    let lfts = dumps("fattree-3leaf").join("opensm-lfts.dump");
    // ibroute's brief output names no port GUID: nothing to take LIDs from.
    let brief = dumps("fattree-3leaf").join("ibroute-brief.txt");
    let err = fails(&["analyze", "--topo", s(&net), "--lfts", s(&brief)]);
    assert!(
        err.contains("have no LID") && err.contains("--guid2lid"),
        "{err}"
    );
    let j = json(&[
        "analyze",
        "--topo",
        s(&net),
        "--guid2lid",
        s(&dumps("fattree-3leaf").join("guid2lid")),
        "--lfts",
        s(&lfts),
        "--report",
        "json",
    ]);
    clean(&j);
    assert_eq!(j["lid_source"], "guid2lid");
    assert_eq!(j["lmc"], 1);
    assert_eq!(j["lids"], 19);
    // opensm-lfts.dump names the port behind every LID: the same LIDs, the same verdict.
    let k = json(&[
        "analyze",
        "--topo",
        s(&net),
        "--lfts",
        s(&lfts),
        "--report",
        "json",
    ]);
    clean(&k);
    assert_eq!(k["lid_source"], "forwarding tables");
    assert_eq!(k["lmc"], 1);
    assert_eq!(k["lids"], 19);
    assert_eq!(k["validation"], j["validation"]);
    assert_eq!(k["max_link_load"], j["max_link_load"]);
}

#[test]
fn tables_of_another_fabric_are_refused() {
    let topo = dumps("net").join("ibnetdiscover.txt");
    let lfts = dumps("fattree-3leaf").join("opensm-lfts.dump");
    let err = fails(&["analyze", "--topo", s(&topo), "--lfts", s(&lfts)]);
    assert!(err.contains("does not describe the fabric of"), "{err}");
    assert!(err.contains("no such node in the topology"), "{err}");
    assert!(err.contains("switch 0x0000000000200002"), "{err}");
    // Same fabric, but the LIDs of another run (here: the tables' LID 1 is another port).
    let other = dumps("2sw2path4hca").join("ibnetdiscover.txt");
    let mine = dumps("2sw2path4hca2port").join("opensm-lfts.dump");
    let err = fails(&["analyze", "--topo", s(&other), "--lfts", s(&mine)]);
    assert!(err.contains("does not describe"), "{err}");
    // Not a table at all, and a file that is not there.
    let err = fails(&["analyze", "--topo", s(&topo), "--lfts", s(&topo)]);
    assert!(err.contains("no forwarding table"), "{err}");
    let err = fails(&[
        "analyze",
        "--topo",
        s(&topo),
        "--lfts",
        "/nonexistent/x.dump",
    ]);
    assert!(err.contains("/nonexistent/x.dump"), "{err}");
}

#[test]
fn route_then_analyze_gives_the_same_figures() {
    let dir = scratch("roundtrip");
    let net = generated(&dir, "ft.net", "fat-tree --levels 3 --radix 8 --pods 2");
    for (engine, format) in [
        ("updn", "opensm"),
        ("ftree", "ibroute"),
        ("minhop", "opensm"),
    ] {
        let lfts = dir.join(format!("{engine}.lfts"));
        let g2l = dir.join(format!("{engine}.guid2lid"));
        let r = json(&[
            "route",
            s(&net),
            "--engine",
            engine,
            "--lmc",
            "1",
            "--lfts-out",
            s(&lfts),
            "--lfts-format",
            format,
            "--guid2lid-out",
            s(&g2l),
            "--report",
            "json",
        ]);
        clean(&r);
        assert_eq!(r["lmc"], 1);
        assert_eq!(r["outputs"]["lfts"], s(&lfts));
        let a = json(&[
            "analyze",
            "--topo",
            s(&net),
            "--guid2lid",
            s(&g2l),
            "--lfts",
            s(&lfts),
            "--report",
            "json",
        ]);
        clean(&a);
        assert_eq!(a["tables"]["format"], format);
        for key in [
            "lids",
            "hops",
            "max_link_load",
            "mean_link_load",
            "worst_shift_load",
            "ebb",
            "credit_loops",
        ] {
            assert_eq!(a[key], r[key], "{engine}: {key}");
        }
        let (mut vr, mut va) = (r["validation"].clone(), a["validation"].clone());
        vr["engine"] = Value::Null;
        va["engine"] = Value::Null;
        assert_eq!(va, vr, "{engine}");
        let (mut mr, mut ma) = (r["metrics"].clone(), a["metrics"].clone());
        mr["engine"] = Value::Null;
        ma["engine"] = Value::Null;
        assert_eq!(ma, mr, "{engine}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lids_in_the_topology_are_kept() {
    let topo = dumps("fattree-3leaf").join("ibnetdiscover.txt");
    let j = json(&["route", s(&topo), "--engine", "updn", "--report", "json"]);
    clean(&j);
    assert_eq!(j["lid_source"], "topology");
    assert_eq!(j["lmc"], 1);
    assert_eq!(j["lids"], 19);
    let err = fails(&["route", s(&topo), "--engine", "updn", "--lmc", "0"]);
    assert!(err.contains("--assign-lids"), "{err}");
    let j = json(&[
        "route",
        s(&topo),
        "--engine",
        "updn",
        "--lmc",
        "0",
        "--assign-lids",
        "--report",
        "json",
    ]);
    clean(&j);
    assert_eq!(j["lid_source"], "assigned");
    assert_eq!(j["lids"], 12);
}

#[test]
fn adaptive_hints_are_written() {
    let dir = scratch("ar");
    let net = generated(&dir, "ft.net", "fat-tree --levels 2 --radix 8");
    let text = dir.join("ar.txt");
    let js = dir.join("ar.json");
    for out in [&text, &js] {
        let j = json(&[
            "route",
            s(&net),
            "--engine",
            "updn",
            "--ar-out",
            s(out),
            "--report",
            "json",
        ]);
        clean(&j);
        assert!(j["adaptive"]["entries_with_alternatives"].as_u64().unwrap() > 0);
        assert_eq!(j["outputs"]["ar"], s(out));
    }
    let t = std::fs::read_to_string(&text).unwrap();
    assert!(
        t.starts_with("# ibsm adaptive-routing hints, engine updn"),
        "{t}"
    );
    assert!(t.contains("group 0:"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    assert_eq!(v["engine"], "updn");
    assert!(!v["switches"].as_array().unwrap().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn text_report_is_aligned() {
    let topo = dumps("2sw2path4hca").join("ibnetdiscover.txt");
    let (ok, out, err) = ibsm(&["route", s(&topo), "--engine", "minhop"]);
    assert!(ok, "{err}");
    for label in [
        "topology",
        "engine",
        "verdict",
        "credit loops",
        "all-to-all load",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} line in\n{out}"));
        // Values start in one column, after the padded label.
        assert!(line.len() > 21, "{line}");
        assert_eq!(
            &line[label.len()..21],
            &" ".repeat(21 - label.len()),
            "{line}"
        );
        assert_ne!(&line[21..22], " ", "{line}");
    }
    assert!(out.contains("VALID"), "{out}");
}

#[test]
fn files_that_cannot_be_read_are_named() {
    let err = fails(&["route", "/nonexistent/fabric.net", "--engine", "minhop"]);
    assert!(err.contains("/nonexistent/fabric.net"), "{err}");
    let topo = dumps("2sw2path4hca").join("ibnetdiscover.txt");
    let err = fails(&[
        "route",
        s(&topo),
        "--engine",
        "updn",
        "--roots",
        "/nonexistent/roots.txt",
    ]);
    assert!(err.contains("/nonexistent/roots.txt"), "{err}");
    let err = fails(&[
        "route",
        s(&topo),
        "--engine",
        "minhop",
        "--lfts-out",
        "/nonexistent/dir/out.dump",
    ]);
    assert!(err.contains("/nonexistent/dir/out.dump"), "{err}");
}

// ---------------------------------------------------------------------------------------
// The picture.

/// Checks that `text` is well-formed XML with an `svg` root: every tag closed in order,
/// attributes quoted, entities known. Enough for what the writer produces.
fn well_formed(text: &str) -> Result<usize, String> {
    let body = text
        .strip_prefix(r#"<?xml version="1.0" encoding="UTF-8"?>"#)
        .ok_or("no XML declaration")?;
    let mut stack: Vec<String> = Vec::new();
    let mut elements = 0;
    let mut rest = body;
    let mut root_seen = false;
    let check_text = |t: &str| -> Result<(), String> {
        let mut r = t;
        while let Some(i) = r.find('&') {
            let end = r[i..].find(';').ok_or(format!("bare & in {t:?}"))?;
            let ent = &r[i + 1..i + end];
            if !["amp", "lt", "gt", "quot", "apos"].contains(&ent) {
                return Err(format!("unknown entity &{ent};"));
            }
            r = &r[i + end + 1..];
        }
        Ok(())
    };
    while let Some(open) = rest.find('<') {
        check_text(&rest[..open])?;
        if stack.is_empty() && root_seen && !rest[..open].trim().is_empty() {
            return Err("text after the root element".into());
        }
        let close = rest[open..].find('>').ok_or("unclosed tag")? + open;
        let tag = &rest[open + 1..close];
        rest = &rest[close + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let top = stack
                .pop()
                .ok_or(format!("</{name}> without opening tag"))?;
            if top != name.trim() {
                return Err(format!("</{name}> closes <{top}>"));
            }
            continue;
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.trim_end_matches('/');
        let name: String = tag.chars().take_while(|c| !c.is_whitespace()).collect();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == ':' || c == '-')
        {
            return Err(format!("bad tag name in <{tag}>"));
        }
        if stack.is_empty() {
            if root_seen {
                return Err("two root elements".into());
            }
            if name != "svg" {
                return Err(format!("root is <{name}>"));
            }
            root_seen = true;
        }
        // Attributes: name="value" pairs.
        let mut attrs = &tag[name.len()..];
        loop {
            attrs = attrs.trim_start();
            if attrs.is_empty() {
                break;
            }
            let eq = attrs
                .find('=')
                .ok_or(format!("attribute without value in <{tag}>"))?;
            let aname = &attrs[..eq];
            if aname.is_empty() || aname.contains(char::is_whitespace) {
                return Err(format!("bad attribute name in <{tag}>"));
            }
            let v = attrs[eq + 1..]
                .strip_prefix('"')
                .ok_or(format!("unquoted value in <{tag}>"))?;
            let end = v.find('"').ok_or("unterminated value")?;
            check_text(&v[..end])?;
            if v[..end].contains('<') {
                return Err("< in attribute value".into());
            }
            attrs = &v[end + 1..];
        }
        elements += 1;
        if !self_closing {
            stack.push(name);
        }
    }
    if !stack.is_empty() {
        return Err(format!("unclosed elements: {stack:?}"));
    }
    if !root_seen {
        return Err("no root element".into());
    }
    Ok(elements)
}

#[test]
fn the_checker_catches_broken_xml() {
    let decl = r#"<?xml version="1.0" encoding="UTF-8"?>"#;
    assert!(well_formed(&format!("{decl}<svg><g></g></svg>")).is_ok());
    for bad in [
        "<svg><g></svg>",
        "<svg><g x=1/></svg>",
        "<svg>a & b</svg>",
        "<svg></svg><svg></svg>",
        "<svg><g></g>",
        "<html></html>",
    ] {
        assert!(well_formed(&format!("{decl}{bad}")).is_err(), "{bad}");
    }
}

#[test]
fn pictures_are_well_formed() {
    let dir = scratch("svg");
    let tree = generated(&dir, "ft.net", "fat-tree --levels 2 --radix 12");
    let torus = generated(&dir, "torus.net", "torus --dims 4x4x2 --hosts 2");
    let random = generated(
        &dir,
        "rnd.net",
        "random --switches 20 --radix 8 --hosts 2 --seed 3",
    );
    let big = generated(&dir, "ft3.net", "fat-tree --levels 3 --radix 16 --pods 8");
    for (net, engine, note) in [
        (&tree, "ftree", None),
        (&torus, "updn", Some("coordinates")),
        (&random, "minhop", Some("fabric order")),
        // 512 CAs: too many to draw one by one.
        (&big, "minhop", Some("one block per switch")),
    ] {
        let svg = dir.join("out.svg");
        // minhop on the random fabric has credit loops: INVALID, with its picture all the same.
        let (_, j) = verdict(&[
            "route",
            s(net),
            "--engine",
            engine,
            "--svg",
            s(&svg),
            "--report",
            "json",
        ]);
        assert_eq!(j["outputs"]["svg"], s(&svg));
        match note {
            Some(n) => assert!(
                j["outputs"]["svg_note"].as_str().unwrap().contains(n),
                "{}",
                j["outputs"]
            ),
            None => assert!(j["outputs"].get("svg_note").is_none()),
        }
        let text = std::fs::read_to_string(&svg).unwrap();
        let n = well_formed(&text).unwrap_or_else(|e| panic!("{}: {e}", net.display()));
        let links = j["metrics"]["all_to_all"]["switch_links"]["links"]
            .as_u64()
            .unwrap();
        // At least a line per cable (two directions each) and a box per switch.
        assert!(
            n as u64 >= links / 2 + j["switches"].as_u64().unwrap(),
            "{n}"
        );
        assert!(text.contains("linearGradient"), "legend");
        assert!(text.contains(">mean "), "the legend marks the mean load");
        // The verdict is in the picture's title.
        let verdict = if j["valid"] == true {
            ": VALID,"
        } else {
            ": INVALID,"
        };
        assert!(text.contains(verdict), "{verdict} in the title");
        if engine == "ftree" {
            // Balanced: no link at the hot end of the scale.
            assert!(
                !text.contains("stroke=\"#b2182b\""),
                "a balanced tree drawn red"
            );
        }
    }
    // analyze draws too.
    let topo = dumps("fattree-3leaf").join("ibnetdiscover.txt");
    let svg = dir.join("analyze.svg");
    let (ok, _, err) = ibsm(&[
        "analyze",
        "--topo",
        s(&topo),
        "--lfts",
        s(&dumps("fattree-3leaf").join("opensm-lfts.dump")),
        "--svg",
        s(&svg),
    ]);
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    well_formed(&text).unwrap();
    assert!(text.contains("Leaf1"), "switch names in tooltips");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn roots_and_compute_nodes_files_steer_the_engines() {
    let dir = scratch("guid-files");
    let topo = generated(&dir, "ft.net", "fat-tree --levels 2 --radix 4");
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let no_switch = file("no-switch", "0x0000000000000009\n");
    // One compute node on every leaf.
    let cns = file(
        "cns",
        "0x0001000000000001\n0x0001000000000201\n0x0001000000000401\n0x0001000000000601\n",
    );
    let leaf = file("leaf", "0x0002000100000000\n");
    let used = |args: &[&str]| {
        let mut argv = vec!["route", s(&topo), "--report", "json"];
        argv.extend(args);
        json(&argv)["engine_used"].as_str().unwrap().to_string()
    };
    assert_eq!(used(&["-e", "updn,minhop"]), "updn");
    assert_eq!(
        used(&["-e", "updn,minhop", "--roots", s(&no_switch)]),
        "minhop"
    );
    assert_eq!(
        used(&["-e", "ftree,minhop", "--compute-nodes", s(&cns)]),
        "ftree"
    );
    assert_eq!(
        used(&["-e", "ftree,minhop", "--compute-nodes", s(&leaf)]),
        "minhop"
    );
    assert_eq!(used(&["-e", "ftree,minhop", "--cn", s(&leaf)]), "minhop");
    let empty = file("empty", "# none yet\n");
    let err = fails(&["route", s(&topo), "-e", "updn", "--roots", s(&empty)]);
    assert!(
        err.contains("--roots") && err.contains("lists no GUID"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn exit_status_says_valid_invalid_or_error() {
    let dir = scratch("exit");
    let random = generated(
        &dir,
        "rnd.net",
        "random --switches 20 --radix 8 --hosts 2 --seed 3",
    );
    // minhop is not deadlock-free: credit loops on this fabric.
    let (code, j) = verdict(&["route", s(&random), "-e", "minhop", "--report", "json"]);
    assert_eq!((code, j["credit_loops"].as_u64().unwrap() > 0), (2, true));
    let (code, _) = verdict(&["route", s(&random), "-e", "updn", "--report", "json"]);
    assert_eq!(code, 0);
    // ibroute never prints a top LID that is a multiple of 64 (see the dumps' README).
    let top64 = dumps("top64");
    let (code, j) = verdict(&[
        "analyze",
        "--topo",
        s(&top64.join("ibnetdiscover.txt")),
        "--lfts",
        s(&top64.join("ibroute.txt")),
        "--report",
        "json",
    ]);
    assert_eq!(
        (code, j["unreachable_pairs"].as_u64().unwrap() > 0),
        (2, true)
    );
    // The text report is printed too before the INVALID exit.
    let out = Command::new(env!("CARGO_BIN_EXE_ibsm"))
        .args(["route", s(&random), "-e", "minhop"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("INVALID"));
    // Errors are 1.
    let out = Command::new(env!("CARGO_BIN_EXE_ibsm"))
        .args([
            "analyze",
            "--topo",
            "/nonexistent.net",
            "--lfts",
            "/nonexistent.dump",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ibsm route --sm-lid` makes the tables `ibsm run` programs, entry for entry: the SM
/// spreads its own LID's routes, and only told of that LID does the offline route agree.
#[test]
fn with_the_sms_lid_the_offline_tables_are_the_ones_the_sm_programs() {
    let dir = scratch("sm-lid");
    let net = generated(&dir, "ft.net", "fat-tree --levels 3 --radix 8 --pods 4");
    let dumps = dir.join("dumps");
    let (ok, _, err) = ibsm(&[
        "run",
        "--sim",
        s(&net),
        "--routing",
        "minhop",
        "--once",
        "--no-check",
        "--dump-dir",
        s(&dumps),
    ]);
    assert!(ok, "{err}");
    let by_guid = |path: &Path| {
        sm_core::dump::read_lfts(path)
            .unwrap()
            .switches
            .into_iter()
            .map(|t| (t.guid, t.ports))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let programmed = by_guid(&dumps.join("opensm-lfts.dump"));
    // The SM is the first host; its LID is in the SM's guid2lid.
    let g2l = std::fs::read_to_string(dumps.join("guid2lid")).unwrap();
    let sm_lid = u16::from_str_radix(
        g2l.lines()
            .next()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let route = |extra: &[&str], out: &str| {
        let out = dir.join(out);
        let mut argv = vec![
            "route",
            s(&net),
            "--engine",
            "minhop",
            "--lfts-out",
            s(&out),
        ];
        argv.extend(extra);
        let (ok, _, err) = ibsm(&argv);
        assert!(ok, "{err}");
        by_guid(&out)
    };
    let lid = sm_lid.to_string();
    assert_eq!(route(&["--sm-lid", &lid], "with.dump"), programmed);
    assert_ne!(route(&[], "without.dump"), programmed);
    let err = fails(&["route", s(&net), "--sm-lid", "9999"]);
    assert!(err.contains("--sm-lid 9999"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
