//! Partitions: OpenSM's `partitions.conf` grammar, the model it describes, and the P_Key
//! tables that model gives every port.
//!
//! # The file
//! ```text
//! # comment to the end of the line
//! Name[=PKey][,flag[=value]]... : [member[=full|limited|both]][, member]... ;
//! ```
//! A definition may span lines up to its `;`; members are separated by commas or line
//! ends. Members are `ALL`, `ALL_CAS`, `ALL_SWITCHES`, `ALL_ROUTERS`, `SELF` (the SM's port),
//! `NONE` and port GUIDs (`0x...`, decimal or C octal). Header flags: `ipoib`, `indx0`,
//! `defmember=`, and the multicast group flags `mtu=`, `rate=`, `sl=`, `scope=`, `Q_Key=`,
//! `TClass=`, `FlowLabel=`. A member line `mgid=GID[,group flag]...` declares a multicast
//! group of the partition; it runs to the end of its line.
//!
//! # Semantics shared with OpenSM 3.3.23
//! - The default partition 0x7fff always exists. Without a file every port is a full member;
//!   with a file, ports the file does not name are limited members and the SM's port is full.
//!   The file may redefine it (`Default=0x7fff : ALL=full ;`).
//! - Only the low 15 bits of a P_Key count. Definitions with one P_Key merge (the first name
//!   stays); a definition without a P_Key reuses the partition of that name, or gets the
//!   lowest unused P_Key from 0x0001 up.
//! - A later rule for a port overrides an earlier one in the same partition. `both` means
//!   full unless `allow_both_pkeys` is on, when the port holds both keys.
//! - Table order: index 0 holds the default key (or the partition marked `indx0` for the
//!   port), then the other keys partition by partition in OpenSM's map order (the P_Key with
//!   its bytes swapped, as OpenSM stores it on little-endian hosts), limited before full.
//!   With `allow_both_pkeys` only the full default key 0xffff claims index 0; a port that
//!   is a limited default member has index 0 empty and 0x7fff further on.
//! - A switch port facing a CA or router gets the CA port's keys packed from index 0, without
//!   a limited key whose full key is also present, for partition enforcement.
//! - Member GUIDs not in the fabric are skipped (reported in [`PKeyTables::unknown_guids`]);
//!   OpenSM drops a partition left without members, and its multicast groups with it.
//!
//! # Where we differ
//! OpenSM logs and skips what it does not understand, and falls back to "everyone full in
//! the default partition" when a file fails. Here every such case is an error naming file,
//! line and column: unknown flags and member keywords, flag values out of range, abbreviated
//! flag or keyword names (OpenSM accepts any prefix), a P_Key of 0 or above 0xffff (OpenSM
//! truncates, or generates one), a definition left without `;` at the end of the file, one
//! P_Key under two names, one name with two P_Keys, a multicast group defined twice, and an
//! IP multicast group whose P_Key, rate or MTU disagree with its partition. Membership values
//! may still be abbreviated (`limi`), as OpenSM's own documentation does. Groups inherit the
//! partition's TClass (OpenSM 3.3.23 drops it). Tables are computed afresh: OpenSM keeps the
//! index a key held in the port's previous table (`keep_pkey_indexes`); a fresh fabric gets
//! the same result.

use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};

use nom::branch::alt;
use nom::bytes::complete::{tag_no_case, take_till, take_while, take_while1};
use nom::character::complete::{char, digit1, hex_digit1};
use nom::combinator::{all_consuming, map_res, opt, verify};
use nom::multi::many0;
use nom::sequence::preceded;
use nom::{IResult, Parser};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::fabric::{Fabric, NodeKind, PortIdx};
use sm_mad::link::{Mtu, Rate};
use sm_mad::mcmember_record::{IPOIB_BROADCAST_Q_KEY, Scope};
use sm_mad::{Gid, Guid, PKey, Sl};

/// The default partition's P_Key without the membership bit.
pub const DEFAULT_PKEY: PKey = PKey(0x7fff);
/// The name OpenSM gives the default partition.
pub const DEFAULT_NAME: &str = "Default";
/// Multicast group MTU when no `mtu=` flag is given: 4 (2048 bytes).
pub const DEFAULT_MGRP_MTU: Mtu = Mtu::Mtu2048;
/// Multicast group rate when no `rate=` flag is given: 3 (10 Gb/s).
pub const DEFAULT_MGRP_RATE: Rate = Rate::Gbps10;

const FULL: u8 = 1;
const LIMITED: u8 = 2;

/// Where and why a partitions file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{column}: {kind}", file.display())]
pub struct PartitionError {
    pub file: PathBuf,
    /// 1-based line (0 when the file could not be read).
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    pub kind: PartitionErrorKind,
}

/// What is wrong in a partitions file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PartitionErrorKind {
    #[error("cannot read file: {0}")]
    Io(String),
    #[error("expected ':' after the partition header `Name[=PKey][,flag...]`")]
    MissingColon,
    #[error("definition started on line {started} has no ';' before the end of the file")]
    MissingSemicolon { started: usize },
    #[error(
        "unexpected ':' in a member list; is the ';' missing after the definition started on line {started}?"
    )]
    StrayColon { started: usize },
    #[error("bad P_Key \"{value}\": {why}")]
    BadPKey { value: String, why: &'static str },
    #[error("bad port GUID \"{0}\"")]
    BadGuid(String),
    #[error(
        "unknown member \"{0}\" (expected a port GUID, ALL, ALL_CAS, ALL_SWITCHES, ALL_ROUTERS, SELF or NONE)"
    )]
    UnknownMember(String),
    #[error("bad membership \"{0}\" (expected full, limited or both)")]
    BadMembership(String),
    #[error("unknown {place} flag \"{flag}\"")]
    UnknownFlag { place: &'static str, flag: String },
    #[error("flag {flag} needs a value")]
    MissingValue { flag: String },
    #[error("flag {flag} takes no value")]
    UnexpectedValue { flag: String },
    #[error("flag {flag}: bad value \"{value}\" ({why})")]
    BadFlagValue {
        flag: String,
        value: String,
        why: &'static str,
    },
    #[error("bad multicast GID \"{value}\": {why}")]
    BadMgid { value: String, why: String },
    #[error("multicast group {mgid} is already defined on line {first}")]
    DuplicateMgid { mgid: Gid, first: usize },
    #[error("P_Key {pkey} already belongs to partition \"{other}\" (line {first})")]
    DuplicatePKey {
        pkey: PKey,
        other: String,
        first: usize,
    },
    #[error("partition name \"{name}\" already has P_Key {other} (line {first})")]
    DuplicateName {
        name: String,
        other: PKey,
        first: usize,
    },
    #[error("the name \"Default\" belongs to the default partition 0x7fff")]
    DefaultName,
    #[error("no unused P_Key left to generate")]
    PKeysExhausted,
}

/// Which ports a member entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Member {
    /// `ALL`: every end port.
    All,
    /// `ALL_CAS`: every channel adapter port.
    AllCas,
    /// `ALL_SWITCHES`: every switch's port 0.
    AllSwitches,
    /// `ALL_ROUTERS`: every router port.
    AllRouters,
    /// `SELF`: the SM's own port.
    SmPort,
    /// One port by GUID.
    Guid(Guid),
}

/// The membership a member entry grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub enum Membership {
    /// The membership bit clear: may talk to full members only.
    #[default]
    Limited,
    Full,
    /// Full, or both keys when `allow_both_pkeys` is on.
    Both,
}

/// One member entry, in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MemberRule {
    pub member: Member,
    pub membership: Membership,
    /// The definition carried `indx0`: put this key at index 0 of the port's table.
    pub indx0: bool,
    /// Position among all rules of the file (rules apply in this order).
    pub seq: usize,
    pub line: usize,
}

/// Multicast group settings (`mtu=`, `rate=`, ... flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GroupFlags {
    pub mtu: Mtu,
    pub rate: Rate,
    pub sl: Sl,
    /// Bit `s` set for each `scope=s`; none means link-local.
    pub scope_mask: u16,
    pub q_key: u32,
    pub tclass: u8,
    pub flow_label: u32,
}

impl Default for GroupFlags {
    fn default() -> Self {
        GroupFlags {
            mtu: DEFAULT_MGRP_MTU,
            rate: DEFAULT_MGRP_RATE,
            sl: Sl(0),
            scope_mask: 0,
            q_key: 0,
            tclass: 0,
            flow_label: 0,
        }
    }
}

/// A multicast group the partition creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct McGroup {
    /// The MGID as configured; IP groups carry the partition's full P_Key in bytes 4..6.
    pub mgid: Gid,
    pub flags: GroupFlags,
    pub line: usize,
}

impl McGroup {
    /// The scopes to create the group in: one group per scope, link-local by default.
    pub fn scopes(&self) -> Vec<Scope> {
        if self.flags.scope_mask == 0 {
            return vec![Scope::LinkLocal];
        }
        (1..16u8)
            .filter(|s| self.flags.scope_mask & (1 << s) != 0)
            .map(Scope::from_raw_value)
            .collect()
    }

    /// The MGIDs to create, each with its scope nibble rewritten.
    pub fn mgids(&self) -> Vec<(Gid, Scope)> {
        self.scopes()
            .into_iter()
            .map(|s| {
                let mut g = self.mgid;
                g.0[1] = (g.0[1] & 0xf0) | (s.to_raw_value() & 0x0f);
                (g, s)
            })
            .collect()
    }
}

/// One partition, with every definition of it in the file merged.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Partition {
    /// The first name given; empty when never named (OpenSM then shows the P_Key in hex).
    pub name: String,
    /// The partition key without the membership bit.
    pub pkey: PKey,
    /// The P_Key was generated, not written.
    pub generated: bool,
    /// The SL of the partition's paths (the last definition's `sl=`). OpenSM uses 0 unless
    /// QoS is enabled: see [`Partition::effective_sl`].
    pub sl: Sl,
    /// The IPoIB broadcast group, when a definition carries `ipoib`.
    pub broadcast: Option<McGroup>,
    /// Groups from `mgid=` lines.
    pub mgroups: Vec<McGroup>,
    pub rules: Vec<MemberRule>,
    /// Line of each definition.
    pub lines: Vec<usize>,
}

impl Partition {
    fn new(name: &str, pkey: PKey, generated: bool, line: usize) -> Partition {
        Partition {
            name: name.to_string(),
            pkey,
            generated,
            sl: Sl(0),
            broadcast: None,
            mgroups: Vec::new(),
            rules: Vec::new(),
            lines: vec![line],
        }
    }

    /// The name OpenSM shows: the given one, or the P_Key as four hex digits.
    pub fn display_name(&self) -> String {
        if self.name.is_empty() {
            format!("{:04x}", self.pkey.0)
        } else {
            self.name.clone()
        }
    }

    /// The SL paths in this partition use: the configured one only when QoS is on.
    pub fn effective_sl(&self, qos_enabled: bool) -> Sl {
        if qos_enabled { self.sl } else { Sl(0) }
    }

    /// True for `ipoib` partitions.
    pub fn ipoib(&self) -> bool {
        self.broadcast.is_some()
    }
}

/// A partition configuration: what the file says, or OpenSM's behaviour without a file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Partitions {
    /// Partitions the file defines, in the order first defined.
    pub partitions: Vec<Partition>,
    /// Read from a file: ports the file leaves out of the default partition are limited.
    pub from_file: bool,
    /// The file (for messages); empty without one.
    pub file: PathBuf,
}

impl Default for Partitions {
    fn default() -> Self {
        Partitions::no_file()
    }
}

impl Partitions {
    /// No partitions file: everyone is a full member of the default partition, which has an
    /// IPoIB broadcast group with OpenSM's defaults.
    pub fn no_file() -> Partitions {
        let mut p = Partition::new(DEFAULT_NAME, DEFAULT_PKEY, false, 0);
        p.broadcast = Some(broadcast_group(DEFAULT_PKEY, &GroupFlags::default(), 0));
        p.rules.push(MemberRule {
            member: Member::All,
            membership: Membership::Full,
            indx0: false,
            seq: 0,
            line: 0,
        });
        Partitions {
            partitions: vec![p],
            from_file: false,
            file: PathBuf::new(),
        }
    }

    /// Parses partitions text; `file` names it in errors.
    pub fn parse(text: &str, file: &Path) -> Result<Partitions, PartitionError> {
        Reader::new(text, file).run()
    }

    /// Reads and parses a partitions file.
    pub fn read(file: &Path) -> Result<Partitions, PartitionError> {
        let bytes = std::fs::read(file).map_err(|e| PartitionError {
            file: file.to_path_buf(),
            line: 0,
            column: 0,
            kind: PartitionErrorKind::Io(e.to_string()),
        })?;
        Partitions::parse(&String::from_utf8_lossy(&bytes), file)
    }

    /// The partition with this P_Key (membership bit ignored).
    pub fn get(&self, pkey: PKey) -> Option<&Partition> {
        self.partitions
            .iter()
            .find(|p| p.pkey.base() == pkey.base())
    }

    /// The partition with this name.
    pub fn by_name(&self, name: &str) -> Option<&Partition> {
        self.partitions.iter().find(|p| p.name == name)
    }
}

/// The IPoIB IPv4 broadcast group of a partition: `ff12:401b:PKEY::ffff:ffff`.
fn broadcast_group(pkey: PKey, flags: &GroupFlags, line: usize) -> McGroup {
    let mut g = [0u8; 16];
    g[0] = 0xff;
    g[1] = 0x12;
    g[2] = 0x40;
    g[3] = 0x1b;
    g[4..6].copy_from_slice(&(pkey.0 | 0x8000).to_be_bytes());
    g[12..].copy_from_slice(&[0xff; 4]);
    let mut flags = *flags;
    if flags.q_key == 0 {
        flags.q_key = IPOIB_BROADCAST_Q_KEY;
    }
    McGroup {
        mgid: Gid(g),
        flags,
        line,
    }
}

// ---------------------------------------------------------------------------------------
// Lexical pieces (nom).

type Res<'a, T> = IResult<&'a str, T>;

fn is_hspace(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\r'
}

fn hspace(i: &str) -> Res<'_, &str> {
    take_while(is_hspace).parse(i)
}

/// Text up to one of `stops`, trimmed of blanks (the slice still points into the input).
fn field<'a>(stops: &'static str) -> impl Fn(&'a str) -> Res<'a, &'a str> {
    move |i: &'a str| {
        let (rest, raw) = take_till(|c| stops.contains(c)).parse(i)?;
        Ok((rest, raw.trim_matches(is_hspace)))
    }
}

/// `name[=value]` up to one of `stops` (which must include '=' for the name part).
#[allow(clippy::type_complexity)]
fn name_value<'a>(
    name_stops: &'static str,
    value_stops: &'static str,
) -> impl Fn(&'a str) -> Res<'a, (&'a str, Option<&'a str>)> {
    move |i: &'a str| {
        (
            field(name_stops),
            opt(preceded(char('='), field(value_stops))),
        )
            .parse(i)
    }
}

/// A number as C's `strtoul(s, _, 0)` reads it: `0x` hex, leading-zero octal, else decimal.
pub(crate) fn c_number(s: &str) -> Option<u64> {
    let hex = preceded(
        tag_no_case("0x"),
        map_res(hex_digit1, |h: &str| u64::from_str_radix(h, 16)),
    );
    let oct = preceded(
        char('0'),
        map_res(take_while1(|c: char| c.is_digit(8)), |o: &str| {
            u64::from_str_radix(o, 8)
        }),
    );
    let zero = nom::combinator::value(0u64, char('0'));
    let dec = map_res(verify(digit1, |d: &str| !d.starts_with('0')), |d: &str| {
        d.parse::<u64>()
    });
    all_consuming(alt((hex, oct, zero, dec)))
        .parse(s)
        .map_err(|_: nom::Err<nom::error::Error<&str>>| ())
        .ok()
        .map(|(_, n)| n)
}

// ---------------------------------------------------------------------------------------
// The parser.

/// The header of one definition, as written.
struct Header<'a> {
    name: &'a str,
    pkey: Option<&'a str>,
    flags: Vec<(&'a str, Option<&'a str>)>,
}

fn header(i: &str) -> Res<'_, Header<'_>> {
    let (i, (name, pkey)) = name_value("=,:;#\n", ",:;#\n")(i)?;
    let (i, flags) = many0(preceded(char(','), name_value("=,:;#\n", ",:;#\n"))).parse(i)?;
    Ok((i, Header { name, pkey, flags }))
}

/// What one definition's header sets.
#[derive(Clone, Copy)]
struct DefFlags {
    ipoib: bool,
    indx0: bool,
    defmember: Membership,
    group: GroupFlags,
}

struct Reader<'a> {
    text: &'a str,
    file: PathBuf,
    line_starts: Vec<usize>,
    parts: Vec<Partition>,
    by_pkey: FxHashMap<u16, usize>,
    next_generated: u16,
    seq: usize,
    mgids: FxHashMap<Gid, usize>,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str, file: &Path) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Reader {
            text,
            file: file.to_path_buf(),
            line_starts,
            parts: Vec::new(),
            by_pkey: FxHashMap::default(),
            next_generated: 0,
            seq: 0,
            mgids: FxHashMap::default(),
        }
    }

    fn offset(&self, s: &str) -> usize {
        (s.as_ptr() as usize)
            .saturating_sub(self.text.as_ptr() as usize)
            .min(self.text.len())
    }

    /// (line, column) of the start of `s`, a slice of the text.
    fn pos(&self, s: &str) -> (usize, usize) {
        let off = self.offset(s);
        let line = self.line_starts.partition_point(|&l| l <= off).max(1);
        let start = self.line_starts[line - 1];
        let col = self.text.get(start..off).map_or(0, |t| t.chars().count()) + 1;
        (line, col)
    }

    fn line(&self, s: &str) -> usize {
        self.pos(s).0
    }

    fn err(&self, at: &str, kind: PartitionErrorKind) -> PartitionError {
        let (line, column) = self.pos(at);
        PartitionError {
            file: self.file.clone(),
            line,
            column,
            kind,
        }
    }

    fn run(mut self) -> Result<Partitions, PartitionError> {
        let mut i = self.text;
        loop {
            i = skip_blank(i);
            if i.is_empty() {
                break;
            }
            i = self.definition(i)?;
        }
        Ok(Partitions {
            partitions: self.parts,
            from_file: true,
            file: self.file,
        })
    }

    fn definition(&mut self, start: &'a str) -> Result<&'a str, PartitionError> {
        let Ok((i, h)) = header(start) else {
            return Err(self.err(start, PartitionErrorKind::MissingColon));
        };
        let Ok((i, _)) = char::<&str, nom::error::Error<&str>>(':').parse(i) else {
            return Err(self.err(i, PartitionErrorKind::MissingColon));
        };
        let started = self.line(start);
        let flags = self.def_flags(&h)?;
        let idx = self.partition_for(&h, start, started)?;
        let part = &mut self.parts[idx];
        part.sl = flags.group.sl;
        if flags.ipoib && part.broadcast.is_none() {
            part.broadcast = Some(broadcast_group(part.pkey, &flags.group, started));
        }
        self.body(i, idx, &flags, started)
    }

    fn def_flags(&self, h: &Header<'a>) -> Result<DefFlags, PartitionError> {
        let mut f = DefFlags {
            ipoib: false,
            indx0: false,
            defmember: Membership::Limited,
            group: GroupFlags::default(),
        };
        for &(flag, value) in &h.flags {
            if self.group_flag(&mut f.group, flag, value)? {
                continue;
            }
            match flag {
                "ipoib" | "indx0" => {
                    if let Some(v) = value {
                        return Err(
                            self.err(v, PartitionErrorKind::UnexpectedValue { flag: flag.into() })
                        );
                    }
                    if flag == "ipoib" {
                        f.ipoib = true;
                    } else {
                        f.indx0 = true;
                    }
                }
                "defmember" => {
                    let v = self.value(flag, value)?;
                    f.defmember = membership(v)
                        .ok_or_else(|| self.err(v, PartitionErrorKind::BadMembership(v.into())))?;
                }
                _ => {
                    return Err(self.err(
                        flag,
                        PartitionErrorKind::UnknownFlag {
                            place: "partition",
                            flag: flag.into(),
                        },
                    ));
                }
            }
        }
        Ok(f)
    }

    fn value(&self, flag: &'a str, value: Option<&'a str>) -> Result<&'a str, PartitionError> {
        match value {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(self.err(flag, PartitionErrorKind::MissingValue { flag: flag.into() })),
        }
    }

    /// Applies a multicast group flag; false when `flag` is not one.
    fn group_flag(
        &self,
        g: &mut GroupFlags,
        flag: &'a str,
        value: Option<&'a str>,
    ) -> Result<bool, PartitionError> {
        const FLAGS: [&str; 7] = ["mtu", "rate", "sl", "scope", "Q_Key", "TClass", "FlowLabel"];
        if !FLAGS.contains(&flag) {
            return Ok(false);
        }
        let v = self.value(flag, value)?;
        let bad = |why| {
            self.err(
                v,
                PartitionErrorKind::BadFlagValue {
                    flag: flag.into(),
                    value: v.into(),
                    why,
                },
            )
        };
        let n = c_number(v).ok_or_else(|| bad("not a number"))?;
        match flag {
            "mtu" => {
                if !(1..=5).contains(&n) {
                    return Err(bad("an MTU code is 1 (256) to 5 (4096)"));
                }
                g.mtu = Mtu::from_raw_value(n as u8);
            }
            "rate" => {
                let r = u8::try_from(n).map(Rate::from_raw_value);
                match r {
                    Ok(r) if r.mbps().is_some() => g.rate = r,
                    _ => return Err(bad("not a defined rate code (2..=24)")),
                }
            }
            "sl" => {
                if n > 15 {
                    return Err(bad("an SL is 0..=15"));
                }
                g.sl = Sl(n as u8);
            }
            "scope" => {
                if !(1..=15).contains(&n) {
                    return Err(bad("a scope is 1..=15"));
                }
                g.scope_mask |= 1 << n;
            }
            "Q_Key" => g.q_key = u32::try_from(n).map_err(|_| bad("a Q_Key has 32 bits"))?,
            "TClass" => g.tclass = u8::try_from(n).map_err(|_| bad("a TClass has 8 bits"))?,
            _ => {
                if n > 0xf_ffff {
                    return Err(bad("a flow label has 20 bits"));
                }
                g.flow_label = n as u32;
            }
        }
        Ok(true)
    }

    /// Finds or creates the partition a header names; returns its index.
    fn partition_for(
        &mut self,
        h: &Header<'a>,
        start: &'a str,
        line: usize,
    ) -> Result<usize, PartitionError> {
        let (mut name, mut pkey_text) = (h.name, h.pkey);
        // A bare number is a P_Key, not a name.
        if pkey_text.is_none() && name.starts_with(|c: char| c.is_ascii_digit()) {
            pkey_text = Some(name);
            name = "";
        }
        let at_name = if name.is_empty() { start } else { name };
        let (pkey, generated) = match pkey_text {
            Some(t) => (self.pkey(t)?, false),
            None => match self.named(name) {
                Some(p) => (p, false),
                None => (
                    self.generate()
                        .ok_or_else(|| self.err(at_name, PartitionErrorKind::PKeysExhausted))?,
                    true,
                ),
            },
        };
        if !name.is_empty() {
            if let Some(other) = self.named(name) {
                if other != pkey {
                    if !self.parts.iter().any(|p| p.name == name) {
                        return Err(self.err(at_name, PartitionErrorKind::DefaultName));
                    }
                    let first = self
                        .by_pkey
                        .get(&other.0)
                        .map_or(0, |&i| self.parts[i].lines[0]);
                    return Err(self.err(
                        at_name,
                        PartitionErrorKind::DuplicateName {
                            name: name.into(),
                            other,
                            first,
                        },
                    ));
                }
            }
        }
        if let Some(&idx) = self.by_pkey.get(&pkey.0) {
            let p = &self.parts[idx];
            if !name.is_empty() && !p.name.is_empty() && p.name != name {
                return Err(self.err(
                    at_name,
                    PartitionErrorKind::DuplicatePKey {
                        pkey,
                        other: p.name.clone(),
                        first: p.lines[0],
                    },
                ));
            }
            let p = &mut self.parts[idx];
            if p.name.is_empty() {
                p.name = name.to_string();
            }
            p.lines.push(line);
            return Ok(idx);
        }
        self.parts.push(Partition::new(name, pkey, generated, line));
        self.by_pkey.insert(pkey.0, self.parts.len() - 1);
        Ok(self.parts.len() - 1)
    }

    /// The P_Key of the partition with this name ("Default" is 0x7fff until the file
    /// says otherwise).
    fn named(&self, name: &str) -> Option<PKey> {
        if name.is_empty() {
            return None;
        }
        self.parts
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.pkey)
            .or((name == DEFAULT_NAME).then_some(DEFAULT_PKEY))
    }

    fn pkey(&self, t: &'a str) -> Result<PKey, PartitionError> {
        let bad = |why| {
            self.err(
                t,
                PartitionErrorKind::BadPKey {
                    value: t.into(),
                    why,
                },
            )
        };
        let n = c_number(t).ok_or_else(|| bad("not a number"))?;
        if n > 0xffff {
            return Err(bad("a P_Key has 16 bits"));
        }
        let base = n as u16 & 0x7fff;
        if base == 0 {
            return Err(bad("partition 0 is the invalid P_Key"));
        }
        Ok(PKey(base))
    }

    /// OpenSM's generator: the next unused P_Key counting up from 0x0001.
    fn generate(&mut self) -> Option<PKey> {
        while self.next_generated < DEFAULT_PKEY.0 - 1 {
            self.next_generated += 1;
            let k = self.next_generated;
            if !self.by_pkey.contains_key(&k) {
                return Some(PKey(k));
            }
        }
        None
    }

    fn body(
        &mut self,
        mut i: &'a str,
        idx: usize,
        flags: &DefFlags,
        started: usize,
    ) -> Result<&'a str, PartitionError> {
        loop {
            (i, _) = hspace(i).unwrap_or((i, ""));
            let Some(c) = i.chars().next() else {
                let start = self.line_starts.get(started - 1).copied().unwrap_or(0);
                let at = self.text.get(start..).unwrap_or("");
                return Err(self.err(at, PartitionErrorKind::MissingSemicolon { started }));
            };
            match c {
                ';' => return Ok(&i[1..]),
                '\n' | ',' => i = &i[1..],
                '#' => i = skip_comment(i),
                ':' => return Err(self.err(i, PartitionErrorKind::StrayColon { started })),
                _ => {
                    let (rest, name) = field("=,:;#\n")(i).unwrap_or((i, ""));
                    // A GID holds colons; a member never does.
                    let stops = if name == "mgid" { ",;#\n" } else { ",:;#\n" };
                    let (rest, value) = opt(preceded(char('='), field(stops)))
                        .parse(rest)
                        .unwrap_or((rest, None));
                    if name == "mgid" {
                        i = self.mgroup(rest, idx, flags, value, name)?;
                        continue;
                    }
                    if rest.starts_with(':') {
                        return Err(self.err(rest, PartitionErrorKind::StrayColon { started }));
                    }
                    self.member(idx, flags, name, value)?;
                    i = rest;
                }
            }
        }
    }

    fn member(
        &mut self,
        idx: usize,
        flags: &DefFlags,
        name: &'a str,
        value: Option<&'a str>,
    ) -> Result<(), PartitionError> {
        let membership = match value {
            None => flags.defmember,
            Some(v) => membership(v)
                .ok_or_else(|| self.err(v, PartitionErrorKind::BadMembership(v.into())))?,
        };
        let member = match name {
            "" | "NONE" => return Ok(()),
            "ALL" => Member::All,
            "ALL_CAS" => Member::AllCas,
            "ALL_SWITCHES" => Member::AllSwitches,
            "ALL_ROUTERS" => Member::AllRouters,
            "SELF" => Member::SmPort,
            g if g.starts_with(|c: char| c.is_ascii_digit()) => match c_number(g) {
                Some(n) if n != 0 => Member::Guid(Guid(n)),
                _ => return Err(self.err(g, PartitionErrorKind::BadGuid(g.into()))),
            },
            other => {
                return Err(self.err(other, PartitionErrorKind::UnknownMember(other.into())));
            }
        };
        let line = self.line(name);
        self.seq += 1;
        self.parts[idx].rules.push(MemberRule {
            member,
            membership,
            indx0: flags.indx0,
            seq: self.seq,
            line,
        });
        Ok(())
    }

    /// `mgid=GID[,flag=value]...` to the end of the line.
    fn mgroup(
        &mut self,
        rest: &'a str,
        idx: usize,
        flags: &DefFlags,
        value: Option<&'a str>,
        at: &'a str,
    ) -> Result<&'a str, PartitionError> {
        let v = self.value(at, value)?;
        let bad = |why: String| {
            self.err(
                v,
                PartitionErrorKind::BadMgid {
                    value: v.into(),
                    why,
                },
            )
        };
        let addr: Ipv6Addr = v.parse().map_err(|_| bad("not an IPv6-style GID".into()))?;
        let mut mgid = Gid(addr.octets());
        if mgid.0[0] != 0xff {
            return Err(bad("a multicast GID starts with ff".into()));
        }
        let (rest, gflags) = many0(preceded(char(','), name_value("=,;#\n", ",;#\n")))
            .parse(rest)
            .unwrap_or((rest, Vec::new()));
        let mut g = flags.group;
        for (flag, value) in gflags {
            if !self.group_flag(&mut g, flag, value)? {
                return Err(self.err(
                    flag,
                    PartitionErrorKind::UnknownFlag {
                        place: "multicast group",
                        flag: flag.into(),
                    },
                ));
            }
        }
        let pkey = self.parts[idx].pkey;
        let signature = u16::from_be_bytes([mgid.0[2], mgid.0[3]]);
        if signature == 0x401b || signature == 0x601b {
            let mpkey = u16::from_be_bytes([mgid.0[4], mgid.0[5]]);
            let broadcast_template = mgid.0[1] == 0x12
                && signature == 0x401b
                && mpkey == 0xffff
                && mgid.0[6..12] == [0; 6]
                && mgid.0[12..] == [0xff; 4];
            if !(broadcast_template || mpkey == 0 || mpkey == pkey.0 | 0x8000) {
                return Err(bad(format!(
                    "an IP group's P_Key bits must be 0 or the partition's {:#06x}",
                    pkey.0 | 0x8000
                )));
            }
            if g.rate != flags.group.rate || g.mtu != flags.group.mtu {
                return Err(bad(
                    "an IP group must have its partition's rate and MTU".into()
                ));
            }
            mgid.0[4..6].copy_from_slice(&(pkey.0 | 0x8000).to_be_bytes());
            if g.q_key == 0 {
                g.q_key = IPOIB_BROADCAST_Q_KEY;
            }
        }
        let line = self.line(at);
        if let Some(&first) = self.mgids.get(&mgid) {
            return Err(self.err(at, PartitionErrorKind::DuplicateMgid { mgid, first }));
        }
        self.mgids.insert(mgid, line);
        self.parts[idx].mgroups.push(McGroup {
            mgid,
            flags: g,
            line,
        });
        Ok(rest)
    }
}

/// `full`, `limited`, `both` or a prefix of one.
fn membership(v: &str) -> Option<Membership> {
    if v.is_empty() {
        return None;
    }
    [
        ("full", Membership::Full),
        ("limited", Membership::Limited),
        ("both", Membership::Both),
    ]
    .into_iter()
    .find(|(w, _)| w.starts_with(v))
    .map(|(_, m)| m)
}

fn skip_comment(i: &str) -> &str {
    i.find('\n').map_or("", |n| &i[n..])
}

/// Skips blanks, line ends and comments between definitions.
fn skip_blank(mut i: &str) -> &str {
    loop {
        i = i.trim_start_matches(|c: char| is_hspace(c) || c == '\n');
        if i.starts_with('#') {
            i = skip_comment(i);
        } else {
            return i;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Model -> tables.

/// How switches enforce partitions on ports facing CAs and routers (OpenSM's
/// `part_enforce`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    /// Check inbound and outbound packets (OpenSM's default).
    #[default]
    Both,
    /// Inbound only.
    In,
    /// Outbound only.
    Out,
    /// No enforcement: switch ports get no tables.
    Off,
}

impl Enforcement {
    /// PortInfo's PartitionEnforcementInbound / Outbound bits.
    pub const fn bits(self) -> (bool, bool) {
        match self {
            Enforcement::Both => (true, true),
            Enforcement::In => (true, false),
            Enforcement::Out => (false, true),
            Enforcement::Off => (false, false),
        }
    }
}

/// Choices that change the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableOptions {
    /// OpenSM's `allow_both_pkeys`: `both` gives a port the full and the limited key.
    pub allow_both_pkeys: bool,
    pub enforcement: Enforcement,
}

/// The keys of one port's P_Key table, by index. `PKey(0)` marks an empty slot; an empty
/// vector means every entry is 0.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PortPKeys {
    #[serde(skip)]
    pub port: PortIdx,
    pub guid: Guid,
    /// The port number (for a switch port, the external port).
    pub num: u8,
    pub keys: Vec<PKey>,
}

impl PortPKeys {
    /// The table cut into P_KeyTable blocks for a port of capacity `cap` (NodeInfo's
    /// PartitionCap, or SwitchInfo's PartitionEnforcementCap for a switch port), and the
    /// keys that did not fit. OpenSM drops those too; on a switch port it then turns
    /// enforcement off instead.
    pub fn blocks(&self, cap: u16) -> (Vec<sm_mad::pkey_table::Repr>, Vec<PKey>) {
        let fit = self.keys.len().min(cap as usize);
        let blocks = self.keys[..fit]
            .chunks(sm_mad::pkey_table::ENTRIES)
            .map(sm_mad::pkey_table::Repr::from_keys)
            .collect();
        let dropped = self.keys[fit..]
            .iter()
            .copied()
            .filter(|k| !k.is_invalid())
            .collect();
        (blocks, dropped)
    }
}

/// P_Key tables for a fabric.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PKeyTables {
    /// CA and router ports and switch port 0, in port index order.
    pub end_ports: Vec<PortPKeys>,
    /// Switch external ports facing a CA or router, for enforcement (empty when off).
    pub switch_ports: Vec<PortPKeys>,
    pub enforcement: Enforcement,
    /// Member GUIDs that name no port of the fabric, with their line (OpenSM skips them).
    pub unknown_guids: Vec<(Guid, usize)>,
}

impl PKeyTables {
    /// The table of a port (end port or switch port).
    pub fn get(&self, port: PortIdx) -> Option<&PortPKeys> {
        let find = |v: &'_ [PortPKeys]| v.binary_search_by_key(&port, |p| p.port).ok();
        if let Some(i) = find(&self.end_ports) {
            return self.end_ports.get(i);
        }
        find(&self.switch_ports).and_then(|i| self.switch_ports.get(i))
    }
}

/// P_Key tables with OpenSM's default options.
pub fn pkey_tables(parts: &Partitions, fabric: &Fabric, sm_port_guid: Guid) -> PKeyTables {
    pkey_tables_with(parts, fabric, sm_port_guid, &TableOptions::default())
}

/// The P_Key table of every end port the SM reaches (switch port 0, linked CA and router
/// ports, and the SM's own port), and of each switch port facing a CA or router.
pub fn pkey_tables_with(
    parts: &Partitions,
    fabric: &Fabric,
    sm_port_guid: Guid,
    opts: &TableOptions,
) -> PKeyTables {
    let ports: Vec<PortIdx> = fabric
        .end_ports()
        .filter(|&p| {
            let port = fabric.port(p);
            port.num == 0 || port.remote.is_some() || port.guid == sm_port_guid
        })
        .collect();
    let slot: FxHashMap<PortIdx, usize> = ports.iter().enumerate().map(|(i, &p)| (p, i)).collect();
    let kind = |i: usize| fabric.node(fabric.port(ports[i]).node).kind;
    let sm_slot = fabric
        .port_by_guid(sm_port_guid)
        .and_then(|p| slot.get(&p).copied());

    // Membership bits per partition and port slot; the default partition always exists.
    let mut pkeys: Vec<PKey> = parts.partitions.iter().map(|p| p.pkey).collect();
    if !pkeys.contains(&DEFAULT_PKEY) {
        pkeys.push(DEFAULT_PKEY);
    }
    let default_idx = pkeys.iter().position(|&k| k == DEFAULT_PKEY).unwrap_or(0);
    let mut bits: Vec<FxHashMap<usize, u8>> = vec![FxHashMap::default(); pkeys.len()];
    let start = if parts.from_file { LIMITED } else { FULL };
    bits[default_idx] = (0..ports.len()).map(|i| (i, start)).collect();
    if let Some(s) = sm_slot {
        bits[default_idx].insert(s, FULL);
    }

    let mut rules: Vec<(usize, &MemberRule)> = parts
        .partitions
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.rules.iter().map(move |r| (i, r)))
        .collect();
    rules.sort_by_key(|(_, r)| r.seq);
    let mut indx0: Vec<Option<PKey>> = vec![None; ports.len()];
    let mut unknown = Vec::new();
    let mut targets = Vec::new();
    for (pi, rule) in rules {
        targets.clear();
        match rule.member {
            Member::All => targets.extend(0..ports.len()),
            Member::AllCas => targets.extend((0..ports.len()).filter(|&i| kind(i) == NodeKind::Ca)),
            Member::AllSwitches => {
                targets.extend((0..ports.len()).filter(|&i| kind(i) == NodeKind::Switch))
            }
            Member::AllRouters => {
                targets.extend((0..ports.len()).filter(|&i| kind(i) == NodeKind::Router))
            }
            Member::SmPort => targets.extend(sm_slot),
            Member::Guid(g) => match fabric.port_by_guid(g).and_then(|p| slot.get(&p)) {
                Some(&s) => targets.push(s),
                None => unknown.push((g, rule.line)),
            },
        }
        let pkey = pkeys[pi];
        // OpenSM adds a port once per membership: full first, then limited.
        let adds: &[bool] = match (rule.membership, opts.allow_both_pkeys) {
            (Membership::Limited, _) => &[false],
            (Membership::Full, _) | (Membership::Both, false) => &[true],
            (Membership::Both, true) => &[true, false],
        };
        for &s in &targets {
            let b = bits[pi].entry(s).or_insert(0);
            *b = match (rule.membership, opts.allow_both_pkeys) {
                (Membership::Both, true) => *b | FULL | LIMITED,
                (Membership::Limited, true) => (*b & !FULL) | LIMITED,
                (_, true) => (*b & !LIMITED) | FULL,
                (Membership::Limited, false) => LIMITED,
                (_, false) => FULL,
            };
            for &full in adds {
                if rule.indx0 {
                    indx0[s] = Some(if full { PKey(pkey.0 | 0x8000) } else { pkey });
                } else if indx0[s].is_some_and(|k| k.base() == pkey.base()) {
                    indx0[s] = None;
                }
            }
        }
    }

    // Pending keys per port, partitions in OpenSM's map order, limited before full.
    let mut order: Vec<usize> = (0..pkeys.len()).collect();
    order.sort_by_key(|&i| pkeys[i].0.swap_bytes());
    let mut pending: Vec<Vec<PKey>> = vec![Vec::new(); ports.len()];
    for &pi in &order {
        let mut members: Vec<(usize, u8)> = bits[pi].iter().map(|(&s, &b)| (s, b)).collect();
        members.sort_unstable();
        for (s, b) in members {
            if b & LIMITED != 0 {
                pending[s].push(pkeys[pi]);
            }
            if b & FULL != 0 {
                pending[s].push(PKey(pkeys[pi].0 | 0x8000));
            }
        }
    }

    let same = |a: PKey, b: PKey| {
        if opts.allow_both_pkeys {
            a == b
        } else {
            a.base() == b.base()
        }
    };
    let mut end_ports = Vec::with_capacity(ports.len());
    for (s, keys) in pending.into_iter().enumerate() {
        let first = match indx0[s] {
            Some(k) => keys.iter().position(|&e| same(e, k)),
            None => keys.iter().position(|&e| {
                if opts.allow_both_pkeys {
                    e == PKey::DEFAULT
                } else {
                    e.base() == DEFAULT_PKEY.0
                }
            }),
        };
        let mut table = Vec::with_capacity(keys.len() + 1);
        table.push(first.map_or(PKey(0), |f| keys[f]));
        table.extend(
            keys.iter()
                .enumerate()
                .filter(|&(i, _)| Some(i) != first)
                .map(|(_, &k)| k),
        );
        if table.iter().all(|k| k.is_invalid()) {
            table.clear();
        }
        let p = fabric.port(ports[s]);
        end_ports.push(PortPKeys {
            port: ports[s],
            guid: p.guid,
            num: p.num,
            keys: table,
        });
    }

    let mut switch_ports = Vec::new();
    if opts.enforcement != Enforcement::Off {
        for t in &end_ports {
            if fabric.node(fabric.port(t.port).node).kind == NodeKind::Switch {
                continue;
            }
            let Some(r) = fabric.port(t.port).remote else {
                continue;
            };
            let rp = fabric.port(r);
            if fabric.node(rp.node).kind != NodeKind::Switch {
                continue;
            }
            let full: FxHashSet<u16> = t.keys.iter().filter(|k| k.is_full()).map(|k| k.0).collect();
            let keys = t
                .keys
                .iter()
                .copied()
                .filter(|k| !k.is_invalid() && (k.is_full() || !full.contains(&(k.0 | 0x8000))))
                .collect();
            switch_ports.push(PortPKeys {
                port: r,
                guid: rp.guid,
                num: rp.num,
                keys,
            });
        }
        switch_ports.sort_by_key(|p| p.port);
    }
    PKeyTables {
        end_ports,
        switch_ports,
        enforcement: opts.enforcement,
        unknown_guids: unknown,
    }
}

/// Writes P_Key tables as text: a header, then one line per port (end ports, then switch
/// ports facing CAs and routers), the keys in table order, `0x0000` for an empty entry:
///
/// ```text
/// CA 0x0001000000000000 port 1 guid 0x0001000000000001 "host 0": 0xffff 0x8001
/// Switch 0x0002000100000000 port 3 enforcing "leaf 0": 0xffff 0x8001
/// ```
pub fn write_pkey_tables(
    tables: &PKeyTables,
    f: &Fabric,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let enforcement = match tables.enforcement {
        Enforcement::Both => "both",
        Enforcement::In => "in",
        Enforcement::Out => "out",
        Enforcement::Off => "off",
    };
    writeln!(out, "# P_Key tables: written by ibsm")?;
    writeln!(
        out,
        "# Partition enforcement on switch ports facing CAs and routers: {enforcement}"
    )?;
    let line = |out: &mut dyn std::io::Write, pk: &PortPKeys, external: bool| {
        let node = f.node(f.port(pk.port).node);
        let kind = match node.kind {
            NodeKind::Switch => "Switch",
            NodeKind::Ca => "CA",
            NodeKind::Router => "Router",
        };
        write!(out, "{kind} {} port {}", node.guid, pk.num)?;
        if external {
            write!(out, " enforcing")?;
        } else {
            write!(out, " guid {}", pk.guid)?;
        }
        let desc: String = node
            .description
            .chars()
            .map(|c| if c.is_control() || c == '"' { ' ' } else { c })
            .collect();
        write!(out, " \"{desc}\":")?;
        for k in &pk.keys {
            write!(out, " {k}")?;
        }
        writeln!(out)
    };
    for pk in &tables.end_ports {
        line(out, pk, false)?;
    }
    for pk in &tables.switch_ports {
        line(out, pk, true)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Partitions {
        match Partitions::parse(t, Path::new("p.conf")) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }

    fn fail(t: &str) -> PartitionError {
        match Partitions::parse(t, Path::new("p.conf")) {
            Ok(p) => panic!("accepted: {p:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn numbers_read_like_strtoul() {
        assert_eq!(c_number("0x7fFF"), Some(0x7fff));
        assert_eq!(c_number("0X10"), Some(16));
        assert_eq!(c_number("010"), Some(8));
        assert_eq!(c_number("0"), Some(0));
        assert_eq!(c_number("42"), Some(42));
        assert_eq!(c_number("08"), None);
        assert_eq!(c_number("0x"), None);
        assert_eq!(c_number("12a"), None);
        assert_eq!(c_number("0x1ffffffffffffffff"), None);
    }

    #[test]
    fn headers_members_and_flags() {
        let p = parse(
            "# all features\n\
             Default=0x7fff, ipoib : ALL, SELF=full ;\n\
             Storage = 0x8010 , ipoib, mtu=5, rate=7, sl=2, Q_Key=0x1234, TClass=3, FlowLabel=0x12345, scope=5 :\n\
               0x100004 = full,\n\
               0x100006   # trailing comment\n\
               ALL_SWITCHES=limi ;\n\
             Compute, defmember=full, indx0 : ALL_CAS, NONE, ALL_ROUTERS=both ;\n\
             0x30 : ;",
        );
        assert!(p.from_file);
        assert_eq!(p.partitions.len(), 4);
        let d = &p.partitions[0];
        assert_eq!((d.name.as_str(), d.pkey), ("Default", PKey(0x7fff)));
        assert!(d.ipoib());
        assert_eq!(d.rules.len(), 2);
        assert_eq!(d.rules[1].member, Member::SmPort);
        assert_eq!(d.rules[1].membership, Membership::Full);
        let s = &p.partitions[1];
        assert_eq!(s.pkey, PKey(0x10));
        assert_eq!(s.sl, Sl(2));
        let b = s.broadcast.as_ref().unwrap();
        assert_eq!(
            b.mgid.to_string(),
            "ff12:401b:8010:0000:0000:0000:ffff:ffff"
        );
        assert_eq!(b.flags.mtu, Mtu::Mtu4096);
        assert_eq!(b.flags.rate, Rate::Gbps40);
        assert_eq!(b.flags.q_key, 0x1234);
        assert_eq!((b.flags.tclass, b.flags.flow_label), (3, 0x12345));
        assert_eq!(b.scopes(), vec![Scope::SiteLocal]);
        assert_eq!(b.mgids()[0].0.0[1], 0x15);
        let kinds: Vec<_> = s.rules.iter().map(|r| (r.member, r.membership)).collect();
        assert_eq!(
            kinds,
            vec![
                (Member::Guid(Guid(0x100004)), Membership::Full),
                (Member::Guid(Guid(0x100006)), Membership::Limited),
                (Member::AllSwitches, Membership::Limited),
            ]
        );
        assert_eq!(s.rules[1].line, 5);
        let c = &p.partitions[2];
        assert!(c.generated);
        assert_eq!(c.pkey, PKey(1));
        assert!(c.rules.iter().all(|r| r.indx0));
        assert_eq!(c.rules[0].membership, Membership::Full);
        assert_eq!(c.rules[1].membership, Membership::Both);
        let n = &p.partitions[3];
        assert_eq!((n.name.as_str(), n.pkey), ("", PKey(0x30)));
        assert_eq!(n.display_name(), "0030");
        assert!(n.rules.is_empty());
    }

    #[test]
    fn definitions_merge_by_pkey_and_name() {
        let p = parse(
            "ShareIO = 0x80 , defmember=full : 0x123451, 0x123452;\n\
             ShareIO = 0x80 : 0x123453;\n\
             ShareIO : 0x123459 ;\n\
             = 0x80 : 0x12345a ;\n\
             Default : ALL=full ;\n\
             A : SELF ; B : SELF ;",
        );
        let s = p.by_name("ShareIO").unwrap();
        assert_eq!(s.pkey, PKey(0x80));
        assert_eq!(s.lines, vec![1, 2, 3, 4]);
        let m: Vec<_> = s.rules.iter().map(|r| r.membership).collect();
        use Membership::*;
        assert_eq!(m, vec![Full, Full, Limited, Limited, Limited]);
        assert_eq!(p.by_name("Default").unwrap().pkey, PKey(0x7fff));
        assert_eq!(p.by_name("A").unwrap().pkey, PKey(1));
        assert_eq!(p.by_name("B").unwrap().pkey, PKey(2));
        // C's explicit 0x2 is taken by the generated B.
        let e = fail("A : SELF ; B : SELF ; C=0x2 : SELF ;");
        assert!(
            matches!(e.kind, PartitionErrorKind::DuplicatePKey { .. }),
            "{e}"
        );
        assert_eq!(p.partitions.len(), 4);
    }

    #[test]
    fn several_definitions_on_one_line_and_across_lines() {
        let p = parse("A=1:ALL;B=2:\n\n  SELF\n  ,\n 0x5\n;C=3:;");
        assert_eq!(p.partitions.len(), 3);
        assert_eq!(p.partitions[1].rules.len(), 2);
        assert_eq!(p.partitions[1].rules[1].line, 5);
    }

    #[test]
    fn mgroups() {
        let p = parse(
            "Default=0x7fff,ipoib:\n\
             \tmgid=ff12:401b::0707,sl=1 # an IPv4 group\n\
             \tmgid=ff12:601b::16\n\
             \tmgid=ff12::1,sl=1,Q_Key=0xDEADBEEF,rate=3,mtu=2,scope=2,scope=8 # other\n\
             \tALL=full;\n\
             P=0x10,rate=6: mgid=ff15:401b:8010::1\n ALL;",
        );
        let d = &p.partitions[0];
        assert_eq!(d.mgroups.len(), 3);
        let ip = &d.mgroups[0];
        assert_eq!(
            ip.mgid.to_string(),
            "ff12:401b:ffff:0000:0000:0000:0000:0707"
        );
        assert_eq!(ip.flags.q_key, IPOIB_BROADCAST_Q_KEY);
        assert_eq!(ip.flags.sl, Sl(1));
        assert_eq!(ip.line, 2);
        let other = &d.mgroups[2];
        assert_eq!(other.flags.q_key, 0xdead_beef);
        assert_eq!(other.flags.mtu, Mtu::Mtu512);
        assert_eq!(
            other.scopes(),
            vec![Scope::LinkLocal, Scope::OrganizationLocal]
        );
        assert_eq!(d.rules.len(), 1);
        let q = &p.partitions[1];
        assert_eq!(q.mgroups[0].flags.rate, Rate::Gbps20);
        assert_eq!(q.rules.len(), 1);
    }

    #[test]
    fn errors_name_line_column_and_what() {
        let cases: &[(&str, usize, usize, &str)] = &[
            ("A=0x1 : ALL\n", 1, 1, "no ';'"),
            ("A=0x1 ALL ;", 1, 11, "expected ':'"),
            ("A=0x1 # c : ALL ;", 1, 7, "expected ':'"),
            ("A=0x1 : ALL\nB=0x2 : SELF ;", 2, 7, "is the ';' missing"),
            (
                "A=0x1,bogus : ALL ;",
                1,
                7,
                "unknown partition flag \"bogus\"",
            ),
            ("A=0x1,ipo : ALL ;", 1, 7, "unknown partition flag \"ipo\""),
            ("A=0x1,mtu=9 : ALL ;", 1, 11, "flag mtu: bad value \"9\""),
            ("A=0x1,mtu : ALL ;", 1, 7, "flag mtu needs a value"),
            ("A=0x1,ipoib=1 : ALL ;", 1, 13, "takes no value"),
            ("A=0x1,sl=16 : ALL ;", 1, 10, "an SL is 0..=15"),
            ("A=0x1,rate=1 : ALL ;", 1, 12, "rate code"),
            ("A=0x1,FlowLabel=0x100000 : ALL ;", 1, 17, "20 bits"),
            ("A=0x1,defmember=most : ALL ;", 1, 17, "bad membership"),
            ("A=0x8000 : ALL ;", 1, 3, "bad P_Key \"0x8000\""),
            ("A=0x10000 : ALL ;", 1, 3, "16 bits"),
            ("A=zz : ALL ;", 1, 3, "not a number"),
            ("A=1 : 0x12g4 ;", 1, 7, "bad port GUID"),
            ("A=1 : 0 ;", 1, 7, "bad port GUID"),
            ("A=1 : ALLCAS ;", 1, 7, "unknown member \"ALLCAS\""),
            ("A=1 : ALL=fool ;", 1, 11, "bad membership \"fool\""),
            ("A=1 : ALL= ;", 1, 11, "bad membership \"\""),
            (
                "A=1 : ALL ;\n  A=2 : SELF ;",
                2,
                3,
                "already has P_Key 0x0001",
            ),
            (
                "A=1 : ALL ;\nB=0x8001 : SELF ;",
                2,
                1,
                "already belongs to partition \"A\"",
            ),
            (
                "Default=0x10 : ALL ;",
                1,
                1,
                "belongs to the default partition",
            ),
            (
                "P=0x10: mgid=ff15::1, ALL;",
                1,
                23,
                "unknown multicast group flag \"ALL\"",
            ),
            ("A=1 : mgid=fe80::1 ;", 1, 12, "starts with ff"),
            ("A=1 : mgid=ff12::g ;", 1, 12, "IPv6"),
            ("A=1 : mgid= ;", 1, 7, "needs a value"),
            (
                "A=1 : mgid=ff12::1,foo=1 ;",
                1,
                20,
                "unknown multicast group flag",
            ),
            ("A=1 : mgid=ff12:401b:8002::1 ;", 1, 12, "P_Key bits"),
            ("A=1 : mgid=ff12:401b::1,rate=6 ;", 1, 12, "rate and MTU"),
            (
                "A=1 : mgid=ff12::1\n mgid=ff12::1 ;",
                2,
                2,
                "already defined on line 1",
            ),
            ("\n\n   ;", 3, 4, "expected ':'"),
            ("\nA=0x1", 2, 6, "expected ':'"),
            ("A=1 : SELF ;\nB", 2, 2, "expected ':'"),
        ];
        for &(text, line, column, what) in cases {
            let e = fail(text);
            let msg = e.to_string();
            assert!(msg.contains(what), "{text:?}: {msg}");
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {msg}");
            assert!(
                msg.starts_with(&format!("p.conf:{line}:{column}: ")),
                "{msg}"
            );
        }
    }

    #[test]
    fn columns_count_characters() {
        let e = fail("Ünïcödé=1 : ALL ; B=1,x : SELF ;");
        assert_eq!((e.line, e.column), (1, 23));
    }

    #[test]
    fn empty_and_comment_only_files() {
        for t in ["", "\n\n", "# nothing\n   # here", "\t \r\n"] {
            let p = parse(t);
            assert!(p.partitions.is_empty() && p.from_file);
        }
    }

    #[test]
    fn no_file_is_everyone_full_with_a_broadcast_group() {
        let p = Partitions::no_file();
        let d = p.get(PKey(0xffff)).unwrap();
        assert_eq!(d.rules[0].membership, Membership::Full);
        assert_eq!(
            d.broadcast.unwrap().mgid.to_string(),
            "ff12:401b:ffff:0000:0000:0000:ffff:ffff"
        );
        assert!(!p.from_file);
    }
}
