//! What operators see of `ibsm run --umad` under ibsim, with real clients:
//!
//! - `promtool check metrics` accepts what `/metrics` serves;
//! - a Prometheus server in the fabric's namespace scrapes it, and its query API gives the
//!   subnet up and the fabric's node counts;
//! - `ibsm status --json` and `ibsm ports` ask the SM over its socket in the state directory;
//! - an `Unlink` on ibsim's console shows as a `link_down` event (status, event log, metric).
//!
//! Needs ibsim, libumad2sim, infiniband-diags, prometheus (promtool), curl, root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::Duration;

use ibsm_tests::{Background, Ibsim, Scratch, fabric_file, ibsm_bin, poll, wait_for_text};

const METRICS: &str = "127.0.0.1:9464";

fn status(dir: &std::path::Path) -> serde_json::Value {
    let out = Command::new(ibsm_bin!())
        .args(["status", "--json", "--state-dir"])
        .arg(dir.join("state"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ibsm status: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// ibsim on `2sw-2path-4ca.net` (console open; `before` sent to it first) and
/// `ibsm run --umad` on host-1 with configuration `config`, state in `state/`, `extra`
/// flags, logging to `sm.log` (returned).
fn sm_on(
    name: &str,
    config: &str,
    extra: &[&str],
    before: &[&str],
) -> (Scratch, Ibsim, Background, std::path::PathBuf) {
    let scratch = Scratch::new("ops", name);
    let dir = scratch.path();
    std::fs::write(dir.join("fabric.net"), fabric_file("2sw-2path-4ca.net")).unwrap();
    let mut sim = Ibsim::start(dir, "fabric.net", &[], true);
    std::fs::write(dir.join("ibsm.toml"), config).unwrap();
    for line in before {
        sim.console(line);
    }
    let log_path = dir.join("sm.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut args = vec![
        "run",
        "--umad",
        "--config",
        "ibsm.toml",
        "--state-dir",
        "state",
    ];
    args.extend_from_slice(extra);
    let mut c = sim.ibsm(&ibsm_bin!(), Some("host-1"), &args, 300);
    c.stdout(Stdio::null()).stderr(log);
    let sm = Background(c.spawn().unwrap());
    (scratch, sim, sm, log_path)
}

#[test]
fn a_running_sm_is_scraped_by_prometheus_and_asked_by_ibsm_status() {
    // A link that goes down twice within a minute is unhealthy.
    let (scratch, mut sim, mut sm, log_path) = sm_on(
        "2sw-2path-4ca",
        "[sm]\nsmp_timeout_ms = 50\n[health]\nlink_flaps = 2\nflap_window_s = 60\n",
        &["--metrics", METRICS],
        &[],
    );
    let dir = scratch.path();
    wait_for_text(&log_path, "sweeping until", 60);

    // promtool lints the exposition.
    let out = sim.script(
        &format!("curl -sf http://{METRICS}/metrics > metrics.txt && promtool check metrics < metrics.txt"),
        60,
    );
    let text = std::fs::read_to_string(dir.join("metrics.txt")).unwrap_or_default();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("ibsm_subnet_up 1"), "{text}");

    // A Prometheus server scrapes it; its query API has the values.
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: ibsm\n    \
             static_configs:\n      - targets: ['{METRICS}']\n"
        ),
    )
    .unwrap();
    let body = r#"
prometheus --config.file=prometheus.yml --storage.tsdb.path=tsdb \
  --web.listen-address=127.0.0.1:9090 > prometheus.log 2>&1 &
p=$!
q() { curl -sf "http://127.0.0.1:9090/api/v1/query" --data-urlencode "query=$1"; }
for i in $(seq 1 60); do
  r=$(q 'ibsm_subnet_up')
  case "$r" in *'"value"'*) break;; esac
  sleep 0.5
done
echo "UP $(q 'ibsm_subnet_up')"
echo "SWITCHES $(q 'ibsm_nodes{type="switch"}')"
echo "CAS $(q 'ibsm_nodes{type="ca"}')"
echo "SENT $(q 'ibsm_smps_sent_total')"
kill $p; wait $p 2>/dev/null
"#;
    let out = sim.script(body, 120);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let value = |tag: &str| -> f64 {
        let line = said
            .lines()
            .find(|l| l.starts_with(tag))
            .unwrap_or_else(|| panic!("{tag}: {said}"));
        let json: serde_json::Value = serde_json::from_str(line[tag.len()..].trim())
            .unwrap_or_else(|e| {
                let plog = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
                panic!("{tag}: {e}: {said}\n{plog}")
            });
        json["data"]["result"][0]["value"][1]
            .as_str()
            .unwrap_or_else(|| panic!("{tag}: {json}"))
            .parse()
            .unwrap()
    };
    assert_eq!(value("UP "), 1.0, "{said}");
    assert_eq!(value("SWITCHES "), 2.0, "{said}");
    assert_eq!(value("CAS "), 4.0, "{said}");
    assert!(value("SENT ") > 0.0, "{said}");

    // ibsm status and ports, over the socket in the state directory.
    let s = status(dir);
    assert_eq!(s["subnet_up"], true, "{s:#}");
    assert_eq!(s["sm_state"], "master");
    assert_eq!(
        (s["switches"].clone(), s["cas"].clone()),
        (2.into(), 4.into())
    );
    let out = Command::new(ibsm_bin!())
        .args(["ports", "--state-dir"])
        .arg(dir.join("state"))
        .output()
        .unwrap();
    let ports = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{ports}");
    assert_eq!(
        ports.lines().filter(|l| l.contains(" Active ")).count(),
        12,
        "12 linked ports ACTIVE:\n{ports}"
    );

    // A link goes down: an event in the status, the event log and the metrics.
    sim.console("Unlink \"sw-a\"[5]");
    let event = poll(Duration::from_secs(30), Duration::from_millis(100), || {
        let s = status(dir);
        s["recent_events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "link_down")
            .cloned()
    })
    .unwrap_or_else(|| panic!("no link_down event: {:#}", status(dir)));
    assert!(event["what"].as_str().unwrap().contains("[5]"), "{event}");
    let events = std::fs::read_to_string(dir.join("state/events.jsonl")).unwrap();
    assert!(events.contains("\"link_down\""), "{events}");
    let out = sim.script(&format!("curl -sf http://{METRICS}/metrics"), 30);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("ibsm_fabric_events_total{kind=\"link_down\"} 1"),
        "{text}"
    );

    // It comes back, and goes down a second time: unhealthy, left out.
    let events_of = |kind: &str| {
        status(dir)["recent_events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == kind)
            .count()
    };
    sim.console("ReLink \"sw-a\"[5]");
    poll(Duration::from_secs(30), Duration::from_millis(100), || {
        (events_of("link_up") == 1).then_some(())
    })
    .unwrap_or_else(|| panic!("no link_up: {:#}", status(dir)));
    sim.console("Unlink \"sw-a\"[5]");
    let bad = poll(Duration::from_secs(30), Duration::from_millis(100), || {
        let s = status(dir);
        let u = s["unhealthy"].as_array().unwrap().clone();
        (u.len() == 2).then_some(u)
    })
    .unwrap_or_else(|| panic!("not unhealthy: {:#}", status(dir)));
    assert!(
        bad.iter()
            .all(|u| u["reason"].as_str().unwrap().contains("2 times"))
    );
    let saved = poll(Duration::from_secs(5), Duration::from_millis(50), || {
        std::fs::read_to_string(dir.join("state/unhealthy-ports")).ok()
    })
    .expect("the unhealthy ports are saved in the state directory");
    assert_eq!(
        saved.lines().filter(|l| !l.starts_with('#')).count(),
        2,
        "{saved}"
    );
    // Flapping on: the link is never made ACTIVE again, and no heavy sweep starts.
    let seen = sim.discover();
    let sw_a = seen
        .switches()
        .find(|&n| seen.node(n).description == "sw-a")
        .and_then(|n| seen.port_of(n, 0))
        .map(|p| seen.port(p).lid.0)
        .unwrap();
    let heavy_before = std::fs::read_to_string(&log_path)
        .unwrap()
        .matches("SUBNET UP")
        .count();
    assert!(heavy_before >= 1);
    for cmd in [
        "ReLink \"sw-a\"[5]",
        "Unlink \"sw-a\"[5]",
        "ReLink \"sw-a\"[5]",
    ] {
        sim.console(cmd);
        std::thread::sleep(Duration::from_millis(500));
    }
    let info = sim.tool_ok(&["smpquery", "portinfo", &sw_a.to_string(), "5"], 20);
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.trim_start_matches('.').trim().to_string())
    };
    assert_eq!(field("PhysLinkState").as_deref(), Some("LinkUp"), "{info}");
    assert_eq!(
        field("LinkState").as_deref(),
        Some("Initialize"),
        "sw-a[5] is up but must not be ACTIVE: {info}"
    );
    let heavy_after = std::fs::read_to_string(&log_path)
        .unwrap()
        .matches("SUBNET UP")
        .count();
    assert_eq!(
        heavy_before, heavy_after,
        "a heavy sweep for an unhealthy link"
    );
    let out = sim.script(&format!("curl -sf http://{METRICS}/metrics"), 30);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ibsm_unhealthy_ports 2"), "{text}");

    // Cleared, both ends: the link is back, ACTIVE.
    for u in &bad {
        let port = format!("{}:{}", u["node"].as_str().unwrap(), u["port"]);
        let out = Command::new(ibsm_bin!())
            .args(["ports", "--state-dir"])
            .arg(dir.join("state"))
            .args(["--clear", &port])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "clear {port}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    poll(Duration::from_secs(30), Duration::from_millis(200), || {
        let info = sim.tool_ok(&["iblinkinfo"], 20);
        (info.matches("Active/").count() == 12).then_some(())
    })
    .unwrap_or_else(|| panic!("link not back: {:#}", status(dir)));
    assert!(status(dir)["unhealthy"].as_array().unwrap().is_empty());

    let st = sm.terminate();
    assert!(st.success(), "{st:?}");
    assert!(
        !dir.join("state/ibsm.sock").exists(),
        "the socket is removed at exit"
    );
    drop(sim);
    drop(scratch);
}

/// The value of `Name:.....value` in perfquery output.
fn perf_field(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            rest.trim_start_matches('.').trim().parse().ok()
        })
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[test]
fn port_counters_read_by_ibsm_are_perfquerys_and_add_up_across_resets() {
    let (scratch, mut sim, mut sm, log_path) = sm_on(
        "perfmgr",
        "[sm]\nsmp_timeout_ms = 50\n[perfmgr]\nenabled = true\ninterval_s = 1\n",
        &[],
        &[
            "PerformanceSet \"sw-a\"[3] PortCounters.SymbolErrorCounter=42",
            "PerformanceSet \"sw-a\"[3] PortCounters.LinkDownedCounter=3",
        ],
    );
    let dir = scratch.path();
    wait_for_text(&log_path, "sweeping until", 60);
    let seen = sim.discover();
    let sw_a = seen
        .switches()
        .find(|&n| seen.node(n).description == "sw-a")
        .unwrap();
    let (guid, lid) = (
        seen.node(sw_a).guid,
        seen.port(seen.port_of(sw_a, 0).unwrap()).lid.0,
    );
    // ibsm's view of sw-a[3] once its total reaches `want` symbol errors.
    let ours = |want: u64| {
        poll(Duration::from_secs(30), Duration::from_millis(200), || {
            let out = Command::new(ibsm_bin!())
                .args(["ports", "--json", "--state-dir"])
                .arg(dir.join("state"))
                .output()
                .ok()?;
            let rows: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            let row = rows
                .as_array()?
                .iter()
                .find(|r| r["node"] == guid.to_string().as_str() && r["port"] == 3)?;
            (row["counters"]["symbol_errors"] == want).then(|| row["counters"].clone())
        })
        .unwrap_or_else(|| {
            panic!(
                "ibsm never read {want} symbol errors on sw-a[3]:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            )
        })
    };
    let got = ours(42);
    let theirs = sim.tool_ok(&["perfquery", &lid.to_string(), "3"], 20);
    assert_eq!(perf_field(&theirs, "SymbolErrorCounter"), 42, "{theirs}");
    assert_eq!(got["link_downed"], perf_field(&theirs, "LinkDownedCounter"));
    assert_eq!(got["rcv_errors"], perf_field(&theirs, "PortRcvErrors"));
    assert_eq!(
        got["xmit_discards"],
        perf_field(&theirs, "PortXmitDiscards")
    );
    // More errors: the total follows the counter.
    sim.console("PerformanceSet \"sw-a\"[3] PortCounters.SymbolErrorCounter=50");
    ours(50);
    // The counter is reset (to 5): the total keeps what was counted and adds the 5.
    sim.console("PerformanceSet \"sw-a\"[3] PortCounters.SymbolErrorCounter=5");
    ours(55);
    let theirs = sim.tool_ok(&["perfquery", &lid.to_string(), "3"], 20);
    assert_eq!(perf_field(&theirs, "SymbolErrorCounter"), 5);
    // ibsim keeps PortCountersExtended: ibsm takes the traffic from its 64-bit counters,
    // which go far past PortCounters' 32 bits.
    let big: u64 = 1 << 40;
    sim.console(&format!(
        "PerformanceSet \"sw-a\"[3] PortCountersExtended.PortXmitData={big}"
    ));
    let got = poll(Duration::from_secs(30), Duration::from_millis(200), || {
        let c = ours(55);
        (c["xmit_data"].as_u64()? >= big).then_some(c)
    })
    .unwrap_or_else(|| panic!("ibsm never read PortCountersExtended"));
    let theirs = sim.tool_ok(&["perfquery", "-x", &lid.to_string(), "3"], 20);
    let xmit = perf_field(&theirs, "PortXmitData");
    assert!(xmit >= big, "{theirs}");
    assert!(got["xmit_data"].as_u64().unwrap() <= xmit, "{got} {theirs}");
    let log_text = std::fs::read_to_string(&log_path).unwrap();
    assert!(log_text.contains("port counters read"), "{log_text}");
    let st = sm.terminate();
    assert!(st.success(), "{st:?}");
    drop(sim);
    drop(scratch);
}

#[test]
fn a_port_whose_errors_climb_is_taken_out_of_the_routes() {
    let (scratch, mut sim, mut sm, log_path) = sm_on(
        "error-rate",
        "[sm]\nsmp_timeout_ms = 50\n[perfmgr]\nenabled = true\ninterval_s = 1\n\
         [health]\nerror_rate = 20.0\n",
        &[],
        &[],
    );
    let dir = scratch.path();
    wait_for_text(&log_path, "port counters read", 60);
    let seen = sim.discover();
    let sw_a = seen
        .switches()
        .find(|&n| seen.node(n).description == "sw-a")
        .unwrap();
    let lid = seen.port(seen.port_of(sw_a, 0).unwrap()).lid.0;
    let routes_out_of_3 = |sim: &Ibsim| {
        let t = sim.tool_ok(&["ibroute", &lid.to_string()], 20);
        t.lines()
            .filter(|l| l.trim_start().starts_with("0x"))
            .filter(|l| l.split_whitespace().nth(1) == Some("003"))
            .count()
    };
    assert!(
        routes_out_of_3(&sim) > 0,
        "sw-a routes over its port 3 at first"
    );
    // Thousands of symbol errors between two reads: far over 20 per second.
    sim.console("PerformanceSet \"sw-a\"[3] PortCounters.SymbolErrorCounter=5000");
    let bad = poll(Duration::from_secs(30), Duration::from_millis(200), || {
        let s = status(dir);
        let u = s["unhealthy"].as_array()?.clone();
        (!u.is_empty()).then_some(u)
    })
    .unwrap_or_else(|| panic!("not unhealthy: {:#}", status(dir)));
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0]["port"], 3);
    assert!(
        bad[0]["reason"]
            .as_str()
            .unwrap()
            .contains("errors per second"),
        "{bad:?}"
    );
    // Routed around: no LID leaves sw-a by port 3 any more.
    let gone = poll(Duration::from_secs(20), Duration::from_millis(200), || {
        (routes_out_of_3(&sim) == 0).then_some(())
    });
    assert!(gone.is_some(), "sw-a still routes over port 3");
    let st = sm.terminate();
    assert!(st.success(), "{st:?}");
    drop(sim);
    drop(scratch);
}
