//! `ibsm run --umad` under ibsim, through the libumad2sim shim: `[sm] port_guid` picks the
//! umad port by the port GUID the shim's sysfs shows (GID 0), and SIGHUP does not end the
//! SM. Needs ibsim, libumad2sim and root, like the other ibsim tests.

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
fn sighup_does_not_end_the_sm_on_a_umad_port() {
    let (_dir, sim) = start("sighup");
    let mut child = ibsm(&sim, &["run", "--umad"], 120)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut wait_for = |what: &str| {
        for l in lines.by_ref() {
            if l.unwrap().contains(what) {
                return;
            }
        }
        panic!("ibsm ended before logging {what:?}");
    };
    wait_for("sweeping until SIGINT/SIGTERM");
    // The child is `timeout`, which passes SIGHUP and SIGTERM on to ibsm.
    let pid = child.id().to_string();
    let kill = |sig: &str| {
        let ok = Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} {pid}");
    };
    kill("-HUP");
    wait_for("SIGHUP received and ignored");
    assert!(child.try_wait().unwrap().is_none(), "SIGHUP ended the SM");
    kill("-TERM");
    wait_for("shutting down");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}
