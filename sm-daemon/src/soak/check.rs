//! The invariants, checked against the simulated fabric itself (what the switches hold,
//! what a packet does) rather than against what the SM says it did.

use std::collections::{BTreeSet, HashMap, HashSet};

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx};
use sm_mad::port_info::{PhysPortState, PortState};
use sm_mad::sm_info::SmState;
use sm_mad::{Guid, Lid, PKey, Sl};
use sm_sim::Sim;
use sm_sim::scenario::{Action, FaultParam, NodeRef, Target};
use sm_sim::trace::{AllPairsOptions, DropReason, Dropped, PKeyChoice, Tracer};

use super::{Case, Nanos, Outcome, Violation};
use crate::core::{LightReport, Sm, SweepReport};
use crate::transport::sim::SimDriver;

/// How many violations of one invariant are kept with their details.
const KEEP_PER_INVARIANT: usize = 3;
/// SMPs a repair may send beyond the fewest its own accounting allows.
const REPAIR_SMP_SLACK: u64 = 16;
/// Source switches whose paths the credit-loop check traces (all, up to this many).
const CREDIT_SOURCES: usize = 48;
const S: Nanos = 1_000_000_000;
/// How long after a sweep ends the SM must start nothing for its state to count as
/// settled.
const SETTLE: Nanos = 100_000_000;

/// The SMs of a run: 0 is the SM under test, `i + 1` the driver's peer `i`.
pub(super) fn sm_of(d: &SimDriver, id: usize) -> Option<&Sm> {
    match id {
        0 => d.sm_running.then_some(&d.sm),
        i => d.peers.get(i - 1).filter(|p| p.running).map(|p| &p.sm),
    }
}

pub(super) fn sm_count(d: &SimDriver) -> usize {
    1 + d.peers.len()
}

/// A channel: the link leaving (node, port), on a VL.
type Chan = (Guid, u8, u8);

/// Time windows of the schedule that change what a check may expect.
#[derive(Debug, Default)]
struct Windows {
    /// Fabric-wide loss on (from, to).
    loss: Vec<(Nanos, Nanos)>,
    /// Times of every event.
    events: Vec<Nanos>,
    /// Times SMs start or stop.
    sm_changes: Vec<Nanos>,
    /// Hosts plugged in with another's GUIDs: (time, original, copy).
    clones: Vec<(Nanos, Guid, Guid)>,
    /// Nodes whose agent answers again (a silence ended): (time, GUID). Nothing tells the
    /// SM; its next light sweep finds them.
    woke: Vec<(Nanos, Guid)>,
    /// The sweep interval the case starts with.
    interval: Nanos,
}

impl Windows {
    fn of(case: &Case) -> Windows {
        let mut w = Windows::default();
        let mut loss_from = None;
        let mut events: Vec<_> = case.schedule.events.iter().collect();
        events.sort_by_key(|e| e.at);
        for e in events {
            w.events.push(e.at);
            match &e.action {
                Action::Fault {
                    target: Target::Fabric,
                    param: FaultParam::Loss(p),
                } if *p > 0.0 => {
                    loss_from.get_or_insert(e.at);
                }
                Action::ClearFaults(Target::Fabric) => {
                    if let Some(from) = loss_from.take() {
                        w.loss.push((from, e.at));
                    }
                }
                Action::StartSm { .. } | Action::StopSm(_) => w.sm_changes.push(e.at),
                Action::CloneGuid {
                    from: NodeRef::Guid(a),
                    to: NodeRef::Guid(b),
                } => w.clones.push((e.at, *a, *b)),
                Action::Silent {
                    node: NodeRef::Guid(g),
                    on: false,
                } => w.woke.push((e.at, *g)),
                _ => {}
            }
        }
        if let Some(from) = loss_from {
            w.loss.push((from, Nanos::MAX));
        }
        w.interval = case
            .config
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == "sweep_interval_ms").then(|| v.trim().parse::<u64>().ok())?
            })
            .unwrap_or(10_000)
            * 1_000_000;
        w
    }

    /// Nodes that woke from a silence too recently for a light sweep to have found them.
    fn waking(&self, f: &Fabric, now: Nanos) -> HashSet<NodeIdx> {
        self.woke
            .iter()
            .filter(|&&(t, _)| t <= now && now < t + self.interval + SETTLE)
            .filter_map(|&(_, g)| f.node_by_guid(g))
            .collect()
    }

    fn lossy(&self, from: Nanos, to: Nanos) -> bool {
        self.loss.iter().any(|&(a, b)| a <= to && from <= b)
    }

    fn events_between(&self, from: Nanos, to: Nanos) -> bool {
        self.events.iter().any(|&t| t > from && t <= to)
    }
}

/// What the switches held at a settled moment: each switch's table by simulator node.
#[derive(Debug, Clone, Default)]
struct Snapshot {
    lfts: HashMap<NodeIdx, Vec<u8>>,
    /// Per port, the times its link went down so far.
    downs: Vec<u64>,
}

impl Snapshot {
    fn take(sim: &Sim, f: &Fabric) -> Snapshot {
        let mut lfts = HashMap::new();
        for n in f.switches() {
            let node = sim.node(n);
            // A switch that does not answer holds what nobody can change: not the SM's.
            if !node.alive || node.silent {
                continue;
            }
            if let Some(s) = &node.switch {
                lfts.insert(n, s.lft.clone());
            }
        }
        let downs = (0..f.ports().len())
            .map(|p| sim.port(PortIdx(p as u32)).link_downs)
            .collect();
        Snapshot { lfts, downs }
    }

    /// Whether the path this snapshot's tables give from switch `n` to `lid` leaves by a
    /// port whose link went down by the time of `now` (it may be up again: a fast flap).
    fn bounced_on_path(&self, now: &Snapshot, f: &Fabric, n: NodeIdx, lid: usize) -> bool {
        let mut at = n;
        for _ in 0..64 {
            let e = self.entry(at, lid);
            if e == 255 || e == 0 {
                return false;
            }
            let Some(q) = f.port_of(at, e) else {
                return false;
            };
            if self.downs.get(q.idx()) != now.downs.get(q.idx()) {
                return true;
            }
            let Some(r) = f.port(q).remote else {
                return false;
            };
            at = f.port(r).node;
        }
        false
    }

    fn entry(&self, n: NodeIdx, lid: usize) -> u8 {
        self.lfts
            .get(&n)
            .and_then(|t| t.get(lid).copied())
            .unwrap_or(255)
    }
}

/// A PathRecord asked at a settled moment, with what the fabric gave then.
#[derive(Debug, Clone)]
struct AskedPath {
    tid: u64,
    src: PortIdx,
    dst: PortIdx,
    /// The P_Key asked, for an isolation check (the source is no member): no record may
    /// come back.
    foreign_pkey: Option<PKey>,
    /// The traced path's SL, MTU and rate (codes), or `None` when it is not delivered.
    expect: Option<(u8, u8, u8)>,
    faults_at: u64,
    sweeps_at: u64,
    asked_at: Nanos,
}

/// Checks a run as it goes.
pub(super) struct Checker {
    pub(super) out: Outcome,
    kept: HashMap<&'static str, usize>,
    windows: Windows,
    /// Per SM: the fault count when its current sweep began, and when.
    started: HashMap<usize, (u64, Nanos)>,
    /// The switches' tables at the last settled check.
    last: Option<Snapshot>,
    /// Each entry's port before faults moved it: where a restored entry goes back.
    home: HashMap<NodeIdx, Vec<u8>>,
    /// Ports entries were forced off (a link lost under them): going back to one is a
    /// restoration too.
    forced_off: HashMap<(NodeIdx, u16), Vec<u8>>,
    /// Switches a routing reload could not reach: their first new table is the reload's.
    owed: HashSet<NodeIdx>,
    /// Each port's first LID (by port GUID; switches by node GUID).
    lids: HashMap<Guid, Lid>,
    /// The engine the master last used, and who the master was.
    engine: Option<(String, usize)>,
    /// A reload changed the routing since the engine was noted.
    routing_reloaded: bool,
    /// The last repair that settled with the subnet up: (time, fault count).
    repaired: Option<(Nanos, u64)>,
    /// Faults carried out at time 0 (the case's setup).
    setup_faults: Option<u64>,
    balance_done: bool,
    asked: Vec<AskedPath>,
    sample: u64,
    reloads_seen: usize,
    /// Sweeps finished by any SM.
    sweeps: u64,
    /// A sweep that ended settled: (SM, fault count, when, a repair), checked once
    /// nothing follows it for [`SETTLE`].
    pending: Option<(usize, u64, Nanos, bool)>,
    /// The master of the last settled check.
    master: Option<usize>,
    /// Ports out of a new master's reach when it took over: their LIDs may change.
    blind: HashSet<Guid>,
    /// Each node's power-ups at the last settled check.
    boots: Vec<u32>,
    /// A layered repair left paths exposed (a credit loop on the SLs hosts hold is then
    /// expected until they ask again).
    exposed: bool,
}

impl Checker {
    pub(super) fn new(case: &Case) -> Checker {
        Checker {
            out: Outcome::default(),
            kept: HashMap::new(),
            windows: Windows::of(case),
            started: HashMap::new(),
            last: None,
            home: HashMap::new(),
            forced_off: HashMap::new(),
            owed: HashSet::new(),
            lids: HashMap::new(),
            engine: None,
            routing_reloaded: false,
            repaired: None,
            setup_faults: None,
            balance_done: false,
            asked: Vec::new(),
            sample: case.seed ^ 0x9e37_79b9_7f4a_7c15,
            reloads_seen: 0,
            sweeps: 0,
            pending: None,
            master: None,
            blind: HashSet::new(),
            boots: Vec::new(),
            exposed: false,
        }
    }

    pub(super) fn violate(&mut self, invariant: &'static str, at: Nanos, detail: String) {
        let n = self.kept.entry(invariant).or_default();
        *n += 1;
        if *n <= KEEP_PER_INVARIANT {
            self.out.violations.push(Violation {
                invariant,
                at,
                detail,
            });
        }
    }

    fn next_sample(&mut self, n: usize) -> usize {
        self.sample = self
            .sample
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.sample >> 33) as usize) % n.max(1)
    }

    /// After every step: the SMs' events, the SA answers due, the reloads done.
    pub(super) fn after_step(&mut self, d: &mut SimDriver, case: &Case) {
        if self.setup_faults.is_none() && d.now() > 0 {
            self.setup_faults = Some(d.sim.faults_run());
        }
        while self.reloads_seen < d.reloads.len() {
            let r = &d.reloads[self.reloads_seen];
            self.reloads_seen += 1;
            if let Ok(applied) = &r.outcome {
                if applied.contains(&"routing") {
                    // Entries moved by another routing are the operator's doing.
                    self.routing_reloaded = true;
                    self.last = None;
                    self.home.clear();
                    self.forced_off.clear();
                    // So are the tables of switches it cannot program yet (silent, or
                    // down): whenever they are programmed again.
                    self.owed = case
                        .fabric
                        .switches()
                        .filter(|&n| {
                            let x = d.sim.node(n);
                            !x.alive || x.silent || x.unplugged
                        })
                        .collect();
                }
            } else if let Err(e) = &r.outcome {
                let detail = format!("reload {}: {e}", r.file);
                self.violate("reload-refused", d.now(), detail);
            }
        }
        for id in 0..sm_count(d) {
            let mut events = Vec::new();
            match id {
                0 => {
                    while let Some(e) = d.sm.poll_event() {
                        events.push(e);
                    }
                }
                i => {
                    if let Some(p) = d.peers.get_mut(i - 1) {
                        while let Some(e) = p.sm.poll_event() {
                            events.push(e);
                        }
                    }
                }
            }
            for e in events {
                match e {
                    crate::core::Event::SweepStarted { .. } => {
                        self.started.insert(id, (d.sim.faults_run(), d.now()));
                        if self.pending.is_some_and(|p| p.0 == id) {
                            self.pending = None;
                        }
                    }
                    crate::core::Event::SweepDone(r) => self.on_sweep(d, case, id, &r),
                    crate::core::Event::LightSweepDone(l) => self.on_light(d, id, &l),
                    _ => {}
                }
            }
        }
        self.pending_check(d, case);
        self.answers(d, case);
    }

    fn on_light(&mut self, d: &SimDriver, _id: usize, l: &LightReport) {
        self.out.light_sweeps += 1;
        let now = d.now();
        // The light sweep lasted a few milliseconds at most.
        if l.outcome == "nothing new" && !self.windows.lossy(now.saturating_sub(S), now) {
            // Each read once, again on retries, and once more by directed route where the
            // LID route did not answer.
            let expected = l.reads + l.mads_retried + l.mads_lost;
            if l.mads_sent > expected {
                self.violate(
                    "light-sweep-smps",
                    now,
                    format!(
                        "a light sweep that found nothing sent {} SMPs for {} reads ({} retried)",
                        l.mads_sent, l.reads, l.mads_retried
                    ),
                );
            }
        }
    }

    fn on_sweep(&mut self, d: &mut SimDriver, case: &Case, id: usize, r: &SweepReport) {
        self.sweeps += 1;
        self.out.sweeps += 1;
        let now = d.now();
        let (faults_at, began) = self.started.get(&id).copied().unwrap_or((0, 0));
        let master = sm_of(d, id).is_some_and(|sm| sm.sm_state() == SmState::Master);
        if !master || !r.subnet_up {
            return;
        }
        if r.paths_exposed > 0 {
            self.exposed = true;
        }
        if r.heavy && r.engine_used != "none" {
            // A whole routing: exposure is over.
            self.exposed = r.paths_exposed > 0;
        }
        self.engine_check(now, id, r);
        // Entries are judged as each sweep leaves them: a move forced by a link that is
        // back by the time things settle (a fast flap) was still forced.
        if let Some(sm) = sm_of(d, id) {
            let unhealthy: HashSet<(Guid, u8)> = sm
                .unhealthy_ports()
                .into_iter()
                .map(|u| (u.node, u.port))
                .collect();
            let tracer = Tracer::new(&d.sim);
            self.churn_check(&d.sim, &tracer, &case.fabric, &unhealthy, now);
        }
        let lossy = self.windows.lossy(began.saturating_sub(S), now);
        if !r.heavy && !lossy {
            // The Sets it made, and the reads of the switches it looked at: IB says a
            // switch's port changed, never which one.
            let looked: u64 = r
                .looked_at
                .iter()
                .flat_map(|g| guids_in(g))
                .filter_map(|g| case.fabric.node_by_guid(g))
                .map(|n| u64::from(case.fabric.node(n).num_ports) + 3)
                .sum();
            let budget = r.mads_min + looked + REPAIR_SMP_SLACK + r.mads_retried;
            if r.mads_sent > budget {
                self.violate(
                    "repair-smps",
                    now,
                    format!(
                        "repair {} ({}) sent {} SMPs: {} Sets, reads of the {} switches it looked at and {} more at most",
                        r.sweep, r.trigger, r.mads_sent, r.mads_min, r.looked_at.len(), REPAIR_SMP_SLACK
                    ),
                );
            }
        }
        if r.heavy {
            self.heavy_check(now, r);
        }
        if d.sim.faults_run() == faults_at {
            // Settled if the SM starts nothing more for a while (a repair may find that
            // it has to look again).
            self.pending = Some((id, faults_at, now, !r.heavy));
        }
    }

    /// Before a step: a pending check whose settling time passes before anything else
    /// happens is run now (the state will not change until then).
    pub(super) fn before_step(&mut self, d: &mut SimDriver, case: &Case) {
        let Some((_, _, at, _)) = self.pending else {
            return;
        };
        if d.next_deadline().is_none_or(|t| t >= at + SETTLE) {
            self.run_pending(d, case);
        }
    }

    /// The check a sweep left pending, once it is clear that nothing followed it.
    fn pending_check(&mut self, d: &mut SimDriver, case: &Case) {
        let Some((_, _, at, _)) = self.pending else {
            return;
        };
        if d.now() < at + SETTLE {
            return;
        }
        self.run_pending(d, case);
    }

    fn run_pending(&mut self, d: &mut SimDriver, case: &Case) {
        let Some((id, faults_at, at, repair)) = self.pending else {
            return;
        };
        self.pending = None;
        let master = sm_of(d, id).is_some_and(|sm| sm.sm_state() == SmState::Master);
        if d.sim.faults_run() != faults_at || !master {
            return;
        }
        if repair {
            self.repaired = Some((at, faults_at));
        }
        let now = d.now();
        self.settled(d, case, now);
    }

    /// The engine changes only when the operator changes the routing.
    fn engine_check(&mut self, now: Nanos, id: usize, r: &SweepReport) {
        if r.engine_used == "none" {
            return;
        }
        match &self.engine {
            Some((e, who)) if *e != r.engine_used && !self.routing_reloaded => {
                let detail = format!(
                    "sweep {} ({}) routed with {} where {} was in use{}",
                    r.sweep,
                    r.trigger,
                    r.engine_used,
                    e,
                    if *who != id {
                        " (another SM became master)"
                    } else {
                        ""
                    }
                );
                self.violate("engine-stable", now, detail);
            }
            _ => {}
        }
        self.engine = Some((r.engine_used.clone(), id));
        self.routing_reloaded = false;
    }

    /// A heavy sweep right after a repair that settled, with nothing new in between, is
    /// unjustified unless the SM found new nodes or was asked.
    fn heavy_check(&mut self, now: Nanos, r: &SweepReport) {
        let Some((at, _)) = self.repaired.take() else {
            return;
        };
        let t = r.trigger.as_str();
        let asked = t.starts_with("configuration reloaded")
            || t.starts_with("start")
            || t.starts_with("election")
            || t.contains("unhealthy")
            || t.contains("cleared")
            || t.contains("not in the model")
            || t.contains("unresponsive nodes due");
        // The sweep began some time before it finished: any event since the repair counts.
        if !asked && !self.windows.events_between(at, now) && !self.windows.lossy(at, now) {
            self.violate(
                "no-heavy-after-repair",
                now,
                format!(
                    "heavy sweep {} ({t}) after a repair that settled at {}, with nothing new",
                    r.sweep,
                    sm_sim::scenario::format_time(at)
                ),
            );
        }
    }

    /// Every check of a settled state.
    pub(super) fn settled(&mut self, d: &mut SimDriver, case: &Case, now: Nanos) {
        let Some(master) = (0..sm_count(d))
            .find(|&i| sm_of(d, i).is_some_and(|s| s.sm_state() == SmState::Master && s.is_up()))
        else {
            return;
        };
        self.out.checked += 1;
        let f = &case.fabric;
        let tracer = Tracer::new(&d.sim);
        let Some(sm) = sm_of(d, master) else { return };
        let Some(plan) = sm.plan() else { return };
        let sm_port = match master {
            0 => f
                .node_by_guid(case.sm_port.0)
                .and_then(|n| f.port_of(n, case.sm_port.1)),
            i => d.peers.get(i - 1).map(|p| p.port),
        };
        let Some(sm_port) = sm_port else { return };
        let unhealthy: HashSet<(Guid, u8)> = sm
            .unhealthy_ports()
            .into_iter()
            .map(|u| (u.node, u.port))
            .collect();
        let waking = self.windows.waking(f, now);
        let mut comp = component(&d.sim, f, sm_port, &unhealthy, &waking);
        // Two devices with one GUID: the SM keeps one and leaves the other out.
        for &(at, a, b) in &self.windows.clones {
            if at <= now {
                for g in [a, b] {
                    if let Some(n) = f.node_by_guid(g) {
                        comp.remove(&n);
                    }
                }
            }
        }
        if self.master != Some(master) {
            // A new master knows only the LIDs it can read: ports out of its reach now may
            // come back with other LIDs (a standby keeps no copy of the master's store).
            self.master = Some(master);
            // So are ports that lost their LIDs in a power cycle since the last check:
            // the new master may never have seen what they held.
            let cycled = |n: NodeIdx| {
                self.boots
                    .get(n.idx())
                    .is_some_and(|&b| b != d.sim.node(n).power_ups)
            };
            for port in f.ports().iter() {
                if port.exists && (!comp.contains(&port.node) || cycled(port.node)) {
                    let g = if f.node(port.node).kind == NodeKind::Switch {
                        f.node(port.node).guid
                    } else {
                        port.guid
                    };
                    self.blind.insert(g);
                }
            }
        }
        self.boots = (0..f.nodes().len())
            .map(|n| d.sim.node(NodeIdx(n as u32)).power_ups)
            .collect();
        self.lids_check(&d.sim, f, &comp, now);
        self.reach_check(&d.sim, &tracer, f, &comp, &unhealthy, now);
        let engine = plan.engine_used.clone();
        if matches!(engine.as_str(), "updn" | "ftree" | "layered") && !self.exposed {
            self.credit_check(&d.sim, &tracer, f, plan, &comp, now);
        }
        self.churn_check(&d.sim, &tracer, f, &unhealthy, now);
        if !self.balance_done && Some(d.sim.faults_run()) == self.setup_faults {
            self.balance_done = true;
            self.balance_check(&d.sim, f, plan, now);
        }
        drop(tracer);
        self.election_check(d, case, now);
        self.ask_paths(d, case, &comp, master);
    }

    fn lids_check(&mut self, sim: &Sim, f: &Fabric, comp: &HashSet<NodeIdx>, now: Nanos) {
        let mut held: HashMap<u16, Guid> = HashMap::new();
        for (i, port) in f.ports().iter().enumerate() {
            let p = PortIdx(i as u32);
            let node = f.node(port.node);
            let end = node.kind != NodeKind::Switch;
            if !port.exists || (!end && port.num != 0) || !comp.contains(&port.node) {
                continue;
            }
            let info = &sim.port(p).info;
            if info.lid.0 == 0 || (end && info.port_state != PortState::Active) {
                continue;
            }
            let guid = if end { port.guid } else { node.guid };
            match self.lids.get(&guid).filter(|_| !self.blind.contains(&guid)) {
                Some(&l) if l != info.lid => {
                    let detail = format!(
                        "{guid} ({}) moved from LID {l} to {}",
                        node.description, info.lid
                    );
                    self.violate("lid-stable", now, detail);
                }
                Some(_) => {}
                _ => {
                    self.lids.insert(guid, info.lid);
                    self.blind.remove(&guid);
                }
            }
            let lmc = if end { info.lmc.min(7) } else { 0 };
            for k in 0..(1u32 << lmc) {
                let l = (u32::from(info.lid.0) + k) as u16;
                if let Some(other) = held.insert(l, guid) {
                    if other != guid {
                        let detail = format!("LID {l} held by {other} and {guid}");
                        self.violate("lid-unique", now, detail);
                    }
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn reach_check(
        &mut self,
        sim: &Sim,
        tracer: &Tracer<'_>,
        f: &Fabric,
        comp: &HashSet<NodeIdx>,
        unhealthy: &HashSet<(Guid, u8)>,
        now: Nanos,
    ) {
        // An end port in the subnet: its link is up to a node the SM reaches, and not
        // one the SM took out as unhealthy.
        let usable = |p: PortIdx| {
            let sp = sim.port(p);
            sp.remote.is_some_and(|r| {
                comp.contains(&f.port(r).node)
                    && sim.port(r).info.port_physical_state == PhysPortState::LinkUp
                    && !unhealthy.contains(&(f.node(f.port(r).node).guid, f.port(r).num))
            }) && sp.info.port_physical_state == PhysPortState::LinkUp
                && comp.contains(&f.port(p).node)
                && !unhealthy.contains(&(f.node(f.port(p).node).guid, f.port(p).num))
        };
        // Every end port the SM can reach must be in the subnet.
        for &n in comp {
            if f.node(n).kind == NodeKind::Switch {
                continue;
            }
            for p in f.node_ports(n) {
                let sp = sim.port(p);
                if usable(p) && (sp.info.lid.0 == 0 || sp.info.port_state != PortState::Active) {
                    let detail = format!(
                        "{} ({}) is reachable but has LID {} and state {:?}",
                        f.port(p).guid,
                        f.node(n).description,
                        sp.info.lid,
                        sp.info.port_state
                    );
                    self.violate("ports-configured", now, detail);
                }
            }
        }
        let opts = AllPairsOptions {
            pkey: PKeyChoice::BestShared,
            max_failures: usize::MAX,
            ..AllPairsOptions::default()
        };
        let r = tracer.check_all_pairs(&opts);
        for fl in &r.failures {
            let Some(src) = f.port_by_guid(fl.src_guid) else {
                continue;
            };
            let src_in = usable(src);
            if fl.why.reason() == DropReason::Loop && src_in {
                let detail = format!("{} -> LID {}: {}", fl.src_guid, fl.dst_lid, fl.why);
                self.violate("no-forwarding-loop", now, detail);
                continue;
            }
            let Some(dst) = tracer.owner(fl.dst_lid) else {
                continue;
            };
            if !src_in || !usable(dst) {
                continue;
            }
            if matches!(
                fl.why,
                Dropped::PKey {
                    check: sm_sim::trace::PKeyCheck::NotShared
                        | sm_sim::trace::PKeyCheck::BothLimited,
                    ..
                }
            ) {
                continue;
            }
            let detail = format!(
                "{} ({}) -> LID {} ({}): {}",
                fl.src_guid,
                f.node(f.port(src).node).description,
                fl.dst_lid,
                f.node(f.port(dst).node).description,
                fl.why
            );
            self.violate("reachability", now, detail);
        }
    }

    fn credit_check(
        &mut self,
        sim: &Sim,
        tracer: &Tracer<'_>,
        f: &Fabric,
        plan: &crate::core::Plan,
        comp: &HashSet<NodeIdx>,
        now: Nanos,
    ) {
        let ends: Vec<PortIdx> = f
            .cas()
            .filter(|n| comp.contains(n))
            .flat_map(|n| f.node_ports(n))
            .filter(|&p| {
                let sp = sim.port(p);
                sp.info.lid.0 != 0 && sp.info.port_state == PortState::Active
            })
            .collect();
        let mut seen_sw = BTreeSet::new();
        let mut sources = Vec::new();
        for &p in &ends {
            let sw = sim.port(p).remote.map(|r| f.port(r).node);
            if seen_sw.insert(sw) {
                sources.push(p);
            }
        }
        if sources.len() > CREDIT_SOURCES {
            let step = sources.len().div_ceil(CREDIT_SOURCES);
            sources = sources.into_iter().step_by(step).collect();
        }
        let mut next: HashMap<Chan, HashSet<Chan>> = HashMap::new();
        for &s in &sources {
            let slid = sim.port(s).info.lid;
            let plan_src = plan.fabric.port_by_guid(f.port(s).guid);
            for &t in &ends {
                if s == t {
                    continue;
                }
                let dlid = sim.port(t).info.lid;
                let sl = plan_src.and_then(|q| plan.path_sl(q, dlid)).unwrap_or(0);
                let Ok(path) = tracer.trace(slid, dlid, Sl(sl), PKey(0xffff)) else {
                    continue;
                };
                let chans: Vec<Chan> = path
                    .hops
                    .iter()
                    .map(|h| (h.node, h.out_port, h.vl.0))
                    .collect();
                for w in chans.windows(2) {
                    next.entry(w[0]).or_default().insert(w[1]);
                }
            }
        }
        if let Some(c) = cycle(&next) {
            let detail = format!(
                "{} routes: the channels CA paths hold form a cycle through {} channels, e.g. {:?}",
                plan.engine_used,
                c.len(),
                &c[..c.len().min(4)]
            );
            self.violate("no-credit-loop", now, detail);
        }
    }

    /// LFT entries moved since the last settled check: each must have had to (its old path
    /// no longer delivers on the fabric as it is) or gone back where it was before.
    fn churn_check(
        &mut self,
        sim: &Sim,
        tracer: &Tracer<'_>,
        f: &Fabric,
        unhealthy: &HashSet<(Guid, u8)>,
        now: Nanos,
    ) {
        let snap = Snapshot::take(sim, f);
        // Each entry's first port seen (255: none yet).
        for (&n, t) in &snap.lfts {
            let home = self.home.entry(n).or_default();
            if home.len() < t.len() {
                home.resize(t.len(), 255);
            }
            for (h, &e) in home.iter_mut().zip(t) {
                if *h == 255 {
                    *h = e;
                }
            }
        }
        let Some(prev) = self.last.replace(snap) else {
            return;
        };
        let Some(snap) = self.last.as_ref() else {
            return;
        };
        let (mut moved, mut forced, mut restored, mut free) = (0u64, 0u64, 0u64, Vec::new());
        let mut paid = Vec::new();
        for (&n, t) in &snap.lfts {
            let (Some(old_t), Some(home_t)) = (prev.lfts.get(&n), self.home.get(&n)) else {
                continue;
            };
            if self.owed.contains(&n) {
                if t != old_t {
                    paid.push(n);
                }
                continue;
            }
            for (lid, ((&new, &old), &home)) in t.iter().zip(old_t).zip(home_t).enumerate() {
                if new == 255 || lid == 0 || old == 255 || old == new {
                    continue;
                }
                moved += 1;
                let key = (n, lid as u16);
                let left = self.forced_off.get(&key);
                if new == home || left.is_some_and(|l| l.contains(&new)) {
                    restored += 1;
                } else if prev.bounced_on_path(snap, f, n, lid)
                    || !delivers(sim, tracer, f, unhealthy, &prev, n, lid)
                {
                    forced += 1;
                    let l = self.forced_off.entry(key).or_default();
                    if !l.contains(&old) {
                        l.push(old);
                    }
                } else {
                    free.push((n, lid, old, new));
                }
            }
        }
        for n in paid {
            self.owed.remove(&n);
            // Its new table is where its entries live now.
            if let (Some(t), Some(h)) = (snap.lfts.get(&n), self.home.get_mut(&n)) {
                h.clone_from(t);
            }
        }
        self.out.lft_moved += moved;
        self.out.lft_forced += forced;
        self.out.lft_restored += restored;
        if let Some(&(n, lid, old, new)) = free.first() {
            let detail = format!(
                "{} LFT entries moved whose path still delivered ({moved} moved, {forced} had to, \
                 {restored} went back), e.g. {} ({}) LID {lid}: port {old} -> {new}",
                free.len(),
                f.node(n).guid,
                f.node(n).description
            );
            self.violate("churn", now, detail);
        }
    }

    /// On the fabric as built, before any fault: the programmed tables balance links as
    /// well as the same engine routing the same fabric offline.
    fn balance_check(&mut self, sim: &Sim, f: &Fabric, plan: &crate::core::Plan, now: Nanos) {
        let Ok(topo) = sm_routing::Topo::new(&plan.fabric) else {
            return;
        };
        let mut routes = plan.to_routes();
        for (i, &n) in topo.switches.iter().enumerate() {
            let Some(m) = f.node_by_guid(plan.fabric.node(n).guid) else {
                return;
            };
            let Some(t) = sim.node(m).switch.as_ref().map(|s| s.lft.clone()) else {
                return;
            };
            if let Some(slot) = routes.lft.get_mut(i) {
                let len = slot.len().max(t.len());
                *slot = t;
                slot.resize(len, 255);
            }
        }
        let opts = sm_routing::MetricsOptions {
            diversity: false,
            bisections: 0,
            ..sm_routing::MetricsOptions::default()
        };
        let ours = sm_routing::metrics(&topo, &routes, &opts);
        // The same fabric routed offline, LIDs as `ibsm route` numbers them.
        let mut off = plan.fabric.clone();
        for p in 0..off.ports().len() {
            off.port_mut(PortIdx(p as u32)).lid = Lid(0);
        }
        let lmc = plan
            .fabric
            .end_ports()
            .map(|p| plan.fabric.port(p).lmc)
            .max()
            .unwrap_or(0);
        if sm_core::lid::LidStore::new().assign(&mut off, lmc).is_err() {
            return;
        }
        let Ok(otopo) = sm_routing::Topo::new(&off) else {
            return;
        };
        let Ok(chain) =
            sm_routing::route_chain(&plan.engine_used, &otopo, &sm_routing::Options::default())
        else {
            return;
        };
        let theirs = sm_routing::metrics(&otopo, &chain.routes, &opts);
        let (a, b) = (
            &ours.all_to_all.switch_links,
            &theirs.all_to_all.switch_links,
        );
        let (sa, sb) = (ours.shifts.worst_max_load, theirs.shifts.worst_max_load);
        if a.max > b.max || sa > sb {
            let detail = format!(
                "{} tables as programmed: max link load {}, worst shift load {}; routed offline: {}, {}",
                plan.engine_used, a.max, sa, b.max, sb
            );
            self.violate("balance", now, detail);
        }
    }

    /// With no SM started or stopped for a while, exactly one SM is master.
    fn election_check(&mut self, d: &SimDriver, case: &Case, now: Nanos) {
        let quiet = 20 * S;
        if self
            .windows
            .sm_changes
            .iter()
            .any(|&t| t <= now && now < t + quiet)
        {
            return;
        }
        let f = &case.fabric;
        let port_of = |i: usize| match i {
            0 => f
                .node_by_guid(case.sm_port.0)
                .and_then(|n| f.port_of(n, case.sm_port.1)),
            i => d.peers.get(i - 1).map(|p| p.port),
        };
        let masters: Vec<PortIdx> = (0..sm_count(d))
            .filter(|&i| sm_of(d, i).is_some_and(|s| s.sm_state() == SmState::Master))
            .filter_map(port_of)
            .collect();
        // A master cut off from the others (its switch gone) rules the part it is in: one
        // master per connected part of the fabric.
        let none = HashSet::new();
        let parts: Vec<HashSet<NodeIdx>> = masters
            .iter()
            .map(|&p| component(&d.sim, f, p, &HashSet::new(), &none))
            .collect();
        let shared = masters.iter().enumerate().any(|(i, &p)| {
            parts
                .iter()
                .enumerate()
                .any(|(j, part)| i != j && part.contains(&f.port(p).node))
        });
        if masters.is_empty() || shared {
            self.violate(
                "one-master",
                now,
                format!(
                    "{} SMs are master with no SM started or stopped for 20 s",
                    masters.len()
                ),
            );
        }
    }

    /// PathRecords for a few pairs, asked now, checked when answered.
    fn ask_paths(
        &mut self,
        d: &mut SimDriver,
        case: &Case,
        comp: &HashSet<NodeIdx>,
        master: usize,
    ) {
        let f = &case.fabric;
        let sm_ports: Vec<PortIdx> = std::iter::once(
            f.node_by_guid(case.sm_port.0)
                .and_then(|n| f.port_of(n, case.sm_port.1)),
        )
        .flatten()
        .chain(d.peers.iter().map(|p| p.port))
        .collect();
        let ends: Vec<PortIdx> = f
            .cas()
            .filter(|n| comp.contains(n))
            .flat_map(|n| f.node_ports(n))
            .filter(|&p| {
                let sp = d.sim.port(p);
                sp.info.lid.0 != 0
                    && sp.info.port_state == PortState::Active
                    && !sm_ports.contains(&p)
            })
            .collect();
        if ends.len() < 2 {
            return;
        }
        let Some(sm) = sm_of(d, master) else { return };
        let Some(plan) = sm.plan() else { return };
        let mut asks = Vec::new();
        for k in 0..4 {
            let src = ends[self.next_sample(ends.len())];
            let dst = ends[self.next_sample(ends.len())];
            if src == dst {
                continue;
            }
            // The last ask of a fabric with partitions tries a P_Key the source lacks.
            let foreign = if k == 3 {
                let held = |p: PortIdx, k: u16| {
                    pkeys_of(&d.sim, p)
                        .iter()
                        .any(|h| h.0 & 0x7fff == k && h.0 & 0x7fff != 0)
                };
                ends.iter()
                    .flat_map(|&p| pkeys_of(&d.sim, p).into_iter().map(|h| h.0 & 0x7fff))
                    .filter(|&k| k != 0)
                    .find(|&k| !held(src, k))
                    .map(|k| PKey(k | 0x8000))
            } else {
                None
            };
            let expect = expected_path(&d.sim, f, plan, src, dst, foreign);
            asks.push((src, dst, foreign, expect));
        }
        let faults_at = d.sim.faults_run();
        for (src, dst, foreign, expect) in asks {
            let dgid = sm_mad::Gid::new(sm_core::mcast::DEFAULT_SUBNET_PREFIX, f.port(dst).guid);
            let now = d.now();
            let tid = d.sa_clients.ask_path(&mut d.sim, now, src, dgid, foreign);
            self.asked.push(AskedPath {
                tid,
                src,
                dst,
                foreign_pkey: foreign,
                expect,
                faults_at,
                sweeps_at: self.sweeps,
                asked_at: d.now(),
            });
        }
    }

    /// PathRecords answered: compared with what the fabric gave when they were asked, if
    /// nothing changed since.
    fn answers(&mut self, d: &SimDriver, case: &Case) {
        if self.asked.is_empty() {
            return;
        }
        let now = d.now();
        let mut keep = Vec::new();
        for a in std::mem::take(&mut self.asked) {
            let Some(ans) = d.sa_clients.answer(a.tid) else {
                if now < a.asked_at + 5 * S {
                    keep.push(a);
                }
                continue;
            };
            if d.sim.faults_run() != a.faults_at || self.sweeps != a.sweeps_at {
                continue;
            }
            let f = &case.fabric;
            let what = format!(
                "PathRecord {} -> {}{}",
                f.port(a.src).guid,
                f.port(a.dst).guid,
                a.foreign_pkey
                    .map(|k| format!(" with P_Key {k} the source lacks"))
                    .unwrap_or_default()
            );
            match (ans, a.expect, a.foreign_pkey) {
                (Ok(_), _, Some(_)) => {
                    self.violate("sa-partitions", now, format!("{what}: answered"));
                }
                (Err(_), _, Some(_)) => {}
                (Ok(rec), Some((sl, mtu, rate)), None) => {
                    let got = (rec.sl.0, rec.mtu.to_raw_value(), rec.rate.to_raw_value());
                    if got != (sl, mtu, rate) {
                        let detail = format!(
                            "{what}: SL {} MTU {} rate {} where the fabric gives SL {sl} MTU {mtu} rate {rate}",
                            got.0, got.1, got.2
                        );
                        self.violate("sa-path", now, detail);
                    }
                }
                (Ok(_), None, None) => {
                    self.violate(
                        "sa-path",
                        now,
                        format!("{what}: a record for a path the fabric does not deliver"),
                    );
                }
                (Err(status), Some(_), None) => {
                    self.violate(
                        "sa-path",
                        now,
                        format!("{what}: status {status:?} for a delivered path"),
                    );
                }
                (Err(_), None, None) => {}
            }
        }
        self.asked = keep;
    }

    /// At the end: the subnet is up, and everything holds once more.
    pub(super) fn finish(&mut self, d: &mut SimDriver, case: &Case) {
        let now = d.now();
        if !d.any_up() {
            self.violate(
                "up-after-faults",
                now,
                "no SM has the subnet up 60 s after the last event".into(),
            );
            return;
        }
        self.settled(d, case, now);
        self.duplicates_check(d, case, now);
    }

    /// A GUID two devices in the master's reach answer with is reported, not resolved
    /// in silence.
    fn duplicates_check(&mut self, d: &SimDriver, case: &Case, now: Nanos) {
        let f = &case.fabric;
        let Some(master) = (0..sm_count(d))
            .find(|&i| sm_of(d, i).is_some_and(|s| s.sm_state() == SmState::Master && s.is_up()))
        else {
            return;
        };
        let Some(sm) = sm_of(d, master) else { return };
        let sm_port = match master {
            0 => f
                .node_by_guid(case.sm_port.0)
                .and_then(|n| f.port_of(n, case.sm_port.1)),
            i => d.peers.get(i - 1).map(|p| p.port),
        };
        let Some(sm_port) = sm_port else { return };
        let unhealthy: HashSet<(Guid, u8)> = sm
            .unhealthy_ports()
            .into_iter()
            .map(|u| (u.node, u.port))
            .collect();
        let comp = component(&d.sim, f, sm_port, &unhealthy, &self.windows.waking(f, now));
        for (_, a, b) in self.windows.clones.clone() {
            let (Some(na), Some(nb)) = (f.node_by_guid(a), f.node_by_guid(b)) else {
                continue;
            };
            if !comp.contains(&na) || !comp.contains(&nb) {
                continue;
            }
            let text = a.to_string();
            let reported = sm
                .duplicate_guids()
                .iter()
                .any(|x| x.guid == text || x.guid.contains(&format!("{:x}", a.0)));
            if !reported {
                let detail = format!(
                    "{b} answers with {a}'s GUIDs, both in the subnet's reach, and the SM reports no duplicate"
                );
                self.violate("duplicate-guid-reported", now, detail);
            }
        }
    }
}

/// The GUIDs (`0x` and 16 hex digits) a text names.
fn guids_in(text: &str) -> impl Iterator<Item = Guid> + '_ {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.len() == 18 && w.starts_with("0x"))
        .filter_map(|w| u64::from_str_radix(&w[2..], 16).ok())
        .map(Guid)
}

/// The PathRecord a source should get for a destination, from the traced path: (SL, MTU,
/// rate) codes, or `None` when the packet is not delivered.
/// The P_Keys a port holds: a table never set reads as the power-up one (the default
/// P_Key alone).
fn pkeys_of(sim: &Sim, p: PortIdx) -> Vec<PKey> {
    match &sim.port(p).pkeys {
        k if k.is_empty() => vec![PKey(0xffff)],
        k => k.clone(),
    }
}

fn expected_path(
    sim: &Sim,
    f: &Fabric,
    plan: &crate::core::Plan,
    src: PortIdx,
    dst: PortIdx,
    foreign: Option<PKey>,
) -> Option<(u8, u8, u8)> {
    if foreign.is_some() {
        return None;
    }
    let tracer = Tracer::new(sim);
    let (slid, dlid) = (sim.port(src).info.lid, sim.port(dst).info.lid);
    let sl = plan
        .fabric
        .port_by_guid(f.port(src).guid)
        .and_then(|q| plan.path_sl(q, dlid))
        .unwrap_or(0);
    let dst_keys = pkeys_of(sim, dst);
    let shared = pkeys_of(sim, src).into_iter().find(|k| {
        k.0 & 0x7fff != 0
            && dst_keys
                .iter()
                .any(|h| h.0 & 0x7fff == k.0 & 0x7fff && (h.0 & 0x8000 != 0 || k.0 & 0x8000 != 0))
    })?;
    let path = tracer.trace(slid, dlid, Sl(sl), shared).ok()?;
    let mut mtu = u8::MAX;
    let mut rate = sm_mad::link::Rate::Gbps2_5;
    let mut first = true;
    let mut crossed = vec![src];
    let mut at = src;
    for h in &path.hops {
        let n = f.node_by_guid(h.node)?;
        let out = f.port_of(n, h.out_port)?;
        if h.in_port != 0 {
            crossed.push(f.port_of(n, h.in_port)?);
        }
        if out != at {
            crossed.push(out);
        }
        at = sim.port(out).remote?;
    }
    crossed.push(at);
    for p in crossed {
        let i = &sim.port(p).info;
        mtu = mtu.min(i.mtu_cap.to_raw_value());
        let r = i.rate()?;
        if first || r.mbps().unwrap_or(0) < rate.mbps().unwrap_or(0) {
            rate = r;
            first = false;
        }
    }
    Some((sl, mtu, rate.to_raw_value()))
}

/// Nodes the SM's port reaches over links that are up, through nodes that answer, leaving
/// out links the SM took out as unhealthy.
fn component(
    sim: &Sim,
    f: &Fabric,
    from: PortIdx,
    unhealthy: &HashSet<(Guid, u8)>,
    waking: &HashSet<NodeIdx>,
) -> HashSet<NodeIdx> {
    let usable = |n: NodeIdx| {
        let x = sim.node(n);
        x.alive && !x.silent && !x.removed && !x.unplugged && !waking.contains(&n)
    };
    let start = f.port(from).node;
    let mut seen = HashSet::new();
    if !usable(start) {
        return seen;
    }
    seen.insert(start);
    let mut stack = vec![start];
    while let Some(n) = stack.pop() {
        // Only switches carry packets on.
        if n != start && f.node(n).kind != NodeKind::Switch {
            continue;
        }
        for p in f.node_ports(n) {
            let sp = sim.port(p);
            let Some(r) = sp.remote else { continue };
            let m = f.port(r).node;
            let up = sp.info.port_physical_state == PhysPortState::LinkUp
                && sim.port(r).info.port_physical_state == PhysPortState::LinkUp;
            let bad = unhealthy.contains(&(f.node(n).guid, sp.num))
                || unhealthy.contains(&(f.node(m).guid, f.port(r).num));
            if up && !bad && usable(m) && seen.insert(m) {
                stack.push(m);
            }
        }
    }
    seen
}

/// Whether the path the tables of `prev` give from switch `n` to `lid` still delivers on
/// the fabric as it is now (links the SM took out as unhealthy do not count).
fn delivers(
    sim: &Sim,
    tracer: &Tracer<'_>,
    f: &Fabric,
    unhealthy: &HashSet<(Guid, u8)>,
    prev: &Snapshot,
    n: NodeIdx,
    lid: usize,
) -> bool {
    let Some(owner) = tracer.owner(Lid(lid as u16)) else {
        return false;
    };
    // A switch whose agent does not answer cannot be programmed (nor reprogrammed after a
    // reboot): the SM routes around it, as around a dead one.
    let usable = |x: NodeIdx| {
        let node = sim.node(x);
        node.alive && !node.silent
    };
    let mut at = n;
    for _ in 0..64 {
        if !usable(at) {
            return false;
        }
        let e = prev.entry(at, lid);
        if e == 255 {
            return false;
        }
        if e == 0 {
            return f.port_of(at, 0) == Some(owner);
        }
        let Some(q) = f.port_of(at, e) else {
            return false;
        };
        let sp = sim.port(q);
        let Some(r) = sp.remote else { return false };
        if sp.info.port_physical_state != PhysPortState::LinkUp
            || sim.port(r).info.port_physical_state != PhysPortState::LinkUp
            || unhealthy.contains(&(f.node(at).guid, e))
            || unhealthy.contains(&(f.node(f.port(r).node).guid, f.port(r).num))
        {
            return false;
        }
        let m = f.port(r).node;
        if f.node(m).kind != NodeKind::Switch {
            return r == owner && usable(m);
        }
        at = m;
    }
    false
}

/// A cycle among channels, if there is one (Kahn's algorithm leaves exactly the nodes on
/// or behind cycles).
fn cycle<T: Copy + Eq + std::hash::Hash + std::fmt::Debug>(
    next: &HashMap<T, HashSet<T>>,
) -> Option<Vec<T>> {
    let mut indegree: HashMap<T, usize> = HashMap::new();
    for (&c, outs) in next {
        indegree.entry(c).or_default();
        for &o in outs {
            *indegree.entry(o).or_default() += 1;
        }
    }
    let mut ready: Vec<T> = indegree
        .iter()
        .filter(|&(_, &k)| k == 0)
        .map(|(&c, _)| c)
        .collect();
    while let Some(c) = ready.pop() {
        for o in next.get(&c).into_iter().flatten() {
            if let Some(k) = indegree.get_mut(o) {
                *k -= 1;
                if *k == 0 {
                    ready.push(*o);
                }
            }
        }
    }
    let left: Vec<T> = indegree
        .into_iter()
        .filter(|&(_, k)| k > 0)
        .map(|(c, _)| c)
        .collect();
    (!left.is_empty()).then_some(left)
}
