//! What the SM knows of the fabric: the topology as an [`sm_core::Fabric`] (dense
//! `NodeIdx` / `PortIdx`), and beside it, under the same indices, every attribute as the
//! nodes last reported it and the directed route that reaches each agent.
//!
//! A fact is known or unknown: a port whose PortInfo never came back has `info: None`, and
//! nothing downstream guesses it. Discovery fills the model; the answers to our Sets keep
//! it current (a GetResp carries the attribute as the node now holds it).

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx};
use sm_core::idx::IdxVec;
use sm_mad::{Guid, Lid, node_info, port_info, switch_info};

use super::election::RemoteSm;

/// Exit ports of a directed route after the SM's own port (empty: the SM's own node).
pub type DrPath = Vec<u8>;

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
    pub nodes: IdxVec<NodeIdx, NodeFacts>,
    pub ports: IdxVec<PortIdx, PortFacts>,
    /// The SM's own port.
    pub own: PortIdx,
    /// Other SMs that answered their SMInfo.
    pub sms: Vec<RemoteSm>,
    /// SMInfo Gets discovery sent (part of its minimum: a port that claims an SM is asked).
    pub sm_asks: u64,
    /// What discovery asked and never got an answer to.
    pub missing: Vec<Missing>,
}

impl Discovered {
    pub fn is_switch(&self, n: NodeIdx) -> bool {
        self.fabric.node(n).kind == NodeKind::Switch
    }

    /// The route to the agent that answers for port `p`.
    pub fn route_to(&self, p: PortIdx) -> Option<&[u8]> {
        let n = self.fabric.port(p).node;
        if self.is_switch(n) {
            Some(&self.nodes[n].path)
        } else {
            self.ports[p].path.as_deref()
        }
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
            ports,
            own: port_map[self.own],
            sms: self.sms,
            sm_asks: self.sm_asks,
            missing: self.missing,
        }
    }
}
