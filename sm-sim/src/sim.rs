//! The simulated fabric: MADs move between endpoints (SMs, SA clients) and the nodes' agents
//! by directed route or through the programmed forwarding tables, in virtual time. Nothing
//! here reads a clock or spawns a thread; the same inputs and seed give the same run.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx};
use sm_core::generate::SplitMix64;
use sm_mad::port_info::{self, PhysPortState, PortState, link_width};
use sm_mad::smp::{self, Route};
use sm_mad::{Lid, Method, MgmtClass, Tid, attr, mad, notice};

use crate::Fault;
use crate::sma::{Agent, Effect, owns_lid};
use crate::state::{self, SimNode, SimPort};

/// Virtual time in nanoseconds.
pub type Nanos = u64;

/// Maximum switch hops before a LID-routed packet counts as looping.
pub const MAX_HOPS: u32 = 64;

/// Fault injection (seeded). In [`SimConfig::faults`] it applies once to every MAD end to
/// end; set on a link ([`Sim::set_link_faults`]) it applies to each crossing of that link;
/// set on a node ([`Sim::set_node_faults`]) to every SMP its agent receives or sends.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Faults {
    /// Probability that a MAD is lost on its way (each direction separately).
    pub loss: f64,
    /// Probability that a MAD is delivered twice.
    pub duplicate: f64,
    /// Probability that a MAD is held back by up to `jitter_ns`, so later ones overtake it.
    pub reorder: f64,
    /// The largest extra delay of a held-back MAD.
    pub jitter_ns: Nanos,
    /// A fixed extra delay.
    pub delay_ns: Nanos,
}

impl Faults {
    /// No fault at all.
    pub fn is_none(&self) -> bool {
        *self == Faults::default()
    }
}

/// The faults met along one transmission, combined: each link or node crossed adds its
/// own chances (independent), delays add up, the longest hold-back counts.
#[derive(Debug, Clone)]
pub(crate) struct Hazard {
    keep: f64,
    single: f64,
    in_order: f64,
    jitter: Nanos,
    delay: Nanos,
    any: bool,
    /// The ports the MAD left by, in order, when its traffic is to be counted in the
    /// ports' PortCounters (not for the tracer's walks).
    trail: Option<Vec<PortIdx>>,
}

impl Hazard {
    pub(crate) const NONE: Hazard = Hazard {
        keep: 1.0,
        single: 1.0,
        in_order: 1.0,
        jitter: 0,
        delay: 0,
        any: false,
        trail: None,
    };

    #[inline]
    pub(crate) fn add(&mut self, f: &Faults) {
        self.keep *= 1.0 - f.loss.clamp(0.0, 1.0);
        self.single *= 1.0 - f.duplicate.clamp(0.0, 1.0);
        self.in_order *= 1.0 - f.reorder.clamp(0.0, 1.0);
        self.jitter = self.jitter.max(f.jitter_ns);
        self.delay = self.delay.saturating_add(f.delay_ns);
        self.any = true;
    }
}

/// The copies fault injection lets through, with the extra delay of each.
#[derive(Debug, Clone, Copy)]
struct Copies {
    n: usize,
    extra: [Nanos; 2],
}

impl Copies {
    fn iter(&self) -> impl Iterator<Item = Nanos> + '_ {
        self.extra[..self.n].iter().copied()
    }
}

/// Timing and fault settings.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    pub seed: u64,
    /// Time to cross one link.
    pub hop_ns: Nanos,
    /// Time an agent takes to answer.
    pub sma_ns: Nanos,
    /// Interval between repeats of an unrepressed trap.
    pub trap_interval_ns: Nanos,
    pub faults: Faults,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            hop_ns: 200,
            sma_ns: 1_000,
            trap_interval_ns: 10_000_000,
            faults: Faults::default(),
        }
    }
}

/// A place MADs enter and leave the fabric: an SM or an SA client on an end port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointId(pub u32);

/// A MAD delivered to an endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    pub at: Nanos,
    /// Source LID from the packet's LRH: the sender's LID when LID-routed; for directed
    /// route the permissive LID, or the LID of the switch that ended the directed part
    /// when a LID-routed part followed it. [`Sim::reply`] answers to it.
    pub slid: Lid,
    pub mad: [u8; 256],
}

/// Why a MAD died in the fabric (counted, and logged at trace level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Drop {
    /// The MAD is not a well-formed MAD of a class the fabric carries.
    Malformed,
    /// A directed route named a port that does not exist or is not linked.
    BadPath,
    /// A directed route asked a CA to forward.
    NotASwitch,
    /// No forwarding table entry (or beyond LinearFDBTop).
    NoRoute,
    /// A link on the way is down or not in a state that carries the packet.
    LinkDown,
    /// The packet reached an end port that does not own the destination LID.
    WrongLid,
    /// LID-routed packet went round in circles.
    Loop,
    /// No endpoint listens where the MAD arrived.
    NoListener,
    /// Fault injection, a silent node, or a node that is down.
    Injected,
    /// An SMP without the M_Key its target port requires (IBA 14.2.4).
    BadMKey,
}

/// Counters of what the fabric did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SimStats {
    pub sent: u64,
    pub agent_requests: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub traps_sent: u64,
}

#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// A request reaches a node's agent on `port` (port index of arrival).
    AtAgent {
        port: PortIdx,
        mad: [u8; 256],
        /// The LRH source LID: the requester's, for a LID-routed answer.
        slid: Lid,
        /// Where the directed part ended when a LID-routed part followed.
        dr_end: Option<PortIdx>,
    },
    Deliver {
        ep: EndpointId,
        msg: Inbound,
    },
    TrapTimer {
        node: NodeIdx,
    },
    /// The M_Key lease of the port (CA port or switch port 0) runs out.
    LeaseExpiry {
        port: PortIdx,
        generation: u32,
    },
    /// A scheduled fault.
    Fault(Fault),
    /// A rebooting node comes back.
    PowerUp {
        node: NodeIdx,
    },
}

/// A queue entry: the event itself waits in the slab, so heap moves stay small.
#[derive(Debug)]
struct Queued {
    at: Nanos,
    seq: u64,
    slot: u32,
}
impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

#[derive(Debug)]
struct Endpoint {
    port: PortIdx,
    inbox: VecDeque<Inbound>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct PendingTrap {
    tid: u64,
}

/// Why `send` refused a MAD outright.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    #[error("unknown endpoint {0:?}")]
    UnknownEndpoint(EndpointId),
    #[error("a MAD is 256 bytes, got {0}")]
    BadLength(usize),
}

/// The simulated fabric.
#[derive(Debug)]
pub struct Sim {
    pub(crate) nodes: Vec<SimNode>,
    pub(crate) ports: Vec<SimPort>,
    pub(crate) cfg: SimConfig,
    pub(crate) rng: SplitMix64,
    seq: u64,
    pub(crate) now: Nanos,
    queue: BinaryHeap<Reverse<Queued>>,
    /// The events the queue refers to, by slot; `free` lists the empty slots.
    slab: Vec<Option<Event>>,
    free: Vec<u32>,
    endpoints: Vec<Endpoint>,
    /// Endpoint per port index (`u32::MAX` = none).
    ep_at: Vec<u32>,
    /// Endpoints that take the responses of one management class at a port (port, class,
    /// endpoint), as a kernel hands an agent the responses to what it sent.
    clients: Vec<(PortIdx, u8, u32)>,
    pub(crate) traps: Vec<Option<PendingTrap>>,
    pub(crate) trap_tid: u64,
    pub(crate) stats: SimStats,
    /// SMs a scenario started or stopped, for the driver to act on.
    pub(crate) sm_events: VecDeque<SmEvent>,
    /// Kept between transmissions for [`Hazard::trail`], so that counting allocates once.
    trail_buf: Vec<PortIdx>,
    pub(crate) probes: Vec<crate::probe::Probe>,
    /// Faults carried out so far (scheduled ones as they happen, power-ups included).
    pub(crate) faults_run: u64,
}

/// What a scenario asks of the SMs and hosts around the fabric (an SM started or stopped,
/// a configuration reload, an SA client's request): the fabric has no SM or SA client of
/// its own, so it hands these to whoever drives the simulation ([`Sim::poll_sm_event`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmEvent {
    Start {
        port: PortIdx,
        priority: u8,
        /// `None`: the SM under test's.
        sm_key: Option<u64>,
    },
    Stop {
        port: PortIdx,
    },
    /// The SM under test reads its configuration again from `file` (as the scenario
    /// wrote it: relative to the scenario's directory).
    Reload {
        file: String,
    },
    /// The SA client on `port` joins a multicast group.
    Join {
        port: PortIdx,
        mgid: u128,
        pkey: u16,
        send_only: bool,
    },
    /// The SA client on `port` leaves a multicast group.
    Leave {
        port: PortIdx,
        mgid: u128,
    },
    /// The SA client on `port` registers a service (`lease` in seconds; `None`
    /// indefinite).
    Service {
        port: PortIdx,
        id: u64,
        lease: Option<u32>,
    },
}

/// Whether a MAD arriving at a node is for its agent (rather than an endpoint there).
#[inline]
fn for_agent(mad: &[u8; 256]) -> bool {
    let hdr = mad::Packet::from(mad);
    let method = hdr.method();
    match hdr.mgmt_class() {
        MgmtClass::SubnLid | MgmtClass::SubnDirected => {
            matches!(method, Method::Get | Method::Set) && hdr.attr_id() != attr::SM_INFO
                || method == Method::TrapRepress
        }
        // Every port has a performance management agent.
        MgmtClass::Perf => matches!(method, Method::Get | Method::Set),
        _ => false,
    }
}

impl Sim {
    /// A freshly powered fabric: every cabled port in INIT, no LIDs, empty tables.
    pub fn new(fabric: &Fabric, cfg: SimConfig) -> Sim {
        let (nodes, ports) = state::build(fabric);
        let n = nodes.len();
        let p = ports.len();
        Sim {
            nodes,
            ports,
            cfg,
            rng: SplitMix64::new(cfg.seed),
            seq: 0,
            now: 0,
            queue: BinaryHeap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            endpoints: Vec::new(),
            ep_at: vec![u32::MAX; p],
            clients: Vec::new(),
            traps: vec![None; n],
            trap_tid: 0x5100_0000,
            stats: SimStats::default(),
            sm_events: VecDeque::new(),
            trail_buf: Vec::new(),
            probes: Vec::new(),
            faults_run: 0,
        }
    }

    /// Attaches an endpoint (an SM or client) to an end port: a CA port or a switch's port 0.
    pub fn attach(&mut self, port: PortIdx) -> EndpointId {
        let id = EndpointId(self.endpoints.len() as u32);
        self.endpoints.push(Endpoint {
            port,
            inbox: VecDeque::new(),
        });
        if let Some(slot) = self.ep_at.get_mut(port.idx()) {
            *slot = id.0;
        }
        id
    }

    /// Attaches an endpoint at `port` that receives the responses of management class
    /// `class` sent to the port, and nothing else: a client (an SA consumer) beside the
    /// port's own endpoint (an SM), which keeps everything else.
    pub fn attach_client(&mut self, port: PortIdx, class: u8) -> EndpointId {
        let id = EndpointId(self.endpoints.len() as u32);
        self.endpoints.push(Endpoint {
            port,
            inbox: VecDeque::new(),
        });
        self.clients.push((port, class, id.0));
        id
    }

    /// The next SM start or stop a scenario asked for, in time order.
    pub fn poll_sm_event(&mut self) -> Option<SmEvent> {
        self.sm_events.pop_front()
    }

    /// Sets or clears PortInfo.CapabilityMask.IsSM of an end port, as a kernel does while an
    /// SM holds the port's `issm` device: other SMs find SMs by it.
    pub fn set_is_sm(&mut self, port: PortIdx, on: bool) {
        if let Some(p) = self.ports.get_mut(port.idx()) {
            if on {
                p.info.capability_mask |= port_info::cap::IS_SM;
            } else {
                p.info.capability_mask &= !port_info::cap::IS_SM;
            }
        }
    }

    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Counters.
    pub fn stats(&self) -> SimStats {
        self.stats
    }

    /// The configuration (faults may be changed between steps with [`Sim::set_faults`]).
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Changes fabric-wide fault injection from now on.
    pub fn set_faults(&mut self, f: crate::Faults) {
        self.cfg.faults = f;
    }

    /// The time of the next thing that will happen, if anything is pending.
    pub fn next_event(&self) -> Option<Nanos> {
        self.queue.peek().map(|q| q.0.at)
    }

    /// Runs every event up to and including `until`.
    pub fn advance(&mut self, until: Nanos) {
        while let Some(q) = self.queue.peek() {
            if q.0.at > until {
                break;
            }
            let Some(Reverse(q)) = self.queue.pop() else {
                break;
            };
            self.now = self.now.max(q.at);
            let ev = self.slab.get_mut(q.slot as usize).and_then(Option::take);
            self.free.push(q.slot);
            if let Some(ev) = ev {
                self.process(ev);
            }
        }
        self.now = self.now.max(until);
    }

    /// The next MAD delivered to an endpoint, if any.
    pub fn recv(&mut self, ep: EndpointId) -> Option<Inbound> {
        self.endpoints.get_mut(ep.0 as usize)?.inbox.pop_front()
    }

    pub(crate) fn schedule(&mut self, at: Nanos, ev: Event) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = Some(ev);
                i
            }
            None => {
                self.slab.push(Some(ev));
                (self.slab.len() - 1) as u32
            }
        };
        self.queue.push(Reverse(Queued {
            at,
            seq: self.seq,
            slot,
        }));
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.rng.next_u64() as f64 / u64::MAX as f64) < p
    }

    /// Fault injection on one transmission: the copies that get through (none = lost) and
    /// the extra delay of each. Draws nothing from the generator when no fault is set.
    fn wire(&mut self, hz: &Hazard) -> Copies {
        let g = self.cfg.faults;
        let mut copies = Copies {
            n: 1,
            extra: [0; 2],
        };
        if !hz.any && g.is_none() {
            return copies;
        }
        let mut h = Hazard { trail: None, ..*hz };
        h.add(&g);
        if self.chance(1.0 - h.keep) {
            copies.n = 0;
            return copies;
        }
        if self.chance(1.0 - h.single) {
            copies.n = 2;
        }
        for i in 0..copies.n {
            copies.extra[i] = h.delay;
            if self.chance(1.0 - h.in_order) && h.jitter > 0 {
                copies.extra[i] += self.rng.below(h.jitter + 1);
            }
        }
        copies
    }

    /// A hazard that keeps the trail of the MAD for its traffic counters.
    pub(crate) fn counted(&mut self) -> Hazard {
        let mut buf = std::mem::take(&mut self.trail_buf);
        buf.clear();
        Hazard {
            trail: Some(buf),
            ..Hazard::NONE
        }
    }

    /// Drops a MAD stopped on its way, which still crossed the links before the stop.
    pub(crate) fn drop_on_the_way(&mut self, why: Drop, mut hz: Hazard) {
        self.count_trail(hz.trail.take(), false);
        self.drop_mad(why);
    }

    pub(crate) fn drop_mad(&mut self, why: Drop) {
        self.stats.dropped += 1;
        tracing::trace!(?why, "MAD dropped");
    }

    /// Sends a MAD from an endpoint. `dlid` is the LRH destination: the permissive LID for a
    /// purely directed-route SMP, else the LID to route to.
    ///
    /// Responses go the same way: a directed-route SMP with the D bit set (a GetResp an SM
    /// returns) walks back along its return path from the endpoint's node (IBA C14-13),
    /// LID-routed first to `dlid` when the request's directed part was followed by a
    /// LID-routed one, and LID-routed last to its DrSLID when that is not permissive.
    /// [`Sim::reply`] does the addressing for you.
    pub fn send(&mut self, ep: EndpointId, dlid: Lid, mad: &[u8]) -> Result<(), SendError> {
        let from = self
            .endpoints
            .get(ep.0 as usize)
            .ok_or(SendError::UnknownEndpoint(ep))?
            .port;
        let buf: [u8; 256] = mad
            .try_into()
            .map_err(|_| SendError::BadLength(mad.len()))?;
        self.stats.sent += 1;
        if mad::Repr::parse(&buf).is_err() {
            self.drop_mad(Drop::Malformed);
            return Ok(());
        }
        self.inject(from, dlid, buf);
        Ok(())
    }

    /// Sends a MAD from port `from` as an endpoint there would.
    pub(crate) fn inject(&mut self, from: PortIdx, dlid: Lid, mut buf: [u8; 256]) {
        let own_lid = self.ports[from.idx()].info.lid;
        let mut hz = self.counted();
        match self.carry(from, dlid, &mut buf, &mut hz) {
            Ok((port, hops, dr_end)) => {
                let slid = if smp::Packet::from(&buf).is_directed() {
                    match dr_end {
                        Some(e) => self.lid_of(e),
                        None => Lid::PERMISSIVE,
                    }
                } else {
                    own_lid
                };
                self.transmit(self.now, hops, port, &buf, slid, dr_end, hz);
            }
            Err(why) => self.drop_on_the_way(why, hz),
        }
    }

    /// Answers `request` (delivered to `ep`) with `response`: a directed-route response
    /// takes the request's route fields (hop count, paths, DrSLID, DrDLID) with the D bit
    /// set and walks back from the endpoint's node; anything else goes LID-routed to the
    /// requester's LID.
    pub fn reply(
        &mut self,
        ep: EndpointId,
        request: &Inbound,
        response: &[u8],
    ) -> Result<(), SendError> {
        let mut buf: [u8; 256] = response
            .try_into()
            .map_err(|_| SendError::BadLength(response.len()))?;
        let req = smp::Packet::from(&request.mad);
        if req.is_directed() && smp::Packet::from(&buf).is_directed() {
            let mut p = smp::Packet::from(&mut buf);
            p.set(smp::field::DIRECTION, true);
            p.set(smp::field::HOP_COUNT, req.get(smp::field::HOP_COUNT));
            p.set(smp::field::HOP_POINTER, req.get(smp::field::HOP_POINTER));
            p.set(smp::field::DR_SLID, req.get(smp::field::DR_SLID));
            p.set(smp::field::DR_DLID, req.get(smp::field::DR_DLID));
            p.initial_path_mut().copy_from_slice(req.initial_path());
            p.return_path_mut().copy_from_slice(req.return_path());
        }
        self.send(ep, request.slid, &buf)
    }

    /// Moves a MAD from `from` to where it is consumed: the arrival port and hops taken,
    /// updating the directed-route fields in place; for directed route with a LID-routed
    /// end part also the port where the directed part ended.
    fn carry(
        &self,
        from: PortIdx,
        dlid: Lid,
        buf: &mut [u8; 256],
        hz: &mut Hazard,
    ) -> Result<(PortIdx, u32, Option<PortIdx>), Drop> {
        match mad::Packet::from(&*buf).mgmt_class() {
            MgmtClass::SubnDirected => {
                let p = smp::Packet::from(&*buf);
                if p.get(smp::field::HOP_COUNT) > smp::MAX_HOPS {
                    return Err(Drop::Malformed);
                }
                let returning = p.get(smp::field::DIRECTION);
                let dr_slid = p.get(smp::field::DR_SLID);
                let dr_dlid = p.get(smp::field::DR_DLID);
                let (start, mut hops) = if dlid == Lid::PERMISSIVE {
                    (from, 0)
                } else {
                    self.route(from, dlid, false, hz)?
                };
                if returning {
                    let (end, h) = self.dr_back(start, buf, hz)?;
                    hops += h;
                    if dr_slid != Lid::PERMISSIVE {
                        let (q, h2) = self.route(end, dr_slid, false, hz)?;
                        return Ok((q, hops + h2, None));
                    }
                    return Ok((end, hops, None));
                }
                let (end, dr_hops) = self.dr_out(start, buf, hz)?;
                hops += dr_hops;
                if dr_dlid != Lid::PERMISSIVE {
                    let (q, h) = self.route(end, dr_dlid, false, hz)?;
                    Ok((q, hops + h, Some(end)))
                } else {
                    Ok((end, hops, None))
                }
            }
            MgmtClass::SubnLid => {
                let (p, h) = self.route(from, dlid, false, hz)?;
                Ok((p, h, None))
            }
            _ => {
                let (p, h) = self.route(from, dlid, true, hz)?;
                Ok((p, h, None))
            }
        }
    }

    /// Where an endpoint listening at the node of arrival port `p` is attached: port 0 of a
    /// switch, the port itself otherwise.
    pub(crate) fn listener_port(&self, p: PortIdx) -> PortIdx {
        let n = self.node_of(p);
        if self.is_switch(n) {
            self.port_idx(n, 0).unwrap_or(p)
        } else {
            p
        }
    }

    /// The LID of the node a port belongs to (port 0's for a switch).
    pub(crate) fn lid_of(&self, p: PortIdx) -> Lid {
        self.ports[self.listener_port(p).idx()].info.lid
    }

    pub(crate) fn node_of(&self, p: PortIdx) -> NodeIdx {
        self.ports[p.idx()].node
    }

    pub(crate) fn is_switch(&self, n: NodeIdx) -> bool {
        self.nodes[n.idx()].kind == NodeKind::Switch
    }

    /// The port slot of port `num` of node `n`.
    pub(crate) fn port_idx(&self, n: NodeIdx, num: u8) -> Option<PortIdx> {
        let node = self.nodes.get(n.idx())?;
        let sw = node.kind == NodeKind::Switch;
        if num > node.num_ports || (!sw && num == 0) {
            return None;
        }
        Some(PortIdx(node.first_port + num as u32))
    }

    /// Crosses the link at `out`; VL15 needs the link up and the ports past DOWN, data needs
    /// both ends ACTIVE. The link's faults join `hz`.
    #[inline]
    fn cross(&self, out: PortIdx, data: bool, hz: &mut Hazard) -> Result<PortIdx, Drop> {
        let p = &self.ports[out.idx()];
        let r = p.remote.ok_or(Drop::LinkDown)?;
        let rp = &self.ports[r.idx()];
        let up = |s: &SimPort| {
            s.info.port_physical_state == PhysPortState::LinkUp
                && if data {
                    s.info.port_state == PortState::Active
                } else {
                    s.info.port_state != PortState::Down
                }
        };
        if !up(p) || !up(rp) || !self.nodes[rp.node.idx()].alive {
            return Err(Drop::LinkDown);
        }
        if let Some(f) = &p.faults {
            hz.add(f);
        }
        if let Some(t) = &mut hz.trail {
            t.push(out);
        }
        Ok(r)
    }

    /// LID routing from port `from` to `dlid`: the port the packet arrives on at the node
    /// that owns the LID (any port of a switch whose port 0 owns it) and the links crossed.
    #[allow(dead_code)] // kept for the data-path tracer
    pub(crate) fn lid_route(
        &self,
        from: PortIdx,
        dlid: Lid,
        data: bool,
    ) -> Result<(PortIdx, u32), Drop> {
        let mut hz = Hazard::NONE;
        self.route(from, dlid, data, &mut hz)
    }

    /// [`Sim::lid_route`], gathering the faults of the links crossed.
    fn route(
        &self,
        from: PortIdx,
        dlid: Lid,
        data: bool,
        hz: &mut Hazard,
    ) -> Result<(PortIdx, u32), Drop> {
        if dlid.0 == 0 || dlid == Lid::PERMISSIVE {
            return Err(Drop::WrongLid);
        }
        let mut cur = from;
        let mut hops = 0u32;
        if owns_lid(&self.ports[from.idx()].info, dlid) {
            return Ok((from, 0));
        }
        if !self.is_switch(self.node_of(from)) {
            cur = self.cross(from, data, hz)?;
            hops += 1;
        }
        loop {
            let n = self.node_of(cur);
            if !self.is_switch(n) {
                return if owns_lid(&self.ports[cur.idx()].info, dlid) {
                    Ok((cur, hops))
                } else {
                    Err(Drop::WrongLid)
                };
            }
            let p0 = self.port_idx(n, 0).ok_or(Drop::NoRoute)?;
            if owns_lid(&self.ports[p0.idx()].info, dlid) {
                // The switch's own LID: the agent sees the port the packet came in on.
                return Ok((cur, hops));
            }
            let sw = self.nodes[n.idx()].switch.as_deref().ok_or(Drop::NoRoute)?;
            if dlid > sw.info.linear_fdb_top {
                return Err(Drop::NoRoute);
            }
            let out = sw.lft_entry(dlid);
            let outp = match self.port_idx(n, out) {
                Some(p) if out != 0 && out != 255 => p,
                _ => return Err(Drop::NoRoute),
            };
            cur = self.cross(outp, data, hz)?;
            hops += 1;
            if hops > MAX_HOPS {
                return Err(Drop::Loop);
            }
        }
    }

    /// The outbound directed-route part, per IBA C14-9: from the node of `start`, one exit
    /// port per hop, recording each arrival port in the return path. Returns the arrival port
    /// at the last node and the links crossed.
    fn dr_out(
        &self,
        start: PortIdx,
        buf: &mut [u8; 256],
        hz: &mut Hazard,
    ) -> Result<(PortIdx, u32), Drop> {
        let p = smp::Packet::from(&*buf);
        let n = p.get(smp::field::HOP_COUNT);
        if p.get(smp::field::HOP_POINTER) != 0 {
            return Err(Drop::Malformed);
        }
        let dr_dlid = p.get(smp::field::DR_DLID);
        let mut cur = start;
        for h in 1..=n as usize {
            let node = self.node_of(cur);
            let switch = self.is_switch(node);
            if h > 1 && !switch {
                return Err(Drop::NotASwitch);
            }
            let exit = smp::Packet::from(&*buf)
                .initial_path()
                .get(h)
                .copied()
                .ok_or(Drop::Malformed)?;
            // A CA sends out of the port named by hop 1; it must be its own port.
            let out = self
                .port_idx(node, exit)
                .filter(|_| !switch || exit != 0)
                .ok_or(Drop::BadPath)?;
            let arrived = self.cross(out, false, hz)?;
            if let Some(slot) = smp::Packet::from(&mut *buf).return_path_mut().get_mut(h) {
                *slot = self.ports[arrived.idx()].num;
            }
            cur = arrived;
        }
        if dr_dlid != Lid::PERMISSIVE && !self.is_switch(self.node_of(cur)) {
            return Err(Drop::NotASwitch);
        }
        smp::Packet::from(buf).set(smp::field::HOP_POINTER, n + 1);
        Ok((cur, n as u32))
    }

    /// The returning directed-route part, per IBA C14-13: from the responder's node back
    /// along the return path. Returns the port where the DR part ends and the links crossed.
    fn dr_back(
        &self,
        at: PortIdx,
        buf: &mut [u8; 256],
        hz: &mut Hazard,
    ) -> Result<(PortIdx, u32), Drop> {
        let n = smp::Packet::from(&*buf).get(smp::field::HOP_COUNT);
        let mut cur = at;
        for h in (1..=n as usize).rev() {
            let node = self.node_of(cur);
            if h < n as usize && !self.is_switch(node) {
                return Err(Drop::NotASwitch);
            }
            let exit = smp::Packet::from(&*buf)
                .return_path()
                .get(h)
                .copied()
                .ok_or(Drop::Malformed)?;
            let out = self.port_idx(node, exit).ok_or(Drop::BadPath)?;
            cur = self.cross(out, false, hz)?;
        }
        smp::Packet::from(buf).set(smp::field::HOP_POINTER, 0);
        Ok((cur, n as u32))
    }

    /// Puts a MAD on its way from `depart`, `hops` links to arrival port `port`: to the
    /// agent there, or to the endpoint listening at that node. Fault injection decides
    /// how many copies arrive and when.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn transmit(
        &mut self,
        depart: Nanos,
        hops: u32,
        port: PortIdx,
        mad: &[u8; 256],
        slid: Lid,
        dr_end: Option<PortIdx>,
        mut hz: Hazard,
    ) {
        let agent = for_agent(mad);
        let ep = if agent {
            if let Some(f) = &self.nodes[self.node_of(port).idx()].faults {
                hz.add(f);
            }
            u32::MAX
        } else if self.probe_answered(mad) {
            self.count_trail(hz.trail.take(), false);
            return;
        } else {
            let at = self.listener_port(port);
            // A response of a class a client asked with goes to that client.
            let client = (mad[3] & 0x80 != 0)
                .then(|| {
                    self.clients
                        .iter()
                        .find(|c| c.0 == at && c.1 == mad[1])
                        .map(|c| c.2)
                })
                .flatten();
            match client.or_else(|| self.ep_at.get(at.idx()).copied()) {
                Some(ep) if ep != u32::MAX => ep,
                _ => {
                    self.drop_on_the_way(Drop::NoListener, hz);
                    return;
                }
            }
        };
        let copies = self.wire(&hz);
        self.count_trail(hz.trail.take(), copies.n == 0);
        if copies.n == 0 {
            self.drop_mad(Drop::Injected);
            return;
        }
        let base = depart + hops as u64 * self.cfg.hop_ns;
        for extra in copies.iter() {
            let at = base + extra;
            let ev = if agent {
                Event::AtAgent {
                    port,
                    mad: *mad,
                    slid,
                    dr_end,
                }
            } else {
                Event::Deliver {
                    ep: EndpointId(ep),
                    msg: Inbound {
                        at,
                        slid,
                        mad: *mad,
                    },
                }
            };
            self.schedule(at, ev);
        }
    }

    /// Counts the MAD whose links the trail holds in the PortCounters of both ends of each
    /// link. `lost`: fault injection dropped it, which the receiving end of the lossiest link
    /// crossed (the last one when none stands out) counts as a receive error.
    fn count_trail(&mut self, trail: Option<Vec<PortIdx>>, lost: bool) {
        let Some(mut trail) = trail else {
            return;
        };
        let mut upto = trail.len();
        if lost && !trail.is_empty() {
            let loss = |p: &PortIdx| self.ports[p.idx()].faults.as_ref().map_or(0.0, |f| f.loss);
            let mut at = trail.len() - 1;
            for (i, p) in trail.iter().enumerate() {
                if loss(p) > loss(&trail[at]) {
                    at = i;
                }
            }
            upto = at + 1;
        }
        for (i, &out) in trail[..upto].iter().enumerate() {
            let Some(r) = self.ports[out.idx()].remote else {
                continue;
            };
            count_packet(&mut self.ports[out.idx()], true);
            if lost && i + 1 == upto {
                let c = &mut self.ports[r.idx()].counters;
                c.rcv_errors = c.rcv_errors.saturating_add(1);
            } else {
                count_packet(&mut self.ports[r.idx()], false);
            }
        }
        trail.clear();
        self.trail_buf = trail;
    }

    fn process(&mut self, ev: Event) {
        match ev {
            Event::Deliver { ep, msg } => {
                if let Some(e) = self.endpoints.get_mut(ep.0 as usize) {
                    self.stats.delivered += 1;
                    e.inbox.push_back(msg);
                }
            }
            Event::AtAgent {
                port,
                mad,
                slid,
                dr_end,
            } => self.at_agent(port, mad, slid, dr_end),
            Event::TrapTimer { node } => self.trap_timer(node),
            Event::LeaseExpiry { port, generation } => self.lease_expiry(port, generation),
            Event::Fault(f) => self.run_fault(f),
            Event::PowerUp { node } => {
                self.faults_run += 1;
                self.power_up(node);
            }
        }
    }

    fn at_agent(&mut self, port: PortIdx, mut mad: [u8; 256], slid: Lid, dr_end: Option<PortIdx>) {
        let n = self.node_of(port);
        let node = &self.nodes[n.idx()];
        if !node.alive || node.silent {
            self.drop_mad(Drop::Injected);
            return;
        }
        let delay = self.cfg.sma_ns + node.extra_delay;
        if mad::Packet::from(&mad).mgmt_class() == MgmtClass::Perf {
            return self.at_pma(port, mad, slid, delay);
        }
        let req = smp::Packet::from(&mad);
        let directed = req.is_directed();
        let hdr = mad::Packet::from(&mad);
        let (method, attr_id, attr_mod) = (hdr.method(), hdr.attr_id(), hdr.attr_mod());
        if directed && req.get(smp::field::HOP_COUNT) > smp::MAX_HOPS {
            self.drop_mad(Drop::Malformed);
            return;
        }
        self.stats.agent_requests += 1;
        let Some(hide_m_key) = self.m_key_check(n, port, &mad, slid) else {
            return;
        };
        if method == Method::TrapRepress {
            let tid = hdr.tid();
            if let Some(t) = self.traps[n.idx()] {
                if t.tid as u32 == tid.low32() {
                    self.traps[n.idx()] = None;
                }
            }
            return;
        }
        let in_port = self.ports[port.idx()].num;
        let mut data = [0u8; smp::DATA_LEN];
        data.copy_from_slice(req.data());
        let answer = Agent {
            nodes: &mut self.nodes,
            ports: &mut self.ports,
        }
        .handle(n, in_port, method, attr_id, attr_mod, &data);
        for e in &answer.effects {
            self.apply(*e);
        }
        let mut out = answer.data;
        if hide_m_key && attr_id == attr::PORT_INFO {
            // IBA 14.2.4.1 protection level 1: PortInfo.M_Key reads 0 without the key.
            if let Ok(mut pi) = port_info::Packet::new_checked(&mut out[..]) {
                pi.set(port_info::field::M_KEY, 0);
            }
        }
        smp::Packet::from(&mut mad).data_mut().copy_from_slice(&out);
        let mut hz = self.counted();
        if let Some(f) = &self.nodes[n.idx()].faults {
            hz.add(f);
        }
        // Route the answer back.
        let back = if directed {
            let mut p = smp::Packet::from(&mut mad);
            p.set(mad::field::METHOD, Method::GetResp);
            p.set(smp::field::DIRECTION, true);
            p.set(smp::field::DR_STATUS, answer.status.0 & 0x7fff);
            // After a LID-routed end part, the answer first goes back, LID-routed, to the
            // switch that ended the directed part.
            let start = match dr_end {
                Some(x) => {
                    let lid = self.lid_of(x);
                    self.route(port, lid, false, &mut hz)
                }
                None => Ok((port, 0)),
            };
            let dr_slid = smp::Packet::from(&mad).get(smp::field::DR_SLID);
            start
                .and_then(|(s, h0)| self.dr_back(s, &mut mad, &mut hz).map(|(p, h)| (p, h0 + h)))
                .and_then(|(p, h)| {
                    if dr_slid != Lid::PERMISSIVE {
                        self.route(p, dr_slid, false, &mut hz)
                            .map(|(q, h2)| (q, h + h2))
                    } else {
                        Ok((p, h))
                    }
                })
                .map(|(p, h)| (p, h, Lid::PERMISSIVE))
        } else {
            let mut p = mad::Packet::from(&mut mad);
            p.set(mad::field::METHOD, Method::GetResp);
            p.set(mad::field::STATUS, answer.status);
            self.route(port, slid, false, &mut hz)
                .map(|(p, h)| (p, h, self.lid_of(port)))
        };
        match back {
            Ok((dest, hops, src_lid)) => {
                let depart = self.now + delay;
                self.transmit(depart, hops, dest, &mad, src_lid, None, hz)
            }
            Err(why) => self.drop_on_the_way(why, hz),
        }
    }

    /// The performance management agent: Get(PortCounters) of a port of the node, or a Set
    /// clearing the counters CounterSelect names; answered LID-routed over data VLs.
    fn at_pma(&mut self, port: PortIdx, mut mad: [u8; 256], slid: Lid, delay: Nanos) {
        use sm_mad::MadStatus;
        use sm_mad::perf;
        self.stats.agent_requests += 1;
        let n = self.node_of(port);
        let hdr = mad::Packet::from(&mad);
        let (method, attr_id) = (hdr.method(), hdr.attr_id());
        // PortSelect is the same byte in both counter attributes.
        let select = mad[perf::DATA_OFFSET + 1];
        let num = if self.is_switch(n) || select != 0 {
            select
        } else {
            self.ports[port.idx()].num
        };
        let target = self.port_idx(n, num);
        let status = match (attr_id, target) {
            (sm_mad::class_port_info::ATTR_ID, _) if method == Method::Get => {
                let cpi = sm_mad::class_port_info::Repr {
                    base_version: 1,
                    class_version: perf::CLASS_VERSION,
                    capability_mask: perf::cap::EXTENDED_WIDTH | perf::cap::XMIT_WAIT,
                    ..Default::default()
                };
                mad[perf::DATA_OFFSET..].fill(0);
                let _ = cpi.emit(&mut mad[perf::DATA_OFFSET..]);
                MadStatus::OK
            }
            (perf::PORT_COUNTERS, Some(q)) => {
                let c = &mut self.ports[q.idx()].counters;
                answer_counters(
                    &mut mad[perf::DATA_OFFSET..],
                    method,
                    c,
                    clear_counters,
                    num,
                )
            }
            (perf::PORT_COUNTERS_EXTENDED, Some(q)) => {
                let c = &mut self.ports[q.idx()].ext_counters;
                answer_counters(
                    &mut mad[perf::DATA_OFFSET..],
                    method,
                    c,
                    clear_ext_counters,
                    num,
                )
            }
            (perf::PORT_COUNTERS | perf::PORT_COUNTERS_EXTENDED, None) => MadStatus::INVALID_FIELD,
            _ => MadStatus::METHOD_ATTR_UNSUPPORTED,
        };
        let mut p = mad::Packet::from(&mut mad);
        p.set(mad::field::METHOD, Method::GetResp);
        p.set(mad::field::STATUS, status);
        let mut hz = self.counted();
        if let Some(f) = &self.nodes[n.idx()].faults {
            hz.add(f);
        }
        match self.route(port, slid, true, &mut hz) {
            Ok((dest, hops)) => {
                let src = self.lid_of(port);
                self.transmit(self.now + delay, hops, dest, &mad, src, None, hz);
            }
            Err(why) => self.drop_on_the_way(why, hz),
        }
    }

    /// Carries out a link-level consequence of an agent's Set.
    fn apply(&mut self, e: Effect) {
        match e {
            Effect::Retrain(p) => {
                if self.ports[p.idx()].remote.is_some() {
                    self.set_link(p, PortState::Init, PhysPortState::LinkUp);
                } else {
                    self.set_link(p, PortState::Down, PhysPortState::Polling);
                }
            }
            Effect::Disable(p) => {
                self.set_link(p, PortState::Down, PhysPortState::Polling);
                self.ports[p.idx()].info.port_physical_state = PhysPortState::Disabled;
            }
        }
    }

    /// Puts both ends of the link at `p` into a state, noting the change on switches. A
    /// link coming up trains to the widest width both ends enable and the slower speed.
    pub(crate) fn set_link(&mut self, p: PortIdx, state: PortState, phys: PhysPortState) {
        let remote = self.ports[p.idx()].remote;
        let trained = match remote {
            Some(r) if phys == PhysPortState::LinkUp => Some(self.train(p, r)),
            _ => None,
        };
        for x in [Some(p), remote].into_iter().flatten() {
            let port = &mut self.ports[x.idx()];
            let changed = port.info.port_state != state || port.info.port_physical_state != phys;
            if port.info.port_physical_state == PhysPortState::LinkUp
                && phys != PhysPortState::LinkUp
            {
                port.link_downs += 1;
                // LinkDownedCounter stops at its maximum.
                let c = &mut port.counters.link_downed;
                *c = c.saturating_add(1);
            }
            port.info.port_state = state;
            // A switched-off PHY stays off when its link goes down again.
            if port.info.port_physical_state != PhysPortState::Disabled
                || phys == PhysPortState::LinkUp
            {
                port.info.port_physical_state = phys;
            }
            if let Some((width, speed, ext, ext2)) = trained {
                port.info.link_width_active = width;
                port.info.link_speed_active = speed;
                port.info.link_speed_ext_active = ext;
                port.info.link_speed_ext_active2 = ext2;
            }
            let n = port.node;
            if changed {
                self.port_changed(n);
            }
        }
    }

    /// Width, speed and the two extended speeds a link between `a` and `b` trains to.
    fn train(&self, a: PortIdx, b: PortIdx) -> (u8, u8, u8, u8) {
        let (pa, pb) = (&self.ports[a.idx()], &self.ports[b.idx()]);
        let common = pa.info.link_width_enabled
            & pa.info.link_width_supported
            & pb.info.link_width_enabled
            & pb.info.link_width_supported;
        let width = [
            link_width::X12,
            link_width::X8,
            link_width::X4,
            link_width::X2,
            link_width::X1,
        ]
        .into_iter()
        .find(|w| common & w != 0)
        .unwrap_or(pa.hw.width);
        let speed = pa.hw.speed.speed.min(pb.hw.speed.speed);
        let ext2 = pa.hw.speed.ext2.min(pb.hw.speed.ext2);
        // An XDR link is active at XDR only.
        let ext = if ext2 != 0 {
            0
        } else {
            pa.hw.speed.ext.min(pb.hw.speed.ext)
        };
        (width, speed, ext, ext2)
    }

    /// A switch noticed a port state change: flag it and trap to the SM.
    pub(crate) fn port_changed(&mut self, n: NodeIdx) {
        if !self.nodes[n.idx()].alive {
            return;
        }
        let Some(sw) = self.nodes[n.idx()].switch.as_deref_mut() else {
            return;
        };
        sw.info.port_state_change = true;
        if self.traps[n.idx()].is_none() {
            self.trap_tid += 1;
            self.traps[n.idx()] = Some(PendingTrap { tid: self.trap_tid });
            self.send_trap(n);
        }
    }

    fn send_trap(&mut self, n: NodeIdx) {
        let Some(t) = self.traps[n.idx()] else { return };
        let Some(p0) = self.port_idx(n, 0) else {
            return;
        };
        let lid = self.ports[p0.idx()].info.lid;
        self.emit_trap(p0, Tid(t.tid), &notice::Repr::trap_128(lid, lid));
        let interval = self.cfg.trap_interval_ns;
        self.schedule(self.now + interval, Event::TrapTimer { node: n });
    }

    /// Sends a Trap(Notice) from end port `from` to its master SM, LID-routed, once the
    /// port knows its own LID and its SM's.
    pub(crate) fn emit_trap(&mut self, from: PortIdx, tid: Tid, notice: &notice::Repr) {
        let info = self.ports[from.idx()].info;
        if info.lid.0 == 0 || info.master_sm_lid.0 == 0 {
            return;
        }
        let mut smp = smp::Repr::request(Method::Trap, tid, attr::NOTICE, 0, Route::Lid);
        smp.m_key = info.m_key;
        if smp.set_attribute(notice).is_err() {
            return;
        }
        let Ok(bytes) = smp.to_bytes() else { return };
        let mut hz = self.counted();
        if let Some(f) = &self.nodes[self.node_of(from).idx()].faults {
            hz.add(f);
        }
        match self.route(from, info.master_sm_lid, false, &mut hz) {
            Ok((dest, hops)) => {
                self.stats.traps_sent += 1;
                self.transmit(self.now, hops, dest, &bytes, info.lid, None, hz);
            }
            Err(why) => self.drop_on_the_way(why, hz),
        }
    }

    fn trap_timer(&mut self, n: NodeIdx) {
        if self.traps[n.idx()].is_some() && self.nodes[n.idx()].alive {
            self.send_trap(n);
        }
    }

    // ----------------------------------------------------------------------------------
    // Inspection.

    /// Read access to a port's state.
    pub fn port(&self, p: PortIdx) -> &SimPort {
        &self.ports[p.idx()]
    }

    /// Read access to a node's state.
    pub fn node(&self, n: NodeIdx) -> &SimNode {
        &self.nodes[n.idx()]
    }

    /// Whether a trap is still waiting for its TrapRepress.
    pub fn trap_pending(&self, n: NodeIdx) -> bool {
        self.traps.get(n.idx()).is_some_and(|t| t.is_some())
    }
}

/// Answers a Get or Set of counters `held` (PortCounters or PortCountersExtended, which
/// keep PortSelect in byte 1 and CounterSelect in bytes 2-3 alike) in the attribute
/// `data`: a Set clears what CounterSelect names first.
fn answer_counters<T: sm_mad::Wire>(
    data: &mut [u8],
    method: Method,
    held: &mut T,
    clear: fn(&mut T, u16),
    port: u8,
) -> sm_mad::MadStatus {
    if T::parse(data).is_err() || data.len() < 4 {
        return sm_mad::MadStatus::INVALID_FIELD;
    }
    if method == Method::Set {
        clear(held, u16::from_be_bytes([data[2], data[3]]));
    }
    let _ = held.emit(data);
    data[1] = port;
    data[2..4].fill(0);
    sm_mad::MadStatus::OK
}

/// A MAD's words on the wire: the MAD and its LRH, BTH, DETH and ICRC.
const MAD_WORDS: u32 = (256 + 8 + 12 + 8 + 4) / 4;

/// One MAD sent (`xmit`) or received at a port: PortCounters stop at their maximum,
/// PortCountersExtended counts on.
fn count_packet(p: &mut crate::state::SimPort, xmit: bool) {
    let (c, e) = (&mut p.counters, &mut p.ext_counters);
    if xmit {
        c.xmit_pkts = c.xmit_pkts.saturating_add(1);
        c.xmit_data = c.xmit_data.saturating_add(MAD_WORDS);
        e.xmit_pkts = e.xmit_pkts.wrapping_add(1);
        e.unicast_xmit_pkts = e.unicast_xmit_pkts.wrapping_add(1);
        e.xmit_data = e.xmit_data.wrapping_add(MAD_WORDS.into());
    } else {
        c.rcv_pkts = c.rcv_pkts.saturating_add(1);
        c.rcv_data = c.rcv_data.saturating_add(MAD_WORDS);
        e.rcv_pkts = e.rcv_pkts.wrapping_add(1);
        e.unicast_rcv_pkts = e.unicast_rcv_pkts.wrapping_add(1);
        e.rcv_data = e.rcv_data.wrapping_add(MAD_WORDS.into());
    }
}

/// Clears the PortCountersExtended CounterSelect names (bit 0 PortXmitData, in field
/// order).
fn clear_ext_counters(c: &mut sm_mad::perf::ext::Repr, select: u16) {
    let on = |bit: u16| select & (1 << bit) != 0;
    let fields = [
        &mut c.xmit_data,
        &mut c.rcv_data,
        &mut c.xmit_pkts,
        &mut c.rcv_pkts,
        &mut c.unicast_xmit_pkts,
        &mut c.unicast_rcv_pkts,
        &mut c.multicast_xmit_pkts,
        &mut c.multicast_rcv_pkts,
    ];
    for (bit, f) in fields.into_iter().enumerate() {
        if on(bit as u16) {
            *f = 0;
        }
    }
}

/// Clears the PortCounters CounterSelect names (bit 0 SymbolErrorCounter, then in field
/// order; bits 12-15 the data and packet counters).
fn clear_counters(c: &mut sm_mad::perf::Repr, select: u16) {
    let on = |bit: u16| select & (1 << bit) != 0;
    if on(0) {
        c.symbol_errors = 0;
    }
    if on(1) {
        c.link_error_recoveries = 0;
    }
    if on(2) {
        c.link_downed = 0;
    }
    if on(3) {
        c.rcv_errors = 0;
    }
    if on(4) {
        c.rcv_remote_physical_errors = 0;
    }
    if on(5) {
        c.rcv_switch_relay_errors = 0;
    }
    if on(6) {
        c.xmit_discards = 0;
    }
    if on(7) {
        c.xmit_constraint_errors = 0;
    }
    if on(8) {
        c.rcv_constraint_errors = 0;
    }
    if on(9) {
        c.local_link_integrity_errors = 0;
    }
    if on(10) {
        c.excessive_buffer_overrun_errors = 0;
    }
    if on(11) {
        c.vl15_dropped = 0;
    }
    if on(12) {
        c.xmit_data = 0;
    }
    if on(13) {
        c.rcv_data = 0;
    }
    if on(14) {
        c.xmit_pkts = 0;
    }
    if on(15) {
        c.rcv_pkts = 0;
    }
}
