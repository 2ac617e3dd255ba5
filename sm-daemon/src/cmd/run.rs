//! `ibsm run`: the subnet manager. With `--sim` it brings up the in-process simulated fabric
//! (the bundled example when no topology is given); with `--umad` it runs on a kernel umad
//! port (real hardware, or ibsim through libumad2sim).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, bail};
use sm_core::config::Config;
use sm_core::fabric::{Fabric, NodeKind, PortIdx};
use sm_core::lid::LidStore;
use sm_core::read_topology_str;
use sm_daemon::core::{Event, Params, Sm, SweepReport};
use sm_daemon::ops::Ops;
use sm_daemon::perf::{PerfConfig, PerfMgr};
use sm_daemon::sa::{Requester, RmppMode};
use sm_daemon::transport::sim::SimDriver;
use sm_daemon::transport::umad::{self, Device, Outgoing};
use sm_mad::Guid;
use sm_sim::SimConfig;
use tokio::runtime::Runtime;
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::dumps::Dumps;

/// The bundled example fabric: a 2-level fat-tree of 12-port switches (72 hosts).
const EXAMPLE: &str = include_str!("../../fabrics/example.net");
/// What `--sim` without a value stands for.
const EXAMPLE_NAME: &str = "@example";

/// Arguments of `ibsm run`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Signals, without --once: SIGINT and SIGTERM stop the SM (LIDs and dumps saved), SIGUSR1
writes every dump at once, SIGHUP reads --config again (with the same flags over it): what
can change at once applies at the next sweep, keys that need a restart are named in the log,
and a file that does not read leaves the running configuration as it is.")]
pub(crate) struct Args {
    /// Run against the in-process simulated fabric built from TOPO (ibnetdiscover or ibsim
    /// net file); without TOPO, the bundled example fabric.
    #[arg(long, value_name = "TOPO", num_args = 0..=1, default_missing_value = EXAMPLE_NAME)]
    sim: Option<PathBuf>,
    /// Run on a kernel umad port: DEVICE or DEVICE:PORT (e.g. `mlx5_0:1`); without a value,
    /// the port whose GUID is the configuration's port_guid, else the first port whose link
    /// is up. Under ibsim, run with libumad2sim preloaded.
    #[arg(long, value_name = "DEVICE[:PORT]", num_args = 0..=1, default_missing_value = "",
          conflicts_with_all = ["sim", "sm_port", "seed", "loss"])]
    umad: Option<String>,
    /// How long the SM waits for the answer to one SMP before retrying it (milliseconds).
    /// Default: 50 on a umad port (ibsim answers in tens of microseconds), 200 simulated.
    #[arg(long, value_name = "MS")]
    smp_timeout_ms: Option<u64>,
    /// The port the SM runs on: a port GUID, or a node description in the topology.
    /// Default: the configuration's port_guid, else the first CA port with a link.
    #[arg(long)]
    sm_port: Option<String>,
    /// Exit after the subnet is up.
    #[arg(long)]
    once: bool,
    /// Print the sweep report: text or json.
    #[arg(long, value_name = "FORMAT")]
    report: Option<String>,
    /// The TOML configuration (see ibsm.example.toml); the flags below override it, and
    /// RUST_LOG, when set, overrides its [log] level.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Routing engine chain, e.g. `ftree,updn,minhop` (default: the configuration's, else
    /// auto: ftree on a clean fat-tree, layered on anything else). `--engine` is the same
    /// (as in `ibsm route`).
    #[arg(long, alias = "engine")]
    routing: Option<String>,
    /// LMC: 2^LMC LIDs per CA port (default 0).
    #[arg(long)]
    lmc: Option<u8>,
    /// SMInfo priority, 0-15: the highest SM on the subnet is master, the others stand by
    /// (default 0, or the configuration's sm_priority).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=15))]
    priority: Option<u8>,
    /// Keep the thread that drives the device on this CPU, with the threads it starts
    /// (under ibsim, libumad2sim's receiver: the two hand every MAD to each other, and on
    /// one CPU they do it without waking the other; routing threads stay free). Default:
    /// the configuration's io_cpu, else the scheduler's choice
    #[arg(long, value_name = "CPU", value_parser = clap::value_parser!(u16).range(0..=1023))]
    io_cpu: Option<u16>,
    /// Where the LID store (`guid2lid`) lives; loaded at start, saved when LIDs change.
    /// Default: the configuration's state_dir when --config is given, else nowhere.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Write the dumps here (overriding the configuration's [dump] dir) after every sweep
    /// and repair that changed them, and all of them whenever the daemon gets SIGUSR1: those
    /// [dump] write lists, else `opensm-lfts.dump` and `opensm-subnet.lst`; with them
    /// `guid2lid` and, with adaptive routing, `ibsm-ar-hints.dump`.
    #[arg(long)]
    dump_dir: Option<PathBuf>,
    /// Serve Prometheus metrics on this address (e.g. `127.0.0.1:9464`), overriding the
    /// configuration's [metrics] listen.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// --sim: skip the all-pairs delivery check (at exit, and with --run-for after every
    /// sweep: it traces every CA pair through the programmed fabric, seconds on tens of
    /// thousands of hosts); the report then has no `unreachable_pairs`.
    #[arg(long)]
    no_check: bool,
    /// Seed of the simulated fabric's fault injection.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Fraction of MADs the simulated fabric loses (0.0-1.0).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// A fault scenario for the simulated fabric (see `sm_sim::scenario` for the format).
    #[arg(long, value_name = "FILE", conflicts_with = "umad")]
    scenario: Option<PathBuf>,
    /// Run this long in virtual time (e.g. `200ms`) and report every sweep, instead of
    /// stopping at the first subnet up; for replaying scenarios.
    #[arg(long, value_name = "TIME", conflicts_with = "umad")]
    run_for: Option<String>,
    /// How long the bring-up may take before giving up (e.g. `60s`, `500ms`): the subnet
    /// must be up by then (virtual time with --sim, wall time with --umad). The error lists
    /// what is missing.
    #[arg(long, value_name = "TIME", default_value = "60s")]
    up_timeout: String,
}

/// The summary printed with `--report`.
#[derive(Debug, serde::Serialize)]
struct Report {
    sweep: u64,
    /// A heavy sweep, or a repair after traps (`false`).
    heavy: bool,
    /// What started the sweep (`start`, `trap 128 from GUID...`, `light sweep`, ...).
    trigger: String,
    /// A repair: wall time from the first trap's arrival to the last Set answered.
    recovery_ms: f64,
    lft_entries_moved: u64,
    /// Entries that had to move (see `SweepReport::lft_entries_moved_min`).
    lft_entries_moved_min: u64,
    lft_entries_restored: u64,
    /// Layered repairs: paths given another SL, and paths whose traffic on the SL their
    /// hosts hold could close a credit loop until they ask the SA again.
    paths_new_sl: u64,
    paths_exposed: u64,
    unrouted_switch_pairs: u64,
    /// How a repair routed: only what broke, or whole and why.
    reroute: String,
    subnet_up: bool,
    /// "master", or "standby" when another SM runs the subnet.
    sm_state: String,
    /// The master's port GUID, when standing by.
    master_guid: Option<String>,
    /// The SM's own LID (what every port's SMLid should say).
    sm_lid: u16,
    nodes: usize,
    switches: usize,
    cas: usize,
    routers: usize,
    links: usize,
    lids: usize,
    engine: String,
    engine_used: String,
    mads_sent: u64,
    /// The fewest SMPs the sweep could have sent (see `SweepReport::mads_min`).
    mads_min: u64,
    /// `mads_sent` over `mads_min`.
    mads_over_min: f64,
    mads_retried: u64,
    mads_lost: u64,
    lft_blocks_sent: u64,
    mft_blocks_sent: u64,
    switch_info_sets: u64,
    port_info_sets: u64,
    /// PortInfo Sets asking a host's SA clients to register again (a new master's first
    /// sweep).
    client_reregisters: u64,
    pkey_blocks_sent: u64,
    qos_sets: u64,
    sweep_ms: f64,
    discovery_ms: f64,
    routing_ms: f64,
    programming_ms: f64,
    wall_ms: f64,
    /// Wall time from the start of the run (the simulated fabric powered on, or the device
    /// opened) to the first subnet up.
    up_ms: Option<f64>,
    /// Wall time of the all-pairs check behind `unreachable_pairs`.
    check_ms: Option<f64>,
    /// CA-to-CA pairs (every LID) that cannot be delivered: traced through the programmed
    /// simulated fabric with `--sim` (each pair on the best partition both ends share),
    /// walked through the SM's own tables with `--umad`.
    unreachable_pairs: Option<u64>,
    /// Data VLs the programmed paths use (their SLs map one to one onto VLs).
    vls_used: u8,
    /// Cyclic components of the channel dependency graphs (one per VL) of the tables the SM
    /// programmed, with their SLs: above 0 they can deadlock.
    credit_loops: Option<u64>,
    errors: Vec<String>,
    /// GUIDs more than one device answered with: where the device kept is, where the
    /// others left out are.
    duplicate_guids: Vec<sm_daemon::core::DuplicateGuid>,
    /// Nodes that did not answer (GUID or where they are, description, what went
    /// unanswered): the subnet came up without them.
    unresponsive: Vec<sm_daemon::core::Unresponsive>,
    /// Ports left out of the subnet because their link kept going down (node GUID, port,
    /// why).
    unhealthy_ports: Vec<sm_daemon::core::UnhealthyPort>,
    /// Trap 256s (a port refused an SMP for its M_Key) since the SM started.
    bad_m_key_traps: u64,
    /// The scenario's probes sent so far (`--sim --run-for`), with what came back.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    probes: Vec<ProbeReport>,
}

/// A scenario's probe: an end port's SubnGet of another port's attribute.
#[derive(Debug, Clone, serde::Serialize)]
struct ProbeReport {
    /// `"description"[port]`, as a scenario names ports.
    from: String,
    to: String,
    attr: String,
    m_key: String,
    answered: bool,
    /// The answer's MAD status.
    status: Option<u16>,
    /// The answer's attribute, as `ibsm decode --json` names its fields.
    fields: Option<serde_json::Value>,
}

impl ProbeReport {
    fn list(sim: &sm_sim::Sim) -> Vec<ProbeReport> {
        let name = |p: sm_core::fabric::PortIdx| {
            let port = sim.port(p);
            format!("{:?}[{}]", sim.node(port.node).desc.as_string(), port.num)
        };
        sim.probes()
            .iter()
            .map(|p| {
                let decoded = p
                    .answer
                    .as_ref()
                    .and_then(|a| sm_mad::decode::decode(a).ok());
                ProbeReport {
                    from: name(p.from),
                    to: name(p.to),
                    attr: sm_mad::attr::SmpAttrId::from_raw_value(p.attr)
                        .name()
                        .map_or_else(|| format!("{:#06x}", p.attr), str::to_string),
                    m_key: format!("{:#018x}", p.m_key),
                    answered: p.answer.is_some(),
                    status: decoded.as_ref().map(|d| d.mad.status.0),
                    fields: decoded
                        .and_then(|d| d.records.into_iter().next())
                        .and_then(|b| serde_json::to_value(b).ok()),
                }
            })
            .collect()
    }
}

impl Report {
    fn new(r: &SweepReport, sm_lid: u16, wall_ms: f64) -> Report {
        let ms = |ns: u64| ns as f64 / 1e6;
        Report {
            sweep: r.sweep,
            heavy: r.heavy,
            trigger: r.trigger.clone(),
            recovery_ms: ms(r.recovery_ns),
            lft_entries_moved: r.lft_entries_moved,
            lft_entries_moved_min: r.lft_entries_moved_min,
            lft_entries_restored: r.lft_entries_restored,
            paths_new_sl: r.paths_new_sl,
            paths_exposed: r.paths_exposed,
            unrouted_switch_pairs: r.unrouted_switch_pairs,
            reroute: r.reroute.clone(),
            subnet_up: r.subnet_up,
            sm_state: r.sm_state.clone(),
            master_guid: None,
            sm_lid,
            nodes: r.nodes,
            switches: r.switches,
            cas: r.cas,
            routers: r.routers,
            links: r.links,
            lids: r.lids,
            engine: r.engine.clone(),
            engine_used: r.engine_used.clone(),
            mads_sent: r.mads_sent,
            mads_min: r.mads_min,
            mads_over_min: if r.mads_min > 0 {
                r.mads_sent as f64 / r.mads_min as f64
            } else {
                0.0
            },
            mads_retried: r.mads_retried,
            mads_lost: r.mads_lost,
            lft_blocks_sent: r.lft_blocks_sent,
            mft_blocks_sent: r.mft_blocks_sent,
            switch_info_sets: r.switch_info_sets,
            port_info_sets: r.port_info_sets,
            client_reregisters: r.client_reregisters,
            pkey_blocks_sent: r.pkey_blocks_sent,
            qos_sets: r.qos_sets,
            sweep_ms: ms(r.sweep_ns),
            discovery_ms: ms(r.discovery_ns),
            routing_ms: ms(r.routing_ns),
            programming_ms: ms(r.programming_ns),
            wall_ms,
            up_ms: None,
            check_ms: None,
            unreachable_pairs: None,
            vls_used: 1,
            credit_loops: None,
            errors: r.errors.clone(),
            duplicate_guids: r.duplicate_guids.clone(),
            unresponsive: r.unresponsive.clone(),
            unhealthy_ports: r.unhealthy_ports.clone(),
            bad_m_key_traps: 0,
            probes: Vec::new(),
        }
    }
}

fn monotonic_ns() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The SM's port: `--sm-port`, else the configuration's `port_guid`, else the first CA
/// port with a link.
fn find_sm_port(f: &Fabric, want: Option<&str>, setup: &Setup) -> anyhow::Result<PortIdx> {
    let linked = |p: &PortIdx| f.port(*p).remote.is_some();
    if let (None, Some(g)) = (want, setup.port_guid) {
        return f.port_by_guid(g).with_context(|| {
            format!(
                "{}: sm.port_guid {g}: no port of the fabric has this GUID",
                setup.config.display()
            )
        });
    }
    match want {
        None => f
            .cas()
            .flat_map(|n| f.node_ports(n))
            .find(linked)
            .context("the topology has no CA port with a link to run the SM on"),
        Some(s) => {
            let by_guid = s
                .strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .and_then(|g| f.port_by_guid(sm_mad::Guid(g)));
            if let Some(p) = by_guid {
                return Ok(p);
            }
            let node = f
                .nodes()
                .iter()
                .position(|n| n.description == s)
                .with_context(|| {
                    format!("--sm-port {s}: no port GUID or node description matches")
                })?;
            let n = sm_core::NodeIdx(node as u32);
            let p = if f.node(n).kind == NodeKind::Switch {
                f.port_of(n, 0)
            } else {
                f.node_ports(n).find(linked)
            };
            p.with_context(|| format!("--sm-port {s}: the node has no usable port"))
        }
    }
}

fn load_topology(sim: &Path) -> anyhow::Result<Fabric> {
    if sim.as_os_str() == EXAMPLE_NAME {
        return Ok(read_topology_str(EXAMPLE, Path::new("<bundled example>"))?.fabric);
    }
    Ok(sm_core::read_topology(sim)?.fabric)
}

/// Persists the unhealthy ports in the state directory; a failure is logged, not fatal (the
/// list is kept in memory and written again at the next change).
fn save_unhealthy(args: &Args, sm: &Sm) {
    let Some(d) = &args.state_dir else { return };
    let path = d.join(sm_daemon::ops::UNHEALTHY_FILE);
    let written = std::fs::create_dir_all(d)
        .and_then(|()| sm_daemon::ops::write_unhealthy(&path, &sm.unhealthy_ports()));
    if let Err(e) = written {
        tracing::error!(file = %path.display(), "unhealthy ports not saved: {e}");
    }
}

/// The M_Keys ports hold (`guid2mkey`) and who is behind which port (`neighbors`) from the
/// state directory: a bad line is a warning and skipped, a file that cannot be read is
/// logged and taken as empty.
fn load_keys(d: &Path) -> (sm_core::mkey::KeyStore, sm_core::mkey::Neighbors) {
    use sm_core::mkey::{KeyStore, Neighbors};
    let read = |name: &str| {
        let path = d.join(name);
        match std::fs::read(&path) {
            Ok(b) => Some((String::from_utf8_lossy(&b).into_owned(), path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                tracing::error!(file = %path.display(), "not read: {e}");
                None
            }
        }
    };
    let keys = read(MKEY_FILE).map_or_else(KeyStore::default, |(text, path)| {
        let (k, bad) = KeyStore::from_guid2mkey(&text, &path);
        for e in bad {
            tracing::warn!("{e}; line skipped");
        }
        k
    });
    let neighbors = read(NEIGHBORS_FILE).map_or_else(Neighbors::default, |(text, path)| {
        let (n, bad) = Neighbors::from_text(&text, &path);
        for e in bad {
            tracing::warn!("{e}; line skipped");
        }
        n
    });
    (keys, neighbors)
}

const MKEY_FILE: &str = "guid2mkey";
const NEIGHBORS_FILE: &str = "neighbors";

/// Persists the M_Key stores; a failure is logged, not fatal (they are written again at
/// the next change, and the SM learns keys again from the ports).
fn save_keys(args: &Args, sm: &Sm) {
    let Some(d) = &args.state_dir else { return };
    let (keys, neighbors) = sm.key_stores();
    let written = std::fs::create_dir_all(d)
        .and_then(|()| sm_core::state_file::replace(&d.join(MKEY_FILE), &keys.to_guid2mkey()))
        .and_then(|()| sm_core::state_file::replace(&d.join(NEIGHBORS_FILE), &neighbors.to_text()));
    if let Err(e) = written {
        tracing::error!(dir = %d.display(), "M_Key stores not saved: {e}");
    }
}

/// Acts on what admins asked through the status socket.
fn run_commands(ops: &mut Option<OpsHook>, sm: &mut Sm, now: sm_daemon::core::Instant) {
    let Some(o) = ops else { return };
    let commands = match o.shared.lock() {
        Ok(mut x) => x.take_commands(),
        Err(_) => return,
    };
    for c in commands {
        match c {
            sm_daemon::ops::Command::Clear { node, port } => {
                sm.clear_unhealthy(now, node, port);
            }
        }
    }
}

/// Set while the LID store's last save failed: it is tried again after every sweep.
static LIDS_UNSAVED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Saves the LID store while the SM runs: a failure (full disk, read-only directory) is
/// logged and tried again after the next sweeps, never a reason to stop a running master
/// (OpenSM warns and goes on too); the store in memory is whole either way.
fn keep_lids(args: &Args, sm: &Sm) {
    use std::sync::atomic::Ordering;
    match save_lids(args, sm) {
        Ok(()) => {
            if LIDS_UNSAVED.swap(false, Ordering::Relaxed) {
                tracing::info!("LIDs saved again");
            }
        }
        Err(e) => {
            if !LIDS_UNSAVED.swap(true, Ordering::Relaxed) {
                tracing::error!("{e:#}; the SM runs on and tries again after each sweep");
            }
        }
    }
}

/// After a sweep: the LID store again, if its last save failed.
fn retry_lids(args: &Args, sm: &Sm) {
    if LIDS_UNSAVED.load(std::sync::atomic::Ordering::Relaxed) {
        keep_lids(args, sm);
    }
}

fn save_lids(args: &Args, sm: &Sm) -> anyhow::Result<()> {
    if let Some(d) = &args.state_dir {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        let path = d.join("guid2lid");
        sm.lid_store()
            .save(&path)
            .with_context(|| format!("saving {}", path.display()))?;
    }
    Ok(())
}

/// Keeps the SM running in real time until SIGINT or SIGTERM.
fn serve(
    args: &Args,
    rt: &Runtime,
    hup: &mut Signal,
    driver: &mut SimDriver,
    dumps: &mut Option<Dumps>,
    ops: &mut Option<OpsHook>,
) -> anyhow::Result<()> {
    rt.block_on(async {
        let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
        let mut usr1 = signal(SignalKind::user_defined1()).context("installing SIGUSR1 handler")?;
        let start = tokio::time::Instant::now();
        let base = driver.now();
        tracing::info!("subnet up; sweeping until SIGINT/SIGTERM");
        loop {
            let vnow = base + start.elapsed().as_nanos() as u64;
            driver.advance_to(vnow);
            while let Some(e) = driver.sm.poll_event() {
                ops_event(ops, &driver.sm, &e);
                match e {
                    Event::LidsChanged => keep_lids(args, &driver.sm),
                    Event::HealthChanged => save_unhealthy(args, &driver.sm),
                    Event::KeysChanged => save_keys(args, &driver.sm),
                    Event::SweepDone(_) => {
                        retry_lids(args, &driver.sm);
                        write_dumps_serving(dumps, &driver.sm, false);
                    }
                    _ => {}
                }
            }
            if let Some(o) = ops {
                o.tick(&driver.sm);
                if let (Some(p), Ok(mut x)) = (driver.perf.as_ref(), o.shared.lock()) {
                    x.perf_sweep(p);
                }
            }
            let vnow = driver.now();
            run_commands(
                ops,
                &mut driver.sm,
                sm_daemon::core::Instant::from_nanos(vnow),
            );
            // At least every 100 ms, for the status and metrics.
            let next = driver
                .next_deadline()
                .unwrap_or(u64::MAX)
                .min(vnow + 100_000_000);
            let wake = start + std::time::Duration::from_nanos(next.saturating_sub(base));
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
                _ = usr1.recv() => dump_on_request(dumps, &driver.sm),
                _ = hup.recv() => {
                    let now = sm_daemon::core::Instant::from_nanos(driver.now());
                    reload(args, &mut driver.sm, now, ops);
                }
            }
        }
        tracing::info!("shutting down");
        anyhow::Ok(())
    })
}

/// A current-thread runtime for the signal handlers and the real-time loop.
fn runtime() -> anyhow::Result<Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
}

/// OpenSM admins send SIGHUP to reload the configuration: it must never end the SM.
fn hangup_handler(rt: &Runtime) -> anyhow::Result<Signal> {
    let _rt = rt.enter();
    signal(SignalKind::hangup()).context("installing SIGHUP handler")
}

/// SIGHUP: the configuration file read again (with the same flags over it) and what can
/// change while running applied; a file that does not read is refused with its line, and
/// the running configuration stays.
fn reload(args: &Args, sm: &mut Sm, now: sm_daemon::core::Instant, ops: &mut Option<OpsHook>) {
    let outcome = match reload_params(args) {
        Err(e) => {
            tracing::error!("SIGHUP: {e:#}; the running configuration stays");
            format!("refused: {e:#}")
        }
        Ok(None) => {
            tracing::info!("SIGHUP: no --config to read again");
            "nothing to reload: no --config".into()
        }
        Ok(Some(p)) => {
            let r = sm.reconfigure(now, &p);
            for k in &r.needs_restart {
                tracing::warn!("SIGHUP: {k} changed; it takes effect at the next start");
            }
            let msg = if r.applied.is_empty() {
                "no change that applies while running".to_string()
            } else {
                format!("applied: {}", r.applied.join(", "))
            };
            tracing::info!("SIGHUP: configuration read again; {msg}");
            if r.needs_restart.is_empty() {
                msg
            } else {
                format!("{msg}; at the next start: {}", r.needs_restart.join(", "))
            }
        }
    };
    if let Some(o) = ops {
        if let Ok(mut x) = o.shared.lock() {
            x.reloaded(outcome);
        }
    }
}

/// The flags that override the configuration file.
fn flags_over(args: &Args, cfg: &mut Config) {
    if let Some(r) = &args.routing {
        cfg.routing.engines = r.split(',').map(|s| s.trim().to_string()).collect();
    }
    if let Some(l) = args.lmc {
        cfg.sm.lmc = l;
    }
    if let Some(p) = args.priority {
        cfg.sm.sm_priority = p;
    }
    if let Some(c) = args.io_cpu {
        cfg.sm.io_cpu = Some(c);
    }
}

/// The parameters of the configuration file read again, the run's flags over it.
fn reload_params(args: &Args) -> anyhow::Result<Option<Params>> {
    let Some(path) = &args.config else {
        return Ok(None);
    };
    let mut cfg = Config::load(path)?;
    flags_over(args, &mut cfg);
    let s = sm_daemon::config::settings(&cfg, path)
        .with_context(|| format!("configuration {}", path.display()))?;
    Ok(Some(s.params))
}

/// After a heavy sweep: the dumps that changed.
fn write_dumps(dumps: &mut Option<Dumps>, sm: &Sm) -> anyhow::Result<()> {
    if let Some(d) = dumps {
        d.write(sm, false)?;
    }
    Ok(())
}

/// While serving: the dumps that changed (all with `force`), written beside the SM (it
/// goes on repairing). A dump that cannot be written is logged, and the SM keeps the
/// subnet running.
fn write_dumps_serving(dumps: &mut Option<Dumps>, sm: &Sm, force: bool) {
    if let Some(d) = dumps {
        d.write_later(sm, force);
    }
}

/// SIGUSR1: every dump, now.
fn dump_on_request(dumps: &mut Option<Dumps>, sm: &Sm) {
    if dumps.is_none() {
        tracing::warn!("SIGUSR1: no dumps asked for (--dump-dir or [dump] write)");
    }
    write_dumps_serving(dumps, sm, true);
}

/// Pairs the tracer cannot deliver in the simulated fabric as the SM programmed it.
fn unreachable_traced(driver: &SimDriver) -> u64 {
    let all = driver.sim.check_all_pairs(&sm_sim::trace::AllPairsOptions {
        pkey: sm_sim::trace::PKeyChoice::BestShared,
        ..sm_sim::trace::AllPairsOptions::default()
    });
    all.pairs - all.delivered
}

/// Pairs the SM's own tables do not deliver, walked on its model of the fabric, and their
/// credit loops: one validation for both, it walks every destination's tree.
fn checks_in_tables(sm: &Sm) -> (Option<u64>, Option<u64>) {
    let Some(plan) = sm.plan() else {
        return (None, None);
    };
    let Ok(topo) = sm_routing::Topo::new(&plan.fabric) else {
        return (None, None);
    };
    let opts = sm_routing::ValidateOptions {
        max_failures: 0,
        ..sm_routing::ValidateOptions::default()
    };
    let v = validate_plan(&topo, plan, &opts);
    (Some(v.unreachable_pairs), Some(v.credit_loops))
}

/// Credit loops in the SM's own tables, per VL with the routes' SLs (the SL-to-VL tables
/// programmed map SL `i` to VL `i`).
fn credit_loops_in_tables(sm: &Sm) -> Option<u64> {
    let plan = sm.plan()?;
    let topo = sm_routing::Topo::new(&plan.fabric).ok()?;
    let opts = sm_routing::ValidateOptions {
        max_failures: 0,
        ..sm_routing::ValidateOptions::default()
    };
    Some(validate_plan(&topo, plan, &opts).credit_loops)
}

/// The plan's tables validated where they are (a copy would be 160 MB at 44,544 LIDs).
fn validate_plan(
    topo: &sm_routing::Topo<'_>,
    plan: &sm_daemon::core::Plan,
    opts: &sm_routing::ValidateOptions,
) -> sm_routing::Validation {
    sm_routing::validate_tables(
        topo,
        sm_routing::Tables::Chunked(&plan.lfts),
        plan.sl.as_ref(),
        plan.engine,
        opts,
    )
}

/// An integer with thousands separators.
fn grouped(n: i128) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// One value of the report as people read it: no quotes, `-` for nothing, durations in ms
/// with one decimal, counts grouped by thousands.
fn text_value(key: &str, v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => "-".into(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::String(s) if s.is_empty() => "-".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) if key.ends_with("_ms") => format!("{} ms", grouped(i.into())),
            (Some(i), _) => grouped(i.into()),
            (None, Some(f)) if key.ends_with("_ms") => format!("{f:.1} ms"),
            (None, Some(f)) => format!("{f:.3}"),
            _ => n.to_string(),
        },
        Value::Array(a) if a.is_empty() => "none".into(),
        Value::Array(a) => a
            .iter()
            .map(|x| text_value("", x))
            .collect::<Vec<_>>()
            .join("; "),
        Value::Object(m) => m
            .iter()
            .map(|(k, x)| format!("{k}={}", text_value(k, x)))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// A report as aligned `key  value` lines.
fn text_report(v: &serde_json::Value) -> String {
    let serde_json::Value::Object(m) = v else {
        return format!("{v}\n");
    };
    let width = m.keys().map(String::len).max().unwrap_or(0);
    let mut out = String::new();
    for (k, x) in m {
        out.push_str(&format!("{k:<width$}  {}\n", text_value(k, x)));
    }
    out
}

/// Checks the options both transports share.
fn check_args(args: &Args) -> anyhow::Result<()> {
    if let Some(l) = args.lmc {
        if l > 7 {
            bail!("--lmc {l} is out of range 0..=7");
        }
    }
    if let Some(r) = &args.routing {
        for name in r.split(',').map(str::trim) {
            if name != "auto" {
                sm_routing::engine(name).with_context(|| format!("--routing {r}"))?;
            }
        }
    }
    if args.smp_timeout_ms == Some(0) {
        bail!("--smp-timeout-ms must be at least 1");
    }
    Ok(())
}

/// The remembered LIDs; with `reassign_lids`, none (the new store is saved as usual).
fn load_lids(args: &Args, setup: &Setup) -> anyhow::Result<LidStore> {
    let Some(d) = &args.state_dir else {
        return Ok(LidStore::new());
    };
    let path = d.join("guid2lid");
    if setup.reassign_lids {
        tracing::info!(
            "sm.reassign_lids: not loading {}; every port gets a fresh LID",
            path.display()
        );
        return Ok(LidStore::new());
    }
    // A bad line is skipped with a warning: the ports it named get fresh LIDs, the rest
    // keep theirs (OpenSM warns and goes on too).
    let text = match std::fs::read(&path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LidStore::new()),
        Err(e) => {
            tracing::error!("{}: {e}; every port gets a LID afresh", path.display());
            return Ok(LidStore::new());
        }
    };
    let (store, bad) = LidStore::from_guid2lid_lenient(&text, &path);
    for e in &bad {
        tracing::warn!("{e}; line skipped");
    }
    Ok(store)
}

/// What a run takes from the configuration file (or the defaults) and the flags.
struct Setup {
    params: Params,
    /// `[sm] port_guid`, unless a flag names the port.
    port_guid: Option<Guid>,
    reassign_lids: bool,
    /// The configuration file, or `<defaults>`, for messages.
    config: PathBuf,
    dumps: Option<Dumps>,
    /// Status, events and metrics, when a socket, an event log or metrics are asked for.
    ops: Option<OpsHook>,
    /// `[perfmgr]`: port counters (with --umad).
    perfmgr: sm_core::config::PerfMgrConfig,
    /// `[health] error_rate` and `link_downed`.
    thresholds: Thresholds,
}

/// When a port's counters make it unhealthy (0: never).
#[derive(Debug, Clone, Copy, Default)]
struct Thresholds {
    error_rate: f64,
    link_downed: u32,
}

impl Thresholds {
    /// Ports the last counter sweep found over a threshold, with why.
    fn crossed(&self, p: &PerfMgr) -> Vec<(sm_mad::Guid, u8, String)> {
        let mut out = Vec::new();
        let Some((_, n)) = p.last_sweep() else {
            return out;
        };
        // Only ports that sweep read: one left out since keeps its old rate.
        for (&(node, port), s) in p.stats().iter().filter(|(_, s)| s.read_in == n) {
            if self.error_rate > 0.0 && s.error_rate > self.error_rate {
                let why = format!(
                    "{:.1} errors per second (threshold {})",
                    s.error_rate, self.error_rate
                );
                out.push((node, port, why));
            } else if self.link_downed > 0 && s.link_downed_step >= u64::from(self.link_downed) {
                let why = format!(
                    "link went down {} times between two counter reads (threshold {})",
                    s.link_downed_step, self.link_downed
                );
                out.push((node, port, why));
            }
        }
        out
    }
}

/// What the driver loops tell the status socket and the metrics.
struct OpsHook {
    shared: Arc<Mutex<Ops>>,
    _servers: sm_daemon::ops::Servers,
    last: Instant,
}

impl OpsHook {
    /// The servers a run asks for: metrics on `listen`, the status socket and event log
    /// (from the configuration, else in the state directory); none with `--once`, which
    /// exits as soon as the subnet is up.
    fn start(
        args: &Args,
        listen: Option<std::net::SocketAddr>,
        status: &sm_core::config::StatusConfig,
        priority: u8,
        per_port: bool,
    ) -> anyhow::Result<Option<OpsHook>> {
        if args.once || args.run_for.is_some() {
            return Ok(None);
        }
        let in_state = |name: &str| args.state_dir.as_ref().map(|d| d.join(name));
        let socket = status.socket.clone().or_else(|| in_state("ibsm.sock"));
        let events = status
            .event_log
            .clone()
            .or_else(|| in_state("events.jsonl"));
        if listen.is_none() && socket.is_none() && events.is_none() {
            return Ok(None);
        }
        // What cannot be made is left out, loudly: the SM runs without it.
        let usable = |p: Option<PathBuf>| {
            let p = p?;
            let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
            match dir.map(std::fs::create_dir_all) {
                Some(Err(e)) => {
                    tracing::error!("{}: {e}; running without it", p.display());
                    None
                }
                _ => Some(p),
            }
        };
        let (socket, events) = (usable(socket), usable(events));
        let ops = match Ops::new(priority, events.as_deref()) {
            Ok(o) => o,
            Err(e) => {
                tracing::error!("{e}; running without an event log");
                Ops::new(priority, None)?
            }
        };
        let ops = if per_port {
            ops.with_port_metrics()
        } else {
            ops
        };
        let shared = Arc::new(Mutex::new(ops));
        // The SM runs without what cannot be served (a port or socket in use), loudly.
        let mut want = (listen, socket.clone());
        let servers = loop {
            match sm_daemon::ops::serve(Arc::clone(&shared), want.0, want.1.as_deref()) {
                Ok(s) => break s,
                Err(e) => {
                    tracing::error!("{e}; running without it");
                    match e {
                        sm_daemon::ops::ServeError::Metrics { .. } => want.0 = None,
                        sm_daemon::ops::ServeError::Socket { .. } => want.1 = None,
                        _ => return Err(e.into()),
                    }
                }
            }
        };
        if let Some(a) = servers.metrics_addr {
            tracing::info!("metrics at http://{a}/metrics");
        }
        if let Some(p) = &want.1 {
            tracing::info!(socket = %p.display(), "status socket");
        }
        Ok(Some(OpsHook {
            shared,
            _servers: servers,
            last: Instant::now(),
        }))
    }

    /// After one of the core's events.
    fn event(&mut self, sm: &Sm, e: &Event) {
        let Ok(mut o) = self.shared.lock() else {
            return;
        };
        match e {
            Event::SweepDone(r) => o.observe(sm, Some(r)),
            Event::Trap { .. } => o.trap(),
            _ => o.observe(sm, None),
        }
        self.last = Instant::now();
    }

    /// Between events, at most every 100 ms: counters and the SM state.
    fn tick(&mut self, sm: &Sm) {
        if self.last.elapsed() < std::time::Duration::from_millis(100) {
            return;
        }
        if let Ok(mut o) = self.shared.lock() {
            o.observe(sm, None);
        }
        self.last = Instant::now();
    }
}

/// Tells the ops hook, if there is one.
fn ops_event(ops: &mut Option<OpsHook>, sm: &Sm, e: &Event) {
    if let Some(o) = ops {
        o.event(sm, e);
    }
}

/// The configuration file, or the defaults and `<defaults>` for its name.
fn load_config(args: &Args) -> anyhow::Result<(Config, PathBuf)> {
    Ok(match &args.config {
        Some(p) => (Config::load(p)?, p.clone()),
        None => (Config::default(), PathBuf::from("<defaults>")),
    })
}

/// The configuration file (or the defaults), then the flags; `smp_timeout_ms` is the
/// transport's default when neither sets one. A `--config` also gives the state directory
/// when `--state-dir` does not.
fn setup(
    args: &mut Args,
    (mut cfg, path): (Config, PathBuf),
    smp_timeout_ms: u64,
) -> anyhow::Result<Setup> {
    flags_over(args, &mut cfg);
    if args.state_dir.is_none() && args.config.is_some() {
        args.state_dir = Some(cfg.sm.state_dir.clone());
    }
    let s = sm_daemon::config::settings(&cfg, &path)
        .with_context(|| format!("configuration {}", path.display()))?;
    let mut p = s.params;
    let ms = match (args.smp_timeout_ms, args.config.is_some()) {
        (Some(ms), _) => ms,
        (None, true) => cfg.sm.smp_timeout_ms as u64,
        (None, false) => smp_timeout_ms,
    };
    p.smp_timeout = std::time::Duration::from_millis(ms);
    p.stopwatch = Some(monotonic_ns);
    if let Some(d) = &args.state_dir {
        p.unhealthy = sm_daemon::ops::read_unhealthy(&d.join(sm_daemon::ops::UNHEALTHY_FILE))
            .unwrap_or_else(|e| {
                tracing::error!("{e}; starting with no port marked unhealthy");
                Vec::new()
            });
        for u in &p.unhealthy {
            tracing::info!(node = %u.node, port = u.port, reason = %u.reason, "unhealthy port kept out");
        }
        (p.m_keys, p.neighbors) = load_keys(d);
    }
    let dumps = Dumps::new(args.dump_dir.as_deref(), &s.dump);
    let listen = args.metrics.or(s.metrics.listen);
    let ops = OpsHook::start(args, listen, &s.status, p.sm_priority, s.metrics.per_port)?;
    if let Some(cpu) = s.io_cpu {
        let key = if args.io_cpu.is_some() {
            "--io-cpu".to_string()
        } else {
            format!("{}: sm.io_cpu", path.display())
        };
        pin_io(cpu).with_context(|| format!("{key} = {cpu}"))?;
    }
    Ok(Setup {
        params: p,
        port_guid: s.port_guid,
        reassign_lids: s.reassign_lids,
        config: path,
        dumps,
        ops,
        perfmgr: s.perfmgr,
        thresholds: Thresholds {
            error_rate: s.error_rate,
            link_downed: s.link_downed,
        },
    })
}

/// Keeps this thread, which drives the device, and the threads it starts from now on on
/// `cpu`. The routing threads are started first, so they stay free.
fn pin_io(cpu: u16) -> anyhow::Result<()> {
    let _ = sm_routing::rayon_threads();
    umad::pin_thread(usize::from(cpu))
        .context("this process may not run there (sched_setaffinity)")?;
    tracing::info!(cpu, "the thread that drives the device kept on one CPU");
    Ok(())
}

/// What a run measured for the report beyond the sweep's own figures.
#[derive(Debug, Clone, Copy, Default)]
struct Marks {
    up_ms: Option<f64>,
    check_ms: Option<f64>,
    unreachable: Option<u64>,
    /// Counted with the unreachable pairs when that check walked the tables anyway.
    credit_loops: Option<u64>,
}

/// The end of a run, the same for every transport: LIDs saved, dumps written, the report
/// printed, and an error when the subnet did not come up.
fn finish(
    args: &Args,
    sm: &Sm,
    dumps: &mut Option<Dumps>,
    last: Option<SweepReport>,
    wall: Instant,
    must_be_up: bool,
    marks: Marks,
) -> anyhow::Result<()> {
    save_lids(args, sm)?;
    let wall_ms = wall.elapsed().as_secs_f64() * 1e3;
    let Some(r) = last else {
        if must_be_up {
            bail!("the SM did not finish a sweep");
        }
        return Ok(());
    };
    write_dumps(dumps, sm)?;
    let mut report = Report::new(&r, sm.own_lid().0, wall_ms);
    report.bad_m_key_traps = sm.bad_m_key_traps();
    report.master_guid = sm.master().map(|m| m.guid.to_string());
    report.unreachable_pairs = marks.unreachable;
    report.credit_loops = marks.credit_loops.or_else(|| credit_loops_in_tables(sm));
    report.vls_used = sm.plan().and_then(|p| p.vls_used()).unwrap_or(1);
    let deadlock = report.credit_loops.filter(|&n| n > 0).map(|n| {
        format!(
            "the tables the SM programmed can deadlock: {n} credit loop(s) with routing \
             engine {}; route with a deadlock-free engine (auto, layered, updn, ftree)",
            report.engine_used
        )
    });
    if let Some(msg) = &deadlock {
        tracing::error!("{msg}");
    }
    report.up_ms = marks.up_ms;
    report.check_ms = marks.check_ms;
    match args.report.as_deref() {
        None => {}
        Some("json") => println!("{}", serde_json::to_string_pretty(&report)?),
        Some("text") => print!("{}", text_report(&serde_json::to_value(&report)?)),
        Some(other) => bail!("--report {other}: expected text or json"),
    }
    let standby = r.sm_state == "standby";
    if must_be_up && !r.subnet_up && !standby {
        bail!("subnet not up: {}", missing(&r));
    }
    // Up without what it could not take in (a device with a duplicated GUID): a fault of
    // the fabric that --once must not pass over.
    if args.once && !standby && !r.errors.is_empty() {
        bail!("subnet up with errors: {}", r.errors.join("; "));
    }
    if let (true, Some(msg)) = (args.once, deadlock) {
        bail!(msg);
    }
    Ok(())
}

/// What kept a sweep from bringing the subnet up, for the error.
fn missing(r: &SweepReport) -> String {
    let mut parts: Vec<String> = r.errors.clone();
    for u in &r.unresponsive {
        parts.push(format!(
            "{} {:?} did not answer {}",
            u.node,
            u.description,
            u.what.join(", ")
        ));
    }
    if parts.is_empty() {
        parts.push("the sweep did not finish".into());
    }
    parts.join("; ")
}

/// `--up-timeout`.
fn up_timeout(args: &Args) -> anyhow::Result<std::time::Duration> {
    let ns = sm_sim::scenario::parse_time(&args.up_timeout)
        .map_err(|e| anyhow::anyhow!("--up-timeout {}: {e}", args.up_timeout))?;
    Ok(std::time::Duration::from_nanos(ns))
}

pub(crate) fn run(mut args: Args) -> anyhow::Result<()> {
    let (cfg, path) = load_config(&args)?;
    crate::logging::init(&cfg.log, &path)?;
    if let Some(r) = args.report.as_deref() {
        if r != "json" && r != "text" {
            bail!("--report {r}: expected text or json");
        }
    }
    if let Some(spec) = args.umad.clone() {
        return run_umad(&mut args, (cfg, path), &spec);
    }
    let Some(topo) = args.sim.clone() else {
        bail!("ibsm run needs a fabric: --umad [DEVICE[:PORT]] or --sim [TOPO]");
    };
    if !(0.0..=1.0).contains(&args.loss) {
        bail!("--loss {} is not a fraction between 0 and 1", args.loss);
    }
    check_args(&args)?;
    // From the start: a SIGHUP during bring-up must not end the SM either.
    let rt = runtime()?;
    let mut hup = hangup_handler(&rt)?;
    let setup = setup(&mut args, (cfg, path), 200)?;
    let fabric = load_topology(&topo)?;
    let sm_port = find_sm_port(&fabric, args.sm_port.as_deref(), &setup)?;
    let lids = load_lids(&args, &setup)?;
    let params = setup.params;
    let mut dumps = setup.dumps;
    let mut ops = setup.ops;
    let run_for = args
        .run_for
        .as_deref()
        .map(|t| sm_sim::scenario::parse_time(t).map_err(|e| anyhow::anyhow!("--run-for {t}: {e}")))
        .transpose()?;
    let cfg = SimConfig {
        seed: args.seed,
        faults: sm_sim::Faults {
            loss: args.loss,
            ..sm_sim::Faults::default()
        },
        ..SimConfig::default()
    };
    let wall = Instant::now();
    let perf_cfg = setup.perfmgr.enabled.then(|| PerfConfig {
        interval: std::time::Duration::from_secs(u64::from(setup.perfmgr.interval_s.max(1))),
        timeout: params.smp_timeout,
        ..PerfConfig::default()
    });
    let mut driver = SimDriver::new(&fabric, sm_port, params, lids, cfg);
    driver.perf = perf_cfg.map(PerfMgr::new);
    if let Some(path) = &args.scenario {
        let sc = sm_sim::scenario::Scenario::read(path)?;
        driver.sim.load_scenario(&sc)?;
        // A scenario's `reload FILE` names a file beside the scenario, read as SIGHUP
        // reads --config: the run's flags over it.
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let flags = Args {
            config: None,
            ..args.clone()
        };
        driver.reloader = Some(Box::new(move |file: &str| {
            let path = base.join(file);
            let mut cfg = Config::load(&path).map_err(|e| format!("{e:#}"))?;
            flags_over(&flags, &mut cfg);
            sm_daemon::config::params(&cfg, &path).map_err(|e| format!("{e:#}"))
        }));
    }
    driver.start();
    if let Some(limit) = run_for {
        return replay(&args, &mut driver, &mut dumps, limit, wall);
    }
    // Bring-up runs in fast virtual time, until the subnet is up or --up-timeout passes.
    let up_timeout = up_timeout(&args)?;
    let deadline = driver.now() + up_timeout.as_nanos() as u64;
    let mut last = None;
    let mut marks = Marks::default();
    while let Some(e) = driver.run_until(deadline.saturating_sub(driver.now()), |e| {
        matches!(
            e,
            Event::SweepDone(_) | Event::LidsChanged | Event::HealthChanged
        )
    }) {
        ops_event(&mut ops, &driver.sm, &e);
        match e {
            Event::LidsChanged => keep_lids(&args, &driver.sm),
            Event::HealthChanged => save_unhealthy(&args, &driver.sm),
            Event::KeysChanged => save_keys(&args, &driver.sm),
            Event::SweepDone(r) => {
                write_dumps(&mut dumps, &driver.sm)?;
                let up = r.subnet_up;
                let standby = r.sm_state == "standby";
                last = Some(*r);
                if up {
                    marks.up_ms = Some(wall.elapsed().as_secs_f64() * 1e3);
                }
                if up || standby {
                    break;
                }
            }
            _ => {}
        }
        if driver.now() >= deadline {
            break;
        }
    }
    if !args.once && last.as_ref().is_some_and(|r| r.subnet_up) {
        // Then the SM keeps sweeping, paced by the wall clock, until told to stop.
        serve(&args, &rt, &mut hup, &mut driver, &mut dumps, &mut ops)?;
    }
    if !args.no_check {
        let t = Instant::now();
        let cas = driver.sm.fabric().map_or(0, |f| f.cas().count());
        if cas > 2_000 {
            tracing::info!(
                cas,
                "checking that every CA pair is delivered through the programmed fabric \
                 (--no-check skips it)"
            );
        }
        marks.unreachable = Some(unreachable_traced(&driver));
        marks.check_ms = Some(t.elapsed().as_secs_f64() * 1e3);
        if cas > 2_000 {
            tracing::info!(check_ms = marks.check_ms, "all-pairs check done");
        }
    }
    finish(&args, &driver.sm, &mut dumps, last, wall, true, marks)
}

/// Runs the SM in virtual time for `limit` and reports every sweep.
fn replay(
    args: &Args,
    driver: &mut SimDriver,
    dumps: &mut Option<Dumps>,
    limit: u64,
    wall: Instant,
) -> anyhow::Result<()> {
    let mut reports = Vec::new();
    while let Some(e) = driver.run_until(limit.saturating_sub(driver.now()), |e| {
        matches!(
            e,
            Event::SweepDone(_) | Event::LidsChanged | Event::HealthChanged
        )
    }) {
        match e {
            Event::LidsChanged => keep_lids(args, &driver.sm),
            Event::HealthChanged => save_unhealthy(args, &driver.sm),
            Event::KeysChanged => save_keys(args, &driver.sm),
            Event::SweepDone(r) => {
                if reports.is_empty() {
                    // A directory that cannot be written is found at the start.
                    write_dumps(dumps, &driver.sm)?;
                } else {
                    write_dumps_serving(dumps, &driver.sm, false);
                }
                let wall_ms = wall.elapsed().as_secs_f64() * 1e3;
                let mut rep = Report::new(&r, driver.sm.own_lid().0, wall_ms);
                rep.bad_m_key_traps = driver.sm.bad_m_key_traps();
                rep.unreachable_pairs = (!args.no_check).then(|| unreachable_traced(driver));
                rep.probes = ProbeReport::list(&driver.sim);
                reports.push(rep);
            }
            _ => {}
        }
        if driver.now() >= limit {
            break;
        }
    }
    save_lids(args, &driver.sm)?;
    write_dumps(dumps, &driver.sm)?;
    // Probes sent after the last sweep are listed too.
    if let Some(last) = reports.last_mut() {
        last.probes = ProbeReport::list(&driver.sim);
        last.bad_m_key_traps = driver.sm.bad_m_key_traps();
    }
    match args.report.as_deref() {
        Some("json") => println!("{}", serde_json::to_string_pretty(&reports)?),
        Some(_) => {
            for (i, r) in reports.iter().enumerate() {
                if i > 0 {
                    println!();
                }
                print!("{}", text_report(&serde_json::to_value(r)?));
            }
        }
        None => {}
    }
    // Another SM (a scenario's start-sm) may be the one that holds the subnet.
    if !driver.any_up() {
        bail!("the subnet was not up at the end of the run");
    }
    Ok(())
}

/// The sender of a received MAD, as the SA answers it.
fn requester(m: &umad::Incoming) -> Requester {
    Requester {
        lid: m.slid,
        qpn: m.qpn,
        sl: m.sl,
        pkey_index: m.pkey_index,
    }
}

/// `ibsm run --umad`: the SM on a kernel umad port.
fn run_umad(args: &mut Args, cfg: (Config, PathBuf), spec: &str) -> anyhow::Result<()> {
    check_args(args)?;
    // Handlers first: a signal during start-up must not end the process as the default
    // action would.
    let signals = signal_thread()?;
    let setup = setup(args, cfg, 50)?;
    let lids = load_lids(args, &setup)?;
    let mut params = setup.params;
    let mut dumps = setup.dumps;
    let mut ops = setup.ops;
    // The SA agent is a kernel RMPP agent: the kernel segments table answers.
    params.sa.rmpp = RmppMode::Kernel;
    // DEVICE[:PORT] on the command line wins over the configuration's port_guid.
    let by_guid = spec.is_empty() && setup.port_guid.is_some();
    let port = umad::device::choose_by_guid(Some(spec), setup.port_guid).with_context(|| {
        if by_guid {
            format!("{}: sm.port_guid", setup.config.display())
        } else {
            format!("--umad {spec}")
        }
    })?;
    if port.port_guid.0 != 0 {
        params.own_guid = params.own_guid.or(Some(port.port_guid));
    }
    let args = &*args;
    let perf = setup.perfmgr.enabled.then(|| {
        PerfMgr::new(PerfConfig {
            interval: std::time::Duration::from_secs(u64::from(setup.perfmgr.interval_s.max(1))),
            timeout: params.smp_timeout,
            ..PerfConfig::default()
        })
    });
    let perf = perf.map(|p| (p, setup.thresholds));
    drive_umad(
        args, port, params, lids, &signals, &mut dumps, &mut ops, perf,
    )
}

/// A signal for the driver loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sig {
    Stop,
    Dump,
    Hangup,
}

/// Installs the SIGINT / SIGTERM / SIGUSR1 / SIGHUP handlers and forwards each signal from
/// a thread of its own, so the driver loop blocks only on the device.
fn signal_thread() -> anyhow::Result<std::sync::mpsc::Receiver<Sig>> {
    let rt = runtime()?;
    let (tx, rx) = std::sync::mpsc::channel();
    let mut handlers = Vec::new();
    {
        let _rt = rt.enter();
        for (kind, sig) in [
            (SignalKind::interrupt(), Sig::Stop),
            (SignalKind::terminate(), Sig::Stop),
            (SignalKind::user_defined1(), Sig::Dump),
            (SignalKind::hangup(), Sig::Hangup),
        ] {
            handlers.push((signal(kind).context("installing a signal handler")?, sig));
        }
    }
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            rt.block_on(async move {
                let mut futs = Vec::new();
                for (mut h, sig) in handlers {
                    let tx = tx.clone();
                    futs.push(tokio::spawn(async move {
                        while h.recv().await.is_some() {
                            if tx.send(sig).is_err() {
                                break;
                            }
                        }
                    }));
                }
                for f in futs {
                    let _ = f.await;
                }
            })
        })
        .context("starting the signal thread")?;
    Ok(rx)
}

/// How long the driver waits on the device at most before it looks for signals.
const SIGNAL_CHECK: std::time::Duration = std::time::Duration::from_millis(20);

/// The driver loop, on one thread with the device: what the core transmits is written at
/// once, the loop waits in poll() until a MAD arrives or the core's next deadline, every
/// queued MAD goes to `handle_mad`, events go to the LID store, dumps and report.
#[allow(clippy::too_many_arguments)]
fn drive_umad(
    args: &Args,
    port: umad::PortDesc,
    params: Params,
    lids: LidStore,
    signals: &std::sync::mpsc::Receiver<Sig>,
    dumps: &mut Option<Dumps>,
    ops: &mut Option<OpsHook>,
    perf: Option<(PerfMgr, Thresholds)>,
) -> anyhow::Result<()> {
    let (mut perf, thresholds) = match perf {
        Some((p, t)) => (Some(p), t),
        None => (None, Thresholds::default()),
    };
    let mut perf_seen = 0;
    // The kernel needs a timeout on requests to match their responses; the core keeps its
    // own deadline (and retries), so the kernel's is the same and it never retries.
    let req_timeout_ms = u32::try_from(params.smp_timeout.as_nanos().div_ceil(1_000_000))
        .unwrap_or(u32::MAX)
        .max(1);
    let wall = Instant::now();
    let opts = umad::Options {
        perf: perf.is_some(),
        ..umad::Options::default()
    };
    let mut dev = Device::open(port, opts)?;
    let clock = Instant::now();
    let now = move || sm_daemon::core::Instant::from_nanos(clock.elapsed().as_nanos() as u64);
    let mut sm = Sm::new(params, lids);
    sm.start(now());
    let up_by = clock + up_timeout(args)?;
    let mut last: Option<SweepReport> = None;
    let mut serving = false;
    let flush = |sm: &mut Sm, dev: &mut Device| {
        while let Some(t) = sm.poll_transmit_at(now()) {
            let out = outgoing(t, req_timeout_ms);
            if let Err(e) = dev.send(&out) {
                // The core's deadline covers a request that never left.
                tracing::debug!(dlid = out.dlid.0, "umad write failed: {e}");
            }
        }
    };
    'run: loop {
        while let Ok(sig) = signals.try_recv() {
            match sig {
                Sig::Stop => break 'run,
                Sig::Dump => dump_on_request(dumps, &sm),
                Sig::Hangup => reload(args, &mut sm, now(), ops),
            }
        }
        flush(&mut sm, &mut dev);
        if args.once && !serving && Instant::now() >= up_by {
            tracing::warn!("--up-timeout passed before the subnet came up");
            break 'run;
        }
        if let Some(o) = ops.as_mut() {
            o.tick(&sm);
        }
        run_commands(ops, &mut sm, now());
        while let Some(e) = sm.poll_event() {
            ops_event(ops, &sm, &e);
            match e {
                Event::LidsChanged => keep_lids(args, &sm),
                Event::HealthChanged => save_unhealthy(args, &sm),
                Event::KeysChanged => save_keys(args, &sm),
                Event::SweepDone(r) => {
                    retry_lids(args, &sm);
                    if serving {
                        write_dumps_serving(dumps, &sm, false);
                    } else {
                        // Until the subnet is up, a dump that fails stops the run: a wrong
                        // directory is found at start, not hours later.
                        write_dumps(dumps, &sm)?;
                    }
                    let standby = r.sm_state == "standby";
                    let up = r.subnet_up;
                    last = Some(*r);
                    if args.once && (up || standby) {
                        break 'run;
                    }
                    if standby {
                        serving = false;
                        tracing::info!("standing by; polling the master until it fails");
                    }
                    if up && !serving {
                        serving = true;
                        tracing::info!("subnet up; sweeping until SIGINT/SIGTERM");
                    }
                }
                Event::SweepStarted { .. } | Event::Trap { .. } | Event::LightSweepDone(_) => {}
            }
        }
        // Deadlines are checked only after every queued request went out (and had its
        // deadline counted from then): a request queued before a long computation must
        // not expire before it was even sent.
        if let Some(p) = perf.as_mut() {
            let t = now();
            let master = sm.sm_state() == sm_mad::sm_info::SmState::Master;
            if serving && master && p.due(t) {
                if let Some(plan) = sm.plan() {
                    p.start(t, sm_daemon::perf::targets(&plan.fabric));
                }
            }
            if p.poll_timeout().is_some_and(|d| d <= t) {
                p.handle_timeout(t);
            }
            perf_flush(p, &mut dev, req_timeout_ms, ops);
            // Each finished counter sweep is held against the thresholds once.
            if let Some((_, n)) = p.last_sweep().filter(|&(_, n)| n != perf_seen) {
                perf_seen = n;
                for (node, port, why) in thresholds.crossed(p) {
                    sm.mark_unhealthy(t, node, port, why);
                }
            }
        }
        let t = now();
        let deadline = sm.poll_timeout();
        if deadline.is_some_and(|d| d <= t) {
            sm.handle_timeout(t);
            continue;
        }
        let deadline = match (deadline, perf.as_ref().and_then(PerfMgr::poll_timeout)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let wait = deadline.map_or(SIGNAL_CHECK, |d| (d - t).min(SIGNAL_CHECK));
        let wait_ms = i32::try_from(wait.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX);
        if dev.wait_readable(wait_ms)? {
            while let Some(m) = dev.try_recv()? {
                if m.mad.get(1) == Some(&u8::from(sm_mad::MgmtClass::Perf)) {
                    if let Some(p) = perf.as_mut() {
                        p.handle_mad(now(), &m.mad);
                        perf_flush(p, &mut dev, req_timeout_ms, ops);
                    }
                    continue;
                }
                sm.handle_mad_from(now(), requester(&m), &m.mad);
                // Keep the pipeline full: what the answer freed goes out before the next.
                flush(&mut sm, &mut dev);
            }
        }
    }
    tracing::info!("shutting down");
    // Agents unregistered, IsSM released, device closed before the report.
    drop(dev);
    let (unreachable, credit_loops) = checks_in_tables(&sm);
    let marks = Marks {
        unreachable,
        credit_loops,
        ..Marks::default()
    };
    finish(args, &sm, dumps, last, wall, args.once, marks)
}

/// Sends what the performance manager has queued; a finished counter sweep goes to the
/// status and metrics.
fn perf_flush(p: &mut PerfMgr, dev: &mut Device, timeout_ms: u32, ops: &mut Option<OpsHook>) {
    while let Some((dlid, mad)) = p.poll_transmit() {
        let mut o = Outgoing::gsi(dlid, 1, 0, 0, mad.to_vec());
        o.timeout_ms = timeout_ms;
        if let Err(e) = dev.send(&o) {
            tracing::debug!(dlid = dlid.0, "perf: umad write failed: {e}");
        }
    }
    if p.last_sweep().is_some() {
        if let Some(o) = ops {
            if let Ok(mut x) = o.shared.lock() {
                x.perf_sweep(p);
            }
        }
    }
}

/// A core transmit as the device sends it.
fn outgoing(t: sm_daemon::core::Transmit, req_timeout_ms: u32) -> Outgoing {
    match t.gsi {
        // An SA answer, back to the requester's QP.
        Some(to) => {
            let mut o = Outgoing::gsi(t.dlid, to.qpn, to.sl, to.pkey_index, t.mad);
            // A Report: the kernel matches its ReportResp only to a send with a timeout.
            if t.expects_response {
                o.timeout_ms = req_timeout_ms;
            }
            o
        }
        None => {
            let timeout = if t.expects_response {
                req_timeout_ms
            } else {
                0
            };
            Outgoing::smp(t.dlid, t.mad, timeout)
        }
    }
}
