//! Helpers shared by the validation and metrics tests: hand-built fabrics and tables.

#![allow(dead_code, unreachable_pub)]

use sm_core::fabric::{Fabric, NodeIdx, NodeKind, NodeSpec};
use sm_core::generate::{GenSpec, generate};
use sm_core::lid::LidStore;
use sm_mad::{Guid, Lid};
use sm_routing::{Routes, SwIdx, Topo};

/// A fabric under construction: switches and CAs by number.
pub struct Build {
    pub f: Fabric,
    pub sw: Vec<NodeIdx>,
    pub ca: Vec<NodeIdx>,
}

impl Build {
    pub fn new() -> Build {
        Build {
            f: Fabric::new(),
            sw: Vec::new(),
            ca: Vec::new(),
        }
    }

    /// Adds switch `S<n>` (GUID 0x200000 + n) with `ports` ports.
    pub fn switch(&mut self, ports: u8) -> usize {
        let n = self.sw.len();
        let g = Guid(0x20_0000 + n as u64);
        let idx = self
            .f
            .add_node(NodeSpec::new(NodeKind::Switch, g, format!("S{n}"), ports))
            .unwrap();
        self.sw.push(idx);
        n
    }

    /// Adds CA `H<n>` (node GUID 0x100000 + 0x10 n, port 1 GUID one more).
    pub fn ca(&mut self, ports: u8) -> usize {
        let n = self.ca.len();
        let g = Guid(0x10_0000 + 0x10 * n as u64);
        let idx = self
            .f
            .add_node(NodeSpec::new(NodeKind::Ca, g, format!("H{n}"), ports))
            .unwrap();
        self.ca.push(idx);
        n
    }

    /// Cables switch `a` port `pa` to switch `b` port `pb`.
    pub fn ss(&mut self, a: usize, pa: u8, b: usize, pb: u8) {
        let x = self.f.port_of(self.sw[a], pa).unwrap();
        let y = self.f.port_of(self.sw[b], pb).unwrap();
        self.f.connect(x, y).unwrap();
    }

    /// Cables CA `h` port 1 to switch `s` port `p`.
    pub fn hs(&mut self, h: usize, s: usize, p: u8) {
        let x = self.f.port_of(self.ca[h], 1).unwrap();
        let y = self.f.port_of(self.sw[s], p).unwrap();
        self.f.connect(x, y).unwrap();
    }

    /// Assigns LIDs and returns the fabric.
    pub fn done(mut self, lmc: u8) -> Fabric {
        LidStore::new().assign(&mut self.f, lmc).unwrap();
        self.f
    }
}

/// Base LID of CA `h` (port 1) of a fabric made by [`Build`].
pub fn ca_lid(f: &Fabric, h: usize) -> Lid {
    let p = f
        .port_by_guid(Guid(0x10_0000 + 0x10 * h as u64 + 1))
        .unwrap();
    f.port(p).lid
}

/// LID of switch `s` of a fabric made by [`Build`].
pub fn sw_lid(f: &Fabric, s: usize) -> Lid {
    let p = f.port_by_guid(Guid(0x20_0000 + s as u64)).unwrap();
    f.port(p).lid
}

/// Snapshot index of switch `s` of a fabric made by [`Build`].
pub fn sw(topo: &Topo<'_>, s: usize) -> SwIdx {
    let n = topo
        .fabric
        .node_by_guid(Guid(0x20_0000 + s as u64))
        .unwrap();
    topo.sw_of(n).unwrap()
}

/// Sets one entry of hand-made tables.
pub fn set(routes: &mut Routes, s: SwIdx, lid: Lid, port: u8) {
    let row = &mut routes.lft[s.idx()];
    if row.len() <= lid.0 as usize {
        row.resize(lid.0 as usize + 1, sm_core::dump::NO_ROUTE);
    }
    row[lid.0 as usize] = port;
}

/// A generated fabric with LIDs.
pub fn generated(spec: &GenSpec, lmc: u8) -> Fabric {
    let mut f = generate(spec).unwrap();
    LidStore::new().assign(&mut f, lmc).unwrap();
    f
}
