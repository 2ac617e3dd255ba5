//! `ibsm run` as a user runs it: the README's main command, and the daemon's shutdown.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn ibsm() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ibsm"))
}

/// Runs the command; it must succeed (its stderr is the failure message).
fn succeed(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `ibsm run --sim` on the bundled fabric for `run_for` of virtual time, with `scenario`
/// and a configuration whose `[sm]` table is `sm` (`state_dir` set to `dir`); the JSON
/// report of every sweep.
fn replay(
    dir: &std::path::Path,
    scenario: &str,
    sm: &str,
    run_for: &str,
) -> Vec<serde_json::Value> {
    let scn = dir.join("run.scn");
    std::fs::write(&scn, scenario).unwrap();
    let conf = dir.join("c.toml");
    let toml = format!("[sm]\nstate_dir = \"{}\"\n{sm}", dir.display());
    std::fs::write(&conf, toml).unwrap();
    let out = succeed(
        ibsm()
            .args(["run", "--sim", "--run-for", run_for, "--report", "json"])
            .arg("--scenario")
            .arg(&scn)
            .arg("--config")
            .arg(&conf),
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn run_once_on_the_bundled_fabric_reports_json() {
    let out = succeed(ibsm().args(["run", "--sim", "--once", "--report", "json"]));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["subnet_up"], true);
    assert_eq!(j["nodes"], 90);
    assert_eq!(j["switches"], 18);
    assert_eq!(j["cas"], 72);
    assert_eq!(j["lids"], 90);
    assert_eq!(j["mads_lost"], 0);
    assert_eq!(j["unreachable_pairs"], 0);
    assert!(j["mads_sent"].as_u64().unwrap() > 0);
    assert!(j["sweep_ms"].as_f64().unwrap() > 0.0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("SUBNET UP"), "{err}");
}

#[test]
fn text_reports_are_for_people_and_the_engine_flag_reads_either_way() {
    let out = succeed(ibsm().args([
        "run",
        "--sim",
        "--once",
        "--engine",
        "minhop",
        "--no-check",
        "--report",
        "text",
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix("  "))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {key} in\n{text}"))
    };
    assert_eq!(value("subnet_up"), "yes");
    assert_eq!(value("engine_used"), "minhop", "--engine is --routing");
    assert_eq!(value("master_guid"), "-");
    assert_eq!(
        value("unreachable_pairs"),
        "-",
        "--no-check skips the check"
    );
    assert!(value("sweep_ms").ends_with(" ms"), "{text}");
    assert!(
        value("mads_sent").contains(','),
        "thousands grouped: {text}"
    );
    assert!(!text.contains('"'), "no JSON quoting: {text}");
    // Values start in one column.
    let cols: std::collections::BTreeSet<usize> = text
        .lines()
        .map(|l| l.find("  ").unwrap() + l[l.find("  ").unwrap()..].find(|c| c != ' ').unwrap())
        .collect();
    assert_eq!(cols.len(), 1, "{text}");
}

#[test]
fn bad_arguments_are_clear_errors() {
    let out = ibsm()
        .args(["run", "--sim", "--once", "--routing", "nosuch"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown routing engine \"nosuch\""));
    let out = ibsm()
        .args(["run", "--sim", "/nonexistent.net", "--once"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.net"));
}

#[test]
fn a_bad_guid2lid_line_is_skipped_and_an_unwritable_state_dir_does_not_stop_the_sm() {
    let dir = std::env::temp_dir().join(format!("ibsm-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    succeed(ibsm().args(["run", "--sim", "--once", "--state-dir", d]));
    let path = dir.join("guid2lid");
    let text = std::fs::read_to_string(&path).unwrap();
    let first = text
        .lines()
        .find(|l| l.starts_with("0x"))
        .unwrap()
        .to_string();
    // One good line, one that is not a line at all, the rest dropped: that port keeps its
    // LID, the others get theirs again.
    std::fs::write(&path, format!("{first}\ngarbage\n")).unwrap();
    let out = succeed(
        ibsm()
            .args(["run", "--sim", "--once", "--state-dir", d])
            .env("RUST_LOG", "warn"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("guid2lid:2") && err.contains("line skipped"),
        "{err}"
    );
    let again = std::fs::read_to_string(&path).unwrap();
    assert!(again.contains(&first), "{first} kept:\n{again}");
    assert_eq!(again.lines().filter(|l| l.starts_with("0x")).count(), 90);

    // A state directory that cannot be made: logged, and the SM serves on.
    let blocker = dir.join("file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let mut child = ibsm()
        .args(["run", "--sim", "--state-dir"])
        .arg(blocker.join("state"))
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    wait_for(&mut lines, "tries again after each sweep");
    wait_for(&mut lines, "sweeping until SIGINT/SIGTERM");
    assert!(child.try_wait().unwrap().is_none(), "the SM stopped");
    signal(&child, "-TERM");
    let _ = child.wait().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn daemon_stops_on_sigterm_and_keeps_its_lids() {
    let dir = std::env::temp_dir().join(format!("ibsm-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = ibsm()
        .args(["run", "--sim", "--state-dir", dir.to_str().unwrap()])
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    // Wait for the daemon to say it is serving (no fixed sleep).
    loop {
        let l = lines.next().expect("daemon exited early").unwrap();
        if l.contains("sweeping until SIGINT/SIGTERM") {
            break;
        }
    }
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let saved = std::fs::read_to_string(dir.join("guid2lid")).unwrap();
    assert_eq!(saved.lines().filter(|l| !l.is_empty()).count(), 90);
    // A restart keeps every LID.
    let out = ibsm()
        .args([
            "run",
            "--sim",
            "--once",
            "--state-dir",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        std::fs::read_to_string(dir.join("guid2lid")).unwrap(),
        saved
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dumps_are_written_and_read_back() {
    let dir = std::env::temp_dir().join(format!("ibsm-dumps-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("ibsm.toml");
    std::fs::write(&cfg, "[routing]\nadaptive = true\n").unwrap();
    succeed(
        ibsm()
            .args(["run", "--sim", "--once", "--config"])
            .arg(&cfg)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--dump-dir")
            .arg(&dir),
    );
    for f in [
        "opensm-lfts.dump",
        "opensm-subnet.lst",
        "guid2lid",
        "ibsm-ar-hints.dump",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    // The LFT dump reads back with the dump reader: one table per switch.
    let lfts = sm_core::dump::read_lfts(&dir.join("opensm-lfts.dump")).unwrap();
    assert_eq!(lfts.switches.len(), 18);
    let store = sm_core::lid::LidStore::load(&dir.join("guid2lid")).unwrap();
    assert_eq!(store.len(), 90);
    let ar = std::fs::read_to_string(dir.join("ibsm-ar-hints.dump")).unwrap();
    assert!(ar.lines().any(|l| l.starts_with("group ")));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn umad_without_a_device_says_so() {
    let out = ibsm()
        .args(["run", "--umad", "--sim", "--once"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
    if std::path::Path::new("/sys/class/infiniband_mad").exists() {
        // A machine with InfiniBand ports: never start an SM on them from a test.
        return;
    }
    let out = ibsm()
        .args(["run", "--umad", "mlx5_0:1", "--once"])
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no InfiniBand umad device"), "{err}");
}

#[test]
fn a_scenario_starts_a_better_sm_and_kills_it() {
    let dir = std::env::temp_dir().join(format!("ibsm-cli-sm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let reports = replay(
        &dir,
        "at 0 start-sm \"host 71 leaf 11\"[1] priority 9\nat 10s stop-sm \"host 71 leaf 11\"[1]\n",
        "sm_poll_interval_ms = 1000\nsm_poll_retries = 2\n",
        "20s",
    );
    // Our SM (priority 0) stands by for the better one, then takes over when it dies,
    // asking every host's clients to register again.
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert_eq!(reports[0]["sm_state"], "standby");
    assert_eq!(reports[1]["sm_state"], "master");
    assert_eq!(reports[1]["subnet_up"], true);
    assert_eq!(reports[1]["unreachable_pairs"], 0);
    assert_eq!(reports[1]["client_reregisters"], 72);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads log lines until one contains `what`; panics if standard error ends first.
fn wait_for(lines: &mut impl Iterator<Item = std::io::Result<String>>, what: &str) {
    for l in lines.by_ref() {
        if l.unwrap().contains(what) {
            return;
        }
    }
    panic!("the daemon ended before logging {what:?}");
}

fn signal(child: &std::process::Child, sig: &str) {
    let pid = child.id().to_string();
    let ok = Command::new("kill")
        .args([sig, &pid])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

#[test]
fn sighup_without_a_config_file_is_logged_and_changes_nothing() {
    let mut child = ibsm()
        .args(["run", "--sim"])
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    wait_for(&mut lines, "sweeping until SIGINT/SIGTERM");
    for _ in 0..2 {
        signal(&child, "-HUP");
        wait_for(&mut lines, "SIGHUP: no --config to read again");
    }
    // Still serving: it answers SIGUSR1 (a warning, no dumps asked for).
    signal(&child, "-USR1");
    wait_for(&mut lines, "SIGUSR1: no dumps asked for");
    assert!(child.try_wait().unwrap().is_none(), "SIGHUP ended the SM");
    signal(&child, "-TERM");
    wait_for(&mut lines, "shutting down");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// The scenario's probes, as a host would try them: with M_Key protection level 2, a
/// PortInfo Get without the key gets no answer (and the port tells the SM with Trap 256),
/// with the key it gets one; the SM shows its SM_Key only to a requester with the key.
#[test]
fn probes_show_what_a_host_can_read_under_m_key_protection() {
    let dir = std::env::temp_dir().join(format!("ibsm-cli-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (from, host, sm) = (
        "\"host 71 leaf 11\"[1]",
        "\"host 2 leaf 0\"[1]",
        "\"host 0 leaf 0\"[1]",
    );
    let reports = replay(
        &dir,
        &format!(
            "at 2s probe {from} {host} PortInfo\n\
             at 2s probe {from} {host} PortInfo m-key 0x5eed77\n\
             at 2s probe {from} {sm} SMInfo\n\
             at 2s probe {from} {sm} smInfo m-key 0x5eed77\n"
        ),
        "m_key = \"0x5eed77\"\nm_key_protect_bits = 2\nsm_key = \"0x77\"\n",
        "3s",
    );
    let last = reports.last().unwrap();
    let probes = last["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 4, "{last:#}");
    assert_eq!(probes[0]["to"], "\"host 2 leaf 0\"[1]");
    assert_eq!(probes[0]["attr"], "PortInfo");
    assert_eq!(probes[0]["answered"], false, "{:#}", probes[0]);
    assert_eq!(probes[1]["answered"], true, "{:#}", probes[1]);
    assert!(
        probes[1]["fields"]["lid"].as_u64().unwrap() > 0,
        "{:#}",
        probes[1]
    );
    assert_eq!(probes[2]["answered"], true);
    assert_eq!(probes[2]["fields"]["attribute"], "SmInfo");
    assert_eq!(probes[2]["fields"]["sm_key"], 0, "{:#}", probes[2]);
    assert_eq!(probes[3]["fields"]["sm_key"], 0x77, "{:#}", probes[3]);
    assert!(last["bad_m_key_traps"].as_u64().unwrap() >= 1, "{last:#}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The SM validates the tables it programmed: minhop on a torus has credit loops, which
/// the report counts and `--once` fails on; the layered engine's SLs keep the same torus
/// deadlock-free.
#[test]
fn deadlocking_tables_are_reported_and_fail_a_once_run() {
    let dir = std::env::temp_dir().join(format!("ibsm-run-deadlock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let net = dir.join("torus.net");
    succeed(
        ibsm()
            .args(["gen", "torus", "--dims", "5x5", "--hosts", "1", "-o"])
            .arg(&net),
    );
    let run = |engine: &str| {
        ibsm()
            .args([
                "run",
                "--once",
                "--no-check",
                "--report",
                "json",
                "--engine",
                engine,
            ])
            .arg("--sim")
            .arg(&net)
            .output()
            .unwrap()
    };
    let out = run("minhop");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(j["credit_loops"].as_u64().unwrap() > 0, "{j}");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("can deadlock"), "{err}");
    let out = run("layered");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["credit_loops"], 0, "{j}");
    assert!(j["vls_used"].as_u64().unwrap() > 1, "{j}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two hosts answering with one GUID (a cloned HCA): the subnet comes up without the
/// second, and `--once` fails naming the GUID and both places.
#[test]
fn a_duplicated_guid_fails_a_once_run_naming_both_places() {
    let dir = std::env::temp_dir().join(format!("ibsm-run-dupguid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scn = dir.join("clone.scn");
    std::fs::write(
        &scn,
        "at 0 clone-guid \"host 7 leaf 1\" \"host 20 leaf 3\"\n",
    )
    .unwrap();
    let out = ibsm()
        .args(["run", "--sim", "--once", "--no-check", "--report", "json"])
        .arg("--scenario")
        .arg(&scn)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["subnet_up"], true, "{j:#}");
    assert_eq!(j["nodes"], 89);
    let dup = &j["duplicate_guids"][0];
    assert_eq!(dup["guid"], "0x0001000000000700", "{j:#}");
    // host 7 hangs on leaf 1's port 2, host 20 on leaf 3's port 3.
    let (first, copy) = ("0x0002000100000001[2]", "0x0002000100000003[3]");
    assert!(dup["kept"].as_str().unwrap().contains(first), "{dup}");
    assert!(dup["left_out"][0].as_str().unwrap().contains(copy), "{dup}");
    assert_eq!(j["errors"].as_array().unwrap().len(), 1, "{j:#}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("subnet up with errors: duplicate node GUID 0x0001000000000700"),
        "{err}"
    );
    let last = err.lines().last().unwrap();
    assert!(last.contains(first) && last.contains(copy), "{last}");
    assert!(
        err.contains("ERROR") && err.contains("duplicate GUID"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
