//! Directed-route discovery: from the SM's own port outwards, NodeInfo through every link,
//! then each new node's NodeDescription, SwitchInfo and PortInfo (every port of a switch,
//! the arrival port of a CA), many SMPs in flight. Answers go straight into the fabric
//! model; [`Discovery::finish`] lays it out in GUID order so the order answers came in
//! (loss, reordering) changes nothing downstream.
//!
//! A Get that goes unanswered after its retries does not stop discovery: it is asked again
//! in a later pass (up to [`PASSES`]; once only where its destination stopped answering),
//! and what is still unanswered after the last pass stays unknown: the node behind an
//! unanswered NodeInfo is not in the model, and the sweep reports it.

use std::collections::{HashSet, VecDeque};

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, NodeSpec, PortIdx, Speed, UNKNOWN_GUID};
use sm_core::idx::IdxVec;
use sm_mad::port_info::{self, PhysPortState};
use sm_mad::{
    Guid, Lid, MadStatus, Method, attr, node_description, node_info, sm_info, smp, switch_info,
};

use super::election::{RemoteSm, key_matches};
use super::mkeys::KeyHolder;
use super::model::{Discovered, DrPath, Missing, NodeFacts, PortFacts};
use super::requests::DestKey;
use super::{Purpose, Target, Work, dest};

/// Passes over what went unanswered before discovery settles for what it has.
pub(super) const PASSES: u32 = 4;

/// Why discovery found no fabric to manage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    #[error("the SM's own port did not answer")]
    NoOwnPort,
}

/// A discovery in progress: the model as far as answers have filled it, and the Gets still
/// to send.
#[derive(Debug, Default)]
pub(super) struct Discovery {
    fabric: Fabric,
    nodes: IdxVec<NodeIdx, NodeFacts>,
    ports: IdxVec<PortIdx, PortFacts>,
    own: Option<PortIdx>,
    sms: Vec<RemoteSm>,
    untrusted: Vec<(Guid, u8)>,
    /// Our SM_Key: another SM counts only if it answers with it (0: any).
    sm_key: u64,
    sm_asks: u64,
    queue: VecDeque<Work>,
    /// Gets that went unanswered this pass.
    lost: Vec<Work>,
    pass: u32,
    /// Destinations not asked this sweep (they stopped answering in earlier ones).
    skip: HashSet<DestKey>,
    /// What stays unknown.
    missing: Vec<Missing>,
}

fn get(
    purpose: Purpose,
    attr_id: u16,
    modifier: u32,
    path: DrPath,
    dest: DestKey,
    key: KeyHolder,
) -> Work {
    Work {
        purpose,
        method: Method::Get,
        attr: attr_id,
        modifier,
        to: Target::Path(path),
        data: None,
        retries: None,
        dest: Some(dest),
        key,
    }
}

impl Discovery {
    /// A discovery that starts with the SM's own node; `skip` are destinations not to ask
    /// this time.
    pub(super) fn start(skip: HashSet<DestKey>, sm_key: u64) -> Discovery {
        let mut d = Discovery {
            skip,
            sm_key,
            ..Discovery::default()
        };
        d.queue.push_back(get(
            Purpose::NodeInfo {
                path: DrPath::new(),
                from: None,
            },
            attr::NODE_INFO,
            0,
            DrPath::new(),
            dest::UNKNOWN,
            KeyHolder::Own,
        ));
        d
    }

    /// A Get went unanswered after its retries.
    pub(super) fn on_lost(&mut self, w: Work) {
        self.lost.push(w);
    }

    /// Starts the next pass over what went unanswered, if there is any and passes are
    /// left: a destination that stopped answering gets one try. False when discovery is
    /// done.
    pub(super) fn next_pass(&mut self, unresponsive: impl Fn(DestKey) -> bool) -> bool {
        if self.lost.is_empty() || self.pass + 1 >= PASSES {
            return false;
        }
        self.pass += 1;
        tracing::debug!(
            pass = self.pass,
            gets = self.lost.len(),
            "discovery: asking again what went unanswered"
        );
        for mut w in self.lost.drain(..) {
            if w.dest.is_some_and(&unresponsive) {
                w.retries = Some(0);
            }
            self.queue.push_back(w);
        }
        true
    }

    /// What a Get was for, as the report names it.
    fn missing(&self, w: &Work) -> Missing {
        let f = &self.fabric;
        let at = |p: PortIdx| {
            let port = f.port(p);
            (f.node(port.node).guid, Some(port.num))
        };
        let (guid, port, behind, what) = match &w.purpose {
            Purpose::NodeInfo { from: Some(p), .. } => {
                let (g, n) = at(*p);
                (g, n, true, "NodeInfo")
            }
            Purpose::NodeInfo { from: None, .. } => (Guid(0), None, false, "NodeInfo"),
            Purpose::NodeDesc { node } => (f.node(*node).guid, None, false, "NodeDescription"),
            Purpose::SwitchInfo { node } => (f.node(*node).guid, None, false, "SwitchInfo"),
            Purpose::PortInfo { port } => {
                let (g, n) = at(*port);
                (g, n, false, "PortInfo")
            }
            Purpose::SmInfo { port } => {
                let (g, n) = at(*port);
                (g, n, false, "SMInfo")
            }
            _ => (Guid(0), None, false, "?"),
        };
        Missing {
            guid,
            port,
            behind,
            what: what.to_string(),
        }
    }

    /// The next Get to send.
    pub(super) fn next_work(&mut self) -> Option<Work> {
        self.queue.pop_front()
    }

    pub(super) fn has_work(&self) -> bool {
        !self.queue.is_empty()
    }

    /// The SM's own port GUID, once its node answered.
    pub(super) fn own_guid(&self) -> Option<Guid> {
        self.own.map(|p| self.fabric.port(p).guid)
    }

    /// The key holder of end port `p` (a CA port, a switch's port 0); `None` for a
    /// switch's other ports.
    pub(super) fn end_holder(&self, p: PortIdx) -> Option<Guid> {
        let port = self.fabric.port(p);
        let switch = self.fabric.node(port.node).kind == NodeKind::Switch;
        (!switch || port.num == 0)
            .then_some(port.guid)
            .filter(|g| *g != UNKNOWN_GUID)
    }

    fn route_to(&self, p: PortIdx) -> Option<DrPath> {
        let n = self.fabric.port(p).node;
        if self.fabric.node(n).kind == NodeKind::Switch {
            Some(self.nodes[n].path)
        } else {
            self.ports[p].path
        }
    }

    /// An answer to one of discovery's Gets.
    pub(super) fn on_answer(&mut self, purpose: Purpose, s: &smp::Repr) {
        if s.status != MadStatus::OK {
            tracing::debug!(?purpose, status = s.status.0, "discovery Get refused");
            return;
        }
        match purpose {
            Purpose::NodeInfo { path, from } => {
                if let Ok(info) = s.attribute::<node_info::Repr>() {
                    self.on_node_info(info, path, from);
                }
            }
            Purpose::NodeDesc { node } => {
                if let Ok(nd) = s.attribute::<node_description::Repr>() {
                    self.fabric.node_mut(node).description = nd.as_string();
                }
            }
            Purpose::SwitchInfo { node } => {
                if let Ok(si) = s.attribute::<switch_info::Repr>() {
                    self.fabric.node_mut(node).enhanced_port0 = si.enhanced_port0;
                    self.nodes[node].switch_info = Some(si);
                }
            }
            Purpose::PortInfo { port } => {
                if let Ok(pi) = s.attribute::<port_info::Repr>() {
                    self.on_port_info(port, pi);
                }
            }
            Purpose::SmInfo { port } => {
                if let Ok(info) = s.attribute::<sm_info::Repr>() {
                    self.on_sm_info(port, info);
                }
            }
            other => tracing::debug!(?other, "not a discovery answer"),
        }
    }

    fn on_node_info(&mut self, info: node_info::Repr, path: DrPath, from: Option<PortIdx>) {
        let lp = info.local_port_num;
        let node = match self.fabric.node_by_guid(info.node_guid) {
            Some(n) => n,
            None => match self.add_node(&info, path) {
                Some(n) => n,
                None => return,
            },
        };
        let Some(port) = self.fabric.port_of(node, lp) else {
            tracing::warn!(node = %info.node_guid, port = lp, "NodeInfo names a port the node does not have");
            return;
        };
        if self.fabric.node(node).kind != NodeKind::Switch && self.ports[port].path.is_none() {
            if let Err(e) = self.fabric.set_port_guid(port, info.port_guid) {
                tracing::warn!(node = %info.node_guid, port = lp, "port GUID not taken: {e}");
            }
            self.ports[port].path = Some(path);
            self.queue.push_back(get(
                Purpose::PortInfo { port },
                attr::PORT_INFO,
                u32::from(lp),
                path,
                dest::node(info.node_guid),
                KeyHolder::Guid(info.port_guid),
            ));
        }
        if path.is_empty() {
            self.own = Some(port);
        }
        if let Some(from) = from {
            if let Err(e) = self.fabric.connect(from, port) {
                tracing::warn!("a port seen linked to two places; keeping the first: {e}");
            }
        }
    }

    /// A node seen for the first time: into the model, and its attributes asked for.
    fn add_node(&mut self, info: &node_info::Repr, path: DrPath) -> Option<NodeIdx> {
        let kind = match info.node_type {
            node_info::NodeType::Switch => NodeKind::Switch,
            node_info::NodeType::Router => NodeKind::Router,
            _ => NodeKind::Ca,
        };
        let spec = NodeSpec {
            kind,
            guid: info.node_guid,
            system_guid: info.system_image_guid,
            description: String::new(),
            num_ports: info.num_ports,
            vendor_id: info.vendor_id,
            device_id: info.device_id,
            revision: info.revision,
            enhanced_port0: false,
            // Each port's GUID is learned when discovery arrives through it.
            port_guids: Some(vec![UNKNOWN_GUID; usize::from(info.num_ports)]),
        };
        let node = match self.fabric.add_node(spec) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(node = %info.node_guid, "node left out of the model: {e}");
                return None;
            }
        };
        self.nodes.push(NodeFacts {
            info: *info,
            switch_info: None,
            path,
        });
        self.ports
            .resize(self.fabric.ports().len(), PortFacts::default());
        let to = dest::node(info.node_guid);
        // A switch's agent checks the switch's key (the model names switch ports by the
        // node GUID), a CA's the key of the port discovery arrived through.
        let key = KeyHolder::Guid(if kind == NodeKind::Switch {
            info.node_guid
        } else {
            info.port_guid
        });
        let ask = |purpose, attr_id, modifier| get(purpose, attr_id, modifier, path, to, key);
        self.queue
            .push_back(ask(Purpose::NodeDesc { node }, attr::NODE_DESCRIPTION, 0));
        if kind == NodeKind::Switch {
            self.queue
                .push_back(ask(Purpose::SwitchInfo { node }, attr::SWITCH_INFO, 0));
            for port in self.fabric.node_ports(node).collect::<Vec<_>>() {
                let num = u32::from(self.fabric.port(port).num);
                self.queue
                    .push_back(ask(Purpose::PortInfo { port }, attr::PORT_INFO, num));
            }
        }
        Some(node)
    }

    fn on_port_info(&mut self, port: PortIdx, pi: port_info::Repr) {
        self.ports[port].info = Some(pi);
        let p = self.fabric.port(port);
        let (num, node, linked_already) = (p.num, p.node, p.remote.is_some());
        let is_switch = self.fabric.node(node).kind == NodeKind::Switch;
        let own = self.own == Some(port);
        let Some(path) = self.route_to(port) else {
            return;
        };
        let end = !is_switch || num == 0;
        if end && !own && pi.capability_mask & port_info::cap::IS_SM != 0 {
            // A port that claims an SM: the election needs its SMInfo.
            self.sm_asks += 1;
            let to = dest::node(self.fabric.node(node).guid);
            let key = KeyHolder::Guid(self.fabric.port(port).guid);
            let w = get(Purpose::SmInfo { port }, attr::SM_INFO, 0, path, to, key);
            self.queue.push_back(w);
        }
        let linked = pi.port_physical_state == PhysPortState::LinkUp && num != 0;
        let mut next = path;
        if linked && !linked_already && (is_switch || own) && next.push(num) {
            let node_guid = self.fabric.node(node).guid;
            let w = get(
                Purpose::NodeInfo {
                    path: next,
                    from: Some(port),
                },
                attr::NODE_INFO,
                0,
                next,
                dest::behind(node_guid, num),
                KeyHolder::Behind(node_guid, num),
            );
            if w.dest.is_some_and(|d| self.skip.contains(&d)) {
                // Unresponsive in earlier sweeps: left alone until its back-off is over.
                let mut m = self.missing(&w);
                m.what = "NodeInfo (not asked: unresponsive in earlier sweeps)".into();
                self.missing.push(m);
            } else {
                self.queue.push_back(w);
            }
        }
    }

    fn on_sm_info(&mut self, port: PortIdx, info: sm_info::Repr) {
        if !key_matches(self.sm_key, &info) {
            // Logged once by the core, listed in every report.
            if !self.untrusted.iter().any(|u| u.0 == info.guid) {
                self.untrusted.push((info.guid, info.priority));
            }
            return;
        }
        let lid = self.ports[port].info.map_or(Lid(0), |pi| pi.lid);
        let path = self.route_to(port).unwrap_or_default();
        self.sms.retain(|r| r.guid != info.guid);
        self.sms.push(RemoteSm {
            guid: info.guid,
            lid,
            priority: info.priority,
            state: info.sm_state,
            act_count: info.act_count,
            path,
        });
    }

    /// The discovered fabric, in GUID order, its ports' model fields as they reported.
    pub(super) fn finish(mut self) -> Result<Discovered, DiscoverError> {
        let own = self.own.ok_or(DiscoverError::NoOwnPort)?;
        let lost = std::mem::take(&mut self.lost);
        for w in &lost {
            let m = self.missing(w);
            self.missing.push(m);
        }
        for (p, facts) in self.ports.iter_enumerated() {
            let Some(info) = facts.info else { continue };
            let port = self.fabric.port_mut(p);
            port.lid = info.lid;
            port.lmc = info.lmc;
            port.state = info.port_state;
            port.phys_state = info.port_physical_state;
            port.width = info.link_width_active;
            port.speed = Speed {
                speed: info.link_speed_active,
                ext: info.link_speed_ext_active,
                ext2: info.link_speed_ext_active2,
                fdr10: false,
            };
            port.mtu_cap = info.mtu_cap.to_raw_value();
            port.vl_cap = info.vl_cap.to_raw_value();
        }
        Ok(Discovered {
            fabric: self.fabric,
            nodes: self.nodes.into(),
            ports: self.ports.into(),
            own,
            sms: self.sms,
            untrusted: self.untrusted,
            sm_asks: self.sm_asks,
            missing: self.missing,
            former_peers: Default::default(),
            absent: Default::default(),
        }
        .canonical())
    }
}
