//! The subnet manager as a sans-IO state machine (quinn-proto style).
//!
//! Inputs: [`Sm::handle_mad`] with the time and a received MAD, [`Sm::handle_timeout`] when
//! [`Sm::poll_timeout`]'s deadline passes, and commands ([`Sm::start`], [`Sm::request_sweep`]).
//! Outputs, pulled by the shell: [`Sm::poll_transmit`], [`Sm::poll_timeout`],
//! [`Sm::poll_event`]. The core never reads a clock, a socket or an unseeded RNG: the same
//! inputs give the same outputs, which is what makes virtual-time tests possible.
//!
//! The core makes what the fabric holds equal to what it should hold. A heavy sweep, file
//! by file:
//!
//! 1. [`discover`]: directed-route discovery fills the model ([`model::Discovered`]: the
//!    fabric, every attribute as read, the route to every agent), laid out in GUID order.
//! 2. [`election`]: the SMs found elect a master; a standby stops here.
//! 3. [`plan`]: a pure function of the model, the configuration and the LID store: LIDs,
//!    routes, the PortInfo of every port, the P_Key / QoS blocks.
//! 4. [`program`]: the Sets that differ from what the nodes hold ([`shadow`]), pulled into
//!    the request window ([`requests`]) only as it has room; then ARMED, then ACTIVE.
//! 5. [`snapshot`]: the SA's database from the model and the plan; [`mcast`]: the
//!    multicast trees and their MFT blocks.
//!
//! Light sweeps poll SwitchInfo.PortStateChange; a trap ([`traps`]) or a change starts a
//! heavy sweep. Time is [`time::Instant`]; the core's timers live in one table.

mod discover;
mod election;
pub mod health;
mod mcast;
mod mkeys;
mod model;
mod plan;
mod program;
mod repair;
mod report;
mod requests;
mod shadow;
mod snapshot;
pub mod time;
mod traps;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use sm_core::dump::Lfts;
use sm_core::fabric::{Fabric, NodeIdx, PortIdx};
use sm_core::lid::LidStore;
use sm_core::partitions::{Partitions, TableOptions};
use sm_core::qos::QosOptions;
use sm_mad::port_info::{PhysPortState, PortState};
use sm_mad::sm_info::SmState;
use sm_mad::smp::{self, Route};
use sm_mad::{Guid, Lid, MadStatus, Method, MgmtClass, Tid, attr, mad, mft, notice, port_info};
use sm_routing::Options as RouteOptions;

use crate::sa::{self, Requester, SaConfig};
pub use discover::DiscoverError;
pub use election::RemoteSm;
use election::{Action, Ask, Decision, Election};
pub use health::{HealthConfig, UnhealthyPort};
use mcast::{McastSet, McastState, SyncInput};
pub use model::{Discovered, DrPath, Missing, NodeFacts, PortFacts};
pub use plan::{Moved, Plan, PlanError, Repaired, TableBlock, plan};
use program::{Answered, Programming, Stage};
pub use report::{DuplicateGuid, LightReport, Nanos, SweepReport, Unresponsive};
use requests::{DestKey, Requests};
pub use requests::{MadCounts, Transmit};
use shadow::{Shadow, TableKey};
pub use time::Instant;
use time::{Timer, TimerTable};

/// How long joins and leaves gather before their trees are recomputed and programmed.
const MCAST_BATCH: Duration = Duration::from_millis(1);

/// What a configuration reload changed ([`Sm::reconfigure`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconfigured {
    /// Parts taken while running.
    pub applied: Vec<&'static str>,
    /// Keys that changed but take effect only at a restart.
    pub needs_restart: Vec<&'static str>,
}

/// What the core is told at start.
#[derive(Debug, Clone)]
pub struct Params {
    pub lmc: u8,
    /// Routing engine chain, e.g. `"ftree,updn,minhop"`.
    pub routing: String,
    pub routing_options: RouteOptions,
    pub smp_timeout: Duration,
    pub smp_retries: u32,
    pub max_outstanding: usize,
    /// Light sweep interval; zero disables light sweeps.
    pub sweep_interval: Duration,
    pub subnet_prefix: u64,
    pub m_key: u64,
    pub sm_priority: u8,
    /// Cap on OperationalVLs, as a VLCap code (5 = VL0-14).
    pub max_op_vls: u8,
    pub subnet_timeout: u8,
    /// SwitchInfo.LifeTimeValue.
    pub switch_life_time: u8,
    /// PortInfo.HOQLife on switch-to-switch ports and on switch ports facing end nodes.
    pub hoq_life: u8,
    pub leaf_hoq_life: u8,
    /// Wall-clock reader (nanoseconds) used only to report how long routing took; `None`
    /// in virtual time.
    pub stopwatch: Option<fn() -> u64>,
    /// Wait before sweeping again after a sweep that did not bring the subnet up.
    pub retry_backoff: Duration,
    /// Partitions (OpenSM's behaviour without a file when none is configured).
    pub partitions: Partitions,
    pub pkey_options: TableOptions,
    /// QoS options; SL-to-VL and VL arbitration tables are programmed when enabled.
    pub qos: QosOptions,
    /// On later sweeps, keep every route that is still a legal minimal choice, so a fault
    /// moves only the routes it breaks (fewer LFT blocks to send, no traffic reshuffle).
    pub sticky_routes: bool,
    /// The SA server (how its table answers travel: see [`sa::RmppMode`]).
    pub sa: SaConfig,
    /// SM_Key: shown in our SMInfo only to SMs presenting it; their Set(SMInfo) must carry it.
    pub sm_key: u64,
    /// How often a standby asks the master for its SMInfo.
    pub poll_interval: Duration,
    /// Polls in a row the master may miss before a standby takes over.
    pub poll_retries: u32,
    /// PortInfo.M_KeyProtectBits to program with `m_key` (0..=3).
    pub m_key_protect_bits: u8,
    /// PortInfo.M_KeyLeasePeriod in seconds; 0 never expires.
    pub m_key_lease_period: u16,
    /// Give every port its own M_Key, derived from `m_key` and the port's GUID.
    pub m_key_per_port: bool,
    /// The M_Keys ports were last known to hold (the daemon's `guid2mkey`).
    pub m_keys: sm_core::mkey::KeyStore,
    /// Who is behind each port (the daemon's `neighbors`), for the key to present before
    /// discovery has read that node.
    pub neighbors: sm_core::mkey::Neighbors,
    /// The GUID of the SM's own port, where the transport knows it (a umad port's sysfs
    /// GUID, the simulated port): under per-port M_Keys, the key to present to the own
    /// port before any discovery (a standby that never swept, taking over).
    pub own_guid: Option<sm_mad::Guid>,
    /// PortInfo.LinkSpeedEnabled: 0 leaves it, 1..=7 a speed mask, 15 LinkSpeedSupported.
    pub force_link_speed: u8,
    /// PortInfo.LinkSpeedExtEnabled on ports with extended speeds: 0 leaves it, 1..=15 a
    /// mask, 30 none, 31 LinkSpeedExtSupported.
    pub force_link_speed_ext: u8,
    /// Give every port a fresh LID on the first sweep instead of the one it holds
    /// (OpenSM's `reassign_lids`; the daemon then does not load `guid2lid` either).
    pub reassign_lids: bool,
    /// When a port is unhealthy (see [`health`]).
    pub health: HealthConfig,
    /// Ports unhealthy at start (the daemon's persisted list).
    pub unhealthy: Vec<UnhealthyPort>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            lmc: 0,
            routing: "minhop".into(),
            routing_options: RouteOptions::default(),
            smp_timeout: Duration::from_millis(200),
            smp_retries: 3,
            max_outstanding: 64,
            sweep_interval: Duration::from_secs(10),
            subnet_prefix: 0xfe80_0000_0000_0000,
            m_key: 0,
            sm_priority: 0,
            max_op_vls: 5,
            subnet_timeout: 18,
            switch_life_time: 18,
            hoq_life: 18,
            leaf_hoq_life: 16,
            stopwatch: None,
            retry_backoff: Duration::from_millis(100),
            partitions: Partitions::no_file(),
            pkey_options: TableOptions::default(),
            qos: QosOptions::default(),
            sticky_routes: true,
            sa: SaConfig::default(),
            sm_key: 1,
            poll_interval: Duration::from_secs(10),
            poll_retries: 4,
            m_key_protect_bits: 0,
            m_key_lease_period: 0,
            m_key_per_port: false,
            m_keys: Default::default(),
            neighbors: Default::default(),
            own_guid: None,
            force_link_speed: 15,
            force_link_speed_ext: 0,
            reassign_lids: false,
            health: HealthConfig::default(),
            unhealthy: Vec::new(),
        }
    }
}

/// What the core tells the shell.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    SweepStarted {
        sweep: u64,
        heavy: bool,
    },
    /// A heavy sweep finished; `subnet_up` says whether every step succeeded.
    SweepDone(Box<SweepReport>),
    /// A light sweep finished.
    LightSweepDone(LightReport),
    /// A trap arrived (and was repressed).
    Trap {
        issuer: Lid,
        trap_number: u16,
    },
    /// The LID store changed and should be persisted.
    LidsChanged,
    /// The unhealthy ports changed ([`Sm::unhealthy_ports`]) and should be persisted.
    HealthChanged,
    /// The M_Keys ports hold or who is behind which port changed ([`Sm::key_stores`]) and
    /// should be persisted.
    KeysChanged,
}

/// Why an SMP is in flight.
#[derive(Debug, Clone)]
pub(crate) enum Purpose {
    // Discovery (indices of the model being discovered).
    NodeInfo {
        path: DrPath,
        from: Option<PortIdx>,
    },
    NodeDesc {
        node: NodeIdx,
    },
    SwitchInfo {
        node: NodeIdx,
    },
    PortInfo {
        port: PortIdx,
    },
    /// SMInfo of another SM found during discovery.
    SmInfo {
        port: PortIdx,
    },
    // Programming.
    /// A port's settings; `armed`: the Set also moves the port from INIT to ARMED (one SMP
    /// instead of two; refused, it is sent again without the move); `rereg`: it asks for a
    /// client reregistration.
    SetPortInfo {
        port: PortIdx,
        armed: bool,
        rereg: bool,
        /// Tries so far of a Set with a reregistration (each one's arrival checked).
        tries: u32,
    },
    /// After a settings Set with a client reregistration went unanswered: did it arrive?
    /// (It goes once: a port asked twice tells its clients twice.)
    VerifySettings {
        port: PortIdx,
        tries: u32,
    },
    /// A port state transition (ARMED or ACTIVE).
    SetPortState {
        port: PortIdx,
        want: PortState,
    },
    /// After a refused transition: read the port, which may already be there (a retry of a
    /// Set whose first answer was lost is refused by agents that treat ARMED -> ARMED as
    /// illegal).
    VerifyPortState {
        port: PortIdx,
        want: PortState,
    },
    SetSwitchInfo {
        node: NodeIdx,
    },
    /// An LFT block; `last`: its final contents (a repair's earlier phases send some
    /// blocks before all their entries are new).
    SetLft {
        node: NodeIdx,
        block: u16,
        last: bool,
    },
    /// P_Key, SL2VL or VLArb block: remembered under [`TableKey`].
    SetTable {
        key: TableKey,
        data: [u8; 64],
    },
    // Repairs.
    RepairPortInfo {
        port: PortIdx,
    },
    /// NodeInfo across a port that came up.
    RepairNodeInfo {
        port: PortIdx,
    },
    RepairSwitchInfo {
        node: NodeIdx,
    },
    /// A trapper's PortStateChange read (`get`), then cleared, before its ports are read:
    /// set, it tells a new change from a repeated trap of one already repaired; a change
    /// after the read sets it again, for the light sweep to find when the trap is not
    /// acted on.
    RepairClearPsc {
        node: NodeIdx,
        get: bool,
    },
    /// A directed-route Get across several of a lone switch's likely links and back to it
    /// (the repair's probe number `probe`): its answer shows them all up.
    RepairProbe {
        probe: usize,
    },
    /// An unhealthy link's port switched off, or back on (`on`).
    SetPhys {
        guid: Guid,
        num: u8,
        on: bool,
    },
    /// A block of the forwarding table a switch holds, read by a new master.
    ReadLft {
        node: NodeIdx,
        block: u16,
    },
    // Between sweeps.
    /// By LID where the plan routes the SM's switch to the switch's LID, else by directed
    /// route (`direct`: up*/down* ranks may leave such a pair unrouted). A read by LID
    /// that goes unanswered is asked again by directed route (`fallback`).
    LightSwitchInfo {
        lid: Lid,
        node: NodeIdx,
        direct: bool,
        fallback: bool,
    },
    /// One MFT block (between sweeps too: the switch is named by GUID).
    SetMft {
        guid: Guid,
        modifier: mft::Modifier,
    },
    SetMcastTop {
        guid: Guid,
    },
    /// An SMInfo to another SM for the election.
    Election {
        why: Ask,
        to: Guid,
    },
}

/// Where an SMP goes.
#[derive(Debug, Clone)]
enum Target {
    /// Along a directed route.
    Path(DrPath),
    /// To the agent of a port of the model, by its directed route.
    Port(PortIdx),
    /// To a node of the model, by its directed route.
    Node(NodeIdx),
    /// LID-routed.
    Lid(Lid),
}

/// An SMP the core means to send, before it is encoded.
#[derive(Debug, Clone)]
pub(crate) struct Work {
    purpose: Purpose,
    method: Method,
    attr: u16,
    modifier: u32,
    to: Target,
    data: Option<[u8; 64]>,
    /// Tries after the first; `None`: the configured number.
    retries: Option<u32>,
    /// Whom it is for, when the target does not say (discovery's routes to nodes not in
    /// the model yet); see [`dest`].
    dest: Option<DestKey>,
    /// Whose M_Key it must carry.
    key: mkeys::KeyHolder,
}

impl Work {
    fn get(purpose: Purpose, attr: u16, modifier: u32, to: Target) -> Work {
        Work {
            purpose,
            method: Method::Get,
            attr,
            modifier,
            to,
            data: None,
            retries: None,
            dest: None,
            key: mkeys::KeyHolder::FromTarget,
        }
    }

    fn set(purpose: Purpose, attr: u16, modifier: u32, to: Target, data: [u8; 64]) -> Work {
        Work {
            method: Method::Set,
            data: Some(data),
            ..Work::get(purpose, attr, modifier, to)
        }
    }
}

/// A light sweep in progress.
#[derive(Debug)]
struct Light {
    /// A switch stopped answering, by LID and by directed route: a heavy sweep.
    lost: bool,
    /// A switch answered by directed route but not by the LID route the plan gives it:
    /// the fabric's tables are not what the SM programmed (another SM ran the subnet, or
    /// a switch on the way lost its tables).
    astray: bool,
    /// Reads asked (SwitchInfo of every switch, the SMs' SMInfo).
    reads: u64,
    /// The wire counters when it began.
    counts_at: requests::MadCounts,
    /// Switches that reported a port change (their LIDs): a repair looks at them, as
    /// if they had trapped.
    changed: std::collections::BTreeSet<Lid>,
}

#[derive(Debug)]
enum Phase {
    Idle,
    Light(Light),
    Discover(Box<discover::Discovery>),
    /// A new master reads the forwarding tables the switches hold (another SM's, or this
    /// one's before a restart) before it plans: it keeps the routes it finds wherever they
    /// are legal, and sends only the blocks that differ.
    ReadTables(HeldTables),
    /// A repair looking at what the gathered traps are about.
    Repair(Box<repair::Repair>),
    Program(Programming),
}

/// The tables a new master reads, by switch GUID (index = LID; 255 where a block went
/// unanswered).
#[derive(Debug, Default)]
pub(crate) struct HeldTables {
    pub(crate) tables: std::collections::HashMap<Guid, Vec<u8>>,
    /// Blocks read, by switch GUID, to mark them held once planned.
    pub(crate) read: std::collections::HashMap<Guid, Vec<u16>>,
}

/// The sweep under way (or the last one).
#[derive(Debug, Default)]
struct Sweep {
    n: u64,
    started_at: Instant,
    phase_at: Instant,
    counts_at: MadCounts,
    /// A heavy sweep was asked for during this one.
    again: bool,
    report: SweepReport,
    /// What programming could not get answered, after every pass.
    missing: Vec<Missing>,
    /// A repair: the stopwatch reading when the first of its traps arrived.
    trap_watch: Option<u64>,
}

/// How long a destination that stopped answering is left alone: it is not asked for
/// `2^level` sweeps, heavy or light (at most [`MAX_BACKOFF_LEVEL`]), then tried again; a
/// light sweep that finds one due starts a heavy sweep for it.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    /// In [`Sm::ticks`].
    until_sweep: u64,
    level: u32,
}

const MAX_BACKOFF_LEVEL: u32 = 6;

/// PortInfo attribute modifier bit 31: the SM knows extended link speeds.
const SM_SUPPORTS_EXTENDED_SPEEDS: u32 = 1 << 31;

/// Repairs in a row with unanswered questions before a heavy sweep takes over.
const MAX_REPAIR_RETRIES: u32 = 5;

/// Sweeps in a row that may leave ports short of ACTIVE, their links up, to a repair (the
/// links trained again while programmed) before that fails the sweep.
const MAX_DEFERRALS: u32 = 2;

/// The subnet manager.
#[derive(Debug)]
pub struct Sm {
    p: Params,
    timers: TimerTable,
    reqs: Requests<Work>,
    /// Work outside the phase's own: resends, SMInfo, light sweeps, multicast Sets.
    queue: VecDeque<Work>,
    events: VecDeque<Event>,
    lids: LidStore,
    phase: Phase,
    sweep: Sweep,
    /// What the last discovery found, kept current by the answers since.
    model: Option<Arc<Discovered>>,
    /// What the subnet should hold.
    plan: Option<Arc<Plan>>,
    /// What the nodes hold of it.
    held: Shadow,
    /// Destinations left alone for a while (they stopped answering).
    backoff: std::collections::HashMap<DestKey, Backoff>,
    /// Nodes reported unresponsive (each is logged once, and again when it answers).
    unresponsive: std::collections::BTreeSet<String>,
    /// Why the next heavy sweep starts (for its report).
    trigger: Option<String>,
    /// Issuers of the traps 128 gathered for the next repair.
    trap_lids: std::collections::BTreeSet<Lid>,
    /// Stopwatch reading when the first of them arrived (for `recovery_ns`).
    trap_watch: Option<u64>,
    /// Repairs in a row that left questions unanswered.
    repair_retries: u32,
    /// The next plan routes whole (the routing configuration changed) rather than keeping
    /// the routes it can.
    reroute: bool,
    /// Switches whose PortStateChange may still be set by a change a repair applied: the
    /// far ends of its changes that did not trap (model indices). A heavy sweep clears
    /// every switch's bit it finds set, and this with it.
    psc_dirty: std::collections::BTreeSet<NodeIdx>,
    /// Switches the light sweep found without their tables, for the next repair.
    emptied: std::collections::BTreeMap<NodeIdx, sm_mad::switch_info::Repr>,
    /// Sweeps in a row that left ports short of ACTIVE to a repair.
    deferrals: u32,
    /// What the next repair was asked for by, when not traps.
    repair_cause: Option<&'static str>,
    /// End ports (by GUID) that were asked for a client reregistration and took it, since
    /// this SM became master: the SA's registrations died with the old master, so each is
    /// asked once, and again only after it left the subnet or its LID changed.
    reregistered: std::collections::HashSet<Guid>,
    up: bool,
    sa: sa::Server,
    mcast: McastState,
    election: Election,
    health: health::Health,
    trap_gate: traps::TrapGate,
    mkeys: mkeys::MKeys,
    /// Sweeps so far, heavy and light: the clock of [`Backoff`].
    ticks: u64,
    /// SMs found without our SM_Key (each logged once).
    untrusted: std::collections::BTreeSet<Guid>,
    /// GUIDs more than one device answered with, as the last heavy sweep found them.
    duplicates: Vec<DuplicateGuid>,
}

impl Sm {
    /// A new SM; `lids` is the persisted LID store (empty on a first start).
    pub fn new(p: Params, lids: LidStore) -> Sm {
        Sm {
            reqs: Requests::new(p.max_outstanding, p.smp_timeout),
            sa: sa::Server::new(p.sa),
            election: Election::new(p.sm_priority, p.sm_key, p.poll_interval, p.poll_retries),
            health: health::Health::new(p.health, &p.unhealthy),
            trap_gate: traps::TrapGate::new(p.health.trap_burst, p.health.trap_rate),
            mkeys: mkeys::MKeys::new(&p),
            ticks: 0,
            untrusted: Default::default(),
            duplicates: Vec::new(),
            p,
            timers: TimerTable::default(),
            queue: VecDeque::new(),
            events: VecDeque::new(),
            lids,
            phase: Phase::Idle,
            sweep: Sweep::default(),
            model: None,
            plan: None,
            held: Shadow::default(),
            backoff: std::collections::HashMap::new(),
            unresponsive: std::collections::BTreeSet::new(),
            reregistered: std::collections::HashSet::new(),
            trap_lids: std::collections::BTreeSet::new(),
            trap_watch: None,
            repair_retries: 0,
            emptied: Default::default(),
            psc_dirty: Default::default(),
            reroute: false,
            deferrals: 0,
            repair_cause: None,
            trigger: Some("start".into()),
            up: false,
            mcast: McastState::default(),
        }
    }

    /// GUIDs more than one device answered with, as the last heavy sweep found them.
    pub fn duplicate_guids(&self) -> &[DuplicateGuid] {
        &self.duplicates
    }

    /// Traps muted (their issuer babbled) and traps refused as forged, since the start.
    pub fn traps_ignored(&self) -> (u64, u64) {
        (self.trap_gate.muted, self.trap_gate.forged)
    }

    /// Trap 256s (a port refused an SMP for its M_Key) since the start.
    pub fn bad_m_key_traps(&self) -> u64 {
        self.mkeys.refusals()
    }

    /// Ports taken out of the subnet because their link kept going down.
    pub fn unhealthy_ports(&self) -> Vec<UnhealthyPort> {
        self.health.list()
    }

    /// Takes a port out of the subnet for `reason` (its error counters crossed a threshold):
    /// a heavy sweep leaves its link out. False when it was out already.
    pub fn mark_unhealthy(&mut self, now: Instant, node: Guid, port: u8, reason: String) -> bool {
        if !self.health.mark(node, port, reason) {
            return false;
        }
        self.events.push_back(Event::HealthChanged);
        self.trigger = Some(format!("{node}[{port}] unhealthy"));
        self.request_sweep(now, true);
        true
    }

    /// Takes an unhealthy port back (an admin fixed its cable): a heavy sweep brings its
    /// link into the subnet again. False when the port was not unhealthy.
    pub fn clear_unhealthy(&mut self, now: Instant, node: Guid, port: u8) -> bool {
        if !self.health.clear(node, port) {
            return false;
        }
        let off = self.model.as_ref().is_some_and(|m| {
            m.fabric
                .node_by_guid(node)
                .and_then(|n| m.fabric.port_of(n, port))
                .and_then(|p| m.port_info(p))
                .is_some_and(|i| i.port_physical_state == PhysPortState::Disabled)
        });
        if off && !self.health.is_disabled((node, port)) {
            self.health.note_disabled((node, port), (node, port));
        }
        tracing::info!(%node, port, "unhealthy mark cleared; sweeping");
        self.events.push_back(Event::HealthChanged);
        self.trigger = Some(format!("{node}[{port}] cleared"));
        self.request_sweep(now, true);
        true
    }

    /// Takes a configuration read again (the daemon's SIGHUP): what can change while the
    /// subnet runs (partitions, QoS, routing, health, the light sweep interval) is applied
    /// and a heavy sweep programs what differs (only the P_Key, SL-to-VL, VL arbitration and
    /// forwarding blocks whose contents changed are sent); what needs a restart is named and
    /// left as it runs.
    pub fn reconfigure(&mut self, now: Instant, new: &Params) -> Reconfigured {
        let mut r = Reconfigured::default();
        let o = &self.p.routing_options;
        let n = &new.routing_options;
        let routing_same = self.p.routing == new.routing
            && o.roots == n.roots
            && o.compute_nodes == n.compute_nodes
            && o.adaptive == n.adaptive
            && o.vl_budget == n.vl_budget;
        if !routing_same {
            self.p.routing.clone_from(&new.routing);
            self.p.routing_options.roots.clone_from(&n.roots);
            self.p
                .routing_options
                .compute_nodes
                .clone_from(&n.compute_nodes);
            self.p.routing_options.adaptive = n.adaptive;
            self.p.routing_options.vl_budget = n.vl_budget;
            r.applied.push("routing");
            self.reroute = true;
        }
        if self.p.partitions != new.partitions || self.p.pkey_options != new.pkey_options {
            self.p.partitions = new.partitions.clone();
            self.p.pkey_options = new.pkey_options;
            r.applied.push("partitions");
        }
        if self.p.qos != new.qos {
            self.p.qos = new.qos.clone();
            r.applied.push("qos");
        }
        if self.p.health != new.health {
            self.p.health = new.health;
            self.health.set_config(new.health);
            self.trap_gate = traps::TrapGate::new(new.health.trap_burst, new.health.trap_rate);
            r.applied.push("health");
        }
        if self.p.sweep_interval != new.sweep_interval {
            self.p.sweep_interval = new.sweep_interval;
            r.applied.push("sm.sweep_interval_ms");
        }
        let restart = [
            ("sm.lmc", self.p.lmc != new.lmc),
            ("sm.sm_priority", self.p.sm_priority != new.sm_priority),
            ("sm.sm_key", self.p.sm_key != new.sm_key),
            ("sm.m_key", self.p.m_key != new.m_key),
            (
                "sm.m_key_per_port",
                self.p.m_key_per_port != new.m_key_per_port,
            ),
            (
                "sm.subnet_prefix",
                self.p.subnet_prefix != new.subnet_prefix,
            ),
            ("sm.max_op_vls", self.p.max_op_vls != new.max_op_vls),
            (
                "sm.max_outstanding_smps",
                self.p.max_outstanding != new.max_outstanding,
            ),
        ];
        r.needs_restart = restart.iter().filter(|x| x.1).map(|x| x.0).collect();
        if !r.applied.is_empty() {
            self.trigger = Some("configuration reloaded".into());
            self.request_sweep(now, true);
        }
        r
    }

    /// Starts the first heavy sweep.
    pub fn start(&mut self, now: Instant) {
        self.begin_heavy(now);
    }

    /// Asks for a sweep; a heavy sweep requested during one runs right after it. A standby
    /// (or disabled) SM does not sweep: the subnet is the master's.
    pub fn request_sweep(&mut self, now: Instant, heavy: bool) {
        if self.election.stands_aside() {
            tracing::debug!(state = ?self.election.state(), "sweep not requested of a non-master");
            return;
        }
        match self.phase {
            Phase::Idle if heavy => self.begin_heavy(now),
            Phase::Idle => self.begin_light(now),
            _ => self.sweep.again |= heavy,
        }
    }

    /// The plan and the model as shared snapshots (cheap to keep: the SM copies on write),
    /// for readers on other threads.
    pub fn snapshot(&self) -> Option<(Arc<Plan>, Option<Arc<Discovered>>)> {
        Some((Arc::clone(self.plan.as_ref()?), self.model.clone()))
    }

    /// The LID store (persist it on `Event::LidsChanged` and at shutdown).
    pub fn lid_store(&self) -> &LidStore {
        &self.lids
    }

    /// The model as the last discovery found it and later answers updated it.
    pub fn model(&self) -> Option<&Discovered> {
        self.model.as_deref()
    }

    /// The plan of the last heavy sweep.
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_deref()
    }

    /// The fabric as the last heavy sweep found it, with the LIDs it gave.
    pub fn fabric(&self) -> Option<&Fabric> {
        self.plan.as_ref().map(|p| &p.fabric)
    }

    /// The forwarding tables of the last heavy sweep, in the dump formats' type (a copy).
    pub fn lfts(&self) -> Option<Lfts> {
        self.plan.as_deref().map(Plan::to_lfts)
    }

    /// Adaptive-routing hints of the last heavy sweep (when asked for), as their dump text.
    pub fn ar_hints(&self) -> Option<&str> {
        self.plan.as_ref()?.ar_hints.as_deref()
    }

    /// The SM's own LID (0 before a sweep found it).
    pub fn own_lid(&self) -> Lid {
        let Some(m) = &self.model else {
            return Lid(0);
        };
        match &self.plan {
            Some(p) if self.election.is_master() => p.lid_of(m.own),
            _ => m.own_lid(),
        }
    }

    /// The SM's own port GUID (0 before discovery reached it).
    fn own_guid(&self) -> Guid {
        match (&self.phase, &self.model) {
            (Phase::Discover(d), _) if d.own_guid().is_some() => d.own_guid().unwrap_or_default(),
            (_, Some(m)) => m.own_guid(),
            _ => Guid(0),
        }
    }

    /// Whether the subnet is up (the last heavy sweep completed).
    pub fn is_up(&self) -> bool {
        self.up
    }

    /// Counters since start.
    pub fn mad_counts(&self) -> MadCounts {
        self.reqs.counts
    }

    /// The subnet administrator (its snapshot, counters, transfers).
    pub fn sa(&self) -> &sa::Server {
        &self.sa
    }

    /// This SM's state in the election.
    pub fn sm_state(&self) -> SmState {
        self.election.state()
    }

    /// The master this SM stands by for, when it is a standby.
    pub fn master(&self) -> Option<&RemoteSm> {
        self.election.master()
    }

    /// The other SMs the last heavy sweep found.
    pub fn remote_sms(&self) -> &[RemoteSm] {
        self.election.remote()
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.reqs.poll_transmit().or_else(|| self.sa_transmit())
    }

    /// [`Sm::poll_transmit`] for a shell on a real clock: the request's deadline counts from
    /// `now`, when the shell hands it to the transport, so time the core spent computing
    /// (routing a large fabric) between queueing and sending is not charged to the fabric.
    pub fn poll_transmit_at(&mut self, now: Instant) -> Option<Transmit> {
        self.reqs
            .poll_transmit_at(now)
            .or_else(|| self.sa_transmit())
    }

    /// The next SA answer, addressed to its requester.
    fn sa_transmit(&mut self) -> Option<Transmit> {
        let r = self.sa.poll_transmit()?;
        Some(Transmit {
            dlid: r.to.lid,
            mad: r.mad,
            expects_response: r.expects_response,
            gsi: Some(r.to),
        })
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest time the core wants `handle_timeout`.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.reqs.next_deadline(),
            self.timer_due(),
            self.sa.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The earliest timer that can act in this phase. Sweeps and repairs wait for the
    /// phase to end (their timers stay armed); a deadline that cannot act must not be
    /// reported, or a caller that waits for it would wake at once, forever.
    fn timer_due(&self) -> Option<Instant> {
        let idle = matches!(self.phase, Phase::Idle);
        let between = self.is_between_sweeps();
        Timer::ALL
            .into_iter()
            .filter(|t| match t {
                Timer::LightSweep | Timer::HeavySweep => idle,
                Timer::TrapBatch => between,
                Timer::McastBatch | Timer::MasterPoll => true,
            })
            .filter_map(|t| self.timers.get(t))
            .min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.sa.handle_timeout(now);
        if self.timers.take_expired(Timer::McastBatch, now) && self.up && self.is_between_sweeps() {
            self.sync_mcast(now, false);
        }
        for w in self.reqs.expire(now) {
            tracing::debug!(purpose = ?w.purpose, "SMP lost after retries");
            self.on_lost(now, w);
        }
        if self.timers.take_expired(Timer::MasterPoll, now) {
            let actions = self.election.poll(now);
            self.act(now, actions);
        }
        if self.is_between_sweeps() && self.timers.take_expired(Timer::TrapBatch, now) {
            self.begin_repair(now);
        }
        if matches!(self.phase, Phase::Idle) && self.timers.take_expired(Timer::HeavySweep, now) {
            self.begin_heavy(now);
        }
        if matches!(self.phase, Phase::Idle) && self.timers.take_expired(Timer::LightSweep, now) {
            self.begin_light(now);
        }
        self.advance(now);
    }

    /// A MAD from the fabric, with the LRH source LID (a GSI sender on QP1).
    pub fn handle_mad(&mut self, now: Instant, slid: Lid, buf: &[u8]) {
        self.handle_mad_from(now, Requester::at(slid), buf);
    }

    /// A MAD from the fabric, with its sender's address as the transport reports it (the
    /// source QP matters to SA answers: they go back to it).
    pub fn handle_mad_from(&mut self, now: Instant, from: Requester, buf: &[u8]) {
        if mad::peek_class(buf) == Some(MgmtClass::SubnAdm) {
            if !self.election.is_master() {
                // Only the master's SA serves (requesters find it through PortInfo.MasterSMLID).
                tracing::debug!("SA MAD to a non-master SM dropped");
                return;
            }
            // Subnet administration, whatever else is wrong with it: the SA answers.
            self.sa.set_act_count(self.reqs.counts.sent as u32);
            self.sa.handle_mad(now, from, buf);
            if self.sa.has_mcast_changes() {
                self.timers
                    .set_if_idle(Timer::McastBatch, now + MCAST_BATCH);
            }
            return;
        }
        match mad::Repr::parse(buf).map(|h| h.mgmt_class) {
            Ok(MgmtClass::SubnLid | MgmtClass::SubnDirected) => {}
            Ok(other) => {
                tracing::trace!(class = ?other, "MAD of a class the SM does not serve yet");
                return;
            }
            Err(e) => {
                tracing::debug!("dropping a MAD whose header does not parse: {e}");
                return;
            }
        }
        let s = match smp::Repr::parse(buf) {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("dropping a malformed SMP: {e}");
                return;
            }
        };
        match s.method {
            Method::GetResp => {
                if let Some(w) = self.reqs.complete(now, s.tid) {
                    tracing::trace!(tid = %s.tid, attr = s.attr_id, "answer");
                    self.on_answer(now, w.purpose, &s);
                }
            }
            Method::Trap => self.on_trap(now, from.lid, &s),
            Method::Get | Method::Set if s.attr_id == attr::SM_INFO => {
                self.on_sm_info_request(now, from.lid, &s)
            }
            _ => tracing::trace!(method = ?s.method, "SMP request not served"),
        }
        self.advance(now);
    }

    fn is_between_sweeps(&self) -> bool {
        matches!(self.phase, Phase::Idle | Phase::Light(_))
    }

    // ---------------------------------------------------------------------------------
    // Sending.

    /// Fills the request window: queued work first, then the phase's own.
    fn pump(&mut self, now: Instant) {
        while self.reqs.has_room() {
            let work = match self.queue.pop_front() {
                Some(w) => Some(w),
                None => match &mut self.phase {
                    Phase::Discover(d) => d.next_work(),
                    Phase::Repair(r) => r.next_work(),
                    Phase::Program(pg) => match (&self.model, &self.plan) {
                        (Some(model), Some(plan)) => {
                            let mcast = &self.mcast;
                            let top = |g: Guid| mcast.top_for(g);
                            let ctx = program::Ctx {
                                model,
                                plan,
                                held: &self.held,
                                p: &self.p,
                                reregistered: &self.reregistered,
                                mcast_top: &top,
                            };
                            pg.next_work(&ctx, &mut self.sweep.report)
                        }
                        _ => None,
                    },
                    _ => None,
                },
            };
            let Some(w) = work else { break };
            self.send(now, w);
        }
    }

    /// The M_Key an SMP must carry: the key its destination's agent holds, as far as known.
    fn m_key_for(&self, w: &Work) -> u64 {
        self.mkeys.present(self.key_holder(w))
    }

    /// A PortInfo Set of an end port that gives it another M_Key: later SMPs present it.
    fn note_key_change(&mut self, w: &Work) {
        let (Method::Set, attr::PORT_INFO, Some(data), Target::Port(p)) =
            (w.method, w.attr, &w.data, &w.to)
        else {
            return;
        };
        let Some(m) = self.model.as_deref() else {
            return;
        };
        if !m.is_end_port(*p) {
            return;
        }
        let holder = m.fabric.port(*p).guid;
        if let Ok(pi) = <sm_mad::port_info::Repr as sm_mad::Wire>::parse(data) {
            self.mkeys.sending(holder, pi.m_key);
        }
    }

    /// Whose M_Key an SMP must carry.
    fn key_holder(&self, w: &Work) -> Option<Guid> {
        use mkeys::KeyHolder;
        match w.key {
            KeyHolder::FromTarget => self.model.as_deref().and_then(|m| {
                let f = &m.fabric;
                match (&w.purpose, &w.to) {
                    (Purpose::RepairNodeInfo { port }, _) => {
                        let p = f.port(*port);
                        self.mkeys
                            .holder(KeyHolder::Behind(f.node(p.node).guid, p.num))
                    }
                    (
                        Purpose::RepairSwitchInfo { node } | Purpose::RepairClearPsc { node, .. },
                        _,
                    ) => Some(f.node(*node).guid),
                    (Purpose::RepairPortInfo { port: p }, _) | (_, Target::Port(p)) => {
                        Some(f.port(*p).guid)
                    }
                    (_, Target::Node(n)) if m.is_switch(*n) => Some(f.node(*n).guid),
                    (_, Target::Node(n)) => Some(m.nodes[*n].info.port_guid),
                    (_, Target::Lid(l)) => self.holder_of_lid(*l),
                    (_, Target::Path(_)) => None,
                }
            }),
            k => self.mkeys.holder(k),
        }
    }

    /// The key holder whose PortInfo a Get or Set is about, when it is an end port's (the
    /// only PortInfo whose M_Key counts).
    fn end_port_holder(&self, purpose: &Purpose) -> Option<Guid> {
        match *purpose {
            Purpose::PortInfo { port } => match &self.phase {
                Phase::Discover(d) => d.end_holder(port),
                _ => None,
            },
            Purpose::SetPortInfo { port, .. }
            | Purpose::VerifySettings { port, .. }
            | Purpose::SetPortState { port, .. }
            | Purpose::VerifyPortState { port, .. }
            | Purpose::RepairPortInfo { port } => {
                let m = self.model.as_deref()?;
                m.is_end_port(port).then(|| m.fabric.port(port).guid)
            }
            _ => None,
        }
    }

    /// The key holder at LID `l`, as the last plan assigned it.
    fn holder_of_lid(&self, l: Lid) -> Option<Guid> {
        self.mkeys.at_lid(l)
    }

    /// The M_Key and neighbors stores, to persist on [`Event::KeysChanged`].
    pub fn key_stores(&self) -> (&sm_core::mkey::KeyStore, &sm_core::mkey::Neighbors) {
        self.mkeys.stores()
    }

    /// Encodes and sends one SMP.
    fn send(&mut self, now: Instant, w: Work) {
        let route = match &w.to {
            Target::Lid(_) => Ok(Route::Lid),
            Target::Path(path) => smp::Directed::along(path).map(Route::Directed),
            Target::Port(p) => match self.model.as_ref().and_then(|m| m.route_to(*p)) {
                Some(path) => smp::Directed::along(&path).map(Route::Directed),
                None => {
                    tracing::debug!(?w.purpose, "no route to the port; not sent");
                    return;
                }
            },
            Target::Node(n) => match self.model.as_ref().map(|m| &m.nodes[*n].path) {
                Some(path) => smp::Directed::along(path).map(Route::Directed),
                None => return,
            },
        };
        let route = match route {
            Ok(r) => r,
            Err(e) => {
                self.sweep
                    .report
                    .errors
                    .push(format!("cannot route an SMP: {e}"));
                return;
            }
        };
        let dlid = match w.to {
            Target::Lid(l) => l,
            _ => Lid::PERMISSIVE,
        };
        let dest = w.dest.unwrap_or_else(|| match (&w.to, &self.model) {
            (Target::Node(n), Some(m)) => dest::node(m.fabric.node(*n).guid),
            (Target::Port(p), Some(m)) => dest::node(m.fabric.node(m.fabric.port(*p).node).guid),
            (Target::Lid(l), _) => dest::lid(*l),
            _ => dest::UNKNOWN,
        });
        let modifier = if w.attr == attr::PORT_INFO {
            // SMSupportExtendedSpeeds (IBA 14.2.5.6): without it HDR and NDR ports leave
            // their extended speeds out of the answer (OpenSM's issue 38).
            w.modifier | SM_SUPPORTS_EXTENDED_SPEEDS
        } else {
            w.modifier
        };
        let mut req = smp::Repr::request(w.method, Tid(0), w.attr, modifier, route);
        req.m_key = self.m_key_for(&w);
        self.note_key_change(&w);
        if let Some(d) = w.data {
            req.data.0 = d;
        }
        match req.to_bytes() {
            Ok(b) => {
                let retries = w.retries.unwrap_or(self.p.smp_retries);
                self.reqs.send(now, w, dest, dlid, b, retries);
            }
            Err(e) => self
                .sweep
                .report
                .errors
                .push(format!("cannot encode an SMP: {e}")),
        }
    }

    // ---------------------------------------------------------------------------------
    // Sweeps.

    /// The next sweep's state (a repair's with the stopwatch reading of its first trap).
    fn next_sweep(
        &self,
        now: Instant,
        trigger: String,
        heavy: bool,
        trap_watch: Option<u64>,
    ) -> Sweep {
        let n = self.sweep.n + 1;
        Sweep {
            n,
            started_at: now,
            phase_at: now,
            counts_at: self.reqs.counts,
            again: false,
            report: SweepReport {
                sweep: n,
                heavy,
                trigger,
                engine: self.p.routing.clone(),
                ..SweepReport::default()
            },
            missing: Vec::new(),
            trap_watch,
        }
    }

    fn begin_heavy(&mut self, now: Instant) {
        self.psc_dirty.clear();
        self.reqs.clear();
        self.queue.clear();
        self.mcast.forget_in_flight();
        self.timers.stop(Timer::LightSweep);
        self.timers.stop(Timer::HeavySweep);
        let trigger = self.trigger.take().unwrap_or_else(|| "requested".into());
        self.sweep = self.next_sweep(now, trigger, true, None);
        let n = self.sweep.n;
        // A heavy sweep reads everything: gathered traps are answered by it.
        self.trap_lids.clear();
        self.trap_watch = None;
        self.timers.stop(Timer::TrapBatch);
        self.events.push_back(Event::SweepStarted {
            sweep: n,
            heavy: true,
        });
        tracing::debug!(sweep = n, "heavy sweep");
        // Every destination gets a fresh budget, except those still backing off.
        self.reqs.forgive();
        self.ticks += 1;
        let t = self.ticks;
        let skip = self
            .backoff
            .iter()
            .filter(|(_, b)| b.until_sweep > t)
            .map(|(&d, _)| d)
            .collect();
        self.phase = Phase::Discover(Box::new(discover::Discovery::start(skip, self.p.sm_key)));
        self.pump(now);
    }

    fn begin_light(&mut self, now: Instant) {
        let Some(plan) = &self.plan else {
            return self.begin_heavy(now);
        };
        let f = &plan.fabric;
        let model = self.model.as_deref();
        let lids: Vec<(Lid, NodeIdx)> = f
            .switches()
            .filter(|&n| model.is_none_or(|m| m.present(n)))
            .filter_map(|n| Some((f.port(f.port_of(n, 0)?).lid, n)))
            .collect();
        let from = model.and_then(|m| {
            let own = f.port(m.own);
            if f.node(own.node).kind == sm_core::fabric::NodeKind::Switch {
                Some(own.node)
            } else {
                Some(f.port(own.remote?).node)
            }
        });
        for &(lid, node) in &lids {
            let direct = !from.is_some_and(|s| plan.routes_to(s, lid));
            self.queue.push_back(Work::get(
                Purpose::LightSwitchInfo {
                    lid,
                    node,
                    direct,
                    fallback: false,
                },
                attr::SWITCH_INFO,
                0,
                if direct {
                    Target::Node(node)
                } else {
                    Target::Lid(lid)
                },
            ));
        }
        let counts_at = self.reqs.counts;
        let actions = self.election.light_checks(self.own_guid());
        let reads = (lids.len() + actions.len()) as u64;
        self.act(now, actions);
        self.phase = Phase::Light(Light {
            lost: false,
            astray: false,
            reads,
            counts_at,
            changed: Default::default(),
        });
        self.pump(now);
    }

    /// A light sweep is over: its report, with what it sent since `counts_at`.
    fn light_done(&mut self, mut r: LightReport, counts_at: requests::MadCounts) {
        let c = self.reqs.counts - counts_at;
        (r.mads_sent, r.mads_retried, r.mads_lost) = (c.sent, c.retried, c.lost);
        tracing::debug!(reads = r.reads, changed = r.changed, mads_sent = r.mads_sent, outcome = %r.outcome, "light sweep");
        self.events.push_back(Event::LightSweepDone(r));
    }

    /// Moves to the next phase or stage once everything outstanding has come back.
    fn advance(&mut self, now: Instant) {
        loop {
            self.pump(now);
            if self.reqs.in_flight() > 0 || !self.queue.is_empty() {
                return;
            }
            match std::mem::replace(&mut self.phase, Phase::Idle) {
                Phase::Idle => return,
                Phase::Light(Light {
                    lost,
                    astray,
                    reads,
                    counts_at,
                    changed,
                }) => {
                    // A switch found without its tables explains LID routes that fail.
                    let astray = astray && self.emptied.is_empty();
                    let lost = lost || astray;
                    let mut done = LightReport {
                        reads,
                        changed: changed.len() as u64,
                        outcome: String::new(),
                        ..LightReport::default()
                    };
                    if lost || self.sweep.again || (!changed.is_empty() && !self.up) {
                        let why = if astray {
                            "light sweep: the fabric's tables are not the SM's (a switch answered only by directed route)"
                        } else if lost {
                            "light sweep: a switch answered neither by LID nor by directed route"
                        } else if self.sweep.again {
                            "requested during a light sweep"
                        } else {
                            "light sweep: port changes while the subnet is not up"
                        };
                        self.trigger.get_or_insert_with(|| why.into());
                        done.outcome = format!("heavy sweep ({why})");
                        self.light_done(done, counts_at);
                        self.begin_heavy(now);
                    } else if !changed.is_empty() {
                        done.outcome = "repair".into();
                        self.light_done(done, counts_at);
                        // A port change no trap told of (lost, or never sent): repaired
                        // like one.
                        if self.trap_lids.is_empty() {
                            self.trap_watch = self.p.stopwatch.map(|f| f());
                        }
                        self.trap_lids.extend(changed);
                        self.repair_cause = Some("light sweep: PortStateChange");
                        self.begin_repair(now);
                        continue;
                    } else {
                        self.ticks += 1;
                        let t = self.ticks;
                        if self.backoff.values().any(|b| b.until_sweep <= t + 1) {
                            // Nodes that did not answer are due for another try.
                            let why = "light sweep: unresponsive nodes due";
                            self.trigger = Some(why.into());
                            done.outcome = format!("heavy sweep ({why})");
                            self.light_done(done, counts_at);
                            self.begin_heavy(now);
                            continue;
                        }
                        // Blocks lost since the last change go out again.
                        self.sync_mcast(now, false);
                        done.outcome = "nothing new".into();
                        self.light_done(done, counts_at);
                        self.schedule_light(now);
                    }
                }
                Phase::Discover(mut d) => {
                    let reqs = &self.reqs;
                    if d.has_work() || d.next_pass(|to| reqs.is_unresponsive(to)) {
                        self.phase = Phase::Discover(d);
                        continue;
                    }
                    self.on_discovered(now, d);
                }
                Phase::Program(pg) => self.next_stage(now, pg),
                Phase::ReadTables(h) => self.plan_and_program_with(now, Some(h)),
                Phase::Repair(mut r) => {
                    let found = match (&self.model, &self.plan) {
                        (Some(m), Some(plan)) => r.conclude(m, plan),
                        _ => Some(repair::Found::Heavy("no model to repair".into())),
                    };
                    match found {
                        None => self.phase = Phase::Repair(r),
                        Some(found) => self.on_repair_found(now, *r, found),
                    }
                }
            }
        }
    }

    /// Discovery is done: the election, then a plan and its programming.
    fn on_discovered(&mut self, now: Instant, mut d: Box<discover::Discovery>) {
        self.sweep.report.discovery_ns = (now - self.sweep.phase_at).as_nanos() as u64;
        self.sweep.phase_at = now;
        let dups = d.take_duplicates();
        let m = match d.finish() {
            Ok(m) => m,
            Err(e) => {
                self.sweep.report.errors.push(e.to_string());
                return self.finish(now);
            }
        };
        let r = &mut self.sweep.report;
        let c = m.fabric.counts();
        (r.nodes, r.switches, r.cas, r.routers, r.links) =
            (c.nodes, c.switches, c.cas, c.routers, c.links);
        r.discovery_min = m.discovery_min();
        self.back_off(&m.missing);
        // A port that left the subnet is asked for a reregistration when it is back.
        self.reregistered
            .retain(|g| m.fabric.port_by_guid(*g).is_some());
        for &(guid, priority) in &m.untrusted {
            if self.untrusted.insert(guid) {
                tracing::error!(
                    sm = %guid,
                    priority,
                    "an SM whose SM_Key is not ours: untrusted, never obeyed (as OpenSM)"
                );
            }
        }
        self.sweep.report.untrusted_sms = m.untrusted.iter().map(|u| u.0.to_string()).collect();
        discover::log_duplicates(&self.duplicates, &dups);
        self.duplicates.clone_from(&dups);
        self.sweep.report.duplicate_guids = dups;
        let (decision, actions) = self.election.decide(&m.sms, m.own_guid());
        self.mkeys.note_neighbors(&m);
        let mut m = m;
        if let Some(old) = &self.model {
            // The known nodes keep their indices: the plan's routes can be kept.
            m = m.rebase(old);
            m.inherit_former_peers(old);
        }
        self.model = Some(Arc::new(m));
        match decision {
            Decision::Standby(master) => {
                self.act(now, actions);
                let actions = self.election.become_standby(now, master);
                self.act(now, actions);
                self.sweep.report.sm_state = "standby".into();
                self.sweep.report.list_duplicates();
                self.sweep.report.sweep_ns = (now - self.sweep.started_at).as_nanos() as u64;
                if self.mkeys.take_changed() {
                    self.events.push_back(Event::KeysChanged);
                }
                self.events
                    .push_back(Event::SweepDone(Box::new(self.sweep.report.clone())));
                self.phase = Phase::Idle;
            }
            Decision::Master => {
                let mut all = self.election.become_master();
                all.extend(actions);
                self.act(now, all);
                self.plan_and_program(now);
            }
        }
    }

    /// Unhealthy ports' links are taken out of the model discovery found: not routed
    /// over, not brought to ACTIVE.
    fn leave_out_unhealthy(&mut self, now: Instant) {
        self.switch_on_cleared(now);
        if self.health.is_empty() {
            return;
        }
        let Some(model) = self.model.as_mut() else {
            return;
        };
        let out: Vec<PortIdx> = model
            .fabric
            .ports()
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.remote.is_some()
                    && self
                        .health
                        .is_unhealthy(model.fabric.node(p.node).guid, p.num)
            })
            .map(|(i, _)| PortIdx(i as u32))
            .collect();
        if out.is_empty() {
            return;
        }
        let mut off = Vec::new();
        let m = Arc::make_mut(model);
        for q in out {
            if let Some(r) = m.fabric.port(q).remote {
                tracing::debug!(port = ?q, "unhealthy link left out");
                if self.health.disables() {
                    off.push(switch_end(m, q, r));
                }
                m.former_peers.insert(q, r);
                m.former_peers.insert(r, q);
                m.fabric.disconnect(q);
            }
        }
        for (at, other) in off {
            self.set_phys(now, at, Some(other), false);
        }
        let Some(m) = self.model.as_mut().map(Arc::make_mut) else {
            return;
        };
        let reached = m.reconnect();
        for &n in &reached.gone {
            tracing::info!(node = %m.fabric.node(n).guid, "cut off by an unhealthy link");
        }
    }

    /// Switches port `p` of the model off (its link's other end `peer`), or back on.
    fn set_phys(&mut self, now: Instant, p: PortIdx, peer: Option<PortIdx>, on: bool) {
        let Some(m) = &self.model else { return };
        let id = |q: PortIdx| {
            (
                m.fabric.node(m.fabric.port(q).node).guid,
                m.fabric.port(q).num,
            )
        };
        let (guid, num) = id(p);
        if !on && self.health.is_disabled((guid, num)) {
            return;
        }
        let Some(cur) = m.port_info(p) else { return };
        let mut set = program::state_only(cur);
        set.port_physical_state = if on {
            PhysPortState::Polling
        } else {
            PhysPortState::Disabled
        };
        let Some(data) = plan::emit_data(&set) else {
            return;
        };
        if !on {
            let peer = peer.map_or((guid, num), id);
            self.health.note_disabled((guid, num), peer);
            tracing::warn!(node = %guid, port = num, "unhealthy link switched off");
        } else {
            tracing::info!(node = %guid, port = num, "link switched on again");
        }
        let mut w = Work::get(
            Purpose::SetPhys { guid, num, on },
            attr::PORT_INFO,
            u32::from(num),
            Target::Port(p),
        );
        w.method = Method::Set;
        w.data = Some(data);
        self.send(now, w);
    }

    /// Ports the SM switched off whose link was cleared are switched on again.
    fn switch_on_cleared(&mut self, now: Instant) {
        let Some(m) = &self.model else { return };
        let mut back = Vec::new();
        for (guid, num) in self.health.take_enabled() {
            let port = m
                .fabric
                .node_by_guid(guid)
                .and_then(|n| m.fabric.port_of(n, num));
            match port {
                Some(p) => back.push(p),
                // Not reached this sweep: tried again on a later one.
                None => self.health.note_disabled((guid, num), (guid, num)),
            }
        }
        for p in back {
            self.set_phys(now, p, None, true);
        }
    }

    /// Nodes never reached are left alone for more sweeps each time they stay silent;
    /// those that answered are forgiven.
    fn back_off(&mut self, missing: &[Missing]) {
        let n = self.ticks;
        let mut still = std::collections::HashMap::new();
        for m in missing.iter().filter(|m| m.behind) {
            let Some(port) = m.port else { continue };
            let key = dest::behind(m.guid, port);
            let b = match self.backoff.get(&key) {
                // Not asked this sweep: its back-off runs on.
                Some(b) if b.until_sweep > n => *b,
                Some(b) => Backoff {
                    level: (b.level + 1).min(MAX_BACKOFF_LEVEL),
                    until_sweep: n + (1 << (b.level + 1).min(MAX_BACKOFF_LEVEL)),
                },
                None => Backoff {
                    level: 0,
                    until_sweep: n + 1,
                },
            };
            still.insert(key, b);
        }
        self.backoff = still;
    }

    fn plan_and_program(&mut self, now: Instant) {
        self.leave_out_unhealthy(now);
        // A master with no plan of its own (new, or taking over) first reads what the
        // switches hold, where they hold anything: another SM's routes, kept where legal,
        // move nothing on a takeover.
        if self.plan.is_none() && self.p.sticky_routes {
            if let Some(m) = &self.model {
                let mut reads = Vec::new();
                for n in m.fabric.switches().filter(|&n| m.present(n)) {
                    let top = m.nodes[n].switch_info.map_or(0, |si| si.linear_fdb_top.0);
                    if top == 0 || top > Lid::MAX_UNICAST.0 {
                        continue;
                    }
                    for block in 0..=top / sm_mad::lft::ENTRIES as u16 {
                        reads.push(Work::get(
                            Purpose::ReadLft { node: n, block },
                            attr::LINEAR_FORWARDING_TABLE,
                            u32::from(block),
                            Target::Node(n),
                        ));
                    }
                }
                if !reads.is_empty() {
                    tracing::info!(blocks = reads.len(), "reading the tables the switches hold");
                    self.queue.extend(reads);
                    self.phase = Phase::ReadTables(HeldTables::default());
                    return;
                }
            }
        }
        self.plan_and_program_with(now, None);
    }

    fn plan_and_program_with(&mut self, now: Instant, held: Option<HeldTables>) {
        let Some(m) = &self.model else { return };
        let whole = std::mem::take(&mut self.reroute);
        let found = held.as_ref().map(|h| &h.tables);
        let planned = plan::plan(
            m,
            &mut self.lids,
            &self.p,
            self.plan.as_deref(),
            whole,
            found,
        );
        let new = match planned {
            Ok(p) => p,
            Err(e) => {
                self.sweep.report.errors.push(e.to_string());
                return self.finish(now);
            }
        };
        if new.lids_changed {
            self.events.push_back(Event::LidsChanged);
        }
        self.mkeys.note_lids(&new.fabric);
        let r = &mut self.sweep.report;
        r.engine_used = new.engine_used.clone();
        r.fallbacks = new.fallbacks.clone();
        r.lids = new.lids;
        r.routing_ns = new.routing_time.as_nanos() as u64;
        (
            r.lft_entries_moved,
            r.lft_entries_moved_min,
            r.lft_entries_restored,
        ) = (new.churn.moved, new.churn.had_to, new.churn.restored);
        self.held.rebase(self.plan.as_deref(), &new);
        // A port whose LID changes must tell its SA clients to register again.
        if let Some(m) = &self.model {
            for (q, w) in new.settings.iter_enumerated() {
                let (Some(w), Some(cur)) = (w, m.port_info(q)) else {
                    continue;
                };
                if m.is_end_port(q) && cur.lid.0 != 0 && cur.lid != w.lid {
                    self.reregistered.remove(&m.fabric.port(q).guid);
                }
            }
        }
        self.plan = Some(Arc::new(new));
        self.reconcile_held();
        // Blocks read just now that are what the plan wants need no Set.
        if let (Some(h), Some(plan)) = (&held, &self.plan) {
            for (guid, blocks) in &h.read {
                let (Some(n), Some(t)) = (plan.fabric.node_by_guid(*guid), h.tables.get(guid))
                else {
                    continue;
                };
                for &b in blocks {
                    let at = usize::from(b) * sm_mad::lft::ENTRIES;
                    let want = plan.lft_block(n, usize::from(b));
                    if want.is_some_and(|w| t.get(at..at + w.len()) == Some(&w[..])) {
                        self.held.lft_stored(*guid, usize::from(b));
                    }
                }
            }
        }
        self.phase = Phase::Program(Programming::new(Stage::Settings));
    }

    /// What the model says the nodes lost since we programmed them.
    fn reconcile_held(&mut self) {
        let (Some(m), Some(plan)) = (&self.model, &self.plan) else {
            return;
        };
        // End ports that name another SM as master were programmed by it (while this SM
        // was cut off, say): what the switches hold is no longer what we last sent.
        let own_lid = plan.lid_of(m.own);
        let foreign = m.ports.iter_enumerated().any(|(q, f)| {
            m.is_end_port(q)
                && f.info
                    .is_some_and(|pi| pi.master_sm_lid.0 != 0 && pi.master_sm_lid != own_lid)
        });
        if foreign && !self.held.is_empty() {
            tracing::info!("ports name another SM as master: every table is sent again");
            self.held.forget_all();
            self.mcast.forget_all();
        }
        for (n, facts) in m.nodes.iter_enumerated() {
            let guid = m.fabric.node(n).guid;
            // A switch whose LinearFDBTop is not what we set has lost its tables.
            if let Some(si) = facts.switch_info {
                if self.held.top(guid) != Some(si.linear_fdb_top) {
                    self.held.forget_switch(guid);
                    self.mcast.forget(guid);
                }
            }
            // A node that lost its LIDs has lost its tables too.
            let reset = m
                .fabric
                .node_ports(n)
                .any(|q| m.is_end_port(q) && m.port_info(q).is_some_and(|pi| pi.lid.0 == 0));
            if reset {
                self.held.forget_tables(guid);
            }
        }
    }

    /// A programming round is done: the next, or the end of the sweep.
    fn next_stage(&mut self, now: Instant, pg: Programming) {
        if pg.stage == Stage::Mcast {
            self.sweep.report.programming_ns = (now - self.sweep.phase_at).as_nanos() as u64;
            self.sweep.missing.extend(pg.lost);
            return self.finish(now);
        }
        let unsettled = match (pg.stage, &self.model, &self.plan) {
            (Stage::Active, Some(m), Some(plan)) => {
                program::unsettled(m, plan, pg.scope.as_ref().map(|s| &s.ports[..]))
            }
            _ => Vec::new(),
        };
        let (stage, passes_left) = (pg.stage, pg.passes_left());
        let Some(next) = pg.next(unsettled.len()) else {
            return self.finish(now);
        };
        if stage == Stage::Active && next.stage == Stage::Mcast && !passes_left {
            self.settle_later(unsettled);
        }
        let stage = next.stage;
        let heavy = next.scope.is_none();
        let trees = next.scope.as_ref().is_none_or(|s| s.mcast_trees);
        self.phase = Phase::Program(next);
        if stage == Stage::Mcast {
            // A repair hands the SA its snapshot when done: building it is not part of
            // the time the routes are broken.
            if heavy {
                self.install_sa_db(now);
            }
            // A repair's model holds MulticastFDBTops as the last discovery read them.
            if let (Some(m), true) = (&self.model, heavy) {
                self.mcast.remember_tops(m);
            }
            self.sync_mcast(now, trees);
        }
    }

    /// Answering ports that still do not hold what they should, after every pass. On a
    /// subnet that is up, a port short of ACTIVE has most likely had its link go or train
    /// again while it was programmed (a flapping link): its switch is looked at by a
    /// repair, as if it had trapped, rather than the sweep failing and a heavy sweep
    /// following. A port read Down always is; one whose link is up a few sweeps in a row
    /// at most (it may be stuck). Then, or on a subnet not up yet, such ports fail the
    /// sweep.
    fn settle_later(&mut self, unsettled: Vec<Missing>) {
        let defer = self.up && self.deferrals < MAX_DEFERRALS;
        let mut deferred = 0;
        let mut capped = 0;
        for u in unsettled {
            let lid = match (&self.model, &self.plan) {
                (Some(m), Some(plan)) if self.up && u.what.starts_with("not ACTIVE") => {
                    // A port read Down lost its link: a change the repair applies, never a
                    // port stuck short of ACTIVE, so it is not counted against the cap.
                    let num = u.port.unwrap_or(0);
                    let down = m
                        .fabric
                        .node_by_guid(u.guid)
                        .and_then(|n| m.fabric.port_of(n, num))
                        .and_then(|q| m.port_info(q))
                        .is_some_and(|pi| pi.port_state == PortState::Down);
                    capped += usize::from(!down && defer);
                    (down || defer)
                        .then(|| switch_lid(m, plan, u.guid, num))
                        .flatten()
                }
                _ => None,
            };
            match lid {
                Some(lid) => {
                    if self.trap_lids.is_empty() {
                        self.trap_watch = self.p.stopwatch.map(|f| f());
                    }
                    self.trap_lids.insert(lid);
                    self.repair_cause = Some("ports not ACTIVE after programming");
                    deferred += 1;
                }
                None => self.sweep.report.errors.push(format!(
                    "{} port {:?}: {}",
                    u.guid,
                    u.port.unwrap_or(0),
                    u.what
                )),
            }
        }
        if capped > 0 {
            self.deferrals += 1;
        } else {
            self.deferrals = 0;
        }
        if deferred > 0 {
            tracing::info!(
                sweep = self.sweep.n,
                ports = deferred,
                "ports not ACTIVE after programming (links changed meanwhile?): a repair looks again"
            );
        }
    }

    fn schedule_light(&mut self, now: Instant) {
        self.phase = Phase::Idle;
        if !self.p.sweep_interval.is_zero() {
            self.timers
                .set(Timer::LightSweep, now + self.p.sweep_interval);
        }
    }

    /// The nodes that left questions unanswered this sweep, by node; each new one is logged
    /// once, and again when it answers.
    fn unresponsive_report(&mut self) -> Vec<Unresponsive> {
        let mut by_node: std::collections::BTreeMap<String, Unresponsive> = Default::default();
        let missing = self
            .model
            .iter()
            .flat_map(|m| m.missing.iter())
            .chain(&self.sweep.missing);
        for ms in missing {
            let name = ms.node_name();
            let description = self
                .model
                .as_ref()
                .filter(|_| !ms.behind)
                .and_then(|m| m.fabric.node_by_guid(ms.guid))
                .and_then(|n| {
                    self.model
                        .as_ref()
                        .map(|m| m.fabric.node(n).description.clone())
                })
                .unwrap_or_default();
            let e = by_node.entry(name.clone()).or_insert_with(|| Unresponsive {
                node: name,
                description,
                what: Vec::new(),
            });
            let what = match ms.port {
                Some(p) if !ms.behind => format!("{} (port {p})", ms.what),
                _ => ms.what.clone(),
            };
            if !e.what.contains(&what) {
                e.what.push(what);
            }
        }
        let now: std::collections::BTreeSet<String> = by_node.keys().cloned().collect();
        for u in by_node
            .values()
            .filter(|u| !self.unresponsive.contains(&u.node))
        {
            tracing::warn!(node = %u.node, description = %u.description, what = ?u.what, "node unresponsive; the subnet goes on without it");
        }
        for gone in self.unresponsive.difference(&now) {
            tracing::info!(node = %gone, "node answers again");
        }
        self.unresponsive = now;
        by_node.into_values().collect()
    }

    fn finish(&mut self, now: Instant) {
        let counts = self.reqs.counts - self.sweep.counts_at;
        self.sweep.report.unresponsive = self.unresponsive_report();
        self.sweep.report.unhealthy_ports = self.health.list();
        let r = &mut self.sweep.report;
        r.take_counts(counts);
        r.sweep_ns = (now - self.sweep.started_at).as_nanos() as u64;
        // Up: every port that answers holds what it should; who did not answer is listed.
        r.subnet_up = r.errors.is_empty();
        r.list_duplicates();
        r.sm_state = "master".into();
        self.up = r.subnet_up;
        if !r.heavy {
            if let (Some(t0), Some(f)) = (self.sweep.trap_watch, self.p.stopwatch) {
                r.recovery_ns = f().saturating_sub(t0);
            }
            tracing::info!(
                sweep = r.sweep,
                trigger = %r.trigger,
                recovery_ms = r.recovery_ns as f64 / 1e6,
                mads_sent = r.mads_sent,
                lft_blocks_sent = r.lft_blocks_sent,
                lft_entries_moved = r.lft_entries_moved,
                lft_entries_moved_min = r.lft_entries_moved_min,
                lft_entries_restored = r.lft_entries_restored,
                paths_new_sl = r.paths_new_sl,
                paths_exposed = r.paths_exposed,
                routing_ms = r.routing_ns as f64 / 1e6,
                reroute = %r.reroute,
                up = r.subnet_up,
                "repaired"
            );
            if !r.subnet_up {
                tracing::warn!(sweep = r.sweep, errors = ?r.errors, "repair incomplete; sweeping again");
            }
        } else if r.subnet_up {
            tracing::info!(
                sweep = r.sweep,
                nodes = r.nodes,
                switches = r.switches,
                cas = r.cas,
                lids = r.lids,
                mads_sent = r.mads_sent,
                mads_min = r.mads_min,
                mads_retried = r.mads_retried,
                mads_lost = r.mads_lost,
                discovery_ms = r.discovery_ns as f64 / 1e6,
                routing_ms = r.routing_ns as f64 / 1e6,
                programming_ms = r.programming_ns as f64 / 1e6,
                sweep_ms = r.sweep_ns as f64 / 1e6,
                engine = %r.engine_used,
                "SUBNET UP"
            );
        } else {
            tracing::warn!(sweep = r.sweep, errors = ?r.errors, "sweep incomplete; sweeping again");
        }
        let failed = !r.subnet_up;
        let repair = !r.heavy;
        let sweep_n = r.sweep;
        if self.mkeys.take_changed() {
            self.events.push_back(Event::KeysChanged);
        }
        self.events.push_back(Event::SweepDone(Box::new(r.clone())));
        self.phase = Phase::Idle;
        if repair {
            self.install_sa_db(now);
        }
        if failed {
            // Back off so a fault that persists does not turn into a sweep storm.
            self.timers
                .set(Timer::HeavySweep, now + self.p.retry_backoff);
            let what = if repair { "repair" } else { "sweep" };
            self.trigger
                .get_or_insert_with(|| format!("{what} {sweep_n} incomplete"));
        } else if self.sweep.again {
            self.begin_heavy(now);
        } else {
            self.schedule_light(now);
            // Joins and leaves that came during the sweep.
            self.sync_mcast(now, false);
            // Traps that came during it.
            if !self.trap_lids.is_empty() {
                self.timers.set_if_idle(Timer::TrapBatch, now);
            }
        }
    }

    // ---------------------------------------------------------------------------------
    // Answers.

    fn on_lost(&mut self, now: Instant, w: Work) {
        // A probe's silence is most likely a link down on its way, not a key.
        if let (false, Some(h)) = (
            matches!(w.purpose, Purpose::RepairProbe { .. }),
            self.key_holder(&w),
        ) {
            self.mkeys.lost(h);
        }
        if let (Phase::Repair(r), Some(m)) = (&mut self.phase, &self.model) {
            if matches!(
                w.purpose,
                Purpose::RepairPortInfo { .. }
                    | Purpose::RepairNodeInfo { .. }
                    | Purpose::RepairSwitchInfo { .. }
                    | Purpose::RepairClearPsc { .. }
                    | Purpose::RepairProbe { .. }
            ) {
                return r.on_lost(m, &w);
            }
        }
        if let Phase::Discover(d) = &mut self.phase {
            if matches!(
                w.purpose,
                Purpose::NodeInfo { .. }
                    | Purpose::NodeDesc { .. }
                    | Purpose::SwitchInfo { .. }
                    | Purpose::PortInfo { .. }
                    | Purpose::SmInfo { .. }
            ) {
                return d.on_lost(w);
            }
        }
        if let (Phase::Program(pg), Some(m)) = (&mut self.phase, &self.model) {
            if let Purpose::SetPortInfo {
                port,
                rereg: true,
                tries,
                ..
            } = w.purpose
            {
                // Whether it arrived decides whether it is sent again.
                let num = u32::from(m.fabric.port(port).num);
                let verify = Purpose::VerifySettings { port, tries };
                self.queue
                    .push_front(Work::get(verify, attr::PORT_INFO, num, Target::Port(port)));
                return;
            }
            if let Some(missing) = program::lost(m, &w) {
                pg.lost.push(missing);
                return;
            }
        }
        let purpose = w.purpose;
        let what = match purpose {
            Purpose::Election { why, to } => {
                match why {
                    Ask::Poll => {
                        let actions = self.election.on_poll(None, self.own_guid());
                        self.act(now, actions);
                    }
                    Ask::Control(_) => self.election.on_control_lost(to),
                    Ask::Light => {}
                }
                return;
            }
            // A port may claim IsSM without an SM answering: no candidate, no error.
            Purpose::SmInfo { .. } => return,
            // A block not read is not kept: the plan's goes there.
            Purpose::ReadLft { .. } => return,
            Purpose::SetPhys { guid, num, on } => {
                tracing::warn!(%guid, port = num, on, "PortPhysicalState Set unanswered");
                if !on {
                    // The link is up still: the next sweep tries again.
                    self.health.forget_disabled((guid, num));
                }
                return;
            }
            Purpose::LightSwitchInfo {
                lid, node, direct, ..
            } => {
                let known = self.model.as_ref().is_some_and(|m| m.present(node));
                if !direct && known && matches!(self.phase, Phase::Light(_)) {
                    // Dead, or its LID route broken: the discovered path tells.
                    self.queue.push_back(Work::get(
                        Purpose::LightSwitchInfo {
                            lid,
                            node,
                            direct: true,
                            fallback: true,
                        },
                        attr::SWITCH_INFO,
                        0,
                        Target::Node(node),
                    ));
                } else if let Phase::Light(l) = &mut self.phase {
                    // A switch that stops answering is a change worth a heavy sweep.
                    l.lost = true;
                }
                return;
            }
            Purpose::SetMft { guid, .. } | Purpose::SetMcastTop { guid } => {
                tracing::warn!(%guid, "multicast Set lost; the switch's table is sent again");
                self.mcast.settle(guid, false);
                if !matches!(self.phase, Phase::Program(_)) {
                    return;
                }
                format!("{purpose:?}")
            }
            Purpose::NodeInfo { path, .. } => format!("NodeInfo via {path:?}"),
            other => format!("{other:?}"),
        };
        self.sweep.report.errors.push(format!("no answer: {what}"));
    }

    fn on_answer(&mut self, now: Instant, purpose: Purpose, s: &smp::Repr) {
        let ok = s.status == MadStatus::OK;
        if ok && s.attr_id == attr::PORT_INFO {
            if let (Some(h), Ok(pi)) = (
                self.end_port_holder(&purpose),
                s.attribute::<sm_mad::port_info::Repr>(),
            ) {
                self.mkeys.learn(h, &pi);
            }
        }
        match purpose {
            Purpose::Election { why, to } => self.on_election_answer(now, why, to, s),
            Purpose::ReadLft { node, block } => {
                let (Phase::ReadTables(h), Some(m), true) = (&mut self.phase, &self.model, ok)
                else {
                    return;
                };
                if let Ok(b) = s.attribute::<sm_mad::lft::Repr>() {
                    let guid = m.fabric.node(node).guid;
                    let t = h.tables.entry(guid).or_default();
                    let n = sm_mad::lft::ENTRIES;
                    let at = usize::from(block) * n;
                    if t.len() < at + n {
                        t.resize(at + n, sm_core::dump::NO_ROUTE);
                    }
                    for (slot, p) in t[at..at + n].iter_mut().zip(b.port_block) {
                        *slot = p.0;
                    }
                    h.read.entry(guid).or_default().push(block);
                }
            }
            Purpose::LightSwitchInfo {
                lid,
                node,
                fallback,
                ..
            } => {
                if let (Phase::Light(l), true) = (&mut self.phase, ok) {
                    l.astray |= fallback;
                    if let Ok(si) = s.attribute::<sm_mad::switch_info::Repr>() {
                        // A switch that lost its tables rebooted, whether or not any trap
                        // got through (the SM's own leaf's cannot): repaired whole.
                        let emptied = self
                            .plan
                            .as_ref()
                            .is_some_and(|p| !p.lfts.is_empty() && si.linear_fdb_top != p.max_lid);
                        if emptied {
                            self.emptied.insert(node, si);
                        }
                        if si.port_state_change || emptied {
                            l.changed.insert(lid);
                        }
                    }
                }
            }
            Purpose::SetMft { guid, modifier } => {
                if !ok {
                    tracing::warn!(%guid, block = modifier.block, position = modifier.position, "MFT block refused; the switch's table is sent again");
                }
                self.on_mcast_answer(guid, &purpose, s);
            }
            Purpose::SetMcastTop { guid } => self.on_mcast_answer(guid, &purpose, s),
            Purpose::SetPhys { guid, num, on } => {
                if !ok {
                    tracing::warn!(%guid, port = num, on, status = s.status.0, "PortPhysicalState Set refused");
                }
            }
            Purpose::NodeInfo { .. }
            | Purpose::NodeDesc { .. }
            | Purpose::SwitchInfo { .. }
            | Purpose::PortInfo { .. }
            | Purpose::SmInfo { .. } => {
                if let Phase::Discover(d) = &mut self.phase {
                    d.on_answer(purpose, s);
                }
            }
            Purpose::RepairPortInfo { .. }
            | Purpose::RepairNodeInfo { .. }
            | Purpose::RepairSwitchInfo { .. }
            | Purpose::RepairClearPsc { .. }
            | Purpose::RepairProbe { .. } => {
                if let (Phase::Repair(r), Some(m)) = (&mut self.phase, &self.model) {
                    r.on_answer(m, purpose, s);
                    let gone = std::mem::take(&mut r.abandoned);
                    if !gone.is_empty() {
                        self.reqs.abandon(|w| {
                            matches!(w.purpose, Purpose::RepairProbe { probe } if gone.contains(&probe))
                        });
                    }
                    // Gets on their way to a switch whose way back was found cut cannot
                    // arrive: unanswered now rather than after every retry.
                    let doomed = std::mem::take(&mut r.doomed_new);
                    if !doomed.is_empty() {
                        let f = &m.fabric;
                        let cut = self.reqs.abandon(|w| match w.purpose {
                            Purpose::RepairPortInfo { port } | Purpose::RepairNodeInfo { port } => {
                                r.is_doomed(m, port)
                                    && matches!(w.to, Target::Path(_))
                                    && doomed.contains(&f.port(port).node)
                            }
                            Purpose::RepairProbe { .. } => {
                                matches!(w.key, mkeys::KeyHolder::Guid(g) if doomed.iter().any(|&n| f.node(n).guid == g))
                            }
                            Purpose::RepairClearPsc { node, .. } => {
                                doomed.contains(&node) && matches!(w.to, Target::Path(_))
                            }
                            _ => false,
                        });
                        for w in cut {
                            r.on_lost(m, &w);
                        }
                    }
                }
            }
            _ => {
                let (Phase::Program(_), Some(m), Some(plan)) =
                    (&self.phase, &mut self.model, &self.plan)
                else {
                    return;
                };
                if let (
                    Purpose::SetPortInfo {
                        port, rereg: true, ..
                    },
                    true,
                ) = (&purpose, ok)
                {
                    self.reregistered.insert(m.fabric.port(*port).guid);
                }
                // The SA still holds the previous sweep's model: no copy is made here.
                let m = Arc::make_mut(m);
                match program::on_answer(m, plan, &mut self.held, purpose, s, self.p.smp_retries) {
                    Answered::Done => {}
                    Answered::Arrived(port) => {
                        self.reregistered.insert(m.fabric.port(port).guid);
                    }
                    Answered::Again(w) => self.queue.push_front(*w),
                    Answered::Failed(e) => self.sweep.report.errors.push(e),
                }
            }
        }
    }

    fn on_mcast_answer(&mut self, guid: Guid, purpose: &Purpose, s: &smp::Repr) {
        let ok = s.status == MadStatus::OK;
        self.mcast.settle(guid, ok);
        if !ok && matches!(self.phase, Phase::Program(_)) {
            self.sweep
                .report
                .errors
                .push(format!("{purpose:?}: status {:#06x}", s.status.0));
        }
    }

    // ---------------------------------------------------------------------------------
    // The SA's snapshot and multicast.

    /// Hands the SA a snapshot of the subnet as this sweep left it.
    fn install_sa_db(&mut self, now: Instant) {
        let (Some(m), Some(plan)) = (&self.model, &self.plan) else {
            return;
        };
        let db = snapshot::build(m, plan, &self.p, self.election.remote_infos(m.own_guid()));
        self.sa.install(now, db, &self.p.partitions);
    }

    /// Recomputes the multicast trees (every group when `all`, else the groups the SA
    /// changed) and sends the MFT blocks and tops that differ from what the switches hold.
    fn sync_mcast(&mut self, now: Instant, all: bool) {
        let changed = self.sa.take_mcast_changes();
        let (Some(model), Some(plan)) = (&self.model, &self.plan) else {
            return;
        };
        let synced = self.mcast.sync(SyncInput {
            model,
            plan,
            groups: self.sa.mcast(),
            changed,
            all,
            use_top: self.p.sa.mcast_top,
        });
        self.queue
            .extend(synced.sets.iter().filter_map(|s| mcast_work(model, s)));
        self.sweep.report.mft_blocks_sent += synced.blocks as u64;
        if matches!(self.phase, Phase::Program(_)) {
            self.sweep.report.mcast_sets += synced.sets.len() as u64;
        }
        if !synced.sets.is_empty() {
            tracing::debug!(
                sets = synced.sets.len(),
                "multicast forwarding tables updated"
            );
        }
        if synced.recomputed {
            self.publish_mfts();
        }
        self.pump(now);
    }

    /// Copies the wanted MFTs into the SA's snapshot.
    fn publish_mfts(&mut self) {
        let (Some(want), Some(plan)) = (self.mcast.want(), &self.plan) else {
            return;
        };
        let Some(db) = self.sa.db_mut() else {
            return;
        };
        for t in &want.switches {
            let Some(node) = plan.fabric.node_by_guid(t.guid) else {
                continue;
            };
            db.clear_mft(node);
            for b in 0..t.blocks() {
                for pos in 0..t.positions() {
                    let block = t.block(b, pos);
                    if block.port_mask_block.iter().any(|&w| w != 0) {
                        db.set_mft(node, b, pos, block);
                    }
                }
            }
        }
    }

    // ---------------------------------------------------------------------------------
    // Traps and the election.

    fn on_trap(&mut self, now: Instant, slid: Lid, s: &smp::Repr) {
        let key = self.mkeys.present(self.holder_of_lid(slid));
        let back = match (&self.plan, &self.model, self.sa.db()) {
            (Some(plan), Some(m), Some(db)) if self.election.is_master() => db
                .port_by_lid(slid)
                .map(|q| db.fabric().node(db.fabric().port(q).node).guid)
                .and_then(|g| plan.fabric.node_by_guid(g))
                .and_then(|n| plan.route_back(m.own, n)),
            _ => None,
        };
        let Some(trap) = traps::Trap::read(s, slid, key, back.as_deref()) else {
            return;
        };
        // Repress first, so the issuer stops repeating.
        if let Some((dlid, b)) = trap.repress {
            self.reqs.send_unsolicited(dlid, b);
        }
        let issuer = trap
            .notice
            .map(|n| n.issuer_lid)
            .filter(|l| l.0 != 0)
            .unwrap_or(slid);
        // A trap naming an issuer other than the port it came from is forged (a host
        // speaking for a switch): counted, not acted on. LMC ranges count as one port.
        if let Some(db) = self.sa.db() {
            let real = slid.0 == 0
                || slid == Lid::PERMISSIVE
                || issuer == slid
                || db
                    .port_by_lid(issuer)
                    .is_some_and(|q| db.port_by_lid(slid) == Some(q));
            if !real {
                self.trap_gate.forged += 1;
                if self.trap_gate.forged.is_power_of_two() {
                    tracing::warn!(
                        from = %slid,
                        claimed = %issuer,
                        forged = self.trap_gate.forged,
                        "trap claiming another issuer than its sender ignored"
                    );
                }
                return;
            }
        }
        if !self.trap_gate.admit(now, issuer) {
            return;
        }
        {
            // Named as an operator looks for it: the node, not only its LID.
            // The SA's snapshot may be of an earlier plan than the SM's: its indices
            // are its own fabric's.
            let node = self.sa.db().and_then(|db| {
                let f = db.fabric();
                let q = db.port_by_lid(issuer)?;
                let n = f.node(f.port(q).node);
                Some((n.guid, n.description.clone()))
            });
            let name = notice::trap::name(trap.number).unwrap_or("vendor or unknown");
            match node {
                Some((guid, desc)) => tracing::info!(
                    trap = trap.number,
                    "trap {} ({name}) from \"{desc}\" {guid} (LID {})",
                    trap.number,
                    issuer.0
                ),
                None => tracing::info!(
                    trap = trap.number,
                    "trap {} ({name}) from LID {}",
                    trap.number,
                    issuer.0
                ),
            }
        }
        if trap.number == notice::trap::BAD_M_KEY {
            self.on_bad_m_key(issuer, trap.notice.as_ref());
        }
        if let Some(n) = trap.notice {
            self.sa.report_trap(now, slid, s.tid, n);
        }
        self.events.push_back(Event::Trap {
            issuer: slid,
            trap_number: trap.number,
        });
        let repairable = trap.number == notice::trap::LINK_STATE_CHANGE
            && self.up
            && self.election.is_master()
            && self.plan.is_some();
        if repairable {
            // Gathered for a repair: the traps of a burst (both ends of a link, the
            // neighbours of a switch) are looked at together.
            if self.trap_lids.is_empty() {
                self.trap_watch = self.p.stopwatch.map(|f| f());
            }
            self.trap_lids.insert(issuer);
            self.timers
                .set_if_idle(Timer::TrapBatch, now + repair::GATHER);
        } else if trap.calls_for_sweep() {
            self.trigger
                .get_or_insert_with(|| format!("trap {}", trap.number));
            self.request_sweep(now, true);
        }
    }

    /// Trap 256: a port refused an SMP for its M_Key. Logged once per port; ours (it holds
    /// a key we do not know) means the node stays unresponsive until its lease runs out,
    /// someone else's is a host probing without the key.
    fn on_bad_m_key(&mut self, issuer: Lid, n: Option<&notice::Repr>) {
        if !self.mkeys.refused(issuer) {
            return;
        }
        let details = n.and_then(|n| match n.kind {
            notice::Kind::Generic {
                trap: notice::Trap::BadMKey(d),
                ..
            } => Some(d),
            _ => None,
        });
        let ours = self.mkeys.present(self.holder_of_lid(issuer));
        match details {
            Some(d) if d.m_key == ours => tracing::warn!(
                lid = issuer.0,
                attr = d.attribute_id,
                "port at LID {} refused our M_Key: it holds a key this SM does not know; \
                 it is left out until its M_Key lease runs out",
                issuer.0
            ),
            Some(d) => tracing::warn!(
                lid = issuer.0,
                from = d.lid_addr.0,
                attr = d.attribute_id,
                "port at LID {} refused an SMP from LID {} with a wrong M_Key ({:#x})",
                issuer.0,
                d.lid_addr.0,
                d.m_key
            ),
            None => tracing::warn!(lid = issuer.0, "bad M_Key trap from LID {}", issuer.0),
        }
    }

    /// The gathered traps are due: a repair looks at the switches that sent them.
    fn begin_repair(&mut self, now: Instant) {
        // A light sweep under way gives way: what it found so far is repaired too, and its
        // Gets still out are given up (those that crossed the failure would hold the
        // repair back for all their retries).
        if let Phase::Light(l) = std::mem::replace(&mut self.phase, Phase::Idle) {
            let done = LightReport {
                reads: l.reads,
                changed: l.changed.len() as u64,
                outcome: "gave way to a repair".into(),
                ..LightReport::default()
            };
            self.light_done(done, l.counts_at);
            self.trap_lids.extend(l.changed);
            self.queue
                .retain(|w| !matches!(w.purpose, Purpose::LightSwitchInfo { .. }));
            self.reqs
                .abandon(|w| matches!(w.purpose, Purpose::LightSwitchInfo { .. }));
        }
        let lids = std::mem::take(&mut self.trap_lids);
        // Traps that come during this repair start the next one's clock.
        let trap_watch = self.trap_watch.take();
        let cause = self.repair_cause.take().unwrap_or("trap 128");
        if lids.is_empty() {
            return;
        }
        let started = match (&self.model, &self.plan) {
            (Some(m), Some(plan)) => repair::Repair::start(m, plan, &lids, cause),
            _ => Err("no model to repair".into()),
        };
        let mut r = match started {
            Ok(r) => r,
            Err(why) => {
                tracing::info!("{why}: heavy sweep");
                self.trigger = Some(why);
                return self.begin_heavy(now);
            }
        };
        if let Some(m) = &self.model {
            r.emptied(m, std::mem::take(&mut self.emptied));
        }
        r.dirty(&self.psc_dirty);
        self.sweep = self.next_sweep(now, r.trigger.clone(), false, trap_watch);
        let n = self.sweep.n;
        tracing::debug!(sweep = n, trigger = %r.trigger, "repair");
        self.timers.stop(Timer::LightSweep);
        self.events.push_back(Event::SweepStarted {
            sweep: n,
            heavy: false,
        });
        self.phase = Phase::Repair(Box::new(r));
        self.pump(now);
    }

    /// The repair's look is done: apply what it found.
    fn on_repair_found(&mut self, now: Instant, r: repair::Repair, found: repair::Found) {
        tracing::debug!(?found, unanswered = r.unanswered.len(), "repair's look");
        // Switches some question went unanswered at are looked at again, as if they had
        // trapped; a switch that keeps not answering calls for a heavy sweep.
        if r.unanswered.is_empty() {
            self.repair_retries = 0;
        } else if let (Some(m), Some(plan)) = (&self.model, &self.plan) {
            self.repair_retries += 1;
            if self.repair_retries > MAX_REPAIR_RETRIES {
                self.repair_retries = 0;
                self.trigger = Some("repairs kept going unanswered".into());
                return self.begin_heavy(now);
            }
            if self.trap_lids.is_empty() {
                self.trap_watch = self.p.stopwatch.map(|f| f());
            }
            for &q in &r.unanswered {
                let n = m.fabric.port(q).node;
                if let Some(p0) = plan.fabric.port_of(n, 0) {
                    self.trap_lids.insert(plan.fabric.port(p0).lid);
                }
            }
        }
        let (changes, ports, reset) = match found {
            repair::Found::Heavy(why) => {
                tracing::info!("repair: {why}; heavy sweep");
                self.trigger = Some(why);
                return self.begin_heavy(now);
            }
            repair::Found::Nothing => (Vec::new(), Vec::new(), Vec::new()),
            repair::Found::Changes {
                changes,
                ports,
                reset,
            } => (changes, ports, reset),
        };
        let (changes, ports) = self.screen(now, changes, ports);
        let (Some(model), Some(prev)) = (self.model.as_mut(), self.plan.clone()) else {
            return self.begin_heavy(now);
        };
        let m = Arc::make_mut(model);
        for c in &changes {
            c.apply(&mut m.fabric);
            match *c {
                repair::LinkChange::Down(a, b) => {
                    m.former_peers.insert(a, b);
                    m.former_peers.insert(b, a);
                }
                repair::LinkChange::Up(a, b) => {
                    m.former_peers.remove(&a);
                    m.former_peers.remove(&b);
                }
            }
        }
        // The look cleared its trappers' PortStateChange after these changes; the far
        // ends of the changes it did not look at hold theirs set by them.
        for n in &r.trapped {
            self.psc_dirty.remove(n);
        }
        for c in &changes {
            let (repair::LinkChange::Down(a, b) | repair::LinkChange::Up(a, b)) = *c;
            for q in [a, b] {
                let n = m.fabric.port(q).node;
                if !r.trapped.contains(&n) && m.is_switch(n) {
                    self.psc_dirty.insert(n);
                }
            }
        }
        let mut read = std::collections::HashSet::new();
        for (q, pi) in r.reads() {
            m.ports[q].info = Some(*pi);
            read.insert(q);
        }
        // A link that came up trained both its ends to INIT (IBA 7.2): an end the look did
        // not read (a host behind a switch that came back) is taken through ARMED again.
        for c in &changes {
            if let repair::LinkChange::Up(a, b) = *c {
                for q in [a, b] {
                    if read.contains(&q) {
                        continue;
                    }
                    if let Some(pi) = m.ports[q].info.as_mut() {
                        if pi.port_state != PortState::Init {
                            pi.port_state = PortState::Init;
                        }
                    }
                }
            }
        }
        // Routes to agents that crossed a link now down go round it; what no link reaches
        // is absent until it comes back.
        let reached = if changes.is_empty() {
            model::Reconnected::default()
        } else {
            m.reconnect()
        };
        if reached.paths > 0 {
            tracing::debug!(
                paths = reached.paths,
                "directed routes reached off links that went down"
            );
        }
        for &n in &reached.gone {
            tracing::info!(node = %m.fabric.node(n).guid, desc = %m.fabric.node(n).description, "cut off");
            // Back, it is a new arrival: its registrations died with it.
            for q in m.fabric.node_ports(n) {
                self.reregistered.remove(&m.fabric.port(q).guid);
            }
        }
        // A node back that the last heavy sweep did not see has no port facts: what is
        // behind it is unknown, and only a discovery finds it.
        let unknown_back = reached.back.iter().any(|&n| {
            m.fabric.node_ports(n).any(|q| {
                m.fabric.port(q).num > 0
                    && match &m.ports[q].info {
                        None => true,
                        Some(pi) => {
                            m.fabric.port(q).remote.is_none()
                                && pi.port_physical_state == PhysPortState::LinkUp
                        }
                    }
            })
        });
        if unknown_back {
            self.trigger
                .get_or_insert_with(|| "a node back whose links are not in the model".into());
            self.sweep.again = true;
        }
        for &n in &reached.back {
            tracing::info!(node = %m.fabric.node(n).guid, desc = %m.fabric.node(n).description, "back");
            // What it held before it went is not known to be held now (a power cycle).
            self.held.forget_tables(m.fabric.node(n).guid);
            // Every link it has trained again while it was out of reach: both ends are
            // in INIT, whatever the model last read of them before it went.
            for q in m.fabric.node_ports(n).collect::<Vec<_>>() {
                let far = m.fabric.port(q).remote;
                for e in std::iter::once(q).chain(far) {
                    if read.contains(&e) {
                        continue;
                    }
                    if let Some(pi) = m.ports[e].info.as_mut()
                        && matches!(pi.port_state, PortState::Armed | PortState::Active)
                    {
                        pi.port_state = PortState::Init;
                    }
                }
            }
        }
        // A port that claims an SM is back: which is master is for the election to say,
        // after this repair (OpenSM asks every such port's SMInfo when it sweeps).
        let sm_back = changes
            .iter()
            .flat_map(|c| {
                let (repair::LinkChange::Down(a, b) | repair::LinkChange::Up(a, b)) = *c;
                matches!(c, repair::LinkChange::Up(..)).then_some([a, b])
            })
            .flatten()
            .chain(reached.back.iter().flat_map(|&n| m.fabric.node_ports(n)))
            .any(|q| {
                q != m.own
                    && m.is_end_port(q)
                    && m.port_info(q)
                        .is_some_and(|pi| pi.capability_mask & port_info::cap::IS_SM != 0)
            });
        if sm_back {
            self.trigger
                .get_or_insert_with(|| "a port claiming an SM is back: the election".into());
            self.sweep.again = true;
        }
        for &n in &reset {
            if let Some(si) = r.switch_info(n) {
                m.nodes[n].switch_info = Some(*si);
            }
            // Its links trained again: the far ends are in INIT (IBA 7.2), whatever the
            // model last read of them, and must be taken through ARMED again.
            for q in m.fabric.node_ports(n).collect::<Vec<_>>() {
                let Some(far) = m.fabric.port(q).remote else {
                    continue;
                };
                if let Some(pi) = m.ports[far].info.as_mut() {
                    if matches!(pi.port_state, PortState::Armed | PortState::Active) {
                        pi.port_state = PortState::Init;
                    }
                }
            }
            let guid = m.fabric.node(n).guid;
            self.held.forget_switch(guid);
            self.mcast.forget(guid);
        }
        let repaired = if changes.is_empty() && prev.displaced.is_empty() {
            Ok(((*prev).clone(), plan::Repaired::default()))
        } else {
            plan::repair(&prev, m, &changes, &ports, &reached.back, &self.p)
        };
        let (new, repaired) = match repaired {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("repair: {e}; heavy sweep");
                self.trigger = Some(format!("repair failed: {e}"));
                return self.begin_heavy(now);
            }
        };
        let (phases, touched) = program::phases(&prev, &new, &repaired.moved, &repaired.drain);
        for &(n, block) in &touched {
            self.held
                .lft_changing(new.fabric.node(n).guid, usize::from(block));
        }
        let rep = &mut self.sweep.report;
        let c = m.counts();
        (rep.nodes, rep.switches, rep.cas, rep.routers, rep.links) =
            (c.nodes, c.switches, c.cas, c.routers, c.links);
        rep.lids = new.lids;
        rep.engine_used = new.engine_used.clone();
        rep.routing_ns = new.routing_time.as_nanos() as u64;
        rep.lft_entries_moved = repaired.moved.len() as u64;
        rep.lft_entries_moved_min = repaired.moved_min;
        rep.lft_entries_restored = repaired.restored;
        rep.unrouted_switch_pairs = repaired.unrouted;
        rep.paths_new_sl = repaired.paths_new_sl;
        rep.paths_exposed = repaired.paths_exposed;
        rep.reroute = repaired
            .full_reroute
            .clone()
            .unwrap_or_else(|| "only the broken routes".into());
        rep.discovery_ns = (now - self.sweep.phase_at).as_nanos() as u64;
        self.sweep.phase_at = now;
        let mut switches: Vec<NodeIdx> = r
            .trapped
            .iter()
            .copied()
            .chain(reset.iter().copied())
            .collect();
        switches.sort();
        switches.dedup();
        self.sweep.report.looked_at = switches
            .iter()
            .chain(&reached.back)
            .chain(&r.dark)
            .map(|&n| m.fabric.node(n).guid.to_string())
            .collect();
        let mcast_trees = !reached.back.is_empty()
            || !reset.is_empty()
            || changes.iter().any(|c| match *c {
                repair::LinkChange::Down(..) => true,
                repair::LinkChange::Up(a, b) => {
                    [a, b].iter().any(|&q| !m.is_switch(m.fabric.port(q).node))
                }
            });
        let all_tables = !Arc::ptr_eq(&prev.tables, &new.tables);
        let mut ports = ports;
        if all_tables {
            // Tables for another number of VLs go with new port settings (VLHighLimit,
            // OperationalVLs) beyond the ports the repair looked at.
            ports.extend(
                new.settings
                    .iter_enumerated()
                    .filter(|&(q, want)| prev.settings.get(q) != Some(want))
                    .map(|(q, _)| q),
            );
            ports.sort_unstable();
            ports.dedup();
        }
        let scope = program::Scope {
            ports,
            switches,
            whole: reset,
            phases,
            touched,
            mcast_trees,
            all_tables,
        };
        self.plan = Some(Arc::new(new));
        self.phase = Phase::Program(Programming::repair(scope));
    }

    /// Counts the links a repair found down as flaps, and drops links coming back at
    /// unhealthy ports: they stay out of the subnet.
    fn screen(
        &mut self,
        now: Instant,
        changes: Vec<repair::LinkChange>,
        mut ports: Vec<PortIdx>,
    ) -> (Vec<repair::LinkChange>, Vec<PortIdx>) {
        let Some(m) = self.model.as_deref() else {
            return (changes, ports);
        };
        let id = |q: PortIdx| {
            let p = m.fabric.port(q);
            (m.fabric.node(p.node).guid, p.num)
        };
        let mut kept = Vec::with_capacity(changes.len());
        let mut muted = std::collections::BTreeSet::new();
        let mut newly = false;
        let mut off = Vec::new();
        for c in changes {
            match c {
                repair::LinkChange::Down(a, b) => {
                    if self.health.link_down(now, id(a), id(b)) {
                        newly = true;
                        off.push(switch_end(m, a, b));
                    }
                    kept.push(c);
                }
                repair::LinkChange::Up(a, b) => {
                    let (x, y) = (id(a), id(b));
                    if self.health.is_unhealthy(x.0, x.1) || self.health.is_unhealthy(y.0, y.1) {
                        tracing::debug!(node = %x.0, port = x.1, "unhealthy link up again; left out");
                        muted.insert(a);
                        muted.insert(b);
                        off.push(switch_end(m, a, b));
                    } else {
                        kept.push(c);
                    }
                }
            }
        }
        ports.retain(|q| !muted.contains(q));
        if newly {
            self.events.push_back(Event::HealthChanged);
        }
        if self.health.disables() {
            for (at, other) in off {
                self.set_phys(now, at, Some(other), false);
            }
        }
        (kept, ports)
    }

    /// Get or Set(SMInfo) from another SM: acted on, and answered with our SMInfo.
    fn on_sm_info_request(&mut self, now: Instant, slid: Lid, s: &smp::Repr) {
        let theirs = s.attribute::<sm_mad::sm_info::Repr>().ok();
        // The SM_Key is disclosed to a requester that proves it may see it: it presents
        // our M_Key (the configured one, or our port's own), or its SMInfo carries our
        // SM_Key. Without an M_Key nothing can be proven and every requester passes M_Key
        // checking (IBA 14.4.1, as OpenSM): SMs must see each other's key to elect.
        let own_key = self
            .mkeys
            .present(self.model.as_ref().map(|m| m.own_guid()));
        let m_key_ok = self.p.m_key == 0
            || (s.m_key != 0 && (s.m_key == self.p.m_key || s.m_key == own_key))
            || theirs.is_some_and(|t| self.p.sm_key != 0 && t.sm_key == self.p.sm_key);
        let me = self.own_guid();
        let req = election::Request {
            method: s.method,
            modifier: s.attr_mod,
            theirs,
            slid,
            m_key_ok,
        };
        let reply = self.election.on_request(now, req, me);
        self.act(now, reply.actions);
        let mut r = *s;
        r.method = Method::GetResp;
        r.status = reply.status;
        r.m_key = self.p.m_key;
        if let Route::Directed(d) = &mut r.route {
            d.direction = true;
        }
        let info = self
            .election
            .own_info(me, reply.show_key, self.reqs.counts.sent as u32);
        if r.set_attribute(&info).is_err() {
            return;
        }
        let dlid = if matches!(s.route, Route::Lid) {
            slid
        } else {
            Lid::PERMISSIVE
        };
        if let Ok(b) = r.to_bytes() {
            self.reqs.send_unsolicited(dlid, b);
        }
    }

    fn on_election_answer(&mut self, now: Instant, why: Ask, to: Guid, s: &smp::Repr) {
        let me = self.own_guid();
        let info = s.attribute::<sm_mad::sm_info::Repr>().ok();
        let actions = match why {
            Ask::Poll => {
                let state = info
                    .filter(|_| s.status == MadStatus::OK)
                    .map(|i| i.sm_state);
                self.election.on_poll(state, me)
            }
            Ask::Control(control) => {
                self.election
                    .on_control_answer(now, control, to, s.status, info.map(|i| i.guid))
            }
            Ask::Light => match info.filter(|_| s.status == MadStatus::OK) {
                Some(i) if election::key_matches(self.p.sm_key, &i) => {
                    self.election.on_light_info(i, me)
                }
                _ => Vec::new(),
            },
        };
        self.act(now, actions);
    }

    /// Carries out what the election asks.
    fn act(&mut self, now: Instant, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Ask { to, why } => self.ask_sm(now, &to, why),
                Action::AskForSubnet { lid } => self.trap_144(lid),
                Action::Sweep => {
                    self.trigger
                        .get_or_insert_with(|| "election: this SM is master".into());
                    if matches!(self.election.state(), SmState::Discovering) {
                        self.begin_heavy(now);
                    } else {
                        self.request_sweep(now, true);
                    }
                }
                Action::StopActivity => {
                    self.reqs.clear();
                    self.queue.clear();
                    self.mcast.forget_in_flight();
                    self.phase = Phase::Idle;
                }
                Action::StandBy => {
                    self.up = false;
                    self.timers.stop(Timer::LightSweep);
                    self.timers.stop(Timer::HeavySweep);
                    self.sweep.again = false;
                }
                Action::ForgetProgrammed => {
                    self.held.forget_all();
                    self.mcast.forget_all();
                    // Another SM ran the subnet meanwhile: clients may have registered there.
                    self.reregistered.clear();
                }
                Action::PollAt(t) => self.timers.set(Timer::MasterPoll, t),
                Action::CancelPoll => self.timers.stop(Timer::MasterPoll),
                Action::PublishSms => {
                    let infos = self.election.remote_infos(self.own_guid());
                    self.sa.set_remote_sms(infos);
                }
            }
        }
    }

    /// An SMInfo to another SM: LID-routed when its LID is known, else along its directed
    /// route. Polls go once (a missed poll is what `poll_retries` counts).
    fn ask_sm(&mut self, now: Instant, to: &RemoteSm, why: Ask) {
        let to_target = if to.lid.0 != 0 && to.lid != Lid::PERMISSIVE {
            Target::Lid(to.lid)
        } else if !to.path.is_empty() {
            Target::Path(to.path)
        } else {
            tracing::debug!(to = %to.guid, "no way to reach that SM");
            if why == Ask::Poll {
                let actions = self.election.on_poll(None, self.own_guid());
                self.act(now, actions);
            }
            return;
        };
        let (method, modifier) = match why {
            Ask::Control(c) => (Method::Set, u32::from(c)),
            Ask::Poll | Ask::Light => (Method::Get, 0),
        };
        let me = self.own_guid();
        let data = plan::emit_data(
            &self
                .election
                .own_info(me, true, self.reqs.counts.sent as u32),
        );
        self.queue.push_back(Work {
            purpose: Purpose::Election { why, to: to.guid },
            method,
            attr: attr::SM_INFO,
            modifier,
            to: to_target,
            data,
            retries: (why == Ask::Poll).then_some(0),
            dest: Some(dest::node(to.guid)),
            key: mkeys::KeyHolder::Guid(to.guid),
        });
        self.pump(now);
    }

    /// Trap 144 (SM priority changed) to the master at `lid`, from our port.
    fn trap_144(&mut self, lid: Lid) {
        let own = self.own_lid();
        let details = notice::details_144::Repr {
            lid_addr: own,
            capability_mask: port_info::cap::IS_SM,
            sm_priority_change: true,
            ..Default::default()
        };
        let n = notice::Repr::generic(
            notice::ProducerType::Ca,
            own,
            notice::Trap::LocalChanges(details),
        );
        let tid = self.reqs.tid();
        let mut req = smp::Repr::request(Method::Trap, tid, attr::NOTICE, 0, Route::Lid);
        req.m_key = self.mkeys.present(self.holder_of_lid(lid));
        if req.set_attribute(&n).is_err() {
            return;
        }
        if let Ok(bytes) = req.to_bytes() {
            tracing::debug!(master = %lid, "trap 144: asking the master for the subnet");
            self.reqs.send_unsolicited(lid, bytes);
        }
    }
}

/// Destination keys: who a request is for, for its timeout and retry budget.
pub(crate) mod dest {
    use sm_mad::{Guid, Lid};

    use super::DestKey;

    /// Nobody in particular.
    pub(crate) const UNKNOWN: DestKey = 0;

    /// A node of the model.
    pub(crate) fn node(g: Guid) -> DestKey {
        g.0
    }

    /// The node not known yet behind port `num` of node `g`.
    pub(crate) fn behind(g: Guid, num: u8) -> DestKey {
        (g.0.rotate_left(16) ^ u64::from(num)) | 1 << 62
    }

    /// A LID.
    pub(crate) fn lid(l: Lid) -> DestKey {
        1 << 63 | u64::from(l.0)
    }

    /// A repair's probe from switch `g`: a route of its own, whose silence says nothing
    /// of the switch's agent.
    pub(crate) fn probe(g: Guid, n: usize) -> DestKey {
        (g.0.rotate_left(24) ^ n as u64) & !(3 << 62) | 1 << 61
    }
}

/// The LID of the switch port `num` of node `guid` is on (its own, or the one across
/// from a host's port).
fn switch_lid(m: &Discovered, plan: &Plan, guid: Guid, num: u8) -> Option<Lid> {
    let f = &m.fabric;
    let n = f.node_by_guid(guid)?;
    let s = if m.is_switch(n) {
        n
    } else {
        f.port(f.port(f.port_of(n, num)?).remote?).node
    };
    let p0 = plan.fabric.port_of(s, 0)?;
    Some(plan.fabric.port(p0).lid).filter(|l| l.0 != 0)
}

/// The end of the link `q`-`r` to switch off, and the other: the switch end, since a host
/// cut off behind its own port could not be reached to switch it on again.
fn switch_end(m: &Discovered, q: PortIdx, r: PortIdx) -> (PortIdx, PortIdx) {
    if !m.is_switch(m.fabric.port(q).node) && m.is_switch(m.fabric.port(r).node) {
        (r, q)
    } else {
        (q, r)
    }
}

/// The SMP of a multicast Set.
fn mcast_work(m: &Discovered, set: &McastSet) -> Option<Work> {
    match *set {
        McastSet::Block {
            guid,
            modifier,
            block,
        } => {
            let node = m.fabric.node_by_guid(guid)?;
            Some(Work::set(
                Purpose::SetMft { guid, modifier },
                attr::MULTICAST_FORWARDING_TABLE,
                modifier.to_attr_mod(),
                Target::Node(node),
                plan::emit_data(&block)?,
            ))
        }
        McastSet::Top { guid, top, info } => {
            let node = m.fabric.node_by_guid(guid)?;
            let si = sm_mad::switch_info::Repr {
                multicast_fdb_top: top,
                // Writing 1 would clear the change bit the light sweep polls.
                port_state_change: false,
                ..info
            };
            Some(Work::set(
                Purpose::SetMcastTop { guid },
                attr::SWITCH_INFO,
                0,
                Target::Node(node),
                plan::emit_data(&si)?,
            ))
        }
    }
}
