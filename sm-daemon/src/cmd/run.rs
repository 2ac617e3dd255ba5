//! `ibsm run`: the subnet manager. With `--sim` it brings up the in-process simulated fabric
//! (the bundled example when no topology is given); with `--umad` it runs on a kernel umad
//! port (real hardware, or ibsim through libumad2sim).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use sm_core::dump::{SubnetLstOptions, write_opensm_lfts, write_subnet_lst};
use sm_core::fabric::{Fabric, NodeKind, PortIdx};
use sm_core::lid::LidStore;
use sm_core::read_topology_str;
use sm_daemon::core::{Event, Params, Sm, SweepReport};
use sm_daemon::transport::sim::SimDriver;
use sm_daemon::transport::umad::{self, Outgoing, Umad};
use sm_sim::SimConfig;

/// The bundled example fabric: a 2-level fat-tree of 12-port switches (72 hosts).
const EXAMPLE: &str = include_str!("../../fabrics/example.net");
/// What `--sim` without a value stands for.
const EXAMPLE_NAME: &str = "@example";

/// Arguments of `ibsm run`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Run against the in-process simulated fabric built from TOPO (ibnetdiscover or ibsim
    /// net file); without TOPO, the bundled example fabric.
    #[arg(long, value_name = "TOPO", num_args = 0..=1, default_missing_value = EXAMPLE_NAME)]
    sim: Option<PathBuf>,
    /// Run on a kernel umad port: DEVICE or DEVICE:PORT (e.g. `mlx5_0:1`); without a value,
    /// the first port whose link is up. Under ibsim, run with libumad2sim preloaded.
    #[arg(long, value_name = "DEVICE[:PORT]", num_args = 0..=1, default_missing_value = "",
          conflicts_with_all = ["sim", "sm_port", "seed", "loss"])]
    umad: Option<String>,
    /// How long the SM waits for the answer to one SMP before retrying it (milliseconds).
    /// Default: 50 on a umad port (ibsim answers in tens of microseconds), 200 simulated.
    #[arg(long, value_name = "MS")]
    smp_timeout_ms: Option<u64>,
    /// The port the SM runs on: a port GUID, or a node description in the topology.
    /// Default: the first CA port with a link.
    #[arg(long)]
    sm_port: Option<String>,
    /// Exit after the subnet is up.
    #[arg(long)]
    once: bool,
    /// Print the sweep report: text or json.
    #[arg(long, value_name = "FORMAT")]
    report: Option<String>,
    /// Routing engine chain, e.g. `ftree,updn,minhop`.
    #[arg(long, default_value = "minhop")]
    routing: String,
    /// LMC: 2^LMC LIDs per CA port.
    #[arg(long, default_value_t = 0)]
    lmc: u8,
    /// Where the LID store (`guid2lid`) lives; loaded at start, saved when LIDs change.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Write `opensm-lfts.dump`, `opensm-subnet.lst` and `guid2lid` here after each sweep.
    #[arg(long)]
    dump_dir: Option<PathBuf>,
    /// Seed of the simulated fabric's fault injection.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Fraction of MADs the simulated fabric loses (0.0-1.0).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
}

/// The summary printed with `--report`.
#[derive(Debug, serde::Serialize)]
struct Report {
    subnet_up: bool,
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
    mads_retried: u64,
    mads_lost: u64,
    lft_blocks_sent: u64,
    sweep_ms: f64,
    discovery_ms: f64,
    routing_ms: f64,
    programming_ms: f64,
    wall_ms: f64,
    errors: Vec<String>,
}

impl Report {
    fn new(r: &SweepReport, sm_lid: u16, wall_ms: f64) -> Report {
        let ms = |ns: u64| ns as f64 / 1e6;
        Report {
            subnet_up: r.subnet_up,
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
            mads_retried: r.mads_retried,
            mads_lost: r.mads_lost,
            lft_blocks_sent: r.lft_blocks_sent,
            sweep_ms: ms(r.sweep_ns),
            discovery_ms: ms(r.discovery_ns),
            routing_ms: ms(r.routing_ns),
            programming_ms: ms(r.programming_ns),
            wall_ms,
            errors: r.errors.clone(),
        }
    }
}

fn monotonic_ns() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

fn find_sm_port(f: &Fabric, want: Option<&str>) -> anyhow::Result<PortIdx> {
    let linked = |p: &PortIdx| f.port(*p).remote.is_some();
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
fn serve(args: &Args, driver: &mut SimDriver) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async {
        let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
        let start = tokio::time::Instant::now();
        let base = driver.now();
        tracing::info!("subnet up; sweeping until SIGINT/SIGTERM");
        loop {
            let vnow = base + start.elapsed().as_nanos() as u64;
            driver.advance_to(vnow);
            while let Some(e) = driver.sm.poll_event() {
                match e {
                    Event::LidsChanged => save_lids(args, &driver.sm)?,
                    Event::SweepDone(_) => {
                        if let Some(d) = &args.dump_dir {
                            write_dumps(d, &driver.sm)?;
                        }
                    }
                    _ => {}
                }
            }
            let next = driver.next_deadline().unwrap_or(vnow + 1_000_000_000);
            let wake = start + std::time::Duration::from_nanos(next.saturating_sub(base));
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
            }
        }
        tracing::info!("shutting down");
        anyhow::Ok(())
    })
}

fn write_dumps(dir: &Path, sm: &Sm) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (Some(f), Some(lfts)) = (sm.fabric(), sm.lfts()) else {
        return Ok(());
    };
    let mut out = Vec::new();
    write_opensm_lfts(lfts, f, &mut out)?;
    std::fs::write(dir.join("opensm-lfts.dump"), &out)?;
    out.clear();
    let sm_lid = Some(sm.own_lid());
    write_subnet_lst(f, SubnetLstOptions { sm_lid }, &mut out)?;
    std::fs::write(dir.join("opensm-subnet.lst"), &out)?;
    sm.lid_store().save(&dir.join("guid2lid"))?;
    Ok(())
}

/// Checks the options both transports share.
fn check_args(args: &Args) -> anyhow::Result<()> {
    if args.lmc > 7 {
        bail!("--lmc {} is out of range 0..=7", args.lmc);
    }
    for name in args.routing.split(',').map(str::trim) {
        sm_routing::engine(name).with_context(|| format!("--routing {}", args.routing))?;
    }
    if args.smp_timeout_ms == Some(0) {
        bail!("--smp-timeout-ms must be at least 1");
    }
    Ok(())
}

fn load_lids(args: &Args) -> anyhow::Result<LidStore> {
    Ok(match &args.state_dir {
        Some(d) => LidStore::load(&d.join("guid2lid"))?,
        None => LidStore::new(),
    })
}

/// The core's parameters from the command line; `smp_timeout_ms` is the transport's default.
fn params(args: &Args, smp_timeout_ms: u64) -> Params {
    let ms = args.smp_timeout_ms.unwrap_or(smp_timeout_ms);
    Params {
        lmc: args.lmc,
        routing: args.routing.clone(),
        stopwatch: Some(monotonic_ns),
        smp_timeout: ms.saturating_mul(1_000_000),
        ..Params::default()
    }
}

/// The end of a run, the same for every transport: LIDs saved, dumps written, the report
/// printed, and an error when the subnet did not come up.
fn finish(
    args: &Args,
    sm: &Sm,
    last: Option<SweepReport>,
    wall: Instant,
    must_be_up: bool,
) -> anyhow::Result<()> {
    save_lids(args, sm)?;
    let wall_ms = wall.elapsed().as_secs_f64() * 1e3;
    let Some(r) = last else {
        if must_be_up {
            bail!("the SM did not finish a sweep");
        }
        return Ok(());
    };
    if let Some(d) = &args.dump_dir {
        write_dumps(d, sm)?;
    }
    let report = Report::new(&r, sm.own_lid().0, wall_ms);
    match args.report.as_deref() {
        None => {}
        Some("json") => println!("{}", serde_json::to_string_pretty(&report)?),
        Some("text") => {
            let v = serde_json::to_value(&report)?;
            if let serde_json::Value::Object(m) = v {
                for (k, v) in m {
                    println!("{k:<16} {v}");
                }
            }
        }
        Some(other) => bail!("--report {other}: expected text or json"),
    }
    if must_be_up && !r.subnet_up {
        bail!("subnet not up: {}", r.errors.join("; "));
    }
    Ok(())
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    if let Some(r) = args.report.as_deref() {
        if r != "json" && r != "text" {
            bail!("--report {r}: expected text or json");
        }
    }
    if let Some(spec) = &args.umad {
        return run_umad(&args, spec);
    }
    let Some(topo) = &args.sim else {
        bail!("ibsm run needs a fabric: --umad [DEVICE[:PORT]] or --sim [TOPO]");
    };
    if !(0.0..=1.0).contains(&args.loss) {
        bail!("--loss {} is not a fraction between 0 and 1", args.loss);
    }
    check_args(&args)?;
    let fabric = load_topology(topo)?;
    let sm_port = find_sm_port(&fabric, args.sm_port.as_deref())?;
    let lids = load_lids(&args)?;
    let params = params(&args, 200);
    let cfg = SimConfig {
        seed: args.seed,
        faults: sm_sim::Faults {
            loss: args.loss,
            ..sm_sim::Faults::default()
        },
        ..SimConfig::default()
    };
    let wall = Instant::now();
    let mut driver = SimDriver::new(&fabric, sm_port, params, lids, cfg);
    driver.start();
    // Bring-up runs in fast virtual time.
    let mut last = None;
    let mut failures = 0;
    while let Some(e) = driver.run_until(3_600_000_000_000, |e| {
        matches!(e, Event::SweepDone(_) | Event::LidsChanged)
    }) {
        match e {
            Event::LidsChanged => save_lids(&args, &driver.sm)?,
            Event::SweepDone(r) => {
                let up = r.subnet_up;
                last = Some(*r);
                failures += usize::from(!up);
                if up || failures >= 5 {
                    break;
                }
            }
            _ => {}
        }
    }
    if !args.once && last.as_ref().is_some_and(|r| r.subnet_up) {
        // Then the SM keeps sweeping, paced by the wall clock, until told to stop.
        serve(&args, &mut driver)?;
    }
    finish(&args, &driver.sm, last, wall, true)
}

/// Heavy sweeps that fail in a row before `--once` gives up.
const ONCE_ATTEMPTS: usize = 5;
/// Received MADs handled in one go before the driver transmits again.
const RECV_BATCH: usize = 256;

/// `ibsm run --umad`: the SM on a kernel umad port, driven by a current-thread runtime.
fn run_umad(args: &Args, spec: &str) -> anyhow::Result<()> {
    check_args(args)?;
    let port = umad::device::choose(Some(spec))?;
    let lids = load_lids(args)?;
    let params = params(args, 50);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(drive_umad(args, port, params, lids))
}

/// The driver loop: received MADs -> `handle_mad`, sleep until `poll_timeout` ->
/// `handle_timeout`, `poll_transmit` -> the I/O thread, events -> LID store, dumps, report.
async fn drive_umad(
    args: &Args,
    port: umad::PortDesc,
    params: Params,
    lids: LidStore,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    // The kernel needs a timeout on requests to match their responses; the core keeps its
    // own deadline (and retries), so the kernel's is the same and it never retries.
    let req_timeout_ms = u32::try_from(params.smp_timeout.div_ceil(1_000_000))
        .unwrap_or(u32::MAX)
        .max(1);
    let wall = Instant::now();
    let mut dev = Umad::open(port, umad::Options::default())?;
    let clock = tokio::time::Instant::now();
    let now = move || clock.elapsed().as_nanos() as u64;
    let mut sm = Sm::new(params, lids);
    sm.start(now());
    let mut last: Option<SweepReport> = None;
    let mut failures = 0;
    let mut serving = false;
    'run: loop {
        while let Some(t) = sm.poll_transmit_at(now()) {
            let timeout = if t.expects_response {
                req_timeout_ms
            } else {
                0
            };
            dev.send(Outgoing::smp(t.dlid, &t.mad, timeout))?;
        }
        while let Some(e) = sm.poll_event() {
            match e {
                Event::LidsChanged => save_lids(args, &sm)?,
                Event::SweepDone(r) => {
                    if let Some(d) = &args.dump_dir {
                        write_dumps(d, &sm)?;
                    }
                    failures = if r.subnet_up { 0 } else { failures + 1 };
                    let up = r.subnet_up;
                    last = Some(*r);
                    if args.once && (up || failures >= ONCE_ATTEMPTS) {
                        break 'run;
                    }
                    if up && !serving {
                        serving = true;
                        tracing::info!("subnet up; sweeping until SIGINT/SIGTERM");
                    }
                }
                Event::SweepStarted { .. } | Event::Trap { .. } => {}
            }
        }
        // Deadlines are checked only after every queued request went out (and had its
        // deadline counted from then): a request queued before a long computation must
        // not expire before it was even sent.
        let t = now();
        if sm.poll_timeout().is_some_and(|d| d <= t) {
            sm.handle_timeout(t);
            continue;
        }
        let wake = match sm.poll_timeout() {
            Some(t) => clock + std::time::Duration::from_nanos(t),
            None => tokio::time::Instant::now() + std::time::Duration::from_secs(3600),
        };
        tokio::select! {
            m = dev.recv() => {
                let Some(m) = m else {
                    bail!("the umad device stopped (see the log above)");
                };
                sm.handle_mad(now(), m.slid, &m.mad);
                // Take what is already queued (a bounded batch) before transmitting again.
                for _ in 0..RECV_BATCH {
                    let Some(m) = dev.try_recv() else { break };
                    sm.handle_mad(now(), m.slid, &m.mad);
                }
            }
            _ = tokio::time::sleep_until(wake) => sm.handle_timeout(now()),
            _ = int.recv() => break,
            _ = term.recv() => break,
        }
    }
    tracing::info!("shutting down");
    // Stop the I/O thread first: agents unregistered, IsSM released, device closed.
    drop(dev);
    finish(args, &sm, last, wall, args.once)
}
