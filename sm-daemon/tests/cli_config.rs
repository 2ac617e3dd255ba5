//! `ibsm run --config` honours what the file says: each key, run on a small generated
//! fabric in the in-process simulator, changes what the run does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use sm_core::lid::LidStore;
use sm_mad::Guid;

fn ibsm() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ibsm"));
    // The log level comes from the configuration in these tests.
    c.env_remove("RUST_LOG").env_remove("NO_COLOR");
    c
}

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ibsm-config-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A 2-level fat-tree of 4-port switches: 4 leaves, 2 spines, 8 hosts. Host `h`'s port GUID
/// is `0x0001000000000h01`, leaf `l`'s node GUID `0x000200010000000l`.
fn fabric(dir: &Path) -> PathBuf {
    let path = dir.join("ft.net");
    let out = ibsm()
        .args(["gen", "fat-tree", "--levels", "2", "--radix", "4", "-o"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

fn host_port(h: u64) -> Guid {
    Guid(0x0001_0000_0000_0001 | (h << 8))
}

/// A TOML string for a path.
fn toml_path(p: &Path) -> String {
    format!("{:?}", p.to_str().unwrap())
}

/// Writes `text` as `dir/ibsm.toml`.
fn config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("ibsm.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `ibsm run --sim FABRIC --once --report json --config CONFIG EXTRA..`.
fn run(fabric: &Path, config: &Path, extra: &[&str]) -> Output {
    ibsm()
        .args(["run", "--once", "--report", "json", "--sim"])
        .arg(fabric)
        .arg("--config")
        .arg(config)
        .args(extra)
        .output()
        .unwrap()
}

/// [`run`], which must succeed; its report.
fn report(fabric: &Path, config: &Path, extra: &[&str]) -> Value {
    let out = run(fabric, config, extra);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// [`run`], which must fail; its standard error.
fn refused(fabric: &Path, config: &Path, extra: &[&str]) -> String {
    let out = run(fabric, config, extra);
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The port GUID whose LID is `lid` in a guid2lid file.
fn owner_of(guid2lid: &Path, lid: u64) -> Guid {
    let store = LidStore::load(guid2lid).unwrap();
    let text = store.to_guid2lid();
    let line = text
        .lines()
        .find(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 3 && u64::from_str_radix(&f[1][2..], 16).unwrap() == lid
        })
        .unwrap_or_else(|| panic!("no port has LID {lid} in {text}"));
    Guid(u64::from_str_radix(&line[2..18], 16).unwrap())
}

#[test]
fn roots_file_chooses_updn_roots() {
    let dir = scratch("roots");
    let net = fabric(&dir);
    let state = toml_path(&dir.join("state"));
    let detected = config(
        &dir,
        &format!("[sm]\nstate_dir = {state}\n[routing]\nengines = [\"updn\", \"minhop\"]\n"),
    );
    let j = report(
        &net,
        &detected,
        &["--dump-dir", dir.join("a").to_str().unwrap()],
    );
    assert_eq!(j["engine_used"], "updn");

    // A leaf as the root: updn still routes, with other tables than the detected spines.
    std::fs::write(dir.join("leaf"), "# a leaf\n0x0002000100000000\n").unwrap();
    let leaf = config(
        &dir,
        &format!(
            "[sm]\nstate_dir = {state}\n[routing]\nengines = [\"updn\", \"minhop\"]\nroots_file = {}\n",
            toml_path(&dir.join("leaf"))
        ),
    );
    let j = report(
        &net,
        &leaf,
        &["--dump-dir", dir.join("b").to_str().unwrap()],
    );
    assert_eq!(j["engine_used"], "updn");
    assert_eq!(j["unreachable_pairs"], 0);
    let a = std::fs::read(dir.join("a/opensm-lfts.dump")).unwrap();
    let b = std::fs::read(dir.join("b/opensm-lfts.dump")).unwrap();
    assert_ne!(a, b, "the roots file did not change the tables");

    // Roots that name no switch: updn declines, the chain moves on.
    std::fs::write(dir.join("none"), "0x0000000000000009\n").unwrap();
    let none = config(
        &dir,
        &format!(
            "[routing]\nengines = [\"updn\", \"minhop\"]\nroots_file = {}\n",
            toml_path(&dir.join("none"))
        ),
    );
    assert_eq!(report(&net, &none, &[])["engine_used"], "minhop");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compute_nodes_file_chooses_ftree_compute_nodes() {
    let dir = scratch("cns");
    let net = fabric(&dir);
    let with = |file: &str, text: &str| {
        std::fs::write(dir.join(file), text).unwrap();
        config(
            &dir,
            &format!(
                "[routing]\nengines = [\"ftree\", \"minhop\"]\ncompute_nodes_file = {}\n",
                toml_path(&dir.join(file))
            ),
        )
    };
    // One compute node on every leaf (host 2l is on leaf l).
    let cns = with(
        "cns",
        "0x0001000000000001\n0x0001000000000201\n0x0001000000000401 # host 4\n0x0001000000000601\n",
    );
    let j = report(&net, &cns, &[]);
    assert_eq!(j["engine_used"], "ftree");
    assert_eq!(j["unreachable_pairs"], 0);
    // No CA port among them: ftree declines.
    let none = with("none", "0x0002000100000000\n");
    assert_eq!(report(&net, &none, &[])["engine_used"], "minhop");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn missing_or_bad_guid_files_are_refused_naming_them() {
    let dir = scratch("bad-guids");
    let net = fabric(&dir);
    let missing = dir.join("missing-roots");
    let cfg = config(
        &dir,
        &format!(
            "[routing]\nengines = [\"updn\"]\nroots_file = {}\n",
            toml_path(&missing)
        ),
    );
    let err = refused(&net, &cfg, &[]);
    assert!(
        err.contains(&cfg.display().to_string())
            && err.contains(&format!("routing.roots_file: {}", missing.display())),
        "{err}"
    );
    let bad = dir.join("cns");
    std::fs::write(&bad, "0x0001000000000001\nhost-2\n").unwrap();
    let cfg = config(
        &dir,
        &format!(
            "[routing]\nengines = [\"ftree\"]\ncompute_nodes_file = {}\n",
            toml_path(&bad)
        ),
    );
    let err = refused(&net, &cfg, &[]);
    assert!(
        err.contains(&format!(
            "routing.compute_nodes_file: {}:2: \"host-2\"",
            bad.display()
        )),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn port_guid_chooses_the_sm_port_and_sm_port_overrides_it() {
    let dir = scratch("port-guid");
    let net = fabric(&dir);
    let state = dir.join("state");
    let cfg = config(
        &dir,
        &format!(
            "[sm]\nport_guid = \"{}\"\nstate_dir = {}\n",
            host_port(5),
            toml_path(&state)
        ),
    );
    let j = report(&net, &cfg, &[]);
    let lid = j["sm_lid"].as_u64().unwrap();
    assert_eq!(owner_of(&state.join("guid2lid"), lid), host_port(5));

    let flag = host_port(3).to_string();
    let j = report(&net, &cfg, &["--sm-port", &flag]);
    let lid = j["sm_lid"].as_u64().unwrap();
    assert_eq!(owner_of(&state.join("guid2lid"), lid), host_port(3));

    let nowhere = config(&dir, "[sm]\nport_guid = \"0x00000000deadbeef\"\n");
    let err = refused(&net, &nowhere, &[]);
    assert!(
        err.contains(&nowhere.display().to_string())
            && err.contains("sm.port_guid 0x00000000deadbeef: no port"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn state_dir_keeps_the_lids_and_the_flag_overrides_it() {
    let dir = scratch("state-dir");
    let net = fabric(&dir);
    let state = dir.join("state");
    let cfg = config(&dir, &format!("[sm]\nstate_dir = {}\n", toml_path(&state)));
    report(&net, &cfg, &[]);
    let saved = LidStore::load(&state.join("guid2lid")).unwrap();
    assert_eq!(saved.len(), 14);

    let other = dir.join("other");
    std::fs::remove_dir_all(&state).unwrap();
    report(&net, &cfg, &["--state-dir", other.to_str().unwrap()]);
    assert_eq!(LidStore::load(&other.join("guid2lid")).unwrap(), saved);
    assert!(!state.exists(), "--state-dir did not override sm.state_dir");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reassign_lids_ignores_the_remembered_lids() {
    let dir = scratch("reassign");
    let net = fabric(&dir);
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    // Remembered: the SM's port (host 0) at LID 0x40.
    let remembered = format!("{} 0x0040 0x0040\n", host_port(0));
    std::fs::write(state.join("guid2lid"), &remembered).unwrap();
    let keep = config(&dir, &format!("[sm]\nstate_dir = {}\n", toml_path(&state)));
    assert_eq!(report(&net, &keep, &[])["sm_lid"], 0x40);

    std::fs::write(state.join("guid2lid"), &remembered).unwrap();
    let fresh = config(
        &dir,
        &format!(
            "[sm]\nstate_dir = {}\nreassign_lids = true\n",
            toml_path(&state)
        ),
    );
    let j = report(&net, &fresh, &[]);
    assert_ne!(j["sm_lid"], 0x40);
    // The new store is persisted as usual.
    let saved = LidStore::load(&state.join("guid2lid")).unwrap();
    assert_eq!(saved.len(), 14);
    assert_ne!(saved.get(host_port(0)).unwrap().base.0, 0x40);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ibsm run --sim NET --config CFG [--scenario SCN]` left running, and its log lines.
fn daemon(
    net: &Path,
    cfg: &Path,
    scenario: Option<&Path>,
) -> (
    std::process::Child,
    std::io::Lines<std::io::BufReader<std::process::ChildStderr>>,
) {
    use std::io::BufRead;
    let mut cmd = ibsm();
    cmd.args(["run", "--sim"]).arg(net).arg("--config").arg(cfg);
    if let Some(scn) = scenario {
        cmd.arg("--scenario").arg(scn);
    }
    let mut child = cmd.stderr(std::process::Stdio::piped()).spawn().unwrap();
    let lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    (child, lines)
}

/// Sends SIGTERM to the daemon.
fn terminate(pid: u32) {
    let sent = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Reads log lines until one contains every one of `words`; panics if the daemon's
/// standard error ends first.
fn wait_for(lines: &mut impl Iterator<Item = std::io::Result<String>>, words: &[&str]) -> String {
    let mut seen = Vec::new();
    loop {
        let Some(l) = lines.next() else {
            panic!(
                "the daemon ended before logging {words:?}:\n{}",
                seen.join("\n")
            );
        };
        let l = l.unwrap();
        if words.iter().all(|w| l.contains(w)) {
            return l;
        }
        seen.push(l);
    }
}

#[test]
fn dumps_follow_every_heavy_sweep_while_the_daemon_runs() {
    let dir = scratch("dumps");
    let net = fabric(&dir);
    let dumps = dir.join("dumps");
    let cfg = config(
        &dir,
        &format!(
            "[dump]\ndir = {}\nwrite = [\"lfts\", \"subnet_lst\", \"topology\", \"pkeys\"]\n",
            toml_path(&dumps)
        ),
    );
    // Host 7's link goes down half a second into the run: a trap, then a heavy sweep.
    let scn = dir.join("down.scn");
    std::fs::write(&scn, "at 500ms link-down \"host 7 leaf 3\"[1]\n").unwrap();
    let (mut child, mut lines) = daemon(&net, &cfg, Some(&scn));
    // The bring-up's dumps, while the daemon runs (not at exit, not on SIGUSR1 only).
    wait_for(
        &mut lines,
        &["dumps written", "opensm-lfts.dump", "ibsm-pkeys.dump"],
    );
    let topo = std::fs::read_to_string(dumps.join("ibsm-topology.net")).unwrap();
    assert!(topo.contains("host 7 leaf 3"), "{topo}");
    let lfts = sm_core::dump::read_lfts(&dumps.join("opensm-lfts.dump")).unwrap();
    assert_eq!(lfts.switches.len(), 6);
    let pkeys = std::fs::read_to_string(dumps.join("ibsm-pkeys.dump")).unwrap();
    assert_eq!(pkeys.lines().filter(|l| l.starts_with("CA ")).count(), 8);
    // After the link went down: the topology without host 7.
    wait_for(&mut lines, &["dumps written", "ibsm-topology.net"]);
    let topo = std::fs::read_to_string(dumps.join("ibsm-topology.net")).unwrap();
    assert!(!topo.contains("host 7 leaf 3"), "{topo}");
    assert!(topo.contains("host 6 leaf 3"), "{topo}");

    terminate(child.id());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dump_dir_flag_overrides_the_configured_dir() {
    let dir = scratch("dump-dir");
    let net = fabric(&dir);
    let configured = dir.join("configured");
    let cfg = config(
        &dir,
        &format!(
            "[dump]\ndir = {}\nwrite = [\"pkeys\"]\n",
            toml_path(&configured)
        ),
    );
    let flag = dir.join("flag");
    report(&net, &cfg, &["--dump-dir", flag.to_str().unwrap()]);
    assert!(!configured.exists());
    assert!(flag.join("ibsm-pkeys.dump").is_file());
    // Only what [dump] write lists (and the LIDs that go with every dump).
    assert!(!flag.join("opensm-lfts.dump").exists());
    assert!(flag.join("guid2lid").is_file());
    report(&net, &cfg, &[]);
    assert!(configured.join("ibsm-pkeys.dump").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn log_level_and_file_are_honoured_and_rust_log_wins() {
    let dir = scratch("log");
    let net = fabric(&dir);
    // Default: info, on standard error, and no colour codes when it is not a terminal.
    let out = run(&net, &config(&dir, ""), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(" INFO ") && err.contains("SUBNET UP"), "{err}");
    assert!(!err.contains('\u{1b}'), "colour codes in a pipe: {err:?}");

    let out = run(&net, &config(&dir, "[log]\nlevel = \"warn\"\n"), &[]);
    assert!(
        out.status.success(),
        "{:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("INFO"), "{err}");

    let file = dir.join("ibsm.log");
    let cfg = config(
        &dir,
        &format!("[log]\nlevel = \"debug\"\nfile = {}\n", toml_path(&file)),
    );
    let out = run(&net, &cfg, &[]);
    assert!(
        out.status.success(),
        "{:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = std::fs::read_to_string(&file).unwrap();
    assert!(
        log.contains(" DEBUG ") && log.contains("SUBNET UP"),
        "{log}"
    );
    assert!(!log.contains('\u{1b}'), "colour codes in a file: {log:?}");

    // RUST_LOG wins over [log] level; the file is appended to.
    let before = log.lines().count();
    let out = Command::new(env!("CARGO_BIN_EXE_ibsm"))
        .args(["run", "--once", "--sim"])
        .arg(&net)
        .arg("--config")
        .arg(&cfg)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().lines().count(),
        before
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_log_settings_are_refused_naming_the_key() {
    let dir = scratch("bad-log");
    let net = fabric(&dir);
    let cfg = config(&dir, "[log]\nlevel = \"loud\"\n");
    let err = refused(&net, &cfg, &[]);
    assert!(
        err.contains(&format!("{}:2:", cfg.display())) && err.contains("log.level"),
        "{err}"
    );
    let cfg = config(&dir, "[log]\nfile = \"/nonexistent/dir/ibsm.log\"\n");
    let err = refused(&net, &cfg, &[]);
    assert!(
        err.contains(&format!(
            "{}: log.file /nonexistent/dir/ibsm.log",
            cfg.display()
        )),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_dump_that_cannot_be_written_is_logged_while_the_daemon_runs() {
    let dir = scratch("dump-fails");
    let net = fabric(&dir);
    let dumps = dir.join("dumps");
    let cfg = config(
        &dir,
        &format!("[dump]\ndir = {}\nwrite = [\"lfts\"]\n", toml_path(&dumps)),
    );
    let scn = dir.join("down.scn");
    std::fs::write(&scn, "at 500ms link-down \"host 7 leaf 3\"[1]\n").unwrap();
    let (mut child, mut lines) = daemon(&net, &cfg, Some(&scn));
    wait_for(&mut lines, &["dumps written", "opensm-lfts.dump"]);
    // The directory becomes a file: the next sweep's dumps cannot be written.
    std::fs::remove_dir_all(&dumps).unwrap();
    std::fs::write(&dumps, "in the way").unwrap();
    let creating = format!("creating {}", dumps.display());
    wait_for(&mut lines, &["ERROR", &creating]);
    assert!(
        child.try_wait().unwrap().is_none(),
        "a dump failure ended the SM"
    );
    terminate(child.id());
    // At the end, the run says its last dumps were not written.
    let last = wait_for(&mut lines, &["ibsm: ", &creating]);
    assert!(last.starts_with("ibsm: "), "{last}");
    assert_eq!(child.wait().unwrap().code(), Some(1));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A task's allowed CPUs, as /proc lists them (`0-1`, `0,2-3`).
fn cpus_allowed(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("no Cpus_allowed_list in {status}"))
}

#[test]
fn io_cpu_keeps_the_driving_thread_on_its_cpu_and_routing_free() {
    let dir = scratch("io-cpu");
    let net = fabric(&dir);
    let ours = cpus_allowed(&std::fs::read_to_string("/proc/self/status").unwrap());
    // The first CPU this test may run on; the daemon's other threads keep the whole set.
    let first: u16 = ours
        .split([',', '-'])
        .next()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{ours}"));
    let cfg = config(&dir, &format!("[sm]\nio_cpu = {first}\n"));
    let (mut child, mut lines) = daemon(&net, &cfg, None);
    wait_for(&mut lines, &["SUBNET UP"]);
    let pid = child.id();
    let mut threads = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let t = t.unwrap().path();
        let status = std::fs::read_to_string(t.join("status")).unwrap();
        threads.push((
            t.file_name().unwrap().to_str().unwrap().to_string(),
            cpus_allowed(&status),
        ));
    }
    let main = &threads
        .iter()
        .find(|(tid, _)| *tid == pid.to_string())
        .unwrap()
        .1;
    assert_eq!(*main, first.to_string(), "{threads:?}");
    assert!(
        threads.iter().any(|(_, cpus)| *cpus == ours),
        "the routing threads keep every CPU ({ours}): {threads:?}"
    );
    terminate(child.id());
    assert!(child.wait().unwrap().success());

    // A CPU the process may not use is refused, naming the flag or the key.
    let err = refused(&net, &config(&dir, ""), &["--io-cpu", "1023"]);
    assert!(err.contains("--io-cpu = 1023"), "{err}");
    let cfg = config(&dir, "[sm]\nio_cpu = 1023\n");
    let err = refused(&net, &cfg, &[]);
    assert!(
        err.contains(&format!("{}: sm.io_cpu = 1023", cfg.display())),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
