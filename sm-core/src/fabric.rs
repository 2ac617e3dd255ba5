//! The fabric model: nodes and ports in flat vectors addressed by dense typed indices.
//!
//! Every node owns `num_ports + 1` consecutive port slots; slot 0 is a switch's management
//! port (it carries the switch's LID) and is absent on CAs and routers. Links are stored on
//! both ends (`Port::remote`), so walking a link is one index lookup. GUID maps exist only to
//! translate from the outside world.

use rustc_hash::{FxHashMap as HashMap, FxHashSet};

use sm_mad::port_info::{PhysPortState, PortState};
use sm_mad::{Guid, Lid};

use std::sync::Arc;

use crate::idx::{CowVec, IdxVec, OptIdx};

/// The GUID of a CA or router port not reached yet (see [`Fabric::set_port_guid`]).
pub const UNKNOWN_GUID: Guid = Guid(0);

crate::dense_index!(
    /// Index of a node in [`Fabric::nodes`].
    NodeIdx
);
crate::dense_index!(
    /// Index of a port slot in [`Fabric::ports`].
    PortIdx
);

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum NodeKind {
    /// Channel adapter (a host port or several).
    Ca,
    Switch,
    Router,
}

impl NodeKind {
    /// The NodeInfo node type.
    pub fn node_type(self) -> sm_mad::node_info::NodeType {
        use sm_mad::node_info::NodeType;
        match self {
            NodeKind::Ca => NodeType::Ca,
            NodeKind::Switch => NodeType::Switch,
            NodeKind::Router => NodeType::Router,
        }
    }
}

/// IB link width bits as PortInfo encodes them.
pub mod width {
    /// 1x.
    pub const X1: u8 = 1;
    /// 4x.
    pub const X4: u8 = 2;
    /// 8x.
    pub const X8: u8 = 4;
    /// 12x.
    pub const X12: u8 = 8;
    /// 2x.
    pub const X2: u8 = 16;

    /// Lanes of one width bit (0 when not exactly one known bit).
    pub const fn lanes(w: u8) -> u32 {
        match w {
            X1 => 1,
            X2 => 2,
            X4 => 4,
            X8 => 8,
            X12 => 12,
            _ => 0,
        }
    }
}

/// The active speed of a link: PortInfo's LinkSpeedActive and LinkSpeedExtActive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub struct Speed {
    /// LinkSpeedActive: 1 SDR, 2 DDR, 4 QDR.
    pub speed: u8,
    /// LinkSpeedExtActive: 0 none, 1 FDR, 2 EDR, 4 HDR, 8 NDR.
    pub ext: u8,
    /// LinkSpeedExtActive2: 0 none, 1 XDR (where CapabilityMask2 declares the field).
    pub ext2: u8,
    /// FDR10 (a vendor extension reported outside PortInfo).
    pub fdr10: bool,
}

impl Speed {
    /// SDR (2.5 Gb/s per lane).
    pub const SDR: Speed = Speed {
        speed: 1,
        ext: 0,
        ext2: 0,
        fdr10: false,
    };

    /// The conventional name ("SDR", "QDR", "FDR10", "EDR", ...).
    pub fn name(self) -> &'static str {
        if self.ext2 & 1 != 0 {
            return "XDR";
        }
        match (self.ext, self.fdr10, self.speed) {
            (8, _, _) => "NDR",
            (4, _, _) => "HDR",
            (2, _, _) => "EDR",
            (1, _, _) => "FDR",
            (_, true, _) => "FDR10",
            (_, _, 4) => "QDR",
            (_, _, 2) => "DDR",
            (_, _, 1) => "SDR",
            _ => "?",
        }
    }

    /// Parses a speed name.
    pub fn from_name(s: &str) -> Option<Speed> {
        if s == "XDR" {
            return Some(Speed {
                speed: 4,
                ext: 0,
                ext2: 1,
                fdr10: false,
            });
        }
        let (speed, ext, fdr10) = match s {
            "SDR" => (1, 0, false),
            "DDR" => (2, 0, false),
            "QDR" => (4, 0, false),
            "FDR10" => (4, 0, true),
            "FDR" => (4, 1, false),
            "EDR" => (4, 2, false),
            "HDR" => (4, 4, false),
            "NDR" => (4, 8, false),
            _ => return None,
        };
        Some(Speed {
            speed,
            ext,
            ext2: 0,
            fdr10,
        })
    }

    /// Data rate of one lane in Mb/s after line coding (what PathRecord rates reflect).
    pub fn lane_mbps(self) -> u32 {
        match self.name() {
            "SDR" => 2_000,
            "DDR" => 4_000,
            "QDR" => 8_000,
            "FDR10" => 10_000,
            "FDR" => 13_640,
            "EDR" => 25_000,
            "HDR" => 50_000,
            "NDR" => 100_000,
            "XDR" => 200_000,
            _ => 0,
        }
    }
}

/// A node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub kind: NodeKind,
    pub guid: Guid,
    pub system_guid: Guid,
    /// NodeDescription text.
    pub description: String,
    pub vendor_id: u32,
    pub device_id: u16,
    pub revision: u32,
    /// Number of physical ports (port 0 of a switch not counted).
    pub num_ports: u8,
    /// Switch port 0 is an enhanced port (has its own link-level state).
    pub enhanced_port0: bool,
    first_port: u32,
}

/// A port slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub node: NodeIdx,
    pub num: u8,
    /// False for the unused slot 0 of CAs and routers.
    pub exists: bool,
    /// Port GUID (every port of a switch reports the switch's GUID).
    pub guid: Guid,
    /// Base LID (on a switch only port 0 has one).
    pub lid: Lid,
    pub lmc: u8,
    pub state: PortState,
    pub phys_state: PhysPortState,
    /// LinkWidthActive bit.
    pub width: u8,
    pub speed: Speed,
    /// MTU capability code (1 = 256 ... 5 = 4096).
    pub mtu_cap: u8,
    /// VLCap code (1 = VL0, 2 = VL0-1, 3 = VL0-3, 4 = VL0-7, 5 = VL0-14).
    pub vl_cap: u8,
    /// The port at the other end of the link.
    pub remote: Option<PortIdx>,
}

/// Description of a node to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub kind: NodeKind,
    pub guid: Guid,
    pub system_guid: Guid,
    pub description: String,
    pub num_ports: u8,
    pub vendor_id: u32,
    pub device_id: u16,
    pub revision: u32,
    pub enhanced_port0: bool,
    /// Port GUIDs of CA/router ports 1..=num_ports; `None` gives node GUID + port number
    /// (what ibsim does); [`UNKNOWN_GUID`] leaves a port's GUID to be learned. Ignored for
    /// switches.
    pub port_guids: Option<Vec<Guid>>,
}

impl NodeSpec {
    /// A node with defaults for everything but kind, GUID, description and port count.
    pub fn new(kind: NodeKind, guid: Guid, description: impl Into<String>, num_ports: u8) -> Self {
        NodeSpec {
            kind,
            guid,
            system_guid: guid,
            description: description.into(),
            num_ports,
            vendor_id: 0,
            device_id: 0,
            revision: 0,
            enhanced_port0: false,
            port_guids: None,
        }
    }
}

/// Why a change to the fabric was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FabricError {
    #[error("duplicate node GUID {0}")]
    DuplicateNodeGuid(Guid),
    #[error("duplicate port GUID {0}")]
    DuplicatePortGuid(Guid),
    #[error("node {0} has no ports")]
    NoPorts(Guid),
    #[error("node {node} has no port {port}")]
    NoSuchPort { node: Guid, port: u8 },
    #[error("port 0 of switch {0} cannot carry a link")]
    PortZeroLink(Guid),
    #[error("port {port} of node {node} is already linked to {other} port {other_port}")]
    PortInUse {
        node: Guid,
        port: u8,
        other: Guid,
        other_port: u8,
    },
    #[error("a port cannot be linked to itself ({node} port {port})")]
    SelfLink { node: Guid, port: u8 },
}

/// The fabric.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fabric {
    // Shared between clones, copied in chunks where one changes: a repair changes a few
    // ports of a fabric the SA's snapshot still holds.
    nodes: CowVec<NodeIdx, Node>,
    ports: CowVec<PortIdx, Port>,
    by_node_guid: Arc<HashMap<Guid, NodeIdx>>,
    by_port_guid: Arc<HashMap<Guid, PortIdx>>,
}

impl Fabric {
    /// An empty fabric.
    pub fn new() -> Fabric {
        Fabric::default()
    }

    /// Adds a node with all its ports down and unlinked.
    pub fn add_node(&mut self, spec: NodeSpec) -> Result<NodeIdx, FabricError> {
        if spec.num_ports == 0 {
            return Err(FabricError::NoPorts(spec.guid));
        }
        if self.by_node_guid.contains_key(&spec.guid) {
            return Err(FabricError::DuplicateNodeGuid(spec.guid));
        }
        let is_switch = spec.kind == NodeKind::Switch;
        let port_guid = |p: u8| -> Guid {
            if is_switch {
                spec.guid
            } else {
                spec.port_guids
                    .as_ref()
                    .and_then(|g| g.get(p as usize - 1).copied())
                    .unwrap_or(Guid(spec.guid.0.wrapping_add(p as u64)))
            }
        };
        // Port GUIDs are checked before anything changes, so a refusal leaves no trace.
        if !is_switch {
            let mut seen = FxHashSet::default();
            for p in 1..=spec.num_ports {
                let g = port_guid(p);
                if g == UNKNOWN_GUID {
                    continue;
                }
                let clash = self.by_port_guid.contains_key(&g)
                    || (g != spec.guid && self.by_node_guid.contains_key(&g))
                    || !seen.insert(g);
                if clash {
                    return Err(FabricError::DuplicatePortGuid(g));
                }
            }
        } else if self.by_port_guid.contains_key(&spec.guid) {
            return Err(FabricError::DuplicatePortGuid(spec.guid));
        }
        let idx = NodeIdx(self.nodes.len() as u32);
        let first_port = self.ports.len() as u32;
        for p in 0..=spec.num_ports {
            let exists = is_switch || p > 0;
            self.ports.push(Port {
                node: idx,
                num: p,
                exists,
                guid: if exists { port_guid(p) } else { Guid(0) },
                lid: Lid(0),
                lmc: 0,
                state: if exists && p == 0 {
                    PortState::Active
                } else {
                    PortState::Down
                },
                phys_state: if exists && p == 0 {
                    PhysPortState::LinkUp
                } else {
                    PhysPortState::Polling
                },
                width: width::X4,
                speed: Speed::SDR,
                mtu_cap: 5,
                vl_cap: 4,
                remote: None,
            });
            if exists && (p == 0 || !is_switch) && port_guid(p) != UNKNOWN_GUID {
                Arc::make_mut(&mut self.by_port_guid)
                    .insert(port_guid(p), PortIdx(first_port + p as u32));
            }
        }
        Arc::make_mut(&mut self.by_node_guid).insert(spec.guid, idx);
        self.nodes.push(Node {
            kind: spec.kind,
            guid: spec.guid,
            system_guid: spec.system_guid,
            description: spec.description,
            vendor_id: spec.vendor_id,
            device_id: spec.device_id,
            revision: spec.revision,
            num_ports: spec.num_ports,
            enhanced_port0: spec.enhanced_port0,
            first_port,
        });
        Ok(idx)
    }

    /// Gives a CA or router port the GUID it reported (a port added with
    /// [`UNKNOWN_GUID`] is learned later, as discovery reaches it).
    pub fn set_port_guid(&mut self, p: PortIdx, g: Guid) -> Result<(), FabricError> {
        let port = &self.ports[p];
        if port.guid == g {
            return Ok(());
        }
        if g == UNKNOWN_GUID
            || self.nodes[port.node].kind == NodeKind::Switch
            || self.by_port_guid.contains_key(&g)
            || self.by_node_guid.get(&g).is_some_and(|&n| n != port.node)
        {
            return Err(FabricError::DuplicatePortGuid(g));
        }
        let old = port.guid;
        if old != UNKNOWN_GUID {
            Arc::make_mut(&mut self.by_port_guid).remove(&old);
        }
        self.ports[p].guid = g;
        Arc::make_mut(&mut self.by_port_guid).insert(g, p);
        Ok(())
    }

    /// The same fabric with its nodes in `order` (every node exactly once), and where each
    /// old node and port went. Used to lay a discovered fabric out in GUID order, so
    /// nothing downstream depends on the order answers came in.
    pub fn reordered(
        &self,
        order: &[NodeIdx],
    ) -> (Fabric, IdxVec<NodeIdx, NodeIdx>, IdxVec<PortIdx, PortIdx>) {
        let (out, node_map, port_map) = self.laid_out(order);
        let nodes = node_map
            .iter()
            .map(|n| n.get().unwrap_or(NodeIdx(0)))
            .collect();
        let ports = port_map
            .iter()
            .map(|p| p.get().unwrap_or(PortIdx(0)))
            .collect();
        (out, nodes, ports)
    }

    /// The same fabric without the nodes `drop` names (links to them cut), the others in
    /// their order: what is left when part of a fabric is out of reach.
    pub fn without(&self, drop: impl Fn(NodeIdx) -> bool) -> Fabric {
        let order: Vec<NodeIdx> = (0..self.nodes.len() as u32)
            .map(NodeIdx)
            .filter(|&n| !drop(n))
            .collect();
        self.laid_out(&order).0
    }

    /// The nodes of `order` (each at most once) in that order; links to nodes left out
    /// are cut.
    fn laid_out(&self, order: &[NodeIdx]) -> (Fabric, NodeMap, PortMap) {
        let mut node_map = IdxVec::filled(OptIdx::NONE, self.nodes.len());
        let mut port_map = IdxVec::filled(OptIdx::NONE, self.ports.len());
        let mut nodes = Vec::with_capacity(order.len());
        let mut ports: Vec<Port> = Vec::with_capacity(self.ports.len());
        for &old in order {
            let n = &self.nodes[old];
            let new = NodeIdx(nodes.len() as u32);
            node_map[old] = OptIdx::some(new);
            let first = ports.len() as u32;
            for k in 0..=u32::from(n.num_ports) {
                port_map[PortIdx(n.first_port + k)] = OptIdx::some(PortIdx(first + k));
                let mut port = self.ports[PortIdx(n.first_port + k)].clone();
                port.node = new;
                ports.push(port);
            }
            nodes.push(Node {
                first_port: first,
                ..n.clone()
            });
        }
        for port in &mut ports {
            port.remote = port.remote.and_then(|r| port_map[r].get());
        }
        let out = Fabric {
            nodes: nodes.into_iter().collect(),
            ports: ports.into_iter().collect(),
            by_node_guid: Arc::new(
                self.by_node_guid
                    .iter()
                    .filter_map(|(g, n)| Some((*g, node_map[*n].get()?)))
                    .collect(),
            ),
            by_port_guid: Arc::new(
                self.by_port_guid
                    .iter()
                    .filter_map(|(g, p)| Some((*g, port_map[*p].get()?)))
                    .collect(),
            ),
        };
        (out, node_map, port_map)
    }

    /// Links two ports (both ends). The ports come up to INIT / LinkUp as real ports do.
    pub fn connect(&mut self, a: PortIdx, b: PortIdx) -> Result<(), FabricError> {
        let (pa, pb) = (&self.ports[a], &self.ports[b]);
        for p in [pa, pb] {
            let node = &self.nodes[p.node];
            if p.num == 0 {
                return Err(if node.kind == NodeKind::Switch {
                    FabricError::PortZeroLink(node.guid)
                } else {
                    FabricError::NoSuchPort {
                        node: node.guid,
                        port: 0,
                    }
                });
            }
        }
        if a == b {
            return Err(FabricError::SelfLink {
                node: self.nodes[pa.node].guid,
                port: pa.num,
            });
        }
        for (p, other) in [(pa, b), (pb, a)] {
            if let Some(r) = p.remote {
                if r != other {
                    let o = &self.ports[r];
                    return Err(FabricError::PortInUse {
                        node: self.nodes[p.node].guid,
                        port: p.num,
                        other: self.nodes[o.node].guid,
                        other_port: o.num,
                    });
                }
            }
        }
        for (x, y) in [(a, b), (b, a)] {
            let p = &mut self.ports[x];
            p.remote = Some(y);
            p.state = PortState::Init;
            p.phys_state = PhysPortState::LinkUp;
        }
        Ok(())
    }

    /// Removes the link at `a` (both ends go Down / Polling). Returns the former peer.
    pub fn disconnect(&mut self, a: PortIdx) -> Option<PortIdx> {
        let b = self.ports[a].remote.take()?;
        self.ports[b].remote = None;
        for x in [a, b] {
            let p = &mut self.ports[x];
            p.state = PortState::Down;
            p.phys_state = PhysPortState::Polling;
        }
        Some(b)
    }

    /// All nodes, indexed by [`NodeIdx`].
    pub fn nodes(&self) -> &CowVec<NodeIdx, Node> {
        &self.nodes
    }

    /// All port slots, indexed by [`PortIdx`] (including absent slot 0 of CAs).
    pub fn ports(&self) -> &CowVec<PortIdx, Port> {
        &self.ports
    }

    /// One node.
    pub fn node(&self, n: NodeIdx) -> &Node {
        &self.nodes[n]
    }

    /// Mutable node.
    pub fn node_mut(&mut self, n: NodeIdx) -> &mut Node {
        &mut self.nodes[n]
    }

    /// One port slot.
    pub fn port(&self, p: PortIdx) -> &Port {
        &self.ports[p]
    }

    /// Mutable port slot.
    pub fn port_mut(&mut self, p: PortIdx) -> &mut Port {
        &mut self.ports[p]
    }

    /// The slot of port `num` of node `n`, if the node has that port.
    pub fn port_of(&self, n: NodeIdx, num: u8) -> Option<PortIdx> {
        let node = self.nodes.get(n)?;
        if num > node.num_ports || (num == 0 && node.kind != NodeKind::Switch) {
            return None;
        }
        Some(PortIdx(node.first_port + num as u32))
    }

    /// The existing ports of a node: 0..=N for switches, 1..=N otherwise.
    pub fn node_ports(&self, n: NodeIdx) -> impl Iterator<Item = PortIdx> + '_ {
        let node = &self.nodes[n];
        let start = if node.kind == NodeKind::Switch { 0 } else { 1 };
        (start..=node.num_ports as u32).map(move |p| PortIdx(node.first_port + p))
    }

    /// The node with this node GUID.
    pub fn node_by_guid(&self, g: Guid) -> Option<NodeIdx> {
        self.by_node_guid.get(&g).copied()
    }

    /// The port with this port GUID (a switch GUID gives its port 0).
    pub fn port_by_guid(&self, g: Guid) -> Option<PortIdx> {
        self.by_port_guid.get(&g).copied()
    }

    /// The node at the other end of a port's link and the remote port number.
    pub fn peer(&self, p: PortIdx) -> Option<(NodeIdx, u8)> {
        let r = self.ports[p].remote?;
        let rp = &self.ports[r];
        Some((rp.node, rp.num))
    }

    /// The port that carries a node's LID: port 0 of a switch, else the port itself.
    pub fn lid_port(&self, p: PortIdx) -> PortIdx {
        let port = &self.ports[p];
        let node = &self.nodes[port.node];
        if node.kind == NodeKind::Switch {
            PortIdx(node.first_port)
        } else {
            p
        }
    }

    /// Every link once, as (lower port index, higher port index).
    pub fn links(&self) -> impl Iterator<Item = (PortIdx, PortIdx)> + '_ {
        self.ports.iter().enumerate().filter_map(|(i, p)| {
            let r = p.remote?;
            (i < r.idx()).then_some((PortIdx(i as u32), r))
        })
    }

    /// Switch nodes.
    pub fn switches(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        self.kinds(NodeKind::Switch)
    }

    /// CA nodes.
    pub fn cas(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        self.kinds(NodeKind::Ca)
    }

    fn kinds(&self, k: NodeKind) -> impl Iterator<Item = NodeIdx> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(move |(_, n)| n.kind == k)
            .map(|(i, _)| NodeIdx(i as u32))
    }

    /// Ports that carry a LID: switch port 0 and every CA / router port.
    pub fn end_ports(&self) -> impl Iterator<Item = PortIdx> + '_ {
        self.ports.iter().enumerate().filter_map(|(i, p)| {
            let kind = self.nodes[p.node].kind;
            let carries = p.exists && (kind != NodeKind::Switch || p.num == 0);
            carries.then_some(PortIdx(i as u32))
        })
    }

    /// Counts for reports.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for n in self.nodes.iter() {
            match n.kind {
                NodeKind::Switch => c.switches += 1,
                NodeKind::Ca => c.cas += 1,
                NodeKind::Router => c.routers += 1,
            }
        }
        c.nodes = self.nodes.len();
        c.links = self.links().count();
        c.end_ports = self.end_ports().count();
        c
    }
}

/// Where each node of a fabric went in another (if anywhere).
type NodeMap = IdxVec<NodeIdx, OptIdx<NodeIdx>>;
/// Where each port went.
type PortMap = IdxVec<PortIdx, OptIdx<PortIdx>>;

/// How many of each thing a fabric holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub nodes: usize,
    pub switches: usize,
    pub cas: usize,
    pub routers: usize,
    pub links: usize,
    /// Ports that carry a LID.
    pub end_ports: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_switches() -> (Fabric, NodeIdx, NodeIdx, NodeIdx) {
        let mut f = Fabric::new();
        let s1 = f
            .add_node(NodeSpec::new(NodeKind::Switch, Guid(0x20_0000), "s1", 8))
            .unwrap();
        let s2 = f
            .add_node(NodeSpec::new(NodeKind::Switch, Guid(0x20_0001), "s2", 8))
            .unwrap();
        let h = f
            .add_node(NodeSpec::new(NodeKind::Ca, Guid(0x10_0000), "h", 2))
            .unwrap();
        (f, s1, s2, h)
    }

    #[test]
    fn ports_and_guids() {
        let (f, s1, _, h) = two_switches();
        assert_eq!(f.node_ports(s1).count(), 9);
        assert_eq!(f.node_ports(h).count(), 2);
        assert!(f.port_of(h, 0).is_none());
        assert!(f.port_of(h, 3).is_none());
        let hp2 = f.port_of(h, 2).unwrap();
        assert_eq!(f.port(hp2).guid, Guid(0x10_0002));
        assert_eq!(f.port_by_guid(Guid(0x10_0002)), Some(hp2));
        assert_eq!(f.port_by_guid(Guid(0x20_0000)), f.port_of(s1, 0));
        assert_eq!(f.end_ports().count(), 4);
    }

    #[test]
    fn parallel_links_multiport_ca_and_loops() {
        let (mut f, s1, s2, h) = two_switches();
        let p = |f: &Fabric, n, k| f.port_of(n, k).unwrap();
        f.connect(p(&f, s1, 3), p(&f, s2, 3)).unwrap();
        f.connect(p(&f, s1, 5), p(&f, s2, 5)).unwrap();
        f.connect(p(&f, h, 1), p(&f, s1, 1)).unwrap();
        f.connect(p(&f, h, 2), p(&f, s2, 1)).unwrap();
        // A cable from a switch back to itself.
        f.connect(p(&f, s1, 7), p(&f, s1, 8)).unwrap();
        assert_eq!(f.links().count(), 5);
        assert_eq!(f.peer(p(&f, s1, 5)), Some((s2, 5)));
        assert_eq!(f.port(p(&f, h, 1)).state, PortState::Init);
        // Relinking the same pair is a no-op; stealing a used port is refused.
        f.connect(p(&f, s1, 3), p(&f, s2, 3)).unwrap();
        assert!(matches!(
            f.connect(p(&f, s1, 3), p(&f, s2, 4)),
            Err(FabricError::PortInUse { port: 3, .. })
        ));
        assert!(matches!(
            f.connect(p(&f, s1, 0), p(&f, s2, 4)),
            Err(FabricError::PortZeroLink(_))
        ));
        assert_eq!(f.disconnect(p(&f, s1, 3)), Some(p(&f, s2, 3)));
        assert_eq!(f.port(p(&f, s2, 3)).state, PortState::Down);
        assert_eq!(f.links().count(), 4);
    }

    #[test]
    fn duplicates_are_refused_without_side_effects() {
        let (mut f, ..) = two_switches();
        let before = f.clone();
        assert_eq!(
            f.add_node(NodeSpec::new(NodeKind::Switch, Guid(0x20_0000), "dup", 4)),
            Err(FabricError::DuplicateNodeGuid(Guid(0x20_0000)))
        );
        // Node GUID 0x0fffff gives port GUIDs 0x100000 (taken as a node GUID) and up.
        assert!(matches!(
            f.add_node(NodeSpec::new(NodeKind::Ca, Guid(0x0f_ffff), "clash", 1)),
            Err(FabricError::DuplicatePortGuid(_))
        ));
        assert_eq!(f, before);
    }

    #[test]
    fn unknown_port_guids_are_learned() {
        let mut f = Fabric::new();
        let spec = NodeSpec {
            port_guids: Some(vec![Guid(0x77), UNKNOWN_GUID]),
            ..NodeSpec::new(NodeKind::Ca, Guid(0x70), "h", 2)
        };
        let h = f.add_node(spec).unwrap();
        let p2 = f.port_of(h, 2).unwrap();
        assert_eq!(f.port(p2).guid, UNKNOWN_GUID);
        assert_eq!(f.port_by_guid(UNKNOWN_GUID), None);
        assert_eq!(
            f.set_port_guid(p2, Guid(0x77)),
            Err(FabricError::DuplicatePortGuid(Guid(0x77)))
        );
        f.set_port_guid(p2, Guid(0x78)).unwrap();
        assert_eq!(f.port_by_guid(Guid(0x78)), Some(p2));
    }

    #[test]
    fn reordering_keeps_links_and_maps() {
        let (mut f, s1, s2, h) = two_switches();
        let p = |f: &Fabric, n, k| f.port_of(n, k).unwrap();
        f.connect(p(&f, h, 1), p(&f, s2, 2)).unwrap();
        f.connect(p(&f, s1, 3), p(&f, s2, 4)).unwrap();
        let (g, nodes, ports) = f.reordered(&[h, s2, s1]);
        assert_eq!(g.nodes()[NodeIdx(0)].guid, Guid(0x10_0000));
        assert_eq!(nodes[s1], NodeIdx(2));
        assert_eq!(g.peer(ports[p(&f, h, 1)]), Some((NodeIdx(1), 2)));
        assert_eq!(g.peer(ports[p(&f, s1, 3)]), Some((NodeIdx(1), 4)));
        assert_eq!(g.node_by_guid(Guid(0x20_0000)), Some(NodeIdx(2)));
        assert_eq!(g.port_by_guid(Guid(0x10_0002)), Some(ports[p(&f, h, 2)]));
        assert_eq!(g.links().count(), 2);
        let (back, ..) = g.reordered(&[nodes[s1], nodes[s2], nodes[h]]);
        assert_eq!(back, f);
    }
}
