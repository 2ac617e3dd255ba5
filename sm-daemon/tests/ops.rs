//! What operators see, in the simulated fabric: the status, the fabric events a link going
//! down and back and a silent host make, the Prometheus metrics (their values against the
//! core's own counters, and the text format), and the status socket answering.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};

use sm_core::fabric::{Fabric, PortIdx};
use sm_core::generate::{GenSpec, generate};
use sm_daemon::core::{Event, Params};
use sm_daemon::ops::{Ops, classic_text};
use sm_daemon::transport::sim::SimDriver;
use sm_sim::Fault;

const MS: u64 = 1_000_000;

fn fabric() -> Fabric {
    generate(&serde_json::from_str::<GenSpec>(r#"{"family":"fat-tree2","radix":8}"#).unwrap())
        .unwrap()
}

/// Runs `span` of virtual time, feeding every event to `ops`.
fn run(d: &mut SimDriver, ops: &mut Ops, span: u64) {
    let end = d.now() + span;
    while d.now() < end {
        while let Some(e) = d.sm.poll_event() {
            match &e {
                Event::SweepDone(r) => ops.observe(&d.sm, Some(r)),
                Event::Trap { .. } => ops.trap(),
                _ => ops.observe(&d.sm, None),
            }
        }
        if !d.step() {
            break;
        }
    }
    ops.observe(&d.sm, None);
}

/// The value of an unlabelled sample, or of one with exactly these labels.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            let (n, v) = l.rsplit_once(' ')?;
            (n == name).then(|| v.parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no sample {name} in\n{text}"))
}

#[test]
fn status_events_and_metrics_follow_the_fabric() {
    let f = fabric();
    let dir = std::env::temp_dir().join(format!("ibsm-ops-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("events.jsonl");
    let _ = std::fs::remove_file(&log);
    let mut ops = Ops::new(3, Some(&log)).unwrap();
    let mut d = support::started(&f, Params::default());
    run(&mut d, &mut ops, 2_000 * MS);

    let s = ops.status();
    assert!(s.subnet_up && s.up_since.is_some(), "{s:#?}");
    assert_eq!(s.sm_state, "master");
    assert_eq!(s.priority, 3);
    let counts = f.counts();
    assert_eq!(
        (s.nodes, s.switches, s.cas, s.links),
        (counts.nodes, counts.switches, counts.cas, counts.links)
    );
    assert_eq!(s.smps_sent, d.sm.mad_counts().sent);
    let kinds: Vec<&str> = s.recent_events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["sm_state", "subnet_up"]);
    assert_eq!(s.recent_events[0].what, "master");
    assert_eq!(
        ops.ports().len(),
        f.ports()
            .iter()
            .filter(
                |p| p.exists && !(p.num == 0 && f.node(p.node).kind == sm_core::NodeKind::Switch)
            )
            .count()
    );

    // A switch link goes down and comes back: one event each, naming both ends.
    let (a, b) = support::switch_link(&f);
    d.sim.apply_fault(Fault::LinkDown(a)).unwrap();
    run(&mut d, &mut ops, 500 * MS);
    d.sim.apply_fault(Fault::LinkUp(a)).unwrap();
    run(&mut d, &mut ops, 500 * MS);
    let s = ops.status();
    let kinds: Vec<&str> = s.recent_events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["sm_state", "subnet_up", "link_down", "link_up"],
        "{s:#?}"
    );
    let name = |p: PortIdx| format!("{}[{}]", f.node(f.port(p).node).guid, f.port(p).num);
    for e in &s.recent_events[2..] {
        assert!(
            e.what.contains(&name(a)) && e.what.contains(&name(b)),
            "{e:?}"
        );
    }
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "every event in the log: {lines:?}");
    assert_eq!(lines[2]["kind"], "link_down");

    // The metrics say the same as the core.
    let text = ops.encode_metrics();
    assert_eq!(sample(&text, "ibsm_subnet_up"), 1.0);
    assert_eq!(sample(&text, "ibsm_duplicate_guids"), 0.0);
    assert!(ops.status().duplicate_guids.is_empty());
    assert_eq!(sample(&text, "ibsm_sm_state{state=\"master\"}"), 1.0);
    assert_eq!(sample(&text, "ibsm_sm_state{state=\"standby\"}"), 0.0);
    assert_eq!(
        sample(&text, "ibsm_smps_sent_total"),
        d.sm.mad_counts().sent as f64
    );
    assert_eq!(
        sample(&text, "ibsm_nodes{type=\"switch\"}"),
        counts.switches as f64
    );
    assert_eq!(sample(&text, "ibsm_links"), counts.links as f64);
    assert_eq!(sample(&text, "ibsm_sweeps_total{kind=\"heavy\"}"), 1.0);
    let repairs = sample(&text, "ibsm_sweeps_total{kind=\"repair\"}");
    assert!(repairs >= 2.0, "a repair for each change: {repairs}");
    assert!(sample(&text, "ibsm_traps_total") >= 2.0);
    assert_eq!(
        sample(&text, "ibsm_fabric_events_total{kind=\"link_down\"}"),
        1.0
    );
    let swept = sample(&text, "ibsm_sweep_duration_seconds_count");
    assert_eq!(swept, 1.0 + repairs);
    // Classic text: every family has HELP and TYPE under the name of its samples.
    assert!(
        text.contains("# TYPE ibsm_smps_sent_total counter\n"),
        "{text}"
    );
    assert!(!text.contains("# EOF"));
    let open = ops.encode_openmetrics();
    assert!(open.ends_with("# EOF\n"));
    assert!(open.contains("# TYPE ibsm_smps_sent counter\n"));
    assert_eq!(classic_text(&open), text);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_duplicated_guid_is_in_the_status_and_metrics_while_it_is_seen() {
    let f = fabric();
    let desc = |n: sm_core::NodeIdx| f.node(n).description.clone();
    let mut cas = f.cas();
    let (first, copy) = (cas.nth(5).unwrap(), cas.nth(5).unwrap());
    let mut d = SimDriver::new(
        &f,
        support::first_ca_port(&f),
        Params::default(),
        sm_core::lid::LidStore::new(),
        sm_sim::SimConfig::default(),
    );
    let scenario = format!("at 0 clone-guid \"{}\" \"{}\"", desc(first), desc(copy));
    d.sim
        .load_scenario(&sm_sim::Scenario::parse("clone.scn", &scenario).unwrap())
        .unwrap();
    d.start();
    let mut ops = Ops::new(0, None).unwrap();
    run(&mut d, &mut ops, 500 * MS);
    let s = ops.status();
    assert!(s.subnet_up, "the rest is up: {s:#?}");
    assert_eq!(s.duplicate_guids.len(), 1, "{s:#?}");
    assert_eq!(s.duplicate_guids[0].guid, f.node(first).guid.to_string());
    assert_eq!(s.nodes, f.nodes().len() - 1);
    let errors = &s.last_sweep.as_ref().unwrap().errors;
    assert!(errors[0].starts_with("duplicate node GUID"), "{errors:?}");
    assert_eq!(sample(&ops.encode_metrics(), "ibsm_duplicate_guids"), 1.0);
    // The copy is taken away; the next heavy sweep no longer sees the GUID twice.
    d.sim.apply_fault(Fault::Remove(copy)).unwrap();
    d.sm.request_sweep(sm_daemon::core::Instant::from_nanos(d.now()), true);
    run(&mut d, &mut ops, 500 * MS);
    assert!(ops.status().duplicate_guids.is_empty());
    assert_eq!(sample(&ops.encode_metrics(), "ibsm_duplicate_guids"), 0.0);
}

#[test]
fn the_status_socket_answers_status_and_ports_and_refuses_the_unknown() {
    let f = fabric();
    let mut ops = Ops::new(0, None).unwrap();
    let mut d = support::started(&f, Params::default());
    run(&mut d, &mut ops, 2_000 * MS);
    let dir = std::env::temp_dir().join(format!("ibsm-sock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ibsm.sock");
    let shared = Arc::new(Mutex::new(ops));
    let servers = sm_daemon::ops::serve(Arc::clone(&shared), None, Some(&path)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let ask = |line: &str| {
        let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
        writeln!(s, "{line}").unwrap();
        let mut text = String::new();
        for l in BufReader::new(s).lines() {
            text.push_str(&l.unwrap());
        }
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    let status = ask("status");
    assert_eq!(status["subnet_up"], true);
    assert_eq!(status["switches"], f.counts().switches);
    let ports = ask("ports");
    let rows = ports.as_array().unwrap();
    assert!(
        rows.iter()
            .any(|r| r["state"] == "Active" && r["peer"].is_string())
    );
    assert!(ask("shutdown")["error"].is_string());
    // A second SM on the same socket is refused while the first serves it.
    let again = sm_daemon::ops::serve(Arc::clone(&shared), None, Some(&path));
    assert!(again.is_err());
    drop(servers);
    assert!(!path.exists(), "the socket goes with the servers");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reload_applies_partitions_with_only_their_blocks_and_names_what_needs_a_restart() {
    let f = fabric();
    let mut d = support::started(&f, Params::default());
    let mut ops = Ops::new(0, None).unwrap();
    run(&mut d, &mut ops, 2_000 * MS);
    let parts = sm_core::partitions::Partitions::parse(
        "Default=0x7fff : ALL, SELF=full ;\nStorage=0x0010 : ALL=full ;\n",
        std::path::Path::new("reload.conf"),
    )
    .unwrap();
    let new = Params {
        partitions: parts,
        lmc: 2,
        ..Params::default()
    };
    let now = sm_daemon::core::Instant::from_nanos(d.now());
    let r = d.sm.reconfigure(now, &new);
    assert_eq!(r.applied, ["partitions"]);
    assert_eq!(r.needs_restart, ["sm.lmc"]);
    let sweeps = support::run_watching(&mut d, 500 * MS, |_| {});
    let heavy = sweeps
        .iter()
        .find(|r| r.heavy)
        .expect("a sweep for the reload");
    assert!(heavy.subnet_up);
    assert_eq!(heavy.trigger, "configuration reloaded");
    assert!(heavy.pkey_blocks_sent > 0);
    assert_eq!(heavy.lft_blocks_sent, 0, "routes did not change");
    // Every CA port now holds the new partition's key.
    for q in f.cas().flat_map(|n| f.node_ports(n)) {
        if f.port(q).remote.is_some() {
            let t = &d.sim.port(q).pkeys;
            assert!(t.iter().any(|k| k.0 == 0x8010), "{:?}", f.port(q));
        }
    }
    // The same again: nothing to apply, no sweep.
    let r = d.sm.reconfigure(now, &new);
    assert!(r.applied.is_empty());
}

#[test]
fn per_port_counters_are_metrics_only_when_asked_for() {
    use sm_daemon::perf::{PerfConfig, PerfMgr};
    let f = fabric();
    let mut d = support::started(&f, Params::default());
    d.perf = Some(PerfMgr::new(PerfConfig {
        interval: std::time::Duration::from_secs(1),
        ..PerfConfig::default()
    }));
    let mut plain = Ops::new(0, None).unwrap();
    let mut ops = Ops::new(0, None).unwrap().with_port_metrics();
    for _ in 0..2 {
        run(&mut d, &mut ops, 1_200 * MS);
        let p = d.perf.as_ref().unwrap();
        ops.perf_sweep(p);
        plain.perf_sweep(p);
    }
    let text = ops.encode_metrics();
    let p = d.perf.as_ref().unwrap();
    let linked = f
        .ports()
        .iter()
        .filter(|q| q.num != 0 && q.remote.is_some())
        .count();
    assert_eq!(p.stats().len(), linked);
    for ((node, port), s) in p.stats() {
        assert!(s.totals.xmit_data > 0, "traffic crossed every link");
        let name = |m: &str| format!("ibsm_{m}_total{{node=\"{node}\",port=\"{port}\"}}");
        assert_eq!(
            sample(&text, &name("port_xmit_data_words")),
            s.totals.xmit_data as f64
        );
        assert_eq!(
            sample(&text, &name("port_rcv_data_words")),
            s.totals.rcv_data as f64
        );
        assert_eq!(sample(&text, &name("port_errors_by_port")), 0.0);
    }
    let plain = plain.encode_metrics();
    assert!(!plain.contains("port_xmit_data_words"), "off by default");
    assert!(
        plain.len() * 4 < text.len(),
        "{} vs {}",
        plain.len(),
        text.len()
    );
}

/// A layered repair that has to give paths another SL says how many it left exposed
/// (hosts sending on the old SL until they ask the SA again), in the metrics and in the
/// status, as its sweep report does.
#[test]
fn a_layered_repair_reports_the_paths_it_exposes() {
    use sm_core::generate::Dragonfly;
    let f = generate(&GenSpec::Dragonfly(Dragonfly::new(9, 4, 2))).unwrap();
    let mut ops = Ops::new(3, None).unwrap();
    let params = Params {
        routing: "layered".into(),
        ..Params::default()
    };
    let mut d = support::started(&f, params);
    // Runs 300 ms, feeding `ops`; the exposed paths of every sweep, and of the last.
    let watch = |d: &mut SimDriver, ops: &mut Ops| {
        let (mut sum, mut last) = (0, 0);
        let end = d.now() + 300 * MS;
        while d.now() < end {
            while let Some(e) = d.sm.poll_event() {
                if let Event::SweepDone(r) = &e {
                    (sum, last) = (sum + r.paths_exposed, r.paths_exposed);
                    ops.observe(&d.sm, Some(r));
                }
            }
            if !d.step() {
                break;
            }
        }
        (sum, last)
    };
    let (mut exposed, mut last) = watch(&mut d, &mut ops);
    for &(a, _) in support::switch_links(&f).iter().step_by(5).take(8) {
        d.sim.apply_fault(Fault::LinkDown(a)).unwrap();
        let (sum, l) = watch(&mut d, &mut ops);
        (exposed, last) = (exposed + sum, l);
        if last > 0 {
            break;
        }
        d.sim.apply_fault(Fault::LinkUp(a)).unwrap();
        exposed += watch(&mut d, &mut ops).0;
    }
    assert!(last > 0, "no repair had to expose a path");
    let text = ops.encode_metrics();
    assert_eq!(sample(&text, "ibsm_paths_exposed_total"), exposed as f64);
    let s = ops.status();
    assert_eq!(s.last_sweep.as_ref().map(|l| l.paths_exposed), Some(last));
}
