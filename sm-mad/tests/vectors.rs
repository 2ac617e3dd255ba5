//! The codec against MADs that independent software produced: requests infiniband-diags
//! sent, ibsim's SMA answers and OpenSM's SA and SMInfo answers, captured by
//! `tools/capture-vectors.sh` into `tests/vectors/*.mad` (format and caveats in the README
//! there).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use sm_mad::attr::SaAttrId;
use sm_mad::smp::Route;
use sm_mad::{
    Lid, Method, MgmtClass, Wire, attr, class_port_info, guid_info, guid_info_record, lft,
    lft_record, link_record, mad, mcmember_record, mft, mft_record, node_description, node_info,
    node_record, path_record, pkey_table, pkey_table_record, port_info, port_info_record, sa,
    sl2vl, sl2vl_record, sm_info, sm_info_record, smp, switch_info, switch_info_record, vl_arb,
    vl_arb_record,
};

// ---------------------------------------------------------------------------------------------
// Loader

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Request,
    Response,
}

/// One `.mad` file.
#[derive(Debug, Clone)]
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
// Every `# expect:` line of every vector is compared with the codec's decoding of the same
// bytes: SMP responses through `smp::Repr` and the attribute's `Repr`; SA requests and
// responses through `sa::Repr` and the records of the attribute's record type, laid out
// `attribute_offset * 8` bytes apart (the template record in a request, the first record in
// an answer). Values are compared in the diag's own rendering: each check maps our typed
// value to what libibmad or saquery prints (`Active`, `4X`, `2.5 Gbps`, `2048`, IPv6 GIDs).
// A request's expectations are also checked against its component mask: the diag asked for
// those fields, so their bits must be set. `every_expectation_is_checked` fails on any
// expectation no check consumed.

/// Offset of the first record in an SA MAD (after the MAD, RMPP and SA headers).
const SA_DATA: usize = 56;

/// A decoded value, in a form comparable with the diag's text.
#[derive(Debug)]
enum Got {
    /// Compared with a number the diag printed in hex (`0x...`) or decimal.
    Num(u64),
    /// Compared with the diag's text exactly.
    Text(String),
    /// Compared with a GID the diag printed in IPv6 form.
    Gid([u8; 16]),
}

fn n(v: impl Into<u64>) -> Got {
    Got::Num(v.into())
}

fn text(s: impl Into<String>) -> Got {
    Got::Text(s.into())
}

/// The expectations of one vector and the keys compared so far.
struct Checker<'a> {
    v: &'a Vector,
    done: Vec<String>,
}

impl Checker<'_> {
    /// Compares `got` with `# expect: key=...` when the vector has that line.
    fn field(&mut self, key: &str, got: Got) -> Result<(), String> {
        let Some(want) = self.v.expect(key) else {
            return Ok(());
        };
        let name = &self.v.name;
        let same = match &got {
            Got::Num(g) => num(want).map_err(|e| format!("{name}: {key}: {e}"))? == *g,
            Got::Text(g) => g == want,
            Got::Gid(g) => {
                let w: std::net::Ipv6Addr = want
                    .parse()
                    .map_err(|e| format!("{name}: {key}: `{want}`: {e}"))?;
                w.octets() == *g
            }
        };
        if !same {
            return Err(format!(
                "{name}: {key}: decoded {got:?}, the diag printed {want:?}"
            ));
        }
        self.done.push(key.to_string());
        Ok(())
    }

    /// Compares every `key[i]` expectation with `get(i)`; `None` means `i` is not in the
    /// decoded block, which is an error.
    fn indexed(&mut self, key: &str, get: impl Fn(usize) -> Option<Got>) -> Result<(), String> {
        let open = format!("{key}[");
        let indices: Vec<(String, usize)> = self
            .v
            .expects
            .iter()
            .filter_map(|(k, _)| {
                let i = k.strip_prefix(&open)?.strip_suffix(']')?.parse().ok()?;
                Some((k.clone(), i))
            })
            .collect();
        for (k, i) in indices {
            let got = get(i).ok_or_else(|| {
                format!(
                    "{}: {k}: index {i} is not in the decoded block",
                    self.v.name
                )
            })?;
            self.field(&k, got)?;
        }
        Ok(())
    }
}

// Renderings of the diags (libibmad's dump functions and saquery).

fn node_type_text(t: node_info::NodeType) -> String {
    use node_info::NodeType as T;
    match t {
        T::Ca => "Channel Adapter".into(),
        T::Switch => "Switch".into(),
        T::Router => "Router".into(),
        other => format!("?({})", other.to_raw_value()),
    }
}

fn port_state_text(s: port_info::PortState) -> String {
    use port_info::PortState as S;
    match s {
        S::NoChange => "NoChange".into(),
        S::Down => "Down".into(),
        S::Init => "Initialize".into(),
        S::Armed => "Armed".into(),
        S::Active => "Active".into(),
        other => format!("?({})", other.to_raw_value()),
    }
}

fn phys_state_text(s: port_info::PhysPortState) -> String {
    match s.name() {
        Some(name) => name.into(),
        None => format!("?({})", s.to_raw_value()),
    }
}

fn link_down_default_text(s: port_info::LinkDownDefaultState) -> String {
    match s.name() {
        Some(name) => name.into(),
        None => format!("?({})", s.to_raw_value()),
    }
}

/// A set of bits as "A or B", in the diag's order; `undefined (n)` when empty or unknown.
fn bits_text(value: u8, names: &[(u8, &str)]) -> String {
    let known = names.iter().fold(0, |m, (b, _)| m | b);
    if value == 0 || value & !known != 0 {
        return format!("undefined ({value})");
    }
    let parts: Vec<&str> = names
        .iter()
        .filter(|(b, _)| value & b != 0)
        .map(|(_, s)| *s)
        .collect();
    parts.join(" or ")
}

fn width_text(w: u8) -> String {
    use port_info::link_width as W;
    bits_text(
        w,
        &[
            (W::X1, "1X"),
            (W::X4, "4X"),
            (W::X8, "8X"),
            (W::X12, "12X"),
            (W::X2, "2X"),
        ],
    )
}

fn speed_text(s: u8) -> String {
    use port_info::link_speed as S;
    if s == 0 {
        return "Extended speed".into();
    }
    bits_text(
        s,
        &[
            (S::SDR, "2.5 Gbps"),
            (S::DDR, "5.0 Gbps"),
            (S::QDR, "10.0 Gbps"),
        ],
    )
}

fn mtu_text(m: port_info::Mtu) -> String {
    match m.bytes() {
        Some(b) => b.to_string(),
        None => format!("?({})", m.to_raw_value()),
    }
}

fn vls_text(v: port_info::VlCap) -> String {
    match v.data_vls() {
        Some(1) => "VL0".into(),
        Some(n) => format!("VL0-{}", n - 1),
        None => format!("?({})", v.to_raw_value()),
    }
}

// Attributes. `p` is the prefix of the attribute's keys ("" in an SMP, "port_info." in a
// PortInfoRecord, ...).

fn check_node_info(c: &mut Checker<'_>, p: &str, r: &node_info::Repr) -> Result<(), String> {
    c.field(&format!("{p}node_type"), text(node_type_text(r.node_type)))?;
    for (f, got) in [
        ("base_version", n(r.base_version)),
        ("class_version", n(r.class_version)),
        ("num_ports", n(r.num_ports)),
        ("system_image_guid", n(r.system_image_guid.0)),
        ("node_guid", n(r.node_guid.0)),
        ("port_guid", n(r.port_guid.0)),
        ("partition_cap", n(r.partition_cap)),
        ("device_id", n(r.device_id)),
        ("revision", n(r.revision)),
        ("local_port_num", n(r.local_port_num)),
        ("vendor_id", n(r.vendor_id)),
    ] {
        c.field(&format!("{p}{f}"), got)?;
    }
    Ok(())
}

fn check_node_description(
    c: &mut Checker<'_>,
    p: &str,
    r: &node_description::Repr,
) -> Result<(), String> {
    c.field(&format!("{p}node_string"), text(r.as_string()))
}

fn check_port_info(c: &mut Checker<'_>, p: &str, r: &port_info::Repr) -> Result<(), String> {
    for (f, got) in [
        ("m_key", n(r.m_key)),
        ("gid_prefix", n(r.gid_prefix)),
        ("lid", n(r.lid.0)),
        ("master_sm_lid", n(r.master_sm_lid.0)),
        ("capability_mask", n(r.capability_mask)),
        ("m_key_lease_period", n(r.m_key_lease_period)),
        ("local_port_num", n(r.local_port_num)),
        ("link_width_enabled", text(width_text(r.link_width_enabled))),
        ("link_width_active", text(width_text(r.link_width_active))),
        ("port_state", text(port_state_text(r.port_state))),
        (
            "port_physical_state",
            text(phys_state_text(r.port_physical_state)),
        ),
        (
            "link_down_default_state",
            text(link_down_default_text(r.link_down_default_state)),
        ),
        ("lmc", n(r.lmc)),
        ("link_speed_active", text(speed_text(r.link_speed_active))),
        ("link_speed_enabled", text(speed_text(r.link_speed_enabled))),
        ("neighbor_mtu", text(mtu_text(r.neighbor_mtu))),
        ("master_sm_sl", n(r.master_sm_sl.0)),
        ("vl_cap", text(vls_text(r.vl_cap))),
        ("vl_high_limit", n(r.vl_high_limit)),
        ("vl_arbitration_high_cap", n(r.vl_arbitration_high_cap)),
        ("vl_arbitration_low_cap", n(r.vl_arbitration_low_cap)),
        ("mtu_cap", text(mtu_text(r.mtu_cap))),
        ("vl_stall_count", n(r.vl_stall_count)),
        ("hoq_life", n(r.hoq_life)),
        ("operational_vls", text(vls_text(r.operational_vls))),
        ("guid_cap", n(r.guid_cap)),
        ("client_reregister", n(r.client_reregister)),
        ("subnet_timeout", n(r.subnet_timeout)),
        ("resp_time_value", n(r.resp_time_value)),
        ("capability_mask2", n(r.capability_mask2)),
    ] {
        c.field(&format!("{p}{f}"), got)?;
    }
    Ok(())
}

fn check_switch_info(c: &mut Checker<'_>, p: &str, r: &switch_info::Repr) -> Result<(), String> {
    for (f, got) in [
        ("linear_fdb_cap", n(r.linear_fdb_cap)),
        ("random_fdb_cap", n(r.random_fdb_cap)),
        ("multicast_fdb_cap", n(r.multicast_fdb_cap)),
        ("linear_fdb_top", n(r.linear_fdb_top.0)),
        ("default_port", n(r.default_port)),
        (
            "default_multicast_primary_port",
            n(r.default_multicast_primary_port),
        ),
        (
            "default_multicast_not_primary_port",
            n(r.default_multicast_not_primary_port),
        ),
        ("life_time_value", n(r.life_time_value)),
        ("port_state_change", n(r.port_state_change)),
        (
            "optimized_sl_to_vl_mapping_programming",
            n(r.optimized_sl_to_vl_mapping_programming),
        ),
        ("lids_per_port", n(r.lids_per_port)),
        ("partition_enforcement_cap", n(r.partition_enforcement_cap)),
        ("inbound_enforcement_cap", n(r.inbound_enforcement_cap)),
        ("outbound_enforcement_cap", n(r.outbound_enforcement_cap)),
        ("filter_raw_inbound_cap", n(r.filter_raw_inbound_cap)),
        ("filter_raw_outbound_cap", n(r.filter_raw_outbound_cap)),
        ("enhanced_port0", n(r.enhanced_port0)),
        ("multicast_fdb_top", n(r.multicast_fdb_top.0)),
    ] {
        c.field(&format!("{p}{f}"), got)?;
    }
    Ok(())
}

fn check_sm_info(c: &mut Checker<'_>, p: &str, r: &sm_info::Repr) -> Result<(), String> {
    for (f, got) in [
        ("guid", n(r.guid.0)),
        ("sm_key", n(r.sm_key)),
        ("act_count", n(r.act_count)),
        ("priority", n(r.priority)),
        // The diags print the state as its number.
        ("sm_state", n(r.sm_state.to_raw_value())),
    ] {
        c.field(&format!("{p}{f}"), got)?;
    }
    Ok(())
}

/// `p_key[i]`: entry `i` of the port's table; the block starts at entry `first`.
fn check_p_keys(
    c: &mut Checker<'_>,
    p: &str,
    first: usize,
    r: &pkey_table::Repr,
) -> Result<(), String> {
    c.indexed(&format!("{p}p_key"), |i| {
        let k = r.p_key_table.get(i.checked_sub(first)?)?;
        Some(n(k.0))
    })
}

fn check_sl2vl(c: &mut Checker<'_>, p: &str, r: &sl2vl::Repr) -> Result<(), String> {
    c.indexed(&format!("{p}sl_to_vl"), |i| Some(n(r.sl_to_vl.get(i)?.0)))
}

/// `vl[i]` and `weight[i]`: entry `i` of the low- or high-priority table; the block starts
/// at entry `first`.
fn check_vl_arb(
    c: &mut Checker<'_>,
    p: &str,
    first: usize,
    r: &vl_arb::Repr,
) -> Result<(), String> {
    let entry = |i: usize| r.vl_arbitration_table.get(i.checked_sub(first)?).copied();
    c.indexed(&format!("{p}vl"), |i| Some(n(entry(i)?.vl.0)))?;
    c.indexed(&format!("{p}weight"), |i| Some(n(entry(i)?.weight)))
}

/// `guid[i]`: GUID index `i` of the port; the block starts at index `first`.
fn check_guids(
    c: &mut Checker<'_>,
    p: &str,
    first: usize,
    r: &guid_info::Repr,
) -> Result<(), String> {
    c.indexed(&format!("{p}guid"), |i| {
        Some(n(r.guid_block.get(i.checked_sub(first)?)?.0))
    })
}

/// `port[lid]`: the output port of `lid`, which must fall in `block`.
fn check_lft(c: &mut Checker<'_>, p: &str, block: u16, r: &lft::Repr) -> Result<(), String> {
    c.indexed(&format!("{p}port"), |lid| {
        let lid = Lid(u16::try_from(lid).ok()?);
        if lft::block_of(lid) != block {
            return None;
        }
        Some(n(r.port_block.get(lft::slot_of(lid))?.0))
    })
}

fn check_smp_attribute(c: &mut Checker<'_>, s: &smp::Repr) -> Result<(), String> {
    let name = &c.v.name;
    let err = |e: sm_mad::Error| format!("{name}: {e}");
    let data = &s.data.0[..];
    match s.attr_id {
        attr::NODE_INFO => check_node_info(c, "", &node_info::Repr::parse(data).map_err(err)?),
        attr::NODE_DESCRIPTION => {
            check_node_description(c, "", &node_description::Repr::parse(data).map_err(err)?)
        }
        attr::PORT_INFO => check_port_info(c, "", &port_info::Repr::parse(data).map_err(err)?),
        attr::SWITCH_INFO => {
            check_switch_info(c, "", &switch_info::Repr::parse(data).map_err(err)?)
        }
        attr::SM_INFO => check_sm_info(c, "", &sm_info::Repr::parse(data).map_err(err)?),
        attr::P_KEY_TABLE => {
            let m = pkey_table::Modifier::from_attr_mod(s.attr_mod).map_err(err)?;
            let first = usize::from(m.block) * pkey_table::ENTRIES;
            check_p_keys(c, "", first, &pkey_table::Repr::parse(data).map_err(err)?)
        }
        attr::SL_TO_VL_MAPPING_TABLE => {
            sl2vl::Modifier::from_attr_mod(s.attr_mod).map_err(err)?;
            check_sl2vl(c, "", &sl2vl::Repr::parse(data).map_err(err)?)
        }
        attr::VL_ARBITRATION_TABLE => {
            let m = vl_arb::Modifier::from_attr_mod(s.attr_mod).map_err(err)?;
            let first = m.block.first_entry();
            check_vl_arb(c, "", first, &vl_arb::Repr::parse(data).map_err(err)?)
        }
        attr::GUID_INFO => {
            let first = usize::try_from(s.attr_mod).unwrap_or(usize::MAX) * guid_info::BLOCK_LEN;
            check_guids(c, "", first, &guid_info::Repr::parse(data).map_err(err)?)
        }
        attr::LINEAR_FORWARDING_TABLE => {
            let block = lft::block_from_attr_mod(s.attr_mod).map_err(err)?;
            check_lft(c, "", block, &lft::Repr::parse(data).map_err(err)?)
        }
        attr::MULTICAST_FORWARDING_TABLE => {
            // The diag printed no entry (every block is empty); decode it all the same.
            mft::Modifier::from_attr_mod(s.attr_mod).map_err(err)?;
            mft::Repr::parse(data).map_err(err)?;
            Ok(())
        }
        other => Err(format!("{name}: no check for SMP attribute {other:#06x}")),
    }
}

/// The records an SA MAD carries: the one template record of a request or Get answer, or
/// the records of a table answer `attribute_offset * 8` bytes apart, in as many bytes as
/// OpenSM sent.
fn sa_records<R: Wire>(v: &Vector, s: &sa::Repr) -> Result<Vec<R>, String> {
    let err = |e: sm_mad::Error| format!("{}: {e}", v.name);
    if s.method != Method::GetTableResp {
        return Ok(vec![R::parse(&s.data.0).map_err(err)?]);
    }
    let sent = v.bytes.len().saturating_sub(SA_DATA).min(sa::DATA_LEN);
    sa::records::<R>(&s.data.0[..sent], s.attribute_offset)
        .map_err(err)?
        .map(|r| r.map_err(err))
        .collect()
}

/// The first record (see [`sa_records`]); `None` for an empty table.
fn first_record<R: Wire>(v: &Vector, s: &sa::Repr) -> Result<Option<R>, String> {
    Ok(sa_records::<R>(v, s)?.into_iter().next())
}

/// Parses an SA vector, padded to a whole MAD (answers end where OpenSM's data ended).
fn parse_sa(v: &Vector) -> Result<sa::Repr, String> {
    let mut full = v.bytes.clone();
    full.resize(sa::LEN, 0);
    sa::Repr::parse(&full).map_err(|e| format!("{}: {e}", v.name))
}

/// The component-mask bit of a record field a diag's query names, by the diag's key.
fn comp_bit(attr_id: u16, key: &str) -> Option<u64> {
    Some(match (SaAttrId::from_raw_value(attr_id), key) {
        (SaAttrId::NodeRecord, "lid") => node_record::comp::LID,
        (SaAttrId::PortInfoRecord, "end_port_lid") => port_info_record::comp::ENDPORT_LID,
        (SaAttrId::PortInfoRecord, "port_num") => port_info_record::comp::PORT_NUM,
        (SaAttrId::SwitchInfoRecord, "lid") => switch_info_record::comp::LID,
        (SaAttrId::LinkRecord, "from_lid") => link_record::comp::FROM_LID,
        (SaAttrId::LinkRecord, "from_port") => link_record::comp::FROM_PORT,
        (SaAttrId::PathRecord, "slid") => path_record::comp::SLID,
        (SaAttrId::PathRecord, "dlid") => path_record::comp::DLID,
        (SaAttrId::GuidInfoRecord, "lid") => guid_info_record::comp::LID,
        (SaAttrId::GuidInfoRecord, "block_num") => guid_info_record::comp::BLOCK_NUM,
        (SaAttrId::PKeyTableRecord, "lid") => pkey_table_record::comp::LID,
        (SaAttrId::SlToVlMappingTableRecord, "lid") => sl2vl_record::comp::LID,
        (SaAttrId::SlToVlMappingTableRecord, "input_port_num") => {
            sl2vl_record::comp::INPUT_PORT_NUM
        }
        (SaAttrId::SlToVlMappingTableRecord, "output_port_num") => {
            sl2vl_record::comp::OUTPUT_PORT_NUM
        }
        (SaAttrId::VlArbitrationTableRecord, "lid") => vl_arb_record::comp::LID,
        (SaAttrId::VlArbitrationTableRecord, "output_port_num") => {
            vl_arb_record::comp::OUTPUT_PORT_NUM
        }
        (SaAttrId::VlArbitrationTableRecord, "block_num") => vl_arb_record::comp::BLOCK_NUM,
        (SaAttrId::LinearForwardingTableRecord, "lid") => lft_record::comp::LID,
        (SaAttrId::LinearForwardingTableRecord, "block_num") => lft_record::comp::BLOCK_NUM,
        (SaAttrId::MulticastForwardingTableRecord, "lid") => mft_record::comp::LID,
        _ => return None,
    })
}

fn check_class_port_info(c: &mut Checker<'_>, r: &class_port_info::Repr) -> Result<(), String> {
    for (f, got) in [
        ("base_version", n(r.base_version)),
        ("class_version", n(r.class_version)),
        ("capability_mask", n(r.capability_mask)),
        ("capability_mask2", n(r.capability_mask2)),
        ("resp_time_value", n(r.resp_time_value)),
        ("redirect_lid", n(r.redirect_lid.0)),
        ("redirect_p_key", n(r.redirect_p_key.0)),
        ("redirect_qp", n(r.redirect_qp)),
        ("redirect_q_key", n(r.redirect_q_key)),
        ("trap_lid", n(r.trap_lid.0)),
        ("trap_p_key", n(r.trap_p_key.0)),
        ("trap_q_key", n(r.trap_q_key)),
    ] {
        c.field(f, got)?;
    }
    Ok(())
}

fn check_path_record(c: &mut Checker<'_>, r: &path_record::Repr) -> Result<(), String> {
    for (f, got) in [
        ("service_id", n(r.service_id.0)),
        ("dgid", Got::Gid(r.dgid.0)),
        ("sgid", Got::Gid(r.sgid.0)),
        ("dlid", n(r.dlid.0)),
        ("slid", n(r.slid.0)),
        ("raw_traffic", n(r.raw_traffic)),
        ("flow_label", n(r.flow_label)),
        ("hop_limit", n(r.hop_limit)),
        ("tclass", n(r.tclass)),
        ("reversible", n(r.reversible)),
        ("numb_path", n(r.numb_path)),
        ("p_key", n(r.p_key.0)),
        ("qos_class", n(r.qos_class)),
        ("sl", n(r.sl.0)),
        // saquery prints the raw byte; the capture split it into the codes.
        ("mtu_selector", n(r.mtu_selector.to_raw_value())),
        ("mtu", n(r.mtu.to_raw_value())),
        ("rate_selector", n(r.rate_selector.to_raw_value())),
        ("rate", n(r.rate.to_raw_value())),
        (
            "packet_life_time_selector",
            n(r.packet_life_time_selector.to_raw_value()),
        ),
        ("packet_life_time", n(r.packet_life_time)),
        ("preference", n(r.preference)),
    ] {
        c.field(f, got)?;
    }
    Ok(())
}

fn check_mcmember_record(c: &mut Checker<'_>, r: &mcmember_record::Repr) -> Result<(), String> {
    for (f, got) in [
        ("mgid", Got::Gid(r.mgid.0)),
        ("port_gid", Got::Gid(r.port_gid.0)),
        ("q_key", n(r.q_key)),
        ("mlid", n(r.mlid.0)),
        ("mtu_selector", n(r.mtu_selector.to_raw_value())),
        ("mtu", n(r.mtu.to_raw_value())),
        ("tclass", n(r.tclass)),
        ("p_key", n(r.p_key.0)),
        ("rate_selector", n(r.rate_selector.to_raw_value())),
        ("rate", n(r.rate.to_raw_value())),
        (
            "packet_life_time_selector",
            n(r.packet_life_time_selector.to_raw_value()),
        ),
        ("packet_life_time", n(r.packet_life_time)),
        ("sl", n(r.sl.0)),
        ("flow_label", n(r.flow_label)),
        ("hop_limit", n(r.hop_limit)),
        ("scope", n(r.scope.to_raw_value())),
        ("join_state", n(r.join_state.0)),
        ("proxy_join", n(r.proxy_join)),
    ] {
        c.field(f, got)?;
    }
    Ok(())
}

fn check_sa(c: &mut Checker<'_>, s: &sa::Repr) -> Result<(), String> {
    let v = c.v;
    c.field("status", n(s.status.0))?;
    if !s.status.is_ok() {
        return Ok(());
    }
    match SaAttrId::from_raw_value(s.attr_id) {
        SaAttrId::ClassPortInfo => {
            if let Some(r) = first_record::<class_port_info::Repr>(v, s)? {
                check_class_port_info(c, &r)?;
            }
        }
        SaAttrId::NodeRecord => {
            if let Some(r) = first_record::<node_record::Repr>(v, s)? {
                c.field("lid", n(r.lid.0))?;
                check_node_info(c, "node_info.", &r.node_info)?;
                check_node_description(c, "node_description.", &r.node_description)?;
            }
        }
        SaAttrId::PortInfoRecord => {
            if let Some(r) = first_record::<port_info_record::Repr>(v, s)? {
                c.field("end_port_lid", n(r.endport_lid.0))?;
                c.field("port_num", n(r.port_num))?;
                c.field("options", n(r.options))?;
                check_port_info(c, "port_info.", &r.port_info)?;
            }
        }
        SaAttrId::SwitchInfoRecord => {
            if let Some(r) = first_record::<switch_info_record::Repr>(v, s)? {
                c.field("lid", n(r.lid.0))?;
                check_switch_info(c, "switch_info.", &r.switch_info)?;
            }
        }
        SaAttrId::LinkRecord => {
            if let Some(r) = first_record::<link_record::Repr>(v, s)? {
                c.field("from_lid", n(r.from_lid.0))?;
                c.field("from_port", n(r.from_port))?;
                c.field("to_port", n(r.to_port))?;
                c.field("to_lid", n(r.to_lid.0))?;
            }
        }
        SaAttrId::SmInfoRecord => {
            if let Some(r) = first_record::<sm_info_record::Repr>(v, s)? {
                c.field("lid", n(r.lid.0))?;
                check_sm_info(c, "sm_info.", &r.sm_info)?;
            }
        }
        SaAttrId::GuidInfoRecord => {
            if let Some(r) = first_record::<guid_info_record::Repr>(v, s)? {
                c.field("lid", n(r.lid.0))?;
                c.field("block_num", n(r.block_num))?;
                c.indexed("guid_info.guid", |i| Some(n(r.guid(i)?.0)))?;
            }
        }
        SaAttrId::PKeyTableRecord => {
            if let Some(r) = first_record::<pkey_table_record::Repr>(v, s)? {
                c.field("lid", n(r.lid.0))?;
                c.field("port_num", n(r.port_num))?;
                c.field("block_num", n(r.block_num))?;
                c.indexed("p_key_table.p_key", |i| Some(n(r.p_key(i)?.0)))?;
            }
        }
        SaAttrId::SlToVlMappingTableRecord => {
            if let Some(r) = first_record::<sl2vl_record::Repr>(v, s)? {
                c.field("lid", n(r.lid.0))?;
                c.field("input_port_num", n(r.input_port_num))?;
                c.field("output_port_num", n(r.output_port_num))?;
                check_sl2vl(c, "sl_to_vl_mapping_table.", &r.sl_to_vl_mapping_table)?;
            }
        }
        SaAttrId::VlArbitrationTableRecord => {
            if let Some(r) = first_record::<vl_arb_record::Repr>(v, s)? {
                c.field("lid", n(r.lid.0))?;
                c.field("output_port_num", n(r.output_port_num))?;
                c.field("block_num", n(r.block_num))?;
                // A template may leave the block number 0; entries then count from 0.
                let first = r.block().map_or(0, |b| b.first_entry());
                check_vl_arb(c, "vl_arbitration_table.", first, &r.vl_arbitration_table)?;
            }
        }
        SaAttrId::LinearForwardingTableRecord => {
            if let Some(r) = first_record::<lft_record::Repr>(v, s)? {
                c.field("lid", n(r.lid.0))?;
                c.field("block_num", n(r.block_num))?;
                c.indexed("linear_forwarding_table.port", |lid| {
                    Some(n(r.port(Lid(u16::try_from(lid).ok()?))?.0))
                })?;
            }
        }
        SaAttrId::MulticastForwardingTableRecord => {
            if let Some(r) = first_record::<mft_record::Repr>(v, s)? {
                c.field("lid", n(r.lid.0))?;
                c.field("position", n(r.position))?;
                c.field("block_num", n(r.block_num))?;
            }
        }
        SaAttrId::PathRecord => {
            if let Some(r) = first_record::<path_record::Repr>(v, s)? {
                check_path_record(c, &r)?;
            }
        }
        SaAttrId::McMemberRecord => {
            if let Some(r) = first_record::<mcmember_record::Repr>(v, s)? {
                check_mcmember_record(c, &r)?;
            }
        }
        other => return Err(format!("{}: no check for SA attribute {other}", v.name)),
    }
    if v.direction == Direction::Request {
        for (key, _) in &v.expects {
            let bit = comp_bit(s.attr_id, key)
                .ok_or_else(|| format!("{}: no component bit for `{key}`", v.name))?;
            if s.component_mask & bit == 0 {
                return Err(format!(
                    "{}: the diag asked for {key}, but component mask {:#x} lacks bit {bit:#x}",
                    v.name, s.component_mask
                ));
            }
        }
    }
    Ok(())
}

/// Checks one vector; returns the expectation keys it compared.
fn check_vector(v: &Vector) -> Result<Vec<String>, String> {
    let hdr = mad::Repr::parse(&v.bytes).map_err(|e| format!("{}: {e}", v.name))?;
    let mut c = Checker {
        v,
        done: Vec::new(),
    };
    match hdr.mgmt_class {
        MgmtClass::SubnLid | MgmtClass::SubnDirected => {
            let s = smp::Repr::parse(&v.bytes).map_err(|e| format!("{}: {e}", v.name))?;
            // A Get carries no attribute (and the diags name none in requests).
            if v.direction == Direction::Response {
                check_smp_attribute(&mut c, &s)?;
            }
        }
        MgmtClass::SubnAdm => check_sa(&mut c, &parse_sa(v)?)?,
        other => return Err(format!("{}: no check for class {other}", v.name)),
    }
    Ok(c.done)
}

/// Runs the checks on every vector (panicking on a value that disagrees); returns
/// (vector, unchecked keys) for the vectors with expectations no check consumed.
fn run_checks(all: &[Vector]) -> Vec<(String, Vec<String>)> {
    let mut unchecked = Vec::new();
    for v in all {
        let checked = check_vector(v).unwrap_or_else(|e| panic!("{e}"));
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
    run_checks(&all);
    let responses_with = |key: &str| {
        all.iter()
            .filter(|v| v.direction == Direction::Response && v.expect(key).is_some())
            .count()
    };
    assert!(responses_with("node_guid") >= 8, "NodeInfo responses");
    assert!(responses_with("port_state") >= 8, "PortInfo responses");
    assert!(
        responses_with("port_info.port_state") >= 3,
        "PortInfoRecords"
    );
}

#[test]
fn every_expectation_is_checked() {
    let all = load_all();
    let unchecked = run_checks(&all);
    let report: Vec<String> = unchecked
        .iter()
        .map(|(name, keys)| format!("{name}: {}", keys.join(", ")))
        .collect();
    assert!(
        unchecked.is_empty(),
        "unchecked expectations:\n{}",
        report.join("\n")
    );
    let total: usize = all.iter().map(|v| v.expects.len()).sum();
    assert!(total > 1000, "only {total} expectations");
}

#[test]
fn checks_catch_a_wrong_value() {
    let all = load_all();
    let v = all
        .iter()
        .find(|v| v.name == "sa_portinforecord.resp")
        .unwrap();
    for (key, wrong) in [
        ("port_info.port_state", "Armed"),
        ("port_info.neighbor_mtu", "4096"),
        ("port_info.link_width_active", "1X"),
        ("port_info.link_speed_active", "5.0 Gbps"),
        ("port_info.vl_cap", "VL0-3"),
        ("end_port_lid", "5"),
    ] {
        let mut bad = v.clone();
        for e in bad.expects.iter_mut().filter(|(k, _)| k == key) {
            e.1 = wrong.to_string();
        }
        let err = check_vector(&bad).unwrap_err();
        assert!(err.contains(key), "{err}");
    }
    // An index outside the decoded block is an error, not a skip.
    let v = all.iter().find(|v| v.name == "lr_lft_block0.resp").unwrap();
    let mut far = Vector {
        expects: vec![("port[64]".into(), "0".into())],
        ..v.clone()
    };
    assert!(check_vector(&far).unwrap_err().contains("port[64]"));
    far.expects = vec![("port[5]".into(), "2".into())];
    assert_eq!(check_vector(&far).unwrap(), ["port[5]"]);
}

#[test]
fn diag_renderings() {
    assert_eq!(width_text(0x2), "4X");
    assert_eq!(width_text(0x3), "1X or 4X");
    assert_eq!(width_text(0x1f), "1X or 4X or 8X or 12X or 2X");
    assert_eq!(width_text(0), "undefined (0)");
    assert_eq!(speed_text(1), "2.5 Gbps");
    assert_eq!(speed_text(7), "2.5 Gbps or 5.0 Gbps or 10.0 Gbps");
    assert_eq!(speed_text(0), "Extended speed");
    assert_eq!(vls_text(port_info::VlCap::Vl0), "VL0");
    assert_eq!(vls_text(port_info::VlCap::Vl0To14), "VL0-14");
    assert_eq!(mtu_text(port_info::Mtu::Mtu256), "256");
    assert_eq!(port_state_text(port_info::PortState::Init), "Initialize");
}

/// Every SA MAD re-emits byte for byte, and so does every record in it: a table answer's
/// records repack into exactly the bytes OpenSM sent (its padding is zero).
#[test]
fn every_sa_record_round_trips() {
    fn records<R: Wire + PartialEq + core::fmt::Debug>(v: &Vector, s: &sa::Repr) -> usize {
        let recs = sa_records::<R>(v, s).unwrap_or_else(|e| panic!("{e}"));
        if s.method == Method::GetTableResp {
            let sent = &v.bytes[SA_DATA..];
            let (offset, packed) = sa::pack_records(&recs).unwrap();
            assert_eq!(offset, s.attribute_offset, "{}", v.name);
            assert_eq!(packed, sent, "{}: repacked records", v.name);
        } else {
            let mut out = vec![0xa5u8; R::LEN];
            recs[0].emit(&mut out).unwrap();
            assert_eq!(out[..], s.data.0[..R::LEN], "{}: template", v.name);
        }
        recs.len()
    }
    let mut seen = 0;
    for v in load_all().iter().filter(|v| v.bytes.get(1) == Some(&0x03)) {
        let s = parse_sa(v).unwrap_or_else(|e| panic!("{e}"));
        let mut out = [0xa5u8; sa::LEN];
        s.emit(&mut out).unwrap();
        assert_eq!(out[..v.bytes.len()], v.bytes[..], "{}", v.name);
        assert!(out[v.bytes.len()..].iter().all(|&b| b == 0), "{}", v.name);
        if !s.status.is_ok() {
            continue;
        }
        seen += match SaAttrId::from_raw_value(s.attr_id) {
            SaAttrId::ClassPortInfo => records::<class_port_info::Repr>(v, &s),
            SaAttrId::NodeRecord => records::<node_record::Repr>(v, &s),
            SaAttrId::PortInfoRecord => records::<port_info_record::Repr>(v, &s),
            SaAttrId::SwitchInfoRecord => records::<switch_info_record::Repr>(v, &s),
            SaAttrId::LinkRecord => records::<link_record::Repr>(v, &s),
            SaAttrId::SmInfoRecord => records::<sm_info_record::Repr>(v, &s),
            SaAttrId::GuidInfoRecord => records::<guid_info_record::Repr>(v, &s),
            SaAttrId::PKeyTableRecord => records::<pkey_table_record::Repr>(v, &s),
            SaAttrId::SlToVlMappingTableRecord => records::<sl2vl_record::Repr>(v, &s),
            SaAttrId::VlArbitrationTableRecord => records::<vl_arb_record::Repr>(v, &s),
            SaAttrId::LinearForwardingTableRecord => records::<lft_record::Repr>(v, &s),
            SaAttrId::MulticastForwardingTableRecord => records::<mft_record::Repr>(v, &s),
            SaAttrId::PathRecord => records::<path_record::Repr>(v, &s),
            SaAttrId::McMemberRecord => records::<mcmember_record::Repr>(v, &s),
            other => panic!("{}: no record type for {other}", v.name),
        };
    }
    assert!(seen >= 40, "{seen} records");
}
