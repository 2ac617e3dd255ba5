//! Programming a simulated fabric the way an SM would, for tests and benchmarks.
//!
//! Always compiled, as a plain `pub mod`: the simulator exists for tests, the kit is small
//! and has no dependencies of its own, and the cross-crate tests (`tests/`, sm-daemon) use
//! it without remembering a feature flag.
//!
//! - [`routed`]: a generated fabric with LIDs assigned and minhop routes.
//! - [`Programmer`]: the settings an SM makes, implemented twice: [`Direct`] writes the
//!   simulator's state (fast; for big fabrics, benchmarks, and for breaking a setting on
//!   purpose, since it skips the agents' rules), [`BySmp`] sends directed-route SMPs from
//!   an endpoint and checks every answer, as a real SM would.
//! - [`bring_up`]: LIDs, LFTs, OperationalVLs, then every link ARMED and ACTIVE.
//! - [`programmed`]: all of it, directly, in one call.
//! - [`min_hop_ar`]: adaptive-routing groups of all equal-cost next hops.

use std::collections::VecDeque;

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx};
use sm_core::generate::{GenError, GenSpec, generate};
use sm_core::lid::{LidError, LidStore};
use sm_mad::port_info::{self, PhysPortState, PortState, VlCap};
use sm_mad::{
    Bytes, Lid, MadStatus, Method, PKey, PortNum, Tid, Wire, attr, lft, mft, pkey_table, sl2vl,
    smp, switch_info,
};
use sm_routing::topo::TopoError;
use sm_routing::{Options, RouteError, Routes, SwitchAr, Topo, engine};

use crate::sim::{EndpointId, SendError, Sim, SimConfig};
use crate::state::{LFT_CAP, MFT_CAP, PKEY_CAP};

/// Why the kit could not do what it was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KitError {
    #[error(transparent)]
    Gen(#[from] GenError),
    #[error(transparent)]
    Lid(#[from] LidError),
    #[error(transparent)]
    Topo(#[from] TopoError),
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error(transparent)]
    Mad(#[from] sm_mad::Error),
    #[error(transparent)]
    Send(#[from] SendError),
    #[error("no port slot {0:?}")]
    NoPort(PortIdx),
    #[error("node {0:?} is not a switch")]
    NotASwitch(NodeIdx),
    #[error("{0}")]
    Value(&'static str),
    #[error("no directed route reaches port slot {0:?}")]
    NoPath(PortIdx),
    #[error("no answer to attribute {attr:#06x} (modifier {attr_mod:#x}) along {path:?}")]
    NoAnswer {
        attr: u16,
        attr_mod: u32,
        path: Vec<u8>,
    },
    #[error("attribute {attr:#06x} (modifier {attr_mod:#x}) along {path:?}: status {status:?}")]
    Status {
        attr: u16,
        attr_mod: u32,
        path: Vec<u8>,
        status: MadStatus,
    },
}

/// A generated fabric with LIDs (LMC `lmc` on CA ports) and minhop routes.
pub fn routed(spec: &GenSpec, lmc: u8) -> Result<(Fabric, Routes), KitError> {
    let mut f = generate(spec)?;
    LidStore::new().assign(&mut f, lmc)?;
    let routes = {
        let topo = Topo::new(&f)?;
        engine("minhop")?.route(&topo, &Options::default())?
    };
    Ok((f, routes))
}

/// [`routed`], a simulator of it, and [`bring_up`] done directly.
pub fn programmed(
    spec: &GenSpec,
    lmc: u8,
    cfg: &BringUp,
) -> Result<(Fabric, Routes, Sim), KitError> {
    let (f, routes) = routed(spec, lmc)?;
    let mut sim = Sim::new(&f, SimConfig::default());
    bring_up(&mut Direct { sim: &mut sim }, &f, &routes, cfg)?;
    Ok((f, routes, sim))
}

/// What [`bring_up`] sets besides LIDs and LFTs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BringUp {
    /// MasterSMLID of every end port (default none: switches then send no traps).
    pub sm_lid: Lid,
    /// OperationalVLs of every linked port, capped by its VLCap (default: leave VL0 only).
    pub operational_vls: Option<VlCap>,
    /// Bring every link to ARMED then ACTIVE (default true).
    pub activate: bool,
}

impl Default for BringUp {
    fn default() -> Self {
        BringUp {
            sm_lid: Lid::NONE,
            operational_vls: None,
            activate: true,
        }
    }
}

/// The settings an SM makes on a fabric.
pub trait Programmer {
    /// LID, LMC and MasterSMLID of an end port (CA port or switch port 0).
    fn set_lid(&mut self, port: PortIdx, lid: Lid, lmc: u8, sm_lid: Lid) -> Result<(), KitError>;
    /// LinearFDBTop and the LFT blocks up to it; LIDs past `table` get no route.
    fn set_lft(&mut self, switch: NodeIdx, top: Lid, table: &[u8]) -> Result<(), KitError>;
    /// One LFT entry (255 = none).
    fn set_lft_entry(&mut self, switch: NodeIdx, lid: Lid, port: u8) -> Result<(), KitError>;
    /// The ports of multicast LID `mlid` on a switch (replacing what it had).
    fn set_mft(&mut self, switch: NodeIdx, mlid: Lid, ports: &[u8]) -> Result<(), KitError>;
    /// A port's P_Key table (at most 32 keys; the rest invalid).
    fn set_pkeys(&mut self, port: PortIdx, keys: &[PKey]) -> Result<(), KitError>;
    /// The SL-to-VL table of a CA or router port.
    fn set_sl2vl_port(&mut self, port: PortIdx, table: [u8; 16]) -> Result<(), KitError>;
    /// The SL-to-VL table of a switch for (input, output).
    fn set_sl2vl_switch(
        &mut self,
        switch: NodeIdx,
        input: u8,
        output: u8,
        table: [u8; 16],
    ) -> Result<(), KitError>;
    /// OperationalVLs of a port.
    fn set_operational_vls(&mut self, port: PortIdx, vls: VlCap) -> Result<(), KitError>;
    /// PortState (ARMED, ACTIVE; DOWN retrains the link when sent as an SMP).
    fn set_state(&mut self, port: PortIdx, state: PortState) -> Result<(), KitError>;
    /// Partition enforcement of a switch port.
    fn set_enforcement(
        &mut self,
        port: PortIdx,
        inbound: bool,
        outbound: bool,
    ) -> Result<(), KitError>;
}

/// Programs the fabric as an SM's first heavy sweep would: LIDs of every end port that has a
/// LID in `fabric` (CA ports only when cabled), the LFT of every switch from `routes` (in
/// fabric switch order, as `sm_routing::Topo` orders them), OperationalVLs, then both ends
/// of every link ARMED and then ACTIVE.
pub fn bring_up<P: Programmer + ?Sized>(
    p: &mut P,
    fabric: &Fabric,
    routes: &Routes,
    cfg: &BringUp,
) -> Result<(), KitError> {
    for e in fabric.end_ports() {
        let port = fabric.port(e);
        let is_switch = fabric.node(port.node).kind == NodeKind::Switch;
        if port.lid == Lid::NONE || (!is_switch && port.remote.is_none()) {
            continue;
        }
        let lmc = if is_switch { 0 } else { port.lmc };
        p.set_lid(e, port.lid, lmc, cfg.sm_lid)?;
    }
    for (n, table) in fabric.switches().zip(&routes.lft) {
        if table.is_empty() {
            continue;
        }
        let top = (table.len() - 1).min(LFT_CAP as usize - 1) as u16;
        p.set_lft(n, Lid(top), table)?;
    }
    if let Some(v) = cfg.operational_vls {
        for (a, b) in fabric.links() {
            for x in [a, b] {
                let cap = fabric.port(x).vl_cap;
                let vls = VlCap::from_raw_value(v.to_raw_value().min(cap));
                p.set_operational_vls(x, vls)?;
            }
        }
    }
    if cfg.activate {
        for state in [PortState::Armed, PortState::Active] {
            for (a, b) in fabric.links() {
                p.set_state(a, state)?;
                p.set_state(b, state)?;
            }
        }
    }
    Ok(())
}

/// Adaptive-routing hints of all equal-cost next hops: per switch, a group for every set of
/// two or more ports on shortest paths to a destination, in `Topo::switches` order.
pub fn min_hop_ar(fabric: &Fabric) -> Result<Vec<SwitchAr>, KitError> {
    let topo = Topo::new(fabric)?;
    let hops = topo.hop_matrix();
    let len = topo.max_lid().0 as usize + 1;
    let mut out = Vec::with_capacity(topo.num_switches());
    let mut cand: Vec<u8> = Vec::new();
    for s in 0..topo.num_switches() {
        let s = sm_routing::SwIdx(s as u32);
        let mut ar = SwitchAr {
            groups: Vec::new(),
            lid_group: vec![u16::MAX; len],
        };
        for d in &topo.dests {
            let here = hops.get(s, d.sw);
            if d.sw == s || here == u8::MAX {
                continue;
            }
            let to = hops.to(d.sw);
            cand.clear();
            cand.extend(
                topo.adj(s)
                    .iter()
                    .filter(|a| to[a.peer.idx()] == here - 1)
                    .map(|a| a.port),
            );
            cand.sort_unstable();
            cand.dedup();
            if cand.len() < 2 {
                continue;
            }
            let g = match ar.groups.iter().position(|g| *g == cand) {
                Some(g) => g,
                None => {
                    ar.groups.push(cand.clone());
                    ar.groups.len() - 1
                }
            };
            for lid in d.lids() {
                if let Some(slot) = ar.lid_group.get_mut(lid.0 as usize) {
                    *slot = g as u16;
                }
            }
        }
        out.push(ar);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Direct.

/// Writes the simulator's state directly, without the agents' rules (any state, any
/// transition), so a test can also set what no agent would accept.
#[derive(Debug)]
pub struct Direct<'a> {
    pub sim: &'a mut Sim,
}

impl Direct<'_> {
    fn port_mut(&mut self, p: PortIdx) -> Result<&mut crate::state::SimPort, KitError> {
        self.sim
            .ports
            .get_mut(p.idx())
            .filter(|x| x.exists)
            .ok_or(KitError::NoPort(p))
    }

    fn is_switch_port(&self, p: PortIdx) -> bool {
        self.sim
            .ports
            .get(p.idx())
            .and_then(|x| self.sim.nodes.get(x.node.idx()))
            .is_some_and(|n| n.kind == NodeKind::Switch)
    }

    fn switch_mut(&mut self, n: NodeIdx) -> Result<(u8, &mut crate::state::SwitchState), KitError> {
        let node = self
            .sim
            .nodes
            .get_mut(n.idx())
            .ok_or(KitError::NotASwitch(n))?;
        let num_ports = node.num_ports;
        let sw = node.switch.as_deref_mut().ok_or(KitError::NotASwitch(n))?;
        Ok((num_ports, sw))
    }
}

impl Programmer for Direct<'_> {
    fn set_lid(&mut self, port: PortIdx, lid: Lid, lmc: u8, sm_lid: Lid) -> Result<(), KitError> {
        if lmc > 7 {
            return Err(KitError::Value("LMC above 7"));
        }
        if self.is_switch_port(port) && self.sim.ports.get(port.idx()).is_some_and(|p| p.num != 0) {
            return Err(KitError::Value("only port 0 of a switch has a LID"));
        }
        let p = self.port_mut(port)?;
        p.info.lid = lid;
        p.info.lmc = lmc;
        p.info.master_sm_lid = sm_lid;
        Ok(())
    }

    fn set_lft(&mut self, switch: NodeIdx, top: Lid, table: &[u8]) -> Result<(), KitError> {
        if top.0 >= LFT_CAP {
            return Err(KitError::Value("LinearFDBTop beyond the LFT"));
        }
        let (_, sw) = self.switch_mut(switch)?;
        sw.info.linear_fdb_top = top;
        for block in 0..=lft::block_of(top) as usize {
            let mut b = [255u8; 64];
            for (i, e) in b.iter_mut().enumerate() {
                *e = table.get(block * 64 + i).copied().unwrap_or(255);
            }
            if !sw.set_lft_block(block, &b) {
                return Err(KitError::Value("LID beyond the LFT"));
            }
        }
        Ok(())
    }

    fn set_lft_entry(&mut self, switch: NodeIdx, lid: Lid, port: u8) -> Result<(), KitError> {
        let (_, sw) = self.switch_mut(switch)?;
        let block = lft::block_of(lid) as usize;
        let mut b = sw.lft_block(block);
        b[lft::slot_of(lid)] = port;
        if sw.set_lft_block(block, &b) {
            Ok(())
        } else {
            Err(KitError::Value("LID beyond the LFT"))
        }
    }

    fn set_mft(&mut self, switch: NodeIdx, mlid: Lid, ports: &[u8]) -> Result<(), KitError> {
        let off = mft_offset(mlid)?;
        let (num_ports, sw) = self.switch_mut(switch)?;
        if ports.iter().any(|&p| p > num_ports) {
            return Err(KitError::Value("MFT port beyond NumPorts"));
        }
        if sw.mft.is_empty() {
            sw.mft = vec![[0; 16]; MFT_CAP as usize];
        }
        let row = sw
            .mft
            .get_mut(off)
            .ok_or(KitError::Value("MLID beyond the MFT"))?;
        *row = [0; 16];
        for &p in ports {
            row[p as usize / 16] |= 1 << (p % 16);
        }
        Ok(())
    }

    fn set_pkeys(&mut self, port: PortIdx, keys: &[PKey]) -> Result<(), KitError> {
        if keys.len() > PKEY_CAP as usize {
            return Err(KitError::Value("more P_Keys than the table holds"));
        }
        let p = self.port_mut(port)?;
        for (i, slot) in p.pkeys_mut().iter_mut().enumerate() {
            *slot = keys.get(i).copied().unwrap_or(PKey(0));
        }
        Ok(())
    }

    fn set_sl2vl_port(&mut self, port: PortIdx, table: [u8; 16]) -> Result<(), KitError> {
        if self.is_switch_port(port) {
            return Err(KitError::Value("a switch maps SLs per (input, output)"));
        }
        self.port_mut(port)?.sl2vl = table;
        Ok(())
    }

    fn set_sl2vl_switch(
        &mut self,
        switch: NodeIdx,
        input: u8,
        output: u8,
        table: [u8; 16],
    ) -> Result<(), KitError> {
        let (num_ports, sw) = self.switch_mut(switch)?;
        if input > num_ports || output > num_ports {
            return Err(KitError::Value("SL2VL port beyond NumPorts"));
        }
        sw.set_sl2vl(num_ports, input, output, table);
        Ok(())
    }

    fn set_operational_vls(&mut self, port: PortIdx, vls: VlCap) -> Result<(), KitError> {
        self.port_mut(port)?.info.operational_vls = vls;
        Ok(())
    }

    fn set_state(&mut self, port: PortIdx, state: PortState) -> Result<(), KitError> {
        let p = self.port_mut(port)?;
        p.info.port_state = state;
        if state != PortState::Down && p.remote.is_some() {
            p.info.port_physical_state = PhysPortState::LinkUp;
        }
        Ok(())
    }

    fn set_enforcement(
        &mut self,
        port: PortIdx,
        inbound: bool,
        outbound: bool,
    ) -> Result<(), KitError> {
        let p = self.port_mut(port)?;
        p.info.partition_enforcement_inbound = inbound;
        p.info.partition_enforcement_outbound = outbound;
        Ok(())
    }
}

fn mft_offset(mlid: Lid) -> Result<usize, KitError> {
    if !mlid.is_multicast() || mlid.0 - Lid::MIN_MULTICAST.0 >= MFT_CAP {
        return Err(KitError::Value("MLID outside the MFT"));
    }
    Ok((mlid.0 - Lid::MIN_MULTICAST.0) as usize)
}

// ---------------------------------------------------------------------------------------
// By SMP.

/// Programs the fabric with directed-route SMPs sent from an endpoint, waiting for each
/// answer in virtual time and refusing any status but success. Directed routes are the
/// shortest over the cabling, found when the programmer is made. Other MADs that reach the
/// endpoint meanwhile (traps) are discarded.
#[derive(Debug)]
pub struct BySmp<'a> {
    sim: &'a mut Sim,
    ep: EndpointId,
    /// Per port slot: the exit ports that make an SMP arrive at that CA port, or at the
    /// node for a switch's slots.
    paths: Vec<Option<Vec<u8>>>,
    tid: u64,
    /// Requests sent so far.
    pub requests: u64,
}

impl<'a> BySmp<'a> {
    /// Attaches an endpoint at `sm_port` (a CA port or a switch's port 0).
    pub fn new(sim: &'a mut Sim, sm_port: PortIdx) -> Result<BySmp<'a>, KitError> {
        let paths = dr_paths(sim, sm_port)?;
        let ep = sim.attach(sm_port);
        Ok(BySmp {
            sim,
            ep,
            paths,
            tid: 0,
            requests: 0,
        })
    }

    /// The simulator.
    pub fn sim(&mut self) -> &mut Sim {
        self.sim
    }

    /// The endpoint the SMPs leave from.
    pub fn endpoint(&self) -> EndpointId {
        self.ep
    }

    /// The directed route to a port (to its node, for a switch port).
    pub fn path(&self, port: PortIdx) -> Result<&[u8], KitError> {
        self.paths
            .get(port.idx())
            .and_then(|p| p.as_deref())
            .ok_or(KitError::NoPath(port))
    }

    fn port_num(&self, port: PortIdx) -> Result<(u8, bool), KitError> {
        let p = self
            .sim
            .ports
            .get(port.idx())
            .ok_or(KitError::NoPort(port))?;
        let sw = self.sim.nodes[p.node.idx()].kind == NodeKind::Switch;
        Ok((p.num, sw))
    }

    /// One request and its answer's data.
    pub fn rpc(
        &mut self,
        port: PortIdx,
        method: Method,
        attr_id: u16,
        attr_mod: u32,
        data: Option<[u8; 64]>,
    ) -> Result<[u8; 64], KitError> {
        let path = self.path(port)?.to_vec();
        self.tid += 1;
        let tid = self.tid;
        let mut req = smp::Repr::dr_get(Tid(tid), attr_id, attr_mod, &path)?;
        req.method = method;
        if let Some(d) = data {
            req.data = Bytes(d);
        }
        let bytes = req.to_bytes()?;
        self.sim.send(self.ep, Lid::PERMISSIVE, &bytes)?;
        self.requests += 1;
        let deadline = self.sim.now() + 1_000_000;
        let mut answer = None;
        while answer.is_none() {
            match self.sim.next_event() {
                Some(t) if t <= deadline => self.sim.advance(t),
                _ => break,
            }
            while let Some(m) = self.sim.recv(self.ep) {
                if let Ok(r) = smp::Repr::parse(&m.mad) {
                    if r.tid.low32() == tid as u32 && r.method == Method::GetResp {
                        answer = Some(r);
                    }
                }
            }
        }
        let r = answer.ok_or_else(|| KitError::NoAnswer {
            attr: attr_id,
            attr_mod,
            path: path.clone(),
        })?;
        if r.status != MadStatus::OK {
            return Err(KitError::Status {
                attr: attr_id,
                attr_mod,
                path,
                status: r.status,
            });
        }
        Ok(r.data.0)
    }

    /// Get, edit and Set a port's PortInfo (state fields left unchanged unless edited).
    pub fn edit_port_info(
        &mut self,
        port: PortIdx,
        edit: impl FnOnce(&mut port_info::Repr),
    ) -> Result<(), KitError> {
        let (num, _) = self.port_num(port)?;
        let d = self.rpc(port, Method::Get, attr::PORT_INFO, num as u32, None)?;
        let mut pi = port_info::Repr::parse(&d)?;
        pi.port_state = PortState::NoChange;
        pi.port_physical_state = PhysPortState::NoChange;
        edit(&mut pi);
        self.rpc(
            port,
            Method::Set,
            attr::PORT_INFO,
            num as u32,
            Some(emit(&pi)?),
        )?;
        Ok(())
    }

    fn switch_port0(&self, n: NodeIdx) -> Result<PortIdx, KitError> {
        let node = self.sim.nodes.get(n.idx()).ok_or(KitError::NotASwitch(n))?;
        if node.kind != NodeKind::Switch {
            return Err(KitError::NotASwitch(n));
        }
        Ok(PortIdx(node.first_port))
    }
}

fn emit<W: Wire>(w: &W) -> Result<[u8; 64], KitError> {
    let mut d = [0u8; 64];
    w.emit(&mut d)?;
    Ok(d)
}

/// Shortest directed routes from `from` over the cabling.
fn dr_paths(sim: &Sim, from: PortIdx) -> Result<Vec<Option<Vec<u8>>>, KitError> {
    let sp = sim
        .ports
        .get(from.idx())
        .filter(|p| p.exists)
        .ok_or(KitError::NoPort(from))?;
    let mut paths: Vec<Option<Vec<u8>>> = vec![None; sim.ports.len()];
    let mut queue: VecDeque<(NodeIdx, Vec<u8>)> = VecDeque::new();
    let visit = |paths: &mut Vec<Option<Vec<u8>>>,
                 queue: &mut VecDeque<(NodeIdx, Vec<u8>)>,
                 at: PortIdx,
                 path: Vec<u8>| {
        let p = &sim.ports[at.idx()];
        let node = &sim.nodes[p.node.idx()];
        if node.kind == NodeKind::Switch {
            let first = node.first_port as usize;
            if paths[first].is_none() {
                for slot in paths
                    .iter_mut()
                    .skip(first)
                    .take(node.num_ports as usize + 1)
                {
                    *slot = Some(path.clone());
                }
                queue.push_back((p.node, path));
            }
        } else if paths[at.idx()].is_none() {
            paths[at.idx()] = Some(path);
        }
    };
    if sim.nodes[sp.node.idx()].kind == NodeKind::Switch {
        visit(&mut paths, &mut queue, from, Vec::new());
    } else {
        paths[from.idx()] = Some(Vec::new());
        if let Some(r) = sp.remote {
            visit(&mut paths, &mut queue, r, vec![sp.num]);
        }
    }
    while let Some((n, path)) = queue.pop_front() {
        if path.len() >= smp::MAX_HOPS as usize {
            continue;
        }
        let node = &sim.nodes[n.idx()];
        for k in 1..=node.num_ports {
            let slot = node.first_port as usize + k as usize;
            if let Some(r) = sim.ports.get(slot).and_then(|p| p.remote) {
                let mut next = path.clone();
                next.push(k);
                visit(&mut paths, &mut queue, r, next);
            }
        }
    }
    Ok(paths)
}

impl Programmer for BySmp<'_> {
    fn set_lid(&mut self, port: PortIdx, lid: Lid, lmc: u8, sm_lid: Lid) -> Result<(), KitError> {
        self.edit_port_info(port, |pi| {
            pi.lid = lid;
            pi.lmc = lmc;
            pi.master_sm_lid = sm_lid;
        })
    }

    fn set_lft(&mut self, switch: NodeIdx, top: Lid, table: &[u8]) -> Result<(), KitError> {
        let p0 = self.switch_port0(switch)?;
        let d = self.rpc(p0, Method::Get, attr::SWITCH_INFO, 0, None)?;
        let mut si = switch_info::Repr::parse(&d)?;
        si.linear_fdb_top = top;
        si.port_state_change = false;
        self.rpc(p0, Method::Set, attr::SWITCH_INFO, 0, Some(emit(&si)?))?;
        for block in 0..=lft::block_of(top) {
            let b = lft::Repr::from_table(table, block);
            self.rpc(
                p0,
                Method::Set,
                attr::LINEAR_FORWARDING_TABLE,
                lft::attr_mod(block),
                Some(emit(&b)?),
            )?;
        }
        Ok(())
    }

    fn set_lft_entry(&mut self, switch: NodeIdx, lid: Lid, port: u8) -> Result<(), KitError> {
        let p0 = self.switch_port0(switch)?;
        let block = lft::block_of(lid);
        let m = lft::attr_mod(block);
        let d = self.rpc(p0, Method::Get, attr::LINEAR_FORWARDING_TABLE, m, None)?;
        let mut b = lft::Repr::parse(&d)?;
        b.port_block[lft::slot_of(lid)] = PortNum(port);
        self.rpc(
            p0,
            Method::Set,
            attr::LINEAR_FORWARDING_TABLE,
            m,
            Some(emit(&b)?),
        )?;
        Ok(())
    }

    fn set_mft(&mut self, switch: NodeIdx, mlid: Lid, ports: &[u8]) -> Result<(), KitError> {
        mft_offset(mlid)?;
        let p0 = self.switch_port0(switch)?;
        let num_ports = self.sim.nodes[switch.idx()].num_ports;
        let block = mft::block_of(mlid).ok_or(KitError::Value("MLID outside the MFT"))?;
        let slot = mft::slot_of(mlid);
        for pos in 0..mft::positions_for(num_ports) {
            let m = mft::Modifier::new(block, pos)?.to_attr_mod();
            let d = self.rpc(p0, Method::Get, attr::MULTICAST_FORWARDING_TABLE, m, None)?;
            let mut b = mft::Repr::parse(&d)?;
            b.port_mask_block[slot] = 0;
            for &p in ports
                .iter()
                .filter(|&&p| mft::position_of(PortNum(p)) == pos)
            {
                b.add_port(slot, PortNum(p));
            }
            self.rpc(
                p0,
                Method::Set,
                attr::MULTICAST_FORWARDING_TABLE,
                m,
                Some(emit(&b)?),
            )?;
        }
        Ok(())
    }

    fn set_pkeys(&mut self, port: PortIdx, keys: &[PKey]) -> Result<(), KitError> {
        if keys.len() > pkey_table::ENTRIES {
            return Err(KitError::Value("more P_Keys than the table holds"));
        }
        let (num, sw) = self.port_num(port)?;
        let m = if sw {
            pkey_table::Modifier::switch_port(PortNum(num), 0)
        } else {
            pkey_table::Modifier::new(0)
        };
        let t = pkey_table::Repr::from_keys(keys);
        self.rpc(
            port,
            Method::Set,
            attr::P_KEY_TABLE,
            m.to_attr_mod(),
            Some(emit(&t)?),
        )?;
        Ok(())
    }

    fn set_sl2vl_port(&mut self, port: PortIdx, table: [u8; 16]) -> Result<(), KitError> {
        let (_, sw) = self.port_num(port)?;
        if sw {
            return Err(KitError::Value("a switch maps SLs per (input, output)"));
        }
        let t = sl2vl::Repr::new(table);
        self.rpc(
            port,
            Method::Set,
            attr::SL_TO_VL_MAPPING_TABLE,
            0,
            Some(emit(&t)?),
        )?;
        Ok(())
    }

    fn set_sl2vl_switch(
        &mut self,
        switch: NodeIdx,
        input: u8,
        output: u8,
        table: [u8; 16],
    ) -> Result<(), KitError> {
        let p0 = self.switch_port0(switch)?;
        let t = sl2vl::Repr::new(table);
        let m = ((input as u32) << 8) | output as u32;
        self.rpc(
            p0,
            Method::Set,
            attr::SL_TO_VL_MAPPING_TABLE,
            m,
            Some(emit(&t)?),
        )?;
        Ok(())
    }

    fn set_operational_vls(&mut self, port: PortIdx, vls: VlCap) -> Result<(), KitError> {
        self.edit_port_info(port, |pi| pi.operational_vls = vls)
    }

    fn set_state(&mut self, port: PortIdx, state: PortState) -> Result<(), KitError> {
        self.edit_port_info(port, |pi| pi.port_state = state)
    }

    fn set_enforcement(
        &mut self,
        port: PortIdx,
        inbound: bool,
        outbound: bool,
    ) -> Result<(), KitError> {
        self.edit_port_info(port, |pi| {
            pi.partition_enforcement_inbound = inbound;
            pi.partition_enforcement_outbound = outbound;
        })
    }
}
