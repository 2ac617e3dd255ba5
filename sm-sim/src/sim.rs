//! The simulated fabric: MADs move between endpoints (SMs, SA clients) and the nodes' agents
//! by directed route or through the programmed forwarding tables, in virtual time. Nothing
//! here reads a clock or spawns a thread; the same inputs and seed give the same run.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx};
use sm_core::generate::SplitMix64;
use sm_mad::port_info::{PhysPortState, PortState};
use sm_mad::smp::{self, Route};
use sm_mad::{Lid, Method, MgmtClass, Tid, attr, mad, notice};

use crate::sma::{Agent, Effect, owns_lid};
use crate::state::{self, SimNode, SimPort};

/// Virtual time in nanoseconds.
pub type Nanos = u64;

/// Maximum switch hops before a LID-routed packet counts as looping.
pub const MAX_HOPS: u32 = 64;

/// Fault injection applied to every MAD on the wire (seeded).
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
    /// Source LID from the packet's LRH (permissive for directed route).
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
    /// Fault injection or a silent node.
    Injected,
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
enum Event {
    /// A request reaches a node's agent on `in_port` (port index of arrival).
    AtAgent {
        port: PortIdx,
        mad: [u8; 256],
        /// The LID-routed requester's LID, for the answer.
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
}

#[derive(Debug)]
struct Queued {
    at: Nanos,
    seq: u64,
    ev: Event,
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
struct PendingTrap {
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
    cfg: SimConfig,
    rng: SplitMix64,
    seq: u64,
    now: Nanos,
    queue: BinaryHeap<Reverse<Queued>>,
    endpoints: Vec<Endpoint>,
    /// Endpoint per port index (`u32::MAX` = none).
    ep_at: Vec<u32>,
    traps: Vec<Option<PendingTrap>>,
    trap_tid: u64,
    stats: SimStats,
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
            endpoints: Vec::new(),
            ep_at: vec![u32::MAX; p],
            traps: vec![None; n],
            trap_tid: 0x5100_0000,
            stats: SimStats::default(),
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

    /// Changes fault injection from now on.
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
            self.process(q.ev);
        }
        self.now = self.now.max(until);
    }

    /// The next MAD delivered to an endpoint, if any.
    pub fn recv(&mut self, ep: EndpointId) -> Option<Inbound> {
        self.endpoints.get_mut(ep.0 as usize)?.inbox.pop_front()
    }

    fn schedule(&mut self, at: Nanos, ev: Event) {
        self.seq += 1;
        self.queue.push(Reverse(Queued {
            at,
            seq: self.seq,
            ev,
        }));
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.rng.next_u64() as f64 / u64::MAX as f64) < p
    }

    /// Fault injection on one transmission: `None` = lost, else the extra delays of each copy.
    fn wire(&mut self) -> Vec<Nanos> {
        let f = self.cfg.faults;
        if self.chance(f.loss) {
            return Vec::new();
        }
        let mut copies = vec![0];
        if self.chance(f.duplicate) {
            copies.push(0);
        }
        for c in copies.iter_mut() {
            if self.chance(f.reorder) && f.jitter_ns > 0 {
                *c = self.rng.below(f.jitter_ns + 1);
            }
        }
        copies
    }

    fn drop_mad(&mut self, why: Drop) {
        self.stats.dropped += 1;
        tracing::trace!(?why, "MAD dropped");
    }

    /// Sends a MAD from an endpoint. `dlid` is the LRH destination: the permissive LID for a
    /// purely directed-route SMP, else the LID to route to.
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
        let Ok(hdr) = mad::Repr::parse(&buf) else {
            self.drop_mad(Drop::Malformed);
            return Ok(());
        };
        let slid = self.ports[from.idx()].info.lid;
        let now = self.now;
        match self.carry(from, dlid, buf, hdr.mgmt_class) {
            Ok((port, hops, mad, dr_end)) => {
                for extra in self.wire() {
                    let at = now + hops as u64 * self.cfg.hop_ns + extra;
                    self.arrive(at, port, mad, slid, dr_end);
                }
            }
            Err(why) => self.drop_mad(why),
        }
        Ok(())
    }

    /// Moves a MAD from `from` to where it is consumed: the arrival port, hops taken, the
    /// MAD as it arrives (directed-route fields updated), and for directed route with a
    /// LID-routed end part the port where the directed part ended.
    #[allow(clippy::type_complexity)]
    fn carry(
        &self,
        from: PortIdx,
        dlid: Lid,
        mut buf: [u8; 256],
        class: MgmtClass,
    ) -> Result<(PortIdx, u32, [u8; 256], Option<PortIdx>), Drop> {
        match class {
            MgmtClass::SubnDirected => {
                let mut smp = smp::Repr::parse(&buf).map_err(|_| Drop::Malformed)?;
                let Route::Directed(mut d) = smp.route else {
                    return Err(Drop::Malformed);
                };
                let (start, mut hops) = if dlid == Lid::PERMISSIVE {
                    (from, 0)
                } else {
                    self.lid_route(from, dlid, false)?
                };
                if d.direction {
                    // The SM never starts a returning SMP; refuse it as a real HCA would.
                    return Err(Drop::Malformed);
                }
                let (end, dr_hops) = self.dr_out(start, &mut d)?;
                hops += dr_hops;
                let (arrival, extra, dr_end) = if d.dr_dlid != Lid::PERMISSIVE {
                    let (p, h) = self.lid_route(end, d.dr_dlid, false)?;
                    (p, h, Some(end))
                } else {
                    (end, 0, None)
                };
                smp.route = Route::Directed(d);
                smp.emit(&mut buf).map_err(|_| Drop::Malformed)?;
                Ok((arrival, hops + extra, buf, dr_end))
            }
            MgmtClass::SubnLid => {
                let (p, h) = self.lid_route(from, dlid, false)?;
                Ok((p, h, buf, None))
            }
            _ => {
                let (p, h) = self.lid_route(from, dlid, true)?;
                Ok((p, h, buf, None))
            }
        }
    }

    /// Where an endpoint listening at the node of arrival port `p` is attached: port 0 of a
    /// switch, the port itself otherwise.
    fn listener_port(&self, p: PortIdx) -> PortIdx {
        let n = self.node_of(p);
        if self.is_switch(n) {
            self.port_idx(n, 0).unwrap_or(p)
        } else {
            p
        }
    }

    fn node_of(&self, p: PortIdx) -> NodeIdx {
        self.ports[p.idx()].node
    }

    fn is_switch(&self, n: NodeIdx) -> bool {
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
    /// both ends ACTIVE.
    fn cross(&self, out: PortIdx, data: bool) -> Result<PortIdx, Drop> {
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
        Ok(r)
    }

    /// LID routing from port `from` to `dlid`: the port the packet arrives on at the node
    /// that owns the LID (any port of a switch whose port 0 owns it) and the links crossed.
    pub(crate) fn lid_route(
        &self,
        from: PortIdx,
        dlid: Lid,
        data: bool,
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
            cur = self.cross(from, data)?;
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
            let out = sw.lft.get(dlid.0 as usize).copied().unwrap_or(255);
            let outp = match self.port_idx(n, out) {
                Some(p) if out != 0 && out != 255 => p,
                _ => return Err(Drop::NoRoute),
            };
            cur = self.cross(outp, data)?;
            hops += 1;
            if hops > MAX_HOPS {
                return Err(Drop::Loop);
            }
        }
    }

    /// The outbound directed-route part, per IBA C14-9: from the node of `start`, one exit
    /// port per hop, recording each arrival port in the return path. Returns the arrival port
    /// at the last node and the links crossed.
    fn dr_out(&self, start: PortIdx, d: &mut smp::Directed) -> Result<(PortIdx, u32), Drop> {
        let n = d.hop_count;
        if d.hop_pointer != 0 {
            return Err(Drop::Malformed);
        }
        let mut cur = start;
        for h in 1..=n {
            let node = self.node_of(cur);
            if h > 1 && !self.is_switch(node) {
                return Err(Drop::NotASwitch);
            }
            let exit = d.initial_path.0[h as usize];
            let out = if self.is_switch(node) {
                self.port_idx(node, exit).filter(|_| exit != 0)
            } else {
                // A CA sends out of the port named by hop 1; it must be its own port.
                self.port_idx(node, exit)
            }
            .ok_or(Drop::BadPath)?;
            let arrived = self.cross(out, false)?;
            d.return_path.0[h as usize] = self.ports[arrived.idx()].num;
            cur = arrived;
        }
        if d.dr_dlid != Lid::PERMISSIVE && !self.is_switch(self.node_of(cur)) {
            return Err(Drop::NotASwitch);
        }
        d.hop_pointer = n + 1;
        Ok((cur, n as u32))
    }

    /// The returning directed-route part, per IBA C14-13: from the agent's node back along
    /// the return path. Returns the port where the DR part ends and the links crossed.
    fn dr_back(&self, at: PortIdx, d: &mut smp::Directed) -> Result<(PortIdx, u32), Drop> {
        let n = d.hop_count;
        let mut cur = at;
        for h in (1..=n).rev() {
            let node = self.node_of(cur);
            if h < n && !self.is_switch(node) {
                return Err(Drop::NotASwitch);
            }
            let exit = d.return_path.0[h as usize];
            let out = self.port_idx(node, exit).ok_or(Drop::BadPath)?;
            cur = self.cross(out, false)?;
        }
        d.hop_pointer = 0;
        Ok((cur, n as u32))
    }

    fn arrive(
        &mut self,
        at: Nanos,
        port: PortIdx,
        mad: [u8; 256],
        slid: Lid,
        dr_end: Option<PortIdx>,
    ) {
        let method = Method::from_raw_value(mad[3]);
        let attr_id = u16::from_be_bytes([mad[16], mad[17]]);
        let class = MgmtClass::from_raw_value(mad[1]);
        let is_smp = matches!(class, MgmtClass::SubnLid | MgmtClass::SubnDirected);
        let to_agent = is_smp
            && (matches!(method, Method::Get | Method::Set) && attr_id != attr::SM_INFO
                || method == Method::TrapRepress);
        if to_agent {
            self.schedule(
                at,
                Event::AtAgent {
                    port,
                    mad,
                    slid,
                    dr_end,
                },
            );
            return;
        }
        match self.ep_at.get(self.listener_port(port).idx()).copied() {
            Some(ep) if ep != u32::MAX => {
                let msg = Inbound { at, slid, mad };
                self.schedule(
                    at,
                    Event::Deliver {
                        ep: EndpointId(ep),
                        msg,
                    },
                );
            }
            _ => self.drop_mad(Drop::NoListener),
        }
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
        }
    }

    fn at_agent(&mut self, port: PortIdx, mad: [u8; 256], slid: Lid, dr_end: Option<PortIdx>) {
        let n = self.node_of(port);
        let node = &self.nodes[n.idx()];
        if !node.alive || node.silent {
            self.drop_mad(Drop::Injected);
            return;
        }
        let delay = self.cfg.sma_ns + node.extra_delay;
        let Ok(mut smp) = smp::Repr::parse(&mad) else {
            self.drop_mad(Drop::Malformed);
            return;
        };
        self.stats.agent_requests += 1;
        if smp.method == Method::TrapRepress {
            if let Some(t) = self.traps[n.idx()] {
                if t.tid as u32 == smp.tid.low32() {
                    self.traps[n.idx()] = None;
                }
            }
            return;
        }
        let in_port = self.ports[port.idx()].num;
        let answer = Agent {
            nodes: &mut self.nodes,
            ports: &mut self.ports,
        }
        .handle(
            n,
            in_port,
            smp.method,
            smp.attr_id,
            smp.attr_mod,
            &smp.data.0,
        );
        for e in &answer.effects {
            self.apply(*e);
        }
        smp.method = Method::GetResp;
        smp.status = answer.status;
        smp.data.0 = answer.data;
        let reply_from = self.now + delay;
        // Route the answer back.
        let back = match &mut smp.route {
            Route::Lid => self
                .lid_route(port, slid, false)
                .map(|(p, h)| (p, h, self.ports[port.idx()].info.lid)),
            Route::Directed(d) => {
                d.direction = true;
                // After a LID-routed end part, the answer first goes back, LID-routed, to the
                // switch that ended the directed part.
                let start = match dr_end {
                    Some(x) => {
                        let x0 = self.listener_port(x);
                        let lid = self.ports[x0.idx()].info.lid;
                        self.lid_route(port, lid, false).map(|(p, _)| p)
                    }
                    None => Ok(port),
                };
                start
                    .and_then(|s| self.dr_back(s, d))
                    .and_then(|(p, h)| {
                        if d.dr_slid != Lid::PERMISSIVE {
                            self.lid_route(p, d.dr_slid, false)
                                .map(|(q, h2)| (q, h + h2))
                        } else {
                            Ok((p, h))
                        }
                    })
                    .map(|(p, h)| (p, h, Lid::PERMISSIVE))
            }
        };
        let (dest, hops, src_lid) = match back {
            Ok(x) => x,
            Err(why) => {
                self.drop_mad(why);
                return;
            }
        };
        let Ok(bytes) = smp.to_bytes() else {
            self.drop_mad(Drop::Malformed);
            return;
        };
        for extra in self.wire() {
            let at = reply_from + hops as u64 * self.cfg.hop_ns + extra;
            match self.ep_at.get(self.listener_port(dest).idx()).copied() {
                Some(ep) if ep != u32::MAX => self.schedule(
                    at,
                    Event::Deliver {
                        ep: EndpointId(ep),
                        msg: Inbound {
                            at,
                            slid: src_lid,
                            mad: bytes,
                        },
                    },
                ),
                _ => self.drop_mad(Drop::NoListener),
            }
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

    /// Puts both ends of the link at `p` into a state, noting the change on switches.
    fn set_link(&mut self, p: PortIdx, state: PortState, phys: PhysPortState) {
        let mut ends = vec![p];
        if let Some(r) = self.ports[p.idx()].remote {
            ends.push(r);
        }
        for x in ends {
            let port = &mut self.ports[x.idx()];
            let changed = port.info.port_state != state || port.info.port_physical_state != phys;
            port.info.port_state = state;
            port.info.port_physical_state = phys;
            if phys == PhysPortState::LinkUp {
                port.info.link_width_active =
                    port.info.link_width_enabled & port.info.link_width_supported;
            }
            let n = port.node;
            if changed {
                self.port_changed(n);
            }
        }
    }

    /// A switch noticed a port state change: flag it and trap to the SM.
    fn port_changed(&mut self, n: NodeIdx) {
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
        let info = self.ports[p0.idx()].info;
        let interval = self.cfg.trap_interval_ns;
        // A switch traps only once it knows its own LID and its SM's.
        if info.lid.0 != 0 && info.master_sm_lid.0 != 0 {
            let mut smp = smp::Repr::request(Method::Trap, Tid(t.tid), attr::NOTICE, 0, Route::Lid);
            let notice = notice::Repr::trap_128(info.lid, info.lid);
            if smp.set_attribute(&notice).is_ok() {
                if let Ok(bytes) = smp.to_bytes() {
                    match self.lid_route(p0, info.master_sm_lid, false) {
                        Ok((dest, hops)) => {
                            self.stats.traps_sent += 1;
                            for extra in self.wire() {
                                let at = self.now + hops as u64 * self.cfg.hop_ns + extra;
                                self.arrive(at, dest, bytes, info.lid, None);
                            }
                        }
                        Err(why) => self.drop_mad(why),
                    }
                }
            }
        }
        self.schedule(self.now + interval, Event::TrapTimer { node: n });
    }

    fn trap_timer(&mut self, n: NodeIdx) {
        if self.traps[n.idx()].is_some() {
            self.send_trap(n);
        }
    }

    // ----------------------------------------------------------------------------------
    // Faults and inspection.

    /// Takes the link at `p` down (cable pulled): both ends DOWN / POLLING until `link_up`.
    pub fn link_down(&mut self, p: PortIdx) {
        self.set_link(p, PortState::Down, PhysPortState::Polling);
    }

    /// Brings the link at `p` back (cable reseated): both ends train to INIT.
    pub fn link_up(&mut self, p: PortIdx) {
        if self.ports[p.idx()].remote.is_some() {
            self.set_link(p, PortState::Init, PhysPortState::LinkUp);
        }
    }

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
