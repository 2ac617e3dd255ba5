//! The dumps `ibsm run` writes after every heavy sweep: which ones (`[dump] write`), where
//! (`--dump-dir`, else `[dump] dir`), and each file only when its text changed, so an idle
//! subnet does not rewrite the same files every sweep.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::Context;
use sm_core::config::{DumpConfig, DumpKind};
use sm_core::dump::{SubnetLstOptions, write_opensm_lfts, write_subnet_lst};
use sm_core::partitions::write_pkey_tables;
use sm_core::topo::{WriteOptions, write_ibnetdiscover};
use sm_daemon::core::Sm;

/// What `--dump-dir` writes when the configuration lists no dumps (what it always wrote).
const DEFAULT_KINDS: [DumpKind; 2] = [DumpKind::Lfts, DumpKind::SubnetLst];

/// The dumps of one run, and what each file held when it was last written.
#[derive(Debug)]
pub(crate) struct Dumps {
    dir: PathBuf,
    kinds: Vec<DumpKind>,
    /// Length and hash of each file's text as last written.
    written: HashMap<&'static str, (usize, u64)>,
}

impl Dumps {
    /// The dumps a run asks for: `--dump-dir` (`cli_dir`) or a non-empty `[dump] write`;
    /// `None` when neither does.
    pub(crate) fn new(cli_dir: Option<&Path>, cfg: &DumpConfig) -> Option<Dumps> {
        let dir = match cli_dir {
            Some(d) => d.to_path_buf(),
            None if !cfg.write.is_empty() => cfg.dir.clone(),
            None => return None,
        };
        let listed = if cfg.write.is_empty() {
            &DEFAULT_KINDS[..]
        } else {
            &cfg.write[..]
        };
        let mut kinds = Vec::new();
        for k in listed {
            if !kinds.contains(k) {
                kinds.push(*k);
            }
        }
        Some(Dumps {
            dir,
            kinds,
            written: HashMap::new(),
        })
    }

    /// Every file's text now: the configured dumps, and with them the LID store
    /// (`guid2lid`, for `ibsm analyze --guid2lid`) and the adaptive-routing hints.
    fn texts(&self, sm: &Sm) -> anyhow::Result<Vec<(&'static str, Vec<u8>)>> {
        let Some(plan) = sm.plan() else {
            return Ok(Vec::new());
        };
        // Nodes cut off since the last heavy sweep are not part of the subnet.
        let model = sm.model();
        let absent = model.is_some_and(|m| !m.absent.is_empty());
        let present = |n| model.is_none_or(|m| m.present(n));
        let kept;
        let f = if absent {
            kept = plan.fabric.without(|n| !present(n));
            &kept
        } else {
            &plan.fabric
        };
        let mut out = Vec::new();
        for kind in &self.kinds {
            let mut text = Vec::new();
            let name = match kind {
                DumpKind::Lfts => {
                    let mut lfts = plan.to_lfts();
                    lfts.switches.retain(|s| f.node_by_guid(s.guid).is_some());
                    write_opensm_lfts(&lfts, f, &mut text)?;
                    if let Some(ar) = sm.ar_hints() {
                        out.push(("ibsm-ar-hints.dump", ar.as_bytes().to_vec()));
                    }
                    if plan.sl.is_some() {
                        // As `ibsm route --path-sl-out / --sl2vl-out` write them.
                        let topo = sm_routing::Topo::new(&plan.fabric)?;
                        let routes = plan.to_routes();
                        let mut sl = Vec::new();
                        sm_routing::sl::write_path_sl(&topo, &routes, &mut sl)?;
                        out.push(("ibsm-path-sl.dump", sl));
                        let mut vl = Vec::new();
                        sm_routing::sl::write_sl2vl(&topo, &routes, &mut vl)?;
                        out.push(("opensm-sl2vl.dump", vl));
                    }
                    "opensm-lfts.dump"
                }
                DumpKind::SubnetLst => {
                    let sm_lid = Some(sm.own_lid());
                    write_subnet_lst(f, SubnetLstOptions { sm_lid }, &mut text)?;
                    "opensm-subnet.lst"
                }
                DumpKind::Topology => {
                    write_ibnetdiscover(f, &WriteOptions::default(), &mut text)?;
                    "ibsm-topology.net"
                }
                DumpKind::Pkeys => {
                    if absent {
                        let mut pkeys = (*plan.pkeys).clone();
                        let pf = &plan.fabric;
                        pkeys.end_ports.retain(|t| present(pf.port(t.port).node));
                        pkeys.switch_ports.retain(|t| present(pf.port(t.port).node));
                        write_pkey_tables(&pkeys, pf, &mut text)?;
                    } else {
                        write_pkey_tables(&plan.pkeys, f, &mut text)?;
                    }
                    "ibsm-pkeys.dump"
                }
            };
            out.push((name, text));
        }
        out.push(("guid2lid", sm.lid_store().to_guid2lid().into_bytes()));
        Ok(out)
    }

    /// Writes the files whose text changed since they were last written (every file with
    /// `force`); returns the names written.
    pub(crate) fn write(&mut self, sm: &Sm, force: bool) -> anyhow::Result<Vec<&'static str>> {
        let texts = self.texts(sm)?;
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let mut names = Vec::new();
        for (name, text) in texts {
            let mut h = DefaultHasher::new();
            text.hash(&mut h);
            let sum = (text.len(), h.finish());
            if !force && self.written.get(name) == Some(&sum) {
                continue;
            }
            let path = self.dir.join(name);
            // Through a temporary file: a reader never sees half a dump.
            let tmp = self.dir.join(format!(".{name}.tmp"));
            std::fs::write(&tmp, &text)
                .and_then(|()| std::fs::rename(&tmp, &path))
                .with_context(|| format!("writing {}", path.display()))?;
            self.written.insert(name, sum);
            names.push(name);
        }
        if !names.is_empty() {
            tracing::info!(dir = %self.dir.display(), files = %names.join(" "), "dumps written");
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_core::generate::{FatTree2, GenSpec, generate};
    use sm_core::lid::LidStore;
    use sm_daemon::core::{Event, Params};
    use sm_daemon::transport::sim::SimDriver;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ibsm-dumps-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn heavy_sweep(d: &mut SimDriver) {
        let e = d.run_until(10_000_000_000, |e| matches!(e, Event::SweepDone(_)));
        assert!(matches!(e, Some(Event::SweepDone(r)) if r.subnet_up));
    }

    #[test]
    fn only_changed_dumps_are_written_again() {
        let fabric = generate(&GenSpec::FatTree2(FatTree2::new(4))).unwrap();
        let sm_port = fabric
            .cas()
            .flat_map(|n| fabric.node_ports(n))
            .find(|p| fabric.port(*p).remote.is_some())
            .unwrap();
        let mut d = SimDriver::new(
            &fabric,
            sm_port,
            Params::default(),
            LidStore::new(),
            sm_sim::SimConfig::default(),
        );
        let dir = scratch("changed");
        let cfg = DumpConfig {
            dir: dir.clone(),
            write: vec![
                DumpKind::Lfts,
                DumpKind::SubnetLst,
                DumpKind::Topology,
                DumpKind::Pkeys,
            ],
        };
        let mut dumps = Dumps::new(None, &cfg).unwrap();
        assert!(
            dumps.write(&d.sm, false).unwrap().is_empty(),
            "before a sweep"
        );
        d.start();
        heavy_sweep(&mut d);
        let all = [
            "opensm-lfts.dump",
            "opensm-subnet.lst",
            "ibsm-topology.net",
            "ibsm-pkeys.dump",
            "guid2lid",
        ];
        assert_eq!(dumps.write(&d.sm, false).unwrap(), all);
        let pkeys = std::fs::read_to_string(dir.join("ibsm-pkeys.dump")).unwrap();
        assert!(pkeys.contains(" 0xffff"), "{pkeys}");

        // The next sweep finds the ports ACTIVE (the first one saw them in INIT): only the
        // link list changes.
        let now = d.now();
        d.sm.request_sweep(sm_daemon::core::Instant::from_nanos(now), true);
        heavy_sweep(&mut d);
        assert_eq!(dumps.write(&d.sm, false).unwrap(), ["opensm-subnet.lst"]);
        // A heavy sweep that finds the same subnet: nothing is rewritten (a file changed
        // behind our back stays as it is).
        std::fs::write(dir.join("opensm-lfts.dump"), "edited").unwrap();
        let now = d.now();
        d.sm.request_sweep(sm_daemon::core::Instant::from_nanos(now), true);
        heavy_sweep(&mut d);
        let again = dumps.write(&d.sm, false).unwrap();
        assert!(again.is_empty(), "{again:?}");
        assert_eq!(
            std::fs::read_to_string(dir.join("opensm-lfts.dump")).unwrap(),
            "edited"
        );
        // SIGUSR1 writes everything.
        assert_eq!(dumps.write(&d.sm, true).unwrap(), all);
        assert_ne!(
            std::fs::read_to_string(dir.join("opensm-lfts.dump")).unwrap(),
            "edited"
        );

        // A host gone: the tables, the links and the topology change; P_Keys and LIDs not.
        let host = fabric.port(sm_port).node;
        let other = fabric
            .cas()
            .filter(|&n| n != host)
            .flat_map(|n| fabric.node_ports(n))
            .find(|p| fabric.port(*p).remote.is_some())
            .unwrap();
        d.sim.link_down(other);
        let now = d.now();
        d.sm.request_sweep(sm_daemon::core::Instant::from_nanos(now), true);
        heavy_sweep(&mut d);
        let changed = dumps.write(&d.sm, false).unwrap();
        assert!(changed.contains(&"opensm-subnet.lst"), "{changed:?}");
        assert!(changed.contains(&"ibsm-topology.net"), "{changed:?}");
        assert!(!changed.contains(&"guid2lid"), "{changed:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dump_dir_alone_writes_the_tables_and_the_link_list() {
        let cfg = DumpConfig::default();
        assert!(Dumps::new(None, &cfg).is_none());
        let d = Dumps::new(Some(Path::new("/tmp/x")), &cfg).unwrap();
        assert_eq!(d.kinds, DEFAULT_KINDS);
        assert_eq!(&*d.dir, Path::new("/tmp/x"));
        let listed = DumpConfig {
            write: vec![DumpKind::Pkeys],
            ..DumpConfig::default()
        };
        let d = Dumps::new(None, &listed).unwrap();
        assert_eq!(
            (&*d.dir, &d.kinds[..]),
            (Path::new("/var/log/ibsm"), &[DumpKind::Pkeys][..])
        );
        // --dump-dir overrides [dump] dir, not the list.
        let d = Dumps::new(Some(Path::new("/tmp/y")), &listed).unwrap();
        assert_eq!(
            (&*d.dir, &d.kinds[..]),
            (Path::new("/tmp/y"), &[DumpKind::Pkeys][..])
        );
    }
}
