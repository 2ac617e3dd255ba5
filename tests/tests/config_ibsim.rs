//! `ibsm run --umad` under ibsim, through the libumad2sim shim: `[sm] port_guid` picks the
//! umad port by the port GUID the shim's sysfs shows (GID 0), and SIGHUP reads the
//! configuration again: a new partition reaches the hosts, a bad file is refused. Needs ibsim, libumad2sim and root, like the other ibsim tests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use ibsm_tests::{Ibsim, Scratch, fabric_file, ibsm_bin};
use sm_core::lid::LidStore;
use sm_mad::Guid;

/// host-2's port 1 (ibsim numbers a node's ports after its node GUID, 0x100003).
const HCA2_PORT1: Guid = Guid(0x0000_0000_0010_0004);

/// ibsim on two switches and two two-port hosts; the SM runs as host-2.
fn start(name: &str) -> (Scratch, Ibsim) {
    let dir = Scratch::new("config-ibsim", name);
    std::fs::write(
        dir.path().join("net"),
        fabric_file("2sw-2path-2ca-2port.net"),
    )
    .unwrap();
    let sim = Ibsim::start(dir.path(), "net", &[], false);
    (dir, sim)
}

fn ibsm(sim: &Ibsim, args: &[&str], secs: u32) -> Command {
    let mut c = sim.command(&ibsm_bin!(), args, secs);
    c.env("RUST_LOG", "info").env("SIM_HOST", "host-2");
    c
}

#[test]
fn port_guid_picks_the_umad_port() {
    let (dir, sim) = start("port-guid");
    std::fs::write(
        dir.path().join("here.toml"),
        format!("[sm]\nport_guid = \"{HCA2_PORT1}\"\nstate_dir = \"state\"\n"),
    )
    .unwrap();
    let out = ibsm(
        &sim,
        &[
            "run",
            "--umad",
            "--once",
            "--report",
            "json",
            "--config",
            "here.toml",
        ],
        60,
    )
    .output()
    .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["subnet_up"], true, "{report:#}");
    let store = LidStore::load(&dir.path().join("state/guid2lid")).unwrap();
    let lid = store.get(HCA2_PORT1).unwrap().base.0;
    assert_eq!(u64::from(lid), report["sm_lid"].as_u64().unwrap());

    // host-1's port is not local to this SM: an error naming the GUID and what is there.
    std::fs::write(
        dir.path().join("elsewhere.toml"),
        "[sm]\nport_guid = \"0x0000000000100001\"\n",
    )
    .unwrap();
    let out = ibsm(
        &sim,
        &["run", "--umad", "--once", "--config", "elsewhere.toml"],
        60,
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("elsewhere.toml: sm.port_guid")
            && err.contains("no umad port has port GUID 0x0000000000100001")
            && err.contains(&format!("ibsim0:1 {HCA2_PORT1}")),
        "{err}"
    );
    // --umad DEVICE:PORT wins over the configuration.
    let out = ibsm(
        &sim,
        &[
            "run",
            "--umad",
            "ibsim0:1",
            "--once",
            "--config",
            "elsewhere.toml",
        ],
        60,
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sighup_reloads_partitions_and_refuses_a_bad_file() {
    let (dir, sim) = start("sighup");
    let cfg = dir.path().join("ibsm.toml");
    let write = |parts: &str| {
        std::fs::write(
            &cfg,
            format!("[sm]\nstate_dir = \"state\"\nsmp_timeout_ms = 50\n{parts}"),
        )
        .unwrap()
    };
    write("");
    let mut child = ibsm(&sim, &["run", "--umad", "--config", "ibsm.toml"], 120)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut wait_for = |what: &str| {
        for l in lines.by_ref() {
            let l = l.unwrap();
            if l.contains(what) {
                return l;
            }
        }
        panic!("ibsm ended before logging {what:?}");
    };
    wait_for("sweeping until SIGINT/SIGTERM");
    // The child is `timeout`, which passes a signal on but then, with --kill-after, kills
    // ibsm a few seconds later: SIGHUP goes to ibsm itself, found under it.
    let pid = child.id().to_string();
    let mut sm_pid = pid.clone();
    for _ in 0..4 {
        let comm = std::fs::read_to_string(format!("/proc/{sm_pid}/comm")).unwrap_or_default();
        if comm.starts_with("ibsm") {
            break;
        }
        let out = Command::new("pgrep")
            .args(["-P", &sm_pid])
            .output()
            .unwrap();
        sm_pid = String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
    }
    let kill = |sig: &str| {
        let to = if sig == "-HUP" { &sm_pid } else { &pid };
        let ok = Command::new("kill")
            .args([sig, to])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} {to}");
    };
    let lid = LidStore::load(&dir.path().join("state/guid2lid"))
        .unwrap()
        .get(HCA2_PORT1)
        .unwrap()
        .base;
    let pkeys = || sim.tool_ok(&["smpquery", "pkeys", &lid.0.to_string(), "1"], 20);
    assert!(!pkeys().contains("0x8010"), "{}", pkeys());
    // A new partition: read on SIGHUP, programmed without a restart.
    write(
        "[partitions]\ntext = \"\"\"\nDefault=0x7fff : ALL, SELF=full ;\n\
         Storage=0x0010 : ALL=full ;\n\"\"\"\n",
    );
    kill("-HUP");
    let l = wait_for("SIGHUP: configuration read again");
    assert!(l.contains("applied: partitions"), "{l}");
    let got = ibsm_tests::poll(
        std::time::Duration::from_secs(20),
        std::time::Duration::from_millis(100),
        || pkeys().contains("0x8010").then_some(()),
    );
    assert!(
        got.is_some(),
        "the new partition never reached host-2: {}",
        pkeys()
    );
    // A file that does not read is refused with its line; the SM runs on as it was.
    std::fs::write(&cfg, "[sm]\nsmp_timeout_ms = \"soon\"\n").unwrap();
    kill("-HUP");
    let l = wait_for("running configuration stays");
    assert!(l.contains("ibsm.toml:2"), "{l}");
    assert!(child.try_wait().unwrap().is_none(), "SIGHUP ended the SM");
    assert!(pkeys().contains("0x8010"));
    kill("-TERM");
    wait_for("shutting down");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}
