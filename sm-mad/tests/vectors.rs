//! The codec against MADs that independent software produced: requests infiniband-diags
//! sent, ibsim's SMA answers and OpenSM's SA and SMInfo answers, captured by
//! `tools/capture-vectors.sh` into `tests/vectors/*.mad` (format and caveats in the README
//! there).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use sm_mad::smp::Route;
use sm_mad::{MgmtClass, attr, mad, node_description, node_info, smp};

// ---------------------------------------------------------------------------------------------
// Loader

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Request,
    Response,
}

/// One `.mad` file.
#[derive(Debug)]
struct Vector {
    /// The file name without `.mad`, e.g. `sa_pathrecord.resp`.
    name: String,
    /// The diag command line that produced it.
    command: String,
    fabric: String,
    sm: String,
    direction: Direction,
    /// `# expect: field=value` lines, in file order: what the diag itself printed.
    expects: Vec<(String, String)>,
    bytes: Vec<u8>,
}

impl Vector {
    fn expect(&self, key: &str) -> Option<&str> {
        self.expects
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn is_smp(&self) -> bool {
        matches!(self.bytes.get(1), Some(0x01 | 0x81))
    }
}

/// Parses the text of one vector file; errors name the file and line.
fn parse_vector(name: &str, file: &str, text: &str) -> Result<Vector, String> {
    let mut command = None;
    let mut fabric_sm = None;
    let mut direction = None;
    let mut expects = Vec::new();
    let mut bytes = Vec::new();
    let mut short_line = None;
    for (i, line) in text.lines().enumerate() {
        let at = |msg: String| format!("{file}:{}: {msg}", i + 1);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            if !bytes.is_empty() {
                return Err(at("comment after the hex data".into()));
            }
            let comment = comment.trim_start();
            let once = |seen: bool, what: &str| match seen {
                true => Err(at(format!("second `{what}` line"))),
                false => Ok(()),
            };
            if let Some(v) = comment.strip_prefix("command:") {
                once(command.is_some(), "command")?;
                command = Some(v.trim().to_string());
            } else if let Some(v) = comment.strip_prefix("fabric:") {
                once(fabric_sm.is_some(), "fabric")?;
                let (fabric, sm) = v
                    .split_once("sm:")
                    .ok_or_else(|| at("`fabric:` line without `sm:`".into()))?;
                fabric_sm = Some((fabric.trim().to_string(), sm.trim().to_string()));
            } else if let Some(v) = comment.strip_prefix("direction:") {
                once(direction.is_some(), "direction")?;
                direction = Some(match v.trim() {
                    "request" => Direction::Request,
                    "response" => Direction::Response,
                    other => return Err(at(format!("unknown direction `{other}`"))),
                });
            } else if let Some(v) = comment.strip_prefix("expect:") {
                let (k, v) = v
                    .trim()
                    .split_once('=')
                    .ok_or_else(|| at("`expect:` without `field=value`".into()))?;
                expects.push((k.to_string(), v.to_string()));
            }
            // Any other comment is free text.
            continue;
        }
        if let Some(prev) = short_line {
            return Err(at(format!(
                "line {prev} has fewer than 16 bytes but is not the last"
            )));
        }
        let before = bytes.len();
        for group in line.split_whitespace() {
            if group.len() % 2 != 0 || !group.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(at(format!("`{group}` is not a group of hex bytes")));
            }
            for pair in group.as_bytes().chunks(2) {
                let s = std::str::from_utf8(pair).map_err(|e| at(e.to_string()))?;
                bytes.push(u8::from_str_radix(s, 16).map_err(|e| at(e.to_string()))?);
            }
        }
        match bytes.len() - before {
            16 => {}
            n if n < 16 => short_line = Some(i + 1),
            n => return Err(at(format!("{n} bytes on one line, at most 16"))),
        }
    }
    let end = |msg: &str| format!("{file}: {msg}");
    let command = command.ok_or_else(|| end("no `# command:` line"))?;
    let (fabric, sm) = fabric_sm.ok_or_else(|| end("no `# fabric:` line"))?;
    let direction = direction.ok_or_else(|| end("no `# direction:` line"))?;
    if bytes.len() < 24 || bytes.len() > 256 {
        return Err(end(&format!(
            "{} bytes: a MAD has 24 (its header) to 256",
            bytes.len()
        )));
    }
    Ok(Vector {
        name: name.to_string(),
        command,
        fabric,
        sm,
        direction,
        expects,
        bytes,
    })
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

/// Every vector, sorted by name.
fn load_all() -> Vec<Vector> {
    let dir = vectors_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            entry
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path()
        })
        .filter(|p| p.extension().is_some_and(|x| x == "mad"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let text =
                std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_else(|| panic!("{}: file name is not UTF-8", path.display()));
            let v = parse_vector(name, &path.display().to_string(), &text)
                .unwrap_or_else(|e| panic!("{e}"));
            let want = if name.ends_with(".req") {
                Direction::Request
            } else if name.ends_with(".resp") {
                Direction::Response
            } else {
                panic!("{}: name must end in .req.mad or .resp.mad", path.display())
            };
            assert_eq!(
                v.direction,
                want,
                "{}: direction disagrees with the file name",
                path.display()
            );
            v
        })
        .collect()
}

/// Request/response pairs by base name.
fn pairs(all: &[Vector]) -> BTreeMap<&str, (Option<&Vector>, Option<&Vector>)> {
    let mut map: BTreeMap<&str, (Option<&Vector>, Option<&Vector>)> = BTreeMap::new();
    for v in all {
        if let Some(base) = v.name.strip_suffix(".req") {
            map.entry(base).or_default().0 = Some(v);
        } else if let Some(base) = v.name.strip_suffix(".resp") {
            map.entry(base).or_default().1 = Some(v);
        }
    }
    map
}

/// A number as the diags print them: `0x...` (either case) or decimal.
fn num(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("`{s}` is not a number: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Facts about the capture itself

/// Bytes of a full 256-byte MAD that the simulator's client shim does not deliver intact:
/// libumad2sim hands its clients these 24 bytes from an uninitialised buffer (ibsim's own
/// packet dump shows them zero on the way in). See the README.
const SHIM_TAIL: Range<usize> = 232..256;

#[test]
fn loader_reports_file_and_line() {
    let ok = "# command: x\n# fabric: f   sm: none\n# direction: request\n\
              # expect: lid=1\n0101 0101 0000 0000 0000 0000 0000 0001\n0011 0000 0000 0000\n";
    let v = parse_vector("t.req", "t.mad", ok).unwrap();
    assert_eq!(v.bytes.len(), 24);
    assert_eq!(v.expect("lid"), Some("1"));
    assert_eq!((v.fabric.as_str(), v.sm.as_str()), ("f", "none"));

    let bad_hex = ok.replace("0011 0000", "0011 00g0");
    let e = parse_vector("t.req", "t.mad", &bad_hex).unwrap_err();
    assert!(e.starts_with("t.mad:6: "), "{e}");
    let bad_dir = ok.replace("request", "sideways");
    assert!(
        parse_vector("t.req", "t.mad", &bad_dir)
            .unwrap_err()
            .starts_with("t.mad:3: ")
    );
    let no_cmd = ok.replace("# command: x\n", "");
    assert!(
        parse_vector("t.req", "t.mad", &no_cmd)
            .unwrap_err()
            .contains("command")
    );
    let gap = ok.replace("0000 0001\n0011", "\n0011");
    assert!(
        parse_vector("t.req", "t.mad", &gap)
            .unwrap_err()
            .starts_with("t.mad:6: ")
    );
    let short = "# command: x\n# fabric: f sm: s\n# direction: response\n0101\n";
    assert!(
        parse_vector("t.resp", "t.mad", short)
            .unwrap_err()
            .contains("2 bytes")
    );
}

#[test]
fn the_capture_is_complete() {
    let all = load_all();
    let pairs = pairs(&all);
    assert!(pairs.len() >= 40, "only {} captured exchanges", pairs.len());
    for (base, (req, resp)) in &pairs {
        assert!(
            req.is_some() && resp.is_some(),
            "{base}: request or response missing"
        );
    }
    for base in [
        "dr_nodeinfo_switch",
        "dr_nodeinfo_hca_3hop",
        "lr_portinfo_hca",
        "lr_lft_block0",
        "lr_sminfo",
        "sa_pathrecord",
        "sa_noderecord",
        "sa_mcmemberrecord",
    ] {
        assert!(pairs.contains_key(base), "{base} missing");
    }
}

#[test]
fn responses_answer_their_requests() {
    let all = load_all();
    for (base, (req, resp)) in pairs(&all) {
        let (Some(req), Some(resp)) = (req, resp) else {
            continue;
        };
        let q = mad::Repr::parse(&req.bytes).unwrap_or_else(|e| panic!("{base}.req: {e}"));
        let r = mad::Repr::parse(&resp.bytes).unwrap_or_else(|e| panic!("{base}.resp: {e}"));
        assert_eq!(req.command, resp.command, "{base}");
        assert!(!q.method.is_response(), "{base}.req: {:?}", q.method);
        assert_eq!(r.method, q.method.response(), "{base}");
        assert_eq!(r.mgmt_class, q.mgmt_class, "{base}");
        assert_eq!(r.attr_id, q.attr_id, "{base}");
        assert_eq!(r.attr_mod, q.attr_mod, "{base}");
        // The simulator rewrites the upper half of the TID, as a kernel would.
        assert_eq!(r.tid.low32(), q.tid.low32(), "{base}");
    }
}

#[test]
fn every_header_round_trips() {
    for v in load_all() {
        let hdr = mad::Repr::parse(&v.bytes).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        let mut out = [0xa5u8; 24];
        hdr.emit(&mut out).unwrap();
        assert_eq!(out[..], v.bytes[..24], "{}", v.name);
    }
}

#[test]
fn diags_leave_reserved_smp_bytes_zero() {
    for v in load_all().iter().filter(|v| v.is_smp()) {
        if v.direction != Direction::Request {
            continue;
        }
        let p = smp::Repr::parse(&v.bytes).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        let unused: [Range<usize>; 2] = match p.route {
            // LID routed: everything after the data is reserved.
            Route::Lid => [128..256, 256..256],
            // Directed: byte 0 of the initial path, the path past the last hop, and the
            // return path (filled on the way back).
            Route::Directed(d) => [128..129, 129 + usize::from(d.hop_count)..256],
        };
        for r in unused {
            assert!(
                v.bytes[r.clone()].iter().all(|&b| b == 0),
                "{}: the diag set bytes in {r:?}",
                v.name
            );
        }
    }
}

#[test]
fn every_smp_round_trips() {
    let mut masked = 0;
    for v in load_all().iter().filter(|v| v.is_smp()) {
        assert_eq!(v.bytes.len(), smp::LEN, "{}", v.name);
        let p = smp::Repr::parse(&v.bytes).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        let mut out = [0xa5u8; smp::LEN];
        p.emit(&mut out).unwrap();
        let differ: Vec<usize> = (0..smp::LEN).filter(|&i| out[i] != v.bytes[i]).collect();
        if differ.is_empty() {
            continue;
        }
        // Emit zeroes the reserved area of a LID-routed SMP; only the shim's tail may differ.
        assert!(
            v.direction == Direction::Response
                && p.route == Route::Lid
                && differ.iter().all(|i| SHIM_TAIL.contains(i)),
            "{}: emit differs at bytes {differ:?}",
            v.name
        );
        assert!(out[SHIM_TAIL].iter().all(|&b| b == 0), "{}", v.name);
        masked += 1;
    }
    assert!(
        masked > 0,
        "no LID-routed response needed the mask: update SHIM_TAIL's note"
    );
}

#[test]
fn directed_routes_follow_the_command_line() {
    for v in load_all().iter().filter(|v| v.is_smp()) {
        let p = smp::Repr::parse(&v.bytes).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        let Route::Directed(d) = p.route else {
            assert!(!v.command.contains(" -D "), "{}: LID routed", v.name);
            continue;
        };
        // The path argument: "0,1,3,1" -> exit ports 1, 3, 1.
        let path: Vec<u8> = v
            .command
            .split_whitespace()
            .find(|t| t.starts_with('0') && t.bytes().all(|c| c.is_ascii_digit() || c == b','))
            .unwrap_or_else(|| panic!("{}: no DR path in `{}`", v.name, v.command))
            .split(',')
            .skip(1)
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(d.path(), &path[..], "{}", v.name);
        assert_eq!(
            d.direction,
            v.direction == Direction::Response,
            "{}: D bit",
            v.name
        );
        assert_eq!(
            (d.dr_slid, d.dr_dlid),
            (sm_mad::Lid::PERMISSIVE, sm_mad::Lid::PERMISSIVE),
            "{}",
            v.name
        );
    }
}

// ---------------------------------------------------------------------------------------------
// per-attribute checks
//
// Each check decodes one attribute or record with the codec and compares every field that has
// an `# expect:` line (what the diag printed) with the decoded value, returning the keys it
// verified. To add an attribute: write `check_<attribute>(v, bytes, prefix)` like
// `check_node_info`, add an arm to `check_smp_attribute` (SMP data) or `check_sa_record` (the
// first record of an SA response, at byte 56), and use the same function with a prefix for the
// records that embed the attribute (PortInfoRecord -> "port_info.", ...). Expectations still
// unchecked: PortInfo, SwitchInfo, P_KeyTable (`p_key[i]`), SLtoVLMappingTable (`sl_to_vl[i]`),
// VLArbitrationTable (`vl[i]`, `weight[i]`), GUIDInfo (`guid[i]`), LinearForwardingTable
// (`port[lid]`), SMInfo, and the SA records (ClassPortInfo, NodeRecord's `lid`, PortInfoRecord,
// SwitchInfoRecord, LinkRecord, PathRecord, MCMemberRecord, SMInfoRecord, GUIDInfoRecord,
// PKeyTableRecord, SLtoVLMappingTableRecord, VLArbitrationTableRecord, LinearForwardingTableRecord).
// `every_expectation_is_checked` lists them.

type Checked = Result<Vec<String>, String>;

/// Offset of the first record in an SA MAD (after the MAD, RMPP and SA headers).
const SA_DATA: usize = 56;

fn check_smp_attribute(v: &Vector, p: &smp::Repr) -> Checked {
    match p.attr_id {
        attr::NODE_INFO => check_node_info(v, &p.data.0, ""),
        attr::NODE_DESCRIPTION => check_node_description(v, &p.data.0, ""),
        _ => Ok(Vec::new()),
    }
}

fn check_sa_record(v: &Vector, hdr: &mad::Repr) -> Checked {
    let record = v.bytes.get(SA_DATA..).unwrap_or_default();
    match hdr.attr_id {
        // NodeRecord: LID, 2 reserved bytes, NodeInfo, NodeDescription.
        0x0011 => {
            let mut keys = check_node_info(v, record.get(4..).unwrap_or_default(), "node_info.")?;
            keys.extend(check_node_description(
                v,
                record.get(44..).unwrap_or_default(),
                "node_description.",
            )?);
            Ok(keys)
        }
        _ => Ok(Vec::new()),
    }
}

/// Compares one decoded number with `# expect: key=...`; every key is required.
fn expect_num(v: &Vector, keys: &mut Vec<String>, key: String, got: u64) -> Result<(), String> {
    let want = v
        .expect(&key)
        .ok_or_else(|| format!("{}: no `# expect: {key}=`", v.name))?;
    let want = num(want).map_err(|e| format!("{}: {key}: {e}", v.name))?;
    if want != got {
        return Err(format!(
            "{}: {key}: decoded {got:#x}, the diag printed {want:#x}",
            v.name
        ));
    }
    keys.push(key);
    Ok(())
}

fn check_node_info(v: &Vector, data: &[u8], prefix: &str) -> Checked {
    let n = node_info::Repr::parse(data).map_err(|e| format!("{}: {e}", v.name))?;
    let mut keys = Vec::new();
    let key = |f: &str| format!("{prefix}{f}");
    let node_type = v
        .expect(&key("node_type"))
        .ok_or_else(|| format!("{}: no node_type expectation", v.name))?;
    let want = match node_type {
        "Channel Adapter" => node_info::NodeType::Ca,
        "Switch" => node_info::NodeType::Switch,
        "Router" => node_info::NodeType::Router,
        other => return Err(format!("{}: node type `{other}`", v.name)),
    };
    if n.node_type != want {
        return Err(format!(
            "{}: node_type {:?}, printed {node_type}",
            v.name, n.node_type
        ));
    }
    keys.push(key("node_type"));
    for (f, got) in [
        ("base_version", u64::from(n.base_version)),
        ("class_version", u64::from(n.class_version)),
        ("num_ports", u64::from(n.num_ports)),
        ("system_image_guid", n.system_image_guid.0),
        ("node_guid", n.node_guid.0),
        ("port_guid", n.port_guid.0),
        ("partition_cap", u64::from(n.partition_cap)),
        ("device_id", u64::from(n.device_id)),
        ("revision", u64::from(n.revision)),
        ("local_port_num", u64::from(n.local_port_num)),
        ("vendor_id", u64::from(n.vendor_id)),
    ] {
        expect_num(v, &mut keys, key(f), got)?;
    }
    Ok(keys)
}

fn check_node_description(v: &Vector, data: &[u8], prefix: &str) -> Checked {
    let d = node_description::Repr::parse(data).map_err(|e| format!("{}: {e}", v.name))?;
    let key = format!("{prefix}node_string");
    let want = v
        .expect(&key)
        .ok_or_else(|| format!("{}: no `# expect: {key}=`", v.name))?;
    if d.as_string() != want {
        return Err(format!(
            "{}: {key}: decoded {:?}, the diag printed {want:?}",
            v.name,
            d.as_string()
        ));
    }
    Ok(vec![key])
}

/// Runs the per-attribute checks on every response; returns (vector, unchecked keys).
fn run_checks(all: &[Vector]) -> Vec<(String, Vec<String>)> {
    let mut unchecked = Vec::new();
    for v in all.iter().filter(|v| v.direction == Direction::Response) {
        let hdr = mad::Repr::parse(&v.bytes).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        let checked = match hdr.mgmt_class {
            MgmtClass::SubnLid | MgmtClass::SubnDirected => {
                let p = smp::Repr::parse(&v.bytes).unwrap_or_else(|e| panic!("{}: {e}", v.name));
                check_smp_attribute(v, &p)
            }
            MgmtClass::SubnAdm if hdr.status.is_ok() => check_sa_record(v, &hdr),
            _ => Ok(Vec::new()),
        }
        .unwrap_or_else(|e| panic!("{e}"));
        let rest: Vec<String> = v
            .expects
            .iter()
            .map(|(k, _)| k.clone())
            .filter(|k| !checked.contains(k))
            .collect();
        if !rest.is_empty() {
            unchecked.push((v.name.clone(), rest));
        }
    }
    unchecked
}

#[test]
fn decoded_fields_match_what_the_diags_printed() {
    let all = load_all();
    let unchecked = run_checks(&all);
    // NodeInfo and NodeDescription (also inside NodeRecord) are fully checked.
    for (name, keys) in &unchecked {
        assert!(
            !keys.iter().any(|k| k.starts_with("node_info.")
                || k.starts_with("node_description.")
                || k == "node_string"
                || k == "node_guid"),
            "{name}: left unchecked: {keys:?}"
        );
    }
    let checked_nodeinfo = all
        .iter()
        .filter(|v| v.direction == Direction::Response && v.expect("node_guid").is_some())
        .count();
    assert!(
        checked_nodeinfo >= 8,
        "{checked_nodeinfo} NodeInfo responses"
    );
}

/// For the integrator: passes once every attribute and record has its check above.
#[test]
#[ignore = "per-attribute checks for the other attributes and SA records land with their modules"]
fn every_expectation_is_checked() {
    let unchecked = run_checks(&load_all());
    let report: Vec<String> = unchecked
        .iter()
        .map(|(name, keys)| format!("{name}: {}", keys.join(", ")))
        .collect();
    assert!(
        unchecked.is_empty(),
        "unchecked expectations:\n{}",
        report.join("\n")
    );
}
