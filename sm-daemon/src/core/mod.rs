//! The subnet manager as a sans-IO state machine (quinn-proto style).
//!
//! Inputs: [`Sm::handle_mad`] with the time and a received MAD, [`Sm::handle_timeout`] when
//! [`Sm::poll_timeout`]'s deadline passes, and commands ([`Sm::start`], [`Sm::request_sweep`]).
//! Outputs, pulled by the shell: [`Sm::poll_transmit`], [`Sm::poll_timeout`],
//! [`Sm::poll_event`]. The core never reads a clock, a socket or an unseeded RNG: the same
//! inputs give the same outputs, which is what makes virtual-time tests possible.
//!
//! A heavy sweep: directed-route discovery (NodeInfo, NodeDescription, SwitchInfo, PortInfo
//! of every port; many SMPs in flight) -> a fabric model in GUID order (so discovery order,
//! loss and reordering never change the outcome) -> stable LIDs -> routing -> programming
//! (PortInfo, SwitchInfo, only the LFT blocks that differ from what each switch holds, then
//! every port ARMED and ACTIVE) -> subnet up. Light sweeps poll SwitchInfo.PortStateChange;
//! a trap or a change starts a heavy sweep.

mod election;
mod mcast;
mod requests;

use std::collections::{HashMap, VecDeque};

use sm_core::dump::Lfts;
use sm_core::fabric::{Fabric, NodeKind, NodeSpec, Speed};
use sm_core::lid::LidStore;
use sm_core::partitions::{PKeyTables, Partitions, TableOptions, pkey_tables_with};
use sm_core::qos::{self, PortKind, QosOptions};
use sm_mad::port_info::{self, Mtu, PhysPortState, PortState, VlCap};
use sm_mad::smp::{self, Route};
use sm_mad::{
    Guid, Lid, MadStatus, Method, MgmtClass, PortNum, Tid, attr, lft, mad, mft, node_description,
    node_info, notice, sl2vl, switch_info, vl_arb,
};
use sm_routing::{Options as RouteOptions, Topo};

use crate::sa::{self, Requester, SaConfig};
pub use election::RemoteSm;
use requests::Requests;
pub use requests::{MadCounts, Transmit};

/// Time in nanoseconds, from whatever clock the shell runs on (virtual or monotonic).
pub type Nanos = u64;

/// How long joins and leaves gather before their trees are recomputed and programmed.
const MCAST_BATCH: Nanos = 1_000_000;

/// What the core is told at start.
#[derive(Debug, Clone)]
pub struct Params {
    pub lmc: u8,
    /// Routing engine chain, e.g. `"ftree,updn,minhop"`.
    pub routing: String,
    pub routing_options: RouteOptions,
    pub smp_timeout: Nanos,
    pub smp_retries: u32,
    pub max_outstanding: usize,
    /// Light sweep interval; 0 disables light sweeps.
    pub sweep_interval: Nanos,
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
    /// Wall-clock reader used only to report how long routing took; `None` in virtual time.
    pub stopwatch: Option<fn() -> Nanos>,
    /// Wait before sweeping again after a sweep that did not bring the subnet up.
    pub retry_backoff: Nanos,
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
    pub poll_interval: Nanos,
    /// Polls in a row the master may miss before a standby takes over.
    pub poll_retries: u32,
    /// PortInfo.M_KeyProtectBits to program with `m_key` (0..=3).
    pub m_key_protect_bits: u8,
    /// PortInfo.M_KeyLeasePeriod in seconds; 0 never expires.
    pub m_key_lease_period: u16,
    /// PortInfo.LinkSpeedEnabled: 0 leaves it, 1..=7 a speed mask, 15 LinkSpeedSupported.
    pub force_link_speed: u8,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            lmc: 0,
            routing: "minhop".into(),
            routing_options: RouteOptions::default(),
            smp_timeout: 200_000_000,
            smp_retries: 3,
            max_outstanding: 64,
            sweep_interval: 10_000_000_000,
            subnet_prefix: 0xfe80_0000_0000_0000,
            m_key: 0,
            sm_priority: 0,
            max_op_vls: 5,
            subnet_timeout: 18,
            switch_life_time: 18,
            hoq_life: 18,
            leaf_hoq_life: 16,
            stopwatch: None,
            retry_backoff: 100_000_000,
            partitions: Partitions::no_file(),
            pkey_options: TableOptions::default(),
            qos: QosOptions::default(),
            sticky_routes: true,
            sa: SaConfig::default(),
            sm_key: 1,
            poll_interval: 10_000_000_000,
            poll_retries: 4,
            m_key_protect_bits: 0,
            m_key_lease_period: 0,
            force_link_speed: 15,
        }
    }
}

/// What one sweep did, for the `info!` line and the JSON report.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SweepReport {
    pub sweep: u64,
    pub heavy: bool,
    pub subnet_up: bool,
    pub nodes: usize,
    pub switches: usize,
    pub cas: usize,
    pub routers: usize,
    pub links: usize,
    /// LIDs in use (every LID of every LMC range).
    pub lids: usize,
    pub engine: String,
    pub engine_used: String,
    pub fallbacks: Vec<String>,
    pub mads_sent: u64,
    /// The fewest SMPs this sweep could have sent: one NodeInfo per link plus one, one
    /// NodeDescription per node, one SwitchInfo per switch, one PortInfo per switch port and
    /// per linked CA port, then one
    /// Set per value that had to change (settings with ARMED, ACTIVE, SwitchInfo, LFT,
    /// table and MFT blocks). Retries and duplicate NodeInfos are what `mads_sent` has more.
    pub mads_min: u64,
    pub mads_retried: u64,
    pub mads_lost: u64,
    pub port_info_sets: u64,
    pub switch_info_sets: u64,
    pub lft_blocks_sent: u64,
    /// MFT blocks sent (this sweep, and joins and leaves since the previous one).
    pub mft_blocks_sent: u64,
    /// Multicast Sets (MFT blocks and MulticastFDBTop) of this sweep's programming.
    pub mcast_sets: u64,
    /// Discovery's share of `mads_min`.
    pub discovery_min: u64,
    pub pkey_blocks_sent: u64,
    pub qos_sets: u64,
    pub port_state_sets: u64,
    /// Of the PortInfo Sets with settings, those that also moved the port to ARMED.
    pub merged_armed: u64,
    pub discovery_ns: Nanos,
    pub programming_ns: Nanos,
    /// Routing computation only (wall clock when a stopwatch is given, else 0).
    pub routing_ns: Nanos,
    pub sweep_ns: Nanos,
    /// Errors met on the way (a sweep with errors is retried).
    pub errors: Vec<String>,
    /// "master", or "standby" when the election left the subnet to another SM.
    pub sm_state: String,
    /// PortInfo Sets that asked a port's SA clients to register again (a new master's
    /// sweeps; part of `port_info_sets`).
    pub client_reregisters: u64,
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
    /// A trap arrived (and was repressed).
    Trap {
        issuer: Lid,
        trap_number: u16,
    },
    /// The LID store changed and should be persisted.
    LidsChanged,
}

#[derive(Debug, Clone, Default)]
struct DPort {
    info: Option<port_info::Repr>,
    guid: Guid,
    /// For CA ports: the directed route that reaches this port.
    path: Option<Vec<u8>>,
    peer: Option<(usize, u8)>,
}

#[derive(Debug, Clone)]
struct DNode {
    info: node_info::Repr,
    desc: String,
    switch_info: Option<switch_info::Repr>,
    /// A directed route to the node (switches: any port; CAs: see `DPort::path`).
    path: Vec<u8>,
    ports: Vec<DPort>,
}

impl DNode {
    fn is_switch(&self) -> bool {
        self.info.node_type == node_info::NodeType::Switch
    }
    /// The route to reach port `p`'s agent: a CA only answers for the port we arrive on.
    fn route_to(&self, p: u8) -> Option<&[u8]> {
        if self.is_switch() {
            Some(&self.path)
        } else {
            self.ports.get(p as usize)?.path.as_deref()
        }
    }
}

#[derive(Debug, Clone)]
enum Purpose {
    NodeInfo {
        path: Vec<u8>,
        from: Option<(usize, u8)>,
    },
    NodeDesc {
        node: usize,
    },
    SwitchInfo {
        node: usize,
    },
    PortInfo {
        node: usize,
        port: u8,
    },
    /// A port's settings; `armed`: the Set also moves the port from INIT to ARMED (one SMP
    /// instead of two; refused, it is sent again without the move).
    SetPortInfo {
        node: usize,
        port: u8,
        armed: bool,
    },
    /// A port state transition (ARMED or ACTIVE).
    SetPortState {
        node: usize,
        port: u8,
        want: PortState,
    },
    /// After a refused transition: read the port, which may already be there (a retry of a
    /// Set whose first answer was lost is refused by agents that treat ARMED -> ARMED as
    /// illegal).
    VerifyPortState {
        node: usize,
        port: u8,
        want: PortState,
    },
    SetSwitchInfo {
        node: usize,
    },
    SetLft {
        node: usize,
        block: u16,
        data: [u8; 64],
    },
    /// P_Key, SL2VL or VLArb block: remembered under [`TableKey`].
    SetTable {
        key: TableKey,
        data: [u8; 64],
    },
    LightSwitchInfo,
    /// One MFT block (between sweeps too: the switch is named by GUID).
    SetMft {
        guid: Guid,
        modifier: mft::Modifier,
        block: mft::Repr,
    },
    SetMcastTop {
        guid: Guid,
        top: Lid,
    },
    /// SMInfo of another SM found during discovery.
    SmInfo {
        node: usize,
        port: u8,
    },
    /// A standby's poll of the master.
    PollMaster,
    /// Set(SMInfo) with a control (handover) to the SM of that port GUID.
    SmControl {
        control: u32,
        to: Guid,
    },
    /// A light sweep's look at an SM found before.
    LightSmInfo,
}

#[derive(Debug, Default)]
struct Discovery {
    nodes: Vec<DNode>,
    by_guid: HashMap<Guid, usize>,
    own: Option<(usize, u8)>,
    /// Other SMs that answered their SMInfo.
    sms: Vec<RemoteSm>,
    /// SMInfo Gets sent (part of the minimum: a port that claims an SM must be asked).
    sm_asks: u64,
    /// The port GUID of the SM's own port.
    own_guid: Guid,
}

/// A table block a node holds: (node GUID, port addressed, attribute id, modifier).
type TableKey = (Guid, u8, u16, u32);

/// A Set to send: why, attribute id and modifier, directed route, data.
type PlannedSet = (Purpose, u16, u32, Vec<u8>, [u8; 64]);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    PortInfo,
    SwitchInfo,
    Lft,
    Tables,
    Armed,
    Active,
    /// Multicast trees, once the ports are up and the SA has its snapshot.
    Mcast,
}

#[derive(Debug)]
struct Program {
    disc: Discovery,
    stage: Stage,
    /// LID of every end port, by (node, port).
    max_lid: Lid,
    /// Per switch node index: the LFT to program (index = LID).
    lfts: HashMap<usize, Vec<u8>>,
    /// Desired fields per (node, port): lid, lmc, neighbour MTU, operational VLs.
    desired: HashMap<(usize, u8), port_info::Repr>,
    /// P_Key, SL2VL and VLArb blocks: (node, port, attribute, modifier, data).
    tables: Vec<(usize, u8, u16, u32, [u8; 64])>,
}

#[derive(Debug)]
enum Phase {
    Idle,
    Discover(Discovery),
    Program(Box<Program>),
    Light { changed: bool },
}

/// The subnet manager.
#[derive(Debug)]
pub struct Sm {
    p: Params,
    reqs: Requests<Purpose>,
    events: VecDeque<Event>,
    lids: LidStore,
    phase: Phase,
    sweep: u64,
    heavy: bool,
    report: SweepReport,
    started_at: Nanos,
    phase_at: Nanos,
    counts_at: MadCounts,
    resweep: bool,
    next_light: Option<Nanos>,
    next_heavy: Option<Nanos>,
    /// What each switch (by GUID) holds in its LFT, as confirmed by our Sets.
    lft_shadow: HashMap<Guid, Vec<u8>>,
    /// LinearFDBTop we last set per switch: a different value means the switch forgot.
    top_shadow: HashMap<Guid, Lid>,
    /// P_Key, SL2VL and VLArb blocks each node holds.
    table_shadow: HashMap<TableKey, [u8; 64]>,
    fabric: Option<Fabric>,
    lfts: Option<Lfts>,
    /// Adaptive-routing hints of the last routing run, in their dump format.
    ar_hints: Option<String>,
    own_lid: Lid,
    /// The SM's own port GUID.
    own_guid: Guid,
    up: bool,
    /// P_Key tables of the last plan (the SA's partitions).
    pkey_tables: Option<PKeyTables>,
    /// The subnet administrator.
    sa: sa::Server,
    /// Multicast tables wanted and held.
    mcast: mcast::McastState,
    /// When the joins and leaves received since the last recomputation are programmed.
    mcast_due: Option<Nanos>,
    /// Master, standby: the election among the subnet's SMs.
    election: election::Election,
}

fn dr(tid: Tid, method: Method, attr_id: u16, attr_mod: u32, path: &[u8]) -> Option<smp::Repr> {
    let mut r = smp::Repr::dr_get(tid, attr_id, attr_mod, path).ok()?;
    r.method = method;
    Some(r)
}

impl Sm {
    /// A new SM; `lids` is the persisted LID store (empty on a first start).
    pub fn new(p: Params, lids: LidStore) -> Sm {
        Sm {
            reqs: Requests::new(p.max_outstanding, p.smp_timeout, p.smp_retries),
            sa: sa::Server::new(p.sa),
            p,
            events: VecDeque::new(),
            lids,
            phase: Phase::Idle,
            sweep: 0,
            heavy: false,
            report: SweepReport::default(),
            started_at: 0,
            phase_at: 0,
            counts_at: MadCounts::default(),
            resweep: false,
            next_light: None,
            next_heavy: None,
            lft_shadow: HashMap::new(),
            top_shadow: HashMap::new(),
            table_shadow: HashMap::new(),
            fabric: None,
            lfts: None,
            ar_hints: None,
            own_lid: Lid(0),
            own_guid: Guid(0),
            up: false,
            pkey_tables: None,
            mcast: mcast::McastState::default(),
            mcast_due: None,
            election: election::Election::default(),
        }
    }

    /// Starts the first heavy sweep.
    pub fn start(&mut self, now: Nanos) {
        self.begin_heavy(now);
    }

    /// Asks for a sweep; a heavy sweep requested during one runs right after it. A standby
    /// (or disabled) SM does not sweep: the subnet is the master's.
    pub fn request_sweep(&mut self, now: Nanos, heavy: bool) {
        if matches!(
            self.election.state,
            sm_mad::sm_info::SmState::Standby | sm_mad::sm_info::SmState::NotActive
        ) {
            tracing::debug!(state = ?self.election.state, "sweep not requested of a non-master");
            return;
        }
        match self.phase {
            Phase::Idle => {
                if heavy {
                    self.begin_heavy(now)
                } else {
                    self.begin_light(now)
                }
            }
            _ => self.resweep |= heavy,
        }
    }

    /// The LID store (persist it on `Event::LidsChanged` and at shutdown).
    pub fn lid_store(&self) -> &LidStore {
        &self.lids
    }

    /// The fabric as the last heavy sweep found it, with LIDs.
    pub fn fabric(&self) -> Option<&Fabric> {
        self.fabric.as_ref()
    }

    /// The forwarding tables of the last heavy sweep.
    pub fn lfts(&self) -> Option<&Lfts> {
        self.lfts.as_ref()
    }

    /// Adaptive-routing hints of the last heavy sweep (when asked for), as their dump text.
    pub fn ar_hints(&self) -> Option<&str> {
        self.ar_hints.as_deref()
    }

    /// The SM's own LID (0 before the first sweep assigned it).
    pub fn own_lid(&self) -> Lid {
        self.own_lid
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

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.reqs.poll_transmit().or_else(|| self.sa_transmit())
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

    /// [`Sm::poll_transmit`] for a shell on a real clock: the request's deadline counts from
    /// `now`, when the shell hands it to the transport, so time the core spent computing
    /// (routing a large fabric) between queueing and sending is not charged to the fabric.
    pub fn poll_transmit_at(&mut self, now: Nanos) -> Option<Transmit> {
        self.reqs
            .poll_transmit_at(now)
            .or_else(|| self.sa_transmit())
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest time the core wants `handle_timeout`.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        [
            self.reqs.next_deadline(),
            self.next_light,
            self.next_heavy,
            self.mcast_due,
            self.election.next_poll,
            self.sa.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        self.sa.handle_timeout(now);
        self.mcast_batch(now);
        for purpose in self.reqs.expire(now) {
            tracing::debug!(?purpose, "SMP lost after retries");
            self.on_lost(now, purpose);
        }
        self.poll_master(now);
        if matches!(self.phase, Phase::Idle) && self.next_heavy.is_some_and(|t| t <= now) {
            self.next_heavy = None;
            self.begin_heavy(now);
        }
        if matches!(self.phase, Phase::Idle) && self.next_light.is_some_and(|t| t <= now) {
            self.next_light = None;
            self.begin_light(now);
        }
        self.advance(now);
    }

    /// A MAD from the fabric, with the LRH source LID (a GSI sender on QP1).
    pub fn handle_mad(&mut self, now: Nanos, slid: Lid, buf: &[u8]) {
        self.handle_mad_from(now, Requester::at(slid), buf);
    }

    /// A MAD from the fabric, with its sender's address as the transport reports it (the
    /// source QP matters to SA answers: they go back to it).
    pub fn handle_mad_from(&mut self, now: Nanos, from: Requester, buf: &[u8]) {
        let slid = from.lid;
        if buf.get(1) == Some(&MgmtClass::SubnAdm.to_raw_value()) {
            if self.election.state != sm_mad::sm_info::SmState::Master {
                // Only the master's SA serves (requesters find it through PortInfo.MasterSMLID).
                tracing::debug!("SA MAD to a non-master SM dropped");
                return;
            }
            // Subnet administration, whatever else is wrong with it: the SA answers.
            self.sa.set_act_count(self.reqs.counts.sent as u32);
            self.sa.handle_mad(now, from, buf);
            self.mcast_between_sweeps(now);
            return;
        }
        let Ok(hdr) = mad::Repr::parse(buf) else {
            tracing::debug!("dropping a MAD whose header does not parse");
            return;
        };
        match hdr.mgmt_class {
            MgmtClass::SubnLid | MgmtClass::SubnDirected => {}
            other => {
                tracing::trace!(class = ?other, "MAD of a class the SM does not serve yet");
                return;
            }
        }
        let Ok(s) = smp::Repr::parse(buf) else {
            tracing::debug!("dropping a malformed SMP");
            return;
        };
        match s.method {
            Method::GetResp => {
                if let Some(purpose) = self.reqs.complete(now, s.tid) {
                    tracing::trace!(tid = %s.tid, attr = s.attr_id, "answer");
                    self.on_answer(now, purpose, &s);
                }
            }
            Method::Trap => self.on_trap(now, slid, &s),
            Method::Get | Method::Set if s.attr_id == attr::SM_INFO => {
                self.on_sm_info_request(now, slid, &s)
            }
            _ => tracing::trace!(method = ?s.method, "SMP request not served"),
        }
        self.advance(now);
    }

    // ---------------------------------------------------------------------------------
    // Sweeps.

    fn begin_heavy(&mut self, now: Nanos) {
        self.reqs.clear();
        self.mcast.forget_in_flight();
        self.sweep += 1;
        self.heavy = true;
        self.resweep = false;
        self.next_light = None;
        self.next_heavy = None;
        self.started_at = now;
        self.phase_at = now;
        self.counts_at = self.reqs.counts;
        self.report = SweepReport {
            sweep: self.sweep,
            heavy: true,
            engine: self.p.routing.clone(),
            ..SweepReport::default()
        };
        self.events.push_back(Event::SweepStarted {
            sweep: self.sweep,
            heavy: true,
        });
        tracing::debug!(sweep = self.sweep, "heavy sweep");
        self.phase = Phase::Discover(Discovery::default());
        self.submit(
            now,
            Purpose::NodeInfo {
                path: Vec::new(),
                from: None,
            },
            attr::NODE_INFO,
            0,
            &[],
        );
    }

    fn begin_light(&mut self, now: Nanos) {
        let Some(f) = &self.fabric else {
            return self.begin_heavy(now);
        };
        self.phase = Phase::Light { changed: false };
        let switches: Vec<Lid> = f
            .switches()
            .filter_map(|n| f.port_of(n, 0))
            .map(|p| f.port(p).lid)
            .collect();
        for lid in switches {
            let tid = self.reqs.tid();
            let req = smp::Repr::request(Method::Get, tid, attr::SWITCH_INFO, 0, Route::Lid);
            if let Ok(b) = req.to_bytes() {
                self.reqs.submit(now, Purpose::LightSwitchInfo, lid, b);
            }
        }
        self.light_sm_checks(now);
    }

    fn submit(&mut self, now: Nanos, purpose: Purpose, attr_id: u16, attr_mod: u32, path: &[u8]) {
        self.submit_smp(now, purpose, Method::Get, attr_id, attr_mod, path, None);
    }

    #[allow(clippy::too_many_arguments)]
    fn submit_smp(
        &mut self,
        now: Nanos,
        purpose: Purpose,
        method: Method,
        attr_id: u16,
        attr_mod: u32,
        path: &[u8],
        data: Option<[u8; 64]>,
    ) {
        let retries = self.p.smp_retries;
        self.submit_dr(
            now,
            purpose,
            method,
            (attr_id, attr_mod),
            path,
            data,
            retries,
        );
    }

    /// A directed-route SMP with its own retry budget.
    #[allow(clippy::too_many_arguments)]
    fn submit_dr(
        &mut self,
        now: Nanos,
        purpose: Purpose,
        method: Method,
        (attr_id, attr_mod): (u16, u32),
        path: &[u8],
        data: Option<[u8; 64]>,
        retries: u32,
    ) {
        let Some(mut req) = dr(Tid(0), method, attr_id, attr_mod, path) else {
            self.report
                .errors
                .push(format!("directed route of {} hops is too long", path.len()));
            return;
        };
        req.m_key = self.p.m_key;
        if let Some(d) = data {
            req.data.0 = d;
        }
        match req.to_bytes() {
            Ok(b) => self
                .reqs
                .submit_with(now, purpose, Lid::PERMISSIVE, b, retries),
            Err(e) => self
                .report
                .errors
                .push(format!("cannot encode an SMP: {e}")),
        }
    }

    /// Sends planned Sets, each by its directed route.
    fn submit_sets(&mut self, now: Nanos, sets: Vec<PlannedSet>) {
        for (purpose, attr_id, attr_mod, path, data) in sets {
            self.submit_smp(
                now,
                purpose,
                Method::Set,
                attr_id,
                attr_mod,
                &path,
                Some(data),
            );
        }
    }

    fn on_lost(&mut self, now: Nanos, purpose: Purpose) {
        match purpose {
            Purpose::PollMaster => return self.on_poll(now, None),
            // A port may claim IsSM without an SM answering: no candidate, no error.
            Purpose::SmControl { to, .. } => return self.on_control_lost(to),
            Purpose::SmInfo { .. } | Purpose::LightSmInfo => return,
            _ => {}
        }
        if matches!(
            purpose,
            Purpose::SetMft { .. } | Purpose::SetMcastTop { .. }
        ) {
            self.on_mcast_answer(&purpose, false);
            if !matches!(self.phase, Phase::Program(_)) {
                return;
            }
        }
        let what = match &purpose {
            Purpose::NodeInfo { path, .. } => format!("NodeInfo via {path:?}"),
            Purpose::LightSwitchInfo => {
                // A switch that stops answering is a change worth a heavy sweep.
                if let Phase::Light { changed } = &mut self.phase {
                    *changed = true;
                }
                return;
            }
            other => format!("{other:?}"),
        };
        self.report.errors.push(format!("no answer: {what}"));
    }

    /// Moves to the next phase or stage once everything outstanding has come back.
    fn advance(&mut self, now: Nanos) {
        loop {
            if self.reqs.busy() > 0 {
                return;
            }
            match std::mem::replace(&mut self.phase, Phase::Idle) {
                Phase::Idle => {
                    self.phase = Phase::Idle;
                    return;
                }
                Phase::Light { changed } => {
                    if changed || self.resweep {
                        self.begin_heavy(now);
                    } else {
                        // Blocks lost since the last change go out again.
                        self.sync_mcast(now, false);
                        self.schedule_light(now);
                    }
                    continue;
                }
                Phase::Discover(d) => {
                    self.report.discovery_ns = now - self.phase_at;
                    self.phase_at = now;
                    if d.own.is_some() {
                        match self.elect(now, &d) {
                            election::Decision::Standby(m) => {
                                self.report.discovery_min = discovery_min(&d);
                                self.finish_standby(now, m);
                                continue;
                            }
                            election::Decision::Master => self.become_master(),
                        }
                    }
                    match self.plan(d) {
                        Ok(p) => {
                            self.phase = Phase::Program(p);
                            self.run_stage(now);
                        }
                        Err(e) => {
                            self.report.errors.push(e);
                            self.finish(now);
                        }
                    }
                    continue;
                }
                Phase::Program(mut p) => {
                    // PortInfo, SwitchInfo, LFT and tables do not depend on one another and
                    // go out together (one round trip of waiting instead of four); the port
                    // states need them all in place.
                    let next = match p.stage {
                        Stage::PortInfo | Stage::SwitchInfo | Stage::Lft | Stage::Tables => {
                            Some(Stage::Armed)
                        }
                        Stage::Armed => Some(Stage::Active),
                        Stage::Active => Some(Stage::Mcast),
                        Stage::Mcast => None,
                    };
                    match next {
                        Some(Stage::Mcast) => {
                            self.install_sa_db(now, &p);
                            self.remember_switches(&p);
                            p.stage = Stage::Mcast;
                            self.phase = Phase::Program(p);
                            self.sync_mcast(now, true);
                        }
                        Some(s) => {
                            p.stage = s;
                            self.phase = Phase::Program(p);
                            self.run_stage(now);
                        }
                        None => {
                            self.report.programming_ns = now - self.phase_at;
                            self.finish(now);
                        }
                    }
                    continue;
                }
            }
        }
    }

    fn schedule_light(&mut self, now: Nanos) {
        self.phase = Phase::Idle;
        if self.p.sweep_interval > 0 {
            self.next_light = Some(now + self.p.sweep_interval);
        }
    }

    fn finish(&mut self, now: Nanos) {
        let c = self.reqs.counts;
        let r = &mut self.report;
        r.mads_sent = c.sent - self.counts_at.sent;
        r.mads_min = r.discovery_min
            + r.port_info_sets
            + r.switch_info_sets
            + r.lft_blocks_sent
            + r.pkey_blocks_sent
            + r.qos_sets
            + r.mcast_sets;
        r.mads_retried = c.retried - self.counts_at.retried;
        r.mads_lost = c.lost - self.counts_at.lost;
        r.sweep_ns = now - self.started_at;
        r.subnet_up = r.errors.is_empty() && r.mads_lost == 0;
        r.sm_state = "master".into();
        if r.subnet_up {
            self.election.fresh = false;
        }
        self.up = r.subnet_up;
        if r.subnet_up {
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
        self.events
            .push_back(Event::SweepDone(Box::new(self.report.clone())));
        self.phase = Phase::Idle;
        if failed {
            // Back off so a fault that persists does not turn into a sweep storm.
            self.next_heavy = Some(now + self.p.retry_backoff);
        } else if self.resweep {
            self.begin_heavy(now);
        } else {
            self.schedule_light(now);
            // Joins and leaves that came during the sweep.
            self.sync_mcast(now, false);
        }
    }

    // ---------------------------------------------------------------------------------
    // Answers.

    fn on_answer(&mut self, now: Nanos, purpose: Purpose, s: &smp::Repr) {
        match purpose {
            Purpose::PollMaster => return self.on_poll(now, Some(s)),
            Purpose::SmControl { control, to } => {
                return self.on_control_answer(now, control, to, s);
            }
            Purpose::LightSmInfo => return self.on_light_sm_info(now, s),
            Purpose::SmInfo { node, port } => {
                if let (Phase::Discover(d), MadStatus::OK) = (&mut self.phase, s.status) {
                    Self::on_sm_info(d, node, port, s);
                }
                return;
            }
            _ => {}
        }
        if matches!(
            purpose,
            Purpose::SetMft { .. } | Purpose::SetMcastTop { .. }
        ) {
            self.on_mcast_answer(&purpose, s.status == MadStatus::OK);
            if s.status != MadStatus::OK && matches!(self.phase, Phase::Program(_)) {
                self.report
                    .errors
                    .push(format!("{:?}: status {:#06x}", purpose, s.status.0));
            }
            return;
        }
        if let (
            Purpose::SetPortInfo {
                node,
                port,
                armed: true,
            },
            Phase::Program(p),
        ) = (&purpose, &self.phase)
        {
            if s.status != MadStatus::OK {
                let again = p.disc.nodes.get(*node).and_then(|n| {
                    let path = n.route_to(*port)?.to_vec();
                    let data = settings_set(p.desired.get(&(*node, *port))?, false)?;
                    Some((path, data))
                });
                if let Some((path, data)) = again {
                    tracing::debug!(
                        node,
                        port,
                        status = s.status.0,
                        "settings with ARMED refused; sending them alone"
                    );
                    let purpose = Purpose::SetPortInfo {
                        node: *node,
                        port: *port,
                        armed: false,
                    };
                    self.submit_smp(
                        now,
                        purpose,
                        Method::Set,
                        attr::PORT_INFO,
                        u32::from(*port),
                        &path,
                        Some(data),
                    );
                    return;
                }
            }
        }
        if let (Purpose::SetPortState { node, port, want }, Phase::Program(p)) =
            (&purpose, &self.phase)
        {
            if s.status != MadStatus::OK {
                let path = p
                    .disc
                    .nodes
                    .get(*node)
                    .and_then(|n| n.route_to(*port))
                    .map(<[u8]>::to_vec);
                if let Some(path) = path {
                    let verify = Purpose::VerifyPortState {
                        node: *node,
                        port: *port,
                        want: *want,
                    };
                    self.submit(now, verify, attr::PORT_INFO, *port as u32, &path);
                    return;
                }
            }
        }
        if s.status != MadStatus::OK {
            self.report
                .errors
                .push(format!("{:?}: status {:#06x}", purpose, s.status.0));
            return;
        }
        match (&mut self.phase, purpose) {
            (Phase::Light { changed }, Purpose::LightSwitchInfo) => {
                if let Ok(si) = s.attribute::<switch_info::Repr>() {
                    *changed |= si.port_state_change;
                }
            }
            (Phase::Discover(_), p) => self.on_discovery(now, p, s),
            (Phase::Program(_), p) => self.on_programmed(p, s),
            _ => {}
        }
    }

    fn on_discovery(&mut self, now: Nanos, purpose: Purpose, s: &smp::Repr) {
        let Phase::Discover(d) = &mut self.phase else {
            return;
        };
        let mut follow: Vec<(Purpose, u16, u32, Vec<u8>)> = Vec::new();
        let mut sm_ask = None;
        match purpose {
            Purpose::NodeInfo { path, from } => {
                let Ok(info) = s.attribute::<node_info::Repr>() else {
                    return;
                };
                let lp = info.local_port_num;
                let idx = match d.by_guid.get(&info.node_guid) {
                    Some(&i) => i,
                    None => {
                        let i = d.nodes.len();
                        let n = info.num_ports as usize;
                        d.nodes.push(DNode {
                            info,
                            desc: String::new(),
                            switch_info: None,
                            path: path.clone(),
                            ports: vec![DPort::default(); n + 1],
                        });
                        d.by_guid.insert(info.node_guid, i);
                        follow.push((
                            Purpose::NodeDesc { node: i },
                            attr::NODE_DESCRIPTION,
                            0,
                            path.clone(),
                        ));
                        if info.node_type == node_info::NodeType::Switch {
                            follow.push((
                                Purpose::SwitchInfo { node: i },
                                attr::SWITCH_INFO,
                                0,
                                path.clone(),
                            ));
                            for p in 0..=info.num_ports {
                                follow.push((
                                    Purpose::PortInfo { node: i, port: p },
                                    attr::PORT_INFO,
                                    p as u32,
                                    path.clone(),
                                ));
                            }
                        }
                        i
                    }
                };
                let node = &mut d.nodes[idx];
                if !node.is_switch() {
                    if let Some(port) = node.ports.get_mut(lp as usize) {
                        if port.path.is_none() {
                            port.path = Some(path.clone());
                            port.guid = info.port_guid;
                            follow.push((
                                Purpose::PortInfo {
                                    node: idx,
                                    port: lp,
                                },
                                attr::PORT_INFO,
                                lp as u32,
                                path.clone(),
                            ));
                        }
                    }
                }
                if path.is_empty() {
                    d.own = Some((idx, lp));
                    d.own_guid = info.port_guid;
                    self.own_guid = info.port_guid;
                }
                if let Some((pn, pp)) = from {
                    link(d, (pn, pp), (idx, lp));
                }
            }
            Purpose::NodeDesc { node } => {
                if let (Ok(nd), Some(n)) = (
                    s.attribute::<node_description::Repr>(),
                    d.nodes.get_mut(node),
                ) {
                    n.desc = nd.as_string();
                }
            }
            Purpose::SwitchInfo { node } => {
                if let (Ok(si), Some(n)) =
                    (s.attribute::<switch_info::Repr>(), d.nodes.get_mut(node))
                {
                    n.switch_info = Some(si);
                }
            }
            Purpose::PortInfo { node, port } => {
                let Ok(pi) = s.attribute::<port_info::Repr>() else {
                    return;
                };
                let own = d.own;
                let Some(n) = d.nodes.get_mut(node) else {
                    return;
                };
                let is_switch = n.is_switch();
                let path = n.route_to(port).map(<[u8]>::to_vec);
                if let Some(slot) = n.ports.get_mut(port as usize) {
                    slot.info = Some(pi);
                    if is_switch {
                        slot.guid = n.info.node_guid;
                    }
                    let end = !is_switch || port == 0;
                    if end && Self::is_other_sm(&pi, own == Some((node, port))) {
                        if let Some(p) = &path {
                            sm_ask = Some((node, port, p.clone()));
                        }
                    }
                    let linked = pi.port_physical_state == PhysPortState::LinkUp && port != 0;
                    let explore =
                        linked && slot.peer.is_none() && (is_switch || own == Some((node, port)));
                    if explore {
                        if let Some(mut p) = path {
                            if p.len() < smp::MAX_HOPS as usize {
                                p.push(port);
                                follow.push((
                                    Purpose::NodeInfo {
                                        path: p.clone(),
                                        from: Some((node, port)),
                                    },
                                    attr::NODE_INFO,
                                    0,
                                    p,
                                ));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        if sm_ask.is_some() {
            d.sm_asks += 1;
        }
        for (purpose, attr_id, attr_mod, path) in follow {
            self.submit(now, purpose, attr_id, attr_mod, &path);
        }
        if let Some((node, port, path)) = sm_ask {
            self.ask_sm_info(now, node, port, &path);
        }
    }

    // ---------------------------------------------------------------------------------
    // From discovery to a plan.

    fn plan(&mut self, d: Discovery) -> Result<Box<Program>, String> {
        let Some((own_node, own_port)) = d.own else {
            return Err("the SM's own port did not answer".into());
        };
        // The model is built in GUID order so nothing depends on the order answers came in.
        let mut order: Vec<usize> = (0..d.nodes.len()).collect();
        order.sort_by_key(|&i| d.nodes[i].info.node_guid);
        let mut fabric = Fabric::new();
        let mut fidx = vec![sm_core::NodeIdx(0); d.nodes.len()];
        for &i in &order {
            let n = &d.nodes[i];
            let kind = match n.info.node_type {
                node_info::NodeType::Switch => NodeKind::Switch,
                node_info::NodeType::Router => NodeKind::Router,
                _ => NodeKind::Ca,
            };
            let port_guids = (kind != NodeKind::Switch).then(|| {
                (1..=n.info.num_ports)
                    .map(|p| {
                        let g = n.ports[p as usize].guid;
                        if g.0 != 0 {
                            g
                        } else {
                            Guid(n.info.node_guid.0.wrapping_add(p as u64))
                        }
                    })
                    .collect()
            });
            let spec = NodeSpec {
                kind,
                guid: n.info.node_guid,
                system_guid: n.info.system_image_guid,
                description: n.desc.clone(),
                num_ports: n.info.num_ports,
                vendor_id: n.info.vendor_id,
                device_id: n.info.device_id,
                revision: n.info.revision,
                enhanced_port0: n.switch_info.is_some_and(|s| s.enhanced_port0),
                port_guids,
            };
            fidx[i] = fabric
                .add_node(spec)
                .map_err(|e| format!("discovered fabric is inconsistent: {e}"))?;
        }
        for &i in &order {
            let n = &d.nodes[i];
            for (pn, dp) in n.ports.iter().enumerate() {
                if let Some((j, q)) = dp.peer {
                    if (i, pn as u8) < (j, q) {
                        if let (Some(a), Some(b)) = (
                            fabric.port_of(fidx[i], pn as u8),
                            fabric.port_of(fidx[j], q),
                        ) {
                            if let Err(e) = fabric.connect(a, b) {
                                tracing::warn!("ignoring a link: {e}");
                            }
                        }
                    }
                }
            }
            for (pn, dp) in n.ports.iter().enumerate() {
                let (Some(info), Some(p)) = (dp.info, fabric.port_of(fidx[i], pn as u8)) else {
                    continue;
                };
                let port = fabric.port_mut(p);
                port.lid = info.lid;
                port.lmc = info.lmc;
                port.state = info.port_state;
                port.phys_state = info.port_physical_state;
                port.width = info.link_width_active;
                port.speed = Speed {
                    speed: info.link_speed_active,
                    ext: info.link_speed_ext_active,
                    fdr10: false,
                };
                port.mtu_cap = info.mtu_cap.to_raw_value();
                port.vl_cap = info.vl_cap.to_raw_value();
            }
        }
        let counts = fabric.counts();
        self.report.nodes = counts.nodes;
        self.report.switches = counts.switches;
        self.report.cas = counts.cas;
        self.report.routers = counts.routers;
        self.report.links = counts.links;
        self.report.discovery_min = discovery_min(&d);

        // LIDs: the ports that answered; ports we could not read keep what they have.
        let before = self.lids.clone();
        self.lids
            .assign(&mut fabric, self.p.lmc)
            .map_err(|e| format!("LID assignment: {e}"))?;
        if self.lids != before {
            self.events.push_back(Event::LidsChanged);
        }

        let t0 = self.p.stopwatch.map(|f| f());
        let topo = Topo::new(&fabric).map_err(|e| format!("routing snapshot: {e}"))?;
        let mut opts = self.p.routing_options.clone();
        if self.p.sticky_routes {
            opts.previous = self
                .lfts
                .as_ref()
                .map(|l| std::sync::Arc::new(sm_routing::PreviousTables::from_lfts(l)));
        }
        // When every engine of the chain declines, minhop routes, as OpenSM falls back to
        // it: the subnet must come up with some tables.
        let chain = match sm_routing::route_chain(&self.p.routing, &topo, &opts) {
            Err(sm_routing::RouteError::ChainExhausted(why)) => {
                tracing::warn!(
                    "no engine of {} could route ({why}); using minhop",
                    self.p.routing
                );
                let mut r = sm_routing::route_chain("minhop", &topo, &opts)
                    .map_err(|e| format!("routing: {e}"))?;
                r.fallbacks.insert(
                    0,
                    sm_routing::engine::Fallback {
                        engine: "chain",
                        reason: why,
                    },
                );
                r
            }
            other => other.map_err(|e| format!("routing: {e}"))?,
        };
        if let (Some(t0), Some(f)) = (t0, self.p.stopwatch) {
            self.report.routing_ns = f().saturating_sub(t0);
        }
        self.report.engine_used = chain.routes.engine.to_string();
        self.report.fallbacks = chain
            .fallbacks
            .iter()
            .map(|f| format!("{}: {}", f.engine, f.reason))
            .collect();
        let max_lid = topo.max_lid();
        let mut lfts = HashMap::new();
        for (s, table) in chain.routes.lft.iter().enumerate() {
            let node = topo.switches[s];
            let guid = fabric.node(node).guid;
            if let Some(&di) = d.by_guid.get(&guid) {
                lfts.insert(di, table.clone());
            }
        }
        self.lfts = Some(chain.routes.to_lfts(&topo));
        self.ar_hints = chain.routes.ar.as_ref().map(|_| {
            let mut out = Vec::new();
            // Writing into memory cannot fail.
            let _ = sm_routing::ar::write_ar(&chain.routes, &topo, &mut out);
            String::from_utf8_lossy(&out).into_owned()
        });
        self.report.lids = topo.dests.iter().map(|d| 1usize << d.lmc).sum();

        // Desired PortInfo per port.
        let own_fp = fabric
            .port_of(fidx[own_node], own_port)
            .ok_or("the SM's own port is missing from the model")?;
        let own_lid = fabric.port(fabric.lid_port(own_fp)).lid;
        self.own_lid = own_lid;
        self.own_guid = fabric.port(own_fp).guid;
        // End ports that name another SM as master were programmed by it (while this SM
        // was cut off, say): what the switches hold is no longer what we last sent.
        let foreign = d.nodes.iter().any(|n| {
            n.ports.iter().enumerate().any(|(pn, dp)| {
                (!n.is_switch() || pn == 0)
                    && dp
                        .info
                        .is_some_and(|pi| pi.master_sm_lid.0 != 0 && pi.master_sm_lid != own_lid)
            })
        });
        if foreign && !self.lft_shadow.is_empty() {
            tracing::info!("ports name another SM as master: every table is sent again");
            self.forget_programmed();
        }
        let mut desired = HashMap::new();
        for (i, n) in d.nodes.iter().enumerate() {
            for (pn, dp) in n.ports.iter().enumerate() {
                let Some(cur) = dp.info else { continue };
                let Some(fp) = fabric.port_of(fidx[i], pn as u8) else {
                    continue;
                };
                let mut want = cur;
                let endport = !n.is_switch() || pn == 0;
                if endport {
                    let port = fabric.port(fp);
                    want.lid = port.lid;
                    want.lmc = port.lmc;
                    want.master_sm_lid = own_lid;
                    want.gid_prefix = self.p.subnet_prefix;
                    want.m_key = self.p.m_key;
                    want.subnet_timeout = self.p.subnet_timeout;
                }
                if let Some((j, q)) = dp.peer {
                    if let Some(peer) = d
                        .nodes
                        .get(j)
                        .and_then(|m| m.ports.get(q as usize))
                        .and_then(|p| p.info)
                    {
                        let mtu = cur.mtu_cap.to_raw_value().min(peer.mtu_cap.to_raw_value());
                        want.neighbor_mtu = Mtu::from_raw_value(mtu);
                        let vls = cur
                            .vl_cap
                            .to_raw_value()
                            .min(peer.vl_cap.to_raw_value())
                            .min(self.p.max_op_vls)
                            .max(1);
                        want.operational_vls = VlCap::from_raw_value(vls);
                        if n.is_switch() {
                            let peer_is_switch = d.nodes.get(j).is_some_and(DNode::is_switch);
                            want.hoq_life = if peer_is_switch {
                                self.p.hoq_life
                            } else {
                                self.p.leaf_hoq_life
                            };
                        }
                    }
                }
                desired.insert((i, pn as u8), want);
            }
        }
        let tables = self.plan_tables(&d, &fabric, &fidx, own_fp, &mut desired);
        self.fabric = Some(fabric);
        Ok(Box::new(Program {
            disc: d,
            stage: Stage::PortInfo,
            max_lid,
            lfts,
            desired,
            tables,
        }))
    }

    /// P_Key tables from the partitions, and SL-to-VL / VL arbitration tables from QoS,
    /// per port; the PortInfo bits that go with them are added to `desired`.
    fn plan_tables(
        &mut self,
        d: &Discovery,
        fabric: &Fabric,
        fidx: &[sm_core::NodeIdx],
        own: sm_core::PortIdx,
        desired: &mut HashMap<(usize, u8), port_info::Repr>,
    ) -> Vec<(usize, u8, u16, u32, [u8; 64])> {
        let mut didx = vec![usize::MAX; fabric.nodes().len()];
        for (i, f) in fidx.iter().enumerate() {
            didx[f.idx()] = i;
        }
        // A node that lost its LIDs has lost its tables too.
        for n in &d.nodes {
            let guid = n.info.node_guid;
            let reset = n.ports.iter().enumerate().any(|(pn, dp)| {
                let endport = !n.is_switch() || pn == 0;
                endport && dp.info.is_some_and(|i| i.lid.0 == 0)
            });
            if reset {
                self.table_shadow.retain(|k, _| k.0 != guid);
            }
        }
        let mut out = Vec::new();
        let parts = pkey_tables_with(
            &self.p.partitions,
            fabric,
            fabric.port(own).guid,
            &self.p.pkey_options,
        );
        for (list, external) in [(&parts.end_ports, false), (&parts.switch_ports, true)] {
            for pk in list {
                let i = didx[fabric.port(pk.port).node.idx()];
                let Some(n) = d.nodes.get(i) else { continue };
                let cap = if external {
                    n.switch_info.map_or(0, |s| s.partition_enforcement_cap)
                } else {
                    n.info.partition_cap
                };
                let (blocks, dropped) = pk.blocks(cap);
                if !dropped.is_empty() {
                    tracing::warn!(
                        node = %n.info.node_guid,
                        port = pk.num,
                        dropped = dropped.len(),
                        "P_Key table larger than the port holds"
                    );
                    if external {
                        // As OpenSM does: no enforcement where the table does not fit.
                        continue;
                    }
                }
                for (b, block) in blocks.iter().enumerate() {
                    let port_bits = if n.is_switch() {
                        (pk.num as u32) << 16
                    } else {
                        0
                    };
                    if let Some(data) = emit_data(block) {
                        out.push((i, pk.num, attr::P_KEY_TABLE, b as u32 | port_bits, data));
                    }
                }
                if external {
                    if let Some(w) = desired.get_mut(&(i, pk.num)) {
                        let (inb, outb) = parts.enforcement.bits();
                        w.partition_enforcement_inbound = inb;
                        w.partition_enforcement_outbound = outb;
                    }
                }
            }
        }
        self.pkey_tables = Some(parts);
        if !self.p.qos.enabled {
            return out;
        }
        for (i, n) in d.nodes.iter().enumerate() {
            let linked: Vec<u8> = (1..n.ports.len() as u8)
                .filter(|&pn| n.ports[pn as usize].peer.is_some())
                .collect();
            for &o in &linked {
                let Some(w) = desired.get_mut(&(i, o)) else {
                    continue;
                };
                let kind = match n.info.node_type {
                    node_info::NodeType::Switch => PortKind::SwitchExternal,
                    node_info::NodeType::Router => PortKind::Router,
                    _ => PortKind::Ca,
                };
                let t = qos::tables(&self.p.qos, kind, w.operational_vls);
                w.vl_high_limit = t.high_limit;
                let sl2vl = sl2vl::Repr::new(t.sl2vl);
                if let Some(data) = emit_data(&sl2vl) {
                    if n.is_switch() {
                        for &ii in &linked {
                            out.push((
                                i,
                                o,
                                attr::SL_TO_VL_MAPPING_TABLE,
                                ((ii as u32) << 8) | o as u32,
                                data,
                            ));
                        }
                    } else {
                        out.push((i, o, attr::SL_TO_VL_MAPPING_TABLE, 0, data));
                    }
                }
                if qos::QosTables::needs_vlarb(w.vl_cap) {
                    for block in vl_arb::Block::ALL {
                        let Some(r) = t.vlarb_block(
                            block,
                            w.vl_arbitration_low_cap,
                            w.vl_arbitration_high_cap,
                        ) else {
                            continue;
                        };
                        let port_bits = if n.is_switch() { o as u32 } else { 0 };
                        let m = vl_arb::Modifier::switch_port(PortNum(port_bits as u8), block);
                        if let Some(data) = emit_data(&r) {
                            out.push((i, o, attr::VL_ARBITRATION_TABLE, m.to_attr_mod(), data));
                        }
                    }
                }
            }
        }
        out
    }

    // ---------------------------------------------------------------------------------
    // Programming.

    fn run_stage(&mut self, now: Nanos) {
        let Phase::Program(p) = &mut self.phase else {
            return;
        };
        let mut sends: Vec<PlannedSet> = Vec::new();
        let mut counts = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
        let fresh = self.election.fresh;
        let mut reregs = 0u64;
        // SwitchInfo comes before the LFT: it is where a switch that lost its tables is noticed.
        let parts: &[Stage] = match p.stage {
            Stage::PortInfo => &[
                Stage::PortInfo,
                Stage::SwitchInfo,
                Stage::Lft,
                Stage::Tables,
            ],
            Stage::SwitchInfo => &[Stage::SwitchInfo],
            Stage::Lft => &[Stage::Lft],
            Stage::Tables => &[Stage::Tables],
            Stage::Armed => &[Stage::Armed],
            Stage::Active => &[Stage::Active],
            Stage::Mcast => &[],
        };
        for &part in parts {
            match part {
                Stage::PortInfo => {
                    let mut keys: Vec<&(usize, u8)> = p.desired.keys().collect();
                    keys.sort();
                    for &(i, pn) in keys {
                        let n = &p.disc.nodes[i];
                        let (Some(cur), Some(want)) =
                            (n.ports[pn as usize].info, p.desired.get(&(i, pn)))
                        else {
                            continue;
                        };
                        let rereg = fresh
                            && (!n.is_switch() || pn == 0)
                            && cur.capability_mask
                                & port_info::cap::IS_CLIENT_REREGISTRATION_SUPPORTED
                                != 0;
                        if same_settings(&cur, want) && !rereg {
                            continue;
                        }
                        let Some(path) = n.route_to(pn) else { continue };
                        let want = &port_info::Repr {
                            client_reregister: rereg,
                            ..*want
                        };
                        // A linked port still in INIT goes to ARMED with its settings.
                        let armed = cur.port_state == PortState::Init
                            && n.ports[pn as usize].peer.is_some()
                            && !(n.is_switch() && pn == 0);
                        if let Some(data) = settings_set(want, armed) {
                            counts.0 += 1;
                            reregs += u64::from(rereg);
                            if armed {
                                counts.6 += 1;
                            }
                            sends.push((
                                Purpose::SetPortInfo {
                                    node: i,
                                    port: pn,
                                    armed,
                                },
                                attr::PORT_INFO,
                                pn as u32,
                                path.to_vec(),
                                data,
                            ));
                        }
                    }
                }
                Stage::SwitchInfo => {
                    for (i, n) in p.disc.nodes.iter().enumerate() {
                        let Some(mut si) = n.switch_info else {
                            continue;
                        };
                        // A switch whose LinearFDBTop is not what we set has lost its tables.
                        let guid = n.info.node_guid;
                        if self.top_shadow.get(&guid) != Some(&si.linear_fdb_top) {
                            self.lft_shadow.remove(&guid);
                            self.table_shadow.retain(|k, _| k.0 != guid);
                            self.mcast.forget(guid);
                        }
                        // MulticastFDBTop goes with it, as the groups last stood (the
                        // multicast stage sends it again only if the trees moved it).
                        let has_top = self.p.sa.mcast_top
                            && n.ports.first().and_then(|d| d.info).is_some_and(|pi| {
                                pi.capability_mask & port_info::cap::IS_MULTICAST_FDB_TOP_SUPPORTED
                                    != 0
                            });
                        let mtop = self.mcast.top_for(guid);
                        if si.linear_fdb_top == p.max_lid
                            && si.life_time_value == self.p.switch_life_time
                            && !si.port_state_change
                            && self.top_shadow.get(&guid) == Some(&p.max_lid)
                            && (!has_top || si.multicast_fdb_top == mtop)
                        {
                            continue;
                        }
                        if has_top {
                            si.multicast_fdb_top = mtop;
                        }
                        si.linear_fdb_top = p.max_lid;
                        si.life_time_value = self.p.switch_life_time;
                        si.port_state_change = true;
                        let mut data = [0u8; 64];
                        if si.emit(&mut data).is_ok() {
                            counts.1 += 1;
                            sends.push((
                                Purpose::SetSwitchInfo { node: i },
                                attr::SWITCH_INFO,
                                0,
                                n.path.clone(),
                                data,
                            ));
                        }
                    }
                }
                Stage::Lft => {
                    let mut nodes: Vec<&usize> = p.lfts.keys().collect();
                    nodes.sort();
                    for &i in nodes {
                        let n = &p.disc.nodes[i];
                        let table = &p.lfts[&i];
                        let shadow = self.lft_shadow.get(&n.info.node_guid);
                        for (b, chunk) in table.chunks(lft::ENTRIES).enumerate() {
                            let mut block = [lft::NO_ROUTE.0; 64];
                            block[..chunk.len()].copy_from_slice(chunk);
                            let held = shadow.and_then(|s| s.get(b * 64..b * 64 + 64));
                            if held == Some(&block[..]) {
                                continue;
                            }
                            counts.2 += 1;
                            sends.push((
                                Purpose::SetLft {
                                    node: i,
                                    block: b as u16,
                                    data: block,
                                },
                                attr::LINEAR_FORWARDING_TABLE,
                                b as u32,
                                n.path.clone(),
                                block,
                            ));
                        }
                    }
                }
                Stage::Tables => {
                    for &(i, port, attr_id, attr_mod, data) in &p.tables {
                        let n = &p.disc.nodes[i];
                        let key = (n.info.node_guid, port, attr_id, attr_mod);
                        if self.table_shadow.get(&key) == Some(&data) {
                            continue;
                        }
                        let Some(path) = n.route_to(port) else {
                            continue;
                        };
                        if attr_id == attr::P_KEY_TABLE {
                            counts.4 += 1;
                        } else {
                            counts.5 += 1;
                        }
                        sends.push((
                            Purpose::SetTable { key, data },
                            attr_id,
                            attr_mod,
                            path.to_vec(),
                            data,
                        ));
                    }
                }
                Stage::Mcast => {}
                Stage::Armed | Stage::Active => {
                    let (from, to) = if part == Stage::Armed {
                        (PortState::Init, PortState::Armed)
                    } else {
                        (PortState::Armed, PortState::Active)
                    };
                    for (i, n) in p.disc.nodes.iter().enumerate() {
                        for (pn, dp) in n.ports.iter().enumerate() {
                            let Some(cur) = dp.info else { continue };
                            if pn == 0 || dp.peer.is_none() || cur.port_state != from {
                                continue;
                            }
                            let Some(path) = n.route_to(pn as u8) else {
                                continue;
                            };
                            let set = port_info::Repr {
                                port_state: to,
                                // Everything else "no change" or the values we already set.
                                ..state_only(&cur)
                            };
                            let mut data = [0u8; 64];
                            if set.emit(&mut data).is_ok() {
                                counts.3 += 1;
                                sends.push((
                                    Purpose::SetPortState {
                                        node: i,
                                        port: pn as u8,
                                        want: to,
                                    },
                                    attr::PORT_INFO,
                                    pn as u32,
                                    path.to_vec(),
                                    data,
                                ));
                            }
                        }
                    }
                }
            }
        }
        self.report.port_info_sets += counts.0 + counts.3;
        self.report.client_reregisters += reregs;
        self.report.switch_info_sets += counts.1;
        self.report.lft_blocks_sent += counts.2;
        self.report.port_state_sets += counts.3;
        self.report.merged_armed += counts.6;
        self.report.pkey_blocks_sent += counts.4;
        self.report.qos_sets += counts.5;
        self.submit_sets(now, sends);
    }

    fn on_programmed(&mut self, purpose: Purpose, s: &smp::Repr) {
        let Phase::Program(p) = &mut self.phase else {
            return;
        };
        match purpose {
            Purpose::VerifyPortState { node, port, want } => {
                let got = s.attribute::<port_info::Repr>().ok();
                if let (Some(pi), Some(slot)) = (
                    got,
                    p.disc
                        .nodes
                        .get_mut(node)
                        .and_then(|n| n.ports.get_mut(port as usize)),
                ) {
                    slot.info = Some(pi);
                }
                if got.map(|pi| pi.port_state) != Some(want) {
                    self.report.errors.push(format!(
                        "port {port} of node {node}: refused the move to {want:?} and is not there"
                    ));
                }
            }
            Purpose::SetPortInfo { node, port, .. } | Purpose::SetPortState { node, port, .. } => {
                if let (Ok(pi), Some(slot)) = (
                    s.attribute::<port_info::Repr>(),
                    p.disc
                        .nodes
                        .get_mut(node)
                        .and_then(|n| n.ports.get_mut(port as usize)),
                ) {
                    slot.info = Some(pi);
                }
            }
            Purpose::SetSwitchInfo { node } => {
                if let (Ok(si), Some(n)) = (
                    s.attribute::<switch_info::Repr>(),
                    p.disc.nodes.get_mut(node),
                ) {
                    self.top_shadow.insert(n.info.node_guid, si.linear_fdb_top);
                    n.switch_info = Some(si);
                }
            }
            Purpose::SetTable { key, data } => {
                self.table_shadow.insert(key, data);
            }
            Purpose::SetLft { node, block, data } => {
                if let Some(n) = p.disc.nodes.get(node) {
                    let s = self.lft_shadow.entry(n.info.node_guid).or_default();
                    let end = (block as usize + 1) * 64;
                    if s.len() < end {
                        s.resize(end, lft::NO_ROUTE.0);
                    }
                    s[end - 64..end].copy_from_slice(&data);
                }
            }
            _ => {}
        }
    }

    // ---------------------------------------------------------------------------------
    // The SA's snapshot.

    /// Hands the SA a snapshot of the subnet as this sweep left it: the model, the tables,
    /// and every attribute as the nodes last reported it (see [`sa::Db`]).
    fn install_sa_db(&mut self, now: Nanos, p: &Program) {
        let (Some(f), Some(lfts)) = (&self.fabric, &self.lfts) else {
            return;
        };
        let empty = PKeyTables::default();
        let params = sa::DbParams {
            subnet_prefix: self.p.subnet_prefix,
            sm_port_guid: self.own_guid,
            sm_lid: self.own_lid,
            sm_priority: self.p.sm_priority,
            sm_state: sm_mad::sm_info::SmState::Master,
            subnet_timeout: self.p.subnet_timeout,
            lmc: self.p.lmc,
            qos: self.p.qos.enabled,
        };
        let mut db = sa::Db::build(f, lfts, self.pkey_tables.as_ref().unwrap_or(&empty), params);
        db.set_remote_sms(self.remote_sm_infos());
        for (i, n) in f.nodes().iter().enumerate() {
            let Some(dn) = p
                .disc
                .by_guid
                .get(&n.guid)
                .and_then(|&d| p.disc.nodes.get(d))
            else {
                continue;
            };
            let idx = sm_core::NodeIdx(i as u32);
            db.set_node_info(idx, dn.info, &dn.desc);
            if let Some(si) = dn.switch_info {
                db.set_switch_info(idx, si);
            }
            for (pn, dp) in dn.ports.iter().enumerate() {
                if let (Some(pi), Some(fp)) = (dp.info, f.port_of(idx, pn as u8)) {
                    db.set_port_info(fp, pi);
                }
            }
        }
        for &(i, port, attr_id, attr_mod, data) in &p.tables {
            let Some(dn) = p.disc.nodes.get(i) else {
                continue;
            };
            let Some(fp) = f
                .node_by_guid(dn.info.node_guid)
                .and_then(|n| f.port_of(n, port))
            else {
                continue;
            };
            match attr_id {
                attr::SL_TO_VL_MAPPING_TABLE => {
                    let inp = if dn.is_switch() {
                        (attr_mod >> 8) as u8
                    } else {
                        0
                    };
                    if let Ok(t) = sl2vl::Repr::parse(&data) {
                        db.set_sl2vl(fp, inp, t);
                    }
                }
                attr::VL_ARBITRATION_TABLE => {
                    if let Ok(t) = vl_arb::Repr::parse(&data) {
                        db.set_vlarb(fp, (attr_mod >> 16) as u8, t);
                    }
                }
                _ => {}
            }
        }
        for part in &self.p.partitions.partitions {
            db.set_partition_sl(part.pkey, part.effective_sl(self.p.qos.enabled).0);
        }
        self.sa.install(now, db.finish(), &self.p.partitions);
    }

    /// Keeps each switch's route and SwitchInfo for multicast changes between sweeps.
    fn remember_switches(&mut self, p: &Program) {
        self.mcast.switches.clear();
        for n in &p.disc.nodes {
            let Some(si) = n.switch_info else { continue };
            let port0 = n.ports.first().and_then(|d| d.info.as_ref());
            let guid = n.info.node_guid;
            self.mcast.switches.insert(
                guid,
                mcast::switch_addr(&n.path, si, n.info.num_ports, port0),
            );
            // What the switch reported is what it holds, until we set it.
            if !self.mcast.in_flight.contains_key(&guid) {
                self.mcast.top_sent.insert(guid, si.multicast_fdb_top);
            }
        }
    }

    /// After an SA request: a join or leave that changed a tree is programmed shortly
    /// ([`MCAST_BATCH`]: the joins of a burst, a whole IPoIB start-up, share one
    /// recomputation), unless a heavy sweep is under way (it recomputes every group at its
    /// end).
    fn mcast_between_sweeps(&mut self, now: Nanos) {
        if self.mcast_due.is_none() && self.sa.has_mcast_changes() {
            self.mcast_due = Some(now.saturating_add(MCAST_BATCH));
        }
    }

    /// The batch of joins and leaves is due.
    fn mcast_batch(&mut self, now: Nanos) {
        if self.mcast_due.is_some_and(|t| t <= now) {
            self.mcast_due = None;
            if matches!(self.phase, Phase::Idle | Phase::Light { .. }) && self.up {
                self.sync_mcast(now, false);
            }
        }
    }

    // ---------------------------------------------------------------------------------
    // Traps.

    fn on_trap(&mut self, now: Nanos, slid: Lid, s: &smp::Repr) {
        if s.attr_id != attr::NOTICE {
            return;
        }
        let trap_number = match s.attribute::<notice::Repr>() {
            Ok(n) => match n.kind {
                notice::Kind::Generic { trap, .. } => trap.number(),
                notice::Kind::Vendor { .. } => 0,
            },
            Err(_) => 0,
        };
        // Repress first, so the issuer stops repeating.
        if let Ok(mut r) = notice::trap_repress(s) {
            r.m_key = self.p.m_key;
            if let Ok(b) = r.to_bytes() {
                let dlid = if matches!(s.route, Route::Lid) {
                    slid
                } else {
                    Lid::PERMISSIVE
                };
                self.reqs.send_unsolicited(dlid, b);
            }
        }
        tracing::info!(issuer = %slid, trap_number, "trap");
        if let Ok(n) = s.attribute::<notice::Repr>() {
            self.sa.report_trap(now, slid, s.tid, n);
        }
        self.events.push_back(Event::Trap {
            issuer: slid,
            trap_number,
        });
        // 144: a port's capabilities changed, IsSM among them (an SM started, or a standby
        // with a higher priority asks to be handed the subnet).
        if trap_number == notice::trap::LINK_STATE_CHANGE || trap_number == 144 || trap_number == 0
        {
            self.request_sweep(now, true);
        }
    }
}

/// The fewest SMPs that find what `d` found: a NodeInfo through every link (the one that
/// tells what is at its far end) plus the SM's own, a NodeDescription per node, a
/// SwitchInfo per switch, a PortInfo per switch port (port 0 included: which ones are
/// linked is what it tells) and per linked CA or router port.
fn discovery_min(d: &Discovery) -> u64 {
    let mut ends = 0u64;
    let mut ports = 0u64;
    for n in &d.nodes {
        let linked = n.ports.iter().filter(|p| p.peer.is_some()).count() as u64;
        ends += linked;
        ports += if n.is_switch() {
            u64::from(n.info.num_ports) + 1
        } else {
            linked
        };
    }
    let nodes = d.nodes.len() as u64;
    let switches = d.nodes.iter().filter(|n| n.is_switch()).count() as u64;
    ends / 2 + 1 + nodes + switches + ports + d.sm_asks
}

/// The PortInfo Set that gives a port the settings of `want` (and moves it from INIT to
/// ARMED with `armed`); everything that is not ours to change is "no change" or zero.
fn settings_set(want: &port_info::Repr, armed: bool) -> Option<[u8; 64]> {
    let mut set = *want;
    set.port_state = if armed {
        PortState::Armed
    } else {
        PortState::NoChange
    };
    set.port_physical_state = PhysPortState::NoChange;
    set.link_width_enabled = 0;
    set.link_speed_enabled = 0;
    set.link_down_default_state = port_info::LinkDownDefaultState::from_raw_value(0);
    let mut data = [0u8; 64];
    set.emit(&mut data).ok()?;
    Some(data)
}

/// An attribute as SMP data.
fn emit_data<W: sm_mad::Wire>(w: &W) -> Option<[u8; 64]> {
    let mut data = [0u8; 64];
    w.emit(&mut data).ok().map(|_| data)
}

/// Records a link on both ends.
fn link(d: &mut Discovery, a: (usize, u8), b: (usize, u8)) {
    for (x, y) in [(a, b), (b, a)] {
        if let Some(p) = d
            .nodes
            .get_mut(x.0)
            .and_then(|n| n.ports.get_mut(x.1 as usize))
        {
            match p.peer {
                Some(existing) if existing != y => {
                    tracing::warn!(?x, ?existing, new = ?y, "port seen linked to two places; keeping the first")
                }
                _ => p.peer = Some(y),
            }
        }
    }
}

/// The writable settings the SM cares about are already in place.
fn same_settings(cur: &port_info::Repr, want: &port_info::Repr) -> bool {
    cur.lid == want.lid
        && cur.lmc == want.lmc
        && cur.master_sm_lid == want.master_sm_lid
        && cur.gid_prefix == want.gid_prefix
        && cur.m_key == want.m_key
        && cur.subnet_timeout == want.subnet_timeout
        && cur.neighbor_mtu == want.neighbor_mtu
        && cur.operational_vls == want.operational_vls
        && cur.partition_enforcement_inbound == want.partition_enforcement_inbound
        && cur.partition_enforcement_outbound == want.partition_enforcement_outbound
        && cur.vl_high_limit == want.vl_high_limit
        && cur.hoq_life == want.hoq_life
}

/// A PortInfo Set that changes nothing but what the caller overrides.
///
/// OperationalVLs and NeighborMTU repeat the port's current values rather than 0: ibsim
/// stores OperationalVLs as given (0 would switch the port's VLs off), and 0 is not a valid
/// NeighborMTU.
fn state_only(cur: &port_info::Repr) -> port_info::Repr {
    port_info::Repr {
        port_state: PortState::NoChange,
        port_physical_state: PhysPortState::NoChange,
        link_width_enabled: 0,
        link_speed_enabled: 0,
        link_down_default_state: port_info::LinkDownDefaultState::from_raw_value(0),
        ..*cur
    }
}
