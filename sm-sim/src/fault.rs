//! Faults of the fabric's structure and timing: links going down and up or flapping, nodes
//! removed, rebooted, slowed or silenced, cables moved, and fault injection per link and
//! per node. Each can happen now ([`Sim::apply_fault`] and the named methods) or at a
//! virtual time ([`Sim::schedule_fault`], [`Sim::load_scenario`]).

use std::collections::HashMap;

use sm_core::fabric::{NodeIdx, NodeKind, PortIdx};
use sm_mad::port_info::{PhysPortState, PortState};

use crate::scenario::{
    Action, FaultParam, NodeRef, PortRef, Scenario, ScenarioError, ScenarioErrorKind, Target,
};
use crate::sim::Event;
use crate::state::new_switch;
use crate::{Fault, Faults, Nanos, Sim, SmEvent};

/// Why a fault was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FaultError {
    #[error("no node index {0}")]
    NoSuchNode(u32),
    #[error("no port index {0}")]
    NoSuchPort(u32),
    #[error("port index {0} cannot carry a cable (absent, or a switch's port 0)")]
    NotACablePort(u32),
    #[error("a port cannot be cabled to itself")]
    SelfLink,
    #[error("a flap needs a period longer than its down time, both above zero")]
    BadFlap,
    #[error("port index {0} cannot hold an SM (absent, or a switch port other than 0)")]
    NotAnEndPort(u32),
}

impl Sim {
    /// How many faults have been carried out so far (each scenario line as it happens,
    /// each flap's every change, each end of a reboot): a count that moved means the
    /// fabric may have changed.
    pub fn faults_run(&self) -> u64 {
        self.faults_run
    }

    /// Schedules `fault` at virtual time `at` (now, if `at` has passed).
    pub fn schedule_fault(&mut self, at: Nanos, fault: Fault) -> Result<(), FaultError> {
        self.check_fault(&fault)?;
        let at = at.max(self.now);
        self.schedule(at, Event::Fault(fault));
        Ok(())
    }

    /// Makes `fault` happen now.
    pub fn apply_fault(&mut self, fault: Fault) -> Result<(), FaultError> {
        self.check_fault(&fault)?;
        self.run_fault(fault);
        Ok(())
    }

    fn check_node(&self, n: NodeIdx) -> Result<(), FaultError> {
        if n.idx() < self.nodes.len() {
            Ok(())
        } else {
            Err(FaultError::NoSuchNode(n.0))
        }
    }

    fn check_cable_port(&self, p: PortIdx) -> Result<(), FaultError> {
        let port = self.ports.get(p.idx()).ok_or(FaultError::NoSuchPort(p.0))?;
        if !port.exists || port.num == 0 {
            return Err(FaultError::NotACablePort(p.0));
        }
        Ok(())
    }

    fn check_target(&self, t: &Target<NodeIdx, PortIdx>) -> Result<(), FaultError> {
        match t {
            Target::Fabric => Ok(()),
            Target::Link(p) => self.check_cable_port(*p),
            Target::Node(n) => self.check_node(*n),
        }
    }

    fn check_fault(&self, f: &Fault) -> Result<(), FaultError> {
        match f {
            Action::LinkDown(p) | Action::LinkUp(p) => self.check_cable_port(*p),
            Action::Flap {
                port, period, down, ..
            } => {
                self.check_cable_port(*port)?;
                let d = down.unwrap_or(period / 2);
                if d == 0 || d >= *period {
                    return Err(FaultError::BadFlap);
                }
                Ok(())
            }
            Action::Reboot { node, .. }
            | Action::Remove(node)
            | Action::Unplug(node)
            | Action::Plug(node)
            | Action::Silent { node, .. }
            | Action::Slow { node, .. }
            | Action::Stubborn { node, .. } => self.check_node(*node),
            Action::CloneGuid { from, to } => {
                self.check_node(*from)?;
                self.check_node(*to)
            }
            Action::SetLft { node, .. } => self.check_node(*node),
            Action::Recable { from, to } => {
                self.check_cable_port(*from)?;
                self.check_cable_port(*to)?;
                if from == to {
                    return Err(FaultError::SelfLink);
                }
                Ok(())
            }
            Action::Fault { target, .. } | Action::ClearFaults(target) => self.check_target(target),
            Action::StartSm { port, .. }
            | Action::StopSm(port)
            | Action::Join { port, .. }
            | Action::Leave { port, .. }
            | Action::Service { port, .. } => self.check_end_port(*port),
            Action::Reload(_) => Ok(()),
            Action::Probe { from, to, .. } => {
                self.check_end_port(*from)?;
                self.ports
                    .get(to.idx())
                    .filter(|p| p.exists)
                    .map(|_| ())
                    .ok_or(FaultError::NoSuchPort(to.0))
            }
        }
    }

    fn check_end_port(&self, p: PortIdx) -> Result<(), FaultError> {
        let port = self.ports.get(p.idx()).ok_or(FaultError::NoSuchPort(p.0))?;
        let switch = self.nodes[port.node.idx()].kind == NodeKind::Switch;
        if !port.exists || (switch && port.num != 0) {
            return Err(FaultError::NotAnEndPort(p.0));
        }
        Ok(())
    }

    /// Carries out a checked fault.
    pub(crate) fn run_fault(&mut self, f: Fault) {
        tracing::debug!(fault = ?f, at = self.now, "fault");
        self.faults_run += 1;
        match f {
            Action::LinkDown(p) => self.link_down(p),
            Action::LinkUp(p) => self.link_up(p),
            Action::Flap {
                port,
                period,
                count,
                down,
            } => {
                if count == 0 {
                    return;
                }
                let d = down.unwrap_or(period / 2);
                self.link_down(port);
                self.schedule(self.now + d, Event::Fault(Action::LinkUp(port)));
                if count > 1 {
                    self.schedule(
                        self.now + period,
                        Event::Fault(Action::Flap {
                            port,
                            period,
                            count: count - 1,
                            down,
                        }),
                    );
                }
            }
            Action::Reboot { node, down } => self.reboot_node(node, down),
            Action::Remove(n) => self.remove_node(n),
            Action::Unplug(n) => self.unplug_node(n),
            Action::Plug(n) => self.plug_node(n),
            Action::Silent { node, on } => self.set_silent(node, on),
            Action::Slow { node, delay } => self.set_slow(node, delay),
            Action::Stubborn { node, on } => self.set_stubborn(node, on),
            Action::Recable { from, to } => {
                let _ = self.recable(from, to);
            }
            Action::CloneGuid { from, to } => self.clone_guid(from, to),
            Action::SetLft { node, lid, port } => {
                if let Some(sw) = self.nodes[node.idx()].switch.as_deref_mut() {
                    let block = usize::from(lid) / 64;
                    let mut b = sw.lft_block(block);
                    b[usize::from(lid) % 64] = port;
                    sw.set_lft_block(block, &b);
                }
            }
            Action::Fault { target, param } => self.modify_faults(&target, |f| match param {
                FaultParam::Loss(p) => f.loss = p,
                FaultParam::Duplicate(p) => f.duplicate = p,
                FaultParam::Reorder(p, j) => {
                    f.reorder = p;
                    f.jitter_ns = j;
                }
                FaultParam::Delay(d) => f.delay_ns = d,
            }),
            Action::ClearFaults(target) => self.modify_faults(&target, |f| *f = Faults::default()),
            Action::StartSm {
                port,
                priority,
                sm_key,
            } => self.sm_events.push_back(SmEvent::Start {
                port,
                priority,
                sm_key,
            }),
            Action::StopSm(port) => self.sm_events.push_back(SmEvent::Stop { port }),
            Action::Probe {
                from,
                to,
                attr,
                m_key,
            } => self.probe(from, to, attr, m_key),
            Action::Reload(file) => self.sm_events.push_back(SmEvent::Reload { file }),
            Action::Join {
                port,
                mgid,
                pkey,
                send_only,
            } => self.sm_events.push_back(SmEvent::Join {
                port,
                mgid,
                pkey,
                send_only,
            }),
            Action::Leave { port, mgid } => self.sm_events.push_back(SmEvent::Leave { port, mgid }),
            Action::Service { port, id, lease } => {
                self.sm_events
                    .push_back(SmEvent::Service { port, id, lease })
            }
        }
    }

    fn modify_faults(&mut self, t: &Target<NodeIdx, PortIdx>, change: impl Fn(&mut Faults)) {
        let edit = |slot: &mut Option<Box<Faults>>| {
            let f = slot.get_or_insert_with(Box::default);
            change(f);
            if f.is_none() {
                *slot = None;
            }
        };
        match *t {
            Target::Fabric => change(&mut self.cfg.faults),
            Target::Link(p) => {
                let remote = self.ports.get(p.idx()).and_then(|x| x.remote);
                for x in [Some(p), remote].into_iter().flatten() {
                    if let Some(port) = self.ports.get_mut(x.idx()) {
                        edit(&mut port.faults);
                    }
                }
            }
            Target::Node(n) => {
                if let Some(node) = self.nodes.get_mut(n.idx()) {
                    edit(&mut node.faults);
                }
            }
        }
    }

    /// Fault injection on each crossing of the link at `p`, either way (`None` clears it).
    /// The setting stays with the two ports if the cable moves.
    pub fn set_link_faults(&mut self, p: PortIdx, faults: Option<Faults>) {
        let remote = self.ports.get(p.idx()).and_then(|x| x.remote);
        for x in [Some(p), remote].into_iter().flatten() {
            if let Some(port) = self.ports.get_mut(x.idx()) {
                port.faults = faults.filter(|f| !f.is_none()).map(Box::new);
            }
        }
    }

    /// Fault injection on every SMP node `n`'s agent receives or sends (`None` clears it).
    pub fn set_node_faults(&mut self, n: NodeIdx, faults: Option<Faults>) {
        if let Some(node) = self.nodes.get_mut(n.idx()) {
            node.faults = faults.filter(|f| !f.is_none()).map(Box::new);
        }
    }

    /// Takes the link at `p` down (cable pulled): both ends DOWN / POLLING until `link_up`.
    pub fn link_down(&mut self, p: PortIdx) {
        if self.ports.get(p.idx()).is_some() {
            self.set_link(p, PortState::Down, PhysPortState::Polling);
        }
    }

    /// Brings the link at `p` back (cable reseated): both ends train to INIT, if both
    /// nodes are up.
    pub fn link_up(&mut self, p: PortIdx) {
        let Some(r) = self.ports.get(p.idx()).and_then(|x| x.remote) else {
            return;
        };
        let alive = |s: &Sim, x: PortIdx| s.nodes[s.ports[x.idx()].node.idx()].alive;
        // A port whose PHY an SM switched off stays down until it is switched on.
        let off = |s: &Sim, x: PortIdx| {
            s.ports[x.idx()].info.port_physical_state == PhysPortState::Disabled
        };
        if alive(self, p) && alive(self, r) && !off(self, p) && !off(self, r) {
            self.set_link(p, PortState::Init, PhysPortState::LinkUp);
        }
    }

    fn node_ports(&self, n: NodeIdx) -> impl Iterator<Item = PortIdx> + use<> {
        let node = &self.nodes[n.idx()];
        let first = node.first_port;
        (first..=first + node.num_ports as u32).map(PortIdx)
    }

    /// Removes node `n` for good: its links go down (their other ends notice) and are gone;
    /// it answers and forwards nothing.
    pub fn remove_node(&mut self, n: NodeIdx) {
        if self.check_node(n).is_err() {
            return;
        }
        self.nodes[n.idx()].removed = true;
        self.nodes[n.idx()].alive = false;
        self.traps[n.idx()] = None;
        for p in self.node_ports(n) {
            if let Some(r) = self.ports[p.idx()].remote {
                self.set_link(p, PortState::Down, PhysPortState::Polling);
                self.ports[p.idx()].remote = None;
                self.ports[r.idx()].remote = None;
            }
        }
    }

    /// Unplugs node `n`: its links go down (the neighbours notice) and it answers and
    /// forwards nothing; its cables stay, for [`Sim::plug_node`].
    pub fn unplug_node(&mut self, n: NodeIdx) {
        if self.check_node(n).is_err() || self.nodes[n.idx()].removed {
            return;
        }
        self.nodes[n.idx()].alive = false;
        self.nodes[n.idx()].unplugged = true;
        for p in self.node_ports(n) {
            if self.ports[p.idx()].remote.is_some() {
                self.set_link(p, PortState::Down, PhysPortState::Polling);
            }
        }
        self.traps[n.idx()] = None;
    }

    /// Plugs an unplugged node `n` in again: it powers up afresh and its links train.
    pub fn plug_node(&mut self, n: NodeIdx) {
        if self.check_node(n).is_err() || !self.nodes[n.idx()].unplugged {
            return;
        }
        self.nodes[n.idx()].unplugged = false;
        self.power_up(n);
    }

    /// Reboots node `n`: its links go down; after `down` (0 = at once) it powers up with
    /// LIDs 0, empty tables, SwitchInfo and M_Key as at power-up, and its links train to
    /// INIT on both ends (the neighbours notice both changes). Silence ends; slowness and
    /// fault settings stay.
    pub fn reboot_node(&mut self, n: NodeIdx, down: Nanos) {
        let node = self.nodes.get(n.idx());
        if node.is_none_or(|x| x.removed || x.unplugged) {
            return;
        }
        // Dead first, so that only the neighbours notice the links going.
        self.nodes[n.idx()].alive = false;
        for p in self.node_ports(n) {
            if self.ports[p.idx()].remote.is_some() {
                self.set_link(p, PortState::Down, PhysPortState::Polling);
            }
        }
        self.traps[n.idx()] = None;
        if down == 0 {
            self.power_up(n);
        } else {
            self.schedule(self.now + down, Event::PowerUp { node: n });
        }
    }

    /// The end of a reboot.
    pub(crate) fn power_up(&mut self, n: NodeIdx) {
        if self.nodes[n.idx()].removed || self.nodes[n.idx()].unplugged {
            return;
        }
        let kind = self.nodes[n.idx()].kind;
        let node = &mut self.nodes[n.idx()];
        node.alive = true;
        node.silent = false;
        node.power_ups += 1;
        if kind == NodeKind::Switch {
            node.switch = Some(Box::new(new_switch()));
        }
        self.traps[n.idx()] = None;
        let ports: Vec<PortIdx> = self.node_ports(n).collect();
        for &p in &ports {
            self.ports[p.idx()].power_up(kind);
            // Until trained, the link is down at this end.
            if self.ports[p.idx()].remote.is_some() {
                let i = &mut self.ports[p.idx()].info;
                i.port_state = PortState::Down;
                i.port_physical_state = PhysPortState::Polling;
            }
        }
        for p in ports {
            self.link_up(p);
        }
        // A node coming up reports its links in PortStateChange, not with a trap.
        self.traps[n.idx()] = None;
    }

    /// Node `n`'s agent receives SMPs but answers none (`on`), or answers again.
    pub fn set_silent(&mut self, n: NodeIdx, on: bool) {
        if let Some(node) = self.nodes.get_mut(n.idx()) {
            node.silent = on;
        }
    }

    /// Node `n`'s agent keeps LinkSpeedEnabled and M_KeyLeasePeriod whatever a PortInfo Set
    /// says (`on`), or takes them again.
    pub fn set_stubborn(&mut self, n: NodeIdx, on: bool) {
        if let Some(node) = self.nodes.get_mut(n.idx()) {
            node.stubborn = on;
        }
    }

    /// Node `n`'s agent answers `delay` later than the others (0 = normal).
    pub fn set_slow(&mut self, n: NodeIdx, delay: Nanos) {
        if let Some(node) = self.nodes.get_mut(n.idx()) {
            node.extra_delay = delay;
        }
    }

    /// Node `to`'s agent answers with node `from`'s GUIDs from now on: NodeGUID,
    /// SystemImageGUID and, port by port number, PortGUID (a switch's ports all carry the
    /// switch's GUID), as a device flashed with another's image does. A port `from` lacks
    /// keeps its own.
    pub fn clone_guid(&mut self, from: NodeIdx, to: NodeIdx) {
        if self.check_node(from).is_err() || self.check_node(to).is_err() {
            return;
        }
        let src = self.nodes[from.idx()].info;
        let from_switch = self.nodes[from.idx()].kind == NodeKind::Switch;
        let to_switch = self.nodes[to.idx()].kind == NodeKind::Switch;
        let info = &mut self.nodes[to.idx()].info;
        info.node_guid = src.node_guid;
        info.system_image_guid = src.system_image_guid;
        info.port_guid = src.port_guid;
        for p in self.node_ports(to).collect::<Vec<_>>() {
            let port = &self.ports[p.idx()];
            if !port.exists {
                continue;
            }
            let guid = if to_switch || from_switch {
                Some(src.port_guid)
            } else {
                self.port_idx(from, port.num)
                    .map(|q| &self.ports[q.idx()])
                    .filter(|q| q.exists)
                    .map(|q| q.guid)
            };
            if let Some(g) = guid {
                let port = &mut self.ports[p.idx()];
                port.guid = g;
                port.guids[0] = g;
            }
        }
    }

    /// Moves the cable at `from` to `to`: `from`'s old peer and `to`'s old peer lose their
    /// links, then `from` and `to` link and train to INIT (if both nodes are up). Every end
    /// that changes is noticed.
    pub fn recable(&mut self, from: PortIdx, to: PortIdx) -> Result<(), FaultError> {
        self.check_fault(&Action::Recable { from, to })?;
        if self.ports[from.idx()].remote == Some(to) {
            return Ok(());
        }
        for x in [from, to] {
            if let Some(r) = self.ports[x.idx()].remote {
                self.set_link(x, PortState::Down, PhysPortState::Polling);
                self.ports[x.idx()].remote = None;
                self.ports[r.idx()].remote = None;
            }
        }
        self.ports[from.idx()].remote = Some(to);
        self.ports[to.idx()].remote = Some(from);
        self.link_up(from);
        Ok(())
    }

    // ----------------------------------------------------------------------------------
    // Scenarios.

    /// Resolves a scenario's nodes and ports against this fabric and schedules its events,
    /// each at its time from now. Nothing is scheduled unless every line resolves.
    pub fn load_scenario(&mut self, s: &Scenario) -> Result<(), ScenarioError> {
        let names = Names::new(self);
        let mut resolved = Vec::with_capacity(s.events.len());
        for ev in &s.events {
            let err = |kind| ScenarioError {
                file: s.file.clone(),
                line: ev.line,
                kind,
            };
            let f = names.action(self, &ev.action).map_err(err)?;
            self.check_fault(&f).map_err(|e| {
                err(match e {
                    FaultError::SelfLink => ScenarioErrorKind::SelfLink(describe(&ev.action)),
                    FaultError::BadFlap => ScenarioErrorKind::BadFlap,
                    FaultError::NotAnEndPort(_) => {
                        ScenarioErrorKind::NotAnEndPort(describe(&ev.action))
                    }
                    _ => ScenarioErrorKind::NotLinked(describe(&ev.action)),
                })
            })?;
            resolved.push((self.now.saturating_add(ev.at), f));
        }
        for (at, f) in resolved {
            self.schedule(at, Event::Fault(f));
        }
        Ok(())
    }
}

/// The port a scenario action names first, for messages.
fn describe(a: &Action) -> String {
    match a {
        Action::LinkDown(p) | Action::LinkUp(p) | Action::Flap { port: p, .. } => p.to_string(),
        Action::Recable { from, .. }
        | Action::StartSm { port: from, .. }
        | Action::StopSm(from)
        | Action::Join { port: from, .. }
        | Action::Leave { port: from, .. }
        | Action::Service { port: from, .. }
        | Action::Probe { from, .. } => from.to_string(),
        Action::Fault {
            target: Target::Link(p),
            ..
        }
        | Action::ClearFaults(Target::Link(p)) => p.to_string(),
        _ => String::new(),
    }
}

/// Name lookups for one scenario load.
struct Names {
    by_guid: HashMap<u64, NodeIdx>,
    by_desc: HashMap<String, Vec<NodeIdx>>,
}

impl Names {
    fn new(sim: &Sim) -> Names {
        let mut by_guid = HashMap::new();
        let mut by_desc: HashMap<String, Vec<NodeIdx>> = HashMap::new();
        // Port GUIDs of CA ports first, so that a node GUID wins a clash; backwards, so
        // that a GUID two nodes answer with (`clone-guid`) names the first in the file.
        for p in sim.ports.iter().rev() {
            if p.exists && sim.nodes[p.node.idx()].kind != NodeKind::Switch {
                by_guid.insert(p.guid.0, p.node);
            }
        }
        for (i, n) in sim.nodes.iter().enumerate().rev() {
            by_guid.insert(n.info.node_guid.0, NodeIdx(i as u32));
        }
        for (i, n) in sim.nodes.iter().enumerate() {
            by_desc
                .entry(n.desc.as_string())
                .or_default()
                .push(NodeIdx(i as u32));
        }
        Names { by_guid, by_desc }
    }

    fn node(&self, r: &NodeRef) -> Result<NodeIdx, ScenarioErrorKind> {
        match r {
            NodeRef::Guid(g) => self
                .by_guid
                .get(&g.0)
                .copied()
                .ok_or_else(|| ScenarioErrorKind::UnknownNode(r.to_string())),
            NodeRef::Desc(d) => match self.by_desc.get(d).map(Vec::as_slice) {
                Some([one]) => Ok(*one),
                Some(many) if many.len() > 1 => {
                    Err(ScenarioErrorKind::AmbiguousNode(r.to_string(), many.len()))
                }
                _ => Err(ScenarioErrorKind::UnknownNode(r.to_string())),
            },
        }
    }

    fn port(&self, sim: &Sim, r: &PortRef) -> Result<PortIdx, ScenarioErrorKind> {
        let n = self.node(&r.node)?;
        sim.port_idx(n, r.port)
            .filter(|p| sim.ports[p.idx()].exists)
            .ok_or_else(|| ScenarioErrorKind::NoSuchPort {
                node: r.node.to_string(),
                port: r.port,
            })
    }

    fn target(&self, sim: &Sim, t: &Target) -> Result<Target<NodeIdx, PortIdx>, ScenarioErrorKind> {
        Ok(match t {
            Target::Fabric => Target::Fabric,
            Target::Link(p) => Target::Link(self.port(sim, p)?),
            Target::Node(n) => Target::Node(self.node(n)?),
        })
    }

    fn action(&self, sim: &Sim, a: &Action) -> Result<Fault, ScenarioErrorKind> {
        Ok(match a {
            Action::LinkDown(p) => Action::LinkDown(self.port(sim, p)?),
            Action::LinkUp(p) => Action::LinkUp(self.port(sim, p)?),
            Action::Flap {
                port,
                period,
                count,
                down,
            } => Action::Flap {
                port: self.port(sim, port)?,
                period: *period,
                count: *count,
                down: *down,
            },
            Action::Reboot { node, down } => Action::Reboot {
                node: self.node(node)?,
                down: *down,
            },
            Action::Remove(n) => Action::Remove(self.node(n)?),
            Action::Unplug(n) => Action::Unplug(self.node(n)?),
            Action::Plug(n) => Action::Plug(self.node(n)?),
            Action::Silent { node, on } => Action::Silent {
                node: self.node(node)?,
                on: *on,
            },
            Action::Slow { node, delay } => Action::Slow {
                node: self.node(node)?,
                delay: *delay,
            },
            Action::Stubborn { node, on } => Action::Stubborn {
                node: self.node(node)?,
                on: *on,
            },
            Action::Recable { from, to } => Action::Recable {
                from: self.port(sim, from)?,
                to: self.port(sim, to)?,
            },
            Action::SetLft { node, lid, port } => Action::SetLft {
                node: self.node(node)?,
                lid: *lid,
                port: *port,
            },
            Action::CloneGuid { from, to } => Action::CloneGuid {
                from: self.node(from)?,
                to: self.node(to)?,
            },
            Action::Fault { target, param } => Action::Fault {
                target: self.target(sim, target)?,
                param: *param,
            },
            Action::ClearFaults(t) => Action::ClearFaults(self.target(sim, t)?),
            Action::StartSm {
                port,
                priority,
                sm_key,
            } => Action::StartSm {
                port: self.port(sim, port)?,
                priority: *priority,
                sm_key: *sm_key,
            },
            Action::StopSm(p) => Action::StopSm(self.port(sim, p)?),
            Action::Probe {
                from,
                to,
                attr,
                m_key,
            } => Action::Probe {
                from: self.port(sim, from)?,
                to: self.port(sim, to)?,
                attr: *attr,
                m_key: *m_key,
            },
            Action::Reload(file) => Action::Reload(file.clone()),
            Action::Join {
                port,
                mgid,
                pkey,
                send_only,
            } => Action::Join {
                port: self.port(sim, port)?,
                mgid: *mgid,
                pkey: *pkey,
                send_only: *send_only,
            },
            Action::Leave { port, mgid } => Action::Leave {
                port: self.port(sim, port)?,
                mgid: *mgid,
            },
            Action::Service { port, id, lease } => Action::Service {
                port: self.port(sim, port)?,
                id: *id,
                lease: *lease,
            },
        })
    }
}
