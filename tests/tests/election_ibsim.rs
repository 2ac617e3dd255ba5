//! Several SMs on one ibsim fabric (`testdata/2sw-2path-4ca.net`), each through its own
//! libumad2sim client on its own node: ibsm and OpenSM elect the higher priority as master
//! whichever starts first, each hands the subnet over to a better one of the other, and a
//! standby (ibsm or OpenSM) takes over when an ibsm master stops, keeping every LID.
//! `sminfo` (infiniband-diags) and OpenSM's own log are the independent witnesses.
//!
//! Needs ibsim, libumad2sim, infiniband-diags, opensm, `unshare`/`nsenter` and root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use ibsm_tests::{
    Background, Ibsim, Scratch, end_port_lids, fabric_file, ibsm_bin, program, wait_for_text,
};
use sm_mad::Guid;

fn start_sim(dir: &Path) -> Ibsim {
    std::fs::write(dir.join("fabric.net"), fabric_file("2sw-2path-4ca.net")).unwrap();
    Ibsim::start(dir, "fabric.net", &[], false)
}

/// `ibsm run --umad` on `host` with `args`, logging to `log` in the scratch directory.
fn ibsm(sim: &Ibsim, host: &str, args: &[&str], log: &str) -> Background {
    let mut all = vec!["run", "--umad"];
    all.extend_from_slice(args);
    let mut c = sim.ibsm(&ibsm_bin!(), Some(host), &all, 300);
    c.stdout(Stdio::null())
        .stderr(std::fs::File::create(sim.dir.join(log)).unwrap());
    Background(c.spawn().unwrap())
}

/// OpenSM on `host` with `priority`; its log is `osm-<host>/osm.log`.
fn opensm(sim: &Ibsim, host: &str, priority: u8) -> Background {
    opensm_with(sim, host, priority, &[])
}

/// OpenSM with `options` lines in an options file (`-F`).
fn opensm_with(sim: &Ibsim, host: &str, priority: u8, options: &[&str]) -> Background {
    let osm = sim.dir.join(format!("osm-{host}"));
    std::fs::create_dir_all(&osm).unwrap();
    let log = osm.join("osm.log");
    let conf = osm.join("opensm.conf");
    std::fs::write(&conf, options.join("\n") + "\n").unwrap();
    let priority = priority.to_string();
    let mut args = vec!["-f", log.to_str().unwrap(), "-d", "2", "-p", &priority];
    if !options.is_empty() {
        args.extend(["-F", conf.to_str().unwrap()]);
    }
    let mut c = sim.command(&program("opensm"), &args, 300);
    c.env("SIM_HOST", host)
        .env("OSM_TMP_DIR", &osm)
        .env("OSM_CACHE_DIR", &osm)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Background(c.spawn().unwrap())
}

fn wait_for_log(sim: &Ibsim, name: &str, what: &str, secs: u64) {
    wait_for_text(&sim.dir.join(name), what, secs);
}

/// What `sminfo` (run from `host`) says of the SM at `lid`, or of the one its port points at:
/// (GUID, state name).
fn sminfo(sim: &Ibsim, host: &str, lid: Option<u16>) -> (Guid, String) {
    let lid = lid.map(|l| l.to_string()).unwrap_or_default();
    let out = sim.script(&format!("SIM_HOST={host} t sminfo {lid}"), 30);
    let text = String::from_utf8_lossy(&out.stdout);
    let guid = text
        .split("sm guid ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|g| g.trim().parse::<Guid>().ok())
        .unwrap_or_else(|| panic!("sminfo: {text}{}", String::from_utf8_lossy(&out.stderr)));
    let state = text
        .split_whitespace()
        .last()
        .unwrap_or_default()
        .to_string();
    (guid, state)
}

/// Port GUID of every end port with its LID, as ibnetdiscover reports them.
fn lids(sim: &Ibsim) -> BTreeMap<Guid, u16> {
    end_port_lids(&sim.discover())
        .into_iter()
        .map(|(g, lid)| (g, lid.0))
        .collect()
}

/// Port GUID of a host's port 1 in ibsim's numbering of this fabric.
fn hca_port_guid(sim: &Ibsim, host: &str) -> Guid {
    let f = sim.discover();
    f.end_ports()
        .map(|p| f.port(p))
        .find(|p| f.node(p.node).description.contains(host) && p.remote.is_some())
        .map(|p| p.guid)
        .unwrap_or_else(|| panic!("{host} not in ibnetdiscover's output"))
}

#[test]
fn ibsm_stands_by_for_a_better_opensm() {
    let scratch = Scratch::new("election", "standby");
    let sim = start_sim(scratch.path());
    let _osm = opensm(&sim, "host-1", 10);
    wait_for_log(&sim, "osm-host-1/osm.log", "SUBNET UP", 60);
    let master = hca_port_guid(&sim, "host-1");
    let before = lids(&sim);
    let out = sim
        .ibsm(
            &ibsm_bin!(),
            Some("host-2"),
            &[
                "run",
                "--umad",
                "--once",
                "--report",
                "json",
                "--priority",
                "3",
            ],
            60,
        )
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["sm_state"], "standby", "{report}");
    assert_eq!(report["subnet_up"], false);
    assert_eq!(report["master_guid"], master.to_string());
    assert_eq!(report["port_info_sets"], 0, "a standby sets nothing");
    assert_eq!(report["lft_blocks_sent"], 0);
    assert_eq!(
        sminfo(&sim, "host-3", None),
        (master, "SMINFO_MASTER".into())
    );
    assert_eq!(lids(&sim), before, "nothing was reprogrammed");
}

#[test]
fn opensm_stands_by_for_a_better_ibsm() {
    let scratch = Scratch::new("election", "osm-standby");
    let sim = start_sim(scratch.path());
    let _ibsm = ibsm(&sim, "host-1", &["--priority", "10"], "ibsm.log");
    wait_for_log(&sim, "ibsm.log", "sweeping until", 60);
    let _osm = opensm(&sim, "host-2", 0);
    wait_for_log(&sim, "osm-host-2/osm.log", "Entering STANDBY state", 60);
    let ours = hca_port_guid(&sim, "host-1");
    assert_eq!(sminfo(&sim, "host-3", None), (ours, "SMINFO_MASTER".into()));
    let log = std::fs::read_to_string(sim.dir.join("osm-host-2/osm.log")).unwrap();
    assert!(
        !log.contains("Entering MASTER state"),
        "OpenSM took the subnet:\n{log}"
    );
    // ibsm's SA lists both SMs (SMInfoRecord), OpenSM with its priority.
    let theirs = hca_port_guid(&sim, "host-2");
    let out = sim.script("SIM_HOST=host-3 t saquery SMIR", 30);
    let text = String::from_utf8_lossy(&out.stdout);
    let records: Vec<&str> = text.split("SMInfoRecord dump:").skip(1).collect();
    assert_eq!(records.len(), 2, "{text}");
    let find = |g: Guid| {
        records
            .iter()
            .find(|r| r.contains(&format!("GUID..................{g}")))
            .unwrap_or_else(|| panic!("no record of {g}: {text}"))
    };
    assert!(find(ours).contains("Priority..............10"), "{text}");
    assert!(find(theirs).contains("Priority..............0"), "{text}");
}

#[test]
fn ibsm_hands_the_subnet_over_to_a_better_opensm() {
    let scratch = Scratch::new("election", "handover");
    let sim = start_sim(scratch.path());
    let _ibsm = ibsm(&sim, "host-1", &["--priority", "3"], "ibsm.log");
    wait_for_log(&sim, "ibsm.log", "sweeping until", 60);
    let before = lids(&sim);
    // OpenSM finds a lesser master, stands by, and asks for the subnet with a trap 144;
    // ibsm's heavy sweep then hands it over.
    let _osm = opensm(&sim, "host-2", 10);
    wait_for_log(&sim, "ibsm.log", "handover accepted", 60);
    wait_for_log(&sim, "ibsm.log", "entering STANDBY state", 10);
    wait_for_log(&sim, "osm-host-2/osm.log", "Entering MASTER state", 30);
    // OpenSM's sweep as master does not finish under ibsim: ibsim drops every TrapRepress,
    // so the trap 144 OpenSM sent stays outstanding (the shim never times a MAD out) and
    // OpenSM waits for it. Each SM's own SMInfo is the witness here.
    let theirs = hca_port_guid(&sim, "host-2");
    let ours = hca_port_guid(&sim, "host-1");
    assert_eq!(
        sminfo(&sim, "host-3", Some(before[&theirs])),
        (theirs, "SMINFO_MASTER".into())
    );
    assert_eq!(
        sminfo(&sim, "host-3", Some(before[&ours])),
        (ours, "SMINFO_STANDBY".into())
    );
}

#[test]
fn a_standby_ibsm_takes_over_when_the_master_stops() {
    let scratch = Scratch::new("election", "failover");
    let sim = start_sim(scratch.path());
    let conf = sim.dir.join("standby.toml");
    std::fs::write(
        &conf,
        format!(
            "[sm]\nstate_dir = \"{}\"\nsm_poll_interval_ms = 200\nsm_poll_retries = 2\n",
            sim.dir.join("standby-state").display()
        ),
    )
    .unwrap();
    let mut master = ibsm(&sim, "host-1", &["--priority", "9"], "master.log");
    wait_for_log(&sim, "master.log", "sweeping until", 60);
    let before = lids(&sim);
    let _standby = ibsm(
        &sim,
        "host-2",
        &["--priority", "2", "--config", conf.to_str().unwrap()],
        "standby.log",
    );
    wait_for_log(&sim, "standby.log", "entering STANDBY state", 60);
    master.stop();
    wait_for_log(&sim, "standby.log", "master lost", 30);
    wait_for_log(&sim, "standby.log", "SUBNET UP", 30);
    let new = hca_port_guid(&sim, "host-2");
    assert_eq!(sminfo(&sim, "host-3", None), (new, "SMINFO_MASTER".into()));
    assert_eq!(lids(&sim), before, "the new master keeps every LID");
    // CAs reach one another through the new master's tables.
    let cas: Vec<u16> = ["host-1", "host-2", "host-3", "host-4"]
        .iter()
        .map(|h| before[&hca_port_guid(&sim, h)])
        .collect();
    for (s, d) in [(cas[0], cas[3]), (cas[2], cas[1]), (cas[3], cas[2])] {
        let out = sim.tool_ok(&["ibtracert", &s.to_string(), &d.to_string()], 30);
        assert!(
            out.lines()
                .any(|l| l.starts_with("To ") && l.contains(&format!("lid {d}-{d}"))),
            "{s} -> {d}: {out}"
        );
    }
}

#[test]
fn opensm_hands_the_subnet_over_to_a_better_ibsm() {
    let scratch = Scratch::new("election", "osm-handover");
    let sim = start_sim(scratch.path());
    let _osm = opensm(&sim, "host-1", 3);
    wait_for_log(&sim, "osm-host-1/osm.log", "SUBNET UP", 60);
    let before = lids(&sim);
    let _ibsm = ibsm(&sim, "host-2", &["--priority", "10"], "ibsm.log");
    // OpenSM sees a better SM (standing by, or still discovering) and hands over.
    wait_for_log(&sim, "ibsm.log", "handover received", 60);
    wait_for_log(&sim, "ibsm.log", "sweeping until", 60);
    wait_for_log(&sim, "osm-host-1/osm.log", "Entering STANDBY state", 30);
    let ours = hca_port_guid(&sim, "host-2");
    assert_eq!(sminfo(&sim, "host-3", None), (ours, "SMINFO_MASTER".into()));
    assert_eq!(lids(&sim), before, "ibsm keeps the LIDs OpenSM gave");
}

#[test]
fn a_standby_opensm_takes_over_from_a_dead_ibsm() {
    let scratch = Scratch::new("election", "osm-failover");
    let sim = start_sim(scratch.path());
    let mut master = ibsm(&sim, "host-1", &["--priority", "9"], "ibsm.log");
    wait_for_log(&sim, "ibsm.log", "sweeping until", 60);
    let before = lids(&sim);
    let _osm = opensm_with(
        &sim,
        "host-2",
        1,
        &["sminfo_polling_timeout 500", "polling_retry_number 2"],
    );
    wait_for_log(&sim, "osm-host-2/osm.log", "Entering STANDBY state", 60);
    master.stop();
    wait_for_log(&sim, "osm-host-2/osm.log", "SUBNET UP", 60);
    let theirs = hca_port_guid(&sim, "host-2");
    assert_eq!(
        sminfo(&sim, "host-3", None),
        (theirs, "SMINFO_MASTER".into())
    );
    assert_eq!(lids(&sim), before, "OpenSM keeps the LIDs ibsm gave");
}
