//! The `ibsm` configuration file (TOML).
//!
//! Every table and key is optional: what a file leaves out keeps its default, and the
//! defaults are OpenSM's where OpenSM has the option. Unknown keys, wrong types and values
//! out of range are errors naming the file, line, column and key. `ibsm.example.toml` at
//! the repository root lists every option with its default.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{Error as _, Unexpected};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::partitions::{Enforcement, PartitionError, Partitions, TableOptions};
use crate::qos::{DEFAULT_MAX_OP_VLS, QosOptions};

/// Routing engine names the configuration accepts (OpenSM's, so a chain written for
/// OpenSM reads; which ones run is up to the routing crate).
pub const KNOWN_ENGINES: [&str; 14] = [
    "auto",
    "layered",
    "minhop",
    "updn",
    "dnup",
    "file",
    "ftree",
    "lash",
    "dor",
    "torus-2QoS",
    "nue",
    "dfsssp",
    "sssp",
    "chain",
];

/// Where and why a configuration file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{column}: {}{message}", file.display(), key.as_ref().map(|k| format!("{k}: ")).unwrap_or_default())]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based line (0 when the file could not be read).
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Dotted key path (`sm.lmc`), when the error is about one key.
    pub key: Option<String>,
    pub message: String,
}

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub sm: SmConfig,
    pub routing: RoutingConfig,
    pub partitions: PartitionsConfig,
    pub qos: QosOptions,
    pub dump: DumpConfig,
    pub log: LogConfig,
    pub metrics: MetricsConfig,
    pub status: StatusConfig,
    pub health: HealthConfig,
    pub perfmgr: PerfMgrConfig,
}

/// `[sm]`: the subnet manager itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SmConfig {
    /// Port GUID of the local port to run on. Default: unset (the first active port).
    #[serde(with = "opt_hex64", skip_serializing_if = "Option::is_none", default)]
    pub port_guid: Option<u64>,
    /// Directory for state kept across restarts (the `guid2lid` file). Default:
    /// `/var/cache/ibsm`.
    pub state_dir: PathBuf,
    /// LID Mask Control: CA and router ports get 2^lmc LIDs (0..=7). Default: 0.
    #[serde(deserialize_with = "upto::<_, 7>")]
    pub lmc: u8,
    /// SMInfo priority; the highest wins mastership (0..=15). Default: 0.
    #[serde(deserialize_with = "upto::<_, 15>")]
    pub sm_priority: u8,
    /// SM_Key (hex string). Default: `0x0000000000000001`.
    #[serde(with = "hex64")]
    pub sm_key: u64,
    /// The key an SA requester presents to be trusted (hex string): it then sees M_Keys
    /// in PortInfoRecords, P_KeyTableRecords and subscribers' QPNs, and may change other
    /// ports' ServiceRecords. Default: unset, the SM_Key (as OpenSM's `sa_key`).
    #[serde(with = "opt_hex64", skip_serializing_if = "Option::is_none", default)]
    pub sa_key: Option<u64>,
    /// M_Key written to every port (hex string); 0 means no M_Key. Default: 0.
    #[serde(with = "hex64")]
    pub m_key: u64,
    /// PortInfo M_KeyProtectBits (0..=3). Default: 0.
    #[serde(deserialize_with = "upto::<_, 3>")]
    pub m_key_protect_bits: u8,
    /// PortInfo M_KeyLeasePeriod in seconds; 0 never expires. Default: 0.
    pub m_key_lease_period: u16,
    /// Give every port its own M_Key, derived from `m_key` and the port's GUID (kept in
    /// `state_dir/guid2mkey`). Default: false.
    pub m_key_per_port: bool,
    /// Subnet prefix (hex string). Default: `0xfe80000000000000`.
    #[serde(with = "hex64")]
    pub subnet_prefix: u64,
    /// Milliseconds between light sweeps; 0 sweeps only on traps. Default: 10000.
    pub sweep_interval_ms: u64,
    /// Milliseconds between a standby SM's polls of the master's SMInfo (at least 1).
    /// Default: 10000.
    #[serde(deserialize_with = "nonzero")]
    pub sm_poll_interval_ms: u32,
    /// Polls in a row the master may miss before a standby takes over (at least 1).
    /// Default: 4.
    #[serde(deserialize_with = "nonzero")]
    pub sm_poll_retries: u32,
    /// Milliseconds to wait for an SMP response (at least 1). Default: 200.
    #[serde(deserialize_with = "nonzero")]
    pub smp_timeout_ms: u32,
    /// Times an unanswered SMP is resent. Default: 3.
    pub smp_retries: u32,
    /// SMPs in flight at once (at least 1). Default: 64.
    #[serde(deserialize_with = "nonzero")]
    pub max_outstanding_smps: u32,
    /// PortInfo SubnetTimeout: 4.096 us * 2^value (0..=31). Default: 18.
    #[serde(deserialize_with = "upto::<_, 31>")]
    pub subnet_timeout: u8,
    /// SwitchInfo LifeTimeValue: 4.096 us * 2^value (0..=31). Default: 18.
    #[serde(deserialize_with = "upto::<_, 31>")]
    pub packet_life_time: u8,
    /// PortInfo HOQLife on switch-to-switch ports (0..=31). Default: 18.
    #[serde(deserialize_with = "upto::<_, 31>")]
    pub head_of_queue_lifetime: u8,
    /// PortInfo HOQLife on switch ports facing CAs and routers (0..=31). Default: 16.
    #[serde(deserialize_with = "upto::<_, 31>")]
    pub leaf_head_of_queue_lifetime: u8,
    /// Highest OperationalVLs code: 1 VL0, 2 VL0-1, 3 VL0-3, 4 VL0-7, 5 VL0-14. Default: 5.
    #[serde(deserialize_with = "range::<_, 1, 5>")]
    pub max_op_vls: u8,
    /// PortInfo LinkSpeedEnabled to set: 0 leaves it, 1..=7 a mask of SDR/DDR/QDR, 15
    /// copies LinkSpeedSupported. Default: 15.
    #[serde(deserialize_with = "link_speed")]
    pub force_link_speed: u8,
    /// PortInfo LinkSpeedExtEnabled to set on ports with extended speeds: 0 leaves it,
    /// 1..=15 a mask of FDR/EDR/HDR/NDR, 30 disables them, 31 copies
    /// LinkSpeedExtSupported. Default: 0 (OpenSM's default is 31).
    #[serde(deserialize_with = "link_speed_ext")]
    pub force_link_speed_ext: u8,
    /// Give every port a fresh LID instead of the remembered one. Default: false.
    pub reassign_lids: bool,
    /// The CPU the thread that drives the MAD device runs on (0..=1023), with the threads
    /// it starts afterwards (libumad2sim's receiver). Routing threads stay free. Default:
    /// unset (the scheduler's choice).
    #[serde(
        deserialize_with = "cpu",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub io_cpu: Option<u16>,
}

impl Default for SmConfig {
    fn default() -> Self {
        SmConfig {
            port_guid: None,
            sa_key: None,
            state_dir: PathBuf::from("/var/cache/ibsm"),
            lmc: 0,
            sm_priority: 0,
            sm_key: 1,
            m_key: 0,
            m_key_protect_bits: 0,
            m_key_lease_period: 0,
            m_key_per_port: false,
            subnet_prefix: 0xfe80_0000_0000_0000,
            sweep_interval_ms: 10_000,
            sm_poll_interval_ms: 10_000,
            sm_poll_retries: 4,
            smp_timeout_ms: 200,
            smp_retries: 3,
            max_outstanding_smps: 64,
            subnet_timeout: 18,
            packet_life_time: 18,
            head_of_queue_lifetime: 18,
            leaf_head_of_queue_lifetime: 16,
            max_op_vls: DEFAULT_MAX_OP_VLS,
            force_link_speed: 15,
            force_link_speed_ext: 0,
            reassign_lids: false,
            io_cpu: None,
        }
    }
}

impl SmConfig {
    /// The LID persistence file in `state_dir`.
    pub fn guid2lid_path(&self) -> PathBuf {
        self.state_dir.join("guid2lid")
    }
}

/// `[routing]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RoutingConfig {
    /// Engines to try in order; the first that can route the fabric wins. Default:
    /// `["auto"]` (ftree on a clean fat-tree, the VL-layered engine on anything else;
    /// OpenSM's default is minhop, which can deadlock off a tree).
    #[serde(deserialize_with = "engines")]
    pub engines: Vec<String>,
    /// Data VLs an engine that spreads paths over VLs may use (1..=15), at most what every
    /// link offers. Default: 8.
    #[serde(deserialize_with = "vls")]
    pub vls: u8,
    /// File of root switch node GUIDs, one per line (up/down, fat-tree). Default: unset
    /// (detected).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roots_file: Option<PathBuf>,
    /// File of compute-node port GUIDs (fat-tree). Default: unset (every CA).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_nodes_file: Option<PathBuf>,
    /// Also compute adaptive-routing port groups. Default: false.
    pub adaptive: bool,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        RoutingConfig {
            engines: vec!["auto".to_string()],
            vls: 8,
            roots_file: None,
            compute_nodes_file: None,
            adaptive: false,
        }
    }
}

/// `[partitions]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PartitionsConfig {
    /// An OpenSM `partitions.conf` file; a missing file is an error (OpenSM would fall back
    /// to its no-file behaviour). Default: unset (with `text` unset too, every port is a
    /// full member of the default partition, as OpenSM does without a file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// The same grammar inline, instead of `file`. Default: unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `both` gives a port the full and the limited key (OpenSM's `allow_both_pkeys`).
    /// Default: false.
    pub allow_both_pkeys: bool,
    /// Partition enforcement on switch ports facing CAs and routers: "both", "in", "out"
    /// or "off". Default: "both".
    pub enforcement: Enforcement,
}

impl PartitionsConfig {
    /// The partitions this section names. `config_file` locates inline text in errors.
    pub fn load(&self, config_file: &Path) -> Result<Partitions, PartitionError> {
        match (&self.file, &self.text) {
            (Some(f), _) => Partitions::read(f),
            (None, Some(t)) => {
                let mut name = config_file.as_os_str().to_owned();
                name.push(" [partitions].text");
                Partitions::parse(t, Path::new(&name))
            }
            (None, None) => Ok(Partitions::no_file()),
        }
    }

    /// The table options.
    pub fn table_options(&self) -> TableOptions {
        TableOptions {
            allow_both_pkeys: self.allow_both_pkeys,
            enforcement: self.enforcement,
        }
    }
}

/// A dump the SM writes after each heavy sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DumpKind {
    /// OpenSM's `opensm-lfts.dump`.
    Lfts,
    /// OpenSM's `opensm-subnet.lst`.
    SubnetLst,
    /// The fabric in ibnetdiscover's format.
    Topology,
    /// P_Key tables.
    Pkeys,
}

/// `[dump]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DumpConfig {
    /// Directory the dumps go to. Default: `/var/log/ibsm`.
    pub dir: PathBuf,
    /// Which dumps: "lfts", "subnet_lst", "topology", "pkeys". Default: none.
    pub write: Vec<DumpKind>,
}

impl Default for DumpConfig {
    fn default() -> Self {
        DumpConfig {
            dir: PathBuf::from("/var/log/ibsm"),
            write: Vec::new(),
        }
    }
}

/// How much to log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Error,
    Warn,
    #[default]
    Info,
    Debug,
    Trace,
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        })
    }
}

/// `[log]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// "error", "warn", "info", "debug" or "trace". Default: "info".
    pub level: LogLevel,
    /// Log file. Default: unset (standard error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

/// `[health]`: when a port is taken out of the subnet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    /// A link that goes down this many times within `flap_window_s` is unhealthy: left out
    /// of the subnet (not routed over, not made ACTIVE) until cleared. 0: never. Default: 5.
    pub link_flaps: u32,
    /// Seconds. Default: 60.
    pub flap_window_s: u32,
    /// With the performance manager on: a port whose error counters grew faster than this
    /// many per second between two reads is unhealthy. 0: never. Default: 0.
    #[serde(deserialize_with = "rate")]
    pub error_rate: f64,
    /// With the performance manager on: a port whose LinkDownedCounter grew by this much
    /// between two reads is unhealthy. 0: never. Default: 0.
    pub link_downed: u32,
    /// Also switch an unhealthy link off (PortInfo PortPhysicalState Disabled, on its
    /// switch end), so that it stops flapping and erring; clearing the port switches it on
    /// again. Default: false (the link stays up physically, only the routes leave it).
    pub disable_ports: bool,
    /// Traps an issuer may send at once before it is muted as babbling: its traps are then
    /// counted and not acted on one by one. 0: never muted. Default: 50.
    pub trap_burst: u32,
    /// Traps per second an issuer may keep sending. 0: never muted. Default: 10.
    #[serde(deserialize_with = "rate")]
    pub trap_rate: f64,
}

impl Eq for HealthConfig {}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            link_flaps: 5,
            flap_window_s: 60,
            error_rate: 0.0,
            link_downed: 0,
            disable_ports: false,
            trap_burst: 50,
            trap_rate: 10.0,
        }
    }
}

/// `[perfmgr]`: reading every port's counters (OpenSM's perfmgr).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PerfMgrConfig {
    /// Read port counters (perfmgr). Default: false.
    pub enabled: bool,
    /// Seconds between the starts of two counter sweeps (perfmgr_sweep_time_s). Default: 180.
    pub interval_s: u32,
}

impl Default for PerfMgrConfig {
    fn default() -> Self {
        PerfMgrConfig {
            enabled: false,
            interval_s: 180,
        }
    }
}

/// `[metrics]`: Prometheus metrics over HTTP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Address to serve `/metrics` on, e.g. `"127.0.0.1:9464"`. Default: unset (off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<std::net::SocketAddr>,
    /// Also each port's counters (errors, link downs, data), labelled by node GUID and
    /// port, with `[perfmgr]` on: four samples per port. Default: false.
    pub per_port: bool,
}

/// `[status]`: the live status socket and the fabric event log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatusConfig {
    /// Unix socket `ibsm status` and `ibsm ports` ask (mode 0600). Default: unset
    /// (`ibsm.sock` in the state directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
    /// File the fabric events are appended to, one JSON object per line. Default: unset
    /// (`events.jsonl` in the state directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_log: Option<PathBuf>,
}

impl Config {
    /// Parses configuration text; `file` names it in errors.
    pub fn from_toml_str(text: &str, file: &Path) -> Result<Config, ConfigError> {
        let pos = |offset: usize| -> (usize, usize) {
            let offset = offset.min(text.len());
            let before = text.get(..offset).unwrap_or("");
            let line = before.matches('\n').count() + 1;
            let start = before.rfind('\n').map_or(0, |i| i + 1);
            (line, before[start..].chars().count() + 1)
        };
        let error = |span: Option<std::ops::Range<usize>>, key: Option<String>, message: String| {
            let (line, column) = span.map_or((0, 0), |s| pos(s.start));
            ConfigError {
                file: file.to_path_buf(),
                line,
                column,
                key,
                message,
            }
        };
        let de = toml::de::Deserializer::parse(text)
            .map_err(|e| error(e.span(), None, e.message().to_string()))?;
        let config: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let key = (path != ".").then_some(path);
            let inner = e.into_inner();
            error(inner.span(), key, inner.message().to_string())
        })?;
        config.check().map_err(|(key, message)| {
            let (line, column) = locate(text, &key);
            ConfigError {
                file: file.to_path_buf(),
                line,
                column,
                key: Some(key),
                message,
            }
        })?;
        Ok(config)
    }

    /// Reads and parses a configuration file.
    pub fn load(file: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(file).map_err(|e| ConfigError {
            file: file.to_path_buf(),
            line: 0,
            column: 0,
            key: None,
            message: format!("cannot read file: {e}"),
        })?;
        Config::from_toml_str(&text, file)
    }

    /// The configuration as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// Rules that span keys.
    fn check(&self) -> Result<(), (String, String)> {
        if self.partitions.file.is_some() && self.partitions.text.is_some() {
            return Err((
                "partitions.text".into(),
                "give the partitions as `file` or as `text`, not both".into(),
            ));
        }
        Ok(())
    }
}

/// (line, column) of a dotted key's assignment, or of its table, found by scanning the text
/// (for rules that span keys, where the parser has no span).
fn locate(text: &str, key: &str) -> (usize, usize) {
    let (table, leaf) = key.rsplit_once('.').unwrap_or(("", key));
    let mut current = String::new();
    let mut table_line = (0, 0);
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let col = line.len() - t.len() + 1;
        if let Some(h) = t.strip_prefix('[') {
            current = h.split(']').next().unwrap_or("").trim().to_string();
            if current == table {
                table_line = (n + 1, col);
            }
            continue;
        }
        let k = t.split('=').next().unwrap_or("").trim();
        if current == table && k == leaf && t.contains('=') {
            return (n + 1, col);
        }
    }
    table_line
}

/// Validators and codecs for `#[serde(...)]`.
fn upto<'de, D: Deserializer<'de>, const MAX: u8>(d: D) -> Result<u8, D::Error> {
    range::<D, 0, MAX>(d)
}

fn range<'de, D: Deserializer<'de>, const MIN: u8, const MAX: u8>(d: D) -> Result<u8, D::Error> {
    let v = u64::deserialize(d)?;
    if v < MIN as u64 || v > MAX as u64 {
        let expected = format!("{MIN}..={MAX}");
        return Err(D::Error::invalid_value(
            Unexpected::Unsigned(v),
            &expected.as_str(),
        ));
    }
    Ok(v as u8)
}

/// Linux's CPU sets hold CPUs 0..=1023.
const MAX_CPU: u64 = 1023;

fn cpu<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
    let v = u64::deserialize(d)?;
    if v > MAX_CPU {
        return Err(D::Error::invalid_value(
            Unexpected::Unsigned(v),
            &"a CPU number, 0..=1023",
        ));
    }
    Ok(Some(v as u16))
}

fn nonzero<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v = u32::deserialize(d)?;
    if v == 0 {
        return Err(D::Error::invalid_value(
            Unexpected::Unsigned(0),
            &"a value of at least 1",
        ));
    }
    Ok(v)
}

fn link_speed<'de, D: Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    let v = u64::deserialize(d)?;
    if v > 7 && v != 15 {
        return Err(D::Error::invalid_value(
            Unexpected::Unsigned(v),
            &"0..=7 or 15",
        ));
    }
    Ok(v as u8)
}

fn link_speed_ext<'de, D: Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    let v = u64::deserialize(d)?;
    if v > 15 && v != 30 && v != 31 {
        return Err(D::Error::invalid_value(
            Unexpected::Unsigned(v),
            &"0..=15, 30 or 31",
        ));
    }
    Ok(v as u8)
}

fn vls<'de, D: Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    let v = u64::deserialize(d)?;
    if !(1..=15).contains(&v) {
        return Err(D::Error::invalid_value(Unexpected::Unsigned(v), &"1..=15"));
    }
    Ok(v as u8)
}

fn rate<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if !v.is_finite() || v < 0.0 {
        return Err(D::Error::custom(format!(
            "{v} is not a rate (a finite number >= 0)"
        )));
    }
    Ok(v)
}

fn engines<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let v = Vec::<String>::deserialize(d)?;
    if v.is_empty() {
        return Err(D::Error::invalid_length(0, &"at least one routing engine"));
    }
    if let Some(bad) = v.iter().find(|e| !KNOWN_ENGINES.contains(&e.as_str())) {
        return Err(D::Error::custom(format!(
            "unknown routing engine \"{bad}\" (known: {})",
            KNOWN_ENGINES.join(", ")
        )));
    }
    Ok(v)
}

/// 64-bit values written as hex strings (TOML integers stop at 2^63).
mod hex64 {
    use super::*;

    pub(super) fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{v:#018x}"))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = u64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a 64-bit number as a string (\"0x...\") or a non-negative integer")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<u64, E> {
                // Keys and prefixes are written as GUIDs are (hex, or decimal without C's
                // octal: "00021234" would silently be another GUID).
                s.trim()
                    .parse::<sm_mad::Guid>()
                    .map(u64::from)
                    .map_err(|_| E::invalid_value(Unexpected::Str(s), &self))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
                Ok(v)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
                u64::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}

mod opt_hex64 {
    use super::*;

    pub(super) fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => hex64::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        hex64::deserialize(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(t, Path::new("ibsm.toml"))
    }

    #[test]
    fn empty_and_partial_files_take_the_defaults() {
        assert_eq!(parse("").unwrap(), Config::default());
        let c = parse("[sm]\nlmc = 2\n[qos]\nenabled = true\n[qos.ca]\nhigh_limit = 4\n").unwrap();
        assert_eq!(c.sm.lmc, 2);
        assert_eq!(c.sm.max_outstanding_smps, 64);
        assert!(c.qos.enabled);
        assert_eq!(c.qos.ca.high_limit, Some(4));
        assert_eq!(c.routing.engines, vec!["auto"]);
        assert_eq!(c.sm.guid2lid_path(), Path::new("/var/cache/ibsm/guid2lid"));
        assert_eq!(c.sm.io_cpu, None);
        assert_eq!(parse("[sm]\nio_cpu = 1\n").unwrap().sm.io_cpu, Some(1));
    }

    #[test]
    fn hex_values() {
        let c = parse(
            "[sm]\nport_guid = \"0x0002c90300001234\"\nm_key = \"0xffffffffffffffff\"\nsm_key = 7\n",
        )
        .unwrap();
        assert_eq!(c.sm.port_guid, Some(0x0002_c903_0000_1234));
        assert_eq!(c.sm.m_key, u64::MAX);
        assert_eq!(c.sm.sm_key, 7);
        let c = parse("[sm]\nsm_key = \"0010\"\n").unwrap();
        assert_eq!(c.sm.sm_key, 10);
        let e = parse("[sm]\nm_key = \"0xfg\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("sm.m_key"));
        let e = parse("[sm]\nm_key = -1\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("sm.m_key"));
        let c = parse("[sm]\nport_guid = \"0002:c903:0000:1234\"\n").unwrap();
        assert_eq!(c.sm.port_guid, Some(0x0002_c903_0000_1234));
        let e = parse("[sm]\nport_guid = \"0x+1\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("sm.port_guid"));
    }

    #[test]
    fn errors_name_file_line_column_and_key() {
        let cases: &[(&str, &str, usize, usize, &str)] = &[
            ("[sm]\nlmc = 8\n", "sm.lmc", 2, 7, "expected 0..=7"),
            (
                "[sm]\n\nsmp_timeout_ms = 0\n",
                "sm.smp_timeout_ms",
                3,
                18,
                "at least 1",
            ),
            (
                "[sm]\nmax_outstanding_smps = 0\n",
                "sm.max_outstanding_smps",
                2,
                24,
                "at least 1",
            ),
            ("[sm]\nio_cpu = 1024\n", "sm.io_cpu", 2, 10, "0..=1023"),
            (
                "[sm]\nbogus = 1\n",
                "sm.bogus",
                2,
                1,
                "unknown field `bogus`",
            ),
            ("[smm]\n", "smm", 1, 2, "unknown field `smm`"),
            (
                "[sm]\nlmc = \"one\"\n",
                "sm.lmc",
                2,
                7,
                "invalid type: string",
            ),
            (
                "[sm]\nmax_op_vls = 0\n",
                "sm.max_op_vls",
                2,
                14,
                "expected 1..=5",
            ),
            (
                "[sm]\nforce_link_speed = 9\n",
                "sm.force_link_speed",
                2,
                20,
                "0..=7 or 15",
            ),
            (
                "[sm]\nforce_link_speed_ext = 20\n",
                "sm.force_link_speed_ext",
                2,
                24,
                "0..=15, 30 or 31",
            ),
            (
                "[routing]\nengines = []\n",
                "routing.engines",
                2,
                11,
                "at least one",
            ),
            (
                "[routing]\nengines = [\"minhop\", \"fast\"]\n",
                "routing.engines",
                2,
                11,
                "unknown routing engine \"fast\"",
            ),
            (
                "[partitions]\nenforcement = \"inout\"\n",
                "partitions.enforcement",
                2,
                15,
                "unknown variant",
            ),
            ("[qos]\nsl2vl = \"0,1\"\n", "qos.sl2vl", 2, 9, "2 VLs given"),
            (
                "[qos.swe]\nvlarb_low = \"0:4,16:1\"\n",
                "qos.swe.vlarb_low",
                2,
                13,
                "entry 2 (column 5)",
            ),
            ("[qos]\nmax_vls = 16\n", "qos.max_vls", 2, 11, "1..=15"),
            (
                "[dump]\nwrite = [\"lfts\", \"all\"]\n",
                "dump.write[1]",
                2,
                18,
                "unknown variant `all`",
            ),
            (
                "[log]\nlevel = \"loud\"\n",
                "log.level",
                2,
                9,
                "unknown variant `loud`",
            ),
            (
                "[partitions]\nfile = \"p.conf\"\n  text = \"A=1:ALL;\"\n",
                "partitions.text",
                3,
                3,
                "not both",
            ),
        ];
        for &(text, key, line, column, what) in cases {
            let e = parse(text).unwrap_err();
            let msg = e.to_string();
            assert_eq!(e.key.as_deref(), Some(key), "{text:?}: {msg}");
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {msg}");
            assert!(msg.contains(what), "{text:?}: {msg}");
            assert!(
                msg.starts_with(&format!("ibsm.toml:{line}:{column}: {key}: ")),
                "{msg}"
            );
        }
    }

    #[test]
    fn syntax_errors_have_a_position_but_no_key() {
        let e = parse("[sm]\nlmc = \n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (2, None));
        let e = parse("[sm]\nlmc = 1\n[sm]\n").unwrap_err();
        assert_eq!(e.line, 3);
    }

    #[test]
    fn round_trip() {
        let mut c = Config::default();
        c.sm.port_guid = Some(0x1234);
        c.partitions.text = Some("Default=0x7fff:ALL=full;".into());
        c.qos.swe.high_limit = Some(9);
        c.dump.write = vec![DumpKind::Lfts, DumpKind::Pkeys];
        let text = c.to_toml();
        assert_eq!(parse(&text).unwrap(), c, "{text}");
    }

    #[test]
    fn partitions_section_loads() {
        let c = parse("[partitions]\ntext = \"A=0x10 : ALL ;\"\n").unwrap();
        let p = c.partitions.load(Path::new("ibsm.toml")).unwrap();
        assert_eq!(p.partitions.len(), 1);
        let c = parse("[partitions]\ntext = \"A=0x10 : BAD ;\"\n").unwrap();
        let e = c.partitions.load(Path::new("ibsm.toml")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("ibsm.toml [partitions].text:1:10:"),
            "{e}"
        );
        let p = Config::default().partitions.load(Path::new("x")).unwrap();
        assert!(!p.from_file);
        assert_eq!(
            Config::default().partitions.table_options(),
            TableOptions::default()
        );
    }
}
