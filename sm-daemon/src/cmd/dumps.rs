//! The dumps `ibsm run` writes after every sweep and repair that changed them: which ones
//! (`[dump] write`), where (`--dump-dir`, else `[dump] dir`), and each file only when its
//! text changed, so an idle subnet does not rewrite the same files every sweep.

use std::collections::{BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

use anyhow::Context;
use sm_core::config::{DumpConfig, DumpKind};
use sm_core::dump::{OpensmLftWriter, SubnetLstOptions, write_subnet_lst};
use sm_core::fabric::{NodeIdx, PortIdx};
use sm_core::partitions::write_pkey_tables;
use sm_core::topo::{WriteOptions, write_ibnetdiscover};
use sm_daemon::core::{Discovered, Plan, Sm};
use sm_mad::Lid;

/// What `--dump-dir` writes when the configuration lists no dumps (what it always wrote).
const DEFAULT_KINDS: [DumpKind; 2] = [DumpKind::Lfts, DumpKind::SubnetLst];

/// What the dumps are made from, taken from the SM when they are asked for: the SM goes
/// on while they are written.
struct Job {
    plan: Arc<Plan>,
    /// The model: the ports' states as the SM last set or read them.
    model: Option<Arc<Discovered>>,
    /// Nodes cut off since the last heavy sweep: not part of the subnet.
    absent: BTreeSet<NodeIdx>,
    sm_lid: Lid,
    guid2lid: String,
    force: bool,
}

impl Job {
    fn of(sm: &Sm, force: bool) -> Option<Job> {
        let (plan, model) = sm.snapshot()?;
        Some(Job {
            plan,
            absent: model.as_ref().map(|m| m.absent.clone()).unwrap_or_default(),
            model,
            sm_lid: sm.own_lid(),
            guid2lid: sm.lid_store().to_guid2lid(),
            force,
        })
    }
}

/// The dumps of one run. A write the SM need not wait for goes to a thread of its own: at
/// tens of thousands of hosts the tables' text takes seconds, and the SM keeps repairing
/// meanwhile. Only the newest snapshot asked for is written.
pub(crate) struct Dumps {
    files: Arc<Mutex<Files>>,
    queue: Arc<Queue>,
    worker: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct Queue {
    pending: Mutex<Pending>,
    changed: Condvar,
}

#[derive(Default)]
struct Pending {
    job: Option<Job>,
    busy: bool,
    quit: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl std::fmt::Debug for Dumps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dumps")
            .field("dir", &lock(&self.files).dir)
            .finish()
    }
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
        let files = Files {
            dir,
            kinds,
            written: HashMap::new(),
            made_from: None,
        };
        Some(Dumps {
            files: Arc::new(Mutex::new(files)),
            queue: Arc::default(),
            worker: None,
        })
    }

    /// Writes now, after any write under way: the files whose text changed since they were
    /// last written (every file with `force`); returns the names written.
    pub(crate) fn write(&mut self, sm: &Sm, force: bool) -> anyhow::Result<Vec<&'static str>> {
        self.flush();
        let Some(job) = Job::of(sm, force) else {
            return Ok(Vec::new());
        };
        lock(&self.files).write(&job)
    }

    /// Writes on the dumps' thread; a failure is logged there. A snapshot still waiting
    /// when a newer one comes is dropped for it.
    pub(crate) fn write_later(&mut self, sm: &Sm, force: bool) {
        let Some(mut job) = Job::of(sm, force) else {
            return;
        };
        {
            let mut p = lock(&self.queue.pending);
            if let Some(old) = p.job.take() {
                job.force |= old.force;
            }
            p.job = Some(job);
        }
        self.queue.changed.notify_all();
        if self.worker.is_none() {
            let (files, queue) = (Arc::clone(&self.files), Arc::clone(&self.queue));
            let spawned = std::thread::Builder::new()
                .name("ibsm-dumps".into())
                .spawn(move || work(&files, &queue));
            match spawned {
                Ok(h) => self.worker = Some(h),
                Err(e) => tracing::error!("dumps not written: no thread for them: {e}"),
            }
        }
    }

    /// Waits for the write under way and the one waiting, if any.
    pub(crate) fn flush(&self) {
        if self.worker.is_none() {
            return;
        }
        let mut p = lock(&self.queue.pending);
        while p.job.is_some() || p.busy {
            p = self
                .queue
                .changed
                .wait(p)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Dumps {
    fn drop(&mut self) {
        lock(&self.queue.pending).quit = true;
        self.queue.changed.notify_all();
        if let Some(h) = self.worker.take() {
            let _ = h.join();
        }
    }
}

/// The dumps' thread: the newest job, one at a time, until the run ends.
fn work(files: &Mutex<Files>, queue: &Queue) {
    loop {
        let job = {
            let mut p = lock(&queue.pending);
            loop {
                if let Some(j) = p.job.take() {
                    p.busy = true;
                    break j;
                }
                if p.quit {
                    return;
                }
                p = queue.changed.wait(p).unwrap_or_else(|e| e.into_inner());
            }
        };
        if let Err(e) = lock(files).write(&job) {
            tracing::error!("{e:#}");
        }
        lock(&queue.pending).busy = false;
        queue.changed.notify_all();
    }
}

/// The files of the dumps, and what each held when it was last written.
#[derive(Debug)]
struct Files {
    dir: PathBuf,
    kinds: Vec<DumpKind>,
    /// Length and hash of each file's text as last written.
    written: HashMap<&'static str, (usize, u64)>,
    made_from: Option<MadeFrom>,
}

impl Files {
    /// Writes the files whose text changed since they were last written (every file with
    /// `force`); returns the names written.
    ///
    /// Each file is written as it is made, through a temporary file, never held whole in
    /// memory: the tables of a large subnet run to gigabytes of text. A plan already
    /// dumped, with the same nodes cut off and the same SM LID, makes the same files, so
    /// they are not made again (only the LID store, which changes without a plan).
    fn write(&mut self, job: &Job) -> anyhow::Result<Vec<&'static str>> {
        let (plan, absent, force) = (&job.plan, &job.absent, job.force);
        let made_from = MadeFrom {
            plan: Arc::downgrade(plan),
            absent: absent.clone(),
            sm_lid: job.sm_lid,
        };
        let same = !force && self.made_from.as_ref().is_some_and(|m| m.same(&made_from));
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let mut names = Vec::new();
        if !same {
            self.write_plan(job, &mut names)?;
        }
        self.emit("guid2lid", force, &mut names, |w| {
            w.write_all(job.guid2lid.as_bytes())
        })?;
        self.made_from = Some(made_from);
        if !names.is_empty() {
            tracing::info!(dir = %self.dir.display(), files = %names.join(" "), "dumps written");
        }
        Ok(names)
    }

    /// The dumps made from the plan.
    fn write_plan(&mut self, job: &Job, names: &mut Vec<&'static str>) -> anyhow::Result<()> {
        let (plan, absent, force) = (&*job.plan, &job.absent, job.force);
        let present = |n| !absent.contains(&n);
        let kept;
        let f = if absent.is_empty() {
            &plan.fabric
        } else {
            kept = plan.fabric.without(|n| !present(n));
            &kept
        };
        for kind in self.kinds.clone() {
            match kind {
                DumpKind::Lfts => {
                    let lfts = OpensmLftWriter::new(f);
                    self.emit("opensm-lfts.dump", force, names, |w| {
                        plan.each_lft(|t| {
                            if f.node_by_guid(t.guid).is_some() {
                                lfts.switch(t, w)?;
                            }
                            Ok(())
                        })
                    })?;
                    if let Some(ar) = plan.ar_hints.as_deref() {
                        self.emit("ibsm-ar-hints.dump", force, names, |w| {
                            w.write_all(ar.as_bytes())
                        })?;
                    }
                    if plan.sl.is_some() {
                        // As `ibsm route --path-sl-out / --sl2vl-out` write them.
                        let topo = sm_routing::Topo::new(&plan.fabric)?;
                        let routes = plan.to_routes();
                        self.emit("ibsm-path-sl.dump", force, names, |w| {
                            sm_routing::sl::write_path_sl(&topo, &routes, w)
                        })?;
                        self.emit("opensm-sl2vl.dump", force, names, |w| {
                            sm_routing::sl::write_sl2vl(&topo, &routes, w)
                        })?;
                    }
                }
                DumpKind::SubnetLst => {
                    let opts = SubnetLstOptions {
                        sm_lid: Some(job.sm_lid),
                    };
                    // The states the ports hold now (ACTIVE once programmed), not those
                    // discovery found.
                    let mut live = f.clone();
                    if let Some(m) = &job.model {
                        let pf = &plan.fabric;
                        for i in 0..live.ports().len() {
                            let q = PortIdx(i as u32);
                            let (node, num) = (live.port(q).node, live.port(q).num);
                            let at = pf
                                .node_by_guid(live.node(node).guid)
                                .and_then(|n| pf.port_of(n, num));
                            if let Some(pi) = at.and_then(|a| m.port_info(a)) {
                                live.port_mut(q).state = pi.port_state;
                            }
                        }
                    }
                    self.emit("opensm-subnet.lst", force, names, |w| {
                        write_subnet_lst(&live, opts, w)
                    })?;
                }
                DumpKind::Topology => {
                    self.emit("ibsm-topology.net", force, names, |w| {
                        write_ibnetdiscover(f, &WriteOptions::default(), w)
                    })?;
                }
                DumpKind::Pkeys => {
                    let pf = &plan.fabric;
                    let pkeys;
                    let tables = if absent.is_empty() {
                        &*plan.pkeys
                    } else {
                        let mut p = (*plan.pkeys).clone();
                        p.end_ports.retain(|t| present(pf.port(t.port).node));
                        p.switch_ports.retain(|t| present(pf.port(t.port).node));
                        pkeys = p;
                        &pkeys
                    };
                    self.emit("ibsm-pkeys.dump", force, names, |w| {
                        write_pkey_tables(tables, pf, w)
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Makes one file into a temporary one beside it (a reader never sees half a dump),
    /// kept when its text differs from what was last written there (or with `force`),
    /// dropped otherwise.
    fn emit(
        &mut self,
        name: &'static str,
        force: bool,
        names: &mut Vec<&'static str>,
        make: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> anyhow::Result<()> {
        let path = self.dir.join(name);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        let made = (|| {
            let file = std::fs::File::create(&tmp)?;
            let mut w = Summed::new(std::io::BufWriter::with_capacity(1 << 20, file));
            make(&mut w)?;
            w.inner.flush()?;
            Ok::<_, std::io::Error>(w.sum())
        })();
        let sum = match made {
            Ok(sum) => sum,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e).with_context(|| format!("writing {}", path.display()));
            }
        };
        if !force && self.written.get(name) == Some(&sum) {
            // Unchanged: what is there stays (even if edited behind our back).
            let _ = std::fs::remove_file(&tmp);
            return Ok(());
        }
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
        self.written.insert(name, sum);
        names.push(name);
        Ok(())
    }
}

/// What the plan's dumps were last made from.
#[derive(Debug)]
struct MadeFrom {
    plan: Weak<Plan>,
    absent: BTreeSet<NodeIdx>,
    sm_lid: Lid,
}

impl MadeFrom {
    fn same(&self, o: &MadeFrom) -> bool {
        self.plan.ptr_eq(&o.plan)
            && self.plan.strong_count() > 0
            && self.absent == o.absent
            && self.sm_lid == o.sm_lid
    }
}

/// A writer that keeps the length and a hash of what passes through it.
struct Summed<W> {
    inner: W,
    len: usize,
    hash: DefaultHasher,
}

impl<W: Write> Summed<W> {
    fn new(inner: W) -> Summed<W> {
        Summed {
            inner,
            len: 0,
            hash: DefaultHasher::new(),
        }
    }

    fn sum(&self) -> (usize, u64) {
        (self.len, self.hash.finish())
    }
}

impl<W: Write> Write for Summed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        let done = buf.get(..n).unwrap_or(buf);
        self.hash.write(done);
        self.len += done.len();
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
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

    /// A 2-level fat tree of 4-port switches, its SM on the first host.
    fn small_subnet() -> (sm_core::fabric::Fabric, PortIdx, SimDriver) {
        let fabric = generate(&GenSpec::FatTree2(FatTree2::new(4))).unwrap();
        let sm_port = fabric
            .cas()
            .flat_map(|n| fabric.node_ports(n))
            .find(|p| fabric.port(*p).remote.is_some())
            .unwrap();
        let d = SimDriver::new(
            &fabric,
            sm_port,
            Params::default(),
            LidStore::new(),
            sm_sim::SimConfig::default(),
        );
        (fabric, sm_port, d)
    }

    fn heavy_sweep(d: &mut SimDriver) {
        let e = d.run_until(10_000_000_000, |e| matches!(e, Event::SweepDone(_)));
        assert!(matches!(e, Some(Event::SweepDone(r)) if r.subnet_up));
    }

    #[test]
    fn only_changed_dumps_are_written_again() {
        let (fabric, sm_port, mut d) = small_subnet();
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
        // The links as the SM left them (ACTIVE), not as discovery found them (INIT).
        let links = std::fs::read_to_string(dir.join("opensm-subnet.lst")).unwrap();
        assert!(links.lines().all(|l| l.contains("LOG=ACT")), "{links}");

        // A heavy sweep that finds the same subnet: nothing is rewritten (a file changed
        // behind our back stays as it is).
        std::fs::write(dir.join("opensm-lfts.dump"), "edited").unwrap();
        let now = d.now();
        d.sm.request_sweep(sm_daemon::core::Instant::from_nanos(now), true);
        heavy_sweep(&mut d);
        let again = dumps.write(&d.sm, false).unwrap();
        assert!(again.is_empty(), "{again:?}");
        // The files made again to compare are not left behind.
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "{left:?}");
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
        let of = |d: Dumps| {
            let f = lock(&d.files);
            (f.dir.clone(), f.kinds.clone())
        };
        let d = Dumps::new(Some(Path::new("/tmp/x")), &cfg).unwrap();
        assert_eq!(of(d), (PathBuf::from("/tmp/x"), DEFAULT_KINDS.to_vec()));
        let listed = DumpConfig {
            write: vec![DumpKind::Pkeys],
            ..DumpConfig::default()
        };
        let d = Dumps::new(None, &listed).unwrap();
        assert_eq!(
            of(d),
            (PathBuf::from("/var/log/ibsm"), vec![DumpKind::Pkeys])
        );
        // --dump-dir overrides [dump] dir, not the list.
        let d = Dumps::new(Some(Path::new("/tmp/y")), &listed).unwrap();
        assert_eq!(of(d), (PathBuf::from("/tmp/y"), vec![DumpKind::Pkeys]));
    }

    /// Written beside the SM: the files appear once the write under way is waited for,
    /// and hold the newest snapshot asked for.
    #[test]
    fn dumps_written_later_hold_the_newest_snapshot() {
        let (fabric, sm_port, mut d) = small_subnet();
        let dir = scratch("later");
        let mut dumps = Dumps::new(Some(&dir), &DumpConfig::default()).unwrap();
        d.start();
        heavy_sweep(&mut d);
        dumps.write_later(&d.sm, false);
        dumps.flush();
        let other = fabric
            .cas()
            .filter(|&n| n != fabric.port(sm_port).node)
            .flat_map(|n| fabric.node_ports(n))
            .find(|p| fabric.port(*p).remote.is_some())
            .unwrap();
        let guid = format!("{:016x}", fabric.port(other).guid.0);
        let links = std::fs::read_to_string(dir.join("opensm-subnet.lst")).unwrap();
        assert!(links.contains(&guid), "{guid} not in\n{links}");
        // A host gone, and its repair: the tables change again.
        d.sim.link_down(other);
        heavy_sweep(&mut d);
        dumps.write_later(&d.sm, false);
        dumps.flush();
        let links = std::fs::read_to_string(dir.join("opensm-subnet.lst")).unwrap();
        assert!(!links.contains(&guid), "the host's link is still listed");
        assert!(dir.join("opensm-lfts.dump").exists());
        drop(dumps);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
