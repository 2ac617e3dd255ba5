//! From the TOML configuration to what `ibsm run` runs with: the core's parameters, and the
//! settings the daemon around the core honours itself (its port, state, dumps and log).

use std::path::{Path, PathBuf};

use sm_core::config::{Config, DumpConfig, LogConfig, MetricsConfig, PerfMgrConfig, StatusConfig};
use sm_mad::Guid;
use sm_routing::GuidFileError;

use crate::core::Params;

/// Why a configuration cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParamsError {
    #[error(transparent)]
    Partitions(#[from] sm_core::partitions::PartitionError),
    #[error(
        "routing.engines: routing engine \"{0}\" is not built (known: minhop, updn, ftree, \
         layered)"
    )]
    Engine(String),
    /// A GUID file named by `key` is missing or has a line that is not a GUID.
    #[error("{key}: {error}")]
    GuidFile {
        key: &'static str,
        error: GuidFileError,
    },
    /// A GUID file that lists nothing: the engine would silently fall back to detection.
    #[error("{key}: {}: lists no GUID (to have them detected, give no file)", path.display())]
    EmptyGuidFile { key: &'static str, path: PathBuf },
}

/// Everything a configuration asks of `ibsm run`.
#[derive(Debug, Clone)]
pub struct Settings {
    /// What the core does.
    pub params: Params,
    /// `[sm] port_guid`: the local port to run on; `None`, the first active one.
    pub port_guid: Option<Guid>,
    /// `[sm] state_dir`: where `guid2lid` is kept.
    pub state_dir: PathBuf,
    /// `[sm] reassign_lids`: start from an empty LID store instead of `guid2lid`.
    pub reassign_lids: bool,
    /// `[dump]`: which dumps, and where.
    pub dump: DumpConfig,
    /// `[log]`: how much to log, and where.
    pub log: LogConfig,
    /// `[metrics]`: where Prometheus metrics are served, if anywhere.
    pub metrics: MetricsConfig,
    /// `[status]`: the status socket and the event log.
    pub status: StatusConfig,
    /// `[perfmgr]`: whether and how often port counters are read.
    pub perfmgr: PerfMgrConfig,
    /// `[health] error_rate`, `link_downed`: counter thresholds (with the perfmgr).
    pub error_rate: f64,
    pub link_downed: u32,
    /// `[sm] io_cpu`: the CPU the thread that drives the device is kept on.
    pub io_cpu: Option<u16>,
}

/// The settings of a configuration read from `path`.
pub fn settings(cfg: &Config, path: &Path) -> Result<Settings, ParamsError> {
    Ok(Settings {
        params: params(cfg, path)?,
        port_guid: cfg.sm.port_guid.map(Guid),
        state_dir: cfg.sm.state_dir.clone(),
        reassign_lids: cfg.sm.reassign_lids,
        dump: cfg.dump.clone(),
        log: cfg.log.clone(),
        metrics: cfg.metrics.clone(),
        status: cfg.status.clone(),
        perfmgr: cfg.perfmgr.clone(),
        error_rate: cfg.health.error_rate,
        link_downed: cfg.health.link_downed,
        io_cpu: cfg.sm.io_cpu,
    })
}

/// The GUIDs of an OpenSM GUID file given by `key` (a configuration key or a flag); none
/// when unset. An empty file is an error, as a missing one is: either would silently mean
/// "detect".
pub fn guid_file(key: &'static str, path: Option<&Path>) -> Result<Vec<Guid>, ParamsError> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let guids =
        sm_routing::read_guid_file(path).map_err(|error| ParamsError::GuidFile { key, error })?;
    if guids.is_empty() {
        return Err(ParamsError::EmptyGuidFile {
            key,
            path: path.to_path_buf(),
        });
    }
    Ok(guids)
}

/// The core's parameters for a configuration read from `path`.
pub fn params(cfg: &Config, path: &Path) -> Result<Params, ParamsError> {
    for e in &cfg.routing.engines {
        if e != "auto" && sm_routing::engine(e).is_err() {
            return Err(ParamsError::Engine(e.clone()));
        }
    }
    let sm = &cfg.sm;
    let ms = std::time::Duration::from_millis;
    Ok(Params {
        lmc: sm.lmc,
        routing: cfg.routing.engines.join(","),
        routing_options: sm_routing::Options {
            adaptive: cfg.routing.adaptive,
            vl_budget: cfg.routing.vls,
            roots: guid_file("routing.roots_file", cfg.routing.roots_file.as_deref())?,
            compute_nodes: guid_file(
                "routing.compute_nodes_file",
                cfg.routing.compute_nodes_file.as_deref(),
            )?,
            ..sm_routing::Options::default()
        },
        smp_timeout: ms(u64::from(sm.smp_timeout_ms)),
        smp_retries: sm.smp_retries,
        max_outstanding: sm.max_outstanding_smps as usize,
        sweep_interval: ms(sm.sweep_interval_ms),
        sm_key: sm.sm_key,
        poll_interval: ms(u64::from(sm.sm_poll_interval_ms)),
        poll_retries: sm.sm_poll_retries,
        subnet_prefix: sm.subnet_prefix,
        m_key: sm.m_key,
        m_key_protect_bits: sm.m_key_protect_bits,
        m_key_lease_period: sm.m_key_lease_period,
        m_key_per_port: sm.m_key_per_port,
        force_link_speed: sm.force_link_speed,
        force_link_speed_ext: sm.force_link_speed_ext,
        reassign_lids: sm.reassign_lids,
        health: crate::core::HealthConfig {
            link_flaps: cfg.health.link_flaps,
            flap_window: ms(u64::from(cfg.health.flap_window_s) * 1000),
            disable_ports: cfg.health.disable_ports,
            trap_burst: cfg.health.trap_burst,
            trap_rate: cfg.health.trap_rate,
        },
        sm_priority: sm.sm_priority,
        max_op_vls: sm.max_op_vls,
        subnet_timeout: sm.subnet_timeout,
        switch_life_time: sm.packet_life_time,
        hoq_life: sm.head_of_queue_lifetime,
        leaf_hoq_life: sm.leaf_head_of_queue_lifetime,
        partitions: cfg.partitions.load(path)?,
        pkey_options: cfg.partitions.table_options(),
        qos: cfg.qos.clone(),
        // OpenSM's sa_key defaults to its sm_key.
        sa: crate::sa::SaConfig {
            sa_key: sm.sa_key.unwrap_or(sm.sm_key),
            ..crate::sa::SaConfig::default()
        },
        ..Params::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The shipped example: every key with its default.
    const EXAMPLE: &str = include_str!("../../ibsm.example.toml");

    /// A scratch directory for one test.
    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ibsm-config-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_sa_trusts_the_sm_key() {
        let mut cfg = Config::default();
        cfg.sm.sm_key = 0x77;
        let p = params(&cfg, Path::new("<test>")).unwrap();
        assert_eq!(p.sa.sa_key, 0x77);
        assert_eq!(p.sa.rmpp, crate::sa::RmppMode::Segment);
        cfg.sm.sa_key = Some(0x99);
        let p = params(&cfg, Path::new("<test>")).unwrap();
        assert_eq!((p.sa.sa_key, p.sm_key), (0x99, 0x77));
    }

    #[test]
    fn m_key_and_link_speed_reach_the_core() {
        let d = params(&Config::default(), Path::new("<test>")).unwrap();
        assert_eq!(
            (
                d.m_key_protect_bits,
                d.m_key_lease_period,
                d.force_link_speed
            ),
            (0, 0, 15)
        );
        let mut cfg = Config::default();
        cfg.sm.m_key_protect_bits = 2;
        cfg.sm.m_key_lease_period = 60;
        cfg.sm.force_link_speed = 3;
        let p = params(&cfg, Path::new("<test>")).unwrap();
        assert_eq!(
            (
                p.m_key_protect_bits,
                p.m_key_lease_period,
                p.force_link_speed
            ),
            (2, 60, 3)
        );
    }

    #[test]
    fn guid_files_fill_the_routing_options() {
        let dir = scratch("guids");
        let roots = dir.join("roots");
        let cns = dir.join("cns");
        std::fs::write(&roots, "# spines\n0x0002c90300000001\n0x0002c90300000002\n").unwrap();
        std::fs::write(&cns, "0x0002c90300001234\n").unwrap();
        let mut cfg = Config::default();
        cfg.routing.roots_file = Some(roots);
        cfg.routing.compute_nodes_file = Some(cns);
        let p = params(&cfg, Path::new("<test>")).unwrap();
        assert_eq!(
            p.routing_options.roots,
            vec![Guid(0x0002_c903_0000_0001), Guid(0x0002_c903_0000_0002)]
        );
        assert_eq!(
            p.routing_options.compute_nodes,
            vec![Guid(0x0002_c903_0000_1234)]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_bad_or_empty_guid_files_are_errors_naming_key_file_and_line() {
        let dir = scratch("bad-guids");
        let bad = dir.join("roots");
        std::fs::write(&bad, "0x1\nspine-1\n").unwrap();
        let empty = dir.join("empty");
        std::fs::write(&empty, "# nothing yet\n\n").unwrap();
        let missing = dir.join("missing");
        let err = |key: &str, file: &Path| {
            let mut cfg = Config::default();
            match key {
                "roots" => cfg.routing.roots_file = Some(file.to_path_buf()),
                _ => cfg.routing.compute_nodes_file = Some(file.to_path_buf()),
            }
            params(&cfg, Path::new("<test>")).unwrap_err().to_string()
        };
        let e = err("roots", &bad);
        assert!(
            e.starts_with(&format!(
                "routing.roots_file: {}:2: \"spine-1\"",
                bad.display()
            )),
            "{e}"
        );
        let e = err("cn", &missing);
        assert!(
            e.starts_with(&format!(
                "routing.compute_nodes_file: {}: ",
                missing.display()
            )),
            "{e}"
        );
        let e = err("roots", &empty);
        assert!(e.contains("lists no GUID"), "{e}");
        assert!(e.contains(&empty.display().to_string()), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every key the example shows, set or commented out, as `table.key`: a line
    /// `key = ...` or `# key = ...` in lower case, under the last `[table]` or `# [table]`.
    fn example_keys() -> BTreeSet<String> {
        let mut table = String::new();
        let mut keys = BTreeSet::new();
        for line in EXAMPLE.lines() {
            let t = line.strip_prefix("# ").unwrap_or(line).trim();
            if let Some(h) = t.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
                table = h.to_string();
                continue;
            }
            let Some((key, _)) = t.split_once(" = ") else {
                continue;
            };
            if !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                keys.insert(format!("{table}.{key}"));
            }
        }
        keys
    }

    /// Where a key shows: in the core's parameters, or in what the daemon does itself.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Shows {
        Params,
        Daemon,
        Both,
    }

    fn resolve(text: &str) -> (String, String) {
        let cfg = Config::from_toml_str(text, Path::new("case.toml"))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        let s = settings(&cfg, Path::new("case.toml")).unwrap_or_else(|e| panic!("{text}: {e}"));
        let params = format!("{:?}", s.params);
        let daemon = format!(
            "{:?}",
            (
                s.port_guid,
                s.state_dir,
                s.reassign_lids,
                s.dump,
                s.log,
                s.metrics,
                s.status,
                s.perfmgr,
                s.error_rate,
                s.link_downed,
                s.io_cpu
            )
        );
        (params, daemon)
    }

    /// Each key of the example, set to another value, changes the core's parameters or the
    /// daemon's own settings (and only the one it should); `tests/cli_config.rs` runs the
    /// daemon's keys end to end.
    #[test]
    fn every_key_of_the_example_changes_what_runs() {
        let dir = scratch("every-key");
        let file = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            format!("{:?}", p.to_str().unwrap())
        };
        let roots = file("roots", "0x0002000100000000\n");
        let cns = file("cns", "0x0001000000000001\n");
        let parts = file(
            "partitions.conf",
            "Default=0x7fff : ALL ;\nStorage=0x10 : ALL ;\n",
        );
        use Shows::{Both, Daemon, Params};
        let cases: Vec<(&str, String, Shows)> = vec![
            ("sm.port_guid", "port_guid = \"0x2\"".into(), Daemon),
            ("sm.io_cpu", "io_cpu = 1".into(), Daemon),
            ("sm.state_dir", "state_dir = \"/tmp/x\"".into(), Daemon),
            ("sm.lmc", "lmc = 2".into(), Params),
            ("sm.sm_priority", "sm_priority = 9".into(), Params),
            ("sm.sm_key", "sm_key = \"0x2\"".into(), Params),
            ("sm.sa_key", "sa_key = \"0x3\"".into(), Params),
            ("sm.m_key", "m_key = \"0x5\"".into(), Params),
            (
                "sm.m_key_protect_bits",
                "m_key_protect_bits = 1".into(),
                Params,
            ),
            ("sm.m_key_per_port", "m_key_per_port = true".into(), Params),
            (
                "sm.m_key_lease_period",
                "m_key_lease_period = 60".into(),
                Params,
            ),
            (
                "sm.subnet_prefix",
                "subnet_prefix = \"0xfe80000000000001\"".into(),
                Params,
            ),
            (
                "sm.sweep_interval_ms",
                "sweep_interval_ms = 0".into(),
                Params,
            ),
            (
                "sm.sm_poll_interval_ms",
                "sm_poll_interval_ms = 5".into(),
                Params,
            ),
            ("sm.sm_poll_retries", "sm_poll_retries = 1".into(), Params),
            ("sm.smp_timeout_ms", "smp_timeout_ms = 7".into(), Params),
            ("sm.smp_retries", "smp_retries = 0".into(), Params),
            (
                "sm.max_outstanding_smps",
                "max_outstanding_smps = 4".into(),
                Params,
            ),
            ("sm.subnet_timeout", "subnet_timeout = 10".into(), Params),
            (
                "sm.packet_life_time",
                "packet_life_time = 10".into(),
                Params,
            ),
            (
                "sm.head_of_queue_lifetime",
                "head_of_queue_lifetime = 10".into(),
                Params,
            ),
            (
                "sm.leaf_head_of_queue_lifetime",
                "leaf_head_of_queue_lifetime = 10".into(),
                Params,
            ),
            ("sm.max_op_vls", "max_op_vls = 2".into(), Params),
            ("sm.force_link_speed", "force_link_speed = 3".into(), Params),
            (
                "sm.force_link_speed_ext",
                "force_link_speed_ext = 31".into(),
                Params,
            ),
            ("sm.reassign_lids", "reassign_lids = true".into(), Both),
            ("routing.engines", "engines = [\"updn\"]".into(), Params),
            ("routing.vls", "vls = 4".into(), Params),
            (
                "routing.roots_file",
                format!("roots_file = {roots}"),
                Params,
            ),
            (
                "routing.compute_nodes_file",
                format!("compute_nodes_file = {cns}"),
                Params,
            ),
            ("routing.adaptive", "adaptive = true".into(), Params),
            ("partitions.file", format!("file = {parts}"), Params),
            (
                "partitions.text",
                "text = \"Default=0x7fff : ALL=limited ;\"".into(),
                Params,
            ),
            (
                "partitions.allow_both_pkeys",
                "allow_both_pkeys = true".into(),
                Params,
            ),
            (
                "partitions.enforcement",
                "enforcement = \"off\"".into(),
                Params,
            ),
            ("qos.enabled", "enabled = true".into(), Params),
            ("qos.max_vls", "max_vls = 8".into(), Params),
            ("qos.high_limit", "high_limit = 6".into(), Params),
            ("qos.vlarb_high", "vlarb_high = \"0:8\"".into(), Params),
            ("qos.vlarb_low", "vlarb_low = \"0:0,1:64\"".into(), Params),
            (
                "qos.sl2vl",
                "sl2vl = \"0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7\"".into(),
                Params,
            ),
            (
                "qos.optimized_sl2vl",
                "optimized_sl2vl = false".into(),
                Params,
            ),
            ("qos.ca.max_vls", "max_vls = 8".into(), Params),
            ("qos.ca.high_limit", "high_limit = 6".into(), Params),
            ("qos.ca.vlarb_high", "vlarb_high = \"0:4\"".into(), Params),
            (
                "qos.ca.vlarb_low",
                "vlarb_low = \"0:0,1:64\"".into(),
                Params,
            ),
            (
                "qos.ca.sl2vl",
                "sl2vl = \"0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7\"".into(),
                Params,
            ),
            ("dump.dir", "dir = \"/tmp/dumps\"".into(), Daemon),
            ("dump.write", "write = [\"topology\"]".into(), Daemon),
            ("log.level", "level = \"debug\"".into(), Daemon),
            ("log.file", "file = \"/tmp/ibsm.log\"".into(), Daemon),
            (
                "metrics.listen",
                "listen = \"127.0.0.1:9464\"".into(),
                Daemon,
            ),
            ("metrics.per_port", "per_port = true".into(), Daemon),
            (
                "status.socket",
                "socket = \"/tmp/ibsm.sock\"".into(),
                Daemon,
            ),
            ("perfmgr.enabled", "enabled = true".into(), Daemon),
            ("perfmgr.interval_s", "interval_s = 10".into(), Daemon),
            ("health.link_flaps", "link_flaps = 3".into(), Params),
            ("health.flap_window_s", "flap_window_s = 10".into(), Params),
            ("health.error_rate", "error_rate = 2.5".into(), Daemon),
            ("health.link_downed", "link_downed = 3".into(), Daemon),
            (
                "health.disable_ports",
                "disable_ports = true".into(),
                Params,
            ),
            ("health.trap_burst", "trap_burst = 5".into(), Params),
            ("health.trap_rate", "trap_rate = 2.0".into(), Params),
            (
                "status.event_log",
                "event_log = \"/tmp/events.jsonl\"".into(),
                Daemon,
            ),
        ];
        let listed: BTreeSet<String> = cases.iter().map(|c| c.0.to_string()).collect();
        assert_eq!(listed.len(), cases.len(), "a key listed twice");
        assert_eq!(
            listed,
            example_keys(),
            "every key of ibsm.example.toml needs a case here, and only those"
        );
        let defaults = resolve("");
        assert_eq!(resolve(""), defaults, "resolving is not deterministic");
        for (key, line, shows) in &cases {
            let (table, _) = key.rsplit_once('.').unwrap();
            let (params, daemon) = resolve(&format!("[{table}]\n{line}\n"));
            let changed = (params != defaults.0, daemon != defaults.1);
            let want = match shows {
                Params => (true, false),
                Daemon => (false, true),
                Both => (true, true),
            };
            assert_eq!(changed, want, "{key} (changed: params, daemon)");
        }
        // The other kinds of port take the same options as qos.ca.
        for kind in ["rtr", "sw0", "swe"] {
            let (params, _) = resolve(&format!("[qos.{kind}]\nmax_vls = 8\n"));
            assert_ne!(params, defaults.0, "qos.{kind}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn keys_not_in_the_example_are_refused_naming_them() {
        for (text, key) in [
            ("[sm]\nguid = \"0x2\"\n", "sm.guid"),
            (
                "[routing]\nroot_guid_file = \"/x\"\n",
                "routing.root_guid_file",
            ),
            ("[nosuch]\nx = 1\n", "nosuch"),
        ] {
            let e = Config::from_toml_str(text, Path::new("c.toml")).unwrap_err();
            let msg = e.to_string();
            assert!(msg.starts_with("c.toml:"), "{msg}");
            assert!(msg.contains("unknown field"), "{msg}");
            assert_eq!(e.key.as_deref(), Some(key), "{msg}");
        }
    }
}
