//! What the SM knows of the fabric: the topology as an [`sm_core::Fabric`] (dense
//! `NodeIdx` / `PortIdx`), and beside it, under the same indices, every attribute as the
//! nodes last reported it and the directed route that reaches each agent.
//!
//! A fact is known or unknown: a port whose PortInfo never came back has `info: None`, and
//! nothing downstream guesses it. Discovery fills the model; the answers to our Sets keep
//! it current (a GetResp carries the attribute as the node now holds it).

use std::collections::BTreeSet;

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx};
use sm_core::idx::{CowVec, IdxVec};
use sm_mad::{Guid, Lid, node_info, port_info, switch_info};

use super::election::RemoteSm;

/// Exit ports of a directed route after the SM's own port (empty: the SM's own node).
/// Held inline: a model of a large fabric holds one per node and CA port, and a repair
/// that copies part of the model copies them without allocating.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DrPath {
    len: u8,
    hops: [u8; DrPath::CAPACITY],
}

impl DrPath {
    /// The most hops a directed route has (IBA: 63 after the SM's port).
    pub const CAPACITY: usize = sm_mad::smp::MAX_HOPS as usize;

    pub const fn new() -> Self {
        DrPath {
            len: 0,
            hops: [0; DrPath::CAPACITY],
        }
    }

    /// Appends a hop; false (and unchanged) when the route is already as long as a
    /// directed route can be.
    #[must_use]
    pub fn push(&mut self, exit: u8) -> bool {
        let Some(slot) = self.hops.get_mut(usize::from(self.len)) else {
            return false;
        };
        *slot = exit;
        self.len += 1;
        true
    }

    pub fn reverse(&mut self) {
        self.hops[..usize::from(self.len)].reverse();
    }
}

impl Default for DrPath {
    fn default() -> Self {
        DrPath::new()
    }
}

impl std::ops::Deref for DrPath {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.hops[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for DrPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl TryFrom<&[u8]> for DrPath {
    type Error = TooLong;
    fn try_from(hops: &[u8]) -> Result<Self, TooLong> {
        let mut p = DrPath::new();
        p.hops
            .get_mut(..hops.len())
            .ok_or(TooLong(hops.len()))?
            .copy_from_slice(hops);
        p.len = hops.len() as u8;
        Ok(p)
    }
}

/// A directed route longer than IBA allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a directed route of {0} hops (at most {cap})", cap = DrPath::CAPACITY)]
pub struct TooLong(pub usize);

/// What a node told us.
#[derive(Debug, Clone)]
pub struct NodeFacts {
    pub info: node_info::Repr,
    pub switch_info: Option<switch_info::Repr>,
    /// The route to the node's agent (a switch: any port; a CA: the first port reached).
    pub path: DrPath,
}

/// What a port told us.
#[derive(Debug, Clone, Default)]
pub struct PortFacts {
    /// PortInfo as last read or set; `None`: unknown.
    pub info: Option<port_info::Repr>,
    /// CA and router ports: the route their agent answers on (one per port: a CA answers
    /// only for the port a directed route arrives on).
    pub path: Option<DrPath>,
}

/// Something the SM asked and got no answer to, after every retry and pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The node asked; for a NodeInfo through a port, the node whose port it was.
    pub guid: Guid,
    pub port: Option<u8>,
    /// The node asked is the unknown one behind `guid`'s `port`.
    pub behind: bool,
    /// What was asked (an attribute, or a Set).
    pub what: String,
}

impl Missing {
    /// The node as the report names it: its GUID, or where it is for one never reached.
    pub fn node_name(&self) -> String {
        match (self.behind, self.port) {
            (true, Some(p)) => format!("behind {}[{p}]", self.guid),
            _ => self.guid.to_string(),
        }
    }
}

/// The discovered fabric.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// Topology, nodes in GUID order; `Port::lid` is the LID the port reported.
    pub fabric: Fabric,
    pub nodes: CowVec<NodeIdx, NodeFacts>,
    pub ports: CowVec<PortIdx, PortFacts>,
    /// The SM's own port.
    pub own: PortIdx,
    /// Other SMs that answered their SMInfo.
    pub sms: Vec<RemoteSm>,
    /// SMs whose SMInfo did not carry our SM_Key (GUID, priority): never obeyed.
    pub untrusted: Vec<(Guid, u8)>,
    /// SMInfo Gets discovery sent (part of its minimum: a port that claims an SM is asked).
    pub sm_asks: u64,
    /// What discovery asked and never got an answer to.
    pub missing: Vec<Missing>,
    /// Where the links that went down since discovery ran (the repair looks there when a
    /// switch traps: a cable put back).
    pub former_peers: std::collections::HashMap<PortIdx, PortIdx>,
    /// Nodes no link reaches any more since a repair saw them cut off (a host that went
    /// down, a switch rebooting). They keep their indices, LIDs and plan, for when they come
    /// back, but are not part of the subnet: nothing lists, polls or routes through them.
    pub absent: std::collections::BTreeSet<NodeIdx>,
}

/// What [`Discovered::reconnect`] changed.
#[derive(Debug, Default)]
pub(super) struct Reconnected {
    /// Directed routes that moved off links that went down.
    pub paths: usize,
    /// Nodes cut off.
    pub gone: Vec<NodeIdx>,
    /// Nodes reached again.
    pub back: Vec<NodeIdx>,
}

impl Discovered {
    /// The node is part of the subnet (not cut off since discovery).
    pub fn present(&self, n: NodeIdx) -> bool {
        !self.absent.contains(&n)
    }

    /// What the subnet holds, absent nodes left out.
    pub fn counts(&self) -> sm_core::fabric::Counts {
        let f = &self.fabric;
        let mut c = f.counts();
        for &n in &self.absent {
            match f.node(n).kind {
                NodeKind::Switch => c.switches -= 1,
                NodeKind::Ca => c.cas -= 1,
                NodeKind::Router => c.routers -= 1,
            }
            c.nodes -= 1;
            for q in f.node_ports(n) {
                let port = f.port(q);
                if port.exists && (port.num == 0 || f.node(n).kind != NodeKind::Switch) {
                    c.end_ports -= 1;
                }
                // Links among absent nodes (a leaf and its hosts), once each.
                if let Some(r) = port.remote {
                    if q < r || !self.absent.contains(&f.port(r).node) {
                        c.links -= 1;
                    }
                }
            }
        }
        c
    }

    pub fn is_switch(&self, n: NodeIdx) -> bool {
        self.fabric.node(n).kind == NodeKind::Switch
    }

    /// The route to the agent that answers for port `p`.
    pub fn route_to(&self, p: PortIdx) -> Option<DrPath> {
        let n = self.fabric.port(p).node;
        if self.is_switch(n) {
            return Some(self.nodes[n].path);
        }
        match self.switch_behind(p) {
            // Through the switch it hangs on: that route is kept current.
            Some(r) => {
                let mut path = self.nodes[self.fabric.port(r).node].path;
                path.push(self.fabric.port(r).num).then_some(path)
            }
            None => self.ports[p].path,
        }
    }

    /// The switch port a CA or router port hangs on, unless the port is on the SM's own
    /// node (reached without crossing that link).
    fn switch_behind(&self, p: PortIdx) -> Option<PortIdx> {
        let f = &self.fabric;
        let r = f.port(p).remote?;
        (f.port(p).node != f.port(self.own).node && self.is_switch(f.port(r).node)).then_some(r)
    }

    /// PortInfo of `p`, when known.
    pub fn port_info(&self, p: PortIdx) -> Option<&port_info::Repr> {
        self.ports[p].info.as_ref()
    }

    /// The port carries LIDs (a CA or router port, or a switch's port 0).
    pub fn is_end_port(&self, p: PortIdx) -> bool {
        let port = self.fabric.port(p);
        port.exists && (port.num == 0 || !self.is_switch(port.node))
    }

    /// The port `p` was linked to before its link went down, if a repair saw it go.
    pub fn former_peer(&self, p: PortIdx) -> Option<PortIdx> {
        self.former_peers.get(&p).copied()
    }

    /// A new discovery keeps what the one before knew of links: a link it had (linked,
    /// or gone down before) that this one finds down at both ends keeps its ends as each
    /// other's former peers, so that a trap about its return looks at both.
    pub(super) fn inherit_former_peers(&mut self, old: &Discovered) {
        let here = |p: PortIdx| {
            let port = old.fabric.port(p);
            let n = self.fabric.node_by_guid(old.fabric.node(port.node).guid)?;
            let q = self.fabric.port_of(n, port.num)?;
            self.fabric.port(q).remote.is_none().then_some(q)
        };
        let known = old
            .fabric
            .links()
            .chain(old.former_peers.iter().map(|(&a, &b)| (a, b)));
        let pairs: Vec<(PortIdx, PortIdx)> = known
            .filter_map(|(a, b)| Some((here(a)?, here(b)?)))
            .collect();
        for (a, b) in pairs {
            self.former_peers.insert(a, b);
            self.former_peers.insert(b, a);
        }
    }

    /// The SM's own LID as its port reported it.
    pub fn own_lid(&self) -> Lid {
        self.port_info(self.own).map_or(Lid(0), |pi| pi.lid)
    }

    pub fn own_guid(&self) -> Guid {
        self.fabric.port(self.own).guid
    }

    /// The fewest SMPs that find what was found: a NodeInfo through every link (the one
    /// that tells what is at its far end) plus the SM's own, a NodeDescription per node, a
    /// SwitchInfo per switch, a PortInfo per switch port (port 0 included: which ones are
    /// linked is what it tells) and per linked CA or router port, and the SMInfo asks.
    pub fn discovery_min(&self) -> u64 {
        let f = &self.fabric;
        let links = f.links().count() as u64;
        let mut ports = 0u64;
        for (i, n) in f.nodes().iter().enumerate() {
            ports += if n.kind == NodeKind::Switch {
                u64::from(n.num_ports) + 1
            } else {
                f.node_ports(NodeIdx(i as u32))
                    .filter(|&p| f.port(p).remote.is_some())
                    .count() as u64
            };
        }
        let nodes = f.nodes().len() as u64;
        let switches = f.switches().count() as u64;
        links + 1 + nodes + switches + ports + self.sm_asks
    }

    /// Where a directed route from the SM's own port leads (the port it arrives on), in
    /// the fabric as it is now; `None` if a hop has no link.
    fn follow(&self, path: &[u8]) -> Option<PortIdx> {
        let f = &self.fabric;
        let mut at = self.own;
        for &exit in path {
            let node = f.port(at).node;
            let out = f.port_of(node, exit)?;
            at = f.port(out).remote?;
        }
        Some(at)
    }

    /// Shortest directed routes from the SM's port to each switch of `to` that enter no
    /// switch of `avoid` and cross no port `blocked` names (links known down, not yet
    /// applied); one search for them all.
    pub(super) fn paths_avoiding(
        &self,
        to: &[NodeIdx],
        avoid: &BTreeSet<NodeIdx>,
        blocked: impl Fn(PortIdx) -> bool,
    ) -> Vec<Option<DrPath>> {
        let f = &self.fabric;
        let start = f.port(self.own).node;
        let mut via: IdxVec<NodeIdx, Option<(NodeIdx, u8)>> = IdxVec::filled(None, f.nodes().len());
        let mut hops: IdxVec<NodeIdx, u8> = IdxVec::filled(0, f.nodes().len());
        let mut seen: IdxVec<NodeIdx, bool> = IdxVec::filled(false, f.nodes().len());
        let mut left: BTreeSet<NodeIdx> = to.iter().copied().collect();
        seen[start] = true;
        left.remove(&start);
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(n) = queue.pop_front() {
            if left.is_empty() {
                break;
            }
            if usize::from(hops[n]) >= sm_mad::smp::MAX_HOPS as usize
                || (n != start && !self.is_switch(n))
            {
                continue;
            }
            for p in f.node_ports(n) {
                if (n == start && p != self.own && !self.is_switch(n)) || blocked(p) {
                    continue;
                }
                let Some(r) = f.port(p).remote else { continue };
                let t = f.port(r).node;
                if blocked(r) || avoid.contains(&t) || seen[t] {
                    continue;
                }
                seen[t] = true;
                via[t] = Some((n, f.port(p).num));
                hops[t] = hops[n] + 1;
                left.remove(&t);
                queue.push_back(t);
            }
        }
        to.iter()
            .map(|&n| {
                if !seen[n] {
                    return None;
                }
                let mut path = DrPath::new();
                let mut at = n;
                while let Some((up, exit)) = via[at] {
                    // No more hops than the search went deep: it fits.
                    let _ = path.push(exit);
                    at = up;
                }
                path.reverse();
                Some(path)
            })
            .collect()
    }

    /// After links changed: every node and CA port whose directed route crosses a link
    /// that went down gets a new one (shortest, from the SM's port through the fabric as it
    /// is now); nodes no link reaches become absent, and absent nodes reached again present.
    pub(super) fn reconnect(&mut self) -> Reconnected {
        let f = &self.fabric;
        // Breadth-first from the SM's node, through switches only (CAs are leaves). Each
        // node reached keeps the node and exit port it was reached by (and its hops); a
        // route is spelled out only for the agents whose old one broke.
        let start = f.port(self.own).node;
        let mut via: IdxVec<NodeIdx, Option<(NodeIdx, u8)>> = IdxVec::filled(None, f.nodes().len());
        let mut hops: IdxVec<NodeIdx, u8> = IdxVec::filled(0, f.nodes().len());
        let mut reached: IdxVec<NodeIdx, bool> = IdxVec::filled(false, f.nodes().len());
        // CA and router ports: the first (shortest) way in.
        let mut arrive: IdxVec<PortIdx, Option<(NodeIdx, u8)>> =
            IdxVec::filled(None, f.ports().len());
        reached[start] = true;
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(n) = queue.pop_front() {
            if usize::from(hops[n]) >= sm_mad::smp::MAX_HOPS as usize {
                continue;
            }
            let switch = self.is_switch(n);
            let exits = f.node_ports(n).filter(|&p| {
                if switch {
                    f.port(p).num != 0
                } else {
                    p == self.own && n == start
                }
            });
            for p in exits {
                let port = f.port(p);
                let Some(r) = port.remote else { continue };
                let t = f.port(r).node;
                if !self.is_switch(t) && arrive[r].is_none() {
                    arrive[r] = Some((n, port.num));
                }
                if !reached[t] {
                    reached[t] = true;
                    via[t] = Some((n, port.num));
                    hops[t] = hops[n] + 1;
                    queue.push_back(t);
                }
            }
        }
        let path_to = |mut n: NodeIdx| -> DrPath {
            let mut path = DrPath::new();
            while let Some((up, exit)) = via[n] {
                // No more hops than the search went deep: it fits.
                let _ = path.push(exit);
                n = up;
            }
            path.reverse();
            path
        };
        let mut out = Reconnected::default();
        let arrives = |d: &Discovered, path: &[u8], n: NodeIdx| {
            d.follow(path).is_some_and(|p| d.fabric.port(p).node == n)
        };
        for n in self.nodes.indices() {
            match (reached[n], self.absent.contains(&n)) {
                (false, false) => out.gone.push(n),
                (true, true) => out.back.push(n),
                _ => {}
            }
            if reached[n] && self.is_switch(n) && !arrives(self, &self.nodes[n].path, n) {
                self.nodes[n].path = path_to(n);
                out.paths += 1;
            }
        }
        for q in self.ports.indices() {
            let Some(path) = &self.ports[q].path else {
                continue;
            };
            if self.switch_behind(q).is_none() && self.follow(path) != Some(q) {
                if let Some((up, exit)) = arrive[q] {
                    let mut path = path_to(up);
                    if path.push(exit) {
                        self.ports[q].path = Some(path);
                        out.paths += 1;
                    }
                }
            }
        }
        self.absent.extend(out.gone.iter().copied());
        for n in &out.back {
            self.absent.remove(n);
        }
        out
    }

    /// This model laid out on `old`'s indices: every node `old` knew keeps its index (one
    /// not found now stays, absent, with no link), new ones follow in GUID order. A plan
    /// made for `old` then indexes this model too, so a sweep can keep its routes. When a
    /// node came back as another device (another kind or number of ports), the model is
    /// returned as it is.
    pub(super) fn rebase(self, old: &Discovered) -> Discovered {
        let (f, of) = (&self.fabric, &old.fabric);
        let mut fabric = f.clone();
        let mut absent = Vec::new();
        for (i, node) in of.nodes().iter().enumerate() {
            let on = NodeIdx(i as u32);
            match f.node_by_guid(node.guid) {
                Some(n) => {
                    let now = f.node(n);
                    if now.kind != node.kind || now.num_ports != node.num_ports {
                        return self;
                    }
                }
                None => {
                    let port_guids = (node.kind != NodeKind::Switch).then(|| {
                        of.node_ports(on)
                            .filter(|&q| of.port(q).num > 0)
                            .map(|q| of.port(q).guid)
                            .collect()
                    });
                    let spec = sm_core::fabric::NodeSpec {
                        kind: node.kind,
                        guid: node.guid,
                        system_guid: node.system_guid,
                        description: node.description.clone(),
                        num_ports: node.num_ports,
                        vendor_id: node.vendor_id,
                        device_id: node.device_id,
                        revision: node.revision,
                        enhanced_port0: node.enhanced_port0,
                        port_guids,
                    };
                    let Ok(n) = fabric.add_node(spec) else {
                        return self;
                    };
                    for (q, oq) in fabric
                        .node_ports(n)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .zip(of.node_ports(on))
                    {
                        let was = of.port(oq);
                        let p = fabric.port_mut(q);
                        (p.lid, p.lmc, p.width, p.speed, p.mtu_cap, p.vl_cap) = (
                            was.lid,
                            was.lmc,
                            was.width,
                            was.speed,
                            was.mtu_cap,
                            was.vl_cap,
                        );
                    }
                    absent.push((n, on));
                }
            }
        }
        let mut order: Vec<NodeIdx> = of
            .nodes()
            .iter()
            .filter_map(|node| fabric.node_by_guid(node.guid))
            .collect();
        let known: std::collections::HashSet<Guid> = of.nodes().iter().map(|n| n.guid).collect();
        order.extend(
            (0..f.nodes().len() as u32)
                .map(NodeIdx)
                .filter(|&n| !known.contains(&f.node(n).guid)),
        );
        if order.len() != fabric.nodes().len()
            || (absent.is_empty() && order.iter().enumerate().all(|(i, n)| n.idx() == i))
        {
            return self;
        }
        let (laid, node_map, port_map) = fabric.reordered(&order);
        let mut nodes: Vec<Option<NodeFacts>> = vec![None; laid.nodes().len()];
        let mut ports: IdxVec<PortIdx, PortFacts> =
            IdxVec::filled(PortFacts::default(), laid.ports().len());
        for (n, facts) in self.nodes.iter_enumerated() {
            nodes[node_map[n].idx()] = Some(facts.clone());
        }
        for (q, facts) in self.ports.iter_enumerated() {
            ports[port_map[q]] = facts.clone();
        }
        // An absent node's ports are unknown now: nothing is programmed or expected there.
        for &(n, on) in &absent {
            nodes[node_map[n].idx()] = Some(old.nodes[on].clone());
        }
        let Some(nodes) = nodes.into_iter().collect::<Option<Vec<NodeFacts>>>() else {
            return self;
        };
        Discovered {
            fabric: laid,
            nodes: nodes.into_iter().collect(),
            ports: ports.into(),
            own: port_map[self.own],
            sms: self.sms,
            untrusted: self.untrusted,
            sm_asks: self.sm_asks,
            missing: self.missing,
            former_peers: self
                .former_peers
                .iter()
                .map(|(a, b)| (port_map[*a], port_map[*b]))
                .collect(),
            absent: self
                .absent
                .iter()
                .map(|n| node_map[*n])
                .chain(absent.iter().map(|&(n, _)| node_map[n]))
                .collect(),
        }
    }

    /// The same fabric with its nodes in GUID order.
    pub(super) fn canonical(self) -> Discovered {
        let f = &self.fabric;
        let mut order: Vec<NodeIdx> = (0..f.nodes().len() as u32).map(NodeIdx).collect();
        order.sort_by_key(|&n| f.node(n).guid);
        if order.iter().enumerate().all(|(i, n)| n.idx() == i) {
            return self;
        }
        let (fabric, node_map, port_map) = f.reordered(&order);
        let mut nodes: Vec<Option<NodeFacts>> = vec![None; self.nodes.len()];
        for (old, facts) in self.nodes.iter_enumerated() {
            nodes[node_map[old].idx()] = Some(facts.clone());
        }
        let mut ports: IdxVec<PortIdx, PortFacts> =
            IdxVec::filled(PortFacts::default(), self.ports.len());
        for (old, facts) in self.ports.iter_enumerated() {
            ports[port_map[old]] = facts.clone();
        }
        Discovered {
            fabric,
            nodes: nodes.into_iter().flatten().collect(),
            ports: ports.into(),
            own: port_map[self.own],
            sms: self.sms,
            untrusted: self.untrusted,
            sm_asks: self.sm_asks,
            missing: self.missing,
            former_peers: self
                .former_peers
                .iter()
                .map(|(a, b)| (port_map[*a], port_map[*b]))
                .collect(),
            absent: self.absent.iter().map(|n| node_map[*n]).collect(),
        }
    }
}
