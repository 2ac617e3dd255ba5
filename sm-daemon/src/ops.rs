//! What operators see of a running SM: a status snapshot, the fabric events (links and
//! nodes coming and going, SM state changes), Prometheus metrics, and the small servers
//! that hand them out (a Unix socket for `ibsm status` / `ibsm ports`, HTTP for
//! `/metrics`).
//!
//! [`Ops`] is fed by the driver loop after the core's events ([`Ops::observe`]); the servers
//! run on a thread of their own and read it under a mutex, so a slow client never delays
//! the SM. Events are found by comparing the fabric of each sweep with the last one, so
//! repairs and heavy sweeps report the same way.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};
use sm_core::fabric::{Fabric, NodeKind};
use sm_mad::sm_info::SmState;
use sm_mad::{Guid, attr::SaAttrId};

use crate::core::{Sm, SweepReport};

/// A sweep's plan and model, shared with the SM.
type Snapshot = (Arc<crate::core::Plan>, Option<Arc<crate::core::Discovered>>);

/// Each port's counter totals and error rate, as the performance manager last had them.
type PerfTable = Arc<BTreeMap<(Guid, u8), (crate::perf::Totals, f64)>>;

/// Events kept for `ibsm status`.
const RECENT_EVENTS: usize = 64;

/// One thing that changed in the fabric or the SM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FabricEvent {
    /// Seconds since the Unix epoch.
    pub time: f64,
    /// `link_down`, `link_up`, `node_out`, `node_in`, `sm_state`, `subnet_up`,
    /// `subnet_down`.
    pub kind: String,
    /// What it is about: `GUID[port] - GUID[port]` for a link, a node's GUID and
    /// description, the new SM state.
    pub what: String,
}

/// The last sweep, in the units an operator reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LastSweep {
    pub sweep: u64,
    pub heavy: bool,
    pub trigger: String,
    pub subnet_up: bool,
    pub sweep_ms: f64,
    pub recovery_ms: f64,
    pub smps: u64,
    pub lft_blocks_sent: u64,
    pub lft_entries_moved: u64,
    /// Layered repairs: paths whose traffic on the SL their hosts hold may close a credit
    /// loop until they ask the SA again.
    #[serde(default)]
    pub paths_exposed: u64,
    pub engine_used: String,
    pub errors: Vec<String>,
}

/// A node that did not answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unanswered {
    pub node: String,
    pub description: String,
}

/// A port left out of the subnet, as `ibsm status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnhealthyRow {
    pub node: String,
    pub port: u8,
    pub reason: String,
}

/// What an admin asks of the running SM through the status socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Take an unhealthy port back into the subnet.
    Clear { node: Guid, port: u8 },
}

/// What `ibsm status` shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub sm_state: String,
    pub priority: u8,
    /// The master's port GUID and LID, when another SM is master.
    pub master: Option<String>,
    pub sm_lid: u16,
    pub subnet_up: bool,
    /// Seconds since the Unix epoch when the subnet last came up.
    pub up_since: Option<f64>,
    pub nodes: usize,
    pub switches: usize,
    pub cas: usize,
    pub routers: usize,
    pub links: usize,
    pub lids: usize,
    pub sweeps: u64,
    pub last_sweep: Option<LastSweep>,
    pub unresponsive: Vec<Unanswered>,
    /// SMs found without our SM_Key (never obeyed), by GUID.
    #[serde(default)]
    pub untrusted_sms: Vec<String>,
    /// Ports left out of the subnet, and why.
    pub unhealthy: Vec<UnhealthyRow>,
    /// GUIDs more than one device answers with, as the last heavy sweep found them.
    #[serde(default)]
    pub duplicate_guids: Vec<crate::core::DuplicateGuid>,
    pub smps_sent: u64,
    pub smps_retried: u64,
    pub smps_lost: u64,
    pub sa_queries: u64,
    /// The outcome of the last configuration reload (SIGHUP), if any.
    pub last_reload: Option<String>,
    pub recent_events: Vec<FabricEvent>,
}

/// One port as `ibsm ports` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortRow {
    pub node: String,
    pub description: String,
    pub port: u8,
    pub lid: u16,
    pub state: String,
    pub width: String,
    pub speed: String,
    /// The port at the other end of the link: `GUID[port]`.
    pub peer: Option<String>,
    /// Counter totals since the SM first read them (with the performance manager on).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub counters: Option<crate::perf::Totals>,
    /// Errors per second between the last two reads.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error_rate: Option<f64>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabel {
    r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttrLabel {
    attribute: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PortLabel {
    node: String,
    port: u32,
}

/// Each port's counters, when asked for (`[metrics] per_port`): four samples per port, so
/// off by default (a 40,960-host fabric has 164,000 ports).
struct PortMetrics {
    errors: Family<PortLabel, Counter>,
    link_downed: Family<PortLabel, Counter>,
    xmit_data: Family<PortLabel, Counter>,
    rcv_data: Family<PortLabel, Counter>,
}

/// The metric families.
struct Metrics {
    registry: Registry,
    subnet_up: Gauge,
    sm_state: Family<StateLabel, Gauge>,
    sweeps: Family<KindLabel, Counter>,
    smps_sent: Counter,
    smps_retried: Counter,
    smps_lost: Counter,
    nodes: Family<TypeLabel, Gauge>,
    links: Gauge,
    lids: Gauge,
    unresponsive: Gauge,
    unhealthy: Gauge,
    duplicate_guids: Gauge,
    traps: Counter,
    sa_queries: Family<AttrLabel, Counter>,
    sweep_seconds: Histogram,
    recovery_seconds: Histogram,
    lft_blocks: Counter,
    paths_exposed: Counter,
    events: Family<KindLabel, Counter>,
    perf_sweeps: Counter,
    port_errors: Counter,
    port_link_downed: Counter,
    perf_unanswered: Gauge,
    traps_ignored: Family<KindLabel, Counter>,
    per_port: Option<PortMetrics>,
}

const SM_STATES: [(SmState, &str); 4] = [
    (SmState::NotActive, "not_active"),
    (SmState::Discovering, "discovering"),
    (SmState::Standby, "standby"),
    (SmState::Master, "master"),
];

fn state_name(s: SmState) -> &'static str {
    SM_STATES
        .iter()
        .find(|(x, _)| *x == s)
        .map_or("unknown", |(_, n)| n)
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("ibsm");
        let m = Metrics {
            subnet_up: Gauge::default(),
            sm_state: Family::default(),
            sweeps: Family::default(),
            smps_sent: Counter::default(),
            smps_retried: Counter::default(),
            smps_lost: Counter::default(),
            nodes: Family::default(),
            links: Gauge::default(),
            lids: Gauge::default(),
            unresponsive: Gauge::default(),
            unhealthy: Gauge::default(),
            duplicate_guids: Gauge::default(),
            traps: Counter::default(),
            sa_queries: Family::default(),
            sweep_seconds: Histogram::new(exponential_buckets(0.001, 4.0, 10)),
            recovery_seconds: Histogram::new(exponential_buckets(0.001, 4.0, 10)),
            lft_blocks: Counter::default(),
            paths_exposed: Counter::default(),
            events: Family::default(),
            perf_sweeps: Counter::default(),
            port_errors: Counter::default(),
            port_link_downed: Counter::default(),
            perf_unanswered: Gauge::default(),
            traps_ignored: Family::default(),
            per_port: None,
            registry: Registry::default(),
        };
        registry.register(
            "subnet_up",
            "1 while the subnet is up (every reachable port configured and active)",
            m.subnet_up.clone(),
        );
        registry.register(
            "sm_state",
            "1 for the SM's current state",
            m.sm_state.clone(),
        );
        registry.register(
            "sweeps",
            "Sweeps finished, by kind (heavy: every node read; repair: only what a trap named)",
            m.sweeps.clone(),
        );
        registry.register("smps_sent", "SMPs sent", m.smps_sent.clone());
        registry.register("smps_retried", "SMPs sent again", m.smps_retried.clone());
        registry.register(
            "smps_lost",
            "SMPs that used up their retries",
            m.smps_lost.clone(),
        );
        registry.register("nodes", "Nodes in the subnet, by type", m.nodes.clone());
        registry.register("links", "Links in the subnet", m.links.clone());
        registry.register("lids", "LIDs in use", m.lids.clone());
        registry.register(
            "unresponsive_nodes",
            "Nodes left out of the last sweep because they did not answer",
            m.unresponsive.clone(),
        );
        registry.register(
            "unhealthy_ports",
            "Ports left out of the subnet because their link kept going down",
            m.unhealthy.clone(),
        );
        registry.register(
            "duplicate_guids",
            "GUIDs more than one device answers with, as the last heavy sweep found them \
             (the device met first is kept, the others left out)",
            m.duplicate_guids.clone(),
        );
        registry.register("traps", "Traps received", m.traps.clone());
        registry.register(
            "sa_queries",
            "SA requests received, by attribute",
            m.sa_queries.clone(),
        );
        registry.register(
            "sweep_duration_seconds",
            "Time from the start of a sweep to its last answer",
            m.sweep_seconds.clone(),
        );
        registry.register(
            "recovery_seconds",
            "Repairs: time from the trap to the last Set of the repair answered",
            m.recovery_seconds.clone(),
        );
        registry.register(
            "lft_blocks_sent",
            "Forwarding table blocks sent",
            m.lft_blocks.clone(),
        );
        registry.register(
            "paths_exposed",
            "Layered repairs: paths given another SL whose traffic on the SL their hosts \
             hold may close a credit loop until they ask the SA again",
            m.paths_exposed.clone(),
        );
        registry.register(
            "fabric_events",
            "Fabric events, by kind (links and nodes coming and going, SM state changes)",
            m.events.clone(),
        );
        registry.register(
            "perf_sweeps",
            "Sweeps of every port's counters finished",
            m.perf_sweeps.clone(),
        );
        registry.register(
            "port_errors",
            "Error counter increments read from every port (PortCounters, link downs apart)",
            m.port_errors.clone(),
        );
        registry.register(
            "port_link_downed",
            "LinkDownedCounter increments read from every port",
            m.port_link_downed.clone(),
        );
        registry.register(
            "perf_unanswered_ports",
            "Ports whose counters the last counter sweep could not read",
            m.perf_unanswered.clone(),
        );
        registry.register(
            "traps_ignored",
            "Traps not acted on, by why (muted: their issuer babbled; forged: they named \
             another issuer than their sender)",
            m.traps_ignored.clone(),
        );
        Metrics { registry, ..m }
    }

    fn enable_per_port(&mut self) {
        if self.per_port.is_some() {
            return;
        }
        let p = PortMetrics {
            errors: Family::default(),
            link_downed: Family::default(),
            xmit_data: Family::default(),
            rcv_data: Family::default(),
        };
        let r = &mut self.registry;
        r.register(
            "port_errors_by_port",
            "Error counter increments of one port (PortCounters, link downs apart)",
            p.errors.clone(),
        );
        r.register(
            "port_link_downed_by_port",
            "LinkDownedCounter increments of one port",
            p.link_downed.clone(),
        );
        r.register(
            "port_xmit_data_words",
            "Data one port sent, in 4-byte words",
            p.xmit_data.clone(),
        );
        r.register(
            "port_rcv_data_words",
            "Data one port received, in 4-byte words",
            p.rcv_data.clone(),
        );
        self.per_port = Some(p);
    }
}

/// The links and nodes of a fabric, by GUID, to compare sweeps.
#[derive(Debug, Default)]
struct Shape {
    nodes: BTreeSet<(Guid, String)>,
    links: BTreeSet<(Guid, u8, Guid, u8)>,
}

impl Shape {
    fn of(f: &Fabric, present: impl Fn(sm_core::NodeIdx) -> bool) -> Shape {
        let mut s = Shape::default();
        for (i, n) in f.nodes().iter().enumerate() {
            if present(sm_core::NodeIdx(i as u32)) {
                s.nodes.insert((n.guid, n.description.clone()));
            }
        }
        for (a, b) in f.links() {
            let (pa, pb) = (f.port(a), f.port(b));
            if !present(pa.node) || !present(pb.node) {
                continue;
            }
            let x = (f.node(pa.node).guid, pa.num);
            let y = (f.node(pb.node).guid, pb.num);
            let (x, y) = if x <= y { (x, y) } else { (y, x) };
            s.links.insert((x.0, x.1, y.0, y.1));
        }
        s
    }
}

/// Everything operators see, kept up to date by the driver loop.
pub struct Ops {
    metrics: Metrics,
    status: Status,
    /// The last sweep's plan and model, for the port list (computed when asked).
    snapshot: Option<Snapshot>,
    events: VecDeque<FabricEvent>,
    shape: Option<Shape>,
    event_log: Option<(PathBuf, std::fs::File)>,
    last_counts: crate::core::MadCounts,
    last_sa: std::collections::BTreeMap<u16, u64>,
    last_state: Option<SmState>,
    commands: Vec<Command>,
    perf: Option<PerfTable>,
    perf_sums: (u64, u64, u64),
    last_ignored: (u64, u64),
}

impl std::fmt::Debug for Ops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ops").field("status", &self.status).finish()
    }
}

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| (d.as_millis() as f64) / 1e3)
}

impl Ops {
    /// Ops for an SM of `priority`, appending events to `event_log` (created if missing).
    pub fn new(priority: u8, event_log: Option<&Path>) -> io::Result<Ops> {
        let event_log = match event_log {
            Some(p) => {
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
                Some((p.to_path_buf(), f))
            }
            None => None,
        };
        Ok(Ops {
            metrics: Metrics::new(),
            status: Status {
                priority,
                sm_state: state_name(SmState::NotActive).into(),
                ..Status::default()
            },
            snapshot: None,
            events: VecDeque::new(),
            shape: None,
            event_log,
            last_counts: crate::core::MadCounts::default(),
            last_sa: Default::default(),
            last_state: None,
            commands: Vec::new(),
            perf: None,
            perf_sums: (0, 0, 0),
            last_ignored: (0, 0),
        })
    }

    /// What admins asked for since the last call.
    pub fn take_commands(&mut self) -> Vec<Command> {
        std::mem::take(&mut self.commands)
    }

    /// Takes in the SM's state after its events; `report` is a sweep that just ended.
    pub fn observe(&mut self, sm: &Sm, report: Option<&SweepReport>) {
        let m = &self.metrics;
        let counts = sm.mad_counts();
        let d = counts - self.last_counts;
        m.smps_sent.inc_by(d.sent);
        m.smps_retried.inc_by(d.retried);
        m.smps_lost.inc_by(d.lost);
        self.last_counts = counts;
        let (muted, forged) = sm.traps_ignored();
        let (m0, f0) = self.last_ignored;
        for (kind, n) in [
            ("muted", muted.saturating_sub(m0)),
            ("forged", forged.saturating_sub(f0)),
        ] {
            if n > 0 {
                m.traps_ignored.get_or_create(&KindLabel { kind }).inc_by(n);
            }
        }
        self.last_ignored = (muted, forged);
        for (&a, &n) in sm.sa().queries_by_attribute() {
            let before = self.last_sa.get(&a).copied().unwrap_or(0);
            if n > before {
                let attribute = SaAttrId::from_raw_value(a).name().unwrap_or("unknown");
                m.sa_queries
                    .get_or_create(&AttrLabel { attribute })
                    .inc_by(n - before);
            }
        }
        self.last_sa.clone_from(sm.sa().queries_by_attribute());
        let state = sm.sm_state();
        for (s, name) in SM_STATES {
            m.sm_state
                .get_or_create(&StateLabel { state: name })
                .set(i64::from(s == state));
        }
        if self.last_state != Some(state) {
            if self.last_state.is_some() {
                self.event("sm_state", state_name(state).to_string());
            }
            self.last_state = Some(state);
        }
        let st = &mut self.status;
        st.sm_state = state_name(state).into();
        st.master = sm.master().map(|r| format!("{} (LID {})", r.guid, r.lid.0));
        st.sm_lid = sm.own_lid().0;
        st.smps_sent = counts.sent;
        st.smps_retried = counts.retried;
        st.smps_lost = counts.lost;
        st.sa_queries = sm.sa().stats().queries;
        let up = sm.is_up();
        if up != st.subnet_up {
            st.subnet_up = up;
            if up {
                st.up_since = Some(now_secs());
            }
            self.event(if up { "subnet_up" } else { "subnet_down" }, String::new());
        }
        self.metrics.subnet_up.set(i64::from(up));
        let unhealthy = sm.unhealthy_ports();
        self.metrics.unhealthy.set(unhealthy.len() as i64);
        self.status.unhealthy = unhealthy
            .into_iter()
            .map(|u| UnhealthyRow {
                node: u.node.to_string(),
                port: u.port,
                reason: u.reason,
            })
            .collect();
        let dups = sm.duplicate_guids();
        self.metrics.duplicate_guids.set(dups.len() as i64);
        self.status.duplicate_guids = dups.to_vec();
        if let Some(r) = report {
            self.sweep_done(sm, r);
        }
    }

    /// A counter sweep finished: the performance manager's ports and figures (nothing
    /// happens when the last one was already taken).
    pub fn perf_sweep(&mut self, p: &crate::perf::PerfMgr) {
        let Some((sweep, n)) = p.last_sweep() else {
            return;
        };
        if n == self.perf_sums.0 && self.perf.is_some() {
            return;
        }
        let table: BTreeMap<(Guid, u8), (crate::perf::Totals, f64)> = p
            .stats()
            .iter()
            .map(|(&k, s)| (k, (s.totals, s.error_rate)))
            .collect();
        let errors: u64 = table.values().map(|(t, _)| t.errors()).sum();
        let downed: u64 = table.values().map(|(t, _)| t.link_downed).sum();
        let m = &self.metrics;
        let (sweeps0, errors0, downed0) = self.perf_sums;
        m.perf_sweeps.inc_by(n.saturating_sub(sweeps0));
        m.port_errors.inc_by(errors.saturating_sub(errors0));
        m.port_link_downed.inc_by(downed.saturating_sub(downed0));
        m.perf_unanswered.set(sweep.lost as i64);
        if let Some(pm) = &m.per_port {
            let before = self.perf.as_deref();
            for (&(node, port), (t, _)) in &table {
                let old = before.and_then(|b| b.get(&(node, port))).map(|x| x.0);
                let old = old.unwrap_or_default();
                let l = PortLabel {
                    node: node.to_string(),
                    port: u32::from(port),
                };
                let grow = |f: &Family<PortLabel, Counter>, new: u64, was: u64| {
                    f.get_or_create(&l).inc_by(new.saturating_sub(was));
                };
                grow(&pm.errors, t.errors(), old.errors());
                grow(&pm.link_downed, t.link_downed, old.link_downed);
                grow(&pm.xmit_data, t.xmit_data, old.xmit_data);
                grow(&pm.rcv_data, t.rcv_data, old.rcv_data);
            }
        }
        self.perf_sums = (n, errors.max(errors0), downed.max(downed0));
        self.perf = Some(Arc::new(table));
    }

    /// The configuration was read again, with this outcome.
    pub fn reloaded(&mut self, outcome: String) {
        self.event("config_reload", outcome.clone());
        self.status.last_reload = Some(outcome);
    }

    /// A trap arrived.
    pub fn trap(&mut self) {
        self.metrics.traps.inc();
    }

    fn sweep_done(&mut self, sm: &Sm, r: &SweepReport) {
        let m = &self.metrics;
        let kind = if r.heavy { "heavy" } else { "repair" };
        m.sweeps.get_or_create(&KindLabel { kind }).inc();
        m.sweep_seconds.observe(r.sweep_ns as f64 / 1e9);
        if !r.heavy && r.recovery_ns > 0 {
            m.recovery_seconds.observe(r.recovery_ns as f64 / 1e9);
        }
        m.lft_blocks.inc_by(r.lft_blocks_sent);
        m.paths_exposed.inc_by(r.paths_exposed);
        for (t, n) in [("switch", r.switches), ("ca", r.cas), ("router", r.routers)] {
            m.nodes
                .get_or_create(&TypeLabel { r#type: t })
                .set(n as i64);
        }
        m.links.set(r.links as i64);
        m.lids.set(r.lids as i64);
        m.unresponsive.set(r.unresponsive.len() as i64);
        let st = &mut self.status;
        st.sweeps += 1;
        st.nodes = r.nodes;
        st.switches = r.switches;
        st.cas = r.cas;
        st.routers = r.routers;
        st.links = r.links;
        st.lids = r.lids;
        st.unresponsive = r
            .unresponsive
            .iter()
            .map(|u| Unanswered {
                node: u.node.clone(),
                description: u.description.clone(),
            })
            .collect();
        st.untrusted_sms = r.untrusted_sms.clone();
        st.last_sweep = Some(LastSweep {
            sweep: r.sweep,
            heavy: r.heavy,
            trigger: r.trigger.clone(),
            subnet_up: r.subnet_up,
            sweep_ms: (r.sweep_ns as f64 / 1e3).round() / 1e3,
            recovery_ms: (r.recovery_ns as f64 / 1e3).round() / 1e3,
            smps: r.mads_sent,
            lft_blocks_sent: r.lft_blocks_sent,
            lft_entries_moved: r.lft_entries_moved,
            paths_exposed: r.paths_exposed,
            engine_used: r.engine_used.clone(),
            errors: r.errors.clone(),
        });
        if let Some(plan) = sm.plan() {
            let model = sm.model();
            let present = |n| model.is_none_or(|m| m.present(n));
            let shape = Shape::of(&plan.fabric, present);
            if let Some(old) = self.shape.take() {
                self.changes(&old, &shape);
            }
            self.shape = Some(shape);
            self.snapshot = sm.snapshot();
        }
    }

    fn changes(&mut self, old: &Shape, new: &Shape) {
        let link = |l: &(Guid, u8, Guid, u8)| format!("{}[{}] - {}[{}]", l.0, l.1, l.2, l.3);
        let node = |n: &(Guid, String)| format!("{} \"{}\"", n.0, n.1);
        let mut found = Vec::new();
        for n in old.nodes.difference(&new.nodes) {
            found.push(("node_out", node(n)));
        }
        for n in new.nodes.difference(&old.nodes) {
            found.push(("node_in", node(n)));
        }
        for l in old.links.difference(&new.links) {
            found.push(("link_down", link(l)));
        }
        for l in new.links.difference(&old.links) {
            found.push(("link_up", link(l)));
        }
        for (kind, what) in found {
            self.event(kind, what);
        }
    }

    fn event(&mut self, kind: &'static str, what: String) {
        let e = FabricEvent {
            time: now_secs(),
            kind: kind.to_string(),
            what,
        };
        tracing::info!(kind, what = %e.what, "fabric event");
        self.metrics.events.get_or_create(&KindLabel { kind }).inc();
        if let Some((path, f)) = &mut self.event_log {
            let line = serde_json::to_string(&e).unwrap_or_default();
            if let Err(err) = writeln!(f, "{line}") {
                tracing::warn!(file = %path.display(), "event log not written: {err}");
            }
        }
        if self.events.len() == RECENT_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    /// The status, with the recent events.
    pub fn status(&self) -> Status {
        Status {
            recent_events: self.events.iter().cloned().collect(),
            ..self.status.clone()
        }
    }

    /// Every port of the last sweep's fabric.
    pub fn ports(&self) -> Vec<PortRow> {
        Reply::Ports(self.snapshot.clone(), self.perf.clone()).rows()
    }

    /// Adds each port's counters to the metrics (`[metrics] per_port`).
    pub fn with_port_metrics(mut self) -> Ops {
        self.metrics.enable_per_port();
        self
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode_openmetrics(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.metrics.registry);
        out
    }

    /// The metrics in Prometheus' classic text format (0.0.4), for scrapers and tools that
    /// do not ask for OpenMetrics (`promtool check metrics`, older agents).
    pub fn encode_metrics(&self) -> String {
        classic_text(&self.encode_openmetrics())
    }
}

/// OpenMetrics text as the classic format: a counter family's HELP and TYPE name its
/// `_total` sample, and there is no `# EOF`.
pub fn classic_text(open: &str) -> String {
    let counters: BTreeSet<&str> = open
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(open.len() + 64 * counters.len());
    for line in open.lines() {
        if line == "# EOF" {
            continue;
        }
        let meta = line
            .strip_prefix("# HELP ")
            .map(|r| ("# HELP ", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("# TYPE ", r)));
        if let Some((tag, rest)) = meta {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            if counters.contains(name) {
                out.push_str(&format!("{tag}{name}_total {tail}\n"));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn port_rows(f: &Fabric, model: Option<&crate::core::Discovered>) -> Vec<PortRow> {
    use sm_mad::port_info::link_width;
    let mut rows = Vec::new();
    for (i, n) in f.nodes().iter().enumerate() {
        let ni = sm_core::NodeIdx(i as u32);
        if model.is_some_and(|m| !m.present(ni)) {
            continue;
        }
        let base = f.port_of(ni, 0).map_or(0, |p| f.port(p).lid.0);
        for q in f.node_ports(ni) {
            let port = f.port(q);
            if n.kind == NodeKind::Switch && port.num == 0 {
                continue;
            }
            let info = model.and_then(|m| m.port_info(q));
            let width = match info.map_or(0, |i| i.link_width_active) {
                link_width::X1 => "1x",
                link_width::X2 => "2x",
                link_width::X4 => "4x",
                link_width::X8 => "8x",
                link_width::X12 => "12x",
                _ => "-",
            };
            let speed = info.map_or("-".to_string(), |i| {
                let name = match (i.link_speed_ext_active, i.link_speed_active) {
                    (1, _) => "FDR",
                    (2, _) => "EDR",
                    (4, _) => "HDR",
                    (8, _) => "NDR",
                    (_, 1) => "SDR",
                    (_, 2) => "DDR",
                    (_, 4) => "QDR",
                    _ => "-",
                };
                name.to_string()
            });
            rows.push(PortRow {
                node: n.guid.to_string(),
                description: n.description.clone(),
                port: port.num,
                lid: if n.kind == NodeKind::Switch {
                    base
                } else {
                    port.lid.0
                },
                state: info.map_or("unknown".into(), |i| format!("{:?}", i.port_state)),
                width: width.into(),
                speed,
                peer: port.remote.map(|r| {
                    let rp = f.port(r);
                    format!("{}[{}]", f.node(rp.node).guid, rp.num)
                }),
                counters: None,
                error_rate: None,
            });
        }
    }
    rows
}

/// The running servers; dropping it removes the socket file.
#[derive(Debug)]
pub struct Servers {
    socket: Option<PathBuf>,
    /// The metrics address actually bound (port 0 picks one).
    pub metrics_addr: Option<SocketAddr>,
}

impl Drop for Servers {
    fn drop(&mut self) {
        if let Some(p) = &self.socket {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Why the servers could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error("metrics listen {addr}: {error}")]
    Metrics { addr: SocketAddr, error: io::Error },
    #[error("status socket {}: {error}", path.display())]
    Socket { path: PathBuf, error: io::Error },
    #[error("starting the ops thread: {0}")]
    Thread(io::Error),
}

/// Starts the metrics HTTP server on `listen` and the status socket at `socket` (either
/// may be off) on a thread of their own, reading `ops`.
pub fn serve(
    ops: Arc<Mutex<Ops>>,
    listen: Option<SocketAddr>,
    socket: Option<&Path>,
) -> Result<Servers, ServeError> {
    let tcp = match listen {
        Some(addr) => {
            let l = std::net::TcpListener::bind(addr)
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(|error| ServeError::Metrics { addr, error })?;
            Some(l)
        }
        None => None,
    };
    let metrics_addr = tcp.as_ref().and_then(|l| l.local_addr().ok());
    let unix = match socket {
        Some(path) => Some(bind_socket(path).map_err(|error| ServeError::Socket {
            path: path.to_path_buf(),
            error,
        })?),
        None => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Thread)?;
    std::thread::Builder::new()
        .name("ops".into())
        .spawn(move || {
            rt.block_on(async move {
                let mut tasks = Vec::new();
                if let Some(l) = tcp {
                    if let Ok(l) = tokio::net::TcpListener::from_std(l) {
                        tasks.push(tokio::spawn(http_loop(l, Arc::clone(&ops))));
                    }
                }
                if let Some(l) = unix {
                    if let Ok(l) = tokio::net::UnixListener::from_std(l) {
                        tasks.push(tokio::spawn(socket_loop(l, Arc::clone(&ops))));
                    }
                }
                for t in tasks {
                    let _ = t.await;
                }
            })
        })
        .map_err(ServeError::Thread)?;
    Ok(Servers {
        socket: socket.map(Path::to_path_buf),
        metrics_addr,
    })
}

/// Binds the status socket, replacing a stale one, readable and writable by the owner only.
fn bind_socket(path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "exists and is not a socket",
            ));
        }
        // A live SM answers; only a dead one's socket is taken over.
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "another ibsm is serving it",
            ));
        }
        std::fs::remove_file(path)?;
    }
    let l = std::os::unix::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Requests the status socket answers, one line each.
pub mod request {
    pub const STATUS: &str = "status";
    pub const PORTS: &str = "ports";
    /// `clear 0xGUID:PORT`.
    pub const CLEAR: &str = "clear";
}

/// `0xGUID:PORT`.
pub fn parse_port(s: &str) -> Option<(Guid, u8)> {
    let (g, p) = s.trim().split_once(':')?;
    let g = u64::from_str_radix(g.strip_prefix("0x").unwrap_or(g), 16).ok()?;
    Some((Guid(g), p.parse().ok()?))
}

fn error_json(what: String) -> String {
    serde_json::json!({ "error": what }).to_string()
}

/// What a request needs, taken under the lock; [`Reply::text`] encodes it after.
pub enum Reply {
    Text(String),
    /// The port list, computed from a snapshot without holding the lock.
    Ports(Option<Snapshot>, Option<PerfTable>),
}

impl Reply {
    pub fn text(self) -> String {
        match self {
            Reply::Text(t) => t,
            r @ Reply::Ports(..) => {
                serde_json::to_string(&r.rows()).unwrap_or_else(|e| error_json(e.to_string()))
            }
        }
    }

    fn rows(self) -> Vec<PortRow> {
        let Reply::Ports(Some((plan, model)), perf) = self else {
            return Vec::new();
        };
        let mut rows = port_rows(&plan.fabric, model.as_deref());
        if let Some(t) = perf {
            for r in &mut rows {
                let key = u64::from_str_radix(r.node.trim_start_matches("0x"), 16)
                    .ok()
                    .map(|g| (Guid(g), r.port));
                if let Some((tot, rate)) = key.and_then(|k| t.get(&k)) {
                    r.counters = Some(*tot);
                    r.error_rate = Some(*rate);
                }
            }
        }
        rows
    }
}

/// The answer to one line on the status socket: JSON, or `{"error": ...}`.
pub fn answer(ops: &mut Ops, line: &str) -> String {
    reply(ops, line).text()
}

/// What to answer one line with (see [`answer`]); quick, for use under the lock.
pub fn reply(ops: &mut Ops, line: &str) -> Reply {
    let line = line.trim();
    let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
    if word == request::PORTS {
        return Reply::Ports(ops.snapshot.clone(), ops.perf.clone());
    }
    let r = match word {
        request::STATUS => serde_json::to_string_pretty(&ops.status()),
        request::CLEAR => Ok(match parse_port(rest) {
            Some((node, port)) => {
                let known = ops
                    .status
                    .unhealthy
                    .iter()
                    .any(|u| u.node == node.to_string() && u.port == port);
                if known {
                    ops.commands.push(Command::Clear { node, port });
                    serde_json::json!({ "cleared": format!("{node}:{port}") }).to_string()
                } else {
                    error_json(format!("{node}:{port} is not unhealthy"))
                }
            }
            None => error_json(format!("clear: expected 0xGUID:PORT, got \"{rest}\"")),
        }),
        other => Ok(error_json(format!("unknown request \"{other}\""))),
    };
    Reply::Text(r.unwrap_or_else(|e| error_json(e.to_string())))
}

async fn socket_loop(l: tokio::net::UnixListener, ops: Arc<Mutex<Ops>>) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    loop {
        let Ok((stream, _)) = l.accept().await else {
            continue;
        };
        let ops = Arc::clone(&ops);
        tokio::spawn(async move {
            let (rd, mut wr) = stream.into_split();
            let mut line = String::new();
            let read = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                BufReader::new(rd).read_line(&mut line),
            )
            .await;
            if !matches!(read, Ok(Ok(_))) {
                return;
            }
            let r = match ops.lock() {
                Ok(mut o) => reply(&mut o, &line),
                Err(_) => return,
            };
            let text = r.text();
            let _ = wr.write_all(text.as_bytes()).await;
            let _ = wr.write_all(b"\n").await;
            let _ = wr.shutdown().await;
        });
    }
}

async fn http_loop(l: tokio::net::TcpListener, ops: Arc<Mutex<Ops>>) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    use hyper::{Request, Response, StatusCode};
    loop {
        let Ok((stream, _)) = l.accept().await else {
            continue;
        };
        let ops = Arc::clone(&ops);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let ops = Arc::clone(&ops);
                async move {
                    let open = req
                        .headers()
                        .get(hyper::header::ACCEPT)
                        .and_then(|v| v.to_str().ok())
                        .is_some_and(|v| v.contains("application/openmetrics-text"));
                    let (code, ctype, body) = match (req.method(), req.uri().path()) {
                        (&hyper::Method::GET, "/metrics") if open => (
                            StatusCode::OK,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            ops.lock()
                                .map(|o| o.encode_openmetrics())
                                .unwrap_or_default(),
                        ),
                        (&hyper::Method::GET, "/metrics") => (
                            StatusCode::OK,
                            "text/plain; version=0.0.4; charset=utf-8",
                            ops.lock().map(|o| o.encode_metrics()).unwrap_or_default(),
                        ),
                        (&hyper::Method::GET, "/") => (
                            StatusCode::OK,
                            "text/plain; charset=utf-8",
                            "ibsm: metrics at /metrics\n".to_string(),
                        ),
                        _ => (
                            StatusCode::NOT_FOUND,
                            "text/plain; charset=utf-8",
                            "not found\n".to_string(),
                        ),
                    };
                    Response::builder()
                        .status(code)
                        .header("content-type", ctype)
                        .body(Full::new(Bytes::from(body)))
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

/// The unhealthy ports file of the state directory.
pub const UNHEALTHY_FILE: &str = "unhealthy-ports";

/// Reads an unhealthy ports file: `0xGUID PORT reason` per line, `#` comments. A line that
/// does not read is logged (file and line) and skipped: one bad line must not stop the SM.
/// A missing file is an empty list.
pub fn read_unhealthy(path: &Path) -> io::Result<Vec<crate::core::UnhealthyPort>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut parts = t.splitn(3, char::is_whitespace);
        let guid = parts
            .next()
            .and_then(|g| u64::from_str_radix(g.strip_prefix("0x")?, 16).ok());
        let port = parts.next().and_then(|p| p.parse::<u8>().ok());
        match (guid, port) {
            (Some(g), Some(p)) => out.push(crate::core::UnhealthyPort {
                node: Guid(g),
                port: p,
                reason: parts.next().unwrap_or("").trim().to_string(),
            }),
            _ => tracing::warn!(
                file = %path.display(),
                line = i + 1,
                "not \"0xGUID PORT reason\"; line skipped"
            ),
        }
    }
    Ok(out)
}

/// Writes the unhealthy ports file through a temporary file renamed over it.
pub fn write_unhealthy(path: &Path, ports: &[crate::core::UnhealthyPort]) -> io::Result<()> {
    let mut text = String::from("# ibsm: ports left out of the subnet (node GUID, port, why)\n");
    for u in ports {
        text.push_str(&format!("{} {} {}\n", u.node, u.port, u.reason));
    }
    sm_core::state_file::replace(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unhealthy_file_round_trips_and_skips_bad_lines() {
        let dir = std::env::temp_dir().join(format!("ibsm-unhealthy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(UNHEALTHY_FILE);
        assert!(read_unhealthy(&path).unwrap().is_empty());
        let ports = vec![crate::core::UnhealthyPort {
            node: Guid(0x2c9_0300_0000_1234),
            port: 5,
            reason: "link to 0x1[3] went down 5 times within 60 s".into(),
        }];
        write_unhealthy(&path, &ports).unwrap();
        assert_eq!(read_unhealthy(&path).unwrap(), ports);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("garbage\n0x12 notaport why\n0x0000000000000042 7\n");
        std::fs::write(&path, text).unwrap();
        let read = read_unhealthy(&path).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!((read[1].node, read[1].port), (Guid(0x42), 7));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn classic_text_names_counter_families_by_their_samples() {
        let open = "# HELP x Things.\n# TYPE x counter\nx_total 3\n# HELP g A gauge.\n\
                    # TYPE g gauge\ng 1\n# EOF\n";
        assert_eq!(
            classic_text(open),
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total 3\n# HELP g A gauge.\n\
             # TYPE g gauge\ng 1\n"
        );
    }
}
