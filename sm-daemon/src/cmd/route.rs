//! `ibsm route`: route a topology file offline with an engine chain, validate and measure
//! the tables, and write them as OpenSM does (`opensm-lfts.dump`, or `ibroute` output).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use sm_core::dump::{IbrouteOptions, write_ibroute, write_opensm_lfts};
use sm_daemon::config::guid_file;
use sm_routing::ar::{ArDump, write_ar};
use sm_routing::{Options, Topo, route_chain};

use super::analysis::{
    ArSummary, Outputs, Progress, Report, ReportArgs, ReportInput, analyse, guid2lid_text, ms,
    read_fabric, write_file, write_svg,
};

/// Arguments of `ibsm route`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  ibsm route ft.net --engine ftree                        text report
  ibsm route ft.net --engine ftree,updn,minhop --report json
  ibsm route ft.net --engine updn --lfts-out opensm-lfts.dump --svg load.svg
  ibsm route ft.net --engine minhop --lmc 1 --adaptive --ar-out ar.txt
  ibsm route torus.net --vls 4 --path-sl-out path-sl.txt   auto: layered, on 4 VLs

LIDs: a topology whose ports carry LIDs (an ibnetdiscover dump of a running subnet) keeps
them; otherwise LIDs are assigned as `ibsm run` would (--lmc applies). The report says which.

Exit status: 0 when the tables are VALID, 2 when they are INVALID (unreachable pairs, stale
LIDs or credit loops; the report is printed all the same), 1 on any other error.")]
pub(crate) struct Args {
    /// The topology: ibnetdiscover output or an ibsim net file.
    topo: PathBuf,
    /// Routing engine, or a comma-separated chain tried in order (minhop, updn, ftree,
    /// layered; auto = ftree on a clean fat-tree, layered otherwise).
    #[arg(
        long,
        short = 'e',
        alias = "routing",
        value_name = "E[,E..]",
        default_value = "auto"
    )]
    engine: String,
    /// LMC for assigned LIDs: 2^LMC LIDs per CA port (default 0).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=7))]
    lmc: Option<u8>,
    /// Replace the LIDs the topology carries with freshly assigned ones.
    #[arg(long)]
    assign_lids: bool,
    /// Root switches (updn, ftree): a file of node GUIDs, one per line (OpenSM's format).
    #[arg(long, value_name = "FILE")]
    roots: Option<PathBuf>,
    /// Compute nodes (ftree): a file of CA port GUIDs, one per line (OpenSM's format).
    #[arg(long, visible_alias = "cn", value_name = "FILE")]
    compute_nodes: Option<PathBuf>,
    /// Virtual lanes the layered engine may use (1 to 15; default 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=15))]
    vls: Option<u8>,
    /// Also compute adaptive-routing port groups (implied by --ar-out).
    #[arg(long)]
    adaptive: bool,
    /// The SM's LID: where no host's traffic to it passes, its routes break ties per
    /// switch, as `ibsm run` routes them, so the tables are the ones that SM programs
    /// (they are as balanced either way).
    #[arg(long, value_name = "LID")]
    sm_lid: Option<u16>,
    /// Write the forwarding tables here.
    #[arg(long, value_name = "FILE")]
    lfts_out: Option<PathBuf>,
    /// Format of --lfts-out: OpenSM's opensm-lfts.dump, or ibroute output.
    #[arg(long, value_enum, default_value_t = LftsFormat::Opensm, value_name = "FORMAT")]
    lfts_format: LftsFormat,
    /// Write the adaptive-routing hints here (JSON when the name ends in .json, else text).
    #[arg(long, value_name = "FILE")]
    ar_out: Option<PathBuf>,
    /// Write the SL of every path: a line per source LID, `0xSSSS: s s ...`, one hex digit
    /// per destination LID from 1 up, `-` where the pair is not routed.
    #[arg(long, value_name = "FILE")]
    path_sl_out: Option<PathBuf>,
    /// Write the SL-to-VL tables every port needs, in OpenSM's opensm-sl2vl.dump layout.
    #[arg(long, value_name = "FILE")]
    sl2vl_out: Option<PathBuf>,
    /// Write the LIDs used, in OpenSM's guid2lid format (for `ibsm analyze --guid2lid`).
    #[arg(long, value_name = "FILE")]
    guid2lid_out: Option<PathBuf>,
    #[command(flatten)]
    report: ReportArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LftsFormat {
    /// `opensm-lfts.dump`.
    Opensm,
    /// `ibroute` output, one run per switch concatenated.
    Ibroute,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let progress = Progress::new();
    progress.phase(format!("reading {}", args.topo.display()));
    let mut fabric = read_fabric(&args.topo)?;
    let lids = super::analysis::lids_for_routing(&mut fabric, args.lmc, args.assign_lids)
        .with_context(|| format!("{}", args.topo.display()))?;
    let mut opts = Options {
        adaptive: args.adaptive || args.ar_out.is_some(),
        vl_budget: args.vls.unwrap_or(0),
        ..Options::default()
    };
    opts.roots = guid_file("--roots", args.roots.as_deref())?;
    opts.compute_nodes = guid_file("--compute-nodes", args.compute_nodes.as_deref())?;
    let topo = Topo::new(&fabric)
        .with_context(|| format!("{}: cannot route this fabric", args.topo.display()))?;
    if let Some(lid) = args.sm_lid {
        anyhow::ensure!(
            topo.dest_of(sm_mad::Lid(lid)).is_some(),
            "--sm-lid {lid}: no port of {} holds that LID",
            args.topo.display()
        );
        opts.sm_lid = Some(sm_mad::Lid(lid));
    }

    progress.phase(format!("routing with {}", args.engine));
    let t = Instant::now();
    let chain = route_chain(&args.engine, &topo, &opts)
        .with_context(|| format!("{}: routing failed", args.topo.display()))?;
    let route_ms = ms(t.elapsed());
    let routes = chain.routes;

    let mut outputs = Outputs::default();
    if let Some(path) = &args.lfts_out {
        progress.phase(format!("writing {}", path.display()));
        let mut lfts = routes.to_lfts(&topo);
        lfts.sort_opensm_order();
        write_file(path, |w| match args.lfts_format {
            LftsFormat::Opensm => write_opensm_lfts(&lfts, &fabric, w),
            LftsFormat::Ibroute => write_ibroute(&lfts, &fabric, IbrouteOptions::default(), w),
        })?;
        outputs.lfts = Some(path.display().to_string());
        outputs.lfts_format = Some(match args.lfts_format {
            LftsFormat::Opensm => "opensm",
            LftsFormat::Ibroute => "ibroute",
        });
    }
    if let Some(path) = &args.ar_out {
        let json = path.extension().is_some_and(|e| e == "json");
        write_file(path, |w| {
            if json {
                serde_json::to_writer_pretty(&mut *w, &ArDump::new(&routes, &topo))
                    .map_err(std::io::Error::other)?;
                writeln!(w)
            } else {
                write_ar(&routes, &topo, w)
            }
        })?;
        outputs.ar = Some(path.display().to_string());
    }
    if let Some(path) = &args.path_sl_out {
        write_file(path, |w| sm_routing::sl::write_path_sl(&topo, &routes, w))?;
        outputs.path_sl = Some(path.display().to_string());
    }
    if let Some(path) = &args.sl2vl_out {
        write_file(path, |w| sm_routing::sl::write_sl2vl(&topo, &routes, w))?;
        outputs.sl2vl = Some(path.display().to_string());
    }
    if let Some(path) = &args.guid2lid_out {
        write_file(path, |w| w.write_all(guid2lid_text(&fabric).as_bytes()))?;
        outputs.guid2lid = Some(path.display().to_string());
    }

    let analysis = analyse(&topo, &routes, &args.report, &progress, None);
    let title = format!(
        "{}: {} tables (ibsm route)",
        args.topo.display(),
        routes.engine
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
            engine: args.engine.clone(),
            engine_used: routes.engine.to_string(),
            engine_method: routes.method.clone(),
            fallbacks: chain.fallbacks,
            tables: None,
            lids,
            route_ms: Some(route_ms),
            adaptive: ArSummary::of(&routes),
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
    fn options_parse() {
        let cli = Cli::try_parse_from([
            "route",
            "ft.net",
            "--engine",
            "ftree,updn",
            "--lmc",
            "2",
            "--lfts-format",
            "ibroute",
            "--report",
            "json",
            "--shifts",
            "8",
        ])
        .unwrap();
        assert_eq!(cli.args.engine, "ftree,updn");
        assert_eq!(cli.args.lmc, Some(2));
        assert_eq!(cli.args.lfts_format, LftsFormat::Ibroute);
        assert!(cli.args.report.json());
        assert!(Cli::try_parse_from(["route", "ft.net", "--engine", "x", "--lmc", "8"]).is_err());
        // The engine defaults to auto; the topology is required.
        assert_eq!(
            Cli::try_parse_from(["route", "ft.net"])
                .unwrap()
                .args
                .engine,
            "auto"
        );
        assert!(Cli::try_parse_from(["route"]).is_err());
        assert!(Cli::try_parse_from(["route", "t.net", "--vls", "16"]).is_err());
        assert!(Cli::try_parse_from(["route", "t.net", "--vls", "0"]).is_err());
    }
}
