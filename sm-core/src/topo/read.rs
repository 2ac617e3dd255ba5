//! The reader. One pass collects node records and port lines, a second resolves links, so
//! a link may name a node defined later in the file.

use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};

use nom::bytes::complete::{tag, take_till};
use nom::character::complete::{char, digit1, hex_digit1, space0};
use nom::combinator::{map_res, opt, recognize};
use nom::sequence::{delimited, preceded};
use nom::{IResult, Parser};

use super::{TopoError, TopoErrorKind, Topology};
use crate::fabric::{Fabric, FabricError, NodeKind, NodeSpec, PortIdx, Speed};
use sm_mad::{Guid, Lid};

const MAX_INCLUDE_DEPTH: usize = 16;

/// Reads a topology file (ibnetdiscover output or ibsim net file).
pub fn read_topology(path: &Path) -> Result<Topology, TopoError> {
    let mut r = Reader::default();
    r.read_file(path, 0)?;
    r.finish()
}

/// Reads topology text; `name` is used in errors and to resolve `include` lines.
pub fn read_topology_str(text: &str, name: &Path) -> Result<Topology, TopoError> {
    let mut r = Reader::default();
    let file = r.add_file(name);
    r.read_text(text, file, 0)?;
    r.finish()
}

#[derive(Debug, Clone, Copy)]
struct Links {
    width: u8,
    speed: u8,
    ext: u8,
    /// LinkSpeedExtEnabled2 (XDR): an ibsm extension, ibsim has no such setting.
    ext2: u8,
    fdr10: bool,
}

impl Default for Links {
    fn default() -> Self {
        // ibsim's defaults: 4x enabled (with 1x), SDR.
        Links {
            width: 3,
            speed: 1,
            ext: 0,
            ext2: 0,
            fdr10: false,
        }
    }
}

#[derive(Debug)]
struct RawPort {
    file: usize,
    line: usize,
    num: u8,
    guid: Option<Guid>,
    /// Symbol of the remote node id.
    remote: u32,
    remote_port: u8,
    links: Links,
    lid: Option<u16>,
    lmc: Option<u8>,
}

#[derive(Debug)]
struct RawNode {
    file: usize,
    line: usize,
    kind: NodeKind,
    id: String,
    sym: u32,
    desc: String,
    num_ports: u8,
    guid: Guid,
    system_guid: Guid,
    vendor_id: u32,
    device_id: u16,
    enhanced_port0: bool,
    lid: Option<u16>,
    lmc: Option<u8>,
    defaults: Links,
    ports: Vec<RawPort>,
}

/// ibsim's GUID counters: an absolute base and the next GUID, per node kind.
#[derive(Debug, Clone, Copy)]
struct GuidCounter {
    base: u64,
    next: u64,
}

#[derive(Debug)]
struct Reader {
    files: Vec<PathBuf>,
    nodes: Vec<RawNode>,
    /// Node ids seen (defined or referenced), interned so links compare as integers.
    syms: FxHashMap<Box<str>, u32>,
    sym_names: Vec<Box<str>>,
    /// Node index per symbol (`u32::MAX` while undefined).
    sym_node: Vec<u32>,
    counters: [GuidCounter; 3],
    vendid: u32,
    devid: u16,
    sysimgguid: Option<u64>,
    links: Links,
    commands: Vec<(PathBuf, usize, String)>,
    current: Option<usize>,
}

impl Default for Reader {
    fn default() -> Self {
        Reader {
            files: Vec::new(),
            nodes: Vec::new(),
            syms: FxHashMap::default(),
            sym_names: Vec::new(),
            sym_node: Vec::new(),
            counters: [
                GuidCounter {
                    base: 0x10_0000,
                    next: 0x10_0000,
                },
                GuidCounter {
                    base: 0x20_0000,
                    next: 0x20_0000,
                },
                GuidCounter { base: 0, next: 0 },
            ],
            vendid: 0,
            devid: 0,
            sysimgguid: None,
            links: Links::default(),
            commands: Vec::new(),
            current: None,
        }
    }
}

fn kind_slot(k: NodeKind) -> usize {
    match k {
        NodeKind::Ca => 0,
        NodeKind::Switch => 1,
        NodeKind::Router => 2,
    }
}

type Res<'a, T> = IResult<&'a str, T>;

fn number(i: &str) -> Res<'_, u64> {
    let hex = preceded(
        tag("0x"),
        map_res(hex_digit1, |h: &str| u64::from_str_radix(h, 16)),
    );
    let dec = map_res(digit1, |d: &str| d.parse::<u64>());
    nom::branch::alt((hex, dec)).parse(i)
}

fn hex_guid(i: &str) -> Res<'_, Guid> {
    let (i, _) = opt(tag("0x")).parse(i)?;
    map_res(hex_digit1, |h: &str| u64::from_str_radix(h, 16).map(Guid)).parse(i)
}

fn quoted(i: &str) -> Res<'_, &str> {
    delimited(char('"'), take_till(|c| c == '"'), char('"')).parse(i)
}

fn bracketed_num(i: &str) -> Res<'_, u64> {
    delimited((char('['), space0), number, (space0, char(']'))).parse(i)
}

fn paren_guid(i: &str) -> Res<'_, Guid> {
    delimited(char('('), hex_guid, char(')')).parse(i)
}

/// `[p](guid) "remote"[rp](guid)` and the rest of the line.
#[allow(clippy::type_complexity)]
fn port_head(i: &str) -> Res<'_, (u64, Option<Guid>, &str, Option<u64>)> {
    let (i, num) = bracketed_num(i)?;
    let (i, guid) = opt(paren_guid).parse(i)?;
    let (i, _) = space0(i)?;
    let (i, remote) = quoted(i)?;
    let (i, _) = space0(i)?;
    let (i, rport) = opt(bracketed_num).parse(i)?;
    let (i, _) = opt(paren_guid).parse(i)?;
    Ok((i, (num, guid, remote, rport)))
}

/// `Switch 8 "id"` / `Ca 2 "id"` and the rest of the line.
fn node_head(i: &str) -> Res<'_, (&str, u64, &str)> {
    let mut kw = recognize(nom::branch::alt((
        tag("Switch"),
        tag("Hca"),
        tag("Ca"),
        tag("Rt"),
    )));
    let (i, kw) = kw.parse(i)?;
    let (i, _) = space0(i)?;
    let (i, n) = number(i)?;
    let (i, _) = space0(i)?;
    let (i, id) = quoted(i)?;
    Ok((i, (kw, n, id)))
}

/// Splits a comment into (text before the first quote, quoted text, text after the last quote).
fn split_comment(c: &str) -> (&str, Option<&str>, &str) {
    match (c.find('"'), c.rfind('"')) {
        (Some(a), Some(b)) if b > a => (&c[..a], Some(&c[a + 1..b]), &c[b + 1..]),
        _ => (c, None, ""),
    }
}

/// The value after `key` among whitespace-separated tokens (`lid 5`).
fn token_after(s: &str, key: &str) -> Option<u64> {
    let mut it = s.split_whitespace();
    while let Some(t) = it.next() {
        if t == key {
            return it.next().and_then(|v| number(v).ok().map(|(_, n)| n));
        }
    }
    None
}

/// `4xQDR`-style token: enabled masks as ibsim derives them from such a comment.
fn rate_token(s: &str) -> Option<Links> {
    s.split_whitespace().find_map(|t| {
        let (w, sp) = t.split_once('x')?;
        let width = match w.parse::<u32>().ok()? {
            1 => 1,
            2 => 16,
            4 => 3,
            8 => 4,
            12 => 11,
            _ => return None,
        };
        let speed = Speed::from_name(sp)?;
        let (speed_mask, ext) = match (speed.ext, speed.ext2) {
            (_, 1..) => (7, 15),
            (0, _) if !speed.fdr10 => ((speed.speed << 1) - 1, 0),
            (e, _) => (7, (e << 1) - 1),
        };
        Some(Links {
            width,
            speed: speed_mask,
            ext,
            ext2: speed.ext2,
            fdr10: speed.fdr10 || ext != 0,
        })
    })
}

/// The highest bit set in `m` (0 when none).
fn top_bit(m: u8) -> u8 {
    if m == 0 {
        0
    } else {
        1 << (7 - m.leading_zeros())
    }
}

/// Widest common width: 12x > 8x > 4x > 2x > 1x.
fn common_width(a: u8, b: u8) -> u8 {
    let m = a & b;
    [8u8, 4, 2, 16, 1]
        .into_iter()
        .find(|w| m & w != 0)
        .unwrap_or(0)
}

impl Reader {
    fn sym(&mut self, name: &str) -> u32 {
        if let Some(&s) = self.syms.get(name) {
            return s;
        }
        let s = self.sym_names.len() as u32;
        self.syms.insert(name.into(), s);
        self.sym_names.push(name.into());
        self.sym_node.push(u32::MAX);
        s
    }

    fn add_file(&mut self, p: &Path) -> usize {
        self.files.push(p.to_path_buf());
        self.files.len() - 1
    }

    fn err(&self, file: usize, line: usize, kind: TopoErrorKind) -> TopoError {
        TopoError {
            file: self.files.get(file).cloned().unwrap_or_default(),
            line,
            kind,
        }
    }

    fn read_file(&mut self, path: &Path, depth: usize) -> Result<(), TopoError> {
        let file = self.add_file(path);
        let text =
            std::fs::read(path).map_err(|e| self.err(file, 0, TopoErrorKind::Io(e.to_string())))?;
        let text = match String::from_utf8(text) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        self.read_text(&text, file, depth)
    }

    fn read_text(&mut self, text: &str, file: usize, depth: usize) -> Result<(), TopoError> {
        // A record never continues across files.
        self.current = None;
        for (n, raw) in text.lines().enumerate() {
            let line = n + 1;
            let t = raw.trim();
            if t.is_empty() {
                self.current = None;
                continue;
            }
            if t.starts_with('#') {
                continue;
            }
            if t.starts_with('[') {
                self.port_line(t, file, line)?;
                continue;
            }
            self.current = None;
            if t.starts_with('@') {
                return Err(self.err(
                    file,
                    line,
                    TopoErrorKind::Unsupported("port aliases ('@')".into()),
                ));
            }
            if t.starts_with("Switch")
                || t.starts_with("Hca")
                || t.starts_with("Ca")
                || t.starts_with("Rt")
            {
                self.node_line(t, file, line)?;
            } else if let Some(rest) = t.strip_prefix("include") {
                self.include(rest, file, line, depth)?;
            } else if let Some(rest) = t.strip_prefix("do") {
                let cmd = rest.trim().to_string();
                self.commands.push((self.files[file].clone(), line, cmd));
            } else {
                self.assignment(t, file, line)?;
            }
        }
        self.current = None;
        Ok(())
    }

    fn include(
        &mut self,
        rest: &str,
        file: usize,
        line: usize,
        depth: usize,
    ) -> Result<(), TopoError> {
        let Ok((_, name)) = preceded(space0, quoted).parse(rest) else {
            return Err(self.err(
                file,
                line,
                TopoErrorKind::Syntax("include needs a quoted file name".into()),
            ));
        };
        if depth + 1 > MAX_INCLUDE_DEPTH {
            return Err(self.err(file, line, TopoErrorKind::IncludeDepth(MAX_INCLUDE_DEPTH)));
        }
        let mut path = PathBuf::from(name);
        if path.is_relative() {
            if let Some(dir) = self.files[file].parent() {
                let beside = dir.join(&path);
                if beside.exists() {
                    path = beside;
                }
            }
        }
        let text = std::fs::read(&path).map_err(|e| {
            self.err(
                file,
                line,
                TopoErrorKind::Io(format!("include \"{}\": {e}", path.display())),
            )
        })?;
        let included = self.add_file(&path);
        self.read_text(&String::from_utf8_lossy(&text), included, depth + 1)
    }

    fn assignment(&mut self, t: &str, file: usize, line: usize) -> Result<(), TopoError> {
        let key_end = t
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(t.len());
        let (key, rest) = t.split_at(key_end);
        let rest = rest.trim_start();
        let syntax = |me: &Self, msg: String| me.err(file, line, TopoErrorKind::Syntax(msg));
        let (relative, value) = match rest.chars().next() {
            Some('=') => (false, rest[1..].trim_start()),
            Some('+') => (true, rest[1..].trim_start()),
            _ => return Err(syntax(self, format!("unrecognised line \"{t}\""))),
        };
        let num = || {
            number(value)
                .map(|(_, n)| n)
                .map_err(|_| syntax(self, format!("{key}: expected a number, got \"{value}\"")))
        };
        let slot = match key {
            "switchguid" => Some(1),
            "caguid" | "hcaguids" => Some(0),
            "rtguid" => Some(2),
            _ => None,
        };
        if let Some(slot) = slot {
            let v = num()?;
            let c = &mut self.counters[slot];
            if relative {
                c.next = c.base.wrapping_add(v);
            } else {
                c.base = v;
                c.next = v;
            }
            return Ok(());
        }
        if relative {
            return Err(syntax(
                self,
                format!("{key}: '+' is only valid for GUID bases"),
            ));
        }
        match key {
            "vendid" => self.vendid = num()? as u32 & 0xff_ffff,
            "devid" => self.devid = num()? as u16,
            "sysimgguid" => self.sysimgguid = Some(num()?),
            "width" => {
                let v = num()?;
                if !(1..=31).contains(&v) {
                    return Err(syntax(self, format!("width {v} is out of range 1..=31")));
                }
                self.links.width = v as u8;
            }
            "speed" => {
                let v = num()?;
                if !(1..=7).contains(&v) {
                    return Err(syntax(self, format!("speed {v} is out of range 1..=7")));
                }
                self.links.speed = v as u8;
            }
            "extspeed" => {
                let v = num()?;
                if v > 15 {
                    return Err(syntax(self, format!("extspeed {v} is out of range 0..=15")));
                }
                self.links.ext = v as u8;
            }
            "extspeed2" => {
                let v = num()?;
                if v > 1 {
                    return Err(syntax(self, format!("extspeed2 {v} is out of range 0..=1")));
                }
                self.links.ext2 = v as u8;
            }
            "pdebug" => {}
            "module" => {
                return Err(self.err(
                    file,
                    line,
                    TopoErrorKind::Unsupported("module prefixes".into()),
                ));
            }
            _ => return Err(syntax(self, format!("unknown setting \"{key}\""))),
        }
        Ok(())
    }

    fn node_line(&mut self, t: &str, file: usize, line: usize) -> Result<(), TopoError> {
        let (rest, (kw, count, id)) = node_head(t).map_err(|_| {
            self.err(
                file,
                line,
                TopoErrorKind::Syntax(format!(
                    "expected `Switch|Ca|Hca|Rt <ports> \"<id>\"`, got \"{t}\""
                )),
            )
        })?;
        let kind = match kw {
            "Switch" => NodeKind::Switch,
            "Rt" => NodeKind::Router,
            _ => NodeKind::Ca,
        };
        if !(1..=254).contains(&count) {
            return Err(self.err(
                file,
                line,
                TopoErrorKind::BadPortCount {
                    node: id.into(),
                    count: count.min(u32::MAX as u64) as u32,
                },
            ));
        }
        let num_ports = count as u8;
        let sym = self.sym(id);
        if self.sym_node[sym as usize] != u32::MAX {
            return Err(self.err(file, line, TopoErrorKind::DuplicateId(id.into())));
        }
        let comment = rest.trim_start().strip_prefix('#').unwrap_or("");
        let (_, desc, after) = split_comment(comment);
        let after = if desc.is_some() { after } else { comment };
        let slot = kind_slot(kind);
        let guid = self.counters[slot].next;
        self.counters[slot].next = guid.wrapping_add(if kind == NodeKind::Switch {
            1
        } else {
            num_ports as u64 + 1
        });
        let node = RawNode {
            file,
            line,
            kind,
            id: id.to_string(),
            sym,
            desc: desc.unwrap_or(id).to_string(),
            num_ports,
            guid: Guid(guid),
            system_guid: Guid(self.sysimgguid.take().unwrap_or(guid)),
            vendor_id: std::mem::take(&mut self.vendid),
            device_id: self.devid,
            enhanced_port0: after.contains("enhanced port 0"),
            lid: token_after(after, "lid").map(|v| v as u16),
            lmc: token_after(after, "lmc").map(|v| v as u8),
            defaults: self.links,
            ports: Vec::new(),
        };
        self.sym_node[sym as usize] = self.nodes.len() as u32;
        self.current = Some(self.nodes.len());
        self.nodes.push(node);
        Ok(())
    }

    fn port_line(&mut self, t: &str, file: usize, line: usize) -> Result<(), TopoError> {
        let Some(cur) = self.current else {
            return Err(self.err(file, line, TopoErrorKind::PortOutsideNode));
        };
        let (rest, (num, guid, remote, rport)) = port_head(t).map_err(|_| {
            self.err(
                file,
                line,
                TopoErrorKind::Syntax(format!(
                    "expected `[<port>] \"<remote id>\"[<remote port>]`, got \"{t}\""
                )),
            )
        })?;
        let node = &self.nodes[cur];
        let (kind, ports) = (node.kind, node.num_ports);
        let min = if kind == NodeKind::Switch { 0 } else { 1 };
        if num < min || num > ports as u64 {
            return Err(self.err(
                file,
                line,
                TopoErrorKind::PortOutOfRange {
                    node: node.id.clone(),
                    port: num.min(u32::MAX as u64) as u32,
                    ports,
                },
            ));
        }
        let num = num as u8;
        if num == 0 {
            return Err(self.err(
                file,
                line,
                TopoErrorKind::Syntax("switch port 0 cannot carry a link".into()),
            ));
        }
        if node.ports.iter().any(|p| p.num == num) {
            return Err(self.err(
                file,
                line,
                TopoErrorKind::DuplicatePort {
                    node: node.id.clone(),
                    port: num,
                },
            ));
        }
        let remote_port = match rport {
            None => 1,
            Some(p) if (1..=254).contains(&p) => p as u8,
            Some(p) => {
                return Err(self.err(
                    file,
                    line,
                    TopoErrorKind::Syntax(format!("remote port {p} is out of range 1..=254")),
                ));
            }
        };
        let (opts, comment) = match rest.split_once('#') {
            Some((o, c)) => (o, c),
            None => (rest, ""),
        };
        let mut links = node.defaults;
        for opt in opts.split_whitespace() {
            let Some((k, v)) = opt.split_once('=') else {
                return Err(self.err(
                    file,
                    line,
                    TopoErrorKind::Syntax(format!("unexpected \"{opt}\" after the remote port")),
                ));
            };
            let v = number(v).map(|(_, n)| n).map_err(|_| {
                self.err(
                    file,
                    line,
                    TopoErrorKind::Syntax(format!("option {k}: expected a number, got \"{v}\"")),
                )
            })?;
            let bad = |what: &str| {
                self.err(
                    file,
                    line,
                    TopoErrorKind::Syntax(format!("option {k}={v}: {what}")),
                )
            };
            match k {
                "w" if (1..=31).contains(&v) => links.width = v as u8,
                "s" if v <= 7 => links.speed = if v == 0 { 7 } else { v as u8 },
                "e" if v <= 15 => links.ext = v as u8,
                "e2" if v <= 1 => links.ext2 = v as u8,
                "w" | "s" | "e" | "e2" => return Err(bad("out of range")),
                _ => return Err(bad("unknown option")),
            }
        }
        let (before, _, after) = split_comment(comment);
        let after = if comment.contains('"') {
            after
        } else {
            comment
        };
        if let Some(r) = rate_token(after) {
            links = r;
        }
        let (lid, lmc) = if kind == NodeKind::Switch {
            (None, None)
        } else {
            (
                token_after(before, "lid").map(|v| v as u16),
                token_after(before, "lmc").map(|v| v as u8),
            )
        };
        let port = RawPort {
            file,
            line,
            num,
            guid,
            remote: self.sym(remote),
            remote_port,
            links,
            lid,
            lmc,
        };
        self.nodes[cur].ports.push(port);
        Ok(())
    }

    fn finish(mut self) -> Result<Topology, TopoError> {
        for n in &mut self.nodes {
            n.ports.sort_unstable_by_key(|p| p.num);
        }
        let mut fabric = Fabric::new();
        let mut idx = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let port_guids = (n.kind != NodeKind::Switch).then(|| {
                (1..=n.num_ports)
                    .map(|p| {
                        n.ports
                            .binary_search_by_key(&p, |rp| rp.num)
                            .ok()
                            .and_then(|i| n.ports[i].guid)
                            .unwrap_or(Guid(n.guid.0.wrapping_add(p as u64)))
                    })
                    .collect()
            });
            let spec = NodeSpec {
                kind: n.kind,
                guid: n.guid,
                system_guid: n.system_guid,
                description: n.desc.clone(),
                num_ports: n.num_ports,
                vendor_id: n.vendor_id,
                device_id: n.device_id,
                revision: 0,
                enhanced_port0: n.enhanced_port0,
                port_guids,
            };
            let ni = fabric.add_node(spec).map_err(|e| {
                let kind = match e {
                    FabricError::DuplicateNodeGuid(g) => {
                        TopoErrorKind::DuplicateGuid(format!("node GUID {g} of \"{}\"", n.id))
                    }
                    FabricError::DuplicatePortGuid(g) => {
                        TopoErrorKind::DuplicateGuid(format!("port GUID {g} of \"{}\"", n.id))
                    }
                    other => TopoErrorKind::Link(other.to_string()),
                };
                self.err(n.file, n.line, kind)
            })?;
            if n.kind == NodeKind::Switch {
                if let Some(p0) = fabric.port_of(ni, 0) {
                    let p = fabric.port_mut(p0);
                    p.lid = Lid(n.lid.unwrap_or(0));
                    p.lmc = n.lmc.unwrap_or(0);
                }
            }
            idx.push(ni);
        }
        for (a, n) in self.nodes.iter().enumerate() {
            for rp in &n.ports {
                let b = self.sym_node[rp.remote as usize] as usize;
                if b == u32::MAX as usize {
                    return Err(self.err(
                        rp.file,
                        rp.line,
                        TopoErrorKind::UnknownRemote {
                            node: n.id.clone(),
                            port: rp.num,
                            remote: self.sym_names[rp.remote as usize].to_string(),
                        },
                    ));
                }
                let m = &self.nodes[b];
                if rp.remote_port > m.num_ports {
                    return Err(self.err(
                        rp.file,
                        rp.line,
                        TopoErrorKind::PortOutOfRange {
                            node: m.id.clone(),
                            port: rp.remote_port as u32,
                            ports: m.num_ports,
                        },
                    ));
                }
                let back = m
                    .ports
                    .binary_search_by_key(&rp.remote_port, |q| q.num)
                    .ok()
                    .map(|i| &m.ports[i]);
                let asym = |why: String| {
                    self.err(
                        rp.file,
                        rp.line,
                        TopoErrorKind::AsymmetricLink {
                            node: n.id.clone(),
                            port: rp.num,
                            remote: m.id.clone(),
                            remote_port: rp.remote_port,
                            back: why,
                        },
                    )
                };
                let Some(q) = back else {
                    return Err(asym("is not listed".into()));
                };
                if q.remote != n.sym || q.remote_port != rp.num {
                    return Err(asym(format!(
                        "links to \"{}\"[{}]",
                        self.sym_names[q.remote as usize], q.remote_port
                    )));
                }
                if (a, rp.num) > (b, q.num) {
                    continue; // linked from the other end
                }
                if (a, rp.num) == (b, q.num) {
                    return Err(self.err(
                        rp.file,
                        rp.line,
                        TopoErrorKind::Link(format!(
                            "port {} of \"{}\" links to itself",
                            rp.num, n.id
                        )),
                    ));
                }
                let width = common_width(rp.links.width, q.links.width);
                let speed = top_bit(rp.links.speed & q.links.speed);
                if width == 0 || speed == 0 {
                    return Err(self.err(
                        rp.file,
                        rp.line,
                        TopoErrorKind::Link(format!(
                            "\"{}\"[{}] and \"{}\"[{}] share no enabled width or speed",
                            n.id, rp.num, m.id, q.num
                        )),
                    ));
                }
                let ext2 = top_bit(rp.links.ext2 & q.links.ext2);
                let speed = Speed {
                    speed,
                    // An XDR link is active at XDR only.
                    ext: if ext2 != 0 {
                        0
                    } else {
                        top_bit(rp.links.ext & q.links.ext)
                    },
                    ext2,
                    fdr10: rp.links.fdr10 && q.links.fdr10,
                };
                let (pa, pb) = match (
                    fabric.port_of(idx[a], rp.num),
                    fabric.port_of(idx[b], q.num),
                ) {
                    (Some(x), Some(y)) => (x, y),
                    _ => {
                        return Err(self.err(
                            rp.file,
                            rp.line,
                            TopoErrorKind::Link("port missing from the model".into()),
                        ));
                    }
                };
                fabric
                    .connect(pa, pb)
                    .map_err(|e| self.err(rp.file, rp.line, TopoErrorKind::Link(e.to_string())))?;
                for (port, raw) in [(pa, rp), (pb, q)] {
                    let p = fabric.port_mut(port);
                    p.width = width;
                    p.speed = speed;
                    if let Some(l) = raw.lid {
                        p.lid = Lid(l);
                    }
                    if let Some(l) = raw.lmc {
                        p.lmc = l;
                    }
                }
            }
        }
        let first_port: Option<PortIdx> = self.nodes.first().and_then(|n| {
            let first = if n.kind == NodeKind::Switch {
                0
            } else {
                n.ports.iter().map(|p| p.num).min().unwrap_or(1)
            };
            fabric.port_of(idx[0], first)
        });
        Ok(Topology {
            fabric,
            first_port,
            commands: self.commands,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_tokens() {
        let l = rate_token(" lid 5 4xQDR").unwrap();
        assert_eq!((l.width, l.speed, l.ext), (3, 7, 0));
        let l = rate_token("4xEDR").unwrap();
        assert_eq!((l.speed, l.ext), (7, 3));
        let l = rate_token("4xXDR").unwrap();
        assert_eq!((l.speed, l.ext, l.ext2), (7, 15, 1));
        assert!(rate_token("lid 3").is_none());
        assert_eq!(common_width(3, 11), 2);
        assert_eq!(top_bit(7), 4);
    }
}
