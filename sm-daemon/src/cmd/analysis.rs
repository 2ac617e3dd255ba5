//! What `ibsm route` and `ibsm analyze` share: reading a topology and giving its ports
//! LIDs, validating and measuring forwarding tables, the report (aligned text or one JSON
//! object on stdout), the heat-map picture, and a progress spinner on stderr.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sm_core::fabric::{Fabric, NodeKind, PortIdx};
use sm_core::lid::LidStore;
use sm_routing::engine::Fallback;
use sm_routing::{Metrics, MetricsOptions, Routes, Topo, ValidateOptions, Validation};

use super::svg;

/// Options of the report, common to both subcommands.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ReportArgs {
    /// How to print the report on stdout: aligned text, or one JSON object.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text, value_name = "FORMAT")]
    report: ReportFormat,
    /// Draw the fabric with every link coloured by its all-to-all load, as SVG.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Seed of the sampled shifts and random bisections (same seed, same figures).
    #[arg(long, default_value_t = MetricsOptions::default().seed, value_name = "N")]
    seed: u64,
    /// Shift permutations to evaluate at most (every shift when there are no more).
    #[arg(long, default_value_t = MetricsOptions::default().max_shifts, value_name = "N")]
    shifts: usize,
    /// Random bisections for the effective bisection bandwidth (0 skips it).
    #[arg(long, default_value_t = MetricsOptions::default().bisections, value_name = "N")]
    bisections: usize,
    /// Failed pairs and stale LIDs to describe (all are counted).
    #[arg(long, default_value_t = 20, value_name = "N")]
    max_failures: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ReportFormat {
    Text,
    Json,
}

impl ReportArgs {
    pub(crate) fn json(&self) -> bool {
        self.report == ReportFormat::Json
    }
}

/// A spinner naming the current phase and the time spent, on stderr when it is a terminal;
/// nothing otherwise (stdout carries only the report).
pub(crate) struct Progress(Option<ProgressBar>);

impl Progress {
    pub(crate) fn new() -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} [{elapsed}]") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(100));
        Progress(Some(bar))
    }

    pub(crate) fn phase(&self, msg: impl Into<String>) {
        if let Some(b) = &self.0 {
            b.set_message(msg.into());
        }
    }

    pub(crate) fn done(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.done();
    }
}

/// Reads an ibnetdiscover dump or ibsim net file.
pub(crate) fn read_fabric(path: &Path) -> anyhow::Result<Fabric> {
    let t = sm_core::read_topology(path).context("cannot read the topology")?;
    Ok(t.fabric)
}

/// Where the LIDs of a run came from.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct LidInfo {
    /// `topology` (kept as the file gives them), `assigned` (by `ibsm`, none in the file),
    /// `topology+assigned` (the file's, and fresh ones for ports it left without),
    /// `guid2lid` (from that file), or `forwarding tables` (named by the tables' dump).
    pub(crate) source: &'static str,
    /// The LMC of the CA ports (the largest, should they differ).
    pub(crate) lmc: u8,
    /// Ports that got a fresh LID range from `ibsm`.
    pub(crate) assigned: usize,
}

/// Ports that must hold a LID: switch port 0, and CA / router ports with a link.
fn needs_lid(f: &Fabric, p: PortIdx) -> bool {
    let port = f.port(p);
    f.node(port.node).kind == NodeKind::Switch || port.remote.is_some()
}

fn ca_lmc(f: &Fabric) -> u8 {
    f.end_ports()
        .map(|p| f.port(p))
        .filter(|p| f.node(p.node).kind != NodeKind::Switch && p.lid.0 != 0)
        .map(|p| p.lmc)
        .max()
        .unwrap_or(0)
}

fn describe_port(f: &Fabric, p: PortIdx) -> String {
    let port = f.port(p);
    let node = f.node(port.node);
    format!("{} ('{}' port {})", port.guid, node.description, port.num)
}

/// LIDs for routing: the topology's when it carries them, else assigned (`LidStore`, LMC
/// `lmc`); `reassign` drops the file's LIDs first.
pub(crate) fn lids_for_routing(
    f: &mut Fabric,
    lmc: Option<u8>,
    reassign: bool,
) -> anyhow::Result<LidInfo> {
    let ports: Vec<PortIdx> = f.end_ports().filter(|&p| needs_lid(f, p)).collect();
    let held = ports.iter().filter(|&&p| f.port(p).lid.0 != 0).count();
    if reassign {
        for p in f.end_ports().collect::<Vec<_>>() {
            let port = f.port_mut(p);
            port.lid = sm_mad::Lid(0);
            port.lmc = 0;
        }
    } else if held == ports.len() && held > 0 {
        let have = ca_lmc(f);
        if let Some(want) = lmc.filter(|&l| l != have) {
            bail!(
                "the topology's ports carry LIDs with LMC {have}; --lmc {want} would need \
                 new LIDs: add --assign-lids to replace them"
            );
        }
        return Ok(LidInfo {
            source: "topology",
            lmc: have,
            assigned: 0,
        });
    }
    let keep_some = !reassign && held > 0;
    let lmc = lmc.unwrap_or_else(|| if keep_some { ca_lmc(f) } else { 0 });
    let r = LidStore::new()
        .assign(f, lmc)
        .context("cannot assign LIDs")?;
    Ok(LidInfo {
        source: if keep_some {
            "topology+assigned"
        } else {
            "assigned"
        },
        lmc,
        assigned: r.assigned,
    })
}

/// LIDs for tables made elsewhere: the topology's own, which every port that needs one must
/// carry.
pub(crate) fn lids_from_topology(f: &Fabric, topo_path: &Path) -> anyhow::Result<LidInfo> {
    let missing: Vec<PortIdx> = f
        .end_ports()
        .filter(|&p| needs_lid(f, p) && f.port(p).lid.0 == 0)
        .collect();
    if let Some(&first) = missing.first() {
        bail!(
            "{}: {} port(s) have no LID, e.g. {}; tables are matched by LID: give the \
             ibnetdiscover dump taken after the SM that made them brought the subnet up, or \
             that SM's guid2lid with --guid2lid",
            topo_path.display(),
            missing.len(),
            describe_port(f, first)
        );
    }
    Ok(LidInfo {
        source: "topology",
        lmc: ca_lmc(f),
        assigned: 0,
    })
}

/// LIDs from an OpenSM `guid2lid` file, replacing the topology's.
pub(crate) fn lids_from_guid2lid(f: &mut Fabric, path: &Path) -> anyhow::Result<LidInfo> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read the guid2lid file", path.display()))?;
    let store = LidStore::from_guid2lid(&text, path)?;
    let mut missing = Vec::new();
    for p in f.end_ports().collect::<Vec<_>>() {
        let guid = f.port(p).guid;
        let range = store.get(guid);
        if range.is_none() && needs_lid(f, p) {
            missing.push(p);
        }
        let port = f.port_mut(p);
        port.lid = range.map(|r| r.base).unwrap_or_default();
        port.lmc = range.map(|r| r.lmc).unwrap_or(0);
    }
    if let Some(&first) = missing.first() {
        bail!(
            "{}: no LID for {} port(s) of the topology, e.g. {}",
            path.display(),
            missing.len(),
            describe_port(f, first)
        );
    }
    Ok(LidInfo {
        source: "guid2lid",
        lmc: ca_lmc(f),
        assigned: 0,
    })
}

/// LIDs from the forwarding tables themselves, for a topology without any: an
/// `opensm-lfts.dump` names the port GUID behind every LID it routes, so each end port's
/// LIDs are the ones naming it (base the lowest, LMC from how many); a switch's LID is its
/// table's own.
pub(crate) fn lids_from_tables(
    f: &mut Fabric,
    lfts: &sm_core::dump::Lfts,
    topo_path: &Path,
    lfts_path: &Path,
) -> anyhow::Result<LidInfo> {
    let mut by_guid: std::collections::HashMap<sm_mad::Guid, Vec<u16>> = Default::default();
    for d in &lfts.destinations {
        if let Some(g) = d.port {
            by_guid.entry(g).or_default().push(d.lid.0);
        }
    }
    for s in &lfts.switches {
        if s.lid.0 != 0 {
            by_guid.entry(s.guid).or_default().push(s.lid.0);
        }
    }
    let mut missing = Vec::new();
    for p in f.end_ports().collect::<Vec<_>>() {
        let guid = f.port(p).guid;
        let node_guid = f.node(f.port(p).node).guid;
        let is_switch = f.node(f.port(p).node).kind == NodeKind::Switch;
        let lids = by_guid
            .get(&guid)
            .or_else(|| is_switch.then(|| by_guid.get(&node_guid)).flatten());
        let Some(lids) = lids.filter(|l| !l.is_empty()) else {
            if needs_lid(f, p) {
                missing.push(p);
            }
            continue;
        };
        let base = *lids.iter().min().unwrap_or(&0);
        let span = lids.iter().collect::<std::collections::BTreeSet<_>>().len();
        let lmc = if is_switch {
            0
        } else {
            (usize::BITS - span.max(1).saturating_sub(1).leading_zeros()) as u8
        };
        let port = f.port_mut(p);
        port.lid = sm_mad::Lid(base);
        port.lmc = lmc.min(7);
    }
    if let Some(&first) = missing.first() {
        bail!(
            "{}: {} port(s) have no LID, e.g. {}, and {} names no LID for them either: give              the ibnetdiscover dump taken after the SM brought the subnet up, or its guid2lid              with --guid2lid",
            topo_path.display(),
            missing.len(),
            describe_port(f, first),
            lfts_path.display()
        );
    }
    Ok(LidInfo {
        source: "forwarding tables",
        lmc: ca_lmc(f),
        assigned: 0,
    })
}

/// The topology's LIDs in OpenSM's `guid2lid` format.
pub(crate) fn guid2lid_text(f: &Fabric) -> String {
    let mut rows: Vec<(u16, u64, u16)> = f
        .end_ports()
        .map(|p| f.port(p))
        .filter(|p| p.lid.0 != 0)
        .map(|p| {
            let lmc = if f.node(p.node).kind == NodeKind::Switch {
                0
            } else {
                p.lmc.min(7)
            };
            let last = (p.lid.0 as u32 + (1u32 << lmc) - 1).min(u16::MAX as u32) as u16;
            (p.lid.0, p.guid.0, last)
        })
        .collect();
    rows.sort_unstable();
    let mut s = String::new();
    for (base, guid, last) in rows {
        let _ = writeln!(s, "0x{guid:016x} 0x{base:04x} 0x{last:04x}");
    }
    s
}

/// Creates `path` and lets `fill` write it; errors name the file.
pub(crate) fn write_file(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let file = std::fs::File::create(path)
        .with_context(|| format!("{}: cannot create", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    fill(&mut w)
        .and_then(|()| w.flush())
        .with_context(|| format!("{}: cannot write", path.display()))
}

/// Validation and metrics, with their wall times in milliseconds.
pub(crate) struct Analysis {
    pub(crate) validation: Validation,
    pub(crate) metrics: Metrics,
    pub(crate) validate_ms: f64,
    pub(crate) metrics_ms: f64,
}

pub(crate) fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// Validates and measures `routes`.
pub(crate) fn analyse(
    topo: &Topo<'_>,
    routes: &Routes,
    args: &ReportArgs,
    progress: &Progress,
    vl: Option<std::sync::Arc<sm_routing::validate::VlFn>>,
) -> Analysis {
    progress.phase("validating (reachability, loops, credit loops)");
    let t = Instant::now();
    let validation = sm_routing::validate(
        topo,
        routes,
        &ValidateOptions {
            max_failures: args.max_failures,
            vl,
            ..ValidateOptions::default()
        },
    );
    let validate_ms = ms(t.elapsed());
    progress.phase("measuring (hops, link loads, shifts, bisections)");
    let t = Instant::now();
    let metrics = sm_routing::metrics(
        topo,
        routes,
        &MetricsOptions {
            seed: args.seed,
            max_shifts: args.shifts,
            bisections: args.bisections,
            ..MetricsOptions::default()
        },
    );
    Analysis {
        validation,
        metrics,
        validate_ms,
        metrics_ms: ms(t.elapsed()),
    }
}

/// Hop counts over CA-to-CA pairs, in links.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Hops {
    min: u32,
    max: u32,
    mean: f64,
}

/// Tables read from a file (`analyze`).
#[derive(Debug, serde::Serialize)]
pub(crate) struct TablesIn {
    pub(crate) file: String,
    pub(crate) format: &'static str,
    pub(crate) switches_with_table: usize,
    pub(crate) switches_without_table: usize,
}

/// What adaptive routing found.
#[derive(Debug, serde::Serialize)]
pub(crate) struct ArSummary {
    pub(crate) switches_with_groups: usize,
    pub(crate) groups: usize,
    /// (switch, LID) entries with more than one legal port.
    pub(crate) entries_with_alternatives: u64,
}

impl ArSummary {
    pub(crate) fn of(routes: &Routes) -> Option<ArSummary> {
        let ar = routes.ar.as_ref()?;
        Some(ArSummary {
            switches_with_groups: ar.iter().filter(|s| !s.groups.is_empty()).count(),
            groups: ar.iter().map(|s| s.groups.len()).sum(),
            entries_with_alternatives: ar
                .iter()
                .map(|s| s.lid_group.iter().filter(|&&g| g != u16::MAX).count() as u64)
                .sum(),
        })
    }
}

/// Files written.
#[derive(Debug, Default, serde::Serialize)]
pub(crate) struct Outputs {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) lfts: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) lfts_format: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ar: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) guid2lid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) path_sl: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sl2vl: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) svg: Option<String>,
    /// What the picture leaves out or aggregates, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) svg_note: Option<String>,
}

/// The report of `ibsm route` and `ibsm analyze`.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Report {
    pub(crate) topology: String,
    /// The engine chain asked for (`external` for `analyze`).
    pub(crate) engine: String,
    /// The engine that made the tables (the table file for `analyze`).
    pub(crate) engine_used: String,
    /// How it went about it, when it says (the layered engine on a grid).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) engine_method: Option<String>,
    pub(crate) fallbacks: Vec<Fallback>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tables: Option<TablesIn>,
    pub(crate) nodes: usize,
    pub(crate) switches: usize,
    pub(crate) cas: usize,
    pub(crate) routers: usize,
    pub(crate) links: usize,
    /// CA (and router) ports hanging off a switch: the traffic end points.
    pub(crate) ca_ports: usize,
    /// Destination LIDs (every LID of every end port).
    pub(crate) lids: usize,
    pub(crate) lid_source: &'static str,
    pub(crate) lmc: u8,
    pub(crate) lids_assigned: usize,
    pub(crate) valid: bool,
    pub(crate) unreachable_pairs: u64,
    /// Of those, CA-to-switch pairs the up*/down* ranks leave without a legal path
    /// (management only; they do not fail the verdict).
    pub(crate) unrouted_switch_pairs: u64,
    pub(crate) forwarding_loops: u64,
    /// Cyclic components of the channel dependency graphs: 0 means deadlock-free.
    pub(crate) credit_loops: u64,
    /// Virtual lanes the paths travel on (each VL's graph is in `validation.vls`).
    pub(crate) vls_used: u32,
    pub(crate) stale_lids: u64,
    pub(crate) non_minimal_pairs: u64,
    pub(crate) hops: Hops,
    /// All-to-all flows on the busiest switch-to-switch link (direction).
    pub(crate) max_link_load: u64,
    pub(crate) mean_link_load: f64,
    pub(crate) max_ca_link_load: u64,
    /// The busiest link of the worst shift permutation.
    pub(crate) worst_shift_load: u32,
    pub(crate) ebb: Option<f64>,
    /// Wall time of the routing computation alone (`null` for `analyze`).
    pub(crate) route_ms: Option<f64>,
    pub(crate) validate_ms: f64,
    pub(crate) metrics_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) adaptive: Option<ArSummary>,
    pub(crate) outputs: Outputs,
    pub(crate) validation: Validation,
    pub(crate) metrics: Metrics,
}

/// The tables were checked and found INVALID: `ibsm route` and `ibsm analyze` exit with
/// status [`Invalid::EXIT`] after printing the report (1 is for errors).
#[derive(Debug, thiserror::Error)]
#[error(
    "the forwarding tables are INVALID: {unreachable_pairs} unreachable pair(s), \
     {stale_lids} stale LID(s), {credit_loops} credit loop(s)"
)]
pub(crate) struct Invalid {
    unreachable_pairs: u64,
    stale_lids: u64,
    credit_loops: u64,
}

impl Invalid {
    /// The exit status.
    pub(crate) const EXIT: u8 = 2;
}

/// What a report needs beyond the analysis.
pub(crate) struct ReportInput<'a> {
    pub(crate) topo_path: &'a Path,
    pub(crate) fabric: &'a Fabric,
    pub(crate) engine: String,
    pub(crate) engine_used: String,
    pub(crate) engine_method: Option<String>,
    pub(crate) fallbacks: Vec<Fallback>,
    pub(crate) tables: Option<TablesIn>,
    pub(crate) lids: LidInfo,
    pub(crate) route_ms: Option<f64>,
    pub(crate) adaptive: Option<ArSummary>,
    pub(crate) outputs: Outputs,
}

impl Report {
    pub(crate) fn new(i: ReportInput<'_>, a: Analysis) -> Report {
        let c = i.fabric.counts();
        let (v, m) = (&a.validation, &a.metrics);
        Report {
            topology: i.topo_path.display().to_string(),
            engine: i.engine,
            engine_used: i.engine_used,
            engine_method: i.engine_method,
            fallbacks: i.fallbacks,
            tables: i.tables,
            nodes: c.nodes,
            switches: c.switches,
            cas: c.cas,
            routers: c.routers,
            links: c.links,
            ca_ports: m.cas,
            lids: v.lids,
            lid_source: i.lids.source,
            lmc: i.lids.lmc,
            lids_assigned: i.lids.assigned,
            valid: v.is_valid(),
            unreachable_pairs: v.unreachable_pairs,
            unrouted_switch_pairs: v.excused_pairs(),
            forwarding_loops: v.forwarding_loops,
            credit_loops: v.credit_loops,
            vls_used: v.vls.iter().map(|g| u32::from(g.vl) + 1).max().unwrap_or(1),
            stale_lids: v.stale_lid_count,
            non_minimal_pairs: v.non_minimal_pairs,
            hops: Hops {
                min: m.hops.min,
                max: m.hops.max,
                mean: m.hops.mean,
            },
            max_link_load: m.all_to_all.switch_links.max,
            mean_link_load: m.all_to_all.switch_links.mean,
            max_ca_link_load: m.all_to_all.ca_links.max,
            worst_shift_load: m.shifts.worst_max_load,
            ebb: m.bisection.as_ref().map(|b| b.ebb),
            route_ms: i.route_ms,
            validate_ms: a.validate_ms,
            metrics_ms: a.metrics_ms,
            adaptive: i.adaptive,
            outputs: i.outputs,
            validation: a.validation,
            metrics: a.metrics,
        }
    }

    /// `Ok` for VALID tables, else [`Invalid`] (exit status 2), saying what failed.
    pub(crate) fn verdict(&self) -> anyhow::Result<()> {
        if self.valid {
            return Ok(());
        }
        Err(Invalid {
            unreachable_pairs: self.unreachable_pairs - self.unrouted_switch_pairs,
            stale_lids: self.stale_lids,
            credit_loops: self.credit_loops,
        }
        .into())
    }

    /// Prints the report on stdout.
    pub(crate) fn print(&self, json: bool) -> anyhow::Result<()> {
        let text = if json {
            let mut s = serde_json::to_string_pretty(self).context("cannot encode the report")?;
            s.push('\n');
            s
        } else {
            self.text()
        };
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .context("cannot write the report to stdout")
    }

    /// The aligned text form.
    pub(crate) fn text(&self) -> String {
        let mut s = String::new();
        let mut row = |label: &str, value: String| {
            let _ = writeln!(s, "{label:<20} {value}");
        };
        row("topology", self.topology.clone());
        row(
            "fabric",
            format!(
                "{} nodes: {} switches, {} CAs, {} routers; {} links",
                self.nodes, self.switches, self.cas, self.routers, self.links
            ),
        );
        row(
            "LIDs",
            format!(
                "{} ({}, LMC {}{})",
                self.lids,
                self.lid_source,
                self.lmc,
                if self.lids_assigned > 0 {
                    format!(", {} ports assigned", self.lids_assigned)
                } else {
                    String::new()
                }
            ),
        );
        if let Some(t) = &self.tables {
            row(
                "tables",
                format!(
                    "{} ({} format): {} switches, {} without a table",
                    t.file, t.format, t.switches_with_table, t.switches_without_table
                ),
            );
        } else {
            row(
                "engine",
                format!("{} (used: {})", self.engine, self.engine_used),
            );
            if let Some(m) = &self.engine_method {
                row("  method", m.clone());
            }
            for f in &self.fallbacks {
                row("  declined", format!("{}: {}", f.engine, f.reason));
            }
        }
        if let Some(ms) = self.route_ms {
            row("route time", format!("{ms:.1} ms"));
        }
        if let Some(a) = &self.adaptive {
            row(
                "adaptive routing",
                format!(
                    "{} groups on {} switches, {} entries with alternatives",
                    a.groups, a.switches_with_groups, a.entries_with_alternatives
                ),
            );
        }
        let v = &self.validation;
        row(
            "verdict",
            if self.valid { "VALID" } else { "INVALID" }.to_string(),
        );
        row(
            "pairs checked",
            format!(
                "{} ({} CA-to-CA, {} CA-to-switch)",
                v.pairs_checked, v.ca_to_ca_pairs, v.ca_to_switch_pairs
            ),
        );
        row(
            "unreachable pairs",
            format!(
                "{} (forwarding loops: {})",
                self.unreachable_pairs, self.forwarding_loops
            ),
        );
        if self.unrouted_switch_pairs > 0 {
            row(
                "",
                format!(
                    "{} of them CA-to-switch: a switch's LID with no legal up*/down* path from                      the source's switch (management traffic, which the SM sends by directed                      route; OpenSM leaves such pairs too): not counted against the verdict",
                    self.unrouted_switch_pairs
                ),
            );
        }
        for f in &v.failures {
            row("", f.to_string());
        }
        if (v.failures.len() as u64) < v.unreachable_pairs {
            row(
                "",
                format!("... {} more", v.unreachable_pairs - v.failures.len() as u64),
            );
        }
        row("stale LIDs", self.stale_lids.to_string());
        for x in &v.stale_lids {
            row(
                "",
                format!("LID {} routed by {} switch(es)", x.lid, x.switches),
            );
        }
        row(
            "credit loops",
            if v.credit_loops_checked {
                format!(
                    "{}{}",
                    self.credit_loops,
                    if self.credit_loops == 0 {
                        " (deadlock-free)"
                    } else {
                        ""
                    }
                )
            } else {
                "not checked".into()
            },
        );
        if let Some(c) = &v.credit_loop {
            row("", format!("cycle on {c}"));
        }
        if self.vls_used > 1 {
            let per: Vec<String> = v
                .vls
                .iter()
                .map(|g| format!("VL{} {}", g.vl, g.cyclic_sccs))
                .collect();
            row(
                "virtual lanes",
                format!(
                    "{} (credit loops per VL: {})",
                    self.vls_used,
                    per.join(", ")
                ),
            );
        }
        row(
            "non-minimal pairs",
            format!(
                "{} (max extra hops {}, max stretch {:.3})",
                self.non_minimal_pairs, v.max_extra_hops, v.max_stretch
            ),
        );
        let m = &self.metrics;
        row(
            "hops (CA to CA)",
            format!(
                "min {} max {} mean {:.3}",
                self.hops.min, self.hops.max, self.hops.mean
            ),
        );
        let a = &m.all_to_all;
        row(
            "all-to-all load",
            format!(
                "switch links: max {} mean {:.1} stddev {:.1} ({} links)",
                a.switch_links.max,
                a.switch_links.mean,
                a.switch_links.stddev,
                a.switch_links.links
            ),
        );
        row(
            "",
            format!(
                "CA links:     max {} mean {:.1} ({} links)",
                a.ca_links.max, a.ca_links.mean, a.ca_links.links
            ),
        );
        let sh = &m.shifts;
        row(
            "shift permutations",
            format!(
                "worst link load {}{}, mean {:.2} over {} shifts{}",
                sh.worst_max_load,
                sh.worst_shift
                    .map(|k| format!(" (shift {k})"))
                    .unwrap_or_default(),
                sh.mean_max_load,
                sh.shifts,
                if sh.sampled { " (sampled)" } else { "" }
            ),
        );
        if let Some(b) = &m.bisection {
            row(
                "eff. bisection bw",
                format!(
                    "{:.4} ({} samples, min {:.4} max {:.4})",
                    b.ebb, b.samples, b.min_sample, b.max_sample
                ),
            );
        }
        if let Some(d) = &m.diversity {
            row(
                "path diversity",
                format!(
                    "mean {:.2} paths (min {}), {:.1}% disjoint",
                    d.mean_paths,
                    d.min_paths,
                    d.disjoint_fraction * 100.0
                ),
            );
        }
        row(
            "analysis time",
            format!(
                "validate {:.1} ms, metrics {:.1} ms",
                self.validate_ms, self.metrics_ms
            ),
        );
        let o = &self.outputs;
        for (what, file) in [
            ("LFTs written", &o.lfts),
            ("AR hints written", &o.ar),
            ("guid2lid written", &o.guid2lid),
            ("path SLs written", &o.path_sl),
            ("SL-to-VL tables written", &o.sl2vl),
            ("picture written", &o.svg),
        ] {
            if let Some(file) = file {
                let extra = match what {
                    "LFTs written" => o
                        .lfts_format
                        .map(|f| format!(" ({f} format)"))
                        .unwrap_or_default(),
                    "picture written" => o
                        .svg_note
                        .as_ref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                row(what, format!("{file}{extra}"));
            }
        }
        s
    }
}

/// Writes the heat map if asked; returns the file and the picture's note.
pub(crate) fn write_svg(
    args: &ReportArgs,
    topo: &Topo<'_>,
    metrics: &Metrics,
    validation: &sm_routing::Validation,
    title: &str,
    outputs: &mut Outputs,
    progress: &Progress,
) -> anyhow::Result<()> {
    let Some(path) = &args.svg else {
        return Ok(());
    };
    progress.phase(format!("drawing {}", path.display()));
    // The verdict goes with the picture: a cool map of tables that deadlock misleads.
    let v = validation;
    let title = format!(
        "{title}: {}, {} unreachable pair(s), {} forwarding loop(s), {} credit loop(s)",
        if v.is_valid() { "VALID" } else { "INVALID" },
        v.unreachable_pairs - v.excused_pairs(),
        v.forwarding_loops,
        v.credit_loops
    );
    let pic = svg::heat_map(topo, metrics, &title);
    write_file(path, |w| w.write_all(pic.svg.as_bytes()))?;
    outputs.svg = Some(path.display().to_string());
    outputs.svg_note = pic.note;
    Ok(())
}
