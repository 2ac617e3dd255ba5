//! QoS: OpenSM's simple QoS options, the SL-to-VL and VL arbitration tables they give each
//! port, and the OperationalVLs policy.
//!
//! One set of options (`qos_max_vls`, `qos_high_limit`, `qos_vlarb_high`, `qos_vlarb_low`,
//! `qos_sl2vl`) applies to every port; per-kind sets (`qos_ca_*`, `qos_rtr_*`, `qos_sw0_*`
//! for a switch's enhanced port 0, `qos_swe_*` for switch external ports) override it option
//! by option. Defaults are OpenSM's: VL0 alone in the high-priority table with weight 4,
//! VL1-14 at weight 4 in the low-priority one, SL n on VL n with SL15 on VL7, high limit 0.
//!
//! Values: a VL arbitration table is `vl:weight[,vl:weight]...` (at most 64 entries, VL
//! 0..=14, weight 0..=255); an SL-to-VL map is 16 comma-separated VLs (0..=15, 15 drops the
//! SL). Numbers read like C's `strtoul(_, _, 0)`. OpenSM warns about a value it cannot use
//! and carries on with what it parsed (VL taken modulo 15, missing entries as 0); here a bad
//! value is an error naming the option, entry and column.
//!
//! Clamping follows OpenSM: a VL above what the port's OperationalVLs allow is masked with
//! `2^(OperationalVLs - 1) - 1` (so VL 5 on a VL0-3 port lands on VL1), and VL15 in the
//! SL-to-VL map stays 15. OpenSM reads `qos_max_vls` but programs nothing from it; so do we.

use std::fmt;
use std::path::{Path, PathBuf};

use sm_mad::Vl;
use sm_mad::port_info::VlCap;
use sm_mad::vl_arb::{self, Block, Entry};

use crate::partitions::c_number;

/// OpenSM's default `max_op_vls`: 5, VL0-14.
pub const DEFAULT_MAX_OP_VLS: u8 = 5;
/// OpenSM's default `qos_max_vls`.
pub const DEFAULT_MAX_VLS: u8 = 15;
/// OpenSM's default `qos_high_limit`.
pub const DEFAULT_HIGH_LIMIT: u8 = 0;
/// OpenSM's default `qos_vlarb_high`.
pub const DEFAULT_VLARB_HIGH: &str =
    "0:4,1:0,2:0,3:0,4:0,5:0,6:0,7:0,8:0,9:0,10:0,11:0,12:0,13:0,14:0";
/// OpenSM's default `qos_vlarb_low`.
pub const DEFAULT_VLARB_LOW: &str =
    "0:0,1:4,2:4,3:4,4:4,5:4,6:4,7:4,8:4,9:4,10:4,11:4,12:4,13:4,14:4";
/// OpenSM's default `qos_sl2vl`.
pub const DEFAULT_SL2VL: &str = "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7";
/// Entries a VL arbitration table (high or low) holds at most.
pub const MAX_VLARB_ENTRIES: usize = 64;

/// Why a value was refused, and where in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entry {entry} (column {column}): {what}")]
pub struct ValueError {
    /// 1-based entry of the comma-separated list.
    pub entry: usize,
    /// 1-based column in the value, in characters.
    pub column: usize,
    pub what: String,
}

/// Why a QoS option was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {option}: {what}", file.display())]
pub struct QosError {
    pub file: PathBuf,
    /// 1-based line (0 when not from a file).
    pub line: usize,
    pub option: String,
    pub what: String,
}

/// Splits a comma-separated list into (1-based column, trimmed entry) pairs.
fn entries(s: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    for piece in s.split(',') {
        let lead = piece.len() - piece.trim_start().len();
        let col = s[..start + lead].chars().count() + 1;
        out.push((col, piece.trim()));
        start += piece.len() + 1;
    }
    out
}

fn number(entry: usize, column: usize, s: &str, what: &str, max: u64) -> Result<u64, ValueError> {
    let err = |why: String| ValueError {
        entry,
        column,
        what: why,
    };
    let n = c_number(s).ok_or_else(|| err(format!("{what} \"{s}\" is not a number")))?;
    if n > max {
        return Err(err(format!("{what} {n} is out of range 0..={max}")));
    }
    Ok(n)
}

/// A VL arbitration table: up to 64 (VL, weight) entries, VL 0..=14.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct VlArbTable(Vec<Entry>);

impl VlArbTable {
    /// Parses `vl:weight[,vl:weight]...`; an empty value is an empty table.
    pub fn parse(s: &str) -> Result<VlArbTable, ValueError> {
        if s.trim().is_empty() {
            return Ok(VlArbTable(Vec::new()));
        }
        let list = entries(s);
        if list.len() > MAX_VLARB_ENTRIES {
            let (column, _) = list[MAX_VLARB_ENTRIES];
            return Err(ValueError {
                entry: MAX_VLARB_ENTRIES + 1,
                column,
                what: format!("more than {MAX_VLARB_ENTRIES} entries"),
            });
        }
        let mut out = Vec::with_capacity(list.len());
        for (i, (col, e)) in list.into_iter().enumerate() {
            let entry = i + 1;
            let Some((vl, w)) = e.split_once(':') else {
                return Err(ValueError {
                    entry,
                    column: col,
                    what: format!("expected vl:weight, got \"{e}\""),
                });
            };
            let wcol = col + vl.chars().count() + 1 + (w.len() - w.trim_start().len());
            let vl = number(entry, col, vl.trim(), "VL", 14)?;
            let weight = number(entry, wcol, w.trim(), "weight", 255)?;
            out.push(Entry::new(vl as u8, weight as u8));
        }
        Ok(VlArbTable(out))
    }

    /// A table of these entries; `None` if there are more than 64 or a VL above 14.
    pub fn from_entries(e: &[Entry]) -> Option<VlArbTable> {
        (e.len() <= MAX_VLARB_ENTRIES && e.iter().all(|e| e.vl.0 <= 14))
            .then(|| VlArbTable(e.to_vec()))
    }

    /// The entries as configured.
    pub fn entries(&self) -> &[Entry] {
        &self.0
    }
}

impl fmt::Display for VlArbTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}:{}", e.vl.0, e.weight)?;
        }
        Ok(())
    }
}

/// An SL-to-VL map: the VL of each of the 16 SLs (15 drops the SL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sl2Vl(pub [u8; 16]);

impl Sl2Vl {
    /// Parses 16 comma-separated VLs.
    pub fn parse(s: &str) -> Result<Sl2Vl, ValueError> {
        let list = entries(s);
        let mut out = [0u8; 16];
        for (i, &(col, e)) in list.iter().enumerate() {
            if i >= 16 {
                return Err(ValueError {
                    entry: i + 1,
                    column: col,
                    what: "more than 16 VLs (one per SL)".into(),
                });
            }
            out[i] = number(i + 1, col, e, "VL", 15)? as u8;
        }
        if list.len() < 16 {
            return Err(ValueError {
                entry: list.len(),
                column: s.chars().count() + 1,
                what: format!("{} VLs given, 16 needed (one per SL)", list.len()),
            });
        }
        Ok(Sl2Vl(out))
    }
}

impl Default for Sl2Vl {
    fn default() -> Self {
        Sl2Vl([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7])
    }
}

impl fmt::Display for Sl2Vl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{v}")?;
        }
        Ok(())
    }
}

macro_rules! string_serde {
    ($t:ty, $expecting:literal) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $t;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<$t, E> {
                        <$t>::parse(s).map_err(E::custom)
                    }
                }
                d.deserialize_str(V)
            }
        }
    };
}
string_serde!(
    VlArbTable,
    "a VL arbitration table \"vl:weight,vl:weight,...\""
);
string_serde!(Sl2Vl, "16 comma-separated VLs, one per SL");

fn max_vls<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    let v: u8 = serde::Deserialize::deserialize(d)?;
    if !(1..=15).contains(&v) {
        return Err(serde::de::Error::custom(format!(
            "max_vls {v} is out of range 1..=15"
        )));
    }
    Ok(v)
}

fn opt_max_vls<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
    max_vls(d).map(Some)
}

/// Options for one kind of port; unset ones come from the common set.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QosPortOptions {
    /// Default: unset (the common `max_vls`).
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "opt_max_vls"
    )]
    pub max_vls: Option<u8>,
    /// Default: unset (the common `high_limit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub high_limit: Option<u8>,
    /// Default: unset (the common `vlarb_high`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlarb_high: Option<VlArbTable>,
    /// Default: unset (the common `vlarb_low`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlarb_low: Option<VlArbTable>,
    /// Default: unset (the common `sl2vl`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sl2vl: Option<Sl2Vl>,
}

impl QosPortOptions {
    fn is_empty(&self) -> bool {
        *self == QosPortOptions::default()
    }
}

/// OpenSM's simple QoS options (the `[qos]` table of the configuration).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QosOptions {
    /// Program SL-to-VL and VL arbitration tables (OpenSM's `qos`). Default: false.
    pub enabled: bool,
    /// Highest number of data VLs meant for the subnet (1..=15). Default: 15.
    #[serde(deserialize_with = "max_vls")]
    pub max_vls: u8,
    /// High-priority bytes sent before a low-priority packet may go, in 4 KiB units; 255 is
    /// unlimited. Default: 0 (one packet).
    pub high_limit: u8,
    /// Default: VL0 weight 4, VL1-14 weight 0.
    pub vlarb_high: VlArbTable,
    /// Default: VL0 weight 0, VL1-14 weight 4.
    pub vlarb_low: VlArbTable,
    /// Default: SL n on VL n, SL15 on VL7.
    pub sl2vl: Sl2Vl,
    /// Program a switch's SL-to-VL tables one Set per output port for all input ports
    /// where its SwitchInfo advertises OptimizedSLtoVLMappingProgramming (OpenSM's
    /// `use_optimized_slvl`, off there by default). Default: true.
    pub optimized_sl2vl: bool,
    /// Channel adapter ports (`qos_ca_*`).
    #[serde(skip_serializing_if = "QosPortOptions::is_empty")]
    pub ca: QosPortOptions,
    /// Router ports (`qos_rtr_*`).
    #[serde(skip_serializing_if = "QosPortOptions::is_empty")]
    pub rtr: QosPortOptions,
    /// Switch enhanced port 0 (`qos_sw0_*`).
    #[serde(skip_serializing_if = "QosPortOptions::is_empty")]
    pub sw0: QosPortOptions,
    /// Switch external ports (`qos_swe_*`).
    #[serde(skip_serializing_if = "QosPortOptions::is_empty")]
    pub swe: QosPortOptions,
}

impl Default for QosOptions {
    fn default() -> Self {
        QosOptions {
            enabled: false,
            max_vls: DEFAULT_MAX_VLS,
            high_limit: DEFAULT_HIGH_LIMIT,
            vlarb_high: VlArbTable::parse(DEFAULT_VLARB_HIGH).unwrap_or_default(),
            vlarb_low: VlArbTable::parse(DEFAULT_VLARB_LOW).unwrap_or_default(),
            sl2vl: Sl2Vl::default(),
            optimized_sl2vl: true,
            ca: QosPortOptions::default(),
            rtr: QosPortOptions::default(),
            sw0: QosPortOptions::default(),
            swe: QosPortOptions::default(),
        }
    }
}

/// The kinds of port with their own QoS options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum PortKind {
    Ca,
    Router,
    /// A switch's enhanced port 0 (a base port 0 gets no QoS tables).
    SwitchPort0,
    SwitchExternal,
}

/// The options that apply to one kind of port, every one resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QosSet {
    pub max_vls: u8,
    pub high_limit: u8,
    pub vlarb_high: VlArbTable,
    pub vlarb_low: VlArbTable,
    pub sl2vl: Sl2Vl,
}

impl QosOptions {
    fn port_options(&self, kind: PortKind) -> &QosPortOptions {
        match kind {
            PortKind::Ca => &self.ca,
            PortKind::Router => &self.rtr,
            PortKind::SwitchPort0 => &self.sw0,
            PortKind::SwitchExternal => &self.swe,
        }
    }

    fn port_options_mut(&mut self, prefix: &str) -> Option<&mut QosPortOptions> {
        match prefix {
            "ca" => Some(&mut self.ca),
            "rtr" => Some(&mut self.rtr),
            "sw0" => Some(&mut self.sw0),
            "swe" => Some(&mut self.swe),
            _ => None,
        }
    }

    /// The options for a kind of port: its own where set, else the common ones.
    pub fn resolve(&self, kind: PortKind) -> QosSet {
        let o = self.port_options(kind);
        QosSet {
            max_vls: o.max_vls.unwrap_or(self.max_vls),
            high_limit: o.high_limit.unwrap_or(self.high_limit),
            vlarb_high: o
                .vlarb_high
                .clone()
                .unwrap_or_else(|| self.vlarb_high.clone()),
            vlarb_low: o
                .vlarb_low
                .clone()
                .unwrap_or_else(|| self.vlarb_low.clone()),
            sl2vl: o.sl2vl.unwrap_or(self.sl2vl),
        }
    }

    /// Sets one option by its OpenSM name (`qos`, `qos_sl2vl`, `qos_ca_vlarb_high`, ...).
    /// `Ok(false)` when `name` is not a QoS option.
    pub fn set_opensm(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let value = value.trim();
        if name == "qos" {
            self.enabled = match value {
                "TRUE" | "true" => true,
                "FALSE" | "false" => false,
                _ => return Err(format!("expected TRUE or FALSE, got \"{value}\"")),
            };
            return Ok(true);
        }
        let Some(rest) = name.strip_prefix("qos_") else {
            return Ok(false);
        };
        let (prefix, key) = match rest.split_once('_') {
            Some((p, k)) if matches!(p, "ca" | "rtr" | "sw0" | "swe") => (Some(p), k),
            _ => (None, rest),
        };
        let msg = |e: ValueError| e.to_string();
        let small = |what: &str, max: u64| -> Result<u8, String> {
            let n = c_number(value).ok_or_else(|| format!("\"{value}\" is not a number"))?;
            if n > max {
                return Err(format!("{what} {n} is out of range"));
            }
            Ok(n as u8)
        };
        let max_vls = || -> Result<u8, String> {
            let n = small("max_vls", 15)?;
            if n == 0 {
                return Err("max_vls 0 is out of range 1..=15".into());
            }
            Ok(n)
        };
        enum Val {
            MaxVls(u8),
            HighLimit(u8),
            High(VlArbTable),
            Low(VlArbTable),
            Map(Sl2Vl),
        }
        let val = match key {
            "max_vls" => Val::MaxVls(max_vls()?),
            "high_limit" => Val::HighLimit(small("high_limit", 255)?),
            "vlarb_high" => Val::High(VlArbTable::parse(value).map_err(msg)?),
            "vlarb_low" => Val::Low(VlArbTable::parse(value).map_err(msg)?),
            "sl2vl" => Val::Map(Sl2Vl::parse(value).map_err(msg)?),
            _ => return Ok(false),
        };
        match prefix.and_then(|p| self.port_options_mut(p)) {
            None => match val {
                Val::MaxVls(v) => self.max_vls = v,
                Val::HighLimit(v) => self.high_limit = v,
                Val::High(t) => self.vlarb_high = t,
                Val::Low(t) => self.vlarb_low = t,
                Val::Map(m) => self.sl2vl = m,
            },
            Some(o) => match val {
                Val::MaxVls(v) => o.max_vls = Some(v),
                Val::HighLimit(v) => o.high_limit = Some(v),
                Val::High(t) => o.vlarb_high = Some(t),
                Val::Low(t) => o.vlarb_low = Some(t),
                Val::Map(m) => o.sl2vl = Some(m),
            },
        }
        Ok(true)
    }

    /// Reads the QoS options of an OpenSM options file (`name value` lines, `#` comments);
    /// other options are skipped.
    pub fn from_opensm_conf(text: &str, file: &Path) -> Result<QosOptions, QosError> {
        let mut o = QosOptions::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            let (name, value) = line.split_once([' ', '\t']).unwrap_or((line, ""));
            if name != "qos" && !name.starts_with("qos_") {
                continue;
            }
            match o.set_opensm(name, value) {
                Ok(true) => {}
                Ok(false) if name == "qos_policy_file" => {}
                Ok(false) => {
                    return Err(QosError {
                        file: file.to_path_buf(),
                        line: n + 1,
                        option: name.into(),
                        what: "unknown QoS option".into(),
                    });
                }
                Err(what) => {
                    return Err(QosError {
                        file: file.to_path_buf(),
                        line: n + 1,
                        option: name.into(),
                        what,
                    });
                }
            }
        }
        Ok(o)
    }
}

/// The QoS tables of one port.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QosTables {
    /// VL of each SL, clamped to the port's OperationalVLs (15 = drop).
    pub sl2vl: [u8; 16],
    /// High-priority entries as configured, VLs clamped; entries past the port's
    /// VLArbitrationHighCap are not sent, missing ones are (VL0, weight 0), skipped.
    pub vlarb_high: Vec<Entry>,
    pub vlarb_low: Vec<Entry>,
    /// PortInfo.VLHighLimit.
    pub high_limit: u8,
}

/// The mask OpenSM applies to VLs on a port with this OperationalVLs code.
fn vl_mask(op_vls: VlCap) -> u8 {
    let code = op_vls.to_raw_value().clamp(1, 5);
    (1u8 << (code - 1)) - 1
}

/// The tables for a port of `kind` running `op_vls` (PortInfo.OperationalVLs).
pub fn tables(opts: &QosOptions, kind: PortKind, op_vls: VlCap) -> QosTables {
    let set = opts.resolve(kind);
    let mask = vl_mask(op_vls);
    let clamp = |e: &Entry| Entry {
        vl: Vl(e.vl.0 & mask),
        weight: e.weight,
    };
    let mut sl2vl = set.sl2vl.0;
    for v in &mut sl2vl {
        if *v != 15 {
            *v &= mask;
        }
    }
    QosTables {
        sl2vl,
        vlarb_high: set.vlarb_high.entries().iter().map(clamp).collect(),
        vlarb_low: set.vlarb_low.entries().iter().map(clamp).collect(),
        high_limit: set.high_limit,
    }
}

impl QosTables {
    /// A port whose VLCap is VL0 alone gets no VL arbitration tables (and high limit 0),
    /// as OpenSM does.
    pub fn needs_vlarb(vl_cap: VlCap) -> bool {
        vl_cap != VlCap::Vl0
    }

    /// The block of a VL arbitration table to send to a port with these capacities
    /// (PortInfo's VLArbitrationLowCap / HighCap), `None` when the port lacks the block.
    /// Slots past the capacity are zero.
    pub fn vlarb_block(&self, block: Block, low_cap: u8, high_cap: u8) -> Option<vl_arb::Repr> {
        let (entries, cap) = if block.is_high_priority() {
            (&self.vlarb_high, high_cap)
        } else {
            (&self.vlarb_low, low_cap)
        };
        let n = block.implemented(cap);
        if n == 0 {
            return None;
        }
        let first = block.first_entry();
        let end = entries.len().min(first + n);
        Some(vl_arb::Repr::from_entries(
            entries.get(first..end).unwrap_or(&[]),
        ))
    }
}

/// OperationalVLs for a port: the lower of both ends' VLCap (the port's own VLCap when
/// unlinked), at least VL0, at most `max_op_vls` (OpenSM's `max_op_vls`, 1..=5).
pub fn operational_vls(local: VlCap, remote: Option<VlCap>, max_op_vls: u8) -> VlCap {
    let mut code = local.to_raw_value();
    if let Some(r) = remote {
        code = code.min(r.to_raw_value());
    }
    code = code.clamp(1, 5).min(max_op_vls.clamp(1, 5));
    VlCap::from_raw_value(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_opensms() {
        let o = QosOptions::default();
        assert_eq!(o.vlarb_high.to_string(), DEFAULT_VLARB_HIGH);
        assert_eq!(o.vlarb_low.to_string(), DEFAULT_VLARB_LOW);
        assert_eq!(o.sl2vl.to_string(), DEFAULT_SL2VL);
        assert_eq!(o.vlarb_high.entries().len(), 15);
        assert_eq!(o.vlarb_high.entries()[0], Entry::new(0, 4));
        assert_eq!((o.max_vls, o.high_limit, o.enabled), (15, 0, false));
    }

    #[test]
    fn value_grammar() {
        let t = VlArbTable::parse(" 0:4 , 0x1: 0x40,2:0377 ").unwrap();
        assert_eq!(
            t.entries(),
            &[Entry::new(0, 4), Entry::new(1, 64), Entry::new(2, 255)]
        );
        assert!(VlArbTable::parse("").unwrap().entries().is_empty());
        let cases: &[(&str, usize, usize, &str)] = &[
            ("0:4,15:1", 2, 5, "VL 15 is out of range 0..=14"),
            ("0:4,1:256", 2, 7, "weight 256"),
            ("0:4,1", 2, 5, "expected vl:weight"),
            ("0:4,,1:1", 2, 5, "expected vl:weight"),
            ("0:x", 1, 3, "weight \"x\" is not a number"),
        ];
        for &(v, entry, column, what) in cases {
            let e = VlArbTable::parse(v).unwrap_err();
            assert_eq!((e.entry, e.column), (entry, column), "{v}: {e}");
            assert!(e.to_string().contains(what), "{v}: {e}");
        }
        let long = vec!["1:1"; 65].join(",");
        assert_eq!(VlArbTable::parse(&long).unwrap_err().entry, 65);
        assert!(VlArbTable::parse(&vec!["1:1"; 64].join(",")).is_ok());

        assert_eq!(Sl2Vl::parse(DEFAULT_SL2VL).unwrap(), Sl2Vl::default());
        let e = Sl2Vl::parse("0,1,2").unwrap_err();
        assert!(e.to_string().contains("3 VLs given, 16 needed"), "{e}");
        let e = Sl2Vl::parse("0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,0").unwrap_err();
        assert_eq!(e.entry, 17);
        let e = Sl2Vl::parse("0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,16").unwrap_err();
        assert_eq!((e.entry, e.column), (16, 36));
    }

    #[test]
    fn per_kind_options_override_the_common_ones() {
        let mut o = QosOptions::default();
        assert_eq!(o.set_opensm("qos_high_limit", "6"), Ok(true));
        assert_eq!(o.set_opensm("qos_ca_vlarb_low", "0:0,1:64"), Ok(true));
        assert_eq!(
            o.set_opensm("qos_swe_sl2vl", "0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,15"),
            Ok(true)
        );
        assert_eq!(o.set_opensm("qos_rtr_high_limit", "255"), Ok(true));
        assert_eq!(o.set_opensm("qos", "TRUE"), Ok(true));
        assert_eq!(o.set_opensm("sm_priority", "1"), Ok(false));
        assert_eq!(o.set_opensm("qos_ca_bogus", "1"), Ok(false));
        assert!(o.set_opensm("qos_sw0_max_vls", "0").is_err());
        assert!(o.set_opensm("qos_vlarb_high", "1:2:3").is_err());
        assert!(o.enabled);
        let ca = o.resolve(PortKind::Ca);
        assert_eq!(ca.high_limit, 6);
        assert_eq!(
            ca.vlarb_low.entries(),
            &[Entry::new(0, 0), Entry::new(1, 64)]
        );
        assert_eq!(ca.sl2vl, Sl2Vl::default());
        assert_eq!(o.resolve(PortKind::Router).high_limit, 255);
        assert_eq!(o.resolve(PortKind::SwitchExternal).sl2vl.0[15], 15);
        assert_eq!(
            o.resolve(PortKind::SwitchPort0),
            o.resolve(PortKind::SwitchPort0)
        );
    }

    #[test]
    fn opensm_options_file() {
        let text = "# opensm.conf\nsm_priority 3\nqos TRUE\nqos_max_vls 8\n\
                    qos_ca_vlarb_high 0:4 # comment\nqos_policy_file /x\n";
        let o = QosOptions::from_opensm_conf(text, Path::new("opensm.conf")).unwrap();
        assert!(o.enabled);
        assert_eq!(o.max_vls, 8);
        assert_eq!(o.ca.vlarb_high.as_ref().unwrap().entries().len(), 1);
        let e = QosOptions::from_opensm_conf("\nqos_sl2vl 0,1\n", Path::new("o.conf")).unwrap_err();
        assert_eq!((e.line, e.option.as_str()), (2, "qos_sl2vl"));
        assert!(
            e.to_string().starts_with("o.conf:2: qos_sl2vl: entry 2"),
            "{e}"
        );
        let e = QosOptions::from_opensm_conf("qos_xx 1\n", Path::new("o.conf")).unwrap_err();
        assert!(e.to_string().contains("unknown QoS option"), "{e}");
    }

    #[test]
    fn tables_clamp_like_opensm() {
        let o = QosOptions::default();
        let full = tables(&o, PortKind::Ca, VlCap::Vl0To14);
        assert_eq!(full.sl2vl, Sl2Vl::default().0);
        assert_eq!(full.vlarb_low.len(), 15);
        // VL0-3: VLs are masked with 3, so VL5 lands on VL1; VL15 (drop) is kept.
        let mut o2 = o.clone();
        o2.sl2vl = Sl2Vl::parse("0,1,2,3,4,5,6,7,8,9,10,11,12,13,15,7").unwrap();
        let t = tables(&o2, PortKind::SwitchExternal, VlCap::Vl0To3);
        assert_eq!(t.sl2vl, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 15, 3]);
        assert_eq!(t.vlarb_low[5], Entry::new(1, 4));
        let one = tables(&o, PortKind::Ca, VlCap::Vl0);
        assert!(one.sl2vl.iter().all(|&v| v == 0));
        assert!(one.vlarb_high.iter().all(|e| e.vl == Vl(0)));
        assert!(!QosTables::needs_vlarb(VlCap::Vl0));
        assert!(QosTables::needs_vlarb(VlCap::Vl0To1));
    }

    #[test]
    fn vlarb_blocks_follow_the_port_caps() {
        let o = QosOptions {
            vlarb_low: VlArbTable::parse(&vec!["1:1"; 40].join(",")).unwrap(),
            ..QosOptions::default()
        };
        let t = tables(&o, PortKind::Ca, VlCap::Vl0To7);
        let b = t.vlarb_block(Block::Low0To31, 40, 8).unwrap();
        assert!(
            b.vl_arbitration_table
                .iter()
                .all(|e| *e == Entry::new(1, 1))
        );
        let b = t.vlarb_block(Block::Low32To63, 40, 8).unwrap();
        assert_eq!(b.vl_arbitration_table[7], Entry::new(1, 1));
        assert_eq!(b.vl_arbitration_table[8], Entry::default());
        assert!(t.vlarb_block(Block::Low32To63, 32, 8).is_none());
        let h = t.vlarb_block(Block::High0To31, 40, 8).unwrap();
        assert_eq!(h.vl_arbitration_table[0], Entry::new(0, 4));
        assert_eq!(h.vl_arbitration_table[8], Entry::default());
        assert!(t.vlarb_block(Block::High32To63, 40, 8).is_none());
    }

    #[test]
    fn operational_vls_policy() {
        use VlCap::*;
        assert_eq!(operational_vls(Vl0To14, Some(Vl0To7), 5), Vl0To7);
        assert_eq!(operational_vls(Vl0To3, Some(Vl0To14), 5), Vl0To3);
        assert_eq!(
            operational_vls(Vl0To14, Some(Vl0To14), DEFAULT_MAX_OP_VLS),
            Vl0To14
        );
        assert_eq!(operational_vls(Vl0To14, Some(Vl0To14), 3), Vl0To3);
        assert_eq!(operational_vls(Vl0To14, None, 4), Vl0To7);
        assert_eq!(operational_vls(Unknown(0), Some(Vl0To14), 5), Vl0);
        assert_eq!(operational_vls(Unknown(9), None, 5), Vl0To14);
    }

    #[test]
    fn serde_round_trip_as_strings() {
        let o = QosOptions {
            ca: QosPortOptions {
                sl2vl: Some(Sl2Vl([1; 16])),
                ..QosPortOptions::default()
            },
            ..QosOptions::default()
        };
        let j = serde_json::to_value(&o).unwrap();
        assert_eq!(j["vlarb_high"], DEFAULT_VLARB_HIGH);
        assert_eq!(j["ca"]["sl2vl"], "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1");
        assert!(j.get("rtr").is_none());
    }
}
