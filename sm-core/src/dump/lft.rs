//! The forwarding-table model and its consistency check against a fabric.

use std::collections::HashSet;

use super::LidMap;
use crate::fabric::{Fabric, NodeIdx, NodeKind};
use sm_mad::{Guid, Lid};

/// The output port of a LID nobody routes: OpenSM's `OSM_NO_PATH`, the value it programs
/// into every unused LFT entry and leaves out of `opensm-lfts.dump`.
pub const NO_ROUTE: u8 = 255;

/// Entries in one LinearForwardingTable block (the unit one Set(LFT) SMP carries).
pub const BLOCK_LEN: usize = 64;

/// The linear forwarding tables of a subnet.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Lfts {
    /// One table per switch, in file (or producer) order.
    pub switches: Vec<SwitchLft>,
    /// What a file said each LID leads to (its destination column), sorted by LID, one
    /// per LID. Readers fill it; producers leave it empty. [`Lfts::check_against`] compares
    /// it with the fabric.
    pub destinations: Vec<Destination>,
}

/// One switch's linear forwarding table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SwitchLft {
    /// The switch's node GUID.
    pub guid: Guid,
    /// The switch's own LID (0 when unknown, e.g. `ibroute` addressed it by DR path).
    pub lid: Lid,
    /// NodeDescription, for the table headers.
    pub desc: String,
    /// Output port per LID, index = LID, from 0 to the top LID; [`NO_ROUTE`] = unset.
    pub ports: Vec<u8>,
}

/// What a dump said one LID leads to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Destination {
    pub lid: Lid,
    /// The port GUID owning the LID; `None` when the file said no node answers for it
    /// (`unknown node and type`).
    pub port: Option<Guid>,
    /// Node type, when the line named it.
    pub kind: Option<NodeKind>,
    /// Node description, when the line carried it.
    pub desc: Option<String>,
}

impl SwitchLft {
    /// An empty table (every entry [`NO_ROUTE`]) covering LIDs `0..=top`.
    pub fn new(guid: Guid, lid: Lid, desc: impl Into<String>, top: Lid) -> SwitchLft {
        SwitchLft {
            guid,
            lid,
            desc: desc.into(),
            ports: vec![NO_ROUTE; top.0 as usize + 1],
        }
    }

    /// An empty table for switch `n` of `f`, with its GUID, LID and description.
    pub fn for_switch(f: &Fabric, n: NodeIdx, top: Lid) -> SwitchLft {
        let node = f.node(n);
        let lid = f.port_of(n, 0).map(|p| f.port(p).lid).unwrap_or_default();
        SwitchLft::new(node.guid, lid, node.description.clone(), top)
    }

    /// The output port for `lid`; `None` when unset or beyond the table.
    pub fn get(&self, lid: Lid) -> Option<u8> {
        self.ports
            .get(lid.0 as usize)
            .copied()
            .filter(|&p| p != NO_ROUTE)
    }

    /// Routes `lid` to `port`, growing the table (with [`NO_ROUTE`]) when needed.
    pub fn set(&mut self, lid: Lid, port: u8) {
        let i = lid.0 as usize;
        if self.ports.len() <= i {
            self.ports.resize(i + 1, NO_ROUTE);
        }
        self.ports[i] = port;
    }

    /// The highest LID the table covers (SwitchInfo.LinearFDBTop; 0 for an empty table).
    pub fn top(&self) -> Lid {
        Lid(self.ports.len().saturating_sub(1).min(u16::MAX as usize) as u16)
    }

    /// The table in 64-entry blocks, block `n` covering LIDs `64n .. 64n + 63`; the last
    /// block stops at the top LID (see [`SwitchLft::block`] for a padded one).
    pub fn blocks(&self) -> std::slice::Chunks<'_, u8> {
        self.ports.chunks(BLOCK_LEN)
    }

    /// Block `n` as a Set(LinearForwardingTable) carries it: padded with [`NO_ROUTE`].
    pub fn block(&self, n: usize) -> [u8; BLOCK_LEN] {
        let mut b = [NO_ROUTE; BLOCK_LEN];
        if let Some(chunk) = self.blocks().nth(n) {
            b[..chunk.len()].copy_from_slice(chunk);
        }
        b
    }

    /// Every routed LID with its port, ascending.
    pub fn routes(&self) -> impl Iterator<Item = (Lid, u8)> + '_ {
        self.ports
            .iter()
            .enumerate()
            .filter(|(_, p)| **p != NO_ROUTE)
            .map(|(l, p)| (Lid(l as u16), *p))
    }
}

/// Why tables do not describe a fabric.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[non_exhaustive]
pub enum Mismatch {
    #[error("switch {guid}: no such node in the topology")]
    UnknownSwitch { guid: Guid },
    #[error("switch {guid}: the topology has this GUID as a {kind:?}, not a switch")]
    NotASwitch { guid: Guid, kind: NodeKind },
    #[error("switch {guid} has more than one table")]
    DuplicateSwitch { guid: Guid },
    #[error("switch {guid}: the table says LID {table}, the topology LID {fabric}")]
    SwitchLid { guid: Guid, table: Lid, fabric: Lid },
    #[error("switch {guid}: LID {lid} goes out port {port}, but the switch has {num_ports} ports")]
    PortOutOfRange {
        guid: Guid,
        lid: Lid,
        port: u8,
        num_ports: u8,
    },
    #[error(
        "LID {lid}: the table says {}, the topology {}",
        owner(table),
        owner(fabric)
    )]
    LidOwner {
        lid: Lid,
        table: Option<Guid>,
        fabric: Option<Guid>,
    },
}

fn owner(g: &Option<Guid>) -> String {
    match g {
        Some(g) => format!("port {g}"),
        None => "no port".into(),
    }
}

impl Lfts {
    /// No tables.
    pub fn new() -> Lfts {
        Lfts::default()
    }

    /// One empty table per switch of `f` (fabric order), each covering every LID the
    /// fabric uses.
    pub fn for_fabric(f: &Fabric) -> Lfts {
        let top = f
            .end_ports()
            .map(|p| {
                let port = f.port(p);
                let last = port.lid.0 as u32 + (1u32 << port.lmc.min(7)) - 1;
                last.min(u16::MAX as u32) as u16
            })
            .max()
            .unwrap_or(0);
        Lfts {
            switches: f
                .switches()
                .map(|n| SwitchLft::for_switch(f, n, Lid(top)))
                .collect(),
            destinations: Vec::new(),
        }
    }

    /// The table of the switch with node GUID `guid`.
    pub fn switch(&self, guid: Guid) -> Option<&SwitchLft> {
        self.switches.iter().find(|s| s.guid == guid)
    }

    /// Mutable table of the switch with node GUID `guid`.
    pub fn switch_mut(&mut self, guid: Guid) -> Option<&mut SwitchLft> {
        self.switches.iter_mut().find(|s| s.guid == guid)
    }

    /// What the file said `lid` leads to.
    pub fn destination(&self, lid: Lid) -> Option<&Destination> {
        self.destinations
            .binary_search_by_key(&lid, |d| d.lid)
            .ok()
            .map(|i| &self.destinations[i])
    }

    /// Orders the switches as OpenSM dumps them: its switch map is keyed by the GUID in
    /// network byte order compared as a host (little-endian) integer, so the lowest byte
    /// of the GUID sorts first.
    pub fn sort_opensm_order(&mut self) {
        self.switches.sort_by_key(|s| s.guid.0.swap_bytes());
    }

    /// Whether these tables describe `f`: every switch known and a switch, its LID the
    /// one the topology gives it, every port within its switch, and every LID whose owner
    /// the file named owned by that port in the topology. Switches of `f` without a table
    /// are fine (a dump may cover some switches only).
    pub fn check_against(&self, f: &Fabric) -> Result<(), Vec<Mismatch>> {
        let mut out = Vec::new();
        let mut seen: HashSet<Guid> = HashSet::new();
        for sw in &self.switches {
            if !seen.insert(sw.guid) {
                out.push(Mismatch::DuplicateSwitch { guid: sw.guid });
                continue;
            }
            let Some(n) = f.node_by_guid(sw.guid) else {
                out.push(Mismatch::UnknownSwitch { guid: sw.guid });
                continue;
            };
            let node = f.node(n);
            if node.kind != NodeKind::Switch {
                out.push(Mismatch::NotASwitch {
                    guid: sw.guid,
                    kind: node.kind,
                });
                continue;
            }
            let lid = f.port_of(n, 0).map(|p| f.port(p).lid).unwrap_or_default();
            if sw.lid.0 != 0 && sw.lid != lid {
                out.push(Mismatch::SwitchLid {
                    guid: sw.guid,
                    table: sw.lid,
                    fabric: lid,
                });
            }
            for (l, port) in sw.routes() {
                if port > node.num_ports {
                    out.push(Mismatch::PortOutOfRange {
                        guid: sw.guid,
                        lid: l,
                        port,
                        num_ports: node.num_ports,
                    });
                }
            }
        }
        let lids = LidMap::new(f);
        for d in &self.destinations {
            let fabric = lids.get(d.lid).map(|p| f.port(p).guid);
            if fabric != d.port {
                out.push(Mismatch::LidOwner {
                    lid: d.lid,
                    table: d.port,
                    fabric,
                });
            }
        }
        if out.is_empty() { Ok(()) } else { Err(out) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::NodeSpec;

    #[test]
    fn dense_table_and_blocks() {
        let mut t = SwitchLft::new(Guid(1), Lid(1), "s", Lid(70));
        assert_eq!(t.top(), Lid(70));
        assert_eq!(t.get(Lid(5)), None);
        t.set(Lid(5), 3);
        t.set(Lid(66), 0);
        assert_eq!(t.get(Lid(5)), Some(3));
        assert_eq!(t.get(Lid(1000)), None);
        let blocks: Vec<&[u8]> = t.blocks().collect();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].len(), 64);
        assert_eq!(blocks[1].len(), 7);
        assert_eq!(blocks[1][2], 0);
        let b = t.block(1);
        assert_eq!((b[2], b[7], b[63]), (0, NO_ROUTE, NO_ROUTE));
        assert_eq!(t.block(9), [NO_ROUTE; 64]);
        t.set(Lid(200), 1);
        assert_eq!(t.top(), Lid(200));
        assert_eq!(
            t.routes().collect::<Vec<_>>(),
            [(Lid(5), 3), (Lid(66), 0), (Lid(200), 1)]
        );
        assert_eq!(SwitchLft::new(Guid(1), Lid(1), "s", Lid(0)).top(), Lid(0));
    }

    #[test]
    fn opensm_orders_switches_by_the_low_guid_byte_first() {
        let mut l = Lfts::new();
        for g in [0x100, 0x200001, 0x200000, 0x0201] {
            l.switches.push(SwitchLft::new(Guid(g), Lid(0), "", Lid(0)));
        }
        l.sort_opensm_order();
        let order: Vec<u64> = l.switches.iter().map(|s| s.guid.0).collect();
        assert_eq!(order, [0x200000, 0x100, 0x200001, 0x0201]);
    }

    #[test]
    fn mismatches_are_reported() {
        let mut f = Fabric::new();
        let s = f
            .add_node(NodeSpec::new(NodeKind::Switch, Guid(0x20), "s", 4))
            .unwrap();
        let h = f
            .add_node(NodeSpec::new(NodeKind::Ca, Guid(0x10), "h", 1))
            .unwrap();
        let (s0, h1) = (f.port_of(s, 0).unwrap(), f.port_of(h, 1).unwrap());
        f.port_mut(s0).lid = Lid(1);
        f.port_mut(h1).lid = Lid(2);
        f.port_mut(h1).lmc = 1;
        let mut l = Lfts::for_fabric(&f);
        assert_eq!(l.switches.len(), 1);
        assert_eq!(l.switches[0].top(), Lid(3));
        l.switches[0].set(Lid(2), 1);
        l.destinations.push(Destination {
            lid: Lid(3),
            port: Some(Guid(0x11)),
            kind: None,
            desc: None,
        });
        assert_eq!(l.check_against(&f), Ok(()));

        l.switches[0].set(Lid(3), 9);
        l.switches[0].lid = Lid(7);
        l.switches
            .push(SwitchLft::new(Guid(0x99), Lid(0), "", Lid(0)));
        l.switches
            .push(SwitchLft::new(Guid(0x10), Lid(0), "", Lid(0)));
        l.switches
            .push(SwitchLft::new(Guid(0x20), Lid(0), "", Lid(0)));
        l.destinations.push(Destination {
            lid: Lid(4),
            port: Some(Guid(0x20)),
            kind: None,
            desc: None,
        });
        let errs = l.check_against(&f).unwrap_err();
        assert_eq!(
            errs,
            [
                Mismatch::SwitchLid {
                    guid: Guid(0x20),
                    table: Lid(7),
                    fabric: Lid(1)
                },
                Mismatch::PortOutOfRange {
                    guid: Guid(0x20),
                    lid: Lid(3),
                    port: 9,
                    num_ports: 4
                },
                Mismatch::UnknownSwitch { guid: Guid(0x99) },
                Mismatch::NotASwitch {
                    guid: Guid(0x10),
                    kind: NodeKind::Ca
                },
                Mismatch::DuplicateSwitch { guid: Guid(0x20) },
                Mismatch::LidOwner {
                    lid: Lid(4),
                    table: Some(Guid(0x20)),
                    fabric: None
                },
            ]
        );
        assert!(errs[5].to_string().contains("no port"), "{}", errs[5]);
    }
}
