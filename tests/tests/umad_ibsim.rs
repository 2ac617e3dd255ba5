//! `ibsm run --umad` against ibsim, through the libumad2sim shim, checked with the real
//! diag tools. Each fabric gets its own network namespace with its own ibsim; then:
//!
//! - `ibsm run --umad --once --report json` brings the subnet up, with the topology's counts,
//!   and exits cleanly (the shim's fake sysfs directory is gone);
//! - `ibnetdiscover` sees every node with the LID ibsm assigned (its `guid2lid` dump);
//! - `iblinkinfo` shows every cabled port ACTIVE;
//! - `ibroute` on every switch reads back the tables in ibsm's `opensm-lfts.dump`;
//! - `ibtracert` succeeds between CA pairs (all pairs on small fabrics, a seeded sample on
//!   large ones);
//! - `smpquery portinfo` shows the SM's LID, the neighbour MTU and the operational VLs;
//! - and, with the SM left running, ibsim's console `Unlink` / `ReLink` raise Trap 128,
//!   which the SM answers with a new sweep that routes around the link and back.
//!
//! Needs ibsim, libumad2sim, infiniband-diags, `unshare`/`nsenter` and root; a missing piece
//! fails the test with an install hint.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use ibsm_tests::{
    Background, Ibsim, Scratch, end_port_lids, fabric_file, ibsm_bin, poll, wait_for_text,
};
use sm_core::dump::{Lfts, read_lfts, read_lfts_str};
use sm_core::fabric::NodeKind;
use sm_core::generate::{FatTree2, FatTree3, GenSpec, Grid, IbsimLimits, Random, generate};
use sm_core::lid::LidStore;
use sm_core::read_topology_str;
use sm_core::topo::{WriteOptions, write_ibnetdiscover};
use sm_mad::{Guid, Lid};

/// What the test expects of one fabric.
struct Case {
    name: &'static str,
    /// The net file's text.
    net: String,
    /// `SIM_HOST` for the SM (a CA node name of the file); `None`: the file's first node.
    sm_host: Option<&'static str>,
    /// Node description of the SM's node, to find its port in what ibnetdiscover sees.
    sm_desc: String,
    /// Cap on ibtracert pairs (all ordered pairs when there are fewer).
    max_pairs: usize,
    /// Cap on ports queried with smpquery.
    max_ports: usize,
    /// Routing engine: a deadlock-free one where minhop's tables would have credit loops
    /// (`ibsm run --once` refuses to call those a success); off a tree, auto routes with
    /// the VL-layered engine, its SLs and SL-to-VL tables.
    routing: &'static str,
}

/// A fabric file of `testdata/`.
fn example(name: &'static str, sm_host: &'static str) -> Case {
    Case {
        name,
        net: fabric_file(name),
        sm_host: Some(sm_host),
        sm_desc: sm_host.to_string(),
        max_pairs: 200,
        max_ports: 64,
        routing: "minhop",
    }
}

fn generated(name: &'static str, spec: GenSpec, max_pairs: usize, max_ports: usize) -> Case {
    let fabric = generate(&spec).unwrap();
    let mut text = Vec::new();
    write_ibnetdiscover(&fabric, &WriteOptions::default(), &mut text).unwrap();
    // The generator puts CAs first: with no SIM_HOST the SM runs on host 0.
    let first = fabric.node(sm_core::NodeIdx(0));
    assert_eq!(first.kind, NodeKind::Ca);
    let tree = matches!(
        spec,
        GenSpec::FatTree2(_) | GenSpec::FatTree3(_) | GenSpec::KaryNTree(_)
    );
    Case {
        routing: if tree { "minhop" } else { "auto" },
        name,
        net: String::from_utf8(text).unwrap(),
        sm_host: None,
        sm_desc: first.description.clone(),
        max_pairs,
        max_ports,
    }
}

/// Whether the shim left a fake sysfs directory behind (it removes it at a clean exit).
fn leftover_sysfs(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("sys-"))
        .collect()
}

fn ibsm(sim: &Ibsim, case: &Case, args: &[&str], secs: u32) -> Command {
    sim.ibsm(&ibsm_bin!(), case.sm_host, args, secs)
}

/// A tiny seeded generator for sampling pairs (no dependency, same sample every run).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Up to `max` ordered pairs of distinct items: all of them when they fit, else a sample.
fn pairs(items: &[u16], max: usize) -> Vec<(u16, u16)> {
    let all: Vec<(u16, u16)> = items
        .iter()
        .flat_map(|&a| items.iter().filter(move |&&b| b != a).map(move |&b| (a, b)))
        .collect();
    if all.len() <= max {
        return all;
    }
    let mut rng = Lcg(0x001b_5eed);
    let mut picked = BTreeSet::new();
    while picked.len() < max {
        picked.insert(all[rng.below(all.len())]);
    }
    picked.into_iter().collect()
}

/// The value of `Field:.....value` in smpquery output.
fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix(':')?;
        Some(rest.trim_start_matches('.').trim())
    })
}

/// Separates the outputs of batched commands.
const MARK: &str = "@@ibsm-batch@@\n";

/// Runs diag commands (each a tool and its arguments) in one script inside the namespace
/// and returns each one's stdout, with "!! failed" appended when it failed. A command that
/// failed or whose output `good` rejects runs once more on its own: under load a diag tool
/// on the shim now and then goes wrong, and one retry tells that from a real fault.
fn batch(
    sim: &Ibsim,
    name: &str,
    cmds: &[Vec<String>],
    good: impl Fn(&str) -> bool,
) -> Vec<String> {
    let body: String = cmds
        .iter()
        .map(|c| {
            format!(
                "printf '{}'; t {} || echo '!! failed'\n",
                MARK.replace('\n', "\\n"),
                c.join(" ")
            )
        })
        .collect();
    let out = sim.script(&body, 900);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    std::fs::write(sim.dir.join(format!("{name}.out")), &text).unwrap();
    let mut outputs: Vec<String> = text.split(MARK).skip(1).map(String::from).collect();
    assert_eq!(
        outputs.len(),
        cmds.len(),
        "{name}: the batch stopped early: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (o, c) in outputs.iter_mut().zip(cmds) {
        if o.contains("!! failed") || !good(o) {
            eprintln!("{c:?} went wrong; once more on its own:\n{o}");
            let args: Vec<&str> = c.iter().map(String::as_str).collect();
            let again = sim.tool(&args, 60);
            *o = String::from_utf8_lossy(&again.stdout).into_owned();
            if !again.status.success() {
                o.push_str("\n!! failed\n");
            }
        }
    }
    outputs
}

/// Brings the fabric up with `ibsm run --umad --once` and checks it with the diag tools.
fn check(case: Case) {
    let started = std::time::Instant::now();
    let scratch = Scratch::new("umad", case.name);
    let dir = scratch.path();
    std::fs::write(dir.join("fabric.net"), &case.net).unwrap();
    let topo = read_topology_str(&case.net, &dir.join("fabric.net"))
        .unwrap()
        .fabric;
    let want = topo.counts();
    let limits = IbsimLimits::of(&topo).flags();
    let flags: Vec<String> = limits.split_whitespace().map(String::from).collect();
    let sim = Ibsim::start(dir, "fabric.net", &flags, false);
    let sysfs_before = leftover_sysfs(dir);

    // 1. Bring-up.
    let out = ibsm(
        &sim,
        &case,
        &[
            "run",
            "--umad",
            "--once",
            "--routing",
            case.routing,
            "--report",
            "json",
            "--dump-dir",
            "dump",
        ],
        120,
    )
    .output()
    .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: ibsm failed\n{log}", case.name);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["subnet_up"], true, "{report:#}");
    assert_eq!(report["nodes"], want.nodes, "{report:#}");
    assert_eq!(report["switches"], want.switches, "{report:#}");
    assert_eq!(report["cas"], want.cas, "{report:#}");
    assert_eq!(report["links"], want.links, "{report:#}");
    assert_eq!(report["mads_lost"], 0, "{report:#}");
    assert_eq!(report["credit_loops"], 0, "{report:#}");
    assert!(log.contains("SUBNET UP"), "{log}");
    assert!(
        log.contains("header=56"),
        "the shim needs the 56-byte header: {log}"
    );
    assert_eq!(
        leftover_sysfs(dir),
        sysfs_before,
        "ibsm did not exit cleanly: the shim's sysfs is still there"
    );
    let sm_lid = Lid(report["sm_lid"].as_u64().unwrap() as u16);
    let store = LidStore::load(&dir.join("dump/guid2lid")).unwrap();
    let ours: Lfts = read_lfts(&dir.join("dump/opensm-lfts.dump")).unwrap();

    // 2. ibnetdiscover: every node, with our LIDs.
    let f = &sim.discover();
    let got = f.counts();
    assert_eq!(
        (got.nodes, got.switches, got.cas, got.links),
        (want.nodes, want.switches, want.cas, want.links)
    );
    let lids = end_port_lids(f);
    for (&guid, &lid) in &lids {
        let assigned = store
            .get(guid)
            .unwrap_or_else(|| panic!("{guid}: no LID in ibsm's guid2lid"));
        assert_eq!(lid, assigned.base, "port {guid}: fabric LID vs ibsm's");
        assert!(lid.0 != 0);
    }
    let distinct: BTreeSet<Lid> = lids.values().copied().collect();
    assert_eq!(distinct.len(), lids.len(), "LIDs are not unique");
    // The SM runs where we put it.
    let sm_node = f
        .nodes()
        .iter()
        .position(|n| n.description == case.sm_desc)
        .unwrap_or_else(|| panic!("no node {:?} in ibnetdiscover output", case.sm_desc));
    let sm_ports: Vec<Lid> = f
        .node_ports(sm_core::NodeIdx(sm_node as u32))
        .filter(|&p| f.port(p).remote.is_some())
        .map(|p| f.port(p).lid)
        .collect();
    assert!(
        sm_ports.contains(&sm_lid),
        "SM LID {sm_lid} vs {sm_ports:?}"
    );

    // 3. iblinkinfo: every cabled port ACTIVE.
    let info = sim.tool_ok(&["iblinkinfo"], 60);
    let mut active = 0;
    for l in info.lines().filter(|l| l.contains("==(")) {
        if l.contains("LinkUp") {
            assert!(l.contains("Active/"), "port not ACTIVE: {l}");
            active += 1;
        }
    }
    assert_eq!(active, 2 * want.links, "{info}");

    // 4. ibroute on every switch reads back our tables.
    let switch_lids: Vec<(Guid, Lid)> = f
        .switches()
        .map(|n| {
            let p = f.port_of(n, 0).unwrap();
            (f.node(n).guid, f.port(p).lid)
        })
        .collect();
    let cmds: Vec<Vec<String>> = switch_lids
        .iter()
        .map(|(_, l)| vec!["ibroute".into(), l.0.to_string()])
        .collect();
    let parse = |o: &str| read_lfts_str(o, &dir.join("ibroute.out"));
    let mut theirs = Lfts::new();
    for (o, c) in batch(&sim, "ibroute", &cmds, |o| parse(o).is_ok())
        .iter()
        .zip(&cmds)
    {
        let lfts = parse(o).unwrap_or_else(|e| panic!("{c:?}: output does not parse: {e}\n{o}"));
        theirs.switches.extend(lfts.switches);
    }
    for (guid, _) in &switch_lids {
        let a = ours.switch(*guid).expect("switch missing from our dump");
        let b = theirs.switch(*guid).expect("switch missing from ibroute");
        let a: BTreeSet<(Lid, u8)> = a.routes().filter(|r| r.0.0 != 0).collect();
        let b: BTreeSet<(Lid, u8)> = b.routes().filter(|r| r.0.0 != 0).collect();
        assert_eq!(a, b, "switch {guid}: programmed LFT differs from ibsm's");
    }

    // 5. ibtracert between CA ports.
    let ca_lids: Vec<u16> = f
        .cas()
        .flat_map(|n| f.node_ports(n))
        .filter(|&p| f.port(p).remote.is_some())
        .map(|p| f.port(p).lid.0)
        .collect();
    let chosen = pairs(&ca_lids, case.max_pairs);
    let cmds: Vec<Vec<String>> = chosen
        .iter()
        .map(|(s, d)| vec!["ibtracert".into(), s.to_string(), d.to_string()])
        .collect();
    let arrived = |o: &str, d: &str| {
        o.lines()
            .any(|l| l.starts_with("To ") && l.contains(&format!("lid {d}-{d}")))
    };
    let outs = batch(&sim, "ibtracert", &cmds, |o| !o.contains("!! failed"));
    for (o, c) in outs.iter().zip(&cmds) {
        assert!(!o.contains("!! failed"), "{c:?} failed: {o}");
        assert!(arrived(o, &c[2]), "{c:?} did not arrive: {o}");
    }

    // 6. smpquery portinfo: SM LID on end ports, MTU and VLs on every sampled link port.
    let mut ports: Vec<(u16, u8, bool)> = Vec::new(); // (lid, port, end port)
    for (i, n) in f.nodes().iter().enumerate() {
        let idx = sm_core::NodeIdx(i as u32);
        let base = f.port_of(idx, 0).map(|p| f.port(p).lid.0).unwrap_or(0);
        for p in f.node_ports(idx) {
            let port = f.port(p);
            if n.kind == NodeKind::Switch {
                if port.num == 0 {
                    ports.push((port.lid.0, 0, true));
                } else if port.remote.is_some() {
                    ports.push((base, port.num, false));
                }
            } else if port.remote.is_some() {
                ports.push((port.lid.0, port.num, true));
            }
        }
    }
    let mut rng = Lcg(7);
    while ports.len() > case.max_ports {
        ports.swap_remove(rng.below(ports.len()));
    }
    let cmds: Vec<Vec<String>> = ports
        .iter()
        .map(|(l, p, _)| {
            vec![
                "smpquery".into(),
                "portinfo".into(),
                l.to_string(),
                p.to_string(),
            ]
        })
        .collect();
    let sections = batch(&sim, "smpquery", &cmds, |o| field(o, "SMLid").is_some());
    for ((section, (_, port, end)), head) in sections.iter().zip(&ports).zip(&cmds) {
        assert!(!section.contains("!! failed"), "{head:?} failed");
        if *end {
            assert_eq!(
                field(section, "SMLid"),
                Some(sm_lid.0.to_string().as_str()),
                "{head:?}"
            );
        }
        if *port != 0 || !end {
            // Every ibsim port has the same caps, so the negotiated values are the caps
            // (VLCap VL0-7 is below the SM's default cap of VL0-14).
            assert_eq!(field(section, "LinkState"), Some("Active"), "{head:?}");
            assert_eq!(
                field(section, "OperVLs"),
                field(section, "VLCap"),
                "{head:?}: {section}"
            );
            assert_eq!(
                field(section, "NeighborMTU"),
                field(section, "MtuCap"),
                "{head:?}"
            );
        }
    }
    eprintln!(
        "{}: {} nodes up in {} ms (sweep {} ms, {} MADs); {} switch tables, {} traced pairs, \
         {} ports checked; {:.1} s in all",
        case.name,
        want.nodes,
        report["wall_ms"].as_f64().unwrap_or(0.0).round(),
        report["sweep_ms"].as_f64().unwrap_or(0.0).round(),
        report["mads_sent"],
        switch_lids.len(),
        chosen.len(),
        ports.len(),
        started.elapsed().as_secs_f64()
    );
    drop(sim);
    drop(scratch);
}

#[test]
fn two_switches_two_hosts() {
    check(example("2sw-2ca.net", "host-1"));
}

#[test]
fn two_switches_two_paths_four_hosts() {
    check(example("2sw-2path-4ca.net", "host-1"));
}

#[test]
fn two_switches_two_paths_dual_port_hosts() {
    check(example("2sw-2path-2ca-2port.net", "host-1"));
}

#[test]
fn fat_tree2_radix_8() {
    check(generated(
        "ft2-8",
        GenSpec::FatTree2(FatTree2::new(8)),
        200,
        48,
    ));
}

/// 128 hosts, 80 switches: a 3-level fat-tree of a few hundred nodes.
#[test]
fn fat_tree3_radix_8() {
    check(generated(
        "ft3-8",
        GenSpec::FatTree3(FatTree3::new(8)),
        80,
        48,
    ));
}

#[test]
fn torus_4x3x2() {
    check(generated(
        "torus",
        GenSpec::Torus(Grid::new(vec![4, 3, 2], 1)),
        200,
        48,
    ));
}

#[test]
fn random_graph() {
    check(generated(
        "random",
        GenSpec::Random(Random {
            switches: 12,
            radix: 8,
            hosts_per_switch: 2,
            links: None,
            seed: 3,
            ca_ports: 1,
        }),
        120,
        48,
    ));
}

/// The SM in the background, holding IsSM: ibsim's Unlink and ReLink raise Trap 128 at
/// both ends, the SM represses them and sweeps, and traffic follows the fabric.
#[test]
fn traps_reroute_around_a_link_and_back() {
    let case = example("2sw-2path-4ca.net", "host-1");
    let scratch = Scratch::new("umad", "traps");
    let dir = scratch.path();
    std::fs::write(dir.join("fabric.net"), &case.net).unwrap();
    let mut sim = Ibsim::start(dir, "fabric.net", &[], true);
    let sysfs_before = leftover_sysfs(dir);
    let log_path = dir.join("sm.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut sm = Background(
        ibsm(&sim, &case, &["run", "--umad", "--state-dir", "state"], 300)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let count = |what: &str| read_log().lines().filter(|l| l.contains(what)).count();
    let wait_for = |what: &str, n: usize| {
        poll(Duration::from_secs(30), Duration::from_millis(20), || {
            (count(what) >= n).then_some(())
        })
        .unwrap_or_else(|| panic!("never saw {n} x {what:?} in the SM's log:\n{}", read_log()));
    };
    wait_for("sweeping until SIGINT/SIGTERM", 1);

    // Where does host-1 -> host-4 cross between the switches?
    let f = &sim.discover();
    let lid_of = |desc: &str| {
        let n = f
            .nodes()
            .iter()
            .position(|n| n.description == desc)
            .unwrap();
        f.node_ports(sm_core::NodeIdx(n as u32))
            .find(|&p| f.port(p).remote.is_some())
            .map(|p| f.port(p).lid.0)
            .unwrap()
    };
    let (src, dst) = (lid_of("host-1"), lid_of("host-4"));
    let trace = |sim: &Ibsim| sim.tool_ok(&["ibtracert", &src.to_string(), &dst.to_string()], 20);
    // The hop out of sw-a: "[5] -> switch port {...}[5] ... "sw-b"".
    let exit_port = |t: &str| -> u8 {
        let l = t
            .lines()
            .find(|l| l.contains("\"sw-b\"") && l.starts_with('['))
            .unwrap_or_else(|| panic!("no hop into sw-b: {t}"));
        l[1..l.find(']').unwrap()].parse().unwrap()
    };
    let before = exit_port(&trace(&sim));
    let repairs = count("repaired");
    let traps = count("trap 128 (LinkStateChange) from \"sw-");

    sim.console(&format!("Unlink \"sw-a\"[{before}]"));
    wait_for("trap 128 (LinkStateChange) from \"sw-", traps + 1);
    // Not a heavy sweep: a repair of what the traps are about.
    wait_for("repaired", repairs + 1);
    assert_eq!(
        count("SUBNET UP"),
        1,
        "a heavy sweep after the trap:\n{}",
        read_log()
    );
    // The repair routes over the remaining link.
    let detour = poll(Duration::from_secs(10), Duration::from_millis(50), || {
        let out = sim.tool(&["ibtracert", &src.to_string(), &dst.to_string()], 20);
        let t = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success() && t.contains("To ca")).then(|| exit_port(&t))
    })
    .unwrap_or_else(|| panic!("no route after Unlink:\n{}", read_log()));
    assert_ne!(detour, before, "still routed over the unlinked port");

    let repairs = count("repaired");
    let traps = count("trap 128 (LinkStateChange) from \"sw-");
    sim.console(&format!("ReLink \"sw-a\"[{before}]"));
    wait_for("trap 128 (LinkStateChange) from \"sw-", traps + 1);
    wait_for("repaired", repairs + 1);
    // Back to the original path, every link ACTIVE again.
    poll(Duration::from_secs(10), Duration::from_millis(50), || {
        let info = sim.tool_ok(&["iblinkinfo"], 20);
        let up = info.lines().filter(|l| l.contains("LinkUp")).count();
        let active = info.lines().filter(|l| l.contains("Active/")).count();
        (up == 12 && active == 12).then_some(())
    })
    .unwrap_or_else(|| panic!("links not all ACTIVE after ReLink:\n{}", read_log()));
    assert!(trace(&sim).contains("To ca"));

    // SIGTERM: a clean exit (the shim's sysfs removed, LIDs saved).
    let status = sm.terminate();
    assert!(status.success(), "{status:?}\n{}", read_log());
    assert!(read_log().contains("shutting down"));
    assert_eq!(
        leftover_sysfs(dir),
        sysfs_before,
        "ibsm left the shim's sysfs"
    );
    let saved = std::fs::read_to_string(dir.join("state/guid2lid")).unwrap();
    assert!(saved.lines().filter(|l| !l.trim().is_empty()).count() >= 6);
    drop(sim);
    drop(scratch);
}

/// `ibsm events` on another host subscribes at ibsm's SA over umad; an Unlink's Trap 128
/// reaches it as a Report, which it answers (the SA then stops sending it again).
#[test]
fn trap_reports_reach_an_event_listener() {
    let case = example("2sw-2path-4ca.net", "host-1");
    let scratch = Scratch::new("umad", "events");
    let dir = scratch.path();
    std::fs::write(dir.join("fabric.net"), &case.net).unwrap();
    let mut sim = Ibsim::start(dir, "fabric.net", &[], true);
    let log_path = dir.join("sm.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut sm = Background(
        ibsm(&sim, &case, &["run", "--umad"], 300)
            .env("RUST_LOG", "info,sm_daemon::sa=debug")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    wait_for_text(&log_path, "sweeping until SIGINT/SIGTERM", 30);

    let ev_out = dir.join("events.out");
    let ev_err = dir.join("events.err");
    let mut listener = sim.ibsm(
        &ibsm_bin!(),
        Some("host-2"),
        &[
            "events",
            "--issm",
            "--trap",
            "128",
            "--count",
            "1",
            "--timeout",
            "30",
        ],
        60,
    );
    listener
        .stdout(std::fs::File::create(&ev_out).unwrap())
        .stderr(std::fs::File::create(&ev_err).unwrap());
    let mut listener = listener.spawn().unwrap();
    wait_for_text(&ev_err, "subscribed at the SA", 30);

    sim.console("Unlink \"sw-a\"[3]");
    let status = listener.wait().unwrap();
    let out = read(&ev_out);
    assert!(status.success(), "{}\n{}", read(&ev_err), read(&log_path));
    let line = out
        .lines()
        .find(|l| l.starts_with("trap 128 "))
        .unwrap_or_else(|| panic!("no trap 128 Report:\n{out}\n{}", read(&ev_err)));
    assert!(line.contains("\"issuer_gid\""), "{line}");
    assert!(read(&ev_err).contains("1 Reports"));
    // Answered: never given up, and the listener's unsubscribe went through.
    wait_for_text(&log_path, "event subscription removed", 30);
    assert!(!read(&log_path).contains("given up"), "{}", read(&log_path));
    let status = sm.terminate();
    assert!(status.success());
    drop(sim);
    drop(scratch);
}
