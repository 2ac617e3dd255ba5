//! SLs end to end under ibsim: `ibsm run --umad` with the default engine (auto) on a
//! Dragonfly and on a torus, which are no fat-trees, so they route with the VL-layered
//! engine (the torus in dimension order on dateline SLs). Checked with the
//! real tools against what ibsm says it chose (its `ibsm-path-sl.dump`):
//!
//! - `saquery PR` answers every sampled pair with the SL of its path;
//! - `smpquery sl2vl` reads, on every switch and every output port, SL `i` on VL `i` for
//!   each SL the paths use, from every input port (port 0 included);
//! - `ibtracert` follows every sampled pair to its destination.
//!
//! Needs ibsim, libumad2sim, infiniband-diags, `unshare`/`nsenter` and root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use ibsm_tests::{Background, Ibsim, Scratch, ibsm_bin, poll, wait_for_text};
use sm_core::fabric::NodeKind;
use sm_core::generate::{Dragonfly, GenSpec, Grid, IbsimLimits, generate};
use sm_core::topo::{WriteOptions, write_ibnetdiscover};
use sm_mad::Lid;
use sm_routing::sl::SourceSl;

/// Runs one tool per line of `cmds` in one script inside the namespace; each output.
fn batch(sim: &Ibsim, cmds: &[String]) -> Vec<String> {
    let lines: Vec<String> = cmds.iter().map(|c| format!("t {c}")).collect();
    sim.each(&lines)
}

/// The hexadecimal value of `name.....0x1` in saquery output.
fn hex_field(text: &str, name: &str) -> Option<u8> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix(name)?;
        let v = rest.trim_start_matches('.').trim();
        u8::from_str_radix(v.strip_prefix("0x")?, 16).ok()
    })
}

#[test]
fn a_dragonfly_under_ibsim_gets_its_sls_in_path_records_and_sl2vl_tables() {
    let fabric = generate(&GenSpec::Dragonfly(Dragonfly::new(5, 4, 2))).unwrap();
    let seen = layered_under_ibsim("dragonfly", &fabric);
    assert!(
        seen.vls >= 2,
        "the dragonfly's paths need more than one VL: {:?}",
        seen.used
    );
}

#[test]
fn a_torus_under_ibsim_goes_dimension_by_dimension_on_its_dateline_sls() {
    // Rings of five and six: two datelines each, four SLs.
    let fabric = generate(&GenSpec::Torus(Grid::new(vec![5, 6], 1))).unwrap();
    let seen = layered_under_ibsim("torus", &fabric);
    assert_eq!(
        seen.dumped,
        (0..4).collect(),
        "the SLs of the torus's paths, as ibsm dumped them"
    );
    assert!(
        seen.log.contains("grid 5-ring x 6-ring"),
        "the SM did not route the torus as a grid: {}",
        seen.log
    );
    // Every traced path is a shortest one, counted in the fabric ibnetdiscover saw.
    let topo = sm_routing::Topo::new(&seen.fabric).unwrap();
    let hops = topo.hop_matrix();
    let sw_of = |lid: u16| topo.dest_of(Lid(lid)).unwrap().sw;
    for (out, (s, d)) in &seen.traces {
        // One `[port] -> switch port {guid}...` line per switch on the way.
        let switches = out
            .lines()
            .filter(|l| l.starts_with('[') && l.contains("] -> switch port {"))
            .count();
        let shortest = usize::from(hops.get(sw_of(*s), sw_of(*d))) + 1;
        assert_eq!(switches, shortest, "ibtracert {s} {d}: {out}");
    }
}

/// What one layered run under ibsim showed.
struct Seen {
    fabric: sm_core::Fabric,
    /// SLs the sampled path records carried.
    used: std::collections::BTreeSet<u8>,
    vls: u8,
    /// SLs of every CA-to-CA path in ibsm's path-SL dump.
    dumped: std::collections::BTreeSet<u8>,
    log: String,
    /// `ibtracert` output for sampled (source, destination) LID pairs.
    traces: Vec<(String, (u16, u16))>,
}

/// Brings `fabric` up under ibsim with `ibsm run --umad` (engine auto, so layered) and
/// checks with the real tools that path records carry the dumped SLs, every switch maps SL
/// `i` to VL `i`, and sampled pairs are delivered.
fn layered_under_ibsim(name: &str, fabric: &sm_core::Fabric) -> Seen {
    let scratch = Scratch::new("layered", name);
    let dir = scratch.path();
    let mut net = Vec::new();
    write_ibnetdiscover(fabric, &WriteOptions::default(), &mut net).unwrap();
    std::fs::write(dir.join("fabric.net"), &net).unwrap();
    let flags: Vec<String> = IbsimLimits::of(fabric)
        .flags()
        .split_whitespace()
        .map(String::from)
        .collect();
    let sim = Ibsim::start(dir, "fabric.net", &flags, false);
    let host = fabric.node(sm_core::NodeIdx(0)).description.clone();
    assert_eq!(fabric.node(sm_core::NodeIdx(0)).kind, NodeKind::Ca);
    let log_path = dir.join("sm.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut c = sim.ibsm(
        &ibsm_bin!(),
        Some(&host),
        &["run", "--umad", "--dump-dir", "dump"],
        300,
    );
    c.stdout(Stdio::null()).stderr(log);
    let _sm = Background(c.spawn().unwrap());
    wait_for_text(&log_path, "sweeping until", 60);
    let sl_path = dir.join("dump/ibsm-path-sl.dump");
    let text = poll(Duration::from_secs(30), Duration::from_millis(50), || {
        std::fs::read_to_string(&sl_path).ok()
    })
    .expect("ibsm wrote no path-SL dump: the auto engine did not layer the dragonfly");
    let sls = SourceSl::parse(&text, "ibsm-path-sl.dump").unwrap();
    let log_text = std::fs::read_to_string(&log_path).unwrap();
    assert!(log_text.contains("layered"), "{log_text}");

    let seen = sim.discover();
    let ca_lids: Vec<u16> = seen
        .cas()
        .flat_map(|n| seen.node_ports(n))
        .filter(|&p| seen.port(p).remote.is_some())
        .map(|p| seen.port(p).lid.0)
        .collect();
    // Every ordered pair from a few sources, every destination.
    let pairs: Vec<(u16, u16)> = ca_lids
        .iter()
        .step_by(3)
        .flat_map(|&s| {
            ca_lids
                .iter()
                .filter(move |&&d| d != s)
                .map(move |&d| (s, d))
        })
        .collect();

    // saquery PR: the SL ibsm's routes chose.
    let cmds: Vec<String> = pairs
        .iter()
        .map(|(s, d)| format!("saquery PR --src-to-dst {s}:{d}"))
        .collect();
    let mut used = std::collections::BTreeSet::new();
    for (out, &(s, d)) in batch(&sim, &cmds).iter().zip(&pairs) {
        assert!(!out.contains("!! failed"), "PR {s} -> {d}: {out}");
        let sl = hex_field(out, "sl").unwrap_or_else(|| panic!("PR {s} -> {d}: {out}"));
        assert_eq!(Some(sl), sls.get(Lid(s), Lid(d)), "PR {s} -> {d}: SL");
        used.insert(sl);
    }
    let vls = *used.iter().max().unwrap() + 1;

    // smpquery sl2vl: SL i on VL i for every SL in use, from every input port.
    let switches: Vec<(u16, Vec<u8>)> = seen
        .switches()
        .map(|n| {
            let lid = seen.port(seen.port_of(n, 0).unwrap()).lid.0;
            let outs = seen
                .node_ports(n)
                .filter(|&p| seen.port(p).num != 0 && seen.port(p).remote.is_some())
                .map(|p| seen.port(p).num)
                .collect();
            (lid, outs)
        })
        .collect();
    let cmds: Vec<String> = switches
        .iter()
        .flat_map(|(lid, outs)| {
            outs.iter()
                .map(move |o| format!("smpquery sl2vl {lid} {o}"))
        })
        .collect();
    let outs = batch(&sim, &cmds);
    assert!(!outs.is_empty());
    for (out, cmd) in outs.iter().zip(&cmds) {
        assert!(!out.contains("!! failed"), "{cmd}: {out}");
        let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("ports:")).collect();
        assert!(!rows.is_empty(), "{cmd}: {out}");
        for row in rows {
            let vl: Vec<u8> = row
                .rsplit(':')
                .next()
                .unwrap()
                .split('|')
                .filter_map(|v| v.trim().parse().ok())
                .collect();
            assert_eq!(vl.len(), 16, "{cmd}: {row}");
            for sl in 0..vls {
                assert_eq!(vl[sl as usize], sl, "{cmd}: {row}: SL {sl}");
            }
        }
    }

    // ibtracert follows the routes.
    let cmds: Vec<String> = pairs
        .iter()
        .step_by(4)
        .map(|(s, d)| format!("ibtracert {s} {d}"))
        .collect();
    let traced: Vec<(u16, u16)> = pairs.iter().step_by(4).copied().collect();
    let outs = batch(&sim, &cmds);
    for (out, cmd) in outs.iter().zip(&cmds) {
        let d = cmd.rsplit(' ').next().unwrap();
        assert!(
            out.lines()
                .any(|l| l.starts_with("To ") && l.contains(&format!("lid {d}-{d}"))),
            "{cmd} did not arrive: {out}"
        );
    }
    let dumped = ca_lids
        .iter()
        .flat_map(|&a| {
            ca_lids
                .iter()
                .filter_map(move |&b| (a != b).then_some((a, b)))
        })
        .filter_map(|(a, b)| sls.get(Lid(a), Lid(b)))
        .collect();
    Seen {
        fabric: seen,
        used,
        vls,
        dumped,
        log: std::fs::read_to_string(&log_path).unwrap(),
        traces: outs.into_iter().zip(traced).collect(),
    }
}
