//! Drawing a case from a seed: a fabric of every generator family, a configuration, and a
//! schedule of faults, SMs, reloads and SA requests at random virtual times.

use std::fmt::Write as _;

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, NodeSpec, PortIdx};
use sm_core::generate::{
    Dragonfly, DragonflyPlus, FatTree2, FatTree3, GenSpec, Grid, KaryNTree, Random, Ratio,
    SplitMix64, generate, remove_links,
};
use sm_core::topo::{WriteOptions, write_ibnetdiscover};
use sm_mad::Guid;
use sm_sim::scenario::{Action, Event, FaultParam, NodeRef, PortRef, Scenario, Target};

use super::{Case, Nanos};

const MS: Nanos = 1_000_000;
const S: Nanos = 1_000_000_000;

/// Bounds of what [`draw`] draws.
#[derive(Debug, Clone)]
pub struct DrawOptions {
    pub min_hosts: usize,
    pub max_hosts: usize,
    pub min_events: usize,
    pub max_events: usize,
}

impl Default for DrawOptions {
    fn default() -> Self {
        DrawOptions {
            min_hosts: 16,
            max_hosts: 2_000,
            min_events: 5,
            max_events: 50,
        }
    }
}

/// A seeded random source with the few draws a case needs.
pub(super) struct Rng(SplitMix64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        // Seeds next to each other draw unrelated cases.
        Rng(SplitMix64::new(seed ^ 0x5eed_50a4_7e57_0000))
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.0.below(n.max(1))
    }
    /// Uniform in `a..=b`.
    pub(super) fn range(&mut self, a: u64, b: u64) -> u64 {
        a + self.below(b.saturating_sub(a) + 1)
    }
    pub(super) fn chance(&mut self, p: f64) -> bool {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 1.0 < p
    }
    pub(super) fn pick<'a, T>(&mut self, xs: &'a [T]) -> Option<&'a T> {
        if xs.is_empty() {
            return None;
        }
        xs.get(self.below(xs.len() as u64) as usize)
    }
    fn frac(&mut self, a: f64, b: f64) -> f64 {
        a + (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * (b - a)
    }
}

/// Draws the case of `seed`.
pub fn draw(seed: u64, o: &DrawOptions) -> Case {
    let mut rng = Rng::new(seed);
    let (mut fabric, mut summary) = draw_fabric(&mut rng, o);
    let new_switch = add_new_switch(&mut rng, &mut fabric);
    if let Some(n) = new_switch {
        let _ = write!(summary, "; a new switch {} to plug in", fabric.node(n).guid);
    }
    // The text is the case: the fabric the run uses is read back from it.
    let mut net = Vec::new();
    let comment = format!("ibsm soak seed {seed}: {summary}");
    let _ = write_ibnetdiscover(
        &fabric,
        &WriteOptions {
            comment: Some(comment),
        },
        &mut net,
    );
    let net = String::from_utf8_lossy(&net).into_owned();
    if let Ok(t) = sm_core::read_topology_str(&net, std::path::Path::new("fabric.net")) {
        fabric = t.fabric;
    }
    let hosts = end_ports(&fabric);
    let sm_port = hosts.get(rng.below(hosts.len() as u64) as usize).copied();
    let sm_port = sm_port.unwrap_or(PortIdx(0));
    let (config, cfg_summary, base) = draw_config(&mut rng, &fabric);
    summary.push_str("; ");
    summary.push_str(&cfg_summary);
    let mut s = Schedule {
        rng,
        fabric: &fabric,
        events: Vec::new(),
        reloads: Vec::new(),
        sm_port,
        base,
        sms: vec![(sm_port, 0)],
        groups: Vec::new(),
        gone: Vec::new(),
        cloned: false,
    };
    s.sms[0].1 = s.base.priority;
    s.peers();
    if let Some(n) = new_switch {
        s.push(0, Action::Unplug(node_ref(&fabric, n)));
    }
    let count = s.rng.range(o.min_events as u64, o.max_events as u64) as usize;
    let span = s.rng.range(20, 90) * S;
    // Whole milliseconds: schedules read better, and nothing needs finer.
    let mut times: Vec<Nanos> = (0..count)
        .map(|_| s.rng.range(S / MS, span / MS) * MS)
        .collect();
    times.sort_unstable();
    let mut plugged = new_switch.is_none();
    for t in times {
        if !plugged && s.rng.chance(0.15) {
            plugged = true;
            if let Some(n) = new_switch {
                s.push(t, Action::Plug(node_ref(&fabric, n)));
                continue;
            }
        }
        s.one(t);
    }
    if let Some(n) = new_switch.filter(|_| !plugged) {
        s.push(span, Action::Plug(node_ref(&fabric, n)));
    }
    let last = s.events.iter().map(|e| e.at).max().unwrap_or(0);
    // Long enough after the last event for the light sweeps to find what traps missed and
    // for a standby to notice a dead master.
    let quiet = 60 * S;
    let summary = format!("{summary}; {} events over {}s", s.events.len(), last / S);
    let mut events = s.events;
    events.sort_by_key(|e| e.at);
    for (i, e) in events.iter_mut().enumerate() {
        e.line = i + 1;
    }
    let reloads = s.reloads;
    let sm_guid = fabric.node(fabric.port(sm_port).node).guid;
    let sm_num = fabric.port(sm_port).num;
    Case {
        seed,
        summary,
        net,
        fabric,
        config,
        reloads,
        sm_port: (sm_guid, sm_num),
        schedule: Scenario {
            file: "schedule.scn".into(),
            events,
        },
        run_for: last + quiet,
        sim_seed: seed,
    }
}

/// Linked CA ports.
fn end_ports(f: &Fabric) -> Vec<PortIdx> {
    f.cas()
        .flat_map(|n| f.node_ports(n))
        .filter(|&p| f.port(p).remote.is_some())
        .collect()
}

fn node_ref(f: &Fabric, n: NodeIdx) -> NodeRef {
    NodeRef::Guid(f.node(n).guid)
}

fn port_ref(f: &Fabric, p: PortIdx) -> PortRef {
    PortRef {
        node: node_ref(f, f.port(p).node),
        port: f.port(p).num,
    }
}

// -------------------------------------------------------------------------------------
// Fabrics.

fn draw_fabric(rng: &mut Rng, o: &DrawOptions) -> (Fabric, String) {
    // Small fabrics most often: they run fastest, and most bugs need no size.
    let class = rng.below(100);
    let (lo, hi) = match class {
        0..50 => (o.min_hosts, 128.max(o.min_hosts)),
        50..85 => (128.min(o.max_hosts), 600.min(o.max_hosts)),
        _ => (600.min(o.max_hosts), o.max_hosts),
    };
    for attempt in 0..200 {
        let spec = draw_spec(rng);
        let Ok(mut f) = generate(&spec) else { continue };
        let hosts = f.cas().count();
        let fits = if attempt < 60 {
            (lo..=hi).contains(&hosts)
        } else {
            (o.min_hosts..=o.max_hosts).contains(&hosts)
        };
        if !fits {
            continue;
        }
        let mut title = format!(
            "{} {} ({} hosts, {} switches)",
            spec.family(),
            serde_json::to_string(&spec).unwrap_or_default(),
            hosts,
            f.switches().count()
        );
        let tree = matches!(
            spec,
            GenSpec::FatTree2(_) | GenSpec::FatTree3(_) | GenSpec::KaryNTree(_)
        );
        if rng.chance(if tree { 0.2 } else { 0.08 }) {
            let fraction = rng.frac(0.02, 0.1);
            let seed = rng.below(1_000);
            let r = remove_links(&mut f, fraction, seed);
            let _ = write!(
                title,
                ", degraded: {} of {} switch links removed (--remove-links {fraction:.3} --remove-seed {seed})",
                r.removed, r.of
            );
        }
        return (f, title);
    }
    let spec = GenSpec::FatTree2(FatTree2::new(8));
    let f = generate(&spec).unwrap_or_default();
    (f, "fat-tree2 radix 8 (fallback)".into())
}

fn draw_spec(rng: &mut Rng) -> GenSpec {
    let ca_ports = if rng.chance(0.15) { 2 } else { 1 };
    match rng.below(100) {
        0..25 => {
            let radix = *rng
                .pick(&[8u32, 12, 16, 20, 24, 32, 36, 48, 60])
                .unwrap_or(&8);
            let mut s = FatTree2::new(radix);
            s.ca_ports = ca_ports;
            if rng.chance(0.25) {
                let r = *rng.pick(&[(2u32, 1u32), (3, 1)]).unwrap_or(&(2, 1));
                if radix % (r.0 + r.1) == 0 {
                    s.oversubscription = Some(Ratio { down: r.0, up: r.1 });
                }
            }
            if rng.chance(0.3) {
                // Fewer leaves than the spines take: spine ports free for a new leaf.
                s.leaves = Some(rng.range(u64::from(radix / 2), u64::from(radix - 1)) as u32);
            }
            GenSpec::FatTree2(s)
        }
        25..45 => {
            let radix = *rng.pick(&[4u32, 6, 8, 10, 12, 14, 16, 18]).unwrap_or(&8);
            let mut s = FatTree3::new(radix);
            s.ca_ports = ca_ports;
            if rng.chance(0.3) {
                s.pods = Some(rng.range(u64::from(radix / 2).max(2), u64::from(radix)) as u32);
            }
            if rng.chance(0.2) {
                let max = radix / 2 / ca_ports;
                s.hosts_per_leaf = Some(rng.range(1, u64::from(max.max(1))) as u32);
            }
            GenSpec::FatTree3(s)
        }
        45..50 => GenSpec::KaryNTree(KaryNTree {
            radix: *rng.pick(&[4u32, 6, 8]).unwrap_or(&4),
            levels: rng.range(2, 4) as u32,
            ca_ports: 1,
        }),
        50..68 => {
            let dims: Vec<u32> = if rng.chance(0.6) {
                vec![rng.range(3, 8) as u32, rng.range(3, 8) as u32]
            } else {
                (0..3).map(|_| rng.range(3, 5) as u32).collect()
            };
            let hosts = rng.range(1, 4) as u32;
            let mut g = Grid::new(dims.clone(), hosts);
            g.ca_ports = ca_ports;
            if rng.chance(0.4) {
                g.radix = Some(2 * dims.len() as u32 + hosts * ca_ports + 2);
            }
            if rng.chance(0.55) {
                GenSpec::Torus(g)
            } else {
                GenSpec::Mesh(g)
            }
        }
        68..78 => {
            let mut d = Dragonfly::new(
                rng.range(3, 10) as u32,
                rng.range(2, 6) as u32,
                rng.range(1, 4) as u32,
            );
            d.ca_ports = ca_ports;
            if rng.chance(0.4) {
                d.radix = Some(
                    d.hosts_per_switch * ca_ports
                        + d.switches_per_group.saturating_sub(1)
                        + d.global_per_switch
                        + 2,
                );
            }
            GenSpec::Dragonfly(d)
        }
        78..88 => {
            let groups = rng.range(3, 8) as u32;
            let spines = rng.range(2, 4) as u32;
            GenSpec::DragonflyPlus(DragonflyPlus {
                groups,
                leaves_per_group: rng.range(2, 4) as u32,
                spines_per_group: spines,
                hosts_per_leaf: rng.range(2, 8) as u32,
                global_per_spine: (groups - 1).div_ceil(spines).max(1),
                radix: None,
                ca_ports,
            })
        }
        _ => {
            let radix = rng.range(8, 24) as u32;
            let hosts = rng.range(1, 4) as u32;
            GenSpec::Random(Random {
                switches: rng.range(6, 60) as u32,
                radix,
                hosts_per_switch: hosts,
                links: None,
                seed: rng.below(10_000),
                ca_ports,
            })
        }
    }
}

/// Switch ports with no cable.
fn free_ports(f: &Fabric, n: NodeIdx) -> Vec<PortIdx> {
    f.node_ports(n)
        .filter(|&p| f.port(p).num > 0 && f.port(p).exists && f.port(p).remote.is_none())
        .collect()
}

/// Maybe a switch (with a host or two) cabled to free switch ports, to be plugged in while
/// the SM runs. Where every switch without hosts has a free port (a 2-level tree with
/// fewer leaves than its spines take), it is a new leaf under all of them.
fn add_new_switch(rng: &mut Rng, f: &mut Fabric) -> Option<NodeIdx> {
    if !rng.chance(0.3) {
        return None;
    }
    let has_hosts = |f: &Fabric, n: NodeIdx| {
        f.node_ports(n).any(|p| {
            f.peer(p)
                .is_some_and(|(m, _)| f.node(m).kind != NodeKind::Switch)
        })
    };
    let switches: Vec<NodeIdx> = f.switches().collect();
    let free: Vec<NodeIdx> = switches
        .iter()
        .copied()
        .filter(|&n| !free_ports(f, n).is_empty())
        .collect();
    if free.is_empty() {
        return None;
    }
    let tops: Vec<NodeIdx> = switches
        .iter()
        .copied()
        .filter(|&n| !has_hosts(f, n))
        .collect();
    let uplinks: Vec<NodeIdx> = if !tops.is_empty() && tops.iter().all(|n| free.contains(n)) {
        tops
    } else {
        let k = rng.range(1, 2.min(free.len() as u64)) as usize;
        let mut v = free.clone();
        for i in 0..k {
            let j = i + rng.below((v.len() - i) as u64) as usize;
            v.swap(i, j);
        }
        v.truncate(k);
        v
    };
    let hosts = rng.range(1, 3) as u8;
    let ports = u8::try_from(uplinks.len()).ok()?.checked_add(hosts + 1)?;
    let guid = Guid(0x0002_fe00_0000_0000);
    let sw = f
        .add_node(NodeSpec::new(NodeKind::Switch, guid, "new switch", ports))
        .ok()?;
    let mut next = 1u8;
    for &u in &uplinks {
        let Some(&q) = free_ports(f, u).first() else {
            continue;
        };
        let p = f.port_of(sw, next)?;
        let speed = f.port(q).speed;
        f.port_mut(p).speed = speed;
        f.connect(p, q).ok()?;
        next += 1;
    }
    for h in 0..hosts {
        let g = Guid(0x0001_fe00_0000_0000 + (u64::from(h) << 8));
        let ca = f
            .add_node(NodeSpec::new(
                NodeKind::Ca,
                g,
                format!("new host {h} on new switch"),
                1,
            ))
            .ok()?;
        let (p, q) = (f.port_of(sw, next)?, f.port_of(ca, 1)?);
        f.connect(p, q).ok()?;
        next += 1;
    }
    Some(sw)
}

// -------------------------------------------------------------------------------------
// Configurations.

/// What reloads start from.
#[derive(Debug, Clone)]
pub(super) struct BaseConfig {
    engines: String,
    lmc: u8,
    partitions: Option<String>,
    pub(super) priority: u8,
    /// More `[sm]` keys, as drawn.
    sm_rest: String,
    /// The `[qos]` and `[health]` tables, as drawn.
    tail: String,
}

impl BaseConfig {
    fn render(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(t, "# drawn by ibsm soak");
        let _ = writeln!(t, "[sm]");
        let _ = writeln!(t, "lmc = {}", self.lmc);
        let _ = writeln!(t, "sm_priority = {}", self.priority);
        t.push_str(&self.sm_rest);
        let _ = writeln!(t, "\n[routing]\nengines = [{}]", self.engines);
        if let Some(p) = &self.partitions {
            let _ = writeln!(t, "\n[partitions]\ntext = \"\"\"\n{p}\"\"\"");
        }
        t.push_str(&self.tail);
        t
    }
}

fn engines_toml(list: &[&str]) -> String {
    list.iter()
        .map(|e| format!("\"{e}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

const NAMED_ENGINES: &[&[&str]] = &[
    &["minhop"],
    &["updn"],
    &["ftree"],
    &["layered"],
    &["ftree", "updn"],
];

fn draw_engines(rng: &mut Rng) -> (String, String) {
    if rng.chance(0.55) {
        return (engines_toml(&["auto"]), "auto".into());
    }
    let e = *rng.pick(NAMED_ENGINES).unwrap_or(&NAMED_ENGINES[0]);
    (engines_toml(e), e.join(","))
}

fn draw_partitions(rng: &mut Rng, f: &Fabric, first_key: u64) -> String {
    let guids: Vec<Guid> = end_ports(f).iter().map(|&p| f.port(p).guid).collect();
    let mut t = String::new();
    if rng.chance(0.5) {
        t.push_str("Default=0x7fff, ipoib : ALL=full ;\n");
    } else {
        t.push_str("Default=0x7fff : ALL=full ;\n");
    }
    let n = rng.range(1, 3);
    for i in 0..n {
        t.push_str(&partition(rng, &guids, first_key + 0x10 * i));
    }
    t
}

/// One partition of some of `guids`, with P_Key `pkey`.
fn partition(rng: &mut Rng, guids: &[Guid], pkey: u64) -> String {
    let mut t = String::new();
    let ipoib = if rng.chance(0.5) { ", ipoib" } else { "" };
    let _ = write!(t, "P{pkey:x}=0x{pkey:04x}{ipoib} :");
    let mut members = Vec::new();
    if rng.chance(0.25) {
        members.push("ALL_CAS=limited".to_string());
    }
    let k = rng.range(1, (guids.len() as u64 / 2).max(1));
    for _ in 0..k {
        if let Some(g) = rng.pick(guids) {
            let m = if rng.chance(0.8) { "full" } else { "limited" };
            members.push(format!("{:#018x}={m}", g.0));
        }
    }
    let _ = writeln!(t, " {} ;", members.join(",\n  "));
    t
}

fn draw_config(rng: &mut Rng, f: &Fabric) -> (String, String, BaseConfig) {
    let (engines, engine_words) = draw_engines(rng);
    let lmc = match rng.below(100) {
        0..60 => 0,
        60..85 => 1,
        _ => 2,
    };
    let mut words = vec![format!("engines {engine_words}"), format!("lmc {lmc}")];
    let mut sm_rest = String::new();
    let interval = if rng.chance(0.7) {
        10_000
    } else {
        *rng.pick(&[1_000u64, 3_000, 5_000, 30_000])
            .unwrap_or(&10_000)
    };
    let _ = writeln!(sm_rest, "sweep_interval_ms = {interval}");
    if interval != 10_000 {
        words.push(format!("sweep every {interval} ms"));
    }
    // Standbys notice a dead master within seconds, not the default 40.
    let _ = writeln!(sm_rest, "sm_poll_interval_ms = 2000\nsm_poll_retries = 3");
    if rng.chance(0.3) {
        let key = rng.range(1, u64::MAX >> 1);
        let bits = rng.below(4);
        let lease = if rng.chance(0.5) { 0 } else { 60 };
        let _ = writeln!(
            sm_rest,
            "m_key = \"{key:#x}\"\nm_key_protect_bits = {bits}\nm_key_lease_period = {lease}"
        );
        let per_port = rng.chance(0.3);
        if per_port {
            let _ = writeln!(sm_rest, "m_key_per_port = true");
        }
        words.push(format!(
            "M_Key protect bits {bits}{}",
            if per_port { " per port" } else { "" }
        ));
    }
    let partitions = rng.chance(0.45).then(|| draw_partitions(rng, f, 0x10));
    if partitions.is_some() {
        words.push("partitions".into());
    }
    let mut tail = String::new();
    if rng.chance(0.3) {
        let _ = writeln!(tail, "\n[qos]\nenabled = true");
        words.push("qos".into());
    }
    if rng.chance(0.25) {
        let _ = writeln!(tail, "\n[health]\nlink_flaps = 0\ntrap_burst = 0");
        words.push("health off".into());
    }
    let priority = rng.below(16) as u8;
    words.push(format!("priority {priority}"));
    let base = BaseConfig {
        engines,
        lmc,
        partitions,
        priority,
        sm_rest,
        tail,
    };
    (base.render(), words.join(", "), base)
}

// -------------------------------------------------------------------------------------
// Schedules.

/// The schedule being drawn, and what it has done to the fabric so far.
struct Schedule<'f> {
    rng: Rng,
    fabric: &'f Fabric,
    events: Vec<Event>,
    reloads: Vec<(String, String)>,
    sm_port: PortIdx,
    base: BaseConfig,
    /// SMs running (port, priority); the first is the SM under test while it runs.
    sms: Vec<(PortIdx, u8)>,
    /// Multicast groups joined (port, MGID).
    groups: Vec<(PortIdx, u128)>,
    /// Nodes removed for good.
    gone: Vec<NodeIdx>,
    /// A host was plugged in with another's GUID.
    cloned: bool,
}

const MGIDS: [u128; 4] = [
    0xff12_a01b_ffff_0000_0000_0000_0000_0101,
    0xff12_a01b_ffff_0000_0000_0000_0000_0102,
    0xff15_a01b_ffff_0000_0000_0000_0000_0103,
    0xff12_a01b_ffff_0000_0000_0000_0000_0104,
];

impl Schedule<'_> {
    fn push(&mut self, at: Nanos, action: Action) {
        self.events.push(Event {
            line: 0,
            at,
            action,
        });
    }

    fn later(&mut self, t: Nanos, lo: Nanos, hi: Nanos) -> Nanos {
        t + self.rng.range(lo / MS, hi / MS) * MS
    }

    fn alive(&self, n: NodeIdx) -> bool {
        !self.gone.contains(&n)
    }

    /// A host port that holds no SM.
    fn client_port(&mut self) -> Option<PortIdx> {
        let f = self.fabric;
        let taken: Vec<PortIdx> = self.sms.iter().map(|s| s.0).chain([self.sm_port]).collect();
        let ports: Vec<PortIdx> = end_ports(f)
            .into_iter()
            .filter(|p| !taken.contains(p) && self.alive(f.port(*p).node))
            .collect();
        self.rng.pick(&ports).copied()
    }

    /// The SMs besides the one under test that run from the start.
    fn peers(&mut self) {
        for _ in 0..self.rng.below(3) {
            let Some(p) = self.client_port() else { return };
            let priority = self.rng.below(16) as u8;
            let port = port_ref(self.fabric, p);
            self.push(
                0,
                Action::StartSm {
                    port,
                    priority,
                    sm_key: None,
                },
            );
            self.sms.push((p, priority));
        }
    }

    fn one(&mut self, t: Nanos) {
        if !self.cloned && self.rng.chance(0.02) {
            self.cloned = true;
            return self.clone_guid(t);
        }
        let f = self.fabric;
        let links: Vec<(PortIdx, PortIdx)> = f
            .links()
            .filter(|&(a, b)| self.alive(f.port(a).node) && self.alive(f.port(b).node))
            .collect();
        let is_switch = |n: NodeIdx| f.node(n).kind == NodeKind::Switch;
        let switches: Vec<NodeIdx> = f.switches().filter(|&n| self.alive(n)).collect();
        let sm_nodes: Vec<NodeIdx> = self.sms.iter().map(|s| f.port(s.0).node).collect();
        let hosts: Vec<NodeIdx> = f
            .cas()
            .filter(|&n| self.alive(n) && !sm_nodes.contains(&n))
            .collect();
        match self.rng.below(101) {
            0..20 => {
                let sw: Vec<(PortIdx, PortIdx)> = links
                    .iter()
                    .copied()
                    .filter(|&(a, b)| is_switch(f.port(a).node) && is_switch(f.port(b).node))
                    .collect();
                let pool = if self.rng.chance(0.7) && !sw.is_empty() {
                    &sw
                } else {
                    &links
                };
                let Some(&(a, _)) = self.rng.pick(pool) else {
                    return;
                };
                let port = port_ref(f, a);
                self.push(t, Action::LinkDown(port.clone()));
                if self.rng.chance(0.7) {
                    let up = self.later(t, 200 * MS, 20 * S);
                    self.push(up, Action::LinkUp(port));
                }
            }
            20..28 => {
                let Some(&(a, _)) = self.rng.pick(&links) else {
                    return;
                };
                let period = self.rng.range(2, 50) * MS;
                let count = self.rng.range(2, 20) as u32;
                let port = port_ref(f, a);
                self.push(
                    t,
                    Action::Flap {
                        port,
                        period,
                        count,
                        down: None,
                    },
                );
            }
            28..37 => {
                let Some(&n) = self.rng.pick(&switches) else {
                    return;
                };
                let down = if self.rng.chance(0.5) {
                    0
                } else {
                    self.rng.range(100, 3_000) * MS
                };
                let node = node_ref(f, n);
                self.push(t, Action::Reboot { node, down });
            }
            37..48 => {
                // A switch or a host unplugged, maybe plugged back later.
                let pool = if self.rng.chance(0.45) {
                    &switches
                } else {
                    &hosts
                };
                let Some(&n) = self.rng.pick(pool) else {
                    return;
                };
                let node = node_ref(f, n);
                self.push(t, Action::Unplug(node.clone()));
                if self.rng.chance(0.7) {
                    let back = self.later(t, S, 20 * S);
                    self.push(back, Action::Plug(node));
                }
            }
            48..50 => {
                let pool = if self.rng.chance(0.3) {
                    &switches
                } else {
                    &hosts
                };
                let Some(&n) = self.rng.pick(pool) else {
                    return;
                };
                self.gone.push(n);
                let node = node_ref(f, n);
                self.push(t, Action::Remove(node));
            }
            50..55 => {
                let pool = if self.rng.chance(0.5) {
                    &switches
                } else {
                    &hosts
                };
                let Some(&n) = self.rng.pick(pool) else {
                    return;
                };
                let node = node_ref(f, n);
                self.push(
                    t,
                    Action::Silent {
                        node: node.clone(),
                        on: true,
                    },
                );
                if self.rng.chance(0.8) {
                    let off = self.later(t, S, 30 * S);
                    self.push(off, Action::Silent { node, on: false });
                }
            }
            55..59 => {
                let Some(&n) = self.rng.pick(&switches) else {
                    return;
                };
                let node = node_ref(f, n);
                let delay = self.rng.range(1, 50) * MS;
                self.push(
                    t,
                    Action::Slow {
                        node: node.clone(),
                        delay,
                    },
                );
                let off = self.later(t, S, 20 * S);
                self.push(off, Action::Slow { node, delay: 0 });
            }
            59..65 => {
                let p = self.rng.range(5, 30) as f64 / 100.0;
                self.push(
                    t,
                    Action::Fault {
                        target: Target::Fabric,
                        param: FaultParam::Loss(p),
                    },
                );
                let end = self.later(t, 200 * MS, 5 * S);
                self.push(end, Action::ClearFaults(Target::Fabric));
            }
            65..68 => {
                // The master dies, if another SM is there to take over.
                if self.sms.len() < 2 {
                    return;
                }
                let guid = |p: PortIdx| f.port(p).guid;
                let Some(i) = (0..self.sms.len())
                    .max_by_key(|&i| (self.sms[i].1, std::cmp::Reverse(guid(self.sms[i].0))))
                else {
                    return;
                };
                let (p, _) = self.sms.remove(i);
                let port = port_ref(f, p);
                self.push(t, Action::StopSm(port));
            }
            68..71 => {
                // A better SM starts.
                let Some(p) = self.client_port() else { return };
                let best = self.sms.iter().map(|s| s.1).max().unwrap_or(0);
                let priority = (best + 1).min(15);
                let port = port_ref(f, p);
                self.push(
                    t,
                    Action::StartSm {
                        port,
                        priority,
                        sm_key: None,
                    },
                );
                self.sms.push((p, priority));
            }
            71..77 => self.reload(t),
            77..88 => {
                let Some(p) = self.client_port() else { return };
                let mgid = MGIDS[self.rng.below(MGIDS.len() as u64) as usize];
                let send_only = self.rng.chance(0.2);
                let port = port_ref(f, p);
                self.push(
                    t,
                    Action::Join {
                        port: port.clone(),
                        mgid,
                        pkey: 0xffff,
                        send_only,
                    },
                );
                self.groups.push((p, mgid));
                if self.rng.chance(0.4) {
                    let leave = self.later(t, S, 20 * S);
                    self.push(leave, Action::Leave { port, mgid });
                }
            }
            88..91 => {
                let Some(&(p, mgid)) = self.rng.pick(&self.groups) else {
                    return;
                };
                let port = port_ref(f, p);
                self.push(t, Action::Leave { port, mgid });
            }
            _ => {
                let Some(p) = self.client_port() else { return };
                let id = 0x1000_0000_0000_0000 | self.rng.below(1 << 16);
                let lease = self.rng.chance(0.5).then_some(30);
                let port = port_ref(f, p);
                self.push(t, Action::Service { port, id, lease });
            }
        }
    }

    /// A host card with another host's GUIDs is plugged in where a host was.
    fn clone_guid(&mut self, t: Nanos) {
        let f = self.fabric;
        let sm_nodes: Vec<NodeIdx> = self.sms.iter().map(|s| f.port(s.0).node).collect();
        let hosts: Vec<NodeIdx> = f
            .cas()
            .filter(|&n| self.alive(n) && !sm_nodes.contains(&n))
            .collect();
        let (Some(&a), Some(&b)) = (self.rng.pick(&hosts), self.rng.pick(&hosts)) else {
            return;
        };
        if a == b {
            return;
        }
        let (from, to) = (node_ref(f, a), node_ref(f, b));
        self.push(t, Action::Unplug(to.clone()));
        self.push(
            t,
            Action::CloneGuid {
                from,
                to: to.clone(),
            },
        );
        let back = self.later(t, S, 10 * S);
        self.push(back, Action::Plug(to));
    }

    /// A configuration reload: a partition added or removed, another engine, another LMC.
    fn reload(&mut self, t: Nanos) {
        let mut next = self.base.clone();
        let guids: Vec<Guid> = end_ports(self.fabric)
            .iter()
            .map(|&p| self.fabric.port(p).guid)
            .collect();
        let what = match self.rng.below(4) {
            0 => {
                let key = 0x100 + 0x10 * self.reloads.len() as u64;
                let add = partition(&mut self.rng, &guids, key);
                let mut text = next
                    .partitions
                    .take()
                    .unwrap_or_else(|| "Default=0x7fff : ALL=full ;\n".into());
                text.push_str(&add);
                next.partitions = Some(text);
                "partition added"
            }
            1 => {
                next.partitions = match next.partitions.take() {
                    Some(text) => {
                        // Drop the last partition; with none left, no file at all.
                        let mut parts: Vec<&str> = text.split_inclusive(";\n").collect();
                        parts.pop();
                        (parts.len() > 1).then(|| parts.concat())
                    }
                    None => None,
                };
                "partition removed"
            }
            2 => {
                let list = self.rng.pick(NAMED_ENGINES).copied().unwrap_or(&["minhop"]);
                next.engines = if self.rng.chance(0.3) {
                    engines_toml(&["auto"])
                } else {
                    engines_toml(list)
                };
                "engine changed"
            }
            _ => {
                next.lmc = if next.lmc == 0 { 1 } else { next.lmc - 1 };
                "LMC changed"
            }
        };
        let name = format!("reload-{}.toml", self.reloads.len() + 1);
        let mut text = next.render();
        text.insert_str(0, &format!("# {what}\n"));
        self.reloads.push((name.clone(), text));
        self.base = next;
        self.push(t, Action::Reload(name));
    }
}
