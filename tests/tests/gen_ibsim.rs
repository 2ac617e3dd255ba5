//! Generated fabrics load into ibsim unchanged: each test writes a generated fabric as a net
//! file, starts ibsim on it in a private network namespace, runs `ibnetdiscover` through the
//! libumad2sim shim, and checks that what ibsim serves is the fabric we generated (node
//! GUIDs, kinds, descriptions, port GUIDs and every link by GUID and port).
//!
//! Needs ibsim, libumad2sim, infiniband-diags and `unshare -n` (root or user namespaces);
//! a missing piece fails the test with an install hint.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use ibsm_tests::{INSTALL, Scratch, program, shim};

use sm_core::fabric::Fabric;
use sm_core::generate::{
    DragonflyPlus, FatTree2, FatTree3, GenSpec, Grid, IbsimLimits, Random, generate,
};
use sm_core::read_topology_str;
use sm_core::topo::{WriteOptions, write_ibnetdiscover};

/// Runs ibsim on the fabric and returns what ibnetdiscover finds in it.
///
/// ibsim and ibnetdiscover share one private network namespace (ibsim's sockets are
/// abstract unix sockets, global per namespace). The script polls: ibnetdiscover fails
/// while ibsim is still parsing, so it is retried until it succeeds. ibsim is killed when
/// the script exits, however it exits; `timeout` bounds the whole run.
const SCRIPT: &str = r#"
set -u
ip link set lo up || { echo "ip link set lo up failed" >&2; exit 90; }
"$IBSIM" -s fabric.net --no-console $IBSIM_LIMITS > ibsim.log 2>&1 &
sim=$!
cleanup() { kill "$sim" 2>/dev/null; wait "$sim" 2>/dev/null; }
trap cleanup EXIT
trap 'exit 143' TERM INT
for i in $(seq 1 150); do
  if ! kill -0 "$sim" 2>/dev/null; then echo "ibsim exited early" >&2; exit 91; fi
  if LD_PRELOAD="$SHIM" "$TIMEOUT" 60 "$DISC" > discovered.txt 2> discover.err; then exit 0; fi
  sleep 0.2
done
echo "ibnetdiscover never succeeded" >&2
exit 92
"#;

fn discover(name: &str, fabric: &Fabric) -> Fabric {
    let (ibsim, disc, unshare, timeout) = (
        program("ibsim"),
        program("ibnetdiscover"),
        program("unshare"),
        program("timeout"),
    );
    let shim = shim();
    let scratch = Scratch::new("gen-ibsim", name);
    let dir = &scratch.0;
    let mut text = Vec::new();
    write_ibnetdiscover(fabric, &WriteOptions::default(), &mut text).unwrap();
    std::fs::write(dir.join("fabric.net"), &text).unwrap();

    let out = Command::new(&timeout)
        .args(["--kill-after=5", "240"])
        .arg(&unshare)
        .args(["-n", "bash", "-c", SCRIPT])
        .current_dir(dir)
        .env("IBSIM", &ibsim)
        .env("IBSIM_LIMITS", IbsimLimits::of(fabric).flags())
        .env("SHIM", &shim)
        .env("DISC", &disc)
        .env("TIMEOUT", &timeout)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", unshare.display()));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    assert!(
        out.status.success(),
        "ibsim run failed ({}): {}\n--- ibsim.log\n{}\n--- discover.err\n{}\n\
         (unshare -n needs root or user namespaces; {INSTALL})",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        read("ibsim.log"),
        read("discover.err"),
    );
    let found = read("discovered.txt");
    read_topology_str(&found, &dir.join("discovered.txt"))
        .unwrap_or_else(|e| panic!("ibnetdiscover output does not parse: {e}"))
        .fabric
}

/// Nodes (GUID, kind, description, ports), CA port GUIDs and links by GUID and port.
fn shape(f: &Fabric) -> Vec<String> {
    let mut out = Vec::new();
    for n in f.nodes() {
        out.push(format!(
            "node {} {:?} \"{}\" ports={}",
            n.guid, n.kind, n.description, n.num_ports
        ));
    }
    for p in f.end_ports() {
        let port = f.port(p);
        out.push(format!("port {} {}", f.node(port.node).guid, port.guid));
    }
    for (a, b) in f.links() {
        let (pa, pb) = (f.port(a), f.port(b));
        let x = (f.node(pa.node).guid, pa.num);
        let y = (f.node(pb.node).guid, pb.num);
        let (x, y) = if x <= y { (x, y) } else { (y, x) };
        out.push(format!("link {}[{}] {}[{}]", x.0, x.1, y.0, y.1));
    }
    out.sort();
    out
}

fn assert_ibsim_serves(name: &str, spec: GenSpec) {
    let fabric = generate(&spec).unwrap();
    let found = discover(name, &fabric);
    let (want, got) = (shape(&fabric), shape(&found));
    if want != got {
        let missing: Vec<_> = want.iter().filter(|l| !got.contains(l)).take(10).collect();
        let extra: Vec<_> = got.iter().filter(|l| !want.contains(l)).take(10).collect();
        panic!("{name}: ibsim serves another fabric\nmissing: {missing:#?}\nextra: {extra:#?}");
    }
}

#[test]
fn fat_tree2_radix_8() {
    assert_ibsim_serves("ft2", GenSpec::FatTree2(FatTree2::new(8)));
}

#[test]
fn torus_with_size_2_dimension() {
    assert_ibsim_serves("torus", GenSpec::Torus(Grid::new(vec![4, 3, 2], 1)));
}

#[test]
fn fat_tree3_pruned() {
    assert_ibsim_serves(
        "ft3",
        GenSpec::FatTree3(FatTree3 {
            pods: Some(3),
            ..FatTree3::new(6)
        }),
    );
}

#[test]
fn dragonfly_plus() {
    assert_ibsim_serves(
        "dfp",
        GenSpec::DragonflyPlus(DragonflyPlus {
            groups: 5,
            leaves_per_group: 2,
            spines_per_group: 2,
            hosts_per_leaf: 2,
            global_per_spine: 2,
            radix: None,
            ca_ports: 1,
        }),
    );
}

#[test]
fn random_with_two_port_cas() {
    assert_ibsim_serves(
        "random",
        GenSpec::Random(Random {
            switches: 12,
            radix: 8,
            hosts_per_switch: 2,
            links: None,
            seed: 3,
            ca_ports: 2,
        }),
    );
}

/// 320 switches: beyond ibsim's default of 256, so this needs the `-S` the generator
/// reports.
#[test]
fn beyond_ibsim_defaults_with_reported_limits() {
    let spec = GenSpec::FatTree3(FatTree3::new(16));
    let limits = IbsimLimits::of(&generate(&spec).unwrap());
    assert_eq!(limits.switches, 320);
    assert_ibsim_serves("ft3-16", spec);
}

#[test]
fn install_hint_names_the_packages() {
    // The failure message a missing tool produces must say how to install it.
    let err = std::panic::catch_unwind(|| program("ibsm-no-such-tool")).unwrap_err();
    let msg = err.downcast_ref::<String>().unwrap();
    assert!(msg.contains("apt-get install ibsim-utils libumad2sim0 infiniband-diags"));
}
