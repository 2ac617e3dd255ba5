//! `ibsm analyze`: validate and measure forwarding tables another SM produced (OpenSM's
//! `opensm-lfts.dump` or `ibroute` output) on the topology they were made for.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, bail};
use sm_core::dump::{LftFormat, Lfts, read_lfts, read_lfts_as};
use std::sync::Arc;

use sm_routing::sl::{SourceSl, read_uniform_sl2vl};
use sm_routing::validate::VlFn;
use sm_routing::{Routes, Topo};

use super::analysis::{
    Outputs, Progress, Report, ReportArgs, ReportInput, TablesIn, analyse, lids_from_guid2lid,
    lids_from_tables, lids_from_topology, read_fabric, write_svg,
};

/// Arguments of `ibsm analyze`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  ibsm analyze --topo ibnetdiscover.txt --lfts opensm-lfts.dump
  ibsm analyze --topo fabric.net --guid2lid guid2lid --lfts opensm-lfts.dump --report json
  ibsm analyze --topo ibnetdiscover.txt --lfts ibroute.txt --svg load.svg
  ibsm analyze --topo t.txt --lfts opensm-lfts.dump --path-sl sl.txt --sl2vl opensm-sl2vl.dump

Tables are matched to the topology by switch GUID and by LID: the LIDs come from the
topology (an ibnetdiscover dump taken after the SM brought the subnet up), from the SM's
guid2lid file, or, for a topology without LIDs (an ibsim net file), from the port GUIDs an
opensm-lfts.dump names for every LID. Tables that do not describe the topology are refused,
naming what differs.

Exit status: 0 when the tables are VALID, 2 when they are INVALID (unreachable pairs, stale
LIDs or credit loops; the report is printed all the same), 1 on any other error.")]
pub(crate) struct Args {
    /// The topology: ibnetdiscover output or an ibsim net file.
    #[arg(long, value_name = "FILE")]
    topo: PathBuf,
    /// The forwarding tables: opensm-lfts.dump or ibroute output (several runs concatenated).
    #[arg(long, value_name = "FILE")]
    lfts: PathBuf,
    /// Format of --lfts (default: detected).
    #[arg(long, value_enum, default_value_t = InFormat::Auto, value_name = "FORMAT")]
    lfts_format: InFormat,
    /// Take the LIDs from this guid2lid file (OpenSM's) instead of the topology.
    #[arg(long, value_name = "FILE")]
    guid2lid: Option<PathBuf>,
    /// The SL of every path (`ibsm route --path-sl-out`'s format, or gathered from an SA's
    /// PathRecords): credit loops are then looked for per VL.
    #[arg(long, value_name = "FILE")]
    path_sl: Option<PathBuf>,
    /// SL-to-VL tables (opensm-sl2vl.dump) mapping the path SLs to VLs (default: SL i on
    /// VL i). Tables that change VL from hop to hop are refused.
    #[arg(long, value_name = "FILE", requires = "path_sl")]
    sl2vl: Option<PathBuf>,
    #[command(flatten)]
    report: ReportArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum InFormat {
    Auto,
    Opensm,
    Ibroute,
}

/// At most this many mismatches are listed in the error.
const MAX_LISTED: usize = 10;

fn read_tables(args: &Args) -> anyhow::Result<(Lfts, LftFormat)> {
    let path = &args.lfts;
    let forced = match args.lfts_format {
        InFormat::Auto => None,
        InFormat::Opensm => Some(LftFormat::OpenSm),
        InFormat::Ibroute => Some(LftFormat::Ibroute),
    };
    let text = std::fs::read(path)
        .with_context(|| format!("{}: cannot read the forwarding tables", path.display()))?;
    let text = String::from_utf8_lossy(&text);
    let format = forced
        .or_else(|| sm_core::dump::detect_format(&text))
        .with_context(|| {
            format!(
                "{}: no forwarding table in it (expected opensm-lfts.dump or ibroute output, \
                 whose tables start with `Unicast lids [...] of switch ...`)",
                path.display()
            )
        })?;
    let lfts = match forced {
        Some(f) => read_lfts_as(&text, path, f)?,
        None => read_lfts(path)?,
    };
    if lfts.switches.is_empty() {
        bail!("{}: no forwarding table in it", path.display());
    }
    Ok((lfts, format))
}

/// The VL of every pair, from `--path-sl` and `--sl2vl`.
fn path_vls(args: &Args) -> anyhow::Result<Option<Arc<VlFn>>> {
    let Some(path) = &args.path_sl else {
        return Ok(None);
    };
    let read = |p: &PathBuf| {
        std::fs::read_to_string(p).with_context(|| format!("{}: cannot read", p.display()))
    };
    let sls = SourceSl::parse(&read(path)?, &path.display().to_string())?;
    let map = match &args.sl2vl {
        Some(p) => read_uniform_sl2vl(&read(p)?, &p.display().to_string())?,
        None => std::array::from_fn(|i| i as u8),
    };
    let f: Arc<VlFn> = Arc::new(move |src, lid| {
        sls.get(src.base_lid, lid)
            .map_or(0, |sl| map[usize::from(sl & 15)])
    });
    Ok(Some(f))
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let progress = Progress::new();
    progress.phase(format!("reading {}", args.topo.display()));
    let mut fabric = read_fabric(&args.topo)?;
    progress.phase(format!("reading {}", args.lfts.display()));
    let (lfts, format) = read_tables(&args)?;
    let lidless = fabric.end_ports().all(|p| fabric.port(p).lid.0 == 0);
    let lids = match &args.guid2lid {
        Some(g) => lids_from_guid2lid(&mut fabric, g)?,
        None if lidless => lids_from_tables(&mut fabric, &lfts, &args.topo, &args.lfts)?,
        None => lids_from_topology(&fabric, &args.topo)?,
    };
    if let Err(mismatches) = lfts.check_against(&fabric) {
        let mut msg = format!(
            "{} does not describe the fabric of {}{}: {} mismatch(es)",
            args.lfts.display(),
            args.topo.display(),
            args.guid2lid
                .as_ref()
                .map(|g| format!(" with the LIDs of {}", g.display()))
                .unwrap_or_default(),
            mismatches.len()
        );
        for m in mismatches.iter().take(MAX_LISTED) {
            let _ = write!(msg, "\n  {m}");
        }
        if mismatches.len() > MAX_LISTED {
            let _ = write!(msg, "\n  ... {} more", mismatches.len() - MAX_LISTED);
        }
        msg.push_str(
            "\n(tables and topology must come from the same subnet and the same SM run: \
             SMs number LIDs differently)",
        );
        bail!(msg);
    }
    let topo = Topo::new(&fabric)
        .with_context(|| format!("{}: cannot analyse this fabric", args.topo.display()))?;
    let routes = Routes::from_lfts(&lfts, &topo).map_err(|guid| {
        anyhow::anyhow!(
            "{}: switch {guid} is not a switch of {}",
            args.lfts.display(),
            args.topo.display()
        )
    })?;
    let with_table = lfts.switches.len();
    let tables = TablesIn {
        file: args.lfts.display().to_string(),
        format: match format {
            LftFormat::OpenSm => "opensm",
            LftFormat::Ibroute => "ibroute",
        },
        switches_with_table: with_table,
        switches_without_table: topo.num_switches().saturating_sub(with_table),
    };

    let vl = path_vls(&args)?;
    let analysis = analyse(&topo, &routes, &args.report, &progress, vl);
    let mut outputs = Outputs::default();
    let title = format!(
        "{}: tables of {} (ibsm analyze)",
        args.topo.display(),
        args.lfts.display()
    );
    write_svg(
        &args.report,
        &topo,
        &analysis.metrics,
        &analysis.validation,
        &title,
        &mut outputs,
        &progress,
    )?;
    progress.done();
    let report = Report::new(
        ReportInput {
            topo_path: &args.topo,
            fabric: &fabric,
            engine: "external".into(),
            engine_used: args.lfts.display().to_string(),
            engine_method: None,
            fallbacks: Vec::new(),
            tables: Some(tables),
            lids,
            route_ms: None,
            adaptive: None,
            outputs,
        },
        analysis,
    );
    report.print(args.report.json())?;
    report.verdict()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn topology_and_tables_are_required() {
        assert!(Cli::try_parse_from(["analyze", "--topo", "t.net"]).is_err());
        let cli = Cli::try_parse_from([
            "analyze",
            "--topo",
            "t.net",
            "--lfts",
            "x.dump",
            "--lfts-format",
            "ibroute",
        ])
        .unwrap();
        assert_eq!(cli.args.lfts_format, InFormat::Ibroute);
    }
}
