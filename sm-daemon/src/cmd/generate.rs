//! `ibsm gen`: topology generators, written as an ibnetdiscover / ibsim net file.
//!
//! The constructions, GUID scheme and port layout are documented in
//! `sm_core::generate`; this module maps command-line options onto a [`GenSpec`].

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use sm_core::generate::{
    Dragonfly, DragonflyPlus, FatTree2, FatTree3, GenSpec, Grid, IbsimLimits, KaryNTree, Random,
    Ratio, generate,
};
use sm_core::topo::{WriteOptions, write_ibnetdiscover};

/// Arguments of `ibsm gen`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  ibsm gen fat-tree --levels 2 --radix 36 -o ft2.net      648 hosts, 36 leaves, 18 spines
  ibsm gen fat-tree --levels 3 --radix 36 --pods 8        2,592 hosts, 612 switches
  ibsm gen fat-tree --levels 3 --radix 48                 27,648 hosts, 2,880 switches
  ibsm gen fat-tree --levels 3 --radix 36 --kary          k-ary n-tree: 5,832 hosts
  ibsm gen torus --dims 4x4x4 --hosts 2
  ibsm gen mesh --dims 8x8
  ibsm gen dragonfly --groups 9 --switches 4 --hosts 2 --global 2 [--plus]
  ibsm gen random --switches 50 --radix 16 --hosts 4 --seed 7
  ibsm gen spec my-fabric.json                            a serialized GenSpec

The summary on stderr names the ibsim limits the fabric needs (ibsim -N -S -P [-L]).")]
pub(crate) struct Args {
    /// Write the topology here instead of to stdout.
    #[arg(short, long, global = true, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Ports per CA (all cabled to the same switch).
    #[arg(long, global = true, default_value_t = 1, value_name = "N")]
    ca_ports: u32,
    /// Print the generator spec as JSON on stderr as well.
    #[arg(long, global = true)]
    print_spec: bool,
    /// Remove this fraction (0 to 1) of the switch-to-switch links, as failed cables do;
    /// links whose loss would split the switches are kept.
    #[arg(long, global = true, value_name = "FRACTION", value_parser = fraction)]
    remove_links: Option<f64>,
    /// Seed of --remove-links.
    #[arg(long, global = true, default_value_t = 1, value_name = "N")]
    remove_seed: u64,
    #[command(subcommand)]
    family: Family,
}

#[derive(Debug, clap::Subcommand)]
enum Family {
    /// Fat-tree: 2-level leaf/spine, 3-level pod/core, or k-ary n-tree.
    FatTree(FatTreeArgs),
    /// Torus (grid with wraparound links).
    Torus(GridArgs),
    /// Mesh (grid without wraparound).
    Mesh(GridArgs),
    /// Dragonfly (all-to-all groups) or, with --plus, dragonfly+ (leaf/spine groups).
    Dragonfly(DragonflyArgs),
    /// Seeded random irregular switch graph (connected).
    Random(RandomArgs),
    /// Read a generator spec (JSON, as --print-spec shows it) from a file.
    Spec {
        /// The JSON file.
        file: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
struct FatTreeArgs {
    /// Switch tiers: 2 (leaf/spine), 3 (pods under cores) or more (k-ary n-tree).
    #[arg(long, default_value_t = 2)]
    levels: u32,
    /// Ports per switch.
    #[arg(long)]
    radix: u32,
    /// Use the k-ary n-tree (k = radix/2, k^n hosts) instead of the 2- or 3-level tree
    /// whose top tier uses every port downwards; implied for 4 levels or more.
    #[arg(long)]
    kary: bool,
    /// Hosts per leaf (default: radix/2).
    #[arg(long, visible_alias = "hosts")]
    hosts_per_leaf: Option<u32>,
    /// Host ports to uplinks per leaf, e.g. 2:1 (2 levels; must divide the radix).
    #[arg(long, value_name = "DOWN:UP")]
    oversubscription: Option<Ratio>,
    /// Uplinks per leaf (2 levels; default: every port hosts leave free).
    #[arg(long)]
    uplinks: Option<u32>,
    /// Number of leaves (2 levels; default: as many as the spines' ports take).
    #[arg(long)]
    leaves: Option<u32>,
    /// Number of spines (2 levels; default: uplinks per leaf).
    #[arg(long)]
    spines: Option<u32>,
    /// Number of pods (3 levels; default: radix, the full tree).
    #[arg(long)]
    pods: Option<u32>,
}

#[derive(Debug, clap::Args)]
struct GridArgs {
    /// Switches per dimension, e.g. 4x4x4.
    #[arg(long, value_parser = parse_dims)]
    dims: Sizes,
    /// Hosts per switch.
    #[arg(long, default_value_t = 1)]
    hosts: u32,
    /// Parallel links per dimension: one value for all, or one per dimension (e.g. 2x1x1).
    #[arg(long, value_parser = parse_dims)]
    parallel: Option<Sizes>,
    /// Ports per switch (default: exactly what hosts and links need).
    #[arg(long)]
    radix: Option<u32>,
}

#[derive(Debug, clap::Args)]
struct DragonflyArgs {
    /// Number of groups.
    #[arg(long)]
    groups: u32,
    /// Routers per group (with --plus: leaves per group, and spines unless --spines).
    #[arg(long)]
    switches: u32,
    /// Hosts per router (with --plus: per leaf).
    #[arg(long, default_value_t = 1)]
    hosts: u32,
    /// Global links per router (with --plus: per spine).
    #[arg(long)]
    global: u32,
    /// Dragonfly+: each group a leaf/spine tree, global links on the spines.
    #[arg(long)]
    plus: bool,
    /// Spines per group (dragonfly+ only; default: --switches).
    #[arg(long, requires = "plus")]
    spines: Option<u32>,
    /// Ports per switch (default: what the busiest switch needs).
    #[arg(long)]
    radix: Option<u32>,
}

#[derive(Debug, clap::Args)]
struct RandomArgs {
    /// Number of switches.
    #[arg(long)]
    switches: u32,
    /// Ports per switch.
    #[arg(long)]
    radix: u32,
    /// Hosts per switch.
    #[arg(long, default_value_t = 1)]
    hosts: u32,
    /// Switch-to-switch links (default: as many as the free ports allow).
    #[arg(long)]
    links: Option<u64>,
    /// Seed of the random generator (same seed, same fabric).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Sizes written `4x4x4` (one value per dimension).
#[derive(Debug, Clone)]
struct Sizes(Vec<u32>);

fn parse_dims(s: &str) -> Result<Sizes, String> {
    s.split(['x', 'X', ','])
        .map(|d| {
            d.trim()
                .parse::<u32>()
                .map_err(|_| format!("\"{s}\" is not a list of sizes such as 4x4x4"))
        })
        .collect::<Result<Vec<u32>, String>>()
        .map(Sizes)
}

fn spec_of(args: &Args) -> anyhow::Result<GenSpec> {
    let ca_ports = args.ca_ports;
    Ok(match &args.family {
        Family::FatTree(a) => fat_tree_spec(a, ca_ports)?,
        Family::Torus(g) => GenSpec::Torus(grid_spec(g, ca_ports)),
        Family::Mesh(g) => GenSpec::Mesh(grid_spec(g, ca_ports)),
        Family::Dragonfly(d) if d.plus => GenSpec::DragonflyPlus(DragonflyPlus {
            groups: d.groups,
            leaves_per_group: d.switches,
            spines_per_group: d.spines.unwrap_or(d.switches),
            hosts_per_leaf: d.hosts,
            global_per_spine: d.global,
            radix: d.radix,
            ca_ports,
        }),
        Family::Dragonfly(d) => GenSpec::Dragonfly(Dragonfly {
            groups: d.groups,
            switches_per_group: d.switches,
            hosts_per_switch: d.hosts,
            global_per_switch: d.global,
            radix: d.radix,
            ca_ports,
        }),
        Family::Random(r) => GenSpec::Random(Random {
            switches: r.switches,
            radix: r.radix,
            hosts_per_switch: r.hosts,
            links: r.links,
            seed: r.seed,
            ca_ports,
        }),
        Family::Spec { file } => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("{}: not a generator spec", file.display()))?
        }
    })
}

fn fat_tree_spec(a: &FatTreeArgs, ca_ports: u32) -> anyhow::Result<GenSpec> {
    let two_level_only = [
        ("--oversubscription", a.oversubscription.is_some()),
        ("--uplinks", a.uplinks.is_some()),
        ("--leaves", a.leaves.is_some()),
        ("--spines", a.spines.is_some()),
    ];
    let refuse = |what: &str, levels: &str| -> anyhow::Result<()> {
        anyhow::bail!(
            "{what} applies to {levels} only (got --levels {})",
            a.levels
        )
    };
    let kary = a.kary || a.levels > 3;
    if a.levels == 2 && !kary {
        if a.pods.is_some() {
            refuse("--pods", "--levels 3")?;
        }
        return Ok(GenSpec::FatTree2(FatTree2 {
            radix: a.radix,
            hosts_per_leaf: a.hosts_per_leaf,
            oversubscription: a.oversubscription,
            uplinks: a.uplinks,
            leaves: a.leaves,
            spines: a.spines,
            ca_ports,
        }));
    }
    if let Some((flag, _)) = two_level_only.iter().find(|(_, set)| *set) {
        refuse(flag, "--levels 2")?;
    }
    if kary {
        if a.pods.is_some() {
            refuse("--pods", "--levels 3 without --kary")?;
        }
        if a.hosts_per_leaf.is_some() {
            anyhow::bail!("a k-ary n-tree has radix/2 hosts per leaf; drop --hosts-per-leaf");
        }
        return Ok(GenSpec::KaryNTree(KaryNTree {
            radix: a.radix,
            levels: a.levels,
            ca_ports,
        }));
    }
    if a.levels != 3 {
        anyhow::bail!(
            "--levels {}: a fat-tree has 2, 3 or (as a k-ary n-tree) more levels",
            a.levels
        );
    }
    Ok(GenSpec::FatTree3(FatTree3 {
        radix: a.radix,
        pods: a.pods,
        hosts_per_leaf: a.hosts_per_leaf,
        ca_ports,
    }))
}

fn grid_spec(g: &GridArgs, ca_ports: u32) -> Grid {
    Grid {
        dims: g.dims.0.clone(),
        hosts_per_switch: g.hosts,
        parallel: g.parallel.as_ref().map(|p| p.0.clone()).unwrap_or_default(),
        radix: g.radix,
        ca_ports,
    }
}

fn fraction(s: &str) -> Result<f64, String> {
    let f: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&f) {
        Ok(f)
    } else {
        Err(format!("{f} is not between 0 and 1"))
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let spec = spec_of(&args)?;
    let json = serde_json::to_string(&spec)?;
    if args.print_spec {
        eprintln!("{json}");
    }
    let mut fabric = generate(&spec).context("cannot generate this fabric")?;
    let mut comment = format!("generated by ibsm gen: {json}");
    if let Some(f) = args.remove_links {
        let r = sm_core::generate::remove_links(&mut fabric, f, args.remove_seed);
        eprintln!(
            "removed {} of {} switch-to-switch links (seed {})",
            r.removed, r.of, args.remove_seed
        );
        comment.push_str(&format!(
            "; removed {} of {} switch-to-switch links (--remove-links {f} --remove-seed {})",
            r.removed, r.of, args.remove_seed
        ));
    }
    let opts = WriteOptions {
        comment: Some(comment),
    };
    let target = args.output.as_deref();
    match target {
        Some(path) => {
            let file =
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
            let mut w = BufWriter::new(file);
            write_ibnetdiscover(&fabric, &opts, &mut w)
                .and_then(|()| w.flush())
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        None => {
            let stdout = std::io::stdout();
            let mut w = BufWriter::new(stdout.lock());
            write_ibnetdiscover(&fabric, &opts, &mut w)
                .and_then(|()| w.flush())
                .context("cannot write to stdout")?;
        }
    }
    let c = fabric.counts();
    let limits = IbsimLimits::of(&fabric);
    let file = target.map_or("FILE".to_string(), |p| p.display().to_string());
    eprintln!(
        "{}: {} nodes ({} switches, {} CAs), {} links, {} LIDs; load with: ibsim -s {file} {}",
        spec.family(),
        c.nodes,
        c.switches,
        c.cas,
        c.links,
        limits.lids,
        limits.flags()
    );
    if limits.exceeds_lid_space() {
        eprintln!(
            "warning: {} LIDs exceed the 49,151 unicast LIDs of one subnet",
            limits.lids
        );
    }
    Ok(())
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

    fn spec(line: &str) -> anyhow::Result<GenSpec> {
        let argv = std::iter::once("gen").chain(line.split_whitespace());
        let cli = Cli::try_parse_from(argv)?;
        spec_of(&cli.args)
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn command_lines_map_to_specs() {
        assert_eq!(
            spec("fat-tree --levels 2 --radix 36").unwrap(),
            GenSpec::FatTree2(FatTree2::new(36))
        );
        assert_eq!(
            spec("fat-tree --radix 36 --oversubscription 2:1 -o x.net").unwrap(),
            GenSpec::FatTree2(FatTree2 {
                oversubscription: Some(Ratio { down: 2, up: 1 }),
                ..FatTree2::new(36)
            })
        );
        assert_eq!(
            spec("fat-tree --levels 3 --radix 36 --pods 8").unwrap(),
            GenSpec::FatTree3(FatTree3 {
                pods: Some(8),
                ..FatTree3::new(36)
            })
        );
        assert_eq!(
            spec("fat-tree --levels 3 --radix 36 --kary").unwrap(),
            GenSpec::KaryNTree(KaryNTree {
                radix: 36,
                levels: 3,
                ca_ports: 1
            })
        );
        assert!(matches!(
            spec("fat-tree --levels 5 --radix 4").unwrap(),
            GenSpec::KaryNTree(_)
        ));
        assert_eq!(
            spec("torus --dims 4x4x4 --hosts 2 --parallel 2").unwrap(),
            GenSpec::Torus(Grid {
                parallel: vec![2],
                ..Grid::new(vec![4, 4, 4], 2)
            })
        );
        assert_eq!(
            spec("mesh --dims 8x8").unwrap(),
            GenSpec::Mesh(Grid::new(vec![8, 8], 1))
        );
        assert!(matches!(
            spec("dragonfly --groups 9 --switches 4 --hosts 2 --global 2 --plus").unwrap(),
            GenSpec::DragonflyPlus(DragonflyPlus {
                leaves_per_group: 4,
                spines_per_group: 4,
                ..
            })
        ));
        assert_eq!(
            spec("random --switches 50 --radix 16 --hosts 4 --seed 7 --ca-ports 2").unwrap(),
            GenSpec::Random(Random {
                switches: 50,
                radix: 16,
                hosts_per_switch: 4,
                links: None,
                seed: 7,
                ca_ports: 2,
            })
        );
    }

    #[test]
    fn bad_command_lines_are_errors_not_panics() {
        for line in [
            "fat-tree --levels 2 --radix 36 --pods 4",
            "fat-tree --levels 3 --radix 36 --spines 4",
            "fat-tree --levels 1 --radix 36",
            "fat-tree --levels 3 --kary --radix 8 --hosts 2",
            "fat-tree --radix 99999999999",
            "fat-tree --radix 8 --oversubscription 2",
            "torus --dims 4xx4",
            "torus --dims -1",
            "dragonfly --groups 3 --switches 2 --global 1 --spines 2",
            "random --switches 5",
        ] {
            assert!(spec(line).is_err(), "{line}");
        }
    }

    #[test]
    fn every_example_generates() {
        for line in [
            "fat-tree --levels 2 --radix 8 --leaves 3 --spines 2",
            "fat-tree --levels 3 --radix 8 --pods 2",
            "fat-tree --levels 4 --radix 4",
            "torus --dims 4x4x4 --hosts 2",
            "mesh --dims 8x8",
            "dragonfly --groups 9 --switches 4 --hosts 2 --global 2",
            "dragonfly --groups 9 --switches 4 --hosts 2 --global 2 --plus",
            "random --switches 50 --radix 16 --hosts 4 --seed 7",
        ] {
            let s = spec(line).unwrap();
            generate(&s).unwrap_or_else(|e| panic!("{line}: {e}"));
        }
    }
}
