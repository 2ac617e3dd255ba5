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
//!
//! A GUID two devices answer with (a cloned or mis-flashed HCA or switch) shows as one node
//! met in two places: a port seen linked to two peers, a NodeInfo that disagrees with the
//! first one (type, ports, vendor, device), a port whose peer answers as the port itself,
//! a port GUID another port already holds. The device met first is kept, the other left
//! out and reported ([`Discovery::take_duplicates`]). A switch met again through a port it
//! had not read yet only claims that link: the switch's own look through the port, from
//! its own route, decides, and when two claims meet on one port that look is asked for.
//! Without a conflict no claim is checked, so discovery still asks through each link once.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, NodeSpec, PortIdx, Speed, UNKNOWN_GUID};
use sm_core::idx::IdxVec;
use sm_mad::port_info::{self, PhysPortState};
use sm_mad::{
    Guid, Lid, MadStatus, Method, attr, node_description, node_info, sm_info, smp, switch_info,
};

use super::election::{RemoteSm, key_matches};
use super::mkeys::KeyHolder;
use super::model::{Discovered, DrPath, Missing, NodeFacts, PortFacts};
use super::report::DuplicateGuid;
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
    /// The port each node was first reached through (`None`: the SM's own node).
    entry: IdxVec<NodeIdx, Option<PortIdx>>,
    /// Ports of switches met before, linked by a NodeInfo that arrived through them. The
    /// switch's own look through the port confirms or overturns the link.
    claims: HashSet<PortIdx>,
    /// Further arrivals at a claimed port (the ports they came from), until the switch's
    /// own look through it says which is its peer.
    disputes: HashMap<PortIdx, Vec<PortIdx>>,
    /// Ports whose own look was asked for to settle a dispute.
    arbitrating: HashSet<PortIdx>,
    /// GUIDs met in two places, by kind and GUID.
    duplicates: BTreeMap<(&'static str, Guid), DuplicateGuid>,
}

/// A directed route as `smpquery -D` takes it.
fn dr(path: &DrPath) -> String {
    std::iter::once(0)
        .chain(path.iter().copied())
        .map(|h| h.to_string())
        .collect::<Vec<_>>()
        .join(",")
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

/// Logs each duplicated GUID once: as an error when a sweep first finds it (not found by
/// the sweep before), and when a sweep no longer does.
pub(super) fn log_duplicates(before: &[DuplicateGuid], now: &[DuplicateGuid]) {
    let same = |a: &DuplicateGuid, b: &DuplicateGuid| a.kind == b.kind && a.guid == b.guid;
    for d in now.iter().filter(|d| !before.iter().any(|b| same(b, d))) {
        tracing::error!(
            guid = %d.guid,
            kind = %d.kind,
            kept = %d.kept,
            left_out = ?d.left_out,
            why = %d.why,
            "duplicate GUID: two devices answer with it; the one met first is kept, the other left out of the subnet"
        );
    }
    for d in before.iter().filter(|d| !now.iter().any(|n| same(n, d))) {
        tracing::info!(guid = %d.guid, kind = %d.kind, "duplicate GUID no longer seen");
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
        if let Some(f) = from {
            if !self.own_look(f, &info, lp) {
                return;
            }
        }
        let (node, fresh) = match self.fabric.node_by_guid(info.node_guid) {
            Some(n) => {
                if let Some(why) = self.disagrees(n, &info) {
                    self.duplicate("node", info.node_guid, n, from, why);
                    return;
                }
                (n, false)
            }
            None => {
                if let Some(holder) = self.port_guid_holder(&info) {
                    let why = "a node met elsewhere already holds it".to_string();
                    self.duplicate("port", Self::port_guid(&info), holder, from, why);
                    return;
                }
                match self.add_node(&info, path, from) {
                    Some(n) => (n, true),
                    None => return,
                }
            }
        };
        let Some(port) = self.fabric.port_of(node, lp) else {
            tracing::warn!(node = %info.node_guid, port = lp, "NodeInfo names a port the node does not have");
            return;
        };
        if from == Some(port) {
            let why = format!("the port behind its port {lp} answers as that port itself");
            self.duplicate("node", info.node_guid, node, from, why);
            return;
        }
        if self.fabric.node(node).kind != NodeKind::Switch && self.ports[port].path.is_none() {
            if self.fabric.set_port_guid(port, info.port_guid).is_err() {
                if let Some(holder) = self.port_guid_holder(&info) {
                    let why = format!("port {lp} of {} answers with it", info.node_guid);
                    self.duplicate("port", info.port_guid, holder, from, why);
                } else {
                    tracing::warn!(node = %info.node_guid, port = lp, "port GUID not taken");
                }
                return;
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
            self.link(from, port, fresh);
        }
    }

    /// A NodeInfo sent through `f` (from its node's own route) answered: that is what is
    /// behind `f`. A link an arrival only claimed there gives way to it; false when the
    /// answer contradicts a link `f`'s node had seen itself (something moved meanwhile:
    /// the first stays).
    fn own_look(&mut self, f: PortIdx, info: &node_info::Repr, lp: u8) -> bool {
        let Some(o) = self.fabric.port(f).remote else {
            return true;
        };
        let answered = self
            .fabric
            .node_by_guid(info.node_guid)
            .and_then(|n| self.fabric.port_of(n, lp));
        if answered == Some(o) {
            // Both ends agree.
            self.claims.remove(&f);
            return true;
        }
        if !self.claims.remove(&f) {
            let (node, num) = self.name(f);
            tracing::warn!(
                node = %node,
                port = num,
                now = %info.node_guid,
                now_port = lp,
                "a port seen linked to two places (a cable moved?); keeping the first"
            );
            return false;
        }
        // The arrival came from another device with this switch's GUID.
        let n = self.fabric.port(f).node;
        let why = format!(
            "port {} of the first leads to {}[{lp}]",
            self.fabric.port(f).num,
            info.node_guid
        );
        self.duplicate("node", self.fabric.node(n).guid, n, Some(o), why);
        self.fabric.disconnect(f);
        true
    }

    /// Links `from` (whose node's own route sent the NodeInfo) to `port`, where it
    /// arrived; `fresh`: the node was first met by this arrival.
    fn link(&mut self, from: PortIdx, port: PortIdx, fresh: bool) {
        let n = self.fabric.port(port).node;
        let switch = self.fabric.node(n).kind == NodeKind::Switch;
        match self.fabric.port(port).remote {
            Some(o) if o == from => {}
            Some(_) if switch && self.claims.contains(&port) => {
                // Two arrivals claim one port of a switch: its own look decides.
                self.disputes.entry(port).or_default().push(from);
                self.arbitrate(port);
            }
            Some(_) => {
                let why = format!(
                    "port {} seen linked to two places",
                    self.fabric.port(port).num
                );
                let guid = self.fabric.node(n).guid;
                self.duplicate("node", guid, n, Some(from), why);
            }
            None => match self.fabric.connect(from, port) {
                Ok(()) if switch && !fresh => {
                    self.claims.insert(port);
                }
                Ok(()) => {}
                Err(e) => tracing::warn!("link not taken into the model: {e}"),
            },
        }
        self.settle(from);
    }

    /// Asks for the look of `port`'s switch through it, from the switch's own route.
    fn arbitrate(&mut self, port: PortIdx) {
        if !self.arbitrating.insert(port) {
            return;
        }
        let p = self.fabric.port(port);
        let (num, guid) = (p.num, self.fabric.node(p.node).guid);
        let mut path = self.nodes[p.node].path;
        if path.push(num) {
            self.queue.push_back(get(
                Purpose::NodeInfo {
                    path,
                    from: Some(port),
                },
                attr::NODE_INFO,
                0,
                path,
                dest::behind(guid, num),
                KeyHolder::Behind(guid, num),
            ));
        }
    }

    /// The disputes at `x` once its own look answered: every arrival that is not its peer
    /// came from another device with its GUID.
    fn settle(&mut self, x: PortIdx) {
        let Some(arrivals) = self.disputes.remove(&x) else {
            return;
        };
        let peer = self.fabric.port(x).remote;
        let n = self.fabric.port(x).node;
        let guid = self.fabric.node(n).guid;
        for f in arrivals.into_iter().filter(|&f| Some(f) != peer) {
            let why = format!("port {} seen linked to two places", self.fabric.port(x).num);
            self.duplicate("node", guid, n, Some(f), why);
        }
    }

    /// How a NodeInfo for a GUID already met shows another device, if it does.
    fn disagrees(&self, n: NodeIdx, info: &node_info::Repr) -> Option<String> {
        let first = &self.nodes[n].info;
        let what = |i: &node_info::Repr| {
            format!(
                "{:?} with {} ports, vendor {:#x} device {:#x}",
                i.node_type, i.num_ports, i.vendor_id, i.device_id
            )
        };
        let switch = first.node_type == node_info::NodeType::Switch;
        let differs = first.node_type != info.node_type
            || first.num_ports != info.num_ports
            || first.vendor_id != info.vendor_id
            || first.device_id != info.device_id
            || (switch && first.port_guid != info.port_guid);
        differs.then(|| {
            format!(
                "a NodeInfo of {} where the first is {}",
                what(info),
                what(first)
            )
        })
    }

    /// The GUID the model names the answering port by (a switch's ports go by its node
    /// GUID).
    fn port_guid(info: &node_info::Repr) -> Guid {
        if info.node_type == node_info::NodeType::Switch {
            info.node_guid
        } else {
            info.port_guid
        }
    }

    /// The node already holding the answering port's GUID, for a node not met before.
    fn port_guid_holder(&self, info: &node_info::Repr) -> Option<NodeIdx> {
        let g = Self::port_guid(info);
        let f = &self.fabric;
        f.port_by_guid(g)
            .map(|p| f.port(p).node)
            .or_else(|| f.node_by_guid(g).filter(|_| g != info.node_guid))
    }

    fn name(&self, p: PortIdx) -> (Guid, u8) {
        let port = self.fabric.port(p);
        (self.fabric.node(port.node).guid, port.num)
    }

    /// Where a device is: behind the port it was reached through (with the route through
    /// it), or the SM's own node.
    fn place(&self, behind: Option<PortIdx>) -> String {
        let Some(p) = behind else {
            return "the SM's own node".into();
        };
        let (g, num) = self.name(p);
        // Every look through a port goes from its node's own route.
        let mut path = self.route_to(p).unwrap_or_default();
        let route = if path.push(num) {
            dr(&path)
        } else {
            "?".into()
        };
        format!("behind {g}[{num}] (DR path {route})")
    }

    /// `guid` (of `kind`, held by node `first`) answered again from another device, reached
    /// behind `from`.
    fn duplicate(
        &mut self,
        kind: &'static str,
        guid: Guid,
        first: NodeIdx,
        from: Option<PortIdx>,
        why: String,
    ) {
        let elsewhere = self.place(from);
        let kept = self.place(self.entry[first]);
        let d = self
            .duplicates
            .entry((kind, guid))
            .or_insert_with(|| DuplicateGuid {
                guid: guid.to_string(),
                kind: kind.into(),
                kept,
                left_out: Vec::new(),
                why,
            });
        if !d.left_out.contains(&elsewhere) {
            tracing::debug!(%guid, kind, elsewhere, "a GUID met again in another place");
            d.left_out.push(elsewhere);
        }
    }

    /// The GUIDs met in two places, in GUID order. Disputes never settled (the switch's own
    /// look went unanswered) count as well: one of the arrivals is another device.
    pub(super) fn take_duplicates(&mut self) -> Vec<DuplicateGuid> {
        let open: Vec<(PortIdx, Vec<PortIdx>)> = self.disputes.drain().collect();
        for (x, arrivals) in open {
            let n = self.fabric.port(x).node;
            let (guid, num) = self.name(x);
            for f in arrivals {
                let why = format!("two devices answer as its port {num}");
                self.duplicate("node", guid, n, Some(f), why);
            }
        }
        std::mem::take(&mut self.duplicates)
            .into_values()
            .map(|mut d| {
                d.left_out.sort();
                d
            })
            .collect()
    }

    /// A node seen for the first time: into the model, and its attributes asked for.
    fn add_node(
        &mut self,
        info: &node_info::Repr,
        path: DrPath,
        from: Option<PortIdx>,
    ) -> Option<NodeIdx> {
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
        self.entry.push(from);
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
            // It carries our SM_Key: an SM that hides its own from requesters without
            // its M_Key shows it to one that proves it holds the same SM_Key.
            let ours = sm_mad::sm_info::Repr {
                sm_key: self.sm_key,
                ..sm_mad::sm_info::Repr::default()
            };
            let mut w = get(Purpose::SmInfo { port }, attr::SM_INFO, 0, path, to, key);
            w.data = super::plan::emit_data(&ours);
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
            // A look asked for to settle a dispute: the duplicate is reported instead.
            if matches!(w.purpose, Purpose::NodeInfo { from: Some(p), .. } if self.arbitrating.contains(&p))
            {
                continue;
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use sm_mad::Tid;
    use sm_mad::node_info::NodeType;

    fn info(
        node_type: NodeType,
        guid: u64,
        port_guid: u64,
        ports: u8,
        local: u8,
    ) -> node_info::Repr {
        node_info::Repr {
            base_version: 1,
            class_version: 1,
            node_type,
            num_ports: ports,
            system_image_guid: Guid(guid),
            node_guid: Guid(guid),
            port_guid: Guid(port_guid),
            partition_cap: 16,
            device_id: 1,
            revision: 0,
            local_port_num: local,
            vendor_id: 2,
        }
    }

    fn answer(d: &mut Discovery, path: &[u8], from: Option<PortIdx>, ni: node_info::Repr) {
        let mut s = smp::Repr::dr_get(Tid(1), attr::NODE_INFO, 0, path).unwrap();
        s.method = Method::GetResp;
        s.set_attribute(&ni).unwrap();
        let path = DrPath::try_from(path).unwrap();
        d.on_answer(Purpose::NodeInfo { path, from }, &s);
    }

    fn port(d: &Discovery, guid: u64, num: u8) -> PortIdx {
        let n = d.fabric.node_by_guid(Guid(guid)).unwrap();
        d.fabric.port_of(n, num).unwrap()
    }

    /// The SM's own host (0x10, port 0x11) and the switch 0x20 (8 ports) on its port 1,
    /// reached at its port 1.
    fn started() -> Discovery {
        let mut d = Discovery::start(HashSet::new(), 0);
        answer(&mut d, &[], None, info(NodeType::Ca, 0x10, 0x11, 1, 1));
        let own = port(&d, 0x10, 1);
        answer(
            &mut d,
            &[1],
            Some(own),
            info(NodeType::Switch, 0x20, 0x20, 8, 1),
        );
        d
    }

    #[test]
    fn a_port_whose_peer_answers_as_itself_is_a_copy_back_to_back() {
        let mut d = Discovery::start(HashSet::new(), 0);
        answer(&mut d, &[], None, info(NodeType::Ca, 0x10, 0x11, 1, 1));
        let own = port(&d, 0x10, 1);
        answer(
            &mut d,
            &[1],
            Some(own),
            info(NodeType::Ca, 0x10, 0x11, 1, 1),
        );
        let dups = d.take_duplicates();
        assert_eq!(dups.len(), 1, "{dups:?}");
        assert_eq!(dups[0].guid, Guid(0x10).to_string());
        assert_eq!(dups[0].kept, "the SM's own node");
        assert_eq!(
            dups[0].left_out,
            [format!("behind {}[1] (DR path 0,1)", Guid(0x10))]
        );
        assert_eq!(d.fabric.port(own).remote, None);
    }

    #[test]
    fn a_port_guid_another_node_holds_leaves_the_second_out() {
        let mut d = started();
        let sw2 = port(&d, 0x20, 2);
        answer(
            &mut d,
            &[1, 2],
            Some(sw2),
            info(NodeType::Ca, 0x30, 0x11, 1, 1),
        );
        let dups = d.take_duplicates();
        assert_eq!(dups.len(), 1, "{dups:?}");
        assert_eq!(
            (dups[0].kind.as_str(), dups[0].guid.clone()),
            ("port", Guid(0x11).to_string())
        );
        assert_eq!(dups[0].kept, "the SM's own node");
        assert_eq!(
            dups[0].left_out,
            [format!("behind {}[2] (DR path 0,1,2)", Guid(0x20))]
        );
        assert!(d.fabric.node_by_guid(Guid(0x30)).is_none());
        assert_eq!(d.fabric.port(sw2).remote, None);
    }

    #[test]
    fn a_link_met_from_both_ends_is_one_switch() {
        // 0x20[2] -- [1]0x40[3] -- [3]0x20: the switch 0x20 is met again through 0x40,
        // then looks through its port 3 itself and finds 0x40 there.
        let mut d = started();
        let sw2 = port(&d, 0x20, 2);
        answer(
            &mut d,
            &[1, 2],
            Some(sw2),
            info(NodeType::Switch, 0x40, 0x40, 8, 1),
        );
        let other3 = port(&d, 0x40, 3);
        answer(
            &mut d,
            &[1, 2, 3],
            Some(other3),
            info(NodeType::Switch, 0x20, 0x20, 8, 3),
        );
        let sw3 = port(&d, 0x20, 3);
        assert_eq!(d.fabric.port(sw3).remote, Some(other3));
        assert!(d.claims.contains(&sw3), "a claim until 0x20 looks itself");
        answer(
            &mut d,
            &[1, 3],
            Some(sw3),
            info(NodeType::Switch, 0x40, 0x40, 8, 3),
        );
        assert!(d.claims.is_empty());
        assert!(d.take_duplicates().is_empty());
    }

    #[test]
    fn a_claim_the_switch_does_not_confirm_came_from_a_copy() {
        // Behind 0x40[3] a second 0x20 answers at its port 3; the first 0x20's own port 3
        // leads to 0x50.
        let mut d = started();
        let sw2 = port(&d, 0x20, 2);
        answer(
            &mut d,
            &[1, 2],
            Some(sw2),
            info(NodeType::Switch, 0x40, 0x40, 8, 1),
        );
        let other3 = port(&d, 0x40, 3);
        answer(
            &mut d,
            &[1, 2, 3],
            Some(other3),
            info(NodeType::Switch, 0x20, 0x20, 8, 3),
        );
        let sw3 = port(&d, 0x20, 3);
        answer(
            &mut d,
            &[1, 3],
            Some(sw3),
            info(NodeType::Switch, 0x50, 0x50, 8, 1),
        );
        assert_eq!(d.fabric.port(sw3).remote, Some(port(&d, 0x50, 1)));
        assert_eq!(d.fabric.port(other3).remote, None);
        let dups = d.take_duplicates();
        assert_eq!(dups.len(), 1, "{dups:?}");
        assert_eq!(
            dups[0].kept,
            format!("behind {}[1] (DR path 0,1)", Guid(0x10))
        );
        assert_eq!(
            dups[0].left_out,
            [format!("behind {}[3] (DR path 0,1,2,3)", Guid(0x40))]
        );
    }

    #[test]
    fn two_claims_on_one_port_ask_the_switch_and_its_answer_settles_them() {
        // 0x40[3] and 0x60[3] both reach a 0x20 at its port 3: the first 0x20 is asked
        // what its port 3 leads to, and says 0x60.
        let mut d = started();
        let sw2 = port(&d, 0x20, 2);
        let sw4 = port(&d, 0x20, 4);
        answer(
            &mut d,
            &[1, 2],
            Some(sw2),
            info(NodeType::Switch, 0x40, 0x40, 8, 1),
        );
        answer(
            &mut d,
            &[1, 4],
            Some(sw4),
            info(NodeType::Switch, 0x60, 0x60, 8, 1),
        );
        let (a, b) = (port(&d, 0x40, 3), port(&d, 0x60, 3));
        answer(
            &mut d,
            &[1, 2, 3],
            Some(a),
            info(NodeType::Switch, 0x20, 0x20, 8, 3),
        );
        answer(
            &mut d,
            &[1, 4, 3],
            Some(b),
            info(NodeType::Switch, 0x20, 0x20, 8, 3),
        );
        let sw3 = port(&d, 0x20, 3);
        let asked = std::iter::from_fn(|| d.next_work()).any(|w| {
            matches!(w.purpose, Purpose::NodeInfo { from: Some(p), path } if p == sw3 && *path == [1, 3])
        });
        assert!(asked, "the switch's own look is asked for");
        answer(
            &mut d,
            &[1, 3],
            Some(sw3),
            info(NodeType::Switch, 0x60, 0x60, 8, 3),
        );
        assert_eq!(d.fabric.port(sw3).remote, Some(b));
        assert_eq!(d.fabric.port(a).remote, None);
        let dups = d.take_duplicates();
        assert_eq!(dups.len(), 1, "{dups:?}");
        assert_eq!(
            dups[0].left_out,
            [format!("behind {}[3] (DR path 0,1,2,3)", Guid(0x40))]
        );
    }
}
