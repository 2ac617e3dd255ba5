//! ibsm's SA under ibsim, compared with OpenSM's on the same fabric. For each fabric:
//!
//! - ibsim in one network namespace with `ibsm run --umad` kept running in the background
//!   (from its scratch directory), and ibsim in another with OpenSM, both SMs on the same
//!   host's port (the same port GUID);
//! - `saquery` from another node of each fabric: NodeRecord and PortInfoRecord of every end
//!   port (and every switch port), PathRecord between CA pairs, SwitchInfoRecord of every
//!   switch, LinkRecord of every CA port, SMInfoRecord — single-record queries only (the
//!   umad shim delivers only the first MAD of an RMPP answer);
//! - every answer is compared field by field with OpenSM's, LIDs translated to GUIDs (the
//!   two SMs number LIDs differently), all fields but those listed in [`IGNORED`] (with
//!   the reason) and a switch's LocalPort (the port the reading SMP entered by);
//! - and NodeRecords are checked against the fabric itself (node GUIDs, descriptions).
//!
//! Needs ibsim, libumad2sim, infiniband-diags, opensm, `unshare`/`nsenter` and root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use ibsm_tests::{
    Background, Ibsim, Scratch, end_port_lids, fabric_file, ibsm_bin, program, wait_for_text,
};
use sm_core::fabric::{Fabric, NodeKind};
use sm_core::generate::{FatTree2, GenSpec, IbsimLimits, generate};
use sm_core::read_topology_str;
use sm_core::topo::{WriteOptions, write_ibnetdiscover};
use sm_mad::Guid;

/// Fields that legitimately differ between the two SMs: (record, field, why).
const IGNORED: &[(&str, &str, &str)] = &[(
    "SMInfoRecord",
    "ActCount",
    "each SM counts the SMPs it sent",
)];

/// One fabric to compare on.
struct Case {
    name: &'static str,
    net: String,
    /// The node (ibsim node id) the SMs run on.
    sm_host: String,
    /// The node the clients run on.
    client: String,
    /// Cap on ordered CA pairs for PathRecord.
    max_pairs: usize,
}

/// A fabric file of `testdata/` with hosts `host-1` (the SMs) and `host-2` (the client).
fn example(name: &'static str) -> Case {
    Case {
        name,
        net: fabric_file(name),
        sm_host: "host-1".into(),
        client: "host-2".into(),
        max_pairs: 64,
    }
}

/// `saquery` output: one map of field -> value per record.
fn records(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut out: Vec<BTreeMap<String, String>> = Vec::new();
    for line in text.lines() {
        if line.trim_end().ends_with("dump:") && !line.starts_with('\t') {
            out.push(BTreeMap::new());
            continue;
        }
        let t = line.trim();
        let Some(dots) = t.find("..") else {
            continue;
        };
        let key = t[..dots].trim_end_matches(':').trim().to_string();
        let value = t[dots..].trim_start_matches(['.', ':']).trim().to_string();
        if key.is_empty() {
            continue;
        }
        if out.is_empty() {
            out.push(BTreeMap::new());
        }
        if let Some(r) = out.last_mut() {
            r.insert(key, value);
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

/// One SM's world: its ibsim, the SM, and what ibnetdiscover says LIDs are.
struct World {
    sim: Ibsim,
    _sm: Background,
    /// LID -> port GUID of every end port.
    guid_of: BTreeMap<u16, Guid>,
    /// Port GUID -> LID.
    lid_of: BTreeMap<Guid, u16>,
    /// The LIDs of switches.
    switch_lids: std::collections::BTreeSet<u16>,
}

fn start(dir: &Path, case: &Case, ours: bool, flags: &[String]) -> World {
    std::fs::write(dir.join("fabric.net"), &case.net).unwrap();
    let sim = Ibsim::start(dir, "fabric.net", flags, false);
    let log_path = dir.join("sm.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child = if ours {
        let mut c = sim.ibsm(&ibsm_bin!(), Some(&case.sm_host), &["run", "--umad"], 300);
        c.stdout(Stdio::null()).stderr(log);
        c.spawn().unwrap()
    } else {
        let osm = dir.join("osm");
        std::fs::create_dir_all(&osm).unwrap();
        let log_file = osm.join("osm.log");
        let mut c = sim.command(
            &program("opensm"),
            &["-f", log_file.to_str().unwrap(), "-d", "2"],
            300,
        );
        c.env("SIM_HOST", &case.sm_host)
            .env("OSM_TMP_DIR", &osm)
            .env("OSM_CACHE_DIR", &osm)
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        c.spawn().unwrap()
    };
    let sm = Background(child);
    if ours {
        wait_for_text(&log_path, "sweeping until", 60);
    } else {
        wait_for_text(&dir.join("osm/osm.log"), "SUBNET UP", 60);
    }
    let seen = sim.discover();
    let switch_lids = seen
        .switches()
        .filter_map(|n| seen.port_of(n, 0))
        .map(|p| seen.port(p).lid.0)
        .filter(|&l| l != 0)
        .collect();
    let guid_of: BTreeMap<u16, Guid> = end_port_lids(&seen)
        .into_iter()
        .filter(|(_, lid)| lid.0 != 0)
        .map(|(g, lid)| (lid.0, g))
        .collect();
    let lid_of = guid_of.iter().map(|(&l, &g)| (g, l)).collect();
    World {
        sim,
        _sm: sm,
        guid_of,
        lid_of,
        switch_lids,
    }
}

/// Runs saquery commands (from the client node) in one script; returns each one's output.
fn queries(w: &World, client: &str, cmds: &[String]) -> Vec<String> {
    let lines: Vec<String> = cmds
        .iter()
        .map(|c| format!("SIM_HOST={client} t saquery {c}"))
        .collect();
    w.sim.each(&lines)
}

/// A field whose value is a LID, in terms of GUIDs.
fn lid_fields(record: &str) -> &'static [&'static str] {
    match record {
        "NodeRecord" => &["lid"],
        "PortInfoRecord" => &["EndPortLid", "Lid", "SMLid"],
        "PathRecord" => &["dlid", "slid"],
        "SwitchInfoRecord" => &["LID"],
        "LinkRecord" => &["FromLID", "ToLID"],
        "SMInfoRecord" => &["LID"],
        "MCMemberRecord" => &["Mlid"],
        _ => &[],
    }
}

/// A record with LIDs replaced by the GUID of their port and ignored fields dropped.
fn normal(record: &str, r: &BTreeMap<String, String>, w: &World) -> BTreeMap<String, String> {
    let mut n = BTreeMap::new();
    for (k, v) in r {
        if IGNORED.iter().any(|(rec, f, _)| *rec == record && f == k) {
            continue;
        }
        // Every port of a switch names as LocalPort the port the reading SMP came in
        // through: it depends on the path each SM read the switch by, not on what it set.
        if record == "PortInfoRecord"
            && k == "LocalPort"
            && r.get("EndPortLid")
                .and_then(|l| l.parse::<u16>().ok())
                .is_some_and(|l| w.switch_lids.contains(&l))
        {
            continue;
        }
        let v = if lid_fields(record).contains(&k.as_str()) {
            match v.parse::<u16>() {
                Ok(0) => "0".to_string(),
                Ok(l) => w
                    .guid_of
                    .get(&l)
                    .map_or_else(|| format!("lid {l}?"), |g| g.to_string()),
                Err(_) => v.clone(),
            }
        } else {
            v.clone()
        };
        n.insert(k.clone(), v);
    }
    n
}

/// Compares one query's answers from both SMs; returns how many records were compared.
fn compare(record: &str, what: &str, ours: &str, theirs: &str, a: &World, b: &World) -> usize {
    let (x, y) = (records(ours), records(theirs));
    assert!(
        !x.is_empty() && !ours.contains("!! failed"),
        "{what}: ibsm gave no {record}:\n{ours}"
    );
    assert_eq!(
        x.len(),
        y.len(),
        "{what}: record counts\nibsm:\n{ours}\nOpenSM:\n{theirs}"
    );
    for (r, s) in x.iter().zip(&y) {
        let (r, s) = (normal(record, r, a), normal(record, s, b));
        assert_eq!(r, s, "{what}: {record} differs (ibsm left, OpenSM right)");
    }
    x.len()
}

fn check(case: Case) {
    let started = std::time::Instant::now();
    let topo = read_topology_str(&case.net, Path::new("fabric.net"))
        .unwrap()
        .fabric;
    let flags: Vec<String> = IbsimLimits::of(&topo)
        .flags()
        .split_whitespace()
        .map(String::from)
        .collect();
    let s1 = Scratch::new("sa", &format!("{}-ibsm", case.name));
    let s2 = Scratch::new("sa", &format!("{}-osm", case.name));
    let ours = start(s1.path(), &case, true, &flags);
    let theirs = start(s2.path(), &case, false, &flags);
    assert_eq!(
        ours.lid_of.keys().collect::<Vec<_>>(),
        theirs.lid_of.keys().collect::<Vec<_>>(),
        "both SMs give LIDs to the same ports"
    );

    // The questions, in each SM's LIDs; (record, description, ibsm's, OpenSM's).
    let mut qs: Vec<(&str, String, String, String)> = Vec::new();
    let ask = |g: &Guid, w: &World| w.lid_of[g];
    let by_guid: Vec<Guid> = ours.lid_of.keys().copied().collect();
    let kind_of = |g: Guid| {
        topo.port_by_guid(g)
            .map(|p| topo.node(topo.port(p).node).kind)
            .unwrap_or(NodeKind::Ca)
    };
    for g in &by_guid {
        let (l1, l2) = (ask(g, &ours), ask(g, &theirs));
        qs.push((
            "NodeRecord",
            format!("NR {g}"),
            format!("NR {l1}"),
            format!("NR {l2}"),
        ));
        match kind_of(*g) {
            NodeKind::Switch => {
                let node = topo.port(topo.port_by_guid(*g).unwrap()).node;
                // Port 0 and the cabled ports: for a port without a link OpenSM keeps no
                // PortInfo and answers one zeroed but for the state (Down, Polling), where
                // ibsm answers what the port reported.
                let cabled = topo
                    .node_ports(node)
                    .filter(|&p| topo.port(p).num == 0 || topo.port(p).remote.is_some())
                    .map(|p| topo.port(p).num)
                    .collect::<Vec<u8>>();
                for p in cabled {
                    qs.push((
                        "PortInfoRecord",
                        format!("PIR {g}/{p}"),
                        format!("PIR {l1}/{p}"),
                        format!("PIR {l2}/{p}"),
                    ));
                }
                qs.push((
                    "SwitchInfoRecord",
                    format!("SWIR {g}"),
                    format!("SWIR {l1}"),
                    format!("SWIR {l2}"),
                ));
            }
            _ => {
                let p = topo.port(topo.port_by_guid(*g).unwrap()).num;
                qs.push((
                    "PortInfoRecord",
                    format!("PIR {g}/{p}"),
                    format!("PIR {l1}/{p}"),
                    format!("PIR {l2}/{p}"),
                ));
                qs.push((
                    "LinkRecord",
                    format!("LR {g}/{p}"),
                    format!("LR {l1}/{p}"),
                    format!("LR {l2}/{p}"),
                ));
            }
        }
    }
    qs.push(("SMInfoRecord", "SMIR".into(), "SMIR".into(), "SMIR".into()));
    // The default partition's IPoIB broadcast group, which both SMs create at start.
    qs.push((
        "MCMemberRecord",
        "MCMR (IPoIB broadcast group)".into(),
        "-g".into(),
        "-g".into(),
    ));
    let bcast = "PR --dgid ff12:401b:ffff::ffff:ffff".to_string();
    qs.push((
        "PathRecord",
        "PR to the broadcast group".into(),
        bcast.clone(),
        bcast,
    ));
    let cas: Vec<Guid> = by_guid
        .iter()
        .copied()
        .filter(|&g| kind_of(g) != NodeKind::Switch)
        .collect();
    let mut pairs = 0;
    'pairs: for &s in &cas {
        for &d in &cas {
            if pairs >= case.max_pairs {
                break 'pairs;
            }
            if s == d {
                continue;
            }
            pairs += 1;
            let pr = |w: &World| format!("PR --slid {} --dlid {}", ask(&s, w), ask(&d, w));
            qs.push((
                "PathRecord",
                format!("PR {s} -> {d}"),
                pr(&ours),
                pr(&theirs),
            ));
        }
    }
    // Switch to switch and CA to switch paths too (switch port 0 MTU/rate).
    let switches: Vec<Guid> = by_guid
        .iter()
        .copied()
        .filter(|&g| kind_of(g) == NodeKind::Switch)
        .collect();
    for (&s, &d) in cas.iter().zip(switches.iter().rev()) {
        let pr = |w: &World| format!("PR --slid {} --dlid {}", ask(&s, w), ask(&d, w));
        qs.push((
            "PathRecord",
            format!("PR {s} -> {d}"),
            pr(&ours),
            pr(&theirs),
        ));
    }

    let a: Vec<String> = qs.iter().map(|q| q.2.clone()).collect();
    let b: Vec<String> = qs.iter().map(|q| q.3.clone()).collect();
    let xa = queries(&ours, &case.client, &a);
    let xb = queries(&theirs, &case.client, &b);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for ((q, x), y) in qs.iter().zip(&xa).zip(&xb) {
        *counts.entry(q.0).or_default() += compare(q.0, &q.1, x, y, &ours, &theirs);
    }
    // NodeRecords against the fabric itself.
    for (q, x) in qs.iter().zip(&xa).filter(|(q, _)| q.0 == "NodeRecord") {
        let r = &records(x)[0];
        let g: Guid = r["port_guid"].parse().unwrap();
        let p = topo
            .port_by_guid(g)
            .unwrap_or_else(|| panic!("{}: port {g} not in the fabric", q.1));
        assert_eq!(
            r["NodeDescription"],
            topo.node(topo.port(p).node).description,
            "{}",
            q.1
        );
    }
    // A join: osmtest's multicast flow joins the client's port to the broadcast group (and
    // leaves it a full member); both SMs then show the same membership to a trusted query.
    let client_guid = topo
        .nodes()
        .iter()
        .position(|n| n.description == case.client || n.guid.to_string() == case.client)
        .and_then(|n| {
            topo.node_ports(sm_core::NodeIdx(n as u32))
                .find(|&p| topo.port(p).remote.is_some())
        });
    let join = |w: &World| -> (String, String) {
        let c = &case.client;
        let body = format!(
            "SIM_HOST={c} t osmtest -f m >/dev/null 2>&1; \
             SIM_HOST={c} t saquery --smkey 1 MCMR --mgid ff12:401b:ffff::ffff:ffff; echo '@@'; \
             for l in {}; do SIM_HOST={c} t ibroute -M $l; done",
            w.lid_of
                .iter()
                .filter(|(g, _)| kind_of(**g) == NodeKind::Switch)
                .map(|(_, l)| l.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
        let out = w.sim.script(&body, 120);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (a, b) = text.split_once("@@").unwrap_or((&text, ""));
        (a.to_string(), b.to_string())
    };
    let (x, mfts) = join(&ours);
    let (y, _) = join(&theirs);
    let members = compare(
        "MCMemberRecord",
        "MCMR after a join",
        &x,
        &y,
        &ours,
        &theirs,
    );
    *counts.entry("MCMemberRecord").or_default() += members;
    if let Some(p) = client_guid {
        let gid = format!("fe80::{}", {
            let g = topo.port(p).guid.0;
            let groups: Vec<String> = (0..4)
                .map(|i| format!("{:x}", (g >> (48 - 16 * i)) & 0xffff))
                .collect();
            groups.join(":").trim_start_matches(['0', ':']).to_string()
        });
        assert!(
            records(&x).iter().any(|r| r["PortGid"] == gid),
            "the client's port {gid} is a member:\n{x}"
        );
    }
    assert!(
        mfts.lines().any(|l| l.trim_start().starts_with("0xc000")),
        "ibsm programmed the broadcast group's MLID into the switches:\n{mfts}"
    );
    eprintln!(
        "{}: {:?} records compared with OpenSM ({} PathRecord pairs) in {:.1} s",
        case.name,
        counts,
        pairs,
        started.elapsed().as_secs_f64()
    );
    drop(ours);
    drop(theirs);
    drop(s1);
    drop(s2);
}

#[test]
fn sa_matches_opensm_on_dual_port_hosts() {
    check(example("2sw-2path-2ca-2port.net"));
}

/// 2-level fat-tree, 18 hosts: more PathRecord pairs through more switches.
#[test]
fn sa_matches_opensm_on_a_fat_tree() {
    let f: Fabric = generate(&GenSpec::FatTree2(FatTree2::new(6))).unwrap();
    let mut text = Vec::new();
    write_ibnetdiscover(&f, &WriteOptions::default(), &mut text).unwrap();
    let net = String::from_utf8(text).unwrap();
    // ibsim names nodes by the quoted id of their header line.
    let ids: Vec<String> = net
        .lines()
        .filter(|l| l.starts_with("Ca"))
        .filter_map(|l| l.split('"').nth(1).map(String::from))
        .take(2)
        .collect();
    check(Case {
        name: "ft2-6",
        net,
        sm_host: ids[0].clone(),
        client: ids[1].clone(),
        max_pairs: 60,
    });
}
