//! The routing snapshot: switches and their links in compressed sparse rows, and every LID
//! resolved to the switch port it leaves the fabric through. Built once per routing run from
//! the fabric; engines never touch the fabric's pointer-rich model on their hot paths.

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, PortIdx};
use sm_core::idx::{IdxVec, OptIdx};
use sm_mad::{Guid, Lid};

sm_core::dense_index!(
    /// Index of a switch in [`Topo::switches`].
    SwIdx
);

sm_core::dense_index!(
    /// Index of a destination (a port that owns LIDs) in [`Topo::dests`].
    DestIdx
);

/// A switch-to-switch link seen from one end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adj {
    /// The local output port.
    pub port: u8,
    /// The switch at the other end.
    pub peer: SwIdx,
    /// Its input port.
    pub peer_port: u8,
}

/// A port that owns LIDs, and where it hangs off the switch fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dest {
    pub port: PortIdx,
    pub guid: Guid,
    pub base_lid: Lid,
    pub lmc: u8,
    pub kind: NodeKind,
    /// The switch traffic to this port leaves through (the switch itself for port 0).
    pub sw: SwIdx,
    /// The port of `sw` that leads to it; 0 for a switch's own LID.
    pub sw_port: u8,
}

impl Dest {
    /// The LIDs of the port.
    pub fn lids(&self) -> impl Iterator<Item = Lid> + use<> {
        let base = self.base_lid.0;
        (0..1u16 << self.lmc).map(move |i| Lid(base + i))
    }
}

/// Why a snapshot could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopoError {
    #[error("the fabric has no switches")]
    NoSwitches,
    #[error("port {guid} (port {port}) has no LID: assign LIDs first")]
    NoLid { guid: Guid, port: u8 },
    #[error("LID {lid} is held by both {a} and {b}")]
    LidClash { lid: Lid, a: Guid, b: Guid },
    #[error("LID range {base}+{len} of {guid} overruns the unicast space")]
    LidRange { guid: Guid, base: Lid, len: u16 },
}

/// The snapshot.
#[derive(Debug, Clone)]
pub struct Topo<'f> {
    pub fabric: &'f Fabric,
    /// Switch nodes, indexed by [`SwIdx`] (fabric order).
    pub switches: Vec<NodeIdx>,
    sw_of: IdxVec<NodeIdx, OptIdx<SwIdx>>,
    adj_off: Vec<u32>,
    adj: Vec<Adj>,
    /// Ports that own LIDs and hang off a switch (CAs cabled only to CAs are left out, and
    /// so are unlinked CA ports without a LID, as down ports appear in discovered fabrics).
    pub dests: IdxVec<DestIdx, Dest>,
    /// The destination holding each LID (indexed by LID; none for a LID nobody holds).
    pub lid_dest: Vec<OptIdx<DestIdx>>,
    /// End ports with LIDs but no switch to reach them through.
    pub isolated: Vec<PortIdx>,
}

impl<'f> Topo<'f> {
    /// Builds the snapshot; LIDs must be assigned.
    pub fn new(fabric: &'f Fabric) -> Result<Topo<'f>, TopoError> {
        let mut switches = Vec::new();
        let mut sw_of = IdxVec::filled(OptIdx::NONE, fabric.nodes().len());
        for n in fabric.switches() {
            sw_of[n] = OptIdx::some(SwIdx(switches.len() as u32));
            switches.push(n);
        }
        if switches.is_empty() {
            return Err(TopoError::NoSwitches);
        }
        let mut adj_off = Vec::with_capacity(switches.len() + 1);
        let mut adj = Vec::new();
        for &n in &switches {
            adj_off.push(adj.len() as u32);
            for p in fabric.node_ports(n) {
                let port = fabric.port(p);
                let Some(r) = port.remote else { continue };
                let rp = fabric.port(r);
                if let Some(peer) = sw_of[rp.node].get() {
                    adj.push(Adj {
                        port: port.num,
                        peer,
                        peer_port: rp.num,
                    });
                }
            }
        }
        adj_off.push(adj.len() as u32);

        let mut dests = IdxVec::new();
        let mut isolated = Vec::new();
        let mut lid_dest: Vec<OptIdx<DestIdx>> = Vec::new();
        for p in fabric.end_ports() {
            let port = fabric.port(p);
            let node = fabric.node(port.node);
            if node.kind != NodeKind::Switch && port.remote.is_none() && port.lid.0 == 0 {
                // A CA port that is down: nothing reaches it, and no SM gives it a LID.
                continue;
            }
            if !port.lid.is_unicast() {
                return Err(TopoError::NoLid {
                    guid: port.guid,
                    port: port.num,
                });
            }
            let at = if node.kind == NodeKind::Switch {
                sw_of[port.node].get().map(|s| (s, 0))
            } else {
                port.remote.and_then(|r| {
                    let rp = fabric.port(r);
                    Some((sw_of[rp.node].get()?, rp.num))
                })
            };
            let Some((sw, sw_port)) = at else {
                isolated.push(p);
                continue;
            };
            let lmc = if node.kind == NodeKind::Switch {
                0
            } else {
                port.lmc.min(7)
            };
            let len = 1u16 << lmc;
            let last = port.lid.0 as u32 + len as u32 - 1;
            if last > Lid::MAX_UNICAST.0 as u32 {
                return Err(TopoError::LidRange {
                    guid: port.guid,
                    base: port.lid,
                    len,
                });
            }
            if lid_dest.len() <= last as usize {
                lid_dest.resize(last as usize + 1, OptIdx::NONE);
            }
            let di = DestIdx(dests.len() as u32);
            for l in port.lid.0..=last as u16 {
                let slot = &mut lid_dest[l as usize];
                if let Some(other) = slot.get() {
                    let other: &Dest = &dests[other];
                    return Err(TopoError::LidClash {
                        lid: Lid(l),
                        a: other.guid,
                        b: port.guid,
                    });
                }
                *slot = OptIdx::some(di);
            }
            dests.push(Dest {
                port: p,
                guid: port.guid,
                base_lid: port.lid,
                lmc,
                kind: node.kind,
                sw,
                sw_port,
            });
        }
        Ok(Topo {
            fabric,
            switches,
            sw_of,
            adj_off,
            adj,
            dests,
            lid_dest,
            isolated,
        })
    }

    /// Number of switches.
    pub fn num_switches(&self) -> usize {
        self.switches.len()
    }

    /// The switch index of a node, if it is a switch.
    pub fn sw_of(&self, n: NodeIdx) -> Option<SwIdx> {
        self.sw_of.get(n)?.get()
    }

    /// The switch-to-switch links of `s`, in port order.
    #[inline]
    pub fn adj(&self, s: SwIdx) -> &[Adj] {
        let (a, b) = (self.adj_off[s.idx()], self.adj_off[s.idx() + 1]);
        &self.adj[a as usize..b as usize]
    }

    /// Number of ports of switch `s` (port 0 not counted).
    pub fn radix(&self, s: SwIdx) -> u8 {
        self.fabric.node(self.switches[s.idx()]).num_ports
    }

    /// The node GUID of switch `s`.
    pub fn guid(&self, s: SwIdx) -> Guid {
        self.fabric.node(self.switches[s.idx()]).guid
    }

    /// The switches among `guids`, in switch order (GUIDs of no switch here are left out).
    pub fn switches_named(&self, guids: &[Guid]) -> Vec<SwIdx> {
        let mut want = guids.to_vec();
        want.sort_unstable();
        (0..self.num_switches() as u32)
            .map(SwIdx)
            .filter(|&s| want.binary_search(&self.guid(s)).is_ok())
            .collect()
    }

    /// The highest LID any port holds (0 when none).
    pub fn max_lid(&self) -> Lid {
        Lid(self.lid_dest.len().saturating_sub(1) as u16)
    }

    /// The destination owning `lid`.
    pub fn dest_of(&self, lid: Lid) -> Option<&Dest> {
        Some(&self.dests[self.lid_dest.get(lid.0 as usize)?.get()?])
    }

    /// Switch-to-switch hop counts from every switch to `t`, by breadth-first search
    /// (`u8::MAX` = unreachable). `out` is resized to the switch count.
    pub fn bfs_to(&self, t: SwIdx, out: &mut Vec<u8>, queue: &mut Vec<SwIdx>) {
        out.clear();
        out.resize(self.num_switches(), u8::MAX);
        queue.clear();
        out[t.idx()] = 0;
        queue.push(t);
        let mut head = 0;
        while head < queue.len() {
            let s = queue[head];
            head += 1;
            let d = out[s.idx()];
            if d == u8::MAX - 1 {
                continue;
            }
            for a in self.adj(s) {
                let slot = &mut out[a.peer.idx()];
                if *slot == u8::MAX {
                    *slot = d + 1;
                    queue.push(a.peer);
                }
            }
        }
    }

    /// The full switch-to-switch distance matrix, row `t` = distances to switch `t`.
    pub fn hop_matrix(&self) -> HopMatrix {
        let n = self.num_switches();
        let mut m = vec![u8::MAX; n * n];
        crate::par::chunks(
            &mut m,
            n,
            || (Vec::new(), Vec::new()),
            |(row, queue), t, chunk| {
                self.bfs_to(SwIdx(t as u32), row, queue);
                chunk.copy_from_slice(row);
            },
        );
        HopMatrix { n, m }
    }
}

/// Switch-to-switch hop counts, `u8::MAX` = unreachable.
#[derive(Debug, Clone)]
pub struct HopMatrix {
    n: usize,
    m: Vec<u8>,
}

impl HopMatrix {
    /// Hops from `s` to `t`.
    #[inline]
    pub fn get(&self, s: SwIdx, t: SwIdx) -> u8 {
        self.m[t.idx() * self.n + s.idx()]
    }

    /// Distances of every switch to `t`.
    #[inline]
    pub fn to(&self, t: SwIdx) -> &[u8] {
        &self.m[t.idx() * self.n..(t.idx() + 1) * self.n]
    }
}
